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

#include "account.h"
#include "callback.h"
#include "views.h"
#include "alerts.h"
#include "alert_notify.h"
#include "apikey.h"
#include "idem.h"
#include "refund_submit.h"
#include "order_query.h"
#include "order_pay.h"
#include "recon_daily.h"
#include "signin.h"
#include "manifest.h"
#include "report.h"
#include "operators.h"
#include "traffic.h"
#include "console.h"
#include "jobs.h"
#include "ledger_check.h"
#include "webhook.h"
#include "gateway.h"
#include "options.h"

#endif
