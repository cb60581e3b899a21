/*
 * callback.c — one channel callback, end to end, in one direction:
 *   1. the tenant's account for the channel (cached in memory: account_cache.c)
 *   2. the adapter: verify over the raw body, decrypt, normalise
 *   3. for WeChat profit sharing only: our order from the payment it names
 *   4. the committer: the event in a batch, one transaction, the three layers
 * and the decision that http/ turns into the channel's ack: FAIL (4xx) for
 * a refused request, FAIL (5xx) for a transient failure, SUCCESS for
 * applied, duplicate, rejected, suspense and ignored — decided only after
 * the batch's COMMIT returned.
 *
 * Threads: steps 1-2 run on the caller's (an HTTP event thread) when the
 * account is cached — verification is CPU work, done in parallel on every
 * event thread. Anything that reads the database (loading or re-checking
 * an account, the profit-sharing look-up, writing an alert) goes to the
 * worker pool, so an event thread never waits for the database. No store
 * connection is held while an event waits for its batch.
 * Nothing here logs a body, a key or a payer's data.
 */
#include "callback.h"

#include "../../engine/objects.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void decide(struct po_callback *cb, enum po_outcome_kind kind, enum po_reason reason)
{
    struct po_callback_decision *d = &cb->decision;
    d->outcome.kind = kind;
    d->outcome.reason = reason;
    d->fail_status = po_outcome_acks(kind) ? 0 : po_reason_status(reason);
    PO_ASSERT(po_outcome_acks(kind) || d->fail_status >= 400);
}

/* A log line about one callback, after its decision: like its access line
 * it names the tenant, the channel, the event's key (once verified; "-"
 * before, and for a key that is not printable) and the outcome. */
static void cb_log(const struct po_callback *cb, enum po_log_level lvl, const char *fmt, ...)
    PO_PRINTF(3, 4);
static void cb_log(const struct po_callback *cb, enum po_log_level lvl, const char *fmt, ...)
{
    char msg[512], key[PO_KEY_SIZE] = "";
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!cb->verified ||
        (cb->res.status != PO_NOTIFY_EVENT && cb->res.status != PO_NOTIFY_MISMATCH) ||
        po_event_key(&cb->res.ev, key, sizeof key) != PO_OK || !po_id_valid(key, PO_KEY_SIZE))
        (void)snprintf(key, sizeof key, "-");
    po_log(lvl, "request %s: tenant %.64s, channel %s, key %s, outcome %s: %s", cb->request_id,
           po_id_valid(cb->tenant, PO_ID_MAX) ? cb->tenant : "-", cb->ch->name, key,
           po_outcome_name(cb->decision.outcome.kind), msg);
}

/* Refused before the engine: counted and logged, nothing recorded. */
static void refuse(struct po_callback *cb, enum po_reason reason, const char *detail)
{
    decide(cb, PO_OUT_INVALID, reason);
    (void)snprintf(cb->decision.detail, sizeof cb->decision.detail, "%s", detail ? detail : "");
    cb_log(cb, PO_LOG_WARN, "refused: %s (%s)", po_reason_name(reason), cb->decision.detail);
}

/* The decision is final: let go of the account. */
static void settle(struct po_callback *cb)
{
    po_accounts_release(cb->acct);
    cb->acct = NULL;
}

/* Final from another thread than start()'s. */
static void finish(struct po_callback *cb)
{
    settle(cb);
    cb->done(cb);
}

static void worker_job(void *arg);
static bool to_worker(struct po_callback *cb);

static void committed(struct po_commit_item *it)
{
    struct po_callback *cb = it->user;
    if (it->stale && !cb->restale) {
        /* The account changed after it verified this callback: verify
         * again with the stored one (once; a second change in between
         * is answered retry and the channel resends). */
        cb->restale = true;
        if (to_worker(cb))
            return;
        finish(cb);
        return;
    }
    decide(cb, it->out.kind, it->out.reason);
    cb->decision.outcome = it->out;
    finish(cb);
}

/* The callback as received (its headers, in order, and its body), for its
 * record in the batch that applies it: NULL when recording is off. */
static po_err make_record(struct po_callback *cb, struct po_audit_record **out)
{
    *out = NULL;
    if (!cb->ctx->record)
        return PO_OK;
    const struct po_notify_req *q = &cb->req;
    char stack[4096], *h = stack;
    size_t need = q->headers ? q->headers(q->hctx, stack, sizeof stack) : 0;
    if (need >= sizeof stack) {
        if (!(h = malloc(need + 1)))
            return PO_ERR_NOMEM;
        PO_ASSERT(q->headers(q->hctx, h, need + 1) == need);
    }
    /* when it arrived, on the wall clock */
    int64_t ago_ms = cb->arrived_us ? (int64_t)((po_now_us() - cb->arrived_us) / 1000) : 0;
    po_err rc = po_audit_record_new(
        &(struct po_audit_in){.tenant = cb->tenant,
                              .request_id = cb->request_id ? cb->request_id : "",
                              .channel = cb->ch->name,
                              .path = q->path ? q->path : "",
                              /* an unmapped callback's may be anything */
                              .out_trade_no = po_id_valid(cb->res.ev.out_trade_no, PO_ID_MAX)
                                                  ? cb->res.ev.out_trade_no
                                                  : "",
                              .received_ms = po_clock_now_ms() - ago_ms,
                              .headers = need ? h : "",
                              .headers_len = need,
                              .body = q->body,
                              .body_len = q->body_len},
        out);
    if (h != stack)
        free(h);
    return rc;
}

/* Queues cb->item (filled but for these) with the callback's deadline;
 * true when done() will come from the committer. */
static bool to_committer(struct po_callback *cb, void (*done)(struct po_commit_item *it))
{
    po_err rc = make_record(cb, &cb->item.record);
    if (rc) {
        decide(cb, PO_OUT_RETRY, rc == PO_ERR_NOMEM ? PO_R_NOMEM : PO_R_STORE_ERROR);
        cb_log(cb, PO_LOG_WARN, "the callback's record cannot be made: %s", po_err_name(rc));
        return false;
    }
    cb->item.done = done;
    cb->item.user = cb;
    if (cb->ctx->deadline_ms > 0 && cb->arrived_us)
        cb->item.deadline_us = cb->arrived_us + (uint64_t)cb->ctx->deadline_ms * 1000;
    if (po_committer_submit(cb->ctx->committer, &cb->item) == PO_OK)
        return true;
    po_audit_record_free(cb->item.record);
    cb->item.record = NULL;
    decide(cb, PO_OUT_RETRY, PO_R_POOL_EXHAUSTED);
    cb_log(cb, PO_LOG_WARN, "the committer's queue is full");
    return false;
}

/* A work with nothing to write: an ignored callback's batch holds only
 * its record. */
static po_err record_only(struct po_store *s, void *ctx)
{
    (void)s;
    (void)ctx;
    return PO_OK;
}

/* The record of a duplicate answered from the committer's table, once its
 * batch is over (nobody waits for it). */
static void recorded(struct po_commit_item *it)
{
    if (it->work.rc != PO_OK)
        po_log(PO_LOG_WARN,
               "tenant %s, order %s: the record of a duplicate answered from memory was not"
               " written (%s)",
               it->ev.tenant, it->ev.out_trade_no, po_err_name(it->work.rc));
    free(it);
}

/*
 * A redelivery of an event the committer's table holds (committed,
 * applied or duplicate): answered duplicate now, without a batch. Its
 * record goes into the committer's next batch on its own, nobody waiting
 * (docs/operations.md, "Disputes: the callback record"). False when that
 * record cannot be queued (the committer's queue full, no memory): then the
 * callback goes the usual way.
 */
static bool known_duplicate(struct po_callback *cb)
{
    if (cb->ctx->record) {
        struct po_commit_item *it = calloc(1, sizeof *it);
        if (!it || make_record(cb, &it->record) != PO_OK) {
            free(it);
            return false;
        }
        it->ev = cb->res.ev; /* its route, and its log line */
        it->work = (struct po_engine_work){record_only, NULL, PO_OK};
        it->done = recorded;
        if (po_committer_submit(cb->ctx->committer, it) != PO_OK) {
            po_audit_record_free(it->record);
            free(it);
            return false;
        }
    }
    decide(cb, PO_OUT_DUPLICATE, PO_R_NONE);
    cb->decision.outcome.layer = 1; /* the processed record, remembered */
    cb->decision.remembered = true;
    return true;
}

/* The decision names the order of the event verification read (one that
 * goes to the committer: applied, or alerted as another merchant's). */
static void name_order(struct po_callback *cb)
{
    PO_ASSERT(po_strcpy(cb->decision.out_trade_no, sizeof cb->decision.out_trade_no,
                        cb->res.ev.out_trade_no) == PO_OK);
}

/* An event that verification read but that is not well formed is refused
 * as such; false when it is. */
static bool malformed(struct po_callback *cb)
{
    char verr[PO_ERRBUF_SIZE];
    if (po_event_validate(&cb->res.ev, verr, sizeof verr) == PO_OK)
        return false;
    refuse(cb, PO_R_MALFORMED_RESOURCE, verr);
    return true;
}

/* Makes the event's item for the committer (the event, and the token of
 * the account that verified it) and hands it over — unless the committer's
 * table holds the event: then it is answered duplicate now. True when
 * done() will come from the committer. */
static bool submit(struct po_callback *cb)
{
    name_order(cb);
    memset(&cb->item, 0, sizeof cb->item);
    cb->item.ev = cb->res.ev;
    po_accounts_token(cb->acct, &cb->item.guard);
    cb->item.has_guard = true;
    if (po_committer_known(cb->ctx->committer, &cb->item.ev) && known_duplicate(cb))
        return false; /* decided */
    return to_committer(cb, committed);
}

/* To the worker pool; true when done() will come from there. */
static bool to_worker(struct po_callback *cb)
{
    if (po_workers_submit(cb->ctx->workers, cb->tenant, worker_job, cb) == PO_OK)
        return true;
    decide(cb, PO_OUT_RETRY, PO_R_POOL_EXHAUSTED);
    cb_log(cb, PO_LOG_WARN, "the worker queue is full");
    return false;
}

static po_err verify(struct po_callback *cb)
{
    cb->verified = true;
    memset(&cb->res, 0, sizeof cb->res);
    return po_channel_parse(po_account_of(cb->acct), &cb->req, &cb->res);
}

/* Failures that a changed key or secret (or merchant id) explains. */
static bool stale_account_could_explain(const struct po_notify_result *r)
{
    if (r->status == PO_NOTIFY_MISMATCH)
        return true;
    return r->status == PO_NOTIFY_REJECT &&
           (r->reason == PO_R_UNKNOWN_SERIAL || r->reason == PO_R_BAD_SIGNATURE ||
            r->reason == PO_R_DECRYPT_FAILED);
}

/* Was the account changed since it was cached? When it was, verify again
 * with the new one. Worker thread only. */
static po_err recheck(struct po_callback *cb, struct po_store *s)
{
    char err[PO_ERRBUF_SIZE] = "";
    bool changed = false;
    cb->rechecked = true;
    po_err rc = po_accounts_recheck(cb->ctx->accounts, s, &cb->acct, &changed, err, sizeof err);
    if (rc == PO_ERR_NOT_FOUND) {
        refuse(cb, PO_R_UNKNOWN_TENANT, "channel no longer configured");
        return PO_ERR_NOT_FOUND;
    }
    if (rc) {
        decide(cb, PO_OUT_RETRY, rc == PO_ERR_NOMEM ? PO_R_NOMEM : PO_R_STORE_UNAVAILABLE);
        cb_log(cb, PO_LOG_WARN, "account re-check: %s", err);
        return rc;
    }
    if (!changed)
        return PO_OK; /* unchanged: the verdict stands */
    return verify(cb);
}

static void alerted(struct po_commit_item *it)
{
    struct po_callback *cb = it->user;
    if (it->work.rc == PO_OK)
        decide(cb, cb->alert_kind, cb->res.reason);
    else /* not written: at its deadline, or the batch did not commit */
        decide(cb, PO_OUT_RETRY,
               it->out.kind == PO_OUT_RETRY ? it->out.reason : PO_R_STORE_UNAVAILABLE);
    finish(cb);
}

/* Hands the verification result's alert to the committer, to be written
 * in a batch like an event (with the callback's deadline); once it is,
 * the decision is kind (the ack is success), retry when it is not. True
 * when done() will come from the committer. */
static bool submit_alert(struct po_callback *cb, enum po_outcome_kind kind)
{
    const struct po_notify_result *res = &cb->res;
    memset(&cb->item, 0, sizeof cb->item);
    cb->item.ev = res->ev;
    cb->item.alert.reason = res->reason;
    (void)snprintf(cb->item.alert.detail, sizeof cb->item.alert.detail, "%s", res->detail);
    PO_ASSERT(po_strcpy(cb->item.alert.outcome, sizeof cb->item.alert.outcome,
                        po_outcome_name(kind)) == PO_OK);
    cb->alert_kind = kind;
    return to_committer(cb, alerted);
}

/*
 * What comes after verification. s is a store connection on a worker
 * thread, or NULL on an event thread (then anything that needs the
 * database goes to the worker pool). Returns true when the decision will
 * come through done() (the committer or a worker), false when it is final
 * in cb->decision now.
 */
static bool after_verify(struct po_callback *cb, struct po_store *s)
{
    struct po_notify_result *res = &cb->res;
    if (stale_account_could_explain(res) && !cb->rechecked) {
        if (!s)
            return to_worker(cb);
        po_err rc = recheck(cb, s);
        if (rc == PO_ERR_NOT_FOUND)
            return false;
        if (rc) {
            decide(cb, PO_OUT_RETRY, rc == PO_ERR_NOMEM ? PO_R_NOMEM : PO_R_STORE_UNAVAILABLE);
            return false;
        }
    }
    switch (res->status) {
    case PO_NOTIFY_REJECT:
        refuse(cb, res->reason, res->detail);
        return false;
    case PO_NOTIFY_IGNORE:
        decide(cb, PO_OUT_IGNORED, PO_R_NONE);
        if (!cb->ctx->record)
            return false;
        /* nothing to apply, but verified: its record still goes in a
         * batch, and the ack waits for it like any other */
        memset(&cb->item, 0, sizeof cb->item);
        cb->item.work = (struct po_engine_work){record_only, NULL, PO_OK};
        cb->alert_kind = PO_OUT_IGNORED; /* decided by alerted(), like an alert's */
        return to_committer(cb, alerted);
    case PO_NOTIFY_UNMAPPED:
        /* Verified, but nothing payonce can apply: one alert keyed by the
         * channel's event id (a resend finds it there), and success, so the
         * channel stops resending. */
        return submit_alert(cb, PO_OUT_IGNORED);
    case PO_NOTIFY_MISMATCH:
        /* Verified, but for another merchant or app: an alert, never a
         * credit, and the channel stops resending. */
        if (malformed(cb))
            return false;
        name_order(cb);
        return submit_alert(cb, PO_OUT_REJECTED);
    case PO_NOTIFY_EVENT:
        break;
    }
    struct po_event *ev = &res->ev;
    /* WeChat profit sharing names the payment; find our order by it. An
     * unknown payment leaves a findable trace: the engine rejects it as
     * unknown_order with an alert. */
    if (res->pay_txn_id[0] && !ev->out_trade_no[0]) {
        if (!s)
            return to_worker(cb);
        po_err rc = po_order_by_txn(s, ev->tenant, cb->ch->name, res->pay_txn_id, ev->out_trade_no,
                                    sizeof ev->out_trade_no);
        if (rc == PO_ERR_NOT_FOUND)
            PO_ASSERT(po_strcpy(ev->out_trade_no, sizeof ev->out_trade_no, res->pay_txn_id) ==
                      PO_OK);
        else if (rc) {
            decide(cb, PO_OUT_RETRY, PO_R_STORE_UNAVAILABLE);
            return false;
        }
        if (malformed(cb))
            return false;
    }
    return submit(cb);
}

/* On a worker thread: what needs the database. */
static void worker_job(void *arg)
{
    struct po_callback *cb = arg;
    /* Once the event is with the committer, cb may be answered and gone
     * at any moment: only ctx is used after that. */
    const struct po_callback_ctx *ctx = cb->ctx;
    struct po_store *s = NULL;
    char err[PO_ERRBUF_SIZE] = "";
    /* The callback's deadline bounds its database work here too: the wait
     * for a connection, and every answer it waits for on it. */
    uint64_t deadline = ctx->deadline_ms > 0 && cb->arrived_us
                            ? cb->arrived_us + (uint64_t)ctx->deadline_ms * 1000
                            : 0,
             now = po_now_us();
    int wait_ms = PO_POOL_WAIT_MS;
    if (deadline && deadline <= now) {
        decide(cb, PO_OUT_RETRY, PO_R_DEADLINE_EXCEEDED);
        finish(cb);
        return;
    }
    if (deadline && (deadline - now) / 1000 < (uint64_t)wait_ms)
        wait_ms = (int)((deadline - now) / 1000);
    if (po_store_pool_acquire(ctx->pool, wait_ms, &s, err, sizeof err)) {
        decide(cb, PO_OUT_RETRY, PO_R_POOL_EXHAUSTED);
        cb_log(cb, PO_LOG_WARN, "%s", err);
        finish(cb);
        return;
    }
    po_store_set_deadline(s, deadline);
    bool pending = false;
    if (!cb->acct) {
        po_err rc = po_accounts_load(ctx->accounts, s, cb->tenant, cb->ch->name, &cb->acct, err,
                                     sizeof err);
        if (rc == PO_ERR_NOT_FOUND) {
            refuse(cb, PO_R_UNKNOWN_TENANT, "unknown tenant or channel not configured");
            goto out;
        }
        if (rc) {
            decide(cb, PO_OUT_RETRY, PO_R_STORE_UNAVAILABLE);
            if (rc == PO_ERR_STORE)
                cb_log(cb, PO_LOG_ERROR, "the account cannot be loaded: %s", err);
            goto out;
        }
        cb->rechecked = true; /* just loaded: current */
    } else if (cb->restale && !cb->rechecked) {
        po_err rc = recheck(cb, s); /* verifies again when it changed */
        if (rc == PO_ERR_NOT_FOUND)
            goto out;
        if (rc) {
            decide(cb, PO_OUT_RETRY, rc == PO_ERR_NOMEM ? PO_R_NOMEM : PO_R_STORE_UNAVAILABLE);
            goto out;
        }
    }
    po_err vrc = cb->verified ? PO_OK : verify(cb);
    if (vrc) {
        decide(cb, PO_OUT_RETRY, vrc == PO_ERR_NOMEM ? PO_R_NOMEM : PO_R_CRYPTO_ERROR);
        goto out;
    }
    pending = after_verify(cb, s);
out:
    po_store_set_deadline(s, 0);
    po_store_pool_release(ctx->pool, s);
    if (!pending)
        finish(cb);
}

static bool start(const struct po_callback_ctx *ctx, struct po_callback *cb)
{
    memset(&cb->decision, 0, sizeof cb->decision);
    cb->ctx = ctx;
    cb->acct = NULL;
    cb->verified = cb->rechecked = cb->restale = false;
    memset(&cb->res, 0, sizeof cb->res);
    if (cb->body_too_large) {
        refuse(cb, PO_R_BODY_TOO_LARGE, "body too large");
        return false;
    }
    if (!po_id_valid(cb->tenant, PO_ID_MAX)) {
        refuse(cb, PO_R_UNKNOWN_TENANT, "not a tenant id");
        return false;
    }
    cb->acct = po_accounts_get(ctx->accounts, cb->tenant, cb->ch->name);
    if (!cb->acct)
        return to_worker(cb); /* not cached yet: loading reads the database */
    po_err rc = verify(cb);
    if (rc) {
        decide(cb, PO_OUT_RETRY, rc == PO_ERR_NOMEM ? PO_R_NOMEM : PO_R_CRYPTO_ERROR);
        settle(cb);
        return false;
    }
    bool pending = after_verify(cb, NULL);
    if (!pending)
        settle(cb);
    return pending;
}

void po_callback_summarize(const struct po_callback *cb, uint64_t now_us,
                           struct po_callback_summary *out)
{
    const struct po_callback_decision *d = &cb->decision;
    /* the event it carried, when verification read one */
    const struct po_event *ev =
        cb->verified && (cb->res.status == PO_NOTIFY_EVENT || cb->res.status == PO_NOTIFY_MISMATCH)
            ? &cb->res.ev
            : NULL;
    bool paid = d->outcome.kind == PO_OUT_APPLIED && cb->item.ev.type == PO_EV_PAY_SUCCESS;
    *out = (struct po_callback_summary){
        .ch = cb->ch,
        .tenant = po_id_valid(cb->tenant, PO_ID_MAX) ? cb->tenant : NULL,
        .out_trade_no = po_id_valid(d->out_trade_no, PO_ID_MAX) ? d->out_trade_no : NULL,
        .request_id = cb->request_id,
        .micros = now_us - cb->arrived_us,
        .outcome = d->outcome,
        .fail_status = d->fail_status,
        .remembered = d->remembered,
        .verified = cb->verified,
        .outcome_name = po_outcome_name(d->outcome.kind),
        .reason_name = po_reason_name(d->outcome.reason),
        .event_type = ev ? po_event_type_name(ev->type) : NULL,
        .out_refund_no = ev ? ev->out_refund_no : NULL,
        .credited_minor = paid ? cb->item.ev.amount_minor : 0,
        .currency = paid ? cb->item.ev.currency : NULL};
    if (!ev || po_event_key(ev, out->key, sizeof out->key) != PO_OK)
        out->key[0] = '\0';
}

bool po_callback_start(const struct po_callback_ctx *ctx, struct po_callback *cb)
{
    /* Announced while it is verified here: a committer about to commit a
     * batch waits a moment for it (one commit for both). */
    po_committer_expect(ctx->committer, 1);
    bool pending = start(ctx, cb);
    po_committer_expect(ctx->committer, -1);
    return pending;
}
