/*
 * testutil.h — shared by the test programs: a fresh, migrated database per
 * test on either backend, seeding helpers, and counting queries.
 *
 * Backend selection: every store-touching test program takes the backend
 * ("sqlite" or "postgres") as argv[1]. PostgreSQL tests read the admin URL
 * from PAYONCE_TEST_PG (set by scripts/test.sh, which starts a server).
 * Without it they exit 77 (CTest's "skipped"), unless PAYONCE_REQUIRE_PG is
 * set, in which case a missing server is a failure.
 */
#ifndef PO_TESTUTIL_H
#define PO_TESTUTIL_H

#include "../../src/core/core.h"
#include "../../src/engine/objects.h"
#include "../../src/engine/engine.h"
#include "../../src/ledger/ledger.h"
#include "../../src/store/store.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#define T_URL_MAX 512

/* One assertion style (issue 46): every C test program is a cmocka group
 * — its cases cmocka tests, run by cmocka — and its checks are cmocka's
 * assert_*, or T_CHECK where a failure needs words: the project's check on
 * top of cmocka. A failed T_CHECK prints "FAIL: …" (printf-style) and fails
 * the running case:
 *  - in the case's body, on its own thread, it ends the case there, as
 *    assert_* does (cmocka's fail(); the case's teardown still runs);
 *  - in a fixture (a setup or teardown, which must go on to stop its
 *    servers) and on any other thread (a server's hook, a racer, a sink) it
 *    is counted (t_fail), and the case fails when its teardown returns.
 * Groups run through t_run_group, which arranges that. With
 * PAYONCE_TEST_KEEP_GOING=1 no check ends a case: every failure of it is
 * counted and printed (openapi.sh's judged judge wants all three of its
 * planted violations from one case). t_passes counts the checks that held,
 * t_failures those that did not (the figure lines). */
extern _Atomic int t_passes, t_failures;
/* Where t_fail's lines go (NULL: stderr). */
extern FILE *t_report;
/* Counts a failure, says what failed (printf-style) and goes on: the
 * running case fails when its teardown returns. */
void t_fail(const char *fmt, ...) PO_PRINTF(1, 2);
/* T_CHECK's failure (above). */
void t_check_failed(const char *file, int line, const char *fmt, ...) PO_PRINTF(3, 4);
#define T_CHECK(cond, ...)                                                                         \
    do {                                                                                           \
        if (cond)                                                                                  \
            t_passes++;                                                                            \
        else                                                                                       \
            t_check_failed(__FILE__, __LINE__, __VA_ARGS__);                                       \
    } while (0)

/* Runs n cases as the cmocka group name (setup and teardown: the group's
 * fixtures, may be NULL), each case's fixtures wrapped so that what T_CHECK
 * and t_fail counted outside the case's body fails that case. Returns 0
 * when every case passed and nothing was counted (before the group too);
 * otherwise the process exits 1 there, after every case has run (a case
 * that failed in its body may have left servers running under the exit
 * handlers). */
int t_run_group(const char *name, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                CMFixtureFunction teardown);
/* What a case left when a check ended it: the serial number of the case
 * running now (0 outside any case), and fn called after each case's
 * teardown with the serial of the case that ended (simenv stops the
 * gateways and `payonce serve` children that case started and did not stop,
 * so that they do not serve the next case). At most 4 functions. */
int t_case_serial(void);
void t_after_each_case(void (*fn)(int serial));
/* The same for an array of cases (cmocka_run_group_tests_name's shape). */
#define T_RUN_GROUP(name, tests, setup, teardown)                                                  \
    t_run_group(name, tests, sizeof(tests) / sizeof((tests)[0]), setup, teardown)

/* Picks the backend from argv[1]; exits 77 (skip) or 1 when unavailable. */
const char *t_backend(int argc, char **argv);

/* A fresh empty database for `backend`, migrated. Writes its URL (for more
 * connections) into url. Dropped by t_db_drop. Aborts the test on error. */
void t_db_create(const char *backend, char *url, size_t cap);
/* A new database with src's rows (src is open nowhere: SQLite copies the
 * file, PostgreSQL creates it from src as a template), into url. Dropped
 * by t_db_drop. */
void t_db_clone(const char *src, char *url, size_t cap);
void t_db_drop(const char *url);
struct po_store *t_open(const char *url);

/* Tenant "t1" with merchant "m1". */
void t_seed_tenant(struct po_store *s);
/* An order of amount CNY for merchant m1 in tenant t1, PAYING. */
void t_seed_order(struct po_store *s, const char *out_trade_no, int64_t amount);
/* A refund request (PROCESSING) on a paid order. */
void t_seed_refund(struct po_store *s, const char *out_trade_no, const char *out_refund_no,
                   int64_t amount);

/* A PAY_SUCCESS event on wechatpay for tenant t1. */
struct po_event t_pay_event(const char *out_trade_no, const char *txn, int64_t amount);
struct po_event t_refund_event(enum po_event_type type, const char *out_trade_no,
                               const char *out_refund_no, const char *refund_id, int64_t amount);
struct po_event t_share_event(const char *out_trade_no, const char *share_id, const char *receiver,
                              int64_t amount);

/* Runs a single-value integer query (e.g. SELECT COUNT(*)). */
int64_t t_count(struct po_store *s, const char *sql, const struct po_param *p, int n);
/* The same on a connection of its own to url, with one text parameter
 * (none when arg is NULL). */
int64_t t_count_url(const char *url, const char *sql, const char *arg);
/* Cached balance of an account in CNY (0 when absent). */
int64_t t_balance(struct po_store *s, const char *account);
/* The names of the invariants po_ledger_verify reported (its report
 * callback; ctx a struct t_checks), each as " name ". */
struct t_checks {
    char checks[1024];
};
void t_collect_check(void *ctx, const struct po_violation *v);
/* Number of broken invariants found by po_ledger_verify (printed). */
int t_verify(struct po_store *s);
/* Applies one event with cfg and returns its outcome. */
struct po_outcome t_apply(struct po_store *s, const struct po_engine_cfg *cfg,
                          const struct po_event *ev);

/* A cmocka fixture: a fresh migrated database of t_fx_backend per test
 * (t_fx_setup_seeded also adds tenant t1 with merchant m1). T_S is its
 * connection, T_URL its URL (for more connections). */
struct t_fx {
    char url[T_URL_MAX];
    struct po_store *s;
};
extern const char *t_fx_backend;
int t_fx_setup(void **state);
int t_fx_setup_seeded(void **state);
int t_fx_teardown(void **state);
#define T_S (((struct t_fx *)*state)->s)
#define T_URL (((struct t_fx *)*state)->url)

/* Raw HTTP/1.1 on loopback, for requests no client library would send:
 * a connection to port (10 s receive timeout; aborts the test when it
 * cannot connect), and one request sent on it with its answer read (whole,
 * into out when not NULL: cap bytes, NUL-terminated). The answer's status,
 * or 0 when the connection gave none (closed, timed out). */
int t_dial(unsigned port);
unsigned t_exchange(int fd, const char *req, size_t len, char *out, size_t cap);

/* Prints a result line ("# ...") and appends it to $PAYONCE_FIGURES when
 * set, so the test driver can show the figures of passing tests. */
void t_figure(const char *fmt, ...) PO_PRINTF(1, 2);

#endif
