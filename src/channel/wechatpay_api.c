/*
 * wechatpay_api.c — outbound calls to WeChat Pay API v3 (order query, refund
 * submission): the merchant's WECHATPAY2-SHA256-RSA2048 Authorization over
 * "METHOD\nPATH\nTIMESTAMP\nNONCE\nBODY\n", a bounded response, and the
 * platform's response signature checked the same way as a callback's.
 */
#include "channel_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

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
    return po_api_request(url, h, 3, body, out);
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
    out->decision = PO_REFUND_PENDING;
    if (!a->merchant_key) { /* stays pending, said; nothing is sent */
        (void)snprintf(out->code, sizeof out->code, "no_merchant_key");
        return PO_OK;
    }
    struct po_api_resp *resp = malloc(sizeof *resp);
    char *body = resp ? refund_body(a, r) : NULL, why[PO_REASON_SIZE] = "";
    if (!body || po_wechatpay_call(a, "POST", REFUND_PATH, body, resp)) {
        free(body);
        free(resp);
        return PO_ERR_NOMEM;
    }
    free(body);
    out->http_status = resp->status;
    bool is_signed = resp->status && po_wechatpay_resp_signed(a, resp, why, sizeof why);
    json_t *j = NULL;
    if (is_signed && po_json_parse(resp->body, resp->len, &j, NULL, 0) != PO_OK)
        j = NULL; /* no code: the decision rests on the status alone */
    const char *code = po_json_str(j, "code");
    if (is_signed && resp->status >= 200 && resp->status < 300) {
        out->decision = PO_REFUND_SUBMITTED;
    } else if (is_signed && resp->status >= 400 && resp->status < 500 && resp->status != 429) {
        out->decision = PO_REFUND_REJECTED;
        po_channel_clean_code(code, resp->status, out->code, sizeof out->code);
    } else if (resp->status == 0) {
        (void)snprintf(out->code, sizeof out->code, "no_answer");
    } else if (!is_signed) {
        (void)snprintf(out->code, sizeof out->code, "HTTP_%ld_unsigned:%.20s", resp->status, why);
    } else {
        po_channel_clean_code(code, resp->status, out->code, sizeof out->code);
    }
    json_decref(j);
    free(resp);
    return PO_OK;
}

/* ---- active query: GET /v3/pay/transactions/out-trade-no/{no} ---- */

/* Only a response the channel signed counts; 404 is "no such payment". */
po_err po_wechatpay_order_query(const struct po_channel_account *a, const char *out_trade_no,
                                struct po_query_answer *out)
{
    memset(out, 0, sizeof *out);
    out->state = PO_QUERY_FAILED;
    struct po_api_resp *r = malloc(sizeof *r);
    if (!r)
        return PO_ERR_NOMEM;
    char path[256];
    PO_ASSERT(po_fmt(path, sizeof path, "/v3/pay/transactions/out-trade-no/%s?mchid=%s",
                     out_trade_no, po_wechatpay_of(a)->mchid) == PO_OK);
    if (!a->merchant_key)
        (void)snprintf(out->why, sizeof out->why, "no_merchant_key");
    if (po_wechatpay_call(a, "GET", path, NULL, r))
        r->status = 0;
    out->http_status = r->status;
    if (r->status == 404) {
        out->state = PO_QUERY_NOT_PAID;
        free(r);
        return PO_OK;
    }
    if (r->status != 200 || !po_wechatpay_resp_signed(a, r, out->why, sizeof out->why)) {
        if (!out->why[0])
            (void)snprintf(out->why, sizeof out->why, "HTTP_%ld", r->status);
        free(r);
        return PO_OK;
    }
    json_t *j = NULL;
    po_err prc = po_json_parse(r->body, r->len, &j, NULL, 0);
    free(r);
    if (prc) { /* a signed answer that does not parse says nothing */
        (void)snprintf(out->why, sizeof out->why, "%s",
                       prc == PO_ERR_NOMEM ? "out_of_memory" : "not_json");
        return PO_OK;
    }
    const char *state = po_json_str(j, "trade_state"), *mchid = po_json_str(j, "mchid");
    json_t *amt = json_object_get(j, "amount");
    bool paid = state && strcmp(state, "SUCCESS") == 0 && mchid &&
                strcmp(mchid, po_wechatpay_of(a)->mchid) == 0;
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
 * never had it, nothing can be paid there. Any other signed 4xx (not 429)
 * is a refusal — ORDERPAID and the like — that the order query settles;
 * the rest decides nothing. */
po_err po_wechatpay_order_close(const struct po_channel_account *a, const char *out_trade_no,
                                struct po_close_answer *out)
{
    memset(out, 0, sizeof *out);
    out->state = PO_CLOSE_FAILED;
    if (!a->merchant_key) { /* never an unsigned request; nothing is sent */
        (void)snprintf(out->why, sizeof out->why, "no_merchant_key");
        return PO_OK;
    }
    struct po_api_resp *r = malloc(sizeof *r);
    json_t *in = json_pack("{s:s}", "mchid", po_wechatpay_of(a)->mchid);
    char *body = in ? po_json_dumps(in, JSON_COMPACT) : NULL, path[256];
    json_decref(in);
    PO_ASSERT(po_fmt(path, sizeof path, "/v3/pay/transactions/out-trade-no/%s/close",
                     out_trade_no) == PO_OK);
    if (!r || !body || po_wechatpay_call(a, "POST", path, body, r)) {
        free(body);
        free(r);
        return PO_ERR_NOMEM;
    }
    free(body);
    out->http_status = r->status;
    char why[PO_REASON_SIZE] = "";
    bool is_signed = r->status && po_wechatpay_resp_signed(a, r, why, sizeof why);
    json_t *j = NULL;
    if (is_signed && r->len && po_json_parse(r->body, r->len, &j, NULL, 0) != PO_OK)
        j = NULL;
    const char *code = po_json_str(j, "code");
    if (r->status == 0) {
        (void)snprintf(out->why, sizeof out->why, "no_answer");
    } else if (!is_signed) {
        (void)snprintf(out->why, sizeof out->why, "HTTP_%ld_unsigned:%.20s", r->status, why);
    } else if (r->status == 204 || r->status == 200 ||
               (r->status == 404 && code && strcmp(code, "ORDER_NOT_EXIST") == 0)) {
        out->state = PO_CLOSE_CLOSED;
    } else if (r->status >= 400 && r->status < 500 && r->status != 429) {
        out->state = PO_CLOSE_REFUSED;
        po_channel_clean_code(code, r->status, out->why, sizeof out->why);
    } else {
        po_channel_clean_code(code, r->status, out->why, sizeof out->why);
    }
    json_decref(j);
    free(r);
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
    char path[256];
    PO_ASSERT(po_fmt(path, sizeof path, "/v3/refund/domestic/refunds/%s%s%s", r->out_refund_no,
                     wx->sub_mchid[0] ? "?sub_mchid=" : "", wx->sub_mchid) == PO_OK);
    struct po_api_resp *resp = malloc(sizeof *resp);
    if (!resp)
        return PO_ERR_NOMEM;
    if (!a->merchant_key)
        (void)snprintf(out->why, sizeof out->why, "no_merchant_key");
    if (po_wechatpay_call(a, "GET", path, NULL, resp))
        resp->status = 0;
    out->http_status = resp->status;
    json_t *j = NULL;
    bool is_signed = resp->status && po_wechatpay_resp_signed(a, resp, out->why, sizeof out->why);
    if (is_signed && po_json_parse(resp->body, resp->len, &j, NULL, 0) != PO_OK)
        j = NULL;
    free(resp);
    const char *st = po_json_str(j, "status"), *code = po_json_str(j, "code");
    if (!is_signed || !j) {
        if (!out->why[0])
            (void)snprintf(out->why, sizeof out->why, "HTTP_%ld", out->http_status);
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
