/*
 * main.c — the `payonce` command (README.md, "The command line").
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
#include "../engine/objects.h"
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
const struct cli_command cli_commands[] = {
    {"migrate", NULL, "", "", "", cmd_migrate, false,
     "create or upgrade the schema (creates a SQLite file)"},
    {"tenant", "add", "tenant name", "tenant", "", cmd_tenant_add, false, "add a tenant"},
    {"tenant", "set", "tenant order-ttl", "tenant order-ttl", "", cmd_tenant_set, false,
     "a tenant's default order expiry (serve closes expired orders at the channel)"},
    {"tenant", "list", "", "", "json", cmd_tenant_list, false,
     "every tenant with its merchants and channels"},
    {"merchant", "add", "tenant merchant", "tenant merchant", "", cmd_merchant_add, false,
     "add a merchant to a tenant"},
    {"merchant", "list", "tenant", "tenant", "json", cmd_merchant_list, false,
     "a tenant's merchants"},
    {"order", "create", "tenant merchant out-trade-no amount currency channel",
     "tenant merchant out-trade-no amount", "", cmd_order_create, false,
     "create an order (idempotent for identical fields)"},
    {"order", "import", "tenant file", "tenant file", "json", cmd_order_import, false,
     "create orders in bulk from a file, all or nothing (MERCHANT,OUT_TRADE_NO,AMOUNT"
     "[,CURRENCY[,CHANNEL]] a line)"},
    {"order", "show", "tenant out-trade-no", "tenant out-trade-no", "json", cmd_order_show, false,
     "show one order"},
    {"order", "close", "tenant out-trade-no master-key-file", "tenant out-trade-no", "",
     cmd_order_close, false, "close an order at its channel first, then here (as the API does)"},
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
    {"alerts", "redrive", "tenant alert note by", "tenant alert note", "", cmd_alerts_redrive,
     false, "a webhook_dead_letter alert: its event sent again to the tenant, the alert resolved"},
    {"alerts", "refund", "tenant alert out-refund-no note by master-key-file",
     "tenant alert out-refund-no note", "", cmd_alerts_refund, false,
     "a suspense payment's alert: refund that payment to the payer, audited"},
    {"alerts", NULL, "tenant state", "tenant", "json", cmd_alerts, false, "a tenant's alerts"},
    {"apply", NULL, "event", "event", "", cmd_apply, false,
     "apply one normalised event (what a verified callback becomes)"},
    {"report", NULL, "tenant from to", "tenant", "json csv", cmd_report, false,
     "money per day, merchant and channel: gross, refunds, fees, net, suspense; reconciled"
     " to the ledger"},
    {"backup", NULL, "to db master-key-file", "to", "json", cmd_backup, true,
     "a copy of the live SQLite database, checked (PostgreSQL: pg_dump; docs/operations.md)"},
    {"restore", NULL, "from db master-key-file", "from", "json", cmd_restore, true,
     "a backup as a new SQLite database (--db names it; nothing is overwritten), checked"},
    {"migrate-store", NULL, "from to", "from to", "json", cmd_migrate_store, true,
     "move every row of a SQLite database into a new PostgreSQL one, verified on both sides"},
    {"verify", NULL, "", "", "json", cmd_verify, false,
     "check every ledger invariant (exit 3 when one is broken)"},
    {"audit", "verify", "tenant anchor late master-key-file", "", "json", cmd_audit_verify, false,
     "walk every tenant's chain of callback records and name the first broken link (exit 3)"},
    {"audit", "head", "", "", "json", cmd_audit_head, false,
     "each tenant's newest sealed record and its hash (an anchor file for audit verify)"},
    {"audit", "show", "tenant out-trade-no request-id seq master-key-file", "tenant", "json",
     cmd_audit_show, false,
     "the callbacks of an order as received: headers, body, their place in the chain"},
    {"audit", "seal", "master-key-file", "", "", cmd_audit_seal, false,
     "seal the records serve has not (serve seals every two seconds)"},
    /* allowed NULL: the options come from the channel registry */
    {"channel", "set", NULL, "tenant channel", "insecure-dev", cmd_channel_set, false,
     "configure a tenant's channel account (secrets sealed)"},
    {"channel", "show", "tenant channel", "tenant channel", "json", cmd_channel_show, false,
     "a channel account, secrets redacted, certificates with their expiry"},
    {"channel", "check", "tenant channel master-key-file", "tenant channel", "", cmd_channel_check,
     false, "try each API payonce calls at the channel with the tenant's keys (harmless calls)"},
    /* "@serve": the options of cmd_config.c's table, and --config */
    {"serve", NULL, "@serve", "", "insecure-dev console no-callback-record", cmd_serve, false,
     "run the gateway: callbacks, tenant API, jobs, webhooks"},
    {"config", "check", "@serve", "", "insecure-dev console no-callback-record", cmd_config_check,
     true, "validate serve's configuration and print the effective values"},
    {"config", "doc", "", "", "", cmd_config_doc, true,
     "serve's options as Markdown (docs/configuration.md)"},
    {"bench", NULL,
     "db orders connections committers batch-max batch-wait-us known-events plan-rows out only"
     " nodes balance",
     "", "", cmd_bench, true, "throughput with its baselines (docs/performance.md)"},
    {"sim", "keys", "dir mode tenant api-url gateway-url", "", "script", cmd_sim_keys, true,
     "make the channel simulator's keys"},
    {"sim", "pay",
     "dir notify-url order orders-file channel currency txn copies tamper-amount time-factor"
     " max-attempts deadline-ms pace-ms paid-on history",
     "", "concurrent reorder lose forge created again", cmd_sim_pay, true,
     "pay orders through the simulated channel (callbacks to payonce)"},
    {"sim", "serve", "dir listen time-factor refund-delay-ms search-lag-s", "", "", cmd_sim_serve,
     true, "the simulated channel's query, bill and refund APIs"},
    {"sim", "receiver", "listen secret-file record fail down-ms duration-s", "secret-file", "",
     cmd_sim_receiver, true, "a tenant's webhook receiver that verifies and records events"},
    {"recon", "import", "tenant channel file master-key-file", "tenant channel", "force json",
     cmd_recon_import, false, "import a channel bill and reconcile it"},
    {"recon", "query", "tenant channel min-age limit master-key-file", "tenant", "json",
     cmd_recon_query, false, "ask the channel about unpaid orders (active query)"},
    {"recon", "fetch", "tenant channel date master-key-file", "tenant channel date", "force json",
     cmd_recon_fetch, false, "download one day's bill from the channel and reconcile it"},
    {"recon", "runs", "tenant", "tenant", "json", cmd_recon_runs, false,
     "what was reconciled when"},
    {"operator", "add", "name role password-file", "name password-file", "", cmd_operator_add,
     false, "a person who signs in to the console (docs/operations.md, \"The console\")"},
    {"operator", "passwd", "name password-file", "name password-file", "", cmd_operator_passwd,
     false, "a new password for an operator (signs them out everywhere)"},
    {"operator", "role", "name role", "name role", "", cmd_operator_role, false,
     "change an operator's role: viewer, operator or admin"},
    {"operator", "remove", "name", "name", "", cmd_operator_remove, false,
     "remove an operator (signs them out everywhere)"},
    {"operator", "list", "", "", "json", cmd_operator_list, false,
     "the console's operators, their roles and last sign-in"},
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
 * empty database somewhere); only migrate creates one. The error names
 * the path, the cause found on it, and where the URL came from. */
static int sqlite_file_exists(const char *url)
{
    if (strncmp(url, "sqlite:", 7) != 0)
        return 0;
    const char *path = url + 7;
    char why[600], from[1200];
    if (!*path || !po_path_why(path, false, why, sizeof why))
        return 0; /* there and readable (no path: the store says so) */
    cli_origin("db", "PAYONCE_DB", from, sizeof from);
    if (strcmp(why, "no such file") == 0)
        fprintf(stderr,
                "payonce: no database at %s (no such file); the database was %s; create it with"
                " 'payonce migrate --db %s', or name the right one with --db or --config\n",
                path, from, url);
    else
        fprintf(stderr, "payonce: cannot open database %s: %s; the database was %s\n", path, why,
                from);
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
        cli_channel_set_options(more_opts, sizeof more_opts);
        allowed = more_opts;
    } else if (strcmp(allowed, "@serve") == 0) {
        cli_allowed(c, more_opts, sizeof more_opts);
        allowed = more_opts;
    }
    if (cli_parse_opts(argc, argv, allowed, c->flags, &flags)) {
        fprintf(stderr, "'payonce %s%s%s --help' lists its options\n", c->word1,
                c->word2 ? " " : "", c->word2 ? c->word2 : "");
        return EXIT_USAGE;
    }
    /* The config file first (cli_config_find: --config, PAYONCE_CONFIG,
     * the default), the environment over it, the flags over both; from the
     * file each command takes what applies to it (cli_file_applies). */
    struct opts file = {0};
    char *filebuf = NULL;
    int r = cli_config_find(c, allowed, &flags, &file, &filebuf);
    if (r) {
        free(filebuf);
        return r;
    }
    o.n = 0;
    for (int i = 0; i < file.n; i++) {
        const char *n = file.name[i];
        if ((strcmp(n, "db") == 0 && getenv("PAYONCE_DB")) ||
            (strcmp(n, "master-key-file") == 0 && getenv("PAYONCE_MASTER_KEY_FILE")) ||
            !cli_file_applies(c, allowed, n))
            continue; /* the environment wins */
        o.name[o.n] = n;
        o.value[o.n++] = file.value[i];
    }
    if (o.n + flags.n > PO_OPTS_MAX) {
        free(filebuf);
        fprintf(stderr, "payonce: more than %d options with the config file's\n", PO_OPTS_MAX);
        return EXIT_USAGE;
    }
    for (int i = 0; i < flags.n; i++, o.n++) {
        o.name[o.n] = flags.name[i];
        o.value[o.n] = flags.value[i];
    }
    if (cli_flag(&flags, "verbose"))
        cli_verbose(c, allowed, &o);
    int ret = run_parsed(c, &file, &o);
    free(filebuf);
    return ret;
}

static int run_parsed(const struct cli_command *c, const struct opts *file, const struct opts *po)
{
    struct opts o = *po;
    if (c->run == cmd_config_check)
        return cfg_check(file, &o, cli_config_path);
    /* serve: a value out of bounds is named with its line before anything
     * else is tried (the database, the master key) */
    if (c->run == cmd_serve && cfg_bounds(file, &o, cli_config_path))
        return EXIT_USAGE;
    if (cli_missing_required(&o, c->required))
        return EXIT_USAGE;
    /* The server logs JSON lines at info; the other commands speak to a
     * person: plain lines, errors only unless --log-level asks for more
     * (what they found is in their own output, alerts in the database). */
    bool server = c->run == cmd_serve;
    enum po_log_level lvl = server ? PO_LOG_INFO : PO_LOG_ERROR;
    if (cli_opt(&o, "log-level") && !po_log_level_parse(cli_opt(&o, "log-level"), &lvl)) {
        fprintf(stderr, "payonce: --log-level: debug, info, warn or error\n");
        return EXIT_USAGE;
    }
    po_log_set_json(server);
    po_log_set_level(lvl);
    if (c->no_store)
        return c->run(NULL, &o);
    int ret = c->run == cmd_migrate ? 0 : sqlite_file_exists(cli_db_url(&o));
    struct po_store *s = NULL;
    if (!ret)
        ret = cli_open_store(&o, &s);
    if (ret)
        return ret;
    /* Every command but migrate needs the schema. */
    int version = 0;
    if (c->run != cmd_migrate && (po_store_schema_version(s, &version) || version == 0)) {
        char shown[600], from[1200];
        cli_redact_url(cli_db_url(&o), shown, sizeof shown);
        cli_origin("db", "PAYONCE_DB", from, sizeof from);
        fprintf(stderr,
                "payonce: the database %s has no schema; run 'payonce migrate' first (the"
                " database was %s)\n",
                shown, from);
        po_store_close(s);
        return EXIT_FAIL;
    }
    /* A tenant named on the command line must exist (but for the command
     * that adds it): a mistyped one is an error, never an empty answer. */
    const char *tenant = cli_opt(&o, "tenant");
    char err[PO_ERRBUF_SIZE] = "";
    po_err trc =
        tenant && c->run != cmd_tenant_add ? po_tenant_check(s, tenant, err, sizeof err) : PO_OK;
    ret = trc ? cli_fail(trc, err) : c->run(s, &o);
    po_store_close(s);
    return ret;
}

/* `payonce --db=URL tenant list`: the options every command takes (db,
 * config, log-level, master-key-file, and the flag verbose) before the
 * command move after it.
 * Returns the reordered vector (argv itself when nothing moved), NULL
 * after saying why when a leading option is another one. */
static char **cli_argv_moved;
static char **global_options_last(int argc, char **argv)
{
    static const char *const globals[] = {"db", "config", "log-level", "master-key-file"};
    int i = 1;
    while (i < argc && strncmp(argv[i], "--", 2) == 0 && strcmp(argv[i], "--help") != 0 &&
           strcmp(argv[i], "--version") != 0) {
        const char *name = argv[i] + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        bool known = false;
        for (size_t g = 0; g < sizeof globals / sizeof globals[0]; g++)
            known |= strlen(globals[g]) == len && strncmp(globals[g], name, len) == 0;
        bool flag = strcmp(argv[i], "--verbose") == 0;
        if (!flag && (!known || (!eq && i + 1 >= argc))) {
            fprintf(stderr,
                    "payonce: '%s' before the command: only --db, --config, --log-level and"
                    " --master-key-file (with their values) and --verbose may come first;"
                    " 'payonce help' lists the commands\n",
                    argv[i]);
            return NULL;
        }
        i += eq || flag ? 1 : 2;
    }
    if (i == 1)
        return argv;
    char **v = calloc((size_t)argc + 1, sizeof *v);
    if (!v)
        return NULL;
    int n = 0;
    v[n++] = argv[0];
    for (int k = i; k < argc; k++)
        v[n++] = argv[k];
    for (int k = 1; k < i; k++)
        v[n++] = argv[k];
    return v;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strncmp(argv[1], "--", 2) == 0) {
        char **v = global_options_last(argc, argv);
        if (!v)
            return EXIT_USAGE;
        argv = cli_argv_moved = v; /* lives as long as the process (a global: not a leak) */
        if (argv[1] && strncmp(argv[1], "--", 2) == 0 && strcmp(argv[1], "--help") != 0 &&
            strcmp(argv[1], "--version") != 0)
            return usage("no command");
    }
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
    char near[64];
    cli_nearest_command(argv[1], argc >= 3 ? argv[2] : NULL, near, sizeof near);
    fprintf(stderr,
            "payonce: unknown command '%.64s'; the nearest is 'payonce %s' ('payonce help'"
            " lists them all)\n",
            argv[1], near);
    return EXIT_USAGE;
}
