/*
 * gateway.c — serve's runtime, assembled and taken apart in one place
 * (gateway.h). Opening order: the store pool, the account cache, the
 * bulkheads, the Idempotency-Key table, the workers, the committer, the
 * sweeper thread, the webhook worker, the jobs; draining stops them in
 * the order that lets every piece of work in flight finish (jobs and
 * webhooks first, then the workers, whose jobs may still hand work to the
 * committer, then the committer); closing frees them.
 */
#include "gateway.h"

#include "../accounts/account.h"
#include "../jobs/jobs.h"
#include "options.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct po_gateway {
    struct po_gateway_cfg cfg;
    struct po_gateway_parts parts;
    unsigned char master[PO_MASTER_KEY_LEN];
    struct po_jobs *jobs;
    bool drained;
    /* the sweeper: drops cached channel accounts that changed or went
     * away every PO_ACCOUNT_SWEEP_S, so memory follows the store (the
     * committer's guard already keeps a changed account from crediting) */
    pthread_t sweeper;
    bool sweeper_started, sweeper_stop;
    pthread_mutex_t sweeper_mu;
    pthread_cond_t sweeper_cv;
};

static void *sweeper_main(void *arg)
{
    struct po_gateway *g = arg;
    pthread_mutex_lock(&g->sweeper_mu);
    while (!g->sweeper_stop) {
        struct timespec until = po_deadline_us(PO_ACCOUNT_SWEEP_S * INT64_C(1000000));
        (void)pthread_cond_timedwait(&g->sweeper_cv, &g->sweeper_mu, &until);
        if (g->sweeper_stop)
            break;
        pthread_mutex_unlock(&g->sweeper_mu);
        struct po_store *st = NULL;
        char err[PO_ERRBUF_SIZE] = "";
        if (po_store_pool_acquire(g->parts.pool, 1000, &st, err, sizeof err) == PO_OK) {
            if (po_accounts_sweep(g->parts.cb.accounts, st, NULL))
                po_log(PO_LOG_WARN, "channel account cache: sweep failed; retrying later");
            po_store_pool_release(g->parts.pool, st);
        }
        pthread_mutex_lock(&g->sweeper_mu);
    }
    pthread_mutex_unlock(&g->sweeper_mu);
    return NULL;
}

static po_err start_sweeper(struct po_gateway *g)
{
    pthread_mutex_init(&g->sweeper_mu, NULL);
    po_cond_init(&g->sweeper_cv);
    g->sweeper_started = pthread_create(&g->sweeper, NULL, sweeper_main, g) == 0;
    if (!g->sweeper_started) {
        pthread_mutex_destroy(&g->sweeper_mu);
        pthread_cond_destroy(&g->sweeper_cv);
    }
    return g->sweeper_started ? PO_OK : PO_ERR_INTERNAL;
}

static void stop_sweeper(struct po_gateway *g)
{
    if (!g->sweeper_started)
        return;
    pthread_mutex_lock(&g->sweeper_mu);
    g->sweeper_stop = true;
    pthread_cond_signal(&g->sweeper_cv);
    pthread_mutex_unlock(&g->sweeper_mu);
    pthread_join(g->sweeper, NULL);
    pthread_mutex_destroy(&g->sweeper_mu);
    pthread_cond_destroy(&g->sweeper_cv);
    g->sweeper_started = false;
}

/* Every field against the option table's bounds; the first one out of
 * them is named by its option. */
static po_err check_bounds(const struct po_gateway_cfg *cfg, char *err, size_t errcap)
{
    if (!cfg->db_url || !cfg->listen) {
        po_errf(err, errcap, "the gateway needs a database URL and a listen address");
        return PO_ERR_INVALID;
    }
    for (int i = 0; i < po_options_count; i++) {
        const struct po_option *o = &po_options[i];
        if (o->type != PO_OPT_INT || !o->size)
            continue;
        int64_t v = po_option_get(cfg, o);
        if (v < o->min || v > o->max) {
            po_errf(err, errcap, "%s: %" PRId64 " is not within %" PRId64 "..%" PRId64, o->name, v,
                    o->min, o->max);
            return PO_ERR_INVALID;
        }
    }
    return PO_OK;
}

/* The contended API share, unless configured: what the committer can
 * take at once (PO_API_SHARE_PER_COMMITTER per committer thread), at most
 * half of the workers. A tenant's API writes all pass the committer: more
 * of them in flight than it takes per batch only wait in its queue, ahead
 * of every other tenant's (Little's law). At half of 64 workers another
 * tenant's p99 under a flood was 113-173 ms on PostgreSQL; at 8, 25 ms
 * (bench --only tenants). */
static int api_share(const struct po_gateway_cfg *cfg, int committers)
{
    int workers = (int)cfg->workers;
    if (cfg->api_per_tenant > 0)
        return cfg->api_per_tenant < workers ? (int)cfg->api_per_tenant : workers;
    int share = PO_API_SHARE_PER_COMMITTER * committers;
    share = share < workers / 2 ? share : workers / 2;
    return share < 1 ? 1 : share;
}

/* --recon-at and --recon-deadline; the deadline must come after the
 * fetch (after every channel's publishing time when --recon-at is not
 * given). */
static po_err recon_times(const struct po_gateway_cfg *cfg, struct po_recon_daily_cfg *r, char *err,
                          size_t errcap)
{
    int64_t latest = 0;
    for (int i = 0; po_channels[i]; i++)
        if (po_channels[i]->bill_fetch && po_channels[i]->bill_publish_s > latest)
            latest = po_channels[i]->bill_publish_s;
    if (cfg->recon_at && *cfg->recon_at && !po_recon_time_parse(cfg->recon_at, &r->at_s)) {
        po_errf(err, errcap, "recon-at: HH:MM, e.g. 10:30");
        return PO_ERR_INVALID;
    }
    if (!po_recon_time_parse(cfg->recon_deadline ? cfg->recon_deadline : "18:00", &r->deadline_s)) {
        po_errf(err, errcap, "recon-deadline: HH:MM, e.g. 18:00");
        return PO_ERR_INVALID;
    }
    if (r->deadline_s <= (r->at_s >= 0 ? r->at_s : latest)) {
        po_errf(err, errcap, "recon-deadline must come after the bills are fetched (recon-at)");
        return PO_ERR_INVALID;
    }
    return PO_OK;
}

po_err po_gateway_open(const struct po_gateway_cfg *cfg, struct po_gateway **out, char *err,
                       size_t errcap)
{
    po_err rc = check_bounds(cfg, err, errcap);
    if (rc)
        return rc;
    struct po_gateway *g = calloc(1, sizeof *g);
    if (!g)
        return PO_ERR_NOMEM;
    g->cfg = *cfg;
    if (cfg->channel_timeout_ms) /* the process's one budget for channel calls */
        po_api_set_timeout_ms((long)cfg->channel_timeout_ms);
    if (cfg->master_key) {
        memcpy(g->master, cfg->master_key, PO_MASTER_KEY_LEN);
        g->cfg.master_key = g->master;
    }
    struct po_gateway_parts *p = &g->parts;
    p->cfg = &g->cfg;
    bool sqlite = strncmp(cfg->db_url, "sqlite:", 7) == 0;
    struct po_committer_cfg ccfg = {
        .db_url = cfg->db_url,
        .workers = sqlite ? 1 : (int)cfg->committers,
        .batch_max = (int)cfg->batch_max,
        .batch_wait_us = (int)cfg->batch_wait_us,
        .queue_max = 8192,
        .known_max = (int)cfg->known_events,
        .guard = po_accounts_guard,
    };
    g->cfg.committers = ccfg.workers;
    p->cb.deadline_ms = (int)cfg->callback_deadline_ms;
    p->cb.record = !cfg->no_record;
    rc = po_store_pool_open(cfg->db_url, (int)cfg->pool_size, &p->pool, err, errcap);
    p->cb.pool = p->pool;
    if (!rc)
        po_store_pool_keyed_only(p->pool);
    if (!rc && (rc = po_accounts_open(g->cfg.master_key, &p->cb.accounts)) != PO_OK)
        po_errf(err, errcap, "out of memory");
    int workers = (int)cfg->workers, share = api_share(cfg, ccfg.workers);
    if (!rc && (po_bulkhead_open(share, workers, PO_BULKHEAD_RECENT_MS, &p->api_bulkhead) ||
                po_bulkhead_open(PO_OUTBOUND_PER_TENANT, PO_OUTBOUND_MAX, PO_BULKHEAD_RECENT_MS,
                                 &p->outbound_bulkhead) ||
                po_bulkhead_open(PO_CALLBACKS_PER_TENANT, INT32_MAX / 2, PO_BULKHEAD_RECENT_MS,
                                 &p->callback_bulkhead)))
        po_errf(err, errcap, "out of memory"), rc = PO_ERR_NOMEM;
    if (!rc && (rc = po_idem_local_open(&p->idem_local)) != PO_OK)
        po_errf(err, errcap, "out of memory");
    if (!rc && (rc = po_workers_start(workers, 8192, share, PO_BULKHEAD_RECENT_MS,
                                      &p->cb.workers)) != PO_OK)
        po_errf(err, errcap, "workers: 1..%d threads", PO_WORKERS_MAX);
    if (!rc)
        rc = po_committer_start(&ccfg, &p->cb.committer, err, errcap);
    if (!rc && (rc = start_sweeper(g)) != PO_OK)
        po_errf(err, errcap, "cannot start a thread");
    if (!rc && cfg->webhooks.senders) {
        struct po_webhooks_cfg wc = cfg->webhooks;
        wc.db_url = cfg->db_url;
        wc.master = g->cfg.master_key;
        wc.egress = cfg->egress;
        rc = po_webhooks_start(&wc, &p->webhooks, err, errcap);
    }
    if (!rc && !cfg->no_jobs) {
        struct po_jobs_cfg jc = {
            .db_url = cfg->db_url,
            .master = g->cfg.master_key,
            .accounts = p->cb.accounts,
            .query_s = cfg->query_s,
            .query_min_age_s = cfg->query_min_age_s,
            .refund_s = cfg->refund_s,
            .retention_s = cfg->retention_s,
            .recon_s = cfg->recon_s,
            .keys_s = cfg->keys_s,
            .ledger_check_s = cfg->ledger_check_s,
            .ledger_sweep_rows = (int)cfg->ledger_sweep_rows,
            .ledger_new_rows = (int)cfg->ledger_new_rows,
            .ledger_balance_s = cfg->ledger_balance_s,
            .stats_s = sqlite ? 0 : cfg->stats_s, /* nothing to refresh: no lease taken */
            .recon = {-1, 0, cfg->recon_retry_s, (int)cfg->recon_days},
            .notify = cfg->notify,
            .history_days = (int)cfg->history_days,
            .record_days = (int)cfg->record_days,
            .committer = p->cb.committer};
        jc.notify.timeout_ms = (long)cfg->channel_timeout_ms;
        rc = recon_times(cfg, &jc.recon, err, errcap);
        if (!rc)
            rc = po_alert_notify_check(&cfg->notify, err, errcap);
        if (!rc && (rc = po_jobs_start(&jc, &g->jobs)) != PO_OK)
            po_errf(err, errcap, "the background jobs cannot start");
    }
    if (rc) {
        po_gateway_close(g);
        return rc;
    }
    *out = g;
    return PO_OK;
}

const struct po_gateway_parts *po_gateway_parts(const struct po_gateway *g)
{
    return &g->parts;
}

void po_gateway_drain(struct po_gateway *g)
{
    if (g->drained)
        return;
    g->drained = true;
    po_jobs_stop(g->jobs);
    g->jobs = NULL;
    po_webhooks_stop(g->parts.webhooks);
    g->parts.webhooks = NULL;
    stop_sweeper(g);
    po_workers_stop(g->parts.cb.workers);
    po_committer_stop(g->parts.cb.committer);
}

void po_gateway_close(struct po_gateway *g)
{
    if (!g)
        return;
    po_gateway_drain(g);
    struct po_gateway_parts *p = &g->parts;
    po_workers_free(p->cb.workers);
    po_accounts_close(p->cb.accounts);
    po_idem_local_close(p->idem_local);
    po_bulkhead_close(p->api_bulkhead);
    po_bulkhead_close(p->outbound_bulkhead);
    po_bulkhead_close(p->callback_bulkhead);
    po_store_pool_close(p->pool);
    po_secure_zero(g->master, sizeof g->master);
    free(g);
}
