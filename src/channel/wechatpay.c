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
 * Direct merchants carry mchid/appid; service providers sp_mchid/sp_appid.
 */
#include "channel_int.h"

#include <stdlib.h>
#include <string.h>

static const char *hdr(const struct po_notify_req *req, const char *name)
{
    const char *v = req->header(req->hctx, name);
    return v && *v && strlen(v) <= PO_HEADER_VALUE_MAX ? v : NULL;
}

static const struct po_pubkey *key_for(const struct po_channel_account *a, const char *serial)
{
    for (int i = 0; i < a->nkeys; i++)
        /* Certificate serials are hex: compare case-insensitively. */
        if (strcasecmp(a->keys[i].serial, serial) == 0)
            return a->keys[i].key;
    return NULL;
}

po_err po_wechatpay_verify(const struct po_channel_account *a, const struct po_notify_req *req,
                           struct po_notify_result *out, bool *ok)
{
    *ok = false;
    const char *serial = hdr(req, "Wechatpay-Serial"), *sig = hdr(req, "Wechatpay-Signature"),
               *ts = hdr(req, "Wechatpay-Timestamp"), *nonce = hdr(req, "Wechatpay-Nonce"),
               *type = req->header(req->hctx, "Wechatpay-Signature-Type");
    if (!serial || !sig || !ts || !nonce) {
        po_notify_reject(out, "missing_header",
                         "Wechatpay-Serial, -Signature, -Timestamp and -Nonce are required");
        return PO_OK;
    }
    if (strncmp(sig, "WECHATPAY/SIGNTEST/", 19) == 0) {
        po_notify_reject(out, "probe", "WeChat Pay probe traffic (signature test)");
        return PO_OK;
    }
    if (type && *type && strcmp(type, "WECHATPAY2-SHA256-RSA2048") != 0) {
        po_notify_reject(out, "unsupported_signature_type", "signature type not supported");
        return PO_OK;
    }
    if (!po_notify_window_ok(a, ts, req->now_unix, out))
        return PO_OK;
    const struct po_pubkey *key = key_for(a, serial);
    if (!key) {
        po_notify_reject(out, "unknown_serial", "no verification key with serial %.64s", serial);
        return PO_OK;
    }
    unsigned char *raw = NULL;
    size_t raw_len = 0;
    if (po_b64_decode(sig, strlen(sig), &raw, &raw_len)) {
        po_notify_reject(out, "bad_signature", "signature is not base64");
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
    if (rc == PO_ERR_NOMEM)
        return rc;
    if (rc) {
        po_notify_reject(out, "bad_signature", "signature does not verify with key %.64s",
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
        po_notify_reject(out, "malformed_body", "resource.algorithm/ciphertext/nonce missing");
        return PO_OK;
    }
    if (strcmp(alg, "AEAD_AES_256_GCM") != 0) {
        po_notify_reject(out, "unsupported_algorithm", "resource algorithm not supported");
        return PO_OK;
    }
    unsigned char *raw = NULL, *plain = NULL;
    size_t raw_len = 0, plain_len = 0;
    if (po_b64_decode(ct, strlen(ct), &raw, &raw_len)) {
        po_notify_reject(out, "malformed_body", "resource.ciphertext is not base64");
        return PO_OK;
    }
    po_err rc = po_aes_gcm_decrypt(a->apiv3_key, a->apiv3_key_len, (const unsigned char *)nonce,
                                   strlen(nonce), (const unsigned char *)(aad ? aad : ""),
                                   aad ? strlen(aad) : 0, raw, raw_len, &plain, &plain_len);
    free(raw);
    if (rc == PO_ERR_NOMEM)
        return rc;
    if (rc) {
        po_notify_reject(out, "decrypt_failed",
                         "resource does not decrypt with the tenant's APIv3 key");
        return PO_OK;
    }
    json_error_t jerr;
    *out_plain = json_loadb((const char *)plain, plain_len, JSON_REJECT_DUPLICATES, &jerr);
    free(plain);
    if (!json_is_object(*out_plain)) {
        json_decref(*out_plain);
        *out_plain = NULL;
        po_notify_reject(out, "malformed_resource", "decrypted resource is not a JSON object");
    }
    return PO_OK;
}

/* mchid/appid of the resource against the account; false = MISMATCH set. */
static bool account_matches(const struct po_channel_account *a, json_t *r,
                            struct po_notify_result *out)
{
    const char *mchid = po_json_str(r, "sp_mchid");
    const char *appid = po_json_str(r, "sp_appid");
    if (!mchid)
        mchid = po_json_str(r, "mchid");
    if (!appid)
        appid = po_json_str(r, "appid");
    const char *reason = NULL;
    if (!mchid || strcmp(mchid, a->mchid) != 0)
        reason = "mchid_mismatch";
    else if (a->appid[0] && appid && strcmp(appid, a->appid) != 0)
        reason = "appid_mismatch";
    if (!reason)
        return true;
    po_notify_mismatch(out, reason, "callback for mchid %.32s appid %.32s, tenant has %.32s %.32s",
                       mchid ? mchid : "-", appid ? appid : "-", a->mchid,
                       a->appid[0] ? a->appid : "-");
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

static void fill_common(const struct po_channel_account *a, struct po_event *ev)
{
    (void)po_set_field(ev->tenant, sizeof ev->tenant, a->tenant);
    (void)po_set_field(ev->channel, sizeof ev->channel, "wechatpay");
    ev->source = PO_SRC_CALLBACK;
}

static void event_from_transaction(json_t *r, struct po_notify_result *out)
{
    struct po_event *ev = &out->ev;
    const char *state = po_json_str(r, "trade_state");
    const char *cur = po_json_str(json_object_get(r, "amount"), "currency");
    ev->type = PO_EV_PAY_SUCCESS;
    if (!state || strcmp(state, "SUCCESS") != 0) {
        out->status = PO_NOTIFY_IGNORE;
        (void)snprintf(out->detail, sizeof out->detail, "trade_state %.16s: nothing to apply",
                       state ? state : "-");
        return;
    }
    if (!po_set_field(ev->channel_txn_id, sizeof ev->channel_txn_id,
                      po_json_str(r, "transaction_id")) ||
        !po_set_field(ev->out_trade_no, sizeof ev->out_trade_no, po_json_str(r, "out_trade_no")) ||
        !amount_field(r, "amount", "total", &ev->amount_minor) ||
        !po_set_field(ev->currency, sizeof ev->currency, cur ? cur : "CNY"))
        po_notify_reject(out, "malformed_resource",
                         "transaction_id, out_trade_no or amount.total missing");
    (void)po_set_field(ev->occurred_at, sizeof ev->occurred_at, po_json_str(r, "success_time"));
}

static void event_from_refund(json_t *r, struct po_notify_result *out)
{
    struct po_event *ev = &out->ev;
    const char *st = po_json_str(r, "refund_status");
    if (!st) {
        po_notify_reject(out, "malformed_resource", "refund_status missing");
        return;
    }
    if (strcmp(st, "SUCCESS") == 0)
        ev->type = PO_EV_REFUND_SUCCESS;
    else if (strcmp(st, "CLOSED") == 0)
        ev->type = PO_EV_REFUND_CLOSED;
    else if (strcmp(st, "ABNORMAL") == 0)
        ev->type = PO_EV_REFUND_ABNORMAL;
    else {
        out->status = PO_NOTIFY_IGNORE;
        (void)snprintf(out->detail, sizeof out->detail, "refund_status %.16s: nothing to apply",
                       st);
        return;
    }
    if (!po_set_field(ev->channel_refund_id, sizeof ev->channel_refund_id,
                      po_json_str(r, "refund_id")) ||
        !po_set_field(ev->out_refund_no, sizeof ev->out_refund_no,
                      po_json_str(r, "out_refund_no")) ||
        !po_set_field(ev->out_trade_no, sizeof ev->out_trade_no, po_json_str(r, "out_trade_no")) ||
        !amount_field(r, "amount", "refund", &ev->amount_minor))
        po_notify_reject(out, "malformed_resource",
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
        out->status = PO_NOTIFY_IGNORE;
        (void)snprintf(out->detail, sizeof out->detail, "receiver result %.16s: nothing moved",
                       result);
        return;
    }
    json_t *amt = json_object_get(recv, "amount");
    if (!po_set_field(ev->channel_txn_id, sizeof ev->channel_txn_id, po_json_str(r, "order_id")) ||
        !po_set_field(ev->receiver, sizeof ev->receiver, po_json_str(recv, "account")) ||
        !po_set_field(out->pay_txn_id, sizeof out->pay_txn_id, po_json_str(r, "transaction_id")) ||
        !json_is_integer(amt)) {
        po_notify_reject(out, "malformed_resource",
                         "order_id, transaction_id, receiver.account or receiver.amount missing");
        return;
    }
    ev->amount_minor = json_integer_value(amt);
    (void)po_set_field(ev->currency, sizeof ev->currency, "CNY");
    (void)po_set_field(ev->occurred_at, sizeof ev->occurred_at, po_json_str(r, "success_time"));
}

po_err po_wechatpay_parse(const struct po_channel_account *a, const struct po_notify_req *req,
                          struct po_notify_result *out)
{
    bool ok = false;
    json_t *body = NULL, *plain = NULL;
    po_err rc = po_wechatpay_verify(a, req, out, &ok);
    if (rc || !ok)
        return rc;
    json_error_t jerr;
    body = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    const char *etype = po_json_str(body, "event_type");
    if (!json_is_object(body) || !etype) {
        po_notify_reject(out, "malformed_body", "body is not a callback JSON object");
        goto out;
    }
    rc = decrypt_resource(a, body, out, &plain);
    if (rc || !plain)
        goto out;
    fill_common(a, &out->ev);
    out->status = PO_NOTIFY_EVENT;
    bool is_pay = strcmp(etype, "TRANSACTION.SUCCESS") == 0;
    bool is_refund = strncmp(etype, "REFUND.", 7) == 0;
    bool is_share = strncmp(etype, "PROFITSHARING", 13) == 0;
    if (!is_pay && !is_refund && !is_share) {
        out->status = PO_NOTIFY_IGNORE;
        (void)snprintf(out->detail, sizeof out->detail, "event_type %.40s: nothing to apply",
                       etype);
        goto out;
    }
    if (is_pay)
        event_from_transaction(plain, out);
    else if (is_refund)
        event_from_refund(plain, out);
    else
        event_from_profitsharing(plain, out);
    if (out->status != PO_NOTIFY_EVENT)
        goto out;
    if (!account_matches(a, plain, out))
        goto out;
    /* Profit sharing names no order; the caller fills out_trade_no. */
    if (is_share && !out->ev.out_trade_no[0])
        goto out;
    char verr[PO_ERRBUF_MAX];
    if (po_event_validate(&out->ev, verr, sizeof verr))
        po_notify_reject(out, "malformed_resource", "%s", verr);
out:
    json_decref(plain);
    json_decref(body);
    return rc;
}
