/*
 * alipay.c — Alipay asynchronous notifications (form-encoded, RSA2).
 *
 * rsaCheckV1: drop `sign` and `sign_type`, skip empty values, sort the rest
 * by key (bytewise), join "k=v" with "&", verify SHA256withRSA with the
 * Alipay public key. Values are percent-decoded to the bytes of `charset`
 * (utf-8 or gbk) and the signature is checked over exactly those bytes.
 *
 * Events: TRADE_SUCCESS / TRADE_FINISHED are the payment (the same key, so
 * FINISHED after SUCCESS is a duplicate); TRADE_CLOSED with refund_fee is a
 * full refund whose request number is out_biz_no (Alipay's default for it
 * is out_trade_no); TRADE_SUCCESS with refund_fee and out_biz_no is a
 * partial refund. refund_fee is the trade's refunded total so far, so the
 * event says so (amount_is_cumulative) and the engine takes the refund's
 * own recorded amount when that total covers it. Amounts are yuan text,
 * converted to fen exactly.
 * Anything else is verified and ignored.
 */
#include "channel_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* *ok when f carries Alipay's signature; PO_ERR_NOMEM when memory ran out
 * (the notification is answered retry, not refused). */
static po_err verify(const struct po_channel_account *a, const struct po_form *f,
                     struct po_notify_result *out, bool *ok)
{
    *ok = false;
    const char *sign = po_form_get(f, "sign"), *type = po_form_get(f, "sign_type");
    if (!sign || !*sign) {
        po_notify_reject(out, PO_R_MISSING_SIGNATURE, "sign is missing");
        return PO_OK;
    }
    if (!type || strcmp(type, "RSA2") != 0) {
        po_notify_reject(out, PO_R_UNSUPPORTED_SIGNATURE_TYPE, "only sign_type RSA2 is accepted");
        return PO_OK;
    }
    unsigned char *raw = NULL;
    size_t raw_len = 0;
    po_err rc = po_b64_decode(sign, strlen(sign), &raw, &raw_len);
    if (rc == PO_ERR_NOMEM)
        return rc;
    if (rc) {
        po_notify_reject(out, PO_R_BAD_SIGNATURE, "sign is not base64");
        return PO_OK;
    }
    /* The key: Alipay's public key; in certificate mode the certificate
     * the notification names (alipay_cert_sn), or, when it names none,
     * any of the tenant's (a rotation's old and new). */
    const char *named = po_form_get(f, "alipay_cert_sn");
    int k = 0;
    if (named && *named) {
        while (k < a->nkeys && strcmp(a->keys[k].serial, named) != 0)
            k++;
        if (k == a->nkeys) {
            free(raw);
            po_notify_reject(out, PO_R_UNKNOWN_SERIAL,
                             "alipay_cert_sn %.40s is none of the tenant's Alipay certificates",
                             named);
            return PO_OK;
        }
    }
    int last = named && *named ? k : a->nkeys - 1;
    /* Empty values left out (the Java SDK, Alipay's gateway) or, when there
     * are any, kept (the Node SDK): both are Alipay's own signature over
     * the same fields, so either admits nothing forged. */
    bool has_empty = false;
    for (int i = 0; i < f->n; i++)
        has_empty |= f->p[i].val_len == 0;
    rc = PO_ERR_INVALID;
    for (; rc == PO_ERR_INVALID && k <= last; k++) {
        for (int keep = 0; rc == PO_ERR_INVALID && keep <= (has_empty ? 1 : 0); keep++) {
            size_t len = 0;
            char *content = po_alipay_sign_content(f, true, keep == 1, &len);
            rc = content ? po_rsa_sha256_verify(a->keys[k].key, content, len, raw, raw_len)
                         : PO_ERR_NOMEM;
            free(content);
        }
    }
    free(raw);
    if (rc && rc != PO_ERR_INVALID) /* not checked: retry */
        return rc;
    if (rc)
        po_notify_reject(out, PO_R_BAD_SIGNATURE,
                         "sign does not verify with the Alipay public key");
    *ok = rc == PO_OK;
    return PO_OK;
}

static bool charset_ok(const struct po_form *f, struct po_notify_result *out)
{
    const char *cs = po_form_get(f, "charset");
    if (!cs || !*cs || strcasecmp(cs, "utf-8") == 0 || strcasecmp(cs, "utf8") == 0) {
        for (int i = 0; i < f->n; i++)
            if (!po_utf8_valid(f->p[i].val, f->p[i].val_len)) {
                po_notify_reject(out, PO_R_INVALID_UTF8, "field %.32s is not valid UTF-8",
                                 f->p[i].key);
                return false;
            }
        return true;
    }
    if (strcasecmp(cs, "gbk") == 0 || strcasecmp(cs, "gb2312") == 0)
        return true; /* the fields payonce reads are ASCII; others are only signed */
    po_notify_reject(out, PO_R_BAD_CHARSET, "charset %.16s is not supported", cs);
    return false;
}

static bool amount(const struct po_form *f, const char *key, int64_t *out)
{
    return po_parse_major_amount(po_form_get(f, key), out) == PO_OK;
}

static po_err parse(const struct po_channel_account *a, const struct po_notify_req *req,
                    struct po_notify_result *out)
{
    struct po_form *f = calloc(1, sizeof *f);
    if (!f)
        return PO_ERR_NOMEM;
    bool ok = false;
    po_err rc = po_form_parse(req->body, req->body_len, f);
    if (rc == PO_ERR_INVALID) {
        rc = PO_OK;
        po_notify_reject(out, PO_R_MALFORMED_BODY, "body is not a well-formed form");
        goto out;
    }
    if (rc || !charset_ok(f, out) || (rc = verify(a, f, out, &ok)) || !ok)
        goto out;
    struct po_event *ev = &out->ev;
    const char *app_id = po_form_get(f, "app_id"), *seller = po_form_get(f, "seller_id");
    const char *status = po_form_get(f, "trade_status");
    po_notify_event_init(a, out);
    (void)po_set_field(ev->currency, sizeof ev->currency, "CNY");
    const char *refund_no = po_form_get(f, "out_biz_no");
    bool has_refund = po_form_get(f, "refund_fee") && *po_form_get(f, "refund_fee");
    bool paid =
        status && (strcmp(status, "TRADE_SUCCESS") == 0 || strcmp(status, "TRADE_FINISHED") == 0);
    bool closed = status && strcmp(status, "TRADE_CLOSED") == 0;
    /* A full refund closes the trade; a partial one names its request. */
    bool refund = has_refund && (closed || (paid && refund_no && *refund_no));
    if (!refund && !paid) {
        po_notify_ignore(out, "trade_status %.20s: nothing to apply", status ? status : "-");
        goto out;
    }
    if (!po_set_field(ev->out_trade_no, sizeof ev->out_trade_no, po_form_get(f, "out_trade_no")) ||
        !po_set_field(ev->channel_txn_id, sizeof ev->channel_txn_id, po_form_get(f, "trade_no"))) {
        po_notify_reject(out, PO_R_MALFORMED_BODY, "out_trade_no or trade_no missing");
        goto out;
    }
    if (refund) {
        ev->type = PO_EV_REFUND_SUCCESS;
        if (!refund_no || !*refund_no)
            refund_no = ev->out_trade_no;
        char rid[PO_TXN_ID_MAX + PO_ID_MAX + 2];
        if (po_fmt(rid, sizeof rid, "%s_%s", ev->channel_txn_id, refund_no) ||
            !po_set_field(ev->out_refund_no, sizeof ev->out_refund_no, refund_no) ||
            !po_set_field(ev->channel_refund_id, sizeof ev->channel_refund_id, rid) ||
            !amount(f, "refund_fee", &ev->amount_minor)) {
            po_notify_reject(out, PO_R_MALFORMED_BODY, "refund fields invalid");
            goto out;
        }
        ev->amount_is_cumulative = true; /* refund_fee: the trade's refunded total */
    } else {
        ev->type = PO_EV_PAY_SUCCESS;
        if (!amount(f, "total_amount", &ev->amount_minor)) {
            po_notify_reject(out, PO_R_MALFORMED_BODY, "total_amount is not an amount in yuan");
            goto out;
        }
    }
    const struct po_alipay_account *ali = po_alipay_of(a);
    if (!app_id || strcmp(app_id, ali->app_id) != 0 ||
        (ali->seller_id[0] && (!seller || strcmp(seller, ali->seller_id) != 0))) {
        po_notify_mismatch(out,
                           !app_id || strcmp(app_id, ali->app_id) != 0 ? PO_R_APP_ID_MISMATCH
                                                                       : PO_R_SELLER_ID_MISMATCH,
                           "notification for app_id %.32s seller_id %.32s, tenant has %.32s %.32s",
                           app_id ? app_id : "-", seller ? seller : "-", ali->app_id,
                           ali->seller_id[0] ? ali->seller_id : "-");
        goto out;
    }
    char verr[PO_ERRBUF_SIZE];
    if (po_event_validate(ev, verr, sizeof verr))
        po_notify_reject(out, PO_R_MALFORMED_BODY, "%s", verr);
out:
    po_form_free(f);
    free(f);
    return rc;
}

/* ---- the account ----
 *
 * Public-key mode: Alipay's public key (--alipay-public-key-file, PEM or
 * bare base64) is a->keys[0]. Certificate mode (公钥证书模式): the app's
 * public-key certificate (--app-cert-file) and Alipay's root chain
 * (--alipay-root-cert-file) give the SNs every request carries
 * (app_cert_sn, alipay_root_cert_sn); Alipay's public-key certificates
 * (--alipay-cert-file, repeatable: a rotation's old and new) are a->keys,
 * each under its SN, and an answer is verified with the one its
 * alipay_cert_sn names. An app is in one mode or the other. */

/* One --alipay-cert-file: {"sn", "pem"} appended to certs (the PEM as
 * given; its first certificate is Alipay's, a chain after it is its
 * issuers). */
static po_err add_cert(const struct po_account_input *in, json_t *certs, const char *path,
                       char *err, size_t errcap)
{
    size_t len = 0;
    char *pem = po_account_read_file(path, false, &len, err, errcap), sn[PO_SERIAL_MAX + 1];
    char kerr[PO_ERRBUF_SIZE] = "", ignored[PO_SERIAL_MAX + 1], line[PO_ERRBUF_SIZE + 64];
    struct po_pubkey *k = NULL;
    int64_t nb = 0, na = 0;
    if (!pem)
        return PO_ERR_IO;
    po_err rc = po_cert_alipay_sn(pem, len, false, sn, sizeof sn, kerr, sizeof kerr);
    if (!rc)
        rc = po_pubkey_from_pem(pem, len, &k, ignored, sizeof ignored, kerr, sizeof kerr);
    if (!rc)
        rc = po_cert_validity(pem, len, &nb, &na);
    if (rc) {
        po_errf(err, errcap, "%s: not Alipay's RSA public-key certificate (%s)", path, kerr);
        rc = PO_ERR_IO;
    } else if (po_json_append(certs, json_pack("{s:s, s:s}", "sn", sn, "pem", pem)) == NULL) {
        rc = PO_ERR_NOMEM;
    } else if (in->note) {
        char until[PO_TIME_SIZE];
        po_clock_iso_at(na, until, sizeof until);
        (void)snprintf(line, sizeof line, "Alipay certificate %s from %s (valid until %s)", sn,
                       path, until);
        in->note(in->ctx, line);
    }
    po_pubkey_free(k);
    free(pem);
    return rc;
}

/* Certificate mode's options into cfg (app_cert_sn, alipay_root_cert_sn,
 * alipay_certs). */
static po_err build_certs(const struct po_account_input *in, json_t *cfg, char *err, size_t errcap)
{
    const char *app = in->opt(in->ctx, "app-cert-file");
    const char *root = in->opt(in->ctx, "alipay-root-cert-file");
    const char *paths[PO_CHANNEL_KEYS_MAX + 1];
    int n = in->opt_all(in->ctx, "alipay-cert-file", paths, PO_CHANNEL_KEYS_MAX + 1);
    if (!app || !root || n == 0 || n > PO_CHANNEL_KEYS_MAX) {
        po_errf(err, errcap,
                "certificate mode needs --app-cert-file, --alipay-root-cert-file and 1-%d"
                " --alipay-cert-file",
                PO_CHANNEL_KEYS_MAX);
        return PO_ERR_INVALID;
    }
    const char *files[] = {app, root};
    const char *names[] = {"app_cert_sn", "alipay_root_cert_sn"};
    for (int i = 0; i < 2; i++) {
        size_t len = 0;
        char *pem = po_account_read_file(files[i], false, &len, err, errcap), kerr[PO_ERRBUF_SIZE];
        char sn[PO_ALIPAY_ROOT_SN_MAX + 1];
        if (!pem)
            return PO_ERR_IO;
        po_err rc = po_cert_alipay_sn(pem, len, i == 1, sn, sizeof sn, kerr, sizeof kerr);
        free(pem);
        if (rc) {
            po_errf(err, errcap, "%s: %s", files[i], kerr);
            return PO_ERR_IO;
        }
        json_object_set_new(cfg, names[i], json_string(sn));
    }
    json_t *certs = json_array();
    po_err rc = certs ? PO_OK : PO_ERR_NOMEM;
    for (int i = 0; i < n && !rc; i++)
        rc = add_cert(in, certs, paths[i], err, errcap);
    if (!rc)
        json_object_set_new(cfg, "alipay_certs", certs);
    else
        json_decref(certs);
    return rc;
}

/* Two tenants on one Alipay app: Alipay signs both's notifications with
 * the same key and names the same app_id, so only the seller id (PID)
 * tells whose a notification is — each must have one, and they must differ
 * (issue 44 item 6). */
static const char *account_clash(json_t *mine, json_t *other)
{
    const char *a = po_json_str(mine, "app_id"), *b = po_json_str(other, "app_id");
    if (!a || !b || strcmp(a, b) != 0)
        return NULL;
    const char *sa = po_json_str(mine, "seller_id"), *sb = po_json_str(other, "seller_id");
    if (!sa || !*sa)
        return "this Alipay app id is another tenant's too: give --seller-id (each tenant's"
               " notifications are told apart by it)";
    if (!sb || !*sb)
        return "this Alipay app id is another tenant's too, and that tenant's account has no"
               " seller id: set its --seller-id first";
    if (strcmp(sa, sb) == 0)
        return "this Alipay app id and seller id are another tenant's: notifications could not"
               " be told apart";
    return NULL;
}

static po_err account_build(const struct po_account_input *in, json_t *cfg, char *err,
                            size_t errcap)
{
    const char *app_id = in->opt(in->ctx, "app-id"), *seller = in->opt(in->ctx, "seller-id");
    const char *path = in->opt(in->ctx, "alipay-public-key-file");
    bool cert = in->opt(in->ctx, "app-cert-file") || in->opt(in->ctx, "alipay-root-cert-file") ||
                in->opt(in->ctx, "alipay-cert-file");
    if (!app_id || !path == !cert) {
        po_errf(err, errcap,
                "--app-id is required, and either --alipay-public-key-file (public-key mode) or"
                " the certificates (--app-cert-file, --alipay-root-cert-file, --alipay-cert-file)");
        return PO_ERR_INVALID;
    }
    if (!po_id_valid(app_id, PO_ID_MAX) || (seller && !po_id_valid(seller, PO_ID_MAX))) {
        po_errf(err, errcap, "--app-id/--seller-id: 1-64 characters of [A-Za-z0-9_-]");
        return PO_ERR_INVALID;
    }
    json_object_set_new(cfg, "app_id", json_string(app_id));
    if (seller)
        json_object_set_new(cfg, "seller_id", json_string(seller));
    po_err rc = cert ? build_certs(in, cfg, err, errcap) : PO_OK;
    if (rc)
        return rc;
    if (!cert) {
        size_t len = 0;
        char *text = po_account_read_file(path, true, &len, err, errcap);
        if (!text)
            return PO_ERR_IO;
        struct po_pubkey *k = NULL;
        char serial[PO_SERIAL_MAX + 1], kerr[PO_ERRBUF_SIZE] = "", *pem = NULL;
        /* Alipay hands its key out as bare base64 as often as PEM. */
        rc = strstr(text, "-----BEGIN")
                 ? po_pubkey_from_pem(text, len, &k, serial, sizeof serial, kerr, sizeof kerr)
                 : po_pubkey_from_spki_b64(text, &k, kerr, sizeof kerr);
        free(text);
        if (rc || po_pubkey_to_pem(k, &pem)) {
            po_errf(err, errcap, "%s: %s", path, kerr);
            po_pubkey_free(k);
            return PO_ERR_IO;
        }
        json_object_set_new(cfg, "public_key_pem", json_string(pem));
        free(pem);
        po_pubkey_free(k);
    }
    return po_account_build_api(in, "alipay", false, cfg, err, errcap);
}

/* Certificate mode's stored part: the SNs into ali, Alipay's certificates
 * into a->keys (serial: the SN, not_after: the end of validity). */
static po_err load_certs(json_t *root, struct po_channel_account *a, struct po_alipay_account *ali,
                         char *err, size_t errcap)
{
    json_t *certs = json_object_get(root, "alipay_certs"), *c;
    size_t i;
    if (!po_set_field(ali->app_cert_sn, sizeof ali->app_cert_sn,
                      po_json_str(root, "app_cert_sn")) ||
        !po_set_field(ali->root_cert_sn, sizeof ali->root_cert_sn,
                      po_json_str(root, "alipay_root_cert_sn")) ||
        !json_array_size(certs) || json_array_size(certs) > PO_CHANNEL_KEYS_MAX) {
        po_errf(err, errcap, "certificate mode: the SNs or Alipay's certificates are missing");
        return PO_ERR_INVALID;
    }
    json_array_foreach(certs, i, c)
    {
        const char *pem = po_json_str(c, "pem");
        char ignored[PO_SERIAL_MAX + 1];
        int64_t nb = 0;
        po_err rc =
            pem && po_set_field(a->keys[i].serial, sizeof a->keys[i].serial, po_json_str(c, "sn"))
                ? po_pubkey_from_pem(pem, strlen(pem), &a->keys[i].key, ignored, sizeof ignored,
                                     err, errcap)
                : PO_ERR_INVALID;
        if (!rc && po_cert_validity(pem, strlen(pem), &nb, &a->keys[i].not_after))
            rc = PO_ERR_INVALID;
        if (rc) {
            po_errf(err, errcap, "Alipay certificate %zu is damaged", i + 1);
            return rc;
        }
        a->nkeys = (int)i + 1;
    }
    return PO_OK;
}

static po_err account_load(json_t *root, const unsigned char *master, struct po_channel_account *a,
                           char *err, size_t errcap)
{
    struct po_alipay_account *ali = po_account_priv_new(a, sizeof *ali);
    if (!ali)
        return PO_ERR_NOMEM;
    const char *pem = po_json_str(root, "public_key_pem");
    bool cert = json_object_get(root, "alipay_certs") != NULL;
    char ignored[PO_SERIAL_MAX + 1];
    if (!po_set_field(ali->app_id, sizeof ali->app_id, po_json_str(root, "app_id")) ||
        (!pem && !cert)) {
        po_errf(err, errcap, "app_id or Alipay public key missing");
        return PO_ERR_INVALID;
    }
    (void)po_set_field(ali->seller_id, sizeof ali->seller_id, po_json_str(root, "seller_id"));
    po_err rc = cert ? load_certs(root, a, ali, err, errcap)
                     : po_pubkey_from_pem(pem, strlen(pem), &a->keys[0].key, ignored,
                                          sizeof ignored, err, errcap);
    if (!rc && !cert)
        a->nkeys = 1;
    return rc ? rc
              : po_account_load_api(root, master, a, "https://openapi.alipay.com/gateway.do", false,
                                    err, errcap);
}

/* Alipay reads the body: "success" stops the resends, anything else
 * (here "fail") is a failure. */
static void ack(bool success, unsigned fail_status, const char *msg, struct po_ack *out)
{
    (void)msg;
    out->status = success ? 200 : fail_status;
    out->content_type = "text/plain";
    (void)snprintf(out->body, sizeof out->body, "%s", success ? "success" : "fail");
}

static const struct po_channel_option options[] = {
    {"app-id", "the app id (APPID), required"},
    {"seller-id", "the seller id (PID) the notifications must name"},
    {"alipay-public-key-file", "Alipay's public key, PEM or bare base64 (public-key mode)"},
    {"app-cert-file", "certificate mode: the app's public-key certificate (appCertPublicKey.crt)"},
    {"alipay-root-cert-file", "certificate mode: Alipay's root certificates (alipayRootCert.crt)"},
    {"alipay-cert-file",
     "certificate mode: Alipay's public-key certificate (alipayCertPublicKey_RSA2.crt;"
     " repeatable, for a rotation)"},
    {"timestamp-window", "unused by Alipay (its notifications carry no timestamp)"},
    PO_API_OPTIONS,
    {NULL, NULL},
};

static void account_free(void *priv)
{
    po_account_priv_free(priv, sizeof(struct po_alipay_account));
}

/* The bill's rows carry the account's PID: the seller id. */
static const char *bill_merchant(const struct po_channel_account *a)
{
    return po_alipay_of(a)->seller_id;
}

static const char *const alipay_pay_methods[] = {"precreate", "page", "wap", NULL};

/* Alipay's field rules for what an order sends (alipay.trade.precreate /
 * page.pay / wap.pay): out_trade_no at most 64 characters (payonce's own
 * bound), subject at most 256 characters, total_amount 0.01 to
 * 100000000.00 yuan. */
static const char *order_rule(const struct po_pay_request *r, const char **param)
{
    size_t chars = 0;
    for (const char *c = r->description ? r->description : ""; *c; c++)
        chars += ((unsigned char)*c & 0xc0) != 0x80; /* UTF-8 characters, not bytes */
    if (chars > 256) {
        *param = "description";
        return "description: at most 256 characters (Alipay's subject)";
    }
    if (r->amount > INT64_C(10000000000)) {
        *param = "amount";
        return "amount: at most 100000000.00 yuan (Alipay's total_amount)";
    }
    return NULL;
}

const struct po_channel_ops po_channel_alipay = {
    .name = "alipay",
    .title = "Alipay (RSA2)",
    .options = options,
    .account_build = account_build,
    .account_load = account_load,
    .account_free = account_free,
    .parse = parse,
    .ack = ack,
    .refund_submit = po_alipay_refund_submit,
    .order_query = po_alipay_order_query,
    .pay_methods = alipay_pay_methods,
    .pay_create = po_alipay_pay_create,
    .pay_notify_url = true,
    .order_rule = order_rule,
    .account_clash = account_clash,
    .order_close = po_alipay_order_close,
    .refund_query = po_alipay_refund_query,
    .bill_parse = po_alipay_bill_parse,
    .bill_merchant = bill_merchant,
    .bill_fetch = po_alipay_bill_fetch,
    .bill_tz_s = 8 * 3600,       /* Beijing */
    .bill_publish_s = 10 * 3600, /* a day's bill from about 09:00 the next day */
};
