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

#include "../accounts/account.h"
#include "refund_submit.h"

#include "../../engine/objects.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QUERY_TRIES 5

/* Applies one event through the engine's door (serve's committer; the
 * offline CLI: s), retrying transient failures; PO_ERR_TRANSIENT if they
 * persist. */
static po_err apply(struct po_store *s, struct po_committer *committer, const struct po_event *ev,
                    struct po_outcome *out)
{
    struct po_door d = {s, committer};
    return po_door_apply_retrying(&d, ev, 1, out, QUERY_TRIES);
}

/* One more failed order in q, the first one's why kept, and in the log at
 * the default level (a failed query is the operator's to see). */
static void query_failed(struct po_query_report *q, const char *tenant, const char *no,
                         const char *why)
{
    if (q->failed++ == 0)
        (void)snprintf(q->first_failure, sizeof q->first_failure, "%.100s: %s", no, why);
    po_log(PO_LOG_WARN, "tenant %s: order query for %s failed: %s", tenant, no, why);
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
    if (!acct->api_ready) {
        po_errf(err, errcap,
                "the tenant's %s account has no API key to call the channel with (channel set"
                " --merchant-private-key-file, or --api-key-file for Stripe)",
                acct->channel);
        return PO_ERR_INVALID;
    }
    struct po_query_report q = {0};
    char cutoff[PO_TIME_SIZE]; /* created at least min_age_s ago, to the second */
    po_clock_iso_at((int64_t)time(NULL) - min_age_s + 1, cutoff, sizeof cutoff);
    struct po_rows rows;
    po_err rc = po_store_exec(
        s,
        "SELECT out_trade_no, COALESCE(channel_order_id, ''), COALESCE(channel_txn_id, '')"
        " FROM pay_order WHERE tenant_id = ? AND"
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
        struct po_order_ref ref = {no, po_rows_get(&rows, i, 1), po_rows_get(&rows, i, 2)};
        q.queried++;
        if (ch->order_query(acct, &ref, a)) {
            query_failed(&q, acct->tenant, no, "out of memory");
            continue;
        }
        if (a->state == PO_QUERY_NOT_PAID) {
            q.not_paid++;
            continue;
        }
        if (a->state == PO_QUERY_FAILED) {
            char why[PO_REASON_SIZE + 48];
            if (a->http_status)
                (void)snprintf(why, sizeof why, "HTTP %ld %s", a->http_status, a->why);
            else
                (void)snprintf(why, sizeof why, "no answer (%s)", a->why);
            query_failed(&q, acct->tenant, no, why);
            /* the channel's rate limit: the round backs off; the orders
             * left stay PAYING for the next one */
            if ((q.throttled = po_rate_limited(a->throttled, a->http_status))) {
                po_log(PO_LOG_WARN,
                       "tenant %s: %s answered with its rate limit: this round queries it nothing"
                       " more (%d orders wait for the next)",
                       acct->tenant, acct->channel, rows.nrows - i - 1);
                break;
            }
            continue;
        }
        q.paid++;
        struct po_outcome o;
        if (apply(s, committer, &a->ev, &o)) {
            query_failed(&q, acct->tenant, no,
                         "paid at the channel, but the engine answered retry (the database);"
                         " the next round credits it");
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

/* ---- closing an order at its channel first ---- */

po_err po_order_close_prepare(struct po_store *s, struct po_accounts *accounts,
                              const unsigned char *master, const char *tenant,
                              const char *out_trade_no, struct po_close_job *job)
{
    memset(job, 0, sizeof *job);
    if (po_strcpy(job->tenant, sizeof job->tenant, tenant) ||
        po_strcpy(job->out_trade_no, sizeof job->out_trade_no, out_trade_no))
        return PO_ERR_INVALID;
    struct po_rows rows;
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_store_exec(s,
                              "SELECT status, COALESCE(channel, ''),"
                              " COALESCE(channel_order_id, ''), COALESCE(channel_txn_id, '')"
                              " FROM pay_order WHERE tenant_id = ? AND out_trade_no = ?",
                              PO_PARAMS(PO_TEXT(tenant), PO_TEXT(out_trade_no)), &rows, NULL, err,
                              sizeof err);
    if (rc)
        return rc;
    if (rows.nrows != 1) {
        po_rows_free(&rows);
        return PO_ERR_NOT_FOUND;
    }
    bool paying = strcmp(po_rows_get(&rows, 0, 0), "PAYING") == 0;
    job->ch = po_channel_find(po_rows_get(&rows, 0, 1));
    /* ids longer than the bound are no channel's: left out */
    if (po_strcpy(job->channel_order_id, sizeof job->channel_order_id, po_rows_get(&rows, 0, 2)))
        job->channel_order_id[0] = '\0';
    if (po_strcpy(job->channel_txn_id, sizeof job->channel_txn_id, po_rows_get(&rows, 0, 3)))
        job->channel_txn_id[0] = '\0';
    po_rows_free(&rows);
    if (!paying || !job->ch || !job->ch->order_close || !job->ch->order_query)
        return PO_OK;
    rc = po_accounts_use(accounts, s, master, tenant, job->ch->name, &job->ref, err, sizeof err);
    if (rc == PO_ERR_NOT_FOUND) /* the tenant does not use the channel through payonce */
        return PO_OK;
    if (rc) {
        po_log(PO_LOG_WARN, "tenant %s: the %s account cannot be loaded to close %s: %s", tenant,
               job->ch->name, out_trade_no, err);
        return PO_ERR_STORE;
    }
    /* An account for notifications only does not let payonce call the
     * channel. */
    job->acct = po_account_of(job->ref);
    job->callable = job->acct->api_ready;
    return PO_OK;
}

po_err po_order_close_call(struct po_close_job *job, struct po_store *s,
                           struct po_committer *committer, struct po_close_report *out)
{
    memset(out, 0, sizeof *out);
    out->result = PO_CC_LOCAL;
    if (!job->callable)
        return PO_OK;
    struct po_close_answer ca;
    struct po_order_ref ref = {job->out_trade_no, job->channel_order_id, job->channel_txn_id};
    po_err rc = job->ch->order_close(job->acct, &ref, &ca);
    if (rc)
        return rc;
    out->http_status = ca.http_status;
    if (ca.state == PO_CLOSE_CLOSED) {
        out->result = PO_CC_CLOSED;
        return PO_OK;
    }
    out->result = PO_CC_UNDECIDED;
    (void)snprintf(out->why, sizeof out->why, "%s", ca.why);
    if (ca.state == PO_CLOSE_FAILED)
        return PO_OK;
    /* Refused: paid there, or no longer open. The query says which. */
    struct po_query_answer *qa = malloc(sizeof *qa);
    if (!qa)
        return PO_ERR_NOMEM;
    rc = job->ch->order_query(job->acct, &ref, qa);
    if (!rc && qa->state == PO_QUERY_NOT_PAID) {
        out->result = PO_CC_CLOSED;
    } else if (!rc && qa->state == PO_QUERY_PAID) {
        if (apply(s, committer, &qa->ev, &out->outcome) == PO_OK)
            out->result = PO_CC_PAID;
        else
            (void)snprintf(out->why, sizeof out->why, "store_unavailable");
    } else if (!rc) {
        out->http_status = qa->http_status;
        (void)snprintf(out->why, sizeof out->why, "query:%.50s", qa->why);
    }
    free(qa);
    return rc;
}

void po_close_job_free(struct po_close_job *job)
{
    po_accounts_release(job->ref);
    job->ref = NULL;
    job->acct = NULL;
}

/* ---- expiry: expired orders closed at their channel, then here ---- */

struct close_here {
    const char *tenant, *out_trade_no;
};

/* PAYING -> CLOSED here (a payment that won the race: nothing to close). */
static po_err close_here(struct po_store *s, void *ctx)
{
    struct close_here *x = ctx;
    char code[48] = "", err[PO_ERRBUF_SIZE] = "";
    bool now = false;
    po_err rc =
        po_order_close(s, x->tenant, x->out_trade_no, &now, code, sizeof code, err, sizeof err);
    return rc == PO_ERR_CONFLICT ? PO_OK : rc;
}

/* close_here through the door: serve's committer, or a transaction of its
 * own on s (the offline CLI). */
static po_err close_locally(struct po_store *s, struct po_committer *committer, const char *tenant,
                            const char *out_trade_no)
{
    struct close_here x = {tenant, out_trade_no};
    struct po_door d = {s, committer};
    char route[PO_ID_MAX * 2 + 2];
    PO_ASSERT(po_fmt(route, sizeof route, "%s|%s", tenant, out_trade_no) == PO_OK);
    return po_door_work(&d, route, close_here, &x);
}

po_err po_order_close_everywhere(struct po_store *s, struct po_committer *committer,
                                 struct po_accounts *accounts, const unsigned char *master,
                                 const char *tenant, const char *out_trade_no,
                                 struct po_close_report *out)
{
    memset(out, 0, sizeof *out);
    struct po_close_job *job = malloc(sizeof *job);
    if (!job)
        return PO_ERR_NOMEM;
    po_err rc = po_order_close_prepare(s, accounts, master, tenant, out_trade_no, job);
    if (!rc)
        rc = po_order_close_call(job, s, committer, out);
    po_close_job_free(job);
    free(job);
    if (!rc && out->result != PO_CC_PAID && out->result != PO_CC_UNDECIDED)
        rc = close_locally(s, committer, tenant, out_trade_no);
    return rc;
}

po_err po_order_expire_round(struct po_store *s, struct po_committer *committer,
                             struct po_accounts *accounts, const unsigned char *master, int limit,
                             struct po_expiry_report *out, char *err, size_t errcap)
{
    struct po_expiry_report x = {0};
    char now[PO_TIME_SIZE];
    po_clock_now_iso(now, sizeof now);
    struct po_rows rows;
    po_err rc = po_store_exec(s,
                              "SELECT tenant_id, out_trade_no FROM pay_order WHERE status ="
                              " 'PAYING' AND expires_at IS NOT NULL AND expires_at <= ? ORDER BY"
                              " expires_at LIMIT ?",
                              PO_PARAMS(PO_TEXT(now), PO_I64(limit)), &rows, NULL, err, errcap);
    if (rc)
        return rc;
    for (int i = 0; i < rows.nrows && rc != PO_ERR_NOMEM; i++) {
        const char *tenant = po_rows_get(&rows, i, 0), *no = po_rows_get(&rows, i, 1);
        struct po_close_report rep;
        x.expired++;
        rc = po_order_close_everywhere(s, committer, accounts, master, tenant, no, &rep);
        if (!rc && rep.result == PO_CC_PAID) {
            x.paid++;
        } else if (!rc && rep.result != PO_CC_UNDECIDED) {
            x.closed++;
        } else {
            x.undecided++;
            po_log(PO_LOG_WARN, "tenant %s: expired order %s stays PAYING: %s", tenant, no,
                   rc ? po_err_name(rc) : rep.why);
        }
    }
    po_rows_free(&rows);
    *out = x;
    return rc == PO_ERR_NOMEM ? rc : PO_OK;
}

/* ---- refunds the channel accepted and never answered ---- */

po_err po_refund_query_round(struct po_store *s, struct po_committer *committer,
                             struct po_accounts *accounts, const unsigned char *master,
                             int64_t min_age_s, int limit, struct po_refund_query_report *out,
                             char *err, size_t errcap)
{
    struct po_refund_query_report x = {0};
    char cutoff[PO_TIME_SIZE];
    po_clock_iso_at((int64_t)time(NULL) - min_age_s + 1, cutoff, sizeof cutoff);
    struct po_rows rows;
    po_err rc = po_store_exec(
        s,
        "SELECT r.tenant_id, r.out_refund_no, r.out_trade_no, r.amount, o.amount, r.currency,"
        " COALESCE(r.channel, o.channel, ''), COALESCE(r.txn_id, o.channel_txn_id, ''),"
        " COALESCE(o.channel_order_id, ''), COALESCE(o.channel_txn_id, ''),"
        " COALESCE(r.channel_refund_id, '') FROM refund"
        " r JOIN pay_order o ON o.tenant_id = r.tenant_id AND o.out_trade_no = r.out_trade_no"
        " WHERE r.status = 'PROCESSING' AND r.submit_state = 'submitted' AND r.updated_at < ?"
        " ORDER BY r.updated_at LIMIT ?",
        PO_PARAMS(PO_TEXT(cutoff), PO_I64(limit)), &rows, NULL, err, errcap);
    if (rc)
        return rc;
    struct po_refund_query_answer *a = malloc(sizeof *a);
    struct po_backoff *b = calloc(1, sizeof *b); /* a 429 stops asking that tenant's channel */
    for (int i = 0; a && b && i < rows.nrows; i++) {
        const char *tenant = po_rows_get(&rows, i, 0);
        const struct po_channel_ops *ch = po_channel_find(po_rows_get(&rows, i, 6));
        if (ch && po_backoff_holds(b, tenant, ch->name)) {
            x.throttled++;
            continue;
        }
        struct po_refund_request req = {po_rows_get(&rows, i, 2),
                                        po_rows_get(&rows, i, 1),
                                        0,
                                        0,
                                        po_rows_get(&rows, i, 5),
                                        po_rows_get(&rows, i, 7),
                                        po_rows_get(&rows, i, 8),
                                        po_rows_get(&rows, i, 9),
                                        po_rows_get(&rows, i, 10)};
        char aerr[PO_ERRBUF_SIZE] = "";
        struct po_account_ref *ref = NULL;
        if (!ch || !ch->refund_query || po_rows_i64(&rows, i, 3, &req.amount) ||
            po_rows_i64(&rows, i, 4, &req.total) ||
            po_accounts_use(accounts, s, master, tenant, ch->name, &ref, aerr, sizeof aerr))
            continue;
        const struct po_channel_account *acct = po_account_of(ref);
        x.queried++;
        if (!acct->api_ready || ch->refund_query(acct, &req, a)) {
            x.failed++;
        } else if (a->state == PO_RQ_FINAL) {
            struct po_outcome o;
            if (apply(s, committer, &a->ev, &o)) {
                x.failed++;
            } else {
                x.applied += o.kind == PO_OUT_APPLIED;
                x.matched += o.kind != PO_OUT_APPLIED;
            }
        } else if (a->state == PO_RQ_FAILED || a->state == PO_RQ_NOT_FOUND) {
            x.failed++;
            (void)po_backoff_note(b, tenant, ch->name,
                                  po_rate_limited(a->throttled, a->http_status), a->why);
            po_log(PO_LOG_WARN, "tenant %s: refund query for %s: HTTP %ld %s", tenant,
                   req.out_refund_no, a->http_status,
                   a->state == PO_RQ_NOT_FOUND ? "the channel has no such refund" : a->why);
        } else {
            x.pending++;
        }
        po_accounts_release(ref);
    }
    rc = a && b ? PO_OK : PO_ERR_NOMEM;
    free(a);
    free(b);
    po_rows_free(&rows);
    *out = x;
    return rc;
}

/* ---- recovering missed notifications: the channel's events ---- */

#define RECOVER_MAX 5000
#define RECOVER_OVERLAP_S 300
#define RECOVER_FIRST_S 86400

static po_err cursor_get(struct po_store *s, const struct po_channel_account *a, int64_t *v,
                         bool *found, char *err, size_t errcap)
{
    struct po_rows r;
    po_err rc =
        po_store_exec(s,
                      "SELECT value FROM channel_cursor WHERE tenant_id = ? AND"
                      " channel = ? AND name = 'events'",
                      PO_PARAMS(PO_TEXT(a->tenant), PO_TEXT(a->channel)), &r, NULL, err, errcap);
    if (rc)
        return rc;
    *found = r.nrows == 1 && po_rows_i64(&r, 0, 0, v) == PO_OK;
    po_rows_free(&r);
    return PO_OK;
}

static po_err cursor_set(struct po_store *s, const struct po_channel_account *a, int64_t v,
                         char *err, size_t errcap)
{
    char now[PO_TIME_SIZE];
    po_clock_now_iso(now, sizeof now);
    return po_store_exec(
        s,
        "INSERT INTO channel_cursor (tenant_id, channel, name, value, updated_at)"
        " VALUES (?, ?, 'events', ?, ?) ON CONFLICT (tenant_id, channel, name)"
        " DO UPDATE SET value = excluded.value, updated_at ="
        " excluded.updated_at WHERE excluded.value > channel_cursor.value",
        PO_PARAMS(PO_TEXT(a->tenant), PO_TEXT(a->channel), PO_I64(v), PO_TEXT(now)), NULL, NULL,
        err, errcap);
}

po_err po_events_recover_round(struct po_store *s, struct po_committer *committer,
                               const struct po_channel_account *acct, int64_t now, int page,
                               struct po_recover_report *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    const struct po_channel_ops *ch = po_channel_find(acct->channel);
    if (!ch || !ch->events_since) {
        po_errf(err, errcap, "%s has no events API payonce reads", acct->channel);
        return PO_ERR_INVALID;
    }
    int64_t cursor = 0;
    bool found = false;
    po_err rc = cursor_get(s, acct, &cursor, &found, err, errcap);
    if (rc)
        return rc;
    int64_t since = found ? cursor - RECOVER_OVERLAP_S : now - RECOVER_FIRST_S;
    struct po_event_walk w;
    if ((rc = ch->events_since(acct, since, page, RECOVER_MAX, &w)))
        return rc;
    out->events = w.n;
    (void)snprintf(out->why, sizeof out->why, "%s", w.why);
    for (int i = 0; i < w.n && !rc; i++) {
        const struct po_notify_result *r = &w.r[i];
        if (r->status != PO_NOTIFY_EVENT) {
            out->ignored++;
            continue;
        }
        struct po_outcome o;
        if ((rc = apply(s, committer, &r->ev, &o)))
            break;
        if (o.kind == PO_OUT_APPLIED)
            out->replayed++;
        else if (o.kind == PO_OUT_DUPLICATE)
            out->matched++;
        else
            out->rejected++;
    }
    out->whole = w.ok && !rc;
    /* A whole walk saw everything up to now: the next one starts from the
     * newest event or from now, less the overlap (events of the same
     * second, a list that is a moment behind), so a quiet account's walk
     * does not grow towards Stripe's 30 days. */
    out->cursor = found ? cursor : since;
    if (out->whole)
        out->cursor = w.newest > now - RECOVER_OVERLAP_S ? w.newest : now - RECOVER_OVERLAP_S;
    if (out->whole)
        rc = cursor_set(s, acct, out->cursor, err, errcap);
    else if (rc == PO_ERR_TRANSIENT)
        po_errf(err, errcap,
                "the engine did not take the events in time; the next round"
                " tries again");
    po_event_walk_free(&w);
    return rc;
}
