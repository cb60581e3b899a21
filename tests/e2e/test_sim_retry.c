/*
 * test_sim_retry.c BACKEND PAYONCE — an outage longer than five minutes of
 * channel time, recovered through the channels' own retries, on each
 * channel.
 *
 * The simulator delivers a payment on WeChat Pay, Alipay and Stripe to a
 * gateway that is down; it comes back after 330 s of channel time. Time
 * runs 100 times faster, for the simulator (the schedule and the time it
 * signs with) and for the gateway (the time it checks timestamps against)
 * alike, through an injected clock. The retry that gets through is sent
 * more than 300 s after the first attempt (WeChat at +840 s, Stripe at
 * +360 s, Alipay at +840 s): it is credited only because the simulator signs
 * every attempt when it sends it, as the channels do — resending the first
 * attempt's bytes, each would be refused stale_timestamp (WeChat, Stripe).
 * Every payment is credited exactly once; the ledger verifies.
 */
#include "../../src/http/http.h"
#include "../../src/sim/sim.h"
#include "../support/simenv.h"
#include "../support/testutil.h"

#include <curl/curl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define FACTOR 100.0
#define DOWN_S 330 /* channel seconds the gateway stays down */

static char dir[256], url[T_URL_MAX], bin[PATH_MAX];
static const char *backend;
static unsigned char master[32];
static struct po_sim_identity id;
static int64_t t0;
static double mono0;

static void die(const char *m)
{
    fprintf(stderr, "test_sim_retry: %s\n", m);
    exit(1);
}

#define run(...) t_cli(dir, bin, url, NULL, 0, __VA_ARGS__)

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Channel time: the wall clock at the start, then FACTOR times faster. */
static int64_t channel_clock(void *ctx)
{
    (void)ctx;
    return t0 + (int64_t)((mono() - mono0) * FACTOR);
}

struct lane {
    const char *channel, *no;
    char txn[64], notify_url[128];
    struct po_sim_payment pay;
    struct po_sim_notice notice;
    struct po_sim_delivery d;
    struct po_sim_result r;
};

static void *lane_main(void *arg)
{
    struct lane *l = arg;
    po_sim_deliver(&l->d, &l->r);
    return NULL;
}

static int64_t q1(const char *sql, const char *arg)
{
    return t_count_url(url, sql, arg);
}

/* A TCP socket bound to 127.0.0.1:port and not listening, or -1. */
static int hold_port(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

/* Channel seconds from the first attempt to attempt k (1-based). */
static int offset_of(const char *channel, int k)
{
    int n = 0, sum = 0;
    const int *sched = po_sim_schedule(channel, &n);
    for (int i = 0; i < k - 1 && i < n; i++)
        sum += sched[i];
    return sum;
}

/* The one case: the gateway down for DOWN_S seconds of channel time while
 * each channel's simulator goes on resending on its own schedule; back on
 * the same port, every payment acked and credited once. */
static void down_then_back(void **state)
{
    (void)state;
    t0 = (int64_t)time(NULL);
    mono0 = mono();
    struct po_gateway_cfg gc;
    t_gateway_cfg(&gc, url, master);
    struct po_server_cfg scfg = {.clock = channel_clock};
    /* Down: the port is held by a socket bound and not listening (a
     * connection to it is refused), so that no other process — the same
     * test on the other store, run beside it, once did — is given it while
     * the gateway is away and answers the lanes' attempts. */
    int hold = -1;
    unsigned port = 0;
    for (int i = 0; i < 20 && hold < 0; i++) {
        struct t_gateway *g0 = t_gateway_start(&gc, &scfg);
        port = g0->port;
        t_gateway_stop(g0);
        hold = hold_port(port);
    }
    if (hold < 0)
        die("no port could be held");
    struct lane lanes[3] = {{.channel = "wechatpay", .no = "RETRY-W"},
                            {.channel = "alipay", .no = "RETRY-A"},
                            {.channel = "stripe", .no = "RETRY-S"}};
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        run("order create --tenant t1 --merchant m1 --out-trade-no %s --amount 100 --channel %s",
            lanes[i].no, lanes[i].channel);
        po_sim_new_txn(lanes[i].channel, lanes[i].txn, sizeof lanes[i].txn);
    }
    /* The outage and the lanes' schedules start together: the orders are
     * made first (a CLI run each, a second or more on a loaded machine,
     * once ate the 90 s of channel time between Alipay's second attempt
     * and the gateway's return, so that it was answered at +240 s). */
    t0 = (int64_t)time(NULL);
    mono0 = mono();
    for (int i = 0; i < 3; i++) {
        struct lane *l = &lanes[i];
        snprintf(l->notify_url, sizeof l->notify_url, "http://127.0.0.1:%u/notify/%s/t1", port,
                 l->channel);
        l->pay = (struct po_sim_payment){l->channel, l->no, l->txn, 100, "CNY", t0};
        l->notice = (struct po_sim_notice){&id, &l->pay, NULL};
        /* One attempt more than it takes to get through (WeChat's sixth,
         * Alipay's and Stripe's third), so that a simulator resending
         * stale bytes fails in seconds, not hours of compressed schedule. */
        l->d = (struct po_sim_delivery){.url = l->notify_url,
                                        .channel = l->channel,
                                        .notice = &l->notice,
                                        .time_factor = FACTOR,
                                        .deadline_ms = 3000,
                                        .max_attempts = i == 0 ? 7 : 4,
                                        .label = l->no,
                                        .log = stdout,
                                        .clock = channel_clock};
        if (pthread_create(&th[i], NULL, lane_main, l))
            die("pthread_create");
    }
    /* Back after DOWN_S seconds of channel time, on the same port. */
    while (channel_clock(NULL) < t0 + DOWN_S)
        usleep(10000);
    char listen[32];
    snprintf(listen, sizeof listen, "127.0.0.1:%u", port);
    gc.listen = listen;
    close(hold);
    struct t_gateway *gw = t_gateway_start(&gc, &scfg);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    t_gateway_stop(gw);
    for (int i = 0; i < 3; i++) {
        struct lane *l = &lanes[i];
        int after = offset_of(l->channel, l->r.attempts);
        T_CHECK(l->r.acked, "%s: not acked after %d attempts (last HTTP %ld %s)", l->channel,
                l->r.attempts, l->r.last_status, l->r.last_body);
        T_CHECK(after > 300, "%s: acked at +%d s of channel time: not past the 5-minute window",
                l->channel, after);
        T_CHECK(q1("SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ? AND status = 'PAID'",
                   l->no) == 1,
                "%s: order not paid", l->channel);
        T_CHECK(q1("SELECT COUNT(*) FROM journal WHERE out_trade_no = ? AND kind = 'PAY'", l->no) ==
                    1,
                "%s: not exactly one payment journal", l->channel);
        printf("# sim-retry[%s] %s: down for %d s of channel time; acked on attempt %d at +%d s\n",
               backend, l->channel, DOWN_S, l->r.attempts, after);
    }
}

int main(int argc, char **argv)
{
    backend = t_backend(argc, argv);
    if (argc < 3 || !realpath(argv[2], bin))
        die("usage: test_sim_retry BACKEND PAYONCE");
    po_log_set_level(PO_LOG_ERROR);
    t_env_create("simretry", dir, sizeof dir, master, &id);
    t_db_create(backend, url, sizeof url);
    run("tenant add --tenant t1");
    run("merchant add --tenant t1 --merchant m1");
    run("channel set --tenant t1 --channel wechatpay --mchid %s --appid %s --apiv3-key-file"
        " sim/apiv3.key --platform-cert-file sim/wechatpay_platform_cert.pem",
        id.mchid, id.appid);
    run("channel set --tenant t1 --channel alipay --app-id %s --seller-id %s"
        " --alipay-public-key-file sim/alipay_public_key.pem",
        id.app_id, id.seller_id);
    run("channel set --tenant t1 --channel stripe --webhook-secret-file sim/stripe_webhook_secret");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char name[64];
    snprintf(name, sizeof name, "sim-retry[%s]", backend);
    const struct CMUnitTest tests[] = {cmocka_unit_test(down_then_back)};
    int rc = T_RUN_GROUP(name, tests, NULL, NULL);
    po_sim_identity_free(&id);
    curl_global_cleanup();
    return t_env_finish(dir, url, name) || rc;
}
