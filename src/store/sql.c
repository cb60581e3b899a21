/*
 * sql.c — what both backends do to SQL text and parameters: the statement
 * cache (prepared statements reused per connection, keyed by the text),
 * rewriting the portable placeholders into a backend's own, and encoding a
 * row set parameter.
 *
 * Placeholders: `?` is one scalar parameter. `?{v: a text, b int}` is a
 * row set parameter (struct po_rowset) used as a table in FROM, aliased v
 * with columns a (text) and b (int64):
 *   PostgreSQL  unnest($1::text[], $2::bigint[]) AS v(a, b)   one array a column
 *   SQLite      (SELECT json_extract(value, '$[0]') AS a, ... FROM json_each(?)) AS v
 *                                                              one JSON array of rows
 * so that one statement text (prepared once) serves a batch of any size.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t po_sql_hash(const char *sql)
{
    uint64_t h = UINT64_C(1469598103934665603); /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)sql; *p; p++)
        h = (h ^ *p) * UINT64_C(1099511628211);
    return h;
}

/* ---- the statement cache ---- */

struct po_stmt_entry *po_stmt_cache_find(struct po_stmt_cache *c, const char *sql, uint64_t hash)
{
    for (int i = 0; i < c->n; i++)
        if (c->e[i].hash == hash && strcmp(c->e[i].sql, sql) == 0) {
            c->e[i].used = ++c->tick;
            return &c->e[i];
        }
    return NULL;
}

struct po_stmt_entry *po_stmt_cache_add(struct po_stmt_cache *c, const char *sql, uint64_t hash,
                                        void (*evict)(void *ctx, struct po_stmt_entry *e),
                                        void *ctx)
{
    struct po_stmt_entry *e = NULL;
    char *copy = strdup(sql);
    if (!copy)
        return NULL;
    if (c->n < PO_STMT_CACHE_MAX) {
        e = &c->e[c->n++];
    } else {
        /* Full: the least recently used statement makes room. */
        e = &c->e[0];
        for (int i = 1; i < c->n; i++)
            if (c->e[i].used < e->used)
                e = &c->e[i];
        evict(ctx, e);
        free(e->sql);
        free(e->text);
    }
    memset(e, 0, sizeof *e);
    e->sql = copy;
    e->hash = hash;
    e->id = ++c->next_id;
    e->used = ++c->tick;
    return e;
}

void po_stmt_cache_drop(struct po_stmt_cache *c, struct po_stmt_entry *e)
{
    PO_ASSERT(e >= c->e && e < c->e + c->n);
    free(e->sql);
    free(e->text);
    *e = c->e[--c->n];
}

void po_stmt_cache_clear(struct po_stmt_cache *c, void (*evict)(void *ctx, struct po_stmt_entry *e),
                         void *ctx)
{
    for (int i = 0; i < c->n; i++) {
        if (evict)
            evict(ctx, &c->e[i]);
        free(c->e[i].sql);
        free(c->e[i].text);
    }
    c->n = 0;
}

/* ---- rewriting ---- */

struct out {
    char *p;
    size_t len, cap;
    bool failed;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->failed)
        return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = (o->cap ? o->cap * 2 : 256) + n;
        char *p = realloc(o->p, cap);
        if (!p) {
            o->failed = true;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static void puts_(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

static void putf(struct out *o, const char *fmt, ...) PO_PRINTF(2, 3);
static void putf(struct out *o, const char *fmt, ...)
{
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf)
        o->failed = true;
    else
        put(o, buf, (size_t)n);
}

static const char *skip_space(const char *p)
{
    while (*p == ' ')
        p++;
    return p;
}

/* Parses "v: a text, b int}" (after "?{"): alias, column names and types.
 * Returns the position after '}', or NULL when malformed. */
static const char *parse_rowset(const char *p, char *alias, size_t acap,
                                char names[][PO_ROWSET_NAME_MAX], char *types, int *ncols)
{
    size_t n = 0;
    p = skip_space(p);
    while ((*p >= 'a' && *p <= 'z') || *p == '_') {
        if (n + 1 >= acap)
            return NULL;
        alias[n++] = *p++;
    }
    alias[n] = '\0';
    if (!n || *p++ != ':')
        return NULL;
    *ncols = 0;
    for (;;) {
        p = skip_space(p);
        if (*ncols == PO_ROWSET_COLS_MAX)
            return NULL;
        char *name = names[*ncols];
        n = 0;
        while ((*p >= 'a' && *p <= 'z') || *p == '_' || (*p >= '0' && *p <= '9')) {
            if (n + 1 >= PO_ROWSET_NAME_MAX)
                return NULL;
            name[n++] = *p++;
        }
        name[n] = '\0';
        p = skip_space(p);
        if (!n)
            return NULL;
        if (strncmp(p, "text", 4) == 0)
            types[*ncols] = 't', p += 4;
        else if (strncmp(p, "int", 3) == 0)
            types[*ncols] = 'i', p += 3;
        else
            return NULL;
        (*ncols)++;
        p = skip_space(p);
        if (*p == '}')
            return p + 1;
        if (*p++ != ',')
            return NULL;
    }
}

po_err po_sql_rewrite(const char *sql, bool pg, char **out_text, struct po_sql_shape *shape)
{
    struct out o = {0};
    memset(shape, 0, sizeof *shape);
    int phys = 0;
    for (const char *p = sql; *p; p++) {
        if (*p != '?') {
            put(&o, p, 1);
            continue;
        }
        if (shape->nlogical == PO_SQL_PARAMS_MAX) {
            free(o.p);
            return PO_ERR_LIMIT;
        }
        int k = shape->nlogical++;
        if (p[1] != '{') {
            if (pg)
                putf(&o, "$%d", ++phys);
            else
                puts_(&o, "?");
            continue;
        }
        char alias[PO_ROWSET_NAME_MAX], names[PO_ROWSET_COLS_MAX][PO_ROWSET_NAME_MAX];
        const char *end =
            parse_rowset(p + 2, alias, sizeof alias, names, shape->types[k], &shape->ncols[k]);
        if (!end) {
            free(o.p);
            return PO_ERR_INVALID;
        }
        shape->rowset[k] = true;
        if (pg) {
            puts_(&o, "unnest(");
            for (int c = 0; c < shape->ncols[k]; c++)
                putf(&o, "%s$%d::%s[]", c ? ", " : "", ++phys,
                     shape->types[k][c] == 'i' ? "bigint" : "text");
            putf(&o, ") AS %s(", alias);
            for (int c = 0; c < shape->ncols[k]; c++)
                putf(&o, "%s%s", c ? ", " : "", names[c]);
            puts_(&o, ")");
        } else {
            puts_(&o, "(SELECT ");
            for (int c = 0; c < shape->ncols[k]; c++)
                putf(&o, "%sjson_extract(value, '$[%d]') AS %s", c ? ", " : "", c, names[c]);
            putf(&o, " FROM json_each(?)) AS %s", alias);
        }
        p = end - 1;
    }
    if (!o.p)
        put(&o, "", 0);
    if (o.failed) {
        free(o.p);
        return PO_ERR_NOMEM;
    }
    shape->nphysical = pg ? phys : shape->nlogical;
    *out_text = o.p;
    return PO_OK;
}

/* ---- encoding row sets ---- */

static void put_i64(struct out *o, int64_t v)
{
    putf(o, "%lld", (long long)v);
}

/* Checks that the row set matches the statement's declared columns. */
static bool rowset_ok(const struct po_rowset *rs, const char *types, int ncols)
{
    if (!rs || rs->ncols != ncols || rs->nrows < 0 || rs->nrows > PO_ROWSET_ROWS_MAX)
        return false;
    for (int r = 0; r < rs->nrows; r++)
        for (int c = 0; c < ncols; c++) {
            const struct po_param *cell = &rs->cells[r * ncols + c];
            if (cell->type != PO_P_NULL && cell->type != (types[c] == 'i' ? PO_P_I64 : PO_P_TEXT))
                return false;
        }
    return true;
}

char *po_rowset_pg_array(const struct po_rowset *rs, const char *types, int ncols, int col)
{
    struct out o = {0};
    if (!rowset_ok(rs, types, ncols))
        return NULL;
    puts_(&o, "{");
    for (int r = 0; r < rs->nrows; r++) {
        const struct po_param *cell = &rs->cells[r * ncols + col];
        if (r)
            puts_(&o, ",");
        if (cell->type == PO_P_NULL) {
            puts_(&o, "NULL");
        } else if (cell->type == PO_P_I64) {
            put_i64(&o, cell->i64);
        } else {
            puts_(&o, "\"");
            for (const char *s = cell->text; *s; s++) {
                if (*s == '"' || *s == '\\')
                    puts_(&o, "\\");
                put(&o, s, 1);
            }
            puts_(&o, "\"");
        }
    }
    puts_(&o, "}");
    if (o.failed) {
        free(o.p);
        return NULL;
    }
    return o.p;
}

char *po_rowset_json(const struct po_rowset *rs, const char *types, int ncols)
{
    static const char hex[] = "0123456789abcdef";
    struct out o = {0};
    if (!rowset_ok(rs, types, ncols))
        return NULL;
    puts_(&o, "[");
    for (int r = 0; r < rs->nrows; r++) {
        puts_(&o, r ? ",[" : "[");
        for (int c = 0; c < ncols; c++) {
            const struct po_param *cell = &rs->cells[r * ncols + c];
            if (c)
                puts_(&o, ",");
            if (cell->type == PO_P_NULL) {
                puts_(&o, "null");
            } else if (cell->type == PO_P_I64) {
                put_i64(&o, cell->i64);
            } else {
                puts_(&o, "\"");
                for (const unsigned char *s = (const unsigned char *)cell->text; *s; s++) {
                    if (*s == '"' || *s == '\\') {
                        char esc[2] = {'\\', (char)*s};
                        put(&o, esc, 2);
                    } else if (*s < 0x20) {
                        char esc[6] = {'\\', 'u', '0', '0', hex[*s >> 4], hex[*s & 15]};
                        put(&o, esc, 6);
                    } else {
                        put(&o, (const char *)s, 1);
                    }
                }
                puts_(&o, "\"");
            }
        }
        puts_(&o, "]");
    }
    puts_(&o, "]");
    if (o.failed) {
        free(o.p);
        return NULL;
    }
    return o.p;
}
