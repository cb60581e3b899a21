/*
 * sqlite.c — the embedded default backend.
 *
 * Each po_store is one sqlite3 connection in WAL mode with synchronous=FULL
 * (a committed transaction survives power loss) and foreign keys on. Write
 * transactions use BEGIN IMMEDIATE so that the write lock is taken up front:
 * two writers are serialised at BEGIN instead of deadlocking at their first
 * write, and a waiter gives up after busy_timeout with PO_ERR_TRANSIENT.
 * Statements are prepared once per connection and kept (sql.c's cache);
 * a row set parameter is bound as one JSON text read by json_each.
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct sqlite_store {
    struct po_store base; /* must be first */
    sqlite3 *db;
    struct po_stmt_cache cache; /* prepared statements, by text */
};

static struct sqlite_store *as_sqlite(struct po_store *s)
{
    return (struct sqlite_store *)s;
}

/* Maps an SQLite result code to the store contract (see store.h). */
static po_err map_rc(sqlite3 *db, int rc, char *err, size_t errcap)
{
    int base = rc & 0xff;
    po_errf(err, errcap, "sqlite: %s", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    switch (base) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
        return PO_ERR_TRANSIENT;
    case SQLITE_NOMEM:
        return PO_ERR_NOMEM;
    case SQLITE_CONSTRAINT:
        if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY)
            return PO_ERR_CONFLICT;
        return PO_ERR_STORE;
    default:
        return PO_ERR_STORE;
    }
}

/*
 * Busy handler: SQLite's default sleeps in steps of up to 100 ms, which
 * makes a queue of writers wait far longer than the lock is held (a write
 * transaction here lasts about a millisecond). Poll every 0.2-2 ms instead,
 * and give up after PO_LOCK_WAIT_MS with SQLITE_BUSY (transient).
 */
static int busy_wait(void *arg, int count)
{
    (void)arg;
    long step_us = count < 10 ? 200 : count < 100 ? 1000 : 2000;
    /* Upper bound of time waited so far, in microseconds. */
    long waited_us = count < 10    ? count * 200L
                     : count < 100 ? 2000L + (count - 10) * 1000L
                                   : 92000L + (count - 100) * 2000L;
    if (waited_us >= PO_LOCK_WAIT_MS * 1000L)
        return 0;
    struct timespec ts = {0, step_us * 1000L};
    nanosleep(&ts, NULL);
    return 1;
}

static po_err sq_simple(struct po_store *s, const char *sql, char *err, size_t errcap)
{
    sqlite3 *db = as_sqlite(s)->db;
    s->round_trips++; /* no round trip in SQLite: a statement */
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return map_rc(db, sqlite3_extended_errcode(db), err, errcap);
    return PO_OK;
}

static po_err sq_open(const char *url, struct po_store **out, char *err, size_t errcap)
{
    const char *path = url + strlen("sqlite:");
    if (!*path) {
        po_errf(err, errcap, "sqlite URL has no path");
        return PO_ERR_INVALID;
    }
    struct sqlite_store *st = calloc(1, sizeof *st);
    if (!st)
        return PO_ERR_NOMEM;
    po_err rc = PO_OK;
    /* A new database is created readable by its owner only (SQLite would
     * make it 0644 less the umask; its -wal and -shm files copy the
     * database file's mode): it holds sealed secrets, API key hashes and
     * every tenant's money. ":memory:" and an existing file are left as
     * they are. */
    if (strcmp(path, ":memory:") != 0) {
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0)
            close(fd);
    }
    int src = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (src != SQLITE_OK) {
        rc = map_rc(st->db, src, err, errcap);
        goto fail;
    }
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_handler(st->db, busy_wait, NULL);
    /* journal_mode=WAL needs a moment of exclusive access on a fresh file;
     * the busy handler covers concurrent first opens. */
    static const char *const pragmas[] = {
        "PRAGMA journal_mode=WAL",
        "PRAGMA synchronous=FULL",
        "PRAGMA foreign_keys=ON",
        /* A batch's sorts (balance rows in lock order) are small: in memory,
         * not a temporary file created and unlinked per transaction. */
        "PRAGMA temp_store=MEMORY",
        /* Up to 8 MiB of pages per connection (the default is 2 MiB): the
         * committer's lookups stay in memory longer. */
        "PRAGMA cache_size=-8192",
    };
    st->base.ops = &po_store_sqlite;
    for (size_t i = 0; i < sizeof pragmas / sizeof pragmas[0]; i++) {
        rc = sq_simple(&st->base, pragmas[i], err, errcap);
        if (rc)
            goto fail;
    }
    *out = &st->base;
    return PO_OK;
fail:
    sqlite3_close(st->db);
    free(st);
    return rc;
}

static void sq_evict(void *ctx, struct po_stmt_entry *e)
{
    (void)ctx;
    sqlite3_finalize(e->handle);
    e->handle = NULL;
}

static void sq_close(struct po_store *s)
{
    struct sqlite_store *st = as_sqlite(s);
    po_stmt_cache_clear(&st->cache, sq_evict, NULL);
    sqlite3_close(st->db);
    free(st);
}

static po_err sq_reconnect(struct po_store *s, char *err, size_t errcap)
{
    (void)s;
    (void)err;
    (void)errcap;
    return PO_OK; /* an embedded connection does not drop */
}

static po_err bind_params(sqlite3_stmt *st, const struct po_sql_shape *shape,
                          const struct po_param *params, int n)
{
    for (int i = 0; i < n; i++) {
        int rc;
        switch (params[i].type) {
        case PO_P_TEXT:
            rc = sqlite3_bind_text(st, i + 1, params[i].text, -1, SQLITE_STATIC);
            break;
        case PO_P_I64:
            rc = sqlite3_bind_int64(st, i + 1, params[i].i64);
            break;
        case PO_P_ROWS: {
            if (!shape->rowset[i])
                return PO_ERR_STORE;
            char *json = po_rowset_json(params[i].rows, shape->types[i], shape->ncols[i]);
            if (!json)
                return PO_ERR_STORE;
            rc = sqlite3_bind_text(st, i + 1, json, -1, free);
            break;
        }
        default:
            rc = sqlite3_bind_null(st, i + 1);
            break;
        }
        if (rc != SQLITE_OK)
            return PO_ERR_STORE;
    }
    return PO_OK;
}

/* The prepared statement for sql: from the cache, or prepared now and
 * cached (*out_temp set when it could not be cached: finalize it after). */
static po_err statement(struct sqlite_store *st, const char *sql, sqlite3_stmt **out,
                        const struct po_sql_shape **out_shape, bool *out_temp,
                        struct po_sql_shape *tmp_shape, char *err, size_t errcap)
{
    uint64_t h = po_sql_hash(sql);
    struct po_stmt_entry *e = po_stmt_cache_find(&st->cache, sql, h);
    *out_temp = false;
    if (e) {
        *out = e->handle;
        *out_shape = &e->shape;
        return PO_OK;
    }
    char *text = NULL;
    po_err rc = po_sql_rewrite(sql, false, &text, tmp_shape);
    if (rc) {
        po_errf(err, errcap, "sqlite: bad placeholder in statement");
        return rc;
    }
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v3(st->db, text, -1, SQLITE_PREPARE_PERSISTENT, &stmt, NULL) != SQLITE_OK) {
        free(text);
        return map_rc(st->db, sqlite3_extended_errcode(st->db), err, errcap);
    }
    e = po_stmt_cache_add(&st->cache, sql, h, sq_evict, NULL);
    if (!e) {
        free(text);
        *out = stmt;
        *out_shape = tmp_shape;
        *out_temp = true;
        return PO_OK;
    }
    e->text = text;
    e->shape = *tmp_shape;
    e->handle = stmt;
    *out = stmt;
    *out_shape = &e->shape;
    return PO_OK;
}

static po_err sq_exec(struct po_store *s, const char *sql, const struct po_param *params,
                      int nparams, struct po_rows *out_rows, int64_t *out_changes, char *err,
                      size_t errcap)
{
    struct sqlite_store *sst = as_sqlite(s);
    sqlite3 *db = sst->db;
    sqlite3_stmt *st = NULL;
    struct po_sql_shape tmp_shape;
    const struct po_sql_shape *shape = NULL;
    bool temp = false;
    struct po_rows rows;
    s->round_trips++;
    po_err rc = statement(sst, sql, &st, &shape, &temp, &tmp_shape, err, errcap);
    if (rc)
        return rc;
    PO_ASSERT(sqlite3_bind_parameter_count(st) == nparams && shape->nlogical == nparams);
    rc = bind_params(st, shape, params, nparams);
    if (rc) {
        po_errf(err, errcap, "sqlite: bind failed");
        goto out_release;
    }
    int ncols = sqlite3_column_count(st);
    (void)po_rows_init(&rows, ncols);
    for (;;) {
        int src = sqlite3_step(st);
        if (src == SQLITE_DONE)
            break;
        if (src != SQLITE_ROW) {
            rc = map_rc(db, sqlite3_extended_errcode(db), err, errcap);
            goto out_rows;
        }
        if (!out_rows)
            continue;
        const char *vals[PO_COLS_MAX];
        size_t lens[PO_COLS_MAX];
        PO_ASSERT(ncols <= PO_COLS_MAX);
        for (int c = 0; c < ncols; c++) {
            vals[c] = (const char *)sqlite3_column_text(st, c);
            lens[c] = (size_t)sqlite3_column_bytes(st, c);
        }
        rc = po_rows_append(&rows, vals, lens);
        if (rc) {
            po_errf(err, errcap, "sqlite: result too large or out of memory");
            goto out_rows;
        }
    }
    if (out_changes)
        *out_changes = sqlite3_changes(db);
    if (out_rows) {
        *out_rows = rows;
        memset(&rows, 0, sizeof rows);
    }
out_rows:
    po_rows_free(&rows);
out_release:
    if (temp) {
        sqlite3_finalize(st);
    } else {
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
    }
    return rc;
}

static uint64_t sq_pages_written(struct po_store *s)
{
    int cur = 0, high = 0;
    sqlite3 *db = as_sqlite(s)->db;
    if (!db || sqlite3_db_status(db, SQLITE_DBSTATUS_CACHE_WRITE, &cur, &high, 0) != SQLITE_OK)
        return 0;
    return (uint64_t)cur;
}

const struct po_store_ops po_store_sqlite = {
    .name = "sqlite",
    .open = sq_open,
    .close = sq_close,
    .simple = sq_simple,
    .exec = sq_exec,
    .reconnect = sq_reconnect,
    .begin_write_sql = "BEGIN IMMEDIATE",
    .begin_read_sql = "BEGIN",
    .migration_lock_sql = NULL,
    .backend_pid = NULL,
    .pages_written = sq_pages_written,
};

/* ---- backup and restore (po_store_sqlite_copy, store.h) ---- */

static po_err copy_fail(sqlite3 *db, const char *what, char *err, size_t errcap)
{
    po_errf(err, errcap, "%s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
    return PO_ERR_STORE;
}

/* fsync of a file (or a directory) by path. */
static bool sync_path(const char *path, bool dir)
{
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDWR) | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool ok = fsync(fd) == 0;
    close(fd);
    return ok;
}

po_err po_store_sqlite_copy(const char *src_path, const char *dst_path, int64_t *out_bytes,
                            char *err, size_t errcap)
{
    char partial[4096], dir[4096];
    *out_bytes = 0;
    if (po_fmt(partial, sizeof partial, "%s.partial", dst_path) ||
        po_strcpy(dir, sizeof dir, dst_path)) {
        po_errf(err, errcap, "the path is too long");
        return PO_ERR_INVALID;
    }
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    else
        memcpy(dir, ".", 2);
    if (access(dst_path, F_OK) == 0) {
        po_errf(err, errcap, "%s exists: name a new file (nothing is overwritten)", dst_path);
        return PO_ERR_CONFLICT;
    }
    sqlite3 *src = NULL, *dst = NULL;
    po_err rc = PO_OK;
    /* Read-write (never written): a read-only connection to a WAL database
     * could not remove the -wal and -shm files it needs when it closes. */
    if (sqlite3_open_v2(src_path, &src, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        rc = copy_fail(src, src_path, err, errcap);
        goto out;
    }
    sqlite3_busy_handler(src, busy_wait, NULL);
    /* The copy is created readable by its owner only, as the database. */
    (void)unlink(partial);
    int fd = open(partial, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        po_errf(err, errcap, "cannot create %s: %s", partial, strerror(errno));
        rc = PO_ERR_IO;
        goto out;
    }
    close(fd);
    if (sqlite3_open_v2(partial, &dst, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        rc = copy_fail(dst, partial, err, errcap);
        goto out;
    }
    /* One step copies every page under one read transaction: in WAL mode
     * the writers go on, and the copy is the database as of one commit. */
    sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
    if (!b) {
        rc = copy_fail(dst, "backup", err, errcap);
        goto out;
    }
    int step = SQLITE_OK;
    for (int tries = 0; tries < 200; tries++) {
        step = sqlite3_backup_step(b, -1);
        if (step != SQLITE_BUSY && step != SQLITE_LOCKED)
            break;
        sqlite3_sleep(50);
    }
    if (sqlite3_backup_finish(b) != SQLITE_OK || step != SQLITE_DONE) {
        rc = copy_fail(dst, src_path, err, errcap);
        goto out;
    }
    /* The copy must be whole: SQLite's own check of every page and index. */
    sqlite3_stmt *st = NULL;
    bool whole = sqlite3_prepare_v2(dst, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
                 sqlite3_step(st) == SQLITE_ROW &&
                 strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0;
    if (!whole)
        po_errf(err, errcap, "%s fails SQLite's integrity check: %s", src_path,
                st && sqlite3_column_text(st, 0) ? (const char *)sqlite3_column_text(st, 0)
                                                 : sqlite3_errmsg(dst));
    sqlite3_finalize(st);
    if (!whole) {
        rc = PO_ERR_STORE;
        goto out;
    }
    /* Back to one file (the WAL checkpointed into it), synced, then named:
     * the copy appears whole or not at all. */
    if (sqlite3_exec(dst, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL) != SQLITE_OK) {
        rc = copy_fail(dst, "checkpoint", err, errcap);
        goto out;
    }
    sqlite3_close(dst);
    dst = NULL;
    if (!sync_path(partial, false) || link(partial, dst_path) != 0 || unlink(partial) != 0 ||
        !sync_path(dir, true)) {
        po_errf(err, errcap, "cannot write %s: %s", dst_path, strerror(errno));
        rc = errno == EEXIST ? PO_ERR_CONFLICT : PO_ERR_IO;
        goto out;
    }
    struct stat sb;
    *out_bytes = stat(dst_path, &sb) == 0 ? (int64_t)sb.st_size : 0;
out:
    if (dst)
        sqlite3_close(dst);
    if (src)
        sqlite3_close(src);
    if (rc) {
        (void)unlink(partial);
        char side[4200];
        if (po_fmt(side, sizeof side, "%s-wal", partial) == PO_OK)
            (void)unlink(side);
        if (po_fmt(side, sizeof side, "%s-shm", partial) == PO_OK)
            (void)unlink(side);
    }
    return rc;
}
