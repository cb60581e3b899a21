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

#include "../service/options.h"

struct optdoc {
    const char *name, *arg, *doc; /* arg NULL: a flag */
};

static const struct optdoc optdocs[] = {
    {"db", "URL",
     "the database: sqlite:PATH or postgresql://… (default: PAYONCE_DB, then"
     " sqlite:./payonce.db); --db=URL works too"},
    {"log-level", "LEVEL",
     "debug, info, warn or error (serve: info, as JSON lines; the other commands: error,"
     " as plain lines)"},
    {"config", "FILE",
     "a config file (docs/configuration.md): serve reads all of it (default"
     " /etc/payonce/payonce.conf when it exists), the other commands its db and master-key-file;"
     " the environment and flags override it"},
    {"master-key-file", "FILE",
     "the 32-byte master key that seals secrets (default PAYONCE_MASTER_KEY_FILE)"},
    {"tenant", "ID", "the tenant"},
    {"anchor", "FILE",
     "audit verify: chain heads saved earlier by audit head (TENANT SEQ HASH lines); a chain"
     " rewritten since no longer matches them"},
    {"late", "SECONDS",
     "audit verify: records not sealed this long after they came are a problem (default 60)"},
    {"request-id", "ID", "the request id payonce gave the callback (its access log line)"},
    {"seq", "N", "a record's place in its tenant's chain"},
    {"name", "NAME", "tenant add: a display name; operator: the operator's sign-in name"},
    {"role", "ROLE",
     "an operator's role: viewer (reads), operator (also works alerts) or admin (also sees the"
     " operators); default viewer"},
    {"password-file", "FILE",
     "a file whose first line is the password (- reads standard input); never on the command"
     " line"},
    {"order-ttl", "SECONDS",
     "orders created without time_expire expire this long after creation (0: never)"},
    {"merchant", "ID", "the merchant (a sub-merchant of the tenant)"},
    {"out-trade-no", "NO", "the order number the tenant gave the channel"},
    {"out-refund-no", "NO",
     "the refund number, unique per tenant (alerts refund: a new one you choose; the channel"
     " knows the refund by it)"},
    {"amount", "MINOR", "amount in minor units (fen, cents): 100 is 1.00 CNY"},
    {"currency", "CODE", "ISO 4217 currency (default CNY)"},
    {"channel", "NAME", "payment channel: wechatpay, alipay or stripe"},
    {"json", NULL, "print one JSON document instead of text"},
    {"event", "FILE|ID",
     "apply: a normalised event JSON file (- reads standard input); webhook: an event id"},
    {"insecure-dev", NULL,
     "development only: allow http:// to loopback and an unsealed (missing) master key"},
    {"file", "FILE",
     "recon import: the bill file (also accepted as the last argument); order import: the"
     " orders, MERCHANT,OUT_TRADE_NO,AMOUNT[,CURRENCY[,CHANNEL]] a line, # comments (- reads"
     " standard input)"},
    {"force", NULL, "import a bill again even if this file was imported before"},
    {"date", "YYYY-MM-DD", "the bill's day, in the channel's time zone (WeChat Pay: Beijing time)"},
    {"min-age", "SECONDS", "only orders unpaid for at least this long (default 300)"},
    {"limit", "N", "at most N orders (recon query: default 1000; order list: a page, default 100)"},
    {"alert", "ID", "the alert's id (alerts lists it; also accepted as the last argument)"},
    {"note", "TEXT", "why: what was found or done (required to resolve; at most 500 bytes)"},
    {"by", "NAME", "who acts (default: $USER)"},
    {"state", "STATE", "only alerts in this state: open, acknowledged or resolved"},
    {"status", "STATUS", "only orders in this status: PAYING, PAID or CLOSED"},
    {"after", "CREATED_AT/NO", "the next page: start after this order (printed by the last page)"},
    {"key-id", "ID", "the API key's id (from apikey list)"},
    {"retention", "SECONDS", "keep stored API answers this long (default 604800, a week)"},
    {"url", "URL", "the tenant's endpoint: https://… (http:// to loopback with --insecure-dev)"},
    {"events", "T1,T2|*", "event types to send (default *; docs/webhooks.md lists them)"},
    {"endpoint", "ID", "the webhook endpoint's id (we_…)"},
    {"since", "TIME",
     "webhook redrive: only dead deliveries since this time; order list: created at or after"
     " this UTC time (2026-12-01 or 2026-12-01T08:00:00Z)"},
    {"listen", "HOST:PORT",
     "address to listen on (sim serve 127.0.0.1:8090, sim receiver 127.0.0.1:8091)"},
    /* bench */
    {"orders", "N", "payments per scenario (default 10000)"},
    {"connections", "N", "keep-alive connections of the load generator (default 16)"},
    {"plan-rows", "N", "rows of another tenant loaded first on PostgreSQL (default 1000000)"},
    {"out", "DIR", "write the results JSON into DIR"},
    {"to", "FILE|URL|DATE",
     "backup: the file to write (must not exist); migrate-store: the new PostgreSQL database;"
     " report: the last day, YYYY-MM-DD (UTC)"},
    {"from", "FILE|URL|DATE",
     "restore: the backup file; migrate-store: the sqlite:PATH database to move; report: the"
     " first day, YYYY-MM-DD (UTC)"},
    {"csv", NULL, "print CSV (amounts in minor units) instead of text"},
    {"only", "RUN,…", "only these scenarios"},
    {"nodes", "N",
     "instead of the scenarios: credited/s through HAProxy with 1..N serve nodes over the --db"
     " PostgreSQL (1..8; docs/scaling.md)"},
    {"balance", "first|roundrobin",
     "bench --nodes: HAProxy's balance algorithm (default first: a node takes requests up to its"
     " workers before the next one gets any; docs/scaling.md)"},
    /* sim */
    {"dir", "DIR", "the simulator's keys and state (default ./payonce-sim)"},
    {"mode", "cert|pubkey", "platform certificate or platform public key mode (default cert)"},
    {"api-url", "URL",
     "sim keys: the simulator's API (what `payonce sim serve` listens on, http://127.0.0.1:8090"
     " by default): the channel set lines also carry the API base URL and the merchant's key,"
     " so queries, closes, refunds and bills work against it"},
    {"gateway-url", "URL",
     "sim keys: where payonce serve is reached (http://127.0.0.1:8080): the channel set lines"
     " also carry --notify-url (refund results)"},
    {"notify-url", "URL",
     "where the channel posts callbacks (payonce's /notify/CHANNEL/TENANT), required unless"
     " --lose or --created; repeated, copy k goes to the k-th URL (one per gateway node)"},
    {"order", "NO:AMOUNT", "an order to pay, amount in minor units (repeatable)"},
    {"txn", "ID", "the channel's transaction id (one order only; default a new one)"},
    {"copies", "N", "deliveries of each callback (the channel's at-least-once, default 1)"},
    {"concurrent", NULL, "send the copies at the same time"},
    {"reorder", NULL, "deliver orders out of order"},
    {"again", NULL,
     "deliver the notifications of payments made earlier (the same transaction ids, from"
     " DIR/payments.jsonl): the channel redelivering, not a second payment"},
    {"lose", NULL,
     "the payment happens (recorded for the query API and the bill) but no callback is ever"
     " sent: the active query or the bill must find it"},
    {"paid-on", "YYYY-MM-DD",
     "with --lose: the payment was made on that day (Beijing time), for that day's bill"},
    {"created", NULL,
     "pay the payments payonce created at the simulated channel (--order NO), for their amount,"
     " to the notify URL they were given"},
    {"forge", NULL, "send a callback signed with a wrong key (must be refused)"},
    {"tamper-amount", "MINOR",
     "a validly signed callback saying this amount instead of the order's (rejected as"
     " amount_mismatch, with an alert; acked, so the channel stops)"},
    {"time-factor", "F",
     "run the channel's retry schedule F times faster (default 1: the real 24 hours)"},
    {"max-attempts", "K", "stop retrying after K attempts"},
    {"deadline-ms", "MS", "how long one delivery waits for an answer (default 5000)"},
    {"pace-ms", "MS", "pause between orders"},
    {"history", "FILE",
     "append every attempt and its answer as a JSON line (the history checker's input)"},
    {"refund-delay-ms", "MS", "the simulated channel settles refunds after (default 0)"},
    {"search-lag-s", "S",
     "Stripe's search shows a PaymentIntent S seconds after a change (default 60; 0: at once)"},
    {"secret-file", "FILE", "the endpoint's signing secret (whsec_…)"},
    {"record", "FILE", "append every verified event as a JSON line"},
    {"fail", "N", "answer 500 to the first N deliveries"},
    {"down-ms", "MS", "refuse connections for the first MS milliseconds"},
    {"duration-s", "S", "stop after S seconds (default 3600)"},
};

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
    for (size_t i = 0; !(t && is_serve(c)) && i < sizeof optdocs / sizeof optdocs[0]; i++)
        if (strcmp(optdocs[i].name, name) == 0) {
            *out = optdocs[i];
            return true;
        }
    if (!t)
        return false;
    cfg_describe(t, buf, cap);
    *out = (struct optdoc){t->name, t->type == PO_OPT_FLAG ? NULL : t->arg, buf};
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
    bool required = in_list(c->required, w), is_flag = in_list(c->flags, w);
    const char *arg = is_flag ? NULL : d && d->arg ? d->arg : "VALUE";
    fprintf(f, required ? " --%s%s%s" : " [--%s%s%s]", w, arg ? " " : "", arg ? arg : "");
}

static void option_line(FILE *f, const char *w, const void *ctx)
{
    const struct cli_command *c = ctx;
    struct optdoc doc;
    char buf[400];
    const struct optdoc *d = find_doc(c, w, &doc, buf, sizeof buf) ? &doc : NULL;
    bool is_flag = in_list(c->flags, w);
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
    if (!c->no_store)
        fputs(is_serve(c) ? " [--db URL]" : " [--db URL | --config FILE]", f);
    fputs(" [--log-level LEVEL]", f);
    fputs("\n\noptions:\n", f);
    each_word(c->required, option_line, f, c);
    each_word(rest, option_line, f, c);
    if (!c->no_store) {
        option_line(f, "db", c);
        if (!is_serve(c))
            option_line(f, "config", c);
    }
    option_line(f, "log-level", c);
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
          "Every command that reads the database takes --db URL: sqlite:PATH (default\n"
          "sqlite:./payonce.db; must exist, except for migrate) or postgresql://...;\n"
          "PAYONCE_DB is used when --db is not given. Secrets are sealed with the master key:\n"
          "--master-key-file FILE or PAYONCE_MASTER_KEY_FILE (32 bytes or 64 hex digits).\n"
          "Docs: README.md and docs/ (operations.md, api.md, webhooks.md, simulator.md).\n",
          f);
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
        fprintf(stderr, "payonce: no command '%s' ('payonce help' lists them)\n", argv[0]);
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
