/*
 * options.c — serve's option table (options.h) and the gateway's defaults
 * taken from it.
 */
#include "options.h"

#include <string.h>

/* The field of struct po_gateway_cfg an option fills: offset and size. */
#define GW(f) offsetof(struct po_gateway_cfg, f), sizeof(((struct po_gateway_cfg *)0)->f)
#define D 86400

const struct po_option po_options[] = {
    {"db", PO_OPT_STR, 0, 0, 0, "sqlite:./payonce.db", "URL",
     "the database: sqlite:PATH or postgresql://… (also PAYONCE_DB)", true, 0, 0},
    {"master-key-file", PO_OPT_STR, 0, 0, 0, "", "FILE",
     "the 32-byte master key that seals channel secrets (also PAYONCE_MASTER_KEY_FILE)", false, 0,
     0},
    {"listen", PO_OPT_STR, 0, 0, 0, "127.0.0.1:8080", "HOST:PORT", "address of the gateway", false,
     GW(listen)},
    {"ops-listen", PO_OPT_STR, 0, 0, 0, "", "HOST:PORT",
     "a second listener for /healthz, /readyz and /metrics only (then not on --listen)", false,
     GW(ops_listen)},
    {"console", PO_OPT_FLAG, 0, 1, 0, "", NULL,
     "serve the operator's console at /admin (operators: payonce operator add; on the"
     " --ops-listen listener when there is one)",
     false, 0, 0},
    {"console-origin", PO_OPT_STR, 0, 0, 0, "", "ORIGINS",
     "the origins the console answers, comma-separated http(s)://host[:port] (at most 8; default:"
     " its listener's own address, loopback names for a wildcard one); another Host is 421,"
     " another Origin 403",
     false, 0, 0},
    {"admin-token-file", PO_OPT_STR, 0, 0, 0, "", "FILE",
     "a file holding a bearer token for scripts reading /admin/api (16-128 characters; they"
     " act as \"dashboard\"); turns the console on",
     false, 0, 0},
    {"log-level", PO_OPT_STR, 0, 0, 0, "info", "LEVEL",
     "debug, info, warn or error; re-read from the config file on SIGHUP", false, 0, 0},
    {"insecure-dev", PO_OPT_FLAG, 0, 1, 0, "", NULL,
     "development only: no master key, webhooks to http:// on loopback", false, 0, 0},
    {"pool-size", PO_OPT_INT, 1, 64, 8, NULL, "N", "database connections of the gateway", false,
     GW(pool_size)},
    {"max-connections", PO_OPT_INT, 1, 100000, 4096, NULL, "N", "open HTTP connections at most",
     false, GW(max_connections)},
    {"max-connections-per-ip", PO_OPT_INT, 0, 100000, 256, NULL, "N",
     "connections per client address (0: no limit, behind a proxy)", false,
     GW(max_connections_per_ip)},
    {"body-max", PO_OPT_INT, 1024, 64 * 1024, 64 * 1024, NULL, "BYTES", "largest request body",
     false, GW(body_max)},
    {"request-timeout", PO_OPT_INT, 1, 300, 10, NULL, "S", "idle keep-alive connection timeout",
     false, GW(request_timeout_s)},
    {"header-timeout", PO_OPT_INT, 1, 300, 10, NULL, "S", "a request head must be complete within",
     false, GW(header_timeout_s)},
    {"body-timeout", PO_OPT_INT, 1, 300, 10, NULL, "S", "a request body must be complete within",
     false, GW(body_timeout_s)},
    {"callback-deadline-ms", PO_OPT_INT, 500, 30000, 4000, NULL, "MS",
     "a callback not committed by then is answered retry", false, GW(callback_deadline_ms)},
    {"threads", PO_OPT_INT, 0, 64, 0, NULL, "N", "HTTP event loops (0: one per core)", false,
     GW(threads)},
    {"workers", PO_OPT_INT, 1, PO_WORKERS_MAX, PO_WORKERS_DEFAULT, NULL, "N", "request workers",
     false, GW(workers)},
    {"api-per-tenant", PO_OPT_INT, 0, PO_WORKERS_MAX, 0, NULL, "N",
     "tenant API requests running per tenant while other tenants are active, the rest waiting"
     " in its lane (0: 4 per committer thread, at most half of --workers; alone: every worker)",
     false, GW(api_per_tenant)},
    {"committers", PO_OPT_INT, 1, PO_COMMITTER_WORKERS_MAX, 2, NULL, "N",
     "batch committers (SQLite: always 1)", false, GW(committers)},
    {"batch-max", PO_OPT_INT, 1, PO_BATCH_MAX, 128, NULL, "N", "callbacks per committed batch",
     false, GW(batch_max)},
    {"batch-wait-us", PO_OPT_INT, 0, PO_BATCH_WAIT_US_MAX, 200, NULL, "US",
     "how long a batch waits for company", false, GW(batch_wait_us)},
    {"known-events", PO_OPT_INT, 0, PO_KNOWN_MAX, 65536, NULL, "N",
     "remember about N events the committer committed, to answer their redeliveries duplicate"
     " without a batch (about 40 bytes each; 0: off)",
     false, GW(known_events)},
    {"query-interval", PO_OPT_INT, 0, D, 60, NULL, "S",
     "active order query, and closing expired orders, every S seconds (0: off)", false,
     GW(query_s)},
    {"query-min-age", PO_OPT_INT, 0, 30 * D, 300, NULL, "S",
     "query orders unpaid for at least S seconds", false, GW(query_min_age_s)},
    {"idempotency-retention", PO_OPT_INT, PO_IDEM_RETENTION_MIN_S, INT64_C(3650) * D,
     PO_IDEM_RETENTION_DEFAULT_S, NULL, "S", "keep stored API answers S seconds", false,
     GW(retention_s)},
    {"idempotency-wait-ms", PO_OPT_INT, 0, 30000, 2000, NULL, "MS",
     "a retry waits this long for its in-flight twin before 409", false, GW(idem_wait_ms)},
    {"recon-interval", PO_OPT_INT, 0, D, 300, NULL, "S",
     "the daily reconciliation looks for bills to download every S seconds (0: off)", false,
     GW(recon_s)},
    {"recon-at", PO_OPT_STR, 0, 0, 0, "", "HH:MM",
     "download a day's bill from this time the next day, in the channel's time zone (default:"
     " when the channel publishes it, WeChat Pay 10:00 Beijing time)",
     false, GW(recon_at)},
    {"recon-deadline", PO_OPT_STR, 0, 0, 0, "18:00", "HH:MM",
     "a day not reconciled by this time the next day (the channel's zone) raises a"
     " recon_overdue alert",
     false, GW(recon_deadline)},
    {"recon-retry", PO_OPT_INT, 60, D, 1800, NULL, "S",
     "a bill not published or not fetched yet is tried again after S seconds", false,
     GW(recon_retry_s)},
    {"console-history-days", PO_OPT_INT, 0, 3650, 30, NULL, "DAYS",
     "days of callback history the console keeps (the traffic table; 0: keep all)", false,
     GW(history_days)},
    {"callback-record-days", PO_OPT_INT, 0, 36500, 400, NULL, "DAYS",
     "days every verified callback's record (headers and body as received, hash-chained) is"
     " kept for disputes (0: keep all)",
     false, GW(record_days)},
    {"no-callback-record", PO_OPT_FLAG, 0, 1, 0, "", NULL,
     "do not record verified callbacks (measurements only: a dispute then has no evidence)", false,
     0, 0},
    {"recon-days", PO_OPT_INT, 1, 31, 3, NULL, "N",
     "days back the daily reconciliation catches up (after a stop)", false, GW(recon_days)},
    {"channel-timeout-ms", PO_OPT_INT, 100, 60000, 10000, NULL, "MS",
     "a call to a channel's API without an answer by then decides nothing (tried again later)",
     false, GW(channel_timeout_ms)},
    {"keys-interval", PO_OPT_INT, 0, 7 * D, 21600, NULL, "S",
     "download the channels' verification keys every S seconds (WeChat Pay's platform"
     " certificates: a successor is trusted before it signs; expired ones dropped; 0: off)",
     false, GW(keys_s)},
    {"ledger-check-interval", PO_OPT_INT, 0, 3600, 5, NULL, "S",
     "check every S seconds what the database recorded of ledger rows changed outside payonce"
     " (ledger_invariant alerts; 0: off)",
     false, GW(ledger_check_s)},
    {"ledger-sweep-rows", PO_OPT_INT, 0, 100000, 1000, NULL, "N",
     "the ledger check also re-checks N journals, orders, refunds and processed records a round,"
     " in key order, starting over at the end (0: only the changes and the new writes)",
     false, GW(ledger_sweep_rows)},
    {"ledger-new-rows", PO_OPT_INT, 0, 1000000, 20000, NULL, "N",
     "the ledger check re-checks up to N of each tenant's new payments and refunds a round, once"
     " they are 10 s old: their journals, processed records, orders and refunds (0: left to the"
     " sweep)",
     false, GW(ledger_new_rows)},
    {"ledger-balance-interval", PO_OPT_INT, 0, 7 * D, 300, NULL, "S",
     "the ledger check sums a tenant's postings against its cached balances at most every S"
     " seconds (0: never)",
     false, GW(ledger_balance_s)},
    {"statistics-interval", PO_OPT_INT, 0, 3600, 5, NULL, "S",
     "PostgreSQL: every S seconds, ANALYZE the tables of which a fifth of the rows changed since"
     " (autovacuum does it only after its nap; plans made for a small table stall a growing one;"
     " 0: off, left to autovacuum)",
     false, GW(stats_s)},
    {"refund-retry-interval", PO_OPT_INT, 0, D, 30, NULL, "S",
     "resubmit pending refunds every S seconds (0: off)", false, GW(refund_s)},
    {"alert-webhook-url", PO_OPT_STR, 0, 0, 0, "", "URL",
     "send alerts to the operator's receiver: an Alertmanager-compatible webhook (Alertmanager's"
     " own payload, version 4) or a Slack incoming webhook (https://, or http:// to loopback)",
     false, GW(notify.url)},
    {"alert-webhook-format", PO_OPT_STR, 0, 0, 0, "alertmanager", "FORMAT", "alertmanager or slack",
     false, GW(notify.format)},
    {"alert-email-to", PO_OPT_STR, 0, 0, 0, "", "ADDRESS",
     "also mail alerts to this address through the local MTA (alert-sendmail)", false,
     GW(notify.email_to)},
    {"alert-sendmail", PO_OPT_STR, 0, 0, 0, "/usr/sbin/sendmail", "PATH",
     "the local MTA's sendmail, run as `sendmail -t -oi`", false, GW(notify.sendmail)},
    {"alert-notify-interval", PO_OPT_INT, 1, 3600, 10, NULL, "S",
     "the notifier looks at the alerts every S seconds", false, GW(notify.interval_s)},
    {"alert-group-wait", PO_OPT_INT, 0, 3600, 30, NULL, "S",
     "a new group of alerts (a tenant's alerts of one reason) waits S seconds for company"
     " before it is sent",
     false, GW(notify.group_wait_s)},
    {"alert-repeat", PO_OPT_INT, 1, 7 * D, 14400, NULL, "S",
     "a group with open (not acknowledged) alerts is sent again every S seconds", false,
     GW(notify.repeat_s)},
    {"webhook-senders", PO_OPT_INT, 0, 32, 8, NULL, "N",
     "webhook delivery threads (0: no delivery)", false, GW(webhooks.senders)},
    {"webhook-per-endpoint", PO_OPT_INT, 1, 32, 2, NULL, "N", "deliveries in flight per endpoint",
     false, GW(webhooks.per_endpoint)},
    {"webhook-per-tenant", PO_OPT_INT, 1, 32, 4, NULL, "N",
     "deliveries in flight per tenant while other tenants have deliveries due (alone: every"
     " sender)",
     false, GW(webhooks.per_tenant)},
    {"webhook-pending-max", PO_OPT_INT, 100, INT64_C(10000000), PO_WEBHOOK_PENDING_DEFAULT, NULL,
     "N", "a tenant's pending deliveries at most; beyond, its new events wait in the outbox", false,
     GW(webhooks.pending_max)},
    {"webhook-allow-net", PO_OPT_STR, 0, 0, 0, "", "CIDRS",
     "private networks webhook endpoints may reach (on-premise receivers), e.g. 10.2.0.0/16;"
     " loopback, private, link-local and metadata addresses are refused otherwise",
     false, 0, 0},
    {"webhook-timeout-ms", PO_OPT_INT, 100, 60000, 10000, NULL, "MS",
     "a delivery without an answer by then failed", false, GW(webhooks.timeout_ms)},
    {"webhook-retry-base-ms", PO_OPT_INT, 10, INT64_C(3600000), 30000, NULL, "MS",
     "first retry delay, doubled each time", false, GW(webhooks.retry_base_ms)},
    {"webhook-retry-cap-ms", PO_OPT_INT, 10, INT64_C(86400000), INT64_C(21600000), NULL, "MS",
     "longest retry delay", false, GW(webhooks.retry_cap_ms)},
    {"webhook-max-age-s", PO_OPT_INT, 1, 30 * D, 3 * D, NULL, "S",
     "retry for this long, then dead letter", false, GW(webhooks.max_age_s)},
    {"webhook-alert-after-s", PO_OPT_INT, 0, 30 * D, 3600, NULL, "S",
     "alert when an endpoint has failed this long (0: off)", false, GW(webhooks.alert_after_s)},
    {"webhook-poll-ms", PO_OPT_INT, 10, 60000, 200, NULL, "MS",
     "how often the worker looks for new events", false, GW(webhooks.poll_ms)},
};

const int po_options_count = PO_NELEM(po_options);

const struct po_option *po_option_find(const char *name)
{
    for (int i = 0; i < po_options_count; i++)
        if (strcmp(po_options[i].name, name) == 0)
            return &po_options[i];
    return NULL;
}

/* Every integer field is an int or 64 bits wide (int64_t, long on LP64). */
_Static_assert(sizeof(long) == sizeof(int64_t), "long is 64 bits");

void po_option_set(struct po_gateway_cfg *cfg, const struct po_option *o, int64_t v)
{
    PO_ASSERT(o->type == PO_OPT_INT && (o->size == sizeof(int) || o->size == sizeof(int64_t)));
    unsigned char *at = (unsigned char *)cfg + o->off;
    if (o->size == sizeof(int)) {
        int x = (int)v;
        memcpy(at, &x, sizeof x);
    } else {
        memcpy(at, &v, sizeof v);
    }
}

int64_t po_option_get(const struct po_gateway_cfg *cfg, const struct po_option *o)
{
    PO_ASSERT(o->type == PO_OPT_INT && (o->size == sizeof(int) || o->size == sizeof(int64_t)));
    const unsigned char *at = (const unsigned char *)cfg + o->off;
    if (o->size == sizeof(int)) {
        int x;
        memcpy(&x, at, sizeof x);
        return x;
    }
    int64_t v;
    memcpy(&v, at, sizeof v);
    return v;
}

void po_option_set_str(struct po_gateway_cfg *cfg, const struct po_option *o, const char *v)
{
    PO_ASSERT(o->type == PO_OPT_STR && o->size == sizeof(const char *));
    memcpy((unsigned char *)cfg + o->off, &v, sizeof v);
}

void po_gateway_cfg_init(struct po_gateway_cfg *cfg)
{
    *cfg = (struct po_gateway_cfg){0};
    for (int i = 0; i < po_options_count; i++) {
        const struct po_option *o = &po_options[i];
        if (!o->size)
            continue;
        if (o->type == PO_OPT_INT) {
            po_option_set(cfg, o, o->dflt);
        } else {
            po_option_set_str(cfg, o, *o->sdflt ? o->sdflt : NULL);
        }
    }
}
