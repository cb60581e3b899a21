/*
 * order_query.c — the active order query: our orders still PAYING after
 * min_age are asked about at the channel's order-query API. The channel's
 * answer is only believed when the channel signed it (the adapter checks);
 * a paid answer becomes the event the callback would have produced —
 * same type, same business ids, hence the same idempotency key, source
 * "query" — and enters the engine like any callback. A replay racing a late
 * live callback is just two deliveries of one key.
 */
#include "order_query.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QUERY_TRIES 5

/* Applies one event — through the committer inside serve, its one front
 * door to the engine (SQLite's one writer stays one), else on s (the
 * offline CLI) — retrying transient failures; PO_ERR_TRANSIENT if they
 * persist. */
static po_err apply(struct po_store *s, struct po_committer *committer, const struct po_event *ev,
                    struct po_outcome *out)
{
    for (int t = 0; t < QUERY_TRIES; t++) {
        if (committer) {
            struct po_commit_item it;
            memset(&it, 0, sizeof it);
            it.ev = *ev;
            po_committer_apply(committer, &it);
            *out = it.out;
        } else {
            po_engine_apply(s, NULL, ev, out);
        }
        if (out->kind != PO_OUT_RETRY)
            return PO_OK;
        struct timespec ts = {0, 100000000L * (t + 1)};
        nanosleep(&ts, NULL);
    }
    return PO_ERR_TRANSIENT;
}

po_err po_order_query_round(struct po_store *s, struct po_committer *committer,
                            const struct po_channel_account *acct, int64_t min_age_s, int limit,
                            struct po_query_report *out, char *err, size_t errcap)
{
    const struct po_channel_ops *ch = po_channel_find(acct->channel);
    if (!ch || !ch->order_query) {
        char names[128];
        po_channel_names(PO_CAN_QUERY, names, sizeof names);
        po_errf(err, errcap, "%s has no order-query API (channels with one: %s)", acct->channel,
                names);
        return PO_ERR_INVALID;
    }
    struct po_query_report q = {0};
    char cutoff[PO_TIME_SIZE]; /* created at least min_age_s ago, to the second */
    po_clock_iso_at((int64_t)time(NULL) - min_age_s + 1, cutoff, sizeof cutoff);
    struct po_rows rows;
    po_err rc = po_store_exec(
        s,
        "SELECT out_trade_no FROM pay_order WHERE tenant_id = ? AND"
        " status = 'PAYING' AND (channel = ? OR channel IS NULL)"
        " AND created_at < ? ORDER BY created_at LIMIT ?",
        PO_PARAMS(PO_TEXT(acct->tenant), PO_TEXT(acct->channel), PO_TEXT(cutoff), PO_I64(limit)),
        &rows, NULL, err, errcap);
    if (rc)
        return rc;
    struct po_query_answer *a = malloc(sizeof *a);
    if (!a) {
        po_rows_free(&rows);
        return PO_ERR_NOMEM;
    }
    for (int i = 0; i < rows.nrows; i++) {
        const char *no = po_rows_get(&rows, i, 0);
        q.queried++;
        if (ch->order_query(acct, no, a)) {
            q.failed++;
            continue;
        }
        if (a->state == PO_QUERY_NOT_PAID) {
            q.not_paid++;
            continue;
        }
        if (a->state == PO_QUERY_FAILED) {
            po_log(PO_LOG_WARN, "tenant %s: order query for %s failed: HTTP %ld %s", acct->tenant,
                   no, a->http_status, a->why);
            q.failed++;
            continue;
        }
        q.paid++;
        struct po_outcome o;
        if (apply(s, committer, &a->ev, &o)) {
            q.failed++;
            continue;
        }
        if (o.kind == PO_OUT_APPLIED)
            q.replayed++;
        else if (o.kind == PO_OUT_DUPLICATE)
            q.matched++;
    }
    free(a);
    po_rows_free(&rows);
    *out = q;
    return PO_OK;
}
