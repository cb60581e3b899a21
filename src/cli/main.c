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
#include <string.h>

#include "cli_int.h"

static const char usage_text[] =
    "usage: payonce COMMAND [options]   (every command takes --db URL)\n"
    "  migrate                                   create/upgrade the schema\n"
    "  tenant add      --tenant ID [--name NAME]\n"
    "  merchant add    --tenant ID --merchant ID\n"
    "  order create    --tenant ID --merchant ID --out-trade-no NO --amount MINOR\n"
    "                  [--currency CNY] [--channel wechatpay|alipay|stripe]\n"
    "  order show      --tenant ID --out-trade-no NO [--json]\n"
    "  refund create   --tenant ID --out-trade-no NO --out-refund-no NO --amount MINOR\n"
    "  ledger balances --tenant ID [--json]\n"
    "  alerts          --tenant ID [--json]\n"
    "  apply           --event FILE.json          apply one normalised event\n"
    "  channel set     --tenant ID --channel wechatpay|alipay|stripe [channel options]\n"
    "                  (see README: keys, certificates, secrets; sealed with the master key)\n"
    "  sim keys        [--dir DIR] [--mode cert|pubkey] [--tenant ID]   simulator keys\n"
    "  sim pay         [--dir DIR] --notify-url URL --order NO:AMOUNT [--order ...]\n"
    "                  [--channel C] [--copies N] [--concurrent] [--reorder] [--lose]\n"
    "                  [--forge] [--tamper-amount MINOR] [--time-factor F] [--max-attempts K]\n"
    "                  [--pace-ms MS]   (between orders)\n"
    "  sim serve       [--dir DIR] [--listen 127.0.0.1:8090] [--time-factor F]\n"
    "                  [--refund-delay-ms MS]   the channel's query, bill and refund APIs\n"
    "  sim receiver    --secret-file F [--listen 127.0.0.1:8091] [--record FILE] [--fail N]\n"
    "                  [--down-ms MS] [--duration-s S]   the tenant's webhook receiver\n"
    "  serve           [--listen 127.0.0.1:8080] [--pool-size 8] [--max-connections 4096]\n"
    "                  [--body-max BYTES] [--request-timeout S] [--insecure-dev]\n"
    "                  [--header-timeout 10] [--body-timeout 10] [--max-connections-per-ip 256]\n"
    "                  [--callback-deadline-ms 4000] [--ops-listen HOST:PORT]\n"
    "                  [--threads CORES] [--workers 64] [--committers 2]\n"
    "                  [--batch-max 128] [--batch-wait-us 200]   throughput (docs/performance.md)\n"
    "                  [--query-interval 60] [--query-min-age 300]   active order query\n"
    "                  [--idempotency-retention 604800] [--idempotency-wait-ms 2000]\n"
    "                  [--refund-retry-interval 30]   tenant API (docs/api.md)\n"
    "                  [--webhook-senders 8] [--webhook-timeout-ms 10000]\n"
    "                  [--webhook-retry-base-ms 30000] [--webhook-retry-cap-ms 21600000]\n"
    "                  [--webhook-max-age-s 259200] [--webhook-alert-after-s 3600]\n"
    "                  [--webhook-per-endpoint 2] [--webhook-per-tenant 4]\n"
    "                  [--webhook-poll-ms 200]   tenant webhooks (docs/webhooks.md)\n"
    "  bench           [--db postgresql://EMPTY-DB] [--orders 10000] [--connections 16]\n"
    "                  [--committers 2] [--batch-max 128] [--batch-wait-us 200]\n"
    "                  [--plan-rows 1000000] [--out DIR] [--only RUN,...]\n"
    "                  throughput with its baselines (docs/performance.md)\n"
    "  apikey create   --tenant ID                prints a new tenant API key (once)\n"
    "  apikey revoke   --tenant ID --key-id ID\n"
    "  apikey list     --tenant ID [--json]\n"
    "  webhook add     --tenant ID --url URL [--events T1,T2|*]   prints the signing secret\n"
    "  webhook list    --tenant ID [--json]\n"
    "  webhook remove  --tenant ID --endpoint ID\n"
    "  webhook rotate-secret --tenant ID --endpoint ID            prints the new secret\n"
    "  webhook redrive --tenant ID (--event ID | --endpoint ID [--since TIME])\n"
    "  webhook attempts --tenant ID --event ID [--json]\n"
    "  idempotency reap [--retention SECONDS]     delete old stored API responses\n"
    "master key: --master-key-file FILE or PAYONCE_MASTER_KEY_FILE (32 bytes or 64 hex digits)\n"
    "  verify          [--json]                   exit 0 only if every invariant holds\n"
    "  recon import    --tenant ID --channel wechatpay FILE [--force] [--json]\n"
    "  recon query     --tenant ID [--channel wechatpay] [--min-age 300] [--limit 1000] [--json]\n"
    "  recon runs      --tenant ID [--json]       what was reconciled when\n"
    "database URL: sqlite:PATH (default sqlite:./payonce.db) or postgresql://...;\n"
    "PAYONCE_DB is used when --db is not given.\n";

static int usage(const char *msg)
{
    if (msg)
        fprintf(stderr, "payonce: %s\n", msg);
    fputs(usage_text, stderr);
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
            /* One positional argument, where the command takes a FILE. */
            if (strstr(allowed, "file") && !opt(o, "file") && o->n < PO_OPTS_MAX) {
                o->name[o->n] = "file";
                o->value[o->n++] = a;
                continue;
            }
            fprintf(stderr, "payonce: unexpected argument '%s'\n", a);
            return -1;
        }
        char pat[64];
        if (po_fmt(pat, sizeof pat, " %s ", a + 2)) {
            fprintf(stderr, "payonce: option too long\n");
            return -1;
        }
        char all[1400], fl[128];
        (void)snprintf(all, sizeof all, " db %s %s ", allowed, flags);
        (void)snprintf(fl, sizeof fl, " %s ", flags);
        if (!strstr(all, pat)) {
            fprintf(stderr, "payonce: unknown option '%s'\n", a);
            return -1;
        }
        if (o->n >= PO_OPTS_MAX) {
            fprintf(stderr, "payonce: too many options\n");
            return -1;
        }
        o->name[o->n] = a + 2;
        if (strstr(fl, pat)) {
            o->value[o->n++] = NULL;
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
    int ret = int_opt(o, "committers", 1, PO_COMMITTER_WORKERS_MAX, 2, committers);
    if (!ret)
        ret = int_opt(o, "batch-max", 1, PO_BATCH_MAX, 128, batch_max);
    if (!ret)
        ret = int_opt(o, "batch-wait-us", 0, PO_BATCH_WAIT_US_MAX, 200, batch_wait);
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
    po_err rc = po_tenant_add(s, t, opt(o, "name"), err, sizeof err);
    if (rc)
        return fail(rc, err);
    printf("tenant %s added\n", t);
    return 0;
}

static int cmd_merchant_add(struct po_store *s, const struct opts *o)
{
    const char *t = need(o, "tenant"), *m = need(o, "merchant");
    if (!t || !m)
        return EXIT_USAGE;
    char err[PO_ERRBUF_MAX] = "";
    po_err rc = po_merchant_add(s, t, m, err, sizeof err);
    if (rc)
        return fail(rc, err);
    printf("merchant %s added to tenant %s\n", m, t);
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
    printf("order %s %s (PAYING, %lld %s)\n", spec.out_trade_no,
           created ? "created" : "already exists with the same fields",
           (long long)spec.amount_minor, spec.currency);
    return 0;
}

static int cmd_order_show(struct po_store *s, const struct opts *o)
{
    const char *t = need(o, "tenant"), *no = need(o, "out-trade-no");
    if (!t || !no)
        return EXIT_USAGE;
    json_t *doc = NULL;
    po_err rc = po_view_order(s, t, no, &doc);
    if (rc)
        return fail(rc, "cannot read the order");
    if (!doc) {
        fprintf(stderr, "payonce: no order %s in tenant %s\n", no, t);
        return EXIT_FAIL;
    }
    json_object_set_new(doc, "tenant", json_string(t));
    if (flag(o, "json"))
        return print_json(doc);
    static const char *const order[] = {
        "tenant",          "out_trade_no", "merchant",       "channel", "amount",
        "currency",        "status",       "channel_txn_id", "paid_at", "refund_reserved",
        "refunded_amount", "created_at",   "updated_at"};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        json_t *v = json_object_get(doc, order[i]);
        if (json_is_integer(v))
            printf("%-15s %lld\n", order[i], (long long)json_integer_value(v));
        else
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
    printf("refund %s of order %s recorded (PROCESSING, %lld)\n", rno, no, (long long)amount);
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
    printf("%-40s %-8s %20s\n", "account", "currency", "balance (minor units)");
    size_t i;
    json_t *b;
    json_array_foreach(list, i, b)
        printf("%-40s %-8s %20lld\n", json_string_value(json_object_get(b, "account")),
               json_string_value(json_object_get(b, "currency")),
               (long long)json_integer_value(json_object_get(b, "balance")));
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
    struct po_page pg = {.after_ts = "", .after_key = "", .limit = 1000};
    json_t *list = NULL;
    po_err rc = po_view_alerts(s, t, &pg, &list);
    if (rc)
        return fail(rc, "cannot read the alerts");
    if (flag(o, "json"))
        return print_json(json_pack("{s:s, s:o}", "tenant", t, "alerts", list));
    size_t i;
    json_t *a;
    json_array_foreach(list, i, a)
    {
        printf("%s %-22s %s (%lld %s) %s\n", json_string_value(json_object_get(a, "created_at")),
               json_string_value(json_object_get(a, "reason")),
               json_string_value(json_object_get(a, "idem_key")),
               (long long)json_integer_value(json_object_get(a, "amount")),
               json_string_value(json_object_get(a, "currency")),
               json_string_value(json_object_get(a, "detail")));
    }
    printf("%zu alert%s\n", json_array_size(list), json_array_size(list) == 1 ? "" : "s");
    json_decref(list);
    return 0;
}

static int cmd_apply(struct po_store *s, const struct opts *o)
{
    const char *path = need(o, "event");
    if (!path)
        return EXIT_USAGE;
    char *buf = NULL;
    size_t len = 0;
    char err[PO_ERRBUF_MAX] = "";
    po_err rc = po_file_read(path, PO_EVENT_FILE_MAX, &buf, &len);
    if (rc) {
        fprintf(stderr, "payonce: cannot read %s: %s%s\n", path, po_err_name(rc),
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

struct command {
    const char *word1, *word2; /* word2 NULL for one-word commands */
    const char *allowed;       /* value options */
    const char *required;      /* value options that must be present */
    const char *flags;
    int (*run)(struct po_store *s, const struct opts *o);
    bool no_store; /* runs without a database (s is NULL) */
};

static const struct command commands[] = {
    {"migrate", NULL, "", "", "", cmd_migrate},
    {"tenant", "add", "tenant name", "tenant", "", cmd_tenant_add},
    {"merchant", "add", "tenant merchant", "tenant merchant", "", cmd_merchant_add},
    {"order", "create", "tenant merchant out-trade-no amount currency channel",
     "tenant merchant out-trade-no amount", "", cmd_order_create},
    {"order", "show", "tenant out-trade-no", "tenant out-trade-no", "json", cmd_order_show},
    {"refund", "create", "tenant out-trade-no out-refund-no amount",
     "tenant out-trade-no out-refund-no amount", "", cmd_refund_create},
    {"ledger", "balances", "tenant", "tenant", "json", cmd_balances},
    {"alerts", NULL, "tenant", "tenant", "json", cmd_alerts},
    {"apply", NULL, "event", "event", "", cmd_apply},
    {"verify", NULL, "", "", "json", cmd_verify},
    /* allowed NULL: the options come from the channel registry */
    {"channel", "set", NULL, "tenant channel", "insecure-dev", cmd_channel_set},
    {"serve", NULL,
     "listen pool-size max-connections body-max request-timeout master-key-file query-interval"
     " query-min-age idempotency-retention idempotency-wait-ms refund-retry-interval threads"
     " workers committers batch-max batch-wait-us header-timeout body-timeout"
     " max-connections-per-ip callback-deadline-ms ops-listen webhook-senders"
     " webhook-per-endpoint webhook-per-tenant webhook-timeout-ms webhook-retry-base-ms"
     " webhook-retry-cap-ms webhook-max-age-s webhook-alert-after-s webhook-poll-ms",
     "", "insecure-dev", cmd_serve},
    {"bench", NULL, "orders connections committers batch-max batch-wait-us plan-rows out only", "",
     "", cmd_bench, true},
    {"sim", "keys", "dir mode tenant", "", "", cmd_sim_keys, true},
    {"sim", "pay",
     "dir notify-url order channel currency txn copies tamper-amount time-factor max-attempts"
     " deadline-ms pace-ms",
     "order", "concurrent reorder lose forge", cmd_sim_pay, true},
    {"sim", "serve", "dir listen time-factor refund-delay-ms", "", "", cmd_sim_serve, true},
    {"sim", "receiver", "listen secret-file record fail down-ms duration-s", "secret-file", "",
     cmd_sim_receiver, true},
    {"recon", "import", "tenant channel file master-key-file", "tenant channel", "force json",
     cmd_recon_import},
    {"recon", "query", "tenant channel min-age limit master-key-file", "tenant", "json",
     cmd_recon_query},
    {"recon", "runs", "tenant", "tenant", "json", cmd_recon_runs},
    {"apikey", "create", "tenant", "tenant", "", cmd_apikey_create},
    {"apikey", "revoke", "tenant key-id", "tenant key-id", "", cmd_apikey_revoke},
    {"apikey", "list", "tenant", "tenant", "json", cmd_apikey_list},
    {"idempotency", "reap", "retention", "", "", cmd_idempotency_reap},
    {"webhook", "add", "tenant url events master-key-file", "tenant url", "insecure-dev",
     cmd_webhook_add},
    {"webhook", "list", "tenant", "tenant", "json", cmd_webhook_list},
    {"webhook", "remove", "tenant endpoint", "tenant endpoint", "", cmd_webhook_remove},
    {"webhook", "rotate-secret", "tenant endpoint master-key-file", "tenant endpoint",
     "insecure-dev", cmd_webhook_rotate},
    {"webhook", "redrive", "tenant event endpoint since", "tenant", "", cmd_webhook_redrive},
    {"webhook", "attempts", "tenant event", "tenant event", "json", cmd_webhook_attempts},
};

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage("no command");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        const struct command *c = &commands[i];
        if (strcmp(argv[1], c->word1) != 0)
            continue;
        int first = 2;
        if (c->word2) {
            if (argc < 3 || strcmp(argv[2], c->word2) != 0)
                continue;
            first = 3;
        }
        struct opts o;
        char registry_opts[1024];
        const char *allowed = c->allowed;
        if (!allowed) {
            channel_set_options(registry_opts, sizeof registry_opts);
            allowed = registry_opts;
        }
        if (parse_opts(argc - first, argv + first, allowed, c->flags, &o))
            return usage(NULL);
        if (missing_required(&o, c->required))
            return EXIT_USAGE;
        if (c->no_store)
            return c->run(NULL, &o);
        struct po_store *s = NULL;
        int ret = open_store(&o, &s);
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
    return usage("unknown command");
}
