/*
 * cmd_operator.c — `payonce operator add|passwd|role|remove|list`: the
 * people who sign in to the console (docs/operations.md, "The console").
 * A password is read from a file (--password-file; - is standard input),
 * one line, never from the command line where ps and the shell's history
 * would show it; only its scrypt hash is stored.
 */
#include "cli_int.h"

#include "../crypto/crypto.h"
#include "../service/service.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The password of --password-file: its first line. */
static int read_password(const struct opts *o, char **pw, size_t *len)
{
    const char *path = cli_opt(o, "password-file");
    char *text = NULL;
    size_t n = 0;
    po_err rc = strcmp(path, "-") == 0 ? po_stream_read(stdin, PO_PASSWORD_MAX + 2, &text, &n)
                                       : po_file_read(path, PO_PASSWORD_MAX + 2, &text, &n);
    if (rc) {
        char why[600];
        po_file_why(path, rc, why, sizeof why);
        fprintf(stderr, "payonce: --password-file %s: %s (one line, at most %d bytes)\n", path, why,
                PO_PASSWORD_MAX);
        return EXIT_USAGE;
    }
    size_t line = strcspn(text, "\r\n");
    if (line == 0 || line > PO_PASSWORD_MAX || memchr(text, 0, line)) {
        po_secure_zero(text, n);
        free(text);
        fprintf(stderr, "payonce: --password-file %s: a password of 1-%d bytes on its first line\n",
                path, PO_PASSWORD_MAX);
        return EXIT_USAGE;
    }
    text[line] = 0;
    *pw = text;
    *len = line;
    return 0;
}

static int role_of(const struct opts *o, enum po_role *role)
{
    const char *r = cli_opt(o, "role");
    if (!r) {
        *role = PO_ROLE_VIEWER;
        return 0;
    }
    if (po_role_parse(r, role))
        return 0;
    fprintf(stderr, "payonce: --role: viewer, operator or admin\n");
    return EXIT_USAGE;
}

int cmd_operator_add(struct po_store *s, const struct opts *o)
{
    enum po_role role;
    char *pw = NULL, err[PO_ERRBUF_SIZE] = "";
    size_t len = 0;
    int rc = role_of(o, &role);
    if (rc || (rc = read_password(o, &pw, &len)))
        return rc;
    po_err e = po_operator_add(s, cli_opt(o, "name"), role, pw, len, err, sizeof err);
    po_secure_zero(pw, len);
    free(pw);
    if (e)
        return cli_fail(e, err);
    printf("operator %s added, role %s\n", cli_opt(o, "name"), po_role_name(role));
    return 0;
}

int cmd_operator_passwd(struct po_store *s, const struct opts *o)
{
    char *pw = NULL, err[PO_ERRBUF_SIZE] = "";
    size_t len = 0;
    int rc = read_password(o, &pw, &len);
    if (rc)
        return rc;
    po_err e = po_operator_passwd(s, cli_opt(o, "name"), pw, len, err, sizeof err);
    po_secure_zero(pw, len);
    free(pw);
    if (e)
        return cli_fail(e, err);
    printf("operator %s: new password; signed out everywhere\n", cli_opt(o, "name"));
    return 0;
}

int cmd_operator_role(struct po_store *s, const struct opts *o)
{
    enum po_role role;
    char err[PO_ERRBUF_SIZE] = "";
    int rc = role_of(o, &role);
    if (rc)
        return rc;
    po_err e = po_operator_set_role(s, cli_opt(o, "name"), role, err, sizeof err);
    if (e)
        return cli_fail(e, err);
    printf("operator %s: role %s\n", cli_opt(o, "name"), po_role_name(role));
    return 0;
}

int cmd_operator_remove(struct po_store *s, const struct opts *o)
{
    char err[PO_ERRBUF_SIZE] = "";
    po_err e = po_operator_remove(s, cli_opt(o, "name"), err, sizeof err);
    if (e)
        return cli_fail(e, err);
    printf("operator %s removed; signed out everywhere\n", cli_opt(o, "name"));
    return 0;
}

static void operator_line(json_t *x)
{
    const char *last = json_string_value(json_object_get(x, "last_login_at"));
    printf("%-20s %-8s created %s  last sign-in %s  sessions %lld\n",
           json_string_value(json_object_get(x, "name")),
           json_string_value(json_object_get(x, "role")),
           json_string_value(json_object_get(x, "created_at")), last ? last : "never",
           (long long)json_integer_value(json_object_get(x, "sessions")));
}

int cmd_operator_list(struct po_store *s, const struct opts *o)
{
    json_t *doc = NULL;
    po_err rc = po_view_operators(s, &doc);
    if (rc)
        return cli_fail(rc, "cannot read the operators");
    json_t *list = json_incref(json_object_get(doc, "operators"));
    json_decref(doc);
    cli_print_list(o, list, operator_line);
    return 0;
}
