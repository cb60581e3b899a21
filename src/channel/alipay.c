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

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool verify(const struct po_channel_account *a, const struct po_form *f,
                   struct po_notify_result *out)
{
    const char *sign = po_form_get(f, "sign"), *type = po_form_get(f, "sign_type");
    if (!sign || !*sign) {
        po_notify_reject(out, "missing_signature", "sign is missing");
        return false;
    }
    if (!type || strcmp(type, "RSA2") != 0) {
        po_notify_reject(out, "unsupported_signature_type", "only sign_type RSA2 is accepted");
        return false;
    }
    unsigned char *raw = NULL;
    size_t raw_len = 0;
    if (po_b64_decode(sign, strlen(sign), &raw, &raw_len)) {
        po_notify_reject(out, "bad_signature", "sign is not base64");
        return false;
    }
    char *content = po_alipay_sign_content(f, true);
    po_err rc = content ? po_rsa_sha256_verify(a->alipay_key, content, strlen(content), raw,
                                               raw_len)
                        : PO_ERR_NOMEM;
    free(content);
    free(raw);
    if (rc) {
        po_notify_reject(out, "bad_signature", "sign does not verify with the Alipay public key");
        return false;
    }
    return true;
}

static bool charset_ok(const struct po_form *f, struct po_notify_result *out)
{
    const char *cs = po_form_get(f, "charset");
    if (!cs || !*cs || strcasecmp(cs, "utf-8") == 0 || strcasecmp(cs, "utf8") == 0) {
        for (int i = 0; i < f->n; i++)
            if (!po_utf8_valid(f->p[i].val, f->p[i].val_len)) {
                po_notify_reject(out, "invalid_utf8", "field %.32s is not valid UTF-8",
                                 f->p[i].key);
                return false;
            }
        return true;
    }
    if (strcasecmp(cs, "gbk") == 0 || strcasecmp(cs, "gb2312") == 0)
        return true; /* the fields payonce reads are ASCII; others are only signed */
    po_notify_reject(out, "bad_charset", "charset %.16s is not supported", cs);
    return false;
}

static bool amount(const struct po_form *f, const char *key, int64_t *out)
{
    return po_parse_major_amount(po_form_get(f, key), out) == PO_OK;
}

po_err po_alipay_parse(const struct po_channel_account *a, const struct po_notify_req *req,
                       struct po_notify_result *out)
{
    struct po_form *f = calloc(1, sizeof *f);
    if (!f)
        return PO_ERR_NOMEM;
    if (!po_form_parse(req->body, req->body_len, f)) {
        po_notify_reject(out, "malformed_body", "body is not a well-formed form");
        goto out;
    }
    if (!charset_ok(f, out) || !verify(a, f, out))
        goto out;
    struct po_event *ev = &out->ev;
    const char *app_id = po_form_get(f, "app_id"), *seller = po_form_get(f, "seller_id");
    const char *status = po_form_get(f, "trade_status");
    (void)po_set_field(ev->tenant, sizeof ev->tenant, a->tenant);
    (void)po_set_field(ev->channel, sizeof ev->channel, "alipay");
    (void)po_set_field(ev->currency, sizeof ev->currency, "CNY");
    ev->source = PO_SRC_CALLBACK;
    out->status = PO_NOTIFY_EVENT;
    const char *refund_no = po_form_get(f, "out_biz_no");
    bool has_refund = po_form_get(f, "refund_fee") && *po_form_get(f, "refund_fee");
    bool paid = status && (strcmp(status, "TRADE_SUCCESS") == 0 ||
                           strcmp(status, "TRADE_FINISHED") == 0);
    bool closed = status && strcmp(status, "TRADE_CLOSED") == 0;
    /* A full refund closes the trade; a partial one names its request. */
    bool refund = has_refund && (closed || (paid && refund_no && *refund_no));
    if (!refund && !paid) {
        out->status = PO_NOTIFY_IGNORE;
        (void)snprintf(out->detail, sizeof out->detail, "trade_status %.20s: nothing to apply",
                       status ? status : "-");
        goto out;
    }
    if (!po_set_field(ev->out_trade_no, sizeof ev->out_trade_no, po_form_get(f, "out_trade_no")) ||
        !po_set_field(ev->channel_txn_id, sizeof ev->channel_txn_id, po_form_get(f, "trade_no"))) {
        po_notify_reject(out, "malformed_body", "out_trade_no or trade_no missing");
        goto out;
    }
    if (refund) {
        ev->type = PO_EV_REFUND_SUCCESS;
        if (!refund_no || !*refund_no)
            refund_no = ev->out_trade_no;
        char rid[PO_TXN_ID_MAX + PO_ID_MAX + 2];
        (void)snprintf(rid, sizeof rid, "%s_%s", ev->channel_txn_id, refund_no);
        if (!po_set_field(ev->out_refund_no, sizeof ev->out_refund_no, refund_no) ||
            !po_set_field(ev->channel_refund_id, sizeof ev->channel_refund_id, rid) ||
            !amount(f, "refund_fee", &ev->amount_minor)) {
            po_notify_reject(out, "malformed_body", "refund fields invalid");
            goto out;
        }
        ev->amount_is_cumulative = true; /* refund_fee: the trade's refunded total */
    } else {
        ev->type = PO_EV_PAY_SUCCESS;
        if (!amount(f, "total_amount", &ev->amount_minor)) {
            po_notify_reject(out, "malformed_body", "total_amount is not an amount in yuan");
            goto out;
        }
    }
    if (!app_id || strcmp(app_id, a->app_id) != 0 ||
        (a->seller_id[0] && (!seller || strcmp(seller, a->seller_id) != 0))) {
        po_notify_mismatch(out,
                           !app_id || strcmp(app_id, a->app_id) != 0 ? "app_id_mismatch"
                                                                      : "seller_id_mismatch",
                           "notification for app_id %.32s seller_id %.32s, tenant has %.32s %.32s",
                           app_id ? app_id : "-", seller ? seller : "-", a->app_id,
                           a->seller_id[0] ? a->seller_id : "-");
        goto out;
    }
    char verr[PO_ERRBUF_MAX];
    if (po_event_validate(ev, verr, sizeof verr))
        po_notify_reject(out, "malformed_body", "%s", verr);
out:
    po_form_free(f);
    free(f);
    return PO_OK;
}
