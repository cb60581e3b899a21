/* fuzz_api.c — the tenant API behind the HTTP server: method and route,
 * path parameter, Idempotency-Key, query arguments and the JSON body, with a
 * valid API key, against a real SQLite database holding a paid order (so
 * refunds reach the reservation). After every input the answer must be a
 * well-formed JSON error or object with a sane status; every 256 inputs the
 * ledger must verify and no order may have reserved more than it was paid. */
#include "fuzz_common.h"
#include "fuzz_gateway.h"

#include "../../src/engine/objects.h"
#include "../../src/http/http_int.h"
#include "../../src/service/service.h"
#include "../../src/ledger/ledger.h"

#include <jansson.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static struct po_http_ctx gw;
static struct po_store_pool *pool;
static struct po_store *checker;
static unsigned long inputs;
static char key[PO_APIKEY_LEN + 1];

static void setup(void)
{
    char url[128], err[256], kid[PO_APIKEY_ID_LEN + 1];
    snprintf(url, sizeof url, "sqlite:%s/payonce-fuzz-api-%ld.db", po_tmp_dir(), (long)getpid());
    unlink(url + 7);
    struct po_store *s = NULL;
    bool created;
    if (po_store_open(url, &s, err, sizeof err) || po_store_migrate(s, NULL, err, sizeof err) ||
        po_tenant_add(s, "t1", "t1", NULL, err, sizeof err) ||
        po_merchant_add(s, "t1", "m1", NULL, err, sizeof err) ||
        po_apikey_create(s, "t1", key, kid, err, sizeof err))
        abort();
    struct po_order_spec o = {.tenant = "t1",
                              .merchant = "m1",
                              .out_trade_no = "ORD-1",
                              .amount_minor = 100,
                              .currency = "CNY",
                              .channel = "alipay"};
    if (po_order_create(s, &o, &created, err, sizeof err))
        abort();
    struct po_event ev = {.tenant = "t1",
                          .channel = "alipay",
                          .type = PO_EV_PAY_SUCCESS,
                          .channel_txn_id = "2026120222001",
                          .out_trade_no = "ORD-1",
                          .amount_minor = 100,
                          .currency = "CNY",
                          .source = PO_SRC_CALLBACK,
                          .occurred_at = "2026-12-02T10:00:00+08:00"};
    struct po_outcome out;
    po_engine_apply(s, NULL, &ev, &out);
    if (out.kind != PO_OUT_APPLIED)
        abort();
    po_store_close(s);
    fuzz_http_ctx(url, &gw);
    pool = gw.gw->pool;
    if (po_store_open(url, &checker, err, sizeof err))
        abort();
    po_log_set_level(PO_LOG_ERROR + 1);
}

struct input {
    char auth[160];
    struct po_sim_request r; /* headers: Idempotency-Key; args: limit, cursor */
};

static const char *header(void *ctx, const char *name)
{
    struct input *in = ctx;
    if (strcmp(name, "Authorization") == 0)
        return in->auth[0] ? in->auth : NULL;
    const char *v = fuzz_header(&in->r, name);
    return v && *v ? v : NULL; /* an empty line means: no such header */
}

static const char *arg(void *ctx, const char *name)
{
    return header(ctx, name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!pool)
        setup();
    if (size < 2 || size > PO_BODY_MAX)
        return 0;
    static const char *const paths[] = {"/v1/orders",
                                        "/v1/orders/ORD-1",
                                        "/v1/orders/ORD-1/close",
                                        "/v1/orders/NEW-1/close",
                                        "/v1/refunds",
                                        "/v1/refunds/R-1",
                                        "/v1/balances",
                                        "/v1/alerts",
                                        "/v1/journal",
                                        "/v1/orders/",
                                        "/v1/x/y/z/w",
                                        "/v1/orders/a b"};
    static const char *const names[] = {"Idempotency-Key", "limit", "cursor"};
    struct input in;
    memset(&in, 0, sizeof in);
    fuzz_split(data + 2, size - 2, names, 3, &in.r);
    if (data[1] & 4)
        snprintf(in.auth, sizeof in.auth, "Bearer %s", key);
    else if (data[1] & 8)
        snprintf(in.auth, sizeof in.auth, "Bearer po_%.*s", (int)(size > 20 ? 20 : size - 2),
                 (const char *)data + 2);
    struct po_hreq req = {.method = data[1] & 1 ? "POST" : (data[1] & 16 ? "DELETE" : "GET"),
                          .path = paths[data[0] % (sizeof paths / sizeof paths[0])],
                          .header = header,
                          .arg = arg,
                          .ctx = &in,
                          .body = in.r.body ? in.r.body : "",
                          .body_len = in.r.body_len,
                          .body_too_large = data[1] & 2,
                          .request_id = "fuzz"};
    /* As the server routes it. */
    const struct po_route *rt = NULL;
    char allow[64];
    enum po_route_match m =
        po_route_find(req.method, req.path, &rt, req.params, allow, sizeof allow);
    struct po_hresp a;
    po_api_handle(&gw, m == PO_ROUTE_FOUND ? rt : NULL, m == PO_ROUTE_NO_METHOD ? allow : NULL,
                  &req, &a);
    json_t *j = json_loads(a.body ? a.body : "", 0, NULL);
    if (a.status < 200 || a.status > 599 || !json_is_object(j) ||
        (a.status >= 400 && !json_is_string(json_object_get(json_object_get(j, "error"), "code"))))
        abort();
    json_decref(j);
    free(a.body);
    po_sim_request_free(&in.r);
    if (++inputs % 256 == 0) {
        int n = -1;
        struct po_rows r;
        if (po_ledger_verify(checker, NULL, NULL, &n, NULL, 0) || n != 0 ||
            po_store_exec(checker,
                          "SELECT COUNT(*) FROM pay_order WHERE refund_reserved > amount OR"
                          " amount <= 0 OR amount > 100000000000000",
                          PO_NO_PARAMS, &r, NULL, NULL, 0))
            abort();
        if (strcmp(po_rows_get(&r, 0, 0), "0") != 0)
            abort();
        po_rows_free(&r);
    }
    return 0;
}
