/*
 * work.c — what the database pays per credit, read from the database and
 * the kernel rather than from a clock: the same every run, where rates on
 * a shared machine move by half (issue 47).
 *
 * PostgreSQL: WAL bytes (pg_current_wal_lsn), WAL records, full-page
 * images and WAL flushes (pg_stat_wal), commits (pg_stat_database), rows
 * inserted, updated and HOT-updated per table (pg_stat_user_tables), and
 * statements (pg_stat_statements, when the server preloads it; BEGIN and
 * COMMIT included). The cumulative statistics reach those views when a
 * backend flushes them — at the latest when it exits — so a snapshot waits
 * until no other client backend of the database is connected and has its
 * own backend flush first: a measured run's connections are closed before
 * its second snapshot (a `payonce serve` stopped, a baseline's pool
 * closed). SQLite: the bytes the writing process sent to the disk
 * (/proc/PID/io write_bytes: WAL appends and checkpoints). Round trips,
 * transactions and pages written at commit (SQLite's WAL frames) come from
 * the caller: the server's committer counters, or a baseline's own.
 */
#include "bench_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How long a snapshot waits for other backends to leave. */
#define WORK_BACKENDS_WAIT_MS 30000

static const char *cell(const struct po_rows *r, int row, int col)
{
    return row < r->nrows && col < r->ncols ? po_rows_get(r, row, col) : NULL;
}

static double num(const char *s)
{
    return s ? strtod(s, NULL) : 0;
}

/* "X/Y" (hex) → bytes since the start of the WAL. */
static double lsn_bytes(const char *lsn)
{
    unsigned long long hi = 0, lo = 0;
    if (sscanf(lsn, "%llx/%llx", &hi, &lo) != 2)
        return 0;
    return (double)((hi << 32) + lo);
}

static po_err one_row(struct po_store *s, const char *sql, struct po_rows *rows, char *err,
                      size_t errcap)
{
    po_err rc = po_store_exec(s, sql, PO_NO_PARAMS, rows, NULL, err, errcap);
    if (!rc && rows->nrows < 1) {
        po_rows_free(rows);
        po_errf(err, errcap, "bench: work: no row from %s", sql);
        rc = PO_ERR_INTERNAL;
    }
    return rc;
}

/* Waits until this database has no client backend but ours (at most
 * WORK_BACKENDS_WAIT_MS: another's connection is said, not waited for),
 * then has ours flush its statistics (the next statement's end does). */
static po_err quiet(struct po_store *s, char *err, size_t errcap)
{
    struct po_rows rows;
    for (int waited = 0;; waited += 100) {
        po_err rc = one_row(s,
                            "SELECT count(*) FROM pg_stat_activity WHERE datname ="
                            " current_database() AND pid <> pg_backend_pid() AND backend_type ="
                            " 'client backend'",
                            &rows, err, errcap);
        if (rc)
            return rc;
        double others = num(cell(&rows, 0, 0));
        po_rows_free(&rows);
        if (others == 0)
            break;
        if (waited >= WORK_BACKENDS_WAIT_MS) { /* someone else's: go on, and say so */
            fprintf(stderr,
                    "bench: work: %.0f other connections to the database still open after %d s:"
                    " their unflushed statistics may be missing from the rows per table\n",
                    others, WORK_BACKENDS_WAIT_MS / 1000);
            break;
        }
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    po_err rc = po_store_exec(s, "SELECT pg_stat_force_next_flush()", PO_NO_PARAMS, NULL, NULL, err,
                              errcap);
    if (!rc)
        rc = po_store_exec(s, "SELECT pg_stat_clear_snapshot()", PO_NO_PARAMS, NULL, NULL, err,
                           errcap);
    return rc;
}

double po_bench_write_bytes(pid_t pid)
{
    char path[64], line[128];
    (void)snprintf(path, sizeof path, "/proc/%ld/io", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    double v = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "write_bytes:", 12) == 0)
            v = strtod(line + 12, NULL);
    fclose(f);
    return v;
}

static po_err pg_snap(struct po_store *s, struct po_bench_work_snap *o, char *err, size_t errcap)
{
    po_err rc = quiet(s, err, errcap);
    struct po_rows rows;
    if (!rc && !(rc = one_row(s,
                              "SELECT pg_current_wal_lsn()::text, w.wal_records, w.wal_fpi,"
                              " w.wal_sync, d.xact_commit FROM pg_stat_wal w, pg_stat_database d"
                              " WHERE d.datname = current_database()",
                              &rows, err, errcap))) {
        o->wal_bytes = lsn_bytes(cell(&rows, 0, 0) ? cell(&rows, 0, 0) : "");
        o->wal_records = num(cell(&rows, 0, 1));
        o->wal_fpi = num(cell(&rows, 0, 2));
        o->wal_syncs = num(cell(&rows, 0, 3));
        o->commits = num(cell(&rows, 0, 4));
        po_rows_free(&rows);
    }
    if (!rc)
        rc = po_store_exec(s,
                           "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd FROM"
                           " pg_stat_user_tables",
                           PO_NO_PARAMS, &rows, NULL, err, errcap);
    if (!rc) {
        o->tables = json_object();
        for (int i = 0; i < rows.nrows && o->tables; i++)
            if (cell(&rows, i, 0))
                json_object_set_new(o->tables, cell(&rows, i, 0),
                                    json_pack("[f, f, f]", num(cell(&rows, i, 1)),
                                              num(cell(&rows, i, 2)), num(cell(&rows, i, 3))));
        po_rows_free(&rows);
    }
    /* Statements, where the server preloads pg_stat_statements (bench/run.sh
     * does); this snapshot's own statements name pg_stat and are left out. */
    o->statements = -1;
    bool loaded = false;
    if (!rc && po_store_exec(s,
                             "SELECT 1 WHERE current_setting('shared_preload_libraries') LIKE"
                             " '%pg_stat_statements%'",
                             PO_NO_PARAMS, &rows, NULL, NULL, 0) == PO_OK) {
        loaded = rows.nrows > 0;
        po_rows_free(&rows);
    }
    if (!rc && loaded &&
        po_store_exec(s, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements", PO_NO_PARAMS, NULL,
                      NULL, NULL, 0) == PO_OK &&
        po_store_exec(s,
                      "SELECT COALESCE(sum(calls), 0) FROM pg_stat_statements WHERE dbid = (SELECT"
                      " oid FROM pg_database WHERE datname = current_database()) AND query NOT"
                      " LIKE '%pg_stat%' AND query NOT LIKE '%pg_current_wal_lsn%'",
                      PO_NO_PARAMS, &rows, NULL, NULL, 0) == PO_OK) {
        o->statements = num(cell(&rows, 0, 0));
        po_rows_free(&rows);
    }
    return rc;
}

po_err po_bench_work_snap(struct po_store *s, bool pg, struct po_bench_work_snap *out, char *err,
                          size_t errcap)
{
    memset(out, 0, sizeof *out);
    out->pg = pg;
    out->statements = -1;
    return pg ? pg_snap(s, out, err, errcap) : PO_OK;
}

void po_bench_work_snap_free(struct po_bench_work_snap *s)
{
    json_decref(s->tables);
    s->tables = NULL;
}

void po_bench_work_diff(const struct po_bench_work_snap *a, const struct po_bench_work_snap *b,
                        struct po_bench_work *w)
{
    w->pg = a->pg;
    w->wal_bytes = b->wal_bytes - a->wal_bytes;
    w->wal_records = b->wal_records - a->wal_records;
    w->wal_fpi = b->wal_fpi - a->wal_fpi;
    w->wal_syncs = b->wal_syncs - a->wal_syncs;
    w->commits = b->commits - a->commits;
    w->statements = a->statements >= 0 && b->statements >= 0 ? b->statements - a->statements : -1;
    w->bytes_written =
        a->bytes_written >= 0 && b->bytes_written >= 0 ? b->bytes_written - a->bytes_written : -1;
    w->round_trips = b->round_trips - a->round_trips;
    w->pages_written = b->pages_written - a->pages_written;
    w->batches = b->batches - a->batches;
    w->inserted = w->updated = w->hot = 0;
    json_decref(w->tables);
    w->tables = json_object();
    const char *name;
    json_t *after;
    json_object_foreach(b->tables, name, after)
    {
        json_t *before = json_object_get(a->tables, name);
        double d[3];
        for (size_t k = 0; k < 3; k++)
            d[k] = json_number_value(json_array_get(after, k)) -
                   json_number_value(json_array_get(before, k));
        if (d[0] == 0 && d[1] == 0)
            continue;
        w->inserted += d[0];
        w->updated += d[1];
        w->hot += d[2];
        json_object_set_new(
            w->tables, name,
            json_pack("{s:f, s:f, s:f}", "inserted", d[0], "updated", d[1], "hot_updated", d[2]));
    }
}

void po_bench_work_free(struct po_bench_work *w)
{
    json_decref(w->tables);
    w->tables = NULL;
}

/* A total per credit (-1 stays unknown). */
static double per(double v, double credits)
{
    return v < 0 || credits <= 0 ? -1 : v / credits;
}

json_t *po_bench_work_json(const struct po_bench_work *w)
{
    double c = w->credits;
    json_t *o = json_pack(
        "{s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "design", w->name, "credits", c,
        "round_trips_per_credit", per(w->round_trips, c), "transactions_per_credit",
        per(w->batches, c), "round_trips_per_transaction",
        w->batches > 0 ? w->round_trips / w->batches : -1, "cpu_db_us_per_credit",
        1e6 * per(w->cpu_db_s, c), "cpu_client_us_per_credit", 1e6 * per(w->cpu_client_s, c),
        "bytes_written_per_credit", per(w->bytes_written, c));
    if (!o)
        return NULL;
    if (w->pg) {
        json_object_set_new(o, "wal_bytes_per_credit", json_real(per(w->wal_bytes, c)));
        json_object_set_new(o, "wal_records_per_credit", json_real(per(w->wal_records, c)));
        json_object_set_new(o, "wal_fpi_per_credit", json_real(per(w->wal_fpi, c)));
        json_object_set_new(o, "wal_flushes_per_credit", json_real(per(w->wal_syncs, c)));
        json_object_set_new(o, "commits_per_credit", json_real(per(w->commits, c)));
        json_object_set_new(o, "statements_per_credit", json_real(per(w->statements, c)));
        json_object_set_new(o, "rows_inserted_per_credit", json_real(per(w->inserted, c)));
        json_object_set_new(o, "rows_updated_per_credit", json_real(per(w->updated, c)));
        json_object_set_new(o, "rows_hot_updated_per_credit", json_real(per(w->hot, c)));
        json_object_set_new(o, "tables", json_incref(w->tables));
    } else {
        json_object_set_new(o, "wal_frames_per_credit", json_real(per(w->pages_written, c)));
    }
    return o;
}

/* "-" for an unknown figure. */
static const char *fig(char *buf, size_t cap, double v, int decimals)
{
    if (v < 0)
        (void)snprintf(buf, cap, "-");
    else
        (void)snprintf(buf, cap, "%.*f", decimals, v);
    return buf;
}

void po_bench_work_print(const struct po_bench_work *w, int n)
{
    if (n == 0)
        return;
    char a[24], b[24], c[24], d[24], e[24], f[24], g[24], h[24];
    if (w[0].pg) {
        printf("\nwork per credit (PostgreSQL; totals of the run over its credits; the"
               " database's view)\n%-28s %8s %7s %6s %7s %12s %7s %7s %7s %7s %6s %7s %8s\n",
               "design", "WAL B", "WAL rec", "FPI", "rows in", "rows upd/HOT", "stmts", "trips",
               "trip/tx", "commits", "flush", "db us", "client us");
        for (int i = 0; i < n; i++) {
            const struct po_bench_work *x = &w[i];
            double cr = x->credits;
            char upd[32];
            (void)snprintf(upd, sizeof upd, "%.2f/%.2f", x->updated / cr, x->hot / cr);
            printf("%-28s %8.0f %7.1f %6.2f %7.2f %12s %7s %7s %7s %7.3f %6.3f %7.0f %8.0f\n",
                   x->name, x->wal_bytes / cr, x->wal_records / cr, x->wal_fpi / cr,
                   x->inserted / cr, upd, fig(a, sizeof a, per(x->statements, cr), 1),
                   fig(b, sizeof b, per(x->round_trips, cr), 2),
                   fig(c, sizeof c, x->batches > 0 ? x->round_trips / x->batches : -1, 1),
                   x->commits / cr, x->wal_syncs / cr, 1e6 * x->cpu_db_s / cr,
                   1e6 * x->cpu_client_s / cr);
        }
        /* rows per table: where the WAL goes */
        for (int i = 0; i < n; i++) {
            printf("  %s, rows per credit:", w[i].name);
            const char *name;
            json_t *t;
            json_object_foreach(w[i].tables, name, t)
            {
                double in = json_number_value(json_object_get(t, "inserted")) / w[i].credits,
                       up = json_number_value(json_object_get(t, "updated")) / w[i].credits,
                       hot = json_number_value(json_object_get(t, "hot_updated")) / w[i].credits;
                if (in < 0.005 && up < 0.005)
                    continue;
                printf(" %s", name);
                if (in >= 0.005)
                    printf(" +%.2f", in);
                if (up >= 0.005)
                    printf(" ~%.2f (HOT %.2f)", up, hot);
                printf(";");
            }
            printf("\n");
        }
        return;
    }
    printf("\nwork per credit (SQLite; totals of the run over its credits)\n%-28s %10s %10s %8s"
           " %8s %8s %9s\n",
           "design", "WAL frames", "disk B", "stmts", "tx", "stmt/tx", "client us");
    for (int i = 0; i < n; i++) {
        const struct po_bench_work *x = &w[i];
        double cr = x->credits;
        printf("%-28s %10s %10s %8s %8s %8s %9.0f\n", x->name,
               fig(d, sizeof d, per(x->pages_written, cr), 2),
               fig(e, sizeof e, per(x->bytes_written, cr), 0),
               fig(f, sizeof f, per(x->round_trips, cr), 1),
               fig(g, sizeof g, per(x->batches, cr), 3),
               fig(h, sizeof h, x->batches > 0 ? x->round_trips / x->batches : -1, 1),
               1e6 * x->cpu_client_s / cr);
    }
}
