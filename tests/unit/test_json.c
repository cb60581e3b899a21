/*
 * test_json.c — the parser of JSON from outside (src/channel/json.c):
 * what it accepts and how (values equal to what jansson makes of the same
 * text), what it refuses and with which error, and the reason it exists:
 * with jansson's allocations failing one at a time (the k-th, for every k)
 * it reports PO_ERR_NOMEM — never a syntax error, never a crash, nothing
 * leaked (ASan) — where json_loadb of Debian 12 reads past its buffer.
 */
#include "../../src/channel/channel.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static po_err parse(const char *text, json_t **out)
{
    char err[PO_ERRBUF_SIZE];
    *out = NULL;
    return po_json_parse(text, strlen(text), out, err, sizeof err);
}

static void accepts_what_jansson_makes(void **state)
{
    (void)state;
    static const char *ok[] = {
        "{}",
        "[]",
        " \t\r\n{\"a\" : 1 } \n",
        "{\"mchid\":\"1230000109\",\"amount\":{\"total\":990,\"currency\":\"CNY\"}}",
        "[0,-0,1.5,-2.25e-3,1E+2,9223372036854775807,-9223372036854775808]",
        "[\"\\u00e9\\ud83d\\ude00\\n\\t\\\"\\\\\\/\\b\\f\\r\",\"\xe6\x94\xaf\xe4\xbb\x98\"]",
        "[true,false,null,{\"\":[]},[[]]]",
        "[0.00000000000000000000000000000000000000000000000000000000000000000000001]",
    };
    for (int i = 0; i < PO_NELEM(ok); i++) {
        json_t *v = NULL;
        assert_int_equal(parse(ok[i], &v), PO_OK);
        json_t *ref = json_loads(ok[i], JSON_REJECT_DUPLICATES, NULL);
        assert_non_null(ref);
        assert_true(json_equal(v, ref));
        json_decref(v);
        json_decref(ref);
    }
    json_t *v = NULL;
    assert_int_equal(parse("{\"s\":\"\\u6210\\u529f\",\"n\":-42}", &v), PO_OK);
    assert_string_equal(json_string_value(json_object_get(v, "s")), "\xe6\x88\x90\xe5\x8a\x9f");
    assert_int_equal(json_integer_value(json_object_get(v, "n")), -42);
    json_decref(v);
}

static void refuses_with_a_reason(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        po_err rc;
        const char *why;
    } bad[] = {
        {"", PO_ERR_INVALID, "object or array expected"},
        {"\"just a string\"", PO_ERR_INVALID, "object or array expected"},
        {"42", PO_ERR_INVALID, "object or array expected"},
        {"{\"a\":1", PO_ERR_INVALID, "'}' expected"},
        {"{\"a\":1,}", PO_ERR_INVALID, "key expected"},
        {"[1,]", PO_ERR_INVALID, "invalid number"},
        {"{\"a\":1,\"a\":2}", PO_ERR_INVALID, "duplicate object key at byte 7"},
        {"{\"a\":1} x", PO_ERR_INVALID, "text after"},
        {"[01]", PO_ERR_INVALID, "']' expected"},
        {"[1.]", PO_ERR_INVALID, "invalid number"},
        {"[-]", PO_ERR_INVALID, "invalid number"},
        {"[+1]", PO_ERR_INVALID, "invalid number"},
        {"[9223372036854775808]", PO_ERR_INVALID, "integer out of range"},
        {"[1e999]", PO_ERR_INVALID, "real out of range"},
        {"[\"a\\u0000b\"]", PO_ERR_INVALID, "NUL in string"},
        {"[\"\\ud800\"]", PO_ERR_INVALID, "invalid escape"},
        {"[\"\\udc00\\ud800\"]", PO_ERR_INVALID, "invalid escape"},
        {"[\"\\x41\"]", PO_ERR_INVALID, "invalid escape"},
        {"[\"\\u12g4\"]", PO_ERR_INVALID, "invalid escape"},
        {"[\"tab\there\"]", PO_ERR_INVALID, "control character"},
        {"[\"\xff\"]", PO_ERR_INVALID, "invalid UTF-8"},
        {"[\"\xed\xa0\x80\"]", PO_ERR_INVALID, "invalid UTF-8"}, /* an encoded surrogate */
        {"[\"\xc0\xaf\"]", PO_ERR_INVALID, "invalid UTF-8"},     /* overlong '/' */
        {"[\"open", PO_ERR_INVALID, "unterminated string"},
        {"[tru]", PO_ERR_INVALID, "bad literal"},
        {"[nul", PO_ERR_INVALID, "bad literal"},
        {"{1:2}", PO_ERR_INVALID, "key expected"},
        {"{\"a\" 1}", PO_ERR_INVALID, "':' expected"},
        {"[1 2]", PO_ERR_INVALID, "']' expected"},
    };
    for (int i = 0; i < PO_NELEM(bad); i++) {
        json_t *v = NULL;
        char err[PO_ERRBUF_SIZE] = "";
        po_err rc = po_json_parse(bad[i].text, strlen(bad[i].text), &v, err, sizeof err);
        if (rc != bad[i].rc || !strstr(err, bad[i].why))
            fail_msg("%s: got %s \"%s\", want %s \"%s\"", bad[i].text, po_err_name(rc), err,
                     po_err_name(bad[i].rc), bad[i].why);
        assert_null(v);
    }
    /* Raw NUL bytes are not whitespace (jansson stops reading at one). */
    json_t *v = NULL;
    assert_int_equal(po_json_parse("[1]\0", 4, &v, NULL, 0), PO_ERR_INVALID);
    assert_int_equal(po_json_parse("[1\0]", 4, &v, NULL, 0), PO_ERR_INVALID);
    assert_null(v);
}

static void nesting_is_bounded(void **state)
{
    (void)state;
    char deep[2 * (PO_JSON_DEPTH_MAX + 1) + 1];
    for (int open = PO_JSON_DEPTH_MAX; open <= PO_JSON_DEPTH_MAX + 1; open++) {
        for (int i = 0; i < open; i++) {
            deep[i] = '[';
            deep[open + i] = ']';
        }
        deep[2 * open] = '\0';
        json_t *v = NULL;
        char err[PO_ERRBUF_SIZE] = "";
        po_err rc = po_json_parse(deep, strlen(deep), &v, err, sizeof err);
        if (open <= PO_JSON_DEPTH_MAX) {
            assert_int_equal(rc, PO_OK);
            json_decref(v);
        } else {
            assert_int_equal(rc, PO_ERR_LIMIT);
            assert_non_null(strstr(err, "nesting too deep"));
        }
    }
}

/* jansson's allocator, failing its k-th allocation. */
static int allocs, fail_at = -1;
static void *failing_malloc(size_t n)
{
    return allocs++ == fail_at ? NULL : malloc(n);
}

static void allocation_failures_are_nomem(void **state)
{
    (void)state;
    /* A WeChat Pay callback's decrypted resource: json_loadb of jansson
     * 2.14 crashes (ASan: SEGV) when its 12th allocation fails on it. */
    static const char doc[] =
        "{\"mchid\":\"1230000109\",\"out_trade_no\":\"ORD-9\",\"transaction_id\":\"4200000009\","
        "\"trade_state\":\"SUCCESS\",\"payer\":{\"openid\":\"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o\"},"
        "\"amount\":{\"total\":990,\"currency\":\"CNY\"},\"list\":[1,2.5,\"x\",null,true]}";
    json_set_alloc_funcs(failing_malloc, free);
    int k = 0, nomem = 0;
    for (;; k++) {
        allocs = 0;
        fail_at = k;
        json_t *v = NULL;
        char err[PO_ERRBUF_SIZE] = "";
        po_err rc = po_json_parse(doc, sizeof doc - 1, &v, err, sizeof err);
        if (allocs <= k) { /* nothing failed: the whole document */
            assert_int_equal(rc, PO_OK);
            assert_int_equal(
                json_integer_value(json_object_get(json_object_get(v, "amount"), "total")), 990);
            json_decref(v);
            break;
        }
        if (rc != PO_ERR_NOMEM)
            fail_msg("allocation %d failed: got %s (%s), want NOMEM", k, po_err_name(rc), err);
        assert_null(v);
        nomem++;
    }
    json_set_alloc_funcs(malloc, free);
    assert_true(nomem > 20); /* every object, key, string and number allocates */
    print_message("json: %d allocation failures, each reported as out of memory\n", nomem);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepts_what_jansson_makes),
        cmocka_unit_test(refuses_with_a_reason),
        cmocka_unit_test(nesting_is_bounded),
        cmocka_unit_test(allocation_failures_are_nomem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
