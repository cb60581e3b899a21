/*
 * ledger.h — double-entry postings, cached balances and the invariants.
 *
 * A journal is one business event (keyed by its idempotency key); its lines
 * are signed minor units (debit positive, credit negative) in one currency
 * and sum to zero. Cached balances (account_balance) are not written per
 * journal: postings add their deltas to a po_ledger_batch, and the engine
 * flushes the batch once, in sorted account order, before COMMIT. A hot
 * merchant row is therefore written once per transaction, and concurrent
 * transactions lock balance rows in one global order.
 *
 * Account names:  channel_clearing:<channel>   asset: money held by the channel
 *                 merchant_payable:<merchant>  liability: owed to the merchant
 *                 profit_share:<receiver>      liability: owed to a receiver
 *                 suspense                     real money awaiting an operator
 */
#ifndef PO_LEDGER_H
#define PO_LEDGER_H

#include "../core/core.h"
#include "../store/store.h"

struct po_posting_line {
    char account[PO_ACCOUNT_SIZE]; /* see the account names above */
    int64_t amount_minor;          /* debit > 0, credit < 0, never 0 */
};

/* The journal to write: all lines in one currency, summing to zero. */
struct po_journal {
    const char *tenant;
    const char *idem_key;
    const char *kind; /* PAY | REFUND | PROFIT_SHARE | SUSPENSE */
    const char *out_trade_no;
    const char *out_refund_no; /* may be NULL */
    const char *currency;
    const char *created_at;
    struct po_posting_line lines[PO_LEDGER_LINES_MAX];
    int nlines;
};

struct po_balance_delta {
    char tenant[PO_ID_MAX + 1];
    char account[PO_ACCOUNT_SIZE];
    char currency[4];
    int64_t delta_minor;
};

/* Balance deltas accumulated by one transaction. */
struct po_ledger_batch {
    int n;
    struct po_balance_delta d[PO_LEDGER_DELTAS_MAX];
};

void po_ledger_batch_reset(struct po_ledger_batch *b);
/* Adds every delta of src into dst (used when an event's savepoint is
 * released). PO_ERR_LIMIT when dst would overflow; dst unchanged then. */
po_err po_ledger_batch_merge(struct po_ledger_batch *dst,
                             const struct po_ledger_batch *src) PO_MUST_CHECK;

/* Writes the journal and its postings in the current transaction and adds
 * the balance deltas to *deltas. Asserts that the lines balance. */
po_err po_ledger_post(struct po_store *s, const struct po_journal *j,
                      struct po_ledger_batch *deltas, char *err, size_t errcap) PO_MUST_CHECK;

/* Writes n journals (all created at j[0].created_at) and their postings with
 * two set-based statements, and adds the balance deltas to *deltas. */
po_err po_ledger_post_batch(struct po_store *s, const struct po_journal *j, int n,
                            struct po_ledger_batch *deltas, char *err, size_t errcap) PO_MUST_CHECK;

/* Applies accumulated deltas to account_balance in one statement, sorted by
 * (tenant, account, currency), skipping zero nets. Call once per
 * transaction before COMMIT. */
po_err po_ledger_flush(struct po_store *s, const struct po_ledger_batch *deltas, const char *now,
                       char *err, size_t errcap) PO_MUST_CHECK;

/* One broken invariant found by po_ledger_verify. */
struct po_violation {
    char check[48];   /* machine name, e.g. "journal_unbalanced" */
    char detail[256]; /* which rows */
    char tenant[PO_ID_MAX + 1];
    char object[PO_KEY_SIZE]; /* the row it names: a key, an order, a refund, an account */
    bool of_order;            /* object is an order's out_trade_no */
};

/*
 * Checks every invariant of README.md, "payonce verify", in one read snapshot:
 *  journal_unbalanced, balance_mismatch, paid_order_journals,
 *  unpaid_order_has_payment, applied_without_journal, duplicate_key,
 *  refund_totals, refund_journals.
 * Calls report() for each violation (at most max_reports); *out_count is
 * the total found. PO_OK means the checks ran, not that they passed.
 */
po_err po_ledger_verify(struct po_store *s, void (*report)(void *ctx, const struct po_violation *v),
                        void *ctx, int *out_count, char *err, size_t errcap) PO_MUST_CHECK;

/*
 * The same invariants over a slice of the ledger, for serve's continuous
 * check (issue 28 item 1): each slice is the next n rows of an index after
 * a position, read in one snapshot, so its cost is bounded by n, not by the
 * ledger.
 *  PO_SLICE_NEW       a tenant's outbox events by (created_at, event_id):
 *                     the orders they name, checked as PO_SLICE_ORDERS, and
 *                     those orders' journals, as PO_SLICE_JOURNALS (every
 *                     event that moved money names its order)
 *  PO_SLICE_JOURNALS  journals by (tenant_id, idem_key): balanced, with
 *                     their processed record, their order PAID and of
 *                     their amount, their refund SUCCESS and of its amount
 *  PO_SLICE_ORDERS    orders by (tenant_id, out_trade_no): a PAID order's
 *                     one payment journal, refunded and reserved amounts
 *  PO_SLICE_REFUNDS   refunds by (tenant_id, out_refund_no): a successful
 *                     refund's one journal, a suspense refund's amount
 *  PO_SLICE_RECORDS   processed records by (tenant_id, idem_key): one that
 *                     moved money has its journal
 *  PO_SLICE_BALANCES  one tenant's cached balances against its postings
 *                     summed (a scan of that tenant's postings)
 */
enum po_slice {
    PO_SLICE_NEW,
    PO_SLICE_JOURNALS,
    PO_SLICE_ORDERS,
    PO_SLICE_REFUNDS,
    PO_SLICE_RECORDS,
    PO_SLICE_BALANCES,
};
const char *po_slice_name(enum po_slice k);

/* A position in a slice's key order: (tenant_id, key), or for
 * PO_SLICE_NEW (created_at, event_id) within the tenant. */
struct po_slice_pos {
    char a[PO_TIME_SIZE > PO_ID_MAX + 1 ? PO_TIME_SIZE : PO_ID_MAX + 1];
    char b[PO_KEY_SIZE];
};

/* Checks the next slice of k in one read snapshot: the first n rows after
 * `after` in the slice's key order (PO_SLICE_NEW: the tenant's events
 * created at or before cut; PO_SLICE_BALANCES: the tenant's balances,
 * after, cut, n and end unused). *rows: how many the slice held (0: none
 * after `after`), *end its last. report() and *out_count as
 * po_ledger_verify. */
po_err po_ledger_verify_slice(struct po_store *s, enum po_slice k, const char *tenant,
                              const struct po_slice_pos *after, const char *cut, int n,
                              struct po_slice_pos *end, int *rows,
                              void (*report)(void *ctx, const struct po_violation *v), void *ctx,
                              int *out_count, char *err, size_t errcap) PO_MUST_CHECK;

#endif
