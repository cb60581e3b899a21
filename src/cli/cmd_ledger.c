/*
 * cmd_ledger.c — the commands on the ledger and its orders: migrate, tenant and
 * merchant add, order create and show, refund create, ledger balances,
 * apply (one normalised event through the engine) and verify.
 */
#include "../channel/channel.h"
#include "../core/core.h"
#include "../engine/objects.h"
#include "../engine/engine.h"
#include "../ledger/ledger.h"
#include "../service/service.h"
#include "../store/store.h"

#include <jansson.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_int.h"

int cmd_migrate(struct po_store *s, const struct opts *o)
{
    (void)o;
    char err[PO_ERRBUF_SIZE] = "";
    int applied = 0, version = 0;
    po_err rc = po_store_migrate(s, &applied, err, sizeof err);
    if (!rc)
        rc = po_store_schema_version(s, &version);
    if (rc)
        return cli_fail(rc, err);
    printf("schema version %d (%d migration%s applied now)\n", version, applied,
           applied == 1 ? "" : "s");
    return 0;
}

int cmd_tenant_add(struct po_store *s, const struct opts *o)
{
    const char *t = cli_need(o, "tenant");
    if (!t)
        return EXIT_USAGE;
    char err[PO_ERRBUF_SIZE] = "";
    bool created = false;
    po_err rc = po_tenant_add(s, t, cli_opt(o, "name"), &created, err, sizeof err);
    if (rc)
        return cli_fail(rc, err);
    printf("tenant %s %s\n", t, created ? "added" : "already exists with the same name");
    return 0;
}

int cmd_tenant_set(struct po_store *s, const struct opts *o)
{
    const char *t = cli_need(o, "tenant"), *ttl = cli_need(o, "order-ttl");
    int64_t v = 0;
    if (!t || !ttl)
        return EXIT_USAGE;
    if (po_parse_i64(ttl, 0, PO_ORDER_EXPIRY_MAX_S, &v)) {
        fprintf(stderr, "payonce: --order-ttl: 0 (none) to %d seconds\n", PO_ORDER_EXPIRY_MAX_S);
        return EXIT_USAGE;
    }
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_tenant_set_order_ttl(s, t, v, err, sizeof err);
    if (rc)
        return cli_fail(rc, err);
    if (v)
        printf("tenant %s: orders created without time_expire expire %lld s after creation\n", t,
               (long long)v);
    else
        printf("tenant %s: orders expire only when created with time_expire\n", t);
    return 0;
}

int cmd_merchant_add(struct po_store *s, const struct opts *o)
{
    const char *t = cli_need(o, "tenant"), *m = cli_need(o, "merchant");
    if (!t || !m)
        return EXIT_USAGE;
    char err[PO_ERRBUF_SIZE] = "";
    bool created = false;
    po_err rc = po_merchant_add(s, t, m, &created, err, sizeof err);
    if (rc)
        return cli_fail(rc, err);
    printf("merchant %s %s tenant %s\n", m, created ? "added to" : "already in", t);
    return 0;
}

static int amount_arg(const struct opts *o, int64_t *out)
{
    const char *a = cli_need(o, "amount");
    if (!a)
        return EXIT_USAGE;
    if (po_parse_i64(a, 1, PO_AMOUNT_MAX, out)) {
        fprintf(stderr,
                "payonce: --amount must be a positive integer in minor units"
                " (fen, cents), at most %lld\n",
                (long long)PO_AMOUNT_MAX);
        return EXIT_USAGE;
    }
    return 0;
}

int cmd_order_create(struct po_store *s, const struct opts *o)
{
    struct po_order_spec spec = {
        .tenant = cli_need(o, "tenant"),
        .merchant = cli_need(o, "merchant"),
        .out_trade_no = cli_need(o, "out-trade-no"),
        .currency = cli_opt(o, "currency") ? cli_opt(o, "currency") : "CNY",
        .channel = cli_opt(o, "channel"),
    };
    if (!spec.tenant || !spec.merchant || !spec.out_trade_no)
        return EXIT_USAGE;
    if (spec.channel && !po_channel_find(spec.channel)) {
        char names[128];
        po_channel_names(0, names, sizeof names);
        fprintf(stderr, "payonce: --channel: one of %s\n", names);
        return EXIT_USAGE;
    }
    int u = amount_arg(o, &spec.amount_minor);
    if (u)
        return u;
    const char *param,
        *rule = po_channel_order_rule(spec.channel,
                                      &(struct po_pay_request){.tenant = spec.tenant,
                                                               .out_trade_no = spec.out_trade_no,
                                                               .amount = spec.amount_minor,
                                                               .currency = spec.currency},
                                      &param);
    if (rule) {
        fprintf(stderr, "payonce: --%s: %s\n",
                strcmp(param, "out_trade_no") ? param : "out-trade-no", rule);
        return EXIT_USAGE;
    }
    char err[PO_ERRBUF_SIZE] = "";
    bool created = false;
    po_err rc = po_order_create(s, &spec, &created, err, sizeof err);
    if (rc)
        return cli_fail(rc, err);
    char amount[PO_MONEY_MAX];
    po_money_format(spec.amount_minor, spec.currency, amount, sizeof amount);
    printf("order %s %s (PAYING, %s)\n", spec.out_trade_no,
           created ? "created" : "already exists with the same fields", amount);
    return 0;
}

/* One line of `order import`: MERCHANT,OUT_TRADE_NO,AMOUNT[,CURRENCY[,CHANNEL]]
 * cut in place into spec (its strings point into line); false after saying
 * what is wrong with it. */
static bool import_line(char *line, int no, const char *tenant, struct po_order_spec *spec)
{
    char *f[6];
    int n = 0;
    for (char *p = line; n < 6; n++) {
        f[n] = p;
        p = strchr(p, ',');
        if (!p) {
            n++;
            break;
        }
        *p++ = '\0';
    }
    const char *bad = NULL;
    if (n < 3 || n > 5)
        bad = "3 to 5 fields: MERCHANT,OUT_TRADE_NO,AMOUNT[,CURRENCY[,CHANNEL]]";
    else if (!*f[0] || !*f[1])
        bad = "an empty merchant or out_trade_no";
    else if (po_parse_i64(f[2], 1, PO_AMOUNT_MAX, &spec->amount_minor))
        bad = "the amount must be a positive integer in minor units (fen, cents)";
    else if (n == 5 && *f[4] && !po_channel_find(f[4]))
        bad = "an unknown channel";
    else if (n == 5 && *f[4])
        bad = po_channel_order_rule(
            f[4],
            &(struct po_pay_request){.tenant = tenant,
                                     .out_trade_no = f[1],
                                     .amount = spec->amount_minor,
                                     .currency = n >= 4 && *f[3] ? f[3] : "CNY"},
            &(const char *){NULL});
    if (bad) {
        fprintf(stderr, "payonce: line %d: %s\n", no, bad);
        return false;
    }
    spec->tenant = tenant;
    spec->merchant = f[0];
    spec->out_trade_no = f[1];
    spec->currency = n >= 4 && *f[3] ? f[3] : "CNY";
    spec->channel = n == 5 && *f[4] ? f[4] : NULL;
    spec->expires_at = 0;
    return true;
}

/* order import --tenant T --file F: orders in bulk, all or nothing — each
 * line checked before any is written, then all of them in one transaction
 * (a line that conflicts with an order already there: none written). The
 * same line again is not an error (idempotent, as order create). */
int cmd_order_import(struct po_store *s, const struct opts *o)
{
    const char *tenant = cli_need(o, "tenant"), *path = cli_need(o, "file");
    if (!tenant || !path)
        return EXIT_USAGE;
    char *buf = NULL;
    size_t len = 0;
    if (cli_read_input(path, PO_ORDER_IMPORT_MAX, "16 MiB", &buf, &len))
        return EXIT_FAIL;
    struct import_row {
        struct po_order_spec spec;
        int line;
    } *rows = NULL;
    int n = 0, no = 0, ret = 0;
    if (memchr(buf, '\0', len)) {
        fprintf(stderr, "payonce: %s: a NUL byte: not a text file\n", path);
        ret = EXIT_FAIL;
    }
    for (char *line = buf, *next; !ret && line < buf + len; line = next) {
        char *nl = memchr(line, '\n', (size_t)(buf + len - line));
        next = nl ? nl + 1 : buf + len;
        size_t ll = (size_t)((nl ? nl : buf + len) - line);
        no++;
        if (ll && line[ll - 1] == '\r')
            ll--;
        line[ll] = '\0';
        if (!ll || line[0] == '#')
            continue;
        if (ll > PO_ORDER_IMPORT_LINE_MAX || n == PO_ORDER_IMPORT_ROWS_MAX) {
            if (n == PO_ORDER_IMPORT_ROWS_MAX)
                fprintf(stderr,
                        "payonce: line %d: more than %d orders in one import (one transaction:"
                        " SQLite's write lock is held for all of it; split the file)\n",
                        no, PO_ORDER_IMPORT_ROWS_MAX);
            else
                fprintf(stderr, "payonce: line %d: longer than %d bytes\n", no,
                        PO_ORDER_IMPORT_LINE_MAX);
            ret = EXIT_FAIL;
            break;
        }
        if (n % 1024 == 0) {
            struct import_row *nr = realloc(rows, (size_t)(n + 1024) * sizeof *nr);
            if (!nr) {
                ret = cli_fail(PO_ERR_NOMEM, "out of memory");
                break;
            }
            rows = nr;
        }
        if (!import_line(line, no, tenant, &rows[n].spec)) {
            ret = EXIT_FAIL;
            break;
        }
        rows[n++].line = no;
    }
    char err[PO_ERRBUF_SIZE] = "";
    int created = 0;
    po_err rc = PO_OK;
    if (!ret && (rc = po_store_begin(s, err, sizeof err)) == PO_OK) {
        for (int i = 0; !rc && i < n; i++) {
            bool c = false;
            char why[PO_ERRBUF_SIZE] = "";
            if ((rc = po_order_insert(s, &rows[i].spec, &c, NULL, 0, why, sizeof why)) != PO_OK)
                po_errf(err, sizeof err, "line %d: %s", rows[i].line, why);
            created += c;
        }
        if (!rc)
            rc = po_store_commit(s, err, sizeof err);
        else
            po_store_rollback(s);
    }
    if (!ret && rc)
        ret = cli_fail(rc, err);
    else if (!ret && cli_flag(o, "json"))
        ret = cli_print_json(json_pack("{s:s, s:i, s:i, s:i}", "tenant", tenant, "orders", n,
                                       "created", created, "existing", n - created));
    else if (!ret)
        printf("%d orders of tenant %s: %d created, %d already there with the same fields\n", n,
               tenant, created, n - created);
    free(rows);
    free(buf);
    return ret;
}

int cmd_order_show(struct po_store *s, const struct opts *o)
{
    const char *t = cli_need(o, "tenant"), *no = cli_need(o, "out-trade-no");
    if (!t || !no)
        return EXIT_USAGE;
    json_t *doc = NULL;
    int ret = cli_show_one(s, t, no, "order", po_view_order, &doc);
    if (ret)
        return ret;
    json_object_set_new(doc, "tenant", json_string(t));
    if (cli_flag(o, "json"))
        return cli_print_json(doc);
    static const char *const order[] = {
        "tenant",          "out_trade_no", "merchant",       "channel",    "amount",
        "currency",        "status",       "channel_txn_id", "paid_at",    "refund_reserved",
        "refunded_amount", "created_at",   "updated_at",     "time_expire"};
    const char *cur = json_string_value(json_object_get(doc, "currency"));
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        json_t *v = json_object_get(doc, order[i]);
        char money[PO_MONEY_MAX];
        if (json_is_integer(v)) { /* amounts, in major units for a person */
            po_money_format((int64_t)json_integer_value(v), cur, money, sizeof money);
            printf("%-15s %s\n", order[i], money);
        } else
            printf("%-15s %s\n", order[i], json_is_string(v) ? json_string_value(v) : "-");
    }
    json_decref(doc);
    return 0;
}

int cmd_refund_create(struct po_store *s, const struct opts *o)
{
    const char *t = cli_need(o, "tenant"), *no = cli_need(o, "out-trade-no"),
               *rno = cli_need(o, "out-refund-no");
    int64_t amount = 0;
    if (!t || !no || !rno)
        return EXIT_USAGE;
    int u = amount_arg(o, &amount);
    if (u)
        return u;
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_refund_create(s, t, no, rno, amount, err, sizeof err);
    if (rc)
        return cli_fail(rc, err);
    json_t *doc = NULL; /* the refund's currency is its order's */
    char money[PO_MONEY_MAX];
    po_money_format(amount,
                    po_view_refund(s, t, rno, &doc) == PO_OK && doc
                        ? json_string_value(json_object_get(doc, "currency"))
                        : NULL,
                    money, sizeof money);
    json_decref(doc);
    printf("refund %s of order %s recorded (PROCESSING, %s)\n", rno, no, money);
    return 0;
}

int cmd_balances(struct po_store *s, const struct opts *o)
{
    const char *t = cli_need(o, "tenant");
    if (!t)
        return EXIT_USAGE;
    json_t *list = NULL;
    po_err rc = po_view_balances(s, t, &list);
    if (rc)
        return cli_fail(rc, "cannot read the balances");
    if (cli_flag(o, "json"))
        return cli_print_json(json_pack("{s:s, s:o}", "tenant", t, "balances", list));
    printf("%-40s %24s\n", "account", "balance");
    size_t i;
    json_t *b;
    json_array_foreach(list, i, b)
    {
        char money[PO_MONEY_MAX];
        po_money_format((int64_t)json_integer_value(json_object_get(b, "balance")),
                        json_string_value(json_object_get(b, "currency")), money, sizeof money);
        printf("%-40s %24s\n", json_string_value(json_object_get(b, "account")), money);
    }
    printf("(debit positive: channel_clearing is money the channel holds for us;\n"
           " merchant_payable, profit_share and suspense are negative when owed)\n");
    json_decref(list);
    return 0;
}
int cmd_apply(struct po_store *s, const struct opts *o)
{
    const char *path = cli_need(o, "event");
    if (!path)
        return EXIT_USAGE;
    char *buf = NULL;
    size_t len = 0;
    char err[PO_ERRBUF_SIZE] = "";
    if (cli_read_input(path, PO_EVENT_FILE_MAX, "64 KiB", &buf, &len))
        return EXIT_FAIL;
    struct po_event ev;
    po_err rc = po_event_from_json(buf, len, &ev, err, sizeof err); /* registered channels only */
    free(buf);
    if (rc) {
        fprintf(stderr, "payonce: invalid event: %s\n", err);
        return EXIT_FAIL;
    }
    /* an event for a tenant that does not exist changes nothing (no alert) */
    if ((rc = po_tenant_check(s, ev.tenant, err, sizeof err)) != PO_OK)
        return cli_fail(rc, err);
    struct po_outcome out;
    struct po_door d = {s, NULL}; /* the offline CLI: no committer */
    po_door_apply(&d, &ev, 1, &out);
    char js[256];
    rc = po_outcome_to_json(&out, js, sizeof js);
    PO_ASSERT(rc == PO_OK);
    puts(js);
    return out.kind == PO_OUT_RETRY ? EXIT_TEMPFAIL : 0;
}

struct verify_ctx {
    bool json;
    json_t *list;
};

static void verify_report(void *ctx, const struct po_violation *v)
{
    struct verify_ctx *vc = ctx;
    if (vc->json)
        json_array_append_new(vc->list,
                              json_pack("{s:s, s:s}", "check", v->check, "detail", v->detail));
    else
        fprintf(stderr, "VIOLATION %s: %s\n", v->check, v->detail);
}

int cmd_verify(struct po_store *s, const struct opts *o)
{
    struct verify_ctx vc = {.json = cli_flag(o, "json"), .list = json_array()};
    char err[PO_ERRBUF_SIZE] = "";
    int count = 0;
    po_err rc = po_ledger_verify(s, verify_report, &vc, &count, err, sizeof err);
    if (rc) {
        json_decref(vc.list);
        return cli_fail(rc, err);
    }
    if (vc.json) {
        if (cli_print_json(json_pack("{s:b, s:i, s:o}", "ok", count == 0, "violations_count", count,
                                     "violations", vc.list)))
            return EXIT_FAIL;
    } else {
        json_decref(vc.list);
        if (count == 0)
            printf("verify: ok (journals balance, balances match postings, one payment journal"
                   " per paid order, every processed record has its journal, no key twice)\n");
        else
            fprintf(stderr, "verify: %d violation%s\n", count, count == 1 ? "" : "s");
    }
    return count == 0 ? 0 : EXIT_VERIFY;
}

/* `payonce order close`: as POST /v1/orders/{no}/close — at the order's
 * channel first (when the tenant's account may call it), then here; paid
 * at the channel meanwhile -> credited, exit 1 (order_paid); no decisive
 * answer -> the order stays PAYING, exit 75 (try again). */
int cmd_order_close(struct po_store *s, const struct opts *o)
{
    const char *t = cli_need(o, "tenant"), *no = cli_need(o, "out-trade-no");
    if (!t || !no)
        return EXIT_USAGE;
    unsigned char master[32];
    bool have = false;
    int ret = cli_load_master_key(o, master, &have);
    if (ret)
        return ret;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct po_close_report rep;
    po_err rc = po_order_close_everywhere(s, NULL, NULL, have ? master : NULL, t, no, &rep);
    curl_global_cleanup();
    po_secure_zero(master, sizeof master);
    if (rc == PO_ERR_NOT_FOUND)
        return cli_fail(rc, "no such order");
    if (rc)
        return cli_fail(rc, "the order could not be closed");
    if (rep.result == PO_CC_UNDECIDED) {
        fprintf(stderr, "payonce: the channel did not confirm the close (%s): %s stays PAYING\n",
                rep.why, no);
        return EXIT_TEMPFAIL;
    }
    json_t *doc = NULL;
    if (po_view_order(s, t, no, &doc) || !doc)
        return cli_fail(PO_ERR_STORE, "the order cannot be read");
    const char *st = json_string_value(json_object_get(doc, "status"));
    bool closed = st && strcmp(st, "CLOSED") == 0;
    printf("%s: %s%s\n", no, st ? st : "-",
           rep.result == PO_CC_CLOSED ? " (closed at the channel first)"
           : rep.result == PO_CC_PAID ? " (the channel had its payment: credited)"
                                      : "");
    json_decref(doc);
    return closed ? 0 : EXIT_FAIL;
}

/* ---- report: money per day, merchant and channel, reconciled ---- */

int cmd_report(struct po_store *s, const struct opts *o)
{
    const char *t = cli_need(o, "tenant"), *from = cli_opt(o, "from"), *to = cli_opt(o, "to");
    if (!t)
        return EXIT_USAGE;
    if (!po_report_dates_ok(from, to)) {
        fprintf(stderr, "payonce: --from, --to: dates YYYY-MM-DD (UTC), from <= to\n");
        return EXIT_USAGE;
    }
    struct po_report r;
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_report_make(s, t, from, to, &r, err, sizeof err);
    if (rc)
        return cli_fail(rc, err);
    int ret = r.mismatches ? EXIT_VERIFY : 0;
    if (cli_flag(o, "json")) {
        if (cli_print_json(po_report_json(&r, from, to)))
            ret = EXIT_FAIL;
    } else if (cli_flag(o, "csv")) {
        char *csv = po_report_csv(&r);
        if (csv)
            fputs(csv, stdout);
        else
            ret = cli_fail(PO_ERR_NOMEM, "the CSV");
        free(csv);
    } else {
        /* every amount in major units with its currency (po_money_format),
         * the fees too: the bills give them in thousandths of the minor
         * unit, shown to the digit they have */
        printf("%-10s  %-16s %-10s %8s %18s %16s %14s %18s %15s %15s %16s\n", "day", "merchant",
               "channel", "journals", "gross", "refunds", "shares", "net", "susp in", "susp out",
               "fees");
        for (int i = 0; i < r.n; i++) {
            const struct po_report_row *x = &r.rows[i];
            char g[PO_MONEY_MAX], rf[PO_MONEY_MAX], sh[PO_MONEY_MAX], n[PO_MONEY_MAX],
                si[PO_MONEY_MAX], so[PO_MONEY_MAX], fee[PO_MONEY_MAX];
            po_money_format(x->gross, x->currency, g, sizeof g);
            po_money_format(x->refunds, x->currency, rf, sizeof rf);
            po_money_format(x->shares, x->currency, sh, sizeof sh);
            po_money_format(x->net, x->currency, n, sizeof n);
            po_money_format(x->suspense_in, x->currency, si, sizeof si);
            po_money_format(x->suspense_out, x->currency, so, sizeof so);
            po_money_format_fine(x->fees_milli, 3, x->currency, fee, sizeof fee);
            printf("%-10s  %-16.16s %-10s %8lld %18s %16s %14s %18s %15s %15s %16s\n", x->day,
                   x->merchant, x->channel, (long long)x->journals, g, rf, sh, n, si, so, fee);
        }
        printf("%d row%s (days in UTC; fees by the bill's trade date)\n", r.n, r.n == 1 ? "" : "s");
        if (r.mismatches)
            fprintf(stderr,
                    "payonce: report: does NOT reconcile to the ledger: %d of %d accounts differ;"
                    " the first: %s (payonce verify)\n",
                    r.mismatches, r.accounts_checked, r.first_mismatch);
        else
            printf("reconciles to the ledger: %d accounts (every merchant's payable, every"
                   " channel's clearing) equal to the minor unit\n",
                   r.accounts_checked);
    }
    if (cli_flag(o, "json") || cli_flag(o, "csv")) {
        if (r.mismatches)
            fprintf(stderr, "payonce: report: does NOT reconcile to the ledger: %s\n",
                    r.first_mismatch);
    }
    po_report_free(&r);
    return ret;
}
