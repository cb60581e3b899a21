/*
 * outbox.c — the transactional outbox (issue 12, docs/webhooks.md): one row
 * per effect a tenant cares about, written by the transaction that made the
 * effect, so both commit or neither does.
 *
 * The event id is "evt_" and 32 hex digits of SHA-256(tenant, key, type),
 * where key is the effect's idempotency key (the alert key for an alert):
 * the same fact always has the same id, and the primary key (tenant_id,
 * event_id) with ON CONFLICT DO NOTHING keeps a replay from writing it
 * twice. The payload is the event's data.object, JSON text built here.
 */
#include "engine_int.h"

#include "../crypto/crypto.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool po_outbox_type_valid(const char *type)
{
    static const char *const types[] = {PO_OUTBOX_TYPES};
    for (int i = 0; i < PO_NELEM(types); i++)
        if (strcmp(type, types[i]) == 0)
            return true;
    return false;
}

po_err po_outbox_event_id(const char *tenant, const char *key, const char *type,
                          char out[PO_EVENT_ID_SIZE])
{
    char *msg = NULL, hex[65];
    po_err rc = po_fmt_alloc(&msg, "%s\n%s\n%s", tenant, key, type);
    if (!rc)
        rc = po_sha256_hex(msg, strlen(msg), hex);
    free(msg);
    if (!rc)
        (void)snprintf(out, PO_EVENT_ID_SIZE, "evt_%.32s", hex);
    return rc;
}

/* ---- the payload: a flat JSON object, built member by member ---- */

void po_outbox_json_init(struct po_outbox_json *j)
{
    j->len = 0;
    j->overflow = false;
    j->text[0] = '\0';
}

static void put(struct po_outbox_json *j, const char *s, size_t n)
{
    if (j->overflow || j->len + n + 2 > sizeof j->text) {
        j->overflow = true;
        return;
    }
    memcpy(j->text + j->len, s, n);
    j->len += n;
    j->text[j->len] = '\0';
}

static void member(struct po_outbox_json *j, const char *name)
{
    put(j, j->len ? "," : "{", 1);
    put(j, "\"", 1);
    put(j, name, strlen(name));
    put(j, "\":", 2);
}

void po_outbox_json_str(struct po_outbox_json *j, const char *name, const char *value)
{
    member(j, name);
    if (!value || !*value) {
        put(j, "null", 4);
        return;
    }
    char esc[PO_DETAIL_SIZE * 6 + 1];
    size_t n = po_json_escape(value, strlen(value), esc, sizeof esc);
    put(j, "\"", 1);
    put(j, esc, n);
    put(j, "\"", 1);
}

void po_outbox_json_i64(struct po_outbox_json *j, const char *name, int64_t value)
{
    char num[24];
    int n = snprintf(num, sizeof num, "%" PRId64, value);
    member(j, name);
    put(j, num, (size_t)n);
}

const char *po_outbox_json_end(struct po_outbox_json *j)
{
    put(j, j->len ? "}" : "{}", j->len ? 1 : 2);
    return j->overflow ? NULL : j->text;
}

/* ---- writing ---- */

po_err po_outbox_insert(struct po_store *s, const struct po_outbox_row *rows, int n,
                        const char *now, char *err, size_t errcap)
{
    if (n == 0)
        return PO_OK;
    struct po_param *cells = malloc((size_t)n * 6 * sizeof *cells);
    char(*ids)[PO_EVENT_ID_SIZE] = malloc((size_t)n * sizeof *ids);
    po_err rc = cells && ids ? PO_OK : PO_ERR_NOMEM;
    for (int i = 0; !rc && i < n; i++) {
        rc = po_outbox_event_id(rows[i].tenant, rows[i].key, rows[i].type, ids[i]);
        struct po_param *r = &cells[i * 6];
        r[0] = PO_TEXT(rows[i].tenant);
        r[1] = PO_TEXT(ids[i]);
        r[2] = PO_TEXT(rows[i].type);
        r[3] = PO_TEXT(rows[i].object_id);
        r[4] = PO_I64(rows[i].seq);
        r[5] = PO_TEXT(rows[i].payload);
    }
    if (!rc) {
        struct po_rowset rs = {6, n, cells};
        rc = po_store_exec(s,
                           "INSERT INTO outbox_event (tenant_id, event_id, type, object_id,"
                           " obj_seq, payload, created_at) SELECT v.t, v.id, v.ty, v.o, v.q,"
                           " v.p, ? FROM ?{v: t text, id text, ty text, o text, q int, p text}"
                           /* WHERE true: SQLite reads ON after a FROM as a join without it */
                           " WHERE true ON CONFLICT (tenant_id, event_id) DO NOTHING",
                           PO_PARAMS(PO_TEXT(now), PO_ROWS(&rs)), NULL, NULL, err, errcap);
    }
    free(cells);
    free(ids);
    return rc;
}

po_err po_outbox_next_seq(struct po_store *s, const char *tenant, const char *out_trade_no,
                          int64_t *out, char *err, size_t errcap)
{
    struct po_rows r;
    *out = 0;
    if (!out_trade_no || !*out_trade_no)
        return PO_OK;
    po_err rc =
        po_store_exec(s,
                      "UPDATE pay_order SET event_seq = event_seq + 1 WHERE tenant_id = ?"
                      " AND out_trade_no = ? RETURNING event_seq",
                      PO_PARAMS(PO_TEXT(tenant), PO_TEXT(out_trade_no)), &r, NULL, err, errcap);
    if (rc)
        return rc;
    if (r.nrows == 1 && po_rows_i64(&r, 0, 0, out))
        rc = PO_ERR_STORE;
    po_rows_free(&r);
    return rc;
}

po_err po_outbox_put_at(struct po_store *s, const char *tenant, const char *key, const char *type,
                        const char *out_trade_no, int64_t seq, const char *payload, const char *now,
                        char *err, size_t errcap)
{
    if (!payload) {
        po_errf(err, errcap, "outbox payload of %s too large", type);
        return PO_ERR_LIMIT;
    }
    po_err rc = seq ? PO_OK : po_outbox_next_seq(s, tenant, out_trade_no, &seq, err, errcap);
    struct po_outbox_row row = {tenant, key, type, out_trade_no ? out_trade_no : key, seq, payload};
    if (!rc)
        rc = po_outbox_insert(s, &row, 1, now, err, errcap);
    return rc;
}

po_err po_outbox_put(struct po_store *s, const char *tenant, const char *key, const char *type,
                     const char *out_trade_no, const char *payload, const char *now, char *err,
                     size_t errcap)
{
    return po_outbox_put_at(s, tenant, key, type, out_trade_no, 0, payload, now, err, errcap);
}
