/*
 * ledger_check.c — see ledger_check.h. The triggers catch the change as it
 * happens (a manual fix in SQL, a restore gone wrong, a bug that writes a
 * second journal); this round names what it broke, read by key — the
 * journal's postings summed, its processed record, the order's payment
 * journals — so the alert says what `payonce verify` will find, without
 * re-reading the whole ledger.
 */
#include "ledger_check.h"

#include "../../engine/alert.h"
#include "../../ledger/ledger.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_llong lc_rounds, lc_violations, lc_last, lc_sweep_rows, lc_sweep_wraps, lc_us;

void po_ledger_check_stats(struct po_ledger_check_stats *out)
{
    out->rounds = atomic_load(&lc_rounds);
    out->violations = atomic_load(&lc_violations);
    out->last_round_unix = atomic_load(&lc_last);
    out->sweep_rows = atomic_load(&lc_sweep_rows);
    out->sweep_wraps = atomic_load(&lc_sweep_wraps);
    out->us = atomic_load(&lc_us);
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
    /* a posting names no order: its journal's (the sweep then sees the
     * order's alert open and does not raise the same fault again) */
    char jorder[PO_ID_MAX + 1] = "";
    if (!order || !*order) {
        struct po_rows o;
        if (po_store_exec(s,
                          "SELECT out_trade_no FROM journal WHERE tenant_id = ? AND idem_key = ?",
                          PO_PARAMS(PO_TEXT(tenant), PO_TEXT(key)), &o, NULL, NULL, 0) == PO_OK) {
            if (o.nrows == 1 && po_rows_get(&o, 0, 0))
                (void)snprintf(jorder, sizeof jorder, "%s", po_rows_get(&o, 0, 0));
            po_rows_free(&o);
        }
        order = jorder;
    }
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

/* The change list: up to PO_LEDGER_CHECK_ROWS changes taken. */
static po_err changes(struct po_store *s, int *out_found, char *err, size_t errcap)
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
    for (int i = 0; !rc && i < r.nrows; i++) {
        rc = take(s, &r, i, now, err, errcap);
        *out_found += rc == PO_OK;
    }
    po_rows_free(&r);
    return rc;
}

/* ---- the sweep: payonce's own new writes, every row in turn, balances ---- */

struct lc_tenant {
    char id[PO_ID_MAX + 1];
    struct po_slice_pos pos; /* its new writes checked up to here */
    int64_t balances_ms;     /* its balances last summed (0: never) */
};

struct po_ledger_check {
    int rows, new_rows;
    int64_t balance_every_ms;
    struct po_slice_pos pos[PO_SLICE_BALANCES]; /* JOURNALS..RECORDS */
    struct lc_tenant *t;
    int nt;
};

po_err po_ledger_check_new(int rows, int new_rows, int64_t balance_every_s,
                           struct po_ledger_check **out)
{
    struct po_ledger_check *lc = calloc(1, sizeof *lc);
    if (!lc)
        return PO_ERR_NOMEM;
    lc->rows = rows;
    lc->new_rows = new_rows;
    lc->balance_every_ms = balance_every_s * 1000;
    *out = lc;
    return PO_OK;
}

void po_ledger_check_free(struct po_ledger_check *lc)
{
    if (!lc)
        return;
    free(lc->t);
    free(lc);
}

static int tenant_cmp(const void *a, const void *b)
{
    return strcmp(((const struct lc_tenant *)a)->id, ((const struct lc_tenant *)b)->id);
}

/* The tenants now, each with its state carried over (a new one's new
 * writes from PO_LEDGER_NEW_BACK_MS back). */
static po_err tenants(struct po_store *s, struct po_ledger_check *lc, int64_t now_ms, char *err,
                      size_t errcap)
{
    struct po_rows r;
    char sql[96];
    PO_ASSERT(po_fmt(sql, sizeof sql, "SELECT tenant_id FROM tenant ORDER BY tenant_id LIMIT %d",
                     PO_LEDGER_TENANTS_MAX) == PO_OK);
    po_err rc = po_store_exec(s, sql, PO_NO_PARAMS, &r, NULL, err, errcap);
    if (rc)
        return rc;
    struct lc_tenant *t = calloc((size_t)r.nrows + 1, sizeof *t);
    if (!t) {
        po_rows_free(&r);
        return PO_ERR_NOMEM;
    }
    for (int i = 0; i < r.nrows; i++) {
        (void)snprintf(t[i].id, sizeof t[i].id, "%s", po_rows_get(&r, i, 0));
        const struct lc_tenant *was =
            lc->nt ? bsearch(&t[i], lc->t, (size_t)lc->nt, sizeof *t, tenant_cmp) : NULL;
        if (was)
            t[i] = *was;
        else
            po_clock_iso_ms(now_ms - PO_LEDGER_NEW_BACK_MS, t[i].pos.a, sizeof t[i].pos.a);
    }
    qsort(t, (size_t)r.nrows, sizeof *t, tenant_cmp);
    free(lc->t);
    lc->t = t;
    lc->nt = r.nrows;
    po_rows_free(&r);
    return PO_OK;
}

struct found_list {
    struct po_violation *v;
    int n, cap;
};

static void collect(void *ctx, const struct po_violation *v)
{
    struct found_list *f = ctx;
    if (f->n == f->cap) {
        int cap = f->cap ? f->cap * 2 : 16;
        struct po_violation *nv = realloc(f->v, (size_t)cap * sizeof *nv);
        if (!nv)
            return; /* the next round finds it again */
        f->v = nv;
        f->cap = cap;
    }
    f->v[f->n++] = *v;
}

/* One violation: its alert, unless the ledger check's alert on the same
 * row is open (the change list named it). */
static po_err raise_one(struct po_store *s, enum po_slice k, const struct po_violation *v,
                        const char *now, bool *raised, char *err, size_t errcap)
{
    char akey[PO_KEY_SIZE + 64], detail[512];
    (void)snprintf(akey, sizeof akey, "ledger|%s|%s", v->check, v->object);
    (void)snprintf(detail, sizeof detail, "%s: %s, found by the continuous check (%s)", v->check,
                   v->detail, po_slice_name(k));
    struct po_alert_new a = {.tenant = v->tenant,
                             .key = akey,
                             .reason = "ledger_invariant",
                             .idem_key = v->object,
                             .event_type = "LEDGER",
                             .source = "ledger_check",
                             .out_trade_no = v->of_order ? v->object : NULL,
                             .amount = 0,
                             .currency = "",
                             .detail = detail};
    return po_alert_raise_unless(
        s, &a, now,
        "SELECT 1 FROM alert WHERE tenant_id = ? AND reason = 'ledger_invariant'"
        " AND state <> 'resolved' AND alert_key <> ? AND (idem_key = ? OR"
        " out_trade_no = ?) LIMIT 1",
        PO_PARAMS(PO_TEXT(v->tenant), PO_TEXT(akey), PO_TEXT(v->object), PO_TEXT(v->object)),
        raised, err, errcap);
}

/* The next slice of k after *pos (n rows; balances: the tenant's) checked
 * and what it found raised; *pos moved to its end, or back to the start
 * when the slice reached the table's end (fewer than n rows: the next
 * round starts over, no round is spent finding nothing after the last
 * row). A sweep slice that finds nothing after *pos (the table's end fell
 * exactly on the last slice's, or its rows were deleted) starts over in
 * the same round. */
static po_err step(struct po_store *s, enum po_slice k, const char *tenant, const char *cut, int n,
                   struct po_slice_pos *pos, const char *now, struct po_ledger_check_report *out,
                   char *err, size_t errcap)
{
    static const struct po_slice_pos start;
    struct found_list f = {0};
    struct po_slice_pos end;
    int rows = 0, found = 0;
    po_err rc = po_ledger_verify_slice(s, k, tenant, pos, cut, n, &end, &rows, collect, &f, &found,
                                       err, errcap);
    if (!rc && !rows && k != PO_SLICE_NEW && k != PO_SLICE_BALANCES &&
        memcmp(pos, &start, sizeof start) != 0) {
        *pos = start;
        out->wrapped++;
        rc = po_ledger_verify_slice(s, k, tenant, pos, cut, n, &end, &rows, collect, &f, &found,
                                    err, errcap);
    }
    for (int i = 0; !rc && i < f.n; i++) {
        bool raised = false;
        rc = raise_one(s, k, &f.v[i], now, &raised, err, errcap);
        out->raised += raised;
    }
    free(f.v);
    if (rc || k == PO_SLICE_BALANCES) {
        out->found += rc ? 0 : found;
        return rc;
    }
    out->found += found;
    out->checked += rows;
    if (k == PO_SLICE_NEW || rows == n) {
        if (rows)
            *pos = end;
    } else { /* the table's end: the next round starts over */
        *pos = start;
        out->wrapped++;
    }
    return PO_OK;
}

/* A part of the round failed: logged, and the round's answer if it is the
 * first. */
static void failed(po_err rc, po_err *first, const char *what, const char *why, char *err,
                   size_t errcap)
{
    po_log(PO_LOG_WARN, "ledger check: %s: %s", what, why);
    if (!*first) {
        *first = rc;
        po_errf(err, errcap, "%s: %s", what, why);
    }
}

/* The slices of one round (see po_ledger_check_run). */
static po_err slices(struct po_store *s, struct po_ledger_check *lc, int64_t now_ms,
                     struct po_ledger_check_report *out, char *err, size_t errcap)
{
    char now[PO_TIME_SIZE], cut[PO_TIME_SIZE], why[PO_ERRBUF_SIZE], what[PO_ID_MAX + 32];
    po_clock_iso_ms(now_ms, now, sizeof now);
    po_clock_iso_ms(now_ms - PO_LEDGER_NEW_LAG_MS, cut, sizeof cut);
    po_err rc, first = PO_OK;
    int listed = 0; /* the tenants this round: none when they could not be read */
    if (lc->new_rows || lc->balance_every_ms) {
        if ((rc = tenants(s, lc, now_ms, why, sizeof why)) == PO_OK)
            listed = lc->nt;
        else
            failed(rc, &first, "tenants", why, err, errcap);
    }
    for (int i = 0; i < listed; i++) {
        struct lc_tenant *t = &lc->t[i];
        if (lc->new_rows && (rc = step(s, PO_SLICE_NEW, t->id, cut, lc->new_rows, &t->pos, now, out,
                                       why, sizeof why)) != PO_OK) {
            (void)snprintf(what, sizeof what, "tenant %s: new writes", t->id);
            failed(rc, &first, what, why, err, errcap);
        }
        if (!lc->balance_every_ms ||
            (t->balances_ms && now_ms - t->balances_ms < lc->balance_every_ms))
            continue;
        if ((rc = step(s, PO_SLICE_BALANCES, t->id, NULL, 0, NULL, now, out, why, sizeof why)) ==
            PO_OK)
            t->balances_ms = now_ms;
        else {
            (void)snprintf(what, sizeof what, "tenant %s: balances", t->id);
            failed(rc, &first, what, why, err, errcap);
        }
    }
    for (enum po_slice k = PO_SLICE_JOURNALS; lc->rows && k <= PO_SLICE_RECORDS; k++)
        if ((rc = step(s, k, NULL, NULL, lc->rows, &lc->pos[k], now, out, why, sizeof why)) !=
            PO_OK)
            failed(rc, &first, po_slice_name(k), why, err, errcap);
    return first;
}

po_err po_ledger_check_run(struct po_store *s, struct po_ledger_check *lc, int64_t now_ms,
                           struct po_ledger_check_report *out, char *err, size_t errcap)
{
    int64_t t0 = (int64_t)po_now_us();
    memset(out, 0, sizeof *out);
    char why[PO_ERRBUF_SIZE];
    po_err first = PO_OK, rc = changes(s, &out->changes, why, sizeof why);
    if (rc)
        failed(rc, &first, "changes", why, err, errcap);
    rc = slices(s, lc, now_ms, out, why, sizeof why);
    if (rc && !first) {
        first = rc;
        po_errf(err, errcap, "%s", why);
    }
    atomic_fetch_add(&lc_rounds, 1);
    atomic_fetch_add(&lc_violations, out->changes + out->raised);
    if (!first)
        atomic_store(&lc_last, (long long)time(NULL));
    atomic_fetch_add(&lc_sweep_rows, out->checked);
    atomic_fetch_add(&lc_sweep_wraps, out->wrapped);
    atomic_fetch_add(&lc_us, (int64_t)po_now_us() - t0);
    return first;
}
