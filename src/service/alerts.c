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

/* One move of the audit trail (inside the caller's transaction). */
static po_err audit(struct po_store *s, const char *tenant, const char *alert_id,
                    const char *action, const char *actor, const char *note, const char *now,
                    char *err, size_t errcap)
{
    return po_store_exec(s,
                         "INSERT INTO alert_action (tenant_id, alert_key, seq, action, actor,"
                         " note, at) SELECT ?, ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ? FROM"
                         " alert_action WHERE tenant_id = ? AND alert_key = ?",
                         PO_PARAMS(PO_TEXT(tenant), PO_TEXT(alert_id), PO_TEXT(action),
                                   PO_TEXT(actor), PO_TEXT(note && *note ? note : NULL),
                                   PO_TEXT(now), PO_TEXT(tenant), PO_TEXT(alert_id)),
                         NULL, NULL, err, errcap);
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
        rc = audit(s, tenant, alert_id, verb, actor, note, now, err, errcap);
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

/* ---- replay: the alert's payment through the engine, with its own key ---- */

/* The reasons whose alert holds every field the engine checked, so the
 * event rebuilt from it is the one that was refused (a merchant_mismatch
 * alert does not keep the merchant the channel named: not replayable). */
static bool replayable(const char *reason)
{
    static const char *const ok[] = {"unknown_order", "amount_mismatch", "currency_mismatch",
                                     "channel_mismatch"};
    for (int i = 0; i < PO_NELEM(ok); i++)
        if (strcmp(reason, ok[i]) == 0)
            return true;
    return false;
}

/* The payment event of a PAY_SUCCESS alert: channel and transaction id
 * from its key (<channel>:<txn>:PAY_SUCCESS), the rest from the alert. */
static po_err event_of(const struct po_rows *r, const char *tenant, struct po_event *ev)
{
    const char *key = po_rows_get(r, 0, 1), *first = strchr(key, ':'), *last = strrchr(key, ':');
    int64_t amount = 0;
    memset(ev, 0, sizeof *ev);
    if (!first || last == first || strcmp(last + 1, "PAY_SUCCESS") != 0 ||
        (size_t)(first - key) >= sizeof ev->channel ||
        (size_t)(last - first - 1) >= sizeof ev->channel_txn_id || po_rows_i64(r, 0, 4, &amount) ||
        po_strcpy(ev->out_trade_no, sizeof ev->out_trade_no, po_rows_get(r, 0, 3)) ||
        po_strcpy(ev->currency, sizeof ev->currency, po_rows_get(r, 0, 5)) ||
        po_strcpy(ev->tenant, sizeof ev->tenant, tenant))
        return PO_ERR_INVALID;
    memcpy(ev->channel, key, (size_t)(first - key));
    memcpy(ev->channel_txn_id, first + 1, (size_t)(last - first - 1));
    ev->type = PO_EV_PAY_SUCCESS;
    ev->amount_minor = amount;
    ev->source = PO_SRC_RECONCILIATION; /* a replay, as reconciliation's */
    po_clock_now_iso(ev->occurred_at, sizeof ev->occurred_at);
    return PO_OK;
}

po_err po_alert_replay(struct po_store *s, const char *tenant, const char *alert_id,
                       const char *actor, const char *note, struct po_outcome *out, bool *resolved,
                       char *err, size_t errcap)
{
    *resolved = false;
    memset(out, 0, sizeof *out);
    if (!actor || !text_ok(actor, ACTOR_MAX) || !note || !text_ok(note, NOTE_MAX)) {
        po_errf(err, errcap, "a replay needs who (1-%d characters) and a note (one line)",
                ACTOR_MAX);
        return PO_ERR_INVALID;
    }
    struct po_rows r;
    po_err rc = po_store_exec(s,
                              "SELECT reason, idem_key, event_type, out_trade_no, amount,"
                              " currency, state FROM alert WHERE tenant_id = ? AND alert_key = ?",
                              PO_PARAMS(PO_TEXT(tenant), PO_TEXT(alert_id)), &r, NULL, err, errcap);
    if (rc)
        return rc;
    struct po_event ev;
    if (r.nrows == 0) {
        po_errf(err, errcap, "no alert %.200s in tenant %s", alert_id, tenant);
        rc = PO_ERR_NOT_FOUND;
    } else if (strcmp(po_rows_get(&r, 0, 6), "resolved") == 0) {
        po_errf(err, errcap, "the alert is resolved already");
        rc = PO_ERR_CONFLICT;
    } else if (strcmp(po_rows_get(&r, 0, 2), "PAY_SUCCESS") != 0 ||
               !replayable(po_rows_get(&r, 0, 0))) {
        po_errf(err, errcap,
                "a %s alert cannot be replayed (only payments refused as unknown_order,"
                " amount_mismatch, currency_mismatch or channel_mismatch; docs/operations.md)",
                po_rows_get(&r, 0, 0));
        rc = PO_ERR_INVALID;
    } else if (event_of(&r, tenant, &ev)) {
        po_errf(err, errcap, "the alert's payment cannot be rebuilt from it");
        rc = PO_ERR_INVALID;
    }
    po_rows_free(&r);
    if (rc)
        return rc;
    /* The engine's own entry, with the payment's own key: applied once at
     * most, whoever replays it and however often. */
    rc = po_engine_apply(s, NULL, &ev, out);
    if (rc || out->kind == PO_OUT_RETRY) {
        po_errf(err, errcap, "the engine answered retry (%s); nothing changed, try again",
                po_reason_name(out->reason));
        return rc ? rc : PO_ERR_TRANSIENT;
    }
    char said[NOTE_MAX + 96], now[PO_TIME_MAX];
    (void)snprintf(said, sizeof said, "replayed: %s%s%s; %s", po_outcome_name(out->kind),
                   out->reason != PO_R_NONE ? " " : "",
                   out->reason != PO_R_NONE ? po_reason_name(out->reason) : "", note);
    po_clock_now_iso(now, sizeof now);
    rc = po_store_begin(s, err, errcap);
    if (!rc)
        rc = audit(s, tenant, alert_id, "replay", actor, said, now, err, errcap);
    if (!rc)
        rc = po_store_commit(s, err, errcap);
    else
        po_store_rollback(s);
    if (rc)
        return rc;
    /* Credited (now, or by an earlier replay): the alert is resolved. */
    if (out->kind == PO_OUT_APPLIED || out->kind == PO_OUT_DUPLICATE) {
        bool changed = false;
        said[NOTE_MAX] = '\0';
        rc =
            po_alert_act(s, tenant, alert_id, PO_ALERT_RESOLVE, actor, said, &changed, err, errcap);
        *resolved = rc == PO_OK;
    }
    return rc;
}
