/*
 * test_ledger_check.c BACKEND — serve's continuous ledger check (issue 28
 * item 1), each planted fault caught by the next round and named, `payonce
 * verify` agreeing:
 *   clean_traffic_finds_nothing   payments, duplicates and a refund through
 *                                 the engine: the round finds nothing
 *   a_posting_edited              UPDATE posting in SQL: the round names
 *                                 the row and what it broke (its postings no
 *                                 longer sum to zero); the alert is raised
 *                                 once, the change taken off the list
 *   a_processed_record_deleted    DELETE FROM notify_log: named, "its
 *                                 processed record is missing"
 *   a_double_credit_inserted      a second payment journal for a paid order
 *                                 written by hand: "order … has a second PAY
 *                                 journal (a double credit)"
 *   two_rounds_take_it_once       two connections running rounds at once
 *                                 (two nodes) raise the change's alert once
 */
#include "../support/testutil.h"

#include "../../src/service/service.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define S T_S
#define PAYKEY "'wechatpay:TX-A:PAY_SUCCESS'"

static int64_t q1(struct po_store *s, const char *sql)
{
    struct po_rows r;
    int64_t v = -1;
    assert_int_equal(po_store_exec(s, sql, PO_NO_PARAMS, &r, NULL, NULL, 0), PO_OK);
    assert_int_equal(r.nrows, 1);
    assert_int_equal(po_rows_i64(&r, 0, 0, &v), PO_OK);
    po_rows_free(&r);
    return v;
}

static void exec_ok(struct po_store *s, const char *sql)
{
    char err[PO_ERRBUF_SIZE] = "";
    assert_int_equal(po_store_exec_tx(s, sql, PO_NO_PARAMS, NULL, err, sizeof err), PO_OK);
}

static int round_of(struct po_store *s)
{
    char err[PO_ERRBUF_SIZE] = "";
    int found = -1;
    assert_int_equal(po_ledger_check_run(s, &found, err, sizeof err), PO_OK);
    return found;
}

/* Order A paid (TX-A) through the engine; the round after it is clean. */
static void paid(struct po_store *s)
{
    t_seed_order(s, "A", 100);
    struct po_event ev = t_pay_event("A", "TX-A", 100);
    assert_int_equal(t_apply(s, NULL, &ev).kind, PO_OUT_APPLIED);
    assert_int_equal(round_of(s), 0);
}

/* The one ledger_invariant alert's detail (asserting there is one). */
static const char *alert_detail(struct po_store *s)
{
    static char d[1024];
    struct po_rows r;
    assert_int_equal(po_store_exec(s, "SELECT detail FROM alert WHERE reason = 'ledger_invariant'",
                                   PO_NO_PARAMS, &r, NULL, NULL, 0),
                     PO_OK);
    assert_int_equal(r.nrows, 1);
    (void)snprintf(d, sizeof d, "%s", po_rows_get(&r, 0, 0));
    po_rows_free(&r);
    return d;
}

static void clean_traffic_finds_nothing(void **state)
{
    (void)state;
    for (int i = 0; i < 5; i++) {
        char no[8], tx[16];
        snprintf(no, sizeof no, "C%d", i);
        snprintf(tx, sizeof tx, "TX-C%d", i);
        t_seed_order(S, no, 100 + i);
        struct po_event ev = t_pay_event(no, tx, 100 + i);
        assert_int_equal(t_apply(S, NULL, &ev).kind, PO_OUT_APPLIED);
        assert_int_equal(t_apply(S, NULL, &ev).kind, PO_OUT_DUPLICATE);
    }
    t_seed_refund(S, "C0", "R0", 50);
    struct po_event rf = t_refund_event(PO_EV_REFUND_SUCCESS, "C0", "R0", "RID-0", 50);
    assert_int_equal(t_apply(S, NULL, &rf).kind, PO_OUT_APPLIED);
    assert_int_equal(round_of(S), 0);
    assert_int_equal(q1(S, "SELECT COUNT(*) FROM alert WHERE reason = 'ledger_invariant'"), 0);
    assert_int_equal(t_verify(S), 0);
}

static void a_posting_edited(void **state)
{
    (void)state;
    paid(S);
    exec_ok(S, "UPDATE posting SET amount = amount + 1 WHERE idem_key = " PAYKEY " AND amount > 0");
    assert_int_equal(round_of(S), 1);
    const char *d = alert_detail(S);
    assert_non_null(strstr(d, "posting row wechatpay:TX-A:PAY_SUCCESS line "));
    assert_non_null(strstr(d, "updated at "));
    assert_non_null(strstr(d, "its postings sum to 1 CNY"));
    assert_int_equal(q1(S, "SELECT COUNT(*) FROM ledger_change"), 0);
    assert_int_equal(round_of(S), 0); /* taken once */
    assert_int_equal(q1(S, "SELECT COUNT(*) FROM alert WHERE reason = 'ledger_invariant'"), 1);
    assert_int_not_equal(t_verify(S), 0); /* verify agrees */
}

static void a_processed_record_deleted(void **state)
{
    (void)state;
    paid(S);
    exec_ok(S, "DELETE FROM notify_log WHERE idem_key = " PAYKEY);
    assert_int_equal(round_of(S), 1);
    const char *d = alert_detail(S);
    assert_non_null(strstr(d, "notify_log row wechatpay:TX-A:PAY_SUCCESS deleted at "));
    assert_non_null(strstr(d, "its processed record is missing"));
    assert_int_not_equal(t_verify(S), 0);
}

static void a_double_credit_inserted(void **state)
{
    (void)state;
    paid(S);
    /* a second credit of A, as a careless manual fix would write it */
    exec_ok(S, "INSERT INTO journal (tenant_id, idem_key, kind, out_trade_no, currency, created_at)"
               " VALUES ('t1', 'manual:A:again', 'PAY', 'A', 'CNY', '2026-12-05T00:00:00.000Z')");
    exec_ok(S, "INSERT INTO posting (tenant_id, idem_key, line_no, account, currency, amount)"
               " VALUES ('t1', 'manual:A:again', 1, 'channel_clearing:wechatpay', 'CNY', 100),"
               " ('t1', 'manual:A:again', 2, 'merchant_payable:m1', 'CNY', -100)");
    assert_int_equal(round_of(S), 1);
    const char *d = alert_detail(S);
    assert_non_null(strstr(d, "order A has a second PAY journal, manual:A:again"));
    assert_non_null(strstr(d, "(a double credit)"));
    assert_non_null(strstr(d, "its processed record is missing"));
    assert_non_null(strstr(d, "order A has 2 payment journals"));
    assert_int_equal(q1(S, "SELECT COUNT(*) FROM alert WHERE reason = 'ledger_invariant' AND"
                           " out_trade_no = 'A'"),
                     1);
    assert_int_not_equal(t_verify(S), 0);
}

struct racer {
    const char *url;
    int found;
};

static void *race_round(void *arg)
{
    struct racer *r = arg;
    struct po_store *s = t_open(r->url);
    char err[PO_ERRBUF_SIZE] = "";
    /* a round that loses the race to the other may fail its transaction
     * (SQLite busy, PostgreSQL's row gone): the next round is clean */
    if (po_ledger_check_run(s, &r->found, err, sizeof err))
        r->found = 0;
    po_store_close(s);
    return NULL;
}

static void two_rounds_take_it_once(void **state)
{
    struct t_fx *f = *state;
    paid(S);
    exec_ok(S, "UPDATE journal SET currency = 'USD' WHERE idem_key = " PAYKEY);
    struct racer a = {f->url, 0}, b = {f->url, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, race_round, &a);
    pthread_create(&tb, NULL, race_round, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_int_equal(round_of(S), 0);
    assert_true(a.found + b.found >= 1);
    assert_int_equal(q1(S, "SELECT COUNT(*) FROM alert WHERE reason = 'ledger_invariant'"), 1);
    assert_int_equal(q1(S, "SELECT COUNT(*) FROM outbox_event WHERE type = 'alert.raised' AND"
                           " payload LIKE '%ledger_invariant%'"),
                     1);
}

int main(int argc, char **argv)
{
    t_fx_backend = t_backend(argc, argv);
#define T(name) cmocka_unit_test_setup_teardown(name, t_fx_setup_seeded, t_fx_teardown)
    const struct CMUnitTest tests[] = {
        T(clean_traffic_finds_nothing), T(a_posting_edited),        T(a_processed_record_deleted),
        T(a_double_credit_inserted),    T(two_rounds_take_it_once),
    };
    char name[64];
    snprintf(name, sizeof name, "ledger_check[%s]", t_fx_backend);
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
