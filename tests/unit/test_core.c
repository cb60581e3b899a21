/* test_core.c — strict parsing, bounded strings and validation. */
#include "../support/testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

static void parse_i64_is_strict(void **state)
{
    (void)state;
    int64_t v = 0;
    assert_int_equal(po_parse_i64("100", 1, 1000, &v), PO_OK);
    assert_int_equal(v, 100);
    assert_int_equal(po_parse_i64("-5", -10, 10, &v), PO_OK);
    assert_int_equal(v, -5);
    const char *bad[] = {"",
                         " 1",
                         "1 ",
                         "+1",
                         "1.0",
                         "1e3",
                         "0x10",
                         "abc",
                         "-",
                         "1001",
                         "99999999999999999999",
                         "9223372036854775808"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 42;
        assert_int_equal(po_parse_i64(bad[i], 1, 1000, &v), PO_ERR_INVALID);
        assert_int_equal(v, 42); /* out-param untouched on error */
    }
    assert_int_equal(po_parse_i64("9223372036854775807", INT64_MIN, INT64_MAX, &v), PO_OK);
    assert_true(v == INT64_MAX);
}

static void bounded_copies(void **state)
{
    (void)state;
    char b[4];
    assert_int_equal(po_strcpy(b, sizeof b, "abc"), PO_OK);
    assert_string_equal(b, "abc");
    assert_int_equal(po_strcpy(b, sizeof b, "abcd"), PO_ERR_LIMIT);
    assert_string_equal(b, "");
    assert_int_equal(po_fmt(b, sizeof b, "%d", 1234), PO_ERR_LIMIT);
    assert_int_equal(po_fmt(b, sizeof b, "%d", 123), PO_OK);
}

static void validation(void **state)
{
    (void)state;
    assert_true(po_id_valid("ORD-1_a.b:c|d*", PO_ID_MAX));
    assert_false(po_id_valid("", PO_ID_MAX));
    assert_false(po_id_valid("a b", PO_ID_MAX));
    assert_false(po_id_valid("a/b", PO_ID_MAX));
    assert_false(po_id_valid("\xe4\xbd\xa0", PO_ID_MAX));
    assert_true(po_id_valid("abcd", 4));
    assert_false(po_id_valid("abcde", 4));
    assert_true(po_currency_valid("CNY"));
    assert_true(po_currency_valid("USD"));
    assert_false(po_currency_valid("cny"));
    assert_false(po_currency_valid("XXX"));
    assert_false(po_currency_valid("CNYY"));
    assert_true(po_amount_valid(1));
    assert_true(po_amount_valid(PO_AMOUNT_MAX));
    assert_false(po_amount_valid(0));
    assert_false(po_amount_valid(-1));
    assert_false(po_amount_valid(PO_AMOUNT_MAX + 1));
    assert_true(po_time_valid("2026-12-02T10:00:00+08:00"));
    assert_true(po_time_valid("2026-12-02"));
    assert_false(po_time_valid("yesterday"));
    assert_false(po_time_valid("2026-12-02 10:00"));
}

/* Whatever bytes a client sends, the log line stays JSON. */
/* Amounts for people: the currency's exponent, the sign, no floating
 * point anywhere (INT64_MIN included). */
static void money_for_people(void **state)
{
    (void)state;
    static const struct {
        int64_t minor;
        const char *cur, *want;
    } cases[] = {
        {1, "CNY", "0.01 CNY"},
        {1280, "CNY", "12.80 CNY"},
        {-1, "CNY", "-0.01 CNY"},
        {-100, "USD", "-1.00 USD"},
        {0, "EUR", "0.00 EUR"},
        {1000, "JPY", "1000 JPY"},
        {-5, "KRW", "-5 KRW"},
        {INT64_C(100000000000000), "CNY", "1000000000000.00 CNY"},
        {INT64_MIN, "CNY", "-92233720368547758.08 CNY"},
        {7, NULL, "0.07 ?"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[PO_MONEY_MAX];
        po_money_format(cases[i].minor, cases[i].cur, buf, sizeof buf);
        assert_string_equal(buf, cases[i].want);
    }
    assert_int_equal(po_currency_exponent("JPY"), 0);
    assert_int_equal(po_currency_exponent("CNY"), 2);
    assert_true(po_since_valid("2026-12-01"));
    assert_true(po_since_valid("2026-12-01T08:00:00Z"));
    assert_false(po_since_valid("2026-12-01T08:00:00+08:00"));
    assert_false(po_since_valid("yesterday"));
}

/* RFC 3339 with its offset (time_expire): one instant however written;
 * everything else refused. */
static void times_with_offsets(void **state)
{
    (void)state;
    int64_t a = 0, b = 0, c = 0;
    assert_int_equal(po_time_parse("2026-12-04T18:00:00+08:00", &a), PO_OK);
    assert_int_equal(po_time_parse("2026-12-04T10:00:00Z", &b), PO_OK);
    assert_int_equal(po_time_parse("2026-12-04T05:30:00.250-04:30", &c), PO_OK);
    assert_int_equal(a, 1796378400);
    assert_int_equal(a, b);
    assert_int_equal(a, c);
    static const char *const bad[] = {"2026-12-04T18:00:00",
                                      "2026-12-04 18:00:00+08:00",
                                      "2026-02-31T10:00:00Z",
                                      "2026-13-01T10:00:00Z",
                                      "2026-12-04T24:00:00Z",
                                      "2026-12-04T18:00:00+8:00",
                                      "2026-12-04T18:00:00.Z",
                                      "2026-12-04T18:00:00Zjunk",
                                      "2026-12-04",
                                      "2026-12-04T18:00:00+08:60",
                                      "tomorrow",
                                      ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(po_time_parse(bad[i], &a), PO_ERR_INVALID);
}

static void json_escape_any_bytes(void **state)
{
    (void)state;
    char out[64];
    const char in[] = "/a\"b\\c\x01\xff\xe6\x94\xaf\xc0\xaf\xed\xa0\x80z";
    size_t n = po_json_escape(in, sizeof in - 1, out, sizeof out);
    assert_string_equal(out, "/a\\\"b\\\\c\\u0001\\\\xff\xe6\x94\xaf\\\\xc0\\\\xaf"
                             "\\\\xed\\\\xa0\\\\x80z");
    assert_int_equal(n, strlen(out));
    assert_true(po_utf8_valid(out, n));
    /* Cut at a whole escape, never inside one. */
    char small[16];
    n = po_json_escape("ab\xff", 3, small, 6);
    assert_string_equal(small, "ab");
    n = po_json_escape("ab\xff", 3, small, sizeof small);
    assert_string_equal(small, "ab\\\\xff");
    /* A NUL inside the given length is escaped, not an end. */
    n = po_json_escape("a\0b", 3, small, sizeof small);
    assert_string_equal(small, "a\\u0000b");
    assert_false(po_utf8_valid("\xc0\xaf", 2)); /* overlong */
    assert_false(po_utf8_valid("\xe6\x94", 2)); /* cut */
    assert_true(po_utf8_valid("\xf0\x9f\x98\x80", 4));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_i64_is_strict), cmocka_unit_test(json_escape_any_bytes),
        cmocka_unit_test(bounded_copies),      cmocka_unit_test(validation),
        cmocka_unit_test(money_for_people),    cmocka_unit_test(times_with_offsets),
    };
    return cmocka_run_group_tests_name("core", tests, NULL, NULL);
}
