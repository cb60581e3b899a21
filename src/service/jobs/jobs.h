/*
 * jobs.h — serve's background jobs on their intervals (jobs.c).
 * Part of service.h (which includes every service header).
 *
 * jobs/ owns serve's background rounds: the jobs thread (jobs.c), daily
 * reconciliation (recon_daily.h) and the ledger check (ledger_check.h). It
 * calls accounts/, payments/ and alerts/; console/ reads what it wrote and
 * gateway/ starts it.
 */
#ifndef PO_SERVICE_JOBS_H
#define PO_SERVICE_JOBS_H

#include "../../channel/channel.h"
#include "../../core/core.h"
#include "../../engine/engine.h"
#include "../../runtime/runtime.h"
#include "../../store/store.h"
#include "../alerts/alert_notify.h"
#include "recon_daily.h"

#include <jansson.h>

/* ---- background jobs (jobs.c) ---- */

struct po_jobs_cfg {
    const char *db_url;
    const unsigned char *master; /* NULL in insecure development mode */
    /* serve's account cache: every outbound call's account (NULL: each
     * unsealed from the store with master) */
    struct po_accounts *accounts;
    int64_t query_s; /* active query interval (0 = off) */
    int64_t query_min_age_s;
    int64_t refund_s;       /* refund resubmission interval (0 = off) */
    int64_t retention_s;    /* Idempotency-Key retention */
    int64_t recon_s;        /* the daily reconciliation's round interval (0 = off) */
    int64_t keys_s;         /* verification keys refresh interval (0 = off) */
    int64_t ledger_check_s; /* the continuous ledger check's interval (0 = off) */
    int ledger_sweep_rows;
    int ledger_new_rows;      /* of each slice a round (0: no sweep) */
    int64_t ledger_balance_s; /* a tenant's balances summed at most this often (0: never) */
    int64_t stats_s; /* the planner's statistics refreshed (po_store_refresh_statistics; 0: off) */
    struct po_recon_daily_cfg recon;
    /* alerts to the operator's receivers (on when one is configured) */
    struct po_alert_notify_cfg notify;
    /* the console's callback history: flushed by every node, pruned after */
    int history_days;
    /* the callback record: sealed by every node, pruned after (0: never) */
    int record_days;
    /* serve's committer: every engine call of the jobs goes through it
     * (NULL: applied on the jobs' own connection) */
    struct po_committer *committer;
};
struct po_jobs;
/* Starts the jobs thread; it opens its own store connection per round. */
po_err po_jobs_start(const struct po_jobs_cfg *cfg, struct po_jobs **out) PO_MUST_CHECK;
/* Stops and joins it (a round in progress finishes first). */
void po_jobs_stop(struct po_jobs *j);

#endif
