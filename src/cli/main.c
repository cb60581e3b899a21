/*
 * main.c — the `payonce` command (DESIGN §10).
 *
 * Every command takes --db URL (fallback PAYONCE_DB, default
 * sqlite:./payonce.db). `--json` output is one JSON document on stdout;
 * errors go to stderr with a non-zero exit status:
 *   1  failure (bad arguments, not found, conflict, store error)
 *   2  usage
 *   3  verify found broken invariants
 *   75 apply: transient failure (outcome retry) — try again
 */
#include "../channel/channel.h"
#include "../core/core.h"
#include "../engine/admin.h"
#include "../engine/engine.h"
#include "../ledger/ledger.h"
#include "../service/service.h"
#include "../store/store.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_int.h"

static int usage(const char *msg)
{
    if (msg)
        fprintf(stderr, "payonce: %s\n", msg);
    cli_help_overview(stderr);
    return EXIT_USAGE;
}

/* Parses "--name value" pairs and the flags listed in `flags`
 * (space-separated). Every option must be in `allowed`. */
static int parse_opts(int argc, char **argv, const char *allowed, const char *flags, struct opts *o)
{
    o->n = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || !a[2]) {
            /* One positional argument, where the command takes a FILE
             * (recon import) or an alert ID (alerts ack|resolve). */
            const char *pos = strstr(allowed, "file")    ? "file"
                              : strstr(allowed, "alert") ? "alert"
                                                         : NULL;
            if (pos && !opt(o, pos) && o->n < PO_OPTS_MAX) {
                o->name[o->n] = pos;
                o->value[o->n++] = a;
                continue;
            }
            fprintf(stderr, "payonce: unexpected argument '%s'\n", a);
            return -1;
        }
        /* --name=value as well as --name value */
        const char *eq = strchr(a, '=');
        size_t namelen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        char pat[64];
        if (po_fmt(pat, sizeof pat, " %.*s ", (int)namelen, a + 2)) {
            fprintf(stderr, "payonce: option too long\n");
            return -1;
        }
        char all[1600], fl[128];
        (void)snprintf(all, sizeof all, " db log-level config %s %s ", allowed, flags);
        (void)snprintf(fl, sizeof fl, " %s ", flags);
        if (!strstr(all, pat)) {
            fprintf(stderr, "payonce: unknown option '%s'\n", a);
            return -1;
        }
        if (o->n >= PO_OPTS_MAX) {
            fprintf(stderr, "payonce: too many options\n");
            return -1;
        }
        if (namelen >= sizeof o->namebuf[0]) {
            fprintf(stderr, "payonce: option too long\n");
            return -1;
        }
        memcpy(o->namebuf[o->n], a + 2, namelen);
        o->namebuf[o->n][namelen] = '\0';
        o->name[o->n] = o->namebuf[o->n];
        if (strstr(fl, pat)) {
            if (eq) {
                fprintf(stderr, "payonce: option '--%s' takes no value\n", o->name[o->n]);
                return -1;
            }
            o->value[o->n++] = NULL;
            continue;
        }
        if (eq) {
            o->value[o->n++] = eq + 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "payonce: option '%s' needs a value\n", a);
            return -1;
        }
        o->value[o->n++] = argv[++i];
    }
    return 0;
}

int opt_all(const struct opts *o, const char *name, const char **vals, int max)
{
    int n = 0;
    for (int i = 0; i < o->n && n < max; i++)
        if (strcmp(o->name[i], name) == 0 && o->value[i])
            vals[n++] = o->value[i];
    return n;
}

const char *opt(const struct opts *o, const char *name)
{
    for (int i = o->n - 1; i >= 0; i--)
        if (strcmp(o->name[i], name) == 0)
            return o->value[i] ? o->value[i] : "";
    return NULL;
}

bool flag(const struct opts *o, const char *name)
{
    return opt(o, name) != NULL;
}

int int_opt(const struct opts *o, const char *name, int64_t min, int64_t max, int64_t dflt,
            int64_t *out)
{
    const char *v = opt(o, name);
    *out = dflt;
    if (v && po_parse_i64(v, min, max, out)) {
        fprintf(stderr, "payonce: --%s must be an integer in %lld..%lld\n", name, (long long)min,
                (long long)max);
        return EXIT_USAGE;
    }
    return 0;
}

int committer_opts(const struct opts *o, int64_t *committers, int64_t *batch_max,
                   int64_t *batch_wait)
{
    int ret = cfg_int(o, "committers", committers); /* bounds: config.c's table */
    if (!ret)
        ret = cfg_int(o, "batch-max", batch_max);
    if (!ret)
        ret = cfg_int(o, "batch-wait-us", batch_wait);
    return ret;
}

/* Returns the named option or prints which one is missing. */
const char *need(const struct opts *o, const char *name)
{
    const char *v = opt(o, name);
    if (!v || !*v)
        fprintf(stderr, "payonce: --%s is required\n", name);
    return v && *v ? v : NULL;
}

/* Reports every required option that is absent; true if any is. */
static bool missing_required(const struct opts *o, const char *required)
{
    char list[256];
    bool missing = false;
    PO_ASSERT(po_strcpy(list, sizeof list, required) == PO_OK);
    for (char *save = NULL, *name = strtok_r(list, " ", &save); name;
         name = strtok_r(NULL, " ", &save))
        if (!need(o, name))
            missing = true;
    return missing;
}

const char *db_url(const struct opts *o)
{
    const char *url = opt(o, "db");
    if (!url)
        url = getenv("PAYONCE_DB");
    if (!url || !*url)
        url = "sqlite:./payonce.db";
    return url;
}

int open_store(const struct opts *o, struct po_store **out)
{
    char err[PO_ERRBUF_MAX] = "";
    po_err rc = po_store_open(db_url(o), out, err, sizeof err);
    if (rc) {
        fprintf(stderr, "payonce: cannot open database: %s\n", err);
        return EXIT_FAIL;
    }
    return 0;
}

void print_list(const struct opts *o, json_t *list, void (*line)(json_t *item))
{
    if (flag(o, "json")) {
        char *out = po_json_dumps(list, JSON_COMPACT);
        puts(out ? out : "[]");
        free(out);
    } else {
        size_t i;
        json_t *item;
        json_array_foreach(list, i, item) line(item);
    }
    json_decref(list);
}

int fail(po_err rc, const char *err)
{
    fprintf(stderr, "payonce: %s (%s)\n", err && *err ? err : "failed", po_err_name(rc));
    return EXIT_FAIL;
}

static int print_json(json_t *doc)
{
    if (!doc)
        return fail(PO_ERR_NOMEM, "out of memory");
    int rc = json_dumpf(doc, stdout, JSON_COMPACT | JSON_SORT_KEYS) == 0 ? 0 : EXIT_FAIL;
    fputc('\n', stdout);
    json_decref(doc);
    return rc;
}

/* ---- commands ---- */

static int cmd_migrate(struct po_store *s, const struct opts *o)
{
    (void)o;
    char err[PO_ERRBUF_MAX] = "";
    int applied = 0, version = 0;
    po_err rc = po_store_migrate(s, &applied, err, sizeof err);
    if (!rc)
        rc = po_store_schema_version(s, &version);
    if (rc)
        return fail(rc, err);
    printf("schema version %d (%d migration%s applied now)\n", version, applied,
           applied == 1 ? "" : "s");
    return 0;
}

static int cmd_tenant_add(struct po_store *s, const struct opts *o)
{
    const char *t = need(o, "tenant");
    if (!t)
        return EXIT_USAGE;
    char err[PO_ERRBUF_MAX] = "";
    bool created = false;
    po_err rc = po_tenant_add(s, t, opt(o, "name"), &created, err, sizeof err);
    if (rc)
        return fail(rc, err);
    printf("tenant %s %s\n", t, created ? "added" : "already exists with the same name");
    return 0;
}

static int cmd_merchant_add(struct po_store *s, const struct opts *o)
{
    const char *t = need(o, "tenant"), *m = need(o, "merchant");
    if (!t || !m)
        return EXIT_USAGE;
    char err[PO_ERRBUF_MAX] = "";
    bool created = false;
    po_err rc = po_merchant_add(s, t, m, &created, err, sizeof err);
    if (rc)
        return fail(rc, err);
    printf("merchant %s %s tenant %s\n", m, created ? "added to" : "already in", t);
    return 0;
}

static int amount_arg(const struct opts *o, int64_t *out)
{
    const char *a = need(o, "amount");
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

static int cmd_order_create(struct po_store *s, const struct opts *o)
{
    struct po_order_spec spec = {
        .tenant = need(o, "tenant"),
        .merchant = need(o, "merchant"),
        .out_trade_no = need(o, "out-trade-no"),
        .currency = opt(o, "currency") ? opt(o, "currency") : "CNY",
        .channel = opt(o, "channel"),
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
    char err[PO_ERRBUF_MAX] = "";
    bool created = false;
    po_err rc = po_order_create(s, &spec, &created, err, sizeof err);
    if (rc)
        return fail(rc, err);
    char amount[PO_MONEY_MAX];
    po_money_format(spec.amount_minor, spec.currency, amount, sizeof amount);
    printf("order %s %s (PAYING, %s)\n", spec.out_trade_no,
           created ? "created" : "already exists with the same fields", amount);
    return 0;
}

static int cmd_order_show(struct po_store *s, const struct opts *o)
{
    const char *t = need(o, "tenant"), *no = need(o, "out-trade-no");
    if (!t || !no)
        return EXIT_USAGE;
    json_t *doc = NULL;
    int ret = show_one(s, t, no, "order", po_view_order, &doc);
    if (ret)
        return ret;
    json_object_set_new(doc, "tenant", json_string(t));
    if (flag(o, "json"))
        return print_json(doc);
    static const char *const order[] = {
        "tenant",          "out_trade_no", "merchant",       "channel", "amount",
        "currency",        "status",       "channel_txn_id", "paid_at", "refund_reserved",
        "refunded_amount", "created_at",   "updated_at"};
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

static int cmd_refund_create(struct po_store *s, const struct opts *o)
{
    const char *t = need(o, "tenant"), *no = need(o, "out-trade-no"),
               *rno = need(o, "out-refund-no");
    int64_t amount = 0;
    if (!t || !no || !rno)
        return EXIT_USAGE;
    int u = amount_arg(o, &amount);
    if (u)
        return u;
    char err[PO_ERRBUF_MAX] = "";
    po_err rc = po_refund_create(s, t, no, rno, amount, err, sizeof err);
    if (rc)
        return fail(rc, err);
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

static int cmd_balances(struct po_store *s, const struct opts *o)
{
    const char *t = need(o, "tenant");
    if (!t)
        return EXIT_USAGE;
    json_t *list = NULL;
    po_err rc = po_view_balances(s, t, &list);
    if (rc)
        return fail(rc, "cannot read the balances");
    if (flag(o, "json"))
        return print_json(json_pack("{s:s, s:o}", "tenant", t, "balances", list));
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

static int cmd_alerts(struct po_store *s, const struct opts *o)
{
    const char *t = need(o, "tenant");
    if (!t)
        return EXIT_USAGE;
    const char *state = opt(o, "state");
    if (state && !po_alert_state_valid(state)) {
        fprintf(stderr, "payonce: --state: open, acknowledged or resolved\n");
        return EXIT_USAGE;
    }
    struct po_page pg = {.after_ts = "", .after_key = "", .limit = 1000};
    json_t *list = NULL;
    po_err rc = po_view_alerts(s, t, state, &pg, &list);
    if (rc)
        return fail(rc, "cannot read the alerts");
    if (flag(o, "json"))
        return print_json(json_pack("{s:s, s:o}", "tenant", t, "alerts", list));
    size_t i;
    json_t *a;
    json_array_foreach(list, i, a)
    {
        char money[PO_MONEY_MAX];
        po_money_format((int64_t)json_integer_value(json_object_get(a, "amount")),
                        json_string_value(json_object_get(a, "currency")), money, sizeof money);
        printf("%s %-12s %-22s %s  %s\n   id %s",
               json_string_value(json_object_get(a, "created_at")),
               json_string_value(json_object_get(a, "state")),
               json_string_value(json_object_get(a, "reason")), money,
               json_string_value(json_object_get(a, "detail")),
               json_string_value(json_object_get(a, "id")));
        if (json_is_string(json_object_get(a, "state_by")))
            printf("  (%s by %s at %s%s%s)", json_string_value(json_object_get(a, "state")),
                   json_string_value(json_object_get(a, "state_by")),
                   json_string_value(json_object_get(a, "state_at")),
                   json_is_string(json_object_get(a, "state_note")) ? ": " : "",
                   json_is_string(json_object_get(a, "state_note"))
                       ? json_string_value(json_object_get(a, "state_note"))
                       : "");
        printf("\n");
    }
    printf("%zu alert%s\n", json_array_size(list), json_array_size(list) == 1 ? "" : "s");
    json_decref(list);
    return 0;
}

/* alerts ack|resolve: the operator is --by, else $USER. */
static int alert_act(struct po_store *s, const struct opts *o, enum po_alert_action action)
{
    const char *by = opt(o, "by") ? opt(o, "by") : getenv("USER");
    char err[PO_ERRBUF_MAX] = "";
    bool changed = false;
    po_err rc = po_alert_act(s, opt(o, "tenant"), opt(o, "alert"), action, by ? by : "operator",
                             opt(o, "note"), &changed, err, sizeof err);
    if (rc)
        return fail(rc, err);
    printf("alert %s %s\n", opt(o, "alert"),
           !changed                 ? "was acknowledged already"
           : action == PO_ALERT_ACK ? "acknowledged"
                                    : "resolved");
    return 0;
}

static int cmd_alerts_ack(struct po_store *s, const struct opts *o)
{
    return alert_act(s, o, PO_ALERT_ACK);
}

static int cmd_alerts_resolve(struct po_store *s, const struct opts *o)
{
    return alert_act(s, o, PO_ALERT_RESOLVE);
}

typedef po_err (*alert_engine_fn)(struct po_store *s, const char *tenant, const char *alert_id,
                                  const char *actor, const char *note, struct po_outcome *out,
                                  bool *resolved, char *err, size_t errcap);

/* An alert's event through the engine, audited (replay, accept): prints the
 * outcome and whether the alert is resolved (exit 1 when it is not). */
static int alert_engine(struct po_store *s, const struct opts *o, alert_engine_fn act,
                        const char *verb, const char *yes, const char *no)
{
    const char *by = opt(o, "by") ? opt(o, "by") : getenv("USER");
    char err[PO_ERRBUF_MAX] = "", js[256];
    struct po_outcome out;
    bool resolved = false;
    po_err rc = act(s, opt(o, "tenant"), opt(o, "alert"), by ? by : "operator", opt(o, "note"),
                    &out, &resolved, err, sizeof err);
    if (rc)
        return fail(rc, err);
    if (po_outcome_to_json(&out, js, sizeof js))
        js[0] = '\0';
    printf("%s alert %s: %s; %s\n", verb, opt(o, "alert"), js, resolved ? yes : no);
    return resolved ? 0 : EXIT_FAIL;
}

/* alerts replay: the refused payment through the engine again (after the
 * cause was fixed, e.g. the order created); audited; resolves when credited. */
static int cmd_alerts_replay(struct po_store *s, const struct opts *o)
{
    return alert_engine(s, o, po_alert_replay, "replayed", "credited, the alert is resolved",
                        "not credited, the alert stays (fix the cause and replay again)");
}

/* alerts accept: a refund the channel made after payonce had closed it,
 * taken as the order's through the engine; audited; resolves when applied. */
static int cmd_alerts_accept(struct po_store *s, const struct opts *o)
{
    return alert_engine(s, o, po_alert_accept, "accepted",
                        "the refund is the order's, the money left suspense, the alert is resolved",
                        "not applied, the alert stays (docs/operations.md)");
}

/* alerts refund: a payment parked in suspense back to the payer, through
 * the channel's refund and the engine; audited; payonce resolves the alert
 * when the channel's success is applied. */
static int cmd_alerts_refund(struct po_store *s, const struct opts *o)
{
    const char *by = opt(o, "by") ? opt(o, "by") : getenv("USER");
    unsigned char master[32];
    bool have = false;
    int ret = load_master_key(o, master, &have);
    if (ret)
        return ret;
    char err[PO_ERRBUF_MAX] = "", money[PO_MONEY_MAX];
    struct po_suspense_refund r;
    po_err rc = po_alert_refund(s, have ? master : NULL, opt(o, "tenant"), opt(o, "alert"),
                                opt(o, "out-refund-no"), by ? by : "operator", opt(o, "note"), &r,
                                err, sizeof err);
    po_secure_zero(master, sizeof master);
    if (rc)
        return fail(rc, err);
    po_money_format(r.amount, r.currency, money, sizeof money);
    printf("refund %s of %s (%s transaction %s) %s: %s, submission %s%s%s\n", r.out_refund_no,
           money, r.channel, r.txn_id, r.created ? "requested" : "was requested already", r.status,
           r.submit_state, r.submit_error[0] ? ", last error " : "", r.submit_error);
    if (strcmp(r.status, "SUCCESS") == 0)
        printf("the channel refunded it: the money left suspense, the alert is resolved\n");
    else if (strcmp(r.submit_state, "manual") == 0)
        printf("%s has no refund API: refund it in the channel's merchant platform with refund"
               " number %s; its notification clears the suspense\n",
               r.channel, r.out_refund_no);
    else if (strcmp(r.status, "CLOSED") == 0)
        printf("the refund is closed: see the refund_rejected_by_channel alert, fix the cause and"
               " request again with a new number\n");
    else
        printf("the channel's refund notification (or the next bill) moves the money out of"
               " suspense and resolves the alert; 'payonce refund show' follows it\n");
    return strcmp(r.status, "CLOSED") == 0 ? EXIT_FAIL : 0;
}

static int cmd_apply(struct po_store *s, const struct opts *o)
{
    const char *path = need(o, "event");
    if (!path)
        return EXIT_USAGE;
    char *buf = NULL;
    size_t len = 0;
    char err[PO_ERRBUF_MAX] = "";
    po_err rc = strcmp(path, "-") == 0 ? po_stream_read(stdin, PO_EVENT_FILE_MAX, &buf, &len)
                                       : po_file_read(path, PO_EVENT_FILE_MAX, &buf, &len);
    if (rc) {
        fprintf(stderr, "payonce: cannot read %s: %s%s\n", path, po_file_error(rc),
                rc == PO_ERR_LIMIT ? " (larger than 64 KiB)" : "");
        return EXIT_FAIL;
    }
    struct po_event ev;
    rc = po_event_from_json(buf, len, &ev, err, sizeof err); /* registered channels only */
    free(buf);
    if (rc) {
        fprintf(stderr, "payonce: invalid event: %s\n", err);
        return EXIT_FAIL;
    }
    struct po_outcome out;
    rc = po_engine_apply(s, NULL, &ev, &out);
    PO_ASSERT(rc == PO_OK);
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

static int cmd_verify(struct po_store *s, const struct opts *o)
{
    struct verify_ctx vc = {.json = flag(o, "json"), .list = json_array()};
    char err[PO_ERRBUF_MAX] = "";
    int count = 0;
    po_err rc = po_ledger_verify(s, verify_report, &vc, &count, err, sizeof err);
    if (rc) {
        json_decref(vc.list);
        return fail(rc, err);
    }
    if (vc.json) {
        if (print_json(json_pack("{s:b, s:i, s:o}", "ok", count == 0, "violations_count", count,
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

const struct cli_command cli_commands[] = {
    {"migrate", NULL, "", "", "", cmd_migrate, false,
     "create or upgrade the schema (creates a SQLite file)"},
    {"tenant", "add", "tenant name", "tenant", "", cmd_tenant_add, false, "add a tenant"},
    {"tenant", "list", "", "", "json", cmd_tenant_list, false,
     "every tenant with its merchants and channels"},
    {"merchant", "add", "tenant merchant", "tenant merchant", "", cmd_merchant_add, false,
     "add a merchant to a tenant"},
    {"merchant", "list", "tenant", "tenant", "json", cmd_merchant_list, false,
     "a tenant's merchants"},
    {"order", "create", "tenant merchant out-trade-no amount currency channel",
     "tenant merchant out-trade-no amount", "", cmd_order_create, false,
     "create an order (idempotent for identical fields)"},
    {"order", "show", "tenant out-trade-no", "tenant out-trade-no", "json", cmd_order_show, false,
     "show one order"},
    {"order", "list", "tenant status merchant since limit after", "tenant", "json", cmd_order_list,
     false, "a tenant's orders, oldest first, filtered and paged"},
    {"refund", "create", "tenant out-trade-no out-refund-no amount",
     "tenant out-trade-no out-refund-no amount", "", cmd_refund_create, false,
     "record a refund request on a paid order"},
    {"refund", "show", "tenant out-refund-no", "tenant out-refund-no", "json", cmd_refund_show,
     false, "show one refund and its submission to the channel"},
    {"ledger", "balances", "tenant", "tenant", "json", cmd_balances, false,
     "a tenant's account balances"},
    {"alerts", "ack", "tenant alert note by", "tenant alert", "", cmd_alerts_ack, false,
     "acknowledge an alert: someone is on it"},
    {"alerts", "resolve", "tenant alert note by", "tenant alert note", "", cmd_alerts_resolve,
     false, "resolve an alert, saying why (docs/operations.md's runbook)"},
    {"alerts", "replay", "tenant alert note by", "tenant alert note", "", cmd_alerts_replay, false,
     "a refused payment's alert: the payment through the engine again, audited"},
    {"alerts", "accept", "tenant alert note by", "tenant alert note", "", cmd_alerts_accept, false,
     "a refund_after_close alert: the channel's refund taken as the order's, audited"},
    {"alerts", "refund", "tenant alert out-refund-no note by master-key-file",
     "tenant alert out-refund-no note", "", cmd_alerts_refund, false,
     "a suspense payment's alert: refund that payment to the payer, audited"},
    {"alerts", NULL, "tenant state", "tenant", "json", cmd_alerts, false, "a tenant's alerts"},
    {"apply", NULL, "event", "event", "", cmd_apply, false,
     "apply one normalised event (what a verified callback becomes)"},
    {"verify", NULL, "", "", "json", cmd_verify, false,
     "check every ledger invariant (exit 3 when one is broken)"},
    /* allowed NULL: the options come from the channel registry */
    {"channel", "set", NULL, "tenant channel", "insecure-dev", cmd_channel_set, false,
     "configure a tenant's channel account (secrets sealed)"},
    {"channel", "show", "tenant channel", "tenant channel", "json", cmd_channel_show, false,
     "a channel account, secrets redacted, certificates with their expiry"},
    /* "@serve": the options of config.c's table, and --config */
    {"serve", NULL, "@serve", "", "insecure-dev", cmd_serve, false,
     "run the gateway: callbacks, tenant API, jobs, webhooks"},
    {"config", "check", "@serve", "", "insecure-dev", cmd_config_check, true,
     "validate serve's configuration and print the effective values"},
    {"config", "doc", "", "", "", cmd_config_doc, true,
     "serve's options as Markdown (docs/configuration.md)"},
    {"bench", NULL, "db orders connections committers batch-max batch-wait-us plan-rows out only",
     "", "", cmd_bench, true, "throughput with its baselines (docs/performance.md)"},
    {"sim", "keys", "dir mode tenant", "", "", cmd_sim_keys, true,
     "make the channel simulator's keys"},
    {"sim", "pay",
     "dir notify-url order channel currency txn copies tamper-amount time-factor max-attempts"
     " deadline-ms pace-ms",
     "order", "concurrent reorder lose forge", cmd_sim_pay, true,
     "pay orders through the simulated channel (callbacks to payonce)"},
    {"sim", "serve", "dir listen time-factor refund-delay-ms", "", "", cmd_sim_serve, true,
     "the simulated channel's query, bill and refund APIs"},
    {"sim", "receiver", "listen secret-file record fail down-ms duration-s", "secret-file", "",
     cmd_sim_receiver, true, "a tenant's webhook receiver that verifies and records events"},
    {"recon", "import", "tenant channel file master-key-file", "tenant channel", "force json",
     cmd_recon_import, false, "import a channel bill and reconcile it"},
    {"recon", "query", "tenant channel min-age limit master-key-file", "tenant", "json",
     cmd_recon_query, false, "ask the channel about unpaid orders (active query)"},
    {"recon", "runs", "tenant", "tenant", "json", cmd_recon_runs, false,
     "what was reconciled when"},
    {"apikey", "create", "tenant", "tenant", "", cmd_apikey_create, false,
     "create a tenant API key (printed once)"},
    {"apikey", "revoke", "tenant key-id", "tenant key-id", "", cmd_apikey_revoke, false,
     "revoke a tenant API key"},
    {"apikey", "list", "tenant", "tenant", "json", cmd_apikey_list, false, "a tenant's API keys"},
    {"idempotency", "reap", "retention", "", "", cmd_idempotency_reap, false,
     "delete stored API answers older than the retention"},
    {"webhook", "add", "tenant url events master-key-file webhook-allow-net", "tenant url",
     "insecure-dev", cmd_webhook_add, false,
     "add a tenant webhook endpoint (prints its signing secret)"},
    {"webhook", "list", "tenant", "tenant", "json", cmd_webhook_list, false,
     "a tenant's webhook endpoints"},
    {"webhook", "remove", "tenant endpoint", "tenant endpoint", "", cmd_webhook_remove, false,
     "remove a webhook endpoint"},
    {"webhook", "rotate-secret", "tenant endpoint master-key-file", "tenant endpoint",
     "insecure-dev", cmd_webhook_rotate, false,
     "give an endpoint a new signing secret (prints it)"},
    {"webhook", "redrive", "tenant event endpoint since", "tenant", "", cmd_webhook_redrive, false,
     "send dead deliveries again (one event, or an endpoint's since TIME)"},
    {"webhook", "attempts", "tenant event", "tenant event", "json", cmd_webhook_attempts, false,
     "delivery attempts of one event"},
};
const size_t cli_ncommands = sizeof cli_commands / sizeof cli_commands[0];

/* A missing SQLite file is refused (a typo in --db must not create an
 * empty database somewhere); only migrate creates one. */
static int sqlite_file_exists(const char *url)
{
    if (strncmp(url, "sqlite:", 7) != 0)
        return 0;
    const char *path = url + 7;
    struct stat st;
    if (!*path || stat(path, &st) == 0)
        return 0; /* no path: the store says so */
    fprintf(stderr,
            "payonce: no database at %s (%s); create it with 'payonce migrate --db %s',"
            " or name the right one with --db\n",
            path, strerror(errno), url);
    return EXIT_FAIL;
}

static bool wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    return false;
}

static int run_parsed(const struct cli_command *c, const struct opts *file, const struct opts *o);

static int run_command(const struct cli_command *c, int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        cli_help_command(stdout, c);
        return 0;
    }
    struct opts flags, o;
    char more_opts[1400];
    const char *allowed = c->allowed;
    if (!allowed) {
        channel_set_options(more_opts, sizeof more_opts);
        allowed = more_opts;
    } else if (strcmp(allowed, "@serve") == 0) {
        cli_allowed(c, more_opts, sizeof more_opts);
        allowed = more_opts;
    }
    if (parse_opts(argc, argv, allowed, c->flags, &flags)) {
        fprintf(stderr, "'payonce %s%s%s --help' lists its options\n", c->word1,
                c->word2 ? " " : "", c->word2 ? c->word2 : "");
        return EXIT_USAGE;
    }
    /* The config file first, the environment and the flags over it: serve
     * and config check read all of it (the default file when it exists);
     * the other commands take db and master-key-file from a file named
     * with --config. */
    struct opts file = {0};
    char *filebuf = NULL;
    o = flags;
    bool serving = c->allowed && strcmp(c->allowed, "@serve") == 0;
    if (serving || opt(&flags, "config")) {
        const char *path = opt(&flags, "config");
        int r = cfg_load(path ? path : PO_CONFIG_DEFAULT, path != NULL, &file, &filebuf);
        if (r) {
            free(filebuf);
            return r;
        }
        cli_config_path = path ? path : filebuf ? PO_CONFIG_DEFAULT : NULL;
        if (file.n + flags.n > PO_OPTS_MAX) {
            free(filebuf);
            fprintf(stderr, "payonce: too many options\n");
            return EXIT_USAGE;
        }
        o.n = 0;
        for (int i = 0; i < file.n; i++) {
            const char *n = file.name[i];
            if ((strcmp(n, "db") == 0 && getenv("PAYONCE_DB")) ||
                (strcmp(n, "master-key-file") == 0 && getenv("PAYONCE_MASTER_KEY_FILE")) ||
                (!serving && strcmp(n, "db") != 0 && strcmp(n, "master-key-file") != 0))
                continue; /* the environment wins; other commands take only these two */
            o.name[o.n] = n;
            o.value[o.n++] = file.value[i];
        }
        for (int i = 0; i < flags.n; i++, o.n++) {
            o.name[o.n] = flags.name[i];
            o.value[o.n] = flags.value[i];
        }
    }
    int ret = run_parsed(c, &file, &o);
    free(filebuf);
    return ret;
}

static int run_parsed(const struct cli_command *c, const struct opts *file, const struct opts *po)
{
    struct opts o = *po;
    if (c->run == cmd_config_check)
        return cfg_check(file, &o, cli_config_path);
    if (missing_required(&o, c->required))
        return EXIT_USAGE;
    /* The server logs JSON lines at info; the other commands speak to a
     * person: plain lines, errors only unless --log-level asks for more
     * (what they found is in their own output, alerts in the database). */
    bool server = c->run == cmd_serve;
    enum po_log_level lvl = server ? PO_LOG_INFO : PO_LOG_ERROR;
    if (opt(&o, "log-level") && !po_log_level_parse(opt(&o, "log-level"), &lvl)) {
        fprintf(stderr, "payonce: --log-level: debug, info, warn or error\n");
        return EXIT_USAGE;
    }
    po_log_set_json(server);
    po_log_set_level(lvl);
    if (c->no_store)
        return c->run(NULL, &o);
    int ret = c->run == cmd_migrate ? 0 : sqlite_file_exists(db_url(&o));
    struct po_store *s = NULL;
    if (!ret)
        ret = open_store(&o, &s);
    if (ret)
        return ret;
    /* Every command but migrate needs the schema. */
    int version = 0;
    if (c->run != cmd_migrate && (po_store_schema_version(s, &version) || version == 0)) {
        fprintf(stderr, "payonce: the database has no schema; run 'payonce migrate' first\n");
        po_store_close(s);
        return EXIT_FAIL;
    }
    ret = c->run(s, &o);
    po_store_close(s);
    return ret;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage("no command");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return cli_help(0, NULL);
    if (strcmp(argv[1], "help") == 0)
        return cli_help(argc - 2, argv + 2);
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("payonce %s\n", PO_VERSION);
        return 0;
    }
    bool group = false;
    for (size_t i = 0; i < cli_ncommands; i++) {
        const struct cli_command *c = &cli_commands[i];
        if (strcmp(argv[1], c->word1) != 0)
            continue;
        group = true;
        if (!c->word2)
            return run_command(c, argc - 2, argv + 2);
        if (argc >= 3 && strcmp(argv[2], c->word2) == 0)
            return run_command(c, argc - 3, argv + 3);
    }
    if (group) { /* a known group: its subcommands */
        bool asked = argc >= 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0);
        if (!asked)
            fprintf(stderr, "payonce: %s: %s\n", argv[1],
                    argc >= 3 ? "unknown subcommand" : "which one?");
        char *w[] = {argv[1]};
        int rc = cli_help(1, w);
        return asked ? rc : EXIT_USAGE;
    }
    fprintf(stderr, "payonce: unknown command '%s'\n", argv[1]);
    cli_help_overview(stderr);
    return EXIT_USAGE;
}
