/*
 * help.c — what `payonce help`, `payonce COMMAND --help` and `-h` print
 * (issue 13 item 5).
 *
 * The synopsis and option list of every command are made from the command
 * table (main.c: which options it takes, which are required, which are
 * flags) and the one table below that says what each option means, so a
 * command cannot take an option its help does not list: test_cli's help
 * case runs every command's --help and fails on "(undocumented)".
 * `channel set`'s options come from the channel registry with their help.
 */
#include "../channel/channel.h"

#include <stdio.h>
#include <string.h>

#include "cli_int.h"

#include "../service/gateway/options.h"

/* What an option means. cmd NULL: for every command that takes it; else
 * for that command only ("report", "sim pay"), found before the general
 * entry, where the same name means something else (a leak otherwise:
 * report's --from explained restore's). */
struct optdoc {
    const char *name, *arg, *doc; /* arg NULL: a flag */
    const char *cmd;
};

static const struct optdoc optdocs[] = {
    {"db", "URL",
     "the database: sqlite:PATH or postgresql://… (default: PAYONCE_DB, then the config file's"
     " db, then sqlite:./payonce.db); --db=URL works too",
     NULL},
    {"db", "URL",
     "the new SQLite database to restore into, sqlite:PATH (must not exist; default PAYONCE_DB,"
     " never the config file's: that is the live one)",
     "restore"},
    {"db", "URL",
     "an empty PostgreSQL database to measure on, postgresql://… (default: a fresh SQLite file;"
     " never PAYONCE_DB or a config file's)",
     "bench"},
    {"log-level", "LEVEL",
     "debug, info, warn or error (serve: info, as JSON lines; the other commands: error,"
     " as plain lines)",
     NULL},
    {"verbose", NULL,
     "say which config file, database and master key the command uses, and where each came"
     " from (the flag, the environment, the file's line, the default)",
     NULL},
    {"master-key-file", "FILE",
     "the 32-byte master key that seals secrets (default PAYONCE_MASTER_KEY_FILE, then the config"
     " file's)",
     NULL},
    {"tenant", "ID", "the tenant", NULL},
    {"tenant", "ID", "the tenant to add (letters, digits, _ - . : at most 64)", "tenant add"},
    {"tenant", "ID", "the tenant the printed channel set lines configure (default TENANT)",
     "sim keys"},
    {"anchor", "FILE",
     "chain heads saved earlier by audit head (TENANT SEQ HASH lines); a chain rewritten since no"
     " longer matches them",
     NULL},
    {"late", "SECONDS", "records not sealed this long after they came are a problem (default 60)",
     NULL},
    {"request-id", "ID", "the request id payonce gave the callback (its access log line)", NULL},
    {"seq", "N", "a record's place in its tenant's chain", NULL},
    {"name", "NAME", "the tenant's display name", "tenant add"},
    {"name", "NAME", "the operator's sign-in name", NULL},
    {"role", "ROLE",
     "viewer (reads), operator (also works alerts) or admin (also sees the operators); default"
     " viewer",
     "operator add"},
    {"role", "ROLE",
     "the operator's new role: viewer (reads), operator (also works alerts) or admin (also sees"
     " the operators)",
     "operator role"},
    {"password-file", "FILE",
     "a file whose first line is the password (- reads standard input); never on the command"
     " line",
     NULL},
    {"order-ttl", "SECONDS",
     "orders created without time_expire expire this long after creation (0: never)", NULL},
    {"merchant", "ID", "the merchant to add (a sub-merchant of the tenant)", "merchant add"},
    {"merchant", "ID", "only this merchant's orders", "order list"},
    {"merchant", "ID", "the merchant the order is for (a sub-merchant of the tenant)", NULL},
    {"out-trade-no", "NO", "the order number the tenant gave the channel", NULL},
    {"out-refund-no", "NO",
     "a new refund number you choose, unique in the tenant (the channel knows the refund by it)",
     "alerts refund"},
    {"out-refund-no", "NO", "the refund's number, unique in the tenant", "refund create"},
    {"out-refund-no", "NO", "the refund's number", NULL},
    {"amount", "MINOR", "the order's amount in minor units (fen, cents): 100 is 1.00 CNY",
     "order create"},
    {"amount", "MINOR",
     "the refund's amount in minor units (fen, cents), at most what is left of the order's",
     "refund create"},
    {"currency", "CODE", "the order's ISO 4217 currency (default CNY)", "order create"},
    {"currency", "CODE", "the currency the simulated payments are in (default CNY)", "sim pay"},
    {"channel", "NAME", "the channel whose bill it is: wechatpay, alipay or stripe",
     "recon import"},
    {"channel", "NAME", "the channel to download the bill from: wechatpay, alipay or stripe",
     "recon fetch"},
    {"channel", "NAME", "the channel to ask: wechatpay (default), alipay or stripe", "recon query"},
    {"channel", "NAME",
     "the channel the order is paid through, when known: wechatpay, alipay or stripe (its order"
     " number rules are checked)",
     "order create"},
    {"channel", "NAME", "the simulated channel that pays: wechatpay (default), alipay or stripe",
     "sim pay"},
    {"channel", "NAME", "payment channel: wechatpay, alipay or stripe", NULL},
    {"json", NULL, "print one JSON document instead of text (amounts in minor units)", NULL},
    {"event", "FILE", "a normalised event JSON file (- reads standard input)", "apply"},
    {"event", "ID", "the event's id (evt_…)", NULL},
    {"insecure-dev", NULL,
     "development only: allow http:// to loopback and an unsealed (missing) master key", NULL},
    {"file", "FILE", "the bill file (also accepted as the last argument)", "recon import"},
    {"file", "FILE",
     "the orders, MERCHANT,OUT_TRADE_NO,AMOUNT[,CURRENCY[,CHANNEL]] a line, # comments (- reads"
     " standard input)",
     "order import"},
    {"force", NULL, "import a bill again even if this file was imported before", NULL},
    {"date", "YYYY-MM-DD", "the bill's day, in the channel's time zone (WeChat Pay: Beijing time)",
     NULL},
    {"min-age", "SECONDS", "only orders unpaid for at least this long (default 300)", NULL},
    {"limit", "N", "at most N orders (default 1000)", "recon query"},
    {"limit", "N", "a page of at most N orders (default 100)", "order list"},
    {"alert", "ID", "the alert's id (alerts lists it; also accepted as the last argument)", NULL},
    {"note", "TEXT", "what is being done about it (at most 500 bytes)", "alerts ack"},
    {"note", "TEXT", "why: what was found or done (required; at most 500 bytes)", NULL},
    {"by", "NAME",
     "who acts, for the alert's audit (default: the login name of the user running the"
     " command)",
     NULL},
    {"state", "STATE", "only alerts in this state: open, acknowledged or resolved", NULL},
    {"status", "STATUS", "only orders in this status: PAYING, PAID or CLOSED", NULL},
    {"after", "CREATED_AT/NO", "the next page: start after this order (printed by the last page)",
     NULL},
    {"key-id", "ID", "the API key's id (from apikey list)", NULL},
    {"retention", "SECONDS", "keep stored API answers this long (default 604800, a week)", NULL},
    {"url", "URL", "the tenant's endpoint: https://… (http:// to loopback with --insecure-dev)",
     NULL},
    {"events", "T1,T2|*", "event types to send (default *; docs/webhooks.md lists them)", NULL},
    {"endpoint", "ID", "the webhook endpoint's id (we_…)", NULL},
    {"endpoint", "ID", "only the dead deliveries to this endpoint (we_…)", "webhook redrive"},
    {"since", "TIME", "only dead deliveries since this RFC 3339 time (2026-12-03T00:00:00Z)",
     "webhook redrive"},
    {"since", "TIME",
     "orders created at or after this UTC time (2026-12-01 or 2026-12-01T08:00:00Z)", "order list"},
    {"listen", "HOST:PORT", "where the simulated channel's APIs listen (default 127.0.0.1:8090)",
     "sim serve"},
    {"listen", "HOST:PORT", "where the receiver listens (default 127.0.0.1:8091)", "sim receiver"},
    /* bench */
    {"orders", "N", "payments per scenario (default 10000)", NULL},
    {"connections", "N", "keep-alive connections of the load generator (default 16)", NULL},
    {"plan-rows", "N", "rows of another tenant loaded first on PostgreSQL (default 1000000)", NULL},
    {"out", "DIR", "write the results JSON into DIR", NULL},
    {"to", "FILE", "the file to write the backup to (must not exist)", "backup"},
    {"to", "URL", "the new PostgreSQL database (postgresql://…) to move every row into",
     "migrate-store"},
    {"to", "DATE", "the last day, YYYY-MM-DD (UTC; default: no last day)", "report"},
    {"from", "FILE", "the backup file to restore", "restore"},
    {"from", "URL", "the SQLite database to move, sqlite:PATH", "migrate-store"},
    {"from", "DATE", "the first day, YYYY-MM-DD (UTC; default: no first day)", "report"},
    {"csv", NULL, "print CSV (amounts in minor units, fees in thousandths of one) instead of text",
     NULL},
    {"only", "RUN,…", "only these scenarios", NULL},
    {"nodes", "N",
     "instead of the scenarios: credited/s through HAProxy with 1..N serve nodes over the --db"
     " PostgreSQL (1..8; docs/scaling.md)",
     NULL},
    {"balance", "first|roundrobin",
     "bench --nodes: HAProxy's balance algorithm (default first: a node takes requests up to its"
     " workers before the next one gets any; docs/scaling.md)",
     NULL},
    /* sim */
    {"dir", "DIR", "where to write the simulator's keys (default ./payonce-sim)", "sim keys"},
    {"dir", "DIR", "the simulator's keys and state, made by sim keys (default ./payonce-sim)",
     NULL},
    {"mode", "cert|pubkey", "platform certificate or platform public key mode (default cert)",
     NULL},
    {"api-url", "URL",
     "the simulator's API (what `payonce sim serve` listens on, http://127.0.0.1:8090"
     " by default): the channel set lines also carry the API base URL and the merchant's key,"
     " so queries, closes, refunds and bills work against it",
     NULL},
    {"gateway-url", "URL",
     "where payonce serve is reached (http://127.0.0.1:8080): the channel set lines"
     " also carry --notify-url (refund results)",
     NULL},
    {"script", NULL,
     "print only the channel set commands, a shell script (`| sh` runs them); what was written"
     " goes to stderr",
     NULL},
    {"notify-url", "URL",
     "where the channel posts callbacks (payonce's /notify/CHANNEL/TENANT), required unless"
     " --lose or --created; repeated, copy k goes to the k-th URL (one per gateway node)",
     NULL},
    {"order", "NO:AMOUNT",
     "an order to pay, amount in minor units (repeatable, at most " PO_STR(
         PO_SIM_ORDERS_ARGV_MAX) " times; more with --orders-file)",
     NULL},
    {"orders-file", "FILE",
     "orders to pay, NO:AMOUNT a line (amount in minor units), # comments, - reads standard"
     " input; at most " PO_STR(PO_SIM_ORDERS_MAX) " orders",
     NULL},
    {"txn", "ID", "the channel's transaction id (one order only; default a new one)", NULL},
    {"copies", "N", "deliveries of each callback (the channel's at-least-once, default 1)", NULL},
    {"concurrent", NULL, "send the copies at the same time", NULL},
    {"reorder", NULL, "deliver orders out of order", NULL},
    {"again", NULL,
     "deliver the notifications of payments made earlier (the same transaction ids, from"
     " DIR/payments.jsonl): the channel redelivering, not a second payment",
     NULL},
    {"lose", NULL,
     "the payment happens (recorded for the query API and the bill) but no callback is ever"
     " sent: the active query or the bill must find it",
     NULL},
    {"paid-on", "YYYY-MM-DD",
     "with --lose: the payment was made on that day (Beijing time), for that day's bill", NULL},
    {"created", NULL,
     "pay the payments payonce created at the simulated channel (--order NO), for their amount,"
     " to the notify URL they were given",
     NULL},
    {"forge", NULL, "send a callback signed with a wrong key (must be refused)", NULL},
    {"tamper-amount", "MINOR",
     "a validly signed callback saying this amount instead of the order's (rejected as"
     " amount_mismatch, with an alert; acked, so the channel stops)",
     NULL},
    {"time-factor", "F",
     "run the channel's retry schedule F times faster (default 1: the real 24 hours)", "sim pay"},
    {"time-factor", "F", "run the refund notifications' retry schedule F times faster (default 1)",
     "sim serve"},
    {"max-attempts", "K", "stop retrying after K attempts", NULL},
    {"deadline-ms", "MS", "how long one delivery waits for an answer (default 5000)", NULL},
    {"pace-ms", "MS", "pause between orders", NULL},
    {"history", "FILE",
     "append every attempt and its answer as a JSON line (the history checker's input)", NULL},
    {"refund-delay-ms", "MS", "the simulated channel settles refunds after (default 1000)", NULL},
    {"search-lag-s", "S",
     "Stripe's search shows a PaymentIntent S seconds after a change (default 60; 0: at once)",
     NULL},
    {"secret-file", "FILE", "the endpoint's signing secret (whsec_…)", NULL},
    {"record", "FILE", "append every verified event as a JSON line", NULL},
    {"fail", "N", "answer 500 to the first N deliveries", NULL},
    {"down-ms", "MS", "refuse connections for the first MS milliseconds", NULL},
    {"duration-s", "S", "stop after S seconds (default 3600)", NULL},
};

/* "report", "sim pay": the command's name as optdocs' cmd says it */
static void command_name(const struct cli_command *c, char *buf, size_t cap)
{
    (void)snprintf(buf, cap, "%s%s%s", c->word1, c->word2 ? " " : "", c->word2 ? c->word2 : "");
}

static bool is_serve(const struct cli_command *c)
{
    return c->allowed && strcmp(c->allowed, "@serve") == 0;
}

/* What an option means: serve's (and config check's) from cmd_config.c's
 * table, with its bounds and default; the others' from optdocs, then the
 * table (bench shares the committer's options). */
static bool find_doc(const struct cli_command *c, const char *name, struct optdoc *out, char *buf,
                     size_t cap)
{
    const struct po_option *t = po_option_find(name);
    char cmd[48];
    command_name(c, cmd, sizeof cmd);
    if (strcmp(name, "config") == 0) { /* what this command takes from the file */
        char takes[600], more[1400];
        const char *allowed = c->allowed;
        if (!allowed) {
            cli_channel_set_options(more, sizeof more);
            allowed = more;
        }
        cli_file_takes(c, allowed, takes, sizeof takes);
        if (strcmp(takes, "nothing") == 0)
            (void)snprintf(buf, cap,
                           "the service's config file: %s takes nothing from it (its options are"
                           " its own)",
                           cmd);
        else /* a long list is cut at cap (po_errf truncates; the help stays readable) */
            po_errf(buf, cap,
                    "the service's config file (docs/configuration.md; default"
                    " PAYONCE_CONFIG, then " PO_CONFIG_DEFAULT " when it exists and can be"
                    " read); %s takes from it: %s; the environment and the flags override"
                    " it",
                    cmd, takes);
        *out = (struct optdoc){"config", "FILE", buf, NULL};
        return true;
    }
    /* the command's own entry first, then the general one */
    for (int pass = 0; pass < 2 && !(t && is_serve(c)); pass++)
        for (size_t i = 0; i < sizeof optdocs / sizeof optdocs[0]; i++)
            if (strcmp(optdocs[i].name, name) == 0 &&
                (pass ? !optdocs[i].cmd : optdocs[i].cmd && strcmp(optdocs[i].cmd, cmd) == 0)) {
                *out = optdocs[i];
                return true;
            }
    if (!t)
        return false;
    cfg_describe(t, buf, cap);
    *out = (struct optdoc){t->name, t->type == PO_OPT_FLAG ? NULL : t->arg, buf, NULL};
    return true;
}

static bool in_list(const char *list, const char *name)
{
    char pat[64], all[1400];
    (void)snprintf(pat, sizeof pat, " %s ", name);
    (void)snprintf(all, sizeof all, " %s ", list ? list : "");
    return strstr(all, pat) != NULL;
}

/* Calls fn for each space-separated word of list. */
static void each_word(const char *list, void (*fn)(FILE *f, const char *w, const void *ctx),
                      FILE *f, const void *ctx)
{
    char buf[1400];
    if (po_strcpy(buf, sizeof buf, list ? list : ""))
        return;
    char *save = NULL;
    for (char *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save))
        fn(f, w, ctx);
}

static void synopsis_word(FILE *f, const char *w, const void *ctx)
{
    const struct cli_command *c = ctx;
    struct optdoc doc;
    char buf[400];
    const struct optdoc *d = find_doc(c, w, &doc, buf, sizeof buf) ? &doc : NULL;
    bool required = in_list(c->required, w),
         is_flag = in_list(c->flags, w) || strcmp(w, "verbose") == 0;
    const char *arg = is_flag ? NULL : d && d->arg ? d->arg : "VALUE";
    fprintf(f, required ? " --%s%s%s" : " [--%s%s%s]", w, arg ? " " : "", arg ? arg : "");
}

static void option_line(FILE *f, const char *w, const void *ctx)
{
    const struct cli_command *c = ctx;
    struct optdoc doc;
    char buf[400];
    const struct optdoc *d = find_doc(c, w, &doc, buf, sizeof buf) ? &doc : NULL;
    bool is_flag = in_list(c->flags, w) || strcmp(w, "verbose") == 0;
    char head[64];
    (void)snprintf(head, sizeof head, "--%s%s%s", w, is_flag ? "" : " ",
                   is_flag       ? ""
                   : d && d->arg ? d->arg
                                 : "VALUE");
    fprintf(f, "  %-28s %s%s\n", head, d ? d->doc : "(undocumented)",
            in_list(c->required, w) ? " (required)" : "");
}

static void channel_options(FILE *f)
{
    for (int i = 0; po_channels[i]; i++) {
        fprintf(f, "\n%s options:\n", po_channels[i]->name);
        for (const struct po_channel_option *op = po_channels[i]->options; op->name; op++) {
            char head[64];
            (void)snprintf(head, sizeof head, "--%s VALUE", op->name);
            fprintf(f, "  %-28s %s\n", head, op->help ? op->help : "(undocumented)");
        }
    }
}

void cli_help_command(FILE *f, const struct cli_command *c)
{
    fprintf(f, "payonce %s%s%s — %s\n\nusage: payonce %s%s%s", c->word1, c->word2 ? " " : "",
            c->word2 ? c->word2 : "", c->summary, c->word1, c->word2 ? " " : "",
            c->word2 ? c->word2 : "");
    char serve_opts[1200];
    const char *allowed = c->allowed ? c->allowed : "tenant channel master-key-file";
    if (is_serve(c)) {
        cli_allowed(c, serve_opts, sizeof serve_opts);
        allowed = serve_opts;
    }
    each_word(c->required, synopsis_word, f, c);
    char rest[1400];
    size_t n = 0;
    rest[0] = '\0';
    /* the optional ones, in table order, then the flags */
    char buf[1600];
    (void)snprintf(buf, sizeof buf, "%s %s", allowed, c->flags);
    char *save = NULL;
    for (char *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save))
        if (!in_list(c->required, w) && n + strlen(w) + 2 < sizeof rest)
            n += (size_t)snprintf(rest + n, sizeof rest - n, "%s ", w);
    each_word(rest, synopsis_word, f, c);
    if (!c->allowed)
        fputs(" [channel options]", f);
    bool db = !c->no_store || c->run == cmd_backup || c->run == cmd_restore || c->run == cmd_bench;
    if (db && !in_list(allowed, "db"))
        fputs(" [--db URL]", f);
    if (!is_serve(c))
        fputs(" [--config FILE]", f);
    fputs(" [--log-level LEVEL] [--verbose]", f);
    fputs("\n\noptions:\n", f);
    each_word(c->required, option_line, f, c);
    each_word(rest, option_line, f, c);
    if (db && !in_list(allowed, "db"))
        option_line(f, "db", c);
    if (!is_serve(c))
        option_line(f, "config", c);
    option_line(f, "log-level", c);
    option_line(f, "verbose", c);
    fputs("  -h, --help                   this help\n", f);
    if (!c->allowed)
        channel_options(f);
    bool also = false; /* a command that is also a group (alerts) */
    for (size_t i = 0; !c->word2 && i < cli_ncommands; i++)
        if (cli_commands[i].word2 && strcmp(cli_commands[i].word1, c->word1) == 0) {
            fprintf(f, "%s  payonce %s %-16s %s\n", also ? "" : "\nalso:\n", c->word1,
                    cli_commands[i].word2, cli_commands[i].summary);
            also = true;
        }
}

void cli_help_overview(FILE *f)
{
    fprintf(f, "usage: payonce COMMAND [options]    payonce %s\n\ncommands:\n", PO_VERSION);
    for (size_t i = 0; i < cli_ncommands; i++) {
        const struct cli_command *c = &cli_commands[i];
        char name[40];
        (void)snprintf(name, sizeof name, "%s%s%s", c->word1, c->word2 ? " " : "",
                       c->word2 ? c->word2 : "");
        fprintf(f, "  %-26s %s\n", name, c->summary);
    }
    fputs("\n'payonce help COMMAND' (or 'payonce COMMAND --help') lists a command's options.\n"
          "Every command that reads the database takes --db URL: sqlite:PATH (must exist,\n"
          "except for migrate) or postgresql://...; without it PAYONCE_DB, then the config\n"
          "file's db (--config FILE, else PAYONCE_CONFIG, else " PO_CONFIG_DEFAULT "\n"
          "when it can be read), then sqlite:./payonce.db. Secrets are sealed with the\n"
          "master key: --master-key-file FILE, PAYONCE_MASTER_KEY_FILE or the config file's\n"
          "(32 bytes or 64 hex digits). --verbose says which file, database and key.\n"
          "Docs: README.md and docs/ in the sources, /usr/share/doc/payonce installed.\n",
          f);
}

/* Levenshtein distance of a and b (each at most 64 bytes; longer ones are
 * far from every command). */
static int distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 64 || m > 64)
        return 1000;
    int row[65];
    for (size_t j = 0; j <= m; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[m];
}

void cli_nearest_command(const char *word1, const char *word2, char *buf, size_t cap)
{
    const struct cli_command *best = NULL;
    int best_d = 0;
    for (size_t i = 0; i < cli_ncommands; i++) {
        int d = distance(word1, cli_commands[i].word1);
        if (!best || d < best_d) {
            best = &cli_commands[i];
            best_d = d;
        }
    }
    /* the group's subcommand too, when the second word is one of its */
    for (size_t i = 0; word2 && i < cli_ncommands; i++)
        if (strcmp(cli_commands[i].word1, best->word1) == 0 && cli_commands[i].word2 &&
            strcmp(cli_commands[i].word2, word2) == 0)
            best = &cli_commands[i];
    (void)snprintf(buf, cap, "%s%s%s", best->word1, best->word2 && word2 ? " " : "",
                   best->word2 && word2 ? best->word2 : "");
}

int cli_help(int argc, char **argv)
{
    if (argc == 0) {
        cli_help_overview(stdout);
        return 0;
    }
    bool word1_known = false;
    for (size_t i = 0; i < cli_ncommands; i++) {
        const struct cli_command *c = &cli_commands[i];
        if (strcmp(argv[0], c->word1) != 0)
            continue;
        word1_known = true;
        if (!c->word2 || (argc > 1 && strcmp(argv[1], c->word2) == 0)) {
            cli_help_command(stdout, c);
            return 0;
        }
    }
    if (!word1_known) {
        char near[64];
        cli_nearest_command(argv[0], argc > 1 ? argv[1] : NULL, near, sizeof near);
        fprintf(stderr,
                "payonce: no command '%.64s'; the nearest is '%s' ('payonce help' lists"
                " them all)\n",
                argv[0], near);
        return EXIT_USAGE;
    }
    /* a group: its subcommands */
    printf("payonce %s:\n", argv[0]);
    for (size_t i = 0; i < cli_ncommands; i++)
        if (strcmp(argv[0], cli_commands[i].word1) == 0)
            printf("  %s %-22s %s\n", cli_commands[i].word1, cli_commands[i].word2,
                   cli_commands[i].summary);
    printf("'payonce help %s SUBCOMMAND' lists its options.\n", argv[0]);
    return argc > 1 ? EXIT_USAGE : 0;
}
