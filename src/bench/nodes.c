/*
 * nodes.c — `payonce bench --nodes N` (issue 22, docs/scaling.md): the
 * unique-merchants load through HAProxy in front of 1, 2, … N `payonce
 * serve` nodes over one PostgreSQL database, each run with fresh orders.
 * The runs go 1..N nodes and back N..1, and each node count's rate is its
 * two runs' together: the database grows from run to run, and the mirrored
 * order puts that drift on every node count alike. HAProxy (Debian's) is
 * started here with a configuration like scripts/cluster.sh's (balance
 * first, or --balance roundrobin; /readyz checked every 500 ms). Per run:
 * credited/s, ack latency, the nodes' average batch (items per committed
 * batch), what each node committed, the CPU of each node, of HAProxy and
 * of the database, and the exactly-once check.
 */
#include "bench_int.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NODES_MAX 8
/* HAProxy's maxconn a node: serve's default --workers, the requests a node
 * runs at once (more would wait inside it instead of in HAProxy's queue). */
#define NODE_MAXCONN PO_WORKERS_DEFAULT

/* A loopback port nothing listens on now (the kernel's choice). */
static unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    unsigned port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* HAProxy in front of the nodes, in the foreground as a child; its port. */
static po_err haproxy_start(const struct po_bench_fx *fx, const char *balance,
                            const struct po_bench_server *nodes, int k, pid_t *pid, unsigned *port,
                            char *err, size_t errcap)
{
    char cfgpath[400], logpath[400];
    (void)snprintf(cfgpath, sizeof cfgpath, "%s/haproxy-%d.cfg", fx->dir, k);
    (void)snprintf(logpath, sizeof logpath, "%s/haproxy-%d.log", fx->dir, k);
    *port = free_port();
    FILE *f = fopen(cfgpath, "w");
    if (!f || !*port) {
        if (f)
            fclose(f);
        po_errf(err, errcap, "cannot write %s", cfgpath);
        return PO_ERR_IO;
    }
    fprintf(f,
            "global\n  maxconn 8192\ndefaults\n  mode http\n  timeout connect 1s\n"
            "  timeout client 30s\n  timeout server 10s\nfrontend payonce\n"
            "  bind 127.0.0.1:%u\n  default_backend nodes\nbackend nodes\n  balance %s\n"
            "  option redispatch\n  retries 2\n"
            "  option httpchk GET /readyz\n  http-check expect status 200\n"
            "  default-server inter 500ms fall 2 rise 2 maxconn %d\n",
            *port, balance, NODE_MAXCONN);
    for (int i = 0; i < k; i++)
        fprintf(f, "  server node%d 127.0.0.1:%u check\n", i + 1, nodes[i].port);
    if (fclose(f) != 0) {
        po_errf(err, errcap, "cannot write %s", cfgpath);
        return PO_ERR_IO;
    }
    pid_t p = fork();
    if (p < 0)
        return PO_ERR_IO;
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        int logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (logfd < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
            _exit(127);
        execlp("haproxy", "haproxy", "-f", cfgpath, "-db", (char *)NULL);
        _exit(127);
    }
    *pid = p;
    /* every node through HAProxy: its checks have seen them all */
    char ready[256];
    for (int waited = 0; waited < 10000; waited += 100) {
        if (po_bench_http_get(*port, "/readyz", ready, sizeof ready) == 200) {
            sleep_ms(1200); /* rise 2 at 500 ms for every server */
            return PO_OK;
        }
        if (waitpid(p, NULL, WNOHANG) == p)
            break;
        sleep_ms(100);
    }
    kill(p, SIGKILL);
    waitpid(p, NULL, 0);
    po_errf(err, errcap, "HAProxy did not start (is it installed? see %s)", logpath);
    return PO_ERR_IO;
}

static void haproxy_stop(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

struct step {
    int nodes;
    size_t deliveries;
    double wall_s, p50, p99, cpu_nodes[NODES_MAX], cpu_haproxy, cpu_db;
    double batches, items;         /* committed by all the step's nodes */
    double items_nodes[NODES_MAX]; /* what each node's committer committed */
    bool exact;
};

/* "v0 v1 …" with decimals places, for a column of per-node values. */
static void per_node(char *out, size_t cap, const double *v, int n, int decimals)
{
    size_t at = 0;
    out[0] = '\0';
    for (int j = 0; j < n && at < cap; j++)
        at += (size_t)snprintf(out + at, cap - at, "%s%.*f", j ? " " : "", decimals, v[j]);
}

/* One step (the run-th of the bench): k nodes, HAProxy, n fresh orders and
 * their callbacks. */
static po_err step_run(const struct po_bench_cfg *cfg, struct po_bench_fx *fx, int k, int run,
                       struct step *st, char *err, size_t errcap)
{
    struct po_bench_server nodes[NODES_MAX] = {0};
    struct po_lg_req *reqs = NULL;
    pid_t hp = 0;
    unsigned hport = 0;
    char prefix[16], name[32];
    int n = cfg->orders;
    (void)snprintf(prefix, sizeof prefix, "N%d", run);
    memset(st, 0, sizeof *st);
    st->nodes = k;
    fprintf(stderr, "bench: run %d, %d node(s) behind HAProxy ...\n", run, k);
    po_err rc = PO_OK;
    for (int i = 0; !rc && i < k; i++) {
        (void)snprintf(name, sizeof name, "node%d-%d", run, i + 1);
        rc = po_bench_server_start(cfg, fx, name, cfg->batch_max, cfg->batch_wait_us, NULL,
                                   &nodes[i], err, errcap);
    }
    if (!rc)
        rc = haproxy_start(fx, cfg->balance, nodes, k, &hp, &hport, err, errcap);
    if (!rc)
        rc = po_bench_orders(fx, prefix, n, false, err, errcap);
    if (!rc && (rc = po_bench_callbacks(fx, prefix, n, 1, &reqs)) != PO_OK)
        po_errf(err, errcap, "signing %d callbacks failed", n);
    if (!rc) {
        struct po_lg_cfg lc = {.port = hport,
                               .conns = cfg->connections,
                               .reqs = reqs,
                               .nreqs = (size_t)n,
                               .timeout_s = 600};
        struct po_lg_result res = {0};
        double c0[NODES_MAX], h0 = po_cpu_of_pid(hp), d0 = po_cpu_of_postgres();
        for (int i = 0; i < k; i++)
            c0[i] = po_cpu_of_pid(nodes[i].pid);
        rc = po_lg_run(&lc, &res, err, errcap);
        if (!rc) {
            for (int i = 0; i < k; i++)
                st->cpu_nodes[i] = po_cpu_of_pid(nodes[i].pid) - c0[i];
            st->cpu_haproxy = po_cpu_of_pid(hp) - h0;
            st->cpu_db = po_cpu_of_postgres() - d0;
            st->deliveries = res.done;
            st->wall_s = res.wall_s;
            st->p50 = po_lg_quantile(res.lat_ms, res.done, 0.50);
            st->p99 = po_lg_quantile(res.lat_ms, res.done, 0.99);
            if (res.failed) {
                po_errf(err, errcap, "%d nodes: %zu of %zu requests failed (first status %u)", k,
                        res.failed, res.done, res.first_bad_status);
                rc = PO_ERR_INTERNAL;
            }
        }
        free(res.lat_ms);
    }
    /* the nodes' batches: the callbacks are all they committed */
    for (int i = 0; !rc && i < k; i++) {
        double b, it;
        po_bench_committer_counts(&nodes[i], &b, &it);
        st->items_nodes[i] = it;
        st->batches += b;
        st->items += it;
    }
    int64_t journals = -1, paid = -1;
    if (!rc && !(rc = po_bench_credits(fx, prefix, &journals, &paid)))
        st->exact = journals == n && paid == n;
    po_bench_reqs_free(reqs, reqs ? (size_t)n : 0);
    haproxy_stop(hp);
    for (int i = 0; i < k; i++)
        po_bench_server_stop(&nodes[i]);
    return rc;
}

/* The scratch directory and what the run put in it (one level of
 * subdirectories: the simulator's keys). */
static void remove_tree(const char *dir, int depth)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[600];
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        (void)snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0 && depth > 0)
            remove_tree(p, depth - 1);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

int po_bench_nodes_run(const struct po_bench_cfg *cfg)
{
    if (!cfg->db_url || cfg->nodes < 1 || cfg->nodes > NODES_MAX) {
        fprintf(stderr,
                "payonce: bench --nodes 1-%d takes the one PostgreSQL database of the"
                " nodes (--db postgresql://…)\n",
                NODES_MAX);
        return 1;
    }
    char dir[128], err[PO_ERRBUF_SIZE] = "";
    (void)snprintf(dir, sizeof dir, "%s/payonce-bench-nodes.XXXXXX", po_tmp_dir());
    if (!mkdtemp(dir)) {
        fprintf(stderr, "payonce: bench: cannot make a scratch directory\n");
        return 1;
    }
    struct po_bench_fx fx;
    struct step steps[2 * NODES_MAX];
    int done = 0, runs = 2 * cfg->nodes;
    po_err rc = po_bench_fx_open(&fx, cfg->db_url, dir, err, sizeof err);
    printf("# payonce bench --nodes %d: %d payments per run (unique merchants, fresh orders),"
           " %d keep-alive connections to HAProxy (balance %s, maxconn %d a node, /readyz checked);"
           " nodes: --batch-max %d --batch-wait-us %d --committers %d; all on this machine's %ld"
           " cores\n# runs in mirrored order, 1..%d nodes then %d..1, each node count's rate from"
           " its two runs (the database grows from run to run)\n",
           cfg->nodes, cfg->orders, cfg->connections, cfg->balance, NODE_MAXCONN, cfg->batch_max,
           cfg->batch_wait_us, cfg->committers, sysconf(_SC_NPROCESSORS_ONLN), cfg->nodes,
           cfg->nodes);
    for (int r = 0; !rc && r < runs; r++, done++)
        rc = step_run(cfg, &fx, r < cfg->nodes ? r + 1 : runs - r, r + 1, &steps[r], err,
                      sizeof err);
    printf("\n%-4s %-6s %12s %9s %9s %10s %28s %22s %13s %18s %s\n", "run", "nodes", "credited/s",
           "p50 ms", "p99 ms", "avg batch", "CPU s per node", "committed per node", "HAProxy CPU s",
           "DB CPU us/credited", "exactly once");
    bool exact = done == runs;
    for (int i = 0; i < done; i++) {
        const struct step *st = &steps[i];
        char cpus[64], items[64];
        per_node(cpus, sizeof cpus, st->cpu_nodes, st->nodes, 2);
        per_node(items, sizeof items, st->items_nodes, st->nodes, 0);
        printf("%-4d %-6d %12.0f %9.1f %9.1f %10.1f %28s %22s %13.2f %18.0f %s\n", i + 1, st->nodes,
               st->wall_s > 0 ? (double)st->deliveries / st->wall_s : 0, st->p50, st->p99,
               st->items / (st->batches > 0 ? st->batches : 1), cpus, items, st->cpu_haproxy,
               st->deliveries ? st->cpu_db * 1e6 / (double)st->deliveries : 0,
               st->exact ? "yes" : "NO");
        exact &= st->exact;
    }
    /* Per node count, both its runs together: run k and run 2N+1-k. */
    if (exact) {
        printf("\n%-6s %12s %10s %10s %18s\n", "nodes", "credited/s", "vs 1 node", "avg batch",
               "DB CPU us/credited");
        double one = 0;
        for (int k = 1; k <= cfg->nodes; k++) {
            const struct step *a = &steps[k - 1], *b = &steps[runs - k];
            double rate = (double)(a->deliveries + b->deliveries) / (a->wall_s + b->wall_s);
            if (k == 1)
                one = rate;
            printf("%-6d %12.0f %9.2fx %10.1f %18.0f\n", k, rate, rate / one,
                   (a->items + b->items) / (a->batches + b->batches),
                   (a->cpu_db + b->cpu_db) * 1e6 / (double)(a->deliveries + b->deliveries));
        }
    }
    if (rc)
        fprintf(stderr, "payonce: bench --nodes: %s (%s); scratch kept in %s\n", err,
                po_err_name(rc), dir);
    po_bench_fx_close(&fx);
    if (!rc)
        remove_tree(dir, 1);
    return rc || !exact ? 1 : 0;
}
