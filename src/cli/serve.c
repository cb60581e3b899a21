/*
 * serve.c — `payonce serve`: runs the HTTP gateway until SIGINT or SIGTERM.
 * Refuses to start without a master key unless --insecure-dev, and then
 * says so loudly at start-up.
 */
#include "cli_int.h"

#include "../http/http.h"
#include "../recon/recon.h"

#include <curl/curl.h>
#include <pthread.h>
#include <time.h>

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

/* Background jobs, each on its own interval (0 = off):
 *   active query   each tenant's wechatpay orders still PAYING after
 *                  min_age are queried at the channel (po_recon_query)
 *   refund retry   API refunds whose submission to the channel got no
 *                  decisive answer are submitted again (idempotent there)
 *   reaper         stored Idempotency-Key responses past the retention */
struct jobs {
    const char *db_url;
    const unsigned char *master; /* NULL in insecure development mode */
    int64_t query_s, min_age_s, refund_s, retention_s, reap_s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
};

static void query_round(struct jobs *j, struct po_store *s)
{
    struct po_rows rows;
    char err[PO_ERRBUF_MAX] = "";
    if (po_store_exec(s, "SELECT tenant_id FROM channel_account WHERE channel = 'wechatpay'"
                         " ORDER BY tenant_id",
                      NULL, 0, &rows, NULL, err, sizeof err) == PO_OK) {
        for (int i = 0; i < rows.nrows; i++) {
            const char *tenant = po_rows_get(&rows, i, 0);
            struct po_channel_account acct;
            struct po_recon_query_report q;
            if (po_account_fetch(s, j->master, tenant, "wechatpay", &acct, err, sizeof err))
                continue;
            if (po_recon_query(s, tenant, &acct, j->min_age_s, 100, &q, err, sizeof err) == PO_OK &&
                q.queried)
                po_log(PO_LOG_INFO, "tenant %s: active query: %lld queried, %lld credited now,"
                                    " %lld already, %lld not paid, %lld failed",
                       tenant, (long long)q.queried, (long long)q.replayed, (long long)q.matched,
                       (long long)q.not_paid, (long long)q.failed);
            po_channel_account_free(&acct);
        }
        po_rows_free(&rows);
    }
}

static void run_jobs(struct jobs *j, int64_t now, int64_t *next_query, int64_t *next_refund,
                     int64_t *next_reap)
{
    struct po_store *s = NULL;
    char err[PO_ERRBUF_MAX] = "";
    if (po_store_open(j->db_url, &s, err, sizeof err)) {
        po_log(PO_LOG_WARN, "background jobs: %s", err);
        return;
    }
    if (j->query_s && now >= *next_query) {
        query_round(j, s);
        *next_query = now + j->query_s;
    }
    if (j->refund_s && now >= *next_refund) {
        int n = 0;
        if (po_refund_submit_pending(s, j->master, j->refund_s, 100, &n) == PO_OK && n)
            po_log(PO_LOG_INFO, "refund retry: %d refunds submitted to the channel", n);
        *next_refund = now + j->refund_s;
    }
    if (now >= *next_reap) {
        int64_t n = 0;
        if (po_idem_reap(s, j->retention_s, &n) == PO_OK && n)
            po_log(PO_LOG_INFO, "reaper: %lld stored Idempotency-Key responses older than %lld s"
                                " deleted", (long long)n, (long long)j->retention_s);
        *next_reap = now + j->reap_s;
    }
    po_store_close(s);
}

static void *jobs_main(void *arg)
{
    struct jobs *j = arg;
    int64_t start = (int64_t)time(NULL);
    int64_t next_query = start + j->query_s, next_refund = start + j->refund_s, next_reap = start;
    pthread_mutex_lock(&j->mu);
    while (!j->stop) {
        int64_t now = (int64_t)time(NULL), next = next_reap;
        if (j->query_s && next_query < next)
            next = next_query;
        if (j->refund_s && next_refund < next)
            next = next_refund;
        if (next > now) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += (time_t)(next - now);
            while (!j->stop && pthread_cond_timedwait(&j->cv, &j->mu, &until) == 0)
                ;
            continue;
        }
        pthread_mutex_unlock(&j->mu);
        run_jobs(j, now, &next_query, &next_refund, &next_reap);
        pthread_mutex_lock(&j->mu);
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

int cmd_serve(struct po_store *s, const struct opts *o)
{
    (void)s; /* the schema was checked; the server opens its own pool */
    unsigned char master[32];
    bool have = false;
    int64_t pool = 0, conns = 0, body = 0, timeout = 0, qint = 0, qage = 0, retention = 0,
            wait_ms = 0, refund_s = 0;
    int ret = load_master_key(o, master, &have);
    if (!ret)
        ret = int_opt(o, "pool-size", 1, 64, 8, &pool);
    if (!ret)
        ret = int_opt(o, "max-connections", 1, 10000, 256, &conns);
    if (!ret)
        ret = int_opt(o, "body-max", 1024, 64 * 1024, 64 * 1024, &body);
    if (!ret)
        ret = int_opt(o, "request-timeout", 1, 300, 10, &timeout);
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
        .idem_wait_ms = wait_ms ? (int)wait_ms : -1,
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
    struct jobs job = {cfg.db_url, have ? master : NULL, qint, qage, refund_s, retention,
                       retention < 3600 ? retention : 3600, PTHREAD_MUTEX_INITIALIZER,
                       PTHREAD_COND_INITIALIZER, false};
    pthread_t jth;
    bool jobs_running = pthread_create(&jth, NULL, jobs_main, &job) == 0;
    po_log(PO_LOG_INFO, "payonce serving on %s (port %u), store %s", cfg.listen,
           po_server_port(srv), strncmp(cfg.db_url, "sqlite:", 7) == 0 ? "sqlite" : "postgres");
    printf("listening on port %u\n", po_server_port(srv));
    fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    po_log(PO_LOG_INFO, "payonce stopping (signal %d)", sig);
    if (jobs_running) {
        pthread_mutex_lock(&job.mu);
        job.stop = true;
        pthread_cond_signal(&job.cv);
        pthread_mutex_unlock(&job.mu);
        pthread_join(jth, NULL);
    }
    po_server_stop(srv);
    po_secure_zero(master, sizeof master);
    curl_global_cleanup();
    return 0;
}
