/*
 * test_console_triage.c — the console for triage (service/console/console.h,
 * issue 45 item 3) on each backend (argv[1]): prefix search as a range of
 * the tenant's index, paged across tenants; substring search reading at
 * most PO_CONSOLE_SCAN_MAX rows a request and going on where it stopped;
 * the lists by state and their counts against what was seeded, paged by
 * cursor, refusing a cursor that is not one; the reconciliation days'
 * status; the channels' keys with their expiry; the redrive committed
 * with its audit row or not at all; a journal entry's and an alert's
 * page; the overview fitted to the data's span. (Deliveries naming their
 * event: test_console's deliveries_are_kept_per_order.)
 */
#include "../support/testutil.h"

#include "../../src/crypto/crypto.h"
#include "../../src/service/service.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define S T_S

static void exec(struct po_store *s, const char *sql)
{
    char err[PO_ERRBUF_SIZE] = "";
    if (po_store_exec_tx(s, sql, NULL, 0, NULL, err, sizeof err))
        fail_msg("%s: %s", sql, err);
}

/* An order of tenant (expiring at expires, Unix s; 0: never) in the
 * caller's transaction. */
static void order_in(struct po_store *s, const char *tenant, const char *no, int64_t expires)
{
    char err[PO_ERRBUF_SIZE] = "";
    bool created = false;
    struct po_order_spec o = {.tenant = tenant,
                              .merchant = "m1",
                              .out_trade_no = no,
                              .amount_minor = 100,
                              .currency = "CNY",
                              .expires_at = expires};
    if (po_order_insert(s, &o, &created, NULL, 0, err, sizeof err) || !created)
        fail_msg("order %s: %s", no, err);
}

static void tenant2(struct po_store *s)
{
    char err[PO_ERRBUF_SIZE] = "";
    assert_int_equal(po_tenant_add(s, "t2", "Tenant Two", NULL, err, sizeof err), PO_OK);
    assert_int_equal(po_merchant_add(s, "t2", "m1", NULL, err, sizeof err), PO_OK);
}

/* The members name of the page's items, space-separated. */
static void names(json_t *page, const char *a, const char *b, char *out, size_t cap)
{
    size_t i, n = 0;
    json_t *it;
    out[0] = '\0';
    json_array_foreach(json_object_get(page, "items"), i, it)
    {
        int k = snprintf(out + n, cap - n, "%s%s%s%s", n ? " " : "",
                         json_string_value(json_object_get(it, a)), b ? ":" : "",
                         b ? json_string_value(json_object_get(it, b)) : "");
        if (k > 0)
            n += (size_t)k;
    }
}

static void prefix_search_pages_across_tenants(void **state)
{
    char err[PO_ERRBUF_SIZE] = "", got[512];
    tenant2(S);
    assert_int_equal(po_store_begin(S, err, sizeof err), PO_OK);
    /* '-' sorts before '0': 20-A < 20-B < 200; 2 and 120 do not start with 20 */
    const char *t1[] = {"200", "20-B", "2", "120", "X-2003", "20-A"};
    for (size_t i = 0; i < sizeof t1 / sizeof t1[0]; i++)
        order_in(S, "t1", t1[i], 0);
    order_in(S, "t2", "2077", 0);
    assert_int_equal(po_store_commit(S, err, sizeof err), PO_OK);
    json_t *p = NULL;
    struct po_console_page pg = {.after = "", .limit = 2};
    assert_int_equal(po_console_find(S, NULL, PO_FIND_ORDER, false, "20", &pg, &p), PO_OK);
    names(p, "tenant", "out_trade_no", got, sizeof got);
    assert_string_equal(got, "t1:20-A t1:20-B");
    assert_true(pg.more);
    assert_string_equal(pg.next, "t1 20-B");
    json_decref(p);
    char next[PO_CONSOLE_CURSOR_SIZE];
    snprintf(next, sizeof next, "%s", pg.next);
    pg = (struct po_console_page){.after = next, .limit = 2};
    assert_int_equal(po_console_find(S, NULL, PO_FIND_ORDER, false, "20", &pg, &p), PO_OK);
    names(p, "tenant", "out_trade_no", got, sizeof got);
    assert_string_equal(got, "t1:200 t2:2077"); /* on into the next tenant */
    assert_false(pg.more);
    json_decref(p);
    /* one tenant only */
    pg = (struct po_console_page){.after = "", .limit = 20};
    assert_int_equal(po_console_find(S, "t2", PO_FIND_ORDER, false, "20", &pg, &p), PO_OK);
    names(p, "tenant", "out_trade_no", got, sizeof got);
    assert_string_equal(got, "t2:2077");
    json_decref(p);
    /* refused, nothing read: a cursor of another tenant, one that is not
     * a cursor, a q that is not an id, a page of 0 or 101 */
    const char *bad[] = {"t1 20-A", "t2 20-A 20-B x y", "t2 a'b", "t2\t2077"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pg = (struct po_console_page){.after = bad[i], .limit = 20};
        p = NULL;
        assert_int_equal(po_console_find(S, "t2", PO_FIND_ORDER, false, "20", &pg, &p),
                         PO_ERR_INVALID);
        assert_null(p);
    }
    pg = (struct po_console_page){.after = "", .limit = 20};
    assert_int_equal(po_console_find(S, NULL, PO_FIND_ORDER, false, "2 0", &pg, &p),
                     PO_ERR_INVALID);
    pg.limit = 0;
    assert_int_equal(po_console_find(S, NULL, PO_FIND_ORDER, false, "20", &pg, &p), PO_ERR_INVALID);
    pg.limit = PO_CONSOLE_PAGE_MAX + 1;
    assert_int_equal(po_console_find(S, NULL, PO_FIND_ORDER, false, "20", &pg, &p), PO_ERR_INVALID);
}

static void transaction_and_refund_numbers_by_prefix(void **state)
{
    t_seed_order(S, "O-1", 500);
    t_seed_order(S, "O-2", 700);
    struct po_event e1 = t_pay_event("O-1", "4200-AAA", 500),
                    e2 = t_pay_event("O-2", "4200-AAB", 700);
    assert_int_equal(t_apply(S, NULL, &e1).kind, PO_OUT_APPLIED);
    assert_int_equal(t_apply(S, NULL, &e2).kind, PO_OUT_APPLIED);
    t_seed_refund(S, "O-1", "RF-20-1", 100);
    t_seed_refund(S, "O-2", "RF-21-1", 100);
    json_t *p = NULL;
    char got[256];
    struct po_console_page pg = {.after = "", .limit = 1};
    assert_int_equal(po_console_find(S, NULL, PO_FIND_TXN, false, "4200-AA", &pg, &p), PO_OK);
    names(p, "out_trade_no", "channel_txn_id", got, sizeof got);
    assert_string_equal(got, "O-1:4200-AAA");
    assert_string_equal(pg.next, "t1 wechatpay 4200-AAA"); /* tenant, channel, id */
    json_decref(p);
    char next[PO_CONSOLE_CURSOR_SIZE];
    snprintf(next, sizeof next, "%s", pg.next);
    pg = (struct po_console_page){.after = next, .limit = 1};
    assert_int_equal(po_console_find(S, NULL, PO_FIND_TXN, false, "4200-AA", &pg, &p), PO_OK);
    names(p, "out_trade_no", NULL, got, sizeof got);
    assert_string_equal(got, "O-2");
    assert_false(pg.more);
    json_decref(p);
    pg = (struct po_console_page){.after = "", .limit = 10};
    assert_int_equal(po_console_find(S, NULL, PO_FIND_REFUND, false, "RF-20", &pg, &p), PO_OK);
    names(p, "out_refund_no", "out_trade_no", got, sizeof got);
    assert_string_equal(got, "RF-20-1:O-1");
    json_decref(p);
    assert_int_equal(po_console_find(S, NULL, PO_FIND_REFUND, true, "-1", &pg, &p), PO_OK);
    names(p, "out_refund_no", NULL, got, sizeof got);
    assert_string_equal(got, "RF-20-1 RF-21-1");
    json_decref(p);
}

/* A substring search reads at most PO_CONSOLE_SCAN_MAX orders a request,
 * newest first, and its cursor goes on where the reading stopped: the one
 * match, the oldest order, is on the second page. */
static void substring_search_is_bounded_and_goes_on(void **state)
{
    char err[PO_ERRBUF_SIZE] = "", no[32], got[256];
    int n = PO_CONSOLE_SCAN_MAX + 50;
    t_seed_order(S, "OLD-ZZ-1", 100); /* the oldest */
    struct timespec pause = {0, 5000000};
    nanosleep(&pause, NULL);
    assert_int_equal(po_store_begin(S, err, sizeof err), PO_OK);
    for (int i = 0; i < n; i++) {
        snprintf(no, sizeof no, "N-%05d", i);
        order_in(S, "t1", no, 0);
    }
    assert_int_equal(po_store_commit(S, err, sizeof err), PO_OK);
    json_t *p = NULL;
    struct po_console_page pg = {.after = "", .limit = 20};
    assert_int_equal(po_console_find(S, NULL, PO_FIND_ORDER, true, "ZZ", &pg, &p), PO_OK);
    assert_int_equal(json_array_size(json_object_get(p, "items")), 0);
    assert_int_equal(json_integer_value(json_object_get(p, "scanned")), PO_CONSOLE_SCAN_MAX);
    assert_true(pg.more); /* not found yet, not "none" */
    json_decref(p);
    char next[PO_CONSOLE_CURSOR_SIZE];
    snprintf(next, sizeof next, "%s", pg.next);
    pg = (struct po_console_page){.after = next, .limit = 20};
    assert_int_equal(po_console_find(S, NULL, PO_FIND_ORDER, true, "ZZ", &pg, &p), PO_OK);
    names(p, "out_trade_no", NULL, got, sizeof got);
    assert_string_equal(got, "OLD-ZZ-1");
    assert_int_equal(json_integer_value(json_object_get(p, "scanned")),
                     n + 1 - PO_CONSOLE_SCAN_MAX);
    assert_false(pg.more);
    json_decref(p);
    /* a full page of matches: the next one goes on after the last shown,
     * none twice */
    pg = (struct po_console_page){.after = "", .limit = 5};
    assert_int_equal(po_console_find(S, "t1", PO_FIND_ORDER, true, "-0204", &pg, &p), PO_OK);
    names(p, "out_trade_no", NULL, got, sizeof got);
    assert_string_equal(got, "N-02049 N-02048 N-02047 N-02046 N-02045");
    assert_true(pg.more);
    json_decref(p);
    snprintf(next, sizeof next, "%s", pg.next);
    pg = (struct po_console_page){.after = next, .limit = 5};
    assert_int_equal(po_console_find(S, "t1", PO_FIND_ORDER, true, "-0204", &pg, &p), PO_OK);
    names(p, "out_trade_no", NULL, got, sizeof got);
    assert_string_equal(got, "N-02044 N-02043 N-02042 N-02041 N-02040");
    json_decref(p);
}

/* A delivery row of event ev (its outbox row made too) to endpoint ep. */
static void delivery(struct po_store *s, const char *ev, const char *ep, const char *state,
                     int attempts, const char *next_at)
{
    char sql[1024];
    snprintf(sql, sizeof sql,
             "INSERT INTO outbox_event (tenant_id, event_id, type, object_id, obj_seq, payload,"
             " created_at) VALUES ('t1', '%s', 'payment.credited', 'O-1', 1,"
             " '{\"out_trade_no\":\"O-1\"}', '2026-01-01T00:00:00.000Z')"
             " ON CONFLICT (tenant_id, event_id) DO NOTHING",
             ev);
    exec(s, sql);
    snprintf(sql, sizeof sql,
             "INSERT INTO webhook_delivery (tenant_id, event_id, endpoint_id, object_id, obj_seq,"
             " created_at, state, attempts, next_at, updated_at) VALUES ('t1', '%s', '%s', 'O-1',"
             " 1, '%s', '%s', %d, '%s', '%s')",
             ev, ep, next_at, state, attempts, next_at, next_at);
    exec(s, sql);
}

static void endpoint(struct po_store *s, const char *id, bool removed)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT INTO webhook_endpoint (tenant_id, endpoint_id, url, events, secret,"
             " created_at, removed_at) VALUES ('t1', '%s', 'https://t1.example/h', '*', 'plain:x',"
             " '2026-01-01T00:00:00.000Z', %s)",
             id, removed ? "'2026-01-02T00:00:00.000Z'" : "NULL");
    exec(s, sql);
}

static int64_t count_of(json_t *counts, const char *list)
{
    return json_integer_value(json_object_get(json_object_get(counts, list), "count"));
}

static void lists_by_state_with_counts(void **state)
{
    char err[PO_ERRBUF_SIZE] = "", got[512], now[PO_TIME_SIZE];
    int64_t t = (int64_t)time(NULL);
    tenant2(S);
    assert_int_equal(po_store_begin(S, err, sizeof err), PO_OK);
    order_in(S, "t1", "P-1", 0);
    order_in(S, "t1", "P-2", 0);
    order_in(S, "t1", "E-1", t - 60); /* past its expiry */
    order_in(S, "t1", "E-2", t + 3600);
    assert_int_equal(po_store_commit(S, err, sizeof err), PO_OK);
    t_seed_order(S, "O-1", 500);
    struct po_event e = t_pay_event("O-1", "TX-1", 500);
    assert_int_equal(t_apply(S, NULL, &e).kind, PO_OUT_APPLIED); /* PAID: in no list */
    t_seed_refund(S, "O-1", "R-1", 100);
    endpoint(S, "we_a", false);
    delivery(S, "evt_1", "we_a", "pending", 0, "2026-01-01T00:01:00.000Z"); /* not failed yet */
    delivery(S, "evt_2", "we_a", "pending", 2, "2026-01-01T00:02:00.000Z"); /* failing */
    delivery(S, "evt_3", "we_a", "dead", 9, "2026-01-01T00:03:00.000Z");
    delivery(S, "evt_4", "we_a", "dead", 9, "2026-01-01T00:04:00.000Z");
    delivery(S, "evt_5", "we_a", "delivered", 1, "2026-01-01T00:05:00.000Z");
    po_clock_now_iso(now, sizeof now);
    json_t *c = NULL;
    assert_int_equal(po_console_counts(S, NULL, now, &c), PO_OK);
    assert_int_equal(count_of(c, "orders_paying"), 4);
    assert_int_equal(count_of(c, "orders_expired"), 1);
    assert_int_equal(count_of(c, "refunds_processing"), 1);
    assert_int_equal(count_of(c, "deliveries_failing"), 1);
    assert_int_equal(count_of(c, "dead_letters"), 2);
    assert_false(json_is_true(json_object_get(json_object_get(c, "orders_paying"), "capped")));
    json_decref(c);
    assert_int_equal(po_console_counts(S, "t2", now, &c), PO_OK);
    for (int l = 0; l < PO_LIST_COUNT; l++)
        assert_int_equal(count_of(c, po_console_list_name((enum po_console_list)l)), 0);
    json_decref(c);
    /* the lists: what was counted, paged */
    json_t *p = NULL;
    struct po_console_page pg = {.after = "", .limit = 3};
    /* (oldest first: orders made in the same millisecond by number) */
    char first[512], all[1100];
    assert_int_equal(po_console_list(S, NULL, PO_LIST_ORDERS_PAYING, now, &pg, &p), PO_OK);
    assert_int_equal(json_array_size(json_object_get(p, "items")), 3);
    names(p, "out_trade_no", NULL, first, sizeof first);
    assert_true(pg.more);
    json_decref(p);
    char next[PO_CONSOLE_CURSOR_SIZE];
    snprintf(next, sizeof next, "%s", pg.next);
    pg = (struct po_console_page){.after = next, .limit = 3};
    assert_int_equal(po_console_list(S, NULL, PO_LIST_ORDERS_PAYING, now, &pg, &p), PO_OK);
    assert_int_equal(json_array_size(json_object_get(p, "items")), 1);
    names(p, "out_trade_no", NULL, got, sizeof got);
    assert_false(pg.more);
    json_decref(p);
    /* the two pages: each PAYING order once */
    snprintf(all, sizeof all, "%s %s", first, got);
    const char *each[] = {"P-1", "P-2", "E-1", "E-2"};
    for (size_t i = 0; i < 4; i++) {
        const char *at = strstr(all, each[i]);
        assert_non_null(at);
        assert_null(strstr(at + 1, each[i]));
    }
    struct {
        enum po_console_list l;
        const char *a, *b, *want;
    } lists[] = {{PO_LIST_ORDERS_EXPIRED, "out_trade_no", NULL, "E-1"},
                 {PO_LIST_REFUNDS_PROCESSING, "out_refund_no", "out_trade_no", "R-1:O-1"},
                 {PO_LIST_DELIVERIES_FAILING, "event_id", "type", "evt_2:payment.credited"},
                 {PO_LIST_DEAD_LETTERS, "event_id", NULL, "evt_4 evt_3"}};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        pg = (struct po_console_page){.after = "", .limit = 10};
        assert_int_equal(po_console_list(S, NULL, lists[i].l, now, &pg, &p), PO_OK);
        names(p, lists[i].a, lists[i].b, got, sizeof got);
        assert_string_equal(got, lists[i].want);
        json_decref(p);
    }
    /* a list's cursor is its own: another's is refused */
    pg = (struct po_console_page){.after = "t1 2026-01-01 P-1", .limit = 10};
    assert_int_equal(po_console_list(S, NULL, PO_LIST_DEAD_LETTERS, now, &pg, &p), PO_ERR_INVALID);
    /* one endpoint's dead letters, newest first, a page of one */
    pg = (struct po_console_page){.after = "", .limit = 1};
    assert_int_equal(po_console_dead_letters(S, "t1", "we_a", &pg, &p), PO_OK);
    names(p, "event_id", NULL, got, sizeof got);
    assert_string_equal(got, "evt_4");
    assert_true(pg.more);
    json_decref(p);
    /* the endpoints with their counts */
    assert_int_equal(po_console_endpoints(S, NULL, &p), PO_OK);
    assert_int_equal(json_array_size(p), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(p, 0), "pending")), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(p, 0), "dead")), 2);
    json_decref(p);
}

static void redrive_commits_with_its_audit_or_not_at_all(void **state)
{
    char err[PO_ERRBUF_SIZE] = "";
    int64_t n = -1;
    endpoint(S, "we_a", false);
    endpoint(S, "we_gone", true);
    delivery(S, "evt_1", "we_a", "dead", 9, "2026-01-01T00:01:00.000Z");
    delivery(S, "evt_2", "we_a", "dead", 9, "2026-01-02T00:01:00.000Z");
    delivery(S, "evt_3", "we_gone", "dead", 9, "2026-01-01T00:01:00.000Z");
    const char *dead = "SELECT COUNT(*) FROM webhook_delivery WHERE state = 'dead'";
    const char *audited = "SELECT COUNT(*) FROM console_action";
    struct po_console_actor who = {"alice", "the receiver is back"}, mute = {"alice", ""};
    /* refused, nothing done, nothing audited */
    assert_int_equal(po_console_redrive(S, "t1", "we_a", NULL, NULL, &mute, &n, err, sizeof err),
                     PO_ERR_INVALID);
    assert_int_equal(
        po_console_redrive(S, "t1", "we_a", NULL, "yesterday", &who, &n, err, sizeof err),
        PO_ERR_INVALID);
    assert_int_equal(po_console_redrive(S, "t1", "we_gone", NULL, NULL, &who, &n, err, sizeof err),
                     PO_ERR_NOT_FOUND);
    assert_int_equal(po_console_redrive(S, "t1", "we_x", NULL, NULL, &who, &n, err, sizeof err),
                     PO_ERR_NOT_FOUND);
    assert_int_equal(t_count(S, dead, NULL, 0), 3);
    assert_int_equal(t_count(S, audited, NULL, 0), 0);
    /* the audit cannot be written: the redrive does not happen either */
    exec(S, "ALTER TABLE console_action RENAME TO console_action_away");
    assert_int_not_equal(po_console_redrive(S, "t1", "we_a", NULL, NULL, &who, &n, err, sizeof err),
                         PO_OK);
    exec(S, "ALTER TABLE console_action_away RENAME TO console_action");
    assert_int_equal(t_count(S, dead, NULL, 0), 3);
    /* since a time: only the newer one */
    assert_int_equal(po_console_redrive(S, "t1", "we_a", NULL, "2026-01-02T00:00:00Z", &who, &n,
                                        err, sizeof err),
                     PO_OK);
    assert_int_equal(n, 1);
    assert_int_equal(t_count(S, dead, NULL, 0), 2);
    /* then the rest */
    assert_int_equal(po_console_redrive(S, "t1", "we_a", NULL, NULL, &who, &n, err, sizeof err),
                     PO_OK);
    assert_int_equal(n, 1);
    assert_int_equal(
        t_count(S,
                "SELECT COUNT(*) FROM webhook_delivery WHERE state = 'pending' AND attempts = 0"
                " AND endpoint_id = 'we_a'",
                NULL, 0),
        2);
    assert_int_equal(t_count(S, dead, NULL, 0), 1); /* the removed endpoint's stays */
    assert_int_equal(t_count(S,
                             "SELECT COUNT(*) FROM console_action WHERE tenant_id = 't1' AND"
                             " actor = 'alice' AND action = 'webhook_redrive' AND target = 'we_a'"
                             " AND note = 'the receiver is back' AND result LIKE '1 dead%'",
                             NULL, 0),
                     2);
    /* the endpoint's page shows them, newest first */
    json_t *p = NULL;
    struct po_console_page pg = {.after = "", .limit = 10};
    assert_int_equal(po_console_endpoint(S, "t1", "we_a", &pg, &p), PO_OK);
    json_t *acts = json_object_get(p, "actions");
    assert_int_equal(json_array_size(acts), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(acts, 0), "result")),
                        "1 dead deliveries sent again (all of them)");
    json_decref(p);
}

static void recon_days_told_apart(void **state)
{
    exec(S,
         "INSERT INTO recon_day (tenant_id, channel, bill_date, state, attempts, last_error,"
         " last_fetch, updated_at) VALUES"
         " ('t1', 'wechatpay', '2026-01-05', 'done', 1, NULL, 'imported', '2026-01-06'),"
         " ('t1', 'wechatpay', '2026-01-04', 'none', 1, NULL, 'none', '2026-01-05'),"
         " ('t1', 'wechatpay', '2026-01-03', 'pending', 3, 'no_answer', 'failed', '2026-01-04'),"
         " ('t1', 'wechatpay', '2026-01-02', 'pending', 1, 'not_ready', 'not_ready', '2026-01-03'),"
         " ('t1', 'alipay', '2026-01-02', 'pending', 1, NULL, NULL, '2026-01-03')");
    json_t *p = NULL;
    char got[512];
    struct {
        const char *filter, *want;
    } cases[] = {{NULL, "2026-01-05:done 2026-01-04:done 2026-01-03:failed 2026-01-02:pending "
                        "2026-01-02:pending"},
                 {"failed", "2026-01-03:failed"},
                 {"pending", "2026-01-02:pending 2026-01-02:pending"},
                 {"done", "2026-01-05:done 2026-01-04:done"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct po_console_page pg = {.after = "", .limit = 10};
        assert_int_equal(po_console_recon_days(S, NULL, cases[i].filter, &pg, &p), PO_OK);
        names(p, "bill_date", "status", got, sizeof got);
        assert_string_equal(got, cases[i].want);
        json_decref(p);
    }
    /* paged newest first: wechatpay before alipay on the same day (descending) */
    struct po_console_page pg = {.after = "", .limit = 4};
    assert_int_equal(po_console_recon_days(S, "t1", NULL, &pg, &p), PO_OK);
    assert_string_equal(pg.next, "2026-01-02 t1 wechatpay");
    json_decref(p);
    char next[PO_CONSOLE_CURSOR_SIZE];
    snprintf(next, sizeof next, "%s", pg.next);
    pg = (struct po_console_page){.after = next, .limit = 4};
    assert_int_equal(po_console_recon_days(S, "t1", NULL, &pg, &p), PO_OK);
    names(p, "channel", "status", got, sizeof got);
    assert_string_equal(got, "alipay:pending");
    json_decref(p);
    pg = (struct po_console_page){.after = "", .limit = 4};
    assert_int_equal(po_console_recon_days(S, NULL, "lost", &pg, &p), PO_ERR_INVALID);
}

static void keys_with_their_expiry(void **state)
{
    int64_t now = (int64_t)time(NULL);
    struct po_privkey *k = NULL;
    char *pem = NULL, sql[8192];
    assert_int_equal(po_privkey_generate(&k), PO_OK);
    assert_int_equal(po_cert_self_signed_valid(k, "0A0B", "alipay", now - 86400, now - 3600, &pem),
                     PO_OK);
    po_privkey_free(k);
    json_t *alipay = json_pack("{s:[{s:s, s:s}]}", "alipay_certs", "sn", "SN-OLD", "pem", pem);
    char *acfg = json_dumps(alipay, JSON_COMPACT);
    json_decref(alipay);
    free(pem);
    snprintf(sql, sizeof sql,
             "INSERT INTO channel_account (tenant_id, channel, config, updated_at) VALUES"
             " ('t1', 'wechatpay', '{\"keys\":[{\"serial\":\"PUB_KEY_ID_1\"},{\"serial\":\"AB12\","
             "\"not_after\":%lld}]}', 'x'), ('t1', 'alipay', '%s', 'x'), ('t1', 'stripe',"
             " '{\"webhook_secrets\":[\"plain:a\",\"plain:b\"]}', 'x')",
             (long long)(now + 10 * 86400 + 60), acfg);
    free(acfg);
    exec(S, sql);
    json_t *l = NULL;
    assert_int_equal(po_console_keys(S, NULL, now, &l), PO_OK);
    assert_int_equal(json_array_size(l), 4);
    /* the expired one first, then the one in 10 days, then those without */
    const char *want[][4] = {{"alipay", "certificate", "SN-OLD", "expired"},
                             {"wechatpay", "certificate", "AB12", "10"},
                             {"stripe", "webhook secrets", "2 sealed", "-"},
                             {"wechatpay", "public key", "PUB_KEY_ID_1", "-"}};
    for (size_t i = 0; i < 4; i++) {
        json_t *r = json_array_get(l, i);
        assert_string_equal(json_string_value(json_object_get(r, "channel")), want[i][0]);
        assert_string_equal(json_string_value(json_object_get(r, "kind")), want[i][1]);
        assert_string_equal(json_string_value(json_object_get(r, "serial")), want[i][2]);
        json_t *days = json_object_get(r, "days_left");
        if (strcmp(want[i][3], "expired") == 0) {
            assert_true(json_is_true(json_object_get(r, "expired")));
            assert_true(json_integer_value(days) < 0);
        } else if (strcmp(want[i][3], "-") == 0) {
            assert_true(json_is_null(days) && json_is_null(json_object_get(r, "not_after")));
        } else {
            assert_int_equal(json_integer_value(days), 10);
            assert_false(json_is_true(json_object_get(r, "expired")));
        }
    }
    json_decref(l);
}

static void an_entry_and_an_alert_on_their_pages(void **state)
{
    char err[PO_ERRBUF_SIZE] = "";
    t_seed_order(S, "O-1", 500);
    struct po_event e = t_pay_event("O-1", "TX-1", 500), bad = t_pay_event("O-1", "TX-9", 1);
    assert_int_equal(t_apply(S, NULL, &e).kind, PO_OUT_APPLIED);
    (void)t_apply(S, NULL, &bad); /* a second payment, wrong amount: an alert */
    char key[PO_KEY_SIZE];
    assert_int_equal(po_event_key(&e, key, sizeof key), PO_OK);
    json_t *j = NULL;
    assert_int_equal(po_console_entry(S, "t1", key, &j), PO_OK);
    assert_non_null(j);
    int64_t sum = 0;
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(j, "postings"), i, p) sum +=
        json_integer_value(json_object_get(p, "amount"));
    assert_int_equal(json_array_size(json_object_get(j, "postings")), 2);
    assert_int_equal(sum, 0);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(j, "processed"), "outcome")), "applied");
    json_decref(j);
    assert_int_equal(po_console_entry(S, "t1", "no-such-key", &j), PO_OK);
    assert_null(j);
    /* the alert by its short id, with its trail */
    json_t *alerts = NULL;
    assert_int_equal(po_view_alerts_console(S, "t1", NULL, &alerts), PO_OK);
    assert_true(json_array_size(alerts) >= 1);
    const char *id = json_string_value(json_object_get(json_array_get(alerts, 0), "id"));
    bool changed = false;
    assert_int_equal(
        po_alert_act(S, "t1", id, PO_ALERT_ACK, "alice", "<b>on it</b>", &changed, err, sizeof err),
        PO_OK);
    json_t *a = NULL;
    assert_int_equal(po_console_alert(S, "t1", id, &a), PO_OK);
    assert_non_null(a);
    assert_string_equal(json_string_value(json_object_get(a, "id")), id);
    assert_string_equal(json_string_value(json_object_get(a, "state")), "acknowledged");
    json_t *act = json_array_get(json_object_get(a, "actions"), 0);
    assert_string_equal(json_string_value(json_object_get(act, "note")), "<b>on it</b>");
    assert_string_equal(json_string_value(json_object_get(act, "actor")), "alice");
    json_decref(a);
    json_decref(alerts);
    assert_int_equal(po_console_alert(S, "t1", "al_000000000000", &a), PO_OK);
    assert_null(a);
}

/* Fresh data fills a fitted window; a fixed one says where history began. */
static void overview_fitted_to_the_data(void **state)
{
    char err[PO_ERRBUF_SIZE] = "";
    int64_t now = (int64_t)time(NULL);
    po_traffic_reset();
    po_traffic_count("t1", "wechatpay", PO_OUT_APPLIED, 0, 800, 100, "CNY");
    assert_int_equal(po_traffic_flush(S, NULL, "node-a", now, 30, err, sizeof err), PO_OK);
    json_t *v = NULL;
    assert_int_equal(po_view_traffic(S, NULL, 6, false, now, &v), PO_OK);
    assert_int_equal(json_array_size(json_object_get(v, "series")), 72);
    const char *first_at = json_string_value(json_object_get(v, "first_at"));
    assert_non_null(first_at);
    char bucket[PO_TIME_SIZE];
    po_clock_iso_ms((now - now % PO_TRAFFIC_BUCKET_S) * 1000, bucket, sizeof bucket);
    assert_string_equal(first_at, bucket);
    json_decref(v);
    /* fitted: the data's span (at least 15 minutes), its bucket inside */
    assert_int_equal(po_view_traffic(S, NULL, 720, true, now, &v), PO_OK);
    json_t *series = json_object_get(v, "series");
    assert_int_equal(json_integer_value(json_object_get(v, "step_s")), PO_TRAFFIC_BUCKET_S);
    assert_true(json_array_size(series) >= 3 && json_array_size(series) <= 4);
    int64_t applied = 0;
    size_t i;
    json_t *pt;
    json_array_foreach(series, i, pt) applied += json_integer_value(json_object_get(pt, "applied"));
    assert_int_equal(applied, 1);
    json_decref(v);
    /* an older bucket: the fitted window reaches back to it, hourly past 12 h */
    exec(S, "DELETE FROM traffic");
    char sql[256], b[PO_TIME_SIZE];
    po_clock_iso_at(now - 20 * 3600, b, sizeof b);
    snprintf(sql, sizeof sql,
             "INSERT INTO traffic (tenant_id, bucket, channel, node, kind, n) VALUES ('t1',"
             " '%.16s', 'wechatpay', 'x', 'applied', 5)",
             b);
    exec(S, sql);
    assert_int_equal(po_view_traffic(S, "t1", 720, true, now, &v), PO_OK);
    series = json_object_get(v, "series");
    assert_int_equal(json_integer_value(json_object_get(v, "step_s")), 3600);
    assert_true(json_array_size(series) >= 20 && json_array_size(series) <= 22);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(series, 0), "applied")), 5);
    json_decref(v);
}

int main(int argc, char **argv)
{
    t_fx_backend = t_backend(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(prefix_search_pages_across_tenants, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(transaction_and_refund_numbers_by_prefix, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(substring_search_is_bounded_and_goes_on, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(lists_by_state_with_counts, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(redrive_commits_with_its_audit_or_not_at_all,
                                        t_fx_setup_seeded, t_fx_teardown),
        cmocka_unit_test_setup_teardown(recon_days_told_apart, t_fx_setup_seeded, t_fx_teardown),
        cmocka_unit_test_setup_teardown(keys_with_their_expiry, t_fx_setup_seeded, t_fx_teardown),
        cmocka_unit_test_setup_teardown(an_entry_and_an_alert_on_their_pages, t_fx_setup_seeded,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(overview_fitted_to_the_data, t_fx_setup_seeded,
                                        t_fx_teardown),
    };
    char name[64];
    snprintf(name, sizeof name, "console_triage[%s]", t_fx_backend);
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
