/*
 * test_http.c — data-driven callback cases over real HTTP on loopback.
 *
 *   test_http BACKEND PAYONCE_BINARY
 *
 * Sets up tenants t1 and t2 with the real `payonce channel set` (keys and
 * secrets in files, sealed with a master key), starts the server in-process
 * on 127.0.0.1 (an ephemeral port), and runs every case of
 * tests/data/http/{wechatpay,alipay,stripe}.json (see its README): it builds
 * each callback exactly as the channel would, mutates it, sends it, and
 * checks every ack (status and body) and the ledger effect. Then a store
 * outage: a callback that meets a locked database is answered 5xx FAIL and
 * its retry is credited once. Finally `verify` must pass.
 */
#include "../../src/channel/channel.h"
#include "../../src/http/http.h"
#include "../../src/sim/sim.h"
#include "../support/simenv.h"
#include "../support/testutil.h"

#include <limits.h>
#include <ctype.h>
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DELIVERIES_MAX 8
#define T1_MCHID "1230000109"
#define T1_APPID "wxd678efh567hg6787"
#define T1_APIV3 "a7cde1ZJB1kG2e7VfTs3jQzaWizur8Gb"
#define T1_PUBKEY_ID "PUB_KEY_ID_0114232026120200000001"
#define ALIPAY_APP_ID "2021000000000001"
#define ALIPAY_SELLER "2088000000000001"
#define STRIPE_SECRET "whsec_payonce_test_secret"

static const char *backend;
static char url[T_URL_MAX], dir[256], bin[PATH_MAX];
static unsigned port;
static struct po_privkey *wx_key, *wx_key2, *ali_key;
static void die(const char *msg)
{
    fprintf(stderr, "test_http: %s\n", msg);
    exit(1);
}

static void write_file(const char *name, const void *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    /* Owner-only, as payonce requires of a master key (and fits secrets). */
    if (!f || fchmod(fileno(f), 0600) || fwrite(data, 1, len, f) != len)
        die("cannot write test file");
    fclose(f);
}

static void run(const char *fmt, ...) PO_PRINTF(1, 2);
static void run(const char *fmt, ...)
{
    char args[2048], cmd[PATH_MAX + 4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd %s && %s %s --db '%s' >>setup.log 2>&1", dir, bin, args, url);
    if (system(cmd) != 0) { /* lint-ok: test setup */
        fprintf(stderr, "setup failed: %s (see %s/setup.log)\n", args, dir);
        exit(1);
    }
}

static struct po_privkey *load_key(const char *path)
{
    char *pem = NULL;
    size_t len = 0;
    struct po_privkey *k = NULL;
    if (po_file_read(path, 1 << 16, &pem, &len) || po_privkey_from_pem(pem, len, &k))
        die("cannot load private key");
    free(pem);
    return k;
}

static void write_public(struct po_privkey *k, const char *name)
{
    char *priv = NULL, *pub = NULL;
    if (po_privkey_to_pem(k, &priv, &pub))
        die("cannot export key");
    write_file(name, pub, strlen(pub));
    free(priv);
    free(pub);
}

/* Tenants, merchants and channel accounts, through the real CLI. */
static void setup_tenants(void)
{
    unsigned char master[32];
    if (po_random(master, 32))
        die("random");
    write_file("master.key", master, 32);
    write_file("apiv3.key", T1_APIV3, 32);
    write_file("apiv3-t2.key", "t2t2t2t2t2t2t2t2t2t2t2t2t2t2t2t2", 32);
    write_file("stripe.secret", STRIPE_SECRET "\n", strlen(STRIPE_SECRET) + 1);
    char src[512];
    snprintf(src, sizeof src, "%s/vectors/wechatpay_test_private_key.pem", PO_TEST_DATA_DIR);
    wx_key = load_key(src);
    if (po_privkey_generate(&wx_key2) || po_privkey_generate(&ali_key))
        die("keygen");
    struct po_privkey *t2key = NULL;
    if (po_privkey_generate(&t2key))
        die("keygen");
    write_public(wx_key2, "wx2.pub.pem");
    write_public(ali_key, "alipay.pub.pem");
    write_public(t2key, "t2.pub.pem");
    po_privkey_free(t2key);
    run("migrate");
    run("tenant add --tenant t1");
    run("tenant add --tenant t2");
    run("merchant add --tenant t1 --merchant m1");
    run("merchant add --tenant t2 --merchant m1");
    run("channel set --tenant t1 --channel wechatpay --master-key-file master.key --mchid " T1_MCHID
        " --appid " T1_APPID " --apiv3-key-file apiv3.key --platform-cert-file "
        "%s/vectors/wechatpay_test_platform_cert.pem --platform-public-key-file wx2.pub.pem"
        " --public-key-id " T1_PUBKEY_ID,
        PO_TEST_DATA_DIR);
    run("channel set --tenant t2 --channel wechatpay --master-key-file master.key --mchid "
        "1900000002 --apiv3-key-file apiv3-t2.key --platform-public-key-file t2.pub.pem"
        " --public-key-id PUB_KEY_ID_T2");
    /* t3: a sub-merchant of t1's provider account, sharing its keys. */
    run("tenant add --tenant t3");
    run("merchant add --tenant t3 --merchant m1");
    run("channel set --tenant t3 --channel wechatpay --master-key-file master.key --mchid " T1_MCHID
        " --appid " T1_APPID " --sub-mchid 1900000777 --apiv3-key-file apiv3.key"
        " --platform-cert-file %s/vectors/wechatpay_test_platform_cert.pem",
        PO_TEST_DATA_DIR);
    run("channel set --tenant t1 --channel alipay --master-key-file master.key "
        "--app-id " ALIPAY_APP_ID " --seller-id " ALIPAY_SELLER
        " --alipay-public-key-file alipay.pub.pem");
    run("channel set --tenant t1 --channel stripe --master-key-file master.key"
        " --webhook-secret-file stripe.secret");
    /* t2's own Alipay key and Stripe secret: t1's callbacks sent to t2's
     * URLs must not verify there (cross-tenant cases). */
    write_file("stripe-t2.secret", "whsec_t2_other\n", 15);
    run("channel set --tenant t2 --channel alipay --master-key-file master.key "
        "--app-id 2021000000000002 --seller-id 2088000000000002"
        " --alipay-public-key-file t2.pub.pem");
    run("channel set --tenant t2 --channel stripe --master-key-file master.key"
        " --webhook-secret-file stripe-t2.secret");
    /* t4 shares t1's Stripe secret (one endpoint secret reused) but binds
     * its events to its account and test mode (issue 27): t1's events, and
     * events of another account or mode, credit nothing of t4's. */
    run("tenant add --tenant t4");
    run("merchant add --tenant t4 --merchant m1");
    run("channel set --tenant t4 --channel stripe --master-key-file master.key"
        " --webhook-secret-file stripe.secret --account-id acct_T4 --livemode false");
}

/* ---- HTTP ---- */

struct reply {
    long status;
    char body[32768];
    size_t len;
};

struct delivery {
    const char *channel, *tenant;
    const struct po_sim_request *req;
    struct reply reply;
    int retries; /* 5xx answers resent, as a channel does */
};

static void send_once(struct delivery *d);

/* Sends like a channel: a 5xx (transient: the database busy under load) is
 * sent again, at most 4 times; the final answer is what the case checks. */
static void *send_one(void *arg)
{
    struct delivery *d = arg;
    for (int i = 0; i < 5; i++) {
        send_once(d);
        if (d->reply.status < 500)
            break;
        d->retries++;
        usleep(200000);
    }
    return NULL;
}

static void send_once(struct delivery *d)
{
    char path[128];
    memset(&d->reply, 0, sizeof d->reply);
    snprintf(path, sizeof path, "/notify/%s/%s", d->channel, d->tenant);
    d->reply.status = t_http_sim(port, path, d->req, d->reply.body, sizeof d->reply.body);
    d->reply.len = strlen(d->reply.body);
}

/* ---- building callbacks ---- */

static const char *jstr(json_t *o, const char *k, const char *dflt)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : dflt;
}

static int64_t jint(json_t *o, const char *k, int64_t dflt)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

/* Turns the UTF-8 encoding of U+00FF into a lone 0xFF byte (invalid UTF-8). */
static void to_latin1(char *s, size_t *len)
{
    size_t j = 0;
    for (size_t i = 0; i < *len; i++) {
        if ((unsigned char)s[i] == 0xc3 && i + 1 < *len && (unsigned char)s[i + 1] == 0xbf) {
            s[j++] = (char)0xff;
            i++;
        } else {
            s[j++] = s[i];
        }
    }
    s[j] = '\0';
    *len = j;
}

static void set_body(struct po_sim_request *r, const char *body, size_t len)
{
    free(r->body);
    r->body = malloc(len + 1);
    memcpy(r->body, body, len);
    r->body[len] = '\0';
    r->body_len = len;
}

static void flip_b64(char *s)
{
    size_t n = strlen(s);
    char *c = s + n / 2;
    *c = *c == 'A' ? 'B' : 'A';
}

static void build_wechatpay(json_t *cs, const char *out_trade_no, struct po_sim_request *req)
{
    json_t *ev = json_object_get(cs, "event");
    const char *mut = jstr(cs, "mutate", "");
    int64_t ts =
        (int64_t)time(NULL) + (strcmp(mut, "timestamp_offset") == 0 ? jint(cs, "offset", 0) : 0);
    bool second = strcmp(mut, "second_key") == 0;
    const struct po_privkey *key = second ? wx_key2 : wx_key;
    const char *serial = second ? T1_PUBKEY_ID : "D7CE59D1F522D701";
    if (strcmp(mut, "raw_body") == 0) {
        memset(req, 0, sizeof *req);
        const char *b = jstr(cs, "body", "");
        size_t len = strlen(b);
        set_body(req, b, len);
        if (json_is_true(json_object_get(cs, "latin1")))
            to_latin1(req->body, &req->body_len);
        req->content_type = "application/json";
        if (po_sim_wechatpay_sign(key, serial, req->body, req->body_len, ts, req))
            die("sign");
        return;
    }
    const char *etype = jstr(ev, "event_type", "TRANSACTION.SUCCESS");
    json_t *res;
    int64_t amount = jint(ev, "amount", 100);
    if (strncmp(etype, "PROFITSHARING", 13) == 0)
        res =
            json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:I, s:s}, s:s}", "mchid", T1_MCHID,
                      "transaction_id",
                      jstr(ev, "transaction_id", jstr(json_object_get(cs, "order"), "paid_by", "")),
                      "order_id", jstr(ev, "order_id", ""), "out_order_no", "P20261202001",
                      "receiver", "type", "MERCHANT_ID", "account", jstr(ev, "receiver", ""),
                      "amount", (json_int_t)amount, "description", "分给商户", "success_time",
                      "2026-12-02T10:00:00+08:00");
    else if (strncmp(etype, "REFUND", 6) == 0)
        res = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:I}}", "mchid",
                        jstr(ev, "mchid", T1_MCHID), "out_trade_no", out_trade_no, "transaction_id",
                        jstr(json_object_get(cs, "order"), "paid_by", ""), "out_refund_no",
                        jstr(ev, "out_refund_no", ""), "refund_id", jstr(ev, "refund_id", ""),
                        "refund_status", jstr(ev, "refund_status", "SUCCESS"), "amount", "total",
                        (json_int_t)jint(json_object_get(cs, "order"), "amount", amount), "refund",
                        (json_int_t)amount, "payer_total", (json_int_t)amount, "payer_refund",
                        (json_int_t)amount);
    else
        res = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:{s:s}, s:{s:I, s:I, s:s, s:s}}",
                        "mchid", jstr(ev, "mchid", T1_MCHID), "appid", T1_APPID, "out_trade_no",
                        out_trade_no, "transaction_id", jstr(ev, "transaction_id", ""),
                        "trade_type", "JSAPI", "trade_state", jstr(ev, "trade_state", "SUCCESS"),
                        "success_time", "2026-12-02T10:00:00+08:00", "payer", "openid", "o-test",
                        "amount", "total", (json_int_t)amount, "payer_total", (json_int_t)amount,
                        "currency", "CNY", "payer_currency", "CNY");
    if (json_is_true(json_object_get(ev, "sp"))) {
        /* A service provider's sub-merchant: sp_* name the provider. */
        json_object_set_new(res, "sp_mchid", json_string(jstr(ev, "mchid", T1_MCHID)));
        json_object_set_new(res, "sp_appid", json_string(T1_APPID));
        json_object_set_new(res, "sub_mchid", json_string(jstr(ev, "sub_mchid", "1900000777")));
        json_object_set_new(res, "sub_appid", json_string("wxsubmerchantapp01"));
        json_object_del(res, "mchid");
        json_object_del(res, "appid");
    }
    char *rjs = json_dumps(res, JSON_COMPACT);
    json_decref(res);
    bool wrong = strcmp(mut, "wrong_apiv3_key") == 0;
    if (po_sim_wechatpay(
            key, serial,
            (const unsigned char *)(wrong ? "0123456789abcdef0123456789abcdef" : T1_APIV3), 32,
            etype, rjs, ts, req))
        die("build wechatpay");
    free(rjs);
    if (strcmp(mut, "forge_signature") == 0) {
        char sig[512];
        snprintf(sig, sizeof sig, "%s", po_sim_get_header(req, "Wechatpay-Signature"));
        flip_b64(sig);
        po_sim_set_header(req, "Wechatpay-Signature", sig);
    } else if (strcmp(mut, "unknown_serial") == 0) {
        po_sim_set_header(req, "Wechatpay-Serial", "0123456789ABCDEF");
    } else if (strcmp(mut, "probe") == 0) {
        char sig[600];
        snprintf(sig, sizeof sig, "WECHATPAY/SIGNTEST/%s",
                 po_sim_get_header(req, "Wechatpay-Signature"));
        sig[500] = '\0';
        po_sim_set_header(req, "Wechatpay-Signature", sig);
    } else if (strcmp(mut, "tamper_ciphertext") == 0) {
        char *ct = strstr(req->body, "\"ciphertext\":\"") + 14;
        ct[10] = ct[10] == 'A' ? 'B' : 'A'; /* one base64 character of the ciphertext */
        if (po_sim_wechatpay_sign(key, serial, req->body, req->body_len, ts, req))
            die("sign");
    } else if (strcmp(mut, "oversize") == 0) {
        size_t big = 70 * 1024;
        char *b = malloc(big + 1);
        memset(b, ' ', big);
        memcpy(b, req->body, req->body_len);
        b[big] = '\0';
        set_body(req, b, big);
        free(b);
    } else if (strcmp(mut, "drop_header") == 0) {
        po_sim_set_header(req, jstr(cs, "header", ""), "");
    }
}

static void build_alipay(json_t *cs, const char *out_trade_no, struct po_sim_request *req)
{
    json_t *ev = json_object_get(cs, "event");
    const char *mut = jstr(cs, "mutate", "");
    if (strcmp(mut, "raw_body") == 0) {
        memset(req, 0, sizeof *req);
        set_body(req, jstr(cs, "body", ""), strlen(jstr(cs, "body", "")));
        req->content_type = "application/x-www-form-urlencoded";
        return;
    }
    const char *keys[20], *vals[20];
    int n = 0;
#define KV(k, v) (keys[n] = (k), vals[n] = (v), n++)
    KV("notify_time", "2026-12-02 10:00:01");
    KV("notify_type", "trade_status_sync");
    KV("notify_id", "2026120200222100001000000000000");
    KV("charset", "utf-8");
    KV("version", "1.0");
    KV("app_id", jstr(ev, "app_id", ALIPAY_APP_ID));
    KV("seller_id", ALIPAY_SELLER);
    KV("out_trade_no", jstr(ev, "out_trade_no", out_trade_no));
    KV("trade_no", jstr(ev, "trade_no", ""));
    KV("trade_status", jstr(ev, "trade_status", "TRADE_SUCCESS"));
    KV("total_amount", jstr(ev, "total_amount", "0.01"));
    KV("gmt_payment", "2026-12-02 10:00:00");
    const char *opt[] = {"refund_fee", "out_biz_no", "subject"};
    for (int i = 0; i < 3; i++)
        if (json_object_get(ev, opt[i]))
            KV(opt[i], jstr(ev, opt[i], ""));
#undef KV
    if (po_sim_alipay(ali_key, keys, vals, n, req))
        die("build alipay");
    if (json_is_true(json_object_get(cs, "latin1"))) {
        /* The builder percent-encodes: make %C3%BF a lone %FF (still signed
         * over the original bytes, so this fails before verification). */
        char *p = strstr(req->body, "%C3%BF");
        if (p) {
            memcpy(p, "%FF", 3);
            memmove(p + 3, p + 6, strlen(p + 6) + 1);
            req->body_len = strlen(req->body);
        }
    }
    if (strcmp(mut, "forge_signature") == 0) {
        /* Flip one base64 letter of the form-encoded sign, stepping over
         * percent escapes (%2B, %2F, %3D): changing a hex digit of an escape
         * would make a non-UTF-8 byte, a malformed form (400), not a forgery.
         * The sign differs per run, so the position must not be fixed. */
        char *p = strstr(req->body, "&sign=");
        p = p ? p + 6 : strstr(req->body, "sign=") + 5;
        for (int seen = 0; *p && *p != '&'; p++) {
            if (*p == '%') {
                p += 2;
                continue;
            }
            if (isalnum((unsigned char)*p) && ++seen > 20) {
                *p = *p == 'A' ? 'B' : 'A';
                break;
            }
        }
    }
}

static void build_stripe(json_t *cs, const char *out_trade_no, struct po_sim_request *req)
{
    json_t *ev = json_object_get(cs, "event");
    const char *mut = jstr(cs, "mutate", "");
    const char *type = jstr(ev, "type", "payment_intent.succeeded");
    bool refund = strcmp(type, "charge.refunded") == 0;
    bool robj = json_object_get(ev, "status") != NULL; /* a Refund object */
    json_t *meta = json_object();
    if (!json_is_true(json_object_get(ev, "omit_out_trade_no")))
        json_object_set_new(meta, "out_trade_no", json_string(out_trade_no));
    if (json_object_get(ev, "out_refund_no"))
        json_object_set_new(meta, "out_refund_no", json_string(jstr(ev, "out_refund_no", "")));
    char evt[96];
    snprintf(evt, sizeof evt, "evt_%s", jstr(ev, "id", ""));
    json_t *payload =
        json_pack("{s:s, s:s, s:s, s:{s:{s:s, s:s, s:I, s:s, s:o}}}", "id", evt, "object", "event",
                  "type", type, "data", "object", "id", jstr(ev, "id", ""), "object",
                  robj     ? "refund"
                  : refund ? "charge"
                           : "payment_intent",
                  robj     ? "amount"
                  : refund ? "amount_refunded"
                           : "amount_received",
                  (json_int_t)jint(ev, "amount", 0), "currency", jstr(ev, "currency", "cny"),
                  "metadata", meta);
    if (robj)
        json_object_set_new(json_object_get(json_object_get(payload, "data"), "object"), "status",
                            json_string(jstr(ev, "status", "")));
    if (json_object_get(ev, "account")) /* a Connect event names its account */
        json_object_set_new(payload, "account", json_string(jstr(ev, "account", "")));
    if (json_object_get(ev, "livemode"))
        json_object_set(payload, "livemode", json_object_get(ev, "livemode"));
    char *p = strcmp(mut, "raw_body") == 0 ? strdup(jstr(cs, "body", "")) /* signed as is */
                                           : json_dumps(payload, JSON_COMPACT);
    json_decref(payload);
    int64_t ts =
        (int64_t)time(NULL) + (strcmp(mut, "timestamp_offset") == 0 ? jint(cs, "offset", 0) : 0);
    if (po_sim_stripe((const unsigned char *)STRIPE_SECRET, strlen(STRIPE_SECRET), p, ts, req))
        die("build stripe");
    free(p);
    if (strcmp(mut, "forge_signature") == 0) {
        char h[256];
        snprintf(h, sizeof h, "%s", po_sim_get_header(req, "Stripe-Signature"));
        char *last = h + strlen(h) - 1;
        *last = *last == '0' ? '1' : '0';
        po_sim_set_header(req, "Stripe-Signature", h);
    }
}

/* ---- cases ---- */

static void seed(json_t *order, const char *channel)
{
    struct po_store *s = t_open(url);
    char err[PO_ERRBUF_SIZE] = "";
    bool created = false;
    const char *no = jstr(order, "out_trade_no", "");
    int64_t amount = jint(order, "amount", 100);
    struct po_order_spec spec = {.tenant = jstr(order, "tenant", "t1"),
                                 .merchant = "m1",
                                 .out_trade_no = no,
                                 .amount_minor = amount,
                                 .currency = "CNY"};
    if (po_order_create(s, &spec, &created, err, sizeof err))
        die(err);
    const char *paid_by = jstr(order, "paid_by", NULL);
    if (paid_by) {
        struct po_event ev = t_pay_event(no, paid_by, amount);
        memcpy(ev.channel, channel, strlen(channel) + 1);
        if (t_apply(s, NULL, &ev).kind != PO_OUT_APPLIED)
            die("seed payment");
    }
    /* Refunds that already succeeded (each with its channel refund id). */
    size_t i;
    json_t *done;
    json_array_foreach(json_object_get(order, "refunds_done"), i, done)
    {
        const char *rno = jstr(done, "out_refund_no", "");
        int64_t ramount = jint(done, "amount", 0);
        if (po_refund_create(s, "t1", no, rno, ramount, err, sizeof err))
            die(err);
        struct po_event ev =
            t_refund_event(PO_EV_REFUND_SUCCESS, no, rno, jstr(done, "refund_id", ""), ramount);
        memcpy(ev.channel, channel, strlen(channel) + 1);
        if (t_apply(s, NULL, &ev).kind != PO_OUT_APPLIED)
            die("seed refund");
    }
    json_t *rf = json_object_get(order, "refund");
    if (rf && po_refund_create(s, "t1", no, jstr(rf, "out_refund_no", ""), jint(rf, "amount", 0),
                               err, sizeof err))
        die(err);
    po_store_close(s);
}

static int64_t count_for(const char *sql, const char *no)
{
    struct po_store *s = t_open(url);
    struct po_param p[] = {PO_TEXT(no)};
    int64_t n = t_count(s, sql, p, 1);
    po_store_close(s);
    return n;
}

/* Every member of obj is one of the names: a misspelt expectation or case
 * field would otherwise never be checked. */
static void known_members(const char *channel, const char *name, const char *what, json_t *obj,
                          const char *const *names, size_t n)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        bool ok = false;
        for (size_t i = 0; i < n && !ok; i++)
            ok = strcmp(k, names[i]) == 0;
        T_CHECK(ok, "%s/%s: unknown %s key \"%s\"", channel, name, what, k);
    }
}

/* One case of tests/data/http/CHANNEL.json: a cmocka case of its own,
 * named CHANNEL/NAME, its JSON object the case's state. */
struct http_case {
    const char *channel;
    json_t *cs;
    char name[96];
};

static void run_case(void **state)
{
    const struct http_case *hc = *state;
    const char *channel = hc->channel;
    json_t *cs = hc->cs;
    const char *name = jstr(cs, "name", "?");
    json_t *order = json_object_get(cs, "order"), *ex = json_object_get(cs, "expect");
    static const char *const case_keys[] = {"name",       "tenant",     "order",  "event",
                                            "mutate",     "offset",     "body",   "header",
                                            "deliveries", "concurrent", "latin1", "expect"};
    static const char *const expect_keys[] = {
        "status", "body",     "body_contains", "credits",      "refunds", "shares",
        "alerts", "refunded", "reserved",      "order_status", "unmapped"};
    static const char *const order_keys[] = {"out_trade_no", "amount", "tenant",
                                             "paid_by",      "refund", "refunds_done"};
    known_members(channel, name, "case", cs, case_keys, PO_NELEM(case_keys));
    known_members(channel, name, "expect", ex, expect_keys, PO_NELEM(expect_keys));
    known_members(channel, name, "order", order, order_keys, PO_NELEM(order_keys));
    T_CHECK(json_is_object(ex) && json_object_get(ex, "status"), "%s/%s: expect.status is required",
            channel, name);
    const char *no = order ? jstr(order, "out_trade_no", "")
                           : jstr(json_object_get(cs, "event"), "out_trade_no", "");
    if (order)
        seed(order, channel);
    struct po_sim_request req;
    if (strcmp(channel, "wechatpay") == 0)
        build_wechatpay(cs, no, &req);
    else if (strcmp(channel, "alipay") == 0)
        build_alipay(cs, no, &req);
    else
        build_stripe(cs, no, &req);
    int n = (int)jint(cs, "deliveries", 1);
    bool conc = json_is_true(json_object_get(cs, "concurrent"));
    struct delivery d[DELIVERIES_MAX];
    pthread_t th[DELIVERIES_MAX];
    for (int i = 0; i < n && i < DELIVERIES_MAX; i++) {
        memset(&d[i], 0, sizeof d[i]);
        d[i] = (struct delivery){channel, jstr(cs, "tenant", "t1"), &req, {0}, 0};
        if (conc)
            pthread_create(&th[i], NULL, send_one, &d[i]);
        else
            send_one(&d[i]);
    }
    for (int i = 0; conc && i < n; i++)
        pthread_join(th[i], NULL);
    long want = (long)jint(ex, "status", 0);
    for (int i = 0; i < n; i++) {
        T_CHECK(d[i].reply.status == want, "%s/%s: delivery %d status %ld, expected %ld (%s)",
                channel, name, i + 1, d[i].reply.status, want, d[i].reply.body);
        const char *body = jstr(ex, "body", NULL), *contains = jstr(ex, "body_contains", NULL);
        if (body)
            T_CHECK(strcmp(d[i].reply.body, body) == 0, "%s/%s: body '%s', expected '%s'", channel,
                    name, d[i].reply.body, body);
        if (contains)
            T_CHECK(strstr(d[i].reply.body, contains) != NULL, "%s/%s: body '%s' lacks '%s'",
                    channel, name, d[i].reply.body, contains);
    }
    struct {
        const char *field, *sql;
    } effects[] = {
        {"credits", "SELECT COUNT(*) FROM journal WHERE kind = 'PAY' AND out_trade_no = ?"},
        {"refunds", "SELECT COUNT(*) FROM journal WHERE kind = 'REFUND' AND out_trade_no = ?"},
        {"shares", "SELECT COUNT(*) FROM journal WHERE kind = 'PROFIT_SHARE' AND out_trade_no = ?"},
        {"alerts", "SELECT COUNT(*) FROM alert WHERE out_trade_no = ?"},
        {"refunded", "SELECT refunded_amount FROM pay_order WHERE out_trade_no = ?"},
        {"reserved", "SELECT refund_reserved FROM pay_order WHERE out_trade_no = ?"},
    };
    for (size_t i = 0; i < sizeof effects / sizeof effects[0]; i++) {
        json_t *w = json_object_get(ex, effects[i].field);
        if (!w)
            continue;
        int64_t got = count_for(effects[i].sql, no);
        T_CHECK(got == json_integer_value(w), "%s/%s: %s %lld, expected %lld", channel, name,
                effects[i].field, (long long)got, (long long)json_integer_value(w));
    }
    const char *st = jstr(ex, "order_status", NULL);
    if (st) {
        char sql[128];
        snprintf(sql, sizeof sql,
                 "SELECT COUNT(*) FROM pay_order WHERE status = '%s' AND"
                 " out_trade_no = ?",
                 st);
        T_CHECK(count_for(sql, no) == 1, "%s/%s: order not %s", channel, name, st);
    }
    json_t *um = json_object_get(ex, "unmapped");
    if (um) {
        /* Verified but unmappable: alerts keyed by the channel's event id. */
        char like[128];
        snprintf(like, sizeof like, "%%:evt_%s:%%", jstr(json_object_get(cs, "event"), "id", ""));
        int64_t got = count_for("SELECT COUNT(*) FROM alert WHERE reason = 'unmappable_event'"
                                " AND idem_key LIKE ?",
                                like);
        T_CHECK(got == json_integer_value(um), "%s/%s: unmapped %lld, expected %lld", channel, name,
                (long long)got, (long long)json_integer_value(um));
    }
    int retried = 0;
    for (int i = 0; i < n; i++)
        retried += d[i].retries;
    printf("# http[%s] %-9s %-58s %d x -> %ld%s\n", backend, channel, name, n, d[0].reply.status,
           retried ? " (after transient 5xx, resent)" : "");
    po_sim_request_free(&req);
}

/* A transaction that holds order no's row — SQLite: the write lock itself;
 * PostgreSQL: the order's row lock — until unlock_order. */
static struct po_store *lock_order(const char *no)
{
    struct po_store *holder = t_open(url);
    char err[PO_ERRBUF_SIZE] = "";
    int64_t ch = 0;
    if (po_store_begin(holder, err, sizeof err) ||
        po_store_exec(holder, "UPDATE pay_order SET updated_at = updated_at WHERE out_trade_no = ?",
                      PO_PARAMS(PO_TEXT(no)), NULL, &ch, err, sizeof err))
        die(err);
    return holder;
}

static void unlock_order(struct po_store *holder)
{
    po_store_rollback(holder);
    po_store_close(holder);
}

/* A callback that meets a database it cannot write is answered FAIL 5xx,
 * nothing is recorded, and the channel's retry is credited once. */
static void store_outage(void **state)
{
    (void)state;
    json_t *cs =
        json_pack("{s:s, s:{s:s, s:I}, s:{s:s, s:s, s:I}}", "name", "outage", "order",
                  "out_trade_no", "W-OUTAGE", "amount", (json_int_t)700, "event", "event_type",
                  "TRANSACTION.SUCCESS", "transaction_id", "4200000999", "amount", (json_int_t)700);
    seed(json_object_get(cs, "order"), "wechatpay");
    struct po_sim_request req;
    build_wechatpay(cs, "W-OUTAGE", &req);
    struct po_store *holder = lock_order("W-OUTAGE");
    struct delivery d = {"wechatpay", "t1", &req, {0}, 0};
    send_once(&d);
    unlock_order(holder);
    T_CHECK(d.reply.status >= 500 && strstr(d.reply.body, "FAIL"),
            "outage: status %ld body %s, expected 5xx FAIL", d.reply.status, d.reply.body);
    T_CHECK(count_for("SELECT COUNT(*) FROM notify_log WHERE out_trade_no = ?", "W-OUTAGE") == 0,
            "outage: a processed record was written");
    struct delivery r = {"wechatpay", "t1", &req, {0}, 0};
    send_once(&r);
    T_CHECK(r.reply.status == 204, "outage: retry status %ld", r.reply.status);
    T_CHECK(count_for("SELECT COUNT(*) FROM journal WHERE out_trade_no = ?", "W-OUTAGE") == 1,
            "outage: retry not credited once");
    printf("# http[%s] store outage: first delivery %ld, retry %ld, credited once\n", backend,
           d.reply.status, r.reply.status);
    po_sim_request_free(&req);
    json_decref(cs);
}

/* A counter of /metrics (without labels). */
static int64_t metric(const char *name)
{
    static char body[1 << 20];
    char u[256], line[160];
    size_t len = 0;
    snprintf(u, sizeof u, "http://127.0.0.1:%u/metrics", port);
    struct t_http_req q = {.url = u};
    long status = t_http(&q, body, sizeof body, &len);
    snprintf(line, sizeof line, "\n%s ", name);
    const char *at = strstr(body, line);
    if (status != 200 || !at)
        die("a counter is missing from /metrics");
    return strtoll(at + strlen(line), NULL, 10);
}

static void *send_once_th(void *arg)
{
    send_once(arg);
    return NULL;
}

/* n deliveries of req at once, each sent once. */
static void send_together(const struct po_sim_request *req, struct delivery *d, int n)
{
    pthread_t th[DELIVERIES_MAX];
    for (int i = 0; i < n; i++) {
        d[i] = (struct delivery){"wechatpay", "t1", req, {0}, 0};
        pthread_create(&th[i], NULL, send_once_th, &d[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
}

/*
 * The committer's table of committed events: a payment's first delivery
 * and its twins that meet a database it cannot write are all answered FAIL
 * (none from the table: nothing committed); once it is credited, its
 * redeliveries — at once and one after another — are answered from the
 * table (payonce_committer_known_hits_total), and each one's record is
 * written all the same, by a batch after its ack.
 */
static void known_duplicates(void **state)
{
    (void)state;
    const char *no = "W-KNOWN";
    json_t *cs =
        json_pack("{s:s, s:{s:s, s:I}, s:{s:s, s:s, s:I}}", "name", "known", "order",
                  "out_trade_no", no, "amount", (json_int_t)800, "event", "event_type",
                  "TRANSACTION.SUCCESS", "transaction_id", "4200000998", "amount", (json_int_t)800);
    seed(json_object_get(cs, "order"), "wechatpay");
    struct po_sim_request req;
    build_wechatpay(cs, no, &req);
    const char *records = "SELECT COUNT(*) FROM callback_record WHERE out_trade_no = ?";
    int64_t hits0 = metric("payonce_committer_known_hits_total");

    /* The database locked (as in store_outage): all eight FAIL. */
    struct po_store *holder = lock_order(no);
    struct delivery d[DELIVERIES_MAX];
    send_together(&req, d, DELIVERIES_MAX);
    unlock_order(holder);
    for (int i = 0; i < DELIVERIES_MAX; i++)
        T_CHECK(d[i].reply.status >= 500, "known: delivery %d while locked: %ld %s", i + 1,
                d[i].reply.status, d[i].reply.body);
    T_CHECK(metric("payonce_committer_known_hits_total") == hits0,
            "known: a delivery answered from the table while nothing was committed");
    /* Answered FAIL at their deadline, their batch may still commit once
     * the lock is gone (operations.md): then it is in the table too. */
    int64_t late = 0;
    for (int i = 0; i < 20 && !(late = count_for("SELECT COUNT(*) FROM notify_log WHERE"
                                                 " out_trade_no = ?",
                                                 no));
         i++)
        usleep(100000);
    int64_t records0 = count_for(records, no);

    /* Credited, then eight at once and four one after another: each from
     * the table. */
    struct delivery first = {"wechatpay", "t1", &req, {0}, 0};
    send_once(&first);
    T_CHECK(first.reply.status == 204, "known: first delivery %ld", first.reply.status);
    send_together(&req, d, DELIVERIES_MAX);
    for (int i = 0; i < 4; i++)
        send_once(&d[i]);
    for (int i = 0; i < DELIVERIES_MAX; i++)
        T_CHECK(d[i].reply.status == 204, "known: redelivery %d: %ld %s", i + 1, d[i].reply.status,
                d[i].reply.body);
    int64_t hits = metric("payonce_committer_known_hits_total") - hits0;
    T_CHECK(hits == DELIVERIES_MAX + 4 + late, "known: %lld of %lld redeliveries from the table",
            (long long)hits, (long long)(DELIVERIES_MAX + 4 + late));
    T_CHECK(count_for("SELECT COUNT(*) FROM journal WHERE out_trade_no = ?", no) == 1,
            "known: not credited once");

    /* Their records: the first delivery's with it, the twelve after their
     * acks. */
    int64_t got = 0, want = records0 + 1 + DELIVERIES_MAX + 4;
    for (int i = 0; i < 100 && (got = count_for(records, no)) < want; i++)
        usleep(100000);
    T_CHECK(got == want, "known: %lld records, expected %lld", (long long)got, (long long)want);
    printf("# http[%s] known: 8 at once while locked -> FAIL, none from the table (their batch"
           " committed after the lock: %s); then %lld redeliveries answered from the table,"
           " %lld records\n",
           backend, late ? "yes" : "no", (long long)hits, (long long)got);
    po_sim_request_free(&req);
    json_decref(cs);
}

#define ADMIN_TOKEN "test-admin-token-0123456789"

/* One request to the dashboard's routes (token NULL: none). */
static void admin_call(const char *method, const char *path, const char *token, const char *body,
                       struct reply *r)
{
    char u[256], auth[128];
    const char *lines[2] = {NULL, NULL};
    memset(r, 0, sizeof *r);
    snprintf(u, sizeof u, "http://127.0.0.1:%u%s", port, path);
    if (token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        lines[0] = auth;
    }
    struct t_http_req q = {.method = method, .url = u, .headers = lines, .body = body};
    r->status = t_http(&q, r->body, sizeof r->body, &r->len);
}

/* The dashboard's data (issue 13 item 11; the page itself is tested in a
 * browser by console_test.sh): the admin token (scripts) guards it, the summary has this
 * run's callbacks and alerts, an alert can be acknowledged. */
static void check_admin(void **state)
{
    (void)state;
    struct reply r;
    admin_call("GET", "/admin", NULL, NULL, &r);
    T_CHECK(r.status == 200 && strstr(r.body, "/admin/console.js"), "GET /admin: %ld", r.status);
    admin_call("GET", "/admin/console.js", NULL, NULL, &r);
    T_CHECK(r.status == 200 && strstr(r.body, "acknowledge"), "GET /admin/console.js: %ld",
            r.status);
    admin_call("GET", "/admin/nothing.js", NULL, NULL, &r);
    T_CHECK(r.status == 404, "GET /admin/nothing.js: %ld", r.status);
    admin_call("GET", "/admin/api/summary", NULL, NULL, &r);
    T_CHECK(r.status == 401, "summary without the token: %ld", r.status);
    admin_call("GET", "/admin/api/summary", "test-admin-token-0123456788", NULL, &r);
    T_CHECK(r.status == 401, "summary with another token: %ld", r.status);
    admin_call("GET", "/admin/api/summary", ADMIN_TOKEN, NULL, &r);
    json_t *j = json_loads(r.body, 0, NULL);
    json_t *alert = json_array_get(json_object_get(j, "alerts"), 0);
    T_CHECK(r.status == 200 && strstr(r.body, "\"outcome\":\"applied\"") &&
                strstr(r.body, "\"merchant_balances\"") && alert,
            "summary: %ld %.300s", r.status, r.body);
    char body[1024];
    snprintf(body, sizeof body, "{\"tenant\":\"%s\",\"id\":\"%s\",\"note\":\"seen\"}",
             json_string_value(json_object_get(alert, "tenant")) ?: "",
             json_string_value(json_object_get(alert, "id")) ?: "");
    json_decref(j);
    admin_call("POST", "/admin/api/alerts/ack", ADMIN_TOKEN, body, &r);
    T_CHECK(r.status == 200 && strstr(r.body, "\"changed\":true"), "ack: %ld %s", r.status, r.body);
    admin_call("POST", "/admin/api/alerts/ack", ADMIN_TOKEN, body, &r);
    T_CHECK(r.status == 200 && strstr(r.body, "\"changed\":false"), "ack again: %ld %s", r.status,
            r.body);
    admin_call("POST", "/admin/api/alerts/ack", ADMIN_TOKEN, "{\"tenant\":\"t1\",\"id\":\"nope\"}",
               &r);
    T_CHECK(r.status == 404, "ack of no alert: %ld", r.status);
    admin_call("POST", "/admin/api/alerts/ack", ADMIN_TOKEN, "[1", &r);
    T_CHECK(r.status == 400, "ack of broken JSON: %ld", r.status);
    admin_call("POST", "/admin/api/alerts/ack", NULL, body, &r);
    T_CHECK(r.status == 401, "ack without the token: %ld", r.status);
}

/* The console's replay inside serve (issue 46 item 2): the refused payment
 * of the "unknown order" case, its order created since, goes through the
 * engine's door — serve's committer — once: credited, the alert resolved; a
 * second replay is refused (resolved), nothing credited twice. */
static void check_replay(void **state)
{
    (void)state;
    const char *no = "W-NOSUCH";
    json_t *order = json_pack("{s:s, s:I}", "out_trade_no", no, "amount", (json_int_t)100);
    seed(order, "wechatpay");
    json_decref(order);
    const char *body =
        "{\"tenant\":\"t1\",\"id\":\"wechatpay:4200000013:PAY_SUCCESS|unknown_order\","
        "\"note\":\"the order was created late\"}";
    int64_t items0 = metric("payonce_committer_items_total");
    struct reply r;
    admin_call("POST", "/admin/api/alerts/replay", ADMIN_TOKEN, body, &r);
    T_CHECK(r.status == 200 && strstr(r.body, "\"outcome\":\"applied\"") &&
                strstr(r.body, "\"resolved\":true"),
            "replay: %ld %s", r.status, r.body);
    int64_t items = metric("payonce_committer_items_total") - items0;
    T_CHECK(items >= 1, "replay: the committer applied %lld items", (long long)items);
    T_CHECK(count_for("SELECT COUNT(*) FROM journal WHERE out_trade_no = ?", no) == 1,
            "replay: not credited once");
    T_CHECK(count_for("SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ? AND status = 'PAID'",
                      no) == 1,
            "replay: the order is not PAID");
    admin_call("POST", "/admin/api/alerts/replay", ADMIN_TOKEN, body, &r);
    T_CHECK(r.status == 409, "replay again: %ld %s", r.status, r.body);
    T_CHECK(count_for("SELECT COUNT(*) FROM journal WHERE out_trade_no = ?", no) == 1,
            "replay again: credited twice");
}

static void check_endpoints(void **state)
{
    (void)state;
    struct {
        const char *path;
        long status;
        const char *contains;
    } gets[] = {
        {"/healthz", 200, "ok"},
        {"/readyz", 200, "ready"},
        {"/metrics", 200, "payonce_callbacks_total{channel=\"wechatpay\",outcome=\"applied\""},
        {"/metrics", 200,
         "payonce_verification_failures_total{channel=\"wechatpay\",reason=\"bad_signature\"} 2"},
        {"/metrics", 200, "layer=\"1\""},
        {"/metrics", 200, "payonce_ack_seconds_bucket"},
        {"/nope", 404, "not_found"},
        {"/notify/wechatpay/t1", 405, "method_not_allowed"},
        {"/notify/paypal/t1", 405, "method_not_allowed"},
    };
    for (size_t i = 0; i < sizeof gets / sizeof gets[0]; i++) {
        static struct reply r;
        char u[256];
        snprintf(u, sizeof u, "http://127.0.0.1:%u%s", port, gets[i].path);
        struct t_http_req q = {.url = u};
        r.status = t_http(&q, r.body, sizeof r.body, &r.len);
        T_CHECK(r.status == gets[i].status && strstr(r.body, gets[i].contains),
                "GET %s: %ld, body lacks %s", gets[i].path, r.status, gets[i].contains);
    }
}

/* Every callback left one JSON line with a request id; no secret leaked. */
static void check_log(const char *path)
{
    char *log = NULL;
    size_t len = 0;
    if (po_file_read(path, 64 << 20, &log, &len))
        die("cannot read server log");
    int lines = 0;
    for (const char *p = log; (p = strstr(p, "\"msg\":\"callback\",\"request_id\":\"")); p++)
        lines++;
    T_CHECK(lines >= 40, "only %d callback log lines", lines);
    T_CHECK(!strstr(log, T1_APIV3), "the APIv3 key appears in the log");
    T_CHECK(!strstr(log, STRIPE_SECRET), "the webhook secret appears in the log");
    T_CHECK(!strstr(log, "PRIVATE KEY"), "a private key appears in the log");
    printf("# http[%s] %d callback log lines, no secret in them\n", backend, lines);
    free(log);
}

int main(int argc, char **argv)
{
    backend = t_backend(argc, argv);
    t_report = stdout; /* stderr is the captured server log */
    if (argc < 3)
        die("usage: test_http BACKEND PAYONCE_BINARY");
    if (!realpath(argv[2], bin))
        die("payonce binary not found");
    po_log_set_level(PO_LOG_ERROR);
    snprintf(dir, sizeof dir, "%s/payonce-http-XXXXXX", po_tmp_dir());
    if (!mkdtemp(dir))
        die("mkdtemp");
    t_db_create(backend, url, sizeof url);
    setup_tenants();
    /* Capture the server's log lines to check them afterwards. */
    char logpath[512];
    snprintf(logpath, sizeof logpath, "%s/server.log", dir);
    fflush(stderr);
    int saved_stderr = dup(2);
    if (!freopen(logpath, "w", stderr))
        die("cannot capture stderr");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char mkpath[512];
    snprintf(mkpath, sizeof mkpath, "%s/master.key", dir);
    unsigned char master[32];
    char err[PO_ERRBUF_SIZE] = "";
    if (po_master_key_load(mkpath, master, err, sizeof err))
        die(err);
    struct po_gateway_cfg cfg;
    t_gateway_cfg(&cfg, url, master);
    cfg.pool_size = 8;
    struct po_server_cfg scfg = {.admin_token = ADMIN_TOKEN};
    struct t_gateway *srv = t_gateway_start(&cfg, &scfg);
    port = srv->port;
    /* The channels' tables (a case each), then the named cases. */
    static const char *const channels[] = {"wechatpay", "alipay", "stripe"};
    static const struct CMUnitTest named[] = {
        cmocka_unit_test(store_outage), cmocka_unit_test(known_duplicates),
        cmocka_unit_test(check_endpoints), cmocka_unit_test(check_admin),
        cmocka_unit_test(check_replay)};
    json_t *tables[3];
    size_t ncases = PO_NELEM(named);
    for (int c = 0; c < 3; c++) {
        char path[512];
        json_error_t je;
        snprintf(path, sizeof path, "%s/http/%s.json", PO_TEST_DATA_DIR, channels[c]);
        tables[c] = json_load_file(path, 0, &je);
        if (!json_is_array(tables[c]))
            die(path);
        ncases += json_array_size(tables[c]);
    }
    struct CMUnitTest *tests = calloc(ncases, sizeof *tests);
    struct http_case *hcs = calloc(ncases, sizeof *hcs);
    if (!tests || !hcs)
        die("out of memory");
    size_t n = 0;
    for (int c = 0; c < 3; c++) {
        size_t i;
        json_t *cs;
        json_array_foreach(tables[c], i, cs)
        {
            hcs[n] = (struct http_case){channels[c], cs, ""};
            snprintf(hcs[n].name, sizeof hcs[n].name, "%s/%s", channels[c],
                     json_string_value(json_object_get(cs, "name")) ?: "?");
            tests[n] = (struct CMUnitTest){hcs[n].name, run_case, NULL, NULL, &hcs[n]};
            n++;
        }
    }
    for (size_t i = 0; i < PO_NELEM(named); i++)
        tests[n++] = named[i];
    char name[64];
    snprintf(name, sizeof name, "http[%s]", backend);
    int rc = t_run_group(name, tests, n, NULL, NULL);
    free(tests);
    free(hcs);
    for (int c = 0; c < 3; c++)
        json_decref(tables[c]);
    t_gateway_stop(srv);
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    check_log(logpath);
    struct po_store *s = t_open(url);
    int violations = t_verify(s);
    T_CHECK(violations == 0, "verify found %d violations", violations);
    po_store_close(s);
    t_db_drop(url);
    curl_global_cleanup();
    po_privkey_free(wx_key);
    po_privkey_free(wx_key2);
    po_privkey_free(ali_key);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm)) { /* lint-ok */
    }
    printf("# http[%s]: %d checks\n", backend, t_passes + t_failures);
    return rc || t_failures ? 1 : 0;
}
