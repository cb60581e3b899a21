/*
 * alerts.c — the alerts workflow (issue 13 item 9, docs/operations.md's
 * runbook): an alert is open until an operator acknowledges it (someone is
 * on it) and resolves it (with why). Every move is written on the alert
 * and appended to alert_action in one transaction; the alert's facts
 * (reason, amount, detail) are never edited, and no money moves here —
 * what to do about the money is the runbook's, through the engine.
 */
#include "alerts.h"
#include "../payments/refund_submit.h"
#include "../webhooks/webhook.h"

#include "../../crypto/crypto.h"
#include "../../engine/objects.h"
#include "../../engine/alert.h"

#include <stdio.h>
#include <string.h>

#define ACTOR_MAX 64
#define NOTE_MAX 500

void po_alert_short_id(const char *alert_key, char out[PO_ALERT_SHORT_SIZE])
{
    char hex[65];
    if (po_sha256_hex(alert_key, strlen(alert_key), hex) != PO_OK)
        (void)snprintf(hex, sizeof hex, "%s", "000000000000"); /* cannot happen */
    (void)snprintf(out, PO_ALERT_SHORT_SIZE, "al_%.12s", hex);
}

static bool short_form(const char *id)
{
    if (strlen(id) != PO_ALERT_SHORT_SIZE - 1 || strncmp(id, "al_", 3) != 0)
        return false;
    for (const char *c = id + 3; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
            return false;
    return true;
}

po_err po_alert_key_of(struct po_store *s, const char *tenant, const char *id, char *key,
                       size_t cap, char *err, size_t errcap)
{
    if (!short_form(id)) {
        if (po_strcpy(key, cap, id)) {
            po_errf(err, errcap, "no alert %.200s in tenant %s", id, tenant);
            return PO_ERR_NOT_FOUND;
        }
        return PO_OK;
    }
    /* A tenant's alerts are few (one per key and reason, forever): hashing
     * each key is cheaper than a column every insert would have to fill. */
    struct po_rows r;
    po_err rc = po_store_exec(s, "SELECT alert_key FROM alert WHERE tenant_id = ?",
                              PO_PARAMS(PO_TEXT(tenant)), &r, NULL, err, errcap);
    if (rc)
        return rc;
    int found = 0;
    for (int i = 0; i < r.nrows; i++) {
        char sid[PO_ALERT_SHORT_SIZE];
        po_alert_short_id(po_rows_get(&r, i, 0), sid);
        if (strcmp(sid, id) == 0 && found++ == 0 && po_strcpy(key, cap, po_rows_get(&r, i, 0)))
            found = 2;
    }
    po_rows_free(&r);
    if (found == 1)
        return PO_OK;
    if (found == 0)
        po_errf(err, errcap, "no alert %s in tenant %s", id, tenant);
    else
        po_errf(err, errcap, "the short id %s names more than one alert: use the alert's key", id);
    return found == 0 ? PO_ERR_NOT_FOUND : PO_ERR_CONFLICT;
}

/* The key of the id a caller gave, into key (PO_KEY_SIZE + reason);
 * returns early from the caller on failure. */
#define ALERT_KEY(s, tenant, alert_id)                                                             \
    char alert_key_[PO_KEY_SIZE + 64];                                                             \
    do {                                                                                           \
        po_err krc_ =                                                                              \
            po_alert_key_of(s, tenant, alert_id, alert_key_, sizeof alert_key_, err, errcap);      \
        if (krc_)                                                                                  \
            return krc_;                                                                           \
        alert_id = alert_key_;                                                                     \
    } while (0)

/* The alert (tenant, alert_id: its key) read by sql — its parameters
 * those two — into *out_row (the caller po_rows_frees it). No such alert:
 * PO_ERR_NOT_FOUND, said in err, *out_row empty. */
static po_err alert_row(struct po_store *s, const char *sql, const char *tenant,
                        const char *alert_id, struct po_rows *out_row, char *err, size_t errcap)
{
    po_err rc = po_store_exec(s, sql, PO_PARAMS(PO_TEXT(tenant), PO_TEXT(alert_id)), out_row, NULL,
                              err, errcap);
    if (rc)
        return rc;
    if (out_row->nrows == 0) {
        po_rows_free(out_row);
        po_errf(err, errcap, "no alert %.200s in tenant %s", alert_id, tenant);
        return PO_ERR_NOT_FOUND;
    }
    return PO_OK;
}

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
    ALERT_KEY(s, tenant, alert_id);
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
    char now[PO_TIME_SIZE];
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
        rc = po_alert_audit(s, tenant, alert_id, verb, actor, note, now, err, errcap);
    if (!rc && moved == 0) { /* why not: no such alert, or its state */
        struct po_rows r;
        rc = alert_row(s,
                       "SELECT state, COALESCE(state_by, ''), COALESCE(state_at, '') FROM"
                       " alert WHERE tenant_id = ? AND alert_key = ?",
                       tenant, alert_id, &r, err, errcap);
        if (!rc) {
            if (action == PO_ALERT_ACK && strcmp(po_rows_get(&r, 0, 0), "acknowledged") == 0) {
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

/* An action that moves money names who and why. */
static bool money_action_ok(const char *what, const char *actor, const char *note, char *err,
                            size_t errcap)
{
    if (actor && text_ok(actor, ACTOR_MAX) && note && text_ok(note, NOTE_MAX))
        return true;
    po_errf(err, errcap, "a %s needs who (1-%d characters) and a note (one line, at most %d bytes)",
            what, ACTOR_MAX, NOTE_MAX);
    return false;
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

/* An event's key, <channel>:<id>:<type>, split into its channel and the
 * channel's id (a payment's transaction, a refund's refund id). */
static po_err key_split(const char *key, const char *type, char channel[PO_CHANNEL_SIZE],
                        char txn[PO_TXN_ID_MAX + 1])
{
    const char *first = strchr(key, ':'), *last = strrchr(key, ':');
    if (!first || last == first || strcmp(last + 1, type) != 0 ||
        (size_t)(first - key) >= PO_CHANNEL_SIZE || (size_t)(last - first - 1) > PO_TXN_ID_MAX)
        return PO_ERR_INVALID;
    memcpy(channel, key, (size_t)(first - key));
    channel[first - key] = '\0';
    memcpy(txn, first + 1, (size_t)(last - first - 1));
    txn[last - first - 1] = '\0';
    return PO_OK;
}

/* A source's name back to the source. */
static po_err source_of(const char *name, enum po_source *out)
{
    for (int i = 0; i < PO_SRC_COUNT; i++)
        if (strcmp(po_source_name((enum po_source)i), name) == 0) {
            *out = (enum po_source)i;
            return PO_OK;
        }
    return PO_ERR_INVALID;
}

/* The payment event of a PAY_SUCCESS alert: channel and transaction id
 * from its key, the rest from the alert. */
static po_err event_of(const struct po_rows *r, const char *tenant, struct po_event *ev)
{
    int64_t amount = 0;
    memset(ev, 0, sizeof *ev);
    if (key_split(po_rows_get(r, 0, 1), "PAY_SUCCESS", ev->channel, ev->channel_txn_id) ||
        po_rows_i64(r, 0, 4, &amount) ||
        po_strcpy(ev->out_trade_no, sizeof ev->out_trade_no, po_rows_get(r, 0, 3)) ||
        po_strcpy(ev->currency, sizeof ev->currency, po_rows_get(r, 0, 5)) ||
        po_strcpy(ev->tenant, sizeof ev->tenant, tenant))
        return PO_ERR_INVALID;
    ev->type = PO_EV_PAY_SUCCESS;
    ev->amount_minor = amount;
    ev->source = PO_SRC_RECONCILIATION; /* a replay, as reconciliation's */
    po_clock_now_iso(ev->occurred_at, sizeof ev->occurred_at);
    return PO_OK;
}

/* A tenant's alert as the payment it stands for: the alert's reason and
 * state, and for a PAY_SUCCESS alert the payment event rebuilt from it
 * (payment true; its source the replay's, the alert's in source). */
struct alert_payment {
    char reason[PO_REASON_SIZE];
    bool resolved, payment;
    struct po_event ev;
    enum po_source source;
};

static po_err alert_payment(struct po_store *s, const char *tenant, const char *alert_id,
                            struct alert_payment *a, char *err, size_t errcap)
{
    struct po_rows r;
    memset(a, 0, sizeof *a);
    po_err rc = alert_row(s,
                          "SELECT reason, idem_key, event_type, out_trade_no, amount,"
                          " currency, state, source FROM alert WHERE tenant_id = ? AND"
                          " alert_key = ?",
                          tenant, alert_id, &r, err, errcap);
    if (rc)
        return rc;
    (void)snprintf(a->reason, sizeof a->reason, "%s", po_rows_get(&r, 0, 0));
    a->resolved = strcmp(po_rows_get(&r, 0, 6), "resolved") == 0;
    a->payment = strcmp(po_rows_get(&r, 0, 2), "PAY_SUCCESS") == 0 &&
                 event_of(&r, tenant, &a->ev) == PO_OK &&
                 source_of(po_rows_get(&r, 0, 7), &a->source) == PO_OK;
    po_rows_free(&r);
    return PO_OK;
}

/* The event through the engine's door, with a retry answered as
 * PO_ERR_TRANSIENT (nothing changed) and said in err. */
static po_err engine_apply(const struct po_door *d, const struct po_event *ev,
                           struct po_outcome *out, char *err, size_t errcap)
{
    po_door_apply(d, ev, 1, out);
    if (out->kind == PO_OUT_RETRY) {
        po_errf(err, errcap, "the engine answered retry (%s); nothing changed, try again",
                po_reason_name(out->reason));
        return PO_ERR_TRANSIENT;
    }
    return PO_OK;
}

/* An alert's event through the engine's door (inside serve its committer,
 * with the event's own key), the move and its outcome appended to the
 * audit trail as action; applied (now, or by an earlier call: a duplicate)
 * resolves the alert, "<done>: <outcome>; <note>". */
static po_err apply_audited(const struct po_door *d, const char *tenant, const char *alert_id,
                            const char *action, const char *done, const char *actor,
                            const char *note, const struct po_event *ev, struct po_outcome *out,
                            bool *resolved, char *err, size_t errcap)
{
    struct po_store *s = d->s;
    po_err rc = engine_apply(d, ev, out, err, errcap);
    if (rc)
        return rc;
    char said[NOTE_MAX + 96], now[PO_TIME_SIZE];
    (void)snprintf(said, sizeof said, "%s: %s%s%s; %s", done, po_outcome_name(out->kind),
                   out->reason != PO_R_NONE ? " " : "",
                   out->reason != PO_R_NONE ? po_reason_name(out->reason) : "", note);
    po_clock_now_iso(now, sizeof now);
    rc = po_store_begin(s, err, errcap);
    if (!rc)
        rc = po_alert_audit(s, tenant, alert_id, action, actor, said, now, err, errcap);
    if (!rc)
        rc = po_store_commit(s, err, errcap);
    else
        po_store_rollback(s);
    if (rc)
        return rc;
    if (out->kind == PO_OUT_APPLIED || out->kind == PO_OUT_DUPLICATE) {
        bool changed = false;
        said[NOTE_MAX] = '\0';
        rc =
            po_alert_act(s, tenant, alert_id, PO_ALERT_RESOLVE, actor, said, &changed, err, errcap);
        *resolved = rc == PO_OK;
    }
    return rc;
}

/* A move of an alert's money through the engine (replay, accept). */
struct engine_move {
    const char *what;   /* its name in "a <what> needs who…" */
    const char *action; /* its action in the audit trail */
    const char *done;   /* the resolution's "<done>: <outcome>; <note>" */
    /* The event the move applies, built from the alert (alert_id its key),
     * into *ev; or why the alert allows no such move, said in err. */
    po_err (*event)(struct po_store *s, const char *tenant, const char *alert_id,
                    struct po_event *ev, char *err, size_t errcap);
};

/* The move m on an alert: who and why checked, the id resolved to the
 * alert's key, m's event built from the alert, then applied and audited
 * through the door d (apply_audited). *resolved and out cleared first. */
static po_err engine_move(const struct po_door *d, const struct engine_move *m, const char *tenant,
                          const char *alert_id, const char *actor, const char *note,
                          struct po_outcome *out, bool *resolved, char *err, size_t errcap)
{
    struct po_store *s = d->s;
    *resolved = false;
    memset(out, 0, sizeof *out);
    if (!money_action_ok(m->what, actor, note, err, errcap))
        return PO_ERR_INVALID;
    ALERT_KEY(s, tenant, alert_id);
    struct po_event ev;
    po_err rc = m->event(s, tenant, alert_id, &ev, err, errcap);
    if (rc)
        return rc;
    return apply_audited(d, tenant, alert_id, m->action, m->done, actor, note, &ev, out, resolved,
                         err, errcap);
}

/* The replay's event: the alert's payment, rebuilt. The engine's own
 * entry, with the payment's own key: applied once at most, whoever
 * replays it and however often. */
static po_err replay_event(struct po_store *s, const char *tenant, const char *alert_id,
                           struct po_event *ev, char *err, size_t errcap)
{
    struct alert_payment a;
    po_err rc = alert_payment(s, tenant, alert_id, &a, err, errcap);
    if (rc)
        return rc;
    if (a.resolved) {
        po_errf(err, errcap, "the alert is resolved already");
        return PO_ERR_CONFLICT;
    }
    if (!a.payment || !replayable(a.reason)) {
        po_errf(err, errcap,
                "a %s alert cannot be replayed (only payments refused as unknown_order,"
                " amount_mismatch, currency_mismatch or channel_mismatch; docs/operations.md)",
                a.reason);
        return PO_ERR_INVALID;
    }
    *ev = a.ev;
    return PO_OK;
}

/* ---- refund: a payment parked in suspense, back to the payer ---- */

/* The refund as it stands, into out; *found false when there is none. */
static po_err refund_state(struct po_store *s, const char *tenant, const char *out_refund_no,
                           struct po_suspense_refund *out, char *suspense_key, size_t keycap,
                           bool *found, char *err, size_t errcap)
{
    struct po_rows r;
    po_err rc =
        po_store_exec(s,
                      "SELECT COALESCE(suspense_key, ''), out_trade_no, status,"
                      " submit_state, COALESCE(submit_error, '') FROM refund WHERE"
                      " tenant_id = ? AND out_refund_no = ?",
                      PO_PARAMS(PO_TEXT(tenant), PO_TEXT(out_refund_no)), &r, NULL, err, errcap);
    if (rc)
        return rc;
    *found = r.nrows == 1;
    if (*found && (po_strcpy(suspense_key, keycap, po_rows_get(&r, 0, 0)) ||
                   po_strcpy(out->status, sizeof out->status, po_rows_get(&r, 0, 2)) ||
                   po_strcpy(out->submit_state, sizeof out->submit_state, po_rows_get(&r, 0, 3))))
        rc = PO_ERR_STORE;
    if (*found && !rc) {
        (void)snprintf(out->submit_error, sizeof out->submit_error, "%s", po_rows_get(&r, 0, 4));
        if (!suspense_key[0])
            po_errf(err, errcap,
                    "refund %s exists for order %s (not a refund of this suspense payment):"
                    " choose another number",
                    out_refund_no, po_rows_get(&r, 0, 1));
    }
    po_rows_free(&r);
    return rc;
}

/* The suspense payment behind a refundable alert, into out. *resolved: the
 * alert is resolved (err says by whom), refused unless the number asked
 * for already is its refund. */
static po_err suspense_payment(struct po_store *s, const char *tenant, const char *alert_id,
                               struct po_suspense_refund *out, char *key, size_t keycap,
                               bool *resolved, char *err, size_t errcap)
{
    *resolved = false;
    struct po_rows r;
    po_err rc = alert_row(
        s,
        "SELECT a.reason, a.idem_key, a.state, COALESCE(a.state_by, ''), COALESCE(n.outcome, ''),"
        " n.amount, n.currency, COALESCE(n.out_trade_no, '') FROM alert a LEFT JOIN notify_log n"
        " ON n.tenant_id = a.tenant_id AND n.idem_key = a.idem_key WHERE a.tenant_id = ? AND"
        " a.alert_key = ?",
        tenant, alert_id, &r, err, errcap);
    if (rc)
        return rc;
    if (!po_alert_reason_refundable(po_rows_get(&r, 0, 0))) {
        po_errf(err, errcap,
                "a %s alert holds no money in suspense to refund; only paid_after_close,"
                " duplicate_payment and amount, currency or channel mismatches are refunded"
                " this way (docs/operations.md)",
                po_rows_get(&r, 0, 0));
        rc = PO_ERR_INVALID;
    } else if (strcmp(po_rows_get(&r, 0, 4), "applied") == 0) {
        po_errf(err, errcap,
                "the payment was credited to order %s: refund it as the order's"
                " (POST /v1/refunds, refund create)",
                po_rows_get(&r, 0, 7));
        rc = PO_ERR_CONFLICT;
    } else if (strcmp(po_rows_get(&r, 0, 4), "suspense") != 0 ||
               po_strcpy(key, keycap, po_rows_get(&r, 0, 1)) ||
               key_split(key, "PAY_SUCCESS", out->channel, out->txn_id) ||
               po_rows_i64(&r, 0, 5, &out->amount) ||
               po_strcpy(out->currency, sizeof out->currency, po_rows_get(&r, 0, 6)) ||
               po_strcpy(out->out_trade_no, sizeof out->out_trade_no, po_rows_get(&r, 0, 7))) {
        po_errf(err, errcap, "the alert's payment is not recorded in suspense");
        rc = PO_ERR_INVALID;
    } else if (strcmp(po_rows_get(&r, 0, 2), "resolved") == 0) {
        po_errf(err, errcap,
                "the alert was resolved by %s; a resolved alert is not refunded (the money"
                " may have been returned another way: see its note)",
                po_rows_get(&r, 0, 3));
        *resolved = true;
    }
    po_rows_free(&r);
    return rc;
}

/* The refund already returning this payment, if any (not closed). */
static po_err live_refund(struct po_store *s, const char *tenant, const char *key, char *err,
                          size_t errcap)
{
    struct po_rows r;
    po_err rc = po_store_exec(s,
                              "SELECT out_refund_no, status FROM refund WHERE tenant_id = ? AND"
                              " suspense_key = ? AND status <> 'CLOSED'",
                              PO_PARAMS(PO_TEXT(tenant), PO_TEXT(key)), &r, NULL, err, errcap);
    if (rc)
        return rc;
    if (r.nrows > 0) {
        po_errf(err, errcap, "refund %s (%s) already returns this payment", po_rows_get(&r, 0, 0),
                po_rows_get(&r, 0, 1));
        rc = PO_ERR_CONFLICT;
    }
    po_rows_free(&r);
    return rc;
}

/* A payment refused by the order's checks (amount, currency or channel
 * mismatch) has no money on the books yet: before it is refunded, the
 * engine records it with its own key and parks its money in suspense
 * (park_in_suspense). One the checks now pass is credited instead, and
 * there is nothing to refund here. Other alerts are left to refund_once. */
static po_err park_refused(const struct po_door *d, const char *tenant, const char *alert_id,
                           char *err, size_t errcap)
{
    struct alert_payment a;
    po_err rc = alert_payment(d->s, tenant, alert_id, &a, err, errcap);
    if (rc == PO_ERR_NOT_FOUND)
        return PO_OK; /* refund_once says so */
    /* refused by the order's checks: replayable, but for an unknown order */
    if (rc || a.resolved || !a.payment || !replayable(a.reason) ||
        strcmp(a.reason, "unknown_order") == 0)
        return rc;
    a.ev.park_in_suspense = true;
    a.ev.source = a.source;
    struct po_outcome o;
    rc = engine_apply(d, &a.ev, &o, err, errcap);
    if (!rc && o.kind == PO_OUT_APPLIED) {
        po_errf(err, errcap,
                "the payment passes order %s's checks now and was credited to it: refund it as"
                " the order's (POST /v1/refunds, refund create) if it must go back",
                a.ev.out_trade_no);
        rc = PO_ERR_CONFLICT;
    } else if (!rc && o.kind == PO_OUT_REJECTED) {
        po_errf(err, errcap, "the engine refused to park the payment (%s)",
                po_reason_name(o.reason));
        rc = PO_ERR_INVALID;
    }
    return rc; /* suspense: parked now; duplicate: parked (or credited) before */
}

/* One attempt, in one transaction: checks, the refund, the audit, the ack. */
static po_err refund_once(struct po_store *s, const char *tenant, const char *alert_id,
                          const char *out_refund_no, const char *actor, const char *note,
                          struct po_suspense_refund *out, char *err, size_t errcap)
{
    char key[PO_KEY_SIZE] = "", theirs[PO_KEY_SIZE] = "", now[PO_TIME_SIZE];
    bool found = false, resolved = false;
    po_clock_now_iso(now, sizeof now);
    po_err rc = po_store_begin(s, err, errcap);
    if (rc)
        return rc;
    rc = suspense_payment(s, tenant, alert_id, out, key, sizeof key, &resolved, err, errcap);
    if (!rc)
        rc =
            refund_state(s, tenant, out_refund_no, out, theirs, sizeof theirs, &found, err, errcap);
    if (!rc && found) {
        po_store_rollback(s);
        if (strcmp(theirs, key) == 0)
            return PO_OK; /* the same refund again */
        if (theirs[0])
            po_errf(err, errcap, "refund %s returns another payment (%s)", out_refund_no, theirs);
        return PO_ERR_CONFLICT;
    }
    if (!rc && resolved)
        rc = PO_ERR_CONFLICT; /* err still says why (refund_state wrote nothing) */
    if (!rc)
        rc = live_refund(s, tenant, key, err, errcap);
    const struct po_channel_ops *ch = rc ? NULL : po_channel_find(out->channel);
    const char *submit = ch && ch->refund_submit ? "pending" : "manual";
    if (!rc)
        rc = po_store_exec(
            s,
            "INSERT INTO refund (tenant_id, out_refund_no, out_trade_no, channel, amount,"
            " currency, status, submit_state, suspense_key, txn_id, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, 'PROCESSING', ?, ?, ?, ?, ?)",
            PO_PARAMS(PO_TEXT(tenant), PO_TEXT(out_refund_no), PO_TEXT(out->out_trade_no),
                      PO_TEXT(out->channel), PO_I64(out->amount), PO_TEXT(out->currency),
                      PO_TEXT(submit), PO_TEXT(key), PO_TEXT(out->txn_id), PO_TEXT(now),
                      PO_TEXT(now)),
            NULL, NULL, err, errcap);
    char said[NOTE_MAX + 160], money[PO_MONEY_MAX];
    po_money_format(out->amount, out->currency, money, sizeof money);
    (void)snprintf(said, sizeof said, "refund %s of %s (%s %s) requested; %s", out_refund_no, money,
                   out->channel, out->txn_id, note);
    said[NOTE_MAX] = '\0';
    if (!rc)
        rc = po_alert_audit(s, tenant, alert_id, "refund", actor, said, now, err, errcap);
    if (!rc)
        rc = po_store_exec(s,
                           "UPDATE alert SET state = 'acknowledged', state_by = ?,"
                           " state_note = ?, state_at = ? WHERE tenant_id = ? AND"
                           " alert_key = ? AND state = 'open'",
                           PO_PARAMS(PO_TEXT(actor), PO_TEXT(said), PO_TEXT(now), PO_TEXT(tenant),
                                     PO_TEXT(alert_id)),
                           NULL, NULL, err, errcap);
    if (!rc)
        rc = po_store_commit(s, err, errcap);
    else
        po_store_rollback(s);
    if (!rc) {
        out->created = true;
        (void)snprintf(out->status, sizeof out->status, "PROCESSING");
        (void)snprintf(out->submit_state, sizeof out->submit_state, "%s", submit);
        po_log(PO_LOG_INFO, "tenant %s: alert %s: %s (by %s)", tenant, alert_id, said, actor);
    }
    return rc;
}

po_err po_alert_refund(const struct po_door *d, struct po_accounts *accounts,
                       const unsigned char *master, const char *tenant, const char *alert_id,
                       const char *out_refund_no, const char *actor, const char *note,
                       struct po_suspense_refund *out, char *err, size_t errcap)
{
    struct po_store *s = d->s;
    memset(out, 0, sizeof *out);
    if (!money_action_ok("refund", actor, note, err, errcap))
        return PO_ERR_INVALID;
    ALERT_KEY(s, tenant, alert_id);
    if (!out_refund_no || !po_id_valid(out_refund_no, PO_ID_MAX)) {
        po_errf(err, errcap, "refund number: 1-%d characters of [A-Za-z0-9_-.:|*]", PO_ID_MAX);
        return PO_ERR_INVALID;
    }
    (void)snprintf(out->out_refund_no, sizeof out->out_refund_no, "%s", out_refund_no);
    po_err rc = park_refused(d, tenant, alert_id, err, errcap);
    if (rc)
        return rc;
    /* A twin request committing between our checks and our INSERT makes the
     * INSERT fail on the unique indexes: look again, once. */
    rc = refund_once(s, tenant, alert_id, out_refund_no, actor, note, out, err, errcap);
    if (rc == PO_ERR_CONFLICT)
        rc = refund_once(s, tenant, alert_id, out_refund_no, actor, note, out, err, errcap);
    if (rc || !master || strcmp(out->submit_state, "pending") != 0)
        return rc;
    char state[16];
    rc = po_refund_submit(s, accounts, master, tenant, out_refund_no, state, sizeof state);
    if (rc) {
        po_errf(err, errcap,
                "refund %s is recorded but its submission failed (%s); serve submits it again",
                out_refund_no, po_err_name(rc));
        return rc;
    }
    char key[PO_KEY_SIZE];
    bool found = false;
    return refund_state(s, tenant, out_refund_no, out, key, sizeof key, &found, err, errcap);
}

/* ---- accept: a refund the channel made after payonce closed it ---- */

/* The acceptance's event: the refund the alert holds in suspense, as a
 * success accepted after close. The engine's own entry, with the
 * acceptance's own key (the success's + "|accepted"): once, whoever
 * accepts it and however often. */
static po_err accept_event(struct po_store *s, const char *tenant, const char *alert_id,
                           struct po_event *out_ev, char *err, size_t errcap)
{
    struct po_rows r;
    po_err rc = alert_row(
        s,
        "SELECT a.reason, a.idem_key, a.state, COALESCE(n.outcome, ''), n.source, a.amount,"
        " a.currency, a.out_trade_no, COALESCE(j.out_refund_no, ''),"
        " COALESCE(rf.suspense_key, '') FROM alert a LEFT JOIN notify_log n ON"
        " n.tenant_id = a.tenant_id AND n.idem_key = a.idem_key LEFT JOIN journal j ON"
        " j.tenant_id = a.tenant_id AND j.idem_key = a.idem_key AND j.kind = 'SUSPENSE'"
        " LEFT JOIN refund rf ON rf.tenant_id = j.tenant_id AND rf.out_refund_no ="
        " j.out_refund_no WHERE a.tenant_id = ? AND a.alert_key = ?",
        tenant, alert_id, &r, err, errcap);
    if (rc)
        return rc;
    struct po_event ev;
    memset(&ev, 0, sizeof ev);
    int64_t amount = 0;
    if (strcmp(po_rows_get(&r, 0, 0), "refund_after_close") != 0) {
        po_errf(err, errcap,
                "a %s alert cannot be accepted (only a refund_after_close: a refund the"
                " channel made after payonce had closed it; docs/operations.md)",
                po_rows_get(&r, 0, 0));
        rc = PO_ERR_INVALID;
    } else if (strcmp(po_rows_get(&r, 0, 2), "resolved") == 0) {
        po_errf(err, errcap, "the alert is resolved already");
        rc = PO_ERR_CONFLICT;
    } else if (po_rows_get(&r, 0, 9)[0]) {
        po_errf(err, errcap,
                "refund %s returned a payment parked in suspense: the channel paid it out, so"
                " that payment's money has left suspense; resolve both alerts saying so",
                po_rows_get(&r, 0, 8));
        rc = PO_ERR_INVALID;
    } else if (strcmp(po_rows_get(&r, 0, 3), "suspense") != 0 ||
               key_split(po_rows_get(&r, 0, 1), "REFUND_SUCCESS", ev.channel,
                         ev.channel_refund_id) ||
               source_of(po_rows_get(&r, 0, 4), &ev.source) || po_rows_i64(&r, 0, 5, &amount) ||
               po_strcpy(ev.currency, sizeof ev.currency, po_rows_get(&r, 0, 6)) ||
               po_strcpy(ev.out_trade_no, sizeof ev.out_trade_no, po_rows_get(&r, 0, 7)) ||
               po_strcpy(ev.out_refund_no, sizeof ev.out_refund_no, po_rows_get(&r, 0, 8)) ||
               !ev.out_refund_no[0] || po_strcpy(ev.tenant, sizeof ev.tenant, tenant)) {
        po_errf(err, errcap, "the alert's refund is not recorded in suspense");
        rc = PO_ERR_INVALID;
    }
    po_rows_free(&r);
    if (rc)
        return rc;
    ev.type = PO_EV_REFUND_SUCCESS;
    ev.amount_minor = amount;
    ev.accept_after_close = true;
    po_clock_now_iso(ev.occurred_at, sizeof ev.occurred_at);
    *out_ev = ev;
    return PO_OK;
}

/* ---- the two moves through the engine ---- */

static const struct engine_move replay_move = {"replay", "replay", "replayed", replay_event},
                                accept_move = {"acceptance", "accept", "accepted", accept_event};

po_err po_alert_replay(const struct po_door *d, const char *tenant, const char *alert_id,
                       const char *actor, const char *note, struct po_outcome *out, bool *resolved,
                       char *err, size_t errcap)
{
    return engine_move(d, &replay_move, tenant, alert_id, actor, note, out, resolved, err, errcap);
}

po_err po_alert_accept(const struct po_door *d, const char *tenant, const char *alert_id,
                       const char *actor, const char *note, struct po_outcome *out, bool *resolved,
                       char *err, size_t errcap)
{
    return engine_move(d, &accept_move, tenant, alert_id, actor, note, out, resolved, err, errcap);
}

po_err po_alert_redrive(struct po_store *s, const char *tenant, const char *alert_id,
                        const char *actor, const char *note, int64_t *count, char *err,
                        size_t errcap)
{
    *count = 0;
    ALERT_KEY(s, tenant, alert_id);
    if (!note || !*note || !text_ok(note, NOTE_MAX - 64)) {
        po_errf(err, errcap, "note: 1-%d bytes of text on one line", NOTE_MAX - 64);
        return PO_ERR_INVALID;
    }
    struct po_rows r;
    po_err rc = po_store_exec(s,
                              "SELECT reason, idem_key, state FROM alert WHERE tenant_id = ? AND"
                              " alert_key = ?",
                              PO_PARAMS(PO_TEXT(tenant), PO_TEXT(alert_id)), &r, NULL, err, errcap);
    if (rc)
        return rc;
    char event[PO_KEY_SIZE] = "";
    if (r.nrows != 1) {
        po_errf(err, errcap, "no alert %s", alert_id);
        rc = PO_ERR_NOT_FOUND;
    } else if (strcmp(po_rows_get(&r, 0, 0), po_reason_name(PO_R_WEBHOOK_DEAD_LETTER)) != 0) {
        po_errf(err, errcap, "only a webhook_dead_letter alert is redriven (this one is %.40s)",
                po_rows_get(&r, 0, 0));
        rc = PO_ERR_CONFLICT;
    } else if (strcmp(po_rows_get(&r, 0, 2), "resolved") == 0) {
        po_errf(err, errcap, "the alert is resolved already");
        rc = PO_ERR_CONFLICT;
    } else if (po_strcpy(event, sizeof event, po_rows_get(&r, 0, 1))) {
        rc = PO_ERR_INVALID;
    }
    po_rows_free(&r);
    if (!rc)
        rc = po_webhook_redrive(s, tenant, event, NULL, NULL, count, err, errcap);
    char full[NOTE_MAX + 1];
    bool changed = false;
    if (!rc && po_fmt(full, sizeof full, "redriven (%lld deliveries sent again): %s",
                      (long long)*count, note))
        rc = PO_ERR_INVALID;
    if (!rc)
        rc =
            po_alert_act(s, tenant, alert_id, PO_ALERT_RESOLVE, actor, full, &changed, err, errcap);
    return rc;
}
