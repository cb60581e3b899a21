/*
 * webhook_delivery.c — tenant events delivered to the tenants' own
 * endpoints (issue 12, docs/webhooks.md; the endpoints are in
 * webhook_endpoints.c).
 *
 * The engine writes outbox_event rows in the transactions that make the
 * effects. Here:
 *   fan-out    each new event becomes one webhook_delivery per endpoint of
 *              its tenant whose filter takes its type, in small
 *              transactions, within the tenant's pending limit
 *   claim      due deliveries whose earlier events of the same order (same
 *              endpoint) are settled, round-robin across tenants, at most
 *              `per_endpoint` in flight per endpoint and a tenant's share
 *              of the senders while another tenant has work; a claim token
 *              with an expiry, so two gateways never send the same attempt
 *              at once
 *   deliver    a POST signed like Stripe's webhooks, no database connection
 *              held across it, through the egress policy; 2xx is
 *              delivered, anything else or no answer is retried with
 *              exponential backoff and jitter until max_age, then dead
 *              (with an alert); redrive puts dead ones back
 * Every attempt is recorded (webhook_attempt) with its status and latency.
 */
#include "webhook.h"
#include "webhook_int.h"

#include "../../engine/alert.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLAIM_MAX 64 /* due deliveries looked at per round; senders at most CLAIM_MAX / 2 */
/* Fan-out: events made into deliveries per round, and per transaction (at
 * most FAN_TX_EVENTS x PO_WEBHOOK_ENDPOINTS_MAX rows: SQLite's one write
 * lock is held for a few milliseconds, never for a tenant's whole backlog). */
#define FAN_ROUND_EVENTS 256
#define FAN_TX_EVENTS 32

/* ---- the worker ---- */

struct job {
    char tenant[PO_ID_MAX + 1], event_id[PO_EVENT_ID_SIZE], endpoint_id[PO_ID_MAX + 1];
    char token[40];
    int64_t attempts;
    int64_t until_ms; /* the claim's expiry: the result must be recorded before */
};

struct po_webhooks {
    struct po_webhooks_cfg cfg;
    struct po_store_pool *pool;
    pthread_t claimer;
    pthread_t *senders;
    int nsenders;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    /* claimed, not yet sent; and what is being sent */
    struct job queue[CLAIM_MAX];
    int nqueue;
    struct job inflight[CLAIM_MAX];
    bool busy[CLAIM_MAX];
    int ninflight;
    /* Round-robin: the next round's look starts after this tenant. */
    char rr_tenant[PO_ID_MAX + 1];
    int64_t backlog_warned_ms; /* the last "tenant at its pending limit" line */
    atomic_uint_fast64_t delivered, failed, dead;
    atomic_int_fast64_t depth, oldest_ms;
};

/* In flight or queued for this endpoint / tenant (under mu). */
static int held(const struct po_webhooks *w, const char *tenant, const char *endpoint)
{
    int n = 0;
    for (int i = 0; i < w->nqueue; i++)
        n += strcmp(w->queue[i].tenant, tenant) == 0 &&
             (!endpoint || strcmp(w->queue[i].endpoint_id, endpoint) == 0);
    for (int i = 0; i < CLAIM_MAX; i++)
        n += w->busy[i] && strcmp(w->inflight[i].tenant, tenant) == 0 &&
             (!endpoint || strcmp(w->inflight[i].endpoint_id, endpoint) == 0);
    return n;
}

/* Makes new events into deliveries, fairly across tenants: each round
 * takes every tenant's oldest events in turn (its 1st, then everyone's
 * 2nd, …), never more than keep the tenant's pending deliveries within
 * pending_max (the rest wait, committed and readable at /v1/events, until
 * its endpoints catch up), and commits in small transactions. */
static po_err fan_out(struct po_webhooks *w, struct po_store *s, const char *now, char *err,
                      size_t errcap)
{
    struct po_rows r, full;
    po_err rc = PO_OK;
    /* Which tenants are at their limit is looked up only when the warn
     * line may be written (once a minute), not on every round. */
    if (po_clock_now_ms() - w->backlog_warned_ms > 60000)
        rc = po_store_exec(s,
                           "SELECT tenant_id FROM webhook_delivery WHERE state = 'pending'"
                           " GROUP BY tenant_id HAVING COUNT(*) >= ?",
                           PO_PARAMS(PO_I64(w->cfg.pending_max)), &full, NULL, err, errcap);
    else
        full.nrows = -1;
    if (rc)
        return rc;
    if (full.nrows > 0) {
        w->backlog_warned_ms = po_clock_now_ms();
        po_log(PO_LOG_WARN,
               "tenant %s: %" PRId64 " webhook deliveries pending, its limit"
               " (webhook-pending-max): its new events wait until its endpoints catch up"
               "%s",
               po_rows_get(&full, 0, 0), w->cfg.pending_max,
               full.nrows > 1 ? " (and other tenants)" : "");
    }
    if (full.nrows >= 0)
        po_rows_free(&full);
    /* A tenant takes at most as many events as its room below pending_max
     * allows, counting one delivery per live endpoint. */
    rc = po_store_exec(
        s,
        "SELECT x.tenant_id, x.event_id FROM (SELECT tenant_id, event_id, created_at,"
        " ROW_NUMBER() OVER (PARTITION BY tenant_id ORDER BY created_at, event_id) AS rn FROM"
        " outbox_event WHERE fanned = 0) x LEFT JOIN (SELECT tenant_id, COUNT(*) AS n FROM"
        " webhook_delivery WHERE state = 'pending' GROUP BY tenant_id) p ON p.tenant_id ="
        " x.tenant_id LEFT JOIN (SELECT tenant_id, COUNT(*) AS n FROM webhook_endpoint WHERE"
        " removed_at IS NULL GROUP BY tenant_id) e ON e.tenant_id = x.tenant_id WHERE x.rn <= ?"
        " AND x.rn * COALESCE(e.n, 0) <= ? - COALESCE(p.n, 0) ORDER BY x.rn, x.created_at,"
        " x.tenant_id LIMIT ?",
        PO_PARAMS(PO_I64(FAN_ROUND_EVENTS), PO_I64(w->cfg.pending_max), PO_I64(FAN_ROUND_EVENTS)),
        &r, NULL, err, errcap);
    if (rc)
        return rc;
    struct po_param cells[FAN_TX_EVENTS * 2];
    for (int at = 0; !rc && at < r.nrows; at += FAN_TX_EVENTS) {
        int n = r.nrows - at < FAN_TX_EVENTS ? r.nrows - at : FAN_TX_EVENTS;
        for (int i = 0; i < n; i++) {
            cells[i * 2] = PO_TEXT(po_rows_get(&r, at + i, 0));
            cells[i * 2 + 1] = PO_TEXT(po_rows_get(&r, at + i, 1));
        }
        struct po_rowset rs = {2, n, cells};
        rc = po_store_begin(s, err, errcap);
        if (!rc)
            rc = po_store_exec(
                s,
                "INSERT INTO webhook_delivery (tenant_id, event_id, endpoint_id, object_id,"
                " obj_seq, created_at, state, attempts, next_at, updated_at) SELECT e.tenant_id,"
                " e.event_id, w.endpoint_id, e.object_id, e.obj_seq, e.created_at, 'pending', 0,"
                " ?, ? FROM ?{v: t text, id text} JOIN outbox_event e ON e.tenant_id = v.t AND"
                " e.event_id = v.id JOIN webhook_endpoint w ON w.tenant_id = e.tenant_id AND"
                " w.removed_at IS NULL AND (w.events = '*' OR (',' || w.events || ',') LIKE"
                " ('%,' || e.type || ',%')) WHERE true ON CONFLICT (tenant_id, event_id,"
                " endpoint_id) DO NOTHING",
                PO_PARAMS(PO_TEXT(now), PO_TEXT(now), PO_ROWS(&rs)), NULL, NULL, err, errcap);
        /* only rows still unmarked (another node may have marked them since
         * they were read); `+fanned`: not by the unfanned events' index,
         * which SQLite took to scan every unmarked event for each of the
         * 32 (0.35 s a transaction with 3,000 waiting, other writers kept
         * out) — by the key, as the rows are named */
        if (!rc)
            rc = po_store_exec(s,
                               "UPDATE outbox_event SET fanned = 1 FROM ?{v: t text, id text}"
                               " WHERE outbox_event.tenant_id = v.t AND outbox_event.event_id ="
                               " v.id AND +outbox_event.fanned = 0",
                               PO_PARAMS(PO_ROWS(&rs)), NULL, NULL, err, errcap);
        if (!rc)
            rc = po_store_commit(s, err, errcap);
        else
            po_store_rollback(s);
    }
    po_rows_free(&r);
    return rc;
}

/* Due deliveries to live endpoints whose earlier events of the same order
 * are settled (delivered or dead) for this endpoint and fanned out; at
 * most per_endpoint of an endpoint and `?` of a tenant, and every
 * tenant's first before anyone's second (round-robin, starting after the
 * tenant the last round started with): one tenant's backlog, however
 * large or old, never hides another tenant's due delivery. */
static const char DUE_SQL[] =
    "SELECT tenant_id, event_id, endpoint_id, attempts FROM (SELECT tenant_id, event_id,"
    " endpoint_id, attempts, ROW_NUMBER() OVER (PARTITION BY tenant_id ORDER BY next_at,"
    " event_id, endpoint_id) AS tn FROM (SELECT d.tenant_id, d.event_id, d.endpoint_id,"
    " d.attempts, d.next_at, ROW_NUMBER() OVER (PARTITION BY d.tenant_id, d.endpoint_id ORDER BY"
    " d.next_at, d.event_id) AS ep FROM webhook_delivery d JOIN webhook_endpoint w ON"
    " w.tenant_id = d.tenant_id AND w.endpoint_id = d.endpoint_id AND w.removed_at IS NULL"
    " WHERE d.state = 'pending' AND d.next_at <= ? AND (d.claimed_until IS NULL OR"
    " d.claimed_until < ?) AND NOT EXISTS (SELECT 1 FROM webhook_delivery p WHERE"
    " p.tenant_id = d.tenant_id AND p.endpoint_id = d.endpoint_id AND p.object_id ="
    " d.object_id AND p.obj_seq > 0 AND p.obj_seq < d.obj_seq AND p.state = 'pending')"
    " AND NOT EXISTS (SELECT 1 FROM outbox_event o WHERE o.tenant_id = d.tenant_id AND"
    " o.object_id = d.object_id AND o.fanned = 0 AND o.obj_seq > 0 AND o.obj_seq < d.obj_seq)"
    ") a WHERE ep <= ?) b WHERE tn <= ? ORDER BY tn, CASE WHEN tenant_id > ? THEN 0 ELSE 1 END,"
    " tenant_id LIMIT ?";

/* How many of the senders one tenant may hold: all of them while it is
 * the only tenant with work (work-conserving), else an equal share of
 * the senders, at most per_tenant and at least one. */
static int tenant_cap(const struct po_webhooks *w, int active)
{
    if (active <= 1)
        return w->cfg.senders;
    int share = w->cfg.senders / active;
    share = share < w->cfg.per_tenant ? share : w->cfg.per_tenant;
    return share > 0 ? share : 1;
}

static void count_tenant(const char **seen, int *n, const char *t)
{
    for (int k = 0; k < *n; k++)
        if (strcmp(seen[k], t) == 0)
            return;
    seen[(*n)++] = t;
}

/* The distinct tenants among the due rows and the work held (under mu). */
static int active_tenants(const struct po_webhooks *w, const struct po_rows *r)
{
    const char *seen[CLAIM_MAX * 3];
    int n = 0;
    for (int i = 0; i < r->nrows; i++)
        count_tenant(seen, &n, po_rows_get(r, i, 0));
    for (int i = 0; i < w->nqueue; i++)
        count_tenant(seen, &n, w->queue[i].tenant);
    for (int i = 0; i < CLAIM_MAX; i++)
        if (w->busy[i])
            count_tenant(seen, &n, w->inflight[i].tenant);
    return n;
}

static po_err claim(struct po_webhooks *w, struct po_store *s, char *err, size_t errcap)
{
    char now[PO_TIME_SIZE], until[PO_TIME_SIZE], rr[PO_ID_MAX + 1];
    int64_t t = po_clock_now_ms();
    po_clock_iso_ms(t, now, sizeof now);
    /* A worker that dies mid-attempt (kill -9) leaves its claim to expire:
     * twice the attempt's timeout, and a second. */
    int64_t until_ms = t + 2 * w->cfg.timeout_ms + 1000;
    po_clock_iso_ms(until_ms, until, sizeof until);
    /* Only as many as there are idle senders: a claimed delivery waits in
     * no queue behind another tenant's. */
    pthread_mutex_lock(&w->mu);
    int room = w->cfg.senders - w->nqueue - w->ninflight;
    PO_ASSERT(po_strcpy(rr, sizeof rr, w->rr_tenant) == PO_OK);
    pthread_mutex_unlock(&w->mu);
    if (room <= 0)
        return PO_OK;
    /* The look needs no transaction (an idle poll never takes SQLite's
     * write lock from the committer); the claim's UPDATE re-checks that
     * the row is still free, so of two gateways at once only one claims
     * it (on PostgreSQL the second UPDATE waits for the first and then
     * finds the claim taken). */
    struct po_rows r;
    po_err rc = po_store_exec(s, DUE_SQL,
                              PO_PARAMS(PO_TEXT(now), PO_TEXT(now), PO_I64(w->cfg.per_endpoint),
                                        PO_I64(w->cfg.senders), PO_TEXT(rr), PO_I64(CLAIM_MAX)),
                              &r, NULL, err, errcap);
    if (rc)
        return rc;
    struct job took[CLAIM_MAX];
    int ntook = 0;
    pthread_mutex_lock(&w->mu);
    int cap = tenant_cap(w, active_tenants(w, &r));
    for (int i = 0; i < r.nrows && ntook < room; i++) {
        struct job j;
        memset(&j, 0, sizeof j);
        if (po_strcpy(j.tenant, sizeof j.tenant, po_rows_get(&r, i, 0)) ||
            po_strcpy(j.event_id, sizeof j.event_id, po_rows_get(&r, i, 1)) ||
            po_strcpy(j.endpoint_id, sizeof j.endpoint_id, po_rows_get(&r, i, 2)) ||
            po_rows_i64(&r, i, 3, &j.attempts))
            continue;
        j.until_ms = until_ms;
        /* Bulkheads: one endpoint, one tenant never takes more than its
         * share of the senders while another tenant has work. */
        int ep = held(w, j.tenant, j.endpoint_id), tn = held(w, j.tenant, NULL);
        for (int k = 0; k < ntook; k++) {
            ep += strcmp(took[k].tenant, j.tenant) == 0 &&
                  strcmp(took[k].endpoint_id, j.endpoint_id) == 0;
            tn += strcmp(took[k].tenant, j.tenant) == 0;
        }
        if (ep >= w->cfg.per_endpoint || tn >= cap)
            continue;
        took[ntook++] = j;
    }
    if (ntook > 0)
        PO_ASSERT(po_strcpy(w->rr_tenant, sizeof w->rr_tenant, took[0].tenant) == PO_OK);
    pthread_mutex_unlock(&w->mu);
    po_rows_free(&r);
    if (ntook == 0)
        return PO_OK;
    if ((rc = po_store_begin(s, err, errcap)))
        return rc;
    for (int k = 0; !rc && k < ntook; k++) {
        unsigned char rnd[12];
        rc = po_random(rnd, sizeof rnd);
        for (size_t i = 0; !rc && i < sizeof rnd; i++)
            (void)snprintf(took[k].token + 2 * i, 3, "%02x", rnd[i]);
        int64_t changed = 0;
        if (!rc)
            rc = po_store_exec(s,
                               "UPDATE webhook_delivery SET claim_token = ?, claimed_until = ?"
                               " WHERE tenant_id = ? AND event_id = ? AND endpoint_id = ? AND"
                               " state = 'pending' AND (claimed_until IS NULL OR"
                               " claimed_until < ?)",
                               PO_PARAMS(PO_TEXT(took[k].token), PO_TEXT(until),
                                         PO_TEXT(took[k].tenant), PO_TEXT(took[k].event_id),
                                         PO_TEXT(took[k].endpoint_id), PO_TEXT(now)),
                               NULL, &changed, err, errcap);
        if (!rc && changed == 0)
            took[k].token[0] = '\0'; /* another worker has it */
    }
    if (!rc)
        rc = po_store_commit(s, err, errcap);
    else
        po_store_rollback(s);
    if (rc)
        return rc;
    pthread_mutex_lock(&w->mu);
    for (int k = 0; k < ntook; k++)
        if (took[k].token[0] && w->nqueue < CLAIM_MAX)
            w->queue[w->nqueue++] = took[k];
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return PO_OK;
}

/* The metrics' view of the outbox: deliveries pending, oldest one's age. */
static void measure(struct po_webhooks *w, struct po_store *s)
{
    struct po_rows r;
    if (po_store_exec(s,
                      "SELECT COUNT(*), MIN(created_at) FROM webhook_delivery WHERE"
                      " state = 'pending'",
                      PO_NO_PARAMS, &r, NULL, NULL, 0))
        return;
    int64_t n = 0;
    if (r.nrows == 1 && po_rows_i64(&r, 0, 0, &n) == PO_OK) {
        const char *oldest = po_rows_get(&r, 0, 1);
        atomic_store(&w->depth, n);
        atomic_store(&w->oldest_ms,
                     oldest ? po_clock_now_ms() - po_clock_unix_of(oldest) * 1000 : 0);
    }
    po_rows_free(&r);
}

static void *claimer_main(void *arg)
{
    struct po_webhooks *w = arg;
    struct po_store *s = NULL;
    char err[PO_ERRBUF_SIZE] = "";
    int64_t last_measure = 0;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        pthread_mutex_unlock(&w->mu);
        char now[PO_TIME_SIZE];
        po_clock_iso_ms(po_clock_now_ms(), now, sizeof now);
        po_err rc = s ? PO_OK : po_store_open(w->cfg.db_url, &s, err, sizeof err);
        if (!rc)
            rc = fan_out(w, s, now, err, sizeof err);
        if (!rc)
            rc = claim(w, s, err, sizeof err);
        if (!rc && po_clock_now_ms() - last_measure > 1000) {
            measure(w, s);
            last_measure = po_clock_now_ms();
        }
        if (rc) {
            po_log(PO_LOG_WARN, "webhooks: %s", err);
            po_store_close(s); /* a fresh connection next round */
            s = NULL;
        }
        pthread_mutex_lock(&w->mu);
        struct timespec until = po_deadline_us((int64_t)w->cfg.poll_ms * 1000);
        if (!w->stop)
            (void)pthread_cond_timedwait(&w->cv, &w->mu, &until);
    }
    pthread_mutex_unlock(&w->mu);
    po_store_close(s);
    return NULL;
}

/* What one attempt needs, read with a pooled connection released before
 * the POST. */
struct shot {
    char url[PO_URL_MAX + 1];
    char secret[PO_WEBHOOK_SECRET_SIZE];
    char *body;
    int64_t created;
};

static po_err load_shot(struct po_webhooks *w, struct po_store *s, const struct job *j,
                        struct shot *out, char *err, size_t errcap)
{
    struct po_rows r;
    po_err rc = po_store_exec(
        s,
        "SELECT e.type, e.payload, e.created_at, w.url, w.secret FROM outbox_event e JOIN"
        " webhook_endpoint w ON w.tenant_id = e.tenant_id AND w.endpoint_id = ? AND"
        " w.removed_at IS NULL WHERE e.tenant_id = ? AND e.event_id = ?",
        PO_PARAMS(PO_TEXT(j->endpoint_id), PO_TEXT(j->tenant), PO_TEXT(j->event_id)), &r, NULL, err,
        errcap);
    if (rc)
        return rc;
    if (r.nrows != 1) {
        po_rows_free(&r);
        po_errf(err, errcap, "event %s or endpoint %s is gone (removed?)", j->event_id,
                j->endpoint_id);
        return PO_ERR_NOT_FOUND;
    }
    out->created = po_clock_unix_of(po_rows_get(&r, 0, 2));
    rc = po_strcpy(out->url, sizeof out->url, po_rows_get(&r, 0, 3));
    if (!rc)
        rc = po_webhook_open_secret(w->cfg.master, j->tenant, j->endpoint_id, po_rows_get(&r, 0, 4),
                                    out->secret);
    if (!rc)
        rc = po_event_envelope(j->event_id, po_rows_get(&r, 0, 0), po_rows_get(&r, 0, 2), j->tenant,
                               po_rows_get(&r, 0, 1), &out->body);
    if (rc && rc != PO_ERR_NOMEM)
        po_errf(err, errcap, "endpoint %s: its secret cannot be opened (master key?)",
                j->endpoint_id);
    po_rows_free(&r);
    return rc;
}

/* The next attempt's delay: base * 2^(n-1), capped, +-20% jitter. */
static int64_t backoff_ms(const struct po_webhooks_cfg *c, int64_t attempts)
{
    int64_t d = c->retry_base_ms;
    for (int64_t i = 1; i < attempts && d < c->retry_cap_ms; i++)
        d *= 2;
    if (d > c->retry_cap_ms)
        d = c->retry_cap_ms;
    uint32_t r = 0;
    if (po_random(&r, sizeof r) == PO_OK)
        d = d * 8 / 10 + (int64_t)(r % (uint32_t)(d * 4 / 10 + 1));
    return d;
}

static po_err raise(struct po_store *s, const struct job *j, const char *akey, const char *reason,
                    const char *detail, const char *now, char *err, size_t errcap)
{
    struct po_alert_new a = {.tenant = j->tenant,
                             .key = akey,
                             .reason = reason,
                             .idem_key = j->event_id,
                             .event_type = "WEBHOOK",
                             .source = "webhook",
                             .out_trade_no = NULL,
                             .amount = 0,
                             .currency = "",
                             .detail = detail};
    return po_alert_raise(s, &a, now, NULL, err, errcap);
}

/* A dead letter's alert, and the endpoint's once it has been failing for
 * alert_after_s. */
static po_err failing_alert(struct po_webhooks *w, struct po_store *s, const struct job *j,
                            bool dead, const char *error, long status, const char *now, char *err,
                            size_t errcap)
{
    char akey[PO_KEY_SIZE], detail[512];
    po_err rc = PO_OK;
    if (dead) {
        PO_ASSERT(po_fmt(akey, sizeof akey, "webhook_dead|%s|%s", j->endpoint_id, j->event_id) ==
                  PO_OK);
        (void)snprintf(detail, sizeof detail,
                       "event %s to endpoint %s is dead after %" PRId64
                       " attempts (last: %ld %.80s); payonce webhook redrive sends it again",
                       j->event_id, j->endpoint_id, j->attempts + 1, status, error ? error : "");
        rc = raise(s, j, akey, po_reason_name(PO_R_WEBHOOK_DEAD_LETTER), detail, now, err, errcap);
    }
    struct po_rows r;
    if (!rc)
        rc = po_store_exec(s,
                           "SELECT failing_since FROM webhook_endpoint WHERE tenant_id = ? AND"
                           " endpoint_id = ?",
                           PO_PARAMS(PO_TEXT(j->tenant), PO_TEXT(j->endpoint_id)), &r, NULL, err,
                           errcap);
    if (rc)
        return rc;
    const char *since = r.nrows == 1 ? po_rows_get(&r, 0, 0) : NULL;
    if (since && po_clock_unix_of(now) - po_clock_unix_of(since) >= w->cfg.alert_after_s) {
        PO_ASSERT(po_fmt(akey, sizeof akey, "webhook_failing|%s|%s", j->endpoint_id, since) ==
                  PO_OK);
        (void)snprintf(detail, sizeof detail,
                       "endpoint %s has failed every delivery since %s (last: %ld %.80s)",
                       j->endpoint_id, since, status, error ? error : "");
        rc = raise(s, j, akey, po_reason_name(PO_R_WEBHOOK_FAILING), detail, now, err, errcap);
    }
    po_rows_free(&r);
    return rc;
}

/* The attempt's result, if this worker still holds the claim. */
static po_err record(struct po_webhooks *w, struct po_store *s, const struct job *j,
                     int64_t created, long status, int64_t latency, const char *error,
                     bool *out_dead, char *err, size_t errcap)
{
    bool ok = status >= 200 && status < 300;
    int64_t t = po_clock_now_ms(), attempt = j->attempts + 1;
    bool dead = !ok && t - created * 1000 >= (int64_t)w->cfg.max_age_s * 1000;
    char now[PO_TIME_SIZE], next[PO_TIME_SIZE];
    po_clock_iso_ms(t, now, sizeof now);
    po_clock_iso_ms(t + backoff_ms(&w->cfg, attempt), next, sizeof next);
    *out_dead = false;
    /* Locks in the order a removal takes them (po_webhook_remove: the
     * endpoint, then its deliveries), so the two never deadlock: first the
     * endpoint's failing streak (its start, or its end on a success), then
     * the delivery. A claim that is no longer ours (it expired and another
     * sender took it) changes nothing: the transaction is rolled back. */
    po_err rc = po_store_begin(s, err, errcap);
    int64_t changed = 0;
    if (!rc && ok)
        rc = po_store_exec(s,
                           "UPDATE webhook_endpoint SET failing_since = NULL WHERE tenant_id = ?"
                           " AND endpoint_id = ?",
                           PO_PARAMS(PO_TEXT(j->tenant), PO_TEXT(j->endpoint_id)), NULL, NULL, err,
                           errcap);
    else if (!rc)
        rc = po_store_exec(s,
                           "UPDATE webhook_endpoint SET failing_since = COALESCE(failing_since, ?)"
                           " WHERE tenant_id = ? AND endpoint_id = ?",
                           PO_PARAMS(PO_TEXT(now), PO_TEXT(j->tenant), PO_TEXT(j->endpoint_id)),
                           NULL, NULL, err, errcap);
    if (!rc)
        rc = po_store_exec(
            s,
            "UPDATE webhook_delivery SET state = ?, attempts = ?, next_at = ?,"
            " last_status = ?, last_error = ?, claim_token = NULL,"
            " claimed_until = NULL, updated_at = ? WHERE tenant_id = ? AND"
            " event_id = ? AND endpoint_id = ? AND claim_token = ?",
            PO_PARAMS(PO_TEXT(ok     ? "delivered"
                              : dead ? "dead"
                                     : "pending"),
                      PO_I64(attempt), PO_TEXT(next), status ? PO_I64(status) : PO_NULLP,
                      error && *error ? PO_TEXT(error) : PO_NULLP, PO_TEXT(now), PO_TEXT(j->tenant),
                      PO_TEXT(j->event_id), PO_TEXT(j->endpoint_id), PO_TEXT(j->token)),
            NULL, &changed, err, errcap);
    if (!rc && changed != 1) {
        po_store_rollback(s);
        return PO_OK;
    }
    if (!rc)
        /* Numbered after every attempt recorded before (a redrive starts
         * the delivery's count again; its history goes on). The claim,
         * checked above, makes this worker the only writer. */
        rc = po_store_exec(
            s,
            "INSERT INTO webhook_attempt (tenant_id, event_id, endpoint_id,"
            " attempt, at, status_code, latency_ms, error) SELECT ?, ?, ?,"
            " COALESCE(MAX(attempt), 0) + 1, ?, ?, ?, ? FROM webhook_attempt"
            " WHERE tenant_id = ? AND event_id = ? AND endpoint_id = ?"
            " ON CONFLICT DO NOTHING",
            PO_PARAMS(PO_TEXT(j->tenant), PO_TEXT(j->event_id), PO_TEXT(j->endpoint_id),
                      PO_TEXT(now), status ? PO_I64(status) : PO_NULLP, PO_I64(latency),
                      error && *error ? PO_TEXT(error) : PO_NULLP, PO_TEXT(j->tenant),
                      PO_TEXT(j->event_id), PO_TEXT(j->endpoint_id)),
            NULL, NULL, err, errcap);
    if (!rc && !ok)
        rc = failing_alert(w, s, j, dead, error, status, now, err, errcap);
    if (!rc)
        rc = po_store_commit(s, err, errcap);
    else
        po_store_rollback(s);
    *out_dead = !rc && dead;
    return rc;
}

/* The result of an attempt, recorded with a pooled connection. A busy
 * pool or a locked database is waited out for as long as the claim lasts:
 * a result lost here would send the delivery again and hold the order's
 * later events back until the claim expired. */
static po_err record_result(struct po_webhooks *w, const struct job *j, int64_t created,
                            long status, int64_t latency, const char *error, bool *out_dead,
                            char *err, size_t errcap)
{
    po_err rc;
    for (;;) {
        struct po_store *s = NULL;
        rc = po_store_pool_acquire(w->pool, 500, &s, err, errcap);
        if (!rc) {
            rc = record(w, s, j, created, status, latency, error, out_dead, err, errcap);
            po_store_pool_release(w->pool, s);
        }
        if (!rc || rc == PO_ERR_NOMEM || po_clock_now_ms() + 600 > j->until_ms)
            return rc;
        struct timespec pause = {0, 50 * 1000000L};
        nanosleep(&pause, NULL);
    }
}

static void send_one(struct po_webhooks *w, const struct job *j)
{
    char err[PO_ERRBUF_SIZE] = "", herr[PO_ERRBUF_SIZE] = "";
    struct shot shot;
    memset(&shot, 0, sizeof shot);
    struct po_store *s = NULL;
    po_err rc = po_store_pool_acquire(w->pool, 2000, &s, err, sizeof err);
    if (!rc) {
        rc = load_shot(w, s, j, &shot, err, sizeof err);
        po_store_pool_release(w->pool, s); /* never held across the POST */
    }
    if (rc) {
        po_log(PO_LOG_WARN, "tenant %s: webhooks: %s (not sent)", j->tenant, err);
        po_secure_zero(shot.secret, sizeof shot.secret);
        free(shot.body);
        return;
    }
    struct po_egress_result res = {0};
    char sig[160], sighdr[200], idhdr[80];
    int64_t t = (int64_t)time(NULL);
    uint64_t start = po_now_us();
    if (po_webhook_sign(shot.secret, t, shot.body, sig, sizeof sig)) {
        (void)snprintf(herr, sizeof herr, "cannot sign (out of memory)");
    } else {
        PO_ASSERT(po_fmt(sighdr, sizeof sighdr, "Payonce-Signature: %s", sig) == PO_OK);
        PO_ASSERT(po_fmt(idhdr, sizeof idhdr, "Payonce-Event-Id: %s", j->event_id) == PO_OK);
        const char *h[] = {"Content-Type: application/json", "User-Agent: payonce-webhooks/1",
                           sighdr, idhdr, "Expect:"};
        if (po_http_post(&w->cfg.egress, shot.url, h, PO_NELEM(h), shot.body, w->cfg.timeout_ms,
                         &res))
            (void)snprintf(herr, sizeof herr, "cannot send (out of memory)");
        else if (res.error)
            (void)snprintf(herr, sizeof herr, "%s", po_egress_error_text(res.error));
        else if (res.status < 200 || res.status >= 300)
            (void)snprintf(herr, sizeof herr, "HTTP %ld", res.status);
    }
    long status = res.error ? 0 : res.status;
    int64_t latency = (int64_t)((po_now_us() - start) / 1000);
    po_secure_zero(shot.secret, sizeof shot.secret);
    free(shot.body);
    bool dead = false;
    rc = record_result(w, j, shot.created, status, latency, herr, &dead, err, sizeof err);
    if (rc)
        po_log(PO_LOG_WARN,
               "tenant %s: webhooks: the result of %s to %s is not recorded (%s); it is sent"
               " again",
               j->tenant, j->event_id, j->endpoint_id, err);
    else if (status >= 200 && status < 300)
        atomic_fetch_add(&w->delivered, 1);
    else
        atomic_fetch_add(dead ? &w->dead : &w->failed, 1);
    /* Every failed attempt is the operator's to see at the default level
     * (retries back off, so a dead endpoint logs a few lines an hour). The
     * tenant reads only the class (herr); the transport's words (detail)
     * are for this log. */
    if (!rc && (status < 200 || status >= 300))
        po_log(PO_LOG_WARN, "tenant %s: webhook %s to endpoint %s failed: %s%s%s%s; %s", j->tenant,
               j->event_id, j->endpoint_id, herr, res.error ? " (" : "",
               res.error ? res.detail : "", res.error ? ")" : "",
               dead ? "dead: no more attempts (alert webhook_dead_letter; payonce webhook redrive)"
                    : "sent again later");
}

static void *sender_main(void *arg)
{
    struct po_webhooks *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->stop && w->nqueue == 0)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->stop)
            break;
        int slot = 0;
        while (slot < CLAIM_MAX && w->busy[slot])
            slot++;
        PO_ASSERT(slot < CLAIM_MAX); /* queued + in flight <= CLAIM_MAX */
        w->inflight[slot] = w->queue[0];
        w->busy[slot] = true;
        w->ninflight++;
        memmove(&w->queue[0], &w->queue[1], (size_t)(--w->nqueue) * sizeof w->queue[0]);
        pthread_mutex_unlock(&w->mu);
        send_one(w, &w->inflight[slot]);
        pthread_mutex_lock(&w->mu);
        w->busy[slot] = false;
        w->ninflight--;
        pthread_cond_broadcast(&w->cv); /* the claimer may take more */
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

po_err po_webhooks_start(const struct po_webhooks_cfg *cfg, struct po_webhooks **out, char *err,
                         size_t errcap)
{
    struct po_webhooks *w = calloc(1, sizeof *w);
    if (!w)
        return PO_ERR_NOMEM;
    w->cfg = *cfg;
    /* the values are the option table's, checked by the gateway */
    PO_ASSERT(cfg->senders >= 1 && cfg->senders <= CLAIM_MAX / 2 && cfg->pending_max > 0);
    /* A connection for every other sender: reads before and results after
     * a POST are short, and a sender waits for one rather than lose a
     * result (record_result). */
    po_err rc = po_store_pool_open(cfg->db_url, w->cfg.senders / 2 + 1, &w->pool, err, errcap);
    if (rc) {
        free(w);
        return rc;
    }
    pthread_mutex_init(&w->mu, NULL);
    po_cond_init(&w->cv);
    w->senders = calloc((size_t)w->cfg.senders, sizeof *w->senders);
    bool ok = w->senders && pthread_create(&w->claimer, NULL, claimer_main, w) == 0;
    for (int i = 0; ok && i < w->cfg.senders; i++, w->nsenders++)
        ok = pthread_create(&w->senders[i], NULL, sender_main, w) == 0;
    if (!ok) {
        po_errf(err, errcap, "cannot start the webhook threads");
        po_webhooks_stop(w);
        return PO_ERR_INTERNAL;
    }
    *out = w;
    return PO_OK;
}

void po_webhooks_stop(struct po_webhooks *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (w->senders) {
        if (w->nsenders > 0 || w->claimer)
            pthread_join(w->claimer, NULL);
        for (int i = 0; i < w->nsenders; i++)
            pthread_join(w->senders[i], NULL);
    }
    po_store_pool_close(w->pool);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->senders);
    free(w);
}

void po_webhooks_stats(struct po_webhooks *w, struct po_webhooks_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!w)
        return;
    out->delivered = atomic_load(&w->delivered);
    out->failed = atomic_load(&w->failed);
    out->dead = atomic_load(&w->dead);
    out->depth = atomic_load(&w->depth);
    out->oldest_age_ms = atomic_load(&w->oldest_ms);
}
