/*
 * idem.c — Idempotency-Key records of the tenant API (api_idempotency);
 * the protocol (claim, finish, release, reap) is stated in service.h.
 */
#include "idem.h"

#include "../../crypto/crypto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

/* Reads the row; *found false when there is none. */
static po_err look(struct po_store *s, const struct po_idem_req *q, struct po_idem_claim *out,
                   bool *found, char *token_out, char *locked_at, size_t cap)
{
    struct po_rows r;
    struct po_param p[] = {PO_TEXT(q->tenant), PO_TEXT(q->route), PO_TEXT(q->key)};
    po_err rc = po_store_exec(s,
                              "SELECT request_hash, state, status_code, response_body,"
                              " lock_token, locked_at FROM api_idempotency WHERE tenant_id = ?"
                              " AND route = ? AND idem_key = ?",
                              p, PO_NELEM(p), &r, NULL, NULL, 0);
    if (rc)
        return rc;
    *found = r.nrows == 1;
    if (*found) {
        const char *state = po_rows_get(&r, 0, 1);
        int64_t status = 0;
        if (strcmp(po_rows_get(&r, 0, 0), q->hash) != 0)
            out->kind = PO_IDEM_MISMATCH;
        else if (strcmp(state, "done") == 0 && po_rows_i64(&r, 0, 2, &status) == PO_OK) {
            out->kind = PO_IDEM_REPLAY;
            out->status = (unsigned)status;
            out->body = strdup(po_rows_get(&r, 0, 3) ? po_rows_get(&r, 0, 3) : "");
            if (!out->body)
                rc = PO_ERR_NOMEM;
        } else
            out->kind = PO_IDEM_IN_FLIGHT;
        if (po_strcpy(token_out, PO_IDEM_TOKEN_LEN + 1, po_rows_get(&r, 0, 4)) ||
            po_strcpy(locked_at, cap, po_rows_get(&r, 0, 5)))
            rc = PO_ERR_STORE;
    }
    po_rows_free(&r);
    return rc;
}

po_err po_idem_claim(struct po_store *s, const struct po_idem_req *q, bool fold,
                     struct po_idem_claim *out)
{
    memset(out, 0, sizeof *out);
    unsigned char rnd[PO_IDEM_TOKEN_LEN / 2];
    po_err rc = po_random(rnd, sizeof rnd);
    if (rc)
        return rc;
    for (size_t i = 0; i < sizeof rnd; i++)
        (void)snprintf(out->token + 2 * i, 3, "%02x", rnd[i]);
    char now[PO_TIME_SIZE], stale[PO_TIME_SIZE],
        old_token[PO_IDEM_TOKEN_LEN + 1] = "", locked_at[PO_TIME_SIZE] = "";
    po_clock_now_iso(now, sizeof now);
    po_clock_iso_at((int64_t)time(NULL) - PO_IDEM_LOCK_S, stale, sizeof stale);
    for (int attempt = 0; attempt < 2; attempt++) {
        bool found = false;
        rc = look(s, q, out, &found, old_token, locked_at, sizeof locked_at);
        if (rc)
            return rc;
        if (found && out->kind == PO_IDEM_IN_FLIGHT && strcmp(locked_at, stale) < 0) {
            /* The holder has been gone longer than any request may run:
             * take the row over; the old holder's finish will find its
             * token gone and roll its effect back. */
            int64_t changes = 0;
            struct po_param p[] = {PO_TEXT(out->token), PO_TEXT(now),    PO_TEXT(q->tenant),
                                   PO_TEXT(q->route),   PO_TEXT(q->key), PO_TEXT(old_token)};
            rc = po_store_exec_tx(
                s,
                "UPDATE api_idempotency SET lock_token = ?, locked_at = ? WHERE"
                " tenant_id = ? AND route = ? AND idem_key = ? AND state = 'running'"
                " AND lock_token = ?",
                p, PO_NELEM(p), &changes, NULL, 0);
            if (rc)
                return rc;
            if (changes == 1) {
                out->kind = PO_IDEM_CLAIMED;
                out->taken_over = true;
                return PO_OK;
            }
            continue; /* someone else moved it: look again */
        }
        if (found)
            return PO_OK;
        if (fold) {
            out->kind = PO_IDEM_ABSENT;
            out->token[0] = '\0'; /* stored with the answer, not claimed */
            return PO_OK;
        }
        int64_t changes = 0;
        struct po_param p[] = {PO_TEXT(q->tenant), PO_TEXT(q->route),   PO_TEXT(q->key),
                               PO_TEXT(q->hash),   PO_TEXT(out->token), PO_TEXT(now),
                               PO_TEXT(now)};
        rc = po_store_exec_tx(
            s,
            "INSERT INTO api_idempotency (tenant_id, route, idem_key, request_hash, state,"
            " lock_token, locked_at, created_at) VALUES (?, ?, ?, ?, 'running', ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            p, PO_NELEM(p), &changes, NULL, 0);
        if (rc)
            return rc;
        if (changes == 1) {
            out->kind = PO_IDEM_CLAIMED;
            return PO_OK;
        }
        /* A twin inserted it between our look and our insert: look again. */
    }
    out->kind = PO_IDEM_IN_FLIGHT;
    return PO_OK;
}

po_err po_idem_finish(struct po_store *s, const struct po_idem_req *q, const char *token,
                      unsigned status, const char *body)
{
    int64_t changes = 0;
    char err[PO_ERRBUF_SIZE];
    struct po_param p[] = {PO_I64(status),    PO_TEXT(body),   PO_TEXT(q->tenant),
                           PO_TEXT(q->route), PO_TEXT(q->key), PO_TEXT(token)};
    po_err rc = po_store_exec(s,
                              "UPDATE api_idempotency SET state = 'done', status_code = ?,"
                              " response_body = ? WHERE tenant_id = ? AND route = ? AND"
                              " idem_key = ? AND state = 'running' AND lock_token = ?",
                              p, PO_NELEM(p), NULL, &changes, err, sizeof err);
    if (rc)
        return rc;
    return changes == 1 ? PO_OK : PO_ERR_CONFLICT;
}

po_err po_idem_release(struct po_store *s, const struct po_idem_req *q, const char *token)
{
    struct po_param p[] = {PO_TEXT(q->tenant), PO_TEXT(q->route), PO_TEXT(q->key), PO_TEXT(token)};
    return po_store_exec_tx(s,
                            "DELETE FROM api_idempotency WHERE tenant_id = ? AND route = ? AND"
                            " idem_key = ? AND state = 'running' AND lock_token = ?",
                            p, PO_NELEM(p), NULL, NULL, 0);
}

po_err po_idem_reap(struct po_store *s, int64_t retention_s, int64_t *out_deleted)
{
    char cutoff[PO_TIME_SIZE];
    po_clock_iso_at((int64_t)time(NULL) - retention_s, cutoff, sizeof cutoff);
    struct po_param p[] = {PO_TEXT(cutoff)};
    int64_t n = 0;
    po_err rc = po_store_exec_tx(s, "DELETE FROM api_idempotency WHERE created_at < ?", p,
                                 PO_NELEM(p), &n, NULL, 0);
    if (!rc && out_deleted)
        *out_deleted = n;
    return rc;
}

static po_err sp(struct po_store *s, const char *sql)
{
    char err[PO_ERRBUF_SIZE];
    return po_store_exec(s, sql, PO_NO_PARAMS, NULL, NULL, err, sizeof err);
}

/* The answer of a key that was never claimed, stored 'done' at once;
 * PO_ERR_CONFLICT when a twin (another process) stored the key first. */
static po_err insert_done(struct po_store *s, const struct po_idem_req *q, unsigned status,
                          const char *body)
{
    char now[PO_TIME_SIZE], err[PO_ERRBUF_SIZE];
    po_clock_now_iso(now, sizeof now);
    int64_t changes = 0;
    po_err rc = po_store_exec(
        s,
        "INSERT INTO api_idempotency (tenant_id, route, idem_key, request_hash, state,"
        " lock_token, locked_at, status_code, response_body, created_at) VALUES (?, ?, ?, ?,"
        " 'done', '', ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        PO_PARAMS(PO_TEXT(q->tenant), PO_TEXT(q->route), PO_TEXT(q->key), PO_TEXT(q->hash),
                  PO_TEXT(now), PO_I64(status), PO_TEXT(body), PO_TEXT(now)),
        NULL, &changes, err, sizeof err);
    if (rc)
        return rc;
    return changes == 1 ? PO_OK : PO_ERR_CONFLICT;
}

po_err po_idem_apply(struct po_store *s, const struct po_idem_req *q, const char *token,
                     po_err (*effect)(void *ctx, unsigned *status), char *(*render)(void *ctx),
                     void *ctx)
{
    unsigned status = 0;
    po_err rc = sp(s, "SAVEPOINT po_api");
    if (!rc)
        rc = effect(ctx, &status);
    if (!rc && status >= 400)
        rc = sp(s, "ROLLBACK TO SAVEPOINT po_api");
    if (!rc)
        rc = sp(s, "RELEASE SAVEPOINT po_api");
    if (!rc && q) {
        char *body = render(ctx);
        if (!body)
            rc = PO_ERR_NOMEM;
        else if (token && token[0])
            rc = po_idem_finish(s, q, token, status, body);
        else
            rc = insert_done(s, q, status, body);
        free(body);
    }
    return rc;
}

/* ---- requests in flight in this process ---- */

#define LOCAL_MAX 4096 /* keys in flight at once in one process */

struct po_idem_local {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    uint64_t h[LOCAL_MAX]; /* hashes of (tenant, route, key) in flight */
};

po_err po_idem_local_open(struct po_idem_local **out)
{
    struct po_idem_local *l = calloc(1, sizeof *l);
    if (!l)
        return PO_ERR_NOMEM;
    pthread_mutex_init(&l->mu, NULL);
    po_cond_init(&l->cv);
    *out = l;
    return PO_OK;
}

void po_idem_local_close(struct po_idem_local *l)
{
    if (!l)
        return;
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}

static uint64_t local_hash(const struct po_idem_req *q)
{
    uint64_t h = UINT64_C(1469598103934665603);
    const char *parts[3] = {q->tenant, q->route, q->key};
    for (int k = 0; k < 3; k++) {
        for (const unsigned char *p = (const unsigned char *)parts[k]; *p; p++)
            h = (h ^ *p) * UINT64_C(1099511628211);
        h = (h ^ 0xff) * UINT64_C(1099511628211);
    }
    return h;
}

static int local_find(const struct po_idem_local *l, uint64_t h)
{
    for (int i = 0; i < l->n; i++)
        if (l->h[i] == h)
            return i;
    return -1;
}

po_err po_idem_local_enter(struct po_idem_local *l, const struct po_idem_req *q, int wait_ms)
{
    uint64_t h = local_hash(q);
    struct timespec until = po_deadline_us((int64_t)wait_ms * 1000);
    pthread_mutex_lock(&l->mu);
    po_err rc = PO_OK;
    while (local_find(l, h) >= 0)
        if (wait_ms <= 0 || pthread_cond_timedwait(&l->cv, &l->mu, &until) != 0) {
            rc = local_find(l, h) >= 0 ? PO_ERR_CONFLICT : PO_OK;
            break;
        }
    if (!rc && l->n == LOCAL_MAX)
        rc = PO_ERR_LIMIT;
    if (!rc)
        l->h[l->n++] = h;
    pthread_mutex_unlock(&l->mu);
    return rc;
}

void po_idem_local_leave(struct po_idem_local *l, const struct po_idem_req *q)
{
    uint64_t h = local_hash(q);
    pthread_mutex_lock(&l->mu);
    int i = local_find(l, h);
    PO_ASSERT(i >= 0);
    l->h[i] = l->h[--l->n];
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}
