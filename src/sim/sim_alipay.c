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
#include <unistd.h>
#include <iconv.h>
#include <zip.h>

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

/* ---- the daily bill: alipay.data.dataservice.bill.downloadurl.query ---- */

/* UTF-8 -> GBK (heap); NULL when it cannot be. */
static char *to_gbk(const char *in, size_t *out_len)
{
    iconv_t cd = iconv_open("GBK", "UTF-8");
    if (cd == (iconv_t)-1)
        return NULL;
    size_t len = strlen(in), cap = len + 16, left_in = len, left_out = cap;
    char *out = malloc(cap), *src = (char *)(uintptr_t)in, *dst = out;
    if (out && iconv(cd, &src, &left_in, &dst, &left_out) == (size_t)-1) {
        free(out);
        out = NULL;
    }
    iconv_close(cd);
    *out_len = out ? cap - left_out : 0;
    return out;
}

/* A zip of n named entries (through a temporary file: libzip writes
 * archives to files); heap, *len bytes; NULL on failure. */
static char *zip_of(const char *const *names, char *const *datas, const size_t *lens, int n,
                    size_t *len)
{
    char path[] = "/tmp/payonce-sim-zip-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    close(fd);
    int zerr = 0;
    zip_t *z = zip_open(path, ZIP_TRUNCATE, &zerr);
    bool ok = z != NULL;
    for (int i = 0; ok && i < n; i++) {
        zip_source_t *src = zip_source_buffer(z, datas[i], lens[i], 0);
        ok = src && zip_file_add(z, names[i], src, ZIP_FL_ENC_UTF_8) >= 0;
        if (!ok && src)
            zip_source_free(src);
    }
    if (z && (!ok ? (zip_discard(z), false) : zip_close(z) != 0))
        ok = false;
    char *out = NULL;
    if (ok && po_file_read(path, PO_SIM_BILL_MAX, &out, len) != PO_OK)
        out = NULL;
    unlink(path);
    return out;
}

/* The day's Alipay payments and refunds as its 业务明细 (detail) and 汇总
 * (summary) CSVs, GBK, zipped; NULL when the day had none (*none). */
static char *alipay_bill_zip(struct po_sim_server *s, const char *date, size_t *len, bool *none)
{
    struct buf {
        char *p;
        size_t n;
    } d = {NULL, 0};
    FILE *m = open_memstream(&d.p, &d.n);
    if (!m)
        return NULL;
    pthread_mutex_lock(&s->mu);
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    json_t *refunds = sim_read_jsonl(s->dir, "refunds.jsonl");
    pthread_mutex_unlock(&s->mu);
    fprintf(m,
            "#支付宝业务明细查询\r\n#账号：[%s0156]\r\n#起始日期：[%.4s年%.2s月%.2s日 00:00:00]"
            "   终止日期：[%.4s年%.2s月%.2s日 23:59:59]\r\n#---------------------------------"
            "--------业务明细列表----------------------------------------\r\n",
            s->id.seller_id, date, date + 5, date + 8, date, date + 5, date + 8);
    fprintf(m, "支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,门店名称,"
               "操作员,终端号,对方账户,订单金额（元）,商家实收（元）,支付宝红包（元）,集分宝（元）,"
               "支付宝优惠（元）,商家优惠（元）,券核销金额（元）,券名称,商家红包消费金额（元）,"
               "卡消费金额（元）,退款批次号/请求号,服务费（元）,分润（元）,备注\r\n");
    int64_t np = 0, nr = 0, sp = 0, sr = 0;
    size_t i;
    json_t *p;
    json_array_foreach(payments, i, p)
    {
        if (strcmp(sim_jstr(p, "channel"), "alipay") != 0 ||
            strncmp(sim_jstr(p, "time"), date, 10) != 0)
            continue;
        char y[32];
        sim_yuan(sim_jint(p, "amount"), y, sizeof y);
        fprintf(m,
                "%s\t,%s\t,交易\t,payonce 模拟商品,%s,%s,\t,\t,\t,\t,*付款(pay***@example.com)\t,"
                "%s,%s,0.00,0.00,0.00,0.00,0.00,,0.00\t,0.00,\t,0.00,0.00,\r\n",
                sim_jstr(p, "txn"), sim_jstr(p, "out_trade_no"), sim_jstr(p, "time"),
                sim_jstr(p, "time"), y, y);
        np++, sp += sim_jint(p, "amount");
    }
    json_array_foreach(refunds, i, p)
    {
        if (!sim_refund_of(p, "alipay") || strncmp(sim_jstr(p, "time"), date, 10) != 0)
            continue;
        char y[32];
        sim_yuan(sim_jint(p, "amount"), y, sizeof y);
        fprintf(m,
                "%s\t,%s\t,退款\t,payonce 模拟商品,%s,%s,\t,\t,\t,\t,*付款(pay***@example.com)\t,"
                "-%s,-%s,0.00,0.00,0.00,0.00,0.00,,0.00\t,0.00,%s\t,0.00,0.00,\r\n",
                sim_jstr(p, "txn"), sim_jstr(p, "out_trade_no"), sim_jstr(p, "time"),
                sim_jstr(p, "time"), y, y, sim_jstr(p, "out_refund_no"));
        nr++, sr += sim_jint(p, "amount");
    }
    json_decref(payments);
    json_decref(refunds);
    char a[32], b[32];
    sim_yuan(sp, a, sizeof a);
    sim_yuan(sr, b, sizeof b);
    fprintf(
        m,
        "#-----------------------------------------业务明细列表结束---------------------------"
        "---------\r\n#交易合计：%lld笔，商家实收共%s元，商家优惠共0.00元\r\n#退款合计：%lld笔，"
        "商家实收退款共%s%s元，商家优惠退款共0.00元\r\n#导出时间：[%.4s年%.2s月%.2s日 09:00:00]"
        "\r\n",
        (long long)np, a, (long long)nr, sr ? "-" : "", b, date, date + 5, date + 8);
    fclose(m);
    *none = np + nr == 0;
    char summary[512];
    (void)snprintf(summary, sizeof summary,
                   "#支付宝业务汇总查询\r\n#账号：[%s0156]\r\n门店编号,门店名称,交易订单总笔数,"
                   "退款订单总笔数,订单金额（元）,商家实收（元）\r\n合计,,%lld,%lld,%s,%s\r\n",
                   s->id.seller_id, (long long)np, (long long)nr, a, a);
    size_t gl = 0, sl = 0;
    char *gd = *none ? NULL : to_gbk(d.p, &gl), *gs = *none ? NULL : to_gbk(summary, &sl);
    free(d.p);
    char *zip = NULL;
    if (gd && gs) {
        char day[9], n1[96], n2[96];
        (void)snprintf(day, sizeof day, "%.4s%.2s%.2s", date, date + 5, date + 8);
        (void)snprintf(n1, sizeof n1, "%s0156_%s_业务明细.csv", s->id.seller_id, day);
        (void)snprintf(n2, sizeof n2, "%s0156_%s_业务明细(汇总).csv", s->id.seller_id, day);
        const char *names[] = {n1, n2};
        char *datas[] = {gd, gs};
        size_t lens[] = {gl, sl};
        zip = zip_of(names, datas, lens, 2, len);
    }
    free(gd);
    free(gs);
    return zip;
}

/* The download URL of the day's bill (the real one is valid 30 s); a day
 * without trades is 40004 isp.bill_not_exist; a day listed in
 * DIR/bill_not_ready is 20000 (the gateway's own failure): not decided. */
static int bill_url(struct po_sim_server *s, struct sim_call *c, json_t *biz)
{
    static const char node[] = "alipay_data_dataservice_bill_downloadurl_query_response";
    const char *date = sim_jstr(biz, "bill_date");
    if (strcmp(sim_jstr(biz, "bill_type"), "trade") != 0 || strlen(date) != 10 ||
        !po_time_valid(date))
        return alipay_error(s, c, node, "40002", "isv.invalid-parameter",
                            "bill_type trade, bill_date yyyy-MM-dd");
    if (sim_bill_not_ready(s, date))
        return alipay_error(s, c, node, "20000", "isp.unknow-error", "系统繁忙");
    size_t len = 0;
    bool none = false;
    char *zip = alipay_bill_zip(s, date, &len, &none);
    free(zip);
    if (none)
        return alipay_error(s, c, node, "40004", "isp.bill_not_exist", "账单不存在");
    const char *host = c->header(c->ctx, "Host");
    char url[256];
    (void)snprintf(url, sizeof url, "http://%s/alipay/downloadBillFile?bizDates=%s",
                   host ? host : "127.0.0.1", date);
    return alipay_reply(
        s, c, node,
        json_pack("{s:s, s:s, s:s}", "code", "10000", "msg", "Success", "bill_download_url", url));
}

/* GET /alipay/downloadBillFile?bizDates=D: the zip itself. */
static int bill_download(struct po_sim_server *s, struct sim_call *c)
{
    const char *date = c->arg(c->ctx, "bizDates");
    if (!date || strlen(date) != 10 || !po_time_valid(date))
        return sim_reply(c, 400, "text/plain", "bad bizDates", false);
    size_t len = 0;
    bool none = false;
    char *zip = alipay_bill_zip(s, date, &len, &none);
    int r = zip ? sim_reply_bytes(c, 200, "application/octet-stream", zip, len)
                : sim_reply(c, 404, "text/plain", "no bill", false);
    free(zip);
    return r;
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
                                          "alipay.trade.fastpay.refund.query",
                                          "alipay.data.dataservice.bill.downloadurl.query"};
    enum { NM = 8 };
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
    int fault = m < NM ? sim_fault_take(s, c, method) : -1;
    c->tamper = c->tamper || fault == PO_SIM_FAULT_TAMPER;
    if (fault >= 500)
        ret = alipay_error(s, c, node, "20000", "isp.unknow-error", "服务暂不可用");
    else if (fault >= 0 && fault != PO_SIM_FAULT_TAMPER)
        ret = sim_fault_answer(c, fault);
    else if (m == NM || (strcmp(c->method, "POST") != 0 && !browser))
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
    else if (m == 7)
        ret = bill_url(s, c, biz);
    else
        ret = trade_create(s, c, &f, biz, m == 3 ? "precreate" : m == 4 ? "page" : "wap");
    json_decref(biz);
    sim_form_free(&f);
    return ret;
}

int po_sim_alipay_route(struct po_sim_server *s, struct sim_call *c)
{
    if (strcmp(c->method, "GET") == 0 && strcmp(c->path, "/alipay/downloadBillFile") == 0)
        return bill_download(s, c);
    if ((strcmp(c->method, "POST") == 0 || strcmp(c->method, "GET") == 0) &&
        strcmp(c->path, "/gateway.do") == 0)
        return alipay_gateway(s, c);
    return -1;
}
