/*
 * keys_refresh.c — the channel's verification keys kept current: the
 * platform certificates fetched for every account that can fetch them
 * (the jobs' keys round, and `channel check`), merged into the stored
 * document when its version has not changed meanwhile. Above both the
 * account store (account_store.c) and the cache (account_cache.c), whose
 * account it uses.
 */
#include "account.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the channel's verification keys kept current ---- */

/* The stored document's keys merged with the fetched ones: new serials
 * added, expired keys dropped (a key without an end, a public key, stays).
 * *changed when the document differs. */
static po_err merge_keys(json_t *doc, const struct po_key_fetch *f, int64_t now, int64_t *added,
                         int64_t *dropped, bool *changed)
{
    json_t *keys = json_object_get(doc, "keys"), *kept = json_array();
    if (!kept || !json_is_array(keys)) {
        json_decref(kept);
        return kept ? PO_ERR_STORE : PO_ERR_NOMEM;
    }
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k)
    {
        json_t *na = json_object_get(k, "not_after");
        if (json_is_integer(na) && json_integer_value(na) <= now)
            (*dropped)++;
        else
            json_array_append(kept, k);
    }
    for (int n = 0; n < f->n; n++) {
        bool have = false;
        json_array_foreach(kept, i, k) have =
            have ||
            strcasecmp(json_string_value(json_object_get(k, "serial")) ?: "", f->k[n].serial) == 0;
        if (have || json_array_size(kept) >= PO_CHANNEL_KEYS_MAX)
            continue;
        json_t *e = json_pack("{s:s, s:s, s:I}", "serial", f->k[n].serial, "public_key_pem",
                              f->k[n].pem, "not_after", (json_int_t)f->k[n].not_after);
        if (!e || json_array_append_new(kept, e)) {
            json_decref(kept);
            return PO_ERR_NOMEM;
        }
        (*added)++;
    }
    *changed = *added || *dropped;
    if (json_array_size(kept) == 0) /* never leave an account without a key */
        *changed = false;
    if (*changed && json_object_set(doc, "keys", kept)) {
        json_decref(kept);
        return PO_ERR_NOMEM;
    }
    json_decref(kept);
    return PO_OK;
}

/* Saves doc only if the account is still at version (UPDATE … WHERE
 * version = ?): an operator's `channel set` in between wins. */
static po_err save_if_version(struct po_store *s, const char *tenant, const char *channel,
                              json_t *doc, int64_t version, bool *saved, char *err, size_t errcap)
{
    char *text = po_json_dumps(doc, JSON_COMPACT), now[PO_TIME_SIZE];
    if (!text)
        return PO_ERR_NOMEM;
    po_clock_now_iso(now, sizeof now);
    int64_t changes = 0;
    po_err rc = po_store_exec(
        s,
        "UPDATE channel_account SET config = ?, version = version + 1,"
        " updated_at = ? WHERE tenant_id = ? AND channel = ? AND"
        " version = ?",
        PO_PARAMS(PO_TEXT(text), PO_TEXT(now), PO_TEXT(tenant), PO_TEXT(channel), PO_I64(version)),
        NULL, &changes, err, errcap);
    free(text);
    *saved = !rc && changes == 1;
    return rc;
}

po_err po_keys_fetch_for(const struct po_channel_ops *ch, const struct po_channel_account *a,
                         bool *out_tried, struct po_key_fetch *out)
{
    memset(out, 0, sizeof *out);
    bool certs = false;
    for (int i = 0; i < a->nkeys; i++)
        certs = certs || a->keys[i].not_after != 0;
    *out_tried = ch->keys_fetch && a->api_ready && certs;
    return *out_tried ? ch->keys_fetch(a, out) : PO_OK;
}

static po_err refresh_one(struct po_store *s, struct po_accounts *accounts,
                          const unsigned char *master, const struct po_channel_ops *ch,
                          const char *tenant, int64_t now, struct po_keys_refresh_report *x,
                          char *err, size_t errcap)
{
    struct po_account_ref *ref = NULL;
    char aerr[PO_ERRBUF_SIZE] = "";
    if (po_accounts_use(accounts, s, master, tenant, ch->name, &ref, aerr, sizeof aerr))
        return PO_OK; /* an account that does not load is reported where it is used */
    int64_t version = po_account_version(ref);
    bool tried = false;
    struct po_key_fetch f;
    po_err rc = po_keys_fetch_for(ch, po_account_of(ref), &tried, &f);
    x->accounts += tried;
    po_accounts_release(ref);
    if (!rc && tried && !f.ok) {
        x->failed++;
        po_log(PO_LOG_WARN, "tenant %s: %s keys not refreshed: %s", tenant, ch->name,
               f.why[0] ? f.why : "no answer");
    }
    json_t *doc = NULL;
    if (!rc && f.ok && !(rc = po_account_doc(s, tenant, ch->name, &doc, NULL, 0)) && doc) {
        int64_t added = 0, dropped = 0;
        bool changed = false, saved = false;
        rc = merge_keys(doc, &f, now, &added, &dropped, &changed);
        if (!rc && changed)
            rc = save_if_version(s, tenant, ch->name, doc, version, &saved, err, errcap);
        if (!rc && saved) {
            x->added += added;
            x->dropped += dropped;
            po_log(PO_LOG_INFO,
                   "tenant %s: %s verification keys refreshed: %lld added, %lld expired"
                   " dropped",
                   tenant, ch->name, (long long)added, (long long)dropped);
        }
    }
    json_decref(doc);
    po_key_fetch_free(&f);
    return rc;
}

po_err po_keys_refresh_round(struct po_store *s, struct po_accounts *accounts,
                             const unsigned char *master, int64_t now,
                             struct po_keys_refresh_report *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    po_err rc = PO_OK;
    for (int c = 0; !rc && po_channels[c]; c++) {
        if (!po_channels[c]->keys_fetch)
            continue;
        char **tenants = NULL;
        int n = 0;
        if ((rc = po_account_tenants(s, po_channels[c]->name, &tenants, &n)))
            break;
        for (int i = 0; !rc && i < n; i++)
            rc =
                refresh_one(s, accounts, master, po_channels[c], tenants[i], now, out, err, errcap);
        po_strings_free(tenants, n);
    }
    return rc;
}
