/*
 * order_query.h — the order at its channel (order_query.c): the active query, for missed
 * callbacks, and closing it there before payonce closes it.
 * Part of service.h (which includes every service header).
 */
#ifndef PO_SERVICE_ORDER_QUERY_H
#define PO_SERVICE_ORDER_QUERY_H

#include "../../channel/channel.h"
#include "../accounts/account.h"
#include "../../core/core.h"
#include "../../engine/engine.h"
#include "../../runtime/runtime.h"
#include "../../store/store.h"

#include <jansson.h>

/* ---- active order query (order_query.c) ---- */

struct po_query_report {
    int64_t queried, paid, replayed, matched, not_paid, failed;
    char first_failure[PO_ERRBUF_SIZE]; /* "ORDER: why" of the first failed one */
    bool throttled; /* the channel's rate limit stopped the round (the rest next round) */
};

/*
 * Every order of the tenant still PAYING on this channel (or on none) and
 * older than min_age_s is queried at the channel's order-query API; only a
 * channel-signed "paid" answer is replayed through the engine (source
 * query) with exactly the key the callback would have had. At most limit
 * orders a round. PO_ERR_INVALID when the channel has no query API.
 * committer: serve's (its one front door to the engine); NULL applies on s
 * (the offline CLI).
 */
po_err po_order_query_round(struct po_store *s, struct po_committer *committer,
                            const struct po_channel_account *acct, int64_t min_age_s, int limit,
                            struct po_query_report *out, char *err, size_t errcap) PO_MUST_CHECK;

/* ---- closing an order at its channel first (order_query.c) ---- */

enum po_channel_close {
    PO_CC_LOCAL,     /* nothing to do at a channel (not PAYING, no channel, a channel
                        without a close API, no account of the tenant for it, or one
                        without the API base URL and merchant key): close here alone */
    PO_CC_CLOSED,    /* the channel closed it (or never had it): close it here */
    PO_CC_PAID,      /* the channel has its payment: applied through the engine
                        (outcome), so the order is no longer open */
    PO_CC_UNDECIDED, /* no decisive answer: the order stays PAYING; ask again later */
};

struct po_close_job {
    char tenant[PO_ID_MAX + 1];
    char out_trade_no[PO_ID_MAX + 1];
    /* the channel's ids the order holds ("" when none): po_order_ref */
    char channel_order_id[PO_TXN_ID_MAX + 1];
    char channel_txn_id[PO_TXN_ID_MAX + 1];
    const struct po_channel_ops *ch;
    struct po_account_ref *ref;            /* the account, or NULL (not loaded) */
    const struct po_channel_account *acct; /* ref's account */
    bool callable; /* PAYING on a channel with a close API, the account loaded */
};

struct po_close_report {
    enum po_channel_close result;
    long http_status;
    char why[PO_REASON_SIZE];  /* UNDECIDED: the channel's code or what was wrong */
    struct po_outcome outcome; /* PAID: what the engine made of the payment */
};

/* Reads the order and the tenant's account for its channel (from
 * accounts, serve's cache; with none unsealed with master:
 * po_accounts_use) into job. PO_ERR_NOT_FOUND: no such order. */
po_err po_order_close_prepare(struct po_store *s, struct po_accounts *accounts,
                              const unsigned char *master, const char *tenant,
                              const char *out_trade_no, struct po_close_job *job) PO_MUST_CHECK;
/*
 * Asks the channel to close job's order (no connection is held: the call
 * may take the API's whole timeout). A refusal is settled by the order
 * query: paid -> the payment enters the engine with exactly the key its
 * callback would have had (committer: serve's front door; NULL: on s, the
 * offline CLI); not paid -> closed. Non-OK only for out-of-memory.
 */
po_err po_order_close_call(struct po_close_job *job, struct po_store *s,
                           struct po_committer *committer,
                           struct po_close_report *out) PO_MUST_CHECK;
void po_close_job_free(struct po_close_job *job);

/* prepare + call, and, when the channel closed it (or has nothing to
 * close), the close here — through committer (serve), or in a
 * transaction of its own on s (the CLI). PO_ERR_NOT_FOUND: no such order;
 * a PAID order is left as it is (out->result LOCAL, nothing closed). */
po_err po_order_close_everywhere(struct po_store *s, struct po_committer *committer,
                                 struct po_accounts *accounts, const unsigned char *master,
                                 const char *tenant, const char *out_trade_no,
                                 struct po_close_report *out) PO_MUST_CHECK;

struct po_expiry_report {
    int64_t expired, closed, paid, undecided;
};
/*
 * Every order still PAYING past its expiry (time_expire, or its tenant's
 * default; at most limit a round, the oldest first) is closed the way
 * POST /v1/orders/{no}/close closes it: at its channel first, then here;
 * paid there -> credited (not closed); no decisive answer -> left PAYING
 * for the next round. The local close goes through committer (serve), or
 * a transaction of its own on s.
 */
po_err po_order_expire_round(struct po_store *s, struct po_committer *committer,
                             struct po_accounts *accounts, const unsigned char *master, int limit,
                             struct po_expiry_report *out, char *err, size_t errcap) PO_MUST_CHECK;

/* ---- refunds the channel accepted and never answered (order_query.c) ---- */

struct po_refund_query_report {
    int64_t queried, applied, matched, pending, failed;
    int64_t throttled; /* refunds not asked about: their channel's rate limit this round */
};
/*
 * Refunds submitted to their channel and still PROCESSING min_age_s after
 * their last change (their notification lost, or late) are queried at the
 * channel's refund-query API; a final answer (SUCCESS / CLOSED / ABNORMAL)
 * the channel signed enters the engine with exactly the key the refund's
 * notification would have had (source query). At most limit a round.
 * committer: serve's; NULL applies on s.
 */
po_err po_refund_query_round(struct po_store *s, struct po_committer *committer,
                             struct po_accounts *accounts, const unsigned char *master,
                             int64_t min_age_s, int limit, struct po_refund_query_report *out,
                             char *err, size_t errcap) PO_MUST_CHECK;

/* ---- recovering missed notifications from the channel's events (order_query.c) ---- */

struct po_recover_report {
    int64_t events, replayed, matched, rejected, ignored;
    bool whole;     /* the walk covered everything since the cursor: it moved */
    int64_t cursor; /* the events' creation time it starts from next */
    char why[PO_REASON_SIZE];
};

/*
 * Walks the account's channel events (ops events_since, page events a
 * page) from the tenant's cursor (the newest event of the last whole walk,
 * less a 5-minute overlap; the first walk starts a day before now) and
 * applies each payment or refund through the engine with exactly its
 * webhook's key (committer: serve's; NULL: on s): a webhook that never came
 * is credited once, one that came is a duplicate. The cursor moves only
 * after a whole walk. PO_ERR_INVALID when the channel has no events API.
 */
po_err po_events_recover_round(struct po_store *s, struct po_committer *committer,
                               const struct po_channel_account *acct, int64_t now, int page,
                               struct po_recover_report *out, char *err,
                               size_t errcap) PO_MUST_CHECK;

#endif
