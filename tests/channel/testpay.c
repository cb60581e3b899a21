/*
 * testpay.c — a fourth channel that exists only in the test suite
 * (test_channel4), written the way a new channel is added to payonce: this
 * one file, defining `const struct po_channel_ops po_channel_testpay`, and
 * one X(testpay) in the registry's list (given to that build as
 * PO_CHANNELS_EXTRA). Nothing else changes: the routes, metrics, the 404
 * text, account storage and the engine take it from the registry.
 *
 * The channel: a JSON notification signed with HMAC-SHA256 over "t.body"
 * (header Testpay-Signature: t=UNIX,v1=HEX), like many card processors;
 * {"id": "evt_…", "type": "payment.succeeded", "out_trade_no": …,
 *  "txn": …, "amount": minor units, "currency": "CNY"}. Its account keeps
 * one secret, its own part of the account.
 */
#include "../../src/channel/channel_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct testpay_account {
    unsigned char secret[PO_SECRET_MAX];
    size_t len;
};

static po_err parse(const struct po_channel_account *a, const struct po_notify_req *req,
                    struct po_notify_result *out)
{
    const struct testpay_account *tp = a->priv;
    const char *h = req->header(req->hctx, "Testpay-Signature");
    char ts[24] = "", hex[65] = "";
    if (!h || sscanf(h, "t=%23[0-9],v1=%64[0-9a-f]", ts, hex) != 2 || strlen(hex) != 64) {
        po_notify_reject(out, PO_R_MISSING_SIGNATURE, "Testpay-Signature: t=…,v1=… required");
        return PO_OK;
    }
    if (!po_notify_window_ok(a, ts, req->now_unix, out))
        return PO_OK;
    size_t tl = strlen(ts);
    char *msg = malloc(tl + 1 + req->body_len);
    unsigned char mac[32], want[32];
    if (!msg)
        return PO_ERR_NOMEM;
    memcpy(msg, ts, tl);
    msg[tl] = '.';
    memcpy(msg + tl + 1, req->body, req->body_len);
    po_err rc = po_hmac_sha256(tp->secret, tp->len, msg, tl + 1 + req->body_len, mac);
    free(msg);
    if (rc)
        return rc;
    for (int i = 0; i < 32; i++) {
        unsigned v = 0;
        (void)sscanf(hex + 2 * i, "%2x", &v);
        want[i] = (unsigned char)v;
    }
    if (!po_ct_equal(mac, want, 32)) {
        po_notify_reject(out, PO_R_BAD_SIGNATURE, "v1 does not match the secret");
        return PO_OK;
    }
    json_t *root = NULL;
    rc = po_notify_json(req->body, req->body_len, out, PO_R_MALFORMED_BODY, "the body", &root);
    if (rc || !root)
        return rc;
    const char *type = po_json_str(root, "type");
    json_t *amt = json_object_get(root, "amount");
    po_notify_event_init(a, out);
    struct po_event *ev = &out->ev;
    if (!type || strcmp(type, "payment.succeeded") != 0) {
        po_notify_ignore(out, "event type %.40s: nothing to apply", type ? type : "-");
    } else if (!json_is_integer(amt) || !po_amount_valid(json_integer_value(amt)) ||
               !po_set_field(ev->out_trade_no, sizeof ev->out_trade_no,
                             po_json_str(root, "out_trade_no")) ||
               !po_set_field(ev->channel_txn_id, sizeof ev->channel_txn_id,
                             po_json_str(root, "txn")) ||
               !po_set_field(ev->currency, sizeof ev->currency, po_json_str(root, "currency"))) {
        po_notify_reject(out, PO_R_MALFORMED_BODY, "out_trade_no, txn, amount or currency");
    } else {
        char verr[PO_ERRBUF_SIZE];
        ev->type = PO_EV_PAY_SUCCESS;
        ev->amount_minor = json_integer_value(amt);
        if (po_event_validate(ev, verr, sizeof verr))
            po_notify_reject(out, PO_R_MALFORMED_BODY, "%s", verr);
    }
    json_decref(root);
    return PO_OK;
}

static void ack(bool success, unsigned fail_status, const char *msg, struct po_ack *out)
{
    out->status = success ? 200 : fail_status;
    out->content_type = "text/plain";
    (void)snprintf(out->body, sizeof out->body, "%s", success ? "OK" : msg);
}

static po_err account_build(const struct po_account_input *in, json_t *cfg, char *err,
                            size_t errcap)
{
    const char *path = in->opt(in->ctx, "secret-file");
    size_t len = 0;
    if (!path) {
        po_errf(err, errcap, "--secret-file is required");
        return PO_ERR_INVALID;
    }
    char *sec = po_account_read_file(path, true, &len, err, errcap);
    if (!sec)
        return PO_ERR_INVALID;
    json_t *sealed =
        len > 0 && len <= PO_SECRET_MAX ? po_account_seal(in, "testpay", "secret", sec, len) : NULL;
    po_secure_zero(sec, len);
    free(sec);
    if (!sealed) {
        po_errf(err, errcap, "--secret-file: 1-%d bytes", PO_SECRET_MAX);
        return PO_ERR_INVALID;
    }
    json_object_set_new(cfg, "secret", sealed);
    return PO_OK;
}

static po_err account_load(json_t *root, const unsigned char *master, struct po_channel_account *a,
                           char *err, size_t errcap)
{
    struct testpay_account *tp = po_account_priv_new(a, sizeof *tp);
    if (!tp)
        return PO_ERR_NOMEM;
    return po_account_unseal(a, "secret", po_json_str(root, "secret"), master, tp->secret,
                             sizeof tp->secret, &tp->len, err, errcap);
}

static void account_free(void *priv)
{
    po_account_priv_free(priv, sizeof(struct testpay_account));
}

static const struct po_channel_option options[] = {
    {"secret-file", "the notification signing secret (sealed)"},
    {"timestamp-window", "seconds a notification's t= may be off (default 300)"},
    {NULL, NULL},
};

const struct po_channel_ops po_channel_testpay = {
    .name = "testpay",
    .title = "Testpay (the test suite's fourth channel)",
    .options = options,
    .account_build = account_build,
    .account_load = account_load,
    .account_free = account_free,
    .parse = parse,
    .ack = ack,
};
