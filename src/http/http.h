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

struct po_webhooks_cfg;
struct po_server_cfg {
    const char *listen; /* "HOST:PORT" (IPv4, [IPv6] or localhost); port 0 = any */
    /* Optional second listener for operations only (/healthz, /readyz,
     * /metrics); when given, /metrics is no longer served on listen. */
    const char *ops_listen;
    const char *db_url;
    /* The operator's dashboard (/admin) answers its data only to this
     * bearer token; NULL or "": no dashboard (404). */
    const char *admin_token;
    const unsigned char *master_key; /* NULL only in insecure development mode */
    int pool_size;                   /* connections for reads (default 8) */
    int max_connections;             /* concurrent HTTP connections (default 4096) */
    int threads;                     /* event threads (default: one a core) */
    int workers;                     /* threads for blocking work (default 64) */
    /* Tenant API requests in flight per tenant while another tenant is
     * active (0: half of workers; at most workers); a tenant alone may
     * use every worker. */
    int api_per_tenant;
    /* The committer (docs/internals.md, "One callback, from socket to ack"): its threads, each with
     * its own store connection (default 2 on PostgreSQL; always 1 on SQLite), the largest batch
     * (default 128) and how long a busy committer lets a batch fill (default 200 us; an idle one
     * never waits). */
    int committers;
    int batch_max;
    int batch_wait_us;
    size_t body_max;       /* callback body bytes (default 64 KiB) */
    int request_timeout_s; /* idle connection / request timeout (default 10) */
    /* Absolute deadlines (the guard): a request's head must be complete
     * within header_timeout_s of the connection's opening or of its
     * previous answer, its body within body_timeout_s of its head (default
     * 10 and 10); beyond them the connection is closed. */
    int header_timeout_s, body_timeout_s;
    /* Connections from one client address (default 256; negative: no cap,
     * e.g. behind a reverse proxy whose address every connection has). */
    int max_connections_per_ip;
    /* A callback's budget from its arrival (default 4000 ms): an event the
     * database has not committed by then is answered FAIL (5xx, reason
     * deadline_exceeded). Below the channels' 5 s. */
    int callback_deadline_ms;
    /* Tenant API: how long a request whose Idempotency-Key is in flight
     * waits for the first request's answer before 409 (default 2000 ms;
     * negative: do not wait). */
    int idem_wait_ms;
    /* Tenant webhooks (docs/webhooks.md): the delivery worker's settings,
     * its db_url, master and egress filled in from here; NULL: no worker. */
    const struct po_webhooks_cfg *webhooks;
    /* Where webhook endpoints may point (channel.h, egress.c): endpoints
     * the API registers and every delivery are checked against it. NULL:
     * public addresses only. */
    const struct po_egress_policy *egress;
    /* Tests only: the clock callbacks' timestamps are checked against
     * (unix seconds; NULL: the real one). */
    int64_t (*clock)(void *ctx);
    void *clock_ctx;
    /* Tests only: called inside the transaction of every /v1 POST effect. */
    void (*api_hook)(void *ctx, const char *route);
    void *api_hook_ctx;
};

struct po_server;
po_err po_server_start(const struct po_server_cfg *cfg, struct po_server **out, char *err,
                       size_t errcap) PO_MUST_CHECK;
/* The bound port (useful with port 0). */
unsigned po_server_port(const struct po_server *s);
/* The operations listener's port (0 without one). */
unsigned po_server_ops_port(const struct po_server *s);
/* The server's committer: serve's one front door to the engine, for the
 * background jobs (valid until po_server_stop). */
struct po_committer;
struct po_committer *po_server_committer(struct po_server *s);
/* What the server's committer has done (metrics, benchmarks). */
struct po_committer_stats;
void po_server_committer_stats(struct po_server *s, struct po_committer_stats *out);
/* Stops accepting, answers every request in flight (new ones on open
 * connections get 503), releases everything. */
void po_server_stop(struct po_server *s);

#endif
