/*
 * views.h — typed reads as JSON: orders, refunds, balances, alerts, journal pages, API keys
 * (views.c). Part of service.h (which includes every service header).
 */
#ifndef PO_SERVICE_VIEWS_H
#define PO_SERVICE_VIEWS_H

#include "../../channel/channel.h"
#include "../../core/core.h"
#include "../../engine/engine.h"
#include "../../runtime/runtime.h"
#include "../../store/store.h"

#include <jansson.h>

/* ---- typed reads (views.c) ----
 * Each returns a new JSON value (*out, caller json_decrefs) with integer
 * minor units for money and null for absent fields; *out is NULL when the
 * object does not exist. */
po_err po_view_order(struct po_store *s, const char *tenant, const char *out_trade_no,
                     json_t **out) PO_MUST_CHECK;
/* Any query's rows as an array of objects by a field list: one member per
 * column, "name" text, "#name" an integer (null when NULL). */
po_err po_view_rows(struct po_store *s, const char *sql, const struct po_param *params, int np,
                    const char *const *fields, int n, json_t **out) PO_MUST_CHECK;
/* Row `row` of r as one such object (its first n columns). */
json_t *po_view_row(const struct po_rows *r, int row, const char *const *fields, int n);
po_err po_view_refund(struct po_store *s, const char *tenant, const char *out_refund_no,
                      json_t **out) PO_MUST_CHECK;
/* [{account, currency, balance, updated_at}] in account order. */
po_err po_view_balances(struct po_store *s, const char *tenant, json_t **out) PO_MUST_CHECK;

/* A tenant's alerts, oldest first; state NULL or "" for every state,
 * else open, acknowledged or resolved. Each has its id (the alert key),
 * its kind (reason) and its state with who set it, when and why. */
po_err po_view_alerts(struct po_store *s, const char *tenant, const char *state,
                      struct po_page *page, json_t **out) PO_MUST_CHECK;
/* Journals with their postings; order_filter NULL or "" for all. */
po_err po_view_journal(struct po_store *s, const char *tenant, const char *order_filter,
                       struct po_page *page, json_t **out) PO_MUST_CHECK;
/* The tenant's events, oldest first (keyset page on created_at, event_id),
 * optionally of one type and/or one order. */
po_err po_view_events(struct po_store *s, const char *tenant, const char *type,
                      const char *out_trade_no, struct po_page *page, json_t **out) PO_MUST_CHECK;
/* [{key_id, created_at, revoked_at}] */
po_err po_view_apikeys(struct po_store *s, const char *tenant, json_t **out) PO_MUST_CHECK;
/* A tenant's orders, oldest first, keyset-paged on (created_at,
 * out_trade_no); each filter NULL or "" for all; since: created at or
 * after this ISO 8601 time. */
struct po_order_filter {
    const char *status, *merchant, *since;
};
po_err po_view_orders(struct po_store *s, const char *tenant, const struct po_order_filter *f,
                      struct po_page *pg, json_t **out) PO_MUST_CHECK;
/* What the operator's dashboard shows from the database, every tenant:
 * alerts not resolved (newest 100), the last 10 reconciliation runs,
 * merchants' balances, the webhook deliveries' state. */
po_err po_view_dashboard(struct po_store *s, json_t **out) PO_MUST_CHECK;
/* [{tenant, name, created_at, merchants, channels: [..]}] by tenant id. */
po_err po_view_tenants(struct po_store *s, json_t **out) PO_MUST_CHECK;
/* [{merchant, created_at}] of a tenant. */
po_err po_view_merchants(struct po_store *s, const char *tenant, json_t **out) PO_MUST_CHECK;
/* A tenant's channel account as an operator may see it: secrets and keys
 * replaced by "(sealed)" / "(PEM, N bytes)", platform certificate serials
 * with their expiry (`expired` judged at now, unix seconds). *out NULL
 * when there is no such account. */
po_err po_view_channel(struct po_store *s, const char *tenant, const char *channel, int64_t now,
                       json_t **out) PO_MUST_CHECK;
/* The channel of an order ("" when any channel may pay it); *found false
 * when there is no such order. */
po_err po_view_order_channel(struct po_store *s, const char *tenant, const char *out_trade_no,
                             char *channel, size_t cap, bool *found) PO_MUST_CHECK;

/* ---- the operator's console (console_views.c) ---- */

/* Orders of one tenant (or every tenant: NULL) whose out_trade_no or
 * channel transaction id is q: [{tenant, out_trade_no, channel,
 * channel_txn_id, amount, currency, status, created_at}], at most 20. */
po_err po_view_find_orders(struct po_store *s, const char *tenant, const char *q,
                           json_t **out) PO_MUST_CHECK;
/* Everything about one order on one page: the order, its verified
 * callbacks as answered (deliveries: outcome, layer, ack), the callbacks and
 * queries that changed it (processed records: key, source, outcome), its
 * journals with their postings, refunds, alerts, the tenant events it
 * caused and each event's webhook deliveries with their attempts. *out
 * NULL when there is no such order. */
po_err po_view_order_trail(struct po_store *s, const char *tenant, const char *out_trade_no,
                           json_t **out) PO_MUST_CHECK;
/* Every ledger account of one tenant (or all: NULL) per currency, with
 * its kind (merchant_payable, channel_clearing, suspense, fees, refunds,
 * …: the account name up to its colon). */
po_err po_view_accounts(struct po_store *s, const char *tenant, json_t **out) PO_MUST_CHECK;
/* Alerts of one tenant (or all: NULL), newest first, at most 200: state
 * NULL or "" for those not resolved, else that state. Each with its short
 * id (what every action takes). */
po_err po_view_alerts_console(struct po_store *s, const char *tenant, const char *state,
                              json_t **out) PO_MUST_CHECK;
/* The journal behind one balance: the newest `limit` postings to account
 * in currency, with their journal (kind, order, refund, time), and the sum
 * of all its postings beside the cached balance. */
po_err po_view_account_journal(struct po_store *s, const char *tenant, const char *account,
                               const char *currency, int limit, json_t **out) PO_MUST_CHECK;

#endif
