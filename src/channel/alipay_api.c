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

po_err po_alipay_call(const struct po_channel_account *a, const char *method,
                      const char *biz_content, struct po_api_resp *out)
{
    memset(out, 0, sizeof *out);
    if (!a->merchant_key)
        return PO_ERR_INVALID;
    char ts[24];
    time_t t = time(NULL) + 8 * 3600; /* the gateway wants Beijing time */
    struct tm tm;
    gmtime_r(&t, &tm);
    (void)strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", &tm);
    struct po_form *f = calloc(1, sizeof *f);
    if (!f)
        return PO_ERR_NOMEM;
    const char *k[] = {"app_id",    "method",  "format",     "charset",    "sign_type",
                       "timestamp", "version", "notify_url", "biz_content"};
    const char *v[] = {po_alipay_of(a)->app_id, method,     "JSON", "utf-8", "RSA2", ts, "1.0",
                       a->notify_url,           biz_content};
    po_err rc = PO_OK;
    for (size_t i = 0; i < sizeof k / sizeof k[0] && !rc; i++)
        if (*v[i])
            rc = po_form_add(f, k[i], v[i]);
    if (!rc)
        rc = po_alipay_sign_form(a->merchant_key, f, false);
    char *body = rc ? NULL : po_form_encode(f, NULL);
    po_form_free(f);
    free(f);
    if (!rc && !body)
        rc = PO_ERR_NOMEM;
    if (!rc) {
        const char *h[] = {"Accept: application/json",
                           "Content-Type: application/x-www-form-urlencoded;charset=utf-8"};
        rc = po_api_request(a->api_base_url, h, 2, body, out);
    }
    free(body);
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
    char yuan[32], why[PO_REASON_SIZE] = "";
    (void)snprintf(yuan, sizeof yuan, "%lld.%02lld", (long long)(r->amount / 100),
                   (long long)(r->amount % 100));
    /* trade_no names a suspense payment (not the order's) exactly. */
    bool by_txn = r->txn_id && r->txn_id[0];
    json_t *biz = json_pack("{s:s, s:s, s:s}", by_txn ? "trade_no" : "out_trade_no",
                            by_txn ? r->txn_id : r->out_trade_no, "refund_amount", yuan,
                            "out_request_no", r->out_refund_no);
    char *text = biz ? po_json_dumps(biz, JSON_COMPACT) : NULL;
    json_decref(biz);
    struct po_api_resp *resp = text ? malloc(sizeof *resp) : NULL;
    po_err rc = resp ? po_alipay_call(a, ALIPAY_REFUND, text, resp) : PO_ERR_NOMEM;
    free(text);
    if (rc == PO_ERR_INVALID) {
        (void)snprintf(out->code, sizeof out->code, "no_merchant_key");
        free(resp);
        return PO_OK;
    }
    if (rc) {
        free(resp);
        return rc;
    }
    out->http_status = resp->status;
    json_t *n = resp->status == 200
                    ? po_alipay_resp_verified(a, resp, ALIPAY_REFUND, why, sizeof why)
                    : NULL;
    const char *c = po_json_str(n, "code"), *sub = po_json_str(n, "sub_code");
    if (resp->status == 0) {
        (void)snprintf(out->code, sizeof out->code, "no_answer");
    } else if (resp->status != 200) {
        (void)snprintf(out->code, sizeof out->code, "HTTP_%ld", resp->status);
    } else if (!n) {
        (void)snprintf(out->code, sizeof out->code, "unsigned:%.20s", why);
    } else if (c && strcmp(c, "10000") == 0) {
        out->decision = PO_REFUND_SUBMITTED;
    } else {
        bool final =
            c && (strcmp(c, "40002") == 0 || strcmp(c, "40004") == 0 || strcmp(c, "40006") == 0) &&
            !(sub && strstr(sub, "SYSTEM_ERROR"));
        if (final)
            out->decision = PO_REFUND_REJECTED;
        po_channel_clean_code(sub ? sub : c, resp->status, out->code, sizeof out->code);
    }
    json_decref(n);
    free(resp);
    return PO_OK;
}
