/*
 * stripe_api.c — calls to Stripe's API with the tenant's secret key
 * (Authorization: Bearer sk_…, form-encoded bodies): the PaymentIntent of an
 * order found by metadata.out_trade_no (the search API), its cancel, and
 * refunds with Stripe's own Idempotency-Key. Stripe does not sign its
 * answers (TLS is its authentication); an answer counts when it is a 2xx
 * JSON object of the expected kind, and its error bodies are
 * {"error":{"type","code","message"}}.
 */
#include "channel_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A member's text, "" when absent. */
static const char *field(json_t *o, const char *k)
{
    const char *v = po_json_str(o, k);
    return v ? v : "";
}

/* One call: GET path, or POST path with a form body; idem, when not
 * NULL, is sent as Stripe's Idempotency-Key; the answer read up to max
 * (PO_API_RESP_MAX for an object, PO_API_LIST_MAX for a list or a
 * search). PO_ERR_INVALID (nothing sent) without an API key. answer()
 * consumes what it read. */
static po_err call(const struct po_channel_account *a, const char *path, const char *form,
                   const char *idem, size_t max, struct po_api_resp *out)
{
    memset(out, 0, sizeof *out);
    const struct po_stripe_account *st = po_stripe_of(a);
    if (!st->api_key[0])
        return PO_ERR_INVALID;
    char url[512], auth[PO_SECRET_MAX + 32], key[PO_ID_MAX + 80];
    po_err rc = po_fmt(url, sizeof url, "%s%s", a->api_base_url, path);
    if (!rc)
        rc = po_fmt(auth, sizeof auth, "Authorization: Bearer %s", st->api_key);
    if (!rc && idem)
        rc = po_fmt(key, sizeof key, "Idempotency-Key: %s", idem);
    if (rc)
        return rc;
    const char *h[] = {"Accept: application/json", "Stripe-Version: 2024-06-20", auth,
                       form ? "Content-Type: application/x-www-form-urlencoded" : NULL,
                       idem ? key : NULL};
    rc = po_api_request(url, h, 5, form, max, out);
    po_secure_zero(auth, sizeof auth);
    return rc;
}

/* The answer as a JSON object, or NULL (*why: no_answer or
 * answer_over_<bound>, not_json, HTTP_<status>:<error.code>). The body
 * read is released (r->status stays): r may serve the next call. */
static json_t *answer(struct po_api_resp *r, char *why, size_t cap)
{
    json_t *j = NULL;
    if (r->status == 0) {
        po_api_why_none(r, why, cap);
        return NULL;
    }
    bool parsed = po_json_parse(r->body, r->len, &j, NULL, 0) == PO_OK;
    po_api_resp_release(r);
    if (!parsed || !json_is_object(j)) {
        json_decref(j);
        (void)snprintf(why, cap, "HTTP_%ld_not_json", r->status);
        return NULL;
    }
    if (r->status < 200 || r->status >= 300) {
        po_channel_clean_code(po_json_str(json_object_get(j, "error"), "code"), r->status, why,
                              cap);
        json_decref(j);
        return NULL;
    }
    return j;
}

/* The order's PaymentIntents: GET /v1/payment_intents/search with
 * query=metadata['out_trade_no']:'<no>' (out_trade_no is [A-Za-z0-9_-],
 * nothing in it needs quoting inside the query language). *data: the
 * list's "data", owned by *root; NULL with why when there is no usable
 * answer. Non-OK only for out-of-memory. */
static po_err intents_of(const struct po_channel_account *a, const char *out_trade_no,
                         json_t **root, json_t **data, long *status, char *why, size_t cap)
{
    *root = *data = NULL;
    char path[256];
    PO_ASSERT(po_fmt(path, sizeof path,
                     "/v1/payment_intents/search?query=metadata%%5B%%27out_trade_no%%27%%5D%%3A"
                     "%%27%s%%27&limit=10",
                     out_trade_no) == PO_OK);
    struct po_api_resp *r = malloc(sizeof *r);
    po_err rc = r ? call(a, path, NULL, NULL, PO_API_LIST_MAX, r) : PO_ERR_NOMEM;
    if (rc == PO_ERR_INVALID) {
        (void)snprintf(why, cap, "no_api_key");
        rc = PO_OK;
    } else if (!rc) {
        *status = r->status;
        *root = answer(r, why, cap);
    }
    free(r);
    *data = json_object_get(*root, "data");
    if (*root && !json_is_array(*data)) {
        (void)snprintf(why, cap, "not_a_list");
        json_decref(*root);
        *root = *data = NULL;
    }
    return rc;
}

/* The first PaymentIntent of data in status st, or NULL. */
static json_t *intent_in(json_t *data, const char *st)
{
    size_t i;
    json_t *pi;
    json_array_foreach(data, i, pi) if (strcmp(field(pi, "status"), st) == 0) return pi;
    return NULL;
}

/* ---- active query ---- */

/* A succeeded PaymentIntent is the payment: the event its
 * payment_intent.succeeded webhook would have made (the same id: the same
 * key). None succeeded (or none at all): not paid. */
po_err po_stripe_order_query(const struct po_channel_account *a, const struct po_order_ref *o,
                             struct po_query_answer *out)
{
    const char *out_trade_no = o->out_trade_no;
    memset(out, 0, sizeof *out);
    out->state = PO_QUERY_FAILED;
    json_t *root, *data;
    po_err rc =
        intents_of(a, out_trade_no, &root, &data, &out->http_status, out->why, sizeof out->why);
    if (rc || !data)
        return rc;
    json_t *pi = intent_in(data, "succeeded");
    out->state = PO_QUERY_NOT_PAID;
    if (pi) {
        json_t *amt = json_object_get(pi, "amount_received");
        bool ours =
            strcmp(field(json_object_get(pi, "metadata"), "out_trade_no"), out_trade_no) == 0;
        po_query_paid(a, out_trade_no, po_json_str(pi, "id"),
                      ours && json_is_integer(amt) ? json_integer_value(amt) : 0,
                      po_json_str(pi, "currency"), out);
    }
    json_decref(root);
    return PO_OK;
}

/* ---- close: cancel the order's open PaymentIntents ---- */

/* No PaymentIntent: nothing can be paid. A succeeded one: refused (the
 * query credits it). Each open one (not canceled) is canceled:
 * POST /v1/payment_intents/{id}/cancel; Stripe's 400
 * payment_intent_unexpected_state (it just succeeded, or is processing) is
 * a refusal the query settles. */
po_err po_stripe_order_close(const struct po_channel_account *a, const struct po_order_ref *o,
                             struct po_close_answer *out)
{
    const char *out_trade_no = o->out_trade_no;
    memset(out, 0, sizeof *out);
    out->state = PO_CLOSE_FAILED;
    json_t *root, *data;
    po_err rc =
        intents_of(a, out_trade_no, &root, &data, &out->http_status, out->why, sizeof out->why);
    if (rc || !data)
        return rc;
    if (intent_in(data, "succeeded")) {
        out->state = PO_CLOSE_REFUSED;
        (void)snprintf(out->why, sizeof out->why, "succeeded");
        json_decref(root);
        return PO_OK;
    }
    struct po_api_resp *r = malloc(sizeof *r);
    if (!r) {
        json_decref(root);
        return PO_ERR_NOMEM;
    }
    out->state = PO_CLOSE_CLOSED;
    size_t i;
    json_t *pi;
    json_array_foreach(data, i, pi)
    {
        const char *id = po_json_str(pi, "id"), *st = field(pi, "status");
        if (strcmp(st, "canceled") == 0)
            continue;
        char path[160];
        if (!id || !po_id_valid(id, PO_TXN_ID_MAX) ||
            po_fmt(path, sizeof path, "/v1/payment_intents/%s/cancel", id)) {
            out->state = PO_CLOSE_FAILED;
            (void)snprintf(out->why, sizeof out->why, "malformed_answer");
            break;
        }
        rc = call(a, path, "cancellation_reason=abandoned", NULL, PO_API_RESP_MAX, r);
        if (rc) {
            out->state = PO_CLOSE_FAILED;
            break;
        }
        out->http_status = r->status;
        json_t *j = answer(r, out->why, sizeof out->why);
        bool canceled = j && strcmp(field(j, "status"), "canceled") == 0;
        json_decref(j);
        if (!canceled) {
            out->state = strstr(out->why, "payment_intent_unexpected_state") ? PO_CLOSE_REFUSED
                                                                             : PO_CLOSE_FAILED;
            break;
        }
    }
    free(r);
    json_decref(root);
    return rc == PO_ERR_NOMEM ? rc : PO_OK;
}

/* ---- refund submission: POST /v1/refunds ---- */

/* The payment is the order's succeeded PaymentIntent (found by its
 * metadata) or, for a payment parked in suspense, the one named by txn_id.
 * metadata carries out_trade_no and out_refund_no, so that the refund.*
 * webhooks map back; Stripe's Idempotency-Key is payonce's refund
 * (tenant and out_refund_no), so a resubmission after a lost answer is
 * the same refund. 2xx submitted; 4xx other than 409 (a concurrent
 * request with the key) and 429 rejected; anything else pending. */
po_err po_stripe_refund_submit(const struct po_channel_account *a,
                               const struct po_refund_request *r, struct po_refund_answer *out)
{
    memset(out, 0, sizeof *out);
    out->decision = PO_REFUND_PENDING;
    if (!po_stripe_of(a)->api_key[0]) {
        (void)snprintf(out->code, sizeof out->code, "no_api_key");
        return PO_OK;
    }
    char pi[PO_TXN_ID_MAX + 1] = "";
    if (r->txn_id && r->txn_id[0]) {
        (void)snprintf(pi, sizeof pi, "%s", r->txn_id);
    } else {
        json_t *root, *data;
        po_err rc = intents_of(a, r->out_trade_no, &root, &data, &out->http_status, out->code,
                               sizeof out->code);
        if (rc)
            return rc;
        json_t *paid = intent_in(data, "succeeded");
        if (data && !paid) {
            out->decision = PO_REFUND_REJECTED;
            (void)snprintf(out->code, sizeof out->code, "no_succeeded_payment_intent");
        }
        if (paid && po_strcpy(pi, sizeof pi, field(paid, "id")) != PO_OK)
            pi[0] = '\0';
        json_decref(root);
        if (!pi[0])
            return PO_OK;
    }
    if (!po_id_valid(pi, PO_TXN_ID_MAX)) { /* it goes into a form */
        (void)snprintf(out->code, sizeof out->code, "malformed_answer");
        return PO_OK;
    }
    char form[512], idem[PO_ID_MAX * 2 + 16];
    PO_ASSERT(po_fmt(form, sizeof form,
                     "payment_intent=%s&amount=%lld&metadata%%5Bout_trade_no%%5D=%s"
                     "&metadata%%5Bout_refund_no%%5D=%s",
                     pi, (long long)r->amount, r->out_trade_no, r->out_refund_no) == PO_OK);
    PO_ASSERT(po_fmt(idem, sizeof idem, "payonce-refund-%s-%s", a->tenant, r->out_refund_no) ==
              PO_OK);
    struct po_api_resp *resp = malloc(sizeof *resp);
    po_err rc = resp ? call(a, "/v1/refunds", form, idem, PO_API_RESP_MAX, resp) : PO_ERR_NOMEM;
    if (rc) {
        free(resp);
        return rc;
    }
    out->http_status = resp->status;
    json_t *j = answer(resp, out->code, sizeof out->code);
    if (j && strcmp(field(j, "object"), "refund") == 0) {
        out->decision = PO_REFUND_SUBMITTED;
        out->code[0] = '\0';
    } else if (!j && resp->status >= 400 && resp->status < 500 && resp->status != 409 &&
               resp->status != 429) {
        out->decision = PO_REFUND_REJECTED;
    }
    json_decref(j);
    free(resp);
    return PO_OK;
}

/* ---- refund query: GET /v1/refunds?payment_intent= ---- */

/* The refund is the one of the payment (r->txn_id, its PaymentIntent)
 * whose metadata.out_refund_no is ours: succeeded -> REFUND_SUCCESS,
 * failed / canceled -> REFUND_CLOSED (as its refund.* webhook), pending
 * or requires_action -> pending; none -> no such refund. */
po_err po_stripe_refund_query(const struct po_channel_account *a, const struct po_refund_request *r,
                              struct po_refund_query_answer *out)
{
    memset(out, 0, sizeof *out);
    out->state = PO_RQ_FAILED;
    if (!r->txn_id || !po_id_valid(r->txn_id, PO_TXN_ID_MAX)) {
        (void)snprintf(out->why, sizeof out->why, "no_payment_intent");
        return PO_OK;
    }
    char path[200];
    PO_ASSERT(po_fmt(path, sizeof path, "/v1/refunds?payment_intent=%s&limit=100", r->txn_id) ==
              PO_OK);
    struct po_api_resp *resp = malloc(sizeof *resp);
    po_err rc = resp ? call(a, path, NULL, NULL, PO_API_LIST_MAX, resp) : PO_ERR_NOMEM;
    if (rc == PO_ERR_INVALID) {
        (void)snprintf(out->why, sizeof out->why, "no_api_key");
        rc = PO_OK;
    }
    json_t *j = rc ? NULL : answer(resp, out->why, sizeof out->why);
    out->http_status = rc ? 0 : resp->status;
    free(resp);
    json_t *data = json_object_get(j, "data"), *re, *mine = NULL;
    size_t i;
    json_array_foreach(data, i,
                       re) if (strcmp(field(json_object_get(re, "metadata"), "out_refund_no"),
                                      r->out_refund_no) == 0) mine = re;
    const char *st = field(mine, "status");
    if (!j) {
        /* no decisive answer: why says it */
    } else if (!json_is_array(data)) {
        (void)snprintf(out->why, sizeof out->why, "not_a_list");
    } else if (!mine) {
        out->state = PO_RQ_NOT_FOUND;
    } else if (strcmp(st, "pending") == 0 || strcmp(st, "requires_action") == 0) {
        out->state = PO_RQ_PENDING;
    } else if (strcmp(st, "succeeded") == 0 || strcmp(st, "failed") == 0 ||
               strcmp(st, "canceled") == 0) {
        json_t *amt = json_object_get(mine, "amount");
        po_query_refund(
            a, strcmp(st, "succeeded") == 0 ? PO_EV_REFUND_SUCCESS : PO_EV_REFUND_CLOSED, r,
            po_json_str(mine, "id"), NULL, json_is_integer(amt) ? json_integer_value(amt) : 0,
            po_json_str(mine, "currency"), out);
    } else {
        (void)snprintf(out->why, sizeof out->why, "unknown_status");
    }
    json_decref(j);
    return rc;
}

/* ---- creating the payment: POST /v1/payment_intents ---- */

/* A PaymentIntent for the order (amount in the currency's minor unit,
 * metadata.out_trade_no so its webhooks map back), with Stripe's
 * Idempotency-Key payonce-order-{tenant}-{out_trade_no}: a repeat is the
 * same PaymentIntent. The buyer's side needs its client_secret. A 4xx
 * (not 409 — the same key in flight — nor 429) refuses; the rest decides
 * nothing. */
po_err po_stripe_pay_create(const struct po_channel_account *a, const struct po_pay_request *r,
                            struct po_pay_answer *out)
{
    memset(out, 0, sizeof *out);
    out->state = PO_PAY_FAILED;
    if (!po_stripe_of(a)->api_key[0]) {
        (void)snprintf(out->why, sizeof out->why, "no_api_key");
        return PO_OK;
    }
    char amount[24], cur[4], idem[PO_ID_MAX * 2 + 16];
    (void)snprintf(amount, sizeof amount, "%lld", (long long)r->amount);
    for (int i = 0; i < 4; i++)
        cur[i] = (char)tolower((unsigned char)r->currency[i]);
    cur[3] = '\0';
    PO_ASSERT(po_fmt(idem, sizeof idem, "payonce-order-%s-%s", a->tenant, r->out_trade_no) ==
              PO_OK);
    struct po_form *f = calloc(1, sizeof *f);
    const char *k[] = {"amount", "currency", "automatic_payment_methods[enabled]",
                       "metadata[out_trade_no]", "description"};
    const char *v[] = {amount, cur, "true", r->out_trade_no, r->description ? r->description : ""};
    po_err rc = f ? PO_OK : PO_ERR_NOMEM;
    for (size_t i = 0; i < sizeof k / sizeof k[0] && !rc; i++)
        if (*v[i])
            rc = po_form_add(f, k[i], v[i]);
    char *form = rc ? NULL : po_form_encode(f, NULL);
    if (f)
        po_form_free(f);
    free(f);
    struct po_api_resp *resp = form ? malloc(sizeof *resp) : NULL;
    rc = resp ? call(a, "/v1/payment_intents", form, idem, PO_API_RESP_MAX, resp) : PO_ERR_NOMEM;
    free(form);
    if (rc) {
        free(resp);
        return rc;
    }
    out->http_status = resp->status;
    json_t *j = answer(resp, out->why, sizeof out->why);
    const char *id = field(j, "id"), *secret = field(j, "client_secret");
    if (j && strcmp(field(j, "object"), "payment_intent") == 0 &&
        strcmp(field(json_object_get(j, "metadata"), "out_trade_no"), r->out_trade_no) == 0 &&
        json_integer_value(json_object_get(j, "amount")) == r->amount &&
        po_id_valid(id, PO_TXN_ID_MAX) && *secret && strlen(secret) < 256) {
        if ((out->payment = json_pack("{s:s, s:s, s:s}", "payment_intent", id, "client_secret",
                                      secret, "status", field(j, "status")))) {
            out->state = PO_PAY_CREATED;
            out->why[0] = '\0';
            PO_ASSERT(po_strcpy(out->channel_id, sizeof out->channel_id, id) == PO_OK);
        } else {
            rc = PO_ERR_NOMEM;
        }
    } else if (j) {
        (void)snprintf(out->why, sizeof out->why, "malformed_answer");
    } else if (resp->status >= 400 && resp->status < 500 && resp->status != 409 &&
               resp->status != 429) {
        out->state = PO_PAY_REFUSED;
    }
    json_decref(j);
    free(resp);
    return rc;
}

/* One page of a Stripe list at path: *j the answer (caller json_decrefs),
 * *data its array, *more its has_more; *j NULL with why when the page is
 * not a list. Non-OK only for out-of-memory. */
static po_err list_page(const struct po_channel_account *a, const char *path,
                        struct po_api_resp *resp, long *status, char *why, size_t cap, json_t **j,
                        json_t **data, bool *more)
{
    po_err rc = call(a, path, NULL, NULL, PO_API_LIST_MAX, resp);
    if (rc)
        return rc;
    *status = resp->status;
    *j = answer(resp, why, cap);
    *data = json_object_get(*j, "data");
    if (*j && (strcmp(field(*j, "object"), "list") != 0 || !json_is_array(*data))) {
        (void)snprintf(why, cap, "not_a_list");
        json_decref(*j);
        *j = *data = NULL;
    }
    *more = json_is_true(json_object_get(*j, "has_more"));
    return PO_OK;
}

/* ---- missed-event recovery: GET /v1/events ---- */

void po_event_walk_free(struct po_event_walk *w)
{
    free(w->r);
    memset(w, 0, sizeof *w);
}

/* Stripe lists events newest first, page after page (starting_after the
 * last one shown) while has_more; the events kept 30 days. Each one is
 * mapped exactly as its webhook (po_stripe_event_map): the same key, so an
 * event recovered and its webhook arriving late are one. */
po_err po_stripe_events_since(const struct po_channel_account *a, int64_t since, int page, int max,
                              struct po_event_walk *out)
{
    memset(out, 0, sizeof *out);
    if (!po_stripe_of(a)->api_key[0]) {
        (void)snprintf(out->why, sizeof out->why, "no_api_key");
        return PO_OK;
    }
    out->r = calloc((size_t)max, sizeof *out->r);
    struct po_api_resp *resp = malloc(sizeof *resp);
    if (!out->r || !resp) {
        free(resp);
        po_event_walk_free(out);
        return PO_ERR_NOMEM;
    }
    char after[PO_TXN_ID_MAX + 1] = "";
    bool more = true;
    po_err rc = PO_OK;
    while (!rc && more) {
        char path[512];
        PO_ASSERT(po_fmt(path, sizeof path,
                         "/v1/events?created%%5Bgte%%5D=%lld&limit=%d"
                         "&types%%5B%%5D=payment_intent.succeeded&types%%5B%%5D=refund.created"
                         "&types%%5B%%5D=refund.updated&types%%5B%%5D=charge.refund.updated%s%s",
                         (long long)since, page, after[0] ? "&starting_after=" : "",
                         after) == PO_OK);
        json_t *j = NULL, *data = NULL;
        if ((rc = list_page(a, path, resp, &out->http_status, out->why, sizeof out->why, &j, &data,
                            &more)) ||
            !j)
            break;
        size_t i;
        json_t *e;
        bool bad = false;
        json_array_foreach(data, i, e)
        {
            const char *id = field(e, "id");
            json_t *created = json_object_get(e, "created");
            if (!po_id_valid(id, PO_TXN_ID_MAX) || !json_is_integer(created)) {
                bad = true;
                break;
            }
            if (out->n == max) {
                more = true;
                break;
            }
            struct po_notify_result *r = &out->r[out->n++];
            po_stripe_event_map(a, e, r);
            r->ev.source = PO_SRC_QUERY;
            if (json_integer_value(created) > out->newest)
                out->newest = json_integer_value(created);
            PO_ASSERT(po_strcpy(after, sizeof after, id) == PO_OK);
        }
        size_t got = json_array_size(data);
        json_decref(j);
        if (bad) {
            (void)snprintf(out->why, sizeof out->why, "malformed_event");
            break;
        }
        if (more && (out->n == max || got == 0)) {
            (void)snprintf(out->why, sizeof out->why, got ? "too_many_events" : "empty_page");
            break; /* not whole: the oldest are not seen */
        }
        out->ok = !more;
    }
    free(resp);
    /* oldest first */
    for (int i = 0; i < out->n / 2; i++) {
        struct po_notify_result t = out->r[i];
        out->r[i] = out->r[out->n - 1 - i];
        out->r[out->n - 1 - i] = t;
    }
    return rc;
}

/* ---- the day's balance transactions: GET /v1/balance_transactions ---- */

/* The day (UTC, Stripe's) walked page by page (expand[]=data.source, so
 * each charge names its PaymentIntent and each refund its metadata) into
 * one document, the bill po_stripe_bill_parse reads. A day without any is
 * NONE; a walk that is not whole decides nothing. */
po_err po_stripe_bill_fetch(const struct po_channel_account *a, const char *date,
                            struct po_bill_fetch *out)
{
    memset(out, 0, sizeof *out);
    out->state = PO_BILL_FAILED;
    if (!po_stripe_of(a)->api_key[0]) {
        (void)snprintf(out->why, sizeof out->why, "no_api_key");
        return PO_OK;
    }
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (sscanf(date, "%4d-%2d-%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday) != 3) {
        (void)snprintf(out->why, sizeof out->why, "bad_date");
        return PO_OK;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    long long from = (long long)timegm(&tm), to = from + 86400;
    json_t *all = json_array();
    struct po_api_resp *resp = malloc(sizeof *resp);
    char after[PO_TXN_ID_MAX + 1] = "";
    bool more = true, whole = false;
    po_err rc = all && resp ? PO_OK : PO_ERR_NOMEM;
    for (int pages = 0; !rc && more && pages < 1000; pages++) {
        char path[400];
        PO_ASSERT(po_fmt(path, sizeof path,
                         "/v1/balance_transactions?created%%5Bgte%%5D=%lld&created%%5Blt%%5D=%lld"
                         "&limit=100&expand%%5B%%5D=data.source%s%s",
                         from, to, after[0] ? "&starting_after=" : "", after) == PO_OK);
        json_t *j = NULL, *data = NULL;
        if ((rc = list_page(a, path, resp, &out->http_status, out->why, sizeof out->why, &j, &data,
                            &more)) ||
            !j)
            break;
        size_t n = json_array_size(data);
        const char *last = n ? field(json_array_get(data, n - 1), "id") : "";
        if (json_array_extend(all, data) ||
            (more && (!n || po_strcpy(after, sizeof after, last) != PO_OK))) {
            json_decref(j);
            (void)snprintf(out->why, sizeof out->why, n ? "malformed_answer" : "empty_page");
            break;
        }
        json_decref(j);
        whole = !more;
    }
    free(resp);
    if (!rc && whole && json_array_size(all) == 0) {
        out->state = PO_BILL_NONE;
    } else if (!rc && whole) {
        json_t *doc =
            json_pack("{s:s, s:s, s:O}", "object", "payonce_stripe_day", "date", date, "data", all);
        char *text = doc ? po_json_dumps(doc, JSON_COMPACT) : NULL;
        json_decref(doc);
        if (!text) {
            rc = PO_ERR_NOMEM;
        } else {
            out->data = text;
            out->len = strlen(text);
            out->state = PO_BILL_FETCHED;
            out->why[0] = '\0';
        }
    }
    json_decref(all);
    return rc;
}
