/*
 * event_json.c — the normalised event's own JSON form (README.md, "The command line"), which
 * `payonce apply --event FILE` reads: one object, unknown fields refused,
 * integer amounts only, a registered channel, then po_event_validate.
 */
#include "channel_int.h"

#include <string.h>

static const char *const type_names[] = {
#define X(id) #id,
    PO_EVENT_TYPES(X)
#undef X
};
static const char *const source_names[] = {
#define X(id, name) name,
    PO_SOURCES(X)
#undef X
};

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
        "tenant",
        "channel",
        "type",
        "channel_txn_id",
        "out_trade_no",
        "out_refund_no",
        "channel_refund_id",
        "receiver",
        "merchant",
        "amount",
        "currency",
        "source",
        "occurred_at",
    };
    po_err rc = PO_ERR_INVALID;
    struct po_event ev;
    memset(&ev, 0, sizeof ev);
    if (len > PO_EVENT_FILE_MAX) {
        po_errf(err, errcap, "event larger than %d bytes", PO_EVENT_FILE_MAX);
        return PO_ERR_LIMIT;
    }
    json_t *root = NULL;
    char jerr[PO_ERRBUF_SIZE];
    po_err prc = po_json_parse(json, len, &root, jerr, sizeof jerr);
    if (prc) {
        po_errf(err, errcap, "malformed JSON: %s", jerr);
        return prc == PO_ERR_NOMEM ? prc : PO_ERR_INVALID;
    }
    if (!json_is_object(root)) {
        po_errf(err, errcap, "event must be a JSON object");
        goto out;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v)
    {
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
        take_str(root, "out_refund_no", ev.out_refund_no, sizeof ev.out_refund_no, err, errcap) ||
        take_str(root, "channel_refund_id", ev.channel_refund_id, sizeof ev.channel_refund_id, err,
                 errcap) ||
        take_str(root, "receiver", ev.receiver, sizeof ev.receiver, err, errcap) ||
        take_str(root, "merchant", ev.merchant, sizeof ev.merchant, err, errcap) ||
        take_str(root, "currency", ev.currency, sizeof ev.currency, err, errcap) ||
        take_str(root, "source", source, sizeof source, err, errcap) ||
        take_str(root, "occurred_at", ev.occurred_at, sizeof ev.occurred_at, err, errcap))
        goto out;
    int t = lookup(type_names, PO_EV_COUNT, type);
    if (t < 0) {
        po_errf(err, errcap,
                "type: one of PAY_SUCCESS, REFUND_SUCCESS, REFUND_CLOSED,"
                " REFUND_ABNORMAL, PROFIT_SHARE_RESULT");
        goto out;
    }
    ev.type = (enum po_event_type)t;
    int s = lookup(source_names, PO_SRC_COUNT, source);
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
    if (!po_channel_find(ev.channel)) {
        char names[128];
        po_channel_names(0, names, sizeof names);
        po_errf(err, errcap, "channel: one of %s", names);
        goto out;
    }
    rc = po_event_validate(&ev, err, errcap);
    if (rc)
        goto out;
    *out = ev;
out:
    json_decref(root);
    return rc;
}
