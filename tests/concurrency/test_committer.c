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
 *   - the alert of a verified callback that cannot be applied is written
 *     in a batch like an event: once, with work.rc OK; with a deadline
 *     that passes while the database stalls, it is answered retry at once
 *     and its caller's item may be gone (freed in done(): ASan would see a
 *     touch), while the batch still writes it from its own copy.
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

static void no_ack_before_commit(void **state)
{
    (void)state;
    t_db_create(backend, url, sizeof url);
    struct po_store *s = t_open(url);
    t_seed_tenant(s);
    static struct item items[ORDERS * 2];
    for (int i = 0; i < ORDERS; i++) {
        char no[32], txn[32];
        snprintf(no, sizeof no, "C-%d", i);
        snprintf(txn, sizeof txn, "4200%08d", i);
        t_seed_order(s, no, 100 + i);
        /* Each payment twice: its channel retries it. */
        for (int k = 0; k < 2; k++) {
            memset(&items[2 * i + k], 0, sizeof items[0]);
            items[2 * i + k].it.ev = t_pay_event(no, txn, 100 + i);
            pthread_mutex_init(&items[2 * i + k].mu, NULL);
            pthread_cond_init(&items[2 * i + k].cv, NULL);
        }
    }
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

int main(int argc, char **argv)
{
    backend = t_backend(argc, argv);
    po_log_set_level(PO_LOG_ERROR);
    const struct CMUnitTest tests[] = {cmocka_unit_test(no_ack_before_commit),
                                       cmocka_unit_test(alerts_in_batches)};
    char name[64];
    snprintf(name, sizeof name, "committer[%s]", backend);
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
