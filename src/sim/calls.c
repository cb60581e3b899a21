/*
 * calls.c — what the simulated channels' API handlers (sim_wechatpay.c,
 * sim_alipay.c, sim_stripe.c) use of the server beneath them: their
 * answers (the refund results notified later are refund_notify.c's).
 * Apart from server.c, which only routes to the handlers and serves HTTP.
 */
#include "sim_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- answers ---- */

int sim_reply(struct sim_call *c, unsigned status, const char *type, const char *body,
              bool wx_signed)
{
    free(c->body_out);
    c->status = status;
    c->type = type;
    c->body_out = strdup(body);
    c->body_out_len = 0;
    c->wx_signed = wx_signed;
    return 0;
}

int sim_reply_bytes(struct sim_call *c, unsigned status, const char *type, const void *body,
                    size_t len)
{
    free(c->body_out);
    c->status = status;
    c->type = type;
    c->body_out = malloc(len + 1);
    c->body_out_len = c->body_out ? len : 0;
    if (c->body_out)
        memcpy(c->body_out, body, len), c->body_out[len] = '\0';
    c->wx_signed = false;
    return 0;
}

int sim_reply_json(struct sim_call *c, unsigned status, json_t *j)
{
    char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    sim_reply(c, body ? status : 500, "application/json", body ? body : "{}", true);
    free(body);
    return 0;
}

int sim_error(struct sim_call *c, unsigned status, const char *code, const char *message)
{
    return sim_reply_json(c, status, json_pack("{s:s, s:s}", "code", code, "message", message));
}

void sim_reply_header(struct sim_call *c, const char *name, const char *value)
{
    if (c->nheaders >= 4)
        return;
    (void)snprintf(c->hname[c->nheaders], sizeof c->hname[0], "%s", name);
    (void)snprintf(c->hvalue[c->nheaders], sizeof c->hvalue[0], "%s", value);
    c->nheaders++;
}
