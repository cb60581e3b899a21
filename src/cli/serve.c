/*
 * serve.c — `payonce serve`: runs the HTTP gateway until SIGINT or SIGTERM.
 * Refuses to start without a master key unless --insecure-dev, and then
 * says so loudly at start-up.
 */
#include "cli_int.h"

#include "../http/http.h"

#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static int int_opt(const struct opts *o, const char *name, int64_t min, int64_t max, int64_t dflt,
                   int64_t *out)
{
    const char *v = opt(o, name);
    *out = dflt;
    if (v && po_parse_i64(v, min, max, out)) {
        fprintf(stderr, "payonce: --%s must be an integer in %lld..%lld\n", name, (long long)min,
                (long long)max);
        return EXIT_USAGE;
    }
    return 0;
}

int cmd_serve(struct po_store *s, const struct opts *o)
{
    (void)s; /* the schema was checked; the server opens its own pool */
    unsigned char master[32];
    bool have = false;
    int64_t pool = 0, conns = 0, body = 0, timeout = 0;
    int ret = load_master_key(o, master, &have);
    if (!ret)
        ret = int_opt(o, "pool-size", 1, 64, 8, &pool);
    if (!ret)
        ret = int_opt(o, "max-connections", 1, 10000, 256, &conns);
    if (!ret)
        ret = int_opt(o, "body-max", 1024, 64 * 1024, 64 * 1024, &body);
    if (!ret)
        ret = int_opt(o, "request-timeout", 1, 300, 10, &timeout);
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
        .db_url = db_url(o),
        .master_key = have ? master : NULL,
        .pool_size = (int)pool,
        .max_connections = (int)conns,
        .body_max = (size_t)body,
        .request_timeout_s = (int)timeout,
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
    po_err rc = po_server_start(&cfg, &srv, err, sizeof err);
    OPENSSL_cleanse(master, sizeof master);
    if (rc)
        return fail(rc, err);
    po_log(PO_LOG_INFO, "payonce serving on %s (port %u), store %s", cfg.listen,
           po_server_port(srv), strncmp(cfg.db_url, "sqlite:", 7) == 0 ? "sqlite" : "postgres");
    printf("listening on port %u\n", po_server_port(srv));
    fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    po_log(PO_LOG_INFO, "payonce stopping (signal %d)", sig);
    po_server_stop(srv);
    return 0;
}
