/*
 * bench_api.c DB_URL [REQUESTS] [CLIENTS] — what an Idempotency-Key costs.
 *
 * Starts an in-process gateway on loopback against DB_URL (an empty,
 * migrated database is prepared: tenant, merchant, API key) and runs, one
 * after the other with CLIENTS concurrent keep-alive clients, REQUESTS of:
 *   create, no key       POST /v1/orders, a new out_trade_no each
 *   create, new key      the same with a new Idempotency-Key each
 *                        (adds the claim: one more committed transaction)
 *   replay               one stored request repeated with its key
 *   duplicate, no key    one out_trade_no repeated without a key
 *   GET order            GET /v1/orders/{out_trade_no}
 * and prints the conditions, requests/s, p50/p99 latency and each phase's
 * throughput relative to "create, no key" measured in the same run (the
 * machines are shared; compare ratios, not absolute numbers).
 * Everything runs on 127.0.0.1 and stops by itself.
 */
#include "../src/core/core.h"
#include "../src/engine/admin.h"
#include "../src/http/http.h"
#include "../src/service/service.h"
#include "../src/store/store.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CLIENTS_MAX 64

static unsigned port;
static char key[PO_APIKEY_LEN + 1];

enum phase { CREATE_NOKEY, CREATE_KEY, REPLAY, DUP_NOKEY, GET_ORDER, PHASES };
static const char *const names[PHASES] = {"create, no key", "create, new key", "replay",
                                          "duplicate, no key", "GET order"};

struct client {
    enum phase ph;
    int id, n;
    double *lat; /* ms per request */
    int errors;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static size_t sink(char *d, size_t sz, size_t n, void *ctx)
{
    (void)d;
    (void)ctx;
    return sz * n;
}

static void *run_client(void *arg)
{
    struct client *c = arg;
    CURL *h = curl_easy_init();
    char url[256], auth[200], idem[96], body[256];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    for (int i = 0; i < c->n; i++) {
        struct curl_slist *hl = curl_slist_append(NULL, auth);
        hl = curl_slist_append(hl, "Content-Type: application/json");
        char no[64];
        snprintf(no, sizeof no, "B-%d-%d-%d", (int)c->ph, c->id, i);
        if (c->ph == REPLAY || c->ph == DUP_NOKEY || c->ph == GET_ORDER)
            snprintf(no, sizeof no, "B-SAME-%d", (int)c->ph == REPLAY);
        snprintf(body, sizeof body, "{\"merchant\":\"m1\",\"out_trade_no\":\"%s\",\"amount\":100}",
                 no);
        if (c->ph == CREATE_KEY || c->ph == REPLAY) {
            snprintf(idem, sizeof idem, "Idempotency-Key: k-%s", no);
            hl = curl_slist_append(hl, idem);
        }
        if (c->ph == GET_ORDER) {
            snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/orders/%s", port, no);
            curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        } else {
            snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/orders", port);
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        }
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
        double t0 = now_ms();
        long status = 0;
        if (curl_easy_perform(h) == CURLE_OK)
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        c->lat[i] = now_ms() - t0;
        if (status != 200 && status != 201)
            c->errors++;
        curl_slist_free_all(hl);
    }
    curl_easy_cleanup(h);
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double run_phase(enum phase ph, int requests, int clients, double *p50, double *p99,
                        int *errors)
{
    pthread_t th[CLIENTS_MAX];
    struct client c[CLIENTS_MAX];
    double *lat = calloc((size_t)requests, sizeof *lat);
    int per = requests / clients, off = 0;
    double t0 = now_ms();
    for (int i = 0; i < clients; i++) {
        c[i] = (struct client){ph, i, per, lat + off, 0};
        off += per;
        pthread_create(&th[i], NULL, run_client, &c[i]);
    }
    *errors = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(th[i], NULL);
        *errors += c[i].errors;
    }
    double secs = (now_ms() - t0) / 1e3;
    qsort(lat, (size_t)off, sizeof *lat, cmp);
    *p50 = lat[off / 2];
    *p99 = lat[off * 99 / 100];
    free(lat);
    return off / secs;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_api DB_URL [REQUESTS] [CLIENTS]\n");
        return 2;
    }
    const char *url = argv[1];
    int requests = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 2000;
    int clients = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 8;
    if (requests < 100 || requests > 1000000 || clients < 1 || clients > CLIENTS_MAX) {
        fprintf(stderr, "bench_api: REQUESTS 100..1000000, CLIENTS 1..%d\n", CLIENTS_MAX);
        return 2;
    }
    po_log_set_level(PO_LOG_ERROR);
    struct po_store *s = NULL;
    char err[PO_ERRBUF_MAX] = "", kid[PO_APIKEY_ID_LEN + 1];
    if (po_store_open(url, &s, err, sizeof err) || po_store_migrate(s, NULL, err, sizeof err) ||
        po_tenant_add(s, "bench", NULL, err, sizeof err) ||
        po_merchant_add(s, "bench", "m1", err, sizeof err) ||
        po_apikey_create(s, "bench", key, kid, err, sizeof err)) {
        fprintf(stderr, "bench_api: %s (the database must be empty)\n", err);
        return 1;
    }
    po_store_close(s);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct po_server_cfg cfg = {.listen = "127.0.0.1:0", .db_url = url, .pool_size = 8};
    struct po_server *srv = NULL;
    if (po_server_start(&cfg, &srv, err, sizeof err)) {
        fprintf(stderr, "bench_api: %s\n", err);
        return 1;
    }
    port = po_server_port(srv);
    /* The one stored request the replays repeat, and the duplicated order. */
    int e = 0;
    double p50, p99;
    (void)run_phase(REPLAY, 1, 1, &p50, &p99, &e);
    (void)run_phase(DUP_NOKEY, 1, 1, &p50, &p99, &e);
    printf("# bench_api: %s, %d requests per phase, %d keep-alive clients, pool 8, loopback,"
           " 2 cores shared\n",
           strncmp(url, "sqlite:", 7) == 0 ? "SQLite (WAL, synchronous=FULL)" : "PostgreSQL",
           requests, clients);
    printf("%-20s %10s %9s %9s %8s %7s\n", "phase", "req/s", "p50 ms", "p99 ms", "vs first",
           "errors");
    double base = 0;
    for (int ph = 0; ph < PHASES; ph++) {
        double rps = run_phase((enum phase)ph, requests, clients, &p50, &p99, &e);
        if (ph == 0)
            base = rps;
        printf("%-20s %10.0f %9.2f %9.2f %8.2f %7d\n", names[ph], rps, p50, p99, rps / base, e);
    }
    po_server_stop(srv);
    curl_global_cleanup();
    return 0;
}
