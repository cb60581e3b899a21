/*
 * verify.c — the invariants of README.md, "payonce verify", as one table of queries.
 *
 * Each query returns the rows that break its invariant as three text
 * columns (tenant, object, what was found). All run inside one read-only
 * snapshot, so a verify during live traffic sees a consistent state.
 */
#include "ledger.h"

#include <stdio.h>

struct check {
    const char *name;
    const char *what; /* the invariant, for humans */
    const char *sql;
};

#define VERIFY_ROWS_PER_CHECK 50

/* Each journal's positive lines: what it moves, and in which currency. */
#define POSITIVE_LINES                                                                             \
    "(SELECT tenant_id, idem_key, SUM(amount) AS s, MIN(currency) AS cmin, MAX(currency) AS cmax"  \
    " FROM posting WHERE amount > 0 GROUP BY tenant_id, idem_key)"

static const struct check checks[] = {
    {"journal_unbalanced", "every journal's postings sum to zero per currency",
     "SELECT tenant_id, idem_key, 'sum ' || SUM(amount) || ' ' || currency FROM posting"
     " GROUP BY tenant_id, idem_key, currency HAVING SUM(amount) <> 0"
     " UNION ALL SELECT j.tenant_id, j.idem_key, 'no postings' FROM journal j WHERE NOT EXISTS"
     " (SELECT 1 FROM posting p WHERE p.tenant_id = j.tenant_id AND p.idem_key = j.idem_key)"},
    {"balance_mismatch", "each cached balance equals the sum of its postings",
     "SELECT p.tenant_id, p.account || ' ' || p.currency,"
     " 'postings ' || p.s || ' cached ' || COALESCE(b.balance, 0) FROM"
     " (SELECT tenant_id, account, currency, SUM(amount) AS s FROM posting"
     "  GROUP BY tenant_id, account, currency) p LEFT JOIN account_balance b"
     " ON b.tenant_id = p.tenant_id AND b.account = p.account AND b.currency = p.currency"
     " WHERE COALESCE(b.balance, 0) <> p.s"
     " UNION ALL SELECT b.tenant_id, b.account || ' ' || b.currency,"
     " 'postings 0 cached ' || b.balance FROM account_balance b LEFT JOIN"
     " (SELECT tenant_id, account, currency FROM posting GROUP BY tenant_id, account, currency) p"
     " ON p.tenant_id = b.tenant_id AND p.account = b.account AND p.currency = b.currency"
     " WHERE b.balance <> 0 AND p.tenant_id IS NULL"},
    {"paid_order_journals", "every PAID order has exactly one payment journal",
     "SELECT o.tenant_id, o.out_trade_no, COUNT(j.idem_key) || ' payment journals' FROM pay_order o"
     " LEFT JOIN journal j ON j.tenant_id = o.tenant_id AND j.out_trade_no = o.out_trade_no"
     " AND j.kind = 'PAY' WHERE o.status = 'PAID' GROUP BY o.tenant_id, o.out_trade_no"
     " HAVING COUNT(j.idem_key) <> 1"},
    /* The positive lines of each journal summed once (a grouped subquery),
     * then joined by key: SQLite would otherwise search every posting of
     * the tenant for each order (quadratic on a large ledger). */
    {"payment_amount", "a PAID order's payment journal moves the order's amount in its currency",
     "SELECT o.tenant_id, o.out_trade_no, 'order ' || o.amount || ' ' || o.currency ||"
     " ', payment journal ' || p.s || ' ' || p.cmin FROM pay_order o JOIN journal j"
     " ON j.tenant_id = o.tenant_id AND j.out_trade_no = o.out_trade_no AND j.kind = 'PAY'"
     " JOIN " POSITIVE_LINES " p ON p.tenant_id = j.tenant_id AND p.idem_key = j.idem_key"
     " WHERE o.status = 'PAID' AND (p.s <> o.amount OR p.cmin <> o.currency"
     " OR p.cmax <> o.currency)"},
    {"unpaid_order_has_payment", "an order that is not PAID has no payment journal",
     "SELECT o.tenant_id, o.out_trade_no, 'status ' || o.status || ' with a payment journal'"
     " FROM pay_order o WHERE o.status <> 'PAID' AND EXISTS (SELECT 1 FROM journal j WHERE"
     " j.tenant_id = o.tenant_id AND j.out_trade_no = o.out_trade_no AND j.kind = 'PAY')"},
    {"applied_without_journal", "every processed record that moved money has its journal",
     "SELECT n.tenant_id, n.idem_key, n.outcome || ' ' || n.event_type || ' without journal'"
     " FROM notify_log n WHERE (n.outcome = 'suspense' OR n.event_type IN"
     " ('PAY_SUCCESS', 'REFUND_SUCCESS', 'PROFIT_SHARE_RESULT')) AND NOT EXISTS"
     " (SELECT 1 FROM journal j WHERE j.tenant_id = n.tenant_id AND j.idem_key = n.idem_key)"},
    {"journal_without_record", "every journal has its processed record",
     "SELECT j.tenant_id, j.idem_key, j.kind || ' journal without processed record'"
     " FROM journal j WHERE NOT EXISTS (SELECT 1 FROM notify_log n WHERE"
     " n.tenant_id = j.tenant_id AND n.idem_key = j.idem_key)"},
    {"duplicate_key", "no idempotency key appears twice",
     "SELECT tenant_id, idem_key, COUNT(*) || ' processed records' FROM notify_log"
     " GROUP BY tenant_id, idem_key HAVING COUNT(*) > 1"
     " UNION ALL SELECT tenant_id, idem_key, COUNT(*) || ' journals' FROM journal"
     " GROUP BY tenant_id, idem_key HAVING COUNT(*) > 1"},
    {"refund_totals", "an order's refunded amount is the sum of its successful refunds",
     "SELECT o.tenant_id, o.out_trade_no, 'refunded ' || o.refunded_amount || ' refunds ' ||"
     " COALESCE(SUM(r.amount), 0) FROM pay_order o LEFT JOIN refund r ON r.tenant_id = o.tenant_id"
     " AND r.out_trade_no = o.out_trade_no AND r.status = 'SUCCESS' AND r.suspense_key IS NULL"
     " GROUP BY o.tenant_id, o.out_trade_no, o.refunded_amount"
     " HAVING o.refunded_amount <> COALESCE(SUM(r.amount), 0)"},
    {"refund_reserved", "an order's reserved refund amount is the sum of its refunds not closed",
     "SELECT o.tenant_id, o.out_trade_no, 'reserved ' || o.refund_reserved || ' refunds ' ||"
     " COALESCE(SUM(r.amount), 0) FROM pay_order o LEFT JOIN refund r ON r.tenant_id = o.tenant_id"
     " AND r.out_trade_no = o.out_trade_no AND r.status <> 'CLOSED' AND r.suspense_key IS NULL"
     " GROUP BY o.tenant_id, o.out_trade_no, o.refund_reserved"
     " HAVING o.refund_reserved <> COALESCE(SUM(r.amount), 0)"},
    {"refund_journals", "every successful refund has exactly one refund journal",
     "SELECT r.tenant_id, r.out_refund_no, COUNT(j.idem_key) || ' refund journals' FROM refund r"
     " LEFT JOIN journal j ON j.tenant_id = r.tenant_id AND j.out_refund_no = r.out_refund_no"
     " AND j.kind = 'REFUND' WHERE r.status = 'SUCCESS' GROUP BY r.tenant_id, r.out_refund_no"
     " HAVING COUNT(j.idem_key) <> 1"},
    {"refund_amount", "a successful refund's journal moves the refund's amount in its currency",
     "SELECT r.tenant_id, r.out_refund_no, 'refund ' || r.amount || ' ' || r.currency ||"
     " ', refund journal ' || p.s || ' ' || p.cmin FROM refund r JOIN journal j"
     " ON j.tenant_id = r.tenant_id AND j.out_refund_no = r.out_refund_no AND j.kind = 'REFUND'"
     " JOIN " POSITIVE_LINES " p ON p.tenant_id = j.tenant_id AND p.idem_key = j.idem_key"
     " WHERE r.status = 'SUCCESS' AND (p.s <> r.amount OR p.cmin <> r.currency"
     " OR p.cmax <> r.currency)"},
    /* A suspense journal has one positive line (the clearing account's, for
     * a payment parked there): what it parked. */
    {"suspense_refunds",
     "a refund of a suspense payment returns exactly what that payment parked, at most once",
     "SELECT r.tenant_id, r.out_refund_no, 'returns ' || r.amount || ' ' || r.currency ||"
     " ' of ' || r.suspense_key || ', which parked ' || COALESCE(p.amount || ' ' || p.currency,"
     " 'nothing') FROM refund r LEFT JOIN journal j ON j.tenant_id = r.tenant_id AND"
     " j.idem_key = r.suspense_key AND j.kind = 'SUSPENSE' LEFT JOIN posting p ON"
     " p.tenant_id = j.tenant_id AND p.idem_key = j.idem_key AND p.amount > 0"
     " WHERE r.suspense_key IS NOT NULL AND (p.amount IS NULL OR p.amount <> r.amount"
     " OR p.currency <> r.currency)"
     " UNION ALL SELECT tenant_id, suspense_key, COUNT(*) || ' successful refunds' FROM refund"
     " WHERE suspense_key IS NOT NULL AND status = 'SUCCESS' GROUP BY tenant_id, suspense_key"
     " HAVING COUNT(*) > 1"},
    {"refund_source",
     "a refund's journal takes the money from the merchant's payable, or from suspense for a"
     " refund of a suspense payment",
     "SELECT r.tenant_id, r.out_refund_no, 'debits ' || p.account FROM refund r JOIN journal j"
     " ON j.tenant_id = r.tenant_id AND j.out_refund_no = r.out_refund_no AND j.kind = 'REFUND'"
     " JOIN posting p ON p.tenant_id = j.tenant_id AND p.idem_key = j.idem_key AND p.amount > 0"
     " WHERE (r.suspense_key IS NULL AND p.account = 'suspense') OR"
     " (r.suspense_key IS NOT NULL AND p.account <> 'suspense')"},
};

po_err po_ledger_verify(struct po_store *s, void (*report)(void *ctx, const struct po_violation *v),
                        void *ctx, int *out_count, char *err, size_t errcap)
{
    int count = 0;
    po_err rc = po_store_begin_read(s, err, errcap);
    if (rc)
        return rc;
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        char sql[2048];
        struct po_rows r;
        rc = po_fmt(sql, sizeof sql, "%s LIMIT %d", checks[i].sql, VERIFY_ROWS_PER_CHECK);
        PO_ASSERT(rc == PO_OK);
        rc = po_store_exec(s, sql, PO_NO_PARAMS, &r, NULL, err, errcap);
        if (rc)
            goto out;
        for (int row = 0; row < r.nrows; row++) {
            struct po_violation v;
            (void)snprintf(v.check, sizeof v.check, "%s", checks[i].name);
            (void)snprintf(v.detail, sizeof v.detail, "tenant %s: %s: %s (%s)",
                           po_rows_get(&r, row, 0), po_rows_get(&r, row, 1),
                           po_rows_get(&r, row, 2) ? po_rows_get(&r, row, 2) : "?", checks[i].what);
            count++;
            if (report)
                report(ctx, &v);
        }
        po_rows_free(&r);
    }
    *out_count = count;
out:
    po_store_rollback(s);
    return rc;
}
