/*
 * cli_int.h — shared by the files of the payonce command.
 */
#ifndef PO_CLI_INT_H
#define PO_CLI_INT_H

#include "../core/core.h"
#include "../service/gateway/options.h"
#include "../store/store.h"

#include <stdio.h>

#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define EXIT_VERIFY 3
#define EXIT_TEMPFAIL 75

/* Parsed "--name value" options and flags of one command. */
struct opts {
    int n;
    const char *name[PO_OPTS_MAX];
    const char *value[PO_OPTS_MAX]; /* NULL for flags */
    int line[PO_OPTS_MAX];          /* cfg_load: the config file's line */
    char namebuf[PO_OPTS_MAX][48];
};

/* ---- opts.c ---- */

/* Parses "--name value" pairs and the flags listed in `flags`
 * (space-separated) into o; every option must be in `allowed`. 0, or
 * EXIT_USAGE after saying what is wrong. */
int cli_parse_opts(int argc, char **argv, const char *allowed, const char *flags, struct opts *o);
/* Reports every required option (space-separated) that is absent; true
 * if any is. */
bool cli_missing_required(const struct opts *o, const char *required);
/* Prints doc (taken: json_decref'd) as one compact line; 0 or EXIT_FAIL. */
struct json_t;
int cli_print_json(struct json_t *doc);
/* The last value of an option ("" for a flag), or NULL when absent. */
const char *cli_opt(const struct opts *o, const char *name);
/* Every value of a repeatable option, in order; returns the count. */
int cli_opt_all(const struct opts *o, const char *name, const char **vals, int max);
bool cli_flag(const struct opts *o, const char *name);
/* An integer option in [min, max] (dflt when absent) into *out; 0, or
 * EXIT_USAGE after saying what is wrong. */
int cli_int_opt(const struct opts *o, const char *name, int64_t min, int64_t max, int64_t dflt,
                int64_t *out);
/* The option's value, or NULL after printing that it is required. */
const char *cli_need(const struct opts *o, const char *name);
/* Prints an error with its code and returns EXIT_FAIL. */
int cli_fail(po_err rc, const char *err);
/* The whole of path ("-": standard input), at most max bytes (a NUL after
 * them), or EXIT_FAIL after "cannot read PATH: REASON" (what: the bound,
 * for a file too large: "64 KiB"). */
int cli_read_input(const char *path, size_t max, const char *what, char **out, size_t *out_len);
/* A listing: with --json one JSON array on stdout, otherwise line() for
 * each element. Takes list (json_decref'd here). */
struct json_t;
void cli_print_list(const struct opts *o, struct json_t *list, void (*line)(struct json_t *item));
/* The store of cli_db_url, or EXIT_FAIL after saying why (sources.c). */
int cli_open_store(const struct opts *o, struct po_store **out);
/* --db, else PAYONCE_DB, else sqlite:./payonce.db */
const char *cli_db_url(const struct opts *o);

/* The master key from --master-key-file or PAYONCE_MASTER_KEY_FILE.
 * Returns 0 and sets *have (false when neither is given), or an exit code
 * (sources.c). */
int cli_load_master_key(const struct opts *o, unsigned char key[32], bool *have);
/* The tenant's stored account for channel, its secrets unsealed with that
 * master key; 0, or an exit code after saying why (sources.c). */
struct po_channel_account;
int cli_account(struct po_store *s, const struct opts *o, const char *tenant, const char *channel,
                struct po_channel_account *out);

/* Seals every callback record of s not sealed yet into its tenant's chain
 * (po_audit_seal, a transaction per 1000), key NULL: plain links; counts
 * them into *out_sealed (cmd_audit.c: audit seal, and backup's copy). */
po_err cli_seal_all(struct po_store *s, const unsigned char *key, int64_t *out_sealed, char *err,
                    size_t errcap) PO_MUST_CHECK;

/* ---- serve's options, declared once (cmd_config.c) ---- */
/* The committer's options shared by serve and bench: --committers (2),
 * --batch-max (128), --batch-wait-us (200), --known-events (65536); 0 or
 * EXIT_USAGE. */
int cli_committer_opts(const struct opts *o, int64_t *committers, int64_t *batch_max,
                       int64_t *batch_wait, int64_t *known);
#define PO_CONFIG_DEFAULT "/etc/payonce/payonce.conf"
struct po_option;
struct po_gateway_cfg;
/* The gateway's configuration from the option table: every field at its
 * default (po_gateway_cfg_init), then what o sets, each checked against
 * its bounds. db_url, master_key and egress are the caller's. 0 or
 * EXIT_USAGE. */
int cfg_gateway(const struct opts *o, struct po_gateway_cfg *g);
/* The value options of the table other than db and log-level, which every
 * command takes (space-separated). */
void cfg_names(char *buf, size_t cap);
/* An integer option of the table, with its bounds and default. */
int cfg_int(const struct opts *o, const char *name, int64_t *out);
/* The option's description with its default and bounds. */
void cfg_describe(const struct po_option *c, char *buf, size_t cap);
/* Reads a config file into o (values point into *buf, which the caller
 * frees). A missing file is fine unless required. 0 or an exit code, after
 * saying what is wrong with which line (sources.c). */
int cfg_load(const char *path, bool required, struct opts *o, char **buf);
/* config check: prints the effective values; 0, or EXIT_USAGE. */
int cfg_check(const struct opts *file, const struct opts *merged, const char *path);
/* Says every whole-number option of merged that is out of its bounds,
 * naming the config file's line (path:line) when the value is the file's;
 * returns how many. serve runs it before anything else. */
int cfg_bounds(const struct opts *file, const struct opts *merged, const char *path);
/* config doc: the Markdown of docs/configuration.md. */
void cfg_doc(FILE *f);
/* The config file serve was started with (NULL: none), for SIGHUP
 * (sources.c). */
extern const char *cli_config_path;

/* ---- sources.c: where the configuration, database and key came from ---- */
struct cli_command;
struct cli_where {
    const char *config;              /* the config file read, NULL: none */
    const char *config_from;         /* "--config", "PAYONCE_CONFIG" or "the default" */
    char note[600];                  /* without one: why not the default ("… does not exist") */
    const struct opts *flags, *file; /* the command line's and the file's options */
    const struct cli_command *cmd;   /* the command, and its value options */
    const char *allowed;
};
extern struct cli_where cli_where;
/* Finds command c's config file (--config, PAYONCE_CONFIG, the default
 * when it exists and can be read — serve and config check refuse a default
 * they cannot read; a command that takes nothing from it does not read the
 * default) and reads it into file (values in *filebuf, the caller frees
 * it). 0, or an exit code after saying what is wrong. */
int cli_config_find(const struct cli_command *c, const char *allowed, const struct opts *flags,
                    struct opts *file, char **filebuf);
/* Whether command c (its value options allowed) takes the config file's
 * option name: serve and config check all of them; a command that uses
 * the service's database its db (not restore: its --db is the new one) and
 * the options it accepts (master-key-file, insecure-dev,
 * webhook-allow-net); log-level is serve's; the simulator, bench,
 * migrate-store and config doc nothing. */
bool cli_file_applies(const struct cli_command *c, const char *allowed, const char *name);
/* The options c takes from the file, for people ("db, master-key-file",
 * "all of it", "nothing"). */
void cli_file_takes(const struct cli_command *c, const char *allowed, char *buf, size_t cap);
/* Where option name's value came from, for people: "given with --db",
 * "from PAYONCE_DB" (env, NULL: none), "from the default config file
 * /etc/payonce/payonce.conf, line 11", or "not given: …" saying what was
 * looked at (and why there was no config file). */
void cli_origin(const char *name, const char *env, char *buf, size_t cap);
/* --verbose: the config file, the database and the master key, each with
 * where it came from, on stderr. */
void cli_verbose(const struct cli_command *c, const char *allowed, const struct opts *o);
/* "payonce: cannot open database PATH: CAUSE; the database was ORIGIN":
 * the cause found on the path (po_path_why), else store_err. create: it
 * was to be made (migrate). */
void cli_db_fail(const char *url, const char *store_err, bool create);
/* A database URL with its password shown as ***:
 * postgresql://user:secret@host/db -> postgresql://user:***@host/db
 * (sources.c). */
void cli_redact_url(const char *url, char *out, size_t cap);
struct cli_command;
/* The value options of a command whose table entry says "@serve". */
void cli_allowed(const struct cli_command *c, char *buf, size_t cap);

/* One command of the table in main.c. */
struct cli_command {
    const char *word1, *word2; /* word2 NULL for one-word commands */
    const char *allowed;       /* value options; NULL: channel set's, from the registry */
    const char *required;      /* value options that must be present */
    const char *flags;
    int (*run)(struct po_store *s, const struct opts *o);
    bool no_store; /* runs without a database (s is NULL) */
    const char *summary;
};
extern const struct cli_command cli_commands[];
extern const size_t cli_ncommands;

/* help.c: `payonce help [COMMAND [SUB]]` (argv after "help"), and the
 * help of one command or of all. */
int cli_help(int argc, char **argv);
void cli_help_command(FILE *f, const struct cli_command *c);
/* The command nearest to what was typed (edit distance of the first word;
 * with the second word when the nearest group has it), for "did you
 * mean": "tenant", "tenant list". */
void cli_nearest_command(const char *word1, const char *word2, char *buf, size_t cap);
void cli_help_overview(FILE *f);

/* One object by its id through a service view; prints what is wrong and
 * returns an exit code when it cannot be read or does not exist. */
struct json_t;
int cli_show_one(struct po_store *s, const char *tenant, const char *id, const char *what,
                 po_err (*view)(struct po_store *, const char *, const char *, struct json_t **),
                 struct json_t **doc);

/* ledger.c */
int cmd_migrate(struct po_store *s, const struct opts *o);
int cmd_tenant_add(struct po_store *s, const struct opts *o);
int cmd_merchant_add(struct po_store *s, const struct opts *o);
int cmd_order_create(struct po_store *s, const struct opts *o);
int cmd_order_import(struct po_store *s, const struct opts *o);
int cmd_order_show(struct po_store *s, const struct opts *o);
int cmd_refund_create(struct po_store *s, const struct opts *o);
int cmd_balances(struct po_store *s, const struct opts *o);
int cmd_apply(struct po_store *s, const struct opts *o);
int cmd_backup(struct po_store *s, const struct opts *o);
int cmd_report(struct po_store *s, const struct opts *o);
int cmd_restore(struct po_store *s, const struct opts *o);
int cmd_migrate_store(struct po_store *s, const struct opts *o);
int cmd_verify(struct po_store *s, const struct opts *o);
int cmd_audit_verify(struct po_store *s, const struct opts *o);
int cmd_audit_head(struct po_store *s, const struct opts *o);
int cmd_audit_seal(struct po_store *s, const struct opts *o);
int cmd_audit_show(struct po_store *s, const struct opts *o);
/* alerts.c */
int cmd_alerts(struct po_store *s, const struct opts *o);
int cmd_alerts_ack(struct po_store *s, const struct opts *o);
int cmd_alerts_resolve(struct po_store *s, const struct opts *o);
int cmd_alerts_replay(struct po_store *s, const struct opts *o);
int cmd_alerts_accept(struct po_store *s, const struct opts *o);
int cmd_alerts_refund(struct po_store *s, const struct opts *o);
int cmd_channel_set(struct po_store *s, const struct opts *o);
int cmd_tenant_set(struct po_store *s, const struct opts *o);
int cmd_order_close(struct po_store *s, const struct opts *o);
int cmd_channel_check(struct po_store *s, const struct opts *o);
int cmd_channel_show(struct po_store *s, const struct opts *o);
int cmd_tenant_list(struct po_store *s, const struct opts *o);
int cmd_merchant_list(struct po_store *s, const struct opts *o);
int cmd_order_list(struct po_store *s, const struct opts *o);
int cmd_refund_show(struct po_store *s, const struct opts *o);
/* `channel set`'s options, from the channel registry (space-separated). */
void cli_channel_set_options(char *buf, size_t cap);
int cmd_serve(struct po_store *s, const struct opts *o);
int cmd_config_check(struct po_store *s, const struct opts *o);
int cmd_config_doc(struct po_store *s, const struct opts *o);
int cmd_bench(struct po_store *s, const struct opts *o);
int cmd_sim_keys(struct po_store *s, const struct opts *o);
int cmd_sim_pay(struct po_store *s, const struct opts *o);
int cmd_sim_serve(struct po_store *s, const struct opts *o);
int cmd_recon_import(struct po_store *s, const struct opts *o);
int cmd_recon_query(struct po_store *s, const struct opts *o);
int cmd_recon_runs(struct po_store *s, const struct opts *o);
int cmd_recon_fetch(struct po_store *s, const struct opts *o);
int cmd_apikey_create(struct po_store *s, const struct opts *o);
int cmd_operator_add(struct po_store *s, const struct opts *o);
int cmd_alerts_redrive(struct po_store *s, const struct opts *o);
int cmd_operator_passwd(struct po_store *s, const struct opts *o);
int cmd_operator_role(struct po_store *s, const struct opts *o);
int cmd_operator_remove(struct po_store *s, const struct opts *o);
int cmd_operator_list(struct po_store *s, const struct opts *o);
int cmd_webhook_add(struct po_store *s, const struct opts *o);
int cmd_sim_receiver(struct po_store *s, const struct opts *o);
int cmd_webhook_list(struct po_store *s, const struct opts *o);
int cmd_webhook_remove(struct po_store *s, const struct opts *o);
int cmd_webhook_rotate(struct po_store *s, const struct opts *o);
int cmd_webhook_redrive(struct po_store *s, const struct opts *o);
int cmd_webhook_attempts(struct po_store *s, const struct opts *o);
int cmd_apikey_revoke(struct po_store *s, const struct opts *o);
int cmd_apikey_list(struct po_store *s, const struct opts *o);
int cmd_idempotency_reap(struct po_store *s, const struct opts *o);

#endif
