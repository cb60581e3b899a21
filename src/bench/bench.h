/*
 * bench.h — `payonce bench`: the throughput benchmark with its baselines,
 * measured in one run on one machine (docs/performance.md).
 *
 * It prepares its own store (a fresh SQLite file, or an EMPTY PostgreSQL
 * database named by URL), starts `payonce serve` as a child process, and
 * drives it with its own keep-alive load generator using WeChat Pay v3
 * callbacks signed and encrypted in advance. Scenarios: unique merchants,
 * one hot merchant, every callback three times at once, redelivery of
 * credited callbacks, tenant API order creation with Idempotency-Keys,
 * latency at half the peak rate, and single callbacks on an idle server.
 * Baselines: payonce with --batch-max 1, the engine alone (no HTTP, no
 * crypto), and on PostgreSQL the plain design (the article's transaction
 * statement by statement). Every scenario checks exactly-once crediting;
 * the ledger is verified at the end. Results: a table on stdout and JSON.
 */
#ifndef PO_BENCH_H
#define PO_BENCH_H

#include "../core/core.h"

struct po_bench_cfg {
    const char *db_url;  /* NULL: a fresh SQLite file; else an empty PostgreSQL database */
    const char *exe;     /* the payonce binary run as the server */
    int orders;          /* payments per throughput scenario (default 10000) */
    int connections;     /* load generator connections (default 16) */
    int committers;      /* the server's --committers (PostgreSQL; default 2) */
    int batch_max;       /* the server's --batch-max (default 128) */
    int batch_wait_us;   /* the server's --batch-wait-us (default 200) */
    int known_events;    /* the server's --known-events (default 65536) */
    int64_t plan_rows;   /* PostgreSQL: rows of another tenant loaded first (default 1000000) */
    const char *out_dir; /* where the JSON goes (NULL: not written) */
    /* Only these runs (comma-separated keys of po_bench_runs), NULL: all. */
    const char *only;
    /* > 0: instead of the scenarios, credited/s through HAProxy with 1..nodes
     * `serve` nodes over the one PostgreSQL database (docs/scaling.md) */
    int nodes;
    /* HAProxy's balance for --nodes: "first" (default; each node takes up
     * to its --workers requests before the next gets any) or "roundrobin" */
    const char *balance;
};

/* The runs' keys, in order, for --only: unique conns redelivery hot dup3
 * api half idle tenants batch1 norecord noledger engine plain idlemem. */
extern const char *const po_bench_runs[];
/* NULL when every key of a --only list is known; else the first unknown. */
const char *po_bench_unknown_run(const char *only);

/* Runs everything and prints the report; 0 when every run completed and
 * every payment was credited exactly once (targets missed are reported,
 * not failed: the machine decides those). */
int po_bench_run(const struct po_bench_cfg *cfg);

#endif
