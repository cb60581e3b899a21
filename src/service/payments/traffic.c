/*
 * traffic.c — the console's history of callbacks (traffic.h).
 *
 * The callback path counts into a small open-addressed table keyed by
 * tenant and channel under one mutex (a probe and a few additions, and the
 * verified delivery into its buffer under the same lock; the
 * metrics' atomics cannot be keyed by a tenant). Every PO_TRAFFIC_FLUSH_S
 * the jobs thread takes the table's counts and adds them, one row per
 * kind, to traffic (bucket, tenant, channel, node, kind) with an upsert, so
 * nodes and flushes add up and a restart loses at most the counts of one
 * interval. A callback refused as for no tenant (a made-up name, or a
 * tenant without an account for the channel) is counted as
 * PO_TRAFFIC_OTHER, and so is a tenant that does not fit (the table is
 * full).
 */
#include "traffic.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the ack-latency buckets' upper bounds, as the metrics have them */
static const char *const ack_le[] = {"1",   "2.5", "5",    "10",   "25",   "50", "100",
                                     "250", "500", "1000", "2500", "5000", "inf"};
static const uint64_t ack_le_us[] = {1000,   2500,   5000,   10000,   25000,   50000,
                                     100000, 250000, 500000, 1000000, 2500000, 5000000};
#define NACK (sizeof ack_le / sizeof *ack_le)

struct slot {
    bool used;
    char tenant[PO_ID_MAX + 1];
    char channel[PO_CHANNEL_SIZE];
    uint64_t out[PO_OUT_COUNT][4];
    uint64_t ack[NACK];
    char cur[PO_TRAFFIC_CURRENCIES][4];
    int64_t volume[PO_TRAFFIC_CURRENCIES];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct slot table[PO_TRAFFIC_KEYS_MAX];
static int used;

static uint64_t hash(const char *tenant, const char *channel)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (const char *p = tenant; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211u;
    h = (h ^ '/') * 1099511628211u;
    for (const char *p = channel; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211u;
    return h;
}

/* The slot of tenant/channel, taken when new; NULL when the table is full
 * (called under mu). The last free slot is kept for PO_TRAFFIC_OTHER. */
static struct slot *find(const char *tenant, const char *channel)
{
    for (size_t i = hash(tenant, channel) % PO_TRAFFIC_KEYS_MAX, n = 0; n < PO_TRAFFIC_KEYS_MAX;
         n++, i = (i + 1) % PO_TRAFFIC_KEYS_MAX) {
        struct slot *s = &table[i];
        if (s->used && strcmp(s->tenant, tenant) == 0 && strcmp(s->channel, channel) == 0)
            return s;
        if (!s->used) {
            if (used >= PO_TRAFFIC_KEYS_MAX - 1 && strcmp(tenant, PO_TRAFFIC_OTHER) != 0)
                return NULL;
            s->used = true;
            used++;
            PO_ASSERT(po_strcpy(s->tenant, sizeof s->tenant, tenant) == PO_OK &&
                      po_strcpy(s->channel, sizeof s->channel, channel) == PO_OK);
            return s;
        }
    }
    return NULL;
}

static struct slot *slot_of(const char *tenant, const char *channel)
{
    if (!channel || strlen(channel) >= PO_CHANNEL_SIZE)
        channel = "unknown";
    struct slot *s = tenant && po_id_valid(tenant, PO_ID_MAX) ? find(tenant, channel) : NULL;
    return s ? s : find(PO_TRAFFIC_OTHER, channel);
}

static void add_volume(struct slot *s, const char *currency, int64_t minor)
{
    for (int c = 0; c < PO_TRAFFIC_CURRENCIES; c++)
        if (!s->cur[c][0] || strcmp(s->cur[c], currency) == 0) {
            memcpy(s->cur[c], currency, 4);
            s->volume[c] += minor;
            return;
        }
}

/* Counts one answer (mu held). */
static void count_locked(const char *tenant, const char *channel, enum po_outcome_kind outcome,
                         int layer, uint64_t micros, int64_t credited_minor, const char *currency)
{
    size_t b = 0;
    while (b < NACK - 1 && micros > ack_le_us[b])
        b++;
    struct slot *s = slot_of(tenant, channel);
    if (s && (unsigned)outcome < PO_OUT_COUNT) {
        s->out[outcome][layer >= 0 && layer <= 3 ? layer : 0]++;
        s->ack[b]++;
        if (credited_minor > 0 && currency && po_currency_valid(currency))
            add_volume(s, currency, credited_minor);
    }
}

void po_traffic_count(const char *tenant, const char *channel, enum po_outcome_kind outcome,
                      int layer, uint64_t micros, int64_t credited_minor, const char *currency)
{
    pthread_mutex_lock(&mu);
    count_locked(tenant, channel, outcome, layer, micros, credited_minor, currency);
    pthread_mutex_unlock(&mu);
}

static void deliveries_reset(void);

void po_traffic_reset(void)
{
    pthread_mutex_lock(&mu);
    memset(table, 0, sizeof table);
    used = 0;
    pthread_mutex_unlock(&mu);
    deliveries_reset();
}

/* Takes the counts (the table is empty afterwards); *n slots in *out. */
static po_err take(struct slot **out, int *n)
{
    pthread_mutex_lock(&mu);
    *n = used;
    *out = used ? malloc((size_t)used * sizeof **out) : NULL;
    if (used && !*out) {
        pthread_mutex_unlock(&mu);
        return PO_ERR_NOMEM;
    }
    for (int i = 0, k = 0; i < PO_TRAFFIC_KEYS_MAX; i++)
        if (table[i].used)
            (*out)[k++] = table[i];
    memset(table, 0, sizeof table);
    used = 0;
    pthread_mutex_unlock(&mu);
    return PO_OK;
}

/* Puts counts back after a flush that failed. */
static void give_back(const struct slot *taken, int n)
{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n; i++) {
        struct slot *s = slot_of(taken[i].tenant, taken[i].channel);
        if (!s)
            continue;
        for (size_t o = 0; o < PO_OUT_COUNT; o++)
            for (size_t l = 0; l < 4; l++)
                s->out[o][l] += taken[i].out[o][l];
        for (size_t b = 0; b < NACK; b++)
            s->ack[b] += taken[i].ack[b];
        for (int c = 0; c < PO_TRAFFIC_CURRENCIES && taken[i].cur[c][0]; c++)
            add_volume(s, taken[i].cur[c], taken[i].volume[c]);
    }
    pthread_mutex_unlock(&mu);
}

/* The kind of outcome o at layer l: "applied", "duplicate:2", … */
static void outcome_kind(size_t o, size_t l, char *buf, size_t cap)
{
    if (o == PO_OUT_DUPLICATE)
        (void)snprintf(buf, cap, "duplicate:%zu", l ? l : 1);
    else
        (void)snprintf(buf, cap, "%s", po_outcome_name((enum po_outcome_kind)o));
}

static po_err upsert(struct po_store *s, const char *bucket, const struct slot *x, const char *node,
                     const char *kind, int64_t n, char *err, size_t errcap)
{
    if (!n)
        return PO_OK;
    return po_store_exec(s,
                         "INSERT INTO traffic (bucket, tenant_id, channel, node, kind, n) VALUES"
                         " (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, bucket, channel, node, kind)"
                         " DO UPDATE SET n = traffic.n + excluded.n",
                         PO_PARAMS(PO_TEXT(bucket), PO_TEXT(x->tenant), PO_TEXT(x->channel),
                                   PO_TEXT(node), PO_TEXT(kind), PO_I64(n)),
                         NULL, NULL, err, errcap);
}

static void bucket_of(int64_t unix_s, char out[PO_TIME_SIZE])
{
    char iso[PO_TIME_SIZE];
    po_clock_iso_ms((unix_s - unix_s % PO_TRAFFIC_BUCKET_S) * 1000, iso, sizeof iso);
    (void)snprintf(out, PO_TIME_SIZE, "%.16s", iso); /* YYYY-MM-DDTHH:MM */
}

/* Runs fn(s, ctx) in a transaction through the door: a work of the
 * committer's next batch when there is a committer (serve: a store with one
 * writer, SQLite, is then never written by two, and the callbacks' batches
 * are not kept waiting on this one's lock), else on s. */
static po_err in_tx(struct po_store *s, struct po_committer *c,
                    po_err (*fn)(struct po_store *s, void *ctx), void *ctx)
{
    struct po_door d = {s, c};
    return po_door_work(&d, "console|history", fn, ctx);
}

struct traffic_work {
    const struct slot *t;
    int n;
    const char *node;
    char bucket[PO_TIME_SIZE], oldest[PO_TIME_SIZE]; /* oldest "": nothing pruned */
    char err[PO_ERRBUF_SIZE];
};

static po_err traffic_rows(struct po_store *s, void *ctx)
{
    struct traffic_work *w = ctx;
    char kind[32];
    po_err rc = PO_OK;
    for (int i = 0; !rc && i < w->n; i++) {
        const struct slot *x = &w->t[i];
        for (size_t o = 0; !rc && o < PO_OUT_COUNT; o++)
            for (size_t l = 0; !rc && l < 4; l++) {
                outcome_kind(o, l, kind, sizeof kind);
                rc = upsert(s, w->bucket, x, w->node, kind, (int64_t)x->out[o][l], w->err,
                            sizeof w->err);
            }
        for (size_t b = 0; !rc && b < NACK; b++) {
            (void)snprintf(kind, sizeof kind, "ack_le:%s", ack_le[b]);
            rc = upsert(s, w->bucket, x, w->node, kind, (int64_t)x->ack[b], w->err, sizeof w->err);
        }
        for (int c = 0; !rc && c < PO_TRAFFIC_CURRENCIES && x->cur[c][0]; c++) {
            (void)snprintf(kind, sizeof kind, "volume:%s", x->cur[c]);
            rc = upsert(s, w->bucket, x, w->node, kind, x->volume[c], w->err, sizeof w->err);
        }
    }
    if (!rc && w->oldest[0])
        rc = po_store_exec(s, "DELETE FROM traffic WHERE bucket < ?", PO_PARAMS(PO_TEXT(w->oldest)),
                           NULL, NULL, w->err, sizeof w->err);
    if (!rc && w->oldest[0]) /* 'YYYY-MM-DDTHH:MM' sorts before any time of that minute */
        rc = po_store_exec(s, "DELETE FROM callback_delivery WHERE at < ?",
                           PO_PARAMS(PO_TEXT(w->oldest)), NULL, NULL, w->err, sizeof w->err);
    return rc;
}

po_err po_traffic_flush(struct po_store *s, struct po_committer *c, const char *node,
                        int64_t now_unix, int keep_days, char *err, size_t errcap)
{
    struct traffic_work w = {.node = node};
    struct slot *t = NULL;
    po_err rc = take(&t, &w.n);
    if (rc)
        return rc;
    w.t = t;
    bucket_of(now_unix, w.bucket);
    if (keep_days > 0)
        bucket_of(now_unix - (int64_t)keep_days * 86400, w.oldest);
    if (w.n || w.oldest[0])
        rc = in_tx(s, c, traffic_rows, &w);
    if (rc) {
        po_errf(err, errcap, "%s", w.err[0] ? w.err : po_err_name(rc));
        give_back(t, w.n);
    }
    free(t);
    return rc;
}

/* ---- the deliveries of verified callbacks ---- */

struct rec {
    int64_t at_ms;
    uint64_t micros;
    unsigned status;
    enum po_outcome_kind outcome;
    int layer;
    enum po_reason reason;
    char tenant[PO_ID_MAX + 1], out_trade_no[PO_ID_MAX + 1], request_id[32];
    char channel[PO_CHANNEL_SIZE];
    char event_type[24];               /* "": none */
    char out_refund_no[PO_ID_MAX + 1]; /* "": none */
};

static struct rec *buffer; /* PO_DELIVERY_BUFFER, allocated at the first record */
static int nbuffer;
static uint64_t dropped;

static void deliveries_reset(void)
{
    pthread_mutex_lock(&mu);
    nbuffer = 0;
    dropped = 0;
    pthread_mutex_unlock(&mu);
}

static bool delivery_ok(const struct po_delivery *d)
{
    return d->tenant && po_id_valid(d->tenant, PO_ID_MAX) && d->request_id && d->channel &&
           strlen(d->channel) < PO_CHANNEL_SIZE &&
           strlen(d->request_id) < sizeof buffer->request_id;
}

/* Keeps one delivery (valid: delivery_ok; mu held). */
static void record_locked(const struct po_delivery *d, int64_t at)
{
    if (!buffer)
        buffer = calloc(PO_DELIVERY_BUFFER, sizeof *buffer);
    if (!buffer || nbuffer == PO_DELIVERY_BUFFER) {
        dropped++;
        return;
    }
    struct rec *r = &buffer[nbuffer++];
    r->at_ms = at;
    r->micros = d->micros;
    r->status = d->status;
    r->outcome = d->outcome;
    r->layer = d->layer;
    r->reason = d->reason;
    PO_ASSERT(po_strcpy(r->tenant, sizeof r->tenant, d->tenant) == PO_OK &&
              po_strcpy(r->channel, sizeof r->channel, d->channel) == PO_OK &&
              po_strcpy(r->request_id, sizeof r->request_id, d->request_id) == PO_OK);
    bool named = d->out_trade_no && po_id_valid(d->out_trade_no, PO_ID_MAX);
    PO_ASSERT(po_strcpy(r->out_trade_no, sizeof r->out_trade_no, named ? d->out_trade_no : "") ==
              PO_OK);
    /* (an event type is one of payonce's own names; anything else is none) */
    if (!d->event_type || po_strcpy(r->event_type, sizeof r->event_type, d->event_type))
        r->event_type[0] = '\0';
    named = d->out_refund_no && po_id_valid(d->out_refund_no, PO_ID_MAX);
    PO_ASSERT(po_strcpy(r->out_refund_no, sizeof r->out_refund_no, named ? d->out_refund_no : "") ==
              PO_OK);
}

void po_deliveries_record(const struct po_delivery *d)
{
    if (!delivery_ok(d))
        return;
    int64_t at = po_clock_now_ms();
    pthread_mutex_lock(&mu);
    record_locked(d, at);
    pthread_mutex_unlock(&mu);
}

void po_traffic_answered(const struct po_delivery *d, int64_t credited_minor, const char *currency,
                         bool verified)
{
    bool keep = verified && delivery_ok(d);
    int64_t at = keep ? po_clock_now_ms() : 0;
    /* a name that is no tenant's (or has no account for the channel) is
     * counted under PO_TRAFFIC_OTHER: made-up names add no rows (the
     * access log names them) */
    const char *tenant = d->reason == PO_R_UNKNOWN_TENANT ? PO_TRAFFIC_OTHER : d->tenant;
    pthread_mutex_lock(&mu);
    count_locked(tenant, d->channel, d->outcome, d->layer, d->micros, credited_minor, currency);
    if (keep)
        record_locked(d, at);
    pthread_mutex_unlock(&mu);
}

uint64_t po_deliveries_dropped(void)
{
    pthread_mutex_lock(&mu);
    uint64_t n = dropped;
    pthread_mutex_unlock(&mu);
    return n;
}

#define DELIVERY_ROWS_PER_STATEMENT 200 /* within PO_ROWSET_ROWS_MAX */
#define DELIVERY_COLUMNS 12

/* recs[0..n) in one set-based INSERT (the statement is prepared once). */
static po_err insert_deliveries(struct po_store *s, const char *node, const struct rec *recs, int n,
                                char *err, size_t errcap)
{
    struct po_param *cells = malloc((size_t)n * DELIVERY_COLUMNS * sizeof *cells);
    char(*at)[PO_TIME_SIZE] = malloc((size_t)n * sizeof *at);
    po_err rc = cells && at ? PO_OK : PO_ERR_NOMEM;
    for (int i = 0; !rc && i < n; i++) {
        const struct rec *r = &recs[i];
        po_clock_iso_ms(r->at_ms, at[i], sizeof at[i]);
        struct po_param *q = &cells[i * DELIVERY_COLUMNS];
        q[0] = PO_TEXT(r->tenant);
        q[1] = PO_TEXT(r->request_id);
        q[2] = PO_TEXT(at[i]);
        q[3] = PO_TEXT(r->channel);
        q[4] = r->out_trade_no[0] ? PO_TEXT(r->out_trade_no) : PO_NULLP;
        q[5] = PO_TEXT(po_outcome_name(r->outcome));
        q[6] = PO_I64(r->layer);
        q[7] = r->reason == PO_R_NONE ? PO_NULLP : PO_TEXT(po_reason_name(r->reason));
        q[8] = PO_I64((int64_t)r->status);
        q[9] = PO_I64((int64_t)r->micros);
        q[10] = r->event_type[0] ? PO_TEXT(r->event_type) : PO_NULLP;
        q[11] = r->out_refund_no[0] ? PO_TEXT(r->out_refund_no) : PO_NULLP;
    }
    if (!rc) {
        struct po_rowset rs = {DELIVERY_COLUMNS, n, cells};
        rc =
            po_store_exec(s,
                          "INSERT INTO callback_delivery (tenant_id, request_id, at, node, channel,"
                          " out_trade_no, outcome, layer, reason, status, micros, event_type,"
                          " out_refund_no) SELECT v.t, v.r, v.a, ?, v.c, v.o, v.oc, v.l, v.re,"
                          " v.st, v.us, v.et, v.rf FROM ?{v: t text, r text, a text, c text, o"
                          " text, oc text, l int, re text, st int, us int, et text, rf text}"
                          /* WHERE true: SQLite reads ON after a FROM as a join without it */
                          " WHERE true ON CONFLICT (tenant_id, request_id) DO NOTHING",
                          PO_PARAMS(PO_TEXT(node), PO_ROWS(&rs)), NULL, NULL, err, errcap);
    }
    free(cells);
    free(at);
    return rc;
}

struct delivery_work {
    const struct rec *recs;
    int n;
    const char *node;
    char err[PO_ERRBUF_SIZE];
};

static po_err delivery_rows(struct po_store *s, void *ctx)
{
    struct delivery_work *w = ctx;
    return insert_deliveries(s, w->node, w->recs, w->n, w->err, sizeof w->err);
}

po_err po_deliveries_flush(struct po_store *s, struct po_committer *c, const char *node, char *err,
                           size_t errcap)
{
    pthread_mutex_lock(&mu);
    int n = nbuffer;
    struct rec *taken = n ? malloc((size_t)n * sizeof *taken) : NULL;
    if (n && !taken) {
        pthread_mutex_unlock(&mu);
        return PO_ERR_NOMEM;
    }
    if (n)
        memcpy(taken, buffer, (size_t)n * sizeof *taken);
    nbuffer = 0;
    pthread_mutex_unlock(&mu);
    if (!n)
        return PO_OK;
    /* a few hundred rows per transaction (or batch of the committer's):
     * the callbacks' commits never wait long behind one */
    po_err rc = PO_OK;
    int i = 0;
    for (; i < n; i += DELIVERY_ROWS_PER_STATEMENT) {
        struct delivery_work w = {
            taken + i, n - i < DELIVERY_ROWS_PER_STATEMENT ? n - i : DELIVERY_ROWS_PER_STATEMENT,
            node, ""};
        if ((rc = in_tx(s, c, delivery_rows, &w)) != PO_OK) {
            po_errf(err, errcap, "%s", w.err[0] ? w.err : po_err_name(rc));
            break;
        }
    }
    if (rc) { /* what was not written goes back in front of what came since, as far as
               * there is room */
        int left = n - i;
        pthread_mutex_lock(&mu);
        int room = PO_DELIVERY_BUFFER - nbuffer, keep = left < room ? left : room;
        memmove(buffer + keep, buffer, (size_t)nbuffer * sizeof *buffer);
        memcpy(buffer, taken + i, (size_t)keep * sizeof *buffer);
        nbuffer += keep;
        dropped += (uint64_t)(left - keep);
        pthread_mutex_unlock(&mu);
    }
    free(taken);
    return rc;
}

/* ---- the console's view ---- */

enum { K_APPLIED, K_DUPLICATE, K_REJECTED, K_FAILED, K_IGNORED, K_COUNT };
static const char *const k_names[K_COUNT] = {"applied", "duplicate", "rejected", "failed",
                                             "ignored"};

struct point {
    uint64_t k[K_COUNT];
    uint64_t ack[NACK];
    json_t *volume; /* {"CNY": minor, …} */
};

/* Adds one (kind, n) to a point. */
static void add_kind(struct point *p, const char *kind, int64_t n)
{
    if (n <= 0)
        return;
    if (strncmp(kind, "ack_le:", 7) == 0) {
        for (size_t b = 0; b < NACK; b++)
            if (strcmp(kind + 7, ack_le[b]) == 0)
                p->ack[b] += (uint64_t)n;
    } else if (strncmp(kind, "volume:", 7) == 0) {
        json_t *v = json_object_get(p->volume, kind + 7);
        json_object_set_new(p->volume, kind + 7, json_integer((v ? json_integer_value(v) : 0) + n));
    } else if (strcmp(kind, "applied") == 0) {
        p->k[K_APPLIED] += (uint64_t)n;
    } else if (strncmp(kind, "duplicate", 9) == 0) {
        p->k[K_DUPLICATE] += (uint64_t)n;
    } else if (strcmp(kind, "rejected") == 0 || strcmp(kind, "suspense") == 0) {
        p->k[K_REJECTED] += (uint64_t)n;
    } else if (strcmp(kind, "retry") == 0 || strcmp(kind, "invalid") == 0) {
        p->k[K_FAILED] += (uint64_t)n;
    } else if (strcmp(kind, "ignored") == 0) {
        p->k[K_IGNORED] += (uint64_t)n;
    }
}

/* The bound (ms) under which fraction q of the acks fell; -1 past 5 s. */
static double quantile_ms(const uint64_t *ack, double q)
{
    uint64_t total = 0, seen = 0;
    for (size_t b = 0; b < NACK; b++)
        total += ack[b];
    uint64_t want = (uint64_t)((double)total * q + 0.999999);
    for (size_t b = 0; total && b < NACK; b++) {
        seen += ack[b];
        if (seen >= want)
            return b < NACK - 1 ? (double)ack_le_us[b] / 1000.0 : -1;
    }
    return 0;
}

static json_t *point_json(const struct point *p)
{
    json_t *o = json_object();
    uint64_t acks = 0;
    for (size_t b = 0; b < NACK; b++)
        acks += p->ack[b];
    for (int k = 0; k < K_COUNT; k++)
        json_object_set_new(o, k_names[k], json_integer((json_int_t)p->k[k]));
    json_object_set_new(o, "acks", json_integer((json_int_t)acks));
    json_object_set_new(o, "ack_p50_ms", acks ? json_real(quantile_ms(p->ack, 0.5)) : json_null());
    json_object_set_new(o, "ack_p99_ms", acks ? json_real(quantile_ms(p->ack, 0.99)) : json_null());
    json_object_set_new(o, "volume", json_incref(p->volume));
    return o;
}

/* A bucket's time ('YYYY-MM-DDTHH:MM', UTC) in Unix seconds. */
static bool bucket_time(const char *b, int64_t *out)
{
    char full[PO_TIME_SIZE];
    return b && strlen(b) == 16 && po_fmt(full, sizeof full, "%s:00Z", b) == PO_OK &&
           po_time_parse(full, out) == PO_OK;
}

/* The oldest bucket the table holds for tenant (NULL: every tenant), in
 * Unix seconds; *found false when it holds none. One index probe: the
 * primary key's for a tenant, traffic_bucket's for all. */
static po_err oldest_bucket(struct po_store *s, const char *tenant, int64_t *out, bool *found)
{
    struct po_rows r;
    po_err rc = tenant ? po_store_exec(s, "SELECT MIN(bucket) FROM traffic WHERE tenant_id = ?",
                                       PO_PARAMS(PO_TEXT(tenant)), &r, NULL, NULL, 0)
                       : po_store_exec(s, "SELECT MIN(bucket) FROM traffic", PO_NO_PARAMS, &r, NULL,
                                       NULL, 0);
    if (rc)
        return rc;
    *found = r.nrows == 1 && bucket_time(po_rows_get(&r, 0, 0), out);
    po_rows_free(&r);
    return PO_OK;
}

/* Shortest fitted window: a few points even when the data is minutes old
 * (the points before the oldest bucket are the console's to mark). */
#define FIT_MIN_S 900

po_err po_view_traffic(struct po_store *s, const char *tenant, int hours, bool fit,
                       int64_t now_unix, json_t **out)
{
    if (hours < 1 || hours > 720)
        return PO_ERR_INVALID;
    int64_t oldest = 0;
    bool have = false;
    po_err rc = oldest_bucket(s, tenant, &oldest, &have);
    if (rc)
        return rc;
    /* The window: the last `hours`, or (fit) the data's own span within them. */
    int64_t span = (int64_t)hours * 3600;
    if (fit && have && now_unix - oldest < span)
        span = now_unix - oldest < FIT_MIN_S ? FIT_MIN_S : now_unix - oldest;
    /* points: 5 minutes (16 characters of the bucket, minutes rounded down
     * in C) up to 12 hours, hours (13 characters) beyond */
    bool fine = span <= 12 * 3600;
    int64_t step = fine ? PO_TRAFFIC_BUCKET_S : 3600;
    int64_t last = now_unix - now_unix % step,
            first = span == (int64_t)hours * 3600 /* the last `hours`, as many points as ever */
                        ? last - (span / step - 1) * step
                        : (now_unix - span) - (now_unix - span) % step; /* from the oldest on */
    int npoints = (int)((last - first) / step) + 1;
    char from[PO_TIME_SIZE];
    bucket_of(first, from);
    struct point *pts = calloc((size_t)npoints, sizeof *pts);
    if (!pts)
        return PO_ERR_NOMEM;
    for (int i = 0; i < npoints; i++)
        pts[i].volume = json_object();
    struct po_rows r = {0};
    rc = po_store_exec(
        s,
        "SELECT bucket, tenant_id, channel, kind, SUM(n) FROM traffic WHERE"
        " bucket >= ? AND (? = '' OR tenant_id = ?) GROUP BY bucket,"
        " tenant_id, channel, kind",
        PO_PARAMS(PO_TEXT(from), PO_TEXT(tenant ? tenant : ""), PO_TEXT(tenant ? tenant : "")), &r,
        NULL, NULL, 0);
    json_t *by = json_object(); /* "tenant\tchannel" → point */
    struct point *pairs = rc ? NULL : calloc((size_t)r.nrows + 1, sizeof *pairs);
    int npairs = 0;
    if (!rc && !pairs)
        rc = PO_ERR_NOMEM;
    for (int i = 0; !rc && i < r.nrows; i++) {
        const char *kind = po_rows_get(&r, i, 3);
        int64_t n = 0, t = 0;
        if (po_rows_i64(&r, i, 4, &n) || !bucket_time(po_rows_get(&r, i, 0), &t))
            continue;
        int64_t at = t - ((t % step) + step) % step;
        if (at >= first && at <= last)
            add_kind(&pts[(at - first) / step], kind, n);
        char key[PO_ID_MAX + PO_CHANNEL_SIZE + 2];
        (void)snprintf(key, sizeof key, "%s\t%s", po_rows_get(&r, i, 1), po_rows_get(&r, i, 2));
        json_t *ix = json_object_get(by, key);
        if (!ix) {
            ix = json_integer(npairs);
            pairs[npairs++].volume = json_object();
            json_object_set_new(by, key, ix);
        }
        add_kind(&pairs[json_integer_value(ix)], kind, n);
    }
    po_rows_free(&r);
    json_t *series = json_array(), *rows = json_array();
    for (int i = 0; i < npoints; i++) {
        char at[PO_TIME_SIZE];
        po_clock_iso_ms((first + (int64_t)i * step) * 1000, at, sizeof at);
        json_t *p = point_json(&pts[i]);
        json_object_set_new(p, "at", json_string(at));
        json_array_append_new(series, p);
        json_decref(pts[i].volume);
    }
    const char *key;
    json_t *ix;
    json_object_foreach(by, key, ix)
    {
        const char *tab = strchr(key, '\t');
        json_t *p = point_json(&pairs[json_integer_value(ix)]);
        json_object_set_new(p, "tenant", json_stringn(key, (size_t)(tab - key)));
        json_object_set_new(p, "channel", json_string(tab + 1));
        json_array_append_new(rows, p);
    }
    for (int i = 0; i < npairs; i++)
        json_decref(pairs[i].volume);
    free(pairs);
    free(pts);
    json_decref(by);
    if (rc) {
        json_decref(series);
        json_decref(rows);
        return rc;
    }
    char oldest_at[PO_TIME_SIZE];
    po_clock_iso_ms(oldest * 1000, oldest_at, sizeof oldest_at); /* as the points' times */
    *out = json_pack("{s:i, s:b, s:I, s:o, s:o, s:o}", "hours", (int)((span + 3599) / 3600), "fit",
                     fit, "step_s", (json_int_t)step, "first_at",
                     have ? json_string(oldest_at) : json_null(), "series", series,
                     "by_tenant_channel", rows);
    return *out ? PO_OK : PO_ERR_NOMEM;
}

/* ---- the callback record: sealing and retention ---- */

struct seal_work {
    const unsigned char *key; /* the chain's, or NULL */
    int64_t n;
    char before[PO_TIME_SIZE]; /* prune: "" none */
    char err[PO_ERRBUF_SIZE];
};

static po_err seal_rows(struct po_store *s, void *ctx)
{
    struct seal_work *w = ctx;
    return po_audit_seal(s, w->key, PO_SEAL_WORK, &w->n, w->err, sizeof w->err);
}

static po_err prune_rows(struct po_store *s, void *ctx)
{
    struct seal_work *w = ctx;
    return po_audit_prune(s, w->key, w->before, &w->n, w->err, sizeof w->err);
}

po_err po_records_seal(struct po_store *s, struct po_committer *c, const unsigned char *master,
                       int64_t now_unix, int keep_days, bool prune, int64_t *out_sealed,
                       int64_t *out_pruned, char *err, size_t errcap)
{
    int64_t sealed = 0, pruned = 0;
    po_err rc = PO_OK;
    unsigned char key[PO_AUDIT_KEY_LEN];
    if (master)
        po_audit_key(master, key);
    for (int k = 0; !rc && k < PO_SEAL_WORKS_MAX; k++) {
        struct seal_work w = {.key = master ? key : NULL};
        rc = in_tx(s, c, seal_rows, &w);
        if (rc)
            po_errf(err, errcap, "sealing: %s", w.err[0] ? w.err : po_err_name(rc));
        sealed += w.n;
        if (w.n < PO_SEAL_WORK)
            break;
    }
    if (!rc && prune && keep_days > 0) {
        struct seal_work w = {.key = master ? key : NULL};
        po_clock_iso_ms((now_unix - (int64_t)keep_days * 86400) * 1000, w.before, sizeof w.before);
        rc = in_tx(s, c, prune_rows, &w);
        if (rc)
            po_errf(err, errcap, "pruning: %s", w.err[0] ? w.err : po_err_name(rc));
        pruned = w.n;
    }
    po_secure_zero(key, sizeof key);
    if (out_sealed)
        *out_sealed = sealed;
    if (out_pruned)
        *out_pruned = pruned;
    return rc;
}
