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
static void log_line(const struct po_hreq *req, const struct po_callback_summary *s,
                     unsigned status)
{
    char no[PO_ID_MAX + 24 + PO_KEY_SIZE * 2 + 16] = "", extra[2048];
    if (s->out_trade_no)
        (void)snprintf(no, sizeof no, ",\"out_trade_no\":\"%s\"", s->out_trade_no);
    /* the idempotency key of a verified event (escaped: a mismatched
     * event's fields were not validated) */
    if (s->key[0]) {
        char esc[PO_KEY_SIZE * 2 + 1];
        size_t n = strlen(no);
        (void)po_json_escape(s->key, strlen(s->key), esc, sizeof esc);
        (void)snprintf(no + n, sizeof no - n, ",\"key\":\"%s\"", esc);
    }
    (void)snprintf(extra, sizeof extra,
                   ",\"channel\":\"%s\",\"tenant\":\"%s\",\"outcome\":\"%s\",\"layer\":%d,"
                   "\"reason\":\"%s\"%s",
                   s->ch->name, s->tenant ? s->tenant : "-", s->outcome_name, s->outcome.layer,
                   s->reason_name, no);
    po_access_line(req, "callback", status, s->micros, extra);
}

/* What is kept of one answered callback (status: its ack's), each once:
 * its metrics, its count in the console's traffic (always; forgeries are
 * never stored one by one) with, once verified, its delivery, and its
 * access-log line. */
static void record(const struct po_hreq *req, const struct po_callback_summary *s, unsigned status)
{
    po_metrics_callback(s->ch, s->outcome, s->micros);
    po_traffic_answered(&(struct po_delivery){.tenant = s->tenant,
                                              .channel = s->ch->name,
                                              .request_id = s->request_id,
                                              .out_trade_no = s->out_trade_no,
                                              .event_type = s->event_type,
                                              .out_refund_no = s->out_refund_no,
                                              .outcome = s->outcome.kind,
                                              .layer = s->outcome.layer,
                                              .reason = s->outcome.reason,
                                              .status = status,
                                              .micros = s->micros},
                        s->credited_minor, s->currency, s->verified);
    log_line(req, s, status);
}

/* The decision as the channel's ack, counted and logged. */
static void answer(struct po_hcall *h)
{
    struct po_callback_summary s;
    po_callback_summarize(&h->cb, po_now_us(), &s);
    struct po_ack ack;
    /* A refusal names its reason; a transient failure says only that. */
    po_channel_ack(s.ch, s.fail_status == 0, s.fail_status,
                   s.outcome.kind == PO_OUT_RETRY ? "temporarily unavailable, retry"
                   : s.outcome.kind == PO_OUT_INVALID && s.outcome.reason == PO_R_BODY_TOO_LARGE
                       ? "body too large"
                       : s.reason_name,
                   &ack);
    po_hresp_set(&h->resp, ack.status, ack.content_type, ack.body[0] ? ack.body : NULL);
    /* What payonce decided, for people and tools (the simulator prints it);
     * channels ignore headers they do not know. */
    char oc[64];
    if (s.outcome.layer)
        (void)snprintf(oc, sizeof oc, "%s; layer=%d%s", s.outcome_name, s.outcome.layer,
                       s.remembered ? "; remembered" : "");
    else if (s.outcome.reason != PO_R_NONE)
        (void)snprintf(oc, sizeof oc, "%s; reason=%s", s.outcome_name, s.reason_name);
    else
        (void)snprintf(oc, sizeof oc, "%s", s.outcome_name);
    po_hresp_header(&h->resp, "Payonce-Outcome", oc);
    /* the id its callback record and log lines carry, as the API answers it */
    po_hresp_header(&h->resp, "X-Request-Id", h->req.request_id);
    record(&h->req, &s, ack.status);
    h->logged = true;
    if (h->in_bulkhead)
        po_bulkhead_leave(h->ctx->gw->callback_bulkhead, h->cb.tenant);
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
    bool pending = false;
    if (!(h->in_bulkhead = po_bulkhead_enter(h->ctx->gw->callback_bulkhead, cb->tenant)))
        cb->decision =
            (struct po_callback_decision){.outcome = {PO_OUT_RETRY, 0, PO_R_POOL_EXHAUSTED},
                                          .fail_status = po_reason_status(PO_R_POOL_EXHAUSTED)};
    else
        pending = po_callback_start(&h->ctx->gw->cb, cb);
    if (!pending)
        answer(h);
    return pending;
}
