/*
 * channel_int.h — private to src/channel: the registered channels' ops and
 * the helpers their files share (verification results, account documents,
 * outbound API calls).
 */
#ifndef PO_CHANNEL_INT_H
#define PO_CHANNEL_INT_H

#include "channel.h"

#include <jansson.h>
#include <stdarg.h>

/* ---- verification results (common.c) ---- */
/* Marks *out as a verification failure (a VERIFY reason) with a detail. */
/* The JSON object of a verified notification's text: *doc, or NULL with
 * the notification rejected (reason, naming `what`); PO_ERR_NOMEM only
 * when memory ran out (the callback is answered retry). */
po_err po_notify_json(const char *text, size_t len, struct po_notify_result *out,
                      enum po_reason reason, const char *what, json_t **doc) PO_MUST_CHECK;
void po_notify_reject(struct po_notify_result *out, enum po_reason reason, const char *fmt, ...)
    PO_PRINTF(3, 4);
/* Marks *out as verified but for another merchant/app (a REJECT reason:
 * alert, ack success). */
void po_notify_mismatch(struct po_notify_result *out, enum po_reason reason, const char *fmt, ...)
    PO_PRINTF(3, 4);
/* Marks *out as verified with nothing to apply. */
void po_notify_ignore(struct po_notify_result *out, const char *fmt, ...) PO_PRINTF(2, 3);
/* Verified, but the event cannot be mapped (out->ev carries the tenant,
 * channel, type and the channel's own event id as its key). */
void po_notify_unmapped(struct po_notify_result *out, const char *fmt, ...) PO_PRINTF(2, 3);
/* ts (decimal Unix seconds) within the account's window of now; rejects
 * with bad_timestamp / stale_timestamp / future_timestamp otherwise. */
bool po_notify_window_ok(const struct po_channel_account *a, const char *ts, int64_t now,
                         struct po_notify_result *out);
/* The event fields every adapter sets: tenant and channel from the account,
 * source callback. */
void po_notify_event_init(const struct po_channel_account *a, struct po_notify_result *out);
/* A string member of a JSON object, or NULL. */
const char *po_json_str(json_t *obj, const char *name);
/* Bounded copy of a possibly-NULL string; false when NULL or too long. */
bool po_set_field(char *dst, size_t cap, const char *src);
/* A channel's error code, bounded to 40 characters of [A-Za-z0-9_.-]
 * ("HTTP_<status>" when there is none). */
void po_channel_clean_code(const char *code, long status, char *out, size_t cap);
/* A channel's answer that the order is paid, as the event its payment
 * notification would have made (source query; the same type and
 * transaction id: the same key): out->state PAID, or FAILED
 * (malformed_answer) when a field is missing or out of bounds. The
 * currency is upper-cased (Stripe writes it in lower case). */
void po_query_paid(const struct po_channel_account *a, const char *out_trade_no, const char *txn,
                   int64_t amount, const char *currency, struct po_query_answer *out);
/* The same for a refund's final result: type (REFUND_SUCCESS / _CLOSED /
 * _ABNORMAL) with the refund's own ids, as its notification makes it;
 * out->state FINAL, or FAILED (malformed_answer). */
void po_query_refund(const struct po_channel_account *a, enum po_event_type type,
                     const struct po_refund_request *r, const char *refund_id, const char *txn,
                     int64_t amount, const char *currency, struct po_refund_query_answer *out);

/* ---- account documents (account.c) ---- */
/* The adapter's own part of a, zeroed (size bytes); NULL when out of
 * memory. Its account_free calls po_account_priv_free(priv, size), which
 * wipes it. */
void *po_account_priv_new(struct po_channel_account *a, size_t size);
void po_account_priv_free(void *priv, size_t size);
/* Seals a secret for its slot "<tenant>/<channel>/<field>" with in->master
 * (or encodes it "plain:" in development mode). NULL on failure. */
json_t *po_account_seal(const struct po_account_input *in, const char *channel, const char *field,
                        const void *secret, size_t len);
/* Unseals one stored secret field into dst (cap bytes); PO_ERR_INVALID
 * with the field named in err. */
po_err po_account_unseal(const struct po_channel_account *a, const char *field, const char *stored,
                         const unsigned char *master, unsigned char *dst, size_t cap,
                         size_t *out_len, char *err, size_t errcap) PO_MUST_CHECK;
/* Reads a key, certificate or secret file (at most PO_KEY_FILE_MAX);
 * strip drops trailing newlines. NULL with err on failure. */
char *po_account_read_file(const char *path, bool strip, size_t *len, char *err, size_t errcap);
/* The options for the channel's own APIs (refunds, queries): the API base
 * URL, the merchant's (Alipay: the app's) private key that signs requests,
 * sealed, with its serial where the channel wants one, and where the
 * channel sends refund results. */
po_err po_account_build_api(const struct po_account_input *in, const char *channel,
                            bool need_serial, json_t *cfg, char *err, size_t errcap) PO_MUST_CHECK;
po_err po_account_load_api(json_t *cfg, const unsigned char *master, struct po_channel_account *a,
                           const char *default_base, bool need_serial, char *err,
                           size_t errcap) PO_MUST_CHECK;
/* The `channel set` options every channel with an API takes. */
#define PO_API_OPTIONS                                                                             \
    {"api-base-url", "the channel API's base URL (https://; http:// only on loopback)"},           \
        {"merchant-private-key-file",                                                              \
         "PEM private key that signs requests to the channel's API (sealed)"},                     \
    {                                                                                              \
        "notify-url", "where the channel sends refund results"                                     \
    }

/* ---- outbound calls (api_http.c) ---- */
/* One request to a channel API: POST when body is not NULL, GET otherwise;
 * headers are "Name: value" lines (NULL entries skipped); User-Agent and
 * (unless given) Accept: application/json are added. The answer is read up
 * to max bytes (PO_API_RESP_MAX / PO_API_LIST_MAX); out->status stays 0
 * when there was no complete answer within it (po_api_why_none). The
 * caller releases out (po_api_resp_release). Non-OK only for
 * out-of-memory. */
po_err po_api_request(const char *url, const char *const *headers, int nheaders, const char *body,
                      size_t max, struct po_api_resp *out) PO_MUST_CHECK;
/* One GET of a file (a bill) up to max bytes, 120 s in all, streamed to a
 * temporary file and read back whole once it arrived: out->body (heap,
 * NUL-terminated, out->len bytes) and out->status; status 0 and body NULL
 * when there was no complete answer (none, or over max: too_large). The
 * caller takes or releases out->body. Non-OK only for out-of-memory (or no
 * temporary file). */
po_err po_api_download(const char *url, const char *const *headers, int nheaders, size_t max,
                       struct po_api_resp *out) PO_MUST_CHECK;

/* ---- bills (wechatpay_bill.c, shared by every bill format) ---- */
/* Exact fixed-point: s with at most scale decimals -> value * 10^scale
 * (within 10^17), a leading '-' allowed; false otherwise. */
bool po_bill_fixed(const char *s, int scale, int64_t *out);
/* *sum += v within the same bound; false (nothing changed) beyond it. */
bool po_bill_add(int64_t *sum, int64_t v);
/* Splits line in place at commas into f (PO_BILL_FIELDS_MAX at most):
 * with backticks, each field must start with one (WeChat Pay's detail rows)
 * and loses it; with trim, the spaces and tabs around each field go
 * (Alipay pads ids with them). Returns the field count or -1. */
int po_bill_split(char *line, char **f, bool backticks, bool trim);
/* The index of the column named name among h[0..n), or -1. */
int po_bill_col(char **h, int n, const char *name);
/* A new zeroed row at the end of b (grown by doubling *cap); NULL when out
 * of memory. The caller counts it (b->nrows++) once it is whole. */
struct po_bill_row *po_bill_row_add(struct po_bill *b, int *cap);
/* The bill parsers' one way out with a reason: the message into the
 * parser's err (errcap bytes), rc = PO_ERR_INVALID, then its label out —
 * every parser names them so. */
#define PO_BILL_BAD(...)                                                                           \
    do {                                                                                           \
        po_errf(err, errcap, __VA_ARGS__);                                                         \
        rc = PO_ERR_INVALID;                                                                       \
        goto out;                                                                                  \
    } while (0)
/* The bill's text as one NUL-terminated copy in *out_text (the caller frees
 * it): a UTF-8 BOM dropped from data and len (so the caller reads on without
 * it), NUL bytes refused (PO_ERR_INVALID, said in err), PO_ERR_NOMEM.
 * *out_text is set only on success. */
po_err po_bill_text(const char **data, size_t *len, char **out_text, char *err,
                    size_t errcap) PO_MUST_CHECK;
/* The next line of a bill's text, strtok_r-like: text on the first call,
 * NULL after it, *save the caller's. Every line counts in *lineno; empty
 * ones (and a lone CR) are skipped; a trailing CR is dropped (CRLF bills).
 * *out_line NULL at the end. A line longer than PO_BILL_LINE_MAX:
 * PO_ERR_INVALID, said in err with its number. */
po_err po_bill_line(char *text, char **save, int *lineno, char **out_line, char *err,
                    size_t errcap) PO_MUST_CHECK;
/* Bounded copy of a field; false when it does not fit (dst then unspecified). */
bool po_bill_copy(char *dst, size_t cap, const char *src);
/* A new row at the end of b as po_bill_row_add, refused past
 * PO_BILL_ROWS_MAX (PO_ERR_INVALID, said in err); PO_ERR_NOMEM. */
po_err po_bill_row_next(struct po_bill *b, int *cap, struct po_bill_row **out_row, char *err,
                        size_t errcap) PO_MUST_CHECK;
/* Hands the finished bill *b to *out (the caller's now) and leaves *b
 * empty, so that the parser's cleanup (po_bill_free) frees nothing of it. */
void po_bill_hand(struct po_bill *b, struct po_bill *out);
/* Widens b's period (period_start..period_end, YYYY-MM-DD) to day. */
void po_bill_period(struct po_bill *b, const char *day);

/* ---- the channels' own parts of an account (a->priv) ---- */
/* WeChat Pay (wechatpay.c, wechatpay_api.c). */
struct po_wechatpay_account {
    char mchid[PO_ID_MAX + 1];
    char appid[PO_ID_MAX + 1];
    /* service-provider mode: the tenant is this sub-merchant of the
     * provider named by mchid ("" = a direct merchant) */
    char sub_mchid[PO_ID_MAX + 1];
    char sub_appid[PO_ID_MAX + 1];
    unsigned char apiv3_key[32];
    size_t apiv3_key_len;
};
static inline const struct po_wechatpay_account *po_wechatpay_of(const struct po_channel_account *a)
{
    return a->priv;
}
/* Alipay (alipay.c, alipay_api.c); its public key is a->keys[0]. */
struct po_alipay_account {
    char app_id[PO_ID_MAX + 1];
    char seller_id[PO_ID_MAX + 1];
    /* certificate mode (公钥证书模式): the app certificate's SN and the
     * root chain's, sent with every request ("" in public-key mode);
     * Alipay's certificates are a->keys, each under its SN (serial) */
    char app_cert_sn[PO_SERIAL_MAX + 1];
    char root_cert_sn[PO_ALIPAY_ROOT_SN_MAX + 1];
};
static inline const struct po_alipay_account *po_alipay_of(const struct po_channel_account *a)
{
    return a->priv;
}
/* The signer of a's gateway requests (its strings are a's). */
void po_alipay_app_of(const struct po_channel_account *a, struct po_alipay_app *out);

/* Stripe (stripe.c, stripe_api.c): its webhook secrets, and the account
 * and mode its events must name, when set (a secret shared by two tenants
 * cannot move an event across them); the secret API key that calls
 * Stripe's API ("" = none: payonce does not call it). */
struct po_stripe_account {
    char account[PO_ID_MAX + 1]; /* "" = not checked; else acct_… */
    int livemode;                /* -1 not checked, 0 test mode, 1 live */
    int nsecrets;
    struct {
        unsigned char v[PO_SECRET_MAX];
        size_t len;
    } secrets[PO_WEBHOOK_SECRETS_MAX];
    char api_key[PO_SECRET_MAX + 1];
};
static inline const struct po_stripe_account *po_stripe_of(const struct po_channel_account *a)
{
    return a->priv;
}

/* ---- the channels' own entry points ---- */
po_err po_wechatpay_refund_submit(const struct po_channel_account *a,
                                  const struct po_refund_request *r, struct po_refund_answer *out);
po_err po_wechatpay_order_query(const struct po_channel_account *a, const struct po_order_ref *o,
                                struct po_query_answer *out);
po_err po_wechatpay_order_close(const struct po_channel_account *a, const struct po_order_ref *o,
                                struct po_close_answer *out);
po_err po_wechatpay_bill_parse(const char *data, size_t len, struct po_bill *out, char *err,
                               size_t errcap);
po_err po_alipay_refund_submit(const struct po_channel_account *a,
                               const struct po_refund_request *r, struct po_refund_answer *out);
po_err po_alipay_order_query(const struct po_channel_account *a, const struct po_order_ref *o,
                             struct po_query_answer *out);
po_err po_alipay_bill_parse(const char *data, size_t len, struct po_bill *out, char *err,
                            size_t errcap);
po_err po_alipay_bill_fetch(const struct po_channel_account *a, const char *date,
                            struct po_bill_fetch *out);
po_err po_alipay_refund_query(const struct po_channel_account *a, const struct po_refund_request *r,
                              struct po_refund_query_answer *out);
po_err po_alipay_order_close(const struct po_channel_account *a, const struct po_order_ref *o,
                             struct po_close_answer *out);
po_err po_stripe_order_query(const struct po_channel_account *a, const struct po_order_ref *o,
                             struct po_query_answer *out);
po_err po_stripe_order_close(const struct po_channel_account *a, const struct po_order_ref *o,
                             struct po_close_answer *out);
po_err po_stripe_refund_submit(const struct po_channel_account *a,
                               const struct po_refund_request *r, struct po_refund_answer *out);
po_err po_stripe_refund_query(const struct po_channel_account *a, const struct po_refund_request *r,
                              struct po_refund_query_answer *out);
po_err po_wechatpay_refund_query(const struct po_channel_account *a,
                                 const struct po_refund_request *r,
                                 struct po_refund_query_answer *out);
po_err po_wechatpay_keys_fetch(const struct po_channel_account *a, struct po_key_fetch *out);
po_err po_wechatpay_bill_fetch(const struct po_channel_account *a, const char *date,
                               struct po_bill_fetch *out);
po_err po_wechatpay_pay_create(const struct po_channel_account *a, const struct po_pay_request *r,
                               struct po_pay_answer *out);
po_err po_alipay_pay_create(const struct po_channel_account *a, const struct po_pay_request *r,
                            struct po_pay_answer *out);
/* A Stripe event object (what a webhook's body parses to), verified by
 * whoever fetched it, mapped as its webhook would be (stripe.c). */
void po_stripe_event_map(const struct po_channel_account *a, json_t *root,
                         struct po_notify_result *out);
po_err po_stripe_events_since(const struct po_channel_account *a, int64_t since, int page, int max,
                              struct po_event_walk *out);
po_err po_stripe_bill_parse(const char *data, size_t len, struct po_bill *out, char *err,
                            size_t errcap);
po_err po_stripe_bill_fetch(const struct po_channel_account *a, const char *date,
                            struct po_bill_fetch *out);
po_err po_stripe_pay_create(const struct po_channel_account *a, const struct po_pay_request *r,
                            struct po_pay_answer *out);

#endif
