/*
 * simenv.c — see simenv.h.
 */
#include "simenv.h"

#include "testutil.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void remember(struct t_gateway *gw, pid_t pid);
static void forget(struct t_gateway *gw, pid_t pid);

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "simenv: %s: %s\n", what, detail);
    exit(1);
}

void t_env_create(const char *name, char *dir, size_t cap, unsigned char master[32],
                  struct po_sim_identity *id)
{
    snprintf(dir, cap, "%s/payonce-%s-XXXXXX", po_tmp_dir(), name);
    if (!mkdtemp(dir))
        die("mkdtemp", dir);
    char sd[300], mk[300], err[PO_ERRBUF_SIZE] = "";
    snprintf(sd, sizeof sd, "%s/sim", dir);
    if (po_sim_identity_generate(sd, "cert", err, sizeof err))
        die("sim keys", err);
    if (po_random(master, 32))
        die("random", "master key");
    snprintf(mk, sizeof mk, "%s/master.key", dir);
    FILE *f = fopen(mk, "wb");
    if (!f || fchmod(fileno(f), 0600) || fwrite(master, 1, 32, f) != 32)
        die("write", mk);
    fclose(f);
    if (po_sim_identity_load(sd, id, err, sizeof err))
        die("sim identity", err);
}

/* whole: all of stdout into out (else its first line) */
static int cli_run(const char *dir, const char *bin, const char *url, char *out, size_t cap,
                   const char *args, bool whole)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd %s && PAYONCE_MASTER_KEY_FILE=%s/master.key %s %s --db '%s' 2>>setup.log", dir,
             dir, bin, args, url);
    FILE *p = popen(cmd, "r");
    if (!p)
        die("popen", args);
    char line[4096] = "";
    size_t n = 0;
    for (int c; (c = fgetc(p)) != EOF;)
        if (n + 1 < sizeof line && (whole || !memchr(line, '\n', n)))
            line[n++] = (char)c;
    line[n] = '\0';
    int st = pclose(p);
    if (!whole)
        line[strcspn(line, "\n")] = '\0';
    if (out)
        snprintf(out, cap, "%s", line);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* must: abort the test when it does not exit 0 */
static int cli_runv(const char *dir, const char *bin, const char *url, char *out, size_t cap,
                    bool whole, bool must, const char *fmt, va_list ap)
{
    char args[2048];
    vsnprintf(args, sizeof args, fmt, ap);
    int st = cli_run(dir, bin, url, out, cap, args, whole);
    if (st != 0 && must)
        die("payonce failed", args);
    return st;
}

void t_cli(const char *dir, const char *bin, const char *url, char *out, size_t cap,
           const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)cli_runv(dir, bin, url, out, cap, false, true, fmt, ap);
    va_end(ap);
}

int t_cli_status(const char *dir, const char *bin, const char *url, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int st = cli_runv(dir, bin, url, NULL, 0, false, false, fmt, ap);
    va_end(ap);
    return st;
}

int t_cli_all(const char *dir, const char *bin, const char *url, char *out, size_t cap,
              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int st = cli_runv(dir, bin, url, out, cap, true, false, fmt, ap);
    va_end(ap);
    return st;
}

size_t t_body_write(char *d, size_t sz, size_t n, void *ctx)
{
    struct t_body *b = ctx;
    size_t take = sz * n;
    if (b->len + take >= b->cap)
        take = b->cap - 1 - b->len;
    memcpy(b->data + b->len, d, take);
    b->len += take;
    b->data[b->len] = '\0';
    return sz * n;
}

long t_http(const struct t_http_req *q, char *out, size_t cap, size_t *len)
{
    struct curl_slist *h = NULL;
    for (const char *const *line = q->headers; line && *line; line++)
        h = curl_slist_append(h, *line);
    struct t_body b = {out, cap, 0};
    out[0] = '\0';
    CURL *c = curl_easy_init();
    if (!c) {
        fprintf(stderr, "t_http: curl_easy_init failed\n");
        exit(1);
    }
    curl_easy_setopt(c, CURLOPT_URL, q->url);
    if (h)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (q->method)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, q->method);
    if (q->body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, q->body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE,
                         (long)(q->body_len ? q->body_len : strlen(q->body)));
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, t_body_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    if (q->on_header) {
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, q->on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, q->header_ctx);
    }
    curl_easy_setopt(c, CURLOPT_TIMEOUT, q->timeout_s ? q->timeout_s : 30L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (q->fresh_connection)
        curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (len)
        *len = b.len;
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return status;
}

void t_sim_lines(const struct po_sim_request *r, struct t_sim_lines *out)
{
    int n = 0;
    (void)snprintf(out->line[n], sizeof out->line[n], "Content-Type: %s",
                   r->content_type ? r->content_type : "application/json");
    out->h[n] = out->line[n];
    n++;
    for (int i = 0; i < r->nheaders && i < PO_SIM_HEADERS_MAX; i++, n++) {
        (void)snprintf(out->line[n], sizeof out->line[n], "%s: %s", r->name[i], r->value[i]);
        out->h[n] = out->line[n];
    }
    out->h[n++] = "Expect:";
    out->h[n] = NULL;
}

long t_http_sim(unsigned port, const char *path, const struct po_sim_request *r, char *out,
                size_t cap)
{
    char u[512];
    (void)snprintf(u, sizeof u, "http://127.0.0.1:%u%s", port, path);
    struct t_sim_lines l;
    t_sim_lines(r, &l);
    struct t_http_req q = {.url = u, .headers = l.h, .body = r->body, .body_len = r->body_len};
    return t_http(&q, out, cap, NULL);
}

pid_t t_serve(const char *dir, const char *bin, const char *url, const char *const *extra,
              unsigned *port)
{
    int fd[2];
    if (pipe(fd))
        die("pipe", "");
    char mk[300], log[300];
    snprintf(mk, sizeof mk, "%s/master.key", dir);
    snprintf(log, sizeof log, "%s/child.log", dir);
    const char *argv[32] = {bin,
                            "serve",
                            "--db",
                            url,
                            "--listen",
                            "127.0.0.1:0",
                            "--master-key-file",
                            mk,
                            "--query-interval",
                            "0",
                            "--refund-retry-interval",
                            "0",
                            "--recon-interval",
                            "0",
                            "--keys-interval",
                            "0"};
    int n = 16;
    for (int i = 0; extra && extra[i] && n < 31; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        /* Never outlive the test, even when it dies on a failed check. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        dup2(fd[1], 1);
        FILE *e = freopen(log, "w", stderr);
        (void)e;
        close(fd[0]);
        char *args[32];
        memcpy(args, argv, sizeof args); /* execv's type; it does not write them */
        execv(bin, args);
        _exit(127);
    }
    close(fd[1]);
    FILE *f = fdopen(fd[0], "r");
    char line[128] = "";
    if (!f || !fgets(line, sizeof line, f) || sscanf(line, "listening on port %u", port) != 1)
        die("payonce serve child did not start; see", log);
    fclose(f);
    remember(NULL, pid);
    return pid;
}

void t_serve_stop(pid_t pid)
{
    forget(NULL, pid);
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "payonce serve child exit %d", status);
}

int t_env_finish(const char *dir, const char *url, const char *name)
{
    struct po_store *s = t_open(url);
    T_CHECK(t_verify(s) == 0, "ledger invariants");
    po_store_close(s);
    t_db_drop(url);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (t_failures == 0 && system(cmd)) { /* lint-ok */
    }
    printf("# %s: %d checks\n%d passed, %d failed\n", name, t_passes + t_failures, t_passes,
           t_failures);
    return t_failures ? 1 : 0;
}

char *t_sim_http(const char *path, const struct po_sim_request *r, size_t *len)
{
    char head[8192];
    int n = snprintf(head, sizeof head,
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\n"
                     "Content-Length: %zu\r\n",
                     path, r->content_type ? r->content_type : "application/json", r->body_len);
    for (int h = 0; h < r->nheaders && n > 0 && (size_t)n < sizeof head; h++)
        n += snprintf(head + n, sizeof head - (size_t)n, "%s: %s\r\n", r->name[h], r->value[h]);
    if (n > 0 && (size_t)n < sizeof head)
        n += snprintf(head + n, sizeof head - (size_t)n, "\r\n");
    if (n <= 0 || (size_t)n >= sizeof head)
        die("request head too long", path);
    char *out = malloc((size_t)n + r->body_len + 1);
    if (!out)
        die("out of memory", path);
    memcpy(out, head, (size_t)n);
    memcpy(out + n, r->body, r->body_len);
    *len = (size_t)n + r->body_len;
    out[*len] = '\0';
    return out;
}

unsigned t_sim_post(unsigned port, const char *path, const struct po_sim_request *r)
{
    size_t len = 0;
    char *req = t_sim_http(path, r, &len);
    int fd = t_dial(port);
    unsigned st = t_exchange(fd, req, len, NULL, 0);
    close(fd);
    free(req);
    return st;
}

void t_sim_file(const char *dir, const char *name, const char *content)
{
    char path[512];
    (void)snprintf(path, sizeof path, "%s/sim/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(content, f) < 0 || fclose(f))
        die("simulator", "cannot write a simulator switch");
}

void t_sim_faults(const char *dir, const struct po_sim_identity *id, const char *lines)
{
    char out[4096];
    size_t n = 0;
    out[0] = '\0';
    for (const char *p = lines; *p;) {
        const char *nl = strchr(p, '\n'), *end = nl ? nl + 1 : p + strlen(p);
        const char *path = strchr(p, ' ');
        path = path ? path + 1 : "";
        const char *who = strncmp(path, "/v3/", 4) == 0           ? id->mchid
                          : strncmp(path, "/v1/", 4) == 0         ? id->stripe_api_key
                          : strncmp(path, "/gateway.do", 11) == 0 ? id->app_id
                                                                  : NULL;
        int w = snprintf(out + n, sizeof out - n, "%s%s%s%.*s", who ? "@" : "", who ? who : "",
                         who ? " " : "", (int)(end - p), p);
        if (w < 0 || (size_t)w >= sizeof out - n)
            die("simulator", "faults longer than 4 KiB");
        n += (size_t)w;
        p = end;
    }
    t_sim_file(dir, "faults", out);
}

unsigned t_sim_pay(unsigned port, const struct po_sim_identity *id, const char *tenant,
                   const char *no, const char *txn, int64_t amount)
{
    struct po_sim_payment p = {"wechatpay", no, txn, amount, "CNY"};
    struct po_sim_request r;
    memset(&r, 0, sizeof r);
    if (po_sim_payment_request(id, &p, (int64_t)time(NULL), &r))
        die("simulator", "cannot build a payment callback");
    char path[128];
    (void)snprintf(path, sizeof path, "/notify/wechatpay/%s", tenant);
    unsigned st = t_sim_post(port, path, &r);
    po_sim_request_free(&r);
    return st;
}

void t_gateway_cfg(struct po_gateway_cfg *g, const char *url, const unsigned char *master)
{
    po_gateway_cfg_init(g);
    g->listen = "127.0.0.1:0";
    g->db_url = url;
    g->master_key = master;
    g->no_jobs = true;
    g->webhooks.senders = 0;
}

/* What the running case started (t_gateway_start, t_serve) and has not
 * stopped: a check that ended the case left it, and after the case's
 * teardown it is stopped (t_after_each_case), not left serving the next
 * case from the same database. What a program starts outside its cases is
 * its own to stop. */
#define LEFT_MAX 64
struct left {
    int serial;
    struct t_gateway *gw;
    pid_t pid;
};
static struct {
    pthread_mutex_t mu;
    struct left e[LEFT_MAX];
    int n;
} L = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void gateway_close(struct t_gateway *t)
{
    po_server_stop(t->srv);
    po_gateway_close(t->gw);
    free(t);
}

static void stop_left(int serial)
{
    for (;;) {
        struct t_gateway *gw = NULL;
        pid_t pid = 0;
        pthread_mutex_lock(&L.mu);
        for (int i = 0; i < L.n && !gw && !pid; i++)
            if (L.e[i].serial == serial) {
                gw = L.e[i].gw;
                pid = L.e[i].pid;
                L.e[i] = L.e[--L.n];
            }
        pthread_mutex_unlock(&L.mu);
        if (!gw && !pid)
            return;
        if (gw) {
            fprintf(stderr, "simenv: stopping a gateway the case left running\n");
            gateway_close(gw);
        }
        /* Still our unreaped child (so its pid is not anyone else's):
         * killed and reaped. Already reaped by the case: nothing. */
        int status = 0;
        if (pid && waitpid(pid, &status, WNOHANG) == 0) {
            fprintf(stderr, "simenv: stopping a payonce serve the case left running\n");
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        }
    }
}

static void remember(struct t_gateway *gw, pid_t pid)
{
    int serial = t_case_serial();
    if (!serial)
        return;
    t_after_each_case(stop_left);
    pthread_mutex_lock(&L.mu);
    if (L.n < LEFT_MAX)
        L.e[L.n++] = (struct left){serial, gw, pid};
    pthread_mutex_unlock(&L.mu);
}

static void forget(struct t_gateway *gw, pid_t pid)
{
    pthread_mutex_lock(&L.mu);
    for (int i = 0; i < L.n; i++)
        if ((gw && L.e[i].gw == gw) || (pid && L.e[i].pid == pid)) {
            L.e[i] = L.e[--L.n];
            break;
        }
    pthread_mutex_unlock(&L.mu);
}

struct t_gateway *t_gateway_start(const struct po_gateway_cfg *g, const struct po_server_cfg *scfg)
{
    struct t_gateway *t = calloc(1, sizeof *t);
    char err[PO_ERRBUF_SIZE] = "";
    if (!t)
        die("calloc", "gateway");
    if (po_gateway_open(g, &t->gw, err, sizeof err) ||
        po_server_start(t->gw, scfg, &t->srv, err, sizeof err))
        die("gateway", err);
    t->port = po_server_port(t->srv);
    remember(t, 0);
    return t;
}

void t_gateway_stop(struct t_gateway *t)
{
    if (!t)
        return;
    forget(t, 0);
    gateway_close(t);
}
