/*
 * routes.c — the one route table of `payonce serve` and its matcher. The
 * metrics read the same table, so a route is named in exactly one place.
 */
#include "http_int.h"

#include <string.h>

extern const struct po_api_route po_api_order_create, po_api_order_get, po_api_orders,
    po_api_order_close, po_api_refund_create, po_api_refund_get, po_api_balances, po_api_alerts,
    po_api_journal, po_api_events, po_api_endpoints_get, po_api_endpoint_create,
    po_api_endpoint_remove, po_api_endpoint_rotate;

const struct po_route po_routes[] = {
    {"POST /notify/{channel}/{tenant}", PO_RK_CALLBACK, NULL},
    {"GET /healthz", PO_RK_HEALTH, NULL},
    {"GET /readyz", PO_RK_READY, NULL},
    {"GET /metrics", PO_RK_METRICS, NULL},
    {"GET /admin", PO_RK_ADMIN, NULL},
    {"GET /admin/{asset}", PO_RK_ADMIN, NULL},
    {"POST /admin/login", PO_RK_ADMIN, NULL},
    {"POST /admin/logout", PO_RK_ADMIN, NULL},
    {"GET /admin/api/{view}", PO_RK_ADMIN, NULL},
    {"POST /admin/api/alerts/{action}", PO_RK_ADMIN, NULL},
    {"POST /admin/api/webhooks/{action}", PO_RK_ADMIN, NULL},
    {"POST /admin/api/recon/{action}", PO_RK_ADMIN, NULL},
    {"POST /v1/orders", PO_RK_API, &po_api_order_create},
    {"GET /v1/orders", PO_RK_API, &po_api_orders},
    {"GET /v1/orders/{out_trade_no}", PO_RK_API, &po_api_order_get},
    {"POST /v1/orders/{out_trade_no}/close", PO_RK_API, &po_api_order_close},
    {"POST /v1/refunds", PO_RK_API, &po_api_refund_create},
    {"GET /v1/refunds/{out_refund_no}", PO_RK_API, &po_api_refund_get},
    {"GET /v1/balances", PO_RK_API, &po_api_balances},
    {"GET /v1/alerts", PO_RK_API, &po_api_alerts},
    {"GET /v1/journal", PO_RK_API, &po_api_journal},
    {"GET /v1/events", PO_RK_API, &po_api_events},
    {"GET /v1/webhook_endpoints", PO_RK_API, &po_api_endpoints_get},
    {"POST /v1/webhook_endpoints", PO_RK_API, &po_api_endpoint_create},
    {"POST /v1/webhook_endpoints/{endpoint_id}/remove", PO_RK_API, &po_api_endpoint_remove},
    {"POST /v1/webhook_endpoints/{endpoint_id}/rotate_secret", PO_RK_API, &po_api_endpoint_rotate},
    {"GET /v1/openapi.json", PO_RK_OPENAPI, NULL},
};
const int po_routes_count = (int)(sizeof po_routes / sizeof po_routes[0]);

int po_route_index(const struct po_route *r)
{
    return r ? (int)(r - po_routes) : -1;
}

/* Matches path against the pattern part of a route name, capturing {…}
 * segments into params. */
static bool match(const char *pattern, const char *path,
                  char params[PO_ROUTE_PARAMS_MAX][PO_SEGMENT_MAX + 1])
{
    int np = 0;
    const char *p = pattern, *u = path;
    for (;;) {
        if (*p != '/' || *u != '/')
            return *p == *u; /* both ended */
        p++;
        u++;
        size_t plen = strcspn(p, "/"), ulen = strcspn(u, "/");
        if (ulen == 0)
            return false; /* an empty segment or a trailing slash */
        if (p[0] == '{') {
            if (ulen > PO_SEGMENT_MAX || np == PO_ROUTE_PARAMS_MAX)
                return false;
            memcpy(params[np], u, ulen);
            params[np++][ulen] = '\0';
        } else if (plen != ulen || memcmp(p, u, ulen) != 0) {
            return false;
        }
        p += plen;
        u += ulen;
    }
}

enum po_route_match po_route_find(const char *method, const char *path,
                                  const struct po_route **out_route,
                                  char params[PO_ROUTE_PARAMS_MAX][PO_SEGMENT_MAX + 1], char *allow,
                                  size_t allowcap)
{
    enum po_route_match m = PO_ROUTE_NO_PATH;
    size_t mlen = strlen(method);
    if (allowcap)
        allow[0] = '\0';
    for (int i = 0; i < po_routes_count; i++) {
        const char *name = po_routes[i].name, *sp = strchr(name, ' ');
        PO_ASSERT(sp);
        char tmp[PO_ROUTE_PARAMS_MAX][PO_SEGMENT_MAX + 1];
        if (!match(sp + 1, path, tmp))
            continue;
        if ((size_t)(sp - name) == mlen && memcmp(name, method, mlen) == 0) {
            memcpy(params, tmp, sizeof tmp);
            *out_route = &po_routes[i];
            return PO_ROUTE_FOUND;
        }
        m = PO_ROUTE_NO_METHOD;
        size_t used = strlen(allow), need = (size_t)(sp - name) + (used ? 2 : 0);
        if (used + need < allowcap) {
            if (used)
                memcpy(allow + used, ", ", 2);
            memcpy(allow + used + (used ? 2 : 0), name, (size_t)(sp - name));
            allow[used + need] = '\0';
        }
    }
    return m;
}
