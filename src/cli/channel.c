/*
 * channel.c — `payonce channel set`: a tenant's credentials for one channel.
 *
 * Public keys are stored as PEM (they are not secret); the APIv3 key and
 * webhook secrets are sealed with the master key (AES-256-GCM, bound to
 * "<tenant>/<channel>/<field>") before they reach the database. Without a
 * master key the command refuses, unless --insecure-dev, which stores them
 * base64-encoded in the clear and says so.
 */
#include "cli_int.h"

#include "../channel/channel.h"
#include "../crypto/crypto.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int load_master_key(const struct opts *o, unsigned char key[32], bool *have)
{
    const char *path = opt(o, "master-key-file");
    if (!path || !*path)
        path = getenv("PAYONCE_MASTER_KEY_FILE");
    *have = false;
    if (!path || !*path)
        return 0;
    char err[PO_ERRBUF_MAX] = "";
    if (po_master_key_load(path, key, err, sizeof err)) {
        fprintf(stderr, "payonce: %s\n", err);
        return EXIT_FAIL;
    }
    *have = true;
    return 0;
}

/* Reads a small file (key, certificate, secret); trailing newlines dropped
 * when strip is set. */
static char *read_small(const char *path, bool strip, size_t *len)
{
    char *buf = NULL;
    po_err rc = po_file_read(path, PO_KEY_FILE_MAX, &buf, len);
    if (rc) {
        fprintf(stderr, "payonce: cannot read %s (%s)\n", path, po_err_name(rc));
        return NULL;
    }
    while (strip && *len && (buf[*len - 1] == '\n' || buf[*len - 1] == '\r'))
        buf[--*len] = '\0';
    return buf;
}

/* Seals a secret for its slot, or encodes it in the clear in dev mode. */
static json_t *sealed(const unsigned char *master, const char *tenant, const char *channel,
                      const char *field, const unsigned char *secret, size_t len)
{
    char aad[256], *out = NULL;
    (void)snprintf(aad, sizeof aad, "%s/%s/%s", tenant, channel, field);
    if (master) {
        if (po_seal(master, aad, secret, len, &out))
            return NULL;
    } else {
        char *b64 = NULL;
        if (po_b64_encode(secret, len, &b64))
            return NULL;
        size_t n = strlen(b64) + 7;
        out = malloc(n);
        if (out)
            (void)snprintf(out, n, "plain:%s", b64);
        free(b64);
    }
    json_t *j = out ? json_string(out) : NULL;
    free(out);
    return j;
}

/* Adds one verification key {serial, public_key_pem} to keys. */
static int add_key(json_t *keys, const char *path, const char *pub_key_id)
{
    size_t len = 0;
    char *pem = read_small(path, false, &len);
    if (!pem)
        return EXIT_FAIL;
    struct po_pubkey *k = NULL;
    char serial[PO_SERIAL_MAX + 1] = "", err[PO_ERRBUF_MAX] = "";
    char *out = NULL;
    int ret = EXIT_FAIL;
    if (po_pubkey_from_pem(pem, len, &k, serial, sizeof serial, err, sizeof err)) {
        fprintf(stderr, "payonce: %s: %s\n", path, err);
        goto out;
    }
    if (pub_key_id) {
        if (strncmp(pub_key_id, "PUB_KEY_ID_", 11) != 0 || strlen(pub_key_id) > PO_SERIAL_MAX ||
            !po_id_valid(pub_key_id, PO_SERIAL_MAX)) {
            fprintf(stderr, "payonce: --public-key-id must look like PUB_KEY_ID_...\n");
            goto out;
        }
        PO_ASSERT(po_strcpy(serial, sizeof serial, pub_key_id) == PO_OK);
    } else if (!serial[0]) {
        fprintf(stderr, "payonce: %s is a bare public key: use --platform-public-key-file with"
                        " --public-key-id\n", path);
        goto out;
    }
    if (po_pubkey_to_pem(k, &out))
        goto out;
    json_array_append_new(keys, json_pack("{s:s, s:s}", "serial", serial, "public_key_pem", out));
    printf("  verification key %s from %s\n", serial, path);
    ret = 0;
out:
    free(out);
    po_pubkey_free(k);
    free(pem);
    return ret;
}

/* Optional, for the channel's own APIs (refund submission, order queries):
 * the API base URL, the merchant's (Alipay: the app's) private key that
 * signs requests, sealed, with its serial where the channel names one, and
 * the URL the channel sends refund results to. */
static int api_options(const struct opts *o, const unsigned char *master, const char *tenant,
                       const char *channel, bool need_serial, json_t *cfg)
{
    const char *base = opt(o, "api-base-url"), *mkf = opt(o, "merchant-private-key-file");
    const char *mser = opt(o, "merchant-serial"), *nurl = opt(o, "notify-url");
    if (base && (strlen(base) >= 256 || strpbrk(base, " \t\r\n\"\\") ||
                 (strncmp(base, "https://", 8) != 0 && strncmp(base, "http://127.", 11) != 0 &&
                  strncmp(base, "http://localhost", 16) != 0))) {
        fprintf(stderr, "payonce: --api-base-url must be https:// (http:// only on loopback)\n");
        return EXIT_USAGE;
    }
    if (need_serial ? !mkf != !mser : mser != NULL) {
        fprintf(stderr, need_serial
                            ? "payonce: --merchant-private-key-file goes with --merchant-serial\n"
                            : "payonce: --merchant-serial is for wechatpay only\n");
        return EXIT_USAGE;
    }
    if (nurl && (strlen(nurl) >= 512 || strpbrk(nurl, " \t\r\n\"\\") ||
                 (strncmp(nurl, "https://", 8) != 0 && strncmp(nurl, "http://", 7) != 0))) {
        fprintf(stderr, "payonce: --notify-url must be an http(s) URL under 512 bytes\n");
        return EXIT_USAGE;
    }
    int ret = 0;
    if (mkf) {
        size_t len = 0;
        char *pem = read_small(mkf, false, &len);
        struct po_privkey *k = NULL;
        if (!pem || po_privkey_from_pem(pem, len, &k) ||
            (need_serial && !po_id_valid(mser, PO_SERIAL_MAX))) {
            fprintf(stderr, "payonce: %s: not an RSA private key in PEM, or bad serial\n", mkf);
            ret = EXIT_FAIL;
        } else {
            json_t *sealed_key = sealed(master, tenant, channel, "merchant_private_key",
                                        (unsigned char *)pem, len);
            if (!sealed_key)
                ret = fail(PO_ERR_INTERNAL, "cannot seal the merchant key");
            else
                json_object_set_new(cfg, "merchant_private_key", sealed_key);
            if (sealed_key && need_serial)
                json_object_set_new(cfg, "merchant_serial", json_string(mser));
        }
        po_privkey_free(k);
        if (pem)
            po_secure_zero(pem, len);
        free(pem);
    }
    if (!ret && base)
        json_object_set_new(cfg, "api_base_url", json_string(base));
    if (!ret && nurl)
        json_object_set_new(cfg, "notify_url", json_string(nurl));
    return ret;
}

static int build_wechatpay(const struct opts *o, const unsigned char *master, const char *tenant,
                           json_t *cfg)
{
    const char *mchid = need(o, "mchid"), *keyfile = need(o, "apiv3-key-file");
    if (!mchid || !keyfile)
        return EXIT_USAGE;
    if (!po_id_valid(mchid, PO_ID_MAX) || (opt(o, "appid") && !po_id_valid(opt(o, "appid"), PO_ID_MAX))) {
        fprintf(stderr, "payonce: --mchid/--appid: 1-64 characters of [A-Za-z0-9_-]\n");
        return EXIT_USAGE;
    }
    size_t klen = 0;
    char *key = read_small(keyfile, true, &klen);
    if (!key)
        return EXIT_FAIL;
    if (klen != 32) {
        fprintf(stderr, "payonce: the APIv3 key must be 32 bytes (found %zu)\n", klen);
        po_secure_zero(key, klen);
        free(key);
        return EXIT_FAIL;
    }
    json_t *sk = sealed(master, tenant, "wechatpay", "apiv3_key", (unsigned char *)key, klen);
    po_secure_zero(key, klen);
    free(key);
    json_t *keys = json_array();
    const char *certs[PO_CHANNEL_KEYS_MAX], *pubs[PO_CHANNEL_KEYS_MAX], *ids[PO_CHANNEL_KEYS_MAX];
    int nc = opt_all(o, "platform-cert-file", certs, PO_CHANNEL_KEYS_MAX);
    int np = opt_all(o, "platform-public-key-file", pubs, PO_CHANNEL_KEYS_MAX);
    int ni = opt_all(o, "public-key-id", ids, PO_CHANNEL_KEYS_MAX);
    int ret = 0;
    if (np != ni) {
        fprintf(stderr, "payonce: each --platform-public-key-file needs its --public-key-id\n");
        ret = EXIT_USAGE;
    } else if (nc + np == 0) {
        fprintf(stderr, "payonce: give --platform-cert-file or --platform-public-key-file\n");
        ret = EXIT_USAGE;
    } else if (nc + np > PO_CHANNEL_KEYS_MAX) {
        fprintf(stderr, "payonce: at most %d verification keys\n", PO_CHANNEL_KEYS_MAX);
        ret = EXIT_USAGE;
    }
    for (int i = 0; i < nc && !ret; i++)
        ret = add_key(keys, certs[i], NULL);
    for (int i = 0; i < np && !ret; i++)
        ret = add_key(keys, pubs[i], ids[i]);
    if (!ret && !sk)
        ret = fail(PO_ERR_INTERNAL, "cannot seal the APIv3 key");
    if (!ret)
        ret = api_options(o, master, tenant, "wechatpay", true, cfg);
    if (!ret) {
        json_object_set_new(cfg, "mchid", json_string(mchid));
        if (opt(o, "appid"))
            json_object_set_new(cfg, "appid", json_string(opt(o, "appid")));
        json_object_set_new(cfg, "apiv3_key", sk);
        json_object_set_new(cfg, "keys", keys);
        return 0;
    }
    json_decref(sk);
    json_decref(keys);
    return ret;
}

static int build_alipay(const struct opts *o, const unsigned char *master, const char *tenant,
                        json_t *cfg)
{
    const char *app_id = need(o, "app-id"), *path = need(o, "alipay-public-key-file");
    if (!app_id || !path)
        return EXIT_USAGE;
    if (!po_id_valid(app_id, PO_ID_MAX) ||
        (opt(o, "seller-id") && !po_id_valid(opt(o, "seller-id"), PO_ID_MAX))) {
        fprintf(stderr, "payonce: --app-id/--seller-id: 1-64 characters of [A-Za-z0-9_-]\n");
        return EXIT_USAGE;
    }
    size_t len = 0;
    char *text = read_small(path, true, &len);
    if (!text)
        return EXIT_FAIL;
    struct po_pubkey *k = NULL;
    char serial[PO_SERIAL_MAX + 1], err[PO_ERRBUF_MAX] = "", *pem = NULL;
    /* Alipay hands its key out as bare base64 as often as PEM. */
    po_err rc = strstr(text, "-----BEGIN")
                    ? po_pubkey_from_pem(text, len, &k, serial, sizeof serial, err, sizeof err)
                    : po_pubkey_from_spki_b64(text, &k, err, sizeof err);
    free(text);
    if (rc || po_pubkey_to_pem(k, &pem)) {
        fprintf(stderr, "payonce: %s: %s\n", path, err);
        po_pubkey_free(k);
        return EXIT_FAIL;
    }
    json_object_set_new(cfg, "app_id", json_string(app_id));
    if (opt(o, "seller-id"))
        json_object_set_new(cfg, "seller_id", json_string(opt(o, "seller-id")));
    json_object_set_new(cfg, "public_key_pem", json_string(pem));
    free(pem);
    po_pubkey_free(k);
    return api_options(o, master, tenant, "alipay", false, cfg);
}

static int build_stripe(const struct opts *o, const unsigned char *master, const char *tenant,
                        json_t *cfg)
{
    const char *files[PO_WEBHOOK_SECRETS_MAX + 1];
    int n = opt_all(o, "webhook-secret-file", files, PO_WEBHOOK_SECRETS_MAX + 1);
    if (n == 0 || n > PO_WEBHOOK_SECRETS_MAX) {
        fprintf(stderr, "payonce: give 1-%d --webhook-secret-file\n", PO_WEBHOOK_SECRETS_MAX);
        return EXIT_USAGE;
    }
    json_t *list = json_array();
    for (int i = 0; i < n; i++) {
        size_t len = 0;
        char *sec = read_small(files[i], true, &len);
        char field[48];
        (void)snprintf(field, sizeof field, "webhook_secret/%d", i);
        json_t *s = sec && len > 0 && len <= PO_SECRET_MAX
                        ? sealed(master, tenant, "stripe", field, (unsigned char *)sec, len)
                        : NULL;
        if (sec)
            po_secure_zero(sec, len);
        free(sec);
        if (!s) {
            fprintf(stderr, "payonce: %s: a secret of 1-%d bytes is required\n", files[i],
                    PO_SECRET_MAX);
            json_decref(list);
            return EXIT_FAIL;
        }
        json_array_append_new(list, s);
    }
    json_object_set_new(cfg, "webhook_secrets", list);
    return 0;
}

int cmd_channel_set(struct po_store *s, const struct opts *o)
{
    const char *tenant = opt(o, "tenant"), *channel = opt(o, "channel");
    unsigned char master[32];
    bool have = false;
    int ret = load_master_key(o, master, &have);
    if (ret)
        return ret;
    if (!po_channel_valid(channel)) {
        fprintf(stderr, "payonce: --channel must be wechatpay, alipay or stripe\n");
        return EXIT_USAGE;
    }
    if (!have && !flag(o, "insecure-dev")) {
        fprintf(stderr, "payonce: secrets are sealed with a master key: give --master-key-file"
                        " FILE or PAYONCE_MASTER_KEY_FILE (32 random bytes, e.g.\n"
                        "  head -c 32 /dev/urandom > master.key), or --insecure-dev\n");
        return EXIT_USAGE;
    }
    if (!have)
        fprintf(stderr, "payonce: WARNING: --insecure-dev: secrets stored UNSEALED\n");
    json_t *cfg = json_object();
    const char *w = opt(o, "timestamp-window");
    int64_t window = PO_WINDOW_DEFAULT_S;
    if (w && po_parse_i64(w, 1, 86400, &window)) {
        fprintf(stderr, "payonce: --timestamp-window: 1..86400 seconds\n");
        json_decref(cfg);
        return EXIT_USAGE;
    }
    json_object_set_new(cfg, "window_s", json_integer(window));
    printf("%s for tenant %s:\n", channel, tenant);
    const unsigned char *mk = have ? master : NULL;
    if (strcmp(channel, "wechatpay") == 0)
        ret = build_wechatpay(o, mk, tenant, cfg);
    else if (strcmp(channel, "alipay") == 0)
        ret = build_alipay(o, mk, tenant, cfg);
    else
        ret = build_stripe(o, mk, tenant, cfg);
    char *doc = ret ? NULL : json_dumps(cfg, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(cfg);
    if (ret) {
        po_secure_zero(master, sizeof master);
        return ret;
    }
    /* Load it back exactly as serve will, so a bad configuration fails here. */
    char err[PO_ERRBUF_MAX] = "", now[PO_TIME_MAX];
    struct po_channel_account *acct = calloc(1, sizeof *acct);
    po_err rc = acct ? po_channel_account_load(tenant, channel, doc, mk, acct, err, sizeof err)
                     : PO_ERR_NOMEM;
    po_secure_zero(master, sizeof master);
    if (acct && !rc)
        po_channel_account_free(acct);
    free(acct);
    if (rc) {
        free(doc);
        return fail(rc, err);
    }
    po_clock_now_iso(now, sizeof now);
    struct po_param p[] = {PO_TEXT(tenant), PO_TEXT(channel), PO_TEXT(doc), PO_TEXT(now)};
    rc = po_store_begin(s, err, sizeof err);
    if (!rc) {
        rc = po_store_exec(s,
                           "INSERT INTO channel_account (tenant_id, channel, config, updated_at)"
                           " VALUES (?, ?, ?, ?) ON CONFLICT (tenant_id, channel) DO UPDATE SET"
                           " config = excluded.config, updated_at = excluded.updated_at",
                           p, 4, NULL, NULL, err, sizeof err);
        if (rc)
            po_store_rollback(s);
        else
            rc = po_store_commit(s, err, sizeof err);
    }
    free(doc);
    if (rc)
        return fail(rc, strstr(err, "FOREIGN") || strstr(err, "foreign") ? "no such tenant" : err);
    printf("saved (secrets %s)\n", have ? "sealed with the master key" : "NOT sealed");
    return 0;
}
