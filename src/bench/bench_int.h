/*
 * bench_int.h — private to src/bench: the load generator, the fixture
 * (store, tenant, channel account, orders, signed callbacks), the
 * baselines, and what is measured about the machine and the processes.
 */
#ifndef PO_BENCH_INT_H
#define PO_BENCH_INT_H

#include "../core/core.h"
#include "../store/store.h"
#include "bench.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- the load generator (loadgen.c) ----
 * One thread, epoll, `conns` keep-alive HTTP/1.1 connections to
 * 127.0.0.1:port. Each request of the list is sent once, in order, on the
 * next free connection: closed loop (rate 0: a connection sends its next
 * request when the previous answer arrived) or on a schedule (rate > 0:
 * request i is due at start + i/rate; its latency counts from when it was
 * due, so a slow server cannot hide its queue). Requests are pre-built
 * bytes: the generator only writes, reads and parses status lines. */
struct po_lg_req {
    char *buf; /* the whole request: request line, headers, body */
    size_t len;
};
struct po_lg_cfg {
    unsigned port;
    int conns;
    const struct po_lg_req *reqs;
    size_t nreqs;
    double rate;      /* requests/s; 0: closed loop */
    double timeout_s; /* the whole run */
    double gap_ms;    /* closed loop, one connection: pause between requests */
};
struct po_lg_result {
    size_t done, ok, failed; /* answered; 2xx; non-2xx or no answer */
    double wall_s;
    double *lat_ms; /* per answered request, heap (caller frees) */
    unsigned first_bad_status;
};
po_err po_lg_run(const struct po_lg_cfg *cfg, struct po_lg_result *out, char *err,
                 size_t errcap) PO_MUST_CHECK;
/* The q-quantile (0..1) of n latencies (sorts them). */
double po_lg_quantile(double *v, size_t n, double q);

/* ---- processes and the machine (machine.c) ---- */

/* CPU seconds (user + system) of a process, or of every process whose
 * name starts with "postgres" (the database's, when it runs here). */
double po_cpu_of_pid(pid_t pid);
double po_cpu_of_postgres(void);
double po_cpu_self(void);
/* A process's resident memory (kB) and threads, from /proc (-1: unknown). */
int64_t po_rss_kb_of_pid(pid_t pid);
int po_threads_of_pid(pid_t pid);
/* cores, model, memory, kernel into a JSON object. */
json_t *po_machine_describe(void);
/* Median and p99 of fdatasync after a 4 KiB write in dir (microseconds). */
po_err po_fsync_latency(const char *dir, double *p50_us, double *p99_us) PO_MUST_CHECK;

/* ---- the server under test (server.c) ---- */

struct po_bench_fx;
struct po_bench_server {
    pid_t pid;
    unsigned port;
};
/* A child `payonce serve` over fx's store on a free loopback port, its log
 * in fx->dir/server-NAME.log; SIGTERMed if the benchmark dies. flag: one
 * more flag of serve's (NULL: none). */
po_err po_bench_server_start(const struct po_bench_cfg *cfg, const struct po_bench_fx *fx,
                             const char *name, int batch_max, int batch_wait_us, const char *flag,
                             struct po_bench_server *out, char *err, size_t errcap) PO_MUST_CHECK;
void po_bench_server_stop(struct po_bench_server *s);
/* The server's committer counters from its /metrics (batches, items; 0 and 0
 * without an answer). */
void po_bench_committer_counts(const struct po_bench_server *srv, double *batches, double *items);
/* GET path on the loopback port, the whole answer (head and body) into buf
 * (cap bytes, NUL-terminated); its status, 0 without an answer. */
int po_bench_http_get(unsigned port, const char *path, char *buf, size_t cap);
/* Counters from the server's /metrics, by name (0 where missing). */
void po_bench_metrics(const struct po_bench_server *srv, const char *const *names, double *out,
                      int n);

/* `payonce bench --nodes N` (nodes.c). */
int po_bench_nodes_run(const struct po_bench_cfg *cfg);

/* ---- the fixture (fixture.c) ---- */

struct po_bench_fx {
    const char *db_url;
    char dir[256]; /* scratch: sim identity, master key, logs */
    char master_file[300];
    unsigned char master[32];
    char apikey[PO_APIKEY_LEN + 1];
    char apikey2[PO_APIKEY_LEN + 1]; /* a second tenant's ("bench2"): the flood */
    struct po_sim_identity *id;
    struct po_store *s;
};
po_err po_bench_fx_open(struct po_bench_fx *fx, const char *db_url, const char *dir, char *err,
                        size_t errcap) PO_MUST_CHECK;
void po_bench_fx_close(struct po_bench_fx *fx);
/* n orders "<prefix>-<i>" of amount 100 + i % 900, each to merchant
 * "<prefix>m<i>" (unique) or all to "<prefix>m" (hot). */
po_err po_bench_orders(struct po_bench_fx *fx, const char *prefix, int n, bool hot, char *err,
                       size_t errcap) PO_MUST_CHECK;
/* Their WeChat Pay v3 payment callbacks as HTTP requests, signed and
 * encrypted in advance (on every core), copies times each, adjacent. */
po_err po_bench_callbacks(struct po_bench_fx *fx, const char *prefix, int n, int copies,
                          struct po_lg_req **out) PO_MUST_CHECK;
/* POST /v1/orders requests of the tenant whose key is apikey (fx->apikey
 * or fx->apikey2), with fresh Idempotency-Keys, for "<prefix>-<i>". */
po_err po_bench_api_requests(const char *apikey, const char *prefix, int n,
                             struct po_lg_req **out) PO_MUST_CHECK;
void po_bench_reqs_free(struct po_lg_req *r, size_t n);
/* Credited payments of the prefix's orders (PAY journals) and PAID orders. */
po_err po_bench_credits(struct po_bench_fx *fx, const char *prefix, int64_t *journals,
                        int64_t *paid) PO_MUST_CHECK;

/* ---- baselines (baseline.c) ---- */

struct po_bench_base {
    size_t done;
    double wall_s, cpu_self_s, cpu_db_s;
    double *lat_ms;
    /* the connections' round trips and pages written (po_store_*), the
     * transactions: work per credit */
    uint64_t round_trips, pages_written, batches;
};
/* The engine alone: the committer fed with the orders' events by `conns`
 * threads (no HTTP, no crypto). */
po_err po_bench_engine_alone(struct po_bench_fx *fx, const char *prefix, int n, int committers,
                             int batch_max, int batch_wait_us, int conns, struct po_bench_base *out,
                             char *err, size_t errcap) PO_MUST_CHECK;
/* A design a reader of the article writes (baseline.c's head says what
 * each writes), statement by statement, `batch` callbacks a transaction
 * (1 on PostgreSQL; 100 on SQLite, from one connection), from `conns`
 * threads; hot: every payment to one merchant; its orders prefix-0 ..
 * prefix-(n-1), made first by po_bench_design_orders (a prefix a run of
 * its own). Checks that each was credited exactly once. */
enum po_bench_design { PO_BENCH_PLAIN, PO_BENCH_ARTICLE };
po_err po_bench_design_orders(struct po_bench_fx *fx, enum po_bench_design which,
                              const char *prefix, int n, bool hot, char *err,
                              size_t errcap) PO_MUST_CHECK;
po_err po_bench_design(struct po_bench_fx *fx, enum po_bench_design which, const char *prefix,
                       int n, bool hot, int conns, int batch, struct po_bench_base *out, char *err,
                       size_t errcap) PO_MUST_CHECK;

/* ---- work per credit (work.c) ---- */

struct po_bench_work_snap {
    bool pg;
    /* PostgreSQL, database-wide */
    double wal_bytes, wal_records, wal_fpi, wal_syncs, commits;
    double statements; /* pg_stat_statements calls (-1: not loaded) */
    json_t *tables;    /* {relname: [inserted, updated, hot updated]} */
    /* set by the caller: the writing process's disk writes
     * (po_bench_write_bytes), the run's connections' round trips and pages
     * written (po_store_* counters, or the server's committer metrics) and
     * its transactions */
    double bytes_written, round_trips, pages_written, batches;
};
/* A snapshot of the database's counters (none on SQLite); on PostgreSQL it
 * first waits (up to 30 s, then says so on stderr and goes on) until no
 * other client backend of the database is connected, so that every
 * finished connection's statistics are in the views. */
po_err po_bench_work_snap(struct po_store *s, bool pg, struct po_bench_work_snap *out, char *err,
                          size_t errcap) PO_MUST_CHECK;
/* write_bytes of /proc/PID/io: what the process sent to the disk (-1:
 * unreadable). */
double po_bench_write_bytes(pid_t pid);
void po_bench_work_snap_free(struct po_bench_work_snap *s);

/* A run's work: the difference of two snapshots, and its credits and CPU. */
struct po_bench_work {
    char name[64];
    bool pg;
    double credits, cpu_db_s, cpu_client_s;
    double wal_bytes, wal_records, wal_fpi, wal_syncs, commits, statements;
    double inserted, updated, hot; /* rows, every table */
    double round_trips, pages_written, batches, bytes_written;
    json_t *tables; /* {relname: {inserted, updated, hot_updated}} that changed */
};
void po_bench_work_diff(const struct po_bench_work_snap *before,
                        const struct po_bench_work_snap *after, struct po_bench_work *out);
void po_bench_work_free(struct po_bench_work *w);
json_t *po_bench_work_json(const struct po_bench_work *w);
/* The table of n runs' work per credit, and each run's rows per table. */
void po_bench_work_print(const struct po_bench_work *w, int n);

#endif
