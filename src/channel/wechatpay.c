/*
 * wechatpay.c — WeChat Pay API v3 callbacks.
 *
 * Order of checks (each failure is a REJECT with its reason):
 *   headers present and bounded      missing_header
 *   probe signature                  probe          (WECHATPAY/SIGNTEST/…)
 *   signature type                   unsupported_signature_type
 *   timestamp within the window      bad_timestamp, stale_timestamp, future_timestamp
 *   key chosen by Wechatpay-Serial   unknown_serial (certificate serial or PUB_KEY_ID_…)
 *   SHA256withRSA over "ts\nnonce\nbody\n", raw body bytes   bad_signature
 *   body JSON, resource              malformed_body
 *   AEAD_AES_256_GCM with the APIv3 key   unsupported_algorithm, decrypt_failed
 *   resource JSON and its fields     malformed_resource
 * then mchid/appid against the tenant's account (MISMATCH) and the event.
 * Direct merchants carry mchid/appid; service providers sp_mchid/sp_appid
 * plus sub_mchid, which must be the tenant's configured --sub-mchid.
 */
#include "channel_int.h"

#include <stdatomic.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *hdr(const struct po_notify_req *req, const char *name)
{
    const char *v = req->header(req->hctx, name);
    return v && *v && strlen(v) <= PO_HEADER_VALUE_MAX ? v : NULL;
}

static int key_for(const struct po_channel_account *a, const char *serial)
{
    for (int i = 0; i < a->nkeys; i++)
        /* Certificate serials are hex: compare case-insensitively. */
        if (strcasecmp(a->keys[i].serial, serial) == 0)
            return i;
    return -1;
}

/* An expired platform certificate fails every callback signed with it:
 * said loudly (at most once a minute), not only as each refusal's reason. */
static void expired_loudly(const struct po_channel_account *a, int k)
{
    static _Atomic int64_t last;
    int64_t now = (int64_t)time(NULL), prev = last;
    if (now - prev < 60 || !atomic_compare_exchange_strong(&last, &prev, now))
        return;
    char at[PO_TIME_SIZE];
    po_clock_iso_at(a->keys[k].not_after, at, sizeof at);
    po_log(PO_LOG_ERROR,
           "tenant %s: WeChat Pay platform certificate %s expired at %s: every callback signed"
           " with it is refused (certificate_expired). Configure its successor: payonce channel"
           " set --platform-cert-file NEW.pem (or the platform public key)",
           a->tenant, a->keys[k].serial, at);
}

po_err po_wechatpay_verify(const struct po_channel_account *a, const struct po_notify_req *req,
                           struct po_notify_result *out, bool *ok)
{
    *ok = false;
    const char *serial = hdr(req, "Wechatpay-Serial"), *sig = hdr(req, "Wechatpay-Signature"),
               *ts = hdr(req, "Wechatpay-Timestamp"), *nonce = hdr(req, "Wechatpay-Nonce"),
               *type = req->header(req->hctx, "Wechatpay-Signature-Type");
    if (!serial || !sig || !ts || !nonce) {
        po_notify_reject(out, PO_R_MISSING_HEADER,
                         "Wechatpay-Serial, -Signature, -Timestamp and -Nonce are required");
        return PO_OK;
    }
    if (strncmp(sig, "WECHATPAY/SIGNTEST/", 19) == 0) {
        po_notify_reject(out, PO_R_PROBE, "WeChat Pay probe traffic (signature test)");
        return PO_OK;
    }
    if (type && *type && strcmp(type, "WECHATPAY2-SHA256-RSA2048") != 0) {
        po_notify_reject(out, PO_R_UNSUPPORTED_SIGNATURE_TYPE, "signature type not supported");
        return PO_OK;
    }
    if (!po_notify_window_ok(a, ts, req->now_unix, out))
        return PO_OK;
    int k = key_for(a, serial);
    if (k < 0) {
        po_notify_reject(out, PO_R_UNKNOWN_SERIAL, "no verification key with serial %.64s", serial);
        return PO_OK;
    }
    if (a->keys[k].not_after && req->now_unix > a->keys[k].not_after) {
        expired_loudly(a, k);
        po_notify_reject(out, PO_R_CERTIFICATE_EXPIRED,
                         "platform certificate %.64s expired %lld s ago", serial,
                         (long long)(req->now_unix - a->keys[k].not_after));
        return PO_OK;
    }
    const struct po_pubkey *key = a->keys[k].key;
    unsigned char *raw = NULL;
    size_t raw_len = 0;
    po_err brc = po_b64_decode(sig, strlen(sig), &raw, &raw_len);
    if (brc == PO_ERR_NOMEM)
        return brc;
    if (brc) {
        po_notify_reject(out, PO_R_BAD_SIGNATURE, "signature is not base64");
        return PO_OK;
    }
    size_t mlen = strlen(ts) + strlen(nonce) + req->body_len + 3;
    char *msg = malloc(mlen + 1);
    if (!msg) {
        free(raw);
        return PO_ERR_NOMEM;
    }
    size_t j = (size_t)snprintf(msg, mlen + 1, "%s\n%s\n", ts, nonce);
    memcpy(msg + j, req->body, req->body_len);
    msg[j + req->body_len] = '\n';
    po_err rc = po_rsa_sha256_verify(key, msg, mlen, raw, raw_len);
    free(msg);
    free(raw);
    if (rc && rc != PO_ERR_INVALID) /* not checked: retry */
        return rc;
    if (rc) {
        po_notify_reject(out, PO_R_BAD_SIGNATURE, "signature does not verify with key %.64s",
                         serial);
        return PO_OK;
    }
    *ok = true;
    return PO_OK;
}

/* Decrypts body.resource into *out_plain (JSON), or rejects. */
static po_err decrypt_resource(const struct po_channel_account *a, json_t *body,
                               struct po_notify_result *out, json_t **out_plain)
{
    json_t *res = json_object_get(body, "resource");
    const char *alg = po_json_str(res, "algorithm"), *ct = po_json_str(res, "ciphertext"),
               *nonce = po_json_str(res, "nonce"), *aad = po_json_str(res, "associated_data");
    if (!alg || !ct || !nonce) {
        po_notify_reject(out, PO_R_MALFORMED_BODY, "resource.algorithm/ciphertext/nonce missing");
        return PO_OK;
    }
    if (strcmp(alg, "AEAD_AES_256_GCM") != 0) {
        po_notify_reject(out, PO_R_UNSUPPORTED_ALGORITHM, "resource algorithm not supported");
        return PO_OK;
    }
    unsigned char *raw = NULL, *plain = NULL;
    size_t raw_len = 0, plain_len = 0;
    po_err rc = po_b64_decode(ct, strlen(ct), &raw, &raw_len);
    if (rc == PO_ERR_NOMEM)
        return rc;
    if (rc) {
        po_notify_reject(out, PO_R_MALFORMED_BODY, "resource.ciphertext is not base64");
        return PO_OK;
    }
    const struct po_wechatpay_account *wx = po_wechatpay_of(a);
    rc = po_aes_gcm_decrypt(wx->apiv3_key, wx->apiv3_key_len, (const unsigned char *)nonce,
                            strlen(nonce), (const unsigned char *)(aad ? aad : ""),
                            aad ? strlen(aad) : 0, raw, raw_len, &plain, &plain_len);
    free(raw);
    if (rc && rc != PO_ERR_INVALID) /* not checked: retry */
        return rc;
    if (rc) {
        po_notify_reject(out, PO_R_DECRYPT_FAILED,
                         "resource does not decrypt with the tenant's APIv3 key");
        return PO_OK;
    }
    rc = po_notify_json((const char *)plain, plain_len, out, PO_R_MALFORMED_RESOURCE,
                        "the decrypted resource", out_plain);
    free(plain);
    return rc;
}

/* mchid/appid of the resource against the account; false = MISMATCH set.
 * A service provider's callback (sp_mchid) names the provider and the
 * sub-merchant: both must be the tenant's, or tenants sharing a provider's
 * credentials would credit each other's orders. A tenant configured as a
 * sub-merchant takes only such callbacks. */
static bool account_matches(const struct po_channel_account *acct, json_t *r,
                            struct po_notify_result *out)
{
    const struct po_wechatpay_account *a = po_wechatpay_of(acct);
    const char *sp = po_json_str(r, "sp_mchid");
    const char *mchid = sp ? sp : po_json_str(r, "mchid");
    const char *appid = po_json_str(r, sp ? "sp_appid" : "appid");
    const char *sub = po_json_str(r, "sub_mchid"), *sub_appid = po_json_str(r, "sub_appid");
    enum po_reason reason = PO_R_NONE;
    if (!mchid || strcmp(mchid, a->mchid) != 0)
        reason = PO_R_MCHID_MISMATCH;
    else if (a->appid[0] && appid && strcmp(appid, a->appid) != 0)
        reason = PO_R_APPID_MISMATCH;
    else if (sp ? !a->sub_mchid[0] || !sub || strcmp(sub, a->sub_mchid) != 0 : a->sub_mchid[0])
        reason = PO_R_SUB_MCHID_MISMATCH;
    else if (sp && a->sub_appid[0] && sub_appid && strcmp(sub_appid, a->sub_appid) != 0)
        reason = PO_R_APPID_MISMATCH;
    if (reason == PO_R_NONE)
        return true;
    po_notify_mismatch(out, reason,
                       "callback for mchid %.32s sub_mchid %.32s appid %.32s, tenant has %.32s"
                       " %.32s %.32s",
                       mchid ? mchid : "-", sp && sub ? sub : "-", appid ? appid : "-", a->mchid,
                       a->sub_mchid[0] ? a->sub_mchid : "-", a->appid[0] ? a->appid : "-");
    return false;
}

static bool amount_field(json_t *r, const char *obj, const char *name, int64_t *out)
{
    json_t *v = json_object_get(json_object_get(r, obj), name);
    if (!json_is_integer(v))
        return false;
    *out = json_integer_value(v);
    return true;
}

static void event_from_transaction(json_t *r, struct po_notify_result *out)
{
    struct po_event *ev = &out->ev;
    const char *state = po_json_str(r, "trade_state");
    const char *cur = po_json_str(json_object_get(r, "amount"), "currency");
    ev->type = PO_EV_PAY_SUCCESS;
    if (!state || strcmp(state, "SUCCESS") != 0) {
        po_notify_ignore(out, "trade_state %.16s: nothing to apply", state ? state : "-");
        return;
    }
    if (!po_set_field(ev->channel_txn_id, sizeof ev->channel_txn_id,
                      po_json_str(r, "transaction_id")) ||
        !po_set_field(ev->out_trade_no, sizeof ev->out_trade_no, po_json_str(r, "out_trade_no")) ||
        !amount_field(r, "amount", "total", &ev->amount_minor) ||
        !po_set_field(ev->currency, sizeof ev->currency, cur ? cur : "CNY"))
        po_notify_reject(out, PO_R_MALFORMED_RESOURCE,
                         "transaction_id, out_trade_no or amount.total missing");
    (void)po_set_field(ev->occurred_at, sizeof ev->occurred_at, po_json_str(r, "success_time"));
}

static void event_from_refund(json_t *r, struct po_notify_result *out)
{
    struct po_event *ev = &out->ev;
    const char *st = po_json_str(r, "refund_status");
    if (!st) {
        po_notify_reject(out, PO_R_MALFORMED_RESOURCE, "refund_status missing");
        return;
    }
    if (strcmp(st, "SUCCESS") == 0)
        ev->type = PO_EV_REFUND_SUCCESS;
    else if (strcmp(st, "CLOSED") == 0)
        ev->type = PO_EV_REFUND_CLOSED;
    else if (strcmp(st, "ABNORMAL") == 0)
        ev->type = PO_EV_REFUND_ABNORMAL;
    else {
        po_notify_ignore(out, "refund_status %.16s: nothing to apply", st);
        return;
    }
    if (!po_set_field(ev->channel_refund_id, sizeof ev->channel_refund_id,
                      po_json_str(r, "refund_id")) ||
        !po_set_field(ev->out_refund_no, sizeof ev->out_refund_no,
                      po_json_str(r, "out_refund_no")) ||
        !po_set_field(ev->out_trade_no, sizeof ev->out_trade_no, po_json_str(r, "out_trade_no")) ||
        !amount_field(r, "amount", "refund", &ev->amount_minor))
        po_notify_reject(out, PO_R_MALFORMED_RESOURCE,
                         "refund_id, out_refund_no, out_trade_no or amount.refund missing");
    (void)po_set_field(ev->channel_txn_id, sizeof ev->channel_txn_id,
                       po_json_str(r, "transaction_id"));
    (void)po_set_field(ev->currency, sizeof ev->currency, "CNY"); /* refunds are CNY */
    (void)po_set_field(ev->occurred_at, sizeof ev->occurred_at, po_json_str(r, "success_time"));
}

static void event_from_profitsharing(json_t *r, struct po_notify_result *out)
{
    struct po_event *ev = &out->ev;
    json_t *recv = json_object_get(r, "receiver");
    const char *result = po_json_str(recv, "result");
    ev->type = PO_EV_PROFIT_SHARE_RESULT;
    if (result && strcmp(result, "SUCCESS") != 0) {
        po_notify_ignore(out, "receiver result %.16s: nothing moved", result);
        return;
    }
    json_t *amt = json_object_get(recv, "amount");
    if (!po_set_field(ev->channel_txn_id, sizeof ev->channel_txn_id, po_json_str(r, "order_id")) ||
        !po_set_field(ev->receiver, sizeof ev->receiver, po_json_str(recv, "account")) ||
        !po_set_field(out->pay_txn_id, sizeof out->pay_txn_id, po_json_str(r, "transaction_id")) ||
        !json_is_integer(amt)) {
        po_notify_reject(out, PO_R_MALFORMED_RESOURCE,
                         "order_id, transaction_id, receiver.account or receiver.amount missing");
        return;
    }
    ev->amount_minor = json_integer_value(amt);
    (void)po_set_field(ev->currency, sizeof ev->currency, "CNY");
    (void)po_set_field(ev->occurred_at, sizeof ev->occurred_at, po_json_str(r, "success_time"));
}

static po_err parse(const struct po_channel_account *a, const struct po_notify_req *req,
                    struct po_notify_result *out)
{
    bool ok = false;
    json_t *body = NULL, *plain = NULL;
    po_err rc = po_wechatpay_verify(a, req, out, &ok);
    if (rc || !ok)
        return rc;
    rc = po_notify_json(req->body, req->body_len, out, PO_R_MALFORMED_BODY, "the body", &body);
    const char *etype = po_json_str(body, "event_type");
    if (rc || !body)
        goto out;
    if (!etype) {
        po_notify_reject(out, PO_R_MALFORMED_BODY, "body is not a callback JSON object");
        goto out;
    }
    rc = decrypt_resource(a, body, out, &plain);
    if (rc || !plain)
        goto out;
    po_notify_event_init(a, out);
    bool is_pay = strcmp(etype, "TRANSACTION.SUCCESS") == 0;
    bool is_refund = strncmp(etype, "REFUND.", 7) == 0;
    bool is_share = strncmp(etype, "PROFITSHARING", 13) == 0;
    if (!is_pay && !is_refund && !is_share) {
        po_notify_ignore(out, "event_type %.40s: nothing to apply", etype);
        goto out;
    }
    if (is_pay)
        event_from_transaction(plain, out);
    else if (is_refund)
        event_from_refund(plain, out);
    else
        event_from_profitsharing(plain, out);
#ifdef PO_MUTANT_DOUBLE_CREDIT
    /* Mutation testing only: tests/CMakeLists.txt builds payonce_mutant
     * with it, never the shipped binary. The payment keyed by the delivery's
     * signature nonce as well as its transaction id, so every delivery is a
     * new payment (with engine.c's guard off): the history checker must
     * catch it. */
    if (is_pay && out->status == PO_NOTIFY_EVENT) {
        const char *n = hdr(req, "Wechatpay-Nonce");
        size_t l = strlen(out->ev.channel_txn_id);
        for (size_t i = 0; n && n[i] && i < 8 && l + 2 < sizeof out->ev.channel_txn_id; i++)
            if ((n[i] >= '0' && n[i] <= '9') || (n[i] >= 'A' && n[i] <= 'Z') ||
                (n[i] >= 'a' && n[i] <= 'z'))
                out->ev.channel_txn_id[l++] = n[i], out->ev.channel_txn_id[l] = '\0';
    }
#endif
    if (out->status != PO_NOTIFY_EVENT)
        goto out;
    if (!account_matches(a, plain, out))
        goto out;
    /* Profit sharing names no order; the caller fills out_trade_no. */
    if (is_share && !out->ev.out_trade_no[0])
        goto out;
    char verr[PO_ERRBUF_SIZE];
    if (po_event_validate(&out->ev, verr, sizeof verr))
        po_notify_reject(out, PO_R_MALFORMED_RESOURCE, "%s", verr);
out:
    json_decref(plain);
    json_decref(body);
    return rc;
}

/* ---- the account ---- */

/* Adds one verification key {serial, public_key_pem} to keys: a platform
 * certificate (its serial read from it) or a platform public key with the
 * PUB_KEY_ID_… WeChat Pay gave it. */
static po_err add_key(const struct po_account_input *in, json_t *keys, const char *path,
                      const char *pub_key_id, char *err, size_t errcap)
{
    size_t len = 0;
    char *pem = po_account_read_file(path, false, &len, err, errcap);
    if (!pem)
        return PO_ERR_IO;
    struct po_pubkey *k = NULL;
    char serial[PO_SERIAL_MAX + 1] = "", kerr[PO_ERRBUF_SIZE] = "", *out = NULL;
    po_err rc = PO_ERR_IO; /* a file that is not what it should be */
    if (po_pubkey_from_pem(pem, len, &k, serial, sizeof serial, kerr, sizeof kerr)) {
        po_errf(err, errcap, "%s: %s", path, kerr);
        goto out;
    }
    if (pub_key_id) {
        if (strncmp(pub_key_id, "PUB_KEY_ID_", 11) != 0 ||
            !po_id_valid(pub_key_id, PO_SERIAL_MAX)) {
            po_errf(err, errcap, "--public-key-id must look like PUB_KEY_ID_...");
            goto out;
        }
        PO_ASSERT(po_strcpy(serial, sizeof serial, pub_key_id) == PO_OK);
    } else if (!serial[0]) {
        po_errf(err, errcap,
                "%s is a bare public key: use --platform-public-key-file with --public-key-id",
                path);
        goto out;
    }
    int64_t nb = 0, na = 0, now = (int64_t)time(NULL);
    if (!pub_key_id && po_cert_validity(pem, len, &nb, &na) == PO_OK) {
        char when[PO_TIME_SIZE];
        po_clock_iso_at(na < now ? na : nb, when, sizeof when);
        if (na < now || nb > now) {
            po_errf(err, errcap, "%s: the certificate %s %s", path,
                    na < now ? "expired at" : "is not valid before", when);
            goto out;
        }
    }
    rc = po_pubkey_to_pem(k, &out);
    if (rc)
        goto out;
    json_t *entry = json_pack("{s:s, s:s}", "serial", serial, "public_key_pem", out);
    if (na)
        json_object_set_new(entry, "not_after", json_integer(na));
    json_array_append_new(keys, entry);
    if (in->note) {
        char line[PO_SERIAL_MAX + 300], until[PO_TIME_SIZE] = "";
        if (na)
            po_clock_iso_at(na, until, sizeof until);
        (void)snprintf(line, sizeof line, "verification key %s from %s%s%s%s", serial, path,
                       na ? " (valid until " : "", until, na ? ")" : "");
        in->note(in->ctx, line);
    }
out:
    free(out);
    po_pubkey_free(k);
    free(pem);
    return rc;
}

static po_err build_keys(const struct po_account_input *in, json_t *keys, char *err, size_t errcap)
{
    const char *certs[PO_CHANNEL_KEYS_MAX + 1], *pubs[PO_CHANNEL_KEYS_MAX + 1],
        *ids[PO_CHANNEL_KEYS_MAX + 1];
    int nc = in->opt_all(in->ctx, "platform-cert-file", certs, PO_CHANNEL_KEYS_MAX + 1);
    int np = in->opt_all(in->ctx, "platform-public-key-file", pubs, PO_CHANNEL_KEYS_MAX + 1);
    int ni = in->opt_all(in->ctx, "public-key-id", ids, PO_CHANNEL_KEYS_MAX + 1);
    po_err rc = PO_OK;
    if (np != ni)
        po_errf(err, errcap, "each --platform-public-key-file needs its --public-key-id");
    else if (nc + np == 0)
        po_errf(err, errcap, "give --platform-cert-file or --platform-public-key-file");
    else if (nc + np > PO_CHANNEL_KEYS_MAX)
        po_errf(err, errcap, "at most %d verification keys", PO_CHANNEL_KEYS_MAX);
    if (np != ni || nc + np == 0 || nc + np > PO_CHANNEL_KEYS_MAX)
        return PO_ERR_INVALID;
    for (int i = 0; i < nc && !rc; i++)
        rc = add_key(in, keys, certs[i], NULL, err, errcap);
    for (int i = 0; i < np && !rc; i++)
        rc = add_key(in, keys, pubs[i], ids[i], err, errcap);
    return rc;
}

/* WeChat Pay's notify_url (通知地址, the prepay and refund models): an
 * https URL reachable from outside, without a query string, at most 255
 * characters (the prepay's bound; the refund's is 256). http:// is taken
 * for a loopback host only (127.0.0.0/8, localhost, [::1]): the simulator
 * and the tests listen there; WeChat Pay itself would never reach it.
 * NULL when u keeps the rule, else the rule, for people. */
static const char *notify_url_rule(const char *u)
{
    static const char rule[] =
        "must be an https:// URL of at most 255 characters without a query"
        " string (WeChat Pay's notify_url; http:// only for a loopback host)";
    const char *host = strncmp(u, "https://", 8) == 0  ? u + 8
                       : strncmp(u, "http://", 7) == 0 ? u + 7
                                                       : NULL;
    if (!host || strlen(u) > 255 || strcspn(host, ":/") == 0 || strpbrk(u, "?# \t\r\n\"\\"))
        return rule;
    if (host == u + 8)
        return NULL;
    size_t n = host[0] == '[' ? strcspn(host, "]") + 1 : strcspn(host, ":/");
    bool loopback = (n == 9 && strncmp(host, "localhost", 9) == 0) ||
                    (n == 5 && strncmp(host, "[::1]", 5) == 0 && strchr(":/", host[5])) ||
                    (strncmp(host, "127.", 4) == 0 && strspn(host, "0123456789.") == n);
    return loopback ? NULL : rule;
}

static po_err account_build(const struct po_account_input *in, json_t *cfg, char *err,
                            size_t errcap)
{
    const char *nurl = in->opt(in->ctx, "notify-url"), *why = nurl ? notify_url_rule(nurl) : NULL;
    if (why) {
        po_errf(err, errcap, "--notify-url %s", why);
        return PO_ERR_INVALID;
    }
    const char *mchid = in->opt(in->ctx, "mchid"), *appid = in->opt(in->ctx, "appid");
    const char *sub = in->opt(in->ctx, "sub-mchid"), *sub_appid = in->opt(in->ctx, "sub-appid");
    const char *keyfile = in->opt(in->ctx, "apiv3-key-file");
    if (!mchid || !keyfile) {
        po_errf(err, errcap, "--mchid and --apiv3-key-file are required");
        return PO_ERR_INVALID;
    }
    if (!po_id_valid(mchid, PO_ID_MAX) || (appid && !po_id_valid(appid, PO_ID_MAX)) ||
        (sub && !po_id_valid(sub, PO_ID_MAX)) ||
        (sub_appid && !po_id_valid(sub_appid, PO_ID_MAX))) {
        po_errf(err, errcap,
                "--mchid/--appid/--sub-mchid/--sub-appid: 1-64 characters of [A-Za-z0-9_-]");
        return PO_ERR_INVALID;
    }
    if (sub_appid && !sub) {
        po_errf(err, errcap, "--sub-appid needs --sub-mchid");
        return PO_ERR_INVALID;
    }
    size_t klen = 0;
    char *key = po_account_read_file(keyfile, true, &klen, err, errcap);
    if (!key)
        return PO_ERR_IO;
    json_t *sk = NULL, *keys = json_array();
    po_err rc = PO_OK;
    if (klen != 32) {
        po_errf(err, errcap, "the APIv3 key must be 32 bytes (found %zu)", klen);
        rc = PO_ERR_IO;
    } else if (!(sk = po_account_seal(in, "wechatpay", "apiv3_key", key, klen))) {
        po_errf(err, errcap, "cannot seal the APIv3 key");
        rc = PO_ERR_INTERNAL;
    }
    po_secure_zero(key, klen);
    free(key);
    if (!rc)
        rc = build_keys(in, keys, err, errcap);
    if (!rc)
        rc = po_account_build_api(in, "wechatpay", true, cfg, err, errcap);
    if (rc) {
        json_decref(sk);
        json_decref(keys);
        return rc;
    }
    json_object_set_new(cfg, "mchid", json_string(mchid));
    if (appid)
        json_object_set_new(cfg, "appid", json_string(appid));
    if (sub)
        json_object_set_new(cfg, "sub_mchid", json_string(sub));
    if (sub_appid)
        json_object_set_new(cfg, "sub_appid", json_string(sub_appid));
    json_object_set_new(cfg, "apiv3_key", sk);
    json_object_set_new(cfg, "keys", keys);
    return PO_OK;
}

static po_err account_load(json_t *root, const unsigned char *master, struct po_channel_account *a,
                           char *err, size_t errcap)
{
    struct po_wechatpay_account *wx = po_account_priv_new(a, sizeof *wx);
    if (!wx)
        return PO_ERR_NOMEM;
    if (!po_set_field(wx->mchid, sizeof wx->mchid, po_json_str(root, "mchid"))) {
        po_errf(err, errcap, "mchid missing");
        return PO_ERR_INVALID;
    }
    (void)po_set_field(wx->appid, sizeof wx->appid, po_json_str(root, "appid"));
    (void)po_set_field(wx->sub_mchid, sizeof wx->sub_mchid, po_json_str(root, "sub_mchid"));
    (void)po_set_field(wx->sub_appid, sizeof wx->sub_appid, po_json_str(root, "sub_appid"));
    po_err rc =
        po_account_unseal(a, "apiv3_key", po_json_str(root, "apiv3_key"), master, wx->apiv3_key,
                          sizeof wx->apiv3_key, &wx->apiv3_key_len, err, errcap);
    if (rc)
        return rc;
    json_t *keys = json_object_get(root, "keys");
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k)
    {
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
        json_t *na = json_object_get(k, "not_after");
        a->keys[a->nkeys].not_after = json_is_integer(na) ? json_integer_value(na) : 0;
        if (a->keys[a->nkeys].not_after && a->keys[a->nkeys].not_after < (int64_t)time(NULL))
            expired_loudly(a, a->nkeys);
        a->nkeys++;
    }
    if (a->nkeys == 0) {
        po_errf(err, errcap, "no verification key (platform certificate or public key)");
        return PO_ERR_INVALID;
    }
    return po_account_load_api(root, master, a, "https://api.mch.weixin.qq.com", true, err, errcap);
}

/* WeChat Pay v3: 200/204 with no body needed; failure 4xx/5xx with
 * {"code":"FAIL","message":"..."}. */
static void ack(bool success, unsigned fail_status, const char *msg, struct po_ack *out)
{
    out->status = success ? 204 : fail_status;
    out->content_type = "application/json";
    if (!success)
        (void)snprintf(out->body, sizeof out->body, "{\"code\":\"FAIL\",\"message\":\"%s\"}", msg);
}

static const struct po_channel_option options[] = {
    {"mchid", "the merchant id (商户号), required"},
    {"appid", "the app id the callbacks must name"},
    {"sub-mchid", "service-provider mode: this tenant's sub-merchant id (callbacks must name it)"},
    {"sub-appid", "service-provider mode: the sub-merchant's app id, when callbacks carry one"},
    {"apiv3-key-file", "the 32-byte APIv3 key (sealed), required"},
    {"platform-cert-file", "a platform certificate PEM (repeatable; serial read from it)"},
    {"platform-public-key-file", "a platform public key PEM (repeatable, with --public-key-id)"},
    {"public-key-id", "PUB_KEY_ID_… of the platform public key"},
    {"merchant-serial", "serial of the merchant API certificate (with the private key)"},
    {"timestamp-window", "seconds a callback's timestamp may be off (default 300)"},
    PO_API_OPTIONS,
    {NULL, NULL},
};

/* Bills name the merchant by its mchid (the service provider's, in
 * service-provider mode; the sub-merchant is its own column). */
static const char *bill_merchant(const struct po_channel_account *a)
{
    return po_wechatpay_of(a)->mchid;
}

static void account_free(void *priv)
{
    po_account_priv_free(priv, sizeof(struct po_wechatpay_account));
}

static const char *const wechatpay_pay_methods[] = {"native", "jsapi", "h5", NULL};

/* WeChat Pay API v3's field rules for what an order sends (the prepay
 * APIs' request model): out_trade_no string[6,32] of letters, digits and
 * _-|*; description string[1,127] in bytes (payonce sends the order number
 * when none is given). The query and close take the same out_trade_no. */
static const char *order_rule(const struct po_pay_request *r, const char **param)
{
    size_t n = strlen(r->out_trade_no);
    bool ok = n >= 6 && n <= 32;
    for (const char *c = r->out_trade_no; ok && *c; c++)
        ok = isalnum((unsigned char)*c) || strchr("_-|*", *c);
    if (!ok) {
        *param = "out_trade_no";
        return "out_trade_no: 6-32 characters of [A-Za-z0-9_-|*] (WeChat Pay)";
    }
    if (r->description && strlen(r->description) > 127) {
        *param = "description";
        return "description: at most 127 bytes (WeChat Pay)";
    }
    return NULL;
}

const struct po_channel_ops po_channel_wechatpay = {
    .name = "wechatpay",
    .title = "WeChat Pay API v3",
    .options = options,
    .account_build = account_build,
    .account_load = account_load,
    .parse = parse,
    .ack = ack,
    .refund_submit = po_wechatpay_refund_submit,
    .order_query = po_wechatpay_order_query,
    .pay_methods = wechatpay_pay_methods,
    .pay_create = po_wechatpay_pay_create,
    .pay_notify_url = true,
    .order_rule = order_rule,
    .order_close = po_wechatpay_order_close,
    .bill_fetch = po_wechatpay_bill_fetch,
    .keys_fetch = po_wechatpay_keys_fetch,
    .bill_tz_s = 8 * 3600,       /* Beijing */
    .bill_publish_s = 10 * 3600, /* a day's bill from 10:00 the next day */
    .refund_query = po_wechatpay_refund_query,
    .bill_parse = po_wechatpay_bill_parse,
    .bill_merchant = bill_merchant,
    .account_free = account_free,
};
