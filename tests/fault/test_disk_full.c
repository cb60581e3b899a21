/*
 * test_disk_full.c — SQLite with a full disk (issue 11's database faults).
 *
 *   test_disk_full sqlite
 *
 * The engine's connection may not grow the database file past its current
 * size (PRAGMA max_page_count: SQLite then fails writes exactly as on a full
 * disk, SQLITE_FULL). Payments are applied until one does not fit: it must
 * be answered `retry` (the channel's FAIL) with nothing of it stored, never
 * `applied`. Once there is room again the channel's retry credits it, every
 * payment exactly once, and verify is clean.
 */
#include "../support/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ORDERS 400

static int64_t one(struct po_store *s, const char *sql)
{
    return t_count(s, sql, NULL, 0);
}

static void pragma(struct po_store *s, const char *sql)
{
    char err[PO_ERRBUF_SIZE] = "";
    if (po_store_exec(s, sql, NULL, 0, NULL, NULL, err, sizeof err)) {
        fprintf(stderr, "FAIL: %s: %s\n", sql, err);
        exit(1);
    }
}

/* "sqlite" (argv[1]; PostgreSQL skips). */
static const char *backend;

/* The disk fills mid-run: the payment that does not fit answers retry with
 * nothing stored; with room again every payment is credited once. */
static void full_disk(void **state)
{
    (void)state;
    char url[T_URL_MAX];
    t_db_create(backend, url, sizeof url);
    struct po_store *s = t_open(url);
    t_seed_tenant(s);
    char no[32], txn[32];
    for (int i = 0; i < ORDERS; i++) {
        snprintf(no, sizeof no, "FULL-%d", i);
        t_seed_order(s, no, 100 + i);
    }
    /* The disk is full: not one page more than the file has now. */
    int64_t pages = one(s, "PRAGMA page_count");
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA max_page_count = %lld", (long long)pages);
    pragma(s, sql);
    int applied = 0, refused_at = -1;
    struct po_outcome o = {0};
    for (int i = 0; i < ORDERS && refused_at < 0; i++) {
        snprintf(no, sizeof no, "FULL-%d", i);
        snprintf(txn, sizeof txn, "42000%d", i);
        struct po_event ev = t_pay_event(no, txn, 100 + i);
        int64_t records = one(s, "SELECT COUNT(*) FROM notify_log");
        o = t_apply(s, NULL, &ev);
        if (o.kind == PO_OUT_APPLIED) {
            applied++;
            continue;
        }
        refused_at = i;
        T_CHECK(o.kind == PO_OUT_RETRY, "full disk: outcome %s, expected retry",
                po_outcome_name(o.kind));
        T_CHECK(one(s, "SELECT COUNT(*) FROM notify_log") == records,
                "full disk: a processed record was stored");
        struct po_param p[] = {PO_TEXT(no)};
        T_CHECK(t_count(s,
                        "SELECT COUNT(*) FROM pay_order WHERE out_trade_no = ? AND"
                        " status = 'PAYING'",
                        p, 1) == 1 &&
                    t_count(s, "SELECT COUNT(*) FROM journal WHERE out_trade_no = ?", p, 1) == 0,
                "full disk: the refused payment left a trace");
    }
    T_CHECK(refused_at >= 0, "the disk never filled (%d applied)", applied);
    /* Room again: the channel's retries, and the rest, each credited once. */
    pragma(s, "PRAGMA max_page_count = 1073741823");
    for (int i = refused_at; i >= 0 && i < ORDERS; i++) {
        snprintf(no, sizeof no, "FULL-%d", i);
        snprintf(txn, sizeof txn, "42000%d", i);
        struct po_event ev = t_pay_event(no, txn, 100 + i);
        o = t_apply(s, NULL, &ev);
        T_CHECK(o.kind == PO_OUT_APPLIED, "after the disk: %s %s", no, po_outcome_name(o.kind));
    }
    T_CHECK(one(s, "SELECT COUNT(*) FROM journal WHERE kind = 'PAY'") == ORDERS,
            "every payment credited once");
    T_CHECK(t_verify(s) == 0, "verify");
    t_figure("# disk-full[sqlite]: %d payments fit, the next answered retry with nothing stored;"
             " with room again all %d credited once, verify clean\n",
             applied, ORDERS);
    po_store_close(s);
    t_db_drop(url);
}

int main(int argc, char **argv)
{
    backend = t_backend(argc, argv);
    if (strcmp(backend, "sqlite") != 0)
        return 77; /* SQLite's file; PostgreSQL's faults: db_faults */
    po_log_set_level(PO_LOG_ERROR);
    const struct CMUnitTest tests[] = {cmocka_unit_test(full_disk)};
    return T_RUN_GROUP("disk-full[sqlite]", tests, NULL, NULL);
}
