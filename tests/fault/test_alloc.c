/*
 * test_alloc.c BACKEND PAYONCE — allocation failures on the callback path
 * and the tenant API path (issue 11): an in-process gateway whose k-th
 * allocation fails, for every k from 0 until a request completes without
 * reaching k.
 *
 * Every allocation of the process goes through this file's malloc family
 * (glibc lets a program replace it), so the failing one may be payonce's
 * own, jansson's, OpenSSL's, SQLite's, libpq's or libmicrohttpd's, on any
 * of the gateway's threads (HTTP, worker, committer). The test's own thread
 * (the client, the checks) is exempt. After each request:
 *   - the process is alive (no crash);
 *   - a 2xx answer was given only for a committed effect (the order is
 *     PAID / the API order exists), and an effect is all or nothing: the
 *     ledger verifies, journal and processed record are both there or
 *     neither, never two;
 *   - the same request again, with nothing failing, is answered 2xx and
 *     its effect exists exactly once;
 *   - the answer is never a 4xx: a failure of the gateway is answered
 *     retry (5xx) or not at all, never blamed on the sender;
 *   - after the sweeps, with the gateway stopped, the process holds exactly
 *     as many allocations as before them (nothing leaked on any error path;
 *     --from K --to K narrows a leak down to the requests that made it).
 * The answers are counted by kind (2xx, 5xx, none) and printed.
 *
 * Sanitizer builds replace malloc themselves: this program is built and run
 * only in a build without them (scripts/test.sh runs it in the release
 * build).
 */
#include "../../src/http/http.h"
#include "../../src/sim/sim.h"
#include "../support/simenv.h"
#include "../support/testutil.h"

#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the failing allocator ---- */

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);
void __libc_free(void *p);
void *memalign(size_t align, size_t n); /* <malloc.h> */

static atomic_bool armed;
static atomic_long counted, fail_k = -1, live;
static _Thread_local bool exempt;

static bool inject(void)
{
    if (exempt || !atomic_load_explicit(&armed, memory_order_relaxed))
        return false;
    return atomic_fetch_add(&counted, 1) == atomic_load(&fail_k);
}

static void *track(void *p)
{
    if (p)
        atomic_fetch_add_explicit(&live, 1, memory_order_relaxed);
    return p;
}

void *malloc(size_t n)
{
    if (inject()) {
        errno = ENOMEM;
        return NULL;
    }
    return track(__libc_malloc(n));
}

void *calloc(size_t n, size_t size)
{
    if (inject()) {
        errno = ENOMEM;
        return NULL;
    }
    return track(__libc_calloc(n, size));
}

void *realloc(void *p, size_t n)
{
    if (inject()) {
        errno = ENOMEM;
        return NULL;
    }
    void *q = __libc_realloc(p, n);
    if (!p)
        track(q);
    else if (n == 0 && !q) /* glibc: realloc(p, 0) frees p */
        atomic_fetch_sub_explicit(&live, 1, memory_order_relaxed);
    return q;
}

void free(void *p)
{
    if (p)
        atomic_fetch_sub_explicit(&live, 1, memory_order_relaxed);
    __libc_free(p);
}

void *memalign(size_t align, size_t n)
{
    if (inject()) {
        errno = ENOMEM;
        return NULL;
    }
    return track(__libc_memalign(align, n));
}

void *aligned_alloc(size_t align, size_t n)
{
    return memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    void *p = memalign(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

/* ---- the setting ---- */

static char dir[256], url[T_URL_MAX], bin[PATH_MAX], apikey[128];
static unsigned port;
/* "sqlite" or "postgres" (argv[1]); the master key and the simulator's
 * identity main made. */
static const char *backend;
static unsigned char master[32];
static struct po_sim_identity sim_id;
static struct po_store *db; /* the test's own connection */

static void die(const char *m)
{
    fprintf(stderr, "test_alloc: %s\n", m);
    exit(1);
}

static long send_req(const char *path, const char *const *headers, const char *body, size_t len)
{
    char u[256], buf[4096];
    (void)snprintf(u, sizeof u, "http://127.0.0.1:%u%s", port, path);
    struct t_http_req q = {.url = u,
                           .headers = headers,
                           .body = body,
                           .body_len = len,
                           .timeout_s = 20,
                           .fresh_connection = true};
    return t_http(&q, buf, sizeof buf, NULL);
}

/* The channel's payment callback for no, signed now (as the channel's
 * every retry is). */
static long deliver(const struct po_sim_identity *id, const char *channel, const char *no,
                    const char *txn)
{
    struct po_sim_payment p = {channel, no, txn, 100, "CNY"};
    struct po_sim_request r;
    memset(&r, 0, sizeof r);
    if (po_sim_payment_request(id, &p, (int64_t)time(NULL), &r))
        die("sim payment");
    char path[64];
    (void)snprintf(path, sizeof path, "/notify/%s/t1", channel);
    struct t_sim_lines l;
    t_sim_lines(&r, &l);
    long st = send_req(path, l.h, r.body, r.body_len);
    po_sim_request_free(&r);
    return st;
}

static long api_order(const char *no)
{
    char auth[200], idem[120], body[200];
    (void)snprintf(auth, sizeof auth, "Authorization: Bearer %s", apikey);
    (void)snprintf(idem, sizeof idem, "Idempotency-Key: idem-%s", no);
    int n = snprintf(body, sizeof body,
                     "{\"merchant\":\"m1\",\"out_trade_no\":\"%s\",\"amount\":100,"
                     "\"currency\":\"CNY\"}",
                     no);
    const char *h[] = {"Content-Type: application/json", auth, idem, "Expect:", NULL};
    return send_req("/v1/orders", h, body, (size_t)n);
}

static int64_t count1(const char *sql, const char *arg)
{
    struct po_param p[] = {PO_TEXT(arg)};
    return t_count(db, sql, p, 1);
}

/* The gateway is idle again when its allocations stop changing; the
 * number held then. */
static long settled_live(void)
{
    long prev = atomic_load(&live);
    for (int i = 0; i < 200; i++) {
        usleep(10000);
        long now = atomic_load(&live);
        if (now == prev && i >= 2)
            return now;
        prev = now;
    }
    return prev;
}

struct sweep {
    const char *name;
    int requests, retry5xx, refused4xx, unanswered, ok2xx;
};

/* The k swept (--from K --to K narrow it down, e.g. to find a leak). */
static long k_from = 0, k_to = LONG_MAX;

/* Counts the answer; a 4xx is a failure: the gateway's own shortage must
 * never be blamed on the sender (401 bad_signature, 400 malformed_body). */
static void tally(struct sweep *s, long k, long st)
{
    T_CHECK(st < 400 || st >= 500, "%s k=%ld: answered %ld: a refusal for a lack of memory",
            s->name, k, st);
    s->requests++;
    if (st >= 200 && st < 300)
        s->ok2xx++;
    else if (st >= 500)
        s->retry5xx++;
    else if (st >= 400)
        s->refused4xx++;
    else
        s->unanswered++;
}

/* One request with the k-th allocation failing; the allocations it made. */
static long armed_request(long k, long (*req)(const void *ctx), const void *ctx, long *st)
{
    atomic_store(&counted, 0);
    atomic_store(&fail_k, k);
    atomic_store(&armed, true);
    *st = req(ctx);
    /* What the gateway still does after answering (closing the connection,
     * logging) is inside the sweep too. */
    usleep(2000);
    atomic_store(&armed, false);
    return atomic_load(&counted);
}

struct cb_ctx {
    const struct po_sim_identity *id;
    const char *channel, *no, *txn;
};

static long cb_req(const void *ctx)
{
    const struct cb_ctx *c = ctx;
    return deliver(c->id, c->channel, c->no, c->txn);
}

static long api_req(const void *ctx)
{
    return api_order(ctx);
}

static void sweep_callbacks(const struct po_sim_identity *id, struct sweep *s)
{
    const char *ch = s->name;
    for (long k = k_from; k <= k_to; k++) {
        char no[48], txn[64];
        (void)snprintf(no, sizeof no, "ALLOC-%s-%ld", ch, k);
        po_sim_new_txn(ch, txn, sizeof txn);
        t_seed_order(db, no, 100);
        long st = 0;
        struct cb_ctx c = {id, ch, no, txn};
        long made = armed_request(k, cb_req, &c, &st);
        tally(s, k, st);
        int64_t paid = count1("SELECT COUNT(*) FROM pay_order WHERE tenant_id = 't1' AND"
                              " out_trade_no = ? AND status = 'PAID'",
                              no),
                journals = count1("SELECT COUNT(*) FROM journal WHERE tenant_id = 't1' AND"
                                  " out_trade_no = ?",
                                  no);
        T_CHECK(st < 200 || st >= 300 || paid == 1, "%s k=%ld: answered %ld, not credited", ch, k,
                st);
        int64_t processed = count1("SELECT COUNT(*) FROM notify_log WHERE tenant_id = 't1' AND"
                                   " out_trade_no = ?",
                                   no);
        T_CHECK(journals == paid && processed == paid,
                "%s k=%ld: %lld journals, %lld processed records for a %s order", ch, k,
                (long long)journals, (long long)processed, paid ? "paid" : "unpaid");
        /* The channel's retry, nothing failing: credited, exactly once. */
        long again = deliver(id, ch, no, txn);
        journals = count1("SELECT COUNT(*) FROM journal WHERE tenant_id = 't1' AND"
                          " out_trade_no = ?",
                          no);
        T_CHECK(again >= 200 && again < 300 && journals == 1,
                "%s k=%ld: retry answered %ld, %lld journals", ch, k, again, (long long)journals);
        if (made <= k) /* the request completed without reaching k */
            break;
    }
}

static void sweep_api(struct sweep *s)
{
    for (long k = k_from; k <= k_to; k++) {
        char no[32];
        (void)snprintf(no, sizeof no, "API-%ld", k);
        long st = 0;
        long made = armed_request(k, api_req, no, &st);
        tally(s, k, st);
        int64_t orders = count1("SELECT COUNT(*) FROM pay_order WHERE tenant_id = 't1' AND"
                                " out_trade_no = ?",
                                no);
        T_CHECK(st < 200 || st >= 300 || orders == 1, "api k=%ld: answered %ld, no order", k, st);
        /* The client's retry with the same key: the order, once. */
        long again = api_order(no);
        orders = count1("SELECT COUNT(*) FROM pay_order WHERE tenant_id = 't1' AND"
                        " out_trade_no = ?",
                        no);
        T_CHECK((again == 200 || again == 201) && orders == 1,
                "api k=%ld: retry answered %ld, %lld orders", k, again, (long long)orders);
        if (made <= k)
            break;
    }
}

static const char *const channels[] = {"wechatpay", "alipay", "stripe"};

static void report(const struct sweep *s)
{
    t_figure("# alloc[%s] %s: %d requests, each with one allocation failing (k = %ld..%ld):"
             " %d answered 2xx and committed, %d retry (5xx), %d refused (4xx), %d without an"
             " answer; every retry applied once, no crash\n",
             backend, s->name, s->requests, k_from, k_from + s->requests - 1, s->ok2xx, s->retry5xx,
             s->refused4xx, s->unanswered);
}

static struct t_gateway *start(const unsigned char *key)
{
    /* One thread of each kind, so that the k-th allocation is the same
     * one from run to run. */
    struct po_gateway_cfg gc;
    t_gateway_cfg(&gc, url, key);
    gc.pool_size = 1;
    gc.threads = 1;
    gc.workers = 1;
    gc.committers = 1;
    gc.max_connections_per_ip = 0;
    struct t_gateway *gw = t_gateway_start(&gc, NULL);
    port = gw->port;
    return gw;
}

/* Every FAIL line the run wrote to the gateway's log (stderr) goes to
 * stdout, and the reasons of the 4xx answers are printed. */
static void show_failures(const char *log)
{
    FILE *f = fopen(log, "r");
    char line[2048];
    while (f && fgets(line, sizeof line, f)) {
        const char *r = strstr(line, "\"reason\":\"");
        if (strncmp(line, "FAIL:", 5) == 0)
            fputs(line, stdout);
        else if (strstr(line, "\"status\":4") && r)
            printf("# alloc: answered 4xx: %.*s\n", (int)strcspn(r + 10, "\""), r + 10);
    }
    if (f)
        fclose(f);
}

/* The one case: the warm-up, then every allocation of a callback of each
 * channel and of an API order failing in turn (module comment). */
static void sweeps(void **state)
{
    (void)state;
    /* The gateway's access log would be thousands of lines: to a file. */
    char log[300];
    (void)snprintf(log, sizeof log, "%s/gateway.log", dir);
    int saved = dup(2);
    if (saved < 0 || !freopen(log, "w", stderr))
        die("cannot redirect stderr");
    /* Warm up, then stop: what the libraries set up once per process
     * (OpenSSL's algorithm store, SQLite's and libpq's global state) is
     * made now and kept until exit; it is not a leak. */
    db = t_open(url);
    struct t_gateway *gw = start(master);
    for (int i = 0; i < 3; i++) {
        char no[48], txn[64];
        for (int c = 0; c < PO_NELEM(channels); c++) {
            (void)snprintf(no, sizeof no, "WARM-%s-%d", channels[c], i);
            po_sim_new_txn(channels[c], txn, sizeof txn);
            t_seed_order(db, no, 100);
            long st = deliver(&sim_id, channels[c], no, txn);
            T_CHECK(st >= 200 && st < 300, "warm-up %s callback %d: %ld", channels[c], i, st);
        }
        (void)snprintf(no, sizeof no, "WARM-API-%d", i);
        T_CHECK(api_order(no) == 201, "warm-up API order %d", i);
    }
    t_gateway_stop(gw);
    po_store_close(db);
    long baseline = settled_live();
    /* The sweeps, on a new gateway and connection: afterwards, with both
     * closed, the process holds exactly what it held before them. */
    db = t_open(url);
    gw = start(master);
    struct sweep cb[PO_NELEM(channels)], api = {.name = "api"};
    for (int c = 0; c < PO_NELEM(channels); c++) {
        cb[c] = (struct sweep){.name = channels[c]};
        sweep_callbacks(&sim_id, &cb[c]);
    }
    sweep_api(&api);
    t_gateway_stop(gw);
    po_store_close(db);
    long held = settled_live() - baseline;
    T_CHECK(held == 0,
            "%ld allocations not freed after the sweeps (narrow down with --from K --to K)", held);
    fflush(stderr);
    if (dup2(saved, 2) < 0)
        die("dup2");
    close(saved);
    show_failures(log);
    /* PAYONCE_ALLOC_LOG=FILE keeps the gateway's log of the run. */
    const char *keep = getenv("PAYONCE_ALLOC_LOG");
    if (keep && *keep) {
        char cmd[900];
        (void)snprintf(cmd, sizeof cmd, "cp '%s' '%s'", log, keep);
        T_CHECK(system(cmd) == 0, "cannot keep the log as %s", keep);
    }
    for (int c = 0; c < PO_NELEM(channels); c++)
        report(&cb[c]);
    report(&api);
    t_figure("# alloc[%s]: %ld allocations held after both sweeps\n", backend, held);
}

int main(int argc, char **argv)
{
    exempt = true;
    backend = t_backend(argc, argv);
    if (argc < 3 || !realpath(argv[2], bin))
        die("usage: test_alloc BACKEND PAYONCE [--from K] [--to K]");
    for (int i = 3; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "--from") == 0)
            k_from = strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--to") == 0)
            k_to = strtol(argv[i + 1], NULL, 10);
    po_log_set_level(PO_LOG_ERROR);
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    t_env_create("alloc", dir, sizeof dir, master, &sim_id);
    t_db_create(backend, url, sizeof url);
    t_cli(dir, bin, url, NULL, 0, "tenant add --tenant t1");
    t_cli(dir, bin, url, NULL, 0, "merchant add --tenant t1 --merchant m1");
    t_cli(dir, bin, url, NULL, 0,
          "channel set --tenant t1 --channel wechatpay --mchid %s --appid %s --apiv3-key-file"
          " sim/apiv3.key --platform-cert-file sim/wechatpay_platform_cert.pem",
          sim_id.mchid, sim_id.appid);
    t_cli(dir, bin, url, NULL, 0,
          "channel set --tenant t1 --channel alipay --app-id %s --seller-id %s"
          " --alipay-public-key-file sim/alipay_public_key.pem",
          sim_id.app_id, sim_id.seller_id);
    t_cli(
        dir, bin, url, NULL, 0,
        "channel set --tenant t1 --channel stripe --webhook-secret-file sim/stripe_webhook_secret");
    t_cli(dir, bin, url, apikey, sizeof apikey, "apikey create --tenant t1");
    char name[64];
    (void)snprintf(name, sizeof name, "alloc[%s]", backend);
    const struct CMUnitTest tests[] = {cmocka_unit_test(sweeps)};
    int rc = T_RUN_GROUP(name, tests, NULL, NULL);
    po_sim_identity_free(&sim_id);
    curl_global_cleanup();
    return t_env_finish(dir, url, name) || rc;
}
