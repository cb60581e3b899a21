/*
 * alerts.c — the alerts workflow (issue 13 item 9, docs/operations.md's
 * runbook): an alert is open until an operator acknowledges it (someone is
 * on it) and resolves it (with why). Every move is written on the alert
 * and appended to alert_action in one transaction; the alert's facts
 * (reason, amount, detail) are never edited, and no money moves here —
 * what to do about the money is the runbook's, through the engine.
 */
#include "service.h"

#include <stdio.h>
#include <string.h>

#define ACTOR_MAX 64
#define NOTE_MAX 500

bool po_alert_state_valid(const char *state)
{
    return state && (strcmp(state, "open") == 0 || strcmp(state, "acknowledged") == 0 ||
                     strcmp(state, "resolved") == 0);
}

static bool text_ok(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max || !po_utf8_valid(s, n))
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

po_err po_alert_act(struct po_store *s, const char *tenant, const char *alert_id,
                    enum po_alert_action action, const char *actor, const char *note, bool *changed,
                    char *err, size_t errcap)
{
    *changed = false;
    if (!actor || !text_ok(actor, ACTOR_MAX)) {
        po_errf(err, errcap, "who: 1-%d printable characters", ACTOR_MAX);
        return PO_ERR_INVALID;
    }
    if (note && *note && !text_ok(note, NOTE_MAX)) {
        po_errf(err, errcap, "note: at most %d bytes of text on one line", NOTE_MAX);
        return PO_ERR_INVALID;
    }
    if (action == PO_ALERT_RESOLVE && (!note || !*note)) {
        po_errf(err, errcap, "resolving an alert needs a note saying why (what was done)");
        return PO_ERR_INVALID;
    }
    const char *to = action == PO_ALERT_ACK ? "acknowledged" : "resolved";
    const char *verb = action == PO_ALERT_ACK ? "acknowledge" : "resolve";
    char now[PO_TIME_MAX];
    po_clock_now_iso(now, sizeof now);
    po_err rc = po_store_begin(s, err, errcap);
    if (rc)
        return rc;
    /* The guarded move: from open (or, to resolve, acknowledged). */
    int64_t moved = 0;
    rc = po_store_exec(s,
                       action == PO_ALERT_ACK
                           ? "UPDATE alert SET state = 'acknowledged', state_by = ?,"
                             " state_note = ?, state_at = ? WHERE tenant_id = ? AND"
                             " alert_key = ? AND state = 'open'"
                           : "UPDATE alert SET state = 'resolved', state_by = ?, state_note = ?,"
                             " state_at = ? WHERE tenant_id = ? AND alert_key = ? AND state IN"
                             " ('open', 'acknowledged')",
                       PO_PARAMS(PO_TEXT(actor), PO_TEXT(note && *note ? note : NULL), PO_TEXT(now),
                                 PO_TEXT(tenant), PO_TEXT(alert_id)),
                       NULL, &moved, err, errcap);
    if (!rc && moved == 1)
        rc = po_store_exec(s,
                           "INSERT INTO alert_action (tenant_id, alert_key, seq, action, actor,"
                           " note, at) SELECT ?, ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ? FROM"
                           " alert_action WHERE tenant_id = ? AND alert_key = ?",
                           PO_PARAMS(PO_TEXT(tenant), PO_TEXT(alert_id), PO_TEXT(verb),
                                     PO_TEXT(actor), PO_TEXT(note && *note ? note : NULL),
                                     PO_TEXT(now), PO_TEXT(tenant), PO_TEXT(alert_id)),
                           NULL, NULL, err, errcap);
    if (!rc && moved == 0) { /* why not: no such alert, or its state */
        struct po_rows r;
        rc = po_store_exec(s,
                           "SELECT state, COALESCE(state_by, ''), COALESCE(state_at, '') FROM"
                           " alert WHERE tenant_id = ? AND alert_key = ?",
                           PO_PARAMS(PO_TEXT(tenant), PO_TEXT(alert_id)), &r, NULL, err, errcap);
        if (!rc) {
            if (r.nrows == 0) {
                po_errf(err, errcap, "no alert %.200s in tenant %s", alert_id, tenant);
                rc = PO_ERR_NOT_FOUND;
            } else if (action == PO_ALERT_ACK &&
                       strcmp(po_rows_get(&r, 0, 0), "acknowledged") == 0) {
                rc = PO_OK; /* acknowledged already: nothing to do */
            } else {
                po_errf(err, errcap, "the alert is %s already (by %s at %s); cannot %s it",
                        po_rows_get(&r, 0, 0), po_rows_get(&r, 0, 1), po_rows_get(&r, 0, 2), verb);
                rc = PO_ERR_CONFLICT;
            }
            po_rows_free(&r);
        }
    }
    if (rc) {
        po_store_rollback(s);
        return rc;
    }
    rc = po_store_commit(s, err, errcap);
    if (!rc && moved == 1) {
        *changed = true;
        po_log(PO_LOG_INFO, "tenant %s: alert %s %s by %s", tenant, alert_id, to, actor);
    }
    return rc;
}
