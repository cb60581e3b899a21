/*
 * http_int.h — private to src/http: the route table, the request and
 * answer as handlers see them (no libmicrohttpd types outside server.c),
 * the handlers, and the metrics.
 *
 * http/ is transport only: it parses and bounds requests, finds the route,
 * calls the service that does the work, and maps the decision to a status,
 * headers and a body. Business rules live in service/, engine/, channel/.
 */
#ifndef PO_HTTP_INT_H
#define PO_HTTP_INT_H

#include "../service/service.h"
#include "http.h"

#include <stdint.h>

/* ---- requests and answers ---- */

#define PO_ROUTE_PARAMS_MAX 2
#define PO_SEGMENT_MAX (PO_ID_MAX + 1) /* a path segment: an id, or one byte more */

/* One request as a handler sees it. */
struct po_hreq {
    const char *method;
    const char *path;
    /* The values of the route pattern's {…} segments, in order. */
    char params[PO_ROUTE_PARAMS_MAX][PO_SEGMENT_MAX + 1];
    const char *(*header)(void *ctx, const char *name);
    /* every header as received, "Name: value\r\n" each (see po_notify_req) */
    size_t (*headers)(void *ctx, char *buf, size_t cap);
    const char *(*arg)(void *ctx, const char *name); /* query-string argument */
    void *ctx;
    const char *body; /* "" when there is none */
    size_t body_len;
    bool body_too_large;
    const char *request_id;
    int64_t now_unix;
    char client_addr[48]; /* the peer's address (no port); "" when unknown */
};

#define PO_HRESP_HEADERS_MAX 6
/* One answer. body is heap (freed by the server) or NULL for none. */
struct po_hresp {
    unsigned status;
    const char *content_type;
    char *body;
    int nheaders;
    const char *hname[PO_HRESP_HEADERS_MAX];
    char hvalue[PO_HRESP_HEADERS_MAX][192];
};
/* Sets the answer to a copy of body (NULL: no body). */
void po_hresp_set(struct po_hresp *r, unsigned status, const char *content_type, const char *body);
/* Adds a header; values longer than 191 bytes are refused (assert). */
void po_hresp_header(struct po_hresp *r, const char *name, const char *value);

/* What every handler may use of the server. */
#define PO_CONSOLE_ORIGINS_MAX 8
#define PO_HELD_MAX 1024 /* answers held back at once (hold) */
#define PO_HELD_MS 1000  /* how long */
struct po_hcall;
struct po_http_ctx {
    const struct po_gateway_parts *gw; /* the pool, the committer, the workers, the bulkheads */
    char admin_token[129];             /* "": no bearer access to /admin/api */
    bool console;                      /* /admin is served */
    /* The console's allow-list (admin.c): the Host values it answers
     * ("host:port") and the Origin values it takes ("scheme://host:port");
     * --console-origin, or the listener's own address. */
    int norigins;
    char console_host[PO_CONSOLE_ORIGINS_MAX][128];
    char console_origin[PO_CONSOLE_ORIGINS_MAX][140];
    struct po_signin *signin; /* the console's sign-in pool (service/accounts/signin.h) */
    /* Holds a final answer back PO_HELD_MS before it goes (the server's
     * keeper sends it; h returns pending); false: answer it now. */
    bool (*hold)(void *ctx, struct po_hcall *h);
    void *hold_ctx;
    void (*api_hook)(void *ctx, const char *route);
    void *api_hook_ctx;
};

/*
 * One request in progress. The server fills req (and ctx, route, allow,
 * complete); a handler answers by filling resp and either returning false
 * (answered now, on the event thread) or returning true and calling
 * complete(h) exactly once later, from any thread, when resp is final
 * (or finish(h) will make it).
 * req, its headers and its body stay valid until then; nothing of the
 * connection is touched off the event thread (headers are copied).
 */
struct po_route;
struct po_hcall {
    struct po_hreq req;
    struct po_hresp resp;
    const struct po_http_ctx *ctx;
    const struct po_route *route; /* NULL: no route (API 404/405) */
    const char *allow;            /* 405: the path's methods */
    char allow_buf[64];
    uint64_t start_us;
    bool logged;      /* the handler wrote this request's access-log line */
    bool in_bulkhead; /* a callback holding a slot of ctx->callback_bulkhead */
    bool ops;         /* arrived on the operations listener */
    void (*complete)(struct po_hcall *h);
    /* Set by a handler that returned pending: called on the event thread
     * after complete(), to make resp there (not on the completing thread). */
    void (*finish)(struct po_hcall *h);
    struct po_callback cb; /* a channel callback's state */
};

/* The console's allow-list from --console-origin (a comma-separated list
 * of http(s) origins, at most PO_CONSOLE_ORIGINS_MAX) or, when NULL or "",
 * from the listener's own address (listen "HOST:PORT", the bound port):
 * that address, or for a wildcard listener the loopback spellings
 * (127.0.0.1, localhost, [::1]) of the port. PO_ERR_INVALID with err for a
 * bad list. */
po_err po_admin_origins(struct po_http_ctx *ctx, const char *list, const char *listen,
                        unsigned port, char *err, size_t errcap) PO_MUST_CHECK;

/* One JSON access-log line (access.c): ts, level, msg, request_id and the
 * escaped method and path, status, ms, then extra (",\"k\":v…" of values
 * the caller has checked or escaped; may be NULL). */
void po_access_line(const struct po_hreq *req, const char *msg, unsigned status, uint64_t micros,
                    const char *extra);

/* ---- the route table (routes.c) ---- */

enum po_route_kind {
    PO_RK_CALLBACK, /* a channel's notification */
    PO_RK_HEALTH,   /* liveness */
    PO_RK_READY,    /* the store answers */
    PO_RK_METRICS,  /* Prometheus text */
    PO_RK_ADMIN,    /* the operator's dashboard (admin.c) */
    PO_RK_API,      /* the tenant API (bearer key) */
    PO_RK_OPENAPI,  /* the tenant API's description (no key) */
};

struct po_api_call;
/* A tenant API route's work (api_routes.c): a GET's read, or a POST's
 * body validation and its effect inside the transaction. */
struct po_api_route {
    void (*get)(struct po_api_call *c);
    bool (*validate)(struct po_api_call *c);
    po_err (*effect)(struct po_api_call *c);
    /* Optional: work outside the transaction, before the effect, once the
     * Idempotency-Key is this request's (a replay never reaches it) —
     * holding no connection across a channel's API. False when it set the
     * answer (then nothing is stored under the key). */
    bool (*before)(struct po_api_call *c);
};

struct po_route {
    /* "METHOD /path/{param}": the method and the pattern, and also the
     * route's name in logs and metrics and the scope of Idempotency-Keys
     * (stored: never rename a route). */
    const char *name;
    enum po_route_kind kind;
    const struct po_api_route *api; /* PO_RK_API */
};

/* docs/openapi.json as built into the binary (cmake/embed_file.cmake),
 * NUL-terminated: what GET /v1/openapi.json answers, byte for byte. */
extern const char po_openapi_json[];
extern const size_t po_openapi_json_len;

/* The routes, in a fixed order (metrics index); po_routes_count of them. */
extern const struct po_route po_routes[];
extern const int po_routes_count;

enum po_route_match {
    PO_ROUTE_FOUND,     /* *out_route is it; params filled */
    PO_ROUTE_NO_PATH,   /* no pattern matches the path: 404 */
    PO_ROUTE_NO_METHOD, /* a pattern matches, not with this method: 405, allow */
};
/*
 * Finds the route for method and path. A pattern segment {x} matches one
 * non-empty segment of at most PO_SEGMENT_MAX bytes; empty segments and
 * trailing slashes match nothing. On NO_METHOD, allow lists the methods
 * the path has ("GET, POST").
 */
enum po_route_match po_route_find(const char *method, const char *path,
                                  const struct po_route **out_route,
                                  char params[PO_ROUTE_PARAMS_MAX][PO_SEGMENT_MAX + 1], char *allow,
                                  size_t allowcap);
/* The route's position in po_routes, or -1 (metrics). */
int po_route_index(const struct po_route *r);

/* ---- handlers ---- */

/* A channel callback (notify.c): the channel's ack, the metrics and the
 * log line, decided on the event thread when it can be (a refusal) or
 * after the batch holding the event committed (pending, see po_hcall).
 * Never fails: errors are acks. */
bool po_notify_start(struct po_hcall *h);

/* The tenant API (api.c), run on a worker thread (it blocks on the
 * database and on the committer). route is NULL for an unknown /v1 path
 * (404) or, with allow set, a known path with another method (405, after
 * the key is checked). Never fails: errors are answers. */
void po_api_handle(const struct po_http_ctx *ctx, const struct po_route *route, const char *allow,
                   const struct po_hreq *req, struct po_hresp *out);
/* The tenant whose worker lane a tenant API request waits in: the one its
 * key's id last authenticated as ("" before that: the anonymous lane).
 * Unauthenticated — a forged id only queues in that tenant's lane and is
 * refused at authentication. */
void po_api_lane(const struct po_http_ctx *ctx, const struct po_hreq *req, char *out, size_t cap);

/* ---- metrics (metrics.c) ---- */
/* One callback answered (ch: its registered channel, or NULL), with its
 * ack's latency; one refused before the engine (kind INVALID) is also
 * counted by its reason (a VERIFY reason). */
void po_metrics_callback(const struct po_channel_ops *ch, struct po_outcome outcome,
                         uint64_t micros);
/* The last hour's callbacks by channel, outcome and layer, and the ack
 * latency's p50 and p99 (bucket bounds, ms), for the dashboard. */
json_t *po_metrics_last_hour(void);

/* admin.c: GET /admin (the page), GET /admin/api/summary and POST
 * /admin/api/alerts/ack (bearer admin token; on a worker through
 * submit(ctx, h, job)). true when the answer comes later. */
bool po_admin_start(struct po_hcall *h,
                    bool (*submit)(void *ctx, struct po_hcall *h, void (*job)(void *)), void *ctx);
void po_metrics_http(unsigned status);
/* One tenant API answer (route NULL when unknown). */
void po_metrics_api(const struct po_route *route, unsigned status, bool replayed);
/* Renders everything in Prometheus text format into a heap string, with
 * the committer's figures when given, and the accounts serve's cache
 * unsealed from the store (po_accounts_loads). */
char *po_metrics_render(const struct po_committer_stats *committer,
                        const struct po_webhooks_stats *webhooks, int64_t account_loads);

#endif
