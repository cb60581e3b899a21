/*
 * sim_stripe.c — the simulated Stripe API (v1), as strict as Stripe and
 * judged by stripe-node (tests/conformance/sdk/stripe.mjs):
 *
 *   POST /v1/payment_intents                 create
 *   GET  /v1/payment_intents/{id}            retrieve (read-after-write)
 *   GET  /v1/payment_intents/search          search (NOT read-after-write)
 *   POST /v1/payment_intents/{id}/cancel     cancel
 *   POST /v1/refunds, GET /v1/refunds/{id}, GET /v1/refunds
 *   GET  /v1/events, GET /v1/events/{id}
 *   GET  /v1/balance_transactions
 *
 * Every request needs `Authorization: Bearer` with the simulator's secret
 * key (stripe_api_key). Parameters are checked against the methods' Params
 * types of stripe-node (the table per route below): an unknown one is
 * Stripe's 400 parameter_unknown, a missing one parameter_missing, a bad
 * integer parameter_invalid_integer, an empty one parameter_invalid_empty —
 * each {"error":{"type","code","param","message","doc_url"}}. Answers are
 * the resources at real size: every member the official types declare
 * (stripe-node's .d.ts), nulls where Stripe has none.
 *
 * Idempotency as Stripe's v1: a POST with an Idempotency-Key whose method
 * began executing has its answer kept (idem.jsonl); the same key with the
 * same parameters replays it (Idempotent-Replayed: true), with other
 * parameters or at another endpoint is 400 idempotency_error, while the
 * first is still running 409 idempotency_key_in_use. Parameter errors are
 * not kept (the method never began), nor are DIR/faults' answers (they
 * stand for the rate limiter and the network, before the idempotency
 * layer).
 *
 * Search is eventually consistent, as Stripe documents: it sees the
 * PaymentIntents as they were search_lag_s ago (one created since is not
 * found, one canceled or paid since shows its old status), unless
 * DIR/search_indexed names the object (or `*`). Retrieve and the lists see
 * every change at once.
 *
 * State: intents.jsonl (one line per PaymentIntent change, with "at"; the
 * latest wins), payments.jsonl (a payment `sim pay --channel stripe` made:
 * its PaymentIntent, succeeded, and its Charge ch_<the same suffix>),
 * refunds.jsonl, idem.jsonl. Refund webhooks are not sent by themselves:
 * Stripe sends them to the endpoint configured in its dashboard, which the
 * simulator does not know (`payonce sim` builds them for tests).
 */
#include "sim_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The API version stripe-node 23.2.0 pins (its apiVersion.js): what the
 * simulated account's objects are rendered in. */
#define API_VERSION "2026-11-18.endive"
#define SIM_RETRY_AFTER_S "2"
#define T_MAX INT64_C(99999999999)

/* ---- answers ---- */

static const struct {
    const char *code, *type, *message;
} ERRORS[] = {
    {"rate_limit", "invalid_request_error",
     "Too many requests hit the API too quickly. We recommend an exponential backoff of your"
     " requests."},
    {"lock_timeout", "invalid_request_error",
     "This object cannot be accessed right now because another API request or Stripe process"
     " is currently accessing it. If you see this error intermittently, retry the request."},
    {"api_error", "api_error", "An unknown error occurred"},
    {"idempotency_key_in_use", "invalid_request_error",
     "There is currently another in-progress request using this Idempotent Key (that probably"
     " means you submitted twice, and the other request is still going through). Please try"
     " again later."},
    {"idempotency_error", "idempotency_error",
     "Keys for idempotent requests can only be used with the same parameters they were first"
     " used with. Try using a key other than the one you used if you meant to execute a"
     " different request."},
    {"payment_intent_unexpected_state", "invalid_request_error",
     "This PaymentIntent's status does not allow the requested action."},
    {"charge_already_refunded", "invalid_request_error", "This charge has already been refunded."},
    {"charge_disputed", "invalid_request_error",
     "This charge has been disputed and cannot be refunded."},
    {"resource_missing", "invalid_request_error", "No such object."},
    {"amount_too_large", "invalid_request_error",
     "The amount is greater than the maximum amount allowed."},
    {"amount_too_small", "invalid_request_error",
     "The amount is less than the minimum amount allowed."},
    {"api_key_expired", "invalid_request_error", "Expired API Key provided."},
    {"parameter_unknown", "invalid_request_error", "Received unknown parameter."},
    {"parameter_missing", "invalid_request_error", "Missing required param."},
    {"parameter_invalid_integer", "invalid_request_error", "Invalid integer."},
    {"parameter_invalid_empty", "invalid_request_error", "You passed an empty string."},
    {"card_declined", "card_error", "Your card was declined."},
};

/* Stripe's error body: type, code (NULL: none — api_error and
 * idempotency_error carry none), param (NULL: none), message; doc_url
 * with a code. A 429 says when to come back (Retry-After). Returns 0. */
static int fail(struct sim_call *c, unsigned status, const char *type, const char *code,
                const char *param, const char *fmt, ...) PO_PRINTF(6, 7);
static int fail(struct sim_call *c, unsigned status, const char *type, const char *code,
                const char *param, const char *fmt, ...)
{
    char msg[600], doc[120];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *e = json_pack("{s:s, s:s}", "type", type, "message", msg);
    if (e && code && strcmp(code, "api_error") != 0 && strcmp(code, "idempotency_error") != 0) {
        size_t n =
            (size_t)snprintf(doc, sizeof doc, "https://stripe.com/docs/error-codes/%s", code);
        for (size_t i = 37; i < n && i < sizeof doc; i++)
            doc[i] = doc[i] == '_' ? '-' : doc[i];
        json_object_set_new(e, "code", json_string(code));
        json_object_set_new(e, "doc_url", json_string(doc));
    }
    if (e && param)
        json_object_set_new(e, "param", json_string(param));
    if (status == 429)
        sim_reply_header(c, "Retry-After", SIM_RETRY_AFTER_S);
    return sim_reply_json(c, status, json_pack("{s:o}", "error", e));
}

int po_sim_stripe_error(struct sim_call *c, unsigned status, const char *code)
{
    if (!code || !*code)
        code = status == 429 ? "rate_limit" : status >= 500 ? "api_error" : NULL;
    for (size_t i = 0; code && i < sizeof ERRORS / sizeof ERRORS[0]; i++)
        if (strcmp(ERRORS[i].code, code) == 0)
            return fail(c, status, ERRORS[i].type, code, NULL, "%s", ERRORS[i].message);
    return fail(c, status, "invalid_request_error", code, NULL, "The request failed.");
}

/* A JSON answer (j consumed); Stripe's answers are not signed. */
static int reply(struct sim_call *c, unsigned status, json_t *j)
{
    sim_reply_json(c, status, j);
    c->wx_signed = false;
    return 0;
}

static int no_such(struct sim_call *c, const char *what, const char *id, const char *param)
{
    return fail(c, 404, "invalid_request_error", "resource_missing", param, "No such %s: '%s'",
                what, id);
}

/* ---- parameters, as the methods' Params types of stripe-node ---- */

/* kind: 's' string, 'i' integer, 'b' boolean, 'e' one of allowed
 * (comma-separated), 'm' metadata (a map of strings), 'l' a list of
 * strings (name[] or name[N]), 'r' an integer or a range
 * (name[gt|gte|lt|lte]), 'o' an object (its members allowed, "*" any). */
struct pspec {
    const char *name;
    char kind;
    const char *allowed;
    bool required;
};

#define PAGING                                                                                     \
    {"ending_before", 's', NULL, false}, {"limit", 'i', NULL, false},                              \
        {"starting_after", 's', NULL, false},                                                      \
    {                                                                                              \
        "expand", 'l', NULL, false                                                                 \
    }

static const struct pspec PI_CREATE[] = {
    {"amount", 'i', NULL, true},
    {"currency", 's', NULL, true},
    {"allowed_payment_method_types", 'l', NULL, false},
    {"amount_details", 'o', "*", false},
    {"application_fee_amount", 'i', NULL, false},
    {"automatic_payment_methods", 'o', "enabled,allow_redirects", false},
    {"capture_method", 'e', "automatic,automatic_async,manual", false},
    {"confirm", 'b', NULL, false},
    {"confirmation_method", 'e', "automatic,manual", false},
    {"confirmation_token", 's', NULL, false},
    {"customer", 's', NULL, false},
    {"customer_account", 's', NULL, false},
    {"description", 's', NULL, false},
    {"error_on_requires_action", 'b', NULL, false},
    {"excluded_payment_method_types", 'l', NULL, false},
    {"expand", 'l', NULL, false},
    {"hooks", 'o', "*", false},
    {"mandate", 's', NULL, false},
    {"mandate_data", 'o', "*", false},
    {"metadata", 'm', NULL, false},
    {"off_session", 's', NULL, false},
    {"on_behalf_of", 's', NULL, false},
    {"payment_details", 'o', "*", false},
    {"payment_method", 's', NULL, false},
    {"payment_method_configuration", 's', NULL, false},
    {"payment_method_data", 'o', "*", false},
    {"payment_method_options", 'o', "*", false},
    {"radar_options", 'o', "*", false},
    {"receipt_email", 's', NULL, false},
    {"return_url", 's', NULL, false},
    {"setup_future_usage", 'e', "off_session,on_session", false},
    {"shipping", 'o', "*", false},
    {"statement_descriptor", 's', NULL, false},
    {"statement_descriptor_suffix", 's', NULL, false},
    {"transfer_data", 'o', "*", false},
    {"transfer_group", 's', NULL, false},
    {"use_stripe_sdk", 'b', NULL, false},
};
static const struct pspec PI_RETRIEVE[] = {{"client_secret", 's', NULL, false},
                                           {"expand", 'l', NULL, false}};
static const struct pspec PI_SEARCH[] = {{"query", 's', NULL, true},
                                         {"expand", 'l', NULL, false},
                                         {"limit", 'i', NULL, false},
                                         {"page", 's', NULL, false}};
static const struct pspec PI_CANCEL[] = {
    {"cancellation_reason", 'e', "abandoned,duplicate,fraudulent,requested_by_customer", false},
    {"expand", 'l', NULL, false}};
static const struct pspec RE_CREATE[] = {
    {"amount", 'i', NULL, false},
    {"charge", 's', NULL, false},
    {"currency", 's', NULL, false},
    {"customer", 's', NULL, false},
    {"expand", 'l', NULL, false},
    {"instructions_email", 's', NULL, false},
    {"metadata", 'm', NULL, false},
    {"origin", 'e', "customer_balance", false},
    {"payment_intent", 's', NULL, false},
    {"reason", 'e', "duplicate,fraudulent,requested_by_customer", false},
    {"refund_application_fee", 'b', NULL, false},
    {"reverse_transfer", 'b', NULL, false},
};
static const struct pspec EXPAND_ONLY[] = {{"expand", 'l', NULL, false}};
static const struct pspec RE_LIST[] = {PAGING,
                                       {"charge", 's', NULL, false},
                                       {"created", 'r', NULL, false},
                                       {"payment_intent", 's', NULL, false}};
static const struct pspec EV_LIST[] = {PAGING,
                                       {"created", 'r', NULL, false},
                                       {"delivery_success", 'b', NULL, false},
                                       {"type", 's', NULL, false},
                                       {"types", 'l', NULL, false}};
static const struct pspec BT_LIST[] = {PAGING,
                                       {"created", 'r', NULL, false},
                                       {"currency", 's', NULL, false},
                                       {"payout", 's', NULL, false},
                                       {"source", 's', NULL, false},
                                       {"type", 's', NULL, false}};
#define SPEC(t) t, sizeof t / sizeof t[0]

/* The request's parameters, decoded: a form body (POST) or the query
 * string (GET), in order, repeated names kept. */
struct params {
    int n;
    bool full; /* more than fit: refused */
    char *k[64], *v[64];
};

static void params_free(struct params *p)
{
    for (int i = 0; i < p->n; i++) {
        free(p->k[i]);
        free(p->v[i]);
    }
    p->n = 0;
}

static void param_add(void *ctx, const char *k, const char *v)
{
    struct params *p = ctx;
    if (p->n == 64) {
        p->full = true;
        return;
    }
    p->k[p->n] = strdup(k);
    p->v[p->n] = strdup(v ? v : "");
    if (!p->k[p->n] || !p->v[p->n]) {
        free(p->k[p->n]);
        free(p->v[p->n]);
        p->full = true;
        return;
    }
    p->n++;
}

/* The first value of k, or NULL. */
static const char *param(const struct params *p, const char *k)
{
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->k[i], k) == 0)
            return p->v[i];
    return NULL;
}

/* The values of list name (name[] or name[N]) into vals; their count. */
static int param_list(const struct params *p, const char *name, const char **vals, int max)
{
    size_t len = strlen(name);
    int n = 0;
    for (int i = 0; i < p->n && n < max; i++)
        if (strncmp(p->k[i], name, len) == 0 && p->k[i][len] == '[')
            vals[n++] = p->v[i];
    return n;
}

/* The metadata[KEY]=VALUE pairs of p as an object. */
static json_t *metadata_of(const struct params *p)
{
    json_t *meta = json_object();
    for (int i = 0; i < p->n; i++)
        if (strncmp(p->k[i], "metadata[", 9) == 0) {
            char k[48];
            (void)snprintf(k, sizeof k, "%.*s", (int)strcspn(p->k[i] + 9, "]"), p->k[i] + 9);
            json_object_set_new(meta, k, json_string(p->v[i]));
        }
    return meta;
}

static bool integer(const char *v, int64_t *out)
{
    return v && *v && po_parse_i64(v, INT64_MIN + 1, INT64_MAX, out) == PO_OK;
}

static bool listed(const char *list, const char *v, size_t len)
{
    for (const char *p = list; p && *p;) {
        size_t n = strcspn(p, ",");
        if (n == len && strncmp(p, v, len) == 0)
            return true;
        p += n + (p[n] == ',');
    }
    return false;
}

/* One parameter against its spec: true when it is well-formed, else
 * Stripe's error for it answered (REFUSE) and false. */
#define REFUSE(code, ...)                                                                          \
    do {                                                                                           \
        fail(c, 400, "invalid_request_error", code, k, __VA_ARGS__);                               \
        return false;                                                                              \
    } while (0)
static bool check_one(struct sim_call *c, const char *k, const char *v, const struct pspec *sp)
{
    const char *sub = k + strlen(sp->name);
    size_t slen = strlen(sub);
    bool one_sub = slen > 2 && sub[0] == '[' && sub[slen - 1] == ']' && !strchr(sub + 1, '[');
    int64_t n = 0;
    switch (sp->kind) {
    case 's':
    case 'i':
    case 'e':
        if (*sub)
            break;
        if (!*v)
            REFUSE("parameter_invalid_empty",
                   "You passed an empty string for '%s'. We assume empty values are an attempt to"
                   " unset a parameter; however '%s' cannot be unset. You should remove '%s' from"
                   " your request or supply a non-empty value.",
                   k, k, k);
        if (sp->kind == 'i' && !integer(v, &n))
            REFUSE("parameter_invalid_integer", "Invalid integer: %.40s", v);
        if (sp->kind == 'e' && !listed(sp->allowed, v, strlen(v)))
            REFUSE(NULL, "Invalid %s: must be one of %s", k, sp->allowed);
        return true;
    case 'b':
        if (*sub)
            break;
        if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
            REFUSE(NULL, "Invalid boolean: %.40s", v);
        return true;
    case 'm':
        if (!one_sub || slen - 2 > 40 || strlen(v) > 500)
            REFUSE(NULL, "Invalid metadata: keys of at most 40 characters, values of at most 500"
                         " (metadata[key]=value)");
        return true;
    case 'l':
        if ((slen == 2 && strcmp(sub, "[]") == 0) ||
            (one_sub && strspn(sub + 1, "0123456789") == slen - 2))
            return true;
        break;
    case 'r':
        if (*sub && !(one_sub && (strcmp(sub, "[gt]") == 0 || strcmp(sub, "[gte]") == 0 ||
                                  strcmp(sub, "[lt]") == 0 || strcmp(sub, "[lte]") == 0)))
            break;
        if (!integer(v, &n))
            REFUSE("parameter_invalid_integer", "Invalid integer: %.40s", v);
        return true;
    case 'o':
        if (slen > 2 && sub[0] == '[' &&
            (strcmp(sp->allowed, "*") == 0 || listed(sp->allowed, sub + 1, strcspn(sub + 1, "]"))))
            return true;
        break;
    }
    REFUSE("parameter_unknown", "Received unknown parameter: %s", k);
}
#undef REFUSE

/* Every parameter against the route's table, then the required ones:
 * true when the request may go on; else Stripe's error was answered. */
static bool check_params(struct sim_call *c, const struct params *p, const struct pspec *spec,
                         size_t n)
{
    if (p->full) {
        fail(c, 400, "invalid_request_error", NULL, NULL, "Too many parameters.");
        return false;
    }
    for (int i = 0; i < p->n; i++) {
        size_t base = strcspn(p->k[i], "[");
        const struct pspec *sp = NULL;
        for (size_t j = 0; j < n && !sp; j++)
            if (strlen(spec[j].name) == base && strncmp(spec[j].name, p->k[i], base) == 0)
                sp = &spec[j];
        if (!sp) {
            fail(c, 400, "invalid_request_error", "parameter_unknown", p->k[i],
                 "Received unknown parameter: %s", p->k[i]);
            return false;
        }
        if (!check_one(c, p->k[i], p->v[i], sp))
            return false;
    }
    for (size_t j = 0; j < n; j++) {
        bool seen = false;
        size_t len = strlen(spec[j].name);
        for (int i = 0; i < p->n && !seen; i++)
            seen = strncmp(p->k[i], spec[j].name, len) == 0 &&
                   (p->k[i][len] == '\0' || p->k[i][len] == '[');
        if (spec[j].required && !seen) {
            fail(c, 400, "invalid_request_error", "parameter_missing", spec[j].name,
                 "Missing required param: %s.", spec[j].name);
            return false;
        }
    }
    int64_t limit = 10;
    const char *lim = param(p, "limit");
    if (lim && (!integer(lim, &limit) || limit < 1 || limit > 100)) {
        fail(c, 400, "invalid_request_error", NULL, "limit",
             "This value must be between 1 and 100 (it currently is '%.20s').", lim);
        return false;
    }
    return true;
}

/* The expansions asked for (expand[]), each one this route has
 * (allowed, comma-separated); else 400 and false. */
static bool check_expand(struct sim_call *c, const struct params *p, const char *allowed,
                         bool *asked)
{
    const char *ex[8];
    int n = param_list(p, "expand", ex, 8);
    *asked = false;
    for (int i = 0; i < n; i++) {
        if (!allowed || !listed(allowed, ex[i], strlen(ex[i]))) {
            fail(c, 400, "invalid_request_error", NULL, "expand",
                 "This property cannot be expanded (%.60s).", ex[i]);
            return false;
        }
        *asked = true;
    }
    return true;
}

/* ---- the records ---- */

/* "YYYY-MM-DD hh:mm:ss" Beijing time (the records' "time") -> Unix s. */
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

static void lower3(const char *cur, char out[4])
{
    memcpy(out, "usd", 4);
    for (int i = 0; cur && i < 3 && cur[i]; i++)
        out[i] = (char)tolower((unsigned char)cur[i]);
}

/* ids derived from a PaymentIntent's: its Charge, PaymentMethod and
 * balance transaction keep the suffix after "pi_". */
static void derived(const char *prefix, const char *id, char *out, size_t cap)
{
    const char *u = strchr(id, '_');
    if (po_fmt(out, cap, "%s%s", prefix, u ? u + 1 : id) != PO_OK)
        out[0] = '\0'; /* an id too long for any buffer: none derived */
}

/* Every PaymentIntent as it was at time t (Unix s), id -> record
 * {id, out_trade_no, amount, currency, status, created, client_secret,
 * metadata, description, automatic, canceled_at, cancellation_reason,
 * paid_at}: the intents created through the API (intents.jsonl, each
 * change a line with its time "at") and the payments `sim pay` made (a
 * PaymentIntent of its own when none was created). Under s->mu. */
static json_t *intents_at(struct po_sim_server *s, int64_t t)
{
    json_t *all = json_object(), *intents = sim_read_jsonl(s->dir, "intents.jsonl");
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl"), *p;
    size_t i;
    json_array_foreach(intents, i, p)
    {
        int64_t at =
            json_is_integer(json_object_get(p, "at")) ? sim_jint(p, "at") : sim_jint(p, "created");
        const char *id = sim_jstr(p, "id");
        if (!*id || at > t || sim_jint(p, "created") > t)
            continue;
        json_t *rec = json_object_get(all, id);
        if (rec)
            json_object_update(rec, p);
        else
            json_object_set(all, id, p);
    }
    json_array_foreach(payments, i, p)
    {
        int64_t paid = record_time(p);
        const char *id = sim_jstr(p, "txn");
        if (strcmp(sim_jstr(p, "channel"), "stripe") != 0 || !*id || paid > t)
            continue;
        json_t *rec = json_object_get(all, id);
        if (!rec) {
            char secret[PO_ID_MAX + 32];
            (void)snprintf(secret, sizeof secret, "%s_secret_sim", id);
            rec =
                json_pack("{s:s, s:s, s:I, s:s, s:I, s:s, s:{s:s}}", "id", id, "out_trade_no",
                          sim_jstr(p, "out_trade_no"), "amount", sim_jint(p, "amount"), "currency",
                          sim_jstr(p, "currency"), "created", (json_int_t)paid, "client_secret",
                          secret, "metadata", "out_trade_no", sim_jstr(p, "out_trade_no"));
            json_object_set_new(all, id, rec);
        }
        json_object_set_new(rec, "status", json_string("succeeded"));
        json_object_set_new(rec, "paid_at", json_integer(paid));
    }
    json_decref(intents);
    json_decref(payments);
    return all;
}

/* The Stripe refunds (refunds.jsonl), oldest first. Under s->mu. */
static json_t *stripe_refunds(struct po_sim_server *s)
{
    json_t *out = json_array(), *all = sim_read_jsonl(s->dir, "refunds.jsonl"), *r;
    size_t i;
    json_array_foreach(all, i, r) if (sim_refund_of(r, "stripe")) json_array_append(out, r);
    json_decref(all);
    return out;
}

static json_int_t refunded_of(json_t *refunds, const char *pi)
{
    json_int_t sum = 0;
    size_t i;
    json_t *r;
    json_array_foreach(refunds, i, r) if (strcmp(sim_jstr(r, "txn"), pi) == 0) sum +=
        sim_jint(r, "amount");
    return sum;
}

static int64_t refund_created(json_t *r)
{
    return json_is_integer(json_object_get(r, "created")) ? sim_jint(r, "created") : record_time(r);
}

/* ---- the resources at real size (stripe-node's .d.ts) ---- */

#define SET(o, k, v) json_object_set_new(o, k, v)

static json_t *str_or_null(const char *v)
{
    return v && *v ? json_string(v) : json_null();
}

static json_t *pi_json(json_t *rec)
{
    const char *id = sim_jstr(rec, "id"), *st = sim_jstr(rec, "status");
    bool paid = strcmp(st, "succeeded") == 0, canceled = strcmp(st, "canceled") == 0;
    char cur[4], ch[PO_TXN_ID_MAX + 8], pm[PO_TXN_ID_MAX + 8];
    lower3(sim_jstr(rec, "currency"), cur);
    derived("ch_", id, ch, sizeof ch);
    derived("pm_", id, pm, sizeof pm);
    json_t *meta = json_object_get(rec, "metadata");
    json_t *o = json_object();
    SET(o, "id", json_string(id));
    SET(o, "object", json_string("payment_intent"));
    SET(o, "allowed_payment_method_types", json_null());
    SET(o, "amount", json_integer(sim_jint(rec, "amount")));
    SET(o, "amount_capturable", json_integer(0));
    SET(o, "amount_details", json_pack("{s:{}}", "tip"));
    SET(o, "amount_received", json_integer(paid ? sim_jint(rec, "amount") : 0));
    SET(o, "application", json_null());
    SET(o, "application_fee_amount", json_null());
    SET(o, "automatic_payment_methods",
        json_is_true(json_object_get(rec, "automatic")) ? json_pack("{s:b}", "enabled", 1)
                                                        : json_null());
    SET(o, "canceled_at", canceled ? json_integer(sim_jint(rec, "canceled_at")) : json_null());
    SET(o, "cancellation_reason",
        canceled ? str_or_null(sim_jstr(rec, "cancellation_reason")) : json_null());
    SET(o, "capture_method", json_string("automatic_async"));
    SET(o, "client_secret", json_string(sim_jstr(rec, "client_secret")));
    SET(o, "confirmation_method", json_string("automatic"));
    SET(o, "created", json_integer(sim_jint(rec, "created")));
    SET(o, "currency", json_string(cur));
    SET(o, "customer", json_null());
    SET(o, "customer_account", json_null());
    SET(o, "description", str_or_null(sim_jstr(rec, "description")));
    SET(o, "excluded_payment_method_types", json_null());
    SET(o, "last_payment_error", json_null());
    SET(o, "latest_charge", paid ? json_string(ch) : json_null());
    SET(o, "livemode", json_false());
    SET(o, "managed_payments", json_null());
    SET(o, "metadata", json_is_object(meta) ? json_deep_copy(meta) : json_object());
    SET(o, "next_action", json_null());
    SET(o, "on_behalf_of", json_null());
    SET(o, "payment_method", paid ? json_string(pm) : json_null());
    SET(o, "payment_method_configuration_details", json_null());
    SET(o, "payment_method_options",
        json_pack("{s:{s:n, s:n, s:n, s:s}}", "card", "installments", "mandate_options", "network",
                  "request_three_d_secure", "automatic"));
    SET(o, "payment_method_types", json_pack("[s]", "card"));
    SET(o, "payment_record", json_null());
    SET(o, "processing", json_null());
    SET(o, "receipt_email", json_null());
    SET(o, "review", json_null());
    SET(o, "setup_future_usage", json_null());
    SET(o, "shipping", json_null());
    SET(o, "source", json_null());
    SET(o, "statement_descriptor", json_null());
    SET(o, "statement_descriptor_suffix", json_null());
    SET(o, "status", json_string(st));
    SET(o, "transfer_data", json_null());
    SET(o, "transfer_group", json_null());
    return o;
}

static json_t *address_null(void)
{
    return json_pack("{s:n, s:n, s:n, s:n, s:n, s:n}", "city", "country", "line1", "line2",
                     "postal_code", "state");
}

/* The Charge of a succeeded PaymentIntent (rec), refunded so far. */
static json_t *charge_json(json_t *rec, json_int_t refunded)
{
    const char *id = sim_jstr(rec, "id");
    char cur[4], ch[PO_TXN_ID_MAX + 8], pm[PO_TXN_ID_MAX + 8], txn[PO_TXN_ID_MAX + 8],
        receipt[PO_TXN_ID_MAX + 64];
    lower3(sim_jstr(rec, "currency"), cur);
    derived("ch_", id, ch, sizeof ch);
    derived("pm_", id, pm, sizeof pm);
    derived("txn_", id, txn, sizeof txn);
    (void)snprintf(receipt, sizeof receipt, "https://pay.stripe.com/receipts/payment/%s", ch);
    json_int_t amount = sim_jint(rec, "amount");
    json_t *meta = json_object_get(rec, "metadata");
    json_t *o = json_object();
    SET(o, "id", json_string(ch));
    SET(o, "object", json_string("charge"));
    SET(o, "amount", json_integer(amount));
    SET(o, "amount_captured", json_integer(amount));
    SET(o, "amount_refunded", json_integer(refunded));
    SET(o, "application", json_null());
    SET(o, "application_fee", json_null());
    SET(o, "application_fee_amount", json_null());
    SET(o, "balance_transaction", json_string(txn));
    SET(o, "billing_details",
        json_pack("{s:o, s:n, s:n, s:n, s:n}", "address", address_null(), "email", "name", "phone",
                  "tax_id"));
    SET(o, "calculated_statement_descriptor", json_string("PAYONCE SIM"));
    SET(o, "captured", json_true());
    SET(o, "created", json_integer(sim_jint(rec, "paid_at")));
    SET(o, "currency", json_string(cur));
    SET(o, "customer", json_null());
    SET(o, "description", str_or_null(sim_jstr(rec, "description")));
    SET(o, "disputed", json_false());
    SET(o, "failure_balance_transaction", json_null());
    SET(o, "failure_code", json_null());
    SET(o, "failure_message", json_null());
    SET(o, "fraud_details", json_object());
    SET(o, "livemode", json_false());
    SET(o, "metadata", json_is_object(meta) ? json_deep_copy(meta) : json_object());
    SET(o, "on_behalf_of", json_null());
    SET(o, "outcome",
        json_pack("{s:s, s:n, s:s, s:i, s:s, s:s}", "network_status", "approved_by_network",
                  "reason", "risk_level", "normal", "risk_score", 32, "seller_message",
                  "Payment complete.", "type", "authorized"));
    SET(o, "paid", json_true());
    SET(o, "payment_intent", json_string(id));
    SET(o, "payment_method", json_string(pm));
    SET(o, "payment_method_details",
        json_pack("{s:{s:n, s:s, s:{s:n, s:s, s:n}, s:s, s:n, s:i, s:i, s:n, s:s, s:s, s:n, "
                  "s:s, s:s, s:n, s:n}, s:s}",
                  "card", "amount_authorized", "brand", "visa", "checks", "address_line1_check",
                  "cvc_check", "pass", "address_postal_code_check", "country", "US", "description",
                  "exp_month", 12, "exp_year", 2034, "extended_authorization", "fingerprint",
                  "Xt5EWLLDS7FJjR1c", "funding", "credit", "installments", "last4", "4242",
                  "network", "visa", "three_d_secure", "wallet", "type", "card"));
    SET(o, "receipt_email", json_null());
    SET(o, "receipt_number", json_null());
    SET(o, "receipt_url", json_string(receipt));
    SET(o, "refunded", json_boolean(refunded >= amount));
    SET(o, "review", json_null());
    SET(o, "shipping", json_null());
    SET(o, "source", json_null());
    SET(o, "source_transfer", json_null());
    SET(o, "statement_descriptor", json_null());
    SET(o, "statement_descriptor_suffix", json_null());
    SET(o, "status", json_string("succeeded"));
    SET(o, "transfer_data", json_null());
    SET(o, "transfer_group", json_null());
    return o;
}

/* A refund record as Stripe's Refund (the simulator's all succeed). */
static json_t *refund_json(json_t *r)
{
    const char *pi = sim_jstr(r, "txn"), *id = sim_jstr(r, "refund_id");
    char cur[4], ch[PO_TXN_ID_MAX + 8], pm[PO_TXN_ID_MAX + 8], txn[PO_TXN_ID_MAX + 8];
    lower3(sim_jstr(r, "currency"), cur);
    derived("ch_", pi, ch, sizeof ch);
    derived("pm_", pi, pm, sizeof pm);
    derived("txn_", id, txn, sizeof txn);
    json_t *meta = json_object_get(r, "metadata");
    json_t *o = json_object();
    SET(o, "id", json_string(id));
    SET(o, "object", json_string("refund"));
    SET(o, "amount", json_integer(sim_jint(r, "amount")));
    SET(o, "application", json_null());
    SET(o, "balance_transaction", json_string(txn));
    SET(o, "charge", json_string(ch));
    SET(o, "created", json_integer(refund_created(r)));
    SET(o, "currency", json_string(cur));
    SET(o, "customer", json_null());
    SET(o, "customer_account", json_null());
    SET(o, "destination_details",
        json_pack("{s:{s:s, s:s, s:s, s:s}, s:s}", "card", "reference", "1234567890",
                  "reference_status", "available", "reference_type", "acquirer_reference_number",
                  "type", "refund", "type", "card"));
    SET(o, "metadata",
        json_is_object(meta) ? json_deep_copy(meta)
                             : json_pack("{s:s, s:s}", "out_trade_no", sim_jstr(r, "out_trade_no"),
                                         "out_refund_no", sim_jstr(r, "out_refund_no")));
    SET(o, "payment_intent", json_string(pi));
    SET(o, "payment_method", json_string(pm));
    SET(o, "reason", str_or_null(sim_jstr(r, "reason")));
    SET(o, "receipt_number", json_null());
    SET(o, "source_transfer_reversal", json_null());
    SET(o, "status", json_string("succeeded"));
    SET(o, "transfer_reversal", json_null());
    return o;
}

static json_t *bt_json(const char *id, json_int_t amount, json_int_t fee, int64_t created,
                       const char *cur, const char *type, const char *descr, json_t *source)
{
    int64_t available = created + 2 * 86400;
    json_t *o = json_object();
    SET(o, "id", json_string(id));
    SET(o, "object", json_string("balance_transaction"));
    SET(o, "amount", json_integer(amount));
    SET(o, "available_on", json_integer(available));
    SET(o, "balance_type", json_string("payments"));
    SET(o, "created", json_integer(created));
    SET(o, "currency", json_string(cur));
    SET(o, "description", json_string(descr));
    SET(o, "exchange_rate", json_null());
    SET(o, "fee", json_integer(fee));
    SET(o, "fee_details",
        fee ? json_pack("[{s:I, s:n, s:s, s:s, s:s}]", "amount", fee, "application", "currency",
                        cur, "description", "Stripe processing fees", "type", "stripe_fee")
            : json_array());
    SET(o, "net", json_integer(amount - fee));
    SET(o, "reporting_category", json_string(type));
    SET(o, "source", source);
    SET(o, "status", json_string((int64_t)time(NULL) >= available ? "available" : "pending"));
    SET(o, "type", json_string(type));
    return o;
}

void sim_stripe_event_id(const char *seed, const char *type, char *out, size_t cap)
{
    char h[65], msg[160];
    (void)snprintf(msg, sizeof msg, "%s|%s", seed, type);
    PO_ASSERT(po_sha256_hex(msg, strlen(msg), h) == PO_OK);
    (void)snprintf(out, cap, "evt_%.24s", h);
}

json_t *sim_stripe_event(const char *seed, const char *type, int64_t created, json_t *obj)
{
    char id[40];
    sim_stripe_event_id(seed, type, id, sizeof id);
    return json_pack("{s:s, s:s, s:s, s:I, s:{s:o}, s:b, s:i, s:{s:n, s:n}, s:s}", "id", id,
                     "object", "event", "api_version", API_VERSION, "created", (json_int_t)created,
                     "data", "object", obj, "livemode", 0, "pending_webhooks", 0, "request", "id",
                     "idempotency_key", "type", type);
}

json_t *sim_stripe_intent(const char *id, const char *out_trade_no, int64_t amount,
                          const char *currency, int64_t created)
{
    char secret[PO_TXN_ID_MAX + 32];
    (void)snprintf(secret, sizeof secret, "%s_secret_sim", id);
    json_t *rec =
        json_pack("{s:s, s:s, s:I, s:s, s:I, s:I, s:s, s:s, s:{s:s}}", "id", id, "out_trade_no",
                  out_trade_no, "amount", (json_int_t)amount, "currency", currency, "created",
                  (json_int_t)created, "paid_at", (json_int_t)created, "status", "succeeded",
                  "client_secret", secret, "metadata", "out_trade_no", out_trade_no);
    json_t *o = pi_json(rec);
    json_decref(rec);
    return o;
}

json_t *sim_stripe_refund(const char *refund_id, const char *pi, const char *out_trade_no,
                          const char *out_refund_no, int64_t amount, const char *currency,
                          int64_t created, const char *status)
{
    json_t *rec =
        json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:I}", "refund_id", refund_id, "txn", pi,
                  "out_trade_no", out_trade_no, "out_refund_no", out_refund_no, "amount",
                  (json_int_t)amount, "currency", currency, "created", (json_int_t)created);
    json_t *o = refund_json(rec);
    json_decref(rec);
    if (o && status)
        SET(o, "status", json_string(status));
    return o;
}

/* ---- lists ---- */

static int by_newest(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    json_int_t cx = sim_jint(x, "created"), cy = sim_jint(y, "created");
    if (cx != cy)
        return cx < cy ? 1 : -1;
    return -strcmp(sim_jstr(x, "id"), sim_jstr(y, "id"));
}

/* The created filter of p (created=T or created[gt|gte|lt|lte]=T) as
 * [from, to]; checked already. */
static void created_range(const struct params *p, int64_t *from, int64_t *to)
{
    int64_t v = 0;
    *from = 0;
    *to = T_MAX;
    if (integer(param(p, "created"), &v))
        *from = *to = v;
    if (integer(param(p, "created[gte]"), &v))
        *from = v;
    if (integer(param(p, "created[gt]"), &v))
        *from = v + 1;
    if (integer(param(p, "created[lte]"), &v))
        *to = v;
    if (integer(param(p, "created[lt]"), &v))
        *to = v - 1;
}

/* One page of a Stripe list: all (an array, consumed) sorted newest
 * first, limit of them after starting_after (or before ending_before),
 * with has_more. An unknown cursor is Stripe's resource_missing. */
static int reply_page(struct sim_call *c, json_t *all, const struct params *p, const char *url,
                      const char *what)
{
    size_t n = json_array_size(all), from = 0, to;
    json_t **v = calloc(n + 1, sizeof *v);
    if (!v) {
        json_decref(all);
        return po_sim_stripe_error(c, 500, NULL);
    }
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(all, i);
    qsort(v, n, sizeof *v, by_newest);
    int64_t limit = 10;
    (void)integer(param(p, "limit"), &limit);
    const char *after = param(p, "starting_after"), *before = param(p, "ending_before");
    const char *cursor = after ? after : before;
    size_t at = n;
    for (size_t i = 0; cursor && i < n; i++)
        if (strcmp(sim_jstr(v[i], "id"), cursor) == 0)
            at = i;
    if (cursor && at == n) {
        free(v);
        json_decref(all);
        return no_such(c, what, cursor, after ? "starting_after" : "ending_before");
    }
    if (after) {
        from = at + 1;
        to = from + (size_t)limit < n ? from + (size_t)limit : n;
    } else if (before) {
        to = at;
        from = to > (size_t)limit ? to - (size_t)limit : 0;
    } else {
        to = (size_t)limit < n ? (size_t)limit : n;
    }
    json_t *data = json_array();
    for (size_t k = from; k < to; k++)
        json_array_append(data, v[k]);
    bool more = before ? from > 0 : to < n;
    free(v);
    json_decref(all);
    return reply(c, 200,
                 json_pack("{s:s, s:o, s:b, s:s}", "object", "list", "data", data, "has_more", more,
                           "url", url));
}

/* ---- PaymentIntents ---- */

/* Whether DIR/search_indexed says the object is indexed now. */
static bool indexed(struct po_sim_server *s, const char *id)
{
    return sim_listed(s, "search_indexed", "*") || sim_listed(s, "search_indexed", id);
}

/* GET /v1/payment_intents/search?query=metadata['KEY']:'VALUE' — the
 * PaymentIntents whose metadata KEY is VALUE, as the index has them
 * (search_lag_s behind, unless DIR/search_indexed names them), newest
 * first, one page (has_more false, next_page null). */
static int search(struct po_sim_server *s, struct sim_call *c, const struct params *p)
{
    bool expand = false;
    if (!check_params(c, p, SPEC(PI_SEARCH)) || !check_expand(c, p, NULL, &expand))
        return 0;
    const char *q = param(p, "query");
    char key[64], val[PO_ID_MAX + 1];
    int used = 0;
    if (sscanf(q, "metadata['%63[^']']:'%64[^']'%n", key, val, &used) != 2 || q[used] != '\0')
        return fail(c, 400, "invalid_request_error", NULL, "query",
                    "The search query is not valid: %.100s (this simulator reads"
                    " metadata['key']:'value')",
                    q);
    int64_t now = (int64_t)time(NULL);
    pthread_mutex_lock(&s->mu);
    json_t *cur = intents_at(s, now), *old = intents_at(s, now - s->search_lag_s),
           *all = json_array();
    const char *id;
    json_t *rec;
    json_object_foreach(cur, id, rec)
    {
        json_t *seen = indexed(s, id) ? rec : json_object_get(old, id);
        if (seen && strcmp(sim_jstr(json_object_get(seen, "metadata"), key), val) == 0)
            json_array_append_new(all, pi_json(seen));
    }
    pthread_mutex_unlock(&s->mu);
    json_decref(cur);
    json_decref(old);
    size_t n = json_array_size(all);
    json_t **v = calloc(n + 1, sizeof *v), *data = json_array();
    for (size_t i = 0; v && i < n; i++)
        v[i] = json_array_get(all, i);
    if (v)
        qsort(v, n, sizeof *v, by_newest);
    int64_t limit = 10;
    (void)integer(param(p, "limit"), &limit);
    for (size_t i = 0; v && i < n && i < (size_t)limit; i++)
        json_array_append(data, v[i]);
    free(v);
    json_decref(all);
    return reply(c, 200,
                 json_pack("{s:s, s:o, s:b, s:n, s:s}", "object", "search_result", "data", data,
                           "has_more", n > (size_t)limit, "next_page", "url",
                           "/v1/payment_intents/search"));
}

/* The PaymentIntent id as it is now (json_decref it), or NULL. */
static json_t *intent_now(struct po_sim_server *s, const char *id)
{
    pthread_mutex_lock(&s->mu);
    json_t *all = intents_at(s, (int64_t)time(NULL));
    json_t *rec = json_incref(json_object_get(all, id));
    pthread_mutex_unlock(&s->mu);
    json_decref(all);
    return rec;
}

/* The PaymentIntent, latest_charge expanded when asked. */
static json_t *pi_answer(struct po_sim_server *s, json_t *rec, bool expand)
{
    json_t *o = pi_json(rec);
    if (expand && strcmp(sim_jstr(rec, "status"), "succeeded") == 0) {
        pthread_mutex_lock(&s->mu);
        json_t *refunds = stripe_refunds(s);
        pthread_mutex_unlock(&s->mu);
        SET(o, "latest_charge", charge_json(rec, refunded_of(refunds, sim_jstr(rec, "id"))));
        json_decref(refunds);
    }
    return o;
}

/* GET /v1/payment_intents/{id}: as it is now (read-after-write). */
static int retrieve(struct po_sim_server *s, struct sim_call *c, const char *id,
                    const struct params *p)
{
    bool expand = false;
    if (!check_params(c, p, SPEC(PI_RETRIEVE)) || !check_expand(c, p, "latest_charge", &expand))
        return 0;
    json_t *rec = intent_now(s, id);
    if (!rec)
        return no_such(c, "payment_intent", id, "intent");
    int ret = reply(c, 200, pi_answer(s, rec, expand));
    json_decref(rec);
    return ret;
}

/* POST /v1/payment_intents: amount (at least 50 cents in USD, at most
 * eight digits), currency, metadata (all kept), description,
 * automatic_payment_methods[enabled]: a PaymentIntent
 * requires_payment_method with its client_secret (intents.jsonl). It is
 * paid by `sim pay --created` (Stripe.js's confirm, the buyer's side). */
static int create(struct po_sim_server *s, struct sim_call *c, const struct params *p)
{
    bool expand = false;
    if (!check_expand(c, p, "latest_charge", &expand))
        return 0;
    int64_t amount = 0;
    const char *cur = param(p, "currency");
    (void)integer(param(p, "amount"), &amount);
    if (strlen(cur) != 3 || !isalpha((unsigned char)cur[0]) || !isalpha((unsigned char)cur[1]) ||
        !isalpha((unsigned char)cur[2]))
        return fail(c, 400, "invalid_request_error", NULL, "currency", "Invalid currency: %.20s.",
                    cur);
    char low[4];
    lower3(cur, low);
    if (amount < (strcmp(low, "usd") == 0 ? 50 : 1))
        return fail(c, 400, "invalid_request_error", "amount_too_small", "amount",
                    "Amount must be at least 50 cents");
    if (amount > 99999999)
        return fail(c, 400, "invalid_request_error", "amount_too_large", "amount",
                    "Amount must be no more than 99999999 (999,999.99 in a two-decimal currency)");
    json_t *clean = metadata_of(p);
    char id[40], secret[80], upper[4];
    for (int i = 0; i < 4; i++)
        upper[i] = (char)toupper((unsigned char)low[i]);
    sim_new_id("pi_", id, sizeof id);
    sim_new_id("_secret_", secret, sizeof secret);
    memmove(secret + strlen(id), secret, strlen(secret) + 1);
    memcpy(secret, id, strlen(id));
    const char *idem = c->header(c->ctx, "Idempotency-Key"), *desc = param(p, "description");
    int64_t now = (int64_t)time(NULL);
    json_t *rec = json_pack(
        "{s:s, s:s, s:I, s:s, s:s, s:s, s:I, s:I, s:o, s:s, s:b, s:s}", "id", id, "out_trade_no",
        sim_jstr(clean, "out_trade_no"), "amount", (json_int_t)amount, "currency", upper, "status",
        "requires_payment_method", "client_secret", secret, "created", (json_int_t)now, "at",
        (json_int_t)now, "metadata", clean, "description", desc ? desc : "", "automatic",
        param(p, "automatic_payment_methods[enabled]") &&
            strcmp(param(p, "automatic_payment_methods[enabled]"), "true") == 0,
        "idem", idem ? idem : "");
    pthread_mutex_lock(&s->mu);
    sim_append_jsonl(s->dir, "intents.jsonl", rec);
    pthread_mutex_unlock(&s->mu);
    int ret = reply(c, 200, pi_answer(s, rec, expand));
    json_decref(rec);
    return ret;
}

/* POST /v1/payment_intents/{id}/cancel: one that can still be paid
 * becomes canceled (the close kept in closed.jsonl); a succeeded or
 * canceled one is 400 payment_intent_unexpected_state with the
 * PaymentIntent in the error, as Stripe's. */
static int cancel(struct po_sim_server *s, struct sim_call *c, const char *id,
                  const struct params *p)
{
    bool expand = false;
    if (!check_expand(c, p, "latest_charge", &expand))
        return 0;
    const char *why = param(p, "cancellation_reason");
    int64_t now = (int64_t)time(NULL);
    pthread_mutex_lock(&s->mu);
    json_t *all = intents_at(s, now), *rec = json_incref(json_object_get(all, id));
    const char *st = sim_jstr(rec, "status");
    bool open = rec && strcmp(st, "succeeded") != 0 && strcmp(st, "canceled") != 0;
    if (open) {
        json_t *line = json_pack("{s:s, s:s, s:I, s:I, s:s}", "id", id, "status", "canceled", "at",
                                 (json_int_t)now, "canceled_at", (json_int_t)now,
                                 "cancellation_reason", why ? why : "");
        sim_append_jsonl(s->dir, "intents.jsonl", line);
        json_object_update(rec, line);
        json_decref(line);
        sim_record_close(s, "stripe", sim_jstr(rec, "out_trade_no"));
    }
    pthread_mutex_unlock(&s->mu);
    json_decref(all);
    int ret;
    if (!rec) {
        ret = no_such(c, "payment_intent", id, "intent");
    } else if (open) {
        ret = reply(c, 200, pi_answer(s, rec, expand));
    } else {
        fail(c, 400, "invalid_request_error", "payment_intent_unexpected_state", NULL,
             "You cannot cancel this PaymentIntent because it has a status of %s. Only a"
             " PaymentIntent with one of the following statuses may be canceled:"
             " requires_payment_method, requires_capture, requires_confirmation,"
             " requires_action, processing.",
             st);
        json_t *body = NULL;
        if (c->body_out && !(body = json_loads(c->body_out, 0, NULL)))
            return 0;
        json_object_set_new(json_object_get(body, "error"), "payment_intent", pi_json(rec));
        ret = reply(c, 400, body);
    }
    json_decref(rec);
    return ret;
}

/* ---- refunds ---- */

/* POST /v1/refunds: payment_intent (or its charge ch_…), amount (the rest
 * of the payment when absent), metadata (kept whole; out_trade_no and
 * out_refund_no, when given, are what payonce's webhooks map by), reason.
 * Refunds succeed at once. A PaymentIntent Stripe does not have is 400
 * resource_missing; one not paid payment_intent_unexpected_state; a
 * payment refunded whole charge_already_refunded; more than is left
 * amount_too_large. */
static int refund(struct po_sim_server *s, struct sim_call *c, const struct params *p)
{
    bool expand = false;
    if (!check_expand(c, p, NULL, &expand))
        return 0;
    const char *pi_p = param(p, "payment_intent"), *ch = param(p, "charge");
    if (!pi_p == !ch)
        return fail(c, 400, "invalid_request_error", "parameter_missing",
                    pi_p ? "charge" : "payment_intent",
                    "One of the following params should be provided for this request:"
                    " payment_intent or charge.");
    char pi[PO_TXN_ID_MAX + 8];
    if (ch && strncmp(ch, "ch_", 3) == 0)
        derived("pi_", ch, pi, sizeof pi);
    else
        (void)snprintf(pi, sizeof pi, "%s", pi_p ? pi_p : ch);
    int64_t want = -1;
    (void)integer(param(p, "amount"), &want);
    int64_t now = (int64_t)time(NULL);
    pthread_mutex_lock(&s->mu);
    json_t *all = intents_at(s, now), *rec = json_object_get(all, pi);
    json_t *refunds = stripe_refunds(s), *made = NULL;
    json_int_t total = sim_jint(rec, "amount"), left = total - refunded_of(refunds, pi);
    const char *code = NULL;
    if (!rec)
        code = "resource_missing";
    else if (strcmp(sim_jstr(rec, "status"), "succeeded") != 0)
        code = "payment_intent_unexpected_state";
    else if (left <= 0)
        code = "charge_already_refunded";
    else if (want == 0 || want < -1)
        code = "amount_too_small";
    else if (want > left)
        code = "amount_too_large";
    if (!code) {
        char id[40], when[32], cur[4];
        sim_new_id("re_", id, sizeof id);
        sim_beijing_now(when, sizeof when);
        lower3(sim_jstr(rec, "currency"), cur);
        json_t *meta = metadata_of(p);
        const char *reason = param(p, "reason"), *idem = c->header(c->ctx, "Idempotency-Key");
        made = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:I, s:s, s:O, s:s, s:s}",
                         "channel", "stripe", "out_trade_no", sim_jstr(rec, "out_trade_no"), "txn",
                         pi, "out_refund_no", sim_jstr(meta, "out_refund_no"), "refund_id", id,
                         "amount", (json_int_t)(want < 0 ? left : want), "total", total, "time",
                         when, "created", (json_int_t)now, "currency", cur, "metadata", meta,
                         "reason", reason ? reason : "", "idem", idem ? idem : "");
        json_decref(meta);
        sim_append_jsonl(s->dir, "refunds.jsonl", made);
    }
    char ch_id[PO_TXN_ID_MAX + 8];
    derived("ch_", pi, ch_id, sizeof ch_id);
    pthread_mutex_unlock(&s->mu);
    json_decref(all);
    json_decref(refunds);
    if (made) {
        int ret = reply(c, 200, refund_json(made));
        json_decref(made);
        return ret;
    }
    if (strcmp(code, "resource_missing") == 0)
        return fail(c, 400, "invalid_request_error", code, pi_p ? "payment_intent" : "charge",
                    "No such %s: '%s'", pi_p ? "payment_intent" : "charge", pi_p ? pi : ch);
    if (strcmp(code, "payment_intent_unexpected_state") == 0)
        return fail(c, 400, "invalid_request_error", code, "payment_intent",
                    "This PaymentIntent (%s) does not have a successful charge to refund.", pi);
    if (strcmp(code, "charge_already_refunded") == 0)
        return fail(c, 400, "invalid_request_error", code, NULL,
                    "Charge %s has already been refunded.", ch_id);
    if (strcmp(code, "amount_too_small") == 0)
        return fail(c, 400, "invalid_request_error", code, "amount",
                    "Refund amount must be positive.");
    return fail(c, 400, "invalid_request_error", code, "amount",
                "Refund amount (%lld) is greater than unrefunded amount on charge (%lld)",
                (long long)want, (long long)left);
}

static int refund_get(struct po_sim_server *s, struct sim_call *c, const char *id,
                      const struct params *p)
{
    bool expand = false;
    if (!check_params(c, p, SPEC(EXPAND_ONLY)) || !check_expand(c, p, NULL, &expand))
        return 0;
    pthread_mutex_lock(&s->mu);
    json_t *refunds = stripe_refunds(s), *r, *hit = NULL;
    size_t i;
    json_array_foreach(refunds, i, r) if (strcmp(sim_jstr(r, "refund_id"), id) == 0) hit = r;
    json_t *o = hit ? refund_json(hit) : NULL;
    pthread_mutex_unlock(&s->mu);
    json_decref(refunds);
    return o ? reply(c, 200, o) : no_such(c, "refund", id, "id");
}

/* GET /v1/refunds[?payment_intent=|charge=][&created…]: newest first. */
static int refund_list(struct po_sim_server *s, struct sim_call *c, const struct params *p)
{
    bool expand = false;
    if (!check_params(c, p, SPEC(RE_LIST)) || !check_expand(c, p, NULL, &expand))
        return 0;
    const char *pi = param(p, "payment_intent"), *ch = param(p, "charge");
    int64_t from, to;
    created_range(p, &from, &to);
    pthread_mutex_lock(&s->mu);
    json_t *refunds = stripe_refunds(s), *r, *all = json_array();
    size_t i;
    json_array_foreach(refunds, i, r)
    {
        char rch[PO_TXN_ID_MAX + 8];
        derived("ch_", sim_jstr(r, "txn"), rch, sizeof rch);
        int64_t t = refund_created(r);
        if ((!pi || strcmp(sim_jstr(r, "txn"), pi) == 0) && (!ch || strcmp(rch, ch) == 0) &&
            t >= from && t <= to)
            json_array_append_new(all, refund_json(r));
    }
    pthread_mutex_unlock(&s->mu);
    json_decref(refunds);
    return reply_page(c, all, p, "/v1/refunds", "refund");
}

/* ---- events ---- */

/* Every event of the simulated account, oldest first: a PaymentIntent's
 * creation (payment_intent.created), its payment
 * (payment_intent.succeeded), its cancel (payment_intent.canceled), a
 * refund's creation (refund.created) and its Charge refunded
 * (charge.refunded); ids stable (the webhooks' own: the object's id and
 * the type, hashed). Under s->mu. */
static json_t *all_events(struct po_sim_server *s)
{
    int64_t now = (int64_t)time(NULL);
    json_t *out = json_array(), *all = intents_at(s, now), *refunds = stripe_refunds(s);
    json_t *lines = sim_read_jsonl(s->dir, "intents.jsonl"), *rec, *r;
    const char *id;
    json_object_foreach(all, id, rec)
    {
        bool api = false;
        size_t i;
        json_t *l;
        json_array_foreach(lines, i, l) api = api || strcmp(sim_jstr(l, "id"), id) == 0;
        json_t *made = json_deep_copy(rec);
        SET(made, "status", json_string("requires_payment_method"));
        if (api)
            json_array_append_new(out, sim_stripe_event(id, "payment_intent.created",
                                                        sim_jint(rec, "created"), pi_json(made)));
        json_decref(made);
        const char *st = sim_jstr(rec, "status");
        if (strcmp(st, "succeeded") == 0)
            json_array_append_new(out, sim_stripe_event(id, "payment_intent.succeeded",
                                                        sim_jint(rec, "paid_at"), pi_json(rec)));
        if (strcmp(st, "canceled") == 0)
            json_array_append_new(out,
                                  sim_stripe_event(id, "payment_intent.canceled",
                                                   sim_jint(rec, "canceled_at"), pi_json(rec)));
    }
    size_t i;
    json_array_foreach(refunds, i, r)
    {
        const char *rid = sim_jstr(r, "refund_id");
        json_t *pay = json_object_get(all, sim_jstr(r, "txn"));
        json_array_append_new(
            out, sim_stripe_event(rid, "refund.created", refund_created(r), refund_json(r)));
        if (pay)
            json_array_append_new(
                out, sim_stripe_event(rid, "charge.refunded", refund_created(r),
                                      charge_json(pay, refunded_of(refunds, sim_jstr(r, "txn")))));
    }
    json_decref(all);
    json_decref(refunds);
    json_decref(lines);
    return out;
}

/* Whether type matches the filter: exact, or "prefix.*". */
static bool type_is(const char *type, const char *want)
{
    size_t n = strlen(want);
    if (n > 2 && strcmp(want + n - 2, ".*") == 0)
        return strncmp(type, want, n - 1) == 0;
    return strcmp(type, want) == 0;
}

/* GET /v1/events?created[gte]=T&limit=N&starting_after=evt_…&type= or
 * types[]= (at most 20; not both): newest first, paged with has_more. */
static int list_events(struct po_sim_server *s, struct sim_call *c, const struct params *p)
{
    bool expand = false;
    if (!check_params(c, p, SPEC(EV_LIST)) || !check_expand(c, p, NULL, &expand))
        return 0;
    const char *types[21], *type = param(p, "type");
    int nt = param_list(p, "types", types, 21);
    if (type && nt)
        return fail(c, 400, "invalid_request_error", NULL, "types",
                    "You may only specify one of these parameters: type, types.");
    if (nt > 20)
        return fail(c, 400, "invalid_request_error", NULL, "types",
                    "You can only specify up to 20 types.");
    int64_t from, to;
    created_range(p, &from, &to);
    pthread_mutex_lock(&s->mu);
    json_t *evs = all_events(s);
    pthread_mutex_unlock(&s->mu);
    json_t *all = json_array(), *e;
    size_t i;
    json_array_foreach(evs, i, e)
    {
        int64_t t = sim_jint(e, "created");
        if (t >= from && t <= to && (!type || type_is(sim_jstr(e, "type"), type))) {
            bool in = !nt;
            for (int k = 0; k < nt && !in; k++)
                in = type_is(sim_jstr(e, "type"), types[k]);
            if (in)
                json_array_append(all, e);
        }
    }
    json_decref(evs);
    return reply_page(c, all, p, "/v1/events", "event");
}

static int event_get(struct po_sim_server *s, struct sim_call *c, const char *id,
                     const struct params *p)
{
    bool expand = false;
    if (!check_params(c, p, SPEC(EXPAND_ONLY)) || !check_expand(c, p, NULL, &expand))
        return 0;
    pthread_mutex_lock(&s->mu);
    json_t *evs = all_events(s), *e, *hit = NULL;
    pthread_mutex_unlock(&s->mu);
    size_t i;
    json_array_foreach(evs, i, e) if (strcmp(sim_jstr(e, "id"), id) == 0) hit = json_incref(e);
    json_decref(evs);
    return hit ? reply(c, 200, hit) : no_such(c, "event", id, "id");
}

/* ---- balance transactions ---- */

/* GET /v1/balance_transactions?created[gte]=&created[lt]=&limit=
 * &starting_after=&expand[]=data.source (or expand[0]=, as stripe-node
 * sends it)&type=&currency=&source=: the payments (type charge, the fee
 * 2.9% + 30 with its fee_details, the source the Charge) and the refunds
 * (type refund, negative, the source the Refund), newest first, paged. */
static int list_balance(struct po_sim_server *s, struct sim_call *c, const struct params *p)
{
    bool expand = false;
    if (!check_params(c, p, SPEC(BT_LIST)) || !check_expand(c, p, "data.source", &expand))
        return 0;
    const char *type = param(p, "type"), *cur_f = param(p, "currency"), *src = param(p, "source");
    int64_t from, to;
    created_range(p, &from, &to);
    pthread_mutex_lock(&s->mu);
    json_t *intents = intents_at(s, (int64_t)time(NULL)), *refunds = stripe_refunds(s);
    pthread_mutex_unlock(&s->mu);
    json_t *all = json_array(), *rec, *r;
    const char *id;
    json_object_foreach(intents, id, rec)
    {
        int64_t t = sim_jint(rec, "paid_at");
        if (strcmp(sim_jstr(rec, "status"), "succeeded") != 0)
            continue;
        json_int_t amount = sim_jint(rec, "amount"), fee = (amount * 29 + 500) / 1000 + 30;
        char cur[4], txn[PO_TXN_ID_MAX + 8], ch[PO_TXN_ID_MAX + 8];
        lower3(sim_jstr(rec, "currency"), cur);
        derived("txn_", id, txn, sizeof txn);
        derived("ch_", id, ch, sizeof ch);
        if (t < from || t > to || (type && strcmp(type, "charge") != 0) ||
            (cur_f && strcmp(cur_f, cur) != 0) || (src && strcmp(src, ch) != 0))
            continue;
        json_t *source = expand ? charge_json(rec, refunded_of(refunds, id)) : json_string(ch);
        json_array_append_new(all, bt_json(txn, amount, fee, t, cur, "charge",
                                           "Payment (payonce simulator)", source));
    }
    size_t i;
    json_array_foreach(refunds, i, r)
    {
        int64_t t = refund_created(r);
        char cur[4], txn[PO_TXN_ID_MAX + 8];
        lower3(sim_jstr(r, "currency"), cur);
        derived("txn_", sim_jstr(r, "refund_id"), txn, sizeof txn);
        if (t < from || t > to || (type && strcmp(type, "refund") != 0) ||
            (cur_f && strcmp(cur_f, cur) != 0) ||
            (src && strcmp(src, sim_jstr(r, "refund_id")) != 0))
            continue;
        json_t *source = expand ? refund_json(r) : json_string(sim_jstr(r, "refund_id"));
        json_array_append_new(all, bt_json(txn, -sim_jint(r, "amount"), 0, t, cur, "refund",
                                           "REFUND FOR PAYMENT (payonce simulator)", source));
    }
    json_decref(intents);
    json_decref(refunds);
    return reply_page(c, all, p, "/v1/balance_transactions", "balance_transaction");
}

/* ---- idempotency (POST) ---- */

/* The request's parameters as Stripe compares them: sorted pairs. */
static char *canonical(const struct params *p)
{
    json_t *pairs = json_array();
    for (int i = 0; i < p->n; i++)
        json_array_append_new(pairs, json_pack("[s, s]", p->k[i], p->v[i]));
    size_t n = json_array_size(pairs);
    for (size_t i = 1; i < n; i++) /* insertion sort: a handful */
        for (size_t j = i; j > 0; j--) {
            json_t *a = json_array_get(pairs, j - 1), *b = json_array_get(pairs, j);
            int d = strcmp(json_string_value(json_array_get(a, 0)),
                           json_string_value(json_array_get(b, 0)));
            if (d < 0 || (d == 0 && strcmp(json_string_value(json_array_get(a, 1)),
                                           json_string_value(json_array_get(b, 1))) <= 0))
                break;
            json_incref(a);
            json_array_set(pairs, j - 1, b);
            json_array_set_new(pairs, j, a);
        }
    char *out = json_dumps(pairs, JSON_COMPACT);
    json_decref(pairs);
    return out;
}

typedef int (*post_fn)(struct po_sim_server *s, struct sim_call *c, const char *id,
                       const struct params *p);

/* A POST through Stripe's idempotency layer: without a key it just runs;
 * with one, a kept answer is replayed (or refused: other parameters,
 * another endpoint, still running), else the method runs and its answer
 * is kept. Parameters were checked before (their errors are not kept). */
static int idempotent(struct po_sim_server *s, struct sim_call *c, const char *endpoint,
                      const char *id, const struct params *p, post_fn fn)
{
    const char *key = c->header(c->ctx, "Idempotency-Key");
    if (!key)
        return fn(s, c, id, p);
    if (!*key || strlen(key) > 255)
        return fail(c, 400, "invalid_request_error", NULL, NULL,
                    "Idempotency keys must be 1 to 255 characters long.");
    char *canon = canonical(p);
    if (!canon)
        return po_sim_stripe_error(c, 500, NULL);
    pthread_mutex_lock(&s->mu);
    json_t *kept = sim_read_jsonl(s->dir, "idem.jsonl"), *l, *last = NULL;
    size_t i;
    json_array_foreach(kept, i, l) if (strcmp(sim_jstr(l, "key"), key) == 0) last = l;
    bool running = last && strcmp(sim_jstr(last, "state"), "running") == 0;
    bool same = last && strcmp(sim_jstr(last, "endpoint"), endpoint) == 0 &&
                strcmp(sim_jstr(last, "request"), canon) == 0;
    if (!last) {
        json_t *line = json_pack("{s:s, s:s, s:s, s:s}", "key", key, "endpoint", endpoint,
                                 "request", canon, "state", "running");
        sim_append_jsonl(s->dir, "idem.jsonl", line);
        json_decref(line);
    }
    json_t *answer = last && !running && same ? json_incref(last) : NULL;
    pthread_mutex_unlock(&s->mu);
    json_decref(kept);
    int ret;
    if (answer) {
        ret = sim_reply(c, (unsigned)sim_jint(answer, "status"), "application/json",
                        sim_jstr(answer, "answer"), false);
        sim_reply_header(c, "Idempotent-Replayed", "true");
        json_decref(answer);
    } else if (running) {
        ret = fail(c, 409, "invalid_request_error", "idempotency_key_in_use", NULL,
                   "There is currently another in-progress request using this Idempotent Key"
                   " (that probably means you submitted twice, and the other request is still"
                   " going through): %.255s. Please try again later.",
                   key);
    } else if (last) {
        ret = fail(c, 400, "idempotency_error", NULL, NULL,
                   "Keys for idempotent requests can only be used with the same parameters they"
                   " were first used with. Try using a key other than '%.255s' if you meant to"
                   " execute a different request.",
                   key);
    } else {
        ret = fn(s, c, id, p);
        json_t *line = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s}", "key", key, "endpoint", endpoint,
                                 "request", canon, "state", "done", "status", (int)c->status,
                                 "answer", c->body_out ? c->body_out : "");
        pthread_mutex_lock(&s->mu);
        sim_append_jsonl(s->dir, "idem.jsonl", line);
        pthread_mutex_unlock(&s->mu);
        json_decref(line);
    }
    free(canon);
    return ret;
}

static int create_fn(struct po_sim_server *s, struct sim_call *c, const char *id,
                     const struct params *p)
{
    (void)id;
    return create(s, c, p);
}

static int refund_fn(struct po_sim_server *s, struct sim_call *c, const char *id,
                     const struct params *p)
{
    (void)id;
    return refund(s, c, p);
}

/* ---- routing ---- */

static bool authorised(const struct po_sim_server *s, struct sim_call *c)
{
    const char *h = c->header(c->ctx, "Authorization");
    return s->id.stripe_api_key[0] && h && strncmp(h, "Bearer ", 7) == 0 &&
           strcmp(h + 7, s->id.stripe_api_key) == 0;
}

/* The id in path after prefix and before suffix ("" suffix: to the end),
 * when it is one (a Stripe id: [A-Za-z0-9_]); else false. */
static bool id_in(const char *path, const char *prefix, const char *suffix, char *id, size_t cap)
{
    size_t pl = strlen(prefix), sl = strlen(suffix), n = strlen(path);
    if (strncmp(path, prefix, pl) != 0 || n <= pl + sl || strcmp(path + n - sl, suffix) != 0 ||
        n - pl - sl >= cap)
        return false;
    memcpy(id, path + pl, n - pl - sl);
    id[n - pl - sl] = '\0';
    return strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
           strlen(id);
}

/* The request's parameters: the form body of a POST (form-encoded, as
 * Stripe's v1 takes them), the query string of a GET. false: answered. */
static bool read_params(struct sim_call *c, bool post, struct params *p)
{
    if (!post) {
        c->args(c->ctx, param_add, p);
        return true;
    }
    const char *type = c->header(c->ctx, "Content-Type");
    if (*c->body && (!type || strncmp(type, "application/x-www-form-urlencoded", 33) != 0)) {
        fail(c, 400, "invalid_request_error", NULL, NULL,
             "Invalid request: the body must be application/x-www-form-urlencoded (was %.60s).",
             type ? type : "none");
        return false;
    }
    struct sim_form f = {0};
    bool ok = !*c->body || sim_form_parse(c->body, &f);
    for (int i = 0; ok && i < f.n; i++)
        param_add(p, f.k[i], f.v[i]);
    /* the form decoder keeps 32 pairs: a longer body is refused, not cut */
    size_t pairs = *c->body ? 1 : 0;
    for (const char *q = c->body; *q; q++)
        pairs += *q == '&';
    sim_form_free(&f);
    if (!ok || pairs > 32) {
        fail(c, 400, "invalid_request_error", NULL, NULL,
             "Invalid request: the body is not a form of at most 32 parameters.");
        return false;
    }
    return true;
}

static int route(struct po_sim_server *s, struct sim_call *c, const struct params *p, bool get,
                 bool post)
{
    char id[PO_TXN_ID_MAX + 1];
    if (get && strcmp(c->path, "/v1/payment_intents/search") == 0)
        return search(s, c, p);
    if (post && strcmp(c->path, "/v1/payment_intents") == 0)
        return check_params(c, p, SPEC(PI_CREATE))
                   ? idempotent(s, c, "POST /v1/payment_intents", NULL, p, create_fn)
                   : 0;
    char endpoint[PO_TXN_ID_MAX + 48];
    if (post && id_in(c->path, "/v1/payment_intents/", "/cancel", id, sizeof id) &&
        po_fmt(endpoint, sizeof endpoint, "POST %s", c->path) == PO_OK)
        return check_params(c, p, SPEC(PI_CANCEL)) ? idempotent(s, c, endpoint, id, p, cancel) : 0;
    if (get && id_in(c->path, "/v1/payment_intents/", "", id, sizeof id))
        return retrieve(s, c, id, p);
    if (post && strcmp(c->path, "/v1/refunds") == 0)
        return check_params(c, p, SPEC(RE_CREATE))
                   ? idempotent(s, c, "POST /v1/refunds", NULL, p, refund_fn)
                   : 0;
    if (get && strcmp(c->path, "/v1/refunds") == 0)
        return refund_list(s, c, p);
    if (get && id_in(c->path, "/v1/refunds/", "", id, sizeof id))
        return refund_get(s, c, id, p);
    if (get && strcmp(c->path, "/v1/events") == 0)
        return list_events(s, c, p);
    if (get && id_in(c->path, "/v1/events/", "", id, sizeof id))
        return event_get(s, c, id, p);
    if (get && strcmp(c->path, "/v1/balance_transactions") == 0)
        return list_balance(s, c, p);
    return fail(c, 404, "invalid_request_error", NULL, NULL,
                "Unrecognized request URL (%s: %.200s). Please see https://stripe.com/docs or we"
                " can help at https://support.stripe.com/.",
                c->method, c->path);
}

int po_sim_stripe_route(struct po_sim_server *s, struct sim_call *c)
{
    if (strncmp(c->path, "/v1/", 4) != 0)
        return -1;
    char rid[40];
    sim_new_id("req_", rid, sizeof rid);
    sim_reply_header(c, "Request-Id", rid);
    if (!authorised(s, c))
        return fail(c, 401, "invalid_request_error", NULL, NULL,
                    "Invalid API Key provided: %.12s****", "sk_test_");
    const char *version = c->header(c->ctx, "Stripe-Version");
    int y = 0, m = 0, d = 0, used = 0;
    if (version && (sscanf(version, "%4d-%2d-%2d%n", &y, &m, &d, &used) != 3 || used != 10 ||
                    (version[10] && version[10] != '.')))
        return fail(c, 400, "invalid_request_error", NULL, NULL,
                    "Invalid Stripe API version: %.40s", version);
    sim_reply_header(c, "Stripe-Version", version ? version : API_VERSION);
    /* the channel failing with one of its error answers, as the tests ask */
    char code[64] = "";
    int st = sim_fault_take_code(s, c, code, sizeof code);
    if (st >= 100)
        return po_sim_stripe_error(c, (unsigned)st, code);
    bool get = strcmp(c->method, "GET") == 0, post = strcmp(c->method, "POST") == 0;
    struct params p = {0};
    int ret = 0;
    if (read_params(c, post, &p))
        ret = route(s, c, &p, get, post);
    params_free(&p);
    return ret;
}
