/*
 * ledger_check.h — serve's continuous ledger check (issue 28 item 1): what
 * the database wrote down about its ledger rows changing outside payonce's
 * path (migration 0018's triggers: a journal, posting or processed record
 * updated or deleted, a second payment or refund journal for one order or
 * refund) is re-checked by key, raised as a `ledger_invariant` alert naming
 * the rows, counted, and taken off the list. Every node runs it every
 * ledger-check-ms; two nodes taking one change raise its alert once (keyed).
 */
#ifndef PO_LEDGER_CHECK_H
#define PO_LEDGER_CHECK_H

#include "../core/core.h"
#include "../store/store.h"

/* At most this many changes are taken per round (the rest next round). */
#define PO_LEDGER_CHECK_ROWS 100

/* One round on s: *out_found changes taken (each a violation, alerted).
 * A round that finds nothing is one read of an empty table. */
po_err po_ledger_check_run(struct po_store *s, int *out_found, char *err,
                           size_t errcap) PO_MUST_CHECK;

/* What the rounds of this process found, for /metrics. */
struct po_ledger_check_stats {
    int64_t rounds, violations;
    int64_t last_round_unix; /* 0: none yet */
};
void po_ledger_check_stats(struct po_ledger_check_stats *out);

#endif
