/*
 * operators.c — the console's people (operators.h).
 *
 * A password is checked by scrypt (crypto.c) against the stored hash; an
 * unknown or locked name is checked against a fixed dummy hash, so it costs
 * the same time and gets the same answer as a wrong password. Attempts are
 * counted per name before the check (po_operator_login_claim, one
 * conditional UPDATE): PO_LOGIN_FAILURES_MAX in a row lock it for
 * PO_LOGIN_LOCK_S, however many arrive at once (a right password resets
 * the count). A new password obeys the policy (po_password_policy).
 *
 * A session is 32 random bytes handed to the browser as its cookie; the
 * database keeps only their SHA-256, so a copy of the database signs no one
 * in. Its CSRF token is a second random value the page reads from
 * /admin/api/me and sends back in a header on every POST.
 */
#include "operators.h"

#include "../../crypto/crypto.h"

#include <stdio.h>
#include <string.h>

static const char *const role_names[] = {"viewer", "operator", "admin"};

bool po_operator_name_valid(const char *name)
{
    if (!name || !*name || strlen(name) > PO_OPERATOR_MAX)
        return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-' || *p == '.'))
            return false;
    return true;
}

bool po_role_parse(const char *text, enum po_role *out)
{
    for (size_t i = 0; text && i < sizeof role_names / sizeof *role_names; i++)
        if (strcmp(text, role_names[i]) == 0) {
            *out = (enum po_role)i;
            return true;
        }
    return false;
}

const char *po_role_name(enum po_role r)
{
    return (unsigned)r < sizeof role_names / sizeof *role_names ? role_names[r] : "viewer";
}

static po_err bad_name(const char *name, char *err, size_t errcap)
{
    if (po_operator_name_valid(name))
        return PO_OK;
    po_errf(err, errcap, "operator name: 1-%d characters of [A-Za-z0-9_-.]", PO_OPERATOR_MAX);
    return PO_ERR_INVALID;
}

/* A new password: the policy (crypto.h's po_password_policy), then its
 * hash. */
static po_err hash_password(const char *name, const char *password, size_t len,
                            char out[PO_PWHASH_SIZE], char *err, size_t errcap)
{
    char why[200] = "";
    po_err rc = po_password_policy(password, len, name, why, sizeof why);
    if (rc == PO_ERR_INVALID)
        po_errf(err, errcap,
                "password refused: %s (at least %d bytes, not a dictionary word, a common or"
                " simple password, nor one built on the name)",
                why, PO_PASSWORD_MIN);
    else if (rc)
        po_errf(err, errcap, "%s", why);
    if (rc)
        return rc;
    rc = po_password_hash(password, len, out);
    if (rc)
        po_errf(err, errcap, "the password could not be hashed (scrypt: out of memory?)");
    return rc;
}

po_err po_operator_add(struct po_store *s, const char *name, enum po_role role,
                       const char *password, size_t len, char *err, size_t errcap)
{
    char hash[PO_PWHASH_SIZE], now[PO_TIME_SIZE];
    po_err rc = bad_name(name, err, errcap);
    if (rc || (rc = hash_password(name, password, len, hash, err, errcap)))
        return rc;
    po_clock_now_iso(now, sizeof now);
    rc = po_store_exec_tx(
        s,
        "INSERT INTO operator (name, role, pw_hash, created_at) VALUES (?, ?, ?,"
        " ?)",
        PO_PARAMS(PO_TEXT(name), PO_TEXT(po_role_name(role)), PO_TEXT(hash), PO_TEXT(now)), NULL,
        err, errcap);
    if (rc == PO_ERR_CONFLICT)
        po_errf(err, errcap, "operator %s exists (payonce operator passwd / role)", name);
    return rc;
}

/* One UPDATE or DELETE of the named operator; PO_ERR_NOT_FOUND when it
 * touched nothing. */
static po_err change(struct po_store *s, const char *sql, const struct po_param *p, int np,
                     const char *name, char *err, size_t errcap)
{
    int64_t n = 0;
    po_err rc = bad_name(name, err, errcap);
    if (!rc)
        rc = po_store_exec_tx(s, sql, p, np, &n, err, errcap);
    if (!rc && n == 0) {
        po_errf(err, errcap, "no operator %s (payonce operator list)", name);
        rc = PO_ERR_NOT_FOUND;
    }
    return rc;
}

static po_err end_sessions(struct po_store *s, const char *name, char *err, size_t errcap)
{
    return po_store_exec_tx(s, "DELETE FROM operator_session WHERE name = ?",
                            PO_PARAMS(PO_TEXT(name)), NULL, err, errcap);
}

po_err po_operator_passwd(struct po_store *s, const char *name, const char *password, size_t len,
                          char *err, size_t errcap)
{
    char hash[PO_PWHASH_SIZE];
    po_err rc = bad_name(name, err, errcap);
    if (rc || (rc = hash_password(name, password, len, hash, err, errcap)))
        return rc;
    rc = change(s,
                "UPDATE operator SET pw_hash = ?, failures = 0, locked_until = NULL WHERE name = ?",
                PO_PARAMS(PO_TEXT(hash), PO_TEXT(name)), name, err, errcap);
    return rc ? rc : end_sessions(s, name, err, errcap);
}

po_err po_operator_set_role(struct po_store *s, const char *name, enum po_role role, char *err,
                            size_t errcap)
{
    return change(s, "UPDATE operator SET role = ? WHERE name = ?",
                  PO_PARAMS(PO_TEXT(po_role_name(role)), PO_TEXT(name)), name, err, errcap);
}

po_err po_operator_remove(struct po_store *s, const char *name, char *err, size_t errcap)
{
    po_err rc = bad_name(name, err, errcap);
    if (!rc)
        rc = end_sessions(s, name, err, errcap);
    return rc ? rc
              : change(s, "DELETE FROM operator WHERE name = ?", PO_PARAMS(PO_TEXT(name)), name,
                       err, errcap);
}

po_err po_view_operators(struct po_store *s, json_t **out)
{
    struct po_rows r;
    po_err rc = po_store_exec(s,
                              "SELECT o.name, o.role, o.created_at, o.last_login_at, (SELECT"
                              " COUNT(*) FROM operator_session x WHERE x.name = o.name),"
                              " o.failures, o.locked_until FROM operator o ORDER BY o.name",
                              PO_NO_PARAMS, &r, NULL, NULL, 0);
    if (rc)
        return rc;
    json_t *list = json_array();
    for (int i = 0; i < r.nrows; i++) {
        const char *last = po_rows_get(&r, i, 3), *locked = po_rows_get(&r, i, 6);
        int64_t sessions = 0, failures = 0;
        PO_ASSERT(po_rows_i64(&r, i, 4, &sessions) == PO_OK);
        PO_ASSERT(po_rows_i64(&r, i, 5, &failures) == PO_OK);
        json_array_append_new(
            list, json_pack("{s:s, s:s, s:s, s:o, s:I, s:I, s:o}", "name", po_rows_get(&r, i, 0),
                            "role", po_rows_get(&r, i, 1), "created_at", po_rows_get(&r, i, 2),
                            "last_login_at", last ? json_string(last) : json_null(), "sessions",
                            (json_int_t)sessions, "failures", (json_int_t)failures, "locked_until",
                            locked ? json_string(locked) : json_null()));
    }
    po_rows_free(&r);
    *out = json_pack("{s:o}", "operators", list);
    return *out ? PO_OK : PO_ERR_NOMEM;
}

/* base64url without padding of n random bytes */
static po_err random_token(char out[PO_SESSION_TOKEN_SIZE])
{
    unsigned char b[32];
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    if (po_random(b, sizeof b))
        return PO_ERR_INTERNAL;
    size_t o = 0;
    for (size_t i = 0; i < sizeof b; i += 3) {
        unsigned v = (unsigned)b[i] << 16 | (i + 1 < sizeof b ? (unsigned)b[i + 1] << 8 : 0) |
                     (i + 2 < sizeof b ? b[i + 2] : 0);
        size_t chars = i + 2 < sizeof b ? 4 : i + 1 < sizeof b ? 3 : 2;
        for (size_t k = 0; k < chars; k++)
            out[o++] = a[(v >> (18 - 6 * k)) & 63];
    }
    out[o] = 0;
    po_secure_zero(b, sizeof b);
    return PO_OK;
}

/* A hash no password matches, checked for names that do not exist. */
static const char dummy_hash[] =
    "$scrypt$ln=15,r=8,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

po_err po_operator_login_claim(struct po_store *s, const char *name, struct po_login_claim *out,
                               char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    PO_ASSERT(po_strcpy(out->hash, sizeof out->hash, dummy_hash) == PO_OK);
    if (!po_operator_name_valid(name))
        return PO_OK; /* the dummy's work, the same answer */
    char now[PO_TIME_SIZE], until[PO_TIME_SIZE];
    po_clock_now_iso(now, sizeof now);
    po_clock_iso_ms(po_clock_now_ms() + PO_LOGIN_LOCK_S * 1000, until, sizeof until);
    /* One conditional UPDATE: the count is taken before the password is
     * checked, under the row's lock, so N attempts at once count N and at
     * most PO_LOGIN_FAILURES_MAX of them are checked; a lock that ran out
     * starts the count again. */
    int64_t n = 0;
    po_err rc = po_store_exec_tx(
        s,
        "UPDATE operator SET failures = CASE WHEN locked_until IS NOT NULL AND locked_until <= ?"
        " THEN 1 ELSE failures + 1 END, locked_until = CASE WHEN locked_until IS NOT NULL AND"
        " locked_until <= ? THEN NULL WHEN failures + 1 >= ? THEN ? ELSE locked_until END"
        " WHERE name = ? AND (locked_until IS NULL OR locked_until <= ?)",
        PO_PARAMS(PO_TEXT(now), PO_TEXT(now), PO_I64(PO_LOGIN_FAILURES_MAX), PO_TEXT(until),
                  PO_TEXT(name), PO_TEXT(now)),
        &n, err, errcap);
    if (rc || n == 0)
        return rc; /* unknown or locked: the dummy */
    struct po_rows r;
    rc = po_store_exec(s, "SELECT role, pw_hash FROM operator WHERE name = ?",
                       PO_PARAMS(PO_TEXT(name)), &r, NULL, err, errcap);
    if (rc)
        return rc;
    if (r.nrows == 1 && po_role_parse(po_rows_get(&r, 0, 0), &out->role) &&
        po_strcpy(out->hash, sizeof out->hash, po_rows_get(&r, 0, 1)) == PO_OK)
        out->counted = true;
    else /* removed a moment ago, or a hash no build reads: nobody signs in */
        PO_ASSERT(po_strcpy(out->hash, sizeof out->hash, dummy_hash) == PO_OK);
    po_rows_free(&r);
    return PO_OK;
}

po_err po_operator_login_finish(struct po_store *s, const char *name, enum po_role role,
                                struct po_session *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    char hash[65], now[PO_TIME_SIZE];
    po_clock_now_iso(now, sizeof now);
    po_err rc;
    if ((rc = random_token(out->token)) || (rc = random_token(out->csrf)) ||
        (rc = po_sha256_hex(out->token, strlen(out->token), hash)))
        return rc;
    po_clock_iso_ms(po_clock_now_ms() + (int64_t)PO_SESSION_TTL_S * 1000, out->expires_at,
                    sizeof out->expires_at);
    out->role = role;
    PO_ASSERT(po_strcpy(out->name, sizeof out->name, name) == PO_OK);
    rc = po_store_begin(s, err, errcap);
    if (!rc)
        rc = po_store_exec(s,
                           "UPDATE operator SET failures = 0, locked_until = NULL, last_login_at ="
                           " ? WHERE name = ?",
                           PO_PARAMS(PO_TEXT(now), PO_TEXT(name)), NULL, NULL, err, errcap);
    if (!rc) /* and sessions that ended, so the table does not grow */
        rc = po_store_exec(s, "DELETE FROM operator_session WHERE expires_at < ?",
                           PO_PARAMS(PO_TEXT(now)), NULL, NULL, err, errcap);
    if (!rc)
        rc = po_store_exec(s,
                           "INSERT INTO operator_session (token_hash, name, csrf, created_at,"
                           " expires_at) VALUES (?, ?, ?, ?, ?)",
                           PO_PARAMS(PO_TEXT(hash), PO_TEXT(name), PO_TEXT(out->csrf), PO_TEXT(now),
                                     PO_TEXT(out->expires_at)),
                           NULL, NULL, err, errcap);
    if (!rc)
        rc = po_store_commit(s, err, errcap);
    else
        po_store_rollback(s);
    if (rc)
        memset(out, 0, sizeof *out);
    return rc;
}

po_err po_operator_login(struct po_store *s, const char *name, const char *password, size_t len,
                         struct po_session *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    struct po_login_claim c;
    po_err rc = po_operator_login_claim(s, name, &c, err, errcap);
    if (rc)
        return rc;
    po_err v = po_password_verify(password, len, c.hash);
    po_secure_zero(c.hash, sizeof c.hash);
    if (!c.counted || v != PO_OK) {
        po_errf(err, errcap, "unknown operator or wrong password");
        return PO_ERR_NOT_FOUND;
    }
    return po_operator_login_finish(s, name, c.role, out, err, errcap);
}

/* The token's hash, or false when it is not shaped like one of ours. */
static bool token_hash(const char *token, char hash[65])
{
    size_t n = token ? strlen(token) : 0;
    if (n != PO_SESSION_TOKEN_SIZE - 1)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((token[i] >= 'a' && token[i] <= 'z') || (token[i] >= 'A' && token[i] <= 'Z') ||
              (token[i] >= '0' && token[i] <= '9') || token[i] == '-' || token[i] == '_'))
            return false;
    return po_sha256_hex(token, n, hash) == PO_OK;
}

po_err po_operator_session(struct po_store *s, const char *token, struct po_session *out)
{
    memset(out, 0, sizeof *out);
    char hash[65], now[PO_TIME_SIZE];
    if (!token_hash(token, hash))
        return PO_ERR_NOT_FOUND;
    po_clock_now_iso(now, sizeof now);
    struct po_rows r;
    po_err rc = po_store_exec(s,
                              "SELECT x.name, o.role, x.csrf, x.expires_at FROM operator_session x"
                              " JOIN operator o ON o.name = x.name WHERE x.token_hash = ?",
                              PO_PARAMS(PO_TEXT(hash)), &r, NULL, NULL, 0);
    if (rc)
        return rc;
    rc = PO_ERR_NOT_FOUND;
    if (r.nrows == 1 && strcmp(po_rows_get(&r, 0, 3), now) > 0 &&
        po_role_parse(po_rows_get(&r, 0, 1), &out->role) &&
        po_strcpy(out->name, sizeof out->name, po_rows_get(&r, 0, 0)) == PO_OK &&
        po_strcpy(out->csrf, sizeof out->csrf, po_rows_get(&r, 0, 2)) == PO_OK &&
        po_strcpy(out->expires_at, sizeof out->expires_at, po_rows_get(&r, 0, 3)) == PO_OK)
        rc = PO_OK;
    else if (r.nrows == 1 && po_operator_logout(s, token)) /* expired: gone */
        po_log(PO_LOG_WARN, "console: an expired session not deleted (database)");
    po_rows_free(&r);
    if (rc)
        memset(out, 0, sizeof *out);
    return rc;
}

po_err po_operator_logout(struct po_store *s, const char *token)
{
    char hash[65];
    if (!token_hash(token, hash))
        return PO_OK;
    return po_store_exec_tx(s, "DELETE FROM operator_session WHERE token_hash = ?",
                            PO_PARAMS(PO_TEXT(hash)), NULL, NULL, 0);
}
