/*
 * apikey.c — tenant API keys. A key is "po_<key_id>_<secret>": key_id (16
 * hex) is public and finds the row, the secret (64 hex, 256 random bits)
 * is shown once and never stored; the row keeps SHA-256 of the whole key,
 * compared in constant time. A revoked key stops working at once.
 */
#include "apikey.h"

#include "../../crypto/crypto.h"

#include <stdio.h>
#include <string.h>

#define KEY_ID_HEX 16
#define SECRET_HEX 64

static void hex(const unsigned char *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        (void)snprintf(out + 2 * i, 3, "%02x", b[i]);
}

po_err po_apikey_create(struct po_store *s, const char *tenant, char key[PO_APIKEY_LEN + 1],
                        char key_id[PO_APIKEY_ID_LEN + 1], char *err, size_t errcap)
{
    if (!po_id_valid(tenant, PO_ID_MAX)) {
        po_errf(err, errcap, "tenant id: 1-%d characters of [A-Za-z0-9_-.:|*]", PO_ID_MAX);
        return PO_ERR_INVALID;
    }
    unsigned char rnd[KEY_ID_HEX / 2 + SECRET_HEX / 2];
    char id[KEY_ID_HEX + 1], secret[SECRET_HEX + 1], full[PO_APIKEY_LEN + 1], hash[65];
    po_err rc = po_random(rnd, sizeof rnd);
    if (rc)
        return rc;
    hex(rnd, KEY_ID_HEX / 2, id);
    hex(rnd + KEY_ID_HEX / 2, SECRET_HEX / 2, secret);
    memset(rnd, 0, sizeof rnd);
    PO_ASSERT(po_fmt(full, sizeof full, "po_%s_%s", id, secret) == PO_OK);
    memset(secret, 0, sizeof secret);
    if ((rc = po_sha256_hex(full, strlen(full), hash)))
        return rc;
    char now[PO_TIME_SIZE];
    po_clock_now_iso(now, sizeof now);
    rc = po_store_begin(s, err, errcap);
    if (rc)
        goto out;
    struct po_rows r;
    struct po_param t[] = {PO_TEXT(tenant)};
    rc = po_store_exec(s, "SELECT 1 FROM tenant WHERE tenant_id = ?", t, PO_NELEM(t), &r, NULL, err,
                       errcap);
    if (!rc) {
        if (r.nrows == 0) {
            po_errf(err, errcap, "no tenant %s", tenant);
            rc = PO_ERR_NOT_FOUND;
        }
        po_rows_free(&r);
    }
    struct po_param p[] = {PO_TEXT(tenant), PO_TEXT(id), PO_TEXT(hash), PO_TEXT(now)};
    if (!rc)
        rc = po_store_exec(s,
                           "INSERT INTO api_key (tenant_id, key_id, key_hash, created_at)"
                           " VALUES (?, ?, ?, ?)",
                           p, PO_NELEM(p), NULL, NULL, err, errcap);
    if (!rc)
        rc = po_store_commit(s, err, errcap);
    else
        po_store_rollback(s);
    if (!rc) {
        memcpy(key, full, sizeof full);
        memcpy(key_id, id, sizeof id);
    }
out:
    memset(full, 0, sizeof full);
    return rc;
}

po_err po_apikey_revoke(struct po_store *s, const char *tenant, const char *key_id, char *err,
                        size_t errcap)
{
    char now[PO_TIME_SIZE];
    int64_t changes = 0;
    po_clock_now_iso(now, sizeof now);
    struct po_param p[] = {PO_TEXT(now), PO_TEXT(tenant ? tenant : ""),
                           PO_TEXT(key_id ? key_id : "")};
    po_err rc = po_store_exec_tx(s,
                                 "UPDATE api_key SET revoked_at = COALESCE(revoked_at, ?) WHERE"
                                 " tenant_id = ? AND key_id = ?",
                                 p, PO_NELEM(p), &changes, err, errcap);
    if (!rc && changes == 0) { /* nothing was written */
        po_errf(err, errcap, "tenant %s has no API key %s", tenant, key_id);
        rc = PO_ERR_NOT_FOUND;
    }
    return rc;
}

po_err po_apikey_auth(struct po_store *s, const char *key, char tenant[PO_ID_MAX + 1])
{
    /* Shape first: nothing malformed reaches the store. */
    if (!key || strlen(key) != PO_APIKEY_LEN || strncmp(key, "po_", 3) != 0 ||
        key[3 + KEY_ID_HEX] != '_')
        return PO_ERR_NOT_FOUND;
    for (size_t i = 3; i < PO_APIKEY_LEN; i++)
        if (i != 3 + KEY_ID_HEX && po_hexval(key[i]) < 0)
            return PO_ERR_NOT_FOUND;
    char id[KEY_ID_HEX + 1], hash[65];
    memcpy(id, key + 3, KEY_ID_HEX);
    id[KEY_ID_HEX] = '\0';
    if (po_sha256_hex(key, PO_APIKEY_LEN, hash))
        return PO_ERR_TRANSIENT; /* out of memory: 503, not 401 */
    struct po_rows r;
    struct po_param p[] = {PO_TEXT(id)};
    po_err rc = po_store_exec(s,
                              "SELECT tenant_id, key_hash FROM api_key WHERE key_id = ? AND"
                              " revoked_at IS NULL",
                              p, PO_NELEM(p), &r, NULL, NULL, 0);
    if (rc)
        return rc == PO_ERR_TRANSIENT ? rc : PO_ERR_TRANSIENT;
    rc = PO_ERR_NOT_FOUND;
    for (int i = 0; i < r.nrows; i++) {
        const char *h = po_rows_get(&r, i, 1);
        if (h && strlen(h) == 64 && po_ct_equal(h, hash, 64) && rc == PO_ERR_NOT_FOUND)
            rc = po_strcpy(tenant, PO_ID_MAX + 1, po_rows_get(&r, i, 0));
    }
    po_rows_free(&r);
    return rc;
}
