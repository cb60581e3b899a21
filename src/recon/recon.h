/*
 * recon.h — reconciliation: the channel's bill against our orders, every
 * row entering the engine through the same function as a callback, with
 * exactly the key the callback would have had (source "reconciliation").
 * The bill's format belongs to the channel (channel ops bill_parse); the
 * active order query, the other recovery path, is in service/.
 */
#ifndef PO_RECON_H
#define PO_RECON_H

#include "../channel/channel.h"
#include "../core/core.h"
#include "../engine/engine.h"
#include "../store/store.h"

#include <jansson.h>

/* What one reconciliation did, per category, with totals in minor units. */
struct po_recon_report {
    char file_sha256[65];
    bool already_imported;
    int64_t rows;
    int64_t payments, payments_amount, refunds, refunds_amount;
    int64_t replayed, replayed_amount; /* credited (or refunded) now: we had missed it */
    int64_t matched;                   /* already applied: duplicate */
    int64_t mismatched;                /* engine rejected (amount, unknown order, ...) */
    int64_t suspense;
    int64_t zero_amount;       /* 0.00 rows: nothing to credit */
    int64_t missing_from_bill; /* our PAID orders the bill lacks */
    int64_t fees_milli;        /* thousandths of the minor unit */
    char period_start[11], period_end[11];
    /* the bill's currency, the one of every amount above; "" when the bill
     * has no rows, rows in several currencies (several_currencies), or the
     * run was recorded before payonce kept it */
    char currency[4];
    bool several_currencies;
};

/* Progress callback for large files: rows done of rows total. */
typedef void (*po_recon_progress_fn)(void *ctx, int64_t done, int64_t total);

/*
 * Imports a bill of the account's channel (its ops' bill format): checks
 * every row's merchant against the account's, replays every row through
 * the engine (batches of RECON_BATCH), alerts for our PAID orders absent
 * from the bill's days, records fees, and records the run. A file already
 * imported changes nothing (force: run again; replays are idempotent).
 * PO_ERR_INVALID (nothing applied) for a channel without a bill format or
 * a bill that does not parse or is not the tenant's. Every write goes
 * through the door d (inside serve, its committer); d->s reads.
 */
po_err po_recon_import(const struct po_door *d, const struct po_channel_account *acct,
                       const char *data, size_t len, bool force, po_recon_progress_fn progress,
                       void *pctx, struct po_recon_report *out, char *err,
                       size_t errcap) PO_MUST_CHECK;

/* The report as the JSON `recon import --json` prints and recon_run stores. */
json_t *po_recon_report_json(const struct po_recon_report *r);
/* The tenant's last 100 runs, newest first: each run's report with
 * imported_at and channel (*out: a JSON array). */
po_err po_recon_runs(struct po_store *s, const char *tenant, json_t **out) PO_MUST_CHECK;

#endif
