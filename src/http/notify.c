/*
 * notify.c — POST /notify/{channel}/{tenant}: finds the channel in the
 * registry, hands the request to the callback service, and turns its
 * decision into the channel's own ack, a metric and one JSON log line.
 */
#include "http_int.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The callback's access-log line: every added value is either ours
 * (channel, outcome and reason names) or an identifier already checked
 * against [A-Za-z0-9_-.:|*] (tenant, out_trade_no). */
static void log_line(const struct po_hreq *req, const char *channel, const char *tenant,
                     const struct po_callback *cb, unsigned status, uint64_t micros)
{
    const struct po_callback_decision *d = &cb->decision;
    char no[PO_ID_MAX + 24 + PO_KEY_SIZE * 2 + 16] = "", extra[2048];
    if (po_id_valid(d->out_trade_no, PO_ID_MAX))
        (void)snprintf(no, sizeof no, ",\"out_trade_no\":\"%s\"", d->out_trade_no);
    /* the idempotency key of a verified event (escaped: a mismatched
     * event's fields were not validated) */
    char key[PO_KEY_SIZE + 1], esc[PO_KEY_SIZE * 2 + 1];
    if (cb->verified &&
        (cb->res.status == PO_NOTIFY_EVENT || cb->res.status == PO_NOTIFY_MISMATCH) &&
        po_event_key(&cb->res.ev, key, sizeof key) == PO_OK) {
        size_t n = strlen(no);
        (void)po_json_escape(key, strlen(key), esc, sizeof esc);
        (void)snprintf(no + n, sizeof no - n, ",\"key\":\"%s\"", esc);
    }
    (void)snprintf(extra, sizeof extra,
                   ",\"channel\":\"%s\",\"tenant\":\"%s\",\"outcome\":\"%s\",\"layer\":%d,"
                   "\"reason\":\"%s\"%s",
                   channel, po_id_valid(tenant, PO_ID_MAX) ? tenant : "-",
                   po_outcome_name(d->outcome.kind), d->outcome.layer,
                   po_reason_name(d->outcome.reason), no);
    po_access_line(req, "callback", status, micros, extra);
}

/* The decision as the channel's ack, counted and logged. */
static void answer(struct po_hcall *h)
{
    const struct po_callback *cb = &h->cb;
    const struct po_callback_decision *d = &cb->decision;
    bool success = d->fail_status == 0;
    struct po_ack ack;
    /* A refusal names its reason; a transient failure says only that. */
    po_channel_ack(cb->ch->name, success, d->fail_status,
                   d->outcome.kind == PO_OUT_RETRY ? "temporarily unavailable, retry"
                   : d->outcome.kind == PO_OUT_INVALID && d->outcome.reason == PO_R_BODY_TOO_LARGE
                       ? "body too large"
                       : po_reason_name(d->outcome.reason),
                   &ack);
    po_hresp_set(&h->resp, ack.status, ack.content_type, ack.body[0] ? ack.body : NULL);
    /* What payonce decided, for people and tools (the simulator prints it);
     * channels ignore headers they do not know. */
    char oc[64];
    if (d->outcome.layer)
        (void)snprintf(oc, sizeof oc, "%s; layer=%d%s", po_outcome_name(d->outcome.kind),
                       d->outcome.layer, d->remembered ? "; remembered" : "");
    else if (d->outcome.reason != PO_R_NONE)
        (void)snprintf(oc, sizeof oc, "%s; reason=%s", po_outcome_name(d->outcome.kind),
                       po_reason_name(d->outcome.reason));
    else
        (void)snprintf(oc, sizeof oc, "%s", po_outcome_name(d->outcome.kind));
    po_hresp_header(&h->resp, "Payonce-Outcome", oc);
    /* the id its callback record and log lines carry, as the API answers it */
    po_hresp_header(&h->resp, "X-Request-Id", h->req.request_id);
    uint64_t micros = po_now_us() - h->start_us;
    if (d->outcome.kind == PO_OUT_INVALID)
        po_metrics_verify_failure(cb->ch->name, d->outcome.reason);
    po_metrics_callback(cb->ch->name, d->outcome.kind, d->outcome.layer, micros);
    bool paid = d->outcome.kind == PO_OUT_APPLIED && cb->item.ev.type == PO_EV_PAY_SUCCESS;
    /* the event it carried, when verification read one */
    const struct po_event *ev =
        cb->verified && (cb->res.status == PO_NOTIFY_EVENT || cb->res.status == PO_NOTIFY_MISMATCH)
            ? &cb->res.ev
            : NULL;
    /* counted always; forgeries are never stored one by one */
    po_traffic_answered(
        &(struct po_delivery){.tenant = cb->tenant,
                              .channel = cb->ch->name,
                              .request_id = h->req.request_id,
                              .out_trade_no = d->out_trade_no,
                              .event_type = ev ? po_event_type_name(ev->type) : NULL,
                              .out_refund_no = ev ? ev->out_refund_no : NULL,
                              .outcome = d->outcome.kind,
                              .layer = d->outcome.layer,
                              .reason = d->outcome.reason,
                              .status = ack.status,
                              .micros = micros},
        paid ? cb->item.ev.amount_minor : 0, paid ? cb->item.ev.currency : NULL, cb->verified);
    log_line(&h->req, cb->ch->name, po_id_valid(cb->tenant, PO_ID_MAX) ? cb->tenant : "-", cb,
             ack.status, micros);
    h->logged = true;
    if (h->in_bulkhead)
        po_bulkhead_leave(h->ctx->gw->callback_bulkhead, cb->tenant);
}

/* The decision came after the batch committed (another thread): the
 * answer is made on the event thread (finish), not the committer's. */
static void decided(struct po_callback *cb)
{
    struct po_hcall *h = cb->user;
    h->complete(h);
}

bool po_notify_start(struct po_hcall *h)
{
    const struct po_hreq *req = &h->req;
    const struct po_channel_ops *ch = po_channel_find(req->params[0]);
    if (!ch) {
        char names[PO_CHANNELS_MAX * (PO_CHANNEL_SIZE + 2)], body[sizeof names + 128];
        po_channel_names(0, names, sizeof names);
        (void)snprintf(body, sizeof body,
                       "{\"error\":{\"code\":\"unknown_channel\",\"message\":\"payonce receives"
                       " /notify/CHANNEL for the channels %s\"}}",
                       names);
        po_hresp_set(&h->resp, 404, "application/json", body);
        return false;
    }
    struct po_callback *cb = &h->cb;
    memset(cb, 0, sizeof *cb);
    cb->ch = ch;
    cb->tenant = req->params[1];
    cb->req = (struct po_notify_req){.body = req->body,
                                     .body_len = req->body_len,
                                     .header = req->header,
                                     .headers = req->headers,
                                     .path = req->path,
                                     .hctx = req->ctx,
                                     .now_unix = req->now_unix};
    cb->body_too_large = req->body_too_large;
    cb->request_id = req->request_id;
    cb->arrived_us = h->start_us;
    cb->done = decided;
    cb->user = h;
    h->finish = answer;
    /* The tenant's share of callbacks in flight: beyond it, FAIL at once
     * (the channel retries), so one tenant's burst cannot fill the queues
     * every tenant's callbacks wait in. */
    if (!(h->in_bulkhead = po_bulkhead_enter(h->ctx->gw->callback_bulkhead, cb->tenant))) {
        cb->decision =
            (struct po_callback_decision){.outcome = {PO_OUT_RETRY, 0, PO_R_POOL_EXHAUSTED},
                                          .fail_status = po_reason_status(PO_R_POOL_EXHAUSTED)};
        answer(h);
        return false;
    }
    if (po_callback_start(&h->ctx->gw->cb, cb))
        return true;
    answer(h);
    return false;
}
