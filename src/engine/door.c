/*
 * door.c — the engine's one door (see engine.h): inside serve every event
 * and every alert goes through serve's committer; the offline CLI, which
 * has none, applies on its own connection. The only file outside the
 * engine's core that calls po_engine_apply_batch and po_engine_alert
 * (scripts/lint.sh checks it).
 */
#include "engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void po_door_apply(const struct po_door *d, const struct po_event *ev, size_t n,
                   struct po_outcome *out)
{
    PO_ASSERT(n >= 1 && n <= PO_BATCH_MAX);
    if (!d->c) {
        po_engine_apply_batch(d->s, NULL, ev, n, out);
        return;
    }
    struct po_commit_item *items = calloc(n, sizeof *items);
    if (!items) {
        for (size_t i = 0; i < n; i++)
            out[i] = (struct po_outcome){PO_OUT_RETRY, 0, PO_R_NOMEM};
        return;
    }
    for (size_t i = 0; i < n; i++)
        items[i].ev = ev[i]; /* routed by the event's tenant and order */
    po_committer_apply_many(d->c, items, n);
    for (size_t i = 0; i < n; i++)
        out[i] = items[i].out;
    free(items);
}

po_err po_door_apply_retrying(const struct po_door *d, const struct po_event *ev, size_t n,
                              struct po_outcome *out, int tries)
{
    PO_ASSERT(n >= 1 && n <= PO_BATCH_MAX);
    size_t idx[PO_BATCH_MAX], left = n;
    struct po_event *again = calloc(n, sizeof *again);
    struct po_outcome *got = calloc(n, sizeof *got);
    po_err rc = again && got ? PO_ERR_TRANSIENT : PO_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    for (int t = 0; again && got && t < tries; t++) {
        for (size_t k = 0; k < left; k++)
            again[k] = ev[idx[k]];
        po_door_apply(d, again, left, got);
        size_t m = 0;
        for (size_t k = 0; k < left; k++) {
            out[idx[k]] = got[k]; /* a retry's too: what the last try said */
            if (got[k].kind == PO_OUT_RETRY)
                idx[m++] = idx[k];
        }
        if ((left = m) == 0) {
            rc = PO_OK;
            break;
        }
        struct timespec ts = {0, 100000000L * (t + 1)};
        nanosleep(&ts, NULL);
    }
    free(again);
    free(got);
    return rc;
}

po_err po_door_alert(const struct po_door *d, const struct po_event *ev, enum po_reason reason,
                     const char *detail)
{
    if (!d->c)
        return po_engine_alert(d->s, ev, reason, detail, NULL);
    struct po_commit_item *it = calloc(1, sizeof *it);
    if (!it)
        return PO_ERR_NOMEM;
    it->ev = *ev;
    it->alert.reason = reason;
    (void)snprintf(it->alert.detail, sizeof it->alert.detail, "%s", detail ? detail : "");
    po_committer_apply(d->c, it);
    po_err rc = it->work.rc;
    free(it);
    return rc;
}

po_err po_door_work(const struct po_door *d, const char *route,
                    po_err (*fn)(struct po_store *s, void *ctx), void *ctx)
{
    if (d->c) {
        struct po_commit_item *it = calloc(1, sizeof *it);
        if (!it)
            return PO_ERR_NOMEM;
        it->work = (struct po_engine_work){fn, ctx, PO_OK};
        PO_ASSERT(po_strcpy(it->route, sizeof it->route, route) == PO_OK);
        po_committer_apply(d->c, it);
        po_err rc = it->work.rc;
        free(it);
        return rc;
    }
    char err[PO_ERRBUF_SIZE];
    po_err rc = po_store_begin(d->s, err, sizeof err);
    if (!rc)
        rc = fn(d->s, ctx);
    if (!rc)
        rc = po_store_commit(d->s, err, sizeof err);
    else
        po_store_rollback(d->s);
    return rc;
}
