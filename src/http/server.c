/*
 * server.c — libmicrohttpd glue, the only file of payonce that sees it:
 * listening, limits, request bodies, the route table's dispatch, the
 * health/ready/metrics endpoints, and turning answers into responses.
 * The parts it hands requests to (the store pool, the channel-account
 * cache, the worker pool, the committer) are the gateway's
 * (service/gateway/gateway.c).
 *
 * Threads: a few event threads (libmicrohttpd's epoll thread pool, one a
 * core by default) serve every connection; none of them ever waits for
 * the database. A callback is verified on its event thread, then its
 * connection is suspended while the event waits for its batch in the
 * committer, and resumed when the batch committed. Tenant API requests,
 * /readyz and account loads run on the worker pool, also with the
 * connection suspended. So an idle keep-alive connection costs a socket
 * and a little memory, not a thread.
 * Limits: body (a Content-Length over it answered 413 at once, unread; bytes
 * counted as they arrive, 413 the moment they pass it), header memory
 * (per-connection memory limit; MHD answers 431/closes), connections
 * (refused beyond the limit, and beyond the per-address cap), absolute
 * deadlines for a request's head and body (the guard), idle time per
 * connection, the worker and committer queues (503 / retry at once).
 */
#include "http_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct po_server {
    struct MHD_Daemon *daemon;
    struct MHD_Daemon *ops_daemon; /* --ops-listen: health, readiness, metrics */
    struct po_gateway *gw;
    struct po_http_ctx http; /* what the handlers see */
    size_t body_max;
    int64_t (*clock)(void *ctx); /* tests: NULL, the real one */
    void *clock_ctx;
    atomic_ulong next_id;
    unsigned long id_base;
    atomic_int active;    /* event threads inside dispatch() */
    atomic_int pending;   /* requests suspended for an answer */
    atomic_bool stopping; /* new requests are answered 503 */
    atomic_int conns;     /* open connections */
    int max_conns;
    atomic_uint_fast64_t refused, refused_logged_s;
    atomic_uint_fast64_t lib_log_s, lib_log_n, lib_log_dropped; /* mhd_log's rate */
    /* every open connection, for the head and body deadlines (guard) */
    pthread_mutex_t track_mu;
    struct track *tracked;
    int64_t head_us, body_us;
    atomic_uint_fast64_t deadline_closed, deadline_logged_s;
    /* the housekeeping thread: the guard's sweep, every second */
    pthread_t keeper;
    bool keeper_started, keeper_stop;
    pthread_mutex_t keeper_mu;
    pthread_cond_t keeper_cv;
    /* answers held back before they go (hold_answer; under keeper_mu) */
    int nheld;
    struct held {
        struct po_hcall *h;
        uint64_t due_us;
    } held[PO_HELD_MAX];
};

enum { ST_RUNNING, ST_SUSPENDED, ST_DONE };

/* ---- the guard: absolute deadlines for a request's head and body ----
 *
 * libmicrohttpd's timeout is an idle timeout: a client that sends one byte
 * every few seconds resets it forever. Every connection is tracked here
 * with its phase and when the phase began; the keeper thread closes
 * (shutdown(2), which libmicrohttpd then sees as the peer's close) any
 * connection whose request head is not complete within --header-timeout
 * of its opening or of its previous answer, or whose body is not complete
 * within --body-timeout of its head. A connection whose request is with
 * its handler is never touched: the request's own deadline governs it. */
enum { PH_HEAD, PH_BODY, PH_HANDLER };

struct track {
    struct track *prev, *next;
    int fd;
    struct sockaddr_storage peer; /* to tell a reused descriptor apart */
    socklen_t peer_len;
    atomic_int phase;
    _Atomic int64_t since_us;
};

/* The connection's entry (NULL when it could not be tracked). */
static struct track *track_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

static void track_phase(struct track *t, int phase)
{
    if (!t)
        return;
    atomic_store(&t->since_us, (int64_t)po_now_us());
    atomic_store(&t->phase, phase);
}

static bool same_peer(const struct track *t)
{
    struct sockaddr_storage now;
    socklen_t len = sizeof now;
    return getpeername(t->fd, (struct sockaddr *)&now, &len) == 0 && len == t->peer_len &&
           memcmp(&now, &t->peer, len) == 0;
}

/* Closes the connections past their deadline; keeper thread, once a second. */
static void guard_sweep(struct po_server *srv)
{
    int64_t now = (int64_t)po_now_us();
    uint64_t closed = 0;
    pthread_mutex_lock(&srv->track_mu);
    for (struct track *t = srv->tracked; t; t = t->next) {
        int ph = atomic_load(&t->phase);
        int64_t age = now - atomic_load(&t->since_us);
        if ((ph == PH_HEAD && age > srv->head_us) || (ph == PH_BODY && age > srv->body_us)) {
            if (same_peer(t) && shutdown(t->fd, SHUT_RDWR) == 0)
                closed++;
            atomic_store(&t->phase, PH_HANDLER); /* once */
        }
    }
    pthread_mutex_unlock(&srv->track_mu);
    if (!closed)
        return;
    uint64_t n = atomic_fetch_add(&srv->deadline_closed, closed) + closed;
    uint64_t t = (uint64_t)time(NULL), last = atomic_load(&srv->deadline_logged_s);
    if (t != last && atomic_compare_exchange_strong(&srv->deadline_logged_s, &last, t))
        po_log(PO_LOG_WARN,
               "http: closed %llu connection(s) that did not send their request in time"
               " (header %lld s, body %lld s; %llu so far)",
               (unsigned long long)closed, (long long)(srv->head_us / 1000000),
               (long long)(srv->body_us / 1000000), (unsigned long long)n);
}

/* A header or query argument, copied off the connection. */
struct kv {
    enum MHD_ValueKind kind;
    const char *k, *v;
    size_t vlen; /* a NUL inside the value makes it longer than strlen(v) */
};

/* Per-request state across libmicrohttpd's access-handler calls. */
struct req {
    struct po_server *srv;
    struct MHD_Connection *conn;
    struct po_body body;
    struct track *track; /* the connection's deadline entry (guard) */
    bool started;        /* handed to its handler */
    atomic_int state;    /* ST_*: suspension vs. completion, see on_request */
    struct kv *kv;       /* headers and arguments (one allocation) */
    size_t nkv;
    char id[24];
    struct po_hcall h;
};

/* Queues an answer on the connection and releases it. */
static enum MHD_Result send_answer(struct MHD_Connection *c, struct po_hresp *a)
{
    size_t len = a->body ? strlen(a->body) : 0;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, a->body ? a->body : (void *)(uintptr_t) "",
                                        a->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) { /* out of memory: the connection is closed without an answer */
        free(a->body);
        a->body = NULL; /* on_completed frees it otherwise (test_alloc) */
        return MHD_NO;
    }
    a->body = NULL; /* owned by the response now */
    if (a->content_type)
        MHD_add_response_header(r, "Content-Type", a->content_type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    for (int i = 0; i < a->nheaders; i++)
        MHD_add_response_header(r, a->hname[i], a->hvalue[i]);
    enum MHD_Result ok = MHD_queue_response(c, a->status, r);
    MHD_destroy_response(r);
    po_metrics_http(a->status);
    return ok;
}

static const char *lookup(const struct req *q, enum MHD_ValueKind kind, const char *name)
{
    for (size_t i = 0; i < q->nkv; i++)
        if (q->kv[i].kind == kind && (kind == MHD_HEADER_KIND ? strcasecmp(q->kv[i].k, name)
                                                              : strcmp(q->kv[i].k, name)) == 0)
            return q->kv[i].v;
    return NULL;
}

static const char *header_of(void *ctx, const char *name)
{
    return lookup(ctx, MHD_HEADER_KIND, name);
}

static size_t headers_of(void *ctx, char *buf, size_t cap)
{
    const struct req *q = ctx;
    size_t n = 0;
    for (size_t i = 0; i < q->nkv; i++) {
        const struct kv *e = &q->kv[i];
        if (e->kind != MHD_HEADER_KIND)
            continue;
        size_t klen = strlen(e->k), need = klen + 2 + e->vlen + 2;
        if (n + need < cap) {
            memcpy(buf + n, e->k, klen);
            memcpy(buf + n + klen, ": ", 2);
            if (e->vlen)
                memcpy(buf + n + klen + 2, e->v, e->vlen);
            memcpy(buf + n + klen + 2 + e->vlen, "\r\n", 2);
        }
        n += need;
    }
    if (n < cap)
        buf[n] = '\0';
    return n;
}

static const char *arg_of(void *ctx, const char *name)
{
    return lookup(ctx, MHD_GET_ARGUMENT_KIND, name);
}

/* Copying the headers and arguments: count and size, then copy. */
struct kv_copy {
    struct req *q;
    size_t bytes;
    char *at;
};

static enum MHD_Result kv_size(void *cls, enum MHD_ValueKind kind, const char *k, size_t klen,
                               const char *v, size_t vlen)
{
    (void)kind;
    (void)k;
    struct kv_copy *cp = cls;
    cp->q->nkv++;
    cp->bytes += klen + 1 + (v ? vlen + 1 : 0);
    return MHD_YES;
}

static enum MHD_Result kv_copy(void *cls, enum MHD_ValueKind kind, const char *k, size_t klen,
                               const char *v, size_t vlen)
{
    struct kv_copy *cp = cls;
    struct kv *e = &cp->q->kv[cp->q->nkv++];
    e->kind = kind;
    e->k = memcpy(cp->at, k, klen);
    cp->at[klen] = '\0';
    cp->at += klen + 1;
    e->v = NULL;
    e->vlen = 0;
    if (v) {
        e->v = memcpy(cp->at, v, vlen);
        cp->at[vlen] = '\0';
        cp->at += vlen + 1;
        e->vlen = vlen;
    }
    return MHD_YES;
}

/* The request's headers and query arguments, copied so that a handler may
 * read them on another thread while the connection is suspended. Bounded
 * by the connection's memory limit. */
/* The peer's address as text (no port), "" when unknown. */
static void client_address(struct MHD_Connection *c, char *out, size_t cap)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    out[0] = '\0';
    if (sa && sa->sa_family == AF_INET)
        (void)inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out,
                        (socklen_t)cap);
    else if (sa && sa->sa_family == AF_INET6)
        (void)inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out,
                        (socklen_t)cap);
}

static po_err capture(struct req *q, struct MHD_Connection *c)
{
    const enum MHD_ValueKind kinds = MHD_HEADER_KIND | MHD_GET_ARGUMENT_KIND;
    struct kv_copy cp = {q, 0, NULL};
    q->nkv = 0;
    (void)MHD_get_connection_values_n(c, kinds, kv_size, &cp);
    size_t n = q->nkv;
    q->kv = malloc(n * sizeof *q->kv + cp.bytes + 1);
    if (!q->kv)
        return PO_ERR_NOMEM;
    cp.at = (char *)(q->kv + n);
    q->nkv = 0;
    (void)MHD_get_connection_values_n(c, kinds, kv_copy, &cp);
    PO_ASSERT(q->nkv == n);
    return PO_OK;
}

/* Headers that may appear once: with two copies, which one payonce reads
 * and which one a proxy or the channel's SDK meant may differ (another
 * tenant's key, another signature), so such a request is refused. So is
 * a body framed both by Content-Length and by Transfer-Encoding (request
 * smuggling between a proxy and payonce). Returns the error code (NULL:
 * none) and says why into why. */
static const char *bad_header(const struct req *q, char *why, size_t cap)
{
    static const char *const once[] = {
        "Authorization",       "Idempotency-Key",          "Content-Type",
        "Content-Length",      "Transfer-Encoding",        "Host",
        "Wechatpay-Signature", "Wechatpay-Serial",         "Wechatpay-Timestamp",
        "Wechatpay-Nonce",     "Wechatpay-Signature-Type", "Stripe-Signature"};
    for (int i = 0; i < PO_NELEM(once); i++) {
        int seen = 0;
        for (size_t k = 0; k < q->nkv; k++)
            seen += q->kv[k].kind == MHD_HEADER_KIND && strcasecmp(q->kv[k].k, once[i]) == 0;
        if (seen > 1) {
            (void)snprintf(why, cap, "%s is given %d times", once[i], seen);
            return "ambiguous_header";
        }
    }
    /* RFC 9110 5.5: CR, LF and NUL are never part of a field value (the
     * HTTP library lets a bare CR and a NUL through); nor other controls. */
    for (size_t k = 0; k < q->nkv; k++)
        for (const unsigned char *v = (const unsigned char *)q->kv[k].v;
             q->kv[k].kind == MHD_HEADER_KIND &&
             v < (const unsigned char *)q->kv[k].v + q->kv[k].vlen;
             v++)
            if ((*v < 0x20 && *v != '\t') || *v == 0x7f) {
                (void)snprintf(why, cap, "the value of %.40s holds a control character",
                               q->kv[k].k);
                return "invalid_header";
            }
    if (lookup(q, MHD_HEADER_KIND, "Content-Length") &&
        lookup(q, MHD_HEADER_KIND, "Transfer-Encoding")) {
        (void)snprintf(why, cap, "Content-Length and Transfer-Encoding both frame the body");
        return "ambiguous_header";
    }
    return NULL;
}

static void readyz_job(void *arg)
{
    struct po_hcall *h = arg;
    struct po_store *s = NULL;
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_store_pool_acquire(h->ctx->gw->pool, 1000, &s, err, sizeof err);
    if (!rc) {
        rc = po_store_ping(s, err, sizeof err);
        po_store_pool_release(h->ctx->gw->pool, s);
    }
    if (rc)
        po_log(PO_LOG_WARN, "readyz: store not ready: %s", err);
    po_hresp_set(&h->resp, rc ? 503 : 200, "text/plain", rc ? "store unavailable\n" : "ready\n");
    h->complete(h);
}

static void api_job(void *arg)
{
    struct po_hcall *h = arg;
    po_api_handle(h->ctx, h->route, h->allow, &h->req, &h->resp);
    h->logged = true;
    h->complete(h);
}

static void unavailable(struct po_hresp *out, const char *why)
{
    po_hresp_set(out, 503, "application/json", why);
    po_hresp_header(out, "Retry-After", "1");
}

/* Runs fn(h) on the worker pool, in tenant's lane; false (answered 503)
 * when its queue is full. */
static bool to_workers(struct po_server *srv, struct po_hcall *h, const char *tenant,
                       void (*fn)(void *))
{
    if (po_workers_submit(srv->http.gw->cb.workers, tenant, fn, h) == PO_OK)
        return true;
    po_log(PO_LOG_WARN, "request %s: the worker queue is full", h->req.request_id);
    unavailable(&h->resp, "{\"error\":{\"code\":\"overloaded\",\"message\":\"retry shortly\"}}");
    return false;
}

static bool to_workers_fn(void *srv, struct po_hcall *h, void (*fn)(void *))
{
    return to_workers(srv, h, NULL, fn);
}

/* Finds the route and starts its handler; true when the answer comes later
 * (complete()). Every request gets exactly one answer. */
static bool route(struct po_server *srv, struct po_hcall *h)
{
    struct po_hreq *req = &h->req;
    const struct po_route *rt = NULL;
    char allow[64];
    enum po_route_match m =
        po_route_find(req->method, req->path, &rt, req->params, allow, sizeof allow);
    /* With an operations listener, /metrics and the operator's console
     * (/admin) are served there only, and only they, health and
     * readiness are served there. */
    bool ops_route = m == PO_ROUTE_FOUND && (rt->kind == PO_RK_HEALTH || rt->kind == PO_RK_READY ||
                                             rt->kind == PO_RK_METRICS || rt->kind == PO_RK_ADMIN);
    if ((h->ops && !ops_route) || (!h->ops && srv->ops_daemon && m == PO_ROUTE_FOUND &&
                                   (rt->kind == PO_RK_METRICS || rt->kind == PO_RK_ADMIN))) {
        po_hresp_set(&h->resp, 404, "application/json",
                     "{\"error\":{\"code\":\"not_found\",\"message\":\"no such route\"}}");
        return false;
    }
    /* The tenant API (the bearer key's pipeline), except its description. */
    if (strncmp(req->path, "/v1/", 4) == 0 && !(m == PO_ROUTE_FOUND && rt->kind == PO_RK_OPENAPI)) {
        h->route = m == PO_ROUTE_FOUND ? rt : NULL;
        h->allow = m == PO_ROUTE_NO_METHOD ? h->allow_buf : NULL;
        PO_ASSERT(po_strcpy(h->allow_buf, sizeof h->allow_buf, allow) == PO_OK ||
                  m != PO_ROUTE_NO_METHOD);
        char lane[PO_ID_MAX + 1];
        po_api_lane(h->ctx, req, lane, sizeof lane);
        return to_workers(srv, h, lane, api_job);
    }
    if (m == PO_ROUTE_NO_PATH) {
        po_hresp_set(&h->resp, 404, "application/json",
                     "{\"error\":{\"code\":\"not_found\",\"message\":\"no such route\"}}");
        return false;
    }
    if (m == PO_ROUTE_NO_METHOD) {
        po_hresp_set(&h->resp, 405, "application/json",
                     "{\"error\":{\"code\":\"method_not_allowed\",\"message\":\"see the Allow"
                     " header\"}}");
        po_hresp_header(&h->resp, "Allow", allow);
        return false;
    }
    h->route = rt;
    switch (rt->kind) {
    case PO_RK_CALLBACK:
        return po_notify_start(h);
    case PO_RK_HEALTH:
        po_hresp_set(&h->resp, 200, "text/plain", "ok\n");
        return false;
    case PO_RK_READY:
        return to_workers(srv, h, NULL, readyz_job);
    case PO_RK_METRICS: {
        struct po_committer_stats st;
        struct po_webhooks_stats ws;
        po_committer_stats(srv->http.gw->cb.committer, &st);
        po_webhooks_stats(srv->http.gw->webhooks, &ws);
        char *m_text = po_metrics_render(&st, srv->http.gw->webhooks ? &ws : NULL,
                                         po_accounts_loads(srv->http.gw->cb.accounts));
        po_hresp_set(&h->resp, m_text ? 200 : 500, "text/plain; version=0.0.4",
                     m_text ? m_text : "");
        free(m_text);
        return false;
    }
    case PO_RK_ADMIN:
        return po_admin_start(h, to_workers_fn, srv);
    case PO_RK_OPENAPI:
        /* Public, like the docs it is: it names no tenant and no secret. */
        po_hresp_set(&h->resp, 200, "application/json", po_openapi_json);
        if (!h->resp.body) /* out of memory: no half answer */
            po_hresp_set(&h->resp, 500, NULL, NULL);
        return false;
    case PO_RK_API:
        PO_ASSERT(!"API routes start with /v1/");
        break;
    }
    return false;
}

/* route(), unless the server is stopping (see po_server_stop). */
static bool dispatch(struct po_server *srv, struct po_hcall *h)
{
    atomic_fetch_add(&srv->active, 1);
    bool pending = false;
    if (atomic_load(&srv->stopping))
        unavailable(&h->resp, "{\"error\":{\"code\":\"shutting_down\",\"message\":\"retry\"}}");
    else
        pending = route(srv, h);
    atomic_fetch_sub(&srv->active, 1);
    return pending;
}

/* The handler's answer is final (any thread): resume the connection if it
 * is suspended already; otherwise on_request sees ST_DONE and resumes it. */
static void complete(struct po_hcall *h)
{
    struct req *q = (struct req *)((char *)h - offsetof(struct req, h));
    if (atomic_exchange(&q->state, ST_DONE) == ST_SUSPENDED)
        MHD_resume_connection(q->conn);
}

/* Sends the request's answer, with its access-log line when the handler
 * wrote none (health, metrics, 404, 405, 503 while stopping, …). */
static enum MHD_Result answer(struct MHD_Connection *c, struct req *q)
{
    if (!q->h.logged)
        po_access_line(&q->h.req, "http", q->h.resp.status, po_now_us() - q->h.start_us, NULL);
    return send_answer(c, &q->h.resp);
}

static enum MHD_Result handle(struct po_server *srv, bool ops, struct MHD_Connection *c,
                              const char *url, const char *method, const char *upload_data,
                              size_t *upload_data_size, void **req_cls)
{
    struct req *q = *req_cls;
    if (!q) {
        q = calloc(1, sizeof *q);
        if (!q)
            return MHD_NO;
        q->h.ops = ops;
        q->srv = srv;
        q->conn = c;
        q->h.start_us = po_now_us();
        (void)snprintf(q->id, sizeof q->id, "%lx-%lx", srv->id_base,
                       atomic_fetch_add(&srv->next_id, 1));
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        int64_t n = 0;
        if (cl && (po_parse_i64(cl, 0, INT64_MAX, &n) || (uint64_t)n > srv->body_max))
            q->body.too_large = true;
        *req_cls = q;
        q->track = track_of(c); /* lives as long as the connection */
        track_phase(q->track, PH_BODY);
        /* A declared body over the limit is answered 413 now, unread (the
         * connection is closed after the answer). */
        if (!q->body.too_large)
            return MHD_YES;
    } else if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (q->started)
            return MHD_YES; /* answered already (413): the rest is dropped */
        if (po_body_append(&q->body, upload_data, n, srv->body_max))
            return MHD_NO;
        if (!q->body.too_large)
            return MHD_YES;
        /* past the limit while arriving (chunked): answered 413 now */
    }
    if (q->started) { /* resumed: the answer is final */
        if (q->h.finish)
            q->h.finish(&q->h);
        atomic_fetch_sub(&srv->pending, 1);
        return answer(c, q);
    }
    q->started = true;
    track_phase(q->track, PH_HANDLER);
    if (capture(q, c))
        return MHD_NO;
    q->h.req =
        (struct po_hreq){.method = method,
                         .path = url,
                         .header = header_of,
                         .headers = headers_of,
                         .arg = arg_of,
                         .ctx = q,
                         .body = q->body.data ? q->body.data : "",
                         .body_len = q->body.len,
                         .body_too_large = q->body.too_large,
                         .request_id = q->id,
                         .now_unix = srv->clock ? srv->clock(srv->clock_ctx) : (int64_t)time(NULL)};
    client_address(c, q->h.req.client_addr, sizeof q->h.req.client_addr);
    q->h.ctx = &srv->http;
    q->h.complete = complete;
    char why[96], safe[96 * 6], body[sizeof safe + 80];
    const char *bad = bad_header(q, why, sizeof why);
    if (bad) {
        /* why names a header the client sent: escaped, or the body would
         * not be JSON (a quote or backslash in the name). */
        po_json_escape(why, strlen(why), safe, sizeof safe);
        (void)snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", bad,
                       safe);
        po_hresp_set(&q->h.resp, 400, "application/json", body);
        return answer(c, q);
    }
    if (!dispatch(srv, &q->h))
        return answer(c, q);
    /* Pending: suspend until complete(). Whichever of the two comes second
     * resumes, so a completion that raced ahead is not lost. */
    atomic_fetch_add(&srv->pending, 1);
    MHD_suspend_connection(c);
    if (atomic_exchange(&q->state, ST_SUSPENDED) == ST_DONE)
        MHD_resume_connection(c);
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    (void)version;
    return handle(cls, false, c, url, method, upload_data, upload_data_size, req_cls);
}

/* The operations listener (--ops-listen): health, readiness and metrics. */
static enum MHD_Result on_ops_request(void *cls, struct MHD_Connection *c, const char *url,
                                      const char *method, const char *version,
                                      const char *upload_data, size_t *upload_data_size,
                                      void **req_cls)
{
    (void)version;
    return handle(cls, true, c, url, method, upload_data, upload_data_size, req_cls);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct req *q = *req_cls;
    if (q) {
        track_phase(q->track, PH_HEAD); /* keep-alive: the next request's head */
        free(q->h.resp.body);
        po_body_free(&q->body);
        free(q->kv);
        free(q);
    }
    *req_cls = NULL;
}

/* Parses HOST:PORT (IPv4 literal, localhost, or [IPv6]). */
static po_err parse_listen(const char *listen, struct sockaddr_storage *out, socklen_t *len,
                           char *err, size_t errcap)
{
    char host[128];
    const char *colon = strrchr(listen ? listen : "", ':');
    int64_t port = 0;
    memset(out, 0, sizeof *out);
    if (!colon || (size_t)(colon - listen) >= sizeof host ||
        po_parse_i64(colon + 1, 0, 65535, &port)) {
        po_errf(err, errcap, "--listen must be HOST:PORT, e.g. 127.0.0.1:8080");
        return PO_ERR_INVALID;
    }
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    if (strcmp(host, "localhost") == 0 || !*host)
        PO_ASSERT(po_strcpy(host, sizeof host, "127.0.0.1") == PO_OK);
    size_t hl = strlen(host);
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)out;
        host[hl - 1] = '\0';
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1)
            goto bad;
        *len = sizeof *a6;
        return PO_OK;
    }
    struct sockaddr_in *a4 = (struct sockaddr_in *)out;
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
        goto bad;
    *len = sizeof *a4;
    return PO_OK;
bad:
    po_errf(err, errcap, "--listen host '%s' is not an IP address", host);
    return PO_ERR_INVALID;
}

/* Beyond --max-connections a new connection is refused at once (closed),
 * not left waiting in the listen backlog; logged at most once a second. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    (void)addr;
    (void)addrlen;
    struct po_server *srv = cls;
    if (atomic_load(&srv->conns) < srv->max_conns)
        return MHD_YES;
    uint64_t n = atomic_fetch_add(&srv->refused, 1) + 1;
    uint64_t t = (uint64_t)time(NULL), last = atomic_load(&srv->refused_logged_s);
    if (t != last && atomic_compare_exchange_strong(&srv->refused_logged_s, &last, t))
        po_log(PO_LOG_WARN,
               "http: connection limit (%d) reached: refusing new connections (%llu so far)",
               srv->max_conns, (unsigned long long)n);
    return MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
    struct po_server *srv = cls;
    bool started = code == MHD_CONNECTION_NOTIFY_STARTED;
    atomic_fetch_add(&srv->conns, started ? 1 : -1);
    struct track *t = *socket_ctx;
    if (started) {
        const union MHD_ConnectionInfo *i =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        t = i ? calloc(1, sizeof *t) : NULL;
        if (!t)
            return; /* untracked: the idle timeout still applies */
        t->fd = i->connect_fd;
        t->peer_len = sizeof t->peer;
        if (getpeername(t->fd, (struct sockaddr *)&t->peer, &t->peer_len) != 0)
            t->peer_len = 0;
        atomic_store(&t->since_us, (int64_t)po_now_us());
        pthread_mutex_lock(&srv->track_mu);
        t->next = srv->tracked;
        if (t->next)
            t->next->prev = t;
        srv->tracked = t;
        pthread_mutex_unlock(&srv->track_mu);
        *socket_ctx = t;
        return;
    }
    if (!t)
        return;
    pthread_mutex_lock(&srv->track_mu);
    if (t->prev)
        t->prev->next = t->next;
    else
        srv->tracked = t->next;
    if (t->next)
        t->next->prev = t->prev;
    pthread_mutex_unlock(&srv->track_mu);
    free(t);
    *socket_ctx = NULL;
}

/* libmicrohttpd's own messages, routed into the JSON log: at most
 * PO_HTTP_LIB_LOG_PER_S a second (a flood of refused or broken
 * connections must not flood the log); what was left out is counted in
 * the next line written. */
static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct po_server *srv = cls;
    uint64_t now = (uint64_t)time(NULL), win = atomic_load(&srv->lib_log_s);
    if (now != win && atomic_compare_exchange_strong(&srv->lib_log_s, &win, now))
        atomic_store(&srv->lib_log_n, 0);
    if (atomic_fetch_add(&srv->lib_log_n, 1) >= PO_HTTP_LIB_LOG_PER_S) {
        atomic_fetch_add(&srv->lib_log_dropped, 1);
        return;
    }
    char msg[512];
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    uint64_t dropped = atomic_exchange(&srv->lib_log_dropped, 0);
    if (dropped)
        po_log(PO_LOG_WARN, "http: %s (%llu similar messages left out)", msg,
               (unsigned long long)dropped);
    else
        po_log(PO_LOG_WARN, "http: %s", msg);
}

/* The housekeeping thread: every second, closes connections past their
 * head or body deadline (the guard). */
/* An answer made now that goes out only after PO_HELD_MS (the keeper sends
 * it): a refusal a client would otherwise ask again at once — a sign-in
 * over its rate limit — then costs a looping client a connection held for
 * that long, not a request served; no thread waits for it. False (the
 * caller answers now) when PO_HELD_MAX answers are held already. */
static bool hold_answer(void *ctx, struct po_hcall *h)
{
    struct po_server *srv = ctx;
    pthread_mutex_lock(&srv->keeper_mu);
    bool ok = srv->nheld < PO_HELD_MAX && !srv->keeper_stop;
    if (ok)
        srv->held[srv->nheld++] = (struct held){h, po_now_us() + PO_HELD_MS * 1000};
    pthread_mutex_unlock(&srv->keeper_mu);
    return ok;
}

/* Sends the held answers that are due (all of them: every), oldest first;
 * called without keeper_mu. */
static void release_held(struct po_server *srv, bool every)
{
    struct po_hcall *go[PO_HELD_MAX];
    int n = 0, k = 0;
    uint64_t now = po_now_us();
    pthread_mutex_lock(&srv->keeper_mu);
    for (int i = 0; i < srv->nheld; i++) {
        if (every || srv->held[i].due_us <= now)
            go[n++] = srv->held[i].h;
        else
            srv->held[k++] = srv->held[i];
    }
    srv->nheld = k;
    pthread_mutex_unlock(&srv->keeper_mu);
    for (int i = 0; i < n; i++)
        go[i]->complete(go[i]);
}

static void *keeper_main(void *arg)
{
    struct po_server *srv = arg;
    pthread_mutex_lock(&srv->keeper_mu);
    while (!srv->keeper_stop) {
        /* held answers go within a tenth of a second of their time */
        struct timespec until = po_deadline_us(srv->nheld ? INT64_C(100000) : INT64_C(1000000));
        (void)pthread_cond_timedwait(&srv->keeper_cv, &srv->keeper_mu, &until);
        if (srv->keeper_stop)
            break;
        pthread_mutex_unlock(&srv->keeper_mu);
        guard_sweep(srv);
        release_held(srv, false);
        pthread_mutex_lock(&srv->keeper_mu);
    }
    pthread_mutex_unlock(&srv->keeper_mu);
    return NULL;
}

static po_err start_keeper(struct po_server *srv)
{
    pthread_mutex_init(&srv->track_mu, NULL);
    pthread_mutex_init(&srv->keeper_mu, NULL);
    po_cond_init(&srv->keeper_cv);
    srv->keeper_started = pthread_create(&srv->keeper, NULL, keeper_main, srv) == 0;
    return srv->keeper_started ? PO_OK : PO_ERR_INTERNAL;
}

/* Room for max_connections sockets and the store's: the soft limit of open
 * files raised toward the hard one (never lowered). */
static void raise_nofile(int max_connections)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t want = (rlim_t)max_connections + 256;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static int cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

/* Stops and frees what was started, in the order that lets every request
 * in flight be answered (see po_server_stop). */
static void teardown(struct po_server *s)
{
    /* No new connections; the listening socket is ours now, but the
     * daemon's event threads may still touch it until they stop: it is
     * closed after MHD_stop_daemon (ThreadSanitizer saw the race). */
    MHD_socket listen_fd = s->daemon ? MHD_quiesce_daemon(s->daemon) : MHD_INVALID_SOCKET;
    atomic_store(&s->stopping, true);
    while (atomic_load(&s->active) > 0) {
        struct timespec ms = {0, 1000000L};
        nanosleep(&ms, NULL);
    }
    if (s->keeper_started) {
        pthread_mutex_lock(&s->keeper_mu);
        s->keeper_stop = true;
        pthread_cond_signal(&s->keeper_cv);
        pthread_mutex_unlock(&s->keeper_mu);
        pthread_join(s->keeper, NULL);
        release_held(s, true); /* held answers go now: none is lost */
        pthread_mutex_destroy(&s->keeper_mu);
        pthread_cond_destroy(&s->keeper_cv);
        /* (track_mu is destroyed once the daemon is gone, below) */
    }
    /* Queued jobs run (they may hand work to the committer); then the
     * committer answers everything it holds; then the answers go out. */
    if (s->daemon) /* a server that never listened has nothing in flight */
        po_gateway_drain(s->gw);
    po_signin_close(s->http.signin); /* its queued checks answered */
    s->http.signin = NULL;
    for (int waited = 0; atomic_load(&s->pending) > 0 && waited < 5000; waited++) {
        struct timespec ms = {0, 1000000L};
        nanosleep(&ms, NULL);
    }
    if (s->ops_daemon)
        MHD_stop_daemon(s->ops_daemon);
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    if (listen_fd != MHD_INVALID_SOCKET)
        close(listen_fd);
    if (s->keeper_started)
        pthread_mutex_destroy(&s->track_mu);
    free(s);
}

/* Whether the address can be listened on, with the system's reason when
 * not (libmicrohttpd would only say "Failed to bind to port N"). Port 0
 * and a race with another process are left to the daemon's own bind. */
static po_err listen_probe(const struct sockaddr_storage *addr, socklen_t len, const char *what,
                           char *err, size_t errcap)
{
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return PO_OK;
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc = bind(fd, (const struct sockaddr *)addr, len), e = errno;
    close(fd);
    if (rc == 0)
        return PO_OK;
    po_errf(err, errcap, "cannot listen on %s: %s%s", what, strerror(e),
            e == EADDRINUSE      ? " (another process listens there; choose another --listen)"
            : e == EADDRNOTAVAIL ? " (not an address of this machine)"
            : e == EACCES        ? " (a port below 1024 needs privileges)"
                                 : "");
    return PO_ERR_IO;
}

po_err po_server_start(struct po_gateway *gw, const struct po_server_cfg *cfg,
                       struct po_server **out, char *err, size_t errcap)
{
    static const struct po_server_cfg none = {0};
    if (!cfg)
        cfg = &none;
    const struct po_gateway_parts *parts = po_gateway_parts(gw);
    const struct po_gateway_cfg *g = parts->cfg;
    struct sockaddr_storage addr;
    socklen_t alen = 0;
    po_err rc = parse_listen(g->listen, &addr, &alen, err, errcap);
    if (!rc)
        rc = listen_probe(&addr, alen, g->listen, err, errcap);
    if (rc)
        return rc;
    int threads = g->threads ? (int)g->threads : cores();
    int max_conn = (int)g->max_connections, per_ip = (int)g->max_connections_per_ip;
    struct po_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return PO_ERR_NOMEM;
    srv->gw = gw;
    srv->http.gw = parts;
    srv->body_max = (size_t)g->body_max;
    srv->head_us = g->header_timeout_s * INT64_C(1000000);
    srv->body_us = g->body_timeout_s * INT64_C(1000000);
    srv->clock = cfg->clock;
    srv->clock_ctx = cfg->clock_ctx;
    if (cfg->admin_token &&
        po_strcpy(srv->http.admin_token, sizeof srv->http.admin_token, cfg->admin_token)) {
        po_errf(err, errcap, "the admin token is too long");
        teardown(srv);
        return PO_ERR_INVALID;
    }
    srv->http.console = cfg->console || srv->http.admin_token[0];
    srv->http.hold = hold_answer;
    srv->http.hold_ctx = srv;
    srv->http.api_hook = cfg->api_hook;
    srv->http.api_hook_ctx = cfg->api_hook_ctx;
    unsigned char rnd[4];
    if (po_random(rnd, sizeof rnd) == PO_OK)
        srv->id_base = (unsigned long)rnd[0] << 24 | (unsigned long)rnd[1] << 16 |
                       (unsigned long)rnd[2] << 8 | rnd[3];
    if ((rc = start_keeper(srv)) != PO_OK) {
        po_errf(err, errcap, "cannot start a thread");
        teardown(srv);
        return rc;
    }
    raise_nofile(max_conn);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG;
    if (addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    srv->max_conns = max_conn;
    /* libmicrohttpd's own limit is only the backstop of on_accept's (which
     * may let one more connection per thread in when they race). */
    srv->daemon = MHD_start_daemon(
        flags, 0, on_accept, srv, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)(threads > 1 ? threads : 0), MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(max_conn + threads), MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)g->request_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)PO_HEADER_MEMORY_MAX,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)(per_ip < max_conn ? per_ip : 0),
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_END);
    if (!srv->daemon) {
        po_errf(err, errcap, "cannot listen on %s (address in use or not permitted)", g->listen);
        teardown(srv);
        return PO_ERR_IO;
    }
    if (g->ops_listen) {
        struct sockaddr_storage oaddr;
        socklen_t olen = 0;
        rc = parse_listen(g->ops_listen, &oaddr, &olen, err, errcap);
        unsigned oflags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                          MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                          (oaddr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
        srv->ops_daemon =
            rc ? NULL
               : MHD_start_daemon(oflags, 0, NULL, NULL, on_ops_request, srv,
                                  MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv, MHD_OPTION_SOCK_ADDR,
                                  (struct sockaddr *)&oaddr, MHD_OPTION_CONNECTION_LIMIT, 64u,
                                  MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
                                  MHD_OPTION_CONNECTION_TIMEOUT, 10u,
                                  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)PO_HEADER_MEMORY_MAX,
                                  MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_END);
        if (!srv->ops_daemon) {
            if (!rc)
                po_errf(err, errcap, "cannot listen on %s (--ops-listen)", g->ops_listen);
            teardown(srv);
            return rc ? rc : PO_ERR_IO;
        }
    }
    if (srv->http.console) {
        /* the console's own address (its listener's) and its sign-in pool */
        rc = po_admin_origins(
            &srv->http, cfg->console_origin, srv->ops_daemon ? g->ops_listen : g->listen,
            srv->ops_daemon ? po_server_ops_port(srv) : po_server_port(srv), err, errcap);
        if (!rc)
            rc = po_signin_open(g->db_url, &srv->http.signin, err, errcap);
        if (rc) {
            teardown(srv);
            return rc;
        }
    }
    *out = srv;
    return PO_OK;
}

unsigned po_server_ops_port(const struct po_server *s)
{
    const union MHD_DaemonInfo *i =
        s->ops_daemon ? MHD_get_daemon_info(s->ops_daemon, MHD_DAEMON_INFO_BIND_PORT) : NULL;
    return i ? i->port : 0;
}

unsigned po_server_port(const struct po_server *s)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return i ? i->port : 0;
}

void po_server_stop(struct po_server *s)
{
    if (s)
        teardown(s);
}
