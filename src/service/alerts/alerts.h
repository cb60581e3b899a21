/*
 * alerts.h — the alerts workflow (alerts.c).
 * Part of service.h (which includes every service header).
 *
 * alerts/ owns the alerts workflow (alerts.c) and what reaches people of
 * it (alert_notify.h). It calls payments/ (a refund submitted again) and
 * webhooks/ (a delivery redriven), and accounts/ through them.
 */
#ifndef PO_SERVICE_ALERTS_H
#define PO_SERVICE_ALERTS_H

#include "../../channel/channel.h"
#include "../accounts/account.h"
#include "../../core/core.h"
#include "../../engine/engine.h"
#include "../../runtime/runtime.h"
#include "../../store/store.h"

#include <jansson.h>

/* ---- the alerts workflow (alerts.c) ---- */

enum po_alert_action { PO_ALERT_ACK, PO_ALERT_RESOLVE };
/* Moves a tenant's alert: open -> acknowledged -> resolved (or open ->
 * resolved), recording who (actor, 1-64 printable characters) and why
 * (note, at most 500 bytes of text; required to resolve) on the alert and
 * in its audit trail, in one transaction. Acknowledging an acknowledged
 * alert again is a no-op (*changed false); anything else out of order is
 * PO_ERR_CONFLICT naming the state; an unknown id PO_ERR_NOT_FOUND. */
po_err po_alert_act(struct po_store *s, const char *tenant, const char *alert_id,
                    enum po_alert_action action, const char *actor, const char *note, bool *changed,
                    char *err, size_t errcap) PO_MUST_CHECK;
/* The audited operator action of a refused payment's alert (reasons
 * unknown_order, amount_mismatch, currency_mismatch, channel_mismatch):
 * the payment rebuilt from the alert goes through the engine's door d
 * (inside serve, its committer; d->s for the rest) with its own
 * idempotency key, so it is credited at
 * most once whoever replays it; the replay and its outcome are appended to
 * the audit trail, and an applied (or already credited) payment resolves
 * the alert. out: the engine's outcome. Never edits money directly. */
po_err po_alert_replay(const struct po_door *d, const char *tenant, const char *alert_id,
                       const char *actor, const char *note, struct po_outcome *out, bool *resolved,
                       char *err, size_t errcap) PO_MUST_CHECK;
/* The audited operator action of a refund_after_close alert: the channel
 * refunded the payer after payonce had closed the refund (the money left,
 * parked in suspense). Accepting it makes the refund the order's after all,
 * through the engine's own entry with the acceptance's own key (the
 * success's + "|accepted"): the refund SUCCESS, reserved and refunded on the
 * order (rejected, refund_exceeds_reserved, if that would refund more than
 * was paid), the amount moved from suspense to the merchant's payable — at
 * most once, whoever accepts it. Audited as 'accept'; applied (or already)
 * resolves the alert. out: the engine's outcome. */
/* A webhook_dead_letter alert: its event's dead deliveries sent again
 * (po_webhook_redrive) and the alert resolved, the note saying so
 * ("redriven (N deliveries sent again): note"). PO_ERR_CONFLICT for another
 * kind of alert or a resolved one. *count: the deliveries made pending. */
po_err po_alert_redrive(struct po_store *s, const char *tenant, const char *alert_id,
                        const char *actor, const char *note, int64_t *count, char *err,
                        size_t errcap) PO_MUST_CHECK;
po_err po_alert_accept(const struct po_door *d, const char *tenant, const char *alert_id,
                       const char *actor, const char *note, struct po_outcome *out, bool *resolved,
                       char *err, size_t errcap) PO_MUST_CHECK;
/* The refund an operator asked for to return a payment parked in suspense
 * (po_alert_refund), as it stands after the call. */
struct po_suspense_refund {
    char out_refund_no[PO_ID_MAX + 1];
    char out_trade_no[PO_ID_MAX + 1];
    char channel[PO_CHANNEL_SIZE];
    char txn_id[PO_TXN_ID_MAX + 1];
    int64_t amount;
    char currency[4];
    char status[16];       /* PROCESSING, SUCCESS, CLOSED, ABNORMAL */
    char submit_state[16]; /* pending, submitted, rejected, manual */
    char submit_error[64];
    bool created; /* false: this number already returned this payment */
};
/* The audited operator action of a suspense alert (paid_after_close,
 * duplicate_payment: a payment whose money the engine parked in suspense):
 * records a refund of exactly that payment (its channel transaction, its
 * amount) as out_refund_no, reserving nothing on the order, appends
 * 'refund' to the audit trail and acknowledges the alert, in one
 * transaction; then, when master is given and the channel has a refund
 * API, submits it (else it waits for serve's jobs, or — no refund API —
 * for the channel's notification of a refund made there with that
 * number). The money moves only when the channel's success comes through
 * the engine (callback, query, reconciliation) with the refund's own key:
 * suspense -> clearing, and the alert is resolved by payonce. At most one
 * refund per suspense payment is live (a closed one may be followed by
 * another number); the same number again is the same refund (*created
 * false). A refused alert, a resolved one, or a number used by another
 * refund is PO_ERR_INVALID / PO_ERR_CONFLICT with why in err. */
po_err po_alert_refund(const struct po_door *d, struct po_accounts *accounts,
                       const unsigned char *master, const char *tenant, const char *alert_id,
                       const char *out_refund_no, const char *actor, const char *note,
                       struct po_suspense_refund *out, char *err, size_t errcap) PO_MUST_CHECK;
/* An alert's short id: "al_" and the first 12 hex digits of the SHA-256 of
 * its key (the key, idem_key|reason, has characters a shell splits on).
 * Stable (the key never changes), shown by the listings beside the key;
 * every action takes either. */
#define PO_ALERT_SHORT_SIZE 16
void po_alert_short_id(const char *alert_key, char out[PO_ALERT_SHORT_SIZE]);
/* The key of the alert id names in tenant: a short id looked up among the
 * tenant's alerts (PO_ERR_NOT_FOUND when none has it), anything else taken
 * as the key itself. */
po_err po_alert_key_of(struct po_store *s, const char *tenant, const char *id, char *key,
                       size_t cap, char *err, size_t errcap) PO_MUST_CHECK;
/* Whether a state name is one an alert can be in. */
bool po_alert_state_valid(const char *state);

#endif
