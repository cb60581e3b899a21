/*
 * account.c — a tenant's stored configuration for one channel: the ONE
 * format in which `payonce channel set` writes it and every reader (the
 * gateway, reconciliation, refund submission) loads it back.
 *
 * The document is a JSON object: window_s (timestamp tolerance) plus the
 * channel's own fields. Public keys are stored as PEM (they are not
 * secret). Secrets are in crypto's one stored form (po_secret_store): "sealed:v1:…" (AES-256-GCM
 * under the master key, bound to "<tenant>/<channel>/<field>" so a sealed value cannot be moved to
 * another tenant, channel or field), or "plain:<base64>" in insecure development mode only.
 * Building a document always loads it back the way the gateway will, so a configuration that cannot
 * work is refused before it is stored.
 */
#include "channel_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void po_channel_account_free(struct po_channel_account *a)
{
    for (int i = 0; i < a->nkeys; i++)
        po_pubkey_free(a->keys[i].key);
    po_privkey_free(a->merchant_key);
    if (a->priv) {
        const struct po_channel_ops *ops = po_channel_find(a->channel);
        PO_ASSERT(ops && ops->account_free);
        ops->account_free(a->priv);
    }
    po_secure_zero(a, sizeof *a);
}

void *po_account_priv_new(struct po_channel_account *a, size_t size)
{
    PO_ASSERT(!a->priv);
    a->priv = calloc(1, size);
    return a->priv;
}

void po_account_priv_free(void *priv, size_t size)
{
    if (!priv)
        return;
    po_secure_zero(priv, size);
    free(priv);
}

bool po_account_value_sealed(json_t *v)
{
    if (!json_is_array(v))
        return po_secret_is_stored(json_string_value(v));
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        if (!po_secret_is_stored(json_string_value(e)))
            return false;
    }
    return json_array_size(v) > 0;
}

static void aad_of(const char *tenant, const char *channel, const char *field, char *out,
                   size_t cap)
{
    PO_ASSERT(po_fmt(out, cap, "%s/%s/%s", tenant, channel, field) == PO_OK);
}

json_t *po_account_seal(const struct po_account_input *in, const char *channel, const char *field,
                        const void *secret, size_t len)
{
    char aad[PO_ID_MAX + PO_CHANNEL_SIZE + 64], *out = NULL;
    aad_of(in->tenant, channel, field, aad, sizeof aad);
    if (po_secret_store(in->master, aad, secret, len, &out))
        return NULL;
    json_t *j = json_string(out);
    free(out);
    return j;
}

po_err po_account_unseal(const struct po_channel_account *a, const char *field, const char *stored,
                         const unsigned char *master, unsigned char *dst, size_t cap,
                         size_t *out_len, char *err, size_t errcap)
{
    char aad[PO_ID_MAX + PO_CHANNEL_SIZE + 64];
    unsigned char *plain = NULL;
    size_t len = 0;
    po_err rc;
    if (!stored) {
        po_errf(err, errcap, "%s missing", field);
        return PO_ERR_INVALID;
    }
    aad_of(a->tenant, a->channel, field, aad, sizeof aad);
    rc = po_secret_open(master, aad, stored, &plain, &len);
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

char *po_account_read_file(const char *path, bool strip, size_t *len, char *err, size_t errcap)
{
    char *buf = NULL;
    po_err rc = po_file_read(path, PO_KEY_FILE_MAX, &buf, len);
    if (rc) {
        char why[600];
        po_file_why(path, rc, why, sizeof why);
        po_errf(err, errcap, "cannot read %s: %s", path, why);
        return NULL;
    }
    while (strip && *len && (buf[*len - 1] == '\n' || buf[*len - 1] == '\r'))
        buf[--*len] = '\0';
    return buf;
}

/* An http(s) URL of at most max bytes without spaces or quotes; https only
 * unless loopback_http and it names a loopback host. */
static bool url_ok(const char *u, size_t max, bool loopback_http_only)
{
    if (strlen(u) >= max || strpbrk(u, " \t\r\n\"\\"))
        return false;
    if (strncmp(u, "https://", 8) == 0)
        return true;
    if (!loopback_http_only)
        return strncmp(u, "http://", 7) == 0;
    return strncmp(u, "http://127.", 11) == 0 || strncmp(u, "http://localhost", 16) == 0;
}

po_err po_account_build_api(const struct po_account_input *in, const char *channel,
                            bool need_serial, json_t *cfg, char *err, size_t errcap)
{
    const char *base = in->opt(in->ctx, "api-base-url");
    const char *mkf = in->opt(in->ctx, "merchant-private-key-file");
    const char *mser = in->opt(in->ctx, "merchant-serial");
    const char *nurl = in->opt(in->ctx, "notify-url");
    if (base && !url_ok(base, 256, true)) {
        po_errf(err, errcap, "--api-base-url must be https:// (http:// only on loopback)");
        return PO_ERR_INVALID;
    }
    if (need_serial ? !mkf != !mser : mser != NULL) {
        po_errf(err, errcap,
                need_serial ? "--merchant-private-key-file goes with --merchant-serial"
                            : "--merchant-serial is for wechatpay only");
        return PO_ERR_INVALID;
    }
    if (nurl && !url_ok(nurl, 512, false)) {
        po_errf(err, errcap, "--notify-url must be an http(s) URL under 512 bytes");
        return PO_ERR_INVALID;
    }
    po_err rc = PO_OK;
    if (mkf) {
        size_t len = 0;
        char *pem = po_account_read_file(mkf, false, &len, err, errcap);
        struct po_privkey *k = NULL;
        if (!pem)
            return PO_ERR_IO;
        if (po_privkey_from_pem(pem, len, &k) ||
            (need_serial && !po_id_valid(mser, PO_SERIAL_MAX))) {
            po_errf(err, errcap, "%s: not an RSA private key in PEM, or bad serial", mkf);
            rc = PO_ERR_IO;
        } else {
            json_t *sealed = po_account_seal(in, channel, "merchant_private_key", pem, len);
            if (!sealed) {
                po_errf(err, errcap, "cannot seal the merchant key");
                rc = PO_ERR_INTERNAL;
            } else {
                json_object_set_new(cfg, "merchant_private_key", sealed);
                if (need_serial)
                    json_object_set_new(cfg, "merchant_serial", json_string(mser));
            }
        }
        po_privkey_free(k);
        po_secure_zero(pem, len);
        free(pem);
    }
    if (!rc && base)
        json_object_set_new(cfg, "api_base_url", json_string(base));
    if (!rc && nurl)
        json_object_set_new(cfg, "notify_url", json_string(nurl));
    return rc;
}

po_err po_account_load_api(json_t *cfg, const unsigned char *master, struct po_channel_account *a,
                           const char *default_base, bool need_serial, char *err, size_t errcap)
{
    if (!po_set_field(a->api_base_url, sizeof a->api_base_url, po_json_str(cfg, "api_base_url")))
        PO_ASSERT(po_strcpy(a->api_base_url, sizeof a->api_base_url, default_base) == PO_OK);
    if (po_json_str(cfg, "notify_url") &&
        !po_set_field(a->notify_url, sizeof a->notify_url, po_json_str(cfg, "notify_url"))) {
        po_errf(err, errcap, "notify_url too long");
        return PO_ERR_INVALID;
    }
    const char *mk = po_json_str(cfg, "merchant_private_key");
    if (!mk)
        return PO_OK;
    unsigned char pem[8192];
    size_t len = 0;
    po_err rc = po_account_unseal(a, "merchant_private_key", mk, master, pem, sizeof pem, &len, err,
                                  errcap);
    if (!rc && ((need_serial && !po_set_field(a->merchant_serial, sizeof a->merchant_serial,
                                              po_json_str(cfg, "merchant_serial"))) ||
                po_privkey_from_pem((const char *)pem, len, &a->merchant_key))) {
        po_errf(err, errcap, "merchant private key or serial invalid");
        rc = PO_ERR_INVALID;
    }
    po_secure_zero(pem, sizeof pem);
    a->api_ready = !rc && a->merchant_key && a->api_base_url[0];
    return rc;
}

po_err po_channel_account_load(const char *tenant, const char *channel, const char *json,
                               const unsigned char *master, struct po_channel_account *out,
                               char *err, size_t errcap)
{
    const struct po_channel_ops *ops = po_channel_find(channel);
    struct po_channel_account *a = calloc(1, sizeof *a);
    po_err rc = PO_ERR_INVALID;
    if (!a)
        return PO_ERR_NOMEM;
    json_t *root = NULL;
    if (po_json_parse(json, strlen(json), &root, NULL, 0) == PO_ERR_NOMEM) {
        free(a);
        return PO_ERR_NOMEM;
    }
    if (!ops) {
        po_errf(err, errcap, "no channel %s", channel);
        goto out;
    }
    if (!json_is_object(root)) {
        po_errf(err, errcap, "stored configuration is not a JSON object");
        goto out;
    }
    if (po_strcpy(a->tenant, sizeof a->tenant, tenant) ||
        po_strcpy(a->channel, sizeof a->channel, channel))
        goto out;
    json_t *w = json_object_get(root, "window_s");
    a->window_s = json_is_integer(w) ? json_integer_value(w) : PO_WINDOW_DEFAULT_S;
    rc = ops->account_load(root, master, a, err, errcap);
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

static const char *table_opt(void *ctx, const char *name)
{
    const struct po_account_opts *t = ctx;
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->names[i], name) == 0)
            return t->values[i];
    return NULL;
}

static int table_opt_all(void *ctx, const char *name, const char **vals, int max)
{
    const struct po_account_opts *t = ctx;
    int k = 0;
    for (int i = 0; i < t->n && k < max; i++)
        if (strcmp(t->names[i], name) == 0)
            vals[k++] = t->values[i];
    return k;
}

struct po_account_input po_account_input_table(const char *tenant, const unsigned char *master,
                                               const struct po_account_opts *t)
{
    return (struct po_account_input){.tenant = tenant,
                                     .master = master,
                                     .opt = table_opt,
                                     .opt_all = table_opt_all,
                                     .ctx = (void *)(uintptr_t)t};
}

po_err po_channel_account_build(const struct po_channel_ops *ops, const struct po_account_input *in,
                                char **out_doc, char *err, size_t errcap)
{
    json_t *cfg = json_object();
    const char *w = in->opt(in->ctx, "timestamp-window");
    int64_t window = PO_WINDOW_DEFAULT_S;
    po_err rc = PO_OK;
    if (!cfg)
        return PO_ERR_NOMEM;
    if (w && po_parse_i64(w, 1, 86400, &window)) {
        po_errf(err, errcap, "--timestamp-window: 1..86400 seconds");
        rc = PO_ERR_INVALID;
    }
    if (!rc) {
        json_object_set_new(cfg, "window_s", json_integer(window));
        rc = ops->account_build(in, cfg, err, errcap);
    }
    char *doc = rc ? NULL : po_json_dumps(cfg, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(cfg);
    if (!rc && !doc)
        rc = PO_ERR_NOMEM;
    if (!rc) {
        struct po_channel_account *a = calloc(1, sizeof *a);
        rc = a ? po_channel_account_load(in->tenant, ops->name, doc, in->master, a, err, errcap)
               : PO_ERR_NOMEM;
        if (rc == PO_ERR_INVALID)
            rc = PO_ERR_INTERNAL; /* our own document does not load: a bug, not bad input */
        if (a && !rc)
            po_channel_account_free(a);
        free(a);
    }
    if (rc) {
        free(doc);
        return rc;
    }
    *out_doc = doc;
    return PO_OK;
}
