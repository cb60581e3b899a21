/*
 * workers.c — a bounded pool of threads for the work a request thread must
 * not do itself because it blocks: reading the database (tenant API
 * requests, loading a channel account), waiting for the committer on
 * behalf of a blocking caller. The event threads of the HTTP front hand
 * such work here and go on serving other connections.
 *
 * The queue is bounded (PO_QUEUE_MAX): submit refuses beyond it, and the
 * request is answered "try again" at once instead of waiting unbounded.
 */
#include "service.h"

#include <pthread.h>
#include <stdlib.h>

struct job {
    void (*fn)(void *ctx);
    void *ctx;
    struct job *next;
};

struct po_workers {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job *head, *tail;
    int queued, queue_max, nthreads;
    bool stop;
    pthread_t threads[PO_WORKERS_MAX];
};

static void *main_loop(void *arg)
{
    struct po_workers *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->head && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->head)
            break; /* stopping, and nothing left */
        struct job *j = w->head;
        w->head = j->next;
        if (!w->head)
            w->tail = NULL;
        w->queued--;
        pthread_mutex_unlock(&w->mu);
        j->fn(j->ctx);
        free(j);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

po_err po_workers_start(int nthreads, int queue_max, struct po_workers **out)
{
    if (nthreads < 1 || nthreads > PO_WORKERS_MAX || queue_max < 1 || queue_max > PO_QUEUE_MAX)
        return PO_ERR_INVALID;
    struct po_workers *w = calloc(1, sizeof *w);
    if (!w)
        return PO_ERR_NOMEM;
    pthread_mutex_init(&w->mu, NULL);
    po_cond_init(&w->cv);
    w->queue_max = queue_max;
    for (; w->nthreads < nthreads; w->nthreads++)
        if (pthread_create(&w->threads[w->nthreads], NULL, main_loop, w) != 0) {
            po_workers_free(w);
            return PO_ERR_INTERNAL;
        }
    *out = w;
    return PO_OK;
}

po_err po_workers_submit(struct po_workers *w, void (*fn)(void *ctx), void *ctx)
{
    struct job *j = malloc(sizeof *j);
    if (!j)
        return PO_ERR_NOMEM;
    *j = (struct job){fn, ctx, NULL};
    pthread_mutex_lock(&w->mu);
    if (w->stop || w->queued >= w->queue_max) {
        pthread_mutex_unlock(&w->mu);
        free(j);
        return PO_ERR_LIMIT;
    }
    if (w->tail)
        w->tail->next = j;
    else
        w->head = j;
    w->tail = j;
    w->queued++;
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
