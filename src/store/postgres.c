/*
 * postgres.c — the PostgreSQL backend (libpq).
 *
 * Each po_store is one PGconn. Write transactions run at READ COMMITTED:
 * the engine's correctness comes from the guarded UPDATE (a blocked twin
 * re-evaluates the WHERE clause after the winner commits and sees 0 rows)
 * and from the unique indexes (a blocked twin's INSERT fails with 23505),
 * not from snapshot isolation. Reads for verify use REPEATABLE READ so that
 * all checks see one snapshot.
 *
 * A connection that breaks mid-transaction reports PO_ERR_TRANSIENT; the
 * next po_store_begin() resets it (the server has rolled the work back).
 * Multi-host URIs (host=a,b&target_session_attrs=read-write) are passed to
 * libpq unchanged, so a failover is a reconnect.
 */
#include "store_int.h"

#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

struct pg_store {
    struct po_store base; /* must be first */
    PGconn *conn;
};

static struct pg_store *as_pg(struct po_store *s)
{
    return (struct pg_store *)s;
}

/* SQLSTATEs that mean "try again": serialization, deadlock, lock timeout,
 * connection and operator-intervention classes, insufficient resources. */
static bool sqlstate_transient(const char *ss)
{
    if (!ss)
        return false;
    return strcmp(ss, "40001") == 0 || strcmp(ss, "40P01") == 0 || strcmp(ss, "55P03") == 0 ||
           strncmp(ss, "08", 2) == 0 || strncmp(ss, "57", 2) == 0 || strncmp(ss, "53", 2) == 0;
}

static po_err map_result(struct pg_store *ps, PGresult *res, char *err, size_t errcap)
{
    const char *ss = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(ps->conn);
    po_errf(err, errcap, "postgres: %s%s%s", ss ? ss : "", ss ? " " : "", msg ? msg : "");
    if (PQstatus(ps->conn) != CONNECTION_OK)
        return PO_ERR_TRANSIENT;
    if (ss && strcmp(ss, "23505") == 0)
        return PO_ERR_CONFLICT;
    if (sqlstate_transient(ss))
        return PO_ERR_TRANSIENT;
    if (!res)
        return PO_ERR_TRANSIENT;
    return PO_ERR_STORE;
}

/* Server notices (e.g. WARNING) go to the log at debug level, not stderr. */
static void pg_notice(void *arg, const char *message)
{
    (void)arg;
    po_log(PO_LOG_DEBUG, "postgres notice: %s", message);
}

static po_err pg_open(const char *url, struct po_store **out, char *err, size_t errcap)
{
    struct pg_store *ps = calloc(1, sizeof *ps);
    if (!ps)
        return PO_ERR_NOMEM;
    ps->conn = PQconnectdb(url);
    if (!ps->conn || PQstatus(ps->conn) != CONNECTION_OK) {
        /* libpq's message names host and port, never the password. */
        po_errf(err, errcap, "postgres: cannot connect: %s",
                ps->conn ? PQerrorMessage(ps->conn) : "out of memory");
        PQfinish(ps->conn);
        free(ps);
        return PO_ERR_TRANSIENT;
    }
    PQsetNoticeProcessor(ps->conn, pg_notice, NULL);
    PGresult *res = PQexec(ps->conn, "SET client_min_messages = warning");
    PQclear(res);
    *out = &ps->base;
    return PO_OK;
}

static void pg_close(struct po_store *s)
{
    struct pg_store *ps = as_pg(s);
    PQfinish(ps->conn);
    free(ps);
}

static po_err pg_reconnect(struct po_store *s, char *err, size_t errcap)
{
    struct pg_store *ps = as_pg(s);
    if (PQstatus(ps->conn) == CONNECTION_OK)
        return PO_OK;
    PQreset(ps->conn);
    if (PQstatus(ps->conn) != CONNECTION_OK) {
        po_errf(err, errcap, "postgres: reconnect failed: %s", PQerrorMessage(ps->conn));
        return PO_ERR_TRANSIENT;
    }
    PGresult *res = PQexec(ps->conn, "SET client_min_messages = warning");
    PQclear(res);
    return PO_OK;
}

static po_err pg_simple(struct po_store *s, const char *sql, char *err, size_t errcap)
{
    struct pg_store *ps = as_pg(s);
    PGresult *res = PQexec(ps->conn, sql);
    po_err rc = PO_OK;
    ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        rc = map_result(ps, res, err, errcap);
    /* COMMIT of an aborted transaction "succeeds" as ROLLBACK. */
    if (!rc && strcmp(sql, "COMMIT") == 0 && strcmp(PQcmdStatus(res), "ROLLBACK") == 0) {
        po_errf(err, errcap, "postgres: transaction was aborted; COMMIT rolled back");
        rc = PO_ERR_STORE;
    }
    PQclear(res);
    return rc;
}

/* Rewrites `?` placeholders to $1..$n into buf. Our SQL never has '?' in
 * literals. */
static po_err rewrite_placeholders(const char *sql, char *buf, size_t cap)
{
    size_t j = 0;
    int n = 0;
    for (const char *p = sql; *p; p++) {
        if (j + 8 >= cap)
            return PO_ERR_LIMIT;
        if (*p == '?')
            j += (size_t)snprintf(buf + j, cap - j, "$%d", ++n);
        else
            buf[j++] = *p;
    }
    buf[j] = '\0';
    return PO_OK;
}

static po_err pg_exec(struct po_store *s, const char *sql, const struct po_param *params,
                      int nparams, struct po_rows *out_rows, int64_t *out_changes, char *err,
                      size_t errcap)
{
    struct pg_store *ps = as_pg(s);
    po_err rc = PO_OK;
    size_t cap = strlen(sql) * 2 + 64;
    char *q = malloc(cap);
    PGresult *res = NULL;
    struct po_rows rows;
    if (!q)
        return PO_ERR_NOMEM;
    rc = rewrite_placeholders(sql, q, cap);
    PO_ASSERT(rc == PO_OK);
    const char *values[PO_SQL_PARAMS_MAX];
    char nums[PO_SQL_PARAMS_MAX][24];
    for (int i = 0; i < nparams; i++) {
        switch (params[i].type) {
        case PO_P_TEXT:
            values[i] = params[i].text;
            break;
        case PO_P_I64:
            (void)snprintf(nums[i], sizeof nums[i], "%lld", (long long)params[i].i64);
            values[i] = nums[i];
            break;
        default:
            values[i] = NULL;
            break;
        }
    }
    res = PQexecParams(ps->conn, q, nparams, NULL, values, NULL, NULL, 0);
    ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        rc = map_result(ps, res, err, errcap);
        goto out;
    }
    if (out_changes) {
        const char *t = PQcmdTuples(res);
        int64_t n = 0;
        if (t && *t && po_parse_i64(t, 0, INT64_MAX, &n) == PO_OK)
            *out_changes = n;
    }
    if (out_rows && st == PGRES_TUPLES_OK) {
        int ncols = PQnfields(res);
        int nrows = PQntuples(res);
        PO_ASSERT(ncols <= PO_COLS_MAX);
        (void)po_rows_init(&rows, ncols);
        for (int r = 0; r < nrows; r++) {
            const char *vals[PO_COLS_MAX];
            size_t lens[PO_COLS_MAX];
            for (int c = 0; c < ncols; c++) {
                vals[c] = PQgetisnull(res, r, c) ? NULL : PQgetvalue(res, r, c);
                lens[c] = (size_t)PQgetlength(res, r, c);
            }
            rc = po_rows_append(&rows, vals, lens);
            if (rc) {
                po_rows_free(&rows);
                po_errf(err, errcap, "postgres: result too large or out of memory");
                goto out;
            }
        }
        *out_rows = rows;
    }
out:
    PQclear(res);
    free(q);
    return rc;
}

static long pg_backend_pid(struct po_store *s)
{
    return PQbackendPID(as_pg(s)->conn);
}

const struct po_store_ops po_store_postgres = {
    .name = "postgres",
    .open = pg_open,
    .close = pg_close,
    .simple = pg_simple,
    .exec = pg_exec,
    .reconnect = pg_reconnect,
    /* A callback must be answered within the channel's deadline (WeChat: 5 s):
     * waiting longer than 3 s for a lock becomes a transient failure (55P03),
     * the ack is FAIL, and the channel's retry is deduplicated. */
    .begin_write_sql = "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '3s'",
    .begin_read_sql = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
    .migration_lock_sql = "SELECT pg_advisory_xact_lock(7077317)",
    .backend_pid = pg_backend_pid,
};
