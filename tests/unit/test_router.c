/*
 * test_router.c — the one route table of `payonce serve` and its matcher:
 * every route is found by its own method and path with its parameters, a
 * known path with another method is 405 with the right Allow, and paths
 * that only look like routes (empty segments, trailing slashes, extra
 * segments, over-long ids) match nothing.
 */
#include "../../src/http/http_int.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

static enum po_route_match find(const char *method, const char *path, const struct po_route **rt,
                                char params[PO_ROUTE_PARAMS_MAX][PO_SEGMENT_MAX + 1], char *allow)
{
    *rt = NULL;
    return po_route_find(method, path, rt, params, allow, 64);
}

/* Each route, asked for with its pattern's {…} replaced by values, is found,
 * and is the only route with that name. */
static void every_route_is_found(void **state)
{
    (void)state;
    for (int i = 0; i < po_routes_count; i++) {
        const char *name = po_routes[i].name, *sp = strchr(name, ' ');
        assert_non_null(sp);
        char method[16], path[256];
        size_t j = 0;
        snprintf(method, sizeof method, "%.*s", (int)(sp - name), name);
        int np = 0;
        for (const char *p = sp + 1; *p && j + 16 < sizeof path;) {
            if (*p == '{') {
                j += (size_t)snprintf(path + j, sizeof path - j, "V%d", np++);
                p = strchr(p, '}') + 1;
            } else {
                path[j++] = *p++;
            }
        }
        path[j] = '\0';
        const struct po_route *rt;
        char params[PO_ROUTE_PARAMS_MAX][PO_SEGMENT_MAX + 1], allow[64];
        assert_int_equal(find(method, path, &rt, params, allow), PO_ROUTE_FOUND);
        assert_ptr_equal(rt, &po_routes[i]);
        assert_int_equal(po_route_index(rt), i);
        for (int k = 0; k < np; k++) {
            char want[16];
            snprintf(want, sizeof want, "V%d", k);
            assert_string_equal(params[k], want);
        }
        for (int k = i + 1; k < po_routes_count; k++)
            assert_string_not_equal(po_routes[k].name, name);
    }
}

static void parameters_and_methods(void **state)
{
    (void)state;
    const struct po_route *rt;
    char params[PO_ROUTE_PARAMS_MAX][PO_SEGMENT_MAX + 1], allow[64];
    assert_int_equal(find("POST", "/notify/wechatpay/acme", &rt, params, allow), PO_ROUTE_FOUND);
    assert_int_equal(rt->kind, PO_RK_CALLBACK);
    assert_string_equal(params[0], "wechatpay");
    assert_string_equal(params[1], "acme");
    /* The pattern matches; the method does not: 405 with what is allowed. */
    assert_int_equal(find("GET", "/notify/paypal/t1", &rt, params, allow), PO_ROUTE_NO_METHOD);
    assert_string_equal(allow, "POST");
    assert_int_equal(find("DELETE", "/v1/orders/A-1", &rt, params, allow), PO_ROUTE_NO_METHOD);
    assert_string_equal(allow, "GET");
    assert_int_equal(find("DELETE", "/v1/orders", &rt, params, allow), PO_ROUTE_NO_METHOD);
    assert_string_equal(allow, "POST, GET");
    assert_int_equal(find("GET", "/v1/orders", &rt, params, allow), PO_ROUTE_FOUND);
    assert_string_equal(rt->name, "GET /v1/orders");
    assert_int_equal(find("POST", "/v1/alerts", &rt, params, allow), PO_ROUTE_NO_METHOD);
    assert_string_equal(allow, "GET");
    assert_int_equal(find("POST", "/v1/orders/A-1/close", &rt, params, allow), PO_ROUTE_FOUND);
    assert_string_equal(rt->name, "POST /v1/orders/{out_trade_no}/close");
    assert_string_equal(params[0], "A-1");
    assert_non_null(rt->api);
    assert_non_null(rt->api->effect);
    assert_int_equal(find("GET", "/v1/refunds/R-1", &rt, params, allow), PO_ROUTE_FOUND);
    assert_non_null(rt->api->get);
}

static void near_misses_match_nothing(void **state)
{
    (void)state;
    static const char *const paths[] = {"",
                                        "/",
                                        "/nope",
                                        "/healthz/",
                                        "//healthz",
                                        "/v1",
                                        "/v1/",
                                        "/v1/orders/",
                                        "/v1//orders",
                                        "/v1/orders/A/B",
                                        "/v1/orders/A/close/x",
                                        "/notify/wechatpay",
                                        "/notify/wechatpay/",
                                        "/notify//t1",
                                        "/notify/a/b/c",
                                        "/v1/ordersX",
                                        "/healthzz",
                                        "/metrics/x",
                                        "/V1/orders"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        const struct po_route *rt;
        char params[PO_ROUTE_PARAMS_MAX][PO_SEGMENT_MAX + 1], allow[64];
        if (find("GET", paths[i], &rt, params, allow) != PO_ROUTE_NO_PATH ||
            find("POST", paths[i], &rt, params, allow) != PO_ROUTE_NO_PATH)
            fail_msg("path '%s' matched a route", paths[i]);
    }
    /* A segment longer than an id can be never reaches a handler. */
    char path[200];
    snprintf(path, sizeof path, "/v1/orders/%0*d", PO_SEGMENT_MAX + 1, 7);
    const struct po_route *rt;
    char params[PO_ROUTE_PARAMS_MAX][PO_SEGMENT_MAX + 1], allow[64];
    assert_int_equal(find("GET", path, &rt, params, allow), PO_ROUTE_NO_PATH);
    snprintf(path, sizeof path, "/v1/orders/%0*d", PO_SEGMENT_MAX, 7);
    assert_int_equal(find("GET", path, &rt, params, allow), PO_ROUTE_FOUND);
    assert_int_equal(strlen(params[0]), PO_SEGMENT_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_route_is_found),
        cmocka_unit_test(parameters_and_methods),
        cmocka_unit_test(near_misses_match_nothing),
    };
    return cmocka_run_group_tests_name("router", tests, NULL, NULL);
}
