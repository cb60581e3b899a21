/*
 * ledger_check.c — see ledger_check.h. The triggers catch the change as it
 * happens (a manual fix in SQL, a restore gone wrong, a bug that writes a
 * second journal); this round names what it broke, read by key — the
 * journal's postings summed, its processed record, the order's payment
 * journals — so the alert says what `payonce verify` will find, without
 * re-reading the whole ledger.
 */
#include "ledger_check.h"

#include "../engine/alert.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static atomic_llong lc_rounds, lc_violations, lc_last;

void po_ledger_check_stats(struct po_ledger_check_stats *out)
{
    out->rounds = atomic_load(&lc_rounds);
    out->violations = atomic_load(&lc_violations);
    out->last_round_unix = atomic_load(&lc_last);
}

static int64_t count_of(struct po_store *s, const char *sql, const struct po_param *p, int n)
{
    struct po_rows r;
    int64_t v = -1;
    if (po_store_exec(s, sql, p, n, &r, NULL, NULL, 0) == PO_OK) {
        if (r.nrows == 1 && po_rows_i64(&r, 0, 0, &v))
            v = -1;
        po_rows_free(&r);
    }
    return v;
}

/* What the key's rows look like now: "its postings sum to 1 CNY; its
 * journal is missing; no processed record; the order has 2 payment
 * journals" — each part only when it is broken. */
static void findings(struct po_store *s, const char *tenant, const char *key, const char *order,
                     char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    struct po_rows r;
    if (po_store_exec(s,
                      "SELECT currency, SUM(amount) FROM posting WHERE tenant_id = ? AND"
                      " idem_key = ? GROUP BY currency HAVING SUM(amount) <> 0",
                      PO_PARAMS(PO_TEXT(tenant), PO_TEXT(key)), &r, NULL, NULL, 0) == PO_OK) {
        for (int i = 0; i < r.nrows && n < cap; i++)
            n += (size_t)snprintf(out + n, cap - n, "; its postings sum to %s %s",
                                  po_rows_get(&r, i, 1), po_rows_get(&r, i, 0));
        po_rows_free(&r);
    }
    int64_t j = count_of(s, "SELECT COUNT(*) FROM journal WHERE tenant_id = ? AND idem_key = ?",
                         PO_PARAMS(PO_TEXT(tenant), PO_TEXT(key)));
    int64_t p = count_of(s, "SELECT COUNT(*) FROM posting WHERE tenant_id = ? AND idem_key = ?",
                         PO_PARAMS(PO_TEXT(tenant), PO_TEXT(key)));
    int64_t l = count_of(s, "SELECT COUNT(*) FROM notify_log WHERE tenant_id = ? AND idem_key = ?",
                         PO_PARAMS(PO_TEXT(tenant), PO_TEXT(key)));
    if (n < cap && j == 0 && p > 0)
        n += (size_t)snprintf(out + n, cap - n, "; its journal is missing");
    if (n < cap && j == 1 && p == 0)
        n += (size_t)snprintf(out + n, cap - n, "; its journal has no postings");
    if (n < cap && (j > 0 || p > 0) && l == 0)
        n += (size_t)snprintf(out + n, cap - n, "; its processed record is missing");
    if (n < cap && j == 0 && p == 0 && l == 1)
        n += (size_t)snprintf(out + n, cap - n, "; its processed record has no journal");
    if (n < cap && order && *order) {
        int64_t pays = count_of(s,
                                "SELECT COUNT(*) FROM journal WHERE tenant_id = ? AND"
                                " out_trade_no = ? AND kind = 'PAY'",
                                PO_PARAMS(PO_TEXT(tenant), PO_TEXT(order)));
        if (pays > 1)
            (void)snprintf(out + n, cap - n, "; order %s has %lld payment journals", order,
                           (long long)pays);
    }
}

/* One change: its alert (once per change, keyed) and its row taken off the
 * list, in one transaction. */
static po_err take(struct po_store *s, const struct po_rows *r, int i, const char *now, char *err,
                   size_t errcap)
{
    const char *tenant = po_rows_get(r, i, 0), *tbl = po_rows_get(r, i, 1),
               *row = po_rows_get(r, i, 2), *op = po_rows_get(r, i, 3),
               *order = po_rows_get(r, i, 4), *at = po_rows_get(r, i, 5),
               *id = po_rows_get(r, i, 6);
    char key[PO_KEY_SIZE], akey[PO_KEY_SIZE], found[512], detail[1024];
    /* a posting's row is "KEY line N" */
    const char *cut = strstr(row, " line ");
    (void)snprintf(key, sizeof key, "%.*s", cut ? (int)(cut - row) : (int)strlen(row), row);
    bool second = strncmp(op, "SECOND ", 7) == 0;
    findings(s, tenant, key, order, found, sizeof found);
    if (second)
        (void)snprintf(detail, sizeof detail,
                       "order %s has a second %s journal, %s, written at %s (a double %s)%s", order,
                       op + 7, key, at, strcmp(op + 7, "PAY") == 0 ? "credit" : "refund", found);
    else
        (void)snprintf(detail, sizeof detail,
                       "%s row %s %s at %s, outside payonce (its ledger rows are never changed)%s",
                       tbl, row, strcmp(op, "DELETE") == 0 ? "deleted" : "updated", at, found);
    (void)snprintf(akey, sizeof akey, "ledger|%s", id);
    struct po_alert_new a = {.tenant = tenant,
                             .key = akey,
                             .reason = "ledger_invariant",
                             .idem_key = key,
                             .event_type = "LEDGER",
                             .source = "ledger_check",
                             .out_trade_no = order && *order ? order : NULL,
                             .amount = 0,
                             .currency = "",
                             .detail = detail};
    return po_alert_raise_tx(s, &a, now,
                             "DELETE FROM ledger_change WHERE tenant_id = ? AND change_id = ?",
                             PO_PARAMS(PO_TEXT(tenant), PO_TEXT(id)), err, errcap);
}

po_err po_ledger_check_run(struct po_store *s, int *out_found, char *err, size_t errcap)
{
    struct po_rows r;
    char sql[256];
    PO_ASSERT(po_fmt(sql, sizeof sql,
                     "SELECT tenant_id, tbl, row_key, op, COALESCE(out_trade_no, ''), changed_at,"
                     " change_id FROM ledger_change ORDER BY changed_at LIMIT %d",
                     PO_LEDGER_CHECK_ROWS) == PO_OK);
    po_err rc = po_store_exec(s, sql, PO_NO_PARAMS, &r, NULL, err, errcap);
    if (rc)
        return rc;
    char now[PO_TIME_SIZE];
    po_clock_now_iso(now, sizeof now);
    int found = 0;
    for (int i = 0; !rc && i < r.nrows; i++) {
        rc = take(s, &r, i, now, err, errcap);
        found += rc == PO_OK;
    }
    po_rows_free(&r);
    atomic_fetch_add(&lc_rounds, 1);
    atomic_fetch_add(&lc_violations, found);
    if (!rc)
        atomic_store(&lc_last, (long long)time(NULL));
    if (!rc)
        *out_found = found;
    return rc;
}
