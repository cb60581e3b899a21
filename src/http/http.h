/*
 * http.h — `payonce serve`: the gateway's HTTP server (libmicrohttpd).
 *
 * Routes:  POST /notify/{wechatpay|alipay|stripe}/{tenant}   channel callbacks
 *          /v1/…           the tenant API (docs/api.md), bearer API keys
 *          GET  /healthz   the process is up
 *          GET  /readyz    the store answers
 *          GET  /metrics   Prometheus text format
 * Every request is bounded (body, headers, connections, time) and logged as
 * one JSON line with a request id. Acks follow docs/operations.md, "What each ack means":
 * verification failure -> FAIL 4xx; transient failure -> FAIL 5xx; applied, duplicate, rejected,
 * suspense -> SUCCESS, and SUCCESS only after COMMIT.
 */
#ifndef PO_HTTP_H
#define PO_HTTP_H

#include "../core/core.h"

/* What the HTTP server takes beside its gateway (service/gateway/gateway.h),
 * whose configuration holds the listeners and their limits. */
struct po_server_cfg {
    /* The operator's dashboard (/admin) answers its data only to this
     * bearer token; NULL or "": no dashboard (404). */
    const char *admin_token;
    /* The console (/admin: operators sign in); on with an admin token too. */
    bool console;
    /* --console-origin: the origins the console answers (NULL or "": the
     * console listener's own address). */
    const char *console_origin;
    /* Tests only: the clock callbacks' timestamps are checked against
     * (unix seconds; NULL: the real one). */
    int64_t (*clock)(void *ctx);
    void *clock_ctx;
    /* Tests only: called inside the transaction of every /v1 POST effect. */
    void (*api_hook)(void *ctx, const char *route);
    void *api_hook_ctx;
};

struct po_gateway;
struct po_server;
/* Serves HTTP for gw (which must outlive the server) on its cfg's listen
 * and ops_listen; cfg may be NULL. */
po_err po_server_start(struct po_gateway *gw, const struct po_server_cfg *cfg,
                       struct po_server **out, char *err, size_t errcap) PO_MUST_CHECK;
/* The bound port (useful with port 0). */
unsigned po_server_port(const struct po_server *s);
/* The operations listener's port (0 without one). */
unsigned po_server_ops_port(const struct po_server *s);
/* Stops accepting, drains the gateway (po_gateway_drain) so that every
 * request in flight is answered (new ones on open connections get 503),
 * then closes every connection and frees the server; the gateway is the
 * caller's to close. */
void po_server_stop(struct po_server *s);

#endif
