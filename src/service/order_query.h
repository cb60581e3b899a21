/*
 * order_query.h — the active order query at the channel, for missed callbacks (order_query.c).
 * Part of service.h (which includes every service header).
 */
#ifndef PO_SERVICE_ORDER_QUERY_H
#define PO_SERVICE_ORDER_QUERY_H

#include "../channel/channel.h"
#include "../core/core.h"
#include "../engine/engine.h"
#include "../runtime/runtime.h"
#include "../store/store.h"

#include <jansson.h>

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
 * committer: serve's (its one front door to the engine); NULL applies on s
 * (the offline CLI).
 */
po_err po_order_query_round(struct po_store *s, struct po_committer *committer,
                            const struct po_channel_account *acct, int64_t min_age_s, int limit,
                            struct po_query_report *out, char *err, size_t errcap) PO_MUST_CHECK;

#endif
