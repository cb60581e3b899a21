/*
 * sim.h — building callbacks exactly as the channels send them: WeChat Pay
 * v3 (AEAD_AES_256_GCM resource, SHA256withRSA over "ts\nnonce\nbody\n"),
 * Alipay (form body, RSA2 over the rsaCheckV1 string) and Stripe-style
 * (HMAC-SHA256 over "t.body"). Used by the simulator and by the tests.
 */
#ifndef PO_SIM_H
#define PO_SIM_H

#include "../core/core.h"
#include "../crypto/crypto.h"

#include <stdatomic.h>
#include <stdio.h>

struct po_sim_request {
    char *body; /* heap; NUL-terminated */
    size_t body_len;
    const char *content_type;
    int nheaders;
    char name[PO_SIM_HEADERS_MAX][48];
    char value[PO_SIM_HEADERS_MAX][512];
};
void po_sim_request_free(struct po_sim_request *r);
/* Sets (or replaces) a header. */
void po_sim_set_header(struct po_sim_request *r, const char *name, const char *value);
const char *po_sim_get_header(const struct po_sim_request *r, const char *name);

/* A WeChat Pay v3 callback: resource_json is encrypted with apiv3_key
 * (random 12-character nonce), wrapped in the notification body, and the
 * whole is signed with key under serial at timestamp ts (fresh nonce).
 * The envelope's id, create_time and summary: as given in env, or (NULL
 * members, or po_sim_wechatpay) a new "EV-…" id, ts in Beijing time and
 * the summary WeChat writes for event_type. */
struct po_sim_wx_envelope {
    const char *id;          /* "EV-2018022511223320873" */
    const char *create_time; /* "2015-05-20T13:29:35+08:00" */
    const char *summary;     /* "支付成功" */
};
po_err po_sim_wechatpay_event(const struct po_privkey *key, const char *serial,
                              const unsigned char *apiv3_key, size_t apiv3_key_len,
                              const char *event_type, const struct po_sim_wx_envelope *env,
                              const char *resource_json, int64_t ts,
                              struct po_sim_request *out) PO_MUST_CHECK;
po_err po_sim_wechatpay(const struct po_privkey *key, const char *serial,
                        const unsigned char *apiv3_key, size_t apiv3_key_len,
                        const char *event_type, const char *resource_json, int64_t ts,
                        struct po_sim_request *out) PO_MUST_CHECK;

/* Signs an arbitrary body as WeChat Pay does and sets the Wechatpay-*
 * headers of out (whose body is left as it is). */
po_err po_sim_wechatpay_sign(const struct po_privkey *key, const char *serial, const char *body,
                             size_t len, int64_t ts, struct po_sim_request *out) PO_MUST_CHECK;

/* An Alipay notification from n key/value pairs (sign and sign_type are
 * added), form-encoded, signed with key. The sign content leaves empty
 * values out, as Alipay's gateway and Java SDK do; po_sim_alipay_sdk with
 * keep_empty signs them as "k=", as its Node SDK does. */
po_err po_sim_alipay(const struct po_privkey *key, const char *const *keys,
                     const char *const *values, int n, struct po_sim_request *out) PO_MUST_CHECK;
po_err po_sim_alipay_sdk(const struct po_privkey *key, const char *const *keys,
                         const char *const *values, int n, bool keep_empty,
                         struct po_sim_request *out) PO_MUST_CHECK;
/* An Alipay gateway request's pairs (sign and sign_type among them) carry
 * a valid RSA2 signature by the holder of key's private half. */
bool po_sim_alipay_verify(const struct po_pubkey *key, const char *const *keys,
                          const char *const *values, int n);
/* A gateway answer as Alipay writes it: {"<node>":<inner>,"sign":"…"},
 * the sign over inner's exact text (malloc'd; NULL on failure). */
char *po_sim_alipay_response(const struct po_privkey *key, const char *node, const char *inner);

/* A Stripe-style webhook: payload as is, Stripe-Signature for secret at ts. */
po_err po_sim_stripe(const unsigned char *secret, size_t secret_len, const char *payload,
                     int64_t ts, struct po_sim_request *out) PO_MUST_CHECK;

/*
 * The simulated channel side: keys, ids and secrets kept in a directory
 * (written by `payonce sim keys`, read by every other sim command):
 *   sim.json                 ids: mchid, appid, serial (cert serial or
 *                            PUB_KEY_ID_…), mode, alipay app_id, seller_id
 *   wechatpay_platform_key.pem   the platform private key (signs callbacks)
 *   wechatpay_platform_cert.pem  (cert mode) / wechatpay_platform_pub.pem
 *   apiv3.key                the merchant's APIv3 key (encrypts resources)
 *   alipay_private_key.pem, alipay_public_key.pem
 *   stripe_webhook_secret
 *   merchant_private_key.pem, merchant_public_key.pem   the merchant's API key
 *                            pair: the merchant signs refund requests with the
 *                            private key; the simulated channel verifies them
 */
struct po_sim_identity {
    char mchid[33], appid[33], serial[PO_SERIAL_MAX + 1], mode[8];
    char app_id[33], seller_id[33], merchant_serial[PO_SERIAL_MAX + 1];
    struct po_privkey *wx_key, *ali_key;
    struct po_pubkey *merchant_pub;
    unsigned char apiv3[32];
    unsigned char secret[128];
    size_t secret_len;
    char stripe_api_key[64]; /* sk_test_…: what the simulated Stripe API accepts */
};
/* Generates a fresh identity into dir; mode "cert" or "pubkey". */
po_err po_sim_identity_generate(const char *dir, const char *mode, char *err,
                                size_t errcap) PO_MUST_CHECK;
/* Alipay's certificates for its certificate mode (sim_alipay_certs.c),
 * made from the Alipay and merchant keys already in dir (in every mode:
 * the app chooses its mode, not the simulator). */
po_err po_sim_alipay_certs_generate(const char *dir, char *err, size_t errcap) PO_MUST_CHECK;
po_err po_sim_identity_load(const char *dir, struct po_sim_identity *out, char *err,
                            size_t errcap) PO_MUST_CHECK;
void po_sim_identity_free(struct po_sim_identity *id);

/* A payment the channel made, as its notification reports it. */
struct po_sim_payment {
    const char *channel;
    const char *out_trade_no;
    const char *txn; /* the channel's transaction id */
    int64_t amount;  /* minor units */
    const char *currency;
    int64_t paid_at; /* when the payer paid (unix s); 0: now */
};
/* The transaction id of the last payment of out_trade_no at channel that
 * `sim pay` recorded in dir (payments.jsonl): false when there is none. */
bool po_sim_payment_txn(const char *dir, const char *channel, const char *out_trade_no, char *txn,
                        size_t cap);
/* The channel's payment-success notification as it sends it at time now:
 * signed now (WeChat's timestamp and nonce, Stripe's t=, Alipay's
 * notify_time), while its event id and the payment's own times are those
 * of the payment, the same in every retry. Times in the fields are Beijing
 * time where the channel writes them so. */
po_err po_sim_payment_request(const struct po_sim_identity *id, const struct po_sim_payment *p,
                              int64_t now, struct po_sim_request *out) PO_MUST_CHECK;

struct po_sim_refund {
    const char *channel;
    const char *out_trade_no, *txn;
    const char *out_refund_no, *refund_id;
    int64_t amount, total; /* alipay: amount is refund_fee, the trade's refunded
                              total so far (TRADE_CLOSED when it is total) */
    const char *status;    /* SUCCESS | CLOSED | ABNORMAL */
    int64_t refunded_at;   /* when the channel settled it (unix s); 0: now */
    const char *currency;  /* ISO 4217 (NULL: CNY); Stripe writes it in lower case */
};
po_err po_sim_refund_request(const struct po_sim_identity *id, const struct po_sim_refund *r,
                             int64_t now, struct po_sim_request *out) PO_MUST_CHECK;

/*
 * `payonce sim serve`: the channel's own APIs, WeChat Pay v3 paths:
 *   GET  /v3/pay/transactions/out-trade-no/{no}?mchid=   order query
 *   GET  /v3/bill/tradebill?bill_date=YYYY-MM-DD&bill_type=ALL|SUCCESS|REFUND
 *   GET  /v3/billdownload/file?token=…                   the bill (CSV)
 *   POST /v3/refund/domestic/refunds                     refund request
 *   POST /gateway.do  (Alipay, method alipay.trade.refund) refund request
 * Responses are signed with the platform key like the real ones (Alipay's
 * with the Alipay key, over the "…_response" member). Refund
 * requests must carry the merchant's WECHATPAY2-SHA256-RSA2048
 * Authorization; the refund result is notified to the request's notify_url
 * after refund_delay_ms, on the retry schedule.
 */
/* The ways DIR/faults makes the simulated channels fail, besides an HTTP
 * status (docs/simulator.md): no answer in time, an answer that is not
 * the API's and nobody signed, the API's answer changed after signing,
 * and a lost answer: the request served (what it creates is created) and
 * its answer held past the client's patience. */
enum {
    PO_SIM_FAULT_HANG = 0,
    PO_SIM_FAULT_GARBLED = 1,
    PO_SIM_FAULT_TAMPER = 2,
    PO_SIM_FAULT_LOST = 3
};

struct po_sim_server_cfg {
    const char *dir;
    const char *listen;
    double time_factor;
    int refund_delay_ms;
};
struct po_sim_server;

/* The tenant's receiver of payonce's webhooks (receiver.c). */
struct po_sim_receiver_cfg {
    const char *listen;      /* 127.0.0.1:PORT */
    const char *secret;      /* the endpoint's signing secret (whsec_…) */
    const char *record_path; /* new events appended as JSON lines (NULL: none) */
    int fail_first;          /* answer 500 to the first N deliveries */
    int down_ms;             /* listen only after this long (a receiver that is down) */
};
struct po_sim_receiver_stats {
    int deliveries, events, duplicates, bad_signatures;
};
struct po_sim_receiver;
po_err po_sim_receiver_start(const struct po_sim_receiver_cfg *cfg, struct po_sim_receiver **out,
                             char *err, size_t errcap) PO_MUST_CHECK;
unsigned po_sim_receiver_port(const struct po_sim_receiver *r);
void po_sim_receiver_stats(struct po_sim_receiver *r, struct po_sim_receiver_stats *out);
void po_sim_receiver_stop(struct po_sim_receiver *r);
/* A tenant's check of Payonce-Signature (t within 300 s of now). */
bool po_sim_webhook_verify(const char *secret, const char *header, const char *body, size_t len,
                           int64_t now);
po_err po_sim_server_start(const struct po_sim_server_cfg *cfg, struct po_sim_server **out,
                           char *err, size_t errcap) PO_MUST_CHECK;
unsigned po_sim_server_port(const struct po_sim_server *s);
void po_sim_server_stop(struct po_sim_server *s);

/*
 * The channels' retry schedules: seconds to wait before each resend after
 * the first attempt. WeChat Pay: 15s/15s/30s/3m/10m/20m/30m/30m/30m/60m/
 * 3h/3h/3h/6h/6h (16 sends over 24h4m). Alipay: 4m,10m,10m,1h,2h,6h,15h
 * (8 sends, ~25h). Stripe-style: exponential over about three days.
 */
const int *po_sim_schedule(const char *channel, int *out_n);

/* What a delivery sends: the notification of one payment (or refund),
 * built and signed anew for every attempt, at that attempt's time — as the
 * channels do, so a retry long after the first attempt is not stale. */
struct po_sim_notice {
    const struct po_sim_identity *id;
    const struct po_sim_payment *payment; /* or */
    const struct po_sim_refund *refund;
};
po_err po_sim_notice_build(const struct po_sim_notice *n, int64_t now,
                           struct po_sim_request *out) PO_MUST_CHECK;

/* One notification to deliver until it is acknowledged. */
struct po_sim_delivery {
    const char *url;     /* the tenant's notify URL */
    const char *channel; /* decides the schedule and what counts as an ack */
    const struct po_sim_notice *notice;
    double time_factor; /* >= 1: the schedule runs this many times faster */
    int deadline_ms;    /* per attempt (the channels' 5 s) */
    int max_attempts;   /* 0: the whole schedule */
    const char *label;  /* for the log lines */
    FILE *log;          /* one line per attempt, or NULL */
    /* The channel's clock for signing (unix s); NULL: the real one. Tests
     * run the schedule faster and let the signed time move as fast. */
    int64_t (*clock)(void *ctx);
    void *clock_ctx;
    /* When set and it becomes true, no further attempt is made (a
     * simulator that stops ends the deliveries under way); NULL: none. */
    const atomic_bool *cancel;
    /* Every attempt and its answer as one JSON line (the client's side of
     * the history the history checker reads); NULL: none. */
    struct po_sim_history *history;
    int copy; /* which copy of the notification (1..), for the history */
};

/* An append-only JSON-lines file of attempts, shared by threads (one
 * lock, one write and flush per line: a kill leaves whole lines). */
struct po_sim_history;
po_err po_sim_history_open(const char *path, struct po_sim_history **out) PO_MUST_CHECK;
void po_sim_history_close(struct po_sim_history *h);

struct po_sim_result {
    int attempts;
    bool acked;
    long last_status; /* HTTP status of the last attempt, 0 if none arrived */
    char last_body[256];
    /* payonce's Payonce-Outcome answer header of the last attempt
     * ("applied", "duplicate; layer=1", "rejected; reason=…"), "" if none */
    char last_outcome[64];
    /* its X-Request-Id: the request id of payonce's callback record and
     * log lines for that attempt, "" if none */
    char last_request_id[48];
};

/* Sends, and resends on FAIL, timeouts and connection errors, on the
 * channel's schedule, until acknowledged or the schedule ends. */
void po_sim_deliver(const struct po_sim_delivery *d, struct po_sim_result *out);
/* Is (status, body) this channel's "stop sending"? */
bool po_sim_is_ack(const char *channel, long status, const char *body);
/* Whether the simulator plays this channel. */
bool po_sim_channel_known(const char *channel);
/* A payment created at the simulated channel (a prepay, a precreate or
 * page pay, a PaymentIntent), as `sim pay --created` pays it. */
struct po_sim_created {
    int64_t amount;
    char currency[4];
    char notify_url[512];           /* "" for Stripe (its endpoint is the dashboard's) */
    char intent[PO_TXN_ID_MAX + 1]; /* Stripe: the PaymentIntent paid */
};
/* The latest payment created for out_trade_no on channel in the
 * simulator's directory; PO_ERR_NOT_FOUND when there is none. */
po_err po_sim_created_find(const char *dir, const char *channel, const char *out_trade_no,
                           struct po_sim_created *out) PO_MUST_CHECK;
/* A fresh transaction id shaped like the channel's. */
void po_sim_new_txn(const char *channel, char *out, size_t cap);

#endif
