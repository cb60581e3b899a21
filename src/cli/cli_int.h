/*
 * cli_int.h — shared by the files of the payonce command.
 */
#ifndef PO_CLI_INT_H
#define PO_CLI_INT_H

#include "../core/core.h"
#include "../store/store.h"

#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define EXIT_VERIFY 3
#define EXIT_TEMPFAIL 75

/* Parsed "--name value" options and flags of one command. */
struct opts {
    int n;
    const char *name[PO_OPTS_MAX];
    const char *value[PO_OPTS_MAX]; /* NULL for flags */
};

/* The last value of an option ("" for a flag), or NULL when absent. */
const char *opt(const struct opts *o, const char *name);
/* Every value of a repeatable option, in order; returns the count. */
int opt_all(const struct opts *o, const char *name, const char **vals, int max);
bool flag(const struct opts *o, const char *name);
/* An integer option in [min, max] (dflt when absent) into *out; 0, or
 * EXIT_USAGE after saying what is wrong. */
int int_opt(const struct opts *o, const char *name, int64_t min, int64_t max, int64_t dflt,
            int64_t *out);
/* The committer's options shared by serve and bench: --committers (2),
 * --batch-max (128), --batch-wait-us (200); 0 or EXIT_USAGE. */
int committer_opts(const struct opts *o, int64_t *committers, int64_t *batch_max,
                   int64_t *batch_wait);
/* The option's value, or NULL after printing that it is required. */
const char *need(const struct opts *o, const char *name);
/* Prints an error with its code and returns EXIT_FAIL. */
int fail(po_err rc, const char *err);
/* A listing: with --json one JSON array on stdout, otherwise line() for
 * each element. Takes list (json_decref'd here). */
struct json_t;
void print_list(const struct opts *o, struct json_t *list, void (*line)(struct json_t *item));
int open_store(const struct opts *o, struct po_store **out);
/* --db, else PAYONCE_DB, else sqlite:./payonce.db */
const char *db_url(const struct opts *o);

/* The master key from --master-key-file or PAYONCE_MASTER_KEY_FILE.
 * Returns 0 and sets *have (false when neither is given), or an exit code. */
int load_master_key(const struct opts *o, unsigned char key[32], bool *have);

int cmd_channel_set(struct po_store *s, const struct opts *o);
/* `channel set`'s options, from the channel registry (space-separated). */
void channel_set_options(char *buf, size_t cap);
int cmd_serve(struct po_store *s, const struct opts *o);
int cmd_bench(struct po_store *s, const struct opts *o);
int cmd_sim_keys(struct po_store *s, const struct opts *o);
int cmd_sim_pay(struct po_store *s, const struct opts *o);
int cmd_sim_serve(struct po_store *s, const struct opts *o);
int cmd_recon_import(struct po_store *s, const struct opts *o);
int cmd_recon_query(struct po_store *s, const struct opts *o);
int cmd_recon_runs(struct po_store *s, const struct opts *o);
int cmd_apikey_create(struct po_store *s, const struct opts *o);
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
