/*
 * test_form.c — Alipay's form encoding (src/channel/form.c): percent and
 * '+' decoding, what a form may not contain (repeated keys, keys that are
 * not plain, broken escapes, too many fields), encoding that parses back to
 * the same bytes, and the RSA2 sign content: keys sorted bytewise, empty
 * values and `sign` left out, `sign_type` left out only for notifications.
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

static bool parse(const char *body, struct po_form *f)
{
    memset(f, 0, sizeof *f);
    return po_form_parse(body, strlen(body), f) == PO_OK;
}

static void decoding(void **state)
{
    (void)state;
    struct po_form f;
    assert_true(parse("a=1&subject=%E6%94%AF%E4%BB%98+ok&empty=&z=x%3Dy%26", &f));
    assert_int_equal(f.n, 4);
    assert_string_equal(po_form_get(&f, "a"), "1");
    assert_string_equal(po_form_get(&f, "subject"), "\xe6\x94\xaf\xe4\xbb\x98 ok");
    assert_string_equal(po_form_get(&f, "empty"), "");
    assert_string_equal(po_form_get(&f, "z"), "x=y&");
    assert_null(po_form_get(&f, "missing"));
    po_form_free(&f);
    /* Empty pairs between '&' are skipped, as servers do. */
    assert_true(parse("a=1&&b=2&", &f));
    assert_int_equal(f.n, 2);
    po_form_free(&f);
}

static void refusals(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",         /* nothing */
        "a",        /* no '=' */
        "=1",       /* no key */
        "a=1&a=2",  /* a repeated key */
        "a=%zz",    /* a broken escape */
        "a=%4",     /* a cut escape */
        "k%20ey=1", /* a key that is not a plain name */
        "k%00=1",   /* NUL in a key */
        "k=1%002",  /* NUL in a value: bytes after it would escape C string handling */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct po_form f;
        if (parse(bad[i], &f))
            fail_msg("'%s' parsed", bad[i]);
        po_form_free(&f);
    }
    /* At most PO_FORM_PARAMS_MAX fields. */
    char body[4096];
    size_t j = 0;
    for (int i = 0; i <= PO_FORM_PARAMS_MAX; i++)
        j += (size_t)snprintf(body + j, sizeof body - j, "%sk%d=v", i ? "&" : "", i);
    struct po_form f;
    assert_false(parse(body, &f));
    po_form_free(&f);
}

static void encode_parses_back(void **state)
{
    (void)state;
    struct po_form f = {0}, g;
    assert_int_equal(po_form_add(&f, "biz_content", "{\"out_trade_no\":\"A 1&2\",\"x\":\"+%\"}"),
                     PO_OK);
    assert_int_equal(po_form_add(&f, "subject", "\xe6\x94\xaf\xe4\xbb\x98"), PO_OK);
    assert_int_equal(po_form_add(&f, "subject", "again"), PO_ERR_INVALID); /* repeated */
    size_t len = 0;
    char *body = po_form_encode(&f, &len);
    assert_non_null(body);
    assert_int_equal(len, strlen(body));
    assert_null(strpbrk(body, " \"{}")); /* escaped; a space is "+" */
    assert_non_null(strchr(body, '+'));
    assert_true(parse(body, &g));
    assert_int_equal(g.n, 2);
    assert_string_equal(po_form_get(&g, "biz_content"), po_form_get(&f, "biz_content"));
    assert_string_equal(po_form_get(&g, "subject"), po_form_get(&f, "subject"));
    free(body);
    po_form_free(&f);
    po_form_free(&g);
}

static void sign_content(void **state)
{
    (void)state;
    struct po_form f;
    assert_true(parse("trade_no=T1&sign=SIG&app_id=2021&sign_type=RSA2&empty=&buyer_id=2088", &f));
    size_t ln = 0, lr = 0, lk = 0;
    char *notify = po_alipay_sign_content(&f, true, false, &ln);
    char *request = po_alipay_sign_content(&f, false, false, &lr);
    char *node = po_alipay_sign_content(&f, true, true, &lk);
    assert_int_equal(ln, strlen(notify));
    assert_int_equal(lr, strlen(request));
    assert_int_equal(lk, strlen(node));
    assert_string_equal(notify, "app_id=2021&buyer_id=2088&trade_no=T1");
    assert_string_equal(request, "app_id=2021&buyer_id=2088&sign_type=RSA2&trade_no=T1");
    assert_string_equal(node, "app_id=2021&buyer_id=2088&empty=&trade_no=T1");
    free(notify);
    free(request);
    free(node);
    po_form_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decoding),
        cmocka_unit_test(refusals),
        cmocka_unit_test(encode_parses_back),
        cmocka_unit_test(sign_content),
    };
    return cmocka_run_group_tests_name("form", tests, NULL, NULL);
}
