/*
 * traffic.h — the console's history of callbacks (traffic.c): what this
 * node answered, counted in memory on the callback path and added to the
 * traffic table every few seconds by the background jobs, so the console's
 * charts are drawn from stored data that outlives restarts.
 * Part of service.h (which includes every service header).
 */
#ifndef PO_SERVICE_TRAFFIC_H
#define PO_SERVICE_TRAFFIC_H

#include "../../core/core.h"
#include "../../engine/engine.h"
#include "../../event/event.h"
#include "../../store/store.h"

#include <jansson.h>

#define PO_TRAFFIC_FLUSH_S 10    /* how often a node writes what it counted */
#define PO_TRAFFIC_BUCKET_S 300  /* the table's resolution */
#define PO_TRAFFIC_KEYS_MAX 1024 /* tenant × channel pairs counted between two flushes */
#define PO_TRAFFIC_CURRENCIES 4  /* currencies of credited volume per pair and flush */
#define PO_TRAFFIC_OTHER "-"     /* the tenant of what does not fit (or has no valid name) */

/* One answered callback: its outcome and duplicate layer, the ack's
 * latency, and for a payment credited now its amount (else 0). Cheap: a
 * lock held for a hash probe. */
void po_traffic_count(const char *tenant, const char *channel, enum po_outcome_kind outcome,
                      int layer, uint64_t micros, int64_t credited_minor, const char *currency);
/* Adds what was counted since the last flush to the traffic table under
 * node, in the five-minute bucket of now; on failure the counts are kept
 * for the next flush. Deletes buckets (and deliveries) older than
 * keep_days (0: keep). Written as a work of committer's next batch when
 * committer is not NULL (serve: SQLite has one writer, and the callbacks'
 * commits must not wait behind another), else in a transaction on s. */
po_err po_traffic_flush(struct po_store *s, struct po_committer *committer, const char *node,
                        int64_t now_unix, int keep_days, char *err, size_t errcap) PO_MUST_CHECK;
/* Forgets what was counted and not flushed, deliveries too (tests). */
void po_traffic_reset(void);

/* ---- the deliveries of verified callbacks (callback_delivery) ----
 * Kept in a buffer of PO_DELIVERY_BUFFER until the next flush (every
 * PO_DELIVERY_FLUSH_S); a delivery that finds it full is not recorded, only
 * counted (po_deliveries_dropped). */
#define PO_DELIVERY_BUFFER 32768
#define PO_DELIVERY_FLUSH_S 2
struct po_delivery {
    const char *tenant, *channel, *request_id, *out_trade_no; /* out_trade_no may be NULL */
    /* The event it carried (event_type NULL: none payonce could read) and,
     * for a refund's, its number (NULL or "": none) — the order's page
     * names what each delivery was. */
    const char *event_type, *out_refund_no;
    enum po_outcome_kind outcome;
    int layer;
    enum po_reason reason;
    unsigned status; /* the ack's HTTP status */
    uint64_t micros;
};
void po_deliveries_record(const struct po_delivery *d);
/* Both of one answered callback under one lock (the callback path): its
 * count (po_traffic_count; credited_minor and currency as there) and,
 * when it was verified, its delivery. */
void po_traffic_answered(const struct po_delivery *d, int64_t credited_minor, const char *currency,
                         bool verified);
/* Writes what was recorded since the last flush, 200 rows per statement
 * and transaction (committer: as po_traffic_flush); what a failure left
 * unwritten is kept for the next. */
po_err po_deliveries_flush(struct po_store *s, struct po_committer *committer, const char *node,
                           char *err, size_t errcap) PO_MUST_CHECK;
uint64_t po_deliveries_dropped(void);

/* ---- the callback record (engine/audit.c) ----
 * Seals what the batches recorded into the tenants' chains, PO_SEAL_WORK
 * records per work (committer: as po_traffic_flush), until none is left or
 * PO_SEAL_WORKS_MAX works ran; then, when keep_days > 0 and prune, deletes
 * sealed records received more than keep_days ago. *out_sealed and
 * *out_pruned (may be NULL) count them. master: the master key the chains'
 * key is derived from (NULL: development, plain links). */
#define PO_SEAL_WORK 200
#define PO_SEAL_WORKS_MAX 100
po_err po_records_seal(struct po_store *s, struct po_committer *committer,
                       const unsigned char *master, int64_t now_unix, int keep_days, bool prune,
                       int64_t *out_sealed, int64_t *out_pruned, char *err,
                       size_t errcap) PO_MUST_CHECK;

/* The console's overview over the last `hours` (1..720) up to now, of one
 * tenant or all (NULL): a series (5-minute points up to 12 hours, hourly
 * beyond) of applied, duplicate, rejected (with suspense), failed (retry,
 * invalid), acks with p50/p99 bounds and credited volume per currency;
 * and the same totals per tenant and channel. first_at: the oldest bucket
 * the table holds for the filter (null: none), so that a chart can mark
 * the part of its window before the history began.
 * fit: the window is the data's own span instead — from the oldest bucket
 * (within the last `hours`) to now, at least half an hour — so that fresh
 * data fills the chart rather than standing at its right edge. */
po_err po_view_traffic(struct po_store *s, const char *tenant, int hours, bool fit,
                       int64_t now_unix, json_t **out) PO_MUST_CHECK;

#endif
