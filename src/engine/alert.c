/*
 * alert.c — raising alerts, their audit trail, settling them (see alert.h).
 */
#include "alert.h"
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- raising ---- */

/* alert.raised for an alert just inserted. */
static po_err raised_event(struct po_store *s, const struct po_alert_new *a, const char *now,
                           char *err, size_t errcap)
{
    struct po_outbox_json *j = malloc(sizeof *j);
    if (!j)
        return PO_ERR_NOMEM;
    po_outbox_json_init(j);
    po_outbox_json_str(j, "object", "alert");
    po_outbox_json_str(j, "alert_key", a->key);
    po_outbox_json_str(j, "reason", a->reason);
    po_outbox_json_str(j, "event_type", a->event_type);
    po_outbox_json_str(j, "source", a->source);
    po_outbox_json_str(j, "out_trade_no", a->out_trade_no);
    po_outbox_json_i64(j, "amount", a->amount);
    po_outbox_json_str(j, "currency", a->currency);
    po_outbox_json_str(j, "detail", a->detail);
    po_err rc = po_outbox_put(s, a->tenant, a->key, "alert.raised", a->out_trade_no,
                              po_outbox_json_end(j), now, err, errcap);
    free(j);
    return rc;
}

po_err po_alert_raise(struct po_store *s, const struct po_alert_new *a, const char *now,
                      bool *out_raised, char *err, size_t errcap)
{
    int64_t added = 0;
    po_err rc = po_store_exec(
        s,
        "INSERT INTO alert (tenant_id, alert_key, reason, idem_key, event_type, source,"
        " out_trade_no, amount, currency, detail, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?,"
        " ?, ?) ON CONFLICT (tenant_id, alert_key) DO NOTHING",
        PO_PARAMS(PO_TEXT(a->tenant), PO_TEXT(a->key), PO_TEXT(a->reason), PO_TEXT(a->idem_key),
                  PO_TEXT(a->event_type), PO_TEXT(a->source), PO_TEXT(a->out_trade_no),
                  PO_I64(a->amount), PO_TEXT(a->currency), PO_TEXT(a->detail), PO_TEXT(now)),
        NULL, &added, err, errcap);
    if (!rc && added > 0)
        rc = raised_event(s, a, now, err, errcap);
    if (!rc && added > 0) {
        if (a->log_context)
            po_log(PO_LOG_WARN, "%s: alert %s: %s", a->log_context, a->reason, a->detail);
        else
            po_log(PO_LOG_WARN, "tenant %s: alert %s: %s", a->tenant, a->reason, a->detail);
    }
    if (!rc && out_raised)
        *out_raised = added > 0;
    return rc;
}

/* In one transaction: unless unless_sql (may be NULL) finds a row, the
 * alert raised and then_sql (may be NULL) run. */
static po_err raise_tx(struct po_store *s, const struct po_alert_new *a, const char *now,
                       const char *unless_sql, const struct po_param *up, int nup,
                       const char *then_sql, const struct po_param *tp, int ntp, bool *raised,
                       char *err, size_t errcap)
{
    bool skip = false;
    po_err rc = po_store_begin(s, err, errcap);
    if (!rc && unless_sql) {
        struct po_rows r;
        rc = po_store_exec(s, unless_sql, up, nup, &r, NULL, err, errcap);
        if (!rc) {
            skip = r.nrows > 0;
            po_rows_free(&r);
        }
    }
    if (!rc && !skip)
        rc = po_alert_raise(s, a, now, raised, err, errcap);
    if (!rc && !skip && then_sql)
        rc = po_store_exec(s, then_sql, tp, ntp, NULL, NULL, err, errcap);
    if (!rc)
        rc = po_store_commit(s, err, errcap);
    else
        po_store_rollback(s);
    return rc;
}

po_err po_alert_raise_tx(struct po_store *s, const struct po_alert_new *a, const char *now,
                         const char *sql, const struct po_param *params, int nparams, char *err,
                         size_t errcap)
{
    return raise_tx(s, a, now, NULL, NULL, 0, sql, params, nparams, NULL, err, errcap);
}

po_err po_alert_raise_unless(struct po_store *s, const struct po_alert_new *a, const char *now,
                             const char *sql, const struct po_param *params, int nparams,
                             bool *out_raised, char *err, size_t errcap)
{
    if (out_raised)
        *out_raised = false;
    return raise_tx(s, a, now, sql, params, nparams, NULL, NULL, 0, out_raised, err, errcap);
}

/* ---- the alerts' audit trail ---- */

po_err po_alert_audit(struct po_store *s, const char *tenant, const char *alert_id,
                      const char *action, const char *actor, const char *note, const char *now,
                      char *err, size_t errcap)
{
    /* The alert's row locked first: two moves at once (three operators
     * accepting one alert) would both read the same MAX(seq) and the second
     * insert fail on the key. Waiting for the lock, the second reads the
     * first's row (READ COMMITTED: a new snapshot a statement; SQLite has
     * one writer). */
    po_err rc =
        po_store_exec(s, "UPDATE alert SET state = state WHERE tenant_id = ? AND alert_key = ?",
                      PO_PARAMS(PO_TEXT(tenant), PO_TEXT(alert_id)), NULL, NULL, err, errcap);
    if (rc)
        return rc;
    return po_store_exec(s,
                         "INSERT INTO alert_action (tenant_id, alert_key, seq, action, actor,"
                         " note, at) SELECT ?, ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ? FROM"
                         " alert_action WHERE tenant_id = ? AND alert_key = ?",
                         PO_PARAMS(PO_TEXT(tenant), PO_TEXT(alert_id), PO_TEXT(action),
                                   PO_TEXT(actor), PO_TEXT(note && *note ? note : NULL),
                                   PO_TEXT(now), PO_TEXT(tenant), PO_TEXT(alert_id)),
                         NULL, NULL, err, errcap);
}

/* paid_after_close, duplicate_payment: parked by the engine on the way in;
 * the mismatches: refused, parked when an operator refunds them. */
static const char *const REFUNDABLE[] = {"paid_after_close", "duplicate_payment", "amount_mismatch",
                                         "currency_mismatch", "channel_mismatch"};

bool po_alert_reason_refundable(const char *reason)
{
    for (int i = 0; i < PO_NELEM(REFUNDABLE); i++)
        if (strcmp(reason, REFUNDABLE[i]) == 0)
            return true;
    return false;
}

po_err po_alert_settle_refunded(struct po_store *s, const char *tenant, const char *suspense_key,
                                const char *note, const char *now, char *err, size_t errcap)
{
    po_err rc = PO_OK;
    for (int i = 0; i < PO_NELEM(REFUNDABLE) && !rc; i++) {
        char akey[PO_KEY_SIZE + PO_REASON_SIZE + 2];
        int64_t there = 0;
        if (po_fmt(akey, sizeof akey, "%s|%s", suspense_key, REFUNDABLE[i]))
            return PO_ERR_INVALID;
        rc = po_store_exec(s,
                           "UPDATE alert SET state = 'resolved', state_by = 'payonce',"
                           " state_note = ?, state_at = ? WHERE tenant_id = ? AND alert_key = ?"
                           " AND state <> 'resolved'",
                           PO_PARAMS(PO_TEXT(note), PO_TEXT(now), PO_TEXT(tenant), PO_TEXT(akey)),
                           NULL, NULL, err, errcap);
        struct po_rows r;
        if (!rc)
            rc = po_store_exec(s, "SELECT 1 FROM alert WHERE tenant_id = ? AND alert_key = ?",
                               PO_PARAMS(PO_TEXT(tenant), PO_TEXT(akey)), &r, NULL, err, errcap);
        if (!rc) {
            there = r.nrows;
            po_rows_free(&r);
        }
        if (!rc && there > 0)
            rc = po_alert_audit(s, tenant, akey, "refunded", "payonce", note, now, err, errcap);
    }
    return rc;
}
