/*
 * metrics.c — counters and a histogram in fixed arrays of atomics (no lock
 * on the request path), rendered in Prometheus text format.
 *
 *   payonce_callbacks_total{channel,outcome,layer}
 *   payonce_verification_failures_total{channel,reason}
 *   payonce_ack_seconds{channel} (histogram)
 *   payonce_http_responses_total{code}
 *   payonce_api_requests_total{route,code,replayed}
 */
#include "http_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const channels[] = {"wechatpay", "alipay", "stripe", "unknown"};
#define NCH 4
static const char *const outcomes[] = {"applied", "duplicate", "rejected", "suspense",
                                       "retry",   "ignored",   "invalid"};
#define NOUT 7
/* Verification failure reasons the adapters and the handler produce. */
static const char *const reasons[] = {
    "missing_header", "probe", "unsupported_signature_type", "bad_timestamp",
    "stale_timestamp", "future_timestamp", "unknown_serial", "bad_signature",
    "malformed_body", "unsupported_algorithm", "decrypt_failed", "malformed_resource",
    "missing_signature", "invalid_utf8", "bad_charset", "body_too_large", "unknown_tenant",
    "other"};
#define NREASON (sizeof reasons / sizeof reasons[0])
static const uint64_t bucket_us[] = {1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000,
                                     500000, 1000000, 2500000, 5000000};
#define NBUCKET (sizeof bucket_us / sizeof bucket_us[0])
static const unsigned codes[] = {200, 201, 204, 400, 401, 404, 405, 409, 413, 422, 500, 503};
#define NCODE (sizeof codes / sizeof codes[0])

static atomic_ulong callbacks[NCH][NOUT][4];
static atomic_ulong vfail[NCH][NREASON];
static atomic_ulong ack_bucket[NCH][NBUCKET + 1];
static atomic_ulong ack_sum_us[NCH];
static atomic_ulong ack_count[NCH];
static atomic_ulong http_codes[NCODE + 1];
/* The tenant API's routes as api.c names them; "" is an unknown route. */
static const char *const routes[] = {"POST /v1/orders",
                                     "GET /v1/orders/{out_trade_no}",
                                     "POST /v1/orders/{out_trade_no}/close",
                                     "POST /v1/refunds",
                                     "GET /v1/refunds/{out_refund_no}",
                                     "GET /v1/balances",
                                     "GET /v1/alerts",
                                     "GET /v1/journal",
                                     ""};
#define NROUTE (sizeof routes / sizeof routes[0])
static atomic_ulong api[NROUTE][NCODE + 1][2];

static size_t index_of(const char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (s && strcmp(names[i], s) == 0)
            return i;
    return n - 1; /* the last entry is the catch-all */
}

void po_metrics_callback(const char *channel, const char *outcome, int layer, uint64_t micros)
{
    size_t c = index_of(channels, NCH, channel);
    size_t o = index_of(outcomes, NOUT, outcome);
    atomic_fetch_add(&callbacks[c][o][layer >= 0 && layer <= 3 ? layer : 0], 1);
    size_t b = 0;
    while (b < NBUCKET && micros > bucket_us[b])
        b++;
    atomic_fetch_add(&ack_bucket[c][b], 1);
    atomic_fetch_add(&ack_sum_us[c], micros);
    atomic_fetch_add(&ack_count[c], 1);
}

void po_metrics_verify_failure(const char *channel, const char *reason)
{
    atomic_fetch_add(&vfail[index_of(channels, NCH, channel)][index_of(reasons, NREASON, reason)],
                     1);
}

static size_t code_index(unsigned status)
{
    size_t i = 0;
    while (i < NCODE && codes[i] != status)
        i++;
    return i; /* NCODE: other */
}

void po_metrics_http(unsigned status)
{
    atomic_fetch_add(&http_codes[code_index(status)], 1);
}

void po_metrics_api(const char *route, unsigned status, bool replayed)
{
    atomic_fetch_add(&api[index_of(routes, NROUTE, route)][code_index(status)][replayed], 1);
}

static void code_text(size_t i, char *buf, size_t cap)
{
    if (i < NCODE)
        (void)snprintf(buf, cap, "%u", codes[i]);
    else
        (void)snprintf(buf, cap, "other");
}

struct out {
    char *buf;
    size_t len, cap;
};

static void put(struct out *o, const char *fmt, ...) PO_PRINTF(2, 3);
static void put(struct out *o, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->buf ? o->buf + o->len : NULL, o->buf ? o->cap - o->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (o->buf && o->len + (size_t)n < o->cap) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = (o->cap ? o->cap * 2 : 16384) + (size_t)n;
        char *b = realloc(o->buf, cap);
        if (!b)
            return;
        o->buf = b;
        o->cap = cap;
    }
}

char *po_metrics_render(void)
{
    struct out o = {0};
    put(&o, "# HELP payonce_callbacks_total Callbacks answered, by channel, outcome and the"
            " layer that caught a duplicate.\n# TYPE payonce_callbacks_total counter\n");
    for (size_t c = 0; c < NCH - 1; c++)
        for (size_t k = 0; k < NOUT; k++)
            for (int l = 0; l < 4; l++) {
                unsigned long v = atomic_load(&callbacks[c][k][l]);
                bool dup = strcmp(outcomes[k], "duplicate") == 0;
                if ((dup && l == 0) || (!dup && l != 0))
                    continue;
                put(&o, "payonce_callbacks_total{channel=\"%s\",outcome=\"%s\",layer=\"%d\"} %lu\n",
                    channels[c], outcomes[k], l, v);
            }
    put(&o, "# HELP payonce_verification_failures_total Callbacks refused before the engine.\n"
            "# TYPE payonce_verification_failures_total counter\n");
    for (size_t c = 0; c < NCH; c++)
        for (size_t r = 0; r < NREASON; r++) {
            unsigned long v = atomic_load(&vfail[c][r]);
            if (v)
                put(&o, "payonce_verification_failures_total{channel=\"%s\",reason=\"%s\"} %lu\n",
                    channels[c], reasons[r], v);
        }
    put(&o, "# HELP payonce_ack_seconds Time from request to ack.\n"
            "# TYPE payonce_ack_seconds histogram\n");
    for (size_t c = 0; c < NCH - 1; c++) {
        unsigned long cum = 0;
        for (size_t b = 0; b <= NBUCKET; b++) {
            cum += atomic_load(&ack_bucket[c][b]);
            if (b < NBUCKET)
                put(&o, "payonce_ack_seconds_bucket{channel=\"%s\",le=\"%llu.%06llu\"} %lu\n",
                    channels[c], (unsigned long long)(bucket_us[b] / 1000000),
                    (unsigned long long)(bucket_us[b] % 1000000), cum);
            else
                put(&o, "payonce_ack_seconds_bucket{channel=\"%s\",le=\"+Inf\"} %lu\n",
                    channels[c], cum);
        }
        unsigned long sum = atomic_load(&ack_sum_us[c]);
        put(&o, "payonce_ack_seconds_sum{channel=\"%s\"} %lu.%06lu\n", channels[c],
            sum / 1000000, sum % 1000000);
        put(&o, "payonce_ack_seconds_count{channel=\"%s\"} %lu\n", channels[c],
            atomic_load(&ack_count[c]));
    }
    put(&o, "# HELP payonce_http_responses_total HTTP responses by status code.\n"
            "# TYPE payonce_http_responses_total counter\n");
    for (size_t i = 0; i <= NCODE; i++) {
        unsigned long v = atomic_load(&http_codes[i]);
        char code[8];
        code_text(i, code, sizeof code);
        if (v)
            put(&o, "payonce_http_responses_total{code=\"%s\"} %lu\n", code, v);
    }
    put(&o, "# HELP payonce_api_requests_total Tenant API requests by route, status and whether"
            " the answer was an Idempotency-Key replay.\n"
            "# TYPE payonce_api_requests_total counter\n");
    for (size_t r = 0; r < NROUTE; r++)
        for (size_t i = 0; i <= NCODE; i++)
            for (int rep = 0; rep < 2; rep++) {
                unsigned long v = atomic_load(&api[r][i][rep]);
                char code[8];
                code_text(i, code, sizeof code);
                if (v)
                    put(&o,
                        "payonce_api_requests_total{route=\"%s\",code=\"%s\",replayed=\"%s\"}"
                        " %lu\n",
                        routes[r][0] ? routes[r] : "unknown", code, rep ? "true" : "false", v);
            }
    return o.buf;
}
