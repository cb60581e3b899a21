/*
 * cmd_bench.c — `payonce bench`: options, then src/bench does the run. It only
 * ever writes to a database named explicitly with --db (which must be
 * empty); without it, to a fresh SQLite file of its own.
 */
#include "cli_int.h"

#include "../bench/bench.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int cmd_bench(struct po_store *s, const struct opts *o)
{
    (void)s;
    int64_t orders, conns, committers, batch_max, batch_wait, known, plan_rows, nodes;
    int ret = cli_int_opt(o, "orders", 300, 1000000, 10000, &orders);
    if (!ret)
        ret = cli_int_opt(o, "connections", 1, 1024, 16, &conns);
    if (!ret)
        ret = cli_committer_opts(o, &committers, &batch_max, &batch_wait, &known);
    if (!ret)
        ret = cli_int_opt(o, "plan-rows", 0, 100000000, 1000000, &plan_rows);
    if (!ret)
        ret = cli_int_opt(o, "nodes", 0, 8, 0, &nodes);
    if (ret)
        return ret;
    const char *bad = po_bench_unknown_run(cli_opt(o, "only"));
    if (bad) {
        fprintf(stderr, "payonce: bench --only: unknown run '%s' (runs:", bad);
        for (int i = 0; po_bench_runs[i]; i++)
            fprintf(stderr, " %s", po_bench_runs[i]);
        fprintf(stderr, ")\n");
        return EXIT_USAGE;
    }
    const char *db = cli_opt(o, "db"); /* never PAYONCE_DB: only a database named here */
    if (db && strncmp(db, "postgresql://", 13) != 0 && strncmp(db, "postgres://", 11) != 0) {
        fprintf(stderr, "payonce: bench --db takes an empty PostgreSQL database"
                        " (postgresql://…); without --db it uses a fresh SQLite file\n");
        return EXIT_USAGE;
    }
    if (nodes && !db) {
        fprintf(stderr, "payonce: bench --nodes: the nodes share one PostgreSQL database: give"
                        " --db postgresql://… (an empty one)\n");
        return EXIT_USAGE;
    }
    const char *balance = cli_opt(o, "balance");
    if (balance && strcmp(balance, "first") != 0 && strcmp(balance, "roundrobin") != 0) {
        fprintf(stderr, "payonce: bench --balance: 'first' or 'roundrobin', not '%s'\n", balance);
        return EXIT_USAGE;
    }
    if (balance && !nodes) {
        fprintf(stderr, "payonce: bench --balance goes with --nodes (HAProxy's algorithm)\n");
        return EXIT_USAGE;
    }
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "payonce: bench: cannot find its own binary\n");
        return EXIT_FAIL;
    }
    exe[n] = '\0';
    struct po_bench_cfg cfg = {.db_url = db,
                               .exe = exe,
                               .orders = (int)orders,
                               .connections = (int)conns,
                               .committers = (int)committers,
                               .batch_max = (int)batch_max,
                               .batch_wait_us = (int)batch_wait,
                               .known_events = (int)known,
                               .plan_rows = plan_rows,
                               .out_dir = cli_opt(o, "out"),
                               .only = cli_opt(o, "only"),
                               .nodes = (int)nodes,
                               .balance = balance ? balance : "first"};
    return po_bench_run(&cfg) == 0 ? 0 : EXIT_FAIL;
}
