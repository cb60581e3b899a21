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
 *
 * Statements that run again and again are prepared once per session and
 * executed by name (sql.c's cache); a new session starts with an empty
 * cache. Behind a pooler in transaction mode (PgBouncer 1.18: a client's
 * session is not a server's session), the URL's payonce_pooling=transaction
 * (taken out before libpq sees the URL) makes every statement unnamed and
 * the gateway's session settings SET LOCAL in each transaction instead. A row set parameter is
 * bound as one array per column and read with unnest, so a batch statement has one text whatever
 * its size.
 */
#include "store_int.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

struct pg_store {
    struct po_store base;       /* must be first */
    PGconn *conn;               /* NULL: abandoned; the next reconnect opens one */
    char *url;                  /* to open a new session after abandoning one */
    struct po_stmt_cache cache; /* named prepared statements "po_<id>" */
    bool pooled;                /* payonce_pooling=transaction: no session state */
    int piped;                  /* statements sent in pipeline mode whose answers are unread */
};

#define POOLING_PARAM "payonce_pooling=transaction"

char *po_store_pg_url(const char *url, bool *pooled)
{
    char *u = strdup(url);
    *pooled = false;
    char *p = u ? strstr(u, POOLING_PARAM) : NULL;
    if (!p)
        return u;
    char *end = p + strlen(POOLING_PARAM);
    if (*end && *end != '&' && *end != ' ')
        return u; /* another value: libpq names it */
    *pooled = true;
    if (p > u && (p[-1] == '&' || p[-1] == ' '))
        p--; /* "…&param": drop "&param" */
    else if (*end == '&')
        end++; /* "?param&x": keep "?x" */
    else if (p > u && p[-1] == '?')
        p--; /* "?param" alone */
    memmove(p, end, strlen(end) + 1);
    return u;
}

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
    if (!ps->conn) {
        po_errf(err, errcap,
                "postgres: no answer within %d ms (a silent network path?); the session was"
                " closed and the next transaction opens a new one",
                PO_PG_CLIENT_WAIT_MS);
        return PO_ERR_TRANSIENT;
    }
    const char *ss = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(ps->conn);
    po_errf(err, errcap, "postgres: %s%s%s", ss ? ss : "", ss ? " " : "", msg ? msg : "");
    if (PQstatus(ps->conn) != CONNECTION_OK)
        return PO_ERR_TRANSIENT;
    if (ss && strcmp(ss, "23505") == 0)
        return PO_ERR_CONFLICT;
    /* a named statement missing or taken: another session's, behind a pooler */
    if (ss && !ps->pooled && (strcmp(ss, "26000") == 0 || strcmp(ss, "42P05") == 0))
        po_errf(err, errcap,
                "postgres: %s %s (behind a pooler in transaction mode, e.g. PgBouncer? add"
                " " POOLING_PARAM " to the database URL)",
                ss, msg ? msg : "");
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

/*
 * Waits until the next result can be read without blocking. A gateway
 * (keyed) connection waits at most PO_PG_CLIENT_WAIT_MS (or to the
 * caller's deadline): on a path that went silent after the request was
 * acknowledged, neither the server's statement_timeout nor TCP's timers end
 * the wait. Past it the session is abandoned (closed, conn NULL) and false
 * returned; the next transaction opens a new session. A broken connection
 * returns true: PQgetResult reports it.
 */
static bool await_readable(struct pg_store *ps, uint64_t deadline)
{
    bool bounded = ps->base.keyed || ps->base.deadline_us;
    while (PQisBusy(ps->conn)) {
        int wait_ms = -1;
        if (bounded) {
            uint64_t now = po_now_us();
            if (now >= deadline) {
                po_log(PO_LOG_WARN,
                       "postgres: no answer within %s; abandoning the session (backend %d)",
                       ps->base.deadline_us && ps->base.deadline_us <= now
                           ? "the request's deadline"
                           : "the client wait (" PO_STR(PO_PG_CLIENT_WAIT_MS) " ms)",
                       PQbackendPID(ps->conn));
                PQfinish(ps->conn);
                ps->conn = NULL;
                ps->piped = 0;
                return false;
            }
            wait_ms = (int)((deadline - now + 999) / 1000);
        }
        struct pollfd p = {.fd = PQsocket(ps->conn), .events = POLLIN};
        int k = poll(&p, 1, wait_ms);
        if ((k < 0 && errno != EINTR) || (k > 0 && !PQconsumeInput(ps->conn)))
            break; /* broken: PQgetResult reports it */
    }
    return true;
}

static uint64_t wait_deadline(const struct pg_store *ps)
{
    uint64_t deadline = po_now_us() + (uint64_t)PO_PG_CLIENT_WAIT_MS * 1000;
    if (ps->base.deadline_us && ps->base.deadline_us < deadline)
        deadline = ps->base.deadline_us; /* the caller's budget ends first */
    return deadline;
}

/* The result of one statement sent (sent: PQsend*'s return), like PQexec:
 * the first error, else the last result; NULL when the session was
 * abandoned (await_readable). In pipeline mode: the next statement's. */
static PGresult *await_result_until(struct pg_store *ps, int sent, uint64_t deadline)
{
    if (!sent)
        return NULL;
    PGresult *keep = NULL, *r;
    for (;;) {
        if (!await_readable(ps, deadline)) {
            PQclear(keep);
            return NULL;
        }
        r = PQgetResult(ps->conn);
        if (!r)
            break;
        if (keep && PQresultStatus(keep) == PGRES_FATAL_ERROR) {
            PQclear(r);
        } else {
            PQclear(keep);
            keep = r;
        }
        if (PQstatus(ps->conn) == CONNECTION_BAD)
            break;
    }
    return keep;
}

static PGresult *await_result(struct pg_store *ps, int sent)
{
    return await_result_until(ps, sent, wait_deadline(ps));
}

/*
 * The end of a pipelined stretch (po_store_pipeline): Sync sent, then every
 * statement's answer read in order — one round trip for all of them. The
 * first failure is the result (the server skipped everything after it up
 * to the Sync); *last, when asked for, receives the last statement's
 * result if nothing failed. Leaves pipeline mode; a session that cannot
 * is closed (the next transaction opens a new one).
 */
static po_err drain(struct pg_store *ps, PGresult **last, char *err, size_t errcap)
{
    po_err rc = PO_OK;
    int n = ps->piped, read = 0;
    ps->piped = 0;
    if (last)
        *last = NULL;
    if (!ps->conn)
        return map_result(ps, NULL, err, errcap);
    if (PQpipelineStatus(ps->conn) == PQ_PIPELINE_OFF)
        return PO_OK; /* nothing was piped */
    ps->base.round_trips++;
    /* one wait for the whole stretch, as for one statement */
    uint64_t deadline = wait_deadline(ps);
    bool synced = PQpipelineSync(ps->conn) == 1;
    if (!synced)
        rc = map_result(ps, NULL, err, errcap);
    /* every statement's answer, in order; after a failure the rest are
     * PGRES_PIPELINE_ABORTED, read all the same */
    for (; synced && ps->conn && read < n; read++) {
        PGresult *r = await_result_until(ps, 1, deadline);
        ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
        if (!rc && st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
            rc = map_result(ps, r, err, errcap);
        if (!rc && last && read == n - 1)
            *last = r;
        else
            PQclear(r);
        if (!r || PQstatus(ps->conn) != CONNECTION_OK)
            break;
    }
    /* then the Sync's own result (one result, no NULL after it) */
    bool clean = false;
    if (synced && read == n && ps->conn && PQstatus(ps->conn) == CONNECTION_OK &&
        await_readable(ps, deadline)) {
        PGresult *r = PQgetResult(ps->conn);
        clean = r && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
        PQclear(r);
    }
    if (ps->conn && (!clean || PQexitPipelineMode(ps->conn) != 1)) {
        po_log(PO_LOG_WARN, "postgres: the pipeline did not end cleanly (%s); closing the session",
               PQerrorMessage(ps->conn));
        PQfinish(ps->conn);
        ps->conn = NULL;
    }
    if (!rc && !ps->conn) {
        PQclear(last ? *last : NULL);
        if (last)
            *last = NULL;
        rc = map_result(ps, NULL, err, errcap);
    }
    return rc;
}

static PGresult *run_simple(struct pg_store *ps, const char *sql)
{
    PO_ASSERT(ps->piped == 0);
    ps->base.round_trips++;
    return ps->conn ? await_result(ps, PQsendQuery(ps->conn, sql)) : NULL;
}

/* A new session. Bounded waits on a network path that stops answering
 * (no RST): the connection attempt, unacknowledged data
 * (tcp_user_timeout) and an idle connection (keepalives) all fail within a
 * few seconds. Given before the URL, so the operator's URL may override
 * any of them. */
static PGconn *connect_pg(const char *url, bool pooled)
{
    static const char *const keys[] = {
        "connect_timeout",  "keepalives",       "keepalives_idle", "keepalives_interval",
        "keepalives_count", "tcp_user_timeout", "dbname",          NULL};
    const char *vals[] = {PO_STR(PO_PG_CONNECT_TIMEOUT_S),   "1", "2", "1", "2",
                          PO_STR(PO_PG_TCP_USER_TIMEOUT_MS), url, NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    if (c && PQstatus(c) == CONNECTION_OK) {
        PQsetNoticeProcessor(c, pg_notice, NULL);
        if (!pooled) /* behind a pooler the notices go to the debug log the same */
            PQclear(PQexec(c, "SET client_min_messages = warning"));
    }
    return c;
}

static po_err pg_open(const char *url, struct po_store **out, char *err, size_t errcap)
{
    struct pg_store *ps = calloc(1, sizeof *ps);
    if (!ps || !(ps->url = po_store_pg_url(url, &ps->pooled))) {
        free(ps);
        return PO_ERR_NOMEM;
    }
    ps->conn = connect_pg(ps->url, ps->pooled);
    if (!ps->conn || PQstatus(ps->conn) != CONNECTION_OK) {
        /* libpq's message names host and port, never the password. */
        po_errf(err, errcap, "postgres: cannot connect: %s",
                ps->conn ? PQerrorMessage(ps->conn) : "out of memory");
        PQfinish(ps->conn);
        free(ps->url);
        free(ps);
        return PO_ERR_TRANSIENT;
    }
    *out = &ps->base;
    return PO_OK;
}

/* Statements prepared on the server die with their session; a cached one
 * evicted while the session lives is deallocated (best effort: a failure
 * only leaves it prepared until the session ends). */
static void pg_evict(void *ctx, struct po_stmt_entry *e)
{
    struct pg_store *ps = ctx;
    char q[48];
    if (!ps)
        return;
    (void)snprintf(q, sizeof q, "DEALLOCATE po_%d", e->id);
    PQclear(run_simple(ps, q));
}

static void pg_close(struct po_store *s)
{
    struct pg_store *ps = as_pg(s);
    po_stmt_cache_clear(&ps->cache, NULL, NULL);
    PQfinish(ps->conn);
    free(ps->url);
    free(ps);
}

static po_err pg_reconnect(struct po_store *s, char *err, size_t errcap)
{
    struct pg_store *ps = as_pg(s);
    if (ps->conn && PQstatus(ps->conn) == CONNECTION_OK)
        return PO_OK;
    /* A new session: nothing it knows was prepared, nothing is piped. */
    po_stmt_cache_clear(&ps->cache, NULL, NULL);
    ps->piped = 0;
    PQfinish(ps->conn);
    ps->conn = connect_pg(ps->url, ps->pooled);
    if (!ps->conn || PQstatus(ps->conn) != CONNECTION_OK) {
        po_errf(err, errcap, "postgres: reconnect failed: %s",
                ps->conn ? PQerrorMessage(ps->conn) : "out of memory");
        PQfinish(ps->conn);
        ps->conn = NULL;
        return PO_ERR_TRANSIENT;
    }
    s->sessions++;
    if (s->keyed && !ps->pooled)
        PQclear(run_simple(ps, s->ops->keyed_sql));
    return PO_OK;
}

/* A write transaction's two statements (.begin_write_sql; pg_begin pipes
 * them one by one). A callback must be answered within the channel's
 * deadline (WeChat: 5 s): waiting longer than PO_LOCK_WAIT_MS for a lock
 * becomes a transient failure (55P03), the ack is FAIL, and the channel's
 * retry is deduplicated. (A unitless value is in milliseconds.) */
#define PG_BEGIN_WRITE "BEGIN ISOLATION LEVEL READ COMMITTED"
#define PG_LOCK_TIMEOUT "SET LOCAL lock_timeout = '" PO_STR(PO_LOCK_WAIT_MS) "'"

/* The gateway's session settings (po_store_keyed_only; the reason for each
 * is at .keyed_sql below): SET for a session of its own, SET LOCAL in each
 * transaction behind a pooler. */
#define KEYED_SETTINGS(SET)                                                                        \
    SET " enable_seqscan = off; " SET " jit = off; " SET                                           \
        " plan_cache_mode = force_generic_plan; " SET                                              \
        " statement_timeout = '" PO_STR(PO_PG_STATEMENT_TIMEOUT_MS) "'"

static po_err pg_simple(struct po_store *s, const char *sql, char *err, size_t errcap)
{
    struct pg_store *ps = as_pg(s);
    char buf[512];
    if (ps->pooled && sql == s->ops->keyed_sql)
        return PO_OK; /* no session state behind a pooler: each BEGIN sets them */
    if (ps->pooled && s->keyed && strncmp(sql, "BEGIN", 5) == 0) {
        int n = snprintf(buf, sizeof buf, "%s; %s", sql, KEYED_SETTINGS("SET LOCAL"));
        PO_ASSERT(n > 0 && (size_t)n < sizeof buf);
        sql = buf;
    }
    PGresult *res = NULL;
    po_err rc = PO_OK;
    bool commit = strcmp(sql, "COMMIT") == 0;
    if (ps->piped && commit && ps->conn) {
        /* the stretch's answers and COMMIT's in one round trip */
        if (PQsendQueryParams(ps->conn, sql, 0, NULL, NULL, NULL, NULL, 0) == 1)
            ps->piped++;
        rc = drain(ps, &res, err, errcap);
        if (rc)
            return rc;
    } else if (ps->piped) {
        rc = drain(ps, NULL, err, errcap);
        if (rc && strcmp(sql, "ROLLBACK") != 0)
            return rc;
        rc = PO_OK; /* ROLLBACK ends the transaction whatever the stretch did */
    }
    if (!res)
        res = run_simple(ps, sql);
    ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        rc = map_result(ps, res, err, errcap);
    /* COMMIT of an aborted transaction "succeeds" as ROLLBACK. */
    if (!rc && commit && strcmp(PQcmdStatus(res), "ROLLBACK") == 0) {
        po_errf(err, errcap, "postgres: transaction was aborted; COMMIT rolled back");
        rc = PO_ERR_STORE;
    }
    PQclear(res);
    return rc;
}

/* Worth preparing: the statements that run again and again. Utility
 * statements (SAVEPOINT, DDL, SET) run unnamed. */
static bool preparable(const char *sql)
{
    static const char *const kinds[] = {"SELECT", "INSERT", "UPDATE", "DELETE", "WITH"};
    while (*sql == ' ' || *sql == '\n')
        sql++;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strncmp(sql, kinds[i], strlen(kinds[i])) == 0)
            return true;
    return false;
}

/* The cache entry for sql, prepared on the server when new; NULL with
 * *out_text/shape set for a statement run unnamed (caller frees text). */
static po_err statement(struct pg_store *ps, const char *sql, struct po_stmt_entry **out,
                        char **out_text, struct po_sql_shape *shape, char *err, size_t errcap)
{
    uint64_t h = po_sql_hash(sql);
    *out = po_stmt_cache_find(&ps->cache, sql, h);
    *out_text = NULL;
    if (*out)
        return PO_OK;
    char *text = NULL;
    po_err rc = po_sql_rewrite(sql, true, &text, shape);
    if (rc) {
        po_errf(err, errcap, "postgres: bad placeholder in statement");
        return rc;
    }
    struct po_stmt_entry *e =
        preparable(sql) && !ps->pooled ? po_stmt_cache_add(&ps->cache, sql, h, pg_evict, ps) : NULL;
    if (!e) {
        *out_text = text;
        return PO_OK;
    }
    char name[32];
    (void)snprintf(name, sizeof name, "po_%d", e->id);
    ps->base.round_trips++;
    PGresult *res =
        ps->conn ? await_result(ps, PQsendPrepare(ps->conn, name, text, shape->nphysical, NULL))
                 : NULL;
    if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
        rc = map_result(ps, res, err, errcap);
        PQclear(res);
        /* Not prepared: forget the entry. */
        free(text);
        po_stmt_cache_drop(&ps->cache, e);
        return rc;
    }
    PQclear(res);
    e->text = text;
    e->shape = *shape;
    *out = e;
    return PO_OK;
}

/* The text values of the parameters as the server binds them: numbers
 * printed, a row set as one array literal a column. alloc[] receives what
 * must be freed. */
static po_err values_of(const struct po_sql_shape *shape, const struct po_param *params,
                        int nparams, const char **values, char nums[][24], char **alloc,
                        int *nalloc)
{
    int v = 0;
    *nalloc = 0;
    for (int i = 0; i < nparams; i++) {
        switch (params[i].type) {
        case PO_P_TEXT:
            values[v++] = params[i].text;
            break;
        case PO_P_I64:
            (void)snprintf(nums[v], sizeof nums[v], "%lld", (long long)params[i].i64);
            values[v] = nums[v];
            v++;
            break;
        case PO_P_ROWS:
            if (!shape->rowset[i])
                return PO_ERR_STORE;
            for (int c = 0; c < shape->ncols[i]; c++) {
                char *a = po_rowset_pg_array(params[i].rows, shape->types[i], shape->ncols[i], c);
                if (!a)
                    return PO_ERR_STORE;
                alloc[(*nalloc)++] = a;
                values[v++] = a;
            }
            break;
        default:
            values[v++] = NULL;
            break;
        }
    }
    return v == shape->nphysical ? PO_OK : PO_ERR_STORE;
}

#define PHYS_MAX (PO_SQL_PARAMS_MAX * PO_ROWSET_COLS_MAX)

/* Whether sql would be prepared on the server now (a round trip of its
 * own, which cannot happen inside a pipelined stretch). */
static bool needs_prepare(struct pg_store *ps, const char *sql)
{
    return preparable(sql) && !ps->pooled && !po_stmt_cache_find(&ps->cache, sql, po_sql_hash(sql));
}

/* Sends one statement (prepared once, then by name); its text values
 * are copied into libpq's buffer, so params may go once this returns.
 * *sent: PQsend*'s return. */
static po_err send_statement(struct pg_store *ps, const char *sql, const struct po_param *params,
                             int nparams, int *sent, char *err, size_t errcap)
{
    struct po_stmt_entry *e = NULL;
    struct po_sql_shape tmp_shape;
    char *text = NULL;
    *sent = 0;
    po_err rc = statement(ps, sql, &e, &text, &tmp_shape, err, errcap);
    if (rc)
        return rc;
    const struct po_sql_shape *shape = e ? &e->shape : &tmp_shape;
    PO_ASSERT(shape->nlogical == nparams);
    const char *values[PHYS_MAX];
    char nums[PHYS_MAX][24];
    char *alloc[PHYS_MAX];
    int nalloc = 0;
    rc = values_of(shape, params, nparams, values, nums, alloc, &nalloc);
    if (rc) {
        po_errf(err, errcap, "postgres: a row set does not match its declared columns");
    } else if (ps->conn && e) {
        char name[32];
        (void)snprintf(name, sizeof name, "po_%d", e->id);
        *sent = PQsendQueryPrepared(ps->conn, name, shape->nphysical, values, NULL, NULL, 0);
    } else if (ps->conn) {
        *sent = PQsendQueryParams(ps->conn, text, shape->nphysical, NULL, values, NULL, NULL, 0);
    }
    for (int i = 0; i < nalloc; i++)
        free(alloc[i]);
    free(text);
    return rc;
}

static po_err pg_exec(struct po_store *s, const char *sql, const struct po_param *params,
                      int nparams, struct po_rows *out_rows, int64_t *out_changes, char *err,
                      size_t errcap)
{
    struct pg_store *ps = as_pg(s);
    PGresult *res = NULL;
    struct po_rows rows;
    int sent = 0;
    /* a stretch's answers come first; a statement to prepare after them */
    po_err rc = ps->piped && needs_prepare(ps, sql) ? drain(ps, NULL, err, errcap) : PO_OK;
    if (!rc)
        rc = send_statement(ps, sql, params, nparams, &sent, err, errcap);
    if (ps->piped) {
        /* the stretch's answers and this one's in one round trip */
        if (!rc && sent)
            ps->piped++;
        po_err drc = drain(ps, !rc && sent ? &res : NULL, err, errcap);
        if (!rc)
            rc = drc;
    } else if (!rc) {
        ps->base.round_trips++;
        res = ps->conn ? await_result(ps, sent) : NULL;
    }
    if (rc)
        goto out;
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
    return rc;
}

/* Prepares sql on the server now (outside any pipeline). */
static po_err prepare_now(struct pg_store *ps, const char *sql, char *err, size_t errcap)
{
    struct po_stmt_entry *e = NULL;
    struct po_sql_shape shape;
    char *text = NULL;
    po_err rc = statement(ps, sql, &e, &text, &shape, err, errcap);
    free(text);
    return rc;
}

/* po_store_pipeline's deferred statement: sent, its answer read later
 * (drain). Behind a pooler (no pipelining through PgBouncer's transaction
 * mode is relied on) and without a session it runs at once. */
static po_err pg_exec_later(struct po_store *s, const char *sql, const struct po_param *params,
                            int nparams, char *err, size_t errcap)
{
    struct pg_store *ps = as_pg(s);
    if (ps->pooled || !ps->conn)
        return pg_exec(s, sql, params, nparams, NULL, NULL, err, errcap);
    int sent = 0;
    bool prepare = needs_prepare(ps, sql);
    po_err rc = ps->piped && prepare ? drain(ps, NULL, err, errcap) : PO_OK;
    if (!rc && prepare) /* prepared outside the pipeline */
        rc = prepare_now(ps, sql, err, errcap);
    if (!rc && !ps->piped && PQenterPipelineMode(ps->conn) != 1)
        rc = map_result(ps, NULL, err, errcap);
    if (!rc)
        rc = send_statement(ps, sql, params, nparams, &sent, err, errcap);
    if (!rc && !sent)
        rc = map_result(ps, NULL, err, errcap);
    if (!rc) {
        ps->piped++;
        return PO_OK;
    }
    char derr[PO_ERRBUF_SIZE];
    (void)drain(ps, NULL, derr, sizeof derr); /* out of pipeline mode (if in it) */
    return rc;
}

/* BEGIN (and a write transaction's SET LOCAL) piped: no round trip of its
 * own — its answer comes with the transaction's first statement that
 * waits, whose failure it then is. Behind a pooler (BEGIN carries the
 * session settings there) it runs at once. */
static po_err pg_begin(struct po_store *s, const char *sql, char *err, size_t errcap)
{
    struct pg_store *ps = as_pg(s);
    if (ps->pooled || !ps->conn || ps->piped)
        return pg_simple(s, sql, err, errcap);
    if (sql != s->ops->begin_write_sql) /* one statement */
        return pg_exec_later(s, sql, NULL, 0, err, errcap);
    po_err rc = pg_exec_later(s, PG_BEGIN_WRITE, NULL, 0, err, errcap);
    return rc ? rc : pg_exec_later(s, PG_LOCK_TIMEOUT, NULL, 0, err, errcap);
}

static po_err pg_sync(struct po_store *s, char *err, size_t errcap)
{
    struct pg_store *ps = as_pg(s);
    return ps->piped ? drain(ps, NULL, err, errcap) : PO_OK;
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
    .exec_later = pg_exec_later,
    .sync = pg_sync,
    .begin = pg_begin,
    .reconnect = pg_reconnect,
    .begin_write_sql = PG_BEGIN_WRITE "; " PG_LOCK_TIMEOUT,
    .begin_read_sql = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
    .migration_lock_sql = "SELECT pg_advisory_xact_lock(7077317)",
    /* A prepared statement keeps the generic plan it was given when it was
     * first used; one planned while a table was nearly empty (a new
     * deployment) would keep scanning it sequentially as it grows — and so
     * would the foreign-key checks PostgreSQL plans the same way (posting
     * -> journal). Every statement of the gateway's connections is a keyed
     * lookup: there, plans always take the index. With the sequential
     * scan priced out, a statement that must scan anyway would look
     * expensive enough to be JIT-compiled on every execution: no JIT. And
     * the generic plan always: a set-based statement's custom plan (made
     * for each batch's own row count) costs planning time on every
     * execution and picks the same keyed path. */
    .keyed_sql = KEYED_SETTINGS("SET"),
    .backend_pid = pg_backend_pid,
};

po_err po_store_pg_copy_in(struct po_store *s, const char *copy_sql, const char *data, size_t len,
                           char *err, size_t errcap)
{
    if (s->ops != &po_store_postgres) {
        po_errf(err, errcap, "COPY needs a PostgreSQL store");
        return PO_ERR_INVALID;
    }
    struct pg_store *ps = as_pg(s);
    po_err drc = ps->piped ? drain(ps, NULL, err, errcap) : PO_OK; /* a piped BEGIN */
    if (drc)
        return drc;
    if (!ps->conn) {
        po_errf(err, errcap, "postgres: no connection");
        return PO_ERR_TRANSIENT;
    }
    PGresult *res = PQexec(ps->conn, copy_sql);
    if (PQresultStatus(res) != PGRES_COPY_IN) {
        po_err rc = map_result(ps, res, err, errcap);
        PQclear(res);
        return rc ? rc : PO_ERR_STORE;
    }
    PQclear(res);
    int sent = 1;
    for (size_t at = 0; sent == 1 && at < len;) {
        size_t n = len - at > (1u << 20) ? (1u << 20) : len - at;
        sent = PQputCopyData(ps->conn, data + at, (int)n);
        at += n;
    }
    if (PQputCopyEnd(ps->conn, sent == 1 ? NULL : "payonce: the data could not be sent") != 1) {
        po_errf(err, errcap, "postgres: COPY: %s", PQerrorMessage(ps->conn));
        return PO_ERR_TRANSIENT;
    }
    po_err rc = PO_OK;
    while ((res = PQgetResult(ps->conn))) {
        if (!rc && PQresultStatus(res) != PGRES_COMMAND_OK)
            rc = map_result(ps, res, err, errcap);
        PQclear(res);
    }
    return rc;
}
