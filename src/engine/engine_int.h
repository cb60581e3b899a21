/*
 * engine_int.h — private to src/engine: the per-event path (engine.c: one
 * event in its savepoint, the three layers statement by statement) as the
 * batch driver (batch.c) calls it, and what both share.
 */
#ifndef PO_ENGINE_INT_H
#define PO_ENGINE_INT_H

#include "../ledger/ledger.h"
#include "engine.h"

/* Everything one event's processing needs. */
struct ev_ctx {
    struct po_store *s;
    const struct po_engine_cfg *cfg;
    const struct po_event *ev;
    struct po_event resolved; /* ev with a cumulative refund amount resolved */
    char key[PO_KEY_SIZE];
    const char *now;
    struct po_ledger_batch *deltas; /* this event's balance deltas */
    char detail[PO_DETAIL_SIZE];    /* alert detail for rejected / suspense */
    char err[PO_ERRBUF_SIZE];
    /* The unique index refused this event's processed record in the batch's
     * set-based attempt (rolled back): a twin's record found now was caught
     * by layer 3. */
    bool conflicted;
    /* A refund of a payment parked in suspense: that payment's key (its
     * events carry it as suspense_key). "" otherwise. */
    char suspense_key[PO_KEY_SIZE];
};

/* Prepares c for event ev of a batch whose transaction time is now. */
void po_engine_ctx(struct ev_ctx *c, struct po_store *s, const struct po_engine_cfg *cfg,
                   const struct po_event *ev, const char *now, struct po_ledger_batch *deltas);

/*
 * One event inside its own savepoint, the layers statement by statement;
 * its balance deltas are merged into batch_deltas when it commits. A
 * failure of one of the event's own statements rolls the event back to
 * its savepoint and makes its outcome `retry` (the batch goes on); the
 * return is non-OK only when the transaction itself is lost (the savepoint
 * cannot be rolled back to): then the whole batch must be retried.
 */
po_err po_engine_run_event(struct ev_ctx *c, struct po_ledger_batch *batch_deltas,
                           struct po_outcome *o) PO_MUST_CHECK;

/* The business checks of an event against its order's fields (merchant,
 * channel, currency, amount: exact for payments, at most for the others);
 * PO_R_NONE when they pass. */
enum po_reason po_engine_order_check(const struct po_event *ev, const char *merchant,
                                     int64_t amount, const char *currency, const char *channel,
                                     bool amount_exact);

/* ---- the payment statements, each written once (statements.c); the
 * per-event path runs them with a batch of one ---- */

/* Layer 2 for payments: the orders of rs (t, o, txn, ch) marked PAID —
 * only from PAYING when only_paying (layer 2 on) — with their event_seq
 * bumped for the payment.credited event; out: tenant_id, out_trade_no,
 * merchant_id, event_seq of each order moved (none: someone else moved
 * it first). */
po_err po_engine_mark_paid(struct po_store *s, bool only_paying, const struct po_rowset *rs,
                           const char *now, struct po_rows *out, char *err,
                           size_t errcap) PO_MUST_CHECK;
/* Layer 3: the processed records of rs, one row an event: tenant, key,
 * channel, event type, source, outcome, reason (NULL for none),
 * out_trade_no, amount, currency. A key already there (a twin's
 * committed row) is PO_ERR_CONFLICT. */
#define PO_RECORD_COLUMNS 10
po_err po_engine_record_rows(struct po_store *s, const struct po_rowset *rs, const char *now,
                             char *err, size_t errcap) PO_MUST_CHECK;

bool po_engine_layer_on(const struct po_engine_cfg *cfg, unsigned layer_bit);
void po_engine_outcome(struct po_outcome *o, enum po_outcome_kind k, int layer,
                       enum po_reason reason);
/* An event's data.object for the outbox (merchant may be NULL). */
void po_engine_event_payload(const struct po_event *ev, const char *merchant, enum po_reason reason,
                             struct po_outbox_json *j);
/* "prefix:id", the ledger's account names. */
void po_engine_account(char *buf, size_t cap, const char *prefix, const char *id);

/* ---- the committer's table of committed events (known.c) ----
 * Filled only from a committed batch's answers (applied, duplicate);
 * emptied whenever what it remembers might not be the database's any more.
 * All four are safe from any thread; k may be NULL (no table: never a hit). */
struct po_known;
/* A table of about capacity events (0: *out NULL, none). */
po_err po_known_new(int capacity, struct po_known **out) PO_MUST_CHECK;
void po_known_free(struct po_known *k);
/* Whether ev may be remembered at all: not an operator's decision, not a
 * cumulative refund amount (resolved against what is recorded). */
bool po_known_eligible(const struct po_event *ev);
void po_known_put(struct po_known *k, const struct po_event *ev);
/* True only for an event put since the last emptying, with every field the
 * engine's answer depends on equal. */
bool po_known_has(struct po_known *k, const struct po_event *ev);
void po_known_clear(struct po_known *k);

#endif
