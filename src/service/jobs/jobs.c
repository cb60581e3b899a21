/*
 * jobs.c — `payonce serve`'s background jobs, each on its own interval
 * (0 = off), run one after another on one thread that opens its own store
 * connection per round (so a job never holds a connection the gateway's
 * requests need):
 *   active query   for every channel with an order-query API, each
 *                  tenant's orders still PAYING after min_age are queried
 *                  at the channel (po_order_query_round); with it, orders
 *                  past their expiry are closed at their channel first
 *                  (po_order_expire_round), and refunds submitted and
 *                  still PROCESSING after min_age are queried
 *                  (po_refund_query_round); and the channel's events since
 *                  the last walk, for webhooks that never came
 *                  (po_events_recover_round)
 *   refund retry   API refunds whose submission got no decisive answer are
 *                  submitted again (the channels are idempotent on it)
 *   daily recon    each day's bill downloaded once the channel publishes it,
 *                  imported, retried, alerted past its deadline
 *                  (po_recon_daily_round)
 *   keys           the channels' verification keys refreshed
 *                  (po_keys_refresh_round: WeChat Pay's platform certificates)
 *   reaper         stored Idempotency-Key responses past the retention
 *   alert notifier the alerts said to the operator's receivers (Alertmanager
 *                  or Slack webhook, mail; po_alert_notify_round)
 *
 * Several serve nodes over one database (docs/scaling.md): each job runs on
 * one node at a time, the holder of its lease (job_lease: holder, expiry).
 * The holder renews the lease every round for two intervals and LEASE_GRACE_S
 * more; a node that dies (kill -9) leaves it to expire, and the next round of
 * another node after that takes it over. What the rounds do is idempotent
 * anyway (engine keys, the channels' own idempotency, bills keyed by their
 * digest), so a round that outlives its lease and meets its successor costs
 * channel calls, not money; the lease is what keeps three nodes from making
 * every call three times, and two refund resubmissions from running at once.
 * Lease times are the nodes' clocks: their skew must stay well below
 * LEASE_GRACE_S (NTP).
 */
#include "../accounts/account.h"
#include "../payments/idem.h"
#include "jobs.h"
#include "ledger_check.h"
#include "../payments/order_query.h"
#include "../payments/refund_submit.h"
#include "../payments/traffic.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REAP_INTERVAL_MAX_S 3600
#define QUERY_LIMIT 100
#define REFUND_LIMIT 100
#define EXPIRE_LIMIT 100
#define LEASE_GRACE_S 5

enum lease_job { L_QUERY, L_REFUND, L_RECON, L_KEYS, L_REAP, L_NOTIFY, L_LEDGER, L_STATS, L_COUNT };
static const char *const lease_names[L_COUNT] = {
    "active-query",       "refund-retry", "daily-recon",  "keys-refresh",
    "idempotency-reaper", "alert-notify", "ledger-check", "statistics"};

struct po_jobs {
    struct po_jobs_cfg cfg;
    int64_t every[L_COUNT]; /* each job's interval, s (0: off) */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    char holder[96];               /* this node in job_lease: host:pid:random */
    bool holding[L_COUNT];         /* what the last round found, for the log */
    bool lease_unknown[L_COUNT];   /* the last round's attempt failed */
    bool traffic_warned;           /* the last flush failed (said once) */
    struct po_store *flush_store;  /* the history's connection (flush_history) */
    struct po_ledger_check *check; /* the ledger check's positions */
};

/* The callback records sealed (and, with the counts, pruned), this node's
 * deliveries and (every PO_TRAFFIC_FLUSH_S, or all) its
 * callback counts into the console's history: every node, no lease (each
 * adds its own), on a connection of their own kept between flushes. */
static void flush_history(struct po_jobs *j, int64_t now, bool counts)
{
    char err[PO_ERRBUF_SIZE] = "";
    /* through serve's committer (a work in its next batch); a connection of
     * their own only without one */
    po_err rc = j->cfg.committer || j->flush_store
                    ? PO_OK
                    : po_store_open(j->cfg.db_url, &j->flush_store, err, sizeof err);
    if (!rc)
        rc = po_deliveries_flush(j->flush_store, j->cfg.committer, j->holder, err, sizeof err);
    if (!rc)
        rc = po_records_seal(j->flush_store, j->cfg.committer, j->cfg.master, now,
                             j->cfg.record_days, counts, NULL, NULL, err, sizeof err);
    if (!rc && counts)
        rc = po_traffic_flush(j->flush_store, j->cfg.committer, j->holder, now, j->cfg.history_days,
                              err, sizeof err);
    if (rc && !j->traffic_warned)
        po_log(PO_LOG_WARN,
               "callback records and console history: not written (kept for the next try): %s",
               err);
    if (rc) { /* a fresh connection next time */
        po_store_close(j->flush_store);
        j->flush_store = NULL;
    }
    j->traffic_warned = rc != PO_OK;
}

/* Whether this node runs job k's round now: it holds the job's lease, or
 * the lease expired (or never existed) and this node takes it. The
 * upsert's WHERE makes taking it one atomic step on both stores: of two
 * nodes at once, one updates the row and the other changes nothing. */
static bool lease(struct po_jobs *j, struct po_store *s, enum lease_job k, int64_t interval_s)
{
    char at[PO_TIME_SIZE], until[PO_TIME_SIZE], err[PO_ERRBUF_SIZE] = "";
    int64_t now = po_clock_now_ms(), changes = 0;
    po_clock_iso_ms(now, at, sizeof at);
    po_clock_iso_ms(now + (2 * interval_s + LEASE_GRACE_S) * 1000, until, sizeof until);
    po_err rc = po_store_exec_tx(
        s,
        "INSERT INTO job_lease (name, holder, until_at, taken_at) VALUES (?, ?, ?, ?) ON"
        " CONFLICT (name) DO UPDATE SET holder = excluded.holder, until_at = excluded.until_at,"
        " taken_at = CASE WHEN job_lease.holder = excluded.holder THEN job_lease.taken_at ELSE"
        " excluded.taken_at END WHERE job_lease.holder = excluded.holder OR job_lease.until_at"
        " < excluded.taken_at",
        PO_PARAMS(PO_TEXT(lease_names[k]), PO_TEXT(j->holder), PO_TEXT(until), PO_TEXT(at)),
        &changes, err, sizeof err);
    if (rc) { /* holding unknown: the next answer is logged, whichever it is */
        po_log(PO_LOG_WARN, "background job %s: lease not taken: %s", lease_names[k], err);
        j->lease_unknown[k] = true;
        return false;
    }
    bool mine = changes == 1;
    if (mine != j->holding[k] || j->lease_unknown[k])
        po_log(PO_LOG_INFO, "background job %s: %s", lease_names[k],
               mine ? "this node holds its lease and runs it"
                    : "another node holds its lease and runs it");
    j->holding[k] = mine;
    j->lease_unknown[k] = false;
    return mine;
}

/* Whether job k runs in this round: on (interval > 0), due, and this
 * node's by its lease. A due job is rescheduled whether or not this node
 * holds it, so a node without the lease asks again one interval later. */
static bool due(struct po_jobs *j, struct po_store *s, enum lease_job k, int64_t now,
                int64_t next[L_COUNT])
{
    if (!j->every[k] || now < next[k])
        return false;
    next[k] = now + j->every[k];
    return lease(j, s, k, j->every[k]);
}

static void query_channel(struct po_jobs *j, struct po_store *s, const struct po_channel_ops *ch)
{
    char **tenants = NULL, err[PO_ERRBUF_SIZE] = "";
    int n = 0;
    if (po_account_tenants(s, ch->name, &tenants, &n))
        return;
    for (int i = 0; i < n; i++) {
        struct po_account_ref *ref = NULL;
        struct po_query_report q;
        if (po_accounts_use(j->cfg.accounts, s, j->cfg.master, tenants[i], ch->name, &ref, err,
                            sizeof err))
            continue;
        const struct po_channel_account *acct = po_account_of(ref);
        /* an account for notifications only: payonce does not call */
        if (acct->api_ready &&
            po_order_query_round(s, j->cfg.committer, acct, j->cfg.query_min_age_s, QUERY_LIMIT, &q,
                                 err, sizeof err) == PO_OK &&
            q.queried)
            po_log(PO_LOG_INFO,
                   "tenant %s: %s active query: %lld queried, %lld credited now, %lld already,"
                   " %lld not paid, %lld failed",
                   tenants[i], ch->name, (long long)q.queried, (long long)q.replayed,
                   (long long)q.matched, (long long)q.not_paid, (long long)q.failed);
        /* the channel's own record of what it notified (Stripe's events) */
        struct po_recover_report rr;
        if (acct->api_ready && ch->events_since &&
            po_events_recover_round(s, j->cfg.committer, acct, (int64_t)time(NULL), 100, &rr, err,
                                    sizeof err) == PO_OK &&
            (rr.replayed || !rr.whole))
            po_log(PO_LOG_INFO,
                   "tenant %s: %s events since the cursor: %lld, %lld credited now (their"
                   " webhooks never came), %lld already, %lld rejected%s%s",
                   tenants[i], ch->name, (long long)rr.events, (long long)rr.replayed,
                   (long long)rr.matched, (long long)rr.rejected,
                   rr.whole ? "" : "; not whole, the cursor stays: ", rr.whole ? "" : rr.why);
        po_accounts_release(ref);
    }
    po_strings_free(tenants, n);
}

static void run_due(struct po_jobs *j, int64_t now, int64_t next[L_COUNT])
{
    struct po_store *s = NULL;
    char err[PO_ERRBUF_SIZE] = "";
    if (po_store_open(j->cfg.db_url, &s, err, sizeof err)) {
        po_log(PO_LOG_WARN, "background jobs: %s", err);
        return;
    }
    if (due(j, s, L_QUERY, now, next)) {
        for (int i = 0; po_channels[i]; i++)
            if (po_channels[i]->order_query || po_channels[i]->events_since)
                query_channel(j, s, po_channels[i]);
        /* refunds the channel accepted whose result never came */
        struct po_refund_query_report rq;
        if (po_refund_query_round(s, j->cfg.committer, j->cfg.accounts, j->cfg.master,
                                  j->cfg.query_min_age_s, QUERY_LIMIT, &rq, err,
                                  sizeof err) == PO_OK &&
            rq.queried)
            po_log(PO_LOG_INFO,
                   "refund query: %lld queried, %lld completed now, %lld already, %lld still"
                   " processing, %lld failed",
                   (long long)rq.queried, (long long)rq.applied, (long long)rq.matched,
                   (long long)rq.pending, (long long)rq.failed);
        /* and the orders past their expiry, closed at their channel first */
        struct po_expiry_report x;
        if (po_order_expire_round(s, j->cfg.committer, j->cfg.accounts, j->cfg.master, EXPIRE_LIMIT,
                                  &x, err, sizeof err) == PO_OK &&
            x.expired)
            po_log(PO_LOG_INFO,
                   "order expiry: %lld expired, %lld closed, %lld paid at the channel, %lld left"
                   " PAYING",
                   (long long)x.expired, (long long)x.closed, (long long)x.paid,
                   (long long)x.undecided);
    }
    if (due(j, s, L_REFUND, now, next)) {
        int n = 0;
        if (po_refund_submit_pending(s, j->cfg.accounts, j->cfg.master, j->cfg.refund_s,
                                     REFUND_LIMIT, &n) == PO_OK &&
            n)
            po_log(PO_LOG_INFO, "refund retry: %d refunds submitted to the channel", n);
    }
    if (due(j, s, L_RECON, now, next)) {
        struct po_recon_daily_report x;
        struct po_door d = {s, j->cfg.committer};
        if (po_recon_daily_round(&d, j->cfg.accounts, j->cfg.master, &j->cfg.recon, now, &x, err,
                                 sizeof err))
            po_log(PO_LOG_WARN, "daily reconciliation: %s", err);
        else if (x.due)
            po_log(PO_LOG_INFO,
                   "daily reconciliation: %lld day(s) due, %lld imported, %lld without trades,"
                   " %lld not published yet, %lld failed, %lld overdue",
                   (long long)x.due, (long long)x.imported, (long long)x.none,
                   (long long)x.not_ready, (long long)x.failed, (long long)x.overdue);
    }
    if (due(j, s, L_KEYS, now, next)) {
        struct po_keys_refresh_report k;
        if (po_keys_refresh_round(s, j->cfg.accounts, j->cfg.master, now, &k, err, sizeof err))
            po_log(PO_LOG_WARN, "verification keys refresh: %s", err);
    }
    if (due(j, s, L_NOTIFY, now, next)) {
        struct po_alert_notify_report x;
        if (po_alert_notify_round(s, &j->cfg.notify, now, &x, err, sizeof err))
            po_log(PO_LOG_WARN, "alert notifier: %s", err);
        else if (x.groups_sent || x.groups_failed)
            po_log(PO_LOG_INFO,
                   "alert notifier: %lld groups said (%lld alerts firing, %lld resolved), %lld"
                   " not taken (tried again)",
                   (long long)x.groups_sent, (long long)x.alerts_firing,
                   (long long)x.alerts_resolved, (long long)x.groups_failed);
    }
    if (due(j, s, L_LEDGER, now, next)) {
        struct po_ledger_check_report x;
        po_err lrc = po_ledger_check_run(s, j->check, po_clock_now_ms(), &x, err, sizeof err);
        (void)lrc; /* a part that fails is logged by the round itself; what the others
                    * found is said here */
        if (x.changes || x.raised)
            po_log(PO_LOG_ERROR,
                   "ledger check: %d ledger row(s) changed outside payonce, %d invariant(s)"
                   " broken, raised as ledger_invariant alerts (payonce alerts --tenant TENANT;"
                   " payonce verify)",
                   x.changes, x.raised);
    }
    if (due(j, s, L_REAP, now, next)) {
        int64_t n = 0;
        if (po_idem_reap(s, j->cfg.retention_s, &n) == PO_OK && n)
            po_log(PO_LOG_INFO,
                   "reaper: %lld stored Idempotency-Key responses older than %lld s deleted",
                   (long long)n, (long long)j->cfg.retention_s);
    }
    if (due(j, s, L_STATS, now, next)) {
        int n = 0;
        if (po_store_refresh_statistics(s, &n, err, sizeof err))
            po_log(PO_LOG_WARN, "statistics: %s", err);
        else if (n)
            po_log(PO_LOG_INFO, "statistics: %d table(s) analyzed (a fifth of their rows changed)",
                   n);
    }
    po_store_close(s);
}

static void *jobs_main(void *arg)
{
    struct po_jobs *j = arg;
    int64_t start = (int64_t)time(NULL), next[L_COUNT];
    for (int k = 0; k < L_COUNT; k++)
        next[k] = start + j->every[k];
    next[L_RECON] = start + 5;
    next[L_KEYS] = start + 10;
    next[L_REAP] = next[L_LEDGER] = next[L_STATS] = start;
    int64_t next_traffic = start + PO_TRAFFIC_FLUSH_S,
            next_deliveries = start + PO_DELIVERY_FLUSH_S;
    pthread_mutex_lock(&j->mu);
    while (!j->stop) {
        int64_t now = (int64_t)time(NULL), soonest = next_deliveries;
        if (now >= next_deliveries) {
            bool counts = now >= next_traffic;
            pthread_mutex_unlock(&j->mu);
            flush_history(j, now, counts);
            pthread_mutex_lock(&j->mu);
            next_deliveries = now + PO_DELIVERY_FLUSH_S;
            if (counts)
                next_traffic = now + PO_TRAFFIC_FLUSH_S;
            continue;
        }
        for (int k = 0; k < L_COUNT; k++)
            if (j->every[k] && next[k] < soonest)
                soonest = next[k];
        if (soonest > now) {
            struct timespec until = po_deadline_us((soonest - now) * INT64_C(1000000));
            while (!j->stop && pthread_cond_timedwait(&j->cv, &j->mu, &until) == 0)
                ;
            continue;
        }
        pthread_mutex_unlock(&j->mu);
        run_due(j, now, next);
        pthread_mutex_lock(&j->mu);
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

po_err po_jobs_start(const struct po_jobs_cfg *cfg, struct po_jobs **out)
{
    struct po_jobs *j = calloc(1, sizeof *j);
    if (!j)
        return PO_ERR_NOMEM;
    j->cfg = *cfg;
    char host[64] = "";
    unsigned char r[4] = {0};
    (void)gethostname(host, sizeof host - 1);
    PO_ASSERT(po_random(r, sizeof r) == PO_OK);
    (void)snprintf(j->holder, sizeof j->holder, "%s:%ld:%02x%02x%02x%02x", host, (long)getpid(),
                   r[0], r[1], r[2], r[3]);
    j->every[L_QUERY] = cfg->query_s;
    j->every[L_REFUND] = cfg->refund_s;
    j->every[L_RECON] = cfg->recon_s;
    j->every[L_KEYS] = cfg->keys_s;
    j->every[L_REAP] =
        cfg->retention_s < REAP_INTERVAL_MAX_S ? cfg->retention_s : REAP_INTERVAL_MAX_S;
    j->every[L_NOTIFY] = po_alert_notify_on(&cfg->notify) ? cfg->notify.interval_s : 0;
    j->every[L_LEDGER] = cfg->ledger_check_s;
    j->every[L_STATS] = cfg->stats_s;
    if (po_ledger_check_new(cfg->ledger_sweep_rows, cfg->ledger_new_rows, cfg->ledger_balance_s,
                            &j->check)) {
        free(j);
        return PO_ERR_NOMEM;
    }
    pthread_mutex_init(&j->mu, NULL);
    po_cond_init(&j->cv);
    if (pthread_create(&j->thread, NULL, jobs_main, j) != 0) {
        pthread_mutex_destroy(&j->mu);
        pthread_cond_destroy(&j->cv);
        po_ledger_check_free(j->check);
        free(j);
        return PO_ERR_INTERNAL;
    }
    *out = j;
    return PO_OK;
}

void po_jobs_stop(struct po_jobs *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&j->mu);
    j->stop = true;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    pthread_join(j->thread, NULL);
    flush_history(j, (int64_t)time(NULL), true); /* what it counted last */
    po_store_close(j->flush_store);
    /* a node that stops cleanly hands its jobs over at once */
    struct po_store *s = NULL;
    char err[PO_ERRBUF_SIZE] = "";
    if (po_store_open(j->cfg.db_url, &s, err, sizeof err) ||
        po_store_exec_tx(s, "DELETE FROM job_lease WHERE holder = ?", PO_PARAMS(PO_TEXT(j->holder)),
                         NULL, err, sizeof err))
        po_log(PO_LOG_WARN, "background jobs: leases not released (they expire): %s", err);
    po_store_close(s);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    po_ledger_check_free(j->check);
    free(j);
}
