/*
 * test_gateway.c BACKEND PAYONCE — the gateway's front and its caches, on
 * loopback, with an in-process gateway and a `payonce serve` child on the
 * same database:
 *   rotation  a tenant's WeChat Pay account is replaced (`channel set`: new
 *             APIv3 key, new platform certificate) while both gateways have
 *             the old one cached: the very next callback made with the new
 *             keys is credited by each, and one made with the old keys is
 *             refused by each (the committer's guard sees the new version)
 *   idle      thousands of idle keep-alive connections stay open while
 *             callbacks are acked and credited; they cost no thread each
 *             (the process's thread count does not grow with them) and every
 *             one of them is still served afterwards
 */
#include "../../src/http/http.h"
#include "../../src/sim/sim.h"
#include "../support/simenv.h"
#include "../support/testutil.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IDLE_CONNS 2000

static char dir[256], url[T_URL_MAX], bin[PATH_MAX];
static unsigned gw_port, child_port;

static void die(const char *m)
{
    fprintf(stderr, "test_gateway: %s\n", m);
    exit(1);
}

#define run(...) t_cli(dir, bin, url, NULL, 0, __VA_ARGS__)

static unsigned healthz(int fd)
{
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    return t_exchange(fd, req, sizeof req - 1, NULL, 0);
}

static unsigned deliver(unsigned port, const struct po_sim_identity *id, const char *no,
                        int64_t amount)
{
    char txn[64];
    po_sim_new_txn("wechatpay", txn, sizeof txn);
    return t_sim_pay(port, id, "t1", no, txn, amount);
}

static int64_t q1(const char *sql, const char *arg)
{
    return t_count_url(url, sql, arg);
}

static bool paid(const char *no)
{
    return q1("SELECT COUNT(*) FROM pay_order WHERE tenant_id = 't1' AND out_trade_no = ? AND"
              " status = 'PAID'",
              no) == 1;
}

static void order(const char *no)
{
    run("order create --tenant t1 --merchant m1 --out-trade-no %s --amount 100", no);
}

static void set_account(const struct po_sim_identity *id, const char *simdir)
{
    run("channel set --tenant t1 --channel wechatpay --mchid %s --appid %s --apiv3-key-file"
        " %s/apiv3.key --platform-cert-file %s/wechatpay_platform_cert.pem",
        id->mchid, id->appid, simdir, simdir);
}

/* ---- the tests ---- */

/* One callback made with id's keys to the gateway on port: credited
 * (expect_credit) or refused 4xx with nothing credited. */
static void expect(unsigned port, const char *gw, const struct po_sim_identity *id,
                   const char *keys, bool expect_credit, const char *why)
{
    static int seq;
    char no[32];
    snprintf(no, sizeof no, "ROT-%d", ++seq);
    order(no);
    unsigned st = deliver(port, id, no, 100);
    if (expect_credit)
        T_CHECK(st == 204 && paid(no), "%s: %s keys, %s: not credited (%u)", gw, keys, why, st);
    else
        T_CHECK(st >= 400 && st < 500 && !paid(no), "%s: %s keys, %s: not refused (%u)", gw, keys,
                why, st);
}

/* The simulator's two identities: the account's first keys and its new. */
static struct po_sim_identity id1, id2;

static void test_rotation(void **state)
{
    (void)state;
    const struct po_sim_identity *first = &id1, *second = &id2;
    const char *a = "this process", *b = "second gateway";
    /* Both gateways cache the first account. */
    expect(gw_port, a, first, "current", true, "before any change");
    expect(child_port, b, first, "current", true, "before any change");
    set_account(second, "sim2");
    /* Here the old keys come first: the cached account still verifies
     * them, and only the committer's guard can refuse them. */
    expect(gw_port, a, first, "replaced", false, "first callback after the change");
    expect(gw_port, a, second, "new", true, "next callback");
    /* There the new keys come first: the cached account fails them, the
     * gateway finds the new version and verifies again. */
    expect(child_port, b, second, "new", true, "first callback after the change");
    expect(child_port, b, first, "replaced", false, "next callback");
    /* And back, the other way round in each process. */
    set_account(first, "sim");
    expect(gw_port, a, first, "new", true, "first callback after rotating back");
    expect(gw_port, a, second, "replaced", false, "next callback");
    expect(child_port, b, second, "replaced", false, "first callback after rotating back");
    expect(child_port, b, first, "new", true, "next callback");
}

static int threads_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

static void test_idle(void **state)
{
    (void)state;
    const struct po_sim_identity *id = &id1;
    static int fds[IDLE_CONNS];
    int before = threads_now(), served = 0;
    for (int i = 0; i < IDLE_CONNS; i++) {
        fds[i] = t_dial(gw_port);
        served += healthz(fds[i]) == 200; /* now idle, kept alive */
    }
    T_CHECK(served == IDLE_CONNS, "%d of %d connections served before going idle", served,
            IDLE_CONNS);
    int during = threads_now();
    T_CHECK(during - before < 8,
            "threads grew from %d to %d with %d idle connections (one per connection?)", before,
            during, IDLE_CONNS);
    /* Callbacks while they are all open: acked and credited. */
    enum { N = 20 };
    int acked = 0, credited = 0;
    struct timespec a, b;
    double worst = 0;
    for (int i = 0; i < N; i++) {
        char no[32];
        snprintf(no, sizeof no, "IDLE-%d", i);
        order(no);
        clock_gettime(CLOCK_MONOTONIC, &a);
        acked += deliver(gw_port, id, no, 100) == 204;
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
        worst = ms > worst ? ms : worst;
        credited += paid(no);
    }
    T_CHECK(acked == N && credited == N, "with %d idle connections: %d of %d acked, %d credited",
            IDLE_CONNS, acked, N, credited);
    /* Every idle connection is still open and served. */
    served = 0;
    for (int i = 0; i < IDLE_CONNS; i++) {
        served += healthz(fds[i]) == 200;
        close(fds[i]);
    }
    T_CHECK(served == IDLE_CONNS, "%d of %d idle connections still served", served, IDLE_CONNS);
    t_figure("# gateway: %d idle keep-alive connections cost %d threads; %d callbacks acked and"
             " credited meanwhile (slowest ack %.1f ms)\n",
             IDLE_CONNS, during - before, N, worst);
}

int main(int argc, char **argv)
{
    const char *backend = t_backend(argc, argv);
    if (argc < 3 || !realpath(argv[2], bin))
        die("usage: test_gateway BACKEND PAYONCE");
    po_log_set_level(PO_LOG_ERROR);
    signal(SIGPIPE, SIG_IGN);
    unsigned char master[32];
    char sd2[300], err[PO_ERRBUF_SIZE] = "";
    t_env_create("gateway", dir, sizeof dir, master, &id1);
    snprintf(sd2, sizeof sd2, "%s/sim2", dir);
    if (po_sim_identity_generate(sd2, "cert", err, sizeof err) ||
        po_sim_identity_load(sd2, &id2, err, sizeof err))
        die(err);
    t_db_create(backend, url, sizeof url);
    run("tenant add --tenant t1");
    run("merchant add --tenant t1 --merchant m1");
    set_account(&id1, "sim");
    /* Every connection of this test comes from 127.0.0.1: the per-address
     * cap is off here (slow_clients tests it). */
    struct po_gateway_cfg gc;
    t_gateway_cfg(&gc, url, master);
    gc.max_connections_per_ip = 0;
    /* The idle connections must outlive the 20 callbacks made meanwhile
     * (each with a CLI order and a check): on a loaded machine that took
     * longer than the default 10 s idle timeout, which closed them all
     * (http_limits tests that timeout) */
    gc.request_timeout_s = 300;
    struct t_gateway *gw = t_gateway_start(&gc, NULL);
    gw_port = gw->port;
    pid_t child = t_serve(dir, bin, url, NULL, &child_port);
    char name[64];
    snprintf(name, sizeof name, "gateway[%s]", backend);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_rotation),
                                       cmocka_unit_test(test_idle)};
    int rc = T_RUN_GROUP(name, tests, NULL, NULL);
    t_serve_stop(child);
    t_gateway_stop(gw);
    po_sim_identity_free(&id1);
    po_sim_identity_free(&id2);
    return t_env_finish(dir, url, name) || rc;
}
