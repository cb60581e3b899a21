/*
 * channel.h — channel adapters: (headers, raw body, tenant credentials) in,
 * a normalised event or a verification failure out; and the channel's ack.
 *
 * Adapters never touch the store. They verify over the raw body bytes
 * BEFORE parsing anything, so nothing unauthenticated reaches the engine.
 * Every input is bounded; a bad request is a verification failure with a
 * reason code, never a crash.
 */
#ifndef PO_CHANNEL_H
#define PO_CHANNEL_H

#include "../core/core.h"
#include "../crypto/crypto.h"
#include "../engine/engine.h"

#include <jansson.h>

/* One tenant's configuration for one channel, secrets unsealed. */
struct po_channel_account {
    char tenant[PO_ID_MAX + 1];
    char channel[PO_CHANNEL_MAX];
    int64_t window_s; /* timestamp tolerance, seconds */
    /* wechatpay */
    char mchid[PO_ID_MAX + 1];
    char appid[PO_ID_MAX + 1];
    unsigned char apiv3_key[32];
    size_t apiv3_key_len;
    int nkeys;
    struct {
        char serial[PO_SERIAL_MAX + 1]; /* certificate serial (hex) or PUB_KEY_ID_… */
        struct po_pubkey *key;
    } keys[PO_CHANNEL_KEYS_MAX];
    /* channel APIs (active query): base URL, and the merchant's API key that
     * signs requests (WECHATPAY2-SHA256-RSA2048) when configured */
    char api_base_url[256];
    char notify_url[512]; /* where the channel sends refund results ("" = its default) */
    char merchant_serial[PO_SERIAL_MAX + 1];
    struct po_privkey *merchant_key;
    /* alipay */
    char app_id[PO_ID_MAX + 1];
    char seller_id[PO_ID_MAX + 1];
    struct po_pubkey *alipay_key;
    /* stripe */
    int nsecrets;
    struct {
        unsigned char v[PO_SECRET_MAX];
        size_t len;
    } secrets[PO_WEBHOOK_SECRETS_MAX];
};

/* Releases keys and wipes secrets. */
void po_channel_account_free(struct po_channel_account *a);

/*
 * Loads a stored channel_account.config document, unsealing its secrets
 * with the master key (AAD "<tenant>/<channel>/<field>"). With master NULL
 * (insecure development mode) secrets stored as "plain:<base64>" are
 * accepted; sealed ones then fail.
 */
po_err po_channel_account_load(const char *tenant, const char *channel, const char *json,
                               const unsigned char *master, struct po_channel_account *out,
                               char *err, size_t errcap) PO_MUST_CHECK;

/* A request as received. header() looks a header up case-insensitively. */
struct po_notify_req {
    const char *body;
    size_t body_len;
    const char *(*header)(void *ctx, const char *name);
    void *hctx;
    int64_t now_unix;
};

enum po_notify_status {
    PO_NOTIFY_EVENT,    /* verified; ev is ready for the engine */
    PO_NOTIFY_IGNORE,   /* verified; nothing to apply (e.g. a status we do not act on) */
    PO_NOTIFY_MISMATCH, /* verified, but for another merchant/app: alert, ack success */
    PO_NOTIFY_REJECT,   /* verification failed: ack FAIL, nothing recorded */
};

struct po_notify_result {
    enum po_notify_status status;
    struct po_event ev;          /* EVENT and MISMATCH */
    char reason[PO_REASON_MAX];  /* REJECT: verification reason; MISMATCH: business reason */
    char detail[160];            /* for logs and alerts; never secrets */
    /* Profit sharing: WeChat names the payment, not our order; the caller
     * resolves out_trade_no from this channel transaction id. */
    char pay_txn_id[PO_TXN_ID_MAX + 1];
};

/* Dispatches on a->channel. Returns PO_OK with *out filled (including
 * rejections); non-OK only for out-of-memory. */
po_err po_channel_parse(const struct po_channel_account *a, const struct po_notify_req *req,
                        struct po_notify_result *out) PO_MUST_CHECK;

po_err po_wechatpay_parse(const struct po_channel_account *a, const struct po_notify_req *req,
                          struct po_notify_result *out) PO_MUST_CHECK;
/* The signature checks alone (headers, window, serial, SHA256withRSA over
 * "ts\nnonce\nbody\n"): WeChat Pay signs its API responses the same way as
 * its callbacks. *ok false leaves the reason in out. */
po_err po_wechatpay_verify(const struct po_channel_account *a, const struct po_notify_req *req,
                           struct po_notify_result *out, bool *ok) PO_MUST_CHECK;
po_err po_alipay_parse(const struct po_channel_account *a, const struct po_notify_req *req,
                       struct po_notify_result *out) PO_MUST_CHECK;
po_err po_stripe_parse(const struct po_channel_account *a, const struct po_notify_req *req,
                       struct po_notify_result *out) PO_MUST_CHECK;

/* A WeChat Pay API v3 response, bounded; status 0 when there was no answer
 * (connection refused, timeout, body over 16 KiB). */
struct po_api_resp {
    long status;
    char body[16384];
    size_t len;
    char serial[80], sig[700], ts[32], nonce[80];
};
/* Calls a->api_base_url + path (method GET with body NULL, or POST with a
 * JSON body), signed with the merchant's API key when one is configured.
 * Non-OK only for out-of-memory or an over-long URL. */
po_err po_wechatpay_call(const struct po_channel_account *a, const char *method, const char *path,
                         const char *body, struct po_api_resp *out) PO_MUST_CHECK;
/* The response carries a valid platform signature (only such answers
 * count); otherwise false with the reason code. */
bool po_wechatpay_resp_signed(const struct po_channel_account *a, const struct po_api_resp *r,
                              char *reason, size_t cap);

/* Calls the Alipay gateway (a->api_base_url) with one method and its
 * biz_content JSON, signed RSA2 with the app's private key (a->merchant_key;
 * PO_ERR_INVALID without one). out->status 0 when there was no answer. */
po_err po_alipay_call(const struct po_channel_account *a, const char *method,
                      const char *biz_content, struct po_api_resp *out) PO_MUST_CHECK;
/* The "<method>_response" (or "error_response") object of an answer whose
 * signature verifies with the Alipay public key — parsed from exactly the
 * signed text — or NULL with the reason code (caller json_decrefs). */
json_t *po_alipay_resp_verified(const struct po_channel_account *a, const struct po_api_resp *r,
                                const char *method, char *reason, size_t cap);

/* application/x-www-form-urlencoded (form.c): Alipay's notifications and
 * its gateway's requests. Keys are unique and plain; po_form_free releases
 * a form after a failed parse too. */
struct po_form_param {
    char *key;
    char *val;
    size_t val_len;
};
struct po_form {
    int n;
    struct po_form_param p[PO_FORM_PARAMS_MAX];
};
bool po_form_parse(const char *body, size_t len, struct po_form *f);
const char *po_form_get(const struct po_form *f, const char *key);
/* Appends key=val; PO_ERR_INVALID for a repeated key or a full form. */
po_err po_form_add(struct po_form *f, const char *key, const char *val) PO_MUST_CHECK;
void po_form_free(struct po_form *f);
/* The encoded body, in the form's order (malloc'd). */
char *po_form_encode(const struct po_form *f, size_t *out_len);
/* Alipay's RSA2 sign content: keys sorted, empty values and `sign` left
 * out, and `sign_type` too when notify (rsaCheckV1; an API request signs
 * it). po_alipay_sign_form appends `sign` made with key. */
char *po_alipay_sign_content(const struct po_form *f, bool notify);
po_err po_alipay_sign_form(const struct po_privkey *key, struct po_form *f,
                           bool notify) PO_MUST_CHECK;

/* Yuan (or dollars) text to minor units, exactly: "12.3" -> 1230, "0.01" -> 1.
 * At most two decimals; no sign, exponent or spaces. */
po_err po_parse_major_amount(const char *s, int64_t *out) PO_MUST_CHECK;

/* The channel's acknowledgement. */
struct po_ack {
    unsigned status;           /* HTTP status */
    const char *content_type;
    char body[192];
};
void po_channel_ack(const char *channel, bool success, unsigned fail_status, const char *message,
                    struct po_ack *out);

#endif
