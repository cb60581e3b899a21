/*
 * service.h — the business services that both `payonce serve` and the
 * command line call. http/ and cli/ hold no SQL of their own: every query
 * an operator or a tenant can run lives here once (or in engine/, ledger/,
 * recon/), so the CLI and the API can never disagree about a balance.
 *
 * Each concern has its own header (below); this one includes them all.
 *
 *   callback.c       one channel callback: account, adapter, engine -> decision
 *   account_store.c  channel accounts in the store: the one row reader
 *                    (fetch, unsealed, with its version), save
 *   account_cache.c  channel accounts in memory, with their version guard
 *   views.c          typed reads as JSON: orders, refunds, balances, alerts,
 *                    journal pages, API keys
 *   console_*.c      the operator's console: its views, searches, lists by
 *                    state, pages and audited actions (console.h)
 *   apikey.c         tenant API keys (only hashes stored)
 *   idem.c           Idempotency-Key records of the tenant API
 *   refund_submit.c  API refunds handed to the channel's refund API
 *   order_query.c    active order query at the channel (missed callbacks)
 *   jobs.c           serve's background jobs on their intervals
 *   options.c        serve's option table: every default and bound
 *   gateway.c        serve's runtime assembled in one place (pool, cache,
 *                    bulkheads, workers, committer, webhooks, jobs)
 *
 * Contracts follow the house style: po_err return, out-params written only
 * on success, detail in a caller-supplied buffer, nothing changed on error.
 */
#ifndef PO_SERVICE_H
#define PO_SERVICE_H

#include "accounts/account.h"
#include "payments/callback.h"
#include "console/views.h"
#include "alerts/alerts.h"
#include "alerts/alert_notify.h"
#include "accounts/apikey.h"
#include "payments/idem.h"
#include "payments/refund_submit.h"
#include "payments/order_query.h"
#include "payments/order_pay.h"
#include "jobs/recon_daily.h"
#include "accounts/signin.h"
#include "accounts/manifest.h"
#include "console/report.h"
#include "accounts/operators.h"
#include "payments/traffic.h"
#include "console/console.h"
#include "jobs/jobs.h"
#include "jobs/ledger_check.h"
#include "webhooks/webhook.h"
#include "gateway/gateway.h"
#include "gateway/options.h"

#endif
