/*
 * test_sim.c — the simulator as a faithful channel, checked with payonce's
 * own adapters (accounts built as `channel set` builds them from the
 * simulator's files) and against the channels' documented examples in
 * tests/data/vectors:
 *   - every attempt is signed when it is sent: two builds of one
 *     notification differ in signature, timestamp and nonce (and Stripe's
 *     t=, Alipay's notify_time) and both verify; the first one, resent
 *     later than the channel's window, would be refused as stale;
 *   - ids: two Stripe payments have two event ids, a retry keeps its id;
 *     WeChat's notification id and Alipay's notify_id likewise;
 *   - formats: WeChat's envelope and times in +08:00, Alipay's Beijing
 *     times, trade_no and notify_id shapes and the optional fields it
 *     sends, Stripe's envelope — each compared with the vector's;
 *   - Alipay's two sign-content constructions (empty values left out, as
 *     the Java SDK; kept, as the Node SDK) both verify; a tampered field
 *     fails under both.
 */
#include "../../src/channel/channel.h"
#include "../../src/crypto/crypto.h"
#include "../../src/sim/sim.h"

#include <jansson.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static char dir[64];
static struct po_sim_identity id;
static struct po_channel_account wx, ali, st;

/* ---- accounts as `channel set` builds them ---- */

static void account(const char *channel, struct po_account_opts *o, struct po_channel_account *out)
{
    struct po_account_input in = po_account_input_table("t1", NULL, o);
    char *doc = NULL, err[256] = "";
    if (po_channel_account_build(po_channel_find(channel), &in, &doc, err, sizeof err) ||
        po_channel_account_load("t1", channel, doc, NULL, out, err, sizeof err))
        fail_msg("%s account: %s", channel, err);
    free(doc);
}

static int setup(void **state)
{
    (void)state;
    char err[256] = "", f1[128], f2[128], f3[128];
    snprintf(dir, sizeof dir, "%s/payonce-simtest-XXXXXX", po_tmp_dir());
    if (!mkdtemp(dir) || po_sim_identity_generate(dir, "cert", err, sizeof err) ||
        po_sim_identity_load(dir, &id, err, sizeof err))
        fail_msg("identity: %s", err);
    snprintf(f1, sizeof f1, "%s/apiv3.key", dir);
    snprintf(f2, sizeof f2, "%s/wechatpay_platform_cert.pem", dir);
    struct po_account_opts w = {{"mchid", "appid", "apiv3-key-file", "platform-cert-file"},
                                {id.mchid, id.appid, f1, f2},
                                4};
    account("wechatpay", &w, &wx);
    snprintf(f3, sizeof f3, "%s/alipay_public_key.pem", dir);
    struct po_account_opts a = {
        {"app-id", "seller-id", "alipay-public-key-file"}, {id.app_id, id.seller_id, f3}, 3};
    account("alipay", &a, &ali);
    snprintf(f1, sizeof f1, "%s/stripe_webhook_secret", dir);
    struct po_account_opts s = {{"webhook-secret-file"}, {f1}, 1};
    account("stripe", &s, &st);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    po_channel_account_free(&wx);
    po_channel_account_free(&ali);
    po_channel_account_free(&st);
    po_sim_identity_free(&id);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1; /* lint-ok */
}

/* ---- helpers ---- */

static const char *header(void *ctx, const char *name)
{
    return po_sim_get_header(ctx, name);
}

/* payonce's adapter on a simulated request received at time now. */
static struct po_notify_result parse(const struct po_channel_account *a, struct po_sim_request *r,
                                     int64_t now)
{
    struct po_notify_req req = {
        .body = r->body, .body_len = r->body_len, .header = header, .hctx = r, .now_unix = now};
    struct po_notify_result out;
    memset(&out, 0, sizeof out);
    assert_int_equal(po_channel_parse(a, &req, &out), PO_OK);
    return out;
}

static struct po_sim_request build(const char *channel, const struct po_sim_payment *p, int64_t now)
{
    struct po_sim_payment q = *p;
    q.channel = channel;
    struct po_sim_notice n = {&id, &q, NULL};
    struct po_sim_request r;
    assert_int_equal(po_sim_notice_build(&n, now, &r), PO_OK);
    return r;
}

static bool matches(const char *s, const char *re)
{
    regex_t r;
    assert_int_equal(regcomp(&r, re, REG_EXTENDED | REG_NOSUB), 0);
    bool ok = regexec(&r, s, 0, NULL, 0) == 0;
    regfree(&r);
    return ok;
}

static json_t *vector(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/vectors/%s", PO_TEST_DATA_DIR, name);
    json_t *j = json_load_file(path, 0, NULL);
    if (!j)
        fail_msg("cannot load %s", path);
    return j;
}

static const struct po_account_sel {
    const char *channel;
    const struct po_channel_account *acct;
    const char *const sig_headers[3]; /* what changes with each attempt */
} sels[] = {
    {"wechatpay", &wx, {"Wechatpay-Signature", "Wechatpay-Timestamp", "Wechatpay-Nonce"}},
    {"stripe", &st, {"Stripe-Signature", NULL, NULL}},
    {"alipay", &ali, {NULL, NULL, NULL}},
};

/* ---- tests ---- */

/* Each attempt is signed when it is sent; both verify; the first one sent
 * again past the window would not. */
static void every_attempt_signed_anew(void **state)
{
    (void)state;
    int64_t t0 = (int64_t)time(NULL);
    for (size_t c = 0; c < sizeof sels / sizeof sels[0]; c++) {
        char txn[64];
        po_sim_new_txn(sels[c].channel, txn, sizeof txn);
        struct po_sim_payment p = {NULL, "SIM-1", txn, 1234, "CNY", t0};
        struct po_sim_request a = build(sels[c].channel, &p, t0);
        struct po_sim_request b = build(sels[c].channel, &p, t0 + 420);
        for (int h = 0; h < 3 && sels[c].sig_headers[h]; h++)
            assert_string_not_equal(po_sim_get_header(&a, sels[c].sig_headers[h]),
                                    po_sim_get_header(&b, sels[c].sig_headers[h]));
        if (strcmp(sels[c].channel, "alipay") == 0) /* notify_time and sign change */
            assert_string_not_equal(a.body, b.body);
        struct po_notify_result ra = parse(sels[c].acct, &a, t0);
        struct po_notify_result rb = parse(sels[c].acct, &b, t0 + 420);
        assert_int_equal(ra.status, PO_NOTIFY_EVENT);
        assert_int_equal(rb.status, PO_NOTIFY_EVENT);
        assert_string_equal(ra.ev.channel_txn_id, txn);
        assert_string_equal(rb.ev.channel_txn_id, txn);
        if (strcmp(sels[c].channel, "alipay") != 0) { /* Alipay signs no time */
            struct po_notify_result late = parse(sels[c].acct, &a, t0 + 420);
            assert_int_equal(late.status, PO_NOTIFY_REJECT);
            assert_string_equal(po_reason_name(late.reason), "stale_timestamp");
        }
        po_sim_request_free(&a);
        po_sim_request_free(&b);
    }
}

static json_t *body_json(const struct po_sim_request *r)
{
    json_t *j = json_loadb(r->body, r->body_len, 0, NULL);
    assert_non_null(j);
    return j;
}

/* Stripe: an event id of its own, kept by its retries; the envelope. */
static void stripe_event_ids_and_envelope(void **state)
{
    (void)state;
    int64_t t0 = (int64_t)time(NULL);
    struct po_sim_payment p1 = {NULL, "S-1", "pi_111", 100, "CNY", t0};
    struct po_sim_payment p2 = {NULL, "S-2", "pi_222", 100, "CNY", t0};
    struct po_sim_request a = build("stripe", &p1, t0), again = build("stripe", &p1, t0 + 60),
                          b = build("stripe", &p2, t0);
    json_t *ja = body_json(&a), *jr = body_json(&again), *jb = body_json(&b);
    const char *ida = json_string_value(json_object_get(ja, "id"));
    assert_true(matches(ida, "^evt_[0-9A-Za-z]{24}$"));
    assert_string_equal(ida, json_string_value(json_object_get(jr, "id")));
    assert_string_not_equal(ida, json_string_value(json_object_get(jb, "id")));
    assert_true(json_is_string(json_object_get(ja, "api_version")));
    assert_true(json_is_false(json_object_get(ja, "livemode")));
    assert_true(json_is_integer(json_object_get(ja, "pending_webhooks")));
    assert_true(json_is_object(json_object_get(ja, "request")));
    assert_int_equal(json_integer_value(json_object_get(ja, "created")), t0);
    assert_string_equal(json_string_value(json_object_get(ja, "object")), "event");
    assert_string_equal(a.content_type, "application/json; charset=utf-8");
    assert_true(strncmp(po_sim_get_header(&a, "User-Agent"), "Stripe/", 7) == 0);
    /* The vector's envelope names the same kind of event. */
    json_t *v = vector("stripe_webhook.json");
    json_t *vp = json_loads(json_string_value(json_object_get(v, "payload")), 0, NULL);
    assert_string_equal(json_string_value(json_object_get(vp, "type")),
                        json_string_value(json_object_get(ja, "type")));
    json_decref(vp);
    json_decref(v);
    json_decref(ja);
    json_decref(jr);
    json_decref(jb);
    po_sim_request_free(&a);
    po_sim_request_free(&again);
    po_sim_request_free(&b);
}

/* WeChat: the envelope as WeChat writes it (the vector's shapes), its id
 * kept by retries, Beijing time in the resource. */
static void wechat_envelope_and_times(void **state)
{
    (void)state;
    int64_t t0 = (int64_t)time(NULL);
    char txn[64];
    po_sim_new_txn("wechatpay", txn, sizeof txn);
    assert_true(matches(txn, "^4200[0-9]{24}$"));
    struct po_sim_payment p = {NULL, "W-1", txn, 100, "CNY", t0};
    struct po_sim_request a = build("wechatpay", &p, t0), again = build("wechatpay", &p, t0 + 30);
    json_t *ja = body_json(&a), *jr = body_json(&again);
    json_t *v = vector("wechatpay_v3_transaction_success.json");
    json_t *vb = json_loads(json_string_value(json_object_get(v, "body")), 0, NULL);
    /* id: "EV-" and 19 digits, like the vector's; kept by the retry. */
    const char *evid = json_string_value(json_object_get(ja, "id"));
    assert_true(matches(json_string_value(json_object_get(vb, "id")), "^EV-[0-9]{19}$"));
    assert_true(matches(evid, "^EV-[0-9]{19}$"));
    assert_string_equal(evid, json_string_value(json_object_get(jr, "id")));
    /* create_time: RFC 3339 in +08:00, like the vector's; the event's, so
     * the same in the retry. */
    const char *iso8 = "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\+08:00$";
    assert_true(matches(json_string_value(json_object_get(vb, "create_time")), iso8));
    assert_true(matches(json_string_value(json_object_get(ja, "create_time")), iso8));
    assert_string_equal(json_string_value(json_object_get(ja, "create_time")),
                        json_string_value(json_object_get(jr, "create_time")));
    assert_string_equal(json_string_value(json_object_get(ja, "summary")),
                        json_string_value(json_object_get(vb, "summary")));
    /* The same members as the vector's envelope. */
    const char *k;
    json_t *x;
    json_object_foreach(vb, k, x) assert_non_null(json_object_get(ja, k));
    /* success_time in Beijing time. */
    struct po_notify_result r = parse(&wx, &a, t0);
    assert_int_equal(r.status, PO_NOTIFY_EVENT);
    assert_true(matches(r.ev.occurred_at, iso8));
    char expect[40];
    time_t bj = (time_t)(t0 + 8 * 3600);
    struct tm tm;
    gmtime_r(&bj, &tm);
    strftime(expect, sizeof expect, "%Y-%m-%dT%H:%M:%S+08:00", &tm);
    assert_string_equal(r.ev.occurred_at, expect);
    json_decref(vb);
    json_decref(v);
    json_decref(ja);
    json_decref(jr);
    po_sim_request_free(&a);
    po_sim_request_free(&again);
}

/* Alipay: the fields and formats of the real notification (the vector). */
static void alipay_fields_and_times(void **state)
{
    (void)state;
    int64_t t0 = (int64_t)time(NULL);
    char txn[64], day[16], now_bj[24];
    time_t bj = (time_t)(t0 + 8 * 3600);
    struct tm tm;
    gmtime_r(&bj, &tm);
    strftime(day, sizeof day, "%Y%m%d", &tm);
    strftime(now_bj, sizeof now_bj, "%Y-%m-%d %H:%M:%S", &tm);
    po_sim_new_txn("alipay", txn, sizeof txn);
    /* "2019081522001468450512505578": the date, 22001, 15 digits. */
    assert_true(matches(txn, "^[0-9]{8}22001[0-9]{15}$"));
    assert_memory_equal(txn, day, 8);
    struct po_sim_payment p = {NULL, "A-1", txn, 10, "CNY", t0};
    struct po_sim_request a = build("alipay", &p, t0), again = build("alipay", &p, t0 + 240);
    struct po_form f, g;
    assert_int_equal(po_form_parse(a.body, a.body_len, &f), PO_OK);
    assert_int_equal(po_form_parse(again.body, again.body_len, &g), PO_OK);
    json_t *v = vector("alipay_notify_trade_success.json");
    json_t *vp = json_object_get(v, "params");
    /* Only fields the real notification has; and the optional ones it sends. */
    for (int i = 0; i < f.n; i++)
        if (!json_object_get(vp, f.p[i].key))
            fail_msg("field %s is not in Alipay's notification", f.p[i].key);
    static const char *const sent[] = {"gmt_create",     "buyer_id",       "buyer_pay_amount",
                                       "invoice_amount", "fund_bill_list", "auth_app_id",
                                       "gmt_payment",    "notify_time",    "receipt_amount"};
    for (size_t i = 0; i < sizeof sent / sizeof sent[0]; i++)
        assert_non_null(po_form_get(&f, sent[i]));
    const char *dt = "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}$";
    assert_true(matches(json_string_value(json_object_get(vp, "notify_time")), dt));
    assert_string_equal(po_form_get(&f, "notify_time"), now_bj); /* Beijing, at sending */
    assert_string_equal(po_form_get(&f, "gmt_payment"), now_bj); /* paid at t0 */
    assert_true(matches(po_form_get(&f, "gmt_create"), dt));
    assert_string_not_equal(po_form_get(&f, "notify_time"), po_form_get(&g, "notify_time"));
    assert_string_equal(po_form_get(&f, "gmt_payment"), po_form_get(&g, "gmt_payment"));
    /* notify_id: 34 digits like the vector's, not the trade number, kept. */
    assert_true(matches(json_string_value(json_object_get(vp, "notify_id")), "^[0-9]{34}$"));
    assert_true(matches(po_form_get(&f, "notify_id"), "^[0-9]{34}$"));
    assert_string_not_equal(po_form_get(&f, "notify_id"), po_form_get(&f, "trade_no"));
    assert_string_equal(po_form_get(&f, "notify_id"), po_form_get(&g, "notify_id"));
    assert_true(matches(po_form_get(&f, "buyer_id"), "^2088[0-9]{12}$"));
    assert_true(matches(po_form_get(&f, "fund_bill_list"), "^\\[\\{\"amount\":\"0\\.10\","));
    po_form_free(&f);
    po_form_free(&g);
    json_decref(v);
    po_sim_request_free(&a);
    po_sim_request_free(&again);
}

/* Alipay's SDKs disagree on empty values; both are Alipay's signature. */
static void alipay_empty_values_both_constructions(void **state)
{
    (void)state;
    char txn[64];
    po_sim_new_txn("alipay", txn, sizeof txn);
    const char *keys[] = {"notify_type",     "notify_id", "app_id",       "seller_id",
                          "out_trade_no",    "trade_no",  "trade_status", "total_amount",
                          "passback_params", "body"};
    const char *vals[] = {"trade_status_sync",
                          "2026120200222000000000000000000001",
                          id.app_id,
                          id.seller_id,
                          "E-1",
                          txn,
                          "TRADE_SUCCESS",
                          "1.00",
                          "",
                          ""};
    for (int keep = 0; keep < 2; keep++) {
        struct po_sim_request r;
        assert_int_equal(po_sim_alipay_sdk(id.ali_key, keys, vals, 10, keep == 1, &r), PO_OK);
        struct po_notify_result ok = parse(&ali, &r, (int64_t)time(NULL));
        if (ok.status != PO_NOTIFY_EVENT)
            fail_msg("keep_empty=%d: %s %s", keep, po_reason_name(ok.reason), ok.detail);
        assert_int_equal(ok.ev.amount_minor, 100);
        /* The same signature over another amount: refused either way. */
        char *at = strstr(r.body, "total_amount=1.00");
        assert_non_null(at);
        at[13] = '9';
        struct po_notify_result bad = parse(&ali, &r, (int64_t)time(NULL));
        assert_string_equal(po_reason_name(bad.reason), "bad_signature");
        po_sim_request_free(&r);
    }
}

/* channel set records a platform certificate's validity and refuses one
 * that expired (or is not valid yet), naming the date. */
static void platform_certificate_validity(void **state)
{
    (void)state;
    int64_t now = (int64_t)time(NULL);
    assert_true(wx.keys[0].not_after > now + INT64_C(4) * 365 * 86400);
    char err[256] = "", path[160], apiv3[160];
    struct po_privkey *k = NULL;
    char *pem = NULL;
    assert_int_equal(po_privkey_generate(&k), PO_OK);
    struct {
        int64_t nb, na;
        const char *says;
    } cases[] = {{now - 86400 * 30, now - 86400, "expired at"},
                 {now + 86400, now + 86400 * 30, "is not valid before"}};
    snprintf(apiv3, sizeof apiv3, "%s/apiv3.key", dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(
            po_cert_self_signed_valid(k, "5EED01", "expired", cases[i].nb, cases[i].na, &pem),
            PO_OK);
        snprintf(path, sizeof path, "%s/cert-%zu.pem", dir, i);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(pem, f);
        fclose(f);
        free(pem);
        struct po_account_opts w = {{"mchid", "appid", "apiv3-key-file", "platform-cert-file"},
                                    {id.mchid, id.appid, apiv3, path},
                                    4};
        struct po_account_input in = po_account_input_table("t1", NULL, &w);
        char *doc = NULL;
        assert_int_not_equal(
            po_channel_account_build(po_channel_find("wechatpay"), &in, &doc, err, sizeof err),
            PO_OK);
        assert_null(doc);
        if (!strstr(err, cases[i].says))
            fail_msg("case %zu: '%s' lacks '%s'", i, err, cases[i].says);
        unlink(path);
    }
    po_privkey_free(k);
}

/* The receiver's check of Payonce-Signature, against a header made here
 * with the HMAC primitive: genuine passes (also as the second v1 of two);
 * a changed body, another secret, a stale or future t, a truncated v1 and
 * garbage fail. */
static void receiver_checks_signatures(void **state)
{
    (void)state;
    const char *secret = "whsec_0123", *body = "{\"id\":\"evt_1\",\"type\":\"payment.credited\"}";
    int64_t now = 1764749102;
    char msg[128], hex[65], header[256], two[320];
    unsigned char mac[32];
    snprintf(msg, sizeof msg, "%lld.%s", (long long)now, body);
    assert_int_equal(po_hmac_sha256(secret, strlen(secret), msg, strlen(msg), mac), PO_OK);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    snprintf(header, sizeof header, "t=%lld,v1=%s", (long long)now, hex);
    snprintf(two, sizeof two, "t=%lld,v1=%064d,v1=%s", (long long)now, 0, hex);
    size_t len = strlen(body);
    assert_true(po_sim_webhook_verify(secret, header, body, len, now));
    assert_true(po_sim_webhook_verify(secret, two, body, len, now + 299));
    assert_false(po_sim_webhook_verify(secret, header, "{\"id\":\"evt_2\"}", 14, now));
    assert_false(po_sim_webhook_verify("whsec_other", header, body, len, now));
    assert_false(po_sim_webhook_verify(secret, header, body, len, now + 301));
    assert_false(po_sim_webhook_verify(secret, header, body, len, now - 301));
    header[strlen(header) - 1] = '\0';
    assert_false(po_sim_webhook_verify(secret, header, body, len, now));
    assert_false(po_sim_webhook_verify(secret, "v1=abc", body, len, now));
    assert_false(po_sim_webhook_verify(secret, NULL, body, len, now));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_attempt_signed_anew),
        cmocka_unit_test(receiver_checks_signatures),
        cmocka_unit_test(platform_certificate_validity),
        cmocka_unit_test(stripe_event_ids_and_envelope),
        cmocka_unit_test(wechat_envelope_and_times),
        cmocka_unit_test(alipay_fields_and_times),
        cmocka_unit_test(alipay_empty_values_both_constructions),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
