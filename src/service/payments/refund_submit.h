/*
 * refund_submit.h — API refunds handed to the channel's refund API (refund_submit.c).
 * Part of service.h (which includes every service header).
 */
#ifndef PO_SERVICE_REFUND_SUBMIT_H
#define PO_SERVICE_REFUND_SUBMIT_H

#include "../../channel/channel.h"
#include "../accounts/account.h"
#include "../../core/core.h"
#include "../../engine/engine.h"
#include "../../runtime/runtime.h"
#include "../../store/store.h"

#include <jansson.h>

/* ---- refund submission (refund_submit.c) ---- */

/* One submission in three steps, so that no database connection is held
 * across the channel's API call: prepare (a connection: the refund and the
 * channel account), call (no connection; may take the channel API's whole
 * timeout), record (a connection: the decision). */
struct po_refund_pending {
    char out_trade_no[PO_ID_MAX + 1];
    char currency[4];
    char channel[PO_CHANNEL_SIZE];
    int64_t amount, total;
    /* A refund of a suspense payment: the transaction refunded (the
     * request names it, not the order) and whether it reserved nothing. */
    char txn_id[PO_TXN_ID_MAX + 1];
    bool suspense;
    /* the channel's ids of the order ("" when none): po_refund_request's */
    char channel_order_id[PO_TXN_ID_MAX + 1];
    char channel_txn_id[PO_TXN_ID_MAX + 1];
};
struct po_refund_job {
    char tenant[PO_ID_MAX + 1];
    char out_refund_no[PO_ID_MAX + 1];
    struct po_refund_pending p;
    const struct po_channel_ops *ch;
    struct po_account_ref *ref;            /* the account, or NULL (not loaded) */
    const struct po_channel_account *acct; /* ref's account */
    bool callable;                         /* the channel has a refund API and the account loaded */
    struct po_refund_answer ans;
};
/* *found false: not pending (nothing to do). The account from accounts,
 * serve's cache (NULL: unsealed with master; po_accounts_use). */
po_err po_refund_prepare(struct po_store *s, struct po_accounts *accounts,
                         const unsigned char *master, const char *tenant, const char *out_refund_no,
                         struct po_refund_job *job, bool *found) PO_MUST_CHECK;
po_err po_refund_call(struct po_refund_job *job) PO_MUST_CHECK;
po_err po_refund_record(struct po_store *s, const struct po_refund_job *job, char *state,
                        size_t cap) PO_MUST_CHECK;
void po_refund_job_free(struct po_refund_job *job);

/* Submits one refund still pending submission to its channel's refund API
 * and records the decision; *state (may be NULL) receives submitted,
 * rejected or pending ("" when it was not pending). The outbound call is
 * made outside any transaction. */
po_err po_refund_submit(struct po_store *s, struct po_accounts *accounts,
                        const unsigned char *master, const char *tenant, const char *out_refund_no,
                        char *state, size_t cap) PO_MUST_CHECK;
/* A round's memory of the tenants' channels that answered with their rate
 * limit (po_rate_limited): the rest of the round asks them
 * nothing, and what it would have asked stays as it is for the next round
 * (the order PAYING, the refund pending or PROCESSING). Bounded: past
 * PO_BACKOFF_MAX pairs a round forgets none it holds and adds no more. */
#define PO_BACKOFF_MAX 64
struct po_backoff {
    int n;
    struct {
        char tenant[PO_ID_MAX + 1];
        char channel[PO_CHANNEL_SIZE];
    } e[PO_BACKOFF_MAX];
};
/* Whether the round stopped asking tenant's channel. */
bool po_backoff_holds(const struct po_backoff *b, const char *tenant, const char *channel);
/* An answer that is the channel's rate limit: the adapter said so
 * (throttled: Alipay's 40005 isv.app-call-limited, …) or HTTP 429 (WeChat
 * Pay FREQUENCY_LIMITED / RATELIMIT_EXCEEDED, Stripe rate_limit). */
bool po_rate_limited(bool throttled, long http_status);
/* Notes an answer of tenant's channel: its rate limit (limited) stops the
 * round asking it (said in the log once); true when it did. */
bool po_backoff_note(struct po_backoff *b, const char *tenant, const char *channel, bool limited,
                     const char *why);

/* Submits (again) API refunds still pending whose last attempt is older
 * than min_age_s, at most limit; a tenant's channel that answers 429 is
 * asked nothing more this round (po_backoff). */
po_err po_refund_submit_pending(struct po_store *s, struct po_accounts *accounts,
                                const unsigned char *master, int64_t min_age_s, int limit,
                                int *out_submitted) PO_MUST_CHECK;

#endif
