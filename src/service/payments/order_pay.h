/*
 * order_pay.h — creating an order's payment at its channel (order_pay.c):
 * POST /v1/orders with a pay_method records the order, then asks the
 * channel for the payment (a QR code, JSAPI parameters, a page-pay form, a
 * PaymentIntent's client_secret) with payonce's notify URL, and records
 * what the channel answered on the order.
 * Part of service.h (which includes every service header).
 */
#ifndef PO_SERVICE_ORDER_PAY_H
#define PO_SERVICE_ORDER_PAY_H

#include "../../channel/channel.h"
#include "../accounts/account.h"
#include "../../core/core.h"
#include "../../engine/objects.h"
#include "../../store/store.h"

#include <jansson.h>

/* What the buyer pays with, beside the order (POST /v1/orders). */
struct po_pay_ask {
    const char *pay_method;
    const char *description;
    const char *payer_openid;
    const char *payer_ip;
    const char *return_url;
};

enum po_pay_step {
    PO_PAYSTEP_REFUSED, /* answered without the channel: code / err say why */
    PO_PAYSTEP_STORED,  /* the order's payment is recorded already: payment */
    PO_PAYSTEP_CALL,    /* the channel must be asked (po_order_pay_call) */
};

struct po_pay_job {
    enum po_pay_step step;
    bool created;       /* this request created the order row */
    bool order_refused; /* REFUSED by the order itself (po_order_insert's codes) */
    char code[48], err[PO_ERRBUF_SIZE];
    const struct po_channel_ops *ch;
    struct po_account_ref *ref;            /* the account (CALL), or NULL */
    const struct po_channel_account *acct; /* ref's account */
    /* the request, its strings owned by the job */
    char tenant[PO_ID_MAX + 1], out_trade_no[PO_ID_MAX + 1], pay_method[24];
    char currency[4], *description, *payer_openid, *payer_ip, *return_url;
    int64_t amount, expires_at;
    /* STORED, or after the call: the channel's answer */
    json_t *payment;
    struct po_pay_answer ans;
};

/*
 * Records the order (its own transaction; idempotent for identical
 * fields, as po_order_create) and decides what the payment needs: already
 * recorded (STORED: job->payment), a call to the channel (CALL: the
 * tenant's account taken from accounts, serve's cache, or with none
 * unsealed with master — po_accounts_use; the order's
 * own stored expiry is what the channel is sent, so a retry asks for
 * exactly the same payment), or a refusal (REFUSED with code:
 * invalid_request, merchant_not_found, order_exists, order_not_payable,
 * channel_not_configured). Non-OK only for store errors and out-of-memory.
 */
po_err po_order_pay_prepare(struct po_store *s, struct po_accounts *accounts,
                            const unsigned char *master, const struct po_order_spec *spec,
                            const struct po_pay_ask *ask, struct po_pay_job *job) PO_MUST_CHECK;
/* Asks the channel (no connection held): job->ans. Non-OK only for
 * out-of-memory. */
po_err po_order_pay_call(struct po_pay_job *job) PO_MUST_CHECK;
/* In the caller's transaction: the order (po_order_insert, identical to
 * the one prepared) with the channel's answer recorded, once
 * (po_order_set_payment); code as po_order_insert's. */
po_err po_order_pay_record(struct po_store *s, const struct po_order_spec *spec,
                           struct po_pay_job *job, char *code, size_t codecap, char *err,
                           size_t errcap) PO_MUST_CHECK;
/* The order's recorded payment (its "payment" object), or NULL. */
po_err po_order_payment(struct po_store *s, const char *tenant, const char *out_trade_no,
                        json_t **out) PO_MUST_CHECK;
void po_pay_job_free(struct po_pay_job *job);

#endif
