/*
 * report.h — money reports from the ledger (report.c; `payonce report`,
 * docs/operations.md "Money reports"). Part of service.h.
 */
#ifndef PO_SERVICE_REPORT_H
#define PO_SERVICE_REPORT_H

#include "../../core/core.h"
#include "../../store/store.h"

/* One day, merchant, channel and currency; amounts in minor units. */
struct po_report_row {
    char day[11];                  /* YYYY-MM-DD (UTC; fees: the bill's trade date) */
    char merchant[PO_ID_MAX + 1];  /* "-": journals without a merchant (suspense) */
    char channel[PO_CHANNEL_SIZE]; /* "-": journals without a channel (profit shares) */
    char currency[4];
    int64_t journals;
    int64_t gross;        /* payments credited to the merchant */
    int64_t refunds;      /* refunds taken from the merchant */
    int64_t shares;       /* profit shares paid out of the merchant's money */
    int64_t net;          /* gross - refunds - shares: what the merchant is owed more */
    int64_t suspense_in;  /* money parked in suspense */
    int64_t suspense_out; /* money returned or released from suspense */
    int64_t fees_milli;   /* the channel's fees, thousandths of the minor unit */
};

struct po_report {
    char tenant[PO_ID_MAX + 1];
    struct po_report_row *rows; /* sorted by day, merchant, channel, currency */
    int n, cap;
    /* The reconciliation: every merchant's payable and every channel's
     * clearing, recomputed from the postings as the report sums them,
     * against the ledger's balances. */
    int accounts_checked, mismatches;
    char first_mismatch[256];
};

/* The report of tenant between from and to (YYYY-MM-DD, inclusive; NULL:
 * no bound), read in one snapshot, with its reconciliation. Free with
 * po_report_free. */
po_err po_report_make(struct po_store *s, const char *tenant, const char *from, const char *to,
                      struct po_report *out, char *err, size_t errcap) PO_MUST_CHECK;
/* The reconciliation alone (inside the caller's snapshot). */
po_err po_report_reconcile(struct po_store *s, struct po_report *r, char *err,
                           size_t errcap) PO_MUST_CHECK;
void po_report_free(struct po_report *r);
/* from and to: each NULL or a real day YYYY-MM-DD, from <= to. */
bool po_report_dates_ok(const char *from, const char *to);
/* {tenant, from, to, rows: [...], reconciled, accounts_checked,
 * first_mismatch?}: what `payonce report --json` prints and the console
 * shows. NULL when out of memory. */
struct json_t *po_report_json(const struct po_report *r, const char *from, const char *to);
/* The CSV (a header line, then one line per row, amounts in minor units);
 * heap text, NULL when out of memory. */
char *po_report_csv(const struct po_report *r);

#endif
