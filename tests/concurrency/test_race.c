/*
 * test_race.c — threads AND processes applying the same event at once.
 *
 *   test_race BACKEND [--threads N] [--procs M] [--rounds R] [--mode MODE]
 *
 * Every participant (N threads in this process, M forked processes, each
 * with its own database connection) waits on one process-shared barrier,
 * then applies round r's event — all of them the same event, half as a
 * channel callback and half as a reconciliation replay — retrying on
 * `retry` as a channel would. After all rounds: exactly one `applied` per
 * round, one journal per round in the database, and verify passes.
 *
 * Modes: pay (default), nolayers (pay with layers 1 and 2 disabled: the
 * unique index alone), refund (REFUND_SUCCESS), share (profit sharing with
 * layer 1 disabled: no state machine, the unique index alone).
 *
 * --committer: every process (the threads' one and each forked one) starts
 * its own committer (as `payonce serve` does: PostgreSQL with 4 workers)
 * and the participants hand their event to it and wait, the path every
 * callback takes.
 */
#include "../support/testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PARTICIPANTS_MAX 64
#define ROUNDS_MAX 10000
#define RETRIES_MAX 200

enum mode { M_PAY, M_NOLAYERS, M_REFUND, M_SHARE };

/* Lives in MAP_SHARED memory: seen by threads and forked processes. */
struct shared {
    pthread_barrier_t barrier;
    atomic_int applied_in_round[ROUNDS_MAX];
    atomic_long applied, dup[4], rejected, suspense, retries, gave_up;
};

static struct shared *sh;
static char url[T_URL_MAX];
static enum mode mode = M_PAY;
static int rounds = 1000;
static bool via_committer;
static struct po_committer *committer; /* this process's, in --committer mode */
static struct po_engine_cfg engine_cfg;

static void start_committer(const char *backend)
{
    char err[PO_ERRBUF_SIZE] = "";
    struct po_committer_cfg cc = {.db_url = url,
                                  .workers = strcmp(backend, "sqlite") == 0 ? 1 : 4,
                                  .batch_max = 128,
                                  .queue_max = 4096,
                                  .engine = &engine_cfg};
    if (po_committer_start(&cc, &committer, err, sizeof err)) {
        fprintf(stderr, "committer: %s\n", err);
        exit(1);
    }
}

static struct po_outcome apply_one(struct po_store *s, const struct po_event *ev)
{
    if (!via_committer)
        return t_apply(s, &engine_cfg, ev);
    struct po_commit_item it = {.ev = *ev};
    po_committer_apply(committer, &it);
    return it.out;
}

static struct po_event round_event(int r, int participant)
{
    char no[32], id[32];
    snprintf(no, sizeof no, "RACE-%d", r);
    snprintf(id, sizeof id, "42%010d", r);
    struct po_event ev;
    switch (mode) {
    case M_REFUND: {
        char rno[32];
        snprintf(rno, sizeof rno, "RF-%d", r);
        ev = t_refund_event(PO_EV_REFUND_SUCCESS, no, rno, id, 100);
        break;
    }
    case M_SHARE:
        ev = t_share_event(no, id, "r1", 10);
        break;
    default:
        ev = t_pay_event(no, id, 100);
        break;
    }
    /* The replay and the live callback carry the same key. */
    ev.source = participant % 2 ? PO_SRC_RECONCILIATION : PO_SRC_CALLBACK;
    return ev;
}

static void participant(int id)
{
    struct po_store *s = t_open(url);
    for (int r = 0; r < rounds; r++) {
        struct po_event ev = round_event(r, id);
        pthread_barrier_wait(&sh->barrier);
        struct po_outcome o;
        int tries = 0;
        for (;;) {
            o = apply_one(s, &ev);
            if (o.kind != PO_OUT_RETRY)
                break;
            atomic_fetch_add(&sh->retries, 1);
            if (++tries >= RETRIES_MAX) {
                atomic_fetch_add(&sh->gave_up, 1);
                break;
            }
            struct timespec ts = {0, 1000000L * (tries % 10 + 1)};
            nanosleep(&ts, NULL);
        }
        switch (o.kind) {
        case PO_OUT_APPLIED:
            atomic_fetch_add(&sh->applied, 1);
            atomic_fetch_add(&sh->applied_in_round[r], 1);
            break;
        case PO_OUT_DUPLICATE:
            atomic_fetch_add(&sh->dup[o.layer], 1);
            break;
        case PO_OUT_REJECTED:
            atomic_fetch_add(&sh->rejected, 1);
            break;
        case PO_OUT_SUSPENSE:
            atomic_fetch_add(&sh->suspense, 1);
            break;
        default:
            break;
        }
    }
    po_store_close(s);
}

static void *thread_main(void *arg)
{
    participant((int)(intptr_t)arg);
    return NULL;
}

static void seed(void)
{
    struct po_store *s = t_open(url);
    t_seed_tenant(s);
    for (int r = 0; r < rounds; r++) {
        struct po_event pay = round_event(r, 0);
        char no[32];
        snprintf(no, sizeof no, "RACE-%d", r);
        t_seed_order(s, no, 100);
        if (mode == M_REFUND || mode == M_SHARE) {
            char txn[32];
            snprintf(txn, sizeof txn, "43%010d", r);
            struct po_event p = t_pay_event(no, txn, 100);
            if (t_apply(s, NULL, &p).kind != PO_OUT_APPLIED) {
                fprintf(stderr, "seed payment failed\n");
                exit(1);
            }
        }
        if (mode == M_REFUND) {
            t_seed_refund(s, no, pay.out_refund_no, 100);
        }
    }
    po_store_close(s);
}

/* "sqlite" or "postgres" (argv[1]); the racers: threads here, procs
 * processes forked (--threads, --procs). */
static const char *backend;
static int threads = 16, procs = 4;

/* The one case: n participants deliver every round's payment at once. */
static void the_race(void **state)
{
    (void)state;
    int n = threads + procs;
    static const char *const mode_names[] = {"pay", "nolayers", "refund", "share"};
    t_db_create(backend, url, sizeof url);
    seed();

    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&sh->barrier, &ba, (unsigned)n);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pids[PARTICIPANTS_MAX];
    for (int p = 0; p < procs; p++) { /* fork before any thread exists */
        pids[p] = fork();
        if (pids[p] == 0) {
            if (via_committer)
                start_committer(backend);
            participant(threads + p);
            po_committer_stop(committer);
            _exit(0);
        }
    }
    if (via_committer)
        start_committer(backend);
    pthread_t th[PARTICIPANTS_MAX];
    for (int t = 0; t < threads; t++)
        pthread_create(&th[t], NULL, thread_main, (void *)(intptr_t)t);
    for (int t = 0; t < threads; t++)
        pthread_join(th[t], NULL);
    po_committer_stop(committer);
    int failed = 0;
    for (int p = 0; p < procs; p++) {
        int st = 0;
        waitpid(pids[p], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "process %d failed (status %d)\n", p, st);
            failed = 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

    int bad_rounds = 0;
    for (int r = 0; r < rounds; r++)
        if (atomic_load(&sh->applied_in_round[r]) != 1) {
            if (bad_rounds++ < 5)
                fprintf(stderr, "round %d: applied %d times\n", r,
                        atomic_load(&sh->applied_in_round[r]));
        }
    struct po_store *s = t_open(url);
    const char *kind = mode == M_REFUND ? "REFUND" : mode == M_SHARE ? "PROFIT_SHARE" : "PAY";
    struct po_param kp[] = {PO_TEXT(kind)};
    int64_t journals = t_count(s,
                               "SELECT COUNT(*) FROM journal WHERE kind = ? AND out_trade_no"
                               " LIKE 'RACE-%'",
                               kp, 1);
    int64_t records = t_count(s, "SELECT COUNT(*) FROM notify_log", NULL, 0);
    int violations = t_verify(s);
    po_store_close(s);
    t_db_drop(url);

    long attempts = (long)n * rounds;
    t_figure("# race[%s] mode=%s%s threads=%d processes=%d rounds=%d: %ld deliveries in %.1f s\n",
             backend, mode_names[mode], via_committer ? " via committers" : "", threads, procs,
             rounds, attempts, secs);
    t_figure("#   applied=%ld duplicate(layer1=%ld layer2=%ld layer3=%ld) rejected=%ld"
             " suspense=%ld retries=%ld gave_up=%ld\n",
             atomic_load(&sh->applied), atomic_load(&sh->dup[1]), atomic_load(&sh->dup[2]),
             atomic_load(&sh->dup[3]), atomic_load(&sh->rejected), atomic_load(&sh->suspense),
             atomic_load(&sh->retries), atomic_load(&sh->gave_up));
    t_figure("#   journals=%lld processed_records=%lld rounds_not_credited_once=%d"
             " verify_violations=%d\n",
             (long long)journals, (long long)records, bad_rounds, violations);
    T_CHECK(!failed && bad_rounds == 0 && atomic_load(&sh->applied) == rounds &&
                journals == rounds && violations == 0 && atomic_load(&sh->gave_up) == 0 &&
                atomic_load(&sh->rejected) == 0 && atomic_load(&sh->suspense) == 0,
            "race[%s]: every round credited once, nothing given up, rejected or in suspense,"
            " the ledger verifies (the figures above)",
            backend);
}

int main(int argc, char **argv)
{
    backend = t_backend(argc, argv);
    po_log_set_level(PO_LOG_ERROR);
    for (int i = 2; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (strcmp(argv[i], "--committer") == 0)
            via_committer = true;
        else if (strcmp(argv[i], "--threads") == 0 && ++i)
            threads = atoi(v); /* lint-ok: test arguments */
        else if (strcmp(argv[i], "--procs") == 0 && ++i)
            procs = atoi(v); /* lint-ok */
        else if (strcmp(argv[i], "--rounds") == 0 && ++i)
            rounds = atoi(v); /* lint-ok */
        else if (strcmp(argv[i], "--mode") == 0 && ++i)
            mode = strcmp(v, "nolayers") == 0 ? M_NOLAYERS
                   : strcmp(v, "refund") == 0 ? M_REFUND
                   : strcmp(v, "share") == 0  ? M_SHARE
                                              : M_PAY;
    }
    int n = threads + procs;
    if (n < 2 || n > PARTICIPANTS_MAX || rounds < 1 || rounds > ROUNDS_MAX) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    if (mode == M_NOLAYERS)
        engine_cfg.disabled_layers = PO_ENGINE_NO_LAYER1 | PO_ENGINE_NO_LAYER2;
    if (mode == M_SHARE)
        engine_cfg.disabled_layers = PO_ENGINE_NO_LAYER1;
    const struct CMUnitTest tests[] = {cmocka_unit_test(the_race)};
    char name[64];
    (void)snprintf(name, sizeof name, "race[%s]", backend);
    return T_RUN_GROUP(name, tests, NULL, NULL);
}
