/*
 * objects.h — creating the objects events act on: tenants, merchants, orders,
 * refunds. Shared by the CLI and the tenant API. Each call runs in its own
 * transaction; on any error nothing is changed.
 */
#ifndef PO_OBJECTS_H
#define PO_OBJECTS_H

#include "../core/core.h"
#include "../store/store.h"

/* Idempotent for identical input: adding what exists with the same fields
 * succeeds with *created false (created may be NULL); a tenant that exists
 * with another name is PO_ERR_CONFLICT, naming it. */
/* PO_OK when the tenant exists; PO_ERR_NOT_FOUND, with a message naming it
 * and how to list or add tenants, when it does not. */
po_err po_tenant_check(struct po_store *s, const char *tenant, char *err,
                       size_t errcap) PO_MUST_CHECK;

/* The tenant's default order expiry: orders created without a time_expire
 * expire ttl_s after their creation (0: never). In its own transaction;
 * PO_ERR_NOT_FOUND when there is no such tenant. */
po_err po_tenant_set_order_ttl(struct po_store *s, const char *tenant, int64_t ttl_s, char *err,
                               size_t errcap) PO_MUST_CHECK;
po_err po_tenant_add(struct po_store *s, const char *tenant, const char *name, bool *created,
                     char *err, size_t errcap) PO_MUST_CHECK;
po_err po_merchant_add(struct po_store *s, const char *tenant, const char *merchant, bool *created,
                       char *err, size_t errcap) PO_MUST_CHECK;

struct po_order_spec {
    const char *tenant;
    const char *merchant;
    const char *out_trade_no;
    int64_t amount_minor;
    const char *currency;
    const char *channel; /* NULL: any channel may pay it */
    int64_t expires_at;  /* Unix s; 0: the tenant's order_ttl_s after now, if it has one */
};

/*
 * Creates an order in PAYING. The same out_trade_no with identical fields
 * is not an error: *out_created is false and the existing order stands
 * (idempotent creation). Different fields: PO_ERR_CONFLICT with the reason.
 */
po_err po_order_create(struct po_store *s, const struct po_order_spec *o, bool *out_created,
                       char *err, size_t errcap) PO_MUST_CHECK;

/*
 * The *_insert / close functions below run inside the caller's open write
 * transaction (the tenant API stores its idempotent response in the same
 * transaction). On a non-OK return the caller rolls back. code (may be
 * NULL) receives a machine-readable reason: invalid_request,
 * merchant_not_found, order_exists, order_not_found, order_paid,
 * order_not_paid, currency_mismatch, refund_exceeds_paid, refund_exists.
 */
po_err po_order_insert(struct po_store *s, const struct po_order_spec *o, bool *out_created,
                       char *code, size_t codecap, char *err, size_t errcap) PO_MUST_CHECK;

/* Records the payment created at the channel for an order (pay_method,
 * the channel's id or "", the buyer's side's JSON text). Once: an order
 * whose payment is recorded keeps it — the same pay_method again is not
 * an error (the recorded one stands), another is PO_ERR_CONFLICT
 * (order_exists). */
po_err po_order_set_payment(struct po_store *s, const char *tenant, const char *out_trade_no,
                            const char *pay_method, const char *channel_id, const char *payment,
                            char *code, size_t codecap, char *err, size_t errcap) PO_MUST_CHECK;

/* PAYING -> CLOSED, a conditional update. Closing a CLOSED order again is
 * not an error (*out_closed_now false); a PAID order is PO_ERR_CONFLICT. */
po_err po_order_close(struct po_store *s, const char *tenant, const char *out_trade_no,
                      bool *out_closed_now, char *code, size_t codecap, char *err,
                      size_t errcap) PO_MUST_CHECK;

struct po_refund_spec {
    const char *tenant;
    const char *out_trade_no;
    const char *out_refund_no;
    int64_t amount_minor;
    const char *currency;     /* NULL: the order's */
    const char *submit_state; /* none | manual | pending (to be submitted to the channel) */
};

/*
 * Records a refund request in PROCESSING and reserves its amount on the
 * order with a guarded update (order PAID, refund_reserved + amount <=
 * amount), so concurrent requests can never reserve more than was paid.
 * The same out_refund_no with identical fields: *out_created false, the
 * existing refund stands; different fields: PO_ERR_CONFLICT.
 */
po_err po_refund_insert(struct po_store *s, const struct po_refund_spec *f, bool *out_created,
                        char *code, size_t codecap, char *err, size_t errcap) PO_MUST_CHECK;
/* po_refund_insert in its own transaction (the CLI). */
po_err po_refund_create(struct po_store *s, const char *tenant, const char *out_trade_no,
                        const char *out_refund_no, int64_t amount_minor, char *err,
                        size_t errcap) PO_MUST_CHECK;

/* Gives a closed refund's reservation back to its order, inside the
 * caller's transaction, guarded so the reservation never falls below what
 * was refunded (*out_changes 0 then). Shared by the engine (refund closed by
 * the channel's callback) and refund submission (refused by the channel). */
po_err po_order_release_refund(struct po_store *s, const char *tenant, const char *out_trade_no,
                               int64_t amount_minor, const char *now, int64_t *out_changes,
                               char *err, size_t errcap) PO_MUST_CHECK;

/* The order paid by a channel transaction (e.g. for WeChat profit-sharing
 * results, which name the payment). PO_ERR_NOT_FOUND when none. */
po_err po_order_by_txn(struct po_store *s, const char *tenant, const char *channel,
                       const char *channel_txn_id, char *out_trade_no, size_t cap) PO_MUST_CHECK;

#endif
