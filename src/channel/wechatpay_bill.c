/*
 * wechatpay_bill.c — WeChat Pay trade bills (ALL, SUCCESS, REFUND).
 *
 * Layout: an optional UTF-8 BOM; a header line naming the columns; detail
 * lines whose every field is prefixed by a backtick (an empty field is a
 * lone backtick); then the summary header (总交易单数,…) and one summary
 * line. CRLF or LF. Columns are found by name, so the three bill types (and
 * extra columns) parse alike. Amounts are yuan with at most two decimals,
 * fees with at most five; both are parsed exactly into integers.
 *
 * The summary must agree with the detail rows (count, settlement, refund,
 * fee, order and requested-refund totals present, every column the summary
 * header names), otherwise the whole file is refused.
 */
#include "channel_int.h"

#include <stdlib.h>
#include <string.h>

/* The largest fixed-point value (and total) a bill may hold: 10^17, i.e.
 * 10^12 yuan in fees at 1e-5, far above any day (PO_AMOUNT_MAX is 10^14
 * minor units for one amount). */
#define PO_BILL_FIXED_MAX INT64_C(100000000000000000)

/* Exact fixed-point: s with at most `scale` decimals -> value * 10^scale,
 * refused (false) unless |value| stays within PO_BILL_FIXED_MAX after the
 * scaling. Every step is checked before it multiplies: 16 digits scaled by
 * 10^5 would not fit an int64 (found by fuzzing: "4200000263200000000"
 * as a fee wrapped silently in a release build). */
bool po_bill_fixed(const char *s, int scale, int64_t *out)
{
    bool neg = *s == '-';
    if (neg)
        s++;
    int64_t v = 0;
    int digits = 0, dec = -1;
    for (; *s; s++) {
        if (*s == '.' && dec < 0) {
            dec = 0;
            continue;
        }
        if (*s < '0' || *s > '9' || ++digits > 18)
            return false;
        if (dec >= 0 && ++dec > scale)
            return false;
        v = v * 10 + (*s - '0'); /* < 10^18: cannot overflow */
    }
    if (digits == 0 || dec == 0)
        return false;
    for (int d = dec < 0 ? 0 : dec; d < scale; d++)
        if (__builtin_mul_overflow(v, 10, &v))
            return false;
    if (v > PO_BILL_FIXED_MAX)
        return false;
    *out = neg ? -v : v;
    return true;
}

/* *sum += v, false (nothing changed) when it would leave the bound. */
bool po_bill_add(int64_t *sum, int64_t v)
{
    int64_t t;
    if (__builtin_add_overflow(*sum, v, &t) || t > PO_BILL_FIXED_MAX || t < -PO_BILL_FIXED_MAX)
        return false;
    *sum = t;
    return true;
}

int po_bill_split(char *line, char **f, bool backticks, bool trim)
{
    int n = 0;
    for (char *p = line;; n++) {
        if (n >= PO_BILL_FIELDS_MAX)
            return -1;
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (backticks) {
            if (*p != '`')
                return -1;
            p++;
        }
        if (trim) {
            while (*p == ' ' || *p == '\t')
                p++;
            size_t l = strlen(p);
            while (l && (p[l - 1] == ' ' || p[l - 1] == '\t'))
                p[--l] = '\0';
        }
        f[n] = p;
        if (!comma)
            return n + 1;
        p = comma + 1;
    }
}

struct cols {
    int time, mchid, sub, txn, out_trade_no, status, currency, settle, refund_id, out_refund_no,
        refund, refund_status, fee, total, requested;
};

int po_bill_col(char **h, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(h[i], name) == 0)
            return i;
    return -1;
}

bool po_bill_copy(char *dst, size_t cap, const char *src)
{
    return po_strcpy(dst, cap, src) == PO_OK;
}

struct po_bill_row *po_bill_row_add(struct po_bill *b, int *cap)
{
    if (b->nrows == *cap) {
        int nc = *cap ? *cap * 2 : 256;
        struct po_bill_row *r = realloc(b->rows, (size_t)nc * sizeof *r);
        if (!r)
            return NULL;
        b->rows = r;
        *cap = nc;
    }
    struct po_bill_row *r = &b->rows[b->nrows];
    memset(r, 0, sizeof *r);
    return r;
}

po_err po_bill_row_next(struct po_bill *b, int *cap, struct po_bill_row **out_row, char *err,
                        size_t errcap)
{
    if (b->nrows >= PO_BILL_ROWS_MAX) {
        po_errf(err, errcap, "more than %d rows", PO_BILL_ROWS_MAX);
        return PO_ERR_INVALID;
    }
    struct po_bill_row *r = po_bill_row_add(b, cap);
    if (!r)
        return PO_ERR_NOMEM;
    *out_row = r;
    return PO_OK;
}

void po_bill_period(struct po_bill *b, const char *day)
{
    if (!b->period_start[0] || strcmp(day, b->period_start) < 0)
        memcpy(b->period_start, day, 11);
    if (strcmp(day, b->period_end) > 0)
        memcpy(b->period_end, day, 11);
}

po_err po_bill_text(const char **data, size_t *len, char **out_text, char *err, size_t errcap)
{
    if (*len >= 3 && memcmp(*data, "\xef\xbb\xbf", 3) == 0)
        *data += 3, *len -= 3;
    if (memchr(*data, '\0', *len))
        return po_errf(err, errcap, "bill contains NUL bytes"), PO_ERR_INVALID;
    char *text = malloc(*len + 1);
    if (!text)
        return PO_ERR_NOMEM;
    memcpy(text, *data, *len);
    text[*len] = '\0';
    *out_text = text;
    return PO_OK;
}

/* The length of line with one trailing CR dropped. */
static size_t chomp(char *line)
{
    size_t ll = strlen(line);
    if (ll && line[ll - 1] == '\r')
        line[--ll] = '\0';
    return ll;
}

po_err po_bill_line(char *text, char **save, int *lineno, char **out_line, char *err, size_t errcap)
{
    char *line = NULL;
    size_t ll = 0;
    do {
        line = strtok_r(text, "\n", save);
        text = NULL;
        if (!line) {
            *out_line = NULL;
            return PO_OK;
        }
        ++*lineno;
        ll = chomp(line);
    } while (ll == 0);
    if (ll > PO_BILL_LINE_MAX) {
        po_errf(err, errcap, "line %d: longer than %d bytes", *lineno, PO_BILL_LINE_MAX);
        return PO_ERR_INVALID;
    }
    *out_line = line;
    return PO_OK;
}

void po_bill_free(struct po_bill *b)
{
    free(b->rows);
    memset(b, 0, sizeof *b);
}

void po_bill_hand(struct po_bill *b, struct po_bill *out)
{
    *out = *b;
    memset(b, 0, sizeof *b);
}

po_err po_wechatpay_bill_parse(const char *data, size_t len, struct po_bill *out, char *err,
                               size_t errcap)
{
#define BAD PO_BILL_BAD
    po_err rc = PO_OK;
    struct po_bill b = {0};
    char *text = NULL;
    int cap = 0, lineno = 0, nh = 0;
    char *h[PO_BILL_FIELDS_MAX], *f[PO_BILL_FIELDS_MAX];
    struct cols c = {-1, -1, -1, -1, -1, -1, -1, -1,
                     -1, -1, -1, -1, -1, -1, -1}; /* set by the header */
    bool summary = false;
    int64_t sum_settle = 0, sum_refund = 0, sum_fee = 0, sum_total = 0, sum_requested = 0;
    if (len > PO_BILL_MAX) {
        po_errf(err, errcap, "bill larger than %d MiB", PO_BILL_MAX >> 20);
        return PO_ERR_LIMIT;
    }
    if ((rc = po_bill_text(&data, &len, &text, err, errcap)))
        return rc;
    char *save = NULL, *line = NULL;
    for (char *t = text; !(rc = po_bill_line(t, &save, &lineno, &line, err, errcap)) && line;
         t = NULL) {
        if (nh == 0) { /* the header */
            nh = po_bill_split(line, h, false, false);
            c = (struct cols){
                po_bill_col(h, nh, "交易时间"),     po_bill_col(h, nh, "商户号"),
                po_bill_col(h, nh, "特约商户号"),   po_bill_col(h, nh, "微信订单号"),
                po_bill_col(h, nh, "商户订单号"),   po_bill_col(h, nh, "交易状态"),
                po_bill_col(h, nh, "货币种类"),     po_bill_col(h, nh, "应结订单金额"),
                po_bill_col(h, nh, "微信退款单号"), po_bill_col(h, nh, "商户退款单号"),
                po_bill_col(h, nh, "退款金额"),     po_bill_col(h, nh, "退款状态"),
                po_bill_col(h, nh, "手续费"),       po_bill_col(h, nh, "订单金额"),
                po_bill_col(h, nh, "申请退款金额")};
            if (nh < 0 || c.time < 0 || c.mchid < 0 || c.txn < 0 || c.out_trade_no < 0 ||
                c.status < 0 || c.settle < 0 || c.fee < 0)
                BAD("line 1: not a WeChat Pay trade bill header (交易时间, 商户号, 微信订单号, "
                    "商户订单号, 交易状态, 应结订单金额, 手续费 required)");
            continue;
        }
        if (strncmp(line, "总交易单数", strlen("总交易单数")) == 0) {
            summary = true;
            char *sh[PO_BILL_FIELDS_MAX];
            int nsh = po_bill_split(line, sh, false, false); /* the summary header's own columns */
            char *next = strtok_r(NULL, "\n", &save);
            lineno++;
            if (!next)
                BAD("line %d: the summary header has no summary row (truncated?)", lineno);
            (void)chomp(next);
            int ns = po_bill_split(next, f, true, false);
            int64_t count = 0, settle = 0, refund = 0, fee = 0, total = 0, requested = 0;
            /* Every column the summary header names is there and a number:
             * a bill cut inside its last line is refused too. */
            if (ns < 5 || ns != nsh || !po_bill_fixed(f[0], 1, &count) ||
                !po_bill_fixed(f[1], 2, &settle) || !po_bill_fixed(f[2], 2, &refund) ||
                !po_bill_fixed(f[4], 5, &fee) || (ns >= 6 && !po_bill_fixed(f[5], 2, &total)) ||
                (ns >= 7 && !po_bill_fixed(f[6], 2, &requested)))
                BAD("line %d: malformed summary row", lineno);
            /* Fees are summed at 1e-5 yuan and stated to 0.01 or 1e-5. */
            if (count != (int64_t)b.nrows * 10)
                BAD("summary says %lld.%lld transactions, the bill has %d rows",
                    (long long)(count / 10), (long long)(count % 10), b.nrows);
            if (settle != sum_settle || refund != sum_refund || fee != sum_fee ||
                (ns >= 6 && c.total >= 0 && total != sum_total) ||
                (ns >= 7 && c.requested >= 0 && requested != sum_requested))
                BAD("the summary does not agree with the rows (settlement %lld/%lld, refunds "
                    "%lld/%lld, fees %lld/%lld, orders %lld/%lld, refunds requested %lld/%lld;"
                    " minor units, fees 1e-5)",
                    (long long)settle, (long long)sum_settle, (long long)refund,
                    (long long)sum_refund, (long long)fee, (long long)sum_fee, (long long)total,
                    (long long)sum_total, (long long)requested, (long long)sum_requested);
            if (strtok_r(NULL, "\n", &save))
                BAD("line %d: data after the summary row", lineno + 1);
            break;
        }
        int n = po_bill_split(line, f, true, false);
        if (n != nh)
            BAD("line %d: %d columns, the header has %d (or a field lacks its backtick)", lineno,
                n < 0 ? 0 : n, nh);
        struct po_bill_row *r = NULL;
        if ((rc = po_bill_row_next(&b, &cap, &r, err, errcap)))
            goto out;
        int64_t settle = 0, refund = 0, total = 0, requested = 0;
        bool is_refund = strcmp(f[c.status], "REFUND") == 0;
        r->kind = is_refund ? PO_BILL_REFUND : PO_BILL_PAY;
        char day[11] = "";
        if (!po_bill_copy(r->time, sizeof r->time, f[c.time]) || strlen(r->time) < 10 ||
            (memcpy(day, r->time, 10), !po_time_valid(day)) ||
            !po_bill_copy(r->mchid, sizeof r->mchid, f[c.mchid]) ||
            !po_bill_copy(r->sub_mchid, sizeof r->sub_mchid, c.sub >= 0 ? f[c.sub] : "0") ||
            !po_bill_copy(r->txn, sizeof r->txn, f[c.txn]) ||
            !po_bill_copy(r->out_trade_no, sizeof r->out_trade_no, f[c.out_trade_no]) ||
            !po_bill_copy(r->currency, sizeof r->currency, c.currency >= 0 ? f[c.currency] : "CNY"))
            BAD("line %d: a field is missing or too long", lineno);
        if (!po_bill_fixed(f[c.settle], 2, &settle) || !po_bill_fixed(f[c.fee], 5, &r->fee_milli) ||
            (c.refund >= 0 && !po_bill_fixed(f[c.refund], 2, &refund)) ||
            (c.total >= 0 && !po_bill_fixed(f[c.total], 2, &total)) ||
            (c.requested >= 0 && !po_bill_fixed(f[c.requested], 2, &requested)))
            BAD("line %d: an amount is not a decimal in yuan (at most 2 decimals; fees 5)", lineno);
        if (settle < 0 || refund < 0 || total < 0 || requested < 0)
            BAD("line %d: negative amount", lineno);
        if (strcmp(f[c.status], "SUCCESS") != 0 && !is_refund)
            BAD("line %d: unknown 交易状态 '%.16s'", lineno, f[c.status]);
        if (is_refund) {
            if (c.refund_id < 0 || c.out_refund_no < 0 || c.refund < 0 ||
                !po_bill_copy(r->refund_id, sizeof r->refund_id, f[c.refund_id]) ||
                !po_bill_copy(r->out_refund_no, sizeof r->out_refund_no, f[c.out_refund_no]) ||
                !po_bill_copy(r->refund_status, sizeof r->refund_status,
                              c.refund_status >= 0 ? f[c.refund_status] : "SUCCESS"))
                BAD("line %d: refund row without its refund fields", lineno);
            r->amount = refund;
        } else {
            r->amount = c.total >= 0 ? total : settle;
        }
        /* Found by fuzzing: a row of nothing (0.00) balanced by its summary
         * was handed out as a payment of zero. */
        if (!po_amount_valid(r->amount) || !r->txn[0] || !r->out_trade_no[0] ||
            strlen(r->currency) != 3)
            BAD("line %d: a row needs a positive amount, 微信订单号, 商户订单号 and a currency",
                lineno);
        if (!po_bill_add(&sum_settle, settle) || !po_bill_add(&sum_refund, refund) ||
            !po_bill_add(&sum_fee, r->fee_milli) || !po_bill_add(&sum_total, total) ||
            !po_bill_add(&sum_requested, requested))
            BAD("line %d: the bill's totals leave the bound of an amount", lineno);
        po_bill_period(&b, day);
        b.nrows++;
    }
    if (rc)
        goto out; /* a line too long */
    if (nh == 0)
        BAD("empty bill");
    if (!summary)
        BAD("no summary row: the file is truncated");
    po_bill_hand(&b, out);
out:
    po_bill_free(&b);
    free(text);
    return rc;
#undef BAD
}
