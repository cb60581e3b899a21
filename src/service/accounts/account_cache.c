/*
 * account_cache.c — channel accounts held in memory, unsealed and with their
 * keys parsed once, for every thread of serve that needs one: callbacks on
 * the event threads and workers, and every outbound call (creating a
 * payment, closing, queries, refunds, bills, the keys refresh) on the
 * workers and the jobs thread (po_accounts_use). A loaded account is never
 * changed, so they share it: its OpenSSL keys are only read (sign and
 * verify take a context of their own each call).
 *
 * An entry is (tenant, channel) -> the loaded account and the stored
 * `version` it was loaded at (every `payonce channel set` bumps it).
 * Entries are reference-counted: a request keeps its reference while it
 * verifies, so replacing an entry never frees keys under a reader.
 *
 * A changed account takes effect with the very next outbound call (it
 * compares the stored version first, one indexed read) and the very next
 * callback, in this process and in every other gateway process over the
 * same database:
 *  - a callback that fails verification with the cached account (unknown
 *    serial, bad signature, decryption, merchant/app mismatch) makes the
 *    gateway compare the stored version (one indexed read) and, when it
 *    changed, reload and verify again: a new key or secret is accepted;
 *  - a callback that passed verification is applied only if the account
 *    it was verified with is still the stored version when its batch is
 *    applied (po_accounts_guard: one set-based read a batch, before the
 *    batch's transaction); otherwise it is verified again with the new
 *    account: an old key or secret is refused;
 *  - a sweep (every PO_ACCOUNT_SWEEP_S) drops entries whose stored version
 *    changed or whose row is gone, so memory follows the store.
 */
#include "account.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS 1024

struct po_account_ref {
    struct po_channel_account acct;
    /* its tenant, channel and stored version: the token of the committer's
     * guard, made once when loaded (stale unused) */
    struct po_guard_token id;
    atomic_int refs;
    uint64_t swept;              /* the sweep that last found it current */
    struct po_account_ref *next; /* bucket chain (cache's reference) */
};

struct po_accounts {
    pthread_mutex_t mu;
    struct po_account_ref *b[BUCKETS];
    int n;
    uint64_t sweeps;
    const unsigned char *master;
    /* accounts unsealed from the store into the cache, ever: what
     * /metrics shows as payonce_account_loads_total */
    atomic_int_fast64_t loads;
};

static unsigned bucket(const char *tenant, const char *channel)
{
    uint64_t h = UINT64_C(1469598103934665603);
    for (const unsigned char *p = (const unsigned char *)tenant; *p; p++)
        h = (h ^ *p) * UINT64_C(1099511628211);
    h = (h ^ '/') * UINT64_C(1099511628211);
    for (const unsigned char *p = (const unsigned char *)channel; *p; p++)
        h = (h ^ *p) * UINT64_C(1099511628211);
    return (unsigned)(h % BUCKETS);
}

po_err po_accounts_open(const unsigned char *master, struct po_accounts **out)
{
    struct po_accounts *a = calloc(1, sizeof *a);
    if (!a)
        return PO_ERR_NOMEM;
    pthread_mutex_init(&a->mu, NULL);
    a->master = master;
    *out = a;
    return PO_OK;
}

void po_accounts_release(struct po_account_ref *r)
{
    if (r && atomic_fetch_sub(&r->refs, 1) == 1) {
        po_channel_account_free(&r->acct);
        free(r);
    }
}

void po_accounts_close(struct po_accounts *a)
{
    if (!a)
        return;
    for (int i = 0; i < BUCKETS; i++)
        while (a->b[i]) {
            struct po_account_ref *r = a->b[i];
            a->b[i] = r->next;
            po_accounts_release(r);
        }
    pthread_mutex_destroy(&a->mu);
    free(a);
}

const struct po_channel_account *po_account_of(const struct po_account_ref *r)
{
    return &r->acct;
}

struct po_account_ref *po_accounts_get(struct po_accounts *a, const char *tenant,
                                       const char *channel)
{
    unsigned h = bucket(tenant, channel);
    pthread_mutex_lock(&a->mu);
    struct po_account_ref *r = a->b[h];
    while (r && (strcmp(r->id.tenant, tenant) != 0 || strcmp(r->id.channel, channel) != 0))
        r = r->next;
    if (r)
        atomic_fetch_add(&r->refs, 1);
    pthread_mutex_unlock(&a->mu);
    return r;
}

/* Unlinks the entry for (tenant, channel), if any (called locked). */
static void unlink_locked(struct po_accounts *a, const char *tenant, const char *channel)
{
    struct po_account_ref **pp = &a->b[bucket(tenant, channel)];
    while (*pp) {
        struct po_account_ref *r = *pp;
        if (strcmp(r->id.tenant, tenant) == 0 && strcmp(r->id.channel, channel) == 0) {
            *pp = r->next;
            a->n--;
            po_accounts_release(r);
            return;
        }
        pp = &r->next;
    }
}

/* Drops one whole bucket when the cache is full: bounded memory, and the
 * accounts dropped are simply loaded again when next used. */
static void make_room_locked(struct po_accounts *a, unsigned avoid)
{
    for (unsigned i = 1; a->n >= PO_ACCOUNT_CACHE_MAX && i < BUCKETS; i++) {
        unsigned k = (avoid + i) % BUCKETS;
        while (a->b[k]) {
            struct po_account_ref *r = a->b[k];
            a->b[k] = r->next;
            a->n--;
            po_accounts_release(r);
        }
    }
}

/* A reference unsealed from the store with master, its count at refs,
 * linked nowhere. */
static po_err ref_from_store(struct po_store *s, const unsigned char *master, const char *tenant,
                             const char *channel, int refs, struct po_account_ref **out, char *err,
                             size_t errcap)
{
    struct po_account_ref *r = calloc(1, sizeof *r);
    if (!r)
        return PO_ERR_NOMEM;
    po_err rc = PO_ERR_INVALID;
    if (po_strcpy(r->id.tenant, sizeof r->id.tenant, tenant) ||
        po_strcpy(r->id.channel, sizeof r->id.channel, channel)) {
        po_errf(err, errcap, "tenant or channel name too long");
        goto out;
    }
    rc = po_account_fetch_versioned(s, master, tenant, channel, &r->acct, &r->id.version, err,
                                    errcap);
    if (rc)
        goto out;
    atomic_store(&r->refs, refs);
    *out = r;
    r = NULL;
out:
    free(r);
    return rc;
}

po_err po_accounts_load(struct po_accounts *a, struct po_store *s, const char *tenant,
                        const char *channel, struct po_account_ref **out, char *err, size_t errcap)
{
    struct po_account_ref *r = NULL;
    /* the cache's reference and the caller's */
    po_err rc = ref_from_store(s, a->master, tenant, channel, 2, &r, err, errcap);
    if (rc)
        return rc;
    atomic_fetch_add(&a->loads, 1);
    unsigned h = bucket(tenant, channel);
    pthread_mutex_lock(&a->mu);
    unlink_locked(a, tenant, channel);
    make_room_locked(a, h);
    r->next = a->b[h];
    a->b[h] = r;
    a->n++;
    pthread_mutex_unlock(&a->mu);
    *out = r;
    return PO_OK;
}

po_err po_accounts_recheck(struct po_accounts *a, struct po_store *s, struct po_account_ref **ref,
                           bool *out_changed, char *err, size_t errcap)
{
    struct po_account_ref *r = *ref, *fresh = NULL;
    struct po_rows rows;
    po_err rc = po_store_exec(s,
                              "SELECT version FROM channel_account WHERE tenant_id = ? AND"
                              " channel = ?",
                              PO_PARAMS(PO_TEXT(r->id.tenant), PO_TEXT(r->id.channel)), &rows, NULL,
                              err, errcap);
    if (rc)
        return rc;
    int64_t v = -1;
    bool same = rows.nrows == 1 && po_rows_i64(&rows, 0, 0, &v) == PO_OK && v == r->id.version;
    po_rows_free(&rows);
    if (same) {
        *out_changed = false;
        return PO_OK;
    }
    rc = po_accounts_load(a, s, r->id.tenant, r->id.channel, &fresh, err, errcap);
    if (rc == PO_ERR_NOT_FOUND) {
        pthread_mutex_lock(&a->mu);
        unlink_locked(a, r->id.tenant, r->id.channel);
        pthread_mutex_unlock(&a->mu);
    }
    if (rc)
        return rc;
    po_accounts_release(r);
    *ref = fresh;
    *out_changed = true;
    return PO_OK;
}

po_err po_accounts_use(struct po_accounts *a, struct po_store *s, const unsigned char *master,
                       const char *tenant, const char *channel, struct po_account_ref **out,
                       char *err, size_t errcap)
{
    if (!a) /* nobody's cache: the offline CLI, the tests */
        return ref_from_store(s, master, tenant, channel, 1, out, err, errcap);
    struct po_account_ref *r = po_accounts_get(a, tenant, channel);
    if (!r)
        return po_accounts_load(a, s, tenant, channel, out, err, errcap);
    bool changed = false;
    po_err rc = po_accounts_recheck(a, s, &r, &changed, err, errcap);
    if (rc) {
        po_accounts_release(r);
        return rc;
    }
    *out = r;
    return PO_OK;
}

int64_t po_accounts_loads(struct po_accounts *a)
{
    return a ? (int64_t)atomic_load(&a->loads) : 0;
}

po_err po_accounts_sweep(struct po_accounts *a, struct po_store *s, int *out_dropped)
{
    struct po_rows rows;
    int dropped = 0;
    po_err rc = po_store_exec(s, "SELECT tenant_id, channel, version FROM channel_account",
                              PO_NO_PARAMS, &rows, NULL, NULL, 0);
    if (rc)
        return rc;
    pthread_mutex_lock(&a->mu);
    uint64_t sweep = ++a->sweeps;
    /* Mark what the store still has at the same version... */
    for (int k = 0; k < rows.nrows; k++) {
        const char *tenant = po_rows_get(&rows, k, 0), *channel = po_rows_get(&rows, k, 1);
        int64_t v = -1;
        if (po_rows_i64(&rows, k, 2, &v))
            continue;
        for (struct po_account_ref *r = a->b[bucket(tenant, channel)]; r; r = r->next)
            if (r->id.version == v && strcmp(r->id.tenant, tenant) == 0 &&
                strcmp(r->id.channel, channel) == 0)
                r->swept = sweep;
    }
    /* ...and drop the rest. */
    for (int i = 0; i < BUCKETS; i++) {
        struct po_account_ref **pp = &a->b[i];
        while (*pp) {
            struct po_account_ref *r = *pp;
            if (r->swept == sweep) {
                pp = &r->next;
                continue;
            }
            *pp = r->next;
            a->n--;
            dropped++;
            po_accounts_release(r);
        }
    }
    pthread_mutex_unlock(&a->mu);
    po_rows_free(&rows);
    if (out_dropped)
        *out_dropped = dropped;
    return PO_OK;
}

int64_t po_account_version(const struct po_account_ref *r)
{
    return r->id.version;
}

void po_accounts_token(const struct po_account_ref *r, struct po_guard_token *out)
{
    *out = r->id;
}

po_err po_accounts_guard(struct po_store *s, struct po_guard_token *t, size_t n, void *ctx)
{
    (void)ctx;
    PO_ASSERT(n <= PO_BATCH_MAX);
    struct po_param cells[PO_BATCH_MAX * 4];
    for (size_t i = 0; i < n; i++) {
        cells[4 * i] = PO_I64((int64_t)i);
        cells[4 * i + 1] = PO_TEXT(t[i].tenant);
        cells[4 * i + 2] = PO_TEXT(t[i].channel);
        cells[4 * i + 3] = PO_I64(t[i].version);
    }
    struct po_rowset rs = {4, (int)n, cells};
    struct po_rows rows;
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_store_exec(s,
                              "SELECT v.i FROM ?{v: i int, t text, c text, ver int} LEFT JOIN"
                              " channel_account a ON a.tenant_id = v.t AND a.channel = v.c"
                              " WHERE a.version IS NULL OR a.version <> v.ver",
                              PO_PARAMS(PO_ROWS(&rs)), &rows, NULL, err, sizeof err);
    if (rc) {
        po_log(PO_LOG_WARN, "channel account versions unreadable: %s", err);
        return rc;
    }
    for (int k = 0; k < rows.nrows; k++) {
        int64_t i = -1;
        if (po_rows_i64(&rows, k, 0, &i) == PO_OK && i >= 0 && (size_t)i < n)
            t[i].stale = true;
    }
    po_rows_free(&rows);
    return PO_OK;
}
