/*
 * alipay_api.c — calls to the Alipay open platform gateway (alipay.trade.*):
 * the common parameters plus biz_content, signed RSA2 with the app's private
 * key over the sorted parameters (sign_type included), POSTed as a form; and
 * the answer's signature: Alipay signs the raw text of the
 * "<method>_response" member (dots as underscores) with its key, in a
 * top-level "sign" member.
 */
#include "channel_int.h"
#include <stdarg.h>

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

/* The parameters alipay-sdk sends in the gateway URL's query string (its
 * formatUrl: the common parameters); every other one — biz_content — goes
 * in the form body. */
static bool in_url(const char *key)
{
    static const char *const url_args[] = {"app_id",        "method",
                                           "format",        "charset",
                                           "sign_type",     "sign",
                                           "timestamp",     "version",
                                           "notify_url",    "return_url",
                                           "auth_token",    "app_auth_token",
                                           "app_cert_sn",   "alipay_root_cert_sn",
                                           "ws_service_url"};
    for (size_t i = 0; i < sizeof url_args / sizeof url_args[0]; i++)
        if (strcmp(key, url_args[i]) == 0)
            return true;
    return false;
}

/* One gateway request's own parameters. */
struct gw_params {
    const char *method;
    const char *format;     /* "JSON"; NULL for the browser's (pageExecute sends none) */
    const char *ts;         /* Beijing time */
    const char *notify_url; /* NULL or "": none */
    const char *return_url;
    const char *biz_content;
};

/* A gateway request's parameters in alipay-sdk's order (its sign(): the
 * common ones, the call's own, the certificate SNs, biz_content; empty
 * values left out), signed RSA2 with the app's key: sign comes last. */
static po_err request_form(const struct po_alipay_app *app, const struct gw_params *p,
                           struct po_form *f)
{
    const char *k[] = {"method",
                       "app_id",
                       "format",
                       "charset",
                       "version",
                       "sign_type",
                       "timestamp",
                       "notify_url",
                       "return_url",
                       "app_cert_sn",
                       "alipay_root_cert_sn",
                       "biz_content"};
    const char *v[] = {p->method,
                       app->app_id,
                       p->format,
                       "utf-8",
                       "1.0",
                       "RSA2",
                       p->ts,
                       p->notify_url,
                       p->return_url,
                       app->app_cert_sn,
                       app->root_cert_sn,
                       p->biz_content};
    po_err rc = PO_OK;
    for (size_t i = 0; i < sizeof k / sizeof k[0] && !rc; i++)
        if (v[i] && *v[i])
            rc = po_form_add(f, k[i], v[i]);
    return rc ? rc : po_alipay_sign_form(app->key, f, false);
}

/* f's parameters as alipay-sdk sends them: the URL's (in_url) encoded
 * into *qs, the rest into *body (both heap, "" when none). */
static po_err split_form(const struct po_form *f, char **qs, char **body)
{
    *qs = *body = NULL;
    struct po_form *q = calloc(1, sizeof *q), *b = calloc(1, sizeof *b);
    po_err rc = q && b ? PO_OK : PO_ERR_NOMEM;
    for (int i = 0; !rc && i < f->n; i++)
        rc = po_form_add(in_url(f->p[i].key) ? q : b, f->p[i].key, f->p[i].val);
    if (!rc && (!(*qs = po_form_encode(q, NULL)) || !(*body = po_form_encode(b, NULL))))
        rc = PO_ERR_NOMEM;
    if (rc) {
        free(*qs);
        free(*body);
        *qs = *body = NULL;
    }
    if (q)
        po_form_free(q);
    if (b)
        po_form_free(b);
    free(q);
    free(b);
    return rc;
}

/* base + '?' (or '&' when it has a query already) + qs, heap. */
static char *url_with(const char *base, const char *qs)
{
    size_t len = strlen(base) + strlen(qs) + 2;
    char *u = malloc(len);
    if (u)
        (void)snprintf(u, len, "%s%c%s", base, strchr(base, '?') ? '&' : '?', qs);
    return u;
}

/* The methods whose answer Alipay notifies later (the payment, the
 * refund): the request names where (notify_url). */
static bool notified(const char *method)
{
    return strcmp(method, "alipay.trade.precreate") == 0 ||
           strcmp(method, "alipay.trade.refund") == 0;
}

void po_alipay_app_of(const struct po_channel_account *a, struct po_alipay_app *out)
{
    const struct po_alipay_account *ali = po_alipay_of(a);
    *out =
        (struct po_alipay_app){a->merchant_key, ali->app_id, ali->app_cert_sn, ali->root_cert_sn};
}

po_err po_alipay_call(const struct po_channel_account *a, const char *method,
                      const char *biz_content, struct po_api_resp *out)
{
    memset(out, 0, sizeof *out);
    if (!a->merchant_key)
        return PO_ERR_INVALID;
    char ts[24], *qs = NULL, *body = NULL, *url = NULL;
    beijing_time((int64_t)time(NULL), ts, sizeof ts);
    struct po_alipay_app app;
    po_alipay_app_of(a, &app);
    struct gw_params p = {method, "JSON",     ts, notified(method) ? a->notify_url : NULL,
                          NULL,   biz_content};
    struct po_form *f = calloc(1, sizeof *f);
    po_err rc = f ? request_form(&app, &p, f) : PO_ERR_NOMEM;
    if (!rc)
        rc = split_form(f, &qs, &body);
    if (!rc && !(url = url_with(a->api_base_url, qs)))
        rc = PO_ERR_NOMEM;
    if (f)
        po_form_free(f);
    free(f);
    if (!rc) {
        const char *h[] = {"Accept: application/json",
                           "Content-Type: application/x-www-form-urlencoded;charset=utf-8"};
        rc = po_api_request(url, h, 2, body, PO_API_RESP_MAX, out);
    }
    free(qs);
    free(body);
    free(url);
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

po_err po_alipay_browser_pay(const struct po_alipay_app *app, const char *gateway,
                             const char *method, const char *notify_url, const char *return_url,
                             const char *biz_content, const char *ts, char **form_html, char **url)
{
    *form_html = *url = NULL;
    struct gw_params p = {method, NULL, ts, notify_url, return_url, biz_content};
    struct po_form *f = calloc(1, sizeof *f);
    char *qs = NULL, *body = NULL, *action = NULL, *u = NULL, *html = NULL;
    po_err rc = f ? request_form(app, &p, f) : PO_ERR_NOMEM;
    /* the form's action carries the URL's parameters (sign among them),
     * biz_content is a hidden input; the GET URL is the action and the
     * body's parameters after it (pageExecute's two forms). The action is
     * written as the SDK writes it, the configured gateway HTML-escaped
     * and the encoded query (no quote or angle bracket in it) as it is. */
    if (!rc)
        rc = split_form(f, &qs, &body);
    if (!rc && (!(action = url_with(gateway, qs)) || !(u = url_with(action, body))))
        rc = PO_ERR_NOMEM;
    size_t len = 0, cap = 0;
    if (!rc &&
        !(put(&html, &len, &cap, "<form action=\"", false) &&
          put(&html, &len, &cap, gateway, true) &&
          put(&html, &len, &cap, action + strlen(gateway), false) &&
          put(&html, &len, &cap,
              "\" method=\"post\" name=\"alipaySDKSubmit\" id=\"alipaySDKSubmit\">"
              "<input type=\"hidden\" name=\"biz_content\" value=\"",
              false) &&
          put(&html, &len, &cap, biz_content, true) &&
          put(&html, &len, &cap,
              "\" /></form><script>document.forms[\"alipaySDKSubmit\"].submit();</script>", false)))
        rc = PO_ERR_NOMEM;
    if (!rc) {
        *form_html = html;
        *url = u;
    } else {
        free(html);
        free(u);
    }
    free(qs);
    free(body);
    free(action);
    if (f)
        po_form_free(f);
    free(f);
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

/* The key an answer is verified with: Alipay's public key; in certificate
 * mode the certificate the answer names (alipay_cert_sn: NULL when it is
 * none of the tenant's), or the first one when it names none (as
 * alipay-sdk does). */
static const struct po_pubkey *answer_key(const struct po_channel_account *a, const char *sn)
{
    if (!po_alipay_of(a)->app_cert_sn[0] || !sn)
        return a->nkeys ? a->keys[0].key : NULL;
    for (int i = 0; i < a->nkeys; i++)
        if (strcmp(a->keys[i].serial, sn) == 0)
            return a->keys[i].key;
    return NULL;
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
    const struct po_pubkey *key = NULL;
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
    else if (!(key = answer_key(a, po_json_str(root, "alipay_cert_sn"))))
        why = "unknown_cert_sn";
    else if (po_rsa_sha256_verify(key, text, tlen, raw, raw_len))
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

/* ---- Alipay's error answers (docs/channels.md, "Error answers: Alipay") ----
 *
 * An answer whose code is not 10000 decides only what Alipay documents it
 * to mean for the method (its sub_code, below); every other one — the
 * gateway's and the business system's failures (20000 isp.unknow-error,
 * aop.unknow-error, aop.ACQ.SYSTEM_ERROR; 40004 ACQ.SYSTEM_ERROR), the
 * configuration's (40001 / 40002 isv.*: the key, the app id, the
 * certificates; 40006 permissions), a sub_code not documented for the
 * method — decides nothing: the order stays, the refund stays pending,
 * and the call is made again later (the code recorded for operators).
 * Alipay's rate limit (40005 isv.app-call-limited /
 * isv.method-call-limited) decides nothing and says so (throttled): the
 * rounds stop asking for the account until their next turn. */

struct ali_rule {
    const char *method;
    const char *sub; /* the documented sub_code */
    int state;       /* the method's answer state it decides */
};

static const struct ali_rule ali_rules[] = {
    /* alipay.trade.refund (opendocs 02ekfs): refused for good — closed,
     * its reservation released, an alert raised */
    {"alipay.trade.refund", "ACQ.TRADE_NOT_EXIST", PO_REFUND_REJECTED},
    {"alipay.trade.refund", "ACQ.TRADE_STATUS_ERROR", PO_REFUND_REJECTED},
    {"alipay.trade.refund", "ACQ.TRADE_HAS_CLOSE", PO_REFUND_REJECTED},
    {"alipay.trade.refund", "ACQ.TRADE_HAS_FINISHED", PO_REFUND_REJECTED},
    {"alipay.trade.refund", "ACQ.TRADE_NOT_ALLOW_REFUND", PO_REFUND_REJECTED},
    {"alipay.trade.refund", "ACQ.NOT_ALLOW_PARTIAL_REFUND", PO_REFUND_REJECTED},
    {"alipay.trade.refund", "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL", PO_REFUND_REJECTED},
    {"alipay.trade.refund", "ACQ.REASON_TRADE_REFUND_FEE_ERR", PO_REFUND_REJECTED},
    {"alipay.trade.refund", "ACQ.DISCORDANT_REPEAT_REQUEST", PO_REFUND_REJECTED},
    {"alipay.trade.refund", "ACQ.INVALID_PARAMETER", PO_REFUND_REJECTED},
    /* … and pending, submitted again later: the seller's balance topped
     * up, the trade unfrozen (ACQ.SELLER_BALANCE_NOT_ENOUGH,
     * ACQ.REASON_TRADE_BEEN_FREEZEN, ACQ.SYSTEM_ERROR: the default) */
    /* alipay.trade.query (02ekfq): the buyer never opened the cashier */
    {"alipay.trade.query", "ACQ.TRADE_NOT_EXIST", PO_QUERY_NOT_PAID},
    /* alipay.trade.close (02o6e8): never created there, nothing to pay;
     * paid or no longer open: refused, the query decides */
    {"alipay.trade.close", "ACQ.TRADE_NOT_EXIST", PO_CLOSE_CLOSED},
    {"alipay.trade.close", "ACQ.TRADE_STATUS_ERROR", PO_CLOSE_REFUSED},
    {"alipay.trade.close", "ACQ.REASON_TRADE_STATUS_INVALID", PO_CLOSE_REFUSED},
    {"alipay.trade.close", "ACQ.REASON_ILLEGAL_STATUS", PO_CLOSE_REFUSED},
    /* alipay.trade.precreate (02ekfg): refused, 409 channel_refused (a paid
     * order's payment is the query's to find) */
    {"alipay.trade.precreate", "ACQ.TRADE_HAS_SUCCESS", PO_PAY_REFUSED},
    {"alipay.trade.precreate", "ACQ.TRADE_HAS_CLOSE", PO_PAY_REFUSED},
    {"alipay.trade.precreate", "ACQ.CONTEXT_INCONSISTENT", PO_PAY_REFUSED},
    {"alipay.trade.precreate", "ACQ.TOTAL_FEE_EXCEED", PO_PAY_REFUSED},
    {"alipay.trade.precreate", "ACQ.EXIST_FORBIDDEN_WORD", PO_PAY_REFUSED},
    {"alipay.trade.precreate", "ACQ.BUYER_SELLER_EQUAL", PO_PAY_REFUSED},
    {"alipay.trade.precreate", "ACQ.TRADE_BUYER_NOT_MATCH", PO_PAY_REFUSED},
    {"alipay.trade.precreate", "ACQ.INVALID_PARAMETER", PO_PAY_REFUSED},
    {"alipay.trade.precreate", "ACQ.ACCESS_FORBIDDEN", PO_PAY_REFUSED},
    {"alipay.trade.precreate", "ACQ.PARTNER_ERROR", PO_PAY_REFUSED},
    /* alipay.trade.fastpay.refund.query (02ekft): no such trade, so no
     * such refund (the refund table prints both spellings) */
    {"alipay.trade.fastpay.refund.query", "ACQ.TRADE_NOT_EXIST", PO_RQ_NOT_FOUND},
    {"alipay.trade.fastpay.refund.query", "TRADE_NOT_EXIST", PO_RQ_NOT_FOUND},
    /* alipay.data.dataservice.bill.downloadurl.query (02ekfu): no bill, no
     * trades that day */
    {"alipay.data.dataservice.bill.downloadurl.query", "isp.bill_not_exist", PO_BILL_NONE},
};

/* The state Alipay's (code, sub) answer to method decides (ali_rules), or
 * undecided; *throttled when it is Alipay's rate limit. */
static int decide(const char *method, const char *code, const char *sub, int undecided,
                  bool *throttled)
{
    *throttled = code && strcmp(code, "40005") == 0;
    for (size_t i = 0; !*throttled && sub && i < sizeof ali_rules / sizeof ali_rules[0]; i++)
        if (strcmp(ali_rules[i].method, method) == 0 && strcmp(ali_rules[i].sub, sub) == 0)
            return ali_rules[i].state;
    return undecided;
}

/* decide() for an answer n whose code is not 10000, its code (the sub_code
 * when there is one) said in why. */
static int refused_state(const char *method, json_t *n, int undecided, bool *throttled, long status,
                         char *why, size_t cap)
{
    const char *code = po_json_str(n, "code"), *sub = po_json_str(n, "sub_code");
    int state = decide(method, code, sub, undecided, throttled);
    po_channel_clean_code(sub ? sub : code, status, why, cap);
    return state;
}

/* signed_call with a biz_content of string fields: name, value pairs,
 * ended by NULL (a NULL value, or one that is not UTF-8, fails as
 * out-of-memory did for json_pack). *out_n: the verified response (the
 * caller json_decrefs), or NULL, why saying why. Non-OK only for
 * out-of-memory. */
static po_err biz_call(const struct po_channel_account *a, const char *method, long *status,
                       char *why, size_t cap, json_t **out_n, ...) __attribute__((sentinel));
static po_err biz_call(const struct po_channel_account *a, const char *method, long *status,
                       char *why, size_t cap, json_t **out_n, ...)
{
    json_t *biz = json_object();
    va_list ap;
    va_start(ap, out_n);
    for (const char *k = va_arg(ap, const char *); biz && k; k = va_arg(ap, const char *)) {
        const char *v = va_arg(ap, const char *);
        if (!v || json_object_set_new(biz, k, json_string(v))) {
            json_decref(biz);
            biz = NULL;
        }
    }
    va_end(ap);
    bool nomem = false;
    *out_n = signed_call(a, method, biz, status, why, cap, &nomem);
    json_decref(biz);
    return nomem ? PO_ERR_NOMEM : PO_OK;
}

/* ---- refund submission: alipay.trade.refund ---- */

#define ALIPAY_REFUND "alipay.trade.refund"

/* out_request_no = out_refund_no (Alipay is idempotent on it per trade:
 * the same request again is the same refund, fund_change N). Only an
 * answer signed with the Alipay key decides: 10000 submitted (the
 * refund's notification or the refund query completes it); a sub_code of
 * ali_rules rejected; anything else, unsigned, no answer: pending,
 * submitted again later. */
po_err po_alipay_refund_submit(const struct po_channel_account *a,
                               const struct po_refund_request *r, struct po_refund_answer *out)
{
    memset(out, 0, sizeof *out);
    out->decision = PO_REFUND_PENDING;
    char yuan[32];
    (void)snprintf(yuan, sizeof yuan, "%lld.%02lld", (long long)(r->amount / 100),
                   (long long)(r->amount % 100));
    /* trade_no names a suspense payment (not the order's) exactly. */
    bool by_txn = r->txn_id && r->txn_id[0];
    json_t *n = NULL;
    if (biz_call(a, ALIPAY_REFUND, &out->http_status, out->code, sizeof out->code, &n,
                 by_txn ? "trade_no" : "out_trade_no", by_txn ? r->txn_id : r->out_trade_no,
                 "refund_amount", yuan, "out_request_no", r->out_refund_no, (char *)NULL))
        return PO_ERR_NOMEM;
    const char *c = po_json_str(n, "code");
    if (!n) {
        /* no decisive answer: out->code says why */
    } else if (c && strcmp(c, "10000") == 0) {
        out->decision = PO_REFUND_SUBMITTED;
    } else {
        out->decision = refused_state(ALIPAY_REFUND, n, PO_REFUND_PENDING, &out->throttled,
                                      out->http_status, out->code, sizeof out->code);
    }
    json_decref(n);
    return PO_OK;
}

/* ---- active query: alipay.trade.query ---- */

#define ALIPAY_QUERY "alipay.trade.query"

/* TRADE_SUCCESS / TRADE_FINISHED: paid, the event the notification would
 * have made (same type and trade_no: the same key); WAIT_BUYER_PAY,
 * TRADE_CLOSED and 40004 ACQ.TRADE_NOT_EXIST (the buyer never opened the
 * cashier): not paid; anything else decides nothing (throttled: Alipay's
 * rate limit). */
po_err po_alipay_order_query(const struct po_channel_account *a, const struct po_order_ref *o,
                             struct po_query_answer *out)
{
    const char *out_trade_no = o->out_trade_no;
    memset(out, 0, sizeof *out);
    out->state = PO_QUERY_FAILED;
    json_t *n = NULL;
    po_err rc = biz_call(a, ALIPAY_QUERY, &out->http_status, out->why, sizeof out->why, &n,
                         "out_trade_no", out_trade_no, (char *)NULL);
    if (!n)
        return rc;
    const char *code = po_json_str(n, "code"), *sub = po_json_str(n, "sub_code"),
               *status = po_json_str(n, "trade_status");
    bool ok = code && strcmp(code, "10000") == 0;
    if (!ok) {
        out->state = refused_state(ALIPAY_QUERY, n, PO_QUERY_FAILED, &out->throttled,
                                   out->http_status, out->why, sizeof out->why);
    } else if (!status) {
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
 * cashier, nothing can be paid. ACQ.TRADE_STATUS_ERROR (paid, or no
 * longer open) is a refusal the query settles; the rest decides nothing
 * (ali_rules). */
po_err po_alipay_order_close(const struct po_channel_account *a, const struct po_order_ref *o,
                             struct po_close_answer *out)
{
    const char *out_trade_no = o->out_trade_no;
    memset(out, 0, sizeof *out);
    out->state = PO_CLOSE_FAILED;
    json_t *n = NULL;
    po_err rc = biz_call(a, ALIPAY_CLOSE, &out->http_status, out->why, sizeof out->why, &n,
                         "out_trade_no", out_trade_no, (char *)NULL);
    if (!n)
        return rc;
    const char *code = po_json_str(n, "code");
    bool throttled = false;
    if (code && strcmp(code, "10000") == 0)
        out->state = PO_CLOSE_CLOSED;
    else
        out->state = refused_state(ALIPAY_CLOSE, n, PO_CLOSE_FAILED, &throttled, out->http_status,
                                   out->why, sizeof out->why);
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

/* precreate: 10000 with qr_code creates; a sub_code of ali_rules refuses
 * (a reused out_trade_no with other parameters is
 * ACQ.CONTEXT_INCONSISTENT, a paid one ACQ.TRADE_HAS_SUCCESS); the rest
 * decides nothing — the same request again is safe: Alipay answers the
 * same out_trade_no with the same parameters with the same QR code. page / wap pay are not server
 * calls: the signed request is handed to the buyer's browser (a form that submits itself, or the
 * same as one GET URL), and Alipay creates the trade when the buyer opens it. Alipay takes CNY
 * only. */
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
        struct po_alipay_app app;
        po_alipay_app_of(a, &app);
        rc = text ? po_alipay_browser_pay(&app, a->api_base_url,
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
    const char *code = po_json_str(n, "code"), *qr = po_json_str(n, "qr_code"),
               *no = po_json_str(n, "out_trade_no");
    if (code && strcmp(code, "10000") == 0 && qr && *qr && strlen(qr) < 1024 &&
        (!no || strcmp(no, r->out_trade_no) == 0)) {
        if ((out->payment = json_pack("{s:s}", "qr_code", qr)))
            out->state = PO_PAY_CREATED;
        else
            rc = PO_ERR_NOMEM;
    } else {
        bool throttled = false;
        out->state = refused_state(ALIPAY_PRECREATE, n, PO_PAY_FAILED, &throttled, out->http_status,
                                   out->why, sizeof out->why);
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
    bool by_txn = r->txn_id && r->txn_id[0];
    json_t *n = NULL;
    po_err rc = biz_call(a, ALIPAY_REFUND_QUERY, &out->http_status, out->why, sizeof out->why, &n,
                         by_txn ? "trade_no" : "out_trade_no", by_txn ? r->txn_id : r->out_trade_no,
                         "out_request_no", r->out_refund_no, (char *)NULL);
    if (!n)
        return rc;
    const char *code = po_json_str(n, "code"), *st = po_json_str(n, "refund_status"),
               *trade = po_json_str(n, "trade_no"), *req = po_json_str(n, "out_request_no");
    int64_t amount = 0;
    if (!code || strcmp(code, "10000") != 0) {
        out->state = refused_state(ALIPAY_REFUND_QUERY, n, PO_RQ_FAILED, &out->throttled,
                                   out->http_status, out->why, sizeof out->why);
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
    json_t *n = NULL;
    po_err rc = biz_call(a, ALIPAY_BILL_URL, &out->http_status, out->why, sizeof out->why, &n,
                         "bill_type", "trade", "bill_date", date, (char *)NULL);
    if (!n)
        return rc;
    const char *code = po_json_str(n, "code"), *url = po_json_str(n, "bill_download_url");
    bool throttled = false;
    if (!code || strcmp(code, "10000") != 0) {
        out->state = refused_state(ALIPAY_BILL_URL, n, PO_BILL_FAILED, &throttled, out->http_status,
                                   out->why, sizeof out->why);
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
