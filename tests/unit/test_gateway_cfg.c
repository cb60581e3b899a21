/*
 * test_gateway_cfg.c — the gateway takes every value from the one option
 * table (src/service/gateway/options.c, gateway.c):
 *   - po_gateway_cfg_init sets every field an option names to the table's
 *     default (and the listeners to their shown defaults);
 *   - each option's field is its own: setting one changes that field and
 *     no other byte of the configuration;
 *   - po_gateway_open refuses a value outside the table's bounds, naming
 *     the option, and starts nothing (a body limit of 1 MiB, which the
 *     server once accepted against the table's 64 KiB, included);
 *   - a configuration within the bounds opens and closes (SQLite in a
 *     temporary file), with the committer forced to one thread on SQLite.
 */
#include "../../src/service/gateway/gateway.h"
#include "../../src/service/gateway/options.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void defaults_come_from_the_table(void **state)
{
    (void)state;
    struct po_gateway_cfg g;
    po_gateway_cfg_init(&g);
    int mapped = 0;
    for (int i = 0; i < po_options_count; i++) {
        const struct po_option *o = &po_options[i];
        if (o->type != PO_OPT_INT)
            continue;
        assert_true(o->size); /* every numeric option fills a field */
        assert_int_equal(po_option_get(&g, o), o->dflt);
        mapped++;
    }
    assert_true(mapped > 20);
    assert_string_equal(g.listen, po_option_find("listen")->sdflt);
    assert_null(g.ops_listen);
    assert_int_equal(g.body_max, 64 * 1024);
    assert_int_equal(g.webhooks.senders, 8);
    assert_null(g.db_url);
    assert_null(g.master_key);
    assert_false(g.no_jobs);
}

static void each_option_its_own_field(void **state)
{
    (void)state;
    for (int i = 0; i < po_options_count; i++) {
        const struct po_option *o = &po_options[i];
        if (o->type != PO_OPT_INT || !o->size)
            continue;
        struct po_gateway_cfg a, b;
        po_gateway_cfg_init(&a);
        po_gateway_cfg_init(&b);
        po_option_set(&b, o, o->dflt == o->max ? o->min : o->max);
        assert_int_equal(po_option_get(&b, o), o->dflt == o->max ? o->min : o->max);
        /* exactly the field's bytes differ */
        const unsigned char *x = (const unsigned char *)&a, *y = (const unsigned char *)&b;
        for (size_t k = 0; k < sizeof a; k++)
            if (k < o->off || k >= o->off + o->size)
                assert_int_equal(x[k], y[k]);
    }
}

static char db[64];

static void out_of_bounds_refused_by_name(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int64_t v;
    } bad[] = {{"body-max", 1024 * 1024}, {"workers", 0},    {"callback-deadline-ms", 100},
               {"batch-max", 100000},     {"committers", 0}, {"webhook-poll-ms", 1},
               {"max-connections", 0},    {"threads", 65}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct po_gateway_cfg g;
        po_gateway_cfg_init(&g);
        g.db_url = db;
        g.no_jobs = true;
        po_option_set(&g, po_option_find(bad[i].name), bad[i].v);
        struct po_gateway *gw = NULL;
        char err[PO_ERRBUF_SIZE] = "";
        assert_int_equal(po_gateway_open(&g, &gw, err, sizeof err), PO_ERR_INVALID);
        assert_null(gw);
        assert_non_null(strstr(err, bad[i].name));
    }
    /* nothing was created: the database file was never opened */
    assert_int_equal(access(db + 7, F_OK), -1);
}

static void opens_within_bounds(void **state)
{
    (void)state;
    struct po_gateway_cfg g;
    po_gateway_cfg_init(&g);
    g.db_url = db;
    g.no_jobs = true;
    g.webhooks.senders = 0;
    g.committers = 4;
    struct po_gateway *gw = NULL;
    char err[PO_ERRBUF_SIZE] = "";
    assert_int_equal(po_gateway_open(&g, &gw, err, sizeof err), PO_OK);
    const struct po_gateway_parts *p = po_gateway_parts(gw);
    assert_non_null(p->pool);
    assert_non_null(p->cb.committer);
    assert_non_null(p->cb.workers);
    assert_null(p->webhooks);
    assert_int_equal(p->cfg->committers, 1); /* SQLite: one writer */
    assert_int_equal(p->cb.deadline_ms, 4000);
    po_gateway_close(gw);
}

int main(void)
{
    char dir[] = "/tmp/payonce-gwcfg-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    (void)snprintf(db, sizeof db, "sqlite:%s/gw.db", dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_come_from_the_table),
        cmocka_unit_test(each_option_its_own_field),
        cmocka_unit_test(out_of_bounds_refused_by_name),
        cmocka_unit_test(opens_within_bounds),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    (void)unlink(db + 7);
    (void)rmdir(dir);
    return rc;
}
