/*
 * channel.h — the payment channels: one `const struct po_channel_ops` per
 * channel in a registry (registry.c), and everything a channel knows:
 *
 *   account   the tenant's configuration for the channel: the options of
 *             `payonce channel set`, the stored document with its secrets
 *             sealed (crypto's po_secret_store), and loading
 *             it back unsealed with parsed keys
 *   notify    (headers, raw body, account) -> a verified, normalised event,
 *             or a verification failure with its reason code
 *   ack       the channel's own acknowledgement for success and FAIL
 *   refunds   submitting a refund to the channel's refund API (optional)
 *   query     the channel's order-query API (optional)
 *   close     closing an unpaid order at the channel (optional)
 *   refund query  the result of a submitted refund (optional)
 *   bill      the channel's daily bill format (optional)
 *
 * Adding a channel is one file with its ops plus one line in registry.c.
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
#include "../event/event.h"

#include <jansson.h>

/* One tenant's configuration for one channel, secrets unsealed: what
 * every channel has in common, and the adapter's own part (priv), which
 * only its files read. Loaded by po_channel_account_load, released by
 * po_channel_account_free; a struct copy moves it (never free both). */
struct po_channel_account {
    char tenant[PO_ID_MAX + 1];
    char channel[PO_CHANNEL_SIZE];
    int64_t window_s; /* timestamp tolerance, seconds */
    /* The public keys that verify what the channel sends: WeChat Pay's
     * platform certificates or keys, several during a rotation; Alipay's
     * public key. */
    int nkeys;
    struct {
        char serial[PO_SERIAL_MAX + 1]; /* certificate serial (hex), PUB_KEY_ID_…, or "" */
        struct po_pubkey *key;
        int64_t not_after; /* a certificate's end of validity (Unix s); 0: a bare key */
    } keys[PO_CHANNEL_KEYS_MAX];
    /* channel APIs (refunds, active query): base URL, and the merchant's API
     * key that signs requests (WECHATPAY2-SHA256-RSA2048 / RSA2) */
    char api_base_url[256];
    char notify_url[512]; /* where the channel sends refund results ("" = its default) */
    char merchant_serial[PO_SERIAL_MAX + 1];
    struct po_privkey *merchant_key;
    /* The account holds what calls the channel's API: the base URL and the
     * key that signs (merchant_key) or authorises (Stripe's API key) the
     * requests. Without it the account is for notifications only. */
    bool api_ready;
    /* The adapter's own part: set by its account_load, released (and its
     * secrets wiped) by its account_free. */
    void *priv;
};

/* Releases keys and wipes secrets. */
void po_channel_account_free(struct po_channel_account *a);
/* Whether a stored document's value is a secret in the one sealing format
 * (sealed under the master key, or "plain:" in development mode), or an
 * array of them: what an operator is shown as "(sealed)", whatever the
 * channel calls the field. */
bool po_account_value_sealed(json_t *v);

/* ---- accounts: building and loading the stored document (account.c) ---- */

/* What `channel set` was given, as the channel's build step reads it. */
struct po_account_input {
    const char *tenant;
    const unsigned char *master; /* NULL: insecure development mode ("plain:" secrets) */
    /* The last value of an option, or NULL when absent. */
    const char *(*opt)(void *ctx, const char *name);
    /* Every value of a repeatable option, in order; returns the count. */
    int (*opt_all)(void *ctx, const char *name, const char **vals, int max);
    /* A line for the operator ("verification key … from …"); may be NULL. */
    void (*note)(void *ctx, const char *line);
    void *ctx;
};

/* A fixed table of options (benchmarks, tests): name i has value i, a
 * repeated name repeats the option. */
struct po_account_opts {
    const char *names[8], *values[8];
    int n;
};
/* An input reading its options from t (which must outlive it). */
struct po_account_input po_account_input_table(const char *tenant, const unsigned char *master,
                                               const struct po_account_opts *t);

/* One option of `channel set --channel NAME`. */
struct po_channel_option {
    const char *name; /* without the leading "--" */
    const char *help;
};

struct po_channel_ops;

/*
 * Builds the stored document (JSON text, *out_doc heap) for one channel of
 * a tenant from the input, secrets sealed with in->master, and loads it
 * back exactly as the gateway will, so a bad configuration fails here.
 * err names the offending option: PO_ERR_INVALID for bad or missing
 * options, PO_ERR_IO for a file that cannot be read or is not what it
 * should be (a key, a certificate, a secret).
 */
po_err po_channel_account_build(const struct po_channel_ops *ops, const struct po_account_input *in,
                                char **out_doc, char *err, size_t errcap) PO_MUST_CHECK;

/*
 * Loads a stored channel_account.config document, unsealing its secrets
 * with the master key (AAD "<tenant>/<channel>/<field>"). With master NULL
 * (insecure development mode) secrets stored as "plain:<base64>" are
 * accepted; sealed ones then fail. PO_ERR_INVALID names the field in err.
 */
po_err po_channel_account_load(const char *tenant, const char *channel, const char *json,
                               const unsigned char *master, struct po_channel_account *out,
                               char *err, size_t errcap) PO_MUST_CHECK;

/* ---- notifications ---- */

/* A request as received. header() looks a header up case-insensitively. */
struct po_notify_req {
    const char *body;
    size_t body_len;
    const char *(*header)(void *ctx, const char *name);
    void *hctx;
    int64_t now_unix;
    /* every header as received, "Name: value\r\n" each, into buf; returns
     * the length it needs (written only when below cap); NULL: unknown */
    size_t (*headers)(void *ctx, char *buf, size_t cap);
    const char *path; /* the request's path (NULL: unknown) */
};

enum po_notify_status {
    PO_NOTIFY_EVENT,    /* verified; ev is ready for the engine */
    PO_NOTIFY_IGNORE,   /* verified; nothing to apply (e.g. a status we do not act on) */
    PO_NOTIFY_MISMATCH, /* verified, but for another merchant/app: alert, ack success */
    PO_NOTIFY_REJECT,   /* verification failed: ack FAIL, nothing recorded */
    PO_NOTIFY_UNMAPPED, /* verified, but it cannot be mapped to an event (no order
                         * number, an unknown currency, …): recorded once as an
                         * alert keyed by the channel's event id, ack success, so
                         * the channel neither retries it for days nor disables
                         * the endpoint */
};

struct po_notify_result {
    enum po_notify_status status;
    struct po_event ev;    /* EVENT and MISMATCH */
    enum po_reason reason; /* REJECT: a VERIFY reason; MISMATCH: a REJECT reason */
    char detail[160];      /* for logs and alerts; never secrets */
    /* Profit sharing: WeChat names the payment, not our order; the caller
     * resolves out_trade_no from this channel transaction id (the event
     * is then validated by the caller, not the adapter). */
    char pay_txn_id[PO_TXN_ID_MAX + 1];
};

/* Dispatches on a->channel through the registry. Returns PO_OK with *out
 * filled (including rejections); non-OK only for out-of-memory. */
po_err po_channel_parse(const struct po_channel_account *a, const struct po_notify_req *req,
                        struct po_notify_result *out) PO_MUST_CHECK;

/* The signature checks alone (headers, window, serial, SHA256withRSA over
 * "ts\nnonce\nbody\n"): WeChat Pay signs its API responses the same way as
 * its callbacks. *ok false leaves the reason in out. */
po_err po_wechatpay_verify(const struct po_channel_account *a, const struct po_notify_req *req,
                           struct po_notify_result *out, bool *ok) PO_MUST_CHECK;

/* The channel's acknowledgement. */
struct po_ack {
    unsigned status; /* HTTP status */
    const char *content_type;
    char body[192];
};

/* ---- channel APIs ---- */

/* A channel API's answer, read up to the bound its API states (limits.h:
 * PO_API_RESP_MAX for one object, PO_API_LIST_MAX for a list page or a
 * search). status 0 when there was no answer (connection refused, timeout,
 * an answer over the bound: too_large); po_api_why_none says which. body
 * is heap (NUL-terminated, len bytes; "" for an empty answer, NULL without
 * one): po_api_resp_release frees it. */
struct po_api_resp {
    long status;
    char *body;
    size_t len, cap;
    size_t max;     /* the bound it was read under */
    bool too_large; /* the answer was longer than max: status 0 */
    bool nomem;     /* (internal) memory ran out while reading */
    char serial[80], sig[700], ts[32], nonce[80];
    char retry_after[16]; /* a rate-limited answer's Retry-After, "" when none */
};
/* Frees the body (the struct itself is the caller's). NULL is fine. */
void po_api_resp_release(struct po_api_resp *r);
/* Why an answer with status 0 decides nothing: "no_answer", or
 * "answer_over_<bound>" (answer_over_8MiB) when it was over its bound. */
void po_api_why_none(const struct po_api_resp *r, char *why, size_t cap);
/* The User-Agent every outbound call sends:
 * "payonce/<version> curl/<version> (<os> <machine>)". */
const char *po_api_user_agent(void);

/* The budget of every channel API call from now on (default 10 s; at
 * least 100 ms): serve's --channel-timeout-ms. A call without an answer by
 * then decides nothing (no_answer). */
void po_api_set_timeout_ms(long ms);

/* Calls a->api_base_url + path (method GET with body NULL, or POST with a
 * JSON body), signed with the merchant's API key. PO_ERR_INVALID, nothing
 * sent, when the account has no merchant key; otherwise non-OK only for
 * out-of-memory or an over-long URL. */
po_err po_wechatpay_call(const struct po_channel_account *a, const char *method, const char *path,
                         const char *body, struct po_api_resp *out) PO_MUST_CHECK;
/* The response carries a valid platform signature (only such answers
 * count); otherwise false with the reason code. */
bool po_wechatpay_resp_signed(const struct po_channel_account *a, const struct po_api_resp *r,
                              char *reason, size_t cap);

/* Calls the Alipay gateway (a->api_base_url) with one method and its
 * biz_content JSON, signed RSA2 with the app's private key (a->merchant_key;
 * PO_ERR_INVALID without one), as alipay-sdk's exec() sends it: the common
 * parameters (and the certificate SNs in certificate mode) in the URL's
 * query string, biz_content in the form body; notify_url with the methods
 * Alipay notifies (precreate, refund). out->status 0 when there was no
 * answer. */
po_err po_alipay_call(const struct po_channel_account *a, const char *method,
                      const char *biz_content, struct po_api_resp *out) PO_MUST_CHECK;
/* The "<method>_response" (or "error_response") object of an answer whose
 * signature verifies with the Alipay public key — parsed from exactly the
 * signed text — or NULL with the reason code (caller json_decrefs). */
json_t *po_alipay_resp_verified(const struct po_channel_account *a, const struct po_api_resp *r,
                                const char *method, char *reason, size_t cap);

/* An order as the channel's query and close name it: its number, and the
 * channel's own ids payonce holds for it ("" when none) — the create
 * answer's (a PaymentIntent's pi_…; WeChat's prepay_id) and the payment's
 * (a notification's transaction_id, trade_no, pi_…). A channel whose
 * search is no read-after-write (Stripe) retrieves by them. */
struct po_order_ref {
    const char *out_trade_no;
    const char *channel_order_id;
    const char *channel_txn_id;
};

/* A refund to submit to the channel. */
struct po_refund_request {
    const char *out_trade_no;
    const char *out_refund_no;
    int64_t amount; /* this refund, minor units */
    int64_t total;  /* the amount of the payment refunded (the order's) */
    const char *currency;
    /* "" or NULL: the order's payment, named by out_trade_no. Else the
     * channel transaction refunded (a payment parked in suspense: a second
     * payment of the order, or one after it was closed), named by its id. */
    const char *txn_id;
    /* The channel's ids payonce holds ("" or NULL when none): the order's,
     * as po_order_ref has them, and this refund's own (the refund API's
     * answer, po_refund_answer.refund_id). A channel whose search is not
     * read-after-write (Stripe) refunds and asks by them. */
    const char *channel_order_id;
    const char *channel_txn_id;
    const char *channel_refund_id;
};

enum po_refund_decision {
    PO_REFUND_PENDING,   /* no decisive answer: submit again later (the channel is
                            idempotent on out_refund_no) */
    PO_REFUND_SUBMITTED, /* accepted; the refund-result notification completes it */
    PO_REFUND_REJECTED,  /* refused for good: close it, release the reservation */
};

struct po_refund_answer {
    enum po_refund_decision decision;
    long http_status; /* 0: no answer */
    char code[48];    /* the channel's error code, bounded to [A-Za-z0-9_.-] */
    bool throttled;   /* PENDING by the channel's rate limit (Alipay 40005): the
                         round backs off from the account until its next turn */
    /* SUBMITTED: the channel's id of the refund when its answer gives one
     * (Stripe's re_…; kept as the refund's channel_refund_id), else "" */
    char refund_id[PO_TXN_ID_MAX + 1];
};

enum po_query_state {
    PO_QUERY_FAILED,   /* no answer, or an answer the channel did not sign */
    PO_QUERY_NOT_PAID, /* the channel has no payment for the order */
    PO_QUERY_PAID,     /* paid: ev is the payment's event (source query) */
};

struct po_query_answer {
    enum po_query_state state;
    long http_status;
    char why[PO_REASON_SIZE]; /* FAILED: what was wrong */
    struct po_event ev;       /* PAID; validated */
    bool throttled;           /* FAILED by the channel's rate limit (Alipay 40005): the
                                 round stops asking for the account */
};

enum po_close_state {
    PO_CLOSE_FAILED,  /* no decisive answer (none, unsigned, 5xx, rate limited): the order
                         stays open; ask again later */
    PO_CLOSE_CLOSED,  /* closed at the channel, or the channel never had the order:
                         nobody can pay it there any more */
    PO_CLOSE_REFUSED, /* the channel would not close it (paid, or no longer open):
                         the order query decides */
};

struct po_close_answer {
    enum po_close_state state;
    long http_status;
    char why[PO_REASON_SIZE]; /* FAILED / REFUSED: the channel's code or what was wrong */
};

enum po_refund_query_state {
    PO_RQ_FAILED,    /* no decisive answer: ask again later */
    PO_RQ_PENDING,   /* the channel is still processing it */
    PO_RQ_FINAL,     /* ev: its result, the event the refund's notification would
                        have made (the same key), source query */
    PO_RQ_NOT_FOUND, /* the channel has no such refund */
};

struct po_refund_query_answer {
    enum po_refund_query_state state;
    long http_status;
    char why[PO_REASON_SIZE];
    struct po_event ev;
    bool throttled; /* FAILED by the channel's rate limit (Alipay 40005): the round
                       skips the account's other refunds */
};

/* A payment to create at the channel for an order (POST /v1/orders with a
 * pay_method): what the buyer will pay, and where the channel notifies. */
struct po_pay_request {
    const char *tenant;
    const char *out_trade_no;
    const char *pay_method; /* one of the channel's pay_methods */
    int64_t amount;         /* minor units */
    const char *currency;
    int64_t expires_at;       /* Unix s; 0: none */
    const char *description;  /* what is bought (WeChat description, Alipay subject) */
    const char *payer_openid; /* WeChat JSAPI: the payer's openid under the appid */
    const char *payer_ip;     /* WeChat H5: the payer's client IP */
    const char *return_url;   /* Alipay page / wap pay: where the buyer returns */
};

enum po_pay_state {
    PO_PAY_FAILED,  /* no decisive answer (none, unsigned, 5xx, rate limited): nothing is
                       known to exist at the channel; the same request again is safe (the
                       channel is idempotent on the order number) */
    PO_PAY_CREATED, /* created: payment holds what the buyer's side needs */
    PO_PAY_REFUSED, /* the channel refused it for good (its code in why) */
};

struct po_pay_answer {
    enum po_pay_state state;
    long http_status;
    char why[PO_REASON_SIZE];
    /* CREATED: the channel's own id of the payment ("" when it gives none
     * before the payment: WeChat Native / H5, Alipay), and what the
     * tenant's front end needs, a JSON object (caller json_decrefs). */
    char channel_id[PO_TXN_ID_MAX + 1];
    json_t *payment;
};

/* The channel's own record of the notifications it sent (Stripe's events
 * API), walked from a point in time. */
struct po_event_walk {
    bool ok; /* every page was answered: the walk is whole */
    long http_status;
    char why[PO_REASON_SIZE];
    int n;
    struct po_notify_result *r; /* heap: n events, oldest first, each as its webhook would have
                                   been parsed (status EVENT with ev, IGNORE, UNMAPPED,
                                   MISMATCH); source query */
    int64_t newest;             /* the newest event's creation time (Unix s; 0: none) */
};
void po_event_walk_free(struct po_event_walk *w);

/* The channel's current verification keys as its API hands them out
 * (WeChat Pay's GET /v3/certificates), each checked. */
struct po_key_fetch {
    bool ok; /* an answer the channel signed, every certificate decrypted and valid */
    long http_status;
    char why[PO_REASON_SIZE];
    int n;
    struct {
        char serial[PO_SERIAL_MAX + 1];
        char *pem; /* the public key, PEM (heap) */
        int64_t not_before, not_after;
    } k[PO_CHANNEL_KEYS_MAX];
};
void po_key_fetch_free(struct po_key_fetch *f);

/* ---- outbound requests to destinations a tenant chooses (egress.c) ---- */

/* What an address is; only PUBLIC is sent to without the operator's say. */
enum po_egress_class {
    PO_EGRESS_PUBLIC,
    PO_EGRESS_LOOPBACK,    /* 127/8, ::1 */
    PO_EGRESS_PRIVATE,     /* 10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7, ... */
    PO_EGRESS_LINK_LOCAL,  /* 169.254/16 (cloud metadata), fe80::/10 */
    PO_EGRESS_MULTICAST,   /* 224/4, ff00::/8 */
    PO_EGRESS_UNSPECIFIED, /* 0/8, :: */
    PO_EGRESS_RESERVED,    /* 240/4, broadcast, documentation, IPv4-compatible */
};
/* addr: IPv6, or IPv4 as IPv4-mapped (::ffff:a.b.c.d), whose embedded
 * IPv4 address is what is judged (also for NAT64 and 6to4 forms). */
enum po_egress_class po_egress_classify(const unsigned char addr[16]);
const char *po_egress_class_name(enum po_egress_class c);

/* Where payonce may send: public addresses, plus loopback in development
 * (--insecure-dev) and the operator's allow-list (webhook-allow-net). */
struct po_egress_policy {
    bool allow_loopback;
    int nallow;
    struct {
        unsigned char addr[16];
        int bits; /* prefix length over the 16 bytes */
    } allow[PO_EGRESS_ALLOW_MAX];
};
/* cidrs: "" or a list of addresses / networks separated by commas or
 * spaces ("10.2.0.0/16, fd00::/8"); on error *out says nothing. */
po_err po_egress_policy_parse(const char *cidrs, bool allow_loopback, struct po_egress_policy *out,
                              char *err, size_t errcap) PO_MUST_CHECK;
/* Whether url is one payonce would send to, judged without resolving a
 * name (at the time a tenant registers it): parsed by libcurl, http(s),
 * no user:password, http only to loopback in development, a literal
 * address (any spelling) allowed by the policy, not "localhost". The
 * send re-checks every resolved address (po_http_post). */
bool po_egress_url_ok(const struct po_egress_policy *p, const char *url, char *err, size_t errcap);

/* The coarse class of a failed send, the only thing a tenant is shown. */
enum po_egress_error {
    PO_EGRESS_OK,      /* an HTTP answer came: status */
    PO_EGRESS_REFUSED, /* the policy refused an address: nothing was connected to */
    PO_EGRESS_BAD_URL, /* not a URL payonce sends to: nothing was connected to */
    PO_EGRESS_DNS,
    PO_EGRESS_CONNECT,
    PO_EGRESS_TIMEOUT,
    PO_EGRESS_TLS,
    PO_EGRESS_SEND,
};
const char *po_egress_error_text(enum po_egress_error e);
struct po_egress_result {
    long status;                /* the HTTP status when error is PO_EGRESS_OK */
    enum po_egress_error error; /* the class (shown to the tenant) */
    char detail[256];           /* the transport's words: operators' log only */
};
/* One POST of body to url within timeout_ms, under policy p: the URL is
 * parsed, its host resolved once, every address checked, and the
 * connection pinned to the checked addresses (no second resolution, no
 * proxy, no redirects). The answer's body is read and dropped.
 * PO_ERR_NOMEM only when nothing could be sent; every other outcome is in
 * *out. */
po_err po_http_post(const struct po_egress_policy *p, const char *url, const char *const *headers,
                    int nheaders, const char *body, long timeout_ms,
                    struct po_egress_result *out) PO_MUST_CHECK;

/* ---- bills ---- */

enum po_bill_kind { PO_BILL_PAY, PO_BILL_REFUND };

/* One detail row, amounts exact: money in minor units, fees in thousandths. */
struct po_bill_row {
    enum po_bill_kind kind;
    char time[24];                 /* trade time, "YYYY-MM-DD HH:MM:SS" (+08:00) */
    char mchid[PO_ID_MAX + 1];     /* the merchant the row belongs to */
    char sub_mchid[PO_ID_MAX + 1]; /* sub-merchant ("0" for direct merchants) */
    char txn[PO_TXN_ID_MAX + 1];   /* the channel's transaction id */
    char out_trade_no[PO_ID_MAX + 1];
    char currency[4];
    int64_t amount;                    /* payments: order amount; refunds: refund amount */
    char refund_id[PO_TXN_ID_MAX + 1]; /* the channel's refund id */
    char out_refund_no[PO_ID_MAX + 1];
    char refund_status[16];
    int64_t fee_milli; /* fee, thousandths of the minor unit */
};

struct po_bill {
    int nrows;
    struct po_bill_row *rows; /* heap */
    char period_start[11], period_end[11];
};
void po_bill_free(struct po_bill *b);

/* A day's bill downloaded from the channel (ops bill_fetch). */
enum po_bill_state {
    PO_BILL_FAILED,    /* no usable bill (no answer, unsigned, refused, a download that
                          is truncated or does not match its hash): ask again later */
    PO_BILL_NOT_READY, /* the channel has not published it yet */
    PO_BILL_NONE,      /* the channel has no bill for the day: no trades */
    PO_BILL_FETCHED,   /* data: the bill as bill_parse reads it */
};
struct po_bill_fetch {
    enum po_bill_state state;
    long http_status;
    char why[PO_REASON_SIZE];
    char *data; /* FETCHED: heap, len bytes (caller frees) */
    size_t len;
};

/* WeChat Pay's bill download, checked: the gzip file inflated (within
 * PO_BILL_MAX, the whole stream, nothing after it) and its SHA-1 equal to
 * sha1_hex, the hash of the original bill that tradebill's signed answer
 * gave. *out heap (NUL-terminated). PO_ERR_INVALID with why: bad_gzip,
 * truncated, too_large, hash_mismatch. */
po_err po_wechatpay_bill_unpack(const char *gz, size_t len, const char *sha1_hex, char **out,
                                size_t *out_len, char *why, size_t cap) PO_MUST_CHECK;

/* ---- the registry ---- */

struct po_channel_ops {
    const char *name;  /* URL segment, stored channel, metric label: [a-z0-9_] */
    const char *title; /* for people: "WeChat Pay API v3" */
    /* `channel set` options of this channel (NULL-terminated). */
    const struct po_channel_option *options;
    /* Adds this channel's fields to the stored document cfg (account.c's
     * helpers seal the secrets). PO_ERR_INVALID with err for bad input. */
    po_err (*account_build)(const struct po_account_input *in, json_t *cfg, char *err,
                            size_t errcap);
    /* Fills a's common fields and its own part (a->priv, allocated first
     * thing, so that po_channel_account_free releases it whatever fails
     * later) from the stored document, unsealing with master (account.c's
     * helpers). */
    po_err (*account_load)(json_t *cfg, const unsigned char *master, struct po_channel_account *a,
                           char *err, size_t errcap);
    /* Releases the own part account_load allocated, wiping its secrets
     * (required with a priv; NULL is fine). */
    void (*account_free)(void *priv);
    /* Verifies and normalises one notification (see po_channel_parse). */
    po_err (*parse)(const struct po_channel_account *a, const struct po_notify_req *req,
                    struct po_notify_result *out);
    /* The channel's ack: success, or FAIL with fail_status and message. */
    void (*ack)(bool success, unsigned fail_status, const char *message, struct po_ack *out);
    /* Optional (NULL: refunds are made in the channel; payonce applies
     * their notifications). Non-OK only for out-of-memory. */
    po_err (*refund_submit)(const struct po_channel_account *a, const struct po_refund_request *r,
                            struct po_refund_answer *out);
    /* With refund_submit: an account without the API key still takes
     * refunds, made in the channel by the tenant and applied from their
     * notifications (as before the channel had refund_submit); false: such
     * a refund is refused (409 no_merchant_key). */
    bool manual_refunds_without_key;
    /* Optional active query of one order. Non-OK only for out-of-memory. */
    po_err (*order_query)(const struct po_channel_account *a, const struct po_order_ref *o,
                          struct po_query_answer *out);
    /* Optional close of an unpaid order at the channel (with order_query,
     * which decides a REFUSED close). Only an answer the channel signed
     * decides. Non-OK only for out-of-memory. */
    po_err (*order_close)(const struct po_channel_account *a, const struct po_order_ref *o,
                          struct po_close_answer *out);
    /* Optional query of a submitted refund (r->txn_id: the payment it
     * refunds). Only an answer the channel signed decides. Non-OK only for
     * out-of-memory. */
    po_err (*refund_query)(const struct po_channel_account *a, const struct po_refund_request *r,
                           struct po_refund_query_answer *out);
    /* Optional: creates the payment of an order at the channel
     * (po_pay_request), with the account's notify URL. pay_methods names
     * what it can create (NULL-terminated; the first is the default).
     * Only an answer the channel signed counts. Non-OK only for
     * out-of-memory. */
    const char *const *pay_methods;
    po_err (*pay_create)(const struct po_channel_account *a, const struct po_pay_request *r,
                         struct po_pay_answer *out);
    /* With order_query: the prefix of the channel's own id of a payment
     * when its calls ask by that id, not by out_trade_no alone (Stripe's
     * "pi_", a PaymentIntent: its search only discovers); NULL when the
     * order number is enough. `channel check` probes with such an id that
     * nobody has. */
    const char *order_id_prefix;
    /* The channel is told where to notify with each payment (the
     * account's notify_url, required to create one); false: the endpoint
     * is configured at the channel (Stripe's dashboard). */
    bool pay_notify_url;
    /* Optional: the channel's own rules for an order's fields (its order
     * number's length and characters, the description's, the amount's
     * range), checked when an order is created for this channel, so that
     * an order the channel would refuse is refused when it is made, not at
     * the channel later. r->pay_method may be NULL (an order whose payment
     * is made elsewhere: the number still goes to the channel's query and
     * close). NULL when r obeys them; else the rule broken, for people
     * ("out_trade_no: 6-32 characters of [A-Za-z0-9_-|*] (WeChat Pay)"),
     * and *param the member it is about. */
    const char *(*order_rule)(const struct po_pay_request *r, const char **param);
    /* Optional: why the stored documents of two tenants' accounts of this
     * channel cannot both be (NULL when they can): notifications one's
     * credentials verify that the other's would take too (an Alipay app
     * shared without a seller id on each). Checked when an account is
     * saved, against every other tenant's. */
    const char *(*account_clash)(json_t *mine, json_t *other);
    /* Optional: the channel's verification keys, fetched (a rotation's
     * successor before it signs anything). Non-OK only for out-of-memory. */
    po_err (*keys_fetch)(const struct po_channel_account *a, struct po_key_fetch *out);
    /* Optional: the events the channel created since (Unix s, inclusive),
     * page at a time (its page size), at most max; only a whole walk
     * counts. Non-OK only for out-of-memory. */
    po_err (*events_since)(const struct po_channel_account *a, int64_t since, int page, int max,
                           struct po_event_walk *out);
    /* Optional bill format: parses a bill, refusing (with the line and the
     * reason in err) anything it cannot account for. */
    po_err (*bill_parse)(const char *data, size_t len, struct po_bill *out, char *err,
                         size_t errcap);
    /* Optional, with bill_parse: downloads the bill of one day (date
     * YYYY-MM-DD in the channel's time zone). Non-OK only for
     * out-of-memory. */
    po_err (*bill_fetch)(const struct po_channel_account *a, const char *date,
                         struct po_bill_fetch *out);
    /* With bill_fetch: the channel's day (its offset from UTC, seconds) and
     * when a day's bill is published (seconds after the next midnight
     * there): the daily reconciliation's defaults. */
    int bill_tz_s, bill_publish_s;
    /* With bill_parse: the merchant id this account's rows carry
     * (po_bill_row.mchid); a bill with rows for another is refused. */
    const char *(*bill_merchant)(const struct po_channel_account *a);
};

/* The registered channels, NULL-terminated, in a fixed order (metrics). */
extern const struct po_channel_ops *const po_channels[];
/* The channel with this name, or NULL. */
const struct po_channel_ops *po_channel_find(const char *name);
/* Its position in po_channels (metrics index), or -1. */
int po_channel_index(const char *name);
/* "wechatpay, alipay, stripe": the registered names, for messages; with
 * need != 0 only channels having that capability (see PO_CAN_*). */
#define PO_CAN_REFUND 1u
#define PO_CAN_QUERY 2u
#define PO_CAN_BILL 4u
#define PO_CAN_CLOSE 8u
#define PO_CAN_CREATE 16u
void po_channel_names(unsigned need, char *out, size_t cap);

/* The channel's rule an order for it breaks (ops order_rule), or NULL;
 * NULL also for an unknown channel or one without rules. */
const char *po_channel_order_rule(const char *channel, const struct po_pay_request *r,
                                  const char **param);

/* The channel's account_clash of two stored documents (JSON text), or
 * NULL (no rule, unreadable documents included: they are refused where
 * they are loaded). */
const char *po_channel_account_clash(const char *channel, const char *mine, const char *other);

/* The ack of channel ops (a registered one) for an outcome, its message
 * made safe for the channel's body. */
void po_channel_ack(const struct po_channel_ops *ops, bool success, unsigned fail_status,
                    const char *message, struct po_ack *out);

/* ---- the normalised event's JSON form (event_json.c) ---- */

/* Parses the normalised event JSON of README.md, "The command line" (`payonce apply`):
 * unknown fields rejected, the channel must be registered, then validated.
 * *out is written only on success. */
po_err po_event_from_json(const char *json, size_t len, struct po_event *out, char *err,
                          size_t errcap) PO_MUST_CHECK;

/* ---- helpers shared with the rest of payonce ---- */

/* JSON from outside (json.c): strict RFC 8259, an object or an array at
 * the top, duplicate keys, invalid UTF-8 and \u0000 refused, nesting up to
 * PO_JSON_DEPTH_MAX. *out (caller json_decrefs) is written on success.
 * PO_ERR_INVALID / PO_ERR_LIMIT: malformed, err says where and why;
 * PO_ERR_NOMEM: an allocation failed (retry later, not the sender's fault).
 * Use it, never json_loads, for JSON from outside and from the store. */
po_err po_json_parse(const char *text, size_t len, json_t **out, char *err,
                     size_t errcap) PO_MUST_CHECK;
/* json_dumps that returns NULL, never wrong text, when memory ran out
 * (heap text, caller frees). Use it, never json_dumps. */
char *po_json_dumps(const json_t *v, size_t flags);
/* Appends item (taken) to list; when either is NULL or memory runs out,
 * both are released and NULL returned — so a listing built row by row is
 * either whole or NULL (out of memory). */
json_t *po_json_append(json_t *list, json_t *item);

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
/* PO_ERR_INVALID for anything malformed, including a NUL in a key or a
 * value; PO_ERR_NOMEM when memory ran out. */
po_err po_form_parse(const char *body, size_t len, struct po_form *f) PO_MUST_CHECK;
const char *po_form_get(const struct po_form *f, const char *key);
/* Appends key=val; PO_ERR_INVALID for a repeated key or a full form. */
po_err po_form_add(struct po_form *f, const char *key, const char *val) PO_MUST_CHECK;
void po_form_free(struct po_form *f);
/* The encoded body, in the form's order (malloc'd). */
char *po_form_encode(const struct po_form *f, size_t *out_len);
/* Alipay's RSA2 sign content: keys sorted, `sign` left out, and
 * `sign_type` too when notify (rsaCheckV1; an API request signs it).
 * Empty values are left out (Alipay's Java SDK and gateway) unless
 * keep_empty (its Node SDK keeps them as "k="); the two official SDKs
 * disagree, so a notification is accepted under either.
 * Its length is *out_len: signing and checking use it, never strlen().
 * po_alipay_sign_form appends `sign` made with key (empty values left out). */
char *po_alipay_sign_content(const struct po_form *f, bool notify, bool keep_empty,
                             size_t *out_len);
po_err po_alipay_sign_form(const struct po_privkey *key, struct po_form *f,
                           bool notify) PO_MUST_CHECK;

/* WeChat Pay JSAPI: paySign, base64 SHA256withRSA with the merchant key
 * over "appId\ntimeStamp\nnonceStr\nprepay_id=…\n" (*out_sig heap). */
po_err po_wechatpay_bridge_sign(const struct po_privkey *key, const char *appid, const char *ts,
                                const char *nonce, const char *prepay_id,
                                char **out_sig) PO_MUST_CHECK;
/* Who signs an Alipay gateway request: the app's private key and id, and
 * in certificate mode (公钥证书模式) the SNs every request then carries —
 * the app certificate's (app_cert_sn) and Alipay's root chain's
 * (alipay_root_cert_sn); NULL or "" in public-key mode. */
struct po_alipay_app {
    const struct po_privkey *key;
    const char *app_id;
    const char *app_cert_sn;
    const char *root_cert_sn;
};
/* Alipay page / wap pay: the request signed with the app key (timestamp
 * ts, Beijing time) as the buyer's browser submits it — an HTML form that
 * submits itself (biz_content a hidden input, the rest in the action's
 * query string, as alipay-sdk writes it) and the same as one GET URL.
 * Both heap. */
po_err po_alipay_browser_pay(const struct po_alipay_app *app, const char *gateway,
                             const char *method, const char *notify_url, const char *return_url,
                             const char *biz_content, const char *ts, char **form_html,
                             char **url) PO_MUST_CHECK;

/* Yuan (or dollars) text to minor units, exactly: "12.3" -> 1230, "0.01" -> 1.
 * At most two decimals; no sign, exponent or spaces. */
po_err po_parse_major_amount(const char *s, int64_t *out) PO_MUST_CHECK;

#endif
