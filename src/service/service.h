/*
 * service.h — the business services that both `payonce serve` and the
 * command line call. http/ and cli/ hold no SQL of their own: every query
 * an operator or a tenant can run lives here once (or in engine/, ledger/,
 * recon/), so the CLI and the API can never disagree about a balance.
 *
 *   callback.c       one channel callback: account, adapter, engine -> decision
 *   account.c        channel accounts: fetch (unsealed), save
 *   views.c          typed reads as JSON: orders, refunds, balances, alerts,
 *                    journal pages, API keys
 *   apikey.c         tenant API keys (only hashes stored)
 *   idem.c           Idempotency-Key records of the tenant API
 *   refund_submit.c  API refunds handed to the channel's refund API
 *   order_query.c    active order query at the channel (missed callbacks)
 *   jobs.c           serve's background jobs on their intervals
 *
 * Contracts follow the house style: po_err return, out-params written only
 * on success, detail in a caller-supplied buffer, nothing changed on error.
 */
#ifndef PO_SERVICE_H
#define PO_SERVICE_H

#include "../channel/channel.h"
#include "../core/core.h"
#include "../engine/engine.h"
#include "../runtime/runtime.h"
#include "../store/store.h"

#include <jansson.h>

/* ---- channel accounts (account.c) ---- */

/* A tenant's stored account for a channel, secrets unsealed with master
 * (NULL in insecure development mode). PO_ERR_NOT_FOUND when absent;
 * PO_ERR_STORE (detail in err) when it cannot be loaded. */
po_err po_account_fetch(struct po_store *s, const unsigned char *master, const char *tenant,
                        const char *channel, struct po_channel_account *out, char *err,
                        size_t errcap) PO_MUST_CHECK;
/* Loads every stored channel account as the gateway will (secrets
 * unsealed with master): report() for each that does not load, with why
 * (a wrong master key, a damaged document). Counts into *checked and
 * *broken; non-OK only when the store cannot be read. */
po_err po_account_check_all(struct po_store *s, const unsigned char *master,
                            void (*report)(void *ctx, const char *tenant, const char *channel,
                                           const char *why),
                            void *ctx, int *checked, int *broken) PO_MUST_CHECK;
/* The stored document of a tenant's account for channel, parsed (*doc
 * NULL when there is none), and when it was last set (updated_at may be
 * NULL). Secrets in it are sealed. */
po_err po_account_doc(struct po_store *s, const char *tenant, const char *channel, json_t **doc,
                      char *updated_at, size_t cap) PO_MUST_CHECK;
/* Whether the tenant has an account for channel, and whether it holds the
 * merchant's API key (refund submission needs it), without unsealing. */
po_err po_account_has_merchant_key(struct po_store *s, const char *tenant, const char *channel,
                                   bool *has_account, bool *has_key) PO_MUST_CHECK;
/* Stores a document built by po_channel_account_build (insert or replace),
 * in its own transaction. PO_ERR_NOT_FOUND when the tenant does not exist. */
po_err po_account_save(struct po_store *s, const char *tenant, const char *channel, const char *doc,
                       char *err, size_t errcap) PO_MUST_CHECK;
/* Tenants having an account for channel, in order (heap array of heap
 * strings; free with po_strings_free). */
po_err po_account_tenants(struct po_store *s, const char *channel, char ***out,
                          int *out_n) PO_MUST_CHECK;
void po_strings_free(char **v, int n);

/* ---- channel accounts in memory (accounts.c) ---- */

struct po_accounts;
struct po_account_ref;
po_err po_accounts_open(const unsigned char *master, struct po_accounts **out) PO_MUST_CHECK;
void po_accounts_close(struct po_accounts *a);
/* The cached account (a reference: release it), or NULL when not cached. */
struct po_account_ref *po_accounts_get(struct po_accounts *a, const char *tenant,
                                       const char *channel);
/* Loads from the store and caches it (*out: a reference). PO_ERR_NOT_FOUND
 * when absent; PO_ERR_STORE (err) when stored but unusable. */
po_err po_accounts_load(struct po_accounts *a, struct po_store *s, const char *tenant,
                        const char *channel, struct po_account_ref **out, char *err,
                        size_t errcap) PO_MUST_CHECK;
/* Compares the stored version of r; when it changed, reloads and sets
 * *out to the fresh reference (else NULL). PO_ERR_NOT_FOUND when the
 * account is gone. */
po_err po_accounts_recheck(struct po_accounts *a, struct po_store *s, struct po_account_ref *r,
                           struct po_account_ref **out, char *err, size_t errcap) PO_MUST_CHECK;
/* The token of the account reference that verified an event, for the
 * committer's guard. */
void po_accounts_token(const struct po_account_ref *r, struct po_guard_token *out);
/* The committer's guard (po_committer_cfg.guard): a token is stale when
 * its account's stored version differs or the account is gone. One read
 * for the batch. */
po_err po_accounts_guard(struct po_store *s, struct po_guard_token *t, size_t n,
                         void *ctx) PO_MUST_CHECK;
/* Drops every entry whose stored version changed or whose row is gone. */
po_err po_accounts_sweep(struct po_accounts *a, struct po_store *s, int *out_dropped) PO_MUST_CHECK;
const struct po_channel_account *po_account_of(const struct po_account_ref *r);
void po_accounts_release(struct po_account_ref *r);

/* ---- one channel callback (callback.c) ---- */

struct po_callback_ctx {
    struct po_store_pool *pool; /* for the worker pool's reads */
    struct po_accounts *accounts;
    struct po_committer *committer;
    struct po_workers *workers;
    /* A callback's budget from its arrival (ms; 0: none): past it, an event
     * still waiting for the database is answered retry (FAIL), so the
     * channel's deadline (WeChat: 5 s) is always met. */
    int deadline_ms;
};

/* What payonce decided about one callback: the outcome, the reason, and
 * the HTTP status of a FAIL (0 when the channel is told SUCCESS). */
struct po_callback_decision {
    struct po_outcome outcome; /* kind IGNORED / INVALID outside the engine */
    unsigned fail_status;      /* 0: ack SUCCESS */
    char out_trade_no[PO_ID_MAX + 1];
    char detail[160]; /* why it was refused, for the log; never secrets */
};

struct po_callback {
    /* in: set by the caller; they (and req's body and headers) must stay
     * valid until the decision */
    const struct po_channel_ops *ch;
    const char *tenant;
    struct po_notify_req req;
    bool body_too_large;
    const char *request_id;
    uint64_t arrived_us;                  /* po_now_us() when it arrived */
    void (*done)(struct po_callback *cb); /* a decision that came later */
    void *user;
    /* out */
    struct po_callback_decision decision;
    /* internal */
    const struct po_callback_ctx *ctx;
    struct po_account_ref *acct;
    struct po_notify_result res;
    struct po_commit_item item;
    bool verified, rechecked, restale;
};

/*
 * Handles one callback (see callback.c for the steps). Returns false when
 * the decision is final now (done() is not called), true when it will come
 * through done(), called once from another thread — after the batch holding
 * the event committed, never before. Never fails: every error is a
 * decision (docs/operations.md, "What each ack means").
 */
bool po_callback_start(const struct po_callback_ctx *ctx, struct po_callback *cb);

/* ---- typed reads (views.c) ----
 * Each returns a new JSON value (*out, caller json_decrefs) with integer
 * minor units for money and null for absent fields; *out is NULL when the
 * object does not exist. */
po_err po_view_order(struct po_store *s, const char *tenant, const char *out_trade_no,
                     json_t **out) PO_MUST_CHECK;
po_err po_view_refund(struct po_store *s, const char *tenant, const char *out_refund_no,
                      json_t **out) PO_MUST_CHECK;
/* [{account, currency, balance, updated_at}] in account order. */
po_err po_view_balances(struct po_store *s, const char *tenant, json_t **out) PO_MUST_CHECK;

/* A page of a keyset-paged list: items after (after_ts, after_key), at most
 * limit of them; *out_more when there are more, with the last item's
 * position in last_ts/last_key. */
struct po_page {
    const char *after_ts; /* "" from the start */
    const char *after_key;
    int64_t limit;
    bool more;                                     /* out */
    char last_ts[PO_TIME_MAX];                     /* out */
    char last_key[PO_KEY_MAX + PO_REASON_MAX + 2]; /* out */
};
/* A tenant's alerts, oldest first; state NULL or "" for every state,
 * else open, acknowledged or resolved. Each has its id (the alert key),
 * its kind (reason) and its state with who set it, when and why. */
po_err po_view_alerts(struct po_store *s, const char *tenant, const char *state,
                      struct po_page *page, json_t **out) PO_MUST_CHECK;
/* Journals with their postings; order_filter NULL or "" for all. */
po_err po_view_journal(struct po_store *s, const char *tenant, const char *order_filter,
                       struct po_page *page, json_t **out) PO_MUST_CHECK;
/* [{key_id, created_at, revoked_at}] */
po_err po_view_apikeys(struct po_store *s, const char *tenant, json_t **out) PO_MUST_CHECK;
/* A tenant's orders, oldest first, keyset-paged on (created_at,
 * out_trade_no); each filter NULL or "" for all; since: created at or
 * after this ISO 8601 time. */
struct po_order_filter {
    const char *status, *merchant, *since;
};
po_err po_view_orders(struct po_store *s, const char *tenant, const struct po_order_filter *f,
                      struct po_page *pg, json_t **out) PO_MUST_CHECK;
/* What the operator's dashboard shows from the database, every tenant:
 * alerts not resolved (newest 100), the last 10 reconciliation runs,
 * merchants' balances, the webhook deliveries' state. */
po_err po_view_dashboard(struct po_store *s, json_t **out) PO_MUST_CHECK;
/* [{tenant, name, created_at, merchants, channels: [..]}] by tenant id. */
po_err po_view_tenants(struct po_store *s, json_t **out) PO_MUST_CHECK;
/* [{merchant, created_at}] of a tenant. */
po_err po_view_merchants(struct po_store *s, const char *tenant, json_t **out) PO_MUST_CHECK;
/* A tenant's channel account as an operator may see it: secrets and keys
 * replaced by "(sealed)" / "(PEM, N bytes)", platform certificate serials
 * with their expiry (`expired` judged at now, unix seconds). *out NULL
 * when there is no such account. */
po_err po_view_channel(struct po_store *s, const char *tenant, const char *channel, int64_t now,
                       json_t **out) PO_MUST_CHECK;
/* The channel of an order ("" when any channel may pay it); *found false
 * when there is no such order. */
po_err po_view_order_channel(struct po_store *s, const char *tenant, const char *out_trade_no,
                             char *channel, size_t cap, bool *found) PO_MUST_CHECK;

/* ---- the alerts workflow (alerts.c) ---- */

enum po_alert_action { PO_ALERT_ACK, PO_ALERT_RESOLVE };
/* Moves a tenant's alert: open -> acknowledged -> resolved (or open ->
 * resolved), recording who (actor, 1-64 printable characters) and why
 * (note, at most 500 bytes of text; required to resolve) on the alert and
 * in its audit trail, in one transaction. Acknowledging an acknowledged
 * alert again is a no-op (*changed false); anything else out of order is
 * PO_ERR_CONFLICT naming the state; an unknown id PO_ERR_NOT_FOUND. */
po_err po_alert_act(struct po_store *s, const char *tenant, const char *alert_id,
                    enum po_alert_action action, const char *actor, const char *note, bool *changed,
                    char *err, size_t errcap) PO_MUST_CHECK;
/* The audited operator action of a refused payment's alert (reasons
 * unknown_order, amount_mismatch, currency_mismatch, channel_mismatch):
 * the payment rebuilt from the alert goes through the engine's own entry
 * with its own idempotency key (po_engine_apply), so it is credited at
 * most once whoever replays it; the replay and its outcome are appended to
 * the audit trail, and an applied (or already credited) payment resolves
 * the alert. out: the engine's outcome. Never edits money directly. */
po_err po_alert_replay(struct po_store *s, const char *tenant, const char *alert_id,
                       const char *actor, const char *note, struct po_outcome *out, bool *resolved,
                       char *err, size_t errcap) PO_MUST_CHECK;
/* The audited operator action of a refund_after_close alert: the channel
 * refunded the payer after payonce had closed the refund (the money left,
 * parked in suspense). Accepting it makes the refund the order's after all,
 * through the engine's own entry with the acceptance's own key (the
 * success's + "|accepted"): the refund SUCCESS, reserved and refunded on the
 * order (rejected, refund_exceeds_reserved, if that would refund more than
 * was paid), the amount moved from suspense to the merchant's payable — at
 * most once, whoever accepts it. Audited as 'accept'; applied (or already)
 * resolves the alert. out: the engine's outcome. */
po_err po_alert_accept(struct po_store *s, const char *tenant, const char *alert_id,
                       const char *actor, const char *note, struct po_outcome *out, bool *resolved,
                       char *err, size_t errcap) PO_MUST_CHECK;
/* The refund an operator asked for to return a payment parked in suspense
 * (po_alert_refund), as it stands after the call. */
struct po_suspense_refund {
    char out_refund_no[PO_ID_MAX + 1];
    char out_trade_no[PO_ID_MAX + 1];
    char channel[PO_CHANNEL_MAX];
    char txn_id[PO_TXN_ID_MAX + 1];
    int64_t amount;
    char currency[4];
    char status[16];       /* PROCESSING, SUCCESS, CLOSED, ABNORMAL */
    char submit_state[16]; /* pending, submitted, rejected, manual */
    char submit_error[64];
    bool created; /* false: this number already returned this payment */
};
/* The audited operator action of a suspense alert (paid_after_close,
 * duplicate_payment: a payment whose money the engine parked in suspense):
 * records a refund of exactly that payment (its channel transaction, its
 * amount) as out_refund_no, reserving nothing on the order, appends
 * 'refund' to the audit trail and acknowledges the alert, in one
 * transaction; then, when master is given and the channel has a refund
 * API, submits it (else it waits for serve's jobs, or — no refund API —
 * for the channel's notification of a refund made there with that
 * number). The money moves only when the channel's success comes through
 * the engine (callback, query, reconciliation) with the refund's own key:
 * suspense -> clearing, and the alert is resolved by payonce. At most one
 * refund per suspense payment is live (a closed one may be followed by
 * another number); the same number again is the same refund (*created
 * false). A refused alert, a resolved one, or a number used by another
 * refund is PO_ERR_INVALID / PO_ERR_CONFLICT with why in err. */
po_err po_alert_refund(struct po_store *s, const unsigned char *master, const char *tenant,
                       const char *alert_id, const char *out_refund_no, const char *actor,
                       const char *note, struct po_suspense_refund *out, char *err,
                       size_t errcap) PO_MUST_CHECK;
/* Whether a state name is one an alert can be in. */
bool po_alert_state_valid(const char *state);

/* ---- tenant API keys (apikey.c) ---- */

/* Creates a key for an existing tenant: the whole key is written to key
 * (shown once), only its SHA-256 is stored. */
po_err po_apikey_create(struct po_store *s, const char *tenant, char key[PO_APIKEY_LEN + 1],
                        char key_id[PO_APIKEY_ID_LEN + 1], char *err, size_t errcap) PO_MUST_CHECK;
/* Revokes at once; revoking twice is fine. PO_ERR_NOT_FOUND: no such key. */
po_err po_apikey_revoke(struct po_store *s, const char *tenant, const char *key_id, char *err,
                        size_t errcap) PO_MUST_CHECK;
/* The tenant of a valid, unrevoked key; PO_ERR_NOT_FOUND otherwise. */
po_err po_apikey_auth(struct po_store *s, const char *key,
                      char tenant[PO_ID_MAX + 1]) PO_MUST_CHECK;

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

/* ---- refund submission (refund_submit.c) ---- */

/* One submission in three steps, so that no database connection is held
 * across the channel's API call: prepare (a connection: the refund and the
 * channel account), call (no connection; may take the channel API's whole
 * timeout), record (a connection: the decision). */
struct po_refund_pending {
    char out_trade_no[PO_ID_MAX + 1];
    char currency[4];
    char channel[PO_CHANNEL_MAX];
    int64_t amount, total;
    /* A refund of a suspense payment: the transaction refunded (the
     * request names it, not the order) and whether it reserved nothing. */
    char txn_id[PO_TXN_ID_MAX + 1];
    bool suspense;
};
struct po_refund_job {
    char tenant[PO_ID_MAX + 1];
    char out_refund_no[PO_ID_MAX + 1];
    struct po_refund_pending p;
    const struct po_channel_ops *ch;
    struct po_channel_account acct;
    bool callable; /* the channel has a refund API and the account loaded */
    struct po_refund_answer ans;
};
/* *found false: not pending (nothing to do). */
po_err po_refund_prepare(struct po_store *s, const unsigned char *master, const char *tenant,
                         const char *out_refund_no, struct po_refund_job *job,
                         bool *found) PO_MUST_CHECK;
po_err po_refund_call(struct po_refund_job *job) PO_MUST_CHECK;
po_err po_refund_record(struct po_store *s, const struct po_refund_job *job, char *state,
                        size_t cap) PO_MUST_CHECK;
void po_refund_job_free(struct po_refund_job *job);

/* Submits one refund still pending submission to its channel's refund API
 * and records the decision; *state (may be NULL) receives submitted,
 * rejected or pending ("" when it was not pending). The outbound call is
 * made outside any transaction. */
po_err po_refund_submit(struct po_store *s, const unsigned char *master, const char *tenant,
                        const char *out_refund_no, char *state, size_t cap) PO_MUST_CHECK;
/* Submits (again) API refunds still pending whose last attempt is older
 * than min_age_s, at most limit. */
po_err po_refund_submit_pending(struct po_store *s, const unsigned char *master, int64_t min_age_s,
                                int limit, int *out_submitted) PO_MUST_CHECK;

/* ---- active order query (order_query.c) ---- */

struct po_query_report {
    int64_t queried, paid, replayed, matched, not_paid, failed;
};

/*
 * Every order of the tenant still PAYING on this channel (or on none) and
 * older than min_age_s is queried at the channel's order-query API; only a
 * channel-signed "paid" answer is replayed through the engine (source
 * query) with exactly the key the callback would have had. At most limit
 * orders a round. PO_ERR_INVALID when the channel has no query API.
 */
po_err po_order_query_round(struct po_store *s, const struct po_channel_account *acct,
                            int64_t min_age_s, int limit, struct po_query_report *out, char *err,
                            size_t errcap) PO_MUST_CHECK;

/* ---- background jobs (jobs.c) ---- */

struct po_jobs_cfg {
    const char *db_url;
    const unsigned char *master; /* NULL in insecure development mode */
    int64_t query_s;             /* active query interval (0 = off) */
    int64_t query_min_age_s;
    int64_t refund_s;    /* refund resubmission interval (0 = off) */
    int64_t retention_s; /* Idempotency-Key retention */
};
struct po_jobs;
/* Starts the jobs thread; it opens its own store connection per round. */
po_err po_jobs_start(const struct po_jobs_cfg *cfg, struct po_jobs **out) PO_MUST_CHECK;
/* Stops and joins it (a round in progress finishes first). */
void po_jobs_stop(struct po_jobs *j);

/* ---- tenant webhooks (webhook_endpoints.c, webhook_delivery.c; docs/webhooks.md) ---- */

/* "*" or a comma-separated list of outbox event types. */
bool po_webhook_events_ok(const char *events, char *err, size_t errcap);

struct po_webhook_new {
    char id[PO_ID_MAX + 1];             /* we_ + 16 hex */
    char secret[PO_WEBHOOK_SECRET_MAX]; /* whsec_…, shown once */
};
/* A new endpoint of tenant for events (NULL: all); its URL must pass the
 * egress policy (po_egress_url_ok: PO_ERR_INVALID); a tenant has at most
 * PO_WEBHOOK_ENDPOINTS_MAX live ones (PO_ERR_LIMIT, nothing added). The
 * secret is sealed with master (stored plain only without one, in
 * insecure development). */
po_err po_webhook_add(struct po_store *s, const unsigned char *master, const char *tenant,
                      const char *url, const char *events, const struct po_egress_policy *egress,
                      struct po_webhook_new *out, char *err, size_t errcap) PO_MUST_CHECK;
/* The tenant's live endpoints (no secrets), with pending and dead counts,
 * keyset-paged on (created_at, id). */
po_err po_webhook_list(struct po_store *s, const char *tenant, struct po_page *pg,
                       json_t **out) PO_MUST_CHECK;
/* One live endpoint as po_webhook_list shows it; PO_ERR_NOT_FOUND. */
po_err po_webhook_get(struct po_store *s, const char *tenant, const char *id,
                      json_t **out) PO_MUST_CHECK;
/* Removes the endpoint: nothing more is sent to it (its pending
 * deliveries end dead, "endpoint removed"; an attempt already in flight
 * finishes and records nothing). */
po_err po_webhook_remove(struct po_store *s, const char *tenant, const char *id, char *err,
                         size_t errcap) PO_MUST_CHECK;
/* Opens every live endpoint's secret as a gateway with master would
 * (a plain one is refused when master is set): *out_broken of
 * *out_checked cannot be opened, the first named in err. */
po_err po_webhook_check_secrets(struct po_store *s, const unsigned char *master, int *out_checked,
                                int *out_broken, char *err, size_t errcap) PO_MUST_CHECK;
/* A new secret for the endpoint (the old one stops at once). */
po_err po_webhook_rotate(struct po_store *s, const unsigned char *master, const char *tenant,
                         const char *id, char secret[PO_WEBHOOK_SECRET_MAX], char *err,
                         size_t errcap) PO_MUST_CHECK;
/* Dead deliveries of the tenant back to pending: one event (event_id), or
 * an endpoint's (endpoint_id) created at or after since (NULL: all). */
po_err po_webhook_redrive(struct po_store *s, const char *tenant, const char *event_id,
                          const char *endpoint_id, const char *since, int64_t *out_count, char *err,
                          size_t errcap) PO_MUST_CHECK;
/* Every attempt at delivering event_id, per endpoint. */
po_err po_webhook_attempts(struct po_store *s, const char *tenant, const char *event_id,
                           json_t **out) PO_MUST_CHECK;
/* An outbox row as the tenant receives it (webhook body, /v1/events):
 * {"id","object":"event","type","created" (unix s),"tenant","data":
 * {"object": payload}} (heap text). */
po_err po_event_envelope(const char *event_id, const char *type, const char *created_at,
                         const char *tenant, const char *payload, char **out) PO_MUST_CHECK;
/* The tenant's events, oldest first (keyset page on created_at, event_id),
 * optionally of one type and/or one order. */
po_err po_view_events(struct po_store *s, const char *tenant, const char *type,
                      const char *out_trade_no, struct po_page *page, json_t **out) PO_MUST_CHECK;
/* Payonce-Signature: "t=<t>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>". */
po_err po_webhook_sign(const char *secret, int64_t t, const char *body, char *header,
                       size_t cap) PO_MUST_CHECK;

struct po_webhooks_cfg {
    const char *db_url;
    const unsigned char *master;    /* NULL in insecure development mode */
    struct po_egress_policy egress; /* where deliveries may go (channel.h) */
    int senders;                    /* concurrent deliveries (default 8) */
    /* In flight at once: per endpoint always; per tenant only while
     * another tenant has deliveries due (a lone tenant may use every
     * sender), and then at most an equal share of the senders. */
    int per_endpoint, per_tenant;
    int64_t pending_max; /* a tenant's pending deliveries before its fan-out waits */
    long timeout_ms;     /* one attempt */
    int64_t retry_base_ms, retry_cap_ms, max_age_s, alert_after_s;
    int poll_ms; /* how often due deliveries are looked for */
};
struct po_webhooks_stats {
    uint64_t delivered, failed, dead;
    int64_t depth, oldest_age_ms;
};
struct po_webhooks;
po_err po_webhooks_start(const struct po_webhooks_cfg *cfg, struct po_webhooks **out, char *err,
                         size_t errcap) PO_MUST_CHECK;
void po_webhooks_stop(struct po_webhooks *w);
void po_webhooks_stats(struct po_webhooks *w, struct po_webhooks_stats *out);

#endif
