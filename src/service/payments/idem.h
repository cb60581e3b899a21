/*
 * idem.h — Idempotency-Key records of the tenant API (idem.c).
 * Part of service.h (which includes every service header).
 */
#ifndef PO_SERVICE_IDEM_H
#define PO_SERVICE_IDEM_H

#include "../../channel/channel.h"
#include "../../core/core.h"
#include "../../engine/engine.h"
#include "../../runtime/runtime.h"
#include "../../store/store.h"

#include <jansson.h>

/* ---- Idempotency-Key records (idem.c) ----
 *   claim   reads the row without a write lock. Same key, other request
 *           hash -> MISMATCH (422); 'done' -> REPLAY; 'running' -> IN_FLIGHT
 *           (409), unless the lock is older than PO_IDEM_LOCK_S (the
 *           holder crashed): then the row is taken over with a new lock
 *           token (CLAIMED). No row: with fold, ABSENT — the answer is
 *           stored with the effect, in its transaction (apply); without,
 *           the row is inserted 'running' in its own committed
 *           transaction, so a concurrent retry sees it (CLAIMED).
 *   apply   inside the transaction of the request's effect: runs it and
 *           stores the final status and body — fenced by the lock token
 *           of a claimed row, so a request whose row was taken over cannot
 *           also commit its effect; inserted 'done' for an ABSENT key, so
 *           that of two twins racing from two processes one commits and
 *           the other finds the key taken (PO_ERR_CONFLICT) and replays.
 *   release deletes a 'running' row after a transient failure.
 *   reap    deletes rows older than the retention.
 *   local   the keys in flight in this process: a twin waits for the
 *           first request's answer instead of racing it. */
struct po_idem_req {
    const char *tenant, *route, *key, *hash;
};
enum po_idem_kind {
    PO_IDEM_CLAIMED,
    PO_IDEM_ABSENT,
    PO_IDEM_REPLAY,
    PO_IDEM_MISMATCH,
    PO_IDEM_IN_FLIGHT
};
struct po_idem_claim {
    enum po_idem_kind kind;
    unsigned status; /* REPLAY */
    char *body;      /* REPLAY; heap, caller frees */
    bool taken_over; /* CLAIMED from an abandoned record */
    char token[PO_IDEM_TOKEN_LEN + 1];
};
po_err po_idem_claim(struct po_store *s, const struct po_idem_req *q, bool fold,
                     struct po_idem_claim *out) PO_MUST_CHECK;
/* PO_ERR_CONFLICT when the record was taken over (the caller rolls back). */
po_err po_idem_finish(struct po_store *s, const struct po_idem_req *q, const char *token,
                      unsigned status, const char *body) PO_MUST_CHECK;
po_err po_idem_release(struct po_store *s, const struct po_idem_req *q,
                       const char *token) PO_MUST_CHECK;
/*
 * Runs a request's effect and stores its answer, inside the caller's
 * transaction: effect() runs inside a savepoint and sets *status; a
 * business refusal (status >= 400) rolls its writes back to the
 * savepoint, but the answer is final and stored too. With q (an
 * Idempotency-Key), render() gives the body stored with the final status:
 * by po_idem_finish with the claim's token, or inserted 'done' when token
 * is "" (an ABSENT key). PO_ERR_CONFLICT: the key was taken over, or a
 * twin stored it first — the caller rolls back.
 */
po_err po_idem_apply(struct po_store *s, const struct po_idem_req *q, const char *token,
                     po_err (*effect)(void *ctx, unsigned *status), char *(*render)(void *ctx),
                     void *ctx) PO_MUST_CHECK;
struct po_idem_local;
po_err po_idem_local_open(struct po_idem_local **out) PO_MUST_CHECK;
void po_idem_local_close(struct po_idem_local *l);
/* Marks the key in flight in this process, waiting up to wait_ms while a
 * twin holds it. PO_ERR_CONFLICT: still held; PO_ERR_LIMIT: too many. */
po_err po_idem_local_enter(struct po_idem_local *l, const struct po_idem_req *q,
                           int wait_ms) PO_MUST_CHECK;
void po_idem_local_leave(struct po_idem_local *l, const struct po_idem_req *q);
/* Deletes stored responses older than retention_s. */
po_err po_idem_reap(struct po_store *s, int64_t retention_s, int64_t *out_deleted) PO_MUST_CHECK;

#endif
