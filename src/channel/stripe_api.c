/*
 * stripe_api.c — calls to Stripe's API (v1) with the tenant's secret key
 * (Authorization: Bearer sk_…), as stripe-node 23.2.0 makes them:
 * Stripe-Version pinned to the API version it speaks (the shapes payonce
 * reads are that version's), parameters form-encoded exactly as its
 * encoder does (brackets plain, everything else but [A-Za-z0-9-_.~]
 * percent-encoded; arrays as name[0]=), GET parameters in the query string
 * the same way, and every POST with an Idempotency-Key that is the same on
 * every retry of the same operation:
 *   create  payonce-order-{tenant}-{out_trade_no}
 *   cancel  payonce-cancel-{tenant}-{pi}
 *   refund  payonce-refund-{tenant}-{out_refund_no}
 *
 * Read-after-write: Stripe documents its search as eventually consistent
 * (indexed within about a minute, later during an outage), so nothing is
 * decided from it. Where payonce holds a PaymentIntent's id — the create
 * answer's (channel_order_id), the webhook's (channel_txn_id), a suspense
 * payment's — the query, the close and the refund retrieve it by id
 * (GET /v1/payment_intents/{id}), which Stripe answers as it is now; the
 * search only discovers PaymentIntents payonce does not know of (made by
 * the tenant's own code), each then retrieved by id before anything is
 * decided about it. "Not found by search" decides nothing: a close with
 * no PaymentIntent known or found stays undecided (the order PAYING), a
 * refund without one stays pending.
 *
 * Stripe does not sign its answers (TLS is its authentication): an answer
 * counts when it is a 2xx JSON object of the expected kind. Its errors are
 * {"error":{"type","code","param","message"}}; what each means for each
 * operation is docs/channels.md "Error answers: Stripe". After a 429 (rate
 * limit, lock timeout) payonce backs off: no call for the tenant's account
 * until its Retry-After has passed (1 s without one), each operation in
 * that time undecided (rate_limited_backoff), nothing sent.
 */
#include "channel_int.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The version stripe-node 23.2.0 sends (its apiVersion.js). */
#define STRIPE_VERSION "2026-11-18.endive"
/* Bounds of a Retry-After payonce honours, s; and without one. */
#define BACKOFF_MAX_S 600
#define BACKOFF_DEFAULT_S 1
/* Tenants backing off at once, per process (the oldest entry is reused). */
#define BACKOFF_SLOTS 64
/* PaymentIntents of one order looked at (known ids and search finds). */
#define INTENTS_MAX 12

/* A member's text, "" when absent. */
static const char *field(json_t *o, const char *k)
{
    const char *v = po_json_str(o, k);
    return v ? v : "";
}

/* ---- backing off after a 429 ---- */

static pthread_mutex_t backoff_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char tenant[PO_ID_MAX + 1];
    int64_t until_ms;
} backoff[BACKOFF_SLOTS];

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether the tenant is backing off now. */
static bool held(const char *tenant)
{
    bool hold = false;
    int64_t now = now_ms();
    pthread_mutex_lock(&backoff_mu);
    for (int i = 0; i < BACKOFF_SLOTS && !hold; i++)
        hold = strcmp(backoff[i].tenant, tenant) == 0 && backoff[i].until_ms > now;
    pthread_mutex_unlock(&backoff_mu);
    return hold;
}

/* The tenant backs off for the answer's Retry-After (seconds, bounded;
 * BACKOFF_DEFAULT_S without one). */
static void hold_for(const char *tenant, const char *retry_after)
{
    int64_t s = BACKOFF_DEFAULT_S;
    if (retry_after[0] && po_parse_i64(retry_after, 0, BACKOFF_MAX_S, &s))
        s = BACKOFF_DEFAULT_S;
    int64_t until = now_ms() + s * 1000;
    pthread_mutex_lock(&backoff_mu);
    int slot = 0;
    for (int i = 0; i < BACKOFF_SLOTS; i++) {
        if (strcmp(backoff[i].tenant, tenant) == 0) {
            slot = i;
            break;
        }
        if (backoff[i].until_ms < backoff[slot].until_ms)
            slot = i;
    }
    PO_ASSERT(po_strcpy(backoff[slot].tenant, sizeof backoff[slot].tenant, tenant) == PO_OK);
    if (until > backoff[slot].until_ms || strcmp(backoff[slot].tenant, tenant) != 0)
        backoff[slot].until_ms = until;
    pthread_mutex_unlock(&backoff_mu);
}

/* ---- one call ---- */

/* name=value pairs, encoded as stripe-node's queryStringifyRequestData
 * does (its encodeURIComponent, then !'()* encoded and [ ] left plain):
 * "a&b" heap text, NULL when memory ran out. */
static char *encode(const char *const *k, const char *const *v, int n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t cap = 1;
    for (int i = 0; i < n; i++)
        cap += 3 * (strlen(k[i]) + strlen(v[i])) + 2;
    char *out = malloc(cap), *o = out;
    for (int i = 0; out && i < n; i++) {
        if (i)
            *o++ = '&';
        for (int part = 0; part < 2; part++) {
            for (const unsigned char *s = (const unsigned char *)(part ? v[i] : k[i]); *s; s++) {
                if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                    (*s >= '0' && *s <= '9') || strchr("-_.~[]", *s)) {
                    *o++ = (char)*s;
                } else {
                    *o++ = '%';
                    *o++ = hex[*s >> 4];
                    *o++ = hex[*s & 15];
                }
            }
            if (!part)
                *o++ = '=';
        }
    }
    if (out)
        *o = '\0';
    return out;
}

/* A Stripe call's parameters and its answer. */
struct call {
    bool post;
    const char *path;     /* /v1/…, ids already in it */
    const char *const *k; /* parameters: a POST's form, a GET's query */
    const char *const *v;
    int n;
    const char *idem; /* POST: the Idempotency-Key */
    size_t max;       /* PO_API_RESP_MAX or PO_API_LIST_MAX */
    /* the answer */
    json_t *j;                /* a 2xx JSON object (json_decref it), or NULL */
    long status;              /* 0: none */
    char why[PO_REASON_SIZE]; /* j NULL: Stripe's error code (idempotency_error,
                               * else HTTP_<status>, without one), no_answer,
                               * answer_over_<bound>, not_json, no_api_key,
                               * rate_limited_backoff */
};

/* Makes call c at a's API. Non-OK only for out-of-memory. */
static po_err stripe_call(const struct po_channel_account *a, struct call *c)
{
    c->j = NULL;
    c->status = 0;
    c->why[0] = '\0';
    const struct po_stripe_account *st = po_stripe_of(a);
    if (!st->api_key[0]) {
        (void)snprintf(c->why, sizeof c->why, "no_api_key");
        return PO_OK;
    }
    if (held(a->tenant)) {
        (void)snprintf(c->why, sizeof c->why, "rate_limited_backoff");
        return PO_OK;
    }
    char *params = encode(c->k, c->v, c->n);
    size_t ulen = strlen(a->api_base_url) + strlen(c->path) + (params ? strlen(params) : 0) + 2;
    char *url = params ? malloc(ulen) : NULL;
    struct po_api_resp *r = url ? calloc(1, sizeof *r) : NULL;
    char auth[PO_SECRET_MAX + 32], key[PO_ID_MAX * 2 + 48];
    po_err rc = r ? PO_OK : PO_ERR_NOMEM;
    if (!rc)
        (void)snprintf(url, ulen, "%s%s%s%s", a->api_base_url, c->path, !c->post && c->n ? "?" : "",
                       !c->post && c->n ? params : "");
    /* bounded inputs: the key (PO_SECRET_MAX), ids (PO_ID_MAX each) */
    PO_ASSERT(po_fmt(auth, sizeof auth, "Authorization: Bearer %s", st->api_key) == PO_OK);
    PO_ASSERT(!c->idem || po_fmt(key, sizeof key, "Idempotency-Key: %s", c->idem) == PO_OK);
    const char *h[] = {"Accept: application/json", "Stripe-Version: " STRIPE_VERSION, auth,
                       c->post ? "Content-Type: application/x-www-form-urlencoded" : NULL,
                       c->post && c->idem ? key : NULL};
    if (!rc)
        rc = po_api_request(url, h, 5, c->post ? params : NULL, c->max, r);
    po_secure_zero(auth, sizeof auth);
    free(params);
    free(url);
    if (rc) {
        free(r);
        return rc;
    }
    c->status = r->status;
    if (r->status == 429)
        hold_for(a->tenant, r->retry_after);
    json_t *j = NULL;
    if (r->status == 0) {
        po_api_why_none(r, c->why, sizeof c->why);
    } else if (po_json_parse(r->body, r->len, &j, NULL, 0) != PO_OK || !json_is_object(j)) {
        (void)snprintf(c->why, sizeof c->why, "HTTP_%ld_not_json", r->status);
    } else if (r->status < 200 || r->status >= 300) {
        /* the code; without one, idempotency_error is the type Stripe
         * says it with, anything else its status (HTTP_<status>) */
        json_t *e = json_object_get(j, "error");
        const char *code = po_json_str(e, "code"), *type = po_json_str(e, "type");
        po_channel_clean_code(code                                             ? code
                              : type && strcmp(type, "idempotency_error") == 0 ? type
                                                                               : NULL,
                              r->status, c->why, sizeof c->why);
    } else {
        c->j = json_incref(j);
    }
    json_decref(j);
    po_api_resp_release(r);
    free(r);
    return PO_OK;
}

/* Whether an error answer decides nothing: none came, Stripe was busy
 * (409 idempotency_key_in_use, 429 rate_limit or lock_timeout, 5xx
 * api_error), or the key was refused (401, 403: the tenant's
 * configuration, fixed without the request changing). Every other 4xx is
 * Stripe's answer to the request itself — idempotency_error too: the
 * key's first request ran with other parameters, and this one never will
 * (retried after the key expired, it would run a second time). */
static bool undecided(const struct call *c)
{
    return c->status == 0 || c->status == 401 || c->status == 403 || c->status == 409 ||
           c->status == 429 || c->status >= 500 || c->status < 400;
}

/* ---- PaymentIntents ---- */

/* Whether id is a Stripe id of this kind (prefix pi_, re_) that payonce
 * can put in a path: [A-Za-z0-9_], bounded. */
static bool stripe_id(const char *id, const char *prefix)
{
    return id && strncmp(id, prefix, strlen(prefix)) == 0 && po_id_valid(id, PO_TXN_ID_MAX) &&
           strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
               strlen(id);
}

static bool pi_id(const char *id)
{
    return stripe_id(id, "pi_");
}

/* GET /v1/payment_intents/{id}: as Stripe has it now. c->j the
 * PaymentIntent (its id checked), else NULL with c->why
 * (resource_missing: Stripe has no such PaymentIntent). */
static po_err retrieve(const struct po_channel_account *a, const char *id, struct call *c)
{
    char path[PO_TXN_ID_MAX + 32];
    PO_ASSERT(po_fmt(path, sizeof path, "/v1/payment_intents/%s", id) == PO_OK);
    *c = (struct call){.path = path, .max = PO_API_RESP_MAX};
    po_err rc = stripe_call(a, c);
    if (!rc && c->j &&
        (strcmp(field(c->j, "object"), "payment_intent") != 0 || strcmp(field(c->j, "id"), id))) {
        json_decref(c->j);
        c->j = NULL;
        (void)snprintf(c->why, sizeof c->why, "malformed_answer");
    }
    c->path = NULL;
    return rc;
}

/* The PaymentIntents payonce knows for an order (ids, at most 2, no
 * repeats): the payment's (a webhook's) first, then the create answer's. */
static int known(const char *txn, const char *order_id, const char *ids[INTENTS_MAX])
{
    int n = 0;
    if (pi_id(txn))
        ids[n++] = txn;
    if (pi_id(order_id) && !(n && strcmp(ids[0], order_id) == 0))
        ids[n++] = order_id;
    return n;
}

/* The order's PaymentIntents Stripe's search has indexed (GET
 * /v1/payment_intents/search?query=metadata['out_trade_no']:'NO';
 * out_trade_no is [A-Za-z0-9_-], nothing in it needs quoting in the query
 * language), added to ids (copies in store) after those there; a search
 * finds, it never decides. *root holds what ids point into (json_decref
 * it). c->why when there was no usable answer. */
static po_err discover(const struct po_channel_account *a, const char *out_trade_no,
                       const char *ids[INTENTS_MAX], int *n, json_t **root, struct call *c)
{
    char q[PO_ID_MAX + 40];
    PO_ASSERT(po_fmt(q, sizeof q, "metadata['out_trade_no']:'%s'", out_trade_no) == PO_OK);
    const char *k[] = {"query", "limit"}, *v[] = {q, "10"};
    *c = (struct call){
        .path = "/v1/payment_intents/search", .k = k, .v = v, .n = 2, .max = PO_API_LIST_MAX};
    po_err rc = stripe_call(a, c);
    *root = c->j;
    json_t *data = json_object_get(c->j, "data"), *pi;
    if (!rc && c->j && (strcmp(field(c->j, "object"), "search_result") || !json_is_array(data))) {
        (void)snprintf(c->why, sizeof c->why, "not_a_list");
        json_decref(c->j);
        *root = c->j = NULL;
        return PO_OK;
    }
    size_t i;
    json_array_foreach(data, i, pi)
    {
        const char *id = po_json_str(pi, "id");
        bool seen = !pi_id(id) || *n == INTENTS_MAX;
        for (int x = 0; x < *n && !seen; x++)
            seen = strcmp(ids[x], id) == 0;
        if (!seen)
            ids[(*n)++] = id;
    }
    c->k = c->v = NULL;
    return rc;
}

/* Whether PaymentIntent pi is for order no (its metadata.out_trade_no). */
static bool for_order(json_t *pi, const char *no)
{
    return strcmp(field(json_object_get(pi, "metadata"), "out_trade_no"), no) == 0;
}

/* What the PaymentIntents ids[from..n) of order no are now, each
 * retrieved by id (one Stripe does not have is skipped: nobody pays it):
 * the first succeeded one left in *paid (json_decref it), *processing
 * when one is; false with why when one could not be had or is another
 * order's. */
static po_err examine(const struct po_channel_account *a, const char *no, const char **ids,
                      int from, int n, json_t **paid, bool *processing, bool *ok, long *status,
                      char *why, size_t cap)
{
    *ok = true;
    for (int i = from; i < n && !*paid; i++) {
        struct call c;
        po_err rc = retrieve(a, ids[i], &c);
        if (rc)
            return rc;
        *status = c.status;
        if (!c.j && strcmp(c.why, "resource_missing") == 0)
            continue;
        if (!c.j || !for_order(c.j, no)) {
            (void)snprintf(why, cap, "%s", c.j ? "not_this_order" : c.why);
            json_decref(c.j);
            *ok = false;
            return PO_OK;
        }
        *processing = *processing || strcmp(field(c.j, "status"), "processing") == 0;
        if (strcmp(field(c.j, "status"), "succeeded") == 0)
            *paid = c.j;
        else
            json_decref(c.j);
    }
    return PO_OK;
}

/* ---- active query ---- */

/* The order's PaymentIntents, each retrieved by id: those payonce knows,
 * or — it knows none: an order whose PaymentIntents the tenant's own code
 * makes — those the search finds. A succeeded one is the payment: the
 * event its payment_intent.succeeded webhook would have made (the same
 * id: the same key). One still processing, or one that cannot be had,
 * leaves the answer undecided; else not paid as far as Stripe shows now
 * (the query round asks again while the order is PAYING; a payment of a
 * PaymentIntent made elsewhere for an order payonce created its own for
 * comes by its webhook or the events). */
po_err po_stripe_order_query(const struct po_channel_account *a, const struct po_order_ref *o,
                             struct po_query_answer *out)
{
    memset(out, 0, sizeof *out);
    out->state = PO_QUERY_FAILED;
    const char *ids[INTENTS_MAX];
    int n = known(o->channel_txn_id, o->channel_order_id, ids), nknown = n;
    json_t *paid = NULL, *found = NULL;
    bool processing = false, ok = true;
    po_err rc = examine(a, o->out_trade_no, ids, 0, n, &paid, &processing, &ok, &out->http_status,
                        out->why, sizeof out->why);
    if (!rc && ok && !paid && nknown == 0) {
        struct call c;
        rc = discover(a, o->out_trade_no, ids, &n, &found, &c);
        out->http_status = c.status;
        ok = found != NULL;
        if (!ok)
            (void)snprintf(out->why, sizeof out->why, "%s", c.why);
        if (!rc && ok)
            rc = examine(a, o->out_trade_no, ids, nknown, n, &paid, &processing, &ok,
                         &out->http_status, out->why, sizeof out->why);
    }
    if (!rc && paid) {
        json_t *amt = json_object_get(paid, "amount_received");
        po_query_paid(a, o->out_trade_no, field(paid, "id"),
                      json_is_integer(amt) ? json_integer_value(amt) : 0,
                      po_json_str(paid, "currency"), out);
    } else if (!rc && ok && processing) {
        (void)snprintf(out->why, sizeof out->why, "payment_intent_processing");
    } else if (!rc && ok) {
        out->state = PO_QUERY_NOT_PAID;
    }
    json_decref(paid);
    json_decref(found);
    return rc;
}

/* ---- close: cancel the order's PaymentIntents that can still be paid ---- */

/* POST /v1/payment_intents/{id}/cancel with its own Idempotency-Key (the
 * same on every try). *done when it is canceled now (or Stripe has no
 * such PaymentIntent); else why. A 400 payment_intent_unexpected_state
 * (it was paid, or canceled, meanwhile) is settled by retrieving it:
 * *paid when it succeeded. */
static po_err cancel(const struct po_channel_account *a, const char *id, bool *done, bool *paid,
                     long *status, char *why, size_t cap)
{
    char path[PO_TXN_ID_MAX + 40], idem[PO_ID_MAX + PO_TXN_ID_MAX + 24];
    PO_ASSERT(po_fmt(path, sizeof path, "/v1/payment_intents/%s/cancel", id) == PO_OK);
    PO_ASSERT(po_fmt(idem, sizeof idem, "payonce-cancel-%s-%s", a->tenant, id) == PO_OK);
    const char *k[] = {"cancellation_reason"}, *v[] = {"abandoned"};
    struct call c = {
        .post = true, .path = path, .k = k, .v = v, .n = 1, .idem = idem, .max = PO_API_RESP_MAX};
    po_err rc = stripe_call(a, &c);
    *status = c.status;
    *done = *paid = false;
    const char *st = field(c.j, "status");
    if (!rc && c.j && strcmp(field(c.j, "id"), id) == 0 && strcmp(st, "canceled") == 0)
        *done = true;
    else if (!rc && c.j)
        (void)snprintf(why, cap, "malformed_answer");
    else if (!rc && strcmp(c.why, "resource_missing") == 0)
        *done = true;
    else if (!rc && strcmp(c.why, "payment_intent_unexpected_state") == 0) {
        struct call r;
        rc = retrieve(a, id, &r);
        st = field(r.j, "status");
        *done = r.j && strcmp(st, "canceled") == 0;
        *paid = r.j && strcmp(st, "succeeded") == 0;
        (void)snprintf(why, cap, "%s", !r.j ? r.why : *paid ? "succeeded" : st);
        json_decref(r.j);
    } else if (!rc) {
        (void)snprintf(why, cap, "%s", c.why);
    }
    json_decref(c.j);
    return rc;
}

/* The order's PaymentIntents — those payonce knows and those the search
 * finds — each retrieved by id: one that succeeded is refused (the query
 * credits it), one canceled or unknown to Stripe is done, one still
 * processing leaves the close undecided, each other one is canceled. Only
 * when every one is settled is the order closed at Stripe. With none
 * known and none found, nothing is decided: a PaymentIntent made a moment
 * ago is not in the search yet, and closing would let it be paid after
 * the close. */
po_err po_stripe_order_close(const struct po_channel_account *a, const struct po_order_ref *o,
                             struct po_close_answer *out)
{
    memset(out, 0, sizeof *out);
    out->state = PO_CLOSE_FAILED;
    const char *ids[INTENTS_MAX];
    int n = known(o->channel_txn_id, o->channel_order_id, ids);
    json_t *found = NULL;
    struct call c;
    po_err rc = discover(a, o->out_trade_no, ids, &n, &found, &c);
    out->http_status = c.status;
    if (rc || !found) {
        (void)snprintf(out->why, sizeof out->why, "%s", c.why);
        return rc;
    }
    if (n == 0)
        (void)snprintf(out->why, sizeof out->why, "no_payment_intent_known");
    bool settled = n > 0;
    for (int i = 0; i < n && settled && !rc; i++) {
        if ((rc = retrieve(a, ids[i], &c)))
            break;
        out->http_status = c.status;
        const char *st = field(c.j, "status");
        bool done = !c.j && strcmp(c.why, "resource_missing") == 0, paid = false;
        if (done) {
            /* nothing there to pay */
        } else if (!c.j || !for_order(c.j, o->out_trade_no)) {
            (void)snprintf(out->why, sizeof out->why, "%s", c.j ? "not_this_order" : c.why);
            settled = false;
        } else if (strcmp(st, "succeeded") == 0) {
            paid = true;
        } else if (strcmp(st, "processing") == 0) {
            (void)snprintf(out->why, sizeof out->why, "payment_intent_processing");
            settled = false;
        } else if (strcmp(st, "canceled") != 0) {
            rc = cancel(a, ids[i], &done, &paid, &out->http_status, out->why, sizeof out->why);
            settled = done || paid;
        }
        json_decref(c.j);
        if (!rc && paid) {
            out->state = PO_CLOSE_REFUSED;
            (void)snprintf(out->why, sizeof out->why, "succeeded");
            json_decref(found);
            return PO_OK;
        }
    }
    if (!rc && settled) {
        out->state = PO_CLOSE_CLOSED;
        out->why[0] = '\0';
    }
    json_decref(found);
    return rc;
}

/* ---- refund submission: POST /v1/refunds ---- */

/* The PaymentIntent refunded: a suspense payment's (txn_id), else the
 * order's payment payonce holds (the webhook's channel_txn_id, the create
 * answer's channel_order_id), else one the search finds that Stripe, asked
 * by id, says succeeded. "" when there is none yet (why says so). */
static po_err refunded_intent(const struct po_channel_account *a, const struct po_refund_request *r,
                              char *pi, size_t cap, long *status, char *why, size_t wcap)
{
    const char *ids[INTENTS_MAX];
    pi[0] = '\0';
    if (r->txn_id && r->txn_id[0]) { /* a suspense payment: that one, only */
        if (pi_id(r->txn_id))
            PO_ASSERT(po_strcpy(pi, cap, r->txn_id) == PO_OK);
        else
            (void)snprintf(why, wcap, "malformed_txn_id");
        return PO_OK;
    }
    int n = known(r->channel_txn_id, r->channel_order_id, ids);
    if (n) {
        PO_ASSERT(po_strcpy(pi, cap, ids[0]) == PO_OK);
        return PO_OK;
    }
    json_t *found = NULL, *paid = NULL;
    bool processing = false, ok = false;
    struct call c;
    po_err rc = discover(a, r->out_trade_no, ids, &n, &found, &c);
    *status = c.status;
    po_errf(why, wcap, "%s", found ? "no_succeeded_payment_intent_found" : c.why);
    if (!rc && found)
        rc = examine(a, r->out_trade_no, ids, 0, n, &paid, &processing, &ok, status, why, wcap);
    if (!rc && paid)
        PO_ASSERT(po_strcpy(pi, cap, field(paid, "id")) == PO_OK);
    json_decref(paid);
    json_decref(found);
    return rc;
}

/* A refund of the order's PaymentIntent: payment_intent, amount and
 * metadata out_trade_no and out_refund_no (so that the refund.* webhooks
 * map back), with Stripe's Idempotency-Key payonce-refund-{tenant}-
 * {out_refund_no}: a resubmission after a lost answer is the same
 * refund. A Refund answered: submitted (its id kept). An error undecided()
 * says nothing about, or no PaymentIntent to refund yet: pending (tried
 * again later). Any other 4xx is Stripe refusing this refund for good
 * (charge_already_refunded, amount_too_large, resource_missing, …):
 * rejected. */
po_err po_stripe_refund_submit(const struct po_channel_account *a,
                               const struct po_refund_request *r, struct po_refund_answer *out)
{
    memset(out, 0, sizeof *out);
    out->decision = PO_REFUND_PENDING;
    char pi[PO_TXN_ID_MAX + 1];
    po_err rc =
        refunded_intent(a, r, pi, sizeof pi, &out->http_status, out->code, sizeof out->code);
    if (rc || !pi[0])
        return rc;
    char amount[24], idem[PO_ID_MAX * 2 + 24];
    (void)snprintf(amount, sizeof amount, "%lld", (long long)r->amount);
    PO_ASSERT(po_fmt(idem, sizeof idem, "payonce-refund-%s-%s", a->tenant, r->out_refund_no) ==
              PO_OK);
    const char *k[] = {"payment_intent", "amount", "metadata[out_trade_no]",
                       "metadata[out_refund_no]"};
    const char *v[] = {pi, amount, r->out_trade_no, r->out_refund_no};
    struct call c = {.post = true,
                     .path = "/v1/refunds",
                     .k = k,
                     .v = v,
                     .n = 4,
                     .idem = idem,
                     .max = PO_API_RESP_MAX};
    if ((rc = stripe_call(a, &c)))
        return rc;
    out->http_status = c.status;
    const char *id = field(c.j, "id");
    if (c.j && strcmp(field(c.j, "object"), "refund") == 0 && po_id_valid(id, PO_TXN_ID_MAX)) {
        out->decision = PO_REFUND_SUBMITTED;
        PO_ASSERT(po_strcpy(out->refund_id, sizeof out->refund_id, id) == PO_OK);
    } else {
        (void)snprintf(out->code, sizeof out->code, "%.40s", c.j ? "malformed_answer" : c.why);
        if (!c.j && !undecided(&c))
            out->decision = PO_REFUND_REJECTED;
    }
    json_decref(c.j);
    return PO_OK;
}

/* ---- refund query ---- */

/* The Refund's result: succeeded -> REFUND_SUCCESS, failed / canceled ->
 * REFUND_CLOSED (as its refund.* webhook), pending or requires_action ->
 * pending. */
static void refund_result(const struct po_channel_account *a, const struct po_refund_request *r,
                          json_t *re, struct po_refund_query_answer *out)
{
    const char *st = field(re, "status");
    if (strcmp(st, "pending") == 0 || strcmp(st, "requires_action") == 0) {
        out->state = PO_RQ_PENDING;
    } else if (strcmp(st, "succeeded") == 0 || strcmp(st, "failed") == 0 ||
               strcmp(st, "canceled") == 0) {
        json_t *amt = json_object_get(re, "amount");
        po_query_refund(
            a, strcmp(st, "succeeded") == 0 ? PO_EV_REFUND_SUCCESS : PO_EV_REFUND_CLOSED, r,
            po_json_str(re, "id"), NULL, json_is_integer(amt) ? json_integer_value(amt) : 0,
            po_json_str(re, "currency"), out);
    } else {
        (void)snprintf(out->why, sizeof out->why, "unknown_status");
    }
}

/* The refund retrieved by the id Stripe gave it (GET /v1/refunds/{id}),
 * when payonce has it; else found among its PaymentIntent's refunds
 * (GET /v1/refunds?payment_intent=, a list: read-after-write) by its
 * metadata.out_refund_no. Neither there: no such refund. */
po_err po_stripe_refund_query(const struct po_channel_account *a, const struct po_refund_request *r,
                              struct po_refund_query_answer *out)
{
    memset(out, 0, sizeof *out);
    out->state = PO_RQ_FAILED;
    bool by_id = stripe_id(r->channel_refund_id, "re_");
    char path[PO_TXN_ID_MAX + 24];
    const char *k[] = {"payment_intent", "limit"}, *v[] = {r->txn_id, "100"};
    struct call c = {.path = "/v1/refunds", .k = k, .v = v, .n = 2, .max = PO_API_LIST_MAX};
    if (by_id) {
        PO_ASSERT(po_fmt(path, sizeof path, "/v1/refunds/%s", r->channel_refund_id) == PO_OK);
        c = (struct call){.path = path, .max = PO_API_RESP_MAX};
    } else if (!pi_id(r->txn_id)) {
        (void)snprintf(out->why, sizeof out->why, "no_payment_intent");
        return PO_OK;
    }
    po_err rc = stripe_call(a, &c);
    if (rc)
        return rc;
    out->http_status = c.status;
    json_t *data = json_object_get(c.j, "data"), *re, *mine = NULL;
    size_t i;
    if (by_id)
        mine = strcmp(field(c.j, "object"), "refund") == 0 ? c.j : NULL;
    else
        json_array_foreach(data, i,
                           re) if (strcmp(field(json_object_get(re, "metadata"), "out_refund_no"),
                                          r->out_refund_no) == 0) mine = re;
    if (!c.j && by_id && strcmp(c.why, "resource_missing") == 0)
        out->state = PO_RQ_NOT_FOUND;
    else if (!c.j)
        (void)snprintf(out->why, sizeof out->why, "%s", c.why);
    else if (!by_id && (strcmp(field(c.j, "object"), "list") || !json_is_array(data)))
        (void)snprintf(out->why, sizeof out->why, "not_a_list");
    else if (!by_id && !mine)
        out->state = PO_RQ_NOT_FOUND;
    else if (!mine ||
             strcmp(field(json_object_get(mine, "metadata"), "out_refund_no"), r->out_refund_no))
        (void)snprintf(out->why, sizeof out->why, "%s",
                       mine ? "not_this_refund" : "malformed_answer");
    else
        refund_result(a, r, mine, out);
    json_decref(c.j);
    return PO_OK;
}

/* ---- creating the payment: POST /v1/payment_intents ---- */

/* A PaymentIntent for the order (amount in the currency's minor unit,
 * metadata.out_trade_no so its webhooks map back), with Stripe's
 * Idempotency-Key payonce-order-{tenant}-{out_trade_no}: a repeat is the
 * same PaymentIntent. The buyer's side needs its client_secret. A 4xx
 * Stripe answers to the request itself (a bad parameter, an amount out of
 * range, the key refused) refuses; the rest decides nothing. */
po_err po_stripe_pay_create(const struct po_channel_account *a, const struct po_pay_request *r,
                            struct po_pay_answer *out)
{
    memset(out, 0, sizeof *out);
    out->state = PO_PAY_FAILED;
    char amount[24], cur[4], idem[PO_ID_MAX * 2 + 16];
    (void)snprintf(amount, sizeof amount, "%lld", (long long)r->amount);
    for (int i = 0; i < 4; i++)
        cur[i] = (char)tolower((unsigned char)r->currency[i]);
    cur[3] = '\0';
    PO_ASSERT(po_fmt(idem, sizeof idem, "payonce-order-%s-%s", a->tenant, r->out_trade_no) ==
              PO_OK);
    const char *k[] = {"amount", "currency", "automatic_payment_methods[enabled]",
                       "metadata[out_trade_no]", "description"};
    const char *v[] = {amount, cur, "true", r->out_trade_no, r->description ? r->description : ""};
    struct call c = {.post = true,
                     .path = "/v1/payment_intents",
                     .k = k,
                     .v = v,
                     .n = v[4][0] ? 5 : 4,
                     .idem = idem,
                     .max = PO_API_RESP_MAX};
    po_err rc = stripe_call(a, &c);
    if (rc)
        return rc;
    out->http_status = c.status;
    json_t *j = c.j;
    const char *id = field(j, "id"), *secret = field(j, "client_secret");
    if (j && strcmp(field(j, "object"), "payment_intent") == 0 && for_order(j, r->out_trade_no) &&
        json_integer_value(json_object_get(j, "amount")) == r->amount && pi_id(id) && *secret &&
        strlen(secret) < 256) {
        if ((out->payment = json_pack("{s:s, s:s, s:s}", "payment_intent", id, "client_secret",
                                      secret, "status", field(j, "status")))) {
            out->state = PO_PAY_CREATED;
            PO_ASSERT(po_strcpy(out->channel_id, sizeof out->channel_id, id) == PO_OK);
        } else {
            rc = PO_ERR_NOMEM;
        }
    } else if (j) {
        (void)snprintf(out->why, sizeof out->why, "malformed_answer");
    } else {
        (void)snprintf(out->why, sizeof out->why, "%s", c.why);
        /* a key Stripe refuses makes nothing: refused, the tenant told */
        if (!undecided(&c) || c.status == 401 || c.status == 403)
            out->state = PO_PAY_REFUSED;
    }
    json_decref(j);
    return rc;
}

/* One page of a Stripe list (c, its path and parameters set): c->j the
 * answer (json_decref it), *data its array, *more its has_more; c->j NULL
 * with c->why when the page is not a list. Non-OK only for out-of-memory. */
static po_err list_page(const struct po_channel_account *a, struct call *c, json_t **data,
                        bool *more)
{
    po_err rc = stripe_call(a, c);
    if (rc)
        return rc;
    *data = json_object_get(c->j, "data");
    if (c->j && (strcmp(field(c->j, "object"), "list") != 0 || !json_is_array(*data))) {
        (void)snprintf(c->why, sizeof c->why, "not_a_list");
        json_decref(c->j);
        c->j = *data = NULL;
    }
    *more = json_is_true(json_object_get(c->j, "has_more"));
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
 * event recovered and its webhook arriving late are one. The lists are
 * read-after-write, unlike the search. */
po_err po_stripe_events_since(const struct po_channel_account *a, int64_t since, int page, int max,
                              struct po_event_walk *out)
{
    memset(out, 0, sizeof *out);
    out->r = calloc((size_t)max, sizeof *out->r);
    if (!out->r)
        return PO_ERR_NOMEM;
    char after[PO_TXN_ID_MAX + 1] = "", gte[24], limit[16];
    (void)snprintf(gte, sizeof gte, "%lld", (long long)since);
    (void)snprintf(limit, sizeof limit, "%d", page);
    bool more = true;
    po_err rc = PO_OK;
    while (!rc && more) {
        const char *k[] = {"created[gte]", "limit",    "types[0]",      "types[1]",
                           "types[2]",     "types[3]", "starting_after"};
        const char *v[] = {gte,
                           limit,
                           "payment_intent.succeeded",
                           "refund.created",
                           "refund.updated",
                           "charge.refund.updated",
                           after};
        struct call c = {
            .path = "/v1/events", .k = k, .v = v, .n = after[0] ? 7 : 6, .max = PO_API_LIST_MAX};
        json_t *data = NULL;
        rc = list_page(a, &c, &data, &more);
        out->http_status = c.status;
        if (rc || !c.j) {
            (void)snprintf(out->why, sizeof out->why, "%s", c.why);
            break;
        }
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
        json_decref(c.j);
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
    /* oldest first */
    for (int i = 0; i < out->n / 2; i++) {
        struct po_notify_result t = out->r[i];
        out->r[i] = out->r[out->n - 1 - i];
        out->r[out->n - 1 - i] = t;
    }
    return rc;
}

/* ---- the day's balance transactions: GET /v1/balance_transactions ---- */

/* The day (UTC, Stripe's) walked page by page (expand[0]=data.source, so
 * each charge names its PaymentIntent and each refund its metadata) into
 * one document, the bill po_stripe_bill_parse reads. A day without any is
 * NONE; a walk that is not whole decides nothing. */
po_err po_stripe_bill_fetch(const struct po_channel_account *a, const char *date,
                            struct po_bill_fetch *out)
{
    memset(out, 0, sizeof *out);
    out->state = PO_BILL_FAILED;
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (sscanf(date, "%4d-%2d-%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday) != 3) {
        (void)snprintf(out->why, sizeof out->why, "bad_date");
        return PO_OK;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    char from[24], to[24], after[PO_TXN_ID_MAX + 1] = "";
    (void)snprintf(from, sizeof from, "%lld", (long long)timegm(&tm));
    (void)snprintf(to, sizeof to, "%lld", (long long)timegm(&tm) + 86400);
    json_t *all = json_array();
    bool more = true, whole = false;
    po_err rc = all ? PO_OK : PO_ERR_NOMEM;
    for (int pages = 0; !rc && more && pages < 1000; pages++) {
        const char *k[] = {"created[gte]", "created[lt]", "limit", "expand[0]", "starting_after"};
        const char *v[] = {from, to, "100", "data.source", after};
        struct call c = {.path = "/v1/balance_transactions",
                         .k = k,
                         .v = v,
                         .n = after[0] ? 5 : 4,
                         .max = PO_API_LIST_MAX};
        json_t *data = NULL;
        rc = list_page(a, &c, &data, &more);
        out->http_status = c.status;
        if (rc || !c.j) {
            (void)snprintf(out->why, sizeof out->why, "%s", c.why);
            break;
        }
        size_t n = json_array_size(data);
        const char *last = n ? field(json_array_get(data, n - 1), "id") : "";
        if (json_array_extend(all, data) ||
            (more && (!n || po_strcpy(after, sizeof after, last) != PO_OK))) {
            json_decref(c.j);
            (void)snprintf(out->why, sizeof out->why, n ? "malformed_answer" : "empty_page");
            break;
        }
        json_decref(c.j);
        whole = !more;
    }
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
