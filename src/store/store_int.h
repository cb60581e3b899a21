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
    /* Makes a broken connection usable again (no-op when healthy). */
    po_err (*reconnect)(struct po_store *s, char *err, size_t errcap);
    /* Statements that start a write / read transaction. */
    const char *begin_write_sql;
    const char *begin_read_sql;
    /* Serialises concurrent migrators inside the migration transaction
     * (NULL when BEGIN already does). */
    const char *migration_lock_sql;
    long (*backend_pid)(struct po_store *s);
};

/* Every backend's connection struct begins with this. */
struct po_store {
    const struct po_store_ops *ops;
    bool in_tx;
    int stmt_index; /* statements issued in the current transaction */
    po_store_fault_fn fault_fn;
    void *fault_ctx;
};

extern const struct po_store_ops po_store_sqlite;
extern const struct po_store_ops po_store_postgres;

/* Helpers shared by the backends for building result sets. */
po_err po_rows_init(struct po_rows *r, int ncols);
/* Appends a row of ncols cells; values may be NULL; lens give byte counts. */
po_err po_rows_append(struct po_rows *r, const char *const *vals, const size_t *lens);

#endif
