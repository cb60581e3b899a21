/*
 * sources.c — where a command finds the service's configuration, its
 * database and its master key, and what it says when one of them cannot be
 * opened (issue 45 item 1).
 *
 * The config file is, in this order: --config FILE, else $PAYONCE_CONFIG
 * (both must name a file that can be read), else /etc/payonce/payonce.conf
 * when it exists and can be read — serve and config check refuse one that
 * exists and cannot be read, the other commands go on without it and say
 * why in --verbose and in their errors (an operator may run them with
 * --db). From the file each command takes what applies to it
 * (cli_file_applies); PAYONCE_DB and PAYONCE_MASTER_KEY_FILE win over the
 * file, the command line over both. --verbose says, for each, which one it
 * was; an error opening one names the path, the cause found on the path
 * (po_path_why: a missing directory, a permission and whose it is) and
 * where the path came from.
 *
 * Here too: the config file's parser (cfg_load), the store and the master
 * key opened for a command (cli_open_store, cli_load_master_key,
 * cli_account), and config check's table entry, whose identity decides
 * which commands take the whole file. cmd_config.c and opts.c are below
 * this file: it calls them, they do not call it.
 */
#include "../core/core.h"
#include "../crypto/crypto.h"
#include "../store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_int.h"

struct cli_where cli_where;

/* The default file's path: /etc/payonce/payonce.conf, or for the test
 * suite only PAYONCE_TEST_DEFAULT_CONFIG (docs/testing.md: it lets a test
 * stand a file in for /etc without touching /etc). */
static const char *default_path(void)
{
    const char *t = getenv("PAYONCE_TEST_DEFAULT_CONFIG");
    return t && *t ? t : PO_CONFIG_DEFAULT;
}

int cli_config_find(const struct cli_command *c, const char *allowed, const struct opts *flags,
                    struct opts *file, char **filebuf)
{
    const char *env = getenv("PAYONCE_CONFIG");
    char takes[600];
    cli_file_takes(c, allowed, takes, sizeof takes);
    bool strict = c->run == cmd_serve || c->run == cmd_config_check,
         wanted = strcmp(takes, "nothing") != 0;
    file->n = 0;
    *filebuf = NULL;
    cli_where.flags = flags;
    cli_where.file = file;
    cli_where.cmd = c;
    cli_where.allowed = allowed;
    cli_where.note[0] = '\0';
    if (cli_opt(flags, "config")) {
        cli_where.config = cli_opt(flags, "config");
        cli_where.config_from = "--config";
    } else if (env && *env) {
        cli_where.config = env;
        cli_where.config_from = "PAYONCE_CONFIG";
    } else if (!wanted) {
        /* nothing in it applies: a default file is not even read (one named
         * on purpose is, and must be right) */
        (void)snprintf(cli_where.note, sizeof cli_where.note,
                       "the default %s is not read: nothing in it applies to this command",
                       default_path());
        cli_where.config = NULL;
        cli_where.config_from = "the default";
    } else {
        cli_where.config = default_path();
        cli_where.config_from = "the default";
        /* the default only when it exists and can be read; serve and config
         * check are the service's: a default file they cannot read is an
         * error (cfg_load says why), not a reason to run on defaults */
        char why[512];
        int e = access(cli_where.config, R_OK) == 0 ? 0 : errno;
        if (e && (e == ENOENT || !strict)) {
            if (e == ENOENT)
                (void)snprintf(cli_where.note, sizeof cli_where.note, "%s does not exist",
                               cli_where.config);
            else {
                if (!po_path_why(cli_where.config, false, why, sizeof why))
                    (void)snprintf(why, sizeof why, "%s", strerror(e));
                (void)snprintf(cli_where.note, sizeof cli_where.note, "%s is not readable: %s",
                               cli_where.config, why);
            }
            cli_where.config = NULL;
        }
    }
    cli_config_path = cli_where.config;
    if (!cli_where.config)
        return 0;
    int ret = cfg_load(cli_where.config, true, file, filebuf);
    if (ret && strcmp(cli_where.config_from, "PAYONCE_CONFIG") == 0)
        fprintf(stderr, "payonce: (the config file named by PAYONCE_CONFIG)\n");
    return ret;
}

bool cli_file_applies(const struct cli_command *c, const char *allowed, const char *name)
{
    if (c->run == cmd_serve || c->run == cmd_config_check)
        return true;
    /* the file's log-level is serve's (JSON lines at info); a command
     * speaks to a person, errors only unless its own --log-level asks */
    if (strcmp(name, "log-level") == 0)
        return false;
    /* the simulator, bench, migrate-store and config doc have options of
     * their own (sim serve's --listen is not the gateway's) */
    bool service = !c->no_store || c->run == cmd_backup || c->run == cmd_restore;
    if (!service)
        return false;
    if (strcmp(name, "db") == 0)
        return c->run != cmd_restore; /* restore's --db names the new database */
    char pat[64], all[1600];
    (void)snprintf(pat, sizeof pat, " %s ", name);
    (void)snprintf(all, sizeof all, " %s %s ", allowed ? allowed : "", c->flags);
    return strstr(all, pat) != NULL;
}

void cli_file_takes(const struct cli_command *c, const char *allowed, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    if (c->run == cmd_serve || c->run == cmd_config_check) {
        (void)snprintf(buf, cap, "all of it");
        return;
    }
    for (int i = 0; i < po_options_count; i++)
        if (cli_file_applies(c, allowed, po_options[i].name) && n < cap)
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", po_options[i].name);
    if (!n)
        (void)snprintf(buf, cap, "nothing");
}

/* "the default config file /etc/payonce/payonce.conf" and the like */
static void config_said(char *buf, size_t cap)
{
    if (!cli_where.config)
        (void)snprintf(buf, cap, "no config file (no --config, PAYONCE_CONFIG not set, %s)",
                       cli_where.note);
    else if (strcmp(cli_where.config_from, "the default") == 0)
        (void)snprintf(buf, cap, "the default config file %s", cli_where.config);
    else
        (void)snprintf(buf, cap, "the config file %s (%s)", cli_where.config,
                       cli_where.config_from);
}

void cli_origin(const char *name, const char *env, char *buf, size_t cap)
{
    char cfg[700];
    config_said(cfg, sizeof cfg);
    for (int i = 0; cli_where.flags && i < cli_where.flags->n; i++)
        if (strcmp(cli_where.flags->name[i], name) == 0) {
            (void)snprintf(buf, cap, "given with --%s", name);
            return;
        }
    if (env && getenv(env) && *getenv(env)) {
        (void)snprintf(buf, cap, "from %s", env);
        return;
    }
    /* the file's value only when the command took it (restore never takes
     * its db) */
    bool taken = cli_where.cmd && cli_file_applies(cli_where.cmd, cli_where.allowed, name);
    for (int i = 0; taken && cli_where.config && cli_where.file && i < cli_where.file->n; i++)
        if (strcmp(cli_where.file->name[i], name) == 0) {
            (void)snprintf(buf, cap, "from %s, line %d", cfg, cli_where.file->line[i]);
            return;
        }
    if (cli_where.config && !taken)
        (void)snprintf(buf, cap, "not given: no --%s%s%s (this command takes no %s from %s)", name,
                       env ? ", no " : "", env ? env : "", name, cfg);
    else if (cli_where.config)
        (void)snprintf(buf, cap, "not given: no --%s%s%s, and no %s in %s", name,
                       env ? ", no " : "", env ? env : "", name, cfg);
    else
        (void)snprintf(buf, cap, "not given: no --%s%s%s, and %s", name, env ? ", no " : "",
                       env ? env : "", cfg);
}

void cli_verbose(const struct cli_command *c, const char *allowed, const struct opts *o)
{
    char cfg[700], from[1200], takes[700];
    config_said(cfg, sizeof cfg);
    cli_file_takes(c, allowed, takes, sizeof takes);
    if (cli_where.config)
        fprintf(stderr, "payonce: config: %s; this command takes from it: %s\n", cfg, takes);
    else
        fprintf(stderr, "payonce: config: %s\n", cfg);
    bool db = !c->no_store || c->run == cmd_backup || c->run == cmd_restore;
    if (db) {
        char shown[600];
        cli_redact_url(cli_db_url(o), shown, sizeof shown);
        cli_origin("db", "PAYONCE_DB", from, sizeof from);
        if (strncmp(from, "not given", 9) == 0)
            fprintf(stderr, "payonce: database: %s (the default; %s)\n", shown, from);
        else
            fprintf(stderr, "payonce: database: %s (%s)\n", shown, from);
    }
    if (cli_file_applies(c, allowed, "master-key-file") || c->run == cmd_serve) {
        const char *k = cli_opt(o, "master-key-file");
        if (!k || !*k)
            k = getenv("PAYONCE_MASTER_KEY_FILE");
        cli_origin("master-key-file", "PAYONCE_MASTER_KEY_FILE", from, sizeof from);
        fprintf(stderr, "payonce: master key: %s (%s)\n", k && *k ? k : "none", from);
    }
}

void cli_db_fail(const char *url, const char *store_err, bool create)
{
    char shown[600], cause[600] = "", from[1200];
    cli_redact_url(url, shown, sizeof shown);
    cli_origin("db", "PAYONCE_DB", from, sizeof from);
    const char *path = strncmp(url, "sqlite:", 7) == 0 ? url + 7 : NULL;
    /* the cause on the path (SQLite's own is "unable to open database
     * file"), else the store's */
    if (!(path && *path && po_path_why(path, true, cause, sizeof cause)))
        (void)snprintf(cause, sizeof cause, "%s", store_err && *store_err ? store_err : "failed");
    else if (strstr(cause, "the directory") && access(path, F_OK) == 0)
        (void)snprintf(cause + strlen(cause), sizeof cause - strlen(cause),
                       ": SQLite writes its -wal and -shm files beside the database");
    fprintf(stderr, "payonce: cannot %s database %s: %s; the database was %s\n",
            create ? "create the" : "open", path && *path ? path : shown, cause, from);
}

/* ---- the config file ---- */

const char *cli_config_path;

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
        char why[600];
        po_file_why(path, rc, why, sizeof why);
        fprintf(stderr, "payonce: cannot read %s: %s\n", path, why);
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
        const struct po_option *c = po_option_find(name);
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
        if (o->n >= PO_OPTS_MAX) {
            fprintf(stderr, "payonce: %s:%d: more than %d options\n", path, line, PO_OPTS_MAX);
            return EXIT_FAIL;
        }
        if (c->type == PO_OPT_FLAG) {
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
        o->line[o->n] = line;
        o->value[o->n++] = value;
    }
    return 0;
}

void cli_redact_url(const char *url, char *out, size_t cap)
{
    const char *scheme = strstr(url, "://"), *at = strrchr(url, '@');
    const char *colon = scheme ? strchr(scheme + 3, ':') : NULL;
    if (scheme && at && colon && colon < at)
        (void)snprintf(out, cap, "%.*s:***%s", (int)(colon - url), url, at);
    else
        (void)snprintf(out, cap, "%s", url);
}

int cmd_config_check(struct po_store *s, const struct opts *o)
{
    (void)s;
    (void)o;
    return EXIT_FAIL; /* run by main through cfg_check, with the file's options */
}

/* ---- the database and the master key, opened ---- */

int cli_open_store(const struct opts *o, struct po_store **out)
{
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_store_open(cli_db_url(o), out, err, sizeof err);
    if (rc) {
        const char *url = cli_db_url(o);
        cli_db_fail(url, err, strncmp(url, "sqlite:", 7) == 0 && access(url + 7, F_OK) != 0);
        return EXIT_FAIL;
    }
    return 0;
}

int cli_load_master_key(const struct opts *o, unsigned char key[32], bool *have)
{
    const char *path = cli_opt(o, "master-key-file");
    if (!path || !*path)
        path = getenv("PAYONCE_MASTER_KEY_FILE");
    *have = false;
    if (!path || !*path)
        return 0;
    char err[PO_ERRBUF_SIZE] = "";
    if (po_master_key_load(path, key, err, sizeof err)) {
        char from[1200];
        cli_origin("master-key-file", "PAYONCE_MASTER_KEY_FILE", from, sizeof from);
        fprintf(stderr, "payonce: %s; the master key's file was %s\n", err, from);
        return EXIT_FAIL;
    }
    *have = true;
    return 0;
}

int cli_account(struct po_store *s, const struct opts *o, const char *tenant, const char *channel,
                struct po_channel_account *out)
{
    unsigned char master[32];
    bool have = false;
    int ret = cli_load_master_key(o, master, &have);
    if (ret)
        return ret;
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_account_fetch(s, have ? master : NULL, tenant, channel, out, err, sizeof err);
    po_secure_zero(master, sizeof master);
    return rc ? cli_fail(rc, err) : 0;
}
