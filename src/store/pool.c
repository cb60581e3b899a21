/*
 * pool.c — a bounded connection pool (see store.h). One mutex, one
 * condition variable; a slot is either free (maybe not yet connected) or
 * lent to exactly one thread.
 */
#include "store_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct po_store_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char url[1024];
    int size;
    bool keyed; /* po_store_pool_keyed_only */
    bool lent[PO_POOL_SIZE_MAX];
    struct po_store *conn[PO_POOL_SIZE_MAX]; /* NULL until first used */
};

po_err po_store_pool_open(const char *url, int size, struct po_store_pool **out, char *err,
                          size_t errcap)
{
    if (size < 1 || size > PO_POOL_SIZE_MAX) {
        po_errf(err, errcap, "pool size must be 1..%d", PO_POOL_SIZE_MAX);
        return PO_ERR_INVALID;
    }
    struct po_store_pool *p = calloc(1, sizeof *p);
    if (!p)
        return PO_ERR_NOMEM;
    if (po_strcpy(p->url, sizeof p->url, url)) {
        free(p);
        po_errf(err, errcap, "database URL too long");
        return PO_ERR_LIMIT;
    }
    pthread_mutex_init(&p->mu, NULL);
    po_cond_init(&p->cv);
    p->size = size;
    /* Open one connection now so that a bad URL fails at start-up. */
    po_err rc = po_store_open(url, &p->conn[0], err, errcap);
    if (rc) {
        po_store_pool_close(p);
        return rc;
    }
    *out = p;
    return PO_OK;
}

po_err po_store_pool_acquire(struct po_store_pool *p, int timeout_ms, struct po_store **out,
                             char *err, size_t errcap)
{
    struct timespec until = po_deadline_us((int64_t)timeout_ms * 1000);
    int slot = -1;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        /* Prefer a connected free slot. */
        for (int i = 0; i < p->size && slot < 0; i++)
            if (!p->lent[i] && p->conn[i])
                slot = i;
        for (int i = 0; i < p->size && slot < 0; i++)
            if (!p->lent[i])
                slot = i;
        if (slot >= 0 || pthread_cond_timedwait(&p->cv, &p->mu, &until) == ETIMEDOUT)
            break;
    }
    if (slot >= 0)
        p->lent[slot] = true;
    struct po_store *s = slot >= 0 ? p->conn[slot] : NULL;
    pthread_mutex_unlock(&p->mu);
    if (slot < 0) {
        po_errf(err, errcap, "no database connection free within %d ms", timeout_ms);
        return PO_ERR_TRANSIENT;
    }
    if (!s) {
        /* Connect outside the lock; publish the connection under it (other
         * threads scan conn[] for free connected slots). */
        po_err rc = po_store_open(p->url, &s, err, errcap);
        if (!rc && p->keyed)
            po_store_keyed_only(s);
        pthread_mutex_lock(&p->mu);
        if (rc)
            p->lent[slot] = false;
        else
            p->conn[slot] = s;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        if (rc)
            return PO_ERR_TRANSIENT;
    }
    *out = s;
    return PO_OK;
}

void po_store_pool_keyed_only(struct po_store_pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->keyed = true;
    for (int i = 0; i < p->size; i++)
        if (p->conn[i]) {
            PO_ASSERT(!p->lent[i]);
            po_store_keyed_only(p->conn[i]);
        }
    pthread_mutex_unlock(&p->mu);
}

void po_store_pool_release(struct po_store_pool *p, struct po_store *s)
{
    PO_ASSERT(!s->in_tx); /* a lent connection comes back outside any transaction */
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->size; i++)
        if (p->conn[i] == s) {
            PO_ASSERT(p->lent[i]);
            p->lent[i] = false;
        }
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void po_store_pool_close(struct po_store_pool *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->size; i++) {
        PO_ASSERT(!p->lent[i]);
        po_store_close(p->conn[i]);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
