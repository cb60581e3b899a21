/*
 * committer.c — the committer of docs/internals.md, "One callback, from socket to ack" (see
 * engine.h): worker threads, each owning one store connection and a bounded queue, applying what is
 * queued as one batch and answering every item after COMMIT.
 *
 * Invariants:
 *  - an item is answered (done() called) exactly once, after the batch that
 *    held it committed or failed; never before COMMIT returned;
 *  - a queue never holds more than queue_max items; submit refuses beyond;
 *  - items with the same routing key go to the same worker, in order;
 *  - an item with a deadline is answered retry once it passes, by the
 *    watchdog thread if the worker is still waiting for the database; the
 *    worker then never touches it again (watch[] / abandoned[] under mu).
 */
#include "engine_int.h"

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
    uint64_t session;     /* po_store_sessions after the previous batch */
    /* the store's counters when last added to the committer's */
    uint64_t trips_seen, pages_seen;
    int last_size;
    /* the batch being applied */
    struct po_commit_item *items[PO_BATCH_MAX];
    struct po_event ev[PO_BATCH_MAX];
    struct po_outcome out[PO_BATCH_MAX];
    struct po_engine_work work[PO_BATCH_MAX];
    int ev_of[PO_BATCH_MAX], work_of[PO_BATCH_MAX]; /* their item's index */
    /* the alerts' copies (their works' ctx): the worker's own memory, so
     * that an alert answered at its deadline may still be written */
    struct alert_copy {
        struct po_event ev;
        struct po_commit_alert a;
    } alerts[PO_BATCH_MAX];
    /* the batch's callback records: taken from its items when it begins
     * (rec_of), those of the items applied go into the batch (rec) */
    struct po_audit_record *rec_of[PO_BATCH_MAX], *rec[PO_BATCH_MAX];
    struct po_guard_token tok[PO_BATCH_MAX];
    int tok_of[PO_BATCH_MAX];
    /* the batch in items[0..nwatch) (mu): the watchdog answers those past
     * their deadline and marks them abandoned; so does run() for those it
     * answers before the engine */
    int nwatch;
    bool abandoned[PO_BATCH_MAX];
};

struct po_committer {
    struct po_committer_cfg cfg;
    atomic_int expected;    /* items announced and not yet submitted */
    atomic_bool announcing; /* po_committer_expect is in use */
    int nworkers;
    struct worker w[PO_COMMITTER_WORKERS_MAX];
    atomic_ulong batches, items, failures, expired;
    atomic_ulong round_trips, pages_written; /* of the workers' connections */
    struct po_known *known;                  /* NULL: no table */
    atomic_ulong known_hits, known_clears;
    atomic_ulong hist[9];
    /* the watchdog: answers items past their deadline every tick */
    pthread_t watchdog;
    bool watchdog_started, watchdog_stop;
    pthread_mutex_t wd_mu;
    pthread_cond_t wd_cv;
};

#define WATCHDOG_TICK_US 50000

static bool expired(const struct po_commit_item *it, uint64_t now)
{
    return it->deadline_us && now >= it->deadline_us;
}

/* Answers items retry: past their deadline, or refused by the guard (no
 * lock held; each item is ours to answer). */
static void answer_retry(struct po_committer *c, struct po_commit_item *list, enum po_reason why)
{
    while (list) {
        struct po_commit_item *it = list;
        list = it->next;
        it->next = NULL;
        it->out = (struct po_outcome){PO_OUT_RETRY, 0, why};
        it->work.rc = PO_ERR_TRANSIENT;
        po_audit_record_free(it->record); /* never in a batch: not recorded */
        it->record = NULL;
        if (why == PO_R_DEADLINE_EXCEEDED)
            atomic_fetch_add(&c->expired, 1);
        it->done(it);
    }
}

/* Takes the expired items out of w's queue and its batch in flight onto
 * *list (called locked). */
static void collect_expired(struct worker *w, uint64_t now, struct po_commit_item **list)
{
    struct po_commit_item *prev = NULL, *it = w->head;
    while (it) {
        struct po_commit_item *next = it->next;
        if (expired(it, now)) {
            if (prev)
                prev->next = next;
            else
                w->head = next;
            if (w->tail == it)
                w->tail = prev;
            w->queued--;
            it->next = *list;
            *list = it;
        } else {
            prev = it;
        }
        it = next;
    }
    for (int i = 0; i < w->nwatch; i++) {
        struct po_commit_item *e = w->items[i];
        if (!w->abandoned[i] && expired(e, now)) {
            w->abandoned[i] = true;
            e->next = *list;
            *list = e;
        }
    }
}

static void *watchdog_main(void *arg)
{
    struct po_committer *c = arg;
    pthread_mutex_lock(&c->wd_mu);
    while (!c->watchdog_stop) {
        struct timespec until = po_deadline_us(WATCHDOG_TICK_US);
        (void)pthread_cond_timedwait(&c->wd_cv, &c->wd_mu, &until);
        if (c->watchdog_stop)
            break;
        pthread_mutex_unlock(&c->wd_mu);
        uint64_t now = po_now_us();
        for (int i = 0; i < c->nworkers; i++) {
            struct po_commit_item *list = NULL;
            pthread_mutex_lock(&c->w[i].mu);
            collect_expired(&c->w[i], now, &list);
            pthread_mutex_unlock(&c->w[i].mu);
            answer_retry(c, list, PO_R_DEADLINE_EXCEEDED);
        }
        pthread_mutex_lock(&c->wd_mu);
    }
    pthread_mutex_unlock(&c->wd_mu);
    return NULL;
}

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

/* A counter's growth since it was last seen (a connection opened anew
 * starts again from 0). */
static uint64_t grown(uint64_t now, uint64_t *seen)
{
    uint64_t d = now >= *seen ? now - *seen : now;
    *seen = now;
    return d;
}

static void count_batch(struct worker *w, int n, bool failed)
{
    struct po_committer *c = w->c;
    atomic_fetch_add(&c->round_trips, grown(po_store_round_trips(w->s), &w->trips_seen));
    atomic_fetch_add(&c->pages_written, grown(po_store_pages_written(w->s), &w->pages_seen));
    int b = 0;
    while (b < 8 && (1 << (b + 1)) <= n)
        b++;
    atomic_fetch_add(&c->batches, 1);
    atomic_fetch_add(&c->items, (unsigned long)n);
    atomic_fetch_add(&c->hist[b], 1);
    if (failed)
        atomic_fetch_add(&c->failures, 1);
}

static po_err alert_work(struct po_store *s, void *ctx)
{
    const struct alert_copy *a = ctx;
    return po_engine_alert_in(s, &a->ev, a->a.reason, a->a.detail,
                              a->a.outcome[0] ? a->a.outcome : NULL);
}

/*
 * The table of committed events after a batch's COMMIT returned (and
 * before any of its items is answered): emptied first when the batch did
 * not commit every event (failed) or the worker's connection is new since
 * the previous batch — a failover may have lost what the table remembers —
 * then its events answered applied or duplicate put in.
 */
static void remember(struct worker *w, int ne, bool failed)
{
    struct po_committer *c = w->c;
    uint64_t session = po_store_sessions(w->s);
    if (failed || session != w->session) {
        po_known_clear(c->known);
        atomic_fetch_add(&c->known_clears, 1);
        w->session = session;
    }
    for (int j = 0; j < ne; j++)
        if (w->out[j].kind == PO_OUT_APPLIED || w->out[j].kind == PO_OUT_DUPLICATE)
            po_known_put(c->known, &w->ev[j]);
}

/*
 * Applies one batch (w->items[0..n)) and answers each of its items.
 *
 * From the moment the batch begins the watchdog may answer any of its items
 * whose deadline passes (abandoned[i]); the worker then never touches that
 * item again. So everything read from an item is read under mu: the guard
 * works on copies of the items' tokens, the engine on copies of their events
 * and works, and the answers go only to items not abandoned.
 */
static void run(struct worker *w, int n)
{
    struct po_committer *c = w->c;
    const struct po_committer_cfg *cfg = &c->cfg;
    int ng = 0, ne = 0, nw = 0, na = 0, nans = 0, nr = 0;
    struct po_commit_item *refused = NULL, *answer[PO_BATCH_MAX];
    pthread_mutex_lock(&w->mu);
    for (int i = 0; i < n; i++) {
        struct po_commit_item *it = w->items[i];
        w->abandoned[i] = false;
        it->stale = false;
        w->rec_of[i] = it->record; /* ours now: the watchdog may answer it */
        it->record = NULL;
        if (cfg->guard && it->has_guard) {
            w->tok[ng] = it->guard;
            w->tok[ng].stale = false;
            w->tok_of[ng++] = i;
        }
    }
    w->nwatch = n; /* the watchdog watches the whole batch from here */
    pthread_mutex_unlock(&w->mu);
    /* The guard: those verified with a replaced account are answered retry
     * (stale: their caller verifies again), all of them if it cannot say. */
    bool unguarded = ng > 0 && cfg->guard(w->s, w->tok, (size_t)ng, cfg->guard_ctx) != PO_OK;
    pthread_mutex_lock(&w->mu);
    for (int k = 0; k < ng; k++)
        if (w->tok[k].stale && !w->abandoned[w->tok_of[k]])
            w->items[w->tok_of[k]]->stale = true;
    for (int i = 0; i < n; i++) {
        struct po_commit_item *it = w->items[i];
        if (w->abandoned[i])
            continue;
        if (unguarded || it->stale) {
            w->abandoned[i] = true; /* answered now, by us */
            it->next = refused;
            refused = it;
            continue;
        }
        if (w->rec_of[i]) {
            w->rec[nr++] = w->rec_of[i];
            w->rec_of[i] = NULL;
        }
        if (it->alert.reason != PO_R_NONE) {
            w->alerts[na] = (struct alert_copy){it->ev, it->alert};
            w->work[nw] = (struct po_engine_work){alert_work, &w->alerts[na++], PO_OK};
            w->work_of[nw++] = i;
        } else if (it->work.fn) {
            w->work[nw] = it->work;
            w->work_of[nw++] = i;
        } else {
            w->ev[ne] = it->ev;
            w->ev_of[ne++] = i;
        }
    }
    pthread_mutex_unlock(&w->mu);
    answer_retry(c, refused, PO_R_STORE_UNAVAILABLE);
    if (ne + nw > 0)
        po_engine_apply_recorded(w->s, cfg->engine, w->ev, (size_t)ne, w->out, w->work, (size_t)nw,
                                 w->rec, (size_t)nr);
    for (int i = 0; i < n; i++) /* those refused, or answered before the batch */
        po_audit_record_free(w->rec_of[i]);
    for (int k = 0; k < nr; k++)
        po_audit_record_free(w->rec[k]);
    bool failed = false;
    pthread_mutex_lock(&w->mu);
    for (int j = 0; j < ne; j++) {
        failed |= w->out[j].kind == PO_OUT_RETRY;
        if (w->abandoned[w->ev_of[j]])
            continue; /* answered at its deadline: no longer ours */
        struct po_commit_item *it = w->items[w->ev_of[j]];
        it->out = w->out[j];
        answer[nans++] = it;
    }
    for (int j = 0; j < nw; j++) {
        if (w->abandoned[w->work_of[j]]) {
            PO_ASSERT(w->work[j].fn == alert_work); /* works have no deadline */
            continue;
        }
        struct po_commit_item *it = w->items[w->work_of[j]];
        it->work.rc = w->work[j].rc;
        answer[nans++] = it;
    }
    w->nwatch = 0;
    pthread_mutex_unlock(&w->mu);
    /* A batch of works alone that did not commit (each answered
     * PO_ERR_TRANSIENT) empties the table as well. */
    bool lost = failed;
    for (int j = 0; j < nw; j++)
        lost |= w->work[j].rc == PO_ERR_TRANSIENT;
    if (c->known && ne + nw > 0)
        remember(w, ne, lost);
    if (ne + nw > 0)
        count_batch(w, ne + nw, failed);
    /* Answer only now: the batch has committed (or is all retry). */
    for (int k = 0; k < nans; k++)
        answer[k]->done(answer[k]);
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
    /* The watchdog answered what passed its deadline while they drained. */
    if (c->watchdog_started) {
        pthread_mutex_lock(&c->wd_mu);
        c->watchdog_stop = true;
        pthread_cond_signal(&c->wd_cv);
        pthread_mutex_unlock(&c->wd_mu);
        pthread_join(c->watchdog, NULL);
        c->watchdog_started = false;
    }
    po_known_free(c->known);
    c->known = NULL;
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
        cfg->queue_max > PO_QUEUE_MAX || cfg->known_max < 0 || cfg->known_max > PO_KNOWN_MAX) {
        po_errf(err, errcap,
                "committer: workers 1..%d, batch 1..%d, wait 0..%d us, queue 1..%d, known 0..%d",
                PO_COMMITTER_WORKERS_MAX, PO_BATCH_MAX, PO_BATCH_WAIT_US_MAX, PO_QUEUE_MAX,
                PO_KNOWN_MAX);
        return PO_ERR_INVALID;
    }
    struct po_committer *c = calloc(1, sizeof *c);
    if (!c)
        return PO_ERR_NOMEM;
    c->cfg = *cfg;
    c->nworkers = cfg->workers;
    /* The table is layer 1 remembered: not there when layer 1 is off. */
    po_err rc = po_engine_layer_on(cfg->engine, PO_ENGINE_NO_LAYER1)
                    ? po_known_new(cfg->known_max, &c->known)
                    : PO_OK;
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
        if (!rc)
            w->session = po_store_sessions(w->s);
    }
    int started = 0;
    for (int i = 0; !rc && i < c->nworkers; i++, started++)
        if (pthread_create(&c->w[i].thread, NULL, worker_main, &c->w[i]) != 0) {
            po_errf(err, errcap, "committer: cannot start a worker thread");
            rc = PO_ERR_INTERNAL;
            break;
        }
    pthread_mutex_init(&c->wd_mu, NULL);
    po_cond_init(&c->wd_cv);
    if (!rc && !(c->watchdog_started = pthread_create(&c->watchdog, NULL, watchdog_main, c) == 0)) {
        po_errf(err, errcap, "committer: cannot start the watchdog thread");
        rc = PO_ERR_INTERNAL;
    }
    if (rc) {
        stop_workers(c, started); /* frees the table */
        pthread_mutex_destroy(&c->wd_mu);
        pthread_cond_destroy(&c->wd_cv);
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

/* The items of one po_committer_apply_many, answered by the workers. */
struct waiting {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t left;
};

static void answered(struct po_commit_item *it)
{
    struct waiting *w = it->user;
    pthread_mutex_lock(&w->mu);
    if (--w->left == 0)
        pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void po_committer_apply_many(struct po_committer *c, struct po_commit_item *items, size_t n)
{
    struct waiting w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, n};
    for (size_t i = 0; i < n; i++) {
        items[i].done = answered;
        items[i].user = &w;
        if (po_committer_submit(c, &items[i]) != PO_OK) {
            items[i].out = (struct po_outcome){PO_OUT_RETRY, 0, PO_R_POOL_EXHAUSTED};
            items[i].work.rc = PO_ERR_TRANSIENT;
            answered(&items[i]);
        }
    }
    pthread_mutex_lock(&w.mu);
    while (w.left > 0)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
}

void po_committer_apply(struct po_committer *c, struct po_commit_item *it)
{
    po_committer_apply_many(c, it, 1);
}

void po_committer_stats(struct po_committer *c, struct po_committer_stats *out)
{
    memset(out, 0, sizeof *out);
    out->batches = atomic_load(&c->batches);
    out->items = atomic_load(&c->items);
    out->commit_failures = atomic_load(&c->failures);
    out->deadline_exceeded = atomic_load(&c->expired);
    out->known_hits = atomic_load(&c->known_hits);
    out->known_clears = atomic_load(&c->known_clears);
    out->round_trips = atomic_load(&c->round_trips);
    out->pages_written = atomic_load(&c->pages_written);
    for (int i = 0; i < 9; i++)
        out->size_hist[i] = atomic_load(&c->hist[i]);
    for (int i = 0; i < c->nworkers; i++) {
        pthread_mutex_lock(&c->w[i].mu);
        out->queued += c->w[i].queued;
        pthread_mutex_unlock(&c->w[i].mu);
    }
}

bool po_committer_known(struct po_committer *c, const struct po_event *ev)
{
    if (!po_known_has(c->known, ev))
        return false;
    atomic_fetch_add(&c->known_hits, 1);
    return true;
}

void po_committer_stop(struct po_committer *c)
{
    if (!c)
        return;
    stop_workers(c, c->nworkers);
    pthread_mutex_destroy(&c->wd_mu);
    pthread_cond_destroy(&c->wd_cv);
    free(c);
}
