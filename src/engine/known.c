/*
 * known.c — the committer's table of committed events (engine_int.h,
 * docs/internals.md "Redeliveries answered from memory").
 *
 * An entry is the SHA-256 of an event's identity and business fields (its
 * key, order, amount, currency, merchant: everything the engine's answer to
 * a redelivery depends on), put there only after the batch that answered
 * the event applied or duplicate committed. A hit therefore means "this
 * very event was committed", with a digest's certainty, not a key's.
 *
 * Layout: 4-way sets, each under one of KNOWN_STRIPES locks; a full set
 * replaces its entries in turn. Emptying is O(1): every entry carries the
 * generation it was put in, and only the current generation's count.
 */
#include "engine_int.h"

#include "../crypto/crypto.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define KNOWN_WAYS 4
#define KNOWN_STRIPES 64

struct known_entry {
    unsigned char digest[32];
    uint32_t gen; /* 0: never used */
};

struct known_set {
    struct known_entry e[KNOWN_WAYS];
    uint8_t next; /* the way a full set replaces next */
};

struct po_known {
    size_t nsets;
    struct known_set *sets;
    atomic_uint gen;
    pthread_mutex_t mu[KNOWN_STRIPES];
};

po_err po_known_new(int capacity, struct po_known **out)
{
    *out = NULL;
    if (capacity <= 0)
        return PO_OK;
    struct po_known *k = calloc(1, sizeof *k);
    if (!k)
        return PO_ERR_NOMEM;
    k->nsets = ((size_t)capacity + KNOWN_WAYS - 1) / KNOWN_WAYS;
    k->sets = calloc(k->nsets, sizeof *k->sets);
    if (!k->sets) {
        free(k);
        return PO_ERR_NOMEM;
    }
    atomic_init(&k->gen, 1);
    for (int i = 0; i < KNOWN_STRIPES; i++)
        pthread_mutex_init(&k->mu[i], NULL);
    *out = k;
    return PO_OK;
}

void po_known_free(struct po_known *k)
{
    if (!k)
        return;
    for (int i = 0; i < KNOWN_STRIPES; i++)
        pthread_mutex_destroy(&k->mu[i]);
    free(k->sets);
    free(k);
}

bool po_known_eligible(const struct po_event *ev)
{
    /* A cumulative refund amount is resolved against the refunds recorded
     * so far, and the operator's two switches name decisions of their own:
     * those always go to a batch. */
    return !ev->amount_is_cumulative && !ev->accept_after_close && !ev->park_in_suspense;
}

static void put_field(unsigned char *buf, size_t cap, size_t *at, const char *s)
{
    size_t n = strlen(s);
    PO_ASSERT(*at + n + 1 <= cap);
    memcpy(buf + *at, s, n + 1); /* with its NUL: fields cannot run together */
    *at += n + 1;
}

/* The digest of what the engine's answer to ev depends on. */
static po_err digest(const struct po_event *ev, unsigned char out[32])
{
    unsigned char buf[PO_KEY_SIZE + 8 * (PO_ID_MAX + 1) + 64];
    char key[PO_KEY_SIZE], amount[24];
    size_t at = 0;
    po_err rc = po_event_key(ev, key, sizeof key);
    if (rc)
        return rc;
    (void)snprintf(amount, sizeof amount, "%lld", (long long)ev->amount_minor);
    const char *fields[] = {
        ev->tenant,   key,          ev->channel,       ev->channel_txn_id,    ev->out_trade_no,
        ev->merchant, ev->currency, ev->out_refund_no, ev->channel_refund_id, ev->receiver,
        amount};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        put_field(buf, sizeof buf, &at, fields[i]);
    return po_sha256(buf, at, out);
}

static struct known_set *set_of(struct po_known *k, const unsigned char d[32], pthread_mutex_t **mu)
{
    uint64_t h;
    memcpy(&h, d, sizeof h);
    size_t i = (size_t)(h % k->nsets);
    *mu = &k->mu[i % KNOWN_STRIPES];
    return &k->sets[i];
}

void po_known_put(struct po_known *k, const struct po_event *ev)
{
    unsigned char d[32];
    if (!k || !po_known_eligible(ev) || digest(ev, d) != PO_OK)
        return; /* not remembered: its redeliveries go to a batch */
    pthread_mutex_t *mu;
    struct known_set *set = set_of(k, d, &mu);
    uint32_t gen = atomic_load(&k->gen);
    if (gen == 0)
        return; /* being wiped (po_known_clear) */
    pthread_mutex_lock(mu);
    int way = -1;
    for (int i = 0; i < KNOWN_WAYS && way < 0; i++)
        if (set->e[i].gen == gen && memcmp(set->e[i].digest, d, sizeof d) == 0)
            way = i; /* there already */
    for (int i = 0; i < KNOWN_WAYS && way < 0; i++)
        if (set->e[i].gen != gen)
            way = i; /* a free way (never used, or from before an emptying) */
    if (way < 0) {
        way = set->next;
        set->next = (uint8_t)((set->next + 1) % KNOWN_WAYS);
    }
    memcpy(set->e[way].digest, d, sizeof d);
    set->e[way].gen = gen;
    pthread_mutex_unlock(mu);
}

bool po_known_has(struct po_known *k, const struct po_event *ev)
{
    unsigned char d[32];
    if (!k || !po_known_eligible(ev) || digest(ev, d) != PO_OK)
        return false;
    pthread_mutex_t *mu;
    struct known_set *set = set_of(k, d, &mu);
    uint32_t gen = atomic_load(&k->gen);
    bool hit = false;
    if (gen == 0)
        return false; /* being wiped (po_known_clear) */
    pthread_mutex_lock(mu);
    for (int i = 0; i < KNOWN_WAYS && !hit; i++)
        hit = set->e[i].gen == gen && memcmp(set->e[i].digest, d, sizeof d) == 0;
    pthread_mutex_unlock(mu);
    return hit;
}

void po_known_clear(struct po_known *k)
{
    if (!k)
        return;
    /* Entries of older generations are free ways; after 2^32 - 1 emptyings
     * the counter would meet entries of its first round again, so then the
     * sets are wiped for real (under every lock). */
    if (atomic_fetch_add(&k->gen, 1) + 1 != 0)
        return;
    for (int i = 0; i < KNOWN_STRIPES; i++)
        pthread_mutex_lock(&k->mu[i]);
    memset(k->sets, 0, k->nsets * sizeof *k->sets);
    atomic_store(&k->gen, 1);
    for (int i = KNOWN_STRIPES - 1; i >= 0; i--)
        pthread_mutex_unlock(&k->mu[i]);
}
