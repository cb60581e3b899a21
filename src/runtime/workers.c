/*
 * workers.c — a bounded pool of threads for the work a request thread must
 * not do itself because it blocks: reading the database (tenant API
 * requests, loading a channel account), waiting for the committer on
 * behalf of a blocking caller. The event threads of the HTTP front hand
 * such work here and go on serving other connections.
 *
 * Fair between tenants (issue 27): every job is queued in its tenant's
 * lane, and an idle thread takes the next job round-robin across the
 * lanes, skipping a lane that already runs its share while another lane
 * is active (has work, or submitted within recent_ms). So a tenant's
 * burst waits in its own lane — not in front of another tenant's request,
 * and without a refusal for the client to retry at once — and runs at
 * most `share` at a time while others want the pool; alone, it may use
 * every thread (work-conserving). Like the bulkheads, the share bounds
 * what a tenant has in the committer ahead of everyone else.
 *
 * The queue is bounded in all (queue_max) and per lane (PO_LANE_QUEUE_MAX):
 * submit refuses beyond, and the request is answered "try again" at once
 * instead of waiting unbounded.
 */
#include "runtime_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LANES 1024       /* lanes with work at once (open addressing) */
#define IDLE_WAIT_MS 100 /* how soon a lifted cap is noticed */

struct job {
    void (*fn)(void *ctx);
    void *ctx;
    struct job *next;
};

struct lane {
    char name[PO_ID_MAX + 1]; /* "" for the anonymous lane */
    bool used;                /* ever used: lookups go past it */
    int running, queued;
    struct job *head, *tail;
};

struct po_workers {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int queued, queue_max, nthreads, share;
    int64_t recent_ms;
    bool stop;
    struct lane anon;             /* no tenant known, or the table full */
    struct lane *ring[LANES + 1]; /* lanes with queued jobs, in turn */
    int nring, next;              /* next: where the round-robin goes on */
    int active;                   /* lanes with queued or running jobs */
    struct po_recent recent;      /* the two tenants that submitted last */
    pthread_t threads[PO_WORKERS_MAX];
    struct lane lanes[LANES];
};

/* The lane of tenant (an idle one to take when absent; the anonymous lane
 * for "" or when the table is full). Called locked. */
static struct lane *lane_of(struct po_workers *w, const char *tenant)
{
    if (!tenant || !tenant[0] || strlen(tenant) > PO_ID_MAX)
        return &w->anon;
    uint64_t h = po_runtime_hash(tenant);
    struct lane *idle = NULL;
    for (int k = 0; k < LANES; k++) {
        struct lane *l = &w->lanes[(h + (uint64_t)k) % LANES];
        bool busy = l->running > 0 || l->queued > 0;
        if (busy && strcmp(l->name, tenant) == 0)
            return l;
        if (!busy && !idle)
            idle = l;
        if (!l->used)
            break; /* never used: the tenant is not further along */
    }
    if (!idle)
        return &w->anon;
    if (strcmp(idle->name, tenant) != 0)
        PO_ASSERT(po_strcpy(idle->name, sizeof idle->name, tenant) == PO_OK);
    idle->used = true;
    return idle;
}

/* Whether another lane than l is active: has work now, or submitted
 * within recent_ms (called locked). */
static bool contended(const struct po_workers *w, const struct lane *l, int64_t now)
{
    int others = w->active - (l->running > 0 || l->queued > 0 ? 1 : 0);
    if (others > 0)
        return true;
    return po_recent_other(&w->recent, l->name, now, w->recent_ms); /* anon's name is "" */
}

/* Takes the next job round-robin from a lane under its share (any lane
 * when stopping); NULL when none may run now. Called locked. */
static struct job *next_job(struct po_workers *w, struct lane **from)
{
    int64_t now = po_mono_ms();
    for (int k = 0; k < w->nring; k++) {
        int at = (w->next + k) % w->nring;
        struct lane *l = w->ring[at];
        if (!w->stop && l->running >= w->share && contended(w, l, now))
            continue;
        struct job *j = l->head;
        l->head = j->next;
        if (!l->head)
            l->tail = NULL;
        l->queued--;
        l->running++;
        w->queued--;
        if (l->queued == 0) { /* out of the ring, the order of the rest kept */
            memmove(&w->ring[at], &w->ring[at + 1], (size_t)(w->nring - at - 1) * sizeof *w->ring);
            w->nring--;
            w->next = w->nring ? at % w->nring : 0;
        } else {
            w->next = (at + 1) % w->nring;
        }
        *from = l;
        return j;
    }
    return NULL;
}

static void *main_loop(void *arg)
{
    struct po_workers *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        struct lane *l = NULL;
        struct job *j = next_job(w, &l);
        if (!j) {
            if (w->stop && w->queued == 0)
                break; /* stopping, and nothing left */
            if (w->queued == 0) {
                pthread_cond_wait(&w->cv, &w->mu);
                continue;
            }
            /* Jobs wait in capped lanes: a cap lifts when a lane goes idle
             * or its recency ends, which nobody signals. */
            struct timespec until = po_deadline_us((uint64_t)IDLE_WAIT_MS * 1000);
            (void)pthread_cond_timedwait(&w->cv, &w->mu, &until);
            continue;
        }
        pthread_mutex_unlock(&w->mu);
        j->fn(j->ctx);
        free(j);
        pthread_mutex_lock(&w->mu);
        l->running--;
        if (l->running == 0 && l->queued == 0)
            w->active--;
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

po_err po_workers_start(int nthreads, int queue_max, int share, int recent_ms,
                        struct po_workers **out)
{
    if (nthreads < 1 || nthreads > PO_WORKERS_MAX || queue_max < 1 || queue_max > PO_QUEUE_MAX ||
        share < 1 || recent_ms < 0)
        return PO_ERR_INVALID;
    struct po_workers *w = calloc(1, sizeof *w);
    if (!w)
        return PO_ERR_NOMEM;
    pthread_mutex_init(&w->mu, NULL);
    po_cond_init(&w->cv);
    w->queue_max = queue_max;
    w->share = share;
    w->recent_ms = recent_ms;
    for (; w->nthreads < nthreads; w->nthreads++)
        if (pthread_create(&w->threads[w->nthreads], NULL, main_loop, w) != 0) {
            po_workers_free(w);
            return PO_ERR_INTERNAL;
        }
    *out = w;
    return PO_OK;
}

po_err po_workers_submit(struct po_workers *w, const char *tenant, void (*fn)(void *ctx), void *ctx)
{
    struct job *j = malloc(sizeof *j);
    if (!j)
        return PO_ERR_NOMEM;
    *j = (struct job){fn, ctx, NULL};
    pthread_mutex_lock(&w->mu);
    struct lane *l = lane_of(w, tenant);
    if (w->stop || w->queued >= w->queue_max || l->queued >= PO_LANE_QUEUE_MAX) {
        pthread_mutex_unlock(&w->mu);
        free(j);
        return PO_ERR_LIMIT;
    }
    if (l->running == 0 && l->queued == 0)
        w->active++;
    if (l->tail)
        l->tail->next = j;
    else
        l->head = j;
    l->tail = j;
    if (l->queued++ == 0)
        w->ring[w->nring++] = l;
    w->queued++;
    if (l != &w->anon) /* recency is a tenant's (a probe is none) */
        po_recent_note(&w->recent, l->name, po_mono_ms());
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return PO_OK;
}

void po_workers_stop(struct po_workers *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    bool joined = w->stop;
    w->stop = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; !joined && i < w->nthreads; i++)
        pthread_join(w->threads[i], NULL);
}

void po_workers_free(struct po_workers *w)
{
    if (!w)
        return;
    po_workers_stop(w);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}
