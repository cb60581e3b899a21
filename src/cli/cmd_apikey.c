/*
 * cmd_apikey.c — `payonce apikey create|revoke|list` and `payonce idempotency
 * reap`. create prints the new key alone on stdout (README.md, "The command line"); it is
 * shown once and only its hash is stored.
 */
#include "cli_int.h"

#include "../service/service.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_apikey_create(struct po_store *s, const struct opts *o)
{
    char key[PO_APIKEY_LEN + 1], id[PO_APIKEY_ID_LEN + 1], err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_apikey_create(s, cli_opt(o, "tenant"), key, id, err, sizeof err);
    if (rc)
        return cli_fail(rc, err);
    printf("%s\n", key);
    fflush(stdout);
    memset(key, 0, sizeof key);
    fprintf(stderr, "payonce: API key %s created for tenant %s; it is shown only now\n", id,
            cli_opt(o, "tenant"));
    return 0;
}

int cmd_apikey_revoke(struct po_store *s, const struct opts *o)
{
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_apikey_revoke(s, cli_opt(o, "tenant"), cli_opt(o, "key-id"), err, sizeof err);
    if (rc)
        return cli_fail(rc, err);
    printf("API key %s of tenant %s revoked\n", cli_opt(o, "key-id"), cli_opt(o, "tenant"));
    return 0;
}

static void apikey_line(json_t *k)
{
    const char *rev = json_string_value(json_object_get(k, "revoked_at"));
    printf("%-18s created %s%s%s\n", json_string_value(json_object_get(k, "key_id")),
           json_string_value(json_object_get(k, "created_at")), rev ? "  revoked " : "",
           rev ? rev : "");
}

int cmd_apikey_list(struct po_store *s, const struct opts *o)
{
    json_t *list = NULL;
    po_err rc = po_view_apikeys(s, cli_opt(o, "tenant"), &list);
    if (rc)
        return cli_fail(rc, "cannot read the API keys");
    cli_print_list(o, list, apikey_line);
    return 0;
}

int cmd_idempotency_reap(struct po_store *s, const struct opts *o)
{
    int64_t retention = PO_IDEM_RETENTION_DEFAULT_S, deleted = 0;
    const char *v = cli_opt(o, "retention");
    if (v && po_parse_i64(v, PO_IDEM_RETENTION_MIN_S, INT64_C(10) * 365 * 86400, &retention)) {
        fprintf(stderr,
                "payonce: --retention: seconds, from %d (serve's floor: a client's retry must"
                " still find its answer) to 3650 days\n",
                PO_IDEM_RETENTION_MIN_S);
        return EXIT_USAGE;
    }
    po_err rc = po_idem_reap(s, retention, &deleted);
    if (rc)
        return cli_fail(rc, "cannot delete stored Idempotency-Key responses");
    printf("%lld stored responses older than %lld s deleted\n", (long long)deleted,
           (long long)retention);
    return 0;
}
