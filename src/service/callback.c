/*
 * callback.c — one channel callback, end to end, in one direction:
 *   1. the tenant's account for the channel (store, unsealed)
 *   2. the adapter: verify over the raw body, decrypt, normalise
 *   3. for WeChat profit sharing only: our order from the payment it names
 *   4. the engine: one transaction, the three layers
 * and the decision that http/ turns into the channel's ack: FAIL (4xx) for
 * a refused request, FAIL (5xx) for a transient failure, SUCCESS for
 * applied, duplicate, rejected, suspense and ignored — decided only after
 * the engine's COMMIT returned. Nothing here logs a body, a key or a
 * payer's data.
 */
#include "service.h"

#include "../engine/admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void decide(struct po_callback_decision *out, enum po_outcome_kind kind,
                   enum po_reason reason)
{
    out->outcome.kind = kind;
    out->outcome.reason = reason;
    out->fail_status = po_outcome_acks(kind) ? 0 : po_reason_status(reason);
    PO_ASSERT(po_outcome_acks(kind) || out->fail_status >= 400);
}

/* Refused before the engine: counted and logged, nothing recorded. */
static void refuse(const struct po_callback_ctx *ctx, const char *tenant,
                   const struct po_channel_ops *ch, struct po_callback_decision *out,
                   enum po_reason reason, const char *detail)
{
    decide(out, PO_OUT_INVALID, reason);
    (void)snprintf(out->detail, sizeof out->detail, "%s", detail ? detail : "");
    po_log(PO_LOG_WARN, "request %s: tenant %.64s: %s callback refused: %s (%s)", ctx->request_id,
           tenant, ch->name, po_reason_name(reason), out->detail);
}

static void transient(struct po_callback_decision *out, enum po_reason reason)
{
    decide(out, PO_OUT_RETRY, reason);
}

/* Steps 3 and 4 for a verified event. */
static void apply_event(const struct po_callback_ctx *ctx, struct po_store *s,
                        const struct po_channel_ops *ch, const char *tenant,
                        struct po_notify_result *res, struct po_callback_decision *out)
{
    struct po_event *ev = &res->ev;
    /* WeChat profit sharing names the payment; find our order by it. An
     * unknown payment leaves a findable trace: the engine rejects it as
     * unknown_order with an alert. */
    if (res->pay_txn_id[0] && !ev->out_trade_no[0]) {
        po_err rc = po_order_by_txn(s, ev->tenant, ch->name, res->pay_txn_id, ev->out_trade_no,
                                    sizeof ev->out_trade_no);
        if (rc == PO_ERR_NOT_FOUND)
            PO_ASSERT(po_strcpy(ev->out_trade_no, sizeof ev->out_trade_no, res->pay_txn_id) ==
                      PO_OK);
        else if (rc) {
            transient(out, PO_R_STORE_UNAVAILABLE);
            return;
        }
        char verr[PO_ERRBUF_MAX];
        if (po_event_validate(ev, verr, sizeof verr)) {
            refuse(ctx, tenant, ch, out, PO_R_MALFORMED_RESOURCE, verr);
            return;
        }
    }
    PO_ASSERT(po_strcpy(out->out_trade_no, sizeof out->out_trade_no, ev->out_trade_no) == PO_OK);
    po_err rc = po_engine_apply(s, NULL, ev, &out->outcome);
    PO_ASSERT(rc == PO_OK);
    decide(out, out->outcome.kind, out->outcome.reason);
}

void po_callback_handle(const struct po_callback_ctx *ctx, const struct po_channel_ops *ch,
                        const char *tenant, const struct po_notify_req *req, bool body_too_large,
                        struct po_callback_decision *out)
{
    memset(out, 0, sizeof *out);
    struct po_store *s = NULL;
    struct po_channel_account *acct = NULL;
    struct po_notify_result *res = NULL;
    char err[PO_ERRBUF_MAX] = "";
    if (body_too_large) {
        refuse(ctx, tenant, ch, out, PO_R_BODY_TOO_LARGE, "body too large");
        return;
    }
    if (!po_id_valid(tenant, PO_ID_MAX)) {
        refuse(ctx, "-", ch, out, PO_R_UNKNOWN_TENANT, "not a tenant id");
        return;
    }
    acct = calloc(1, sizeof *acct);
    res = calloc(1, sizeof *res);
    if (!acct || !res) {
        transient(out, PO_R_NOMEM);
        goto out;
    }
    if (po_store_pool_acquire(ctx->pool, PO_POOL_WAIT_MS, &s, err, sizeof err)) {
        po_log(PO_LOG_WARN, "request %s: %s", ctx->request_id, err);
        transient(out, PO_R_POOL_EXHAUSTED);
        goto out;
    }
    po_err rc = po_account_fetch(s, ctx->master_key, tenant, ch->name, acct, err, sizeof err);
    if (rc == PO_ERR_NOT_FOUND) {
        refuse(ctx, tenant, ch, out, PO_R_UNKNOWN_TENANT,
               "unknown tenant or channel not configured");
        goto out;
    }
    if (rc) {
        if (rc == PO_ERR_STORE)
            po_log(PO_LOG_ERROR, "tenant %s: %s account cannot be loaded: %s", tenant, ch->name,
                   err);
        transient(out, PO_R_STORE_UNAVAILABLE);
        goto out;
    }
    if (po_channel_parse(acct, req, res)) {
        transient(out, PO_R_NOMEM);
        goto out;
    }
    switch (res->status) {
    case PO_NOTIFY_REJECT:
        refuse(ctx, tenant, ch, out, res->reason, res->detail);
        break;
    case PO_NOTIFY_IGNORE:
        decide(out, PO_OUT_IGNORED, PO_R_NONE);
        break;
    case PO_NOTIFY_MISMATCH: {
        /* Verified, but for another merchant or app: an alert, never a
         * credit, and the channel stops resending. */
        char verr[PO_ERRBUF_MAX];
        if (po_event_validate(&res->ev, verr, sizeof verr)) {
            refuse(ctx, tenant, ch, out, PO_R_MALFORMED_RESOURCE, verr);
            break;
        }
        PO_ASSERT(po_strcpy(out->out_trade_no, sizeof out->out_trade_no, res->ev.out_trade_no) ==
                  PO_OK);
        if (po_engine_alert(s, &res->ev, res->reason, res->detail))
            transient(out, PO_R_STORE_UNAVAILABLE);
        else
            decide(out, PO_OUT_REJECTED, res->reason);
        break;
    }
    case PO_NOTIFY_EVENT:
        apply_event(ctx, s, ch, tenant, res, out);
        break;
    }
out:
    if (s)
        po_store_pool_release(ctx->pool, s);
    if (acct)
        po_channel_account_free(acct);
    free(acct);
    free(res);
}
