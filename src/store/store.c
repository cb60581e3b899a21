/*
 * store.c — the backend-independent front of the store: URL dispatch,
 * transaction bookkeeping, the fault-injection hook, result sets, and the
 * migration runner (migration SQL is embedded at build time).
 */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

/* Generated from the .sql files in src/store/migrations by cmake/embed.cmake. */
struct po_migration {
    int version;
    const char *name;
    const char *sql;
};
extern const struct po_migration po_migrations[];
extern const int po_migrations_count;

po_err po_store_open(const char *url, struct po_store **out, char *err, size_t errcap)
{
    const struct po_store_ops *ops = NULL;
    if (!url) {
        po_errf(err, errcap, "no database URL");
        return PO_ERR_INVALID;
    }
    if (strncmp(url, "sqlite:", 7) == 0)
        ops = &po_store_sqlite;
    else if (strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0)
        ops = &po_store_postgres;
    if (!ops) {
        po_errf(err, errcap, "unsupported database URL (use sqlite:PATH or postgresql://...)");
        return PO_ERR_INVALID;
    }
    struct po_store *s = NULL;
    po_err rc = ops->open(url, &s, err, errcap);
    if (rc)
        return rc;
    s->ops = ops;
    s->in_tx = false;
    s->piping = false;
    s->round_trips = 0;
    s->stmt_index = 0;
    s->fault_fn = NULL;
    s->fault_ctx = NULL;
    *out = s;
    return PO_OK;
}

void po_store_close(struct po_store *s)
{
    if (!s)
        return;
    if (s->in_tx)
        po_store_rollback(s);
    s->ops->close(s);
}

const char *po_store_backend(const struct po_store *s)
{
    return s->ops->name;
}

void po_store_set_deadline(struct po_store *s, uint64_t deadline_us)
{
    s->deadline_us = deadline_us;
}

void po_store_set_fault_hook(struct po_store *s, po_store_fault_fn fn, void *ctx)
{
    s->fault_fn = fn;
    s->fault_ctx = ctx;
}

void po_store_keyed_only(struct po_store *s)
{
    s->keyed = true;
    if (s->ops->keyed_sql) {
        char err[PO_ERRBUF_SIZE];
        if (s->ops->simple(s, s->ops->keyed_sql, err, sizeof err))
            po_log(PO_LOG_WARN, "store: %s: %s", s->ops->keyed_sql, err);
    }
}

long po_store_backend_pid(struct po_store *s)
{
    return s->ops->backend_pid ? s->ops->backend_pid(s) : 0;
}

/* Gives the fault hook its turn for the next statement of a transaction. */
static po_err fault_check(struct po_store *s, const char *sql, char *err, size_t errcap)
{
    if (!s->in_tx || !s->fault_fn)
        return PO_OK;
    po_err rc = s->fault_fn(s->fault_ctx, s->stmt_index, sql);
    s->stmt_index++;
    if (rc)
        po_errf(err, errcap, "injected fault (%s) at statement %d", po_err_name(rc),
                s->stmt_index - 1);
    return rc;
}

static po_err begin_with(struct po_store *s, const char *sql, char *err, size_t errcap)
{
    PO_ASSERT(!s->in_tx);
    po_err rc = s->ops->reconnect(s, err, errcap);
    if (rc)
        return rc;
    s->in_tx = true;
    s->stmt_index = 0;
    rc = fault_check(s, sql, err, errcap);
    if (rc) {
        s->in_tx = false; /* BEGIN never ran: nothing to roll back */
        return rc;
    }
    rc = s->ops->begin ? s->ops->begin(s, sql, err, errcap) : s->ops->simple(s, sql, err, errcap);
    if (rc)
        po_store_rollback(s);
    return rc;
}

po_err po_store_begin(struct po_store *s, char *err, size_t errcap)
{
    return begin_with(s, s->ops->begin_write_sql, err, errcap);
}

po_err po_store_begin_read(struct po_store *s, char *err, size_t errcap)
{
    return begin_with(s, s->ops->begin_read_sql, err, errcap);
}

po_err po_store_commit(struct po_store *s, char *err, size_t errcap)
{
    PO_ASSERT(s->in_tx);
    po_err rc = fault_check(s, "COMMIT", err, errcap);
    if (!rc)
        rc = s->ops->simple(s, "COMMIT", err, errcap);
    s->piping = false;
    if (rc) {
        po_store_rollback(s);
        return rc;
    }
    s->in_tx = false;
    return PO_OK;
}

void po_store_rollback(struct po_store *s)
{
    if (!s->in_tx)
        return;
    /* A failed ROLLBACK (lost connection) still ends the transaction:
     * the server discards it when the session dies. */
    (void)s->ops->simple(s, "ROLLBACK", NULL, 0);
    s->in_tx = false;
    s->piping = false;
}

void po_store_pipeline(struct po_store *s)
{
    PO_ASSERT(s->in_tx);
    s->piping = true;
}

po_err po_store_sync(struct po_store *s, char *err, size_t errcap)
{
    s->piping = false;
    return s->ops->sync ? s->ops->sync(s, err, errcap) : PO_OK;
}

uint64_t po_store_round_trips(const struct po_store *s)
{
    return s->round_trips;
}

uint64_t po_store_pages_written(struct po_store *s)
{
    return s->ops->pages_written ? s->ops->pages_written(s) : 0;
}

uint64_t po_store_sessions(const struct po_store *s)
{
    return s->sessions;
}

po_err po_store_exec(struct po_store *s, const char *sql, const struct po_param *params,
                     int nparams, struct po_rows *out_rows, int64_t *out_changes, char *err,
                     size_t errcap)
{
    PO_ASSERT(nparams >= 0 && nparams <= PO_SQL_PARAMS_MAX);
    PO_ASSERT(nparams == 0 || params);
    if (out_rows)
        memset(out_rows, 0, sizeof *out_rows);
    if (out_changes)
        *out_changes = 0;
    po_err rc = fault_check(s, sql, err, errcap);
    if (rc)
        return rc;
    /* Outside a transaction a dropped connection is simply re-established;
     * inside one the work is lost and the caller must see the failure. */
    if (!s->in_tx) {
        rc = s->ops->reconnect(s, err, errcap);
        if (rc)
            return rc;
    }
    if (s->piping && !out_rows && !out_changes && s->ops->exec_later)
        return s->ops->exec_later(s, sql, params, nparams, err, errcap);
    return s->ops->exec(s, sql, params, nparams, out_rows, out_changes, err, errcap);
}

po_err po_store_exec_tx(struct po_store *s, const char *sql, const struct po_param *params,
                        int nparams, int64_t *out_changes, char *err, size_t errcap)
{
    po_err rc = po_store_begin(s, err, errcap);
    if (rc)
        return rc;
    rc = po_store_exec(s, sql, params, nparams, NULL, out_changes, err, errcap);
    if (rc) {
        po_store_rollback(s);
        return rc;
    }
    return po_store_commit(s, err, errcap);
}

po_err po_store_ping(struct po_store *s, char *err, size_t errcap)
{
    po_err rc = s->ops->reconnect(s, err, errcap);
    if (rc)
        return rc;
    struct po_rows r;
    rc = s->ops->exec(s, "SELECT 1", NULL, 0, &r, NULL, err, errcap);
    if (!rc)
        po_rows_free(&r);
    return rc;
}

po_err po_store_refresh_statistics(struct po_store *s, int *out_analyzed, char *err, size_t errcap)
{
    if (out_analyzed)
        *out_analyzed = 0;
    if (strcmp(po_store_backend(s), "postgres") != 0)
        return PO_OK;
    struct po_rows r = {0};
    /* the statement built by format(): the names come quoted from the
     * catalog; only the tables this role may analyze (a table it does not
     * own would be skipped with a warning, and asked for again each round) */
    po_err rc = po_store_exec(s,
                              "SELECT format('ANALYZE %I.%I', t.schemaname, t.relname) FROM"
                              " pg_stat_user_tables t JOIN pg_class c ON c.oid = t.relid WHERE"
                              " t.schemaname = current_schema() AND pg_has_role(c.relowner,"
                              " 'USAGE') AND t.n_mod_since_analyze > ? + t.n_live_tup / 5"
                              " ORDER BY t.relname",
                              PO_PARAMS(PO_I64(PO_STATS_MIN_CHANGES)), &r, NULL, err, errcap);
    for (int i = 0; !rc && i < r.nrows; i++) {
        rc = po_store_exec(s, po_rows_get(&r, i, 0), PO_NO_PARAMS, NULL, NULL, err, errcap);
        if (!rc && out_analyzed)
            (*out_analyzed)++;
    }
    po_rows_free(&r);
    return rc;
}

/* ---- result sets ---- */

po_err po_rows_init(struct po_rows *r, int ncols)
{
    memset(r, 0, sizeof *r);
    r->ncols = ncols;
    return PO_OK;
}

po_err po_rows_append(struct po_rows *r, const char *const *vals, const size_t *lens)
{
    if (r->nrows >= PO_ROWS_MAX)
        return PO_ERR_LIMIT;
    size_t n = (size_t)(r->nrows + 1) * (size_t)r->ncols;
    char **cells = realloc(r->cells, (n ? n : 1) * sizeof *cells);
    if (!cells)
        return PO_ERR_NOMEM;
    r->cells = cells;
    char **row = cells + (size_t)r->nrows * (size_t)r->ncols;
    for (int c = 0; c < r->ncols; c++)
        row[c] = NULL;
    r->nrows++; /* counted now so po_rows_free releases a partial row */
    for (int c = 0; c < r->ncols; c++) {
        if (!vals[c])
            continue;
        if (lens[c] > PO_CELL_MAX)
            return PO_ERR_LIMIT;
        row[c] = malloc(lens[c] + 1);
        if (!row[c])
            return PO_ERR_NOMEM;
        memcpy(row[c], vals[c], lens[c]);
        row[c][lens[c]] = '\0';
    }
    return PO_OK;
}

const char *po_rows_get(const struct po_rows *r, int row, int col)
{
    PO_ASSERT(row >= 0 && row < r->nrows && col >= 0 && col < r->ncols);
    return r->cells[(size_t)row * (size_t)r->ncols + (size_t)col];
}

po_err po_rows_i64(const struct po_rows *r, int row, int col, int64_t *out)
{
    const char *v = po_rows_get(r, row, col);
    if (!v || po_parse_i64(v, INT64_MIN, INT64_MAX, out))
        return PO_ERR_STORE;
    return PO_OK;
}

void po_rows_free(struct po_rows *r)
{
    if (!r || !r->cells)
        return;
    size_t n = (size_t)r->nrows * (size_t)r->ncols;
    for (size_t i = 0; i < n; i++)
        free(r->cells[i]);
    free(r->cells);
    memset(r, 0, sizeof *r);
}

/* ---- migrations ---- */

int po_store_schema_latest(void)
{
    return po_migrations_count ? po_migrations[po_migrations_count - 1].version : 0;
}

po_err po_store_schema_version(struct po_store *s, int *out_version)
{
    struct po_rows r;
    po_err rc = po_store_exec(s, "SELECT COALESCE(MAX(version), 0) FROM schema_version",
                              PO_NO_PARAMS, &r, NULL, NULL, 0);
    if (rc)
        return rc;
    int64_t v = 0;
    rc = r.nrows == 1 ? po_rows_i64(&r, 0, 0, &v) : PO_ERR_STORE;
    po_rows_free(&r);
    if (!rc)
        *out_version = (int)v;
    return rc;
}

/* Whether a statement is for this backend: one whose first line is
 * "-- only: sqlite" or "-- only: postgres" runs on that backend alone
 * (triggers: SQLite's body is SQL, PostgreSQL's a function). */
static bool for_backend(const struct po_store *s, const char *stmt)
{
    while (*stmt == ' ' || *stmt == '\n' || *stmt == '\t' || *stmt == '\r')
        stmt++;
    static const char tag[] = "-- only: ";
    if (strncmp(stmt, tag, sizeof tag - 1) != 0)
        return true;
    const char *name = stmt + sizeof tag - 1, *own = po_store_backend(s);
    size_t n = strlen(own);
    return strncmp(name, own, n) == 0 && (name[n] == '\n' || name[n] == '\r' || name[n] == ' ');
}

/* Splits a migration file into statements on ';' at line ends and runs each.
 * Migration files are ours (no ';' inside literals, a ';' inside a
 * trigger's body not at a line end), so this is enough. */
static po_err run_script(struct po_store *s, const char *sql, char *err, size_t errcap)
{
    po_err rc = PO_OK;
    size_t len = strlen(sql);
    char *copy = malloc(len + 1);
    if (!copy)
        return PO_ERR_NOMEM;
    memcpy(copy, sql, len + 1);
    char *p = copy;
    while (*p) {
        char *end = strstr(p, ";\n");
        if (end)
            *end = '\0';
        bool blank = true;
        for (char *q = p; *q; q++) {
            if (*q == '-' && q[1] == '-') { /* skip comment line */
                while (*q && *q != '\n')
                    q++;
                if (!*q)
                    break;
                continue;
            }
            if (*q != ' ' && *q != '\n' && *q != '\t' && *q != '\r') {
                blank = false;
                break;
            }
        }
        if (!blank && for_backend(s, p)) {
            rc = po_store_exec(s, p, NULL, 0, NULL, NULL, err, errcap);
            if (rc)
                goto out;
        }
        if (!end)
            break;
        p = end + 2;
    }
out:
    free(copy);
    return rc;
}

po_err po_store_migrate(struct po_store *s, int *out_applied, char *err, size_t errcap)
{
    po_err rc = PO_OK;
    int applied = 0;
    for (int i = 0; i < po_migrations_count; i++) {
        const struct po_migration *m = &po_migrations[i];
        rc = po_store_begin(s, err, errcap);
        if (rc)
            return rc;
        if (s->ops->migration_lock_sql) {
            rc =
                po_store_exec(s, s->ops->migration_lock_sql, PO_NO_PARAMS, NULL, NULL, err, errcap);
            if (rc)
                goto fail;
        }
        rc = po_store_exec(s,
                           "CREATE TABLE IF NOT EXISTS schema_version ("
                           " version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                           " applied_at TEXT NOT NULL)",
                           PO_NO_PARAMS, NULL, NULL, err, errcap);
        if (rc)
            goto fail;
        int have = 0;
        rc = po_store_schema_version(s, &have);
        if (rc)
            goto fail;
        if (have >= m->version) {
            po_store_rollback(s);
            continue;
        }
        rc = run_script(s, m->sql, err, errcap);
        if (rc)
            goto fail;
        char now[PO_TIME_SIZE];
        po_clock_now_iso(now, sizeof now);
        struct po_param p[] = {PO_I64(m->version), PO_TEXT(m->name), PO_TEXT(now)};
        rc = po_store_exec(
            s, "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)", p,
            PO_NELEM(p), NULL, NULL, err, errcap);
        if (rc)
            goto fail;
        rc = po_store_commit(s, err, errcap);
        if (rc)
            return rc;
        applied++;
    }
    if (out_applied)
        *out_applied = applied;
    return PO_OK;
fail:
    po_store_rollback(s);
    return rc;
}
