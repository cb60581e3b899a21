/*
 * recon.c — bill import and active query (see recon.h).
 *
 * Every row becomes the normalised event the channel's callback would have
 * produced (same type, same business ids, hence the same idempotency key),
 * with source "reconciliation" (bills) or "query" (active query), and goes
 * through po_engine_apply_batch like any callback. The engine decides:
 * applied (we had missed it), duplicate (we had it), rejected (amount,
 * currency, unknown order: alert), suspense. A replay racing a late live
 * callback is just two deliveries of the same key.
 */
#include "recon.h"

#include "../crypto/crypto.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RECON_BATCH 64
#define RECON_TRIES 5

static void now_iso(char *buf, size_t cap)
{
    po_clock_now_iso(buf, cap);
}

/* Applies a batch through the door, retrying those answered retry (through
 * the committer a batch's events are items of their own and may commit in
 * parts; on the offline CLI's connection it commits or retries as a whole);
 * PO_ERR_TRANSIENT if they persist. */
static po_err apply(const struct po_door *d, const struct po_event *ev, size_t n,
                    struct po_outcome *out)
{
    return po_door_apply_retrying(d, ev, n, out, RECON_TRIES);
}

static void tally(struct po_recon_report *r, const struct po_event *ev, const struct po_outcome *o)
{
    switch (o->kind) {
    case PO_OUT_APPLIED:
        r->replayed++;
        r->replayed_amount += ev->amount_minor;
        break;
    case PO_OUT_DUPLICATE:
        r->matched++;
        break;
    case PO_OUT_REJECTED:
        r->mismatched++;
        break;
    case PO_OUT_SUSPENSE:
        r->suspense++;
        break;
    default:
        break;
    }
}

/* The event a callback for this row would have produced. */
static bool row_event(const struct po_channel_account *acct, const struct po_bill_row *row,
                      struct po_event *ev)
{
    memset(ev, 0, sizeof *ev);
    bool ok = po_strcpy(ev->tenant, sizeof ev->tenant, acct->tenant) == PO_OK &&
              po_strcpy(ev->channel, sizeof ev->channel, acct->channel) == PO_OK &&
              po_strcpy(ev->out_trade_no, sizeof ev->out_trade_no, row->out_trade_no) == PO_OK &&
              po_strcpy(ev->currency, sizeof ev->currency, row->currency) == PO_OK &&
              po_strcpy(ev->channel_txn_id, sizeof ev->channel_txn_id, row->txn) == PO_OK;
    ev->amount_minor = row->amount;
    ev->source = PO_SRC_RECONCILIATION;
    if (row->kind == PO_BILL_PAY) {
        ev->type = PO_EV_PAY_SUCCESS;
    } else {
        ev->type = PO_EV_REFUND_SUCCESS;
        ok = ok &&
             po_strcpy(ev->channel_refund_id, sizeof ev->channel_refund_id, row->refund_id) ==
                 PO_OK &&
             po_strcpy(ev->out_refund_no, sizeof ev->out_refund_no, row->out_refund_no) == PO_OK;
    }
    return ok;
}

static int txn_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Our PAID orders whose payment the bill's days do not contain: alerts.
 * The bill's days are the channel's (WeChat Pay, Alipay: Beijing time,
 * +08:00; Stripe: UTC); paid_at is UTC. */
static po_err missing_from_bill(const struct po_door *d, const struct po_channel_account *acct,
                                const struct po_bill *b, struct po_recon_report *r, char *err,
                                size_t errcap)
{
    const char *tenant = acct->tenant;
    const char **txns = malloc(((size_t)b->nrows + 1) * sizeof *txns);
    int n = 0;
    if (!txns)
        return PO_ERR_NOMEM;
    for (int i = 0; i < b->nrows; i++)
        if (b->rows[i].kind == PO_BILL_PAY)
            txns[n++] = b->rows[i].txn;
    qsort(txns, (size_t)n, sizeof *txns, txn_cmp);
    struct tm tm = {0};
    char from[32], to[32];
    if (!strptime(b->period_start, "%Y-%m-%d", &tm)) {
        free(txns);
        return PO_ERR_INVALID;
    }
    const struct po_channel_ops *ch = po_channel_find(acct->channel);
    time_t tz = ch && ch->bill_fetch ? ch->bill_tz_s : 8 * 3600;
    time_t start = timegm(&tm) - tz;
    memset(&tm, 0, sizeof tm);
    (void)strptime(b->period_end, "%Y-%m-%d", &tm);
    time_t end = timegm(&tm) + 86400 - tz;
    strftime(from, sizeof from, "%Y-%m-%dT%H:%M:%S", gmtime_r(&start, &tm));
    strftime(to, sizeof to, "%Y-%m-%dT%H:%M:%S", gmtime_r(&end, &tm));
    struct po_rows rows;
    po_err rc = po_store_exec(
        d->s,
        "SELECT out_trade_no, channel_txn_id, amount, currency FROM pay_order"
        " WHERE tenant_id = ? AND channel = ? AND status = 'PAID'"
        " AND paid_at >= ? AND paid_at < ? ORDER BY out_trade_no",
        PO_PARAMS(PO_TEXT(tenant), PO_TEXT(acct->channel), PO_TEXT(from), PO_TEXT(to)), &rows, NULL,
        err, errcap);
    for (int i = 0; !rc && i < rows.nrows; i++) {
        const char *txn = po_rows_get(&rows, i, 1);
        if (bsearch(&txn, txns, (size_t)n, sizeof *txns, txn_cmp))
            continue;
        struct po_event ev = {0};
        ev.type = PO_EV_PAY_SUCCESS;
        ev.source = PO_SRC_RECONCILIATION;
        /* Values come from our own rows, already within the limits. */
        rc = po_strcpy(ev.tenant, sizeof ev.tenant, tenant);
        if (!rc)
            rc = po_strcpy(ev.channel, sizeof ev.channel, acct->channel);
        if (!rc)
            rc = po_strcpy(ev.out_trade_no, sizeof ev.out_trade_no, po_rows_get(&rows, i, 0));
        if (!rc)
            rc = po_strcpy(ev.channel_txn_id, sizeof ev.channel_txn_id, txn);
        if (!rc)
            rc = po_strcpy(ev.currency, sizeof ev.currency, po_rows_get(&rows, i, 3));
        if (!rc)
            rc = po_rows_i64(&rows, i, 2, &ev.amount_minor);
        char detail[160];
        (void)snprintf(detail, sizeof detail,
                       "order %s is PAID (%s) but the bill for %s..%s lacks it", ev.out_trade_no,
                       txn, b->period_start, b->period_end);
        if (!rc)
            rc = po_door_alert(d, &ev, PO_R_MISSING_FROM_BILL, detail);
        r->missing_from_bill++;
    }
    po_rows_free(&rows);
    free(txns);
    return rc;
}

struct fees {
    const struct po_channel_account *acct;
    const struct po_bill *b;
    char err[PO_ERRBUF_SIZE];
};

/* Every row's fee (a work: inside the caller's transaction). */
static po_err record_fees(struct po_store *s, void *ctx)
{
    struct fees *f = ctx;
    const struct po_channel_account *acct = f->acct;
    po_err rc = PO_OK;
    for (int i = 0; !rc && i < f->b->nrows; i++) {
        const struct po_bill_row *row = &f->b->rows[i];
        char key[PO_TXN_ID_MAX * 2 + 4], day[11];
        PO_ASSERT(po_fmt(key, sizeof key, "%s%s%s", row->txn,
                         row->kind == PO_BILL_REFUND ? "/" : "",
                         row->kind == PO_BILL_REFUND ? row->refund_id : "") == PO_OK);
        memcpy(day, row->time, 10);
        day[10] = '\0';
        rc = po_store_exec(s,
                           "INSERT INTO recon_fee (tenant_id, channel, row_key, out_trade_no,"
                           " trade_date, fee_milli) VALUES (?, ?, ?, ?, ?, ?)"
                           " ON CONFLICT (tenant_id, channel, row_key) DO UPDATE SET"
                           " fee_milli = excluded.fee_milli",
                           PO_PARAMS(PO_TEXT(acct->tenant), PO_TEXT(acct->channel), PO_TEXT(key),
                                     PO_TEXT(row->out_trade_no), PO_TEXT(day),
                                     PO_I64(row->fee_milli)),
                           NULL, NULL, f->err, sizeof f->err);
    }
    return rc;
}

struct run_row {
    const char *tenant, *channel, *doc, *now;
    const struct po_recon_report *r;
    char err[PO_ERRBUF_SIZE];
};

/* The run's record (a work). */
static po_err record_run(struct po_store *s, void *ctx)
{
    struct run_row *x = ctx;
    const struct po_recon_report *r = x->r;
    return po_store_exec(s,
                         "INSERT INTO recon_run (tenant_id, file_sha256, channel, period_start,"
                         " period_end, rows_total, report, imported_at) VALUES"
                         " (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, file_sha256) DO"
                         " UPDATE SET report = excluded.report, imported_at = excluded.imported_at",
                         PO_PARAMS(PO_TEXT(x->tenant), PO_TEXT(r->file_sha256), PO_TEXT(x->channel),
                                   PO_TEXT(r->period_start), PO_TEXT(r->period_end),
                                   PO_I64(r->rows), PO_TEXT(x->doc), PO_TEXT(x->now)),
                         NULL, NULL, x->err, sizeof x->err);
}

/* A work's failure said in err: its own words, or the database's state. */
static po_err said(po_err rc, const char *why, char *err, size_t errcap)
{
    if (rc)
        po_errf(err, errcap, "%s", why[0] ? why : "the database is unavailable; import again");
    return rc;
}

json_t *po_recon_report_json(const struct po_recon_report *r)
{
    bool one = r->currency[0] && !r->several_currencies;
    return json_pack(
        "{s:s, s:b, s:s, s:s, s:I, s:{s:I, s:I}, s:{s:I, s:I}, s:{s:I, s:I}, s:I, s:I,"
        " s:I, s:I, s:I, s:I, s:s?, s:b}",
        "file_sha256", r->file_sha256, "already_imported", r->already_imported, "period_start",
        r->period_start, "period_end", r->period_end, "rows", (json_int_t)r->rows, "payments",
        "count", (json_int_t)r->payments, "amount", (json_int_t)r->payments_amount, "refunds",
        "count", (json_int_t)r->refunds, "amount", (json_int_t)r->refunds_amount, "replayed",
        "count", (json_int_t)r->replayed, "amount", (json_int_t)r->replayed_amount, "matched",
        (json_int_t)r->matched, "mismatched", (json_int_t)r->mismatched, "suspense",
        (json_int_t)r->suspense, "zero_amount", (json_int_t)r->zero_amount, "missing_from_bill",
        (json_int_t)r->missing_from_bill, "fees_milli", (json_int_t)r->fees_milli, "currency",
        one ? r->currency : NULL, "several_currencies", r->several_currencies);
}

static void report_from_json(json_t *j, struct po_recon_report *r)
{
    json_t *v;
    (void)snprintf(r->period_start, sizeof r->period_start, "%s",
                   json_string_value(json_object_get(j, "period_start")) ?: "");
    (void)snprintf(r->period_end, sizeof r->period_end, "%s",
                   json_string_value(json_object_get(j, "period_end")) ?: "");
#define GET(field, path) r->field = (v = (path)) ? json_integer_value(v) : 0
    GET(rows, json_object_get(j, "rows"));
    GET(payments, json_object_get(json_object_get(j, "payments"), "count"));
    GET(payments_amount, json_object_get(json_object_get(j, "payments"), "amount"));
    GET(refunds, json_object_get(json_object_get(j, "refunds"), "count"));
    GET(refunds_amount, json_object_get(json_object_get(j, "refunds"), "amount"));
    GET(replayed, json_object_get(json_object_get(j, "replayed"), "count"));
    GET(replayed_amount, json_object_get(json_object_get(j, "replayed"), "amount"));
    GET(matched, json_object_get(j, "matched"));
    GET(mismatched, json_object_get(j, "mismatched"));
    GET(suspense, json_object_get(j, "suspense"));
    GET(zero_amount, json_object_get(j, "zero_amount"));
    GET(missing_from_bill, json_object_get(j, "missing_from_bill"));
    GET(fees_milli, json_object_get(j, "fees_milli"));
#undef GET
    const char *cur = json_string_value(json_object_get(j, "currency"));
    if (cur && po_currency_valid(cur))
        memcpy(r->currency, cur, sizeof r->currency);
    r->several_currencies = json_is_true(json_object_get(j, "several_currencies"));
}

static po_err find_run(struct po_store *s, const char *tenant, struct po_recon_report *out,
                       bool *found, char *err, size_t errcap)
{
    struct po_rows rows;
    po_err rc = po_store_exec(s,
                              "SELECT report FROM recon_run WHERE tenant_id = ? AND"
                              " file_sha256 = ?",
                              PO_PARAMS(PO_TEXT(tenant), PO_TEXT(out->file_sha256)), &rows, NULL,
                              err, errcap);
    if (rc)
        return rc;
    *found = rows.nrows == 1;
    if (*found) {
        const char *text = po_rows_get(&rows, 0, 0);
        json_t *j = NULL;
        if (po_json_parse(text, strlen(text), &j, NULL, 0))
            j = NULL;
        report_from_json(j, out);
        json_decref(j);
    }
    po_rows_free(&rows);
    return PO_OK;
}

po_err po_recon_import(const struct po_door *d, const struct po_channel_account *acct,
                       const char *data, size_t len, bool force, po_recon_progress_fn progress,
                       void *pctx, struct po_recon_report *out, char *err, size_t errcap)
{
    struct po_recon_report r = {0};
    struct po_bill b = {0};
    struct po_event *ev = NULL;
    struct po_outcome *oc = NULL;
    po_err rc;
    const char *tenant = acct->tenant, *channel = acct->channel;
    const struct po_channel_ops *ch = po_channel_find(channel);
    if (!ch || !ch->bill_parse) {
        char names[128];
        po_channel_names(PO_CAN_BILL, names, sizeof names);
        po_errf(err, errcap, "%s has no bill format payonce reads (channels with one: %s)", channel,
                names);
        return PO_ERR_INVALID;
    }
    if ((rc = po_sha256_hex(data, len, r.file_sha256)))
        return rc;
    bool found = false;
    if (!force) {
        if ((rc = find_run(d->s, tenant, &r, &found, err, errcap)))
            return rc;
        if (found) {
            r.already_imported = true;
            *out = r;
            return PO_OK;
        }
    }
    if ((rc = ch->bill_parse(data, len, &b, err, errcap)))
        return rc;
    /* Refuse the whole file before changing anything if it is not ours. */
    for (int i = 0; i < b.nrows; i++) {
        const struct po_bill_row *row = &b.rows[i];
        struct po_event e;
        const char *ours = ch->bill_merchant(acct);
        if (strcmp(row->mchid, ours) != 0) {
            po_errf(err, errcap, "row %d is for merchant %s, the tenant's is %s", i + 1, row->mchid,
                    ours);
            rc = PO_ERR_INVALID;
            goto out;
        }
        char verr[PO_ERRBUF_SIZE];
        if (row->amount > 0 &&
            (!row_event(acct, row, &e) || po_event_validate(&e, verr, sizeof verr))) {
            po_errf(err, errcap, "row %d: %s", i + 1, verr);
            rc = PO_ERR_INVALID;
            goto out;
        }
    }
    memcpy(r.period_start, b.period_start, 11);
    memcpy(r.period_end, b.period_end, 11);
    r.rows = b.nrows;
    ev = calloc(RECON_BATCH, sizeof *ev);
    oc = calloc(RECON_BATCH, sizeof *oc);
    if (!ev || !oc) {
        rc = PO_ERR_NOMEM;
        goto out;
    }
    size_t n = 0;
    for (int i = 0; i <= b.nrows; i++) {
        if (i < b.nrows) {
            const struct po_bill_row *row = &b.rows[i];
            if (i == 0)
                memcpy(r.currency, row->currency, sizeof r.currency);
            else if (strcmp(r.currency, row->currency) != 0)
                r.several_currencies = true;
            r.fees_milli += row->fee_milli;
            if (row->kind == PO_BILL_PAY)
                r.payments++, r.payments_amount += row->amount;
            else
                r.refunds++, r.refunds_amount += row->amount;
            if (row->amount == 0 ||
                (row->kind == PO_BILL_REFUND && strcmp(row->refund_status, "SUCCESS") != 0)) {
                r.zero_amount += row->amount == 0;
                continue;
            }
            PO_ASSERT(row_event(acct, row, &ev[n]));
            n++;
        }
        if (n == RECON_BATCH || (i == b.nrows && n > 0)) {
            if ((rc = apply(d, ev, n, oc))) {
                po_errf(err, errcap, "the database is unavailable; import again to resume");
                goto out;
            }
            for (size_t k = 0; k < n; k++)
                tally(&r, &ev[k], &oc[k]);
            n = 0;
        }
        if (progress && ((i < b.nrows && i % 1000 == 999) || (i == b.nrows && b.nrows % 1000)))
            progress(pctx, i < b.nrows ? i + 1 : b.nrows, b.nrows);
    }
    /* An empty bill (a day without trades) names no day to compare with. */
    struct fees f = {acct, &b, ""};
    if ((b.nrows && (rc = missing_from_bill(d, acct, &b, &r, err, errcap))) ||
        (rc = said(po_door_work(d, tenant, record_fees, &f), f.err, err, errcap)))
        goto out;
    json_t *rj = po_recon_report_json(&r);
    json_object_del(rj, "already_imported"); /* a property of an import, not of the run */
    char *doc = rj ? po_json_dumps(rj, JSON_COMPACT) : NULL;
    json_decref(rj);
    char now[PO_TIME_SIZE];
    now_iso(now, sizeof now);
    struct run_row x = {tenant, channel, doc ? doc : "{}", now, &r, ""};
    rc = said(po_door_work(d, tenant, record_run, &x), x.err, err, errcap);
    free(doc);
    if (!rc)
        *out = r;
out:
    free(ev);
    free(oc);
    po_bill_free(&b);
    return rc;
}

po_err po_recon_runs(struct po_store *s, const char *tenant, json_t **out)
{
    struct po_rows r;
    po_err rc = po_store_exec(s,
                              "SELECT imported_at, channel, period_start, period_end, rows_total,"
                              " file_sha256, report FROM recon_run WHERE tenant_id = ?"
                              " ORDER BY imported_at DESC LIMIT 100",
                              PO_PARAMS(PO_TEXT(tenant)), &r, NULL, NULL, 0);
    if (rc)
        return rc;
    json_t *list = json_array();
    for (int i = 0; i < r.nrows; i++) {
        const char *text = po_rows_get(&r, i, 6);
        json_t *rep = NULL;
        if (po_json_parse(text, strlen(text), &rep, NULL, 0))
            rep = NULL;
        if (!json_is_object(rep)) {
            json_decref(rep);
            rep = json_object();
        }
        /* What the table says, whatever the stored report says. */
        json_object_set_new(rep, "imported_at", json_string(po_rows_get(&r, i, 0)));
        json_object_set_new(rep, "channel", json_string(po_rows_get(&r, i, 1)));
        json_object_set_new(rep, "period_start", json_string(po_rows_get(&r, i, 2)));
        json_object_set_new(rep, "period_end", json_string(po_rows_get(&r, i, 3)));
        json_object_set_new(rep, "file_sha256", json_string(po_rows_get(&r, i, 5)));
        json_array_append_new(list, rep);
    }
    po_rows_free(&r);
    *out = list;
    return PO_OK;
}
