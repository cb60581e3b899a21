/*
 * engine.h — the exactly-once engine: normalised events in, one outcome per
 * event out, all of a batch's effects committed in ONE transaction.
 *
 * For every event, inside its own savepoint:
 *   business checks (order exists, amount, currency, merchant) — before any
 *     idempotency decision, so a mismatched event never occupies a key;
 *   layer 1: the processed record (notify_log) already has the key -> duplicate;
 *   layer 2: a conditional UPDATE whose guard is in the WHERE clause moves the
 *     state machine; 0 rows -> re-read: already there -> duplicate, otherwise
 *     an illegal transition -> suspense;
 *   layer 3: INSERT of the processed record; a unique violation rolls the
 *     event back to its savepoint and, once the twin's row is seen, answers
 *     duplicate.
 * The processed record, the state change and the ledger postings commit
 * together or not at all. Outcomes are final only after COMMIT returned;
 * any transient failure turns every event of the batch into `retry`.
 *
 * The engine includes no database, crypto or HTTP header.
 */
#ifndef PO_ENGINE_H
#define PO_ENGINE_H

#include "../core/core.h"
#include "../store/store.h"

enum po_event_type {
    PO_EV_PAY_SUCCESS,
    PO_EV_REFUND_SUCCESS,
    PO_EV_REFUND_CLOSED,
    PO_EV_REFUND_ABNORMAL,
    PO_EV_PROFIT_SHARE_RESULT,
};

enum po_source { PO_SRC_CALLBACK, PO_SRC_RECONCILIATION, PO_SRC_QUERY };

/* A verified event from a channel adapter, a reconciliation replay or
 * `payonce apply`. Strings are NUL-terminated; empty means absent. */
struct po_event {
    char tenant[PO_ID_MAX + 1];
    char channel[PO_CHANNEL_MAX];             /* wechatpay | alipay | stripe */
    enum po_event_type type;
    char channel_txn_id[PO_TXN_ID_MAX + 1];   /* payment id; profit-sharing order id */
    char out_trade_no[PO_ID_MAX + 1];
    char out_refund_no[PO_ID_MAX + 1];        /* refund events */
    char channel_refund_id[PO_TXN_ID_MAX + 1];/* refund events */
    char receiver[PO_ID_MAX + 1];             /* profit sharing */
    char merchant[PO_ID_MAX + 1];             /* optional: merchant the channel names */
    int64_t amount_minor;
    /* Refund events: amount_minor is what the payment has refunded so far,
     * this refund included (Alipay's refund_fee), not this refund's own
     * amount; the engine then takes the refund's recorded amount when the
     * total covers it. */
    bool amount_is_cumulative;
    char currency[4];
    enum po_source source;
    char occurred_at[PO_TIME_MAX];
};

enum po_outcome_kind {
    PO_OUT_APPLIED,   /* posted now */
    PO_OUT_DUPLICATE, /* already processed; layer says which layer caught it */
    PO_OUT_REJECTED,  /* business check failed; alert recorded; nothing posted */
    PO_OUT_SUSPENSE,  /* illegal transition; money parked in suspense; alert */
    PO_OUT_RETRY,     /* transient failure; nothing committed; ack FAIL */
};

struct po_outcome {
    enum po_outcome_kind kind;
    int layer;                   /* 1, 2 or 3 for duplicates, else 0 */
    char reason[PO_REASON_MAX];  /* rejected / suspense / retry reason */
};

/* Test-only switches and hooks; production passes NULL or a zeroed struct. */
#define PO_ENGINE_NO_LAYER1 0x1u
#define PO_ENGINE_NO_LAYER2 0x2u
struct po_engine_cfg {
    unsigned disabled_layers;
    /* Called after the layer-1 lookup missed, before any write. */
    void (*after_layer1)(void *ctx, const struct po_event *ev);
    void *hook_ctx;
};

const char *po_event_type_name(enum po_event_type t);
const char *po_source_name(enum po_source s);
const char *po_outcome_name(enum po_outcome_kind k);
bool po_channel_valid(const char *channel);

/*
 * The idempotency key: a pure function of business fields (DESIGN §3),
 * never of time, randomness or a per-delivery notification id.
 *   PAY_SUCCESS          <channel>:<channel_txn_id>:PAY_SUCCESS
 *   REFUND_<STATUS>      <channel>:<channel_refund_id>:REFUND_<STATUS>
 *   PROFIT_SHARE_RESULT  <channel>:<channel_txn_id>:<receiver>:PROFIT_SHARE_RESULT
 * Scoped by tenant in storage. The event must be valid (po_event_validate).
 */
po_err po_event_key(const struct po_event *ev, char *out, size_t cap) PO_MUST_CHECK;

/* Checks every field against the limits and the type's required fields. */
po_err po_event_validate(const struct po_event *ev, char *err, size_t errcap) PO_MUST_CHECK;

/* Parses the normalised event JSON of DESIGN §10 (unknown fields rejected)
 * and validates it. *out is written only on success. */
po_err po_event_from_json(const char *json, size_t len, struct po_event *out, char *err,
                          size_t errcap) PO_MUST_CHECK;
/* Renders an outcome as one JSON object into buf. */
po_err po_outcome_to_json(const struct po_outcome *o, char *buf, size_t cap) PO_MUST_CHECK;

/*
 * Applies n (1..PO_BATCH_MAX) validated events in one transaction and writes
 * one outcome per event. Returns PO_OK when every event has its outcome
 * (including retry outcomes); a non-OK return is a programmer error.
 */
po_err po_engine_apply_batch(struct po_store *s, const struct po_engine_cfg *cfg,
                             const struct po_event *ev, size_t n, struct po_outcome *out)
    PO_MUST_CHECK;

/*
 * Records a durable alert for a verified event that cannot be applied for a
 * reason found before the engine (e.g. a callback for another merchant id),
 * in its own transaction. reason is a [a-z_] code. Writing the same event
 * and reason twice leaves one alert. PO_ERR_TRANSIENT: nothing recorded.
 */
po_err po_engine_alert(struct po_store *s, const struct po_event *ev, const char *reason,
                       const char *detail) PO_MUST_CHECK;

/* A batch of one. */
po_err po_engine_apply(struct po_store *s, const struct po_engine_cfg *cfg,
                       const struct po_event *ev, struct po_outcome *out) PO_MUST_CHECK;

#endif
