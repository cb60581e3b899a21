/*
 * callback.h — one channel callback: account, adapter, engine -> decision (callback.c).
 * Part of service.h (which includes every service header).
 *
 * payments/ is the room of money at the channels: the callback path
 * (callback.c), an order's payment (order_pay.h), the active query and
 * missed-event recovery (order_query.h), refund submission
 * (refund_submit.h), the tenant API's Idempotency-Key records (idem.h) and
 * the callback traffic records (traffic.h). It calls accounts/ only.
 */
#ifndef PO_SERVICE_CALLBACK_H
#define PO_SERVICE_CALLBACK_H

#include "../../channel/channel.h"
#include "../../core/core.h"
#include "../../engine/engine.h"
#include "../../runtime/runtime.h"
#include "../../store/store.h"
#include "../accounts/account.h"

#include <jansson.h>

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
    /* Each verified callback that reaches the committer is recorded as
     * received (callback_record, audit.c), in its batch. */
    bool record;
};

/* What payonce decided about one callback: the outcome, the reason, and
 * the HTTP status of a FAIL (0 when the channel is told SUCCESS). */
struct po_callback_decision {
    struct po_outcome outcome; /* kind IGNORED / INVALID outside the engine */
    unsigned fail_status;      /* 0: ack SUCCESS */
    char out_trade_no[PO_ID_MAX + 1];
    char detail[160]; /* why it was refused, for the log; never secrets */
    /* a duplicate answered from the committer's table of committed events:
     * its record is written after the answer, in the committer's next
     * batch (docs/operations.md, "Disputes: the callback record") */
    bool remembered;
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
    enum po_outcome_kind alert_kind; /* the decision once its alert is written */
    bool verified, rechecked, restale;
};

/*
 * One answered callback as every record of it reads it — the ack's
 * outcome header, the metrics, the console's traffic count and delivery,
 * and the access-log line — made once from the decision, so that each
 * value is looked up and checked once (po_callback_summarize). Points into
 * the callback: valid while it is.
 */
struct po_callback_summary {
    const struct po_channel_ops *ch;
    const char *tenant;     /* NULL: not a tenant id */
    const char *request_id; /* as the callback carried it */
    uint64_t micros;        /* from its arrival to the summary */
    struct po_outcome outcome;
    unsigned fail_status; /* 0: ack SUCCESS */
    bool remembered;      /* as the decision's */
    bool verified;        /* verification ran: its delivery is recorded */
    const char *outcome_name, *reason_name;
    /* The decision's order (NULL: none, or not an id), and the event
     * verification read (NULL and "": none): its type's name, its refund's
     * number and its idempotency key. */
    const char *out_trade_no, *event_type, *out_refund_no;
    char key[PO_KEY_SIZE + 1];
    /* A payment applied now: its amount and currency (else 0 and NULL). */
    int64_t credited_minor;
    const char *currency;
};

/* The summary of cb, once its decision is final, at now_us (po_now_us()). */
void po_callback_summarize(const struct po_callback *cb, uint64_t now_us,
                           struct po_callback_summary *out);

/*
 * Handles one callback (see callback.c for the steps). Returns false when
 * the decision is final now (done() is not called), true when it will come
 * through done(), called once from another thread — after the batch holding
 * the event committed, never before. Never fails: every error is a
 * decision (docs/operations.md, "What each ack means").
 */
bool po_callback_start(const struct po_callback_ctx *ctx, struct po_callback *cb);

#endif
