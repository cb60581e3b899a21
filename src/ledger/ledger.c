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

/* Programmer errors in a journal: asserted, never stored. */
static void check_journal(const struct po_journal *j)
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
}

static po_err add_deltas(const struct po_journal *j, struct po_ledger_batch *deltas, char *err,
                         size_t errcap)
{
    for (int i = 0; i < j->nlines; i++) {
        po_err rc = batch_add(deltas, j->tenant, j->lines[i].account, j->currency,
                              j->lines[i].amount_minor);
        if (rc) {
            po_errf(err, errcap, "ledger: too many balance changes in one transaction");
            return rc;
        }
    }
    return PO_OK;
}

po_err po_ledger_post_batch(struct po_store *s, const struct po_journal *j, int n,
                            struct po_ledger_batch *deltas, char *err, size_t errcap)
{
    PO_ASSERT(n >= 1 && n <= PO_BATCH_MAX);
    int nlines = 0;
    for (int i = 0; i < n; i++) {
        check_journal(&j[i]);
        nlines += j[i].nlines;
    }
    struct po_param *jc = malloc((size_t)n * 6 * sizeof *jc);
    struct po_param *pc = malloc((size_t)nlines * 6 * sizeof *pc);
    po_err rc = PO_OK;
    if (!jc || !pc) {
        rc = PO_ERR_NOMEM;
        goto out;
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        struct po_param *r = &jc[i * 6];
        r[0] = PO_TEXT(j[i].tenant);
        r[1] = PO_TEXT(j[i].idem_key);
        r[2] = PO_TEXT(j[i].kind);
        r[3] = j[i].out_trade_no ? PO_TEXT(j[i].out_trade_no) : PO_NULLP;
        r[4] = j[i].out_refund_no ? PO_TEXT(j[i].out_refund_no) : PO_NULLP;
        r[5] = PO_TEXT(j[i].currency);
        for (int l = 0; l < j[i].nlines; l++, k++) {
            struct po_param *q = &pc[k * 6];
            q[0] = PO_TEXT(j[i].tenant);
            q[1] = PO_TEXT(j[i].idem_key);
            q[2] = PO_I64(l + 1);
            q[3] = PO_TEXT(j[i].lines[l].account);
            q[4] = PO_TEXT(j[i].currency);
            q[5] = PO_I64(j[i].lines[l].amount_minor);
        }
    }
    struct po_rowset jr = {6, n, jc}, pr = {6, nlines, pc};
    rc =
        po_store_exec(s,
                      "INSERT INTO journal (tenant_id, idem_key, kind, out_trade_no, out_refund_no,"
                      " currency, created_at) SELECT v.t, v.k, v.kind, v.o, v.r, v.c, ? FROM"
                      " ?{v: t text, k text, kind text, o text, r text, c text}",
                      PO_PARAMS(PO_TEXT(j[0].created_at), PO_ROWS(&jr)), NULL, NULL, err, errcap);
    if (!rc)
        rc = po_store_exec(s,
                           "INSERT INTO posting (tenant_id, idem_key, line_no, account, currency,"
                           " amount) SELECT v.t, v.k, v.l, v.a, v.c, v.amount FROM ?{v: t text,"
                           " k text, l int, a text, c text, amount int}",
                           PO_PARAMS(PO_ROWS(&pr)), NULL, NULL, err, errcap);
    for (int i = 0; !rc && i < n; i++)
        rc = add_deltas(&j[i], deltas, err, errcap);
out:
    free(jc);
    free(pc);
    return rc;
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
    return add_deltas(j, deltas, err, errcap);
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
    struct po_param *cells = malloc((size_t)deltas->n * 4 * sizeof *cells);
    po_err rc = PO_OK;
    if (!sorted || !cells) {
        rc = PO_ERR_NOMEM;
        goto out;
    }
    memcpy(sorted, deltas->d, (size_t)deltas->n * sizeof *sorted);
    qsort(sorted, (size_t)deltas->n, sizeof *sorted, delta_cmp);
    int n = 0;
    for (int i = 0; i < deltas->n; i++) {
        const struct po_balance_delta *d = &sorted[i];
        if (d->delta_minor == 0)
            continue; /* nets to nothing: no row written, no lock taken */
        struct po_param *r = &cells[n++ * 4];
        r[0] = PO_TEXT(d->tenant);
        r[1] = PO_TEXT(d->account);
        r[2] = PO_TEXT(d->currency);
        r[3] = PO_I64(d->delta_minor);
    }
    if (n == 0)
        goto out;
    /* One statement, its rows in (tenant, account, currency) order: every
     * transaction locks balance rows in the same global order, and a hot
     * merchant's row is written once per transaction. WHERE true: SQLite's
     * upsert after a SELECT needs it to parse ON CONFLICT. */
    struct po_rowset rs = {4, n, cells};
    rc = po_store_exec(s,
                       "INSERT INTO account_balance (tenant_id, account, currency, balance,"
                       " updated_at) SELECT v.t, v.a, v.c, v.d, ? FROM ?{v: t text, a text,"
                       " c text, d int} WHERE true ORDER BY v.t, v.a, v.c"
                       " ON CONFLICT (tenant_id, account, currency) DO UPDATE SET"
                       " balance = account_balance.balance + excluded.balance,"
                       " updated_at = excluded.updated_at",
                       PO_PARAMS(PO_TEXT(now), PO_ROWS(&rs)), NULL, NULL, err, errcap);
out:
    free(sorted);
    free(cells);
    return rc;
}
