/*
 * store_int.h — private to src/store: the backend vtable and the common
 * header every backend's connection struct starts with.
 */
#ifndef PO_STORE_INT_H
#define PO_STORE_INT_H

#include "store.h"

struct po_store_ops {
    const char *name;
    /* Opens a connection for the part of the URL after the scheme check. */
    po_err (*open)(const char *url, struct po_store **out, char *err, size_t errcap);
    void (*close)(struct po_store *s);
    /* Runs a statement that returns no rows and takes no parameters
     * (BEGIN/COMMIT/ROLLBACK, DDL). */
    po_err (*simple)(struct po_store *s, const char *sql, char *err, size_t errcap);
    po_err (*exec)(struct po_store *s, const char *sql, const struct po_param *params, int nparams,
                   struct po_rows *out_rows, int64_t *out_changes, char *err, size_t errcap);
    /* po_store_pipeline's deferred statement (NULL: exec at once) and the
     * reading of the stretch's answers (NULL: nothing to read). */
    po_err (*exec_later)(struct po_store *s, const char *sql, const struct po_param *params,
                         int nparams, char *err, size_t errcap);
    po_err (*sync)(struct po_store *s, char *err, size_t errcap);
    /* Starts a transaction with begin_*_sql (NULL: simple). PostgreSQL
     * sends it without waiting: its answer comes with the transaction's
     * first statement that waits. */
    po_err (*begin)(struct po_store *s, const char *sql, char *err, size_t errcap);
    /* Makes a broken connection usable again (no-op when healthy). */
    po_err (*reconnect)(struct po_store *s, char *err, size_t errcap);
    /* Statements that start a write / read transaction. */
    const char *begin_write_sql;
    const char *begin_read_sql;
    /* Serialises concurrent migrators inside the migration transaction
     * (NULL when BEGIN already does). */
    const char *migration_lock_sql;
    /* Session setting of a connection that runs keyed statements only
     * (po_store_keyed_only); NULL when the backend needs none. */
    const char *keyed_sql;
    long (*backend_pid)(struct po_store *s);
    /* Pages this connection wrote (po_store_pages_written); NULL: 0. */
    uint64_t (*pages_written)(struct po_store *s);
};

/* Every backend's connection struct begins with this. */
struct po_store {
    const struct po_store_ops *ops;
    bool in_tx;
    bool piping;          /* po_store_pipeline until sync, COMMIT or ROLLBACK */
    uint64_t round_trips; /* po_store_round_trips, counted by the backend */
    uint64_t sessions;    /* po_store_sessions: reconnects that opened one */
    bool keyed;           /* po_store_keyed_only: kept across reconnects */
    int stmt_index;       /* statements issued in the current transaction */
    po_store_fault_fn fault_fn;
    void *fault_ctx;
    uint64_t deadline_us; /* po_store_set_deadline; 0: none */
};

/* PostgreSQL's COPY … FROM STDIN (copy_sql) with data in its text format,
 * inside the connection's transaction (move.c). */
po_err po_store_pg_copy_in(struct po_store *s, const char *copy_sql, const char *data, size_t len,
                           char *err, size_t errcap) PO_MUST_CHECK;

extern const struct po_store_ops po_store_sqlite;
extern const struct po_store_ops po_store_postgres;

/* ---- shared by the backends (sql.c) ---- */

/* What a statement's placeholders are: scalar or row set (with its
 * columns' types, 't' text or 'i' int64), and how many parameters the
 * backend binds for them. */
struct po_sql_shape {
    int nlogical, nphysical;
    bool rowset[PO_SQL_PARAMS_MAX];
    int ncols[PO_SQL_PARAMS_MAX];
    char types[PO_SQL_PARAMS_MAX][PO_ROWSET_COLS_MAX];
};
/* Rewrites the portable placeholders (`?`, `?{v: a text, b int}`) into the
 * backend's (pg: $n and unnest; else: ? and json_each) as a heap string. */
po_err po_sql_rewrite(const char *sql, bool pg, char **out_text,
                      struct po_sql_shape *shape) PO_MUST_CHECK;
/* One column of a row set as a PostgreSQL array literal; the whole row set
 * as a JSON array of rows. Heap; NULL when the row set does not match the
 * declared columns (count, types) or memory runs out. */
char *po_rowset_pg_array(const struct po_rowset *rs, const char *types, int ncols, int col);
char *po_rowset_json(const struct po_rowset *rs, const char *types, int ncols);

uint64_t po_sql_hash(const char *sql);

/* Prepared statements of one connection, by their text. */
struct po_stmt_entry {
    uint64_t hash;
    char *sql;  /* the portable text (key) */
    char *text; /* the backend's text */
    struct po_sql_shape shape;
    void *handle; /* sqlite3_stmt *; unused by PostgreSQL (named "po_<id>") */
    int id;
    uint64_t used; /* LRU tick */
};
struct po_stmt_cache {
    struct po_stmt_entry e[PO_STMT_CACHE_MAX];
    int n;
    uint64_t tick;
    int next_id;
};
struct po_stmt_entry *po_stmt_cache_find(struct po_stmt_cache *c, const char *sql, uint64_t hash);
/* A new entry (the least recently used is evicted when full: evict()
 * releases its backend handle first). NULL when out of memory. */
struct po_stmt_entry *po_stmt_cache_add(struct po_stmt_cache *c, const char *sql, uint64_t hash,
                                        void (*evict)(void *ctx, struct po_stmt_entry *e),
                                        void *ctx);
/* Removes an entry whose backend handle is already released (or none). */
void po_stmt_cache_drop(struct po_stmt_cache *c, struct po_stmt_entry *e);
void po_stmt_cache_clear(struct po_stmt_cache *c, void (*evict)(void *ctx, struct po_stmt_entry *e),
                         void *ctx);

/* Helpers shared by the backends for building result sets. */
po_err po_rows_init(struct po_rows *r, int ncols);
/* Appends a row of ncols cells; values may be NULL; lens give byte counts. */
po_err po_rows_append(struct po_rows *r, const char *const *vals, const size_t *lens);

#endif
