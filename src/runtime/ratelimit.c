/*
 * ratelimit.c — token buckets by key (runtime.h): the console's sign-in
 * counts attempts per source address and per name before any password is
 * hashed.
 *
 * A fixed table of entries (no allocation after open), searched by a hash
 * over a window of PROBE slots; a key not found takes a free slot in its
 * window or, when the window is full, the slot used longest ago — so a
 * flood of new keys (spoofed names) evicts old buckets instead of growing
 * the table, and a refused key costs one lock and a few comparisons.
 * Tokens are counted in thousandths so that refills are exact integers.
 */
#include "runtime.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX 96
#define PROBE 8
#define MILLI 1000

struct bucket {
    char key[KEY_MAX]; /* "" when free */
    int64_t tokens_milli;
    int64_t last_ms; /* the refill was counted up to here */
};

struct po_ratelimit {
    pthread_mutex_t mu;
    int n;
    int64_t burst_milli, per_minute;
    struct bucket *b;
};

po_err po_ratelimit_open(int entries, int burst, int per_minute, struct po_ratelimit **out)
{
    PO_ASSERT(entries >= PROBE && burst >= 1 && per_minute >= 1);
    struct po_ratelimit *r = calloc(1, sizeof *r);
    if (!r || !(r->b = calloc((size_t)entries, sizeof *r->b))) {
        free(r);
        return PO_ERR_NOMEM;
    }
    pthread_mutex_init(&r->mu, NULL);
    r->n = entries;
    r->burst_milli = (int64_t)burst * MILLI;
    r->per_minute = per_minute;
    *out = r;
    return PO_OK;
}

void po_ratelimit_close(struct po_ratelimit *r)
{
    if (!r)
        return;
    pthread_mutex_destroy(&r->mu);
    free(r->b);
    free(r);
}

static uint64_t hash(const char *k)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *k; k++)
        h = (h ^ (unsigned char)*k) * 1099511628211ull;
    return h;
}

/* The key's bucket: found, or a free or the stalest slot of its window
 * made new (full). Under r->mu. */
static struct bucket *find(struct po_ratelimit *r, const char *key, int64_t now_ms)
{
    size_t start = (size_t)(hash(key) % (uint64_t)r->n);
    struct bucket *free_slot = NULL, *stalest = NULL;
    for (int i = 0; i < PROBE; i++) {
        struct bucket *b = &r->b[(start + (size_t)i) % (size_t)r->n];
        if (b->key[0] && strcmp(b->key, key) == 0)
            return b;
        if (!b->key[0] && !free_slot)
            free_slot = b;
        if (b->key[0] && (!stalest || b->last_ms < stalest->last_ms))
            stalest = b;
    }
    struct bucket *b = free_slot ? free_slot : stalest;
    memcpy(b->key, key, strlen(key) + 1);
    b->tokens_milli = r->burst_milli;
    b->last_ms = now_ms;
    return b;
}

bool po_ratelimit_take(struct po_ratelimit *r, const char *key, int64_t now_ms, int *retry_after_s)
{
    char k[KEY_MAX];
    size_t n = strlen(key ? key : "");
    if (n >= KEY_MAX)
        n = KEY_MAX - 1;
    memcpy(k, key ? key : "", n);
    k[n] = '\0';
    if (!k[0]) /* "" marks a free slot */
        memcpy(k, "-", 2);
    pthread_mutex_lock(&r->mu);
    struct bucket *b = find(r, k, now_ms);
    if (now_ms > b->last_ms) { /* refill: per_minute tokens a minute, up to burst */
        int64_t add = (now_ms - b->last_ms) * r->per_minute * MILLI / 60000;
        if (add > 0) {
            b->tokens_milli =
                b->tokens_milli + add > r->burst_milli ? r->burst_milli : b->tokens_milli + add;
            b->last_ms = now_ms;
        }
    }
    bool ok = b->tokens_milli >= MILLI;
    if (ok)
        b->tokens_milli -= MILLI;
    else {
        int64_t missing = MILLI - b->tokens_milli, ms = missing * 60000 / (r->per_minute * MILLI);
        *retry_after_s = (int)(ms / 1000 + 1);
    }
    pthread_mutex_unlock(&r->mu);
    return ok;
}
