/*
 * batch.c — a batch of events in ONE transaction (see engine.h).
 *
 * Payments, the bulk of every batch, take a set-based path: a handful of
 * statements for the whole batch, whatever its size, instead of a dozen
 * per event.
 *
 *   R1  one read of every payment's order and processed record
 *       (business checks and layer 1, decided in memory)
 *   W1  one guarded UPDATE … AND status = 'PAYING' … RETURNING for the
 *       candidates: the rows it returns are the events that own their
 *       transition (layer 2's referee, per row)
 *   W2  one INSERT of their processed records (layer 3: the unique key)
 *   W3  the journals and postings, two statements (ledger)
 *   W4  their outbox rows (payment.credited), one statement
 *
 * Everything else — refunds, profit sharing, rejections (with their
 * alerts), the losers of W1 (duplicates of layer 2 and illegal
 * transitions), a second event of the same order in the batch — goes event
 * by event in its own savepoint (engine.c) after that, in the same
 * transaction. If a set-based statement fails with a conflict or an error
 * of its own, its transaction is rolled back and the whole batch is run
 * event by event instead: each event's failure then stays its own. A
 * transient failure (the connection, a lock timeout) retries the batch.
 * The balance deltas are flushed in one sorted statement, then COMMIT.
 *
 * Invariant: an event's outcome is reported as applied, duplicate, rejected
 * or suspense only if COMMIT succeeded; otherwise every event of the batch
 * is `retry` and nothing of the batch is in the database.
 */
#include "engine_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A payment on the set-based path. */
struct fast {
    int i; /* its index in the batch */
    char key[PO_KEY_SIZE];
    char merchant[PO_ID_MAX + 1]; /* from W1 */
    int64_t seq;                  /* its event's place in the order (W1) */
    bool candidate, won;
};

/* Which statement of the set-based path failed (for the fallback). */
enum fast_step { STEP_READ, STEP_TRANSITION, STEP_RECHECK, STEP_RECORD };

struct batch {
    struct po_store *s;
    const struct po_engine_cfg *cfg;
    const struct po_event *ev;
    size_t n;
    struct po_outcome *out;
    const char *now;
    bool slow[PO_BATCH_MAX];       /* goes event by event */
    bool conflicted[PO_BATCH_MAX]; /* its record was refused by the unique index */
    enum fast_step step;
    struct fast f[PO_BATCH_MAX];
    int nf;
    struct po_ledger_batch deltas;
    struct po_ledger_batch ev_deltas;
    struct ev_ctx c;
    char err[PO_ERRBUF_SIZE];
};

static int order_cmp(const struct po_event *a, const struct po_event *b)
{
    int c = strcmp(a->tenant, b->tenant);
    return c ? c : strcmp(a->out_trade_no, b->out_trade_no);
}

static int fast_cmp(const void *x, const void *y, void *ctx)
{
    const struct po_event *ev = ctx;
    const struct fast *a = x, *b = y;
    int c = order_cmp(&ev[a->i], &ev[b->i]);
    return c ? c : a->i - b->i;
}

/* The payments that take the set-based path — the first of each order in
 * the batch — sorted by (tenant, order): W1 then locks orders in one
 * global order. */
static void pick(struct batch *b)
{
    b->nf = 0;
    for (size_t i = 0; i < b->n; i++) {
        b->slow[i] = b->ev[i].type != PO_EV_PAY_SUCCESS || b->ev[i].park_in_suspense;
        if (b->slow[i])
            continue;
        struct fast *f = &b->f[b->nf++];
        memset(f, 0, sizeof *f);
        f->i = (int)i;
        PO_ASSERT(po_event_key(&b->ev[i], f->key, sizeof f->key) == PO_OK);
    }
    qsort_r(b->f, (size_t)b->nf, sizeof b->f[0], fast_cmp, (void *)(uintptr_t)b->ev);
    int k = 0;
    for (int j = 0; j < b->nf; j++) {
        if (k && order_cmp(&b->ev[b->f[k - 1].i], &b->ev[b->f[j].i]) == 0)
            b->slow[b->f[j].i] = true; /* a second event of the same order */
        else
            b->f[k++] = b->f[j];
    }
    b->nf = k;
}

static struct fast *find(struct batch *b, const char *tenant, const char *out_trade_no)
{
    int lo = 0, hi = b->nf - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const struct po_event *e = &b->ev[b->f[mid].i];
        int c = strcmp(e->tenant, tenant);
        if (!c)
            c = strcmp(e->out_trade_no, out_trade_no);
        if (!c)
            return &b->f[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

/* R1: each payment's order and processed record; the business checks and
 * layer 1 in memory. What cannot be decided here goes event by event. */
static po_err read_and_decide(struct batch *b)
{
    struct po_param *cells = malloc((size_t)b->nf * 4 * sizeof *cells);
    if (!cells)
        return PO_ERR_NOMEM;
    for (int j = 0; j < b->nf; j++) {
        const struct po_event *e = &b->ev[b->f[j].i];
        struct po_param *r = &cells[j * 4];
        r[0] = PO_I64(j);
        r[1] = PO_TEXT(e->tenant);
        r[2] = PO_TEXT(e->out_trade_no);
        r[3] = PO_TEXT(b->f[j].key);
    }
    struct po_rowset rs = {4, b->nf, cells};
    struct po_rows r;
    po_err rc = po_store_exec(b->s,
                              "SELECT v.j, o.merchant_id, o.amount, o.currency,"
                              " COALESCE(o.channel, ''), n.out_trade_no, n.amount FROM"
                              " ?{v: j int, t text, o text, k text} LEFT JOIN pay_order o ON"
                              " o.tenant_id = v.t AND o.out_trade_no = v.o LEFT JOIN notify_log n"
                              " ON n.tenant_id = v.t AND n.idem_key = v.k",
                              PO_PARAMS(PO_ROWS(&rs)), &r, NULL, b->err, sizeof b->err);
    free(cells);
    if (rc)
        return rc;
    bool l1 = po_engine_layer_on(b->cfg, PO_ENGINE_NO_LAYER1);
    for (int row = 0; row < r.nrows && !rc; row++) {
        int64_t j = 0, amount = 0, seen_amount = 0;
        rc = po_rows_i64(&r, row, 0, &j);
        if (rc || j < 0 || j >= b->nf) {
            rc = PO_ERR_STORE;
            break;
        }
        struct fast *f = &b->f[j];
        const struct po_event *e = &b->ev[f->i];
        const char *merchant = po_rows_get(&r, row, 1), *seen = po_rows_get(&r, row, 5);
        if (!merchant || po_rows_i64(&r, row, 2, &amount) ||
            po_engine_order_check(e, merchant, amount, po_rows_get(&r, row, 3),
                                  po_rows_get(&r, row, 4), true) != PO_R_NONE) {
            b->slow[f->i] = true; /* unknown order or a business check: rejected there */
            continue;
        }
        if (l1 && seen) {
            bool same = strcmp(seen, e->out_trade_no) == 0 &&
                        po_rows_i64(&r, row, 6, &seen_amount) == PO_OK &&
                        seen_amount == e->amount_minor;
            if (same)
                po_engine_outcome(&b->out[f->i], PO_OUT_DUPLICATE, 1, PO_R_NONE);
            else
                b->slow[f->i] = true; /* conflicting_duplicate: rejected there */
            continue;
        }
        if (b->cfg && b->cfg->after_layer1)
            b->cfg->after_layer1(b->cfg->hook_ctx, e);
        f->candidate = true;
    }
    po_rows_free(&r);
    return rc;
}

/* W1: the guarded UPDATE for every candidate; the rows it returns won. */
static po_err transition(struct batch *b, int *out_won)
{
    struct po_param *cells = malloc((size_t)b->nf * 4 * sizeof *cells);
    int k = 0;
    *out_won = 0;
    if (!cells)
        return PO_ERR_NOMEM;
    for (int j = 0; j < b->nf; j++) {
        if (!b->f[j].candidate)
            continue;
        const struct po_event *e = &b->ev[b->f[j].i];
        struct po_param *r = &cells[k++ * 4];
        r[0] = PO_TEXT(e->tenant);
        r[1] = PO_TEXT(e->out_trade_no);
        r[2] = PO_TEXT(e->channel_txn_id);
        r[3] = PO_TEXT(e->channel);
    }
    if (k == 0) {
        free(cells);
        return PO_OK;
    }
    struct po_rowset rs = {4, k, cells};
    struct po_rows r;
    po_err rc = po_engine_mark_paid(b->s, po_engine_layer_on(b->cfg, PO_ENGINE_NO_LAYER2), &rs,
                                    b->now, &r, b->err, sizeof b->err);
    free(cells);
    if (rc)
        return rc;
    for (int row = 0; row < r.nrows && !rc; row++) {
        struct fast *f = find(b, po_rows_get(&r, row, 0), po_rows_get(&r, row, 1));
        if (!f || !f->candidate || f->won ||
            po_strcpy(f->merchant, sizeof f->merchant, po_rows_get(&r, row, 2)) ||
            po_rows_i64(&r, row, 3, &f->seq))
            rc = PO_ERR_STORE; /* a row we did not ask for: never trust it */
        else
            f->won = true, (*out_won)++;
    }
    po_rows_free(&r);
    return rc;
}

/* W1's losers found their order moved by someone else since R1: layer 2
 * refereed. Already PAID by this very transaction id is a duplicate (layer
 * 2); anything else (closed, paid by another payment) goes event by event,
 * which parks the money in suspense. */
static po_err recheck_losers(struct batch *b)
{
    struct po_param *cells = malloc((size_t)b->nf * 2 * sizeof *cells);
    int k = 0;
    if (!cells)
        return PO_ERR_NOMEM;
    for (int j = 0; j < b->nf; j++)
        if (b->f[j].candidate && !b->f[j].won) {
            cells[k * 2] = PO_TEXT(b->ev[b->f[j].i].tenant);
            cells[k * 2 + 1] = PO_TEXT(b->ev[b->f[j].i].out_trade_no);
            k++;
        }
    if (k == 0) {
        free(cells);
        return PO_OK;
    }
    struct po_rowset rs = {2, k, cells};
    struct po_rows r;
    po_err rc = po_store_exec(b->s,
                              "SELECT o.tenant_id, o.out_trade_no, o.status,"
                              " COALESCE(o.channel_txn_id, '') FROM ?{v: t text, o text} JOIN"
                              " pay_order o ON o.tenant_id = v.t AND o.out_trade_no = v.o",
                              PO_PARAMS(PO_ROWS(&rs)), &r, NULL, b->err, sizeof b->err);
    free(cells);
    if (rc)
        return rc;
    for (int j = 0; j < b->nf; j++)
        if (b->f[j].candidate && !b->f[j].won)
            b->slow[b->f[j].i] = true;
    for (int row = 0; row < r.nrows; row++) {
        struct fast *f = find(b, po_rows_get(&r, row, 0), po_rows_get(&r, row, 1));
        if (!f || !f->candidate || f->won)
            continue;
        const struct po_event *e = &b->ev[f->i];
        if (strcmp(po_rows_get(&r, row, 2), "PAID") == 0 &&
            strcmp(po_rows_get(&r, row, 3), e->channel_txn_id) == 0) {
            po_engine_outcome(&b->out[f->i], PO_OUT_DUPLICATE, 2, PO_R_NONE);
            b->slow[f->i] = false;
        }
    }
    po_rows_free(&r);
    return PO_OK;
}

/* W2 and W3: the winners' processed records, journals and postings. */
static po_err record_and_post(struct batch *b, int won)
{
    struct po_param *cells = malloc((size_t)won * PO_RECORD_COLUMNS * sizeof *cells);
    struct po_journal *j = malloc((size_t)won * sizeof *j);
    struct po_outbox_row *ob = malloc((size_t)won * sizeof *ob);
    struct po_outbox_json *pl = malloc((size_t)won * sizeof *pl);
    po_err rc = PO_OK;
    int k = 0;
    if (!cells || !j || !ob || !pl) {
        rc = PO_ERR_NOMEM;
        goto out;
    }
    for (int x = 0; x < b->nf; x++) {
        const struct fast *f = &b->f[x];
        if (!f->won)
            continue;
        const struct po_event *e = &b->ev[f->i];
        struct po_param *r = &cells[k * PO_RECORD_COLUMNS];
        r[0] = PO_TEXT(e->tenant);
        r[1] = PO_TEXT(f->key);
        r[2] = PO_TEXT(e->channel);
        r[3] = PO_TEXT(po_event_type_name(e->type));
        r[4] = PO_TEXT(po_source_name(e->source));
        r[5] = PO_TEXT("applied");
        r[6] = PO_NULLP;
        r[7] = PO_TEXT(e->out_trade_no);
        r[8] = PO_I64(e->amount_minor);
        r[9] = PO_TEXT(e->currency);
        struct po_journal *jj = &j[k++];
        memset(jj, 0, sizeof *jj);
        *jj = (struct po_journal){.tenant = e->tenant,
                                  .idem_key = f->key,
                                  .kind = "PAY",
                                  .out_trade_no = e->out_trade_no,
                                  .currency = e->currency,
                                  .created_at = b->now,
                                  .nlines = 2};
        po_engine_account(jj->lines[0].account, sizeof jj->lines[0].account, "channel_clearing",
                          e->channel);
        po_engine_account(jj->lines[1].account, sizeof jj->lines[1].account, "merchant_payable",
                          f->merchant);
        jj->lines[0].amount_minor = e->amount_minor;
        jj->lines[1].amount_minor = -e->amount_minor;
        po_engine_event_payload(e, f->merchant, PO_R_NONE, &pl[k - 1]);
        ob[k - 1] = (struct po_outbox_row){e->tenant,       f->key, "payment.credited",
                                           e->out_trade_no, f->seq, po_outbox_json_end(&pl[k - 1])};
        if (!ob[k - 1].payload)
            rc = PO_ERR_LIMIT;
    }
    PO_ASSERT(k == won);
    struct po_rowset rs = {PO_RECORD_COLUMNS, won, cells};
    /* W2–W4 in one round trip (PostgreSQL); the first failure is theirs,
     * a refused processed record (layer 3) included */
    po_store_pipeline(b->s);
    if (!rc)
        rc = po_engine_record_rows(b->s, &rs, b->now, b->err, sizeof b->err);
    if (!rc)
        rc = po_ledger_post_batch(b->s, j, won, &b->deltas, b->err, sizeof b->err);
    if (!rc)
        rc = po_outbox_insert(b->s, ob, won, b->now, b->err, sizeof b->err);
    po_err src = po_store_sync(b->s, rc ? NULL : b->err, rc ? 0 : sizeof b->err);
    if (!rc)
        rc = src;
    for (int x = 0; !rc && x < b->nf; x++)
        if (b->f[x].won)
            po_engine_outcome(&b->out[b->f[x].i], PO_OUT_APPLIED, 0, PO_R_NONE);
out:
    free(cells);
    free(j);
    free(ob);
    free(pl);
    return rc;
}

static po_err fast_path(struct batch *b)
{
    int won = 0;
    pick(b);
    if (b->nf == 0)
        return PO_OK;
    b->step = STEP_READ;
    po_err rc = read_and_decide(b);
    if (!rc) {
        b->step = STEP_TRANSITION;
        rc = transition(b, &won);
    }
    if (!rc) {
        b->step = STEP_RECHECK;
        rc = recheck_losers(b);
    }
    if (!rc && won) {
        b->step = STEP_RECORD;
        rc = record_and_post(b, won);
    }
    return rc;
}

static void all_retry(struct po_outcome *out, size_t n, po_err why)
{
    for (size_t i = 0; i < n; i++)
        po_engine_outcome(&out[i], PO_OUT_RETRY, 0,
                          why == PO_ERR_TRANSIENT ? PO_R_STORE_UNAVAILABLE : PO_R_STORE_ERROR);
}

/* Opens the transaction and runs the set-based path; after a failure of
 * its own, runs the batch again event by event in a new transaction. */
static po_err begin_and_fast(struct batch *b, bool fast)
{
    po_err rc = po_store_begin(b->s, b->err, sizeof b->err);
    if (rc || !fast)
        return rc;
    rc = fast_path(b);
    if (!rc || rc == PO_ERR_TRANSIENT || rc == PO_ERR_NOMEM)
        return rc;
    po_log(PO_LOG_WARN,
           "engine: set-based path of a batch of %zu failed (%s: %s); running it"
           " event by event",
           b->n, po_err_name(rc), b->err);
    po_store_rollback(b->s);
    po_ledger_batch_reset(&b->deltas);
    /* The unique index refused a processed record of the winners: a twin
     * committed its own meanwhile. Event by event, a twin's record now found
     * was caught by layer 3. */
    if (rc == PO_ERR_CONFLICT && b->step == STEP_RECORD)
        for (int j = 0; j < b->nf; j++)
            b->conflicted[b->f[j].i] = b->f[j].won;
    for (size_t i = 0; i < b->n; i++)
        b->slow[i] = true;
    return po_store_begin(b->s, b->err, sizeof b->err);
}

/* The works, each in its own savepoint, after the events. A work's failure
 * stays its own; non-OK only when the transaction is lost. */
static po_err run_works(struct batch *b, struct po_engine_work *work, size_t nwork)
{
    for (size_t i = 0; i < nwork; i++) {
        po_err rc = po_store_exec(b->s, "SAVEPOINT po_work", PO_NO_PARAMS, NULL, NULL, b->err,
                                  sizeof b->err);
        if (rc)
            return rc;
        work[i].rc = work[i].fn(b->s, work[i].ctx);
        rc = po_store_exec(
            b->s, work[i].rc ? "ROLLBACK TO SAVEPOINT po_work" : "RELEASE SAVEPOINT po_work",
            PO_NO_PARAMS, NULL, NULL, b->err, sizeof b->err);
        if (!rc && work[i].rc)
            rc = po_store_exec(b->s, "RELEASE SAVEPOINT po_work", PO_NO_PARAMS, NULL, NULL, b->err,
                               sizeof b->err);
        if (rc)
            return rc;
    }
    return PO_OK;
}

void po_engine_apply_recorded(struct po_store *s, const struct po_engine_cfg *cfg,
                              const struct po_event *ev, size_t n, struct po_outcome *out,
                              struct po_engine_work *work, size_t nwork,
                              struct po_audit_record *const *rec, size_t nrec)
{
    PO_ASSERT(n <= PO_BATCH_MAX && nwork <= PO_BATCH_MAX && n + nwork >= 1);
    char now[PO_TIME_SIZE];
    struct batch *b = calloc(1, sizeof *b);
    if (!b) {
        all_retry(out, n, PO_ERR_NOMEM);
        for (size_t i = 0; i < nwork; i++)
            work[i].rc = PO_ERR_NOMEM;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char verr[PO_ERRBUF_SIZE];
        PO_ASSERT(po_event_validate(&ev[i], verr, sizeof verr) == PO_OK);
    }
    po_clock_now_iso(now, sizeof now);
    *b = (struct batch){.s = s, .cfg = cfg, .ev = ev, .n = n, .out = out, .now = now};
    po_ledger_batch_reset(&b->deltas);
    po_err rc = begin_and_fast(b, n > 0);
    if (rc == PO_ERR_TRANSIENT || rc == PO_ERR_NOMEM)
        goto fail_rollback;
    if (rc)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        if (!b->slow[i])
            continue;
        po_engine_ctx(&b->c, s, cfg, &ev[i], now, &b->ev_deltas);
        b->c.conflicted = b->conflicted[i];
        rc = po_engine_run_event(&b->c, &b->deltas, &out[i]);
        if (rc) {
            memcpy(b->err, b->c.err, sizeof b->err);
            goto fail_rollback;
        }
    }
    rc = run_works(b, work, nwork);
    if (rc)
        goto fail_rollback;
    /* the records, the balances and COMMIT: one round trip (PostgreSQL) */
    po_store_pipeline(s);
    rc = po_audit_insert(s, rec, nrec, b->err, sizeof b->err);
    if (rc)
        goto fail_rollback;
    rc = po_ledger_flush(s, &b->deltas, now, b->err, sizeof b->err);
    if (rc)
        goto fail_rollback;
    rc = po_store_commit(s, b->err, sizeof b->err);
    if (rc)
        goto fail;
    goto out_free;
fail_rollback:
    po_store_rollback(s);
fail:
    po_log(PO_LOG_WARN, "engine: batch of %zu events and %zu works not committed (%s): %s", n,
           nwork, po_err_name(rc), b->err);
    all_retry(out, n, rc);
    for (size_t i = 0; i < nwork; i++)
        work[i].rc = PO_ERR_TRANSIENT;
out_free:
    free(b);
    return;
}

void po_engine_apply_mixed(struct po_store *s, const struct po_engine_cfg *cfg,
                           const struct po_event *ev, size_t n, struct po_outcome *out,
                           struct po_engine_work *work, size_t nwork)
{
    po_engine_apply_recorded(s, cfg, ev, n, out, work, nwork, NULL, 0);
}

void po_engine_apply_batch(struct po_store *s, const struct po_engine_cfg *cfg,
                           const struct po_event *ev, size_t n, struct po_outcome *out)
{
    PO_ASSERT(n >= 1);
    po_engine_apply_mixed(s, cfg, ev, n, out, NULL, 0);
}

void po_engine_apply(struct po_store *s, const struct po_engine_cfg *cfg, const struct po_event *ev,
                     struct po_outcome *out)
{
    po_engine_apply_batch(s, cfg, ev, 1, out);
}
