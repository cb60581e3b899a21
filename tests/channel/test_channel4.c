/*
 * test_channel4.c BACKEND — adding a channel is one file plus one registry
 * line (issue 25, item 4). This program is built with tests/channel/
 * testpay.c and the registry given one more X(testpay) (PO_CHANNELS_EXTRA),
 * over every other module unchanged, and shows the fourth channel working
 * through the whole gateway in process:
 *   - the registry lists it (after the three), and nothing caps it;
 *   - its account is built, sealed under the master key, stored and loaded
 *     back by the one loader, with its own private part;
 *   - a signed notification at POST /notify/testpay/t1 is acknowledged in
 *     the channel's own words and credited once: the order PAID, the
 *     channel's clearing account and the merchant's payable moved by the
 *     amount; the same notification again is a duplicate that moves
 *     nothing; a wrong signature is refused (FAIL 4xx) and changes nothing;
 *   - /metrics has its row (channel="testpay"), and the 404 for a channel
 *     nobody registered names it among the channels;
 *   - channel show's redaction hides its secret, whatever it is called.
 */
#include "../support/simenv.h"
#include "../support/testutil.h"

#include "../../src/channel/channel.h"
#include "../../src/crypto/crypto.h"
#include "../../src/service/service.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SECRET "tp_secret_0123456789"

static unsigned port;

static void die(const char *what, const char *err)
{
    fprintf(stderr, "test_channel4: %s: %s\n", what, err);
    exit(1);
}

static long notify(const char *path, const char *body, const char *secret, char *out, size_t cap)
{
    char ts[24], sig[200], hex[65], url[128];
    unsigned char mac[32];
    (void)snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
    char msg[2048];
    (void)snprintf(msg, sizeof msg, "%s.%s", ts, body);
    if (po_hmac_sha256(secret, strlen(secret), msg, strlen(msg), mac))
        abort();
    for (int i = 0; i < 32; i++)
        (void)snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    (void)snprintf(sig, sizeof sig, "Testpay-Signature: t=%s,v1=%s", ts, hex);
    (void)snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, path);
    const char *h[] = {"Content-Type: application/json", sig, NULL};
    struct t_http_req q = {.url = url, .headers = h, .body = body};
    return t_http(&q, out, cap, NULL);
}

static long get(const char *path, char *out, size_t cap)
{
    char url[128];
    (void)snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, path);
    struct t_http_req q = {.url = url};
    return t_http(&q, out, cap, NULL);
}

/* "sqlite" or "postgres" (argv[1]). */
static const char *backend;

/* The one case: a fourth channel registered, its account sealed and
 * loaded, an order paid through it once of three deliveries, and what the
 * layers above take from the registry. */
static void a_fourth_channel(void **state)
{
    (void)state;
    char url[T_URL_MAX], dir[] = "/tmp/payonce-channel4-XXXXXX", path[256],
                         err[PO_ERRBUF_SIZE] = "";
    unsigned char master[32];
    if (!mkdtemp(dir) || po_random(master, sizeof master))
        abort();
    t_db_create(backend, url, sizeof url);
    struct po_store *s = t_open(url);
    t_seed_tenant(s);

    /* The registry. */
    const struct po_channel_ops *tp = po_channel_find("testpay");
    char names[256];
    po_channel_names(0, names, sizeof names);
    T_CHECK(tp && po_channel_index("testpay") == 3 && po_channels[4] == NULL,
            "testpay is not the fourth registered channel");
    if (!tp)
        die("registry", "no channel testpay: built without PO_CHANNEL_EXTRA=testpay?");
    T_CHECK(strcmp(names, "wechatpay, alipay, stripe, testpay") == 0, "names: %s", names);

    /* Its account: built from the options, sealed, stored, loaded back. */
    (void)snprintf(path, sizeof path, "%s/secret", dir);
    FILE *f = fopen(path, "w");
    if (!f || fputs(SECRET, f) < 0 || fclose(f))
        abort();
    struct po_account_opts o = {{"secret-file"}, {path}, 1};
    struct po_account_input in = po_account_input_table("t1", master, &o);
    char *doc = NULL;
    if (po_channel_account_build(tp, &in, &doc, err, sizeof err) ||
        po_account_save(s, "t1", "testpay", doc, err, sizeof err))
        die("testpay account", err);
    T_CHECK(!strstr(doc, SECRET) && strstr(doc, PO_SEALED_PREFIX), "the secret is not sealed");
    free(doc);
    struct po_channel_account acct;
    T_CHECK(po_account_fetch(s, master, "t1", "testpay", &acct, err, sizeof err) == PO_OK &&
                acct.priv != NULL,
            "the stored account does not load: %s", err);
    po_channel_account_free(&acct);
    json_t *shown = NULL;
    T_CHECK(po_account_doc(s, "t1", "testpay", &shown, NULL, 0) == PO_OK && shown &&
                po_account_value_sealed(json_object_get(shown, "secret")),
            "channel show would not redact testpay's secret");
    json_decref(shown);

    /* An order paid through it. */
    bool created = false;
    struct po_order_spec spec = {.tenant = "t1",
                                 .merchant = "m1",
                                 .out_trade_no = "TP-1",
                                 .amount_minor = 1500,
                                 .currency = "CNY",
                                 .channel = "testpay"};
    if (po_order_create(s, &spec, &created, err, sizeof err) || !created)
        die("order", err);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct po_gateway_cfg g;
    t_gateway_cfg(&g, url, master);
    struct t_gateway *gw = t_gateway_start(&g, NULL);
    port = gw->port;
    const char *body = "{\"id\":\"evt_1\",\"type\":\"payment.succeeded\",\"out_trade_no\":\"TP-1\","
                       "\"txn\":\"tp_txn_1\",\"amount\":1500,\"currency\":\"CNY\"}";
    static char ans[1 << 16];
    long st = notify("/notify/testpay/t1", body, SECRET, ans, sizeof ans);
    T_CHECK(st == 200 && strcmp(ans, "OK") == 0, "first delivery: %ld %s", st, ans);
    st = notify("/notify/testpay/t1", body, SECRET, ans, sizeof ans);
    T_CHECK(st == 200 && strcmp(ans, "OK") == 0, "second delivery: %ld %s", st, ans);
    st = notify("/notify/testpay/t1", body, "another secret", ans, sizeof ans);
    T_CHECK(st >= 400 && st < 500, "forged delivery answered %ld %s", st, ans);
    T_CHECK(t_count_url(url,
                        "SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ? AND"
                        " status = 'PAID'",
                        "TP-1") == 1,
            "TP-1 is not PAID");
    T_CHECK(t_count_url(url,
                        "SELECT COUNT(*) FROM journal WHERE kind = 'PAY' AND"
                        " out_trade_no = ?",
                        "TP-1") == 1,
            "not exactly one payment journal");
    T_CHECK(t_balance(s, "channel_clearing:testpay") == 1500 &&
                t_balance(s, "merchant_payable:m1") == -1500,
            "balances: clearing %lld, payable %lld",
            (long long)t_balance(s, "channel_clearing:testpay"),
            (long long)t_balance(s, "merchant_payable:m1"));
    T_CHECK(t_verify(s) == 0, "the ledger's invariants");

    /* What the layers above take from the registry. */
    st = get("/metrics", ans, sizeof ans);
    T_CHECK(st == 200 &&
                strstr(ans, "payonce_callbacks_total{channel=\"testpay\",outcome=\"applied\"") &&
                strstr(ans, "payonce_callbacks_total{channel=\"testpay\",outcome=\"duplicate\""),
            "metrics have no testpay rows");
    st = notify("/notify/nopay/t1", body, SECRET, ans, sizeof ans);
    T_CHECK(st == 404 && strstr(ans, "wechatpay, alipay, stripe, testpay"), "404: %ld %s", st, ans);

    t_gateway_stop(gw);
    curl_global_cleanup();
    po_store_close(s);
    t_db_drop(url);
    (void)unlink(path);
    (void)rmdir(dir);
}

int main(int argc, char **argv)
{
    backend = t_backend(argc, argv);
    const struct CMUnitTest tests[] = {cmocka_unit_test(a_fourth_channel)};
    char name[64];
    (void)snprintf(name, sizeof name, "channel4[%s]", backend);
    return T_RUN_GROUP(name, tests, NULL, NULL);
}
