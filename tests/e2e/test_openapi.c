/*
 * test_openapi.c BACKEND — the tenant API's description (docs/openapi.json)
 * cannot drift from the code that serves it:
 *
 *   every route of the route table under /v1 is an operation of the
 *     description (its path template and method exactly), and every
 *     operation of the description is a route of the table;
 *   the document built into the binary is docs/openapi.json byte for byte,
 *     and its info.version is payonce's;
 *   GET /v1/openapi.json on a running gateway answers it, byte for byte,
 *     as application/json, without an API key; not on the operations
 *     listener; another method is the API's (a key is asked for first).
 *
 * With PAYONCE_PRISM (api_openapi[sqlite], tests/e2e/openapi.sh), the
 * routes test_api does not call — the webhook endpoints and the events —
 * and this document itself, through Prism's validating proxy
 * (tests/support/prism.h) like test_api's:
 *
 *   an endpoint created (201 with its secret, shown once), listed (no
 *     secret), its secret rotated (another one), removed (then gone; an
 *     unknown one 404); a URL inside the network and an unknown event type
 *     400; the 17th endpoint 409 endpoint_limit;
 *   three orders closed: /v1/events pages their order.closed events two at
 *     a time (has_more, next_cursor), filters by type and by order, and
 *     refuses an unknown type (400); the other lists answer.
 *
 * Whether test_api's answers are what the description says is test_api's
 * own part of api_openapi[sqlite].
 */
#include "../../src/http/http_int.h"
#include "../support/prism.h"
#include "../support/simenv.h"
#include "../support/testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(PO_OPENAPI_DOC) || !defined(PO_VERSION)
#error "PO_OPENAPI_DOC names docs/openapi.json, PO_VERSION payonce's version"
#endif

static const char *const METHODS[] = {"get",     "put",  "post",  "delete",
                                      "options", "head", "patch", "trace"};

/* The file as it is in the source tree (heap, NUL-terminated). */
static char *read_doc(size_t *len)
{
    FILE *f = fopen(PO_OPENAPI_DOC, "rb");
    char *buf = malloc(4u << 20);
    *len = f && buf ? fread(buf, 1, (4u << 20) - 1, f) : 0;
    if (f)
        fclose(f);
    if (!*len) {
        fprintf(stderr, "test_openapi: cannot read %s\n", PO_OPENAPI_DOC);
        exit(1);
    }
    buf[*len] = '\0';
    return buf;
}

/* Both ways: the table's /v1 routes are the description's operations. */
static void routes_and_paths(json_t *doc)
{
    json_t *paths = json_object_get(doc, "paths");
    T_CHECK(json_is_object(paths) && json_object_size(paths) > 0, "the description has paths");
    int api_routes = 0, operations = 0;
    for (int i = 0; i < po_routes_count; i++) {
        const char *name = po_routes[i].name, *sp = strchr(name, ' ');
        char method[16];
        (void)snprintf(method, sizeof method, "%.*s", (int)(sp - name), name);
        for (char *m = method; *m; m++)
            *m = (char)(*m - 'A' + 'a');
        bool v1 = strncmp(sp + 1, "/v1/", 4) == 0;
        json_t *op = json_object_get(json_object_get(paths, sp + 1), method);
        if (v1)
            api_routes++;
        T_CHECK(v1 == (op != NULL), "route %s: %s the description", name,
                v1 ? "missing from" : "is not the tenant API's, yet in");
        T_CHECK(!v1 || (po_routes[i].kind == PO_RK_API) == (po_routes[i].api != NULL),
                "route %s: an API route has its work", name);
        /* the description's operation of a /v1 route names the same
         * path parameters as the route's pattern */
        json_t *params = json_object_get(json_object_get(paths, sp + 1), "parameters");
        for (const char *p = strchr(sp + 1, '{'); v1 && p; p = strchr(p + 1, '{')) {
            char want[64];
            (void)snprintf(want, sizeof want, "%.*s", (int)(strcspn(p + 1, "}")), p + 1);
            bool found = false;
            size_t k;
            json_t *prm;
            json_array_foreach(params, k, prm)
            {
                const char *ref = json_string_value(json_object_get(prm, "$ref"));
                const char *pname =
                    ref ? json_string_value(json_object_get(
                              json_object_get(
                                  json_object_get(json_object_get(doc, "components"), "parameters"),
                                  strrchr(ref, '/') + 1),
                              "name"))
                        : json_string_value(json_object_get(prm, "name"));
                found = found || (pname && strcmp(pname, want) == 0);
            }
            T_CHECK(found, "route %s: the description declares its path parameter %s", name, want);
        }
    }
    const char *path;
    json_t *item;
    json_object_foreach(paths, path, item)
    {
        for (size_t m = 0; m < sizeof METHODS / sizeof METHODS[0]; m++) {
            if (!json_object_get(item, METHODS[m]))
                continue;
            operations++;
            char name[300], upper[16];
            size_t k = 0;
            for (; METHODS[m][k] && k + 1 < sizeof upper; k++)
                upper[k] = (char)(METHODS[m][k] - 'a' + 'A');
            upper[k] = '\0';
            (void)snprintf(name, sizeof name, "%s %s", upper, path);
            bool found = false;
            for (int i = 0; i < po_routes_count && !found; i++)
                found = strcmp(po_routes[i].name, name) == 0;
            T_CHECK(found, "the description's %s is no route of payonce serve", name);
        }
    }
    T_CHECK(api_routes == operations && api_routes > 0, "%d /v1 routes, %d operations described",
            api_routes, operations);
    printf("# openapi: %d routes under /v1, %d operations described, each the other's\n",
           api_routes, operations);
}

struct got {
    char ctype[128];
};

static size_t on_header(char *d, size_t sz, size_t n, void *ctx)
{
    struct got *g = ctx;
    size_t len = sz * n;
    if (len > 14 && strncasecmp(d, "Content-Type: ", 14) == 0)
        (void)snprintf(g->ctype, sizeof g->ctype, "%.*s", (int)strcspn(d + 14, "\r\n"), d + 14);
    return len;
}

static long get(unsigned port, const char *method, char *out, size_t cap, size_t *len,
                struct got *g)
{
    char u[128];
    (void)snprintf(u, sizeof u, "http://127.0.0.1:%u/v1/openapi.json", port);
    memset(g, 0, sizeof *g);
    struct t_http_req q = {.method = method, .url = u, .on_header = on_header, .header_ctx = g};
    return t_http(&q, out, cap, len);
}

/* ---- the routes test_api does not call, through prism when it runs ---- */

static unsigned api_port;
static char api_key[PO_APIKEY_LEN + 1];

struct answer {
    long status;
    char body[256 * 1024]; /* this description, whole */
};

static json_t *call(const char *method, const char *path, const char *body, struct answer *a)
{
    char auth[200];
    (void)snprintf(auth, sizeof auth, "Authorization: Bearer %s", api_key);
    const char *lines[] = {auth, "Content-Type: application/json", NULL};
    struct t_http_req q = {.method = method, .headers = lines, .body = body, .timeout_s = 30};
    size_t len = 0;
    a->status = t_prism_on() ? t_prism_http(&q, api_port, path, a->body, sizeof a->body, &len) : 0;
    if (!t_prism_on()) {
        char u[512];
        (void)snprintf(u, sizeof u, "http://127.0.0.1:%u%s", api_port, path);
        q.url = u;
        a->status = t_http(&q, a->body, sizeof a->body, &len);
    }
    return json_loads(a->body, 0, NULL); /* NULL when it is not JSON */
}

static const char *str(json_t *j, const char *name)
{
    return json_string_value(json_object_get(j, name)) ?: "";
}

static const char *err_code(json_t *j)
{
    return str(json_object_get(j, "error"), "code");
}

static void webhook_endpoints(void **state)
{
    (void)state;
    static struct answer a;
    json_t *j = call("POST", "/v1/webhook_endpoints",
                     "{\"url\":\"https://hooks.example.com/payonce\",\"events\":"
                     "\"order.closed,alert.raised\"}",
                     &a);
    char ep[64], secret[128];
    (void)snprintf(ep, sizeof ep, "%s", str(j, "id"));
    (void)snprintf(secret, sizeof secret, "%s", str(j, "secret"));
    T_CHECK(a.status == 201 && strncmp(ep, "we_", 3) == 0 && strncmp(secret, "whsec_", 6) == 0 &&
                strcmp(str(j, "events"), "order.closed,alert.raised") == 0,
            "endpoint created: %ld %s", a.status, a.body);
    json_decref(j);
    j = call("GET", "/v1/webhook_endpoints?limit=1", NULL, &a);
    json_t *first = json_array_get(json_object_get(j, "data"), 0);
    T_CHECK(a.status == 200 && strcmp(str(first, "id"), ep) == 0 &&
                !json_object_get(first, "secret") && !strstr(a.body, secret),
            "endpoints listed, no secret: %ld %s", a.status, a.body);
    json_decref(j);
    char path[200];
    (void)snprintf(path, sizeof path, "/v1/webhook_endpoints/%s/rotate_secret", ep);
    j = call("POST", path, NULL, &a);
    T_CHECK(a.status == 200 && strncmp(str(j, "secret"), "whsec_", 6) == 0 &&
                strcmp(str(j, "secret"), secret) != 0 && strcmp(str(j, "id"), ep) == 0,
            "secret rotated: %ld %s", a.status, a.body);
    json_decref(j);
    j = call("POST", "/v1/webhook_endpoints", "{\"url\":\"https://10.1.2.3/hook\"}", &a);
    T_CHECK(a.status == 400 && strcmp(str(json_object_get(j, "error"), "param"), "url") == 0,
            "a URL inside the network: %ld %s", a.status, a.body);
    json_decref(j);
    j = call("POST", "/v1/webhook_endpoints",
             "{\"url\":\"https://hooks.example.com/x\",\"events\":\"payment.lost\"}", &a);
    T_CHECK(a.status == 400 && strcmp(str(json_object_get(j, "error"), "param"), "events") == 0,
            "an unknown event type: %ld %s", a.status, a.body);
    json_decref(j);
    int made = 1;
    for (int i = 1; i < PO_WEBHOOK_ENDPOINTS_MAX; i++) {
        char body[128];
        (void)snprintf(body, sizeof body, "{\"url\":\"https://hooks.example.com/%d\"}", i);
        json_decref(call("POST", "/v1/webhook_endpoints", body, &a));
        made += a.status == 201;
    }
    j = call("POST", "/v1/webhook_endpoints", "{\"url\":\"https://hooks.example.com/17\"}", &a);
    T_CHECK(made == PO_WEBHOOK_ENDPOINTS_MAX && a.status == 409 &&
                strcmp(err_code(j), "endpoint_limit") == 0,
            "%d endpoints made, the next: %ld %s", made, a.status, a.body);
    json_decref(j);
    j = call("POST", "/v1/webhook_endpoints/we_0000000000000000/remove", NULL, &a);
    T_CHECK(a.status == 404 && strcmp(err_code(j), "endpoint_not_found") == 0,
            "an unknown endpoint removed: %ld %s", a.status, a.body);
    json_decref(j);
    (void)snprintf(path, sizeof path, "/v1/webhook_endpoints/%s/remove", ep);
    j = call("POST", path, NULL, &a);
    T_CHECK(a.status == 200 && json_is_true(json_object_get(j, "removed")),
            "endpoint removed: %ld %s", a.status, a.body);
    json_decref(j);
    j = call("GET", "/v1/webhook_endpoints?limit=100", NULL, &a);
    T_CHECK(a.status == 200 &&
                json_array_size(json_object_get(j, "data")) == PO_WEBHOOK_ENDPOINTS_MAX - 1 &&
                !strstr(a.body, ep),
            "the removed endpoint is gone: %ld", a.status);
    json_decref(j);
}

static void events(void **state)
{
    (void)state;
    static struct answer a;
    for (int i = 1; i <= 3; i++) {
        char body[128], path[64];
        (void)snprintf(body, sizeof body,
                       "{\"merchant\":\"m1\",\"out_trade_no\":\"OA-%d\",\"amount\":%d}", i,
                       100 * i);
        json_decref(call("POST", "/v1/orders", body, &a));
        T_CHECK(a.status == 201, "order OA-%d: %ld %s", i, a.status, a.body);
        (void)snprintf(path, sizeof path, "/v1/orders/OA-%d/close", i);
        json_decref(call("POST", path, NULL, &a));
        T_CHECK(a.status == 200, "close OA-%d: %ld %s", i, a.status, a.body);
    }
    json_t *j = call("GET", "/v1/events?type=order.closed&limit=2", NULL, &a);
    char cursor[600], path[700];
    (void)snprintf(cursor, sizeof cursor, "%s", str(j, "next_cursor"));
    T_CHECK(a.status == 200 && json_array_size(json_object_get(j, "data")) == 2 &&
                json_is_true(json_object_get(j, "has_more")) && cursor[0],
            "events, page 1: %ld %s", a.status, a.body);
    json_decref(j);
    (void)snprintf(path, sizeof path, "/v1/events?type=order.closed&limit=2&cursor=%s", cursor);
    j = call("GET", path, NULL, &a);
    json_t *e = json_array_get(json_object_get(j, "data"), 0);
    T_CHECK(a.status == 200 && json_array_size(json_object_get(j, "data")) == 1 &&
                json_is_false(json_object_get(j, "has_more")) &&
                json_is_null(json_object_get(j, "next_cursor")) &&
                strcmp(str(json_object_get(json_object_get(e, "data"), "object"), "out_trade_no"),
                       "OA-3") == 0,
            "events, page 2: %ld %s", a.status, a.body);
    json_decref(j);
    j = call("GET", "/v1/events?out_trade_no=OA-2", NULL, &a);
    e = json_array_get(json_object_get(j, "data"), 0);
    T_CHECK(a.status == 200 && json_array_size(json_object_get(j, "data")) == 1 &&
                strcmp(str(e, "type"), "order.closed") == 0 &&
                strncmp(str(e, "id"), "evt_", 4) == 0,
            "events of OA-2: %ld %s", a.status, a.body);
    json_decref(j);
    j = call("GET", "/v1/events?type=payment.lost", NULL, &a);
    T_CHECK(a.status == 400 && strcmp(err_code(j), "invalid_parameter") == 0,
            "events of an unknown type: %ld %s", a.status, a.body);
    json_decref(j);
    static const char *const lists[] = {"/v1/balances", "/v1/alerts", "/v1/journal",
                                        "/v1/orders?status=CLOSED"};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        j = call("GET", lists[i], NULL, &a);
        T_CHECK(a.status == 200 && strcmp(str(j, "object"), "list") == 0, "%s: %ld %s", lists[i],
                a.status, a.body);
        json_decref(j);
    }
    j = call("GET", "/v1/openapi.json", NULL, &a);
    T_CHECK(a.status == 200 && strcmp(str(j, "openapi"), "3.1.0") == 0,
            "the description through its own proxy: %ld", a.status);
    json_decref(j);
}

/* A tenant with a merchant and an API key on the database of url. */
static void tenant(const char *url)
{
    struct po_store *s = t_open(url);
    char err[PO_ERRBUF_SIZE] = "", key_id[PO_APIKEY_ID_LEN + 1];
    bool created = false;
    if (po_tenant_add(s, "t1", "t1", &created, err, sizeof err) ||
        po_merchant_add(s, "t1", "m1", &created, err, sizeof err) ||
        po_apikey_create(s, "t1", api_key, key_id, err, sizeof err)) {
        fprintf(stderr, "test_openapi: %s\n", err);
        exit(1);
    }
    po_store_close(s);
}

/* docs/openapi.json as read, and the gateway the cases call. */
static char *file;
static size_t len;
static struct t_gateway *gw;

/* The description itself: OpenAPI 3.1, payonce's version, the route
 * table's, and the built-in copy byte for byte. */
static void the_description(void **state)
{
    (void)state;
    json_error_t je;
    json_t *doc = json_loadb(file, len, JSON_REJECT_DUPLICATES, &je);
    T_CHECK(doc && strcmp(json_string_value(json_object_get(doc, "openapi")) ?: "", "3.1.0") == 0,
            "docs/openapi.json is OpenAPI 3.1.0 JSON: %s", doc ? "" : je.text);
    const char *version =
        json_string_value(json_object_get(json_object_get(doc, "info"), "version"));
    T_CHECK(version && strcmp(version, PO_VERSION) == 0,
            "info.version %s is payonce's version %s (CMakeLists.txt project())", version ?: "",
            PO_VERSION);
    routes_and_paths(doc);
    json_decref(doc);
    T_CHECK(po_openapi_json_len == len && memcmp(po_openapi_json, file, len) == 0 &&
                po_openapi_json[len] == '\0',
            "the built-in description (%zu bytes) is docs/openapi.json (%zu bytes) byte for byte:"
            " rebuild",
            po_openapi_json_len, len);
}

/* GET /v1/openapi.json: the description, without a key, on the API's
 * listener only. */
static void served(void **state)
{
    (void)state;
    size_t cap = len + 4096, got_len = 0;
    char *body = malloc(cap);
    struct got g;
    assert_non_null(body);
    long st = get(gw->port, NULL, body, cap, &got_len, &g);
    bool same = st == 200 && strcmp(g.ctype, "application/json") == 0 && got_len == len &&
                memcmp(body, file, len) == 0;
    long st2 = get(gw->port, "POST", body, cap, &got_len, &g);
    bool keyed = st2 == 401 && strstr(body, "\"unauthorized\"");
    long st3 = get(po_server_ops_port(gw->srv), NULL, body, cap, &got_len, &g);
    free(body);
    T_CHECK(same, "GET /v1/openapi.json without a key: %ld %s, %zu bytes, docs/openapi.json's %zu",
            st, g.ctype, got_len, len);
    T_CHECK(keyed, "POST /v1/openapi.json is the API's: a key first (%ld)", st2);
    T_CHECK(st3 == 404, "the operations listener does not serve it: %ld", st3);
}

int main(int argc, char **argv)
{
    const char *backend = t_backend(argc, argv);
    po_log_set_level(PO_LOG_ERROR);
    file = read_doc(&len);
    char url[T_URL_MAX], dir[256], listen[32] = "127.0.0.1:0";
    (void)snprintf(dir, sizeof dir, "%s/payonce-openapi-XXXXXX", po_tmp_dir());
    if (!mkdtemp(dir))
        return 1;
    t_db_create(backend, url, sizeof url);
    tenant(url);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    unsigned fixed = 0;
    if (t_prism_start(dir, 1, &fixed))
        (void)snprintf(listen, sizeof listen, "127.0.0.1:%u", fixed);
    unsigned char master[32];
    if (po_random(master, sizeof master))
        return 1;
    struct po_gateway_cfg cfg;
    t_gateway_cfg(&cfg, url, master);
    cfg.listen = listen;
    cfg.ops_listen = "127.0.0.1:0";
    gw = t_gateway_start(&cfg, NULL);
    api_port = gw->port;
    const struct CMUnitTest tests[] = {cmocka_unit_test(the_description), cmocka_unit_test(served),
                                       cmocka_unit_test(webhook_endpoints),
                                       cmocka_unit_test(events)};
    int rc = T_RUN_GROUP("openapi", tests, NULL, NULL);
    t_prism_stop("openapi: webhook endpoints, events and the description");
    t_gateway_stop(gw);
    curl_global_cleanup();
    free(file);
    t_db_drop(url);
    char cmd[300];
    (void)snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (t_failures == 0 && system(cmd)) { /* lint-ok */
    }
    printf("# openapi: %d checks\n", t_passes + t_failures);
    return rc || t_failures ? 1 : 0;
}
