/* test_core.c — strict parsing, bounded strings and validation. */
#include "../support/testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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
    /* fees: thousandths of the minor unit, in major units, the finer
     * digits only when not zero */
    static const struct {
        int64_t amount;
        int fine;
        const char *cur, *want;
    } fine[] = {
        {11000, 3, "CNY", "0.11 CNY"},      {11500, 3, "CNY", "0.115 CNY"},
        {11, 3, "CNY", "0.00011 CNY"},      {0, 3, "CNY", "0.00 CNY"},
        {-8000, 3, "CNY", "-0.08 CNY"},     {1000, 3, "JPY", "1 JPY"},
        {1500, 3, "JPY", "1.5 JPY"},        {69629000, 3, "USD", "696.29 USD"},
        {1280, 0, "CNY", "12.80 CNY"},      {INT64_MIN, 3, "CNY", "-92233720368547.75808 CNY"},
        {123456, 6, "KRW", "0.123456 KRW"},
    };
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        char buf[PO_MONEY_MAX];
        po_money_format_fine(fine[i].amount, fine[i].fine, fine[i].cur, buf, sizeof buf);
        assert_string_equal(buf, fine[i].want);
    }
    /* amounts a query wrote {MINOR CUR}, said for a person */
    char said[128];
    po_money_expand("postings {-100 CNY} cached {-95 CNY}", said, sizeof said);
    assert_string_equal(said, "postings -1.00 CNY cached -0.95 CNY");
    po_money_expand("order {1000 JPY}, {x CNY} {5 CN} {6 EUR } {7 USD", said, sizeof said);
    assert_string_equal(said, "order 1000 JPY, {x CNY} {5 CN} {6 EUR } {7 USD");
    po_money_expand("sum {12 EUR}", said, 8); /* cut, still a string */
    assert_string_equal(said, "sum 0.1");
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

/* The checks of path_causes that need a user without root's rights: plain
 * checks, not cmocka's (they run in a forked child too); how many failed. */
static int path_denied(const char *dir)
{
    char path[512], why[512];
    int bad = 0;
#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "path_denied: %s: got '%s'\n", #cond, why);                            \
            bad++;                                                                                 \
        }                                                                                          \
    } while (0)
    (void)snprintf(path, sizeof path, "%s/closed/db", dir);
    EXPECT(po_path_why(path, false, why, sizeof why));
    EXPECT(strstr(why, "permission denied (the directory ") && strstr(why, "/closed is 0700 ") &&
           strstr(why, "; you are "));
    (void)snprintf(path, sizeof path, "%s/ro/new.db", dir);
    EXPECT(po_path_why(path, true, why, sizeof why) && strstr(why, "/ro is 0555 "));
    EXPECT(po_path_why(path, false, why, sizeof why) && strcmp(why, "no such file") == 0);
    (void)snprintf(path, sizeof path, "%s/ro/old.db", dir); /* there, but nothing beside it */
    EXPECT(!po_path_why(path, false, why, sizeof why));
    EXPECT(po_path_why(path, true, why, sizeof why) && strstr(why, "the directory ") &&
           strstr(why, "/ro is 0555 "));
    (void)snprintf(path, sizeof path, "%s/secret", dir);
    EXPECT(po_path_why(path, false, why, sizeof why) &&
           strstr(why, "permission denied (the file is 0600 "));
    char *buf = NULL;
    size_t len = 0;
    po_err rc = po_file_read(path, 100, &buf, &len);
    EXPECT(rc != PO_OK);
    po_file_why(path, rc, why, sizeof why);
    EXPECT(strstr(why, "permission denied (the file is 0600 "));
#undef EXPECT
    return bad;
}

/* An empty file dir/name of that mode. */
static void touch(const char *dir, const char *name, mode_t mode)
{
    char path[512];
    (void)snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

/* Why a path cannot be opened, from the path itself (issue 45): a missing
 * directory, one that is not a directory, a directory where a file should
 * be, no search or write permission on the way, an unreadable file. */
static void path_causes(void **state)
{
    (void)state;
    char dir[] = "/tmp/po_core_XXXXXX", path[512], why[512];
    assert_non_null(mkdtemp(dir));
    (void)snprintf(path, sizeof path, "%s/nodir/x.db", dir);
    assert_true(po_path_why(path, true, why, sizeof why));
    assert_non_null(strstr(why, "no such directory "));
    assert_non_null(strstr(why, "/nodir"));
    (void)snprintf(path, sizeof path, "%s/x.db", dir);
    assert_true(po_path_why(path, false, why, sizeof why));
    assert_string_equal(why, "no such file");
    touch(dir, "x.db", 0600);
    assert_false(po_path_why(path, true, why, sizeof why)); /* nothing wrong with it */
    assert_string_equal(why, "");
    (void)snprintf(path, sizeof path, "%s/x.db/y", dir);
    assert_true(po_path_why(path, false, why, sizeof why));
    assert_non_null(strstr(why, "/x.db is not a directory"));
    assert_true(po_path_why(dir, false, why, sizeof why));
    assert_string_equal(why, "a directory, not a file");
    char *buf = NULL;
    size_t len = 0;
    (void)snprintf(path, sizeof path, "%s/none", dir);
    po_err rc = po_file_read(path, 100, &buf, &len);
    po_file_why(path, rc, why, sizeof why);
    assert_string_equal(why, "no such file");
    po_file_why(path, PO_ERR_LIMIT, why, sizeof why);
    assert_string_equal(why, "too large");
    /* permissions: as a user other than root (root passes every check) */
    (void)snprintf(path, sizeof path, "%s/closed", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    touch(dir, "closed/db", 0600);
    (void)snprintf(path, sizeof path, "%s/ro", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    touch(dir, "ro/old.db", 0666);
    assert_int_equal(chmod(path, 0555), 0);
    touch(dir, "secret", 0600);
    assert_int_equal(chmod(dir, 0755), 0);
    if (geteuid() == 0) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            /* nobody: a failed assertion in here exits non-zero */
            if (setgid(65534) != 0 || setuid(65534) != 0)
                _exit(2);
            _exit(path_denied(dir) ? 1 : 0);
        }
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    } else {
        assert_int_equal(path_denied(dir), 0);
    }
    char cmd[600];
    (void)snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_i64_is_strict), cmocka_unit_test(json_escape_any_bytes),
        cmocka_unit_test(bounded_copies),      cmocka_unit_test(validation),
        cmocka_unit_test(money_for_people),    cmocka_unit_test(times_with_offsets),
        cmocka_unit_test(path_causes),
    };
    return cmocka_run_group_tests_name("core", tests, NULL, NULL);
}
