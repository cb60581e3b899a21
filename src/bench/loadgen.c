/*
 * loadgen.c — the benchmark's load generator (see bench_int.h): one
 * thread, epoll, keep-alive connections, pre-built requests. It parses only
 * what it must: the status code, Content-Length, and Connection: close.
 * A connection the server closes is opened again (counted as failed when
 * it held a request).
 */
#include "bench_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RBUF 8192
#define CONNS_MAX 1024

struct conn {
    int fd;
    bool connected;
    long req;      /* index of the request in flight, -1: idle */
    size_t sent;   /* bytes of it written */
    double due_ms; /* when it was due (latency counts from here) */
    char rbuf[RBUF];
    size_t rlen;
};

struct lg {
    const struct po_lg_cfg *cfg;
    struct po_lg_result *out;
    int ep;
    struct conn *c;
    size_t next; /* next request to send */
    double start_ms;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double po_lg_quantile(double *v, size_t n, double q)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static po_err open_conn(struct lg *g, struct conn *c)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return PO_ERR_IO;
    int one = 1;
    (void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g->cfg->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) {
        close(c->fd);
        c->fd = -1;
        return PO_ERR_IO;
    }
    c->connected = false;
    c->rlen = 0;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP, .data.ptr = c};
    if (epoll_ctl(g->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        close(c->fd);
        c->fd = -1;
        return PO_ERR_IO;
    }
    return PO_OK;
}

static void close_conn(struct lg *g, struct conn *c)
{
    if (c->fd >= 0) {
        (void)epoll_ctl(g->ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
    }
    c->fd = -1;
}

/* Writes what is left of the connection's request. */
static po_err pump(struct conn *c, const struct po_lg_req *r)
{
    while (c->sent < r->len) {
        ssize_t w = send(c->fd, r->buf + c->sent, r->len - c->sent, MSG_NOSIGNAL);
        if (w < 0)
            return errno == EAGAIN ? PO_OK : PO_ERR_IO;
        c->sent += (size_t)w;
    }
    return PO_OK;
}

/* The next due request onto an idle connection, if one is due. */
static void assign(struct lg *g, struct conn *c, double t)
{
    const struct po_lg_cfg *cfg = g->cfg;
    if (c->req >= 0 || !c->connected || g->next >= cfg->nreqs)
        return;
    double due = cfg->rate > 0 ? g->start_ms + 1e3 * (double)g->next / cfg->rate : t;
    if (due > t)
        return;
    c->req = (long)g->next++;
    c->sent = 0;
    c->due_ms = due;
    if (pump(c, &cfg->reqs[c->req]))
        c->sent = 0; /* noticed as a closed connection on the next event */
}

static void answered(struct lg *g, struct conn *c, unsigned status)
{
    struct po_lg_result *o = g->out;
    o->lat_ms[o->done++] = now_ms() - c->due_ms;
    if (status >= 200 && status < 300)
        o->ok++;
    else {
        o->failed++;
        if (!o->first_bad_status)
            o->first_bad_status = status;
    }
    c->req = -1;
}

/* Parses complete responses out of rbuf. Returns false when the
 * connection must be closed (Connection: close or garbage). */
static bool parse(struct lg *g, struct conn *c)
{
    for (;;) {
        char *hend = NULL;
        for (size_t i = 3; i < c->rlen && !hend; i++)
            if (memcmp(c->rbuf + i - 3, "\r\n\r\n", 4) == 0)
                hend = c->rbuf + i + 1;
        if (!hend)
            return c->rlen < RBUF;
        unsigned status = 0;
        if (sscanf(c->rbuf, "HTTP/1.%*c %u", &status) != 1)
            return false;
        size_t clen = 0;
        bool closing = false;
        for (char *p = strstr(c->rbuf, "\r\n"); p && p + 2 < hend; p = strstr(p + 2, "\r\n")) {
            if (strncasecmp(p + 2, "Content-Length:", 15) == 0)
                clen = strtoul(p + 17, NULL, 10);
            else if (strncasecmp(p + 2, "Connection: close", 17) == 0)
                closing = true;
        }
        size_t total = (size_t)(hend - c->rbuf) + clen;
        if (total > RBUF)
            return false;
        if (c->rlen < total)
            return true;
        if (c->req >= 0)
            answered(g, c, status);
        memmove(c->rbuf, c->rbuf + total, c->rlen - total);
        c->rlen -= total;
        if (closing)
            return false;
    }
}

static void reopen(struct lg *g, struct conn *c)
{
    if (c->req >= 0) { /* lost with its connection */
        answered(g, c, 0);
    }
    close_conn(g, c);
    (void)open_conn(g, c);
}

static void on_event(struct lg *g, struct conn *c, uint32_t ev)
{
    if (c->fd < 0)
        return;
    if (!c->connected && (ev & EPOLLOUT)) {
        int e = 0;
        socklen_t el = sizeof e;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0 || e != 0) {
            reopen(g, c);
            return;
        }
        c->connected = true;
        struct epoll_event mod = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
        (void)epoll_ctl(g->ep, EPOLL_CTL_MOD, c->fd, &mod);
    }
    if (ev & EPOLLIN) {
        for (;;) {
            ssize_t r = recv(c->fd, c->rbuf + c->rlen, RBUF - c->rlen, 0);
            if (r > 0) {
                c->rlen += (size_t)r;
                if (!parse(g, c)) {
                    reopen(g, c);
                    return;
                }
                continue;
            }
            if (r < 0 && errno == EAGAIN)
                break;
            reopen(g, c); /* closed by the server */
            return;
        }
    } else if (ev & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
        reopen(g, c);
        return;
    }
    if (c->req >= 0 && c->sent < g->cfg->reqs[c->req].len &&
        pump(c, &g->cfg->reqs[c->req]) != PO_OK)
        reopen(g, c);
}

po_err po_lg_run(const struct po_lg_cfg *cfg, struct po_lg_result *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    if (cfg->conns < 1 || cfg->conns > CONNS_MAX || cfg->nreqs == 0) {
        po_errf(err, errcap, "loadgen: 1..%d connections and at least one request", CONNS_MAX);
        return PO_ERR_INVALID;
    }
    struct lg g = {.cfg = cfg, .out = out, .ep = epoll_create1(EPOLL_CLOEXEC)};
    g.c = calloc((size_t)cfg->conns, sizeof *g.c);
    out->lat_ms = calloc(cfg->nreqs, sizeof *out->lat_ms);
    po_err rc = g.ep < 0 || !g.c || !out->lat_ms ? PO_ERR_NOMEM : PO_OK;
    for (int i = 0; !rc && i < cfg->conns; i++) {
        g.c[i].req = -1;
        g.c[i].fd = -1;
        rc = open_conn(&g, &g.c[i]);
    }
    if (rc) {
        po_errf(err, errcap, "loadgen: cannot open %d connections to port %u", cfg->conns,
                cfg->port);
        goto out;
    }
    g.start_ms = now_ms();
    double deadline = g.start_ms + cfg->timeout_s * 1e3, last_send = 0;
    struct epoll_event evs[64];
    while (out->done < cfg->nreqs) {
        double t = now_ms();
        if (t > deadline) {
            po_errf(err, errcap, "loadgen: %zu of %zu requests answered in %.0f s", out->done,
                    cfg->nreqs, cfg->timeout_s);
            rc = PO_ERR_IO;
            break;
        }
        if (cfg->gap_ms <= 0 || t - last_send >= cfg->gap_ms)
            for (int i = 0; i < cfg->conns; i++) {
                size_t before = g.next;
                assign(&g, &g.c[i], t);
                if (g.next != before)
                    last_send = t;
                if (cfg->gap_ms > 0 && g.next != before)
                    break;
            }
        /* Sleep until an answer arrives or, with a connection free, until
         * the next request is due. */
        bool idle = false;
        for (int i = 0; i < cfg->conns && !idle; i++)
            idle = g.c[i].req < 0 && g.c[i].connected;
        int wait_ms = 10;
        if (idle && cfg->rate > 0 && g.next < cfg->nreqs) {
            double due = g.start_ms + 1e3 * (double)g.next / cfg->rate - now_ms();
            wait_ms = due <= 0 ? 0 : due < 10 ? (int)due + 1 : 10;
        } else if (idle && cfg->gap_ms > 0)
            wait_ms = 1;
        int n = epoll_wait(g.ep, evs, 64, wait_ms);
        for (int k = 0; k < n; k++)
            on_event(&g, evs[k].data.ptr, evs[k].events);
    }
    out->wall_s = (now_ms() - g.start_ms) / 1e3;
out:
    for (int i = 0; g.c && i < cfg->conns; i++)
        close_conn(&g, &g.c[i]);
    free(g.c);
    if (g.ep >= 0)
        close(g.ep);
    if (rc) {
        free(out->lat_ms);
        out->lat_ms = NULL;
    }
    return rc;
}
