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
 * A chain with no secret is evidence against edits, not against someone who
 * rewrites every hash after an edit: that is what anchors are for (publish
 * `payonce audit head` where the database's writers cannot reach).
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

/* A link of the chain: SHA-256(prev "\n" seq "\n" digest), hex. */
static po_err link_of(const char *prev, int64_t seq, const char *digest, char out[65])
{
    char msg[65 + 24 + 65];
    int n = snprintf(msg, sizeof msg, "%s\n%" PRId64 "\n%s", prev, seq, digest);
    PO_ASSERT(n > 0 && (size_t)n < sizeof msg);
    return po_sha256_hex(msg, (size_t)n, out);
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
static po_err seal_tenant(struct po_store *s, const char *tenant, int limit, int64_t *sealed,
                          char *err, size_t errcap)
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
    if (!rc)
        rc = po_store_exec(s,
                           "UPDATE callback_chain SET seq = seq WHERE tenant_id = ? RETURNING"
                           " seq, hash",
                           PO_PARAMS(PO_TEXT(tenant)), &head, NULL, err, errcap);
    int64_t seq = 0;
    if (!rc && (head.nrows != 1 || po_rows_i64(&head, 0, 0, &seq) || !po_rows_get(&head, 0, 1))) {
        po_errf(err, errcap, "callback_chain of %s unreadable", tenant);
        rc = PO_ERR_STORE;
    }
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
        rc = link_of(prev, seq + 1 + i, digest, hashes[i][1]);
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

po_err po_audit_seal(struct po_store *s, int limit, int64_t *out_sealed, char *err, size_t errcap)
{
    *out_sealed = 0;
    struct po_rows t = {0};
    po_err rc = po_store_exec(s,
                              /* MIN(received_at): only the partial index of the
                               * unsealed covers it, so that index is read, not
                               * every record */
                              "SELECT tenant_id, MIN(received_at) FROM callback_record WHERE"
                              " seq IS NULL GROUP BY tenant_id ORDER BY tenant_id LIMIT ?",
                              PO_PARAMS(PO_I64(SEAL_TENANTS_MAX)), &t, NULL, err, errcap);
    for (int i = 0; !rc && i < t.nrows && *out_sealed < limit; i++)
        rc = seal_tenant(s, po_rows_get(&t, i, 0), limit - (int)*out_sealed, out_sealed, err,
                         errcap);
    po_rows_free(&t);
    return rc;
}

/* ---- retention ---- */

po_err po_audit_prune(struct po_store *s, const char *before, int64_t *out_pruned, char *err,
                      size_t errcap)
{
    *out_pruned = 0;
    struct po_rows t = {0};
    /* per tenant, the records received before the cut from the oldest kept
     * on, in chain order (its index; no index on the time for a table written
     * by every callback): up to the first one received after the cut, at most
     * PRUNE_MAX a round. The last of them becomes the chain's base. */
    po_err rc = po_store_exec(s,
                              "SELECT tenant_id, base_seq, seq FROM callback_chain WHERE seq >"
                              " base_seq ORDER BY tenant_id",
                              PO_NO_PARAMS, &t, NULL, err, errcap);
    for (int i = 0; !rc && i < t.nrows; i++) {
        const char *tenant = po_rows_get(&t, i, 0);
        int64_t base = 0, upto = 0, n = 0;
        struct po_rows h = {0}, old = {0};
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
        if (!rc) /* the chain row first: a sealer of this tenant waits */
            rc = po_store_exec(s, "UPDATE callback_chain SET seq = seq WHERE tenant_id = ?",
                               PO_PARAMS(PO_TEXT(tenant)), NULL, NULL, err, errcap);
        if (!rc)
            rc =
                po_store_exec(s, "SELECT hash FROM callback_record WHERE tenant_id = ? AND seq = ?",
                              PO_PARAMS(PO_TEXT(tenant), PO_I64(upto)), &h, NULL, err, errcap);
        if (!rc && (h.nrows != 1 || !po_rows_get(&h, 0, 0))) {
            po_errf(err, errcap, "record %" PRId64 " of %s vanished", upto, tenant);
            rc = PO_ERR_CONFLICT;
        }
        if (!rc)
            rc = po_store_exec(s,
                               "UPDATE callback_chain SET base_seq = ?, base_hash = ? WHERE"
                               " tenant_id = ? AND base_seq < ?",
                               PO_PARAMS(PO_I64(upto), PO_TEXT(po_rows_get(&h, 0, 0)),
                                         PO_TEXT(tenant), PO_I64(upto)),
                               NULL, NULL, err, errcap);
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
                      char prev[65], const struct po_audit_anchor *anchors, int nanchors,
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
    if ((*rc = link_of(prev, seq, d, h)) != PO_OK)
        return false;
    if (!hash || strcmp(h, hash) != 0) {
        problem(r, tenant,
                "record %" PRId64 " (request %s, order %s): its hash does not match its content"
                " and place (changed after sealing)",
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

static po_err verify_tenant(struct po_store *s, const char *tenant, const char *late_before,
                            const struct po_audit_anchor *anchors, int nanchors,
                            struct po_audit_report *r, char *err, size_t errcap)
{
    struct po_rows head = {0}, u = {0};
    po_err rc = po_store_exec(s,
                              "SELECT seq, hash, base_seq, base_hash FROM callback_chain WHERE"
                              " tenant_id = ?",
                              PO_PARAMS(PO_TEXT(tenant)), &head, NULL, err, errcap);
    if (rc)
        return rc;
    int64_t head_seq = 0, base_seq = 0;
    char prev[65], head_hash[65] = "";
    memcpy(prev, zero_hash, 65);
    if (head.nrows == 1) {
        if (po_rows_i64(&head, 0, 0, &head_seq) || po_rows_i64(&head, 0, 2, &base_seq) ||
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
    int64_t expect = base_seq + 1;
    bool whole = true;
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
            whole = check_row(&p, i, tenant, expect, prev, anchors, nanchors, r, &rc);
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

po_err po_audit_verify(struct po_store *s, const char *tenant, const char *late_before,
                       const struct po_audit_anchor *anchors, int nanchors,
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
        rc = verify_tenant(s, po_rows_get(&t, i, 0), late_before, anchors, nanchors, out, err,
                           errcap);
    po_rows_free(&t);
    po_store_rollback(s);
    return rc;
}

po_err po_audit_heads(struct po_store *s, struct po_rows *out, char *err, size_t errcap)
{
    return po_store_exec(s,
                         "SELECT tenant_id, seq, hash, base_seq FROM callback_chain ORDER BY"
                         " tenant_id",
                         PO_NO_PARAMS, out, NULL, err, errcap);
}

po_err po_audit_find(struct po_store *s, const char *tenant, const char *out_trade_no,
                     const char *request_id, int64_t seq, struct po_rows *out, char *err,
                     size_t errcap)
{
    return po_store_exec(
        s,
        "SELECT r.seq, r.request_id, r.received_at, r.channel, r.path, r.out_trade_no,"
        " b.headers, b.body, r.digest, r.prev_hash, r.hash FROM callback_record r LEFT JOIN"
        " callback_body b ON b.tenant_id = r.tenant_id AND b.request_id = r.request_id WHERE"
        " r.tenant_id = ? AND (r.out_trade_no = ? OR r.request_id = ? OR r.seq = ?) ORDER BY"
        " r.received_at, r.request_id LIMIT 100",
        PO_PARAMS(PO_TEXT(tenant), out_trade_no ? PO_TEXT(out_trade_no) : PO_NULLP,
                  request_id ? PO_TEXT(request_id) : PO_NULLP, seq > 0 ? PO_I64(seq) : PO_NULLP),
        out, NULL, err, errcap);
}

po_err po_audit_row_ok(const struct po_rows *p, int i, const char *tenant, bool *out_ok)
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
    if ((rc = link_of(po_rows_get(p, i, 9), seq, d, h)) == PO_OK)
        *out_ok = strcmp(h, po_rows_get(p, i, 10)) == 0;
    return rc;
}
