/*
 * server.c — libmicrohttpd glue, the only file of payonce that sees it:
 * listening, limits, request bodies, the route table's dispatch, the
 * health/ready/metrics endpoints, and turning answers into responses.
 *
 * Threads: one thread per connection (bounded by max_connections); each
 * request borrows a store connection from the pool for its transaction.
 * Limits: body (Content-Length checked up front and bytes counted as they
 * arrive; 413), header memory (per-connection memory limit; MHD answers 431/
 * closes), connections (refused beyond the limit), idle time per connection.
 */
#include "http_int.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

struct po_server {
    struct MHD_Daemon *daemon;
    struct po_http_ctx http; /* what the handlers see */
    unsigned char master[PO_MASTER_KEY_LEN];
    size_t body_max;
    atomic_ulong next_id;
    unsigned long id_base;
};

/* Per-request state across libmicrohttpd's access-handler calls. */
struct req {
    struct po_body body;
    uint64_t start_us;
    char id[24];
};

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void po_hresp_set(struct po_hresp *r, unsigned status, const char *content_type, const char *body)
{
    r->status = status;
    r->content_type = content_type;
    free(r->body);
    r->body = body ? strdup(body) : NULL;
}

void po_hresp_header(struct po_hresp *r, const char *name, const char *value)
{
    PO_ASSERT(r->nheaders < PO_HRESP_HEADERS_MAX);
    r->hname[r->nheaders] = name;
    PO_ASSERT(po_strcpy(r->hvalue[r->nheaders], sizeof r->hvalue[0], value) == PO_OK);
    r->nheaders++;
}

/* Queues an answer on the connection and releases it. */
static enum MHD_Result send_answer(struct MHD_Connection *c, struct po_hresp *a)
{
    size_t len = a->body ? strlen(a->body) : 0;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, a->body ? a->body : (void *)(uintptr_t) "",
                                        a->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(a->body);
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

static const char *header_of(void *ctx, const char *name)
{
    return MHD_lookup_connection_value((struct MHD_Connection *)ctx, MHD_HEADER_KIND, name);
}

static const char *arg_of(void *ctx, const char *name)
{
    return MHD_lookup_connection_value((struct MHD_Connection *)ctx, MHD_GET_ARGUMENT_KIND, name);
}

static void readyz(struct po_server *srv, struct po_hresp *out)
{
    struct po_store *s = NULL;
    char err[PO_ERRBUF_MAX] = "";
    po_err rc = po_store_pool_acquire(srv->http.pool, 1000, &s, err, sizeof err);
    if (!rc) {
        rc = po_store_ping(s, err, sizeof err);
        po_store_pool_release(srv->http.pool, s);
    }
    if (rc)
        po_log(PO_LOG_WARN, "readyz: store not ready: %s", err);
    po_hresp_set(out, rc ? 503 : 200, "text/plain", rc ? "store unavailable\n" : "ready\n");
}

/* Finds the route and runs its handler; every request gets exactly one answer. */
static void route(struct po_server *srv, const struct po_hreq *base, struct po_hresp *out)
{
    struct po_hreq req = *base;
    const struct po_route *rt = NULL;
    char allow[64];
    enum po_route_match m =
        po_route_find(req.method, req.path, &rt, req.params, allow, sizeof allow);
    bool api = strncmp(req.path, "/v1/", 4) == 0;
    if (api) {
        po_api_handle(&srv->http, m == PO_ROUTE_FOUND ? rt : NULL,
                      m == PO_ROUTE_NO_METHOD ? allow : NULL, &req, out);
        return;
    }
    if (m == PO_ROUTE_NO_PATH) {
        po_hresp_set(out, 404, "application/json", "{\"error\":\"not_found\"}");
        return;
    }
    if (m == PO_ROUTE_NO_METHOD) {
        po_hresp_set(out, 405, "application/json", "{\"error\":\"method_not_allowed\"}");
        po_hresp_header(out, "Allow", allow);
        return;
    }
    switch (rt->kind) {
    case PO_RK_CALLBACK:
        po_notify_handle(&srv->http, &req, out);
        break;
    case PO_RK_HEALTH:
        po_hresp_set(out, 200, "text/plain", "ok\n");
        break;
    case PO_RK_READY:
        readyz(srv, out);
        break;
    case PO_RK_METRICS: {
        char *m_text = po_metrics_render();
        po_hresp_set(out, m_text ? 200 : 500, "text/plain; version=0.0.4", m_text ? m_text : "");
        free(m_text);
        break;
    }
    case PO_RK_API:
        PO_ASSERT(!"API routes start with /v1/");
        break;
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    (void)version;
    struct po_server *srv = cls;
    struct req *q = *req_cls;
    if (!q) {
        q = calloc(1, sizeof *q);
        if (!q)
            return MHD_NO;
        q->start_us = now_us();
        (void)snprintf(q->id, sizeof q->id, "%lx-%lx", srv->id_base,
                       atomic_fetch_add(&srv->next_id, 1));
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        int64_t n = 0;
        if (cl && (po_parse_i64(cl, 0, INT64_MAX, &n) || (uint64_t)n > srv->body_max))
            q->body.too_large = true;
        *req_cls = q;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0; /* past the limit: keep reading, then answer 413 */
        return po_body_append(&q->body, upload_data, n, srv->body_max) ? MHD_NO : MHD_YES;
    }
    struct po_hreq req = {.method = method,
                          .path = url,
                          .header = header_of,
                          .arg = arg_of,
                          .ctx = c,
                          .body = q->body.data ? q->body.data : "",
                          .body_len = q->body.len,
                          .body_too_large = q->body.too_large,
                          .request_id = q->id,
                          .now_unix = (int64_t)time(NULL)};
    struct po_hresp out = {0};
    route(srv, &req, &out);
    return send_answer(c, &out);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct req *q = *req_cls;
    if (q) {
        po_body_free(&q->body);
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

/* libmicrohttpd's own messages, routed into the JSON log. */
static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    po_log(PO_LOG_WARN, "http: %s", msg);
}

po_err po_server_start(const struct po_server_cfg *cfg, struct po_server **out, char *err,
                       size_t errcap)
{
    struct sockaddr_storage addr;
    socklen_t alen = 0;
    po_err rc = parse_listen(cfg->listen, &addr, &alen, err, errcap);
    if (rc)
        return rc;
    struct po_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return PO_ERR_NOMEM;
    srv->body_max = cfg->body_max ? cfg->body_max : PO_BODY_MAX;
    srv->http.idem_wait_ms = cfg->idem_wait_ms < 0 ? 0
                             : cfg->idem_wait_ms   ? cfg->idem_wait_ms
                                                   : 2000;
    srv->http.api_hook = cfg->api_hook;
    srv->http.api_hook_ctx = cfg->api_hook_ctx;
    if (srv->body_max > 1024 * 1024) {
        po_errf(err, errcap, "body limit at most 1 MiB");
        free(srv);
        return PO_ERR_INVALID;
    }
    if (cfg->master_key) {
        memcpy(srv->master, cfg->master_key, PO_MASTER_KEY_LEN);
        srv->http.master_key = srv->master;
    }
    unsigned char rnd[4];
    if (po_random(rnd, sizeof rnd) == PO_OK)
        srv->id_base = (unsigned long)rnd[0] << 24 | (unsigned long)rnd[1] << 16 |
                       (unsigned long)rnd[2] << 8 | rnd[3];
    rc = po_store_pool_open(cfg->db_url, cfg->pool_size ? cfg->pool_size : 8, &srv->http.pool, err,
                            errcap);
    if (rc) {
        free(srv);
        return rc;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_ERROR_LOG | MHD_USE_POLL;
    if (addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    srv->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv,
                                   MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv, MHD_OPTION_SOCK_ADDR,
                                   (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT,
                                   (unsigned)(cfg->max_connections ? cfg->max_connections : 256),
                                   MHD_OPTION_CONNECTION_TIMEOUT,
                                   (unsigned)(cfg->request_timeout_s ? cfg->request_timeout_s : 10),
                                   MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)PO_HEADER_MEMORY_MAX,
                                   MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_END);
    if (!srv->daemon) {
        po_errf(err, errcap, "cannot listen on %s (address in use or not permitted)", cfg->listen);
        po_store_pool_close(srv->http.pool);
        free(srv);
        return PO_ERR_IO;
    }
    *out = srv;
    return PO_OK;
}

unsigned po_server_port(const struct po_server *s)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return i ? i->port : 0;
}

void po_server_stop(struct po_server *s)
{
    if (!s)
        return;
    MHD_stop_daemon(s->daemon);
    po_store_pool_close(s->http.pool);
    po_secure_zero(s->master, sizeof s->master);
    free(s);
}
