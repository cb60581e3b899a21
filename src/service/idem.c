/*
 * idem.c — Idempotency-Key records of the tenant API (api_idempotency);
 * the protocol (claim, finish, release, reap) is stated in service.h.
 */
#include "service.h"

#include "../crypto/crypto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

po_err po_idem_claim(struct po_store *s, const struct po_idem_req *q, struct po_idem_claim *out)
{
    memset(out, 0, sizeof *out);
    unsigned char rnd[PO_IDEM_TOKEN_LEN / 2];
    po_err rc = po_random(rnd, sizeof rnd);
    if (rc)
        return rc;
    for (size_t i = 0; i < sizeof rnd; i++)
        (void)snprintf(out->token + 2 * i, 3, "%02x", rnd[i]);
    char now[PO_TIME_MAX], stale[PO_TIME_MAX],
        old_token[PO_IDEM_TOKEN_LEN + 1] = "", locked_at[PO_TIME_MAX] = "";
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
    char err[PO_ERRBUF_MAX];
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
    char cutoff[PO_TIME_MAX];
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
    char err[PO_ERRBUF_MAX];
    return po_store_exec(s, sql, PO_NO_PARAMS, NULL, NULL, err, sizeof err);
}

po_err po_idem_run(struct po_store *s, const struct po_idem_req *q, const char *token,
                   po_err (*effect)(void *ctx, unsigned *status), char *(*render)(void *ctx),
                   void *ctx)
{
    char err[PO_ERRBUF_MAX] = "";
    unsigned status = 0;
    po_err rc = po_store_begin(s, err, sizeof err);
    if (rc)
        return rc;
    rc = sp(s, "SAVEPOINT po_api");
    if (!rc)
        rc = effect(ctx, &status);
    if (!rc && status >= 400)
        rc = sp(s, "ROLLBACK TO SAVEPOINT po_api");
    if (!rc && q) {
        char *body = render(ctx);
        rc = body ? po_idem_finish(s, q, token, status, body) : PO_ERR_NOMEM;
        free(body);
    }
    if (!rc)
        return po_store_commit(s, err, sizeof err);
    po_store_rollback(s);
    return rc;
}
