/*
 * api.c — the tenant API under /v1: bearer API keys, JSON in and out,
 * Idempotency-Key on every POST. The routes are in routes.c; what each
 * does is in api_routes.c.
 *
 * It runs on a worker thread. A POST runs as: authenticate; validate the
 * body (400s are not stored); with an Idempotency-Key, wait for a twin in
 * flight in this process, then look the key up (service idem: replay,
 * 422, 409); then the effect (inside a savepoint, rolled back when the
 * answer is a business error) and the stored response, as one work of the
 * committer's batch — so the key's record is written in the effect's own
 * transaction, and many requests share one commit; then the after-commit
 * work (submitting a refund to the channel). A twin in another process
 * that stores the same key first makes this request's work roll back and
 * replay the twin's answer. A transient failure stores nothing: the retry
 * runs again. Every lookup is scoped by the key's tenant, so another
 * tenant's object is simply not found (404).
 */
#include "api_int.h"

#include "../crypto/crypto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- answers ---- */

void po_api_fail(struct po_api_call *c, unsigned status, const char *code, const char *message,
                 const char *param)
{
    json_t *e = json_pack("{s:s, s:s}", "code", code, "message", message);
    if (e && param)
        json_object_set_new(e, "param", json_string(param));
    json_decref(c->resp);
    c->resp = json_pack("{s:o}", "error", e);
    c->status = status;
    if (po_strcpy(c->code, sizeof c->code, code))
        c->code[0] = '\0';
}

void po_api_unavailable(struct po_api_call *c)
{
    po_api_fail(c, 503, "store_unavailable", "temporarily unavailable; retry", NULL);
    c->retry_after = 1;
}

void po_api_out_of_memory(struct po_api_call *c)
{
    po_api_fail(c, 503, "out_of_memory", "the gateway is short of memory; retry", NULL);
    c->retry_after = 1;
}

po_err po_api_business(struct po_api_call *c, po_err rc, const char *code, const char *err)
{
    switch (rc) {
    case PO_OK:
        return PO_OK;
    case PO_ERR_NOT_FOUND:
        po_api_fail(c, 404, code[0] ? code : "not_found", err, NULL);
        return PO_OK;
    case PO_ERR_CONFLICT:
        po_api_fail(c, 409, code[0] ? code : "conflict", err, NULL);
        return PO_OK;
    case PO_ERR_INVALID:
        po_api_fail(c, 400, code[0] ? code : "invalid_request", err, NULL);
        return PO_OK;
    default:
        return rc;
    }
}

/* ---- connections ---- */

bool po_api_acquire(struct po_api_call *c)
{
    char err[PO_ERRBUF_SIZE] = "";
    if (c->s)
        return true;
    if (po_store_pool_acquire(c->ctx->gw->pool, PO_POOL_WAIT_MS, &c->s, err, sizeof err)) {
        po_log(PO_LOG_WARN, "request %s: %s", c->req->request_id, err);
        return false;
    }
    return true;
}

void po_api_release(struct po_api_call *c)
{
    if (c->s)
        po_store_pool_release(c->ctx->gw->pool, c->s);
    c->s = NULL;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the POST pipeline ---- */

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
static void request_hash(struct po_api_call *c, char out[65])
{
    char *canon = po_json_dumps(c->in, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    char *msg = NULL;
    /* The route's path as the client sent it (after "/v1/"), as before. */
    if (!canon || po_fmt_alloc(&msg, "POST /v1/%s\n%s", c->req->path + 4, canon) ||
        po_sha256_hex(msg, strlen(msg), out))
        out[0] = '\0'; /* out of memory: the caller answers 503 */
    free(msg);
    free(canon);
}

static void in_flight(struct po_api_call *c)
{
    po_api_fail(c, 409, "idempotency_in_flight",
                "a request with this Idempotency-Key is still being processed; retry shortly",
                NULL);
    c->retry_after = 1;
}

/* Looks the key up, waiting up to idem_wait_ms for a twin in flight in
 * another process. Returns true when this request should run the effect
 * (cl: ABSENT, or CLAIMED from an abandoned record). */
static bool claim(struct po_api_call *c, const struct po_idem_req *q, struct po_idem_claim *cl)
{
    int waited = 0;
    for (;;) {
        if (!po_api_acquire(c)) {
            po_api_unavailable(c);
            return false;
        }
        po_err rc = po_idem_claim(c->s, q, true, cl);
        if (rc) {
            po_api_unavailable(c);
            return false;
        }
        switch (cl->kind) {
        case PO_IDEM_ABSENT:
            return true;
        case PO_IDEM_CLAIMED:
            if (cl->taken_over)
                po_log(PO_LOG_WARN,
                       "request %s: Idempotency-Key of tenant %s on %s was abandoned"
                       " by its first request; running it again",
                       c->req->request_id, c->tenant, q->route);
            return true;
        case PO_IDEM_REPLAY: {
            json_decref(c->resp);
            c->resp = NULL;
            po_err prc = po_json_parse(cl->body, strlen(cl->body), &c->resp, NULL, 0);
            c->status = cl->status;
            c->replayed = true;
            free(cl->body);
            cl->body = NULL;
            if (prc == PO_ERR_NOMEM)
                po_api_out_of_memory(c);
            else if (prc)
                po_api_fail(c, 500, "internal", "stored response unreadable", NULL);
            return false;
        }
        case PO_IDEM_MISMATCH:
            po_api_fail(
                c, 422, "idempotency_key_reused",
                "this Idempotency-Key was used with different parameters; use a new key for a"
                " new request",
                NULL);
            return false;
        case PO_IDEM_IN_FLIGHT:
            if (waited >= c->ctx->gw->cfg->idem_wait_ms) {
                in_flight(c);
                return false;
            }
            po_api_release(c); /* do not hold a connection while waiting */
            sleep_ms(PO_IDEM_POLL_MS);
            waited += PO_IDEM_POLL_MS;
            break;
        }
    }
}

/* The route's effect, inside the transaction of the committer's batch. */
static po_err effect(void *ctx, unsigned *status)
{
    struct po_api_call *c = ctx;
    if (c->ctx->api_hook)
        c->ctx->api_hook(c->ctx->api_hook_ctx, c->route->name);
    po_err rc = c->route->api->effect(c);
    if (!rc && c->status >= 400)
        c->submit_refund[0] = '\0'; /* a business refusal: nothing to submit */
    *status = c->status;
    return rc;
}

static char *render(void *ctx)
{
    struct po_api_call *c = ctx;
    return po_json_dumps(c->resp, JSON_COMPACT | JSON_SORT_KEYS);
}

/* One POST's work in the committer's batch (its own savepoint there). */
struct post_work {
    struct po_api_call *c;
    const struct po_idem_req *q; /* NULL without a key */
    const char *token;           /* "" for an ABSENT key */
};

static po_err post_work(struct po_store *s, void *ctx)
{
    struct post_work *pw = ctx;
    struct po_api_call *c = pw->c;
    PO_ASSERT(!c->s); /* the effect writes on the committer's connection */
    c->s = s;
    json_decref(c->resp);
    c->resp = NULL;
    c->status = 0;
    c->submit_refund[0] = '\0';
    po_err rc = po_idem_apply(s, pw->q, pw->token, effect, render, c);
    c->s = NULL;
    return rc;
}

/* Hands the refund just committed to its channel's refund API: no
 * database connection is held across the call (it may take the API's whole
 * timeout), and at most the outbound bulkhead's share of this tenant's
 * refunds are with a channel at once; one that finds no room stays
 * pending, and the background job submits it later. */
static void submit_refund(struct po_api_call *c)
{
    struct po_refund_job *job = calloc(1, sizeof *job);
    bool found = false;
    po_err rc = job && po_api_acquire(c)
                    ? po_refund_prepare(c->s, c->ctx->gw->cb.accounts, c->ctx->gw->cfg->master_key,
                                        c->tenant, c->submit_refund, job, &found)
                    : PO_ERR_TRANSIENT;
    po_api_release(c);
    if (!rc && found && job->callable) {
        if (po_bulkhead_enter(c->ctx->gw->outbound_bulkhead, c->tenant)) {
            rc = po_refund_call(job);
            po_bulkhead_leave(c->ctx->gw->outbound_bulkhead, c->tenant);
        } else {
            job->callable = false;
            (void)snprintf(job->ans.code, sizeof job->ans.code, "outbound_busy");
            po_log(PO_LOG_WARN,
                   "request %s: refund %s left pending: this tenant's refund submissions in"
                   " flight are at their limit",
                   c->req->request_id, c->submit_refund);
        }
    }
    if (!rc && found && po_api_acquire(c)) {
        char state[16] = "";
        rc = po_refund_record(c->s, job, state, sizeof state);
    } else if (!rc && found) {
        rc = PO_ERR_TRANSIENT;
    }
    if (rc)
        po_log(PO_LOG_WARN, "request %s: refund %s stays pending submission", c->req->request_id,
               c->submit_refund);
    if (job)
        po_refund_job_free(job);
    free(job);
}

/* Runs the effect through the committer; PO_ERR_CONFLICT when the key was
 * taken over or stored first by a twin (the work rolled back). */
static po_err run_effect(struct po_api_call *c, const struct po_idem_req *q, const char *token)
{
    po_api_release(c);
    struct post_work pw = {c, q, token};
    struct po_door d = {NULL, c->ctx->gw->cb.committer}; /* its connection is back in the pool */
    /* Spread over the committer's threads (twins of this process never
     * meet there: they wait in po_idem_local). */
    char route[PO_ID_MAX * 2 + 2];
    PO_ASSERT(po_fmt(route, sizeof route, "%s|%s", c->tenant, c->req->request_id) == PO_OK);
    return po_door_work(&d, route, post_work, &pw);
}

/* A record claimed from an abandoned one goes back to abandoned when
 * nothing was stored under it (its lock would free it later anyway). */
static void release_claim(struct po_api_call *c, const struct po_idem_req *q,
                          const struct po_idem_claim *cl)
{
    if (cl->kind == PO_IDEM_CLAIMED && po_api_acquire(c) && po_idem_release(c->s, q, cl->token))
        po_log(PO_LOG_WARN, "request %s: Idempotency-Key not released; it frees after %d s",
               c->req->request_id, PO_IDEM_LOCK_S);
}

/* The body is read as JSON whatever Content-Type says, but a body that
 * declares itself as something else (a form upload, XML, text) is not
 * what its sender thinks it is sending: refused. No Content-Type, JSON
 * (application/json, application/...+json) and
 * application/x-www-form-urlencoded — what `curl -d` sends unless told
 * otherwise, as the examples in docs/api.md do — are read as JSON. */
static bool media_type_ok(const char *ct)
{
    if (!ct)
        return true;
    size_t n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    static const char *const ok[] = {"application/json", "application/x-www-form-urlencoded"};
    for (int i = 0; i < PO_NELEM(ok); i++)
        if (n == strlen(ok[i]) && strncasecmp(ct, ok[i], n) == 0)
            return true;
    return n > 17 && strncasecmp(ct, "application/", 12) == 0 &&
           strncasecmp(ct + n - 5, "+json", 5) == 0;
}

bool po_api_body_ok(struct po_api_call *c)
{
    if (c->req->body_too_large) {
        po_api_fail(c, 413, "body_too_large", "the body is larger than the limit", NULL);
        return false;
    }
    if (!media_type_ok(c->req->header(c->req->ctx, "Content-Type"))) {
        po_api_fail(c, 415, "unsupported_media_type",
                    "the body is JSON: send it with Content-Type: application/json", NULL);
        return false;
    }
    return true;
}

static void handle_post(struct po_api_call *c, const struct po_api_route *rt)
{
    if (!po_api_body_ok(c))
        return;
    if (!rt->validate(c))
        return;
    const char *key = c->req->header(c->req->ctx, "Idempotency-Key");
    if (key && !idem_key_valid(key)) {
        po_api_fail(c, 400, "invalid_idempotency_key",
                    "Idempotency-Key: 1-255 visible ASCII characters (a UUID is a good choice)",
                    NULL);
        return;
    }
    char hash[65];
    struct po_idem_req q = {c->tenant, c->route->name, key, hash};
    struct po_idem_claim cl;
    memset(&cl, 0, sizeof cl);
    po_err rc = PO_OK;
    bool before_answered = false;
    if (key) {
        request_hash(c, hash);
        if (!hash[0]) {
            po_api_unavailable(c);
            return;
        }
        po_api_release(c); /* never held while waiting for a twin */
        rc = po_idem_local_enter(c->ctx->gw->idem_local, &q, c->ctx->gw->cfg->idem_wait_ms);
        if (rc) {
            if (rc == PO_ERR_CONFLICT)
                in_flight(c);
            else
                po_api_unavailable(c);
            return;
        }
        /* A twin in another process may store the key first: then look
         * again (its answer, or it is still in flight). */
        for (int attempt = 0;; attempt++) {
            rc = PO_OK;
            if (!claim(c, &q, &cl))
                break;
            if (attempt == 0 && rt->before && !rt->before(c)) {
                before_answered = true;
                break;
            }
            rc = run_effect(c, &q, cl.token);
            if (rc != PO_ERR_CONFLICT || cl.kind != PO_IDEM_ABSENT || attempt == 2)
                break;
        }
        po_idem_local_leave(c->ctx->gw->idem_local, &q);
    } else if (rt->before && !rt->before(c)) {
        before_answered = true;
    } else {
        rc = run_effect(c, NULL, "");
    }
    if (before_answered) {
        /* Nothing is stored under the key: a record claimed from an
         * abandoned one goes back to abandoned, and the retry runs. */
        if (key)
            release_claim(c, &q, &cl);
        return;
    }
    if (rc == PO_ERR_CONFLICT && key) {
        /* Our claim was taken over: the other request owns the key. */
        po_api_fail(c, 409, "idempotency_in_flight",
                    "this request's Idempotency-Key was taken over by a retry; retry shortly",
                    NULL);
        c->retry_after = 1;
        return;
    }
    if (rc) {
        po_log(PO_LOG_WARN, "request %s: %s failed: %s; nothing stored", c->req->request_id,
               c->route->name, po_err_name(rc));
        c->submit_refund[0] = '\0';
        po_api_unavailable(c);
        /* A record claimed from an abandoned one goes back to abandoned. */
        if (key)
            release_claim(c, &q, &cl);
    }
    if (c->submit_refund[0])
        submit_refund(c);
}

/* ---- authentication and dispatch ---- */

static bool authenticate(struct po_api_call *c)
{
    const char *h = c->req->header(c->req->ctx, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) != 0) {
        po_api_fail(c, 401, "unauthorized",
                    "send the tenant's API key as 'Authorization: Bearer po_…'", NULL);
        return false;
    }
    if (!po_api_acquire(c)) {
        po_api_unavailable(c);
        return false;
    }
    po_err rc = po_apikey_auth(c->s, h + 7, c->tenant);
    if (rc == PO_ERR_NOT_FOUND) {
        po_api_fail(c, 401, "invalid_api_key", "the API key is not valid or has been revoked",
                    NULL);
        return false;
    }
    if (rc) {
        po_api_unavailable(c);
        return false;
    }
    return true;
}

/* The API request's access-log line: the route and code are ours, the
 * tenant a checked identifier (or ""). */
static void log_line(const struct po_api_call *c, unsigned status, uint64_t micros)
{
    char extra[256];
    (void)snprintf(
        extra, sizeof extra, ",\"route\":\"%s\",\"tenant\":\"%s\",\"code\":\"%s\",\"replayed\":%s",
        c->route ? c->route->name : "", po_id_valid(c->tenant, PO_ID_MAX) ? c->tenant : "", c->code,
        c->replayed ? "true" : "false");
    po_access_line(c->req, "api", status, micros, extra);
}

/* The key's id (po_<key_id>_…) from the Authorization header,
 * unauthenticated: only a hint ("" when there is none). */
static void key_id_of(const struct po_hreq *req, char out[PO_APIKEY_ID_LEN + 1])
{
    out[0] = '\0';
    const char *h = req->header(req->ctx, "Authorization");
    if (h && strncmp(h, "Bearer po_", 10) == 0 && strlen(h) > 10 + PO_APIKEY_ID_LEN &&
        h[10 + PO_APIKEY_ID_LEN] == '_') {
        memcpy(out, h + 10, PO_APIKEY_ID_LEN);
        out[PO_APIKEY_ID_LEN] = '\0';
    }
}

void po_api_lane(const struct po_http_ctx *ctx, const struct po_hreq *req, char *out, size_t cap)
{
    char key_id[PO_APIKEY_ID_LEN + 1];
    key_id_of(req, key_id);
    po_bulkhead_hinted(ctx->gw->api_bulkhead, key_id, out, cap);
}

static void dispatch(struct po_api_call *c, const char *allow)
{
    if (!c->route && !allow) {
        po_api_fail(c, 404, "not_found", "no such route", NULL);
        return;
    }
    char key_id[PO_APIKEY_ID_LEN + 1];
    key_id_of(c->req, key_id);
    /* A tenant already over its share while others are active is refused
     * before its key is checked (no database round trip for a flood). */
    if (po_bulkhead_hint_over_share(c->ctx->gw->api_bulkhead, key_id)) {
        po_api_fail(c, 503, "tenant_busy",
                    "too many requests of this tenant in flight; retry shortly", NULL);
        c->retry_after = 1;
        return;
    }
    if (!authenticate(c))
        return;
    if (key_id[0])
        po_bulkhead_hint(c->ctx->gw->api_bulkhead, key_id, c->tenant);
    /* The tenant's share of the workers: beyond it, 503 at once. */
    if (!po_bulkhead_enter(c->ctx->gw->api_bulkhead, c->tenant)) {
        po_api_fail(c, 503, "tenant_busy",
                    "too many requests of this tenant in flight; retry shortly", NULL);
        c->retry_after = 1;
        return;
    }
    c->in_bulkhead = true;
    if (!c->route) {
        c->allow = allow;
        po_api_fail(c, 405, "method_not_allowed", "method not allowed on this route", NULL);
        return;
    }
    const char *param = c->req->params[0];
    if (strchr(c->route->name, '{')) {
        if (!po_id_valid(param, PO_ID_MAX)) {
            po_api_fail(c, 404,
                        strstr(c->route->name, "refund")    ? "refund_not_found"
                        : strstr(c->route->name, "webhook") ? "endpoint_not_found"
                                                            : "order_not_found",
                        "no such object", NULL);
            return;
        }
        c->no = param;
    }
    if (c->route->api->get)
        c->route->api->get(c);
    else
        handle_post(c, c->route->api);
}

void po_api_handle(const struct po_http_ctx *ctx, const struct po_route *route, const char *allow,
                   const struct po_hreq *req, struct po_hresp *out)
{
    uint64_t start = po_now_us();
    struct po_api_call c = {.ctx = ctx, .req = req, .route = route};
    dispatch(&c, allow);
    po_api_release(&c);
    if (c.in_bulkhead)
        po_bulkhead_leave(ctx->gw->api_bulkhead, c.tenant);
    char *body = c.resp ? po_json_dumps(c.resp, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (!body)
        po_api_fail(&c, 500, "internal", "out of memory", NULL);
    memset(out, 0, sizeof *out);
    out->status = body ? (c.status ? c.status : 500) : 500;
    out->content_type = "application/json";
    out->body =
        body ? body : strdup("{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}");
    po_hresp_header(out, "X-Request-Id", req->request_id);
    if (c.replayed)
        po_hresp_header(out, "Idempotent-Replayed", "true");
    if (c.retry_after) {
        char ra[16];
        (void)snprintf(ra, sizeof ra, "%u", c.retry_after);
        po_hresp_header(out, "Retry-After", ra);
    }
    if (c.allow)
        po_hresp_header(out, "Allow", c.allow);
    if (out->status == 401)
        po_hresp_header(out, "WWW-Authenticate", "Bearer realm=\"payonce\"");
    log_line(&c, out->status, po_now_us() - start);
    po_metrics_api(c.route, out->status, c.replayed);
    if (c.state_free)
        c.state_free(c.state);
    json_decref(c.in);
    json_decref(c.resp);
}
