/*
 * fixture.c — what the benchmark runs against: a migrated, empty store; a
 * tenant "bench" whose WeChat Pay account trusts a freshly generated
 * simulator identity (sealed with a fresh master key, as `channel set`
 * stores it); merchants and orders; and the requests — WeChat Pay v3
 * callbacks built exactly as the channel sends them (AES-256-GCM resource,
 * SHA256withRSA signature), signed in advance on every core, and tenant
 * API order creations with Idempotency-Keys.
 */
#include "bench_int.h"

#include "../channel/channel.h"
#include "../engine/objects.h"
#include "../service/service.h"
#include "../sim/sim.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TENANT "bench"
#define TENANT2 "bench2"

/* ---- the channel account, as `channel set` builds it ---- */

static po_err set_account(struct po_bench_fx *fx, char *err, size_t errcap)
{
    char apiv3[300], pub[300], window[] = "3600";
    (void)snprintf(apiv3, sizeof apiv3, "%s/sim/apiv3.key", fx->dir);
    (void)snprintf(pub, sizeof pub, "%s/sim/wechatpay_platform_pub.pem", fx->dir);
    /* A window of an hour: callbacks signed before the run stay valid
     * through every scenario (the default is 300 s). */
    struct po_account_opts o = {{"mchid", "appid", "apiv3-key-file", "platform-public-key-file",
                                 "public-key-id", "timestamp-window"},
                                {fx->id->mchid, fx->id->appid, apiv3, pub, fx->id->serial, window},
                                6};
    struct po_account_input in = po_account_input_table(TENANT, fx->master, &o);
    char *doc = NULL;
    po_err rc = po_channel_account_build(po_channel_find("wechatpay"), &in, &doc, err, errcap);
    if (!rc)
        rc = po_account_save(fx->s, TENANT, "wechatpay", doc, err, errcap);
    free(doc);
    return rc;
}

static po_err write_master(struct po_bench_fx *fx)
{
    po_err rc = po_random(fx->master, sizeof fx->master);
    if (rc)
        return rc;
    (void)snprintf(fx->master_file, sizeof fx->master_file, "%s/master.key", fx->dir);
    FILE *f = fopen(fx->master_file, "w");
    if (!f)
        return PO_ERR_IO;
    if (fchmod(fileno(f), 0600)) {
        fclose(f);
        return PO_ERR_IO;
    }
    for (size_t i = 0; i < sizeof fx->master; i++)
        fprintf(f, "%02x", fx->master[i]);
    fputc('\n', f);
    return fclose(f) == 0 ? PO_OK : PO_ERR_IO;
}

/* PostgreSQL: the database must hold no tables (the benchmark fills it). */
static po_err check_empty(struct po_store *s, char *err, size_t errcap)
{
    if (strcmp(po_store_backend(s), "postgres") != 0)
        return PO_OK;
    struct po_rows r;
    po_err rc = po_store_exec(s,
                              "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema"
                              " NOT IN ('pg_catalog', 'information_schema')",
                              PO_NO_PARAMS, &r, NULL, err, errcap);
    if (rc)
        return rc;
    int64_t n = -1;
    rc = po_rows_i64(&r, 0, 0, &n);
    po_rows_free(&r);
    if (!rc && n != 0) {
        po_errf(err, errcap,
                "bench needs an empty database (it creates and fills its own tables); this one"
                " has %lld tables",
                (long long)n);
        rc = PO_ERR_INVALID;
    }
    return rc;
}

po_err po_bench_fx_open(struct po_bench_fx *fx, const char *db_url, const char *dir, char *err,
                        size_t errcap)
{
    memset(fx, 0, sizeof *fx);
    fx->db_url = db_url;
    (void)snprintf(fx->dir, sizeof fx->dir, "%s", dir);
    char simdir[300];
    (void)snprintf(simdir, sizeof simdir, "%s/sim", dir);
    fx->id = calloc(1, sizeof *fx->id);
    if (!fx->id)
        return PO_ERR_NOMEM;
    bool created = false;
    po_err rc = po_store_open(db_url, &fx->s, err, errcap);
    if (!rc)
        rc = check_empty(fx->s, err, errcap);
    if (!rc)
        rc = po_store_migrate(fx->s, NULL, err, errcap);
    if (!rc)
        rc = po_sim_identity_generate(simdir, "pubkey", err, errcap);
    if (!rc)
        rc = po_sim_identity_load(simdir, fx->id, err, errcap);
    if (!rc && (rc = write_master(fx)) != PO_OK)
        po_errf(err, errcap, "cannot write %s/master.key", dir);
    if (!rc)
        rc = po_tenant_add(fx->s, TENANT, "benchmark", NULL, err, errcap);
    if (!rc)
        rc = set_account(fx, err, errcap);
    char key_id[PO_APIKEY_ID_LEN + 1];
    if (!rc)
        rc = po_apikey_create(fx->s, TENANT, fx->apikey, key_id, err, errcap);
    if (!rc)
        rc = po_merchant_add(fx->s, TENANT, "apim", NULL, err, errcap);
    /* A second tenant for the isolation scenarios: its own key and merchant. */
    if (!rc)
        rc = po_tenant_add(fx->s, TENANT2, "benchmark, second tenant", NULL, err, errcap);
    if (!rc)
        rc = po_apikey_create(fx->s, TENANT2, fx->apikey2, key_id, err, errcap);
    if (!rc)
        rc = po_merchant_add(fx->s, TENANT2, "apim", NULL, err, errcap);
    (void)created;
    return rc;
}

void po_bench_fx_close(struct po_bench_fx *fx)
{
    if (fx->id) {
        po_sim_identity_free(fx->id);
        free(fx->id);
    }
    po_store_close(fx->s);
    po_secure_zero(fx->master, sizeof fx->master);
    memset(fx, 0, sizeof *fx);
}

/* ---- merchants and orders ---- */

static void merchant_of(const char *prefix, int i, bool hot, char *out, size_t cap)
{
    if (hot)
        (void)snprintf(out, cap, "%sm", prefix);
    else
        (void)snprintf(out, cap, "%sm%d", prefix, i);
}

static int64_t amount_of(int i)
{
    return 100 + i % 900;
}

/* Merchants [from, to) in one statement (a row set). */
static po_err add_merchants(struct po_store *s, const char *prefix, int from, int to, bool hot,
                            const char *now, char *err, size_t errcap)
{
    enum { CHUNK = 1000 };
    static char ids[CHUNK][PO_ID_MAX + 1];
    struct po_param cells[CHUNK * 3];
    int n = 0;
    for (int i = from; i < to && n < CHUNK; i++, n++) {
        merchant_of(prefix, i, hot, ids[n], sizeof ids[n]);
        cells[3 * n] = PO_TEXT(TENANT);
        cells[3 * n + 1] = PO_TEXT(ids[n]);
        cells[3 * n + 2] = PO_TEXT(now);
    }
    struct po_rowset rs = {3, n, cells};
    return po_store_exec(s,
                         "INSERT INTO merchant (tenant_id, merchant_id, created_at) SELECT v.t,"
                         " v.m, v.c FROM ?{v: t text, m text, c text}",
                         PO_PARAMS(PO_ROWS(&rs)), NULL, NULL, err, errcap);
}

po_err po_bench_orders(struct po_bench_fx *fx, const char *prefix, int n, bool hot, char *err,
                       size_t errcap)
{
    enum { CHUNK = 1000 };
    char now[PO_TIME_SIZE];
    po_clock_now_iso(now, sizeof now);
    for (int from = 0; from < n; from += CHUNK) {
        int to = from + CHUNK < n ? from + CHUNK : n;
        po_err rc = po_store_begin(fx->s, err, errcap);
        if (rc)
            return rc;
        if (!hot || from == 0)
            rc = add_merchants(fx->s, prefix, from, hot ? from + 1 : to, hot, now, err, errcap);
        for (int i = from; !rc && i < to; i++) {
            char no[PO_ID_MAX + 1], m[PO_ID_MAX + 1];
            (void)snprintf(no, sizeof no, "%s-%d", prefix, i);
            merchant_of(prefix, i, hot, m, sizeof m);
            struct po_order_spec o = {.tenant = TENANT,
                                      .merchant = m,
                                      .out_trade_no = no,
                                      .amount_minor = amount_of(i),
                                      .currency = "CNY",
                                      .channel = "wechatpay"};
            bool created = false;
            rc = po_order_insert(fx->s, &o, &created, NULL, 0, err, errcap);
        }
        if (!rc)
            rc = po_store_commit(fx->s, err, errcap);
        if (rc) {
            po_store_rollback(fx->s);
            return rc;
        }
    }
    return PO_OK;
}

/* ---- requests ---- */

static po_err http_request(struct po_lg_req *r, const char *path, const char *headers,
                           const char *body, size_t body_len)
{
    char *head = NULL;
    po_err rc = po_fmt_alloc(&head,
                             "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type:"
                             " application/json\r\nContent-Length: %zu\r\n%s\r\n",
                             path, body_len, headers);
    if (rc)
        return rc;
    size_t hl = strlen(head);
    r->buf = malloc(hl + body_len);
    if (!r->buf) {
        free(head);
        return PO_ERR_NOMEM;
    }
    memcpy(r->buf, head, hl);
    memcpy(r->buf + hl, body, body_len);
    r->len = hl + body_len;
    free(head);
    return PO_OK;
}

struct signer {
    struct po_bench_fx *fx;
    const char *prefix;
    int from, to, copies;
    int64_t now;
    struct po_lg_req *out;
    po_err rc;
};

static void *sign_range(void *arg)
{
    struct signer *g = arg;
    for (int i = g->from; i < g->to && !g->rc; i++) {
        char no[PO_ID_MAX + 1], txn[64];
        (void)snprintf(no, sizeof no, "%s-%d", g->prefix, i);
        po_sim_new_txn("wechatpay", txn, sizeof txn);
        struct po_sim_payment p = {"wechatpay", no, txn, amount_of(i), "CNY"};
        struct po_sim_request sr;
        memset(&sr, 0, sizeof sr);
        g->rc = po_sim_payment_request(g->fx->id, &p, g->now, &sr);
        char headers[2048] = "";
        size_t used = 0;
        for (int h = 0; !g->rc && h < sr.nheaders; h++) {
            int w = snprintf(headers + used, sizeof headers - used, "%s: %s\r\n", sr.name[h],
                             sr.value[h]);
            if (w < 0 || (size_t)w >= sizeof headers - used)
                g->rc = PO_ERR_LIMIT;
            else
                used += (size_t)w;
        }
        struct po_lg_req *first = &g->out[(size_t)i * (size_t)g->copies];
        if (!g->rc)
            g->rc = http_request(first, "/notify/wechatpay/" TENANT, headers, sr.body, sr.body_len);
        for (int c = 1; !g->rc && c < g->copies; c++) {
            struct po_lg_req *r = first + c;
            r->buf = malloc(first->len);
            if (!r->buf) {
                g->rc = PO_ERR_NOMEM;
                break;
            }
            memcpy(r->buf, first->buf, first->len);
            r->len = first->len;
        }
        po_sim_request_free(&sr);
    }
    return NULL;
}

void po_bench_reqs_free(struct po_lg_req *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++)
        free(r[i].buf);
    free(r);
}

po_err po_bench_callbacks(struct po_bench_fx *fx, const char *prefix, int n, int copies,
                          struct po_lg_req **out)
{
    enum { THREADS_MAX = 16 };
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = cores < 1 ? 1 : cores > THREADS_MAX ? THREADS_MAX : (int)cores;
    struct po_lg_req *reqs = calloc((size_t)n * (size_t)copies, sizeof *reqs);
    if (!reqs)
        return PO_ERR_NOMEM;
    struct signer g[THREADS_MAX];
    pthread_t th[THREADS_MAX];
    bool started[THREADS_MAX] = {false};
    int64_t now = (int64_t)time(NULL);
    for (int t = 0; t < nt; t++) {
        g[t] = (struct signer){fx, prefix, n * t / nt, n * (t + 1) / nt, copies, now, reqs, PO_OK};
        started[t] = pthread_create(&th[t], NULL, sign_range, &g[t]) == 0;
        if (!started[t])
            sign_range(&g[t]);
    }
    po_err rc = PO_OK;
    for (int t = 0; t < nt; t++) {
        if (started[t])
            pthread_join(th[t], NULL);
        if (g[t].rc && !rc)
            rc = g[t].rc;
    }
    if (rc) {
        po_bench_reqs_free(reqs, (size_t)n * (size_t)copies);
        return rc;
    }
    *out = reqs;
    return PO_OK;
}

po_err po_bench_api_requests(const char *apikey, const char *prefix, int n, struct po_lg_req **out)
{
    struct po_lg_req *reqs = calloc((size_t)n, sizeof *reqs);
    if (!reqs)
        return PO_ERR_NOMEM;
    po_err rc = PO_OK;
    for (int i = 0; i < n && !rc; i++) {
        char headers[256], body[256];
        (void)snprintf(headers, sizeof headers,
                       "Authorization: Bearer %s\r\nIdempotency-Key: %s-key-%d\r\n", apikey, prefix,
                       i);
        int bl = snprintf(body, sizeof body,
                          "{\"merchant\":\"apim\",\"out_trade_no\":\"%s-%06d\",\"amount\":%lld,"
                          "\"currency\":\"CNY\",\"channel\":\"wechatpay\"}",
                          prefix, i, (long long)amount_of(i));
        rc = http_request(&reqs[i], "/v1/orders", headers, body, (size_t)bl);
    }
    if (rc) {
        po_bench_reqs_free(reqs, (size_t)n);
        return rc;
    }
    *out = reqs;
    return PO_OK;
}

po_err po_bench_credits(struct po_bench_fx *fx, const char *prefix, int64_t *journals,
                        int64_t *paid)
{
    /* "<prefix>-" <= out_trade_no < "<prefix>." : a range the primary key
     * and journal_order indexes answer ('.' follows '-'). */
    char lo[PO_ID_MAX + 2], hi[PO_ID_MAX + 2];
    (void)snprintf(lo, sizeof lo, "%s-", prefix);
    (void)snprintf(hi, sizeof hi, "%s.", prefix);
    struct po_rows r;
    po_err rc = po_store_exec(fx->s,
                              "SELECT (SELECT COUNT(*) FROM journal WHERE tenant_id = ? AND"
                              " out_trade_no >= ? AND out_trade_no < ? AND kind = 'PAY'),"
                              " (SELECT COUNT(*) FROM pay_order WHERE tenant_id = ? AND"
                              " out_trade_no >= ? AND out_trade_no < ? AND status = 'PAID')",
                              PO_PARAMS(PO_TEXT(TENANT), PO_TEXT(lo), PO_TEXT(hi), PO_TEXT(TENANT),
                                        PO_TEXT(lo), PO_TEXT(hi)),
                              &r, NULL, NULL, 0);
    if (rc)
        return rc;
    rc = po_rows_i64(&r, 0, 0, journals);
    if (!rc)
        rc = po_rows_i64(&r, 0, 1, paid);
    po_rows_free(&r);
    return rc;
}
