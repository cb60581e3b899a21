/*
 * test_io_error.c — SQLite on a failing disk (issue 11's database faults).
 *
 *   test_io_error sqlite
 *
 * A VFS shim, registered as SQLite's default for this process, sits between
 * SQLite and the operating system and makes its k-th file operation (read,
 * write, sync, truncate — of the database, its WAL or its journal) fail
 * with the I/O error a dying disk gives (SQLITE_IOERR_READ / _WRITE /
 * _FSYNC / _TRUNCATE). For every k from 0 until a payment completes without
 * reaching k, and in two modes — the k-th operation alone fails (a
 * transient error), or every operation from the k-th on fails until the
 * disk "comes back" (a disk that dies mid-transaction):
 *   - the payment is answered `retry` (the channel's FAIL), or `applied`
 *     when the failure came after its commit was durable; never anything
 *     else;
 *   - its effect is all or nothing: order PAID, one journal and one
 *     processed record — or order PAYING, none of them;
 *   - once the disk works again, the same connection (the engine's) takes
 *     the channel's retry, which credits it exactly once;
 * The sweeps run twice: as configured, and with a checkpoint after every
 * commit (wal_autocheckpoint = 1: the WAL copied into the database file,
 * which is read, written, synced and truncated). At the end every payment
 * is credited once and verify is clean.
 */
#include "../support/testutil.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the failing disk ---- */

enum mode { ONE, FROM };
static struct {
    sqlite3_vfs *real;
    bool armed;
    enum mode mode;
    long k, ops;
    long failed;
} disk;

/* Whether this operation fails. */
static bool fails(void)
{
    if (!disk.armed)
        return false;
    long n = disk.ops++;
    if (n == disk.k || (disk.mode == FROM && n > disk.k)) {
        disk.failed++;
        return true;
    }
    return false;
}

struct shim_file {
    sqlite3_file base;
    sqlite3_file *real; /* right after this struct */
};

#define REAL(f) (((struct shim_file *)(f))->real)

static int x_close(sqlite3_file *f)
{
    return REAL(f)->pMethods->xClose(REAL(f));
}
static int x_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
    return fails() ? SQLITE_IOERR_READ : REAL(f)->pMethods->xRead(REAL(f), buf, n, off);
}
static int x_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
    return fails() ? SQLITE_IOERR_WRITE : REAL(f)->pMethods->xWrite(REAL(f), buf, n, off);
}
static int x_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    return fails() ? SQLITE_IOERR_TRUNCATE : REAL(f)->pMethods->xTruncate(REAL(f), size);
}
static int x_sync(sqlite3_file *f, int flags)
{
    return fails() ? SQLITE_IOERR_FSYNC : REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int x_size(sqlite3_file *f, sqlite3_int64 *out)
{
    return REAL(f)->pMethods->xFileSize(REAL(f), out);
}
static int x_lock(sqlite3_file *f, int l)
{
    return REAL(f)->pMethods->xLock(REAL(f), l);
}
static int x_unlock(sqlite3_file *f, int l)
{
    return REAL(f)->pMethods->xUnlock(REAL(f), l);
}
static int x_check(sqlite3_file *f, int *out)
{
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int x_fcntl(sqlite3_file *f, int op, void *arg)
{
    return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int x_sector(sqlite3_file *f)
{
    return REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int x_chars(sqlite3_file *f)
{
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int x_shm_map(sqlite3_file *f, int pg, int sz, int extend, void volatile **out)
{
    return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, extend, out);
}
static int x_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
    return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void x_shm_barrier(sqlite3_file *f)
{
    REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int x_shm_unmap(sqlite3_file *f, int del)
{
    return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}

/* Version 2: no memory-mapped I/O (xFetch), so every read is an xRead. */
static const sqlite3_io_methods shim_methods = {
    2,          x_close,       x_read,      x_write, x_truncate, x_sync,  x_size,
    x_lock,     x_unlock,      x_check,     x_fcntl, x_sector,   x_chars, x_shm_map,
    x_shm_lock, x_shm_barrier, x_shm_unmap, NULL,    NULL,
};

static int shim_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    struct shim_file *s = (struct shim_file *)f;
    s->real = (sqlite3_file *)(s + 1);
    int rc = disk.real->xOpen(disk.real, name, s->real, flags, out);
    f->pMethods = rc == SQLITE_OK ? &shim_methods : NULL;
    return rc;
}

static int shim_delete(sqlite3_vfs *v, const char *n, int sync)
{
    (void)v;
    return disk.real->xDelete(disk.real, n, sync);
}
static int shim_access(sqlite3_vfs *v, const char *n, int flags, int *out)
{
    (void)v;
    return disk.real->xAccess(disk.real, n, flags, out);
}
static int shim_full(sqlite3_vfs *v, const char *n, int cap, char *out)
{
    (void)v;
    return disk.real->xFullPathname(disk.real, n, cap, out);
}
static int shim_random(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return disk.real->xRandomness(disk.real, n, out);
}
static int shim_sleep(sqlite3_vfs *v, int us)
{
    (void)v;
    return disk.real->xSleep(disk.real, us);
}
static int shim_time(sqlite3_vfs *v, double *out)
{
    (void)v;
    return disk.real->xCurrentTime(disk.real, out);
}
static int shim_last_error(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return disk.real->xGetLastError(disk.real, n, out);
}

static sqlite3_vfs shim_vfs = {
    1,         0,           0,           NULL,       "failing-disk", NULL,
    shim_open, shim_delete, shim_access, shim_full,  NULL,           NULL,
    NULL,      NULL,        shim_random, shim_sleep, shim_time,      shim_last_error,
};

static void install(void)
{
    disk.real = sqlite3_vfs_find(NULL);
    if (!disk.real) {
        fprintf(stderr, "FAIL: no default VFS\n");
        exit(1);
    }
    shim_vfs.szOsFile = (int)sizeof(struct shim_file) + disk.real->szOsFile;
    shim_vfs.mxPathname = disk.real->mxPathname;
    if (sqlite3_vfs_register(&shim_vfs, 1) != SQLITE_OK) {
        fprintf(stderr, "FAIL: cannot register the VFS\n");
        exit(1);
    }
}

/* ---- the sweep ---- */

static int64_t count_of(struct po_store *s, const char *sql, const char *no)
{
    struct po_param p[] = {PO_TEXT(no)};
    return t_count(s, sql, p, 1);
}

struct tally {
    int payments, retried, applied_anyway, failures_injected;
};

/* Payment `no` with the disk failing at operation k (mode); false when the
 * payment completed without reaching k (the sweep is over). */
static bool one_payment(struct po_store *engine, struct po_store *check, enum mode mode, long k,
                        int i, struct tally *t)
{
    char no[48], txn[48];
    snprintf(no, sizeof no, "IO-%d-%s-%ld", i, mode == ONE ? "one" : "from", k);
    snprintf(txn, sizeof txn, "4300%d%07ld", i, k);
    t_seed_order(check, no, 100);
    struct po_event ev = t_pay_event(no, txn, 100);
    disk.ops = 0;
    disk.failed = 0;
    disk.k = k;
    disk.mode = mode;
    disk.armed = true;
    struct po_outcome o = t_apply(engine, NULL, &ev);
    disk.armed = false;
    bool reached = disk.failed > 0;
    t->payments++;
    t->failures_injected += (int)disk.failed;
    int64_t paid = count_of(check,
                            "SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ? AND"
                            " status = 'PAID'",
                            no),
            journals = count_of(check, "SELECT COUNT(*) FROM journal WHERE out_trade_no = ?", no),
            records = count_of(check, "SELECT COUNT(*) FROM notify_log WHERE out_trade_no = ?", no);
    T_CHECK(o.kind == PO_OUT_RETRY || o.kind == PO_OUT_APPLIED,
            "%s k=%ld: outcome %s, expected retry or applied", mode == ONE ? "one" : "from", k,
            po_outcome_name(o.kind));
    T_CHECK(journals == paid && records == paid && paid <= 1,
            "%s k=%ld: partial effect (paid %lld, journals %lld, records %lld)",
            mode == ONE ? "one" : "from", k, (long long)paid, (long long)journals,
            (long long)records);
    T_CHECK(o.kind != PO_OUT_APPLIED || paid == 1, "%s k=%ld: applied but not stored",
            mode == ONE ? "one" : "from", k);
    if (o.kind == PO_OUT_RETRY)
        t->retried++;
    else if (reached)
        t->applied_anyway++;
    /* The disk is back: the channel's retry, on the engine's connection. */
    struct po_outcome again = t_apply(engine, NULL, &ev);
    journals = count_of(check, "SELECT COUNT(*) FROM journal WHERE out_trade_no = ?", no);
    T_CHECK((again.kind == PO_OUT_APPLIED || again.kind == PO_OUT_DUPLICATE) && journals == 1,
            "%s k=%ld: the retry got %s, %lld journals", mode == ONE ? "one" : "from", k,
            po_outcome_name(again.kind), (long long)journals);
    T_CHECK((o.kind == PO_OUT_APPLIED) == (again.kind == PO_OUT_DUPLICATE),
            "%s k=%ld: first %s, retry %s", mode == ONE ? "one" : "from", k,
            po_outcome_name(o.kind), po_outcome_name(again.kind));
    return reached;
}

/* "sqlite" (argv[1]; PostgreSQL skips). */
static const char *backend;

/* The disk fails at the k-th file operation of a payment, for every k:
 * retry with nothing stored, or applied when it failed after the commit. */
static void failing_disk(void **state)
{
    (void)state;
    install();
    char url[T_URL_MAX];
    t_db_create(backend, url, sizeof url);
    struct po_store *engine = t_open(url), *check = t_open(url);
    t_seed_tenant(check);
    struct tally t[4] = {{0}, {0}, {0}, {0}};
    int total = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            char err[PO_ERRBUF_SIZE] = "";
            if (po_store_exec(engine, "PRAGMA wal_autocheckpoint = 1", NULL, 0, NULL, NULL, err,
                              sizeof err))
                T_CHECK(false, "wal_autocheckpoint: %s", err);
        }
        for (int m = ONE; m <= FROM; m++) {
            struct tally *tt = &t[pass * 2 + m];
            for (long k = 0; one_payment(engine, check, (enum mode)m, k, pass * 2 + m, tt); k++)
                ;
            total += tt->payments;
        }
    }
    T_CHECK(t_count(check, "SELECT COUNT(*) FROM journal WHERE kind = 'PAY'", NULL, 0) == total,
            "every payment credited once");
    T_CHECK(t_verify(check) == 0, "verify");
    for (int i = 0; i < 4; i++)
        t_figure("# io-error[sqlite] %s%s: %d payments, the disk failing at their k-th file"
                 " operation (k = 0..%d; %d failures injected): %d answered retry, %d applied"
                 " (the failure came after the commit), 0 partial; each retry credited once\n",
                 i % 2 == ONE ? "one operation fails" : "every operation from the k-th fails",
                 i >= 2 ? ", checkpoint in every commit" : "", t[i].payments, t[i].payments - 1,
                 t[i].failures_injected, t[i].retried, t[i].applied_anyway);
    po_store_close(engine);
    po_store_close(check);
    t_db_drop(url);
}

int main(int argc, char **argv)
{
    backend = t_backend(argc, argv);
    if (strcmp(backend, "sqlite") != 0)
        return 77; /* SQLite's file; PostgreSQL's faults: db_faults */
    po_log_set_level(PO_LOG_ERROR);
    const struct CMUnitTest tests[] = {cmocka_unit_test(failing_disk)};
    return T_RUN_GROUP("io-error[sqlite]", tests, NULL, NULL);
}
