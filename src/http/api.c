/*
 * api.c — the tenant API under /v1: bearer API keys, JSON in and out,
 * Idempotency-Key on every POST.
 *
 *   POST /v1/orders                      create an order (PAYING)
 *   GET  /v1/orders/{out_trade_no}
 *   POST /v1/orders/{out_trade_no}/close PAYING -> CLOSED only
 *   POST /v1/refunds                     reserve, record PROCESSING, submit
 *   GET  /v1/refunds/{out_refund_no}
 *   GET  /v1/balances
 *   GET  /v1/alerts                      ?limit=&cursor=
 *   GET  /v1/journal                     ?limit=&cursor=&out_trade_no=
 *
 * A POST runs as: authenticate; validate the body (400s are not stored);
 * with an Idempotency-Key, claim the key (idem.c: replay, 422, 409); then
 * ONE transaction holding the effect (inside a savepoint, rolled back when
 * the answer is a business error) and the stored response; commit; then
 * the after-commit work (submitting a refund to the channel). A transient
 * failure stores nothing and releases the key: the retry runs again.
 * Every lookup is scoped by the key's tenant, so another tenant's object
 * is simply not found (404).
 */
#include "http_int.h"

#include "../crypto/crypto.h"
#include "../engine/admin.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct call {
    const struct po_api_ctx *ctx;
    const struct po_api_req *req;
    struct po_api_answer *out;
    struct po_store *s;
    char tenant[PO_ID_MAX + 1];
    char no[PO_ID_MAX + 1]; /* path parameter */
    json_t *in;             /* parsed POST body */
    json_t *resp;           /* the answer's JSON */
    unsigned status;
    /* after commit */
    char submit_refund[PO_ID_MAX + 1];
};

/* ---- answers ---- */

static void set_code(struct po_api_answer *out, const char *code)
{
    if (po_strcpy(out->code, sizeof out->code, code))
        out->code[0] = '\0';
}

static json_t *error_json(const char *code, const char *message, const char *param)
{
    json_t *e = json_pack("{s:s, s:s}", "code", code, "message", message);
    if (e && param)
        json_object_set_new(e, "param", json_string(param));
    return json_pack("{s:o}", "error", e);
}

/* Sets a business or request error as the call's answer. */
static void fail(struct call *c, unsigned status, const char *code, const char *message,
                 const char *param)
{
    json_decref(c->resp);
    c->resp = error_json(code, message, param);
    c->status = status;
    set_code(c->out, code);
}

static void finish_answer(struct call *c)
{
    c->out->status = c->status ? c->status : 500;
    c->out->body = c->resp ? json_dumps(c->resp, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (!c->out->body) {
        c->out->status = 500;
        c->out->body = strdup("{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}");
    }
}

static void unavailable(struct call *c)
{
    fail(c, 503, "store_unavailable", "temporarily unavailable; retry", NULL);
    c->out->retry_after = 1;
}

/* ---- rows to JSON ---- */

static json_t *cell_str(const struct po_rows *r, int row, int col)
{
    const char *v = po_rows_get(r, row, col);
    return v ? json_string(v) : json_null();
}

static json_t *cell_int(const struct po_rows *r, int row, int col)
{
    int64_t v = 0;
    return po_rows_i64(r, row, col, &v) == PO_OK ? json_integer((json_int_t)v) : json_null();
}

/* One object from a row, by a field list: "name" text, "#name" integer. */
static json_t *row_object(const struct po_rows *r, int row, const char *object,
                          const char *const *fields, int n)
{
    json_t *o = json_object();
    if (object)
        json_object_set_new(o, "object", json_string(object));
    for (int i = 0; i < n; i++) {
        bool num = fields[i][0] == '#';
        json_object_set_new(o, fields[i] + num, num ? cell_int(r, row, i) : cell_str(r, row, i));
    }
    return o;
}

static const char *const ORDER_FIELDS[] = {
    "out_trade_no", "merchant",         "channel",          "#amount",   "currency",
    "status",       "channel_txn_id",   "paid_at",          "#refund_reserved",
    "#refunded_amount", "created_at",   "updated_at"};
#define ORDER_SQL                                                                                  \
    "SELECT out_trade_no, merchant_id, channel, amount, currency, status, channel_txn_id,"        \
    " paid_at, refund_reserved, refunded_amount, created_at, updated_at FROM pay_order"           \
    " WHERE tenant_id = ? AND out_trade_no = ?"

static const char *const REFUND_FIELDS[] = {
    "out_refund_no", "out_trade_no", "channel",    "#amount",   "currency", "status",
    "channel_refund_id", "created_at", "updated_at", "submit_state", "#submit_attempts",
    "submit_error"};
#define REFUND_SQL                                                                                 \
    "SELECT out_refund_no, out_trade_no, channel, amount, currency, status, channel_refund_id,"   \
    " created_at, updated_at, submit_state, submit_attempts, submit_error FROM refund"            \
    " WHERE tenant_id = ? AND out_refund_no = ?"

/* Loads one object of the tenant; *found false when absent. */
static po_err load_one(struct call *c, const char *sql, const char *key, const char *object,
                       const char *const *fields, int n, json_t **out)
{
    struct po_rows r;
    struct po_param p[] = {PO_TEXT(c->tenant), PO_TEXT(key)};
    po_err rc = po_store_exec(c->s, sql, p, 2, &r, NULL, NULL, 0);
    if (rc)
        return rc;
    *out = r.nrows == 1 ? row_object(&r, 0, object, fields, n) : NULL;
    po_rows_free(&r);
    return PO_OK;
}

static po_err load_order(struct call *c, const char *no, json_t **out)
{
    return load_one(c, ORDER_SQL, no, "order", ORDER_FIELDS, 12, out);
}

static po_err load_refund(struct call *c, const char *no, json_t **out)
{
    json_t *r = NULL;
    po_err rc = load_one(c, REFUND_SQL, no, "refund", REFUND_FIELDS, 12, &r);
    if (rc || !r)
        goto done;
    /* Group the submission fields. */
    json_t *sub = json_pack("{s:O, s:O, s:O}", "state", json_object_get(r, "submit_state"),
                            "attempts", json_object_get(r, "submit_attempts"), "error",
                            json_object_get(r, "submit_error"));
    json_object_del(r, "submit_state");
    json_object_del(r, "submit_attempts");
    json_object_del(r, "submit_error");
    json_object_set_new(r, "submission", sub);
done:
    *out = r;
    return rc;
}

/* ---- request validation ---- */

/* The body is one JSON object whose members are all in allowed. */
static bool parse_body(struct call *c, const char *const *allowed, int n, bool may_be_empty)
{
    const struct po_api_req *q = c->req;
    if (may_be_empty && q->body_len == 0) {
        c->in = json_object();
        return true;
    }
    json_error_t jerr;
    c->in = json_loadb(q->body, q->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(c->in)) {
        char msg[200];
        (void)snprintf(msg, sizeof msg, "the body must be one JSON object: %s",
                       c->in ? "not an object" : jerr.text);
        fail(c, 400, "malformed_json", msg, NULL);
        return false;
    }
    const char *k;
    json_t *v;
    json_object_foreach(c->in, k, v) {
        bool ok = false;
        for (int i = 0; i < n && !ok; i++)
            ok = strcmp(k, allowed[i]) == 0;
        if (!ok) {
            char msg[160];
            (void)snprintf(msg, sizeof msg, "unknown parameter '%.64s'", k);
            fail(c, 400, "unknown_parameter", msg, NULL);
            return false;
        }
    }
    return true;
}

/* A required (or optional, with dflt) identifier member. */
static const char *id_member(struct call *c, const char *name, bool required, const char *dflt)
{
    json_t *v = json_object_get(c->in, name);
    if (!v && !required)
        return dflt;
    const char *s = json_string_value(v);
    if (!s || !po_id_valid(s, PO_ID_MAX)) {
        char msg[160];
        (void)snprintf(msg, sizeof msg, "%s: %s 1-%d characters of [A-Za-z0-9_-.:|*]", name,
                       v ? "must be" : "required,", PO_ID_MAX);
        fail(c, 400, v ? "invalid_parameter" : "missing_parameter", msg, name);
        return NULL;
    }
    return s;
}

/* amount: a JSON integer in 1..PO_AMOUNT_MAX minor units. */
static bool amount_member(struct call *c, int64_t *out)
{
    json_t *v = json_object_get(c->in, "amount");
    if (!json_is_integer(v) || !po_amount_valid((int64_t)json_integer_value(v))) {
        char msg[160];
        (void)snprintf(msg, sizeof msg,
                       "amount: %s an integer number of minor units in 1..%lld (no decimals,"
                       " no strings)",
                       v ? "must be" : "required,", (long long)PO_AMOUNT_MAX);
        fail(c, 400, v ? "invalid_amount" : "missing_parameter", msg, "amount");
        return false;
    }
    *out = (int64_t)json_integer_value(v);
    return true;
}

/* currency: optional; a supported ISO 4217 code. */
static bool currency_member(struct call *c, const char **out, const char *dflt)
{
    json_t *v = json_object_get(c->in, "currency");
    *out = dflt;
    if (!v)
        return true;
    const char *s = json_string_value(v);
    if (!s || !po_currency_valid(s)) {
        fail(c, 400, "invalid_currency", "currency: a supported ISO 4217 code such as CNY",
             "currency");
        return false;
    }
    *out = s;
    return true;
}

/* ---- POST effects: run inside the transaction ---- */

struct post_route {
    const char *route; /* scope of Idempotency-Keys */
    bool (*validate)(struct call *c);
    po_err (*effect)(struct call *c);
};

static const char *const ORDER_CREATE_FIELDS[] = {"merchant", "out_trade_no", "amount",
                                                  "currency", "channel"};

static bool order_create_validate(struct call *c)
{
    int64_t amount = 0;
    const char *cur = NULL;
    if (!parse_body(c, ORDER_CREATE_FIELDS, 5, false) || !id_member(c, "merchant", true, NULL) ||
        !id_member(c, "out_trade_no", true, NULL) || !amount_member(c, &amount) ||
        !currency_member(c, &cur, "CNY"))
        return false;
    json_t *ch = json_object_get(c->in, "channel");
    if (ch && !json_is_null(ch) &&
        (!json_string_value(ch) || !po_channel_valid(json_string_value(ch)))) {
        fail(c, 400, "invalid_parameter", "channel: one of wechatpay, alipay, stripe", "channel");
        return false;
    }
    return true;
}

/* Maps an admin error to the answer; PO_OK when it was a business answer. */
static po_err business(struct call *c, po_err rc, const char *code, const char *err)
{
    switch (rc) {
    case PO_OK: return PO_OK;
    case PO_ERR_NOT_FOUND: fail(c, 404, code[0] ? code : "not_found", err, NULL); return PO_OK;
    case PO_ERR_CONFLICT: fail(c, 409, code[0] ? code : "conflict", err, NULL); return PO_OK;
    case PO_ERR_INVALID: fail(c, 400, code[0] ? code : "invalid_request", err, NULL); return PO_OK;
    default: return rc;
    }
}

static po_err order_create_effect(struct call *c)
{
    const char *cur = json_string_value(json_object_get(c->in, "currency"));
    const char *ch = json_string_value(json_object_get(c->in, "channel"));
    struct po_order_spec spec = {c->tenant,
                                 json_string_value(json_object_get(c->in, "merchant")),
                                 json_string_value(json_object_get(c->in, "out_trade_no")),
                                 (int64_t)json_integer_value(json_object_get(c->in, "amount")),
                                 cur ? cur : "CNY",
                                 ch};
    bool created = false;
    char code[48] = "", err[PO_ERRBUF_MAX] = "";
    po_err rc = po_order_insert(c->s, &spec, &created, code, sizeof code, err, sizeof err);
    if (rc)
        return business(c, rc, code, err);
    rc = load_order(c, spec.out_trade_no, &c->resp);
    if (!rc && !c->resp)
        rc = PO_ERR_STORE;
    c->status = created ? 201 : 200;
    return rc;
}

static bool close_validate(struct call *c)
{
    return parse_body(c, NULL, 0, true);
}

static po_err close_effect(struct call *c)
{
    bool now = false;
    char code[48] = "", err[PO_ERRBUF_MAX] = "";
    po_err rc = po_order_close(c->s, c->tenant, c->no, &now, code, sizeof code, err, sizeof err);
    if (rc)
        return business(c, rc, code, err);
    rc = load_order(c, c->no, &c->resp);
    if (!rc && !c->resp)
        rc = PO_ERR_STORE;
    c->status = 200;
    return rc;
}

static const char *const REFUND_CREATE_FIELDS[] = {"out_trade_no", "out_refund_no", "amount",
                                                   "currency"};

static bool refund_validate(struct call *c)
{
    int64_t amount = 0;
    const char *cur = NULL;
    return parse_body(c, REFUND_CREATE_FIELDS, 4, false) &&
           id_member(c, "out_trade_no", true, NULL) && id_member(c, "out_refund_no", true, NULL) &&
           amount_member(c, &amount) && currency_member(c, &cur, NULL);
}

static po_err refund_effect(struct call *c)
{
    const char *no = json_string_value(json_object_get(c->in, "out_trade_no"));
    const char *rno = json_string_value(json_object_get(c->in, "out_refund_no"));
    /* WeChat Pay refunds are submitted to its refund API after commit; the
     * other channels' refunds wait for the channel's notification. */
    struct po_rows r;
    struct po_param p[] = {PO_TEXT(c->tenant), PO_TEXT(no)};
    po_err rc = po_store_exec(c->s,
                              "SELECT COALESCE(channel, '') FROM pay_order WHERE tenant_id = ?"
                              " AND out_trade_no = ?",
                              p, 2, &r, NULL, NULL, 0);
    if (rc)
        return rc;
    bool submit = r.nrows == 1 && po_refund_submittable(po_rows_get(&r, 0, 0));
    po_rows_free(&r);
    struct po_refund_spec f = {c->tenant,
                               no,
                               rno,
                               (int64_t)json_integer_value(json_object_get(c->in, "amount")),
                               json_string_value(json_object_get(c->in, "currency")),
                               submit ? "pending" : "manual"};
    bool created = false;
    char code[48] = "", err[PO_ERRBUF_MAX] = "";
    rc = po_refund_insert(c->s, &f, &created, code, sizeof code, err, sizeof err);
    if (rc)
        return business(c, rc, code, err);
    rc = load_refund(c, rno, &c->resp);
    if (!rc && !c->resp)
        rc = PO_ERR_STORE;
    c->status = created ? 201 : 200;
    if (!rc && created && submit && po_strcpy(c->submit_refund, sizeof c->submit_refund, rno))
        rc = PO_ERR_INTERNAL;
    return rc;
}

static const struct post_route ORDERS = {"POST /v1/orders", order_create_validate,
                                         order_create_effect};
static const struct post_route CLOSE = {"POST /v1/orders/{out_trade_no}/close", close_validate,
                                        close_effect};
static const struct post_route REFUNDS = {"POST /v1/refunds", refund_validate, refund_effect};

/* ---- the POST pipeline ---- */

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static bool acquire(struct call *c)
{
    char err[PO_ERRBUF_MAX] = "";
    if (c->s)
        return true;
    if (po_store_pool_acquire(c->ctx->pool, PO_POOL_WAIT_MS, &c->s, err, sizeof err)) {
        po_log(PO_LOG_WARN, "request %s: %s", c->ctx->request_id, err);
        return false;
    }
    return true;
}

static void release(struct call *c)
{
    if (c->s)
        po_store_pool_release(c->ctx->pool, c->s);
    c->s = NULL;
}

static bool idem_key_valid(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n > PO_IDEM_KEY_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (k[i] < 0x21 || k[i] > 0x7e)
            return false;
    return true;
}

/* SHA-256 over the route's path and the canonical body (sorted members,
 * no whitespace): the same request however it is formatted. */
static void request_hash(struct call *c, char out[65])
{
    char *canon = json_dumps(c->in, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    char *msg = NULL;
    if (canon && po_fmt_alloc(&msg, "POST /v1/%s\n%s", c->req->path, canon) == PO_OK)
        po_sha256_hex(msg, strlen(msg), out);
    else
        out[0] = '\0';
    free(msg);
    free(canon);
}

/* Claims the key, waiting up to idem_wait_ms for an in-flight twin.
 * Returns true when this request should run the effect. */
static bool claim(struct call *c, const struct po_idem_req *q, struct po_idem_claim *cl)
{
    int waited = 0;
    for (;;) {
        if (!acquire(c)) {
            unavailable(c);
            return false;
        }
        po_err rc = po_idem_claim(c->s, q, cl);
        if (rc) {
            unavailable(c);
            return false;
        }
        switch (cl->kind) {
        case PO_IDEM_CLAIMED:
            if (cl->taken_over)
                po_log(PO_LOG_WARN, "request %s: Idempotency-Key of tenant %s on %s was abandoned"
                                    " by its first request; running it again",
                       c->ctx->request_id, c->tenant, q->route);
            return true;
        case PO_IDEM_REPLAY: {
            json_error_t jerr;
            json_decref(c->resp);
            c->resp = json_loads(cl->body, 0, &jerr);
            c->status = cl->status;
            c->out->replayed = true;
            free(cl->body);
            cl->body = NULL;
            if (!c->resp)
                fail(c, 500, "internal", "stored response unreadable", NULL);
            return false;
        }
        case PO_IDEM_MISMATCH:
            fail(c, 422, "idempotency_key_reused",
                 "this Idempotency-Key was used with different parameters; use a new key for a"
                 " new request",
                 NULL);
            return false;
        case PO_IDEM_IN_FLIGHT:
            if (waited >= c->ctx->idem_wait_ms) {
                fail(c, 409, "idempotency_in_flight",
                     "a request with this Idempotency-Key is still being processed; retry"
                     " shortly",
                     NULL);
                c->out->retry_after = 1;
                return false;
            }
            release(c); /* do not hold a connection while waiting */
            sleep_ms(PO_IDEM_POLL_MS);
            waited += PO_IDEM_POLL_MS;
            break;
        }
    }
}

static po_err sp(struct po_store *s, const char *sql)
{
    char err[PO_ERRBUF_MAX];
    return po_store_exec(s, sql, NULL, 0, NULL, NULL, err, sizeof err);
}

/* The effect and the stored response in one transaction. */
static po_err run_effect(struct call *c, const struct post_route *rt, const struct po_idem_req *q,
                         const char *token)
{
    char err[PO_ERRBUF_MAX] = "";
    po_err rc = po_store_begin(c->s, err, sizeof err);
    if (rc)
        return rc;
    rc = sp(c->s, "SAVEPOINT po_api");
    if (!rc && c->ctx->hook)
        c->ctx->hook(c->ctx->hook_ctx, rt->route);
    if (!rc)
        rc = rt->effect(c);
    if (!rc && c->status >= 400) {
        /* A business refusal: no effect, but the answer is final. */
        c->submit_refund[0] = '\0';
        rc = sp(c->s, "ROLLBACK TO SAVEPOINT po_api");
    }
    if (!rc && q) {
        char *body = json_dumps(c->resp, JSON_COMPACT | JSON_SORT_KEYS);
        rc = body ? po_idem_finish(c->s, q, token, c->status, body) : PO_ERR_NOMEM;
        free(body);
    }
    if (!rc)
        return po_store_commit(c->s, err, sizeof err);
    po_store_rollback(c->s);
    return rc;
}

static void handle_post(struct call *c, const struct post_route *rt)
{
    PO_ASSERT(po_strcpy(c->out->route, sizeof c->out->route, rt->route) == PO_OK);
    if (c->req->body_too_large) {
        fail(c, 413, "body_too_large", "the body is larger than the limit", NULL);
        return;
    }
    if (!rt->validate(c))
        return;
    const char *key = c->req->header(c->req->ctx, "Idempotency-Key");
    if (key && !idem_key_valid(key)) {
        fail(c, 400, "invalid_idempotency_key",
             "Idempotency-Key: 1-255 visible ASCII characters (a UUID is a good choice)", NULL);
        return;
    }
    char hash[65];
    struct po_idem_req q = {c->tenant, rt->route, key, hash};
    struct po_idem_claim cl;
    memset(&cl, 0, sizeof cl);
    if (key) {
        request_hash(c, hash);
        if (!hash[0]) {
            unavailable(c);
            return;
        }
        if (!claim(c, &q, &cl))
            return;
    }
    if (!acquire(c)) {
        unavailable(c);
    } else {
        po_err rc = run_effect(c, rt, key ? &q : NULL, cl.token);
        if (rc == PO_ERR_CONFLICT && key) {
            /* Our claim was taken over: the other request owns the key. */
            fail(c, 409, "idempotency_in_flight",
                 "this request's Idempotency-Key was taken over by a retry; retry shortly", NULL);
            c->out->retry_after = 1;
            return;
        }
        if (rc) {
            po_log(PO_LOG_WARN, "request %s: %s failed: %s; nothing stored", c->ctx->request_id,
                   rt->route, po_err_name(rc));
            c->submit_refund[0] = '\0';
            unavailable(c);
        }
    }
    if (c->status == 503 && key && acquire(c) && po_idem_release(c->s, &q, cl.token))
        po_log(PO_LOG_WARN, "request %s: Idempotency-Key not released; it frees after %d s",
               c->ctx->request_id, PO_IDEM_LOCK_S);
    if (c->submit_refund[0] && acquire(c)) {
        char state[16] = "";
        if (po_refund_submit(c->s, c->ctx->master_key, c->tenant, c->submit_refund, state,
                             sizeof state))
            po_log(PO_LOG_WARN, "request %s: refund %s stays pending submission",
                   c->ctx->request_id, c->submit_refund);
    }
}

/* ---- GET routes ---- */

static void get_object(struct call *c, po_err (*load)(struct call *, const char *, json_t **),
                       const char *what)
{
    json_t *o = NULL;
    if (load(c, c->no, &o)) {
        unavailable(c);
        return;
    }
    if (!o) {
        char msg[120], code[40];
        (void)snprintf(msg, sizeof msg, "no %s %s", what, c->no);
        (void)snprintf(code, sizeof code, "%s_not_found", what);
        fail(c, 404, code, msg, NULL);
        return;
    }
    c->resp = o;
    c->status = 200;
}

static void get_balances(struct call *c)
{
    struct po_rows r;
    struct po_param p[] = {PO_TEXT(c->tenant)};
    if (po_store_exec(c->s,
                      "SELECT account, currency, balance, updated_at FROM account_balance WHERE"
                      " tenant_id = ? ORDER BY account, currency",
                      p, 1, &r, NULL, NULL, 0)) {
        unavailable(c);
        return;
    }
    static const char *const f[] = {"account", "currency", "#balance", "updated_at"};
    json_t *data = json_array();
    for (int i = 0; i < r.nrows; i++)
        json_array_append_new(data, row_object(&r, i, NULL, f, 4));
    po_rows_free(&r);
    c->resp = json_pack("{s:s, s:o}", "object", "list", "data", data);
    c->status = 200;
}

/* Keyset paging on (created_at, key): the cursor is the hex of
 * "created_at|key" of the last item returned. */
struct page {
    int64_t limit;
    char after_ts[PO_TIME_MAX];
    char after_key[PO_KEY_MAX + 1];
};

static bool page_args(struct call *c, struct page *pg)
{
    const char *lim = c->req->arg(c->req->ctx, "limit");
    const char *cur = c->req->arg(c->req->ctx, "cursor");
    pg->limit = PO_PAGE_DEFAULT;
    pg->after_ts[0] = pg->after_key[0] = '\0';
    if (lim && po_parse_i64(lim, 1, PO_PAGE_MAX, &pg->limit)) {
        fail(c, 400, "invalid_parameter", "limit: an integer in 1..100", "limit");
        return false;
    }
    if (!cur)
        return true;
    size_t n = strlen(cur);
    char plain[PO_TIME_MAX + PO_KEY_MAX + 2];
    bool ok = n % 2 == 0 && n / 2 < sizeof plain;
    for (size_t i = 0; ok && i < n; i += 2) {
        int hi = po_hexval(cur[i]), lo = po_hexval(cur[i + 1]);
        ok = hi >= 0 && lo >= 0 && (hi | lo) != 0;
        if (ok)
            plain[i / 2] = (char)(hi << 4 | lo);
    }
    char *bar = NULL;
    if (ok) {
        plain[n / 2] = '\0';
        bar = strchr(plain, '|');
    }
    if (bar)
        *bar = '\0';
    if (!bar || strlen(plain) >= sizeof pg->after_ts || !po_time_valid(plain) ||
        strlen(bar + 1) > PO_KEY_MAX) {
        fail(c, 400, "invalid_parameter", "cursor: pass back next_cursor unchanged", "cursor");
        return false;
    }
    PO_ASSERT(po_strcpy(pg->after_ts, sizeof pg->after_ts, plain) == PO_OK);
    PO_ASSERT(po_strcpy(pg->after_key, sizeof pg->after_key, bar + 1) == PO_OK);
    return true;
}

static json_t *next_cursor(const char *ts, const char *key)
{
    size_t n = strlen(ts) + 1 + strlen(key);
    char *h = malloc(2 * n + 1);
    if (!h)
        return json_null();
    char plain[PO_TIME_MAX + PO_KEY_MAX + 2];
    (void)snprintf(plain, sizeof plain, "%s|%s", ts, key);
    for (size_t i = 0; i < n; i++)
        (void)snprintf(h + 2 * i, 3, "%02x", (unsigned char)plain[i]);
    json_t *j = json_string(h);
    free(h);
    return j;
}

/* A page of a list: {"object":"list","data":…,"has_more":…,"next_cursor":…}. */
static void list_answer(struct call *c, json_t *data, bool more, const char *last_ts,
                        const char *last_key)
{
    c->resp = json_pack("{s:s, s:o, s:b, s:o}", "object", "list", "data", data, "has_more", more,
                        "next_cursor",
                        more && last_ts && last_key ? next_cursor(last_ts, last_key)
                                                    : json_null());
    c->status = 200;
}

static void get_alerts(struct call *c)
{
    struct page pg;
    if (!page_args(c, &pg))
        return;
    struct po_rows r;
    struct po_param p[] = {PO_TEXT(c->tenant), PO_TEXT(pg.after_ts), PO_TEXT(pg.after_ts),
                           PO_TEXT(pg.after_ts), PO_TEXT(pg.after_key), PO_I64(pg.limit + 1)};
    if (po_store_exec(c->s,
                      "SELECT created_at, reason, out_trade_no, amount, currency, source,"
                      " event_type, idem_key, detail, alert_key FROM alert WHERE tenant_id = ?"
                      " AND (? = '' OR created_at > ? OR (created_at = ? AND alert_key > ?))"
                      " ORDER BY created_at, alert_key LIMIT ?",
                      p, 6, &r, NULL, NULL, 0)) {
        unavailable(c);
        return;
    }
    static const char *const f[] = {"created_at", "reason",     "out_trade_no", "#amount",
                                    "currency",   "source",     "event_type",   "idem_key",
                                    "detail"};
    json_t *data = json_array();
    int shown = r.nrows > pg.limit ? (int)pg.limit : r.nrows;
    for (int i = 0; i < shown; i++)
        json_array_append_new(data, row_object(&r, i, "alert", f, 9));
    bool more = r.nrows > pg.limit;
    list_answer(c, data, more, more ? po_rows_get(&r, shown - 1, 0) : NULL,
                more ? po_rows_get(&r, shown - 1, 9) : NULL);
    po_rows_free(&r);
}

static void get_journal(struct call *c)
{
    struct page pg;
    if (!page_args(c, &pg))
        return;
    const char *order = c->req->arg(c->req->ctx, "out_trade_no");
    if (order && !po_id_valid(order, PO_ID_MAX)) {
        fail(c, 400, "invalid_parameter", "out_trade_no: an order number", "out_trade_no");
        return;
    }
    /* One page of journals with their lines, in one statement. */
    struct po_rows r;
    struct po_param p[] = {PO_TEXT(c->tenant),   PO_TEXT(order ? order : ""),
                           PO_TEXT(order ? order : ""), PO_TEXT(pg.after_ts),
                           PO_TEXT(pg.after_ts), PO_TEXT(pg.after_ts),
                           PO_TEXT(pg.after_key), PO_I64(pg.limit + 1)};
    if (po_store_exec(c->s,
                      "SELECT j.created_at, j.idem_key, j.kind, j.out_trade_no, j.out_refund_no,"
                      " j.currency, p.account, p.amount FROM (SELECT * FROM journal WHERE"
                      " tenant_id = ? AND (? = '' OR out_trade_no = ?) AND (? = '' OR"
                      " created_at > ? OR (created_at = ? AND idem_key > ?)) ORDER BY"
                      " created_at, idem_key LIMIT ?) j JOIN posting p ON p.tenant_id ="
                      " j.tenant_id AND p.idem_key = j.idem_key ORDER BY j.created_at,"
                      " j.idem_key, p.line_no",
                      p, 8, &r, NULL, NULL, 0)) {
        unavailable(c);
        return;
    }
    static const char *const f[] = {"created_at", "idem_key", "kind", "out_trade_no",
                                    "out_refund_no", "currency"};
    json_t *data = json_array(), *cur = NULL;
    const char *last_ts = NULL, *last_key = NULL;
    int journals = 0;
    bool more = false;
    for (int i = 0; i < r.nrows; i++) {
        const char *key = po_rows_get(&r, i, 1);
        if (!cur || strcmp(key, json_string_value(json_object_get(cur, "idem_key"))) != 0) {
            if (journals == pg.limit) {
                more = true;
                break;
            }
            cur = row_object(&r, i, "journal", f, 6);
            json_object_set_new(cur, "postings", json_array());
            json_array_append_new(data, cur);
            journals++;
            last_ts = po_rows_get(&r, i, 0);
            last_key = key;
        }
        json_array_append_new(json_object_get(cur, "postings"),
                              json_pack("{s:o, s:o}", "account", cell_str(&r, i, 6), "amount",
                                        cell_int(&r, i, 7)));
    }
    list_answer(c, data, more, last_ts, last_key);
    po_rows_free(&r);
}

/* ---- routing ---- */

/* Splits "a/b/c" into at most 3 segments; false for empty segments or more. */
static int split(const char *path, char seg[3][PO_ID_MAX + 2])
{
    int n = 0;
    const char *p = path;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 3 || len == 0 || len > PO_ID_MAX)
            return -1;
        memcpy(seg[n], p, len);
        seg[n][len] = '\0';
        n++;
        p += len;
        if (*p == '/')
            p++;
        if (slash && !*p)
            return -1; /* trailing slash */
    }
    return n;
}

static bool method_is(const struct call *c, const char *m)
{
    return strcmp(c->req->method, m) == 0;
}

static void not_allowed(struct call *c, const char *allow)
{
    c->out->allow = allow;
    fail(c, 405, "method_not_allowed", "method not allowed on this route", NULL);
}

static bool authenticate(struct call *c)
{
    const char *h = c->req->header(c->req->ctx, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) != 0) {
        fail(c, 401, "unauthorized",
             "send the tenant's API key as 'Authorization: Bearer po_…'", NULL);
        return false;
    }
    if (!acquire(c)) {
        unavailable(c);
        return false;
    }
    po_err rc = po_apikey_auth(c->s, h + 7, c->tenant);
    if (rc == PO_ERR_NOT_FOUND) {
        fail(c, 401, "invalid_api_key", "the API key is not valid or has been revoked", NULL);
        return false;
    }
    if (rc) {
        unavailable(c);
        return false;
    }
    PO_ASSERT(po_strcpy(c->out->tenant, sizeof c->out->tenant, c->tenant) == PO_OK);
    return true;
}

static void route(struct call *c)
{
    char seg[3][PO_ID_MAX + 2];
    int n = split(c->req->path, seg);
    const char *r0 = n > 0 ? seg[0] : "";
    bool known = (n == 1 && (strcmp(r0, "orders") == 0 || strcmp(r0, "refunds") == 0 ||
                             strcmp(r0, "balances") == 0 || strcmp(r0, "alerts") == 0 ||
                             strcmp(r0, "journal") == 0)) ||
                 (n == 2 && (strcmp(r0, "orders") == 0 || strcmp(r0, "refunds") == 0)) ||
                 (n == 3 && strcmp(r0, "orders") == 0 && strcmp(seg[2], "close") == 0);
    if (!known) {
        fail(c, 404, "not_found", "no such route", NULL);
        return;
    }
    if (!authenticate(c))
        return;
    if (n >= 2) {
        if (!po_id_valid(seg[1], PO_ID_MAX)) {
            fail(c, 404, strcmp(r0, "orders") == 0 ? "order_not_found" : "refund_not_found",
                 "no such object", NULL);
            return;
        }
        PO_ASSERT(po_strcpy(c->no, sizeof c->no, seg[1]) == PO_OK);
    }
    const struct post_route *post = NULL;
    if (n == 1 && strcmp(r0, "orders") == 0)
        post = &ORDERS;
    else if (n == 3)
        post = &CLOSE;
    else if (n == 1 && strcmp(r0, "refunds") == 0)
        post = &REFUNDS;
    if (post) {
        if (method_is(c, "POST"))
            handle_post(c, post);
        else
            not_allowed(c, "POST");
        return;
    }
    if (!method_is(c, "GET")) {
        not_allowed(c, "GET");
        return;
    }
    const char *rname = "";
    if (n == 2 && strcmp(r0, "orders") == 0) {
        rname = "GET /v1/orders/{out_trade_no}";
        get_object(c, load_order, "order");
    } else if (n == 2) {
        rname = "GET /v1/refunds/{out_refund_no}";
        get_object(c, load_refund, "refund");
    } else if (strcmp(r0, "balances") == 0) {
        rname = "GET /v1/balances";
        get_balances(c);
    } else if (strcmp(r0, "alerts") == 0) {
        rname = "GET /v1/alerts";
        get_alerts(c);
    } else {
        rname = "GET /v1/journal";
        get_journal(c);
    }
    PO_ASSERT(po_strcpy(c->out->route, sizeof c->out->route, rname) == PO_OK);
}

void po_api_handle(const struct po_api_ctx *ctx, const struct po_api_req *req,
                   struct po_api_answer *out)
{
    memset(out, 0, sizeof *out);
    struct call c = {.ctx = ctx, .req = req, .out = out};
    route(&c);
    release(&c);
    finish_answer(&c);
    json_decref(c.in);
    json_decref(c.resp);
}
