/*
 * manifest.c — a backup's manifest (manifest.h).
 *
 * The manifest is canonical JSON (keys sorted, compact):
 *   {"payonce_manifest":1, "made_at", "key_id", "sets":{SET:{KEY:DIGEST}}, "mac"}
 * where each set is one kind of row that decides who may act, KEY names the
 * row (an operator's name, "tenant/key_id", …) and DIGEST is SHA-256 over
 * the row's fields (each as "length:value", so no two rows of different
 * fields share a digest). key_id names the master key (16 hex of an HMAC of
 * a fixed label: it does not reveal the key), so that a backup made under
 * another key is said to be that, not tampered. mac is HMAC-SHA-256, with a
 * key derived from the master key, over the manifest without its mac.
 */
#include "manifest.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MANIFEST_LABEL "payonce/backup-manifest/v1"
#define KEY_ID_LABEL "payonce/key-id/v1"

/* The sets: a name, and the query of (key, fields...) in key order. */
static const struct set {
    const char *name, *sql;
} sets[] = {
    {"operator", "SELECT name, role, pw_hash FROM operator ORDER BY 1"},
    {"operator_session", "SELECT token_hash, name, expires_at FROM operator_session ORDER BY 1"},
    {"api_key", "SELECT tenant_id || '/' || key_id, key_hash, COALESCE(revoked_at, '') FROM"
                " api_key ORDER BY 1"},
    {"webhook_endpoint",
     "SELECT tenant_id || '/' || endpoint_id, url, events, secret, COALESCE(removed_at, '') FROM"
     " webhook_endpoint ORDER BY 1"},
    {"channel_account",
     "SELECT tenant_id || '/' || channel, config FROM channel_account ORDER BY 1"},
    {"callback_chain", "SELECT tenant_id, seq, hash, base_seq, base_hash, COALESCE(keyed_from, 0)"
                       " FROM callback_chain ORDER BY 1"},
};

static void hex(const unsigned char *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        (void)snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static void key_id(const unsigned char *master, char out[17])
{
    unsigned char m[32];
    if (!master) {
        (void)snprintf(out, 17, "none");
        return;
    }
    PO_ASSERT(po_hmac_sha256(master, PO_MASTER_KEY_LEN, KEY_ID_LABEL, sizeof KEY_ID_LABEL - 1, m) ==
              PO_OK);
    hex(m, 8, out);
}

/* The MAC of text: HMAC with master's derived key, or SHA-256 without. */
static po_err mac_of(const unsigned char *master, const char *text, char out[65])
{
    if (!master)
        return po_sha256_hex(text, strlen(text), out);
    unsigned char k[32], m[32];
    po_err rc =
        po_hmac_sha256(master, PO_MASTER_KEY_LEN, MANIFEST_LABEL, sizeof MANIFEST_LABEL - 1, k);
    if (!rc)
        rc = po_hmac_sha256(k, sizeof k, text, strlen(text), m);
    po_secure_zero(k, sizeof k);
    if (!rc)
        hex(m, sizeof m, out);
    return rc;
}

/* {KEY: DIGEST} of one set's rows (*out: a new object). */
static po_err set_of(struct po_store *s, const struct set *set, json_t **out, char *err,
                     size_t errcap)
{
    struct po_rows r = {0};
    po_err rc = po_store_exec(s, set->sql, PO_NO_PARAMS, &r, NULL, err, errcap);
    if (rc)
        return rc;
    json_t *o = json_object();
    char *buf = NULL;
    size_t cap = 0;
    for (int i = 0; o && !rc && i < r.nrows; i++) {
        size_t need = 1;
        for (int c = 1; c < r.ncols; c++) {
            const char *v = po_rows_get(&r, i, c);
            need += 24 + (v ? strlen(v) : 0);
        }
        if (need > cap) {
            char *nb = realloc(buf, need);
            if (!nb) {
                rc = PO_ERR_NOMEM;
                break;
            }
            buf = nb;
            cap = need;
        }
        size_t n = 0;
        for (int c = 1; c < r.ncols; c++) {
            const char *v = po_rows_get(&r, i, c);
            n += (size_t)snprintf(buf + n, cap - n, "%zu:%s", v ? strlen(v) : 0, v ? v : "");
        }
        char d[65];
        const char *key = po_rows_get(&r, i, 0);
        if (!key)
            continue;
        if (!(rc = po_sha256_hex(buf, n, d)) && json_object_set_new(o, key, json_string(d)))
            rc = PO_ERR_NOMEM;
    }
    free(buf);
    po_rows_free(&r);
    if (!o && !rc)
        rc = PO_ERR_NOMEM;
    if (rc) {
        json_decref(o);
        return rc;
    }
    *out = o;
    return PO_OK;
}

static po_err sets_of(struct po_store *s, json_t **out, char *err, size_t errcap)
{
    json_t *all = json_object();
    po_err rc = all ? PO_OK : PO_ERR_NOMEM;
    for (size_t i = 0; !rc && i < sizeof sets / sizeof sets[0]; i++) {
        json_t *o = NULL;
        if (!(rc = set_of(s, &sets[i], &o, err, errcap)) &&
            json_object_set_new(all, sets[i].name, o))
            rc = PO_ERR_NOMEM;
    }
    if (rc) {
        json_decref(all);
        return rc;
    }
    *out = all;
    return PO_OK;
}

po_err po_manifest_make(struct po_store *s, const unsigned char *master, char **out, char *err,
                        size_t errcap)
{
    *out = NULL;
    json_t *sets_now = NULL;
    po_err rc = sets_of(s, &sets_now, err, errcap);
    if (rc)
        return rc;
    char now[PO_TIME_SIZE], kid[17], mac[65];
    po_clock_now_iso(now, sizeof now);
    key_id(master, kid);
    json_t *m = json_pack("{s:i, s:s, s:s, s:o}", "payonce_manifest", 1, "made_at", now, "key_id",
                          kid, "sets", sets_now);
    char *body = m ? po_json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    rc = body ? mac_of(master, body, mac) : PO_ERR_NOMEM;
    free(body);
    if (!rc && json_object_set_new(m, "mac", json_string(mac)))
        rc = PO_ERR_NOMEM;
    if (!rc && !(*out = po_json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS)))
        rc = PO_ERR_NOMEM;
    json_decref(m);
    return rc;
}

po_err po_manifest_store(struct po_store *s, const char *manifest, char *err, size_t errcap)
{
    char now[PO_TIME_SIZE];
    po_clock_now_iso(now, sizeof now);
    po_err rc = po_store_begin(s, err, errcap);
    if (!rc)
        rc = po_store_exec(s, "DELETE FROM backup_manifest", PO_NO_PARAMS, NULL, NULL, err, errcap);
    if (!rc)
        rc = po_store_exec(s, "INSERT INTO backup_manifest (made_at, manifest) VALUES (?, ?)",
                           PO_PARAMS(PO_TEXT(now), PO_TEXT(manifest)), NULL, NULL, err, errcap);
    if (!rc)
        rc = po_store_commit(s, err, errcap);
    else
        po_store_rollback(s);
    return rc;
}

po_err po_manifest_load(struct po_store *s, char **out, char *err, size_t errcap)
{
    *out = NULL;
    struct po_rows r = {0};
    po_err rc =
        po_store_exec(s, "SELECT manifest FROM backup_manifest ORDER BY made_at DESC LIMIT 1",
                      PO_NO_PARAMS, &r, NULL, err, errcap);
    if (!rc && r.nrows == 1 && po_rows_get(&r, 0, 0) && !(*out = strdup(po_rows_get(&r, 0, 0))))
        rc = PO_ERR_NOMEM;
    po_rows_free(&r);
    return rc;
}

static void diff(struct po_manifest_check *c, const char *set, const char *key, const char *what)
{
    if (c->ndiffs == PO_MANIFEST_DIFFS_MAX) {
        c->more++;
        return;
    }
    (void)snprintf(c->diff[c->ndiffs++], sizeof c->diff[0], "%s %.100s: %s", set, key, what);
}

po_err po_manifest_check(struct po_store *s, const unsigned char *master, const char *manifest,
                         struct po_manifest_check *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    json_t *m = NULL, *now = NULL;
    char jerr[120] = "";
    if (po_json_parse(manifest, strlen(manifest), &m, jerr, sizeof jerr) || !json_is_object(m) ||
        json_integer_value(json_object_get(m, "payonce_manifest")) != 1 ||
        !json_is_object(json_object_get(m, "sets")) ||
        !json_string_value(json_object_get(m, "mac")) ||
        !json_string_value(json_object_get(m, "key_id"))) {
        json_decref(m);
        po_errf(err, errcap, "not a payonce manifest %s", jerr);
        return PO_ERR_INVALID;
    }
    (void)snprintf(out->key_id, sizeof out->key_id, "%.16s",
                   json_string_value(json_object_get(m, "key_id")));
    char kid[17], mac[65] = "";
    key_id(master, kid);
    out->unkeyed = strcmp(out->key_id, "none") == 0;
    out->other_key = !out->unkeyed && strcmp(out->key_id, kid) != 0;
    /* the MAC over the manifest without it, as made */
    json_t *bare = json_deep_copy(m);
    po_err rc = bare && !json_object_del(bare, "mac") ? PO_OK : PO_ERR_NOMEM;
    char *body = rc ? NULL : po_json_dumps(bare, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(bare);
    if (!rc && !body)
        rc = PO_ERR_NOMEM;
    if (!rc && !out->other_key && (out->unkeyed || master))
        rc = mac_of(out->unkeyed ? NULL : master, body, mac);
    free(body);
    /* an unkeyed manifest proves nothing where a master key exists: anyone
     * could have made it */
    out->mac_ok = !rc && *mac && !(out->unkeyed && master) &&
                  strcmp(mac, json_string_value(json_object_get(m, "mac"))) == 0;
    if (!rc)
        rc = sets_of(s, &now, err, errcap);
    json_t *then = json_object_get(m, "sets");
    for (size_t i = 0; !rc && i < sizeof sets / sizeof sets[0]; i++) {
        const char *name = sets[i].name, *key;
        json_t *a = json_object_get(then, name), *b = json_object_get(now, name), *v;
        if (!json_is_object(a)) {
            diff(out, name, "(all)", "not in the manifest");
            continue;
        }
        json_object_foreach(b, key, v)
        {
            json_t *w = json_object_get(a, key);
            if (!w)
                diff(out, name, key, "added after the backup was made");
            else if (!json_equal(v, w))
                diff(out, name, key, "changed after the backup was made");
        }
        json_object_foreach(a, key, v) if (!json_object_get(b, key))
            diff(out, name, key, "removed after the backup was made");
    }
    json_decref(now);
    json_decref(m);
    return rc;
}
