/*
 * server.c — libmicrohttpd glue: listening, limits, routing, request bodies,
 * JSON access log lines, and the health/ready/metrics endpoints.
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
    int idem_wait_ms;
    void (*api_hook)(void *ctx, const char *route);
    void *api_hook_ctx;
    struct po_store_pool *pool;
    unsigned char master[PO_MASTER_KEY_LEN];
    bool has_master;
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

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, const char *type,
                               const char *body)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)(uintptr_t)body,
                                                             MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    if (type)
        MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    po_metrics_http(status);
    return ok;
}

static const char *header_of(void *ctx, const char *name)
{
    return MHD_lookup_connection_value((struct MHD_Connection *)ctx, MHD_HEADER_KIND, name);
}

/* One JSON access-log line per callback. */
static void log_callback(const struct req *q, const char *channel, const char *tenant,
                         const struct po_notify_answer *a, uint64_t micros)
{
    char ts[PO_TIME_MAX];
    po_clock_now_iso(ts, sizeof ts);
    json_t *line = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:i, s:f}", "ts", ts,
                             "level", "info", "msg", "callback", "request_id", q->id, "channel",
                             channel, "tenant", tenant, "outcome", a->outcome, "layer", a->layer,
                             "reason", a->reason, "status", (int)a->ack.status, "ms",
                             (double)micros / 1000.0);
    if (line && a->out_trade_no[0])
        json_object_set_new(line, "out_trade_no", json_string(a->out_trade_no));
    char *s = line ? json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(4)) : NULL;
    if (s)
        po_log_line(s);
    free(s);
    json_decref(line);
}

static enum MHD_Result handle_notify(struct po_server *srv, struct MHD_Connection *c,
                                     struct req *q, const char *path)
{
    /* path is "{channel}/{tenant}" */
    char channel[PO_CHANNEL_MAX] = "", tenant[PO_ID_MAX + 2] = "";
    const char *slash = strchr(path, '/');
    if (!slash || (size_t)(slash - path) >= sizeof channel || strchr(slash + 1, '/') ||
        strlen(slash + 1) >= sizeof tenant)
        return respond(c, 404, "application/json", "{\"error\":\"not_found\"}");
    memcpy(channel, path, (size_t)(slash - path));
    memcpy(tenant, slash + 1, strlen(slash + 1) + 1);
    if (!po_channel_valid(channel))
        return respond(c, 404, "application/json", "{\"error\":\"unknown_channel\"}");
    struct po_notify_ctx ctx = {.pool = srv->pool,
                                .master_key = srv->has_master ? srv->master : NULL,
                                .request_id = q->id};
    struct po_notify_req nreq = {.body = q->body.data ? q->body.data : "", .body_len = q->body.len,
                                 .header = header_of, .hctx = c, .now_unix = (int64_t)time(NULL)};
    struct po_notify_answer a;
    po_notify_handle(&ctx, channel, tenant, &nreq, q->body.too_large, &a);
    uint64_t micros = now_us() - q->start_us;
    po_metrics_callback(channel, a.outcome, a.layer, micros);
    log_callback(q, channel, tenant, &a, micros);
    return respond(c, a.ack.status, a.ack.content_type, a.ack.body);
}

static const char *arg_of(void *ctx, const char *name)
{
    return MHD_lookup_connection_value((struct MHD_Connection *)ctx, MHD_GET_ARGUMENT_KIND, name);
}

static void log_api(const struct req *q, const char *method, const struct po_api_answer *a,
                    uint64_t micros)
{
    char ts[PO_TIME_MAX];
    po_clock_now_iso(ts, sizeof ts);
    json_t *line = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:b, s:f}", "ts", ts,
                             "level", "info", "msg", "api", "request_id", q->id, "method", method,
                             "route", a->route, "tenant", a->tenant, "status", (int)a->status,
                             "code", a->code, "replayed", a->replayed, "ms",
                             (double)micros / 1000.0);
    char *s = line ? json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(4)) : NULL;
    if (s)
        po_log_line(s);
    free(s);
    json_decref(line);
}

/* The tenant API (api.c); this only adapts libmicrohttpd. */
static enum MHD_Result handle_api(struct po_server *srv, struct MHD_Connection *c, struct req *q,
                                  const char *method, const char *path)
{
    struct po_api_ctx ctx = {.pool = srv->pool,
                             .master_key = srv->has_master ? srv->master : NULL,
                             .request_id = q->id,
                             .idem_wait_ms = srv->idem_wait_ms,
                             .hook = srv->api_hook,
                             .hook_ctx = srv->api_hook_ctx};
    struct po_api_req areq = {.method = method,
                              .path = path,
                              .header = header_of,
                              .arg = arg_of,
                              .ctx = c,
                              .body = q->body.data ? q->body.data : "",
                              .body_len = q->body.len,
                              .body_too_large = q->body.too_large};
    struct po_api_answer a;
    po_api_handle(&ctx, &areq, &a);
    log_api(q, method, &a, now_us() - q->start_us);
    po_metrics_api(a.route, a.status, a.replayed);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(a.body), a.body,
                                                             MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(a.body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Request-Id", q->id);
    if (a.replayed)
        MHD_add_response_header(r, "Idempotent-Replayed", "true");
    if (a.retry_after) {
        char ra[16];
        (void)snprintf(ra, sizeof ra, "%u", a.retry_after);
        MHD_add_response_header(r, "Retry-After", ra);
    }
    if (a.allow)
        MHD_add_response_header(r, "Allow", a.allow);
    if (a.status == 401)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"payonce\"");
    enum MHD_Result ok = MHD_queue_response(c, a.status, r);
    MHD_destroy_response(r);
    po_metrics_http(a.status);
    return ok;
}

static enum MHD_Result handle_get(struct po_server *srv, struct MHD_Connection *c,
                                  const char *url)
{
    if (strcmp(url, "/healthz") == 0)
        return respond(c, 200, "text/plain", "ok\n");
    if (strcmp(url, "/readyz") == 0) {
        struct po_store *s = NULL;
        char err[PO_ERRBUF_MAX] = "";
        po_err rc = po_store_pool_acquire(srv->pool, 1000, &s, err, sizeof err);
        if (!rc) {
            rc = po_store_ping(s, err, sizeof err);
            po_store_pool_release(srv->pool, s);
        }
        if (rc)
            po_log(PO_LOG_WARN, "readyz: store not ready: %s", err);
        return rc ? respond(c, 503, "text/plain", "store unavailable\n")
                  : respond(c, 200, "text/plain", "ready\n");
    }
    if (strcmp(url, "/metrics") == 0) {
        char *m = po_metrics_render();
        enum MHD_Result r = respond(c, m ? 200 : 500, "text/plain; version=0.0.4", m ? m : "");
        free(m);
        return r;
    }
    return respond(c, 404, "application/json", "{\"error\":\"not_found\"}");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
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
    if (strncmp(url, "/notify/", 8) == 0) {
        if (strcmp(method, "POST") != 0)
            return respond(c, 405, "application/json", "{\"error\":\"method_not_allowed\"}");
        return handle_notify(srv, c, q, url + 8);
    }
    if (strncmp(url, "/v1/", 4) == 0)
        return handle_api(srv, c, q, method, url + 4);
    if (strcmp(method, "GET") == 0)
        return handle_get(srv, c, url);
    return respond(c, 405, "application/json", "{\"error\":\"method_not_allowed\"}");
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
    srv->idem_wait_ms = cfg->idem_wait_ms < 0 ? 0 : cfg->idem_wait_ms ? cfg->idem_wait_ms : 2000;
    srv->api_hook = cfg->api_hook;
    srv->api_hook_ctx = cfg->api_hook_ctx;
    if (srv->body_max > 1024 * 1024) {
        po_errf(err, errcap, "body limit at most 1 MiB");
        free(srv);
        return PO_ERR_INVALID;
    }
    if (cfg->master_key) {
        memcpy(srv->master, cfg->master_key, PO_MASTER_KEY_LEN);
        srv->has_master = true;
    }
    unsigned char rnd[4];
    if (po_random(rnd, sizeof rnd) == PO_OK)
        srv->id_base = (unsigned long)rnd[0] << 24 | (unsigned long)rnd[1] << 16 |
                       (unsigned long)rnd[2] << 8 | rnd[3];
    rc = po_store_pool_open(cfg->db_url, cfg->pool_size ? cfg->pool_size : 8, &srv->pool, err,
                            errcap);
    if (rc) {
        free(srv);
        return rc;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_ERROR_LOG | MHD_USE_POLL;
    if (addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    srv->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(cfg->max_connections ? cfg->max_connections : 256),
        MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)(cfg->request_timeout_s ? cfg->request_timeout_s : 10),
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)PO_HEADER_MEMORY_MAX,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_END);
    if (!srv->daemon) {
        po_errf(err, errcap, "cannot listen on %s (address in use or not permitted)",
                cfg->listen);
        po_store_pool_close(srv->pool);
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
    po_store_pool_close(s->pool);
    memset(s->master, 0, sizeof s->master);
    free(s);
}
