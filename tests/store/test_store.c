/*
 * test_store.c — the storage conformance suite: the same assertions for
 * every t_fx_backend (argv[1]). What the engine relies on: migrations are
 * idempotent, parameters round-trip, unique violations are PO_ERR_CONFLICT,
 * savepoints roll back exactly their own work, rollback discards, a read
 * snapshot is stable, and ON CONFLICT upserts work.
 */
#include "../support/testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S T_S
#define URL T_URL

static po_err ins_tenant(struct po_store *s, const char *id)
{
    struct po_param p[] = {PO_TEXT(id), PO_TEXT(id), PO_TEXT("2026-12-02T00:00:00Z")};
    return po_store_exec(s, "INSERT INTO tenant (tenant_id, name, created_at) VALUES (?, ?, ?)", p,
                         PO_NELEM(p), NULL, NULL, NULL, 0);
}

static int64_t tenants(struct po_store *s)
{
    return t_count(s, "SELECT COUNT(*) FROM tenant", NULL, 0);
}

static void migrate_is_idempotent(void **state)
{
    char err[PO_ERRBUF_SIZE];
    int applied = -1, version = 0;
    assert_int_equal(po_store_migrate(S, &applied, err, sizeof err), PO_OK);
    assert_int_equal(applied, 0); /* setup already migrated */
    assert_int_equal(po_store_schema_version(S, &version), PO_OK);
    assert_true(version >= 1);
    assert_int_equal(po_store_migrate(S, &applied, err, sizeof err), PO_OK);
    assert_int_equal(applied, 0);
}

static void params_round_trip(void **state)
{
    char err[PO_ERRBUF_SIZE];
    struct po_rows r;
    struct po_param p[] = {PO_I64(INT64_C(-9007199254740993)), PO_TEXT("héllo ' \" ; --"),
                           PO_NULLP};
    assert_int_equal(po_store_exec(S, "SELECT CAST(? AS BIGINT), CAST(? AS TEXT), CAST(? AS TEXT)",
                                   p, PO_NELEM(p), &r, NULL, err, sizeof err),
                     PO_OK);
    assert_int_equal(r.nrows, 1);
    int64_t v = 0;
    assert_int_equal(po_rows_i64(&r, 0, 0, &v), PO_OK);
    assert_true(v == INT64_C(-9007199254740993));
    assert_string_equal(po_rows_get(&r, 0, 1), "héllo ' \" ; --");
    assert_null(po_rows_get(&r, 0, 2));
    assert_int_equal(po_rows_i64(&r, 0, 2, &v), PO_ERR_STORE);
    po_rows_free(&r);
}

static void unique_violation_is_conflict(void **state)
{
    assert_int_equal(ins_tenant(S, "a"), PO_OK);
    assert_int_equal(ins_tenant(S, "a"), PO_ERR_CONFLICT);
    assert_int_equal(tenants(S), 1);
}

static void other_errors_are_store_errors(void **state)
{
    char err[PO_ERRBUF_SIZE] = "";
    assert_int_equal(po_store_exec(S, "SELEC nonsense", NULL, 0, NULL, NULL, err, sizeof err),
                     PO_ERR_STORE);
    assert_true(strlen(err) > 0);
    /* A CHECK constraint is not a unique violation. */
    struct po_param p[] = {PO_TEXT("x")};
    assert_int_equal(po_store_exec(S,
                                   "INSERT INTO pay_order (tenant_id, out_trade_no, merchant_id,"
                                   " amount, currency, status, created_at, updated_at) VALUES"
                                   " ('t', ?, 'm', -1, 'CNY', 'PAYING', 'x', 'x')",
                                   p, PO_NELEM(p), NULL, NULL, err, sizeof err),
                     PO_ERR_STORE);
}

static void rollback_discards(void **state)
{
    assert_int_equal(po_store_begin(S, NULL, 0), PO_OK);
    assert_int_equal(ins_tenant(S, "a"), PO_OK);
    po_store_rollback(S);
    assert_int_equal(tenants(S), 0);
    assert_int_equal(po_store_begin(S, NULL, 0), PO_OK);
    assert_int_equal(ins_tenant(S, "b"), PO_OK);
    assert_int_equal(po_store_commit(S, NULL, 0), PO_OK);
    assert_int_equal(tenants(S), 1);
}

static void savepoint_rolls_back_only_its_work(void **state)
{
    char err[PO_ERRBUF_SIZE];
    assert_int_equal(po_store_begin(S, err, sizeof err), PO_OK);
    assert_int_equal(ins_tenant(S, "a"), PO_OK);
    assert_int_equal(po_store_exec(S, "SAVEPOINT sp", NULL, 0, NULL, NULL, err, sizeof err), PO_OK);
    assert_int_equal(ins_tenant(S, "b"), PO_OK);
    /* A conflict inside the savepoint leaves the transaction usable after
     * ROLLBACK TO (PostgreSQL aborts the transaction otherwise). */
    assert_int_equal(ins_tenant(S, "a"), PO_ERR_CONFLICT);
    assert_int_equal(
        po_store_exec(S, "ROLLBACK TO SAVEPOINT sp", NULL, 0, NULL, NULL, err, sizeof err), PO_OK);
    assert_int_equal(po_store_exec(S, "RELEASE SAVEPOINT sp", NULL, 0, NULL, NULL, err, sizeof err),
                     PO_OK);
    assert_int_equal(ins_tenant(S, "c"), PO_OK);
    assert_int_equal(po_store_commit(S, err, sizeof err), PO_OK);
    assert_int_equal(tenants(S), 2); /* a and c; b was rolled back */
    assert_int_equal(t_count(S, "SELECT COUNT(*) FROM tenant WHERE tenant_id = 'b'", NULL, 0), 0);
}

/* A pipelined stretch: the deferred statements' answers come with the next
 * statement that waits — one round trip on PostgreSQL — and a deferred
 * failure is that call's failure, nothing of the transaction committed,
 * the connection usable after. */
static void pipeline_stretch(void **state)
{
    char err[PO_ERRBUF_SIZE];
    bool pg = strcmp(po_store_backend(S), "postgres") == 0;
    struct po_rows r;
    /* a statement's first use prepares it (a round trip of its own) */
    assert_int_equal(ins_tenant(S, "w"), PO_OK);
    assert_int_equal(tenants(S), 1);

    /* BEGIN, three inserts and COMMIT: one round trip */
    uint64_t rt = po_store_round_trips(S);
    assert_int_equal(po_store_begin(S, err, sizeof err), PO_OK);
    po_store_pipeline(S);
    assert_int_equal(ins_tenant(S, "a"), PO_OK);
    assert_int_equal(ins_tenant(S, "b"), PO_OK);
    assert_int_equal(ins_tenant(S, "c"), PO_OK);
    assert_int_equal(po_store_commit(S, err, sizeof err), PO_OK);
    assert_int_equal(po_store_round_trips(S) - rt, pg ? 1 : 5);
    assert_int_equal(tenants(S), 4);

    /* a query waits: it sees the stretch's insert, BEGIN and both in one
     * round trip */
    rt = po_store_round_trips(S);
    assert_int_equal(po_store_begin(S, err, sizeof err), PO_OK);
    po_store_pipeline(S);
    assert_int_equal(ins_tenant(S, "d"), PO_OK);
    assert_int_equal(
        po_store_exec(S, "SELECT COUNT(*) FROM tenant", NULL, 0, &r, NULL, err, sizeof err), PO_OK);
    assert_string_equal(po_rows_get(&r, 0, 0), "5");
    po_rows_free(&r);
    assert_int_equal(po_store_round_trips(S) - rt, pg ? 1 : 3);
    po_store_rollback(S);
    assert_int_equal(tenants(S), 4);

    /* a failure in the middle, stopping there as the engine does: on
     * PostgreSQL reported by COMMIT; either way nothing is committed */
    assert_int_equal(po_store_begin(S, err, sizeof err), PO_OK);
    po_store_pipeline(S);
    po_err rc = ins_tenant(S, "e");
    assert_int_equal(rc, PO_OK);
    rc = ins_tenant(S, "a"); /* taken */
    assert_int_equal(rc, pg ? PO_OK : PO_ERR_CONFLICT);
    if (!rc)
        rc = ins_tenant(S, "f");
    if (!rc)
        rc = po_store_commit(S, err, sizeof err);
    else
        po_store_rollback(S);
    assert_int_equal(rc, PO_ERR_CONFLICT);
    assert_int_equal(tenants(S), 4);
    assert_int_equal(
        t_count(S, "SELECT COUNT(*) FROM tenant WHERE tenant_id IN ('e', 'f')", NULL, 0), 0);

    /* po_store_sync reports it too; the rollback leaves the connection
     * usable */
    assert_int_equal(po_store_begin(S, err, sizeof err), PO_OK);
    po_store_pipeline(S);
    rc = ins_tenant(S, "b");
    if (!rc)
        rc = po_store_sync(S, err, sizeof err);
    assert_int_equal(rc, PO_ERR_CONFLICT);
    po_store_rollback(S);
    assert_int_equal(po_store_begin(S, err, sizeof err), PO_OK);
    assert_int_equal(ins_tenant(S, "g"), PO_OK);
    assert_int_equal(po_store_commit(S, err, sizeof err), PO_OK);
    assert_int_equal(tenants(S), 5);
}

static void changes_count_affected_rows(void **state)
{
    char err[PO_ERRBUF_SIZE];
    int64_t ch = -1;
    assert_int_equal(ins_tenant(S, "a"), PO_OK);
    assert_int_equal(ins_tenant(S, "b"), PO_OK);
    assert_int_equal(po_store_exec(S, "UPDATE tenant SET name = 'x' WHERE tenant_id = 'zz'", NULL,
                                   0, NULL, &ch, err, sizeof err),
                     PO_OK);
    assert_int_equal(ch, 0);
    assert_int_equal(
        po_store_exec(S, "UPDATE tenant SET name = 'x'", NULL, 0, NULL, &ch, err, sizeof err),
        PO_OK);
    assert_int_equal(ch, 2);
}

static void upsert_adds(void **state)
{
    char err[PO_ERRBUF_SIZE];
    for (int i = 0; i < 3; i++) {
        struct po_param p[] = {PO_I64(7)};
        assert_int_equal(po_store_exec(S,
                                       "INSERT INTO account_balance (tenant_id, account, currency,"
                                       " balance, updated_at) VALUES ('t', 'a', 'CNY', ?, 'x') ON"
                                       " CONFLICT (tenant_id, account, currency) DO UPDATE SET"
                                       " balance = account_balance.balance + excluded.balance",
                                       p, PO_NELEM(p), NULL, NULL, err, sizeof err),
                         PO_OK);
    }
    assert_int_equal(t_count(S, "SELECT balance FROM account_balance", NULL, 0), 21);
}

/* A row set parameter: one statement for a batch of any size, on both
 * backends, with every kind of text and NULLs intact. */
static void row_sets(void **state)
{
    char err[PO_ERRBUF_SIZE] = "";
    static const char *const names[] = {
        "plain",          "quote\" and \\ back", "\xe6\x94\xaf\xe4\xbb\x98",
        "tab\tnew\nline", "{braces},[brackets]", "NULL"};
    enum { N = 6 };
    struct po_param cells[N * 3];
    for (int r = 0; r < N; r++) {
        cells[r * 3] = PO_TEXT(names[r]);
        cells[r * 3 + 1] = r == 2 ? PO_NULLP : PO_I64((int64_t)r * 1000000000000 - 5);
        cells[r * 3 + 2] = PO_TEXT(names[r]);
    }
    struct po_rowset rs = {.ncols = 3, .nrows = N, .cells = cells};
    /* INSERT … SELECT FROM a row set */
    int64_t changes = 0;
    assert_int_equal(po_store_exec(S,
                                   "INSERT INTO tenant (tenant_id, name, created_at) SELECT v.id,"
                                   " v.name, 'x' FROM ?{v: id text, n int, name text}",
                                   PO_PARAMS(PO_ROWS(&rs)), NULL, &changes, err, sizeof err),
                     PO_OK);
    assert_int_equal(changes, N);
    /* Read back through a join: the values round-trip exactly. */
    struct po_rows r;
    assert_int_equal(po_store_exec(S,
                                   "SELECT v.id, t.name, v.n FROM ?{v: id text, n int, name text}"
                                   " JOIN tenant t ON t.tenant_id = v.id ORDER BY v.n",
                                   PO_PARAMS(PO_ROWS(&rs)), &r, NULL, err, sizeof err),
                     PO_OK);
    assert_int_equal(r.nrows, N);
    for (int i = 0; i < r.nrows; i++)
        assert_string_equal(po_rows_get(&r, i, 0), po_rows_get(&r, i, 1));
    po_rows_free(&r);
    /* UPDATE … FROM a row set, RETURNING what it updated. */
    struct po_param two[] = {PO_TEXT("plain"), PO_TEXT("renamed"), PO_TEXT("nobody"),
                             PO_TEXT("ghost")};
    struct po_rowset upd = {.ncols = 2, .nrows = 2, .cells = two};
    assert_int_equal(po_store_exec(S,
                                   "UPDATE tenant SET name = u.name FROM ?{u: id text, name text}"
                                   " WHERE tenant.tenant_id = u.id RETURNING tenant.tenant_id",
                                   PO_PARAMS(PO_ROWS(&upd)), &r, &changes, err, sizeof err),
                     PO_OK);
    assert_int_equal(r.nrows, 1);
    assert_string_equal(po_rows_get(&r, 0, 0), "plain");
    assert_int_equal(changes, 1);
    po_rows_free(&r);
    /* An empty row set is an empty table. */
    struct po_rowset none = {.ncols = 2, .nrows = 0, .cells = NULL};
    assert_int_equal(po_store_exec(S, "SELECT COUNT(*) FROM ?{u: id text, name text}",
                                   PO_PARAMS(PO_ROWS(&none)), &r, NULL, err, sizeof err),
                     PO_OK);
    assert_string_equal(po_rows_get(&r, 0, 0), "0");
    po_rows_free(&r);
    /* A row set that does not match its declared columns is refused. */
    struct po_param wrong[] = {PO_I64(1), PO_TEXT("x")};
    struct po_rowset bad = {.ncols = 2, .nrows = 1, .cells = wrong};
    assert_int_equal(po_store_exec(S, "SELECT COUNT(*) FROM ?{u: id text, name text}",
                                   PO_PARAMS(PO_ROWS(&bad)), &r, NULL, err, sizeof err),
                     PO_ERR_STORE);
}

/* More statements than the cache holds: evictions never serve the wrong
 * statement. */
static void statement_cache_evicts_safely(void **state)
{
    char err[PO_ERRBUF_SIZE] = "";
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < PO_STMT_CACHE_MAX + 40; i++) {
            char sql[96];
            snprintf(sql, sizeof sql, "SELECT %d + CAST(? AS BIGINT)", i);
            struct po_rows r;
            assert_int_equal(
                po_store_exec(S, sql, PO_PARAMS(PO_I64(round)), &r, NULL, err, sizeof err), PO_OK);
            assert_int_equal(atoi(po_rows_get(&r, 0, 0)), i + round); /* lint-ok: test */
            po_rows_free(&r);
        }
}

/* A second connection's commit is invisible inside an open read snapshot. */
static void read_snapshot_is_stable(void **state)
{
    struct po_store *other = t_open(URL);
    assert_int_equal(ins_tenant(S, "a"), PO_OK);
    assert_int_equal(po_store_begin_read(S, NULL, 0), PO_OK);
    assert_int_equal(tenants(S), 1);
    assert_int_equal(ins_tenant(other, "b"), PO_OK);
    assert_int_equal(tenants(S), 1);
    po_store_rollback(S);
    assert_int_equal(tenants(S), 2);
    po_store_close(other);
}

/* PostgreSQL: a table of which more than a fifth changed since its
 * statistics were taken is analyzed, once; SQLite: nothing (no
 * sqlite_stat1 appears). */
static void statistics_refreshed(void **state)
{
    (void)state;
    char err[PO_ERRBUF_SIZE] = "";
    int n = -1;
    bool pg = strcmp(po_store_backend(S), "postgres") == 0;
    if (pg) /* autovacuum would analyze it too, given a minute */
        assert_int_equal(po_store_exec_tx(S, "ALTER TABLE tenant SET (autovacuum_enabled = false)",
                                          PO_NO_PARAMS, NULL, err, sizeof err),
                         PO_OK);
    struct po_store *other = t_open(URL);
    assert_int_equal(po_store_begin(other, err, sizeof err), PO_OK);
    for (int i = 0; i < PO_STATS_MIN_CHANGES * 3 / 2; i++) {
        char id[16];
        (void)snprintf(id, sizeof id, "s%d", i);
        assert_int_equal(ins_tenant(other, id), PO_OK);
    }
    assert_int_equal(po_store_commit(other, err, sizeof err), PO_OK);
    po_store_close(other); /* its statistics counted as it leaves */
    const char *analyzed = "SELECT COUNT(*) FROM pg_stat_user_tables WHERE relname = 'tenant'"
                           " AND last_analyze IS NOT NULL";
    for (int i = 0; pg && i < 100 && t_count(S, analyzed, NULL, 0) == 0; i++) {
        assert_int_equal(po_store_refresh_statistics(S, &n, err, sizeof err), PO_OK);
        if (!n)
            usleep(100 * 1000); /* the counts not there yet */
    }
    if (pg) {
        assert_int_equal(t_count(S, analyzed, NULL, 0), 1);
        assert_int_equal(t_count(S,
                                 "SELECT COUNT(*) FROM pg_stat_user_tables WHERE relname ="
                                 " 'tenant' AND n_mod_since_analyze = 0",
                                 NULL, 0),
                         1);
    }
    assert_int_equal(po_store_refresh_statistics(S, &n, err, sizeof err), PO_OK);
    assert_int_equal(n, 0); /* nothing changed since */
    if (pg) {               /* a role that does not own the changed table leaves it alone */
        assert_int_equal(po_store_exec_tx(S,
                                          "UPDATE tenant SET name = name || '.' WHERE tenant_id"
                                          " LIKE 's%'",
                                          PO_NO_PARAMS, NULL, err, sizeof err),
                         PO_OK);
        assert_int_equal(po_store_exec_tx(S,
                                          "DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE"
                                          " rolname = 'po_stats_probe') THEN CREATE ROLE"
                                          " po_stats_probe; END IF; END$$",
                                          PO_NO_PARAMS, NULL, err, sizeof err),
                         PO_OK);
        const char *changed = "SELECT COUNT(*) FROM pg_stat_user_tables WHERE relname = 'tenant'"
                              " AND n_mod_since_analyze > 1000";
        for (int i = 0; i < 100 && t_count(S, changed, NULL, 0) == 0; i++)
            usleep(100 * 1000); /* this connection's counts, once flushed */
        assert_int_equal(t_count(S, changed, NULL, 0), 1);
        assert_int_equal(
            po_store_exec_tx(S, "SET ROLE po_stats_probe", PO_NO_PARAMS, NULL, err, sizeof err),
            PO_OK);
        assert_int_equal(po_store_refresh_statistics(S, &n, err, sizeof err), PO_OK);
        assert_int_equal(n, 0);
        assert_int_equal(po_store_exec_tx(S, "RESET ROLE", PO_NO_PARAMS, NULL, err, sizeof err),
                         PO_OK);
        assert_int_equal(po_store_refresh_statistics(S, &n, err, sizeof err), PO_OK);
        assert_true(n >= 1);
    }
    if (!pg)
        assert_int_equal(
            t_count(S, "SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'sqlite_stat%'", NULL,
                    0),
            0);
}

static void bad_urls_are_refused(void **state)
{
    (void)state;
    struct po_store *s = NULL;
    char err[PO_ERRBUF_SIZE] = "";
    assert_int_equal(po_store_open("mysql://x", &s, err, sizeof err), PO_ERR_INVALID);
    assert_non_null(strstr(err, "unsupported"));
    assert_int_equal(po_store_open("sqlite:", &s, err, sizeof err), PO_ERR_INVALID);
    assert_int_equal(
        po_store_open("postgresql://127.0.0.1:1/nodb?connect_timeout=2", &s, err, sizeof err),
        PO_ERR_TRANSIENT);
    assert_null(s);
}

static void ping_works(void **state)
{
    assert_int_equal(po_store_ping(S, NULL, 0), PO_OK);
    assert_string_equal(po_store_backend(S), t_fx_backend);
}

/* The plan past one primary (docs/scaling.md): every table distributes by
 * tenant_id on a sharded PostgreSQL (Citus) — it has the column, and its
 * primary key and every unique index begin with it — or is one of these
 * reference tables, copied whole to every node. A migration that breaks
 * it fails here, on both stores. */
static const char *const reference_tables[] = {
    "schema_version",   /* the migrations applied: one row per migration */
    "api_key",          /* found by key id before the tenant is known (authentication) */
    "job_lease",        /* which serve node runs each background job: one row per job */
    "operator",         /* the console's people: the deployment's, not a tenant's */
    "operator_session", /* their signed-in browsers */
    "backup_manifest",  /* what a backup copy holds: written into the copy, one row per backup */
    NULL,
};

static bool is_reference(const char *table)
{
    for (int i = 0; reference_tables[i]; i++)
        if (strcmp(reference_tables[i], table) == 0)
            return true;
    return false;
}

/* Each unique index of table (the primary key's included) as rows
 * (name, is_primary, first column). */
static void unique_indexes(struct po_store *s, const char *table, struct po_rows *r)
{
    char err[PO_ERRBUF_SIZE] = "";
    struct po_param p[] = {PO_TEXT(table)};
    const char *sql =
        strcmp(po_store_backend(s), "sqlite") == 0
            ? "SELECT il.name, CASE WHEN il.origin = 'pk' THEN 1 ELSE 0 END,"
              " (SELECT ii.name FROM pragma_index_info(il.name) ii WHERE ii.seqno = 0)"
              " FROM pragma_index_list(?) il WHERE il.\"unique\" = 1"
            : "SELECT CAST(i.indexrelid AS regclass)::text, CASE WHEN i.indisprimary THEN 1 ELSE"
              " 0 END, a.attname::text FROM pg_index i JOIN pg_attribute a ON a.attrelid ="
              " i.indrelid AND a.attnum = i.indkey[0] WHERE i.indisunique AND i.indrelid ="
              " CAST(CAST(? AS TEXT) AS regclass)";
    if (po_store_exec(s, sql, p, 1, r, NULL, err, sizeof err))
        fail_msg("%s: %s", table, err);
}

/* true when every table distributes by tenant; else why names the first
 * that does not. */
static bool distributes_by_tenant(struct po_store *s, char *why, size_t cap)
{
    char err[PO_ERRBUF_SIZE] = "";
    struct po_rows tables;
    bool sqlite = strcmp(po_store_backend(s), "sqlite") == 0;
    if (po_store_exec(s,
                      sqlite ? "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT"
                               " LIKE 'sqlite_%' ORDER BY name"
                             : "SELECT tablename::text FROM pg_tables WHERE schemaname ="
                               " current_schema() ORDER BY tablename",
                      NULL, 0, &tables, NULL, err, sizeof err))
        fail_msg("%s", err);
    int references = 0, named = 0;
    why[0] = '\0';
    for (int t = 0; t < tables.nrows && !why[0]; t++) {
        const char *table = po_rows_get(&tables, t, 0);
        if (is_reference(table)) {
            references++;
            continue;
        }
        char sql[200];
        snprintf(sql, sizeof sql, "SELECT COUNT(tenant_id) FROM %s WHERE 1 = 0", table);
        struct po_rows none;
        if (po_store_exec(s, sql, NULL, 0, &none, NULL, err, sizeof err)) {
            snprintf(why, cap, "table %s has no tenant_id", table);
            break;
        }
        po_rows_free(&none);
        struct po_rows ix;
        unique_indexes(s, table, &ix);
        int primary = 0;
        for (int i = 0; i < ix.nrows && !why[0]; i++) {
            primary += strcmp(po_rows_get(&ix, i, 1), "1") == 0;
            const char *first = po_rows_get(&ix, i, 2);
            if (!first || strcmp(first, "tenant_id") != 0)
                snprintf(why, cap, "table %s: unique index %s begins with %s, not tenant_id", table,
                         po_rows_get(&ix, i, 0), first ? first : "an expression");
        }
        if (!why[0] && primary != 1)
            snprintf(why, cap, "table %s has no primary key", table);
        po_rows_free(&ix);
    }
    while (reference_tables[named])
        named++;
    /* every reference table named exists (the list does not rot) */
    if (!why[0] && references != named)
        snprintf(why, cap, "%d of the %d reference tables exist", references, named);
    if (!why[0] && tables.nrows < 20)
        snprintf(why, cap, "only %d tables", tables.nrows);
    po_rows_free(&tables);
    return !why[0];
}

static void every_table_distributes_by_tenant(void **state)
{
    char why[300] = "";
    if (!distributes_by_tenant(S, why, sizeof why))
        fail_msg("%s (a new table: key it by tenant_id first, or name it a reference table"
                 " with its reason)",
                 why);
    /* ... and the check sees each way a table can break it */
    static const char *const strays[][2] = {
        {"CREATE TABLE stray (id TEXT PRIMARY KEY)", "table stray has no tenant_id"},
        {"CREATE TABLE stray (tenant_id TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (id,"
         " tenant_id))",
         "begins with id, not tenant_id"},
        {"CREATE TABLE stray (tenant_id TEXT NOT NULL, id TEXT NOT NULL, code TEXT, PRIMARY KEY"
         " (tenant_id, id), UNIQUE (code))",
         "begins with code, not tenant_id"},
        {"CREATE TABLE stray (tenant_id TEXT NOT NULL, id TEXT NOT NULL)",
         "table stray has no primary key"},
    };
    char err[PO_ERRBUF_SIZE] = "";
    for (size_t i = 0; i < sizeof strays / sizeof strays[0]; i++) {
        assert_int_equal(po_store_exec(S, strays[i][0], NULL, 0, NULL, NULL, err, sizeof err),
                         PO_OK);
        assert_false(distributes_by_tenant(S, why, sizeof why));
        if (!strstr(why, strays[i][1]))
            fail_msg("%s: %s", strays[i][0], why);
        assert_int_equal(po_store_exec(S, "DROP TABLE stray", NULL, 0, NULL, NULL, err, sizeof err),
                         PO_OK);
    }
    assert_true(distributes_by_tenant(S, why, sizeof why));
}

int main(int argc, char **argv)
{
    t_fx_backend = t_backend(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(migrate_is_idempotent, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(params_round_trip, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(unique_violation_is_conflict, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(other_errors_are_store_errors, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(rollback_discards, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(savepoint_rolls_back_only_its_work, t_fx_setup,
                                        t_fx_teardown),
        cmocka_unit_test_setup_teardown(pipeline_stretch, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(changes_count_affected_rows, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(upsert_adds, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(row_sets, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(statement_cache_evicts_safely, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(read_snapshot_is_stable, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(ping_works, t_fx_setup, t_fx_teardown),
        cmocka_unit_test(bad_urls_are_refused),
        cmocka_unit_test_setup_teardown(statistics_refreshed, t_fx_setup, t_fx_teardown),
        cmocka_unit_test_setup_teardown(every_table_distributes_by_tenant, t_fx_setup,
                                        t_fx_teardown),
    };
    char name[64];
    snprintf(name, sizeof name, "store[%s]", t_fx_backend);
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
