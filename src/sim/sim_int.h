/*
 * sim_int.h — private to src/sim: the simulated channel server's state and
 * the request/answer its API handlers see (libmicrohttpd stays in
 * server.c), the per-channel simulators (channels.c), and shared helpers.
 */
#ifndef PO_SIM_INT_H
#define PO_SIM_INT_H

#include "sim.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

/* ---- one channel as the simulator plays it (channels.c) ---- */
struct po_sim_channel {
    const char *name;
    const int *schedule; /* seconds before each resend */
    int nschedule;
    /* Is (status, body) this channel's "stop sending"? */
    bool (*is_ack)(long status, const char *body);
    void (*new_txn)(char *out, size_t cap); /* a transaction id shaped like its */
    po_err (*payment)(const struct po_sim_identity *id, const struct po_sim_payment *p, int64_t now,
                      struct po_sim_request *out);
    po_err (*refund)(const struct po_sim_identity *id, const struct po_sim_refund *r, int64_t now,
                     struct po_sim_request *out);
};
/* The simulated channel with this name, or NULL. */
const struct po_sim_channel *po_sim_channel_find(const char *name);

/* ---- the simulated channel server (server.c) ---- */
#define PO_SIM_WX_RATES 8 /* lines of DIR/wechatpay_rate_limit read */
struct po_sim_server {
    struct MHD_Daemon *daemon;
    struct po_sim_identity id;
    char dir[512];
    double time_factor;
    int refund_delay_ms;
    int search_lag_s;   /* Stripe's search: objects indexed this long after a change */
    pthread_mutex_t mu; /* serialises refund bookkeeping */
    atomic_int jobs;    /* refund notifications still being delivered */
    atomic_bool stopping;
    /* WeChat Pay's rate limits (DIR/wechatpay_rate_limit, sim_wechatpay.c):
     * the second each line's count is of, and its count; under mu */
    int64_t wx_rate_second[PO_SIM_WX_RATES];
    int wx_rate_used[PO_SIM_WX_RATES];
};

/* One request and its answer, as the API handlers see them. */
struct sim_call {
    const char *method, *path;
    const char *(*header)(void *ctx, const char *name);
    const char *(*arg)(void *ctx, const char *name);
    /* Every query-string argument, decoded, in order. */
    void (*args)(void *ctx, void (*each)(void *each_ctx, const char *k, const char *v),
                 void *each_ctx);
    void *ctx;
    const char *uri;  /* the request target as sent: path and query, undecoded */
    const char *body; /* "" when none */
    /* the error code a DIR/faults line names for a WeChat Pay API ("" none) */
    char fault_code[64];
    /* the answer */
    unsigned status;
    const char *type;
    char *body_out;      /* heap */
    size_t body_out_len; /* 0: strlen(body_out) */
    bool wx_signed;      /* sign with the WeChat Pay platform key (Wechatpay-* headers) */
    bool tamper;         /* change one character of the answer after signing (DIR/faults) */
    /* more answer headers (sim_reply_header): Stripe's Request-Id,
     * Idempotent-Replayed, Retry-After */
    int nheaders;
    char hname[4][32], hvalue[4][96];
};
/* ---- the handlers' side of the server (calls.c) ---- */
/* Sets the answer (body copied); returns 0 so handlers can `return` it. */
int sim_reply(struct sim_call *c, unsigned status, const char *type, const char *body,
              bool wx_signed);
/* A binary answer of len bytes (unsigned). */
int sim_reply_bytes(struct sim_call *c, unsigned status, const char *type, const void *body,
                    size_t len);
/* A WeChat Pay JSON answer (signed); j is consumed. */
int sim_reply_json(struct sim_call *c, unsigned status, json_t *j);
/* A WeChat Pay error answer {"code","message"} (signed). */
int sim_error(struct sim_call *c, unsigned status, const char *code, const char *message);
/* One more header of the answer (at most 4; more are dropped). */
void sim_reply_header(struct sim_call *c, const char *name, const char *value);

/* WeChat Pay's message for one of its error codes (sim_wechatpay.c). */
const char *sim_wx_message(const char *code);

/* The API families; each returns -1 when the path is not its own. */
int po_sim_wx_route(struct po_sim_server *s, struct sim_call *c);
int po_sim_alipay_route(struct po_sim_server *s, struct sim_call *c);
int po_sim_stripe_route(struct po_sim_server *s, struct sim_call *c);
/* Stripe's error answer for an HTTP status and an error code (NULL: the
 * status's own: 429 rate_limit, 5xx api_error), in Stripe's shape, with
 * Retry-After on a 429 (sim_stripe.c). */
int po_sim_stripe_error(struct sim_call *c, unsigned status, const char *code);
/* Stripe's objects at real size, for the webhooks `sim pay` sends
 * (channels.c) as for the API's answers: an event (its id evt_… derived
 * from seed and type, as sim_stripe_event_id), a succeeded PaymentIntent,
 * a Refund (status: succeeded, failed, …). NULL when memory ran out. */
void sim_stripe_event_id(const char *seed, const char *type, char *out, size_t cap);
json_t *sim_stripe_event(const char *seed, const char *type, int64_t created, json_t *obj);
json_t *sim_stripe_intent(const char *id, const char *out_trade_no, int64_t amount,
                          const char *currency, int64_t created);
json_t *sim_stripe_refund(const char *refund_id, const char *pi, const char *out_trade_no,
                          const char *out_refund_no, int64_t amount, const char *currency,
                          int64_t created, const char *status);

/* ---- state in the simulator's directory (state.c) ---- */
/* Every line of DIR/name parsed as JSON (NULL entries skipped). */
json_t *sim_read_jsonl(const char *dir, const char *name);
void sim_append_jsonl(const char *dir, const char *name, json_t *j);
const char *sim_jstr(json_t *o, const char *k);
json_int_t sim_jint(json_t *o, const char *k);
/* The refund record's channel (records written before Alipay refunds
 * existed carry none: WeChat Pay). */
bool sim_refund_of(json_t *r, const char *channel);
json_t *sim_find_payment(json_t *payments, const char *channel, const char *key, const char *value);
/* A form body decoded into at most 32 pairs (sim_form.c: the simulator's
 * own decoder, apart from payonce's src/channel/form.c). */
struct sim_form {
    int n;
    char *k[32], *v[32];
};
bool sim_form_parse(const char *body, struct sim_form *f);
/* The value of k, "" when absent. */
const char *sim_form_get(const struct sim_form *f, const char *k);
/* Adds a decoded pair (copied) unless k is there already or the form is
 * full; false when it could not. */
bool sim_form_add(struct sim_form *f, const char *k, const char *v);
void sim_form_free(struct sim_form *f);

/* The latest payment created at the channel for out_trade_no
 * (created.jsonl: channel, method, out_trade_no, amount, currency,
 * notify_url, id, answer), or NULL. */
json_t *sim_find_created(json_t *created, const char *channel, const char *out_trade_no);
/* What the simulated channel knows of out_trade_no before it creates a
 * payment for it; *prev: the latest one created (json_decref it), or
 * NULL. Under s->mu. */
enum sim_trade { SIM_TRADE_OPEN, SIM_TRADE_PAID, SIM_TRADE_CLOSED };
enum sim_trade sim_trade_of(struct po_sim_server *s, const char *channel, const char *out_trade_no,
                            json_t **prev);
/* Whether the tests marked date's bills as not published yet: a line
 * "YYYY-MM-DD" in DIR/bill_not_ready (the channels publish a day's bill
 * the next morning; the tests move their own clock, not the simulator's,
 * so the simulator is told). */
bool sim_bill_not_ready(const struct po_sim_server *s, const char *date);
/* Whether DIR/file has value as one of its lines (the tests' switches). */
bool sim_listed(const struct po_sim_server *s, const char *file, const char *value);
/* The channel failing on purpose: DIR/faults holds lines "METHOD PATH
 * STATUS COUNT [API]" (PATH a prefix of the request's path; API, for
 * Alipay's gateway, the method parameter it must name; on a WeChat Pay
 * line, /v3/…, an error code instead — ORDERPAID, NOT_ENOUGH, … — which
 * the answer carries with WeChat Pay's message, c->fault_code); the next
 * COUNT requests that match are answered STATUS in the channel's own shape —
 * 429 its rate limit (WeChat Pay FREQUENCY_LIMITED, Stripe rate_limit,
 * Alipay's gateway HTTP 429), 5xx its server error (SYSTEM_ERROR,
 * api_error, HTTP 5xx; a line naming an Alipay API: the gateway's signed
 * 20000 isp.unknow-error, as Alipay answers one it cannot serve now), or:
 * PO_SIM_FAULT_HANG holds the request PO_SIM_HANG_MS before answering (a
 * channel that does not answer in time), PO_SIM_FAULT_GARBLED answers 200
 * with a body nobody signed that is not the API's answer (a proxy's page,
 * a truncated reply), PO_SIM_FAULT_TAMPER the API's own answer with one
 * character changed after it was signed, PO_SIM_FAULT_LOST the API's own
 * answer held PO_SIM_HANG_MS (the request served: a lost answer). */
#define PO_SIM_HANG_MS 3000
/* The fault set for c (its line's count taken down), or -1: none. api:
 * the Alipay method c names (only lines naming it match), or NULL (only
 * lines naming none match). */
int sim_fault_take(struct po_sim_server *s, struct sim_call *c, const char *api);
/* The same, for a line that may name an Alipay sub_code after its API
 * ("POST /gateway.do 200 1 alipay.trade.refund ACQ.SELLER_BALANCE_NOT_ENOUGH":
 * the gateway's signed answer with that sub_code and its code): the
 * sub_code into sub (cap bytes; "" when the line names none). */
int sim_fault_take_sub(struct po_sim_server *s, struct sim_call *c, const char *api, char *sub,
                       size_t cap);
/* The same for lines naming an error code after the count (Stripe's: "POST
 * /v1/refunds 400 1 charge_already_refunded"): the status, its code in
 * code; -1: none. */
int sim_fault_take_code(struct po_sim_server *s, struct sim_call *c, char *code, size_t cap);
/* Answers c as fault st (not PO_SIM_FAULT_TAMPER, which the caller applies
 * to the API's answer: c->tamper) in the channel's shape; returns 0
 * (fault_answer.c). */
int sim_fault_answer(struct sim_call *c, int st);
/* Records that channel closed out_trade_no (closed.jsonl); under s->mu. */
void sim_record_close(struct po_sim_server *s, const char *channel, const char *out_trade_no);
/* prefix + 24 random digits (the channels' refund ids look so). */
void sim_new_id(const char *prefix, char *out, size_t cap);
/* "YYYY-MM-DD hh:mm:ss" in Beijing time, as the bills and Alipay write it. */
void sim_beijing_now(char *out, size_t cap);
void sim_yuan(int64_t minor, char *out, size_t cap);
/* The simulated Alipay's certificate mode (sim_alipay_certs.c): the SNs
 * of the certificates `sim keys` wrote in the directory, and the key of
 * Alipay's next certificate (a rotation). */
struct sim_alipay_certs {
    char app_sn[33], root_sn[PO_ALIPAY_ROOT_SN_MAX + 1];
    char alipay_sn[2][33]; /* the current certificate's, the next one's */
    struct po_privkey *next_key;
};
po_err sim_alipay_certs_load(const char *dir, struct sim_alipay_certs *out);
void sim_alipay_certs_free(struct sim_alipay_certs *c);
/* ---- refund_notify.c ---- */
/* Notifies a refund's result to url on the channel's schedule, from a
 * detached thread (po_sim_server_stop waits for it). */
void sim_start_refund_job(struct po_sim_server *s, const char *url, const char *channel,
                          const char *out_trade_no, const char *txn, const char *out_refund_no,
                          const char *refund_id, int64_t amount, int64_t total);

#endif
