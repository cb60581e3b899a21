/* fuzz_http.c — the callback request path behind the HTTP server: channel
 * and tenant from the URL, headers, body, the stored account (sealed-secret
 * loading, cached), the adapter, and the committer's batch on a real
 * SQLite database. After every input the ledger must still verify. */
#include "fuzz_common.h"
#include "fuzz_gateway.h"

#include "../../src/engine/objects.h"
#include "../../src/http/http_int.h"
#include "../../src/ledger/ledger.h"

#include <jansson.h>

#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static struct po_http_ctx gw;
static struct po_store_pool *pool;
static struct po_store *checker;
static unsigned long inputs;

static void setup(void)
{
    char url[128], err[256];
    snprintf(url, sizeof url, "sqlite:%s/payonce-fuzz-http-%ld.db", po_tmp_dir(), (long)getpid());
    unlink(url + 7);
    struct po_store *s = NULL;
    bool created;
    if (po_store_open(url, &s, err, sizeof err) || po_store_migrate(s, NULL, err, sizeof err) ||
        po_tenant_add(s, "t1", "t1", NULL, err, sizeof err) ||
        po_merchant_add(s, "t1", "m1", NULL, err, sizeof err))
        abort();
    struct po_order_spec o = {.tenant = "t1",
                              .merchant = "m1",
                              .out_trade_no = "ORD-1",
                              .amount_minor = 100,
                              .currency = "CNY"};
    if (po_order_create(s, &o, &created, err, sizeof err))
        abort();
    struct po_channel_account wx, ali, st;
    fuzz_accounts(&wx, &ali, &st);
    char *priv = NULL, *pub = NULL, cfg[4096];
    if (po_privkey_to_pem(fuzz_key, &priv, &pub))
        abort();
    char *b64 = NULL;
    if (po_b64_encode((const unsigned char *)FUZZ_APIV3, 32, &b64))
        abort();
    json_t *j = json_pack("{s:s, s:s, s:[{s:s, s:s}]}", "mchid", "1230000109", "apiv3_key", "",
                          "keys", "serial", "PUB_KEY_ID_FUZZ", "public_key_pem", pub);
    snprintf(cfg, sizeof cfg, "plain:%s", b64);
    json_object_set_new(j, "apiv3_key", json_string(cfg));
    char *doc = json_dumps(j, JSON_COMPACT);
    if (po_store_exec(s,
                      "INSERT INTO channel_account (tenant_id, channel, config, updated_at)"
                      " VALUES ('t1', 'wechatpay', ?, 'x')",
                      PO_PARAMS(PO_TEXT(doc)), NULL, NULL, err, sizeof err))
        abort();
    free(doc);
    json_decref(j);
    free(b64);
    po_channel_account_free(&wx);
    po_channel_account_free(&ali);
    po_channel_account_free(&st);
    free(priv);
    free(pub);
    po_store_close(s);
    fuzz_http_ctx(url, &gw);
    pool = gw.gw->pool;
    if (po_store_open(url, &checker, err, sizeof err))
        abort();
    po_log_set_level(PO_LOG_ERROR + 1);
}

static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static bool done;

static void completed(struct po_hcall *h)
{
    (void)h;
    pthread_mutex_lock(&done_mu);
    done = true;
    pthread_cond_signal(&done_cv);
    pthread_mutex_unlock(&done_mu);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!pool)
        setup();
    if (size < 2 || size > PO_BODY_MAX)
        return 0;
    static const char *const channels[] = {"wechatpay", "alipay", "stripe", "paypal"};
    static const char *const tenants[] = {"t1", "t2", "t 1", ""};
    static const char *const names[] = {"Wechatpay-Serial", "Wechatpay-Signature",
                                        "Wechatpay-Timestamp", "Wechatpay-Nonce"};
    struct po_sim_request r;
    fuzz_split(data + 2, size - 2, names, 4, &r);
    /* Half the inputs carry a valid signature, to reach the engine. */
    if (data[1] & 1)
        (void)!po_sim_wechatpay_sign(fuzz_key, "PUB_KEY_ID_FUZZ", r.body, r.body_len,
                                     (int64_t)time(NULL), &r);
    static struct po_hcall h;
    memset(&h, 0, sizeof h);
    h.ctx = &gw;
    h.complete = completed;
    struct po_hreq req = {.method = "POST",
                          .path = "/notify",
                          .header = fuzz_header,
                          .ctx = &r,
                          .body = r.body ? r.body : "",
                          .body_len = r.body_len,
                          .body_too_large = data[1] & 2,
                          .request_id = "fuzz",
                          .now_unix = (int64_t)time(NULL)};
    snprintf(req.params[0], sizeof req.params[0], "%s", channels[data[0] % 4]);
    snprintf(req.params[1], sizeof req.params[1], "%s", tenants[(data[0] / 4) % 4]);
    h.req = req;
    /* As the server runs it: answered now, or later from another thread. */
    if (po_notify_start(&h)) {
        pthread_mutex_lock(&done_mu);
        while (!done)
            pthread_cond_wait(&done_cv, &done_mu);
        done = false;
        pthread_mutex_unlock(&done_mu);
        h.finish(&h);
    }
    struct po_hresp *a = &h.resp;
    if (a->status < 200 || a->status > 599)
        abort();
    free(a->body);
    po_sim_request_free(&r);
    if (++inputs % 256 == 0) {
        int n = -1;
        if (po_ledger_verify(checker, NULL, NULL, &n, NULL, 0) || n != 0)
            abort();
    }
    return 0;
}
