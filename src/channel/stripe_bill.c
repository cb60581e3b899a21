/*
 * stripe_bill.c — a Stripe day, reconciled from its balance transactions.
 *
 * Stripe has no daily bill file: its ledger is the balance transactions,
 * listed by GET /v1/balance_transactions?created[gte]=…&created[lt]=… with
 * expand[]=data.source (stripe_api.c's bill_fetch), which payonce keeps as
 * one JSON document {"object":"payonce_stripe_day","date":…,"data":[…]}.
 * That document is this channel's bill:
 *   type charge / payment   a payment: its source (a Charge) names the
 *                           PaymentIntent (payment_intent, pi_…: the key its
 *                           webhook has) and metadata.out_trade_no
 *   type refund / payment_refund  a refund: its source (a Refund, re_…: the
 *                           key of its refund.* webhook), metadata
 *                           out_trade_no and out_refund_no; amount negative
 *   anything else (payout, stripe_fee, adjustment, …) moves the balance
 *   without an order: checked, not imported
 * Stripe's own arithmetic is checked on every row (net = amount − fee, and
 * the fee the sum of fee_details) and over the day; a row that breaks it,
 * or a payment or refund that cannot be mapped, refuses the whole day.
 */
#include "channel_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *str(json_t *o, const char *k)
{
    const char *v = po_json_str(o, k);
    return v ? v : "";
}

po_err po_stripe_bill_parse(const char *data, size_t len, struct po_bill *out, char *err,
                            size_t errcap)
{
#define BAD PO_BILL_BAD
    po_err rc = PO_OK;
    struct po_bill b = {0};
    json_t *root = NULL, *list = NULL;
    int cap = 0;
    int64_t sum_amount = 0, sum_fee = 0, sum_net = 0;
    if (len > PO_BILL_MAX) {
        po_errf(err, errcap, "bill larger than %d MiB", PO_BILL_MAX >> 20);
        return PO_ERR_LIMIT;
    }
    char jerr[PO_ERRBUF_SIZE];
    if ((rc = po_json_parse(data, len, &root, jerr, sizeof jerr))) {
        if (rc != PO_ERR_NOMEM)
            po_errf(err, errcap, "not a Stripe day (JSON): %s", jerr);
        return rc == PO_ERR_NOMEM ? rc : PO_ERR_INVALID;
    }
    const char *date = str(root, "date");
    list = json_object_get(root, "data");
    if (strcmp(str(root, "object"), "payonce_stripe_day") != 0 || !json_is_array(list) ||
        strlen(date) != 10 || !po_time_valid(date))
        BAD("not a Stripe day (object payonce_stripe_day, date, data)");
    size_t i;
    json_t *t;
    json_array_foreach(list, i, t)
    {
        int line = (int)i + 1;
        json_t *amt = json_object_get(t, "amount"), *fee = json_object_get(t, "fee"),
               *net = json_object_get(t, "net"), *created = json_object_get(t, "created"),
               *src = json_object_get(t, "source");
        const char *type = str(t, "type"), *cur = str(t, "currency");
        if (strcmp(str(t, "object"), "balance_transaction") != 0 || !json_is_integer(amt) ||
            !json_is_integer(fee) || !json_is_integer(net) || !json_is_integer(created))
            BAD("balance transaction %d: not one (amount, fee, net, created)", line);
        int64_t a = json_integer_value(amt), f = json_integer_value(fee),
                n = json_integer_value(net), fd = 0;
        size_t k;
        json_t *d;
        json_array_foreach(json_object_get(t, "fee_details"), k, d)
        {
            json_t *da = json_object_get(d, "amount");
            if (!json_is_integer(da) || !po_bill_add(&fd, json_integer_value(da)))
                BAD("balance transaction %d: a fee detail is not an amount", line);
        }
        if (a - f != n || fd != f || a < -PO_AMOUNT_MAX || a > PO_AMOUNT_MAX || f < 0 ||
            !po_bill_add(&sum_amount, a) || !po_bill_add(&sum_fee, f) || !po_bill_add(&sum_net, n))
            BAD("balance transaction %d (%.40s): Stripe's arithmetic does not hold (amount %lld,"
                " fee %lld, fee details %lld, net %lld)",
                line, str(t, "id"), (long long)a, (long long)f, (long long)fd, (long long)n);
        bool pay = strcmp(type, "charge") == 0 || strcmp(type, "payment") == 0;
        bool refund = strcmp(type, "refund") == 0 || strcmp(type, "payment_refund") == 0;
        if (!pay && !refund)
            continue; /* payouts, fees, adjustments: no order to reconcile */
        json_t *meta = json_object_get(src, "metadata");
        if (!json_is_object(src))
            BAD("balance transaction %d: its source is not expanded (expand[]=data.source)", line);
        struct po_bill_row *r = NULL;
        if ((rc = po_bill_row_next(&b, &cap, &r, err, errcap)))
            goto out;
        r->kind = pay ? PO_BILL_PAY : PO_BILL_REFUND;
        r->amount = pay ? a : -a;
        r->fee_milli = f * 1000;
        time_t ct = (time_t)json_integer_value(created);
        struct tm tm;
        gmtime_r(&ct, &tm);
        (void)strftime(r->time, sizeof r->time, "%Y-%m-%d %H:%M:%S", &tm);
        for (int c = 0; c < 3 && cur[c]; c++)
            r->currency[c] = (char)toupper((unsigned char)cur[c]);
        memcpy(r->sub_mchid, "0", 2);
        bool ok = strlen(cur) == 3 && po_amount_valid(r->amount) &&
                  po_set_field(r->txn, sizeof r->txn, po_json_str(src, "payment_intent")) &&
                  po_set_field(r->out_trade_no, sizeof r->out_trade_no,
                               po_json_str(meta, "out_trade_no")) &&
                  po_id_valid(r->txn, PO_TXN_ID_MAX) && po_id_valid(r->out_trade_no, PO_ID_MAX);
        if (ok && refund)
            ok = po_set_field(r->refund_id, sizeof r->refund_id, po_json_str(src, "id")) &&
                 po_set_field(r->out_refund_no, sizeof r->out_refund_no,
                              po_json_str(meta, "out_refund_no")) &&
                 po_set_field(r->refund_status, sizeof r->refund_status, "SUCCESS");
        if (!ok)
            BAD("balance transaction %d (%.40s): its %s cannot be mapped (payment_intent,"
                " metadata.out_trade_no%s)",
                line, str(t, "id"), pay ? "charge" : "refund",
                refund ? ", metadata.out_refund_no" : "");
        char day[11];
        memcpy(day, r->time, 10);
        day[10] = '\0';
        po_bill_period(&b, day);
        b.nrows++;
    }
    if (sum_amount - sum_fee != sum_net)
        BAD("the day's totals do not hold (amount %lld − fee %lld ≠ net %lld)",
            (long long)sum_amount, (long long)sum_fee, (long long)sum_net);
    if (!b.period_start[0]) { /* a day without payments or refunds */
        memcpy(b.period_start, date, 11);
        memcpy(b.period_end, date, 11);
    }
    po_bill_hand(&b, out);
out:
    json_decref(root);
    po_bill_free(&b);
    return rc;
#undef BAD
}
