/*
 * channels.c — the channels as the simulator plays them: for each, its
 * retry schedule, what it takes for an ack, how its ids look, and how it
 * builds (and signs) a payment and a refund notification. One entry a
 * channel; deliver.c, `sim pay` and `sim serve` read this table.
 */
#include "sim_int.h"

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

static po_err wechat(const struct po_sim_identity *id, const char *event_type, json_t *res,
                     int64_t now, struct po_sim_request *out)
{
    char *js = res ? json_dumps(res, JSON_COMPACT) : NULL;
    json_decref(res);
    if (!js)
        return PO_ERR_NOMEM;
    po_err rc = po_sim_wechatpay(id->wx_key, id->serial, id->apiv3, 32, event_type, js, now, out);
    free(js);
    return rc;
}

static po_err stripe(const struct po_sim_identity *id, json_t *event, int64_t now,
                     struct po_sim_request *out)
{
    char *js = event ? json_dumps(event, JSON_COMPACT) : NULL;
    json_decref(event);
    if (!js)
        return PO_ERR_NOMEM;
    po_err rc = po_sim_stripe(id->secret, id->secret_len, js, now, out);
    free(js);
    return rc;
}

/* The time as the channels' own fields write it: UTC, seconds. */
static void utc(int64_t now, struct tm *tm)
{
    time_t t = (time_t)now;
    gmtime_r(&t, tm);
}

static po_err wechat_payment(const struct po_sim_identity *id, const struct po_sim_payment *p,
                             int64_t now, struct po_sim_request *out)
{
    char when[40];
    struct tm tm;
    utc(now, &tm);
    (void)strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S+00:00", &tm);
    return wechat(id, "TRANSACTION.SUCCESS",
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
    char notify_time[24], amount[32], notify_id[40];
    struct tm tm;
    utc(now, &tm);
    (void)strftime(notify_time, sizeof notify_time, "%Y-%m-%d %H:%M:%S", &tm);
    yuan(p->amount, amount, sizeof amount);
    (void)snprintf(notify_id, sizeof notify_id, "%.30s", p->txn);
    const char *keys[] = {"notify_time", "notify_type",  "notify_id",    "charset",
                          "version",     "app_id",       "seller_id",    "out_trade_no",
                          "trade_no",    "trade_status", "total_amount", "receipt_amount",
                          "gmt_payment", "subject"};
    const char *vals[] = {notify_time, "trade_status_sync", notify_id,     "utf-8",
                          "1.0",       id->app_id,          id->seller_id, p->out_trade_no,
                          p->txn,      "TRADE_SUCCESS",     amount,        amount,
                          notify_time, "payonce simulator"};
    return po_sim_alipay(id->ali_key, keys, vals, 14, out);
}

static po_err stripe_payment(const struct po_sim_identity *id, const struct po_sim_payment *p,
                             int64_t now, struct po_sim_request *out)
{
    char cur[4];
    lower3(p->currency, cur);
    return stripe(id,
                  json_pack("{s:s, s:s, s:s, s:I, s:{s:{s:s, s:s, s:I, s:I, s:s, s:s, s:{s:s}}}}",
                            "id", "evt_payonce_sim", "object", "event", "type",
                            "payment_intent.succeeded", "created", (json_int_t)now, "data",
                            "object", "id", p->txn, "object", "payment_intent", "amount",
                            (json_int_t)p->amount, "amount_received", (json_int_t)p->amount,
                            "currency", cur, "status", "succeeded", "metadata", "out_trade_no",
                            p->out_trade_no),
                  now, out);
}

static po_err wechat_refund(const struct po_sim_identity *id, const struct po_sim_refund *r,
                            int64_t now, struct po_sim_request *out)
{
    char type[32];
    (void)snprintf(type, sizeof type, "REFUND.%s", r->status);
    return wechat(id, type,
                  json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:I}}", "mchid",
                            id->mchid, "out_trade_no", r->out_trade_no, "transaction_id", r->txn,
                            "out_refund_no", r->out_refund_no, "refund_id", r->refund_id,
                            "refund_status", r->status, "user_received_account", "支付用户零钱",
                            "amount", "total", (json_int_t)r->total, "refund",
                            (json_int_t)r->amount, "payer_total", (json_int_t)r->total,
                            "payer_refund", (json_int_t)r->amount),
                  now, out);
}

static po_err alipay_refund(const struct po_sim_identity *id, const struct po_sim_refund *r,
                            int64_t now, struct po_sim_request *out)
{
    (void)now;
    char amount[32], total[32];
    yuan(r->amount, amount, sizeof amount);
    yuan(r->total, total, sizeof total);
    const char *keys[] = {"notify_type",  "notify_id",    "charset",      "version",
                          "app_id",       "seller_id",    "out_trade_no", "trade_no",
                          "trade_status", "total_amount", "refund_fee",   "out_biz_no",
                          "gmt_refund"};
    const char *vals[] = {"trade_status_sync",
                          r->refund_id,
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
                          "2026-12-02 10:00:00"};
    return po_sim_alipay(id->ali_key, keys, vals, 13, out);
}

static po_err stripe_refund(const struct po_sim_identity *id, const struct po_sim_refund *r,
                            int64_t now, struct po_sim_request *out)
{
    return stripe(id,
                  json_pack("{s:s, s:s, s:s, s:{s:{s:s, s:s, s:I, s:s, s:{s:s, s:s}}}}", "id",
                            "evt_payonce_sim_refund", "object", "event", "type", "charge.refunded",
                            "data", "object", "id", r->refund_id, "object", "charge",
                            "amount_refunded", (json_int_t)r->amount, "currency", "cny", "metadata",
                            "out_trade_no", r->out_trade_no, "out_refund_no", r->out_refund_no),
                  now, out);
}

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))
static const struct po_sim_channel channels[] = {
    {"wechatpay", wechat_s, N(wechat_s), wechat_ack, "4200", wechat_payment, wechat_refund},
    {"alipay", alipay_s, N(alipay_s), alipay_ack, "2026", alipay_payment, alipay_refund},
    {"stripe", stripe_s, N(stripe_s), stripe_ack, "pi_", stripe_payment, stripe_refund},
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
    unsigned char r[24];
    char digits[25];
    PO_ASSERT(c && po_random(r, sizeof r) == PO_OK);
    for (int i = 0; i < 24; i++)
        digits[i] = (char)('0' + r[i] % 10);
    digits[24] = '\0';
    (void)snprintf(out, cap, "%s%s", c->txn_prefix, digits);
}
