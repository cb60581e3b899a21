/*
 * cmd_webhook.c — `payonce webhook add|list|remove|rotate-secret|redrive|
 * attempts` (docs/webhooks.md). add and rotate-secret print the signing
 * secret alone on stdout: it is shown once and stored sealed with the
 * master key.
 */
#include "cli_int.h"

#include "../service/service.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The master key, or NULL with --insecure-dev (secrets stored plain). */
static int master_of(const struct opts *o, unsigned char key[32], const unsigned char **out)
{
    bool have = false;
    if (cli_load_master_key(o, key, &have))
        return EXIT_USAGE;
    if (!have && !cli_flag(o, "insecure-dev")) {
        fprintf(stderr, "payonce: the endpoint's secret is sealed with the master key: give"
                        " --master-key-file or PAYONCE_MASTER_KEY_FILE (or --insecure-dev)\n");
        return EXIT_USAGE;
    }
    *out = have ? key : NULL;
    return 0;
}

/* The secret alone on stdout (shown once), then wiped; what it is on stderr. */
static void print_secret(char *secret, size_t cap, const char *what, const char *endpoint,
                         const char *tenant)
{
    printf("%s\n", secret);
    fflush(stdout);
    po_secure_zero(secret, cap);
    fprintf(stderr, "payonce: endpoint %s of tenant %s: %s (above), shown only now\n", endpoint,
            tenant, what);
}

/* insecure-dev and webhook-allow-net decide where serve delivers, and
 * webhook add judges a URL with the same options (its flags, else the
 * config file's). When they differ between the two commands, deliveries
 * fail later with nothing said at the time (issue 45 item 2); so: */

/* A URL refused here that --insecure-dev would have let in: serve needs
 * the flag too, which the refusal says. */
static void refused_hint(const struct opts *o, const char *url)
{
    struct po_egress_policy loose;
    char why[PO_ERRBUF_SIZE] = "";
    if (cli_flag(o, "insecure-dev") ||
        po_egress_policy_parse(cli_opt(o, "webhook-allow-net"), true, &loose, why, sizeof why) ||
        !po_egress_url_ok(&loose, url, why, sizeof why))
        return;
    fprintf(stderr, "payonce: (http:// to loopback is for development: give --insecure-dev here"
                    " and to serve too, or `insecure-dev = true` in the config file both read;"
                    " a serve without it refuses every delivery there)\n");
}

/* A URL accepted here only because of this command line's --insecure-dev
 * or --webhook-allow-net, which the config file (what a serve started from
 * it uses) does not hold: serve refuses every delivery to it unless it is
 * given the same. The endpoint is added; this says so, once, on stderr. */
static void mismatch_warning(const struct opts *o, const char *url)
{
    const struct opts *file = cli_where.file;
    struct po_egress_policy served;
    char why[PO_ERRBUF_SIZE] = "", cfg[700];
    bool file_loop = file && cli_flag(file, "insecure-dev");
    if (po_egress_policy_parse(file ? cli_opt(file, "webhook-allow-net") : NULL, file_loop, &served,
                               why, sizeof why) ||
        po_egress_url_ok(&served, url, why, sizeof why))
        return; /* a file whose list does not parse: serve says so itself */
    /* which of the two let it in: loopback (insecure-dev), or a network */
    struct po_egress_policy with_loop;
    char ignored[PO_ERRBUF_SIZE];
    bool loop = !file_loop &&
                !po_egress_policy_parse(file ? cli_opt(file, "webhook-allow-net") : NULL, true,
                                        &with_loop, ignored, sizeof ignored) &&
                po_egress_url_ok(&with_loop, url, ignored, sizeof ignored);
    const char *given = loop ? "--insecure-dev" : "--webhook-allow-net";
    if (cli_where.config)
        (void)snprintf(cfg, sizeof cfg, "the config file %s does not set %s", cli_where.config,
                       given + 2);
    else
        (void)snprintf(cfg, sizeof cfg, "no config file sets %s (%s)", given + 2,
                       cli_where.note[0] ? cli_where.note : "none was named");
    fprintf(stderr,
            "payonce: WARNING: this endpoint's URL is accepted only because of %s on this command"
            " line, and %s: a serve without it refuses every delivery to the endpoint (%s). Start"
            " serve with %s too, or put `%s = %s` in the config file it reads.\n",
            given, cfg, why, given, given + 2,
            loop                              ? "true"
            : cli_opt(o, "webhook-allow-net") ? cli_opt(o, "webhook-allow-net")
                                              : "…");
}

int cmd_webhook_add(struct po_store *s, const struct opts *o)
{
    unsigned char key[32];
    const unsigned char *master = NULL;
    int x = master_of(o, key, &master);
    if (x)
        return x;
    struct po_webhook_new n;
    struct po_egress_policy egress;
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_egress_policy_parse(cli_opt(o, "webhook-allow-net"), cli_flag(o, "insecure-dev"),
                                       &egress, err, sizeof err);
    if (rc) {
        po_secure_zero(key, sizeof key);
        fprintf(stderr, "payonce: --webhook-allow-net: %s\n", err);
        return EXIT_USAGE;
    }
    rc = po_webhook_add(s, master, cli_opt(o, "tenant"), cli_opt(o, "url"), cli_opt(o, "events"),
                        &egress, &n, err, sizeof err);
    po_secure_zero(key, sizeof key);
    if (rc) {
        int ret = cli_fail(rc, err);
        if (rc == PO_ERR_INVALID)
            refused_hint(o, cli_opt(o, "url"));
        return ret;
    }
    print_secret(n.secret, sizeof n.secret, "added; its signing secret", n.id,
                 cli_opt(o, "tenant"));
    mismatch_warning(o, cli_opt(o, "url"));
    return 0;
}

static void endpoint_line(json_t *e)
{
    const char *failing = json_string_value(json_object_get(e, "failing_since"));
    printf("%s  %s  events %s  pending %lld  dead %lld%s%s\n",
           json_string_value(json_object_get(e, "id")),
           json_string_value(json_object_get(e, "url")),
           json_string_value(json_object_get(e, "events")),
           (long long)json_integer_value(json_object_get(e, "pending")),
           (long long)json_integer_value(json_object_get(e, "dead")),
           failing ? "  failing since " : "", failing ? failing : "");
}

int cmd_webhook_list(struct po_store *s, const struct opts *o)
{
    json_t *list = NULL;
    /* Every live endpoint: a tenant has at most PO_WEBHOOK_ENDPOINTS_MAX. */
    struct po_page pg = {.after_ts = "", .after_key = "", .limit = PO_WEBHOOK_ENDPOINTS_MAX};
    po_err rc = po_webhook_list(s, cli_opt(o, "tenant"), &pg, &list);
    if (rc)
        return cli_fail(rc, "cannot read the endpoints");
    cli_print_list(o, list, endpoint_line);
    return 0;
}

int cmd_webhook_remove(struct po_store *s, const struct opts *o)
{
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_webhook_remove(s, cli_opt(o, "tenant"), cli_opt(o, "endpoint"), err, sizeof err);
    if (rc)
        return cli_fail(rc, err);
    printf("endpoint %s of tenant %s removed\n", cli_opt(o, "endpoint"), cli_opt(o, "tenant"));
    return 0;
}

int cmd_webhook_rotate(struct po_store *s, const struct opts *o)
{
    unsigned char key[32];
    const unsigned char *master = NULL;
    int x = master_of(o, key, &master);
    if (x)
        return x;
    char secret[PO_WEBHOOK_SECRET_SIZE], err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_webhook_rotate(s, master, cli_opt(o, "tenant"), cli_opt(o, "endpoint"), secret,
                                  err, sizeof err);
    po_secure_zero(key, sizeof key);
    if (rc)
        return cli_fail(rc, err);
    print_secret(secret, sizeof secret, "a new signing secret", cli_opt(o, "endpoint"),
                 cli_opt(o, "tenant"));
    return 0;
}

int cmd_webhook_redrive(struct po_store *s, const struct opts *o)
{
    char err[PO_ERRBUF_SIZE] = "";
    int64_t n = 0;
    const char *since = cli_opt(o, "since");
    if (since && !po_time_valid(since)) {
        fprintf(stderr, "payonce: --since: an RFC 3339 time (2026-12-03T00:00:00Z)\n");
        return EXIT_USAGE;
    }
    po_err rc = po_webhook_redrive(s, cli_opt(o, "tenant"), cli_opt(o, "event"),
                                   cli_opt(o, "endpoint"), since, &n, err, sizeof err);
    if (rc)
        return cli_fail(rc, err);
    printf("%lld dead deliveries of tenant %s sent again\n", (long long)n, cli_opt(o, "tenant"));
    return 0;
}

static void attempt_line(json_t *a)
{
    json_t *st = json_object_get(a, "status");
    const char *error = json_string_value(json_object_get(a, "error"));
    char answer[32] = "no answer";
    if (json_is_integer(st))
        (void)snprintf(answer, sizeof answer, "HTTP %lld", (long long)json_integer_value(st));
    printf("%s  #%lld  %s  %s  %lld ms  %s (the delivery: %s)\n",
           json_string_value(json_object_get(a, "endpoint")),
           (long long)json_integer_value(json_object_get(a, "attempt")),
           json_string_value(json_object_get(a, "at")), answer,
           (long long)json_integer_value(json_object_get(a, "latency_ms")),
           json_string_value(json_object_get(a, "result")),
           json_string_value(json_object_get(a, "state")));
    if (error)
        printf("    %s\n", error);
}

int cmd_webhook_attempts(struct po_store *s, const struct opts *o)
{
    json_t *list = NULL;
    po_err rc = po_webhook_attempts(s, cli_opt(o, "tenant"), cli_opt(o, "event"), &list);
    if (rc)
        return cli_fail(rc, "cannot read the attempts");
    cli_print_list(o, list, attempt_line);
    return 0;
}
