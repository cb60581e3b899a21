/*
 * operators.h — the console's people (operators.c): named accounts with a
 * role, passwords kept as scrypt hashes, and signed-in sessions.
 * Part of service.h (which includes every service header).
 */
#ifndef PO_SERVICE_OPERATORS_H
#define PO_SERVICE_OPERATORS_H

#include "../../core/core.h"
#include "../../crypto/crypto.h"
#include "../../store/store.h"

#include <jansson.h>

/* viewer reads; operator also works alerts; admin also sees the operators. */
enum po_role { PO_ROLE_VIEWER, PO_ROLE_OPERATOR, PO_ROLE_ADMIN };
#define PO_OPERATOR_MAX 64       /* name: 1..64 of [A-Za-z0-9_-.] */
#define PO_SESSION_TOKEN_SIZE 44 /* 32 random bytes, base64url, NUL */
#define PO_SESSION_TTL_S (12 * 3600)
#define PO_LOGIN_FAILURES_MAX 5 /* then the name is locked ... */
#define PO_LOGIN_LOCK_S 60      /* ... for this long */

bool po_operator_name_valid(const char *name);
/* "viewer", "operator", "admin"; false for anything else. */
bool po_role_parse(const char *text, enum po_role *out);
const char *po_role_name(enum po_role r);

/* Accounts (the CLI's `payonce operator …`). A new password or a removal
 * ends the operator's sessions. PO_ERR_CONFLICT: the name exists (add);
 * PO_ERR_NOT_FOUND: it does not (the others). */
po_err po_operator_add(struct po_store *s, const char *name, enum po_role role,
                       const char *password, size_t len, char *err, size_t errcap) PO_MUST_CHECK;
po_err po_operator_passwd(struct po_store *s, const char *name, const char *password, size_t len,
                          char *err, size_t errcap) PO_MUST_CHECK;
po_err po_operator_set_role(struct po_store *s, const char *name, enum po_role role, char *err,
                            size_t errcap) PO_MUST_CHECK;
po_err po_operator_remove(struct po_store *s, const char *name, char *err,
                          size_t errcap) PO_MUST_CHECK;
/* {"operators":[{name, role, created_at, last_login_at, sessions}]} */
po_err po_view_operators(struct po_store *s, json_t **out) PO_MUST_CHECK;

struct po_session {
    char token[PO_SESSION_TOKEN_SIZE]; /* the cookie's value (login only) */
    char name[PO_OPERATOR_MAX + 1];
    enum po_role role;
    char csrf[PO_SESSION_TOKEN_SIZE]; /* echoed by every state-changing request */
    char expires_at[PO_TIME_SIZE];
};
/* Signing in, in three steps so that the password's hash (~0.1 s, 32 MiB)
 * runs with no database connection held (signin.c runs them):
 * 1. the claim counts the attempt against the name before its password is
 *    checked — atomically, so N attempts at once count N; the
 *    PO_LOGIN_FAILURES_MAX-th locks the name for PO_LOGIN_LOCK_S; counted
 *    is false (and hash the dummy's) for an unknown or locked name;
 * 2. po_password_verify(password, claim.hash) — on any thread;
 * 3. finish, after a counted claim's password matched: the count reset, a
 *    new session.
 * Unknown, locked and wrong alike are one answer with the same work. */
struct po_login_claim {
    bool counted;
    enum po_role role;
    char hash[PO_PWHASH_SIZE];
};
po_err po_operator_login_claim(struct po_store *s, const char *name, struct po_login_claim *out,
                               char *err, size_t errcap) PO_MUST_CHECK;
po_err po_operator_login_finish(struct po_store *s, const char *name, enum po_role role,
                                struct po_session *out, char *err, size_t errcap) PO_MUST_CHECK;
/* The three in one (tests, tools): PO_OK with a new session;
 * PO_ERR_NOT_FOUND for an unknown, locked or wrong one alike. */
po_err po_operator_login(struct po_store *s, const char *name, const char *password, size_t len,
                         struct po_session *out, char *err, size_t errcap) PO_MUST_CHECK;
/* The session of a cookie's token: PO_ERR_NOT_FOUND when there is none or
 * it expired (then it is deleted). */
po_err po_operator_session(struct po_store *s, const char *token,
                           struct po_session *out) PO_MUST_CHECK;
po_err po_operator_logout(struct po_store *s, const char *token) PO_MUST_CHECK;

#endif
