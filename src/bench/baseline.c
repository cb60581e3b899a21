/*
 * baseline.c — what payonce is measured against, in the same run:
 *   the engine alone   the committer fed directly with normalised events by
 *                      as many threads as the HTTP run has connections: no
 *                      HTTP, no signature, no decryption — the ceiling of
 *                      the database work with the same batching;
 *   the plain design   the seed article's transaction with payonce's
 *                      entries, written the way a web framework would: per
 *                      callback one transaction of separate statements
 *                      (layer-1 read, guarded UPDATE, processed-record
 *                      INSERT, journal, two postings, the merchant's
 *                      balance), each a round trip, prepared, from
 *                      concurrent C clients on their own connections — the
 *                      like-for-like comparison. Its tables (plain_*)
 *                      mirror payonce's keys and indexes; its balance is
 *                      the merchant's only (no tenant-wide clearing row);
 *   the article design what a reader of the article writes: the layer-1
 *                      read, the guarded UPDATE, ONE ledger row, the
 *                      merchant's balance, the processed record (article_*
 *                      tables) — less than payonce keeps, and so the bar.
 * On SQLite, whose one writer makes concurrent transactions queue, both
 * designs run from one connection in transactions of 100 callbacks: raw
 * batched SQLite, the ceiling of its writes with the same fsync.
 */
#include "bench_int.h"

#include "../engine/engine.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define THREADS_MAX 256

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Runs fn(ctx, i) for i in [0, n) from conns threads, each taking the next
 * index; records each call's latency and the CPU used. A thread sets itself
 * up (its connection), then calls drive_ready: the clock starts when every
 * thread is ready, as a server's pool is open before its traffic comes. */
struct drive {
    void *(*thread)(void *);
    atomic_int next;
    int n;
    double *lat;
    atomic_int failed;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready;
    bool go;
};

static void drive_ready(struct drive *d)
{
    pthread_mutex_lock(&d->mu);
    d->ready++;
    pthread_cond_broadcast(&d->cv);
    while (!d->go)
        pthread_cond_wait(&d->cv, &d->mu);
    pthread_mutex_unlock(&d->mu);
}

static po_err drive(struct drive *d, void *per_thread, size_t stride, int conns,
                    struct po_bench_base *out)
{
    pthread_t th[THREADS_MAX];
    int started = 0;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    for (; started < conns && started < THREADS_MAX; started++)
        if (pthread_create(&th[started], NULL, d->thread,
                           (char *)per_thread + (size_t)started * stride) != 0)
            break;
    pthread_mutex_lock(&d->mu);
    while (d->ready < started)
        pthread_cond_wait(&d->cv, &d->mu);
    d->go = true;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    double c0 = po_cpu_self(), d0 = po_cpu_of_postgres(), t0 = now_ms();
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->mu);
    out->wall_s = (now_ms() - t0) / 1e3;
    out->cpu_self_s = po_cpu_self() - c0;
    out->cpu_db_s = po_cpu_of_postgres() - d0;
    out->done = (size_t)d->n;
    out->lat_ms = d->lat;
    return started == conns && atomic_load(&d->failed) == 0 ? PO_OK : PO_ERR_INTERNAL;
}

/* ---- the engine alone ---- */

struct engine_run {
    struct drive d;
    struct po_committer *c;
    struct po_event *ev;
};

static void *engine_thread(void *arg)
{
    struct engine_run *r = *(struct engine_run **)arg;
    struct po_commit_item it;
    drive_ready(&r->d);
    for (int i; (i = atomic_fetch_add(&r->d.next, 1)) < r->d.n;) {
        memset(&it, 0, sizeof it);
        it.ev = r->ev[i];
        double t = now_ms();
        po_committer_apply(r->c, &it);
        r->d.lat[i] = now_ms() - t;
        if (it.out.kind != PO_OUT_APPLIED)
            atomic_fetch_add(&r->d.failed, 1);
    }
    return NULL;
}

po_err po_bench_engine_alone(struct po_bench_fx *fx, const char *prefix, int n, int committers,
                             int batch_max, int batch_wait_us, int conns, struct po_bench_base *out,
                             char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    struct engine_run r = {.d = {.thread = engine_thread, .n = n}};
    r.ev = calloc((size_t)n, sizeof *r.ev);
    r.d.lat = calloc((size_t)n, sizeof *r.d.lat);
    struct engine_run *self[THREADS_MAX];
    if (!r.ev || !r.d.lat) {
        free(r.ev);
        free(r.d.lat);
        return PO_ERR_NOMEM;
    }
    char now[PO_TIME_SIZE];
    po_clock_now_iso(now, sizeof now);
    for (int i = 0; i < n; i++) {
        struct po_event *e = &r.ev[i];
        (void)snprintf(e->tenant, sizeof e->tenant, "bench");
        (void)snprintf(e->channel, sizeof e->channel, "wechatpay");
        e->type = PO_EV_PAY_SUCCESS;
        (void)snprintf(e->channel_txn_id, sizeof e->channel_txn_id, "E%s%010d", prefix, i);
        (void)snprintf(e->out_trade_no, sizeof e->out_trade_no, "%s-%d", prefix, i);
        e->amount_minor = 100 + i % 900;
        (void)snprintf(e->currency, sizeof e->currency, "CNY");
        e->source = PO_SRC_CALLBACK;
        (void)snprintf(e->occurred_at, sizeof e->occurred_at, "%s", now);
    }
    struct po_committer_cfg cc = {.db_url = fx->db_url,
                                  .workers = committers,
                                  .batch_max = batch_max,
                                  .batch_wait_us = batch_wait_us,
                                  .queue_max = 8192};
    po_err rc = po_committer_start(&cc, &r.c, err, errcap);
    if (!rc) {
        for (int i = 0; i < conns && i < THREADS_MAX; i++)
            self[i] = &r;
        rc = drive(&r.d, self, sizeof self[0], conns, out);
        po_committer_stop(r.c);
        if (rc)
            po_errf(err, errcap, "engine alone: %d events not applied", atomic_load(&r.d.failed));
    }
    free(r.ev);
    if (rc) {
        free(r.d.lat);
        out->lat_ms = NULL;
    }
    return rc;
}

/* ---- the designs a reader writes: the plain design and the article's ---- */

/* Both designs' tables mirror payonce's keys and indexes: an order by
 * (tenant, number), a processed record by (tenant, idempotency key), the
 * merchant's balance by (tenant, account). */
static const char *const design_schema[] = {
    ("CREATE TABLE IF NOT EXISTS plain_order (tenant_id TEXT NOT NULL, out_trade_no TEXT NOT"
     " NULL, merchant_id TEXT NOT NULL, amount BIGINT NOT NULL, status TEXT NOT NULL,"
     " channel_txn_id TEXT, paid_at TEXT, updated_at TEXT NOT NULL, PRIMARY KEY (tenant_id,"
     " out_trade_no))"),
    ("CREATE TABLE IF NOT EXISTS plain_notify_log (tenant_id TEXT NOT NULL, idem_key TEXT NOT"
     " NULL, out_trade_no TEXT NOT NULL, amount BIGINT NOT NULL, created_at TEXT NOT NULL,"
     " PRIMARY KEY (tenant_id, idem_key))"),
    ("CREATE TABLE IF NOT EXISTS plain_journal (tenant_id TEXT NOT NULL, idem_key TEXT NOT NULL,"
     " kind TEXT NOT NULL, out_trade_no TEXT NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY"
     " (tenant_id, idem_key))"),
    ("CREATE TABLE IF NOT EXISTS plain_posting (tenant_id TEXT NOT NULL, idem_key TEXT NOT NULL,"
     " line_no INTEGER NOT NULL, account TEXT NOT NULL, amount BIGINT NOT NULL, PRIMARY KEY"
     " (tenant_id, idem_key, line_no))"),
    ("CREATE TABLE IF NOT EXISTS plain_balance (tenant_id TEXT NOT NULL, account TEXT NOT NULL,"
     " balance BIGINT NOT NULL, PRIMARY KEY (tenant_id, account))"),
    ("CREATE TABLE IF NOT EXISTS article_order (tenant_id TEXT NOT NULL, out_trade_no TEXT NOT"
     " NULL, merchant_id TEXT NOT NULL, amount BIGINT NOT NULL, status TEXT NOT NULL,"
     " channel_txn_id TEXT, paid_at TEXT, updated_at TEXT NOT NULL, PRIMARY KEY (tenant_id,"
     " out_trade_no))"),
    ("CREATE TABLE IF NOT EXISTS article_processed (tenant_id TEXT NOT NULL, idem_key TEXT NOT"
     " NULL, out_trade_no TEXT NOT NULL, amount BIGINT NOT NULL, created_at TEXT NOT NULL,"
     " PRIMARY KEY (tenant_id, idem_key))"),
    ("CREATE TABLE IF NOT EXISTS article_ledger (tenant_id TEXT NOT NULL, idem_key TEXT NOT NULL,"
     " out_trade_no TEXT NOT NULL, account TEXT NOT NULL, amount BIGINT NOT NULL, created_at"
     " TEXT NOT NULL, PRIMARY KEY (tenant_id, idem_key))"),
    ("CREATE TABLE IF NOT EXISTS article_balance (tenant_id TEXT NOT NULL, account TEXT NOT NULL,"
     " balance BIGINT NOT NULL, PRIMARY KEY (tenant_id, account))"),
};

/* What differs between the designs: their tables and what a credit
 * writes after the layer-1 read and the guarded update. */
struct design {
    const char *name;
    const char *orders, *processed, *ledger; /* tables */
    const char *read, *update, *record, *balance;
    /* the writes of a credit besides the processed record and the balance */
    po_err (*entries)(struct po_store *s, const char *key, const char *no, const char *merchant,
                      int64_t amount, const char *now, char *err, size_t errcap);
};

struct design_run {
    struct drive d;
    const struct design *des;
    const char *prefix;
    bool hot;
    int batch; /* callbacks per transaction */
    char now[PO_TIME_SIZE];
};

struct design_thread {
    struct design_run *r;
    /* its connection, closed after the run's CPU was read: a backend that
     * exits takes its CPU out of the count until the postmaster reaps it */
    struct po_store *s;
};

/* The plain design: a journal and its two postings. */
static po_err plain_entries(struct po_store *s, const char *key, const char *no,
                            const char *merchant, int64_t amount, const char *now, char *err,
                            size_t errcap)
{
    po_err rc = po_store_exec(s, "INSERT INTO plain_journal VALUES (?, ?, 'PAY', ?, ?)",
                              PO_PARAMS(PO_TEXT("bench"), PO_TEXT(key), PO_TEXT(no), PO_TEXT(now)),
                              NULL, NULL, err, errcap);
    if (!rc)
        rc = po_store_exec(s,
                           "INSERT INTO plain_posting VALUES (?, ?, 1, 'clearing:wechatpay', ?),"
                           " (?, ?, 2, ?, ?)",
                           PO_PARAMS(PO_TEXT("bench"), PO_TEXT(key), PO_I64(amount),
                                     PO_TEXT("bench"), PO_TEXT(key), PO_TEXT(merchant),
                                     PO_I64(-amount)),
                           NULL, NULL, err, errcap);
    return rc;
}

/* The article's design: one ledger row, the merchant's credit. */
static po_err article_entries(struct po_store *s, const char *key, const char *no,
                              const char *merchant, int64_t amount, const char *now, char *err,
                              size_t errcap)
{
    return po_store_exec(s, "INSERT INTO article_ledger VALUES (?, ?, ?, ?, ?, ?)",
                         PO_PARAMS(PO_TEXT("bench"), PO_TEXT(key), PO_TEXT(no), PO_TEXT(merchant),
                                   PO_I64(-amount), PO_TEXT(now)),
                         NULL, NULL, err, errcap);
}

static const struct design designs[] = {
    [PO_BENCH_PLAIN] = {"plain design", "plain_order", "plain_notify_log", "plain_journal",
                        "SELECT 1 FROM plain_notify_log WHERE tenant_id = ? AND idem_key = ?",
                        "UPDATE plain_order SET status = 'PAID', channel_txn_id = ?, paid_at = ?,"
                        " updated_at = ? WHERE tenant_id = ? AND out_trade_no = ? AND status ="
                        " 'PAYING'",
                        "INSERT INTO plain_notify_log VALUES (?, ?, ?, ?, ?)",
                        "INSERT INTO plain_balance VALUES (?, ?, ?) ON CONFLICT (tenant_id,"
                        " account) DO UPDATE SET balance = plain_balance.balance +"
                        " excluded.balance",
                        plain_entries},
    [PO_BENCH_ARTICLE] = {"article design", "article_order", "article_processed", "article_ledger",
                          "SELECT 1 FROM article_processed WHERE tenant_id = ? AND idem_key = ?",
                          "UPDATE article_order SET status = 'PAID', channel_txn_id = ?, paid_at ="
                          " ?, updated_at = ? WHERE tenant_id = ? AND out_trade_no = ? AND status"
                          " = 'PAYING'",
                          "INSERT INTO article_processed VALUES (?, ?, ?, ?, ?)",
                          "INSERT INTO article_balance VALUES (?, ?, ?) ON CONFLICT (tenant_id,"
                          " account) DO UPDATE SET balance = article_balance.balance +"
                          " excluded.balance",
                          article_entries},
};

/* One callback, the design's way, inside the caller's transaction: the
 * layer-1 read, the guarded update, then (a credit) the design's entries,
 * the balance and the processed record. The plain design writes them in
 * the order of payonce's engine (the record first); the article, in the
 * order of its text (the record last). */
static po_err design_one(struct po_store *s, const struct design_run *r, int i, char *err,
                         size_t errcap)
{
    const struct design *des = r->des;
    char key[64], no[PO_ID_MAX + 1], txn[40], merchant[40];
    (void)snprintf(no, sizeof no, "%s-%d", r->prefix, i);
    (void)snprintf(txn, sizeof txn, "P%s%010d", r->prefix, i);
    (void)snprintf(key, sizeof key, "wechatpay:%s:PAY_SUCCESS", txn);
    if (r->hot)
        (void)snprintf(merchant, sizeof merchant, "merchant:%sm", r->prefix);
    else
        (void)snprintf(merchant, sizeof merchant, "merchant:%sm%d", r->prefix, i);
    int64_t amount = 100 + i % 900;
    struct po_rows rows;
    po_err rc = po_store_exec(s, des->read, PO_PARAMS(PO_TEXT("bench"), PO_TEXT(key)), &rows, NULL,
                              err, errcap);
    if (rc)
        return rc;
    bool seen = rows.nrows > 0;
    po_rows_free(&rows);
    if (seen)
        return PO_OK;
    int64_t changed = 0;
    rc = po_store_exec(
        s, des->update,
        PO_PARAMS(PO_TEXT(txn), PO_TEXT(r->now), PO_TEXT(r->now), PO_TEXT("bench"), PO_TEXT(no)),
        NULL, &changed, err, errcap);
    if (rc || changed == 0)
        return rc;
    bool article = des == &designs[PO_BENCH_ARTICLE];
    const struct po_param rec[] = {PO_TEXT("bench"), PO_TEXT(key), PO_TEXT(no), PO_I64(amount),
                                   PO_TEXT(r->now)};
    if (!article)
        rc = po_store_exec(s, des->record, rec, (int)PO_NELEM(rec), NULL, NULL, err, errcap);
    if (!rc)
        rc = des->entries(s, key, no, merchant, amount, r->now, err, errcap);
    if (!rc)
        rc = po_store_exec(s, des->balance,
                           PO_PARAMS(PO_TEXT("bench"), PO_TEXT(merchant), PO_I64(-amount)), NULL,
                           NULL, err, errcap);
    if (!rc && article)
        rc = po_store_exec(s, des->record, rec, (int)PO_NELEM(rec), NULL, NULL, err, errcap);
    return rc;
}

/* Callbacks first .. first+count-1 in one transaction. */
static po_err design_tx(struct po_store *s, const struct design_run *r, int first, int count,
                        char *err, size_t errcap)
{
    po_err rc = po_store_begin(s, err, errcap);
    for (int k = 0; k < count && !rc; k++)
        rc = design_one(s, r, first + k, err, errcap);
    if (!rc)
        return po_store_commit(s, err, errcap);
    po_store_rollback(s);
    return rc;
}

static void *design_thread(void *arg)
{
    struct design_thread *self = arg;
    struct design_run *r = self->r;
    char err[PO_ERRBUF_SIZE];
    drive_ready(&r->d);
    for (int i; (i = atomic_fetch_add(&r->d.next, r->batch)) < r->d.n;) {
        int count = r->d.n - i < r->batch ? r->d.n - i : r->batch;
        double t = now_ms();
        po_err rc;
        /* A deadlock or serialization failure is retried, as a framework
         * would; anything else is a failure of the run. */
        for (int attempt = 0;
             (rc = design_tx(self->s, r, i, count, err, sizeof err)) == PO_ERR_TRANSIENT &&
             attempt < 5;
             attempt++)
            ;
        /* each callback of a transaction is answered at its commit */
        for (int k = 0; k < count; k++)
            r->d.lat[i + k] = now_ms() - t;
        if (rc && atomic_fetch_add(&r->d.failed, 1) == 0)
            fprintf(stderr, "bench: %s: %s (%s)\n", r->des->name, err, po_err_name(rc));
    }
    return NULL;
}

po_err po_bench_design_orders(struct po_bench_fx *fx, enum po_bench_design which,
                              const char *prefix, int n, bool hot, char *err, size_t errcap)
{
    struct design_run one = {.des = &designs[which], .prefix = prefix, .hot = hot};
    const struct design_run *r = &one;
    po_clock_now_iso(one.now, sizeof one.now);
    po_err rc = PO_OK;
    for (int k = 0; k < PO_NELEM(design_schema) && !rc; k++)
        rc = po_store_exec(fx->s, design_schema[k], PO_NO_PARAMS, NULL, NULL, err, errcap);
    char sql[512], like[16];
    (void)snprintf(like, sizeof like, "%s-", r->prefix);
    if (!rc && po_fmt(sql, sizeof sql,
                      "WITH RECURSIVE g(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM g WHERE x + 1"
                      " < ?) INSERT INTO %s SELECT 'bench', ? || x, CASE WHEN ? = 1 THEN ? ||"
                      " 'm' ELSE ? || 'm' || x END, 100 + x %% 900, 'PAYING', NULL, NULL, ?"
                      " FROM g",
                      r->des->orders))
        rc = PO_ERR_LIMIT;
    if (!rc)
        rc = po_store_exec_tx(fx->s, sql,
                              PO_PARAMS(PO_I64(n), PO_TEXT(like), PO_I64(r->hot),
                                        PO_TEXT(r->prefix), PO_TEXT(r->prefix), PO_TEXT(r->now)),
                              NULL, err, errcap);
    return rc;
}

/* Exactly one credit each: n ledger entries (journals) for the prefix. */
static po_err design_check(struct po_bench_fx *fx, const struct design_run *r, int n, char *err,
                           size_t errcap)
{
    char sql[256], like[16];
    (void)snprintf(like, sizeof like, "%s-", r->prefix);
    if (po_fmt(sql, sizeof sql,
               "SELECT COUNT(*) FROM %s WHERE tenant_id = 'bench' AND out_trade_no LIKE ? || '%%'",
               r->des->ledger))
        return PO_ERR_LIMIT;
    struct po_rows rows;
    po_err rc = po_store_exec(fx->s, sql, PO_PARAMS(PO_TEXT(like)), &rows, NULL, err, errcap);
    int64_t credited = -1;
    if (!rc) {
        rc = po_rows_i64(&rows, 0, 0, &credited);
        po_rows_free(&rows);
    }
    if (!rc && credited != n) {
        po_errf(err, errcap, "%s: %lld credits for %d payments", r->des->name, (long long)credited,
                n);
        rc = PO_ERR_INTERNAL;
    }
    return rc;
}

po_err po_bench_design(struct po_bench_fx *fx, enum po_bench_design which, const char *prefix,
                       int n, bool hot, int conns, int batch, struct po_bench_base *out, char *err,
                       size_t errcap)
{
    memset(out, 0, sizeof *out);
    struct design_run r = {.d = {.thread = design_thread, .n = n},
                           .des = &designs[which],
                           .prefix = prefix,
                           .hot = hot,
                           .batch = batch < 1 ? 1 : batch};
    po_clock_now_iso(r.now, sizeof r.now);
    po_err rc = PO_OK;
    r.d.lat = calloc((size_t)n, sizeof *r.d.lat);
    if (!r.d.lat)
        return PO_ERR_NOMEM;
    /* The pool is filled one connection after another before the clock, as
     * a framework's is before its traffic comes: 256 connections opened at
     * once by a loaded machine outlast the connect timeout. */
    struct design_thread t[THREADS_MAX] = {0};
    char why[PO_ERRBUF_SIZE];
    for (int i = 0; i < conns && i < THREADS_MAX && !rc; i++) {
        t[i].r = &r;
        if ((rc = po_store_open(fx->db_url, &t[i].s, why, sizeof why)))
            po_errf(err, errcap, "%s: connection %d of %d: %s", r.des->name, i + 1, conns, why);
    }
    bool opened = !rc;
    if (opened)
        rc = drive(&r.d, t, sizeof t[0], conns, out);
    for (int i = 0; i < conns && i < THREADS_MAX && t[i].s; i++) {
        out->round_trips += po_store_round_trips(t[i].s);
        out->pages_written += po_store_pages_written(t[i].s);
        po_store_close(t[i].s);
    }
    out->batches = (uint64_t)((n + r.batch - 1) / r.batch);
    if (rc) {
        if (opened)
            po_errf(err, errcap, "%s: %d transactions failed", r.des->name,
                    atomic_load(&r.d.failed));
        free(r.d.lat);
        out->lat_ms = NULL;
        return rc;
    }
    return design_check(fx, &r, n, err, errcap);
}
