/*
 * channel.c — what the adapters share: loading a tenant's stored channel
 * configuration (unsealing secrets), dispatch, exact amount parsing, acks.
 */
#include "channel.h"
#include "channel_int.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void po_channel_account_free(struct po_channel_account *a)
{
    for (int i = 0; i < a->nkeys; i++)
        po_pubkey_free(a->keys[i].key);
    po_pubkey_free(a->alipay_key);
    po_privkey_free(a->merchant_key);
    po_secure_zero(a, sizeof *a);
}

void po_notify_reject(struct po_notify_result *out, const char *reason, const char *fmt, ...)
{
    va_list ap;
    out->status = PO_NOTIFY_REJECT;
    PO_ASSERT(po_strcpy(out->reason, sizeof out->reason, reason) == PO_OK);
    va_start(ap, fmt);
    (void)vsnprintf(out->detail, sizeof out->detail, fmt, ap);
    va_end(ap);
}

void po_notify_mismatch(struct po_notify_result *out, const char *reason, const char *fmt, ...)
{
    va_list ap;
    out->status = PO_NOTIFY_MISMATCH;
    PO_ASSERT(po_strcpy(out->reason, sizeof out->reason, reason) == PO_OK);
    va_start(ap, fmt);
    (void)vsnprintf(out->detail, sizeof out->detail, fmt, ap);
    va_end(ap);
}

bool po_notify_window_ok(const struct po_channel_account *a, const char *ts, int64_t now,
                         struct po_notify_result *out)
{
    int64_t t = 0;
    if (po_parse_i64(ts, 0, INT64_C(99999999999), &t)) {
        po_notify_reject(out, "bad_timestamp", "the timestamp is not a Unix time");
        return false;
    }
    if (now - t > a->window_s || t - now > a->window_s) {
        po_notify_reject(out, t < now ? "stale_timestamp" : "future_timestamp",
                         "timestamp %lld is %lld s from now (window %lld s)", (long long)t,
                         (long long)(now - t), (long long)a->window_s);
        return false;
    }
    return true;
}

const char *po_json_str(json_t *obj, const char *name)
{
    json_t *v = json_object_get(obj, name);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

bool po_set_field(char *dst, size_t cap, const char *src)
{
    return src && po_strcpy(dst, cap, src) == PO_OK;
}

/* Unseals one secret field. */
static po_err secret(const char *tenant, const char *channel, const char *field,
                     const char *stored, const unsigned char *master, unsigned char *dst,
                     size_t cap, size_t *out_len, char *err, size_t errcap)
{
    char aad[PO_ID_MAX + PO_CHANNEL_MAX + 48];
    unsigned char *plain = NULL;
    size_t len = 0;
    po_err rc;
    if (!stored) {
        po_errf(err, errcap, "%s missing", field);
        return PO_ERR_INVALID;
    }
    (void)snprintf(aad, sizeof aad, "%s/%s/%s", tenant, channel, field);
    if (master)
        rc = po_unseal(master, aad, stored, &plain, &len);
    else if (strncmp(stored, "plain:", 6) == 0)
        rc = po_b64_decode(stored + 6, strlen(stored + 6), &plain, &len);
    else
        rc = PO_ERR_INVALID;
    if (rc) {
        po_errf(err, errcap, "%s cannot be unsealed%s", field,
                master ? " with this master key" : " without a master key");
        return PO_ERR_INVALID;
    }
    if (len == 0 || len > cap) {
        po_secure_zero(plain, len);
        free(plain);
        po_errf(err, errcap, "%s has a bad length", field);
        return PO_ERR_INVALID;
    }
    memcpy(dst, plain, len);
    *out_len = len;
    po_secure_zero(plain, len);
    free(plain);
    return PO_OK;
}

/* What the channel's own APIs need (refunds, queries): the base URL (the
 * channel's production one by default), where the channel sends refund
 * results, and the merchant's (Alipay: the app's) private key that signs
 * requests — sealed, with its serial where the channel wants one. */
static po_err load_api(json_t *root, const unsigned char *master, struct po_channel_account *a,
                       const char *default_base, bool need_serial, char *err, size_t errcap)
{
    if (!po_set_field(a->api_base_url, sizeof a->api_base_url, po_json_str(root, "api_base_url")))
        PO_ASSERT(po_strcpy(a->api_base_url, sizeof a->api_base_url, default_base) == PO_OK);
    if (po_json_str(root, "notify_url") &&
        !po_set_field(a->notify_url, sizeof a->notify_url, po_json_str(root, "notify_url"))) {
        po_errf(err, errcap, "notify_url too long");
        return PO_ERR_INVALID;
    }
    const char *mk = po_json_str(root, "merchant_private_key");
    if (!mk)
        return PO_OK;
    unsigned char pem[8192];
    size_t len = 0;
    po_err rc = secret(a->tenant, a->channel, "merchant_private_key", mk, master, pem, sizeof pem,
                       &len, err, errcap);
    if (!rc && ((need_serial && !po_set_field(a->merchant_serial, sizeof a->merchant_serial,
                                              po_json_str(root, "merchant_serial"))) ||
                po_privkey_from_pem((const char *)pem, len, &a->merchant_key))) {
        po_errf(err, errcap, "merchant private key or serial invalid");
        rc = PO_ERR_INVALID;
    }
    po_secure_zero(pem, sizeof pem);
    return rc;
}

static po_err load_wechatpay(json_t *root, const unsigned char *master,
                             struct po_channel_account *a, char *err, size_t errcap)
{
    if (!po_set_field(a->mchid, sizeof a->mchid, po_json_str(root, "mchid"))) {
        po_errf(err, errcap, "mchid missing");
        return PO_ERR_INVALID;
    }
    (void)po_set_field(a->appid, sizeof a->appid, po_json_str(root, "appid"));
    po_err rc = secret(a->tenant, a->channel, "apiv3_key", po_json_str(root, "apiv3_key"), master,
                       a->apiv3_key, sizeof a->apiv3_key, &a->apiv3_key_len, err, errcap);
    if (rc)
        return rc;
    json_t *keys = json_object_get(root, "keys");
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k) {
        if (a->nkeys >= PO_CHANNEL_KEYS_MAX)
            break;
        const char *pem = po_json_str(k, "public_key_pem");
        const char *serial = po_json_str(k, "serial");
        char ignored[PO_SERIAL_MAX + 1];
        if (!pem || !po_set_field(a->keys[a->nkeys].serial, sizeof a->keys[0].serial, serial) ||
            po_pubkey_from_pem(pem, strlen(pem), &a->keys[a->nkeys].key, ignored, sizeof ignored,
                               err, errcap)) {
            po_errf(err, errcap, "verification key %zu is invalid", i);
            return PO_ERR_INVALID;
        }
        a->nkeys++;
    }
    if (a->nkeys == 0) {
        po_errf(err, errcap, "no verification key (platform certificate or public key)");
        return PO_ERR_INVALID;
    }
    return load_api(root, master, a, "https://api.mch.weixin.qq.com", true, err, errcap);
}

static po_err load_alipay(json_t *root, const unsigned char *master, struct po_channel_account *a,
                          char *err, size_t errcap)
{
    const char *pem = po_json_str(root, "public_key_pem");
    char ignored[PO_SERIAL_MAX + 1];
    if (!po_set_field(a->app_id, sizeof a->app_id, po_json_str(root, "app_id")) || !pem) {
        po_errf(err, errcap, "app_id or Alipay public key missing");
        return PO_ERR_INVALID;
    }
    (void)po_set_field(a->seller_id, sizeof a->seller_id, po_json_str(root, "seller_id"));
    po_err rc = po_pubkey_from_pem(pem, strlen(pem), &a->alipay_key, ignored, sizeof ignored, err,
                                   errcap);
    return rc ? rc
              : load_api(root, master, a, "https://openapi.alipay.com/gateway.do", false, err,
                         errcap);
}

static po_err load_stripe(json_t *root, const unsigned char *master, struct po_channel_account *a,
                          char *err, size_t errcap)
{
    json_t *list = json_object_get(root, "webhook_secrets");
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {
        if (a->nsecrets >= PO_WEBHOOK_SECRETS_MAX)
            break;
        char field[48];
        (void)snprintf(field, sizeof field, "webhook_secret/%zu", i);
        po_err rc = secret(a->tenant, a->channel, field, json_string_value(v), master,
                           a->secrets[a->nsecrets].v, sizeof a->secrets[0].v,
                           &a->secrets[a->nsecrets].len, err, errcap);
        if (rc)
            return rc;
        a->nsecrets++;
    }
    if (a->nsecrets == 0) {
        po_errf(err, errcap, "no webhook secret");
        return PO_ERR_INVALID;
    }
    return PO_OK;
}

po_err po_channel_account_load(const char *tenant, const char *channel, const char *json,
                               const unsigned char *master, struct po_channel_account *out,
                               char *err, size_t errcap)
{
    struct po_channel_account *a = calloc(1, sizeof *a);
    json_error_t jerr;
    po_err rc = PO_ERR_INVALID;
    if (!a)
        return PO_ERR_NOMEM;
    json_t *root = json_loads(json, 0, &jerr);
    if (!json_is_object(root)) {
        po_errf(err, errcap, "stored configuration is not a JSON object");
        goto out;
    }
    if (po_strcpy(a->tenant, sizeof a->tenant, tenant) ||
        po_strcpy(a->channel, sizeof a->channel, channel))
        goto out;
    json_t *w = json_object_get(root, "window_s");
    a->window_s = json_is_integer(w) ? json_integer_value(w) : PO_WINDOW_DEFAULT_S;
    if (strcmp(channel, "wechatpay") == 0)
        rc = load_wechatpay(root, master, a, err, errcap);
    else if (strcmp(channel, "alipay") == 0)
        rc = load_alipay(root, master, a, err, errcap);
    else if (strcmp(channel, "stripe") == 0)
        rc = load_stripe(root, master, a, err, errcap);
    if (!rc) {
        *out = *a;
        memset(a, 0, sizeof *a); /* ownership of the keys moved to *out */
    } else {
        po_channel_account_free(a);
    }
out:
    json_decref(root);
    free(a);
    return rc;
}

po_err po_channel_parse(const struct po_channel_account *a, const struct po_notify_req *req,
                        struct po_notify_result *out)
{
    memset(out, 0, sizeof *out);
    if (req->body_len > PO_BODY_MAX) {
        po_notify_reject(out, "body_too_large", "body larger than %d bytes", PO_BODY_MAX);
        return PO_OK;
    }
    if (strcmp(a->channel, "wechatpay") == 0)
        return po_wechatpay_parse(a, req, out);
    if (strcmp(a->channel, "alipay") == 0)
        return po_alipay_parse(a, req, out);
    return po_stripe_parse(a, req, out);
}

po_err po_parse_major_amount(const char *s, int64_t *out)
{
    int64_t whole = 0, frac = 0;
    int digits = 0, fdigits = 0;
    const char *p = s;
    if (!s || !*s)
        return PO_ERR_INVALID;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (++digits > 13)
            return PO_ERR_INVALID;
        whole = whole * 10 + (*p - '0');
    }
    if (digits == 0)
        return PO_ERR_INVALID;
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++) {
            if (++fdigits > 2)
                return PO_ERR_INVALID;
            frac = frac * 10 + (*p - '0');
        }
        if (fdigits == 0)
            return PO_ERR_INVALID;
    }
    if (*p)
        return PO_ERR_INVALID;
    if (fdigits == 1)
        frac *= 10;
    int64_t v = whole * 100 + frac;
    if (!po_amount_valid(v))
        return PO_ERR_INVALID;
    *out = v;
    return PO_OK;
}

bool po_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        unsigned c = p[i];
        size_t n;
        unsigned min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            n = 1;
            min = 0x80;
            c &= 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            n = 2;
            min = 0x800;
            c &= 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            n = 3;
            min = 0x10000;
            c &= 0x07;
        } else {
            return false;
        }
        if (i + n >= len) /* the sequence is cut off */
            return false;
        for (size_t k = 1; k <= n; k++) {
            if (i + k >= len || (p[i + k] & 0xc0) != 0x80)
                return false;
            c = (c << 6) | (p[i + k] & 0x3f);
        }
        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
            return false;
        i += n + 1;
    }
    return true;
}

void po_channel_ack(const char *channel, bool success, unsigned fail_status, const char *message,
                    struct po_ack *out)
{
    memset(out, 0, sizeof *out);
    char msg[120];
    size_t j = 0;
    /* The message goes into JSON: keep it to safe printable ASCII. */
    for (const char *p = message ? message : ""; *p && j + 1 < sizeof msg; p++)
        msg[j++] = (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') ? *p : ' ';
    msg[j] = '\0';
    if (strcmp(channel, "alipay") == 0) {
        out->status = success ? 200 : fail_status;
        out->content_type = "text/plain";
        (void)snprintf(out->body, sizeof out->body, "%s", success ? "success" : "fail");
    } else if (strcmp(channel, "stripe") == 0) {
        out->status = success ? 200 : fail_status;
        out->content_type = "application/json";
        if (success)
            (void)snprintf(out->body, sizeof out->body, "{\"received\":true}");
        else
            (void)snprintf(out->body, sizeof out->body, "{\"error\":\"%s\"}", msg);
    } else {
        /* WeChat Pay v3: 200/204 with no body needed; failure 4xx/5xx with
         * {"code":"FAIL","message":"..."}. */
        out->status = success ? 204 : fail_status;
        out->content_type = "application/json";
        if (!success)
            (void)snprintf(out->body, sizeof out->body, "{\"code\":\"FAIL\",\"message\":\"%s\"}",
                           msg);
    }
}
