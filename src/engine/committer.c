/*
 * committer.c — the committer of DESIGN §8 (see engine.h): worker threads,
 * each owning one store connection and a bounded queue, applying what is
 * queued as one batch and answering every item after COMMIT.
 *
 * Invariants:
 *  - an item is answered (done() called) exactly once, after the batch that
 *    held it committed or failed; never before COMMIT returned;
 *  - a queue never holds more than queue_max items; submit refuses beyond;
 *  - items with the same routing key go to the same worker, in order.
 */
#include "engine.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct worker {
    struct po_committer *c;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct po_commit_item *head, *tail;
    int queued;
    bool stop;
    struct po_store *s;
    uint64_t last_end_us; /* when the previous batch ended */
    int last_size;
    /* the batch being applied */
    struct po_commit_item *items[PO_BATCH_MAX];
    struct po_event ev[PO_BATCH_MAX];
    struct po_outcome out[PO_BATCH_MAX];
    struct po_engine_work work[PO_BATCH_MAX];
    struct po_commit_item *ev_item[PO_BATCH_MAX], *work_item[PO_BATCH_MAX];
};

struct po_committer {
    struct po_committer_cfg cfg;
    atomic_int expected;    /* items announced and not yet submitted */
    atomic_bool announcing; /* po_committer_expect is in use */
    int nworkers;
    struct worker w[PO_COMMITTER_WORKERS_MAX];
    atomic_ulong batches, items, failures;
    atomic_ulong hist[9];
};

static uint64_t route_hash(const struct po_commit_item *it)
{
    uint64_t h = UINT64_C(1469598103934665603);
    const char *parts[2] = {it->route[0] ? it->route : it->ev.tenant,
                            it->route[0] ? "" : it->ev.out_trade_no};
    for (int k = 0; k < 2; k++) {
        for (const unsigned char *p = (const unsigned char *)parts[k]; *p; p++)
            h = (h ^ *p) * UINT64_C(1099511628211);
        h = (h ^ '|') * UINT64_C(1099511628211);
    }
    return h;
}

/* Takes up to room items off the queue into the batch (called locked). */
static int take(struct worker *w, int have, int room)
{
    while (w->head && have < room) {
        struct po_commit_item *it = w->head;
        w->head = it->next;
        if (!w->head)
            w->tail = NULL;
        w->queued--;
        it->next = NULL;
        w->items[have++] = it;
    }
    return have;
}

static void count_batch(struct po_committer *c, int n, bool failed)
{
    int b = 0;
    while (b < 8 && (1 << (b + 1)) <= n)
        b++;
    atomic_fetch_add(&c->batches, 1);
    atomic_fetch_add(&c->items, (unsigned long)n);
    atomic_fetch_add(&c->hist[b], 1);
    if (failed)
        atomic_fetch_add(&c->failures, 1);
}

/* The items whose guard says they may be applied; the others (stale,
 * or all of them when the guard cannot answer) are answered retry. */
static int guard(struct worker *w, int n)
{
    const struct po_committer_cfg *cfg = &w->c->cfg;
    struct po_commit_item *g[PO_BATCH_MAX];
    size_t ng = 0;
    for (int i = 0; i < n; i++) {
        w->items[i]->stale = false;
        if (w->items[i]->guard)
            g[ng++] = w->items[i];
    }
    if (!cfg->guard || ng == 0)
        return n;
    bool failed = cfg->guard(w->s, g, ng, cfg->guard_ctx) != PO_OK;
    int kept = 0;
    for (int i = 0; i < n; i++) {
        struct po_commit_item *it = w->items[i];
        if (!failed && !it->stale) {
            w->items[kept++] = it;
            continue;
        }
        it->out = (struct po_outcome){PO_OUT_RETRY, 0, PO_R_STORE_UNAVAILABLE};
        it->work.rc = PO_ERR_TRANSIENT;
        it->done(it);
    }
    return kept;
}

/* Applies one batch and answers each of its items. */
static void run(struct worker *w, int n)
{
    int ne = 0, nw = 0;
    n = guard(w, n);
    if (n == 0)
        return;
    for (int i = 0; i < n; i++) {
        struct po_commit_item *it = w->items[i];
        if (it->work.fn) {
            w->work[nw] = it->work;
            w->work_item[nw++] = it;
        } else {
            w->ev[ne] = it->ev;
            w->ev_item[ne++] = it;
        }
    }
    PO_ASSERT(po_engine_apply_mixed(w->s, w->c->cfg.engine, w->ev, (size_t)ne, w->out, w->work,
                                    (size_t)nw) == PO_OK);
    bool failed = false;
    for (int i = 0; i < ne; i++) {
        w->ev_item[i]->out = w->out[i];
        failed |= w->out[i].kind == PO_OUT_RETRY;
    }
    for (int i = 0; i < nw; i++)
        w->work_item[i]->work.rc = w->work[i].rc;
    count_batch(w->c, n, failed);
    /* Answer only now: the batch has committed (or is all retry). */
    for (int i = 0; i < ne; i++)
        w->ev_item[i]->done(w->ev_item[i]);
    for (int i = 0; i < nw; i++)
        w->work_item[i]->done(w->work_item[i]);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    const struct po_committer_cfg *cfg = &w->c->cfg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->head && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->head && w->stop)
            break;
        int n = take(w, 0, cfg->batch_max);
        /* Let the batch fill while more is on its way — items announced by
         * po_committer_expect (callbacks being verified right now), or,
         * without announcements, while busy (the previous batch had
         * company and ended just now) — for at most batch_wait_us. An idle
         * committer with nothing announced goes at once: a lone callback
         * waits for nothing. */
        struct po_committer *c = w->c;
        bool announced = atomic_load(&c->announcing);
        uint64_t t = po_now_us();
        bool busy =
            !announced && w->last_size > 1 && t - w->last_end_us < (uint64_t)cfg->batch_wait_us * 4;
        if (n < cfg->batch_max && cfg->batch_wait_us > 0 &&
            (busy || (announced && atomic_load(&c->expected) > 0))) {
            struct timespec until = po_deadline_us(cfg->batch_wait_us);
            while (n < cfg->batch_max && !w->stop && (busy || atomic_load(&c->expected) > 0) &&
                   pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0)
                n = take(w, n, cfg->batch_max);
            n = take(w, n, cfg->batch_max);
        }
        pthread_mutex_unlock(&w->mu);
        run(w, n);
        pthread_mutex_lock(&w->mu);
        w->last_end_us = po_now_us();
        w->last_size = n;
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void stop_workers(struct po_committer *c, int started)
{
    for (int i = 0; i < started; i++) {
        struct worker *w = &c->w[i];
        pthread_mutex_lock(&w->mu);
        w->stop = true;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
    }
    for (int i = 0; i < c->nworkers; i++) {
        po_store_close(c->w[i].s);
        pthread_mutex_destroy(&c->w[i].mu);
        pthread_cond_destroy(&c->w[i].cv);
    }
}

po_err po_committer_start(const struct po_committer_cfg *cfg, struct po_committer **out, char *err,
                          size_t errcap)
{
    if (cfg->workers < 1 || cfg->workers > PO_COMMITTER_WORKERS_MAX || cfg->batch_max < 1 ||
        cfg->batch_max > PO_BATCH_MAX || cfg->batch_wait_us < 0 ||
        cfg->batch_wait_us > PO_BATCH_WAIT_US_MAX || cfg->queue_max < 1 ||
        cfg->queue_max > PO_QUEUE_MAX) {
        po_errf(err, errcap, "committer: workers 1..%d, batch 1..%d, wait 0..%d us, queue 1..%d",
                PO_COMMITTER_WORKERS_MAX, PO_BATCH_MAX, PO_BATCH_WAIT_US_MAX, PO_QUEUE_MAX);
        return PO_ERR_INVALID;
    }
    struct po_committer *c = calloc(1, sizeof *c);
    if (!c)
        return PO_ERR_NOMEM;
    c->cfg = *cfg;
    c->nworkers = cfg->workers;
    po_err rc = PO_OK;
    for (int i = 0; i < c->nworkers; i++) {
        struct worker *w = &c->w[i];
        w->c = c;
        pthread_mutex_init(&w->mu, NULL);
        po_cond_init(&w->cv);
        if (!rc)
            rc = po_store_open(cfg->db_url, &w->s, err, errcap);
        if (!rc)
            po_store_keyed_only(w->s);
        if (!rc && cfg->fault)
            po_store_set_fault_hook(w->s, cfg->fault, cfg->fault_ctx);
    }
    int started = 0;
    for (int i = 0; !rc && i < c->nworkers; i++, started++)
        if (pthread_create(&c->w[i].thread, NULL, worker_main, &c->w[i]) != 0) {
            po_errf(err, errcap, "committer: cannot start a worker thread");
            rc = PO_ERR_INTERNAL;
            break;
        }
    if (rc) {
        stop_workers(c, started);
        free(c);
        return rc;
    }
    *out = c;
    return PO_OK;
}

po_err po_committer_submit(struct po_committer *c, struct po_commit_item *it)
{
    PO_ASSERT(it->done);
    struct worker *w = &c->w[route_hash(it) % (uint64_t)c->nworkers];
    pthread_mutex_lock(&w->mu);
    if (w->stop || w->queued >= c->cfg.queue_max) {
        pthread_mutex_unlock(&w->mu);
        return PO_ERR_LIMIT;
    }
    it->next = NULL;
    if (w->tail)
        w->tail->next = it;
    else
        w->head = it;
    w->tail = it;
    w->queued++;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return PO_OK;
}

void po_committer_expect(struct po_committer *c, int delta)
{
    if (delta > 0 && !atomic_load(&c->announcing))
        atomic_store(&c->announcing, true);
    if (atomic_fetch_add(&c->expected, delta) + delta > 0)
        return;
    /* Nothing more on its way: a worker waiting to fill its batch goes. */
    for (int i = 0; i < c->nworkers; i++) {
        pthread_mutex_lock(&c->w[i].mu);
        pthread_cond_signal(&c->w[i].cv);
        pthread_mutex_unlock(&c->w[i].mu);
    }
}

struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
};

static void wake(struct po_commit_item *it)
{
    struct waiter *wt = it->user;
    pthread_mutex_lock(&wt->mu);
    wt->done = true;
    pthread_cond_signal(&wt->cv);
    pthread_mutex_unlock(&wt->mu);
}

void po_committer_apply(struct po_committer *c, struct po_commit_item *it)
{
    struct waiter wt = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    it->done = wake;
    it->user = &wt;
    if (po_committer_submit(c, it)) {
        it->out = (struct po_outcome){PO_OUT_RETRY, 0, PO_R_POOL_EXHAUSTED};
        it->work.rc = PO_ERR_TRANSIENT;
        return;
    }
    pthread_mutex_lock(&wt.mu);
    while (!wt.done)
        pthread_cond_wait(&wt.cv, &wt.mu);
    pthread_mutex_unlock(&wt.mu);
    pthread_mutex_destroy(&wt.mu);
    pthread_cond_destroy(&wt.cv);
}

void po_committer_stats(struct po_committer *c, struct po_committer_stats *out)
{
    memset(out, 0, sizeof *out);
    out->batches = atomic_load(&c->batches);
    out->items = atomic_load(&c->items);
    out->commit_failures = atomic_load(&c->failures);
    for (int i = 0; i < 9; i++)
        out->size_hist[i] = atomic_load(&c->hist[i]);
    for (int i = 0; i < c->nworkers; i++) {
        pthread_mutex_lock(&c->w[i].mu);
        out->queued += c->w[i].queued;
        pthread_mutex_unlock(&c->w[i].mu);
    }
}

void po_committer_stop(struct po_committer *c)
{
    if (!c)
        return;
    stop_workers(c, c->nworkers);
    free(c);
}
