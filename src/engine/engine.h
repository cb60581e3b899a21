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
#include "../event/event.h"
#include "../store/store.h"

/* Test-only switches and hooks; production passes NULL or a zeroed struct. */
#define PO_ENGINE_NO_LAYER1 0x1u
#define PO_ENGINE_NO_LAYER2 0x2u
struct po_engine_cfg {
    unsigned disabled_layers;
    /* Called after the layer-1 lookup missed, before any write. */
    void (*after_layer1)(void *ctx, const struct po_event *ev);
    void *hook_ctx;
};

/*
 * Applies n (1..PO_BATCH_MAX) validated events in one transaction and writes
 * one outcome per event. Returns PO_OK when every event has its outcome
 * (including retry outcomes); a non-OK return is a programmer error.
 */
po_err po_engine_apply_batch(struct po_store *s, const struct po_engine_cfg *cfg,
                             const struct po_event *ev, size_t n,
                             struct po_outcome *out) PO_MUST_CHECK;

/*
 * Records a durable alert for a verified event that cannot be applied for a
 * reason found before the engine (e.g. a callback for another merchant id),
 * in its own transaction. Writing the same event and reason twice leaves
 * one alert. PO_ERR_TRANSIENT: nothing recorded.
 */
po_err po_engine_alert(struct po_store *s, const struct po_event *ev, enum po_reason reason,
                       const char *detail) PO_MUST_CHECK;

/* A batch of one. */
po_err po_engine_apply(struct po_store *s, const struct po_engine_cfg *cfg,
                       const struct po_event *ev, struct po_outcome *out) PO_MUST_CHECK;

#endif
