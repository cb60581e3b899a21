/*
 * audit.c — the tamper-evident record of every verified callback (issue 28
 * item 3; migration 0017, docs/reliability.md "The callback record").
 *
 *   record  the request as received (headers and body, base64) with a digest
 *           over all its fields, written by the committer's batch that
 *           applies the callback (batch.c), so a credit never commits
 *           without its evidence;
 *   seal    every node, every two seconds: each tenant's records not yet in
 *           its chain get the next seq numbers under the tenant's
 *           callback_chain row, each hash = SHA-256(prev hash, seq, digest);
 *   prune   sealed records older than the retention go, the chain's base
 *           keeping the last one's hash, so what is left still links;
 *   verify  walks each tenant's chain from its base to its head and names
 *           the first broken link: a record whose content no longer matches
 *           its digest (changed), a seq missing (removed), a record not
 *           linked to the one before (moved, swapped, inserted), a head the
 *           chain does not reach (the newest removed), records left unsealed
 *           (inserted by hand, or no sealer) and, given anchors (heads saved
 *           elsewhere earlier), a chain rewritten as a whole.
 *
 * The links are keyed (issue 44 item 4): HMAC-SHA-256 with a key derived
 * from the master key (po_audit_key), from the chain's keyed_from on — so
 * someone who can write the database but has not the master key cannot
 * recompute a link after an edit. Without a master key (development) the
 * links are plain SHA-256 and verify says the chain is unkeyed. The base
 * moves only through a checkpoint (callback_checkpoint, migration 0020):
 * who, when, why, the old base and the new, MAC'd with the same key; the
 * first keyed seal of a chain adopts its base with one. verify requires the
 * checkpoints to run without a gap up to the current base, and anchors
 * (`payonce audit head`: head and base, published where the database's
 * writers cannot reach) catch a chain cut back or rewritten as a whole.
 */
#include "engine_int.h"

#include "../crypto/crypto.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char zero_hash[65] =
    "0000000000000000000000000000000000000000000000000000000000000000";

#define RECORD_TAG "payonce-callback-record/1"
#define VERIFY_PAGE 500
#define SEAL_TENANTS_MAX 256
#define PRUNE_MAX 5000 /* records pruned per tenant and round */

static po_err digest_of(const char *tenant, const char *request_id, const char *at,
                        const char *channel, const char *path, const char *out_trade_no,
                        const char *headers, const char *body, char out[65])
{
    char *msg = NULL;
    po_err rc = po_fmt_alloc(&msg, RECORD_TAG "\n%s\n%s\n%s\n%s\n%s\n%s\n%s\n%s", tenant,
                             request_id, at, channel, path, out_trade_no, headers, body);
    if (!rc)
        rc = po_sha256_hex(msg, strlen(msg), out);
    free(msg);
    return rc;
}

void po_audit_key(const unsigned char master[PO_MASTER_KEY_LEN],
                  unsigned char out[PO_AUDIT_KEY_LEN])
{
    static const char label[] = "payonce/callback-chain/v1";
    PO_ASSERT(po_hmac_sha256(master, PO_MASTER_KEY_LEN, label, sizeof label - 1, out) == PO_OK);
}

/* SHA-256 of msg, or HMAC-SHA-256 with key when not NULL; hex. */
static po_err mac_hex(const unsigned char *key, const char *msg, size_t n, char out[65])
{
    if (!key)
        return po_sha256_hex(msg, n, out);
    unsigned char m[32];
    po_err rc = po_hmac_sha256(key, PO_AUDIT_KEY_LEN, msg, n, m);
    for (int i = 0; !rc && i < 32; i++)
        (void)snprintf(out + 2 * i, 3, "%02x", m[i]);
    return rc;
}

/* A link of the chain: (HMAC-)SHA-256(prev "\n" seq "\n" digest), hex. */
static po_err link_of(const unsigned char *key, const char *prev, int64_t seq, const char *digest,
                      char out[65])
{
    char msg[65 + 24 + 65];
    int n = snprintf(msg, sizeof msg, "%s\n%" PRId64 "\n%s", prev, seq, digest);
    PO_ASSERT(n > 0 && (size_t)n < sizeof msg);
    return mac_hex(key, msg, (size_t)n, out);
}

/* ---- checkpoints: the only way the base moves ---- */

#define CHECKPOINT_TAG "payonce-chain-checkpoint/1"
struct checkpoint {
    int64_t cp_seq;
    const char *kind;
    int64_t old_seq;
    const char *old_hash;
    int64_t new_seq;
    const char *new_hash;
    int64_t head_seq;
    const char *at, *who, *why;
};

static po_err checkpoint_mac(const unsigned char *key, const char *tenant,
                             const struct checkpoint *c, char out[65])
{
    char *msg = NULL;
    po_err rc = po_fmt_alloc(&msg,
                             CHECKPOINT_TAG "\n%s\n%" PRId64 "\n%s\n%" PRId64 "\n%s\n%" PRId64
                                            "\n%s\n%" PRId64 "\n%s\n%s\n%s",
                             tenant, c->cp_seq, c->kind, c->old_seq, c->old_hash, c->new_seq,
                             c->new_hash, c->head_seq, c->at, c->who, c->why);
    if (!rc)
        rc = mac_hex(key, msg, strlen(msg), out);
    free(msg);
    return rc;
}

/* Writes the tenant's next checkpoint (in the caller's transaction, under
 * its chain row). */
static po_err checkpoint_add(struct po_store *s, const unsigned char *key, const char *tenant,
                             struct checkpoint *c, char *err, size_t errcap)
{
    struct po_rows r = {0};
    char now[PO_TIME_SIZE], mac[65];
    po_clock_now_iso(now, sizeof now);
    c->at = now;
    po_err rc = po_store_exec(s,
                              "SELECT COALESCE(MAX(cp_seq), 0) FROM callback_checkpoint WHERE"
                              " tenant_id = ?",
                              PO_PARAMS(PO_TEXT(tenant)), &r, NULL, err, errcap);
    if (!rc && (r.nrows != 1 || po_rows_i64(&r, 0, 0, &c->cp_seq)))
        rc = PO_ERR_STORE;
    po_rows_free(&r);
    c->cp_seq++;
    if (!rc)
        rc = checkpoint_mac(key, tenant, c, mac);
    if (!rc)
        rc = po_store_exec(
            s,
            "INSERT INTO callback_checkpoint (tenant_id, cp_seq, kind, old_base_seq,"
            " old_base_hash, new_base_seq, new_base_hash, head_seq, at, who, why, keyed, mac)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            PO_PARAMS(PO_TEXT(tenant), PO_I64(c->cp_seq), PO_TEXT(c->kind), PO_I64(c->old_seq),
                      PO_TEXT(c->old_hash), PO_I64(c->new_seq), PO_TEXT(c->new_hash),
                      PO_I64(c->head_seq), PO_TEXT(c->at), PO_TEXT(c->who), PO_TEXT(c->why),
                      PO_I64(key ? 1 : 0), PO_TEXT(mac)),
            NULL, NULL, err, errcap);
    c->at = NULL;
    return rc;
}

po_err po_audit_record_new(const struct po_audit_in *in, struct po_audit_record **out)
{
    *out = NULL;
    struct po_audit_record *r = calloc(1, sizeof *r);
    if (!r)
        return PO_ERR_NOMEM;
    char at[PO_TIME_SIZE];
    po_clock_iso_ms(in->received_ms, at, sizeof at);
    po_err rc = PO_OK;
    if (po_strcpy(r->tenant, sizeof r->tenant, in->tenant) ||
        po_strcpy(r->request_id, sizeof r->request_id, in->request_id) ||
        po_strcpy(r->received_at, sizeof r->received_at, at) ||
        po_strcpy(r->channel, sizeof r->channel, in->channel) ||
        po_strcpy(r->path, sizeof r->path, in->path) ||
        po_strcpy(r->out_trade_no, sizeof r->out_trade_no,
                  in->out_trade_no ? in->out_trade_no : ""))
        rc = PO_ERR_INVALID;
    if (!rc)
        rc = po_b64_encode((const unsigned char *)in->headers, in->headers_len, &r->headers);
    if (!rc)
        rc = po_b64_encode((const unsigned char *)in->body, in->body_len, &r->body);
    if (!rc)
        rc = digest_of(r->tenant, r->request_id, r->received_at, r->channel, r->path,
                       r->out_trade_no, r->headers, r->body, r->digest);
    if (rc) {
        po_audit_record_free(r);
        return rc;
    }
    *out = r;
    return PO_OK;
}

void po_audit_record_free(struct po_audit_record *r)
{
    if (!r)
        return;
    free(r->headers);
    free(r->body);
    free(r);
}

#define RECORD_COLUMNS 7 /* callback_record */
#define BODY_COLUMNS 4   /* callback_body */

po_err po_audit_insert(struct po_store *s, struct po_audit_record *const *r, size_t n, char *err,
                       size_t errcap)
{
    if (!n)
        return PO_OK;
    PO_ASSERT(n <= PO_BATCH_MAX);
    /* two row sets: each statement ships only its own columns (the bodies
     * once) */
    struct po_param *cells = malloc(n * (RECORD_COLUMNS + BODY_COLUMNS) * sizeof *cells),
                    *bodies = cells + n * RECORD_COLUMNS;
    if (!cells)
        return PO_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        struct po_param *c = &cells[i * RECORD_COLUMNS], *b = &bodies[i * BODY_COLUMNS];
        c[0] = b[0] = PO_TEXT(r[i]->tenant);
        c[1] = b[1] = PO_TEXT(r[i]->request_id);
        c[2] = PO_TEXT(r[i]->received_at);
        c[3] = PO_TEXT(r[i]->channel);
        c[4] = PO_TEXT(r[i]->path);
        c[5] = PO_TEXT(r[i]->out_trade_no);
        c[6] = PO_TEXT(r[i]->digest);
        b[2] = PO_TEXT(r[i]->headers);
        b[3] = PO_TEXT(r[i]->body);
    }
    struct po_rowset rs = {RECORD_COLUMNS, (int)n, cells}, bs = {BODY_COLUMNS, (int)n, bodies};
    po_err rc = po_store_exec(s,
                              "INSERT INTO callback_record (tenant_id, request_id, received_at,"
                              " channel, path, out_trade_no, digest) SELECT v.t, v.r, v.a, v.c,"
                              " v.p, v.o, v.d FROM ?{v: t text, r text, a text, c text, p text,"
                              " o text, d text}",
                              PO_PARAMS(PO_ROWS(&rs)), NULL, NULL, err, errcap);
    if (!rc)
        rc = po_store_exec(s,
                           "INSERT INTO callback_body (tenant_id, request_id, headers, body) SELECT"
                           " v.t, v.r, v.h, v.b FROM ?{v: t text, r text, h text, b text}",
                           PO_PARAMS(PO_ROWS(&bs)), NULL, NULL, err, errcap);
    free(cells);
    return rc;
}

/* ---- sealing ---- */

/* Seals up to limit of one tenant's unsealed records, oldest first, under
 * its chain row (taken first: two sealers of one tenant go one after the
 * other, the second seeing what the first sealed). */
/* The chain row of tenant, taken (its row lock: sealers and pruners of
 * one tenant go one after the other): seq, hash, base_seq, base_hash,
 * keyed_from ("" when NULL). */
static po_err chain_take(struct po_store *s, const char *tenant, struct po_rows *head, int64_t *seq,
                         int64_t *base, int64_t *keyed_from, char *err, size_t errcap)
{
    po_err rc = po_store_exec(s,
                              "UPDATE callback_chain SET seq = seq WHERE tenant_id = ? RETURNING"
                              " seq, hash, base_seq, base_hash, COALESCE(keyed_from, 0)",
                              PO_PARAMS(PO_TEXT(tenant)), head, NULL, err, errcap);
    if (!rc && (head->nrows != 1 || po_rows_i64(head, 0, 0, seq) || po_rows_i64(head, 0, 2, base) ||
                po_rows_i64(head, 0, 4, keyed_from) || !po_rows_get(head, 0, 1) ||
                !po_rows_get(head, 0, 3))) {
        po_errf(err, errcap, "callback_chain of %s unreadable", tenant);
        rc = PO_ERR_STORE;
    }
    return rc;
}

/* A keyed chain is sealed and pruned only with its key; an unkeyed one is
 * keyed by the first sealer that has the key (its base adopted by a
 * checkpoint). */
static po_err key_for(struct po_store *s, const unsigned char *key, const char *tenant, int64_t seq,
                      int64_t base, const char *base_hash, int64_t *keyed_from, char *err,
                      size_t errcap)
{
    if (*keyed_from && !key) {
        po_errf(err, errcap,
                "the callback chain of %s is keyed: it is sealed and pruned with the master key"
                " only",
                tenant);
        return PO_ERR_INVALID;
    }
    if (*keyed_from || !key)
        return PO_OK;
    *keyed_from = seq + 1;
    char why[96];
    (void)snprintf(why, sizeof why, "links keyed from record %" PRId64, seq + 1);
    struct checkpoint c = {.kind = "adopt",
                           .old_seq = base,
                           .old_hash = base_hash,
                           .new_seq = base,
                           .new_hash = base_hash,
                           .head_seq = seq,
                           .who = "payonce",
                           .why = why};
    po_err rc =
        po_store_exec(s, "UPDATE callback_chain SET keyed_from = ? WHERE tenant_id = ?",
                      PO_PARAMS(PO_I64(*keyed_from), PO_TEXT(tenant)), NULL, NULL, err, errcap);
    return rc ? rc : checkpoint_add(s, key, tenant, &c, err, errcap);
}

static po_err seal_tenant(struct po_store *s, const unsigned char *key, const char *tenant,
                          int limit, int64_t *sealed, char *err, size_t errcap)
{
    struct po_rows head = {0}, recs = {0};
    struct po_param *cells = NULL;
    char(*hashes)[2][65] = NULL;
    po_err rc = po_store_exec(s,
                              "INSERT INTO callback_chain (tenant_id, seq, hash, base_seq,"
                              " base_hash) VALUES (?, 0, ?, 0, ?) ON CONFLICT (tenant_id) DO"
                              " NOTHING",
                              PO_PARAMS(PO_TEXT(tenant), PO_TEXT(zero_hash), PO_TEXT(zero_hash)),
                              NULL, NULL, err, errcap);
    int64_t seq = 0, base = 0, keyed_from = 0;
    if (!rc)
        rc = chain_take(s, tenant, &head, &seq, &base, &keyed_from, err, errcap);
    if (!rc)
        rc = key_for(s, key, tenant, seq, base, po_rows_get(&head, 0, 3), &keyed_from, err, errcap);
    if (!rc)
        rc = po_store_exec(s,
                           "SELECT request_id, digest, out_trade_no FROM callback_record WHERE"
                           " tenant_id = ? AND seq IS NULL ORDER BY received_at, request_id"
                           " LIMIT ?",
                           PO_PARAMS(PO_TEXT(tenant), PO_I64(limit)), &recs, NULL, err, errcap);
    if (rc || recs.nrows == 0)
        goto out;
    cells = malloc((size_t)recs.nrows * 6 * sizeof *cells);
    hashes = malloc((size_t)recs.nrows * sizeof *hashes);
    if (!cells || !hashes) {
        rc = PO_ERR_NOMEM;
        goto out;
    }
    const char *prev = po_rows_get(&head, 0, 1);
    for (int i = 0; !rc && i < recs.nrows; i++) {
        const char *digest = po_rows_get(&recs, i, 1);
        PO_ASSERT(po_strcpy(hashes[i][0], 65, prev) == PO_OK);
        rc = link_of(keyed_from ? key : NULL, prev, seq + 1 + i, digest, hashes[i][1]);
        prev = hashes[i][1];
        struct po_param *c = &cells[i * 6];
        c[0] = PO_TEXT(tenant);
        c[1] = PO_TEXT(po_rows_get(&recs, i, 0));
        c[2] = PO_I64(seq + 1 + i);
        c[3] = PO_TEXT(hashes[i][0]);
        c[4] = PO_TEXT(hashes[i][1]);
        c[5] = PO_TEXT(po_rows_get(&recs, i, 2));
    }
    struct po_rowset rs = {6, recs.nrows, cells};
    /* the tenant from the row set too: both key columns then come from v,
     * so SQLite's planner looks each row up by the primary key instead of
     * scanning the tenant's records once per row (quadratic: 4 s per 1,000
     * records over 10,000). And the order: a planner that takes the
     * (tenant, order) index instead (PostgreSQL on a new database, its
     * statistics those of an empty table: 0.2-0.85 s a statement, every
     * record of the tenant read per row) then reads the order's few
     * records, not the tenant's. */
    if (!rc)
        rc = po_store_exec(s,
                           "UPDATE callback_record SET seq = v.s, prev_hash = v.p, hash = v.h"
                           " FROM ?{v: t text, r text, s int, p text, h text, o text} WHERE"
                           " callback_record.tenant_id = v.t AND callback_record.request_id = v.r"
                           " AND callback_record.out_trade_no = v.o",
                           PO_PARAMS(PO_ROWS(&rs)), NULL, NULL, err, errcap);
    if (!rc)
        rc = po_store_exec(s, "UPDATE callback_chain SET seq = ?, hash = ? WHERE tenant_id = ?",
                           PO_PARAMS(PO_I64(seq + recs.nrows), PO_TEXT(prev), PO_TEXT(tenant)),
                           NULL, NULL, err, errcap);
    if (!rc)
        *sealed += recs.nrows;
out:
    free(cells);
    free(hashes);
    po_rows_free(&recs);
    po_rows_free(&head);
    return rc;
}

po_err po_audit_seal(struct po_store *s, const unsigned char *key, int limit, int64_t *out_sealed,
                     char *err, size_t errcap)
{
    *out_sealed = 0;
    struct po_rows t = {0};
    po_err rc = PO_OK;
    if (key) { /* chains not keyed yet, with nothing new to seal: keyed now */
        struct po_rows k = {0};
        rc = po_store_exec(s,
                           "SELECT tenant_id FROM callback_chain WHERE keyed_from IS NULL ORDER BY"
                           " tenant_id LIMIT ?",
                           PO_PARAMS(PO_I64(SEAL_TENANTS_MAX)), &k, NULL, err, errcap);
        for (int i = 0; !rc && i < k.nrows; i++) {
            struct po_rows head = {0};
            int64_t seq = 0, base = 0, keyed_from = 0;
            rc = chain_take(s, po_rows_get(&k, i, 0), &head, &seq, &base, &keyed_from, err, errcap);
            if (!rc)
                rc = key_for(s, key, po_rows_get(&k, i, 0), seq, base, po_rows_get(&head, 0, 3),
                             &keyed_from, err, errcap);
            po_rows_free(&head);
        }
        po_rows_free(&k);
    }
    if (!rc)
        rc = po_store_exec(s,
                           /* MIN(received_at): only the partial index of the
                            * unsealed covers it, so that index is read, not
                            * every record */
                           "SELECT tenant_id, MIN(received_at) FROM callback_record WHERE"
                           " seq IS NULL GROUP BY tenant_id ORDER BY tenant_id LIMIT ?",
                           PO_PARAMS(PO_I64(SEAL_TENANTS_MAX)), &t, NULL, err, errcap);
    for (int i = 0; !rc && i < t.nrows && *out_sealed < limit; i++)
        rc = seal_tenant(s, key, po_rows_get(&t, i, 0), limit - (int)*out_sealed, out_sealed, err,
                         errcap);
    po_rows_free(&t);
    return rc;
}

/* ---- retention ---- */

po_err po_audit_prune(struct po_store *s, const unsigned char *key, const char *before,
                      int64_t *out_pruned, char *err, size_t errcap)
{
    *out_pruned = 0;
    struct po_rows t = {0};
    char hour_ago[PO_TIME_SIZE];
    po_clock_iso_ms(po_clock_now_ms() - PO_AUDIT_PRUNE_EVERY_S * 1000, hour_ago, sizeof hour_ago);
    /* per tenant, the records received before the cut from the oldest kept
     * on, in chain order (its index; no index on the time for a table written
     * by every callback): up to the first one received after the cut, at most
     * PRUNE_MAX a round. The last of them becomes the chain's base, through
     * a checkpoint — at most one a tenant every PO_AUDIT_PRUNE_EVERY_S, so
     * that the checkpoints stay few (records live that much longer). */
    po_err rc = po_store_exec(s,
                              "SELECT c.tenant_id, c.base_seq, c.seq FROM callback_chain c WHERE"
                              " c.seq > c.base_seq AND NOT EXISTS (SELECT 1 FROM"
                              " callback_checkpoint k WHERE k.tenant_id = c.tenant_id AND k.kind"
                              " = 'prune' AND k.at > ?) ORDER BY c.tenant_id",
                              PO_PARAMS(PO_TEXT(hour_ago)), &t, NULL, err, errcap);
    for (int i = 0; !rc && i < t.nrows; i++) {
        const char *tenant = po_rows_get(&t, i, 0);
        int64_t base = 0, upto = 0, n = 0, seq = 0, keyed_from = 0;
        struct po_rows h = {0}, old = {0}, head = {0};
        rc = po_rows_i64(&t, i, 1, &base);
        if (!rc)
            rc = po_store_exec(s,
                               "SELECT seq, received_at FROM callback_record WHERE tenant_id = ?"
                               " AND seq > ? ORDER BY seq LIMIT ?",
                               PO_PARAMS(PO_TEXT(tenant), PO_I64(base), PO_I64(PRUNE_MAX)), &old,
                               NULL, err, errcap);
        for (int k = 0; !rc && k < old.nrows && strcmp(po_rows_get(&old, k, 1), before) < 0; k++)
            rc = po_rows_i64(&old, k, 0, &upto);
        po_rows_free(&old);
        if (rc || upto == 0)
            continue;
        /* the chain row first: a sealer of this tenant waits */
        rc = chain_take(s, tenant, &head, &seq, &base, &keyed_from, err, errcap);
        if (!rc)
            rc = key_for(s, key, tenant, seq, base, po_rows_get(&head, 0, 3), &keyed_from, err,
                         errcap);
        if (!rc)
            rc =
                po_store_exec(s, "SELECT hash FROM callback_record WHERE tenant_id = ? AND seq = ?",
                              PO_PARAMS(PO_TEXT(tenant), PO_I64(upto)), &h, NULL, err, errcap);
        if (!rc && (h.nrows != 1 || !po_rows_get(&h, 0, 0) || upto <= base)) {
            po_errf(err, errcap, "record %" PRId64 " of %s vanished", upto, tenant);
            rc = PO_ERR_CONFLICT;
        }
        char why[96];
        (void)snprintf(why, sizeof why, "retention: records received before %.40s", before);
        struct checkpoint c = {.kind = "prune",
                               .old_seq = base,
                               .old_hash = rc ? "" : po_rows_get(&head, 0, 3),
                               .new_seq = upto,
                               .new_hash = rc ? "" : po_rows_get(&h, 0, 0),
                               .head_seq = seq,
                               .who = "payonce",
                               .why = why};
        if (!rc)
            rc = checkpoint_add(s, keyed_from ? key : NULL, tenant, &c, err, errcap);
        if (!rc)
            rc = po_store_exec(
                s,
                "UPDATE callback_chain SET base_seq = ?, base_hash = ? WHERE"
                " tenant_id = ?",
                PO_PARAMS(PO_I64(upto), PO_TEXT(po_rows_get(&h, 0, 0)), PO_TEXT(tenant)), NULL,
                NULL, err, errcap);
        if (!rc)
            rc = po_store_exec(s,
                               "DELETE FROM callback_body WHERE tenant_id = ? AND request_id IN"
                               " (SELECT request_id FROM callback_record WHERE tenant_id = ? AND"
                               " seq <= ?)",
                               PO_PARAMS(PO_TEXT(tenant), PO_TEXT(tenant), PO_I64(upto)), NULL,
                               NULL, err, errcap);
        if (!rc)
            rc = po_store_exec(s, "DELETE FROM callback_record WHERE tenant_id = ? AND seq <= ?",
                               PO_PARAMS(PO_TEXT(tenant), PO_I64(upto)), NULL, &n, err, errcap);
        po_rows_free(&h);
        po_rows_free(&head);
        *out_pruned += n;
    }
    po_rows_free(&t);
    return rc;
}

/* ---- verification ---- */

static void problem(struct po_audit_report *r, const char *tenant, const char *fmt, ...)
    PO_PRINTF(3, 4);
static void problem(struct po_audit_report *r, const char *tenant, const char *fmt, ...)
{
    r->broken++;
    if (r->nproblems >= PO_AUDIT_PROBLEMS_MAX)
        return;
    struct po_audit_problem *p = &r->problem[r->nproblems++];
    (void)snprintf(p->tenant, sizeof p->tenant, "%s", tenant);
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(p->what, sizeof p->what, fmt, ap);
    va_end(ap);
}

static const struct po_audit_anchor *anchor_at(const struct po_audit_anchor *a, int n,
                                               const char *tenant, int64_t seq)
{
    for (int i = 0; i < n; i++)
        if (a[i].seq == seq && strcmp(a[i].tenant, tenant) == 0)
            return &a[i];
    return NULL;
}

/* The digest of row i of a record query (the columns of po_audit_find):
 * PO_ERR_NOT_FOUND when a field is missing (its body removed). */
static po_err row_digest(const struct po_rows *p, int i, const char *tenant, char out[65])
{
    for (int c = 1; c <= 7; c++)
        if (!po_rows_get(p, i, c))
            return PO_ERR_NOT_FOUND;
    return digest_of(tenant, po_rows_get(p, i, 1), po_rows_get(p, i, 2), po_rows_get(p, i, 3),
                     po_rows_get(p, i, 4), po_rows_get(p, i, 5), po_rows_get(p, i, 6),
                     po_rows_get(p, i, 7), out);
}

/* One record of the walk; false when the chain breaks here (said). */
static bool check_row(const struct po_rows *p, int i, const char *tenant, int64_t expect,
                      const unsigned char *key, int64_t keyed_from, char prev[65],
                      const struct po_audit_anchor *anchors, int nanchors,
                      struct po_audit_report *r, po_err *rc)
{
    int64_t seq = 0;
    if ((*rc = po_rows_i64(p, i, 0, &seq)) != PO_OK)
        return false;
    const char *req = po_rows_get(p, i, 1), *order = po_rows_get(p, i, 5),
               *digest = po_rows_get(p, i, 8), *prev_hash = po_rows_get(p, i, 9),
               *hash = po_rows_get(p, i, 10);
    if (seq != expect) {
        if (expect == seq - 1)
            problem(r, tenant,
                    "record %" PRId64 " is missing (removed): the chain goes from %" PRId64
                    " to %" PRId64,
                    expect, expect - 1, seq);
        else
            problem(r, tenant,
                    "records %" PRId64 "..%" PRId64 " are missing (removed): the chain goes"
                    " from %" PRId64 " to %" PRId64,
                    expect, seq - 1, expect - 1, seq);
        return false;
    }
    char d[65], h[65];
    po_err drc = row_digest(p, i, tenant, d);
    if (drc == PO_ERR_NOT_FOUND) {
        problem(r, tenant,
                "record %" PRId64 " (request %s) lost a field or its body (changed or removed)",
                seq, req ? req : "?");
        return false;
    }
    if ((*rc = drc) != PO_OK)
        return false;
    if (!digest || strcmp(d, digest) != 0) {
        problem(r, tenant,
                "record %" PRId64 " (request %s, order %s) was changed: its content does not"
                " match its digest",
                seq, req, order);
        return false;
    }
    if (!prev_hash || strcmp(prev_hash, prev) != 0) {
        problem(r, tenant,
                "record %" PRId64 " (request %s, order %s) is not linked to record %" PRId64
                ": records were swapped, moved or inserted",
                seq, req, order, seq - 1);
        return false;
    }
    if ((*rc = link_of(keyed_from && seq >= keyed_from ? key : NULL, prev, seq, d, h)) != PO_OK)
        return false;
    if (!hash || strcmp(h, hash) != 0) {
        problem(r, tenant,
                "record %" PRId64 " (request %s, order %s): its hash does not match its content"
                " and place (changed after sealing, or linked without the chain's key)",
                seq, req, order);
        return false;
    }
    const struct po_audit_anchor *a = anchor_at(anchors, nanchors, tenant, seq);
    if (a) {
        r->anchors_checked++;
        if (strcmp(a->hash, h) != 0) {
            problem(r, tenant,
                    "record %" PRId64 " differs from the anchor saved earlier: the chain was"
                    " rewritten",
                    seq);
            return false;
        }
    }
    memcpy(prev, h, 65);
    r->records++;
    return true;
}

/* The tenant's checkpoints, checked: numbered without a gap, each MAC
 * right (keyed ones with key; an unkeyed one only before the chain was
 * keyed), each starting where the one before ended (the first at the
 * origin, or adopting the base a keyed chain began with); *base_seq and
 * base_hash (the chain row's) must be where the last one ended. false
 * (said) when not. anchors with a base: that base must be the chain's or
 * one a checkpoint moved on from. */
static bool checkpoints_ok(struct po_store *s, const unsigned char *key, const char *tenant,
                           int64_t base_seq, const char *base_hash, int64_t keyed_from,
                           struct po_audit_anchor *anchors, int nanchors, struct po_audit_report *r,
                           po_err *rc, char *err, size_t errcap)
{
    struct po_rows p = {0};
    *rc = po_store_exec(s,
                        "SELECT cp_seq, kind, old_base_seq, old_base_hash, new_base_seq,"
                        " new_base_hash, head_seq, at, who, why, keyed, mac FROM"
                        " callback_checkpoint WHERE tenant_id = ? ORDER BY cp_seq LIMIT ?",
                        PO_PARAMS(PO_TEXT(tenant), PO_I64(PO_AUDIT_CHECKPOINTS_MAX)), &p, NULL, err,
                        errcap);
    if (*rc)
        return false;
    int64_t at_seq = 0;
    char at_hash[65];
    memcpy(at_hash, zero_hash, 65);
    bool ok = true, adopted = false;
    for (int i = 0; ok && i < p.nrows; i++) {
        struct checkpoint c = {0};
        int64_t keyed = 0;
        if (po_rows_i64(&p, i, 0, &c.cp_seq) || po_rows_i64(&p, i, 2, &c.old_seq) ||
            po_rows_i64(&p, i, 4, &c.new_seq) || po_rows_i64(&p, i, 6, &c.head_seq) ||
            po_rows_i64(&p, i, 10, &keyed)) {
            *rc = PO_ERR_STORE;
            break;
        }
        c.kind = po_rows_get(&p, i, 1);
        c.old_hash = po_rows_get(&p, i, 3);
        c.new_hash = po_rows_get(&p, i, 5);
        c.at = po_rows_get(&p, i, 7);
        c.who = po_rows_get(&p, i, 8);
        c.why = po_rows_get(&p, i, 9);
        const char *mac = po_rows_get(&p, i, 11);
        char want[65] = "";
        bool adopt = strcmp(c.kind, "adopt") == 0;
        if (c.cp_seq != i + 1) {
            problem(r, tenant, "checkpoint %d is missing (removed)", i + 1);
            ok = false;
        } else if (keyed && !key) {
            problem(r, tenant,
                    "checkpoint %" PRId64 " is keyed: verify needs the master key to check it",
                    c.cp_seq);
            ok = false;
        } else if (!keyed && keyed_from && adopted) {
            problem(r, tenant,
                    "checkpoint %" PRId64 " is not keyed although the chain was keyed before it:"
                    " made by hand",
                    c.cp_seq);
            ok = false;
        } else if ((*rc = checkpoint_mac(keyed ? key : NULL, tenant, &c, want)) != PO_OK) {
            ok = false;
        } else if (strcmp(want, mac) != 0) {
            problem(r, tenant,
                    "checkpoint %" PRId64 " (%s, by %s at %s) does not match its MAC: made or"
                    " changed by hand",
                    c.cp_seq, c.kind, c.who, c.at);
            ok = false;
        } else if (adopt ? c.old_seq != c.new_seq || strcmp(c.old_hash, c.new_hash) != 0 ||
                               (i > 0 && (c.old_seq != at_seq || strcmp(c.old_hash, at_hash)))
                         : c.old_seq != at_seq || strcmp(c.old_hash, at_hash) != 0 ||
                               c.new_seq <= c.old_seq) {
            problem(r, tenant,
                    "checkpoint %" PRId64 " (%s) moves the base from %" PRId64
                    " but the base was at %" PRId64 ": the series was cut",
                    c.cp_seq, c.kind, c.old_seq, at_seq);
            ok = false;
        } else {
            if (adopt && keyed && keyed_from && c.head_seq + 1 != keyed_from) {
                problem(r, tenant,
                        "the chain says its links are keyed from record %" PRId64
                        ", its adoption from %" PRId64 ": changed by hand",
                        keyed_from, c.head_seq + 1);
                ok = false;
            }
            adopted |= adopt && keyed;
            at_seq = c.new_seq;
            PO_ASSERT(po_strcpy(at_hash, sizeof at_hash, c.new_hash) == PO_OK);
            r->checkpoints++;
            for (int a = 0; a < nanchors; a++) /* an anchor's base the chain moved on from */
                if (anchors[a].base_seq == c.old_seq && anchors[a].base_seq < base_seq &&
                    strcmp(anchors[a].tenant, tenant) == 0 &&
                    strcmp(anchors[a].base_hash, c.old_hash) == 0)
                    anchors[a].base_moved_ok = true;
        }
    }
    po_rows_free(&p);
    if (!ok || *rc)
        return false;
    if (keyed_from && !adopted) {
        problem(r, tenant,
                "the chain is keyed from record %" PRId64 " but no checkpoint adopted it: made"
                " by hand",
                keyed_from);
        return false;
    }
    if (base_seq != at_seq || strcmp(base_hash, at_hash) != 0) {
        problem(r, tenant,
                "the chain's base was moved to record %" PRId64 " without a checkpoint (the last"
                " checkpoint leaves it at %" PRId64 "): records at its start were removed",
                base_seq, at_seq);
        return false;
    }
    for (int a = 0; a < nanchors; a++) {
        const struct po_audit_anchor *x = &anchors[a];
        if (x->base_seq < 0 || strcmp(x->tenant, tenant) != 0)
            continue;
        if (x->base_seq > base_seq ||
            (x->base_seq == base_seq && strcmp(x->base_hash, base_hash)) ||
            (x->base_seq < base_seq && !x->base_moved_ok)) {
            problem(r, tenant,
                    "the chain's base (%" PRId64 ") is not the anchor's (%" PRId64
                    ") nor one a checkpoint moved on from it: the chain was re-based",
                    base_seq, x->base_seq);
            return false;
        }
    }
    return true;
}

static po_err verify_tenant(struct po_store *s, const unsigned char *key, const char *tenant,
                            const char *late_before, struct po_audit_anchor *anchors, int nanchors,
                            struct po_audit_report *r, char *err, size_t errcap)
{
    struct po_rows head = {0}, u = {0};
    po_err rc = po_store_exec(s,
                              "SELECT seq, hash, base_seq, base_hash, COALESCE(keyed_from, 0)"
                              " FROM callback_chain WHERE tenant_id = ?",
                              PO_PARAMS(PO_TEXT(tenant)), &head, NULL, err, errcap);
    if (rc)
        return rc;
    int64_t head_seq = 0, base_seq = 0, keyed_from = 0;
    char prev[65], head_hash[65] = "";
    memcpy(prev, zero_hash, 65);
    if (head.nrows == 1) {
        if (po_rows_i64(&head, 0, 0, &head_seq) || po_rows_i64(&head, 0, 2, &base_seq) ||
            po_rows_i64(&head, 0, 4, &keyed_from) ||
            po_strcpy(head_hash, sizeof head_hash, po_rows_get(&head, 0, 1)) ||
            po_strcpy(prev, sizeof prev, po_rows_get(&head, 0, 3)))
            rc = PO_ERR_STORE;
    }
    po_rows_free(&head);
    if (rc) {
        po_errf(err, errcap, "the chain row of %s is unreadable", tenant);
        return rc;
    }
    r->tenants++;
    bool whole = true;
    if (keyed_from && !key) {
        problem(r, tenant,
                "the chain is keyed (HMAC from record %" PRId64 "): verify it with the master key",
                keyed_from);
        whole = false;
    } else if (!keyed_from && head_seq > 0) {
        r->unkeyed++;
        if (key) {
            problem(r, tenant,
                    "the chain is not keyed: sealed only without the master key so far (run serve"
                    " or `payonce audit seal` with it once), or turned back to plain links by"
                    " hand");
            whole = false;
        }
    }
    if (whole)
        whole = checkpoints_ok(s, key, tenant, base_seq, prev, keyed_from, anchors, nanchors, r,
                               &rc, err, errcap);
    int64_t expect = base_seq + 1;
    while (whole && !rc) {
        struct po_rows p = {0};
        rc = po_store_exec(s,
                           "SELECT r.seq, r.request_id, r.received_at, r.channel, r.path,"
                           " r.out_trade_no, b.headers, b.body, r.digest, r.prev_hash, r.hash FROM"
                           " callback_record r LEFT JOIN callback_body b ON b.tenant_id ="
                           " r.tenant_id AND b.request_id = r.request_id WHERE r.tenant_id = ? AND"
                           " r.seq >= ? ORDER BY r.seq LIMIT ?",
                           PO_PARAMS(PO_TEXT(tenant), PO_I64(expect), PO_I64(VERIFY_PAGE)), &p,
                           NULL, err, errcap);
        if (rc)
            break;
        for (int i = 0; whole && i < p.nrows; i++) {
            whole =
                check_row(&p, i, tenant, expect, key, keyed_from, prev, anchors, nanchors, r, &rc);
            expect++;
        }
        bool last = p.nrows < VERIFY_PAGE;
        po_rows_free(&p);
        if (last)
            break;
    }
    if (rc)
        return rc;
    if (whole && expect - 1 != head_seq)
        problem(r, tenant,
                expect - 1 < head_seq
                    ? "the chain ends at record %" PRId64 " but its head is record %" PRId64
                      ": the newest records were removed"
                    : "the chain goes on to record %" PRId64 " past its head %" PRId64
                      ": records were inserted by hand",
                expect - 1, head_seq);
    else if (whole && head_seq > base_seq && strcmp(prev, head_hash) != 0)
        problem(r, tenant, "the chain's head hash is not its newest record's: changed by hand");
    for (int i = 0; whole && i < nanchors; i++)
        if (strcmp(anchors[i].tenant, tenant) == 0 &&
            (anchors[i].seq > head_seq || anchors[i].seq <= base_seq)) {
            if (anchors[i].seq > head_seq)
                problem(r, tenant,
                        "the anchor's record %" PRId64 " is past the chain's head %" PRId64
                        ": records were removed",
                        anchors[i].seq, head_seq);
            else
                r->anchors_pruned++;
        }
    rc = po_store_exec(s,
                       "SELECT COUNT(*), COALESCE(SUM(CASE WHEN received_at < ? THEN 1 ELSE 0"
                       " END), 0) FROM callback_record WHERE tenant_id = ? AND seq IS NULL",
                       PO_PARAMS(PO_TEXT(late_before), PO_TEXT(tenant)), &u, NULL, err, errcap);
    int64_t unsealed = 0, late = 0;
    if (!rc && (po_rows_i64(&u, 0, 0, &unsealed) || po_rows_i64(&u, 0, 1, &late)))
        rc = PO_ERR_STORE;
    po_rows_free(&u);
    r->unsealed += unsealed;
    if (!rc && late)
        problem(r, tenant,
                "%" PRId64 " record(s) received before %s are not sealed: no node is sealing,"
                " or they were inserted by hand",
                late, late_before);
    return rc;
}

po_err po_audit_verify(struct po_store *s, const unsigned char *key, const char *tenant,
                       const char *late_before, struct po_audit_anchor *anchors, int nanchors,
                       struct po_audit_report *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    struct po_rows t = {0};
    po_err rc = po_store_begin_read(s, err, errcap);
    if (rc)
        return rc;
    if (tenant)
        rc = po_store_exec(s,
                           "SELECT ? WHERE EXISTS (SELECT 1 FROM callback_chain WHERE tenant_id"
                           " = ?) OR EXISTS (SELECT 1 FROM callback_record WHERE tenant_id = ?)",
                           PO_PARAMS(PO_TEXT(tenant), PO_TEXT(tenant), PO_TEXT(tenant)), &t, NULL,
                           err, errcap);
    else
        rc = po_store_exec(s,
                           "SELECT tenant_id FROM callback_chain UNION SELECT DISTINCT tenant_id"
                           " FROM callback_record WHERE seq IS NULL ORDER BY 1",
                           PO_NO_PARAMS, &t, NULL, err, errcap);
    for (int i = 0; !rc && i < t.nrows; i++)
        rc = verify_tenant(s, key, po_rows_get(&t, i, 0), late_before, anchors, nanchors, out, err,
                           errcap);
    po_rows_free(&t);
    po_store_rollback(s);
    return rc;
}

po_err po_audit_heads(struct po_store *s, struct po_rows *out, char *err, size_t errcap)
{
    return po_store_exec(s,
                         "SELECT tenant_id, seq, hash, base_seq, base_hash,"
                         " COALESCE(keyed_from, 0) FROM callback_chain ORDER BY tenant_id",
                         PO_NO_PARAMS, out, NULL, err, errcap);
}

po_err po_audit_find(struct po_store *s, const char *tenant, const char *out_trade_no,
                     const char *request_id, int64_t seq, struct po_rows *out, char *err,
                     size_t errcap)
{
    return po_store_exec(
        s,
        "SELECT r.seq, r.request_id, r.received_at, r.channel, r.path, r.out_trade_no,"
        " b.headers, b.body, r.digest, r.prev_hash, r.hash, COALESCE((SELECT c.keyed_from FROM"
        " callback_chain c WHERE c.tenant_id = r.tenant_id), 0) FROM callback_record r LEFT JOIN"
        " callback_body b ON b.tenant_id = r.tenant_id AND b.request_id = r.request_id WHERE"
        " r.tenant_id = ? AND (r.out_trade_no = ? OR r.request_id = ? OR r.seq = ?) ORDER BY"
        " r.received_at, r.request_id LIMIT 100",
        PO_PARAMS(PO_TEXT(tenant), out_trade_no ? PO_TEXT(out_trade_no) : PO_NULLP,
                  request_id ? PO_TEXT(request_id) : PO_NULLP, seq > 0 ? PO_I64(seq) : PO_NULLP),
        out, NULL, err, errcap);
}

po_err po_audit_row_ok(const struct po_rows *p, int i, const char *tenant, const unsigned char *key,
                       bool *out_ok)
{
    *out_ok = false;
    int64_t seq = 0;
    char d[65], h[65];
    po_err rc = row_digest(p, i, tenant, d);
    if (rc == PO_ERR_NOT_FOUND || !po_rows_get(p, i, 8))
        return PO_OK; /* a field gone: not intact */
    if (rc || strcmp(d, po_rows_get(p, i, 8)) != 0)
        return rc;
    if (!po_rows_get(p, i, 0)) { /* not sealed yet: the digest is all there is */
        *out_ok = true;
        return PO_OK;
    }
    if (!po_rows_get(p, i, 9) || !po_rows_get(p, i, 10) || po_rows_i64(p, i, 0, &seq))
        return PO_OK;
    int64_t keyed_from = 0;
    if (po_rows_i64(p, i, 11, &keyed_from))
        return PO_OK;
    if (keyed_from && seq >= keyed_from && !key)
        return PO_OK; /* a keyed link: not checkable here */
    if ((rc = link_of(keyed_from && seq >= keyed_from ? key : NULL, po_rows_get(p, i, 9), seq, d,
                      h)) == PO_OK)
        *out_ok = strcmp(h, po_rows_get(p, i, 10)) == 0;
    return rc;
}
