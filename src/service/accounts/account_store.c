/*
 * account_store.c — channel accounts in the store: fetched and unsealed for the
 * gateway, reconciliation and refund submission; saved by `channel set`.
 * The document format itself belongs to channel/account.c.
 */
#include "account.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

po_err po_account_fetch_versioned(struct po_store *s, const unsigned char *master,
                                  const char *tenant, const char *channel,
                                  struct po_channel_account *out, int64_t *version, char *err,
                                  size_t errcap)
{
    struct po_rows r;
    int64_t v = 0;
    po_err rc = po_store_exec(s,
                              "SELECT config, version FROM channel_account WHERE tenant_id = ? AND"
                              " channel = ?",
                              PO_PARAMS(PO_TEXT(tenant), PO_TEXT(channel)), &r, NULL, err, errcap);
    if (rc)
        return rc;
    if (r.nrows == 0) {
        po_rows_free(&r);
        po_errf(err, errcap, "tenant %s has no %s account", tenant, channel);
        return PO_ERR_NOT_FOUND;
    }
    if (po_rows_i64(&r, 0, 1, &v))
        rc = PO_ERR_STORE;
    else if (po_channel_account_load(tenant, channel, po_rows_get(&r, 0, 0), master, out, err,
                                     errcap))
        rc = PO_ERR_STORE; /* stored but unusable: an operator's problem, logged by the caller */
    po_rows_free(&r);
    if (!rc)
        *version = v;
    return rc;
}

po_err po_account_fetch(struct po_store *s, const unsigned char *master, const char *tenant,
                        const char *channel, struct po_channel_account *out, char *err,
                        size_t errcap)
{
    int64_t version = 0;
    return po_account_fetch_versioned(s, master, tenant, channel, out, &version, err, errcap);
}

po_err po_account_doc(struct po_store *s, const char *tenant, const char *channel, json_t **doc,
                      char *updated_at, size_t cap)
{
    struct po_rows r;
    *doc = NULL;
    po_err rc = po_store_exec(s,
                              "SELECT config, updated_at FROM channel_account WHERE tenant_id = ?"
                              " AND channel = ?",
                              PO_PARAMS(PO_TEXT(tenant), PO_TEXT(channel)), &r, NULL, NULL, 0);
    if (rc)
        return rc;
    if (r.nrows == 1) {
        const char *text = po_rows_get(&r, 0, 0);
        rc = po_json_parse(text, strlen(text), doc, NULL, 0);
        if (rc && rc != PO_ERR_NOMEM)
            rc = PO_ERR_STORE; /* payonce wrote it */
        if (!rc && updated_at && po_strcpy(updated_at, cap, po_rows_get(&r, 0, 1)))
            updated_at[0] = '\0';
    }
    po_rows_free(&r);
    return rc;
}

po_err po_account_has_merchant_key(struct po_store *s, const char *tenant, const char *channel,
                                   bool *has_account, bool *has_key)
{
    json_t *doc = NULL;
    po_err rc = po_account_doc(s, tenant, channel, &doc, NULL, 0);
    *has_account = doc != NULL;
    /* the key that signs (WeChat Pay, Alipay) or authorises (Stripe)
     * calls to the channel */
    *has_key = json_is_string(json_object_get(doc, "merchant_private_key")) ||
               json_is_string(json_object_get(doc, "api_key"));
    json_decref(doc);
    return rc;
}

po_err po_account_check_all(struct po_store *s, const unsigned char *master,
                            void (*report)(void *ctx, const char *tenant, const char *channel,
                                           const char *why),
                            void *ctx, int *checked, int *broken)
{
    struct po_rows r;
    *checked = *broken = 0;
    po_err rc = po_store_exec(s,
                              "SELECT tenant_id, channel FROM channel_account ORDER BY tenant_id,"
                              " channel",
                              PO_NO_PARAMS, &r, NULL, NULL, 0);
    if (rc)
        return rc;
    for (int i = 0; i < r.nrows; i++) {
        struct po_channel_account acct;
        char err[PO_ERRBUF_SIZE] = "";
        memset(&acct, 0, sizeof acct);
        po_err arc = po_account_fetch(s, master, po_rows_get(&r, i, 0), po_rows_get(&r, i, 1),
                                      &acct, err, sizeof err);
        po_channel_account_free(&acct);
        (*checked)++;
        if (arc == PO_ERR_NOMEM) {
            rc = arc;
            break;
        }
        if (arc) {
            (*broken)++;
            report(ctx, po_rows_get(&r, i, 0), po_rows_get(&r, i, 1), err);
        }
    }
    po_rows_free(&r);
    return rc;
}

po_err po_account_save(struct po_store *s, const char *tenant, const char *channel, const char *doc,
                       char *err, size_t errcap)
{
    char now[PO_TIME_SIZE];
    po_clock_now_iso(now, sizeof now);
    struct po_rows r;
    po_err rc = po_store_begin(s, err, errcap);
    if (rc)
        return rc;
    rc = po_store_exec(s, "SELECT 1 FROM tenant WHERE tenant_id = ?", PO_PARAMS(PO_TEXT(tenant)),
                       &r, NULL, err, errcap);
    if (!rc) {
        if (r.nrows == 0) {
            po_errf(err, errcap, "no such tenant %s", tenant);
            rc = PO_ERR_NOT_FOUND;
        }
        po_rows_free(&r);
    }
    /* another tenant's account this one's notifications could be taken for */
    struct po_rows others = {0};
    if (!rc)
        rc =
            po_store_exec(s,
                          "SELECT tenant_id, config FROM channel_account WHERE channel = ? AND"
                          " tenant_id <> ? ORDER BY tenant_id",
                          PO_PARAMS(PO_TEXT(channel), PO_TEXT(tenant)), &others, NULL, err, errcap);
    for (int i = 0; !rc && i < others.nrows; i++) {
        const char *why = po_channel_account_clash(channel, doc, po_rows_get(&others, i, 1));
        if (why) {
            po_errf(err, errcap, "%s (tenant %s)", why, po_rows_get(&others, i, 0));
            rc = PO_ERR_CONFLICT;
        }
    }
    po_rows_free(&others);
    if (!rc)
        rc = po_store_exec(s,
                           "INSERT INTO channel_account (tenant_id, channel, config, version,"
                           " updated_at) VALUES (?, ?, ?, 1, ?) ON CONFLICT (tenant_id, channel)"
                           " DO UPDATE SET config = excluded.config, version ="
                           " channel_account.version + 1, updated_at = excluded.updated_at",
                           PO_PARAMS(PO_TEXT(tenant), PO_TEXT(channel), PO_TEXT(doc), PO_TEXT(now)),
                           NULL, NULL, err, errcap);
    if (rc) {
        po_store_rollback(s);
        return rc;
    }
    return po_store_commit(s, err, errcap);
}

void po_strings_free(char **v, int n)
{
    for (int i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

po_err po_account_tenants(struct po_store *s, const char *channel, char ***out, int *out_n)
{
    struct po_rows r;
    po_err rc = po_store_exec(s,
                              "SELECT tenant_id FROM channel_account WHERE channel = ?"
                              " ORDER BY tenant_id",
                              PO_PARAMS(PO_TEXT(channel)), &r, NULL, NULL, 0);
    if (rc)
        return rc;
    int want = r.nrows, n = 0;
    char **v = calloc((size_t)want + 1, sizeof *v);
    for (int i = 0; v && i < want; i++)
        if ((v[n] = strdup(po_rows_get(&r, i, 0))))
            n++;
    po_rows_free(&r);
    if (!v || n < want) {
        po_strings_free(v, n);
        return PO_ERR_NOMEM;
    }
    *out = v;
    *out_n = n;
    return PO_OK;
}
