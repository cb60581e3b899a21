/*
 * config.c — `payonce serve`'s options, declared once (issue 13 item 2).
 *
 * One table says, for every option, its type, default, bounds and what it
 * means. From it come: the command line's checks (cfg_int), the config
 * file's parser (/etc/payonce/payonce.conf or --config FILE: "name = value"
 * lines, the same names as the flags), `payonce config check` (validates
 * and prints the effective values and where each came from, secrets
 * redacted), `payonce config doc` (docs/configuration.md is its output;
 * test_cli fails when they differ) and the options' lines in `serve --help`.
 * Flags override the file.
 */
#include "../service/service.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_int.h"

#define D 86400

static const struct cfg_opt serve_opts[] = {
    {"db", CFG_STR, 0, 0, 0, "sqlite:./payonce.db", "URL",
     "the database: sqlite:PATH or postgresql://… (also PAYONCE_DB)", true},
    {"master-key-file", CFG_STR, 0, 0, 0, "", "FILE",
     "the 32-byte master key that seals channel secrets (also PAYONCE_MASTER_KEY_FILE)", false},
    {"listen", CFG_STR, 0, 0, 0, "127.0.0.1:8080", "HOST:PORT", "address of the gateway", false},
    {"ops-listen", CFG_STR, 0, 0, 0, "", "HOST:PORT",
     "a second listener for /healthz, /readyz and /metrics only (then not on --listen)", false},
    {"admin-token-file", CFG_STR, 0, 0, 0, "", "FILE",
     "a file holding the operator dashboard's bearer token (16-128 characters); without it"
     " /admin is off",
     false},
    {"log-level", CFG_STR, 0, 0, 0, "info", "LEVEL",
     "debug, info, warn or error; re-read from the config file on SIGHUP", false},
    {"insecure-dev", CFG_FLAG, 0, 1, 0, "", NULL,
     "development only: no master key, webhooks to http:// on loopback", false},
    {"pool-size", CFG_INT, 1, 64, 8, NULL, "N", "database connections of the gateway", false},
    {"max-connections", CFG_INT, 1, 100000, 4096, NULL, "N", "open HTTP connections at most",
     false},
    {"max-connections-per-ip", CFG_INT, 0, 100000, 256, NULL, "N",
     "connections per client address (0: no limit, behind a proxy)", false},
    {"body-max", CFG_INT, 1024, 64 * 1024, 64 * 1024, NULL, "BYTES", "largest request body", false},
    {"request-timeout", CFG_INT, 1, 300, 10, NULL, "S", "idle keep-alive connection timeout",
     false},
    {"header-timeout", CFG_INT, 1, 300, 10, NULL, "S", "a request head must be complete within",
     false},
    {"body-timeout", CFG_INT, 1, 300, 10, NULL, "S", "a request body must be complete within",
     false},
    {"callback-deadline-ms", CFG_INT, 500, 30000, 4000, NULL, "MS",
     "a callback not committed by then is answered retry", false},
    {"threads", CFG_INT, 0, 64, 0, NULL, "N", "HTTP event loops (0: one per core)", false},
    {"workers", CFG_INT, 1, PO_WORKERS_MAX, 64, NULL, "N", "request workers", false},
    {"api-per-tenant", CFG_INT, 0, PO_WORKERS_MAX, 0, NULL, "N",
     "tenant API requests running per tenant while other tenants are active, the rest waiting"
     " in its lane (0: 4 per committer thread, at most half of --workers; alone: every worker)",
     false},
    {"committers", CFG_INT, 1, PO_COMMITTER_WORKERS_MAX, 2, NULL, "N",
     "batch committers (SQLite: always 1)", false},
    {"batch-max", CFG_INT, 1, PO_BATCH_MAX, 128, NULL, "N", "callbacks per committed batch", false},
    {"batch-wait-us", CFG_INT, 0, PO_BATCH_WAIT_US_MAX, 200, NULL, "US",
     "how long a batch waits for company", false},
    {"query-interval", CFG_INT, 0, D, 60, NULL, "S", "active order query every S seconds (0: off)",
     false},
    {"query-min-age", CFG_INT, 0, 30 * D, 300, NULL, "S",
     "query orders unpaid for at least S seconds", false},
    {"idempotency-retention", CFG_INT, 60, INT64_C(3650) * D, 7 * D, NULL, "S",
     "keep stored API answers S seconds", false},
    {"idempotency-wait-ms", CFG_INT, 0, 30000, 2000, NULL, "MS",
     "a retry waits this long for its in-flight twin before 409", false},
    {"refund-retry-interval", CFG_INT, 0, D, 30, NULL, "S",
     "resubmit pending refunds every S seconds (0: off)", false},
    {"webhook-senders", CFG_INT, 0, 32, 8, NULL, "N", "webhook delivery threads (0: no delivery)",
     false},
    {"webhook-per-endpoint", CFG_INT, 1, 32, 2, NULL, "N", "deliveries in flight per endpoint",
     false},
    {"webhook-per-tenant", CFG_INT, 1, 32, 4, NULL, "N",
     "deliveries in flight per tenant while other tenants have deliveries due (alone: every"
     " sender)",
     false},
    {"webhook-pending-max", CFG_INT, 100, INT64_C(10000000), PO_WEBHOOK_PENDING_DEFAULT, NULL, "N",
     "a tenant's pending deliveries at most; beyond, its new events wait in the outbox", false},
    {"webhook-allow-net", CFG_STR, 0, 0, 0, "", "CIDRS",
     "private networks webhook endpoints may reach (on-premise receivers), e.g. 10.2.0.0/16;"
     " loopback, private, link-local and metadata addresses are refused otherwise",
     false},
    {"webhook-timeout-ms", CFG_INT, 100, 60000, 10000, NULL, "MS",
     "a delivery without an answer by then failed", false},
    {"webhook-retry-base-ms", CFG_INT, 10, INT64_C(3600000), 30000, NULL, "MS",
     "first retry delay, doubled each time", false},
    {"webhook-retry-cap-ms", CFG_INT, 10, INT64_C(86400000), INT64_C(21600000), NULL, "MS",
     "longest retry delay", false},
    {"webhook-max-age-s", CFG_INT, 1, 30 * D, 3 * D, NULL, "S",
     "retry for this long, then dead letter", false},
    {"webhook-alert-after-s", CFG_INT, 0, 30 * D, 3600, NULL, "S",
     "alert when an endpoint has failed this long (0: off)", false},
    {"webhook-poll-ms", CFG_INT, 10, 60000, 200, NULL, "MS",
     "how often the worker looks for new events", false},
};

const char *cli_config_path;

void cli_allowed(const struct cli_command *c, char *buf, size_t cap)
{
    (void)c;
    cfg_names(buf, cap);
    size_t n = strlen(buf);
    (void)snprintf(buf + n, cap - n, " config");
}

const struct cfg_opt *cfg_find(const char *name)
{
    for (int i = 0; i < PO_NELEM(serve_opts); i++)
        if (strcmp(serve_opts[i].name, name) == 0)
            return &serve_opts[i];
    return NULL;
}

void cfg_names(char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < PO_NELEM(serve_opts); i++)
        if (serve_opts[i].type != CFG_FLAG && strcmp(serve_opts[i].name, "db") != 0 &&
            strcmp(serve_opts[i].name, "log-level") != 0)
            n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s", n ? " " : "",
                                  serve_opts[i].name);
}

int cfg_int(const struct opts *o, const char *name, int64_t *out)
{
    const struct cfg_opt *c = cfg_find(name);
    PO_ASSERT(c && c->type == CFG_INT);
    return cli_int_opt(o, name, c->min, c->max, c->dflt, out);
}

void cfg_describe(const struct cfg_opt *c, char *buf, size_t cap)
{
    if (c->type == CFG_INT)
        (void)snprintf(buf, cap, "%s (%" PRId64 "..%" PRId64 ", default %" PRId64 ")", c->doc,
                       c->min, c->max, c->dflt);
    else if (c->type == CFG_STR && c->sdflt && *c->sdflt)
        (void)snprintf(buf, cap, "%s (default %s)", c->doc, c->sdflt);
    else
        (void)snprintf(buf, cap, "%s", c->doc);
}

/* ---- the file ---- */

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

int cfg_load(const char *path, bool required, struct opts *o, char **buf)
{
    size_t len = 0;
    o->n = 0;
    *buf = NULL;
    po_err rc = po_file_read(path, 64 * 1024, buf, &len);
    if (rc == PO_ERR_NOT_FOUND && !required)
        return 0;
    if (rc) {
        fprintf(stderr, "payonce: cannot read %s: %s\n", path, po_file_error(rc));
        return EXIT_FAIL;
    }
    if (memchr(*buf, '\0', len) || !po_utf8_valid(*buf, len)) {
        fprintf(stderr, "payonce: %s: not a text file\n", path);
        return EXIT_FAIL;
    }
    int line = 0;
    /* line by line, blank ones counted (strtok would skip them) */
    for (char *l = *buf, *next = NULL; l; l = next) {
        next = strchr(l, '\n');
        if (next)
            *next++ = '\0';
        line++;
        char *hash = strchr(l, '#');
        if (hash)
            *hash = '\0';
        char *s = trim(l);
        if (!*s)
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            fprintf(stderr, "payonce: %s:%d: expected NAME = VALUE\n", path, line);
            return EXIT_FAIL;
        }
        *eq = '\0';
        char *name = trim(s), *value = trim(eq + 1);
        const struct cfg_opt *c = cfg_find(name);
        if (!c) {
            fprintf(stderr,
                    "payonce: %s:%d: unknown option '%.60s' ('payonce config doc' lists them)\n",
                    path, line, name);
            return EXIT_FAIL;
        }
        for (int i = 0; i < o->n; i++)
            if (strcmp(o->name[i], name) == 0) {
                fprintf(stderr, "payonce: %s:%d: %s is set twice\n", path, line, name);
                return EXIT_FAIL;
            }
        if (o->n >= PO_OPTS_MAX)
            return EXIT_FAIL;
        if (c->type == CFG_FLAG) {
            if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0) {
                fprintf(stderr, "payonce: %s:%d: %s = true or false\n", path, line, name);
                return EXIT_FAIL;
            }
            if (strcmp(value, "false") == 0)
                continue;
            value = NULL;
        } else if (!*value) {
            fprintf(stderr, "payonce: %s:%d: %s has no value\n", path, line, name);
            return EXIT_FAIL;
        }
        o->name[o->n] = c->name;
        o->value[o->n++] = value;
    }
    return 0;
}

/* ---- config check / config doc ---- */

/* postgresql://user:secret@host/db -> postgresql://user:***@host/db */
static void redact_url(const char *url, char *out, size_t cap)
{
    const char *scheme = strstr(url, "://"), *at = strrchr(url, '@');
    const char *colon = scheme ? strchr(scheme + 3, ':') : NULL;
    if (scheme && at && colon && colon < at)
        (void)snprintf(out, cap, "%.*s:***%s", (int)(colon - url), url, at);
    else
        (void)snprintf(out, cap, "%s", url);
}

int cfg_check(const struct opts *file, const struct opts *merged, const char *path)
{
    int bad = 0;
    printf("# payonce serve: effective configuration%s%s\n", path ? " from " : "",
           path ? path : " (no config file)");
    for (int i = 0; i < PO_NELEM(serve_opts); i++) {
        const struct cfg_opt *c = &serve_opts[i];
        const char *v = cli_opt(merged, c->name);
        const char *from = !v ? "default" : cli_opt(file, c->name) == v ? "file" : "command line";
        char shown[600];
        if (c->type == CFG_INT) {
            int64_t x = 0;
            if (cli_int_opt(merged, c->name, c->min, c->max, c->dflt, &x)) {
                bad++;
                continue;
            }
            (void)snprintf(shown, sizeof shown, "%" PRId64, x);
        } else if (c->type == CFG_FLAG) {
            (void)snprintf(shown, sizeof shown, "%s", v ? "true" : "false");
        } else {
            const char *s = v ? v : c->sdflt;
            if (strcmp(c->name, "db") == 0 && !v && getenv("PAYONCE_DB"))
                s = getenv("PAYONCE_DB"), from = "PAYONCE_DB";
            if (strcmp(c->name, "master-key-file") == 0 && !v && getenv("PAYONCE_MASTER_KEY_FILE"))
                s = getenv("PAYONCE_MASTER_KEY_FILE"), from = "PAYONCE_MASTER_KEY_FILE";
            enum po_log_level lvl;
            if (strcmp(c->name, "log-level") == 0 && !po_log_level_parse(s, &lvl)) {
                fprintf(stderr, "payonce: log-level: debug, info, warn or error\n");
                bad++;
            }
            if (c->secret)
                redact_url(s, shown, sizeof shown);
            else
                (void)snprintf(shown, sizeof shown, "%s", *s ? s : "(none)");
        }
        printf("%-24s = %-40s # %s\n", c->name, shown, from);
    }
    /* what serve would refuse at once: the master key must load */
    unsigned char key[32];
    bool have = false;
    if (!cli_flag(merged, "insecure-dev")) {
        if (cli_load_master_key(merged, key, &have))
            bad++;
        else if (!have) {
            fprintf(stderr, "payonce: no master key: master-key-file (or --insecure-dev)\n");
            bad++;
        }
        po_secure_zero(key, sizeof key);
    }
    if (bad)
        fprintf(stderr, "payonce: config check: %d problem%s\n", bad, bad == 1 ? "" : "s");
    return bad ? EXIT_USAGE : 0;
}

int cmd_config_check(struct po_store *s, const struct opts *o)
{
    (void)s;
    (void)o;
    return EXIT_FAIL; /* run by main through cfg_check, with the file's options */
}

int cmd_config_doc(struct po_store *s, const struct opts *o)
{
    (void)s;
    (void)o;
    cfg_doc(stdout);
    return 0;
}

void cfg_doc(FILE *f)
{
    fputs("# payonce serve: configuration\n\n"
          "<!-- Generated by `payonce config doc` from the option table in src/cli/config.c;\n"
          "     the test suite fails when this file and the table differ. -->\n\n"
          "`payonce serve` reads `/etc/payonce/payonce.conf` when it exists, or the file\n"
          "named by `--config FILE` (which must exist); options given on the command line\n"
          "override the file. One option per line, `name = value`, the names of the\n"
          "command-line flags without `--`; `#` starts a comment; a flag is `true` or\n"
          "`false`. An unknown name, a value out of bounds or a name set twice is an\n"
          "error naming the line. `payonce config check [--config FILE]` validates a file\n"
          "and prints the effective value of every option and where it came from\n"
          "(default, file, command line, environment), the database password redacted.\n\n"
          "On SIGHUP, `serve` re-reads the file and applies `log-level`; every other\n"
          "option needs a restart. On SIGTERM (or SIGINT) it stops accepting connections,\n"
          "answers every request in flight (callbacks after their batch commits), stops\n"
          "the webhook worker between deliveries, and exits.\n\n"
          "| option | value | default | bounds | meaning |\n|---|---|---|---|---|\n",
          f);
    for (int i = 0; i < PO_NELEM(serve_opts); i++) {
        const struct cfg_opt *c = &serve_opts[i];
        if (c->type == CFG_INT)
            fprintf(f, "| `%s` | %s | %" PRId64 " | %" PRId64 "..%" PRId64 " | %s |\n", c->name,
                    c->arg, c->dflt, c->min, c->max, c->doc);
        else
            fprintf(f, "| `%s` | %s | %s | | %s |\n", c->name,
                    c->type == CFG_FLAG ? "true/false" : c->arg,
                    c->type == CFG_FLAG ? "false"
                    : *c->sdflt         ? c->sdflt
                                        : "—",
                    c->doc);
    }
}

int cli_committer_opts(const struct opts *o, int64_t *committers, int64_t *batch_max,
                       int64_t *batch_wait)
{
    int ret = cfg_int(o, "committers", committers); /* bounds: config.c's table */
    if (!ret)
        ret = cfg_int(o, "batch-max", batch_max);
    if (!ret)
        ret = cfg_int(o, "batch-wait-us", batch_wait);
    return ret;
}
