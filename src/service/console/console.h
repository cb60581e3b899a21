/*
 * console.h — what the operator's console reads and does beyond views.h's
 * typed reads (issue 45 item 3: a console for triage that stays open):
 *
 *   console_lists.c  search by prefix or substring, the lists by state with
 *                    their counts, each paged by a cursor
 *   console_pages.c  one alert, one tenant event, one journal entry, the
 *                    webhook endpoints and an endpoint's dead letters, the
 *                    reconciliation days, the channels' verification keys
 *                    with their expiry; the two actions beyond alerts
 *                    (redrive, re-fetch) and their audit (console_action)
 *
 * Every read is bounded: a page holds at most PO_CONSOLE_PAGE_MAX items; a
 * list kept per tenant (the orders' indexes start with the tenant) looks
 * through at most PO_CONSOLE_TENANTS_WALK tenants a request, a substring
 * search reads at most PO_CONSOLE_SCAN_MAX rows a request, and a count
 * stops at PO_CONSOLE_COUNT_MAX; a page that stopped at one of these says
 * there is more and where to go on (its cursor). None adds an index the
 * callback path writes. Money is integer minor units with its currency;
 * times are the store's RFC 3339 text. Part of service.h.
 *
 * console/ owns the reads an operator or a tenant runs: views.h (shared by
 * the CLI and /v1), this header's console lists and pages, report.h's
 * money reports. It may call every room below it (accounts/, payments/,
 * webhooks/, alerts/, jobs/); only gateway/ is above it.
 */
#ifndef PO_SERVICE_CONSOLE_H
#define PO_SERVICE_CONSOLE_H

#include "../../channel/channel.h"
#include "../accounts/account.h"
#include "../../core/core.h"
#include "../../engine/engine.h"
#include "../../store/store.h"

#include <jansson.h>

/* A page of a console list: at most limit items after the position
 * `after` (the `next` of the page before; "" or NULL: from the start). A
 * cursor is opaque text of at most 4 space-separated parts, each an id or
 * a time; one that is not is PO_ERR_INVALID. */
struct po_console_page {
    const char *after;                 /* in */
    int limit;                         /* in: 1..PO_CONSOLE_PAGE_MAX */
    bool more;                         /* out: there is more after this page */
    char next[PO_CONSOLE_CURSOR_SIZE]; /* out: its cursor, when more */
};

/* ---- search (console_lists.c) ---- */

enum po_find_field {
    PO_FIND_ORDER,  /* an order's out_trade_no */
    PO_FIND_TXN,    /* an order's channel transaction id */
    PO_FIND_REFUND, /* a refund's out_refund_no */
};
/* "order", "txn", "refund"; false for anything else. */
bool po_find_field_parse(const char *name, enum po_find_field *out);

/*
 * Orders (fields order, txn) or refunds (refund) of one tenant (or every
 * tenant: NULL) whose field starts with q (contains: has q anywhere), q an
 * id (po_id_valid, PO_TXN_ID_MAX). *out: {items: [...], more, next,
 * scanned (contains: rows read)}.
 *
 * A prefix search is a range of the unique index that starts with the
 * tenant (pay_order's primary key, UNIQUE (tenant, channel, txn), refund's
 * primary key): q <= value < q's successor, each value then compared
 * byte for byte, so it costs what it finds, over every row. It assumes the
 * database sorts text by its bytes (SQLite; PostgreSQL with the C or
 * C.UTF-8 collation, as scripts/pg.sh makes it): a linguistic collation can
 * place an id outside the range, and the search then misses it.
 * A substring search cannot use an index: it reads the tenant's orders
 * newest first (pay_order_created) or its refunds in number order, at most
 * PO_CONSOLE_SCAN_MAX rows a request; a page that stopped there has more
 * (its cursor goes on where the reading stopped), so a match is never
 * out of reach, only some pages away.
 * Items: orders {tenant, out_trade_no, channel, channel_txn_id, amount,
 * currency, status, created_at}; refunds {tenant, out_refund_no,
 * out_trade_no, amount, currency, status, created_at}.
 */
po_err po_console_find(struct po_store *s, const char *tenant, enum po_find_field field,
                       bool contains, const char *q, struct po_console_page *pg,
                       json_t **out) PO_MUST_CHECK;

/* ---- lists by state (console_lists.c) ---- */

enum po_console_list {
    PO_LIST_ORDERS_PAYING,      /* orders PAYING, oldest first */
    PO_LIST_ORDERS_EXPIRED,     /* PAYING past their expiry (serve could not close them) */
    PO_LIST_REFUNDS_PROCESSING, /* refunds PROCESSING, oldest first */
    PO_LIST_DELIVERIES_FAILING, /* webhook deliveries pending after a failed attempt */
    PO_LIST_DEAD_LETTERS,       /* webhook deliveries dead, newest first */
    PO_LIST_COUNT
};
/* Its name in the API ("orders_paying", …) and back; false: no such list. */
const char *po_console_list_name(enum po_console_list l);
bool po_console_list_parse(const char *name, enum po_console_list *out);

/* (The failing deliveries are read among the pending ones — the due
 * index, webhook_delivery_due — of which a tenant has at most
 * webhook-pending-max before its fan-out waits.) */
/* Each list's count for one tenant (or all: NULL) at now (RFC 3339):
 * {name: {count, capped}} — capped when it reached PO_CONSOLE_COUNT_MAX
 * (or the tenants looked through) and the count is a lower bound. */
po_err po_console_counts(struct po_store *s, const char *tenant, const char *now,
                         json_t **out) PO_MUST_CHECK;
/* One page of a list: {list, items: [...], more, next}. Orders as
 * po_console_find's (with time_expire); refunds with their submission
 * state; deliveries {tenant, event_id, type, endpoint_id, object_id,
 * attempts, last_status, last_error, next_at, created_at, updated_at}. */
po_err po_console_list(struct po_store *s, const char *tenant, enum po_console_list l,
                       const char *now, struct po_console_page *pg, json_t **out) PO_MUST_CHECK;

/* A page of one endpoint's dead letters, newest first (the index
 * webhook_delivery_endpoint): {items: deliveries as above, more, next}. */
po_err po_console_dead_letters(struct po_store *s, const char *tenant, const char *endpoint_id,
                               struct po_console_page *pg, json_t **out) PO_MUST_CHECK;
/* Reconciliation days of one tenant (or all: NULL), newest day first
 * (recon_day_date), paged: {items: [{tenant, channel, bill_date, status,
 * state, why, attempts, last_fetch, next_try_at, overdue, file_sha256,
 * updated_at}], more, next}. status: done (reconciled, or no bill: no
 * trades), failed (its last fetch failed: why), pending (not final, not
 * published yet, or not fetched since the status was kept). status_filter
 * NULL or one of those. */
po_err po_console_recon_days(struct po_store *s, const char *tenant, const char *status_filter,
                             struct po_console_page *pg, json_t **out) PO_MUST_CHECK;

/* ---- pages (console_pages.c); each *out NULL when there is no such thing ---- */

/* One alert (id: its short id or key) with its audit trail: {tenant, id,
 * key, reason, out_trade_no, amount, currency, detail, source, event_type,
 * idem_key, created_at, state, state_by, state_at, state_note, actions:
 * [{seq, action, actor, note, at}]}. PO_ERR_CONFLICT: a short id two
 * alerts share. */
po_err po_console_alert(struct po_store *s, const char *tenant, const char *id,
                        json_t **out) PO_MUST_CHECK;
/* One tenant event: {tenant, event_id, type, object_id, created_at, body:
 * the envelope the endpoints receive, deliveries: [{endpoint_id, state,
 * attempts, last_status, last_error, next_at, updated_at}], attempts: as
 * po_webhook_attempts}. */
po_err po_console_event(struct po_store *s, const char *tenant, const char *event_id,
                        json_t **out) PO_MUST_CHECK;
/* One journal entry by its key: {tenant, key, kind, out_trade_no,
 * out_refund_no, currency, created_at, postings: [{line, account, amount,
 * currency}], processed: the processed record of the same key or null}. */
po_err po_console_entry(struct po_store *s, const char *tenant, const char *key,
                        json_t **out) PO_MUST_CHECK;
/* The live webhook endpoints of one tenant (or all: NULL), at most
 * PO_CONSOLE_PAGE_MAX, each {tenant, id, url, events, created_at,
 * failing_since, pending, dead, delivered_last} with its pending and dead
 * counts stopping at PO_CONSOLE_COUNT_MAX (…_capped). */
po_err po_console_endpoints(struct po_store *s, const char *tenant, json_t **out) PO_MUST_CHECK;
/* One endpoint (live or removed) and a page of its dead letters, newest
 * first: {endpoint: {…, removed_at}, dead_letters: {items, more, next},
 * actions: the console's redrives of it, newest first (at most 50)}. */
po_err po_console_endpoint(struct po_store *s, const char *tenant, const char *id,
                           struct po_console_page *pg, json_t **out) PO_MUST_CHECK;
/* po_console_recon_days with the console's re-fetches of the filter
 * (newest 50) in actions. */
po_err po_console_recon(struct po_store *s, const char *tenant, const char *status_filter,
                        struct po_console_page *pg, json_t **out) PO_MUST_CHECK;
/* The channels' verification keys of one tenant (or all: NULL), soonest
 * expiry first, bare keys (no expiry) last: [{tenant, channel, kind,
 * serial, not_after, days_left, expired}] judged at now_unix. kind:
 * "certificate" (WeChat Pay platform, Alipay), "public key" (no expiry),
 * "webhook secrets" (Stripe: how many, sealed; no expiry). */
po_err po_console_keys(struct po_store *s, const char *tenant, int64_t now_unix,
                       json_t **out) PO_MUST_CHECK;

/* ---- actions (console_pages.c), each audited in console_action ---- */

/* Who did it and why, as the audit keeps it. */
struct po_console_actor {
    const char *name; /* the operator's name, or "dashboard" (the admin token) */
    const char *note; /* 1..500 bytes, as written */
};
/*
 * The dead deliveries of one endpoint sent again (po_webhook_redrive, as
 * `payonce webhook redrive --endpoint` does): all of them, those created
 * at or after since (RFC 3339; NULL: all), or only event_id's (NULL: all).
 * The redrive and its audit row commit together. *out_count: how many.
 * PO_ERR_NOT_FOUND: no such live endpoint (a removed one's are not sent).
 */
po_err po_console_redrive(struct po_store *s, const char *tenant, const char *endpoint_id,
                          const char *event_id, const char *since,
                          const struct po_console_actor *who, int64_t *out_count, char *err,
                          size_t errcap) PO_MUST_CHECK;
/*
 * One day's bill fetched again from the channel and imported, as `payonce
 * recon fetch` does (po_recon_fetch_day with the account unsealed with
 * master, at now, retried after retry_s when not done), then audited with
 * what came of it (also when the fetch failed at the channel). *out:
 * {state, status, why, imported, rows, matched, missing, mismatched,
 * replayed} (the import's figures when it imported). A fetch refused
 * (PO_ERR_INVALID: the day has not begun, the channel has no bills, the
 * account cannot call it) or failed is audited too, err saying why; an
 * argument that is not one (no note, not a day) and an account that does
 * not exist (PO_ERR_NOT_FOUND) are refused before anything is done. The
 * import goes through the door d (serve's committer); d->s does the rest.
 * The account from accounts, serve's cache (NULL: unsealed with master).
 */
po_err po_console_refetch(const struct po_door *d, struct po_accounts *accounts,
                          const unsigned char *master, const char *tenant, const char *channel,
                          const char *date, int64_t now, int64_t retry_s,
                          const struct po_console_actor *who, json_t **out, char *err,
                          size_t errcap) PO_MUST_CHECK;

#endif
