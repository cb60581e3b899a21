/*
 * test_history.c — seeded simulation: random histories against the engine
 * and the store, invariants checked after every step.
 *
 *   test_history BACKEND [--seeds N] [--steps S] [--seed X]
 *
 * From a seed (a xorshift generator), a history over one tenant's orders:
 * payments delivered and re-delivered, replayed by reconciliation, a second
 * payment of a paid or closed order, wrong amounts, closes, bursts of the
 * same event from three connections at once, "crashes" (the transaction
 * fails at a random statement, including COMMIT), refund requests (over the
 * payment too) and their results, profit sharing. A reference model
 * predicts each step's outcome (applied, duplicate, rejected, suspense;
 * retry after a crash, with nothing changed); after every step the tenant's
 * rows must match the model and the ledger's invariants must hold: each
 * payment credited at most once, journals balanced, cached balances equal
 * to their postings, refunds never above the payment. `payonce verify`'s
 * full check runs after every 50 seeds and at the end. A failure prints the
 * seed; `--seed X` replays exactly that history.
 */
#include "../support/testutil.h"

#include "../../src/engine/objects.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ORDERS 4
#define REFUNDS_MAX 6

static char url[T_URL_MAX];
static struct po_store *S, *burst_conn[3];
static uint64_t rng;
static int seed_failed;
static uint64_t current_seed;
static int current_step;
static struct {
    long steps, applied, duplicates, rejected, suspense, retries, bursts, crashes, refunds;
} tally;

static void die(const char *what)
{
    fprintf(stderr, "history: %s\n", what);
    exit(1);
}

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int pick(int n)
{
    return (int)(next() % (uint64_t)n);
}

/* A broken prediction: a failed check (t_fail) naming the seed and step
 * to replay; the seed stops at its first. */
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        char what_[512];                                                                           \
        (void)snprintf(what_, sizeof what_, __VA_ARGS__);                                          \
        what_[strcspn(what_, "\n")] = '\0';                                                        \
        t_fail("history seed=%llu step=%d: %s  (replay: test_history BACKEND --seed %llu)",        \
               (unsigned long long)current_seed, current_step, what_,                              \
               (unsigned long long)current_seed);                                                  \
        seed_failed = 1;                                                                           \
    } while (0)

enum status { PAYING, PAID, CLOSED };
static const char *const STATUS[] = {"PAYING", "PAID", "CLOSED"};

struct refund {
    char no[48], id[48];
    int64_t amount;
    int state; /* 0 PROCESSING, 1 SUCCESS */
};

static struct model {
    char tenant[32];
    char no[ORDERS][32];
    int64_t amount[ORDERS];
    enum status st[ORDERS];
    char paid_txn[ORDERS][48]; /* the txn that paid it */
    int suspense;              /* journals of kind SUSPENSE */
    int64_t reserved[ORDERS], refunded[ORDERS];
    struct refund rf[ORDERS][REFUNDS_MAX];
    int nrf[ORDERS];
    bool shared[ORDERS];
    /* events sent so far, for re-delivery: their outcome is known */
    struct po_event sent[64];
    int nsent;
} m;

static struct po_event pay_event(int o, const char *txn, int64_t amount)
{
    struct po_event ev = t_pay_event(m.no[o], txn, amount);
    PO_ASSERT(po_strcpy(ev.tenant, sizeof ev.tenant, m.tenant) == PO_OK);
    return ev;
}

static void remember(const struct po_event *ev)
{
    if (m.nsent < (int)PO_NELEM(m.sent))
        m.sent[m.nsent++] = *ev;
}

static void count(const struct po_outcome *o)
{
    switch (o->kind) {
    case PO_OUT_APPLIED:
        tally.applied++;
        break;
    case PO_OUT_DUPLICATE:
        tally.duplicates++;
        break;
    case PO_OUT_REJECTED:
        tally.rejected++;
        break;
    case PO_OUT_SUSPENSE:
        tally.suspense++;
        break;
    default:
        tally.retries++;
    }
}

static void expect(const struct po_outcome *o, enum po_outcome_kind want, const char *what)
{
    count(o);
    if (o->kind != want)
        FAIL("%s: outcome %s (%s), model says %s\n", what, po_outcome_name(o->kind),
             po_reason_name(o->reason), po_outcome_name(want));
}

/* ---- the steps ---- */

/* A payment of order o by txn: what the model predicts, then applied. */
static enum po_outcome_kind predict_pay(int o, const char *txn, int64_t amount)
{
    if (amount != m.amount[o])
        return PO_OUT_REJECTED;
    if (m.st[o] == PAYING)
        return PO_OUT_APPLIED;
    if (m.st[o] == PAID && strcmp(m.paid_txn[o], txn) == 0)
        return PO_OUT_DUPLICATE;
    return PO_OUT_SUSPENSE; /* paid twice, or paid after close */
}

static void model_pay(int o, const char *txn, enum po_outcome_kind k)
{
    if (k == PO_OUT_APPLIED) {
        m.st[o] = PAID;
        PO_ASSERT(po_strcpy(m.paid_txn[o], sizeof m.paid_txn[o], txn) == PO_OK);
    } else if (k == PO_OUT_SUSPENSE) {
        m.suspense++;
    }
}

static int order_of(const char *no)
{
    for (int o = 0; o < ORDERS; o++)
        if (strcmp(m.no[o], no) == 0)
            return o;
    return -1;
}

/* A suspense event's key is recorded once: its re-delivery is a duplicate. */
static bool seen_suspense(const struct po_event *ev)
{
    struct po_param p[] = {PO_TEXT(m.tenant), PO_TEXT(ev->channel_txn_id)};
    return t_count(S,
                   "SELECT COUNT(*) FROM notify_log WHERE tenant_id = ? AND outcome = 'suspense'"
                   " AND idem_key LIKE '%' || ? || '%'",
                   p, 2) > 0;
}

static void step_pay(int o, const char *txn, int64_t amount, enum po_source src)
{
    struct po_event ev = pay_event(o, txn, amount);
    ev.source = src;
    enum po_outcome_kind want = predict_pay(o, txn, amount);
    if (want == PO_OUT_SUSPENSE && seen_suspense(&ev))
        want = PO_OUT_DUPLICATE;
    struct po_outcome out = t_apply(S, NULL, &ev);
    expect(&out, want, "payment");
    model_pay(o, txn, out.kind == want ? want : PO_OUT_RETRY);
    remember(&ev);
}

static void step_redeliver(void)
{
    if (!m.nsent)
        return;
    struct po_event ev = m.sent[pick(m.nsent)];
    if (pick(2))
        ev.source = PO_SRC_RECONCILIATION; /* a replay of the same key */
    int o = order_of(ev.out_trade_no);
    enum po_outcome_kind want = predict_pay(o, ev.channel_txn_id, ev.amount_minor);
    if (want == PO_OUT_SUSPENSE && seen_suspense(&ev))
        want = PO_OUT_DUPLICATE;
    struct po_outcome out = t_apply(S, NULL, &ev);
    expect(&out, want, "re-delivery");
    model_pay(o, ev.channel_txn_id, out.kind == want ? want : PO_OUT_RETRY);
}

struct burst {
    struct po_store *s;
    struct po_event ev;
    struct po_outcome out;
    pthread_barrier_t *go;
};

static void *burst_one(void *arg)
{
    struct burst *b = arg;
    pthread_barrier_wait(b->go);
    for (int tries = 0; tries < 50; tries++) {
        memset(&b->out, 0, sizeof b->out);
        po_engine_apply(b->s, NULL, &b->ev, &b->out);
        if (b->out.kind != PO_OUT_RETRY)
            break; /* a channel retries a FAIL */
    }
    return NULL;
}

/* The same payment from three connections at once: one applied, the others
 * duplicates (on SQLite they are serialised; the result is the same). */
static void step_burst(int o, const char *txn)
{
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 3);
    struct burst b[3];
    pthread_t th[3];
    enum po_outcome_kind want = predict_pay(o, txn, m.amount[o]);
    struct po_event ev = pay_event(o, txn, m.amount[o]);
    if (want == PO_OUT_SUSPENSE && seen_suspense(&ev))
        want = PO_OUT_DUPLICATE;
    for (int i = 0; i < 3; i++) {
        b[i] = (struct burst){burst_conn[i], ev, {0}, &go};
        pthread_create(&th[i], NULL, burst_one, &b[i]);
    }
    int applied = 0, suspense = 0, dup = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        count(&b[i].out);
        applied += b[i].out.kind == PO_OUT_APPLIED;
        suspense += b[i].out.kind == PO_OUT_SUSPENSE;
        dup += b[i].out.kind == PO_OUT_DUPLICATE;
    }
    pthread_barrier_destroy(&go);
    tally.bursts++;
    int firsts = want == PO_OUT_APPLIED ? applied : want == PO_OUT_SUSPENSE ? suspense : 0;
    if ((want == PO_OUT_APPLIED || want == PO_OUT_SUSPENSE) && (firsts != 1 || dup != 2))
        FAIL("burst: %d applied, %d suspense, %d duplicates; model says one %s\n", applied,
             suspense, dup, po_outcome_name(want));
    if (want == PO_OUT_DUPLICATE && dup != 3)
        FAIL("burst of a processed event: %d duplicates of 3\n", dup);
    model_pay(o, txn, want);
    remember(&ev);
}

struct crash {
    int at, seen;
};
static po_err crash_at(void *ctx, int index, const char *sql)
{
    (void)sql;
    struct crash *c = ctx;
    c->seen = index + 1;
    return index == c->at ? PO_ERR_TRANSIENT : PO_OK;
}

/* The transaction dies at its k-th statement (COMMIT included): retry,
 * and nothing of it stays; or it got through (k past its end). */
static void step_crash(int o, const char *txn)
{
    struct crash c = {pick(12), 0};
    struct po_event ev = pay_event(o, txn, m.amount[o]);
    enum po_outcome_kind want = predict_pay(o, txn, m.amount[o]);
    if (want == PO_OUT_SUSPENSE && seen_suspense(&ev))
        want = PO_OUT_DUPLICATE;
    po_store_set_fault_hook(S, crash_at, &c);
    struct po_outcome out = t_apply(S, NULL, &ev);
    po_store_set_fault_hook(S, NULL, NULL);
    tally.crashes++;
    count(&out);
    if (out.kind == PO_OUT_RETRY)
        return; /* nothing may have changed: the checks below see it */
    if (out.kind != want)
        FAIL("crash at %d of %d: outcome %s, model says %s\n", c.at, c.seen,
             po_outcome_name(out.kind), po_outcome_name(want));
    model_pay(o, txn, want);
    remember(&ev);
}

static void step_close(int o)
{
    bool now = false;
    char code[48] = "", err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_order_close(S, m.tenant, m.no[o], &now, code, sizeof code, err, sizeof err);
    bool ok = m.st[o] != PAID;
    if ((rc == PO_OK) != ok)
        FAIL("close of a %s order: %s %s\n", STATUS[m.st[o]], po_err_name(rc), err);
    if (ok)
        m.st[o] = CLOSED;
}

static void step_refund_request(int o)
{
    if (m.nrf[o] >= REFUNDS_MAX)
        return;
    int64_t amount = 1 + pick((int)m.amount[o]);
    struct refund *r = &m.rf[o][m.nrf[o]];
    char rno[sizeof r->no];
    snprintf(rno, sizeof rno, "%s-R%d", m.no[o], m.nrf[o]);
    PO_ASSERT(po_strcpy(r->no, sizeof r->no, rno) == PO_OK);
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_refund_create(S, m.tenant, m.no[o], r->no, amount, err, sizeof err);
    bool ok = m.st[o] == PAID && m.reserved[o] + amount <= m.amount[o];
    if ((rc == PO_OK) != ok)
        FAIL("refund %lld of %lld (reserved %lld, %s): %s %s\n", (long long)amount,
             (long long)m.amount[o], (long long)m.reserved[o], STATUS[m.st[o]], po_err_name(rc),
             err);
    if (rc == PO_OK) {
        r->amount = amount;
        r->state = 0;
        snprintf(r->id, sizeof r->id, "503%llu%d%d", (unsigned long long)current_seed, o, m.nrf[o]);
        m.reserved[o] += amount;
        m.nrf[o]++;
        tally.refunds++;
    }
}

static void step_refund_result(int o)
{
    if (!m.nrf[o])
        return;
    struct refund *r = &m.rf[o][pick(m.nrf[o])];
    struct po_event ev = t_refund_event(PO_EV_REFUND_SUCCESS, m.no[o], r->no, r->id, r->amount);
    PO_ASSERT(po_strcpy(ev.tenant, sizeof ev.tenant, m.tenant) == PO_OK);
    struct po_outcome out = t_apply(S, NULL, &ev);
    expect(&out, r->state == 0 ? PO_OUT_APPLIED : PO_OUT_DUPLICATE, "refund result");
    if (out.kind == PO_OUT_APPLIED) {
        r->state = 1;
        m.refunded[o] += r->amount;
    }
}

static void step_share(int o)
{
    char share[48];
    snprintf(share, sizeof share, "30%llu%d", (unsigned long long)current_seed, o);
    struct po_event ev = t_share_event(m.no[o], share, "rcv1", 1);
    PO_ASSERT(po_strcpy(ev.tenant, sizeof ev.tenant, m.tenant) == PO_OK);
    struct po_outcome out = t_apply(S, NULL, &ev);
    if (m.st[o] != PAID) {
        if (out.kind != PO_OUT_REJECTED)
            FAIL("sharing of an unpaid order: %s\n", po_outcome_name(out.kind));
        count(&out);
        return;
    }
    expect(&out, m.shared[o] ? PO_OUT_DUPLICATE : PO_OUT_APPLIED, "profit sharing");
    if (out.kind == PO_OUT_APPLIED)
        m.shared[o] = true;
}

/* ---- the invariants, this tenant's rows against the model ---- */

static int64_t q(const char *sql, const char *no)
{
    struct po_param p[] = {PO_TEXT(m.tenant), PO_TEXT(no ? no : "")};
    return t_count(S, sql, p, no ? 2 : 1);
}

static void check(void)
{
    for (int o = 0; o < ORDERS; o++) {
        char sql[160];
        snprintf(sql, sizeof sql,
                 "SELECT COUNT(*) FROM pay_order WHERE tenant_id = ? AND out_trade_no = ? AND"
                 " status = '%s'",
                 STATUS[m.st[o]]);
        if (q(sql, m.no[o]) != 1)
            FAIL("order %d is not %s\n", o, STATUS[m.st[o]]);
        int64_t pays = q("SELECT COUNT(*) FROM journal WHERE tenant_id = ? AND out_trade_no = ? AND"
                         " kind = 'PAY'",
                         m.no[o]);
        if (pays != (m.st[o] == PAID ? 1 : 0))
            FAIL("order %d (%s): %lld payment journals\n", o, STATUS[m.st[o]], (long long)pays);
        if (q("SELECT refunded_amount FROM pay_order WHERE tenant_id = ? AND out_trade_no = ?",
              m.no[o]) != m.refunded[o] ||
            q("SELECT refund_reserved FROM pay_order WHERE tenant_id = ? AND out_trade_no = ?",
              m.no[o]) != m.reserved[o])
            FAIL("order %d: refunded/reserved differ from the model (%lld/%lld)\n", o,
                 (long long)m.refunded[o], (long long)m.reserved[o]);
        if (m.refunded[o] > m.amount[o] || m.reserved[o] > m.amount[o])
            FAIL("order %d: refunds above the payment\n", o);
    }
    if (q("SELECT COUNT(*) FROM journal WHERE tenant_id = ? AND kind = 'SUSPENSE'", NULL) !=
        m.suspense)
        FAIL("suspense journals differ from the model (%d)\n", m.suspense);
    if (q("SELECT COUNT(*) FROM (SELECT idem_key FROM posting WHERE tenant_id = ? GROUP BY"
          " idem_key, currency HAVING SUM(amount) <> 0) x",
          NULL))
        FAIL("an unbalanced journal\n");
    struct po_param p[] = {PO_TEXT(m.tenant), PO_TEXT(m.tenant)};
    if (t_count(S,
                "SELECT COUNT(*) FROM (SELECT account, currency, SUM(amount) AS s FROM posting"
                " WHERE tenant_id = ? GROUP BY account, currency) x LEFT JOIN account_balance b"
                " ON b.tenant_id = ? AND b.account = x.account AND b.currency = x.currency"
                " WHERE COALESCE(b.balance, 0) <> x.s",
                p, 2))
        FAIL("a cached balance differs from its postings\n");
}

/* ---- one seed ---- */

static void history(uint64_t seed, int steps)
{
    char err[PO_ERRBUF_SIZE] = "";
    memset(&m, 0, sizeof m);
    current_seed = seed;
    seed_failed = 0;
    rng = seed * UINT64_C(0x9E3779B97F4A7C15) + 1;
    snprintf(m.tenant, sizeof m.tenant, "h%llu", (unsigned long long)seed);
    if (po_tenant_add(S, m.tenant, m.tenant, NULL, err, sizeof err) ||
        po_merchant_add(S, m.tenant, "m1", NULL, err, sizeof err))
        die(err);
    for (int o = 0; o < ORDERS; o++) {
        snprintf(m.no[o], sizeof m.no[o], "H%llu-%d", (unsigned long long)seed, o);
        m.amount[o] = 1 + pick(10000);
        struct po_order_spec spec = {m.tenant, "m1", m.no[o], m.amount[o], "CNY", NULL};
        bool created = false;
        if (po_order_create(S, &spec, &created, err, sizeof err) || !created)
            die(err);
    }
    for (current_step = 0; current_step < steps && !seed_failed; current_step++) {
        int o = pick(ORDERS);
        char txn[48];
        /* the order's own payment (A) or a second one (B) */
        snprintf(txn, sizeof txn, "42%llu%d%c", (unsigned long long)seed, o, pick(5) ? 'A' : 'B');
        switch (pick(14)) {
        case 0:
        case 1:
        case 2:
            step_pay(o, txn, m.amount[o], PO_SRC_CALLBACK);
            break;
        case 3:
        case 4:
            step_redeliver();
            break;
        case 5:
            step_pay(o, txn, m.amount[o] + 1 + pick(5), PO_SRC_CALLBACK); /* wrong amount */
            break;
        case 6:
            step_burst(o, txn);
            break;
        case 7:
            step_crash(o, txn);
            break;
        case 8:
            if (!pick(3))
                step_close(o);
            break;
        case 9:
        case 10:
            step_refund_request(o);
            break;
        case 11:
        case 12:
            step_refund_result(o);
            break;
        default:
            step_share(o);
        }
        tally.steps++;
        check();
    }
}

/* "sqlite" or "postgres" (argv[1]); how many seeds of how many steps
 * (--seeds, --steps, PAYONCE_SEEDS), or the one to replay (--seed). */
static const char *backend;
static long seeds, steps = 40;
static uint64_t only;

/* The one case: each seed's history played and every step's prediction
 * checked (t_fail names the seed to replay); it stops after five failed
 * seeds. */
static void histories(void **state)
{
    (void)state;
    t_db_create(backend, url, sizeof url);
    S = t_open(url);
    for (int i = 0; i < 3; i++)
        burst_conn[i] = t_open(url);
    int failed = 0;
    long ran = 0;
    for (long k = 0; k < (only ? 1 : seeds); k++) {
        history(only ? only : (uint64_t)k + 1, (int)steps);
        failed += seed_failed;
        ran++;
        if ((ran % 50 == 0 || ran == (only ? 1 : seeds)) && t_verify(S) != 0) {
            printf("history: verify failed after seed %llu\n", (unsigned long long)current_seed);
            failed++;
        }
        if (failed >= 5)
            break;
    }
    for (int i = 0; i < 3; i++)
        po_store_close(burst_conn[i]);
    po_store_close(S);
    t_db_drop(url);
    t_figure("# history[%s] %ld seeds x %ld steps: %ld steps, %ld applied, %ld duplicates,"
             " %ld rejected, %ld suspense, %ld retries (crashes %ld), %ld bursts of 3, %ld refunds;"
             " %d failed\n",
             backend, ran, steps, tally.steps, tally.applied, tally.duplicates, tally.rejected,
             tally.suspense, tally.retries, tally.crashes, tally.bursts, tally.refunds, failed);
    T_CHECK(failed == 0, "history[%s]: %d of %ld seeds failed (the FAIL lines above)", backend,
            failed, ran);
}

int main(int argc, char **argv)
{
    t_report = stdout;
    backend = t_backend(argc, argv);
    po_log_set_level(PO_LOG_ERROR);
    seeds = strcmp(backend, "sqlite") == 0 ? 300 : 150;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--seeds") == 0)
            seeds = strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--steps") == 0)
            steps = strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--seed") == 0)
            only = strtoull(argv[i + 1], NULL, 10);
    }
    if (getenv("PAYONCE_SEEDS"))
        seeds = strtol(getenv("PAYONCE_SEEDS"), NULL, 10);
    const struct CMUnitTest tests[] = {cmocka_unit_test(histories)};
    char name[64];
    (void)snprintf(name, sizeof name, "history[%s]", backend);
    return T_RUN_GROUP(name, tests, NULL, NULL);
}
