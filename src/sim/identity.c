/*
 * identity.c — the simulated channel's keys and ids, and the notifications
 * it sends (see sim.h). Formats follow the channels' documentation: WeChat
 * Pay v3 TRANSACTION.SUCCESS / REFUND.* resources, Alipay trade_status_sync
 * forms, Stripe payment_intent.succeeded / refund.updated events.
 */
#include "sim.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static po_err write_file(const char *dir, const char *name, const void *data, size_t len,
                         bool secret)
{
    char path[1024];
    (void)snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return PO_ERR_IO;
    if (secret)
        (void)chmod(path, 0600);
    bool ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok ? PO_OK : PO_ERR_IO;
}

static void random_digits(char *out, size_t n)
{
    unsigned char r[64];
    PO_ASSERT(n < sizeof r && po_random(r, n) == PO_OK);
    for (size_t i = 0; i < n; i++)
        out[i] = (char)('0' + r[i] % 10);
    out[n] = '\0';
}

po_err po_sim_identity_generate(const char *dir, const char *mode, char *err, size_t errcap)
{
    struct po_privkey *wx = NULL, *ali = NULL, *mer = NULL;
    char *wx_priv = NULL, *wx_pub = NULL, *ali_priv = NULL, *ali_pub = NULL, *cert = NULL;
    char *mer_priv = NULL, *mer_pub = NULL, mer_serial[32];
    char *doc = NULL;
    unsigned char raw[32];
    char apiv3[33], secret[48], api_key[48], serial[PO_SERIAL_MAX + 1], digits[24];
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    po_err rc = PO_OK;
    bool pubkey = strcmp(mode, "pubkey") == 0;
    if (!pubkey && strcmp(mode, "cert") != 0) {
        po_errf(err, errcap, "--mode must be cert or pubkey");
        return PO_ERR_INVALID;
    }
    (void)mkdir(dir, 0700);
    if ((rc = po_privkey_generate(&wx)) || (rc = po_privkey_generate(&ali)) ||
        (rc = po_privkey_generate(&mer)) || (rc = po_privkey_to_pem(mer, &mer_priv, &mer_pub)) ||
        (rc = po_privkey_to_pem(wx, &wx_priv, &wx_pub)) ||
        (rc = po_privkey_to_pem(ali, &ali_priv, &ali_pub)) || (rc = po_random(raw, 32)))
        goto out;
    for (int i = 0; i < 32; i++)
        apiv3[i] = alnum[raw[i] % 62];
    apiv3[32] = '\0';
    if ((rc = po_random(raw, 32)))
        goto out;
    memcpy(secret, "whsec_", 6);
    for (int i = 0; i < 32; i++)
        secret[6 + i] = alnum[raw[i] % 62];
    secret[38] = '\0';
    if ((rc = po_random(raw, 32)))
        goto out;
    memcpy(api_key, "sk_test_", 8);
    for (int i = 0; i < 32; i++)
        api_key[8 + i] = alnum[raw[i] % 62];
    api_key[40] = '\0';
    random_digits(digits, 16);
    if (pubkey) {
        (void)snprintf(serial, sizeof serial, "PUB_KEY_ID_0114%s", digits);
    } else {
        for (int i = 0; i < 16; i++)
            serial[i] = "0123456789ABCDEF"[raw[i] % 16];
        serial[0] = '7'; /* a positive serial without a leading zero */
        serial[16] = '\0';
        if ((rc = po_cert_self_signed(wx, serial, "payonce simulated WeChat Pay platform", &cert)))
            goto out;
    }
    random_digits(digits, 16);
    (void)snprintf(mer_serial, sizeof mer_serial, "5A%.16s", digits);
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "mchid", "1900000109", "appid",
                  "wxpayoncesimapp01", "serial", serial, "mode", mode, "app_id", "2021000000000001",
                  "seller_id", "2088000000000001", "merchant_serial", mer_serial);
    doc = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
    json_decref(j);
    if (!doc) {
        rc = PO_ERR_NOMEM;
        goto out;
    }
    if ((rc = write_file(dir, "sim.json", doc, strlen(doc), false)) ||
        (rc = write_file(dir, "wechatpay_platform_key.pem", wx_priv, strlen(wx_priv), true)) ||
        (rc = pubkey ? write_file(dir, "wechatpay_platform_pub.pem", wx_pub, strlen(wx_pub), false)
                     : write_file(dir, "wechatpay_platform_cert.pem", cert, strlen(cert), false)) ||
        (rc = write_file(dir, "apiv3.key", apiv3, 32, true)) ||
        (rc = write_file(dir, "alipay_private_key.pem", ali_priv, strlen(ali_priv), true)) ||
        (rc = write_file(dir, "alipay_public_key.pem", ali_pub, strlen(ali_pub), false)) ||
        (rc = write_file(dir, "stripe_webhook_secret", secret, strlen(secret), true)) ||
        (rc = write_file(dir, "stripe_api_key", api_key, strlen(api_key), true)) ||
        (rc = write_file(dir, "merchant_private_key.pem", mer_priv, strlen(mer_priv), true)) ||
        (rc = write_file(dir, "merchant_public_key.pem", mer_pub, strlen(mer_pub), false)))
        po_errf(err, errcap, "cannot write into %s", dir);
    if (!rc)
        rc = po_sim_alipay_certs_generate(dir, err, errcap);
out:
    if (rc && !err[0])
        po_errf(err, errcap, "key generation failed (%s)", po_err_name(rc));
    po_secure_zero(apiv3, sizeof apiv3);
    po_secure_zero(secret, sizeof secret);
    po_secure_zero(api_key, sizeof api_key);
    free(doc);
    free(cert);
    free(wx_priv);
    free(wx_pub);
    free(ali_priv);
    free(ali_pub);
    free(mer_priv);
    free(mer_pub);
    po_privkey_free(wx);
    po_privkey_free(ali);
    po_privkey_free(mer);
    return rc;
}

static po_err read_in(const char *dir, const char *name, char **out, size_t *len)
{
    char path[1024];
    (void)snprintf(path, sizeof path, "%s/%s", dir, name);
    return po_file_read(path, 64 * 1024, out, len);
}

static bool copy_field(json_t *j, const char *name, char *dst, size_t cap)
{
    const char *v = json_string_value(json_object_get(j, name));
    return v && po_strcpy(dst, cap, v) == PO_OK;
}

po_err po_sim_identity_load(const char *dir, struct po_sim_identity *out, char *err, size_t errcap)
{
    char *buf = NULL;
    size_t len = 0;
    po_err rc;
    memset(out, 0, sizeof *out);
    if ((rc = read_in(dir, "sim.json", &buf, &len))) {
        po_errf(err, errcap, "no simulator keys in %s: run 'payonce sim keys --dir %s'", dir, dir);
        return rc;
    }
    json_error_t je;
    json_t *j = json_loads(buf, 0, &je);
    free(buf);
    if (!copy_field(j, "mchid", out->mchid, sizeof out->mchid) ||
        !copy_field(j, "appid", out->appid, sizeof out->appid) ||
        !copy_field(j, "serial", out->serial, sizeof out->serial) ||
        !copy_field(j, "mode", out->mode, sizeof out->mode) ||
        !copy_field(j, "app_id", out->app_id, sizeof out->app_id) ||
        !copy_field(j, "seller_id", out->seller_id, sizeof out->seller_id) ||
        !copy_field(j, "merchant_serial", out->merchant_serial, sizeof out->merchant_serial)) {
        json_decref(j);
        po_errf(err, errcap, "%s/sim.json is incomplete", dir);
        return PO_ERR_INVALID;
    }
    json_decref(j);
    if ((rc = read_in(dir, "wechatpay_platform_key.pem", &buf, &len)) == PO_OK) {
        rc = po_privkey_from_pem(buf, len, &out->wx_key);
        free(buf);
    }
    if (!rc && (rc = read_in(dir, "alipay_private_key.pem", &buf, &len)) == PO_OK) {
        rc = po_privkey_from_pem(buf, len, &out->ali_key);
        free(buf);
    }
    if (!rc && (rc = read_in(dir, "merchant_public_key.pem", &buf, &len)) == PO_OK) {
        char ignored[PO_SERIAL_MAX + 1];
        rc = po_pubkey_from_pem(buf, len, &out->merchant_pub, ignored, sizeof ignored, NULL, 0);
        free(buf);
    }
    if (!rc && (rc = read_in(dir, "apiv3.key", &buf, &len)) == PO_OK) {
        rc = len == 32 ? PO_OK : PO_ERR_INVALID;
        if (!rc)
            memcpy(out->apiv3, buf, 32);
        po_secure_zero(buf, len);
        free(buf);
    }
    if (!rc && (rc = read_in(dir, "stripe_webhook_secret", &buf, &len)) == PO_OK) {
        rc = len && len <= sizeof out->secret ? PO_OK : PO_ERR_INVALID;
        if (!rc) {
            memcpy(out->secret, buf, len);
            out->secret_len = len;
        }
        po_secure_zero(buf, len);
        free(buf);
    }
    /* Older directories have no Stripe API key: the simulated Stripe API
     * then refuses every request (401). */
    if (!rc && read_in(dir, "stripe_api_key", &buf, &len) == PO_OK) {
        if (len < sizeof out->stripe_api_key) {
            memcpy(out->stripe_api_key, buf, len);
            out->stripe_api_key[len] = '\0';
        }
        po_secure_zero(buf, len);
        free(buf);
    }
    if (rc) {
        po_errf(err, errcap, "simulator keys in %s are unreadable or damaged", dir);
        po_sim_identity_free(out);
    }
    return rc;
}

void po_sim_identity_free(struct po_sim_identity *id)
{
    po_privkey_free(id->wx_key);
    po_privkey_free(id->ali_key);
    po_pubkey_free(id->merchant_pub);
    po_secure_zero(id, sizeof *id);
}
