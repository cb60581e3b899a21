/*
 * sim_stripe.c — the simulated Stripe API: PaymentIntents (create, search
 * by metadata, cancel) and refunds, behind `Authorization: Bearer` with the
 * simulator's secret key (stripe_api_key), form-encoded requests and
 * Stripe's error bodies {"error":{"type","code","message"}}. State:
 * intents.jsonl (a PaymentIntent's latest line wins), payments.jsonl (a
 * payment `sim pay --channel stripe` made is its PaymentIntent, succeeded)
 * and refunds.jsonl. Refund webhooks are not sent by themselves: Stripe
 * sends them to the endpoint configured in its dashboard, which the
 * simulator does not know (`payonce sim` builds them for tests).
 */
#include "sim_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int stripe_error(struct sim_call *c, unsigned status, const char *code, const char *message)
{
    json_t *e = json_pack("{s:s, s:s}", "type", "invalid_request_error", "message", message);
    if (e && code)
        json_object_set_new(e, "code", json_string(code));
    return sim_reply_json(c, status, json_pack("{s:o}", "error", e));
}

static bool authorised(const struct po_sim_server *s, struct sim_call *c)
{
    const char *h = c->header(c->ctx, "Authorization");
    return s->id.stripe_api_key[0] && h && strncmp(h, "Bearer ", 7) == 0 &&
           strcmp(h + 7, s->id.stripe_api_key) == 0;
}

static json_t *intent_json(const char *id, const char *no, json_int_t amount, const char *cur,
                           const char *status)
{
    char lower[4] = "";
    for (int i = 0; i < 3 && cur[i]; i++)
        lower[i] = (char)(cur[i] | 0x20);
    return json_pack("{s:s, s:s, s:I, s:I, s:s, s:s, s:{s:s}, s:s, s:b}", "id", id, "object",
                     "payment_intent", "amount", amount, "amount_received",
                     strcmp(status, "succeeded") == 0 ? amount : 0, "currency", lower, "status",
                     status, "metadata", "out_trade_no", no, "client_secret", "pi_secret_sim",
                     "livemode", 0);
}

/* The order's PaymentIntents: its payments (succeeded) and the intents
 * created for it (latest status), each id once. Under s->mu. */
static json_t *intents_for(struct po_sim_server *s, const char *no)
{
    json_t *out = json_array(), *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    json_t *intents = sim_read_jsonl(s->dir, "intents.jsonl");
    size_t i;
    json_t *p;
    json_array_foreach(payments, i, p) if (strcmp(sim_jstr(p, "channel"), "stripe") == 0 &&
                                           strcmp(sim_jstr(p, "out_trade_no"), no) == 0)
        json_array_append_new(out, intent_json(sim_jstr(p, "txn"), no, sim_jint(p, "amount"),
                                               sim_jstr(p, "currency"), "succeeded"));
    json_array_foreach(intents, i, p)
    {
        if (strcmp(sim_jstr(p, "out_trade_no"), no) != 0)
            continue;
        size_t k;
        json_t *q, *seen = NULL;
        json_array_foreach(out, k, q) if (strcmp(sim_jstr(q, "id"), sim_jstr(p, "id")) == 0) seen =
            q;
        if (seen && strcmp(sim_jstr(seen, "status"), "succeeded") == 0)
            continue; /* paid: its payment says so */
        json_t *pi = intent_json(sim_jstr(p, "id"), no, sim_jint(p, "amount"),
                                 sim_jstr(p, "currency"), sim_jstr(p, "status"));
        if (seen)
            json_object_update(seen, pi), json_decref(pi);
        else
            json_array_append_new(out, pi);
    }
    json_decref(payments);
    json_decref(intents);
    return out;
}

/* GET /v1/payment_intents/search?query=metadata['out_trade_no']:'NO' —
 * the one query form payonce sends. */
static int search(struct po_sim_server *s, struct sim_call *c)
{
    static const char pre[] = "metadata['out_trade_no']:'";
    const char *q = c->arg(c->ctx, "query");
    char no[PO_ID_MAX + 1];
    size_t len = q ? strlen(q) : 0;
    if (!q || strncmp(q, pre, sizeof pre - 1) != 0 || len < sizeof pre || q[len - 1] != '\'' ||
        len - sizeof pre > PO_ID_MAX)
        return stripe_error(c, 400, "parameter_invalid_string", "query: metadata['out_trade_no']");
    memcpy(no, q + sizeof pre - 1, len - sizeof pre);
    no[len - sizeof pre] = '\0';
    if (!po_id_valid(no, PO_ID_MAX))
        return stripe_error(c, 400, "parameter_invalid_string", "query: metadata['out_trade_no']");
    pthread_mutex_lock(&s->mu);
    json_t *data = intents_for(s, no);
    pthread_mutex_unlock(&s->mu);
    return sim_reply_json(c, 200,
                          json_pack("{s:s, s:o, s:b, s:s, s:n}", "object", "search_result", "data",
                                    data, "has_more", 0, "url", "/v1/payment_intents/search",
                                    "next_page"));
}

/* POST /v1/payment_intents: amount, currency, metadata[out_trade_no]
 * (kept in intents.jsonl, with its client_secret). With an
 * Idempotency-Key, as Stripe: the same key and body again answer the same
 * PaymentIntent; the same key with another body is 400
 * idempotency_error. */
static int create(struct po_sim_server *s, struct sim_call *c, const struct sim_form *f)
{
    const char *no = sim_form_get(f, "metadata[out_trade_no]"), *cur = sim_form_get(f, "currency");
    const char *idem = c->header(c->ctx, "Idempotency-Key");
    int64_t amount = 0;
    if (po_parse_i64(sim_form_get(f, "amount"), 1, PO_AMOUNT_MAX, &amount) ||
        !po_id_valid(no, PO_ID_MAX) || strlen(cur) != 3)
        return stripe_error(c, 400, "parameter_missing",
                            "amount, currency and metadata[out_trade_no]");
    if (idem && (strlen(idem) > 255 || !*idem))
        return stripe_error(c, 400, "parameter_invalid_string", "Idempotency-Key");
    char id[40], upper[4], secret[80];
    for (int i = 0; i < 4; i++)
        upper[i] = (char)(i < 3 ? cur[i] & ~0x20 : '\0');
    pthread_mutex_lock(&s->mu);
    json_t *intents = sim_read_jsonl(s->dir, "intents.jsonl"), *p, *same = NULL;
    size_t i;
    json_array_foreach(intents, i, p) if (idem && strcmp(sim_jstr(p, "idem"), idem) == 0 && !same)
        same = p;
    bool conflict = same && strcmp(sim_jstr(same, "request"), c->body) != 0;
    if (same) {
        (void)snprintf(id, sizeof id, "%s", sim_jstr(same, "id"));
        (void)snprintf(secret, sizeof secret, "%s", sim_jstr(same, "client_secret"));
    } else {
        sim_new_id("pi_", id, sizeof id);
        sim_new_id("_secret_", secret, sizeof secret);
        memmove(secret + strlen(id), secret, strlen(secret) + 1);
        memcpy(secret, id, strlen(id));
        json_t *rec = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:s}", "id", id,
                                "out_trade_no", no, "amount", (json_int_t)amount, "currency", upper,
                                "status", "requires_payment_method", "client_secret", secret,
                                "idem", idem ? idem : "", "request", c->body);
        sim_append_jsonl(s->dir, "intents.jsonl", rec);
        json_decref(rec);
    }
    pthread_mutex_unlock(&s->mu);
    json_decref(intents);
    if (conflict)
        return stripe_error(c, 400, "idempotency_error",
                            "Keys for idempotent requests can only be used with the same"
                            " parameters they were first used with.");
    json_t *pi = intent_json(id, no, (json_int_t)amount, upper, "requires_payment_method");
    json_object_set_new(pi, "client_secret", json_string(secret));
    return sim_reply_json(c, 200, pi);
}

/* POST /v1/payment_intents/{id}/cancel: an open one becomes canceled; a
 * succeeded or canceled one is 400 payment_intent_unexpected_state. */
static int cancel(struct po_sim_server *s, struct sim_call *c, const char *id)
{
    pthread_mutex_lock(&s->mu);
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    json_t *intents = sim_read_jsonl(s->dir, "intents.jsonl"), *last = NULL, *p;
    size_t i;
    json_array_foreach(intents, i, p) if (strcmp(sim_jstr(p, "id"), id) == 0) last = p;
    bool paid = sim_find_payment(payments, "stripe", "txn", id) != NULL;
    json_t *ans = NULL;
    const char *state = last ? sim_jstr(last, "status") : "";
    if (last && !paid && strcmp(state, "canceled") != 0) {
        json_t *rec = json_deep_copy(last);
        json_object_set_new(rec, "status", json_string("canceled"));
        sim_append_jsonl(s->dir, "intents.jsonl", rec);
        json_decref(rec);
        sim_record_close(s, "stripe", sim_jstr(last, "out_trade_no"));
        ans = intent_json(id, sim_jstr(last, "out_trade_no"), sim_jint(last, "amount"),
                          sim_jstr(last, "currency"), "canceled");
    }
    pthread_mutex_unlock(&s->mu);
    json_decref(payments);
    json_decref(intents);
    if (ans)
        return sim_reply_json(c, 200, ans);
    if (!last && !paid)
        return stripe_error(c, 404, "resource_missing", "No such payment_intent");
    return stripe_error(c, 400, "payment_intent_unexpected_state",
                        paid ? "You cannot cancel this PaymentIntent because it has a status of"
                               " succeeded."
                             : "You cannot cancel this PaymentIntent because it has a status of"
                               " canceled.");
}

/* POST /v1/refunds: payment_intent, amount, metadata; Idempotency-Key: the
 * same key again is the same refund. More than was paid is 400
 * amount_too_large; an unknown payment 400 resource_missing. */
static int refund(struct po_sim_server *s, struct sim_call *c, const struct sim_form *f)
{
    const char *pi = sim_form_get(f, "payment_intent"),
               *idem = c->header(c->ctx, "Idempotency-Key");
    const char *rno = sim_form_get(f, "metadata[out_refund_no]");
    int64_t want = 0;
    if (!po_id_valid(pi, PO_TXN_ID_MAX) ||
        po_parse_i64(sim_form_get(f, "amount"), 1, PO_AMOUNT_MAX, &want) ||
        !po_id_valid(rno, PO_ID_MAX))
        return stripe_error(c, 400, "parameter_missing",
                            "payment_intent, amount, metadata[out_refund_no]");
    pthread_mutex_lock(&s->mu);
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    json_t *refunds = sim_read_jsonl(s->dir, "refunds.jsonl"), *r, *same = NULL;
    json_t *p = sim_find_payment(payments, "stripe", "txn", pi);
    json_int_t already = 0;
    size_t i;
    json_array_foreach(refunds, i, r)
    {
        if (!sim_refund_of(r, "stripe") || strcmp(sim_jstr(r, "txn"), pi) != 0)
            continue;
        already += sim_jint(r, "amount");
        if (idem && strcmp(sim_jstr(r, "idem"), idem) == 0)
            same = r;
    }
    const char *code = NULL;
    char id[40] = "";
    json_int_t amount = want;
    if (same) {
        (void)snprintf(id, sizeof id, "%s", sim_jstr(same, "refund_id"));
        amount = sim_jint(same, "amount");
    } else if (!p) {
        code = "resource_missing";
    } else if (already + want > sim_jint(p, "amount")) {
        code = "amount_too_large";
    } else {
        char when[32];
        sim_new_id("re_", id, sizeof id);
        sim_beijing_now(when, sizeof when);
        json_t *rec =
            json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:s}", "channel", "stripe",
                      "out_trade_no", sim_jstr(p, "out_trade_no"), "txn", pi, "out_refund_no", rno,
                      "refund_id", id, "amount", (json_int_t)want, "total", sim_jint(p, "amount"),
                      "time", when, "idem", idem ? idem : "");
        sim_append_jsonl(s->dir, "refunds.jsonl", rec);
        json_decref(rec);
    }
    char cur[4] = "usd";
    for (int k = 0; p && k < 3 && sim_jstr(p, "currency")[k]; k++)
        cur[k] = (char)(sim_jstr(p, "currency")[k] | 0x20);
    char no[PO_ID_MAX + 1];
    (void)snprintf(no, sizeof no, "%s", p ? sim_jstr(p, "out_trade_no") : "");
    pthread_mutex_unlock(&s->mu);
    json_decref(payments);
    json_decref(refunds);
    if (code)
        return stripe_error(c, 400, code,
                            strcmp(code, "amount_too_large") == 0
                                ? "Refund amount is greater than the unrefunded amount"
                                : "No such payment_intent");
    return sim_reply_json(c, 200,
                          json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:{s:s, s:s}}", "id", id,
                                    "object", "refund", "amount", amount, "currency", cur,
                                    "payment_intent", pi, "status", "succeeded", "metadata",
                                    "out_trade_no", no, "out_refund_no", rno));
}

/* A refund record as Stripe's Refund object (the simulator's all
 * succeed). */
static json_t *refund_json(json_t *r, const char *cur)
{
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:{s:s, s:s}}", "id", sim_jstr(r, "refund_id"),
                     "object", "refund", "amount", sim_jint(r, "amount"), "currency", cur,
                     "payment_intent", sim_jstr(r, "txn"), "status", "succeeded", "metadata",
                     "out_trade_no", sim_jstr(r, "out_trade_no"), "out_refund_no",
                     sim_jstr(r, "out_refund_no"));
}

/* "YYYY-MM-DD hh:mm:ss" Beijing time (the records') -> Unix s. */
static int64_t record_time(json_t *rec)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *t = sim_jstr(rec, "time");
    if (sscanf(t, "%4d-%2d-%2d %2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec) != 6)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm) - 8 * 3600;
}

static json_t *event_json(const char *id, int64_t created, const char *type, json_t *obj)
{
    return json_pack("{s:s, s:s, s:s, s:I, s:s, s:b, s:i, s:{s:n, s:n}, s:{s:o}}", "id", id,
                     "object", "event", "api_version", "2024-06-20", "created", (json_int_t)created,
                     "type", type, "livemode", 0, "pending_webhooks", 0, "request", "id",
                     "idempotency_key", "data", "object", obj);
}

static int by_newest(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    json_int_t cx = sim_jint(x, "created"), cy = sim_jint(y, "created");
    if (cx != cy)
        return cx < cy ? 1 : -1;
    return -strcmp(sim_jstr(x, "id"), sim_jstr(y, "id"));
}

/* One page of a Stripe list: all (n objects, taken) sorted newest first,
 * the limit after the one named after, with has_more. */
static int reply_page(struct sim_call *c, json_t **all, size_t n, const char *after, int64_t limit,
                      const char *url)
{
    qsort(all, n, sizeof *all, by_newest);
    size_t from = 0;
    if (after) {
        while (from < n && strcmp(sim_jstr(all[from], "id"), after) != 0)
            from++;
        from = from < n ? from + 1 : n;
    }
    json_t *data = json_array();
    for (size_t k = from; k < n && k < from + (size_t)limit; k++)
        json_array_append(data, all[k]);
    bool more = from + (size_t)limit < n;
    for (size_t k = 0; k < n; k++)
        json_decref(all[k]);
    free(all);
    return sim_reply_json(c, 200,
                          json_pack("{s:s, s:o, s:b, s:s}", "object", "list", "data", data,
                                    "has_more", more, "url", url));
}

/* GET /v1/events?created[gte]=T&limit=N[&starting_after=evt]: the
 * simulator's Stripe payments (payment_intent.succeeded, lost ones too)
 * and refunds (refund.updated, succeeded) as Stripe's events, newest
 * first, a page of limit (default 10, at most 100) after starting_after,
 * with has_more. Event ids are stable: evt_ and the object's id. */
static int list_events(struct po_sim_server *s, struct sim_call *c)
{
    const char *gte = c->arg(c->ctx, "created[gte]"), *lim = c->arg(c->ctx, "limit"),
               *after = c->arg(c->ctx, "starting_after");
    int64_t since = 0, limit = 10;
    if ((gte && po_parse_i64(gte, 0, INT64_C(99999999999), &since)) ||
        (lim && po_parse_i64(lim, 1, 100, &limit)))
        return stripe_error(c, 400, "parameter_invalid_integer", "created[gte], limit");
    pthread_mutex_lock(&s->mu);
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    json_t *refunds = sim_read_jsonl(s->dir, "refunds.jsonl");
    pthread_mutex_unlock(&s->mu);
    size_t cap = json_array_size(payments) + json_array_size(refunds) + 1, n = 0, i;
    json_t **all = calloc(cap, sizeof *all), *p;
    char id[PO_ID_MAX + 8];
    json_array_foreach(payments, i, p)
    {
        int64_t t = record_time(p);
        if (!all || strcmp(sim_jstr(p, "channel"), "stripe") != 0 || t < since)
            continue;
        (void)snprintf(id, sizeof id, "evt_%s", sim_jstr(p, "txn"));
        all[n++] =
            event_json(id, t, "payment_intent.succeeded",
                       intent_json(sim_jstr(p, "txn"), sim_jstr(p, "out_trade_no"),
                                   sim_jint(p, "amount"), sim_jstr(p, "currency"), "succeeded"));
    }
    json_array_foreach(refunds, i, p)
    {
        int64_t t = record_time(p);
        if (!all || !sim_refund_of(p, "stripe") || t < since)
            continue;
        json_t *pay = sim_find_payment(payments, "stripe", "txn", sim_jstr(p, "txn"));
        char cur[4] = "usd";
        for (int k = 0; pay && k < 3 && sim_jstr(pay, "currency")[k]; k++)
            cur[k] = (char)(sim_jstr(pay, "currency")[k] | 0x20);
        (void)snprintf(id, sizeof id, "evt_%s", sim_jstr(p, "refund_id"));
        all[n++] = event_json(id, t, "refund.updated", refund_json(p, cur));
    }
    json_decref(payments);
    json_decref(refunds);
    if (!all)
        return stripe_error(c, 500, NULL, "out of memory");
    return reply_page(c, all, n, after, limit, "/v1/events");
}

/* GET /v1/balance_transactions?created[gte]=&created[lt]=&limit=
 * [&starting_after=][&expand[]=data.source]: the simulator's Stripe
 * payments (type charge, the fee 2.9% + 30, the source a Charge naming its
 * PaymentIntent and metadata) and refunds (type refund, negative, the
 * source a Refund), newest first, paged with has_more. */
static int list_balance(struct po_sim_server *s, struct sim_call *c)
{
    const char *gte = c->arg(c->ctx, "created[gte]"), *lt = c->arg(c->ctx, "created[lt]"),
               *lim = c->arg(c->ctx, "limit"), *after = c->arg(c->ctx, "starting_after"),
               *exp = c->arg(c->ctx, "expand[]");
    int64_t from = 0, to = INT64_C(99999999999), limit = 10;
    if ((gte && po_parse_i64(gte, 0, INT64_C(99999999999), &from)) ||
        (lt && po_parse_i64(lt, 0, INT64_C(99999999999), &to)) ||
        (lim && po_parse_i64(lim, 1, 100, &limit)))
        return stripe_error(c, 400, "parameter_invalid_integer", "created, limit");
    bool expand = exp && strcmp(exp, "data.source") == 0;
    pthread_mutex_lock(&s->mu);
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    json_t *refunds = sim_read_jsonl(s->dir, "refunds.jsonl");
    pthread_mutex_unlock(&s->mu);
    size_t cap = json_array_size(payments) + json_array_size(refunds) + 1, n = 0, i;
    json_t **all = calloc(cap, sizeof *all), *p;
    char id[PO_ID_MAX + 8], ch[PO_ID_MAX + 8];
    json_array_foreach(payments, i, p)
    {
        int64_t t = record_time(p);
        if (!all || strcmp(sim_jstr(p, "channel"), "stripe") != 0 || t < from || t >= to)
            continue;
        json_int_t amount = sim_jint(p, "amount"), fee = (amount * 29 + 500) / 1000 + 30;
        char cur[4] = "usd";
        for (int k = 0; k < 3 && sim_jstr(p, "currency")[k]; k++)
            cur[k] = (char)(sim_jstr(p, "currency")[k] | 0x20);
        (void)snprintf(id, sizeof id, "txn_%s", sim_jstr(p, "txn") + 3);
        (void)snprintf(ch, sizeof ch, "ch_%s", sim_jstr(p, "txn") + 3);
        json_t *src = expand ? json_pack("{s:s, s:s, s:I, s:s, s:s, s:{s:s}}", "id", ch, "object",
                                         "charge", "amount", amount, "currency", cur,
                                         "payment_intent", sim_jstr(p, "txn"), "metadata",
                                         "out_trade_no", sim_jstr(p, "out_trade_no"))
                             : json_string(ch);
        all[n++] = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:s, s:s, s:s, s:o, s:[{s:I, s:s}]}",
                             "id", id, "object", "balance_transaction", "amount", amount, "fee",
                             fee, "net", amount - fee, "created", (json_int_t)t, "currency", cur,
                             "type", "charge", "reporting_category", "charge", "source", src,
                             "fee_details", "amount", fee, "type", "stripe_fee");
    }
    json_array_foreach(refunds, i, p)
    {
        int64_t t = record_time(p);
        if (!all || !sim_refund_of(p, "stripe") || t < from || t >= to)
            continue;
        json_t *pay = sim_find_payment(payments, "stripe", "txn", sim_jstr(p, "txn"));
        char cur[4] = "usd";
        for (int k = 0; pay && k < 3 && sim_jstr(pay, "currency")[k]; k++)
            cur[k] = (char)(sim_jstr(pay, "currency")[k] | 0x20);
        (void)snprintf(id, sizeof id, "txn_%s", sim_jstr(p, "refund_id") + 3);
        json_t *src = expand ? refund_json(p, cur) : json_string(sim_jstr(p, "refund_id"));
        all[n++] = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:s, s:s, s:s, s:o, s:[]}", "id", id,
                             "object", "balance_transaction", "amount", -sim_jint(p, "amount"),
                             "fee", (json_int_t)0, "net", -sim_jint(p, "amount"), "created",
                             (json_int_t)t, "currency", cur, "type", "refund", "reporting_category",
                             "refund", "source", src, "fee_details");
    }
    json_decref(payments);
    json_decref(refunds);
    if (!all)
        return stripe_error(c, 500, NULL, "out of memory");
    return reply_page(c, all, n, after, limit, "/v1/balance_transactions");
}

/* GET /v1/refunds?payment_intent=pi: that payment's refunds (all
 * succeeded), newest last. */
static int list_refunds(struct po_sim_server *s, struct sim_call *c)
{
    const char *pi = c->arg(c->ctx, "payment_intent");
    if (!pi || !po_id_valid(pi, PO_TXN_ID_MAX))
        return stripe_error(c, 400, "parameter_missing", "payment_intent");
    pthread_mutex_lock(&s->mu);
    json_t *refunds = sim_read_jsonl(s->dir, "refunds.jsonl"), *r;
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    json_t *p = sim_find_payment(payments, "stripe", "txn", pi), *data = json_array();
    char cur[4] = "usd";
    for (int k = 0; p && k < 3 && sim_jstr(p, "currency")[k]; k++)
        cur[k] = (char)(sim_jstr(p, "currency")[k] | 0x20);
    size_t i;
    json_array_foreach(refunds, i,
                       r) if (sim_refund_of(r, "stripe") && strcmp(sim_jstr(r, "txn"), pi) == 0)
        json_array_append_new(data, refund_json(r, cur));
    pthread_mutex_unlock(&s->mu);
    json_decref(refunds);
    json_decref(payments);
    return sim_reply_json(c, 200,
                          json_pack("{s:s, s:o, s:b, s:s}", "object", "list", "data", data,
                                    "has_more", 0, "url", "/v1/refunds"));
}

int po_sim_stripe_route(struct po_sim_server *s, struct sim_call *c)
{
    static const char pis[] = "/v1/payment_intents/";
    if (strncmp(c->path, "/v1/", 4) != 0)
        return -1;
    if (!authorised(s, c))
        return stripe_error(c, 401, NULL, "Invalid API Key provided");
    bool get = strcmp(c->method, "GET") == 0, post = strcmp(c->method, "POST") == 0;
    if (get && strcmp(c->path, "/v1/payment_intents/search") == 0)
        return search(s, c);
    if (get && strcmp(c->path, "/v1/refunds") == 0)
        return list_refunds(s, c);
    if (get && strcmp(c->path, "/v1/events") == 0)
        return list_events(s, c);
    if (get && strcmp(c->path, "/v1/balance_transactions") == 0)
        return list_balance(s, c);
    struct sim_form f = {0};
    if (post && c->body && *c->body && !sim_form_parse(c->body, &f)) {
        sim_form_free(&f);
        return stripe_error(c, 400, "parameter_invalid_string", "a form body");
    }
    int ret = -2;
    size_t n = strlen(c->path);
    if (post && strcmp(c->path, "/v1/payment_intents") == 0) {
        ret = create(s, c, &f);
    } else if (post && strcmp(c->path, "/v1/refunds") == 0) {
        ret = refund(s, c, &f);
    } else if (post && strncmp(c->path, pis, sizeof pis - 1) == 0 && n > sizeof pis + 7 &&
               strcmp(c->path + n - 7, "/cancel") == 0 && n - 7 - (sizeof pis - 1) <= PO_ID_MAX) {
        char id[PO_ID_MAX + 1];
        size_t len = n - 7 - (sizeof pis - 1);
        memcpy(id, c->path + sizeof pis - 1, len);
        id[len] = '\0';
        ret = po_id_valid(id, PO_ID_MAX) ? cancel(s, c, id)
                                         : stripe_error(c, 404, "resource_missing", "No such id");
    }
    sim_form_free(&f);
    if (ret == -2)
        return stripe_error(c, 404, NULL, "Unrecognized request URL");
    return ret;
}
