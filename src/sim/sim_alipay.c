/*
 * sim_alipay.c — the simulated Alipay open platform gateway (POST
 * /gateway.do, alipay.trade.refund), with its own form decoder and sign
 * check, written apart from src/channel/form.c so that each checks the
 * other: the simulator verifies what payonce signs.
 */
#include "sim_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "12.30" -> 1230; -1 unless digits with at most two decimals. */
static int64_t sim_fen(const char *y)
{
    int64_t v = 0;
    int dec = -1;
    for (const char *p = y; *p; p++) {
        if (*p == '.' && dec < 0 && p != y)
            dec = 0;
        else if (*p >= '0' && *p <= '9' && dec < 2 && v < INT64_C(100000000000))
            v = v * 10 + (*p - '0'), dec += dec >= 0;
        else
            return -1;
    }
    if (!*y || dec == 0)
        return -1;
    for (int d = dec < 0 ? 0 : dec; d < 2; d++)
        v *= 10;
    return v;
}

/* An Alipay gateway answer: 200, the member signed with Alipay's key. */
static int alipay_reply(struct po_sim_server *s, struct sim_call *c, const char *node,
                        json_t *inner)
{
    char *text = inner ? json_dumps(inner, JSON_COMPACT) : NULL;
    json_decref(inner);
    char *body = text ? po_sim_alipay_response(s->id.ali_key, node, text) : NULL;
    free(text);
    int r = sim_reply(c, body ? 200 : 500, "text/html;charset=utf-8", body ? body : "{}", false);
    free(body);
    return r;
}

static int alipay_error(struct po_sim_server *s, struct sim_call *c, const char *node,
                        const char *code, const char *sub_code, const char *sub_msg)
{
    const char *msg = strcmp(code, "40004") == 0   ? "Business Failed"
                      : strcmp(code, "40002") == 0 ? "Invalid Arguments"
                                                   : "Service Currently Unavailable";
    return alipay_reply(s, c, node,
                        json_pack("{s:s, s:s, s:s, s:s}", "code", code, "msg", msg, "sub_code",
                                  sub_code, "sub_msg", sub_msg));
}

/* alipay.trade.refund: refunds are idempotent on (out_trade_no,
 * out_request_no), as Alipay's; the result is notified to the request's
 * notify_url as a trade_status_sync form (TRADE_CLOSED when fully
 * refunded). */
static int trade_refund(struct po_sim_server *s, struct sim_call *c, const struct sim_form *f,
                        json_t *biz)
{
    static const char node[] = "alipay_trade_refund_response";
    const char *out_trade_no = sim_jstr(biz, "out_trade_no"),
               *out_request_no = sim_jstr(biz, "out_request_no");
    const char *trade_no = sim_jstr(biz, "trade_no"); /* either names the trade */
    const char *notify_url = sim_form_get(f, "notify_url");
    int64_t want = sim_fen(sim_jstr(biz, "refund_amount"));
    int ret;
    if ((*trade_no ? !po_id_valid(trade_no, 64) : !po_id_valid(out_trade_no, 64)) ||
        !po_id_valid(out_request_no, 64) || want <= 0 || strlen(notify_url) >= 500)
        return alipay_error(s, c, node, "40002", "isv.missing-parameter",
                            "out_trade_no or trade_no, out_request_no, refund_amount");
    pthread_mutex_lock(&s->mu);
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    json_t *refunds = sim_read_jsonl(s->dir, "refunds.jsonl");
    json_t *p = *trade_no ? sim_find_payment(payments, "alipay", "txn", trade_no)
                          : sim_find_payment(payments, "alipay", "out_trade_no", out_trade_no),
           *r;
    json_t *existing = NULL;
    json_int_t already = 0;
    size_t i;
    char order[65];
    (void)snprintf(order, sizeof order, "%s", p ? sim_jstr(p, "out_trade_no") : out_trade_no);
    out_trade_no = order;
    json_array_foreach(refunds, i, r)
    {
        if (!sim_refund_of(r, "alipay") || !p ||
            strcmp(sim_jstr(r, "txn"), sim_jstr(p, "txn")) != 0)
            continue;
        already += sim_jint(r, "amount");
        if (strcmp(sim_jstr(r, "out_refund_no"), out_request_no) == 0)
            existing = r;
    }
    char refund_id[40] = "", when[32], fee[32], txn[65];
    const char *sub = NULL;
    bool notify = false;
    json_int_t total = sim_jint(p, "amount");
    (void)snprintf(txn, sizeof txn, "%s", sim_jstr(p, "txn"));
    sim_beijing_now(when, sizeof when);
    if (!p) {
        sub = "ACQ.TRADE_NOT_EXIST";
    } else if (existing) {
        /* The same request again: the same refund, no money moves. */
        (void)snprintf(when, sizeof when, "%s", sim_jstr(existing, "time"));
    } else if (already + want > total) {
        sub = "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL";
    } else {
        sim_new_id("2088", refund_id, sizeof refund_id);
        json_t *rec = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "channel", "alipay",
                                "out_trade_no", out_trade_no, "txn", txn, "out_refund_no",
                                out_request_no, "refund_id", refund_id, "amount", (json_int_t)want,
                                "total", total, "time", when);
        sim_append_jsonl(s->dir, "refunds.jsonl", rec);
        json_decref(rec);
        already += want;
        notify = *notify_url != '\0';
    }
    pthread_mutex_unlock(&s->mu);
    json_decref(payments);
    json_decref(refunds);
    sim_yuan(already, fee, sizeof fee);
    if (notify)
        sim_start_refund_job(s, notify_url, "alipay", out_trade_no, txn, out_request_no, refund_id,
                             already, total); /* refund_fee: the refunded total */
    if (sub)
        ret = alipay_error(s, c, node, "40004", sub,
                           strcmp(sub, "ACQ.TRADE_NOT_EXIST") == 0 ? "交易不存在" : "退款金额超限");
    else
        ret = alipay_reply(s, c, node,
                           json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "code", "10000",
                                     "msg", "Success", "trade_no", txn, "out_trade_no",
                                     out_trade_no, "buyer_logon_id", "pay***@example.com",
                                     "fund_change", existing ? "N" : "Y", "refund_fee", fee,
                                     "gmt_refund_pay", when));
    return ret;
}

/* alipay.trade.query: a trade the simulator has a payment for is
 * TRADE_SUCCESS (amounts in yuan, send_pay_date in Beijing time); one it
 * closed is TRADE_CLOSED; any other is 40004 ACQ.TRADE_NOT_EXIST (the
 * buyer never opened the cashier). */
static int trade_query(struct po_sim_server *s, struct sim_call *c, json_t *biz)
{
    static const char node[] = "alipay_trade_query_response";
    const char *no = sim_jstr(biz, "out_trade_no");
    if (!po_id_valid(no, 64))
        return alipay_error(s, c, node, "40002", "isv.missing-parameter", "out_trade_no");
    pthread_mutex_lock(&s->mu);
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    json_t *closed = sim_read_jsonl(s->dir, "closed.jsonl");
    json_t *p = sim_find_payment(payments, "alipay", "out_trade_no", no);
    bool was_closed = sim_find_payment(closed, "alipay", "out_trade_no", no) != NULL;
    json_t *inner = NULL;
    if (p) {
        char yuan[32];
        sim_yuan(sim_jint(p, "amount"), yuan, sizeof yuan);
        inner = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "code", "10000",
                          "msg", "Success", "buyer_logon_id", "pay***@example.com",
                          "buyer_pay_amount", yuan, "out_trade_no", no, "receipt_amount", yuan,
                          "send_pay_date", sim_jstr(p, "time"), "total_amount", yuan, "trade_no",
                          sim_jstr(p, "txn"), "trade_status", "TRADE_SUCCESS");
    } else if (was_closed) {
        inner =
            json_pack("{s:s, s:s, s:s, s:s, s:s}", "code", "10000", "msg", "Success",
                      "out_trade_no", no, "total_amount", "0.00", "trade_status", "TRADE_CLOSED");
    }
    pthread_mutex_unlock(&s->mu);
    json_decref(payments);
    json_decref(closed);
    if (!inner)
        return alipay_error(s, c, node, "40004", "ACQ.TRADE_NOT_EXIST", "交易不存在");
    return alipay_reply(s, c, node, inner);
}

/* alipay.trade.close: a paid trade is 40004 ACQ.TRADE_STATUS_ERROR; any
 * other is closed (recorded in closed.jsonl). */
static int trade_close(struct po_sim_server *s, struct sim_call *c, json_t *biz)
{
    static const char node[] = "alipay_trade_close_response";
    const char *no = sim_jstr(biz, "out_trade_no");
    if (!po_id_valid(no, 64))
        return alipay_error(s, c, node, "40002", "isv.missing-parameter", "out_trade_no");
    pthread_mutex_lock(&s->mu);
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    bool paid = sim_find_payment(payments, "alipay", "out_trade_no", no) != NULL;
    if (!paid)
        sim_record_close(s, "alipay", no);
    pthread_mutex_unlock(&s->mu);
    json_decref(payments);
    if (paid)
        return alipay_error(s, c, node, "40004", "ACQ.TRADE_STATUS_ERROR", "交易状态不合法");
    return alipay_reply(
        s, c, node,
        json_pack("{s:s, s:s, s:s}", "code", "10000", "msg", "Success", "out_trade_no", no));
}

/* alipay.trade.fastpay.refund.query: the refund of out_request_no on the
 * trade (by out_trade_no or trade_no) is REFUND_SUCCESS with its own
 * refund_amount (the simulator's refunds all succeed); any other is 10000
 * without refund_status (not refunded), as Alipay answers. */
static int refund_query(struct po_sim_server *s, struct sim_call *c, json_t *biz)
{
    static const char node[] = "alipay_trade_fastpay_refund_query_response";
    const char *no = sim_jstr(biz, "out_trade_no"), *trade = sim_jstr(biz, "trade_no"),
               *req = sim_jstr(biz, "out_request_no");
    if ((*trade ? !po_id_valid(trade, 64) : !po_id_valid(no, 64)) || !po_id_valid(req, 64))
        return alipay_error(s, c, node, "40002", "isv.missing-parameter",
                            "out_trade_no or trade_no, out_request_no");
    pthread_mutex_lock(&s->mu);
    json_t *refunds = sim_read_jsonl(s->dir, "refunds.jsonl"), *r, *mine = NULL;
    size_t i;
    json_array_foreach(refunds, i, r)
    {
        if (sim_refund_of(r, "alipay") && strcmp(sim_jstr(r, "out_refund_no"), req) == 0 &&
            (*trade ? strcmp(sim_jstr(r, "txn"), trade)
                    : strcmp(sim_jstr(r, "out_trade_no"), no)) == 0)
            mine = r;
    }
    json_t *inner =
        json_pack("{s:s, s:s, s:s}", "code", "10000", "msg", "Success", "out_request_no", req);
    if (mine) {
        char yuan[32], total[32];
        sim_yuan(sim_jint(mine, "amount"), yuan, sizeof yuan);
        sim_yuan(sim_jint(mine, "total"), total, sizeof total);
        json_object_set_new(inner, "out_trade_no", json_string(sim_jstr(mine, "out_trade_no")));
        json_object_set_new(inner, "trade_no", json_string(sim_jstr(mine, "txn")));
        json_object_set_new(inner, "refund_amount", json_string(yuan));
        json_object_set_new(inner, "total_amount", json_string(total));
        json_object_set_new(inner, "refund_status", json_string("REFUND_SUCCESS"));
    }
    pthread_mutex_unlock(&s->mu);
    json_decref(refunds);
    return alipay_reply(s, c, node, inner);
}

/* alipay.trade.precreate (a QR code), and alipay.trade.page.pay /
 * alipay.trade.wap.pay as the buyer's browser submits them (the cashier
 * page is answered): the payment is kept in created.jsonl with the
 * request's notify_url, for `sim pay --created`. The same out_trade_no
 * with another amount is 40004 ACQ.CONTEXT_INCONSISTENT, a paid one
 * ACQ.TRADE_HAS_SUCCESS, a closed one ACQ.TRADE_HAS_CLOSE; the same
 * again is the same QR code. */
static int trade_create(struct po_sim_server *s, struct sim_call *c, const struct sim_form *f,
                        json_t *biz, const char *method)
{
    bool precreate = strcmp(method, "precreate") == 0;
    const char *node = precreate ? "alipay_trade_precreate_response" : "error_response";
    const char *no = sim_jstr(biz, "out_trade_no"), *url = sim_form_get(f, "notify_url");
    int64_t amount = sim_fen(sim_jstr(biz, "total_amount"));
    const char *pc = sim_jstr(biz, "product_code");
    if (!po_id_valid(no, 64) || amount <= 0 || !*sim_jstr(biz, "subject") ||
        (!precreate &&
         strcmp(pc, strcmp(method, "page") == 0 ? "FAST_INSTANT_TRADE_PAY" : "QUICK_WAP_WAY") != 0))
        return alipay_error(s, c, node, "40002", "isv.missing-parameter",
                            "out_trade_no, total_amount, subject, product_code");
    pthread_mutex_lock(&s->mu);
    json_t *prev = NULL, *ans = NULL;
    enum sim_trade t = sim_trade_of(s, "alipay", no, &prev);
    const char *sub = NULL;
    if (t == SIM_TRADE_PAID)
        sub = "ACQ.TRADE_HAS_SUCCESS";
    else if (t == SIM_TRADE_CLOSED)
        sub = "ACQ.TRADE_HAS_CLOSE";
    else if (prev &&
             (sim_jint(prev, "amount") != amount || strcmp(sim_jstr(prev, "notify_url"), url) != 0))
        sub = "ACQ.CONTEXT_INCONSISTENT";
    else if (prev && strcmp(sim_jstr(prev, "method"), method) == 0)
        ans = json_deep_copy(json_object_get(prev, "answer"));
    else {
        char id[48], qr[96];
        sim_new_id("", id, sizeof id);
        (void)snprintf(qr, sizeof qr, "https://qr.alipay.com/bax%.20s", id);
        ans = json_pack("{s:s, s:s, s:s, s:s}", "code", "10000", "msg", "Success", "out_trade_no",
                        no, "qr_code", qr);
        json_t *rec = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:O}", "channel", "alipay",
                                "method", method, "out_trade_no", no, "amount", (json_int_t)amount,
                                "currency", "CNY", "notify_url", url, "id", qr, "answer", ans);
        sim_append_jsonl(s->dir, "created.jsonl", rec);
        json_decref(rec);
    }
    pthread_mutex_unlock(&s->mu);
    json_decref(prev);
    if (sub) {
        json_decref(ans);
        return alipay_error(s, c, node, "40004", sub, "交易状态不合法");
    }
    if (precreate)
        return alipay_reply(s, c, node, ans);
    json_decref(ans);
    char page[512];
    (void)snprintf(page, sizeof page,
                   "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>支付宝 - 网上支付"
                   " 安全快速！</title></head><body><h1>payonce simulator cashier</h1><p>%s: ¥%s"
                   "</p></body></html>",
                   no, sim_jstr(biz, "total_amount"));
    return sim_reply(c, 200, "text/html;charset=utf-8", page, false);
}

/* POST /gateway.do: the request must be signed RSA2 with the app's key
 * (the simulator's merchant key pair stands for it), for the app_id the
 * simulator has; then one of the methods above. */
static void query_arg(void *ctx, const char *k, const char *v)
{
    (void)sim_form_add(ctx, k, v);
}

static int alipay_gateway(struct po_sim_server *s, struct sim_call *c)
{
    struct sim_form f = {0};
    /* The parameters come in the body, the query string, or both: the
     * official SDKs send the common ones (method, app_id, sign, …) in the
     * query string and biz_content in the body; every one is signed. */
    bool ok = !*c->body || sim_form_parse(c->body, &f);
    if (ok && c->args)
        c->args(c->ctx, query_arg, &f);
    if (!ok || f.n == 0) {
        sim_form_free(&f);
        return alipay_error(s, c, "error_response", "40002", "isv.invalid-parameter", "参数无效");
    }
    const char *keys[32], *vals[32];
    for (int i = 0; i < f.n; i++)
        keys[i] = f.k[i], vals[i] = f.v[i];
    static const char *const methods[] = {"alipay.trade.refund",
                                          "alipay.trade.query",
                                          "alipay.trade.close",
                                          "alipay.trade.precreate",
                                          "alipay.trade.page.pay",
                                          "alipay.trade.wap.pay",
                                          "alipay.trade.fastpay.refund.query"};
    enum { NM = 7 };
    const char *method = sim_form_get(&f, "method");
    int m = 0;
    while (m < NM && strcmp(method, methods[m]) != 0)
        m++;
    char node[64];
    size_t n = 0;
    for (; m < NM && method[n] && n < 40; n++)
        node[n] = method[n] == '.' ? '_' : method[n];
    (void)snprintf(node + n, sizeof node - n, "_response");
    json_t *biz = json_loads(sim_form_get(&f, "biz_content"), 0, NULL);
    int ret;
    /* page / wap pay come from the buyer's browser (GET or POST); the
     * server-to-server methods are POSTed */
    bool browser = m == 4 || m == 5;
    if (m == NM || (strcmp(c->method, "POST") != 0 && !browser))
        ret = alipay_error(s, c, "error_response", "40002", "isv.invalid-method", "不存在的方法名");
    else if (strcmp(sim_form_get(&f, "app_id"), s->id.app_id) != 0)
        ret = alipay_error(s, c, node, "40002", "isv.invalid-app-id", "无效的AppID参数");
    else if (!po_sim_alipay_verify(s->id.merchant_pub, keys, vals, f.n))
        ret = alipay_error(s, c, node, "40002", "isv.invalid-signature", "验签出错");
    else if (m == 0)
        ret = trade_refund(s, c, &f, biz);
    else if (m == 1)
        ret = trade_query(s, c, biz);
    else if (m == 2)
        ret = trade_close(s, c, biz);
    else if (m == 6)
        ret = refund_query(s, c, biz);
    else
        ret = trade_create(s, c, &f, biz, m == 3 ? "precreate" : m == 4 ? "page" : "wap");
    json_decref(biz);
    sim_form_free(&f);
    return ret;
}

int po_sim_alipay_route(struct po_sim_server *s, struct sim_call *c)
{
    if ((strcmp(c->method, "POST") == 0 || strcmp(c->method, "GET") == 0) &&
        strcmp(c->path, "/gateway.do") == 0)
        return alipay_gateway(s, c);
    return -1;
}
