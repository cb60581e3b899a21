/*
 * bulkhead.c — bounded work in flight, per tenant and in all, that is
 * work-conserving: a tenant alone may use every slot (most deployments
 * have one tenant, or a few); the per-tenant limit bites only while
 * another tenant is active — holds a slot now, or asked for one within
 * the last recent_ms — so one tenant's burst (or a channel API that stops
 * answering one tenant's refunds) takes at most its share exactly when
 * someone else needs the rest. A slot is taken with po_bulkhead_enter
 * (false: over a limit — the caller answers at once, never waits) and
 * given back with po_bulkhead_leave.
 *
 * The bound a newcomer sees: its first request is admitted (it holds
 * nothing, so it is under its share) as soon as it reaches the bulkhead;
 * from then on, for recent_ms after its last request, every other tenant
 * is held to its per-tenant share.
 */
#include "runtime_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOTS 4096 /* tenants tracked at once (open addressing) */
#define HINTS 1024 /* hint -> tenant entries (direct-mapped, overwritten) */

struct slot {
    char tenant[PO_ID_MAX + 1];
    int n;
};

/* A credential's identifier (an API key's key_id) and the tenant it last
 * authenticated as. */
struct hint {
    char key[PO_APIKEY_ID_LEN + 1];
    char tenant[PO_ID_MAX + 1];
};

struct po_bulkhead {
    pthread_mutex_t mu;
    struct hint hints[HINTS];
    int per_tenant, total, in_flight;
    int holders; /* tenants holding a slot now */
    int64_t recent_ms;
    struct po_recent recent; /* the two tenants that asked last */
    uint64_t refused;
    struct slot s[SLOTS];
};

po_err po_bulkhead_open(int per_tenant, int total, int recent_ms, struct po_bulkhead **out)
{
    PO_ASSERT(per_tenant > 0 && total >= per_tenant && recent_ms >= 0);
    struct po_bulkhead *b = calloc(1, sizeof *b);
    if (!b)
        return PO_ERR_NOMEM;
    pthread_mutex_init(&b->mu, NULL);
    b->per_tenant = per_tenant;
    b->total = total;
    b->recent_ms = recent_ms;
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
    uint64_t h = po_runtime_hash(tenant);
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

/* Whether a tenant other than this one asked within recent_ms (under mu). */
static bool others_asked(const struct po_bulkhead *b, const char *tenant, int64_t now)
{
    return po_recent_other(&b->recent, tenant, now, b->recent_ms);
}

/* Over its share while another tenant is active (under mu). */
static bool over_share(struct po_bulkhead *b, const struct slot *s, bool others_asked)
{
    if (s->n < b->per_tenant)
        return false;
    int other_holders = b->holders - (s->n > 0 ? 1 : 0);
    return other_holders > 0 || others_asked;
}

void po_bulkhead_hint(struct po_bulkhead *b, const char *hint, const char *tenant)
{
    if (!b || strlen(hint) > PO_APIKEY_ID_LEN || strlen(tenant) > PO_ID_MAX)
        return;
    pthread_mutex_lock(&b->mu);
    struct hint *e = &b->hints[po_runtime_hash(hint) % HINTS];
    PO_ASSERT(po_strcpy(e->key, sizeof e->key, hint) == PO_OK);
    PO_ASSERT(po_strcpy(e->tenant, sizeof e->tenant, tenant) == PO_OK);
    pthread_mutex_unlock(&b->mu);
}

bool po_bulkhead_hint_over_share(struct po_bulkhead *b, const char *hint)
{
    if (!b || !hint[0] || strlen(hint) > PO_APIKEY_ID_LEN)
        return false;
    pthread_mutex_lock(&b->mu);
    const struct hint *e = &b->hints[po_runtime_hash(hint) % HINTS];
    bool over = false;
    if (strcmp(e->key, hint) == 0) {
        const char *t = e->tenant;
        struct slot *s = find(b, t);
        over = s && s->n > 0 && strcmp(s->tenant, t) == 0 &&
               over_share(b, s, others_asked(b, t, po_mono_ms()));
        if (over)
            b->refused++;
    }
    pthread_mutex_unlock(&b->mu);
    return over;
}

void po_bulkhead_hinted(struct po_bulkhead *b, const char *hint, char *out, size_t cap)
{
    PO_ASSERT(cap > 0);
    out[0] = '\0';
    if (!b || !hint[0] || strlen(hint) > PO_APIKEY_ID_LEN)
        return;
    pthread_mutex_lock(&b->mu);
    const struct hint *e = &b->hints[po_runtime_hash(hint) % HINTS];
    if (strcmp(e->key, hint) == 0 && po_strcpy(out, cap, e->tenant) != PO_OK)
        out[0] = '\0';
    pthread_mutex_unlock(&b->mu);
}

bool po_bulkhead_enter(struct po_bulkhead *b, const char *tenant)
{
    if (!b)
        return true;
    pthread_mutex_lock(&b->mu);
    int64_t now = po_mono_ms();
    po_recent_note(&b->recent, tenant, now);
    struct slot *s = b->in_flight < b->total ? find(b, tenant) : NULL;
    /* Over its share: only while nobody else is active. */
    bool ok = s != NULL && !over_share(b, s, others_asked(b, tenant, now));
    if (ok) {
        if (s->n == 0) {
            PO_ASSERT(po_strcpy(s->tenant, sizeof s->tenant, tenant) == PO_OK);
            b->holders++;
        }
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
    if (s->n == 0)
        b->holders--;
    PO_ASSERT(b->in_flight >= 0 && b->holders >= 0);
    pthread_mutex_unlock(&b->mu);
}

uint64_t po_bulkhead_refused(struct po_bulkhead *b)
{
    pthread_mutex_lock(&b->mu);
    uint64_t n = b->refused;
    pthread_mutex_unlock(&b->mu);
    return n;
}
