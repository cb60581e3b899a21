/*
 * common.c — what the adapters share: verification results, the timestamp
 * window, bounded field copies, UTF-8 checking, exact amount parsing.
 */
#include "channel_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static void set_result(struct po_notify_result *out, enum po_notify_status st,
                       enum po_reason reason, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static void set_result(struct po_notify_result *out, enum po_notify_status st,
                       enum po_reason reason, const char *fmt, va_list ap)
{
    out->status = st;
    out->reason = reason;
    (void)vsnprintf(out->detail, sizeof out->detail, fmt, ap);
}

void po_notify_reject(struct po_notify_result *out, enum po_reason reason, const char *fmt, ...)
{
    PO_ASSERT(po_reason_class(reason) == PO_RC_VERIFY);
    va_list ap;
    va_start(ap, fmt);
    set_result(out, PO_NOTIFY_REJECT, reason, fmt, ap);
    va_end(ap);
}

po_err po_notify_json(const char *text, size_t len, struct po_notify_result *out,
                      enum po_reason reason, const char *what, json_t **doc)
{
    char err[PO_ERRBUF_SIZE];
    *doc = NULL;
    po_err rc = po_json_parse(text, len, doc, err, sizeof err);
    if (rc == PO_ERR_NOMEM)
        return rc;
    if (rc == PO_OK && !json_is_object(*doc)) {
        json_decref(*doc);
        *doc = NULL;
        (void)snprintf(err, sizeof err, "not an object");
    }
    if (!*doc)
        po_notify_reject(out, reason, "%s is not a JSON object: %s", what, err);
    return PO_OK;
}

void po_notify_mismatch(struct po_notify_result *out, enum po_reason reason, const char *fmt, ...)
{
    PO_ASSERT(po_reason_class(reason) == PO_RC_REJECT);
    va_list ap;
    va_start(ap, fmt);
    set_result(out, PO_NOTIFY_MISMATCH, reason, fmt, ap);
    va_end(ap);
}

void po_notify_unmapped(struct po_notify_result *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_result(out, PO_NOTIFY_UNMAPPED, PO_R_UNMAPPABLE_EVENT, fmt, ap);
    va_end(ap);
}

void po_notify_ignore(struct po_notify_result *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_result(out, PO_NOTIFY_IGNORE, PO_R_NONE, fmt, ap);
    va_end(ap);
}

bool po_notify_window_ok(const struct po_channel_account *a, const char *ts, int64_t now,
                         struct po_notify_result *out)
{
    int64_t t = 0;
    if (po_parse_i64(ts, 0, INT64_C(99999999999), &t)) {
        po_notify_reject(out, PO_R_BAD_TIMESTAMP, "the timestamp is not a Unix time");
        return false;
    }
    if (now - t > a->window_s || t - now > a->window_s) {
        po_notify_reject(out, t < now ? PO_R_STALE_TIMESTAMP : PO_R_FUTURE_TIMESTAMP,
                         "timestamp %lld is %lld s from now (window %lld s)", (long long)t,
                         (long long)(now - t), (long long)a->window_s);
        return false;
    }
    return true;
}

void po_notify_event_init(const struct po_channel_account *a, struct po_notify_result *out)
{
    (void)po_set_field(out->ev.tenant, sizeof out->ev.tenant, a->tenant);
    (void)po_set_field(out->ev.channel, sizeof out->ev.channel, a->channel);
    out->ev.source = PO_SRC_CALLBACK;
    out->status = PO_NOTIFY_EVENT;
}

const char *po_json_str(json_t *obj, const char *name)
{
    json_t *v = json_object_get(obj, name);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

bool po_set_field(char *dst, size_t cap, const char *src)
{
    return src && po_strcpy(dst, cap, src) == PO_OK;
}

void po_channel_clean_code(const char *c, long status, char *out, size_t cap)
{
    size_t n = 0;
    for (; c && c[n] && n + 1 < cap && n < 40; n++) {
        char ch = c[n];
        bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-';
        out[n] = ok ? ch : '?';
    }
    out[n] = '\0';
    if (!n)
        (void)snprintf(out, cap, "HTTP_%ld", status);
}

po_err po_parse_major_amount(const char *s, int64_t *out)
{
    int64_t whole = 0, frac = 0;
    int digits = 0, fdigits = 0;
    const char *p = s;
    if (!s || !*s)
        return PO_ERR_INVALID;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (++digits > 13)
            return PO_ERR_INVALID;
        whole = whole * 10 + (*p - '0');
    }
    if (digits == 0)
        return PO_ERR_INVALID;
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++) {
            if (++fdigits > 2)
                return PO_ERR_INVALID;
            frac = frac * 10 + (*p - '0');
        }
        if (fdigits == 0)
            return PO_ERR_INVALID;
    }
    if (*p)
        return PO_ERR_INVALID;
    if (fdigits == 1)
        frac *= 10;
    int64_t v = whole * 100 + frac;
    if (!po_amount_valid(v))
        return PO_ERR_INVALID;
    *out = v;
    return PO_OK;
}

/* An answer's event: the fields every query result has, the currency
 * upper-cased; false when one does not fit. */
static bool query_event(const struct po_channel_account *a, enum po_event_type type,
                        const char *out_trade_no, const char *txn, int64_t amount,
                        const char *currency, struct po_event *ev)
{
    memset(ev, 0, sizeof *ev);
    ev->type = type;
    ev->source = PO_SRC_QUERY;
    ev->amount_minor = amount;
    for (int i = 0; currency && i < 3 && currency[i]; i++)
        ev->currency[i] = (char)toupper((unsigned char)currency[i]);
    return currency && strlen(currency) == 3 &&
           po_set_field(ev->tenant, sizeof ev->tenant, a->tenant) &&
           po_set_field(ev->channel, sizeof ev->channel, a->channel) &&
           po_set_field(ev->out_trade_no, sizeof ev->out_trade_no, out_trade_no) &&
           (!txn || !*txn || po_set_field(ev->channel_txn_id, sizeof ev->channel_txn_id, txn));
}

void po_query_paid(const struct po_channel_account *a, const char *out_trade_no, const char *txn,
                   int64_t amount, const char *currency, struct po_query_answer *out)
{
    char verr[PO_ERRBUF_SIZE];
    bool ok = txn && *txn &&
              query_event(a, PO_EV_PAY_SUCCESS, out_trade_no, txn, amount, currency, &out->ev) &&
              po_event_validate(&out->ev, verr, sizeof verr) == PO_OK;
    out->state = ok ? PO_QUERY_PAID : PO_QUERY_FAILED;
    if (!ok)
        (void)snprintf(out->why, sizeof out->why, "malformed_answer");
}

void po_query_refund(const struct po_channel_account *a, enum po_event_type type,
                     const struct po_refund_request *r, const char *refund_id, const char *txn,
                     int64_t amount, const char *currency, struct po_refund_query_answer *out)
{
    struct po_event *ev = &out->ev;
    char verr[PO_ERRBUF_SIZE];
    bool ok = query_event(a, type, r->out_trade_no, txn, amount, currency, ev) &&
              po_set_field(ev->out_refund_no, sizeof ev->out_refund_no, r->out_refund_no) &&
              po_set_field(ev->channel_refund_id, sizeof ev->channel_refund_id, refund_id) &&
              po_event_validate(ev, verr, sizeof verr) == PO_OK;
    out->state = ok ? PO_RQ_FINAL : PO_RQ_FAILED;
    if (!ok)
        (void)snprintf(out->why, sizeof out->why, "malformed_answer");
}
