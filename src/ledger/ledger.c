/*
 * ledger.c — journals, postings and batched balance updates.
 */
#include "ledger.h"

#include <stdlib.h>
#include <string.h>

void po_ledger_batch_reset(struct po_ledger_batch *b)
{
    b->n = 0;
}

static po_err batch_add(struct po_ledger_batch *b, const char *tenant, const char *account,
                        const char *currency, int64_t delta)
{
    for (int i = 0; i < b->n; i++) {
        struct po_balance_delta *d = &b->d[i];
        if (strcmp(d->account, account) == 0 && strcmp(d->currency, currency) == 0 &&
            strcmp(d->tenant, tenant) == 0) {
            /* Amounts are bounded by PO_AMOUNT_MAX and a batch by
             * PO_LEDGER_DELTAS_MAX lines, so this cannot overflow. */
            d->delta_minor += delta;
            return PO_OK;
        }
    }
    if (b->n >= PO_LEDGER_DELTAS_MAX)
        return PO_ERR_LIMIT;
    struct po_balance_delta *d = &b->d[b->n];
    if (po_strcpy(d->tenant, sizeof d->tenant, tenant) ||
        po_strcpy(d->account, sizeof d->account, account) ||
        po_strcpy(d->currency, sizeof d->currency, currency))
        return PO_ERR_LIMIT;
    d->delta_minor = delta;
    b->n++;
    return PO_OK;
}

po_err po_ledger_batch_merge(struct po_ledger_batch *dst, const struct po_ledger_batch *src)
{
    if (dst->n + src->n > PO_LEDGER_DELTAS_MAX)
        return PO_ERR_LIMIT;
    for (int i = 0; i < src->n; i++) {
        const struct po_balance_delta *d = &src->d[i];
        po_err rc = batch_add(dst, d->tenant, d->account, d->currency, d->delta_minor);
        PO_ASSERT(rc == PO_OK); /* capacity was checked above */
    }
    return PO_OK;
}

po_err po_ledger_post(struct po_store *s, const struct po_journal *j,
                      struct po_ledger_batch *deltas, char *err, size_t errcap)
{
    PO_ASSERT(j->nlines >= 2 && j->nlines <= PO_LEDGER_LINES_MAX);
    int64_t sum = 0;
    for (int i = 0; i < j->nlines; i++) {
        PO_ASSERT(j->lines[i].amount_minor != 0);
        PO_ASSERT(po_amount_valid(j->lines[i].amount_minor < 0 ? -j->lines[i].amount_minor
                                                               : j->lines[i].amount_minor));
        sum += j->lines[i].amount_minor;
    }
    PO_ASSERT(sum == 0);

    struct po_param jp[] = {
        PO_TEXT(j->tenant),
        PO_TEXT(j->idem_key),
        PO_TEXT(j->kind),
        j->out_trade_no ? PO_TEXT(j->out_trade_no) : PO_NULLP,
        j->out_refund_no ? PO_TEXT(j->out_refund_no) : PO_NULLP,
        PO_TEXT(j->currency),
        PO_TEXT(j->created_at),
    };
    po_err rc = po_store_exec(s,
                              "INSERT INTO journal (tenant_id, idem_key, kind, out_trade_no,"
                              " out_refund_no, currency, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                              jp, PO_NELEM(jp), NULL, NULL, err, errcap);
    if (rc)
        return rc;
    for (int i = 0; i < j->nlines; i++) {
        struct po_param pp[] = {
            PO_TEXT(j->tenant),           PO_TEXT(j->idem_key), PO_I64(i + 1),
            PO_TEXT(j->lines[i].account), PO_TEXT(j->currency), PO_I64(j->lines[i].amount_minor),
        };
        rc = po_store_exec(s,
                           "INSERT INTO posting (tenant_id, idem_key, line_no, account, currency,"
                           " amount) VALUES (?, ?, ?, ?, ?, ?)",
                           pp, PO_NELEM(pp), NULL, NULL, err, errcap);
        if (rc)
            return rc;
    }
    for (int i = 0; i < j->nlines; i++) {
        rc = batch_add(deltas, j->tenant, j->lines[i].account, j->currency,
                       j->lines[i].amount_minor);
        if (rc) {
            po_errf(err, errcap, "ledger: too many balance changes in one transaction");
            return rc;
        }
    }
    return PO_OK;
}

static int delta_cmp(const void *a, const void *b)
{
    const struct po_balance_delta *x = a, *y = b;
    int c = strcmp(x->tenant, y->tenant);
    if (!c)
        c = strcmp(x->account, y->account);
    if (!c)
        c = strcmp(x->currency, y->currency);
    return c;
}

po_err po_ledger_flush(struct po_store *s, const struct po_ledger_batch *deltas, const char *now,
                       char *err, size_t errcap)
{
    if (deltas->n == 0)
        return PO_OK;
    struct po_balance_delta *sorted = malloc((size_t)deltas->n * sizeof *sorted);
    if (!sorted)
        return PO_ERR_NOMEM;
    memcpy(sorted, deltas->d, (size_t)deltas->n * sizeof *sorted);
    qsort(sorted, (size_t)deltas->n, sizeof *sorted, delta_cmp);
    po_err rc = PO_OK;
    for (int i = 0; i < deltas->n; i++) {
        const struct po_balance_delta *d = &sorted[i];
        if (d->delta_minor == 0)
            continue;
        struct po_param p[] = {PO_TEXT(d->tenant), PO_TEXT(d->account), PO_TEXT(d->currency),
                               PO_I64(d->delta_minor), PO_TEXT(now)};
        rc = po_store_exec(s,
                           "INSERT INTO account_balance (tenant_id, account, currency, balance,"
                           " updated_at) VALUES (?, ?, ?, ?, ?)"
                           " ON CONFLICT (tenant_id, account, currency) DO UPDATE SET"
                           " balance = account_balance.balance + excluded.balance,"
                           " updated_at = excluded.updated_at",
                           p, PO_NELEM(p), NULL, NULL, err, errcap);
        if (rc)
            break;
    }
    free(sorted);
    return rc;
}
