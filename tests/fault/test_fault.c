/*
 * test_fault.c — fault injection at every statement position of the
 * engine's transaction, on one backend (argv[1]).
 *
 * For each scenario (payment, refund, profit share, rejected event,
 * duplicate), each fault kind (transient: lost connection / busy;
 * conflict: a unique violation that is not a twin; store: any other
 * error) and each position k (0 = BEGIN, then every statement, then
 * COMMIT): the outcome is `retry`, the database is exactly as before
 * (fingerprint of every table that matters), and re-applying afterwards
 * gives the expected outcome once. The sweep ends at the first k past the
 * last statement, which must be reached.
 *
 * Real faults: on PostgreSQL the backend is terminated before statement k
 * (pg_terminate_backend); on SQLite another connection holds the write lock.
 * The fingerprint includes the outbox (issue 12): the tenant event of an
 * effect commits with it or not at all, and after every round each
 * journal and each alert has exactly one outbox event.
 */
#include "../support/testutil.h"

#include <libpq-fe.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *backend;
static char url[T_URL_MAX];
static int total_positions; /* for the summary line */

struct fault {
    int at;      /* statement index to fail */
    po_err kind; /* injected error, or PO_OK for a real termination */
    bool fired;
    PGconn *admin; /* real termination */
    long pid;
};

static po_err hook(void *ctx, int idx, const char *sql)
{
    struct fault *f = ctx;
    (void)sql;
    if (idx != f->at)
        return PO_OK;
    f->fired = true;
    if (f->admin) {
        char q[96];
        snprintf(q, sizeof q, "SELECT pg_terminate_backend(%ld, 5000)", f->pid);
        PGresult *r = PQexec(f->admin, q);
        if (PQresultStatus(r) != PGRES_TUPLES_OK || strcmp(PQgetvalue(r, 0, 0), "t") != 0)
            fail_msg("terminate failed: %s", PQerrorMessage(f->admin));
        PQclear(r);
        return PO_OK; /* the statement itself now fails for real */
    }
    return f->kind;
}

/* Everything a partial commit could touch, as one comparable string. */
static void fingerprint(struct po_store *s, char *out, size_t cap)
{
    static const char *const q[] = {
        "SELECT COUNT(*) FROM notify_log",
        "SELECT COUNT(*) FROM journal",
        "SELECT COUNT(*) FROM posting",
        "SELECT COUNT(*) FROM alert",
        "SELECT COUNT(*) FROM account_balance",
        "SELECT COALESCE(SUM(balance * balance), 0) FROM account_balance",
        "SELECT COUNT(*) FROM pay_order WHERE status = 'PAID'",
        "SELECT COALESCE(SUM(refunded_amount * 7 + refund_reserved), 0) FROM pay_order",
        "SELECT COUNT(*) FROM refund WHERE status <> 'PROCESSING'",
        "SELECT COUNT(*) FROM outbox_event",
        "SELECT COALESCE(SUM(event_seq), 0) FROM pay_order",
    };
    size_t j = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
        j += (size_t)snprintf(out + j, cap - j, "%lld/", (long long)t_count(s, q[i], NULL, 0));
}

struct scenario {
    const char *name;
    /* Prepares round i and returns the event to apply under faults. */
    struct po_event (*prepare)(struct po_store *s, int i);
    enum po_outcome_kind expect; /* outcome once the faults stop */
    int expect_layer;
};

static struct po_event prep_pay(struct po_store *s, int i)
{
    char no[32], txn[32];
    snprintf(no, sizeof no, "ORD-%d", i);
    snprintf(txn, sizeof txn, "420000%d", i);
    t_seed_order(s, no, 100 + i);
    return t_pay_event(no, txn, 100 + i);
}

static struct po_event prep_paid(struct po_store *s, int i, char *no)
{
    struct po_event pay = prep_pay(s, i);
    struct po_outcome o = t_apply(s, NULL, &pay);
    assert_int_equal(o.kind, PO_OUT_APPLIED);
    strcpy(no, pay.out_trade_no); /* lint-ok: sized by the caller, test only */
    return pay;
}

static struct po_event prep_refund(struct po_store *s, int i)
{
    char no[PO_ID_MAX + 1], rno[32], rid[32];
    struct po_event pay = prep_paid(s, i, no);
    snprintf(rno, sizeof rno, "R-%d", i);
    snprintf(rid, sizeof rid, "503%d", i);
    t_seed_refund(s, no, rno, pay.amount_minor);
    return t_refund_event(PO_EV_REFUND_SUCCESS, no, rno, rid, pay.amount_minor);
}

static struct po_event prep_share(struct po_store *s, int i)
{
    char no[PO_ID_MAX + 1], sid[32];
    (void)prep_paid(s, i, no);
    snprintf(sid, sizeof sid, "300%d", i);
    return t_share_event(no, sid, "r1", 10);
}

static struct po_event prep_mismatch(struct po_store *s, int i)
{
    struct po_event ev = prep_pay(s, i);
    ev.amount_minor += 1;
    return ev;
}

static struct po_event prep_duplicate(struct po_store *s, int i)
{
    char no[PO_ID_MAX + 1];
    return prep_paid(s, i, no);
}

static const struct scenario scenarios[] = {
    {"payment", prep_pay, PO_OUT_APPLIED, 0},
    {"refund", prep_refund, PO_OUT_APPLIED, 0},
    {"profit_share", prep_share, PO_OUT_APPLIED, 0},
    {"rejected", prep_mismatch, PO_OUT_REJECTED, 0},
    {"duplicate", prep_duplicate, PO_OUT_DUPLICATE, 1},
};

/* Runs the sweep for one scenario and fault kind; returns positions hit. */
static int sweep(struct po_store *s, const struct scenario *sc, po_err kind, bool real, int *round)
{
    PGconn *admin = NULL;
    if (real && strcmp(backend, "postgres") == 0) {
        admin = PQconnectdb(url);
        assert_int_equal(PQstatus(admin), CONNECTION_OK);
    }
    int k;
    for (k = 0; k < 64; k++) {
        struct po_event ev = sc->prepare(s, (*round)++);
        char before[512], after[512];
        fingerprint(s, before, sizeof before);
        struct fault f = {.at = k, .kind = kind, .admin = admin, .pid = po_store_backend_pid(s)};
        po_store_set_fault_hook(s, hook, &f);
        struct po_outcome o = t_apply(s, NULL, &ev);
        po_store_set_fault_hook(s, NULL, NULL);
        if (!f.fired) {
            /* Past the last statement: the run was clean. */
            assert_int_equal(o.kind, sc->expect);
            break;
        }
        /* A conflict on an event whose key is already committed is rightly
         * answered duplicate (the twin's record is there); anything else
         * must be retried. */
        bool dup_ok =
            kind == PO_ERR_CONFLICT && sc->expect == PO_OUT_DUPLICATE && o.kind == PO_OUT_DUPLICATE;
        if (o.kind != PO_OUT_RETRY && !dup_ok)
            fail_msg("%s: fault %s at statement %d gave %s (%s), not retry", sc->name,
                     real ? "terminate" : po_err_name(kind), k, po_outcome_name(o.kind),
                     po_reason_name(o.reason));
        fingerprint(s, after, sizeof after);
        if (strcmp(before, after) != 0)
            fail_msg("%s: partial commit after fault at %d: %s -> %s", sc->name, k, before, after);
        /* The channel retries: the expected outcome, exactly once. */
        o = t_apply(s, NULL, &ev);
        assert_int_equal(o.kind, sc->expect);
        assert_int_equal(o.layer, sc->expect_layer);
        o = t_apply(s, NULL, &ev);
        assert_true(o.kind == PO_OUT_DUPLICATE || o.kind == PO_OUT_REJECTED);
        /* The outbox and the effects commit together: here every journal
         * and every alert has its tenant event, and nothing else has one. */
        int64_t events = t_count(s, "SELECT COUNT(*) FROM outbox_event", NULL, 0),
                effects = t_count(s,
                                  "SELECT (SELECT COUNT(*) FROM journal) + (SELECT COUNT(*) FROM"
                                  " alert)",
                                  NULL, 0);
        if (events != effects)
            fail_msg("%s: fault at %d: %lld outbox events for %lld journals and alerts", sc->name,
                     k, (long long)events, (long long)effects);
    }
    PQfinish(admin);
    assert_true(k >= 3); /* BEGIN, SAVEPOINT, ..., COMMIT were all reached */
    assert_int_equal(t_verify(s), 0);
    return k;
}

static void run_kind(po_err kind, bool real)
{
    t_db_create(backend, url, sizeof url);
    struct po_store *s = t_open(url);
    t_seed_tenant(s);
    int round = 0;
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        int n = sweep(s, &scenarios[i], kind, real, &round);
        total_positions += n;
        t_figure("# fault[%s] %-12s fault %-9s positions 0..%d all retried, nothing partial,"
                 " re-apply %s\n",
                 backend, scenarios[i].name, real ? "terminate" : po_err_name(kind), n - 1,
                 po_outcome_name(scenarios[i].expect));
    }
    /* Exactly one credit per paid order after all of it. */
    assert_int_equal(t_count(s,
                             "SELECT COUNT(*) FROM pay_order o WHERE status = 'PAID' AND"
                             " (SELECT COUNT(*) FROM journal j WHERE j.tenant_id = o.tenant_id"
                             " AND j.out_trade_no = o.out_trade_no AND j.kind = 'PAY') <> 1",
                             NULL, 0),
                     0);
    po_store_close(s);
    t_db_drop(url);
}

static void injected_transient(void **state)
{
    (void)state;
    run_kind(PO_ERR_TRANSIENT, false);
}

static void injected_conflict(void **state)
{
    (void)state;
    run_kind(PO_ERR_CONFLICT, false);
}

static void injected_store_error(void **state)
{
    (void)state;
    run_kind(PO_ERR_STORE, false);
}

/* PostgreSQL: the server really drops the connection mid-transaction. */
static void real_connection_loss(void **state)
{
    (void)state;
    if (strcmp(backend, "postgres") != 0)
        skip();
    run_kind(PO_OK, true);
}

/* SQLite: another connection holds the write lock longer than the busy
 * timeout; the event is retried, and applied once the lock is gone. */
static void real_busy_lock(void **state)
{
    (void)state;
    if (strcmp(backend, "sqlite") != 0)
        skip();
    t_db_create(backend, url, sizeof url);
    struct po_store *s = t_open(url), *holder = t_open(url);
    t_seed_tenant(s);
    struct po_event ev = prep_pay(s, 1);
    assert_int_equal(po_store_begin(holder, NULL, 0), PO_OK);
    struct po_outcome o = t_apply(s, NULL, &ev);
    assert_int_equal(o.kind, PO_OUT_RETRY);
    assert_string_equal(po_reason_name(o.reason), "store_unavailable");
    po_store_rollback(holder);
    assert_int_equal(t_apply(s, NULL, &ev).kind, PO_OUT_APPLIED);
    assert_int_equal(t_apply(s, NULL, &ev).kind, PO_OUT_DUPLICATE);
    assert_int_equal(t_verify(s), 0);
    po_store_close(holder);
    po_store_close(s);
    t_db_drop(url);
}

int main(int argc, char **argv)
{
    backend = t_backend(argc, argv);
    po_log_set_level(PO_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(injected_transient),   cmocka_unit_test(injected_conflict),
        cmocka_unit_test(injected_store_error), cmocka_unit_test(real_connection_loss),
        cmocka_unit_test(real_busy_lock),
    };
    char name[64];
    snprintf(name, sizeof name, "fault[%s]", backend);
    int rc = cmocka_run_group_tests_name(name, tests, NULL, NULL);
    t_figure("# fault[%s]: %d statement positions injected in all\n", backend, total_positions);
    return rc;
}
