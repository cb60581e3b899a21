/*
 * service.h — the business services that both `payonce serve` and the
 * command line call. http/ and cli/ hold no SQL of their own: every query
 * an operator or a tenant can run lives here once (or in engine/, ledger/,
 * recon/), so the CLI and the API can never disagree about a balance.
 *
 * The services live in rooms, one folder each, that call one another in
 * one direction only; from the bottom up (a room may include the rooms
 * under it and the modules below service/, never a room above it nor this
 * header; scripts/lint.sh checks it):
 *
 *   accounts/  who may act: channel accounts in the store and in memory,
 *              API keys, operators and their sign-in, the backup manifest
 *   payments/  money at the channels: the callback path, order payment,
 *              active query, refund submission, Idempotency-Key records,
 *              the callback traffic records (accounts/)
 *   webhooks/  tenant webhook endpoints and deliveries (accounts/)
 *   alerts/    the alerts workflow and the notifier (payments/, webhooks/)
 *   jobs/      serve's background rounds: the jobs thread, daily
 *              reconciliation, the ledger check (everything below)
 *   console/   the reads an operator or a tenant runs: views, console
 *              lists and pages, money reports (everything below)
 *   gateway/   serve's runtime assembled, and its option table (all)
 *
 * Each room's main header says what it owns; this one includes them all.
 *
 * Contracts follow the house style: po_err return, out-params written only
 * on success, detail in a caller-supplied buffer, nothing changed on error.
 */
#ifndef PO_SERVICE_H
#define PO_SERVICE_H

#include "accounts/account.h"
#include "accounts/apikey.h"
#include "accounts/operators.h"
#include "accounts/signin.h"
#include "accounts/manifest.h"
#include "payments/callback.h"
#include "payments/order_pay.h"
#include "payments/order_query.h"
#include "payments/refund_submit.h"
#include "payments/idem.h"
#include "payments/traffic.h"
#include "webhooks/webhook.h"
#include "alerts/alerts.h"
#include "alerts/alert_notify.h"
#include "jobs/jobs.h"
#include "jobs/recon_daily.h"
#include "jobs/ledger_check.h"
#include "console/views.h"
#include "console/console.h"
#include "console/report.h"
#include "gateway/gateway.h"
#include "gateway/options.h"

#endif
