/*
 * build.c — real-format signed callbacks (see sim.h).
 */
#include "sim.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

void po_sim_request_free(struct po_sim_request *r)
{
    free(r->body);
    memset(r, 0, sizeof *r);
}

void po_sim_set_header(struct po_sim_request *r, const char *name, const char *value)
{
    int i = 0;
    while (i < r->nheaders && strcasecmp(r->name[i], name) != 0)
        i++;
    PO_ASSERT(i < PO_SIM_HEADERS_MAX);
    PO_ASSERT(po_strcpy(r->name[i], sizeof r->name[i], name) == PO_OK);
    PO_ASSERT(po_strcpy(r->value[i], sizeof r->value[i], value) == PO_OK);
    if (i == r->nheaders)
        r->nheaders++;
}

const char *po_sim_get_header(const struct po_sim_request *r, const char *name)
{
    for (int i = 0; i < r->nheaders; i++)
        if (strcasecmp(r->name[i], name) == 0)
            return r->value[i];
    return NULL;
}

static void random_token(char *out, size_t n)
{
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char raw[64];
    PO_ASSERT(n < sizeof raw && po_random(raw, n) == PO_OK);
    for (size_t i = 0; i < n; i++)
        out[i] = alphabet[raw[i] % (sizeof alphabet - 1)];
    out[n] = '\0';
}

/* What WeChat Pay writes as a notification's summary. */
static const char *wx_summary(const char *event_type)
{
    static const char *const map[][2] = {{"TRANSACTION.SUCCESS", "支付成功"},
                                         {"REFUND.SUCCESS", "退款成功"},
                                         {"REFUND.ABNORMAL", "退款异常"},
                                         {"REFUND.CLOSED", "退款关闭"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i][0], event_type) == 0)
            return map[i][1];
    return "通知";
}

po_err po_sim_wechatpay(const struct po_privkey *key, const char *serial,
                        const unsigned char *apiv3_key, size_t apiv3_key_len,
                        const char *event_type, const char *resource_json, int64_t ts,
                        struct po_sim_request *out)
{
    return po_sim_wechatpay_event(key, serial, apiv3_key, apiv3_key_len, event_type, NULL,
                                  resource_json, ts, out);
}

po_err po_sim_wechatpay_event(const struct po_privkey *key, const char *serial,
                              const unsigned char *apiv3_key, size_t apiv3_key_len,
                              const char *event_type, const struct po_sim_wx_envelope *env,
                              const char *resource_json, int64_t ts, struct po_sim_request *out)
{
    memset(out, 0, sizeof *out);
    char nonce[13], id[40], created[40];
    random_token(nonce, 12);
    /* "EV-" and 19 digits, as WeChat's notification ids look. */
    unsigned char rnd[19];
    PO_ASSERT(po_random(rnd, sizeof rnd) == PO_OK);
    memcpy(id, "EV-", 3);
    for (int i = 0; i < 19; i++)
        id[3 + i] = (char)('0' + rnd[i] % 10);
    id[22] = '\0';
    time_t bj = (time_t)(ts + 8 * 3600);
    struct tm tm;
    gmtime_r(&bj, &tm);
    (void)strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%S+08:00", &tm);
    const char *aad = strncmp(event_type, "REFUND", 6) == 0 ? "refund" : "transaction";
    unsigned char *ct = NULL;
    size_t ct_len = 0;
    char *ct_b64 = NULL;
    po_err rc = po_aes_gcm_encrypt(
        apiv3_key, apiv3_key_len, (const unsigned char *)nonce, 12, (const unsigned char *)aad,
        strlen(aad), (const unsigned char *)resource_json, strlen(resource_json), &ct, &ct_len);
    if (rc)
        return rc;
    rc = po_b64_encode(ct, ct_len, &ct_b64);
    if (rc)
        goto out;
    json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s}}", "id",
                             env && env->id ? env->id : id, "create_time",
                             env && env->create_time ? env->create_time : created, "resource_type",
                             "encrypt-resource", "event_type", event_type, "summary",
                             env && env->summary ? env->summary : wx_summary(event_type),
                             "resource", "original_type", aad, "algorithm", "AEAD_AES_256_GCM",
                             "ciphertext", ct_b64, "associated_data", aad, "nonce", nonce);
    out->body = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!out->body) {
        rc = PO_ERR_NOMEM;
        goto out;
    }
    out->body_len = strlen(out->body);
    out->content_type = "application/json";
    rc = po_sim_wechatpay_sign(key, serial, out->body, out->body_len, ts, out);
out:
    if (rc)
        po_sim_request_free(out);
    free(ct_b64);
    free(ct);
    return rc;
}

po_err po_sim_wechatpay_sign(const struct po_privkey *key, const char *serial, const char *body,
                             size_t len, int64_t ts, struct po_sim_request *out)
{
    char nonce[33], tsbuf[24];
    char *sig = NULL;
    random_token(nonce, 32);
    (void)snprintf(tsbuf, sizeof tsbuf, "%lld", (long long)ts);
    size_t mlen = strlen(tsbuf) + strlen(nonce) + len + 3;
    char *msg = malloc(mlen);
    if (!msg)
        return PO_ERR_NOMEM;
    size_t j = (size_t)snprintf(msg, mlen, "%s\n%s\n", tsbuf, nonce);
    memcpy(msg + j, body, len);
    msg[j + len] = '\n';
    po_err rc = po_rsa_sha256_sign_b64(key, msg, mlen, &sig);
    free(msg);
    if (rc)
        return rc;
    po_sim_set_header(out, "Wechatpay-Serial", serial);
    po_sim_set_header(out, "Wechatpay-Signature", sig);
    po_sim_set_header(out, "Wechatpay-Timestamp", tsbuf);
    po_sim_set_header(out, "Wechatpay-Nonce", nonce);
    po_sim_set_header(out, "Wechatpay-Signature-Type", "WECHATPAY2-SHA256-RSA2048");
    free(sig);
    return PO_OK;
}

/* application/x-www-form-urlencoded encoding of one value into buf. */
static size_t form_encode(const char *s, char *buf, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t j = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        PO_ASSERT(j + 4 < cap);
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '*') {
            buf[j++] = (char)*p;
        } else if (*p == ' ') {
            buf[j++] = '+';
        } else {
            buf[j++] = '%';
            buf[j++] = hex[*p >> 4];
            buf[j++] = hex[*p & 15];
        }
    }
    buf[j] = '\0';
    return j;
}

struct kv {
    const char *k, *v;
};

static int kv_cmp(const void *a, const void *b)
{
    return strcmp(((const struct kv *)a)->k, ((const struct kv *)b)->k);
}

/* Alipay's sign content over n pairs: sorted by key, `sign` left out,
 * empty values too unless keep_empty (the Node SDK's way), `sign_type` too
 * unless with_type (a gateway request
 * signs it, a notification does not). Written independently of
 * src/channel/form.c so that each checks the other. */
static char *alipay_content(const char *const *keys, const char *const *values, int n,
                            bool with_type, bool keep_empty)
{
    PO_ASSERT(n >= 0 && n < 64);
    struct kv kv[64];
    int m = 0;
    size_t total = 1;
    for (int i = 0; i < n; i++) {
        if ((!*values[i] && !keep_empty) || strcmp(keys[i], "sign") == 0 ||
            (!with_type && strcmp(keys[i], "sign_type") == 0))
            continue;
        kv[m++] = (struct kv){keys[i], values[i]};
        total += strlen(keys[i]) + strlen(values[i]) + 2;
    }
    qsort(kv, (size_t)m, sizeof kv[0], kv_cmp);
    char *content = malloc(total);
    size_t j = 0;
    for (int i = 0; content && i < m; i++)
        j += (size_t)snprintf(content + j, total - j, "%s%s=%s", i ? "&" : "", kv[i].k, kv[i].v);
    if (content)
        content[j] = '\0';
    return content;
}

po_err po_sim_alipay(const struct po_privkey *key, const char *const *keys,
                     const char *const *values, int n, struct po_sim_request *out)
{
    return po_sim_alipay_sdk(key, keys, values, n, false, out);
}

po_err po_sim_alipay_sdk(const struct po_privkey *key, const char *const *keys,
                         const char *const *values, int n, bool keep_empty,
                         struct po_sim_request *out)
{
    memset(out, 0, sizeof *out);
    PO_ASSERT(n > 0 && n < 60);
    char *content = alipay_content(keys, values, n, false, keep_empty), *sig = NULL;
    if (!content)
        return PO_ERR_NOMEM;
    po_err rc = po_rsa_sha256_sign_b64(key, content, strlen(content), &sig);
    size_t cap = strlen(content) * 3 + strlen(sig ? sig : "") * 3 + 64 + (size_t)n * 8;
    for (int i = 0; i < n; i++)
        cap += strlen(keys[i]) * 3 + strlen(values[i]) * 3;
    free(content);
    if (rc)
        return rc;
    out->body = malloc(cap);
    if (!out->body) {
        free(sig);
        return PO_ERR_NOMEM;
    }
    size_t j = 0;
    for (int i = 0; i <= n; i++) {
        const char *k = i < n ? keys[i] : "sign";
        const char *v = i < n ? values[i] : sig;
        j += (size_t)snprintf(out->body + j, cap - j, "%s%s=", j ? "&" : "", k);
        j += form_encode(v, out->body + j, cap - j);
    }
    j += (size_t)snprintf(out->body + j, cap - j, "&sign_type=RSA2");
    out->body_len = j;
    out->content_type = "application/x-www-form-urlencoded; charset=utf-8";
    free(sig);
    return PO_OK;
}

bool po_sim_alipay_verify(const struct po_pubkey *key, const char *const *keys,
                          const char *const *values, int n)
{
    const char *sign = NULL, *type = NULL;
    for (int i = 0; i < n; i++) {
        if (strcmp(keys[i], "sign") == 0)
            sign = values[i];
        else if (strcmp(keys[i], "sign_type") == 0)
            type = values[i];
    }
    if (!sign || !type || strcmp(type, "RSA2") != 0)
        return false;
    char *content = alipay_content(keys, values, n, true, false);
    unsigned char *raw = NULL;
    size_t raw_len = 0;
    bool ok = content && po_b64_decode(sign, strlen(sign), &raw, &raw_len) == PO_OK &&
              po_rsa_sha256_verify(key, content, strlen(content), raw, raw_len) == PO_OK;
    free(raw);
    free(content);
    return ok;
}

char *po_sim_alipay_response(const struct po_privkey *key, const char *node, const char *inner)
{
    char *sig = NULL;
    if (po_rsa_sha256_sign_b64(key, inner, strlen(inner), &sig))
        return NULL;
    size_t cap = strlen(node) + strlen(inner) + strlen(sig) + 32;
    char *out = malloc(cap);
    if (out)
        (void)snprintf(out, cap, "{\"%s\":%s,\"sign\":\"%s\"}", node, inner, sig);
    free(sig);
    return out;
}

po_err po_sim_stripe(const unsigned char *secret, size_t secret_len, const char *payload,
                     int64_t ts, struct po_sim_request *out)
{
    memset(out, 0, sizeof *out);
    size_t len = strlen(payload);
    char tsbuf[24];
    (void)snprintf(tsbuf, sizeof tsbuf, "%lld", (long long)ts);
    size_t tl = strlen(tsbuf);
    char *msg = malloc(tl + 1 + len);
    out->body = malloc(len + 1);
    if (!msg || !out->body) {
        free(msg);
        po_sim_request_free(out);
        return PO_ERR_NOMEM;
    }
    memcpy(out->body, payload, len + 1);
    out->body_len = len;
    out->content_type = "application/json; charset=utf-8";
    po_sim_set_header(out, "User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)");
    memcpy(msg, tsbuf, tl);
    msg[tl] = '.';
    memcpy(msg + tl + 1, payload, len);
    unsigned char mac[32];
    po_err rc = po_hmac_sha256(secret, secret_len, msg, tl + 1 + len, mac);
    free(msg);
    if (rc) {
        po_sim_request_free(out);
        return rc;
    }
    char header[128];
    size_t j = (size_t)snprintf(header, sizeof header, "t=%s,v1=", tsbuf);
    for (int i = 0; i < 32; i++)
        j += (size_t)snprintf(header + j, sizeof header - j, "%02x", mac[i]);
    po_sim_set_header(out, "Stripe-Signature", header);
    return PO_OK;
}
