/*
 * event.c — normalised events: names, validation, the idempotency key and
 * the JSON form of DESIGN §10.
 */
#include "engine.h"

#include <jansson.h>
#include <string.h>

static const char *const type_names[] = {
    [PO_EV_PAY_SUCCESS] = "PAY_SUCCESS",
    [PO_EV_REFUND_SUCCESS] = "REFUND_SUCCESS",
    [PO_EV_REFUND_CLOSED] = "REFUND_CLOSED",
    [PO_EV_REFUND_ABNORMAL] = "REFUND_ABNORMAL",
    [PO_EV_PROFIT_SHARE_RESULT] = "PROFIT_SHARE_RESULT",
};
static const char *const source_names[] = {
    [PO_SRC_CALLBACK] = "callback",
    [PO_SRC_RECONCILIATION] = "reconciliation",
    [PO_SRC_QUERY] = "query",
};
static const char *const outcome_names[] = {
    [PO_OUT_APPLIED] = "applied",   [PO_OUT_DUPLICATE] = "duplicate",
    [PO_OUT_REJECTED] = "rejected", [PO_OUT_SUSPENSE] = "suspense",
    [PO_OUT_RETRY] = "retry",
};

const char *po_event_type_name(enum po_event_type t)
{
    PO_ASSERT((unsigned)t < sizeof type_names / sizeof type_names[0]);
    return type_names[t];
}

const char *po_source_name(enum po_source s)
{
    PO_ASSERT((unsigned)s < sizeof source_names / sizeof source_names[0]);
    return source_names[s];
}

const char *po_outcome_name(enum po_outcome_kind k)
{
    PO_ASSERT((unsigned)k < sizeof outcome_names / sizeof outcome_names[0]);
    return outcome_names[k];
}

bool po_channel_valid(const char *channel)
{
    return channel && (strcmp(channel, "wechatpay") == 0 || strcmp(channel, "alipay") == 0 ||
                       strcmp(channel, "stripe") == 0);
}

static bool is_refund(enum po_event_type t)
{
    return t == PO_EV_REFUND_SUCCESS || t == PO_EV_REFUND_CLOSED || t == PO_EV_REFUND_ABNORMAL;
}

po_err po_event_key(const struct po_event *ev, char *out, size_t cap)
{
    const char *t = po_event_type_name(ev->type);
    if (ev->type == PO_EV_PAY_SUCCESS)
        return po_fmt(out, cap, "%s:%s:%s", ev->channel, ev->channel_txn_id, t);
    if (is_refund(ev->type))
        return po_fmt(out, cap, "%s:%s:%s", ev->channel, ev->channel_refund_id, t);
    return po_fmt(out, cap, "%s:%s:%s:%s", ev->channel, ev->channel_txn_id, ev->receiver, t);
}

po_err po_event_validate(const struct po_event *ev, char *err, size_t errcap)
{
#define BAD(...)                                                                                   \
    do {                                                                                           \
        po_errf(err, errcap, __VA_ARGS__);                                                         \
        return PO_ERR_INVALID;                                                                     \
    } while (0)
    if (!po_id_valid(ev->tenant, PO_ID_MAX))
        BAD("tenant: 1-%d characters of [A-Za-z0-9_-.:|*] required", PO_ID_MAX);
    if (!po_channel_valid(ev->channel))
        BAD("channel: one of wechatpay, alipay, stripe");
    if ((unsigned)ev->type > PO_EV_PROFIT_SHARE_RESULT)
        BAD("type: unknown");
    if ((unsigned)ev->source > PO_SRC_QUERY)
        BAD("source: unknown");
    if (!po_id_valid(ev->out_trade_no, PO_ID_MAX))
        BAD("out_trade_no: required, 1-%d characters of [A-Za-z0-9_-.:|*]", PO_ID_MAX);
    if (!po_amount_valid(ev->amount_minor))
        BAD("amount: a positive integer in minor units, at most %lld",
            (long long)PO_AMOUNT_MAX);
    if (!po_currency_valid(ev->currency))
        BAD("currency: not a supported ISO 4217 code");
    if (ev->merchant[0] && !po_id_valid(ev->merchant, PO_ID_MAX))
        BAD("merchant: 1-%d characters of [A-Za-z0-9_-.:|*]", PO_ID_MAX);
    if (ev->occurred_at[0] && !po_time_valid(ev->occurred_at))
        BAD("occurred_at: an RFC 3339 timestamp");
    if (is_refund(ev->type)) {
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

/* Copies a JSON string member into a fixed field; absent is allowed. */
static po_err take_str(json_t *obj, const char *name, char *dst, size_t cap, char *err,
                       size_t errcap)
{
    json_t *v = json_object_get(obj, name);
    if (!v)
        return PO_OK;
    if (!json_is_string(v)) {
        po_errf(err, errcap, "%s: must be a string", name);
        return PO_ERR_INVALID;
    }
    if (po_strcpy(dst, cap, json_string_value(v))) {
        po_errf(err, errcap, "%s: longer than %zu bytes", name, cap - 1);
        return PO_ERR_INVALID;
    }
    return PO_OK;
}

static int lookup(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -1;
}

po_err po_event_from_json(const char *json, size_t len, struct po_event *out, char *err,
                          size_t errcap)
{
    static const char *const known[] = {
        "tenant",   "channel",  "type",        "channel_txn_id", "out_trade_no",
        "out_refund_no", "channel_refund_id", "receiver", "merchant", "amount",
        "currency", "source",   "occurred_at",
    };
    po_err rc = PO_ERR_INVALID;
    struct po_event ev;
    json_error_t jerr;
    memset(&ev, 0, sizeof ev);
    if (len > PO_EVENT_FILE_MAX) {
        po_errf(err, errcap, "event larger than %d bytes", PO_EVENT_FILE_MAX);
        return PO_ERR_LIMIT;
    }
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        po_errf(err, errcap, "malformed JSON at line %d: %s", jerr.line, jerr.text);
        return PO_ERR_INVALID;
    }
    if (!json_is_object(root)) {
        po_errf(err, errcap, "event must be a JSON object");
        goto out;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (lookup(known, (int)(sizeof known / sizeof known[0]), k) < 0) {
            po_errf(err, errcap, "unknown field \"%.64s\"", k);
            goto out;
        }
    }
    char type[32] = "", source[32] = "callback";
    if (take_str(root, "tenant", ev.tenant, sizeof ev.tenant, err, errcap) ||
        take_str(root, "channel", ev.channel, sizeof ev.channel, err, errcap) ||
        take_str(root, "type", type, sizeof type, err, errcap) ||
        take_str(root, "channel_txn_id", ev.channel_txn_id, sizeof ev.channel_txn_id, err,
                 errcap) ||
        take_str(root, "out_trade_no", ev.out_trade_no, sizeof ev.out_trade_no, err, errcap) ||
        take_str(root, "out_refund_no", ev.out_refund_no, sizeof ev.out_refund_no, err,
                 errcap) ||
        take_str(root, "channel_refund_id", ev.channel_refund_id, sizeof ev.channel_refund_id,
                 err, errcap) ||
        take_str(root, "receiver", ev.receiver, sizeof ev.receiver, err, errcap) ||
        take_str(root, "merchant", ev.merchant, sizeof ev.merchant, err, errcap) ||
        take_str(root, "currency", ev.currency, sizeof ev.currency, err, errcap) ||
        take_str(root, "source", source, sizeof source, err, errcap) ||
        take_str(root, "occurred_at", ev.occurred_at, sizeof ev.occurred_at, err, errcap))
        goto out;
    int t = lookup(type_names, (int)(sizeof type_names / sizeof type_names[0]), type);
    if (t < 0) {
        po_errf(err, errcap, "type: one of PAY_SUCCESS, REFUND_SUCCESS, REFUND_CLOSED,"
                             " REFUND_ABNORMAL, PROFIT_SHARE_RESULT");
        goto out;
    }
    ev.type = (enum po_event_type)t;
    int s = lookup(source_names, (int)(sizeof source_names / sizeof source_names[0]), source);
    if (s < 0) {
        po_errf(err, errcap, "source: one of callback, reconciliation, query");
        goto out;
    }
    ev.source = (enum po_source)s;
    json_t *amount = json_object_get(root, "amount");
    /* Integers only: 1.0 or "100" are refused, never rounded. */
    if (!json_is_integer(amount)) {
        po_errf(err, errcap, "amount: an integer in minor units is required");
        goto out;
    }
    ev.amount_minor = (int64_t)json_integer_value(amount);
    rc = po_event_validate(&ev, err, errcap);
    if (rc)
        goto out;
    *out = ev;
out:
    json_decref(root);
    return rc;
}

po_err po_outcome_to_json(const struct po_outcome *o, char *buf, size_t cap)
{
    const char *name = po_outcome_name(o->kind);
    switch (o->kind) {
    case PO_OUT_APPLIED: return po_fmt(buf, cap, "{\"outcome\":\"%s\"}", name);
    case PO_OUT_DUPLICATE: return po_fmt(buf, cap, "{\"outcome\":\"%s\",\"layer\":%d}", name, o->layer);
    default: return po_fmt(buf, cap, "{\"outcome\":\"%s\",\"reason\":\"%s\"}", name, o->reason);
    }
}
