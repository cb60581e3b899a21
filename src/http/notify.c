/*
 * notify.c — POST /notify/{channel}/{tenant}: finds the channel in the
 * registry, hands the request to the callback service, and turns its
 * decision into the channel's own ack, a metric and one JSON log line.
 */
#include "http_int.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* One JSON access-log line per callback. */
static void log_line(const struct po_hreq *req, const char *channel, const char *tenant,
                     const struct po_callback_decision *d, unsigned status, uint64_t micros)
{
    char ts[PO_TIME_MAX];
    po_clock_now_iso(ts, sizeof ts);
    json_t *line = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:i, s:f}", "ts", ts, "level", "info", "msg",
        "callback", "request_id", req->request_id, "channel", channel, "tenant", tenant, "outcome",
        po_outcome_name(d->outcome.kind), "layer", d->outcome.layer, "reason",
        po_reason_name(d->outcome.reason), "status", (int)status, "ms", (double)micros / 1000.0);
    if (line && d->out_trade_no[0])
        json_object_set_new(line, "out_trade_no", json_string(d->out_trade_no));
    char *s = line ? json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(4)) : NULL;
    if (s)
        po_log_line(s);
    free(s);
    json_decref(line);
}

void po_notify_handle(const struct po_http_ctx *ctx, const struct po_hreq *req,
                      struct po_hresp *out)
{
    uint64_t start = now_us();
    const char *channel = req->params[0], *tenant = req->params[1];
    const struct po_channel_ops *ch = po_channel_find(channel);
    memset(out, 0, sizeof *out);
    if (!ch) {
        po_hresp_set(out, 404, "application/json", "{\"error\":\"unknown_channel\"}");
        return;
    }
    struct po_callback_ctx cctx = {ctx->pool, ctx->master_key, req->request_id};
    struct po_notify_req nreq = {.body = req->body,
                                 .body_len = req->body_len,
                                 .header = req->header,
                                 .hctx = req->ctx,
                                 .now_unix = req->now_unix};
    struct po_callback_decision d;
    po_callback_handle(&cctx, ch, tenant, &nreq, req->body_too_large, &d);
    bool success = d.fail_status == 0;
    struct po_ack ack;
    /* A refusal names its reason; a transient failure says only that. */
    po_channel_ack(ch->name, success, d.fail_status,
                   d.outcome.kind == PO_OUT_RETRY ? "temporarily unavailable, retry"
                   : d.outcome.kind == PO_OUT_INVALID && d.outcome.reason == PO_R_BODY_TOO_LARGE
                       ? "body too large"
                       : po_reason_name(d.outcome.reason),
                   &ack);
    po_hresp_set(out, ack.status, ack.content_type, ack.body[0] ? ack.body : NULL);
    uint64_t micros = now_us() - start;
    if (d.outcome.kind == PO_OUT_INVALID)
        po_metrics_verify_failure(ch->name, d.outcome.reason);
    po_metrics_callback(ch->name, d.outcome.kind, d.outcome.layer, micros);
    log_line(req, ch->name, po_id_valid(tenant, PO_ID_MAX) ? tenant : "-", &d, ack.status, micros);
}
