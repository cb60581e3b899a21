/*
 * http_int.h — private to src/http: metrics and the callback handler.
 */
#ifndef PO_HTTP_INT_H
#define PO_HTTP_INT_H

#include "../channel/channel.h"
#include "../engine/engine.h"
#include "../store/store.h"
#include "http.h"

#include <stdint.h>

/* ---- metrics (metrics.c) ---- */
/* One callback answered: outcome is an engine outcome name or "ignored". */
void po_metrics_callback(const char *channel, const char *outcome, int layer, uint64_t micros);
void po_metrics_verify_failure(const char *channel, const char *reason);
void po_metrics_http(unsigned status);
/* Renders everything in Prometheus text format into a heap string. */
char *po_metrics_render(void);

/* ---- callbacks (notify.c) ---- */
struct po_notify_ctx {
    struct po_store_pool *pool;
    const unsigned char *master_key;
    const char *request_id;
};

/* What the handler decided, for the ack, the log and the metrics. */
struct po_notify_answer {
    struct po_ack ack;
    const char *outcome;          /* applied|duplicate|rejected|suspense|retry|ignored|invalid */
    int layer;
    char reason[PO_REASON_MAX];
    char out_trade_no[PO_ID_MAX + 1];
};

/* Handles one callback end to end; never fails (errors become acks). */
void po_notify_handle(const struct po_notify_ctx *ctx, const char *channel, const char *tenant,
                      const struct po_notify_req *req, bool body_too_large,
                      struct po_notify_answer *out);

#endif
