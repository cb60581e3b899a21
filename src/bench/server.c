/*
 * server.c — the server under test: a child `payonce serve` started and
 * stopped, and asked over HTTP (its /metrics) — what both the run
 * (bench.c) and the nodes run (nodes.c) use (bench_int.h).
 */
#include "bench_int.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

po_err po_bench_server_start(const struct po_bench_cfg *cfg, const struct po_bench_fx *fx,
                             const char *name, int batch_max, int batch_wait_us, const char *flag,
                             struct po_bench_server *out, char *err, size_t errcap)
{
    char logpath[400], bm[16], bw[16], cm[16], ke[16];
    (void)snprintf(logpath, sizeof logpath, "%s/server-%s.log", fx->dir, name);
    (void)snprintf(bm, sizeof bm, "%d", batch_max);
    (void)snprintf(bw, sizeof bw, "%d", batch_wait_us);
    (void)snprintf(cm, sizeof cm, "%d", cfg->committers);
    (void)snprintf(ke, sizeof ke, "%d", cfg->known_events);
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0)
        return PO_ERR_IO;
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return PO_ERR_IO;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive the benchmark */
        int logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (logfd < 0 || dup2(pfd[1], 1) < 0 || dup2(logfd, 2) < 0)
            _exit(127);
        execl(cfg->exe, cfg->exe, "serve", "--db", fx->db_url, "--listen", "127.0.0.1:0",
              "--master-key-file", fx->master_file, "--query-interval", "0",
              "--refund-retry-interval", "0", "--batch-max", bm, "--batch-wait-us", bw,
              "--committers", cm, "--known-events", ke, "--max-connections-per-ip", "0", flag,
              (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    char buf[256];
    size_t len = 0;
    unsigned port = 0;
    for (int waited = 0; waited < 20000 && !port;) {
        struct pollfd p = {pfd[0], POLLIN, 0};
        int r = poll(&p, 1, 100);
        waited += 100;
        if (r <= 0)
            continue;
        ssize_t k = read(pfd[0], buf + len, sizeof buf - 1 - len);
        if (k <= 0)
            break;
        len += (size_t)k;
        buf[len] = '\0';
        char *at = strstr(buf, "listening on port ");
        if (at)
            port = (unsigned)strtoul(at + 18, NULL, 10);
    }
    close(pfd[0]);
    if (!port) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        po_errf(err, errcap, "the server did not start (see %s)", logpath);
        return PO_ERR_IO;
    }
    out->pid = pid;
    out->port = port;
    return PO_OK;
}

void po_bench_server_stop(struct po_bench_server *s)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 300; i++) {
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0;
            return;
        }
        struct timespec t = {0, 100000000L};
        nanosleep(&t, NULL);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

int po_bench_http_get(unsigned port, const char *path, char *buf, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char req[256];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    size_t len = 0;
    buf[0] = '\0';
    if (fd >= 0 && n > 0 && (size_t)n < sizeof req &&
        connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && write(fd, req, (size_t)n) == n)
        for (ssize_t k; len < cap - 1 && (k = read(fd, buf + len, cap - 1 - len)) > 0;)
            len += (size_t)k;
    if (fd >= 0)
        close(fd);
    buf[len] = '\0';
    return len > 12 && strncmp(buf, "HTTP/1.", 7) == 0 ? (int)strtol(buf + 9, NULL, 10) : 0;
}

/* Counters from the server's /metrics, by name (0 where missing). */
void po_bench_metrics(const struct po_bench_server *srv, const char *const *names, double *out,
                      int n)
{
    static char buf[1 << 20];
    for (int k = 0; k < n; k++)
        out[k] = 0;
    if (po_bench_http_get(srv->port, "/metrics", buf, sizeof buf) != 200)
        return;
    for (int k = 0; k < n; k++) {
        char key[96];
        (void)snprintf(key, sizeof key, "\n%s ", names[k]);
        const char *at = strstr(buf, key);
        if (at)
            out[k] = strtod(at + strlen(key), NULL);
    }
}

/* The server's committer counters from its /metrics (batches, items). */
void po_bench_committer_counts(const struct po_bench_server *srv, double *batches, double *items)
{
    static const char *const names[] = {"payonce_committer_batches_total",
                                        "payonce_committer_items_total"};
    double v[2];
    po_bench_metrics(srv, names, v, 2);
    *batches = v[0];
    *items = v[1];
}
