/*
 * test_api.c BACKEND PAYONCE — the tenant API (/v1) end to end, on loopback:
 * two in-process gateways and one `payonce serve` child process on the same
 * database, and the channel simulator for refunds.
 *
 *   auth: missing / malformed / unknown / revoked keys -> 401; another
 *     tenant's objects -> 404, unchanged
 *   50 concurrent identical POST /v1/orders with one Idempotency-Key, half
 *     of them through another process -> one order, 50 identical bodies;
 *     the same without a key -> one order
 *   same key, other parameters -> 422, nothing created; a retry while the
 *     first is in flight -> 409, one effect; an abandoned 'running' key is
 *     taken over; a transient failure stores nothing and the retry runs
 *   bad input (malformed JSON, negative / overflowing / fractional / string
 *     amounts, unknown currency or parameter, huge body) -> 4xx, nothing
 *     changes
 *   close: PAYING -> CLOSED only; a payment after close -> suspense + alert,
 *     visible through the API
 *   refunds: two concurrent refunds exceeding the paid amount -> one
 *     accepted; submitted to the simulator's refund API signed with the
 *     merchant key; its callback, delivered 1 + 3 concurrent times, posts
 *     one reversal; journal paging; the reaper
 * Each case is independent: it runs on its own copy of a template database
 * (two tenants, their merchants and API keys) with its own gateways and
 * serve child, makes the rows it needs, checks them, and ends with every
 * ledger invariant on its database. `test_api BACKEND PAYONCE CASE...` runs
 * some, `-CASE` all but those; the order is shuffled by a printed seed (PAYONCE_TEST_SEED). The
 * simulator is the one channel they all share, as a real one would be: a
 * refund number is the same refund to it in any case, so no two cases use
 * the same one.
 */
#include "../../src/channel/channel.h"
#include "../../src/http/http.h"
#include "../../src/service/service.h"
#include "../../src/sim/sim.h"
#include "../support/prism.h"
#include "../support/simenv.h"
#include "../support/testutil.h"

#include <limits.h>
#include <curl/curl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[256], url[T_URL_MAX], bin[PATH_MAX];
static unsigned gw_port, gw2_port, child_port, sim_port;
static char key1[128], key2[128], key3[128];
static const char *backend;
static const unsigned char *mkey; /* the master key the accounts are sealed with */
static struct po_sim_identity id;
static struct po_sim_identity stranger; /* keys in DIR/other: a merchant no channel knows */

static void die(const char *m)
{
    fprintf(stderr, "test_api: %s\n", m);
    exit(1);
}

#define run_out(out, cap, ...) t_cli(dir, bin, url, out, cap, __VA_ARGS__)
#define run(...) t_cli(dir, bin, url, NULL, 0, __VA_ARGS__)

/* ---- HTTP client ---- */

struct resp {
    long status;
    char body[32768];
    size_t len;
    bool replayed;
    char retry_after[16];
};

static size_t on_header(char *d, size_t sz, size_t n, void *ctx)
{
    struct resp *r = ctx;
    size_t len = sz * n;
    if (len >= 26 && strncasecmp(d, "Idempotent-Replayed: true", 25) == 0)
        r->replayed = true;
    if (len > 13 && strncasecmp(d, "Retry-After: ", 13) == 0)
        snprintf(r->retry_after, sizeof r->retry_after, "%.*s", (int)strcspn(d + 13, "\r\n"),
                 d + 13);
    return len;
}

/* The Content-Type header api() sends (the hostile table changes it). */
static const char *api_content_type = "Content-Type: application/json";

/* One request; auth is the whole header value after "Bearer " (NULL: none). */
static void api(const char *method, unsigned port, const char *path, const char *key,
                const char *idem, const char *body, struct resp *r)
{
    memset(r, 0, sizeof *r);
    char u[512], h1[256], h2[320];
    const char *lines[4] = {api_content_type};
    int n = 1;
    snprintf(u, sizeof u, "http://127.0.0.1:%u%s", port, path);
    if (key) {
        snprintf(h1, sizeof h1, "Authorization: Bearer %s", key);
        lines[n++] = h1;
    }
    if (idem) {
        snprintf(h2, sizeof h2, "Idempotency-Key: %s", idem);
        lines[n++] = h2;
    }
    struct t_http_req q = {.method = method,
                           .url = u,
                           .headers = lines,
                           .body = body,
                           .on_header = on_header,
                           .header_ctx = r};
    /* through the description's validating proxies when they run (prism.h) */
    r->status = t_prism_on() ? t_prism_http(&q, port, path, r->body, sizeof r->body, &r->len)
                             : t_http(&q, r->body, sizeof r->body, &r->len);
}

static const char *jcode(const struct resp *r, char *buf, size_t cap)
{
    json_t *j = json_loads(r->body, 0, NULL);
    snprintf(buf, cap, "%s",
             json_string_value(json_object_get(json_object_get(j, "error"), "code")) ?: "");
    json_decref(j);
    return buf;
}

static bool has_code(const struct resp *r, long status, const char *code)
{
    char b[64];
    return r->status == status && strcmp(jcode(r, b, sizeof b), code) == 0;
}

static int64_t jint(const struct resp *r, const char *field)
{
    json_t *j = json_loads(r->body, 0, NULL);
    int64_t v = json_is_integer(json_object_get(j, field))
                    ? (int64_t)json_integer_value(json_object_get(j, field))
                    : -1;
    json_decref(j);
    return v;
}

static bool jstr_is(const struct resp *r, const char *field, const char *want)
{
    json_t *j = json_loads(r->body, 0, NULL);
    bool ok = strcmp(json_string_value(json_object_get(j, field)) ?: "\x01", want) == 0;
    json_decref(j);
    return ok;
}

/* ---- database ---- */

static int64_t q1(const char *sql, const char *arg)
{
    return t_count_url(url, sql, arg);
}

static void exec_sql(const char *sql)
{
    struct po_store *s = t_open(url);
    char err[PO_ERRBUF_SIZE] = "";
    if (po_store_begin(s, err, sizeof err) ||
        po_store_exec(s, sql, NULL, 0, NULL, NULL, err, sizeof err) ||
        po_store_commit(s, err, sizeof err))
        die(err);
    po_store_close(s);
}

/* Everything a request could change, as one comparable string (one
 * connection for all of it). */
static void fingerprint(char *out, size_t cap)
{
    static const char *const sql[] = {
        "SELECT COUNT(*) FROM pay_order",
        "SELECT COALESCE(SUM(amount), 0) FROM pay_order",
        "SELECT COUNT(*) FROM pay_order WHERE status = 'CLOSED'",
        "SELECT COALESCE(SUM(refund_reserved), 0) FROM pay_order",
        "SELECT COUNT(*) FROM refund",
        "SELECT COUNT(*) FROM api_idempotency",
        "SELECT COUNT(*) FROM journal",
        "SELECT COUNT(*) FROM alert",
        "SELECT COUNT(*) FROM pay_order WHERE payment IS NOT NULL",
        "SELECT COUNT(*) FROM refund WHERE submit_state = 'submitted'",
        "SELECT COUNT(*) FROM refund WHERE status = 'PROCESSING'",
        "SELECT COUNT(*) FROM recon_run",
        "SELECT COUNT(*) FROM recon_day WHERE state = 'done'",
        "SELECT COUNT(*) FROM channel_cursor",
        "SELECT COALESCE(SUM(version), 0) FROM channel_account",
        "SELECT COUNT(*) FROM outbox_event",
        /* last: test_auth compares all but this one */
        "SELECT COUNT(*) FROM api_key WHERE revoked_at IS NULL",
    };
    struct po_store *s = t_open(url);
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof sql / sizeof sql[0] && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%lld", i ? "/" : "",
                              (long long)t_count(s, sql[i], NULL, 0));
    po_store_close(s);
}

/* ---- concurrency ---- */

#define RACERS 50

struct racer {
    pthread_barrier_t *go;
    unsigned port;
    const char *path, *idem, *body, *key;
    struct resp *r;
};

static void *race_one(void *arg)
{
    struct racer *a = arg;
    pthread_barrier_wait(a->go);
    api("POST", a->port, a->path, a->key, a->idem, a->body, a->r);
    return NULL;
}

/* n identical POSTs at once, alternating between the in-process gateway and
 * the child process. */
static void race(int n, const char *path, const char *idem, const char *body, struct resp *out)
{
    pthread_t th[RACERS];
    struct racer a[RACERS];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) {
        a[i] = (struct racer){&go, i % 2 ? child_port : gw_port, path, idem, body, key1, &out[i]};
        if (pthread_create(&th[i], NULL, race_one, &a[i]))
            die("pthread_create");
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);
}

/* ---- the in-flight hook (second gateway: never waits for a twin) ---- */

static pthread_mutex_t hook_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hook_cv = PTHREAD_COND_INITIALIZER;
static bool hook_armed, hook_inside, hook_release;

static void hook(void *ctx, const char *route)
{
    (void)ctx;
    (void)route;
    pthread_mutex_lock(&hook_mu);
    if (hook_armed) {
        hook_armed = false;
        hook_inside = true;
        pthread_cond_broadcast(&hook_cv);
        while (!hook_release)
            pthread_cond_wait(&hook_cv, &hook_mu);
    }
    pthread_mutex_unlock(&hook_mu);
}

struct bg {
    unsigned port;
    const char *path, *idem, *body;
    struct resp r;
};

static void *bg_post(void *arg)
{
    struct bg *b = arg;
    api("POST", b->port, b->path, key1, b->idem, b->body, &b->r);
    return NULL;
}

/* ---- a case's own rows ---- */

static void sim_pay(const char *order)
{
    run("sim pay --dir sim --order %s --notify-url http://127.0.0.1:%u/notify/wechatpay/t1", order,
        gw_port);
}

/* t1's order no of amount on channel, created through the API (a case's
 * own data: no case relies on another's). */
static void order_on(const char *no, int64_t amount, const char *channel)
{
    char body[200];
    struct resp r;
    snprintf(body, sizeof body,
             "{\"merchant\":\"m1\",\"out_trade_no\":\"%s\",\"amount\":%lld,"
             "\"channel\":\"%s\"}",
             no, (long long)amount, channel);
    api("POST", gw_port, "/v1/orders", key1, NULL, body, &r);
    if (r.status != 201)
        die(r.body);
}

static void order_of_t1(const char *no, int64_t amount)
{
    order_on(no, amount, "wechatpay");
}

/* ... and paid at the (simulated) channel, credited. */
static void paid_order_of_t1(const char *no, int64_t amount)
{
    char arg[120];
    order_of_t1(no, amount);
    snprintf(arg, sizeof arg, "%s:%lld", no, (long long)amount);
    sim_pay(arg);
    if (t_count_url(url,
                    "SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ? AND status = 'PAID'",
                    no) != 1)
        die("a case's paid order was not credited");
}

/* ---- the tests ---- */

static void test_auth(void)
{
    struct resp r;
    char before[256], after[256];
    api("POST", gw_port, "/v1/orders", key1, "auth-setup",
        "{\"merchant\":\"m1\",\"out_trade_no\":\"A-1\",\"amount\":100}", &r);
    T_CHECK(r.status == 201, "auth setup: %ld %s", r.status, r.body);
    fingerprint(before, sizeof before);
    api("GET", gw_port, "/v1/orders/A-1", NULL, NULL, NULL, &r);
    T_CHECK(has_code(&r, 401, "unauthorized"), "no key: %ld %s", r.status, r.body);
    api("GET", gw_port, "/v1/orders/A-1", "po_0000000000000000_00", NULL, NULL, &r);
    T_CHECK(has_code(&r, 401, "invalid_api_key"), "malformed key: %ld %s", r.status, r.body);
    char wrong[128];
    snprintf(wrong, sizeof wrong, "%s", key1);
    wrong[strlen(wrong) - 1] = wrong[strlen(wrong) - 1] == '0' ? '1' : '0';
    api("GET", gw_port, "/v1/orders/A-1", wrong, NULL, NULL, &r);
    T_CHECK(has_code(&r, 401, "invalid_api_key"), "wrong secret: %ld %s", r.status, r.body);
    /* Tenant t2 cannot see or change t1's order: 404, as if absent. */
    api("GET", gw_port, "/v1/orders/A-1", key2, NULL, NULL, &r);
    T_CHECK(has_code(&r, 404, "order_not_found"), "cross-tenant GET: %ld %s", r.status, r.body);
    api("POST", gw_port, "/v1/orders/A-1/close", key2, NULL, NULL, &r);
    T_CHECK(has_code(&r, 404, "order_not_found"), "cross-tenant close: %ld %s", r.status, r.body);
    api("POST", gw_port, "/v1/refunds", key2, NULL,
        "{\"out_trade_no\":\"A-1\",\"out_refund_no\":\"X-1\",\"amount\":1}", &r);
    T_CHECK(has_code(&r, 404, "order_not_found"), "cross-tenant refund: %ld %s", r.status, r.body);
    api("GET", gw_port, "/v1/journal", key2, NULL, NULL, &r);
    T_CHECK(r.status == 200 && strstr(r.body, "\"data\":[]"), "cross-tenant journal: %s", r.body);
    /* The same Idempotency-Key in another tenant is another key. */
    api("POST", gw_port, "/v1/orders", key2, "auth-setup",
        "{\"merchant\":\"m1\",\"out_trade_no\":\"A-1\",\"amount\":999}", &r);
    T_CHECK(r.status == 201 && !r.replayed && jint(&r, "amount") == 999,
            "tenant-scoped key: %ld %s", r.status, r.body);
    T_CHECK(q1("SELECT amount FROM pay_order WHERE tenant_id = 't1' AND out_trade_no = ?", "A-1") ==
                    100 &&
                q1("SELECT COUNT(*) FROM pay_order WHERE tenant_id = 't1' AND"
                   " out_trade_no = ? AND status = 'PAYING'",
                   "A-1") == 1,
            "t1's order changed");
    exec_sql("DELETE FROM api_idempotency WHERE tenant_id = 't2'");
    exec_sql("DELETE FROM pay_order WHERE tenant_id = 't2'");
    /* Revocation works at once, and only for that key. */
    api("GET", gw_port, "/v1/balances", key3, NULL, NULL, &r);
    T_CHECK(r.status == 200, "key3 before revocation: %ld", r.status);
    char kid[20];
    snprintf(kid, sizeof kid, "%.16s", key3 + 3);
    run("apikey revoke --tenant t1 --key-id %s", kid);
    api("GET", gw_port, "/v1/balances", key3, NULL, NULL, &r);
    T_CHECK(has_code(&r, 401, "invalid_api_key"), "revoked key: %ld %s", r.status, r.body);
    api("GET", child_port, "/v1/balances", key3, NULL, NULL, &r);
    T_CHECK(has_code(&r, 401, "invalid_api_key"), "revoked key, other process: %ld", r.status);
    api("GET", gw_port, "/v1/balances", key1, NULL, NULL, &r);
    T_CHECK(r.status == 200, "key1 after revoking key3: %ld", r.status);
    fingerprint(after, sizeof after);
    /* Only the revocation changed something (one key fewer). */
    T_CHECK(strcmp(strrchr(before, '/'), strrchr(after, '/')) != 0 &&
                strncmp(before, after, (size_t)(strrchr(before, '/') - before)) == 0,
            "auth checks changed rows: %s -> %s", before, after);
    api("GET", gw_port, "/v1/nothing", key1, NULL, NULL, &r);
    T_CHECK(has_code(&r, 404, "not_found"), "unknown route: %ld", r.status);
    api("DELETE", gw_port, "/v1/orders/A-1", key1, NULL, NULL, &r);
    T_CHECK(has_code(&r, 405, "method_not_allowed"), "DELETE: %ld", r.status);
}

static void test_concurrent(void)
{
    static struct resp r[RACERS];
    const char *body = "{\"merchant\":\"m1\",\"out_trade_no\":\"C-0001\",\"amount\":2500,"
                       "\"currency\":\"CNY\",\"channel\":\"wechatpay\"}";
    race(RACERS, "/v1/orders", "race-key-1", body, r);
    int created = 0, replayed = 0, same = 0;
    for (int i = 0; i < RACERS; i++) {
        created += r[i].status == 201;
        replayed += r[i].replayed;
        same += r[i].status == r[0].status && strcmp(r[i].body, r[0].body) == 0;
    }
    T_CHECK(created == RACERS && same == RACERS && replayed == RACERS - 1,
            "one key, 50 concurrent: %d x 201, %d identical, %d replayed (first: %ld %s)", created,
            same, replayed, r[0].status, r[0].body);
    T_CHECK(q1("SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ?", "C-0001") == 1,
            "one key: not exactly one order");
    t_figure("# api[%s] 50 concurrent POST /v1/orders, one Idempotency-Key, 2 processes: 1 order,"
             " 50 identical 201 bodies, %d replayed\n",
             backend, replayed);
    /* The replays are counted apart on /metrics (this process served half). */
    struct resp m;
    api("GET", gw_port, "/metrics", NULL, NULL, NULL, &m);
    const char *line = strstr(m.body, "payonce_api_requests_total{route=\"POST /v1/orders\","
                                      "code=\"201\",replayed=\"true\"} ");
    long n = line ? strtol(strchr(line, '}') + 2, NULL, 10) : 0;
    T_CHECK(n >= RACERS / 2 - 1, "metrics: %ld replays counted", n);
    /* No key: out_trade_no makes it idempotent. */
    body = "{\"merchant\":\"m1\",\"out_trade_no\":\"C-2\",\"amount\":700}";
    race(RACERS, "/v1/orders", NULL, body, r);
    int c201 = 0, c200 = 0;
    for (int i = 0; i < RACERS; i++) {
        c201 += r[i].status == 201;
        c200 += r[i].status == 200 && jstr_is(&r[i], "out_trade_no", "C-2") &&
                jint(&r[i], "amount") == 700;
    }
    T_CHECK(c201 == 1 && c200 == RACERS - 1, "no key, 50 concurrent: %d created, %d existing", c201,
            c200);
    T_CHECK(q1("SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ?", "C-2") == 1,
            "no key: not exactly one order");
    /* No key, different fields: 409 with the reason. */
    struct resp d;
    api("POST", gw_port, "/v1/orders", key1, NULL,
        "{\"merchant\":\"m1\",\"out_trade_no\":\"C-2\",\"amount\":701}", &d);
    T_CHECK(has_code(&d, 409, "order_exists") && strstr(d.body, "amount 7.00 CNY"),
            "no key, other amount: %ld %s", d.status, d.body);
}

static void test_key_reuse(void)
{
    struct resp r, d;
    char before[256], after[256];
    api("POST", gw_port, "/v1/orders", key1, "reuse-1",
        "{\"merchant\":\"m1\",\"out_trade_no\":\"K-1\",\"amount\":100}", &r);
    T_CHECK(r.status == 201, "reuse setup: %ld", r.status);
    fingerprint(before, sizeof before);
    api("POST", gw_port, "/v1/orders", key1, "reuse-1",
        "{\"merchant\":\"m1\",\"out_trade_no\":\"K-1\",\"amount\":200}", &d);
    T_CHECK(has_code(&d, 422, "idempotency_key_reused"), "same key, other amount: %ld %s", d.status,
            d.body);
    api("POST", child_port, "/v1/orders", key1, "reuse-1",
        "{\"merchant\":\"m1\",\"out_trade_no\":\"K-2\",\"amount\":100}", &d);
    T_CHECK(has_code(&d, 422, "idempotency_key_reused"), "same key, other order: %ld %s", d.status,
            d.body);
    /* Same request, other formatting: the same request. */
    api("POST", child_port, "/v1/orders", key1, "reuse-1",
        "{ \"amount\": 100, \"out_trade_no\": \"K-1\", \"merchant\": \"m1\" }", &d);
    T_CHECK(d.status == 201 && d.replayed && strcmp(d.body, r.body) == 0,
            "reformatted replay: %ld %s", d.status, d.body);
    /* Keys are scoped to the route: the same key on /v1/refunds is fresh. */
    api("POST", gw_port, "/v1/refunds", key1, "reuse-1",
        "{\"out_trade_no\":\"K-1\",\"out_refund_no\":\"KR-1\",\"amount\":1}", &d);
    T_CHECK(has_code(&d, 409, "order_not_paid") && !d.replayed, "route scope: %ld %s", d.status,
            d.body);
    exec_sql("DELETE FROM api_idempotency WHERE route = 'POST /v1/refunds'");
    fingerprint(after, sizeof after);
    T_CHECK(strcmp(before, after) == 0, "422 changed rows: %s -> %s", before, after);
    T_CHECK(q1("SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ?", "K-2") == 0,
            "K-2 was created");
}

static void test_in_flight(void)
{
    const char *body = "{\"merchant\":\"m1\",\"out_trade_no\":\"F-1\",\"amount\":300}";
    pthread_mutex_lock(&hook_mu);
    hook_armed = true, hook_inside = false, hook_release = false;
    pthread_mutex_unlock(&hook_mu);
    struct bg first = {gw2_port, "/v1/orders", "flight-1", body, {0}};
    pthread_t th;
    if (pthread_create(&th, NULL, bg_post, &first))
        die("pthread_create");
    pthread_mutex_lock(&hook_mu);
    while (!hook_inside)
        pthread_cond_wait(&hook_cv, &hook_mu);
    pthread_mutex_unlock(&hook_mu);
    /* The first request is inside its transaction: a retry gets 409. */
    struct resp r;
    api("POST", gw2_port, "/v1/orders", key1, "flight-1", body, &r);
    T_CHECK(has_code(&r, 409, "idempotency_in_flight") && r.retry_after[0],
            "in-flight retry: %ld %s (Retry-After '%s')", r.status, r.body, r.retry_after);
    T_CHECK(q1("SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ?", "F-1") == 0,
            "in flight: the order exists before the first request committed");
    pthread_mutex_lock(&hook_mu);
    hook_release = true;
    pthread_cond_broadcast(&hook_cv);
    pthread_mutex_unlock(&hook_mu);
    pthread_join(th, NULL);
    T_CHECK(first.r.status == 201 && !first.r.replayed, "in flight: first %ld %s", first.r.status,
            first.r.body);
    api("POST", gw2_port, "/v1/orders", key1, "flight-1", body, &r);
    T_CHECK(r.status == 201 && r.replayed && strcmp(r.body, first.r.body) == 0,
            "after in-flight: %ld %s", r.status, r.body);
    T_CHECK(q1("SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ?", "F-1") == 1,
            "in flight: not one order");
    /* A 'running' record abandoned by a crashed request is taken over
     * after PO_IDEM_LOCK_S; its effect had not committed. */
    exec_sql("INSERT INTO api_idempotency (tenant_id, route, idem_key, request_hash, state,"
             " lock_token, locked_at, created_at) SELECT tenant_id, route, 'crashed-1',"
             " request_hash, 'running', 'dead', '2000-01-01T00:00:00.000Z', created_at FROM"
             " api_idempotency WHERE idem_key = 'flight-1'");
    api("POST", gw_port, "/v1/orders", key1, "crashed-1", body, &r);
    T_CHECK(r.status == 200 && !r.replayed && jstr_is(&r, "out_trade_no", "F-1"),
            "abandoned key taken over: %ld %s", r.status, r.body);
    T_CHECK(q1("SELECT COUNT(*) FROM api_idempotency WHERE idem_key = ? AND state = 'done'",
               "crashed-1") == 1,
            "taken-over key not completed");
    T_CHECK(q1("SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ?", "F-1") == 1,
            "takeover: not one order");
}

/* The store is locked for longer than the gateway waits: 503, nothing
 * stored under the key, and the retry runs for real. */
static void test_transient(void)
{
    struct po_store *holder = t_open(url);
    char err[PO_ERRBUF_SIZE] = "";
    if (po_store_begin(holder, err, sizeof err) ||
        po_store_exec(holder,
                      "INSERT INTO pay_order (tenant_id, out_trade_no, merchant_id, amount,"
                      " currency, status, created_at, updated_at) VALUES ('t1', 'T-1', 'm1', 5,"
                      " 'CNY', 'PAYING', 'x', 'x')",
                      NULL, 0, NULL, NULL, err, sizeof err))
        die(err);
    const char *body = "{\"merchant\":\"m1\",\"out_trade_no\":\"T-1\",\"amount\":400}";
    struct resp r;
    api("POST", gw_port, "/v1/orders", key1, "transient-1", body, &r);
    po_store_rollback(holder);
    po_store_close(holder);
    T_CHECK(has_code(&r, 503, "store_unavailable") && r.retry_after[0], "locked store: %ld %s",
            r.status, r.body);
    T_CHECK(q1("SELECT COUNT(*) FROM api_idempotency WHERE idem_key = ?", "transient-1") == 0,
            "a transient failure was stored");
    api("POST", gw_port, "/v1/orders", key1, "transient-1", body, &r);
    T_CHECK(r.status == 201 && !r.replayed && jint(&r, "amount") == 400,
            "retry after transient: %ld %s", r.status, r.body);
}

static void test_bad_input(void)
{
    static const struct {
        const char *body;
        long status;
        const char *code;
    } cases[] = {
        {"{\"merchant\":\"m1\",\"out_trade_no\":\"B-1\",", 400, "malformed_json"},
        {"[1,2]", 400, "malformed_json"},
        {"", 400, "malformed_json"},
        {"{\"merchant\":\"m1\",\"out_trade_no\":\"B-1\",\"amount\":1,\"amount\":2}", 400,
         "malformed_json"},
        {"{\"merchant\":\"m1\",\"out_trade_no\":\"B-1\",\"amount\":-100}", 400, "invalid_amount"},
        {"{\"merchant\":\"m1\",\"out_trade_no\":\"B-1\",\"amount\":0}", 400, "invalid_amount"},
        {"{\"merchant\":\"m1\",\"out_trade_no\":\"B-1\",\"amount\":100000000000001}", 400,
         "invalid_amount"},
        {"{\"merchant\":\"m1\",\"out_trade_no\":\"B-1\",\"amount\":9223372036854775808}", 400,
         "malformed_json"},
        {"{\"merchant\":\"m1\",\"out_trade_no\":\"B-1\",\"amount\":1.5}", 400, "invalid_amount"},
        {"{\"merchant\":\"m1\",\"out_trade_no\":\"B-1\",\"amount\":\"100\"}", 400,
         "invalid_amount"},
        {"{\"merchant\":\"m1\",\"out_trade_no\":\"B-1\"}", 400, "missing_parameter"},
        {"{\"merchant\":\"m1\",\"out_trade_no\":\"B-1\",\"amount\":1,\"currency\":\"XXX\"}", 400,
         "invalid_currency"},
        {"{\"merchant\":\"m1\",\"out_trade_no\":\"B-1\",\"amount\":1,\"currency\":\"cny\"}", 400,
         "invalid_currency"},
        {"{\"merchant\":\"m1\",\"out_trade_no\":\"B 1\",\"amount\":1}", 400, "invalid_parameter"},
        {"{\"merchant\":\"m1\",\"out_trade_no\":\"B-1\",\"amount\":1,\"discount\":1}", 400,
         "unknown_parameter"},
        {"{\"merchant\":\"m9\",\"out_trade_no\":\"B-1\",\"amount\":1}", 404, "merchant_not_found"},
        {"{\"merchant\":\"m1\",\"out_trade_no\":\"B-1\",\"amount\":1,\"channel\":\"paypal\"}", 400,
         "invalid_parameter"},
    };
    char before[256], after[256];
    order_of_t1("C-0001", 2500); /* the refunds below name it */
    fingerprint(before, sizeof before);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct resp r;
        api("POST", i % 2 ? child_port : gw_port, "/v1/orders", key1, NULL, cases[i].body, &r);
        T_CHECK(has_code(&r, cases[i].status, cases[i].code), "bad input %zu (%s): %ld %s", i,
                cases[i].body, r.status, r.body);
    }
    struct resp r;
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"C-0001\",\"out_refund_no\":\"B-R\",\"amount\":-5}", &r);
    T_CHECK(has_code(&r, 400, "invalid_amount"), "negative refund: %ld %s", r.status, r.body);
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"C-0001\",\"out_refund_no\":\"B-R\",\"amount\":5,\"currency\":\"ZZZ\"}",
        &r);
    T_CHECK(has_code(&r, 400, "invalid_currency"), "refund currency: %ld %s", r.status, r.body);
    api("POST", gw_port, "/v1/orders", key1, "bad key with spaces",
        "{\"merchant\":\"m1\",\"out_trade_no\":\"B-2\",\"amount\":1}", &r);
    T_CHECK(has_code(&r, 400, "invalid_idempotency_key"), "bad Idempotency-Key: %ld %s", r.status,
            r.body);
    api("GET", gw_port, "/v1/journal?limit=0", key1, NULL, NULL, &r);
    T_CHECK(has_code(&r, 400, "invalid_parameter"), "limit=0: %ld", r.status);
    char *big = malloc(70 * 1024);
    memset(big, ' ', 70 * 1024 - 1);
    big[0] = '{';
    big[70 * 1024 - 2] = '}';
    big[70 * 1024 - 1] = '\0';
    api("POST", gw_port, "/v1/orders", key1, "big-1", big, &r);
    free(big);
    T_CHECK(has_code(&r, 413, "body_too_large"), "70 KiB body: %ld %s", r.status, r.body);
    /* Validation failures are not stored under the key: fixing the body
     * and retrying with the same key works. */
    api("POST", gw_port, "/v1/orders", key1, "bad-then-good",
        "{\"merchant\":\"m1\",\"out_trade_no\":\"B-3\",\"amount\":-1}", &r);
    T_CHECK(r.status == 400, "bad-then-good 1: %ld", r.status);
    fingerprint(after, sizeof after);
    T_CHECK(strcmp(before, after) == 0, "bad input changed rows: %s -> %s", before, after);
    api("POST", gw_port, "/v1/orders", key1, "bad-then-good",
        "{\"merchant\":\"m1\",\"out_trade_no\":\"B-3\",\"amount\":1}", &r);
    T_CHECK(r.status == 201, "bad-then-good 2: %ld %s", r.status, r.body);
}

/* Issue 11's hostile-input table for the tenant API: every route with
 * truncated, malformed, deeply nested, non-UTF-8, oversized-number, SQL
 * metacharacter and cross-tenant inputs gets a clear 4xx with an error code,
 * and no row changes (fingerprint before and after). */
/* Requests no client library sends: two copies of a header that must be
 * unique (another tenant's key, another Idempotency-Key, another
 * signature), a body framed twice (request smuggling), CR, LF and NUL
 * inside header values, a folded header, CR LF smuggled into the path.
 * Each is a clear 4xx (with payonce's error code when payonce answers;
 * the HTTP library refuses what is not HTTP before payonce sees it) and no
 * answer carries a header the request injected. Returns how many. */
static int hostile_raw(void)
{
    static const char body[] = "{\"merchant\":\"m1\",\"out_trade_no\":\"RAW-1\",\"amount\":1}";
    static const struct {
        const char *head; /* up to Content-Length; K1, K2: t1's and t2's keys */
        unsigned status;
        const char *code; /* payonce's error code (NULL: the HTTP library answers) */
    } cases[] = {
        {"POST /v1/orders HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer K1\r\n"
         "Authorization: Bearer K2\r\nContent-Type: application/json",
         400, "ambiguous_header"},
        {"POST /v1/orders HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer K1\r\n"
         "Idempotency-Key: a\r\nIdempotency-Key: b",
         400, "ambiguous_header"},
        {"POST /v1/orders HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer K1\r\n"
         "Transfer-Encoding: chunked",
         400, NULL},
        {"POST /notify/wechatpay/t1 HTTP/1.1\r\nHost: h\r\n"
         "Wechatpay-Signature: x\r\nWechatpay-Signature: y",
         400, "ambiguous_header"},
        {"POST /v1/orders HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer K1\rX-Injected: 1", 400,
         "invalid_header"},
        /* folded into the key (the library joins the lines): no such key */
        {"POST /v1/orders HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer K1\r\n X-Other: K2", 401,
         NULL},
        {"GET /v1/orders/C-0001\r\nX-Injected:%201 HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer K1",
         400, NULL},
    };
    int sent = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char req[1024], ans[8192] = "";
        int n = 0;
        for (const char *h = cases[i].head; *h;) /* K1, K2: the two tenants' keys */
            if (h[0] == 'K' && (h[1] == '1' || h[1] == '2')) {
                n += snprintf(req + n, sizeof req - (size_t)n, "%s", h[1] == '1' ? key1 : key2);
                h += 2;
            } else {
                req[n++] = *h++;
            }
        n += snprintf(req + n, sizeof req - (size_t)n, "\r\nContent-Length: %zu\r\n\r\n%s",
                      sizeof body - 1, body);
        int fd = t_dial(i % 2 ? child_port : gw_port);
        unsigned st = t_exchange(fd, req, (size_t)n, ans, sizeof ans);
        close(fd);
        sent++;
        char *end = strstr(ans, "\r\n\r\n");
        const char *inj = strcasestr(ans, "X-Injected");
        char code[48];
        (void)snprintf(code, sizeof code, "\"%s\"", cases[i].code ? cases[i].code : "");
        T_CHECK(st == cases[i].status && (!inj || (end && inj > end)) &&
                    (!cases[i].code || (end && strstr(end, code))),
                "raw hostile %zu: %u (want %u %s, nothing injected): %.300s", i, st,
                cases[i].status, code, ans);
    }
    /* A NUL inside a header value (it cannot be written in a format):
     * libmicrohttpd keeps the value up to the NUL, so nothing after it
     * reaches payonce — here not another tenant's key. */
    static const char nul[] =
        "GET /v1/balances HTTP/1.1\r\nHost: h\r\nX-A: a\0Authorization: x\r\n\r\n";
    int fd = t_dial(gw_port);
    unsigned st = t_exchange(fd, nul, sizeof nul - 1, NULL, 0);
    close(fd);
    T_CHECK(st == 401, "raw hostile NUL in a header: %u, want 401 (no key)", st);
    return sent + 1;
}

static void test_hostile_table(void)
{
    static char deep[20010];
    memset(deep, '[', 10000);
    memset(deep + 10000, ']', 10000);
    deep[20000] = '\0';
    static const struct {
        const char *method, *path, *body;
        int key; /* 1: t1's key, 2: t2's (another tenant) */
        long status;
        const char *ctype; /* NULL: application/json */
    } cases[] = {
        /* POST /v1/refunds */
        {"POST", "/v1/refunds", "{\"out_trade_no\":\"C-0001\",\"out_refund_no\":", 1, 400},
        {"POST", "/v1/refunds", NULL /* deep */, 1, 400},
        {"POST", "/v1/refunds",
         "{\"out_trade_no\":\"C-0001\",\"out_refund_no\":\"H-1\",\"amount\":1,\"amount\":2}", 1,
         400},
        {"POST", "/v1/refunds",
         "{\"out_trade_no\":\"C-0001\",\"out_refund_no\":\"H-1\",\"amount\":1e30}", 1, 400},
        {"POST", "/v1/refunds",
         "{\"out_trade_no\":\"C-0001\",\"out_refund_no\":\"H-1\",\"amount\":-9223372036854775808}",
         1, 400},
        {"POST", "/v1/refunds",
         "{\"out_trade_no\":\"x'; DROP TABLE pay_order;--\",\"out_refund_no\":\"H-1\","
         "\"amount\":1}",
         1, 400},
        {"POST", "/v1/refunds",
         "{\"out_trade_no\":\"C-0001\",\"out_refund_no\":\"H-\xff\xfe\",\"amount\":1}", 1, 400},
        {"POST", "/v1/refunds",
         "{\"out_trade_no\":\"C-0001\",\"out_refund_no\":\"H-1\",\"amount\":1}", 2,
         404}, /* another tenant's order */
        /* POST /v1/orders */
        {"POST", "/v1/orders", NULL /* deep */, 1, 400},
        {"POST", "/v1/orders", "{\"merchant\":\"m1\",\"out_trade_no\":\"H-\xc0\xaf\",\"amount\":1}",
         1, 400},
        {"POST", "/v1/orders", "{\"merchant\":\"m1\",\"out_trade_no\":\"1 OR 1=1\",\"amount\":1}",
         1, 400},
        {"POST", "/v1/orders",
         "{\"merchant\":{\"a\":[1,{}]},\"out_trade_no\":\"H-2\",\"amount\":1}", 1, 400},
        /* POST /v1/orders/{id}/close */
        {"POST", "/v1/orders/C-0001/close", NULL, 2, 404}, /* another tenant's order */
        {"POST", "/v1/orders/x%27%3B%20DROP%20TABLE%20pay_order%3B--/close", NULL, 1, 404},
        {"POST", "/v1/orders/%ff%fe/close", NULL, 1, 404},
        /* GET routes */
        {"GET", "/v1/orders/C-0001", NULL, 2, 404},
        {"GET", "/v1/orders/%27%20OR%20%271%27%3D%271", NULL, 1, 404},
        {"GET", "/v1/orders/%ff", NULL, 1, 404},
        {"GET", "/v1/refunds/%27--", NULL, 1, 404},
        {"GET", "/v1/journal?limit=-1", NULL, 1, 400},
        {"GET", "/v1/journal?limit=99999999999999999999999", NULL, 1, 400},
        {"GET", "/v1/journal?cursor=%ff%fe", NULL, 1, 400},
        {"GET", "/v1/alerts?limit=abc", NULL, 1, 400},
        {"GET", "/v1/balances", NULL, 0, 401},
        /* wrong content types: a valid JSON body declared as something else */
        {"POST", "/v1/orders", "{\"merchant\":\"m1\",\"out_trade_no\":\"H-3\",\"amount\":1}", 1,
         415, "Content-Type: text/plain"},
        {"POST", "/v1/orders", "{\"merchant\":\"m1\",\"out_trade_no\":\"H-3\",\"amount\":1}", 1,
         415, "Content-Type: multipart/form-data; boundary=x"},
        {"POST", "/v1/refunds",
         "{\"out_trade_no\":\"C-0001\",\"out_refund_no\":\"H-1\",\"amount\":1}", 1, 415,
         "Content-Type: application/xml"},
        /* curl -d's default type is read as JSON: a form body is malformed */
        {"POST", "/v1/orders", "merchant=m1&out_trade_no=H-3&amount=1", 1, 400,
         "Content-Type: application/x-www-form-urlencoded"},
    };
    char before[256], after[256];
    order_of_t1("C-0001", 2500); /* t1's order, which t2 must not reach */
    fingerprint(before, sizeof before);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct resp r;
        const char *body =
            cases[i].body ? cases[i].body
            : strcmp(cases[i].method, "POST") == 0 && strstr(cases[i].path, "close") == NULL ? deep
                                                                                             : NULL;
        api_content_type = cases[i].ctype ? cases[i].ctype : "Content-Type: application/json";
        api(cases[i].method, i % 2 ? child_port : gw_port, cases[i].path,
            cases[i].key == 1   ? key1
            : cases[i].key == 2 ? key2
                                : NULL,
            NULL, body, &r);
        api_content_type = "Content-Type: application/json";
        char code[64];
        T_CHECK(r.status == cases[i].status && jcode(&r, code, sizeof code)[0],
                "hostile %zu (%s %s): %ld %s, expected %ld with an error code", i, cases[i].method,
                cases[i].path, r.status, r.body, cases[i].status);
    }
    int raw = hostile_raw();
    fingerprint(after, sizeof after);
    T_CHECK(strcmp(before, after) == 0, "hostile input changed rows: %s -> %s", before, after);
    t_figure("# api[%s] hostile-input table: %zu requests over every route and %d raw ones"
             " (ambiguous headers, smuggling, header injection) -> clear 4xx each, rows"
             " unchanged\n",
             backend, sizeof cases / sizeof cases[0], raw);
}

static void test_close(void)
{
    struct resp r, d;
    api("POST", gw_port, "/v1/orders", key1, NULL,
        "{\"merchant\":\"m1\",\"out_trade_no\":\"CL-0001\",\"amount\":300,\"channel\":"
        "\"wechatpay\"}",
        &r);
    T_CHECK(r.status == 201 && jstr_is(&r, "status", "PAYING"), "close setup: %ld", r.status);
    api("POST", gw_port, "/v1/orders/CL-0001/close", key1, "close-1", NULL, &r);
    T_CHECK(r.status == 200 && jstr_is(&r, "status", "CLOSED"), "close: %ld %s", r.status, r.body);
    api("POST", child_port, "/v1/orders/CL-0001/close", key1, "close-1", NULL, &d);
    T_CHECK(d.status == 200 && d.replayed && strcmp(d.body, r.body) == 0, "close replay: %ld",
            d.status);
    api("POST", gw_port, "/v1/orders/CL-0001/close", key1, NULL, "{}", &d);
    T_CHECK(d.status == 200 && jstr_is(&d, "status", "CLOSED"), "close again: %ld %s", d.status,
            d.body);
    api("POST", gw_port, "/v1/orders/CL-0001/close", key1, "close-1", "{\"x\":1}", &d);
    T_CHECK(d.status == 400, "close with a body member: %ld", d.status);
    /* The payer pays anyway: the money is parked in suspense, alerted; the
     * channel's delivery is acked, and sim pay says it was not credited. */
    T_CHECK(t_cli_status(dir, bin, url,
                         "sim pay --dir sim --order CL-0001:300 --notify-url"
                         " http://127.0.0.1:%u/notify/wechatpay/t1",
                         gw_port) == 1,
            "sim pay of a closed order: not credited, exit 1");
    api("GET", gw_port, "/v1/orders/CL-0001", key1, NULL, NULL, &r);
    T_CHECK(jstr_is(&r, "status", "CLOSED"), "paid after close: %s", r.body);
    api("GET", gw_port, "/v1/alerts", key1, NULL, NULL, &r);
    T_CHECK(r.status == 200 && strstr(r.body, "\"out_trade_no\":\"CL-0001\"") &&
                strstr(r.body, "\"reason\":\"paid_after_close\""),
            "alert for the payment after close: %s", r.body);
    /* The alerts workflow (issue 13 item 9) seen through the API: the
     * alert acknowledged and then resolved by an operator, each move in
     * the audit trail, and ?state= filtering. */
    char aid[PO_KEY_SIZE + 64] = "";
    {
        json_t *j = json_loads(r.body, 0, NULL);
        size_t i;
        json_t *a;
        json_array_foreach(
            json_object_get(j, "data"), i,
            a) if (strcmp(json_string_value(json_object_get(a, "out_trade_no")) ?: "", "CL-0001") ==
                   0)
            snprintf(aid, sizeof aid, "%s", json_string_value(json_object_get(a, "id")) ?: "");
        json_decref(j);
    }
    struct po_store *s = t_open(url);
    bool changed = false;
    char err[PO_ERRBUF_SIZE] = "";
    T_CHECK(po_alert_act(s, "t1", aid, PO_ALERT_ACK, "ops", "on it", &changed, err, sizeof err) ==
                    PO_OK &&
                changed,
            "acknowledge %s: %s", aid, err);
    api("GET", gw_port, "/v1/alerts?state=acknowledged", key1, NULL, NULL, &r);
    T_CHECK(r.status == 200 && strstr(r.body, "\"out_trade_no\":\"CL-0001\"") &&
                strstr(r.body, "\"state_by\":\"ops\""),
            "alerts?state=acknowledged: %s", r.body);
    api("GET", gw_port, "/v1/alerts?state=open", key1, NULL, NULL, &r);
    T_CHECK(r.status == 200 && !strstr(r.body, "\"out_trade_no\":\"CL-0001\""),
            "alerts?state=open: %s", r.body);
    T_CHECK(po_alert_act(s, "t1", aid, PO_ALERT_RESOLVE, "ops", "refunded the payer in the channel",
                         &changed, err, sizeof err) == PO_OK &&
                changed,
            "resolve: %s", err);
    T_CHECK(po_alert_act(s, "t2", aid, PO_ALERT_RESOLVE, "ops", "another tenant's", &changed, err,
                         sizeof err) == PO_ERR_NOT_FOUND,
            "t2 resolved t1's alert");
    po_store_close(s);
    T_CHECK(q1("SELECT COUNT(*) FROM alert_action WHERE tenant_id = 't1' AND alert_key = ?", aid) ==
                2,
            "the audit trail of %s", aid);
    api("GET", gw_port, "/v1/alerts?state=resolved", key1, NULL, NULL, &r);
    T_CHECK(r.status == 200 &&
                strstr(r.body, "\"state_note\":\"refunded the payer in the channel\""),
            "alerts?state=resolved: %s", r.body);
    api("GET", gw_port, "/v1/alerts?state=closed", key1, NULL, NULL, &r);
    T_CHECK(has_code(&r, 400, "invalid_parameter"), "alerts?state=closed: %ld", r.status);
    api("GET", gw_port, "/v1/balances", key1, NULL, NULL, &r);
    T_CHECK(strstr(r.body, "{\"account\":\"suspense\",\"balance\":-300,\"currency\":\"CNY\""),
            "suspense balance: %s", r.body);
    /* A PAID order cannot be closed. */
    paid_order_of_t1("C-0001", 2500);
    api("POST", gw_port, "/v1/orders/C-0001/close", key1, "close-paid", NULL, &r);
    T_CHECK(has_code(&r, 409, "order_paid"), "close a paid order: %ld %s", r.status, r.body);
    T_CHECK(q1("SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ? AND status = 'PAID'",
               "C-0001") == 1,
            "C-0001 not PAID");
    api("POST", gw_port, "/v1/orders/NOPE/close", key1, NULL, NULL, &r);
    T_CHECK(has_code(&r, 404, "order_not_found"), "close unknown: %ld", r.status);
}

static int sim_refunds(void)
{
    char path[512], *lines = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/sim/refunds.jsonl", dir);
    if (po_file_read(path, 1 << 20, &lines, &len))
        return 0;
    int n = 0;
    for (char *p = lines; (p = strchr(p, '\n')); p++)
        n++;
    free(lines);
    return n;
}

static bool wait_for(const char *sql, const char *arg, int64_t want)
{
    for (int i = 0; i < 300; i++) { /* 30 s: a sanitizer build beside others */
        if (q1(sql, arg) == want)
            return true;
        usleep(100000);
    }
    return false;
}

struct cb {
    pthread_barrier_t *go;
    const struct po_sim_request *req;
    long status;
    const char *channel; /* NULL: wechatpay */
};

/* Delivers one simulated channel callback to the gateway. */
static void *send_cb(void *arg)
{
    struct cb *c = arg;
    pthread_barrier_wait(c->go);
    char path[64];
    snprintf(path, sizeof path, "/notify/%s/t1", c->channel ? c->channel : "wechatpay");
    struct resp *r = calloc(1, sizeof *r);
    if (!r)
        die("out of memory");
    c->status = t_http_sim(gw_port, path, c->req, r->body, sizeof r->body);
    free(r);
    return NULL;
}

/* The channel's refund-result callback for rf, three copies at once. */
static void refund_cb_3x(const struct po_sim_refund *rf, long status[3])
{
    struct po_sim_request req;
    if (po_sim_refund_request(&id, rf, (int64_t)time(NULL), &req))
        die("refund result callback");
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 3);
    struct cb cbs[3];
    pthread_t ct[3];
    for (int i = 0; i < 3; i++) {
        cbs[i] = (struct cb){&go, &req, 0, rf->channel};
        if (pthread_create(&ct[i], NULL, send_cb, &cbs[i]))
            die("pthread_create");
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(ct[i], NULL);
        status[i] = cbs[i].status;
    }
    pthread_barrier_destroy(&go);
    po_sim_request_free(&req);
}

/* The first record of the simulator's file (sim/NAME.jsonl) whose k1 is
 * v1 and, with k2, whose k2 is v2; NULL when none (json_decref it). */
static json_t *sim_record(const char *name, const char *k1, const char *v1, const char *k2,
                          const char *v2)
{
    char path[512], *lines = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/sim/%s.jsonl", dir, name);
    if (po_file_read(path, 1 << 20, &lines, &len))
        return NULL;
    json_t *found = NULL;
    for (char *save = NULL, *l = strtok_r(lines, "\n", &save); l && !found;
         l = strtok_r(NULL, "\n", &save)) {
        json_t *j = json_loads(l, 0, NULL);
        if (strcmp(json_string_value(json_object_get(j, k1)) ?: "", v1) == 0 &&
            (!k2 || strcmp(json_string_value(json_object_get(j, k2)) ?: "", v2) == 0))
            found = json_incref(j);
        json_decref(j);
    }
    free(lines);
    return found;
}

/* The refund the simulator recorded for out_refund_no (its refund id). */
static bool sim_refund_id(const char *out_refund_no, char *out, size_t cap)
{
    json_t *r = sim_record("refunds", "out_refund_no", out_refund_no, NULL, NULL);
    if (r)
        snprintf(out, cap, "%s", json_string_value(json_object_get(r, "refund_id")) ?: "");
    json_decref(r);
    return r != NULL;
}

struct refund_racer {
    pthread_barrier_t *go;
    const char *body, *idem;
    unsigned port;
    struct resp r;
};

static void *refund_one(void *arg)
{
    struct refund_racer *a = arg;
    pthread_barrier_wait(a->go);
    api("POST", a->port, "/v1/refunds", key1, a->idem, a->body, &a->r);
    return NULL;
}

static void test_refunds(void)
{
    struct resp r;
    api("POST", gw_port, "/v1/orders", key1, "order-R-1",
        "{\"merchant\":\"m1\",\"out_trade_no\":\"R-0001\",\"amount\":1000,\"channel\":"
        "\"wechatpay\"}",
        &r);
    T_CHECK(r.status == 201, "refund setup: %ld %s", r.status, r.body);
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"R-0001\",\"out_refund_no\":\"RF-0\",\"amount\":10}", &r);
    T_CHECK(has_code(&r, 409, "order_not_paid"), "refund before payment: %ld %s", r.status, r.body);
    sim_pay("R-0001:1000");
    T_CHECK(q1("SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ? AND status = 'PAID'",
               "R-0001") == 1,
            "R-0001 not paid");
    int before = sim_refunds();
    /* Two refunds that together exceed the payment, at the same time, one
     * through each process. */
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    struct refund_racer a[2] = {
        {&go,
         "{\"out_trade_no\":\"R-0001\",\"out_refund_no\":\"RF-A\",\"amount\":600}",
         "rf-a",
         gw_port,
         {0}},
        {&go,
         "{\"out_trade_no\":\"R-0001\",\"out_refund_no\":\"RF-B\",\"amount\":600}",
         "rf-b",
         child_port,
         {0}}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&th[i], NULL, refund_one, &a[i]))
            die("pthread_create");
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);
    int won = a[0].r.status == 201 ? 0 : 1, lost = 1 - won;
    T_CHECK(a[won].r.status == 201 && has_code(&a[lost].r, 409, "refund_exceeds_paid"),
            "concurrent refunds: %ld %s / %ld %s", a[0].r.status, a[0].r.body, a[1].r.status,
            a[1].r.body);
    const char *won_no = won == 0 ? "RF-A" : "RF-B";
    T_CHECK(jstr_is(&a[won].r, "status", "PROCESSING"), "accepted refund: %s", a[won].r.body);
    T_CHECK(q1("SELECT COUNT(*) FROM refund WHERE out_trade_no = ?", "R-0001") == 1 &&
                q1("SELECT refund_reserved FROM pay_order WHERE out_trade_no = ?", "R-0001") == 600,
            "concurrent refunds: rows");
    /* Submitted to the channel, signed with the merchant key (the simulator
     * refuses anything else), then the callback completes it once. */
    T_CHECK(sim_refunds() == before + 1, "the simulator received %d refunds, expected 1",
            sim_refunds() - before);
    T_CHECK(wait_for("SELECT COUNT(*) FROM refund WHERE out_refund_no = ? AND status = 'SUCCESS'",
                     won_no, 1),
            "refund %s did not reach SUCCESS", won_no);
    char path[64];
    snprintf(path, sizeof path, "/v1/refunds/%s", won_no);
    api("GET", gw_port, path, key1, NULL, NULL, &r);
    T_CHECK(r.status == 200 && jstr_is(&r, "status", "SUCCESS") &&
                strstr(r.body, "\"state\":\"submitted\""),
            "GET refund: %s", r.body);
    /* The stored POST response stays what it was (PROCESSING). */
    api("POST", gw_port, "/v1/refunds", key1, a[won].idem, a[won].body, &r);
    T_CHECK(r.replayed && strcmp(r.body, a[won].r.body) == 0, "refund replay: %s", r.body);
    /* The refund callback again, three times at once: one reversal. */
    char refund_id[64] = "";
    T_CHECK(sim_refund_id(won_no, refund_id, sizeof refund_id), "no refund id for %s", won_no);
    char txn[80] = "";
    {
        struct po_store *s = t_open(url);
        struct po_rows rows;
        struct po_param p[] = {PO_TEXT("R-0001")};
        if (po_store_exec(s, "SELECT channel_txn_id FROM pay_order WHERE out_trade_no = ?", p,
                          PO_NELEM(p), &rows, NULL, NULL, 0) == PO_OK) {
            snprintf(txn, sizeof txn, "%s", rows.nrows ? po_rows_get(&rows, 0, 0) : "");
            po_rows_free(&rows);
        }
        po_store_close(s);
    }
    struct po_sim_refund rf = {"wechatpay", "R-0001", txn, won_no, refund_id, 600, 1000, "SUCCESS"};
    long st[3];
    refund_cb_3x(&rf, st);
    T_CHECK(st[0] / 100 == 2 && st[1] / 100 == 2 && st[2] / 100 == 2,
            "refund callbacks acked %ld %ld %ld", st[0], st[1], st[2]);
    T_CHECK(
        q1("SELECT COUNT(*) FROM journal WHERE kind = 'REFUND' AND out_refund_no = ?", won_no) == 1,
        "refund %s: not exactly one reversal", won_no);
    T_CHECK(q1("SELECT refunded_amount FROM pay_order WHERE out_trade_no = ?", "R-0001") == 600,
            "refunded_amount");
    /* What is left (400) can be refunded; more cannot. Without a key,
     * out_refund_no makes it idempotent. */
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"R-0001\",\"out_refund_no\":\"RF-C\",\"amount\":401}", &r);
    T_CHECK(has_code(&r, 409, "refund_exceeds_paid"), "over-refund: %ld %s", r.status, r.body);
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"R-0001\",\"out_refund_no\":\"RF-C\",\"amount\":400,\"currency\":"
        "\"CNY\"}",
        &r);
    T_CHECK(r.status == 201, "remaining refund: %ld %s", r.status, r.body);
    api("POST", child_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"R-0001\",\"out_refund_no\":\"RF-C\",\"amount\":400}", &r);
    T_CHECK(r.status == 200 && jstr_is(&r, "out_refund_no", "RF-C"), "same refund, no key: %ld %s",
            r.status, r.body);
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"R-0001\",\"out_refund_no\":\"RF-C\",\"amount\":300}", &r);
    T_CHECK(has_code(&r, 409, "refund_exists"), "same refund no, other amount: %ld %s", r.status,
            r.body);
    T_CHECK(wait_for("SELECT COUNT(*) FROM refund WHERE out_refund_no = ? AND status = 'SUCCESS'",
                     "RF-C", 1),
            "RF-C did not reach SUCCESS");
    T_CHECK(
        q1("SELECT COUNT(*) FROM journal WHERE kind = 'REFUND' AND out_trade_no = ?", "R-0001") ==
                2 &&
            q1("SELECT refunded_amount FROM pay_order WHERE out_trade_no = ?", "R-0001") == 1000,
        "R-0001 fully refunded once each");
    api("GET", gw_port, "/v1/balances", key1, NULL, NULL, &r);
    T_CHECK(r.status == 200 && strstr(r.body, "\"object\":\"list\""), "balances: %s", r.body);
}

/* Tenant t2's WeChat Pay account, with the given API base URL and
 * merchant key directory (sim: the right key; other: a stranger's). */
static void t2_channel(const char *base, const char *keydir, const char *serial)
{
    run("channel set --tenant t2 --channel wechatpay --mchid %s --appid %s --apiv3-key-file "
        "sim/apiv3.key --platform-cert-file sim/wechatpay_platform_cert.pem"
        " --api-base-url %s --merchant-private-key-file %s/merchant_private_key.pem"
        " --merchant-serial %s --notify-url http://127.0.0.1:%u/notify/wechatpay/t2",
        id.mchid, id.appid, base, keydir, serial, gw_port);
}

/* Submission when the channel does not answer (stays pending, resubmitted
 * later) and when it refuses (the refund closes, the reservation is
 * released, an alert is recorded). */
static void test_refund_submission(void)
{
    char sim_base[64];
    snprintf(sim_base, sizeof sim_base, "http://127.0.0.1:%u", sim_port);
    t2_channel("http://127.0.0.1:1", "sim", id.merchant_serial); /* nobody listens there */
    struct resp r;
    api("POST", gw_port, "/v1/orders", key2, NULL,
        "{\"merchant\":\"m1\",\"out_trade_no\":\"S-0001\",\"amount\":800,\"channel\":"
        "\"wechatpay\"}",
        &r);
    T_CHECK(r.status == 201, "t2 order: %ld %s", r.status, r.body);
    run("sim pay --dir sim --order S-0001:800 --txn 4200000000000000000000009001 --notify-url"
        " http://127.0.0.1:%u/notify/wechatpay/t2",
        gw_port);
    api("POST", gw_port, "/v1/refunds", key2, "t2-rt-1",
        "{\"out_trade_no\":\"S-0001\",\"out_refund_no\":\"RT-1\",\"amount\":300}", &r);
    T_CHECK(r.status == 201 && jstr_is(&r, "status", "PROCESSING"), "t2 refund: %ld %s", r.status,
            r.body);
    api("GET", gw_port, "/v1/refunds/RT-1", key2, NULL, NULL, &r);
    T_CHECK(strstr(r.body, "\"submission\":{\"attempts\":1,\"error\":\"no_answer\","
                           "\"state\":\"pending\"}") != NULL,
            "unreachable channel: %s", r.body);
    /* The channel is back: the pending refund is submitted again (what
     * serve's refund-retry job runs) and completed by its callback. */
    t2_channel(sim_base, "sim", id.merchant_serial);
    struct po_store *s = t_open(url);
    int n = 0;
    T_CHECK(po_refund_submit_pending(s, NULL, mkey, 0, 100, &n) == PO_OK && n == 1,
            "resubmission: %d submitted", n);
    po_store_close(s);
    T_CHECK(wait_for("SELECT COUNT(*) FROM refund WHERE out_refund_no = ? AND status = 'SUCCESS'",
                     "RT-1", 1),
            "RT-1 did not reach SUCCESS after resubmission");
    /* A merchant key the channel does not know: SIGN_ERROR, signed by the
     * platform -> the refund is closed and its amount free again. */
    t2_channel(sim_base, "other", stranger.merchant_serial);
    api("POST", gw_port, "/v1/refunds", key2, "t2-rt-2",
        "{\"out_trade_no\":\"S-0001\",\"out_refund_no\":\"RT-2\",\"amount\":500}", &r);
    T_CHECK(r.status == 201, "t2 refund 2: %ld %s", r.status, r.body);
    api("GET", gw_port, "/v1/refunds/RT-2", key2, NULL, NULL, &r);
    T_CHECK(jstr_is(&r, "status", "CLOSED") &&
                strstr(r.body, "\"error\":\"SIGN_ERROR\",\"state\":\"rejected\""),
            "refused refund: %s", r.body);
    T_CHECK(q1("SELECT refund_reserved FROM pay_order WHERE tenant_id = 't2' AND out_trade_no = ?",
               "S-0001") == 300,
            "refused refund: reservation not released");
    api("GET", gw_port, "/v1/alerts", key2, NULL, NULL, &r);
    T_CHECK(strstr(r.body, "\"reason\":\"refund_rejected_by_channel\"") != NULL,
            "refused refund: alert %s", r.body);
    T_CHECK(q1("SELECT COUNT(*) FROM journal WHERE tenant_id = 't2' AND kind = 'REFUND'", NULL) ==
                1,
            "t2 refund journals");
    /* Issue 13 item 10: an account without the merchant's API key cannot
     * sign a refund request. A pending refund (recorded while the channel
     * was unreachable) stays pending, said, and nothing is sent (port 1
     * would answer no_answer); a new refund request is refused at once
     * and nothing is recorded. */
    t2_channel("http://127.0.0.1:1", "sim", id.merchant_serial);
    api("POST", gw_port, "/v1/refunds", key2, "t2-rt-3",
        "{\"out_trade_no\":\"S-0001\",\"out_refund_no\":\"RT-3\",\"amount\":100}", &r);
    T_CHECK(r.status == 201, "t2 refund 3: %ld %s", r.status, r.body);
    run("channel set --tenant t2 --channel wechatpay --mchid %s --appid %s --apiv3-key-file "
        "sim/apiv3.key --platform-cert-file sim/wechatpay_platform_cert.pem"
        " --api-base-url http://127.0.0.1:1",
        id.mchid, id.appid);
    s = t_open(url);
    T_CHECK(po_refund_submit_pending(s, NULL, mkey, 0, 100, &n) == PO_OK,
            "resubmission without a key");
    po_store_close(s);
    api("GET", gw_port, "/v1/refunds/RT-3", key2, NULL, NULL, &r);
    T_CHECK(strstr(r.body, "\"error\":\"no_merchant_key\",\"state\":\"pending\"") != NULL,
            "pending refund without a merchant key: %s", r.body);
    api("POST", gw_port, "/v1/refunds", key2, "t2-rt-4",
        "{\"out_trade_no\":\"S-0001\",\"out_refund_no\":\"RT-4\",\"amount\":100}", &r);
    T_CHECK(has_code(&r, 409, "no_merchant_key"), "no merchant key: %ld %s", r.status, r.body);
    T_CHECK(q1("SELECT COUNT(*) FROM refund WHERE tenant_id = 't2' AND out_refund_no = ?",
               "RT-4") == 0 &&
                q1("SELECT refund_reserved FROM pay_order WHERE tenant_id = 't2' AND"
                   " out_trade_no = ?",
                   "S-0001") == 400,
            "a refused refund request recorded something");
    /* The key configured again: the pending refund is submitted, once. */
    t2_channel(sim_base, "sim", id.merchant_serial);
    s = t_open(url);
    T_CHECK(po_refund_submit_pending(s, NULL, mkey, 0, 100, &n) == PO_OK && n == 1,
            "resubmission with the key again: %d submitted", n);
    po_store_close(s);
    T_CHECK(wait_for("SELECT COUNT(*) FROM refund WHERE out_refund_no = ? AND status = 'SUCCESS'",
                     "RT-3", 1),
            "RT-3 did not reach SUCCESS once the key was configured again");
}

/* Issue 11, finding 2: a channel refund API that accepts connections and
 * never answers. Ten concurrent refund requests of tenant t2 must not take
 * the pool's connections (8) from everyone else: t1's reads and callbacks
 * are served meanwhile, at once. Before the fix each request held its pool
 * connection for the channel's 10 s timeout, and t1 got 503 after 2 s.
 * Issue 27: the outbound share is work-conserving — t2, alone in
 * submitting refunds, may have all ten with the channel (the limit is
 * PO_OUTBOUND_MAX); once t1 submits one too, t1's goes through and t2's
 * next one, over its share of PO_OUTBOUND_PER_TENANT, stays pending
 * (outbound_busy) for the retry job. */
struct silent_refund {
    char body[160], idem[32];
    struct resp r;
    atomic_int *answered; /* how many of the ten have their answer */
};
static void *silent_refund_one(void *arg)
{
    struct silent_refund *a = arg;
    api("POST", gw_port, "/v1/refunds", key2, a->idem, a->body, &a->r);
    atomic_fetch_add(a->answered, 1);
    return NULL;
}

/* t2's order no of 500 on the simulator, paid through t2's callback URL. */
static void silent_paid_order(const char *no, const char *txn)
{
    struct resp r;
    char order[160];
    snprintf(order, sizeof order,
             "{\"merchant\":\"m1\",\"out_trade_no\":\"%s\",\"amount\":500,"
             "\"channel\":\"wechatpay\"}",
             no);
    api("POST", gw_port, "/v1/orders", key2, NULL, order, &r);
    T_CHECK(r.status == 201, "silent: order %s: %ld %s", no, r.status, r.body);
    run("sim pay --dir sim --order %s:500 --txn %s --notify-url "
        "http://127.0.0.1:%u/notify/wechatpay/t2",
        no, txn, gw_port);
}

static void test_silent_channel(void)
{
    int bh = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (bh < 0 || bind(bh, (struct sockaddr *)&sa, sizeof sa) || listen(bh, 64) ||
        getsockname(bh, (struct sockaddr *)&sa, &sl))
        die("black hole listener");
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
    t2_channel(base, "sim", id.merchant_serial); /* accepts, never answers */
    enum { N = 10 };
    struct silent_refund a[N];
    pthread_t th[N];
    atomic_int answered = 0;
    /* Every order and payment first: what runs while the ten hang is only
     * what the case is about (a slow process start under a sanitizer must
     * not use up the channel's timeout they hang on). */
    for (int i = 0; i <= N; i++) {
        char no[16], txn[40];
        snprintf(no, sizeof no, "SL-%04d", i < N ? i : 11);
        snprintf(txn, sizeof txn, "42000000000000000000000095%02d", i < N ? i : 11);
        silent_paid_order(no, txn);
    }
    for (int i = 0; i < N; i++) {
        snprintf(a[i].body, sizeof a[i].body,
                 "{\"out_trade_no\":\"SL-%04d\",\"out_refund_no\":\"SLR-%d\",\"amount\":100}", i,
                 i);
        snprintf(a[i].idem, sizeof a[i].idem, "silent-%d", i);
        a[i].answered = &answered;
    }
    struct resp r;
    api("POST", gw_port, "/v1/orders", key1, NULL,
        "{\"merchant\":\"m1\",\"out_trade_no\":\"SL-T0001\",\"amount\":700,"
        "\"channel\":\"wechatpay\"}",
        &r);
    T_CHECK(r.status == 201, "silent: t1 order %ld %s", r.status, r.body);
    for (int i = 0; i < N; i++)
        pthread_create(&th[i], NULL, silent_refund_one, &a[i]);
    /* t1 starts once all ten are with the channel: their connections
     * accepted by the black hole (held open, never answered). A fixed pause
     * was too short once on a loaded machine: the tenth was still on its way
     * when t1 became active, so t2 was no longer alone and it stayed pending. */
    int held[N], nheld = 0;
    for (uint64_t until = po_now_us() + 30000000; nheld < N && po_now_us() < until;) {
        struct pollfd pf = {.fd = bh, .events = POLLIN};
        if (poll(&pf, 1, 100) == 1 && (held[nheld] = accept(bh, NULL, NULL)) >= 0)
            nheld++;
    }
    T_CHECK(nheld == N, "silent: %d of t2's %d refunds reached the channel in 30 s", nheld, N);
    /* Meanwhile, tenant t1: a read and a callback, each at once. */
    uint64_t t0 = po_now_us();
    api("GET", gw_port, "/v1/balances", key1, NULL, NULL, &r);
    uint64_t read_ms = (po_now_us() - t0) / 1000;
    /* Waiting behind t2's would take the channel's whole timeout
     * (PO_API_TIMEOUT_S, 10 s); half of it tells the two apart on a
     * loaded machine (a sanitizer build's process start alone is 0.1-1 s). */
    const uint64_t not_waiting_ms = PO_API_TIMEOUT_S * 1000 / 2;
    T_CHECK(r.status == 200 && read_ms < not_waiting_ms, "silent: t1's read %ld after %llu ms",
            r.status, (unsigned long long)read_ms);
    t0 = po_now_us();
    sim_pay("SL-T0001:700");
    uint64_t pay_ms = (po_now_us() - t0) / 1000;
    T_CHECK(q1("SELECT COUNT(*) FROM pay_order WHERE tenant_id = 't1' AND out_trade_no = ? AND"
               " status = 'PAID'",
               "SL-T0001") == 1 &&
                pay_ms < not_waiting_ms,
            "silent: t1's callback credited after %llu ms", (unsigned long long)pay_ms);
    /* t1 submits a refund while t2's ten wait: t1's share is free. */
    api("POST", gw_port, "/v1/refunds", key1, "silent-t1",
        "{\"out_trade_no\":\"SL-T0001\",\"out_refund_no\":\"SLR-T1\",\"amount\":100}", &r);
    T_CHECK(r.status == 201 && !strstr(r.body, "outbound_busy"),
            "silent: t1's refund while t2's wait: %ld %s", r.status, r.body);
    /* ... and t2's eleventh, over its share while t1 is active, waits —
     * if t2's ten still hang when it is answered. They hang for the
     * channel's 10 s timeout; should the steps above have outlasted it on
     * a loaded machine, t2's share is free again and the eleventh rightly
     * goes to the channel: said, and the rest of the case still checked. */
    api("POST", gw_port, "/v1/refunds", key2, "silent-11",
        "{\"out_trade_no\":\"SL-0011\",\"out_refund_no\":\"SLR-11\",\"amount\":100}", &r);
    int ten_answered = atomic_load(&answered);
    T_CHECK(r.status == 201, "silent: t2's eleventh refund: %ld %s", r.status, r.body);
    api("GET", gw_port, "/v1/refunds/SLR-11", key2, NULL, NULL, &r);
    if (ten_answered == 0)
        T_CHECK(strstr(r.body, "\"error\":\"outbound_busy\",\"state\":\"pending\""),
                "silent: t2's eleventh refund, over its share while t1 is active: %s", r.body);
    else
        t_figure("# api[%s] silent: %d of t2's ten had their answer before the eleventh's: its"
                 " share check not made (%s)\n",
                 backend, ten_answered, r.body);
    int busy = 0, no_answer = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        T_CHECK(a[i].r.status == 201, "silent refund %d: %ld %s", i, a[i].r.status, a[i].r.body);
        char path[64];
        snprintf(path, sizeof path, "/v1/refunds/SLR-%d", i);
        api("GET", gw_port, path, key2, NULL, NULL, &r);
        busy += strstr(r.body, "\"error\":\"outbound_busy\",\"state\":\"pending\"") != NULL;
        no_answer += strstr(r.body, "\"error\":\"no_answer\",\"state\":\"pending\"") != NULL;
    }
    T_CHECK(no_answer == N && busy == 0,
            "silent: %d of t2's %d refunds, alone, waited for the channel (all may: the limit is"
            " %d), %d left pending",
            no_answer, N, PO_OUTBOUND_MAX, busy);
    t_figure("# api[%s] silent refund API: %d concurrent t2 refunds (%d waited for the channel,"
             " %d pending); meanwhile t1 read in %llu ms, t1 callback credited in %llu ms\n",
             backend, N, no_answer, busy, (unsigned long long)read_ms, (unsigned long long)pay_ms);
    for (int i = 0; i < nheld; i++)
        close(held[i]);
    close(bh);
    char sim_base[64];
    snprintf(sim_base, sizeof sim_base, "http://127.0.0.1:%u", sim_port);
    t2_channel(sim_base, "sim", id.merchant_serial);
    /* The channel is back: the retry job's work submits all ten. */
    struct po_store *s = t_open(url);
    int n = 0;
    T_CHECK(po_refund_submit_pending(s, NULL, mkey, 0, 100, &n) == PO_OK && n == N + 1,
            "silent: %d of %d resubmitted", n, N + 1);
    po_store_close(s);
}

/* Issue 27, finding 6: the API's per-tenant share is work-conserving. One
 * tenant alone with 64 concurrent connections creating orders is never
 * refused (before: only half the workers, 503 tenant_busy for the rest);
 * with another tenant active, the flooding one is held to its share and
 * the other's requests are all served. */
struct flooder {
    unsigned port;
    const char *key;
    char prefix[32];
    int n, refused, failed;
    struct resp r;
};

static void *flood_one(void *arg)
{
    struct flooder *f = arg;
    struct resp *mine = &f->r;
    for (int i = 0; i < f->n; i++) {
        char body[192];
        snprintf(body, sizeof body,
                 "{\"merchant\":\"m1\",\"out_trade_no\":\"%s-%d\",\"amount\":100}", f->prefix, i);
        api("POST", f->port, "/v1/orders", f->key, NULL, body, mine);
        f->refused += mine->status == 503;
        f->failed += mine->status != 201 && mine->status != 503;
    }
    return NULL;
}

/* threads x per orders of the key's tenant, started (flood_join ends them). */
static void flood(const char *key, const char *tag, int threads, int per, pthread_t *th,
                  struct flooder *f)
{
    for (int i = 0; i < threads; i++) {
        f[i].port = gw_port;
        f[i].key = key;
        f[i].n = per;
        f[i].refused = f[i].failed = 0;
        snprintf(f[i].prefix, sizeof f[i].prefix, "%s-%d", tag, i);
        pthread_create(&th[i], NULL, flood_one, &f[i]);
    }
}

static void flood_join(int threads, pthread_t *th, struct flooder *f, int *refused, int *failed)
{
    *refused = *failed = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        *refused += f[i].refused;
        *failed += f[i].failed;
    }
}

static void test_work_conserving(void)
{
    enum { T = 64, PER = 8 };
    pthread_t th[T];
    static struct flooder f[T];
    int refused = 0, failed = 0;
    flood(key2, "WC", T, PER, th, f);
    flood_join(T, th, f, &refused, &failed);
    T_CHECK(refused == 0 && failed == 0,
            "work-conserving: t2 alone, %d connections: %d of %d refused, %d failed", T, refused,
            T * PER, failed);
    /* Now t2 floods while t1 reads: t1 is never refused. */
    flood(key2, "WF", T, PER, th, f);
    int t1_refused = 0, t1_ok = 0;
    uint64_t worst_us = 0;
    for (int i = 0; i < 40; i++) {
        struct resp r;
        uint64_t t0 = po_now_us();
        api("GET", gw_port, "/v1/balances", key1, NULL, NULL, &r);
        uint64_t us = po_now_us() - t0;
        worst_us = us > worst_us ? us : worst_us;
        t1_refused += r.status == 503;
        t1_ok += r.status == 200;
    }
    /* t1's key id with a wrong secret, during the flood: t1 is under its
     * share, so the key is checked and refused (401) — a forged id gets
     * nobody refused early. */
    char forged[160];
    snprintf(forged, sizeof forged, "%s", key1);
    forged[strlen(forged) - 1] = forged[strlen(forged) - 1] == 'a' ? 'b' : 'a';
    struct resp fr;
    api("GET", gw_port, "/v1/balances", forged, NULL, NULL, &fr);
    int t2_refused = 0, t2_failed = 0;
    flood_join(T, th, f, &t2_refused, &t2_failed);
    T_CHECK(fr.status == 401, "work-conserving: a forged key of t1 during t2's flood: %ld %s",
            fr.status, fr.body);
    T_CHECK(t1_ok == 40 && t1_refused == 0,
            "work-conserving: t1's reads while t2 floods: %d of 40 served, %d refused", t1_ok,
            t1_refused);
    T_CHECK(t2_failed == 0, "work-conserving: t2's flood: %d failed other than 503", t2_failed);
    t_figure("# api[%s] work-conserving share: t2 alone with %d connections, %d orders: %d refused;"
             " then t2 flooding (%d of its %d refused: beyond its share while t1 was active they"
             " waited in t2's lane) and t1 reading: 40 of 40 served, slowest %llu ms\n",
             backend, T, T * PER, refused, t2_refused, T * PER,
             (unsigned long long)(worst_us / 1000));
}

/* Tenant t1's Alipay account: the gateway URL and the app key directory
 * (sim: the key the simulator knows; other: a stranger's). */
static void t1_alipay(const char *gateway, const char *keydir)
{
    run("channel set --tenant t1 --channel alipay --app-id %s --seller-id %s"
        " --alipay-public-key-file sim/alipay_public_key.pem --api-base-url %s"
        " --merchant-private-key-file %s/merchant_private_key.pem"
        " --notify-url http://127.0.0.1:%u/notify/alipay/t1",
        id.app_id, id.seller_id, gateway, keydir, gw_port);
}

/* Alipay refunds: alipay.trade.refund at the (simulated) gateway, signed
 * RSA2 with the app key; the answer's signature checked; the refund
 * notification completes the refund once; refusals close it; no answer
 * leaves it pending for the retry job. */
static void test_alipay_refunds(void)
{
    char gateway[80], err[PO_ERRBUF_SIZE] = "";
    snprintf(gateway, sizeof gateway, "http://127.0.0.1:%u/gateway.do", sim_port);
    t1_alipay(gateway, "sim");
    struct resp r;
    api("POST", gw_port, "/v1/orders", key1, NULL,
        "{\"merchant\":\"m1\",\"out_trade_no\":\"AL-1\",\"amount\":1000,\"channel\":\"alipay\"}",
        &r);
    T_CHECK(r.status == 201, "alipay order: %ld %s", r.status, r.body);
    run("sim pay --dir sim --channel alipay --order AL-1:1000 --txn 2026120222001400000000000001"
        " --notify-url http://127.0.0.1:%u/notify/alipay/t1",
        gw_port);
    T_CHECK(q1("SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ? AND status = 'PAID'",
               "AL-1") == 1,
            "AL-1 not paid");
    int before = sim_refunds();
    api("POST", gw_port, "/v1/refunds", key1, "al-rf-1",
        "{\"out_trade_no\":\"AL-1\",\"out_refund_no\":\"ARF-1\",\"amount\":400}", &r);
    T_CHECK(r.status == 201 && jstr_is(&r, "status", "PROCESSING"), "alipay refund: %ld %s",
            r.status, r.body);
    T_CHECK(sim_refunds() == before + 1, "the gateway recorded %d refunds, expected 1",
            sim_refunds() - before);
    T_CHECK(wait_for("SELECT COUNT(*) FROM refund WHERE out_refund_no = ? AND status = 'SUCCESS'",
                     "ARF-1", 1),
            "ARF-1 did not reach SUCCESS");
    api("GET", gw_port, "/v1/refunds/ARF-1", key1, NULL, NULL, &r);
    T_CHECK(jstr_is(&r, "status", "SUCCESS") && strstr(r.body, "\"state\":\"submitted\""),
            "GET ARF-1: %s", r.body);
    /* Alipay's notification again, three times at once: one reversal. */
    char refund_id[64] = "";
    T_CHECK(sim_refund_id("ARF-1", refund_id, sizeof refund_id), "no refund id for ARF-1");
    struct po_sim_refund rf = {
        "alipay", "AL-1", "2026120222001400000000000001", "ARF-1", refund_id, 400, 1000, "SUCCESS"};
    long st[3];
    refund_cb_3x(&rf, st);
    T_CHECK(st[0] == 200 && st[1] == 200 && st[2] == 200,
            "alipay refund notifications: %ld %ld %ld", st[0], st[1], st[2]);
    T_CHECK(q1("SELECT COUNT(*) FROM journal WHERE kind = 'REFUND' AND out_refund_no = ?",
               "ARF-1") == 1 &&
                q1("SELECT refunded_amount FROM pay_order WHERE out_trade_no = ?", "AL-1") == 400,
            "ARF-1: not exactly one reversal");
    /* payonce's client against the gateway directly: the same
     * out_request_no again is the same refund (no money moves, one record),
     * and the answer's signature is what makes it count. */
    struct po_store *s = t_open(url);
    struct po_channel_account *acct = calloc(1, sizeof *acct);
    struct po_api_resp *ar = calloc(1, sizeof *ar);
    if (!acct || !ar || po_account_fetch(s, mkey, "t1", "alipay", acct, err, sizeof err))
        die(err);
    po_store_close(s);
    const char *biz = "{\"out_trade_no\":\"AL-1\",\"refund_amount\":\"4.00\","
                      "\"out_request_no\":\"ARF-1\"}";
    char why[64] = "";
    T_CHECK(po_alipay_call(acct, "alipay.trade.refund", biz, ar) == PO_OK && ar->status == 200,
            "gateway call: %ld", ar->status);
    json_t *n = po_alipay_resp_verified(acct, ar, "alipay.trade.refund", why, sizeof why);
    T_CHECK(n && strcmp(json_string_value(json_object_get(n, "code")) ?: "", "10000") == 0 &&
                strcmp(json_string_value(json_object_get(n, "fund_change")) ?: "", "N") == 0 &&
                strcmp(json_string_value(json_object_get(n, "refund_fee")) ?: "", "4.00") == 0,
            "repeated out_request_no: %s (%s)", ar->body, why);
    json_decref(n);
    T_CHECK(sim_refunds() == before + 1, "a repeated out_request_no made a second refund");
    char *amt = strstr(ar->body, "\"4.00\"");
    if (amt)
        amt[1] = '9'; /* the signed text changed: not Alipay's answer any more */
    n = po_alipay_resp_verified(acct, ar, "alipay.trade.refund", why, sizeof why);
    T_CHECK(amt && !n && strcmp(why, "bad_signature") == 0, "tampered answer accepted (%s)", why);
    json_decref(n);
    po_channel_account_free(acct);
    free(acct);
    po_api_resp_release(ar);
    free(ar);
    /* No answer: stays pending; the retry job submits it once the gateway
     * is back, and the notification completes it. */
    t1_alipay("http://127.0.0.1:1/gateway.do", "sim");
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"AL-1\",\"out_refund_no\":\"ARF-2\",\"amount\":300}", &r);
    api("GET", gw_port, "/v1/refunds/ARF-2", key1, NULL, NULL, &r);
    T_CHECK(jstr_is(&r, "status", "PROCESSING") &&
                strstr(r.body, "\"error\":\"no_answer\",\"state\":\"pending\""),
            "unreachable gateway: %s", r.body);
    t1_alipay(gateway, "sim");
    s = t_open(url);
    int done = 0;
    T_CHECK(po_refund_submit_pending(s, NULL, mkey, 0, 100, &done) == PO_OK && done == 1,
            "alipay resubmission: %d submitted", done);
    po_store_close(s);
    T_CHECK(wait_for("SELECT COUNT(*) FROM refund WHERE out_refund_no = ? AND status = 'SUCCESS'",
                     "ARF-2", 1),
            "ARF-2 did not reach SUCCESS after resubmission");
    /* An app key Alipay does not know: isv.invalid-signature (signed by
     * Alipay) decides nothing — the refund was never made, and the key is
     * the tenant's to fix: the refund stays pending with the code shown,
     * its amount still reserved; with the right key the retry job submits
     * it. */
    t1_alipay(gateway, "other");
    api("POST", gw_port, "/v1/refunds", key1, "al-rf-3",
        "{\"out_trade_no\":\"AL-1\",\"out_refund_no\":\"ARF-3\",\"amount\":300}", &r);
    api("GET", gw_port, "/v1/refunds/ARF-3", key1, NULL, NULL, &r);
    T_CHECK(jstr_is(&r, "status", "PROCESSING") &&
                strstr(r.body, "\"error\":\"isv.invalid-signature\",\"state\":\"pending\""),
            "alipay refund signed with a key Alipay does not have: %s", r.body);
    T_CHECK(q1("SELECT refund_reserved FROM pay_order WHERE out_trade_no = ?", "AL-1") == 1000,
            "the pending refund's reservation: %lld, expected 1000",
            (long long)q1("SELECT refund_reserved FROM pay_order WHERE out_trade_no = ?", "AL-1"));
    t1_alipay(gateway, "sim");
    s = t_open(url);
    done = 0;
    T_CHECK(po_refund_submit_pending(s, NULL, mkey, 0, 100, &done) == PO_OK && done == 1,
            "ARF-3 resubmitted with the right key: %d submitted", done);
    po_store_close(s);
    T_CHECK(wait_for("SELECT COUNT(*) FROM refund WHERE out_refund_no = ? AND status = 'SUCCESS'",
                     "ARF-3", 1),
            "ARF-3 did not reach SUCCESS after resubmission");
    /* A business refusal (40004): the trade was paid as far as payonce
     * knows, but the gateway never saw it -> ACQ.TRADE_NOT_EXIST closes
     * the refund for good: its amount is free again, an alert. */
    api("POST", gw_port, "/v1/orders", key1, NULL,
        "{\"merchant\":\"m1\",\"out_trade_no\":\"AL-2\",\"amount\":500,\"channel\":\"alipay\"}",
        &r);
    s = t_open(url);
    struct po_event ev = t_pay_event("AL-2", "2026120222001400000000000002", 500);
    memcpy(ev.channel, "alipay", 7);
    memcpy(ev.tenant, "t1", 3);
    T_CHECK(t_apply(s, NULL, &ev).kind == PO_OUT_APPLIED, "AL-2 paid outside the simulator");
    po_store_close(s);
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"AL-2\",\"out_refund_no\":\"ARF-4\",\"amount\":500}", &r);
    api("GET", gw_port, "/v1/refunds/ARF-4", key1, NULL, NULL, &r);
    T_CHECK(jstr_is(&r, "status", "CLOSED") &&
                strstr(r.body, "\"error\":\"ACQ.TRADE_NOT_EXIST\",\"state\":\"rejected\""),
            "refund of a trade the channel does not know: %s", r.body);
    T_CHECK(q1("SELECT refund_reserved FROM pay_order WHERE out_trade_no = ?", "AL-2") == 0 &&
                q1("SELECT COUNT(*) FROM alert WHERE reason = 'refund_rejected_by_channel' AND"
                   " out_trade_no = ?",
                   "AL-2") == 1,
            "refused alipay refund: reservation %lld (expected 0), an alert",
            (long long)q1("SELECT refund_reserved FROM pay_order WHERE out_trade_no = ?", "AL-2"));
    T_CHECK(q1("SELECT COUNT(*) FROM journal WHERE kind = 'REFUND' AND out_trade_no = ?", "AL-1") ==
                    3 &&
                q1("SELECT refunded_amount FROM pay_order WHERE out_trade_no = ?", "AL-1") == 1000,
            "AL-1: three reversals, 1000 refunded");
}

/* Issue 13 item 9: money parked in suspense back to the payer. The
 * operator's action (po_alert_refund, what `payonce alerts refund` runs)
 * submits a refund of exactly the suspense payment to the (simulated)
 * channel, naming its transaction; the channel's notification moves the
 * money suspense -> clearing through the engine and resolves the alert.
 * Four operators at once with four numbers: one refund. */
struct srefund_racer {
    pthread_barrier_t *go;
    const char *alert;
    char no[32];
    po_err rc;
    bool created;
};

static void *srefund_one(void *arg)
{
    struct srefund_racer *a = arg;
    struct po_store *s = t_open(url);
    struct po_suspense_refund r;
    char err[PO_ERRBUF_SIZE] = "";
    pthread_barrier_wait(a->go);
    a->rc = po_alert_refund(&(struct po_door){s, NULL}, NULL, mkey, "t1", a->alert, a->no, "ops",
                            "the payer paid twice", &r, err, sizeof err);
    a->created = a->rc == PO_OK && r.created;
    po_store_close(s);
    return NULL;
}

/* The simulator's refund record for out_refund_no names transaction txn. */
static bool sim_refunded_txn(const char *out_refund_no, const char *txn)
{
    char path[512], *lines = NULL, want[160];
    size_t len = 0;
    snprintf(path, sizeof path, "%s/sim/refunds.jsonl", dir);
    snprintf(want, sizeof want, "\"txn\":\"%s\",\"out_refund_no\":\"%s\"", txn, out_refund_no);
    if (po_file_read(path, 1 << 20, &lines, &len))
        return false;
    bool found = strstr(lines, want) != NULL;
    free(lines);
    return found;
}

static int64_t t1_balance(const char *account)
{
    return q1("SELECT COALESCE(SUM(balance), 0) FROM account_balance WHERE tenant_id = 't1' AND"
              " account = ?",
              account);
}

/* Four operators at once, numbers PREFIX-1..4, on one alert: exactly one
 * refund is created (the winner's number, NULL if not), three refused. */
static const char *srefund_race(const char *alert, const char *prefix, struct srefund_racer rr[4])
{
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 4);
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        rr[i] = (struct srefund_racer){&go, alert, "", PO_OK, false};
        snprintf(rr[i].no, sizeof rr[i].no, "%s-%d", prefix, i + 1);
        if (pthread_create(&th[i], NULL, srefund_one, &rr[i]))
            die("pthread_create");
    }
    int created = 0, refused = 0;
    const char *winner = NULL;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        if (rr[i].created)
            created++, winner = rr[i].no;
        else if (rr[i].rc == PO_ERR_CONFLICT)
            refused++;
    }
    pthread_barrier_destroy(&go);
    T_CHECK(created == 1 && refused == 3, "%s: four operators at once: %d refunds, %d refused",
            prefix, created, refused);
    return created == 1 ? winner : NULL;
}

static void test_suspense_refunds(void)
{
    char gateway[80];
    snprintf(gateway, sizeof gateway, "http://127.0.0.1:%u/gateway.do", sim_port);
    t1_alipay(gateway, "sim");
    struct resp r;
    int64_t suspense0 = t1_balance("suspense");
    /* WeChat Pay: SP-0001 paid twice. */
    api("POST", gw_port, "/v1/orders", key1, NULL,
        "{\"merchant\":\"m1\",\"out_trade_no\":\"SP-0001\",\"amount\":800,\"channel\":"
        "\"wechatpay\"}",
        &r);
    T_CHECK(r.status == 201, "SP-0001: %ld %s", r.status, r.body);
    const char *txn2 = "4200000000000000000000009102";
    sim_pay("SP-0001:800 --txn 4200000000000000000000009101");
    T_CHECK(t_cli_status(dir, bin, url,
                         "sim pay --dir sim --order SP-0001:800 --txn %s --notify-url"
                         " http://127.0.0.1:%u/notify/wechatpay/t1",
                         txn2, gw_port) == 1,
            "the second payment of SP-0001 is not credited");
    T_CHECK(t1_balance("suspense") == suspense0 - 800, "SP-0001's second payment in suspense");
    char alert[160];
    struct srefund_racer rr[4];
    snprintf(alert, sizeof alert, "wechatpay:%s:PAY_SUCCESS|duplicate_payment", txn2);
    int before = sim_refunds();
    const char *winner = srefund_race(alert, "SRF", rr);
    if (!winner)
        return;
    T_CHECK(sim_refunds() == before + 1, "the channel got %d refunds", sim_refunds() - before);
    T_CHECK(sim_refunded_txn(winner, txn2), "%s did not name the second payment %s", winner, txn2);
    T_CHECK(wait_for("SELECT COUNT(*) FROM refund WHERE out_refund_no = ? AND status = 'SUCCESS'",
                     winner, 1),
            "%s did not reach SUCCESS", winner);
    T_CHECK(t1_balance("suspense") == suspense0, "SP-0001's suspense not cleared: %lld",
            (long long)(t1_balance("suspense") - suspense0));
    T_CHECK(q1("SELECT refund_reserved + refunded_amount FROM pay_order WHERE tenant_id = 't1'"
               " AND out_trade_no = ?",
               "SP-0001") == 0,
            "the order's own refunds untouched");
    T_CHECK(q1("SELECT COUNT(*) FROM alert WHERE tenant_id = 't1' AND alert_key = ? AND"
               " state = 'resolved' AND state_by = 'payonce'",
               alert) == 1,
            "the alert resolved by payonce");
    T_CHECK(q1("SELECT COUNT(*) FROM alert_action WHERE tenant_id = 't1' AND alert_key = ?",
               alert) == 2,
            "audit: refund, refunded");
    T_CHECK(q1("SELECT COUNT(*) FROM outbox_event WHERE tenant_id = 't1' AND type = ?",
               "suspense.refunded") == 1,
            "one suspense.refunded event");
    char path[64], key[120];
    snprintf(path, sizeof path, "/v1/refunds/%s", winner);
    snprintf(key, sizeof key, "wechatpay:%s:PAY_SUCCESS", txn2);
    api("GET", gw_port, path, key1, NULL, NULL, &r);
    T_CHECK(r.status == 200 && jstr_is(&r, "suspense_key", key) &&
                strstr(r.body, "\"txn_id\":\"4200000000000000000000009102\"") &&
                jstr_is(&r, "status", "SUCCESS"),
            "GET %s: %s", path, r.body);
    /* The channel's notification three more times at once: one reversal. */
    char refund_id[64] = "";
    T_CHECK(sim_refund_id(winner, refund_id, sizeof refund_id), "no refund id for %s", winner);
    struct po_sim_refund rf = {"wechatpay", "SP-0001", txn2, winner,
                               refund_id,   800,       800,  "SUCCESS"};
    long st[3];
    refund_cb_3x(&rf, st);
    T_CHECK(st[0] == 204 && st[1] == 204 && st[2] == 204, "redelivered: %ld %ld %ld", st[0], st[1],
            st[2]);
    T_CHECK(q1("SELECT COUNT(*) FROM journal WHERE kind = 'REFUND' AND out_refund_no = ?",
               winner) == 1 &&
                t1_balance("suspense") == suspense0,
            "one reversal out of suspense");

    /* Alipay: AP-1 closed, then paid: paid_after_close, refunded by trade_no. */
    api("POST", gw_port, "/v1/orders", key1, NULL,
        "{\"merchant\":\"m1\",\"out_trade_no\":\"AP-1\",\"amount\":600,\"channel\":\"alipay\"}",
        &r);
    api("POST", gw_port, "/v1/orders/AP-1/close", key1, NULL, NULL, &r);
    T_CHECK(jstr_is(&r, "status", "CLOSED"), "AP-1 closed: %s", r.body);
    const char *atxn = "2026120322001400000000009201";
    T_CHECK(t_cli_status(dir, bin, url,
                         "sim pay --dir sim --channel alipay --order AP-1:600 --txn %s"
                         " --notify-url http://127.0.0.1:%u/notify/alipay/t1",
                         atxn, gw_port) == 1,
            "AP-1 paid after close: not credited");
    snprintf(alert, sizeof alert, "alipay:%s:PAY_SUCCESS|paid_after_close", atxn);
    struct po_store *s = t_open(url);
    struct po_suspense_refund sr;
    char err[PO_ERRBUF_SIZE] = "";
    T_CHECK(po_alert_refund(&(struct po_door){s, NULL}, NULL, mkey, "t1", alert, "SRA-1", "ops",
                            "paid a closed order", &sr, err, sizeof err) == PO_OK &&
                sr.created && strcmp(sr.submit_state, "submitted") == 0,
            "alipay suspense refund: %s (%s)", err, sr.submit_state);
    po_store_close(s);
    T_CHECK(sim_refunded_txn("SRA-1", atxn), "SRA-1 did not name trade %s", atxn);
    T_CHECK(wait_for("SELECT COUNT(*) FROM refund WHERE out_refund_no = ? AND status = 'SUCCESS'",
                     "SRA-1", 1),
            "SRA-1 did not reach SUCCESS");
    T_CHECK(t1_balance("suspense") == suspense0, "AP-1's suspense not cleared");
    T_CHECK(q1("SELECT COUNT(*) FROM pay_order WHERE tenant_id = 't1' AND out_trade_no = ? AND"
               " status = 'CLOSED' AND refunded_amount = 0",
               "AP-1") == 1,
            "AP-1 stays closed, nothing refunded on it");
    T_CHECK(q1("SELECT COUNT(*) FROM alert WHERE tenant_id = 't1' AND alert_key = ? AND"
               " state = 'resolved'",
               alert) == 1,
            "AP-1's alert resolved");
    /* A short payment (refused: amount_mismatch, no money on the books):
     * four operators refund it at once -> parked once, refunded once; the
     * order still takes its genuine payment. */
    api("POST", gw_port, "/v1/orders", key1, NULL,
        "{\"merchant\":\"m1\",\"out_trade_no\":\"SM-0001\",\"amount\":500,\"channel\":"
        "\"wechatpay\"}",
        &r);
    const char *mtxn = "4200000000000000000000009301";
    T_CHECK(t_cli_status(dir, bin, url,
                         "sim pay --dir sim --order SM-0001:450 --txn %s --notify-url"
                         " http://127.0.0.1:%u/notify/wechatpay/t1",
                         mtxn, gw_port) == 1,
            "a short payment is not credited");
    snprintf(alert, sizeof alert, "wechatpay:%s:PAY_SUCCESS|amount_mismatch", mtxn);
    winner = srefund_race(alert, "SRM", rr);
    T_CHECK(winner && sim_refunded_txn(winner, mtxn), "the short payment's refund names %s", mtxn);
    T_CHECK(winner && wait_for("SELECT COUNT(*) FROM refund WHERE out_refund_no = ? AND"
                               " status = 'SUCCESS'",
                               winner, 1),
            "the short payment's refund did not complete");
    T_CHECK(t1_balance("suspense") == suspense0, "the short payment left suspense");
    T_CHECK(q1("SELECT COUNT(*) FROM journal WHERE tenant_id = 't1' AND kind = 'SUSPENSE' AND"
               " out_trade_no = ?",
               "SM-0001") == 1,
            "parked once");
    sim_pay("SM-0001:500 --txn 4200000000000000000000009302");
    T_CHECK(q1("SELECT COUNT(*) FROM pay_order WHERE tenant_id = 't1' AND out_trade_no = ? AND"
               " status = 'PAID'",
               "SM-0001") == 1,
            "SM-0001 paid by its genuine payment");
    s = t_open(url);
    T_CHECK(t_verify(s) == 0, "verify after suspense refunds");
    po_store_close(s);
}

/* GET /v1/orders (issue 13 item 7): every order of the tenant once, in
 * pages, in creation order; filters; bad parameters are 400. */
/* Walks a paged list route (path?limit=N…) to its end: each item to
 * each(); false when a page is not a 200 list. *pages counts the pages. */
static bool walk_pages(const char *route, int limit, void (*each)(json_t *item, void *ctx),
                       void *ctx, int *pages)
{
    char path[600];
    snprintf(path, sizeof path, "%s?limit=%d", route, limit);
    *pages = 0;
    for (;;) {
        struct resp r;
        api("GET", gw_port, path, key1, NULL, NULL, &r);
        json_t *j = json_loads(r.body, 0, NULL);
        json_t *data = json_object_get(j, "data");
        if (r.status != 200 || !json_is_array(data)) {
            json_decref(j);
            return false;
        }
        size_t i;
        json_t *e;
        json_array_foreach(data, i, e) each(e, ctx);
        (*pages)++;
        const char *next = json_string_value(json_object_get(j, "next_cursor"));
        bool more = json_is_true(json_object_get(j, "has_more"));
        if (more && next)
            snprintf(path, sizeof path, "%s?limit=%d&cursor=%s", route, limit, next);
        json_decref(j);
        if (!more || *pages > 200)
            return true;
    }
}

struct journal_walk {
    int seen, lines;
    bool balanced;
};

static void journal_item(json_t *e, void *ctx)
{
    struct journal_walk *w = ctx;
    int64_t sum = 0;
    size_t k;
    json_t *p;
    w->seen++;
    json_array_foreach(json_object_get(e, "postings"), k, p)
    {
        sum += json_integer_value(json_object_get(p, "amount"));
        w->lines++;
    }
    w->balanced = w->balanced && sum == 0;
}

/* ---- closing at the channel (issue 23, item 2) ---- */

/* Whether the simulator recorded that channel closed out_trade_no. */
static bool sim_closed(const char *channel, const char *no)
{
    json_t *r = sim_record("closed", "channel", channel, "out_trade_no", no);
    json_decref(r);
    return r != NULL;
}

/* t1's WeChat Pay account at base, verifying answers with the platform
 * certificate in certdir (sim: the simulator's; other: a stranger's). */
static void t1_wechatpay(const char *base, const char *certdir)
{
    run("channel set --tenant t1 --channel wechatpay --mchid %s --appid %s --apiv3-key-file "
        "sim/apiv3.key --platform-cert-file %s/wechatpay_platform_cert.pem"
        " --api-base-url %s --merchant-private-key-file sim/merchant_private_key.pem"
        " --merchant-serial %s --notify-url http://127.0.0.1:%u/notify/wechatpay/t1",
        id.mchid, id.appid, certdir, base, id.merchant_serial, gw_port);
}

static int64_t pay_journals(const char *no)
{
    return q1("SELECT COUNT(*) FROM journal WHERE tenant_id = 't1' AND kind = 'PAY' AND"
              " out_trade_no = ?",
              no);
}

static bool status_is(const char *no, const char *status)
{
    char sql[160];
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM pay_order WHERE tenant_id = 't1' AND status = '%s' AND"
             " out_trade_no = ?",
             status);
    return q1(sql, no) == 1;
}

static void close_order(const char *no, const char *idem, struct resp *r)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/orders/%s/close", no);
    api("POST", gw_port, path, key1, idem, NULL, r);
}

static void test_close_at_channel(void)
{
    struct resp r;
    char sim_base[64], gateway[80];
    snprintf(sim_base, sizeof sim_base, "http://127.0.0.1:%u", sim_port);
    snprintf(gateway, sizeof gateway, "%s/gateway.do", sim_base);
    /* WeChat Pay, open at the channel: closed there first, then here. */
    order_on("CW-0001", 300, "wechatpay");
    close_order("CW-0001", "cw-1", &r);
    T_CHECK(r.status == 200 && jstr_is(&r, "status", "CLOSED") &&
                sim_closed("wechatpay", "CW-0001"),
            "wechatpay close: %ld %s (closed at the channel: %d)", r.status, r.body,
            sim_closed("wechatpay", "CW-0001"));
    /* Paid at the channel, its notification lost: the channel refuses
     * the close, the query finds the payment, which is credited once;
     * the close is 409 order_paid. */
    order_on("CW-0002", 400, "wechatpay");
    run("sim pay --dir sim --order CW-0002:400 --txn 4200000000000000000000009401 --lose");
    close_order("CW-0002", "cw-2", &r);
    T_CHECK(has_code(&r, 409, "order_paid") && status_is("CW-0002", "PAID") &&
                pay_journals("CW-0002") == 1 && !sim_closed("wechatpay", "CW-0002"),
            "wechatpay close of an order paid at the channel: %ld %s", r.status, r.body);
    /* ... and the lost notification, arriving after all, is a duplicate. */
    unsigned st = t_sim_pay(gw_port, &id, "t1", "CW-0002", "4200000000000000000000009401", 400);
    T_CHECK(st == 204 && pay_journals("CW-0002") == 1, "the late notification: %u, %lld journals",
            st, (long long)pay_journals("CW-0002"));
    /* The channel does not answer: 503 channel_unavailable, the order
     * stays PAYING, nothing is stored under the key. */
    order_on("CW-0003", 500, "wechatpay");
    T_CHECK(t_cli_status(dir, bin, url, "channel check --tenant t1 --channel wechatpay") == 0,
            "channel check, wechatpay: query and close work");
    t1_wechatpay("http://127.0.0.1:1", "sim");
    T_CHECK(t_cli_status(dir, bin, url, "channel check --tenant t1 --channel wechatpay") == 1,
            "channel check, wechatpay unreachable: exit 1");
    close_order("CW-0003", "cw-3", &r);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && r.retry_after[0] &&
                status_is("CW-0003", "PAYING") &&
                q1("SELECT COUNT(*) FROM api_idempotency WHERE idem_key = ?", "cw-3") == 0,
            "wechatpay close, channel unreachable: %ld %s", r.status, r.body);
    /* Answers the platform did not sign (a stranger's certificate stands
     * in for the platform's): not believed, the order stays PAYING. */
    t1_wechatpay(sim_base, "other");
    close_order("CW-0003", "cw-3", &r);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && strstr(r.body, "unsigned") &&
                status_is("CW-0003", "PAYING"),
            "wechatpay close, an answer not signed by the platform: %ld %s", r.status, r.body);
    /* The channel back: the same key closes it. */
    t1_wechatpay(sim_base, "sim");
    close_order("CW-0003", "cw-3", &r);
    T_CHECK(r.status == 200 && !r.replayed && jstr_is(&r, "status", "CLOSED"),
            "wechatpay close once the channel answers: %ld %s", r.status, r.body);
    /* The CLI closes the same way (payonce order close). */
    order_on("CW-0005", 500, "wechatpay");
    order_on("CW-0006", 600, "wechatpay");
    run("sim pay --dir sim --order CW-0006:600 --txn 4200000000000000000000009406 --lose");
    T_CHECK(t_cli_status(dir, bin, url, "order close --tenant t1 --out-trade-no CW-0005") == 0 &&
                status_is("CW-0005", "CLOSED") && sim_closed("wechatpay", "CW-0005"),
            "order close (CLI): closed at the channel and here");
    T_CHECK(t_cli_status(dir, bin, url, "order close --tenant t1 --out-trade-no CW-0006") == 1 &&
                status_is("CW-0006", "PAID") && pay_journals("CW-0006") == 1,
            "order close (CLI) of an order paid at the channel: credited once, exit 1");

    /* Alipay: alipay.trade.close, alipay.trade.query. */
    t1_alipay(gateway, "sim");
    T_CHECK(t_cli_status(dir, bin, url, "channel check --tenant t1 --channel alipay") == 0,
            "channel check, alipay: query and close work");
    /* What alipay-sdk sends: the common parameters (sign included) in the
     * query string, biz_content in the body. The simulated gateway reads
     * both, as Alipay's does. */
    {
        char path[400], *pem = NULL, u[2048], ans[4096] = "", now[24];
        size_t len = 0;
        struct po_privkey *k = NULL;
        struct po_form f = {0}, q = {0}, b = {0};
        snprintf(path, sizeof path, "%s/sim/merchant_private_key.pem", dir);
        time_t bj = time(NULL) + 8 * 3600; /* the gateway's clock: Beijing time */
        struct tm tm;
        gmtime_r(&bj, &tm);
        strftime(now, sizeof now, "%Y-%m-%d %H:%M:%S", &tm);
        const char *kv[][2] = {
            {"app_id", id.app_id}, {"method", "alipay.trade.query"},
            {"format", "JSON"},    {"charset", "utf-8"},
            {"sign_type", "RSA2"}, {"timestamp", now},
            {"version", "1.0"},    {"biz_content", "{\"out_trade_no\":\"CA-9\"}"}};
        bool ok = po_file_read(path, 1 << 16, &pem, &len) == PO_OK &&
                  po_privkey_from_pem(pem, len, &k) == PO_OK;
        for (size_t i = 0; ok && i < sizeof kv / sizeof kv[0]; i++)
            ok = po_form_add(&f, kv[i][0], kv[i][1]) == PO_OK;
        ok = ok && po_alipay_sign_form(k, &f, false) == PO_OK;
        for (int i = 0; ok && i < f.n; i++)
            ok = po_form_add(strcmp(f.p[i].key, "biz_content") ? &q : &b, f.p[i].key, f.p[i].val) ==
                 PO_OK;
        char *qs = ok ? po_form_encode(&q, NULL) : NULL, *bs = ok ? po_form_encode(&b, NULL) : NULL;
        long hst = 0;
        if (qs && bs) {
            snprintf(u, sizeof u, "%s?%s", gateway, qs);
            const char *h[] = {"Content-Type: application/x-www-form-urlencoded;charset=utf-8",
                               NULL};
            struct t_http_req rq = {.method = "POST", .url = u, .headers = h, .body = bs};
            hst = t_http(&rq, ans, sizeof ans, &len);
        }
        T_CHECK(hst == 200 && strstr(ans, "alipay_trade_query_response") &&
                    strstr(ans, "ACQ.TRADE_NOT_EXIST") && !strstr(ans, "isv."),
                "the SDK's request shape at the simulated gateway: %ld %.300s", hst, ans);
        free(qs);
        free(bs);
        free(pem);
        po_form_free(&f);
        po_form_free(&q);
        po_form_free(&b);
        po_privkey_free(k);
    }
    /* never created at the gateway (no precreate, no cashier opened):
     * ACQ.TRADE_NOT_EXIST, nothing there to pay, closed here */
    order_on("CA-1", 300, "alipay");
    close_order("CA-1", NULL, &r);
    T_CHECK(r.status == 200 && jstr_is(&r, "status", "CLOSED") && !sim_closed("alipay", "CA-1"),
            "alipay close: %ld %s", r.status, r.body);
    order_on("CA-2", 600, "alipay");
    run("sim pay --dir sim --channel alipay --order CA-2:600 --txn 2026120422001400000000009402"
        " --lose");
    close_order("CA-2", "ca-2", &r);
    T_CHECK(has_code(&r, 409, "order_paid") && status_is("CA-2", "PAID") &&
                pay_journals("CA-2") == 1,
            "alipay close of a trade paid at the channel: %ld %s", r.status, r.body);
    /* An answer that does not verify with the tenant's Alipay key. */
    order_on("CA-3", 700, "alipay");
    run("channel set --tenant t1 --channel alipay --app-id %s --seller-id %s"
        " --alipay-public-key-file other/alipay_public_key.pem --api-base-url %s"
        " --merchant-private-key-file sim/merchant_private_key.pem"
        " --notify-url http://127.0.0.1:%u/notify/alipay/t1",
        id.app_id, id.seller_id, gateway, gw_port);
    close_order("CA-3", NULL, &r);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && status_is("CA-3", "PAYING"),
            "alipay close, an answer not signed by Alipay: %ld %s", r.status, r.body);
    T_CHECK(t_cli_status(dir, bin, url, "channel check --tenant t1 --channel alipay") == 1,
            "channel check, alipay answers that do not verify: exit 1");
    /* The active order query now runs for Alipay: a payment whose
     * notification was lost is found and credited once. */
    t1_alipay(gateway, "sim");
    order_on("CA-4", 800, "alipay");
    run("sim pay --dir sim --channel alipay --order CA-4:800 --txn 2026120422001400000000009404"
        " --lose");
    struct po_store *s = t_open(url);
    struct po_channel_account *acct = calloc(1, sizeof *acct);
    struct po_query_report qr;
    char err[PO_ERRBUF_SIZE] = "";
    T_CHECK(acct && po_account_fetch(s, mkey, "t1", "alipay", acct, err, sizeof err) == PO_OK &&
                po_order_query_round(s, NULL, acct, 0, 100, &qr, err, sizeof err) == PO_OK &&
                qr.replayed == 1 && qr.failed == 0,
            "alipay order query: %s (%lld replayed, %lld failed)", err, (long long)qr.replayed,
            (long long)qr.failed);
    po_channel_account_free(acct);
    free(acct);
    po_store_close(s);
    T_CHECK(status_is("CA-4", "PAID") && pay_journals("CA-4") == 1 && status_is("CA-3", "PAYING"),
            "alipay order query: CA-4 credited once, CA-3 (not paid) untouched");
    /* An order without a channel account (t2 has none): closed here, as
     * before. */
    api("POST", gw_port, "/v1/orders", key2, NULL,
        "{\"merchant\":\"m1\",\"out_trade_no\":\"CN-0001\",\"amount\":100,"
        "\"channel\":\"wechatpay\"}",
        &r);
    api("POST", gw_port, "/v1/orders/CN-0001/close", key2, NULL, NULL, &r);
    T_CHECK(r.status == 200 && jstr_is(&r, "status", "CLOSED") &&
                !sim_closed("wechatpay", "CN-0001"),
            "close without a channel account: %ld %s", r.status, r.body);
    /* ... nor with an account for notifications only (no API base URL,
     * no merchant key to sign with). */
    run("channel set --tenant t2 --channel wechatpay --mchid %s --appid %s --apiv3-key-file "
        "sim/apiv3.key --platform-cert-file sim/wechatpay_platform_cert.pem",
        id.mchid, id.appid);
    api("POST", gw_port, "/v1/orders", key2, NULL,
        "{\"merchant\":\"m1\",\"out_trade_no\":\"CN-0002\",\"amount\":100,"
        "\"channel\":\"wechatpay\"}",
        &r);
    api("POST", gw_port, "/v1/orders/CN-0002/close", key2, NULL, NULL, &r);
    T_CHECK(r.status == 200 && jstr_is(&r, "status", "CLOSED") &&
                !sim_closed("wechatpay", "CN-0002"),
            "close with an account for notifications only: %ld %s", r.status, r.body);
}

/* ---- outbound calls take the account from serve's cache (issue 46) ---- */

/* payonce_account_loads_total of the in-process gateway (-1: not shown). */
static long account_loads(void)
{
    static const char name[] = "\npayonce_account_loads_total ";
    struct resp m;
    api("GET", gw_port, "/metrics", NULL, NULL, NULL, &m);
    const char *line = m.status == 200 ? strstr(m.body, name) : NULL;
    return line ? strtol(line + sizeof name - 1, NULL, 10) : -1;
}

/* The close at the channel is an outbound call like creating a payment,
 * a refund or a query: its account comes from the gateway's cache, loaded
 * once, and a `channel set` is seen by the very next call (the cache
 * compares the stored version first), not at the next sweep. */
static void test_account_cache(void)
{
    struct resp r;
    char sim_base[64];
    snprintf(sim_base, sizeof sim_base, "http://127.0.0.1:%u", sim_port);
    order_on("ACW-0001", 100, "wechatpay");
    order_on("ACW-0002", 200, "wechatpay");
    order_on("ACW-0003", 300, "wechatpay");
    long before = account_loads();
    close_order("ACW-0001", NULL, &r);
    long first = account_loads();
    T_CHECK(r.status == 200 && jstr_is(&r, "status", "CLOSED") &&
                sim_closed("wechatpay", "ACW-0001") && before >= 0 && first == before + 1,
            "first close: %ld %s; account loads %ld -> %ld (one expected)", r.status, r.body,
            before, first);
    close_order("ACW-0002", NULL, &r);
    T_CHECK(r.status == 200 && sim_closed("wechatpay", "ACW-0002") && account_loads() == first,
            "second close, account unchanged: %ld %s; account loads %ld -> %ld (none expected)",
            r.status, r.body, first, account_loads());
    /* The account now points at no channel: the next call goes there. */
    t1_wechatpay("http://127.0.0.1:1", "sim");
    close_order("ACW-0003", "acw-3", &r);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && status_is("ACW-0003", "PAYING") &&
                !sim_closed("wechatpay", "ACW-0003") && account_loads() == first + 1,
            "close after channel set (unreachable base URL): %ld %s; account loads %ld -> %ld",
            r.status, r.body, first, account_loads());
    /* And back: the very next call reaches the channel again. */
    t1_wechatpay(sim_base, "sim");
    close_order("ACW-0003", "acw-3", &r);
    T_CHECK(r.status == 200 && jstr_is(&r, "status", "CLOSED") &&
                sim_closed("wechatpay", "ACW-0003") && account_loads() == first + 2,
            "close after channel set back: %ld %s; account loads %ld -> %ld", r.status, r.body,
            first + 1, account_loads());
}

/* ---- expiry: closed at the channel by itself (issue 23, item 2) ---- */

static void test_order_expiry(void)
{
    struct resp r;
    /* time_expire: RFC 3339 with its offset, in the future. */
    static const char *const bad[] = {"2001-01-01T00:00:00+08:00", "tomorrow",
                                      "2026-02-31T10:00:00+08:00", "2099-01-01T00:00:00"};
    for (int i = 0; i < 4; i++) {
        char body[200];
        snprintf(body, sizeof body,
                 "{\"merchant\":\"m1\",\"out_trade_no\":\"E-0000\",\"amount\":1,"
                 "\"time_expire\":\"%s\"}",
                 bad[i]);
        api("POST", gw_port, "/v1/orders", key1, NULL, body, &r);
        T_CHECK(has_code(&r, 400, "invalid_parameter") && strstr(r.body, "time_expire"),
                "time_expire %s: %ld %s", bad[i], r.status, r.body);
    }
    /* An hour ahead, written in Beijing time: kept as that instant (UTC). */
    int64_t at = po_clock_now_ms() / 1000 + 3600;
    char te[40], utc[PO_TIME_SIZE], body[240];
    time_t bj = (time_t)(at + 8 * 3600);
    struct tm tm;
    gmtime_r(&bj, &tm);
    strftime(te, sizeof te, "%Y-%m-%dT%H:%M:%S+08:00", &tm);
    po_clock_iso_at(at, utc, sizeof utc);
    snprintf(body, sizeof body,
             "{\"merchant\":\"m1\",\"out_trade_no\":\"E-0001\",\"amount\":100,"
             "\"channel\":\"wechatpay\",\"time_expire\":\"%s\"}",
             te);
    api("POST", gw_port, "/v1/orders", key1, NULL, body, &r);
    T_CHECK(r.status == 201 && jstr_is(&r, "time_expire", utc), "time_expire %s -> %s: %s", te, utc,
            r.body);
    /* The tenant's default: orders created without one expire after it. */
    run("tenant set --tenant t1 --order-ttl 600");
    order_on("E-0002", 200, "wechatpay");
    api("GET", gw_port, "/v1/orders/E-0002", key1, NULL, NULL, &r);
    json_t *j = json_loads(r.body, 0, NULL);
    int64_t ttl = po_clock_unix_of(json_string_value(json_object_get(j, "time_expire"))) -
                  po_clock_unix_of(json_string_value(json_object_get(j, "created_at")));
    json_decref(j);
    T_CHECK(ttl == 600, "the tenant's default expiry: %lld s (%s)", (long long)ttl, r.body);
    /* Expiry passes: E-0001 is closed at the channel, then here; E-0003, paid
     * at the channel with its callback lost, is credited instead. */
    order_on("E-0003", 300, "wechatpay");
    run("sim pay --dir sim --order E-0003:300 --txn 4200000000000000000000009603 --lose");
    exec_sql("UPDATE pay_order SET expires_at = '2001-01-01T00:00:00.000Z' WHERE out_trade_no IN"
             " ('E-0001', 'E-0003')");
    struct po_store *s = t_open(url);
    struct po_expiry_report x;
    char err[PO_ERRBUF_SIZE] = "";
    T_CHECK(po_order_expire_round(s, NULL, NULL, mkey, 100, &x, err, sizeof err) == PO_OK &&
                x.expired == 2 && x.closed == 1 && x.paid == 1 && x.undecided == 0,
            "expiry round: %s (%lld expired, %lld closed, %lld paid, %lld undecided)", err,
            (long long)x.expired, (long long)x.closed, (long long)x.paid, (long long)x.undecided);
    po_store_close(s);
    T_CHECK(
        status_is("E-0001", "CLOSED") && sim_closed("wechatpay", "E-0001") &&
            status_is("E-0003", "PAID") && pay_journals("E-0003") == 1 &&
            status_is("E-0002", "PAYING"),
        "expired: E-0001 closed at the channel and here, E-0003 credited, E-0002 (not due) open");
    T_CHECK(q1("SELECT COUNT(*) FROM outbox_event WHERE tenant_id = 't1' AND type = ?",
               "order.closed") == 1,
            "one order.closed event");
    /* The channel unreachable: the expired order stays PAYING. */
    order_on("E-0004", 400, "wechatpay");
    exec_sql("UPDATE pay_order SET expires_at = '2001-01-01T00:00:00.000Z' WHERE out_trade_no ="
             " 'E-0004'");
    t1_wechatpay("http://127.0.0.1:1", "sim");
    s = t_open(url);
    T_CHECK(po_order_expire_round(s, NULL, NULL, mkey, 100, &x, err, sizeof err) == PO_OK &&
                x.undecided == 1 && status_is("E-0004", "PAYING"),
            "expiry with the channel unreachable: %lld undecided", (long long)x.undecided);
    po_store_close(s);
    /* serve does it by itself, every --query-interval, through its
     * committer. */
    char sim_base[64];
    snprintf(sim_base, sizeof sim_base, "http://127.0.0.1:%u", sim_port);
    t1_wechatpay(sim_base, "sim");
    static const char *const every[] = {"--query-interval", "1", NULL};
    unsigned port = 0;
    pid_t p = t_serve(dir, bin, url, every, &port);
    T_CHECK(wait_for("SELECT COUNT(*) FROM pay_order WHERE status = 'CLOSED' AND out_trade_no = ?",
                     "E-0004", 1),
            "serve did not close the expired order E-0004");
    t_serve_stop(p);
    T_CHECK(sim_closed("wechatpay", "E-0004") && status_is("E-0002", "PAYING"),
            "serve's expiry: E-0004 closed at the channel, E-0002 (not due) open");
}

/* ---- Stripe: query, cancel, refunds (issue 23) ---- */

/* t1's Stripe account; keydir's stripe_api_key (sim: the simulator's;
 * other: a key it does not know; NULL: none, notifications only). */
static void t1_stripe(const char *keydir)
{
    char key[320] = "";
    if (keydir)
        snprintf(key, sizeof key, " --api-key-file %s/stripe_api_key", keydir);
    run("channel set --tenant t1 --channel stripe --webhook-secret-file sim/stripe_webhook_secret"
        "%s --api-base-url http://127.0.0.1:%u",
        key, sim_port);
}

static void stripe_order(const char *no, int64_t amount)
{
    char body[200];
    struct resp r;
    snprintf(body, sizeof body,
             "{\"merchant\":\"m1\",\"out_trade_no\":\"%s\",\"amount\":%lld,"
             "\"currency\":\"USD\",\"channel\":\"stripe\"}",
             no, (long long)amount);
    api("POST", gw_port, "/v1/orders", key1, NULL, body, &r);
    if (r.status != 201)
        die(r.body);
}

/* What the tenant's own code does today: a PaymentIntent for the order,
 * created at (simulated) Stripe with the tenant's key. Its id into pi. */
static void stripe_intent(const char *no, int64_t amount, char *pi, size_t cap)
{
    char u[128], form[200], auth[200], body[4096];
    snprintf(u, sizeof u, "http://127.0.0.1:%u/v1/payment_intents", sim_port);
    snprintf(form, sizeof form, "amount=%lld&currency=usd&metadata%%5Bout_trade_no%%5D=%s",
             (long long)amount, no);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", id.stripe_api_key);
    const char *h[] = {auth, "Content-Type: application/x-www-form-urlencoded", NULL};
    struct t_http_req q = {.method = "POST", .url = u, .headers = h, .body = form};
    size_t len = 0;
    long st = t_http(&q, body, sizeof body, &len);
    json_t *j = json_loads(body, 0, NULL);
    snprintf(pi, cap, "%s", json_string_value(json_object_get(j, "id")) ?: "");
    json_decref(j);
    if (st != 200 || strncmp(pi, "pi_", 3) != 0)
        die(body);
}

static int64_t count_in(const char *sql, const char *arg)
{
    return q1(sql, arg);
}

/* Stripe's search has indexed the PaymentIntent id now (the simulator's
 * search lags otherwise: docs/simulator.md). */
static void sim_indexed(const char *pi)
{
    char path[512];
    snprintf(path, sizeof path, "%s/sim/search_indexed", dir);
    FILE *f = fopen(path, "a");
    if (!f || fprintf(f, "%s\n", pi) < 0 || fclose(f))
        die("cannot write search_indexed");
}

/* The simulator's PaymentIntent's status now ("" when it has none). */
static void sim_intent_status(const char *pi, char *out, size_t cap)
{
    char u[160], auth[200], body[8192];
    snprintf(u, sizeof u, "http://127.0.0.1:%u/v1/payment_intents/%s", sim_port, pi);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", id.stripe_api_key);
    const char *h[] = {auth, NULL};
    struct t_http_req q = {.method = "GET", .url = u, .headers = h};
    size_t len = 0;
    out[0] = '\0';
    if (t_http(&q, body, sizeof body, &len) != 200)
        return;
    json_t *j = json_loads(body, 0, NULL);
    snprintf(out, cap, "%s", json_string_value(json_object_get(j, "status")) ?: "");
    json_decref(j);
}

static void test_stripe_lifecycle(void)
{
    struct resp r;
    char st[32];
    t1_stripe("sim");
    /* Close of an order whose PaymentIntent the tenant's own code made
     * (payonce does not know its id): while Stripe's search has not
     * indexed it, nothing is decided — the order stays PAYING, the
     * PaymentIntent open (closing would let it be paid after the close);
     * once indexed, it is canceled at Stripe first. */
    char pi[64];
    stripe_order("SC-1", 1200);
    stripe_intent("SC-1", 1200, pi, sizeof pi);
    close_order("SC-1", "sc-1", &r);
    sim_intent_status(pi, st, sizeof st);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && status_is("SC-1", "PAYING") &&
                strcmp(st, "requires_payment_method") == 0 && !sim_closed("stripe", "SC-1"),
            "stripe close, the search not indexed: %ld %s (%s at Stripe)", r.status, r.body, st);
    sim_indexed(pi);
    close_order("SC-1", "sc-1b", &r);
    sim_intent_status(pi, st, sizeof st);
    T_CHECK(r.status == 200 && jstr_is(&r, "status", "CLOSED") && sim_closed("stripe", "SC-1") &&
                strcmp(st, "canceled") == 0,
            "stripe close: %ld %s (%s at Stripe)", r.status, r.body, st);
    /* No PaymentIntent known and none found: "not found by search" decides
     * nothing (one made a moment ago is not in it yet). */
    stripe_order("SC-3", 300);
    close_order("SC-3", NULL, &r);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && strstr(r.body, "no_payment_intent_known") &&
                status_is("SC-3", "PAYING"),
            "stripe close without a PaymentIntent: %ld %s", r.status, r.body);
    /* Paid at Stripe, its webhook lost, the search catching up: the search
     * finds the PaymentIntent, retrieved by id it succeeded: credited once
     * with the webhook's key; 409. */
    stripe_order("SC-2", 1500);
    run("sim pay --dir sim --channel stripe --currency USD --order SC-2:1500"
        " --txn pi_000000000000000000009501 --lose");
    sim_indexed("pi_000000000000000000009501");
    close_order("SC-2", "sc-2", &r);
    T_CHECK(has_code(&r, 409, "order_paid") && status_is("SC-2", "PAID") &&
                pay_journals("SC-2") == 1,
            "stripe close of an order paid at Stripe: %ld %s", r.status, r.body);
    T_CHECK(count_in("SELECT COUNT(*) FROM notify_log WHERE source = 'query' AND idem_key = ?",
                     "stripe:pi_000000000000000000009501:PAY_SUCCESS") == 1,
            "the query's payment has the webhook's key");
    /* A key Stripe does not know (401): nothing decided, PAYING. */
    stripe_order("SC-4", 400);
    T_CHECK(t_cli_status(dir, bin, url, "channel check --tenant t1 --channel stripe") == 0,
            "channel check, stripe: query and close work");
    t1_stripe("other");
    T_CHECK(t_cli_status(dir, bin, url, "channel check --tenant t1 --channel stripe") == 1,
            "channel check, stripe with a key it refuses: exit 1");
    close_order("SC-4", NULL, &r);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && status_is("SC-4", "PAYING"),
            "stripe close with a key Stripe refuses: %ld %s", r.status, r.body);
    t1_stripe("sim");
    /* Refunds: POST /v1/refunds at Stripe naming the PaymentIntent payonce
     * holds (the payment's), with payonce's refund as Stripe's
     * Idempotency-Key; the refund.updated webhook completes it, three
     * copies at once: one reversal. Stripe's refund id is kept. */
    int before = sim_refunds();
    api("POST", gw_port, "/v1/refunds", key1, "sr-1",
        "{\"out_trade_no\":\"SC-2\",\"out_refund_no\":\"SR-1\",\"amount\":500}", &r);
    T_CHECK(r.status == 201 && jstr_is(&r, "status", "PROCESSING") && sim_refunds() == before + 1,
            "stripe refund: %ld %s (%d at Stripe)", r.status, r.body, sim_refunds() - before);
    api("GET", gw_port, "/v1/refunds/SR-1", key1, NULL, NULL, &r);
    T_CHECK(strstr(r.body, "\"state\":\"submitted\""), "stripe refund submitted: %s", r.body);
    char refund_id[64] = "";
    T_CHECK(sim_refund_id("SR-1", refund_id, sizeof refund_id) &&
                strncmp(refund_id, "re_", 3) == 0 &&
                q1("SELECT COUNT(*) FROM refund WHERE out_refund_no = 'SR-1' AND"
                   " channel_refund_id = ?",
                   refund_id) == 1,
            "no Stripe refund id for SR-1, or not kept");
    struct po_sim_refund rf = {
        "stripe", "SC-2", "pi_000000000000000000009501", "SR-1", refund_id, 500, 1500, "SUCCESS",
        0,        "USD"};
    long sts[3];
    refund_cb_3x(&rf, sts);
    T_CHECK(sts[0] == 200 && sts[1] == 200 && sts[2] == 200 &&
                count_in("SELECT COUNT(*) FROM journal WHERE kind = 'REFUND' AND"
                         " out_refund_no = ?",
                         "SR-1") == 1 &&
                q1("SELECT refunded_amount FROM pay_order WHERE out_trade_no = ?", "SC-2") == 500,
            "stripe refund webhook x3: %ld %ld %ld", sts[0], sts[1], sts[2]);
    /* The same refund submitted again (a lost answer): Stripe's
     * Idempotency-Key makes it the same refund, no second one. */
    struct po_store *s = t_open(url);
    struct po_channel_account *acct = calloc(1, sizeof *acct);
    char err[PO_ERRBUF_SIZE] = "";
    struct po_refund_answer ans;
    struct po_refund_request rq = {"SC-2", "SR-1", 500,  1500,
                                   "USD",  NULL,   NULL, "pi_000000000000000000009501"};
    T_CHECK(acct && po_account_fetch(s, mkey, "t1", "stripe", acct, err, sizeof err) == PO_OK &&
                po_channel_find("stripe")->refund_submit(acct, &rq, &ans) == PO_OK &&
                ans.decision == PO_REFUND_SUBMITTED && strcmp(ans.refund_id, refund_id) == 0 &&
                sim_refunds() == before + 1,
            "stripe refund again: %s %d %s (%d at Stripe)", err, (int)ans.decision, ans.code,
            sim_refunds() - before);
    /* A payment Stripe does not have (credited in payonce from elsewhere):
     * Stripe answers resource_missing for the PaymentIntent payonce holds,
     * refused for good, the refund CLOSED and its reservation free. */
    stripe_order("SC-6", 900);
    struct po_event ev = t_pay_event("SC-6", "pi_000000000000000000009506", 900);
    memcpy(ev.channel, "stripe", 7);
    memcpy(ev.tenant, "t1", 3);
    memcpy(ev.currency, "USD", 4);
    T_CHECK(t_apply(s, NULL, &ev).kind == PO_OUT_APPLIED, "SC-6 paid outside the simulator");
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"SC-6\",\"out_refund_no\":\"SR-6\",\"amount\":900}", &r);
    api("GET", gw_port, "/v1/refunds/SR-6", key1, NULL, NULL, &r);
    T_CHECK(jstr_is(&r, "status", "CLOSED") && strstr(r.body, "\"state\":\"rejected\"") &&
                strstr(r.body, "resource_missing") &&
                q1("SELECT refund_reserved FROM pay_order WHERE out_trade_no = ?", "SC-6") == 0,
            "stripe refund of a payment Stripe does not have: %s", r.body);
    /* The active query: a payment whose webhook was lost, found by the
     * search once indexed; and one of a PaymentIntent payonce created,
     * retrieved by its id while the search has not indexed it: each
     * credited once. */
    stripe_order("SC-5", 700);
    run("sim pay --dir sim --channel stripe --currency USD --order SC-5:700"
        " --txn pi_000000000000000000009505 --lose");
    sim_indexed("pi_000000000000000000009505");
    api("POST", gw_port, "/v1/orders", key1, NULL,
        "{\"merchant\":\"m1\",\"out_trade_no\":\"SC-7\",\"amount\":800,\"currency\":\"USD\","
        "\"channel\":\"stripe\",\"pay_method\":\"payment_intent\"}",
        &r);
    T_CHECK(r.status == 201, "SC-7 created at Stripe: %ld %s", r.status, r.body);
    run("sim pay --dir sim --channel stripe --created --order SC-7 --lose");
    struct po_query_report qr;
    T_CHECK(po_order_query_round(s, NULL, acct, 0, 100, &qr, err, sizeof err) == PO_OK &&
                qr.replayed == 2 && qr.failed == 0 && status_is("SC-5", "PAID") &&
                status_is("SC-7", "PAID") && pay_journals("SC-5") == 1 &&
                pay_journals("SC-7") == 1 && status_is("SC-4", "PAYING") &&
                status_is("SC-3", "PAYING"),
            "stripe order query: %s (%lld replayed, %lld failed)", err, (long long)qr.replayed,
            (long long)qr.failed);
    po_channel_account_free(acct);
    free(acct);
    po_store_close(s);
    /* An account for webhooks only (no API key): refunds are made in
     * Stripe by the tenant and recorded here as before (manual), closes
     * are payonce's alone. */
    t1_stripe(NULL);
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"SC-5\",\"out_refund_no\":\"SR-5\",\"amount\":100}", &r);
    T_CHECK(r.status == 201 && strstr(r.body, "\"state\":\"manual\""),
            "stripe refund without an API key: %ld %s", r.status, r.body);
    close_order("SC-4", NULL, &r);
    T_CHECK(r.status == 200 && jstr_is(&r, "status", "CLOSED") && !sim_closed("stripe", "SC-4"),
            "stripe close without an API key: %ld %s", r.status, r.body);
}

/* ---- creating the payment at the channel (issue 23, item 1) ---- */

static void *create_one(void *arg)
{
    struct refund_racer *a = arg;
    pthread_barrier_wait(a->go);
    api("POST", a->port, "/v1/orders", key1, a->idem, a->body, &a->r);
    return NULL;
}

/* The order's payment object in an answer (json_decref it), or NULL. */
static json_t *payment_of(const struct resp *r)
{
    json_t *j = json_loads(r->body, 0, NULL);
    json_t *p = json_incref(json_object_get(j, "payment"));
    json_decref(j);
    return p;
}

static const char *pstr(json_t *p, const char *k)
{
    return json_string_value(json_object_get(p, k)) ?: "";
}

/* How many payments the simulated channel created for no. */
static int sim_created(const char *file, const char *no)
{
    char path[512], *lines = NULL, pat[128];
    size_t len = 0;
    snprintf(path, sizeof path, "%s/sim/%s.jsonl", dir, file);
    snprintf(pat, sizeof pat, "\"out_trade_no\":\"%s\"", no);
    if (po_file_read(path, 1 << 20, &lines, &len))
        return 0;
    int n = 0;
    for (char *save = NULL, *l = strtok_r(lines, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        n += strstr(l, pat) && (strcmp(file, "intents") || strstr(l, "\"client_secret\""));
    free(lines);
    return n;
}

static void create_pay(const char *idem, struct resp *r, const char *fmt, ...) PO_PRINTF(3, 4);
static void create_pay(const char *idem, struct resp *r, const char *fmt, ...)
{
    char body[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    api("POST", gw_port, "/v1/orders", key1, idem, body, r);
}

static bool no_payment(const char *no)
{
    return q1("SELECT COUNT(*) FROM pay_order WHERE tenant_id = 't1' AND out_trade_no = ? AND"
              " payment IS NULL AND pay_method IS NULL AND status = 'PAYING'",
              no) == 1;
}

static void test_create_at_channel(void)
{
    struct resp r, r2;
    char sim_base[64], gateway[80], gwn[96];
    snprintf(sim_base, sizeof sim_base, "http://127.0.0.1:%u", sim_port);
    snprintf(gateway, sizeof gateway, "%s/gateway.do", sim_base);
    snprintf(gwn, sizeof gwn, "http://127.0.0.1:%u/notify/stripe/t1", gw_port);
    t1_wechatpay(sim_base, "sim");
    /* WeChat Pay Native: the QR code's content; the channel was given the
     * order's amount, its expiry (Beijing time) and payonce's notify URL. */
    char te[40], te_utc[40];
    time_t exp = time(NULL) + 3600, bj = exp + 8 * 3600;
    struct tm tm;
    gmtime_r(&bj, &tm);
    strftime(te, sizeof te, "%Y-%m-%dT%H:%M:%S+08:00", &tm);
    gmtime_r(&exp, &tm);
    strftime(te_utc, sizeof te_utc, "%Y-%m-%dT%H:%M:%S", &tm);
    create_pay("pw-1", &r,
               "{\"merchant\":\"m1\",\"out_trade_no\":\"PW-0001\",\"amount\":500,\"channel\":"
               "\"wechatpay\",\"pay_method\":\"native\",\"description\":\"测试商品\","
               "\"time_expire\":\"%s\"}",
               te);
    json_t *pay = payment_of(&r),
           *rec = sim_record("created", "out_trade_no", "PW-0001", NULL, NULL);
    char notify[96];
    snprintf(notify, sizeof notify, "http://127.0.0.1:%u/notify/wechatpay/t1", gw_port);
    T_CHECK(r.status == 201 && jstr_is(&r, "pay_method", "native") &&
                strncmp(pstr(pay, "code_url"), "weixin://wxpay/bizpayurl?pr=", 28) == 0 && rec &&
                json_integer_value(json_object_get(rec, "amount")) == 500 &&
                strcmp(pstr(rec, "notify_url"), notify) == 0 &&
                strcmp(pstr(rec, "time_expire"), te) == 0 && strstr(r.body, te_utc),
            "wechatpay native: %ld %s", r.status, r.body);
    json_decref(rec);
    /* Retried with its key: the stored answer; with another key: the
     * recorded payment, the channel not asked again. */
    create_pay("pw-1", &r2,
               "{\"merchant\":\"m1\",\"out_trade_no\":\"PW-0001\",\"amount\":500,\"channel\":"
               "\"wechatpay\",\"pay_method\":\"native\",\"description\":\"测试商品\","
               "\"time_expire\":\"%s\"}",
               te);
    T_CHECK(r2.status == 201 && r2.replayed && strcmp(r2.body, r.body) == 0,
            "the same create again: %ld %s", r2.status, r2.body);
    create_pay("pw-1b", &r2,
               "{\"merchant\":\"m1\",\"out_trade_no\":\"PW-0001\",\"amount\":500,\"channel\":"
               "\"wechatpay\",\"pay_method\":\"native\",\"time_expire\":\"%s\"}",
               te);
    json_t *pay2 = payment_of(&r2);
    T_CHECK(r2.status == 200 && pay2 &&
                strcmp(pstr(pay2, "code_url"), pstr(pay, "code_url")) == 0 &&
                sim_created("created", "PW-0001") == 1,
            "the same order with another key: %ld %s (%d at the channel)", r2.status, r2.body,
            sim_created("created", "PW-0001"));
    json_decref(pay2);
    json_decref(pay);
    /* Paid through the simulator as created, three copies at once:
     * credited once. */
    run("sim pay --dir sim --created --order PW-0001 --copies 3 --concurrent");
    T_CHECK(status_is("PW-0001", "PAID") && pay_journals("PW-0001") == 1,
            "the created payment paid: %lld journals", (long long)pay_journals("PW-0001"));
    /* JSAPI: the prepay_id and the JS bridge's parameters, signed with
     * the merchant key. */
    create_pay(NULL, &r,
               "{\"merchant\":\"m1\",\"out_trade_no\":\"PW-0002\",\"amount\":200,\"channel\":"
               "\"wechatpay\",\"pay_method\":\"jsapi\",\"payer_openid\":\"oUpF8uMuAJO_M2pxb1Q9"
               "zNjWeS6o\"}");
    pay = payment_of(&r);
    {
        char msg[512];
        snprintf(msg, sizeof msg, "%s\n%s\n%s\n%s\n", pstr(pay, "appId"), pstr(pay, "timeStamp"),
                 pstr(pay, "nonceStr"), pstr(pay, "package"));
        unsigned char *raw = NULL;
        size_t rl = 0;
        bool ok =
            po_b64_decode(pstr(pay, "paySign"), strlen(pstr(pay, "paySign")), &raw, &rl) == PO_OK &&
            po_rsa_sha256_verify(id.merchant_pub, msg, strlen(msg), raw, rl) == PO_OK;
        free(raw);
        char pkg[96];
        snprintf(pkg, sizeof pkg, "prepay_id=%s", pstr(pay, "prepay_id"));
        T_CHECK(r.status == 201 && ok && strcmp(pstr(pay, "appId"), id.appid) == 0 &&
                    strcmp(pstr(pay, "signType"), "RSA") == 0 &&
                    strcmp(pstr(pay, "package"), pkg) == 0 &&
                    jstr_is(&r, "channel_order_id", pstr(pay, "prepay_id")),
                "wechatpay jsapi: %ld %s", r.status, r.body);
    }
    json_decref(pay);
    /* H5: the cashier URL. */
    create_pay(NULL, &r,
               "{\"merchant\":\"m1\",\"out_trade_no\":\"PW-0003\",\"amount\":300,\"channel\":"
               "\"wechatpay\",\"pay_method\":\"h5\",\"payer_client_ip\":\"203.0.113.7\"}");
    pay = payment_of(&r);
    T_CHECK(r.status == 201 && strncmp(pstr(pay, "h5_url"), "https://wx.tenpay.com/", 22) == 0,
            "wechatpay h5: %ld %s", r.status, r.body);
    json_decref(pay);
    /* Bad requests change nothing. */
    static const char *const bad[] = {
        "{\"merchant\":\"m1\",\"out_trade_no\":\"PW-XXXX\",\"amount\":1,\"channel\":\"wechatpay\","
        "\"pay_method\":\"jsapi\"}",
        "{\"merchant\":\"m1\",\"out_trade_no\":\"PW-XXXX\",\"amount\":1,\"pay_method\":\"native\"}",
        "{\"merchant\":\"m1\",\"out_trade_no\":\"PW-XXXX\",\"amount\":1,\"channel\":\"wechatpay\","
        "\"pay_method\":\"precreate\"}",
        "{\"merchant\":\"m1\",\"out_trade_no\":\"PW-XXXX\",\"amount\":1,\"channel\":\"wechatpay\","
        "\"pay_method\":\"h5\",\"payer_client_ip\":\"999.1.1.1\"}",
        "{\"merchant\":\"m1\",\"out_trade_no\":\"PW-XXXX\",\"amount\":1,\"channel\":\"wechatpay\","
        "\"description\":\"no pay_method\"}",
        "{\"merchant\":\"m1\",\"out_trade_no\":\"PW-XXXX\",\"amount\":1,\"channel\":\"alipay\","
        "\"pay_method\":\"page\",\"return_url\":\"javascript:alert(1)\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        api("POST", gw_port, "/v1/orders", key1, NULL, bad[i], &r);
        T_CHECK(r.status == 400 &&
                    q1("SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ?", "PW-XXXX") == 0,
                "bad create %zu: %ld %s", i, r.status, r.body);
    }
    /* The order refused as without a pay_method (stored under the key);
     * another pay_method for an order whose payment exists. */
    create_pay("pw-x", &r,
               "{\"merchant\":\"nobody\",\"out_trade_no\":\"PW-XXXX\",\"amount\":1,\"channel\":"
               "\"wechatpay\",\"pay_method\":\"native\"}");
    T_CHECK(has_code(&r, 404, "merchant_not_found") &&
                q1("SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ?", "PW-XXXX") == 0 &&
                q1("SELECT COUNT(*) FROM api_idempotency WHERE idem_key = ?", "pw-x") == 1,
            "a create for a merchant the tenant does not have: %ld %s", r.status, r.body);
    create_pay(NULL, &r,
               "{\"merchant\":\"m1\",\"out_trade_no\":\"PW-0003\",\"amount\":300,\"channel\":"
               "\"wechatpay\",\"pay_method\":\"native\"}");
    T_CHECK(has_code(&r, 409, "order_exists") && strstr(r.body, "h5"),
            "another pay_method for a created payment: %ld %s", r.status, r.body);
    /* The channel refuses: the tenant's own code created PW-0004 at the
     * channel for another amount (INVALID_REQUEST, the order number
     * reused), PW-0005 was paid there already (ORDERPAID): 409
     * channel_refused, the order recorded without a payment. */
    {
        struct po_store *s = t_open(url);
        struct po_channel_account *acct = calloc(1, sizeof *acct);
        char err[PO_ERRBUF_SIZE] = "";
        struct po_pay_request rq = {"t1", "PW-0004", "native", 999,  "CNY",
                                    0,    "x",       NULL,     NULL, NULL};
        struct po_pay_answer ans = {0};
        T_CHECK(acct &&
                    po_account_fetch(s, mkey, "t1", "wechatpay", acct, err, sizeof err) == PO_OK &&
                    po_channel_find("wechatpay")->pay_create(acct, &rq, &ans) == PO_OK &&
                    ans.state == PO_PAY_CREATED,
                "PW-0004 created at the channel by the tenant's code: %s %s", err, ans.why);
        json_decref(ans.payment);
        po_channel_account_free(acct);
        free(acct);
        po_store_close(s);
    }
    create_pay(NULL, &r,
               "{\"merchant\":\"m1\",\"out_trade_no\":\"PW-0004\",\"amount\":400,\"channel\":"
               "\"wechatpay\",\"pay_method\":\"native\"}");
    T_CHECK(has_code(&r, 409, "channel_refused") && strstr(r.body, "INVALID_REQUEST") &&
                no_payment("PW-0004"),
            "an order number the channel has with other parameters: %ld %s", r.status, r.body);
    run("sim pay --dir sim --order PW-0005:500 --txn 4200000000000000000000009605 --lose");
    create_pay(NULL, &r,
               "{\"merchant\":\"m1\",\"out_trade_no\":\"PW-0005\",\"amount\":500,\"channel\":"
               "\"wechatpay\",\"pay_method\":\"native\"}");
    T_CHECK(has_code(&r, 409, "channel_refused") && strstr(r.body, "ORDERPAID") &&
                no_payment("PW-0005") && pay_journals("PW-0005") == 0,
            "an order paid at the channel already: %ld %s", r.status, r.body);
    /* No answer, then answers the platform did not sign: 503, the order
     * PAYING without a payment, nothing stored under the key; the channel
     * back, the same key creates it — one payment at the channel. */
    const char *pw6 =
        "{\"merchant\":\"m1\",\"out_trade_no\":\"PW-0006\",\"amount\":600,\"channel\":"
        "\"wechatpay\",\"pay_method\":\"native\"}";
    t1_wechatpay("http://127.0.0.1:1", "sim");
    api("POST", gw_port, "/v1/orders", key1, "pw-6", pw6, &r);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && r.retry_after[0] && no_payment("PW-0006") &&
                q1("SELECT COUNT(*) FROM api_idempotency WHERE idem_key = ?", "pw-6") == 0,
            "wechatpay unreachable: %ld %s", r.status, r.body);
    t1_wechatpay(sim_base, "other");
    api("POST", gw_port, "/v1/orders", key1, "pw-6", pw6, &r);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && strstr(r.body, "unsigned") &&
                no_payment("PW-0006"),
            "wechatpay answers not signed by the platform: %ld %s", r.status, r.body);
    t1_wechatpay(sim_base, "sim");
    api("POST", gw_port, "/v1/orders", key1, "pw-6", pw6, &r);
    pay = payment_of(&r);
    T_CHECK(r.status == 200 && !r.replayed && *pstr(pay, "code_url") &&
                sim_created("created", "PW-0006") == 1,
            "wechatpay back: %ld %s (%d at the channel)", r.status, r.body,
            sim_created("created", "PW-0006"));
    json_decref(pay);
    /* Four creates of one new order at once, each with its own key: one
     * payment at the channel, the same one in every answer. */
    {
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 4);
        struct refund_racer a[4];
        pthread_t th[4];
        char keys[4][16];
        for (int i = 0; i < 4; i++) {
            snprintf(keys[i], sizeof keys[i], "pw-7-%d", i);
            a[i] = (struct refund_racer){&go,
                                         "{\"merchant\":\"m1\",\"out_trade_no\":\"PW-0007\","
                                         "\"amount\":700,\"channel\":\"wechatpay\","
                                         "\"pay_method\":\"native\"}",
                                         keys[i],
                                         gw_port,
                                         {0}};
            pthread_create(&th[i], NULL, create_one, &a[i]);
        }
        int ok = 0, created = 0;
        char first[160] = "";
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            json_t *p = payment_of(&a[i].r);
            if ((a[i].r.status == 200 || a[i].r.status == 201) && *pstr(p, "code_url") &&
                (!first[0] || strcmp(first, pstr(p, "code_url")) == 0))
                ok++, created += a[i].r.status == 201;
            if (!first[0])
                snprintf(first, sizeof first, "%s", pstr(p, "code_url"));
            json_decref(p);
        }
        pthread_barrier_destroy(&go);
        T_CHECK(ok == 4 && created == 1 && sim_created("created", "PW-0007") == 1,
                "four creates at once: %d answered the one payment, %d created, %d at the"
                " channel",
                ok, created, sim_created("created", "PW-0007"));
    }

    /* Alipay: precreate (a QR code), paid as created; page pay (the
     * browser's signed form), opened by the buyer, paid. */
    t1_alipay(gateway, "sim");
    create_pay("pa-1", &r,
               "{\"merchant\":\"m1\",\"out_trade_no\":\"PA-1\",\"amount\":8888,\"channel\":"
               "\"alipay\",\"pay_method\":\"precreate\",\"description\":\"Iphone6 16G\"}");
    pay = payment_of(&r);
    T_CHECK(r.status == 201 && strncmp(pstr(pay, "qr_code"), "https://qr.alipay.com/", 22) == 0,
            "alipay precreate: %ld %s", r.status, r.body);
    json_decref(pay);
    run("sim pay --dir sim --channel alipay --created --order PA-1 --copies 3 --concurrent");
    T_CHECK(status_is("PA-1", "PAID") && pay_journals("PA-1") == 1,
            "alipay precreate paid: %lld journals", (long long)pay_journals("PA-1"));
    create_pay(NULL, &r,
               "{\"merchant\":\"m1\",\"out_trade_no\":\"PA-2\",\"amount\":1200,\"channel\":"
               "\"alipay\",\"pay_method\":\"page\",\"return_url\":\"https://shop.example/done\"}");
    pay = payment_of(&r);
    {
        char want[256], page[4096] = "";
        size_t plen = 0;
        snprintf(want, sizeof want, "<form action=\"%s?method=alipay.trade.page.pay&app_id=%s&",
                 gateway, id.app_id);
        struct t_http_req rq = {.method = "GET", .url = pstr(pay, "url")};
        long hst = *pstr(pay, "url") ? t_http(&rq, page, sizeof page, &plen) : 0;
        T_CHECK(r.status == 201 && strncmp(pstr(pay, "form"), want, strlen(want)) == 0 &&
                    strstr(pstr(pay, "form"), "name=\"biz_content\"") && hst == 200 &&
                    strstr(page, "PA-2") && sim_created("created", "PA-2") == 1,
                "alipay page pay: %ld %s; the browser: %ld %.200s", r.status, r.body, hst, page);
    }
    json_decref(pay);
    run("sim pay --dir sim --channel alipay --created --order PA-2:1200");
    T_CHECK(status_is("PA-2", "PAID") && pay_journals("PA-2") == 1, "alipay page pay paid");
    /* Alipay takes CNY only; an answer its key did not sign. */
    create_pay(NULL, &r,
               "{\"merchant\":\"m1\",\"out_trade_no\":\"PA-3\",\"amount\":100,\"currency\":\"USD\","
               "\"channel\":\"alipay\",\"pay_method\":\"precreate\"}");
    T_CHECK(has_code(&r, 409, "channel_refused") && strstr(r.body, "currency_not_supported") &&
                no_payment("PA-3"),
            "alipay in USD: %ld %s", r.status, r.body);
    run("channel set --tenant t1 --channel alipay --app-id %s --seller-id %s"
        " --alipay-public-key-file other/alipay_public_key.pem --api-base-url %s"
        " --merchant-private-key-file sim/merchant_private_key.pem"
        " --notify-url http://127.0.0.1:%u/notify/alipay/t1",
        id.app_id, id.seller_id, gateway, gw_port);
    create_pay(NULL, &r,
               "{\"merchant\":\"m1\",\"out_trade_no\":\"PA-4\",\"amount\":100,\"channel\":"
               "\"alipay\",\"pay_method\":\"precreate\"}");
    T_CHECK(has_code(&r, 503, "channel_unavailable") && strstr(r.body, "unsigned") &&
                no_payment("PA-4"),
            "alipay answer not signed by Alipay: %ld %s", r.status, r.body);

    /* Stripe: a PaymentIntent with payonce's Idempotency-Key; its
     * client_secret for Stripe.js; paid (its webhook), credited once. */
    t1_stripe("sim");
    create_pay(NULL, &r,
               "{\"merchant\":\"m1\",\"out_trade_no\":\"PS-1\",\"amount\":1500,\"currency\":"
               "\"USD\",\"channel\":\"stripe\",\"pay_method\":\"payment_intent\"}");
    pay = payment_of(&r);
    json_t *pi = sim_record("intents", "idem", "payonce-order-t1-PS-1", NULL, NULL);
    T_CHECK(r.status == 201 && strncmp(pstr(pay, "client_secret"), "pi_", 3) == 0 && pi &&
                strcmp(pstr(pi, "id"), pstr(pay, "payment_intent")) == 0 &&
                jstr_is(&r, "channel_order_id", pstr(pi, "id")),
            "stripe payment_intent: %ld %s", r.status, r.body);
    json_decref(pi);
    /* The same create after a lost answer (the order's payment not yet
     * recorded): Stripe's Idempotency-Key gives the same PaymentIntent. */
    {
        struct po_store *s = t_open(url);
        struct po_channel_account *acct = calloc(1, sizeof *acct);
        char err[PO_ERRBUF_SIZE] = "";
        struct po_pay_request rq = {"t1", "PS-1", "payment_intent", 1500, "USD", 0, NULL, NULL,
                                    NULL, NULL};
        struct po_pay_answer ans = {0};
        T_CHECK(acct && po_account_fetch(s, mkey, "t1", "stripe", acct, err, sizeof err) == PO_OK &&
                    po_channel_find("stripe")->pay_create(acct, &rq, &ans) == PO_OK &&
                    ans.state == PO_PAY_CREATED &&
                    strcmp(pstr(ans.payment, "client_secret"), pstr(pay, "client_secret")) == 0 &&
                    sim_created("intents", "PS-1") == 1,
                "stripe create again: %s %s (%d at Stripe)", err, ans.why,
                sim_created("intents", "PS-1"));
        json_decref(ans.payment);
        po_channel_account_free(acct);
        free(acct);
        po_store_close(s);
    }
    json_decref(pay);
    run("sim pay --dir sim --channel stripe --created --order PS-1 --notify-url %s --copies 3"
        " --concurrent",
        gwn);
    T_CHECK(status_is("PS-1", "PAID") && pay_journals("PS-1") == 1 &&
                q1("SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ? AND"
                   " channel_txn_id = channel_order_id",
                   "PS-1") == 1,
            "stripe paid: %lld journals", (long long)pay_journals("PS-1"));
    /* A key Stripe refuses (401): refused, nothing created. */
    t1_stripe("other");
    create_pay(NULL, &r,
               "{\"merchant\":\"m1\",\"out_trade_no\":\"PS-2\",\"amount\":100,\"currency\":"
               "\"USD\",\"channel\":\"stripe\",\"pay_method\":\"payment_intent\"}");
    T_CHECK(has_code(&r, 409, "channel_refused") && no_payment("PS-2") &&
                sim_created("intents", "PS-2") == 0,
            "stripe with a key it refuses: %ld %s", r.status, r.body);
    /* An account for webhooks only cannot create payments. */
    t1_stripe(NULL);
    create_pay(NULL, &r,
               "{\"merchant\":\"m1\",\"out_trade_no\":\"PS-3\",\"amount\":100,\"currency\":"
               "\"USD\",\"channel\":\"stripe\",\"pay_method\":\"payment_intent\"}");
    T_CHECK(has_code(&r, 409, "channel_not_configured"), "stripe without an API key: %ld %s",
            r.status, r.body);
}

/* ---- reconciliation by itself (issue 23, item 4) ---- */

static void bill_not_ready(const char *dates)
{
    char path[512];
    snprintf(path, sizeof path, "%s/sim/bill_not_ready", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        die("cannot write bill_not_ready");
    fputs(dates, f);
    fclose(f);
}

static void recon_round(int64_t now, struct po_recon_daily_report *x)
{
    struct po_store *s = t_open(url);
    struct po_recon_daily_cfg cfg = {-1, 18 * 3600, 1800, 3};
    char err[PO_ERRBUF_SIZE] = "";
    if (po_recon_daily_round(&(struct po_door){s, NULL}, NULL, mkey, &cfg, now, x, err,
                             sizeof err) != PO_OK)
        die(err);
    po_store_close(s);
}

static void test_daily_recon(void)
{
    char sim_base[64], day0[16], day2[16], sql[200];
    snprintf(sim_base, sizeof sim_base, "http://127.0.0.1:%u", sim_port);
    t1_wechatpay(sim_base, "sim");
    /* Today (Beijing): DR-0001 paid at the channel, its notification lost;
     * DR-0002 paid and notified. */
    order_on("DR-0001", 600, "wechatpay");
    order_on("DR-0002", 700, "wechatpay");
    run("sim pay --dir sim --order DR-0001:600 --txn 4200000000000000000000009801 --lose");
    T_CHECK(t_sim_pay(gw_port, &id, "t1", "DR-0002", "4200000000000000000000009802", 700) == 204,
            "DR-0002 notified");
    int64_t now = (int64_t)time(NULL), bj = now + 8 * 3600;
    int64_t midnight = bj - bj % 86400 - 8 * 3600; /* today's Beijing midnight, in UTC */
    time_t t = (time_t)(bj - bj % 86400);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(day0, sizeof day0, "%Y-%m-%d", &tm);
    t += 2 * 86400;
    gmtime_r(&t, &tm);
    strftime(day2, sizeof day2, "%Y-%m-%d", &tm);
    int64_t d1 = midnight + 86400, d2 = d1 + 86400, d3 = d2 + 86400;
    struct po_recon_daily_report x;
    /* Tomorrow 09:00: today's bill is not published before 10:00. */
    recon_round(d1 + 9 * 3600, &x);
    T_CHECK(x.due == 0 && status_is("DR-0001", "PAYING"), "before 10:00: %lld due",
            (long long)x.due);
    /* 10:30: WeChat Pay is still making it (STATEMENT_CREATING). */
    bill_not_ready(day0);
    recon_round(d1 + 37800, &x);
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM recon_day WHERE tenant_id = 't1' AND state = 'pending' AND"
             " bill_date = ?");
    T_CHECK(x.due == 1 && x.not_ready == 1 && status_is("DR-0001", "PAYING") && q1(sql, day0) == 1,
            "not published yet: %lld due, %lld not ready", (long long)x.due,
            (long long)x.not_ready);
    /* Ten minutes later: not tried again before --recon-retry. */
    recon_round(d1 + 37800 + 600, &x);
    T_CHECK(x.due == 0, "retried too soon: %lld due", (long long)x.due);
    /* Published, but answered under a key that is not the platform's:
     * nothing imported. */
    bill_not_ready("");
    t1_wechatpay(sim_base, "other");
    recon_round(d1 + 37800 + 1800, &x);
    T_CHECK(x.due == 1 && x.failed == 1 && x.imported == 0 && status_is("DR-0001", "PAYING"),
            "an unsigned tradebill answer: %lld failed", (long long)x.failed);
    /* The next try: downloaded (gzip, SHA-1 checked), imported: DR-0001
     * credited once, DR-0002 matched. */
    t1_wechatpay(sim_base, "sim");
    recon_round(d1 + 37800 + 3600, &x);
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM recon_day WHERE tenant_id = 't1' AND state = 'done' AND"
             " file_sha256 IS NOT NULL AND bill_date = ?");
    T_CHECK(x.imported == 1 && status_is("DR-0001", "PAID") && pay_journals("DR-0001") == 1 &&
                pay_journals("DR-0002") == 1 && q1(sql, day0) == 1 &&
                q1("SELECT COUNT(*) FROM recon_run WHERE tenant_id = ?", "t1") == 1,
            "reconciled by itself: %lld imported", (long long)x.imported);
    /* Done is done; the late notification is a duplicate. */
    recon_round(d1 + 37800 + 7200, &x);
    T_CHECK(x.due == 0, "a done day again: %lld due", (long long)x.due);
    T_CHECK(t_sim_pay(gw_port, &id, "t1", "DR-0001", "4200000000000000000000009801", 600) == 204 &&
                pay_journals("DR-0001") == 1,
            "the late notification after reconciliation: one credit");
    /* The next day had no trades: no bill (NO_STATEMENT_EXIST), done. */
    recon_round(d2 + 37800, &x);
    T_CHECK(x.due == 1 && x.none == 1 && x.overdue == 0, "a day without trades: %lld none",
            (long long)x.none);
    /* The day after that is still not published at 18:30 the next day:
     * one recon_overdue alert, not two. */
    bill_not_ready(day2);
    recon_round(d3 + 66600, &x);
    int64_t alerts =
        q1("SELECT COUNT(*) FROM alert WHERE tenant_id = 't1' AND reason = ?", "recon_overdue");
    recon_round(d3 + 66600 + 1800, &x);
    T_CHECK(alerts == 1 &&
                q1("SELECT COUNT(*) FROM alert WHERE tenant_id = 't1' AND reason = ?",
                   "recon_overdue") == 1 &&
                x.not_ready == 1,
            "overdue: %lld alert(s)", (long long)alerts);
    /* By hand: payonce recon fetch. */
    T_CHECK(t_cli_status(dir, bin, url, "recon fetch --tenant t1 --channel wechatpay --date %s",
                         day0) == 0,
            "recon fetch of a reconciled day: exit 0 (already imported)");
    T_CHECK(t_cli_status(dir, bin, url, "recon fetch --tenant t1 --channel wechatpay --date %s",
                         day2) == 1,
            "recon fetch of a day not begun: refused, exit 1");
    bill_not_ready("");
}

/* A day is reconciled only once it is over (issue 44 item 7): fetched
 * while open it is imported as far as it goes and stays pending; done
 * only once over and published; a done day whose bill gains rows is
 * reopened; a future day and a date that is no calendar day are refused,
 * nothing recorded; stored API answers are never reaped below serve's
 * floor. */
static struct po_channel_account *account_of_t1(const char *channel);
static void account_drop(struct po_channel_account *a);

static void fetch_day(const char *date, int64_t now, po_err want_rc, struct po_recon_day_result *x)
{
    struct po_store *s = t_open(url);
    struct po_channel_account *a = account_of_t1("wechatpay");
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc =
        po_recon_fetch_day(&(struct po_door){s, NULL}, a, date, false, now, 60, x, err, sizeof err);
    T_CHECK(rc == want_rc, "recon fetch %s: rc %d, expected %d: %s", date, (int)rc, (int)want_rc,
            err);
    account_drop(a);
    po_store_close(s);
}

static void test_recon_days(void)
{
    char sim_base[64], day0[16], future[16];
    snprintf(sim_base, sizeof sim_base, "http://127.0.0.1:%u", sim_port);
    t1_wechatpay(sim_base, "sim");
    int64_t now = (int64_t)time(NULL), bj = now + 8 * 3600;
    int64_t midnight = bj - bj % 86400 - 8 * 3600; /* today's Beijing midnight, in UTC */
    time_t t = (time_t)(bj - bj % 86400);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(day0, sizeof day0, "%Y-%m-%d", &tm);
    t += 86400;
    gmtime_r(&t, &tm);
    strftime(future, sizeof future, "%Y-%m-%d", &tm);
    /* Today, while it lasts: the payment whose notification was lost is
     * credited from the bill, but the day stays pending (the old code marked
     * it done, and the round, which takes only pending days, never looked
     * at the day's later payments). */
    order_on("RDAY-000001", 900, "wechatpay");
    run("sim pay --dir sim --order RDAY-000001:900 --lose");
    struct po_recon_day_result x;
    fetch_day(day0, now, PO_OK, &x);
    T_CHECK(x.open && x.imported && status_is("RDAY-000001", "PAID") &&
                t_count_url(url,
                            "SELECT COUNT(*) FROM recon_day WHERE tenant_id = 't1' AND"
                            " bill_date = ? AND state = 'pending'",
                            day0) == 1,
            "today fetched while open: open %d, imported %d", (int)x.open, (int)x.imported);
    /* A later payment of the day, lost too: the round after the day is
     * over and published (tomorrow 10:30 Beijing) reconciles it: done. */
    order_on("RDAY-000002", 901, "wechatpay");
    run("sim pay --dir sim --order RDAY-000002:901 --lose");
    struct po_recon_daily_report rr;
    recon_round(midnight + 86400 + 37800, &rr);
    T_CHECK(rr.imported == 1 && status_is("RDAY-000002", "PAID") &&
                t_count_url(url,
                            "SELECT COUNT(*) FROM recon_day WHERE tenant_id = 't1' AND"
                            " bill_date = ? AND state = 'done'",
                            day0) == 1,
            "the day over: %lld imported, RDAY-000002 reconciled", (long long)rr.imported);
    /* The bill of the done day gains a row (a payment the channel books
     * late): fetched again, the row is imported and the day reopened. */
    order_on("RDAY-000003", 902, "wechatpay");
    run("sim pay --dir sim --order RDAY-000003:902 --lose");
    fetch_day(day0, midnight + 86400 + 40000, PO_OK, &x);
    T_CHECK(!x.open && x.reopened && x.imported && status_is("RDAY-000003", "PAID") &&
                t_count_url(url,
                            "SELECT COUNT(*) FROM recon_day WHERE tenant_id = 't1' AND"
                            " bill_date = ? AND state = 'pending' AND last_error ="
                            " 'reopened_new_rows'",
                            day0) == 1,
            "a done day with new rows: reopened %d", (int)x.reopened);
    /* The round confirms it (the same file: already imported): done. */
    recon_round(midnight + 86400 + 40000 + 120, &rr);
    T_CHECK(t_count_url(url,
                        "SELECT COUNT(*) FROM recon_day WHERE tenant_id = 't1' AND"
                        " bill_date = ? AND state = 'done'",
                        day0) == 1,
            "the reopened day confirmed by the round");
    /* Tomorrow (Beijing) has not begun: refused, nothing recorded. */
    fetch_day(future, now, PO_ERR_INVALID, &x);
    T_CHECK(q1("SELECT COUNT(*) FROM recon_day WHERE tenant_id = 't1' AND bill_date = ?", future) ==
                0,
            "a future day recorded");
    T_CHECK(t_cli_status(dir, bin, url, "recon fetch --tenant t1 --channel wechatpay --date %s",
                         future) == 1,
            "recon fetch of tomorrow: exit 1 (refused: not begun)");
    const char *bad[] = {"2026-13-01", "2026-02-30", "2026-2-01", "2025-02-29"};
    for (size_t i = 0; i < PO_NELEM(bad); i++)
        T_CHECK(t_cli_status(dir, bin, url, "recon fetch --tenant t1 --channel wechatpay --date %s",
                             bad[i]) == 2 &&
                    q1("SELECT COUNT(*) FROM recon_day WHERE bill_date = ?", bad[i]) == 0,
                "recon fetch --date %s: not refused (exit 2), or recorded", bad[i]);
    /* Stored API answers: never reaped below serve's floor of 60 s. */
    int64_t stored = q1("SELECT COUNT(*) FROM api_idempotency WHERE tenant_id = ?", "t1");
    T_CHECK(t_cli_status(dir, bin, url, "idempotency reap --retention 0") == 2 &&
                t_cli_status(dir, bin, url, "idempotency reap --retention 59") == 2 &&
                q1("SELECT COUNT(*) FROM api_idempotency WHERE tenant_id = ?", "t1") == stored &&
                t_cli_status(dir, bin, url, "idempotency reap --retention 60") == 0,
            "idempotency reap below 60 s: not refused, or answers deleted");
}

/* Alipay's day: alipay.data.dataservice.bill.downloadurl.query, a zip of
 * GBK CSVs, imported by the same daily round. */
static void test_daily_recon_alipay(void)
{
    char sim_base[64], gateway[80], day0[16], alin[96];
    snprintf(sim_base, sizeof sim_base, "http://127.0.0.1:%u", sim_port);
    snprintf(gateway, sizeof gateway, "%s/gateway.do", sim_base);
    snprintf(alin, sizeof alin, "http://127.0.0.1:%u/notify/alipay/t1", gw_port);
    t1_alipay(gateway, "sim");
    order_on("DA-1", 1200, "alipay");
    order_on("DA-2", 1300, "alipay");
    run("sim pay --dir sim --channel alipay --order DA-1:1200 --txn 2026120422001400000000009811"
        " --lose");
    run("sim pay --dir sim --channel alipay --order DA-2:1300 --txn 2026120422001400000000009812"
        " --notify-url %s",
        alin);
    int64_t now = (int64_t)time(NULL), bj = now + 8 * 3600;
    int64_t d1 = bj - bj % 86400 - 8 * 3600 + 86400;
    time_t t = (time_t)(bj - bj % 86400);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(day0, sizeof day0, "%Y-%m-%d", &tm);
    struct po_recon_daily_report x;
    /* Alipay answers its own failure first (20000): tried again later. */
    /* (t1's WeChat Pay account is reconciled by the same round: the
     * checks read Alipay's own day) */
    char sql[200];
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM recon_day WHERE tenant_id = 't1' AND channel = 'alipay' AND"
             " bill_date = ? AND state = 'pending'");
    bill_not_ready(day0);
    recon_round(d1 + 37800, &x);
    T_CHECK(x.failed >= 1 && q1(sql, day0) == 1 && status_is("DA-1", "PAYING"),
            "alipay bill not given: %lld failed, DA-1 PAYING %d", (long long)x.failed,
            status_is("DA-1", "PAYING"));
    bill_not_ready("");
    recon_round(d1 + 37800 + 1800, &x);
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM recon_day WHERE tenant_id = 't1' AND channel = 'alipay' AND"
             " bill_date = ? AND state = 'done'");
    T_CHECK(x.imported >= 1 && q1(sql, day0) == 1 && status_is("DA-1", "PAID") &&
                pay_journals("DA-1") == 1 && pay_journals("DA-2") == 1,
            "alipay's zip of GBK CSVs reconciled: %lld imported, %lld failed",
            (long long)x.imported, (long long)x.failed);
    T_CHECK(t_cli_status(dir, bin, url, "recon fetch --tenant t1 --channel alipay --date %s",
                         day0) == 0,
            "recon fetch, alipay: exit 0");
}

/* Stripe's day (UTC): its balance transactions, charges and refunds,
 * reconciled by the same daily round. */
static void test_daily_recon_stripe(void)
{
    struct resp r;
    char gwn[96], dayU[16], sql[220];
    snprintf(gwn, sizeof gwn, "http://127.0.0.1:%u/notify/stripe/t1", gw_port);
    t1_stripe("sim");
    stripe_order("DS-1", 1500);
    stripe_order("DS-2", 2500);
    run("sim pay --dir sim --channel stripe --currency USD --order DS-1:1500"
        " --txn pi_000000000000000000009821 --lose");
    run("sim pay --dir sim --channel stripe --currency USD --order DS-2:2500"
        " --txn pi_000000000000000000009822 --notify-url %s",
        gwn);
    /* a refund Stripe made; its refund.updated webhook never comes */
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"DS-2\",\"out_refund_no\":\"DSR-2\",\"amount\":700}", &r);
    T_CHECK(r.status == 201, "DSR-2: %ld %s", r.status, r.body);
    int64_t now = (int64_t)time(NULL), midnight = now - now % 86400;
    time_t t = (time_t)midnight;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(dayU, sizeof dayU, "%Y-%m-%d", &tm);
    struct po_recon_daily_report x;
    recon_round(midnight + 86400 + 3 * 3600, &x);
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM recon_day WHERE tenant_id = 't1' AND channel = 'stripe' AND"
             " bill_date = ? AND state = 'done'");
    T_CHECK(q1(sql, dayU) == 1 && status_is("DS-1", "PAID") && pay_journals("DS-1") == 1 &&
                pay_journals("DS-2") == 1 &&
                q1("SELECT COUNT(*) FROM refund WHERE out_refund_no = ? AND status = 'SUCCESS'",
                   "DSR-2") == 1 &&
                q1("SELECT COUNT(*) FROM journal WHERE kind = 'REFUND' AND out_refund_no = ?",
                   "DSR-2") == 1,
            "Stripe's day from its balance transactions: %lld imported, %lld failed (%s)",
            (long long)x.imported, (long long)x.failed, dayU);
    /* fees recorded from Stripe's fee_details: 2.9% + 30 */
    T_CHECK(q1("SELECT COUNT(*) FROM recon_fee WHERE tenant_id = 't1' AND channel = 'stripe' AND"
               " out_trade_no = ? AND fee_milli = 74000",
               "DS-1") == 1,
            "Stripe's fee of DS-1 recorded");
    T_CHECK(t_cli_status(dir, bin, url, "recon fetch --tenant t1 --channel stripe --date %s",
                         dayU) == 0,
            "recon fetch, stripe: exit 0");
}

/* ---- the channels failing: rate limits, 5xx, a refund that ends ABNORMAL ---- */

static void sim_file(const char *name, const char *content)
{
    t_sim_file(dir, name, content);
}

/* DIR/faults for t1's merchants only (each line keyed by the merchant id,
 * app_id or Stripe account its calls carry): another case's or a
 * background round's call for another merchant cannot take them. */
static void sim_faults(const char *lines)
{
    t_sim_faults(dir, &id, lines);
}

static void test_channel_failures(void)
{
    struct resp r;
    char sim_base[64], gateway[80];
    snprintf(sim_base, sizeof sim_base, "http://127.0.0.1:%u", sim_port);
    snprintf(gateway, sizeof gateway, "%s/gateway.do", sim_base);
    t1_wechatpay(sim_base, "sim");
    const char *pf1 =
        "{\"merchant\":\"m1\",\"out_trade_no\":\"PF-0001\",\"amount\":100,\"channel\":"
        "\"wechatpay\",\"pay_method\":\"native\"}";
    /* WeChat Pay rate-limits the create (429 FREQUENCY_LIMITED): 503, the
     * same request again creates it, once */
    sim_faults("POST /v3/pay/transactions/native 429 1\n");
    api("POST", gw_port, "/v1/orders", key1, "pf-1", pf1, &r);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && strstr(r.body, "FREQUENCY_LIMITED") &&
                no_payment("PF-0001"),
            "wechatpay create rate-limited: %ld %s", r.status, r.body);
    api("POST", gw_port, "/v1/orders", key1, "pf-1", pf1, &r);
    T_CHECK(r.status == 200 && strstr(r.body, "code_url") && sim_created("created", "PF-0001") == 1,
            "wechatpay create after the rate limit: %ld %s", r.status, r.body);
    /* its close meets a 500 SYSTEM_ERROR: 503, the order stays PAYING */
    sim_faults("POST /v3/pay/transactions/out-trade-no/ 500 1\n");
    close_order("PF-0001", "pf-1c", &r);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && strstr(r.body, "SYSTEM_ERROR") &&
                status_is("PF-0001", "PAYING"),
            "wechatpay close meets a 500: %ld %s", r.status, r.body);
    close_order("PF-0001", "pf-1c", &r);
    T_CHECK(r.status == 200 && jstr_is(&r, "status", "CLOSED"), "the close again: %ld %s", r.status,
            r.body);
    /* Alipay's gateway down (HTTP 502) for a precreate */
    t1_alipay(gateway, "sim");
    sim_faults("POST /gateway.do 502 1\n");
    const char *pf2 =
        "{\"merchant\":\"m1\",\"out_trade_no\":\"PF-0002\",\"amount\":200,\"channel\":"
        "\"alipay\",\"pay_method\":\"precreate\"}";
    api("POST", gw_port, "/v1/orders", key1, NULL, pf2, &r);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && strstr(r.body, "HTTP_502") &&
                no_payment("PF-0002"),
            "alipay gateway 502: %ld %s", r.status, r.body);
    api("POST", gw_port, "/v1/orders", key1, NULL, pf2, &r);
    T_CHECK(r.status == 200 && strstr(r.body, "qr_code"), "alipay after the 502: %ld %s", r.status,
            r.body);
    /* Stripe's rate limit (429 rate_limit) on the PaymentIntent */
    t1_stripe("sim");
    sim_faults("POST /v1/payment_intents 429 1\n");
    const char *pf3 =
        "{\"merchant\":\"m1\",\"out_trade_no\":\"PF-0003\",\"amount\":300,\"currency\":"
        "\"USD\",\"channel\":\"stripe\",\"pay_method\":\"payment_intent\"}";
    api("POST", gw_port, "/v1/orders", key1, NULL, pf3, &r);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && strstr(r.body, "rate_limit") &&
                no_payment("PF-0003"),
            "stripe rate limit: %ld %s", r.status, r.body);
    /* payonce backs off for the answer's Retry-After (2 s): nothing is
     * sent to Stripe meanwhile, nothing decided */
    api("POST", gw_port, "/v1/orders", key1, NULL, pf3, &r);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && strstr(r.body, "rate_limited_backoff") &&
                no_payment("PF-0003") && sim_created("intents", "PF-0003") == 0,
            "stripe within Retry-After: %ld %s", r.status, r.body);
    usleep(2100 * 1000);
    api("POST", gw_port, "/v1/orders", key1, NULL, pf3, &r);
    T_CHECK(r.status == 200 && strstr(r.body, "client_secret") &&
                sim_created("intents", "PF-0003") == 1,
            "stripe after the rate limit: %ld %s (%d at Stripe)", r.status, r.body,
            sim_created("intents", "PF-0003"));
    /* No answer in time (the calls' budget is 1 s here; serve's
     * --channel-timeout-ms, 10 s by default): nothing decided, nothing
     * recorded; the same request again creates it. */
    po_api_set_timeout_ms(1000);
    t1_wechatpay(sim_base, "sim");
    sim_faults("POST /v3/pay/transactions/native 0 1\nPOST /gateway.do 0 1\n"
               "POST /v1/payment_intents 0 1\nGET /v3/bill/tradebill 0 1\n");
    const char *pf6 =
        "{\"merchant\":\"m1\",\"out_trade_no\":\"PF-0006\",\"amount\":600,\"channel\":"
        "\"wechatpay\",\"pay_method\":\"native\"}";
    api("POST", gw_port, "/v1/orders", key1, "pf-6", pf6, &r);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && strstr(r.body, "no_answer") &&
                no_payment("PF-0006"),
            "wechatpay create without an answer in time: %ld %s", r.status, r.body);
    api("POST", gw_port, "/v1/orders", key1, "pf-6", pf6, &r);
    T_CHECK(r.status == 200 && strstr(r.body, "code_url"), "and again: %ld %s", r.status, r.body);
    t1_alipay(gateway, "sim");
    const char *pf7 =
        "{\"merchant\":\"m1\",\"out_trade_no\":\"PF-0007\",\"amount\":700,\"channel\":"
        "\"alipay\",\"pay_method\":\"precreate\"}";
    api("POST", gw_port, "/v1/orders", key1, NULL, pf7, &r);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && strstr(r.body, "no_answer") &&
                no_payment("PF-0007"),
            "alipay precreate without an answer in time: %ld %s", r.status, r.body);
    t1_stripe("sim");
    const char *pf8 =
        "{\"merchant\":\"m1\",\"out_trade_no\":\"PF-0008\",\"amount\":800,\"currency\":"
        "\"USD\",\"channel\":\"stripe\",\"pay_method\":\"payment_intent\"}";
    api("POST", gw_port, "/v1/orders", key1, NULL, pf8, &r);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && strstr(r.body, "no_answer") &&
                no_payment("PF-0008") && sim_created("intents", "PF-0008") == 0,
            "stripe create without an answer in time: %ld %s", r.status, r.body);
    {
        struct po_store *ts = t_open(url);
        struct po_channel_account *acct = calloc(1, sizeof *acct);
        char terr[PO_ERRBUF_SIZE] = "";
        struct po_bill_fetch bf;
        T_CHECK(acct &&
                    po_account_fetch(ts, mkey, "t1", "wechatpay", acct, terr, sizeof terr) ==
                        PO_OK &&
                    po_channel_find("wechatpay")->bill_fetch(acct, "2026-01-01", &bf) == PO_OK &&
                    bf.state == PO_BILL_FAILED && strcmp(bf.why, "no_answer") == 0,
                "a bill request without an answer in time: %s %d %s", terr, (int)bf.state, bf.why);
        free(bf.data);
        po_channel_account_free(acct);
        free(acct);
        po_store_close(ts);
    }
    po_api_set_timeout_ms(10000);
    sim_file("faults", "");
    /* A WeChat Pay refund that ends ABNORMAL (the payer's account could not
     * take it), its notification lost: the refund query ends it so. */
    paid_order_of_t1("PF-0005", 500);
    run("channel set --tenant t1 --channel wechatpay --mchid %s --appid %s --apiv3-key-file "
        "sim/apiv3.key --platform-cert-file sim/wechatpay_platform_cert.pem"
        " --api-base-url %s --merchant-private-key-file sim/merchant_private_key.pem"
        " --merchant-serial %s --notify-url http://127.0.0.1:1/notify/wechatpay/t1",
        id.mchid, id.appid, sim_base, id.merchant_serial);
    sim_file("refund_abnormal", "RPF-5\n");
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"PF-0005\",\"out_refund_no\":\"RPF-5\",\"amount\":200}", &r);
    T_CHECK(r.status == 201, "RPF-5: %ld %s", r.status, r.body);
    struct po_store *s = t_open(url);
    struct po_refund_query_report rq;
    char err[PO_ERRBUF_SIZE] = "";
    T_CHECK(po_refund_query_round(s, NULL, NULL, mkey, 0, 100, &rq, err, sizeof err) == PO_OK &&
                rq.applied == 1 &&
                q1("SELECT COUNT(*) FROM refund WHERE out_refund_no = ? AND status = 'ABNORMAL'",
                   "RPF-5") == 1 &&
                q1("SELECT refunded_amount FROM pay_order WHERE out_trade_no = ?", "PF-0005") == 0,
            "a refund that ends ABNORMAL: %s (%lld applied)", err, (long long)rq.applied);
    po_store_close(s);
    sim_file("refund_abnormal", "");
    t1_wechatpay(sim_base, "sim");
}

/* ---- every cell of the capability matrix failing (issue 23's tests) ----
 *
 * For each channel, each operation payonce makes there is run while the
 * channel fails in each of its ways — its documented error answers, no
 * answer in time, an answer nobody signed, an answer changed after it was
 * signed — and must decide nothing: the same rows before and after (the
 * ledger, the orders, the refunds, the bills imported, the cursors, the
 * keys), the order or refund left for a later try. Then, the channel back,
 * the same operation decides: the cell was able to change something. */

enum cell_op { OP_CREATE, OP_KEYS, OP_QUERY, OP_CLOSE, OP_RQUERY, OP_RSUBMIT, OP_EVENTS, OP_BILL };

struct matrix_cell {
    enum cell_op op;
    const char *name;
    const char *fault; /* "METHOD PATH-PREFIX" the simulator fails */
    const char *api;   /* Alipay's method name, or NULL */
};

struct matrix_mode {
    const char *name;
    int status; /* a DIR/faults status (PO_SIM_FAULT_* or HTTP) */
};

/* One channel's world: its orders and refunds, made by matrix_setup. */
struct matrix_world {
    const char *channel;
    char q[16], k[16], p[16], c[16], r1[16], r2[16];
    char create[256], day[11];
    bool refund_made;
};

/* The refund's API object has "field":"value" (its submission's state or
 * error). */
static bool refund_has(const char *no, const char *field, const char *value)
{
    char path[64], want[96];
    struct resp r;
    snprintf(path, sizeof path, "/v1/refunds/%s", no);
    snprintf(want, sizeof want, "\"%s\":\"%s\"", field, value);
    api("GET", gw_port, path, key1, NULL, NULL, &r);
    return r.status == 200 && strstr(r.body, want);
}

static bool refund_state_is(const char *no, const char *state)
{
    return refund_has(no, "state", state);
}

static bool refund_status_is(const char *no, const char *status)
{
    char sql[120];
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM refund WHERE tenant_id = 't1' AND status = '%s' AND"
             " out_refund_no = ?",
             status);
    return q1(sql, no) == 1;
}

static struct po_channel_account *account_of_t1(const char *channel)
{
    struct po_store *s = t_open(url);
    struct po_channel_account *a = calloc(1, sizeof *a);
    char err[PO_ERRBUF_SIZE] = "";
    if (!a || po_account_fetch(s, mkey, "t1", channel, a, err, sizeof err))
        die(err);
    po_store_close(s);
    return a;
}

static void account_drop(struct po_channel_account *a)
{
    po_channel_account_free(a);
    free(a);
}

/* t1's account of w->channel at the simulator; notify: the notify URL
 * (NULL: where nobody listens, so that results are found by asking). */
static void matrix_account(const struct matrix_world *w, bool notified)
{
    char base[64], notify[96];
    snprintf(base, sizeof base, "http://127.0.0.1:%u", sim_port);
    if (notified)
        snprintf(notify, sizeof notify, "http://127.0.0.1:%u/notify/%s/t1", gw_port, w->channel);
    else
        snprintf(notify, sizeof notify, "http://127.0.0.1:1/notify/%s/t1", w->channel);
    if (strcmp(w->channel, "wechatpay") == 0)
        run("channel set --tenant t1 --channel wechatpay --mchid %s --appid %s --apiv3-key-file "
            "sim/apiv3.key --platform-cert-file sim/wechatpay_platform_cert.pem"
            " --api-base-url %s --merchant-private-key-file sim/merchant_private_key.pem"
            " --merchant-serial %s --notify-url %s",
            id.mchid, id.appid, base, id.merchant_serial, notify);
    else if (strcmp(w->channel, "alipay") == 0)
        run("channel set --tenant t1 --channel alipay --app-id %s --seller-id %s"
            " --alipay-public-key-file sim/alipay_public_key.pem --api-base-url %s/gateway.do"
            " --merchant-private-key-file sim/merchant_private_key.pem --notify-url %s",
            id.app_id, id.seller_id, base, notify);
    else
        t1_stripe("sim");
}

/* The channel's payment of order no, made by the simulator: notified to
 * payonce (credited) or lost (only asking finds it). */
static void matrix_paid(const struct matrix_world *w, const char *no, int64_t amount, int txn,
                        bool lost)
{
    char txnid[64], notify[96];
    bool stripe = strcmp(w->channel, "stripe") == 0;
    if (stripe)
        snprintf(txnid, sizeof txnid, "pi_0000000000000000000099%02d", txn);
    else if (strcmp(w->channel, "alipay") == 0)
        snprintf(txnid, sizeof txnid, "20261204220014000000000099%02d", txn);
    else
        snprintf(txnid, sizeof txnid, "42000000000000000000000099%02d", txn);
    snprintf(notify, sizeof notify, "http://127.0.0.1:%u/notify/%s/t1", gw_port, w->channel);
    run("sim pay --dir sim --channel %s --currency %s --order %s:%lld --txn %s %s%s", w->channel,
        stripe ? "USD" : "CNY", no, (long long)amount, txnid, lost ? "--lose" : "--notify-url ",
        lost ? "" : notify);
}

static void matrix_order(const struct matrix_world *w, const char *no, int64_t amount)
{
    if (strcmp(w->channel, "stripe") == 0)
        stripe_order(no, amount);
    else
        order_on(no, amount, w->channel);
}

/* A refund of w->p submitted to the channel now and completed there, its
 * notification lost: only the refund query finds the result. */
static void matrix_setup(struct matrix_world *w, const char *channel, char tag)
{
    memset(w, 0, sizeof *w);
    w->channel = channel;
    snprintf(w->q, sizeof w->q, "MX%c-Q1", tag);
    snprintf(w->k, sizeof w->k, "MX%c-K1", tag);
    snprintf(w->p, sizeof w->p, "MX%c-P1", tag);
    snprintf(w->c, sizeof w->c, "MX%c-C1", tag);
    snprintf(w->r1, sizeof w->r1, "MX%c-R1", tag);
    snprintf(w->r2, sizeof w->r2, "MX%c-R2", tag);
    bool stripe = strcmp(channel, "stripe") == 0;
    snprintf(w->create, sizeof w->create,
             "{\"merchant\":\"m1\",\"out_trade_no\":\"%s\",\"amount\":300,\"currency\":\"%s\","
             "\"channel\":\"%s\",\"pay_method\":\"%s\"}",
             w->c, stripe ? "USD" : "CNY", channel,
             stripe                           ? "payment_intent"
             : strcmp(channel, "alipay") == 0 ? "precreate"
                                              : "native");
    /* the channel's day today: UTC for Stripe, Beijing time for the others */
    time_t t = time(NULL) + (stripe ? 0 : 8 * 3600);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(w->day, sizeof w->day, "%Y-%m-%d", &tm);
    matrix_account(w, true);
    matrix_order(w, w->q, 700);
    matrix_paid(w, w->q, 700, tag == 'W' ? 1 : tag == 'A' ? 2 : 3, true);
    matrix_order(w, w->k, 400);
    if (stripe) { /* the tenant's own PaymentIntents: found by the search once indexed */
        char pi[64];
        stripe_intent(w->k, 400, pi, sizeof pi);
        sim_indexed(pi);
        sim_indexed("pi_000000000000000000009903");
    }
    matrix_order(w, w->p, 1000);
    matrix_paid(w, w->p, 1000, tag == 'W' ? 4 : tag == 'A' ? 5 : 6, false);
    T_CHECK(status_is(w->p, "PAID"), "matrix %s: %s credited", channel, w->p);
    matrix_account(w, false);
    char body[160];
    struct resp r;
    snprintf(body, sizeof body, "{\"out_trade_no\":\"%s\",\"out_refund_no\":\"%s\",\"amount\":100}",
             w->p, w->r2);
    api("POST", gw_port, "/v1/refunds", key1, NULL, body, &r);
    T_CHECK(r.status == 201 && refund_state_is(w->r2, "submitted"),
            "matrix %s: %s submitted: %ld %s", channel, w->r2, r.status, r.body);
}

/* Runs the cell's operation once; true when its result is the one
 * expected: decided (ok) or left for a later try (!ok). */
static bool matrix_act(struct matrix_world *w, enum cell_op op, bool ok, char *why, size_t cap)
{
    struct po_store *s = t_open(url);
    struct po_channel_account *a = account_of_t1(w->channel);
    char err[PO_ERRBUF_SIZE] = "", body[160];
    struct resp r = {0};
    bool good = false;
    int64_t now = (int64_t)time(NULL);
    switch (op) {
    case OP_CREATE:
        api("POST", gw_port, "/v1/orders", key1, NULL, w->create, &r);
        good = ok ? (r.status == 200 || r.status == 201) && !no_payment(w->c)
                  : has_code(&r, 503, "channel_unavailable") && no_payment(w->c);
        snprintf(why, cap, "%ld %.200s", r.status, r.body);
        break;
    case OP_KEYS: {
        struct po_keys_refresh_report x;
        po_err rc = po_keys_refresh_round(s, NULL, mkey, now, &x, err, sizeof err);
        good = rc == PO_OK && x.accounts >= 1 && (ok ? x.failed == 0 : x.failed >= 1 && !x.added);
        snprintf(why, cap, "%s: %lld accounts, %lld added, %lld failed", err, (long long)x.accounts,
                 (long long)x.added, (long long)x.failed);
        break;
    }
    case OP_QUERY: {
        struct po_query_report x;
        po_err rc = po_order_query_round(s, NULL, a, 0, 100, &x, err, sizeof err);
        good = rc == PO_OK && (ok ? x.replayed == 1 && status_is(w->q, "PAID")
                                  : x.replayed == 0 && x.failed >= 1 && status_is(w->q, "PAYING"));
        snprintf(why, cap, "%s: %lld queried, %lld replayed, %lld failed", err,
                 (long long)x.queried, (long long)x.replayed, (long long)x.failed);
        break;
    }
    case OP_CLOSE:
        close_order(w->k, NULL, &r);
        good = ok ? r.status == 200 && status_is(w->k, "CLOSED")
                  : has_code(&r, 503, "channel_unavailable") && status_is(w->k, "PAYING");
        snprintf(why, cap, "%ld %.200s", r.status, r.body);
        break;
    case OP_RQUERY: {
        struct po_refund_query_report x;
        po_err rc = po_refund_query_round(s, NULL, NULL, mkey, 0, 100, &x, err, sizeof err);
        good = rc == PO_OK &&
               (ok ? x.applied == 1 && refund_status_is(w->r2, "SUCCESS")
                   : x.applied == 0 && x.failed >= 1 && refund_status_is(w->r2, "PROCESSING"));
        snprintf(why, cap, "%s: %lld queried, %lld applied, %lld failed", err, (long long)x.queried,
                 (long long)x.applied, (long long)x.failed);
        break;
    }
    case OP_RSUBMIT: {
        int n = 0;
        po_err rc = PO_OK;
        if (!w->refund_made) { /* the refund itself, while the channel fails */
            snprintf(body, sizeof body,
                     "{\"out_trade_no\":\"%s\",\"out_refund_no\":\"%s\",\"amount\":200}", w->p,
                     w->r1);
            api("POST", gw_port, "/v1/refunds", key1, NULL, body, &r);
            w->refund_made = r.status == 201;
        } else {
            rc = po_refund_submit_pending(s, NULL, mkey, 0, 100, &n);
        }
        good = rc == PO_OK && w->refund_made &&
               refund_state_is(w->r1, ok ? "submitted" : "pending") &&
               refund_status_is(w->r1, "PROCESSING");
        char path[64];
        snprintf(path, sizeof path, "/v1/refunds/%s", w->r1);
        api("GET", gw_port, path, key1, NULL, NULL, &r);
        snprintf(why, cap, "%d submitted; %.300s", n, r.body);
        break;
    }
    case OP_EVENTS: {
        struct po_recover_report x;
        po_err rc = po_events_recover_round(s, NULL, a, now, 100, &x, err, sizeof err);
        good = rc == PO_OK && (ok ? x.whole : !x.whole && x.replayed == 0);
        snprintf(why, cap, "%s: %lld events, %lld replayed, whole %d (%s)", err,
                 (long long)x.events, (long long)x.replayed, (int)x.whole, x.why);
        break;
    }
    case OP_BILL: {
        struct po_recon_day_result x;
        po_err rc = po_recon_fetch_day(&(struct po_door){s, NULL}, a, w->day, true, now, 60, &x,
                                       err, sizeof err);
        good = rc == PO_OK && (ok ? x.imported : x.state == PO_BILL_FAILED && !x.imported);
        snprintf(why, cap, "%s: state %d (%s), imported %d", err, (int)x.state, x.why,
                 (int)x.imported);
        break;
    }
    }
    account_drop(a);
    po_store_close(s);
    return good;
}

static void matrix_channel(const char *channel, char tag, const struct matrix_cell *cells,
                           int ncells, const struct matrix_mode *modes, int nmodes)
{
    struct matrix_world w;
    matrix_setup(&w, channel, tag);
    /* channel check tries each API that can be tried harmlessly */
    char out[4096];
    int st = t_cli_all(dir, bin, url, out, sizeof out, "channel check --tenant t1 --channel %s",
                       channel);
    bool stripe = strcmp(channel, "stripe") == 0, wx = strcmp(channel, "wechatpay") == 0;
    T_CHECK(st == 0 && !strstr(out, "FAILS") && strstr(out, "order query    works") &&
                strstr(out, "close          works") && strstr(out, "refund query   works") &&
                strstr(out, "bill           works (") &&
                (!wx || strstr(out, "certificates   works")) &&
                (!stripe || strstr(out, "events         works")),
            "channel check, %s: %d\n%s", channel, st, out);
    sim_faults(stripe ? "GET /v1/balance_transactions 500 1\n"
               : wx   ? "GET /v3/bill/tradebill 1 1\n"
                      : "POST /gateway.do 2 1 alipay.data.dataservice.bill.downloadurl.query\n");
    st = t_cli_all(dir, bin, url, out, sizeof out, "channel check --tenant t1 --channel %s",
                   channel);
    sim_file("faults", "");
    T_CHECK(st == 1 && strstr(out, "bill           FAILS (") && strstr(out, ": failed, HTTP"),
            "channel check, %s, its bill API failing: %d\n%s", channel, st, out);
    int checked = 0;
    for (int c = 0; c < ncells; c++) {
        for (int m = 0; m < nmodes; m++) {
            char line[256], why[400] = "";
            snprintf(line, sizeof line, "%s %d 99%s%s\n", cells[c].fault, modes[m].status,
                     cells[c].api ? " " : "", cells[c].api ? cells[c].api : "");
            sim_faults(line);
            /* no answer: the calls' budget (serve's --channel-timeout-ms) is
             * short of the simulator's hold */
            po_api_set_timeout_ms(modes[m].status == PO_SIM_FAULT_HANG ? 200 : 10000);
            int sims = sim_refunds();
            char before[400], after[400];
            fingerprint(before, sizeof before);
            /* the first create records the order, the first refund the
             * refund (pending): both are left for a later try */
            bool first = m == 0 && (cells[c].op == OP_CREATE || cells[c].op == OP_RSUBMIT);
            bool undecided = matrix_act(&w, cells[c].op, false, why, sizeof why);
            po_api_set_timeout_ms(10000);
            if (strcmp(channel, "stripe") == 0 && modes[m].status == 429)
                usleep(2100 * 1000); /* payonce backs off for Stripe's Retry-After */
            sim_file("faults", "");
            fingerprint(after, sizeof after);
            T_CHECK(undecided && (first || strcmp(before, after) == 0) &&
                        (sim_refunds() == sims || modes[m].status == PO_SIM_FAULT_TAMPER),
                    "%s %s, %s: not left undecided (%s); rows %s -> %s; %d refunds at the"
                    " channel (only a tampered answer's request reached it)",
                    channel, cells[c].name, modes[m].name, why, before, after,
                    sim_refunds() - sims);
            checked++;
        }
        char why[400] = "";
        T_CHECK(matrix_act(&w, cells[c].op, true, why, sizeof why),
                "%s %s, the channel back: not decided (%s)", channel, cells[c].name, why);
        if (cells[c].op == OP_RSUBMIT) { /* R1's result, its notification lost */
            struct po_store *s = t_open(url);
            struct po_refund_query_report x;
            char err[PO_ERRBUF_SIZE] = "";
            T_CHECK(po_refund_query_round(s, NULL, NULL, mkey, 0, 100, &x, err, sizeof err) ==
                            PO_OK &&
                        x.applied == 1 && refund_status_is(w.r1, "SUCCESS"),
                    "%s: %s completed by the query: %s", channel, w.r1, err);
            po_store_close(s);
        }
    }
    t_figure("# api[%s] channel matrix, %s: %d operations x %d ways of failing = %d cells left"
             " undecided, each then decided\n",
             backend, channel, ncells, nmodes, checked);
    matrix_account(&w, true);
}

static void test_channel_matrix(void)
{
    static const struct matrix_cell wx[] = {
        {OP_CREATE, "create (Native)", "POST /v3/pay/transactions/native", NULL},
        {OP_KEYS, "platform certificates", "GET /v3/certificates", NULL},
        {OP_QUERY, "order query", "GET /v3/pay/transactions/out-trade-no/", NULL},
        {OP_CLOSE, "close", "POST /v3/pay/transactions/out-trade-no/", NULL},
        {OP_RQUERY, "refund query", "GET /v3/refund/domestic/refunds/", NULL},
        {OP_RSUBMIT, "refund", "POST /v3/refund/domestic/refunds", NULL},
        {OP_BILL, "trade bill", "GET /v3/bill/tradebill", NULL},
        {OP_BILL, "bill download", "GET /v3/billdownload/file", NULL},
    };
    static const struct matrix_mode wx_modes[] = {
        {"500 SYSTEM_ERROR", 500},         {"429 FREQUENCY_LIMITED", 429},
        {"no answer", PO_SIM_FAULT_HANG},  {"unsigned", PO_SIM_FAULT_GARBLED},
        {"tampered", PO_SIM_FAULT_TAMPER},
    };
    static const struct matrix_cell ali[] = {
        {OP_CREATE, "precreate", "POST /gateway.do", "alipay.trade.precreate"},
        {OP_QUERY, "trade query", "POST /gateway.do", "alipay.trade.query"},
        {OP_CLOSE, "trade close", "POST /gateway.do", "alipay.trade.close"},
        {OP_RQUERY, "refund query", "POST /gateway.do", "alipay.trade.fastpay.refund.query"},
        {OP_RSUBMIT, "refund", "POST /gateway.do", "alipay.trade.refund"},
        {OP_BILL, "bill URL", "POST /gateway.do", "alipay.data.dataservice.bill.downloadurl.query"},
        {OP_BILL, "bill download", "GET /alipay/downloadBillFile", NULL},
    };
    static const struct matrix_mode ali_modes[] = {
        {"20000 isp.unknow-error", 500},   {"HTTP 502", 502},
        {"no answer", PO_SIM_FAULT_HANG},  {"unsigned", PO_SIM_FAULT_GARBLED},
        {"tampered", PO_SIM_FAULT_TAMPER},
    };
    /* Stripe signs its webhooks, not its API answers (TLS authenticates
     * them): its unsigned way is an answer that is not the API's. */
    static const struct matrix_cell st[] = {
        {OP_CREATE, "PaymentIntent", "POST /v1/payment_intents", NULL},
        {OP_QUERY, "PaymentIntent search", "GET /v1/payment_intents/search", NULL},
        {OP_CLOSE, "cancel", "POST /v1/payment_intents/", NULL},
        {OP_RQUERY, "refunds of the PaymentIntent", "GET /v1/refunds", NULL},
        {OP_RSUBMIT, "refund", "POST /v1/refunds", NULL},
        {OP_EVENTS, "events", "GET /v1/events", NULL},
        {OP_BILL, "balance transactions", "GET /v1/balance_transactions", NULL},
    };
    static const struct matrix_mode st_modes[] = {
        {"500 api_error", 500},
        {"429 rate_limit", 429},
        {"no answer", PO_SIM_FAULT_HANG},
        {"not Stripe's answer", PO_SIM_FAULT_GARBLED},
    };
    matrix_channel("wechatpay", 'W', wx, 8, wx_modes, 5);
    matrix_channel("alipay", 'A', ali, 7, ali_modes, 5);
    matrix_channel("stripe", 'S', st, 7, st_modes, 4);
}

/* ---- Alipay's documented error answers, a test each (issue 43 item 5) ----
 *
 * For each method payonce calls at Alipay, every sub_code Alipay documents
 * for it (and the gateway's own answers) is answered once by the simulated
 * gateway (DIR/faults naming the method and the sub_code: its signed
 * answer with its code), and payonce's effect is asserted: decided (the
 * refund closed, its reservation released, an alert; the order not paid;
 * closed; the create refused 409; no bill) or undecided (the refund
 * pending, the order PAYING, 503 channel_unavailable), the code shown; then
 * the same operation without the fault decides, so each row could have
 * changed something. The rows are this test's own, written from Alipay's
 * documentation (docs/channels.md, "Error answers: Alipay"), not read from
 * payonce's table. Then Alipay's rate limit (40005): the rounds back off. */

enum ae_op { AE_QUERY, AE_CLOSE, AE_CREATE, AE_REFUND, AE_RQUERY, AE_BILL };
enum ae_effect {
    AE_DECIDED,   /* the method's decision (per op, above) */
    AE_REFUSED,   /* close: refused, the order query decides (paid: 409 order_paid) */
    AE_UNDECIDED, /* nothing decided, tried again later */
};
struct ae_row {
    enum ae_op op;
    const char *sub;
    enum ae_effect effect;
};

static const char *const ae_methods[] = {
    [AE_QUERY] = "alipay.trade.query",
    [AE_CLOSE] = "alipay.trade.close",
    [AE_CREATE] = "alipay.trade.precreate",
    [AE_REFUND] = "alipay.trade.refund",
    [AE_RQUERY] = "alipay.trade.fastpay.refund.query",
    [AE_BILL] = "alipay.data.dataservice.bill.downloadurl.query",
};

/* t1's Alipay account at the simulator; notified: refund results reach
 * payonce (else nobody listens: the refund query finds them). */
static void ae_account(bool notified)
{
    run("channel set --tenant t1 --channel alipay --app-id %s --seller-id %s"
        " --alipay-public-key-file sim/alipay_public_key.pem"
        " --api-base-url http://127.0.0.1:%u/gateway.do"
        " --merchant-private-key-file sim/merchant_private_key.pem"
        " --notify-url http://127.0.0.1:%u/notify/alipay/t1",
        id.app_id, id.seller_id, sim_port, notified ? gw_port : 1u);
}

static void ae_fault(const struct ae_row *w)
{
    char line[200];
    snprintf(line, sizeof line, "POST /gateway.do 200 1 %s %s\n", ae_methods[w->op], w->sub);
    sim_faults(line);
}

/* The order no, paid at the simulated gateway (trade txn), its
 * notification lost: only asking finds it. */
static void ae_paid_lost(const char *no, int64_t amount, int txn)
{
    order_on(no, amount, "alipay");
    run("sim pay --dir sim --channel alipay --order %s:%lld --txn 202612082200140000000000%04d"
        " --lose",
        no, (long long)amount, txn);
}

static struct po_query_report ae_query_round(void)
{
    struct po_store *s = t_open(url);
    struct po_channel_account *a = account_of_t1("alipay");
    struct po_query_report x;
    char err[PO_ERRBUF_SIZE] = "";
    if (po_order_query_round(s, NULL, a, 0, 100, &x, err, sizeof err))
        die(err);
    account_drop(a);
    po_store_close(s);
    return x;
}

static struct po_refund_query_report ae_refund_query_round(void)
{
    struct po_store *s = t_open(url);
    struct po_refund_query_report x;
    char err[PO_ERRBUF_SIZE] = "";
    if (po_refund_query_round(s, NULL, NULL, mkey, 0, 100, &x, err, sizeof err))
        die(err);
    po_store_close(s);
    return x;
}

static int ae_submit_round(void)
{
    struct po_store *s = t_open(url);
    int n = 0;
    if (po_refund_submit_pending(s, NULL, mkey, 0, 100, &n))
        die("po_refund_submit_pending");
    po_store_close(s);
    return n;
}

/* Runs one row; true when payonce's effect is the row's. k: the row's
 * number (its orders' and refunds'). */
static bool ae_run(const struct ae_row *w, int k, char *why, size_t cap)
{
    char no[32], rno[32], body[256];
    struct resp r = {0};
    bool good = false;
    snprintf(no, sizeof no, "AE-%d", k);
    snprintf(rno, sizeof rno, "AER-%d", k);
    switch (w->op) {
    case AE_QUERY: { /* paid there, lost: decided is "not paid" */
        ae_paid_lost(no, 100 + k, k);
        ae_fault(w);
        struct po_query_report x = ae_query_round();
        good = x.queried == 1 && status_is(no, "PAYING") &&
               (w->effect == AE_DECIDED ? x.not_paid == 1 : x.failed == 1) &&
               (strcmp(w->sub, "isv.app-call-limited") == 0) == x.throttled;
        snprintf(why, cap, "%lld queried, %lld not paid, %lld failed, throttled %d",
                 (long long)x.queried, (long long)x.not_paid, (long long)x.failed, x.throttled);
        x = ae_query_round(); /* without the fault: credited */
        good = good && x.replayed == 1 && status_is(no, "PAID");
        break;
    }
    case AE_CLOSE: /* refused: paid there (the query credits it, 409) */
        if (w->effect == AE_REFUSED)
            ae_paid_lost(no, 100 + k, k);
        else
            order_on(no, 100 + k, "alipay");
        ae_fault(w);
        close_order(no, NULL, &r);
        good = w->effect == AE_DECIDED   ? r.status == 200 && status_is(no, "CLOSED")
               : w->effect == AE_REFUSED ? has_code(&r, 409, "order_paid") && status_is(no, "PAID")
                                         : has_code(&r, 503, "channel_unavailable") &&
                                               strstr(r.body, w->sub) && status_is(no, "PAYING");
        snprintf(why, cap, "%ld %.200s", r.status, r.body);
        if (w->effect == AE_UNDECIDED) { /* the gateway never saw it: closed */
            close_order(no, NULL, &r);
            good = good && r.status == 200 && status_is(no, "CLOSED");
        }
        break;
    case AE_CREATE:
        snprintf(body, sizeof body,
                 "{\"merchant\":\"m1\",\"out_trade_no\":\"%s\",\"amount\":%d,\"channel\":"
                 "\"alipay\",\"pay_method\":\"precreate\"}",
                 no, 100 + k);
        ae_fault(w);
        api("POST", gw_port, "/v1/orders", key1, NULL, body, &r);
        good = has_code(&r, w->effect == AE_DECIDED ? 409 : 503,
                        w->effect == AE_DECIDED ? "channel_refused" : "channel_unavailable") &&
               strstr(r.body, w->sub) && no_payment(no);
        snprintf(why, cap, "%ld %.200s", r.status, r.body);
        if (w->effect == AE_UNDECIDED) { /* the same request again: created */
            api("POST", gw_port, "/v1/orders", key1, NULL, body, &r);
            good = good && (r.status == 200 || r.status == 201) && strstr(r.body, "qr_code");
        }
        break;
    case AE_REFUND: { /* of AE-P, paid; decided: closed for good */
        snprintf(body, sizeof body,
                 "{\"out_trade_no\":\"AE-P\",\"out_refund_no\":\"%s\",\"amount\":1}", rno);
        int64_t reserved =
            q1("SELECT refund_reserved FROM pay_order WHERE out_trade_no = ?", "AE-P");
        ae_fault(w);
        api("POST", gw_port, "/v1/refunds", key1, NULL, body, &r);
        bool rejected = w->effect == AE_DECIDED;
        good = r.status == 201 && refund_has(rno, "error", w->sub) &&
               refund_state_is(rno, rejected ? "rejected" : "pending") &&
               refund_status_is(rno, rejected ? "CLOSED" : "PROCESSING") &&
               q1("SELECT refund_reserved FROM pay_order WHERE out_trade_no = ?", "AE-P") ==
                   reserved + (rejected ? 0 : 1) &&
               q1("SELECT COUNT(*) FROM alert WHERE reason = 'refund_rejected_by_channel' AND"
                  " idem_key = 'api:refund:' || ?",
                  rno) == (rejected ? 1 : 0);
        snprintf(why, cap, "%ld %.300s", r.status, r.body);
        if (!rejected) /* the retry submits it */
            good = good && ae_submit_round() == 1 && refund_state_is(rno, "submitted");
        break;
    }
    case AE_RQUERY: { /* a refund of AE-P submitted, its notification lost */
        ae_account(false);
        snprintf(body, sizeof body,
                 "{\"out_trade_no\":\"AE-P\",\"out_refund_no\":\"%s\",\"amount\":1}", rno);
        api("POST", gw_port, "/v1/refunds", key1, NULL, body, &r);
        ae_account(true);
        ae_fault(w);
        struct po_refund_query_report x = ae_refund_query_round();
        good = r.status == 201 && x.queried == 1 && x.failed == 1 && x.applied == 0 &&
               refund_status_is(rno, "PROCESSING");
        snprintf(why, cap, "%lld queried, %lld failed", (long long)x.queried, (long long)x.failed);
        x = ae_refund_query_round(); /* without the fault: its result */
        good = good && x.applied == 1 && refund_status_is(rno, "SUCCESS");
        break;
    }
    case AE_BILL: { /* today's (Beijing time): the payments above are in it */
        char day[11];
        time_t t = time(NULL) + 8 * 3600;
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(day, sizeof day, "%Y-%m-%d", &tm);
        struct po_channel_account *a = account_of_t1("alipay");
        struct po_bill_fetch bf;
        ae_fault(w);
        good = po_channel_find("alipay")->bill_fetch(a, day, &bf) == PO_OK &&
               bf.state == (w->effect == AE_DECIDED ? PO_BILL_NONE : PO_BILL_FAILED) &&
               (w->effect == AE_DECIDED || strcmp(bf.why, w->sub) == 0);
        snprintf(why, cap, "state %d (%s)", (int)bf.state, bf.why);
        free(bf.data);
        good = good && po_channel_find("alipay")->bill_fetch(a, day, &bf) == PO_OK &&
               bf.state == PO_BILL_FETCHED;
        free(bf.data);
        account_drop(a);
        break;
    }
    }
    sim_file("faults", "");
    return good;
}

static void test_alipay_errors(void)
{
    static const struct ae_row rows[] = {
        /* alipay.trade.query */
        {AE_QUERY, "ACQ.TRADE_NOT_EXIST", AE_DECIDED},
        {AE_QUERY, "ACQ.SYSTEM_ERROR", AE_UNDECIDED},
        {AE_QUERY, "ACQ.INVALID_PARAMETER", AE_UNDECIDED},
        {AE_QUERY, "isp.unknow-error", AE_UNDECIDED},
        {AE_QUERY, "aop.ACQ.SYSTEM_ERROR", AE_UNDECIDED},
        {AE_QUERY, "isv.invalid-signature", AE_UNDECIDED},
        {AE_QUERY, "isv.app-call-limited", AE_UNDECIDED},
        /* alipay.trade.close */
        {AE_CLOSE, "ACQ.TRADE_NOT_EXIST", AE_DECIDED},
        {AE_CLOSE, "ACQ.TRADE_STATUS_ERROR", AE_REFUSED},
        {AE_CLOSE, "ACQ.REASON_TRADE_STATUS_INVALID", AE_REFUSED},
        {AE_CLOSE, "ACQ.REASON_ILLEGAL_STATUS", AE_REFUSED},
        {AE_CLOSE, "ACQ.SYSTEM_ERROR", AE_UNDECIDED},
        {AE_CLOSE, "ACQ.INVALID_PARAMETER", AE_UNDECIDED},
        {AE_CLOSE, "isp.unknow-error", AE_UNDECIDED},
        {AE_CLOSE, "isv.method-call-limited", AE_UNDECIDED},
        /* alipay.trade.precreate */
        {AE_CREATE, "ACQ.TRADE_HAS_SUCCESS", AE_DECIDED},
        {AE_CREATE, "ACQ.TRADE_HAS_CLOSE", AE_DECIDED},
        {AE_CREATE, "ACQ.CONTEXT_INCONSISTENT", AE_DECIDED},
        {AE_CREATE, "ACQ.TOTAL_FEE_EXCEED", AE_DECIDED},
        {AE_CREATE, "ACQ.EXIST_FORBIDDEN_WORD", AE_DECIDED},
        {AE_CREATE, "ACQ.BUYER_SELLER_EQUAL", AE_DECIDED},
        {AE_CREATE, "ACQ.TRADE_BUYER_NOT_MATCH", AE_DECIDED},
        {AE_CREATE, "ACQ.INVALID_PARAMETER", AE_DECIDED},
        {AE_CREATE, "ACQ.ACCESS_FORBIDDEN", AE_DECIDED},
        {AE_CREATE, "ACQ.PARTNER_ERROR", AE_DECIDED},
        {AE_CREATE, "ACQ.SYSTEM_ERROR", AE_UNDECIDED},
        {AE_CREATE, "isp.unknow-error", AE_UNDECIDED},
        {AE_CREATE, "aop.unknow-error", AE_UNDECIDED},
        {AE_CREATE, "isv.app-call-limited", AE_UNDECIDED},
        /* alipay.trade.refund */
        {AE_REFUND, "ACQ.TRADE_NOT_EXIST", AE_DECIDED},
        {AE_REFUND, "ACQ.TRADE_STATUS_ERROR", AE_DECIDED},
        {AE_REFUND, "ACQ.TRADE_HAS_CLOSE", AE_DECIDED},
        {AE_REFUND, "ACQ.TRADE_HAS_FINISHED", AE_DECIDED},
        {AE_REFUND, "ACQ.TRADE_NOT_ALLOW_REFUND", AE_DECIDED},
        {AE_REFUND, "ACQ.NOT_ALLOW_PARTIAL_REFUND", AE_DECIDED},
        {AE_REFUND, "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL", AE_DECIDED},
        {AE_REFUND, "ACQ.REASON_TRADE_REFUND_FEE_ERR", AE_DECIDED},
        {AE_REFUND, "ACQ.DISCORDANT_REPEAT_REQUEST", AE_DECIDED},
        {AE_REFUND, "ACQ.INVALID_PARAMETER", AE_DECIDED},
        {AE_REFUND, "ACQ.SELLER_BALANCE_NOT_ENOUGH", AE_UNDECIDED},
        {AE_REFUND, "ACQ.REASON_TRADE_BEEN_FREEZEN", AE_UNDECIDED},
        {AE_REFUND, "ACQ.SYSTEM_ERROR", AE_UNDECIDED},
        {AE_REFUND, "isp.unknow-error", AE_UNDECIDED},
        {AE_REFUND, "aop.ACQ.SYSTEM_ERROR", AE_UNDECIDED},
        {AE_REFUND, "isv.invalid-signature", AE_UNDECIDED},
        {AE_REFUND, "isv.insufficient-isv-permissions", AE_UNDECIDED},
        {AE_REFUND, "isv.app-call-limited", AE_UNDECIDED},
        /* alipay.trade.fastpay.refund.query: nothing it answers but its
         * result decides (no such trade: no such refund, still asked) */
        {AE_RQUERY, "ACQ.TRADE_NOT_EXIST", AE_DECIDED},
        {AE_RQUERY, "TRADE_NOT_EXIST", AE_DECIDED},
        {AE_RQUERY, "ACQ.SYSTEM_ERROR", AE_UNDECIDED},
        {AE_RQUERY, "ACQ.INVALID_PARAMETER", AE_UNDECIDED},
        {AE_RQUERY, "isv.app-call-limited", AE_UNDECIDED},
        /* alipay.data.dataservice.bill.downloadurl.query */
        {AE_BILL, "isp.bill_not_exist", AE_DECIDED},
        {AE_BILL, "isp.unknow-error", AE_UNDECIDED},
        {AE_BILL, "ACQ.SYSTEM_ERROR", AE_UNDECIDED},
        {AE_BILL, "isv.invalid-parameter", AE_UNDECIDED},
    };
    ae_account(true);
    /* the paid order the refund rows refund 1 fen of each */
    order_on("AE-P", 10000, "alipay");
    run("sim pay --dir sim --channel alipay --order AE-P:10000 --txn 2026120822001400000000009999"
        " --notify-url http://127.0.0.1:%u/notify/alipay/t1",
        gw_port);
    T_CHECK(status_is("AE-P", "PAID"), "AE-P credited");
    int n = (int)(sizeof rows / sizeof rows[0]);
    for (int k = 0; k < n; k++) {
        char why[400] = "";
        T_CHECK(ae_run(&rows[k], k + 1, why, sizeof why), "%s %s: not %s (%s)",
                ae_methods[rows[k].op], rows[k].sub,
                rows[k].effect == AE_UNDECIDED ? "left undecided, then decided"
                                               : "decided as Alipay documents it",
                why);
    }

    /* Alipay's rate limit (40005), each round backing off: the active
     * query stops for the account (the orders left stay PAYING, asked
     * next round), the refund retry and the refund query leave the
     * account's other refunds for their next turn. */
    ae_paid_lost("AE-T1", 301, 9901);
    ae_paid_lost("AE-T2", 302, 9902);
    ae_paid_lost("AE-T3", 303, 9903);
    sim_faults("POST /gateway.do 200 1 alipay.trade.query isv.app-call-limited\n");
    struct po_query_report qx = ae_query_round();
    T_CHECK(qx.throttled && qx.queried == 1 && qx.failed == 1 && status_is("AE-T1", "PAYING") &&
                status_is("AE-T2", "PAYING") && status_is("AE-T3", "PAYING"),
            "query round, rate-limited: %lld queried, throttled %d", (long long)qx.queried,
            qx.throttled);
    qx = ae_query_round();
    T_CHECK(!qx.throttled && qx.replayed == 3 && status_is("AE-T3", "PAID"),
            "query round, next turn: %lld credited", (long long)qx.replayed);
    /* two refunds pending (the gateway was unreachable), then a retry
     * round meeting the rate limit */
    run("channel set --tenant t1 --channel alipay --app-id %s --seller-id %s"
        " --alipay-public-key-file sim/alipay_public_key.pem"
        " --api-base-url http://127.0.0.1:1/gateway.do"
        " --merchant-private-key-file sim/merchant_private_key.pem",
        id.app_id, id.seller_id);
    struct resp r;
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"AE-T1\",\"out_refund_no\":\"AET-R1\",\"amount\":100}", &r);
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"AE-T2\",\"out_refund_no\":\"AET-R2\",\"amount\":100}", &r);
    ae_account(false);
    sim_faults("POST /gateway.do 200 1 alipay.trade.refund isv.app-call-limited\n");
    int done = ae_submit_round();
    T_CHECK(done == 0 &&
                q1("SELECT COUNT(*) FROM refund WHERE out_refund_no LIKE ? AND"
                   " submit_state = 'pending' AND status = 'PROCESSING'",
                   "AET-R%") == 2 &&
                q1("SELECT COUNT(*) FROM refund WHERE out_refund_no LIKE ? AND"
                   " submit_attempts = 1 AND submit_error = 'no_answer'",
                   "AET-R%") == 1 &&
                q1("SELECT COUNT(*) FROM refund WHERE out_refund_no LIKE ? AND"
                   " submit_error = 'isv.app-call-limited'",
                   "AET-R%") == 1,
            "refund retry, rate-limited: %d submitted; one tried and throttled, the other not"
            " tried",
            done);
    done = ae_submit_round();
    T_CHECK(done == 2, "refund retry, next turn: %d submitted", done);
    sim_faults("POST /gateway.do 200 1 alipay.trade.fastpay.refund.query"
               " isv.app-call-limited\n");
    struct po_refund_query_report rx = ae_refund_query_round();
    T_CHECK(rx.queried == 1 && rx.failed == 1 && rx.throttled == 1 && rx.applied == 0,
            "refund query, rate-limited: %lld queried, %lld skipped", (long long)rx.queried,
            (long long)rx.throttled);
    rx = ae_refund_query_round();
    T_CHECK(rx.applied == 2 && refund_status_is("AET-R1", "SUCCESS") &&
                refund_status_is("AET-R2", "SUCCESS"),
            "refund query, next turn: %lld applied", (long long)rx.applied);
    ae_account(true);
    t_figure("# api[%s] alipay errors: %d documented answers across 6 methods, each with payonce's"
             " effect; the rate limit backed off from by 3 rounds\n",
             backend, n);
}

/* A lost create answer retried safely (issue 43 item 6): the precreate
 * reached Alipay and made the trade, its answer came too late (the
 * simulator serves it and holds the answer past payonce's budget): 503,
 * no payment recorded; the same create again — the same out_trade_no and
 * parameters — is answered with the same QR code, one trade at Alipay. An
 * order number Alipay has with other parameters (another client made it)
 * is Alipay's ACQ.CONTEXT_INCONSISTENT, surfaced as 409 channel_refused. */
static void test_alipay_lost_create(void)
{
    struct resp r, r2;
    ae_account(true);
    const char *lc1 =
        "{\"merchant\":\"m1\",\"out_trade_no\":\"LC-1\",\"amount\":700,"
        "\"channel\":\"alipay\",\"pay_method\":\"precreate\",\"description\":\"lost\"}";
    po_api_set_timeout_ms(1000);
    sim_faults("POST /gateway.do 3 1 alipay.trade.precreate\n");
    api("POST", gw_port, "/v1/orders", key1, "lc-1", lc1, &r);
    po_api_set_timeout_ms(10000);
    sim_file("faults", "");
    T_CHECK(has_code(&r, 503, "channel_unavailable") && strstr(r.body, "no_answer") &&
                no_payment("LC-1") && sim_created("created", "LC-1") == 1,
            "a precreate whose answer was lost: %ld %s (%d trades at Alipay)", r.status, r.body,
            sim_created("created", "LC-1"));
    api("POST", gw_port, "/v1/orders", key1, "lc-1", lc1, &r);
    json_t *pay = payment_of(&r), *rec = sim_record("created", "out_trade_no", "LC-1", NULL, NULL);
    T_CHECK((r.status == 200 || r.status == 201) && *pstr(pay, "qr_code") &&
                strcmp(pstr(pay, "qr_code"), pstr(rec, "id")) == 0 &&
                sim_created("created", "LC-1") == 1,
            "the same create again: %ld %s (Alipay's: %s)", r.status, r.body, pstr(rec, "id"));
    api("POST", gw_port, "/v1/orders", key1, "lc-1b", lc1, &r2);
    json_t *pay2 = payment_of(&r2);
    T_CHECK(r2.status == 200 && strcmp(pstr(pay2, "qr_code"), pstr(pay, "qr_code")) == 0,
            "and with another key: %ld %s", r2.status, r2.body);
    json_decref(pay2);
    json_decref(pay);
    json_decref(rec);
    run("sim pay --dir sim --channel alipay --created --order LC-1");
    T_CHECK(status_is("LC-1", "PAID") && pay_journals("LC-1") == 1, "LC-1 paid once");
    /* LC-2 made at Alipay by the tenant's own code for 9.99 */
    {
        struct po_channel_account *acct = account_of_t1("alipay");
        struct po_pay_request rq = {"t1", "LC-2", "precreate", 999,  "CNY",
                                    0,    "x",    NULL,        NULL, NULL};
        struct po_pay_answer ans = {0};
        T_CHECK(po_channel_find("alipay")->pay_create(acct, &rq, &ans) == PO_OK &&
                    ans.state == PO_PAY_CREATED,
                "LC-2 created at Alipay by the tenant's code: %s", ans.why);
        json_decref(ans.payment);
        account_drop(acct);
    }
    create_pay(NULL, &r,
               "{\"merchant\":\"m1\",\"out_trade_no\":\"LC-2\",\"amount\":400,\"channel\":"
               "\"alipay\",\"pay_method\":\"precreate\"}");
    T_CHECK(has_code(&r, 409, "channel_refused") && strstr(r.body, "ACQ.CONTEXT_INCONSISTENT") &&
                no_payment("LC-2"),
            "an order number Alipay has with other parameters: %ld %s", r.status, r.body);
}

/* Alipay's certificate mode (公钥证书模式, issue 43 item 7): the account
 * takes the app's certificate, Alipay's root chain and Alipay's
 * certificates (several: a rotation); a notification is verified with the
 * certificate it names (alipay_cert_sn) or, naming none, any kept one; an
 * SN payonce does not have is refused, and so is a key it has no
 * certificate for; the gateway's answers the same (DIR/alipay_cert_next:
 * the simulated Alipay signs with its next certificate). */
static char cm_sn[2][64];

static void cm_account(bool both, bool check)
{
    char next[128] = "";
    if (both)
        snprintf(next, sizeof next, " --alipay-cert-file sim/alipayCertPublicKey_RSA2_next.crt");
    char out[2048];
    int st = t_cli_all(dir, bin, url, out, sizeof out,
                       "channel set --tenant t1 --channel alipay --app-id %s --seller-id %s"
                       " --app-cert-file sim/appCertPublicKey.crt --alipay-root-cert-file"
                       " sim/alipayRootCert.crt --alipay-cert-file"
                       " sim/alipayCertPublicKey_RSA2.crt%s"
                       " --api-base-url http://127.0.0.1:%u/gateway.do"
                       " --merchant-private-key-file sim/merchant_private_key.pem"
                       " --notify-url http://127.0.0.1:%u/notify/alipay/t1",
                       id.app_id, id.seller_id, next, sim_port, gw_port);
    T_CHECK(st == 0 && (!check || (strstr(out, cm_sn[0]) && (!both || strstr(out, cm_sn[1])))),
            "certificate mode configured (%s): %d %s", both ? "both" : "one", st, out);
}

/* The payment of no signed with key (Alipay's current or next), naming
 * sn as alipay_cert_sn (NULL: none); HTTP status of payonce's answer. */
static unsigned cm_notify(const struct po_privkey *key, const char *no, const char *txn,
                          int64_t amount, const char *sn)
{
    struct po_sim_identity who = id;
    who.ali_key = (struct po_privkey *)(uintptr_t)key;
    struct po_sim_payment p = {"alipay", no, txn, amount, "CNY", 0};
    struct po_sim_request r;
    memset(&r, 0, sizeof r);
    if (po_sim_payment_request(&who, &p, (int64_t)time(NULL), &r))
        die("cannot build an Alipay notification");
    if (sn) { /* the same fields and alipay_cert_sn, signed anew */
        struct po_form f = {0};
        const char *keys[64], *vals[64];
        int n = 0;
        if (po_form_parse(r.body, r.body_len, &f))
            die("the notification's form");
        for (int i = 0; i < f.n; i++)
            if (strcmp(f.p[i].key, "sign") && strcmp(f.p[i].key, "sign_type"))
                keys[n] = f.p[i].key, vals[n++] = f.p[i].val;
        keys[n] = "alipay_cert_sn", vals[n++] = sn;
        struct po_sim_request r2;
        memset(&r2, 0, sizeof r2);
        if (po_sim_alipay(key, keys, vals, n, &r2))
            die("cannot sign an Alipay notification");
        po_form_free(&f);
        po_sim_request_free(&r);
        r = r2;
    }
    unsigned st = t_sim_post(gw_port, "/notify/alipay/t1", &r);
    po_sim_request_free(&r);
    return st;
}

static void test_alipay_cert_mode(void)
{
    char path[512], *pem = NULL;
    size_t len = 0;
    struct po_privkey *next = NULL;
    static const char *const certs[] = {"alipayCertPublicKey_RSA2.crt",
                                        "alipayCertPublicKey_RSA2_next.crt"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/sim/%s", dir, certs[i]);
        if (po_file_read(path, 1 << 16, &pem, &len) ||
            po_cert_alipay_sn(pem, len, false, cm_sn[i], sizeof cm_sn[i], NULL, 0))
            die(path);
        free(pem);
    }
    snprintf(path, sizeof path, "%s/sim/alipay_private_key_next.pem", dir);
    if (po_file_read(path, 1 << 16, &pem, &len) || po_privkey_from_pem(pem, len, &next))
        die(path);
    free(pem);
    /* one mode or the other; certificate mode needs all three files */
    T_CHECK(t_cli_status(dir, bin, url,
                         "channel set --tenant t1 --channel alipay --app-id %s"
                         " --alipay-public-key-file sim/alipay_public_key.pem"
                         " --app-cert-file sim/appCertPublicKey.crt --alipay-root-cert-file"
                         " sim/alipayRootCert.crt --alipay-cert-file"
                         " sim/alipayCertPublicKey_RSA2.crt",
                         id.app_id) == 2 &&
                t_cli_status(dir, bin, url,
                             "channel set --tenant t1 --channel alipay --app-id %s"
                             " --app-cert-file sim/appCertPublicKey.crt --alipay-cert-file"
                             " sim/alipayCertPublicKey_RSA2.crt",
                             id.app_id) == 2,
            "channel set: both modes at once, or certificate mode without the root: exit 2");
    cm_account(true, true);
    order_on("CM-1", 101, "alipay");
    order_on("CM-2", 102, "alipay");
    order_on("CM-3", 103, "alipay");
    order_on("CM-4", 104, "alipay");
    order_on("CM-5", 105, "alipay");
    order_on("CM-6", 106, "alipay");
    unsigned s1 = cm_notify(id.ali_key, "CM-1", "2026120822001400000000008801", 101, NULL);
    unsigned s2 = cm_notify(next, "CM-2", "2026120822001400000000008802", 102, NULL);
    unsigned s3 = cm_notify(next, "CM-3", "2026120822001400000000008803", 103, cm_sn[1]);
    T_CHECK(s1 == 200 && s2 == 200 && s3 == 200 && status_is("CM-1", "PAID") &&
                status_is("CM-2", "PAID") && status_is("CM-3", "PAID"),
            "notifications of either certificate, named or not: %u %u %u", s1, s2, s3);
    unsigned s4 = cm_notify(id.ali_key, "CM-4", "2026120822001400000000008804", 104,
                            "00000000000000000000000000000000");
    unsigned s5 = cm_notify(next, "CM-5", "2026120822001400000000008805", 105, cm_sn[0]);
    T_CHECK(s4 >= 400 && s5 >= 400 && status_is("CM-4", "PAYING") && status_is("CM-5", "PAYING"),
            "a notification naming an SN payonce has not, or another certificate than its"
            " signer's: %u %u",
            s4, s5);
    /* the old certificate alone: the next one's signature is no one's */
    cm_account(false, true);
    unsigned s6 = cm_notify(next, "CM-6", "2026120822001400000000008806", 106, NULL);
    T_CHECK(s6 >= 400 && status_is("CM-6", "PAYING"),
            "the next certificate's notification, payonce knowing only the old one: %u", s6);
    /* the gateway's answers: the next certificate's refused (an SN payonce
     * does not have), then accepted with both */
    run("sim pay --dir sim --channel alipay --order CM-6:106 --txn 2026120822001400000000008806"
        " --lose");
    sim_file("alipay_cert_next", "yes\n");
    struct po_store *s = t_open(url);
    struct po_channel_account *a = account_of_t1("alipay");
    struct po_query_report x;
    char err[PO_ERRBUF_SIZE] = "";
    T_CHECK(po_order_query_round(s, NULL, a, 0, 100, &x, err, sizeof err) == PO_OK &&
                x.replayed == 0 && x.failed >= 1 && strstr(x.first_failure, "unknown_cert_sn") &&
                status_is("CM-6", "PAYING"),
            "an answer of the next certificate, unknown to payonce: %s", x.first_failure);
    account_drop(a);
    cm_account(true, false);
    a = account_of_t1("alipay");
    T_CHECK(po_order_query_round(s, NULL, a, 0, 100, &x, err, sizeof err) == PO_OK &&
                x.replayed == 1 && status_is("CM-6", "PAID"),
            "with both certificates: %lld credited, %s", (long long)x.replayed, x.first_failure);
    account_drop(a);
    po_store_close(s);
    sim_file("alipay_cert_next", "");
    po_privkey_free(next);
}

/* ---- WeChat Pay's documented error answers, each mapped (issue 43 item 5) ----
 *
 * The table mirrors docs/channels.md, "Error answers: WeChat Pay": for
 * each operation payonce makes at WeChat Pay and each error code the
 * API's 错误码 table documents for it, the simulator answers that code
 * (a DIR/faults line naming it) and payonce's effect is asserted — decided
 * (not paid, closed, no bill), refused for good (with its alert), or left
 * undecided for a later try. Each row must use its fault (the line's
 * count is down to what the row expects), so a row that never reached the
 * simulator fails; a 429 also stops the round asking that tenant's
 * channel: its second request never comes. Each operation ends with the
 * channel back, deciding. */

/* in the order the case runs them: the refund query before the bill (whose import would
 * complete its refunds) */
enum wxe_op { WXE_QUERY, WXE_CERTS, WXE_RQUERY, WXE_BILL, WXE_CLOSE, WXE_CREATE, WXE_REFUND };
enum wxe_effect {
    WXE_UNDECIDED, /* left for a later try: nothing changed */
    WXE_REFUSED,   /* refused for good: create 409, a refund CLOSED with an alert */
    WXE_NOT_PAID,  /* query: the channel has no payment */
    WXE_CLOSED,    /* close: closed there (or never there) and here */
    WXE_NO_BILL,   /* bill: none that day (done) */
    WXE_NOT_READY, /* bill: not published yet (tried again) */
};
struct wxe_row {
    enum wxe_op op;
    unsigned status;
    const char *code;
    enum wxe_effect effect;
};

/* docs/channels.md, "Error answers: WeChat Pay", row by row. */
static const struct wxe_row wxe_table[] = {
    /* GET /v3/pay/transactions/out-trade-no/{no} (查询订单) */
    {WXE_QUERY, 404, "ORDER_NOT_EXIST", WXE_NOT_PAID},
    {WXE_QUERY, 400, "PARAM_ERROR", WXE_UNDECIDED},
    {WXE_QUERY, 400, "INVALID_REQUEST", WXE_UNDECIDED},
    {WXE_QUERY, 400, "MCH_NOT_EXISTS", WXE_UNDECIDED},
    {WXE_QUERY, 401, "SIGN_ERROR", WXE_UNDECIDED},
    {WXE_QUERY, 403, "NO_AUTH", WXE_UNDECIDED},
    {WXE_QUERY, 403, "RULE_LIMIT", WXE_UNDECIDED},
    {WXE_QUERY, 403, "TRADE_ERROR", WXE_UNDECIDED},
    {WXE_QUERY, 429, "FREQUENCY_LIMITED", WXE_UNDECIDED},
    {WXE_QUERY, 429, "RATELIMIT_EXCEEDED", WXE_UNDECIDED},
    {WXE_QUERY, 500, "SYSTEM_ERROR", WXE_UNDECIDED},
    {WXE_QUERY, 500, "BANK_ERROR", WXE_UNDECIDED},
    /* GET /v3/certificates (下载平台证书) */
    {WXE_CERTS, 400, "PARAM_ERROR", WXE_UNDECIDED},
    {WXE_CERTS, 401, "SIGN_ERROR", WXE_UNDECIDED},
    {WXE_CERTS, 403, "NO_AUTH", WXE_UNDECIDED},
    {WXE_CERTS, 429, "FREQUENCY_LIMITED", WXE_UNDECIDED},
    {WXE_CERTS, 500, "SYSTEM_ERROR", WXE_UNDECIDED},
    /* GET /v3/bill/tradebill (申请交易账单) */
    {WXE_BILL, 400, "NO_STATEMENT_EXIST", WXE_NO_BILL},
    {WXE_BILL, 400, "STATEMENT_CREATING", WXE_NOT_READY},
    {WXE_BILL, 400, "PARAM_ERROR", WXE_UNDECIDED},
    {WXE_BILL, 400, "INVALID_REQUEST", WXE_UNDECIDED},
    {WXE_BILL, 401, "SIGN_ERROR", WXE_UNDECIDED},
    {WXE_BILL, 403, "NO_AUTH", WXE_UNDECIDED},
    {WXE_BILL, 429, "FREQUENCY_LIMITED", WXE_UNDECIDED},
    {WXE_BILL, 500, "SYSTEM_ERROR", WXE_UNDECIDED},
    /* GET /v3/refund/domestic/refunds/{out_refund_no} (查询单笔退款) */
    {WXE_RQUERY, 404, "RESOURCE_NOT_EXISTS", WXE_UNDECIDED},
    {WXE_RQUERY, 404, "MCH_NOT_EXISTS", WXE_UNDECIDED},
    {WXE_RQUERY, 400, "PARAM_ERROR", WXE_UNDECIDED},
    {WXE_RQUERY, 400, "INVALID_REQUEST", WXE_UNDECIDED},
    {WXE_RQUERY, 401, "SIGN_ERROR", WXE_UNDECIDED},
    {WXE_RQUERY, 403, "NO_AUTH", WXE_UNDECIDED},
    {WXE_RQUERY, 429, "FREQUENCY_LIMITED", WXE_UNDECIDED},
    {WXE_RQUERY, 500, "SYSTEM_ERROR", WXE_UNDECIDED},
    /* POST /v3/pay/transactions/out-trade-no/{no}/close (关闭订单) */
    {WXE_CLOSE, 404, "ORDER_NOT_EXIST", WXE_CLOSED},
    {WXE_CLOSE, 400, "ORDER_CLOSED", WXE_CLOSED},
    {WXE_CLOSE, 400, "ORDERPAID", WXE_CLOSED},
    {WXE_CLOSE, 202, "USER_PAYING", WXE_UNDECIDED},
    {WXE_CLOSE, 400, "PARAM_ERROR", WXE_UNDECIDED},
    {WXE_CLOSE, 400, "INVALID_REQUEST", WXE_UNDECIDED},
    {WXE_CLOSE, 400, "APPID_MCHID_NOT_MATCH", WXE_UNDECIDED},
    {WXE_CLOSE, 400, "MCH_NOT_EXISTS", WXE_UNDECIDED},
    {WXE_CLOSE, 401, "SIGN_ERROR", WXE_UNDECIDED},
    {WXE_CLOSE, 403, "ACCOUNT_ERROR", WXE_UNDECIDED},
    {WXE_CLOSE, 403, "NO_AUTH", WXE_UNDECIDED},
    {WXE_CLOSE, 403, "RULE_LIMIT", WXE_UNDECIDED},
    {WXE_CLOSE, 403, "TRADE_ERROR", WXE_UNDECIDED},
    {WXE_CLOSE, 429, "FREQUENCY_LIMITED", WXE_UNDECIDED},
    {WXE_CLOSE, 500, "SYSTEM_ERROR", WXE_UNDECIDED},
    /* POST /v3/pay/transactions/{native,jsapi,h5} (下单) */
    {WXE_CREATE, 400, "PARAM_ERROR", WXE_REFUSED},
    {WXE_CREATE, 400, "INVALID_REQUEST", WXE_REFUSED},
    {WXE_CREATE, 400, "APPID_MCHID_NOT_MATCH", WXE_REFUSED},
    {WXE_CREATE, 400, "MCH_NOT_EXISTS", WXE_REFUSED},
    {WXE_CREATE, 400, "ORDER_CLOSED", WXE_REFUSED},
    {WXE_CREATE, 400, "ORDERPAID", WXE_REFUSED},
    {WXE_CREATE, 401, "SIGN_ERROR", WXE_REFUSED},
    {WXE_CREATE, 403, "ACCOUNT_ERROR", WXE_REFUSED},
    {WXE_CREATE, 403, "NO_AUTH", WXE_REFUSED},
    {WXE_CREATE, 403, "NOT_ENOUGH", WXE_REFUSED},
    {WXE_CREATE, 403, "OUT_TRADE_NO_USED", WXE_REFUSED},
    {WXE_CREATE, 403, "TRADE_ERROR", WXE_REFUSED},
    {WXE_CREATE, 403, "RULE_LIMIT", WXE_UNDECIDED},
    {WXE_CREATE, 429, "FREQUENCY_LIMITED", WXE_UNDECIDED},
    {WXE_CREATE, 429, "RATELIMIT_EXCEEDED", WXE_UNDECIDED},
    {WXE_CREATE, 500, "SYSTEM_ERROR", WXE_UNDECIDED},
    {WXE_CREATE, 500, "BANK_ERROR", WXE_UNDECIDED},
    {WXE_CREATE, 500, "INVALID_TRANSACTIONID", WXE_UNDECIDED},
    {WXE_CREATE, 500, "OPENID_MISMATCH", WXE_UNDECIDED},
    /* POST /v3/refund/domestic/refunds (申请退款) */
    {WXE_REFUND, 400, "PARAM_ERROR", WXE_REFUSED},
    {WXE_REFUND, 400, "INVALID_REQUEST", WXE_REFUSED},
    {WXE_REFUND, 401, "SIGN_ERROR", WXE_REFUSED},
    {WXE_REFUND, 403, "NOT_ENOUGH", WXE_REFUSED},
    {WXE_REFUND, 403, "USER_ACCOUNT_ABNORMAL", WXE_REFUSED},
    {WXE_REFUND, 403, "NO_AUTH", WXE_REFUSED},
    {WXE_REFUND, 404, "RESOURCE_NOT_EXISTS", WXE_REFUSED},
    {WXE_REFUND, 404, "MCH_NOT_EXISTS", WXE_REFUSED},
    {WXE_REFUND, 429, "FREQUENCY_LIMITED", WXE_UNDECIDED},
    {WXE_REFUND, 500, "SYSTEM_ERROR", WXE_UNDECIDED},
};

static const char *const wxe_fault[] = {
    [WXE_QUERY] = "GET /v3/pay/transactions/out-trade-no/",
    [WXE_CERTS] = "GET /v3/certificates",
    [WXE_BILL] = "GET /v3/bill/tradebill",
    [WXE_RQUERY] = "GET /v3/refund/domestic/refunds/",
    [WXE_CLOSE] = "POST /v3/pay/transactions/out-trade-no/",
    [WXE_CREATE] = "POST /v3/pay/transactions/native",
    [WXE_REFUND] = "POST /v3/refund/domestic/refunds",
};

/* The rounds ask two of their objects (the query, the refund query):
 * their rows' faults are for both, and a 429 must stop at the first. */
static int wxe_asks(enum wxe_op op)
{
    return op == WXE_QUERY || op == WXE_RQUERY ? 2 : 1;
}

/* Runs row i once (the channel answering its code, fault set), or the
 * operation with the channel back (row NULL); true when the effect is the
 * row's (with the channel back: decided). */
static bool wxe_act(const struct wxe_row *row, enum wxe_op op, int i, char *why, size_t cap)
{
    struct po_store *s = t_open(url);
    struct po_channel_account *a = account_of_t1("wechatpay");
    char err[PO_ERRBUF_SIZE] = "", no[32], body[256];
    struct resp r = {0};
    bool good = false;
    int64_t now = (int64_t)time(NULL);
    enum wxe_effect want = row ? row->effect : WXE_UNDECIDED;
    const char *code = row ? row->code : "";
    switch (op) {
    case WXE_QUERY: {
        struct po_query_report x;
        po_err rc = po_order_query_round(s, NULL, a, 0, 100, &x, err, sizeof err);
        good = rc == PO_OK &&
               (!row ? x.replayed == 1 && status_is("WEQ-0001", "PAID")
                : want == WXE_NOT_PAID
                    ? x.not_paid == 2 && x.failed == 0 && status_is("WEQ-0001", "PAYING")
                    : x.failed == x.queried && strstr(x.first_failure, code) &&
                          x.queried == (row->status == 429 ? 1 : 2) &&
                          status_is("WEQ-0001", "PAYING"));
        snprintf(why, cap, "%s: %lld queried, %lld not paid, %lld replayed, %lld failed (%s)", err,
                 (long long)x.queried, (long long)x.not_paid, (long long)x.replayed,
                 (long long)x.failed, x.first_failure);
        break;
    }
    case WXE_CERTS: {
        struct po_keys_refresh_report x;
        po_err rc = po_keys_refresh_round(s, NULL, mkey, now, &x, err, sizeof err);
        good = rc == PO_OK && x.accounts == 1 && (row ? x.failed == 1 && !x.added : x.failed == 0);
        snprintf(why, cap, "%s: %lld accounts, %lld added, %lld failed", err, (long long)x.accounts,
                 (long long)x.added, (long long)x.failed);
        break;
    }
    case WXE_BILL: {
        struct po_recon_day_result x;
        char day[11];
        time_t t = time(NULL) + 8 * 3600;
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(day, sizeof day, "%Y-%m-%d", &tm);
        po_err rc = po_recon_fetch_day(&(struct po_door){s, NULL}, a, day, true, now, 60, &x, err,
                                       sizeof err);
        good = rc == PO_OK && (!row                    ? x.imported
                               : want == WXE_NO_BILL   ? x.state == PO_BILL_NONE && !x.imported
                               : want == WXE_NOT_READY ? x.state == PO_BILL_NOT_READY && !x.imported
                                                       : x.state == PO_BILL_FAILED && !x.imported &&
                                                             strstr(x.why, code));
        snprintf(why, cap, "%s: state %d (%s), imported %d", err, (int)x.state, x.why,
                 (int)x.imported);
        break;
    }
    case WXE_RQUERY: {
        struct po_refund_query_report x;
        po_err rc = po_refund_query_round(s, NULL, NULL, mkey, 0, 100, &x, err, sizeof err);
        good = rc == PO_OK && (!row ? x.applied == 2 && refund_status_is("WERQ-1", "SUCCESS") &&
                                          refund_status_is("WERQ-2", "SUCCESS")
                                    : x.applied == 0 && x.failed == x.queried &&
                                          x.queried == (row->status == 429 ? 1 : 2) &&
                                          refund_status_is("WERQ-1", "PROCESSING") &&
                                          refund_status_is("WERQ-2", "PROCESSING"));
        snprintf(why, cap, "%s: %lld queried, %lld applied, %lld failed", err, (long long)x.queried,
                 (long long)x.applied, (long long)x.failed);
        break;
    }
    case WXE_CLOSE:
        snprintf(no, sizeof no, "WEX-%04d", row ? i : 9999);
        order_on(no, 100, "wechatpay");
        close_order(no, NULL, &r);
        good = want == WXE_UNDECIDED && row ? has_code(&r, 503, "channel_unavailable") &&
                                                  strstr(r.body, code) && status_is(no, "PAYING")
                                            : r.status == 200 && status_is(no, "CLOSED");
        snprintf(why, cap, "%ld %.200s", r.status, r.body);
        break;
    case WXE_CREATE:
        snprintf(no, sizeof no, "WEC-%04d", row ? i : 9999);
        snprintf(body, sizeof body,
                 "{\"merchant\":\"m1\",\"out_trade_no\":\"%s\",\"amount\":100,\"channel\":"
                 "\"wechatpay\",\"pay_method\":\"native\"}",
                 no);
        api("POST", gw_port, "/v1/orders", key1, NULL, body, &r);
        good = !row ? r.status == 201 && !no_payment(no)
               : want == WXE_REFUSED
                   ? has_code(&r, 409, "channel_refused") && strstr(r.body, code) &&
                         no_payment(no) && status_is(no, "PAYING")
                   : has_code(&r, 503, "channel_unavailable") && strstr(r.body, code) &&
                         no_payment(no);
        snprintf(why, cap, "%ld %.200s", r.status, r.body);
        break;
    case WXE_REFUND:
        snprintf(no, sizeof no, "WERF-%02d", row ? i : 99);
        snprintf(body, sizeof body,
                 "{\"out_trade_no\":\"WEP-0001\",\"out_refund_no\":\"%s\",\"amount\":10}", no);
        api("POST", gw_port, "/v1/refunds", key1, NULL, body, &r);
        snprintf(body, sizeof body, "api:refund:%s", no);
        good = r.status == 201 &&
               (!row ? refund_state_is(no, "submitted")
                : want == WXE_REFUSED
                    ? refund_status_is(no, "CLOSED") && refund_state_is(no, "rejected") &&
                          q1("SELECT COUNT(*) FROM alert WHERE reason ="
                             " 'refund_rejected_by_channel' AND idem_key = ?",
                             body) == 1
                    : refund_status_is(no, "PROCESSING") && refund_state_is(no, "pending"));
        snprintf(why, cap, "%ld %.300s", r.status, r.body);
        break;
    }
    account_drop(a);
    po_store_close(s);
    return good;
}

/* DIR/faults as it is now (each line's count is what is left of it). */
static void faults_now(char *out, size_t cap)
{
    char path[512], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/sim/faults", dir);
    if (po_file_read(path, 4096, &text, &len)) {
        snprintf(out, cap, "(unreadable)");
        return;
    }
    /* each line without its caller key (sim_faults wrote it; test_sim_api
     * checks that the simulator keeps it) */
    out[0] = '\0';
    for (char *p = text; p && *p;) {
        char *nl = strchr(p, '\n'), *end = nl ? nl + 1 : p + strlen(p), *sp = strchr(p, ' ');
        char *from = *p == '@' && sp && sp < end ? sp + 1 : p;
        size_t have = strlen(out);
        snprintf(out + have, cap - have, "%.*s", (int)(end - from), from);
        p = end;
    }
    free(text);
}

/* Whether the row's fault was used as it should: all its asks, but one
 * when a 429 stopped the round. */
static bool wxe_fault_used(const struct wxe_row *row, char *left, size_t cap)
{
    char want[200];
    int asks = wxe_asks(row->op), rest = row->status == 429 ? asks - 1 : 0;
    snprintf(want, sizeof want, "%s %u %d %s\n", wxe_fault[row->op], row->status, rest, row->code);
    faults_now(left, cap);
    return strcmp(left, want) == 0;
}

/* trade_state REFUND (转入退款) is the payment: a payment whose
 * notification was lost and which was refunded at the channel (by the
 * merchant's own call, notified nowhere) is credited by the query. */
static void wxe_refunded_payment(void)
{
    order_on("WEQ-0003", 300, "wechatpay");
    run("sim pay --dir sim --order WEQ-0003:300 --txn 4200000000000000000000098003 --lose");
    struct po_store *s = t_open(url);
    struct po_channel_account *a = account_of_t1("wechatpay");
    struct po_refund_request rq = {"WEQ-0003", "WEQR-3", 100, 300, "CNY", NULL};
    struct po_refund_answer ra;
    struct po_query_report x;
    char err[PO_ERRBUF_SIZE] = "";
    bool refunded = po_channel_find("wechatpay")->refund_submit(a, &rq, &ra) == PO_OK &&
                    ra.decision == PO_REFUND_SUBMITTED;
    po_err rc = po_order_query_round(s, NULL, a, 0, 100, &x, err, sizeof err);
    T_CHECK(refunded && rc == PO_OK && x.replayed == 1 && status_is("WEQ-0003", "PAID") &&
                pay_journals("WEQ-0003") == 1,
            "wechatpay query, trade_state REFUND: credited (%s; %lld replayed)", err,
            (long long)x.replayed);
    account_drop(a);
    po_store_close(s);
}

static void test_wechatpay_errors(void)
{
    char sim_base[64], fault[200], why[600], left[200];
    snprintf(sim_base, sizeof sim_base, "http://127.0.0.1:%u", sim_port);
    /* the query's orders first (the oldest PAYING): one paid at the
     * channel, its notification lost; one the channel never had */
    order_on("WEQ-0001", 700, "wechatpay");
    order_on("WEQ-0002", 800, "wechatpay");
    run("sim pay --dir sim --order WEQ-0001:700 --txn 4200000000000000000000098001 --lose");
    /* a payment to refund; two refunds whose notifications are lost (the
     * refund query finds their results) */
    paid_order_of_t1("WEP-0001", 5000);
    run("channel set --tenant t1 --channel wechatpay --mchid %s --appid %s --apiv3-key-file "
        "sim/apiv3.key --platform-cert-file sim/wechatpay_platform_cert.pem"
        " --api-base-url %s --merchant-private-key-file sim/merchant_private_key.pem"
        " --merchant-serial %s --notify-url http://127.0.0.1:1/notify/wechatpay/t1",
        id.mchid, id.appid, sim_base, id.merchant_serial);
    struct resp r;
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"WEP-0001\",\"out_refund_no\":\"WERQ-1\",\"amount\":100}", &r);
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"WEP-0001\",\"out_refund_no\":\"WERQ-2\",\"amount\":100}", &r);
    T_CHECK(refund_state_is("WERQ-1", "submitted") && refund_state_is("WERQ-2", "submitted"),
            "wechatpay errors: the refund query's refunds submitted");
    int rows = 0;
    for (int op = WXE_QUERY; op <= WXE_REFUND; op++) {
        if (op == WXE_BILL) /* the refund query's are done: results notified again */
            t1_wechatpay(sim_base, "sim");
        for (int i = 0; i < (int)PO_NELEM(wxe_table); i++) {
            const struct wxe_row *row = &wxe_table[i];
            if ((int)row->op != op)
                continue;
            snprintf(fault, sizeof fault, "%s %u %d %s\n", wxe_fault[op], row->status,
                     wxe_asks(row->op), row->code);
            sim_faults(fault);
            bool effect = wxe_act(row, row->op, i, why, sizeof why);
            bool used = wxe_fault_used(row, left, sizeof left);
            sim_file("faults", "");
            T_CHECK(effect && used,
                    "wechatpay %s, %u %s: not what the table says (%s); faults left: %s",
                    wxe_fault[op], row->status, row->code, why, left);
            rows++;
        }
        T_CHECK(wxe_act(NULL, (enum wxe_op)op, 0, why, sizeof why),
                "wechatpay %s, the channel back: not decided (%s)", wxe_fault[op], why);
        if (op == WXE_QUERY)
            wxe_refunded_payment();
    }
    /* the refunds left pending: a 429 stops the round after the first;
     * the channel back, every one is submitted */
    struct po_store *s = t_open(url);
    int pending = (int)q1("SELECT COUNT(*) FROM refund WHERE submit_state = 'pending' AND"
                          " out_refund_no LIKE ?",
                          "WERF-%"),
        n = -1;
    sim_faults("POST /v3/refund/domestic/refunds 429 9 FREQUENCY_LIMITED\n");
    bool ran = pending >= 2 && po_refund_submit_pending(s, NULL, mkey, 0, 100, &n) == PO_OK;
    faults_now(left, sizeof left);
    T_CHECK(ran && n == 0 &&
                q1("SELECT COUNT(*) FROM refund WHERE submit_state = 'pending' AND"
                   " out_refund_no LIKE ?",
                   "WERF-%") == pending &&
                strcmp(left, "POST /v3/refund/domestic/refunds 429 8 FREQUENCY_LIMITED\n") == 0,
            "wechatpay refunds pending, rate-limited: %d of %d submitted; faults left %s", n,
            pending, left);
    sim_file("faults", "");
    T_CHECK(po_refund_submit_pending(s, NULL, mkey, 0, 100, &n) == PO_OK && n == pending,
            "wechatpay refunds pending, the channel back: %d of %d submitted", n, pending);
    po_store_close(s);
    t_figure("# api[%s] WeChat Pay's documented error answers: %d rows (operation x code) of"
             " docs/channels.md, each answered by the simulator and payonce's effect asserted;"
             " a 429 stops the round for the tenant's channel\n",
             backend, rows);
}

/* ---- a lost create answer, retried safely (issue 43 item 6) ----
 * The channel made the payment but its answer never came (DIR/faults 3:
 * served, the answer held past payonce's patience): the create is 503 and
 * the order PAYING without a payment; the same create again sends the
 * same request — the channel answers the same payment, once (WeChat Pay
 * is idempotent on out_trade_no for identical parameters). A create with
 * other parameters (another description) meets WeChat Pay's "201 商户订单
 * 号重复": 409 channel_refused naming it, nothing recorded. */
static void test_wechatpay_lost_create(void)
{
    char sim_base[64];
    snprintf(sim_base, sizeof sim_base, "http://127.0.0.1:%u", sim_port);
    t1_wechatpay(sim_base, "sim");
    static const char first[] =
        "{\"merchant\":\"m1\",\"out_trade_no\":\"WLC-0001\",\"amount\":900,\"channel\":"
        "\"wechatpay\",\"pay_method\":\"native\",\"description\":\"lost answer\"}";
    static const char other[] =
        "{\"merchant\":\"m1\",\"out_trade_no\":\"WLC-0001\",\"amount\":900,\"channel\":"
        "\"wechatpay\",\"pay_method\":\"native\",\"description\":\"another description\"}";
    struct resp r;
    po_api_set_timeout_ms(1000); /* the simulator holds the answer 3 s */
    sim_faults("POST /v3/pay/transactions/native 3 1\n");
    api("POST", gw_port, "/v1/orders", key1, "wlc-1", first, &r);
    po_api_set_timeout_ms(10000);
    sim_file("faults", "");
    json_t *made = sim_record("created", "out_trade_no", "WLC-0001", NULL, NULL);
    char code_url[200] = "";
    snprintf(code_url, sizeof code_url, "%s", pstr(json_object_get(made, "answer"), "code_url"));
    json_decref(made);
    T_CHECK(has_code(&r, 503, "channel_unavailable") && strstr(r.body, "no_answer") &&
                no_payment("WLC-0001") && status_is("WLC-0001", "PAYING") &&
                sim_created("created", "WLC-0001") == 1 && code_url[0],
            "the create's answer lost: %ld %s (%d at the channel)", r.status, r.body,
            sim_created("created", "WLC-0001"));
    /* other parameters for the number: the channel's refusal, surfaced */
    api("POST", gw_port, "/v1/orders", key1, NULL, other, &r);
    T_CHECK(has_code(&r, 409, "channel_refused") && strstr(r.body, "INVALID_REQUEST") &&
                no_payment("WLC-0001") && sim_created("created", "WLC-0001") == 1,
            "the same number with another description: %ld %s", r.status, r.body);
    /* the same create again: the payment the channel made, once */
    api("POST", gw_port, "/v1/orders", key1, "wlc-1", first, &r);
    json_t *pay = payment_of(&r);
    T_CHECK((r.status == 200 || r.status == 201) && !r.replayed &&
                strcmp(pstr(pay, "code_url"), code_url) == 0 && !no_payment("WLC-0001") &&
                sim_created("created", "WLC-0001") == 1,
            "the lost create retried: %ld %s (the channel's %s; %d at the channel)", r.status,
            r.body, code_url, sim_created("created", "WLC-0001"));
    json_decref(pay);
    run("sim pay --dir sim --created --order WLC-0001");
    T_CHECK(status_is("WLC-0001", "PAID") && pay_journals("WLC-0001") == 1,
            "the retried create's payment paid once");
}

/* ---- Stripe: webhooks that never came, recovered from /v1/events ---- */

struct recover_racer {
    pthread_barrier_t *go;
    struct po_recover_report rep;
    po_err rc;
};

static void *recover_one(void *arg)
{
    struct recover_racer *a = arg;
    struct po_store *s = t_open(url);
    struct po_channel_account *acct = calloc(1, sizeof *acct);
    char err[PO_ERRBUF_SIZE] = "";
    if (!acct || po_account_fetch(s, mkey, "t1", "stripe", acct, err, sizeof err))
        die(err);
    pthread_barrier_wait(a->go);
    a->rc =
        po_events_recover_round(s, NULL, acct, (int64_t)time(NULL), 2, &a->rep, err, sizeof err);
    po_channel_account_free(acct);
    free(acct);
    po_store_close(s);
    return NULL;
}

static struct po_recover_report recover_stripe(void)
{
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 1);
    struct recover_racer a = {&go, {0}, PO_OK};
    recover_one(&a);
    pthread_barrier_destroy(&go);
    if (a.rc)
        die("po_events_recover_round");
    return a.rep;
}

static void test_stripe_events(void)
{
    t1_stripe("sim");
    /* Three payments whose webhooks never came: recovered from the
     * events, two to a page (has_more), each credited once. */
    static const char *const nos[] = {"SE-1", "SE-2", "SE-3"};
    char txn[3][40];
    for (int i = 0; i < 3; i++) {
        stripe_order(nos[i], 100 * (i + 1));
        snprintf(txn[i], sizeof txn[i], "pi_00000000000000000000980%d", i + 1);
        run("sim pay --dir sim --channel stripe --currency USD --order %s:%d --txn %s --lose",
            nos[i], 100 * (i + 1), txn[i]);
    }
    struct po_recover_report x = recover_stripe();
    /* (the simulator is shared by the cases: the events of other cases'
     * Stripe payments are there too, for orders this database does not
     * have — rejected, never credited) */
    T_CHECK(x.whole && x.events >= 3 && x.replayed == 3 && status_is("SE-1", "PAID") &&
                pay_journals("SE-1") == 1 && pay_journals("SE-2") == 1 &&
                pay_journals("SE-3") == 1 &&
                count_in("SELECT COUNT(*) FROM notify_log WHERE source = 'query' AND idem_key = ?",
                         "stripe:pi_000000000000000000009801:PAY_SUCCESS") == 1,
            "recovered from /v1/events, 2 a page: %lld events, %lld credited, whole %d (%s)",
            (long long)x.events, (long long)x.replayed, x.whole, x.why);
    /* Again: the cursor moved; what the overlap shows again is a
     * duplicate, nothing new. */
    x = recover_stripe();
    T_CHECK(x.whole && x.replayed == 0 && pay_journals("SE-2") == 1,
            "a second walk: %lld events, %lld credited", (long long)x.events,
            (long long)x.replayed);
    /* A late webhook of a recovered payment: a duplicate. */
    struct po_sim_payment pay = {"stripe", "SE-1", txn[0], 100, "USD", (int64_t)time(NULL)};
    struct po_sim_notice notice = {&id, &pay, NULL};
    struct po_sim_request req;
    if (po_sim_notice_build(&notice, (int64_t)time(NULL), &req))
        die("stripe webhook");
    char ans[512];
    T_CHECK(t_http_sim(gw_port, "/notify/stripe/t1", &req, ans, sizeof ans) == 200 &&
                pay_journals("SE-1") == 1,
            "the late webhook of a recovered payment: one credit");
    po_sim_request_free(&req);
    /* A lost payment whose webhook arrives at the same moment as the
     * walk that recovers it, three copies: credited once. */
    stripe_order("SE-4", 400);
    run("sim pay --dir sim --channel stripe --currency USD --order SE-4:400"
        " --txn pi_000000000000000000009804 --lose");
    struct po_sim_payment pay4 = {"stripe", "SE-4", "pi_000000000000000000009804",
                                  400,      "USD",  (int64_t)time(NULL)};
    struct po_sim_notice n4 = {&id, &pay4, NULL};
    if (po_sim_notice_build(&n4, (int64_t)time(NULL), &req))
        die("stripe webhook");
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 4);
    struct recover_racer rr = {&go, {0}, PO_OK};
    struct cb cbs[3];
    pthread_t th[4];
    pthread_create(&th[0], NULL, recover_one, &rr);
    for (int i = 0; i < 3; i++) {
        cbs[i] = (struct cb){&go, &req, 0, "stripe"};
        pthread_create(&th[i + 1], NULL, send_cb, &cbs[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);
    po_sim_request_free(&req);
    T_CHECK(rr.rc == PO_OK && cbs[0].status == 200 && cbs[1].status == 200 &&
                cbs[2].status == 200 && pay_journals("SE-4") == 1 && status_is("SE-4", "PAID"),
            "the walk and three webhooks at once: %lld journal(s)",
            (long long)pay_journals("SE-4"));
    /* A key Stripe refuses: nothing applied, the cursor stays. */
    stripe_order("SE-5", 500);
    run("sim pay --dir sim --channel stripe --currency USD --order SE-5:500"
        " --txn pi_000000000000000000009805 --lose");
    t1_stripe("other");
    x = recover_stripe();
    T_CHECK(!x.whole && x.replayed == 0 && status_is("SE-5", "PAYING") && strstr(x.why, "401"),
            "events with a key Stripe refuses: whole %d, %s", x.whole, x.why);
    t1_stripe("sim");
    x = recover_stripe();
    T_CHECK(x.whole && x.replayed == 1 && status_is("SE-5", "PAID"), "the key back: %lld credited",
            (long long)x.replayed);
}

/* ---- Stripe's documented error answers, each mapped (issue 43 item 5) ---- */

/* The operation a row fails, and what payonce must do with the error:
 * REFUSED — refused for good (a create 409 channel_refused, a refund
 * rejected and closed with its alert, a query "not paid by that id", a
 * refund query "no such refund"); UNDECIDED — nothing decided, the same
 * operation decided once Stripe is back (after its Retry-After); DONE —
 * the close completes: Stripe says it has no such PaymentIntent, so
 * nobody can pay it. docs/channels.md "Error answers: Stripe" is this
 * table. */
enum sx_op {
    SX_CREATE,
    SX_QUERY,
    SX_SEARCH,
    SX_RETRIEVE,
    SX_CANCEL,
    SX_REFUND,
    SX_RQUERY,
    SX_EVENTS,
    SX_BILL
};
enum sx_then { SX_REFUSED, SX_UNDECIDED, SX_DONE };
struct sx_row {
    enum sx_op op;
    unsigned status;
    const char *code;
    enum sx_then then;
};

static const struct sx_row SX[] = {
    {SX_CREATE, 400, "parameter_unknown", SX_REFUSED},
    {SX_CREATE, 400, "amount_too_small", SX_REFUSED},
    {SX_CREATE, 400, "amount_too_large", SX_REFUSED},
    {SX_CREATE, 400, "idempotency_error", SX_REFUSED},
    {SX_CREATE, 401, "api_key_expired", SX_REFUSED},
    {SX_CREATE, 409, "idempotency_key_in_use", SX_UNDECIDED},
    {SX_CREATE, 429, "rate_limit", SX_UNDECIDED},
    {SX_CREATE, 429, "lock_timeout", SX_UNDECIDED},
    {SX_CREATE, 500, "api_error", SX_UNDECIDED},
    {SX_QUERY, 404, "resource_missing", SX_REFUSED},
    {SX_QUERY, 401, "api_key_expired", SX_UNDECIDED},
    {SX_QUERY, 429, "rate_limit", SX_UNDECIDED},
    {SX_QUERY, 500, "api_error", SX_UNDECIDED},
    {SX_SEARCH, 500, "api_error", SX_UNDECIDED},
    {SX_SEARCH, 429, "rate_limit", SX_UNDECIDED},
    {SX_RETRIEVE, 404, "resource_missing", SX_DONE},
    {SX_RETRIEVE, 500, "api_error", SX_UNDECIDED},
    {SX_CANCEL, 400, "payment_intent_unexpected_state", SX_UNDECIDED},
    {SX_CANCEL, 404, "resource_missing", SX_DONE},
    {SX_CANCEL, 409, "idempotency_key_in_use", SX_UNDECIDED},
    {SX_CANCEL, 429, "lock_timeout", SX_UNDECIDED},
    {SX_CANCEL, 500, "api_error", SX_UNDECIDED},
    {SX_REFUND, 400, "charge_already_refunded", SX_REFUSED},
    {SX_REFUND, 400, "amount_too_large", SX_REFUSED},
    {SX_REFUND, 400, "amount_too_small", SX_REFUSED},
    {SX_REFUND, 400, "resource_missing", SX_REFUSED},
    {SX_REFUND, 400, "charge_disputed", SX_REFUSED},
    {SX_REFUND, 400, "parameter_unknown", SX_REFUSED},
    {SX_REFUND, 400, "idempotency_error", SX_REFUSED},
    {SX_REFUND, 409, "idempotency_key_in_use", SX_UNDECIDED},
    {SX_REFUND, 429, "rate_limit", SX_UNDECIDED},
    {SX_REFUND, 500, "api_error", SX_UNDECIDED},
    {SX_REFUND, 401, "api_key_expired", SX_UNDECIDED},
    {SX_RQUERY, 404, "resource_missing", SX_REFUSED},
    {SX_RQUERY, 429, "rate_limit", SX_UNDECIDED},
    {SX_RQUERY, 500, "api_error", SX_UNDECIDED},
    {SX_EVENTS, 429, "rate_limit", SX_UNDECIDED},
    {SX_EVENTS, 500, "api_error", SX_UNDECIDED},
    {SX_BILL, 429, "rate_limit", SX_UNDECIDED},
    {SX_BILL, 500, "api_error", SX_UNDECIDED},
};

/* Row x's order no, created at Stripe (payment_intent; its id into pi),
 * and — paid: paid there, its webhook to payonce (notified) or lost. */
static void sx_order(const char *no, bool paid, bool notified, char *pi, size_t cap)
{
    char body[300];
    struct resp r;
    snprintf(body, sizeof body,
             "{\"merchant\":\"m1\",\"out_trade_no\":\"%s\",\"amount\":1000,\"currency\":\"USD\","
             "\"channel\":\"stripe\",\"pay_method\":\"payment_intent\"}",
             no);
    api("POST", gw_port, "/v1/orders", key1, NULL, body, &r);
    json_t *p = payment_of(&r);
    snprintf(pi, cap, "%s", pstr(p, "payment_intent"));
    json_decref(p);
    if (r.status != 201 || strncmp(pi, "pi_", 3) != 0)
        die(r.body);
    if (paid && notified)
        run("sim pay --dir sim --channel stripe --created --order %s --time-factor 1000"
            " --notify-url http://127.0.0.1:%u/notify/stripe/t1",
            no, gw_port);
    else if (paid)
        run("sim pay --dir sim --channel stripe --created --order %s --lose", no);
}

/* Runs the row's operation once against the fault (then), or with Stripe
 * back (then SX_DONE after an undecided one): whether payonce did what
 * the row says; why says what it saw. */
static bool sx_act(const struct sx_row *x, const char *no, const char *pi, bool back, char *why,
                   size_t cap)
{
    struct resp r = {0};
    struct po_store *s = t_open(url);
    struct po_channel_account *a = account_of_t1("stripe");
    const struct po_channel_ops *ch = po_channel_find("stripe");
    enum sx_then then = back ? SX_DONE : x->then;
    char err[PO_ERRBUF_SIZE] = "", st[32] = "", rno[32], body[200];
    bool good = false;
    snprintf(rno, sizeof rno, "%sR", no);
    switch (x->op) {
    case SX_CREATE:
        snprintf(body, sizeof body,
                 "{\"merchant\":\"m1\",\"out_trade_no\":\"%s\",\"amount\":1000,\"currency\":"
                 "\"USD\",\"channel\":\"stripe\",\"pay_method\":\"payment_intent\"}",
                 no);
        api("POST", gw_port, "/v1/orders", key1, NULL, body, &r);
        good = then == SX_REFUSED     ? has_code(&r, 409, "channel_refused") && no_payment(no)
               : then == SX_UNDECIDED ? has_code(&r, 503, "channel_unavailable") && no_payment(no)
                                      : r.status / 100 == 2 && strstr(r.body, "client_secret");
        good = good && sim_created("intents", no) == (then == SX_DONE);
        snprintf(why, cap, "%ld %.200s", r.status, r.body);
        break;
    case SX_QUERY: {
        struct po_query_answer qa;
        struct po_order_ref ref = {no, pi, ""};
        good = ch->order_query(a, &ref, &qa) == PO_OK &&
               qa.state == (then == SX_REFUSED     ? PO_QUERY_NOT_PAID
                            : then == SX_UNDECIDED ? PO_QUERY_FAILED
                                                   : PO_QUERY_PAID) &&
               status_is(no, "PAYING");
        snprintf(why, cap, "state %d (%s), HTTP %ld", (int)qa.state, qa.why, qa.http_status);
        break;
    }
    case SX_SEARCH:
    case SX_RETRIEVE:
    case SX_CANCEL:
        close_order(no, NULL, &r);
        sim_intent_status(pi, st, sizeof st);
        good = then == SX_UNDECIDED
                   ? has_code(&r, 503, "channel_unavailable") && status_is(no, "PAYING") &&
                         strcmp(st, "requires_payment_method") == 0
                   : r.status == 200 && status_is(no, "CLOSED") &&
                         strcmp(st, x->then == SX_DONE && !back ? "requires_payment_method"
                                                                : "canceled") == 0;
        snprintf(why, cap, "%ld %.200s (%s at Stripe)", r.status, r.body, st);
        break;
    case SX_REFUND:
        if (!back) {
            snprintf(body, sizeof body,
                     "{\"out_trade_no\":\"%s\",\"out_refund_no\":\"%s\",\"amount\":300}", no, rno);
            api("POST", gw_port, "/v1/refunds", key1, NULL, body, &r);
        }
        int n = 0;
        good =
            (!back || po_refund_submit_pending(s, NULL, mkey, 0, 100, &n) == PO_OK) &&
            (then == SX_REFUSED
                 ? refund_state_is(rno, "rejected") && refund_status_is(rno, "CLOSED") &&
                       q1("SELECT refund_reserved FROM pay_order WHERE out_trade_no = ?", no) ==
                           0 &&
                       q1("SELECT COUNT(*) FROM alert WHERE reason = 'refund_rejected_by_channel'"
                          " AND out_trade_no = ?",
                          no) == 1
             : then == SX_UNDECIDED
                 ? refund_state_is(rno, "pending") && refund_status_is(rno, "PROCESSING")
                 : refund_state_is(rno, "submitted"));
        snprintf(body, sizeof body, "/v1/refunds/%s", rno);
        api("GET", gw_port, body, key1, NULL, NULL, &r);
        snprintf(why, cap, "refund %s: %.300s", rno, r.body);
        break;
    case SX_RQUERY: {
        struct po_refund_query_report q;
        good = po_refund_query_round(s, NULL, NULL, mkey, 0, 100, &q, err, sizeof err) == PO_OK &&
               refund_status_is(rno, then == SX_DONE ? "SUCCESS" : "PROCESSING");
        snprintf(why, cap, "%s: %lld queried, %lld applied, %lld failed", err, (long long)q.queried,
                 (long long)q.applied, (long long)q.failed);
        break;
    }
    case SX_EVENTS: {
        struct po_recover_report q;
        good = po_events_recover_round(s, NULL, a, (int64_t)time(NULL), 100, &q, err, sizeof err) ==
                   PO_OK &&
               q.whole == (then == SX_DONE) && (then == SX_DONE || q.replayed == 0);
        snprintf(why, cap, "%s: whole %d, %lld replayed (%s)", err, (int)q.whole,
                 (long long)q.replayed, q.why);
        break;
    }
    case SX_BILL: {
        struct po_bill_fetch bf;
        time_t t = time(NULL);
        char day[16];
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(day, sizeof day, "%Y-%m-%d", &tm);
        good = ch->bill_fetch(a, day, &bf) == PO_OK &&
               (then == SX_DONE ? bf.state == PO_BILL_FETCHED : bf.state == PO_BILL_FAILED);
        snprintf(why, cap, "state %d (%s), HTTP %ld", (int)bf.state, bf.why, bf.http_status);
        free(bf.data);
        break;
    }
    }
    account_drop(a);
    po_store_close(s);
    return good;
}

static void test_stripe_errors(void)
{
    t1_stripe("sim");
    int n = (int)(sizeof SX / sizeof SX[0]);
    for (int i = 0; i < n; i++) {
        const struct sx_row *x = &SX[i];
        char no[16], pi[64] = "", fault[200], why[600] = "", rid[64] = "";
        snprintf(no, sizeof no, "SX-%02d", i);
        if (x->op == SX_QUERY)
            sx_order(no, true, false, pi, sizeof pi);
        else if (x->op == SX_REFUND || x->op == SX_RQUERY)
            sx_order(no, true, true, pi, sizeof pi);
        else if (x->op != SX_CREATE && x->op != SX_EVENTS && x->op != SX_BILL)
            sx_order(no, false, false, pi, sizeof pi);
        if (x->op == SX_RQUERY) { /* a refund submitted, its result not notified */
            char body[200], rno[32];
            struct resp r;
            snprintf(rno, sizeof rno, "%sR", no);
            snprintf(body, sizeof body,
                     "{\"out_trade_no\":\"%s\",\"out_refund_no\":\"%s\",\"amount\":300}", no, rno);
            api("POST", gw_port, "/v1/refunds", key1, NULL, body, &r);
            if (r.status != 201 || !sim_refund_id(rno, rid, sizeof rid))
                die(r.body);
        }
        static const char *const where[] = {[SX_CREATE] = "POST /v1/payment_intents ",
                                            [SX_QUERY] = "GET /v1/payment_intents/",
                                            [SX_SEARCH] = "GET /v1/payment_intents/search ",
                                            [SX_RETRIEVE] = "GET /v1/payment_intents/",
                                            [SX_CANCEL] = "POST /v1/payment_intents/",
                                            [SX_REFUND] = "POST /v1/refunds ",
                                            [SX_RQUERY] = "GET /v1/refunds/",
                                            [SX_EVENTS] = "GET /v1/events ",
                                            [SX_BILL] = "GET /v1/balance_transactions "};
        snprintf(fault, sizeof fault, "%s%s%s %u 1 %s\n", where[x->op],
                 x->op == SX_RQUERY                                                ? rid
                 : x->op == SX_QUERY || x->op == SX_RETRIEVE || x->op == SX_CANCEL ? pi
                                                                                   : "",
                 x->op == SX_CANCEL ? "/cancel" : "", x->status, x->code);
        sim_faults(fault);
        bool ok = sx_act(x, no, pi, false, why, sizeof why);
        T_CHECK(ok, "stripe %s: %u %s: not %s (%s)", where[x->op], x->status, x->code,
                x->then == SX_REFUSED ? "refused"
                : x->then == SX_DONE  ? "done"
                                      : "undecided",
                why);
        sim_file("faults", "");
        if (x->status == 429)
            usleep(2100 * 1000); /* Stripe's Retry-After: payonce backs off */
        if (x->then == SX_UNDECIDED)
            T_CHECK(sx_act(x, no, pi, true, why, sizeof why),
                    "stripe %s: %u %s, then Stripe back: not decided (%s)", where[x->op], x->status,
                    x->code, why);
    }
    t_figure("# api[%s] Stripe's error answers: %d rows (operation x code), each mapped as"
             " docs/channels.md says\n",
             backend, n);
}

/* ---- WeChat Pay platform certificates, rotated by payonce (issue 23, item 1) ---- */

static struct po_keys_refresh_report keys_refresh(void)
{
    struct po_store *s = t_open(url);
    struct po_keys_refresh_report x;
    char err[PO_ERRBUF_SIZE] = "";
    if (po_keys_refresh_round(s, NULL, mkey, (int64_t)time(NULL), &x, err, sizeof err))
        die(err);
    po_store_close(s);
    return x;
}

static int64_t stored_keys(void)
{
    struct po_store *s = t_open(url);
    json_t *doc = NULL;
    if (po_account_doc(s, "t1", "wechatpay", &doc, NULL, 0) || !doc)
        die("the wechatpay account");
    int64_t n = (int64_t)json_array_size(json_object_get(doc, "keys"));
    json_decref(doc);
    po_store_close(s);
    return n;
}

static void test_platform_keys(void)
{
    char sim_base[64], path[512];
    snprintf(sim_base, sizeof sim_base, "http://127.0.0.1:%u", sim_port);
    t1_wechatpay(sim_base, "sim");
    order_on("PK-0001", 900, "wechatpay");
    /* WeChat Pay's successor certificate, handed out by /v3/certificates
     * before the platform signs with it. */
    struct po_privkey *next = NULL;
    char *pem = NULL, *priv = NULL, *pub = NULL;
    const char *serial = "7E1F00000000000000000000000000000000A1B2";
    snprintf(path, sizeof path, "%s/sim/wechatpay_platform_cert_next.pem", dir);
    if (po_privkey_generate(&next) || po_cert_self_signed(next, serial, "Tenpay.com sign", &pem) ||
        po_privkey_to_pem(next, &priv, &pub))
        die("the successor certificate");
    FILE *cf = fopen(path, "w");
    if (!cf || fputs(pem, cf) < 0 || fclose(cf))
        die("the successor certificate's file");
    struct po_sim_identity id2 = id;
    id2.wx_key = next;
    snprintf(id2.serial, sizeof id2.serial, "%s", serial);
    /* Signed with the successor before payonce has it: refused. */
    unsigned st = t_sim_pay(gw_port, &id2, "t1", "PK-0001", "4200000000000000000000009901", 900);
    T_CHECK(st / 100 == 4 && status_is("PK-0001", "PAYING"),
            "a callback signed by a certificate payonce does not have: %u", st);
    /* An APIv3 key that does not decrypt the certificates: nothing taken. */
    run("channel set --tenant t1 --channel wechatpay --mchid %s --appid %s --apiv3-key-file "
        "other/apiv3.key --platform-cert-file sim/wechatpay_platform_cert.pem"
        " --api-base-url %s --merchant-private-key-file sim/merchant_private_key.pem"
        " --merchant-serial %s",
        id.mchid, id.appid, sim_base, id.merchant_serial);
    struct po_keys_refresh_report x = keys_refresh();
    T_CHECK(x.accounts == 1 && x.failed == 1 && x.added == 0 && stored_keys() == 1,
            "certificates that do not decrypt: %lld failed, %lld added", (long long)x.failed,
            (long long)x.added);
    /* The refresh: the successor added (decrypted with the APIv3 key, its
     * serial and validity checked, the answer's signature verified). */
    t1_wechatpay(sim_base, "sim");
    x = keys_refresh();
    T_CHECK(x.accounts == 1 && x.added == 1 && x.failed == 0 && stored_keys() == 2,
            "refreshed: %lld added, %lld failed, %lld stored", (long long)x.added,
            (long long)x.failed, (long long)stored_keys());
    x = keys_refresh();
    T_CHECK(x.added == 0 && stored_keys() == 2, "refreshed again: nothing new");
    /* The platform signs with the successor now: the gateway, holding the
     * account in its cache, sees the new version and accepts it. */
    st = t_sim_pay(gw_port, &id2, "t1", "PK-0001", "4200000000000000000000009901", 900);
    T_CHECK(st == 204 && status_is("PK-0001", "PAID") && pay_journals("PK-0001") == 1,
            "signed with the successor after the refresh: %u", st);
    /* An expired key in the account is dropped by the refresh. */
    {
        struct po_store *s = t_open(url);
        json_t *doc = NULL;
        char err[PO_ERRBUF_SIZE] = "";
        if (po_account_doc(s, "t1", "wechatpay", &doc, NULL, 0) || !doc)
            die("the wechatpay account");
        json_array_append_new(json_object_get(doc, "keys"),
                              json_pack("{s:s, s:s, s:I}", "serial", "0DEAD0", "public_key_pem",
                                        pub, "not_after", (json_int_t)1000));
        char *text = po_json_dumps(doc, JSON_COMPACT);
        if (!text || po_account_save(s, "t1", "wechatpay", text, err, sizeof err))
            die(err);
        free(text);
        json_decref(doc);
        po_store_close(s);
    }
    T_CHECK(stored_keys() == 3, "an expired key put in the account");
    x = keys_refresh();
    T_CHECK(x.dropped == 1 && stored_keys() == 2, "the expired key dropped: %lld",
            (long long)x.dropped);
    remove(path);
    free(pem);
    free(priv);
    free(pub);
    po_privkey_free(next);
}

/* ---- refund query: a refund whose result never came (issue 23, item 3) ---- */

static void test_refund_query(void)
{
    struct resp r;
    char sim_base[64], gwn[96];
    snprintf(sim_base, sizeof sim_base, "http://127.0.0.1:%u", sim_port);
    snprintf(gwn, sizeof gwn, "http://127.0.0.1:%u/notify/stripe/t1", gw_port);
    /* WeChat Pay: the refund result is sent where nobody listens. */
    paid_order_of_t1("RQ-0001", 1000);
    run("channel set --tenant t1 --channel wechatpay --mchid %s --appid %s --apiv3-key-file "
        "sim/apiv3.key --platform-cert-file sim/wechatpay_platform_cert.pem"
        " --api-base-url %s --merchant-private-key-file sim/merchant_private_key.pem"
        " --merchant-serial %s --notify-url http://127.0.0.1:1/notify/wechatpay/t1",
        id.mchid, id.appid, sim_base, id.merchant_serial);
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"RQ-0001\",\"out_refund_no\":\"RQR-1\",\"amount\":300}", &r);
    T_CHECK(r.status == 201, "RQR-1: %ld %s", r.status, r.body);
    /* Stripe: refunds are never notified by the simulator. */
    t1_stripe("sim");
    stripe_order("RQ-2", 900);
    run("sim pay --dir sim --channel stripe --currency USD --order RQ-2:900"
        " --txn pi_000000000000000000009702 --notify-url %s",
        gwn);
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"RQ-2\",\"out_refund_no\":\"RQR-2\",\"amount\":400}", &r);
    T_CHECK(r.status == 201, "RQR-2: %ld %s", r.status, r.body);
    /* Alipay: alipay.trade.fastpay.refund.query; its notification (with
     * the trade's cumulative refund_fee) goes where nobody listens. */
    char gateway[80], alin[96];
    snprintf(gateway, sizeof gateway, "%s/gateway.do", sim_base);
    snprintf(alin, sizeof alin, "http://127.0.0.1:%u/notify/alipay/t1", gw_port);
    run("channel set --tenant t1 --channel alipay --app-id %s --seller-id %s"
        " --alipay-public-key-file sim/alipay_public_key.pem --api-base-url %s"
        " --merchant-private-key-file sim/merchant_private_key.pem"
        " --notify-url http://127.0.0.1:1/notify/alipay/t1",
        id.app_id, id.seller_id, gateway);
    order_on("RQ-3", 800, "alipay");
    run("sim pay --dir sim --channel alipay --order RQ-3:800 --txn 2026120422001400000000009703"
        " --notify-url %s",
        alin);
    api("POST", gw_port, "/v1/refunds", key1, NULL,
        "{\"out_trade_no\":\"RQ-3\",\"out_refund_no\":\"RQR-3\",\"amount\":300}", &r);
    T_CHECK(r.status == 201, "RQR-3: %ld %s", r.status, r.body);
    T_CHECK(q1("SELECT COUNT(*) FROM refund WHERE tenant_id = 't1' AND status = 'PROCESSING' AND"
               " submit_state = ?",
               "submitted") == 3,
            "three refunds submitted and unanswered");
    /* The query finds the three results and applies them once each. */
    struct po_store *s = t_open(url);
    struct po_refund_query_report rq;
    char err[PO_ERRBUF_SIZE] = "";
    T_CHECK(po_refund_query_round(s, NULL, NULL, mkey, 0, 100, &rq, err, sizeof err) == PO_OK &&
                rq.queried == 3 && rq.applied == 3 && rq.failed == 0,
            "refund query: %s (%lld queried, %lld applied, %lld failed)", err,
            (long long)rq.queried, (long long)rq.applied, (long long)rq.failed);
    po_store_close(s);
    T_CHECK(q1("SELECT COUNT(*) FROM refund WHERE tenant_id = 't1' AND status = ? AND"
               " out_refund_no IN ('RQR-1', 'RQR-2', 'RQR-3')",
               "SUCCESS") == 3 &&
                q1("SELECT refunded_amount FROM pay_order WHERE out_trade_no = ?", "RQ-0001") ==
                    300 &&
                q1("SELECT refunded_amount FROM pay_order WHERE out_trade_no = ?", "RQ-2") == 400 &&
                q1("SELECT refunded_amount FROM pay_order WHERE out_trade_no = ?", "RQ-3") == 300,
            "refund query: all three SUCCESS, amounts refunded");
    /* The lost notifications arrive after all, three copies each at once:
     * the same key, nothing more. */
    char rid1[64] = "", rid2[64] = "";
    T_CHECK(sim_refund_id("RQR-1", rid1, sizeof rid1) && sim_refund_id("RQR-2", rid2, sizeof rid2),
            "the simulator's refund ids");
    char txn1[80] = "";
    {
        struct po_store *t = t_open(url);
        struct po_rows rows;
        if (po_store_exec(t, "SELECT channel_txn_id FROM pay_order WHERE out_trade_no = ?",
                          PO_PARAMS(PO_TEXT("RQ-0001")), &rows, NULL, NULL, 0) == PO_OK) {
            snprintf(txn1, sizeof txn1, "%s", rows.nrows ? po_rows_get(&rows, 0, 0) : "");
            po_rows_free(&rows);
        }
        po_store_close(t);
    }
    struct po_sim_refund rf1 = {"wechatpay", "RQ-0001", txn1, "RQR-1", rid1, 300, 1000, "SUCCESS"};
    struct po_sim_refund rf2 = {
        "stripe", "RQ-2", "pi_000000000000000000009702", "RQR-2", rid2, 400, 900, "SUCCESS",
        0,        "USD"};
    char rid3[64] = "";
    T_CHECK(sim_refund_id("RQR-3", rid3, sizeof rid3), "the simulator's Alipay refund id");
    /* Alipay's notification carries refund_fee, the trade's refunded total */
    struct po_sim_refund rf3 = {
        "alipay", "RQ-3", "2026120422001400000000009703", "RQR-3", rid3, 300, 800, "SUCCESS"};
    long st1[3], st2[3], st3[3];
    refund_cb_3x(&rf1, st1);
    refund_cb_3x(&rf2, st2);
    refund_cb_3x(&rf3, st3);
    T_CHECK(st1[0] / 100 == 2 && st1[2] / 100 == 2 && st2[0] == 200 && st2[2] == 200 &&
                st3[0] == 200 && st3[2] == 200 &&
                q1("SELECT COUNT(*) FROM journal WHERE kind = 'REFUND' AND out_refund_no IN"
                   " ('RQR-1', 'RQR-2', 'RQR-3') AND tenant_id = ?",
                   "t1") == 3,
            "late notifications: %ld %ld / %ld %ld / %ld %ld, %lld reversals", st1[0], st1[2],
            st2[0], st2[2], st3[0], st3[2],
            (long long)q1("SELECT COUNT(*) FROM journal WHERE kind = 'REFUND' AND out_refund_no"
                          " IN ('RQR-1', 'RQR-2', 'RQR-3') AND tenant_id = ?",
                          "t1"));
    T_CHECK(q1("SELECT COUNT(*) FROM notify_log WHERE source = 'query' AND tenant_id = ? AND"
               " event_type LIKE 'REFUND%'",
               "t1") == 3,
            "the three results were applied from the query");
    t1_wechatpay(sim_base, "sim");
}

/* A refund of t1's order through the API, completed by the channel. */
static void refund_of_t1(const char *no, const char *refund_no, int64_t amount)
{
    char body[200];
    struct resp r;
    snprintf(body, sizeof body,
             "{\"out_trade_no\":\"%s\",\"out_refund_no\":\"%s\",\"amount\":%lld}", no, refund_no,
             (long long)amount);
    api("POST", gw_port, "/v1/refunds", key1, NULL, body, &r);
    if (r.status != 201 ||
        !wait_for("SELECT COUNT(*) FROM refund WHERE out_refund_no = ? AND status = 'SUCCESS'",
                  refund_no, 1))
        die("a case's refund did not complete");
}

static void test_journal_paging(void)
{
    paid_order_of_t1("J-0001", 1000);
    paid_order_of_t1("J-0002", 300);
    refund_of_t1("J-0001", "JR-1", 600);
    refund_of_t1("J-0001", "JR-2", 400);
    int64_t total = q1("SELECT COUNT(*) FROM journal WHERE tenant_id = 't1'", NULL);
    struct journal_walk w = {0, 0, true};
    int pages = 0;
    bool ok = walk_pages("/v1/journal", 2, journal_item, &w, &pages) && w.balanced;
    T_CHECK(ok && w.seen == total && total >= 4 && pages == (int)((total + 1) / 2),
            "journal paging: %d of %lld journals in %d pages", w.seen, (long long)total, pages);
    T_CHECK(w.lines == q1("SELECT COUNT(*) FROM posting WHERE tenant_id = 't1'", NULL),
            "journal paging: %d posting lines", w.lines);
    struct resp r;
    api("GET", gw_port, "/v1/journal?out_trade_no=J-0001", key1, NULL, NULL, &r);
    json_t *j = json_loads(r.body, 0, NULL);
    T_CHECK(json_array_size(json_object_get(j, "data")) == 3, "journal for J-0001: %s", r.body);
    json_decref(j);
}

struct order_walk {
    int seen;
    bool ok;
    char last[64];
};

static void order_item(json_t *o, void *ctx)
{
    struct order_walk *w = ctx;
    const char *at = json_string_value(json_object_get(o, "created_at"));
    w->ok =
        w->ok && at && strcmp(at, w->last) >= 0 && json_is_integer(json_object_get(o, "amount"));
    snprintf(w->last, sizeof w->last, "%s", at ? at : "");
    w->seen++;
}

static void test_order_listing(void)
{
    paid_order_of_t1("L-0001", 100);
    paid_order_of_t1("L-0002", 200);
    for (int i = 3; i <= 5; i++) {
        char no[8];
        snprintf(no, sizeof no, "L-%04d", i);
        order_of_t1(no, 100 * i);
    }
    struct resp r;
    api("POST", gw_port, "/v1/orders", key2, NULL,
        "{\"merchant\":\"m1\",\"out_trade_no\":\"T2-1\",\"amount\":100}", &r);
    T_CHECK(r.status == 201, "t2's order: %ld %s", r.status, r.body);
    int64_t total = q1("SELECT COUNT(*) FROM pay_order WHERE tenant_id = 't1'", NULL);
    struct order_walk w = {0, true, ""};
    int pages = 0;
    bool ok = walk_pages("/v1/orders", 3, order_item, &w, &pages) && w.ok;
    T_CHECK(ok && w.seen == total && total == 5, "order listing: %d of %lld orders in %d pages",
            w.seen, (long long)total, pages);
    api("GET", gw_port, "/v1/orders?status=PAID&limit=100", key1, NULL, NULL, &r);
    json_t *j = json_loads(r.body, 0, NULL);
    T_CHECK(r.status == 200 && (int64_t)json_array_size(json_object_get(j, "data")) ==
                                   q1("SELECT COUNT(*) FROM pay_order WHERE tenant_id = 't1' AND"
                                      " status = 'PAID'",
                                      NULL),
            "orders?status=PAID: %s", r.body);
    json_decref(j);
    api("GET", gw_port, "/v1/orders?since=2999-01-01", key1, NULL, NULL, &r);
    T_CHECK(r.status == 200 && strstr(r.body, "\"data\":[]"), "orders?since=future: %s", r.body);
    api("GET", gw_port, "/v1/orders?status=SHIPPED", key1, NULL, NULL, &r);
    T_CHECK(has_code(&r, 400, "invalid_parameter"), "orders?status=SHIPPED: %ld", r.status);
    api("GET", gw_port, "/v1/orders?since=2026-12-01T08:00:00%2B08:00", key1, NULL, NULL, &r);
    T_CHECK(has_code(&r, 400, "invalid_parameter"), "orders?since=+08:00: %ld", r.status);
    api("GET", gw_port, "/v1/orders?cursor=zz", key1, NULL, NULL, &r);
    T_CHECK(has_code(&r, 400, "invalid_parameter"), "orders?cursor=zz: %ld", r.status);
    /* another tenant sees only its own */
    api("GET", gw_port, "/v1/orders?limit=100", key2, NULL, NULL, &r);
    T_CHECK(r.status == 200 && !strstr(r.body, "\"L-0001\"") && strstr(r.body, "\"T2-1\""),
            "t2 sees t1's orders or not its own: %s", r.body);
}

/* `payonce idempotency reap` deletes stored answers past the retention and
 * frees their keys; serve's reaper does the same when it starts. */
static void test_reaper(void)
{
    struct resp r;
    api("POST", gw_port, "/v1/orders", key1, "reap-1",
        "{\"merchant\":\"m1\",\"out_trade_no\":\"K-1\",\"amount\":100}", &r);
    T_CHECK(r.status == 201, "reaper setup: %ld %s", r.status, r.body);
    /* An hour old: past the reap's retention here (60 s), within that of
     * the case's serve child (a week), whose own reaper must not take it
     * first. */
    char sql[200], hour_ago[32];
    time_t t = time(NULL) - 3600;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(hour_ago, sizeof hour_ago, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
    snprintf(sql, sizeof sql,
             "UPDATE api_idempotency SET created_at = '%s' WHERE idem_key = 'reap-1'", hour_ago);
    exec_sql(sql);
    int64_t n = q1("SELECT COUNT(*) FROM api_idempotency", NULL);
    char out[256];
    run_out(out, sizeof out, "idempotency reap --retention 60");
    T_CHECK(strncmp(out, "1 stored", 8) == 0, "reap: %s", out);
    T_CHECK(q1("SELECT COUNT(*) FROM api_idempotency", NULL) == n - 1, "reap: rows");
    /* The key is free again: a new request under it runs. */
    api("POST", gw_port, "/v1/orders", key1, "reap-1",
        "{\"merchant\":\"m1\",\"out_trade_no\":\"K-9\",\"amount\":9}", &r);
    T_CHECK(r.status == 201 && !r.replayed, "reused key after reaping: %ld %s", r.status, r.body);
    /* A stored answer far past the retention: a serve that starts deletes
     * it. */
    exec_sql("INSERT INTO api_idempotency (tenant_id, route, idem_key, request_hash, state,"
             " lock_token, locked_at, status_code, response_body, created_at) VALUES ('t1',"
             " 'POST /v1/orders', 'ancient', 'x', 'done', 't', '2001-01-01T00:00:00.000Z', 201,"
             " '{}', '2001-01-01T00:00:00.000Z')");
    /* The reaper runs on one node at a time: the case's gateway holds its
     * lease (it reaped when it started). Its lease released, as when it
     * stops, the next serve takes it and reaps at once. */
    T_CHECK(q1("SELECT COUNT(*) FROM job_lease WHERE name = ?", "idempotency-reaper") == 1,
            "the case's gateway holds the reaper's lease");
    exec_sql("DELETE FROM job_lease WHERE name = 'idempotency-reaper'");
    unsigned port = 0;
    pid_t p = t_serve(dir, bin, url, NULL, &port);
    T_CHECK(wait_for("SELECT COUNT(*) FROM api_idempotency WHERE idem_key = ?", "ancient", 0),
            "serve's reaper did not delete an answer past the retention");
    T_CHECK(q1("SELECT COUNT(*) FROM api_idempotency WHERE idem_key = ?", "reap-1") == 1,
            "serve's reaper deleted an answer within the retention");
    t_serve_stop(p);
}

/* ---- the cases, each on its own database and gateways ---- */

static struct api_case {
    const char *name;
    void (*fn)(void);
} api_cases[] = {
    {"auth", test_auth},
    {"concurrent", test_concurrent},
    {"key_reuse", test_key_reuse},
    {"in_flight", test_in_flight},
    {"transient", test_transient},
    {"bad_input", test_bad_input},
    {"hostile_table", test_hostile_table},
    {"close", test_close},
    {"close_at_channel", test_close_at_channel},
    {"account_cache", test_account_cache},
    {"stripe_lifecycle", test_stripe_lifecycle},
    {"create_at_channel", test_create_at_channel},
    {"daily_recon", test_daily_recon},
    {"recon_days", test_recon_days},
    {"daily_recon_alipay", test_daily_recon_alipay},
    {"daily_recon_stripe", test_daily_recon_stripe},
    {"channel_failures", test_channel_failures},
    {"channel_matrix", test_channel_matrix},
    {"wechatpay_errors", test_wechatpay_errors},
    {"wechatpay_lost_create", test_wechatpay_lost_create},
    {"stripe_events", test_stripe_events},
    {"stripe_errors", test_stripe_errors},
    {"platform_keys", test_platform_keys},
    {"order_expiry", test_order_expiry},
    {"refund_query", test_refund_query},
    {"refunds", test_refunds},
    {"refund_submission", test_refund_submission},
    {"silent_channel", test_silent_channel},
    {"work_conserving", test_work_conserving},
    {"alipay_refunds", test_alipay_refunds},
    {"alipay_errors", test_alipay_errors},
    {"alipay_lost_create", test_alipay_lost_create},
    {"alipay_cert_mode", test_alipay_cert_mode},
    {"suspense_refunds", test_suspense_refunds},
    {"journal_paging", test_journal_paging},
    {"order_listing", test_order_listing},
    {"reaper", test_reaper},
};
enum { API_NCASES = sizeof api_cases / sizeof api_cases[0] };

/* The database every case starts from: tenants t1 and t2, merchant m1 of
 * each, three API keys. */
static char tmpl[T_URL_MAX];
/* With prism (prism.h): where gw, gw2 and the serve child listen, the same
 * in every case. */
static char listen_at[3][32];

struct case_env {
    struct t_gateway *gw, *gw2;
    pid_t child;
};

/* A case's world: a copy of the template, two in-process gateways (the
 * second never waits for an Idempotency-Key twin and has the in-flight
 * hook), a `payonce serve` child, t1's WeChat Pay account pointing at the
 * simulator. Nothing a case leaves behind reaches the next one. */
static struct case_env cenv;
static uint64_t case_t0;

static int case_begin(void **state)
{
    (void)state;
    struct case_env *e = &cenv;
    case_t0 = po_now_us();
    t_db_clone(tmpl, url, sizeof url);
    pthread_mutex_lock(&hook_mu);
    hook_armed = hook_inside = hook_release = false;
    pthread_mutex_unlock(&hook_mu);
    /* A contended API share of 16 (default 4 or 8): the silent channel's
     * ten hung refunds of t2 stay within it when t1 arrives, so that its
     * eleventh meets the outbound share, which that case is about. */
    struct po_gateway_cfg gc, gc2;
    t_gateway_cfg(&gc, url, mkey);
    gc.idem_wait_ms = 10000;
    gc.api_per_tenant = 16;
    t_gateway_cfg(&gc2, url, mkey);
    gc2.idem_wait_ms = 0;
    struct po_server_cfg sc2 = {.api_hook = hook};
    if (t_prism_on()) {
        gc.listen = listen_at[0];
        gc2.listen = listen_at[1];
    }
    e->gw = t_gateway_start(&gc, NULL);
    e->gw2 = t_gateway_start(&gc2, &sc2);
    gw_port = e->gw->port;
    gw2_port = e->gw2->port;
    run("channel set --tenant t1 --channel wechatpay --mchid %s --appid %s --apiv3-key-file "
        "sim/apiv3.key --platform-cert-file sim/wechatpay_platform_cert.pem"
        " --api-base-url http://127.0.0.1:%u --merchant-private-key-file"
        " sim/merchant_private_key.pem --merchant-serial %s"
        " --notify-url http://127.0.0.1:%u/notify/wechatpay/t1",
        id.mchid, id.appid, sim_port, id.merchant_serial, gw_port);
    const char *const wait[] = {"--idempotency-wait-ms", "10000", t_prism_on() ? "--listen" : NULL,
                                listen_at[2], NULL};
    e->child = t_serve(dir, bin, url, wait, &child_port);
    return 0;
}

/* Ends a case: every refund the channel accepted is completed by its
 * notification first (none is left to land on a later case's gateway),
 * then the ledger invariants hold on the case's database. */
static int case_end(void **state)
{
    struct case_env *e = &cenv;
    const char *name = ((const struct api_case *)*state)->name;
    T_CHECK(wait_for("SELECT COUNT(*) FROM refund WHERE submit_state = 'submitted' AND"
                     " status = 'PROCESSING' AND tenant_id <> ?",
                     "", 0),
            "%s: refunds the channel accepted were never completed", name);
    t_serve_stop(e->child);
    t_gateway_stop(e->gw2);
    t_gateway_stop(e->gw);
    struct po_store *s = t_open(url);
    T_CHECK(t_verify(s) == 0, "%s: ledger invariants", name);
    po_store_close(s);
    t_db_drop(url);
    printf("# api[%s] case %s: %llu ms\n", backend, name,
           (unsigned long long)(po_now_us() - case_t0) / 1000);
    return 0;
}

/* A case of api_cases (its state) between case_begin and case_end. */
static void api_case(void **state)
{
    ((const struct api_case *)*state)->fn();
}

/* Runs the cases named on the command line (all when none; "-NAME" leaves
 * that case out of the others: tests/CMakeLists.txt runs the channel's
 * answer tables on one store so) as a cmocka group, in an order shuffled by
 * a printed seed (PAYONCE_TEST_SEED replays it): a case that relied on
 * another's rows fails in some order. Nonzero when a case failed, -1 for
 * an unknown case. */
static int run_cases(int argc, char **argv)
{
    int order[API_NCASES], n = 0, known = 0;
    bool named = false;
    for (int a = 3; a < argc; a++) {
        named = named || argv[a][0] != '-';
        for (int c = 0; c < API_NCASES; c++)
            known += strcmp(argv[a] + (argv[a][0] == '-'), api_cases[c].name) == 0;
    }
    for (int c = 0; c < API_NCASES; c++) {
        bool want = !named;
        for (int a = 3; a < argc; a++) {
            if (argv[a][0] == '-' && strcmp(argv[a] + 1, api_cases[c].name) == 0)
                want = false;
            else if (strcmp(argv[a], api_cases[c].name) == 0)
                want = true;
        }
        if (want)
            order[n++] = c;
    }
    if (n == 0 || known < argc - 3) {
        fprintf(stderr, "test_api: unknown case; the cases are:");
        for (int c = 0; c < API_NCASES; c++)
            fprintf(stderr, " %s", api_cases[c].name);
        fputc('\n', stderr);
        return -1;
    }
    const char *env = getenv("PAYONCE_TEST_SEED");
    unsigned seed = env && *env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
    printf("# api[%s] case order seed %u (PAYONCE_TEST_SEED=%u replays it)\n", backend, seed, seed);
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rand_r(&seed) % (unsigned)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    struct CMUnitTest tests[API_NCASES];
    for (int i = 0; i < n; i++) {
        struct api_case *c = &api_cases[order[i]];
        tests[i] = (struct CMUnitTest){c->name, api_case, case_begin, case_end, c};
    }
    char name[64];
    snprintf(name, sizeof name, "api[%s]", backend);
    return t_run_group(name, tests, (size_t)n, NULL, NULL);
}

int main(int argc, char **argv)
{
    backend = t_backend(argc, argv);
    if (argc < 3 || !realpath(argv[2], bin))
        die("usage: test_api BACKEND PAYONCE [CASE... | -CASE...]");
    po_log_set_level(PO_LOG_ERROR);
    unsigned char master[32];
    char sd[300], other[300], err[PO_ERRBUF_SIZE] = "";
    t_env_create("api", dir, sizeof dir, master, &id);
    mkey = master;
    snprintf(sd, sizeof sd, "%s/sim", dir);
    snprintf(other, sizeof other, "%s/other", dir);
    if (po_sim_identity_generate(other, "cert", err, sizeof err) ||
        po_sim_identity_load(other, &stranger, err, sizeof err))
        die(err);
    t_db_create(backend, url, sizeof url);
    run("tenant add --tenant t1");
    run("tenant add --tenant t2");
    run("merchant add --tenant t1 --merchant m1");
    run("merchant add --tenant t2 --merchant m1");
    run_out(key1, sizeof key1, "apikey create --tenant t1");
    run_out(key2, sizeof key2, "apikey create --tenant t2");
    run_out(key3, sizeof key3, "apikey create --tenant t1");
    T_CHECK(strlen(key1) == PO_APIKEY_LEN && strncmp(key1, "po_", 3) == 0, "apikey create: '%s'",
            key1);
    T_CHECK(q1("SELECT COUNT(*) FROM api_key WHERE key_hash = ?", key1) == 0 &&
                q1("SELECT COUNT(*) FROM api_key", NULL) == 3,
            "the key itself is stored");
    snprintf(tmpl, sizeof tmpl, "%s", url);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct po_sim_server_cfg sc = {sd, "127.0.0.1:0", 1000, 50};
    struct po_sim_server *sim = NULL;
    if (po_sim_server_start(&sc, &sim, err, sizeof err))
        die(err);
    sim_port = po_sim_server_port(sim);
    char name[64];
    unsigned fixed[3];
    if (t_prism_start(dir, 3, fixed))
        for (int i = 0; i < 3; i++)
            snprintf(listen_at[i], sizeof listen_at[i], "127.0.0.1:%u", fixed[i]);
    int rc = run_cases(argc, argv);
    snprintf(name, sizeof name, "api[%s] openapi", backend);
    t_prism_stop(name);
    po_sim_server_stop(sim);
    po_sim_identity_free(&id);
    po_sim_identity_free(&stranger);
    curl_global_cleanup();
    if (rc < 0)
        return 2;
    snprintf(name, sizeof name, "api[%s] tenant API", backend);
    snprintf(url, sizeof url, "%s", tmpl);
    return t_env_finish(dir, url, name) || rc;
}
