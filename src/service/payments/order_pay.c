/*
 * order_pay.c — an order's payment created at its channel (order_pay.h).
 *
 * The order is recorded first, in its own transaction, so that nothing the
 * channel could notify ever names an order payonce does not have; then the
 * channel is asked with the order as stored (amount, currency, expiry), so
 * that every retry — with the same Idempotency-Key or another, in this
 * process or another — sends exactly the same request, which the channels
 * answer with the same payment (WeChat Pay and Alipay are idempotent on
 * out_trade_no for identical parameters, Stripe on payonce's
 * Idempotency-Key). The answer is recorded on the order once; later
 * creates answer the recorded payment without asking again.
 */
#include "../accounts/account.h"
#include "order_pay.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void refuse(struct po_pay_job *job, const char *code, const char *fmt, ...) PO_PRINTF(3, 4);
static void refuse(struct po_pay_job *job, const char *code, const char *fmt, ...)
{
    job->step = PO_PAYSTEP_REFUSED;
    PO_ASSERT(po_strcpy(job->code, sizeof job->code, code) == PO_OK);
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(job->err, sizeof job->err, fmt, ap);
    va_end(ap);
}

/* The order row as stored: status, pay_method, payment, expires_at. */
static po_err order_row(struct po_store *s, const char *tenant, const char *no, struct po_rows *r)
{
    char err[PO_ERRBUF_SIZE];
    return po_store_exec(s,
                         "SELECT status, COALESCE(pay_method, ''), COALESCE(payment, ''),"
                         " COALESCE(expires_at, '') FROM pay_order WHERE tenant_id = ? AND"
                         " out_trade_no = ?",
                         PO_PARAMS(PO_TEXT(tenant), PO_TEXT(no)), r, NULL, err, sizeof err);
}

static json_t *parse_payment(const char *text)
{
    json_t *j = NULL;
    if (!*text || po_json_parse(text, strlen(text), &j, NULL, 0) != PO_OK)
        return NULL;
    return j;
}

po_err po_order_pay_prepare(struct po_store *s, struct po_accounts *accounts,
                            const unsigned char *master, const struct po_order_spec *spec,
                            const struct po_pay_ask *ask, struct po_pay_job *job)
{
    memset(job, 0, sizeof *job);
    job->ch = spec->channel ? po_channel_find(spec->channel) : NULL;
    if (!job->ch || !job->ch->pay_create ||
        po_strcpy(job->tenant, sizeof job->tenant, spec->tenant) ||
        po_strcpy(job->out_trade_no, sizeof job->out_trade_no, spec->out_trade_no) ||
        po_strcpy(job->pay_method, sizeof job->pay_method, ask->pay_method) ||
        po_strcpy(job->currency, sizeof job->currency, spec->currency)) {
        refuse(job, "invalid_request", "pay_method %s needs a channel that creates payments",
               ask->pay_method);
        return PO_OK;
    }
    job->amount = spec->amount_minor;
    if ((ask->description && !(job->description = strdup(ask->description))) ||
        (ask->payer_openid && !(job->payer_openid = strdup(ask->payer_openid))) ||
        (ask->payer_ip && !(job->payer_ip = strdup(ask->payer_ip))) ||
        (ask->return_url && !(job->return_url = strdup(ask->return_url))))
        return PO_ERR_NOMEM;
    /* 1. the order, in its own transaction */
    po_err rc = po_store_begin(s, job->err, sizeof job->err);
    if (rc)
        return rc;
    rc = po_order_insert(s, spec, &job->created, job->code, sizeof job->code, job->err,
                         sizeof job->err);
    if (!rc)
        rc = po_store_commit(s, job->err, sizeof job->err);
    else
        po_store_rollback(s);
    if (rc && job->code[0]) { /* a business answer: the effect gives it again */
        job->step = PO_PAYSTEP_REFUSED;
        job->order_refused = true;
        return PO_OK;
    }
    if (rc)
        return rc;
    /* 2. what is recorded on it */
    struct po_rows r;
    if ((rc = order_row(s, spec->tenant, spec->out_trade_no, &r)))
        return rc;
    if (r.nrows != 1) {
        po_rows_free(&r);
        return PO_ERR_STORE;
    }
    const char *status = po_rows_get(&r, 0, 0), *method = po_rows_get(&r, 0, 1),
               *expires = po_rows_get(&r, 0, 3);
    if (*method && strcmp(method, ask->pay_method) != 0) {
        refuse(job, "order_exists", "the order's payment was created with pay_method %s", method);
    } else if (*method) {
        job->step = PO_PAYSTEP_STORED;
        job->payment = parse_payment(po_rows_get(&r, 0, 2));
    } else if (strcmp(status, "PAYING") != 0) {
        refuse(job, "order_not_payable", "the order is %s: no payment is created for it", status);
    } else {
        job->step = PO_PAYSTEP_CALL;
        job->expires_at = *expires ? po_clock_unix_of(expires) : 0;
    }
    po_rows_free(&r);
    if (job->step != PO_PAYSTEP_CALL)
        return PO_OK;
    /* 3. the tenant's account for the channel */
    char err[PO_ERRBUF_SIZE] = "";
    rc = po_accounts_use(accounts, s, master, spec->tenant, job->ch->name, &job->ref, err,
                         sizeof err);
    if (rc == PO_ERR_NOT_FOUND) {
        refuse(job, "channel_not_configured", "the tenant has no %s account (channel set)",
               job->ch->name);
        return PO_OK;
    }
    if (rc) {
        po_log(PO_LOG_WARN, "tenant %s: the %s account cannot be loaded to create %s: %s",
               spec->tenant, job->ch->name, spec->out_trade_no, err);
        return PO_ERR_STORE;
    }
    job->acct = po_account_of(job->ref);
    if (!job->acct->api_ready)
        refuse(job, "channel_not_configured",
               "the tenant's %s account cannot call the channel's API (channel set"
               " --api-base-url and its key)",
               job->ch->name);
    else if (job->ch->pay_notify_url && !job->acct->notify_url[0])
        refuse(job, "channel_not_configured",
               "the tenant's %s account has no notify URL to give the channel (channel set"
               " --notify-url)",
               job->ch->name);
    return PO_OK;
}

po_err po_order_pay_call(struct po_pay_job *job)
{
    struct po_pay_request rq = {
        job->tenant,     job->out_trade_no, job->pay_method,   job->amount,   job->currency,
        job->expires_at, job->description,  job->payer_openid, job->payer_ip, job->return_url};
    return job->ch->pay_create(job->acct, &rq, &job->ans);
}

po_err po_order_pay_record(struct po_store *s, const struct po_order_spec *spec,
                           struct po_pay_job *job, char *code, size_t codecap, char *err,
                           size_t errcap)
{
    bool created = false;
    po_err rc = po_order_insert(s, spec, &created, code, codecap, err, errcap);
    if (rc || job->step != PO_PAYSTEP_CALL || job->ans.state != PO_PAY_CREATED)
        return rc;
    char *text = po_json_dumps(job->ans.payment, JSON_COMPACT);
    if (!text)
        return PO_ERR_NOMEM;
    rc = po_order_set_payment(s, spec->tenant, spec->out_trade_no, job->pay_method,
                              job->ans.channel_id, text, code, codecap, err, errcap);
    free(text);
    return rc;
}

po_err po_order_payment(struct po_store *s, const char *tenant, const char *out_trade_no,
                        json_t **out)
{
    *out = NULL;
    struct po_rows r;
    po_err rc = order_row(s, tenant, out_trade_no, &r);
    if (rc)
        return rc;
    if (r.nrows == 1)
        *out = parse_payment(po_rows_get(&r, 0, 2));
    po_rows_free(&r);
    return PO_OK;
}

void po_pay_job_free(struct po_pay_job *job)
{
    po_accounts_release(job->ref);
    free(job->description);
    free(job->payer_openid);
    free(job->payer_ip);
    free(job->return_url);
    json_decref(job->payment);
    json_decref(job->ans.payment);
    memset(job, 0, sizeof *job);
}
