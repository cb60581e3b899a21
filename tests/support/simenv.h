/*
 * simenv.h — the setting of the end-to-end tests that drive a gateway and
 * the channel simulator: a temporary directory with the simulator's keys
 * (DIR/sim) and a master key (DIR/master.key), and the payonce command run
 * in that directory.
 */
#ifndef PO_SIMENV_H
#define PO_SIMENV_H

#include "../../src/http/http.h"
#include "../../src/service/gateway/gateway.h"
#include "../../src/sim/sim.h"

#include <sys/types.h>

/* Creates $TMPDIR/payonce-NAME-XXXXXX (into dir), generates the simulator's
 * keys (certificate mode) and a random master key, and loads the identity.
 * Aborts the test on any error. */
void t_env_create(const char *name, char *dir, size_t cap, unsigned char master[32],
                  struct po_sim_identity *id);

/* Runs `BIN ARGS --db URL` in dir with PAYONCE_MASTER_KEY_FILE set; its
 * stderr goes to DIR/setup.log, the first line of its stdout into out
 * (when not NULL). Aborts the test when the command fails. */
void t_cli(const char *dir, const char *bin, const char *url, char *out, size_t cap,
           const char *fmt, ...) PO_PRINTF(6, 7);

/* The same, returning its exit status (-1 when it did not exit) instead of
 * aborting when it is not 0. */
int t_cli_status(const char *dir, const char *bin, const char *url, const char *fmt, ...)
    PO_PRINTF(4, 5);
/* The same, with all of its stdout (up to 4 KiB) into out. */
int t_cli_all(const char *dir, const char *bin, const char *url, char *out, size_t cap,
              const char *fmt, ...) PO_PRINTF(6, 7);

/* Starts `BIN serve` on a free loopback port against url, with the master
 * key of dir, no background jobs and the extra options (NULL-terminated,
 * may be NULL); its stderr goes to DIR/child.log. Returns its pid and sets
 * *port; aborts the test when it does not start. */
pid_t t_serve(const char *dir, const char *bin, const char *url, const char *const *extra,
              unsigned *port);

/* Stops it (SIGTERM) and counts a check that it exited 0. */
void t_serve_stop(pid_t pid);

/* The end of an end-to-end test: one check that the ledger of url verifies,
 * the database dropped, dir removed when every check passed, the figure
 * line "# <name>: N checks" and the counts printed. Returns the exit
 * status. */
int t_env_finish(const char *dir, const char *url, const char *name);

/* A libcurl write callback that collects a response body into a fixed,
 * NUL-terminated buffer (what does not fit is dropped). */
struct t_body {
    char *data;
    size_t cap, len;
};
size_t t_body_write(char *d, size_t sz, size_t n, void *ctx);

/* One HTTP request with libcurl — the e2e programs' one client helper. */
struct t_http_req {
    const char *method;         /* NULL: GET, or POST when there is a body */
    const char *url;            /* http://127.0.0.1:PORT/… */
    const char *const *headers; /* "Name: value" lines, NULL-terminated; NULL: none */
    const char *body;           /* NULL: none */
    size_t body_len;            /* 0: strlen(body) */
    long timeout_s;             /* 0: 30 */
    bool fresh_connection;      /* never reuse a connection */
    /* Each header line of the answer (NULL: not wanted). */
    size_t (*on_header)(char *d, size_t sz, size_t n, void *ctx);
    void *header_ctx;
};
/* The answer's status (0: no answer); its body into out (cap > 0,
 * NUL-terminated, cut when larger) and its length into *len (may be NULL). */
long t_http(const struct t_http_req *q, char *out, size_t cap, size_t *len);
/* The header lines of a simulated channel's request as t_http takes them
 * (h, NULL-terminated): its Content-Type, its headers, and "Expect:". */
struct t_sim_lines {
    char line[PO_SIM_HEADERS_MAX + 1][600];
    const char *h[PO_SIM_HEADERS_MAX + 3];
};
void t_sim_lines(const struct po_sim_request *r, struct t_sim_lines *out);
/* A simulated channel's request posted to http://127.0.0.1:port + path
 * with t_http (those lines). */
long t_http_sim(unsigned port, const char *path, const struct po_sim_request *r, char *out,
                size_t cap);

/* A simulator's request as one raw HTTP/1.1 POST of path (heap,
 * NUL-terminated; *len its length). Aborts the test on error. */
char *t_sim_http(const char *path, const struct po_sim_request *r, size_t *len);

/* Sends it to the loopback port on a new connection: the answer's status,
 * or 0 when there was none. */
unsigned t_sim_post(unsigned port, const char *path, const struct po_sim_request *r);

/* Writes DIR/sim/name (a simulator switch: faults, bill_not_ready, …)
 * whole; aborts the test when it cannot. */
void t_sim_file(const char *dir, const char *name, const char *content);
/* Writes DIR/sim/faults with every line keyed by its caller (issue 46):
 * "@CALLER " before it, CALLER the merchant id's identity as the request
 * carries it — id's mchid for a WeChat Pay line (/v3/…), its app_id for an
 * Alipay gateway one (/gateway.do), its Stripe secret key for a Stripe one
 * (/v1/…), so that only that merchant's calls take the fault. Other lines
 * (Alipay's bill file, fetched by the URL the gateway gave: it names no
 * merchant) stay anybody's. */
void t_sim_faults(const char *dir, const struct po_sim_identity *id, const char *lines);

/* A WeChat Pay payment callback (order no, transaction txn, amount CNY)
 * signed now with identity id, posted to /notify/wechatpay/TENANT. */
unsigned t_sim_pay(unsigned port, const struct po_sim_identity *id, const char *tenant,
                   const char *no, const char *txn, int64_t amount);

/* An in-process gateway (service/gateway/gateway.h) and its HTTP server. */
struct t_gateway {
    struct po_gateway *gw;
    struct po_server *srv;
    unsigned port;
};
/* The configuration the in-process tests start from: the option table's
 * defaults, listen 127.0.0.1:0, url and master, no background jobs and no
 * webhook delivery (set webhooks.senders for it). */
void t_gateway_cfg(struct po_gateway_cfg *g, const char *url, const unsigned char *master);
/* Opens g and serves it (scfg may be NULL); aborts the test on error. */
struct t_gateway *t_gateway_start(const struct po_gateway_cfg *g, const struct po_server_cfg *scfg);
/* Stops the server, closes the gateway, frees t. NULL is fine. */
void t_gateway_stop(struct t_gateway *t);

#endif
