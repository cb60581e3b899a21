/*
 * alert.h — the alerts' one home below the services: raising one (its row,
 * its alert.raised event for the tenant and its log line, once per key),
 * its audit trail (alert_action), and settling the alerts of a suspense
 * payment when a refund returned its money. The engine, webhook delivery
 * and refund submission raise through po_alert_raise; the operator's moves
 * (acknowledge, resolve, replay, accept, refund) are service/alerts/alerts.c,
 * which audits through here.
 */
#ifndef PO_ALERT_H
#define PO_ALERT_H

#include "../core/core.h"
#include "../store/store.h"

/* An alert to raise. key identifies it within the tenant (raising it
 * again is a no-op); idem_key names what it is about (an event's key, a
 * webhook event's id, "api:refund:…"). */
struct po_alert_new {
    const char *tenant, *key, *reason, *idem_key, *event_type, *source;
    const char *out_trade_no; /* NULL: about no order */
    int64_t amount;
    const char *currency, *detail;
    /* The log line's opening ("tenant t1, channel wechatpay, key …, outcome
     * rejected"); NULL: "tenant <tenant>". */
    const char *log_context;
};
/* Inserts the alert unless its key is there already; when it was not:
 * the tenant's alert.raised event (in the same transaction: the caller's)
 * and a warn log line. *out_raised (may be NULL) says which. */
po_err po_alert_raise(struct po_store *s, const struct po_alert_new *a, const char *now,
                      bool *out_raised, char *err, size_t errcap) PO_MUST_CHECK;

/* In one transaction of its own: the alert raised (as po_alert_raise) and
 * one statement of the caller's that goes with it (marking what was
 * alerted, taking it off a list); neither without the other. */
po_err po_alert_raise_tx(struct po_store *s, const struct po_alert_new *a, const char *now,
                         const char *sql, const struct po_param *params, int nparams, char *err,
                         size_t errcap) PO_MUST_CHECK;

/* In one transaction of its own: the alert raised (as po_alert_raise)
 * unless the caller's query (sql) finds a row — another alert that already
 * names the same thing; *out_raised (may be NULL) says whether it was. */
po_err po_alert_raise_unless(struct po_store *s, const struct po_alert_new *a, const char *now,
                             const char *sql, const struct po_param *params, int nparams,
                             bool *out_raised, char *err, size_t errcap) PO_MUST_CHECK;

/* ---- the alerts' audit trail (alert_action), inside the caller's
 * transaction: the operator's moves (service/alerts/alerts.c) and the engine's own
 * (a suspense payment refunded). ---- */

/* Appends one move to an alert's trail (the alert must exist; its row is
 * locked until the caller's transaction ends, so moves at once number
 * themselves in turn). action:
 * acknowledge, resolve, replay, refund, refunded. */
po_err po_alert_audit(struct po_store *s, const char *tenant, const char *alert_id,
                      const char *action, const char *actor, const char *note, const char *now,
                      char *err, size_t errcap) PO_MUST_CHECK;

/* The alerts of a suspense payment (paid_after_close, duplicate_payment, or
 * a mismatch an operator parked to refund: their keys are
 * suspense_key|reason), when a refund returned its money:
 * each gets a 'refunded' move by "payonce" with note, and is resolved if it
 * was not already. */
po_err po_alert_settle_refunded(struct po_store *s, const char *tenant, const char *suspense_key,
                                const char *note, const char *now, char *err,
                                size_t errcap) PO_MUST_CHECK;

/* The reasons of a payment whose money is, or can be, parked in suspense
 * and refunded from there: paid_after_close, duplicate_payment (parked on
 * the way in), amount/currency/channel_mismatch (refused; parked when an
 * operator refunds them). */
bool po_alert_reason_refundable(const char *reason);

#endif
