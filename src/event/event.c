/*
 * event.c — normalised events: type and source names, validation and the
 * idempotency key (see event.h).
 */
#include "event.h"

#include <string.h>

static const char *const type_names[] = {
#define X(id) [PO_EV_##id] = #id,
    PO_EVENT_TYPES(X)
#undef X
};
static const char *const source_names[] = {
#define X(id, name) [PO_SRC_##id] = name,
    PO_SOURCES(X)
#undef X
};

const char *po_event_type_name(enum po_event_type t)
{
    PO_ASSERT((unsigned)t < PO_EV_COUNT);
    return type_names[t];
}

const char *po_source_name(enum po_source s)
{
    PO_ASSERT((unsigned)s < PO_SRC_COUNT);
    return source_names[s];
}

bool po_event_is_refund(enum po_event_type t)
{
    return t == PO_EV_REFUND_SUCCESS || t == PO_EV_REFUND_CLOSED || t == PO_EV_REFUND_ABNORMAL;
}

po_err po_event_key(const struct po_event *ev, char *out, size_t cap)
{
    const char *t = po_event_type_name(ev->type);
    if (ev->type == PO_EV_PAY_SUCCESS)
        return po_fmt(out, cap, "%s:%s:%s", ev->channel, ev->channel_txn_id, t);
    if (po_event_is_refund(ev->type))
        return po_fmt(out, cap, "%s:%s:%s%s", ev->channel, ev->channel_refund_id, t,
                      ev->accept_after_close ? "|accepted" : "");
    return po_fmt(out, cap, "%s:%s:%s:%s", ev->channel, ev->channel_txn_id, ev->receiver, t);
}

/* A channel's name: 1..PO_CHANNEL_SIZE-1 of [a-z0-9_]. */
static bool channel_shape(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= PO_CHANNEL_SIZE)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    return true;
}

po_err po_event_validate(const struct po_event *ev, char *err, size_t errcap)
{
#define BAD(...)                                                                                   \
    do {                                                                                           \
        po_errf(err, errcap, __VA_ARGS__);                                                         \
        return PO_ERR_INVALID;                                                                     \
    } while (0)
    if (!po_id_valid(ev->tenant, PO_ID_MAX))
        BAD("tenant: 1-%d characters of [A-Za-z0-9_-.:|*]", PO_ID_MAX);
    if (!channel_shape(ev->channel))
        BAD("channel: a channel's name, e.g. wechatpay");
    if ((unsigned)ev->type >= PO_EV_COUNT)
        BAD("type: unknown");
    if ((unsigned)ev->source >= PO_SRC_COUNT)
        BAD("source: unknown");
    if (!po_id_valid(ev->out_trade_no, PO_ID_MAX))
        BAD("out_trade_no: required, 1-%d characters of [A-Za-z0-9_-.:|*]", PO_ID_MAX);
    if (!po_amount_valid(ev->amount_minor))
        BAD("amount: a positive integer in minor units, at most %lld", (long long)PO_AMOUNT_MAX);
    if (!po_currency_valid(ev->currency))
        BAD("currency: not a supported ISO 4217 code");
    if (ev->merchant[0] && !po_id_valid(ev->merchant, PO_ID_MAX))
        BAD("merchant: 1-%d characters of [A-Za-z0-9_-.:|*]", PO_ID_MAX);
    if (ev->occurred_at[0] && !po_time_valid(ev->occurred_at))
        BAD("occurred_at: an RFC 3339 timestamp");
    if (po_event_is_refund(ev->type)) {
        if (!po_id_valid(ev->out_refund_no, PO_ID_MAX))
            BAD("out_refund_no: required for refund events");
        if (!po_id_valid(ev->channel_refund_id, PO_TXN_ID_MAX))
            BAD("channel_refund_id: required for refund events");
    } else {
        if (!po_id_valid(ev->channel_txn_id, PO_TXN_ID_MAX))
            BAD("channel_txn_id: required, 1-%d characters", PO_TXN_ID_MAX);
        if (ev->type == PO_EV_PROFIT_SHARE_RESULT && !po_id_valid(ev->receiver, PO_ID_MAX))
            BAD("receiver: required for PROFIT_SHARE_RESULT");
    }
    if (ev->channel_txn_id[0] && !po_id_valid(ev->channel_txn_id, PO_TXN_ID_MAX))
        BAD("channel_txn_id: 1-%d characters of [A-Za-z0-9_-.:|*]", PO_TXN_ID_MAX);
    return PO_OK;
#undef BAD
}
