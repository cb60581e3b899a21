/*
 * metrics.c — counters and a histogram in fixed arrays of atomics (no lock
 * on the request path), rendered in Prometheus text format.
 *
 *   payonce_callbacks_total{channel,outcome,layer}
 *   payonce_verification_failures_total{channel,reason}
 *   payonce_ack_seconds{channel} (histogram)
 *   payonce_http_responses_total{code}
 *   payonce_api_requests_total{route,code,replayed}
 *   payonce_committer_batches_total, payonce_committer_items_total,
 *   payonce_committer_batch_size (histogram), payonce_committer_commit_failures_total,
 *   payonce_committer_deadline_exceeded_total,
 *   payonce_committer_round_trips_total, payonce_committer_pages_written_total,
 *   payonce_committer_queued,
 *   payonce_committer_known_hits_total, payonce_committer_known_clears_total
 *   payonce_console_deliveries_dropped_total
 *   payonce_account_loads_total
 */
#include "http_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every label set comes from a table defined once elsewhere: channels from
 * the registry (plus "unknown"), outcomes and reasons from event.h, routes
 * from routes.c. */
#define NCH_MAX (PO_CHANNELS_MAX + 1) /* registered channels, plus one for "unknown" */
static const uint64_t bucket_us[] = {1000,   2500,   5000,   10000,   25000,   50000,
                                     100000, 250000, 500000, 1000000, 2500000, 5000000};
#define NBUCKET (sizeof bucket_us / sizeof bucket_us[0])
static const unsigned codes[] = {200, 201, 204, 400, 401, 404, 405, 409, 413, 422, 500, 503};
#define NCODE (sizeof codes / sizeof codes[0])
#define NROUTE_MAX 32

static atomic_ulong callbacks[NCH_MAX][PO_OUT_COUNT][4];
static atomic_ulong vfail[NCH_MAX][PO_R_COUNT];
static atomic_ulong ack_bucket[NCH_MAX][NBUCKET + 1];
static atomic_ulong ack_sum_us[NCH_MAX];
static atomic_ulong ack_count[NCH_MAX];
static atomic_ulong http_codes[NCODE + 1];
static atomic_ulong api[NROUTE_MAX + 1][NCODE + 1][2]; /* last route row: unknown */

/* The last hour, for the dashboard: one slot a minute, reused when its
 * minute comes round again (slot.minute says which minute it holds; a
 * writer that finds an old minute claims the slot and clears it). Counts
 * that race a clearing may be lost: it is a view, not the ledger. */
#define WINDOW 60
struct minute {
    _Atomic long minute;
    atomic_ulong cb[NCH_MAX][PO_OUT_COUNT][4];
    atomic_ulong ack[NBUCKET + 1];
};
static struct minute window[WINDOW];

static long now_minute(void)
{
    return (long)(po_now_us() / 60000000u);
}

static struct minute *this_minute(void)
{
    long m = now_minute();
    struct minute *w = &window[m % WINDOW];
    long seen = atomic_load(&w->minute);
    if (seen != m && atomic_compare_exchange_strong(&w->minute, &seen, m)) {
        for (size_t c = 0; c < NCH_MAX; c++)
            for (size_t o = 0; o < PO_OUT_COUNT; o++)
                for (size_t l = 0; l < 4; l++)
                    atomic_store(&w->cb[c][o][l], 0);
        for (size_t b = 0; b <= NBUCKET; b++)
            atomic_store(&w->ack[b], 0);
    }
    return w;
}

static int nchannels(void)
{
    int n = 0;
    while (po_channels[n])
        n++;
    return n;
}

/* A channel's row; the last one counts channels not registered. */
static size_t channel_index(const struct po_channel_ops *ch)
{
    int i = 0;
    while (po_channels[i] && po_channels[i] != ch)
        i++;
    return (size_t)i;
}

static const char *channel_label(size_t i)
{
    return (int)i < nchannels() ? po_channels[i]->name : "unknown";
}

void po_metrics_callback(const struct po_channel_ops *ch, struct po_outcome outcome,
                         uint64_t micros)
{
    size_t c = channel_index(ch);
    PO_ASSERT((unsigned)outcome.kind < PO_OUT_COUNT && (unsigned)outcome.reason < PO_R_COUNT);
    if (outcome.kind == PO_OUT_INVALID)
        atomic_fetch_add(&vfail[c][outcome.reason], 1);
    size_t l = outcome.layer >= 0 && outcome.layer <= 3 ? (size_t)outcome.layer : 0;
    atomic_fetch_add(&callbacks[c][outcome.kind][l], 1);
    size_t b = 0;
    while (b < NBUCKET && micros > bucket_us[b])
        b++;
    atomic_fetch_add(&ack_bucket[c][b], 1);
    atomic_fetch_add(&ack_sum_us[c], micros);
    atomic_fetch_add(&ack_count[c], 1);
    struct minute *w = this_minute();
    atomic_fetch_add(&w->cb[c][outcome.kind][l], 1);
    atomic_fetch_add(&w->ack[b], 1);
}

/* The bucket bound (ms) under which fraction q of the acks fell. */
static double quantile_ms(const uint64_t *n, uint64_t total, double q)
{
    uint64_t want = (uint64_t)((double)total * q + 0.999999), seen = 0;
    for (size_t b = 0; b <= NBUCKET; b++) {
        seen += n[b];
        if (total && seen >= want)
            return b < NBUCKET ? (double)bucket_us[b] / 1000.0 : -1;
    }
    return 0;
}

json_t *po_metrics_last_hour(void)
{
    long m = now_minute();
    uint64_t cb[NCH_MAX][PO_OUT_COUNT][4] = {{{0}}}, ack[NBUCKET + 1] = {0}, total = 0;
    for (size_t i = 0; i < WINDOW; i++) {
        struct minute *w = &window[i];
        long wm = atomic_load(&w->minute);
        if (wm <= m - WINDOW || wm > m)
            continue;
        for (size_t c = 0; c < NCH_MAX; c++)
            for (size_t o = 0; o < PO_OUT_COUNT; o++)
                for (size_t l = 0; l < 4; l++)
                    cb[c][o][l] += atomic_load(&w->cb[c][o][l]);
        for (size_t b = 0; b <= NBUCKET; b++) {
            uint64_t k = atomic_load(&w->ack[b]);
            ack[b] += k;
            total += k;
        }
    }
    json_t *rows = json_array();
    for (size_t c = 0; c <= (size_t)nchannels(); c++)
        for (size_t o = 0; o < PO_OUT_COUNT; o++)
            for (size_t l = 0; l < 4; l++)
                if (cb[c][o][l])
                    json_array_append_new(
                        rows, json_pack("{s:s, s:s, s:i, s:I}", "channel", channel_label(c),
                                        "outcome", po_outcome_name((enum po_outcome_kind)o),
                                        "layer", (int)l, "count", (json_int_t)cb[c][o][l]));
    /* -1: beyond the last bucket (over 5 s) */
    return json_pack("{s:o, s:I, s:f, s:f}", "callbacks", rows, "acks", (json_int_t)total,
                     "ack_p50_ms", quantile_ms(ack, total, 0.50), "ack_p99_ms",
                     quantile_ms(ack, total, 0.99));
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

void po_metrics_api(const struct po_route *route, unsigned status, bool replayed)
{
    PO_ASSERT(po_routes_count <= NROUTE_MAX);
    int r = route ? po_route_index(route) : NROUTE_MAX;
    atomic_fetch_add(&api[r][code_index(status)][replayed], 1);
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

/* What the committer has done: how well commits are shared. */
static void render_committer(struct out *o, const struct po_committer_stats *st)
{
    put(o,
        "# HELP payonce_committer_batches_total Transactions the committer committed or"
        " failed.\n# TYPE payonce_committer_batches_total counter\n"
        "payonce_committer_batches_total %llu\n",
        (unsigned long long)st->batches);
    put(o,
        "# HELP payonce_committer_items_total Events and API writes applied in batches.\n"
        "# TYPE payonce_committer_items_total counter\npayonce_committer_items_total %llu\n",
        (unsigned long long)st->items);
    put(o,
        "# HELP payonce_committer_commit_failures_total Batches answered retry (their"
        " transaction did not commit).\n# TYPE payonce_committer_commit_failures_total"
        " counter\npayonce_committer_commit_failures_total %llu\n",
        (unsigned long long)st->commit_failures);
    put(o,
        "# HELP payonce_committer_deadline_exceeded_total Callbacks answered FAIL at their"
        " deadline because the database had not committed them.\n# TYPE"
        " payonce_committer_deadline_exceeded_total counter\n"
        "payonce_committer_deadline_exceeded_total %llu\n",
        (unsigned long long)st->deadline_exceeded);
    put(o,
        "# HELP payonce_committer_round_trips_total Round trips of the committer's"
        " connections to the database (SQLite: statements).\n# TYPE"
        " payonce_committer_round_trips_total counter\npayonce_committer_round_trips_total"
        " %llu\n",
        (unsigned long long)st->round_trips);
    put(o,
        "# HELP payonce_committer_pages_written_total Database pages the committer's"
        " connections wrote at commit (SQLite: WAL frames; 0 on PostgreSQL).\n# TYPE"
        " payonce_committer_pages_written_total counter\n"
        "payonce_committer_pages_written_total %llu\n",
        (unsigned long long)st->pages_written);
    put(o, "# HELP payonce_committer_batch_size Items per batch.\n"
           "# TYPE payonce_committer_batch_size histogram\n");
    unsigned long long cum = 0;
    size_t nb = sizeof st->size_hist / sizeof st->size_hist[0];
    for (size_t b = 0; b < nb; b++) {
        cum += st->size_hist[b];
        if (b + 1 < nb)
            put(o, "payonce_committer_batch_size_bucket{le=\"%u\"} %llu\n", (2u << b) - 1, cum);
    }
    put(o,
        "payonce_committer_batch_size_bucket{le=\"+Inf\"} %llu\n"
        "payonce_committer_batch_size_sum %llu\npayonce_committer_batch_size_count %llu\n",
        cum, (unsigned long long)st->items, (unsigned long long)st->batches);
    put(o,
        "# HELP payonce_committer_queued Items waiting for a batch now.\n"
        "# TYPE payonce_committer_queued gauge\npayonce_committer_queued %d\n",
        st->queued);
    put(o,
        "# HELP payonce_committer_known_hits_total Redeliveries found in the table of committed"
        " events (answered duplicate without a batch).\n# TYPE"
        " payonce_committer_known_hits_total counter\npayonce_committer_known_hits_total %llu\n",
        (unsigned long long)st->known_hits);
    put(o,
        "# HELP payonce_committer_known_clears_total Times the table of committed events was"
        " emptied (a batch not committed, a new database connection).\n# TYPE"
        " payonce_committer_known_clears_total counter\npayonce_committer_known_clears_total"
        " %llu\n",
        (unsigned long long)st->known_clears);
}

/* The tenant webhooks: how far behind delivery is, and how it goes. */
static void render_webhooks(struct out *o, const struct po_webhooks_stats *w)
{
    put(o,
        "# HELP payonce_webhook_deliveries_total Webhook delivery attempts by result.\n"
        "# TYPE payonce_webhook_deliveries_total counter\n"
        "payonce_webhook_deliveries_total{result=\"delivered\"} %llu\n"
        "payonce_webhook_deliveries_total{result=\"failed\"} %llu\n"
        "payonce_webhook_deliveries_total{result=\"dead\"} %llu\n"
        "# HELP payonce_webhook_outbox_depth Deliveries not yet made (pending).\n"
        "# TYPE payonce_webhook_outbox_depth gauge\npayonce_webhook_outbox_depth %lld\n"
        "# HELP payonce_webhook_oldest_pending_seconds Age of the oldest pending delivery.\n"
        "# TYPE payonce_webhook_oldest_pending_seconds gauge\n"
        "payonce_webhook_oldest_pending_seconds %.3f\n",
        (unsigned long long)w->delivered, (unsigned long long)w->failed,
        (unsigned long long)w->dead, (long long)w->depth, (double)w->oldest_age_ms / 1000.0);
}

char *po_metrics_render(const struct po_committer_stats *committer,
                        const struct po_webhooks_stats *webhooks, int64_t account_loads)
{
    struct out o = {0};
    if (committer)
        render_committer(&o, committer);
    if (webhooks)
        render_webhooks(&o, webhooks);
    put(&o,
        "# HELP payonce_account_loads_total Channel accounts unsealed from the store into the"
        " account cache (the first use, and after each change).\n# TYPE"
        " payonce_account_loads_total counter\npayonce_account_loads_total %lld\n",
        (long long)account_loads);
    put(&o, "# HELP payonce_callbacks_total Callbacks answered, by channel, outcome and the"
            " layer that caught a duplicate.\n# TYPE payonce_callbacks_total counter\n");
    for (size_t c = 0; c < (size_t)nchannels(); c++)
        for (int k = 0; k < PO_OUT_COUNT; k++)
            for (int l = 0; l < 4; l++) {
                unsigned long v = atomic_load(&callbacks[c][k][l]);
                bool dup = k == PO_OUT_DUPLICATE;
                if ((dup && l == 0) || (!dup && l != 0))
                    continue;
                put(&o, "payonce_callbacks_total{channel=\"%s\",outcome=\"%s\",layer=\"%d\"} %lu\n",
                    channel_label(c), po_outcome_name((enum po_outcome_kind)k), l, v);
            }
    put(&o, "# HELP payonce_verification_failures_total Callbacks refused before the engine.\n"
            "# TYPE payonce_verification_failures_total counter\n");
    for (size_t c = 0; c <= (size_t)nchannels(); c++)
        for (int r = 0; r < PO_R_COUNT; r++) {
            unsigned long v = atomic_load(&vfail[c][r]);
            if (v)
                put(&o, "payonce_verification_failures_total{channel=\"%s\",reason=\"%s\"} %lu\n",
                    channel_label(c), po_reason_name((enum po_reason)r), v);
        }
    put(&o, "# HELP payonce_ack_seconds Time from request to ack.\n"
            "# TYPE payonce_ack_seconds histogram\n");
    for (size_t c = 0; c < (size_t)nchannels(); c++) {
        const char *ch = channel_label(c);
        unsigned long cum = 0;
        for (size_t b = 0; b <= NBUCKET; b++) {
            cum += atomic_load(&ack_bucket[c][b]);
            if (b < NBUCKET)
                put(&o, "payonce_ack_seconds_bucket{channel=\"%s\",le=\"%llu.%06llu\"} %lu\n", ch,
                    (unsigned long long)(bucket_us[b] / 1000000),
                    (unsigned long long)(bucket_us[b] % 1000000), cum);
            else
                put(&o, "payonce_ack_seconds_bucket{channel=\"%s\",le=\"+Inf\"} %lu\n", ch, cum);
        }
        unsigned long sum = atomic_load(&ack_sum_us[c]);
        put(&o, "payonce_ack_seconds_sum{channel=\"%s\"} %lu.%06lu\n", ch, sum / 1000000,
            sum % 1000000);
        put(&o, "payonce_ack_seconds_count{channel=\"%s\"} %lu\n", ch, atomic_load(&ack_count[c]));
    }
    struct po_ledger_check_stats lc;
    po_ledger_check_stats(&lc);
    put(&o,
        "# HELP payonce_ledger_check_rounds_total Rounds of the continuous ledger check this"
        " node ran (the node holding the ledger-check lease runs them).\n"
        "# TYPE payonce_ledger_check_rounds_total counter\n"
        "payonce_ledger_check_rounds_total %lld\n"
        "# HELP payonce_ledger_violations_total Ledger invariants found broken: rows changed"
        " outside payonce and what the sweep found (each raised as a ledger_invariant alert).\n"
        "# TYPE payonce_ledger_violations_total counter\n"
        "payonce_ledger_violations_total %lld\n"
        "# HELP payonce_ledger_check_last_round_timestamp_seconds When this node's last round"
        " completed (0: none).\n"
        "# TYPE payonce_ledger_check_last_round_timestamp_seconds gauge\n"
        "payonce_ledger_check_last_round_timestamp_seconds %lld\n"
        "# HELP payonce_ledger_sweep_rows_total Rows the ledger check re-checked (payonce's new"
        " writes and the rolling sweep of journals, orders, refunds and processed records).\n"
        "# TYPE payonce_ledger_sweep_rows_total counter\n"
        "payonce_ledger_sweep_rows_total %lld\n"
        "# HELP payonce_ledger_sweep_passes_total Passes of the rolling sweep completed (each"
        " slice counts when it reaches the end of its table).\n"
        "# TYPE payonce_ledger_sweep_passes_total counter\n"
        "payonce_ledger_sweep_passes_total %lld\n"
        "# HELP payonce_ledger_check_seconds_total Time this node's ledger check rounds took"
        " (on its own connection, outside the callbacks' path).\n"
        "# TYPE payonce_ledger_check_seconds_total counter\n"
        "payonce_ledger_check_seconds_total %lld.%06lld\n",
        (long long)lc.rounds, (long long)lc.violations, (long long)lc.last_round_unix,
        (long long)lc.sweep_rows, (long long)lc.sweep_wraps, (long long)(lc.us / 1000000),
        (long long)(lc.us % 1000000));
    put(&o,
        "# HELP payonce_console_deliveries_dropped_total Verified callbacks not recorded"
        " for the console's order trail (its buffer was full between two flushes).\n"
        "# TYPE payonce_console_deliveries_dropped_total counter\n"
        "payonce_console_deliveries_dropped_total %llu\n",
        (unsigned long long)po_deliveries_dropped());
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
    for (int r = 0; r <= NROUTE_MAX; r++)
        for (size_t i = 0; i <= NCODE; i++)
            for (int rep = 0; rep < 2; rep++) {
                unsigned long v = atomic_load(&api[r][i][rep]);
                char code[8];
                code_text(i, code, sizeof code);
                if (v)
                    put(&o,
                        "payonce_api_requests_total{route=\"%s\",code=\"%s\",replayed=\"%s\"}"
                        " %lu\n",
                        r < po_routes_count ? po_routes[r].name : "unknown", code,
                        rep ? "true" : "false", v);
            }
    return o.buf;
}
