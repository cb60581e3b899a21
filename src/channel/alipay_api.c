/*
 * alipay_api.c — calls to the Alipay open platform gateway (alipay.trade.*):
 * the common parameters plus biz_content, signed RSA2 with the app's private
 * key over the sorted parameters (sign_type included), POSTed as a form; and
 * the answer's signature: Alipay signs the raw text of the
 * "<method>_response" member (dots as underscores) with its key, in a
 * top-level "sign" member.
 */
#include "channel_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* "yyyy-MM-dd HH:mm:ss" in Beijing time (the gateway's timestamp and
 * time_expire). */
static void beijing_time(int64_t at, char *out, size_t cap)
{
    time_t t = (time_t)(at + 8 * 3600);
    struct tm tm;
    gmtime_r(&t, &tm);
    (void)strftime(out, cap, "%Y-%m-%d %H:%M:%S", &tm);
}

/* A gateway request's parameters in alipay-sdk's order (format only when
 * given, empty values left out), signed RSA2 with key: sign comes last. */
static po_err request_form(const struct po_privkey *key, const char *app_id, const char *method,
                           const char *format, const char *ts, const char *notify_url,
                           const char *return_url, const char *biz_content, struct po_form *f)
{
    const char *k[] = {"method",    "app_id",    "format",     "charset",    "version",
                       "sign_type", "timestamp", "notify_url", "return_url", "biz_content"};
    const char *v[] = {method,
                       app_id,
                       format ? format : "",
                       "utf-8",
                       "1.0",
                       "RSA2",
                       ts,
                       notify_url ? notify_url : "",
                       return_url ? return_url : "",
                       biz_content};
    po_err rc = PO_OK;
    for (size_t i = 0; i < sizeof k / sizeof k[0] && !rc; i++)
        if (*v[i])
            rc = po_form_add(f, k[i], v[i]);
    return rc ? rc : po_alipay_sign_form(key, f, false);
}

po_err po_alipay_call(const struct po_channel_account *a, const char *method,
                      const char *biz_content, struct po_api_resp *out)
{
    memset(out, 0, sizeof *out);
    if (!a->merchant_key)
        return PO_ERR_INVALID;
    char ts[24];
    beijing_time((int64_t)time(NULL), ts, sizeof ts);
    struct po_form *f = calloc(1, sizeof *f);
    if (!f)
        return PO_ERR_NOMEM;
    po_err rc = request_form(a->merchant_key, po_alipay_of(a)->app_id, method, "JSON", ts,
                             a->notify_url, NULL, biz_content, f);
    char *body = rc ? NULL : po_form_encode(f, NULL);
    po_form_free(f);
    free(f);
    if (!rc && !body)
        rc = PO_ERR_NOMEM;
    if (!rc) {
        const char *h[] = {"Accept: application/json",
                           "Content-Type: application/x-www-form-urlencoded;charset=utf-8"};
        rc = po_api_request(a->api_base_url, h, 2, body, PO_API_RESP_MAX, out);
    }
    free(body);
    return rc;
}

/* Appends s to *b (grown as needed), HTML-escaped when esc. */
static bool put(char **b, size_t *len, size_t *cap, const char *s, bool esc)
{
    for (; *s; s++) {
        const char *r = NULL;
        if (esc)
            r = *s == '"'    ? "&quot;"
                : *s == '&'  ? "&amp;"
                : *s == '<'  ? "&lt;"
                : *s == '>'  ? "&gt;"
                : *s == '\'' ? "&#39;"
                             : NULL;
        size_t n = r ? strlen(r) : 1;
        if (*len + n + 1 > *cap) {
            size_t nc = (*cap + n) * 2;
            char *p = realloc(*b, nc);
            if (!p)
                return false;
            *b = p;
            *cap = nc;
        }
        memcpy(*b + *len, r ? r : s, n);
        *len += n;
        (*b)[*len] = '\0';
    }
    return true;
}

po_err po_alipay_browser_pay(const struct po_privkey *key, const char *gateway, const char *app_id,
                             const char *method, const char *notify_url, const char *return_url,
                             const char *biz_content, const char *ts, char **form_html, char **url)
{
    *form_html = *url = NULL;
    struct po_form *f = calloc(1, sizeof *f), *q = calloc(1, sizeof *q);
    po_err rc =
        f && q ? request_form(key, app_id, method, NULL, ts, notify_url, return_url, biz_content, f)
               : PO_ERR_NOMEM;
    /* the form's action carries everything but biz_content, a hidden input */
    for (int i = 0; !rc && i < f->n; i++)
        if (strcmp(f->p[i].key, "biz_content") != 0)
            rc = po_form_add(q, f->p[i].key, f->p[i].val);
    char *all = rc ? NULL : po_form_encode(f, NULL), *qs = rc ? NULL : po_form_encode(q, NULL);
    size_t len = 0, cap = 0;
    char *html = NULL;
    bool ok =
        all && qs && put(&html, &len, &cap, "<form action=\"", false) &&
        put(&html, &len, &cap, gateway, true) && put(&html, &len, &cap, "?", false) &&
        put(&html, &len, &cap, qs, false) &&
        put(&html, &len, &cap,
            "\" method=\"post\" name=\"alipaySDKSubmit\" id=\"alipaySDKSubmit\">"
            "<input type=\"hidden\" name=\"biz_content\" value=\"",
            false) &&
        put(&html, &len, &cap, biz_content, true) &&
        put(&html, &len, &cap,
            "\" /></form><script>document.forms[\"alipaySDKSubmit\"].submit();</script>", false);
    size_t ulen = all ? strlen(gateway) + strlen(all) + 2 : 0;
    char *u = ok ? malloc(ulen) : NULL;
    if (u)
        (void)snprintf(u, ulen, "%s?%s", gateway, all);
    if (!rc && !u)
        rc = PO_ERR_NOMEM;
    if (!rc) {
        *form_html = html;
        *url = u;
    } else {
        free(html);
        free(u);
    }
    free(all);
    free(qs);
    if (f)
        po_form_free(f);
    if (q)
        po_form_free(q);
    free(f);
    free(q);
    return rc;
}

static size_t skip_ws(const char *s, size_t len, size_t i)
{
    while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
        i++;
    return i;
}

/* The raw text of the object member named key at the top level of body:
 * its start and length, or false. Strings and nesting are skipped properly,
 * so a key inside a value is never taken for the member. */
static bool member_text(const char *body, size_t len, const char *key, const char **start,
                        size_t *mlen)
{
    size_t klen = strlen(key), i = 0;
    int depth = 0;
    while (i < len) {
        char c = body[i];
        if (c == '"') {
            size_t s = ++i;
            while (i < len && body[i] != '"')
                i += body[i] == '\\' ? 2 : 1;
            if (i >= len)
                return false;
            size_t e = i++;
            if (depth != 1 || e - s != klen || memcmp(body + s, key, klen) != 0)
                continue;
            i = skip_ws(body, len, i);
            if (i >= len || body[i] != ':')
                continue;
            i = skip_ws(body, len, i + 1);
            if (i >= len || body[i] != '{')
                return false;
            size_t from = i;
            int d = 0;
            while (i < len) {
                if (body[i] == '"') {
                    i++;
                    while (i < len && body[i] != '"')
                        i += body[i] == '\\' ? 2 : 1;
                } else if (body[i] == '{') {
                    d++;
                } else if (body[i] == '}' && --d == 0) {
                    *start = body + from;
                    *mlen = i + 1 - from;
                    return true;
                }
                i++;
            }
            return false;
        }
        if (c == '{' || c == '[')
            depth++;
        else if (c == '}' || c == ']')
            depth--;
        i++;
    }
    return false;
}

json_t *po_alipay_resp_verified(const struct po_channel_account *a, const struct po_api_resp *r,
                                const char *method, char *reason, size_t cap)
{
    char node[160];
    size_t n = 0;
    for (; method[n] && n + 10 < sizeof node; n++)
        node[n] = method[n] == '.' ? '_' : method[n];
    (void)snprintf(node + n, sizeof node - n, "_response");
    const char *text = NULL;
    size_t tlen = 0;
    json_t *root = NULL, *out = NULL;
    char jerr[PO_ERRBUF_SIZE];
    po_err prc = po_json_parse(r->body, r->len, &root, jerr, sizeof jerr);
    const char *sign = po_json_str(root, "sign"), *why = NULL;
    unsigned char *raw = NULL;
    size_t raw_len = 0;
    if (prc == PO_ERR_NOMEM)
        why = "out_of_memory";
    else if (!json_is_object(root))
        why = "not_json";
    else if (!member_text(r->body, r->len, node, &text, &tlen) &&
             !member_text(r->body, r->len, "error_response", &text, &tlen))
        why = "no_response_member";
    else if (!sign || po_b64_decode(sign, strlen(sign), &raw, &raw_len))
        why = "unsigned";
    else if (po_rsa_sha256_verify(a->keys[0].key, text, tlen, raw, raw_len))
        why = "bad_signature";
    else if ((prc = po_json_parse(text, tlen, &out, jerr, sizeof jerr)))
        why = prc == PO_ERR_NOMEM ? "out_of_memory" : "not_json";
    free(raw);
    json_decref(root);
    if (why && reason && po_strcpy(reason, cap, why))
        reason[0] = '\0';
    return out;
}

/* One gateway call whose answer counts only when Alipay signed it: the
 * verified "<method>_response" object (caller json_decrefs), or NULL with
 * why (no_merchant_key, no_answer, HTTP_<status>, unsigned:<reason>).
 * *nomem on out-of-memory. */
static json_t *signed_call(const struct po_channel_account *a, const char *method, json_t *biz,
                           long *status, char *why, size_t cap, bool *nomem)
{
    *status = 0;
    *nomem = false;
    char *text = biz ? po_json_dumps(biz, JSON_COMPACT) : NULL, reason[PO_REASON_SIZE] = "";
    struct po_api_resp r = {0}, *resp = &r;
    po_err rc = text ? po_alipay_call(a, method, text, resp) : PO_ERR_NOMEM;
    free(text);
    json_t *n = NULL;
    if (rc == PO_ERR_INVALID) {
        (void)snprintf(why, cap, "no_merchant_key");
    } else if (rc) {
        *nomem = true;
    } else if ((*status = resp->status) == 0) {
        po_api_why_none(resp, why, cap);
    } else if (resp->status != 200) {
        (void)snprintf(why, cap, "HTTP_%ld", resp->status);
    } else if (!(n = po_alipay_resp_verified(a, resp, method, reason, sizeof reason))) {
        (void)snprintf(why, cap, "unsigned:%.20s", reason);
    }
    po_api_resp_release(resp);
    return n;
}

/* ---- refund submission: alipay.trade.refund ---- */

#define ALIPAY_REFUND "alipay.trade.refund"

/* out_request_no = out_refund_no (Alipay is idempotent on it per trade).
 * Only an answer signed with the Alipay key decides, on its code:
 *   10000                  submitted (the refund notification completes it)
 *   40002 / 40004 / 40006  rejected, except sub_code ACQ.SYSTEM_ERROR
 *   anything else, unsigned, no answer: stays pending, retried. */
po_err po_alipay_refund_submit(const struct po_channel_account *a,
                               const struct po_refund_request *r, struct po_refund_answer *out)
{
    memset(out, 0, sizeof *out);
    out->decision = PO_REFUND_PENDING;
    char yuan[32];
    (void)snprintf(yuan, sizeof yuan, "%lld.%02lld", (long long)(r->amount / 100),
                   (long long)(r->amount % 100));
    /* trade_no names a suspense payment (not the order's) exactly. */
    bool by_txn = r->txn_id && r->txn_id[0], nomem = false;
    json_t *biz = json_pack("{s:s, s:s, s:s}", by_txn ? "trade_no" : "out_trade_no",
                            by_txn ? r->txn_id : r->out_trade_no, "refund_amount", yuan,
                            "out_request_no", r->out_refund_no);
    json_t *n =
        signed_call(a, ALIPAY_REFUND, biz, &out->http_status, out->code, sizeof out->code, &nomem);
    json_decref(biz);
    if (nomem)
        return PO_ERR_NOMEM;
    const char *c = po_json_str(n, "code"), *sub = po_json_str(n, "sub_code");
    if (!n) {
        /* no decisive answer: out->code says why */
    } else if (c && strcmp(c, "10000") == 0) {
        out->decision = PO_REFUND_SUBMITTED;
    } else {
        bool final =
            c && (strcmp(c, "40002") == 0 || strcmp(c, "40004") == 0 || strcmp(c, "40006") == 0) &&
            !(sub && strstr(sub, "SYSTEM_ERROR"));
        if (final)
            out->decision = PO_REFUND_REJECTED;
        po_channel_clean_code(sub ? sub : c, out->http_status, out->code, sizeof out->code);
    }
    json_decref(n);
    return PO_OK;
}

/* signed_call for a method whose biz_content names one trade by
 * out_trade_no; *rc PO_ERR_NOMEM on out-of-memory. */
static json_t *trade_call(const struct po_channel_account *a, const char *method,
                          const char *out_trade_no, long *status, char *why, size_t cap, po_err *rc)
{
    json_t *biz = json_pack("{s:s}", "out_trade_no", out_trade_no);
    bool nomem = false;
    json_t *n = signed_call(a, method, biz, status, why, cap, &nomem);
    json_decref(biz);
    *rc = nomem ? PO_ERR_NOMEM : PO_OK;
    return n;
}

/* 40004 ACQ.TRADE_NOT_EXIST: the buyer never opened the cashier. */
static bool trade_not_exist(const char *code, const char *sub)
{
    return code && strcmp(code, "40004") == 0 && sub && strcmp(sub, "ACQ.TRADE_NOT_EXIST") == 0;
}

/* ---- active query: alipay.trade.query ---- */

#define ALIPAY_QUERY "alipay.trade.query"

/* TRADE_SUCCESS / TRADE_FINISHED: paid, the event the notification would
 * have made (same type and trade_no: the same key); WAIT_BUYER_PAY,
 * TRADE_CLOSED and 40004 ACQ.TRADE_NOT_EXIST (the buyer never opened the
 * cashier): not paid; anything else decides nothing. */
po_err po_alipay_order_query(const struct po_channel_account *a, const struct po_order_ref *o,
                             struct po_query_answer *out)
{
    const char *out_trade_no = o->out_trade_no;
    memset(out, 0, sizeof *out);
    out->state = PO_QUERY_FAILED;
    po_err rc = PO_OK;
    json_t *n = trade_call(a, ALIPAY_QUERY, out_trade_no, &out->http_status, out->why,
                           sizeof out->why, &rc);
    if (!n)
        return rc;
    const char *code = po_json_str(n, "code"), *sub = po_json_str(n, "sub_code"),
               *status = po_json_str(n, "trade_status");
    bool ok = code && strcmp(code, "10000") == 0;
    if (!ok && trade_not_exist(code, sub)) {
        out->state = PO_QUERY_NOT_PAID;
    } else if (!ok || !status) {
        po_channel_clean_code(sub ? sub : code, out->http_status, out->why, sizeof out->why);
    } else if (strcmp(status, "TRADE_SUCCESS") != 0 && strcmp(status, "TRADE_FINISHED") != 0) {
        out->state = PO_QUERY_NOT_PAID;
    } else {
        const char *no = po_json_str(n, "out_trade_no");
        int64_t amount = 0;
        bool named = no && strcmp(no, out_trade_no) == 0 &&
                     po_parse_major_amount(po_json_str(n, "total_amount"), &amount) == PO_OK;
        po_query_paid(a, out_trade_no, po_json_str(n, "trade_no"), named ? amount : 0, "CNY", out);
    }
    json_decref(n);
    return PO_OK;
}

/* ---- close: alipay.trade.close ---- */

#define ALIPAY_CLOSE "alipay.trade.close"

/* 10000 closed it; 40004 ACQ.TRADE_NOT_EXIST: the buyer never opened the
 * cashier, nothing can be paid. Another 40004 (ACQ.TRADE_STATUS_ERROR: paid
 * or closed already) is a refusal the query settles; the rest decides
 * nothing. */
po_err po_alipay_order_close(const struct po_channel_account *a, const struct po_order_ref *o,
                             struct po_close_answer *out)
{
    const char *out_trade_no = o->out_trade_no;
    memset(out, 0, sizeof *out);
    out->state = PO_CLOSE_FAILED;
    po_err rc = PO_OK;
    json_t *n = trade_call(a, ALIPAY_CLOSE, out_trade_no, &out->http_status, out->why,
                           sizeof out->why, &rc);
    if (!n)
        return rc;
    const char *code = po_json_str(n, "code"), *sub = po_json_str(n, "sub_code");
    if (code && strcmp(code, "10000") == 0) {
        out->state = PO_CLOSE_CLOSED;
    } else if (trade_not_exist(code, sub)) {
        out->state = PO_CLOSE_CLOSED;
    } else {
        if (code && strcmp(code, "40004") == 0 && !(sub && strstr(sub, "SYSTEM_ERROR")))
            out->state = PO_CLOSE_REFUSED;
        po_channel_clean_code(sub ? sub : code, out->http_status, out->why, sizeof out->why);
    }
    json_decref(n);
    return PO_OK;
}

/* ---- creating the payment: precreate (QR), page / wap pay (the browser's) ---- */

#define ALIPAY_PRECREATE "alipay.trade.precreate"

/* biz_content of the payment: yuan, the subject, Beijing time_expire. */
static json_t *pay_biz(const struct po_pay_request *r, const char *product_code)
{
    char yuan[32], te[24];
    (void)snprintf(yuan, sizeof yuan, "%lld.%02lld", (long long)(r->amount / 100),
                   (long long)(r->amount % 100));
    json_t *j = json_pack("{s:s}", "out_trade_no", r->out_trade_no);
    if (j && product_code)
        json_object_set_new(j, "product_code", json_string(product_code));
    if (j) {
        json_object_set_new(j, "total_amount", json_string(yuan));
        json_object_set_new(
            j, "subject",
            json_string(r->description && *r->description ? r->description : r->out_trade_no));
    }
    if (j && r->expires_at) {
        beijing_time(r->expires_at, te, sizeof te);
        json_object_set_new(j, "time_expire", json_string(te));
    }
    return j;
}

/* precreate: 10000 with qr_code creates; 40002 / 40004 (not a
 * SYSTEM_ERROR: a reused out_trade_no with other parameters is
 * ACQ.CONTEXT_INCONSISTENT, a paid one ACQ.TRADE_HAS_SUCCESS) refuses; the
 * rest decides nothing. page / wap pay are not server calls: the signed
 * request is handed to the buyer's browser (a form that submits itself,
 * or the same as one GET URL), and Alipay creates the trade when the
 * buyer opens it. Alipay takes CNY only. */
po_err po_alipay_pay_create(const struct po_channel_account *a, const struct po_pay_request *r,
                            struct po_pay_answer *out)
{
    memset(out, 0, sizeof *out);
    out->state = PO_PAY_FAILED;
    if (!a->merchant_key) {
        (void)snprintf(out->why, sizeof out->why, "no_merchant_key");
        return PO_OK;
    }
    if (strcmp(r->currency, "CNY") != 0) {
        out->state = PO_PAY_REFUSED;
        (void)snprintf(out->why, sizeof out->why, "currency_not_supported");
        return PO_OK;
    }
    bool precreate = strcmp(r->pay_method, "precreate") == 0,
         page = strcmp(r->pay_method, "page") == 0;
    json_t *biz = pay_biz(r, precreate ? NULL : page ? "FAST_INSTANT_TRADE_PAY" : "QUICK_WAP_WAY");
    if (!biz)
        return PO_ERR_NOMEM;
    po_err rc = PO_OK;
    if (!precreate) {
        char ts[24], *form = NULL, *url = NULL, *text = po_json_dumps(biz, JSON_COMPACT);
        beijing_time((int64_t)time(NULL), ts, sizeof ts);
        rc = text ? po_alipay_browser_pay(a->merchant_key, a->api_base_url, po_alipay_of(a)->app_id,
                                          page ? "alipay.trade.page.pay" : "alipay.trade.wap.pay",
                                          a->notify_url, r->return_url, text, ts, &form, &url)
                  : PO_ERR_NOMEM;
        if (!rc && !(out->payment = json_pack("{s:s, s:s}", "form", form, "url", url)))
            rc = PO_ERR_NOMEM;
        if (!rc)
            out->state = PO_PAY_CREATED;
        free(text);
        free(form);
        free(url);
        json_decref(biz);
        return rc;
    }
    bool nomem = false;
    json_t *n =
        signed_call(a, ALIPAY_PRECREATE, biz, &out->http_status, out->why, sizeof out->why, &nomem);
    json_decref(biz);
    if (nomem)
        return PO_ERR_NOMEM;
    if (!n)
        return PO_OK;
    const char *code = po_json_str(n, "code"), *sub = po_json_str(n, "sub_code"),
               *qr = po_json_str(n, "qr_code"), *no = po_json_str(n, "out_trade_no");
    if (code && strcmp(code, "10000") == 0 && qr && *qr && strlen(qr) < 1024 &&
        (!no || strcmp(no, r->out_trade_no) == 0)) {
        if ((out->payment = json_pack("{s:s}", "qr_code", qr)))
            out->state = PO_PAY_CREATED;
        else
            rc = PO_ERR_NOMEM;
    } else {
        if (code && (strcmp(code, "40002") == 0 || strcmp(code, "40004") == 0) &&
            !(sub && strstr(sub, "SYSTEM_ERROR")))
            out->state = PO_PAY_REFUSED;
        po_channel_clean_code(sub ? sub : code, out->http_status, out->why, sizeof out->why);
    }
    json_decref(n);
    return rc;
}

/* ---- refund query: alipay.trade.fastpay.refund.query ---- */

#define ALIPAY_REFUND_QUERY "alipay.trade.fastpay.refund.query"

/* refund_status REFUND_SUCCESS: done — the event the refund's notification
 * makes (its id trade_no_out_request_no, the same key), with this refund's
 * own refund_amount (the notification carries the trade's cumulative
 * refund_fee, which the engine resolves to the same amount); 10000 without
 * refund_status: not refunded (yet): pending. Anything else decides
 * nothing. */
po_err po_alipay_refund_query(const struct po_channel_account *a, const struct po_refund_request *r,
                              struct po_refund_query_answer *out)
{
    memset(out, 0, sizeof *out);
    out->state = PO_RQ_FAILED;
    bool by_txn = r->txn_id && r->txn_id[0], nomem = false;
    json_t *biz =
        json_pack("{s:s, s:s}", by_txn ? "trade_no" : "out_trade_no",
                  by_txn ? r->txn_id : r->out_trade_no, "out_request_no", r->out_refund_no);
    json_t *n = biz ? signed_call(a, ALIPAY_REFUND_QUERY, biz, &out->http_status, out->why,
                                  sizeof out->why, &nomem)
                    : NULL;
    json_decref(biz);
    if (!biz || nomem)
        return PO_ERR_NOMEM;
    if (!n)
        return PO_OK;
    const char *code = po_json_str(n, "code"), *sub = po_json_str(n, "sub_code"),
               *st = po_json_str(n, "refund_status"), *trade = po_json_str(n, "trade_no"),
               *req = po_json_str(n, "out_request_no");
    int64_t amount = 0;
    if (!code || strcmp(code, "10000") != 0) {
        po_channel_clean_code(sub ? sub : code, out->http_status, out->why, sizeof out->why);
    } else if (!st || !*st) {
        out->state = PO_RQ_PENDING;
    } else if (strcmp(st, "REFUND_SUCCESS") != 0) {
        (void)snprintf(out->why, sizeof out->why, "unknown_status");
    } else if (!trade || (req && strcmp(req, r->out_refund_no) != 0) ||
               po_parse_major_amount(po_json_str(n, "refund_amount"), &amount) != PO_OK) {
        (void)snprintf(out->why, sizeof out->why, "malformed_answer");
    } else {
        char rid[PO_TXN_ID_MAX + 1];
        if (po_fmt(rid, sizeof rid, "%s_%s", trade, r->out_refund_no))
            (void)snprintf(out->why, sizeof out->why, "malformed_answer");
        else
            po_query_refund(a, PO_EV_REFUND_SUCCESS, r, rid, trade, amount, "CNY", out);
    }
    json_decref(n);
    return PO_OK;
}

/* ---- the daily bill: alipay.data.dataservice.bill.downloadurl.query ---- */

#define ALIPAY_BILL_URL "alipay.data.dataservice.bill.downloadurl.query"

/* 10000 names the file (a zip, its URL valid 30 s), downloaded as it is:
 * bill_parse reads the zip; a day without trades is 40004
 * isp.bill_not_exist; anything else decides nothing (tried again). */
po_err po_alipay_bill_fetch(const struct po_channel_account *a, const char *date,
                            struct po_bill_fetch *out)
{
    memset(out, 0, sizeof *out);
    out->state = PO_BILL_FAILED;
    bool nomem = false;
    json_t *biz = json_pack("{s:s, s:s}", "bill_type", "trade", "bill_date", date);
    json_t *n = biz ? signed_call(a, ALIPAY_BILL_URL, biz, &out->http_status, out->why,
                                  sizeof out->why, &nomem)
                    : NULL;
    json_decref(biz);
    if (!biz || nomem)
        return PO_ERR_NOMEM;
    if (!n)
        return PO_OK;
    const char *code = po_json_str(n, "code"), *sub = po_json_str(n, "sub_code"),
               *url = po_json_str(n, "bill_download_url");
    po_err rc = PO_OK;
    if (code && strcmp(code, "40004") == 0 && sub && strcmp(sub, "isp.bill_not_exist") == 0) {
        out->state = PO_BILL_NONE;
    } else if (!code || strcmp(code, "10000") != 0) {
        po_channel_clean_code(sub ? sub : code, out->http_status, out->why, sizeof out->why);
    } else if (!url || strlen(url) > 2048 ||
               (strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0)) {
        (void)snprintf(out->why, sizeof out->why, "malformed_answer");
    } else {
        struct po_api_resp d;
        rc = po_api_download(url, NULL, 0, PO_BILL_MAX, &d);
        if (!rc && d.status == 200) {
            out->state = PO_BILL_FETCHED;
            out->data = d.body; /* taken */
            out->len = d.len;
            d.body = NULL;
        } else if (!rc && d.status == 0) {
            po_api_why_none(&d, out->why, sizeof out->why);
        } else if (!rc) {
            (void)snprintf(out->why, sizeof out->why, "download_HTTP_%ld", d.status);
        }
        if (!rc)
            po_api_resp_release(&d);
    }
    json_decref(n);
    return rc;
}
