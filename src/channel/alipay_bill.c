/*
 * alipay_bill.c — Alipay's daily trade bill (业务明细), as
 * alipay.data.dataservice.bill.downloadurl.query hands it out: a zip of GBK
 * CSV files, the detail (…_业务明细.csv) and its summary (…(汇总).csv).
 *
 * The detail: header lines starting with '#' (the account, "#账号：[<PID>0156]",
 * and the period), a line naming the columns (支付宝交易号, 商户订单号,
 * 业务类型, 完成时间, 订单金额（元）, 商家实收（元）, 退款批次号/请求号,
 * 服务费（元）, found by name), one line per trade (业务类型 交易) or refund
 * (退款, negative amounts, its request number), ids padded with a tab; then
 * '#' lines: the end of the list and the totals ("#交易合计：N笔，商家实收共X元",
 * "#退款合计：M笔，商家实收退款共-Y元"), which must agree with the rows, or the
 * whole file is refused.
 *
 * payonce reads the zip as downloaded (libzip; the detail is the entry whose
 * column line names 支付宝交易号; GBK is converted with iconv), or the detail
 * CSV itself, in GBK or UTF-8. A refund's id is "<trade_no>_<request no>",
 * as the refund notification makes it (alipay.c), so a bill row and a
 * notification of one refund have one key.
 */
#include "channel_int.h"

#include <iconv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

/* GBK bytes -> UTF-8 (heap, NUL-terminated); NULL with why. */
static char *gbk_to_utf8(const char *in, size_t len, size_t *out_len, const char **why)
{
    iconv_t cd = iconv_open("UTF-8", "GBK");
    if (cd == (iconv_t)-1) {
        *why = "no GBK converter";
        return NULL;
    }
    size_t cap = len * 2 + 16, left_in = len, left_out = cap;
    char *out = malloc(cap + 1), *src = (char *)(uintptr_t)in, *dst = out;
    if (out && iconv(cd, &src, &left_in, &dst, &left_out) == (size_t)-1) {
        free(out);
        out = NULL;
        *why = "not GBK text";
    } else if (!out) {
        *why = "out of memory";
    }
    iconv_close(cd);
    if (!out)
        return NULL;
    *out_len = cap - left_out;
    out[*out_len] = '\0';
    return out;
}

/* Whether text is a detail file: a column line beginning 支付宝交易号. */
static bool is_detail(const char *text)
{
    return strncmp(text, "支付宝交易号,", strlen("支付宝交易号,")) == 0 ||
           strstr(text, "\n支付宝交易号,") != NULL;
}

/* The detail CSV of a zip, UTF-8 (heap). NULL with why. */
static char *unzip_detail(const char *data, size_t len, size_t *out_len, const char **why)
{
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_buffer_create(data, len, 0, &ze);
    zip_t *z = src ? zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze) : NULL;
    char *found = NULL;
    *why = "not a zip archive, or a damaged one";
    if (!z) {
        if (src)
            zip_source_free(src);
        zip_error_fini(&ze);
        return NULL;
    }
    zip_int64_t n = zip_get_num_entries(z, 0);
    for (zip_int64_t i = 0; i < n && !found; i++) {
        zip_stat_t st;
        if (zip_stat_index(z, (zip_uint64_t)i, 0, &st) || !(st.valid & ZIP_STAT_SIZE))
            continue;
        if (st.size > PO_BILL_MAX) {
            *why = "an entry larger than a bill may be";
            break;
        }
        zip_file_t *f = zip_fopen_index(z, (zip_uint64_t)i, 0);
        char *raw = f ? malloc(st.size + 1) : NULL;
        /* read to the end: libzip checks the entry's CRC-32 only on
         * reaching it (a read of exactly its size returns unchecked data) */
        zip_int64_t got = raw ? 0 : -1, k = 0;
        while (got >= 0 && (k = zip_fread(f, raw + got, st.size + 1 - (zip_uint64_t)got)) > 0)
            got += k;
        if (k < 0)
            got = -1;
        int closed = f ? zip_fclose(f) : 0;
        if (got < 0 || (zip_uint64_t)got != st.size || closed != 0) {
            free(raw);
            *why = "an entry does not read whole (truncated or damaged archive)";
            break;
        }
        const char *cwhy = NULL;
        size_t ul = 0;
        char *utf = gbk_to_utf8(raw, st.size, &ul, &cwhy);
        free(raw);
        if (utf && is_detail(utf)) {
            found = utf;
            *out_len = ul;
        } else {
            free(utf);
        }
    }
    if (!found && *why && strcmp(*why, "not a zip archive, or a damaged one") == 0)
        *why = "the archive has no detail file (支付宝交易号)";
    zip_discard(z);
    zip_error_fini(&ze);
    return found;
}

/* "#交易合计：6笔，商家实收共0.06元…": its count and amount (fen). */
static bool totals(const char *line, const char *label, int64_t *count, int64_t *amount)
{
    const char *p = strstr(line, label);
    if (!p)
        return false;
    p += strlen(label);
    char cnt[24], num[32];
    size_t c = 0, k = 0;
    while (*p >= '0' && *p <= '9' && c < sizeof cnt - 1)
        cnt[c++] = *p++;
    cnt[c] = '\0';
    if (!c || strncmp(p, "笔", strlen("笔")) != 0)
        return false;
    const char *m = strstr(p, "共");
    if (!m)
        return false;
    m += strlen("共");
    while (((*m >= '0' && *m <= '9') || *m == '.' || *m == '-') && k < sizeof num - 1)
        num[k++] = *m++;
    num[k] = '\0';
    return strncmp(m, "元", strlen("元")) == 0 && po_bill_fixed(cnt, 0, count) &&
           po_bill_fixed(num, 2, amount);
}

po_err po_alipay_bill_parse(const char *data, size_t len, struct po_bill *out, char *err,
                            size_t errcap)
{
#define BAD PO_BILL_BAD
    po_err rc = PO_OK;
    struct po_bill b = {0};
    char *text = NULL, account[PO_ID_MAX + 1] = "";
    const char *why = NULL;
    size_t tlen = 0;
    if (len > PO_BILL_MAX) {
        po_errf(err, errcap, "bill larger than %d MiB", PO_BILL_MAX >> 20);
        return PO_ERR_LIMIT;
    }
    if (len >= 4 && memcmp(data, "PK\x03\x04", 4) == 0) {
        text = unzip_detail(data, len, &tlen, &why);
        if (!text) {
            po_errf(err, errcap, "Alipay bill archive: %s", why);
            return PO_ERR_INVALID;
        }
    } else {
        if ((rc = po_bill_text(&data, &len, &text, err, errcap)))
            return rc;
        if (!is_detail(text)) { /* the file as Alipay writes it: GBK */
            char *utf = gbk_to_utf8(data, len, &tlen, &why);
            free(text);
            text = utf;
            if (!text || !is_detail(text)) {
                free(text);
                po_errf(err, errcap, "not an Alipay trade bill detail (no 支付宝交易号 column)");
                return PO_ERR_INVALID;
            }
        }
    }
    int cap = 0, lineno = 0, nh = 0, ix[8] = {0};
    char *h[PO_BILL_FIELDS_MAX], *f[PO_BILL_FIELDS_MAX];
    int64_t pays = 0, refunds = 0, sum_pay = 0, sum_refund = 0;
    bool have_pay_total = false, have_refund_total = false, ended = false;
    int64_t t_pays = 0, t_pay = 0, t_refunds = 0, t_refund = 0;
    char *save = NULL, *line = NULL;
    for (char *t = text; !(rc = po_bill_line(t, &save, &lineno, &line, err, errcap)) && line;
         t = NULL) {
        if (line[0] == '#') {
            const char *acc = strstr(line, "#账号：[");
            if (acc) {
                acc += strlen("#账号：[");
                const char *end = strchr(acc, ']');
                size_t al = end ? (size_t)(end - acc) : 0;
                /* the PID with Alipay's account-type suffix 0156 */
                if (al == 20 && strncmp(acc + 16, "0156", 4) == 0)
                    al = 16;
                if (!end || !al || al > PO_ID_MAX)
                    BAD("line %d: malformed account line", lineno);
                memcpy(account, acc, al);
                account[al] = '\0';
            }
            if (strstr(line, "业务明细列表结束"))
                ended = true;
            if (strstr(line, "#交易合计："))
                have_pay_total = totals(line, "#交易合计：", &t_pays, &t_pay);
            if (strstr(line, "#退款合计："))
                have_refund_total = totals(line, "#退款合计：", &t_refunds, &t_refund);
            continue;
        }
        if (ended)
            BAD("line %d: a row after the end of the list", lineno);
        if (nh == 0) {
            nh = po_bill_split(line, h, false, true);
            const char *names[] = {"支付宝交易号",      "商户订单号",     "业务类型",
                                   "完成时间",          "订单金额（元）", "商家实收（元）",
                                   "退款批次号/请求号", "服务费（元）"};
            for (int i = 0; i < 8; i++)
                if ((ix[i] = nh > 0 ? po_bill_col(h, nh, names[i]) : -1) < 0)
                    BAD("line %d: not an Alipay bill detail header (%s missing)", lineno, names[i]);
            continue;
        }
        int n = po_bill_split(line, f, false, true);
        if (n != nh)
            BAD("line %d: %d columns, the header has %d", lineno, n < 0 ? 0 : n, nh);
        struct po_bill_row *r = NULL;
        if ((rc = po_bill_row_next(&b, &cap, &r, err, errcap)))
            goto out;
        bool refund = strcmp(f[ix[2]], "退款") == 0;
        if (!refund && strcmp(f[ix[2]], "交易") != 0)
            BAD("line %d: unknown 业务类型 '%.24s'", lineno, f[ix[2]]);
        int64_t order = 0, settle = 0;
        char day[11] = "";
        if (!po_bill_copy(r->time, sizeof r->time, f[ix[3]]) || strlen(r->time) < 10 ||
            (memcpy(day, r->time, 10), !po_time_valid(day)) ||
            !po_bill_copy(r->txn, sizeof r->txn, f[ix[0]]) ||
            !po_bill_copy(r->out_trade_no, sizeof r->out_trade_no, f[ix[1]]) || !r->txn[0] ||
            !r->out_trade_no[0])
            BAD("line %d: a field is missing or too long", lineno);
        if (!po_bill_fixed(f[ix[4]], 2, &order) || !po_bill_fixed(f[ix[5]], 2, &settle) ||
            !po_bill_fixed(*f[ix[7]] ? f[ix[7]] : "0", 5, &r->fee_milli))
            BAD("line %d: an amount is not a decimal in yuan", lineno);
        if (refund ? order >= 0 : order <= 0)
            BAD("line %d: a %s with a %s amount", lineno, refund ? "refund" : "trade",
                refund ? "positive" : "negative");
        r->kind = refund ? PO_BILL_REFUND : PO_BILL_PAY;
        r->amount = refund ? -order : order;
        if (r->fee_milli < 0)
            r->fee_milli = -r->fee_milli;
        memcpy(r->currency, "CNY", 4);
        memcpy(r->sub_mchid, "0", 2);
        if (refund) {
            /* Alipay's request number; the trade's own number when the
             * refund was sent without one */
            const char *no = *f[ix[6]] ? f[ix[6]] : r->out_trade_no;
            if (!po_bill_copy(r->out_refund_no, sizeof r->out_refund_no, no) ||
                po_fmt(r->refund_id, sizeof r->refund_id, "%s_%s", r->txn, no) ||
                !po_bill_copy(r->refund_status, sizeof r->refund_status, "SUCCESS"))
                BAD("line %d: the refund's request number is too long", lineno);
        }
        if (!po_amount_valid(r->amount) || !po_bill_add(refund ? &sum_refund : &sum_pay, settle))
            BAD("line %d: an amount out of bounds", lineno);
        refund ? refunds++ : pays++;
        po_bill_period(&b, day);
        b.nrows++;
    }
    if (rc)
        goto out; /* a line too long */
    if (!account[0])
        BAD("no account line (#账号：[…]): not a whole Alipay bill");
    if (nh == 0)
        BAD("no column line: not an Alipay bill detail");
    if (!ended || !have_pay_total || !have_refund_total)
        BAD("no totals (#交易合计 / #退款合计): the file is truncated");
    if (t_pays != pays || t_pay != sum_pay || t_refunds != refunds || t_refund != sum_refund)
        BAD("the totals do not agree with the rows (trades %lld/%lld, %lld/%lld fen; refunds"
            " %lld/%lld, %lld/%lld fen)",
            (long long)t_pays, (long long)pays, (long long)t_pay, (long long)sum_pay,
            (long long)t_refunds, (long long)refunds, (long long)t_refund, (long long)sum_refund);
    for (int i = 0; i < b.nrows; i++)
        PO_ASSERT(po_strcpy(b.rows[i].mchid, sizeof b.rows[i].mchid, account) == PO_OK);
    po_bill_hand(&b, out);
out:
    po_bill_free(&b);
    free(text);
    return rc;
#undef BAD
}
