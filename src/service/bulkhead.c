/*
 * bulkhead.c — bounded work in flight, per tenant and in all: one tenant's
 * burst (or a channel API that stops answering one tenant's refunds) takes
 * at most its share, so every other tenant's callbacks keep their threads,
 * connections and deadlines. A slot is taken with po_bulkhead_enter (false:
 * over a limit — the caller answers at once, never waits) and given back
 * with po_bulkhead_leave.
 */
#include "service.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 4096 /* tenants tracked at once (open addressing) */

struct slot {
    char tenant[PO_ID_MAX + 1];
    int n;
};

struct po_bulkhead {
    pthread_mutex_t mu;
    int per_tenant, total, in_flight;
    uint64_t refused;
    struct slot s[SLOTS];
};

po_err po_bulkhead_open(int per_tenant, int total, struct po_bulkhead **out)
{
    PO_ASSERT(per_tenant > 0 && total >= per_tenant);
    struct po_bulkhead *b = calloc(1, sizeof *b);
    if (!b)
        return PO_ERR_NOMEM;
    pthread_mutex_init(&b->mu, NULL);
    b->per_tenant = per_tenant;
    b->total = total;
    *out = b;
    return PO_OK;
}

void po_bulkhead_close(struct po_bulkhead *b)
{
    if (!b)
        return;
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* The tenant's slot (an empty one to use when absent); NULL when full. */
static struct slot *find(struct po_bulkhead *b, const char *tenant)
{
    uint64_t h = UINT64_C(1469598103934665603);
    for (const unsigned char *p = (const unsigned char *)tenant; *p; p++)
        h = (h ^ *p) * UINT64_C(1099511628211);
    struct slot *empty = NULL;
    for (int k = 0; k < SLOTS; k++) {
        struct slot *s = &b->s[(h + (uint64_t)k) % SLOTS];
        if (s->n > 0 && strcmp(s->tenant, tenant) == 0)
            return s;
        if (s->n == 0 && !empty)
            empty = s;
        if (s->n == 0 && !s->tenant[0])
            break; /* never used: the tenant is not further along */
    }
    return empty;
}

bool po_bulkhead_enter(struct po_bulkhead *b, const char *tenant)
{
    if (!b)
        return true;
    pthread_mutex_lock(&b->mu);
    struct slot *s = b->in_flight < b->total ? find(b, tenant) : NULL;
    bool ok = s && s->n < b->per_tenant;
    if (ok) {
        if (s->n == 0)
            PO_ASSERT(po_strcpy(s->tenant, sizeof s->tenant, tenant) == PO_OK);
        s->n++;
        b->in_flight++;
    } else {
        b->refused++;
    }
    pthread_mutex_unlock(&b->mu);
    return ok;
}

void po_bulkhead_leave(struct po_bulkhead *b, const char *tenant)
{
    if (!b)
        return;
    pthread_mutex_lock(&b->mu);
    struct slot *s = find(b, tenant);
    PO_ASSERT(s && s->n > 0 && strcmp(s->tenant, tenant) == 0);
    s->n--;
    b->in_flight--;
    pthread_mutex_unlock(&b->mu);
}

uint64_t po_bulkhead_refused(struct po_bulkhead *b)
{
    pthread_mutex_lock(&b->mu);
    uint64_t n = b->refused;
    pthread_mutex_unlock(&b->mu);
    return n;
}
