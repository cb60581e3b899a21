/*
 * gateway.h — everything `payonce serve` runs, assembled in one place
 * (gateway.c): the store pool, the channel-account cache and its sweep,
 * the per-tenant bulkheads, the worker pool, the committer, the webhook
 * delivery worker and the background jobs. http/ gets a po_gateway and
 * only serves HTTP; the command line fills a po_gateway_cfg from the
 * option table (options.c) and opens one.
 *
 * Every value comes from the one option table: po_gateway_cfg_init sets
 * each field to the table's default, the caller overrides what it was
 * given, and po_gateway_open checks every field against the table's bounds
 * (the error names the option). No other file holds a default of its own.
 * Part of service.h (which includes every service header).
 *
 * gateway/ is the top room of service/: serve's runtime (gateway.c) and
 * its option table (options.h). It may call every other room; none calls
 * it.
 */
#ifndef PO_SERVICE_GATEWAY_H
#define PO_SERVICE_GATEWAY_H

#include "../../channel/channel.h"
#include "../../core/core.h"
#include "../../engine/engine.h"
#include "../../runtime/runtime.h"
#include "../alerts/alert_notify.h"
#include "../payments/callback.h"
#include "../payments/idem.h"
#include "../webhooks/webhook.h"

struct po_gateway_cfg {
    const char *db_url;
    const unsigned char *master_key; /* NULL only in insecure development mode */
    /* The HTTP listeners (read by http/): the gateway's address and the
     * operations listener's (NULL: none; /metrics then on listen). */
    const char *listen, *ops_listen;
    int64_t max_connections;        /* open HTTP connections */
    int64_t max_connections_per_ip; /* 0: no cap (behind a reverse proxy) */
    int64_t body_max;               /* request body bytes */
    int64_t request_timeout_s;      /* idle keep-alive connection */
    /* Absolute deadlines (the guard): a request's head within
     * header_timeout_s of the connection's opening or of its previous
     * answer, its body within body_timeout_s of its head. */
    int64_t header_timeout_s, body_timeout_s;
    int64_t threads; /* HTTP event loops (0: one a core) */
    /* The runtime. */
    int64_t pool_size; /* store connections for reads */
    int64_t workers;   /* threads for blocking work */
    /* Tenant API requests running per tenant while another tenant is
     * active (0: PO_API_SHARE_PER_COMMITTER per committer thread, at most
     * half of workers); a tenant alone may use every worker. */
    int64_t api_per_tenant;
    /* The committer (docs/internals.md, "One callback, from socket to
     * ack"): its threads (SQLite: always 1), the largest batch, how long a
     * busy committer lets a batch fill (0: never waits). */
    int64_t committers, batch_max, batch_wait_us;
    /* The committer's table of committed events (0: none): redeliveries
     * of them are answered duplicate without a batch. */
    int64_t known_events;
    /* A callback's budget from its arrival: one the database has not
     * committed by then is answered FAIL (5xx, deadline_exceeded). */
    int64_t callback_deadline_ms;
    /* How long a tenant API request whose Idempotency-Key is in flight
     * waits for the first one's answer before 409 (0: does not wait). */
    int64_t idem_wait_ms;
    /* The background jobs (jobs.h): intervals (0: off) and retention. */
    int64_t query_s, query_min_age_s, refund_s, retention_s;
    /* The daily reconciliation (recon_daily.h): how often it looks (0:
     * off), when a day is fetched and its deadline ("HH:MM" in the
     * channel's zone, the day after; recon_at NULL: when the channel
     * publishes), its retry and how many past days it looks at. */
    int64_t recon_s, recon_retry_s, recon_days;
    int64_t history_days; /* the console's traffic history kept (0: all) */
    /* The callback record (audit.c): kept this many days (0: all); not
     * written at all with no_record (measurements only). */
    int64_t record_days;
    bool no_record;
    /* How often the channels' verification keys are refreshed (WeChat Pay's
     * platform certificates; 0: off). */
    int64_t keys_s;
    /* The continuous ledger check (ledger_check.c) every S seconds (0: off). */
    int64_t ledger_check_s;
    /* its sweep: rows of each slice a round, a tenant's balances every S */
    int64_t ledger_sweep_rows, ledger_new_rows, ledger_balance_s;
    /* The planner's statistics refreshed every S seconds (0: off). */
    int64_t stats_s;
    /* Every channel API call's budget (po_api_set_timeout_ms). */
    int64_t channel_timeout_ms;
    const char *recon_at, *recon_deadline;
    /* Alerts to the operator's receivers (alert_notify.h; off unless a
     * webhook URL or a mail address is set). */
    struct po_alert_notify_cfg notify;
    bool no_jobs; /* tests and tools: no background jobs at all */
    /* The webhook delivery worker (webhook.h; senders 0: none). Its
     * db_url, master and egress are the gateway's. */
    struct po_webhooks_cfg webhooks;
    /* Where webhook endpoints may point (channel.h, egress.c): checked
     * when the API registers one and at every delivery. Zeroed: public
     * addresses only. */
    struct po_egress_policy egress;
};

/* Every field at the option table's default: no store, no key, no jobs
 * turned off, public egress only. */
void po_gateway_cfg_init(struct po_gateway_cfg *cfg);

/* What http/ uses of an open gateway (valid until po_gateway_close). */
struct po_gateway_parts {
    const struct po_gateway_cfg *cfg; /* the values it runs with */
    struct po_store_pool *pool;       /* reads on worker threads */
    struct po_callback_ctx cb;        /* accounts, committer, workers, deadline */
    struct po_idem_local *idem_local;
    /* Per-tenant shares: tenant API requests on the workers, refund
     * submissions with a channel's API, callbacks in flight. */
    struct po_bulkhead *api_bulkhead, *outbound_bulkhead, *callback_bulkhead;
    struct po_webhooks *webhooks; /* NULL: no delivery worker */
};

struct po_gateway;
/* Checks cfg against the option table's bounds and starts every part;
 * on error nothing runs and err names the option or the part. */
po_err po_gateway_open(const struct po_gateway_cfg *cfg, struct po_gateway **out, char *err,
                       size_t errcap) PO_MUST_CHECK;
const struct po_gateway_parts *po_gateway_parts(const struct po_gateway *g);
/* Lets every part finish what it holds and stop taking work: the jobs and
 * the webhook worker stop between items, queued worker jobs run (they may
 * hand work to the committer), then the committer answers everything it
 * holds. The HTTP server calls it after it stopped accepting requests and
 * before it closes connections, so every answer still goes out. Once. */
void po_gateway_drain(struct po_gateway *g);
/* Drains (unless done) and frees. NULL is fine. */
void po_gateway_close(struct po_gateway *g);

#endif
