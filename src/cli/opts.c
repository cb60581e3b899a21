/*
 * opts.c — the command line's helpers shared by every command: parsing
 * "--name value" options, reading them, printing a listing or a JSON
 * document, and reporting a failure. Opening the store and the master key
 * is sources.c's, which says where each came from when one fails.
 */
#include "../channel/channel.h"
#include "../core/core.h"
#include "../crypto/crypto.h"
#include "../service/service.h"
#include "../store/store.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_int.h"

int cli_parse_opts(int argc, char **argv, const char *allowed, const char *flags, struct opts *o)
{
    o->n = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || !a[2]) {
            /* One positional argument, where the command takes a FILE
             * (recon import) or an alert ID (alerts ack|resolve|refund…):
             * whole option names ("master-key-file" is not "file"). */
            char words[1600];
            (void)snprintf(words, sizeof words, " %s ", allowed);
            const char *pos = strstr(words, " file ")    ? "file"
                              : strstr(words, " alert ") ? "alert"
                                                         : NULL;
            if (pos && !cli_opt(o, pos) && o->n < PO_OPTS_MAX) {
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
        (void)snprintf(all, sizeof all, " db log-level config verbose %s %s ", allowed, flags);
        (void)snprintf(fl, sizeof fl, " verbose %s ", flags);
        if (!strstr(all, pat)) {
            fprintf(stderr, "payonce: unknown option '%s'\n", a);
            return -1;
        }
        if (o->n >= PO_OPTS_MAX) {
            fprintf(stderr,
                    "payonce: more than %d options on the command line (a long list goes in a"
                    " file: sim pay --orders-file, order import --file)\n",
                    PO_OPTS_MAX);
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
int cli_opt_all(const struct opts *o, const char *name, const char **vals, int max)
{
    int n = 0;
    for (int i = 0; i < o->n && n < max; i++)
        if (strcmp(o->name[i], name) == 0 && o->value[i])
            vals[n++] = o->value[i];
    return n;
}

const char *cli_opt(const struct opts *o, const char *name)
{
    for (int i = o->n - 1; i >= 0; i--)
        if (strcmp(o->name[i], name) == 0)
            return o->value[i] ? o->value[i] : "";
    return NULL;
}

bool cli_flag(const struct opts *o, const char *name)
{
    return cli_opt(o, name) != NULL;
}

int cli_int_opt(const struct opts *o, const char *name, int64_t min, int64_t max, int64_t dflt,
                int64_t *out)
{
    const char *v = cli_opt(o, name);
    *out = dflt;
    if (v && po_parse_i64(v, min, max, out)) {
        fprintf(stderr, "payonce: --%s must be an integer in %lld..%lld\n", name, (long long)min,
                (long long)max);
        return EXIT_USAGE;
    }
    return 0;
}

/* Returns the named option or prints which one is missing. */
const char *cli_need(const struct opts *o, const char *name)
{
    const char *v = cli_opt(o, name);
    if (!v || !*v)
        fprintf(stderr, "payonce: --%s is required\n", name);
    return v && *v ? v : NULL;
}

/* Reports every required option that is absent; true if any is. */
bool cli_missing_required(const struct opts *o, const char *required)
{
    char list[256];
    bool missing = false;
    PO_ASSERT(po_strcpy(list, sizeof list, required) == PO_OK);
    for (char *save = NULL, *name = strtok_r(list, " ", &save); name;
         name = strtok_r(NULL, " ", &save))
        if (!cli_need(o, name))
            missing = true;
    return missing;
}

const char *cli_db_url(const struct opts *o)
{
    const char *url = cli_opt(o, "db");
    if (!url)
        url = getenv("PAYONCE_DB");
    if (!url || !*url)
        url = "sqlite:./payonce.db";
    return url;
}

void cli_print_list(const struct opts *o, json_t *list, void (*line)(json_t *item))
{
    if (cli_flag(o, "json")) {
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

int cli_fail(po_err rc, const char *err)
{
    fprintf(stderr, "payonce: %s (%s)\n", err && *err ? err : "failed", po_err_name(rc));
    return EXIT_FAIL;
}

int cli_read_input(const char *path, size_t max, const char *what, char **out, size_t *out_len)
{
    po_err rc = strcmp(path, "-") == 0 ? po_stream_read(stdin, max, out, out_len)
                                       : po_file_read(path, max, out, out_len);
    if (!rc)
        return 0;
    char why[600];
    if (strcmp(path, "-") == 0)
        (void)snprintf(why, sizeof why, "%s", po_file_error(rc));
    else
        po_file_why(path, rc, why, sizeof why);
    fprintf(stderr, "payonce: cannot read %s: %s%s%s%s\n", path, why,
            rc == PO_ERR_LIMIT ? " (larger than " : "", rc == PO_ERR_LIMIT ? what : "",
            rc == PO_ERR_LIMIT ? ")" : "");
    return EXIT_FAIL;
}

int cli_print_json(json_t *doc)
{
    if (!doc)
        return cli_fail(PO_ERR_NOMEM, "out of memory");
    int rc = json_dumpf(doc, stdout, JSON_COMPACT | JSON_SORT_KEYS) == 0 ? 0 : EXIT_FAIL;
    fputc('\n', stdout);
    json_decref(doc);
    return rc;
}
