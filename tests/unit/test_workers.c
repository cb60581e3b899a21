/*
 * test_workers.c — the worker pool's tenant lanes (src/runtime/workers.c),
 * with jobs that block on a gate the test opens one at a time, so every
 * step is decided by the pool's choice and not by timing:
 *   - a tenant alone takes every thread (work-conserving);
 *   - once another tenant is active, the thread a finished job frees goes
 *     to that tenant's waiting job, not to the first tenant's queued ones,
 *     and the first tenant runs at most its share from then on;
 *   - work of no tenant (a health probe) does not make a lone tenant
 *     "contended";
 *   - a lane's queue is bounded apart from the others';
 *   - stopping runs every queued job, capped or not.
 * Registered in the ThreadSanitizer build too (tsan_workers).
 */
#include "../../src/runtime/runtime.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int tokens; /* gated jobs that may finish now */
static int running[2], started[2], peak[2];
static bool track_peak[2];    /* peak counts only from when set */
static int order[64], norder; /* lanes in the order their jobs started */

struct gated {
    int lane; /* 0: "b", 1: "a" */
    bool gate;
};

static void job(void *arg)
{
    struct gated *g = arg;
    pthread_mutex_lock(&mu);
    running[g->lane]++;
    started[g->lane]++;
    if (norder < 64)
        order[norder++] = g->lane;
    if (track_peak[g->lane] && running[g->lane] > peak[g->lane])
        peak[g->lane] = running[g->lane];
    pthread_cond_broadcast(&cv);
    /* Bounded (10 s): after a failed check the test goes on without it. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    int rc = 0;
    while (g->gate && tokens == 0 && rc == 0)
        rc = pthread_cond_timedwait(&cv, &mu, &until);
    if (g->gate && tokens > 0)
        tokens--;
    running[g->lane]--;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void reset(void)
{
    pthread_mutex_lock(&mu);
    tokens = 0;
    memset(running, 0, sizeof running);
    memset(started, 0, sizeof started);
    memset(peak, 0, sizeof peak);
    memset(track_peak, 0, sizeof track_peak);
    norder = 0;
    pthread_mutex_unlock(&mu);
}

/* Waits (bounded: 10 s) until lane's started count reaches n. */
static bool wait_started(int lane, int n)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&mu);
    int rc = 0;
    while (started[lane] < n && rc == 0)
        rc = pthread_cond_timedwait(&cv, &mu, &until);
    bool ok = started[lane] >= n;
    pthread_mutex_unlock(&mu);
    return ok;
}

static void release(int n)
{
    pthread_mutex_lock(&mu);
    tokens += n;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static int get(const int *v)
{
    pthread_mutex_lock(&mu);
    int n = *v;
    pthread_mutex_unlock(&mu);
    return n;
}

/* A short pause: lets the pool act if it (wrongly) would. */
static void settle(void)
{
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_lanes_fair(void **state)
{
    (void)state;
    reset();
    struct po_workers *w = NULL;
    assert_int_equal(po_workers_start(4, 256, 1, 60000, &w), PO_OK);
    static struct gated b[8], a[3];
    for (int i = 0; i < 8; i++)
        b[i] = (struct gated){0, true};
    /* Alone, b takes all four threads (its share is 1). */
    for (int i = 0; i < 4; i++)
        assert_int_equal(po_workers_submit(w, "b", job, &b[i]), PO_OK);
    assert_true(wait_started(0, 4));
    /* Four more of b's wait; then a arrives. */
    for (int i = 4; i < 8; i++)
        assert_int_equal(po_workers_submit(w, "b", job, &b[i]), PO_OK);
    for (int i = 0; i < 3; i++) {
        a[i] = (struct gated){1, false};
        assert_int_equal(po_workers_submit(w, "a", job, &a[i]), PO_OK);
    }
    settle();
    assert_int_equal(get(&started[1]), 0); /* every thread is b's */
    pthread_mutex_lock(&mu);
    track_peak[0] = true;
    pthread_mutex_unlock(&mu);
    /* One b job ends: the freed thread serves a (all three, one after
     * another: a holds nothing while its job is done), never b's queue. */
    release(1);
    assert_true(wait_started(1, 3));
    settle();
    assert_int_equal(get(&started[0]), 4);
    /* b's remaining three end: b, over its share while a was active
     * within recent_ms, runs one job at a time from now on. */
    release(3);
    assert_true(wait_started(0, 5));
    for (int k = 6; k <= 8; k++) {
        settle();
        assert_int_equal(get(&running[0]), 1);
        release(1);
        assert_true(wait_started(0, k));
    }
    release(1);
    po_workers_free(w);
    assert_int_equal(get(&peak[0]), 1);
    for (int i = 0; i < 4; i++) /* the first four were b's, then a's three */
        assert_int_equal(order[i], 0);
    for (int i = 4; i < 7; i++)
        assert_int_equal(order[i], 1);
}

static void test_probe_is_no_tenant(void **state)
{
    (void)state;
    reset();
    struct po_workers *w = NULL;
    assert_int_equal(po_workers_start(4, 256, 1, 60000, &w), PO_OK);
    static struct gated probe = {1, false}, b[4];
    assert_int_equal(po_workers_submit(w, NULL, job, &probe), PO_OK);
    assert_true(wait_started(1, 1));
    /* The probe is done; b, alone with tenants, still takes every thread. */
    for (int i = 0; i < 4; i++) {
        b[i] = (struct gated){0, true};
        assert_int_equal(po_workers_submit(w, "b", job, &b[i]), PO_OK);
    }
    assert_true(wait_started(0, 4));
    release(4);
    po_workers_free(w);
}

static void test_lane_bound(void **state)
{
    (void)state;
    reset();
    struct po_workers *w = NULL;
    assert_int_equal(po_workers_start(1, PO_QUEUE_MAX, 1, 0, &w), PO_OK);
    static struct gated hold = {0, true}, quick[PO_LANE_QUEUE_MAX + 1], other = {1, false};
    assert_int_equal(po_workers_submit(w, "b", job, &hold), PO_OK);
    assert_true(wait_started(0, 1));
    for (int i = 0; i < PO_LANE_QUEUE_MAX; i++) {
        quick[i] = (struct gated){0, false};
        assert_int_equal(po_workers_submit(w, "b", job, &quick[i]), PO_OK);
    }
    quick[PO_LANE_QUEUE_MAX] = (struct gated){0, false};
    assert_int_equal(po_workers_submit(w, "b", job, &quick[PO_LANE_QUEUE_MAX]), PO_ERR_LIMIT);
    assert_int_equal(po_workers_submit(w, "a", job, &other), PO_OK); /* another lane: room */
    release(1);
    po_workers_free(w); /* stopping runs everything queued */
    assert_int_equal(get(&started[0]), 1 + PO_LANE_QUEUE_MAX);
    assert_int_equal(get(&started[1]), 1);
    /* Round-robin: a's job right after b's next one, not after b's 1024. */
    assert_true(order[1] == 1 || order[2] == 1);
}

static void *stopper(void *arg)
{
    po_workers_stop(arg);
    return NULL;
}

static void test_stop_drains_capped(void **state)
{
    (void)state;
    reset();
    struct po_workers *w = NULL;
    assert_int_equal(po_workers_start(3, 64, 1, 60000, &w), PO_OK);
    static struct gated a = {1, true}, b[6];
    assert_int_equal(po_workers_submit(w, "a", job, &a), PO_OK);
    assert_true(wait_started(1, 1));
    b[0] = (struct gated){0, true};
    for (int i = 1; i < 6; i++)
        b[i] = (struct gated){0, false};
    for (int i = 0; i < 6; i++)
        assert_int_equal(po_workers_submit(w, "b", job, &b[i]), PO_OK);
    assert_true(wait_started(0, 1));
    settle();
    assert_int_equal(get(&started[0]), 1); /* b's others wait: a is active, b at its share */
    /* Stopping runs them on the idle thread, while a's and b's first are
     * still held. */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stopper, w), 0);
    assert_true(wait_started(0, 6));
    assert_int_equal(po_workers_submit(w, "b", job, &b[1]), PO_ERR_LIMIT);
    release(2);
    pthread_join(th, NULL);
    po_workers_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lanes_fair),
        cmocka_unit_test(test_probe_is_no_tenant),
        cmocka_unit_test(test_lane_bound),
        cmocka_unit_test(test_stop_drains_capped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
