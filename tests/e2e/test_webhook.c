/*
 * test_webhook.c BACKEND PAYONCE — tenant webhooks end to end (issue 12):
 * an in-process gateway with its delivery worker (retry schedule compressed
 * to milliseconds), payments delivered by the channel three times each, and
 * the tenant's receiver — written here, verifying each signature with
 * OpenSSL's HMAC directly (not payonce's signing code), deduplicating by
 * event id as a tenant's system must:
 *   down_then_up  the receiver is down while 20 orders are paid (each
 *                 callback 3 times); once it is up, every payment.credited
 *                 arrives, one event id per payment, none for anything else
 *   ordering      a payment's event is refused 3 times by the receiver while
 *                 its refund succeeds: the refund's event never arrives first
 *   dead_letter   an endpoint that always answers 500 is dead after the
 *                 (compressed) schedule, with an alert and its alert.raised
 *                 event; `payonce webhook redrive` delivers it
 *   signatures    a delivery with its body changed, or signed with another
 *                 secret, or older than five minutes, fails verification
 *   two_gateways  (PostgreSQL) two gateways in this process and a `payonce
 *                 serve` process over one database: no event is being
 *                 delivered twice at the same moment, all delivered; each
 *                 event marked fanned out once (a trigger holds the first
 *                 marking 100 ms a row, so the others read the same events
 *                 meanwhile, and counts a second marking of a marked row)
 *   ordering_many 8 orders paid and refunded while every third delivery
 *                 is refused: every refund's event after its payment's
 *   bulkhead      tenant t2's endpoint accepts and never answers: t1's
 *                 events are delivered meanwhile, t2 holds at most its share
 *   kill9         `payonce serve` killed with SIGKILL after committing
 *                 payments and before delivering them, and again in the
 *                 middle of a delivery: after a restart nothing is lost
 */
#include "../../src/http/http.h"
#include "../../src/service/service.h"
#include "../../src/sim/sim.h"
#include "../support/simenv.h"
#include "../support/testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* "sqlite" or "postgres" (argv[1]). */
static const char *backend;
static char dir[256], url[T_URL_MAX], bin[PATH_MAX];
static unsigned char master[32];
static struct po_sim_identity id;

static void die(const char *m)
{
    fprintf(stderr, "test_webhook: %s\n", m);
    exit(1);
}

#define run(out, cap, ...) t_cli(dir, bin, url, out, cap, __VA_ARGS__)

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* ---- the tenant's receiver ---- */

#define SEEN_MAX 512
struct receiver {
    struct MHD_Daemon *d;
    unsigned port;
    char secret[128];
    pthread_mutex_t mu;
    /* behaviour */
    bool always_fail;
    char fail_id[64]; /* this event id is refused fail_left more times */
    int fail_left;
    int delay_ms;
    int fail_mod; /* refuse every fail_mod-th delivery (0: none) */
    /* what arrived (deduplicated by event id, in order of first arrival) */
    char ids[SEEN_MAX][48], types[SEEN_MAX][32], objects[SEEN_MAX][72];
    int nseen, deliveries, bad_signatures;
    int gone; /* deliveries to the path /gone (an endpoint that was removed) */
    /* deliveries of one event at the same moment (must stay 0) */
    char busy[16][48];
    int overlaps;
};

static struct receiver rx;

/* The signature header's v1 for body at t, computed with OpenSSL alone. */
static void expected_sig(const char *secret, const char *t, const char *body, size_t len,
                         char hex[65])
{
    size_t tl = strlen(t);
    unsigned char *msg = malloc(tl + 1 + len), mac[32];
    unsigned int n = 32;
    if (!msg)
        die("oom");
    memcpy(msg, t, tl);
    msg[tl] = '.';
    memcpy(msg + tl + 1, body, len);
    HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, tl + 1 + len, mac, &n);
    free(msg);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
}

/* What a tenant's verifier does: t=…,v1=…; the time within 300 s of now;
 * one v1 equal (constant time) to HMAC-SHA256(secret, "t.body"). */
static bool verify(const char *secret, const char *header, const char *body, size_t len, time_t now)
{
    if (!header)
        return false;
    char t[24] = "", v1[65] = "", want[65];
    const char *tp = strstr(header, "t="), *vp = strstr(header, "v1=");
    if (!tp || !vp || sscanf(tp, "t=%23[0-9]", t) != 1 || sscanf(vp, "v1=%64[0-9a-f]", v1) != 1)
        return false;
    long long ts = atoll(t); /* lint-ok: digits only, checked by sscanf */
    if (llabs((long long)now - ts) > 300)
        return false;
    expected_sig(secret, t, body, len, want);
    return strlen(v1) == 64 && CRYPTO_memcmp(v1, want, 64) == 0;
}

struct upload {
    char *data;
    size_t len;
};

static const char *json_field(const char *body, const char *name, char *out, size_t cap)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":\"", name);
    const char *p = strstr(body, pat);
    out[0] = '\0';
    if (p) {
        p += strlen(pat);
        size_t n = strcspn(p, "\"");
        snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
    }
    return out;
}

static enum MHD_Result on_hook(void *cls, struct MHD_Connection *c, const char *u,
                               const char *method, const char *version, const char *data,
                               size_t *size, void **state)
{
    (void)cls, (void)method, (void)version;
    struct upload *up = *state;
    if (!up) {
        *state = calloc(1, sizeof *up);
        return *state ? MHD_YES : MHD_NO;
    }
    if (*size) {
        char *n = realloc(up->data, up->len + *size + 1);
        if (!n)
            return MHD_NO;
        memcpy(n + up->len, data, *size);
        up->data = n;
        up->len += *size;
        up->data[up->len] = '\0';
        *size = 0;
        return MHD_YES;
    }
    const char *sig = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Payonce-Signature");
    char eid[48], type[32], obj[72];
    json_field(up->data ? up->data : "", "id", eid, sizeof eid);
    json_field(up->data ? up->data : "", "type", type, sizeof type);
    json_field(up->data ? up->data : "", "out_trade_no", obj, sizeof obj);
    unsigned status = 200;
    int slot = -1;
    pthread_mutex_lock(&rx.mu);
    int delay = rx.delay_ms;
    rx.deliveries++;
    rx.gone += strcmp(u, "/gone") == 0;
    bool ok = verify(rx.secret, sig, up->data ? up->data : "", up->len, time(NULL));
    if (!ok) {
        rx.bad_signatures++;
        status = 400;
    } else if (rx.always_fail) {
        status = 500;
    } else if (rx.fail_mod && rx.deliveries % rx.fail_mod == 0) {
        status = 502;
    } else if (rx.fail_left > 0 && strcmp(eid, rx.fail_id) == 0) {
        rx.fail_left--;
        status = 503;
    } else {
        for (int i = 0; i < 16; i++)
            if (rx.busy[i][0] && strcmp(rx.busy[i], eid) == 0)
                rx.overlaps++;
        for (int i = 0; i < 16 && slot < 0; i++)
            if (!rx.busy[i][0]) {
                slot = i;
                snprintf(rx.busy[i], sizeof rx.busy[i], "%s", eid);
            }
    }
    pthread_mutex_unlock(&rx.mu);
    if (status == 200 && delay)
        sleep_ms(delay);
    pthread_mutex_lock(&rx.mu);
    if (slot >= 0)
        rx.busy[slot][0] = '\0';
    if (status == 200) {
        bool known = false;
        for (int i = 0; i < rx.nseen && !known; i++)
            known = strcmp(rx.ids[i], eid) == 0;
        if (!known && rx.nseen < SEEN_MAX) {
            snprintf(rx.ids[rx.nseen], sizeof rx.ids[0], "%s", eid);
            snprintf(rx.types[rx.nseen], sizeof rx.types[0], "%s", type);
            snprintf(rx.objects[rx.nseen], sizeof rx.objects[0], "%s", obj);
            rx.nseen++;
        }
    }
    pthread_mutex_unlock(&rx.mu);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(2, (void *)"ok", MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static void on_done(void *cls, struct MHD_Connection *c, void **state,
                    enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    struct upload *up = *state;
    if (up) {
        free(up->data);
        free(up);
    }
    *state = NULL;
}

/* Starts the receiver on rx.port (0: any free port, remembered). */
static void rx_up(void)
{
    /* The port it had may be held for a moment by another process's
     * connection (a busy machine hands ephemeral ports out again): try
     * again for up to 10 s. */
    for (int i = 0; i < 100 && !rx.d; i++) {
        rx.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION,
                                (uint16_t)rx.port, NULL, NULL, on_hook, NULL,
                                MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL, MHD_OPTION_END);
        if (!rx.d)
            usleep(100000);
    }
    if (!rx.d)
        die("receiver did not start");
    rx.port = MHD_get_daemon_info(rx.d, MHD_DAEMON_INFO_BIND_PORT)->port;
}

static void rx_down(void)
{
    MHD_stop_daemon(rx.d);
    rx.d = NULL;
}

static int seen_of(const char *type, const char *object)
{
    int n = 0;
    pthread_mutex_lock(&rx.mu);
    for (int i = 0; i < rx.nseen; i++)
        n += (!type || strcmp(rx.types[i], type) == 0) &&
             (!object || strcmp(rx.objects[i], object) == 0);
    pthread_mutex_unlock(&rx.mu);
    return n;
}

/* Waits until `want` events of type have arrived (deduplicated). */
static bool wait_for(const char *type, int want, int timeout_ms)
{
    for (int t = 0; t < timeout_ms; t += 20) {
        if (seen_of(type, NULL) >= want)
            return true;
        sleep_ms(20);
    }
    return seen_of(type, NULL) >= want;
}

/* ---- the gateway and the channel ---- */

static struct po_webhooks_cfg hooks = {.egress = {.allow_loopback = true},
                                       .senders = 4,
                                       .pending_max = PO_WEBHOOK_PENDING_DEFAULT,
                                       .per_endpoint = 2,
                                       .per_tenant = 4,
                                       .timeout_ms = 500,
                                       .retry_base_ms = 40,
                                       .retry_cap_ms = 200,
                                       .max_age_s = 60, /* 2 in dead_letter */
                                       .alert_after_s = 1,
                                       .poll_ms = 20};

static struct t_gateway *gateway(void)
{
    struct po_gateway_cfg gc;
    t_gateway_cfg(&gc, url, master);
    gc.max_connections_per_ip = 0;
    gc.webhooks = hooks;
    gc.egress = hooks.egress;
    return t_gateway_start(&gc, NULL);
}

static long post_callback_to(unsigned port, const char *tenant, const char *no);

static long post_callback(unsigned port, const char *no)
{
    return post_callback_to(port, "t1", no);
}

static long post_callback_to(unsigned port, const char *tenant, const char *no)
{
    static int seq;
    char txn[64];
    snprintf(txn, sizeof txn, "42000%06d", ++seq);
    long st = 0;
    for (int copy = 0; copy < 3; copy++) /* the channel's at-least-once */
        st = t_sim_pay(port, &id, tenant, no, txn, 100);
    return st;
}

static int64_t q1(const char *sql, const char *arg)
{
    return t_count_url(url, sql, arg);
}

static void order(const char *no)
{
    struct po_store *s = t_open(url);
    t_seed_order(s, no, 100);
    po_store_close(s);
}

static void order_for(const char *tenant, const char *no)
{
    struct po_store *s = t_open(url);
    bool created = false;
    char err[PO_ERRBUF_SIZE] = "";
    struct po_order_spec o = {tenant, "m1", no, 100, "CNY", NULL};
    if (po_order_create(s, &o, &created, err, sizeof err))
        die(err);
    po_store_close(s);
}

/* An endpoint for t1 at the receiver's path; its id to endpoint, its
 * secret to secret (NULL: dropped). */
static void add_endpoint_at(const char *path, const char *events, char *secret, size_t scap,
                            char *endpoint, size_t cap)
{
    char u[128];
    snprintf(u, sizeof u, "http://127.0.0.1:%u%s", rx.port, path);
    run(secret, scap, "webhook add --tenant t1 --url %s --events %s --insecure-dev", u, events);
    struct po_store *s = t_open(url);
    struct po_rows r;
    if (po_store_exec(s,
                      "SELECT endpoint_id FROM webhook_endpoint WHERE tenant_id = 't1' AND"
                      " removed_at IS NULL ORDER BY created_at DESC LIMIT 1",
                      PO_NO_PARAMS, &r, NULL, NULL, 0) ||
        r.nrows != 1)
        die("endpoint not found");
    snprintf(endpoint, cap, "%s", po_rows_get(&r, 0, 0));
    po_rows_free(&r);
    po_store_close(s);
}

/* An endpoint for t1 at the receiver; its secret goes to rx.secret. */
static void add_endpoint(const char *events, char *endpoint, size_t cap)
{
    add_endpoint_at("/hook", events, rx.secret, sizeof rx.secret, endpoint, cap);
}

static void remove_endpoint(const char *endpoint)
{
    run(NULL, 0, "webhook remove --tenant t1 --endpoint %s", endpoint);
}

/* One of the receiver's counters, read while its threads run. */
static int rx_count(const int *counter)
{
    pthread_mutex_lock(&rx.mu);
    int v = *counter;
    pthread_mutex_unlock(&rx.mu);
    return v;
}

/* The receiver's behaviour, changed while its threads run. */
static void rx_behave(bool always_fail, int delay_ms)
{
    pthread_mutex_lock(&rx.mu);
    rx.always_fail = always_fail;
    rx.delay_ms = delay_ms;
    pthread_mutex_unlock(&rx.mu);
}

static void reset_rx(void)
{
    pthread_mutex_lock(&rx.mu);
    rx.nseen = rx.deliveries = rx.bad_signatures = rx.overlaps = rx.gone = 0;
    rx.always_fail = false;
    rx.fail_left = 0;
    rx.delay_ms = 0;
    rx.fail_mod = 0;
    pthread_mutex_unlock(&rx.mu);
}

/* ---- the tests ---- */

static void test_down_then_up(void **state)
{
    (void)state;
    char ep[64];
    reset_rx();
    rx_up();
    add_endpoint("payment.credited", ep, sizeof ep);
    rx_down();
    struct t_gateway *gw = gateway();
    unsigned port = gw->port;
    for (int i = 0; i < 20; i++) {
        char no[32];
        snprintf(no, sizeof no, "DU-%d", i);
        order(no);
        T_CHECK(post_callback(port, no) == 204, "down_then_up: callback %s not acked", no);
    }
    sleep_ms(300); /* attempts fail: nobody listens */
    int64_t failed = q1("SELECT COUNT(*) FROM webhook_attempt WHERE status_code IS NULL AND"
                        " endpoint_id = ?",
                        ep);
    rx_up();
    T_CHECK(wait_for("payment.credited", 20, 30000), "down_then_up: %d of 20 events arrived",
            seen_of("payment.credited", NULL));
    int per_order_ok = 0;
    for (int i = 0; i < 20; i++) {
        char no[32];
        snprintf(no, sizeof no, "DU-%d", i);
        per_order_ok += seen_of("payment.credited", no) == 1;
    }
    T_CHECK(per_order_ok == 20, "down_then_up: %d of 20 orders have exactly one event",
            per_order_ok);
    T_CHECK(failed > 0, "down_then_up: no failed attempt recorded while the receiver was down");
    int bad = rx_count(&rx.bad_signatures);
    T_CHECK(bad == 0, "down_then_up: %d deliveries failed verification", bad);
    T_CHECK(q1("SELECT COUNT(*) FROM outbox_event WHERE type = 'payment.credited' AND object_id"
               " LIKE ?",
               "DU-%") == 20,
            "down_then_up: not 20 outbox events for 20 payments delivered 3 times each");
    t_gateway_stop(gw);
    rx_down();
    remove_endpoint(ep);
    t_figure("# webhook: receiver down during 20 payments x 3 deliveries: %lld failed attempts,"
             " then all 20 events delivered (%d deliveries for 20 distinct ids), signatures"
             " verified independently\n",
             (long long)failed, rx_count(&rx.deliveries));
}

/* The index of the first arrival of type for object, or -1. */
static int arrival(const char *type, const char *object)
{
    int at = -1;
    pthread_mutex_lock(&rx.mu);
    for (int i = 0; i < rx.nseen && at < 0; i++)
        if (strcmp(rx.types[i], type) == 0 && strcmp(rx.objects[i], object) == 0)
            at = i;
    pthread_mutex_unlock(&rx.mu);
    return at;
}

static void event_id_of(const char *type, const char *object, char *out, size_t cap)
{
    struct po_store *s = t_open(url);
    struct po_rows r;
    out[0] = '\0';
    if (po_store_exec(s,
                      "SELECT event_id FROM outbox_event WHERE tenant_id = 't1' AND type = ? AND"
                      " object_id = ?",
                      PO_PARAMS(PO_TEXT(type), PO_TEXT(object)), &r, NULL, NULL, 0) == PO_OK) {
        if (r.nrows == 1)
            snprintf(out, cap, "%s", po_rows_get(&r, 0, 0));
        po_rows_free(&r);
    }
    po_store_close(s);
}

/* A refund of a paid order, applied through the engine (its result from
 * the channel): refund.succeeded in the outbox, after payment.credited. */
static void refund_of(const char *no, const char *rno)
{
    struct po_store *s = t_open(url);
    t_seed_refund(s, no, rno, 100);
    char rid[48];
    snprintf(rid, sizeof rid, "503-%s", rno); /* the channel's refund id */
    struct po_event ev = t_refund_event(PO_EV_REFUND_SUCCESS, no, rno, rid, 100);
    struct po_outcome o = t_apply(s, NULL, &ev);
    T_CHECK(o.kind == PO_OUT_APPLIED, "refund %s: %s", rno, po_outcome_name(o.kind));
    po_store_close(s);
}

static void test_ordering(void **state)
{
    (void)state;
    char ep[64], pay_id[64];
    reset_rx();
    rx_up();
    add_endpoint("payment.credited,refund.succeeded", ep, sizeof ep);
    struct t_gateway *gw = gateway();
    /* The receiver refuses the payment's event 3 times; meanwhile the
     * payment is refunded. */
    order("ORD-SEQ");
    pthread_mutex_lock(&rx.mu);
    rx.always_fail = true; /* until we know the payment's event id */
    pthread_mutex_unlock(&rx.mu);
    T_CHECK(post_callback(gw->port, "ORD-SEQ") == 204, "ordering: payment not acked");
    event_id_of("payment.credited", "ORD-SEQ", pay_id, sizeof pay_id);
    pthread_mutex_lock(&rx.mu);
    snprintf(rx.fail_id, sizeof rx.fail_id, "%s", pay_id);
    rx.fail_left = 3;
    rx.always_fail = false;
    pthread_mutex_unlock(&rx.mu);
    refund_of("ORD-SEQ", "RF-SEQ");
    T_CHECK(wait_for("refund.succeeded", 1, 30000), "ordering: the refund's event never came");
    int pay_at = arrival("payment.credited", "ORD-SEQ"),
        refund_at = arrival("refund.succeeded", "ORD-SEQ");
    T_CHECK(pay_at >= 0 && refund_at > pay_at,
            "ordering: payment event at %d, refund event at %d (must come after)", pay_at,
            refund_at);
    T_CHECK(q1("SELECT COUNT(*) FROM webhook_attempt WHERE event_id = ?", pay_id) >= 4,
            "ordering: the payment's event was not refused 3 times first");
    t_gateway_stop(gw);
    rx_down();
    remove_endpoint(ep);
    t_figure("# webhook: ordering: payment.credited refused 3 times, its refund's event waited"
             " and arrived after it\n");
}

/* The log at serve's default level (info) into path, instead of stderr,
 * until log_capture_end; returns the saved stderr. */
static int captured = -1; /* the saved stderr while a capture runs */

static int log_capture_begin(const char *path)
{
    fflush(stderr);
    int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (saved < 0 || fd < 0 || dup2(fd, 2) < 0)
        abort();
    close(fd);
    po_log_set_level(PO_LOG_INFO);
    captured = saved;
    return saved;
}

static void log_capture_end(int saved)
{
    if (saved < 0 || saved != captured)
        return;
    captured = -1;
    po_log_set_level(PO_LOG_ERROR);
    fflush(stderr);
    if (dup2(saved, 2) < 0)
        abort();
    close(saved);
}

/* Every case's teardown: a capture its failed check left running ends
 * (what follows, cmocka's report among it, goes to stderr again). */
static int end_capture(void **state)
{
    (void)state;
    log_capture_end(captured);
    return 0;
}

/* How many lines of the file at path contain both a and b. */
static int lines_with(const char *path, const char *a, const char *b)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, a) && strstr(line, b);
    if (f)
        fclose(f);
    return n;
}

/* The attempts of event pay_id (one endpoint) as `webhook attempts --json`
 * gives them, into js: 'D' when they are 1..n, all failed but the last,
 * which is dead, the delivery dead; 'd' when they are 1..n, all failed but
 * the last, which delivered, the delivery delivered; '?' otherwise. */
static char attempt_results(const char *pay_id, char *js, size_t cap)
{
    run(js, cap, "webhook attempts --tenant t1 --event %s --json", pay_id);
    json_t *doc = json_loads(js, 0, NULL), *a;
    size_t i, n = json_array_size(doc);
    int failed = 0, numbered = 0;
    const char *last = "", *state = NULL;
    bool same_state = true;
    json_array_foreach(doc, i, a)
    {
        const char *res = json_string_value(json_object_get(a, "result")),
                   *st = json_string_value(json_object_get(a, "state"));
        if (!res || !st) {
            json_decref(doc);
            return '?';
        }
        numbered += json_integer_value(json_object_get(a, "attempt")) == (json_int_t)i + 1;
        if (i + 1 < n)
            failed += strcmp(res, "failed") == 0;
        else
            last = res;
        same_state = same_state && (!state || strcmp(state, st) == 0);
        state = st;
    }
    char verdict = '?';
    if (n >= 3 && numbered == (int)n && failed == (int)n - 1 && same_state) {
        if (strcmp(last, "dead") == 0 && strcmp(state, "dead") == 0)
            verdict = 'D';
        else if (strcmp(last, "delivered") == 0 && strcmp(state, "delivered") == 0)
            verdict = 'd';
    }
    json_decref(doc);
    return verdict;
}

static void test_dead_letter(void **state)
{
    (void)state;
    char ep[64], pay_id[64], out[256], logp[PATH_MAX];
    reset_rx();
    rx_up();
    add_endpoint("payment.credited", ep, sizeof ep);
    pthread_mutex_lock(&rx.mu);
    rx.always_fail = true;
    pthread_mutex_unlock(&rx.mu);
    hooks.max_age_s = 2; /* three days, compressed */
    snprintf(logp, sizeof logp, "%s/dead-letter.log", dir);
    int saved_err = log_capture_begin(logp);
    struct t_gateway *gw = gateway();
    hooks.max_age_s = 60;
    order("ORD-DEAD");
    T_CHECK(post_callback(gw->port, "ORD-DEAD") == 204, "dead: payment not acked");
    event_id_of("payment.credited", "ORD-DEAD", pay_id, sizeof pay_id);
    int64_t dead = 0;
    for (int t = 0; t < 30000 && dead == 0; t += 50) {
        sleep_ms(50);
        dead = q1("SELECT COUNT(*) FROM webhook_delivery WHERE state = 'dead' AND event_id = ?",
                  pay_id);
    }
    /* The worker logs its giving up after the commit that made it dead:
     * on a loaded machine the line came after the row (wait for it). */
    for (int t = 0; t < 10000 && dead == 1 &&
                    lines_with(logp, pay_id, "failed: HTTP 500; dead: no more attempts") == 0;
         t += 50)
        sleep_ms(50);
    log_capture_end(saved_err);
    T_CHECK(dead == 1, "dead: the delivery is not dead after the schedule");
    /* Every failed attempt is in the log at the default level, the last
     * one saying it gave up (issue 26: they were silent). */
    int logged = lines_with(logp, pay_id, "failed: HTTP 500; sent again later"),
        gave_up = lines_with(logp, pay_id, "failed: HTTP 500; dead: no more attempts");
    int64_t attempts = q1("SELECT COUNT(*) FROM webhook_attempt WHERE event_id = ?", pay_id);
    T_CHECK(gave_up == 1 && logged == attempts - 1,
            "dead: %d 'sent again later' and %d 'dead' log lines for %lld attempts", logged,
            gave_up, (long long)attempts);
    T_CHECK(attempts >= 3, "dead: only %lld attempts", (long long)attempts);
    T_CHECK(q1("SELECT COUNT(*) FROM alert WHERE reason = 'webhook_dead_letter' AND idem_key = ?",
               pay_id) == 1,
            "dead: no webhook_dead_letter alert");
    T_CHECK(q1("SELECT COUNT(*) FROM outbox_event WHERE type = 'alert.raised' AND payload LIKE ?",
               "%webhook_dead_letter%") >= 1,
            "dead: no alert.raised event for the dead letter");
    T_CHECK(q1("SELECT COUNT(*) FROM alert WHERE reason = 'webhook_failing' AND alert_key LIKE ?",
               "webhook_failing|we_%") >= 1,
            "dead: no webhook_failing alert for an endpoint failing past 1 s");
    run(out, sizeof out, "webhook attempts --tenant t1 --event %s", pay_id);
    T_CHECK(strstr(out, ep) && strstr(out, "HTTP 500"), "dead: attempts listing: %s", out);
    static char dead_js[16384];
    T_CHECK(attempt_results(pay_id, dead_js, sizeof dead_js) == 'D',
            "dead: the attempts of a dead delivery: %s", dead_js);
    /* The receiver works again: redrive. */
    pthread_mutex_lock(&rx.mu);
    rx.always_fail = false;
    pthread_mutex_unlock(&rx.mu);
    /* the alert's own action (the console's "send again"): the event's dead
     * deliveries sent again, the alert resolved saying so */
    char akey[PO_KEY_SIZE], sid[PO_ALERT_SHORT_SIZE];
    snprintf(akey, sizeof akey, "webhook_dead|%s|%s", ep, pay_id);
    po_alert_short_id(akey, sid);
    run(out, sizeof out, "alerts redrive --tenant t1 --alert %s --by carol --note 'endpoint fixed'",
        sid);
    T_CHECK(strncmp(out, "1 dead", 6) == 0, "dead: alerts redrive said: %s", out);
    T_CHECK(
        q1("SELECT COUNT(*) FROM alert WHERE state = 'resolved' AND state_by = 'carol' AND"
           " state_note = 'redriven (1 deliveries sent again): endpoint fixed' AND idem_key = ?",
           pay_id) == 1,
        "dead: the alert is not resolved by the redrive");
    run(out, sizeof out, "webhook redrive --tenant t1 --event %s", pay_id);
    T_CHECK(strncmp(out, "0 dead", 6) == 0, "dead: nothing left to redrive: %s", out);
    T_CHECK(wait_for("payment.credited", 1, 30000) && seen_of("payment.credited", "ORD-DEAD") == 1,
            "dead: the redriven event did not arrive");
    /* The receiver has the event when it answers; the worker records the
     * delivery after reading that answer: wait for the record too (under
     * ThreadSanitizer the gap was long enough to fail the check once). */
    int64_t delivered = 0;
    for (int i = 0; i < 200 && delivered != 1; i++) {
        delivered = q1("SELECT COUNT(*) FROM webhook_delivery WHERE state = 'delivered' AND"
                       " event_id = ?",
                       pay_id);
        if (delivered != 1)
            sleep_ms(50);
    }
    T_CHECK(delivered == 1, "dead: not delivered after the redrive");
    /* Each attempt says what it came to, numbered across the redrive;
     * state is the delivery's now. */
    char js[16384];
    T_CHECK(attempt_results(pay_id, js, sizeof js) == 'd', "dead: the attempts before: %s",
            dead_js);
    T_CHECK(t_cli_all(dir, bin, url, js, sizeof js, "webhook attempts --tenant t1 --event %s",
                      pay_id) == 0 &&
                strstr(js, "HTTP 500") && strstr(js, "failed (the delivery: delivered)") &&
                strstr(js, "delivered (the delivery: delivered)"),
            "dead: the attempts listing: %s", js);
    t_gateway_stop(gw);
    rx_down();
    remove_endpoint(ep);
    t_figure("# webhook: an endpoint answering 500: dead after %lld attempts in the compressed"
             " schedule, alerts webhook_dead_letter and webhook_failing raised, redrive"
             " delivered it\n",
             (long long)attempts);
}

/* A tenant's verifier refuses what was not sent by payonce as it is. */
static void test_signatures(void **state)
{
    (void)state;
    static const char body[] = "{\"id\":\"evt_x\",\"type\":\"payment.credited\"}";
    char sig[160], header[200];
    time_t now = time(NULL);
    if (po_webhook_sign("whsec_test", (int64_t)now, body, sig, sizeof sig))
        die("sign");
    snprintf(header, sizeof header, "%s", sig);
    T_CHECK(verify("whsec_test", header, body, strlen(body), now),
            "signatures: a genuine delivery does not verify");
    char tampered[sizeof body];
    memcpy(tampered, body, sizeof body);
    tampered[8] ^= 1;
    T_CHECK(!verify("whsec_test", header, tampered, strlen(tampered), now),
            "signatures: a changed body verifies");
    T_CHECK(!verify("whsec_other", header, body, strlen(body), now),
            "signatures: another secret verifies");
    T_CHECK(!verify("whsec_test", header, body, strlen(body), now + 301),
            "signatures: a delivery older than 300 s verifies");
}

/* `payonce serve` with the delivery worker on the compressed schedule. */
static const char *const fast[] = {
    "--webhook-retry-base-ms", "40", "--webhook-retry-cap-ms", "200", "--webhook-timeout-ms", "500",
    "--webhook-poll-ms",       "20", "--insecure-dev",         NULL};

/* The same with a patient attempt timeout (5 s; a claim lasts 11 s). */
static const char *const fast_patient[] = {
    "--webhook-retry-base-ms", "40",   "--webhook-retry-cap-ms", "200",
    "--webhook-timeout-ms",    "5000", "--webhook-poll-ms",      "20",
    "--insecure-dev",          NULL};

/* Two gateways in this process and a `payonce serve` process, one
 * PostgreSQL: each event delivered, none by two at the same moment. The
 * attempt timeout is long here: an attempt the sender gave up on (a
 * stalled, loaded machine) is retried while the receiver may still hold
 * it, which is at-least-once working as designed, not a double claim. */
/* A trigger on outbox_event: the first marking of a row as fanned out
 * waits 100 ms (the other gateways read the same unfanned events
 * meanwhile and wait on its rows), a marking of a row already marked is
 * counted in fan_rewrites (issue 24: every node's fan-out rewrote the rows
 * another had just marked). */
static void fan_rewrite_trigger(bool on)
{
    static const char *const up[] = {
        "CREATE TABLE fan_rewrites (event_id text)",
        "CREATE FUNCTION fan_watch() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN IF OLD.fanned"
        " = 1 THEN INSERT INTO fan_rewrites VALUES (OLD.event_id); ELSIF NEW.fanned = 1 THEN"
        " PERFORM pg_sleep(0.1); END IF; RETURN NEW; END'",
        "CREATE TRIGGER fan_watch BEFORE UPDATE ON outbox_event FOR EACH ROW EXECUTE"
        " FUNCTION fan_watch()"};
    static const char *const down[] = {"DROP TRIGGER fan_watch ON outbox_event",
                                       "DROP FUNCTION fan_watch()", "DROP TABLE fan_rewrites"};
    struct po_store *s = t_open(url);
    char err[PO_ERRBUF_SIZE] = "";
    for (int i = 0; i < 3; i++)
        if (po_store_exec(s, on ? up[i] : down[i], NULL, 0, NULL, NULL, err, sizeof err))
            die(err);
    po_store_close(s);
}

static void test_two_gateways(void **state)
{
    (void)state;
    if (strcmp(backend, "postgres") != 0)
        skip(); /* two gateways on one SQLite file: not a deployment */
    char ep[64];
    fan_rewrite_trigger(true);
    reset_rx();
    rx_up();
    add_endpoint("payment.credited", ep, sizeof ep);
    rx_behave(true, 30); /* everything queues up first; slow, to widen any window */
    struct po_webhooks_cfg keep = hooks;
    hooks.timeout_ms = 5000;
    struct t_gateway *a = gateway(), *b = gateway();
    unsigned child_port = 0;
    pid_t child = t_serve(dir, bin, url, fast_patient, &child_port);
    unsigned ports[3] = {a->port, b->port, child_port};
    for (int i = 0; i < 30; i++) {
        char no[32];
        snprintf(no, sizeof no, "TG-%d", i);
        order(no);
        T_CHECK(post_callback(ports[i % 3], no) == 204, "two gateways: %s not acked", no);
    }
    rx_behave(false, 30);
    T_CHECK(wait_for("payment.credited", 30, 60000), "two gateways: %d of 30 delivered",
            seen_of("payment.credited", NULL));
    int overlaps = rx_count(&rx.overlaps);
    T_CHECK(overlaps == 0,
            "two gateways: %d deliveries of an event overlapped another (%lld attempts ended"
            " without an answer: timeouts)",
            overlaps,
            (long long)q1("SELECT COUNT(*) FROM webhook_attempt WHERE endpoint_id = ? AND"
                          " status_code IS NULL",
                          ep));
    int64_t claimed_by_both =
        q1("SELECT COUNT(*) FROM (SELECT event_id FROM webhook_attempt WHERE status_code = 200"
           " AND endpoint_id = ? GROUP BY event_id HAVING COUNT(*) > 1) x",
           ep);
    T_CHECK(claimed_by_both == 0, "two gateways: %lld events delivered twice",
            (long long)claimed_by_both);
    int64_t rewrites = q1("SELECT COUNT(*) FROM fan_rewrites WHERE event_id <> ?", ""),
            fanned = q1("SELECT COUNT(*) FROM outbox_event WHERE fanned = 1 AND type <> ?", "");
    T_CHECK(rewrites == 0 && fanned >= 30,
            "two gateways: %lld of %lld events marked fanned out again after another gateway"
            " had marked them",
            (long long)rewrites, (long long)fanned);
    t_gateway_stop(a);
    t_gateway_stop(b);
    hooks = keep;
    t_serve_stop(child);
    rx_down();
    remove_endpoint(ep);
    fan_rewrite_trigger(false);
    t_figure("# webhook: three gateways (two in this process, one payonce serve process) over one"
             " PostgreSQL: 30 events, %d deliveries, none twice, none overlapping; %lld events"
             " marked fanned out, none twice\n",
             rx_count(&rx.deliveries), (long long)fanned);
}

/* kill -9 of `payonce serve` after the commit, before the delivery, and
 * during a delivery: the next process delivers everything. */
static void test_kill9(void **state)
{
    (void)state;
    char ep[64];
    reset_rx();
    rx_up();
    add_endpoint("payment.credited", ep, sizeof ep);
    rx_down(); /* committed, not deliverable */
    unsigned port = 0;
    pid_t child = t_serve(dir, bin, url, fast, &port);
    for (int i = 0; i < 10; i++) {
        char no[32];
        snprintf(no, sizeof no, "K9-%d", i);
        order(no);
        T_CHECK(post_callback(port, no) == 204, "kill9: %s not acked", no);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    /* During a delivery: the receiver holds each one 3 s; the gateway dies
     * while it waits. */
    rx_behave(false, 3000);
    rx_up();
    child = t_serve(dir, bin, url, fast, &port);
    /* Killed while a delivery is held (not after a fixed wait: a loaded
     * machine may not have sent one yet). */
    for (int t = 0; t < 20000 && rx_count(&rx.deliveries) == 0; t += 20)
        sleep_ms(20);
    sleep_ms(100);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    rx_behave(false, 0);
    child = t_serve(dir, bin, url, fast, &port);
    T_CHECK(wait_for("payment.credited", 10, 30000), "kill9: %d of 10 delivered after 2 kills",
            seen_of("payment.credited", NULL));
    /* The deliveries cut by the kill reached the receiver and were sent
     * again: more deliveries than events, each event acted on once. */
    T_CHECK(rx_count(&rx.deliveries) > 10 && seen_of("payment.credited", NULL) == 10,
            "kill9: %d deliveries for %d events", rx_count(&rx.deliveries),
            seen_of("payment.credited", NULL));
    t_serve_stop(child);
    rx_down();
    remove_endpoint(ep);
    t_figure("# webhook: kill -9 after commit and again mid-delivery: all 10 events delivered"
             " (%d deliveries)\n",
             rx_count(&rx.deliveries));
}

/* Per-order ordering with many orders at once: every third delivery is
 * refused, 8 orders are paid and refunded while their payments' events are
 * still being retried; each refund's event arrives after its payment's. */
static void test_ordering_many(void **state)
{
    (void)state;
    char ep[64];
    reset_rx();
    rx_up();
    add_endpoint("payment.credited,refund.succeeded", ep, sizeof ep);
    pthread_mutex_lock(&rx.mu);
    rx.fail_mod = 3;
    pthread_mutex_unlock(&rx.mu);
    struct t_gateway *gw = gateway();
    char no[8][32], rno[32];
    for (int i = 0; i < 8; i++) {
        snprintf(no[i], sizeof no[i], "OM-%d", i);
        order(no[i]);
        T_CHECK(post_callback(gw->port, no[i]) == 204, "ordering: %s not acked", no[i]);
    }
    for (int i = 0; i < 8; i++) {
        snprintf(rno, sizeof rno, "RM-%d", i);
        refund_of(no[i], rno);
    }
    T_CHECK(wait_for("refund.succeeded", 8, 30000), "ordering: %d of 8 refund events arrived",
            seen_of("refund.succeeded", NULL));
    int in_order = 0;
    for (int i = 0; i < 8; i++) {
        int p = arrival("payment.credited", no[i]), r = arrival("refund.succeeded", no[i]);
        in_order += p >= 0 && r > p;
    }
    T_CHECK(in_order == 8, "ordering: %d of 8 orders had their refund's event after the payment's",
            in_order);
    t_gateway_stop(gw);
    rx_down();
    remove_endpoint(ep);
    t_figure("# webhook: ordering: 8 orders paid and refunded while every third delivery was"
             " refused: each refund's event after its payment's (%d deliveries)\n",
             rx_count(&rx.deliveries));
}

/* ---- one tenant's stalled endpoint ---- */

/* A port that accepts connections and never answers; the most it held at
 * once. */
static struct {
    int fd;
    unsigned port;
    pthread_t t;
    atomic_int open, peak, accepted;
    atomic_bool stop;
} hole;

static void *hole_main(void *arg)
{
    (void)arg;
    enum { MAXC = 256 };
    struct pollfd p[MAXC + 1];
    int n = 0; /* client connections in p[1..n] */
    p[0] = (struct pollfd){.fd = hole.fd, .events = POLLIN};
    while (!atomic_load(&hole.stop)) {
        if (poll(p, (nfds_t)n + 1, 20) <= 0)
            continue;
        /* A connection the sender closed (its timeout) no longer counts;
         * what it sent is read and dropped. */
        for (int i = 1; i <= n; i++) {
            if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char b[4096];
            ssize_t k;
            while ((k = recv(p[i].fd, b, sizeof b, MSG_DONTWAIT)) > 0)
                ;
            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                close(p[i].fd);
                p[i--] = p[n--];
                atomic_fetch_sub(&hole.open, 1);
            }
        }
        if (!(p[0].revents & POLLIN))
            continue;
        int c = accept(hole.fd, NULL, NULL);
        if (c < 0)
            continue;
        atomic_fetch_add(&hole.accepted, 1);
        if (n == MAXC) {
            close(c);
            continue;
        }
        p[++n] = (struct pollfd){.fd = c, .events = POLLIN};
        int now = atomic_fetch_add(&hole.open, 1) + 1;
        if (now > atomic_load(&hole.peak))
            atomic_store(&hole.peak, now);
    }
    for (int i = 1; i <= n; i++)
        close(p[i].fd);
    atomic_store(&hole.open, 0);
    return NULL;
}

static void hole_up(void)
{
    atomic_store(&hole.stop, false);
    atomic_store(&hole.accepted, 0);
    atomic_store(&hole.peak, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    struct timeval tv = {0, 50000};
    hole.fd = socket(AF_INET, SOCK_STREAM, 0);
    if (hole.fd < 0 || bind(hole.fd, (struct sockaddr *)&a, sizeof a) || listen(hole.fd, 64) ||
        getsockname(hole.fd, (struct sockaddr *)&a, &len) ||
        setsockopt(hole.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv))
        die("black hole");
    hole.port = ntohs(a.sin_port);
    if (pthread_create(&hole.t, NULL, hole_main, NULL))
        die("black hole thread");
}

static void hole_down(void)
{
    atomic_store(&hole.stop, true);
    pthread_join(hole.t, NULL);
    close(hole.fd);
}

/* Tenant t2's endpoint accepts and never answers while 12 of its payments
 * wait; tenant t1's payments are delivered meanwhile, and t2 never has
 * more attempts in flight than its share. */
#define BH1_N 12 /* t1's events */
static void test_bulkhead(void **state)
{
    (void)state;
    char ep[64], u[128];
    reset_rx();
    rx_up();
    add_endpoint("payment.credited", ep, sizeof ep);
    hole_up();
    /* Two endpoints: per endpoint (2) does not bound t2 below the senders
     * (4); only the tenant's share does. */
    char secret2[128];
    for (int i = 0; i < 2; i++) {
        snprintf(u, sizeof u, "http://127.0.0.1:%u/hook%d", hole.port, i);
        run(secret2, sizeof secret2, "webhook add --tenant t2 --url %s --insecure-dev", u);
    }
    struct po_webhooks_cfg keep = hooks;
    hooks.senders = 4;
    hooks.per_tenant = 2;
    hooks.timeout_ms = 1500;
    hooks.retry_base_ms = 300; /* a retry never overlaps its closed try */
    hooks.retry_cap_ms = 600;
    struct t_gateway *gw = gateway();
    unsigned port = gw->port;
    /* t1 first, to a receiver that takes 1 s: t1 has work for a while
     * (BH1_N / 2 rounds of its share of 2: about 5 s while 3 or more wait),
     * and t2 arrives meanwhile. Every order first, and half of t1's
     * callbacks after t2's: t1 still has half its events to deliver when
     * t2's are there, however long t2's callbacks took (a loaded TSan run
     * once had t2's first delivery claimed only when t1 was down to its
     * last two: 0 in flight, with 600 ms and again with 1 s a delivery). */
    char bh1[BH1_N][32], bh2[12][32];
    for (int i = 0; i < BH1_N; i++) {
        snprintf(bh1[i], sizeof bh1[i], "BH1-%d", i);
        order(bh1[i]);
    }
    for (int i = 0; i < 12; i++) {
        snprintf(bh2[i], sizeof bh2[i], "BH2-%d", i);
        order_for("t2", bh2[i]);
    }
    rx_behave(false, 1000);
    for (int i = 0; i < BH1_N / 2; i++)
        T_CHECK(post_callback(port, bh1[i]) == 204, "bulkhead: t1 %s not acked", bh1[i]);
    for (int i = 0; i < 12; i++)
        T_CHECK(post_callback_to(port, "t2", bh2[i]) == 204, "bulkhead: t2 %s not acked", bh2[i]);
    for (int i = BH1_N / 2; i < BH1_N; i++)
        T_CHECK(post_callback(port, bh1[i]) == 204, "bulkhead: t1 %s not acked", bh1[i]);
    int delivered = 0, shared_peak = 0;
    for (int t = 0; t < 20000 && delivered < BH1_N; t += 50) {
        int open = atomic_load(&hole.open);
        delivered = 0;
        for (int i = 0; i < BH1_N; i++) {
            char no[32];
            snprintf(no, sizeof no, "BH1-%d", i);
            delivered += seen_of("payment.credited", no);
        }
        /* t1 had work when open was read only if an event of it was then
         * held by no sender: at least 3 undelivered, its share (2) in
         * flight. With its last ones in flight t1 has nothing waiting, and
         * t2 may rightly take the free senders (a clean-clone TSan run
         * failed here with 4: the test's "not delivered yet" was wider
         * than the scheduler's "waiting") */
        if (delivered <= BH1_N - 3)
            shared_peak = open > shared_peak ? open : shared_peak;
        sleep_ms(50);
    }
    rx_behave(false, 0);
    T_CHECK(delivered == BH1_N,
            "bulkhead: %d of t1's %d events delivered while t2's endpoint hangs", delivered, BH1_N);
    T_CHECK(shared_peak <= 2 && shared_peak >= 1,
            "bulkhead: t2 had %d attempts in flight at once while t1 had work (its share is 2)",
            shared_peak);
    /* Work-conserving: alone, t2 may use every sender. */
    int alone_peak = 0;
    for (int t = 0; t < 8000 && alone_peak < 4; t += 20) {
        int open = atomic_load(&hole.open);
        alone_peak = open > alone_peak ? open : alone_peak;
        sleep_ms(20);
    }
    T_CHECK(alone_peak == 4,
            "bulkhead: t2 alone had at most %d of the 4 senders (a lone tenant may use all)",
            alone_peak);
    t_gateway_stop(gw);
    hooks = keep;
    hole_down();
    rx_down();
    remove_endpoint(ep);
    /* t2's hanging endpoints go: their pending deliveries end dead at once
     * instead of competing, due every 200 ms for a minute, with the next
     * case's tenant (fair_flood's t3 then got only its share: 2 of 4) */
    struct po_store *s = t_open(url);
    struct po_rows r;
    if (po_store_exec(s,
                      "SELECT endpoint_id FROM webhook_endpoint WHERE tenant_id = 't2' AND"
                      " removed_at IS NULL",
                      PO_NO_PARAMS, &r, NULL, NULL, 0))
        die("t2's endpoints not found");
    for (int i = 0; i < r.nrows; i++)
        run(NULL, 0, "webhook remove --tenant t2 --endpoint %s", po_rows_get(&r, i, 0));
    T_CHECK(r.nrows == 2, "bulkhead: t2 had %d endpoints, not 2", r.nrows);
    po_rows_free(&r);
    po_store_close(s);
    T_CHECK(q1("SELECT COUNT(*) FROM webhook_delivery WHERE tenant_id = ? AND state = 'pending'",
               "t2") == 0,
            "bulkhead: t2's deliveries still pending after its endpoints were removed");
    t_figure("# webhook: one tenant's endpoint hanging with 12 events (at most %d of its attempts"
             " in flight while the other had work, %d when alone): the other tenant's %d events"
             " delivered meanwhile\n",
             shared_peak, alone_peak, BH1_N);
}

/* ---- tenant isolation (issue 27) ---- */

static int64_t now_ms_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Tenant t3 floods: 16 endpoints (the most a tenant may have; a 17th is
 * refused) that accept and never answer, and 13 payments, all older than
 * t1's. t1's payment is still delivered within the bound (the senders'
 * attempt timeout plus a poll), its callbacks acked meanwhile, and t3's
 * pending deliveries stay within webhook-pending-max (its other events
 * wait in the outbox). Before issue 27 the claimer looked at the 64
 * oldest due deliveries only, all t3's, and t1's was never looked at. */
static void test_fair_flood(void **state)
{
    (void)state;
    char ep[64], out[256];
    reset_rx();
    rx_up();
    add_endpoint("payment.credited", ep, sizeof ep);
    hole_up();
    for (int i = 0; i < PO_WEBHOOK_ENDPOINTS_MAX; i++)
        run(out, sizeof out, "webhook add --tenant t3 --url http://127.0.0.1:%u/h%d --insecure-dev",
            hole.port, i);
    int st = t_cli_status(dir, bin, url,
                          "webhook add --tenant t3 --url http://127.0.0.1:%u/h17 --insecure-dev",
                          hole.port);
    T_CHECK(st != 0, "fair: a 17th endpoint of t3 was added");
    T_CHECK(q1("SELECT COUNT(*) FROM webhook_endpoint WHERE tenant_id = ? AND removed_at IS NULL",
               "t3") == PO_WEBHOOK_ENDPOINTS_MAX,
            "fair: t3 has other than %d endpoints", PO_WEBHOOK_ENDPOINTS_MAX);
    struct po_webhooks_cfg keep = hooks;
    hooks.senders = 4;
    hooks.per_tenant = 2;
    hooks.timeout_ms = 1500;
    hooks.pending_max = 160; /* 10 of t3's 13 events at a time */
    struct t_gateway *gw = gateway();
    unsigned port = gw->port;
    /* t3 alone: what earlier cases left for the other tenants (events fanned
     * out to the endpoint just added) is delivered first, else t3 rightly
     * gets only its share of the senders (seen once under ThreadSanitizer:
     * 2 of 4) */
    for (int t = 0; t < 10000 && q1("SELECT COUNT(*) FROM webhook_delivery WHERE state ="
                                    " 'pending' AND tenant_id <> ?",
                                    "t3") > 0;
         t += 20)
        sleep_ms(20);
    for (int i = 0; i < 13; i++) {
        char no[32];
        snprintf(no, sizeof no, "FL3-%d", i);
        order_for("t3", no);
        T_CHECK(post_callback_to(port, "t3", no) == 204, "fair: t3 %s not acked", no);
    }
    /* t3 holds the senders before t1 has anything. */
    for (int t = 0; t < 10000 && atomic_load(&hole.open) < 4; t += 20)
        sleep_ms(20);
    T_CHECK(atomic_load(&hole.open) >= 4,
            "fair: t3 never held the 4 senders (%d; other tenants' pending deliveries: %lld)",
            atomic_load(&hole.open),
            (long long)q1("SELECT COUNT(*) FROM webhook_delivery WHERE state = 'pending' AND"
                          " tenant_id <> ?",
                          "t3"));
    int64_t pend = q1("SELECT COUNT(*) FROM webhook_delivery WHERE tenant_id = ? AND"
                      " state = 'pending'",
                      "t3");
    int64_t waiting =
        q1("SELECT COUNT(*) FROM outbox_event WHERE tenant_id = ? AND fanned = 0", "t3");
    T_CHECK(pend > 64 && pend <= 160 && waiting >= 13 - 10,
            "fair: t3 has %lld deliveries pending (limit 160) and %lld events waiting",
            (long long)pend, (long long)waiting);
    order("FL1-1");
    int64_t start = now_ms_wall(), worst_ack = 0;
    T_CHECK(post_callback(port, "FL1-1") == 204, "fair: t1's callback not acked");
    for (int i = 0; i < 5; i++) { /* t1's callbacks while t3 floods */
        char no[32];
        snprintf(no, sizeof no, "FL1-ack-%d", i);
        order(no);
        int64_t t0 = now_ms_wall();
        T_CHECK(post_callback(port, no) == 204, "fair: t1's callback %s not acked", no);
        worst_ack = now_ms_wall() - t0 > worst_ack ? now_ms_wall() - t0 : worst_ack;
    }
    while (now_ms_wall() - start < 15000 && seen_of("payment.credited", "FL1-1") == 0)
        sleep_ms(20);
    int64_t took = now_ms_wall() - start;
    T_CHECK(seen_of("payment.credited", "FL1-1") == 1 && took <= 1500 + 3500,
            "fair: t1's event delivered after %lld ms while t3 floods (bound 5000)",
            (long long)took);
    t_gateway_stop(gw);
    hooks = keep;
    hole_down();
    rx_down();
    remove_endpoint(ep);
    t_figure("# webhook: t3 floods (16 hanging endpoints, 13 events, %lld deliveries pending at"
             " its limit 160): t1's event delivered in %lld ms (bound: the 1500 ms attempt timeout"
             " + 3.5 s), t1's 3x-delivered callbacks acked in at most %lld ms\n",
             (long long)pend, (long long)took, (long long)worst_ack);
}

/* A removed endpoint gets nothing more: its pending deliveries (failing
 * and retried every 40-200 ms) stop at once and end dead ("endpoint
 * removed"), while a live endpoint of the same tenant receives new
 * events. Before issue 27 they went on for up to 3 days. */
static void test_removed_endpoint(void **state)
{
    (void)state;
    char live[64], gone[64];
    reset_rx();
    rx_up();
    add_endpoint("payment.credited", live, sizeof live);
    /* Its deliveries fail the receiver's signature check (rx.secret is
     * live's): counted at arrival, that is all this endpoint needs. */
    add_endpoint_at("/gone", "payment.credited", NULL, 0, gone, sizeof gone);
    pthread_mutex_lock(&rx.mu);
    rx.fail_mod = 1; /* every delivery refused: they stay pending, retried */
    pthread_mutex_unlock(&rx.mu);
    struct t_gateway *gw = gateway();
    unsigned port = gw->port;
    for (int i = 0; i < 4; i++) {
        char no[32];
        snprintf(no, sizeof no, "RM-%d", i);
        order(no);
        T_CHECK(post_callback(port, no) == 204, "removed: %s not acked", no);
    }
    for (int t = 0; t < 10000 && rx_count(&rx.gone) < 8; t += 20)
        sleep_ms(20);
    remove_endpoint(gone);
    int at_removal = rx_count(&rx.gone);
    pthread_mutex_lock(&rx.mu);
    rx.fail_mod = 0;
    pthread_mutex_unlock(&rx.mu);
    for (int i = 0; i < 3; i++) {
        char no[32];
        snprintf(no, sizeof no, "RM2-%d", i);
        order(no);
        T_CHECK(post_callback(port, no) == 204, "removed: %s not acked", no);
    }
    /* The live endpoint gets RM-* (retried) and RM2-*: the worker has
     * had every chance to send to the removed one meanwhile. */
    T_CHECK(wait_for("payment.credited", 7, 15000), "removed: the live endpoint got %d of 7",
            seen_of("payment.credited", NULL));
    int after = rx_count(&rx.gone) - at_removal;
    T_CHECK(after <= hooks.per_endpoint,
            "removed: %d deliveries reached the removed endpoint after its removal (at most the"
            " %d in flight then)",
            after, hooks.per_endpoint);
    T_CHECK(q1("SELECT COUNT(*) FROM webhook_delivery WHERE endpoint_id = ? AND state = 'pending'",
               gone) == 0,
            "removed: the removed endpoint still has pending deliveries");
    T_CHECK(q1("SELECT COUNT(*) FROM webhook_delivery WHERE endpoint_id = ? AND state = 'dead'"
               " AND last_error = 'endpoint removed'",
               gone) >= 4,
            "removed: the removed endpoint's deliveries are not dead as removed");
    int st = t_cli_status(dir, bin, url, "webhook rotate-secret --tenant t1 --endpoint %s", gone);
    T_CHECK(st != 0, "removed: a removed endpoint's secret was rotated");
    t_gateway_stop(gw);
    rx_down();
    remove_endpoint(live);
    t_figure("# webhook: a removed endpoint with 4 failing events retried every 40-200 ms: %d"
             " deliveries after its removal (in flight then), its deliveries dead as removed\n",
             after);
}

/* A URL form with PORT replaced by the loopback listener's port. */
static void form_url(const char *form, char *out, size_t cap)
{
    const char *p = strstr(form, "PORT");
    snprintf(out, cap, "%.*s%u%s", (int)(p - form), form, hole.port, p + 4);
}

/* Webhook URLs are not an SSRF primitive: every spelling of this machine
 * is refused when the tenant registers it (400), and — registered while
 * allowed, or a name that now resolves here — refused again at the send,
 * before any connection: a listener on the port they name sees nothing. */
static void test_ssrf(void **state)
{
    (void)state;
    /* PORT: the loopback listener's. */
    static const char *const forms[] = {
        "https://127.0.0.1:PORT/",
        "https://2130706433:PORT/",
        "https://0x7f.0.0.1:PORT/",
        "https://0177.0.0.1:PORT/",
        "https://127.1:PORT/",
        "https://[::ffff:127.0.0.1]:PORT/",
        "https://[::ffff:7f00:1]:PORT/",
        "https://[::1]:PORT/",
        "https://0.0.0.0:PORT/",
        "https://localhost:PORT/",
        "https://LocalHost.:PORT/",
        "https://a.localhost:PORT/",
        "https://127.0.0.1:1@127.0.0.2:PORT/",
        "http://127.0.0.1:PORT/",
        "https://127.0.0.2:PORT/x?y=1#z",
    };
    hole_up();
    /* Registration, through the API of a gateway with the default policy. */
    struct po_webhooks_cfg keep = hooks;
    hooks.egress = (struct po_egress_policy){0};
    hooks.timeout_ms = 1000;
    struct t_gateway *gw = gateway();
    unsigned port = gw->port;
    char key[128];
    run(key, sizeof key, "apikey create --tenant t4");
    int refused = 0;
    for (int i = 0; i < PO_NELEM(forms); i++) {
        char u[160], body[256], auth[200];
        form_url(forms[i], u, sizeof u);
        snprintf(body, sizeof body, "{\"url\":\"%s\"}", u);
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
        char answer[2048], api[64];
        snprintf(api, sizeof api, "http://127.0.0.1:%u/v1/webhook_endpoints", port);
        const char *lines[] = {auth, "Content-Type: application/json", NULL};
        struct t_http_req q = {.url = api, .headers = lines, .body = body, .timeout_s = 10};
        long status = t_http(&q, answer, sizeof answer, NULL);
        T_CHECK(status == 400 && strstr(answer, "\"param\":\"url\""), "ssrf: %s registered: %ld %s",
                u, status, answer);
        refused += status == 400;
    }
    T_CHECK(q1("SELECT COUNT(*) FROM webhook_endpoint WHERE tenant_id = ?", "t4") == 0,
            "ssrf: an endpoint of t4 was stored");
    /* Stored anyway (registered under a permissive policy, then the URL
     * as a name's new address would make it): the send refuses. */
    /* And a name that resolves to loopback only (this machine's own name,
     * where it does): refused after its resolution. */
    char self[128] = "", byname[200] = "";
    struct addrinfo *res = NULL, hints = {.ai_socktype = SOCK_STREAM};
    bool only_loopback =
        gethostname(self, sizeof self) == 0 && getaddrinfo(self, NULL, &hints, &res) == 0 && res;
    for (struct addrinfo *a = res; a && only_loopback; a = a->ai_next)
        only_loopback =
            a->ai_family == AF_INET &&
            (ntohl(((struct sockaddr_in *)(void *)a->ai_addr)->sin_addr.s_addr) >> 24) == 127;
    if (res)
        freeaddrinfo(res);
    if (only_loopback)
        snprintf(byname, sizeof byname, "https://%s:%u/", self, hole.port);
    int stored = 0;
    struct po_egress_policy loose = {.allow_loopback = true};
    struct po_store *s = t_open(url);
    for (int i = 0; i <= PO_NELEM(forms); i++, stored++) {
        char u[200], err[PO_ERRBUF_SIZE] = "";
        if (i == PO_NELEM(forms) && !byname[0])
            break;
        if (i == PO_NELEM(forms))
            snprintf(u, sizeof u, "%s", byname);
        else
            form_url(forms[i], u, sizeof u);
        struct po_webhook_new n;
        if (po_webhook_add(s, master, "t4", "https://127.0.0.1/", NULL, &loose, &n, err,
                           sizeof err) ||
            po_store_exec(s, "UPDATE webhook_endpoint SET url = ? WHERE endpoint_id = ?",
                          PO_PARAMS(PO_TEXT(u), PO_TEXT(n.id)), NULL, NULL, NULL, 0))
            die(err);
    }
    po_store_close(s);
    order_for("t4", "SSRF-1");
    T_CHECK(post_callback_to(port, "t4", "SSRF-1") == 204, "ssrf: t4's callback not acked");
    int64_t tried = 0;
    for (int t = 0; t < 20000 && tried < stored; t += 50) {
        sleep_ms(50);
        tried = q1("SELECT COUNT(DISTINCT a.endpoint_id) FROM webhook_attempt a WHERE"
                   " a.tenant_id = ? AND a.status_code IS NULL AND (a.error ="
                   " 'destination refused by payonce''s egress policy' OR a.error ="
                   " 'the URL is not one payonce sends to')",
                   "t4");
    }
    if (tried != stored) { /* which, for the failure's message */
        struct po_store *d = t_open(url);
        struct po_rows r;
        if (po_store_exec(
                d,
                "SELECT w.url, MAX(a.status_code), MAX(a.error) FROM webhook_endpoint w LEFT JOIN"
                " webhook_attempt a ON a.tenant_id = w.tenant_id AND a.endpoint_id ="
                " w.endpoint_id WHERE w.tenant_id = 't4' GROUP BY w.url",
                PO_NO_PARAMS, &r, NULL, NULL, 0) == PO_OK) {
            for (int i = 0; i < r.nrows; i++)
                fprintf(stderr, "ssrf: %s -> %s %s\n", po_rows_get(&r, i, 0),
                        po_rows_get(&r, i, 1) ? po_rows_get(&r, i, 1) : "-",
                        po_rows_get(&r, i, 2) ? po_rows_get(&r, i, 2) : "-");
            po_rows_free(&r);
        }
        po_store_close(d);
    }
    T_CHECK(tried == stored, "ssrf: %lld of %d endpoints' attempts refused by the policy",
            (long long)tried, stored);
    T_CHECK(atomic_load(&hole.accepted) == 0, "ssrf: %d connections reached the loopback listener",
            atomic_load(&hole.accepted));
    T_CHECK(q1("SELECT COUNT(*) FROM webhook_attempt WHERE tenant_id = ? AND (error LIKE"
               " '%Connection%' OR error LIKE '%port%' OR error LIKE '%Failed to%')",
               "t4") == 0,
            "ssrf: the transport's words reached the tenant's attempt record");
    t_gateway_stop(gw);
    hooks = keep;
    hole_down();
    t_figure("# webhook: %d URL spellings of this machine refused at registration (400) and, %d"
             " stored anyway%s, refused at the send: %d connections reached the listener\n",
             refused, stored, byname[0] ? " (one a name resolving to loopback)" : "",
             atomic_load(&hole.accepted));
}

/* ---- the tenant API: /v1/webhook_endpoints and /v1/events ---- */

static char apikey[128];

struct answer {
    long status;
    char body[65536];
};

static void api(unsigned port, const char *method, const char *path, const char *body,
                struct answer *a)
{
    char u[512], auth[200];
    snprintf(u, sizeof u, "http://127.0.0.1:%u%s", port, path);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", apikey);
    const char *lines[] = {auth, "Content-Type: application/json", NULL};
    struct t_http_req q = {
        .method = method, .url = u, .headers = lines, .body = body, .timeout_s = 10};
    a->status = t_http(&q, a->body, sizeof a->body, NULL);
}

static void test_api_surface(void **state)
{
    (void)state;
    run(apikey, sizeof apikey, "apikey create --tenant t1");
    static struct answer a;
    char path[768], body[256], ep[64] = "", secret[128] = "";
    struct t_gateway *gw = gateway();
    unsigned port = gw->port;
    snprintf(body, sizeof body,
             "{\"url\":\"http://127.0.0.1:%u/api-hook\",\"events\":"
             "\"payment.credited,alert.raised\"}",
             rx.port ? rx.port : 9);
    api(port, "POST", "/v1/webhook_endpoints", body, &a);
    json_t *j = json_loads(a.body, 0, NULL);
    snprintf(ep, sizeof ep, "%s", json_string_value(json_object_get(j, "id")) ?: "");
    snprintf(secret, sizeof secret, "%s", json_string_value(json_object_get(j, "secret")) ?: "");
    json_decref(j);
    T_CHECK(a.status == 201 && strncmp(ep, "we_", 3) == 0 && strncmp(secret, "whsec_", 6) == 0,
            "api: create endpoint: %ld %s", a.status, a.body);
    api(port, "GET", "/v1/webhook_endpoints", NULL, &a);
    T_CHECK(a.status == 200 && strstr(a.body, ep) && !strstr(a.body, "whsec_"),
            "api: list: %ld %.300s", a.status, a.body);
    snprintf(path, sizeof path, "/v1/webhook_endpoints/%s/rotate_secret", ep);
    api(port, "POST", path, NULL, &a);
    T_CHECK(a.status == 200 && strstr(a.body, "whsec_") && !strstr(a.body, secret),
            "api: rotate: %ld %.300s", a.status, a.body);
    T_CHECK(q1("SELECT COUNT(*) FROM webhook_endpoint WHERE secret LIKE ?", "%whsec_%") == 0,
            "api: a secret is stored unsealed");
    api(port, "POST", "/v1/webhook_endpoints", "{\"url\":\"http://10.1.2.3/hook\"}", &a);
    T_CHECK(a.status == 400 && strstr(a.body, "https://"),
            "api: http to a non-loopback host:"
            " %ld %s",
            a.status, a.body);
    api(port, "POST", "/v1/webhook_endpoints",
        "{\"url\":\"https://example.com/h\",\"events\":\"payment.lost\"}", &a);
    T_CHECK(a.status == 400 && strstr(a.body, "payment.lost"), "api: unknown event type: %ld %s",
            a.status, a.body);
    snprintf(path, sizeof path, "/v1/webhook_endpoints/%s/remove", ep);
    api(port, "POST", path, NULL, &a);
    T_CHECK(a.status == 200, "api: remove: %ld %s", a.status, a.body);
    api(port, "POST", path, NULL, &a);
    T_CHECK(a.status == 404 && strstr(a.body, "endpoint_not_found"), "api: remove twice: %ld %s",
            a.status, a.body);
    /* /v1/events: every payment.credited of the outbox, paged by 7. */
    int64_t want = q1("SELECT COUNT(*) FROM outbox_event WHERE tenant_id = 't1' AND type = ?",
                      "payment.credited");
    int got = 0, pages = 0;
    char cursor[512] = "";
    bool ok = true;
    do {
        snprintf(path, sizeof path, "/v1/events?type=payment.credited&limit=7%s%s",
                 cursor[0] ? "&cursor=" : "", cursor);
        api(port, "GET", path, NULL, &a);
        json_t *page = json_loads(a.body, 0, NULL), *data = json_object_get(page, "data");
        ok = ok && a.status == 200 && json_is_array(data);
        size_t i;
        json_t *e;
        json_array_foreach(data, i, e)
        {
            ok = ok &&
                 strcmp(json_string_value(json_object_get(e, "type")), "payment.credited") == 0 &&
                 json_is_object(json_object_get(json_object_get(e, "data"), "object"));
            got++;
        }
        const char *next = json_string_value(json_object_get(page, "next_cursor"));
        snprintf(cursor, sizeof cursor, "%s", next ? next : "");
        json_decref(page);
        pages++;
    } while (cursor[0] && ok && pages < 100);
    T_CHECK(ok && got == want && want > 0, "api: /v1/events gave %d of %lld events (%d pages)", got,
            (long long)want, pages);
    api(port, "GET", "/v1/events?out_trade_no=ORD-SEQ", NULL, &a);
    T_CHECK(a.status == 200 && strstr(a.body, "payment.credited") &&
                strstr(a.body, "refund.succeeded") &&
                strstr(a.body, "payment.credited") < strstr(a.body, "refund.succeeded"),
            "api: the order's events in order: %.400s", a.body);
    api(port, "GET", "/v1/events?type=nope", NULL, &a);
    T_CHECK(a.status == 400, "api: /v1/events?type=nope: %ld", a.status);
    t_gateway_stop(gw);
    t_figure("# webhook: /v1/webhook_endpoints create, list (no secrets), rotate, remove;"
             " /v1/events paged all %lld payment.credited events\n",
             (long long)want);
}

int main(int argc, char **argv)
{
    backend = t_backend(argc, argv);
    if (argc < 3 || !realpath(argv[2], bin))
        die("usage: test_webhook BACKEND PAYONCE");
    po_log_set_level(PO_LOG_ERROR);
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    pthread_mutex_init(&rx.mu, NULL);
    t_env_create("webhook", dir, sizeof dir, master, &id);
    t_db_create(backend, url, sizeof url);
    run(NULL, 0, "tenant add --tenant t1");
    run(NULL, 0, "merchant add --tenant t1 --merchant m1");
    run(NULL, 0, "tenant add --tenant t2");
    run(NULL, 0, "merchant add --tenant t2 --merchant m1");
    for (int t = 3; t <= 4; t++) {
        run(NULL, 0, "tenant add --tenant t%d", t);
        run(NULL, 0, "merchant add --tenant t%d --merchant m1", t);
        run(NULL, 0,
            "channel set --tenant t%d --channel wechatpay --mchid %s --appid %s --apiv3-key-file"
            " sim/apiv3.key --platform-cert-file sim/wechatpay_platform_cert.pem",
            t, id.mchid, id.appid);
    }
    run(NULL, 0,
        "channel set --tenant t2 --channel wechatpay --mchid %s --appid %s --apiv3-key-file"
        " sim/apiv3.key --platform-cert-file sim/wechatpay_platform_cert.pem",
        id.mchid, id.appid);
    run(NULL, 0,
        "channel set --tenant t1 --channel wechatpay --mchid %s --appid %s --apiv3-key-file"
        " sim/apiv3.key --platform-cert-file sim/wechatpay_platform_cert.pem",
        id.mchid, id.appid);
    char name[64];
    snprintf(name, sizeof name, "webhook[%s]", backend);
#define CASE(fn) cmocka_unit_test_teardown(fn, end_capture)
    const struct CMUnitTest tests[] = {
        CASE(test_signatures),       CASE(test_down_then_up), CASE(test_ordering),
        CASE(test_ordering_many),    CASE(test_bulkhead),     CASE(test_fair_flood),
        CASE(test_removed_endpoint), CASE(test_ssrf),         CASE(test_dead_letter),
        CASE(test_two_gateways),     CASE(test_kill9),        CASE(test_api_surface)};
#undef CASE
    int rc = T_RUN_GROUP(name, tests, NULL, NULL);
    po_sim_identity_free(&id);
    curl_global_cleanup();
    return t_env_finish(dir, url, name) || rc;
}
