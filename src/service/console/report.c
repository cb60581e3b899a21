/*
 * report.c — money reports from the ledger (report.h; `payonce report`).
 *
 * Every figure but the fees is a sum of postings: each journal is reduced
 * to what it moved (its positive lines), its merchant (the
 * merchant_payable:<m> line), its channel (the channel_clearing:<ch>
 * line) and what it did to suspense, then summed per day (the journal's
 * UTC date), merchant, channel and currency. Fees are the channels' own
 * (recon_fee, from the bills, thousandths of the minor unit), by the bill's
 * trade date. The reconciliation recomputes each merchant's and each
 * channel's whole history the same way and compares it with the ledger's
 * balances, to the minor unit.
 */
#include "report.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One journal per row: its day, kind, currency, merchant, channel, what it
 * moved and its suspense delta; between two dates (from <= day < to). */
#define JOURNALS                                                                                   \
    "(SELECT substr(j.created_at, 1, 10) AS day, j.kind AS kind, j.currency AS currency,"          \
    " MAX(CASE WHEN p.account LIKE 'merchant\\_payable:%' ESCAPE '\\' THEN substr(p.account, 18)"  \
    " END) AS merchant, MAX(CASE WHEN p.account LIKE 'channel\\_clearing:%' ESCAPE '\\' THEN"      \
    " substr(p.account, 18) END) AS channel, SUM(CASE WHEN p.amount > 0 THEN p.amount ELSE 0"      \
    " END) AS moved, SUM(CASE WHEN p.account = 'suspense' THEN p.amount ELSE 0 END) AS susp"       \
    " FROM journal j JOIN posting p ON p.tenant_id = j.tenant_id AND p.idem_key = j.idem_key"      \
    " WHERE j.tenant_id = ? AND j.created_at >= ? AND j.created_at < ? GROUP BY j.tenant_id,"      \
    " j.idem_key, j.created_at, j.kind, j.currency)"

#define FIGURES                                                                                    \
    "COUNT(*), SUM(CASE WHEN kind = 'PAY' THEN moved ELSE 0 END), SUM(CASE WHEN kind = 'REFUND'"   \
    " AND merchant IS NOT NULL THEN moved ELSE 0 END), SUM(CASE WHEN kind = 'PROFIT_SHARE' THEN"   \
    " moved ELSE 0 END), SUM(CASE WHEN susp < 0 THEN -susp ELSE 0 END), SUM(CASE WHEN susp > 0"    \
    " THEN susp ELSE 0 END)"

static po_err add_row(struct po_report *r, const char *day, const char *merchant,
                      const char *channel, const char *currency, struct po_report_row **out)
{
    for (int i = 0; i < r->n; i++) {
        struct po_report_row *x = &r->rows[i];
        if (strcmp(x->day, day) == 0 && strcmp(x->merchant, merchant) == 0 &&
            strcmp(x->channel, channel) == 0 && strcmp(x->currency, currency) == 0) {
            *out = x;
            return PO_OK;
        }
    }
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 64;
        struct po_report_row *rows = realloc(r->rows, (size_t)cap * sizeof *rows);
        if (!rows)
            return PO_ERR_NOMEM;
        r->rows = rows;
        r->cap = cap;
    }
    struct po_report_row *x = &r->rows[r->n++];
    memset(x, 0, sizeof *x);
    (void)snprintf(x->day, sizeof x->day, "%s", day);
    (void)snprintf(x->merchant, sizeof x->merchant, "%s", merchant);
    (void)snprintf(x->channel, sizeof x->channel, "%s", channel);
    (void)snprintf(x->currency, sizeof x->currency, "%s", currency);
    *out = x;
    return PO_OK;
}

static const char *or_dash(const char *s)
{
    return s && *s ? s : "-";
}

static int row_cmp(const void *a, const void *b)
{
    const struct po_report_row *x = a, *y = b;
    int c = strcmp(x->day, y->day);
    c = c ? c : strcmp(x->merchant, y->merchant);
    c = c ? c : strcmp(x->channel, y->channel);
    return c ? c : strcmp(x->currency, y->currency);
}

/* The per-journal figures summed by group (the columns of FIGURES from
 * col on) into x. */
static po_err figures(const struct po_rows *q, int i, int col, struct po_report_row *x)
{
    int64_t v[6];
    for (int k = 0; k < 6; k++)
        if (po_rows_i64(q, i, col + k, &v[k]))
            return PO_ERR_STORE;
    x->journals += v[0];
    x->gross += v[1];
    x->refunds += v[2];
    x->shares += v[3];
    x->suspense_in += v[4];
    x->suspense_out += v[5];
    x->net = x->gross - x->refunds - x->shares;
    return PO_OK;
}

po_err po_report_make(struct po_store *s, const char *tenant, const char *from, const char *to,
                      struct po_report *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    (void)snprintf(out->tenant, sizeof out->tenant, "%s", tenant);
    /* dates as the journals' created_at compare: from 00:00 of from to
     * 00:00 of the day after to */
    char lo[32], hi[32];
    (void)snprintf(lo, sizeof lo, "%.10s", from && *from ? from : "0000-01-01");
    memcpy(hi, "9999-12-32", 11);
    if (to && *to) {
        char at[40];
        (void)snprintf(at, sizeof at, "%.10sT00:00:00Z", to);
        int64_t t = po_clock_unix_of(at);
        if (t <= 0) {
            po_errf(err, errcap, "--to: a date, YYYY-MM-DD");
            return PO_ERR_INVALID;
        }
        po_clock_iso_ms((t + 86400) * 1000, hi, sizeof hi);
        hi[10] = '\0';
    }
    po_err rc = po_store_begin_read(s, err, errcap);
    if (rc)
        return rc;
    struct po_rows q;
    rc = po_store_exec(s,
                       "SELECT day, merchant, channel, currency, " FIGURES " FROM " JOURNALS
                       " x GROUP BY day, merchant, channel, currency",
                       PO_PARAMS(PO_TEXT(tenant), PO_TEXT(lo), PO_TEXT(hi)), &q, NULL, err, errcap);
    if (!rc) {
        for (int i = 0; !rc && i < q.nrows; i++) {
            struct po_report_row *x = NULL;
            rc = add_row(out, po_rows_get(&q, i, 0), or_dash(po_rows_get(&q, i, 1)),
                         or_dash(po_rows_get(&q, i, 2)), po_rows_get(&q, i, 3), &x);
            if (!rc)
                rc = figures(&q, i, 4, x);
        }
        po_rows_free(&q);
    }
    /* the channels' fees, by the bill's trade date and the order's merchant */
    bool fees_read = false;
    if (!rc)
        fees_read =
            !(rc = po_store_exec(
                  s,
                  "SELECT substr(f.trade_date, 1, 10), o.merchant_id, f.channel,"
                  " o.currency, SUM(f.fee_milli) FROM recon_fee f JOIN pay_order o ON"
                  " o.tenant_id = f.tenant_id AND o.out_trade_no = f.out_trade_no"
                  " WHERE f.tenant_id = ? AND substr(f.trade_date, 1, 10) >= ? AND"
                  " substr(f.trade_date, 1, 10) < ? GROUP BY substr(f.trade_date, 1,"
                  " 10), o.merchant_id, f.channel, o.currency",
                  PO_PARAMS(PO_TEXT(tenant), PO_TEXT(lo), PO_TEXT(hi)), &q, NULL, err, errcap));
    for (int i = 0; fees_read && !rc && i < q.nrows; i++) {
        struct po_report_row *x = NULL;
        int64_t fee = 0;
        rc = add_row(out, po_rows_get(&q, i, 0), po_rows_get(&q, i, 1), po_rows_get(&q, i, 2),
                     po_rows_get(&q, i, 3), &x);
        if (!rc && po_rows_i64(&q, i, 4, &fee))
            rc = PO_ERR_STORE;
        if (!rc)
            x->fees_milli += fee;
    }
    if (fees_read)
        po_rows_free(&q);
    if (!rc)
        rc = po_report_reconcile(s, out, err, errcap);
    po_store_rollback(s);
    if (rc) {
        po_report_free(out);
        return rc;
    }
    if (out->n > 1)
        qsort(out->rows, (size_t)out->n, sizeof *out->rows, row_cmp);
    return PO_OK;
}

po_err po_report_reconcile(struct po_store *s, struct po_report *r, char *err, size_t errcap)
{
    /* Every merchant's net and every channel's clearing since the start,
     * from the postings as the report sums them, against the ledger's
     * balances: a payable is a liability (its balance is minus what is
     * owed), clearing an asset. */
    struct po_rows q;
    po_err rc = po_store_exec(
        s,
        "SELECT t.acct, t.currency, t.sum_report, COALESCE(b.balance, 0) FROM (SELECT"
        " 'merchant_payable:' || merchant AS acct, currency, -SUM(CASE WHEN kind = 'PAY' THEN"
        " moved WHEN kind IN ('REFUND', 'PROFIT_SHARE') THEN -moved ELSE 0 END) AS sum_report"
        " FROM " JOURNALS " x WHERE merchant IS NOT NULL GROUP BY merchant, currency UNION ALL"
        " SELECT 'channel_clearing:' || channel, currency, SUM(CASE WHEN kind = 'PAY' THEN moved"
        " WHEN kind = 'REFUND' THEN -moved WHEN kind = 'SUSPENSE' THEN -susp ELSE 0 END) FROM"
        " " JOURNALS " y WHERE channel IS NOT NULL GROUP BY channel, currency) t LEFT JOIN"
        " account_balance b ON b.tenant_id = ? AND b.account = t.acct AND b.currency ="
        " t.currency ORDER BY t.acct, t.currency",
        PO_PARAMS(PO_TEXT(r->tenant), PO_TEXT("0000-01-01"), PO_TEXT("9999-12-32"),
                  PO_TEXT(r->tenant), PO_TEXT("0000-01-01"), PO_TEXT("9999-12-32"),
                  PO_TEXT(r->tenant)),
        &q, NULL, err, errcap);
    if (rc)
        return rc;
    r->accounts_checked = q.nrows;
    r->first_mismatch[0] = '\0';
    r->mismatches = 0;
    for (int i = 0; i < q.nrows; i++) {
        int64_t sum = 0, bal = 0;
        bool read = !po_rows_i64(&q, i, 2, &sum) && !po_rows_i64(&q, i, 3, &bal);
        if ((!read || sum != bal) && r->mismatches++ == 0) {
            char said[PO_MONEY_MAX], is[PO_MONEY_MAX];
            po_money_format(sum, po_rows_get(&q, i, 1), said, sizeof said);
            po_money_format(bal, po_rows_get(&q, i, 1), is, sizeof is);
            (void)snprintf(r->first_mismatch, sizeof r->first_mismatch,
                           "%s %s: the postings say %s, the balance %s", po_rows_get(&q, i, 0),
                           po_rows_get(&q, i, 1), read ? said : po_rows_get(&q, i, 2),
                           read ? is : po_rows_get(&q, i, 3));
        }
    }
    po_rows_free(&q);
    return PO_OK;
}

void po_report_free(struct po_report *r)
{
    free(r->rows);
    r->rows = NULL;
    r->n = r->cap = 0;
}

static bool date_ok(const char *d)
{
    if (!d)
        return true;
    char at[40], back[PO_TIME_SIZE];
    if (strlen(d) != 10 || d[4] != '-' || d[7] != '-' ||
        po_fmt(at, sizeof at, "%.10sT00:00:00Z", d))
        return false;
    int64_t t = po_clock_unix_of(at);
    if (t <= 0)
        return false;
    /* a real day: it comes back the same (2026-13-01 would not) */
    po_clock_iso_ms(t * 1000, back, sizeof back);
    return strncmp(back, d, 10) == 0;
}

bool po_report_dates_ok(const char *from, const char *to)
{
    return date_ok(from) && date_ok(to) && !(from && to && strcmp(from, to) > 0);
}

json_t *po_report_json(const struct po_report *r, const char *from, const char *to)
{
    json_t *rows = json_array();
    for (int i = 0; rows && i < r->n; i++) {
        const struct po_report_row *x = &r->rows[i];
        json_array_append_new(
            rows,
            json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "day", x->day,
                      "merchant", x->merchant, "channel", x->channel, "currency", x->currency,
                      "journals", (json_int_t)x->journals, "gross", (json_int_t)x->gross, "refunds",
                      (json_int_t)x->refunds, "profit_shares", (json_int_t)x->shares, "net",
                      (json_int_t)x->net, "suspense_in", (json_int_t)x->suspense_in, "suspense_out",
                      (json_int_t)x->suspense_out, "fees_milli", (json_int_t)x->fees_milli));
    }
    json_t *doc = json_pack("{s:s, s:s?, s:s?, s:o, s:b, s:i}", "tenant", r->tenant, "from", from,
                            "to", to, "rows", rows, "reconciled", r->mismatches == 0,
                            "accounts_checked", r->accounts_checked);
    if (doc && r->mismatches)
        json_object_set_new(doc, "first_mismatch", json_string(r->first_mismatch));
    return doc;
}

char *po_report_csv(const struct po_report *r)
{
    static const char head[] = "day,tenant,merchant,channel,currency,journals,gross_minor,"
                               "refunds_minor,profit_shares_minor,net_minor,suspense_in_minor,"
                               "suspense_out_minor,fees_milli\n";
    size_t line = 11 + 3 * (PO_ID_MAX + 1) + PO_CHANNEL_SIZE + 5 + 8 * 21 + 16;
    size_t cap = sizeof head + (size_t)r->n * line, used = sizeof head - 1;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    memcpy(out, head, sizeof head);
    for (int i = 0; i < r->n; i++) {
        const struct po_report_row *x = &r->rows[i];
        int n = snprintf(
            out + used, cap - used, "%s,%s,%s,%s,%s,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld\n",
            x->day, r->tenant, x->merchant, x->channel, x->currency, (long long)x->journals,
            (long long)x->gross, (long long)x->refunds, (long long)x->shares, (long long)x->net,
            (long long)x->suspense_in, (long long)x->suspense_out, (long long)x->fees_milli);
        PO_ASSERT(n > 0 && (size_t)n < cap - used);
        used += (size_t)n;
    }
    return out;
}
