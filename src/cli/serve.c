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
#include <stdlib.h>
#include <string.h>

/* The delivery worker's options (docs/webhooks.md); --webhook-senders 0
 * runs none in this process. */
static int webhook_opts(const struct opts *o, struct po_webhooks_cfg *w)
{
    int64_t senders = 0, per_ep = 0, per_tenant = 0, timeout = 0, base = 0, cap = 0, age = 0,
            alert = 0, poll = 0, pending = 0;
    int ret = cfg_int(o, "webhook-senders", &senders);
    if (!ret)
        ret = cfg_int(o, "webhook-pending-max", &pending);
    if (!ret)
        ret = cfg_int(o, "webhook-per-endpoint", &per_ep);
    if (!ret)
        ret = cfg_int(o, "webhook-per-tenant", &per_tenant);
    if (!ret)
        ret = cfg_int(o, "webhook-timeout-ms", &timeout);
    if (!ret)
        ret = cfg_int(o, "webhook-retry-base-ms", &base);
    if (!ret)
        ret = cfg_int(o, "webhook-retry-cap-ms", &cap);
    if (!ret)
        ret = cfg_int(o, "webhook-max-age-s", &age);
    if (!ret)
        ret = cfg_int(o, "webhook-alert-after-s", &alert);
    if (!ret)
        ret = cfg_int(o, "webhook-poll-ms", &poll);
    *w = (struct po_webhooks_cfg){.senders = (int)senders,
                                  .pending_max = pending,
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

/* SIGHUP: what can change without dropping a connection — the log level,
 * from the config file (docs/configuration.md). */
static void reload(void)
{
    if (!cli_config_path) {
        po_log(PO_LOG_INFO, "SIGHUP: no config file to re-read");
        return;
    }
    struct opts file;
    char *buf = NULL;
    if (cfg_load(cli_config_path, true, &file, &buf) == 0) {
        enum po_log_level lvl = PO_LOG_INFO;
        const char *v = cli_opt(&file, "log-level");
        if (v && !po_log_level_parse(v, &lvl))
            po_log(PO_LOG_ERROR, "SIGHUP: %s: log-level %s is not a level; kept", cli_config_path,
                   v);
        else {
            po_log_set_level(lvl);
            po_log(PO_LOG_WARN, "SIGHUP: %s re-read; log-level %s (other options need a restart)",
                   cli_config_path, v ? v : "info");
        }
    } else {
        po_log(PO_LOG_ERROR, "SIGHUP: %s could not be re-read; nothing changed", cli_config_path);
    }
    free(buf);
}

/* The dashboard's token: the file's first line, 16-128 printable ASCII. */
static int admin_token(const char *path, char *out, size_t cap)
{
    char *buf = NULL;
    size_t len = 0;
    po_err rc = po_file_read(path, 4096, &buf, &len);
    if (rc) {
        fprintf(stderr, "payonce: cannot read %s: %s\n", path, po_file_error(rc));
        return EXIT_FAIL;
    }
    buf[strcspn(buf, "\r\n")] = '\0';
    size_t n = strlen(buf);
    bool ok = n >= 16 && n <= 128 && n < cap;
    for (size_t i = 0; ok && i < n; i++)
        ok = buf[i] > ' ' && buf[i] < 0x7f;
    if (ok)
        memcpy(out, buf, n + 1);
    po_secure_zero(buf, len);
    free(buf);
    if (!ok) {
        fprintf(stderr, "payonce: %s: the admin token must be 16-128 printable characters\n", path);
        return EXIT_FAIL;
    }
    return 0;
}

static void broken_account(void *ctx, const char *tenant, const char *channel, const char *why)
{
    (void)ctx;
    fprintf(stderr, "payonce: tenant %s, channel %s: the account cannot be loaded: %s\n", tenant,
            channel, why);
}

/* What would otherwise fail every request later is said at start-up
 * (issue 13 item 3): a schema this build does not know, and channel
 * accounts the master key does not open. */
static int startup_checks(struct po_store *s, const unsigned char *master)
{
    int version = 0, latest = po_store_schema_latest();
    if (po_store_schema_version(s, &version))
        return cli_fail(PO_ERR_STORE, "cannot read the schema version");
    if (version < latest) {
        fprintf(stderr,
                "payonce: the database's schema is version %d; this payonce needs %d: run"
                " 'payonce migrate' first\n",
                version, latest);
        return EXIT_FAIL;
    }
    if (version > latest) {
        fprintf(stderr,
                "payonce: the database's schema is version %d, newer than this payonce knows"
                " (%d): run the payonce that migrated it\n",
                version, latest);
        return EXIT_FAIL;
    }
    int checked = 0, broken = 0;
    char err[PO_ERRBUF_MAX] = "";
    po_err rc = po_webhook_check_secrets(s, master, &checked, &broken, err, sizeof err);
    if (rc)
        return cli_fail(rc, "cannot read the webhook endpoints");
    if (broken) {
        fprintf(stderr,
                "payonce: %s; %d of %d webhook endpoints' secrets cannot be opened: their"
                " deliveries would stall. Is this the master key that sealed them"
                " (--master-key-file, PAYONCE_MASTER_KEY_FILE)? Not starting.\n",
                err, broken, checked);
        return EXIT_FAIL;
    }
    checked = broken = 0;
    rc = po_account_check_all(s, master, broken_account, NULL, &checked, &broken);
    if (rc)
        return cli_fail(rc, "cannot read the channel accounts");
    if (broken) {
        fprintf(stderr,
                "payonce: %d of %d channel accounts cannot be loaded (above); every callback to"
                " them would be refused. Is this the master key that sealed them"
                " (--master-key-file, PAYONCE_MASTER_KEY_FILE)? Not starting.\n",
                broken, checked);
        return EXIT_FAIL;
    }
    return 0;
}

int cmd_serve(struct po_store *s, const struct opts *o)
{
    unsigned char master[32];
    bool have = false;
    int64_t pool = 0, conns = 0, body = 0, timeout = 0, qint = 0, qage = 0, retention = 0,
            wait_ms = 0, refund_s = 0, threads = 0, workers = 0, committers = 0, batch_max = 0,
            batch_wait = 0, head_s = 0, body_s = 0, per_ip = 0, deadline_ms = 0, api_share = 0;
    int ret = cli_load_master_key(o, master, &have);
    if (!ret)
        ret = cfg_int(o, "pool-size", &pool);
    if (!ret)
        ret = cfg_int(o, "max-connections", &conns);
    if (!ret)
        ret = cfg_int(o, "body-max", &body);
    if (!ret)
        ret = cfg_int(o, "request-timeout", &timeout);
    if (!ret)
        ret = cfg_int(o, "header-timeout", &head_s);
    if (!ret)
        ret = cfg_int(o, "body-timeout", &body_s);
    if (!ret) /* 0: no cap (behind a reverse proxy) */
        ret = cfg_int(o, "max-connections-per-ip", &per_ip);
    if (!ret)
        ret = cfg_int(o, "callback-deadline-ms", &deadline_ms);
    if (!ret)
        ret = cfg_int(o, "query-interval", &qint);
    if (!ret)
        ret = cfg_int(o, "query-min-age", &qage);
    if (!ret)
        ret = cfg_int(o, "idempotency-retention", &retention);
    if (!ret)
        ret = cfg_int(o, "idempotency-wait-ms", &wait_ms);
    if (!ret)
        ret = cfg_int(o, "refund-retry-interval", &refund_s);
    if (!ret)
        ret = cfg_int(o, "threads", &threads); /* 0: one a core */
    if (!ret)
        ret = cfg_int(o, "workers", &workers);
    if (!ret)
        ret = cfg_int(o, "api-per-tenant", &api_share);
    if (!ret)
        ret = cli_committer_opts(o, &committers, &batch_max, &batch_wait);
    struct po_webhooks_cfg wcfg;
    if (!ret)
        ret = webhook_opts(o, &wcfg);
    struct po_egress_policy egress;
    char eerr[PO_ERRBUF_MAX] = "";
    if (!ret && po_egress_policy_parse(cli_opt(o, "webhook-allow-net"), cli_flag(o, "insecure-dev"),
                                       &egress, eerr, sizeof eerr)) {
        fprintf(stderr, "payonce: webhook-allow-net: %s\n", eerr);
        ret = EXIT_USAGE;
    }
    if (ret)
        return ret;
    if (!have && !cli_flag(o, "insecure-dev")) {
        fprintf(stderr, "payonce: serve needs the master key that seals channel secrets:"
                        " --master-key-file FILE or PAYONCE_MASTER_KEY_FILE.\n"
                        "  For local development only: --insecure-dev\n");
        return EXIT_USAGE;
    }
    if (!have)
        po_log(PO_LOG_WARN, "INSECURE DEVELOPMENT MODE: no master key; channel secrets are read"
                            " unsealed. Never run this in production.");
    ret = startup_checks(s, have ? master : NULL);
    char token[160] = "";
    if (!ret && cli_opt(o, "admin-token-file"))
        ret = admin_token(cli_opt(o, "admin-token-file"), token, sizeof token);
    if (ret) {
        po_secure_zero(master, sizeof master);
        return ret;
    }
    struct po_server_cfg cfg = {
        .listen = cli_opt(o, "listen") ? cli_opt(o, "listen") : "127.0.0.1:8080",
        .ops_listen = cli_opt(o, "ops-listen"),
        .admin_token = token,
        .db_url = cli_db_url(o),
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
        .api_per_tenant = (int)api_share,
        .committers = (int)committers,
        .batch_max = (int)batch_max,
        .batch_wait_us = batch_wait ? (int)batch_wait : -1,
        .webhooks = wcfg.senders ? &wcfg : NULL,
        .egress = &egress,
    };
    /* Block the stop signals before the server's threads exist, so that
     * only sigwait below receives them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct po_server *srv = NULL;
    char err[PO_ERRBUF_MAX] = "";
    curl_global_init(CURL_GLOBAL_DEFAULT);
    po_err rc = po_server_start(&cfg, &srv, err, sizeof err);
    if (rc) {
        po_secure_zero(master, sizeof master);
        curl_global_cleanup();
        return cli_fail(rc, err);
    }
    struct po_jobs_cfg jcfg = {.db_url = cfg.db_url,
                               .master = have ? master : NULL,
                               .query_s = qint,
                               .query_min_age_s = qage,
                               .refund_s = refund_s,
                               .retention_s = retention,
                               .committer = po_server_committer(srv)};
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
    while (sigwait(&stop, &sig) == 0 && sig == SIGHUP)
        reload();
    po_log(PO_LOG_INFO, "payonce stopping (signal %d)", sig);
    po_jobs_stop(jobs);
    po_server_stop(srv);
    po_secure_zero(master, sizeof master);
    po_secure_zero(token, sizeof token);
    curl_global_cleanup();
    return 0;
}
