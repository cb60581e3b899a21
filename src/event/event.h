/*
 * event.h — the normalised event and the vocabulary every module shares
 * about it: event types, sources, outcomes and reason codes, each defined
 * ONCE in an X-macro table below, from which names, acks, HTTP statuses
 * and metric labels are all derived.
 *
 * This module sits below both channel/ (adapters produce events) and
 * engine/ (which applies them). It includes no store, crypto or HTTP header.
 *
 * Invariants:
 *  - an event that passed po_event_validate() has every field within the
 *    limits of core/limits.h and the fields its type requires;
 *  - the idempotency key is a pure function of business fields (README.md, "How it keeps the
 * promise");
 *  - every reason code belongs to exactly one class, which decides the ack.
 */
#ifndef PO_EVENT_H
#define PO_EVENT_H

#include "../core/core.h"

/* ---- event types: X(ID) ---- */
#define PO_EVENT_TYPES(X)                                                                          \
    X(PAY_SUCCESS)                                                                                 \
    X(REFUND_SUCCESS)                                                                              \
    X(REFUND_CLOSED)                                                                               \
    X(REFUND_ABNORMAL)                                                                             \
    X(PROFIT_SHARE_RESULT)

enum po_event_type {
#define X(id) PO_EV_##id,
    PO_EVENT_TYPES(X)
#undef X
        PO_EV_COUNT
};

/* ---- sources: X(ID, name) ---- */
#define PO_SOURCES(X)                                                                              \
    X(CALLBACK, "callback")                                                                        \
    X(RECONCILIATION, "reconciliation")                                                            \
    X(QUERY, "query")

enum po_source {
#define X(id, name) PO_SRC_##id,
    PO_SOURCES(X)
#undef X
        PO_SRC_COUNT
};

/* A verified event from a channel adapter, a reconciliation replay or
 * `payonce apply`. Strings are NUL-terminated; empty means absent. */
struct po_event {
    char tenant[PO_ID_MAX + 1];
    char channel[PO_CHANNEL_SIZE]; /* a registered channel's name */
    enum po_event_type type;
    char channel_txn_id[PO_TXN_ID_MAX + 1]; /* payment id; profit-sharing order id */
    char out_trade_no[PO_ID_MAX + 1];
    char out_refund_no[PO_ID_MAX + 1];         /* refund events */
    char channel_refund_id[PO_TXN_ID_MAX + 1]; /* refund events */
    char receiver[PO_ID_MAX + 1];              /* profit sharing */
    char merchant[PO_ID_MAX + 1];              /* optional: merchant the channel names */
    int64_t amount_minor;
    /* Refund events: amount_minor is what the payment has refunded so far,
     * this refund included (Alipay's refund_fee), not this refund's own
     * amount; the engine then takes the refund's recorded amount when the
     * total covers it. */
    bool amount_is_cumulative;
    char currency[4];
    enum po_source source;
    char occurred_at[PO_TIME_SIZE];
    /* Set only by the operator's action on a refund_after_close alert
     * (po_alert_accept; no channel, bill or event file can set it): the
     * refund success that arrived after payonce had closed the refund is
     * accepted as the order's refund. Its key is the success's + "|accepted". */
    bool accept_after_close;
    /* Set only by the operator's refund of a refused payment (po_alert_refund
     * on an amount/currency/channel mismatch; nothing from outside can set
     * it): a payment the business checks still refuse is recorded with its
     * own key and its money parked in suspense (then refunded from there);
     * one they now pass is credited as usual. */
    bool park_in_suspense;
};

/* ---- outcomes: X(ID, name, ack_success) ----
 * The engine produces the first five. A callback that never reaches the
 * engine is IGNORED (verified, nothing to apply) or INVALID (refused before
 * the engine: verification failed, malformed). ack_success says whether
 * the channel is told to stop sending. */
#define PO_OUTCOMES(X)                                                                             \
    X(APPLIED, "applied", true)     /* posted now */                                               \
    X(DUPLICATE, "duplicate", true) /* already processed; layer says which layer caught it */      \
    X(REJECTED, "rejected", true)   /* business check failed; alert; nothing posted */             \
    X(SUSPENSE, "suspense", true)   /* illegal transition; money in suspense; alert */             \
    X(RETRY, "retry", false)        /* transient failure; nothing committed; ack FAIL */           \
    X(IGNORED, "ignored", true)     /* verified; nothing to apply */                               \
    X(INVALID, "invalid", false)    /* refused before the engine; nothing recorded */

enum po_outcome_kind {
#define X(id, name, ack) PO_OUT_##id,
    PO_OUTCOMES(X)
#undef X
        PO_OUT_COUNT
};

/* ---- reason codes: X(ID, name, class, http_status) ----
 * class decides the ack (docs/operations.md, "What each ack means"):
 *   VERIFY    refused before any idempotency decision: FAIL with http_status
 *   REJECT    a business check failed: SUCCESS, durable alert, key not taken
 *   SUSPENSE  an illegal transition with real money: SUCCESS, suspense, alert
 *   RETRY     transient: FAIL 5xx, nothing committed
 *   ALERT     an alert raised outside the callback path
 * http_status is the FAIL status for VERIFY and RETRY, 0 otherwise. */
enum po_reason_class {
    PO_RC_NONE,
    PO_RC_VERIFY,
    PO_RC_REJECT,
    PO_RC_SUSPENSE,
    PO_RC_RETRY,
    PO_RC_ALERT
};

#define PO_REASONS(X)                                                                              \
    X(NONE, "", NONE, 0)                                                                           \
    /* verification failures (adapters and the callback handler) */                                \
    X(MISSING_HEADER, "missing_header", VERIFY, 401)                                               \
    X(PROBE, "probe", VERIFY, 401)                                                                 \
    X(UNSUPPORTED_SIGNATURE_TYPE, "unsupported_signature_type", VERIFY, 401)                       \
    X(BAD_TIMESTAMP, "bad_timestamp", VERIFY, 401)                                                 \
    X(STALE_TIMESTAMP, "stale_timestamp", VERIFY, 401)                                             \
    X(FUTURE_TIMESTAMP, "future_timestamp", VERIFY, 401)                                           \
    X(UNKNOWN_SERIAL, "unknown_serial", VERIFY, 401)                                               \
    X(CERTIFICATE_EXPIRED, "certificate_expired", VERIFY, 401)                                     \
    X(BAD_SIGNATURE, "bad_signature", VERIFY, 401)                                                 \
    X(MISSING_SIGNATURE, "missing_signature", VERIFY, 401)                                         \
    X(UNSUPPORTED_ALGORITHM, "unsupported_algorithm", VERIFY, 401)                                 \
    X(DECRYPT_FAILED, "decrypt_failed", VERIFY, 401)                                               \
    X(MALFORMED_BODY, "malformed_body", VERIFY, 400)                                               \
    X(MALFORMED_RESOURCE, "malformed_resource", VERIFY, 400)                                       \
    X(INVALID_UTF8, "invalid_utf8", VERIFY, 400)                                                   \
    X(BAD_CHARSET, "bad_charset", VERIFY, 400)                                                     \
    X(BODY_TOO_LARGE, "body_too_large", VERIFY, 413)                                               \
    X(UNKNOWN_TENANT, "unknown_tenant", VERIFY, 404)                                               \
    /* verified, but for another merchant or app (adapters) */                                     \
    X(MCHID_MISMATCH, "mchid_mismatch", REJECT, 0)                                                 \
    X(APPID_MISMATCH, "appid_mismatch", REJECT, 0)                                                 \
    X(SUB_MCHID_MISMATCH, "sub_mchid_mismatch", REJECT, 0)                                         \
    X(APP_ID_MISMATCH, "app_id_mismatch", REJECT, 0)                                               \
    X(SELLER_ID_MISMATCH, "seller_id_mismatch", REJECT, 0)                                         \
    /* business checks (engine) */                                                                 \
    X(UNKNOWN_ORDER, "unknown_order", REJECT, 0)                                                   \
    X(AMOUNT_MISMATCH, "amount_mismatch", REJECT, 0)                                               \
    X(CONFLICTING_DUPLICATE, "conflicting_duplicate", REJECT, 0)                                   \
    X(CURRENCY_MISMATCH, "currency_mismatch", REJECT, 0)                                           \
    X(MERCHANT_MISMATCH, "merchant_mismatch", REJECT, 0)                                           \
    X(CHANNEL_MISMATCH, "channel_mismatch", REJECT, 0)                                             \
    X(ORDER_NOT_PAID, "order_not_paid", REJECT, 0)                                                 \
    X(UNKNOWN_REFUND, "unknown_refund", REJECT, 0)                                                 \
    X(ORDER_MISMATCH, "order_mismatch", REJECT, 0)                                                 \
    X(STALE_REFUND_STATUS, "stale_refund_status", REJECT, 0)                                       \
    X(REFUND_EXCEEDS_RESERVED, "refund_exceeds_reserved", REJECT, 0)                               \
    /* illegal transitions (engine) */                                                             \
    X(PAID_AFTER_CLOSE, "paid_after_close", SUSPENSE, 0)                                           \
    X(DUPLICATE_PAYMENT, "duplicate_payment", SUSPENSE, 0)                                         \
    X(REFUND_AFTER_CLOSE, "refund_after_close", SUSPENSE, 0)                                       \
    /* transient failures */                                                                       \
    X(STORE_UNAVAILABLE, "store_unavailable", RETRY, 500)                                          \
    X(STORE_ERROR, "store_error", RETRY, 500)                                                      \
    X(NOMEM, "nomem", RETRY, 500)                                                                  \
    X(CRYPTO_ERROR, "crypto_error", RETRY, 500)                                                    \
    X(POOL_EXHAUSTED, "pool_exhausted", RETRY, 503)                                                \
    X(DEADLINE_EXCEEDED, "deadline_exceeded", RETRY, 503)                                          \
    /* alerts raised outside the callback path */                                                  \
    X(MISSING_FROM_BILL, "missing_from_bill", ALERT, 0)                                            \
    X(REFUND_REJECTED_BY_CHANNEL, "refund_rejected_by_channel", ALERT, 0)                          \
    X(UNMAPPABLE_EVENT, "unmappable_event", ALERT, 0)                                              \
    X(WEBHOOK_DEAD_LETTER, "webhook_dead_letter", ALERT, 0)                                        \
    X(WEBHOOK_FAILING, "webhook_failing", ALERT, 0)

enum po_reason {
#define X(id, name, cls, status) PO_R_##id,
    PO_REASONS(X)
#undef X
        PO_R_COUNT
};

struct po_outcome {
    enum po_outcome_kind kind;
    int layer;             /* 1, 2 or 3 for duplicates, else 0 */
    enum po_reason reason; /* rejected / suspense / retry / invalid reason */
};

const char *po_event_type_name(enum po_event_type t);
const char *po_source_name(enum po_source s);
const char *po_outcome_name(enum po_outcome_kind k);
/* Whether the channel is told to stop sending for this outcome. */
bool po_outcome_acks(enum po_outcome_kind k);
const char *po_reason_name(enum po_reason r);
enum po_reason_class po_reason_class(enum po_reason r);
/* FAIL status of a VERIFY or RETRY reason (0 for the others). */
unsigned po_reason_status(enum po_reason r);
/* The reason with this name, or PO_R_NONE. */
enum po_reason po_reason_find(const char *name);

/*
 * The idempotency key: a pure function of business fields (README.md, "How it keeps the promise"),
 * never of time, randomness or a per-delivery notification id.
 *   PAY_SUCCESS          <channel>:<channel_txn_id>:PAY_SUCCESS
 *   REFUND_<STATUS>      <channel>:<channel_refund_id>:REFUND_<STATUS>
 *   PROFIT_SHARE_RESULT  <channel>:<channel_txn_id>:<receiver>:PROFIT_SHARE_RESULT
 * Scoped by tenant in storage. The event must be valid (po_event_validate).
 */
po_err po_event_key(const struct po_event *ev, char *out, size_t cap) PO_MUST_CHECK;

/* Whether an event type is a refund result (REFUND_SUCCESS/CLOSED/ABNORMAL). */
bool po_event_is_refund(enum po_event_type t);

/*
 * Checks every field against the limits and the type's required fields.
 * The channel is checked for its shape (a lower-case name); whether it is
 * a registered channel is known only above this module, where names come
 * in from outside (channel/: the registry, po_event_from_json).
 */
po_err po_event_validate(const struct po_event *ev, char *err, size_t errcap) PO_MUST_CHECK;

/* Renders an outcome as one JSON object into buf. */
po_err po_outcome_to_json(const struct po_outcome *o, char *buf, size_t cap) PO_MUST_CHECK;

#endif
