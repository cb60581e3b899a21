/*
 * test_engine.c — the engine's behaviour on one backend (argv[1]):
 * each layer alone is sufficient, the six pitfalls of the seed article,
 * every outcome, refunds, profit sharing, batches, and verify catching
 * broken invariants. Each test gets a fresh database.
 */
#include "../../src/service/service.h"
#include "../support/testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#define S T_S

static int64_t count_key(struct po_store *s, const char *table, const char *key)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s WHERE tenant_id = 't1' AND idem_key = ?",
             table);
    struct po_param p[] = {PO_TEXT(key)};
    return t_count(s, sql, p, 1);
}

static int64_t count_all(struct po_store *s, const char *sql)
{
    return t_count(s, sql, NULL, 0);
}

static void assert_outcome(struct po_outcome o, enum po_outcome_kind k, int layer)
{
    if (o.kind != k || o.layer != layer)
        fprintf(stderr, "got %s layer %d reason %s\n", po_outcome_name(o.kind), o.layer,
                po_reason_name(o.reason));
    assert_int_equal(o.kind, k);
    assert_int_equal(o.layer, layer);
}

/* One credit for 100 CNY: one PAY journal, two postings, the balances. */
static void assert_one_credit(struct po_store *s, int64_t amount)
{
    assert_int_equal(count_all(s, "SELECT COUNT(*) FROM journal WHERE kind = 'PAY'"), 1);
    assert_int_equal(count_all(s, "SELECT COUNT(*) FROM posting"), 2);
    assert_int_equal(t_balance(s, "channel_clearing:wechatpay"), amount);
    assert_int_equal(t_balance(s, "merchant_payable:m1"), -amount);
    assert_int_equal(t_verify(s), 0);
}

static void exec_ok(struct po_store *s, const char *sql)
{
    char err[PO_ERRBUF_SIZE] = "";
    if (po_store_exec(s, sql, NULL, 0, NULL, NULL, err, sizeof err))
        fail_msg("%s: %s", sql, err);
}

/* ---- the happy path and layer 1 ---- */

static void payment_applied_once_then_layer1(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    struct po_event ev = t_pay_event("ORD-1", "4200000001", 100);
    assert_outcome(t_apply(S, NULL, &ev), PO_OUT_APPLIED, 0);
    assert_outcome(t_apply(S, NULL, &ev), PO_OUT_DUPLICATE, 1);
    assert_outcome(t_apply(S, NULL, &ev), PO_OUT_DUPLICATE, 1);
    assert_one_credit(S, 100);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM pay_order WHERE status = 'PAID' AND"
                                  " channel_txn_id = '4200000001'"),
                     1);
    assert_int_equal(count_key(S, "notify_log", "wechatpay:4200000001:PAY_SUCCESS"), 1);
}

/* ---- each layer alone is sufficient ---- */

/* Layer 1 off: the guarded UPDATE alone refuses the second credit, and it
 * is layer 2 (not the unique index) that catches it. */
static void layer2_alone_prevents_double_credit(void **state)
{
    struct po_engine_cfg cfg = {.disabled_layers = PO_ENGINE_NO_LAYER1};
    t_seed_order(S, "ORD-1", 100);
    struct po_event ev = t_pay_event("ORD-1", "4200000001", 100);
    assert_outcome(t_apply(S, &cfg, &ev), PO_OUT_APPLIED, 0);
    for (int i = 0; i < 3; i++)
        assert_outcome(t_apply(S, &cfg, &ev), PO_OUT_DUPLICATE, 2);
    assert_one_credit(S, 100);
}

/* Layers 1 and 2 off: the unique index alone refuses it. */
static void layer3_alone_prevents_double_credit(void **state)
{
    struct po_engine_cfg cfg = {.disabled_layers = PO_ENGINE_NO_LAYER1 | PO_ENGINE_NO_LAYER2};
    t_seed_order(S, "ORD-1", 100);
    struct po_event ev = t_pay_event("ORD-1", "4200000001", 100);
    assert_outcome(t_apply(S, &cfg, &ev), PO_OUT_APPLIED, 0);
    for (int i = 0; i < 3; i++)
        assert_outcome(t_apply(S, &cfg, &ev), PO_OUT_DUPLICATE, 3);
    assert_one_credit(S, 100);
}

/* Profit sharing has no state machine: with layer 1 off, layer 3 alone. */
static void profit_share_layer3_alone(void **state)
{
    struct po_engine_cfg cfg = {.disabled_layers = PO_ENGINE_NO_LAYER1};
    t_seed_order(S, "ORD-1", 100);
    struct po_event pay = t_pay_event("ORD-1", "4200000001", 100);
    assert_outcome(t_apply(S, NULL, &pay), PO_OUT_APPLIED, 0);
    struct po_event share = t_share_event("ORD-1", "30000001", "r1", 10);
    assert_outcome(t_apply(S, &cfg, &share), PO_OUT_APPLIED, 0);
    assert_outcome(t_apply(S, &cfg, &share), PO_OUT_DUPLICATE, 3);
    assert_outcome(t_apply(S, NULL, &share), PO_OUT_DUPLICATE, 1);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM journal WHERE kind = 'PROFIT_SHARE'"), 1);
    assert_int_equal(t_balance(S, "profit_share:r1"), -10);
    assert_int_equal(t_balance(S, "merchant_payable:m1"), -90);
    /* A different receiver of the same sharing order is a different key. */
    struct po_event share2 = t_share_event("ORD-1", "30000001", "r2", 5);
    assert_outcome(t_apply(S, NULL, &share2), PO_OUT_APPLIED, 0);
    assert_int_equal(t_balance(S, "profit_share:r2"), -5);
    assert_int_equal(t_verify(S), 0);
}

static void profit_share_on_unpaid_order_rejected(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    struct po_event share = t_share_event("ORD-1", "30000001", "r1", 10);
    struct po_outcome o = t_apply(S, NULL, &share);
    assert_outcome(o, PO_OUT_REJECTED, 0);
    assert_string_equal(po_reason_name(o.reason), "order_not_paid");
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM journal"), 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM notify_log"), 0);
}

/* ---- the six pitfalls ---- */

/* Pitfall 1: a callback that was processed is never answered as failure,
 * whichever layer catches the repeat. */
static void pitfall_processed_callback_never_answered_failure(void **state)
{
    static const unsigned configs[] = {0, PO_ENGINE_NO_LAYER1,
                                       PO_ENGINE_NO_LAYER1 | PO_ENGINE_NO_LAYER2};
    for (int c = 0; c < 3; c++) {
        char no[32], txn[32];
        snprintf(no, sizeof no, "ORD-%d", c);
        snprintf(txn, sizeof txn, "42000%d", c);
        t_seed_order(S, no, 100);
        struct po_engine_cfg cfg = {.disabled_layers = configs[c]};
        struct po_event ev = t_pay_event(no, txn, 100);
        assert_outcome(t_apply(S, &cfg, &ev), PO_OUT_APPLIED, 0);
        for (int i = 0; i < 5; i++) {
            struct po_outcome o = t_apply(S, &cfg, &ev);
            assert_int_equal(o.kind, PO_OUT_DUPLICATE); /* ack SUCCESS, never FAIL */
        }
    }
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM journal WHERE kind = 'PAY'"), 3);
    assert_int_equal(t_verify(S), 0);
}

/* Pitfall 2: the processed record and the business change are atomic. A
 * failure after the processed record was written (at the journal insert)
 * leaves neither the record nor the state change. */
static int fail_at = -1;
static po_err fail_on_journal(void *ctx, int idx, const char *sql)
{
    (void)ctx;
    (void)idx;
    return fail_at == 1 && strncmp(sql, "INSERT INTO journal", 19) == 0 ? PO_ERR_TRANSIENT : PO_OK;
}

static void pitfall_record_and_business_change_atomic(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    struct po_event ev = t_pay_event("ORD-1", "4200000001", 100);
    fail_at = 1;
    po_store_set_fault_hook(S, fail_on_journal, NULL);
    struct po_outcome o = t_apply(S, NULL, &ev);
    po_store_set_fault_hook(S, NULL, NULL);
    assert_outcome(o, PO_OUT_RETRY, 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM notify_log"), 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM pay_order WHERE status = 'PAYING'"), 1);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM journal"), 0);
    /* The channel's retry then credits exactly once. */
    assert_outcome(t_apply(S, NULL, &ev), PO_OUT_APPLIED, 0);
    assert_outcome(t_apply(S, NULL, &ev), PO_OUT_DUPLICATE, 1);
    assert_one_credit(S, 100);
}

/* Pitfall 3: a unique conflict is a duplicate outcome, not an error. */
static void pitfall_unique_conflict_is_duplicate(void **state)
{
    struct po_engine_cfg cfg = {.disabled_layers = PO_ENGINE_NO_LAYER1 | PO_ENGINE_NO_LAYER2};
    t_seed_order(S, "ORD-1", 100);
    struct po_event ev = t_pay_event("ORD-1", "4200000001", 100);
    assert_outcome(t_apply(S, &cfg, &ev), PO_OUT_APPLIED, 0);
    struct po_outcome o = t_apply(S, &cfg, &ev);
    assert_outcome(o, PO_OUT_DUPLICATE, 3);
    assert_string_equal(po_reason_name(o.reason), "");
    assert_one_credit(S, 100);
}

/* Pitfall 4: an amount mismatch credits nothing, leaves a durable alert,
 * and does not occupy the key (the genuine event still credits). */
static void pitfall_amount_mismatch_credits_nothing_and_alerts(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    struct po_event bad = t_pay_event("ORD-1", "4200000001", 1);
    for (int i = 0; i < 3; i++) {
        struct po_outcome o = t_apply(S, NULL, &bad);
        assert_outcome(o, PO_OUT_REJECTED, 0);
        assert_string_equal(po_reason_name(o.reason), "amount_mismatch");
    }
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM journal"), 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM notify_log"), 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM pay_order WHERE status = 'PAYING'"), 1);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM alert WHERE reason = 'amount_mismatch'"
                                  " AND amount = 1"),
                     1); /* durable, and once despite three deliveries */
    struct po_event good = t_pay_event("ORD-1", "4200000001", 100);
    assert_outcome(t_apply(S, NULL, &good), PO_OUT_APPLIED, 0);
    assert_one_credit(S, 100);
}

/* Pitfall 5: a reconciliation replay uses the same key: a duplicate of the
 * callback, and the callback a duplicate of an earlier replay. */
static void pitfall_reconciliation_replay_is_duplicate(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    t_seed_order(S, "ORD-2", 200);
    struct po_event cb = t_pay_event("ORD-1", "4200000001", 100);
    struct po_event replay = cb;
    replay.source = PO_SRC_RECONCILIATION;
    memcpy(replay.occurred_at, "2026-12-03T02:00:00+08:00", 26);
    assert_outcome(t_apply(S, NULL, &cb), PO_OUT_APPLIED, 0);
    assert_outcome(t_apply(S, NULL, &replay), PO_OUT_DUPLICATE, 1);

    struct po_event q = t_pay_event("ORD-2", "4200000002", 200);
    q.source = PO_SRC_QUERY;
    struct po_event late_cb = t_pay_event("ORD-2", "4200000002", 200);
    assert_outcome(t_apply(S, NULL, &q), PO_OUT_APPLIED, 0);
    assert_outcome(t_apply(S, NULL, &late_cb), PO_OUT_DUPLICATE, 1);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM notify_log WHERE source = 'query'"), 1);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM journal WHERE kind = 'PAY'"), 2);
    assert_int_equal(t_verify(S), 0);
}

/* Pitfall 6 (engine side): the stored key depends only on business fields. */
static void pitfall_key_deterministic_in_storage(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    struct po_event a = t_pay_event("ORD-1", "4200000001", 100);
    assert_outcome(t_apply(S, NULL, &a), PO_OUT_APPLIED, 0);
    assert_int_equal(count_key(S, "notify_log", "wechatpay:4200000001:PAY_SUCCESS"), 1);
    assert_int_equal(count_key(S, "journal", "wechatpay:4200000001:PAY_SUCCESS"), 1);
}

/* ORD-A paid by txn 4200000001, then ORD-B's payment naming the same txn
 * applied with cfg: rejected conflicting_duplicate with its alert, ORD-B
 * still PAYING. Returns ORD-A's event. */
static struct po_event conflict_on_b(void **state, const struct po_engine_cfg *cfg)
{
    t_seed_order(S, "ORD-A", 100);
    t_seed_order(S, "ORD-B", 100);
    struct po_event a = t_pay_event("ORD-A", "4200000001", 100);
    struct po_event b = t_pay_event("ORD-B", "4200000001", 100);
    assert_outcome(t_apply(S, NULL, &a), PO_OUT_APPLIED, 0);
    struct po_outcome o = t_apply(S, cfg, &b);
    assert_outcome(o, PO_OUT_REJECTED, 0);
    assert_string_equal(po_reason_name(o.reason), "conflicting_duplicate");
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM alert WHERE reason ="
                                  " 'conflicting_duplicate' AND out_trade_no = 'ORD-B'"),
                     1);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM pay_order WHERE status = 'PAYING' AND"
                                  " out_trade_no = 'ORD-B'"),
                     1);
    return a;
}

/* A key already recorded for another order is not a duplicate: the bill or
 * a channel naming one transaction for two orders gets an alert, and the
 * first order's credit stands untouched. */
static void same_key_other_order_is_a_conflict(void **state)
{
    struct po_event a = conflict_on_b(state, NULL);
    assert_outcome(t_apply(S, NULL, &a), PO_OUT_DUPLICATE, 1);
    assert_one_credit(S, 100);
}

/* The same conflict when the twin commits after our layer-1 lookup (layer 1
 * off stands for that window): the unique violation at layer 3 must compare
 * the twin, and a different order is a conflict with its alert, never a
 * `duplicate` layer 3 that leaves ORD-B's payment unexplained. */
static void layer3_conflict_compares_the_twin(void **state)
{
    struct po_engine_cfg cfg = {.disabled_layers = PO_ENGINE_NO_LAYER1};
    struct po_event a = conflict_on_b(state, &cfg);
    /* The same event again is still a duplicate. */
    assert_outcome(t_apply(S, &cfg, &a), PO_OUT_DUPLICATE, 2);
    assert_one_credit(S, 100);
}

/* ---- business rejections ---- */

static void rejections_alert_and_change_nothing(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    struct po_event unknown = t_pay_event("NOPE", "4200000009", 100);
    struct po_outcome o = t_apply(S, NULL, &unknown);
    assert_outcome(o, PO_OUT_REJECTED, 0);
    assert_string_equal(po_reason_name(o.reason), "unknown_order");

    struct po_event cur = t_pay_event("ORD-1", "4200000001", 100);
    memcpy(cur.currency, "USD", 4);
    o = t_apply(S, NULL, &cur);
    assert_string_equal(po_reason_name(o.reason), "currency_mismatch");

    struct po_event merch = t_pay_event("ORD-1", "4200000001", 100);
    memcpy(merch.merchant, "m2", 3);
    o = t_apply(S, NULL, &merch);
    assert_string_equal(po_reason_name(o.reason), "merchant_mismatch");

    struct po_event tenant = t_pay_event("ORD-1", "4200000001", 100);
    memcpy(tenant.tenant, "t2", 3); /* another tenant's order space */
    o = t_apply(S, NULL, &tenant);
    assert_string_equal(po_reason_name(o.reason), "unknown_order");

    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM alert"), 4);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM journal"), 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM notify_log"), 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM pay_order WHERE status = 'PAYING'"), 1);
}

static void channel_of_order_enforced(void **state)
{
    char err[PO_ERRBUF_SIZE];
    bool created = false;
    struct po_order_spec spec = {.tenant = "t1",
                                 .merchant = "m1",
                                 .out_trade_no = "ORD-A",
                                 .amount_minor = 100,
                                 .currency = "CNY",
                                 .channel = "alipay"};
    assert_int_equal(po_order_create(S, &spec, &created, err, sizeof err), PO_OK);
    struct po_event ev = t_pay_event("ORD-A", "4200000001", 100); /* wechatpay */
    struct po_outcome o = t_apply(S, NULL, &ev);
    assert_outcome(o, PO_OUT_REJECTED, 0);
    assert_string_equal(po_reason_name(o.reason), "channel_mismatch");
}

/* ---- illegal transitions: suspense ---- */

static void paid_after_close_goes_to_suspense(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    char err[PO_ERRBUF_SIZE];
    int64_t ch = 0;
    struct po_param p[] = {PO_TEXT("ORD-1")};
    assert_int_equal(po_store_exec(S,
                                   "UPDATE pay_order SET status = 'CLOSED' WHERE tenant_id = 't1'"
                                   " AND out_trade_no = ?",
                                   p, PO_NELEM(p), NULL, &ch, err, sizeof err),
                     PO_OK);
    struct po_event ev = t_pay_event("ORD-1", "4200000001", 100);
    struct po_outcome o = t_apply(S, NULL, &ev);
    assert_outcome(o, PO_OUT_SUSPENSE, 0);
    assert_string_equal(po_reason_name(o.reason), "paid_after_close");
    assert_outcome(t_apply(S, NULL, &ev), PO_OUT_DUPLICATE, 1);
    assert_int_equal(t_balance(S, "suspense"), -100);
    assert_int_equal(t_balance(S, "channel_clearing:wechatpay"), 100);
    assert_int_equal(t_balance(S, "merchant_payable:m1"), 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM alert WHERE reason = 'paid_after_close'"),
                     1);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM pay_order WHERE status = 'CLOSED'"), 1);
    assert_int_equal(t_verify(S), 0);
}

static void second_payment_of_paid_order_goes_to_suspense(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    struct po_event a = t_pay_event("ORD-1", "4200000001", 100);
    struct po_event b = t_pay_event("ORD-1", "4200000002", 100); /* the user paid twice */
    assert_outcome(t_apply(S, NULL, &a), PO_OUT_APPLIED, 0);
    struct po_outcome o = t_apply(S, NULL, &b);
    assert_outcome(o, PO_OUT_SUSPENSE, 0);
    assert_string_equal(po_reason_name(o.reason), "duplicate_payment");
    assert_int_equal(t_balance(S, "channel_clearing:wechatpay"), 200);
    assert_int_equal(t_balance(S, "merchant_payable:m1"), -100);
    assert_int_equal(t_balance(S, "suspense"), -100);
    assert_int_equal(t_verify(S), 0);
}

/* ---- a payment parked in suspense, refunded (issue 13 item 9) ---- */

#define DUP_KEY "wechatpay:4200000002:PAY_SUCCESS"
#define DUP_ALERT DUP_KEY "|duplicate_payment"

/* ORD-1 paid (4200000001), then paid again (4200000002): 100 in suspense. */
static void paid_twice(struct po_store *s)
{
    t_seed_order(s, "ORD-1", 100);
    struct po_event a = t_pay_event("ORD-1", "4200000001", 100);
    struct po_event b = t_pay_event("ORD-1", "4200000002", 100);
    assert_outcome(t_apply(s, NULL, &a), PO_OUT_APPLIED, 0);
    assert_outcome(t_apply(s, NULL, &b), PO_OUT_SUSPENSE, 0);
}

/* The operator's action; its return, and r. */
#define srefund(...) srefund_in(S, __VA_ARGS__)
#define assert_audit(...) assert_audit_in(S, __VA_ARGS__)
static po_err srefund_in(struct po_store *s, const char *alert, const char *no,
                         struct po_suspense_refund *r, char *err)
{
    err[0] = '\0';
    return po_alert_refund(&(struct po_door){s, NULL}, NULL, NULL, "t1", alert, no, "ops",
                           "the payer paid twice", r, err, PO_ERRBUF_SIZE);
}

static void assert_audit_in(struct po_store *s, const char *alert, const char *actions)
{
    char got[256] = "";
    struct po_rows r;
    char err[PO_ERRBUF_SIZE] = "";
    struct po_param p[] = {PO_TEXT(alert)};
    assert_int_equal(po_store_exec(s,
                                   "SELECT action FROM alert_action WHERE tenant_id = 't1' AND"
                                   " alert_key = ? ORDER BY seq",
                                   p, 1, &r, NULL, err, sizeof err),
                     PO_OK);
    for (int i = 0; i < r.nrows; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? " " : "",
                 po_rows_get(&r, i, 0));
    po_rows_free(&r);
    assert_string_equal(got, actions);
}

static void suspense_refund_returns_the_money_once(void **state)
{
    paid_twice(S);
    struct po_suspense_refund r;
    char err[PO_ERRBUF_SIZE];
    assert_int_equal(srefund(DUP_ALERT, "SR-1", &r, err), PO_OK);
    assert_true(r.created);
    assert_string_equal(r.channel, "wechatpay");
    assert_string_equal(r.txn_id, "4200000002");
    assert_int_equal(r.amount, 100);
    assert_string_equal(r.status, "PROCESSING");
    assert_string_equal(r.submit_state, "pending"); /* no master key here: serve submits it */
    /* Recorded, audited, acknowledged; no money moved, nothing reserved. */
    assert_int_equal(t_balance(S, "suspense"), -100);
    assert_int_equal(count_all(S, "SELECT refund_reserved + refunded_amount FROM pay_order"), 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM refund WHERE suspense_key = '" DUP_KEY
                                  "' AND txn_id = '4200000002' AND amount = 100"),
                     1);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM alert WHERE state = 'acknowledged' AND"
                                  " state_by = 'ops'"),
                     1);
    assert_audit(DUP_ALERT, "refund");
    assert_int_equal(t_verify(S), 0);
    /* The same number again is the same refund; another is refused while
     * SR-1 is live; the order's own refunds cannot take the number. */
    assert_int_equal(srefund(DUP_ALERT, "SR-1", &r, err), PO_OK);
    assert_false(r.created);
    assert_int_equal(srefund(DUP_ALERT, "SR-2", &r, err), PO_ERR_CONFLICT);
    assert_non_null(strstr(err, "SR-1"));
    assert_int_equal(po_refund_create(S, "t1", "ORD-1", "SR-1", 100, err, sizeof err),
                     PO_ERR_CONFLICT);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM refund"), 1);
    assert_audit(DUP_ALERT, "refund");

    /* The channel's success, through the engine with the refund's key. */
    struct po_event ok = t_refund_event(PO_EV_REFUND_SUCCESS, "ORD-1", "SR-1", "5030000009", 100);
    assert_outcome(t_apply(S, NULL, &ok), PO_OUT_APPLIED, 0);
    assert_outcome(t_apply(S, NULL, &ok), PO_OUT_DUPLICATE, 1);
    assert_int_equal(t_balance(S, "suspense"), 0);
    assert_int_equal(t_balance(S, "channel_clearing:wechatpay"), 100);
    assert_int_equal(t_balance(S, "merchant_payable:m1"), -100); /* the merchant keeps its sale */
    assert_int_equal(count_all(S, "SELECT refund_reserved + refunded_amount FROM pay_order"), 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM pay_order WHERE status = 'PAID'"), 1);
    assert_int_equal(
        count_all(S,
                  "SELECT COUNT(*) FROM journal WHERE kind = 'REFUND' AND out_refund_no = 'SR-1'"),
        1);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM alert WHERE alert_key = '" DUP_ALERT
                                  "' AND state = 'resolved' AND state_by = 'payonce'"),
                     1);
    assert_audit(DUP_ALERT, "refund refunded");
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM outbox_event WHERE type ="
                                  " 'suspense.refunded'"),
                     1);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM outbox_event WHERE type ="
                                  " 'refund.succeeded'"),
                     0);
    assert_int_equal(t_verify(S), 0);
    /* Resolved now: a new number is refused, the old one still answers. */
    assert_int_equal(srefund(DUP_ALERT, "SR-3", &r, err), PO_ERR_CONFLICT);
    assert_non_null(strstr(err, "resolved"));
    assert_int_equal(srefund(DUP_ALERT, "SR-1", &r, err), PO_OK);
    assert_false(r.created);
    assert_string_equal(r.status, "SUCCESS");
}

static void suspense_refund_closed_then_another(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    exec_ok(S, "UPDATE pay_order SET status = 'CLOSED' WHERE out_trade_no = 'ORD-1'");
    struct po_event pay = t_pay_event("ORD-1", "4200000001", 100);
    assert_outcome(t_apply(S, NULL, &pay), PO_OUT_SUSPENSE, 0);
    const char *alert = "wechatpay:4200000001:PAY_SUCCESS|paid_after_close";
    struct po_suspense_refund r;
    char err[PO_ERRBUF_SIZE];
    assert_int_equal(srefund(alert, "SR-1", &r, err), PO_OK);
    /* Closed by the channel: nothing to release, the money stays parked. */
    struct po_event closed =
        t_refund_event(PO_EV_REFUND_CLOSED, "ORD-1", "SR-1", "5030000001", 100);
    assert_outcome(t_apply(S, NULL, &closed), PO_OUT_APPLIED, 0);
    assert_int_equal(t_balance(S, "suspense"), -100);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM alert WHERE state = 'acknowledged'"), 1);
    assert_int_equal(t_verify(S), 0);
    /* A closed refund does not block another number. */
    assert_int_equal(srefund(alert, "SR-2", &r, err), PO_OK);
    assert_true(r.created);
    struct po_event ok = t_refund_event(PO_EV_REFUND_SUCCESS, "ORD-1", "SR-2", "5030000002", 100);
    assert_outcome(t_apply(S, NULL, &ok), PO_OUT_APPLIED, 0);
    assert_int_equal(t_balance(S, "suspense"), 0);
    assert_int_equal(t_balance(S, "channel_clearing:wechatpay"), 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM pay_order WHERE status = 'CLOSED'"), 1);
    assert_audit(alert, "refund refund refunded");
    assert_int_equal(t_verify(S), 0);
}

static void suspense_refund_refusals(void **state)
{
    paid_twice(S);
    t_seed_order(S, "ORD-2", 100);
    t_seed_refund(S, "ORD-1", "R-1", 30);
    struct po_event unknown = t_pay_event("ORD-9", "4200000009", 100);
    assert_outcome(t_apply(S, NULL, &unknown), PO_OUT_REJECTED, 0);
    struct po_suspense_refund r;
    char err[PO_ERRBUF_SIZE];
    /* No money in suspense behind an unknown_order alert. */
    assert_int_equal(srefund("wechatpay:4200000009:PAY_SUCCESS|unknown_order", "SR-1", &r, err),
                     PO_ERR_INVALID);
    assert_non_null(strstr(err, "holds no money in suspense"));
    assert_int_equal(srefund("wechatpay:nope:PAY_SUCCESS|duplicate_payment", "SR-1", &r, err),
                     PO_ERR_NOT_FOUND);
    assert_int_equal(srefund(DUP_ALERT, "bad number!", &r, err), PO_ERR_INVALID);
    assert_int_equal(po_alert_refund(&(struct po_door){S, NULL}, NULL, NULL, "t1", DUP_ALERT,
                                     "SR-1", "ops", "", &r, err, sizeof err),
                     PO_ERR_INVALID); /* a note is required */
    /* The order's refund's number. */
    assert_int_equal(srefund(DUP_ALERT, "R-1", &r, err), PO_ERR_CONFLICT);
    assert_non_null(strstr(err, "exists for order ORD-1"));
    /* Another tenant cannot see the alert. */
    assert_int_equal(po_alert_refund(&(struct po_door){S, NULL}, NULL, NULL, "t2", DUP_ALERT,
                                     "SR-1", "ops", "x", &r, err, sizeof err),
                     PO_ERR_NOT_FOUND);
    /* A resolved alert is not refunded. */
    bool changed = false;
    assert_int_equal(po_alert_act(S, "t1", DUP_ALERT, PO_ALERT_RESOLVE, "ops",
                                  "refunded in the merchant platform", &changed, err, sizeof err),
                     PO_OK);
    assert_int_equal(srefund(DUP_ALERT, "SR-1", &r, err), PO_ERR_CONFLICT);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM refund WHERE suspense_key IS NOT NULL"), 0);
    assert_int_equal(t_balance(S, "suspense"), -100);
    assert_int_equal(t_verify(S), 0);
}

/* A payment refused for its amount has no money on the books: refunding it
 * first parks it in suspense through the engine with its own key, then
 * returns it like any suspense payment; the order stays payable. */
static void refused_payment_parked_then_refunded(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    struct po_event short_pay = t_pay_event("ORD-1", "4200000007", 90);
    assert_outcome(t_apply(S, NULL, &short_pay), PO_OUT_REJECTED, 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM journal"), 0);
    const char *alert = "wechatpay:4200000007:PAY_SUCCESS|amount_mismatch";
    struct po_suspense_refund r;
    char err[PO_ERRBUF_SIZE];
    assert_int_equal(srefund(alert, "SR-1", &r, err), PO_OK);
    assert_true(r.created);
    assert_int_equal(r.amount, 90);
    assert_string_equal(r.txn_id, "4200000007");
    assert_int_equal(t_balance(S, "suspense"), -90);
    assert_int_equal(t_balance(S, "channel_clearing:wechatpay"), 90);
    assert_int_equal(count_key(S, "notify_log", "wechatpay:4200000007:PAY_SUCCESS"), 1);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM pay_order WHERE status = 'PAYING'"), 1);
    assert_int_equal(t_verify(S), 0);
    /* Asked again (another operator): parked once, the same refund. */
    assert_int_equal(srefund(alert, "SR-1", &r, err), PO_OK);
    assert_false(r.created);
    assert_int_equal(t_balance(S, "suspense"), -90);
    /* The channel redelivers the refused payment: now a duplicate. */
    assert_outcome(t_apply(S, NULL, &short_pay), PO_OUT_DUPLICATE, 1);
    struct po_event ok = t_refund_event(PO_EV_REFUND_SUCCESS, "ORD-1", "SR-1", "5030000007", 90);
    assert_outcome(t_apply(S, NULL, &ok), PO_OUT_APPLIED, 0);
    assert_int_equal(t_balance(S, "suspense"), 0);
    assert_int_equal(t_balance(S, "channel_clearing:wechatpay"), 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM alert WHERE state = 'resolved' AND"
                                  " state_by = 'payonce'"),
                     1);
    /* The order still takes its genuine payment. */
    struct po_event pay = t_pay_event("ORD-1", "4200000008", 100);
    assert_outcome(t_apply(S, NULL, &pay), PO_OUT_APPLIED, 0);
    assert_int_equal(t_balance(S, "merchant_payable:m1"), -100);
    assert_int_equal(t_verify(S), 0);
    /* A refused payment whose order now fits it is credited, not refunded
     * (here: the currency mismatch of an order paid in the wrong currency
     * cannot be fixed, so it is parked as well). */
    t_seed_order(S, "ORD-2", 100);
    struct po_event usd = t_pay_event("ORD-2", "4200000009", 100);
    memcpy(usd.currency, "USD", 4);
    assert_outcome(t_apply(S, NULL, &usd), PO_OUT_REJECTED, 0);
    assert_int_equal(srefund("wechatpay:4200000009:PAY_SUCCESS|currency_mismatch", "SR-2", &r, err),
                     PO_OK);
    assert_string_equal(r.currency, "USD");
    assert_int_equal(t_verify(S), 0);
}

/* A store failure anywhere in the refund's application (here: resolving
 * its alert, the last statement) rolls all of it back: retry, nothing
 * moved; the retry applies it once. */
static bool fail_alert_update;
static po_err fail_on_alert(void *ctx, int idx, const char *sql)
{
    (void)ctx;
    (void)idx;
    return fail_alert_update && strncmp(sql, "UPDATE alert SET state = 'resolved'", 35) == 0
               ? PO_ERR_TRANSIENT
               : PO_OK;
}

static void suspense_refund_store_fault_moves_nothing(void **state)
{
    paid_twice(S);
    struct po_suspense_refund r;
    char err[PO_ERRBUF_SIZE];
    assert_int_equal(srefund(DUP_ALERT, "SR-1", &r, err), PO_OK);
    struct po_event ok = t_refund_event(PO_EV_REFUND_SUCCESS, "ORD-1", "SR-1", "5030000009", 100);
    fail_alert_update = true;
    po_store_set_fault_hook(S, fail_on_alert, NULL);
    struct po_outcome o = t_apply(S, NULL, &ok);
    po_store_set_fault_hook(S, NULL, NULL);
    fail_alert_update = false;
    assert_outcome(o, PO_OUT_RETRY, 0);
    assert_int_equal(t_balance(S, "suspense"), -100);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM journal WHERE kind = 'REFUND'"), 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM refund WHERE status = 'PROCESSING'"), 1);
    assert_int_equal(count_key(S, "notify_log", "wechatpay:5030000009:REFUND_SUCCESS"), 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM alert WHERE state = 'acknowledged'"), 1);
    assert_audit(DUP_ALERT, "refund");
    assert_int_equal(t_verify(S), 0);
    assert_outcome(t_apply(S, NULL, &ok), PO_OUT_APPLIED, 0);
    assert_int_equal(t_balance(S, "suspense"), 0);
    assert_audit(DUP_ALERT, "refund refunded");
    assert_int_equal(t_verify(S), 0);
}

/* A refund the channel made after payonce had closed it (refund_after_close,
 * parked in suspense), accepted by an operator as the order's. */
#define LATE_ALERT "wechatpay:5030000001:REFUND_SUCCESS|refund_after_close"

static void refund_closed_then_succeeded(struct po_store *s, int64_t amount)
{
    t_seed_order(s, "ORD-1", 100);
    struct po_event pay = t_pay_event("ORD-1", "4200000001", 100);
    assert_outcome(t_apply(s, NULL, &pay), PO_OUT_APPLIED, 0);
    t_seed_refund(s, "ORD-1", "R-1", amount);
    struct po_event closed =
        t_refund_event(PO_EV_REFUND_CLOSED, "ORD-1", "R-1", "5030000001", amount);
    assert_outcome(t_apply(s, NULL, &closed), PO_OUT_APPLIED, 0);
}

static void refund_after_close_accepted_once(void **state)
{
    refund_closed_then_succeeded(S, 30);
    struct po_event late = t_refund_event(PO_EV_REFUND_SUCCESS, "ORD-1", "R-1", "5030000001", 30);
    assert_outcome(t_apply(S, NULL, &late), PO_OUT_SUSPENSE, 0);
    assert_int_equal(t_balance(S, "suspense"), 30);
    struct po_outcome o;
    bool resolved = false;
    char err[PO_ERRBUF_SIZE] = "";
    assert_int_equal(po_alert_accept(&(struct po_door){S, NULL}, "t1", LATE_ALERT, "ops",
                                     "the channel confirms it", &o, &resolved, err, sizeof err),
                     PO_OK);
    assert_outcome(o, PO_OUT_APPLIED, 0);
    assert_true(resolved);
    /* The net effect of an ordinary refund of 30. */
    assert_int_equal(t_balance(S, "suspense"), 0);
    assert_int_equal(t_balance(S, "channel_clearing:wechatpay"), 70);
    assert_int_equal(t_balance(S, "merchant_payable:m1"), -70);
    assert_int_equal(count_all(S, "SELECT refunded_amount * 1000 + refund_reserved FROM pay_order"),
                     30030);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM refund WHERE status = 'SUCCESS'"), 1);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM alert WHERE alert_key = '" LATE_ALERT
                                  "' AND state = 'resolved' AND state_by = 'ops'"),
                     1);
    assert_audit(LATE_ALERT, "accept resolve");
    assert_int_equal(
        count_all(S, "SELECT COUNT(*) FROM outbox_event WHERE type = 'refund.succeeded'"), 1);
    assert_int_equal(t_verify(S), 0);
    /* Once: the alert is resolved, and the acceptance itself is a duplicate. */
    assert_int_equal(po_alert_accept(&(struct po_door){S, NULL}, "t1", LATE_ALERT, "ops", "again",
                                     &o, &resolved, err, sizeof err),
                     PO_ERR_CONFLICT);
    struct po_event again = late;
    again.accept_after_close = true;
    assert_outcome(t_apply(S, NULL, &again), PO_OUT_DUPLICATE, 1);
    assert_int_equal(t_balance(S, "suspense"), 0);
    assert_int_equal(t_verify(S), 0);
}

static void refund_after_close_accept_never_refunds_more_than_paid(void **state)
{
    refund_closed_then_succeeded(S, 100);
    t_seed_refund(S, "ORD-1", "R-2", 80); /* the released amount, taken again */
    struct po_event late = t_refund_event(PO_EV_REFUND_SUCCESS, "ORD-1", "R-1", "5030000001", 100);
    assert_outcome(t_apply(S, NULL, &late), PO_OUT_SUSPENSE, 0);
    struct po_outcome o;
    bool resolved = true;
    char err[PO_ERRBUF_SIZE] = "";
    assert_int_equal(po_alert_accept(&(struct po_door){S, NULL}, "t1", LATE_ALERT, "ops",
                                     "the channel confirms it", &o, &resolved, err, sizeof err),
                     PO_OK);
    assert_int_equal(o.kind, PO_OUT_REJECTED);
    assert_string_equal(po_reason_name(o.reason), "refund_exceeds_reserved");
    assert_false(resolved);
    /* Nothing moved: still parked, R-1 still closed, R-2's reservation alone. */
    assert_int_equal(t_balance(S, "suspense"), 100);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM refund WHERE status = 'CLOSED'"), 1);
    assert_int_equal(count_all(S, "SELECT refund_reserved FROM pay_order"), 80);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM alert WHERE alert_key = '" LATE_ALERT
                                  "' AND state = 'open'"),
                     1);
    assert_audit(LATE_ALERT, "accept");
    /* Only a refund_after_close alert is accepted. */
    struct po_event unknown = t_pay_event("ORD-9", "4200000009", 100);
    assert_outcome(t_apply(S, NULL, &unknown), PO_OUT_REJECTED, 0);
    assert_int_equal(po_alert_accept(&(struct po_door){S, NULL}, "t1",
                                     "wechatpay:4200000009:PAY_SUCCESS|unknown_order", "ops", "x",
                                     &o, &resolved, err, sizeof err),
                     PO_ERR_INVALID);
    assert_int_equal(t_verify(S), 0);
}

/* ---- refunds ---- */

static void refund_success_posts_reversal_once(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    struct po_event pay = t_pay_event("ORD-1", "4200000001", 100);
    assert_outcome(t_apply(S, NULL, &pay), PO_OUT_APPLIED, 0);
    t_seed_refund(S, "ORD-1", "R-1", 30);
    struct po_event rf = t_refund_event(PO_EV_REFUND_SUCCESS, "ORD-1", "R-1", "5030000001", 30);
    assert_outcome(t_apply(S, NULL, &rf), PO_OUT_APPLIED, 0);
    assert_outcome(t_apply(S, NULL, &rf), PO_OUT_DUPLICATE, 1);
    struct po_engine_cfg no1 = {.disabled_layers = PO_ENGINE_NO_LAYER1};
    assert_outcome(t_apply(S, &no1, &rf), PO_OUT_DUPLICATE, 2);
    struct po_engine_cfg no12 = {.disabled_layers = PO_ENGINE_NO_LAYER1 | PO_ENGINE_NO_LAYER2};
    assert_outcome(t_apply(S, &no12, &rf), PO_OUT_DUPLICATE, 3);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM journal WHERE kind = 'REFUND'"), 1);
    assert_int_equal(t_balance(S, "channel_clearing:wechatpay"), 70);
    assert_int_equal(t_balance(S, "merchant_payable:m1"), -70);
    assert_int_equal(count_all(S, "SELECT refunded_amount FROM pay_order"), 30);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM refund WHERE status = 'SUCCESS'"), 1);
    assert_int_equal(t_verify(S), 0);
}

static void refund_closed_releases_reservation(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    struct po_event pay = t_pay_event("ORD-1", "4200000001", 100);
    assert_outcome(t_apply(S, NULL, &pay), PO_OUT_APPLIED, 0);
    t_seed_refund(S, "ORD-1", "R-1", 100);
    char err[PO_ERRBUF_SIZE];
    /* Fully reserved: a second request cannot reserve more. */
    assert_int_equal(po_refund_create(S, "t1", "ORD-1", "R-2", 1, err, sizeof err),
                     PO_ERR_CONFLICT);
    struct po_event closed = t_refund_event(PO_EV_REFUND_CLOSED, "ORD-1", "R-1", "5030000001", 100);
    assert_outcome(t_apply(S, NULL, &closed), PO_OUT_APPLIED, 0);
    assert_int_equal(count_all(S, "SELECT refund_reserved FROM pay_order"), 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM journal WHERE kind = 'REFUND'"), 0);
    /* The money is free again. */
    assert_int_equal(po_refund_create(S, "t1", "ORD-1", "R-2", 40, err, sizeof err), PO_OK);
    /* A SUCCESS for the closed refund: money left anyway -> suspense. */
    struct po_event late = t_refund_event(PO_EV_REFUND_SUCCESS, "ORD-1", "R-1", "5030000001", 100);
    struct po_outcome o = t_apply(S, NULL, &late);
    assert_outcome(o, PO_OUT_SUSPENSE, 0);
    assert_string_equal(po_reason_name(o.reason), "refund_after_close");
    assert_int_equal(t_balance(S, "suspense"), 100);
    assert_int_equal(t_balance(S, "channel_clearing:wechatpay"), 0);
    assert_int_equal(t_verify(S), 0);
}

static void refund_abnormal_then_success(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    struct po_event pay = t_pay_event("ORD-1", "4200000001", 100);
    assert_outcome(t_apply(S, NULL, &pay), PO_OUT_APPLIED, 0);
    t_seed_refund(S, "ORD-1", "R-1", 50);
    struct po_event ab = t_refund_event(PO_EV_REFUND_ABNORMAL, "ORD-1", "R-1", "5030000001", 50);
    struct po_event ok = t_refund_event(PO_EV_REFUND_SUCCESS, "ORD-1", "R-1", "5030000001", 50);
    assert_outcome(t_apply(S, NULL, &ab), PO_OUT_APPLIED, 0);
    assert_outcome(t_apply(S, NULL, &ab), PO_OUT_DUPLICATE, 1);
    assert_outcome(t_apply(S, NULL, &ok), PO_OUT_APPLIED, 0);
    /* A stale CLOSED after SUCCESS moves nothing. */
    struct po_event cl = t_refund_event(PO_EV_REFUND_CLOSED, "ORD-1", "R-1", "5030000001", 50);
    struct po_outcome o = t_apply(S, NULL, &cl);
    assert_outcome(o, PO_OUT_REJECTED, 0);
    assert_string_equal(po_reason_name(o.reason), "stale_refund_status");
    assert_int_equal(t_balance(S, "merchant_payable:m1"), -50);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM refund WHERE status = 'SUCCESS'"), 1);
    assert_int_equal(t_verify(S), 0);
}

static void refund_checks(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    struct po_event pay = t_pay_event("ORD-1", "4200000001", 100);
    assert_outcome(t_apply(S, NULL, &pay), PO_OUT_APPLIED, 0);
    t_seed_refund(S, "ORD-1", "R-1", 30);
    struct po_event wrong = t_refund_event(PO_EV_REFUND_SUCCESS, "ORD-1", "R-1", "503", 31);
    assert_string_equal(po_reason_name(t_apply(S, NULL, &wrong).reason), "amount_mismatch");
    struct po_event unknown = t_refund_event(PO_EV_REFUND_SUCCESS, "ORD-1", "R-9", "504", 30);
    assert_string_equal(po_reason_name(t_apply(S, NULL, &unknown).reason), "unknown_refund");
    t_seed_order(S, "ORD-2", 100);
    struct po_event other = t_refund_event(PO_EV_REFUND_SUCCESS, "ORD-2", "R-1", "503", 30);
    assert_string_equal(po_reason_name(t_apply(S, NULL, &other).reason), "order_mismatch");
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM journal WHERE kind = 'REFUND'"), 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM alert"), 3);
}

/* ---- batches ---- */

static void batch_isolates_events_by_savepoint(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    t_seed_order(S, "ORD-2", 200);
    struct po_event ev[5] = {
        t_pay_event("ORD-1", "4200000001", 100),
        t_pay_event("ORD-1", "4200000001", 100), /* twin in the same batch */
        t_pay_event("ORD-2", "4200000002", 999), /* amount mismatch */
        t_pay_event("ORD-2", "4200000002", 200),
        t_pay_event("NOPE", "4200000003", 5),
    };
    struct po_outcome out[5];
    po_engine_apply_batch(S, NULL, ev, 5, out);
    assert_outcome(out[0], PO_OUT_APPLIED, 0);
    assert_outcome(out[1], PO_OUT_DUPLICATE, 1);
    assert_outcome(out[2], PO_OUT_REJECTED, 0);
    assert_outcome(out[3], PO_OUT_APPLIED, 0);
    assert_outcome(out[4], PO_OUT_REJECTED, 0);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM journal WHERE kind = 'PAY'"), 2);
    assert_int_equal(t_balance(S, "merchant_payable:m1"), -300);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM alert"), 2);
    assert_int_equal(t_verify(S), 0);
}

/* A batch with a twin when layer 1 is off: the twin is caught by layer 2
 * inside the same transaction. */
static void batch_twin_without_layer1(void **state)
{
    struct po_engine_cfg cfg = {.disabled_layers = PO_ENGINE_NO_LAYER1 | PO_ENGINE_NO_LAYER2};
    t_seed_order(S, "ORD-1", 100);
    struct po_event ev[2] = {t_pay_event("ORD-1", "4200000001", 100),
                             t_pay_event("ORD-1", "4200000001", 100)};
    struct po_outcome out[2];
    po_engine_apply_batch(S, &cfg, ev, 2, out);
    assert_outcome(out[0], PO_OUT_APPLIED, 0);
    assert_outcome(out[1], PO_OUT_DUPLICATE, 3);
    assert_one_credit(S, 100);
}

/* Fails the n-th "INSERT INTO journal" of every transaction (counted
 * from its BEGIN, statement 0) with a store error. */
struct nth_journal {
    int n, seen;
};
static po_err fail_nth_journal(void *ctx, int idx, const char *sql)
{
    struct nth_journal *f = ctx;
    if (idx == 0)
        f->seen = 0;
    if (strstr(sql, "INSERT INTO journal") && ++f->seen == f->n)
        return PO_ERR_STORE;
    return PO_OK;
}

/* One batch where one event fails its business check, one hits a unique
 * violation and one has a store error on its own statement: the others
 * commit, and each gets its own outcome. Layers 1 and 2 are off so that
 * the replay reaches the unique index; the store error hits the second
 * journal written event by event (the fifth event's). */
static void batch_each_failure_stays_its_own(void **state)
{
    struct po_engine_cfg cfg = {.disabled_layers = PO_ENGINE_NO_LAYER1 | PO_ENGINE_NO_LAYER2};
    t_seed_order(S, "ORD-1", 100);
    t_seed_order(S, "ORD-2", 200);
    t_seed_order(S, "ORD-3", 300);
    t_seed_order(S, "ORD-4", 400);
    struct po_event first = t_pay_event("ORD-2", "4200000002", 200);
    assert_outcome(t_apply(S, NULL, &first), PO_OUT_APPLIED, 0);
    struct po_event ev[4] = {
        t_pay_event("ORD-1", "4200000001", 100), /* applied */
        t_pay_event("ORD-3", "4200000003", 999), /* business check: amount */
        t_pay_event("ORD-2", "4200000002", 200), /* the replay: unique violation */
        t_pay_event("ORD-4", "4200000004", 400), /* its own store error */
    };
    struct po_outcome out[4];
    struct nth_journal f = {.n = 2};
    po_store_set_fault_hook(S, fail_nth_journal, &f);
    po_engine_apply_batch(S, &cfg, ev, 4, out);
    po_store_set_fault_hook(S, NULL, NULL);
    assert_outcome(out[0], PO_OUT_APPLIED, 0);
    assert_outcome(out[1], PO_OUT_REJECTED, 0);
    assert_string_equal(po_reason_name(out[1].reason), "amount_mismatch");
    assert_outcome(out[2], PO_OUT_DUPLICATE, 3);
    assert_outcome(out[3], PO_OUT_RETRY, 0);
    assert_string_equal(po_reason_name(out[3].reason), "store_error");
    /* What committed: ORD-1 credited, ORD-3's alert, nothing of ORD-4. */
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM journal WHERE kind = 'PAY'"), 2);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM alert WHERE out_trade_no = 'ORD-3'"), 1);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM pay_order WHERE status = 'PAID'"), 2);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM notify_log WHERE out_trade_no = 'ORD-4'"),
                     0);
    assert_int_equal(t_verify(S), 0);
    /* The channel redelivers the one that was retried: credited once. */
    assert_outcome(t_apply(S, NULL, &ev[3]), PO_OUT_APPLIED, 0);
    assert_outcome(t_apply(S, NULL, &ev[3]), PO_OUT_DUPLICATE, 1);
    assert_int_equal(t_balance(S, "merchant_payable:m1"), -700);
    assert_int_equal(t_verify(S), 0);
}

/* The set-based path and event by event agree: a batch of 200 payments, a
 * replay of half of them in the next batch, twins inside a batch and
 * payments of closed orders. */
static void batch_large_mixed(void **state)
{
    enum { N = 200 };
    static struct po_event ev[N];
    static struct po_outcome out[N];
    char no[32], txn[32];
    for (int i = 0; i < N; i++) {
        snprintf(no, sizeof no, "BIG-%d", i);
        snprintf(txn, sizeof txn, "42%08d", i);
        t_seed_order(S, no, 100 + i);
        ev[i] = t_pay_event(no, txn, 100 + i);
    }
    char err[PO_ERRBUF_SIZE] = "";
    assert_int_equal(po_store_exec_tx(S,
                                      "UPDATE pay_order SET status = 'CLOSED' WHERE out_trade_no"
                                      " IN ('BIG-7', 'BIG-8')",
                                      NULL, 0, NULL, err, sizeof err),
                     PO_OK);
    po_engine_apply_batch(S, NULL, ev, N, out);
    int64_t expect = 0;
    for (int i = 0; i < N; i++) {
        if (i == 7 || i == 8) {
            assert_outcome(out[i], PO_OUT_SUSPENSE, 0);
            continue;
        }
        assert_outcome(out[i], PO_OUT_APPLIED, 0);
        expect += 100 + i;
    }
    /* The next batch: every other one again, twice each. */
    for (int i = 0; i < N / 2; i++)
        ev[i] = ev[2 * i], ev[N / 2 + i] = ev[2 * i];
    po_engine_apply_batch(S, NULL, ev, N, out);
    for (int i = 0; i < N; i++)
        if (strcmp(ev[i].out_trade_no, "BIG-8") != 0)
            assert_int_equal(out[i].kind, PO_OUT_DUPLICATE);
    assert_int_equal(t_balance(S, "merchant_payable:m1"), -expect);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM journal WHERE kind = 'PAY'"), N - 2);
    assert_int_equal(t_verify(S), 0);
}

/* A batch of payments in four round trips on PostgreSQL — BEGIN with the
 * read (R1), the guarded UPDATE (W1), the processed records, journals,
 * postings and events in one pipelined stretch, the balances with COMMIT
 * in another — whatever its size; the first batch of a connection also
 * prepares its statements. The credits are all there. (SQLite counts
 * statements: nine.) */
static void batch_round_trips(void **state)
{
    enum { N = 8 };
    struct po_event ev[N];
    struct po_outcome out[N];
    char no[2][N][32], txn[2][N][32];
    bool pg = strcmp(po_store_backend(S), "postgres") == 0;
    uint64_t trips[2];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            snprintf(no[round][i], sizeof no[round][i], "RT-%d-%d", round, i);
            snprintf(txn[round][i], sizeof txn[round][i], "42%d%07d", round, i);
            t_seed_order(S, no[round][i], 100);
            ev[i] = t_pay_event(no[round][i], txn[round][i], 100);
        }
        uint64_t before = po_store_round_trips(S);
        po_engine_apply_batch(S, NULL, ev, N, out);
        trips[round] = po_store_round_trips(S) - before;
        for (int i = 0; i < N; i++)
            assert_outcome(out[i], PO_OUT_APPLIED, 0);
    }
    if (pg)
        assert_int_equal(trips[1], 4);
    else
        assert_int_equal(trips[1], 9);
    assert_int_equal(t_balance(S, "merchant_payable:m1"), -2 * N * 100);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM journal WHERE kind = 'PAY'"), 2 * N);
    assert_int_equal(count_all(S, "SELECT COUNT(*) FROM outbox_event"), 2 * N);
    assert_int_equal(t_verify(S), 0);
}

/* ---- verify must be able to fail ---- */

static void verify_detects_broken_invariants(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    t_seed_order(S, "ORD-2", 100);
    struct po_event a = t_pay_event("ORD-1", "4200000001", 100);
    struct po_event b = t_pay_event("ORD-2", "4200000002", 100);
    assert_outcome(t_apply(S, NULL, &a), PO_OUT_APPLIED, 0);
    assert_outcome(t_apply(S, NULL, &b), PO_OUT_APPLIED, 0);
    assert_int_equal(t_verify(S), 0);

    exec_ok(S, "UPDATE account_balance SET balance = balance + 1 WHERE account = 'suspense'"
               " OR account = 'merchant_payable:m1'");
    assert_int_equal(t_verify(S), 1); /* balance_mismatch */
    exec_ok(S, "UPDATE account_balance SET balance = balance - 1 WHERE account ="
               " 'merchant_payable:m1'");
    assert_int_equal(t_verify(S), 0);

    exec_ok(S, "UPDATE posting SET amount = -99 WHERE idem_key ="
               " 'wechatpay:4200000001:PAY_SUCCESS' AND line_no = 2");
    assert_true(t_verify(S) >= 2); /* journal_unbalanced + balance_mismatch */
    exec_ok(S, "UPDATE posting SET amount = -100 WHERE idem_key ="
               " 'wechatpay:4200000001:PAY_SUCCESS' AND line_no = 2");

    exec_ok(S, "DELETE FROM posting WHERE idem_key = 'wechatpay:4200000002:PAY_SUCCESS'");
    exec_ok(S, "DELETE FROM journal WHERE idem_key = 'wechatpay:4200000002:PAY_SUCCESS'");
    /* paid order without journal, record without journal, balance mismatch */
    assert_true(t_verify(S) >= 3);
}

static void verify_detects_refund_reservation_drift(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    struct po_event a = t_pay_event("ORD-1", "4200000001", 100);
    assert_outcome(t_apply(S, NULL, &a), PO_OUT_APPLIED, 0);
    t_seed_refund(S, "ORD-1", "R-1", 40);
    assert_int_equal(t_verify(S), 0);
    /* A reservation without its refund (or a refund without its
     * reservation) would let refunds exceed the payment. */
    exec_ok(S, "UPDATE pay_order SET refund_reserved = 100 WHERE out_trade_no = 'ORD-1'");
    assert_int_equal(t_verify(S), 1); /* refund_reserved */
    exec_ok(S, "UPDATE pay_order SET refund_reserved = 40 WHERE out_trade_no = 'ORD-1'");
    assert_int_equal(t_verify(S), 0);
}

/* ---- verify's own mutation test ---- */

/* Every invariant `payonce verify` claims is broken once, on a state that
 * has each kind of row (a payment, a refund that succeeded, one pending, an
 * order unpaid); verify must name it, and be clean again once it is put
 * back. A check that can never fire would show here. */
static void verify_names_every_broken_invariant(void **state)
{
    t_seed_order(S, "ORD-1", 100);
    t_seed_order(S, "ORD-2", 100);
    struct po_event pay = t_pay_event("ORD-1", "4200000001", 100);
    assert_outcome(t_apply(S, NULL, &pay), PO_OUT_APPLIED, 0);
    t_seed_refund(S, "ORD-1", "R-1", 30);
    struct po_event rf = t_refund_event(PO_EV_REFUND_SUCCESS, "ORD-1", "R-1", "5030000001", 30);
    assert_outcome(t_apply(S, NULL, &rf), PO_OUT_APPLIED, 0);
    t_seed_refund(S, "ORD-1", "R-2", 20);
    /* a second payment of ORD-1, parked in suspense and refunded (SR-1) */
    struct po_event twice = t_pay_event("ORD-1", "4200000003", 100);
    assert_outcome(t_apply(S, NULL, &twice), PO_OUT_SUSPENSE, 0);
    struct po_suspense_refund sr;
    char serr[PO_ERRBUF_SIZE];
    assert_int_equal(
        srefund("wechatpay:4200000003:PAY_SUCCESS|duplicate_payment", "SR-1", &sr, serr), PO_OK);
    struct po_event back = t_refund_event(PO_EV_REFUND_SUCCESS, "ORD-1", "SR-1", "5030000003", 100);
    assert_outcome(t_apply(S, NULL, &back), PO_OUT_APPLIED, 0);
    assert_int_equal(t_verify(S), 0);
#define PAYKEY "'wechatpay:4200000001:PAY_SUCCESS'"
    static const struct {
        const char *check, *breaks, *restores;
    } cases[] = {
        {"journal_unbalanced",
         "UPDATE posting SET amount = amount + 1 WHERE idem_key = " PAYKEY " AND amount > 0",
         "UPDATE posting SET amount = amount - 1 WHERE idem_key = " PAYKEY " AND amount > 0"},
        {"balance_mismatch",
         "UPDATE account_balance SET balance = balance + 1 WHERE account = 'merchant_payable:m1'",
         "UPDATE account_balance SET balance = balance - 1 WHERE account = 'merchant_payable:m1'"},
        {"paid_order_journals", "UPDATE pay_order SET status = 'PAID' WHERE out_trade_no = 'ORD-2'",
         "UPDATE pay_order SET status = 'PAYING' WHERE out_trade_no = 'ORD-2'"},
        /* the finding: a PAID order's amount raised by one */
        {"payment_amount", "UPDATE pay_order SET amount = amount + 1 WHERE out_trade_no = 'ORD-1'",
         "UPDATE pay_order SET amount = amount - 1 WHERE out_trade_no = 'ORD-1'"},
        {"payment_amount", "UPDATE posting SET currency = 'USD' WHERE idem_key = " PAYKEY,
         "UPDATE posting SET currency = 'CNY' WHERE idem_key = " PAYKEY},
        {"unpaid_order_has_payment",
         "UPDATE pay_order SET status = 'CLOSED' WHERE out_trade_no = 'ORD-1'",
         "UPDATE pay_order SET status = 'PAID' WHERE out_trade_no = 'ORD-1'"},
        {"applied_without_journal",
         "INSERT INTO notify_log (tenant_id, idem_key, channel, event_type, source, outcome,"
         " out_trade_no, amount, currency, first_seen_at) VALUES ('t1', 'wechatpay:X:PAY_SUCCESS',"
         " 'wechatpay', 'PAY_SUCCESS', 'callback', 'applied', 'ORD-2', 100, 'CNY',"
         " '2026-12-02T00:00:00.000Z')",
         "DELETE FROM notify_log WHERE idem_key = 'wechatpay:X:PAY_SUCCESS'"},
        {"journal_without_record",
         "UPDATE notify_log SET idem_key = idem_key || '.moved' WHERE idem_key = " PAYKEY,
         "UPDATE notify_log SET idem_key = " PAYKEY " WHERE idem_key = " PAYKEY " || '.moved'"},
        {"refund_totals",
         "UPDATE pay_order SET refunded_amount = refunded_amount - 1 WHERE out_trade_no = 'ORD-1'",
         "UPDATE pay_order SET refunded_amount = refunded_amount + 1 WHERE out_trade_no = 'ORD-1'"},
        {"refund_reserved",
         "UPDATE pay_order SET refund_reserved = refund_reserved + 1 WHERE out_trade_no = 'ORD-1'",
         "UPDATE pay_order SET refund_reserved = refund_reserved - 1 WHERE out_trade_no = 'ORD-1'"},
        {"refund_journals", "UPDATE refund SET status = 'SUCCESS' WHERE out_refund_no = 'R-2'",
         "UPDATE refund SET status = 'PROCESSING' WHERE out_refund_no = 'R-2'"},
        {"refund_amount", "UPDATE refund SET amount = amount + 1 WHERE out_refund_no = 'R-1'",
         "UPDATE refund SET amount = amount - 1 WHERE out_refund_no = 'R-1'"},
        /* SR-1 pointing at a payment that parked nothing */
        {"suspense_refunds",
         "UPDATE refund SET suspense_key = " PAYKEY " WHERE out_refund_no = 'SR-1'",
         "UPDATE refund SET suspense_key = 'wechatpay:4200000003:PAY_SUCCESS' WHERE"
         " out_refund_no = 'SR-1'"},
        /* SR-1 taken for an order's refund: it debited suspense */
        {"refund_source", "UPDATE refund SET suspense_key = NULL WHERE out_refund_no = 'SR-1'",
         "UPDATE refund SET suspense_key = 'wechatpay:4200000003:PAY_SUCCESS' WHERE"
         " out_refund_no = 'SR-1'"},
        /* R-1 (an order's refund) posted as if from suspense */
        {"refund_source",
         "UPDATE posting SET account = 'suspense' WHERE idem_key ="
         " 'wechatpay:5030000001:REFUND_SUCCESS' AND amount > 0",
         "UPDATE posting SET account = 'merchant_payable:m1' WHERE idem_key ="
         " 'wechatpay:5030000001:REFUND_SUCCESS' AND amount > 0"},
    };
    for (size_t i = 0; i < PO_NELEM(cases); i++) {
        exec_ok(S, cases[i].breaks);
        struct t_checks f = {""};
        int n = 0;
        char err[PO_ERRBUF_SIZE] = "", want[64];
        assert_int_equal(po_ledger_verify(S, t_collect_check, &f, &n, err, sizeof err), PO_OK);
        snprintf(want, sizeof want, " %s ", cases[i].check);
        if (!strstr(f.checks, want))
            fail_msg("broken %s: verify named only [%s]", cases[i].check, f.checks);
        exec_ok(S, cases[i].restores);
        if (t_verify(S) != 0)
            fail_msg("%s not restored", cases[i].check);
    }
    /* duplicate_key: the schema itself refuses a second record or journal
     * of one key; verify checks it too, for a database restored by hand. */
    char err[PO_ERRBUF_SIZE] = "";
    assert_int_not_equal(
        po_store_exec_tx(S,
                         "INSERT INTO journal (tenant_id, idem_key, kind, out_trade_no, currency,"
                         " created_at) VALUES ('t1', " PAYKEY ", 'PAY', 'ORD-1', 'CNY', 'x')",
                         NULL, 0, NULL, err, sizeof err),
        PO_OK);
    assert_int_equal(t_verify(S), 0);
#undef PAYKEY
}

int main(int argc, char **argv)
{
    t_fx_backend = t_backend(argc, argv);
    po_log_set_level(PO_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(payment_applied_once_then_layer1, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(layer2_alone_prevents_double_credit, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(layer3_alone_prevents_double_credit, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(profit_share_layer3_alone, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(profit_share_on_unpaid_order_rejected, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(pitfall_processed_callback_never_answered_failure,
                                        t_fx_setup_seeded, t_fx_teardown),
        cmocka_unit_test_setup_teardown(pitfall_record_and_business_change_atomic,
                                        t_fx_setup_seeded, t_fx_teardown),
        cmocka_unit_test_setup_teardown(pitfall_unique_conflict_is_duplicate, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(pitfall_amount_mismatch_credits_nothing_and_alerts,
                                        t_fx_setup_seeded, t_fx_teardown),
        cmocka_unit_test_setup_teardown(pitfall_reconciliation_replay_is_duplicate,
                                        t_fx_setup_seeded, t_fx_teardown),
        cmocka_unit_test_setup_teardown(pitfall_key_deterministic_in_storage, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(layer3_conflict_compares_the_twin, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(same_key_other_order_is_a_conflict, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(rejections_alert_and_change_nothing, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(channel_of_order_enforced, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(paid_after_close_goes_to_suspense, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(second_payment_of_paid_order_goes_to_suspense,
                                        t_fx_setup_seeded, t_fx_teardown),
        cmocka_unit_test_setup_teardown(suspense_refund_returns_the_money_once, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(suspense_refund_closed_then_another, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(suspense_refund_refusals, t_fx_setup_seeded, t_fx_teardown),
        cmocka_unit_test_setup_teardown(suspense_refund_store_fault_moves_nothing,
                                        t_fx_setup_seeded, t_fx_teardown),
        cmocka_unit_test_setup_teardown(refused_payment_parked_then_refunded, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(refund_after_close_accepted_once, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(refund_after_close_accept_never_refunds_more_than_paid,
                                        t_fx_setup_seeded, t_fx_teardown),
        cmocka_unit_test_setup_teardown(refund_success_posts_reversal_once, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(verify_names_every_broken_invariant, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(refund_closed_releases_reservation, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(refund_abnormal_then_success, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(refund_checks, t_fx_setup_seeded, t_fx_teardown),
        cmocka_unit_test_setup_teardown(verify_detects_refund_reservation_drift, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(batch_isolates_events_by_savepoint, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(batch_each_failure_stays_its_own, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(batch_round_trips, t_fx_setup_seeded, t_fx_teardown),
        cmocka_unit_test_setup_teardown(batch_large_mixed, t_fx_setup_seeded, t_fx_teardown),
        cmocka_unit_test_setup_teardown(batch_twin_without_layer1, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(verify_detects_broken_invariants, t_fx_setup_seeded,
                                        t_fx_teardown),
    };
    char name[64];
    snprintf(name, sizeof name, "engine[%s]", t_fx_backend);
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
