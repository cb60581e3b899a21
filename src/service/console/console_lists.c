/*
 * console_lists.c — the console's search and its lists by state
 * (console.h), each a page after a cursor.
 *
 * One walker pages them all: rows are read in the list's order and taken
 * one by one (take): a row the filter keeps becomes an item until the
 * page is full, and the cursor always names the last row looked at, so
 * the next page starts right after what this one examined — also when it
 * stopped at a bound (the rows a substring search may read, the tenants a
 * request may look through). A row kept past a full page only says there
 * is more.
 *
 * The orders' indexes start with the tenant (pay_order's primary key,
 * pay_order_status, pay_order_created, UNIQUE (tenant, channel, txn)),
 * and the payment path must not pay for another, so "every tenant" walks
 * the tenants in id order, one index range each. The other lists have
 * indexes across tenants of their own: the PAYING orders with an expiry
 * (pay_order_expiry), the PROCESSING refunds (refund_processing), the
 * deliveries by state (webhook_delivery_due).
 */
#include "console.h"
#include "views.h"

#include <stdio.h>
#include <string.h>

#define NF(f) ((int)(sizeof(f) / sizeof((f)[0])))
#define PARTS_MAX 4
#define PART_SIZE (PO_ID_MAX + 1) /* an id; a time is shorter */

/* ---- cursors ---- */

struct cursor {
    int n;
    char part[PARTS_MAX][PART_SIZE];
};

/* An id (po_id_valid's characters) or a store time (digits, -, :, ., T,
 * Z, +): what every cursor column holds. */
static bool part_ok(const char *p, size_t len)
{
    if (len == 0 || len >= PART_SIZE)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.' || c == ':' || c == '|' || c == '*' || c == '+'))
            return false;
    }
    return true;
}

static po_err cursor_parse(const char *text, struct cursor *c)
{
    memset(c, 0, sizeof *c);
    if (!text || !*text)
        return PO_OK;
    if (strlen(text) >= PO_CONSOLE_CURSOR_SIZE)
        return PO_ERR_INVALID;
    for (const char *p = text;;) {
        size_t len = strcspn(p, " ");
        if (c->n == PARTS_MAX || !part_ok(p, len))
            return PO_ERR_INVALID;
        memcpy(c->part[c->n], p, len);
        c->part[c->n++][len] = '\0';
        if (!p[len])
            return PO_OK;
        p += len + 1;
    }
}

/* The cursor naming row i: its columns cols[0..n) joined by spaces. A
 * column that cannot be a part is not what payonce writes: PO_ERR_STORE. */
static po_err cursor_text(const struct po_rows *r, int i, const int *cols, int n,
                          char out[PO_CONSOLE_CURSOR_SIZE])
{
    size_t at = 0;
    for (int k = 0; k < n; k++) {
        const char *v = po_rows_get(r, i, cols[k]);
        size_t len = v ? strlen(v) : 0;
        if (!v || !part_ok(v, len) || at + len + 1 >= PO_CONSOLE_CURSOR_SIZE)
            return PO_ERR_STORE;
        if (k)
            out[at++] = ' ';
        memcpy(out + at, v, len);
        at += len;
    }
    out[at] = '\0';
    return PO_OK;
}

/* ---- the walker ---- */

struct walker {
    /* the list: the item's fields are columns 0..nf-1, column 0 the
     * tenant; the cursor's columns pos[0..npos) (pos[0] the tenant) */
    const char *const *fields;
    int nf;
    const int *pos;
    int npos;
    const char *q; /* keep only rows whose column q_col contains q; NULL: every row */
    int q_col;
    int64_t scan_max; /* rows read a request (a substring search); 0: no bound */
    const void *arg;  /* the fetch's own parameters */
    /* the page */
    json_t *items;
    int limit, shown;
    int64_t scanned;
    bool more, done;
    char next[PO_CONSOLE_CURSOR_SIZE];
    po_err rc;
};

/* Takes row i (read in the list's order); false once the page is done. */
static bool take(struct walker *w, const struct po_rows *r, int i)
{
    w->scanned++;
    const char *v = w->q ? po_rows_get(r, i, w->q_col) : NULL;
    if (!w->q || (v && strstr(v, w->q))) {
        if (w->shown == w->limit) { /* the page is full: this row is the next one's */
            w->more = w->done = true;
            return false;
        }
        json_t *item = po_view_row(r, i, w->fields, w->nf);
        if (!item || json_array_append_new(w->items, item)) {
            w->rc = PO_ERR_NOMEM;
            w->done = true;
            return false;
        }
        w->shown++;
    }
    if ((w->rc = cursor_text(r, i, w->pos, w->npos, w->next)) != PO_OK) {
        w->done = true;
        return false;
    }
    if (w->scan_max && w->scanned >= w->scan_max) { /* read enough: go on from here */
        w->more = w->done = true;
        return false;
    }
    return true;
}

/* How many rows the next read asks for: enough to fill the page and see
 * one more, or what is left of the reading budget. */
static int64_t want(const struct walker *w)
{
    return w->scan_max ? w->scan_max - w->scanned : (int64_t)(w->limit - w->shown) + 1;
}

/* Runs sql and takes its rows. */
static po_err read_rows(struct po_store *s, struct walker *w, const char *sql,
                        const struct po_param *p, int np)
{
    struct po_rows r;
    po_err rc = po_store_exec(s, sql, p, np, &r, NULL, NULL, 0);
    if (rc)
        return rc;
    for (int i = 0; i < r.nrows && take(w, &r, i); i++)
        ;
    po_rows_free(&r);
    return w->rc;
}

/* One tenant's part of a list kept per tenant, after the position `after`
 * inside that tenant (after->n == 0: from its start). */
typedef po_err (*tenant_fetch)(struct po_store *s, struct walker *w, const char *tenant,
                               const struct cursor *after);

/* The page of a list kept per tenant: tenant `only`, or every tenant in id
 * order from the cursor's, at most PO_CONSOLE_TENANTS_WALK of them (a
 * cursor of a tenant alone starts at that tenant's first row). */
static po_err walk(struct po_store *s, const char *only, tenant_fetch fetch, struct walker *w,
                   const struct cursor *c)
{
    if (only && c->n && strcmp(c->part[0], only) != 0)
        return PO_ERR_INVALID;
    struct po_rows t = {0};
    int n = 1;
    if (!only) {
        po_err rc =
            po_store_exec(s,
                          "SELECT tenant_id FROM tenant WHERE tenant_id >= ? ORDER BY tenant_id"
                          " LIMIT " PO_STR(PO_CONSOLE_TENANTS_WALK) " + 1",
                          PO_PARAMS(PO_TEXT(c->n ? c->part[0] : "")), &t, NULL, NULL, 0);
        if (rc)
            return rc;
        n = t.nrows;
    }
    po_err rc = PO_OK;
    for (int i = 0; !rc && !w->done && i < n && i < PO_CONSOLE_TENANTS_WALK; i++) {
        const char *tenant = only ? only : po_rows_get(&t, i, 0);
        struct cursor inner = {0};
        if (c->n > 1 && strcmp(tenant, c->part[0]) == 0) {
            inner.n = c->n - 1;
            memcpy(inner.part, c->part + 1, sizeof inner.part[0] * (size_t)inner.n);
        }
        rc = fetch(s, w, tenant, &inner);
    }
    if (!rc && !w->done && n > PO_CONSOLE_TENANTS_WALK) { /* the tenants' budget: go on there */
        w->more = true;
        (void)snprintf(w->next, sizeof w->next, "%s", po_rows_get(&t, PO_CONSOLE_TENANTS_WALK, 0));
    }
    po_rows_free(&t);
    return rc;
}

/* Starts a page: its bounds checked, its cursor parsed (a list kept per
 * tenant also takes a tenant alone), its items made. */
static po_err page_start(struct walker *w, struct po_console_page *pg, bool per_tenant,
                         struct cursor *c)
{
    pg->more = false;
    pg->next[0] = '\0';
    if (pg->limit < 1 || pg->limit > PO_CONSOLE_PAGE_MAX || cursor_parse(pg->after, c) ||
        (c->n && c->n != w->npos && !(per_tenant && c->n == 1)))
        return PO_ERR_INVALID;
    w->limit = pg->limit;
    return (w->items = json_array()) ? PO_OK : PO_ERR_NOMEM;
}

/* Ends a page read with rc: its answer, extra's members with {items,
 * more, next (null: none)}, and the page's cursor. Takes extra and the
 * items either way. */
static po_err page_end(struct walker *w, po_err rc, json_t *extra, struct po_console_page *pg,
                       json_t **out)
{
    *out = NULL;
    if (!rc && !extra)
        rc = PO_ERR_NOMEM;
    if (rc) {
        json_decref(w->items);
        json_decref(extra);
        return rc;
    }
    if (json_object_set_new(extra, "items", w->items) ||
        json_object_set_new(extra, "more", json_boolean(w->more)) ||
        json_object_set_new(extra, "next", w->more ? json_string(w->next) : json_null())) {
        json_decref(extra);
        return PO_ERR_NOMEM;
    }
    if ((pg->more = w->more))
        PO_ASSERT(po_strcpy(pg->next, sizeof pg->next, w->next) == PO_OK);
    *out = extra;
    return PO_OK;
}

/* ---- the items ---- */

#define ORDER_COLS                                                                                 \
    "tenant_id, out_trade_no, channel, channel_txn_id, amount, currency, status, created_at,"      \
    " expires_at"
static const char *const order_fields[] = {"tenant",         "out_trade_no", "channel",
                                           "channel_txn_id", "#amount",      "currency",
                                           "status",         "created_at",   "time_expire"};
#define REFUND_COLS                                                                                \
    "tenant_id, out_refund_no, out_trade_no, amount, currency, status, created_at, submit_state,"  \
    " submit_attempts, submit_error"
static const char *const refund_fields[] = {
    "tenant", "out_refund_no", "out_trade_no", "#amount",          "currency",
    "status", "created_at",    "submit_state", "#submit_attempts", "submit_error"};
#define DELIVERY_COLS                                                                              \
    "d.tenant_id, d.event_id, e.type, d.endpoint_id, d.object_id, d.attempts, d.last_status,"      \
    " d.last_error, d.next_at, d.created_at, d.updated_at FROM webhook_delivery d LEFT JOIN"       \
    " outbox_event e ON e.tenant_id = d.tenant_id AND e.event_id = d.event_id"
static const char *const delivery_fields[] = {
    "tenant",       "event_id",   "type",    "endpoint_id", "object_id", "#attempts",
    "#last_status", "last_error", "next_at", "created_at",  "updated_at"};

/* ---- search ---- */

bool po_find_field_parse(const char *name, enum po_find_field *out)
{
    static const char *const names[] = {"order", "txn", "refund"};
    for (int i = 0; name && i < NF(names); i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (enum po_find_field)i;
            return true;
        }
    return false;
}

/* What a search looks for: q, and for a prefix the first text after every
 * text that starts with q (q with its last byte one higher: an id's bytes
 * are below 0x7f). */
struct find {
    enum po_find_field field;
    const char *q;
    char succ[PO_TXN_ID_MAX + 1];
};

/* The registered channels in name order: a search by transaction id walks
 * UNIQUE (tenant, channel, txn) one channel at a time. */
static int channels_sorted(const char *names[PO_CHANNELS_MAX])
{
    int n = 0;
    for (int i = 0; po_channels[i] && n < PO_CHANNELS_MAX; i++) {
        int k = n++;
        for (; k > 0 && strcmp(names[k - 1], po_channels[i]->name) > 0; k--)
            names[k] = names[k - 1];
        names[k] = po_channels[i]->name;
    }
    return n;
}

/* Orders or refunds whose number (or transaction id) starts with q, in
 * index order: the range q <= value < succ, each value then compared byte
 * for byte (substr) so that no collation can add one that does not start
 * with q. */
static po_err find_prefix(struct po_store *s, struct walker *w, const char *tenant,
                          const struct cursor *after)
{
    /* q <= value < succ, after the cursor, then byte for byte */
#define PREFIX(COLS, TABLE, COL)                                                                   \
    "SELECT " COLS " FROM " TABLE " WHERE tenant_id = ? AND " COL " >= ? AND " COL " < ? AND " COL \
    " > ? AND substr(" COL ", 1, length(?)) = ? ORDER BY " COL " LIMIT ?"
    static const char *const by_number[] = {
        [PO_FIND_ORDER] = PREFIX(ORDER_COLS, "pay_order", "out_trade_no"),
        [PO_FIND_REFUND] = PREFIX(REFUND_COLS, "refund", "out_refund_no")};
#undef PREFIX
    const struct find *f = w->arg;
    const char *last = after->n ? after->part[after->n - 1] : "";
    if (f->field != PO_FIND_TXN)
        return read_rows(s, w, by_number[f->field],
                         PO_PARAMS(PO_TEXT(tenant), PO_TEXT(f->q), PO_TEXT(f->succ), PO_TEXT(last),
                                   PO_TEXT(f->q), PO_TEXT(f->q), PO_I64(want(w))));
    const char *names[PO_CHANNELS_MAX];
    int n = channels_sorted(names);
    po_err rc = PO_OK;
    for (int i = 0; !rc && !w->done && i < n; i++) {
        if (after->n && strcmp(names[i], after->part[0]) < 0)
            continue; /* before the cursor's channel */
        bool there = after->n && strcmp(names[i], after->part[0]) == 0;
        rc = read_rows(s, w,
                       "SELECT " ORDER_COLS " FROM pay_order WHERE tenant_id = ? AND channel = ?"
                       " AND channel_txn_id >= ? AND channel_txn_id < ? AND channel_txn_id > ? AND"
                       " substr(channel_txn_id, 1, length(?)) = ? ORDER BY channel_txn_id LIMIT ?",
                       PO_PARAMS(PO_TEXT(tenant), PO_TEXT(names[i]), PO_TEXT(f->q),
                                 PO_TEXT(f->succ), PO_TEXT(there ? last : ""), PO_TEXT(f->q),
                                 PO_TEXT(f->q), PO_I64(want(w))));
    }
    return rc;
}

/* Substring: the tenant's orders newest first (pay_order_created), or its
 * refunds in number order (the primary key), read up to the budget; take
 * keeps those that contain q. */
static po_err find_contains(struct po_store *s, struct walker *w, const char *tenant,
                            const struct cursor *after)
{
    const struct find *f = w->arg;
    if (f->field == PO_FIND_REFUND)
        return read_rows(
            s, w,
            "SELECT " REFUND_COLS " FROM refund WHERE tenant_id = ? AND"
            " out_refund_no > ? ORDER BY out_refund_no LIMIT ?",
            PO_PARAMS(PO_TEXT(tenant), PO_TEXT(after->n ? after->part[0] : ""), PO_I64(want(w))));
    const char *ts = after->n ? after->part[0] : "", *no = after->n ? after->part[1] : "";
    return read_rows(s, w,
                     "SELECT " ORDER_COLS " FROM pay_order WHERE tenant_id = ? AND (? = '' OR"
                     " created_at < ? OR (created_at = ? AND out_trade_no < ?)) ORDER BY"
                     " created_at DESC, out_trade_no DESC LIMIT ?",
                     PO_PARAMS(PO_TEXT(tenant), PO_TEXT(ts), PO_TEXT(ts), PO_TEXT(ts), PO_TEXT(no),
                               PO_I64(want(w))));
}

po_err po_console_find(struct po_store *s, const char *tenant, enum po_find_field field,
                       bool contains, const char *q, struct po_console_page *pg, json_t **out)
{
    /* the cursor's columns: tenant, then what the reading goes by */
    static const int by_no[] = {0, 1}, by_txn[] = {0, 2, 3}, by_time[] = {0, 7, 1};
    struct find f = {field, q, ""};
    *out = NULL;
    if (!q || !po_id_valid(q, PO_TXN_ID_MAX))
        return PO_ERR_INVALID;
    PO_ASSERT(po_strcpy(f.succ, sizeof f.succ, q) == PO_OK);
    f.succ[strlen(f.succ) - 1]++;
    bool refunds = field == PO_FIND_REFUND, by_number = refunds || !contains;
    struct walker w = {.fields = refunds ? refund_fields : order_fields,
                       .nf = refunds ? NF(refund_fields) : NF(order_fields),
                       .pos = !by_number             ? by_time
                              : field == PO_FIND_TXN ? by_txn
                                                     : by_no,
                       .npos = !by_number             ? NF(by_time)
                               : field == PO_FIND_TXN ? NF(by_txn)
                                                      : NF(by_no),
                       .q = contains ? q : NULL,
                       .q_col = field == PO_FIND_TXN ? 3 : 1,
                       .scan_max = contains ? PO_CONSOLE_SCAN_MAX : 0,
                       .arg = &f};
    struct cursor c;
    po_err rc = page_start(&w, pg, true, &c);
    if (rc)
        return rc;
    rc = walk(s, tenant, contains ? find_contains : find_prefix, &w, &c);
    return page_end(&w, rc,
                    json_pack("{s:s, s:s, s:s, s:I}", "field",
                              refunds                ? "refund"
                              : field == PO_FIND_TXN ? "txn"
                                                     : "order",
                              "match", contains ? "contains" : "prefix", "q", q, "scanned",
                              (json_int_t)w.scanned),
                    pg, out);
}

/* ---- lists by state ---- */

static const char *const list_names[PO_LIST_COUNT] = {
    "orders_paying", "orders_expired", "refunds_processing", "deliveries_failing", "dead_letters"};

const char *po_console_list_name(enum po_console_list l)
{
    return l < PO_LIST_COUNT ? list_names[l] : "?";
}

bool po_console_list_parse(const char *name, enum po_console_list *out)
{
    for (int i = 0; name && i < PO_LIST_COUNT; i++)
        if (strcmp(name, list_names[i]) == 0) {
            *out = (enum po_console_list)i;
            return true;
        }
    return false;
}

/* The filters of each list, as counted and as listed (the cursor's
 * conditions and the order come after). ? : now, then the tenant twice. */
#define EXPIRED_WHERE                                                                              \
    " FROM pay_order WHERE status = 'PAYING' AND expires_at IS NOT NULL AND expires_at < ? AND"    \
    " (? = '' OR tenant_id = ?)"
#define PROCESSING_WHERE " FROM refund WHERE status = 'PROCESSING' AND (? = '' OR tenant_id = ?)"
#define FAILING_WHERE                                                                              \
    " WHERE d.state = 'pending' AND d.attempts > 0 AND (? = '' OR d.tenant_id = ?)"
#define DEAD_WHERE " WHERE d.state = 'dead' AND (? = '' OR d.tenant_id = ?)"

static po_err list_paying(struct po_store *s, struct walker *w, const char *tenant,
                          const struct cursor *after)
{
    const char *ts = after->n ? after->part[0] : "", *no = after->n ? after->part[1] : "";
    return read_rows(s, w,
                     "SELECT " ORDER_COLS " FROM pay_order WHERE tenant_id = ? AND status ="
                     " 'PAYING' AND (? = '' OR created_at > ? OR (created_at = ? AND"
                     " out_trade_no > ?)) ORDER BY created_at, out_trade_no LIMIT ?",
                     PO_PARAMS(PO_TEXT(tenant), PO_TEXT(ts), PO_TEXT(ts), PO_TEXT(ts), PO_TEXT(no),
                               PO_I64(want(w))));
}

/* A list with an index across tenants: one read after the cursor. */
static po_err list_across(struct po_store *s, struct walker *w, enum po_console_list l,
                          const char *tenant, const char *now, const struct cursor *c)
{
    const char *t = tenant ? tenant : "", *c0 = c->n ? c->part[0] : "",
               *c1 = c->n ? c->part[1] : "", *c2 = c->n ? c->part[2] : "",
               *c3 = c->n > 3 ? c->part[3] : "";
    switch (l) {
    case PO_LIST_ORDERS_EXPIRED:
        return read_rows(
            s, w,
            "SELECT " ORDER_COLS EXPIRED_WHERE " AND (? = '' OR (expires_at, tenant_id,"
            " out_trade_no) > (?, ?, ?)) ORDER BY expires_at, tenant_id, out_trade_no LIMIT ?",
            PO_PARAMS(PO_TEXT(now), PO_TEXT(t), PO_TEXT(t), PO_TEXT(c0), PO_TEXT(c0), PO_TEXT(c1),
                      PO_TEXT(c2), PO_I64(want(w))));
    case PO_LIST_REFUNDS_PROCESSING:
        return read_rows(
            s, w,
            "SELECT " REFUND_COLS PROCESSING_WHERE " AND (? = '' OR (created_at, tenant_id,"
            " out_refund_no) > (?, ?, ?)) ORDER BY created_at, tenant_id, out_refund_no LIMIT ?",
            PO_PARAMS(PO_TEXT(t), PO_TEXT(t), PO_TEXT(c0), PO_TEXT(c0), PO_TEXT(c1), PO_TEXT(c2),
                      PO_I64(want(w))));
    case PO_LIST_DELIVERIES_FAILING:
        return read_rows(s, w,
                         "SELECT " DELIVERY_COLS FAILING_WHERE " AND (? = '' OR (d.next_at,"
                         " d.tenant_id, d.event_id, d.endpoint_id) > (?, ?, ?, ?)) ORDER BY"
                         " d.next_at, d.tenant_id, d.event_id, d.endpoint_id LIMIT ?",
                         PO_PARAMS(PO_TEXT(t), PO_TEXT(t), PO_TEXT(c0), PO_TEXT(c0), PO_TEXT(c1),
                                   PO_TEXT(c2), PO_TEXT(c3), PO_I64(want(w))));
    case PO_LIST_DEAD_LETTERS:
        return read_rows(s, w,
                         "SELECT " DELIVERY_COLS DEAD_WHERE " AND (? = '' OR (d.next_at,"
                         " d.tenant_id, d.event_id, d.endpoint_id) < (?, ?, ?, ?)) ORDER BY"
                         " d.next_at DESC, d.tenant_id DESC, d.event_id DESC, d.endpoint_id DESC"
                         " LIMIT ?",
                         PO_PARAMS(PO_TEXT(t), PO_TEXT(t), PO_TEXT(c0), PO_TEXT(c0), PO_TEXT(c1),
                                   PO_TEXT(c2), PO_TEXT(c3), PO_I64(want(w))));
    default:
        return PO_ERR_INVALID;
    }
}

po_err po_console_list(struct po_store *s, const char *tenant, enum po_console_list l,
                       const char *now, struct po_console_page *pg, json_t **out)
{
    /* the cursor's columns, the tenant first where the list is kept per tenant */
    static const int paying[] = {0, 7, 1}, expired[] = {8, 0, 1}, processing[] = {6, 0, 1},
                     deliveries[] = {8, 0, 1, 3};
    *out = NULL;
    if (l >= PO_LIST_COUNT)
        return PO_ERR_INVALID;
    bool orders = l == PO_LIST_ORDERS_PAYING || l == PO_LIST_ORDERS_EXPIRED,
         refunds = l == PO_LIST_REFUNDS_PROCESSING;
    struct walker w = {.fields = orders    ? order_fields
                                 : refunds ? refund_fields
                                           : delivery_fields,
                       .nf = orders    ? NF(order_fields)
                             : refunds ? NF(refund_fields)
                                       : NF(delivery_fields),
                       .pos = l == PO_LIST_ORDERS_PAYING    ? paying
                              : l == PO_LIST_ORDERS_EXPIRED ? expired
                              : refunds                     ? processing
                                                            : deliveries,
                       .npos = orders || refunds ? 3 : 4};
    struct cursor c;
    po_err rc = page_start(&w, pg, l == PO_LIST_ORDERS_PAYING, &c);
    if (rc)
        return rc;
    rc = l == PO_LIST_ORDERS_PAYING ? walk(s, tenant, list_paying, &w, &c)
                                    : list_across(s, &w, l, tenant, now, &c);
    return page_end(&w, rc, json_pack("{s:s}", "list", list_names[l]), pg, out);
}

/* COUNT(*) of a read that stops at cap rows. */
static po_err count_upto(struct po_store *s, const char *sql, const struct po_param *p, int np,
                         int64_t *out)
{
    struct po_rows r;
    po_err rc = po_store_exec(s, sql, p, np, &r, NULL, NULL, 0);
    if (!rc) {
        rc = r.nrows == 1 ? po_rows_i64(&r, 0, 0, out) : PO_ERR_STORE;
        po_rows_free(&r);
    }
    return rc;
}

#define CAP PO_STR(PO_CONSOLE_COUNT_MAX)

/* The PAYING orders of tenant, or of every tenant (as far as the walk's
 * budget goes: *capped then). */
static po_err count_paying(struct po_store *s, const char *tenant, int64_t *n, bool *capped)
{
    struct po_rows t = {0};
    po_err rc = tenant ? PO_OK
                       : po_store_exec(s,
                                       "SELECT tenant_id FROM tenant ORDER BY tenant_id"
                                       " LIMIT " PO_STR(PO_CONSOLE_TENANTS_WALK) " + 1",
                                       PO_NO_PARAMS, &t, NULL, NULL, 0);
    int nt = tenant ? 1 : t.nrows;
    *n = 0;
    *capped = nt > PO_CONSOLE_TENANTS_WALK;
    for (int i = 0; !rc && i < nt && i < PO_CONSOLE_TENANTS_WALK && *n <= PO_CONSOLE_COUNT_MAX;
         i++) {
        int64_t k = 0;
        rc = count_upto(s,
                        "SELECT COUNT(*) FROM (SELECT 1 FROM pay_order WHERE tenant_id = ? AND"
                        " status = 'PAYING' LIMIT " CAP " + 1) c",
                        PO_PARAMS(PO_TEXT(tenant ? tenant : po_rows_get(&t, i, 0))), &k);
        *n += k;
    }
    po_rows_free(&t);
    return rc;
}

po_err po_console_counts(struct po_store *s, const char *tenant, const char *now, json_t **out)
{
    const char *t = tenant ? tenant : "";
    int64_t n[PO_LIST_COUNT] = {0};
    bool capped = false;
    po_err rc = count_paying(s, tenant, &n[PO_LIST_ORDERS_PAYING], &capped);
    if (!rc)
        rc =
            count_upto(s, "SELECT COUNT(*) FROM (SELECT 1" EXPIRED_WHERE " LIMIT " CAP " + 1) c",
                       PO_PARAMS(PO_TEXT(now), PO_TEXT(t), PO_TEXT(t)), &n[PO_LIST_ORDERS_EXPIRED]);
    if (!rc)
        rc =
            count_upto(s, "SELECT COUNT(*) FROM (SELECT 1" PROCESSING_WHERE " LIMIT " CAP " + 1) c",
                       PO_PARAMS(PO_TEXT(t), PO_TEXT(t)), &n[PO_LIST_REFUNDS_PROCESSING]);
    if (!rc)
        rc = count_upto(s,
                        "SELECT COUNT(*) FROM (SELECT 1 FROM webhook_delivery d" FAILING_WHERE
                        " LIMIT " CAP " + 1) c",
                        PO_PARAMS(PO_TEXT(t), PO_TEXT(t)), &n[PO_LIST_DELIVERIES_FAILING]);
    if (!rc)
        rc = count_upto(s,
                        "SELECT COUNT(*) FROM (SELECT 1 FROM webhook_delivery d" DEAD_WHERE
                        " LIMIT " CAP " + 1) c",
                        PO_PARAMS(PO_TEXT(t), PO_TEXT(t)), &n[PO_LIST_DEAD_LETTERS]);
    if (rc)
        return rc;
    json_t *doc = json_object();
    for (int l = 0; doc && l < PO_LIST_COUNT; l++) {
        bool over = n[l] > PO_CONSOLE_COUNT_MAX;
        json_t *c =
            json_pack("{s:I, s:b}", "count", (json_int_t)(over ? PO_CONSOLE_COUNT_MAX : n[l]),
                      "capped", over || (l == PO_LIST_ORDERS_PAYING && capped));
        if (!c || json_object_set_new(doc, list_names[l], c)) {
            json_decref(doc);
            doc = NULL;
        }
    }
    *out = doc;
    return doc ? PO_OK : PO_ERR_NOMEM;
}

/* ---- an endpoint's dead letters, the reconciliation days ---- */

po_err po_console_dead_letters(struct po_store *s, const char *tenant, const char *endpoint_id,
                               struct po_console_page *pg, json_t **out)
{
    static const int pos[] = {9, 1};
    struct walker w = {.fields = delivery_fields, .nf = NF(delivery_fields), .pos = pos, .npos = 2};
    struct cursor c;
    *out = NULL;
    po_err rc = page_start(&w, pg, false, &c);
    if (rc)
        return rc;
    const char *ts = c.n ? c.part[0] : "", *ev = c.n ? c.part[1] : "";
    rc = read_rows(s, &w,
                   "SELECT " DELIVERY_COLS " WHERE d.tenant_id = ? AND d.endpoint_id = ? AND"
                   " d.state = 'dead' AND (? = '' OR d.created_at < ? OR (d.created_at = ? AND"
                   " d.event_id < ?)) ORDER BY d.created_at DESC, d.event_id DESC LIMIT ?",
                   PO_PARAMS(PO_TEXT(tenant), PO_TEXT(endpoint_id), PO_TEXT(ts), PO_TEXT(ts),
                             PO_TEXT(ts), PO_TEXT(ev), PO_I64(want(&w))));
    return page_end(&w, rc, json_object(), pg, out);
}

/* A day's status from its state and what its last fetch came to. */
static const char *day_status(const char *state, const char *last_fetch)
{
    if (state && (strcmp(state, "done") == 0 || strcmp(state, "none") == 0))
        return "done";
    return last_fetch && strcmp(last_fetch, "failed") == 0 ? "failed" : "pending";
}

po_err po_console_recon_days(struct po_store *s, const char *tenant, const char *status_filter,
                             struct po_console_page *pg, json_t **out)
{
    static const char *const f[] = {"tenant",    "channel",     "bill_date",  "state",
                                    "#attempts", "why",         "last_fetch", "next_try_at",
                                    "#overdue",  "file_sha256", "updated_at"};
    static const int pos[] = {2, 0, 1};
    struct walker w = {.fields = f, .nf = NF(f), .pos = pos, .npos = 3};
    struct cursor c;
    const char *t = tenant ? tenant : "", *st = status_filter ? status_filter : "";
    *out = NULL;
    if (*st && strcmp(st, "done") != 0 && strcmp(st, "failed") != 0 && strcmp(st, "pending") != 0)
        return PO_ERR_INVALID;
    po_err rc = page_start(&w, pg, false, &c);
    if (rc)
        return rc;
    rc = read_rows(
        s, &w,
        "SELECT tenant_id, channel, bill_date, state, attempts, last_error, last_fetch,"
        " next_try_at, overdue, file_sha256, updated_at FROM recon_day WHERE (? = '' OR"
        " tenant_id = ?) AND (? = '' OR (? = 'done' AND state IN ('done', 'none')) OR (? ="
        " 'failed' AND state = 'pending' AND last_fetch = 'failed') OR (? = 'pending' AND state ="
        " 'pending' AND COALESCE(last_fetch, '') <> 'failed')) AND (? = '' OR (bill_date,"
        " tenant_id, channel) < (?, ?, ?)) ORDER BY bill_date DESC, tenant_id DESC, channel DESC"
        " LIMIT ?",
        PO_PARAMS(PO_TEXT(t), PO_TEXT(t), PO_TEXT(st), PO_TEXT(st), PO_TEXT(st), PO_TEXT(st),
                  PO_TEXT(c.n ? c.part[0] : ""), PO_TEXT(c.n ? c.part[0] : ""),
                  PO_TEXT(c.n ? c.part[1] : ""), PO_TEXT(c.n ? c.part[2] : ""), PO_I64(want(&w))));
    size_t i;
    json_t *d;
    json_array_foreach(rc ? NULL : w.items, i, d)
    {
        const char *status = day_status(json_string_value(json_object_get(d, "state")),
                                        json_string_value(json_object_get(d, "last_fetch")));
        if (json_object_set_new(d, "status", json_string(status)))
            rc = PO_ERR_NOMEM;
    }
    return page_end(&w, rc, json_object(), pg, out);
}
