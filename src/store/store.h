/*
 * store.h — the storage interface every other module sees.
 *
 * A store is one connection to SQLite or PostgreSQL behind a const vtable
 * (see store_int.h). SQL is written once, portably, with `?` placeholders;
 * the PostgreSQL backend rewrites them to $n. Results are text cells.
 *
 * Error mapping is the contract the engine relies on:
 *   unique / primary-key violation          -> PO_ERR_CONFLICT
 *   busy, locked, deadlock, serialization,
 *   lost connection, disk full / I/O        -> PO_ERR_TRANSIENT
 *   anything else                           -> PO_ERR_STORE
 *
 * A store is used by one thread at a time. After a PO_ERR_TRANSIENT from a
 * lost connection the next po_store_begin() reconnects.
 */
#ifndef PO_STORE_H
#define PO_STORE_H

#include "../core/core.h"

struct po_store;

enum po_param_type { PO_P_NULL, PO_P_TEXT, PO_P_I64, PO_P_ROWS };

struct po_rowset;

/* One bound parameter; text (and a row set) is borrowed for the call. */
struct po_param {
    enum po_param_type type;
    const char *text;
    int64_t i64;
    const struct po_rowset *rows;
};
#define PO_TEXT(s) ((struct po_param){.type = PO_P_TEXT, .text = (s)})
#define PO_I64(v) ((struct po_param){.type = PO_P_I64, .i64 = (v)})
#define PO_NULLP ((struct po_param){.type = PO_P_NULL})
#define PO_ROWS(rs) ((struct po_param){.type = PO_P_ROWS, .rows = (rs)})

/*
 * A table of values bound as ONE parameter, for set-based statements that
 * treat a whole batch at once: in the SQL it is written where a table may
 * stand, with its alias and typed columns,
 *     SELECT … FROM ?{v: out_trade_no text, amount int} JOIN pay_order o ON …
 * and the backend turns it into its own form (PostgreSQL: unnest of one
 * array per column; SQLite: json_each of one JSON array), so the statement
 * text is the same whatever the batch size and is prepared once. Cells are
 * row-major, PO_P_TEXT for text columns, PO_P_I64 for int, or PO_P_NULL.
 */
struct po_rowset {
    int ncols;
    int nrows; /* 0..PO_ROWSET_ROWS_MAX */
    const struct po_param *cells;
};
/* The parameter list of one statement, counted by the compiler:
 *   po_store_exec(s, sql, PO_PARAMS(PO_TEXT(t), PO_I64(n)), &rows, NULL, err, cap)
 * expands to the array and its length, so no call site counts by hand. */
#define PO_PARAMS(...)                                                                             \
    ((const struct po_param[]){__VA_ARGS__}),                                                      \
        (int)(sizeof((const struct po_param[]){__VA_ARGS__}) / sizeof(struct po_param))
#define PO_NO_PARAMS NULL, 0

/* Query result: nrows x ncols cells, row-major; a cell is NULL for SQL NULL.
 * Owned by the caller, freed with po_rows_free(). */
struct po_rows {
    int nrows;
    int ncols;
    char **cells;
};
const char *po_rows_get(const struct po_rows *r, int row, int col);
/* Cell as int64; PO_ERR_STORE when NULL or not an integer. */
po_err po_rows_i64(const struct po_rows *r, int row, int col, int64_t *out) PO_MUST_CHECK;
void po_rows_free(struct po_rows *r);

/* A page of a keyset-paged list: items after (after_ts, after_key), at most
 * limit of them; *out_more when there are more, with the last item's
 * position in last_ts/last_key. */
struct po_page {
    const char *after_ts; /* "" from the start */
    const char *after_key;
    int64_t limit;
    bool more;                                       /* out */
    char last_ts[PO_TIME_SIZE];                      /* out */
    char last_key[PO_KEY_SIZE + PO_REASON_SIZE + 2]; /* out */
};

/* Opens "sqlite:PATH" or "postgresql://…" / "postgres://…". */
po_err po_store_open(const char *url, struct po_store **out, char *err,
                     size_t errcap) PO_MUST_CHECK;
void po_store_close(struct po_store *s);
const char *po_store_backend(const struct po_store *s); /* "sqlite" | "postgres" */

/* Write transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL: READ COMMITTED). */
po_err po_store_begin(struct po_store *s, char *err, size_t errcap) PO_MUST_CHECK;
/* Read-only consistent snapshot (for verify and reports). */
po_err po_store_begin_read(struct po_store *s, char *err, size_t errcap) PO_MUST_CHECK;
po_err po_store_commit(struct po_store *s, char *err, size_t errcap) PO_MUST_CHECK;
/* Always leaves the connection outside any transaction. */
void po_store_rollback(struct po_store *s);

/* Executes one statement. out_rows (may be NULL) receives result rows;
 * out_changes (may be NULL) the number of rows inserted/updated/deleted. */
po_err po_store_exec(struct po_store *s, const char *sql, const struct po_param *params,
                     int nparams, struct po_rows *out_rows, int64_t *out_changes, char *err,
                     size_t errcap) PO_MUST_CHECK;

/*
 * A pipelined stretch of a write transaction (PostgreSQL: libpq pipeline
 * mode). Between po_store_pipeline(s) and the next po_store_sync(), COMMIT
 * or ROLLBACK, a statement whose answer the caller does not ask for
 * (out_rows and out_changes both NULL) is sent without waiting for it; the
 * answers are read, in order, with the next statement that does wait — a
 * statement asking for rows or changes, po_store_sync, COMMIT — in ONE
 * round trip. A deferred statement's failure is reported there, as that
 * call's failure (the first failure of the stretch; the server skipped
 * everything after it, so nothing of the transaction can commit). Use it
 * only where any failure ends the same way (the batch's set-based writes,
 * its tail before COMMIT), never around savepoints that isolate one event.
 * SQLite (and PostgreSQL behind a pooler) runs each statement at once.
 */
void po_store_pipeline(struct po_store *s);
/* Reads the answers of the stretch and ends it: its first failure. */
po_err po_store_sync(struct po_store *s, char *err, size_t errcap) PO_MUST_CHECK;
/* Round trips to the database since the store was opened (statements and
 * syncs that waited for an answer; BEGIN and COMMIT included): the
 * engine's tests and the bench count them. */
uint64_t po_store_round_trips(const struct po_store *s);
/* Database pages this connection has written since it was opened: on
 * SQLite, its dirty pages written at commit — in WAL mode one WAL frame
 * each (sqlite3_db_status CACHE_WRITE); 0 on PostgreSQL, whose WAL the
 * bench reads from the server. Call it from the connection's own thread. */
uint64_t po_store_pages_written(struct po_store *s);
/* How many times the connection was opened again (a reconnect after a lost
 * connection or a failover: a new session, perhaps on another server). 0
 * for SQLite, whose file is the same whatever the connection. */
uint64_t po_store_sessions(const struct po_store *s);

/* One statement in its own write transaction (begin, exec, commit; rolled
 * back on any error). out_changes may be NULL. */
po_err po_store_exec_tx(struct po_store *s, const char *sql, const struct po_param *params,
                        int nparams, int64_t *out_changes, char *err, size_t errcap) PO_MUST_CHECK;

/* A postgresql:// URL as libpq takes it: without payonce's own
 * payonce_pooling=transaction (behind PgBouncer in transaction mode: no
 * named statements, no session settings), *pooled saying whether it was
 * there. Malloc'd; NULL when out of memory. */
char *po_store_pg_url(const char *url, bool *pooled);

/* A copy of the SQLite database at src_path, made with SQLite's online
 * backup API while it is in use (writers go on: the copy is the database
 * as of one commit), into dst_path, which must not exist: written as
 * dst_path.partial (mode 0600), checked whole (PRAGMA integrity_check),
 * checkpointed into one file, synced, then linked into place — it appears
 * whole or not at all. *out_bytes: the copy's size. payonce backup and
 * restore (docs/operations.md). */
po_err po_store_sqlite_copy(const char *src_path, const char *dst_path, int64_t *out_bytes,
                            char *err, size_t errcap) PO_MUST_CHECK;

/* Every row of a SQLite database (src) into an empty PostgreSQL one (dst),
 * both at this build's schema version: the tables in the order their
 * migrations created them, read from one snapshot of src, written with COPY
 * in one transaction of dst (all rows or none), then counted on both sides.
 * A target with any row is PO_ERR_CONFLICT, nothing written.
 * written_after: rows src has beyond its snapshot (a serve still writing:
 * not moved). payonce migrate-store (docs/operations.md). */
#define PO_MOVE_TABLES_MAX 64
struct po_move_report {
    int ntables;
    struct po_move_table {
        char name[64];
        int64_t rows;
    } table[PO_MOVE_TABLES_MAX];
    int64_t rows, written_after;
};
po_err po_store_move(struct po_store *src, struct po_store *dst, struct po_move_report *out,
                     char *err, size_t errcap) PO_MUST_CHECK;

/* Reachability check for /readyz and CLI diagnostics. */
po_err po_store_ping(struct po_store *s, char *err, size_t errcap) PO_MUST_CHECK;

/*
 * The planner's statistics kept up with the tables. PostgreSQL plans from
 * statistics autovacuum refreshes only after the fact (its nap, a tenth of
 * a table changed): on tables that grow or change fast — a new deployment,
 * a burst — a plan made for a small or differently shaped table (an index
 * on the tenant alone scanned for every row sealed or checked) ran for
 * seconds. ANALYZEs each table of payonce's schema of which more than a
 * fifth of its rows (and PO_STATS_MIN_CHANGES) changed since its
 * statistics were taken; ANALYZE reads a bounded sample and blocks no
 * reader or writer; tables the role does not own (or belong to a role of)
 * are left to autovacuum. *out_analyzed (may be NULL): how many. SQLite: nothing
 * (payonce never creates its sqlite_stat tables: plans come from the
 * schema alone, the same at every size).
 */
#define PO_STATS_MIN_CHANGES 1000
po_err po_store_refresh_statistics(struct po_store *s, int *out_analyzed, char *err,
                                   size_t errcap) PO_MUST_CHECK;

/* Creates or upgrades the schema; safe to run twice and concurrently.
 * *out_applied (may be NULL) receives how many migrations ran now. */
po_err po_store_migrate(struct po_store *s, int *out_applied, char *err,
                        size_t errcap) PO_MUST_CHECK;
/* The highest applied schema version (0 when none). */
po_err po_store_schema_version(struct po_store *s, int *out_version) PO_MUST_CHECK;
/* The version the migrations of this build bring a database to. */
int po_store_schema_latest(void);

/*
 * Fault injection (tests). The hook runs before every statement of a
 * transaction: index 0 is BEGIN, then each exec in order, then COMMIT.
 * A non-OK return is reported as that statement's result without running it;
 * the transaction stays open for the caller to roll back, as after a real
 * failure. The hook may also cause a real failure (e.g. terminate the
 * backend) and return PO_OK. NULL removes it.
 */
typedef po_err (*po_store_fault_fn)(void *ctx, int stmt_index, const char *sql);
void po_store_set_fault_hook(struct po_store *s, po_store_fault_fn fn, void *ctx);

/* A deadline (po_now_us() clock; 0: none) for what this connection waits
 * for: on PostgreSQL a statement's answer that has not come by then ends
 * the wait (the session is abandoned, PO_ERR_TRANSIENT; the next
 * transaction opens a new one). A callback's database work before the
 * committer runs under its deadline this way. */
void po_store_set_deadline(struct po_store *s, uint64_t deadline_us);

/* The connection will run keyed statements only (lookups and writes by
 * primary or unique key: the gateway's committers and pool): on
 * PostgreSQL its plans take the index even while a table is still small,
 * so a cached plan never turns into a sequential scan as the table grows
 * (enable_seqscan = off, kept across reconnects). No-op on SQLite. */
void po_store_keyed_only(struct po_store *s);

/* The backend's server-side id for this connection (PostgreSQL backend pid;
 * 0 on SQLite). Lets tests terminate a connection for real. */
long po_store_backend_pid(struct po_store *s);

/*
 * A bounded pool of connections to one database, shared by server threads.
 * Connections are opened lazily and replaced after a transient failure
 * reconnects them. acquire waits at most timeout_ms for a free connection
 * and reports PO_ERR_TRANSIENT when none frees up or it cannot connect.
 */
struct po_store_pool;
po_err po_store_pool_open(const char *url, int size, struct po_store_pool **out, char *err,
                          size_t errcap) PO_MUST_CHECK;
po_err po_store_pool_acquire(struct po_store_pool *p, int timeout_ms, struct po_store **out,
                             char *err, size_t errcap) PO_MUST_CHECK;
void po_store_pool_release(struct po_store_pool *p, struct po_store *s);
void po_store_pool_close(struct po_store_pool *p);
/* po_store_keyed_only for every connection of the pool (call it before
 * the pool is used). */
void po_store_pool_keyed_only(struct po_store_pool *p);

#endif
