/*
 * verify.c — the invariants of README.md, "payonce verify", as one table of queries.
 *
 * Each query returns the rows that break its invariant as three text
 * columns (tenant, object, what was found; each amount in it written
 * {MINOR CURRENCY}, said in major units by report_row). All run inside
 * one read-only snapshot, so a verify during live traffic sees a
 * consistent state.
 */
#include "ledger.h"

#include <stdio.h>
#include <string.h>

struct check {
    const char *name;
    const char *what; /* the invariant, for humans */
    const char *sql;
    bool of_order; /* its rows' object is an order (out_trade_no) */
};

#define VERIFY_ROWS_PER_CHECK 50

/* Each journal's positive lines: what it moves, and in which currency. */
#define POSITIVE_LINES                                                                             \
    "(SELECT tenant_id, idem_key, SUM(amount) AS s, MIN(currency) AS cmin, MAX(currency) AS cmax"  \
    " FROM posting WHERE amount > 0 GROUP BY tenant_id, idem_key)"

static const struct check checks[] = {
    {"journal_unbalanced", "every journal's postings sum to zero per currency",
     "SELECT tenant_id, idem_key, 'sum {' || SUM(amount) || ' ' || currency || '}' FROM posting"
     " GROUP BY tenant_id, idem_key, currency HAVING SUM(amount) <> 0"
     " UNION ALL SELECT j.tenant_id, j.idem_key, 'no postings' FROM journal j WHERE NOT EXISTS"
     " (SELECT 1 FROM posting p WHERE p.tenant_id = j.tenant_id AND p.idem_key = j.idem_key)",
     false},
    {"balance_mismatch", "each cached balance equals the sum of its postings",
     "SELECT p.tenant_id, p.account || ' ' || p.currency,"
     " 'postings {' || p.s || ' ' || p.currency || '} cached {' || COALESCE(b.balance, 0) || ' '"
     " || p.currency || '}' FROM"
     " (SELECT tenant_id, account, currency, SUM(amount) AS s FROM posting"
     "  GROUP BY tenant_id, account, currency) p LEFT JOIN account_balance b"
     " ON b.tenant_id = p.tenant_id AND b.account = p.account AND b.currency = p.currency"
     " WHERE COALESCE(b.balance, 0) <> p.s"
     " UNION ALL SELECT b.tenant_id, b.account || ' ' || b.currency,"
     " 'postings {0 ' || b.currency || '} cached {' || b.balance || ' ' || b.currency || '}'"
     " FROM account_balance b LEFT JOIN"
     " (SELECT tenant_id, account, currency FROM posting GROUP BY tenant_id, account, currency) p"
     " ON p.tenant_id = b.tenant_id AND p.account = b.account AND p.currency = b.currency"
     " WHERE b.balance <> 0 AND p.tenant_id IS NULL",
     false},
    {"paid_order_journals", "every PAID order has exactly one payment journal",
     "SELECT o.tenant_id, o.out_trade_no, COUNT(j.idem_key) || ' payment journals' FROM pay_order o"
     " LEFT JOIN journal j ON j.tenant_id = o.tenant_id AND j.out_trade_no = o.out_trade_no"
     " AND j.kind = 'PAY' WHERE o.status = 'PAID' GROUP BY o.tenant_id, o.out_trade_no"
     " HAVING COUNT(j.idem_key) <> 1",
     true},
    /* The positive lines of each journal summed once (a grouped subquery),
     * then joined by key: SQLite would otherwise search every posting of
     * the tenant for each order (quadratic on a large ledger). */
    {"payment_amount", "a PAID order's payment journal moves the order's amount in its currency",
     "SELECT o.tenant_id, o.out_trade_no, 'order {' || o.amount || ' ' || o.currency ||"
     " '}, payment journal {' || p.s || ' ' || p.cmin || '}' FROM pay_order o JOIN journal j"
     " ON j.tenant_id = o.tenant_id AND j.out_trade_no = o.out_trade_no AND j.kind = 'PAY'"
     " JOIN " POSITIVE_LINES " p ON p.tenant_id = j.tenant_id AND p.idem_key = j.idem_key"
     " WHERE o.status = 'PAID' AND (p.s <> o.amount OR p.cmin <> o.currency"
     " OR p.cmax <> o.currency)",
     true},
    {"unpaid_order_has_payment", "an order that is not PAID has no payment journal",
     "SELECT o.tenant_id, o.out_trade_no, 'status ' || o.status || ' with a payment journal'"
     " FROM pay_order o WHERE o.status <> 'PAID' AND EXISTS (SELECT 1 FROM journal j WHERE"
     " j.tenant_id = o.tenant_id AND j.out_trade_no = o.out_trade_no AND j.kind = 'PAY')",
     true},
    {"applied_without_journal", "every processed record that moved money has its journal",
     "SELECT n.tenant_id, n.idem_key, n.outcome || ' ' || n.event_type || ' without journal'"
     " FROM notify_log n WHERE (n.outcome = 'suspense' OR n.event_type IN"
     " ('PAY_SUCCESS', 'REFUND_SUCCESS', 'PROFIT_SHARE_RESULT')) AND NOT EXISTS"
     " (SELECT 1 FROM journal j WHERE j.tenant_id = n.tenant_id AND j.idem_key = n.idem_key)",
     false},
    {"journal_without_record", "every journal has its processed record",
     "SELECT j.tenant_id, j.idem_key, j.kind || ' journal without processed record'"
     " FROM journal j WHERE NOT EXISTS (SELECT 1 FROM notify_log n WHERE"
     " n.tenant_id = j.tenant_id AND n.idem_key = j.idem_key)",
     false},
    {"duplicate_key", "no idempotency key appears twice",
     "SELECT tenant_id, idem_key, COUNT(*) || ' processed records' FROM notify_log"
     " GROUP BY tenant_id, idem_key HAVING COUNT(*) > 1"
     " UNION ALL SELECT tenant_id, idem_key, COUNT(*) || ' journals' FROM journal"
     " GROUP BY tenant_id, idem_key HAVING COUNT(*) > 1",
     false},
    {"refund_totals", "an order's refunded amount is the sum of its successful refunds",
     "SELECT o.tenant_id, o.out_trade_no, 'refunded {' || o.refunded_amount || ' ' || o.currency"
     " || '} refunds {' || COALESCE(SUM(r.amount), 0) || ' ' || o.currency || '}' FROM pay_order"
     " o LEFT JOIN refund r ON r.tenant_id = o.tenant_id"
     " AND r.out_trade_no = o.out_trade_no AND r.status = 'SUCCESS' AND r.suspense_key IS NULL"
     " GROUP BY o.tenant_id, o.out_trade_no, o.refunded_amount, o.currency"
     " HAVING o.refunded_amount <> COALESCE(SUM(r.amount), 0)",
     true},
    {"refund_reserved", "an order's reserved refund amount is the sum of its refunds not closed",
     "SELECT o.tenant_id, o.out_trade_no, 'reserved {' || o.refund_reserved || ' ' || o.currency"
     " || '} refunds {' || COALESCE(SUM(r.amount), 0) || ' ' || o.currency || '}' FROM pay_order"
     " o LEFT JOIN refund r ON r.tenant_id = o.tenant_id"
     " AND r.out_trade_no = o.out_trade_no AND r.status <> 'CLOSED' AND r.suspense_key IS NULL"
     " GROUP BY o.tenant_id, o.out_trade_no, o.refund_reserved, o.currency"
     " HAVING o.refund_reserved <> COALESCE(SUM(r.amount), 0)",
     true},
    {"refund_journals", "every successful refund has exactly one refund journal",
     "SELECT r.tenant_id, r.out_refund_no, COUNT(j.idem_key) || ' refund journals' FROM refund r"
     " LEFT JOIN journal j ON j.tenant_id = r.tenant_id AND j.out_refund_no = r.out_refund_no"
     " AND j.kind = 'REFUND' WHERE r.status = 'SUCCESS' GROUP BY r.tenant_id, r.out_refund_no"
     " HAVING COUNT(j.idem_key) <> 1",
     false},
    {"refund_amount", "a successful refund's journal moves the refund's amount in its currency",
     "SELECT r.tenant_id, r.out_refund_no, 'refund {' || r.amount || ' ' || r.currency ||"
     " '}, refund journal {' || p.s || ' ' || p.cmin || '}' FROM refund r JOIN journal j"
     " ON j.tenant_id = r.tenant_id AND j.out_refund_no = r.out_refund_no AND j.kind = 'REFUND'"
     " JOIN " POSITIVE_LINES " p ON p.tenant_id = j.tenant_id AND p.idem_key = j.idem_key"
     " WHERE r.status = 'SUCCESS' AND (p.s <> r.amount OR p.cmin <> r.currency"
     " OR p.cmax <> r.currency)",
     false},
    /* A suspense journal has one positive line (the clearing account's, for
     * a payment parked there): what it parked. */
    {"suspense_refunds",
     "a refund of a suspense payment returns exactly what that payment parked, at most once",
     "SELECT r.tenant_id, r.out_refund_no, 'returns {' || r.amount || ' ' || r.currency ||"
     " '} of ' || r.suspense_key || ', which parked ' || COALESCE('{' || p.amount || ' ' ||"
     " p.currency || '}', 'nothing') FROM refund r LEFT JOIN journal j ON j.tenant_id ="
     " r.tenant_id AND"
     " j.idem_key = r.suspense_key AND j.kind = 'SUSPENSE' LEFT JOIN posting p ON"
     " p.tenant_id = j.tenant_id AND p.idem_key = j.idem_key AND p.amount > 0"
     " WHERE r.suspense_key IS NOT NULL AND (p.amount IS NULL OR p.amount <> r.amount"
     " OR p.currency <> r.currency)"
     " UNION ALL SELECT tenant_id, suspense_key, COUNT(*) || ' successful refunds' FROM refund"
     " WHERE suspense_key IS NOT NULL AND status = 'SUCCESS' GROUP BY tenant_id, suspense_key"
     " HAVING COUNT(*) > 1",
     false},
    {"refund_source",
     "a refund's journal takes the money from the merchant's payable, or from suspense for a"
     " refund of a suspense payment",
     "SELECT r.tenant_id, r.out_refund_no, 'debits ' || p.account FROM refund r JOIN journal j"
     " ON j.tenant_id = r.tenant_id AND j.out_refund_no = r.out_refund_no AND j.kind = 'REFUND'"
     " JOIN posting p ON p.tenant_id = j.tenant_id AND p.idem_key = j.idem_key AND p.amount > 0"
     " WHERE (r.suspense_key IS NULL AND p.account = 'suspense') OR"
     " (r.suspense_key IS NOT NULL AND p.account <> 'suspense')",
     false},
};

/* One violation, reported: its row's tenant, object and what was found. */
static void report_row(const struct check *c, const struct po_rows *r, int row, int col,
                       void (*report)(void *ctx, const struct po_violation *v), void *ctx)
{
    struct po_violation v;
    const char *t = po_rows_get(r, row, col), *o = po_rows_get(r, row, col + 1),
               *found = po_rows_get(r, row, col + 2);
    (void)snprintf(v.check, sizeof v.check, "%s", c->name);
    v.of_order = c->of_order;
    (void)snprintf(v.tenant, sizeof v.tenant, "%s", t ? t : "");
    (void)snprintf(v.object, sizeof v.object, "%s", o ? o : "");
    /* the query writes each amount as {MINOR CURRENCY}: for a person, in
     * major units with its currency (po_money_expand) */
    char said[sizeof v.detail];
    po_money_expand(found ? found : "?", said, sizeof said);
    int len = snprintf(v.detail, sizeof v.detail, "tenant %s: %.160s: %s (%s)", v.tenant, v.object,
                       said, c->what);
    PO_ASSERT(len >= 0); /* longer than detail: cut, it is for people */
    if (report)
        report(ctx, &v);
}

/* One check's rows, reported (tenant, object, what was found). */
static po_err run_check(struct po_store *s, const struct check *c, const char *sql,
                        void (*report)(void *ctx, const struct po_violation *v), void *ctx,
                        int *count, char *err, size_t errcap)
{
    struct po_rows r;
    po_err rc = po_store_exec(s, sql, PO_NO_PARAMS, &r, NULL, err, errcap);
    if (rc)
        return rc;
    for (int row = 0; row < r.nrows; row++, (*count)++)
        report_row(c, &r, row, 0, report, ctx);
    po_rows_free(&r);
    return PO_OK;
}

po_err po_ledger_verify(struct po_store *s, void (*report)(void *ctx, const struct po_violation *v),
                        void *ctx, int *out_count, char *err, size_t errcap)
{
    int count = 0;
    po_err rc = po_store_begin_read(s, err, errcap);
    if (rc)
        return rc;
    for (size_t i = 0; !rc && i < sizeof checks / sizeof checks[0]; i++) {
        char sql[2048];
        PO_ASSERT(po_fmt(sql, sizeof sql, "%s LIMIT %d", checks[i].sql, VERIFY_ROWS_PER_CHECK) ==
                  PO_OK);
        rc = run_check(s, &checks[i], sql, report, ctx, &count, err, errcap);
    }
    if (!rc)
        *out_count = count;
    po_store_rollback(s);
    return rc;
}

/* ---- slices: the same invariants over a key range (w: tenant_id, k) ---- */

/* What a check reads: the slice's journals with their postings summed, its
 * orders with their journals and refunds summed (each row read once, by
 * key, for all the checks of its shape), refunds, processed records' keys,
 * or one tenant. */
enum shape { SH_JOURNAL, SH_ORDER, SH_REFUND, SH_RECORD, SH_TENANT };

/* b: each journal of w (tenant_id, k, kind, out_trade_no, out_refund_no)
 * with its lines counted and summed, what it moved (its positive lines)
 * and from which accounts, its processed records, and its order (a
 * payment) or refund (a refund). One posting range, one record, one order
 * or refund read per journal. */
#define JOURNAL_FACTS                                                                              \
    ", a AS MATERIALIZED (SELECT w.tenant_id, w.k AS idem_key, w.kind, w.out_trade_no,"            \
    " w.out_refund_no, COUNT(p.line_no) AS lines, COALESCE(SUM(p.amount), 0) AS net,"              \
    " MIN(p.currency) AS cmin, MAX(p.currency) AS cmax,"                                           \
    " COALESCE(SUM(CASE WHEN p.amount > 0 THEN p.amount END), 0) AS moved,"                        \
    " MIN(CASE WHEN p.amount > 0 THEN p.account END) AS dmin,"                                     \
    " MAX(CASE WHEN p.amount > 0 THEN p.account END) AS dmax FROM w LEFT JOIN posting p ON"        \
    " p.tenant_id = w.tenant_id AND p.idem_key = w.k"                                              \
    " GROUP BY w.tenant_id, w.k, w.kind, w.out_trade_no, w.out_refund_no),"                        \
    " b AS MATERIALIZED (SELECT a.*, (SELECT COUNT(*) FROM notify_log n WHERE"                     \
    " n.tenant_id = a.tenant_id AND n.idem_key = a.idem_key) AS records, o.status AS ostatus,"     \
    " o.amount AS oamount, o.currency AS ocurrency, r.status AS rstatus, r.amount AS ramount,"     \
    " r.currency AS rcurrency, r.suspense_key AS rsuspense FROM a LEFT JOIN pay_order o ON"        \
    " a.kind = 'PAY' AND o.tenant_id = a.tenant_id AND o.out_trade_no = a.out_trade_no"            \
    " LEFT JOIN refund r ON a.kind = 'REFUND' AND r.tenant_id = a.tenant_id AND"                   \
    " r.out_refund_no = a.out_refund_no) "

/* c: each order of w with its payment journals counted and its refunds
 * summed (refunded: successful; reserved: not closed; a suspense payment's
 * refunds are not the order's). */
#define ORDER_FACTS                                                                                \
    ", c AS MATERIALIZED (SELECT o.tenant_id, o.out_trade_no, o.status, o.refunded_amount,"        \
    " o.refund_reserved, o.currency, (SELECT COUNT(*) FROM journal j WHERE"                        \
    " j.tenant_id = o.tenant_id AND"                                                               \
    " j.out_trade_no = o.out_trade_no AND j.kind = 'PAY') AS pays,"                                \
    " COALESCE(SUM(CASE WHEN r.status = 'SUCCESS' AND r.suspense_key IS NULL THEN r.amount END),"  \
    " 0) AS refunded, COALESCE(SUM(CASE WHEN r.status <> 'CLOSED' AND r.suspense_key IS NULL"      \
    " THEN r.amount END), 0) AS reserved FROM w JOIN pay_order o ON o.tenant_id = w.tenant_id"     \
    " AND o.out_trade_no = w.k LEFT JOIN refund r ON r.tenant_id = o.tenant_id AND"                \
    " r.out_trade_no = o.out_trade_no GROUP BY o.tenant_id, o.out_trade_no, o.status,"             \
    " o.refunded_amount, o.refund_reserved, o.currency) "

#define MONEY_RECORD                                                                               \
    "(n.outcome = 'suspense' OR n.event_type IN ('PAY_SUCCESS', 'REFUND_SUCCESS',"                 \
    " 'PROFIT_SHARE_RESULT'))"

struct slice_check {
    const char *name; /* a check of checks[] (its what and of_order are reported) */
    enum shape shape;
    const char *sql;
};

/* A journal of more than one currency is named by its payment's or
 * refund's amount check (verify sums each currency apart). */
static const struct slice_check slice_checks[] = {
    {"journal_unbalanced", SH_JOURNAL,
     "SELECT tenant_id, idem_key, CASE WHEN lines = 0 THEN 'no postings' ELSE 'sum {' || net ||"
     " ' ' || cmin || '}' END FROM b WHERE lines = 0 OR (cmin = cmax AND net <> 0)"},
    {"journal_without_record", SH_JOURNAL,
     "SELECT tenant_id, idem_key, kind || ' journal without processed record' FROM b"
     " WHERE records = 0"},
    {"unpaid_order_has_payment", SH_JOURNAL,
     "SELECT tenant_id, out_trade_no, 'status ' || ostatus || ' with a payment journal' FROM b"
     " WHERE kind = 'PAY' AND ostatus <> 'PAID'"},
    {"payment_amount", SH_JOURNAL,
     "SELECT tenant_id, out_trade_no, 'order {' || oamount || ' ' || ocurrency ||"
     " '}, payment journal {' || moved || ' ' || cmin || '}' FROM b WHERE kind = 'PAY' AND"
     " ostatus = 'PAID' AND (moved <> oamount OR cmin <> ocurrency OR cmax <> ocurrency)"},
    {"refund_amount", SH_JOURNAL,
     "SELECT tenant_id, out_refund_no, 'refund {' || ramount || ' ' || rcurrency ||"
     " '}, refund journal {' || moved || ' ' || cmin || '}' FROM b WHERE kind = 'REFUND' AND"
     " rstatus = 'SUCCESS' AND (moved <> ramount OR cmin <> rcurrency OR cmax <> rcurrency)"},
    {"refund_source", SH_JOURNAL,
     "SELECT tenant_id, out_refund_no, 'debits ' || CASE WHEN rsuspense IS NULL THEN 'suspense'"
     " WHEN dmin <> 'suspense' THEN dmin ELSE dmax END FROM b WHERE kind = 'REFUND' AND"
     " rstatus IS NOT NULL AND ((rsuspense IS NULL AND (dmin = 'suspense' OR dmax ="
     " 'suspense')) OR (rsuspense IS NOT NULL AND (dmin <> 'suspense' OR dmax <> 'suspense')))"},
    {"paid_order_journals", SH_ORDER,
     "SELECT tenant_id, out_trade_no, pays || ' payment journals' FROM c WHERE status = 'PAID'"
     " AND pays <> 1"},
    {"refund_totals", SH_ORDER,
     "SELECT tenant_id, out_trade_no, 'refunded {' || refunded_amount || ' ' || currency ||"
     " '} refunds {' || refunded || ' ' || currency || '}' FROM c WHERE refunded_amount <>"
     " refunded"},
    {"refund_reserved", SH_ORDER,
     "SELECT tenant_id, out_trade_no, 'reserved {' || refund_reserved || ' ' || currency ||"
     " '} refunds {' || reserved || ' ' || currency || '}' FROM c WHERE refund_reserved <>"
     " reserved"},
    {"applied_without_journal", SH_RECORD,
     "SELECT n.tenant_id, n.idem_key, n.outcome || ' ' || n.event_type || ' without journal'"
     " FROM w JOIN notify_log n ON n.tenant_id = w.tenant_id AND n.idem_key = w.k "
     "WHERE " MONEY_RECORD
     " AND NOT EXISTS (SELECT 1 FROM journal j WHERE j.tenant_id = n.tenant_id AND"
     " j.idem_key = n.idem_key)"},
    {"refund_journals", SH_REFUND,
     "SELECT r.tenant_id, r.out_refund_no, COUNT(j.idem_key) || ' refund journals' FROM w"
     " JOIN refund r ON r.tenant_id = w.tenant_id AND r.out_refund_no = w.k"
     " LEFT JOIN journal j ON j.tenant_id = r.tenant_id AND j.out_trade_no = r.out_trade_no"
     " AND j.out_refund_no = r.out_refund_no AND j.kind = 'REFUND' WHERE r.status = 'SUCCESS'"
     " GROUP BY r.tenant_id, r.out_refund_no HAVING COUNT(j.idem_key) <> 1"},
    {"suspense_refunds", SH_REFUND,
     "SELECT r.tenant_id, r.out_refund_no, 'returns {' || r.amount || ' ' || r.currency ||"
     " '} of ' || r.suspense_key || ', which parked ' || COALESCE('{' || p.amount || ' ' ||"
     " p.currency || '}', 'nothing') FROM w JOIN refund r ON r.tenant_id = w.tenant_id AND"
     " r.out_refund_no = w.k"
     " LEFT JOIN journal j ON j.tenant_id = r.tenant_id AND j.idem_key = r.suspense_key AND"
     " j.kind = 'SUSPENSE' LEFT JOIN posting p ON p.tenant_id = j.tenant_id AND"
     " p.idem_key = j.idem_key AND p.amount > 0 WHERE r.suspense_key IS NOT NULL AND"
     " (p.amount IS NULL OR p.amount <> r.amount OR p.currency <> r.currency)"},
    {"balance_mismatch", SH_TENANT,
     "SELECT p.tenant_id, p.account || ' ' || p.currency,"
     " 'postings {' || p.s || ' ' || p.currency || '} cached {' || COALESCE(b.balance, 0) || ' '"
     " || p.currency || '}' FROM p"
     " LEFT JOIN account_balance b ON b.tenant_id = p.tenant_id AND b.account = p.account AND"
     " b.currency = p.currency WHERE COALESCE(b.balance, 0) <> p.s"
     " UNION ALL SELECT b.tenant_id, b.account || ' ' || b.currency, 'postings {0 ' || b.currency"
     " || '} cached {' || b.balance || ' ' || b.currency || '}'"
     " FROM w JOIN account_balance b ON b.tenant_id = w.tenant_id LEFT JOIN p ON"
     " p.tenant_id = b.tenant_id AND p.account = b.account AND p.currency = b.currency"
     " WHERE b.balance <> 0 AND p.tenant_id IS NULL"},
};

/* Each slice's rows: its table and key, what its w holds; the new writes
 * are read from the tenant's outbox in the order they were written (every
 * event that moved money names its order: its journals are the order's). */
static const struct {
    const char *name, *table, *key;
    enum shape shape;
} slices[] = {
    [PO_SLICE_NEW] = {"new", "outbox_event", "event_id", SH_ORDER},
    [PO_SLICE_JOURNALS] = {"journals", "journal", "idem_key", SH_JOURNAL},
    [PO_SLICE_ORDERS] = {"orders", "pay_order", "out_trade_no", SH_ORDER},
    [PO_SLICE_REFUNDS] = {"refunds", "refund", "out_refund_no", SH_REFUND},
    [PO_SLICE_RECORDS] = {"records", "notify_log", "idem_key", SH_RECORD},
    [PO_SLICE_BALANCES] = {"balances", "account_balance", NULL, SH_TENANT},
};

const char *po_slice_name(enum po_slice k)
{
    return slices[k].name;
}

static const struct check *check_of(const char *name)
{
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++)
        if (strcmp(checks[i].name, name) == 0)
            return &checks[i];
    PO_ASSERT(!"a slice check names a check of verify");
    return NULL;
}

/* The slice's rows: the first n after `after` in key order (the new
 * writes: the tenant's events up to cut), an index range read. */
static void range_of(enum po_slice k, const char *tenant, const struct po_slice_pos *after,
                     const char *cut, int n, char *sql, size_t cap, struct po_param *p, int *np)
{
    *np = 0;
    if (k == PO_SLICE_NEW) {
        PO_ASSERT(po_fmt(sql, cap,
                         "SELECT tenant_id, created_at AS a, event_id AS b, object_id FROM"
                         " outbox_event WHERE tenant_id = ? AND (created_at, event_id) > (?, ?)"
                         " AND created_at <= ? ORDER BY created_at, event_id LIMIT %d",
                         n) == PO_OK);
        p[(*np)++] = PO_TEXT(tenant);
    } else
        PO_ASSERT(po_fmt(sql, cap,
                         "SELECT tenant_id, tenant_id AS a, %s AS b, %s AS k%s FROM %s WHERE"
                         " (tenant_id, %s) > (?, ?) ORDER BY tenant_id, %s LIMIT %d",
                         slices[k].key, slices[k].key,
                         k == PO_SLICE_JOURNALS ? ", kind, out_trade_no, out_refund_no" : "",
                         slices[k].table, slices[k].key, slices[k].key, n) == PO_OK);
    p[(*np)++] = PO_TEXT(after->a);
    p[(*np)++] = PO_TEXT(after->b);
    if (k == PO_SLICE_NEW)
        p[(*np)++] = PO_TEXT(cut);
}

/* The check's w for slice k (r: the slice's rows, as range_of); false:
 * the check is not one of k's (the new writes run the journals' and the
 * orders' checks, over the orders their events name). */
static bool w_of(enum po_slice k, enum shape sh, const char *r, char *w, size_t cap)
{
    const char *facts = sh == SH_JOURNAL ? JOURNAL_FACTS : sh == SH_ORDER ? ORDER_FACTS : " ";
    if (k == PO_SLICE_NEW && sh == SH_JOURNAL)
        PO_ASSERT(po_fmt(w, cap,
                         "WITH r AS MATERIALIZED (%s), w AS MATERIALIZED (SELECT DISTINCT"
                         " j.tenant_id, j.idem_key AS k, j.kind, j.out_trade_no, j.out_refund_no"
                         " FROM r JOIN journal j ON j.tenant_id = r.tenant_id AND"
                         " j.out_trade_no = r.object_id)%s",
                         r, facts) == PO_OK);
    else if (k == PO_SLICE_NEW && sh == SH_ORDER)
        PO_ASSERT(
            po_fmt(w, cap,
                   "WITH r AS MATERIALIZED (%s), w AS MATERIALIZED (SELECT DISTINCT tenant_id,"
                   " object_id AS k FROM r)%s",
                   r, facts) == PO_OK);
    else if (sh != slices[k].shape)
        return false;
    else if (k == PO_SLICE_BALANCES)
        (void)snprintf(w, cap,
                       "WITH w AS (SELECT CAST(? AS TEXT) AS tenant_id), p AS MATERIALIZED"
                       " (SELECT x.tenant_id, x.account, x.currency, SUM(x.amount) AS s FROM w"
                       " JOIN posting x ON x.tenant_id = w.tenant_id"
                       " GROUP BY x.tenant_id, x.account, x.currency) ");
    else
        PO_ASSERT(po_fmt(w, cap, "WITH w AS MATERIALIZED (SELECT * FROM (%s) r)%s", r, facts) ==
                  PO_OK);
    return true;
}

po_err po_ledger_verify_slice(struct po_store *s, enum po_slice k, const char *tenant,
                              const struct po_slice_pos *after, const char *cut, int n,
                              struct po_slice_pos *end, int *rows,
                              void (*report)(void *ctx, const struct po_violation *v), void *ctx,
                              int *out_count, char *err, size_t errcap)
{
    char r[512], sql[8192];
    struct po_param p[4];
    int np = 0, count = 0;
    *rows = 0;
    if (k == PO_SLICE_BALANCES) {
        p[np++] = PO_TEXT(tenant);
        r[0] = '\0';
    } else
        range_of(k, tenant, after, cut, n, r, sizeof r, p, &np);
    po_err rc = po_store_begin_read(s, err, errcap);
    if (rc)
        return rc;
    /* Every check here is index reads by design (PostgreSQL's statistics
     * lag a fast-growing ledger: with journal still "empty" it chose a
     * sequential scan of it inside a loop over 20,000 events, 56 s on
     * 40,000 journals in make bench); and a slice that still runs long is
     * cancelled (its position kept: tried again next round). */
    static const char *const pg_settings[] = {
        "SET LOCAL enable_seqscan = off", "SET LOCAL enable_hashjoin = off",
        "SET LOCAL enable_mergejoin = off",
        "SET LOCAL statement_timeout = '" PO_STR(PO_LEDGER_SLICE_TIMEOUT_MS) "'"};
    /* (the balances' check joins two whole sets of a tenant's accounts:
     * it keeps its hash join) */
    for (int i = 0; !rc && i < 4 && strcmp(po_store_backend(s), "postgres") == 0; i++)
        if (k != PO_SLICE_BALANCES || i == 0 || i == 3)
            rc = po_store_exec(s, pg_settings[i], PO_NO_PARAMS, NULL, NULL, err, errcap);
    if (!rc && k != PO_SLICE_BALANCES) { /* the slice's end, in the checks' snapshot */
        struct po_rows e;
        PO_ASSERT(po_fmt(sql, sizeof sql,
                         "SELECT a, b, COUNT(*) OVER () FROM (%s) x ORDER BY a DESC, b DESC"
                         " LIMIT 1",
                         r) == PO_OK);
        rc = po_store_exec(s, sql, p, np, &e, NULL, err, errcap);
        if (!rc) {
            int64_t c = 0;
            if (e.nrows == 1 && (rc = po_rows_i64(&e, 0, 2, &c)) == PO_OK) {
                (void)snprintf(end->a, sizeof end->a, "%s", po_rows_get(&e, 0, 0));
                (void)snprintf(end->b, sizeof end->b, "%s", po_rows_get(&e, 0, 1));
            }
            *rows = (int)c;
            po_rows_free(&e);
        }
    }
    /* one statement per shape of w: its checks' rows, each led by the
     * check's number, so that w is read once */
    for (enum shape sh = SH_JOURNAL; !rc && (*rows || k == PO_SLICE_BALANCES) && sh <= SH_TENANT;
         sh++) {
        size_t len = 0;
        for (size_t i = 0; i < sizeof slice_checks / sizeof slice_checks[0]; i++) {
            if (slice_checks[i].shape != sh || (!len && !w_of(k, sh, r, sql, sizeof sql)))
                continue;
            len = strlen(sql);
            PO_ASSERT(po_fmt(sql + len, sizeof sql - len, "%sSELECT %zu, x.* FROM (%s LIMIT %d) x",
                             len && sql[len - 1] != ' ' ? " UNION ALL " : "", i,
                             slice_checks[i].sql, VERIFY_ROWS_PER_CHECK) == PO_OK);
            len = strlen(sql);
        }
        if (!len)
            continue;
        struct po_rows u;
        rc = po_store_exec(s, sql, p, np, &u, NULL, err, errcap);
        for (int row = 0; !rc && row < u.nrows; row++, count++) {
            int64_t i = -1;
            PO_ASSERT(po_rows_i64(&u, row, 0, &i) == PO_OK && i >= 0 &&
                      (size_t)i < sizeof slice_checks / sizeof slice_checks[0]);
            report_row(check_of(slice_checks[i].name), &u, row, 1, report, ctx);
        }
        if (!rc)
            po_rows_free(&u);
    }
    if (!rc)
        *out_count = count;
    po_store_rollback(s);
    return rc;
}
