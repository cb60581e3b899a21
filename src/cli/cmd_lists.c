/*
 * cmd_lists.c — the listings and look-ups an operator expects (issue 13 item
 * 7): tenant list, merchant list, order list, refund show, channel show.
 * Each reads a service view (the same the tenant API serves); --json
 * prints it as it is (integer minor units), otherwise lines for a person
 * with amounts in major units.
 */
#include "../service/service.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_int.h"

static const char *str(json_t *o, const char *name)
{
    const char *v = json_string_value(json_object_get(o, name));
    return v ? v : "-";
}

static void money(json_t *o, const char *name, char *buf)
{
    po_money_format((int64_t)json_integer_value(json_object_get(o, name)), str(o, "currency"), buf,
                    PO_MONEY_MAX);
}

static int print_doc(json_t *doc)
{
    char *text = po_json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(doc);
    if (!text)
        return cli_fail(PO_ERR_NOMEM, "out of memory");
    puts(text);
    free(text);
    return 0;
}

static void tenant_line(json_t *t)
{
    char channels[128] = "";
    size_t i, n = 0;
    json_t *c;
    json_array_foreach(json_object_get(t, "channels"), i, c) n +=
        (size_t)snprintf(channels + n, n < sizeof channels ? sizeof channels - n : 0, "%s%s",
                         i ? "," : "", json_string_value(c));
    printf("%-24s %-24s %3lld merchants  channels: %-24s created %s\n", str(t, "tenant"),
           str(t, "name"), (long long)json_integer_value(json_object_get(t, "merchants")),
           n ? channels : "-", str(t, "created_at"));
}

int cmd_tenant_list(struct po_store *s, const struct opts *o)
{
    json_t *list = NULL;
    po_err rc = po_view_tenants(s, &list);
    if (rc)
        return cli_fail(rc, "cannot read the tenants");
    size_t n = json_array_size(list);
    bool json = cli_flag(o, "json");
    cli_print_list(o, list, tenant_line);
    if (!json)
        printf("%zu tenant%s\n", n, n == 1 ? "" : "s");
    return 0;
}

static void merchant_line(json_t *m)
{
    printf("%-32s created %s\n", str(m, "merchant"), str(m, "created_at"));
}

int cmd_merchant_list(struct po_store *s, const struct opts *o)
{
    json_t *list = NULL;
    po_err rc = po_view_merchants(s, cli_opt(o, "tenant"), &list);
    if (rc)
        return cli_fail(rc, "cannot read the merchants");
    size_t n = json_array_size(list);
    bool json = cli_flag(o, "json");
    cli_print_list(o, list, merchant_line);
    if (!json)
        printf("%zu merchant%s in tenant %s\n", n, n == 1 ? "" : "s", cli_opt(o, "tenant"));
    return 0;
}

static void order_line(json_t *d)
{
    char amount[PO_MONEY_MAX], refunded[PO_MONEY_MAX];
    money(d, "amount", amount);
    money(d, "refunded_amount", refunded);
    printf("%-28s %-8s %16s  refunded %14s  %-16s %-10s %s\n", str(d, "out_trade_no"),
           str(d, "status"), amount, refunded, str(d, "merchant"), str(d, "channel"),
           str(d, "created_at"));
}

/* order list: oldest first, --limit per page; the next page starts after
 * the last order shown (--after CREATED_AT/OUT_TRADE_NO, printed). */
int cmd_order_list(struct po_store *s, const struct opts *o)
{
    struct po_order_filter f = {cli_opt(o, "status"), cli_opt(o, "merchant"), cli_opt(o, "since")};
    if (f.status && strcmp(f.status, "PAYING") != 0 && strcmp(f.status, "PAID") != 0 &&
        strcmp(f.status, "CLOSED") != 0) {
        fprintf(stderr, "payonce: --status: PAYING, PAID or CLOSED\n");
        return EXIT_USAGE;
    }
    if (f.since && !po_since_valid(f.since)) {
        fprintf(stderr, "payonce: --since: a UTC time, e.g. 2026-12-01 or 2026-12-01T08:00:00Z\n");
        return EXIT_USAGE;
    }
    int64_t limit = 0;
    int ret = cli_int_opt(o, "limit", 1, 10000, 100, &limit);
    if (ret)
        return ret;
    char ts[PO_TIME_SIZE] = "", key[PO_ID_MAX + 1] = "";
    const char *after = cli_opt(o, "after");
    if (after) {
        const char *slash = strchr(after, '/');
        if (!slash || (size_t)(slash - after) >= sizeof ts ||
            po_strcpy(key, sizeof key, slash + 1)) {
            fprintf(stderr, "payonce: --after: CREATED_AT/OUT_TRADE_NO, as printed by the last"
                            " page\n");
            return EXIT_USAGE;
        }
        memcpy(ts, after, (size_t)(slash - after));
        ts[slash - after] = '\0';
        if (!po_time_valid(ts)) {
            fprintf(stderr, "payonce: --after: CREATED_AT/OUT_TRADE_NO\n");
            return EXIT_USAGE;
        }
    }
    struct po_page pg = {.after_ts = ts, .after_key = key, .limit = limit};
    json_t *list = NULL;
    po_err rc = po_view_orders(s, cli_opt(o, "tenant"), &f, &pg, &list);
    if (rc)
        return cli_fail(rc, "cannot read the orders");
    if (cli_flag(o, "json")) {
        json_t *doc =
            json_pack("{s:s, s:o, s:b}", "object", "list", "data", list, "has_more", pg.more);
        if (doc && pg.more) {
            char next[sizeof pg.last_ts + sizeof pg.last_key + 2];
            (void)snprintf(next, sizeof next, "%s/%s", pg.last_ts, pg.last_key);
            json_object_set_new(doc, "next_after", json_string(next));
        }
        return doc ? print_doc(doc) : cli_fail(PO_ERR_NOMEM, "out of memory");
    }
    size_t n = json_array_size(list);
    cli_print_list(o, list, order_line);
    printf("%zu order%s", n, n == 1 ? "" : "s");
    if (pg.more)
        printf("; more: --after %s/%s", pg.last_ts, pg.last_key);
    printf("\n");
    return 0;
}

int cli_show_one(struct po_store *s, const char *tenant, const char *id, const char *what,
                 po_err (*view)(struct po_store *, const char *, const char *, json_t **),
                 json_t **doc)
{
    *doc = NULL;
    po_err rc = view(s, tenant, id, doc);
    if (rc) {
        char msg[64];
        (void)snprintf(msg, sizeof msg, "cannot read the %s", what);
        return cli_fail(rc, msg);
    }
    if (!*doc) {
        fprintf(stderr, "payonce: no %s %s in tenant %s\n", what, id, tenant);
        return EXIT_FAIL;
    }
    return 0;
}

int cmd_refund_show(struct po_store *s, const struct opts *o)
{
    json_t *doc = NULL;
    int ret = cli_show_one(s, cli_opt(o, "tenant"), cli_opt(o, "out-refund-no"), "refund",
                           po_view_refund, &doc);
    if (ret)
        return ret;
    if (cli_flag(o, "json"))
        return print_doc(doc);
    char amount[PO_MONEY_MAX];
    money(doc, "amount", amount);
    json_t *sub = json_object_get(doc, "submission");
    printf("%-18s %s\n%-18s %s\n%-18s %s\n%-18s %s\n%-18s %s\n%-18s %s\n", "out_refund_no",
           str(doc, "out_refund_no"), "out_trade_no", str(doc, "out_trade_no"), "amount", amount,
           "status", str(doc, "status"), "channel", str(doc, "channel"), "channel_refund_id",
           str(doc, "channel_refund_id"));
    printf("%-18s %s (%lld attempts%s%s)\n%-18s %s\n%-18s %s\n", "submission", str(sub, "state"),
           (long long)json_integer_value(json_object_get(sub, "attempts")),
           json_is_string(json_object_get(sub, "error")) ? ", last error " : "",
           json_is_string(json_object_get(sub, "error")) ? str(sub, "error") : "", "created_at",
           str(doc, "created_at"), "updated_at", str(doc, "updated_at"));
    if (json_is_string(json_object_get(doc, "suspense_key")))
        printf("%-18s %s (transaction %s, parked in suspense; not the order's payment)\n",
               "returns", str(doc, "suspense_key"), str(doc, "txn_id"));
    json_decref(doc);
    return 0;
}

int cmd_channel_show(struct po_store *s, const struct opts *o)
{
    const char *t = cli_opt(o, "tenant"), *ch = cli_opt(o, "channel");
    json_t *doc = NULL;
    po_err rc = po_view_channel(s, t, ch, (int64_t)time(NULL), &doc);
    if (rc)
        return cli_fail(rc, "cannot read the channel account");
    if (!doc) {
        fprintf(stderr, "payonce: tenant %s has no %s account ('payonce channel set')\n", t, ch);
        return EXIT_FAIL;
    }
    if (cli_flag(o, "json"))
        return print_doc(doc);
    printf("tenant %s, channel %s (updated %s)\n", t, ch, str(doc, "updated_at"));
    const char *name;
    json_t *v;
    json_object_foreach(json_object_get(doc, "config"), name, v)
    {
        if (json_is_array(v)) {
            size_t i;
            json_t *k;
            printf("  %-22s\n", name);
            json_array_foreach(v, i, k)
                printf("    serial %-40s not after %s%s\n", str(k, "serial"),
                       json_is_string(json_object_get(k, "not_after")) ? str(k, "not_after")
                                                                       : "- (a public key)",
                       json_is_true(json_object_get(k, "expired")) ? "  EXPIRED" : "");
        } else if (json_is_integer(v)) {
            printf("  %-22s %lld\n", name, (long long)json_integer_value(v));
        } else {
            printf("  %-22s %s\n", name, json_is_string(v) ? json_string_value(v) : "-");
        }
    }
    json_decref(doc);
    return 0;
}
