/*
 * test_sim_api.c BACKEND PAYONCE — the simulated channel's own APIs, with a
 * real payonce gateway behind them (both in-process, on loopback):
 *   order query: a lost payment is SUCCESS at the channel; the response is
 *     signed with the platform key; unknown orders are ORDER_NOT_EXIST
 *   trade bill: SHA1 hash and download URL; the file is WeChat's format
 *     (BOM, 27 backtick-prefixed columns, CRLF, summary agreeing with rows)
 *   refund: a request signed with the merchant key is accepted PROCESSING and
 *     the refund-result callback moves payonce's refund to SUCCESS once; the
 *     same out_refund_no again is the same refund; a bad signature and an
 *     over-refund are refused
 *   the simulator as strict as WeChat Pay (issue 43): a request without
 *     User-Agent or Accept is refused 400 INVALID_REQUEST "Http头缺少Accept或
 *     User-Agent" — also one payonce would send otherwise; an unsigned one
 *     401 SIGN_ERROR; each request model's rule broken is 400 PARAM_ERROR
 *     naming the field; the answers carry every member of the answer
 *     models; the query by transaction id; a configured rate limit is 429
 *     FREQUENCY_LIMITED; a DIR/faults line's error code is answered
 */
#include "../../src/http/http.h"
#include "../../src/sim/sim.h"
#include "../support/simenv.h"
#include "../support/testutil.h"

#include <limits.h>
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char dir[256], url[T_URL_MAX], bin[PATH_MAX];
static unsigned sim_port, gw_port;

static void die(const char *m)
{
    fprintf(stderr, "test_sim_api: %s\n", m);
    exit(1);
}

#define run(...) t_cli(dir, bin, url, NULL, 0, __VA_ARGS__)

struct resp {
    long status;
    char body[65536];
    size_t len;
    char sig[512], ts[32], nonce[64];
};

static size_t on_header(char *d, size_t sz, size_t n, void *ctx)
{
    struct resp *r = ctx;
    size_t len = sz * n;
    struct {
        const char *name;
        char *dst;
        size_t cap;
    } h[] = {{"Wechatpay-Signature: ", r->sig, sizeof r->sig},
             {"Wechatpay-Timestamp: ", r->ts, sizeof r->ts},
             {"Wechatpay-Nonce: ", r->nonce, sizeof r->nonce}};
    for (size_t i = 0; i < 3; i++) {
        size_t nl = strlen(h[i].name);
        if (len > nl && strncasecmp(d, h[i].name, nl) == 0) {
            size_t v = len - nl;
            while (v && (d[nl + v - 1] == '\r' || d[nl + v - 1] == '\n'))
                v--;
            if (v < h[i].cap) {
                memcpy(h[i].dst, d + nl, v);
                h[i].dst[v] = '\0';
            }
        }
    }
    return len;
}

/* What a client of WeChat Pay's API sends besides its Authorization
 * (payonce's User-Agent, as api_http.c writes it; Accept), unless told to
 * leave one out. */
enum { NO_UA = 1, NO_ACCEPT = 2 };

static void http_with(const char *method, const char *u, const char *body, const char *auth,
                      unsigned leave_out, struct resp *r)
{
    memset(r, 0, sizeof *r);
    /* libcurl sends no User-Agent of its own; "Accept:" removes its */
    const char *lines[5] = {"Content-Type: application/json",
                            leave_out & NO_ACCEPT ? "Accept:" : "Accept: application/json",
                            leave_out & NO_UA ? NULL : "User-Agent: payonce/test curl (Linux)",
                            NULL, NULL};
    lines[leave_out & NO_UA ? 2 : 3] = auth;
    struct t_http_req q = {.method = method,
                           .url = u,
                           .headers = lines,
                           .body = strcmp(method, "POST") == 0 ? body : NULL,
                           .timeout_s = 20,
                           .on_header = on_header,
                           .header_ctx = r};
    r->status = t_http(&q, r->body, sizeof r->body, &r->len);
}

static void http(const char *method, const char *u, const char *body, const char *auth,
                 struct resp *r)
{
    http_with(method, u, body, auth, 0, r);
}

/* The response's Wechatpay-Signature verifies with the platform certificate. */
static bool signed_by_platform(const struct resp *r)
{
    char path[512], *pem = NULL, serial[PO_SERIAL_MAX + 1];
    size_t len = 0;
    struct po_pubkey *k = NULL;
    snprintf(path, sizeof path, "%s/sim/wechatpay_platform_cert.pem", dir);
    if (po_file_read(path, 1 << 16, &pem, &len) ||
        po_pubkey_from_pem(pem, len, &k, serial, sizeof serial, NULL, 0))
        die("platform cert");
    free(pem);
    char *msg = malloc(strlen(r->ts) + strlen(r->nonce) + r->len + 4);
    sprintf(msg, "%s\n%s\n%s\n", r->ts, r->nonce, r->body); /* lint-ok: sized above */
    unsigned char *raw = NULL;
    size_t raw_len = 0;
    bool ok = po_b64_decode(r->sig, strlen(r->sig), &raw, &raw_len) == PO_OK &&
              po_rsa_sha256_verify(k, msg, strlen(msg), raw, raw_len) == PO_OK;
    free(raw);
    free(msg);
    po_pubkey_free(k);
    return ok;
}

/* WECHATPAY2-SHA256-RSA2048 Authorization for a merchant API request:
 * method, target (path and query, as sent) and body. */
static void merchant_auth_of(const struct po_sim_identity *id, const char *method,
                             const char *target, const char *body, bool forge, char *out,
                             size_t cap)
{
    char path[512], *pem = NULL, *sig = NULL;
    size_t len = 0;
    struct po_privkey *k = NULL;
    snprintf(path, sizeof path, "%s/sim/merchant_private_key.pem", dir);
    if (forge ? po_privkey_generate(&k)
              : (po_file_read(path, 1 << 16, &pem, &len) || po_privkey_from_pem(pem, len, &k)))
        die("merchant key");
    free(pem);
    char ts[24], msg[8192];
    snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
    snprintf(msg, sizeof msg, "%s\n%s\n%s\nn0nce%s\n%s\n", method, target, ts, ts,
             body ? body : "");
    if (po_rsa_sha256_sign_b64(k, msg, strlen(msg), &sig))
        die("sign");
    snprintf(out, cap,
             "Authorization: WECHATPAY2-SHA256-RSA2048 mchid=\"%s\",nonce_str=\"n0nce%s\","
             "signature=\"%s\",timestamp=\"%s\",serial_no=\"%s\"",
             id->mchid, ts, sig, ts, id->merchant_serial);
    free(sig);
    po_privkey_free(k);
}

static void merchant_auth(const struct po_sim_identity *id, const char *body, bool forge, char *out,
                          size_t cap)
{
    merchant_auth_of(id, "POST", "/v3/refund/domestic/refunds", body, forge, out, cap);
}

/* A signed request to the simulator: target is the path and query. */
static void wx(const struct po_sim_identity *id, const char *method, const char *target,
               const char *body, unsigned leave_out, struct resp *r)
{
    char u[1024], auth[1200];
    snprintf(u, sizeof u, "http://127.0.0.1:%u%s", sim_port, target);
    merchant_auth_of(id, method, target, body, false, auth, sizeof auth);
    http_with(method, u, body, auth, leave_out, r);
}

/* Whether the JSON body has every member named (a/b for a nested one). */
static bool has_members(const char *body, const char *const *names, char *missing, size_t cap)
{
    json_t *j = json_loads(body, 0, NULL);
    bool all = j != NULL;
    missing[0] = '\0';
    for (size_t i = 0; all && names[i]; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s", names[i]);
        char *slash = strchr(name, '/');
        if (slash)
            *slash = '\0';
        json_t *v = json_object_get(j, name);
        if (slash)
            v = json_object_get(v, slash + 1);
        if (!v) {
            all = false;
            snprintf(missing, cap, "%s", names[i]);
        }
    }
    json_decref(j);
    return all;
}

static int64_t count(const char *sql)
{
    struct po_store *s = t_open(url);
    int64_t n = t_count(s, sql, NULL, 0);
    po_store_close(s);
    return n;
}

static void test_query(const struct po_sim_identity *id)
{
    char u[512];
    struct resp r;
    snprintf(u, sizeof u, "/v3/pay/transactions/out-trade-no/QRY-0001?mchid=%s", id->mchid);
    wx(id, "GET", u, NULL, 0, &r);
    json_t *j = json_loads(r.body, 0, NULL);
    T_CHECK(r.status == 200, "query lost payment: %ld %s", r.status, r.body);
    T_CHECK(strcmp(json_string_value(json_object_get(j, "trade_state")) ?: "", "SUCCESS") == 0,
            "query: trade_state %s", r.body);
    T_CHECK(json_integer_value(json_object_get(json_object_get(j, "amount"), "total")) == 1280,
            "query: amount %s", r.body);
    T_CHECK(strncmp(json_string_value(json_object_get(j, "transaction_id")) ?: "", "4200", 4) == 0,
            "query: transaction_id %s", r.body);
    T_CHECK(signed_by_platform(&r), "query: response not signed by the platform key");
    /* the answer model's members (查询订单, 应答参数) */
    static const char *const paid[] = {"appid",
                                       "mchid",
                                       "out_trade_no",
                                       "transaction_id",
                                       "trade_type",
                                       "trade_state",
                                       "trade_state_desc",
                                       "bank_type",
                                       "success_time",
                                       "payer/openid",
                                       "amount/total",
                                       "amount/payer_total",
                                       "amount/currency",
                                       "amount/payer_currency",
                                       NULL};
    char missing[64];
    T_CHECK(has_members(r.body, paid, missing, sizeof missing), "query: no %s in %s", missing,
            r.body);
    /* the same payment by its transaction id */
    char txn[64];
    static char first[sizeof r.body];
    snprintf(txn, sizeof txn, "%s", json_string_value(json_object_get(j, "transaction_id")) ?: "");
    snprintf(first, sizeof first, "%s", r.body);
    json_decref(j);
    snprintf(u, sizeof u, "/v3/pay/transactions/id/%s?mchid=%s", txn, id->mchid);
    wx(id, "GET", u, NULL, 0, &r);
    T_CHECK(r.status == 200 && strcmp(r.body, first) == 0 && signed_by_platform(&r),
            "query by transaction id: %ld %s", r.status, r.body);
    snprintf(u, sizeof u, "/v3/pay/transactions/id/4200000000000000000000000000?mchid=%s",
             id->mchid);
    wx(id, "GET", u, NULL, 0, &r);
    T_CHECK(r.status == 404 && strstr(r.body, "ORDER_NOT_EXIST"), "query unknown id: %ld %s",
            r.status, r.body);
    snprintf(u, sizeof u, "/v3/pay/transactions/out-trade-no/NOPE-0001?mchid=%s", id->mchid);
    wx(id, "GET", u, NULL, 0, &r);
    T_CHECK(r.status == 404 && strstr(r.body, "ORDER_NOT_EXIST"), "query unknown: %ld %s", r.status,
            r.body);
    wx(id, "GET", "/v3/pay/transactions/out-trade-no/QRY-0001?mchid=1", NULL, 0, &r);
    T_CHECK(r.status == 400 && strstr(r.body, "MCH_NOT_EXISTS"), "query other mchid: %ld %s",
            r.status, r.body);
}

static void test_bill(const struct po_sim_identity *id)
{
    char u[512], date[16];
    time_t t = time(NULL) + 8 * 3600; /* bills are dated in Beijing time */
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(date, sizeof date, "%Y-%m-%d", &tm);
    struct resp r;
    snprintf(u, sizeof u, "/v3/bill/tradebill?bill_date=%s&bill_type=ALL", date);
    wx(id, "GET", u, NULL, 0, &r);
    json_t *j = json_loads(r.body, 0, NULL);
    const char *dl = json_string_value(json_object_get(j, "download_url"));
    const char *hash = json_string_value(json_object_get(j, "hash_value"));
    T_CHECK(r.status == 200 && dl && hash && json_object_get(j, "hash_type"), "tradebill: %ld %s",
            r.status, r.body);
    char want[41] = "", target[512] = "";
    if (hash)
        snprintf(want, sizeof want, "%s", hash);
    if (dl && strstr(dl, "/v3/"))
        snprintf(target, sizeof target, "%s", strstr(dl, "/v3/"));
    struct resp *f = malloc(sizeof *f);
    wx(id, "GET", target, NULL, 0, f);
    json_decref(j);
    char got[41] = "";
    T_CHECK(po_sha1_hex(f->body, f->len, got) == PO_OK, "bill download: sha1");
    T_CHECK(f->status == 200 && strcmp(got, want) == 0, "bill download: %ld, sha1 %s vs %s",
            f->status, got, want);
    T_CHECK(memcmp(f->body, "\xef\xbb\xbf", 3) == 0, "bill: no UTF-8 BOM");
    int rows = 0, bad = 0, lines = 0;
    for (char *save = NULL, *line = strtok_r(f->body, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save), lines++) {
        size_t n = strlen(line);
        if (!n || line[n - 1] != '\r')
            bad++; /* CRLF */
        if (line[0] == '`' && strstr(line, ",`SUCCESS,")) {
            int fields = 1;
            for (char *p = line; *p; p++)
                fields += *p == ',';
            rows++;
            if (fields != 27)
                bad++;
        }
    }
    T_CHECK(rows == 2 && bad == 0, "bill: %d payment rows, %d malformed lines", rows, bad);
    free(f);
    /* The summary agrees: 2 orders, 12.80 + 5.00. */
    snprintf(u, sizeof u, "/v3/billdownload/file?token=%s_ALL", date);
    f = malloc(sizeof *f);
    wx(id, "GET", u, NULL, 0, f);
    T_CHECK(strstr(f->body, "\r\n`2,`17.80,`0.00,`0.00,`0.11,`17.80,`0.00\r\n") != NULL,
            "bill summary: %s", strrchr(f->body, '\n') ? f->body + f->len - 60 : f->body);
    free(f);
    /* the download is the merchant's too: unsigned, refused */
    snprintf(u, sizeof u, "http://127.0.0.1:%u/v3/billdownload/file?token=%s_ALL", sim_port, date);
    f = malloc(sizeof *f);
    http("GET", u, NULL, NULL, f);
    T_CHECK(f->status == 401 && strstr(f->body, "SIGN_ERROR"), "unsigned bill download: %ld %s",
            f->status, f->body);
    free(f);
}

static void test_refund(const struct po_sim_identity *id)
{
    char u[512], body[1024], auth[1200];
    struct resp r;
    run("refund create --tenant t1 --out-trade-no QRY-0002 --out-refund-no R-2 --amount 200");
    snprintf(u, sizeof u, "http://127.0.0.1:%u/v3/refund/domestic/refunds", sim_port);
    snprintf(body, sizeof body,
             "{\"out_trade_no\":\"QRY-0002\",\"out_refund_no\":\"R-2\",\"reason\":\"test\","
             "\"notify_url\":\"http://127.0.0.1:%u/notify/wechatpay/t1\","
             "\"amount\":{\"refund\":200,\"total\":500,\"currency\":\"CNY\"}}",
             gw_port);
    merchant_auth(id, body, true, auth, sizeof auth);
    http("POST", u, body, auth, &r);
    T_CHECK(r.status == 401 && strstr(r.body, "SIGN_ERROR"), "forged refund request: %ld %s",
            r.status, r.body);
    merchant_auth(id, body, false, auth, sizeof auth);
    http("POST", u, body, auth, &r);
    json_t *j = json_loads(r.body, 0, NULL);
    char refund_id[64] = "";
    snprintf(refund_id, sizeof refund_id, "%s",
             json_string_value(json_object_get(j, "refund_id")) ?: "");
    T_CHECK(r.status == 200 && strstr(r.body, "\"status\":\"PROCESSING\"") && refund_id[0],
            "refund request: %ld %s", r.status, r.body);
    json_decref(j);
    /* the answer model's members (申请退款, 应答参数) */
    static const char *const model[] = {"refund_id",
                                        "out_refund_no",
                                        "transaction_id",
                                        "out_trade_no",
                                        "channel",
                                        "user_received_account",
                                        "create_time",
                                        "status",
                                        "funds_account",
                                        "amount/total",
                                        "amount/refund",
                                        "amount/payer_total",
                                        "amount/payer_refund",
                                        "amount/settlement_refund",
                                        "amount/settlement_total",
                                        "amount/discount_refund",
                                        "amount/currency",
                                        "promotion_detail",
                                        NULL};
    char missing[64];
    T_CHECK(has_members(r.body, model, missing, sizeof missing), "refund: no %s in %s", missing,
            r.body);
    /* The same request again: the same refund, no second one. */
    http("POST", u, body, auth, &r);
    T_CHECK(r.status == 200 && strstr(r.body, refund_id), "repeated refund request: %s", r.body);
    /* Wait for the refund-result callback to reach payonce. */
    for (int i = 0; i < 100 && count("SELECT COUNT(*) FROM refund WHERE status = 'SUCCESS'") == 0;
         i++)
        usleep(100000);
    T_CHECK(
        count("SELECT COUNT(*) FROM refund WHERE status = 'SUCCESS' AND out_refund_no = 'R-2'") ==
            1,
        "the refund callback did not complete R-2");
    T_CHECK(count("SELECT COUNT(*) FROM journal WHERE kind = 'REFUND'") == 1, "refund journals");
    /* More than what is left of the payment. */
    snprintf(body, sizeof body,
             "{\"out_trade_no\":\"QRY-0002\",\"out_refund_no\":\"R-3\",\"notify_url\":\"http://"
             "127.0.0.1:1/x\","
             "\"amount\":{\"refund\":400,\"total\":500,\"currency\":\"CNY\"}}");
    merchant_auth(id, body, false, auth, sizeof auth);
    http("POST", u, body, auth, &r);
    T_CHECK(r.status == 400 && strstr(r.body, "INVALID_REQUEST") && strstr(r.body, "可退金额"),
            "over-refund: %ld %s", r.status, r.body);
    /* the refund as the query has it: SUCCESS, with success_time */
    wx(id, "GET", "/v3/refund/domestic/refunds/R-2", NULL, 0, &r);
    T_CHECK(r.status == 200 && has_members(r.body, model, missing, sizeof missing) &&
                strstr(r.body, "\"success_time\"") && strstr(r.body, "\"status\":\"SUCCESS\"") &&
                signed_by_platform(&r),
            "refund query: %ld %s (no %s)", r.status, r.body, missing);
    char path[512], *lines = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/sim/refunds.jsonl", dir);
    if (po_file_read(path, 1 << 20, &lines, &len))
        die("refunds.jsonl");
    int n = 0;
    for (char *p = lines; (p = strchr(p, '\n')); p++)
        n++;
    T_CHECK(n == 1, "the simulator recorded %d refunds, expected 1", n);
    free(lines);
}

/* ---- the simulator as strict as WeChat Pay (issue 43) ---- */

static void sim_file(const char *name, const char *content)
{
    t_sim_file(dir, name, content);
}

static int sim_lines(const char *name)
{
    char path[512], *all = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/sim/%s", dir, name);
    if (po_file_read(path, 1 << 22, &all, &len))
        return 0;
    int n = 0;
    for (size_t i = 0; i < len; i++)
        n += all[i] == '\n';
    free(all);
    return n;
}

/* DIR/name's text (at most cap - 1 bytes; "" when there is none). */
static void sim_text(const char *name, char *out, size_t cap)
{
    char path[512], *all = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/sim/%s", dir, name);
    out[0] = '\0';
    if (po_file_read(path, 1 << 22, &all, &len))
        return;
    snprintf(out, cap, "%.*s", (int)len, all);
    free(all);
}

/* The answer is WeChat Pay's error: status, code, and (when given) the
 * field its detail names; signed by the platform like every answer. */
static bool wx_refused(const struct resp *r, long status, const char *code, const char *field)
{
    json_t *j = json_loads(r->body, 0, NULL);
    const char *c = json_string_value(json_object_get(j, "code"));
    const char *f = json_string_value(json_object_get(json_object_get(j, "detail"), "field"));
    const char *m = json_string_value(json_object_get(j, "message"));
    bool ok = r->status == status && c && strcmp(c, code) == 0 && m && *m &&
              (!field || (f && strcmp(f, field) == 0 && strstr(m, field))) && signed_by_platform(r);
    json_decref(j);
    return ok;
}

static void test_strict(const struct po_sim_identity *id)
{
    struct resp r;
    char q[256];
    snprintf(q, sizeof q, "/v3/pay/transactions/out-trade-no/QRY-0001?mchid=%s", id->mchid);
    /* 接口规则: without User-Agent or Accept, WeChat Pay's own answer —
     * the request otherwise exactly as payonce sends it (signed) */
    static const struct {
        unsigned leave_out;
        const char *what;
    } heads[] = {{NO_UA, "User-Agent"}, {NO_ACCEPT, "Accept"}, {NO_UA | NO_ACCEPT, "both"}};
    for (size_t i = 0; i < PO_NELEM(heads); i++) {
        wx(id, "GET", q, NULL, heads[i].leave_out, &r);
        json_t *j = json_loads(r.body, 0, NULL);
        T_CHECK(r.status == 400 && json_object_size(j) == 2 &&
                    strcmp(json_string_value(json_object_get(j, "code")) ?: "",
                           "INVALID_REQUEST") == 0 &&
                    strcmp(json_string_value(json_object_get(j, "message")) ?: "",
                           "Http头缺少Accept或User-Agent") == 0 &&
                    signed_by_platform(&r),
                "a query without %s: %ld %s", heads[i].what, r.status, r.body);
        json_decref(j);
    }
    wx(id, "GET", q, NULL, 0, &r);
    T_CHECK(r.status == 200, "the same query with both: %ld %s", r.status, r.body);
    char body[1024], auth[1200], u[512];
    snprintf(body, sizeof body,
             "{\"out_trade_no\":\"QRY-0002\",\"out_refund_no\":\"R-UA\",\"amount\":{\"refund\":1,"
             "\"total\":500,\"currency\":\"CNY\"}}");
    wx(id, "POST", "/v3/refund/domestic/refunds", body, NO_UA, &r);
    T_CHECK(wx_refused(&r, 400, "INVALID_REQUEST", NULL) && sim_lines("refunds.jsonl") == 1,
            "a refund without User-Agent: %ld %s", r.status, r.body);
    /* the Authorization: none, or over the path without its query */
    snprintf(u, sizeof u, "http://127.0.0.1:%u%s", sim_port, q);
    http("GET", u, NULL, NULL, &r);
    T_CHECK(wx_refused(&r, 401, "SIGN_ERROR", NULL), "an unsigned query: %ld %s", r.status, r.body);
    merchant_auth_of(id, "GET", "/v3/pay/transactions/out-trade-no/QRY-0001", NULL, false, auth,
                     sizeof auth);
    http("GET", u, NULL, auth, &r);
    T_CHECK(wx_refused(&r, 401, "SIGN_ERROR", NULL), "a query signed without its query: %ld %s",
            r.status, r.body);
    /* the prepay's request model: each rule broken is PARAM_ERROR naming
     * the member, nothing created */
    static const char native[] =
        "{\"appid\":\"%s\",\"mchid\":\"%s\",\"description\":\"%s\",\"out_trade_no\":\"%s\","
        "\"notify_url\":\"%s\",\"amount\":{\"total\":%s,\"currency\":\"%s\"}%s}";
    char d128[129], a129[160];
    memset(d128, 'd', 128);
    d128[128] = '\0';
    snprintf(a129, sizeof a129, ",\"attach\":\"%0129d\"", 0);
    static const char *ok_url = "https://shop.example/notify";
    struct {
        const char *kind, *desc, *no, *url, *total, *cur, *extra;
        long status;
        const char *code, *field;
    } cases[] = {
        {"native", "x", "SHORT", ok_url, "1", "CNY", "", 400, "PARAM_ERROR", "/out_trade_no"},
        {"native", "x", "PRE#0001", ok_url, "1", "CNY", "", 400, "PARAM_ERROR", "/out_trade_no"},
        {"native", "x", "P0123456789012345678901234567890123", ok_url, "1", "CNY", "", 400,
         "PARAM_ERROR", "/out_trade_no"},
        {"native", d128, "PRE-0001", ok_url, "1", "CNY", "", 400, "PARAM_ERROR", "/description"},
        {"native", "", "PRE-0001", ok_url, "1", "CNY", "", 400, "PARAM_ERROR", "/description"},
        {"native", "x", "PRE-0001", "http://shop.example/notify", "1", "CNY", "", 400,
         "PARAM_ERROR", "/notify_url"},
        {"native", "x", "PRE-0001", "https://shop.example/notify?order=1", "1", "CNY", "", 400,
         "PARAM_ERROR", "/notify_url"},
        {"native", "x", "PRE-0001", ok_url, "0", "CNY", "", 400, "PARAM_ERROR", "/amount/total"},
        {"native", "x", "PRE-0001", ok_url, "\"100\"", "CNY", "", 400, "PARAM_ERROR",
         "/amount/total"},
        {"native", "x", "PRE-0001", ok_url, "1.5", "CNY", "", 400, "PARAM_ERROR", "/amount/total"},
        {"native", "x", "PRE-0001", ok_url, "1", "USD", "", 400, "PARAM_ERROR", "/amount/currency"},
        {"native", "x", "PRE-0001", ok_url, "1", "CNY", ",\"time_expire\":\"tomorrow\"", 400,
         "PARAM_ERROR", "/time_expire"},
        {"native", "x", "PRE-0001", ok_url, "1", "CNY", a129, 400, "PARAM_ERROR", "/attach"},
        {"jsapi", "x", "PRE-0001", ok_url, "1", "CNY", "", 400, "PARAM_ERROR", "/payer"},
        {"jsapi", "x", "PRE-0001", ok_url, "1", "CNY", ",\"payer\":{}", 400, "PARAM_ERROR",
         "/payer/openid"},
        {"h5", "x", "PRE-0001", ok_url, "1", "CNY", "", 400, "PARAM_ERROR", "/scene_info"},
        {"h5", "x", "PRE-0001", ok_url, "1", "CNY",
         ",\"scene_info\":{\"payer_client_ip\":\"203.0.113.7\"}", 400, "PARAM_ERROR",
         "/scene_info/h5_info"},
        {"h5", "x", "PRE-0001", ok_url, "1", "CNY",
         ",\"scene_info\":{\"payer_client_ip\":\"203.0.113.7\",\"h5_info\":{\"type\":\"Web\"}}",
         400, "PARAM_ERROR", "/scene_info/h5_info/type"},
        /* a loopback http:// notify_url is taken (the tests' and the demo's) */
        {"native", "x", "PRE-0001", "http://127.0.0.1:9/notify/wechatpay/t1", "1", "CNY", "", 200,
         NULL, NULL},
        {"h5", "x", "PRE-0002", ok_url, "1", "CNY",
         ",\"scene_info\":{\"payer_client_ip\":\"203.0.113.7\",\"h5_info\":{\"type\":\"Wap\"}}",
         200, NULL, NULL},
    };
    for (size_t i = 0; i < PO_NELEM(cases); i++) {
        char b[2048], path[64];
        snprintf(b, sizeof b, native, id->appid, id->mchid, cases[i].desc, cases[i].no,
                 cases[i].url, cases[i].total, cases[i].cur, cases[i].extra);
        snprintf(path, sizeof path, "/v3/pay/transactions/%s", cases[i].kind);
        int made = sim_lines("created.jsonl");
        wx(id, "POST", path, b, 0, &r);
        bool good = cases[i].code
                        ? wx_refused(&r, cases[i].status, cases[i].code, cases[i].field) &&
                              sim_lines("created.jsonl") == made
                        : r.status == 200 && sim_lines("created.jsonl") == made + 1;
        T_CHECK(good, "prepay case %zu (%s %s): %ld %s", i, cases[i].kind,
                cases[i].field ? cases[i].field : "valid", r.status, r.body);
    }
    snprintf(body, sizeof body, native, "wxother0000000000", id->mchid, "x", "PRE-0003", ok_url,
             "1", "CNY", "");
    wx(id, "POST", "/v3/pay/transactions/native", body, 0, &r);
    T_CHECK(wx_refused(&r, 400, "APPID_MCHID_NOT_MATCH", NULL), "another appid: %ld %s", r.status,
            r.body);
    /* out_trade_no in the query's and the close's path; close's body */
    snprintf(u, sizeof u, "/v3/pay/transactions/out-trade-no/AB-1?mchid=%s", id->mchid);
    wx(id, "GET", u, NULL, 0, &r);
    T_CHECK(wx_refused(&r, 400, "PARAM_ERROR", "/out_trade_no") && strstr(r.body, "\"path\""),
            "query of a 4-character order number: %ld %s", r.status, r.body);
    wx(id, "POST", "/v3/pay/transactions/out-trade-no/AB$12345/close", "{\"mchid\":\"1\"}", 0, &r);
    T_CHECK(wx_refused(&r, 400, "PARAM_ERROR", "/out_trade_no"),
            "close of an order number with '$': %ld %s", r.status, r.body);
    wx(id, "POST", "/v3/pay/transactions/out-trade-no/PRE-0001/close", "{}", 0, &r);
    T_CHECK(wx_refused(&r, 400, "PARAM_ERROR", "/mchid"), "close without mchid: %ld %s", r.status,
            r.body);
    /* the refund's request model */
    static const char *const refunds[][2] = {
        {"{\"out_refund_no\":\"R-P1\",\"amount\":{\"refund\":1,\"total\":500,\"currency\":"
         "\"CNY\"}}",
         "/out_trade_no"},
        {"{\"out_trade_no\":\"QRY-0002\",\"out_refund_no\":\"R P2\",\"amount\":{\"refund\":1,"
         "\"total\":500,\"currency\":\"CNY\"}}",
         "/out_refund_no"},
        {"{\"out_trade_no\":\"QRY-0002\",\"out_refund_no\":\"R-P3\",\"amount\":{\"refund\":1,"
         "\"total\":500}}",
         "/amount/currency"},
        {"{\"out_trade_no\":\"QRY-0002\",\"out_refund_no\":\"R-P4\",\"notify_url\":\"https://"
         "shop.example/r?x=1\",\"amount\":{\"refund\":1,\"total\":500,\"currency\":\"CNY\"}}",
         "/notify_url"},
        {"{\"out_trade_no\":\"QRY-0002\",\"out_refund_no\":\"R-P5\",\"amount\":{\"refund\":0,"
         "\"total\":500,\"currency\":\"CNY\"}}",
         "/amount/refund"},
    };
    for (size_t i = 0; i < PO_NELEM(refunds); i++) {
        wx(id, "POST", "/v3/refund/domestic/refunds", refunds[i][0], 0, &r);
        T_CHECK(wx_refused(&r, 400, "PARAM_ERROR", refunds[i][1]) &&
                    sim_lines("refunds.jsonl") == 1,
                "refund case %zu (%s): %ld %s", i, refunds[i][1], r.status, r.body);
    }
    /* a rate limit: at most one query a second, then 429 (three at once
     * span at most two seconds: one of them is over) */
    sim_file("wechatpay_rate_limit", "/v3/pay/transactions/out-trade-no/ 1\n");
    int limited = 0;
    for (int i = 0; i < 3; i++) {
        wx(id, "GET", q, NULL, 0, &r);
        limited += wx_refused(&r, 429, "FREQUENCY_LIMITED", NULL);
    }
    T_CHECK(limited >= 1 && limited <= 2, "rate limit 1/s: %d of 3 queries limited", limited);
    sim_file("wechatpay_rate_limit", "/v3/pay/transactions/out-trade-no/ 0 RATELIMIT_EXCEEDED\n");
    wx(id, "GET", q, NULL, 0, &r);
    T_CHECK(wx_refused(&r, 429, "RATELIMIT_EXCEEDED", NULL), "rate limit 0/s: %ld %s", r.status,
            r.body);
    sim_file("wechatpay_rate_limit", "");
    wx(id, "GET", q, NULL, 0, &r);
    T_CHECK(r.status == 200, "no rate limit: %ld %s", r.status, r.body);
    /* an error code a DIR/faults line names, once */
    sim_file("faults", "GET /v3/pay/transactions/out-trade-no/ 403 1 TRADE_ERROR\n");
    wx(id, "GET", q, NULL, 0, &r);
    T_CHECK(wx_refused(&r, 403, "TRADE_ERROR", NULL) && strstr(r.body, "交易错误"),
            "a fault's code: %ld %s", r.status, r.body);
    wx(id, "GET", q, NULL, 0, &r);
    T_CHECK(r.status == 200, "the fault used: %ld %s", r.status, r.body);
    /* a fault keyed by the caller ("@MCHID …", issue 46): another
     * merchant's call leaves it (the simulator knows one merchant, so that
     * call is refused for its own reason, never with the fault), and the
     * merchant named takes it; a fault keyed for another merchant is not
     * taken by this merchant's served call */
    struct po_sim_identity other = *id;
    snprintf(other.mchid, sizeof other.mchid, "1900000999");
    char line[200], left[400];
    snprintf(line, sizeof line, "@%s GET /v3/pay/transactions/out-trade-no/ 403 1 TRADE_ERROR\n",
             id->mchid);
    sim_file("faults", line);
    wx(&other, "GET", q, NULL, 0, &r);
    sim_text("faults", left, sizeof left);
    T_CHECK(!wx_refused(&r, 403, "TRADE_ERROR", NULL) && strcmp(left, line) == 0,
            "merchant A's fault left by merchant B's call: %ld %s; faults now %s", r.status, r.body,
            left);
    wx(id, "GET", q, NULL, 0, &r);
    sim_text("faults", left, sizeof left);
    T_CHECK(wx_refused(&r, 403, "TRADE_ERROR", NULL) && strstr(left, " 403 0 TRADE_ERROR") &&
                strncmp(left, line, strlen(id->mchid) + 1) == 0,
            "merchant A's fault taken by A (its key kept): %ld %s; faults now %s", r.status, r.body,
            left);
    snprintf(line, sizeof line, "@%s GET /v3/pay/transactions/out-trade-no/ 403 1 TRADE_ERROR\n",
             other.mchid);
    sim_file("faults", line);
    wx(id, "GET", q, NULL, 0, &r);
    sim_text("faults", left, sizeof left);
    T_CHECK(r.status == 200 && strcmp(left, line) == 0,
            "merchant B's fault not taken by A's call: %ld %s; faults now %s", r.status, r.body,
            left);
    sim_file("faults", "");
}

/* The cases (cmocka), on the simulator's identity main made. */
static struct po_sim_identity sim_id;
static void case_query(void **state)
{
    (void)state;
    test_query(&sim_id);
}
static void case_bill(void **state)
{
    (void)state;
    test_bill(&sim_id);
}
static void case_refund(void **state)
{
    (void)state;
    test_refund(&sim_id);
}
static void case_strict(void **state)
{
    (void)state;
    test_strict(&sim_id);
}

int main(int argc, char **argv)
{
    const char *backend = t_backend(argc, argv);
    if (argc < 3 || !realpath(argv[2], bin))
        die("usage: test_sim_api BACKEND PAYONCE");
    po_log_set_level(PO_LOG_ERROR);
    unsigned char master[32];
    char sd[300], err[PO_ERRBUF_SIZE] = "";
    t_env_create("simapi", dir, sizeof dir, master, &sim_id);
    snprintf(sd, sizeof sd, "%s/sim", dir);
    t_db_create(backend, url, sizeof url);
    run("tenant add --tenant t1");
    run("merchant add --tenant t1 --merchant m1");
    run("channel set --tenant t1 --channel wechatpay --mchid %s --appid %s --apiv3-key-file "
        "sim/apiv3.key --platform-cert-file sim/wechatpay_platform_cert.pem",
        sim_id.mchid, sim_id.appid);
    run("order create --tenant t1 --merchant m1 --out-trade-no QRY-0001 --amount 1280");
    run("order create --tenant t1 --merchant m1 --out-trade-no QRY-0002 --amount 500");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct po_gateway_cfg gc;
    t_gateway_cfg(&gc, url, master);
    struct t_gateway *gw = t_gateway_start(&gc, NULL);
    struct po_sim_server_cfg sc = {sd, "127.0.0.1:0", 1000, 100};
    struct po_sim_server *sim = NULL;
    if (po_sim_server_start(&sc, &sim, err, sizeof err))
        die(err);
    gw_port = gw->port;
    sim_port = po_sim_server_port(sim);
    /* QRY-0001's payment is lost; QRY-0002's is delivered. */
    run("sim pay --dir sim --order QRY-0001:1280 --lose");
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "sim pay --dir sim --order QRY-0002:500 --notify-url "
             "http://127.0.0.1:%u/notify/wechatpay/t1",
             gw_port);
    run("%s", cmd);
    T_CHECK(count("SELECT COUNT(*) FROM pay_order WHERE status = 'PAID'") == 1,
            "QRY-0002 not paid");
    char name[64];
    snprintf(name, sizeof name, "sim-api[%s]", backend);
    const struct CMUnitTest tests[] = {cmocka_unit_test(case_query), cmocka_unit_test(case_bill),
                                       cmocka_unit_test(case_refund),
                                       cmocka_unit_test(case_strict)};
    int rc = T_RUN_GROUP(name, tests, NULL, NULL);
    po_sim_server_stop(sim);
    t_gateway_stop(gw);
    struct po_store *s = t_open(url);
    T_CHECK(t_verify(s) == 0, "verify");
    po_store_close(s);
    t_db_drop(url);
    po_sim_identity_free(&sim_id);
    curl_global_cleanup();
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) { /* lint-ok */
    }
    printf("# sim-api[%s] order query, trade bill, refund API and WeChat Pay's rules: %d checks\n",
           backend, t_passes);
    return rc || t_failures ? 1 : 0;
}
