/*
 * sim_wechatpay.c — the simulated WeChat Pay API v3, as strict as WeChat
 * Pay: what its basic rules (接口规则) and its request models refuse is
 * refused here with its own error body, and what it answers is answered
 * at the size of its published answer models.
 *   every request: User-Agent and Accept (400 INVALID_REQUEST "Http头缺少
 *     Accept或User-Agent"), then the rate limits the tests configured
 *     (DIR/wechatpay_rate_limit: 429 FREQUENCY_LIMITED or the line's
 *     code), then the merchant's WECHATPAY2-SHA256-RSA2048 Authorization
 *     over the request target as sent (401 SIGN_ERROR);
 *   every field of the request models checked (400 PARAM_ERROR naming the
 *     field, detail {location, field, value, issue}: the documented shape
 *     of WeChat Pay's errors, 接口规则 · 错误信息);
 *   prepay (Native / JSAPI / H5), the order query by out_trade_no and by
 *     transaction_id, close, refund, refund query, the trade bill and its
 *     download, the platform certificates.
 * Answers are signed with the platform key (server.c signs them). State is
 * the simulator's directory: created.jsonl, payments.jsonl (sim pay),
 * closed.jsonl, refunds.jsonl.
 */
#include "sim_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

/* ---- WeChat Pay's error answers ---- */

/* The codes WeChat Pay documents for the APIs simulated here, with its
 * messages (the APIs' 错误码 tables; ORDERPAID as merchants report it for
 * a prepay of a paid order). */
static const struct {
    const char *code, *message;
} wx_messages[] = {
    {"PARAM_ERROR", "参数错误"},
    {"INVALID_REQUEST", "HTTP 请求不符合微信支付 APIv3 接口规则"},
    {"SIGN_ERROR", "签名错误，请检查后再试"},
    {"SYSTEM_ERROR", "系统异常，请稍后重试"},
    {"FREQUENCY_LIMITED", "频率超限"},
    {"RATELIMIT_EXCEEDED", "请求超过频率限制"},
    {"APPID_MCHID_NOT_MATCH", "AppID和mch_id不匹配"},
    {"MCH_NOT_EXISTS", "商户号不存在"},
    {"ORDER_CLOSED", "订单已关闭"},
    {"ORDERPAID", "该订单已支付"},
    {"ACCOUNT_ERROR", "账号异常"},
    {"NO_AUTH", "商户无权限"},
    {"NOT_ENOUGH", "余额不足"},
    {"OUT_TRADE_NO_USED", "商户订单号重复"},
    {"RULE_LIMIT", "业务规则限制"},
    {"TRADE_ERROR", "交易错误"},
    {"ORDER_NOT_EXIST", "订单不存在"},
    {"BANK_ERROR", "银行系统异常"},
    {"INVALID_TRANSACTIONID", "订单号非法"},
    {"OPENID_MISMATCH", "openid和appid不匹配"},
    {"USER_ACCOUNT_ABNORMAL", "退款请求失败"},
    {"RESOURCE_NOT_EXISTS", "订单号不存在"},
    {"NO_STATEMENT_EXIST", "账单文件不存在"},
    {"STATEMENT_CREATING", "账单生成中"},
};

const char *sim_wx_message(const char *code)
{
    for (size_t i = 0; i < PO_NELEM(wx_messages); i++)
        if (strcmp(wx_messages[i].code, code) == 0)
            return wx_messages[i].message;
    return "系统异常，请稍后重试";
}

/* 400 PARAM_ERROR about one field: the message names it as WeChat Pay's
 * do ("输入源“/body/out_trade_no”映射到值字段“商户订单号”…"), detail
 * {location, field, value, issue}. value may be NULL. */
static int param_error(struct sim_call *c, const char *location, const char *field,
                       const char *name, json_t *value, const char *issue)
{
    char msg[512];
    (void)snprintf(msg, sizeof msg, "输入源“/%s%s”映射到值字段“%s”%s%s", location, field, name,
                   strstr(issue, "校验失败") ? "" : "校验失败，", issue);
    json_t *detail =
        json_pack("{s:s, s:s, s:s}", "location", location, "field", field, "issue", issue);
    if (detail)
        json_object_set(detail, "value", value ? value : json_null());
    return sim_reply_json(
        c, 400,
        json_pack("{s:s, s:s, s:o*}", "code", "PARAM_ERROR", "message", msg, "detail", detail));
}

static int wx_error(struct sim_call *c, unsigned status, const char *code)
{
    return sim_error(c, status, code, sim_wx_message(code));
}

/* ---- the request as a whole: headers, rate, signature ---- */

/* 接口规则: a request must name its client and take JSON. */
static bool headers_ok(const struct sim_call *c)
{
    const char *ua = c->header(c->ctx, "User-Agent"), *accept = c->header(c->ctx, "Accept");
    return ua && ua[strspn(ua, " \t")] && accept && accept[strspn(accept, " \t")];
}

/* Whether a rate the tests configured is spent: DIR/wechatpay_rate_limit
 * holds lines "PATH-PREFIX N [CODE]" — at most N requests a second to the
 * paths under the prefix, beyond that 429 CODE (FREQUENCY_LIMITED by
 * default; RATELIMIT_EXCEEDED is WeChat Pay's other). *code: the one. */
static bool rate_spent(struct po_sim_server *s, const struct sim_call *c, char *code, size_t cap)
{
    char path[1024], line[512];
    (void)snprintf(path, sizeof path, "%s/wechatpay_rate_limit", s->dir);
    FILE *f = fopen(path, "r");
    bool spent = false;
    int64_t now = (int64_t)time(NULL);
    for (int i = 0; f && i < PO_SIM_WX_RATES && fgets(line, sizeof line, f); i++) {
        char prefix[400], named[32] = "FREQUENCY_LIMITED";
        int n = 0;
        if (sscanf(line, "%399s %d %31s", prefix, &n, named) < 2 ||
            strncmp(c->path, prefix, strlen(prefix)) != 0)
            continue;
        pthread_mutex_lock(&s->mu);
        if (s->wx_rate_second[i] != now) {
            s->wx_rate_second[i] = now;
            s->wx_rate_used[i] = 0;
        }
        spent = s->wx_rate_used[i] >= n;
        if (!spent)
            s->wx_rate_used[i]++;
        pthread_mutex_unlock(&s->mu);
        (void)snprintf(code, cap, "%s", named);
        break;
    }
    if (f)
        fclose(f);
    return spent;
}

/* Checks the merchant's WECHATPAY2-SHA256-RSA2048 Authorization over
 * "METHOD\nURI\nTIMESTAMP\nNONCE\nBODY\n", URI the request target as sent
 * (path and query), the merchant and its certificate's serial the ones
 * the simulator knows, the timestamp within 5 minutes. */
static bool merchant_signed(struct po_sim_server *s, struct sim_call *c)
{
    const char *auth = c->header(c->ctx, "Authorization");
    const char *uri = c->uri ? c->uri : c->path, *body = c->body;
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
    size_t mlen = strlen(c->method) + strlen(uri) + strlen(ts) + strlen(nonce) + strlen(body) + 6;
    char *msg = malloc(mlen);
    unsigned char *raw = NULL;
    size_t raw_len = 0;
    bool ok = false;
    if (msg && po_b64_decode(sig, strlen(sig), &raw, &raw_len) == PO_OK) {
        (void)snprintf(msg, mlen, "%s\n%s\n%s\n%s\n%s\n", c->method, uri, ts, nonce, body);
        ok = po_rsa_sha256_verify(s->id.merchant_pub, msg, strlen(msg), raw, raw_len) == PO_OK;
    }
    free(raw);
    free(msg);
    return ok;
}

/* ---- the request models ---- */

enum wx_type { WX_STR, WX_INT, WX_OBJ };

/* One member of a request model (the API page's 请求参数): its path in
 * the body, the model's name for it, type, whether required, bounds
 * (string: bytes; integer: value) and, for a string, the characters it
 * may hold besides letters and digits (NULL: any). */
struct wx_field {
    const char *path, *name;
    enum wx_type type;
    bool required;
    json_int_t min, max;
    const char *also;
};

#define OUT_TRADE_NO_CHARS "_-|*"

static const struct wx_field prepay_native[] = {
    {"/appid", "应用ID", WX_STR, true, 1, 32, NULL},
    {"/mchid", "直连商户号", WX_STR, true, 1, 32, NULL},
    {"/description", "商品描述", WX_STR, true, 1, 127, NULL},
    {"/out_trade_no", "商户订单号", WX_STR, true, 6, 32, OUT_TRADE_NO_CHARS},
    {"/time_expire", "交易结束时间", WX_STR, false, 1, 64, NULL},
    {"/attach", "附加数据", WX_STR, false, 1, 128, NULL},
    {"/notify_url", "通知地址", WX_STR, true, 1, 255, NULL},
    {"/goods_tag", "订单优惠标记", WX_STR, false, 1, 32, NULL},
    {"/amount", "订单金额", WX_OBJ, true, 0, 0, NULL},
    {"/amount/total", "总金额", WX_INT, true, 1, INT32_MAX, NULL},
    {"/amount/currency", "货币类型", WX_STR, false, 1, 16, NULL},
};
static const struct wx_field prepay_jsapi[] = {
    {"/payer", "支付者", WX_OBJ, true, 0, 0, NULL},
    {"/payer/openid", "用户标识", WX_STR, true, 1, 128, NULL},
};
static const struct wx_field prepay_h5[] = {
    {"/scene_info", "场景信息", WX_OBJ, true, 0, 0, NULL},
    {"/scene_info/payer_client_ip", "用户终端IP", WX_STR, true, 1, 45, NULL},
    {"/scene_info/h5_info", "H5场景信息", WX_OBJ, true, 0, 0, NULL},
    {"/scene_info/h5_info/type", "场景类型", WX_STR, true, 1, 32, NULL},
};
static const struct wx_field refund_model[] = {
    {"/transaction_id", "微信支付订单号", WX_STR, false, 1, 32, NULL},
    {"/out_trade_no", "商户订单号", WX_STR, false, 6, 32, OUT_TRADE_NO_CHARS},
    {"/out_refund_no", "商户退款单号", WX_STR, true, 1, 64, "_-|*@"},
    {"/reason", "退款原因", WX_STR, false, 1, 80, NULL},
    {"/notify_url", "退款结果回调url", WX_STR, false, 1, 256, NULL},
    {"/funds_account", "退款资金来源", WX_STR, false, 1, 32, NULL},
    {"/amount", "金额信息", WX_OBJ, true, 0, 0, NULL},
    {"/amount/refund", "退款金额", WX_INT, true, 1, INT32_MAX, NULL},
    {"/amount/total", "原订单金额", WX_INT, true, 1, INT32_MAX, NULL},
    {"/amount/currency", "退款币种", WX_STR, true, 1, 16, NULL},
};
static const struct wx_field close_model[] = {
    {"/mchid", "直连商户号", WX_STR, true, 1, 32, NULL},
};

/* The member at path ("/a/b") of j, or NULL. */
static json_t *member(json_t *j, const char *path)
{
    char key[64];
    while (j && *path == '/') {
        size_t n = strcspn(path + 1, "/");
        if (n >= sizeof key)
            return NULL;
        memcpy(key, path + 1, n);
        key[n] = '\0';
        j = json_object_get(j, key);
        path += 1 + n;
    }
    return j;
}

/* Why s breaks the string rule [min,max] bytes of letters, digits and
 * also (NULL: any characters); NULL when it keeps it. */
static const char *string_issue(const char *s, json_int_t min, json_int_t max, const char *also,
                                char *buf, size_t cap)
{
    size_t n = strlen(s);
    if ((json_int_t)n < min) {
        (void)snprintf(buf, cap, "字符串规则校验失败，字节数 %zu，小于最小值 %lld", n,
                       (long long)min);
        return buf;
    }
    if ((json_int_t)n > max) {
        (void)snprintf(buf, cap, "字符串规则校验失败，字节数 %zu，大于最大值 %lld", n,
                       (long long)max);
        return buf;
    }
    for (const char *p = s; also && *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
              strchr(also, *p))) {
            (void)snprintf(buf, cap, "字符串规则校验失败，只能是数字、大小写字母和%s", also);
            return buf;
        }
    return NULL;
}

/* The first member of body that breaks its model (nf fields of f),
 * answered 400 PARAM_ERROR; -1 when body keeps the model. */
static int model_check(struct sim_call *c, json_t *body, const struct wx_field *f, size_t nf)
{
    char issue[160];
    for (size_t i = 0; i < nf; i++) {
        json_t *v = member(body, f[i].path);
        const char *why = NULL;
        if (!v || json_is_null(v)) {
            if (!f[i].required)
                continue;
            why = "字段缺失";
        } else if (f[i].type == WX_OBJ) {
            why = json_is_object(v) ? NULL : "类型校验失败，应为对象";
        } else if (f[i].type == WX_INT) {
            if (!json_is_integer(v))
                why = "类型校验失败，应为整数";
            else if (json_integer_value(v) < f[i].min || json_integer_value(v) > f[i].max)
                (void)snprintf(
                    issue, sizeof issue, "数值规则校验失败，值 %lld，超出范围 [%lld,%lld]",
                    (long long)json_integer_value(v), (long long)f[i].min, (long long)f[i].max),
                    why = issue;
        } else if (!json_is_string(v)) {
            why = "类型校验失败，应为字符串";
        } else {
            why = string_issue(json_string_value(v), f[i].min, f[i].max, f[i].also, issue,
                               sizeof issue);
        }
        if (why)
            return param_error(c, "body", f[i].path, f[i].name, v, why);
    }
    return -1;
}

/* Why a notify_url breaks WeChat Pay's rule (通知地址: reachable from
 * outside, https, without a query string) — http:// is taken for a
 * loopback host only, where the tests and the demo listen; NULL if kept. */
static const char *notify_url_issue(const char *u)
{
    const char *host = strncmp(u, "https://", 8) == 0  ? u + 8
                       : strncmp(u, "http://", 7) == 0 ? u + 7
                                                       : NULL;
    if (!host || !*host || strpbrk(u, " \t\r\n\"\\"))
        return "通知地址须为 https URL";
    if (strpbrk(u, "?#"))
        return "通知地址不能携带参数";
    if (host == u + 8)
        return NULL;
    size_t n = strcspn(host, ":/");
    bool loopback = (n == 9 && strncmp(host, "localhost", 9) == 0) ||
                    (strncmp(host, "127.", 4) == 0 && strspn(host, "0123456789.") == n) ||
                    strncmp(host, "[::1]", 5) == 0;
    return loopback ? NULL : "通知地址须为 https URL";
}

/* A path parameter kept to its string rule ([min,max] bytes of letters,
 * digits and also); -1 when kept, else answered 400 PARAM_ERROR. */
static int path_check(struct sim_call *c, const char *field, const char *name, const char *v,
                      json_int_t min, json_int_t max, const char *also)
{
    char issue[160];
    const char *why = string_issue(v, min, max, also, issue, sizeof issue);
    if (!why)
        return -1;
    json_t *jv = json_string(v);
    int r = param_error(c, "path", field, name, jv, why);
    json_decref(jv);
    return r;
}

/* out_trade_no in a path: string[6,32] of letters, digits and _-|*. */
static int path_no_check(struct sim_call *c, const char *no)
{
    return path_check(c, "/out_trade_no", "商户订单号", no, 6, 32, OUT_TRADE_NO_CHARS);
}

/* ---- the order query: GET …/out-trade-no/{no}?mchid= and …/id/{id}?mchid= ---- */

/* "YYYY-MM-DD hh:mm:ss" (Beijing, as the records keep it) as RFC 3339. */
static void record_time(json_t *rec, char *out, size_t cap)
{
    const char *t = sim_jstr(rec, "time");
    (void)snprintf(out, cap, "%.10sT%.8s+08:00", t, strlen(t) > 11 ? t + 11 : "00:00:00");
}

/* The trade_type WeChat Pay names a payment method by. */
static const char *trade_type(json_t *made)
{
    const char *m = sim_jstr(made, "method");
    return strcmp(m, "native") == 0 ? "NATIVE" : strcmp(m, "h5") == 0 ? "MWEB" : "JSAPI";
}

/* The order as 查询订单 answers it (应答参数): appid, mchid, out_trade_no,
 * trade_state and its description always; a payment adds transaction_id,
 * trade_type, bank_type, success_time, payer and amount (total,
 * payer_total, currency, payer_currency); a refunded one is trade_state
 * REFUND (转入退款). Under s->mu or not: it only reads. NULL when out of
 * memory. */
static json_t *order_json(struct po_sim_server *s, const char *no, json_t *paid, json_t *made,
                          bool closed)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:[]}", "appid", s->id.appid, "mchid", s->id.mchid,
                          "out_trade_no", no, "attach", "", "promotion_detail");
    if (!j)
        return NULL;
    const char *openid =
        *sim_jstr(made, "openid") ? sim_jstr(made, "openid") : "oPayonceSimulatedPayer";
    if (!paid) { /* created, not paid: NOTPAY, or CLOSED once closed */
        json_object_set_new(j, "trade_state", json_string(closed ? "CLOSED" : "NOTPAY"));
        json_object_set_new(j, "trade_state_desc",
                            json_string(closed ? "订单已关闭" : "订单未支付"));
        json_object_set_new(j, "amount",
                            json_pack("{s:I, s:s, s:s}", "total", sim_jint(made, "amount"),
                                      "currency", sim_jstr(made, "currency"), "payer_currency",
                                      sim_jstr(made, "currency")));
        return j;
    }
    json_t *refunds = sim_read_jsonl(s->dir, "refunds.jsonl"), *r;
    bool refunded = false;
    size_t i;
    json_array_foreach(refunds, i, r) refunded =
        refunded ||
        (sim_refund_of(r, "wechatpay") && strcmp(sim_jstr(r, "txn"), sim_jstr(paid, "txn")) == 0);
    json_decref(refunds);
    char when[40];
    record_time(paid, when, sizeof when);
    json_int_t amount = sim_jint(paid, "amount");
    const char *cur = sim_jstr(paid, "currency");
    json_object_set_new(j, "transaction_id", json_string(sim_jstr(paid, "txn")));
    json_object_set_new(j, "trade_type", json_string(trade_type(made)));
    json_object_set_new(j, "trade_state", json_string(refunded ? "REFUND" : "SUCCESS"));
    json_object_set_new(j, "trade_state_desc",
                        json_string(refunded ? "订单发生过退款" : "支付成功"));
    json_object_set_new(j, "bank_type", json_string("OTHERS"));
    json_object_set_new(j, "success_time", json_string(when));
    json_object_set_new(j, "payer", json_pack("{s:s}", "openid", openid));
    json_object_set_new(j, "amount",
                        json_pack("{s:I, s:I, s:s, s:s}", "total", amount, "payer_total", amount,
                                  "currency", cur, "payer_currency", cur));
    return j;
}

/* mchid in the query string: required, the merchant's own. */
static int query_mchid_check(struct po_sim_server *s, struct sim_call *c)
{
    const char *mchid = c->arg(c->ctx, "mchid");
    if (!mchid || !*mchid)
        return param_error(c, "query", "/mchid", "直连商户号", NULL, "字段缺失");
    if (strcmp(mchid, s->id.mchid) != 0)
        return wx_error(c, 400, "MCH_NOT_EXISTS");
    return -1;
}

static int query_order(struct po_sim_server *s, struct sim_call *c, const char *no, bool by_id)
{
    /* transaction_id: string(32), WeChat Pay's digits */
    int bad = by_id ? path_check(c, "/transaction_id", "微信支付订单号", no, 1, 32, "")
                    : path_no_check(c, no);
    if (bad < 0)
        bad = query_mchid_check(s, c);
    if (bad >= 0)
        return bad;
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    json_t *created = sim_read_jsonl(s->dir, "created.jsonl");
    json_t *closed = sim_read_jsonl(s->dir, "closed.jsonl");
    json_t *p = sim_find_payment(payments, "wechatpay", by_id ? "txn" : "out_trade_no", no);
    const char *out_trade_no = p ? sim_jstr(p, "out_trade_no") : no;
    json_t *made = sim_find_created(created, "wechatpay", out_trade_no);
    bool was_closed = sim_find_payment(closed, "wechatpay", "out_trade_no", out_trade_no);
    /* by transaction id: only a payment has one */
    int r = p || (made && !by_id)
                ? sim_reply_json(c, 200, order_json(s, out_trade_no, p, made, was_closed))
                : wx_error(c, 404, "ORDER_NOT_EXIST");
    json_decref(payments);
    json_decref(created);
    json_decref(closed);
    return r;
}

/* ---- the trade bill: GET /v3/bill/tradebill, then its download ---- */

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
    /* 申请交易账单 (请求参数): bill_date yyyy-MM-DD required, bill_type
     * ALL|SUCCESS|REFUND, tar_type GZIP, both optional */
    const char *field = !date               ? "/bill_date"
                        : !valid_date(date) ? "/bill_date"
                        : strcmp(type, "ALL") && strcmp(type, "SUCCESS") && strcmp(type, "REFUND")
                            ? "/bill_type"
                        : tar && strcmp(tar, "GZIP") ? "/tar_type"
                                                     : NULL;
    if (field) {
        const char *v = strcmp(field, "/bill_date") == 0   ? date
                        : strcmp(field, "/bill_type") == 0 ? type
                                                           : tar;
        json_t *jv = v ? json_string(v) : NULL;
        int r = param_error(c, "query", field,
                            strcmp(field, "/bill_date") == 0   ? "账单日期"
                            : strcmp(field, "/bill_type") == 0 ? "账单类型"
                                                               : "压缩类型",
                            jv,
                            !v                                 ? "字段缺失"
                            : strcmp(field, "/bill_date") == 0 ? "格式为 yyyy-MM-DD"
                            : strcmp(field, "/bill_type") == 0 ? "取值为 ALL、SUCCESS 或 REFUND"
                                                               : "取值为 GZIP");
        json_decref(jv);
        return r;
    }
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
        return param_error(c, "query", "/token", "下载令牌", NULL, "令牌无效或已过期");
    memcpy(date, token, 10);
    (void)snprintf(type, sizeof type, "%s", token + 11);
    char *gz = strstr(type, "_GZIP");
    if (gz)
        *gz = '\0';
    if (!valid_date(date))
        return param_error(c, "query", "/token", "下载令牌", NULL, "令牌无效或已过期");
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

/* ---- refunds: POST /v3/refund/domestic/refunds, GET …/refunds/{out_refund_no} ---- */

/* A refund as 申请退款 and 查询单笔退款 answer it (应答参数, every member):
 * refund_id, out_refund_no, transaction_id, out_trade_no, channel,
 * user_received_account, success_time (once SUCCESS), create_time,
 * status, funds_account, amount {total, refund, from, payer_total,
 * payer_refund, settlement_refund, settlement_total, discount_refund,
 * currency}, promotion_detail. NULL when out of memory. */
static json_t *refund_json(json_t *rec, const char *status)
{
    char when[40];
    record_time(rec, when, sizeof when);
    json_int_t total = sim_jint(rec, "total"), refund = sim_jint(rec, "amount");
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:{s:I, s:I, s:[], s:I, s:I, s:I, s:I, "
        "s:I, s:s}, s:[]}",
        "refund_id", sim_jstr(rec, "refund_id"), "out_refund_no", sim_jstr(rec, "out_refund_no"),
        "transaction_id", sim_jstr(rec, "txn"), "out_trade_no", sim_jstr(rec, "out_trade_no"),
        "channel", "ORIGINAL", "user_received_account", "支付用户零钱", "create_time", when,
        "status", status, "funds_account", "AVAILABLE", "amount", "total", total, "refund", refund,
        "from", "payer_total", total, "payer_refund", refund, "settlement_refund", refund,
        "settlement_total", total, "discount_refund", (json_int_t)0, "currency", "CNY",
        "promotion_detail");
    if (j && strcmp(status, "SUCCESS") == 0)
        json_object_set_new(j, "success_time", json_string(when));
    return j;
}

/* A refund's state as the query sees it: the simulator's refunds all
 * succeed, but one the tests listed in DIR/refund_abnormal ends ABNORMAL
 * (the payer's account could not take it), as WeChat Pay reports it. */
static const char *refund_state(const struct po_sim_server *s, json_t *rec)
{
    return sim_listed(s, "refund_abnormal", sim_jstr(rec, "out_refund_no")) ? "ABNORMAL"
                                                                            : "SUCCESS";
}

/* The refund request's rules beyond its model's types and bounds: the
 * payment named one way or the other, the notify_url WeChat Pay takes,
 * CNY, a known funds account, no more than the payment. -1 when kept. */
static int refund_rules(struct sim_call *c, json_t *in)
{
    json_t *amt = json_object_get(in, "amount");
    const char *url = json_string_value(json_object_get(in, "notify_url"));
    const char *fa = json_string_value(json_object_get(in, "funds_account"));
    const char *why = NULL;
    if (!json_object_get(in, "transaction_id") && !json_object_get(in, "out_trade_no"))
        return param_error(c, "body", "/out_trade_no", "商户订单号", NULL,
                           "transaction_id 与 out_trade_no 须二选一");
    if (url && (why = notify_url_issue(url)))
        return param_error(c, "body", "/notify_url", "退款结果回调url",
                           json_object_get(in, "notify_url"), why);
    if (strcmp(sim_jstr(amt, "currency"), "CNY") != 0)
        return param_error(c, "body", "/amount/currency", "退款币种",
                           json_object_get(amt, "currency"), "境内退款只支持 CNY");
    if (fa && strcmp(fa, "AVAILABLE") != 0 && strcmp(fa, "UNSETTLED") != 0)
        return param_error(c, "body", "/funds_account", "退款资金来源",
                           json_object_get(in, "funds_account"), "取值为 AVAILABLE 或 UNSETTLED");
    if (sim_jint(amt, "refund") > sim_jint(amt, "total"))
        return param_error(c, "body", "/amount/refund", "退款金额", json_object_get(amt, "refund"),
                           "退款金额不能大于原订单金额");
    return -1;
}

static int refund(struct po_sim_server *s, struct sim_call *c)
{
    json_t *in = json_loads(c->body, 0, NULL);
    int bad = !json_is_object(in) ? param_error(c, "body", "", "请求体", NULL, "不是 JSON 对象")
                                  : model_check(c, in, refund_model, PO_NELEM(refund_model));
    if (bad < 0)
        bad = refund_rules(c, in);
    if (bad >= 0) {
        json_decref(in);
        return bad;
    }
    json_t *amt = json_object_get(in, "amount");
    const char *out_refund_no = sim_jstr(in, "out_refund_no"),
               *notify_url = sim_jstr(in, "notify_url");
    json_int_t want = sim_jint(amt, "refund");
    pthread_mutex_lock(&s->mu);
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    json_t *refunds = sim_read_jsonl(s->dir, "refunds.jsonl");
    json_t *p =
        json_object_get(in, "transaction_id")
            ? sim_find_payment(payments, "wechatpay", "txn", sim_jstr(in, "transaction_id"))
            : sim_find_payment(payments, "wechatpay", "out_trade_no", sim_jstr(in, "out_trade_no"));
    json_t *existing = NULL, *resp = NULL, *r;
    json_int_t already = 0;
    size_t i;
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
    const char *code = NULL, *why = NULL;
    bool notify = false;
    if (!p) {
        status = 404, code = "RESOURCE_NOT_EXISTS";
    } else if (existing) {
        /* The same out_refund_no again: the same refund, as it is now. */
        resp = refund_json(existing, refund_state(s, existing));
    } else if (sim_jint(amt, "total") != sim_jint(p, "amount")) {
        status = 400, code = "INVALID_REQUEST", why = "原订单金额与实际支付金额不一致";
    } else if (already + want > sim_jint(p, "amount")) {
        status = 400, code = "INVALID_REQUEST", why = "申请退款金额超过订单可退金额";
    } else {
        char when[32], refund_id[40];
        sim_new_id("50300", refund_id, sizeof refund_id);
        sim_beijing_now(when, sizeof when);
        json_t *rec = json_pack(
            "{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "channel", "wechatpay", "out_trade_no",
            sim_jstr(p, "out_trade_no"), "txn", sim_jstr(p, "txn"), "out_refund_no", out_refund_no,
            "refund_id", refund_id, "amount", want, "total", sim_jint(p, "amount"), "time", when);
        sim_append_jsonl(s->dir, "refunds.jsonl", rec);
        resp = refund_json(rec, "PROCESSING");
        json_decref(rec);
        notify = *notify_url != '\0';
    }
    char trade_no[65], txn[65], refund_id[40];
    (void)snprintf(trade_no, sizeof trade_no, "%s", sim_jstr(p, "out_trade_no"));
    (void)snprintf(txn, sizeof txn, "%s", sim_jstr(p, "txn"));
    (void)snprintf(refund_id, sizeof refund_id, "%s", sim_jstr(resp, "refund_id"));
    json_int_t total = sim_jint(p, "amount");
    pthread_mutex_unlock(&s->mu);
    json_decref(payments);
    json_decref(refunds);
    if (notify)
        sim_start_refund_job(s, notify_url, "wechatpay", trade_no, txn, out_refund_no, refund_id,
                             want, total);
    json_decref(in);
    if (code)
        return why ? sim_error(c, status, code, why) : wx_error(c, status, code);
    return sim_reply_json(c, 200, resp);
}

/* GET /v3/refund/domestic/refunds/{out_refund_no}: the refund as its
 * create answer, now SUCCESS with success_time (or ABNORMAL, above); 404
 * RESOURCE_NOT_EXISTS for others. */
static int refund_query(struct po_sim_server *s, struct sim_call *c, const char *out_refund_no)
{
    int bad = path_check(c, "/out_refund_no", "商户退款单号", out_refund_no, 1, 64, "_-|*@");
    if (bad >= 0)
        return bad;
    pthread_mutex_lock(&s->mu);
    json_t *refunds = sim_read_jsonl(s->dir, "refunds.jsonl"), *r, *mine = NULL;
    size_t i;
    json_array_foreach(refunds, i, r) if (sim_refund_of(r, "wechatpay") &&
                                          strcmp(sim_jstr(r, "out_refund_no"), out_refund_no) == 0)
        mine = r;
    json_t *ans = mine ? refund_json(mine, refund_state(s, mine)) : NULL;
    pthread_mutex_unlock(&s->mu);
    json_decref(refunds);
    if (!mine)
        return sim_error(c, 404, "RESOURCE_NOT_EXISTS", "退款单不存在");
    return sim_reply_json(c, 200, ans);
}

/* ---- close: POST /v3/pay/transactions/out-trade-no/{no}/close ---- */

/* Body {"mchid"}: 204 with an empty, signed body, the close recorded in
 * closed.jsonl (an order the simulator never saw created is taken as one
 * created elsewhere, and closed); an order it has a payment for is
 * refused 400 ORDERPAID (the adapter does not rely on the code: it asks
 * the order query). */
static int close_order(struct po_sim_server *s, struct sim_call *c, const char *out_trade_no)
{
    json_t *in = json_loads(c->body, 0, NULL);
    int bad = path_no_check(c, out_trade_no);
    if (bad < 0)
        bad = !json_is_object(in) ? param_error(c, "body", "", "请求体", NULL, "不是 JSON 对象")
                                  : model_check(c, in, close_model, PO_NELEM(close_model));
    if (bad < 0 && strcmp(sim_jstr(in, "mchid"), s->id.mchid) != 0)
        bad = wx_error(c, 400, "MCH_NOT_EXISTS");
    json_decref(in);
    if (bad >= 0)
        return bad;
    pthread_mutex_lock(&s->mu);
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    bool paid = sim_find_payment(payments, "wechatpay", "out_trade_no", out_trade_no) != NULL;
    if (!paid)
        sim_record_close(s, "wechatpay", out_trade_no);
    pthread_mutex_unlock(&s->mu);
    json_decref(payments);
    if (paid)
        return wx_error(c, 400, "ORDERPAID");
    return sim_reply(c, 204, "application/json", "", true);
}

/* ---- prepay: POST /v3/pay/transactions/{native,jsapi,h5} ---- */

/* The prepay's rules beyond its model's types and bounds: the
 * simulator's appid and mchid, the notify_url WeChat Pay takes, an RFC
 * 3339 time_expire, CNY, H5's scene type. -1 when kept. */
static int prepay_rules(struct po_sim_server *s, struct sim_call *c, json_t *in, bool h5)
{
    const char *url = sim_jstr(in, "notify_url"),
               *te = json_string_value(json_object_get(in, "time_expire"));
    json_t *amt = json_object_get(in, "amount"), *cur = json_object_get(amt, "currency");
    const char *type =
        sim_jstr(json_object_get(json_object_get(in, "scene_info"), "h5_info"), "type");
    const char *why = notify_url_issue(url);
    int64_t at = 0;
    if (strcmp(sim_jstr(in, "mchid"), s->id.mchid) != 0)
        return wx_error(c, 400, "MCH_NOT_EXISTS");
    if (strcmp(sim_jstr(in, "appid"), s->id.appid) != 0)
        return wx_error(c, 400, "APPID_MCHID_NOT_MATCH");
    if (why)
        return param_error(c, "body", "/notify_url", "通知地址", json_object_get(in, "notify_url"),
                           why);
    if (te && po_time_parse(te, &at) != PO_OK)
        return param_error(c, "body", "/time_expire", "交易结束时间",
                           json_object_get(in, "time_expire"),
                           "须为 rfc3339 格式 yyyy-MM-DDTHH:mm:ss+TIMEZONE");
    if (cur && strcmp(json_string_value(cur), "CNY") != 0)
        return param_error(c, "body", "/amount/currency", "货币类型", cur, "境内商户只支持 CNY");
    if (h5 && strcmp(type, "iOS") != 0 && strcmp(type, "Android") != 0 && strcmp(type, "Wap") != 0)
        return param_error(c, "body", "/scene_info/h5_info/type", "场景类型",
                           member(in, "/scene_info/h5_info/type"), "取值为 iOS、Android 或 Wap");
    return -1;
}

/* The prepay of a kind: its request model checked whole (PARAM_ERROR
 * naming the field), the payment kept in created.jsonl with the request
 * (for `sim pay --created` and the query). The same out_trade_no with the
 * same request is the same payment (the same prepay_id, code_url or
 * h5_url); with another 400 INVALID_REQUEST "201 商户订单号重复"; a paid
 * order 400 ORDERPAID, a closed one 400 ORDER_CLOSED. */
static int prepay(struct po_sim_server *s, struct sim_call *c, const char *method)
{
    bool jsapi = strcmp(method, "jsapi") == 0, h5 = strcmp(method, "h5") == 0;
    json_t *in = json_loads(c->body, 0, NULL);
    int bad = !json_is_object(in) ? param_error(c, "body", "", "请求体", NULL, "不是 JSON 对象")
                                  : model_check(c, in, prepay_native, PO_NELEM(prepay_native));
    if (bad < 0 && jsapi)
        bad = model_check(c, in, prepay_jsapi, PO_NELEM(prepay_jsapi));
    if (bad < 0 && h5)
        bad = model_check(c, in, prepay_h5, PO_NELEM(prepay_h5));
    if (bad < 0)
        bad = prepay_rules(s, c, in, h5);
    if (bad >= 0) {
        json_decref(in);
        return bad;
    }
    json_t *amt = json_object_get(in, "amount");
    const char *no = sim_jstr(in, "out_trade_no");
    pthread_mutex_lock(&s->mu);
    json_t *prev = NULL, *ans = NULL;
    enum sim_trade t = sim_trade_of(s, "wechatpay", no, &prev);
    const char *code = NULL;
    if (t == SIM_TRADE_PAID)
        code = "ORDERPAID";
    else if (t == SIM_TRADE_CLOSED)
        code = "ORDER_CLOSED";
    else if (prev && (strcmp(sim_jstr(prev, "method"), method) != 0 ||
                      !json_equal(json_object_get(prev, "request"), in)))
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
        const char *cur = json_object_get(amt, "currency") ? sim_jstr(amt, "currency") : "CNY";
        json_t *rec = json_pack(
            "{s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:s, s:O, s:O}", "channel", "wechatpay",
            "method", method, "out_trade_no", no, "amount", sim_jint(amt, "total"), "currency", cur,
            "notify_url", sim_jstr(in, "notify_url"), "id", id, "time_expire",
            sim_jstr(in, "time_expire"), "openid", sim_jstr(json_object_get(in, "payer"), "openid"),
            "answer", ans, "request", in);
        sim_append_jsonl(s->dir, "created.jsonl", rec);
        json_decref(rec);
    }
    pthread_mutex_unlock(&s->mu);
    json_decref(prev);
    json_decref(in);
    if (code)
        return strcmp(code, "INVALID_REQUEST") == 0 ? sim_error(c, 400, code, "201 商户订单号重复")
                                                    : wx_error(c, 400, code);
    return sim_reply_json(c, 200, ans);
}

/* ---- platform certificates: GET /v3/certificates ---- */

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
    json_t *data = json_array(), *a = cert_item(s, "wechatpay_platform_cert.pem"),
           *b = cert_item(s, "wechatpay_platform_cert_next.pem");
    if (a)
        json_array_append_new(data, a);
    if (b)
        json_array_append_new(data, b);
    return sim_reply_json(c, 200, json_pack("{s:o}", "data", data));
}

/* ---- the routes ---- */

enum wx_api {
    WX_NONE,
    WX_QUERY,
    WX_QUERY_ID,
    WX_CLOSE,
    WX_PREPAY,
    WX_REFUND,
    WX_REFUND_QUERY,
    WX_BILL,
    WX_BILL_FILE,
    WX_CERTS
};

/* Which API c calls; *arg: its path parameter (an order or refund
 * number, a transaction id, a prepay kind), bounded by cap. */
static enum wx_api route_of(const struct sim_call *c, char *arg, size_t cap)
{
    static const char qpath[] = "/v3/pay/transactions/out-trade-no/",
                      ipath[] = "/v3/pay/transactions/id/",
                      rpath[] = "/v3/refund/domestic/refunds/";
    static const char *const kinds[] = {"native", "jsapi", "h5"};
    bool get = strcmp(c->method, "GET") == 0, post = strcmp(c->method, "POST") == 0;
    const char *p = c->path;
    size_t n = strlen(p);
    arg[0] = '\0';
    if (get && strcmp(p, "/v3/bill/tradebill") == 0)
        return WX_BILL;
    if (get && strcmp(p, "/v3/billdownload/file") == 0)
        return WX_BILL_FILE;
    if (get && strcmp(p, "/v3/certificates") == 0)
        return WX_CERTS;
    if (post && strcmp(p, "/v3/refund/domestic/refunds") == 0)
        return WX_REFUND;
    for (size_t k = 0; post && k < PO_NELEM(kinds); k++)
        if (strncmp(p, "/v3/pay/transactions/", 21) == 0 && strcmp(p + 21, kinds[k]) == 0) {
            (void)snprintf(arg, cap, "%s", kinds[k]);
            return WX_PREPAY;
        }
    /* path parameters: one segment, within the bound */
    const char *rest = NULL;
    enum wx_api api = WX_NONE;
    if (get && strncmp(p, qpath, sizeof qpath - 1) == 0)
        rest = p + sizeof qpath - 1, api = WX_QUERY;
    else if (get && strncmp(p, ipath, sizeof ipath - 1) == 0)
        rest = p + sizeof ipath - 1, api = WX_QUERY_ID;
    else if (get && strncmp(p, rpath, sizeof rpath - 1) == 0)
        rest = p + sizeof rpath - 1, api = WX_REFUND_QUERY;
    else if (post && strncmp(p, qpath, sizeof qpath - 1) == 0 && n > sizeof qpath + 5 &&
             strcmp(p + n - 6, "/close") == 0)
        rest = p + sizeof qpath - 1, api = WX_CLOSE;
    if (!rest)
        return WX_NONE;
    size_t len = api == WX_CLOSE ? n - 6 - (size_t)(rest - p) : strlen(rest);
    if (len == 0 || len >= cap || memchr(rest, '/', len))
        return WX_NONE;
    memcpy(arg, rest, len);
    arg[len] = '\0';
    return api;
}

int po_sim_wx_route(struct po_sim_server *s, struct sim_call *c)
{
    char arg[128], code[32];
    enum wx_api api = route_of(c, arg, sizeof arg);
    if (api == WX_NONE)
        return -1;
    if (!headers_ok(c))
        return sim_error(c, 400, "INVALID_REQUEST", "Http头缺少Accept或User-Agent");
    if (rate_spent(s, c, code, sizeof code))
        return wx_error(c, 429, code);
    if (!merchant_signed(s, c))
        return wx_error(c, 401, "SIGN_ERROR");
    switch (api) {
    case WX_QUERY:
        return query_order(s, c, arg, false);
    case WX_QUERY_ID:
        return query_order(s, c, arg, true);
    case WX_CLOSE:
        return close_order(s, c, arg);
    case WX_PREPAY:
        return prepay(s, c, arg);
    case WX_REFUND:
        return refund(s, c);
    case WX_REFUND_QUERY:
        return refund_query(s, c, arg);
    case WX_BILL:
        return trade_bill(s, c);
    case WX_BILL_FILE:
        return bill_download(s, c);
    case WX_CERTS:
        return certificates(s, c);
    case WX_NONE:
        break;
    }
    return -1;
}
