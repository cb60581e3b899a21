/*
 * sim_wechatpay.c — the simulated WeChat Pay API v3: order query, trade
 * bills (request and download, in WeChat Pay's CSV format), and refunds
 * (the merchant's WECHATPAY2-SHA256-RSA2048 Authorization verified; the
 * result notified later, on WeChat Pay's schedule). Answers are signed
 * with the platform key, like the real ones (server.c signs them).
 */
#include "sim_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

static int query_order(struct po_sim_server *s, struct sim_call *c, const char *out_trade_no)
{
    const char *mchid = c->arg(c->ctx, "mchid");
    if (!mchid || strcmp(mchid, s->id.mchid) != 0)
        return sim_error(c, 400, "PARAM_ERROR", "mchid does not match");
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    json_t *created = sim_read_jsonl(s->dir, "created.jsonl");
    json_t *closed = sim_read_jsonl(s->dir, "closed.jsonl");
    json_t *p = sim_find_payment(payments, "wechatpay", "out_trade_no", out_trade_no);
    json_t *made = sim_find_created(created, "wechatpay", out_trade_no);
    bool was_closed = sim_find_payment(closed, "wechatpay", "out_trade_no", out_trade_no);
    int r;
    if (!p && made) { /* created, not paid: NOTPAY, or CLOSED once closed */
        r = sim_reply_json(c, 200,
                           json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:I, s:s}}", "appid",
                                     s->id.appid, "mchid", s->id.mchid, "out_trade_no",
                                     out_trade_no, "trade_state", was_closed ? "CLOSED" : "NOTPAY",
                                     "trade_state_desc", was_closed ? "订单已关闭" : "订单未支付",
                                     "amount", "total", sim_jint(made, "amount"), "currency",
                                     sim_jstr(made, "currency")));
    } else if (!p) {
        r = sim_error(c, 404, "ORDER_NOT_EXIST", "订单不存在");
    } else {
        json_int_t amount = sim_jint(p, "amount");
        /* RFC 3339 with the +08:00 offset, as the API writes it (the
         * record keeps the bill's "YYYY-MM-DD hh:mm:ss", Beijing time) */
        char when[40];
        (void)snprintf(when, sizeof when, "%.10sT%.8s+08:00", sim_jstr(p, "time"),
                       strlen(sim_jstr(p, "time")) > 11 ? sim_jstr(p, "time") + 11 : "00:00:00");
        r = sim_reply_json(
            c, 200,
            json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:{s:s},"
                      " s:{s:I, s:I, s:s, s:s}}",
                      "appid", s->id.appid, "mchid", s->id.mchid, "out_trade_no", out_trade_no,
                      "transaction_id", sim_jstr(p, "txn"), "trade_type", "JSAPI", "trade_state",
                      "SUCCESS", "trade_state_desc", "支付成功", "bank_type", "OTHERS",
                      "success_time", when, "payer", "openid", "oPayonceSimulatedPayer", "amount",
                      "total", amount, "payer_total", amount, "currency", sim_jstr(p, "currency"),
                      "payer_currency", sim_jstr(p, "currency")));
    }
    json_decref(payments);
    json_decref(created);
    json_decref(closed);
    return r;
}

/* Appends printf output to a growing buffer (bounded by PO_SIM_BILL_MAX). */
struct buf {
    char *p;
    size_t len, cap;
};

static void bputs(struct buf *b, const char *s)
{
    size_t n = strlen(s);
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 8192) + n;
        if (cap > PO_SIM_BILL_MAX)
            return;
        char *p = realloc(b->p, cap);
        if (!p)
            return;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n + 1);
    b->len += n;
}

/* One bill line: each field prefixed by a backtick, CRLF at the end. */
static void bill_row(struct buf *b, const char *const *f, int n)
{
    char cell[256];
    for (int i = 0; i < n; i++) {
        (void)snprintf(cell, sizeof cell, "%s`%s", i ? "," : "", f[i]);
        bputs(b, cell);
    }
    bputs(b, "\r\n");
}

/* One detail line of a payment or a refund; returns its fee in fen (0.6 %,
 * rounded to the fen; negative for a refund, as WeChat Pay writes it). */
static int64_t bill_line(struct buf *b, const struct po_sim_server *s, json_t *p, bool refund)
{
    int64_t amount = sim_jint(p, "amount"), fee = (amount * 6 + 500) / 1000;
    char a[32], f[32];
    sim_yuan(amount, a, sizeof a);
    (void)snprintf(f, sizeof f, "%s%lld.%02lld000", refund ? "-" : "", (long long)(fee / 100),
                   (long long)(fee % 100));
    const char *zero = "0.00";
    const char *row[] = {sim_jstr(p, "time"),
                         s->id.appid,
                         s->id.mchid,
                         "0",
                         "",
                         sim_jstr(p, "txn"),
                         sim_jstr(p, "out_trade_no"),
                         "oPayonceSimulatedPayer",
                         "JSAPI",
                         refund ? "REFUND" : "SUCCESS",
                         "OTHERS",
                         refund ? "CNY" : sim_jstr(p, "currency"),
                         refund ? zero : a,
                         zero,
                         refund ? sim_jstr(p, "refund_id") : "0",
                         refund ? sim_jstr(p, "out_refund_no") : "0",
                         refund ? a : zero,
                         zero,
                         refund ? "ORIGINAL" : "",
                         refund ? "SUCCESS" : "",
                         "payonce simulator",
                         "",
                         f,
                         "0.60%",
                         refund ? zero : a,
                         refund ? a : zero,
                         ""};
    bill_row(b, row, PO_NELEM(row));
    return refund ? -fee : fee;
}

/* The trade bill for one day, in WeChat Pay's ALL/SUCCESS/REFUND format. */
static char *build_bill(struct po_sim_server *s, const char *date, const char *type)
{
    static const char header[] =
        "\xef\xbb\xbf交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,"
        "交易类型,交易状态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,"
        "退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,"
        "申请退款金额,费率备注\r\n";
    struct buf b = {0};
    bputs(&b, header);
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    json_t *refunds = sim_read_jsonl(s->dir, "refunds.jsonl");
    int64_t count = 0, settled = 0, refunded = 0, fees = 0, total = 0, requested = 0;
    bool want_pay = strcmp(type, "REFUND") != 0, want_refund = strcmp(type, "SUCCESS") != 0;
    size_t i;
    json_t *p;
    json_array_foreach(payments, i, p)
    {
        if (want_pay && strcmp(sim_jstr(p, "channel"), "wechatpay") == 0 &&
            strncmp(sim_jstr(p, "time"), date, 10) == 0) {
            int64_t amount = sim_jint(p, "amount");
            fees += bill_line(&b, s, p, false);
            count++, settled += amount, total += amount;
        }
    }
    json_array_foreach(refunds, i, p)
    {
        if (want_refund && sim_refund_of(p, "wechatpay") &&
            strncmp(sim_jstr(p, "time"), date, 10) == 0) {
            int64_t amount = sim_jint(p, "amount");
            fees += bill_line(&b, s, p, true);
            count++, refunded += amount, requested += amount;
        }
    }
    bputs(&b, "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,"
              "申请退款总金额\r\n");
    char c[24], s1[32], s2[32], s3[32], s4[32], s5[32];
    (void)snprintf(c, sizeof c, "%lld", (long long)count);
    sim_yuan(settled, s1, sizeof s1);
    sim_yuan(refunded, s2, sizeof s2);
    (void)snprintf(s3, sizeof s3, "%s%lld.%02lld", fees < 0 ? "-" : "",
                   (long long)(llabs(fees) / 100), (long long)(llabs(fees) % 100));
    sim_yuan(total, s4, sizeof s4);
    sim_yuan(requested, s5, sizeof s5);
    const char *sum[] = {c, s1, s2, "0.00", s3, s4, s5};
    bill_row(&b, sum, 7);
    json_decref(payments);
    json_decref(refunds);
    return b.p;
}

static bool valid_date(const char *d)
{
    return d && strlen(d) == 10 && po_time_valid(d);
}

/* Whether a bill has a detail row. */
static bool bill_has_rows(const char *bill)
{
    const char *second = strstr(bill, "\r\n");
    return second && second[2] == '`';
}

/* gzip of data (tar_type=GZIP); NULL when out of memory. */
static unsigned char *gzip_of(const char *data, size_t len, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    size_t cap = deflateBound(&z, (uLong)len);
    unsigned char *out = malloc(cap);
    z.next_in = (unsigned char *)(uintptr_t)data;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    if (!out || deflate(&z, Z_FINISH) != Z_STREAM_END) {
        free(out);
        out = NULL;
    }
    *out_len = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

static int trade_bill(struct po_sim_server *s, struct sim_call *c)
{
    const char *date = c->arg(c->ctx, "bill_date");
    const char *type = c->arg(c->ctx, "bill_type");
    const char *tar = c->arg(c->ctx, "tar_type");
    if (!type)
        type = "ALL";
    if (!valid_date(date) ||
        (strcmp(type, "ALL") && strcmp(type, "SUCCESS") && strcmp(type, "REFUND")) ||
        (tar && strcmp(tar, "GZIP")))
        return sim_error(c, 400, "PARAM_ERROR",
                         "bill_date YYYY-MM-DD, bill_type ALL|SUCCESS|REFUND, tar_type GZIP");
    if (sim_bill_not_ready(s, date))
        return sim_error(c, 400, "STATEMENT_CREATING", "账单生成中");
    /* a day without any trade has no bill; a day with payments and no
     * refunds has an empty REFUND bill */
    char *all = build_bill(s, date, "ALL");
    bool none = all && !bill_has_rows(all);
    free(all);
    if (none)
        return sim_error(c, 400, "NO_STATEMENT_EXIST", "账单文件不存在");
    char *bill = build_bill(s, date, type);
    if (!bill)
        return sim_error(c, 500, "SYSTEM_ERROR", "bill too large");
    char hash[41], url[256];
    po_err rc = po_sha1_hex(bill, strlen(bill), hash);
    free(bill);
    if (rc)
        return sim_error(c, 500, "SYSTEM_ERROR", "out of memory");
    const char *host = c->header(c->ctx, "Host");
    (void)snprintf(url, sizeof url, "http://%s/v3/billdownload/file?token=%s_%s%s",
                   host ? host : "127.0.0.1", date, type, tar ? "_GZIP" : "");
    return sim_reply_json(
        c, 200,
        json_pack("{s:s, s:s, s:s}", "hash_type", "SHA1", "hash_value", hash, "download_url", url));
}

static int bill_download(struct po_sim_server *s, struct sim_call *c)
{
    const char *token = c->arg(c->ctx, "token");
    char date[11] = "", type[16] = "";
    if (!token || strlen(token) < 12 || strlen(token) > 30 || token[10] != '_')
        return sim_error(c, 400, "PARAM_ERROR", "bad token");
    memcpy(date, token, 10);
    (void)snprintf(type, sizeof type, "%s", token + 11);
    char *gz = strstr(type, "_GZIP");
    if (gz)
        *gz = '\0';
    if (!valid_date(date))
        return sim_error(c, 400, "PARAM_ERROR", "bad token");
    char *bill = build_bill(s, date, type);
    if (!bill)
        return sim_error(c, 500, "SYSTEM_ERROR", "bill too large");
    int r;
    if (gz) {
        size_t n = 0;
        unsigned char *z = gzip_of(bill, strlen(bill), &n);
        r = z ? sim_reply_bytes(c, 200, "application/octet-stream", z, n)
              : sim_error(c, 500, "SYSTEM_ERROR", "out of memory");
        free(z);
    } else {
        r = sim_reply(c, 200, "text/csv; charset=utf-8", bill, true);
    }
    free(bill);
    return r;
}

/* Checks the merchant's WECHATPAY2-SHA256-RSA2048 Authorization header. */
static bool merchant_signed(struct po_sim_server *s, struct sim_call *c, const char *method,
                            const char *path, const char *body)
{
    const char *auth = c->header(c->ctx, "Authorization");
    if (!auth || strncmp(auth, "WECHATPAY2-SHA256-RSA2048 ", 26) != 0 || strlen(auth) > 2048)
        return false;
    char mchid[64] = "", nonce[64] = "", ts[24] = "", serial[80] = "", sig[700] = "";
    struct {
        const char *name;
        char *dst;
        size_t cap;
    } f[] = {{"mchid=\"", mchid, sizeof mchid},
             {"nonce_str=\"", nonce, sizeof nonce},
             {"timestamp=\"", ts, sizeof ts},
             {"serial_no=\"", serial, sizeof serial},
             {"signature=\"", sig, sizeof sig}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        const char *p = strstr(auth, f[i].name);
        if (!p)
            return false;
        p += strlen(f[i].name);
        const char *end = strchr(p, '"');
        if (!end || (size_t)(end - p) >= f[i].cap)
            return false;
        memcpy(f[i].dst, p, (size_t)(end - p));
        f[i].dst[end - p] = '\0';
    }
    int64_t t = 0;
    if (strcmp(mchid, s->id.mchid) != 0 || strcmp(serial, s->id.merchant_serial) != 0 ||
        po_parse_i64(ts, 0, INT64_C(99999999999), &t) || llabs((long long)(time(NULL) - t)) > 300)
        return false;
    size_t mlen = strlen(method) + strlen(path) + strlen(ts) + strlen(nonce) + strlen(body) + 6;
    char *msg = malloc(mlen);
    unsigned char *raw = NULL;
    size_t raw_len = 0;
    bool ok = false;
    if (msg && po_b64_decode(sig, strlen(sig), &raw, &raw_len) == PO_OK) {
        (void)snprintf(msg, mlen, "%s\n%s\n%s\n%s\n%s\n", method, path, ts, nonce, body);
        ok = po_rsa_sha256_verify(s->id.merchant_pub, msg, strlen(msg), raw, raw_len) == PO_OK;
    }
    free(raw);
    free(msg);
    return ok;
}

static int refund(struct po_sim_server *s, struct sim_call *c)
{
    const char *path = "/v3/refund/domestic/refunds";
    const char *body = c->body;
    if (!merchant_signed(s, c, "POST", path, body))
        return sim_error(c, 401, "SIGN_ERROR", "签名错误");
    json_t *in = json_loads(body, 0, NULL);
    json_t *amt = json_object_get(in, "amount");
    const char *out_refund_no = sim_jstr(in, "out_refund_no"),
               *notify_url = sim_jstr(in, "notify_url");
    json_int_t want = sim_jint(amt, "refund");
    if (!json_is_object(in) || !po_id_valid(out_refund_no, 64) || want <= 0 ||
        strlen(notify_url) >= 500 || strncmp(notify_url, "http", 4) != 0) {
        json_decref(in);
        return sim_error(c, 400, "PARAM_ERROR", "out_refund_no, amount.refund, notify_url");
    }
    pthread_mutex_lock(&s->mu);
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    json_t *refunds = sim_read_jsonl(s->dir, "refunds.jsonl");
    json_t *p =
        json_object_get(in, "transaction_id")
            ? sim_find_payment(payments, "wechatpay", "txn", sim_jstr(in, "transaction_id"))
            : sim_find_payment(payments, "wechatpay", "out_trade_no", sim_jstr(in, "out_trade_no"));
    json_t *existing = NULL, *resp = NULL;
    json_int_t already = 0;
    size_t i;
    json_t *r;
    json_array_foreach(refunds, i, r)
    {
        if (!sim_refund_of(r, "wechatpay"))
            continue;
        if (p && strcmp(sim_jstr(r, "txn"), sim_jstr(p, "txn")) == 0)
            already += sim_jint(r, "amount");
        if (strcmp(sim_jstr(r, "out_refund_no"), out_refund_no) == 0)
            existing = r;
    }
    unsigned status = 200;
    const char *code = NULL;
    bool notify = false;
    char refund_id[40] = "";
    if (!p) {
        status = 404, code = "RESOURCE_NOT_EXISTS";
    } else if (existing) {
        /* The same out_refund_no again: the same refund, not a new one. */
        (void)snprintf(refund_id, sizeof refund_id, "%s", sim_jstr(existing, "refund_id"));
    } else if (already + want > sim_jint(p, "amount")) {
        status = 403, code = "NOT_ENOUGH";
    } else {
        char when[32];
        sim_new_id("50300", refund_id, sizeof refund_id);
        sim_beijing_now(when, sizeof when);
        json_t *rec = json_pack(
            "{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "channel", "wechatpay", "out_trade_no",
            sim_jstr(p, "out_trade_no"), "txn", sim_jstr(p, "txn"), "out_refund_no", out_refund_no,
            "refund_id", refund_id, "amount", want, "total", sim_jint(p, "amount"), "time", when);
        sim_append_jsonl(s->dir, "refunds.jsonl", rec);
        json_decref(rec);
        notify = true;
    }
    if (!code)
        resp = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:I, s:s}}", "refund_id",
                         refund_id, "out_refund_no", out_refund_no, "transaction_id",
                         sim_jstr(p, "txn"), "out_trade_no", sim_jstr(p, "out_trade_no"), "channel",
                         "ORIGINAL", "status", "PROCESSING", "amount", "total",
                         sim_jint(p, "amount"), "refund", want, "payer_total",
                         sim_jint(p, "amount"), "payer_refund", want, "currency", "CNY");
    char trade_no[65], txn[65];
    (void)snprintf(trade_no, sizeof trade_no, "%s", sim_jstr(p, "out_trade_no"));
    (void)snprintf(txn, sizeof txn, "%s", sim_jstr(p, "txn"));
    json_int_t total = sim_jint(p, "amount");
    pthread_mutex_unlock(&s->mu);
    json_decref(payments);
    json_decref(refunds);
    if (notify)
        sim_start_refund_job(s, notify_url, "wechatpay", trade_no, txn, out_refund_no, refund_id,
                             want, total);
    json_decref(in);
    if (code)
        return sim_error(c, status, code, code);
    return sim_reply_json(c, 200, resp);
}

/* POST .../out-trade-no/{no}/close, body {"mchid"}: 204 with an empty,
 * signed body, and the close recorded in closed.jsonl; an order the
 * simulator has a payment for is refused 400 ORDERPAID (the code of
 * WeChat Pay's own refusal; the adapter does not rely on it: it asks the
 * order query). */
static int close_order(struct po_sim_server *s, struct sim_call *c, const char *out_trade_no)
{
    if (!merchant_signed(s, c, "POST", c->path, c->body))
        return sim_error(c, 401, "SIGN_ERROR", "签名错误");
    json_t *in = json_loads(c->body, 0, NULL);
    bool ok = json_is_object(in) && strcmp(sim_jstr(in, "mchid"), s->id.mchid) == 0;
    json_decref(in);
    if (!ok)
        return sim_error(c, 400, "PARAM_ERROR", "mchid does not match");
    pthread_mutex_lock(&s->mu);
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    bool paid = sim_find_payment(payments, "wechatpay", "out_trade_no", out_trade_no) != NULL;
    if (!paid)
        sim_record_close(s, "wechatpay", out_trade_no);
    pthread_mutex_unlock(&s->mu);
    json_decref(payments);
    if (paid)
        return sim_error(c, 400, "ORDERPAID", "订单已支付");
    return sim_reply(c, 204, "application/json", "", true);
}

/* GET /v3/refund/domestic/refunds/{out_refund_no}: the refund as its
 * create answer, now SUCCESS with success_time (the simulator's refunds
 * all succeed); 404 RESOURCE_NOT_EXISTS for others. */
static int refund_query(struct po_sim_server *s, struct sim_call *c, const char *out_refund_no)
{
    if (!merchant_signed(s, c, "GET", c->path, ""))
        return sim_error(c, 401, "SIGN_ERROR", "签名错误");
    pthread_mutex_lock(&s->mu);
    json_t *refunds = sim_read_jsonl(s->dir, "refunds.jsonl"), *r, *mine = NULL;
    size_t i;
    json_array_foreach(refunds, i, r) if (sim_refund_of(r, "wechatpay") &&
                                          strcmp(sim_jstr(r, "out_refund_no"), out_refund_no) == 0)
        mine = r;
    json_t *ans = NULL;
    /* a refund the tests listed in DIR/refund_abnormal ends ABNORMAL (the
     * payer's account could not take it), as WeChat Pay reports it */
    bool abnormal = mine && sim_listed(s, "refund_abnormal", out_refund_no);
    if (mine) {
        char when[40];
        (void)snprintf(when, sizeof when, "%.10sT%.8s+08:00", sim_jstr(mine, "time"),
                       strlen(sim_jstr(mine, "time")) > 11 ? sim_jstr(mine, "time") + 11
                                                           : "00:00:00");
        ans = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:I, s:s}}",
                        "refund_id", sim_jstr(mine, "refund_id"), "out_refund_no", out_refund_no,
                        "transaction_id", sim_jstr(mine, "txn"), "out_trade_no",
                        sim_jstr(mine, "out_trade_no"), "channel", "ORIGINAL", "status",
                        abnormal ? "ABNORMAL" : "SUCCESS", "create_time", when, "success_time",
                        when, "amount", "total", sim_jint(mine, "total"), "refund",
                        sim_jint(mine, "amount"), "payer_total", sim_jint(mine, "total"),
                        "payer_refund", sim_jint(mine, "amount"), "currency", "CNY");
    }
    pthread_mutex_unlock(&s->mu);
    json_decref(refunds);
    if (!mine)
        return sim_error(c, 404, "RESOURCE_NOT_EXISTS", "退款单不存在");
    return sim_reply_json(c, 200, ans);
}

/* POST /v3/pay/transactions/{native,jsapi,h5}: the merchant's
 * Authorization; the body names the simulator's appid and mchid, the
 * order, its amount and the notify_url the payment will be notified to
 * (kept in created.jsonl for `sim pay --created`). The same out_trade_no
 * with the same parameters is the same payment (the same prepay_id or
 * code_url); with others 400 INVALID_REQUEST, as WeChat Pay's "商户订单号
 * 重复"; a paid order 400 ORDERPAID, a closed one 400 ORDER_CLOSED. */
static int prepay(struct po_sim_server *s, struct sim_call *c, const char *method)
{
    if (!merchant_signed(s, c, "POST", c->path, c->body))
        return sim_error(c, 401, "SIGN_ERROR", "签名错误");
    json_t *in = json_loads(c->body, 0, NULL), *amt = json_object_get(in, "amount");
    const char *no = sim_jstr(in, "out_trade_no"), *url = sim_jstr(in, "notify_url"),
               *cur = json_object_get(amt, "currency") ? sim_jstr(amt, "currency") : "CNY";
    json_int_t total = sim_jint(amt, "total");
    bool jsapi = strcmp(method, "jsapi") == 0, h5 = strcmp(method, "h5") == 0;
    const char *bad = !json_is_object(in)                                           ? "body"
                      : strcmp(sim_jstr(in, "appid"), s->id.appid) != 0             ? "appid"
                      : strcmp(sim_jstr(in, "mchid"), s->id.mchid) != 0             ? "mchid"
                      : !po_id_valid(no, 32)                                        ? "out_trade_no"
                      : !*sim_jstr(in, "description")                               ? "description"
                      : strncmp(url, "http", 4) != 0 || strlen(url) > 255           ? "notify_url"
                      : total <= 0 || strlen(cur) != 3                              ? "amount"
                      : jsapi && !*sim_jstr(json_object_get(in, "payer"), "openid") ? "payer.openid"
                      : h5 && !*sim_jstr(json_object_get(in, "scene_info"), "payer_client_ip")
                          ? "scene_info.payer_client_ip"
                          : NULL;
    if (bad) {
        char msg[80];
        (void)snprintf(msg, sizeof msg, "%s: 参数错误", bad);
        json_decref(in);
        return sim_error(c, 400, "PARAM_ERROR", msg);
    }
    pthread_mutex_lock(&s->mu);
    json_t *prev = NULL, *ans = NULL;
    enum sim_trade t = sim_trade_of(s, "wechatpay", no, &prev);
    const char *code = NULL;
    if (t == SIM_TRADE_PAID)
        code = "ORDERPAID";
    else if (t == SIM_TRADE_CLOSED)
        code = "ORDER_CLOSED";
    else if (prev &&
             (strcmp(sim_jstr(prev, "method"), method) != 0 || sim_jint(prev, "amount") != total ||
              strcmp(sim_jstr(prev, "currency"), cur) != 0 ||
              strcmp(sim_jstr(prev, "notify_url"), url) != 0 ||
              strcmp(sim_jstr(prev, "time_expire"), sim_jstr(in, "time_expire")) != 0))
        code = "INVALID_REQUEST";
    else if (prev)
        ans = json_deep_copy(json_object_get(prev, "answer"));
    else {
        char id[48], v[160];
        sim_new_id("wx", id, sizeof id);
        if (jsapi)
            ans = json_pack("{s:s}", "prepay_id", id);
        else if (h5)
            (void)snprintf(v, sizeof v,
                           "https://wx.tenpay.com/cgi-bin/mmpayweb-bin/checkmweb?prepay_id=%s", id),
                ans = json_pack("{s:s}", "h5_url", v);
        else
            (void)snprintf(v, sizeof v, "weixin://wxpay/bizpayurl?pr=%.12s", id + 14),
                ans = json_pack("{s:s}", "code_url", v);
        json_t *rec = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:O}", "channel",
                                "wechatpay", "method", method, "out_trade_no", no, "amount", total,
                                "currency", cur, "notify_url", url, "id", id, "time_expire",
                                sim_jstr(in, "time_expire"), "answer", ans);
        sim_append_jsonl(s->dir, "created.jsonl", rec);
        json_decref(rec);
    }
    pthread_mutex_unlock(&s->mu);
    json_decref(prev);
    json_decref(in);
    if (code)
        return sim_error(c, 400, code,
                         strcmp(code, "INVALID_REQUEST") == 0 ? "201 商户订单号重复" : code);
    return sim_reply_json(c, 200, ans);
}

/* "2026-12-04T18:00:00+08:00" of a Unix time. */
static void rfc3339_bj(int64_t t, char *out, size_t cap)
{
    time_t b = (time_t)(t + 8 * 3600);
    struct tm tm;
    gmtime_r(&b, &tm);
    (void)strftime(out, cap, "%Y-%m-%dT%H:%M:%S+08:00", &tm);
}

/* One platform certificate as /v3/certificates hands it out: encrypted
 * with the merchant's APIv3 key (AEAD_AES_256_GCM, a fresh nonce,
 * associated_data "certificate"), its serial and validity beside it; NULL
 * when the file is not a certificate. */
static json_t *cert_item(const struct po_sim_server *s, const char *file)
{
    char path[1024], *pem = NULL, serial[PO_SERIAL_MAX + 1] = "", ignored[PO_ERRBUF_SIZE];
    size_t len = 0;
    (void)snprintf(path, sizeof path, "%s/%s", s->dir, file);
    if (po_file_read(path, 65536, &pem, &len))
        return NULL;
    struct po_pubkey *k = NULL;
    int64_t nb = 0, na = 0;
    unsigned char *ct = NULL, rnd[6];
    size_t ct_len = 0;
    char nonce[13] = "", *b64 = NULL, from[40], to[40];
    json_t *item = NULL;
    if (po_pubkey_from_pem(pem, len, &k, serial, sizeof serial, ignored, sizeof ignored) == PO_OK &&
        po_cert_validity(pem, len, &nb, &na) == PO_OK && po_random(rnd, sizeof rnd) == PO_OK) {
        for (int i = 0; i < 6; i++)
            (void)snprintf(nonce + 2 * i, 3, "%02x", rnd[i]);
        if (po_aes_gcm_encrypt(s->id.apiv3, sizeof s->id.apiv3, (const unsigned char *)nonce, 12,
                               (const unsigned char *)"certificate", 11, (const unsigned char *)pem,
                               len, &ct, &ct_len) == PO_OK &&
            po_b64_encode(ct, ct_len, &b64) == PO_OK) {
            rfc3339_bj(nb, from, sizeof from);
            rfc3339_bj(na, to, sizeof to);
            item = json_pack("{s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s}}", "serial_no", serial,
                             "effective_time", from, "expire_time", to, "encrypt_certificate",
                             "algorithm", "AEAD_AES_256_GCM", "associated_data", "certificate",
                             "nonce", nonce, "ciphertext", b64);
        }
    }
    po_pubkey_free(k);
    free(ct);
    free(b64);
    free(pem);
    return item;
}

/* GET /v3/certificates: the merchant's Authorization; the platform
 * certificate (wechatpay_platform_cert.pem) and, during a rotation, its
 * successor (wechatpay_platform_cert_next.pem, when the tests put one
 * there), each encrypted with the APIv3 key; signed with the current
 * platform key like every answer. In public-key mode there is none. */
static int certificates(struct po_sim_server *s, struct sim_call *c)
{
    if (!merchant_signed(s, c, "GET", c->path, ""))
        return sim_error(c, 401, "SIGN_ERROR", "签名错误");
    json_t *data = json_array(), *a = cert_item(s, "wechatpay_platform_cert.pem"),
           *b = cert_item(s, "wechatpay_platform_cert_next.pem");
    if (a)
        json_array_append_new(data, a);
    if (b)
        json_array_append_new(data, b);
    return sim_reply_json(c, 200, json_pack("{s:o}", "data", data));
}

int po_sim_wx_route(struct po_sim_server *s, struct sim_call *c)
{
    static const char qpath[] = "/v3/pay/transactions/out-trade-no/";
    bool get = strcmp(c->method, "GET") == 0, post = strcmp(c->method, "POST") == 0;
    if (get && strncmp(c->path, qpath, sizeof qpath - 1) == 0 &&
        po_id_valid(c->path + sizeof qpath - 1, 64))
        return query_order(s, c, c->path + sizeof qpath - 1);
    if (get && strcmp(c->path, "/v3/bill/tradebill") == 0)
        return trade_bill(s, c);
    if (get && strcmp(c->path, "/v3/certificates") == 0)
        return certificates(s, c);
    if (get && strcmp(c->path, "/v3/billdownload/file") == 0)
        return bill_download(s, c);
    if (post && strcmp(c->path, "/v3/refund/domestic/refunds") == 0)
        return refund(s, c);
    static const char *const prepay_kinds[] = {"native", "jsapi", "h5"};
    for (int k = 0; post && k < 3; k++) {
        char p[48];
        (void)snprintf(p, sizeof p, "/v3/pay/transactions/%s", prepay_kinds[k]);
        if (strcmp(c->path, p) == 0)
            return prepay(s, c, prepay_kinds[k]);
    }
    static const char rpath[] = "/v3/refund/domestic/refunds/";
    if (get && strncmp(c->path, rpath, sizeof rpath - 1) == 0 &&
        po_id_valid(c->path + sizeof rpath - 1, PO_ID_MAX))
        return refund_query(s, c, c->path + sizeof rpath - 1);
    size_t n = strlen(c->path);
    if (post && strncmp(c->path, qpath, sizeof qpath - 1) == 0 && n > sizeof qpath + 6 &&
        strcmp(c->path + n - 6, "/close") == 0) {
        char no[PO_ID_MAX + 1];
        size_t len = n - 6 - (sizeof qpath - 1);
        if (len > PO_ID_MAX)
            return sim_error(c, 400, "PARAM_ERROR", "out_trade_no");
        memcpy(no, c->path + sizeof qpath - 1, len);
        no[len] = '\0';
        if (po_id_valid(no, PO_ID_MAX))
            return close_order(s, c, no);
    }
    return -1;
}
