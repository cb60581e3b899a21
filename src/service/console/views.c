/*
 * views.c — the reads an operator (CLI) and a tenant (/v1) share, each
 * written once, returning JSON with integer minor units and null for what
 * is absent. A field list maps columns to members: "name" is text, "#name"
 * an integer.
 */
#include "../accounts/account.h"
#include "../alerts/alerts.h"
#include "../payments/order_pay.h"
#include "views.h"
#include "../webhooks/webhook.h"

#include <stdio.h>
#include <string.h>

static json_t *cell_str(const struct po_rows *r, int row, int col)
{
    const char *v = po_rows_get(r, row, col);
    return v ? json_string(v) : json_null();
}

static json_t *cell_int(const struct po_rows *r, int row, int col)
{
    int64_t v = 0;
    return po_rows_i64(r, row, col, &v) == PO_OK ? json_integer((json_int_t)v) : json_null();
}

/* One object from a row, by a field list (see above). */
static json_t *row_object(const struct po_rows *r, int row, const char *object,
                          const char *const *fields, int n)
{
    json_t *o = json_object();
    if (object)
        json_object_set_new(o, "object", json_string(object));
    for (int i = 0; i < n; i++) {
        bool num = fields[i][0] == '#';
        json_object_set_new(o, fields[i] + num, num ? cell_int(r, row, i) : cell_str(r, row, i));
    }
    return o;
}

#define NFIELDS(f) ((int)(sizeof(f) / sizeof((f)[0])))

json_t *po_view_row(const struct po_rows *r, int row, const char *const *fields, int n)
{
    return row_object(r, row, NULL, fields, n);
}

static void page_mark(struct po_page *pg, const char *ts, const char *key);

/* One page of objects from a keyset query that asked for limit + 1 rows
 * (the extra one says there are more); the page ends at the last row
 * shown, its (created_at, key) in columns ts_col and key_col. Frees r. */
static json_t *page_of(struct po_rows *r, struct po_page *pg, const char *object,
                       const char *const *fields, int n, int ts_col, int key_col)
{
    json_t *data = json_array();
    int shown = r->nrows > pg->limit ? (int)pg->limit : r->nrows;
    for (int i = 0; i < shown; i++)
        json_array_append_new(data, row_object(r, i, object, fields, n));
    pg->more = r->nrows > pg->limit;
    if (pg->more)
        page_mark(pg, po_rows_get(r, shown - 1, ts_col), po_rows_get(r, shown - 1, key_col));
    po_rows_free(r);
    return data;
}

/* One object of the tenant by its key; *out NULL when absent. */
static po_err one(struct po_store *s, const char *sql, const char *tenant, const char *key,
                  const char *object, const char *const *fields, int n, json_t **out)
{
    struct po_rows r;
    po_err rc = po_store_exec(s, sql, PO_PARAMS(PO_TEXT(tenant), PO_TEXT(key)), &r, NULL, NULL, 0);
    if (rc)
        return rc;
    *out = r.nrows == 1 ? row_object(&r, 0, object, fields, n) : NULL;
    po_rows_free(&r);
    return PO_OK;
}

/* The order object's members, in the columns' order of ORDER_COLUMNS. */
static const char *const ORDER_FIELDS[] = {
    "out_trade_no", "merchant",       "channel",     "#amount",          "currency",
    "status",       "channel_txn_id", "paid_at",     "#refund_reserved", "#refunded_amount",
    "created_at",   "updated_at",     "time_expire", "pay_method",       "channel_order_id"};
#define ORDER_COLUMNS                                                                              \
    "out_trade_no, merchant_id, channel, amount, currency, status, channel_txn_id, paid_at,"       \
    " refund_reserved, refunded_amount, created_at, updated_at, expires_at, pay_method,"           \
    " channel_order_id"

po_err po_view_order(struct po_store *s, const char *tenant, const char *out_trade_no, json_t **out)
{
    po_err rc =
        one(s, "SELECT " ORDER_COLUMNS " FROM pay_order WHERE tenant_id = ? AND out_trade_no = ?",
            tenant, out_trade_no, "order", ORDER_FIELDS, NFIELDS(ORDER_FIELDS), out);
    /* the payment created at the channel: what the buyer's side needs */
    json_t *pay = NULL;
    if (!rc && *out && !(rc = po_order_payment(s, tenant, out_trade_no, &pay)) && pay)
        json_object_set_new(*out, "payment", pay);
    return rc;
}

po_err po_view_refund(struct po_store *s, const char *tenant, const char *out_refund_no,
                      json_t **out)
{
    static const char *const f[] = {
        "out_refund_no",    "out_trade_no",      "channel",      "#amount",    "currency",
        "status",           "channel_refund_id", "created_at",   "updated_at", "submit_state",
        "#submit_attempts", "submit_error",      "suspense_key", "txn_id"};
    json_t *r = NULL;
    po_err rc = one(s,
                    "SELECT out_refund_no, out_trade_no, channel, amount, currency, status,"
                    " channel_refund_id, created_at, updated_at, submit_state, submit_attempts,"
                    " submit_error, suspense_key, txn_id FROM refund WHERE tenant_id = ? AND"
                    " out_refund_no = ?",
                    tenant, out_refund_no, "refund", f, NFIELDS(f), &r);
    if (!rc && r && json_is_null(json_object_get(r, "suspense_key"))) {
        /* an order's refund; a refund of a payment parked in suspense
         * names that payment (its key) and its transaction */
        json_object_del(r, "suspense_key");
        json_object_del(r, "txn_id");
    }
    if (!rc && r) {
        /* The submission to the channel, grouped. */
        json_t *sub = json_pack("{s:O, s:O, s:O}", "state", json_object_get(r, "submit_state"),
                                "attempts", json_object_get(r, "submit_attempts"), "error",
                                json_object_get(r, "submit_error"));
        json_object_del(r, "submit_state");
        json_object_del(r, "submit_attempts");
        json_object_del(r, "submit_error");
        json_object_set_new(r, "submission", sub);
    }
    *out = r;
    return rc;
}

po_err po_view_orders(struct po_store *s, const char *tenant, const struct po_order_filter *f,
                      struct po_page *pg, json_t **out)
{
    const char *ts = pg->after_ts ? pg->after_ts : "", *key = pg->after_key ? pg->after_key : "";
    const char *status = f && f->status ? f->status : "",
               *merchant = f && f->merchant ? f->merchant : "",
               *since = f && f->since ? f->since : "";
    struct po_rows r;
    po_err rc = po_store_exec(
        s,
        "SELECT " ORDER_COLUMNS " FROM pay_order"
        " WHERE tenant_id = ? AND (? = '' OR status = ?) AND (? = '' OR merchant_id = ?) AND"
        " (? = '' OR created_at >= ?) AND (? = '' OR created_at > ? OR (created_at = ? AND"
        " out_trade_no > ?)) ORDER BY created_at, out_trade_no LIMIT ?",
        PO_PARAMS(PO_TEXT(tenant), PO_TEXT(status), PO_TEXT(status), PO_TEXT(merchant),
                  PO_TEXT(merchant), PO_TEXT(since), PO_TEXT(since), PO_TEXT(ts), PO_TEXT(ts),
                  PO_TEXT(ts), PO_TEXT(key), PO_I64(pg->limit + 1)),
        &r, NULL, NULL, 0);
    if (rc)
        return rc;
    *out = page_of(&r, pg, "order", ORDER_FIELDS, NFIELDS(ORDER_FIELDS), 10, 0);
    return PO_OK;
}

po_err po_view_order_channel(struct po_store *s, const char *tenant, const char *out_trade_no,
                             char *channel, size_t cap, bool *found)
{
    struct po_rows r;
    po_err rc = po_store_exec(s,
                              "SELECT COALESCE(channel, '') FROM pay_order WHERE tenant_id = ?"
                              " AND out_trade_no = ?",
                              PO_PARAMS(PO_TEXT(tenant), PO_TEXT(out_trade_no)), &r, NULL, NULL, 0);
    if (rc)
        return rc;
    *found = r.nrows == 1;
    if (*found && po_strcpy(channel, cap, po_rows_get(&r, 0, 0)))
        rc = PO_ERR_STORE;
    po_rows_free(&r);
    return rc;
}

/* Every row of a query as an array of objects. */
static po_err list(struct po_store *s, const char *sql, const char *tenant, const char *object,
                   const char *const *fields, int n, json_t **out)
{
    struct po_rows r;
    po_err rc = po_store_exec(s, sql, PO_PARAMS(PO_TEXT(tenant)), &r, NULL, NULL, 0);
    if (rc)
        return rc;
    json_t *data = json_array();
    for (int i = 0; i < r.nrows; i++)
        json_array_append_new(data, row_object(&r, i, object, fields, n));
    po_rows_free(&r);
    *out = data;
    return PO_OK;
}

/* Every row of a query without parameters, as objects. */
po_err po_view_rows(struct po_store *s, const char *sql, const struct po_param *params, int np,
                    const char *const *fields, int n, json_t **out)
{
    struct po_rows r;
    po_err rc = po_store_exec(s, sql, params, np, &r, NULL, NULL, 0);
    if (rc)
        return rc;
    json_t *data = json_array();
    for (int i = 0; i < r.nrows; i++)
        json_array_append_new(data, row_object(&r, i, NULL, fields, n));
    po_rows_free(&r);
    *out = data;
    return PO_OK;
}

static po_err all_rows(struct po_store *s, const char *sql, const char *const *fields, int n,
                       json_t **out)
{
    return po_view_rows(s, sql, PO_NO_PARAMS, fields, n, out);
}

po_err po_view_dashboard(struct po_store *s, json_t **out)
{
    static const char *const fa[] = {"tenant",  "id",       "reason", "out_trade_no",
                                     "#amount", "currency", "detail", "created_at",
                                     "state",   "state_by"};
    static const char *const fr[] = {"tenant",     "channel", "period_start",
                                     "period_end", "#rows",   "imported_at"};
    static const char *const fb[] = {"tenant", "account", "currency", "#balance"};
    static const char *const fw[] = {"#endpoints", "#pending", "#dead", "oldest_pending"};
    json_t *alerts = NULL, *runs = NULL, *bal = NULL, *hooks = NULL;
    po_err rc = all_rows(s,
                         "SELECT tenant_id, alert_key, reason, out_trade_no, amount, currency,"
                         " detail, created_at, state, state_by FROM alert WHERE state IN ('open',"
                         " 'acknowledged') ORDER BY created_at DESC, alert_key LIMIT 100",
                         fa, NFIELDS(fa), &alerts);
    if (!rc)
        rc = all_rows(s,
                      "SELECT tenant_id, channel, period_start, period_end, rows_total,"
                      " imported_at FROM recon_run ORDER BY imported_at DESC LIMIT 10",
                      fr, NFIELDS(fr), &runs);
    if (!rc)
        rc = all_rows(s,
                      "SELECT tenant_id, account, currency, balance FROM account_balance WHERE"
                      " account LIKE 'merchant_payable:%' ORDER BY tenant_id, account, currency"
                      " LIMIT 200",
                      fb, NFIELDS(fb), &bal);
    if (!rc)
        rc = all_rows(s,
                      "SELECT (SELECT COUNT(*) FROM webhook_endpoint WHERE removed_at IS NULL),"
                      " (SELECT COUNT(*) FROM webhook_delivery WHERE state = 'pending'),"
                      " (SELECT COUNT(*) FROM webhook_delivery WHERE state = 'dead'),"
                      " (SELECT MIN(created_at) FROM webhook_delivery WHERE state = 'pending')",
                      fw, NFIELDS(fw), &hooks);
    if (!rc) {
        *out = json_pack("{s:o, s:o, s:o, s:O}", "alerts", alerts, "recon_runs", runs,
                         "merchant_balances", bal, "webhooks", json_array_get(hooks, 0));
        json_decref(hooks);
        return *out ? PO_OK : PO_ERR_NOMEM;
    }
    json_decref(alerts);
    json_decref(runs);
    json_decref(bal);
    json_decref(hooks);
    return rc;
}

po_err po_view_balances(struct po_store *s, const char *tenant, json_t **out)
{
    static const char *const f[] = {"account", "currency", "#balance", "updated_at"};
    return list(s,
                "SELECT account, currency, balance, updated_at FROM account_balance WHERE"
                " tenant_id = ? ORDER BY account, currency",
                tenant, NULL, f, NFIELDS(f), out);
}

po_err po_view_merchants(struct po_store *s, const char *tenant, json_t **out)
{
    static const char *const f[] = {"merchant", "created_at"};
    return list(s,
                "SELECT merchant_id, created_at FROM merchant WHERE tenant_id = ?"
                " ORDER BY merchant_id",
                tenant, "merchant", f, NFIELDS(f), out);
}

po_err po_view_tenants(struct po_store *s, json_t **out)
{
    static const char *const f[] = {"tenant", "name", "created_at", "#merchants"};
    struct po_rows r;
    po_err rc = po_store_exec(s,
                              "SELECT t.tenant_id, t.name, t.created_at, (SELECT COUNT(*) FROM"
                              " merchant m WHERE m.tenant_id = t.tenant_id) FROM tenant t ORDER BY"
                              " t.tenant_id",
                              NULL, 0, &r, NULL, NULL, 0);
    if (rc)
        return rc;
    json_t *data = json_array();
    for (int i = 0; i < r.nrows; i++) {
        json_t *o = row_object(&r, i, "tenant", f, NFIELDS(f));
        json_object_set_new(o, "channels", json_array()); /* filled below */
        json_array_append_new(data, o);
    }
    po_rows_free(&r);
    /* the channels configured, per tenant */
    rc = po_store_exec(s,
                       "SELECT tenant_id, channel FROM channel_account ORDER BY tenant_id, channel",
                       NULL, 0, &r, NULL, NULL, 0);
    if (rc) {
        json_decref(data);
        return rc;
    }
    for (size_t i = 0; i < json_array_size(data); i++) {
        json_t *o = json_array_get(data, i);
        const char *t = json_string_value(json_object_get(o, "tenant"));
        for (int k = 0; k < r.nrows; k++)
            if (t && strcmp(po_rows_get(&r, k, 0), t) == 0)
                json_array_append_new(json_object_get(o, "channels"),
                                      json_string(po_rows_get(&r, k, 1)));
    }
    po_rows_free(&r);
    *out = data;
    return PO_OK;
}

/* A stored channel document as an operator may see it: secrets and key
 * material replaced by what they are; certificate serials with their
 * expiry (ISO 8601) and whether it has passed. */
static json_t *redacted(json_t *doc, int64_t now)
{
    json_t *out = json_object();
    const char *name;
    json_t *v;
    json_object_foreach(doc, name, v)
    {
        if (po_account_value_sealed(v)) {
            char what[64];
            (void)snprintf(what, sizeof what, json_is_array(v) ? "(%zu sealed)" : "(sealed)",
                           json_array_size(v));
            json_object_set_new(out, name, json_string(what));
        } else if (strcmp(name, "public_key_pem") == 0) {
            char what[64];
            (void)snprintf(what, sizeof what, "(PEM, %zu bytes)",
                           strlen(json_string_value(v) ?: ""));
            json_object_set_new(out, name, json_string(what));
        } else if (strcmp(name, "keys") == 0 && json_is_array(v)) {
            json_t *keys = json_array();
            size_t i;
            json_t *k;
            json_array_foreach(v, i, k)
            {
                json_t *na = json_object_get(k, "not_after");
                json_t *e =
                    json_pack("{s:O}", "serial", json_object_get(k, "serial") ?: json_null());
                if (json_is_integer(na)) {
                    char at[PO_TIME_SIZE];
                    po_clock_iso_at((int64_t)json_integer_value(na), at, sizeof at);
                    json_object_set_new(e, "not_after", json_string(at));
                    json_object_set_new(e, "expired", json_boolean(json_integer_value(na) < now));
                } else {
                    json_object_set_new(e, "not_after", json_null()); /* a bare public key */
                }
                json_array_append_new(keys, e);
            }
            json_object_set_new(out, "platform_keys", keys);
        } else {
            json_object_set(out, name, v);
        }
    }
    return out;
}

po_err po_view_channel(struct po_store *s, const char *tenant, const char *channel, int64_t now,
                       json_t **out)
{
    json_t *doc = NULL;
    char updated[PO_TIME_SIZE] = "";
    *out = NULL;
    po_err rc = po_account_doc(s, tenant, channel, &doc, updated, sizeof updated);
    if (!rc && doc) {
        *out = json_pack("{s:s, s:s, s:s, s:s, s:o}", "object", "channel_account", "tenant", tenant,
                         "channel", channel, "updated_at", updated, "config", redacted(doc, now));
        if (!*out)
            rc = PO_ERR_NOMEM;
    }
    json_decref(doc);
    return rc;
}

po_err po_view_apikeys(struct po_store *s, const char *tenant, json_t **out)
{
    static const char *const f[] = {"key_id", "created_at", "revoked_at"};
    return list(s,
                "SELECT key_id, created_at, revoked_at FROM api_key WHERE tenant_id = ?"
                " ORDER BY created_at, key_id",
                tenant, NULL, f, NFIELDS(f), out);
}

static void page_mark(struct po_page *pg, const char *ts, const char *key)
{
    if (po_strcpy(pg->last_ts, sizeof pg->last_ts, ts ? ts : "") ||
        po_strcpy(pg->last_key, sizeof pg->last_key, key ? key : ""))
        pg->more = false; /* cannot happen: both come from bounded columns */
}

po_err po_view_alerts(struct po_store *s, const char *tenant, const char *state, struct po_page *pg,
                      json_t **out)
{
    static const char *const f[] = {
        "created_at", "reason", "out_trade_no", "#amount", "currency", "source",     "event_type",
        "idem_key",   "detail", "id",           "state",   "state_by", "state_note", "state_at"};
    struct po_rows r;
    const char *ts = pg->after_ts ? pg->after_ts : "", *key = pg->after_key ? pg->after_key : "";
    const char *st = state ? state : "";
    po_err rc =
        po_store_exec(s,
                      "SELECT created_at, reason, out_trade_no, amount, currency, source,"
                      " event_type, idem_key, detail, alert_key, state, state_by,"
                      " state_note, state_at FROM alert WHERE tenant_id = ? AND (? = ''"
                      " OR state = ?) AND (? = '' OR created_at > ? OR (created_at = ?"
                      " AND alert_key > ?)) ORDER BY created_at, alert_key LIMIT ?",
                      PO_PARAMS(PO_TEXT(tenant), PO_TEXT(st), PO_TEXT(st), PO_TEXT(ts), PO_TEXT(ts),
                                PO_TEXT(ts), PO_TEXT(key), PO_I64(pg->limit + 1)),
                      &r, NULL, NULL, 0);
    if (rc)
        return rc;
    *out = page_of(&r, pg, "alert", f, NFIELDS(f), 0, 9);
    size_t i;
    json_t *a;
    json_array_foreach(*out, i, a)
    {
        char sid[PO_ALERT_SHORT_SIZE];
        po_alert_short_id(json_string_value(json_object_get(a, "id")), sid);
        json_object_set_new(a, "short_id", json_string(sid));
    }
    return PO_OK;
}

po_err po_view_journal(struct po_store *s, const char *tenant, const char *order,
                       struct po_page *pg, json_t **out)
{
    static const char *const f[] = {"created_at",   "idem_key",      "kind",
                                    "out_trade_no", "out_refund_no", "currency"};
    const char *ts = pg->after_ts ? pg->after_ts : "", *key = pg->after_key ? pg->after_key : "";
    order = order ? order : "";
    /* One page of journals with their lines, in one statement. */
    struct po_rows r;
    po_err rc =
        po_store_exec(s,
                      "SELECT j.created_at, j.idem_key, j.kind, j.out_trade_no, j.out_refund_no,"
                      " j.currency, p.account, p.amount FROM (SELECT * FROM journal WHERE"
                      " tenant_id = ? AND (? = '' OR out_trade_no = ?) AND (? = '' OR"
                      " created_at > ? OR (created_at = ? AND idem_key > ?)) ORDER BY"
                      " created_at, idem_key LIMIT ?) j JOIN posting p ON p.tenant_id ="
                      " j.tenant_id AND p.idem_key = j.idem_key ORDER BY j.created_at,"
                      " j.idem_key, p.line_no",
                      PO_PARAMS(PO_TEXT(tenant), PO_TEXT(order), PO_TEXT(order), PO_TEXT(ts),
                                PO_TEXT(ts), PO_TEXT(ts), PO_TEXT(key), PO_I64(pg->limit + 1)),
                      &r, NULL, NULL, 0);
    if (rc)
        return rc;
    json_t *data = json_array(), *cur = NULL;
    const char *last_ts = NULL, *last_key = NULL;
    int journals = 0;
    pg->more = false;
    for (int i = 0; i < r.nrows; i++) {
        const char *k = po_rows_get(&r, i, 1);
        if (!cur || strcmp(k, json_string_value(json_object_get(cur, "idem_key"))) != 0) {
            if (journals == pg->limit) {
                pg->more = true;
                break;
            }
            cur = row_object(&r, i, "journal", f, NFIELDS(f));
            json_object_set_new(cur, "postings", json_array());
            json_array_append_new(data, cur);
            journals++;
            last_ts = po_rows_get(&r, i, 0);
            last_key = k;
        }
        json_array_append_new(
            json_object_get(cur, "postings"),
            json_pack("{s:o, s:o}", "account", cell_str(&r, i, 6), "amount", cell_int(&r, i, 7)));
    }
    if (pg->more)
        page_mark(pg, last_ts, last_key);
    po_rows_free(&r);
    *out = data;
    return PO_OK;
}

po_err po_view_events(struct po_store *s, const char *tenant, const char *type,
                      const char *out_trade_no, struct po_page *pg, json_t **out)
{
    const char *ts = pg->after_ts ? pg->after_ts : "", *key = pg->after_key ? pg->after_key : "";
    type = type ? type : "";
    out_trade_no = out_trade_no ? out_trade_no : "";
    struct po_rows r;
    po_err rc = po_store_exec(
        s,
        "SELECT event_id, type, created_at, payload FROM outbox_event WHERE tenant_id = ? AND"
        " (? = '' OR type = ?) AND (? = '' OR object_id = ?) AND (? = '' OR created_at > ? OR"
        " (created_at = ? AND event_id > ?)) ORDER BY created_at, event_id LIMIT ?",
        PO_PARAMS(PO_TEXT(tenant), PO_TEXT(type), PO_TEXT(type), PO_TEXT(out_trade_no),
                  PO_TEXT(out_trade_no), PO_TEXT(ts), PO_TEXT(ts), PO_TEXT(ts), PO_TEXT(key),
                  PO_I64(pg->limit + 1)),
        &r, NULL, NULL, 0);
    if (rc)
        return rc;
    json_t *data = json_array();
    int shown = r.nrows > pg->limit ? (int)pg->limit : r.nrows;
    for (int i = 0; data && i < shown; i++) {
        char *text = NULL;
        json_t *e = NULL;
        rc = po_event_envelope(po_rows_get(&r, i, 0), po_rows_get(&r, i, 1), po_rows_get(&r, i, 2),
                               tenant, po_rows_get(&r, i, 3), &text);
        if (!rc)
            rc = po_json_parse(text, strlen(text), &e, NULL, 0);
        free(text);
        if (rc == PO_ERR_INVALID || rc == PO_ERR_LIMIT)
            rc = PO_ERR_STORE; /* the outbox holds what payonce wrote */
        data = rc ? po_json_append(data, NULL) : po_json_append(data, e);
    }
    pg->more = r.nrows > pg->limit;
    if (data && pg->more)
        page_mark(pg, po_rows_get(&r, shown - 1, 2), po_rows_get(&r, shown - 1, 0));
    po_rows_free(&r);
    if (!data)
        return rc ? rc : PO_ERR_NOMEM;
    *out = data;
    return PO_OK;
}
