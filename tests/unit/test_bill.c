/*
 * test_bill.c — the WeChat Pay trade bill parser (the channel's bill
 * format): the real bill of shared/vectors parses exactly (45 rows, 31
 * payments, 14 refunds, amounts and fees to the last 0.00001 yuan), with
 * CRLF or LF line ends and with or without its BOM, and every way a bill can be damaged —
 * truncated, a summary that disagrees, a malformed amount, a missing
 * column, a field without its backtick — refuses the whole file with the
 * line and the reason. And the download's check: the gzip file WeChat Pay
 * serves (tar_type=GZIP) inflates to the bill whose SHA-1 tradebill named,
 * or is refused whole (truncated, trailing bytes, another hash).
 */
#include "../../src/channel/channel.h"

#include <jansson.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <iconv.h>
#include <unistd.h>
#include <zip.h>
#include <zlib.h>

static char *vector;
static size_t vector_len;

static int load(void **state)
{
    (void)state;
    return po_file_read(PO_TEST_DATA_DIR "/vectors/wechatpay_tradebill_all.csv", 1 << 20, &vector,
                        &vector_len) == PO_OK
               ? 0
               : -1;
}

static int unload(void **state)
{
    (void)state;
    free(vector);
    return 0;
}

static po_err parse(const char *data, size_t len, struct po_bill *b, char *err)
{
    const struct po_channel_ops *wx = po_channel_find("wechatpay");
    assert_non_null(wx);
    assert_non_null(wx->bill_parse);
    memset(b, 0, sizeof *b);
    return wx->bill_parse(data, len, b, err, PO_ERRBUF_SIZE);
}

static void the_real_bill(void **state)
{
    (void)state;
    struct po_bill b;
    char err[PO_ERRBUF_SIZE] = "";
    assert_int_equal(parse(vector, vector_len, &b, err), PO_OK);
    assert_int_equal(b.nrows, 45);
    int pays = 0, refunds = 0;
    int64_t paid = 0, refunded = 0, fees = 0;
    for (int i = 0; i < b.nrows; i++) {
        const struct po_bill_row *r = &b.rows[i];
        assert_string_equal(r->mchid, "1921000401");
        assert_string_equal(r->currency, "CNY");
        fees += r->fee_milli;
        if (r->kind == PO_BILL_PAY) {
            pays++;
            paid += r->amount;
        } else {
            refunds++;
            refunded += r->amount;
            assert_true(r->refund_id[0] && r->out_refund_no[0]);
        }
    }
    assert_int_equal(pays, 31);
    assert_int_equal(refunds, 14);
    assert_int_equal(paid, 47);     /* 0.47 yuan: the summary's 应结订单总金额 */
    assert_int_equal(refunded, 14); /* 0.14 yuan: 退款总金额 */
    assert_int_equal(fees, 8000);   /* 0.08000 yuan in thousandths of a fen */
    assert_string_equal(b.period_start, "2019-02-19");
    assert_string_equal(b.period_end, "2019-02-19");
    po_bill_free(&b);
}

/* A copy of the vector with every "from" replaced by "to" (at most once
 * when once is set). */
static char *variant(const char *from, const char *to, bool once, size_t *len)
{
    size_t fl = strlen(from), tl = strlen(to), n = 0;
    char *out = malloc(vector_len * 2 + 64);
    assert_non_null(out);
    const char *p = vector, *end = vector + vector_len;
    bool done = false;
    while (p < end) {
        if (!done && (size_t)(end - p) >= fl && memcmp(p, from, fl) == 0) {
            memcpy(out + n, to, tl);
            n += tl;
            p += fl;
            done = once;
        } else {
            out[n++] = *p++;
        }
    }
    out[n] = '\0';
    *len = n;
    return out;
}

static void line_endings_and_bom(void **state)
{
    (void)state;
    size_t len;
    struct po_bill b;
    char err[PO_ERRBUF_SIZE] = "";
    /* The vector has CRLF line ends, as WeChat Pay sends them; LF alone too. */
    assert_non_null(strstr(vector, "\r\n"));
    char *lf = variant("\r\n", "\n", false, &len);
    if (parse(lf, len, &b, err) != PO_OK)
        fail_msg("LF: %s", err);
    assert_int_equal(b.nrows, 45);
    po_bill_free(&b);
    free(lf);
    char *nobom = variant("\xef\xbb\xbf", "", true, &len);
    if (parse(nobom, len, &b, err) != PO_OK)
        fail_msg("no BOM: %s", err);
    assert_int_equal(b.nrows, 45);
    po_bill_free(&b);
    free(nobom);
}

static void damaged_bills_are_refused(void **state)
{
    (void)state;
    struct {
        const char *from, *to, *why;
    } cases[] = {
        {"`45.0,", "`46.0,", "count disagrees with the rows"},
        {"`0.47,`0.14,", "`0.48,`0.14,", "settled total disagrees"},
        {",`0.08,", ",`0.09,", "fee total disagrees"},
        {"`0.03,`0.00,`0,", "`0.0x,`0.00,`0,", "a malformed amount"},
        {"`0.03,`0.00,`0,", "`0.031,`0.00,`0,", "three decimals"},
        {",`JSAPI,", ",JSAPI,", "a field without its backtick"},
        {"总交易单数", "总交易数", "no summary header"},
        {",`autotest,`,", ",`autotest,", "a missing column"},
        /* Found by fuzzing for 150 s (issue 27): 16 digits of fee scaled
         * by 10^5 overflowed int64 (undefined behaviour; wrapped silently
         * in a release build). Refused before the multiplication. */
        {",`0.01000,`39.00%", ",`4200000263200000,`39.00%", "a fee that overflows when scaled"},
        {"`0.03,`0.00,`0,", "`9223372036854775807,`0.00,`0,", "an amount past int64"},
        {"`0.03,`0.00,`0,", "`999999999999999.99,`0.00,`0,", "an amount past the bound"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;
        char *bad = variant(cases[i].from, cases[i].to, true, &len);
        struct po_bill b;
        char err[PO_ERRBUF_SIZE] = "";
        if (strcmp(bad, vector) == 0)
            fail_msg("case %zu (%s): the mutation did not apply", i, cases[i].why);
        if (parse(bad, len, &b, err) == PO_OK)
            fail_msg("case %zu (%s): parsed", i, cases[i].why);
        if (!err[0])
            fail_msg("case %zu (%s): no reason given", i, cases[i].why);
        assert_int_equal(b.nrows, 0); /* nothing handed out */
        free(bad);
    }
    /* Found by fuzz_bill: a payment of 0.00 whose summary agrees (the
     * order total lowered by the same 0.03) was handed out as a payment
     * of zero. Refused, by line. */
    size_t len;
    char *zero = variant("`39.00%,`0.03,`0.00,`", "`39.00%,`0.00,`0.00,`", true, &len);
    char *p = strstr(zero, ",`0.08,`0.47,`0.14");
    assert_non_null(p);
    memcpy(p, ",`0.08,`0.44,`0.14", strlen(",`0.08,`0.44,`0.14"));
    struct po_bill zb;
    char zerr[PO_ERRBUF_SIZE] = "";
    assert_int_not_equal(parse(zero, len, &zb, zerr), PO_OK);
    if (!strstr(zerr, "positive amount"))
        fail_msg("a payment of zero: '%s'", zerr);
    free(zero);
    /* Truncated anywhere before the summary row ends: refused. */
    for (size_t cut = 0; cut < vector_len - 1; cut += vector_len / 40) {
        struct po_bill b;
        char err[PO_ERRBUF_SIZE] = "";
        if (parse(vector, cut, &b, err) == PO_OK)
            fail_msg("truncated at %zu of %zu: parsed", cut, vector_len);
    }
}

/* The vector bill gzip-compressed, as the download serves it. */
static unsigned char *gz(size_t *n)
{
    uLong cap = compressBound((uLong)vector_len) + 64;
    unsigned char *out = malloc(cap);
    z_stream z;
    memset(&z, 0, sizeof z);
    assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (unsigned char *)vector;
    z.avail_in = (uInt)vector_len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    *n = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

static void gzip_download_checked(void **state)
{
    (void)state;
    size_t n = 0, len = 0;
    unsigned char *z = gz(&n);
    char sha[41], why[64] = "", *out = NULL;
    assert_int_equal(po_sha1_hex(vector, vector_len, sha), PO_OK);
    /* whole, the hash in either case: the bill itself */
    assert_int_equal(po_wechatpay_bill_unpack((char *)z, n, sha, &out, &len, why, sizeof why),
                     PO_OK);
    assert_int_equal(len, vector_len);
    assert_memory_equal(out, vector, len);
    free(out);
    for (char *p = sha; *p; p++)
        *p = (char)((*p >= 'a' && *p <= 'f') ? *p - 32 : *p);
    assert_int_equal(po_wechatpay_bill_unpack((char *)z, n, sha, &out, &len, why, sizeof why),
                     PO_OK);
    free(out);
    /* truncated anywhere: refused, nothing out */
    size_t cuts[] = {n - 1, n - 8, n / 2, 10};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        out = NULL;
        assert_int_equal(
            po_wechatpay_bill_unpack((char *)z, cuts[i], sha, &out, &len, why, sizeof why),
            PO_ERR_INVALID);
        assert_null(out);
    }
    /* bytes after the stream */
    unsigned char *more = malloc(n + 4);
    memcpy(more, z, n);
    memcpy(more + n, "junk", 4);
    assert_int_equal(
        po_wechatpay_bill_unpack((char *)more, n + 4, sha, &out, &len, why, sizeof why),
        PO_ERR_INVALID);
    assert_string_equal(why, "bad_gzip");
    free(more);
    /* a hash that is not the bill's: another file, or one changed on the way */
    char other[41];
    memcpy(other, sha, sizeof other);
    other[0] = other[0] == '0' ? '1' : '0';
    assert_int_equal(po_wechatpay_bill_unpack((char *)z, n, other, &out, &len, why, sizeof why),
                     PO_ERR_INVALID);
    assert_string_equal(why, "hash_mismatch");
    assert_null(out);
    /* not gzip at all */
    assert_int_equal(po_wechatpay_bill_unpack(vector, vector_len, sha, &out, &len, why, sizeof why),
                     PO_ERR_INVALID);
    free(z);
}

/* ---- Alipay: the zip of GBK CSVs ---- */

static char *to_gbk(const char *in, size_t len, size_t *out_len)
{
    iconv_t cd = iconv_open("GBK", "UTF-8");
    assert_true(cd != (iconv_t)-1);
    size_t cap = len + 16, left_in = len, left_out = cap;
    char *out = malloc(cap), *src = (char *)(uintptr_t)in, *dst = out;
    assert_true(iconv(cd, &src, &left_in, &dst, &left_out) != (size_t)-1);
    iconv_close(cd);
    *out_len = cap - left_out;
    return out;
}

/* A zip holding data (and a summary file beside it), as Alipay serves. */
static char *zip1(const char *data, size_t len, size_t *zlen)
{
    char path[] = "/tmp/payonce-test-zip-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    int e = 0;
    zip_t *z = zip_open(path, ZIP_TRUNCATE, &e);
    assert_non_null(z);
    static const char summary[] = "#\xd6\xa7\xb8\xb6\xb1\xa6\r\n"; /* GBK, not a detail */
    zip_source_t *a = zip_source_buffer(z, summary, sizeof summary - 1, 0),
                 *b = zip_source_buffer(z, data, len, 0);
    assert_true(zip_file_add(z, "summary.csv", a, 0) >= 0);
    assert_true(zip_file_add(z, "detail.csv", b, 0) >= 0);
    assert_int_equal(zip_close(z), 0);
    char *out = NULL;
    assert_int_equal(po_file_read(path, 1 << 20, &out, zlen), PO_OK);
    unlink(path);
    return out;
}

static char *alipay_vector(size_t *len)
{
    char *v = NULL;
    assert_int_equal(
        po_file_read(PO_TEST_DATA_DIR "/vectors/alipay/trade_bill_detail.csv", 1 << 20, &v, len),
        PO_OK);
    return v;
}

static void alipay_bill_parsed(void **state)
{
    (void)state;
    size_t len = 0, gl = 0, zl = 0;
    char *v = alipay_vector(&len), *gbk = to_gbk(v, len, &gl), *zip = zip1(gbk, gl, &zl);
    const struct po_channel_ops *ali = po_channel_find("alipay");
    char err[256] = "";
    /* the zip as downloaded, the GBK detail, and the UTF-8 one: the same */
    const char *in[] = {zip, gbk, v};
    size_t lens[] = {zl, gl, len};
    for (int k = 0; k < 3; k++) {
        struct po_bill b = {0};
        assert_int_equal(ali->bill_parse(in[k], lens[k], &b, err, sizeof err), PO_OK);
        assert_int_equal(b.nrows, 10);
        int pays = 0, refunds = 0;
        int64_t paid = 0, refunded = 0;
        for (int i = 0; i < b.nrows; i++) {
            assert_string_equal(b.rows[i].mchid, "2088021109625633");
            if (b.rows[i].kind == PO_BILL_PAY)
                pays++, paid += b.rows[i].amount;
            else
                refunds++, refunded += b.rows[i].amount;
        }
        assert_int_equal(pays, 6);
        assert_int_equal(refunds, 4);
        assert_int_equal(paid, 6);
        assert_int_equal(refunded, 4);
        /* ids without their tab; a refund keyed as its notification */
        assert_string_equal(b.rows[0].txn, "2019091622001458860515315453");
        assert_string_equal(b.rows[0].out_trade_no, "service_1568601259302");
        assert_string_equal(b.rows[1].out_refund_no, "re_test_1568602607356");
        assert_string_equal(b.rows[1].refund_id,
                            "2019091622001458860515315453_re_test_1568602607356");
        assert_string_equal(b.period_start, "2019-09-16");
        po_bill_free(&b);
    }
    /* refused whole: totals that disagree, a truncated archive, a file cut
     * before its totals */
    char *bad = strdup(v);
    char *at = strstr(bad, "6笔");
    assert_non_null(at);
    *at = '7';
    struct po_bill b = {0};
    assert_int_equal(ali->bill_parse(bad, strlen(bad), &b, err, sizeof err), PO_ERR_INVALID);
    assert_non_null(strstr(err, "totals"));
    assert_int_equal(ali->bill_parse(zip, zl - 30, &b, err, sizeof err), PO_ERR_INVALID);
    assert_int_equal(ali->bill_parse(zip, zl / 2, &b, err, sizeof err), PO_ERR_INVALID);
    char *cut = strstr(bad, "#-----------------------------------------业务明细列表结束");
    assert_non_null(cut);
    *cut = '\0';
    assert_int_equal(ali->bill_parse(bad, strlen(bad), &b, err, sizeof err), PO_ERR_INVALID);
    /* a bit changed anywhere in the archive: refused, or (a header's date,
     * a file name) the same bill — never a different one */
    int refused = 0;
    for (size_t i = 0; i < zl; i++) {
        zip[i] ^= 0x04;
        struct po_bill f = {0};
        po_err rc = ali->bill_parse(zip, zl, &f, err, sizeof err);
        zip[i] ^= 0x04;
        if (rc) {
            refused++;
            continue;
        }
        int64_t sum = 0;
        for (int r = 0; r < f.nrows; r++)
            sum += f.rows[r].amount;
        if (f.nrows != 10 || sum != 10 ||
            strcmp(f.rows[0].txn, "2019091622001458860515315453") != 0)
            fail_msg("byte %zu of %zu changed: a different bill parsed (%d rows)", i, zl, f.nrows);
        po_bill_free(&f);
    }
    assert_true(refused > (int)zl / 2);
    free(bad);
    free(zip);
    free(gbk);
    free(v);
}

/* ---- Stripe: a day of balance transactions ---- */

static void stripe_day_parsed(void **state)
{
    (void)state;
    json_error_t e;
    json_t *v =
        json_load_file(PO_TEST_DATA_DIR "/vectors/stripe/balance_transactions_list.json", 0, &e);
    assert_non_null(v);
    json_t *list = json_object_get(json_object_get(v, "response"), "data");
    assert_true(json_is_array(list));
    json_t *day = json_pack("{s:s, s:s, s:O}", "object", "payonce_stripe_day", "date", "2009-02-13",
                            "data", list);
    const struct po_channel_ops *st = po_channel_find("stripe");
    char err[256] = "", *text = json_dumps(day, JSON_COMPACT);
    struct po_bill b = {0};
    /* as listed without expand[]=data.source: refused, the sources unnamed */
    assert_int_equal(st->bill_parse(text, strlen(text), &b, err, sizeof err), PO_ERR_INVALID);
    assert_non_null(strstr(err, "expand"));
    free(text);
    /* expanded (what payonce asks for): two charges of one PaymentIntent's
     * charge and the refund, mapped by their metadata */
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(day, "data"), i, t)
    {
        const char *src = json_string_value(json_object_get(t, "source"));
        bool refund = strncmp(src, "re_", 3) == 0;
        json_t *o =
            json_pack("{s:s, s:s, s:s, s:{s:s}}", "id", src, "object", refund ? "refund" : "charge",
                      "payment_intent", "pi_vector1", "metadata", "out_trade_no", "V-1");
        if (refund)
            json_object_set_new(json_object_get(o, "metadata"), "out_refund_no",
                                json_string("VR-1"));
        json_object_set_new(t, "source", o);
    }
    text = json_dumps(day, JSON_COMPACT);
    assert_int_equal(st->bill_parse(text, strlen(text), &b, err, sizeof err), PO_OK);
    assert_int_equal(b.nrows, 3);
    assert_int_equal(b.rows[0].kind, PO_BILL_REFUND);
    assert_int_equal(b.rows[0].amount, 100);
    assert_string_equal(b.rows[0].refund_id, "re_1Pgc72B7WZ01zgkWqPvrRrPE");
    assert_string_equal(b.rows[0].out_refund_no, "VR-1");
    assert_int_equal(b.rows[1].kind, PO_BILL_PAY);
    assert_int_equal(b.rows[1].amount, 1099);
    assert_int_equal(b.rows[1].fee_milli, 62000);
    assert_string_equal(b.rows[1].txn, "pi_vector1");
    assert_string_equal(b.rows[1].currency, "USD");
    po_bill_free(&b);
    free(text);
    /* Stripe's arithmetic broken in one row: the day refused whole */
    json_object_set_new(json_array_get(json_object_get(day, "data"), 1), "net", json_integer(1036));
    text = json_dumps(day, JSON_COMPACT);
    assert_int_equal(st->bill_parse(text, strlen(text), &b, err, sizeof err), PO_ERR_INVALID);
    assert_non_null(strstr(err, "arithmetic"));
    free(text);
    json_decref(day);
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_real_bill),
        cmocka_unit_test(line_endings_and_bom),
        cmocka_unit_test(damaged_bills_are_refused),
        cmocka_unit_test(gzip_download_checked),
        cmocka_unit_test(alipay_bill_parsed),
        cmocka_unit_test(stripe_day_parsed),
    };
    return cmocka_run_group_tests_name("bill", tests, load, unload);
}
