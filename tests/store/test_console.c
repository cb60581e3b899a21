/*
 * test_console.c — what the operator's console stands on, on each backend
 * (argv[1]): operators' passwords (scrypt, checked against Python's
 * hashlib.scrypt in cli_test too), sign-in with its lockout, sessions that
 * end (expiry, sign-out, a new password, removal, a role change seen at
 * once); the callback history (counted in memory, added per node into the
 * traffic table, kept when the database refuses, overflowing tenants under
 * "-", old buckets pruned) and its view; the deliveries of verified
 * callbacks kept per order (kept when the database refuses, once per
 * request, pruned); and the order search, the order's trail and the
 * journal behind a balance, against the ledger.
 */
#include "../support/testutil.h"

#include "../../src/crypto/crypto.h"
#include "../../src/service/service.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define S T_S

static void passwords_are_scrypt_hashes(void **state)
{
    (void)state;
    char h1[PO_PWHASH_SIZE], h2[PO_PWHASH_SIZE];
    assert_int_equal(po_password_hash("correct horse", 13, h1), PO_OK);
    assert_int_equal(po_password_hash("correct horse", 13, h2), PO_OK);
    assert_non_null(strstr(h1, "$scrypt$ln=15,r=8,p=1$"));
    assert_string_not_equal(h1, h2); /* a salt of its own */
    assert_int_equal(po_password_verify("correct horse", 13, h1), PO_OK);
    assert_int_equal(po_password_verify("correct horsE", 13, h1), PO_ERR_NOT_FOUND);
    assert_int_equal(po_password_verify("", 0, h1), PO_ERR_NOT_FOUND);
    /* a hash changed by one character no longer matches; garbage is not read */
    char bent[PO_PWHASH_SIZE];
    memcpy(bent, h1, sizeof bent);
    bent[strlen(bent) - 2] = bent[strlen(bent) - 2] == 'A' ? 'B' : 'A';
    assert_int_equal(po_password_verify("correct horse", 13, bent), PO_ERR_NOT_FOUND);
    assert_int_equal(po_password_verify("x", 1, "$scrypt$ln=40,r=8,p=1$AAAA$AAAA"), PO_ERR_INVALID);
    assert_int_equal(po_password_verify("x", 1, "plain"), PO_ERR_INVALID);
}

static int64_t count(struct po_store *s, const char *sql, const char *arg)
{
    struct po_param p[] = {PO_TEXT(arg)};
    return t_count(s, sql, arg ? p : NULL, arg ? 1 : 0);
}

static void operators_are_managed(void **state)
{
    char err[PO_ERRBUF_SIZE] = "";
    assert_int_equal(
        po_operator_add(S, "alice", PO_ROLE_OPERATOR, "Vq7#mLw2-Rzt9pK", 15, err, sizeof err),
        PO_OK);
    assert_int_equal(
        po_operator_add(S, "alice", PO_ROLE_ADMIN, "Hz6*oRq1-Ktw8Xn", 15, err, sizeof err),
        PO_ERR_CONFLICT);
    assert_int_equal(po_operator_add(S, "bad name", PO_ROLE_VIEWER, "x", 1, err, sizeof err),
                     PO_ERR_INVALID);
    assert_int_equal(po_operator_add(S, "bob", PO_ROLE_VIEWER, "", 0, err, sizeof err),
                     PO_ERR_INVALID);
    assert_int_equal(po_operator_passwd(S, "nobody", "Hz6*oRq1-Ktw8Xn", 15, err, sizeof err),
                     PO_ERR_NOT_FOUND);
    assert_int_equal(po_operator_remove(S, "nobody", err, sizeof err), PO_ERR_NOT_FOUND);
    /* the password is not in the database, only its hash */
    assert_int_equal(
        count(S, "SELECT COUNT(*) FROM operator WHERE pw_hash LIKE '%Vq7#mLw2%'", NULL), 0);
    json_t *v = NULL;
    assert_int_equal(po_view_operators(S, &v), PO_OK);
    json_t *a = json_array_get(json_object_get(v, "operators"), 0);
    assert_string_equal(json_string_value(json_object_get(a, "role")), "operator");
    json_decref(v);
}

static void sign_in_and_sessions(void **state)
{
    char err[PO_ERRBUF_SIZE] = "";
    struct po_session s1, s2, got;
    assert_int_equal(
        po_operator_add(S, "alice", PO_ROLE_VIEWER, "Vq7#mLw2-Rzt9pK", 15, err, sizeof err), PO_OK);
    assert_int_equal(po_operator_login(S, "alice", "wrong", 5, &s1, err, sizeof err),
                     PO_ERR_NOT_FOUND);
    assert_int_equal(po_operator_login(S, "mallory", "Vq7#mLw2-Rzt9pK", 15, &s1, err, sizeof err),
                     PO_ERR_NOT_FOUND);
    assert_int_equal(po_operator_login(S, "alice", "Vq7#mLw2-Rzt9pK", 15, &s1, err, sizeof err),
                     PO_OK);
    assert_int_equal((int)strlen(s1.token), PO_SESSION_TOKEN_SIZE - 1);
    assert_int_equal((int)strlen(s1.csrf), PO_SESSION_TOKEN_SIZE - 1);
    assert_string_not_equal(s1.token, s1.csrf);
    /* the database keeps the token's hash, never the token */
    assert_int_equal(
        count(S, "SELECT COUNT(*) FROM operator_session WHERE token_hash = ?", s1.token), 0);
    assert_int_equal(po_operator_session(S, s1.token, &got), PO_OK);
    assert_string_equal(got.name, "alice");
    assert_int_equal(got.role, PO_ROLE_VIEWER);
    assert_string_equal(got.csrf, s1.csrf);
    /* a role change is seen by the session at once */
    assert_int_equal(po_operator_set_role(S, "alice", PO_ROLE_ADMIN, err, sizeof err), PO_OK);
    assert_int_equal(po_operator_session(S, s1.token, &got), PO_OK);
    assert_int_equal(got.role, PO_ROLE_ADMIN);
    /* a token one character off, or not shaped like one, is nobody */
    char off[PO_SESSION_TOKEN_SIZE];
    memcpy(off, s1.token, sizeof off);
    off[0] = off[0] == 'A' ? 'B' : 'A';
    assert_int_equal(po_operator_session(S, off, &got), PO_ERR_NOT_FOUND);
    assert_int_equal(po_operator_session(S, "' OR 1=1 --", &got), PO_ERR_NOT_FOUND);
    /* sign-out ends it */
    assert_int_equal(po_operator_login(S, "alice", "Vq7#mLw2-Rzt9pK", 15, &s2, err, sizeof err),
                     PO_OK);
    assert_int_equal(po_operator_logout(S, s1.token), PO_OK);
    assert_int_equal(po_operator_session(S, s1.token, &got), PO_ERR_NOT_FOUND);
    assert_int_equal(po_operator_session(S, s2.token, &got), PO_OK);
    /* an expired one ends and is deleted */
    char sql[200];
    assert_int_equal(po_store_exec_tx(S,
                                      "UPDATE operator_session SET expires_at ="
                                      " '2020-01-01T00:00:00.000Z'",
                                      NULL, 0, NULL, err, sizeof err),
                     PO_OK);
    assert_int_equal(po_operator_session(S, s2.token, &got), PO_ERR_NOT_FOUND);
    assert_int_equal(count(S, "SELECT COUNT(*) FROM operator_session", NULL), 0);
    /* a new password ends every session; removal too */
    assert_int_equal(po_operator_login(S, "alice", "Vq7#mLw2-Rzt9pK", 15, &s1, err, sizeof err),
                     PO_OK);
    assert_int_equal(po_operator_passwd(S, "alice", "Jc5&rUp3-Lmy7Dq", 15, err, sizeof err), PO_OK);
    assert_int_equal(po_operator_session(S, s1.token, &got), PO_ERR_NOT_FOUND);
    assert_int_equal(po_operator_login(S, "alice", "Vq7#mLw2-Rzt9pK", 15, &s1, err, sizeof err),
                     PO_ERR_NOT_FOUND);
    assert_int_equal(po_operator_login(S, "alice", "Jc5&rUp3-Lmy7Dq", 15, &s1, err, sizeof err),
                     PO_OK);
    assert_int_equal(po_operator_remove(S, "alice", err, sizeof err), PO_OK);
    assert_int_equal(po_operator_session(S, s1.token, &got), PO_ERR_NOT_FOUND);
    (void)sql;
}

static void five_wrong_passwords_lock_the_name(void **state)
{
    char err[PO_ERRBUF_SIZE] = "";
    struct po_session ses;
    assert_int_equal(
        po_operator_add(S, "carol", PO_ROLE_OPERATOR, "Tn4$eXq8-Wbv2Hs", 15, err, sizeof err),
        PO_OK);
    /* four wrong, then the right one resets the count */
    for (int i = 0; i < PO_LOGIN_FAILURES_MAX - 1; i++)
        assert_int_equal(po_operator_login(S, "carol", "nope", 4, &ses, err, sizeof err),
                         PO_ERR_NOT_FOUND);
    assert_int_equal(po_operator_login(S, "carol", "Tn4$eXq8-Wbv2Hs", 15, &ses, err, sizeof err),
                     PO_OK);
    for (int i = 0; i < PO_LOGIN_FAILURES_MAX; i++)
        assert_int_equal(po_operator_login(S, "carol", "nope", 4, &ses, err, sizeof err),
                         PO_ERR_NOT_FOUND);
    /* locked: even the right password is refused — as a wrong one is, the
     * answer an unknown name is given (names are not enumerable) */
    char unknown[PO_ERRBUF_SIZE] = "";
    assert_int_equal(po_operator_login(S, "carol", "Tn4$eXq8-Wbv2Hs", 15, &ses, err, sizeof err),
                     PO_ERR_NOT_FOUND);
    assert_int_equal(
        po_operator_login(S, "nobody", "Tn4$eXq8-Wbv2Hs", 15, &ses, unknown, sizeof unknown),
        PO_ERR_NOT_FOUND);
    assert_string_equal(err, unknown);
    /* the minute passed (moved back in the database): in again */
    assert_int_equal(po_store_exec_tx(S,
                                      "UPDATE operator SET locked_until ="
                                      " '2020-01-01T00:00:00.000Z'",
                                      NULL, 0, NULL, err, sizeof err),
                     PO_OK);
    assert_int_equal(po_operator_login(S, "carol", "Tn4$eXq8-Wbv2Hs", 15, &ses, err, sizeof err),
                     PO_OK);
    assert_int_equal(count(S, "SELECT failures FROM operator WHERE name = ?", "carol"), 0);
}

/* Issue 44 item 1: the count is taken before the password is checked, so
 * GUESSERS guesses at once — each on its own connection, a thread each —
 * count GUESSERS and at most PO_LOGIN_FAILURES_MAX of them get a password
 * checked; the right one among the rest is refused like a wrong one. */
#define GUESSERS 24
struct guess {
    const char *url;
    bool counted;
    po_err rc;
};

static void *guess_main(void *arg)
{
    struct guess *g = arg;
    struct po_store *s = t_open(g->url);
    struct po_login_claim c;
    char err[PO_ERRBUF_SIZE] = "";
    g->rc = po_operator_login_claim(s, "dave", &c, err, sizeof err);
    g->counted = c.counted;
    po_store_close(s);
    return NULL;
}

static void concurrent_guesses_count_each(void **state)
{
    char err[PO_ERRBUF_SIZE] = "";
    struct po_session ses;
    assert_int_equal(
        po_operator_add(S, "dave", PO_ROLE_OPERATOR, "Pk9^sWq4-Zud6Rm", 15, err, sizeof err),
        PO_OK);
    struct guess g[GUESSERS];
    pthread_t th[GUESSERS];
    for (int k = 0; k < GUESSERS; k++) {
        g[k] = (struct guess){.url = T_URL};
        assert_int_equal(pthread_create(&th[k], NULL, guess_main, &g[k]), 0);
    }
    int counted = 0;
    for (int k = 0; k < GUESSERS; k++) {
        pthread_join(th[k], NULL);
        assert_int_equal(g[k].rc, PO_OK);
        counted += g[k].counted;
    }
    assert_int_equal(counted, PO_LOGIN_FAILURES_MAX);
    assert_int_equal(count(S, "SELECT failures FROM operator WHERE name = ?", "dave"),
                     PO_LOGIN_FAILURES_MAX);
    assert_int_equal(po_operator_login(S, "dave", "Pk9^sWq4-Zud6Rm", 15, &ses, err, sizeof err),
                     PO_ERR_NOT_FOUND);
}

/* Issue 44 item 2: a new password obeys the policy — length, and nothing
 * cracklib refuses; the refusal says why and writes nothing. */
static void weak_passwords_are_refused(void **state)
{
    char err[PO_ERRBUF_SIZE] = "", why[200];
    const char *weak[] = {"x",
                          "Sh0rt!pw",
                          "password1234",
                          "aaaaaaaaaaaaaa",
                          "123456789012",
                          "qwertyuiop123",
                          "erin-erin-erin"};
    for (size_t i = 0; i < PO_NELEM(weak); i++) {
        err[0] = '\0';
        assert_int_equal(
            po_operator_add(S, "erin", PO_ROLE_VIEWER, weak[i], strlen(weak[i]), err, sizeof err),
            PO_ERR_INVALID);
        if (!strstr(err, "password refused"))
            fail_msg("%s: %s", weak[i], err);
    }
    assert_int_equal(count(S, "SELECT COUNT(*) FROM operator", NULL), 0);
    assert_int_equal(po_password_policy("Wq3!vNe7-Hsk2Lp", 15, "erin", why, sizeof why), PO_OK);
    assert_int_equal(
        po_operator_add(S, "erin", PO_ROLE_VIEWER, "Wq3!vNe7-Hsk2Lp", 15, err, sizeof err), PO_OK);
    /* and on a change */
    assert_int_equal(po_operator_passwd(S, "erin", "password1234", 12, err, sizeof err),
                     PO_ERR_INVALID);
    assert_int_equal(po_operator_login(S, "erin", "Wq3!vNe7-Hsk2Lp", 15, &(struct po_session){0},
                                       err, sizeof err),
                     PO_OK);
}

static int64_t traffic(struct po_store *s, const char *tenant, const char *kind)
{
    struct po_param p[] = {PO_TEXT(tenant), PO_TEXT(kind)};
    return t_count(s, "SELECT COALESCE(SUM(n), 0) FROM traffic WHERE tenant_id = ? AND kind = ?", p,
                   2);
}

static void history_is_stored_and_summed(void **state)
{
    char err[PO_ERRBUF_SIZE] = "";
    int64_t now = (int64_t)time(NULL);
    po_traffic_reset();
    po_traffic_count("t1", "wechatpay", PO_OUT_APPLIED, 0, 800, 100, "CNY");
    po_traffic_count("t1", "wechatpay", PO_OUT_APPLIED, 0, 3000, 250, "CNY");
    po_traffic_count("t1", "wechatpay", PO_OUT_APPLIED, 0, 900, 7, "USD");
    po_traffic_count("t1", "wechatpay", PO_OUT_DUPLICATE, 1, 500, 0, NULL);
    po_traffic_count("t1", "wechatpay", PO_OUT_DUPLICATE, 3, 700, 0, NULL);
    po_traffic_count("t1", "alipay", PO_OUT_REJECTED, 0, 900, 0, NULL);
    po_traffic_count("t2", "stripe", PO_OUT_RETRY, 0, 6000000, 0, NULL);
    po_traffic_count("bad tenant!", "stripe", PO_OUT_INVALID, 0, 100, 0, NULL);
    assert_int_equal(po_traffic_flush(S, NULL, "node-a", now, 30, err, sizeof err), PO_OK);
    /* a second node adds its own; the same node again adds too */
    po_traffic_count("t1", "wechatpay", PO_OUT_APPLIED, 0, 800, 50, "CNY");
    assert_int_equal(po_traffic_flush(S, NULL, "node-b", now, 30, err, sizeof err), PO_OK);
    po_traffic_count("t1", "wechatpay", PO_OUT_APPLIED, 0, 800, 50, "CNY");
    assert_int_equal(po_traffic_flush(S, NULL, "node-a", now, 30, err, sizeof err), PO_OK);
    assert_int_equal(traffic(S, "t1", "applied"), 5);
    assert_int_equal(traffic(S, "t1", "duplicate:1"), 1);
    assert_int_equal(traffic(S, "t1", "duplicate:3"), 1);
    assert_int_equal(traffic(S, "t1", "volume:CNY"), 450);
    assert_int_equal(traffic(S, "t1", "volume:USD"), 7);
    assert_int_equal(traffic(S, "t1", "ack_le:1"), 7); /* 0.5, 0.7, 0.8 ×3, 0.9 ×2 ms */
    assert_int_equal(traffic(S, "t1", "ack_le:5"), 1); /* 3 ms */
    assert_int_equal(traffic(S, "t2", "ack_le:inf"), 1);
    assert_int_equal(traffic(S, PO_TRAFFIC_OTHER, "invalid"), 1);
    /* a flush that fails keeps the counts for the next */
    po_traffic_count("t1", "wechatpay", PO_OUT_APPLIED, 0, 800, 10, "CNY");
    assert_int_equal(po_store_exec_tx(S, "ALTER TABLE traffic RENAME TO traffic_away", NULL, 0,
                                      NULL, err, sizeof err),
                     PO_OK);
    assert_int_not_equal(po_traffic_flush(S, NULL, "node-a", now, 30, err, sizeof err), PO_OK);
    assert_int_equal(po_store_exec_tx(S, "ALTER TABLE traffic_away RENAME TO traffic", NULL, 0,
                                      NULL, err, sizeof err),
                     PO_OK);
    assert_int_equal(po_traffic_flush(S, NULL, "node-a", now, 30, err, sizeof err), PO_OK);
    assert_int_equal(traffic(S, "t1", "applied"), 6);
    assert_int_equal(traffic(S, "t1", "volume:CNY"), 460);
    /* the view: one tenant's series and pairs add up to the table */
    json_t *v = NULL;
    assert_int_equal(po_view_traffic(S, "t1", 1, false, now, &v), PO_OK);
    assert_int_equal(json_integer_value(json_object_get(v, "step_s")), PO_TRAFFIC_BUCKET_S);
    json_t *series = json_object_get(v, "series");
    assert_int_equal(json_array_size(series), 12);
    json_t *last = json_array_get(series, 11);
    assert_int_equal(json_integer_value(json_object_get(last, "applied")), 6);
    assert_int_equal(json_integer_value(json_object_get(last, "duplicate")), 2);
    assert_int_equal(json_integer_value(json_object_get(last, "rejected")), 1);
    assert_int_equal(json_integer_value(json_object_get(last, "acks")), 9);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(last, "volume"), "CNY")),
                     460);
    assert_true(json_real_value(json_object_get(last, "ack_p50_ms")) == 1.0);
    assert_true(json_real_value(json_object_get(last, "ack_p99_ms")) == 5.0);
    assert_int_equal(json_array_size(json_object_get(v, "by_tenant_channel")), 2);
    json_decref(v);
    assert_int_equal(po_view_traffic(S, NULL, 168, false, now, &v),
                     PO_OK); /* hourly, every tenant */
    assert_int_equal(json_integer_value(json_object_get(v, "step_s")), 3600);
    assert_int_equal(json_array_size(json_object_get(v, "series")), 168);
    assert_int_equal(json_array_size(json_object_get(v, "by_tenant_channel")), 4);
    json_decref(v);
    assert_int_equal(po_view_traffic(S, NULL, 0, false, now, &v), PO_ERR_INVALID);
    /* older than the days kept: deleted by the next flush */
    assert_int_equal(po_store_exec_tx(S,
                                      "INSERT INTO traffic (tenant_id, bucket, channel, node, kind,"
                                      " n) VALUES ('t1', '2020-01-01T00:00', 'wechatpay', 'x',"
                                      " 'applied', 9)",
                                      NULL, 0, NULL, err, sizeof err),
                     PO_OK);
    assert_int_equal(traffic(S, "t1", "applied"), 15);
    assert_int_equal(po_traffic_flush(S, NULL, "node-a", now, 30, err, sizeof err), PO_OK);
    assert_int_equal(traffic(S, "t1", "applied"), 6);
}

static void made_up_tenants_do_not_grow_it(void **state)
{
    char err[PO_ERRBUF_SIZE] = "", t[32];
    po_traffic_reset();
    for (int i = 0; i < PO_TRAFFIC_KEYS_MAX + 200; i++) {
        snprintf(t, sizeof t, "nobody-%d", i);
        po_traffic_count(t, "wechatpay", PO_OUT_INVALID, 0, 100, 0, NULL);
    }
    assert_int_equal(po_traffic_flush(S, NULL, "node-a", (int64_t)time(NULL), 30, err, sizeof err),
                     PO_OK);
    /* every one counted, at most PO_TRAFFIC_KEYS_MAX rows of a kind */
    assert_int_equal(t_count(S, "SELECT SUM(n) FROM traffic WHERE kind = 'invalid'", NULL, 0),
                     PO_TRAFFIC_KEYS_MAX + 200);
    assert_true(t_count(S, "SELECT COUNT(*) FROM traffic WHERE kind = 'invalid'", NULL, 0) <=
                PO_TRAFFIC_KEYS_MAX);
    assert_true(traffic(S, PO_TRAFFIC_OTHER, "invalid") >= 200);
}

/* Callbacks refused as for no tenant count under "-", whatever name they
 * gave (issue 45: each made-up name was a row of its own). */
static void unknown_tenants_count_as_one(void **state)
{
    char err[PO_ERRBUF_SIZE] = "", t[32];
    po_traffic_reset();
    for (int i = 0; i < 300; i++) {
        snprintf(t, sizeof t, "nobody-%d", i);
        po_traffic_answered(&(struct po_delivery){.tenant = t,
                                                  .channel = "wechatpay",
                                                  .request_id = "r",
                                                  .outcome = PO_OUT_INVALID,
                                                  .reason = PO_R_UNKNOWN_TENANT,
                                                  .status = 404,
                                                  .micros = 100},
                            0, NULL, false);
    }
    po_traffic_answered(&(struct po_delivery){.tenant = "t1",
                                              .channel = "wechatpay",
                                              .request_id = "r",
                                              .outcome = PO_OUT_INVALID,
                                              .reason = PO_R_BAD_SIGNATURE,
                                              .status = 401,
                                              .micros = 100},
                        0, NULL, false);
    assert_int_equal(po_traffic_flush(S, NULL, "node-a", (int64_t)time(NULL), 30, err, sizeof err),
                     PO_OK);
    assert_int_equal(traffic(S, PO_TRAFFIC_OTHER, "invalid"), 300);
    assert_int_equal(traffic(S, "t1", "invalid"), 1); /* a tenant's own refusals stay its own */
    assert_int_equal(
        t_count(S, "SELECT COUNT(DISTINCT tenant_id) FROM traffic WHERE kind = 'invalid'", NULL, 0),
        2);
}

static void an_order_found_and_traced(void **state)
{
    t_seed_order(S, "O-1", 500);
    t_seed_order(S, "O-2", 700);
    struct po_event e1 = t_pay_event("O-1", "TX-1", 500), e2 = t_pay_event("O-2", "TX-2", 700);
    assert_int_equal(t_apply(S, NULL, &e1).kind, PO_OUT_APPLIED);
    assert_int_equal(t_apply(S, NULL, &e2).kind, PO_OUT_APPLIED);
    struct po_event bad = t_pay_event("O-2", "TX-9", 1); /* another payment, wrong amount */
    (void)t_apply(S, NULL, &bad);
    json_t *f = NULL;
    assert_int_equal(po_view_find_orders(S, NULL, "TX-2", &f), PO_OK);
    assert_int_equal(json_array_size(f), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(f, 0), "out_trade_no")),
                        "O-2");
    json_decref(f);
    assert_int_equal(po_view_find_orders(S, "t1", "O-1", &f), PO_OK);
    assert_int_equal(json_array_size(f), 1);
    json_decref(f);
    assert_int_equal(po_view_find_orders(S, "t1", "nothing", &f), PO_OK);
    assert_int_equal(json_array_size(f), 0);
    json_decref(f);
    json_t *t = NULL;
    assert_int_equal(po_view_order_trail(S, "t1", "O-2", &t), PO_OK);
    assert_non_null(t);
    assert_true(json_array_size(json_object_get(t, "processed")) >= 1);
    json_t *j = json_array_get(json_object_get(t, "journals"), 0);
    json_t *lines = json_object_get(j, "postings");
    assert_int_equal(json_array_size(lines), 2);
    int64_t sum = 0;
    for (size_t i = 0; i < 2; i++)
        sum += json_integer_value(json_object_get(json_array_get(lines, i), "amount"));
    assert_int_equal(sum, 0);
    json_t *alerts = json_object_get(t, "alerts");
    assert_true(json_array_size(alerts) >= 1);
    assert_non_null(
        strstr(json_string_value(json_object_get(json_array_get(alerts, 0), "id")), "al_"));
    assert_true(json_array_size(json_object_get(t, "events")) >= 1);
    json_decref(t);
    assert_int_equal(po_view_order_trail(S, "t1", "O-404", &t), PO_OK);
    assert_null(t);
    /* every account, and the journal behind one balance equal to it */
    json_t *acc = NULL;
    assert_int_equal(po_view_accounts(S, "t1", &acc), PO_OK);
    bool payable = false;
    size_t i;
    json_t *a;
    json_array_foreach(acc, i, a)
    {
        if (strcmp(json_string_value(json_object_get(a, "account")), "merchant_payable:m1") == 0) {
            payable = true;
            assert_string_equal(json_string_value(json_object_get(a, "kind")), "merchant_payable");
            assert_int_equal(json_integer_value(json_object_get(a, "balance")), -1200);
        }
    }
    assert_true(payable);
    json_decref(acc);
    json_t *jr = NULL;
    assert_int_equal(po_view_account_journal(S, "t1", "merchant_payable:m1", "CNY", 1, &jr), PO_OK);
    json_t *tot = json_object_get(jr, "totals");
    assert_int_equal(json_integer_value(json_object_get(tot, "postings")), 2);
    assert_int_equal(json_integer_value(json_object_get(tot, "sum")), -1200);
    assert_int_equal(json_integer_value(json_object_get(tot, "balance")), -1200);
    assert_int_equal(json_array_size(json_object_get(jr, "postings")), 1); /* the limit */
    json_decref(jr);
}

static void deliveries_are_kept_per_order(void **state)
{
    char err[PO_ERRBUF_SIZE] = "";
    po_traffic_reset();
    t_seed_order(S, "O-1", 500);
    struct po_delivery d = {.tenant = "t1",
                            .channel = "wechatpay",
                            .request_id = "req-1",
                            .out_trade_no = "O-1",
                            .event_type = "PAY_SUCCESS",
                            .outcome = PO_OUT_APPLIED,
                            .status = 200,
                            .micros = 1500};
    po_deliveries_record(&d);
    d.request_id = "req-2";
    d.event_type = "REFUND_SUCCESS"; /* (the event each carried: named on the order's page) */
    d.out_refund_no = "R-1";
    d.outcome = PO_OUT_DUPLICATE;
    d.layer = 1;
    po_deliveries_record(&d);
    d.request_id = "req-3";
    d.layer = 3;
    d.event_type = NULL;     /* none read: kept without one */
    d.out_refund_no = "<b>"; /* not a refund number: none */
    po_deliveries_record(&d);
    d.request_id = "req-4";
    d.out_trade_no = "<b>"; /* not an order number: kept without one */
    d.outcome = PO_OUT_REJECTED;
    d.layer = 0;
    d.reason = PO_R_AMOUNT_MISMATCH;
    po_deliveries_record(&d);
    d.tenant = "no such tenant!"; /* not a tenant name: not kept */
    po_deliveries_record(&d);
    /* a flush the database refuses keeps them */
    assert_int_equal(po_store_exec_tx(S, "ALTER TABLE callback_delivery RENAME TO cd_away", NULL, 0,
                                      NULL, err, sizeof err),
                     PO_OK);
    assert_int_not_equal(po_deliveries_flush(S, NULL, "node-a", err, sizeof err), PO_OK);
    assert_int_equal(po_store_exec_tx(S, "ALTER TABLE cd_away RENAME TO callback_delivery", NULL, 0,
                                      NULL, err, sizeof err),
                     PO_OK);
    assert_int_equal(po_deliveries_flush(S, NULL, "node-a", err, sizeof err), PO_OK);
    assert_int_equal(t_count(S, "SELECT COUNT(*) FROM callback_delivery", NULL, 0), 4);
    assert_int_equal(t_count(S,
                             "SELECT COUNT(*) FROM callback_delivery WHERE out_trade_no IS NULL"
                             " AND reason = 'amount_mismatch' AND status = 200",
                             NULL, 0),
                     1);
    /* the same request twice (a flush retried after its commit) is one row */
    d.tenant = "t1";
    d.request_id = "req-1";
    po_deliveries_record(&d);
    assert_int_equal(po_deliveries_flush(S, NULL, "node-a", err, sizeof err), PO_OK);
    assert_int_equal(t_count(S, "SELECT COUNT(*) FROM callback_delivery", NULL, 0), 4);
    assert_int_equal((int)po_deliveries_dropped(), 0);
    /* the order's trail lists them in order, with their layers */
    json_t *t = NULL;
    assert_int_equal(po_view_order_trail(S, "t1", "O-1", &t), PO_OK);
    json_t *ds = json_object_get(t, "deliveries");
    assert_int_equal(json_array_size(ds), 3);
    const char *want[] = {"applied/0 PAY_SUCCESS -", "duplicate/1 REFUND_SUCCESS R-1",
                          "duplicate/3 - -"};
    for (size_t i = 0; i < 3; i++) {
        json_t *x = json_array_get(ds, i);
        char got[128];
        const char *ev = json_string_value(json_object_get(x, "event_type")),
                   *rf = json_string_value(json_object_get(x, "out_refund_no"));
        snprintf(got, sizeof got, "%s/%lld %s %s", json_string_value(json_object_get(x, "outcome")),
                 (long long)json_integer_value(json_object_get(x, "layer")), ev ? ev : "-",
                 rf ? rf : "-");
        assert_string_equal(got, want[i]);
        assert_string_equal(json_string_value(json_object_get(x, "node")), "node-a");
    }
    json_decref(t);
    /* pruned with the history */
    assert_int_equal(po_store_exec_tx(S,
                                      "UPDATE callback_delivery SET at = '2020-01-01T00:00:00.000Z'"
                                      " WHERE request_id = 'req-1'",
                                      NULL, 0, NULL, err, sizeof err),
                     PO_OK);
    assert_int_equal(po_traffic_flush(S, NULL, "node-a", (int64_t)time(NULL), 30, err, sizeof err),
                     PO_OK);
    assert_int_equal(t_count(S, "SELECT COUNT(*) FROM callback_delivery", NULL, 0), 3);
}

/* Callback threads counting and recording while the jobs thread flushes
 * (ThreadSanitizer's case, tsan_console): every count and delivery lands
 * once. */
#define RACE_THREADS 4
#define RACE_EACH 2000

static void *race_counter(void *arg)
{
    int k = (int)(intptr_t)arg;
    char rid[32];
    for (int i = 0; i < RACE_EACH; i++) {
        snprintf(rid, sizeof rid, "r%d-%d", k, i);
        po_traffic_count("t1", "wechatpay", PO_OUT_APPLIED, 0, 900, 1, "CNY");
        po_deliveries_record(&(struct po_delivery){.tenant = "t1",
                                                   .channel = "wechatpay",
                                                   .request_id = rid,
                                                   .out_trade_no = "O-1",
                                                   .outcome = PO_OUT_APPLIED,
                                                   .status = 200,
                                                   .micros = 900});
    }
    return NULL;
}

static void counted_while_flushed(void **state)
{
    char err[PO_ERRBUF_SIZE] = "";
    po_traffic_reset();
    pthread_t th[RACE_THREADS];
    for (int k = 0; k < RACE_THREADS; k++)
        assert_int_equal(pthread_create(&th[k], NULL, race_counter, (void *)(intptr_t)k), 0);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(po_deliveries_flush(S, NULL, "node-a", err, sizeof err), PO_OK);
        assert_int_equal(
            po_traffic_flush(S, NULL, "node-a", (int64_t)time(NULL), 0, err, sizeof err), PO_OK);
    }
    for (int k = 0; k < RACE_THREADS; k++)
        pthread_join(th[k], NULL);
    assert_int_equal(po_deliveries_flush(S, NULL, "node-a", err, sizeof err), PO_OK);
    assert_int_equal(po_traffic_flush(S, NULL, "node-a", (int64_t)time(NULL), 0, err, sizeof err),
                     PO_OK);
    assert_int_equal(traffic(S, "t1", "applied"), RACE_THREADS * RACE_EACH);
    assert_int_equal(traffic(S, "t1", "volume:CNY"), RACE_THREADS * RACE_EACH);
    assert_int_equal(t_count(S, "SELECT COUNT(*) FROM callback_delivery", NULL, 0),
                     RACE_THREADS * RACE_EACH);
    assert_int_equal((int)po_deliveries_dropped(), 0);
}

int main(int argc, char **argv)
{
    t_fx_backend = t_backend(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(passwords_are_scrypt_hashes),
        cmocka_unit_test_setup_teardown(operators_are_managed, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(sign_in_and_sessions, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(concurrent_guesses_count_each, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(weak_passwords_are_refused, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(five_wrong_passwords_lock_the_name, t_fx_setup,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(history_is_stored_and_summed, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(made_up_tenants_do_not_grow_it, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(unknown_tenants_count_as_one, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(an_order_found_and_traced, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(deliveries_are_kept_per_order, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(counted_while_flushed, t_fx_setup_seeded, t_fx_teardown),
    };
    char name[64];
    snprintf(name, sizeof name, "console[%s]", t_fx_backend);
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
