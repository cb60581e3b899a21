/*
 * cmd_serve.c — `payonce serve`: runs the HTTP gateway until SIGINT or SIGTERM.
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
        char why[600];
        po_file_why(path, rc, why, sizeof why);
        fprintf(stderr, "payonce: cannot read %s: %s\n", path, why);
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

/* An endpoint whose URL this gateway's egress policy refuses: one warn
 * line each, at most REFUSED_LINES_MAX, then their number (a tenant may
 * have 16 endpoints, and there may be many tenants). */
#define REFUSED_LINES_MAX 20
static void refused_endpoint(void *ctx, const char *tenant, const char *endpoint, const char *why)
{
    (void)ctx;
    po_log(PO_LOG_WARN,
           "tenant %s: webhook endpoint %s: this gateway refuses every delivery to it: %s (added"
           " under other settings: start serve with them -- insecure-dev, webhook-allow-net --"
           " or remove the endpoint)",
           tenant, endpoint, why);
}

/* What would otherwise fail every request later is said at start-up
 * (issue 13 item 3): a schema this build does not know, and channel
 * accounts the master key does not open; and what would fail every
 * delivery to an endpoint, its URL refused by this gateway's egress
 * policy (issue 45 item 2), is warned about, one line each. */
static int startup_checks(struct po_store *s, const unsigned char *master,
                          const struct po_egress_policy *egress)
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
    char err[PO_ERRBUF_SIZE] = "";
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
    int refused = 0;
    rc = po_webhook_check_urls(s, egress, REFUSED_LINES_MAX, refused_endpoint, NULL, &checked,
                               &refused, err, sizeof err);
    if (rc)
        return cli_fail(rc, "cannot read the webhook endpoints");
    if (refused > REFUSED_LINES_MAX)
        po_log(PO_LOG_WARN,
               "%d more webhook endpoints this gateway will refuse to deliver to (%d of %d in"
               " all; payonce config check lists them)",
               refused - REFUSED_LINES_MAX, refused, checked);
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
    struct po_gateway_cfg g;
    int ret = cli_load_master_key(o, master, &have);
    if (!ret)
        ret = cfg_gateway(o, &g);
    char eerr[PO_ERRBUF_SIZE] = "";
    if (!ret && po_egress_policy_parse(cli_opt(o, "webhook-allow-net"), cli_flag(o, "insecure-dev"),
                                       &g.egress, eerr, sizeof eerr)) {
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
    ret = startup_checks(s, have ? master : NULL, &g.egress);
    char token[160] = "";
    if (!ret && cli_opt(o, "admin-token-file"))
        ret = admin_token(cli_opt(o, "admin-token-file"), token, sizeof token);
    if (ret) {
        po_secure_zero(master, sizeof master);
        return ret;
    }
    g.db_url = cli_db_url(o);
    g.no_record = cli_flag(o, "no-callback-record");
    g.master_key = have ? master : NULL;
    /* Block the stop signals before the gateway's threads exist, so that
     * only sigwait below receives them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct po_gateway *gw = NULL;
    struct po_server *srv = NULL;
    struct po_server_cfg scfg = {.admin_token = token,
                                 .console = cli_flag(o, "console"),
                                 .console_origin = cli_opt(o, "console-origin")};
    char err[PO_ERRBUF_SIZE] = "";
    curl_global_init(CURL_GLOBAL_DEFAULT);
    po_err rc = po_gateway_open(&g, &gw, err, sizeof err);
    if (!rc)
        rc = po_server_start(gw, &scfg, &srv, err, sizeof err);
    po_secure_zero(master, sizeof master); /* the gateway keeps its own copy */
    if (rc) {
        po_gateway_close(gw);
        curl_global_cleanup();
        return cli_fail(rc, err);
    }
    const struct po_gateway_cfg *run = po_gateway_parts(gw)->cfg;
    /* what it runs with, named: the config file (the default one is read
     * when no --config is given), the database, the listeners */
    char db_shown[600], ops[160] = "";
    cli_redact_url(run->db_url, db_shown, sizeof db_shown);
    if (run->ops_listen)
        (void)snprintf(ops, sizeof ops, ", operations on %s (port %u)", run->ops_listen,
                       po_server_ops_port(srv));
    po_log(PO_LOG_INFO,
           "payonce serving on %s (port %u)%s; config %s; database %s (%s); committers %d,"
           " batch up to %d, wait %d us",
           run->listen, po_server_port(srv), ops,
           cli_config_path ? cli_config_path : "none (no --config, no " PO_CONFIG_DEFAULT ")",
           db_shown, strncmp(run->db_url, "sqlite:", 7) == 0 ? "sqlite" : "postgres",
           (int)run->committers, (int)run->batch_max, (int)run->batch_wait_us);
    printf("listening on port %u\n", po_server_port(srv));
    if (run->ops_listen)
        printf("operations on port %u\n", po_server_ops_port(srv));
    fflush(stdout);
    int sig = 0;
    while (sigwait(&stop, &sig) == 0 && sig == SIGHUP)
        reload();
    po_log(PO_LOG_INFO, "payonce stopping (signal %d)", sig);
    po_server_stop(srv);
    po_gateway_close(gw);
    po_secure_zero(token, sizeof token);
    curl_global_cleanup();
    return 0;
}
