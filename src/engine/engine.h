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
 * The engine includes no database, OpenSSL or HTTP header (outbox event ids
 * are SHA-256 through src/crypto).
 */
#ifndef PO_ENGINE_H
#define PO_ENGINE_H

#include "../core/core.h"
#include "../crypto/crypto.h"
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
 * one outcome per event — retry when the database failed them: it cannot
 * fail otherwise (a broken precondition is an assertion).
 */
void po_engine_apply_batch(struct po_store *s, const struct po_engine_cfg *cfg,
                           const struct po_event *ev, size_t n, struct po_outcome *out);

/*
 * Records a durable alert for a verified event that cannot be applied for a
 * reason found before the engine (e.g. a callback for another merchant id),
 * in its own transaction. Writing the same event and reason twice leaves
 * one alert. PO_ERR_TRANSIENT: nothing recorded. outcome: the callback's,
 * for the log line (NULL when the event is not a callback's).
 */
po_err po_engine_alert(struct po_store *s, const struct po_event *ev, enum po_reason reason,
                       const char *detail, const char *outcome) PO_MUST_CHECK;
/* The same inside the caller's transaction (the committer's batch). */
po_err po_engine_alert_in(struct po_store *s, const struct po_event *ev, enum po_reason reason,
                          const char *detail, const char *outcome) PO_MUST_CHECK;

/* A batch of one. */
void po_engine_apply(struct po_store *s, const struct po_engine_cfg *cfg, const struct po_event *ev,
                     struct po_outcome *out);

/*
 * Work that is not an event but must commit in the same batch (the tenant
 * API's writes): fn runs inside its own savepoint after the batch's events;
 * a non-OK return rolls its writes back to the savepoint and is kept in
 * rc. rc is PO_ERR_TRANSIENT for every work of a batch that did not commit.
 */
struct po_engine_work {
    po_err (*fn)(struct po_store *s, void *ctx);
    void *ctx;
    po_err rc; /* out */
};
/* po_engine_apply_batch with works: 0..PO_BATCH_MAX events and works, at
 * least one of either. */
void po_engine_apply_mixed(struct po_store *s, const struct po_engine_cfg *cfg,
                           const struct po_event *ev, size_t n, struct po_outcome *out,
                           struct po_engine_work *work, size_t nwork);
/* The same, with the callback records of its events and works (audit.c),
 * inserted after them in the same transaction: the batch commits with its
 * evidence or not at all. */
struct po_audit_record;
void po_engine_apply_recorded(struct po_store *s, const struct po_engine_cfg *cfg,
                              const struct po_event *ev, size_t n, struct po_outcome *out,
                              struct po_engine_work *work, size_t nwork,
                              struct po_audit_record *const *rec, size_t nrec);

/* ---- the callback record (audit.c; docs/reliability.md) ----
 *
 * Every verified callback as received, written by the batch that applies
 * it, sealed afterwards into its tenant's hash chain. */
#define PO_AUDIT_REQUEST_ID_SIZE 48
#define PO_AUDIT_PATH_SIZE 192
struct po_audit_in {
    const char *tenant, *request_id, *channel, *path;
    const char *out_trade_no; /* NULL: none */
    int64_t received_ms;      /* unix ms */
    const char *headers;      /* "Name: value\r\n"..., as received */
    size_t headers_len;
    const char *body;
    size_t body_len;
};
struct po_audit_record {
    char tenant[PO_ID_MAX + 1];
    char request_id[PO_AUDIT_REQUEST_ID_SIZE];
    char received_at[PO_TIME_SIZE];
    char channel[PO_CHANNEL_SIZE];
    char path[PO_AUDIT_PATH_SIZE];
    char out_trade_no[PO_ID_MAX + 1];
    char digest[65];
    char *headers, *body; /* base64 */
};
/* A record of in (copied, encoded, its digest computed); PO_ERR_INVALID
 * when a field is too long. Freed with po_audit_record_free. */
po_err po_audit_record_new(const struct po_audit_in *in,
                           struct po_audit_record **out) PO_MUST_CHECK;
void po_audit_record_free(struct po_audit_record *r);
/* The chain's key, derived from the master key (HMAC-SHA-256 of a fixed
 * label): the links from a chain's keyed_from on and its checkpoints are
 * MAC'd with it. Functions below take it, or NULL without a master key
 * (development: plain SHA-256, and verify says the chain is unkeyed). */
#define PO_AUDIT_KEY_LEN 32
void po_audit_key(const unsigned char master[PO_MASTER_KEY_LEN],
                  unsigned char out[PO_AUDIT_KEY_LEN]);
#define PO_AUDIT_PRUNE_EVERY_S 3600      /* a tenant's base moves at most once an hour */
#define PO_AUDIT_CHECKPOINTS_MAX 1000000 /* checkpoints a verify reads per tenant */
/* Inserts n (0..PO_BATCH_MAX) records in the caller's transaction. */
po_err po_audit_insert(struct po_store *s, struct po_audit_record *const *r, size_t n, char *err,
                       size_t errcap) PO_MUST_CHECK;
/* Seals up to limit unsealed records into their tenants' chains, in the
 * caller's transaction; with key, a chain not keyed yet is keyed from its
 * next record on (an 'adopt' checkpoint). PO_ERR_INVALID for a keyed
 * chain without key. */
po_err po_audit_seal(struct po_store *s, const unsigned char *key, int limit, int64_t *out_sealed,
                     char *err, size_t errcap) PO_MUST_CHECK;
/* Deletes sealed records received before `before` (ISO time), moving each
 * chain's base forward through a 'prune' checkpoint (a tenant at most once
 * every PO_AUDIT_PRUNE_EVERY_S); in the caller's transaction. */
po_err po_audit_prune(struct po_store *s, const unsigned char *key, const char *before,
                      int64_t *out_pruned, char *err, size_t errcap) PO_MUST_CHECK;
/* A chain head saved earlier (payonce audit head), checked by verify: its
 * head record, and its base (base_seq -1: not known, an older anchor). */
struct po_audit_anchor {
    char tenant[PO_ID_MAX + 1];
    int64_t seq;
    char hash[65];
    int64_t base_seq;
    char base_hash[65];
    bool base_moved_ok; /* (verify's) a checkpoint moved the base on from it */
};
#define PO_AUDIT_PROBLEMS_MAX 32
struct po_audit_report {
    int64_t tenants, records, unsealed, anchors_checked, anchors_pruned;
    int64_t checkpoints; /* checked */
    int64_t unkeyed;     /* chains with plain links only (no master key when sealed) */
    int64_t broken;      /* problems found (the first of each tenant's chain, and late seals) */
    int nproblems;
    struct po_audit_problem {
        char tenant[PO_ID_MAX + 1];
        char what[320];
    } problem[PO_AUDIT_PROBLEMS_MAX];
};
/* Walks every tenant's chain (or tenant's), in one read snapshot. Records
 * unsealed since before late_before (ISO time) are a problem. */
po_err po_audit_verify(struct po_store *s, const unsigned char *key, const char *tenant,
                       const char *late_before, struct po_audit_anchor *anchors, int nanchors,
                       struct po_audit_report *out, char *err, size_t errcap) PO_MUST_CHECK;
/* Rows: tenant_id, seq, hash, base_seq, base_hash, keyed_from (0: none) of
 * every chain. */
po_err po_audit_heads(struct po_store *s, struct po_rows *out, char *err,
                      size_t errcap) PO_MUST_CHECK;
/* A tenant's records of an order, a request id or a seq (NULL / 0: not
 * that), oldest first, at most 100. Rows: seq, request_id, received_at,
 * channel, path, out_trade_no, headers, body (base64), digest, prev_hash,
 * hash, the chain's keyed_from (0: none). */
po_err po_audit_find(struct po_store *s, const char *tenant, const char *out_trade_no,
                     const char *request_id, int64_t seq, struct po_rows *out, char *err,
                     size_t errcap) PO_MUST_CHECK;
/* Whether row i of po_audit_find matches its digest and (sealed) its hash
 * (a keyed link checked with key; without it, not intact). */
po_err po_audit_row_ok(const struct po_rows *p, int i, const char *tenant, const unsigned char *key,
                       bool *out_ok) PO_MUST_CHECK;

/* ---- the committer (committer.c) ----
 *
 * Request threads verify and normalise in parallel, then hand their event
 * (or work) to the committer and wait: each worker thread owns one store
 * connection and applies what is queued for it as ONE batch — one
 * transaction, one savepoint an event — and answers every item only after
 * COMMIT returned (a failed COMMIT answers every item retry). A lone item
 * on an idle worker is applied at once; under load the batch grows to
 * batch_max (waiting up to batch_wait_us for items announced with
 * po_committer_expect, or, without announcements, while the worker is
 * busy). Items are routed to workers by a key (tenant and
 * order), so twins meet in one worker, and workers lock balance rows in one
 * global order. SQLite: one worker (one writer). Correctness across
 * workers, processes and nodes comes from layers 2 and 3 alone.
 */
struct po_commit_item;
/* What the committer's guard checks of one item: the channel account that
 * verified it, and the version it had. */
struct po_guard_token {
    char tenant[PO_ID_MAX + 1];
    char channel[PO_CHANNEL_SIZE];
    int64_t version;
    bool stale; /* out */
};

struct po_committer_cfg {
    const char *db_url;
    int workers;       /* 1..PO_COMMITTER_WORKERS_MAX (SQLite: 1) */
    int batch_max;     /* 1..PO_BATCH_MAX */
    int batch_wait_us; /* 0..PO_BATCH_WAIT_US_MAX */
    int queue_max;     /* items waiting per worker; beyond: PO_ERR_LIMIT */
    /*
     * Optional: called on the worker's connection before each batch's
     * transaction with the tokens of the batch's items that carry one
     * (copies: an item may be answered at its deadline meanwhile); it sets
     * stale on those that must not be applied (the channel account that
     * verified them changed since). A stale item is answered at once, not
     * applied, out retry with stale set: its caller verifies again. An
     * error answers the whole batch retry.
     */
    po_err (*guard)(struct po_store *s, struct po_guard_token *t, size_t n, void *ctx);
    void *guard_ctx;
    /*
     * The table of committed events (docs/internals.md, "Redeliveries
     * answered from memory"): about known_max of the events its batches
     * answered applied or duplicate, put there after COMMIT returned, for
     * po_committer_known. Emptied when a batch does not commit all of its
     * events or a worker's connection is new (a failover may have lost what
     * it remembers). 0: no table. Never with layer 1 switched off.
     */
    int known_max;
    /* Tests: the engine's switches, and a fault hook on every connection. */
    const struct po_engine_cfg *engine;
    po_store_fault_fn fault;
    void *fault_ctx;
};

struct po_commit_item {
    /* in: an event, or (work.fn set) a work, or (alert.reason set) the
     * alert of a verified event that cannot be applied (ev), written with
     * po_engine_alert_in from the batch's own copy, so that it may have a
     * deadline like an event; its result is in work.rc */
    struct po_event ev;
    struct po_engine_work work;
    struct po_commit_alert {
        enum po_reason reason; /* PO_R_NONE: not an alert */
        char detail[PO_DETAIL_SIZE];
        char outcome[16]; /* the callback's outcome, for the log line */
    } alert;
    char route[PO_ID_MAX * 2 + 2]; /* routing key; "" routes by the event's tenant and order */
    bool has_guard;                /* guard is set, for cfg.guard */
    struct po_guard_token guard;
    /* The verified callback as received (NULL: none), inserted by the
     * batch that applies the item. Once submitted it is the committer's
     * (freed by it, NULL when done() is called); a refused submit leaves it
     * the caller's. */
    struct po_audit_record *record;
    /* An event's or an alert's deadline (po_now_us() clock; 0: none —
     * works never have one). Past it the item is answered retry (deadline_exceeded) at once,
     * whether it is still queued or in a batch the database has not
     * finished: its caller's answer (the channel's FAIL) never waits for a
     * database that does not answer. A batch that still commits later
     * commits it too; the channel's retry is then a duplicate. */
    uint64_t deadline_us;
    /* out, valid in done() */
    struct po_outcome out;
    bool stale; /* refused by cfg.guard */
    /* Called exactly once, from a committer thread, when the item is
     * answered; the item must live until then. */
    void (*done)(struct po_commit_item *it);
    void *user;
    struct po_commit_item *next; /* internal */
};

struct po_committer;
po_err po_committer_start(const struct po_committer_cfg *cfg, struct po_committer **out, char *err,
                          size_t errcap) PO_MUST_CHECK;
/* Queues an item (the event must be valid). PO_ERR_LIMIT when its
 * worker's queue is full: nothing queued, done() never called. */
po_err po_committer_submit(struct po_committer *c, struct po_commit_item *it) PO_MUST_CHECK;
/* Announces items on their way (delta +1: a callback being verified that
 * will be submitted or refused soon; -1 when it was). While items are
 * announced, a committer about to apply a batch waits for them, up to
 * batch_wait_us, so that one commit serves them too. */
void po_committer_expect(struct po_committer *c, int delta);
/* Submits and waits for the answer (for callers that may block). A full
 * queue answers retry. */
void po_committer_apply(struct po_committer *c, struct po_commit_item *it);
/* The same for n items submitted together (their done and user are set
 * here); returns once every one is answered. */
void po_committer_apply_many(struct po_committer *c, struct po_commit_item *items, size_t n);
/* What the committer has done, for the metrics. */
struct po_committer_stats {
    uint64_t batches, items, commit_failures;
    uint64_t deadline_exceeded; /* items answered retry at their deadline */
    uint64_t size_hist[9];      /* batch sizes 1, 2-3, 4-7, … 128-255, 256 */
    int queued;                 /* now */
    uint64_t known_hits;        /* po_committer_known answers true */
    uint64_t known_clears;      /* the table emptied */
    /* the workers' connections (po_store_round_trips, po_store_pages_written):
     * the bench's work per credit */
    uint64_t round_trips, pages_written;
};
void po_committer_stats(struct po_committer *c, struct po_committer_stats *out);
/* True when ev — this very event, every field the engine's answer depends
 * on — was answered applied or duplicate by a batch that committed (since
 * the table was last emptied): its redelivery is a duplicate, without a
 * batch. False when there is no table, or ev is not in it. Any thread. */
bool po_committer_known(struct po_committer *c, const struct po_event *ev);
/* Stops taking items, answers every queued one, joins the workers. */
void po_committer_stop(struct po_committer *c);

/* ---- the engine's one door (door.c) ----
 *
 * Every event applied and every alert written from inside serve goes
 * through serve's committer (c): SQLite's one writer stays one, no batch of
 * callbacks waits on another connection's lock, and the table of committed
 * events sees every commit. The offline CLI has no committer (c NULL): the
 * door applies on its own connection s. Outside engine/ nothing calls
 * po_engine_apply* or po_engine_alert (scripts/lint.sh): this is the way in.
 */
struct po_door {
    struct po_store *s;     /* reads, and the writes of the offline CLI */
    struct po_committer *c; /* serve's committer; NULL: the offline CLI */
};
/* n (1..PO_BATCH_MAX) validated events, one outcome each in out (retry:
 * not applied, try again). Through the committer each event is an item of
 * its own (routed by tenant and order, so a batch may commit in parts); on
 * s, one transaction. */
void po_door_apply(const struct po_door *d, const struct po_event *ev, size_t n,
                   struct po_outcome *out);
/* po_door_apply, the events answered retry applied again (after 100 ms,
 * 200 ms, …), at most tries times in all; PO_ERR_TRANSIENT when some are
 * still retry (out: every event's last outcome). */
po_err po_door_apply_retrying(const struct po_door *d, const struct po_event *ev, size_t n,
                              struct po_outcome *out, int tries) PO_MUST_CHECK;
/* po_engine_alert through the door (an event that is not a callback's). */
po_err po_door_alert(const struct po_door *d, const struct po_event *ev, enum po_reason reason,
                     const char *detail) PO_MUST_CHECK;
/* fn(s, ctx) in a transaction: a work of the committer's next batch (route:
 * its routing key, < PO_ID_MAX * 2 bytes), else on d->s. Its result. */
po_err po_door_work(const struct po_door *d, const char *route,
                    po_err (*fn)(struct po_store *s, void *ctx), void *ctx) PO_MUST_CHECK;

/* ---- the transactional outbox (outbox.c, docs/webhooks.md) ----
 * Every effect a tenant cares about writes one outbox_event row in the
 * transaction that made it. Types: */
#define PO_OUTBOX_TYPES                                                                            \
    "payment.credited", "payment.suspense", "refund.succeeded", "refund.closed",                   \
        "refund.abnormal", "refund.suspense", "suspense.refunded", "profit_share.recorded",        \
        "order.closed", "alert.raised"
bool po_outbox_type_valid(const char *type);

/* "evt_" + 32 hex digits of SHA-256(tenant, key, type): the same fact, the
 * same id. */
po_err po_outbox_event_id(const char *tenant, const char *key, const char *type,
                          char out[PO_EVENT_ID_SIZE]) PO_MUST_CHECK;

/* An event's data.object: a flat JSON object built member by member. */
struct po_outbox_json {
    char text[PO_OUTBOX_PAYLOAD_MAX];
    size_t len;
    bool overflow;
};
void po_outbox_json_init(struct po_outbox_json *j);
void po_outbox_json_str(struct po_outbox_json *j, const char *name, const char *value);
void po_outbox_json_i64(struct po_outbox_json *j, const char *name, int64_t value);
/* The text, or NULL when it did not fit. */
const char *po_outbox_json_end(struct po_outbox_json *j);

struct po_outbox_row {
    const char *tenant;
    const char *key; /* the effect's idempotency key (an alert's key) */
    const char *type;
    const char *object_id; /* the order's out_trade_no (events of one order are ordered) */
    int64_t seq;           /* its place among the order's events (0: no order) */
    const char *payload;
};
/* Inserts rows (ON CONFLICT DO NOTHING), inside the caller's transaction. */
po_err po_outbox_insert(struct po_store *s, const struct po_outbox_row *rows, int n,
                        const char *now, char *err, size_t errcap) PO_MUST_CHECK;
/* The next place among out_trade_no's events (bumps pay_order.event_seq,
 * under the order's row lock); 0 when there is no such order. */
po_err po_outbox_next_seq(struct po_store *s, const char *tenant, const char *out_trade_no,
                          int64_t *out, char *err, size_t errcap) PO_MUST_CHECK;
/* One event: its place in its order, then its row. payload NULL (did not
 * fit) is PO_ERR_LIMIT. */
po_err po_outbox_put(struct po_store *s, const char *tenant, const char *key, const char *type,
                     const char *out_trade_no, const char *payload, const char *now, char *err,
                     size_t errcap) PO_MUST_CHECK;
/* The same at a place already taken (seq > 0: the statement that changed
 * the order bumped its event_seq); seq 0 takes the next one. */
po_err po_outbox_put_at(struct po_store *s, const char *tenant, const char *key, const char *type,
                        const char *out_trade_no, int64_t seq, const char *payload, const char *now,
                        char *err, size_t errcap) PO_MUST_CHECK;

#endif
