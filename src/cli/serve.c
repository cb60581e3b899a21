/*
 * serve.c — `payonce serve`: runs the HTTP gateway until SIGINT or SIGTERM.
 * Refuses to start without a master key unless --insecure-dev, and then
 * says so loudly at start-up.
 */
#include "cli_int.h"

#include "../http/http.h"
#include "../service/service.h"

#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

/* The delivery worker's options (docs/webhooks.md); --webhook-senders 0
 * runs none in this process. */
static int webhook_opts(const struct opts *o, struct po_webhooks_cfg *w)
{
    int64_t senders = 0, per_ep = 0, per_tenant = 0, timeout = 0, base = 0, cap = 0, age = 0,
            alert = 0, poll = 0;
    int ret = int_opt(o, "webhook-senders", 0, 32, 8, &senders);
    if (!ret)
        ret = int_opt(o, "webhook-per-endpoint", 1, 32, 2, &per_ep);
    if (!ret)
        ret = int_opt(o, "webhook-per-tenant", 1, 32, 4, &per_tenant);
    if (!ret)
        ret = int_opt(o, "webhook-timeout-ms", 100, 60000, 10000, &timeout);
    if (!ret)
        ret = int_opt(o, "webhook-retry-base-ms", 10, INT64_C(3600000), 30000, &base);
    if (!ret)
        ret = int_opt(o, "webhook-retry-cap-ms", 10, INT64_C(86400000), INT64_C(21600000), &cap);
    if (!ret)
        ret = int_opt(o, "webhook-max-age-s", 1, INT64_C(30) * 86400, 3 * 86400, &age);
    if (!ret)
        ret = int_opt(o, "webhook-alert-after-s", 0, INT64_C(30) * 86400, 3600, &alert);
    if (!ret)
        ret = int_opt(o, "webhook-poll-ms", 10, 60000, 200, &poll);
    *w = (struct po_webhooks_cfg){.insecure_dev = flag(o, "insecure-dev"),
                                  .senders = (int)senders,
                                  .per_endpoint = (int)per_ep,
                                  .per_tenant = (int)per_tenant,
                                  .timeout_ms = (long)timeout,
                                  .retry_base_ms = base,
                                  .retry_cap_ms = cap,
                                  .max_age_s = age,
                                  .alert_after_s = alert,
                                  .poll_ms = (int)poll};
    return ret;
}

int cmd_serve(struct po_store *s, const struct opts *o)
{
    (void)s; /* the schema was checked; the server opens its own pool */
    unsigned char master[32];
    bool have = false;
    int64_t pool = 0, conns = 0, body = 0, timeout = 0, qint = 0, qage = 0, retention = 0,
            wait_ms = 0, refund_s = 0, threads = 0, workers = 0, committers = 0, batch_max = 0,
            batch_wait = 0, head_s = 0, body_s = 0, per_ip = 0, deadline_ms = 0;
    int ret = load_master_key(o, master, &have);
    if (!ret)
        ret = int_opt(o, "pool-size", 1, 64, 8, &pool);
    if (!ret)
        ret = int_opt(o, "max-connections", 1, 100000, 4096, &conns);
    if (!ret)
        ret = int_opt(o, "body-max", 1024, 64 * 1024, 64 * 1024, &body);
    if (!ret)
        ret = int_opt(o, "request-timeout", 1, 300, 10, &timeout);
    if (!ret)
        ret = int_opt(o, "header-timeout", 1, 300, 10, &head_s);
    if (!ret)
        ret = int_opt(o, "body-timeout", 1, 300, 10, &body_s);
    if (!ret) /* 0: no cap (behind a reverse proxy) */
        ret = int_opt(o, "max-connections-per-ip", 0, 100000, 256, &per_ip);
    if (!ret)
        ret = int_opt(o, "callback-deadline-ms", 500, 30000, 4000, &deadline_ms);
    if (!ret)
        ret = int_opt(o, "query-interval", 0, 86400, 60, &qint);
    if (!ret)
        ret = int_opt(o, "query-min-age", 0, 86400 * 30, 300, &qage);
    if (!ret)
        ret = int_opt(o, "idempotency-retention", 60, INT64_C(3650) * 86400,
                      PO_IDEM_RETENTION_DEFAULT_S, &retention);
    if (!ret)
        ret = int_opt(o, "idempotency-wait-ms", 0, 30000, 2000, &wait_ms);
    if (!ret)
        ret = int_opt(o, "refund-retry-interval", 0, 86400, 30, &refund_s);
    if (!ret)
        ret = int_opt(o, "threads", 0, 64, 0, &threads); /* 0: one a core */
    if (!ret)
        ret = int_opt(o, "workers", 1, PO_WORKERS_MAX, 64, &workers);
    if (!ret)
        ret = committer_opts(o, &committers, &batch_max, &batch_wait);
    struct po_webhooks_cfg wcfg;
    if (!ret)
        ret = webhook_opts(o, &wcfg);
    if (ret)
        return ret;
    if (!have && !flag(o, "insecure-dev")) {
        fprintf(stderr, "payonce: serve needs the master key that seals channel secrets:"
                        " --master-key-file FILE or PAYONCE_MASTER_KEY_FILE.\n"
                        "  For local development only: --insecure-dev\n");
        return EXIT_USAGE;
    }
    if (!have)
        po_log(PO_LOG_WARN, "INSECURE DEVELOPMENT MODE: no master key; channel secrets are read"
                            " unsealed. Never run this in production.");
    struct po_server_cfg cfg = {
        .listen = opt(o, "listen") ? opt(o, "listen") : "127.0.0.1:8080",
        .ops_listen = opt(o, "ops-listen"),
        .db_url = db_url(o),
        .master_key = have ? master : NULL,
        .pool_size = (int)pool,
        .max_connections = (int)conns,
        .body_max = (size_t)body,
        .request_timeout_s = (int)timeout,
        .header_timeout_s = (int)head_s,
        .body_timeout_s = (int)body_s,
        .max_connections_per_ip = per_ip ? (int)per_ip : -1,
        .callback_deadline_ms = (int)deadline_ms,
        .idem_wait_ms = wait_ms ? (int)wait_ms : -1,
        .threads = (int)threads,
        .workers = (int)workers,
        .committers = (int)committers,
        .batch_max = (int)batch_max,
        .batch_wait_us = batch_wait ? (int)batch_wait : -1,
        .webhooks = wcfg.senders ? &wcfg : NULL,
    };
    /* Block the stop signals before the server's threads exist, so that
     * only sigwait below receives them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct po_server *srv = NULL;
    char err[PO_ERRBUF_MAX] = "";
    curl_global_init(CURL_GLOBAL_DEFAULT);
    po_err rc = po_server_start(&cfg, &srv, err, sizeof err);
    if (rc) {
        po_secure_zero(master, sizeof master);
        curl_global_cleanup();
        return fail(rc, err);
    }
    struct po_jobs_cfg jcfg = {cfg.db_url, have ? master : NULL, qint, qage, refund_s, retention};
    struct po_jobs *jobs = NULL;
    if (po_jobs_start(&jcfg, &jobs))
        po_log(PO_LOG_ERROR, "background jobs could not start; serving without them");
    bool sqlite = strncmp(cfg.db_url, "sqlite:", 7) == 0;
    po_log(PO_LOG_INFO,
           "payonce serving on %s (port %u), store %s; committers %d, batch up to %d, wait %d us",
           cfg.listen, po_server_port(srv), sqlite ? "sqlite" : "postgres",
           sqlite ? 1 : (int)committers, (int)batch_max, (int)batch_wait);
    printf("listening on port %u\n", po_server_port(srv));
    if (cfg.ops_listen)
        printf("operations on port %u\n", po_server_ops_port(srv));
    fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    po_log(PO_LOG_INFO, "payonce stopping (signal %d)", sig);
    po_jobs_stop(jobs);
    po_server_stop(srv);
    po_secure_zero(master, sizeof master);
    curl_global_cleanup();
    return 0;
}
