/*
 * move.c — every row of an embedded SQLite database into an empty
 * PostgreSQL one (po_store_move, store.h; `payonce migrate-store`).
 *
 * Both databases carry the same schema (the same migrations, the same
 * version), so a table is copied column by column by name: the tables in
 * the order their migrations created them (every foreign key points at a
 * table created before), each read from one SQLite read snapshot in rowid
 * order, a page at a time, and written with COPY inside one PostgreSQL
 * transaction — the target has every row or none. Afterwards each table
 * is counted on both sides; rows the source gained after its snapshot
 * (a serve still running) are counted, not moved.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOVE_PAGE 1000

/* A name from the schema, as SQL may quote it: [a-z0-9_] only. */
static bool plain_name(const char *s)
{
    if (!s || !*s || strlen(s) > 63)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return false;
    return true;
}

/* A growable text buffer; a failed append leaves *ok false. */
struct buf {
    char *p;
    size_t len, cap;
    bool ok;
};

static void put(struct buf *b, const char *s, size_t n)
{
    if (!b->ok)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 65536;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->ok = false;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

/* One value in COPY's text format: \N for NULL, the four characters COPY
 * reads specially escaped. */
static void put_value(struct buf *b, const char *v)
{
    if (!v) {
        put(b, "\\N", 2);
        return;
    }
    for (const char *c = v; *c; c++) {
        const char *esc = *c == '\\'   ? "\\\\"
                          : *c == '\t' ? "\\t"
                          : *c == '\n' ? "\\n"
                          : *c == '\r' ? "\\r"
                                       : NULL;
        if (esc)
            put(b, esc, 2);
        else
            put(b, c, 1);
    }
}

/* The columns of table t in src, as "a, b, c" into cols. */
static po_err columns_of(struct po_store *src, const char *t, struct buf *cols, int *ncols,
                         char *err, size_t errcap)
{
    char sql[128];
    struct po_rows r;
    PO_ASSERT(po_fmt(sql, sizeof sql, "PRAGMA table_info(%s)", t) == PO_OK);
    po_err rc = po_store_exec(src, sql, PO_NO_PARAMS, &r, NULL, err, errcap);
    if (rc)
        return rc;
    *ncols = r.nrows;
    for (int i = 0; i < r.nrows && !rc; i++) {
        const char *name = po_rows_get(&r, i, 1);
        if (!plain_name(name)) {
            po_errf(err, errcap, "table %s: a column name payonce does not write: %.60s", t,
                    name ? name : "");
            rc = PO_ERR_INVALID;
        }
        if (i)
            put(cols, ", ", 2);
        put(cols, name, strlen(name));
    }
    po_rows_free(&r);
    if (!rc && (!cols->ok || *ncols == 0 || *ncols >= PO_COLS_MAX)) {
        po_errf(err, errcap, "table %s: %d columns", t, *ncols);
        rc = cols->ok ? PO_ERR_INVALID : PO_ERR_NOMEM;
    }
    return rc;
}

static po_err count_rows(struct po_store *s, const char *t, int64_t *out, char *err, size_t errcap)
{
    char sql[128];
    struct po_rows r;
    PO_ASSERT(po_fmt(sql, sizeof sql, "SELECT COUNT(*) FROM %s", t) == PO_OK);
    po_err rc = po_store_exec(s, sql, PO_NO_PARAMS, &r, NULL, err, errcap);
    if (rc)
        return rc;
    if (r.nrows != 1 || po_rows_i64(&r, 0, 0, out)) {
        po_errf(err, errcap, "table %s cannot be counted", t);
        rc = PO_ERR_STORE;
    }
    po_rows_free(&r);
    return rc;
}

/* Table t: every row of src's snapshot into dst with COPY, a page at a time. */
static po_err move_table(struct po_store *src, struct po_store *dst, const char *t, int64_t *moved,
                         char *err, size_t errcap)
{
    struct buf cols = {.ok = true}, data = {.ok = true};
    int ncols = 0;
    po_err rc = columns_of(src, t, &cols, &ncols, err, errcap);
    char *select = NULL, *copy = NULL;
    size_t need = cols.len + 256;
    if (!rc && (!(select = malloc(need)) || !(copy = malloc(need))))
        rc = PO_ERR_NOMEM;
    if (!rc) {
        PO_ASSERT(po_fmt(select, need,
                         "SELECT rowid, %s FROM %s WHERE rowid > ? ORDER BY rowid LIMIT %d", cols.p,
                         t, MOVE_PAGE) == PO_OK);
        PO_ASSERT(po_fmt(copy, need, "COPY %s (%s) FROM STDIN", t, cols.p) == PO_OK);
    }
    int64_t after = 0;
    *moved = 0;
    for (bool more = true; !rc && more;) {
        struct po_rows r;
        rc = po_store_exec(src, select, PO_PARAMS(PO_I64(after)), &r, NULL, err, errcap);
        if (rc)
            break;
        data.len = 0;
        for (int i = 0; i < r.nrows; i++) {
            for (int c = 1; c <= ncols; c++) {
                put_value(&data, po_rows_get(&r, i, c));
                put(&data, c < ncols ? "\t" : "\n", 1);
            }
        }
        more = r.nrows == MOVE_PAGE;
        if (r.nrows && po_rows_i64(&r, r.nrows - 1, 0, &after))
            rc = PO_ERR_STORE;
        int n = r.nrows;
        po_rows_free(&r);
        if (!rc && !data.ok)
            rc = PO_ERR_NOMEM;
        if (!rc && n)
            rc = po_store_pg_copy_in(dst, copy, data.p, data.len, err, errcap);
        if (!rc)
            *moved += n;
    }
    free(cols.p);
    free(data.p);
    free(select);
    free(copy);
    return rc;
}

po_err po_store_move(struct po_store *src, struct po_store *dst, struct po_move_report *out,
                     char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    if (src->ops != &po_store_sqlite || dst->ops != &po_store_postgres) {
        po_errf(err, errcap, "moves go from a sqlite: database to a postgresql:// one");
        return PO_ERR_INVALID;
    }
    int vs = 0, vd = 0;
    if (po_store_schema_version(src, &vs) || po_store_schema_version(dst, &vd) || vs != vd ||
        vs != po_store_schema_latest()) {
        po_errf(err, errcap,
                "the two databases must have this build's schema (version %d): the source has %d,"
                " the target %d (payonce migrate on each)",
                po_store_schema_latest(), vs, vd);
        return PO_ERR_INVALID;
    }
    /* The tables, in the order their migrations created them. */
    struct po_rows tables;
    po_err rc = po_store_exec(src,
                              "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT"
                              " LIKE 'sqlite_%' AND name <> 'schema_version' ORDER BY rowid",
                              PO_NO_PARAMS, &tables, NULL, err, errcap);
    if (rc)
        return rc;
    if (tables.nrows > PO_MOVE_TABLES_MAX) {
        po_errf(err, errcap, "%d tables: more than payonce has", tables.nrows);
        rc = PO_ERR_INVALID;
    }
    for (int i = 0; !rc && i < tables.nrows; i++) {
        const char *t = po_rows_get(&tables, i, 0);
        int64_t n = 0;
        if (!plain_name(t)) {
            po_errf(err, errcap, "a table name payonce does not write: %.60s", t ? t : "");
            rc = PO_ERR_INVALID;
        } else if (!(rc = count_rows(dst, t, &n, err, errcap)) && n) {
            po_errf(err, errcap,
                    "the target is not empty (%s has %lld rows): migrate-store moves into a new"
                    " database",
                    t, (long long)n);
            rc = PO_ERR_CONFLICT;
        }
    }
    if (!rc)
        rc = po_store_begin_read(src, err, errcap);
    if (!rc) {
        rc = po_store_begin(dst, err, errcap);
        for (int i = 0; !rc && i < tables.nrows; i++) {
            struct po_move_table *mt = &out->table[out->ntables++];
            (void)snprintf(mt->name, sizeof mt->name, "%s", po_rows_get(&tables, i, 0));
            rc = move_table(src, dst, mt->name, &mt->rows, err, errcap);
            out->rows += mt->rows;
        }
        if (!rc)
            rc = po_store_commit(dst, err, errcap);
        else
            po_store_rollback(dst);
        po_store_rollback(src);
    }
    po_rows_free(&tables);
    /* Both sides counted now: the target has what was moved; the source
     * may have more (written after its snapshot). */
    for (int i = 0; !rc && i < out->ntables; i++) {
        struct po_move_table *mt = &out->table[i];
        int64_t s = 0, d = 0;
        rc = count_rows(src, mt->name, &s, err, errcap);
        if (!rc)
            rc = count_rows(dst, mt->name, &d, err, errcap);
        if (!rc && d != mt->rows) {
            po_errf(err, errcap, "table %s: %lld rows moved, %lld in the target", mt->name,
                    (long long)mt->rows, (long long)d);
            rc = PO_ERR_STORE;
        }
        if (!rc && s > d)
            out->written_after += s - d;
    }
    return rc;
}
