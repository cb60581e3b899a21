/*
 * test_committer.c — the committer on one backend (argv[1]):
 *
 *   - no ack before commit: with every COMMIT made to fail (fault hook on
 *     the committer's connections), every event of every batch is answered
 *     retry and nothing is in the database; redelivered, each payment is
 *     credited exactly once;
 *   - every `applied` answer comes after its commit: when done() is called,
 *     an independent connection already sees the event's journal;
 *   - batching: concurrent submitters share batches; a lone event on an
 *     idle committer is a batch of one;
 *   - stopping answers everything still queued;
 *   - the table of committed events (po_committer_known): a poller racing
 *     the submitters finds in it only events whose processed record an
 *     independent connection already sees; nothing while every COMMIT
 *     fails; every event once its batch committed; emptied by a batch that
 *     does not commit (of works alone, or with events) and (PostgreSQL) by
 *     a connection that is new;
 *   - the alert of a verified callback that cannot be applied is written
 *     in a batch like an event: once, with work.rc OK; with a deadline
 *     that passes while the database stalls, it is answered retry at once
 *     and its caller's item may be gone (freed in done(): ASan would see a
 *     touch), while the batch still writes it from its own copy;
 *   - the engine's door (po_door_*): with a committer, events, alerts and
 *     works are applied on the committer's connections — the caller's
 *     connection makes no round trip — answered once committed, retry when
 *     COMMIT fails (nothing applied); without one (the offline CLI), on the
 *     caller's connection.
 */
#include "../support/testutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ORDERS 60
#define SUBMITTERS 8

static const char *backend;
static char url[T_URL_MAX];
static atomic_bool fail_commits;
static atomic_int commits_failed;

static atomic_bool stall_alerts; /* the alert INSERT waits 300 ms */

static po_err hook(void *ctx, int idx, const char *sql)
{
    (void)ctx;
    (void)idx;
    if (atomic_load(&stall_alerts) && strncmp(sql, "INSERT INTO alert ", 18) == 0) {
        struct timespec ms300 = {0, 300000000L};
        nanosleep(&ms300, NULL);
    }
    if (atomic_load(&fail_commits) && strcmp(sql, "COMMIT") == 0) {
        atomic_fetch_add(&commits_failed, 1);
        return PO_ERR_TRANSIENT;
    }
    return PO_OK;
}

/* The gateway's guard runs a statement before each batch's transaction;
 * this one only that statement (which reconnects a lost connection). */
static po_err ping_guard(struct po_store *s, struct po_guard_token *t, size_t n, void *ctx)
{
    (void)t;
    (void)n;
    (void)ctx;
    char err[PO_ERRBUF_SIZE];
    struct po_rows r;
    po_err rc = po_store_exec(s, "SELECT 1", NULL, 0, &r, NULL, err, sizeof err);
    if (!rc)
        po_rows_free(&r);
    return rc;
}

/* A submitted event and what its done() saw. */
struct item {
    struct po_commit_item it;
    struct po_store *checker; /* done() looks here for the journal */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done, journal_seen;
};

static void on_done(struct po_commit_item *it)
{
    struct item *x = it->user;
    bool seen = false;
    if (it->out.kind == PO_OUT_APPLIED) {
        char key[PO_KEY_SIZE];
        assert_int_equal(po_event_key(&it->ev, key, sizeof key), PO_OK);
        struct po_param p[] = {PO_TEXT(key)};
        seen = t_count(x->checker, "SELECT COUNT(*) FROM journal WHERE idem_key = ?", p, 1) == 1;
    }
    pthread_mutex_lock(&x->mu);
    x->journal_seen = seen;
    x->done = true;
    pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&x->mu);
}

struct run {
    struct po_committer *c;
    struct item *items;
    int from, to;
};

/* Submits items [from, to) one after another, waiting for each. */
static void *submitter(void *arg)
{
    struct run *r = arg;
    struct po_store *checker = t_open(url);
    for (int i = r->from; i < r->to; i++) {
        struct item *x = &r->items[i];
        x->checker = checker;
        x->done = false;
        x->it.done = on_done;
        x->it.user = x;
        assert_int_equal(po_committer_submit(r->c, &x->it), PO_OK);
        pthread_mutex_lock(&x->mu);
        while (!x->done)
            pthread_cond_wait(&x->cv, &x->mu);
        pthread_mutex_unlock(&x->mu);
    }
    po_store_close(checker);
    return NULL;
}

/* Every item once, from SUBMITTERS threads at once. */
static void deliver_all(struct po_committer *c, struct item *items, int n)
{
    pthread_t th[SUBMITTERS];
    struct run runs[SUBMITTERS];
    for (int t = 0; t < SUBMITTERS; t++) {
        runs[t] = (struct run){c, items, t * n / SUBMITTERS, (t + 1) * n / SUBMITTERS};
        assert_int_equal(pthread_create(&th[t], NULL, submitter, &runs[t]), 0);
    }
    for (int t = 0; t < SUBMITTERS; t++)
        pthread_join(th[t], NULL);
}

/*
 * ORDERS orders PREFIX-i and each one's payment twice in items (its channel
 * retries it): one after the other, or (halves, carrying a guard token as
 * a callback does) the two copies in the two halves, so that different
 * submitters send them at the same moment.
 */
static void seed_payments(struct po_store *s, struct item *items, const char *prefix, bool halves)
{
    for (int i = 0; i < ORDERS; i++) {
        char no[32], txn[32];
        snprintf(no, sizeof no, "%s-%d", prefix, i);
        snprintf(txn, sizeof txn, "42%s%08d", prefix, i);
        t_seed_order(s, no, 100 + i);
        for (int k = 0; k < 2; k++) {
            struct item *x = &items[halves ? k * ORDERS + i : 2 * i + k];
            memset(x, 0, sizeof *x);
            x->it.ev = t_pay_event(no, txn, 100 + i);
            x->it.has_guard = halves;
            pthread_mutex_init(&x->mu, NULL);
            pthread_cond_init(&x->cv, NULL);
        }
    }
}

static void no_ack_before_commit(void **state)
{
    (void)state;
    t_db_create(backend, url, sizeof url);
    struct po_store *s = t_open(url);
    t_seed_tenant(s);
    static struct item items[ORDERS * 2];
    seed_payments(s, items, "C", false);
    char err[PO_ERRBUF_SIZE] = "";
    struct po_committer_cfg cc = {.db_url = url,
                                  .workers = strcmp(backend, "sqlite") == 0 ? 1 : 4,
                                  .batch_max = 32,
                                  .batch_wait_us = 500,
                                  .queue_max = 1024,
                                  .fault = hook};
    struct po_committer *c = NULL;
    assert_int_equal(po_committer_start(&cc, &c, err, sizeof err), PO_OK);

    /* Every COMMIT fails: every answer is retry, nothing was written. */
    atomic_store(&fail_commits, true);
    deliver_all(c, items, ORDERS * 2);
    for (int i = 0; i < ORDERS * 2; i++) {
        assert_int_equal(items[i].it.out.kind, PO_OUT_RETRY);
        assert_false(items[i].journal_seen);
    }
    assert_true(atomic_load(&commits_failed) >= 1);
    assert_int_equal(t_count(s, "SELECT COUNT(*) FROM notify_log", NULL, 0), 0);
    assert_int_equal(t_count(s, "SELECT COUNT(*) FROM journal", NULL, 0), 0);
    assert_int_equal(t_count(s, "SELECT COUNT(*) FROM pay_order WHERE status <> 'PAYING'", NULL, 0),
                     0);

    /* The channels redeliver: each payment credited once, every applied
     * answer given only once its journal was committed. */
    atomic_store(&fail_commits, false);
    deliver_all(c, items, ORDERS * 2);
    int applied = 0, dups = 0;
    for (int i = 0; i < ORDERS * 2; i++) {
        if (items[i].it.out.kind == PO_OUT_APPLIED) {
            applied++;
            assert_true(items[i].journal_seen);
        } else {
            assert_int_equal(items[i].it.out.kind, PO_OUT_DUPLICATE);
            dups++;
        }
    }
    assert_int_equal(applied, ORDERS);
    assert_int_equal(dups, ORDERS);
    assert_int_equal(t_count(s, "SELECT COUNT(*) FROM journal WHERE kind = 'PAY'", NULL, 0),
                     ORDERS);
    assert_int_equal(t_verify(s), 0);

    /* Concurrent submitters shared batches. */
    struct po_committer_stats st;
    po_committer_stats(c, &st);
    assert_true(st.batches < st.items);
    assert_int_equal(st.queued, 0);
    t_figure("# committer[%s] %d deliveries x 2 rounds: %llu batches (%llu failed commits), all"
             " retry while COMMIT failed, then %d credited once, %d duplicates\n",
             backend, ORDERS * 2, (unsigned long long)st.batches,
             (unsigned long long)st.commit_failures, applied, dups);
    po_committer_stop(c);

    /* A lone event on an idle committer: a batch of one. */
    assert_int_equal(po_committer_start(&cc, &c, err, sizeof err), PO_OK);
    struct po_commit_item one = {.ev = items[0].it.ev};
    po_committer_apply(c, &one);
    assert_int_equal(one.out.kind, PO_OUT_DUPLICATE);
    po_committer_stats(c, &st);
    assert_true(st.batches == 1 && st.size_hist[0] == 1);
    po_committer_stop(c);
    po_store_close(s);
    t_db_drop(url);
}

/* ---- the table of committed events ---- */

static atomic_bool polling;

struct poller {
    struct po_committer *c;
    const struct po_event *ev[ORDERS * 2];
    int n;
    int hits, violations; /* found in the table; of those, not committed */
};

/* Looks every event up in the table, over and over while the submitters
 * run: a hit must be an event the database has committed. */
static void *poll_known(void *arg)
{
    struct poller *p = arg;
    struct po_store *s = t_open(url);
    while (atomic_load(&polling)) {
        for (int i = 0; i < p->n; i++) {
            if (!po_committer_known(p->c, p->ev[i]))
                continue;
            char key[PO_KEY_SIZE];
            if (po_event_key(p->ev[i], key, sizeof key) != PO_OK)
                abort();
            struct po_param k[] = {PO_TEXT(key)};
            p->hits++;
            if (t_count(s, "SELECT COUNT(*) FROM notify_log WHERE idem_key = ?", k, 1) != 1) {
                fprintf(stderr, "known, not committed: %s\n", key);
                p->violations++;
            }
        }
    }
    po_store_close(s);
    return NULL;
}

/* deliver_all with the poller beside it. */
static void deliver_polled(struct po_committer *c, struct item *items, int n, struct poller *p)
{
    pthread_t th;
    p->c = c;
    p->n = n;
    for (int i = 0; i < n; i++)
        p->ev[i] = &items[i].it.ev;
    atomic_store(&polling, true);
    assert_int_equal(pthread_create(&th, NULL, poll_known, p), 0);
    deliver_all(c, items, n);
    atomic_store(&polling, false);
    pthread_join(th, NULL);
}

static int known_count(struct po_committer *c, struct item *items, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += po_committer_known(c, &items[i].it.ev);
    return k;
}

/* A work that writes nothing. */
static po_err nothing(struct po_store *s, void *ctx)
{
    (void)s;
    (void)ctx;
    return PO_OK;
}

/* Applies one new payment until it is answered (the first tries may meet
 * a connection the test ended); the answers it took. */
static int apply_new(struct po_committer *c, struct po_store *s, const char *no, const char *txn)
{
    t_seed_order(s, no, 500);
    for (int tries = 1; tries <= 5; tries++) {
        struct po_commit_item it = {.ev = t_pay_event(no, txn, 500), .has_guard = true};
        po_committer_apply(c, &it);
        if (it.out.kind != PO_OUT_RETRY)
            return tries;
    }
    fail_msg("%s never applied", no);
    return 0;
}

/* Ends every connection to the test's database but s's own (PostgreSQL). */
static void end_sessions(struct po_store *s)
{
    char err[PO_ERRBUF_SIZE] = "";
    struct po_rows r;
    assert_int_equal(po_store_exec(s,
                                   "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE"
                                   " datname = current_database() AND pid <> pg_backend_pid()",
                                   NULL, 0, &r, NULL, err, sizeof err),
                     PO_OK);
    assert_true(r.nrows >= 1);
    po_rows_free(&r);
}

static void known_after_commit(void **state)
{
    (void)state;
    t_db_create(backend, url, sizeof url);
    struct po_store *s = t_open(url);
    t_seed_tenant(s);
    static struct item items[ORDERS * 2];
    seed_payments(s, items, "K", true);
    char err[PO_ERRBUF_SIZE] = "";
    bool pg = strcmp(backend, "sqlite") != 0;
    struct po_committer_cfg cc = {.db_url = url,
                                  .workers = pg ? 4 : 1,
                                  .batch_max = 32,
                                  .batch_wait_us = 500,
                                  .queue_max = 1024,
                                  .known_max = 65536,
                                  .guard = ping_guard,
                                  .fault = hook};
    struct po_committer *c = NULL;
    assert_int_equal(po_committer_start(&cc, &c, err, sizeof err), PO_OK);
    static struct poller p;

    /* Every COMMIT fails: nothing is ever in the table. */
    atomic_store(&fail_commits, true);
    memset(&p, 0, sizeof p);
    deliver_polled(c, items, ORDERS * 2, &p);
    for (int i = 0; i < ORDERS * 2; i++)
        assert_int_equal(items[i].it.out.kind, PO_OUT_RETRY);
    assert_int_equal(p.hits, 0);
    assert_int_equal(known_count(c, items, ORDERS * 2), 0);

    /* Committed: a hit only ever for what another connection sees, and in
     * the end every payment is there (its first delivery and its twin). */
    atomic_store(&fail_commits, false);
    memset(&p, 0, sizeof p);
    deliver_polled(c, items, ORDERS * 2, &p);
    int applied = 0;
    for (int i = 0; i < ORDERS * 2; i++)
        applied += items[i].it.out.kind == PO_OUT_APPLIED;
    assert_int_equal(applied, ORDERS);
    assert_int_equal(p.violations, 0);
    assert_int_equal(known_count(c, items, ORDERS * 2), ORDERS * 2);
    /* The same payment with any field the engine checks changed is not. */
    struct po_event other = items[0].it.ev;
    other.amount_minor++;
    assert_false(po_committer_known(c, &other));
    other = items[0].it.ev;
    snprintf(other.currency, sizeof other.currency, "USD");
    assert_false(po_committer_known(c, &other));
    int hits_racing = p.hits;

    /* A batch that does not commit empties the table: one of works alone
     * (a duplicate's record, an API write), then one with an event. */
    atomic_store(&fail_commits, true);
    struct po_commit_item work = {.work = {nothing, NULL, PO_OK}};
    po_committer_apply(c, &work);
    assert_int_equal(work.work.rc, PO_ERR_TRANSIENT);
    assert_int_equal(known_count(c, items, ORDERS * 2), 0);
    atomic_store(&fail_commits, false);
    memset(&p, 0, sizeof p);
    deliver_polled(c, items, ORDERS * 2, &p); /* all duplicates: back in the table */
    assert_int_equal(p.violations, 0);
    assert_int_equal(known_count(c, items, ORDERS * 2), ORDERS * 2);
    struct po_committer_stats st0, st;
    po_committer_stats(c, &st0);
    atomic_store(&fail_commits, true);
    t_seed_order(s, "K-FAIL", 500);
    struct po_commit_item failing = {.ev = t_pay_event("K-FAIL", "4300FAIL", 500)};
    po_committer_apply(c, &failing);
    assert_int_equal(failing.out.kind, PO_OUT_RETRY);
    assert_int_equal(known_count(c, items, ORDERS * 2), 0);
    atomic_store(&fail_commits, false);

    /* PostgreSQL: so does a new connection — one the guard's statement
     * (outside the batch's transaction) opened again without a failed
     * batch, as after a failover. */
    int session_tries = 0;
    if (pg) {
        memset(&p, 0, sizeof p);
        deliver_polled(c, items, ORDERS * 2, &p); /* all duplicates: back in the table */
        assert_int_equal(p.violations, 0);
        assert_int_equal(known_count(c, items, ORDERS * 2), ORDERS * 2);
        po_committer_stats(c, &st0);
        end_sessions(s);
        session_tries = apply_new(c, s, "K-SESSION", "4300SESSION");
        po_committer_stats(c, &st);
        assert_int_equal(st.commit_failures, st0.commit_failures); /* no batch failed */
        assert_int_equal(known_count(c, items, ORDERS * 2), 0);
    }
    po_committer_stats(c, &st);
    t_figure("# committer[%s] known: %d hits racing %d deliveries (all committed), none while"
             " COMMIT failed; emptied %llu times (a failed batch%s)\n",
             backend, hits_racing, ORDERS * 2, (unsigned long long)st.known_clears,
             pg ? (session_tries > 1 ? ", a new connection after the guard's retry"
                                     : ", a new connection")
                : "");
    po_committer_stop(c);
    assert_int_equal(t_verify(s), 0);
    po_store_close(s);
    t_db_drop(url);
}

static atomic_int alert_answers;
static enum po_reason alert_answer_reason;
static po_err alert_answer_rc;

/* The caller of an alert item: notes the answer, then frees the item. */
static void alert_done(struct po_commit_item *it)
{
    alert_answer_reason = it->out.kind == PO_OUT_RETRY ? it->out.reason : PO_R_NONE;
    alert_answer_rc = it->work.rc;
    free(it);
    atomic_fetch_add(&alert_answers, 1);
}

static struct po_commit_item *alert_item(const char *no, const char *txn, uint64_t deadline_us)
{
    struct po_commit_item *it = calloc(1, sizeof *it);
    assert_non_null(it);
    it->ev = t_pay_event(no, txn, 100);
    it->alert.reason = PO_R_MCHID_MISMATCH;
    (void)snprintf(it->alert.detail, sizeof it->alert.detail, "callback for another mchid");
    (void)snprintf(it->alert.outcome, sizeof it->alert.outcome, "rejected");
    it->deadline_us = deadline_us;
    it->done = alert_done;
    return it;
}

static void wait_answers(int n)
{
    for (int i = 0; i < 5000 && atomic_load(&alert_answers) < n; i++) {
        struct timespec ms = {0, 1000000L};
        nanosleep(&ms, NULL);
    }
    assert_int_equal(atomic_load(&alert_answers), n);
}

static void alerts_in_batches(void **state)
{
    (void)state;
    t_db_create(backend, url, sizeof url);
    struct po_store *s = t_open(url);
    t_seed_tenant(s);
    char err[PO_ERRBUF_SIZE] = "";
    struct po_committer_cfg cc = {
        .db_url = url, .workers = 1, .batch_max = 8, .queue_max = 64, .fault = hook};
    struct po_committer *c = NULL;
    assert_int_equal(po_committer_start(&cc, &c, err, sizeof err), PO_OK);
    const char *count = "SELECT COUNT(*) FROM alert WHERE reason = 'mchid_mismatch'";
    /* Written once, however often it comes. */
    for (int k = 0; k < 2; k++) {
        assert_int_equal(po_committer_submit(c, alert_item("A-1", "4200ALERT1", 0)), PO_OK);
        wait_answers(k + 1);
        assert_int_equal(alert_answer_rc, PO_OK);
    }
    assert_int_equal(t_count(s, count, NULL, 0), 1);
    /* The database stalls past the deadline: answered retry at it, the
     * item freed by its caller, the alert written anyway from the copy. */
    atomic_store(&stall_alerts, true);
    assert_int_equal(po_committer_submit(c, alert_item("A-2", "4200ALERT2", po_now_us() + 50000)),
                     PO_OK);
    wait_answers(3);
    assert_int_equal(alert_answer_reason, PO_R_DEADLINE_EXCEEDED);
    assert_int_equal(alert_answer_rc, PO_ERR_TRANSIENT);
    po_committer_stop(c); /* the batch in flight finishes first */
    atomic_store(&stall_alerts, false);
    assert_int_equal(t_count(s, count, NULL, 0), 2);
    assert_int_equal(t_count(s, "SELECT COUNT(*) FROM journal", NULL, 0), 0);
    po_store_close(s);
    t_db_drop(url);
}

/* A work of the door: notes the connection it ran on, writes one row. */
struct door_work {
    struct po_store *ran_on;
};

static po_err door_work_fn(struct po_store *s, void *ctx)
{
    struct door_work *w = ctx;
    w->ran_on = s;
    char err[PO_ERRBUF_SIZE];
    return po_store_exec(s,
                         "UPDATE pay_order SET pay_method = 'by the door' WHERE tenant_id = 't1'"
                         " AND out_trade_no = 'D-0'",
                         NULL, 0, NULL, NULL, err, sizeof err);
}

static void the_door(void **state)
{
    (void)state;
    t_db_create(backend, url, sizeof url);
    struct po_store *s = t_open(url);
    t_seed_tenant(s);
    struct po_event ev[4];
    for (int i = 0; i < 4; i++) {
        char no[16], txn[32];
        snprintf(no, sizeof no, "D-%d", i);
        snprintf(txn, sizeof txn, "4200DOOR%04d", i);
        t_seed_order(s, no, 100 + i);
        ev[i] = t_pay_event(no, txn, 100 + i);
    }
    char err[PO_ERRBUF_SIZE] = "";
    struct po_committer_cfg cc = {
        .db_url = url, .workers = 2, .batch_max = 8, .queue_max = 64, .fault = hook};
    if (strcmp(backend, "sqlite") == 0)
        cc.workers = 1;
    struct po_committer *c = NULL;
    assert_int_equal(po_committer_start(&cc, &c, err, sizeof err), PO_OK);
    const struct po_door in_serve = {s, c}, offline = {s, NULL};
    struct po_outcome out[4];
    struct po_committer_stats st0, st1;
    /* COMMIT fails: every event answered retry, none applied. */
    atomic_store(&fail_commits, true);
    po_door_apply(&in_serve, ev, 3, out);
    atomic_store(&fail_commits, false);
    for (int i = 0; i < 3; i++)
        assert_int_equal(out[i].kind, PO_OUT_RETRY);
    assert_int_equal(t_count(s, "SELECT COUNT(*) FROM journal", NULL, 0), 0);
    /* Through the committer: applied there, not on the caller's connection. */
    uint64_t trips = po_store_round_trips(s);
    po_committer_stats(c, &st0);
    po_door_apply(&in_serve, ev, 3, out);
    for (int i = 0; i < 3; i++)
        assert_int_equal(out[i].kind, PO_OUT_APPLIED);
    struct po_event odd = t_pay_event("D-NONE", "4200DOORNONE", 5);
    assert_int_equal(po_door_alert(&in_serve, &odd, PO_R_MISSING_FROM_BILL, "door"), PO_OK);
    struct door_work w = {NULL};
    assert_int_equal(po_door_work(&in_serve, "t1|D-0", door_work_fn, &w), PO_OK);
    assert_int_equal(po_store_round_trips(s), trips);
    po_committer_stats(c, &st1);
    assert_int_equal(st1.items - st0.items, 5);
    assert_non_null(w.ran_on);
    assert_ptr_not_equal(w.ran_on, s);
    /* Again: duplicates, through the committer too. */
    po_door_apply(&in_serve, ev, 3, out);
    for (int i = 0; i < 3; i++)
        assert_int_equal(out[i].kind, PO_OUT_DUPLICATE);
    po_committer_stop(c);
    /* The offline CLI's door: on the caller's connection. */
    po_door_apply(&offline, &ev[3], 1, out);
    assert_int_equal(out[0].kind, PO_OUT_APPLIED);
    assert_true(po_store_round_trips(s) > trips);
    assert_int_equal(po_door_work(&offline, "t1|D-0", door_work_fn, &w), PO_OK);
    assert_ptr_equal(w.ran_on, s);
    assert_int_equal(t_count(s, "SELECT COUNT(*) FROM journal WHERE kind = 'PAY'", NULL, 0), 4);
    assert_int_equal(
        t_count(s, "SELECT COUNT(*) FROM alert WHERE reason = 'missing_from_bill'", NULL, 0), 1);
    assert_int_equal(
        t_count(s, "SELECT COUNT(*) FROM pay_order WHERE pay_method = 'by the door'", NULL, 0), 1);
    po_store_close(s);
    t_db_drop(url);
}

int main(int argc, char **argv)
{
    backend = t_backend(argc, argv);
    po_log_set_level(PO_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_ack_before_commit), cmocka_unit_test(known_after_commit),
        cmocka_unit_test(alerts_in_batches), cmocka_unit_test(the_door)};
    char name[64];
    snprintf(name, sizeof name, "committer[%s]", backend);
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
