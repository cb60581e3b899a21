/*
 * test_sim_alipay.c — the simulated Alipay gateway refuses what Alipay's
 * refuses, with Alipay's own answers (issue 43 item 3: a simulator is
 * judged, not trusted). A request shaped as payonce and alipay-sdk send it
 * (the common parameters in the URL, biz_content in the body, signed RSA2
 * with the app key) is accepted; the same request missing or breaking one
 * thing the gateway requires is refused with the code and sub_code Alipay
 * documents for it (its common error codes: 40001 missing, 40002 invalid;
 * its business rules: 40004 ACQ.*), in the "<method>_response" (or
 * error_response) member — signed with Alipay's key once the app is known,
 * unsigned before (an unknown app has no key to sign with). Then the
 * certificate mode's own refusals, and the answer naming alipay_cert_sn.
 * No database: the simulator alone, in-process on loopback.
 */
#include "../../src/channel/channel_int.h"
#include "../../src/sim/sim.h"
#include "../support/simenv.h"
#include "../support/testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char dir[256], sd[300];
static unsigned sim_port;
static struct po_privkey *app_key, *stranger_key;
static struct po_channel_account alipay; /* verifies answers with Alipay's key */
static struct po_alipay_account alipay_priv;

static void die(const char *m)
{
    fprintf(stderr, "test_sim_alipay: %s\n", m);
    exit(1);
}

/* "yyyy-MM-dd HH:mm:ss", offset_s from UTC now */
static void clock_text(int64_t offset_s, char *out, size_t cap)
{
    time_t t = time(NULL) + offset_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, cap, "%Y-%m-%d %H:%M:%S", &tm);
}

/* A request's parameters (NULL value: left out). */
struct req {
    int n;
    const char *k[24];
    char v[24][1024];
    bool gone[24];
};

static void set(struct req *q, const char *k, const char *v)
{
    int i = 0;
    while (i < q->n && strcmp(q->k[i], k) != 0)
        i++;
    if (i == q->n) {
        if (q->n == 24)
            die("too many parameters");
        q->k[q->n++] = k;
    }
    q->gone[i] = v == NULL;
    snprintf(q->v[i], sizeof q->v[i], "%s", v ? v : "");
}

/* payonce's precreate as it sends it (a fresh out_trade_no). */
static void base(struct req *q, const char *method, const char *biz)
{
    static int seq;
    char ts[24], b[512];
    memset(q, 0, sizeof *q);
    clock_text(8 * 3600, ts, sizeof ts);
    set(q, "method", method);
    set(q, "app_id", "2021000000000001");
    set(q, "format", "JSON");
    set(q, "charset", "utf-8");
    set(q, "version", "1.0");
    set(q, "sign_type", "RSA2");
    set(q, "timestamp", ts);
    set(q, "notify_url", "http://127.0.0.1:9/notify/alipay/t1");
    if (!biz) {
        snprintf(b, sizeof b,
                 "{\"out_trade_no\":\"SA-%d\",\"total_amount\":\"0.01\",\"subject\":\"strict\"}",
                 ++seq);
        biz = b;
    }
    set(q, "biz_content", biz);
}

/* Signs q with key (NULL: unsigned), then sends it as alipay-sdk does;
 * the answer into ans. Returns the HTTP status. */
static long send_req(const struct req *q, const struct po_privkey *key, bool in_body, char *ans,
                     size_t cap)
{
    struct po_form f = {0}, u = {0}, b = {0};
    bool ok = true;
    for (int i = 0; ok && i < q->n; i++)
        if (!q->gone[i])
            ok = po_form_add(&f, q->k[i], q->v[i]) == PO_OK;
    if (ok && key)
        ok = po_alipay_sign_form(key, &f, false) == PO_OK;
    for (int i = 0; ok && i < f.n; i++)
        ok = po_form_add(!in_body && strcmp(f.p[i].key, "biz_content") != 0 ? &u : &b, f.p[i].key,
                         f.p[i].val) == PO_OK;
    char *qs = ok ? po_form_encode(&u, NULL) : NULL, *bs = ok ? po_form_encode(&b, NULL) : NULL;
    if (!qs || !bs)
        die("cannot encode a request");
    char url[8192];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/gateway.do?%s", sim_port, qs);
    const char *h[] = {"Content-Type: application/x-www-form-urlencoded;charset=utf-8", NULL};
    struct t_http_req rq = {.method = "POST", .url = url, .headers = h, .body = bs};
    size_t len = 0;
    long st = t_http(&rq, ans, cap, &len);
    free(qs);
    free(bs);
    po_form_free(&f);
    po_form_free(&u);
    po_form_free(&b);
    return st;
}

/* The answer's node holds code and sub_code (NULL: none), and it is signed
 * by Alipay's key or unsigned as expected. */
static bool answered(const char *ans, const char *method, const char *code, const char *sub,
                     bool is_signed, char *why, size_t cap)
{
    struct po_api_resp r = {.status = 200, .body = (char *)(uintptr_t)ans, .len = strlen(ans)};
    char reason[64] = "";
    json_t *n = po_alipay_resp_verified(&alipay, &r, method, reason, sizeof reason);
    json_t *doc = json_loads(ans, 0, NULL), *node = NULL;
    const char *key;
    json_t *v;
    json_object_foreach(doc, key, v) if (strcmp(key, "sign") != 0 &&
                                         strcmp(key, "alipay_cert_sn") != 0) node = v;
    const char *got = json_string_value(json_object_get(node, "code")),
               *gsub = json_string_value(json_object_get(node, "sub_code"));
    bool ok = got && strcmp(got, code) == 0 && (sub ? gsub && strcmp(gsub, sub) == 0 : !gsub) &&
              json_string_value(json_object_get(node, "msg")) &&
              (!sub || json_string_value(json_object_get(node, "sub_msg"))) &&
              (is_signed ? n != NULL : json_object_get(doc, "sign") == NULL);
    snprintf(why, cap, "%s (%s)", ans, reason);
    json_decref(n);
    json_decref(doc);
    return ok;
}

struct row {
    const char *what;
    const char *key, *val; /* set before signing (val NULL: left out) */
    const char *code, *sub;
    bool is_signed;
};

static void refusals(void **state)
{
    (void)state;
    char utc[24], slash[24], late[24], ans[8192], why[9000];
    clock_text(0, utc, sizeof utc); /* UTC: 8 hours off Beijing time */
    clock_text(8 * 3600 + 3600, late, sizeof late);
    clock_text(8 * 3600, slash, sizeof slash);
    slash[4] = slash[7] = '/';
    const char *M = "alipay.trade.precreate";
    const struct row rows[] = {
        {"payonce's request, as it is", NULL, NULL, "10000", NULL, true},
        {"no method", "method", NULL, "40001", "isv.missing-method", false},
        {"an unknown method", "method", "alipay.trade.nope", "40002", "isv.invalid-method", false},
        {"no app_id", "app_id", NULL, "40001", "isv.missing-app-id", false},
        {"another app's id", "app_id", "2021000000009999", "40002", "isv.invalid-app-id", false},
        {"no timestamp", "timestamp", NULL, "40001", "isv.missing-timestamp", true},
        {"the timestamp in UTC", "timestamp", utc, "40002", "isv.invalid-timestamp", true},
        {"the timestamp an hour ahead", "timestamp", late, "40002", "isv.invalid-timestamp", true},
        {"the timestamp with slashes", "timestamp", slash, "40002", "isv.invalid-timestamp", true},
        {"no version", "version", NULL, "40001", "isv.missing-version", true},
        {"version 2.0", "version", "2.0", "40002", "isv.invalid-version", true},
        {"charset latin1", "charset", "latin1", "40002", "isv.invalid-charset", true},
        {"no charset", "charset", NULL, "40002", "isv.invalid-charset", true},
        {"no sign_type", "sign_type", NULL, "40001", "isv.missing-signature-type", true},
        {"sign_type RSA", "sign_type", "RSA", "40002", "isv.invalid-signature-type", true},
        {"format XML", "format", "XML", "40002", "isv.invalid-format", true},
        {"biz_content not JSON", "biz_content", "{out_trade_no:", "40002", "isv.illegal-json",
         true},
        {"no biz_content", "biz_content", NULL, "40004", "ACQ.INVALID_PARAMETER", true},
        {"no subject", "biz_content", "{\"out_trade_no\":\"SA-X1\",\"total_amount\":\"0.01\"}",
         "40004", "ACQ.INVALID_PARAMETER", true},
        {"total_amount with three decimals", "biz_content",
         "{\"out_trade_no\":\"SA-X2\",\"total_amount\":\"0.011\",\"subject\":\"s\"}", "40004",
         "ACQ.INVALID_PARAMETER", true},
        {"total_amount 0.00", "biz_content",
         "{\"out_trade_no\":\"SA-X3\",\"total_amount\":\"0.00\",\"subject\":\"s\"}", "40004",
         "ACQ.INVALID_PARAMETER", true},
        {"total_amount over 100000000.00", "biz_content",
         "{\"out_trade_no\":\"SA-X4\",\"total_amount\":\"100000000.01\",\"subject\":\"s\"}",
         "40004", "ACQ.TOTAL_FEE_EXCEED", true},
        {"total_amount a number, not text", "biz_content",
         "{\"out_trade_no\":\"SA-X5\",\"total_amount\":1,\"subject\":\"s\"}", "40004",
         "ACQ.INVALID_PARAMETER", true},
        {"out_trade_no of 65 characters", "biz_content",
         "{\"out_trade_no\":\"A1234567890123456789012345678901234567890123456789012345678901234\","
         "\"total_amount\":\"0.01\",\"subject\":\"s\"}",
         "40004", "ACQ.INVALID_PARAMETER", true},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct req q;
        base(&q, M, NULL);
        if (rows[i].key)
            set(&q, rows[i].key, rows[i].val);
        const char *method = strcmp(rows[i].key ? rows[i].key : "", "method") == 0 ? "x" : M;
        long st = send_req(&q, app_key, false, ans, sizeof ans);
        T_CHECK(st == 200 && answered(ans, method, rows[i].code, rows[i].sub, rows[i].is_signed,
                                      why, sizeof why),
                "%s: not %s %s: %ld %s", rows[i].what, rows[i].code, rows[i].sub ? rows[i].sub : "",
                st, why);
    }
    /* the signature: none, another key's, a parameter changed after
     * signing, a parameter added after signing */
    struct req q;
    base(&q, M, NULL);
    long st = send_req(&q, NULL, false, ans, sizeof ans);
    T_CHECK(st == 200 && answered(ans, M, "40001", "isv.missing-signature", true, why, sizeof why),
            "unsigned: %s", why);
    st = send_req(&q, stranger_key, false, ans, sizeof ans);
    T_CHECK(st == 200 && answered(ans, M, "40002", "isv.invalid-signature", true, why, sizeof why),
            "signed with a key the app does not have: %s", why);
    /* payonce's parameters all in the body (as before issue 43): the
     * gateway reads both places, as Alipay's does */
    st = send_req(&q, app_key, true, ans, sizeof ans);
    T_CHECK(st == 200 && answered(ans, M, "10000", NULL, true, why, sizeof why),
            "every parameter in the body: %s", why);
    /* the other methods' own rules */
    const struct {
        const char *method, *biz;
    } biz_rules[] = {
        {"alipay.trade.query", "{}"},
        {"alipay.trade.close", "{\"operator_id\":\"x\"}"},
        {"alipay.trade.refund", "{\"out_trade_no\":\"SA-1\"}"},
        {"alipay.trade.refund", "{\"out_trade_no\":\"SA-1\",\"refund_amount\":\"1.001\"}"},
        {"alipay.trade.fastpay.refund.query", "{\"out_trade_no\":\"SA-1\"}"},
        {"alipay.trade.page.pay",
         "{\"out_trade_no\":\"SA-P\",\"total_amount\":\"0.01\",\"subject\":\"s\","
         "\"product_code\":\"QUICK_WAP_WAY\"}"},
    };
    for (size_t i = 0; i < sizeof biz_rules / sizeof biz_rules[0]; i++) {
        base(&q, biz_rules[i].method, biz_rules[i].biz);
        st = send_req(&q, app_key, false, ans, sizeof ans);
        T_CHECK(st == 200 && answered(ans, biz_rules[i].method, "40004", "ACQ.INVALID_PARAMETER",
                                      true, why, sizeof why),
                "%s %s: %s", biz_rules[i].method, biz_rules[i].biz, why);
    }
    /* query by trade_no alone is a query (二选一): of no trade, here */
    base(&q, "alipay.trade.query", "{\"trade_no\":\"2026120822001400000000000404\"}");
    st = send_req(&q, app_key, false, ans, sizeof ans);
    T_CHECK(st == 200 && answered(ans, "alipay.trade.query", "40004", "ACQ.TRADE_NOT_EXIST", true,
                                  why, sizeof why),
            "query by trade_no alone: %s", why);
}

/* Certificate mode: the request's SNs checked; the answer names Alipay's
 * certificate. */
static void cert_mode(void **state)
{
    (void)state;
    char app_sn[64], root_sn[PO_ALIPAY_ROOT_SN_MAX + 1], ali_sn[64], ans[8192], why[9000];
    const char *files[] = {"appCertPublicKey.crt", "alipayRootCert.crt",
                           "alipayCertPublicKey_RSA2.crt"};
    char *sns[] = {app_sn, root_sn, ali_sn};
    size_t caps[] = {sizeof app_sn, sizeof root_sn, sizeof ali_sn};
    for (int i = 0; i < 3; i++) {
        char path[512], *pem = NULL;
        size_t len = 0;
        snprintf(path, sizeof path, "%s/%s", sd, files[i]);
        if (po_file_read(path, 1 << 16, &pem, &len) ||
            po_cert_alipay_sn(pem, len, i == 1, sns[i], caps[i], NULL, 0))
            die(path);
        free(pem);
    }
    const char *M = "alipay.trade.precreate";
    const struct {
        const char *what, *app, *root, *sub;
    } rows[] = {
        {"an app certificate Alipay does not have", "00000000000000000000000000000000", root_sn,
         "isv.app-cert-not-exist"},
        {"no root SN", app_sn, NULL, "isv.missing-alipay-root-cert-sn"},
        {"another root SN", app_sn, "00000000000000000000000000000000",
         "isv.invalid-alipay-root-cert-sn"},
    };
    struct req q;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        base(&q, M, NULL);
        set(&q, "app_cert_sn", rows[i].app);
        set(&q, "alipay_root_cert_sn", rows[i].root);
        long st = send_req(&q, app_key, false, ans, sizeof ans);
        T_CHECK(st == 200 && strstr(ans, "\"sub_code\":\"") && strstr(ans, rows[i].sub) &&
                    strstr(ans, "\"code\":\"40002\""),
                "certificate mode, %s: %ld %s", rows[i].what, st, ans);
    }
    base(&q, M, NULL);
    set(&q, "app_cert_sn", app_sn);
    set(&q, "alipay_root_cert_sn", root_sn);
    long st = send_req(&q, app_key, false, ans, sizeof ans);
    char want[96];
    snprintf(want, sizeof want, "\"alipay_cert_sn\":\"%s\"", ali_sn);
    T_CHECK(st == 200 && answered(ans, M, "10000", NULL, true, why, sizeof why) &&
                strstr(ans, want),
            "certificate mode: the answer names Alipay's certificate: %s", why);
    /* an app in certificate mode (DIR/alipay_mode): a request without its
     * SNs */
    char path[512];
    snprintf(path, sizeof path, "%s/alipay_mode", sd);
    FILE *f = fopen(path, "w");
    if (!f || fputs("cert\n", f) < 0 || fclose(f))
        die(path);
    base(&q, M, NULL);
    st = send_req(&q, app_key, false, ans, sizeof ans);
    T_CHECK(st == 200 && strstr(ans, "isv.missing-app-cert-sn") && strstr(ans, "\"40002\""),
            "an app in certificate mode, a request without app_cert_sn: %s", ans);
    remove(path);
}

static struct po_privkey *key_in(const char *name)
{
    char path[512], *pem = NULL;
    size_t len = 0;
    struct po_privkey *k = NULL;
    snprintf(path, sizeof path, "%s/%s", sd, name);
    if (po_file_read(path, 1 << 16, &pem, &len) || po_privkey_from_pem(pem, len, &k))
        die(path);
    free(pem);
    return k;
}

int main(void)
{
    char err[PO_ERRBUF_SIZE] = "";
    snprintf(dir, sizeof dir, "%s/payonce-simalipay-XXXXXX", getenv("TMPDIR") ?: "/tmp");
    if (!mkdtemp(dir))
        die("mkdtemp");
    snprintf(sd, sizeof sd, "%s/sim", dir);
    char other[320];
    snprintf(other, sizeof other, "%s/other", dir);
    if (po_sim_identity_generate(sd, "pubkey", err, sizeof err) ||
        po_sim_identity_generate(other, "pubkey", err, sizeof err))
        die(err);
    app_key = key_in("merchant_private_key.pem");
    stranger_key = key_in("../other/merchant_private_key.pem");
    char path[512], *pem = NULL, serial[PO_SERIAL_MAX + 1];
    size_t len = 0;
    snprintf(path, sizeof path, "%s/alipay_public_key.pem", sd);
    if (po_file_read(path, 1 << 16, &pem, &len) ||
        po_pubkey_from_pem(pem, len, &alipay.keys[0].key, serial, sizeof serial, NULL, 0))
        die(path);
    free(pem);
    alipay.nkeys = 1;
    alipay.priv = &alipay_priv;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct po_sim_server_cfg sc = {sd, "127.0.0.1:0", 1000, 100};
    struct po_sim_server *sim = NULL;
    if (po_sim_server_start(&sc, &sim, err, sizeof err))
        die(err);
    sim_port = po_sim_server_port(sim);
    const struct CMUnitTest tests[] = {cmocka_unit_test(refusals), cmocka_unit_test(cert_mode)};
    int rc = T_RUN_GROUP("sim-alipay", tests, NULL, NULL);
    po_sim_server_stop(sim);
    po_pubkey_free(alipay.keys[0].key);
    po_privkey_free(app_key);
    po_privkey_free(stranger_key);
    curl_global_cleanup();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) { /* lint-ok */
    }
    printf("# sim-alipay: the strict gateway, %d checks\n", t_passes);
    return rc || t_failures ? 1 : 0;
}
