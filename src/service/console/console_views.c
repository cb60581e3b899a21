/*
 * console_views.c — the reads of the operator's console (views.h): find an
 * order, its whole trail on one page, every ledger account and the journal
 * behind a balance. Each is a handful of queries through po_view_rows; the
 * console is not on the callback path, so none of them adds an index the
 * callback path would have to write (an account's journal scans the
 * tenant's postings; docs/operations.md says so).
 */
#include "../alerts/alerts.h"
#include "views.h"

#include <stdio.h>
#include <string.h>

#define NF(f) ((int)(sizeof(f) / sizeof((f)[0])))
#define FIND_MAX 20
#define TRAIL_ROWS_MAX 200

po_err po_view_find_orders(struct po_store *s, const char *tenant, const char *q, json_t **out)
{
    static const char *const f[] = {"tenant",  "out_trade_no", "channel", "channel_txn_id",
                                    "#amount", "currency",     "status",  "created_at"};
    const char *t = tenant ? tenant : "";
    return po_view_rows(s,
                        "SELECT tenant_id, out_trade_no, channel, channel_txn_id, amount, currency,"
                        " status, created_at FROM pay_order WHERE (? = '' OR tenant_id = ?) AND"
                        " (out_trade_no = ? OR channel_txn_id = ?) ORDER BY tenant_id,"
                        " out_trade_no LIMIT " PO_STR(FIND_MAX),
                        PO_PARAMS(PO_TEXT(t), PO_TEXT(t), PO_TEXT(q), PO_TEXT(q)), f, NF(f), out);
}

/* Sets member `name` of trail to the rows of sql over (tenant, order). */
static po_err part(struct po_store *s, json_t *trail, const char *name, const char *sql,
                   const char *tenant, const char *order, const char *const *f, int nf)
{
    json_t *rows = NULL;
    po_err rc = po_view_rows(s, sql, PO_PARAMS(PO_TEXT(tenant), PO_TEXT(order)), f, nf, &rows);
    if (!rc)
        json_object_set_new(trail, name, rows);
    return rc;
}

/* Each journal's postings under it. */
static po_err postings_under(struct po_store *s, const char *tenant, json_t *journals)
{
    static const char *const f[] = {"#line", "account", "#amount", "currency"};
    size_t i;
    json_t *j;
    json_array_foreach(journals, i, j)
    {
        json_t *lines = NULL;
        po_err rc = po_view_rows(
            s,
            "SELECT line_no, account, amount, currency FROM posting WHERE tenant_id = ? AND"
            " idem_key = ? ORDER BY line_no",
            PO_PARAMS(PO_TEXT(tenant), PO_TEXT(json_string_value(json_object_get(j, "key")))), f,
            NF(f), &lines);
        if (rc)
            return rc;
        json_object_set_new(j, "postings", lines);
    }
    return PO_OK;
}

/* Each tenant event's deliveries, each with its attempts. */
static po_err deliveries_under(struct po_store *s, const char *tenant, json_t *events)
{
    static const char *const fd[] = {"endpoint_id",  "state",      "#attempts",
                                     "#last_status", "last_error", "updated_at"};
    static const char *const fa[] = {"#attempt", "at", "#status_code", "#latency_ms", "error"};
    size_t i, k;
    json_t *e, *d;
    json_array_foreach(events, i, e)
    {
        const char *id = json_string_value(json_object_get(e, "event_id"));
        json_t *dels = NULL;
        po_err rc = po_view_rows(s,
                                 "SELECT endpoint_id, state, attempts, last_status, last_error,"
                                 " updated_at FROM webhook_delivery WHERE tenant_id = ? AND"
                                 " event_id = ? ORDER BY endpoint_id",
                                 PO_PARAMS(PO_TEXT(tenant), PO_TEXT(id)), fd, NF(fd), &dels);
        if (rc)
            return rc;
        json_object_set_new(e, "deliveries", dels);
        json_array_foreach(dels, k, d)
        {
            json_t *att = NULL;
            rc = po_view_rows(
                s,
                "SELECT attempt, at, status_code, latency_ms, error FROM webhook_attempt WHERE"
                " tenant_id = ? AND event_id = ? AND endpoint_id = ? ORDER BY attempt LIMIT 50",
                PO_PARAMS(PO_TEXT(tenant), PO_TEXT(id),
                          PO_TEXT(json_string_value(json_object_get(d, "endpoint_id")))),
                fa, NF(fa), &att);
            if (rc)
                return rc;
            json_object_set_new(d, "attempts", att);
        }
    }
    return PO_OK;
}

po_err po_view_order_trail(struct po_store *s, const char *tenant, const char *out_trade_no,
                           json_t **out)
{
    static const char *const fp[] = {"key",    "channel", "event_type", "source",       "outcome",
                                     "reason", "#amount", "currency",   "first_seen_at"};
    static const char *const fj[] = {"key", "kind", "out_refund_no", "currency", "created_at"};
    static const char *const fd[] = {"at",      "channel",    "request_id",   "node",
                                     "outcome", "#layer",     "reason",       "#status",
                                     "#micros", "event_type", "out_refund_no"};
    static const char *const fr[] = {"out_refund_no", "#amount",    "currency",  "status",
                                     "submit_state",  "created_at", "updated_at"};
    static const char *const fa[] = {"key",        "reason", "#amount",  "currency",  "detail",
                                     "created_at", "state",  "state_by", "state_note"};
    static const char *const fe[] = {"event_id", "type", "#seq", "created_at"};
    json_t *order = NULL;
    *out = NULL;
    po_err rc = po_view_order(s, tenant, out_trade_no, &order);
    if (rc || !order)
        return rc;
    json_t *t = json_pack("{s:s, s:o}", "tenant", tenant, "order", order);
    /* processed records (the keys taken: applied or suspense; a rejected
     * callback never takes one and is among the alerts) */
    rc = part(
        s, t, "processed",
        "SELECT n.idem_key, n.channel, n.event_type, n.source, n.outcome, n.reason,"
        " n.amount, n.currency, n.first_seen_at FROM notify_log n WHERE n.tenant_id = ? AND"
        " n.out_trade_no = ? ORDER BY n.first_seen_at, n.idem_key LIMIT " PO_STR(TRAIL_ROWS_MAX),
        tenant, out_trade_no, fp, NF(fp));
    if (!rc)
        rc = part(s, t, "deliveries",
                  "SELECT at, channel, request_id, node, outcome, layer, reason, status, micros,"
                  " event_type, out_refund_no FROM callback_delivery WHERE tenant_id = ? AND"
                  " out_trade_no = ? ORDER BY at,"
                  " request_id LIMIT " PO_STR(TRAIL_ROWS_MAX),
                  tenant, out_trade_no, fd, NF(fd));
    if (!rc)
        rc = part(s, t, "journals",
                  "SELECT idem_key, kind, out_refund_no, currency, created_at FROM journal WHERE"
                  " tenant_id = ? AND out_trade_no = ? ORDER BY created_at, idem_key LIMIT " PO_STR(
                      TRAIL_ROWS_MAX),
                  tenant, out_trade_no, fj, NF(fj));
    if (!rc)
        rc = postings_under(s, tenant, json_object_get(t, "journals"));
    if (!rc)
        rc = part(s, t, "refunds",
                  "SELECT out_refund_no, amount, currency, status, submit_state, created_at,"
                  " updated_at FROM refund WHERE tenant_id = ? AND out_trade_no = ? ORDER BY"
                  " created_at, out_refund_no LIMIT " PO_STR(TRAIL_ROWS_MAX),
                  tenant, out_trade_no, fr, NF(fr));
    if (!rc)
        rc = part(s, t, "alerts",
                  "SELECT alert_key, reason, amount, currency, detail, created_at, state,"
                  " state_by, state_note FROM alert WHERE tenant_id = ? AND out_trade_no = ?"
                  " ORDER BY created_at, alert_key LIMIT " PO_STR(TRAIL_ROWS_MAX),
                  tenant, out_trade_no, fa, NF(fa));
    if (!rc) { /* the alerts' short ids, as every action takes them */
        size_t i;
        json_t *a;
        json_array_foreach(json_object_get(t, "alerts"), i, a)
        {
            char id[PO_ALERT_SHORT_SIZE];
            po_alert_short_id(json_string_value(json_object_get(a, "key")), id);
            json_object_set_new(a, "id", json_string(id));
        }
    }
    if (!rc)
        rc = part(s, t, "events",
                  "SELECT event_id, type, obj_seq, created_at FROM outbox_event WHERE tenant_id ="
                  " ? AND object_id = ? ORDER BY obj_seq, event_id LIMIT " PO_STR(TRAIL_ROWS_MAX),
                  tenant, out_trade_no, fe, NF(fe));
    if (!rc)
        rc = deliveries_under(s, tenant, json_object_get(t, "events"));
    if (rc)
        json_decref(t);
    else
        *out = t;
    return rc;
}

po_err po_view_accounts(struct po_store *s, const char *tenant, json_t **out)
{
    static const char *const f[] = {"tenant", "account", "currency", "#balance", "updated_at"};
    const char *t = tenant ? tenant : "";
    po_err rc = po_view_rows(s,
                             "SELECT tenant_id, account, currency, balance, updated_at FROM"
                             " account_balance WHERE (? = '' OR tenant_id = ?) ORDER BY tenant_id,"
                             " account, currency LIMIT 2000",
                             PO_PARAMS(PO_TEXT(t), PO_TEXT(t)), f, NF(f), out);
    size_t i;
    json_t *a;
    json_array_foreach(rc ? NULL : *out, i, a)
    {
        const char *name = json_string_value(json_object_get(a, "account"));
        const char *colon = name ? strchr(name, ':') : NULL;
        json_object_set_new(a, "kind",
                            colon ? json_stringn(name, (size_t)(colon - name)) : json_string(name));
    }
    return rc;
}

po_err po_view_account_journal(struct po_store *s, const char *tenant, const char *account,
                               const char *currency, int limit, json_t **out)
{
    static const char *const fp[] = {"key",          "#line",         "#amount",   "kind",
                                     "out_trade_no", "out_refund_no", "created_at"};
    static const char *const fs[] = {"#postings", "#sum", "#balance"};
    json_t *lines = NULL, *sum = NULL;
    if (limit < 1 || limit > 1000)
        return PO_ERR_INVALID;
    po_err rc = po_view_rows(
        s,
        "SELECT p.idem_key, p.line_no, p.amount, j.kind, j.out_trade_no, j.out_refund_no,"
        " j.created_at FROM posting p JOIN journal j ON j.tenant_id = p.tenant_id AND j.idem_key ="
        " p.idem_key WHERE p.tenant_id = ? AND p.account = ? AND p.currency = ? ORDER BY"
        " j.created_at DESC, p.idem_key DESC, p.line_no LIMIT ?",
        PO_PARAMS(PO_TEXT(tenant), PO_TEXT(account), PO_TEXT(currency), PO_I64(limit)), fp, NF(fp),
        &lines);
    if (!rc)
        rc = po_view_rows(s,
                          "SELECT COUNT(*), COALESCE(SUM(amount), 0), (SELECT balance FROM"
                          " account_balance WHERE tenant_id = ? AND account = ? AND currency = ?)"
                          " FROM posting WHERE tenant_id = ? AND account = ? AND currency = ?",
                          PO_PARAMS(PO_TEXT(tenant), PO_TEXT(account), PO_TEXT(currency),
                                    PO_TEXT(tenant), PO_TEXT(account), PO_TEXT(currency)),
                          fs, NF(fs), &sum);
    if (rc) {
        json_decref(lines);
        return rc;
    }
    *out = json_pack("{s:s, s:s, s:s, s:O, s:o}", "tenant", tenant, "account", account, "currency",
                     currency, "totals", json_array_get(sum, 0), "postings", lines);
    json_decref(sum);
    return *out ? PO_OK : PO_ERR_NOMEM;
}

po_err po_view_alerts_console(struct po_store *s, const char *tenant, const char *state,
                              json_t **out)
{
    static const char *const f[] = {"tenant",  "key",      "reason",     "out_trade_no",
                                    "#amount", "currency", "detail",     "created_at",
                                    "state",   "state_by", "state_note", "state_at"};
    const char *t = tenant ? tenant : "", *st = state ? state : "";
    po_err rc =
        po_view_rows(s,
                     "SELECT tenant_id, alert_key, reason, out_trade_no, amount, currency,"
                     " detail, created_at, state, state_by, state_note, state_at FROM alert"
                     " WHERE (? = '' OR tenant_id = ?) AND (? = '' AND state <> 'resolved'"
                     " OR state = ?) ORDER BY created_at DESC, alert_key LIMIT 200",
                     PO_PARAMS(PO_TEXT(t), PO_TEXT(t), PO_TEXT(st), PO_TEXT(st)), f, NF(f), out);
    size_t i;
    json_t *a;
    json_array_foreach(rc ? NULL : *out, i, a)
    {
        char id[PO_ALERT_SHORT_SIZE];
        po_alert_short_id(json_string_value(json_object_get(a, "key")), id);
        json_object_set_new(a, "id", json_string(id));
    }
    return rc;
}
