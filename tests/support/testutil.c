/*
 * testutil.c — see testutil.h. Test code: failures abort loudly.
 */
#include "testutil.h"

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Atomic int t_passes, t_failures;
FILE *t_report;

/* The case T_CHECK may end (the thread running its body), and what was
 * counted by t_fail while it ran. */
static struct {
    pthread_mutex_t mu;
    bool in_body;
    pthread_t thread;
    const struct CMUnitTest *tests;
    size_t next;
    int counted;     /* t_fail's calls since the case's setup began */
    bool keep_going; /* PAYONCE_TEST_KEEP_GOING: every check counts, none ends */
    int serial;      /* of the case running now; 0 between cases */
    int last_serial;
    void (*after[4])(int serial);
    int nafter;
} C = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void say_failed(const char *fmt, va_list ap)
{
    FILE *f = t_report ? t_report : stderr;
    char msg[4096];
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    pthread_mutex_lock(&C.mu);
    fprintf(f, "FAIL: %s\n", msg);
    fflush(f);
    pthread_mutex_unlock(&C.mu);
}

void t_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    t_failures++;
    say_failed(fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&C.mu);
    C.counted++;
    pthread_mutex_unlock(&C.mu);
}

void t_check_failed(const char *file, int line, const char *fmt, ...)
{
    pthread_mutex_lock(&C.mu);
    bool ends = C.in_body && !C.keep_going && pthread_equal(pthread_self(), C.thread);
    pthread_mutex_unlock(&C.mu);
    va_list ap;
    va_start(ap, fmt);
    if (!ends) {
        char msg[4096];
        (void)vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        t_fail("%s (%s:%d)", msg, file, line);
        return;
    }
    t_failures++;
    say_failed(fmt, ap);
    va_end(ap);
    _fail(file, line); /* cmocka's fail(): the case ends here */
}

int t_case_serial(void)
{
    pthread_mutex_lock(&C.mu);
    int serial = C.serial;
    pthread_mutex_unlock(&C.mu);
    return serial;
}

void t_after_each_case(void (*fn)(int serial))
{
    pthread_mutex_lock(&C.mu);
    bool known = false;
    for (int i = 0; i < C.nafter; i++)
        known = known || C.after[i] == fn;
    if (!known && C.nafter < 4)
        C.after[C.nafter++] = fn;
    pthread_mutex_unlock(&C.mu);
}

static int case_setup(void **state)
{
    pthread_mutex_lock(&C.mu);
    const struct CMUnitTest *t = &C.tests[C.next++];
    C.serial = ++C.last_serial;
    C.counted = 0;
    C.in_body = false;
    C.thread = pthread_self();
    pthread_mutex_unlock(&C.mu);
    int rc = t->setup_func ? t->setup_func(state) : 0;
    pthread_mutex_lock(&C.mu);
    if (C.counted)
        rc = -1;
    C.in_body = rc == 0;
    pthread_mutex_unlock(&C.mu);
    return rc;
}

static int case_teardown(void **state)
{
    pthread_mutex_lock(&C.mu);
    const struct CMUnitTest *t = &C.tests[C.next - 1];
    C.in_body = false;
    pthread_mutex_unlock(&C.mu);
    int rc = t->teardown_func ? t->teardown_func(state) : 0;
    pthread_mutex_lock(&C.mu);
    int serial = C.serial, nafter = C.nafter;
    void (*after[4])(int);
    memcpy(after, C.after, sizeof after);
    pthread_mutex_unlock(&C.mu);
    for (int i = 0; i < nafter; i++)
        after[i](serial);
    pthread_mutex_lock(&C.mu);
    C.serial = 0;
    int counted = C.counted;
    pthread_mutex_unlock(&C.mu);
    if (counted) {
        print_error("%d failure(s) counted while the case ran: in its fixtures, on other threads"
                    " or by t_fail (the FAIL lines above)\n",
                    counted);
        rc = -1;
    }
    return rc;
}

int t_run_group(const char *name, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                CMFixtureFunction teardown)
{
    struct CMUnitTest *wrapped = calloc(n ? n : 1, sizeof *wrapped);
    if (!wrapped) {
        fprintf(stderr, "testutil: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        wrapped[i] = tests[i];
        wrapped[i].setup_func = case_setup;
        wrapped[i].teardown_func = case_teardown;
    }
    const char *go = getenv("PAYONCE_TEST_KEEP_GOING");
    C.tests = tests;
    C.next = 0;
    C.keep_going = go && *go && strcmp(go, "0") != 0;
    int before = t_failures;
    int rc = _cmocka_run_group_tests(name, wrapped, n, setup, teardown);
    free(wrapped);
    if (rc == 0 && t_failures > before)
        print_error("%s: %d check(s) failed outside its cases\n", name, t_failures - before);
    if (rc == 0 && t_failures == 0)
        return 0;
    /* A case that failed in its body may have left what it started running
     * (a gateway's threads, a sink): the process ends here, before the
     * libraries' exit handlers run under them. Children die with it
     * (PR_SET_PDEATHSIG); the temporary files stay for the post-mortem. */
    printf("%s: failed; exiting now (temporary files kept)\n", name);
    fflush(NULL);
    _exit(1);
}

#define DIE(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, "testutil: " __VA_ARGS__);                                                 \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)

const char *t_backend(int argc, char **argv)
{
    const char *b = argc > 1 ? argv[1] : "sqlite";
    if (strcmp(b, "sqlite") == 0)
        return b;
    if (strcmp(b, "postgres") != 0)
        DIE("backend must be sqlite or postgres, not %s", b);
    const char *pg = getenv("PAYONCE_TEST_PG");
    if (!pg || !*pg) {
        if (getenv("PAYONCE_REQUIRE_PG"))
            DIE("PAYONCE_TEST_PG is not set but PAYONCE_REQUIRE_PG is: no PostgreSQL to test");
        fprintf(stderr, "skipping: PAYONCE_TEST_PG not set (scripts/test.sh starts a server)\n");
        exit(77);
    }
    return b;
}

static void pg_admin(const char *sql)
{
    bool pooled; /* through PgBouncer (tests/e2e/pgbouncer.sh): libpq's URL */
    char *url = po_store_pg_url(getenv("PAYONCE_TEST_PG"), &pooled);
    PGconn *c = PQconnectdb(url);
    free(url);
    if (PQstatus(c) != CONNECTION_OK)
        DIE("cannot connect to PAYONCE_TEST_PG: %s", PQerrorMessage(c));
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        DIE("%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
}

/* Replaces the database name (the path after the last '/') of a libpq URL. */
static void pg_url_with_db(const char *admin, const char *db, char *out, size_t cap)
{
    const char *slash = strrchr(admin, '/');
    const char *q = strchr(admin, '?');
    if (!slash || slash < admin + 13)
        DIE("PAYONCE_TEST_PG must be postgresql://host:port/db");
    int n = snprintf(out, cap, "%.*s/%s%s", (int)(slash - admin), admin, db, q ? q : "");
    if (n < 0 || (size_t)n >= cap)
        DIE("URL too long");
}

void t_db_create(const char *backend, char *url, size_t cap)
{
    static int seq;
    char name[64];
    snprintf(name, sizeof name, "po_t_%ld_%d", (long)getpid(), ++seq);
    if (strcmp(backend, "sqlite") == 0) {
        snprintf(url, cap, "sqlite:%s/%s.db", po_tmp_dir(), name);
        t_db_drop(url); /* a leftover of a dead test that had this pid */
    } else {
        char sql[128];
        snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
        pg_admin(sql);
        pg_url_with_db(getenv("PAYONCE_TEST_PG"), name, url, cap);
    }
    struct po_store *s = t_open(url);
    char err[PO_ERRBUF_SIZE] = "";
    if (po_store_migrate(s, NULL, err, sizeof err))
        DIE("migrate %s: %s", url, err);
    po_store_close(s);
}

/* Copies one file (a database not open anywhere) byte for byte. */
static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    if (!in || !out)
        DIE("copy %s to %s", from, to);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            DIE("write %s", to);
    if (ferror(in) || fclose(out))
        DIE("copy %s to %s", from, to);
    fclose(in);
}

void t_db_clone(const char *src, char *url, size_t cap)
{
    static int seq;
    char name[64];
    snprintf(name, sizeof name, "po_t_%ld_c%d", (long)getpid(), ++seq);
    if (strncmp(src, "sqlite:", 7) == 0) {
        snprintf(url, cap, "sqlite:%s/%s.db", po_tmp_dir(), name);
        t_db_drop(url); /* a leftover of a dead test that had this pid */
        char wal[T_URL_MAX + 8];
        snprintf(wal, sizeof wal, "%s-wal", src + 7);
        if (access(wal, F_OK) == 0)
            DIE("clone %s: it is open somewhere (%s exists)", src, wal);
        copy_file(src + 7, url + 7);
        return;
    }
    const char *db = strrchr(src, '/') + 1;
    char sql[200];
    snprintf(sql, sizeof sql, "CREATE DATABASE %s TEMPLATE %.*s", name, (int)strcspn(db, "?"), db);
    pg_admin(sql);
    pg_url_with_db(getenv("PAYONCE_TEST_PG"), name, url, cap);
}

void t_db_drop(const char *url)
{
    if (strncmp(url, "sqlite:", 7) == 0) {
        char p[T_URL_MAX + 8];
        const char *path = url + 7;
        unlink(path);
        snprintf(p, sizeof p, "%s-wal", path);
        unlink(p);
        snprintf(p, sizeof p, "%s-shm", path);
        unlink(p);
        return;
    }
    const char *db = strrchr(url, '/') + 1;
    char sql[160];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %.*s WITH (FORCE)", (int)strcspn(db, "?"),
             db);
    pg_admin(sql);
}

struct po_store *t_open(const char *url)
{
    struct po_store *s = NULL;
    char err[PO_ERRBUF_SIZE] = "";
    if (po_store_open(url, &s, err, sizeof err))
        DIE("open %s: %s", url, err);
    return s;
}

void t_seed_tenant(struct po_store *s)
{
    char err[PO_ERRBUF_SIZE] = "";
    if (po_tenant_add(s, "t1", "Tenant One", NULL, err, sizeof err) ||
        po_merchant_add(s, "t1", "m1", NULL, err, sizeof err))
        DIE("seed tenant: %s", err);
}

void t_seed_order(struct po_store *s, const char *out_trade_no, int64_t amount)
{
    char err[PO_ERRBUF_SIZE] = "";
    bool created = false;
    struct po_order_spec o = {.tenant = "t1",
                              .merchant = "m1",
                              .out_trade_no = out_trade_no,
                              .amount_minor = amount,
                              .currency = "CNY",
                              .channel = NULL};
    if (po_order_create(s, &o, &created, err, sizeof err) || !created)
        DIE("seed order %s: %s", out_trade_no, err);
}

void t_seed_refund(struct po_store *s, const char *out_trade_no, const char *out_refund_no,
                   int64_t amount)
{
    char err[PO_ERRBUF_SIZE] = "";
    if (po_refund_create(s, "t1", out_trade_no, out_refund_no, amount, err, sizeof err))
        DIE("seed refund %s: %s", out_refund_no, err);
}

static void set(char *dst, size_t cap, const char *src)
{
    if (po_strcpy(dst, cap, src))
        DIE("test value too long: %s", src);
}

static struct po_event base_event(enum po_event_type type, const char *out_trade_no, int64_t amount)
{
    struct po_event ev;
    memset(&ev, 0, sizeof ev);
    set(ev.tenant, sizeof ev.tenant, "t1");
    set(ev.channel, sizeof ev.channel, "wechatpay");
    ev.type = type;
    set(ev.out_trade_no, sizeof ev.out_trade_no, out_trade_no);
    ev.amount_minor = amount;
    set(ev.currency, sizeof ev.currency, "CNY");
    ev.source = PO_SRC_CALLBACK;
    set(ev.occurred_at, sizeof ev.occurred_at, "2026-12-02T10:00:00+08:00");
    return ev;
}

struct po_event t_pay_event(const char *out_trade_no, const char *txn, int64_t amount)
{
    struct po_event ev = base_event(PO_EV_PAY_SUCCESS, out_trade_no, amount);
    set(ev.channel_txn_id, sizeof ev.channel_txn_id, txn);
    return ev;
}

struct po_event t_refund_event(enum po_event_type type, const char *out_trade_no,
                               const char *out_refund_no, const char *refund_id, int64_t amount)
{
    struct po_event ev = base_event(type, out_trade_no, amount);
    set(ev.out_refund_no, sizeof ev.out_refund_no, out_refund_no);
    set(ev.channel_refund_id, sizeof ev.channel_refund_id, refund_id);
    return ev;
}

struct po_event t_share_event(const char *out_trade_no, const char *share_id, const char *receiver,
                              int64_t amount)
{
    struct po_event ev = base_event(PO_EV_PROFIT_SHARE_RESULT, out_trade_no, amount);
    set(ev.channel_txn_id, sizeof ev.channel_txn_id, share_id);
    set(ev.receiver, sizeof ev.receiver, receiver);
    return ev;
}

int64_t t_count(struct po_store *s, const char *sql, const struct po_param *p, int n)
{
    struct po_rows r;
    char err[PO_ERRBUF_SIZE] = "";
    int64_t v = 0;
    if (po_store_exec(s, sql, p, n, &r, NULL, err, sizeof err))
        DIE("%s: %s", sql, err);
    if (r.nrows != 1 || po_rows_i64(&r, 0, 0, &v))
        DIE("%s: expected one integer", sql);
    po_rows_free(&r);
    return v;
}

int64_t t_count_url(const char *url, const char *sql, const char *arg)
{
    struct po_store *s = t_open(url);
    struct po_param p[] = {PO_TEXT(arg)};
    int64_t v = t_count(s, sql, p, arg ? 1 : 0);
    po_store_close(s);
    return v;
}

int64_t t_balance(struct po_store *s, const char *account)
{
    struct po_param p[] = {PO_TEXT(account)};
    return t_count(s,
                   "SELECT COALESCE(SUM(balance), 0) FROM account_balance WHERE tenant_id = 't1'"
                   " AND currency = 'CNY' AND account = ?",
                   p, 1);
}

static void print_violation(void *ctx, const struct po_violation *v)
{
    (void)ctx;
    fprintf(stderr, "VIOLATION %s: %s\n", v->check, v->detail);
}

void t_collect_check(void *ctx, const struct po_violation *v)
{
    struct t_checks *f = ctx;
    size_t n = strlen(f->checks);
    snprintf(f->checks + n, sizeof f->checks - n, " %s ", v->check);
}

int t_verify(struct po_store *s)
{
    int n = -1;
    char err[PO_ERRBUF_SIZE] = "";
    if (po_ledger_verify(s, print_violation, NULL, &n, err, sizeof err))
        DIE("verify: %s", err);
    return n;
}

struct po_outcome t_apply(struct po_store *s, const struct po_engine_cfg *cfg,
                          const struct po_event *ev)
{
    struct po_outcome o;
    memset(&o, 0, sizeof o);
    po_engine_apply(s, cfg, ev, &o);
    return o;
}

void t_figure(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fputs(line, stdout);
    fflush(stdout);
    const char *path = getenv("PAYONCE_FIGURES");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (f) {
        fputs(line, f);
        fclose(f);
    }
}

const char *t_fx_backend;

/* The cases' template on SQLite: one database migrated per process, dropped
 * at its exit (by that process only: a forked child makes its own). */
static char fx_tmpl[T_URL_MAX];
static pid_t fx_tmpl_pid;

static void fx_tmpl_drop(void)
{
    if (fx_tmpl_pid == getpid() && fx_tmpl[0])
        t_db_drop(fx_tmpl);
}

int t_fx_setup(void **state)
{
    static struct t_fx f;
    memset(&f, 0, sizeof f);
    /* On SQLite each case's database is a copy of one migrated for the
     * process (t_db_clone's file copy), the same schema a migration per
     * case gave, in a fraction of its time (issue 46: the seven cmocka
     * store programs 21.5 -> 12.2 s under ASan). On PostgreSQL a clone
     * (CREATE DATABASE … TEMPLATE) was no faster than creating and
     * migrating (73.8 -> 86.4 s, one after another): created as before. */
    if (strcmp(t_fx_backend, "sqlite") != 0) {
        t_db_create(t_fx_backend, f.url, sizeof f.url);
    } else {
        if (fx_tmpl_pid != getpid()) {
            t_db_create(t_fx_backend, fx_tmpl, sizeof fx_tmpl);
            if (!fx_tmpl_pid && atexit(fx_tmpl_drop))
                DIE("atexit");
            fx_tmpl_pid = getpid();
        }
        t_db_clone(fx_tmpl, f.url, sizeof f.url);
    }
    f.s = t_open(f.url);
    *state = &f;
    return 0;
}

int t_fx_setup_seeded(void **state)
{
    t_fx_setup(state);
    t_seed_tenant(((struct t_fx *)*state)->s);
    return 0;
}

int t_fx_teardown(void **state)
{
    struct t_fx *f = *state;
    po_store_close(f->s);
    t_db_drop(f->url);
    return 0;
}

int t_dial(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {10, 0};
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) ||
        connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        DIE("connect to port %u failed", port);
    return fd;
}

unsigned t_exchange(int fd, const char *req, size_t len, char *out, size_t cap)
{
    if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len)
        return 0;
    char buf[8192];
    size_t have = 0;
    for (;;) {
        ssize_t k = recv(fd, buf + have, sizeof buf - 1 - have, 0);
        if (k <= 0)
            return 0;
        have += (size_t)k;
        buf[have] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (!end)
            continue;
        unsigned status = 0;
        size_t clen = 0;
        char *cl = strcasestr(buf, "\r\nContent-Length:");
        if (cl && cl < end)
            clen = strtoul(cl + 17, NULL, 10);
        if (sscanf(buf, "HTTP/1.1 %u", &status) != 1)
            return 0;
        if (have >= (size_t)(end + 4 - buf) + clen || have == sizeof buf - 1) {
            if (out)
                (void)snprintf(out, cap, "%s", buf);
            return status;
        }
    }
}
