/*
 * channels.c — the channels as the simulator plays them: for each, its
 * retry schedule, what it takes for an ack, how its ids look, and how it
 * builds (and signs) a payment and a refund notification. One entry a
 * channel; deliver.c, `sim pay` and `sim serve` read this table.
 */
#include "sim_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* WeChat Pay: 15s/15s/30s/3m/10m/20m/30m/30m/30m/60m/3h/3h/3h/6h/6h (16
 * sends over 24h4m). Alipay: 4m,10m,10m,1h,2h,6h,15h (8 sends, ~25h).
 * Stripe-style: exponential over about three days. */
static const int wechat_s[] = {15,   15,   30,    180,   600,   1200,  1800, 1800,
                               1800, 3600, 10800, 10800, 10800, 21600, 21600};
static const int alipay_s[] = {240, 600, 600, 3600, 7200, 21600, 54000};
static const int stripe_s[] = {60,    300,   1800,  7200,  18000, 36000,
                               36000, 36000, 36000, 36000, 36000, 36000};

static bool wechat_ack(long status, const char *body)
{
    (void)body;
    return status == 200 || status == 204;
}

static bool alipay_ack(long status, const char *body)
{
    return status == 200 && strcmp(body, "success") == 0;
}

static bool stripe_ack(long status, const char *body)
{
    (void)body;
    return status >= 200 && status < 300;
}

static void lower3(const char *cur, char out[4])
{
    for (int i = 0; i < 3; i++)
        out[i] = (char)(cur[i] >= 'A' && cur[i] <= 'Z' ? cur[i] + 32 : cur[i]);
    out[3] = '\0';
}

/* A time as the Chinese channels write it: Beijing wall time (UTC+8). */
enum bj_style {
    BJ_ISO,      /* 2015-05-20T13:29:35+08:00 (WeChat Pay) */
    BJ_DATETIME, /* 2019-08-15 15:56:24 (Alipay) */
    BJ_MILLIS,   /* 2015-04-28 15:45:57.000 (Alipay's gmt_refund) */
    BJ_DAY,      /* 20190815 (id prefixes) */
};

static void beijing(int64_t t, enum bj_style style, char *out, size_t cap)
{
    time_t bj = (time_t)(t + 8 * 3600);
    struct tm tm;
    gmtime_r(&bj, &tm);
    switch (style) {
    case BJ_ISO:
        (void)strftime(out, cap, "%Y-%m-%dT%H:%M:%S+08:00", &tm);
        break;
    case BJ_DATETIME:
        (void)strftime(out, cap, "%Y-%m-%d %H:%M:%S", &tm);
        break;
    case BJ_MILLIS:
        (void)strftime(out, cap, "%Y-%m-%d %H:%M:%S.000", &tm);
        break;
    case BJ_DAY:
        (void)strftime(out, cap, "%Y%m%d", &tm);
        break;
    }
}

/* n digits (n <= 60) that depend only on seed and salt: an event's ids are
 * the same in every retry of it, and differ between events. */
static void digits_of(const char *seed, const char *salt, int n, char *out)
{
    char msg[256], h[65];
    (void)snprintf(msg, sizeof msg, "%s|%s", seed, salt);
    PO_ASSERT(po_sha256_hex(msg, strlen(msg), h) == PO_OK); /* the simulator's own ids */
    for (int i = 0; i < n; i++) {
        int v = po_hexval(h[i % 64]) + (i >= 64 ? 3 : 0);
        out[i] = (char)('0' + v % 10);
    }
    out[n] = '\0';
}

static po_err wechat(const struct po_sim_identity *id, const char *event_type, const char *seed,
                     int64_t created, json_t *res, int64_t now, struct po_sim_request *out)
{
    char *js = res ? json_dumps(res, JSON_COMPACT) : NULL;
    json_decref(res);
    if (!js)
        return PO_ERR_NOMEM;
    /* The notification's id and creation time belong to the event: every
     * retry carries them unchanged, only the signature is new. */
    char evid[40], day[16], digits[16], create_time[40];
    beijing(created, BJ_DAY, day, sizeof day);
    digits_of(seed, event_type, 11, digits);
    (void)snprintf(evid, sizeof evid, "EV-%s%s", day, digits);
    beijing(created, BJ_ISO, create_time, sizeof create_time);
    struct po_sim_wx_envelope env = {evid, create_time, NULL};
    po_err rc = po_sim_wechatpay_event(id->wx_key, id->serial, id->apiv3, 32, event_type, &env, js,
                                       now, out);
    free(js);
    return rc;
}

static po_err stripe(const struct po_sim_identity *id, const char *type, const char *seed,
                     int64_t created, json_t *object, int64_t now, struct po_sim_request *out)
{
    /* An event id of its own (Stripe's users deduplicate by it), stable
     * across the event's retries — the one its API lists too — and the
     * envelope Stripe sends, the object at real size. */
    json_t *event = object ? sim_stripe_event(seed, type, created, object) : NULL;
    if (event)
        json_object_set_new(event, "pending_webhooks", json_integer(1));
    char *js = event ? json_dumps(event, JSON_COMPACT) : NULL;
    json_decref(event);
    if (!js)
        return PO_ERR_NOMEM;
    po_err rc = po_sim_stripe(id->secret, id->secret_len, js, now, out);
    free(js);
    return rc;
}

static po_err wechat_payment(const struct po_sim_identity *id, const struct po_sim_payment *p,
                             int64_t now, struct po_sim_request *out)
{
    int64_t paid = p->paid_at ? p->paid_at : now;
    char when[40];
    beijing(paid, BJ_ISO, when, sizeof when);
    return wechat(id, "TRANSACTION.SUCCESS", p->txn, paid,
                  json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:{s:s}, s:{s:I, s:I,"
                            " s:s, s:s}}",
                            "mchid", id->mchid, "appid", id->appid, "out_trade_no", p->out_trade_no,
                            "transaction_id", p->txn, "trade_type", "JSAPI", "trade_state",
                            "SUCCESS", "trade_state_desc", "支付成功", "bank_type", "OTHERS",
                            "success_time", when, "payer", "openid", "oPayonceSimulatedPayer",
                            "amount", "total", (json_int_t)p->amount, "payer_total",
                            (json_int_t)p->amount, "currency", p->currency, "payer_currency",
                            p->currency),
                  now, out);
}

static po_err alipay_payment(const struct po_sim_identity *id, const struct po_sim_payment *p,
                             int64_t now, struct po_sim_request *out)
{
    int64_t paid = p->paid_at ? p->paid_at : now;
    char notify_time[24], gmt_create[24], gmt_payment[24], amount[32], notify_id[64], buyer_id[40],
        fund[96], day[16], digits[32];
    /* notify_time: when this delivery is sent; the trade's times: when it
     * was created and paid. Beijing time, as Alipay writes them. */
    beijing(now, BJ_DATETIME, notify_time, sizeof notify_time);
    beijing(paid - 2, BJ_DATETIME, gmt_create, sizeof gmt_create);
    beijing(paid, BJ_DATETIME, gmt_payment, sizeof gmt_payment);
    beijing(paid, BJ_DAY, day, sizeof day);
    digits_of(p->txn, "notify", 21, digits);
    (void)snprintf(notify_id, sizeof notify_id, "%s00222%s", day, digits);
    digits_of(p->txn, "buyer", 12, digits);
    (void)snprintf(buyer_id, sizeof buyer_id, "2088%s", digits);
    sim_yuan(p->amount, amount, sizeof amount);
    (void)snprintf(fund, sizeof fund, "[{\"amount\":\"%s\",\"fundChannel\":\"ALIPAYACCOUNT\"}]",
                   amount);
    const char *keys[] = {"notify_time",    "notify_type",    "notify_id",      "charset",
                          "version",        "app_id",         "auth_app_id",    "seller_id",
                          "buyer_id",       "out_trade_no",   "trade_no",       "trade_status",
                          "total_amount",   "receipt_amount", "invoice_amount", "buyer_pay_amount",
                          "fund_bill_list", "gmt_create",     "gmt_payment",    "subject"};
    const char *vals[] = {notify_time, "trade_status_sync",
                          notify_id,   "utf-8",
                          "1.0",       id->app_id,
                          id->app_id,  id->seller_id,
                          buyer_id,    p->out_trade_no,
                          p->txn,      "TRADE_SUCCESS",
                          amount,      amount,
                          amount,      amount,
                          fund,        gmt_create,
                          gmt_payment, "payonce simulator"};
    return po_sim_alipay(id->ali_key, keys, vals, (int)(sizeof keys / sizeof keys[0]), out);
}

static po_err stripe_payment(const struct po_sim_identity *id, const struct po_sim_payment *p,
                             int64_t now, struct po_sim_request *out)
{
    char cur[4];
    lower3(p->currency, cur);
    int64_t paid = p->paid_at ? p->paid_at : now;
    return stripe(id, "payment_intent.succeeded", p->txn, paid,
                  sim_stripe_intent(p->txn, p->out_trade_no, p->amount, cur, paid), now, out);
}

static po_err wechat_refund(const struct po_sim_identity *id, const struct po_sim_refund *r,
                            int64_t now, struct po_sim_request *out)
{
    char type[32], when[40];
    int64_t at = r->refunded_at ? r->refunded_at : now;
    (void)snprintf(type, sizeof type, "REFUND.%s", r->status);
    beijing(at, BJ_ISO, when, sizeof when);
    json_t *res =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:I}}", "mchid", id->mchid,
                  "out_trade_no", r->out_trade_no, "transaction_id", r->txn, "out_refund_no",
                  r->out_refund_no, "refund_id", r->refund_id, "refund_status", r->status,
                  "user_received_account", "支付用户零钱", "amount", "total", (json_int_t)r->total,
                  "refund", (json_int_t)r->amount, "payer_total", (json_int_t)r->total,
                  "payer_refund", (json_int_t)r->amount);
    if (res && strcmp(r->status, "SUCCESS") == 0)
        json_object_set_new(res, "success_time", json_string(when));
    return wechat(id, type, r->refund_id, at, res, now, out);
}

static po_err alipay_refund(const struct po_sim_identity *id, const struct po_sim_refund *r,
                            int64_t now, struct po_sim_request *out)
{
    int64_t at = r->refunded_at ? r->refunded_at : now;
    char amount[32], total[32], notify_time[24], gmt_refund[32], notify_id[64], day[16], digits[32];
    sim_yuan(r->amount, amount, sizeof amount);
    sim_yuan(r->total, total, sizeof total);
    beijing(now, BJ_DATETIME, notify_time, sizeof notify_time);
    beijing(at, BJ_MILLIS, gmt_refund, sizeof gmt_refund);
    beijing(at, BJ_DAY, day, sizeof day);
    digits_of(r->refund_id, "notify", 21, digits);
    (void)snprintf(notify_id, sizeof notify_id, "%s00222%s", day, digits);
    const char *keys[] = {"notify_time", "notify_type",  "notify_id",    "charset",
                          "version",     "app_id",       "seller_id",    "out_trade_no",
                          "trade_no",    "trade_status", "total_amount", "refund_fee",
                          "out_biz_no",  "gmt_refund"};
    const char *vals[] = {notify_time,
                          "trade_status_sync",
                          notify_id,
                          "utf-8",
                          "1.0",
                          id->app_id,
                          id->seller_id,
                          r->out_trade_no,
                          r->txn,
                          r->amount == r->total ? "TRADE_CLOSED" : "TRADE_SUCCESS",
                          total,
                          amount,
                          r->out_refund_no,
                          gmt_refund};
    return po_sim_alipay(id->ali_key, keys, vals, (int)(sizeof keys / sizeof keys[0]), out);
}

static po_err stripe_refund(const struct po_sim_identity *id, const struct po_sim_refund *r,
                            int64_t now, struct po_sim_request *out)
{
    int64_t at = r->refunded_at ? r->refunded_at : now;
    char cur[4] = "cny";
    for (int i = 0; r->currency && i < 3 && r->currency[i]; i++)
        cur[i] = (char)tolower((unsigned char)r->currency[i]);
    const char *status = !r->status || strcmp(r->status, "SUCCESS") == 0 ? "succeeded" : "failed";
    /* The Refund object (re_…) itself: its own id, amount and status. */
    return stripe(id, "refund.updated", r->refund_id, at,
                  sim_stripe_refund(r->refund_id, r->txn ? r->txn : "", r->out_trade_no,
                                    r->out_refund_no, r->amount, cur, at, status),
                  now, out);
}

/* Transaction ids shaped like each channel's. */
static void random_digits(char *out, int n)
{
    unsigned char r[32];
    PO_ASSERT(n < 32 && po_random(r, (size_t)n) == PO_OK);
    for (int i = 0; i < n; i++)
        out[i] = (char)('0' + r[i] % 10);
    out[n] = '\0';
}

static void wechat_txn(char *out, size_t cap)
{
    char d[32];
    random_digits(d, 24);
    (void)snprintf(out, cap, "4200%s", d);
}

/* "2019081522001468450512505578": the Beijing date, 22001, 15 digits. */
static void alipay_txn(char *out, size_t cap)
{
    char day[16], d[32];
    beijing((int64_t)time(NULL), BJ_DAY, day, sizeof day);
    random_digits(d, 15);
    (void)snprintf(out, cap, "%s22001%s", day, d);
}

static void stripe_txn(char *out, size_t cap)
{
    char d[32];
    random_digits(d, 24);
    (void)snprintf(out, cap, "pi_%s", d);
}

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))
static const struct po_sim_channel channels[] = {
    {"wechatpay", wechat_s, N(wechat_s), wechat_ack, wechat_txn, wechat_payment, wechat_refund},
    {"alipay", alipay_s, N(alipay_s), alipay_ack, alipay_txn, alipay_payment, alipay_refund},
    {"stripe", stripe_s, N(stripe_s), stripe_ack, stripe_txn, stripe_payment, stripe_refund},
};

const struct po_sim_channel *po_sim_channel_find(const char *name)
{
    for (int i = 0; name && i < N(channels); i++)
        if (strcmp(channels[i].name, name) == 0)
            return &channels[i];
    return NULL;
}

const int *po_sim_schedule(const char *channel, int *out_n)
{
    const struct po_sim_channel *c = po_sim_channel_find(channel);
    PO_ASSERT(c);
    *out_n = c->nschedule;
    return c->schedule;
}

bool po_sim_is_ack(const char *channel, long status, const char *body)
{
    const struct po_sim_channel *c = po_sim_channel_find(channel);
    return c && c->is_ack(status, body);
}

bool po_sim_channel_known(const char *channel)
{
    return po_sim_channel_find(channel) != NULL;
}

po_err po_sim_payment_request(const struct po_sim_identity *id, const struct po_sim_payment *p,
                              int64_t now, struct po_sim_request *out)
{
    const struct po_sim_channel *c = po_sim_channel_find(p->channel);
    return c ? c->payment(id, p, now, out) : PO_ERR_INVALID;
}

po_err po_sim_refund_request(const struct po_sim_identity *id, const struct po_sim_refund *r,
                             int64_t now, struct po_sim_request *out)
{
    const struct po_sim_channel *c = po_sim_channel_find(r->channel);
    return c ? c->refund(id, r, now, out) : PO_ERR_INVALID;
}

void po_sim_new_txn(const char *channel, char *out, size_t cap)
{
    const struct po_sim_channel *c = po_sim_channel_find(channel);
    PO_ASSERT(c);
    c->new_txn(out, cap);
}

po_err po_sim_notice_build(const struct po_sim_notice *n, int64_t now, struct po_sim_request *out)
{
    if (n->payment)
        return po_sim_payment_request(n->id, n->payment, now, out);
    return po_sim_refund_request(n->id, n->refund, now, out);
}
