/*
 * test_event.c — the normalised event JSON and the idempotency key.
 * Includes pitfall 6: key derivation is deterministic — the same business
 * fields give the same key, and time, source and delivery do not enter it.
 */
#include "../support/testutil.h"

#include "../../src/channel/channel.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

static const char good[] =
    "{\"tenant\":\"t1\",\"channel\":\"wechatpay\",\"type\":\"PAY_SUCCESS\","
    "\"channel_txn_id\":\"4200001234202612020000000001\",\"out_trade_no\":\"ORD-1\","
    "\"amount\":100,\"currency\":\"CNY\",\"source\":\"callback\","
    "\"occurred_at\":\"2026-12-02T10:00:00+08:00\"}";

static po_err parse(const char *js, struct po_event *ev, char *err)
{
    return po_event_from_json(js, strlen(js), ev, err, PO_ERRBUF_SIZE);
}

static void design_example_parses(void **state)
{
    (void)state;
    struct po_event ev;
    char err[PO_ERRBUF_SIZE] = "";
    assert_int_equal(parse(good, &ev, err), PO_OK);
    assert_string_equal(ev.tenant, "t1");
    assert_int_equal(ev.type, PO_EV_PAY_SUCCESS);
    assert_int_equal(ev.amount_minor, 100);
    assert_int_equal(ev.source, PO_SRC_CALLBACK);
    char key[PO_KEY_SIZE];
    assert_int_equal(po_event_key(&ev, key, sizeof key), PO_OK);
    assert_string_equal(key, "wechatpay:4200001234202612020000000001:PAY_SUCCESS");
}

/* Replaces the first occurrence of `from` in `good` with `to`. */
static void variant(char *out, size_t cap, const char *from, const char *to)
{
    const char *p = strstr(good, from);
    assert_non_null(p);
    snprintf(out, cap, "%.*s%s%s", (int)(p - good), good, to, p + strlen(from));
}

static void bad_events_are_refused_with_reasons(void **state)
{
    (void)state;
    struct {
        const char *from, *to, *expect;
    } cases[] = {
        {"\"amount\":100", "\"amount\":100.0", "amount"},
        {"\"amount\":100", "\"amount\":\"100\"", "amount"},
        {"\"amount\":100", "\"amount\":-100", "amount"},
        {"\"amount\":100", "\"amount\":0", "amount"},
        {"\"amount\":100", "\"amount\":99999999999999999999", "malformed"},
        {"\"amount\":100", "\"amount\":100000000000001", "amount"},
        {"\"currency\":\"CNY\"", "\"currency\":\"XYZ\"", "currency"},
        {"\"type\":\"PAY_SUCCESS\"", "\"type\":\"PAID\"", "type"},
        {"\"source\":\"callback\"", "\"source\":\"manual\"", "source"},
        {"\"channel\":\"wechatpay\"", "\"channel\":\"paypal\"", "channel"},
        {"\"tenant\":\"t1\"", "\"tenant\":\"\"", "tenant"},
        {"\"tenant\":\"t1\"", "\"tenant\":\"t 1\"", "tenant"},
        {"\"tenant\":\"t1\"", "\"tenant\":1", "tenant"},
        {"\"tenant\":\"t1\",", "", "tenant"},
        {"\"out_trade_no\":\"ORD-1\",", "", "out_trade_no"},
        {"\"channel_txn_id\":\"4200001234202612020000000001\",", "", "channel_txn_id"},
        {"\"tenant\":\"t1\"", "\"tenant\":\"t1\",\"extra\":1", "unknown field"},
        {"\"tenant\":\"t1\"", "\"tenant\":\"t1\",\"tenant\":\"t2\"", "malformed"},
        {"\"occurred_at\":\"2026-12-02T10:00:00+08:00\"", "\"occurred_at\":\"now\"", "occurred_at"},
        {"\"type\":\"PAY_SUCCESS\"", "\"type\":\"REFUND_SUCCESS\"", "out_refund_no"},
        {"\"type\":\"PAY_SUCCESS\"", "\"type\":\"PROFIT_SHARE_RESULT\"", "receiver"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char js[1024];
        struct po_event ev;
        char err[PO_ERRBUF_SIZE] = "";
        variant(js, sizeof js, cases[i].from, cases[i].to);
        memset(&ev, 0x5a, sizeof ev);
        po_err rc = parse(js, &ev, err);
        if (rc == PO_OK || !strstr(err, cases[i].expect))
            fail_msg("case %zu: rc %s err '%s', expected '%s'", i, po_err_name(rc), err,
                     cases[i].expect);
        assert_int_equal(((unsigned char *)&ev)[0], 0x5a); /* untouched */
    }
    char err[PO_ERRBUF_SIZE];
    struct po_event ev;
    assert_int_equal(parse("[]", &ev, err), PO_ERR_INVALID);
    assert_int_equal(parse("{", &ev, err), PO_ERR_INVALID);
    assert_int_equal(parse("", &ev, err), PO_ERR_INVALID);
    char longid[200];
    memset(longid, 'a', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    char js[1024];
    char to[256];
    snprintf(to, sizeof to, "\"tenant\":\"%s\"", longid);
    variant(js, sizeof js, "\"tenant\":\"t1\"", to);
    assert_int_equal(parse(js, &ev, err), PO_ERR_INVALID);
    assert_non_null(strstr(err, "longer"));
}

/* Pitfall 6: deterministic keys from business fields only. */
static void pitfall_key_derivation_deterministic(void **state)
{
    (void)state;
    struct po_event a = t_pay_event("ORD-1", "4200000001", 100);
    struct po_event b = a;
    b.source = PO_SRC_RECONCILIATION;
    memcpy(b.occurred_at, "2027-01-01T00:00:00Z", 21);
    char ka[PO_KEY_SIZE], kb[PO_KEY_SIZE], kc[PO_KEY_SIZE];
    assert_int_equal(po_event_key(&a, ka, sizeof ka), PO_OK);
    for (int i = 0; i < 100; i++) { /* no time or randomness: stable across calls */
        assert_int_equal(po_event_key(&b, kb, sizeof kb), PO_OK);
        assert_string_equal(ka, kb);
    }
    struct po_event c = t_pay_event("ORD-1", "4200000002", 100);
    assert_int_equal(po_event_key(&c, kc, sizeof kc), PO_OK);
    assert_string_not_equal(ka, kc);
    /* Channel scopes the key: the same id on another channel differs. */
    struct po_event d = a;
    memcpy(d.channel, "alipay", 7);
    assert_int_equal(po_event_key(&d, kc, sizeof kc), PO_OK);
    assert_string_not_equal(ka, kc);

    /* Refunds: the final status is part of the key. */
    struct po_event r1 = t_refund_event(PO_EV_REFUND_SUCCESS, "ORD-1", "R-1", "503", 10);
    struct po_event r2 = t_refund_event(PO_EV_REFUND_ABNORMAL, "ORD-1", "R-1", "503", 10);
    assert_int_equal(po_event_key(&r1, ka, sizeof ka), PO_OK);
    assert_int_equal(po_event_key(&r2, kb, sizeof kb), PO_OK);
    assert_string_equal(ka, "wechatpay:503:REFUND_SUCCESS");
    assert_string_equal(kb, "wechatpay:503:REFUND_ABNORMAL");
    /* Profit sharing: one key per receiver. */
    struct po_event s1 = t_share_event("ORD-1", "300", "r1", 10);
    assert_int_equal(po_event_key(&s1, ka, sizeof ka), PO_OK);
    assert_string_equal(ka, "wechatpay:300:r1:PROFIT_SHARE_RESULT");
}

static void outcome_json(void **state)
{
    (void)state;
    char buf[128];
    struct po_outcome o = {.kind = PO_OUT_DUPLICATE, .layer = 2};
    assert_int_equal(po_outcome_to_json(&o, buf, sizeof buf), PO_OK);
    assert_string_equal(buf, "{\"outcome\":\"duplicate\",\"layer\":2}");
    struct po_outcome r = {.kind = PO_OUT_REJECTED, .reason = PO_R_AMOUNT_MISMATCH};
    assert_int_equal(po_outcome_to_json(&r, buf, sizeof buf), PO_OK);
    assert_string_equal(buf, "{\"outcome\":\"rejected\",\"reason\":\"amount_mismatch\"}");
    struct po_outcome a = {.kind = PO_OUT_APPLIED};
    assert_int_equal(po_outcome_to_json(&a, buf, sizeof buf), PO_OK);
    assert_string_equal(buf, "{\"outcome\":\"applied\"}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(design_example_parses),
        cmocka_unit_test(bad_events_are_refused_with_reasons),
        cmocka_unit_test(pitfall_key_derivation_deterministic),
        cmocka_unit_test(outcome_json),
    };
    return cmocka_run_group_tests_name("event", tests, NULL, NULL);
}
