/*
 * notify.c — one channel callback, end to end:
 *   tenant's channel account (404 FAIL when absent)
 *   adapter: verify over the raw body, decrypt, normalise (4xx FAIL)
 *   engine: one transaction, the three layers (5xx FAIL on transient)
 *   ack: SUCCESS for applied, duplicate, rejected, suspense, ignored —
 *        written only after the engine's COMMIT returned.
 * Nothing here logs a body, a key or a payer's data.
 */
#include "http_int.h"

#include "../engine/admin.h"
#include "../recon/recon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void answer(struct po_notify_answer *out, const char *channel, bool success,
                   unsigned status, const char *outcome, const char *reason, const char *message)
{
    po_channel_ack(channel, success, status, message, &out->ack);
    out->outcome = outcome;
    PO_ASSERT(po_strcpy(out->reason, sizeof out->reason, reason ? reason : "") == PO_OK);
}

/* Verification failures: which 4xx. */
static unsigned reject_status(const char *reason)
{
    if (strcmp(reason, "malformed_body") == 0 || strcmp(reason, "malformed_resource") == 0 ||
        strcmp(reason, "invalid_utf8") == 0 || strcmp(reason, "bad_charset") == 0)
        return 400;
    if (strcmp(reason, "body_too_large") == 0)
        return 413;
    return 401;
}

/* Loads and unseals the tenant's account for the channel. */
static po_err load_account(struct po_store *s, const unsigned char *master, const char *tenant,
                           const char *channel, struct po_channel_account *out)
{
    char err[PO_ERRBUF_MAX] = "";
    po_err rc = po_account_fetch(s, master, tenant, channel, out, err, sizeof err);
    if (rc == PO_ERR_STORE)
        po_log(PO_LOG_ERROR, "tenant %s: %s account cannot be loaded: %s", tenant, channel, err);
    return rc;
}

static void apply_event(struct po_store *s, const char *channel, struct po_notify_result *res,
                        struct po_notify_answer *out)
{
    struct po_event *ev = &res->ev;
    /* WeChat profit sharing names the payment; find our order by it. */
    if (res->pay_txn_id[0] && !ev->out_trade_no[0]) {
        po_err rc = po_order_by_txn(s, ev->tenant, channel, res->pay_txn_id, ev->out_trade_no,
                                    sizeof ev->out_trade_no);
        if (rc == PO_ERR_NOT_FOUND)
            /* Leave a findable trace: the engine rejects it as unknown_order. */
            PO_ASSERT(po_strcpy(ev->out_trade_no, sizeof ev->out_trade_no, res->pay_txn_id) == PO_OK);
        else if (rc) {
            answer(out, channel, false, 500, "retry", "store_unavailable", "temporarily unavailable");
            return;
        }
    }
    char verr[PO_ERRBUF_MAX];
    if (po_event_validate(ev, verr, sizeof verr)) {
        po_metrics_verify_failure(channel, "malformed_resource");
        answer(out, channel, false, 400, "invalid", "malformed_resource", verr);
        return;
    }
    struct po_outcome o;
    po_err rc = po_engine_apply(s, NULL, ev, &o);
    PO_ASSERT(rc == PO_OK);
    PO_ASSERT(po_strcpy(out->out_trade_no, sizeof out->out_trade_no, ev->out_trade_no) == PO_OK);
    out->layer = o.layer;
    if (o.kind == PO_OUT_RETRY) {
        answer(out, channel, false, 500, "retry", o.reason, "temporarily unavailable, retry");
        return;
    }
    answer(out, channel, true, 0, po_outcome_name(o.kind), o.reason, NULL);
}

void po_notify_handle(const struct po_notify_ctx *ctx, const char *channel, const char *tenant,
                      const struct po_notify_req *req, bool body_too_large,
                      struct po_notify_answer *out)
{
    memset(out, 0, sizeof *out);
    struct po_store *s = NULL;
    struct po_channel_account *acct = NULL;
    struct po_notify_result *res = NULL;
    char err[PO_ERRBUF_MAX] = "";
    if (body_too_large) {
        po_metrics_verify_failure(channel, "body_too_large");
        answer(out, channel, false, 413, "invalid", "body_too_large", "body too large");
        return;
    }
    if (!po_id_valid(tenant, PO_ID_MAX)) {
        po_metrics_verify_failure(channel, "unknown_tenant");
        answer(out, channel, false, 404, "invalid", "unknown_tenant", "unknown tenant");
        return;
    }
    acct = calloc(1, sizeof *acct);
    res = calloc(1, sizeof *res);
    if (!acct || !res) {
        answer(out, channel, false, 500, "retry", "nomem", "temporarily unavailable");
        goto out;
    }
    if (po_store_pool_acquire(ctx->pool, PO_POOL_WAIT_MS, &s, err, sizeof err)) {
        po_log(PO_LOG_WARN, "request %s: %s", ctx->request_id, err);
        answer(out, channel, false, 503, "retry", "store_unavailable", "temporarily unavailable");
        goto out;
    }
    po_err rc = load_account(s, ctx->master_key, tenant, channel, acct);
    if (rc == PO_ERR_NOT_FOUND) {
        po_metrics_verify_failure(channel, "unknown_tenant");
        answer(out, channel, false, 404, "invalid", "unknown_tenant",
               "unknown tenant or channel not configured");
        goto out;
    }
    if (rc) {
        answer(out, channel, false, 500, "retry", "store_unavailable", "temporarily unavailable");
        goto out;
    }
    if (po_channel_parse(acct, req, res)) {
        answer(out, channel, false, 500, "retry", "nomem", "temporarily unavailable");
        goto out;
    }
    switch (res->status) {
    case PO_NOTIFY_REJECT:
        po_metrics_verify_failure(channel, res->reason);
        po_log(PO_LOG_WARN, "request %s: tenant %s: %s callback refused: %s (%s)",
               ctx->request_id, tenant, channel, res->reason, res->detail);
        answer(out, channel, false, reject_status(res->reason), "invalid", res->reason,
               res->reason);
        break;
    case PO_NOTIFY_IGNORE:
        answer(out, channel, true, 0, "ignored", "", NULL);
        break;
    case PO_NOTIFY_MISMATCH: {
        char verr[PO_ERRBUF_MAX];
        if (po_event_validate(&res->ev, verr, sizeof verr)) {
            po_metrics_verify_failure(channel, "malformed_resource");
            answer(out, channel, false, 400, "invalid", "malformed_resource", verr);
            break;
        }
        rc = po_engine_alert(s, &res->ev, res->reason, res->detail);
        if (rc)
            answer(out, channel, false, 500, "retry", "store_unavailable", "temporarily unavailable");
        else
            answer(out, channel, true, 0, "rejected", res->reason, NULL);
        PO_ASSERT(po_strcpy(out->out_trade_no, sizeof out->out_trade_no, res->ev.out_trade_no) == PO_OK);
        break;
    }
    case PO_NOTIFY_EVENT:
        apply_event(s, channel, res, out);
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
