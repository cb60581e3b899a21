/*
 * registry.c — the registered channels. Adding a channel is one file that
 * defines its `const struct po_channel_ops po_channel_NAME` plus one X(NAME)
 * in PO_CHANNEL_LIST below; every other module (routes, metrics, the CLI,
 * reconciliation, refunds) asks this table instead of comparing names.
 * A build may add one channel of its own with PO_CHANNEL_EXTRA=NAME: the
 * test suite's fourth channel (tests/channel/testpay.c, test_channel4) is
 * added exactly that way, as a proof that nothing else needs to change.
 */
#include "channel_int.h"

#include <string.h>

#ifdef PO_CHANNEL_EXTRA /* a build's own channel, e.g. -DPO_CHANNEL_EXTRA=testpay */
#define PO_CHANNELS_EXTRA(X) X(PO_CHANNEL_EXTRA)
#else
#define PO_CHANNELS_EXTRA(X)
#endif
#define PO_CHANNEL_LIST(X) X(wechatpay) X(alipay) X(stripe) PO_CHANNELS_EXTRA(X)

/* (two levels, so that a name given as a macro is expanded before ##) */
#define DECLARE(name) DECLARE_(name)
#define DECLARE_(name) extern const struct po_channel_ops po_channel_##name;
PO_CHANNEL_LIST(DECLARE)
#define ENTRY(name) ENTRY_(name)
#define ENTRY_(name) &po_channel_##name,
const struct po_channel_ops *const po_channels[] = {PO_CHANNEL_LIST(ENTRY) NULL};
_Static_assert(PO_NELEM(po_channels) - 1 <= PO_CHANNELS_MAX,
               "more channels than PO_CHANNELS_MAX (core/limits.h): raise it");

int po_channel_index(const char *name)
{
    for (int i = 0; name && po_channels[i]; i++)
        if (strcmp(po_channels[i]->name, name) == 0)
            return i;
    return -1;
}

const struct po_channel_ops *po_channel_find(const char *name)
{
    int i = po_channel_index(name);
    return i < 0 ? NULL : po_channels[i];
}

static bool can(const struct po_channel_ops *c, unsigned need)
{
    return (!(need & PO_CAN_REFUND) || c->refund_submit) &&
           (!(need & PO_CAN_QUERY) || c->order_query) &&
           (!(need & PO_CAN_CLOSE) || (c->order_close && c->order_query)) &&
           (!(need & PO_CAN_CREATE) || c->pay_create) &&
           (!(need & PO_CAN_BILL) || (c->bill_parse && c->bill_merchant));
}

void po_channel_names(unsigned need, char *out, size_t cap)
{
    size_t j = 0;
    PO_ASSERT(cap > 0);
    out[0] = '\0';
    for (int i = 0; po_channels[i]; i++) {
        if (!can(po_channels[i], need))
            continue;
        size_t n = strlen(po_channels[i]->name);
        if (j + n + 3 > cap)
            break;
        if (j) {
            memcpy(out + j, ", ", 2);
            j += 2;
        }
        memcpy(out + j, po_channels[i]->name, n + 1);
        j += n;
    }
}

po_err po_channel_parse(const struct po_channel_account *a, const struct po_notify_req *req,
                        struct po_notify_result *out)
{
    memset(out, 0, sizeof *out);
    const struct po_channel_ops *ops = po_channel_find(a->channel);
    PO_ASSERT(ops); /* accounts are only loaded for registered channels */
    if (req->body_len > PO_BODY_MAX) {
        po_notify_reject(out, PO_R_BODY_TOO_LARGE, "body larger than %d bytes", PO_BODY_MAX);
        return PO_OK;
    }
    return ops->parse(a, req, out);
}

const char *po_channel_order_rule(const char *channel, const struct po_pay_request *r,
                                  const char **param)
{
    const struct po_channel_ops *ops = channel ? po_channel_find(channel) : NULL;
    *param = NULL;
    return ops && ops->order_rule ? ops->order_rule(r, param) : NULL;
}

const char *po_channel_account_clash(const char *channel, const char *mine, const char *other)
{
    const struct po_channel_ops *ops = po_channel_find(channel);
    if (!ops || !ops->account_clash)
        return NULL;
    json_t *a = NULL, *b = NULL;
    const char *why = NULL;
    if (po_json_parse(mine, strlen(mine), &a, NULL, 0) == PO_OK &&
        po_json_parse(other, strlen(other), &b, NULL, 0) == PO_OK)
        why = ops->account_clash(a, b);
    json_decref(a);
    json_decref(b);
    return why;
}

void po_channel_ack(const struct po_channel_ops *ops, bool success, unsigned fail_status,
                    const char *message, struct po_ack *out)
{
    memset(out, 0, sizeof *out);
    char msg[120];
    size_t j = 0;
    /* The message goes into the channel's JSON or text: safe printable ASCII. */
    for (const char *p = message ? message : ""; *p && j + 1 < sizeof msg; p++)
        msg[j++] = (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') ? *p : ' ';
    msg[j] = '\0';
    PO_ASSERT(ops); /* only registered channels are routed */
    ops->ack(success, fail_status, msg, out);
}
