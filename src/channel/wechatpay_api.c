/*
 * wechatpay_api.c — outbound calls to WeChat Pay API v3 (prepay Native /
 * JSAPI / H5, order query, close, refund, refund query, the trade bill and
 * its download, the platform certificates): the merchant's
 * WECHATPAY2-SHA256-RSA2048 Authorization over
 * "METHOD\nPATH\nTIMESTAMP\nNONCE\nBODY\n", a bounded response, and the
 * platform's response signature checked the same way as a callback's.
 * What each documented error answer decides is docs/channels.md, "Error
 * answers: WeChat Pay" (test_api's wechatpay_errors plays every row).
 */
#include "channel_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <zlib.h>

static const char *resp_header(void *ctx, const char *name)
{
    struct po_api_resp *r = ctx;
    if (strcasecmp(name, "Wechatpay-Serial") == 0)
        return r->serial;
    if (strcasecmp(name, "Wechatpay-Signature") == 0)
        return r->sig;
    if (strcasecmp(name, "Wechatpay-Timestamp") == 0)
        return r->ts;
    if (strcasecmp(name, "Wechatpay-Nonce") == 0)
        return r->nonce;
    return NULL;
}

/* "Authorization: WECHATPAY2-SHA256-RSA2048 …" for one request. */
static po_err authorization(const struct po_channel_account *a, const char *method,
                            const char *path, const char *body, char *out, size_t cap)
{
    out[0] = '\0';
    if (!a->merchant_key) /* never an unsigned request (issue 13 item 10) */
        return PO_ERR_INVALID;
    char ts[24], nonce[33], *sig = NULL;
    unsigned char rnd[16];
    po_err rc = po_random(rnd, sizeof rnd);
    if (rc)
        return rc;
    for (int i = 0; i < 16; i++)
        (void)snprintf(nonce + 2 * i, 3, "%02X", rnd[i]);
    (void)snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
    size_t mlen = strlen(method) + strlen(path) + strlen(ts) + strlen(nonce) + strlen(body) + 6;
    char *msg = malloc(mlen);
    if (!msg)
        return PO_ERR_NOMEM;
    (void)snprintf(msg, mlen, "%s\n%s\n%s\n%s\n%s\n", method, path, ts, nonce, body);
    rc = po_rsa_sha256_sign_b64(a->merchant_key, msg, strlen(msg), &sig);
    free(msg);
    if (!rc)
        rc = po_fmt(out, cap,
                    "Authorization: WECHATPAY2-SHA256-RSA2048 mchid=\"%s\",nonce_str=\"%s\","
                    "signature=\"%s\",timestamp=\"%s\",serial_no=\"%s\"",
                    po_wechatpay_of(a)->mchid, nonce, sig, ts, a->merchant_serial);
    free(sig);
    return rc;
}

po_err po_wechatpay_call(const struct po_channel_account *a, const char *method, const char *path,
                         const char *body, struct po_api_resp *out)
{
    memset(out, 0, sizeof *out);
    char url[512], auth[1400];
    po_err rc = po_fmt(url, sizeof url, "%s%s", a->api_base_url, path);
    if (!rc)
        rc = authorization(a, method, path, body ? body : "", auth, sizeof auth);
    if (rc)
        return rc;
    const char *h[3] = {"Accept: application/json", body ? "Content-Type: application/json" : NULL,
                        auth[0] ? auth : NULL};
    return po_api_request(url, h, 3, body, PO_API_RESP_MAX, out);
}

bool po_wechatpay_resp_signed(const struct po_channel_account *a, const struct po_api_resp *r,
                              char *reason, size_t cap)
{
    struct po_notify_req req = {r->body, r->len, resp_header, (void *)(uintptr_t)r,
                                (int64_t)time(NULL)};
    struct po_notify_result *vr = calloc(1, sizeof *vr);
    bool ok = false;
    if (vr && po_wechatpay_verify(a, &req, vr, &ok) == PO_OK && !ok && reason &&
        po_strcpy(reason, cap, po_reason_name(vr->reason)) != PO_OK)
        reason[0] = '\0';
    free(vr);
    return ok;
}

/* One call whose answer counts only when the platform signed it.
 * *status: the HTTP status, 0 when there was no answer (or the account
 * has no merchant key: nothing is sent unsigned); *is_signed; *j: a signed
 * answer's JSON body (NULL when empty or not JSON; caller json_decrefs);
 * why: what was wrong with the signature. Non-OK only for out-of-memory. */
struct signed_answer {
    long status;
    bool is_signed;
    json_t *j;
    char why[PO_REASON_SIZE]; /* status 0: po_api_why_none's, or no_merchant_key */
};

/* No merchant key: nothing is sent (never an unsigned request), and why
 * says no_merchant_key. */
static bool no_merchant_key(const struct po_channel_account *a, char *why, size_t cap)
{
    if (a->merchant_key)
        return false;
    (void)snprintf(why, cap, "no_merchant_key");
    return true;
}

/* The call every API function here makes: its path from fmt (asserted to
 * fit), body (NULL for a GET; a POST's NULL body is the caller's
 * out-of-memory), the answer in *out as above. Without a merchant key
 * nothing is sent and out->why says no_merchant_key (status 0, unsigned:
 * undecided() repeats it), before the body is looked at — an account
 * without one answers so even when building the body failed. Non-OK only
 * for out-of-memory. */
static po_err wx_call(const struct po_channel_account *a, const char *method, const char *body,
                      struct signed_answer *out, const char *fmt, ...) PO_PRINTF(5, 6);
static po_err wx_call(const struct po_channel_account *a, const char *method, const char *body,
                      struct signed_answer *out, const char *fmt, ...)
{
    memset(out, 0, sizeof *out);
    if (no_merchant_key(a, out->why, sizeof out->why))
        return PO_OK;
    if (!body && strcmp(method, "GET") != 0)
        return PO_ERR_NOMEM;
    char path[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    PO_ASSERT(n >= 0 && (size_t)n < sizeof path);
    struct po_api_resp r;
    po_err rc = po_wechatpay_call(a, method, path, body, &r);
    if (rc == PO_ERR_INVALID) { /* no merchant key: nothing was sent */
        r.status = 0;
        rc = PO_OK;
    }
    if (!rc && r.status == 0)
        po_api_why_none(&r, out->why, sizeof out->why);
    if (!rc && (out->status = r.status) != 0 &&
        (out->is_signed = po_wechatpay_resp_signed(a, &r, out->why, sizeof out->why)) && r.len &&
        po_json_parse(r.body, r.len, &out->j, NULL, 0) != PO_OK)
        out->j = NULL; /* a signed answer that does not parse says nothing more */
    po_api_resp_release(&r);
    return rc;
}

/* The reason of an answer that decides nothing: no_answer,
 * HTTP_<status>_unsigned:<why>, or the channel's code. */
static void undecided(const struct signed_answer *sa, char *out, size_t cap)
{
    if (sa->status == 0)
        (void)snprintf(out, cap, "%s", sa->why[0] ? sa->why : "no_answer");
    else if (!sa->is_signed)
        (void)snprintf(out, cap, "HTTP_%ld_unsigned:%.20s", sa->status, sa->why);
    else
        po_channel_clean_code(po_json_str(sa->j, "code"), sa->status, out, cap);
}

/* A signed 4xx the channel refused with for good (docs/channels.md,
 * "Error answers: WeChat Pay"): not 429 (FREQUENCY_LIMITED,
 * RATELIMIT_EXCEEDED) nor 403 RULE_LIMIT (业务规则限制, a frequency rule
 * of the business), which only say "not now". */
static bool refused(const struct signed_answer *sa)
{
    const char *code = po_json_str(sa->j, "code");
    return sa->is_signed && sa->status >= 400 && sa->status < 500 && sa->status != 429 &&
           !(code && strcmp(code, "RULE_LIMIT") == 0);
}

/* ---- refund submission: POST /v3/refund/domestic/refunds ---- */

#define REFUND_PATH "/v3/refund/domestic/refunds"

/* The refund request body WeChat Pay expects. */
static char *refund_body(const struct po_channel_account *a, const struct po_refund_request *r)
{
    /* transaction_id or out_trade_no, one of the two: a suspense payment
     * (not the order's) is named by its transaction. */
    bool by_txn = r->txn_id && r->txn_id[0];
    json_t *j = json_pack(
        "{s:s, s:s, s:{s:I, s:I, s:s}}", by_txn ? "transaction_id" : "out_trade_no",
        by_txn ? r->txn_id : r->out_trade_no, "out_refund_no", r->out_refund_no, "amount", "refund",
        (json_int_t)r->amount, "total", (json_int_t)r->total, "currency", r->currency);
    if (j && a->notify_url[0])
        json_object_set_new(j, "notify_url", json_string(a->notify_url));
    char *body = j ? po_json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return body;
}

/* The channel is idempotent on out_refund_no, so a resubmission after a
 * lost answer is the same refund. Only a platform-signed answer decides:
 * 2xx submitted; 4xx (not 429) rejected; anything else stays pending. */
po_err po_wechatpay_refund_submit(const struct po_channel_account *a,
                                  const struct po_refund_request *r, struct po_refund_answer *out)
{
    memset(out, 0, sizeof *out);
    out->decision = PO_REFUND_PENDING; /* without a merchant key too, said */
    char *body = refund_body(a, r);
    struct signed_answer sa;
    po_err rc = wx_call(a, "POST", body, &sa, "%s", REFUND_PATH);
    free(body);
    if (rc)
        return rc;
    out->http_status = sa.status;
    if (sa.is_signed && sa.status >= 200 && sa.status < 300) {
        out->decision = PO_REFUND_SUBMITTED;
    } else {
        if (refused(&sa))
            out->decision = PO_REFUND_REJECTED;
        undecided(&sa, out->code, sizeof out->code);
    }
    json_decref(sa.j);
    return PO_OK;
}

/* ---- active query: GET /v3/pay/transactions/out-trade-no/{no} ---- */

/* Only a response the channel signed counts; 404 ORDER_NOT_EXIST is "no
 * such payment". trade_state (查询订单): SUCCESS, and REFUND (转入退款: it
 * was paid, then refunded), are the payment; NOTPAY, CLOSED, REVOKED,
 * PAYERROR are none; USERPAYING and ACCEPT (the payer paying now, the
 * debit accepted) decide nothing yet. */
po_err po_wechatpay_order_query(const struct po_channel_account *a, const struct po_order_ref *o,
                                struct po_query_answer *out)
{
    const char *out_trade_no = o->out_trade_no;
    memset(out, 0, sizeof *out);
    out->state = PO_QUERY_FAILED;
    struct signed_answer sa;
    po_err rc = wx_call(a, "GET", NULL, &sa, "/v3/pay/transactions/out-trade-no/%s?mchid=%s",
                        out_trade_no, po_wechatpay_of(a)->mchid);
    if (rc)
        return rc;
    out->http_status = sa.status;
    json_t *j = sa.j;
    const char *code = po_json_str(j, "code");
    if (sa.is_signed && sa.status == 404 && code && strcmp(code, "ORDER_NOT_EXIST") == 0) {
        out->state = PO_QUERY_NOT_PAID;
        json_decref(j);
        return PO_OK;
    }
    if (sa.status != 200 || !j) {
        undecided(&sa, out->why, sizeof out->why);
        if (sa.status == 200 && sa.is_signed)
            (void)snprintf(out->why, sizeof out->why, "not_json");
        json_decref(j);
        return PO_OK;
    }
    const char *state = po_json_str(j, "trade_state"), *mchid = po_json_str(j, "mchid");
    json_t *amt = json_object_get(j, "amount");
    bool paid = state && (strcmp(state, "SUCCESS") == 0 || strcmp(state, "REFUND") == 0) && mchid &&
                strcmp(mchid, po_wechatpay_of(a)->mchid) == 0;
    if (state && (strcmp(state, "USERPAYING") == 0 || strcmp(state, "ACCEPT") == 0)) {
        (void)snprintf(out->why, sizeof out->why, "trade_state_%s", state);
        json_decref(j);
        return PO_OK;
    }
    out->state = PO_QUERY_NOT_PAID;
    if (paid) {
        const char *cur = po_json_str(amt, "currency");
        po_query_paid(a, out_trade_no, po_json_str(j, "transaction_id"),
                      json_integer_value(json_object_get(amt, "total")), cur ? cur : "CNY", out);
    }
    json_decref(j);
    return PO_OK;
}

/* ---- close: POST /v3/pay/transactions/out-trade-no/{no}/close ---- */

/* 204 (an empty body, signed) closed it; 404 ORDER_NOT_EXIST: the channel
 * never had it, nothing can be paid there. A refusal that names the
 * order's state there — ORDERPAID (paid), ORDER_CLOSED (closed already) —
 * is settled by the order query; any other (NO_AUTH, TRADE_ERROR,
 * PARAM_ERROR, SIGN_ERROR, …) leaves the order open at the channel, and
 * decides nothing here, like the rest (202 USER_PAYING, 429, 5xx). */
po_err po_wechatpay_order_close(const struct po_channel_account *a, const struct po_order_ref *o,
                                struct po_close_answer *out)
{
    const char *out_trade_no = o->out_trade_no;
    memset(out, 0, sizeof *out);
    out->state = PO_CLOSE_FAILED;
    json_t *in = json_pack("{s:s}", "mchid", po_wechatpay_of(a)->mchid);
    char *body = in ? po_json_dumps(in, JSON_COMPACT) : NULL;
    json_decref(in);
    struct signed_answer sa;
    po_err rc =
        wx_call(a, "POST", body, &sa, "/v3/pay/transactions/out-trade-no/%s/close", out_trade_no);
    free(body);
    if (rc)
        return rc;
    out->http_status = sa.status;
    const char *code = po_json_str(sa.j, "code");
    if (sa.is_signed && (sa.status == 204 || sa.status == 200 ||
                         (sa.status == 404 && code && strcmp(code, "ORDER_NOT_EXIST") == 0))) {
        out->state = PO_CLOSE_CLOSED;
    } else {
        if (refused(&sa) && code &&
            (strcmp(code, "ORDERPAID") == 0 || strcmp(code, "ORDER_CLOSED") == 0))
            out->state = PO_CLOSE_REFUSED;
        undecided(&sa, out->why, sizeof out->why);
    }
    json_decref(sa.j);
    return PO_OK;
}

/* ---- refund query: GET /v3/refund/domestic/refunds/{out_refund_no} ---- */

/* A signed answer decides: status SUCCESS / CLOSED / ABNORMAL is final
 * (the event REFUND.* would have made), PROCESSING pending; a signed 404
 * RESOURCE_NOT_EXISTS: no such refund. */
po_err po_wechatpay_refund_query(const struct po_channel_account *a,
                                 const struct po_refund_request *r,
                                 struct po_refund_query_answer *out)
{
    memset(out, 0, sizeof *out);
    out->state = PO_RQ_FAILED;
    const struct po_wechatpay_account *wx = po_wechatpay_of(a);
    struct signed_answer sa;
    po_err rc = wx_call(a, "GET", NULL, &sa, "/v3/refund/domestic/refunds/%s%s%s", r->out_refund_no,
                        wx->sub_mchid[0] ? "?sub_mchid=" : "", wx->sub_mchid);
    if (rc)
        return rc;
    out->http_status = sa.status;
    json_t *j = sa.j;
    const char *st = po_json_str(j, "status"), *code = po_json_str(j, "code");
    if (!sa.is_signed || !j) {
        undecided(&sa, out->why, sizeof out->why);
    } else if (out->http_status == 404 && code && strcmp(code, "RESOURCE_NOT_EXISTS") == 0) {
        out->state = PO_RQ_NOT_FOUND;
    } else if (out->http_status != 200 || !st) {
        po_channel_clean_code(code, out->http_status, out->why, sizeof out->why);
    } else if (strcmp(st, "PROCESSING") == 0) {
        out->state = PO_RQ_PENDING;
    } else {
        enum po_event_type t = strcmp(st, "SUCCESS") == 0  ? PO_EV_REFUND_SUCCESS
                               : strcmp(st, "CLOSED") == 0 ? PO_EV_REFUND_CLOSED
                                                           : PO_EV_REFUND_ABNORMAL;
        json_t *amt = json_object_get(j, "amount");
        if (strcmp(st, "SUCCESS") && strcmp(st, "CLOSED") && strcmp(st, "ABNORMAL"))
            (void)snprintf(out->why, sizeof out->why, "unknown_status");
        else
            po_query_refund(a, t, r, po_json_str(j, "refund_id"), po_json_str(j, "transaction_id"),
                            json_integer_value(json_object_get(amt, "refund")), "CNY", out);
    }
    json_decref(j);
    return PO_OK;
}

/* ---- creating the payment: POST /v3/pay/transactions/{native,jsapi,h5} ---- */

po_err po_wechatpay_bridge_sign(const struct po_privkey *key, const char *appid, const char *ts,
                                const char *nonce, const char *prepay_id, char **out_sig)
{
    *out_sig = NULL;
    char msg[512];
    po_err rc = po_fmt(msg, sizeof msg, "%s\n%s\n%s\nprepay_id=%s\n", appid, ts, nonce, prepay_id);
    return rc ? rc : po_rsa_sha256_sign_b64(key, msg, strlen(msg), out_sig);
}

/* "2026-12-04T18:00:00+08:00": time_expire as WeChat Pay writes it. */
static void beijing_rfc3339(int64_t at, char *out, size_t cap)
{
    time_t t = (time_t)(at + 8 * 3600);
    struct tm tm;
    gmtime_r(&t, &tm);
    (void)strftime(out, cap, "%Y-%m-%dT%H:%M:%S+08:00", &tm);
}

/* The prepay request body: direct merchants name appid/mchid, service
 * providers sp_appid/sp_mchid/sub_mchid (and the payer as sp_openid). */
static char *prepay_body(const struct po_channel_account *a, const struct po_pay_request *r)
{
    const struct po_wechatpay_account *wx = po_wechatpay_of(a);
    bool sp = wx->sub_mchid[0] != '\0';
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:I, s:s}}", sp ? "sp_appid" : "appid",
                          wx->appid, sp ? "sp_mchid" : "mchid", wx->mchid, "description",
                          r->description && *r->description ? r->description : r->out_trade_no,
                          "out_trade_no", r->out_trade_no, "notify_url", a->notify_url, "amount",
                          "total", (json_int_t)r->amount, "currency", r->currency);
    if (j && sp)
        json_object_set_new(j, "sub_mchid", json_string(wx->sub_mchid));
    if (j && r->expires_at) {
        char te[40];
        beijing_rfc3339(r->expires_at, te, sizeof te);
        json_object_set_new(j, "time_expire", json_string(te));
    }
    if (j && strcmp(r->pay_method, "jsapi") == 0)
        json_object_set_new(j, "payer",
                            json_pack("{s:s}", sp ? "sp_openid" : "openid", r->payer_openid));
    if (j && strcmp(r->pay_method, "h5") == 0)
        json_object_set_new(
            j, "scene_info",
            json_pack("{s:s, s:{s:s}}", "payer_client_ip", r->payer_ip, "h5_info", "type", "Wap"));
    char *body = j ? po_json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return body;
}

/* JSAPI: the parameters WeixinJSBridge / wx.requestPayment take, signed
 * with the merchant key (v3_jsapi_bridge_sign.json). NULL: out of memory. */
static json_t *bridge_params(const struct po_channel_account *a, const char *prepay_id)
{
    char ts[24], nonce[33], pkg[PO_TXN_ID_MAX + 16], *sig = NULL;
    unsigned char rnd[16];
    if (po_random(rnd, sizeof rnd))
        return NULL;
    for (int i = 0; i < 16; i++)
        (void)snprintf(nonce + 2 * i, 3, "%02X", rnd[i]);
    (void)snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
    (void)snprintf(pkg, sizeof pkg, "prepay_id=%s", prepay_id);
    const char *appid = po_wechatpay_of(a)->appid;
    if (po_wechatpay_bridge_sign(a->merchant_key, appid, ts, nonce, prepay_id, &sig))
        return NULL;
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "appId", appid, "timeStamp", ts,
                          "nonceStr", nonce, "package", pkg, "signType", "RSA", "paySign", sig);
    free(sig);
    return j;
}

/* A signed 200 with the method's field creates; a signed refusal
 * (refused(): PARAM_ERROR, INVALID_REQUEST — a reused out_trade_no with
 * other parameters —, ORDERPAID, ORDER_CLOSED, NO_AUTH, …) is for good;
 * the rest decides nothing. */
po_err po_wechatpay_pay_create(const struct po_channel_account *a, const struct po_pay_request *r,
                               struct po_pay_answer *out)
{
    memset(out, 0, sizeof *out);
    out->state = PO_PAY_FAILED;
    bool sp = po_wechatpay_of(a)->sub_mchid[0] != '\0';
    const char *want = strcmp(r->pay_method, "native") == 0  ? "code_url"
                       : strcmp(r->pay_method, "jsapi") == 0 ? "prepay_id"
                                                             : "h5_url";
    char *body = prepay_body(a, r);
    struct signed_answer sa;
    po_err rc = wx_call(a, "POST", body, &sa, "/v3/pay/%stransactions/%s", sp ? "partner/" : "",
                        r->pay_method);
    free(body);
    if (rc)
        return rc;
    out->http_status = sa.status;
    json_t *j = sa.j;
    const char *v = po_json_str(j, want);
    if (sa.is_signed && out->http_status == 200 && v && *v && strlen(v) < 2048) {
        bool jsapi = strcmp(want, "prepay_id") == 0;
        if (jsapi && !po_id_valid(v, PO_TXN_ID_MAX)) {
            (void)snprintf(out->why, sizeof out->why, "malformed_answer");
        } else {
            out->payment = jsapi ? bridge_params(a, v) : json_pack("{s:s}", want, v);
            if (jsapi && out->payment)
                json_object_set_new(out->payment, "prepay_id", json_string(v));
            if (!out->payment)
                rc = PO_ERR_NOMEM;
            else
                out->state = PO_PAY_CREATED;
            if (jsapi)
                PO_ASSERT(po_strcpy(out->channel_id, sizeof out->channel_id, v) == PO_OK);
        }
    } else {
        if (refused(&sa))
            out->state = PO_PAY_REFUSED;
        undecided(&sa, out->why, sizeof out->why);
    }
    json_decref(j);
    return rc;
}

/* ---- the daily bill: GET /v3/bill/tradebill, then its download_url ---- */

po_err po_wechatpay_bill_unpack(const char *gz, size_t len, const char *sha1_hex, char **out,
                                size_t *out_len, char *why, size_t cap)
{
    *out = NULL;
    *out_len = 0;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 16) != Z_OK) /* gzip framing */
        return PO_ERR_NOMEM;
    size_t have = 0, room = len * 4 + 65536;
    if (room > PO_BILL_MAX)
        room = PO_BILL_MAX;
    char *buf = malloc(room + 1);
    int zr = Z_OK;
    const char *bad = NULL;
    z.next_in = (unsigned char *)(uintptr_t)gz;
    z.avail_in = (uInt)len;
    while (buf && !bad) {
        if (have == room) {
            if (room >= PO_BILL_MAX) {
                bad = "too_large";
                break;
            }
            size_t nr = room * 2 > PO_BILL_MAX ? PO_BILL_MAX : room * 2;
            char *p = realloc(buf, nr + 1);
            if (!p) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = p;
            room = nr;
        }
        z.next_out = (unsigned char *)buf + have;
        z.avail_out = (uInt)(room - have);
        zr = inflate(&z, Z_NO_FLUSH);
        have = room - z.avail_out;
        if (zr == Z_STREAM_END)
            break;
        if (zr == Z_BUF_ERROR && z.avail_in == 0)
            bad = "truncated";
        else if (zr != Z_OK && zr != Z_BUF_ERROR)
            bad = zr == Z_MEM_ERROR ? NULL : "bad_gzip";
        if (zr == Z_MEM_ERROR) {
            free(buf);
            buf = NULL;
        }
    }
    if (!bad && buf && z.avail_in != 0)
        bad = "bad_gzip"; /* something after the stream */
    inflateEnd(&z);
    if (!buf)
        return PO_ERR_NOMEM;
    char got[41] = "";
    if (!bad && po_sha1_hex(buf, have, got) != PO_OK) {
        free(buf);
        return PO_ERR_NOMEM;
    }
    if (!bad && strcasecmp(got, sha1_hex) != 0)
        bad = "hash_mismatch";
    if (bad) {
        free(buf);
        (void)snprintf(why, cap, "%s", bad);
        return PO_ERR_INVALID;
    }
    buf[have] = '\0';
    *out = buf;
    *out_len = have;
    return PO_OK;
}

static bool hex40(const char *s)
{
    size_t n = 0;
    for (; s && s[n]; n++)
        if (!isxdigit((unsigned char)s[n]))
            return false;
    return n == 40;
}

/* tradebill's signed answer names the file and its hash; a date without
 * trades is 400 NO_STATEMENT_EXIST, one not published yet 400
 * STATEMENT_CREATING. The download (not signed: the hash is its check) is
 * fetched only from the API's own origin, with the merchant's
 * Authorization over its path. */
po_err po_wechatpay_bill_fetch(const struct po_channel_account *a, const char *date,
                               struct po_bill_fetch *out)
{
    memset(out, 0, sizeof *out);
    out->state = PO_BILL_FAILED;
    const struct po_wechatpay_account *wx = po_wechatpay_of(a);
    struct signed_answer sa;
    po_err rc = wx_call(a, "GET", NULL, &sa,
                        "/v3/bill/tradebill?bill_date=%s&bill_type=ALL&tar_type=GZIP%s%s", date,
                        wx->sub_mchid[0] ? "&sub_mchid=" : "", wx->sub_mchid);
    if (rc)
        return rc;
    out->http_status = sa.status;
    const char *code = po_json_str(sa.j, "code"), *url = po_json_str(sa.j, "download_url"),
               *hash = po_json_str(sa.j, "hash_value"), *ht = po_json_str(sa.j, "hash_type");
    size_t blen = strlen(a->api_base_url);
    if (sa.is_signed && sa.status == 400 && code && strcmp(code, "NO_STATEMENT_EXIST") == 0) {
        out->state = PO_BILL_NONE;
    } else if (sa.is_signed && sa.status == 400 && code &&
               strcmp(code, "STATEMENT_CREATING") == 0) {
        out->state = PO_BILL_NOT_READY;
    } else if (!sa.is_signed || sa.status != 200) {
        undecided(&sa, out->why, sizeof out->why);
    } else if (!url || !hex40(hash) || !ht || strcmp(ht, "SHA1") != 0 ||
               strncmp(url, a->api_base_url, blen) != 0 || url[blen] != '/' || strlen(url) > 1024) {
        (void)snprintf(out->why, sizeof out->why, "malformed_answer");
    } else {
        char auth[1400];
        struct po_api_resp gz = {0};
        rc = authorization(a, "GET", url + blen, "", auth, sizeof auth);
        const char *h[] = {auth};
        if (!rc)
            rc = po_api_download(url, h, 1, PO_BILL_MAX, &gz);
        if (!rc && gz.status == 0) {
            po_api_why_none(&gz, out->why, sizeof out->why);
        } else if (!rc && gz.status != 200) {
            (void)snprintf(out->why, sizeof out->why, "download_HTTP_%ld", gz.status);
        } else if (!rc) {
            rc = po_wechatpay_bill_unpack(gz.body, gz.len, hash, &out->data, &out->len, out->why,
                                          sizeof out->why);
            if (rc == PO_ERR_INVALID)
                rc = PO_OK; /* refused whole: why says so */
            else if (!rc)
                out->state = PO_BILL_FETCHED;
        }
        po_api_resp_release(&gz);
    }
    json_decref(sa.j);
    return rc;
}

/* ---- platform certificates: GET /v3/certificates ---- */

void po_key_fetch_free(struct po_key_fetch *f)
{
    for (int i = 0; i < f->n; i++)
        free(f->k[i].pem);
    memset(f, 0, sizeof *f);
}

/* One encrypt_certificate: AEAD_AES_256_GCM with the APIv3 key (only
 * WeChat Pay and the merchant hold it: a certificate that decrypts is
 * WeChat Pay's), its serial the one named, valid now. *key: its public
 * key (caller frees); false with why. */
static bool one_cert(const struct po_channel_account *a, json_t *item, int64_t now,
                     struct po_key_fetch *out, struct po_pubkey **key, bool *nomem)
{
    json_t *enc = json_object_get(item, "encrypt_certificate");
    const char *serial = po_json_str(item, "serial_no"), *alg = po_json_str(enc, "algorithm"),
               *ct = po_json_str(enc, "ciphertext"), *nonce = po_json_str(enc, "nonce"),
               *aad = po_json_str(enc, "associated_data");
    const char *why = NULL;
    unsigned char *raw = NULL, *plain = NULL;
    size_t raw_len = 0, plain_len = 0;
    char got[PO_SERIAL_MAX + 1] = "", ignored[PO_ERRBUF_SIZE];
    int64_t nb = 0, na = 0;
    const struct po_wechatpay_account *wx = po_wechatpay_of(a);
    po_err rc = PO_OK;
    if (!serial || !alg || strcmp(alg, "AEAD_AES_256_GCM") != 0 || !ct || !nonce)
        why = "malformed_answer";
    else if ((rc = po_b64_decode(ct, strlen(ct), &raw, &raw_len)))
        why = "malformed_answer";
    else if ((rc =
                  po_aes_gcm_decrypt(wx->apiv3_key, wx->apiv3_key_len, (const unsigned char *)nonce,
                                     strlen(nonce), (const unsigned char *)(aad ? aad : ""),
                                     aad ? strlen(aad) : 0, raw, raw_len, &plain, &plain_len)))
        why = "decrypt_failed";
    else if ((rc = po_pubkey_from_pem((const char *)plain, plain_len, key, got, sizeof got, ignored,
                                      sizeof ignored)))
        why = "not_a_certificate";
    else if (strcasecmp(got, serial) != 0)
        why = "serial_mismatch";
    else if ((rc = po_cert_validity((const char *)plain, plain_len, &nb, &na)) || na <= now ||
             nb > now + 30 * 86400)
        why = rc ? "not_a_certificate" : "not_valid_now";
    else if (out->n == PO_CHANNEL_KEYS_MAX)
        why = "too_many_certificates";
    else if ((rc = po_pubkey_to_pem(*key, &out->k[out->n].pem)))
        why = "out_of_memory";
    free(raw);
    if (plain)
        po_secure_zero(plain, plain_len);
    free(plain);
    *nomem = rc == PO_ERR_NOMEM;
    if (why) {
        (void)snprintf(out->why, sizeof out->why, "%s", why);
        return false;
    }
    PO_ASSERT(po_strcpy(out->k[out->n].serial, sizeof out->k[0].serial, got) == PO_OK);
    out->k[out->n].not_before = nb;
    out->k[out->n].not_after = na;
    out->n++;
    return true;
}

/* The answer counts when the platform signed it — with a key the account
 * trusts, or with one of the certificates it hands out (the successor,
 * once WeChat Pay signs with it); every certificate must decrypt with the
 * APIv3 key and be valid, or none is taken. */
po_err po_wechatpay_keys_fetch(const struct po_channel_account *a, struct po_key_fetch *out)
{
    memset(out, 0, sizeof *out);
    if (no_merchant_key(a, out->why, sizeof out->why))
        return PO_OK;
    struct po_api_resp rr, *r = &rr;
    po_err rc = po_wechatpay_call(a, "GET", "/v3/certificates", NULL, r);
    if (rc)
        return rc;
    out->http_status = r->status;
    json_t *j = NULL, *data = NULL;
    if (r->status != 200 || po_json_parse(r->body, r->len, &j, NULL, 0) != PO_OK ||
        !json_is_array(data = json_object_get(j, "data")) || json_array_size(data) == 0) {
        if (r->status == 0)
            po_api_why_none(r, out->why, sizeof out->why);
        else
            (void)snprintf(out->why, sizeof out->why, "HTTP_%ld", r->status);
        if (r->status == 200)
            (void)snprintf(out->why, sizeof out->why, "malformed_answer");
        json_decref(j);
        po_api_resp_release(r);
        return PO_OK;
    }
    /* the account as it is, plus the certificates handed out: the keys the
     * answer's signature may be checked with (a copy: nothing is freed
     * through it) */
    struct po_channel_account with = *a;
    struct po_pubkey *fresh[PO_CHANNEL_KEYS_MAX] = {0};
    int nfresh = 0;
    int64_t now = (int64_t)time(NULL);
    bool all = true, nomem = false;
    size_t i;
    json_t *item;
    json_array_foreach(data, i, item)
    {
        struct po_pubkey *k = NULL;
        if (!(all = one_cert(a, item, now, out, &k, &nomem))) {
            po_pubkey_free(k);
            break;
        }
        fresh[nfresh++] = k;
        if (with.nkeys < PO_CHANNEL_KEYS_MAX) {
            int w = with.nkeys++;
            memcpy(with.keys[w].serial, out->k[out->n - 1].serial, sizeof with.keys[w].serial);
            with.keys[w].key = k;
            with.keys[w].not_after = out->k[out->n - 1].not_after;
        }
    }
    char why[PO_REASON_SIZE] = "";
    if (all && !po_wechatpay_resp_signed(&with, r, why, sizeof why)) {
        all = false;
        (void)snprintf(out->why, sizeof out->why, "unsigned:%.20s", why);
    }
    out->ok = all;
    if (!all) { /* none is taken */
        for (int k = 0; k < out->n; k++)
            free(out->k[k].pem);
        out->n = 0;
    }
    for (int k = 0; k < nfresh; k++)
        po_pubkey_free(fresh[k]);
    json_decref(j);
    po_api_resp_release(r);
    return nomem ? PO_ERR_NOMEM : PO_OK;
}
