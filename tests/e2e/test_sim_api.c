/*
 * test_sim_api.c BACKEND PAYONCE — the simulated channel's own APIs, with a
 * real payonce gateway behind them (both in-process, on loopback):
 *   order query: a lost payment is SUCCESS at the channel; the response is
 *     signed with the platform key; unknown orders are ORDER_NOT_EXIST
 *   trade bill: SHA1 hash and download URL; the file is WeChat's format
 *     (BOM, 27 backtick-prefixed columns, CRLF, summary agreeing with rows)
 *   refund: a request signed with the merchant key is accepted PROCESSING and
 *     the refund-result callback moves payonce's refund to SUCCESS once; the
 *     same out_refund_no again is the same refund; a bad signature and an
 *     over-refund are refused
 */
#include "../../src/http/http.h"
#include "../../src/sim/sim.h"
#include "../support/simenv.h"
#include "../support/testutil.h"

#include <limits.h>
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char dir[256], url[T_URL_MAX], bin[PATH_MAX];
static unsigned sim_port, gw_port;

static void die(const char *m)
{
    fprintf(stderr, "test_sim_api: %s\n", m);
    exit(1);
}

#define run(...) t_cli(dir, bin, url, NULL, 0, __VA_ARGS__)

struct resp {
    long status;
    char body[65536];
    size_t len;
    char sig[512], ts[32], nonce[64];
};

static size_t on_header(char *d, size_t sz, size_t n, void *ctx)
{
    struct resp *r = ctx;
    size_t len = sz * n;
    struct {
        const char *name;
        char *dst;
        size_t cap;
    } h[] = {{"Wechatpay-Signature: ", r->sig, sizeof r->sig},
             {"Wechatpay-Timestamp: ", r->ts, sizeof r->ts},
             {"Wechatpay-Nonce: ", r->nonce, sizeof r->nonce}};
    for (size_t i = 0; i < 3; i++) {
        size_t nl = strlen(h[i].name);
        if (len > nl && strncasecmp(d, h[i].name, nl) == 0) {
            size_t v = len - nl;
            while (v && (d[nl + v - 1] == '\r' || d[nl + v - 1] == '\n'))
                v--;
            if (v < h[i].cap) {
                memcpy(h[i].dst, d + nl, v);
                h[i].dst[v] = '\0';
            }
        }
    }
    return len;
}

static void http(const char *method, const char *u, const char *body, const char *auth,
                 struct resp *r)
{
    memset(r, 0, sizeof *r);
    const char *lines[] = {"Content-Type: application/json", auth, NULL};
    struct t_http_req q = {.url = u,
                           .headers = lines,
                           .body = strcmp(method, "POST") == 0 ? body : NULL,
                           .timeout_s = 20,
                           .on_header = on_header,
                           .header_ctx = r};
    r->status = t_http(&q, r->body, sizeof r->body, &r->len);
}

/* The response's Wechatpay-Signature verifies with the platform certificate. */
static bool signed_by_platform(const struct resp *r)
{
    char path[512], *pem = NULL, serial[PO_SERIAL_MAX + 1];
    size_t len = 0;
    struct po_pubkey *k = NULL;
    snprintf(path, sizeof path, "%s/sim/wechatpay_platform_cert.pem", dir);
    if (po_file_read(path, 1 << 16, &pem, &len) ||
        po_pubkey_from_pem(pem, len, &k, serial, sizeof serial, NULL, 0))
        die("platform cert");
    free(pem);
    char *msg = malloc(strlen(r->ts) + strlen(r->nonce) + r->len + 4);
    sprintf(msg, "%s\n%s\n%s\n", r->ts, r->nonce, r->body); /* lint-ok: sized above */
    unsigned char *raw = NULL;
    size_t raw_len = 0;
    bool ok = po_b64_decode(r->sig, strlen(r->sig), &raw, &raw_len) == PO_OK &&
              po_rsa_sha256_verify(k, msg, strlen(msg), raw, raw_len) == PO_OK;
    free(raw);
    free(msg);
    po_pubkey_free(k);
    return ok;
}

/* WECHATPAY2-SHA256-RSA2048 Authorization for a merchant API request. */
static void merchant_auth(const struct po_sim_identity *id, const char *body, bool forge, char *out,
                          size_t cap)
{
    char path[512], *pem = NULL, *sig = NULL;
    size_t len = 0;
    struct po_privkey *k = NULL;
    snprintf(path, sizeof path, "%s/sim/merchant_private_key.pem", dir);
    if (forge ? po_privkey_generate(&k)
              : (po_file_read(path, 1 << 16, &pem, &len) || po_privkey_from_pem(pem, len, &k)))
        die("merchant key");
    free(pem);
    char ts[24], msg[8192];
    snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
    snprintf(msg, sizeof msg, "POST\n/v3/refund/domestic/refunds\n%s\nn0nce%s\n%s\n", ts, ts, body);
    if (po_rsa_sha256_sign_b64(k, msg, strlen(msg), &sig))
        die("sign");
    snprintf(out, cap,
             "Authorization: WECHATPAY2-SHA256-RSA2048 mchid=\"%s\",nonce_str=\"n0nce%s\","
             "signature=\"%s\",timestamp=\"%s\",serial_no=\"%s\"",
             id->mchid, ts, sig, ts, id->merchant_serial);
    free(sig);
    po_privkey_free(k);
}

static int64_t count(const char *sql)
{
    struct po_store *s = t_open(url);
    int64_t n = t_count(s, sql, NULL, 0);
    po_store_close(s);
    return n;
}

static void test_query(const struct po_sim_identity *id)
{
    char u[512];
    struct resp r;
    snprintf(u, sizeof u, "http://127.0.0.1:%u/v3/pay/transactions/out-trade-no/Q-1?mchid=%s",
             sim_port, id->mchid);
    http("GET", u, NULL, NULL, &r);
    json_t *j = json_loads(r.body, 0, NULL);
    T_CHECK(r.status == 200, "query lost payment: %ld %s", r.status, r.body);
    T_CHECK(strcmp(json_string_value(json_object_get(j, "trade_state")) ?: "", "SUCCESS") == 0,
            "query: trade_state %s", r.body);
    T_CHECK(json_integer_value(json_object_get(json_object_get(j, "amount"), "total")) == 1280,
            "query: amount %s", r.body);
    T_CHECK(strncmp(json_string_value(json_object_get(j, "transaction_id")) ?: "", "4200", 4) == 0,
            "query: transaction_id %s", r.body);
    T_CHECK(signed_by_platform(&r), "query: response not signed by the platform key");
    json_decref(j);
    snprintf(u, sizeof u, "http://127.0.0.1:%u/v3/pay/transactions/out-trade-no/NOPE?mchid=%s",
             sim_port, id->mchid);
    http("GET", u, NULL, NULL, &r);
    T_CHECK(r.status == 404 && strstr(r.body, "ORDER_NOT_EXIST"), "query unknown: %ld %s", r.status,
            r.body);
    snprintf(u, sizeof u, "http://127.0.0.1:%u/v3/pay/transactions/out-trade-no/Q-1?mchid=1",
             sim_port);
    http("GET", u, NULL, NULL, &r);
    T_CHECK(r.status == 400, "query other mchid: %ld", r.status);
}

static void test_bill(void)
{
    char u[512], date[16];
    time_t t = time(NULL) + 8 * 3600; /* bills are dated in Beijing time */
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(date, sizeof date, "%Y-%m-%d", &tm);
    struct resp r;
    snprintf(u, sizeof u, "http://127.0.0.1:%u/v3/bill/tradebill?bill_date=%s&bill_type=ALL",
             sim_port, date);
    http("GET", u, NULL, NULL, &r);
    json_t *j = json_loads(r.body, 0, NULL);
    const char *dl = json_string_value(json_object_get(j, "download_url"));
    const char *hash = json_string_value(json_object_get(j, "hash_value"));
    T_CHECK(r.status == 200 && dl && hash, "tradebill: %ld %s", r.status, r.body);
    char want[41] = "";
    if (hash)
        snprintf(want, sizeof want, "%s", hash);
    struct resp *f = malloc(sizeof *f);
    if (dl)
        http("GET", dl, NULL, NULL, f);
    json_decref(j);
    char got[41] = "";
    T_CHECK(po_sha1_hex(f->body, f->len, got) == PO_OK, "bill download: sha1");
    T_CHECK(f->status == 200 && strcmp(got, want) == 0, "bill download: %ld, sha1 %s vs %s",
            f->status, got, want);
    T_CHECK(memcmp(f->body, "\xef\xbb\xbf", 3) == 0, "bill: no UTF-8 BOM");
    int rows = 0, bad = 0, lines = 0;
    for (char *save = NULL, *line = strtok_r(f->body, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save), lines++) {
        size_t n = strlen(line);
        if (!n || line[n - 1] != '\r')
            bad++; /* CRLF */
        if (line[0] == '`' && strstr(line, ",`SUCCESS,")) {
            int fields = 1;
            for (char *p = line; *p; p++)
                fields += *p == ',';
            rows++;
            if (fields != 27)
                bad++;
        }
    }
    T_CHECK(rows == 2 && bad == 0, "bill: %d payment rows, %d malformed lines", rows, bad);
    free(f);
    /* The summary agrees: 2 orders, 12.80 + 5.00. */
    snprintf(u, sizeof u, "http://127.0.0.1:%u/v3/billdownload/file?token=%s_ALL", sim_port, date);
    f = malloc(sizeof *f);
    http("GET", u, NULL, NULL, f);
    T_CHECK(strstr(f->body, "\r\n`2,`17.80,`0.00,`0.00,`0.11,`17.80,`0.00\r\n") != NULL,
            "bill summary: %s", strrchr(f->body, '\n') ? f->body + f->len - 60 : f->body);
    free(f);
}

static void test_refund(const struct po_sim_identity *id)
{
    char u[512], body[1024], auth[1200];
    struct resp r;
    run("refund create --tenant t1 --out-trade-no Q-2 --out-refund-no R-2 --amount 200");
    snprintf(u, sizeof u, "http://127.0.0.1:%u/v3/refund/domestic/refunds", sim_port);
    snprintf(body, sizeof body,
             "{\"out_trade_no\":\"Q-2\",\"out_refund_no\":\"R-2\",\"reason\":\"test\","
             "\"notify_url\":\"http://127.0.0.1:%u/notify/wechatpay/t1\","
             "\"amount\":{\"refund\":200,\"total\":500,\"currency\":\"CNY\"}}",
             gw_port);
    merchant_auth(id, body, true, auth, sizeof auth);
    http("POST", u, body, auth, &r);
    T_CHECK(r.status == 401 && strstr(r.body, "SIGN_ERROR"), "forged refund request: %ld %s",
            r.status, r.body);
    merchant_auth(id, body, false, auth, sizeof auth);
    http("POST", u, body, auth, &r);
    json_t *j = json_loads(r.body, 0, NULL);
    char refund_id[64] = "";
    snprintf(refund_id, sizeof refund_id, "%s",
             json_string_value(json_object_get(j, "refund_id")) ?: "");
    T_CHECK(r.status == 200 && strstr(r.body, "\"status\":\"PROCESSING\"") && refund_id[0],
            "refund request: %ld %s", r.status, r.body);
    json_decref(j);
    /* The same request again: the same refund, no second one. */
    http("POST", u, body, auth, &r);
    T_CHECK(r.status == 200 && strstr(r.body, refund_id), "repeated refund request: %s", r.body);
    /* Wait for the refund-result callback to reach payonce. */
    for (int i = 0; i < 100 && count("SELECT COUNT(*) FROM refund WHERE status = 'SUCCESS'") == 0;
         i++)
        usleep(100000);
    T_CHECK(
        count("SELECT COUNT(*) FROM refund WHERE status = 'SUCCESS' AND out_refund_no = 'R-2'") ==
            1,
        "the refund callback did not complete R-2");
    T_CHECK(count("SELECT COUNT(*) FROM journal WHERE kind = 'REFUND'") == 1, "refund journals");
    /* More than what is left of the payment. */
    snprintf(body, sizeof body,
             "{\"out_trade_no\":\"Q-2\",\"out_refund_no\":\"R-3\",\"notify_url\":\"http://"
             "127.0.0.1:1/x\","
             "\"amount\":{\"refund\":400,\"total\":500,\"currency\":\"CNY\"}}");
    merchant_auth(id, body, false, auth, sizeof auth);
    http("POST", u, body, auth, &r);
    T_CHECK(r.status == 403 && strstr(r.body, "NOT_ENOUGH"), "over-refund: %ld %s", r.status,
            r.body);
    char path[512], *lines = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/sim/refunds.jsonl", dir);
    if (po_file_read(path, 1 << 20, &lines, &len))
        die("refunds.jsonl");
    int n = 0;
    for (char *p = lines; (p = strchr(p, '\n')); p++)
        n++;
    T_CHECK(n == 1, "the simulator recorded %d refunds, expected 1", n);
    free(lines);
}

int main(int argc, char **argv)
{
    const char *backend = t_backend(argc, argv);
    if (argc < 3 || !realpath(argv[2], bin))
        die("usage: test_sim_api BACKEND PAYONCE");
    po_log_set_level(PO_LOG_ERROR);
    unsigned char master[32];
    char sd[300], err[PO_ERRBUF_SIZE] = "";
    struct po_sim_identity id;
    t_env_create("simapi", dir, sizeof dir, master, &id);
    snprintf(sd, sizeof sd, "%s/sim", dir);
    t_db_create(backend, url, sizeof url);
    run("tenant add --tenant t1");
    run("merchant add --tenant t1 --merchant m1");
    run("channel set --tenant t1 --channel wechatpay --mchid %s --appid %s --apiv3-key-file "
        "sim/apiv3.key --platform-cert-file sim/wechatpay_platform_cert.pem",
        id.mchid, id.appid);
    run("order create --tenant t1 --merchant m1 --out-trade-no Q-1 --amount 1280");
    run("order create --tenant t1 --merchant m1 --out-trade-no Q-2 --amount 500");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct po_gateway_cfg gc;
    t_gateway_cfg(&gc, url, master);
    struct t_gateway *gw = t_gateway_start(&gc, NULL);
    struct po_sim_server_cfg sc = {sd, "127.0.0.1:0", 1000, 100};
    struct po_sim_server *sim = NULL;
    if (po_sim_server_start(&sc, &sim, err, sizeof err))
        die(err);
    gw_port = gw->port;
    sim_port = po_sim_server_port(sim);
    /* Q-1's payment is lost; Q-2's is delivered. */
    run("sim pay --dir sim --order Q-1:1280 --lose");
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "sim pay --dir sim --order Q-2:500 --notify-url "
             "http://127.0.0.1:%u/notify/wechatpay/t1",
             gw_port);
    run("%s", cmd);
    T_CHECK(count("SELECT COUNT(*) FROM pay_order WHERE status = 'PAID'") == 1, "Q-2 not paid");
    test_query(&id);
    test_bill();
    test_refund(&id);
    po_sim_server_stop(sim);
    t_gateway_stop(gw);
    struct po_store *s = t_open(url);
    T_CHECK(t_verify(s) == 0, "verify");
    po_store_close(s);
    t_db_drop(url);
    po_sim_identity_free(&id);
    curl_global_cleanup();
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) { /* lint-ok */
    }
    printf("# sim-api[%s] order query, trade bill and refund API: %d checks\n", backend, t_passes);
    printf("%d passed, %d failed\n", t_passes, t_failures);
    return t_failures ? 1 : 0;
}
