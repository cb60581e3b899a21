/*
 * ledger_check.h — serve's continuous ledger check (issue 28 item 1): what
 * the database wrote down about its ledger rows changing outside payonce's
 * path (migration 0018's triggers: a journal, posting or processed record
 * updated or deleted, a second payment or refund journal for one order or
 * refund) is re-checked by key, raised as a `ledger_invariant` alert naming
 * the rows, counted, and taken off the list. The node holding the
 * ledger-check lease runs it every --ledger-check-interval; two rounds
 * taking one change at once raise its alert once (keyed).
 */
#ifndef PO_LEDGER_CHECK_H
#define PO_LEDGER_CHECK_H

#include "../../core/core.h"
#include "../../store/store.h"

/* At most this many changes are taken per round (the rest next round). */
#define PO_LEDGER_CHECK_ROWS 100

/*
 * Beside the changes, the rest of `payonce verify`'s invariants,
 * continuously, each round bounded (ledger.h, "slices"):
 *  - payonce's own new writes: the orders named by each tenant's outbox
 *    events since the last round, and their journals, once the events
 *    are PO_LEDGER_NEW_LAG_MS old (a transaction that began earlier may
 *    still commit events dated before the cursor; one that outlasts the lag
 *    is left to the sweep) — at most new_rows a tenant a round (a tenant
 *    writing more falls behind and catches up when it writes less);
 *  - a rolling sweep of every journal, order, refund and processed record,
 *    `rows` of each a round by key, starting over at the end (what was
 *    changed by hand in the tables payonce updates itself: an order's
 *    amount, a refund's status);
 *  - each tenant's cached balances against its postings summed, at most
 *    once per balance_every_s (a scan of the tenant's postings).
 * A violation is raised once per check and row (`ledger_invariant`, key
 * ledger|CHECK|ROW), and not at all while an alert of the ledger check on
 * the same row is still open (the change list above named it first).
 * State is this process's: a node that takes the lease starts the sweep at
 * the beginning and the new writes PO_LEDGER_NEW_BACK_MS back.
 */
#define PO_LEDGER_NEW_LAG_MS 10000
#define PO_LEDGER_NEW_BACK_MS 60000
#define PO_LEDGER_TENANTS_MAX 10000

struct po_ledger_check; /* opaque: the sweep's positions */

/* rows: of each slice per round (0: no sweep); new_rows: of each tenant's
 * new writes per round (0: left to the sweep); balance_every_s: 0: never.
 * All three 0: the change list alone. */
po_err po_ledger_check_new(int rows, int new_rows, int64_t balance_every_s,
                           struct po_ledger_check **out) PO_MUST_CHECK;
void po_ledger_check_free(struct po_ledger_check *lc);

/* What one round did. */
struct po_ledger_check_report {
    int changes;     /* ledger rows changed outside payonce: taken, each alerted */
    int64_t checked; /* rows of the slices checked (balances: accounts' tenants) */
    int raised;      /* new ledger_invariant alerts of the slices */
    int found;       /* the slices' violations seen (raised or already alerted) */
    int wrapped;     /* slices that reached their end and start over */
};

/* One round at now_ms (the clock: tests pass their own): the change list,
 * then the slices. A part that fails (a statement cancelled, the database
 * gone) is logged here and keeps its position for the next round; the
 * others go on, and the round returns the first failure. */
po_err po_ledger_check_run(struct po_store *s, struct po_ledger_check *lc, int64_t now_ms,
                           struct po_ledger_check_report *out, char *err,
                           size_t errcap) PO_MUST_CHECK;

/* What the rounds of this process found, for /metrics. */
struct po_ledger_check_stats {
    int64_t rounds, violations;
    int64_t last_round_unix;         /* 0: none yet */
    int64_t sweep_rows, sweep_wraps; /* the sweep's rows checked, passes done */
    int64_t us;                      /* the rounds' time (changes and sweep) */
};
void po_ledger_check_stats(struct po_ledger_check_stats *out);

#endif
