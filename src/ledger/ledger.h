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

#endif
