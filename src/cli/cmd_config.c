/*
 * cmd_config.c — `payonce serve`'s options on the command line and in files.
 *
 * The one option table (service/gateway/options.c) says, for every option, its
 * type, default, bounds, what it means and which gateway field it fills.
 * From it come here: the command line's checks (cfg_int), the checks of
 * the config file's values (its parser, for /etc/payonce/payonce.conf or
 * --config FILE: "name = value" lines, the same names as the flags, is
 * sources.c's cfg_load), `payonce config check` (validates
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

void cli_allowed(const struct cli_command *c, char *buf, size_t cap)
{
    (void)c;
    cfg_names(buf, cap);
    size_t n = strlen(buf);
    (void)snprintf(buf + n, cap - n, " config");
}

void cfg_names(char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < po_options_count; i++)
        if (po_options[i].type != PO_OPT_FLAG && strcmp(po_options[i].name, "db") != 0 &&
            strcmp(po_options[i].name, "log-level") != 0)
            n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s", n ? " " : "",
                                  po_options[i].name);
}

int cfg_int(const struct opts *o, const char *name, int64_t *out)
{
    const struct po_option *c = po_option_find(name);
    PO_ASSERT(c && c->type == PO_OPT_INT);
    return cli_int_opt(o, name, c->min, c->max, c->dflt, out);
}

int cfg_gateway(const struct opts *o, struct po_gateway_cfg *g)
{
    po_gateway_cfg_init(g);
    for (int i = 0; i < po_options_count; i++) {
        const struct po_option *c = &po_options[i];
        if (!c->size)
            continue;
        if (c->type == PO_OPT_STR) {
            if (cli_opt(o, c->name))
                po_option_set_str(g, c, cli_opt(o, c->name));
            continue;
        }
        int64_t v = 0;
        int ret = cfg_int(o, c->name, &v);
        if (ret)
            return ret;
        po_option_set(g, c, v);
    }
    return 0;
}

void cfg_describe(const struct po_option *c, char *buf, size_t cap)
{
    if (c->type == PO_OPT_INT)
        (void)snprintf(buf, cap, "%s (%" PRId64 "..%" PRId64 ", default %" PRId64 ")", c->doc,
                       c->min, c->max, c->dflt);
    else if (c->type == PO_OPT_STR && c->sdflt && *c->sdflt)
        (void)snprintf(buf, cap, "%s (default %s)", c->doc, c->sdflt);
    else
        (void)snprintf(buf, cap, "%s", c->doc);
}

/* The config file's line of option name when merged's value is the file's
 * (a flag may override it), else 0. */
static int file_line(const struct opts *file, const struct opts *merged, const char *name)
{
    const char *v = cli_opt(merged, name);
    for (int i = file->n - 1; v && i >= 0; i--)
        if (strcmp(file->name[i], name) == 0)
            /* a flag set in the file has no value; it is the file's */
            return file->value[i] == v || !file->value[i] ? file->line[i] : 0;
    return 0;
}

/* Option c's whole number from merged (its default when unset) into *x;
 * false, said on stderr with the file's line when it is the file's, when
 * it is not one within c's bounds. */
static bool int_in_bounds(const struct opts *file, const struct opts *merged, const char *path,
                          const struct po_option *c, int64_t *x)
{
    const char *v = cli_opt(merged, c->name);
    *x = c->dflt;
    if (!v || po_parse_i64(v, c->min, c->max, x) == PO_OK)
        return true;
    int line = path ? file_line(file, merged, c->name) : 0;
    if (line)
        fprintf(stderr, "payonce: %s:%d: %s = %.60s: not an integer in %lld..%lld\n", path, line,
                c->name, v, (long long)c->min, (long long)c->max);
    else
        fprintf(stderr, "payonce: --%s must be an integer in %lld..%lld\n", c->name,
                (long long)c->min, (long long)c->max);
    return false;
}

int cfg_bounds(const struct opts *file, const struct opts *merged, const char *path)
{
    int bad = 0;
    for (int i = 0; i < po_options_count; i++) {
        int64_t x;
        if (po_options[i].type == PO_OPT_INT &&
            !int_in_bounds(file, merged, path, &po_options[i], &x))
            bad++;
    }
    return bad;
}

/* ---- config check / config doc ---- */

/* config check: an endpoint serve with this configuration would refuse to
 * deliver to, said on stderr (at most ENDPOINT_LINES_MAX lines). */
#define ENDPOINT_LINES_MAX 50
static void endpoint_refused(void *ctx, const char *tenant, const char *endpoint, const char *why)
{
    (void)ctx;
    fprintf(stderr,
            "payonce: tenant %s, webhook endpoint %s: serve with this configuration refuses every"
            " delivery to it: %s\n",
            tenant, endpoint, why);
}

/* The live webhook endpoints of the configured database judged by the
 * configured egress policy (insecure-dev, webhook-allow-net), as serve
 * judges them at start: returns the number of problems (a policy that
 * does not parse, each endpoint refused). A database that cannot be read
 * is said on stdout and is not a problem: the configuration may be checked
 * where the database is not. Reads only. */
static int endpoints_check(const struct opts *merged)
{
    struct po_egress_policy egress;
    char err[PO_ERRBUF_SIZE] = "";
    if (po_egress_policy_parse(cli_opt(merged, "webhook-allow-net"),
                               cli_flag(merged, "insecure-dev"), &egress, err, sizeof err)) {
        fprintf(stderr, "payonce: webhook-allow-net: %s\n", err);
        return 1;
    }
    const char *url = cli_db_url(merged);
    char shown[600], why[600];
    cli_redact_url(url, shown, sizeof shown);
    /* a SQLite file that is not there is not made here */
    if (strncmp(url, "sqlite:", 7) == 0 && po_path_why(url + 7, false, why, sizeof why)) {
        printf("# webhook endpoints: not checked (database %s: %s)\n", url + 7, why);
        return 0;
    }
    struct po_store *s = NULL;
    if (po_store_open(url, &s, err, sizeof err)) {
        printf("# webhook endpoints: not checked (cannot open database %s: %s)\n", shown, err);
        return 0;
    }
    int checked = 0, refused = 0;
    po_err rc = po_webhook_check_urls(s, &egress, ENDPOINT_LINES_MAX, endpoint_refused, NULL,
                                      &checked, &refused, err, sizeof err);
    po_store_close(s);
    if (rc) {
        printf("# webhook endpoints: not checked (cannot read them in %s: %s)\n", shown, err);
        return 0;
    }
    if (refused > ENDPOINT_LINES_MAX)
        fprintf(stderr, "payonce: and %d more webhook endpoints refused\n",
                refused - ENDPOINT_LINES_MAX);
    printf("# webhook endpoints: %d live in %s, %d refused by this configuration's egress policy"
           "%s\n",
           checked, shown, refused,
           refused ? " (insecure-dev allows http:// to loopback; webhook-allow-net private"
                     " networks)"
                   : "");
    return refused;
}

int cfg_check(const struct opts *file, const struct opts *merged, const char *path)
{
    int bad = 0;
    printf("# payonce serve: effective configuration%s%s\n", path ? " from " : "",
           path ? path : " (no config file)");
    for (int i = 0; i < po_options_count; i++) {
        const struct po_option *c = &po_options[i];
        const char *v = cli_opt(merged, c->name);
        int line = file_line(file, merged, c->name);
        char from[96];
        (void)snprintf(from, sizeof from, "%s", !v ? "default" : line ? "file" : "command line");
        if (line)
            (void)snprintf(from, sizeof from, "file, line %d", line);
        char shown[600];
        if (c->type == PO_OPT_INT) {
            int64_t x = 0;
            if (!int_in_bounds(file, merged, path, c, &x)) {
                bad++; /* listed as given, with what is wrong */
                (void)snprintf(shown, sizeof shown, "%.60s", v);
                (void)snprintf(from + strlen(from), sizeof from - strlen(from),
                               ": NOT an integer in %lld..%lld", (long long)c->min,
                               (long long)c->max);
            } else {
                (void)snprintf(shown, sizeof shown, "%" PRId64, x);
            }
        } else if (c->type == PO_OPT_FLAG) {
            (void)snprintf(shown, sizeof shown, "%s", v ? "true" : "false");
        } else {
            const char *s = v ? v : c->sdflt;
            if (strcmp(c->name, "db") == 0 && !v && getenv("PAYONCE_DB")) {
                s = getenv("PAYONCE_DB");
                (void)snprintf(from, sizeof from, "PAYONCE_DB");
            }
            if (strcmp(c->name, "master-key-file") == 0 && !v &&
                getenv("PAYONCE_MASTER_KEY_FILE")) {
                s = getenv("PAYONCE_MASTER_KEY_FILE");
                (void)snprintf(from, sizeof from, "PAYONCE_MASTER_KEY_FILE");
            }
            enum po_log_level lvl;
            if (strcmp(c->name, "log-level") == 0 && !po_log_level_parse(s, &lvl)) {
                if (line)
                    fprintf(stderr,
                            "payonce: %s:%d: log-level = %.60s: debug, info, warn or error\n", path,
                            line, s);
                else
                    fprintf(stderr, "payonce: log-level: debug, info, warn or error\n");
                bad++;
            }
            if (c->secret)
                cli_redact_url(s, shown, sizeof shown);
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
    /* what serve would warn about at start: endpoints it cannot deliver to */
    bad += endpoints_check(merged);
    if (bad)
        fprintf(stderr, "payonce: config check: %d problem%s\n", bad, bad == 1 ? "" : "s");
    return bad ? EXIT_USAGE : 0;
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
          "<!-- Generated by `payonce config doc` from the option table in "
          "src/service/gateway/options.c;\n"
          "     the test suite fails when this file and the table differ. -->\n\n"
          "`payonce serve` reads the file named by `--config FILE`, else by\n"
          "`PAYONCE_CONFIG` (either must exist), else `/etc/payonce/payonce.conf` when it\n"
          "exists; options given on the command line override the file. Every other\n"
          "command finds the file the same way (a default it cannot read it passes over,\n"
          "saying so) and takes from it what applies to it — a command on the database\n"
          "its `db`, one that seals or opens secrets its `master-key-file`, `webhook add`\n"
          "its `insecure-dev` and `webhook-allow-net`; `log-level` is serve's; its\n"
          "`--help` says what; `PAYONCE_DB` and `PAYONCE_MASTER_KEY_FILE` win over the\n"
          "file, flags over both, and `--verbose` says where each came from.\n"
          "One option per line, `name = value`, the names of the\n"
          "command-line flags without `--`; `#` starts a comment; a flag is `true` or\n"
          "`false`. An unknown name, a value out of bounds or a name set twice is an\n"
          "error naming the line (`payonce.conf:3: query-interval = 999999999: not an\n"
          "integer in 0..86400`), said by `serve` before it opens anything.\n"
          "`payonce config check [--config FILE]` validates a file and prints the\n"
          "effective value of every option and where it came from (default, the file's\n"
          "line, command line, environment), a value out of bounds as given with what is\n"
          "wrong with it, the database password redacted; then it reads the webhook\n"
          "endpoints of that database and counts as a problem each one whose URL this\n"
          "configuration's `insecure-dev` and `webhook-allow-net` would refuse (serve\n"
          "warns about them at start; a database it cannot open is said, not counted).\n\n"
          "On SIGHUP, `serve` re-reads the file and applies `log-level`; every other\n"
          "option needs a restart. On SIGTERM (or SIGINT) it stops accepting connections,\n"
          "answers every request in flight (callbacks after their batch commits), stops\n"
          "the webhook worker between deliveries, and exits.\n\n"
          "| option | value | default | bounds | meaning |\n|---|---|---|---|---|\n",
          f);
    for (int i = 0; i < po_options_count; i++) {
        const struct po_option *c = &po_options[i];
        if (c->type == PO_OPT_INT)
            fprintf(f, "| `%s` | %s | %" PRId64 " | %" PRId64 "..%" PRId64 " | %s |\n", c->name,
                    c->arg, c->dflt, c->min, c->max, c->doc);
        else
            fprintf(f, "| `%s` | %s | %s | | %s |\n", c->name,
                    c->type == PO_OPT_FLAG ? "true/false" : c->arg,
                    c->type == PO_OPT_FLAG ? "false"
                    : *c->sdflt            ? c->sdflt
                                           : "—",
                    c->doc);
    }
}

int cli_committer_opts(const struct opts *o, int64_t *committers, int64_t *batch_max,
                       int64_t *batch_wait, int64_t *known)
{
    int ret = cfg_int(o, "committers", committers); /* bounds: config.c's table */
    if (!ret)
        ret = cfg_int(o, "batch-max", batch_max);
    if (!ret)
        ret = cfg_int(o, "batch-wait-us", batch_wait);
    if (!ret)
        ret = cfg_int(o, "known-events", known);
    return ret;
}
