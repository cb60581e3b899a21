/*
 * server.c — `payonce sim serve`: the simulated channel's own APIs (see
 * sim.h). State lives in the simulator's directory: payments.jsonl (written
 * by `payonce sim pay`, lost payments included — the channel took the money)
 * and refunds.jsonl (written here). Both are read afresh on every request.
 */
#include "sim.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


struct po_sim_server {
    struct MHD_Daemon *daemon;
    struct po_sim_identity id;
    char dir[512];
    double time_factor;
    int refund_delay_ms;
    pthread_mutex_t mu; /* serialises refund bookkeeping */
    atomic_int jobs;    /* refund notifications still being delivered */
    atomic_bool stopping;
};

struct req {
    struct po_body body;
};

/* Every line of DIR/name parsed as JSON (NULL entries skipped). */
static json_t *read_jsonl(const char *dir, const char *name)
{
    char path[1024];
    (void)snprintf(path, sizeof path, "%s/%s", dir, name);
    json_t *all = json_array();
    FILE *f = fopen(path, "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        if (j)
            json_array_append_new(all, j);
    }
    if (f)
        fclose(f);
    return all;
}

static void append_jsonl(const char *dir, const char *name, json_t *j)
{
    char path[1024];
    (void)snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    char *s = json_dumps(j, JSON_COMPACT);
    if (s)
        fprintf(f, "%s\n", s);
    free(s);
    fclose(f);
}

static const char *js(json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

static json_int_t ji(json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

/* A response signed like WeChat Pay's: Wechatpay-* headers over
 * "ts\nnonce\nbody\n" with the platform key. */
static enum MHD_Result reply(struct po_sim_server *s, struct MHD_Connection *c, unsigned status,
                             const char *type, const char *body)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)(uintptr_t)body,
                                                             MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    struct po_sim_request sig;
    memset(&sig, 0, sizeof sig);
    if (po_sim_wechatpay_sign(s->id.wx_key, s->id.serial, body, strlen(body),
                              (int64_t)time(NULL), &sig) == PO_OK)
        for (int i = 0; i < sig.nheaders; i++)
            MHD_add_response_header(r, sig.name[i], sig.value[i]);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result reply_json(struct po_sim_server *s, struct MHD_Connection *c,
                                  unsigned status, json_t *j)
{
    char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    enum MHD_Result r = reply(s, c, body ? status : 500, "application/json", body ? body : "{}");
    free(body);
    return r;
}

static enum MHD_Result error(struct po_sim_server *s, struct MHD_Connection *c, unsigned status,
                             const char *code, const char *message)
{
    return reply_json(s, c, status, json_pack("{s:s, s:s}", "code", code, "message", message));
}

/* The refund record's channel (records written before Alipay refunds
 * existed carry none: WeChat Pay). */
static bool refund_of(json_t *r, const char *channel)
{
    const char *c = js(r, "channel");
    return strcmp(*c ? c : "wechatpay", channel) == 0;
}

static json_t *find_payment(json_t *payments, const char *channel, const char *key,
                            const char *value)
{
    size_t i;
    json_t *p;
    json_array_foreach(payments, i, p) {
        if (strcmp(js(p, "channel"), channel) == 0 && strcmp(js(p, key), value) == 0)
            return p;
    }
    return NULL;
}

static enum MHD_Result query_order(struct po_sim_server *s, struct MHD_Connection *c,
                                   const char *out_trade_no)
{
    const char *mchid = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "mchid");
    if (!mchid || strcmp(mchid, s->id.mchid) != 0)
        return error(s, c, 400, "PARAM_ERROR", "mchid does not match");
    json_t *payments = read_jsonl(s->dir, "payments.jsonl");
    json_t *p = find_payment(payments, "wechatpay", "out_trade_no", out_trade_no);
    enum MHD_Result r;
    if (!p) {
        r = error(s, c, 404, "ORDER_NOT_EXIST", "订单不存在");
    } else {
        json_int_t amount = ji(p, "amount");
        r = reply_json(s, c, 200,
                       json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:{s:s},"
                                 " s:{s:I, s:I, s:s, s:s}}",
                                 "appid", s->id.appid, "mchid", s->id.mchid, "out_trade_no",
                                 out_trade_no, "transaction_id", js(p, "txn"), "trade_type",
                                 "JSAPI", "trade_state", "SUCCESS", "trade_state_desc", "支付成功",
                                 "bank_type", "OTHERS", "success_time", js(p, "time"), "payer",
                                 "openid", "oPayonceSimulatedPayer", "amount", "total", amount,
                                 "payer_total", amount, "currency", js(p, "currency"),
                                 "payer_currency", js(p, "currency")));
    }
    json_decref(payments);
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

static void yuan(int64_t minor, char *out, size_t cap)
{
    (void)snprintf(out, cap, "%lld.%02lld", (long long)(minor / 100), (long long)(minor % 100));
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
    json_t *payments = read_jsonl(s->dir, "payments.jsonl");
    json_t *refunds = read_jsonl(s->dir, "refunds.jsonl");
    int64_t count = 0, settled = 0, refunded = 0, fees = 0, total = 0, requested = 0;
    bool want_pay = strcmp(type, "REFUND") != 0, want_refund = strcmp(type, "SUCCESS") != 0;
    size_t i;
    json_t *p;
    json_array_foreach(payments, i, p) {
        if (!want_pay || strcmp(js(p, "channel"), "wechatpay") != 0 ||
            strncmp(js(p, "time"), date, 10) != 0)
            continue;
        int64_t amount = ji(p, "amount"), fee = (amount * 6 + 500) / 1000; /* 0.6 %, to the fen */
        char a[32], f[32];
        yuan(amount, a, sizeof a);
        (void)snprintf(f, sizeof f, "%lld.%02lld000", (long long)(fee / 100),
                       (long long)(fee % 100));
        const char *row[] = {js(p, "time"), s->id.appid, s->id.mchid, "0", "", js(p, "txn"),
                             js(p, "out_trade_no"), "oPayonceSimulatedPayer", "JSAPI", "SUCCESS",
                             "OTHERS", js(p, "currency"), a, "0.00", "0", "0", "0.00", "0.00", "",
                             "", "payonce simulator", "", f, "0.60%", a, "0.00", ""};
        bill_row(&b, row, 27);
        count++, settled += amount, fees += fee, total += amount;
    }
    json_array_foreach(refunds, i, p) {
        if (!want_refund || !refund_of(p, "wechatpay") || strncmp(js(p, "time"), date, 10) != 0)
            continue;
        int64_t amount = ji(p, "amount"), fee = -((amount * 6 + 500) / 1000);
        char a[32], f[32];
        yuan(amount, a, sizeof a);
        (void)snprintf(f, sizeof f, "-%lld.%02lld000", (long long)(-fee / 100),
                       (long long)(-fee % 100));
        const char *row[] = {js(p, "time"), s->id.appid, s->id.mchid, "0", "", js(p, "txn"),
                             js(p, "out_trade_no"), "oPayonceSimulatedPayer", "JSAPI", "REFUND",
                             "OTHERS", "CNY", "0.00", "0.00", js(p, "refund_id"),
                             js(p, "out_refund_no"), a, "0.00", "ORIGINAL", "SUCCESS",
                             "payonce simulator", "", f, "0.60%", "0.00", a, ""};
        bill_row(&b, row, 27);
        count++, refunded += amount, fees += fee, requested += amount;
    }
    bputs(&b, "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,"
              "申请退款总金额\r\n");
    char c[24], s1[32], s2[32], s3[32], s4[32], s5[32];
    (void)snprintf(c, sizeof c, "%lld", (long long)count);
    yuan(settled, s1, sizeof s1);
    yuan(refunded, s2, sizeof s2);
    (void)snprintf(s3, sizeof s3, "%s%lld.%02lld", fees < 0 ? "-" : "",
                   (long long)(llabs(fees) / 100), (long long)(llabs(fees) % 100));
    yuan(total, s4, sizeof s4);
    yuan(requested, s5, sizeof s5);
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

static enum MHD_Result trade_bill(struct po_sim_server *s, struct MHD_Connection *c)
{
    const char *date = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "bill_date");
    const char *type = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "bill_type");
    if (!type)
        type = "ALL";
    if (!valid_date(date) || (strcmp(type, "ALL") && strcmp(type, "SUCCESS") &&
                              strcmp(type, "REFUND")))
        return error(s, c, 400, "PARAM_ERROR", "bill_date YYYY-MM-DD, bill_type ALL|SUCCESS|REFUND");
    char *bill = build_bill(s, date, type);
    if (!bill)
        return error(s, c, 500, "SYSTEM_ERROR", "bill too large");
    char hash[41], url[256];
    po_sha1_hex(bill, strlen(bill), hash);
    free(bill);
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    (void)snprintf(url, sizeof url, "http://%s/v3/billdownload/file?token=%s_%s",
                   host ? host : "127.0.0.1", date, type);
    return reply_json(s, c, 200, json_pack("{s:s, s:s, s:s}", "hash_type", "SHA1", "hash_value",
                                           hash, "download_url", url));
}

static enum MHD_Result bill_download(struct po_sim_server *s, struct MHD_Connection *c)
{
    const char *token = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token");
    char date[11] = "";
    if (!token || strlen(token) < 12 || token[10] != '_')
        return error(s, c, 400, "PARAM_ERROR", "bad token");
    memcpy(date, token, 10);
    if (!valid_date(date))
        return error(s, c, 400, "PARAM_ERROR", "bad token");
    char *bill = build_bill(s, date, token + 11);
    if (!bill)
        return error(s, c, 500, "SYSTEM_ERROR", "bill too large");
    enum MHD_Result r = reply(s, c, 200, "text/csv; charset=utf-8", bill);
    free(bill);
    return r;
}

/* Checks the merchant's WECHATPAY2-SHA256-RSA2048 Authorization header. */
static bool merchant_signed(struct po_sim_server *s, struct MHD_Connection *c, const char *method,
                            const char *path, const char *body)
{
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!auth || strncmp(auth, "WECHATPAY2-SHA256-RSA2048 ", 26) != 0 || strlen(auth) > 2048)
        return false;
    char mchid[64] = "", nonce[64] = "", ts[24] = "", serial[80] = "", sig[700] = "";
    struct {
        const char *name;
        char *dst;
        size_t cap;
    } f[] = {{"mchid=\"", mchid, sizeof mchid}, {"nonce_str=\"", nonce, sizeof nonce},
             {"timestamp=\"", ts, sizeof ts},   {"serial_no=\"", serial, sizeof serial},
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

struct refund_job {
    struct po_sim_server *s;
    char url[512];
    struct po_sim_refund r;
    char out_trade_no[65], txn[65], out_refund_no[65], refund_id[40];
};

static void *notify_refund(void *arg)
{
    struct refund_job *j = arg;
    struct timespec ts = {j->s->refund_delay_ms / 1000, (j->s->refund_delay_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    struct po_sim_server *srv = j->s;
    j->r.out_trade_no = j->out_trade_no;
    j->r.txn = j->txn;
    j->r.out_refund_no = j->out_refund_no;
    j->r.refund_id = j->refund_id;
    struct po_sim_request req;
    if (po_sim_refund_request(&j->s->id, &j->r, (int64_t)time(NULL), &req) == PO_OK) {
        /* While stopping, one last attempt only. */
        struct po_sim_delivery d = {j->url, j->r.channel, &req, srv->time_factor, 5000,
                                    atomic_load(&srv->stopping) ? 1 : 0, j->out_refund_no, stdout};
        struct po_sim_result res;
        po_sim_deliver(&d, &res);
        po_sim_request_free(&req);
    }
    free(j);
    atomic_fetch_sub(&srv->jobs, 1);
    return NULL;
}

/* prefix + 24 random digits (the channels' refund ids look so). */
static void new_id(const char *prefix, char *out, size_t cap)
{
    char digits[25];
    unsigned char rnd[24];
    PO_ASSERT(po_random(rnd, sizeof rnd) == PO_OK);
    for (int k = 0; k < 24; k++)
        digits[k] = (char)('0' + rnd[k] % 10);
    digits[24] = '\0';
    (void)snprintf(out, cap, "%s%s", prefix, digits);
}

/* "YYYY-MM-DD hh:mm:ss" in Beijing time, as the bills and Alipay write it. */
static void beijing_now(char *out, size_t cap)
{
    time_t t = time(NULL) + 8 * 3600;
    struct tm tm;
    gmtime_r(&t, &tm);
    (void)strftime(out, cap, "%Y-%m-%d %H:%M:%S", &tm);
}

/* Notifies the refund's result to url on the channel's schedule, from a
 * detached thread (po_sim_server_stop waits for it). */
static void start_refund_job(struct po_sim_server *s, const char *url, const char *channel,
                             const char *out_trade_no, const char *txn, const char *out_refund_no,
                             const char *refund_id, int64_t amount, int64_t total)
{
    struct refund_job *job = calloc(1, sizeof *job);
    if (!job)
        return;
    job->s = s;
    (void)snprintf(job->url, sizeof job->url, "%s", url);
    (void)snprintf(job->out_trade_no, sizeof job->out_trade_no, "%s", out_trade_no);
    (void)snprintf(job->txn, sizeof job->txn, "%s", txn);
    (void)snprintf(job->out_refund_no, sizeof job->out_refund_no, "%s", out_refund_no);
    (void)snprintf(job->refund_id, sizeof job->refund_id, "%s", refund_id);
    job->r = (struct po_sim_refund){channel, NULL, NULL, NULL, NULL, amount, total, "SUCCESS"};
    pthread_t th;
    atomic_fetch_add(&s->jobs, 1);
    if (pthread_create(&th, NULL, notify_refund, job) == 0) {
        pthread_detach(th);
    } else {
        atomic_fetch_sub(&s->jobs, 1);
        free(job);
    }
}

static enum MHD_Result refund(struct po_sim_server *s, struct MHD_Connection *c, struct req *q)
{
    const char *path = "/v3/refund/domestic/refunds";
    const char *body = q->body.data ? q->body.data : "";
    if (!merchant_signed(s, c, "POST", path, body))
        return error(s, c, 401, "SIGN_ERROR", "签名错误");
    json_t *in = json_loads(body, 0, NULL);
    json_t *amt = json_object_get(in, "amount");
    const char *out_refund_no = js(in, "out_refund_no"), *notify_url = js(in, "notify_url");
    json_int_t want = ji(amt, "refund");
    if (!json_is_object(in) || !po_id_valid(out_refund_no, 64) || want <= 0 ||
        strlen(notify_url) >= 500 || strncmp(notify_url, "http", 4) != 0) {
        json_decref(in);
        return error(s, c, 400, "PARAM_ERROR", "out_refund_no, amount.refund, notify_url");
    }
    pthread_mutex_lock(&s->mu);
    json_t *payments = read_jsonl(s->dir, "payments.jsonl");
    json_t *refunds = read_jsonl(s->dir, "refunds.jsonl");
    json_t *p = json_object_get(in, "transaction_id")
                    ? find_payment(payments, "wechatpay", "txn", js(in, "transaction_id"))
                    : find_payment(payments, "wechatpay", "out_trade_no", js(in, "out_trade_no"));
    json_t *existing = NULL, *resp = NULL;
    json_int_t already = 0;
    size_t i;
    json_t *r;
    json_array_foreach(refunds, i, r) {
        if (!refund_of(r, "wechatpay"))
            continue;
        if (p && strcmp(js(r, "txn"), js(p, "txn")) == 0)
            already += ji(r, "amount");
        if (strcmp(js(r, "out_refund_no"), out_refund_no) == 0)
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
        (void)snprintf(refund_id, sizeof refund_id, "%s", js(existing, "refund_id"));
    } else if (already + want > ji(p, "amount")) {
        status = 403, code = "NOT_ENOUGH";
    } else {
        char when[32];
        new_id("50300", refund_id, sizeof refund_id);
        beijing_now(when, sizeof when);
        json_t *rec = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "channel", "wechatpay",
                                "out_trade_no",
                                js(p, "out_trade_no"), "txn", js(p, "txn"), "out_refund_no",
                                out_refund_no, "refund_id", refund_id, "amount", want, "total",
                                ji(p, "amount"), "time", when);
        append_jsonl(s->dir, "refunds.jsonl", rec);
        json_decref(rec);
        notify = true;
    }
    if (!code)
        resp = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:I, s:s}}",
                         "refund_id", refund_id, "out_refund_no", out_refund_no,
                         "transaction_id", js(p, "txn"), "out_trade_no", js(p, "out_trade_no"),
                         "channel", "ORIGINAL", "status", "PROCESSING", "amount", "total",
                         ji(p, "amount"), "refund", want, "payer_total", ji(p, "amount"),
                         "payer_refund", want, "currency", "CNY");
    char trade_no[65], txn[65];
    (void)snprintf(trade_no, sizeof trade_no, "%s", js(p, "out_trade_no"));
    (void)snprintf(txn, sizeof txn, "%s", js(p, "txn"));
    json_int_t total = ji(p, "amount");
    pthread_mutex_unlock(&s->mu);
    json_decref(payments);
    json_decref(refunds);
    if (notify)
        start_refund_job(s, notify_url, "wechatpay", trade_no, txn, out_refund_no, refund_id, want,
                         total);
    json_decref(in);
    if (code)
        return error(s, c, status, code, code);
    return reply_json(s, c, 200, resp);
}

/* A form body decoded into at most 32 pairs (the sim's own decoder; the
 * gateway's requests are what payonce's src/channel/form.c wrote). */
struct sim_form {
    int n;
    char *k[32], *v[32];
};

static void sim_form_free(struct sim_form *f)
{
    for (int i = 0; i < f->n; i++) {
        free(f->k[i]);
        free(f->v[i]);
    }
    f->n = 0;
}

static char *sim_unescape(const char *s, size_t len)
{
    char *d = malloc(len + 1);
    size_t j = 0;
    for (size_t i = 0; d && i < len; i++) {
        unsigned hi, lo;
        if (s[i] == '+') {
            d[j++] = ' ';
        } else if (s[i] == '%' && i + 2 < len && sscanf(s + i + 1, "%1x%1x", &hi, &lo) == 2) {
            d[j++] = (char)(hi * 16 + lo);
            i += 2;
        } else if (s[i] == '%') {
            free(d);
            return NULL;
        } else {
            d[j++] = s[i];
        }
    }
    if (d)
        d[j] = '\0';
    return d;
}

static bool sim_form_parse(const char *body, struct sim_form *f)
{
    for (const char *p = body; *p && f->n < 32;) {
        size_t len = strcspn(p, "&");
        const char *eq = memchr(p, '=', len);
        if (!eq)
            return false;
        f->k[f->n] = sim_unescape(p, (size_t)(eq - p));
        f->v[f->n] = sim_unescape(eq + 1, (size_t)(p + len - eq - 1));
        if (!f->k[f->n] || !f->v[f->n]) {
            free(f->k[f->n]);
            free(f->v[f->n]);
            return false;
        }
        f->n++;
        p += len + (p[len] == '&');
    }
    return f->n > 0;
}

static const char *sim_form_get(const struct sim_form *f, const char *k)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->k[i], k) == 0)
            return f->v[i];
    return "";
}

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
static enum MHD_Result alipay_reply(struct po_sim_server *s, struct MHD_Connection *c,
                                    const char *node, json_t *inner)
{
    char *text = inner ? json_dumps(inner, JSON_COMPACT) : NULL;
    json_decref(inner);
    char *body = text ? po_sim_alipay_response(s->id.ali_key, node, text) : NULL;
    free(text);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(body ? strlen(body) : 2, body ? body : (void *)"{}",
                                        body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/html;charset=utf-8");
    enum MHD_Result ok = MHD_queue_response(c, body ? 200 : 500, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result alipay_error(struct po_sim_server *s, struct MHD_Connection *c,
                                    const char *node, const char *code, const char *sub_code,
                                    const char *sub_msg)
{
    const char *msg = strcmp(code, "40004") == 0   ? "Business Failed"
                      : strcmp(code, "40002") == 0 ? "Invalid Arguments"
                                                   : "Service Currently Unavailable";
    return alipay_reply(s, c, node,
                        json_pack("{s:s, s:s, s:s, s:s}", "code", code, "msg", msg, "sub_code",
                                  sub_code, "sub_msg", sub_msg));
}

/* POST /gateway.do, method alipay.trade.refund: the request must be signed
 * RSA2 with the app's key (the simulator's merchant key pair stands for
 * it); refunds are idempotent on (out_trade_no, out_request_no), as
 * Alipay's; the result is notified to the request's notify_url as a
 * trade_status_sync form (TRADE_CLOSED when fully refunded). */
static enum MHD_Result alipay_gateway(struct po_sim_server *s, struct MHD_Connection *c,
                                      struct req *q)
{
    static const char node[] = "alipay_trade_refund_response";
    struct sim_form f = {0};
    if (!q->body.data || !sim_form_parse(q->body.data, &f)) {
        sim_form_free(&f);
        return alipay_error(s, c, "error_response", "40002", "isv.invalid-parameter",
                            "参数无效");
    }
    const char *keys[32], *vals[32];
    for (int i = 0; i < f.n; i++)
        keys[i] = f.k[i], vals[i] = f.v[i];
    enum MHD_Result ret;
    json_t *biz = json_loads(sim_form_get(&f, "biz_content"), 0, NULL);
    const char *out_trade_no = js(biz, "out_trade_no"), *out_request_no = js(biz, "out_request_no");
    const char *notify_url = sim_form_get(&f, "notify_url");
    int64_t want = sim_fen(js(biz, "refund_amount"));
    if (strcmp(sim_form_get(&f, "method"), "alipay.trade.refund") != 0) {
        ret = alipay_error(s, c, "error_response", "40002", "isv.invalid-method", "不存在的方法名");
    } else if (strcmp(sim_form_get(&f, "app_id"), s->id.app_id) != 0) {
        ret = alipay_error(s, c, node, "40002", "isv.invalid-app-id", "无效的AppID参数");
    } else if (!po_sim_alipay_verify(s->id.merchant_pub, keys, vals, f.n)) {
        ret = alipay_error(s, c, node, "40002", "isv.invalid-signature", "验签出错");
    } else if (!po_id_valid(out_trade_no, 64) || !po_id_valid(out_request_no, 64) || want <= 0 ||
               strlen(notify_url) >= 500) {
        ret = alipay_error(s, c, node, "40002", "isv.missing-parameter",
                           "out_trade_no, out_request_no, refund_amount");
    } else {
        pthread_mutex_lock(&s->mu);
        json_t *payments = read_jsonl(s->dir, "payments.jsonl");
        json_t *refunds = read_jsonl(s->dir, "refunds.jsonl");
        json_t *p = find_payment(payments, "alipay", "out_trade_no", out_trade_no), *r;
        json_t *existing = NULL;
        json_int_t already = 0;
        size_t i;
        json_array_foreach(refunds, i, r) {
            if (!refund_of(r, "alipay") || strcmp(js(r, "out_trade_no"), out_trade_no) != 0)
                continue;
            already += ji(r, "amount");
            if (strcmp(js(r, "out_refund_no"), out_request_no) == 0)
                existing = r;
        }
        char refund_id[40] = "", when[32], fee[32], txn[65];
        const char *sub = NULL;
        bool notify = false;
        json_int_t total = ji(p, "amount");
        (void)snprintf(txn, sizeof txn, "%s", js(p, "txn"));
        beijing_now(when, sizeof when);
        if (!p) {
            sub = "ACQ.TRADE_NOT_EXIST";
        } else if (existing) {
            /* The same request again: the same refund, no money moves. */
            (void)snprintf(when, sizeof when, "%s", js(existing, "time"));
        } else if (already + want > total) {
            sub = "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL";
        } else {
            new_id("2088", refund_id, sizeof refund_id);
            json_t *rec = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "channel",
                                    "alipay", "out_trade_no", out_trade_no, "txn", txn,
                                    "out_refund_no", out_request_no, "refund_id", refund_id,
                                    "amount", (json_int_t)want, "total", total, "time", when);
            append_jsonl(s->dir, "refunds.jsonl", rec);
            json_decref(rec);
            already += want;
            notify = *notify_url != '\0';
        }
        pthread_mutex_unlock(&s->mu);
        json_decref(payments);
        json_decref(refunds);
        yuan(already, fee, sizeof fee);
        if (notify)
            start_refund_job(s, notify_url, "alipay", out_trade_no, txn, out_request_no, refund_id,
                             already, total); /* refund_fee: the refunded total */
        if (sub)
            ret = alipay_error(s, c, node, "40004", sub,
                               strcmp(sub, "ACQ.TRADE_NOT_EXIST") == 0 ? "交易不存在"
                                                                      : "退款金额超限");
        else
            ret = alipay_reply(
                s, c, node,
                json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "code", "10000", "msg",
                          "Success", "trade_no", txn, "out_trade_no", out_trade_no,
                          "buyer_logon_id", "pay***@example.com", "fund_change",
                          existing ? "N" : "Y", "refund_fee", fee, "gmt_refund_pay", when));
    }
    json_decref(biz);
    sim_form_free(&f);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
    (void)version;
    struct po_sim_server *s = cls;
    struct req *q = *req_cls;
    if (!q) {
        *req_cls = calloc(1, sizeof *q);
        return *req_cls ? MHD_YES : MHD_NO;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        return po_body_append(&q->body, upload_data, n, PO_BODY_MAX) ? MHD_NO : MHD_YES;
    }
    if (q->body.too_large)
        return error(s, c, 413, "PARAM_ERROR", "body too large");
    static const char qpath[] = "/v3/pay/transactions/out-trade-no/";
    if (strcmp(method, "GET") == 0 && strncmp(url, qpath, sizeof qpath - 1) == 0 &&
        po_id_valid(url + sizeof qpath - 1, 64))
        return query_order(s, c, url + sizeof qpath - 1);
    if (strcmp(method, "GET") == 0 && strcmp(url, "/v3/bill/tradebill") == 0)
        return trade_bill(s, c);
    if (strcmp(method, "GET") == 0 && strcmp(url, "/v3/billdownload/file") == 0)
        return bill_download(s, c);
    if (strcmp(method, "POST") == 0 && strcmp(url, "/v3/refund/domestic/refunds") == 0)
        return refund(s, c, q);
    if (strcmp(method, "POST") == 0 && strcmp(url, "/gateway.do") == 0)
        return alipay_gateway(s, c, q);
    return error(s, c, 404, "NOT_FOUND", "no such API in the simulator");
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct req *q = *req_cls;
    if (q)
        po_body_free(&q->body);
    free(q);
    *req_cls = NULL;
}

po_err po_sim_server_start(const struct po_sim_server_cfg *cfg, struct po_sim_server **out,
                           char *err, size_t errcap)
{
    const char *colon = strrchr(cfg->listen ? cfg->listen : "", ':');
    int64_t port = 0;
    if (!colon || po_parse_i64(colon + 1, 0, 65535, &port) ||
        strncmp(cfg->listen, "127.0.0.1:", 10) != 0) {
        po_errf(err, errcap, "--listen must be 127.0.0.1:PORT (the simulator stays on loopback)");
        return PO_ERR_INVALID;
    }
    struct po_sim_server *s = calloc(1, sizeof *s);
    if (!s)
        return PO_ERR_NOMEM;
    po_err rc = po_sim_identity_load(cfg->dir, &s->id, err, errcap);
    if (rc) {
        free(s);
        return rc;
    }
    (void)snprintf(s->dir, sizeof s->dir, "%s", cfg->dir);
    s->time_factor = cfg->time_factor >= 1 ? cfg->time_factor : 1;
    s->refund_delay_ms = cfg->refund_delay_ms;
    pthread_mutex_init(&s->mu, NULL);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    s->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                                     MHD_USE_POLL,
                                 0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
                                 (struct sockaddr *)&a, MHD_OPTION_CONNECTION_LIMIT, 64u,
                                 MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_NOTIFY_COMPLETED,
                                 on_completed, s, MHD_OPTION_END);
    if (!s->daemon) {
        po_errf(err, errcap, "cannot listen on %s", cfg->listen);
        po_sim_identity_free(&s->id);
        free(s);
        return PO_ERR_IO;
    }
    *out = s;
    return PO_OK;
}

unsigned po_sim_server_port(const struct po_sim_server *s)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return i ? i->port : 0;
}

void po_sim_server_stop(struct po_sim_server *s)
{
    if (!s)
        return;
    MHD_stop_daemon(s->daemon);
    /* Let refund notifications under way finish (bounded: 30 s). */
    atomic_store(&s->stopping, true);
    for (int i = 0; i < 3000 && atomic_load(&s->jobs) > 0; i++) {
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&s->jobs) > 0)
        return; /* leak rather than free under a running thread */
    pthread_mutex_destroy(&s->mu);
    po_sim_identity_free(&s->id);
    free(s);
}
