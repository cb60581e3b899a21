/*
 * test_channel.c — the adapters and crypto against the channels' own test
 * vectors (tests/data/vectors, copied from ../shared/vectors with their
 * sources), plus what payonce's simulator signs.
 */
#include "../../src/channel/channel.h"
#include "../../src/crypto/crypto.h"
#include "../../src/sim/sim.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *vector(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/vectors/%s", PO_TEST_DATA_DIR, name);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j)
        fail_msg("cannot load %s: %s", path, e.text);
    return j;
}

static char *file(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/vectors/%s", PO_TEST_DATA_DIR, name);
    char *buf = NULL;
    if (po_file_read(path, 1 << 20, &buf, len))
        fail_msg("cannot read %s", path);
    return buf;
}

static const char *S(json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    if (!v)
        fail_msg("vector field %s missing", k);
    return v;
}

/* Header lookup over a JSON object of headers (case-insensitive). */
static const char *json_header(void *ctx, const char *name)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)ctx, k, v)
    {
        if (strcasecmp(k, name) == 0)
            return json_string_value(v);
    }
    return NULL;
}

/* A secret as a stored document holds it in development mode. */
static json_t *plain_secret(const char *secret)
{
    char *stored = NULL;
    assert_int_equal(po_secret_store(NULL, "", secret, strlen(secret), &stored), PO_OK);
    json_t *j = json_string(stored);
    free(stored);
    return j;
}

/* An account as the gateway has it: the stored document (doc, taken)
 * loaded by po_channel_account_load, the one loader, in development mode
 * (no master key: "plain:" secrets), with a 300 s window. */
static void load_account(const char *channel, json_t *doc, struct po_channel_account *a)
{
    json_object_set_new(doc, "window_s", json_integer(300));
    char *text = po_json_dumps(doc, JSON_COMPACT);
    char err[256] = "";
    assert_non_null(text);
    if (po_channel_account_load("t1", channel, text, NULL, a, err, sizeof err))
        fail_msg("%s account does not load: %s", channel, err);
    free(text);
    json_decref(doc);
}

static void wechat_account(struct po_channel_account *a, const char *apiv3, const char *mchid)
{
    size_t len;
    char *pem = file("wechatpay_test_platform_cert.pem", &len);
    load_account("wechatpay",
                 json_pack("{s:s, s:o, s:[{s:s, s:s}]}", "mchid", mchid, "apiv3_key",
                           plain_secret(apiv3), "keys", "serial", "D7CE59D1F522D701",
                           "public_key_pem", pem),
                 a);
    free(pem);
    assert_int_equal(a->nkeys, 1);
    assert_string_equal(a->keys[0].serial, "D7CE59D1F522D701");
}

/* Alipay's public key (SPKI, base64) as PEM, for app_id and seller_id. */
static void alipay_account(struct po_channel_account *a, const char *spki_b64, const char *app_id,
                           const char *seller_id)
{
    char pem[4096];
    size_t n = (size_t)snprintf(pem, sizeof pem, "-----BEGIN PUBLIC KEY-----\n");
    for (size_t i = 0, len = strlen(spki_b64); i < len; i += 64)
        n += (size_t)snprintf(pem + n, sizeof pem - n, "%.64s\n", spki_b64 + i);
    (void)snprintf(pem + n, sizeof pem - n, "-----END PUBLIC KEY-----\n");
    load_account("alipay",
                 json_pack("{s:s, s:s, s:s}", "app_id", app_id, "seller_id", seller_id,
                           "public_key_pem", pem),
                 a);
    assert_int_equal(a->nkeys, 1);
}

/* A Stripe account with these webhook secrets (NULL-terminated), in order. */
static void stripe_account(struct po_channel_account *a, const char *const *secrets)
{
    json_t *list = json_array();
    for (int i = 0; secrets[i]; i++)
        json_array_append_new(list, plain_secret(secrets[i]));
    load_account("stripe", json_pack("{s:o}", "webhook_secrets", list), a);
}

static struct po_notify_result parse_wechat(struct po_channel_account *a, json_t *headers,
                                            const char *body, int64_t now)
{
    struct po_notify_req req = {.body = body,
                                .body_len = strlen(body),
                                .header = json_header,
                                .hctx = headers,
                                .now_unix = now};
    struct po_notify_result r;
    assert_int_equal(po_channel_parse(a, &req, &r), PO_OK);
    return r;
}

static void wechatpay_transaction_vector(void **state)
{
    (void)state;
    json_t *v = vector("wechatpay_v3_transaction_success.json");
    json_t *h = json_object_get(v, "headers");
    const char *body = S(v, "body");
    struct po_channel_account a;
    wechat_account(&a, S(v, "apiv3_key"), "1230000109");
    struct po_notify_result r = parse_wechat(&a, h, body, 1700000000);
    if (r.status != PO_NOTIFY_EVENT)
        fail_msg("status %d reason %s %s", r.status, po_reason_name(r.reason), r.detail);
    assert_int_equal(r.ev.type, PO_EV_PAY_SUCCESS);
    assert_string_equal(r.ev.channel_txn_id, "1217752501201407033233368018");
    assert_string_equal(r.ev.out_trade_no, "1217752501201407033233368018");
    assert_int_equal(r.ev.amount_minor, 100);
    assert_string_equal(r.ev.currency, "CNY");
    assert_string_equal(r.ev.tenant, "t1");
    assert_string_equal(r.ev.occurred_at, "2018-06-08T10:34:56+08:00");

    /* Timestamp window, both directions. */
    assert_string_equal(po_reason_name(parse_wechat(&a, h, body, 1700000301).reason),
                        "stale_timestamp");
    assert_string_equal(po_reason_name(parse_wechat(&a, h, body, 1699999699).reason),
                        "future_timestamp");
    assert_int_equal(parse_wechat(&a, h, body, 1700000300).status, PO_NOTIFY_EVENT);
    /* One byte of the body changed. */
    char *tampered = strdup(body);
    tampered[10] ^= 1;
    assert_string_equal(po_reason_name(parse_wechat(&a, h, tampered, 1700000000).reason),
                        "bad_signature");
    free(tampered);
    /* Wrong APIv3 key: verified, but the resource does not decrypt. */
    struct po_channel_account wrong;
    wechat_account(&wrong, "0123456789abcdef0123456789abcdef", "1230000109");
    assert_string_equal(po_reason_name(parse_wechat(&wrong, h, body, 1700000000).reason),
                        "decrypt_failed");
    po_channel_account_free(&wrong);
    /* Another merchant's callback: verified, then a business mismatch. */
    struct po_channel_account other;
    wechat_account(&other, S(v, "apiv3_key"), "1900000001");
    struct po_notify_result m = parse_wechat(&other, h, body, 1700000000);
    assert_int_equal(m.status, PO_NOTIFY_MISMATCH);
    assert_string_equal(po_reason_name(m.reason), "mchid_mismatch");
    po_channel_account_free(&other);

    json_t *h2 = json_deep_copy(h);
    json_object_set_new(h2, "Wechatpay-Serial", json_string("ABCDEF0123456789"));
    assert_string_equal(po_reason_name(parse_wechat(&a, h2, body, 1700000000).reason),
                        "unknown_serial");
    json_object_set_new(h2, "Wechatpay-Serial", json_string("d7ce59d1f522d701")); /* case */
    assert_int_equal(parse_wechat(&a, h2, body, 1700000000).status, PO_NOTIFY_EVENT);
    json_object_set_new(h2, "Wechatpay-Signature",
                        json_string("WECHATPAY/SIGNTEST/abcdefghijklmnopqrstuvwxyz=="));
    assert_string_equal(po_reason_name(parse_wechat(&a, h2, body, 1700000000).reason), "probe");
    json_object_del(h2, "Wechatpay-Signature");
    assert_string_equal(po_reason_name(parse_wechat(&a, h2, body, 1700000000).reason),
                        "missing_header");
    json_decref(h2);
    po_channel_account_free(&a);
    json_decref(v);
}

/* The official Go SDK's own notification: its 16-byte "APIv3 key" makes it
 * AES-128-GCM. The signature must verify; the event type is one payonce
 * does not act on, so the verified outcome is IGNORE. */
static void wechatpay_sdk_vector(void **state)
{
    (void)state;
    json_t *v = vector("wechatpay_v3_sdk_notify.json");
    struct po_channel_account a;
    wechat_account(&a, S(v, "apiv3_key"), "1234567890");
    struct po_notify_result r =
        parse_wechat(&a, json_object_get(v, "headers"), S(v, "body"), 1624523846);
    if (r.status != PO_NOTIFY_IGNORE)
        fail_msg("status %d reason %s %s", r.status, po_reason_name(r.reason), r.detail);
    assert_non_null(strstr(r.detail, "PAYSCORE.USER_OPEN_SERVICE"));
    po_channel_account_free(&a);
    json_decref(v);
}

static void aead_vector(void **state)
{
    (void)state;
    json_t *v = vector("aead_aes_256_gcm.json");
    unsigned char *ct = NULL, *pt = NULL;
    size_t ct_len = 0, pt_len = 0;
    const char *key = S(v, "key"), *nonce = S(v, "nonce"), *aad = S(v, "associated_data");
    const char *b64 = S(v, "ciphertext_b64");
    assert_int_equal(po_b64_decode(b64, strlen(b64), &ct, &ct_len), PO_OK);
    assert_int_equal(po_aes_gcm_decrypt((const unsigned char *)key, 32,
                                        (const unsigned char *)nonce, strlen(nonce),
                                        (const unsigned char *)aad, strlen(aad), ct, ct_len, &pt,
                                        &pt_len),
                     PO_OK);
    assert_string_equal((char *)pt, S(v, "plaintext"));
    free(pt);
    ct[0] ^= 1;
    assert_int_equal(po_aes_gcm_decrypt((const unsigned char *)key, 32,
                                        (const unsigned char *)nonce, strlen(nonce),
                                        (const unsigned char *)aad, strlen(aad), ct, ct_len, &pt,
                                        &pt_len),
                     PO_ERR_INVALID);
    free(ct);
    json_decref(v);
}

static char *form_from(json_t *params, const char *override_key, const char *override_val)
{
    static const char hex[] = "0123456789ABCDEF";
    char *buf = malloc(16384);
    size_t j = 0;
    const char *k;
    json_t *val;
    json_object_foreach(params, k, val)
    {
        const char *s = strcmp(k, override_key ? override_key : "") == 0 ? override_val
                                                                         : json_string_value(val);
        j += (size_t)snprintf(buf + j, 16384 - j, "%s%s=", j ? "&" : "", k);
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
            if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'))
                buf[j++] = (char)*p;
            else {
                buf[j++] = '%';
                buf[j++] = hex[*p >> 4];
                buf[j++] = hex[*p & 15];
            }
        }
        buf[j] = '\0';
    }
    return buf;
}

static const char *no_header(void *ctx, const char *name)
{
    (void)ctx;
    (void)name;
    return NULL;
}

static struct po_notify_result parse_form(struct po_channel_account *a, const char *body)
{
    struct po_notify_req req = {
        .body = body, .body_len = strlen(body), .header = no_header, .now_unix = 1700000000};
    struct po_notify_result r;
    assert_int_equal(po_channel_parse(a, &req, &r), PO_OK);
    return r;
}

static void alipay_vector(void **state)
{
    (void)state;
    json_t *v = vector("alipay_notify_trade_success.json");
    json_t *params = json_object_get(v, "params");
    struct po_channel_account a;
    alipay_account(&a, S(v, "alipay_public_key_spki_b64"), "2019073166072302", "2088531891668739");
    char *body = form_from(params, NULL, NULL);
    struct po_notify_result r = parse_form(&a, body);
    if (r.status != PO_NOTIFY_EVENT)
        fail_msg("status %d reason %s %s", r.status, po_reason_name(r.reason), r.detail);
    assert_int_equal(r.ev.type, PO_EV_PAY_SUCCESS);
    assert_string_equal(r.ev.out_trade_no, "20190815155618536-564-57");
    assert_string_equal(r.ev.channel_txn_id, "2019081522001468450512505578");
    assert_int_equal(r.ev.amount_minor, 10); /* "0.10" yuan */
    free(body);
    /* Any signed field changed -> bad signature. */
    body = form_from(params, "total_amount", "1000.00");
    assert_string_equal(po_reason_name(parse_form(&a, body).reason), "bad_signature");
    free(body);
    /* A NUL after the last signed value, then a field of the attacker's
     * that sorts after it: a check over strlen() of the sign content
     * would authenticate only the genuine prefix. Refused before any
     * signature check. */
    body = form_from(params, NULL, NULL);
    char *ver = strstr(body, "version=");
    assert_non_null(ver);
    size_t vend = (size_t)(ver - body) + strcspn(ver, "&");
    char forged[16384];
    (void)snprintf(forged, sizeof forged, "%.*s%%00&zz_total_amount=999999.00%s", (int)vend, body,
                   body + vend);
    struct po_notify_result nul = parse_form(&a, forged);
    assert_int_equal(nul.status, PO_NOTIFY_REJECT);
    assert_string_equal(po_reason_name(nul.reason), "malformed_body");
    free(body);
    /* rsaCheckV1 leaves sign_type out: a string that keeps it must fail. */
    const char *sign = S(params, "sign");
    unsigned char *raw = NULL;
    size_t raw_len = 0;
    assert_int_equal(po_b64_decode(sign, strlen(sign), &raw, &raw_len), PO_OK);
    const char *with_type = "app_id=2019073166072302&sign_type=RSA2";
    assert_int_equal(
        po_rsa_sha256_verify(a.keys[0].key, with_type, strlen(with_type), raw, raw_len),
        PO_ERR_INVALID);
    free(raw);
    /* Another app's notification: verified, then a business mismatch. */
    struct po_channel_account other;
    alipay_account(&other, S(v, "alipay_public_key_spki_b64"), "2019000000000000",
                   "2088531891668739");
    body = form_from(params, NULL, NULL);
    struct po_notify_result m = parse_form(&other, body);
    assert_int_equal(m.status, PO_NOTIFY_MISMATCH);
    assert_string_equal(po_reason_name(m.reason), "app_id_mismatch");
    free(body);
    po_channel_account_free(&other);
    assert_string_equal(po_reason_name(parse_form(&a, "a=%zz").reason), "malformed_body");
    assert_string_equal(po_reason_name(parse_form(&a, "charset=utf-8&x=%ff%fe").reason),
                        "invalid_utf8");
    assert_string_equal(po_reason_name(parse_form(&a, "a=1&a=2").reason), "malformed_body");
    po_channel_account_free(&a);
    json_decref(v);
}

static void stripe_vector(void **state)
{
    (void)state;
    json_t *v = vector("stripe_webhook.json");
    const char *secret = S(v, "secret");
    struct po_channel_account a, rotated, other;
    stripe_account(&a, (const char *const[]){secret, NULL});
    stripe_account(&rotated, (const char *const[]){"whsec_other", secret, NULL});
    stripe_account(&other, (const char *const[]){"whsec_other", NULL});
    json_t *h = json_pack("{s:s}", "Stripe-Signature", S(v, "header"));
    const char *payload = S(v, "payload");
    /* The vector's payload carries no data.object: passing the signature
     * check is what makes the outcome malformed_body, not bad_signature. */
    struct po_notify_result r = parse_wechat(&a, h, payload, 1700000000);
    assert_string_equal(po_reason_name(r.reason), "malformed_body");
    assert_string_equal(po_reason_name(parse_wechat(&a, h, payload, 1700000301).reason),
                        "stale_timestamp");
    /* Rotation: the matching secret may be the second. */
    assert_string_equal(po_reason_name(parse_wechat(&rotated, h, payload, 1700000000).reason),
                        "malformed_body");
    assert_string_equal(po_reason_name(parse_wechat(&other, h, payload, 1700000000).reason),
                        "bad_signature");
    /* Any of several v1 values may match. */
    char multi[256];
    snprintf(multi, sizeof multi, "t=1700000000,v1=%064d,%s", 0, strchr(S(v, "header"), 'v'));
    json_object_set_new(h, "Stripe-Signature", json_string(multi));
    assert_string_equal(po_reason_name(parse_wechat(&rotated, h, payload, 1700000000).reason),
                        "malformed_body");
    json_decref(h);
    json_decref(v);
    po_channel_account_free(&a);
    po_channel_account_free(&rotated);
    po_channel_account_free(&other);
}

/* What payonce's simulator signs with the public SDK test key verifies
 * with the official test platform certificate. */
static void simulator_signs_like_wechatpay(void **state)
{
    (void)state;
    size_t len = 0;
    char *pem = file("wechatpay_test_private_key.pem", &len);
    struct po_privkey *key = NULL;
    assert_int_equal(po_privkey_from_pem(pem, len, &key), PO_OK);
    free(pem);
    const char *apiv3 = "a7cde1ZJB1kG2e7VfTs3jQzaWizur8Gb";
    struct po_channel_account a;
    wechat_account(&a, apiv3, "1230000109");
    struct po_sim_request req;
    const char *res =
        "{\"mchid\":\"1230000109\",\"appid\":\"wxd678efh567hg6787\","
        "\"out_trade_no\":\"ORD-9\",\"transaction_id\":\"4200000009\","
        "\"trade_state\":\"SUCCESS\",\"amount\":{\"total\":990,\"currency\":\"CNY\"}}";
    assert_int_equal(po_sim_wechatpay(key, "D7CE59D1F522D701", (const unsigned char *)apiv3, 32,
                                      "TRANSACTION.SUCCESS", res, 1800000000, &req),
                     PO_OK);
    json_t *h = json_object();
    for (int i = 0; i < req.nheaders; i++)
        json_object_set_new(h, req.name[i], json_string(req.value[i]));
    struct po_notify_result r = parse_wechat(&a, h, req.body, 1800000000);
    if (r.status != PO_NOTIFY_EVENT)
        fail_msg("status %d reason %s %s", r.status, po_reason_name(r.reason), r.detail);
    assert_string_equal(r.ev.out_trade_no, "ORD-9");
    assert_int_equal(r.ev.amount_minor, 990);
    /* The platform certificate's validity (as channel set stores it): the
     * last second it is valid verifies, the next is refused by name. */
    a.keys[0].not_after = 1800000000;
    assert_int_equal(parse_wechat(&a, h, req.body, 1800000000).status, PO_NOTIFY_EVENT);
    a.keys[0].not_after = 1800000000 - 1;
    r = parse_wechat(&a, h, req.body, 1800000000);
    assert_int_equal(r.status, PO_NOTIFY_REJECT);
    assert_string_equal(po_reason_name(r.reason), "certificate_expired");
    json_decref(h);
    po_sim_request_free(&req);
    po_privkey_free(key);
    po_channel_account_free(&a);
}

static void major_amounts_exact(void **state)
{
    (void)state;
    struct {
        const char *s;
        int64_t v;
    } ok[] = {{"0.01", 1},
              {"0.10", 10},
              {"0.1", 10},
              {"12", 1200},
              {"12.3", 1230},
              {"19.99", 1999},
              {"1000000000000", 100000000000000}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t v = 0;
        assert_int_equal(po_parse_major_amount(ok[i].s, &v), PO_OK);
        assert_int_equal(v, ok[i].v);
    }
    const char *bad[] = {"",   "0",  "0.00", "12.345",         "-1",   "+1",   "1e3", ".5", "1.",
                         " 1", "1 ", "1,00", "10000000000000", "0x10", "1.2.3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t v = 7;
        if (po_parse_major_amount(bad[i], &v) != PO_ERR_INVALID)
            fail_msg("accepted '%s'", bad[i]);
        assert_int_equal(v, 7);
    }
}

static void sealing(void **state)
{
    (void)state;
    unsigned char master[32], other[32];
    assert_int_equal(po_random(master, 32), PO_OK);
    assert_int_equal(po_random(other, 32), PO_OK);
    char *sealed = NULL;
    assert_int_equal(
        po_seal(master, "t1/wechatpay/apiv3_key", (const unsigned char *)"secret", 6, &sealed),
        PO_OK);
    assert_null(strstr(sealed, "secret"));
    unsigned char *out = NULL;
    size_t len = 0;
    assert_int_equal(po_unseal(master, "t1/wechatpay/apiv3_key", sealed, &out, &len), PO_OK);
    assert_int_equal(len, 6);
    assert_memory_equal(out, "secret", 6);
    free(out);
    /* Another master key, or the same ciphertext moved to another slot. */
    assert_int_equal(po_unseal(other, "t1/wechatpay/apiv3_key", sealed, &out, &len),
                     PO_ERR_INVALID);
    assert_int_equal(po_unseal(master, "t2/wechatpay/apiv3_key", sealed, &out, &len),
                     PO_ERR_INVALID);
    sealed[strlen(sealed) - 3] ^= 1;
    assert_int_equal(po_unseal(master, "t1/wechatpay/apiv3_key", sealed, &out, &len),
                     PO_ERR_INVALID);
    free(sealed);
}

/* The one stored form of a secret: sealed with a master key, "plain:" +
 * base64 without one (any bytes, NUL included), each opened only in the
 * mode that could have written it. */
static void stored_secrets(void **state)
{
    (void)state;
    unsigned char master[32];
    assert_int_equal(po_random(master, 32), PO_OK);
    static const unsigned char bin[] = {'w', 0, 0xff, '_', '\n'};
    char *sealed = NULL, *plain = NULL;
    assert_int_equal(po_secret_store(master, "t1/webhook/we_1", bin, sizeof bin, &sealed), PO_OK);
    assert_int_equal(po_secret_store(NULL, "t1/webhook/we_1", bin, sizeof bin, &plain), PO_OK);
    assert_true(po_secret_is_stored(sealed) && !po_secret_is_plain(sealed));
    assert_true(po_secret_is_stored(plain) && po_secret_is_plain(plain));
    assert_string_equal(plain, "plain:dwD/Xwo=");
    assert_false(po_secret_is_stored("whsec_abc") || po_secret_is_stored(NULL));
    unsigned char *out = NULL;
    size_t len = 0;
    assert_int_equal(po_secret_open(master, "t1/webhook/we_1", sealed, &out, &len), PO_OK);
    assert_int_equal(len, sizeof bin);
    assert_memory_equal(out, bin, sizeof bin);
    free(out);
    assert_int_equal(po_secret_open(NULL, "t1/webhook/we_1", plain, &out, &len), PO_OK);
    assert_int_equal(len, sizeof bin);
    assert_memory_equal(out, bin, sizeof bin);
    free(out);
    /* a plain value with a master key, a sealed one without */
    assert_int_equal(po_secret_open(master, "t1/webhook/we_1", plain, &out, &len), PO_ERR_INVALID);
    assert_int_equal(po_secret_open(NULL, "t1/webhook/we_1", sealed, &out, &len), PO_ERR_INVALID);
    assert_int_equal(po_secret_open(NULL, "t1/webhook/we_1", "plain:*not base64*", &out, &len),
                     PO_ERR_INVALID);
    free(sealed);
    free(plain);
}

/* JSAPI's paySign: the WeChat Pay rule (wechatpay-go's
 * PrepayWithRequestPayment) over the official page's example values,
 * signed with the SDKs' public test key — the vector's exact signature
 * (PKCS#1 v1.5 is deterministic). */
static void jsapi_bridge_sign_vector(void **st)
{
    (void)st;
    json_t *v = vector("wechatpay/v3_jsapi_bridge_sign.json"), *p = json_object_get(v, "params");
    size_t len = 0;
    char *pem = file("wechatpay_test_private_key.pem", &len), *sig = NULL;
    struct po_privkey *k = NULL;
    assert_int_equal(po_privkey_from_pem(pem, len, &k), PO_OK);
    const char *pkg = S(p, "package");
    assert_true(strncmp(pkg, "prepay_id=", 10) == 0);
    assert_int_equal(po_wechatpay_bridge_sign(k, S(p, "appId"), S(p, "timeStamp"), S(p, "nonceStr"),
                                              pkg + 10, &sig),
                     PO_OK);
    assert_string_equal(sig, S(p, "paySign"));
    free(sig);
    po_privkey_free(k);
    free(pem);
    json_decref(v);
}

/* Alipay page pay: the signed request handed to the browser is exactly
 * alipay-sdk's (its sign, its form's action, its hidden biz_content). */
static void alipay_page_pay_vector(void **st)
{
    (void)st;
    json_t *v = vector("alipay/request_signing_and_page_pay.json"),
           *ex = json_object_get(v, "page_pay_example"), *p = json_object_get(ex, "params");
    size_t len = 0;
    char *pem = file("alipay/test_rsa2_private_key.pem", &len), *form = NULL, *url = NULL;
    struct po_privkey *k = NULL;
    assert_int_equal(po_privkey_from_pem(pem, len, &k), PO_OK);
    const char *action = S(ex, "form_action");
    const char *q = strchr(action, '?');
    assert_non_null(q);
    char gateway[256];
    snprintf(gateway, sizeof gateway, "%.*s", (int)(q - action), action);
    struct po_alipay_app app = {k, S(p, "app_id"), NULL, NULL};
    assert_int_equal(po_alipay_browser_pay(&app, gateway, S(p, "method"), S(p, "notify_url"),
                                           S(p, "return_url"), S(p, "biz_content"),
                                           S(p, "timestamp"), &form, &url),
                     PO_OK);
    assert_string_equal(form, S(ex, "form_html"));
    /* the GET form: pageExecute's — the action, then the body's
     * parameters (biz_content) */
    assert_true(strncmp(url, action, strlen(action)) == 0);
    static const char biz[] = "&biz_content=%7B%22out_trade_no%22%3A%2220150320010101001%22";
    assert_true(strncmp(url + strlen(action), biz, sizeof biz - 1) == 0);
    free(form);
    free(url);
    po_privkey_free(k);
    free(pem);
    json_decref(v);
}

/* Alipay's certificate mode: the SNs of real Alipay certificates as
 * alipay-sdk computes them (tests/data/alipay_certs/README.md) — the app
 * and Alipay certificates' own, and the root chain's (its RSA roots only:
 * the SM2 and ECC roots are left out). */
static void alipay_cert_sn_vectors(void **st)
{
    (void)st;
    static const struct {
        const char *file, *sn;
        bool chain;
    } v[] = {
        {"appCertPublicKey_2021001161683774.crt", "866efef280dec9137a87d047ac446315", false},
        {"alipayCertPublicKey_RSA2.crt", "7513daaaa48aa3ba2e4018d84402479c", false},
        {"alipayRootCert.crt", "687b59193f3f462dd5336e5abf83c5d8_02941eef3187dddf3d3b83462e1dfcf6",
         true},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char name[128], sn[PO_ALIPAY_ROOT_SN_MAX + 1], err[128];
        size_t len = 0;
        snprintf(name, sizeof name, "../alipay_certs/%s", v[i].file);
        char *pem = file(name, &len);
        assert_int_equal(po_cert_alipay_sn(pem, len, v[i].chain, sn, sizeof sn, err, sizeof err),
                         PO_OK);
        assert_string_equal(sn, v[i].sn);
        /* a root file read as one certificate: its first one's SN only */
        if (v[i].chain) {
            assert_int_equal(po_cert_alipay_sn(pem, len, false, sn, sizeof sn, err, sizeof err),
                             PO_OK);
            assert_int_equal(strlen(sn), 32);
        }
        free(pem);
    }
    char sn[64], err[128];
    assert_int_equal(po_cert_alipay_sn("no", 2, false, sn, sizeof sn, err, sizeof err),
                     PO_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(wechatpay_transaction_vector),
        cmocka_unit_test(wechatpay_sdk_vector),
        cmocka_unit_test(aead_vector),
        cmocka_unit_test(alipay_vector),
        cmocka_unit_test(stripe_vector),
        cmocka_unit_test(simulator_signs_like_wechatpay),
        cmocka_unit_test(major_amounts_exact),
        cmocka_unit_test(sealing),
        cmocka_unit_test(stored_secrets),
        cmocka_unit_test(jsapi_bridge_sign_vector),
        cmocka_unit_test(alipay_page_pay_vector),
        cmocka_unit_test(alipay_cert_sn_vectors),
    };
    return cmocka_run_group_tests_name("channel", tests, NULL, NULL);
}
