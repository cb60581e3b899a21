/*
 * refund_submit.c — hands an API refund (submit_state 'pending') to its
 * channel's refund API (channel ops refund_submit) after the request's
 * transaction committed, and records what the channel decided:
 *   submitted -> the refund stays PROCESSING until the refund-result
 *                notification (engine) moves it, once
 *   rejected  -> the refund is CLOSED, its reservation released and an
 *                alert recorded, in one transaction (guarded: only a refund
 *                still PROCESSING and pending closes)
 *   pending   -> attempts counted; serve's jobs submit it again (the
 *                channels are idempotent on out_refund_no); a channel's
 *                429 stops the round submitting that tenant's refunds to it
 * A channel without a refund API never gets here: its refunds are
 * 'manual' (made in the channel; payonce applies the notification).
 */
#include "../accounts/account.h"
#include "order_query.h"
#include "refund_submit.h"

#include "../../engine/objects.h"
#include "../../engine/alert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The refund if it is still PROCESSING and pending submission. */
static po_err load_pending(struct po_store *s, const char *tenant, const char *out_refund_no,
                           struct po_refund_pending *out, bool *found)
{
    struct po_rows r;
    po_err rc =
        po_store_exec(s,
                      "SELECT r.out_trade_no, r.currency, COALESCE(r.channel, o.channel,"
                      " ''), r.amount, CASE WHEN r.suspense_key IS NULL THEN o.amount ELSE"
                      " r.amount END, COALESCE(r.txn_id, ''), CASE WHEN r.suspense_key IS"
                      " NULL THEN 0 ELSE 1 END, COALESCE(o.channel_order_id, ''),"
                      " COALESCE(o.channel_txn_id, '') FROM refund r JOIN pay_order o ON"
                      " o.tenant_id = r.tenant_id AND o.out_trade_no = r.out_trade_no"
                      " WHERE r.tenant_id = ? AND r.out_refund_no = ? AND"
                      " r.status = 'PROCESSING' AND r.submit_state = 'pending'",
                      PO_PARAMS(PO_TEXT(tenant), PO_TEXT(out_refund_no)), &r, NULL, NULL, 0);
    if (rc)
        return rc;
    *found = r.nrows == 1;
    if (*found && (po_strcpy(out->out_trade_no, sizeof out->out_trade_no, po_rows_get(&r, 0, 0)) ||
                   po_strcpy(out->currency, sizeof out->currency, po_rows_get(&r, 0, 1)) ||
                   po_strcpy(out->channel, sizeof out->channel, po_rows_get(&r, 0, 2)) ||
                   po_rows_i64(&r, 0, 3, &out->amount) || po_rows_i64(&r, 0, 4, &out->total) ||
                   po_strcpy(out->txn_id, sizeof out->txn_id, po_rows_get(&r, 0, 5))))
        rc = PO_ERR_STORE;
    int64_t suspense = 0;
    if (*found && !rc && po_rows_i64(&r, 0, 6, &suspense))
        rc = PO_ERR_STORE;
    out->suspense = suspense != 0;
    /* ids longer than the bound are no channel's: left out */
    if (*found && !rc &&
        po_strcpy(out->channel_order_id, sizeof out->channel_order_id, po_rows_get(&r, 0, 7)))
        out->channel_order_id[0] = '\0';
    if (*found && !rc &&
        po_strcpy(out->channel_txn_id, sizeof out->channel_txn_id, po_rows_get(&r, 0, 8)))
        out->channel_txn_id[0] = '\0';
    po_rows_free(&r);
    return rc;
}

/* A refund the channel refused, in the transaction that closed it: the
 * tenant's refund.closed event, then its alert (row, alert.raised, log). */
static po_err rejected_events(struct po_store *s, const char *tenant, const char *out_refund_no,
                              const char *key, const char *akey, const struct po_refund_pending *p,
                              const char *detail, const char *error, const char *now, char *err,
                              size_t errcap)
{
    struct po_outbox_json *j = malloc(sizeof *j);
    if (!j)
        return PO_ERR_NOMEM;
    po_outbox_json_init(j);
    po_outbox_json_str(j, "object", "refund");
    po_outbox_json_str(j, "out_trade_no", p->out_trade_no);
    po_outbox_json_str(j, "out_refund_no", out_refund_no);
    po_outbox_json_i64(j, "amount", p->amount);
    po_outbox_json_str(j, "currency", p->currency);
    po_outbox_json_str(j, "status", "CLOSED");
    po_outbox_json_str(j, "reason", "refund_rejected_by_channel");
    po_outbox_json_str(j, "channel_error", error);
    po_err rc = po_outbox_put(s, tenant, key, "refund.closed", p->out_trade_no,
                              po_outbox_json_end(j), now, err, errcap);
    free(j);
    struct po_alert_new a = {.tenant = tenant,
                             .key = akey,
                             .reason = "refund_rejected_by_channel",
                             .idem_key = key,
                             .event_type = "REFUND_SUBMIT",
                             .source = "api",
                             .out_trade_no = p->out_trade_no,
                             .amount = p->amount,
                             .currency = p->currency,
                             .detail = detail};
    if (!rc)
        rc = po_alert_raise(s, &a, now, NULL, err, errcap);
    return rc;
}

static po_err record(struct po_store *s, const char *tenant, const char *out_refund_no,
                     const struct po_refund_pending *p, const char *decision, const char *error,
                     const char *refund_id)
{
    char now[PO_TIME_SIZE], err[PO_ERRBUF_SIZE];
    int64_t changes = 0;
    po_clock_now_iso(now, sizeof now);
    po_err rc = po_store_begin(s, err, sizeof err);
    if (rc)
        return rc;
    if (strcmp(decision, "rejected") == 0) {
        /* Guarded: only a refund still PROCESSING and pending closes, and
         * only then is its reservation released. */
        struct po_param u[] = {PO_TEXT(error), PO_TEXT(now), PO_TEXT(tenant),
                               PO_TEXT(out_refund_no)};
        rc = po_store_exec(s,
                           "UPDATE refund SET status = 'CLOSED', submit_state = 'rejected',"
                           " submit_attempts = submit_attempts + 1, submit_error = ?,"
                           " updated_at = ? WHERE tenant_id = ? AND out_refund_no = ? AND"
                           " status = 'PROCESSING' AND submit_state = 'pending'",
                           u, PO_NELEM(u), NULL, &changes, err, sizeof err);
        if (!rc && changes == 1 && !p->suspense) /* a suspense refund reserved nothing */
            rc = po_order_release_refund(s, tenant, p->out_trade_no, p->amount, now, &changes, err,
                                         sizeof err);
        char key[PO_ID_MAX + 16], akey[PO_ID_MAX + 48], detail[200];
        PO_ASSERT(po_fmt(key, sizeof key, "api:refund:%.64s", out_refund_no) == PO_OK);
        PO_ASSERT(po_fmt(akey, sizeof akey, "%s|refund_rejected_by_channel", key) == PO_OK);
        (void)snprintf(detail, sizeof detail, "the channel refused refund %s of order %s: %s",
                       out_refund_no, p->out_trade_no, error);
        if (!rc && changes == 1)
            rc = rejected_events(s, tenant, out_refund_no, key, akey, p, detail, error, now, err,
                                 sizeof err);
    } else {
        /* the channel's id of the refund, when its answer gave one: the
         * refund query asks by it */
        struct po_param u[] = {PO_TEXT(decision), PO_TEXT(error),  PO_TEXT(refund_id),
                               PO_TEXT(now),      PO_TEXT(tenant), PO_TEXT(out_refund_no)};
        rc = po_store_exec(s,
                           "UPDATE refund SET submit_state = ?, submit_attempts ="
                           " submit_attempts + 1, submit_error = NULLIF(?, ''),"
                           " channel_refund_id = COALESCE(NULLIF(?, ''), channel_refund_id),"
                           " updated_at = ? WHERE tenant_id = ? AND out_refund_no = ? AND"
                           " submit_state = 'pending'",
                           u, PO_NELEM(u), NULL, NULL, err, sizeof err);
    }
    if (rc) {
        po_store_rollback(s);
        return rc;
    }
    return po_store_commit(s, err, sizeof err);
}

static const char *const DECISIONS[] = {
    [PO_REFUND_PENDING] = "pending",
    [PO_REFUND_SUBMITTED] = "submitted",
    [PO_REFUND_REJECTED] = "rejected",
};

po_err po_refund_prepare(struct po_store *s, struct po_accounts *accounts,
                         const unsigned char *master, const char *tenant, const char *out_refund_no,
                         struct po_refund_job *job, bool *found)
{
    memset(job, 0, sizeof *job);
    job->ans.decision = PO_REFUND_PENDING;
    if (po_strcpy(job->tenant, sizeof job->tenant, tenant) ||
        po_strcpy(job->out_refund_no, sizeof job->out_refund_no, out_refund_no))
        return PO_ERR_INVALID;
    po_err rc = load_pending(s, tenant, out_refund_no, &job->p, found);
    if (rc || !*found)
        return rc;
    char err[PO_ERRBUF_SIZE] = "";
    job->ch = po_channel_find(job->p.channel);
    if (!job->ch || !job->ch->refund_submit) {
        /* stays pending, visible: the order's channel has no refund API */
        (void)snprintf(job->ans.code, sizeof job->ans.code, "no_refund_api");
    } else if ((rc = po_accounts_use(accounts, s, master, tenant, job->p.channel, &job->ref, err,
                                     sizeof err))) {
        po_log(PO_LOG_WARN, "tenant %s: refund %s cannot be submitted: %s account: %s", tenant,
               out_refund_no, job->p.channel, err);
        (void)snprintf(job->ans.code, sizeof job->ans.code, "no_channel_account");
        rc = PO_OK;
    } else {
        job->acct = po_account_of(job->ref);
        job->callable = true;
    }
    return rc;
}

po_err po_refund_call(struct po_refund_job *job)
{
    if (!job->callable)
        return PO_OK;
    struct po_refund_request req = {job->p.out_trade_no,
                                    job->out_refund_no,
                                    job->p.amount,
                                    job->p.total,
                                    job->p.currency,
                                    job->p.txn_id,
                                    job->p.channel_order_id,
                                    job->p.channel_txn_id,
                                    NULL};
    po_err rc = job->ch->refund_submit(job->acct, &req, &job->ans);
    job->callable = false;
    if (rc)
        return rc;
    po_log(job->ans.decision == PO_REFUND_SUBMITTED ? PO_LOG_INFO : PO_LOG_WARN,
           "tenant %s: refund %s submitted to %s: HTTP %ld -> %s %s", job->tenant,
           job->out_refund_no, job->p.channel, job->ans.http_status, DECISIONS[job->ans.decision],
           job->ans.code);
    return PO_OK;
}

po_err po_refund_record(struct po_store *s, const struct po_refund_job *job, char *state,
                        size_t cap)
{
    if (state && cap)
        state[0] = '\0';
    po_err rc = record(s, job->tenant, job->out_refund_no, &job->p, DECISIONS[job->ans.decision],
                       job->ans.code, job->ans.refund_id);
    if (!rc && state && po_strcpy(state, cap, DECISIONS[job->ans.decision]))
        state[0] = '\0';
    return rc;
}

void po_refund_job_free(struct po_refund_job *job)
{
    po_accounts_release(job->ref);
    job->ref = NULL;
    job->acct = NULL;
}

po_err po_refund_submit(struct po_store *s, struct po_accounts *accounts,
                        const unsigned char *master, const char *tenant, const char *out_refund_no,
                        char *state, size_t cap)
{
    struct po_refund_job *job = calloc(1, sizeof *job);
    bool found = false;
    if (state && cap)
        state[0] = '\0';
    if (!job)
        return PO_ERR_NOMEM;
    po_err rc = po_refund_prepare(s, accounts, master, tenant, out_refund_no, job, &found);
    if (!rc && found)
        rc = po_refund_call(job);
    if (!rc && found)
        rc = po_refund_record(s, job, state, cap);
    po_refund_job_free(job);
    free(job);
    return rc;
}

bool po_backoff_holds(const struct po_backoff *b, const char *tenant, const char *channel)
{
    for (int i = 0; i < b->n; i++)
        if (strcmp(b->e[i].tenant, tenant) == 0 && strcmp(b->e[i].channel, channel) == 0)
            return true;
    return false;
}

bool po_rate_limited(bool throttled, long http_status)
{
    return throttled || http_status == 429;
}

bool po_backoff_note(struct po_backoff *b, const char *tenant, const char *channel, bool limited,
                     const char *why)
{
    if (!limited || po_backoff_holds(b, tenant, channel))
        return false;
    po_log(PO_LOG_WARN,
           "tenant %s: %s answered with its rate limit (%s): this round asks it nothing more;"
           " what is left waits for the next round",
           tenant, channel, why);
    if (b->n < PO_BACKOFF_MAX &&
        po_strcpy(b->e[b->n].tenant, sizeof b->e[0].tenant, tenant) == PO_OK &&
        po_strcpy(b->e[b->n].channel, sizeof b->e[0].channel, channel) == PO_OK)
        b->n++;
    return true;
}

/* One pending refund submitted unless its tenant's channel is backed off
 * this round; *state as po_refund_submit's ("" when not submitted). */
static po_err submit_one(struct po_store *s, struct po_accounts *accounts,
                         const unsigned char *master, const char *tenant, const char *out_refund_no,
                         struct po_backoff *b, char *state, size_t cap)
{
    struct po_refund_job *job = calloc(1, sizeof *job);
    bool found = false;
    state[0] = '\0';
    if (!job)
        return PO_ERR_NOMEM;
    po_err rc = po_refund_prepare(s, accounts, master, tenant, out_refund_no, job, &found);
    if (!rc && found && !po_backoff_holds(b, tenant, job->p.channel)) {
        rc = po_refund_call(job);
        if (!rc)
            rc = po_refund_record(s, job, state, cap);
        if (!rc)
            (void)po_backoff_note(b, tenant, job->p.channel,
                                  po_rate_limited(job->ans.throttled, job->ans.http_status),
                                  job->ans.code);
    }
    po_refund_job_free(job);
    free(job);
    return rc;
}

po_err po_refund_submit_pending(struct po_store *s, struct po_accounts *accounts,
                                const unsigned char *master, int64_t min_age_s, int limit,
                                int *out_submitted)
{
    char cutoff[PO_TIME_SIZE];
    /* last attempt at least min_age_s ago, to the second */
    po_clock_iso_at((int64_t)time(NULL) - min_age_s + 1, cutoff, sizeof cutoff);
    struct po_rows r;
    struct po_param p[] = {PO_TEXT(cutoff), PO_I64(limit)};
    po_err rc = po_store_exec(s,
                              "SELECT tenant_id, out_refund_no FROM refund WHERE submit_state ="
                              " 'pending' AND status = 'PROCESSING' AND updated_at < ?"
                              " ORDER BY updated_at LIMIT ?",
                              p, PO_NELEM(p), &r, NULL, NULL, 0);
    if (rc)
        return rc;
    int n = 0;
    struct po_backoff *b = calloc(1, sizeof *b);
    for (int i = 0; b && i < r.nrows; i++) {
        char state[16];
        if (submit_one(s, accounts, master, po_rows_get(&r, i, 0), po_rows_get(&r, i, 1), b, state,
                       sizeof state) == PO_OK &&
            strcmp(state, "submitted") == 0)
            n++;
    }
    po_rows_free(&r);
    if (!b)
        return PO_ERR_NOMEM;
    free(b);
    if (out_submitted)
        *out_submitted = n;
    return PO_OK;
}
