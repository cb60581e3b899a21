/*
 * test_ledger.c — the double-entry ledger on each backend (argv[1]):
 * balance deltas accumulate per (tenant, account, currency) and refuse to
 * overflow; a posted journal writes its lines and moves cached balances
 * only when flushed; a flush writes each account once (the hot merchant
 * row once per transaction, whatever the batch), skips accounts whose net
 * is zero, and rolls back with its transaction; verify names an unbalanced
 * journal and a cached balance that disagrees with its postings.
 */
#include "../support/testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#define S T_S

static struct po_journal journal(const char *key, const char *debit, const char *credit,
                                 int64_t amount)
{
    struct po_journal j = {.tenant = "t1",
                           .idem_key = key,
                           .kind = "PAY",
                           .out_trade_no = "O-1",
                           .currency = "CNY",
                           .created_at = "2026-12-02T00:00:00.000Z",
                           .nlines = 2};
    snprintf(j.lines[0].account, sizeof j.lines[0].account, "%s", debit);
    snprintf(j.lines[1].account, sizeof j.lines[1].account, "%s", credit);
    j.lines[0].amount_minor = amount;
    j.lines[1].amount_minor = -amount;
    return j;
}

static void deltas_accumulate_and_are_bounded(void **state)
{
    (void)state;
    static struct po_ledger_batch a, b;
    po_ledger_batch_reset(&a);
    po_ledger_batch_reset(&b);
    struct po_journal j = journal("k", "channel_clearing:wechatpay", "merchant_payable:m1", 100);
    /* Posting needs a store; the batch arithmetic does not: merge twice. */
    b.n = 2;
    snprintf(b.d[0].tenant, sizeof b.d[0].tenant, "t1");
    snprintf(b.d[0].account, sizeof b.d[0].account, "%s", j.lines[0].account);
    snprintf(b.d[0].currency, sizeof b.d[0].currency, "CNY");
    b.d[0].delta_minor = 100;
    b.d[1] = b.d[0];
    snprintf(b.d[1].account, sizeof b.d[1].account, "%s", j.lines[1].account);
    b.d[1].delta_minor = -100;
    assert_int_equal(po_ledger_batch_merge(&a, &b), PO_OK);
    assert_int_equal(po_ledger_batch_merge(&a, &b), PO_OK);
    assert_int_equal(a.n, 2); /* the same two accounts, summed */
    assert_true(a.d[0].delta_minor == 200 && a.d[1].delta_minor == -200);
    /* Full: refused, and dst unchanged. */
    static struct po_ledger_batch full;
    full.n = PO_LEDGER_DELTAS_MAX;
    for (int i = 0; i < full.n; i++) {
        snprintf(full.d[i].tenant, sizeof full.d[i].tenant, "t1");
        snprintf(full.d[i].account, sizeof full.d[i].account, "a%d", i);
        snprintf(full.d[i].currency, sizeof full.d[i].currency, "CNY");
        full.d[i].delta_minor = 1;
    }
    assert_int_equal(po_ledger_batch_merge(&full, &b), PO_ERR_LIMIT);
    assert_int_equal(full.n, PO_LEDGER_DELTAS_MAX);
}

/* Counts the statements of a transaction that touch account_balance. */
struct counter {
    int balance_writes;
};
static po_err count_balance(void *ctx, int index, const char *sql)
{
    (void)index;
    struct counter *c = ctx;
    if (strstr(sql, "account_balance"))
        c->balance_writes++;
    return PO_OK;
}

static void post_then_flush(void **state)
{
    char err[PO_ERRBUF_SIZE] = "";
    static struct po_ledger_batch deltas;
    po_ledger_batch_reset(&deltas);
    assert_int_equal(po_store_begin(S, err, sizeof err), PO_OK);
    /* 50 payments to one hot merchant, and one that nets to zero. */
    for (int i = 0; i < 50; i++) {
        char key[32];
        snprintf(key, sizeof key, "wechatpay:T%d:PAY_SUCCESS", i);
        struct po_journal j =
            journal(key, "channel_clearing:wechatpay", "merchant_payable:hot", 10);
        assert_int_equal(po_ledger_post(S, &j, &deltas, err, sizeof err), PO_OK);
    }
    struct po_journal in = journal("x:in", "suspense", "channel_clearing:alipay", 7);
    struct po_journal out = journal("x:out", "channel_clearing:alipay", "suspense", 7);
    assert_int_equal(po_ledger_post(S, &in, &deltas, err, sizeof err), PO_OK);
    assert_int_equal(po_ledger_post(S, &out, &deltas, err, sizeof err), PO_OK);
    /* Nothing cached before the flush. */
    assert_int_equal(t_count(S, "SELECT COUNT(*) FROM account_balance", NULL, 0), 0);
    struct counter c = {0};
    po_store_set_fault_hook(S, count_balance, &c);
    assert_int_equal(po_ledger_flush(S, &deltas, "2026-12-02T00:00:00.000Z", err, sizeof err),
                     PO_OK);
    po_store_set_fault_hook(S, NULL, NULL);
    assert_int_equal(po_store_commit(S, err, sizeof err), PO_OK);
    /* The hot row written once; the zero nets (alipay, suspense) not at all. */
    assert_true(c.balance_writes <= 2);
    assert_int_equal(t_balance(S, "merchant_payable:hot"), -500);
    assert_int_equal(t_balance(S, "channel_clearing:wechatpay"), 500);
    assert_int_equal(t_count(S, "SELECT COUNT(*) FROM account_balance", NULL, 0), 2);
    assert_int_equal(t_count(S, "SELECT COUNT(*) FROM posting", NULL, 0), 104);
    /* The ledger's own invariants hold (these journals have no processed
     * records: that is the engine's invariant, not the ledger's). */
    struct t_checks f = {""};
    int n = 0;
    assert_int_equal(po_ledger_verify(S, t_collect_check, &f, &n, err, sizeof err), PO_OK);
    assert_null(strstr(f.checks, "journal_unbalanced"));
    assert_null(strstr(f.checks, "balance_mismatch"));
}

/* Opens a transaction and posts and flushes one payment of 100 in it. */
static void post_one(struct po_store *s)
{
    char err[PO_ERRBUF_SIZE] = "";
    static struct po_ledger_batch deltas;
    po_ledger_batch_reset(&deltas);
    struct po_journal j = journal("k1", "channel_clearing:wechatpay", "merchant_payable:m1", 100);
    assert_int_equal(po_store_begin(s, err, sizeof err), PO_OK);
    assert_int_equal(po_ledger_post(s, &j, &deltas, err, sizeof err), PO_OK);
    assert_int_equal(po_ledger_flush(s, &deltas, "2026-12-02T00:00:00.000Z", err, sizeof err),
                     PO_OK);
}

static void flush_rolls_back_with_its_transaction(void **state)
{
    post_one(S);
    po_store_rollback(S);
    assert_int_equal(t_count(S, "SELECT COUNT(*) FROM account_balance", NULL, 0), 0);
    assert_int_equal(t_count(S, "SELECT COUNT(*) FROM journal", NULL, 0), 0);
}

static void verify_names_what_is_broken(void **state)
{
    char err[PO_ERRBUF_SIZE] = "";
    post_one(S);
    assert_int_equal(po_store_commit(S, err, sizeof err), PO_OK);
    /* One posting altered: the journal no longer balances, and the cached
     * balance no longer equals the postings. */
    assert_int_equal(po_store_exec_tx(S, "UPDATE posting SET amount = amount + 1 WHERE line_no = 1",
                                      NULL, 0, NULL, err, sizeof err),
                     PO_OK);
    struct t_checks f = {""};
    int n = 0;
    assert_int_equal(po_ledger_verify(S, t_collect_check, &f, &n, err, sizeof err), PO_OK);
    assert_non_null(strstr(f.checks, "journal_unbalanced"));
    assert_non_null(strstr(f.checks, "balance_mismatch"));
    assert_true(n >= 2);
}

int main(int argc, char **argv)
{
    t_fx_backend = t_backend(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(deltas_accumulate_and_are_bounded),
        cmocka_unit_test_setup_teardown(post_then_flush, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(flush_rolls_back_with_its_transaction, t_fx_setup,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(verify_names_what_is_broken, t_fx_setup, t_fx_teardown),
    };
    char name[64];
    snprintf(name, sizeof name, "ledger[%s]", t_fx_backend);
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
