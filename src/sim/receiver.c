/*
 * receiver.c — `payonce sim receiver`: the tenant's own system at the other
 * end of payonce's webhooks (docs/webhooks.md), as a tenant should write
 * it: it verifies Payonce-Signature (HMAC-SHA256 of "t.body" with the
 * endpoint's secret, t within 5 minutes), acts on each event id once (a
 * delivery of an id it has seen is answered 2xx and ignored), records every
 * new event as a JSON line, and answers 2xx. For the demo and tests it can
 * be told to refuse its first N deliveries (500) or to start listening only
 * after a while (down).
 */
#include "listen.h"
#include "sim_int.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SEEN_MAX 100000

struct po_sim_receiver {
    struct MHD_Daemon *daemon;
    struct po_sim_receiver_cfg cfg;
    pthread_mutex_t mu;
    char **seen; /* event ids acted on */
    int nseen;
    int refused_left;
    FILE *record;
    struct po_sim_receiver_stats stats;
};

struct upload {
    struct po_body body;
};

/* Payonce-Signature: t=<unix>,v1=<hex>[,v1=<hex>…]; true when one v1 is
 * HMAC-SHA256(secret, "t.body") and t is within 300 s of now. */
bool po_sim_webhook_verify(const char *secret, const char *header, const char *body, size_t len,
                           int64_t now)
{
    if (!header || strncmp(header, "t=", 2) != 0)
        return false;
    char *end = NULL;
    long long t = strtoll(header + 2, &end, 10);
    if (end == header + 2 || t <= 0 || (now - t > 300 || t - now > 300))
        return false;
    size_t tl = (size_t)(end - header - 2);
    unsigned char *msg = malloc(tl + 1 + len), mac[32];
    if (!msg)
        return false;
    memcpy(msg, header + 2, tl);
    msg[tl] = '.';
    memcpy(msg + tl + 1, body, len);
    po_err rc = po_hmac_sha256(secret, strlen(secret), msg, tl + 1 + len, mac);
    free(msg);
    if (rc)
        return false;
    char want[65];
    for (int i = 0; i < 32; i++)
        (void)snprintf(want + 2 * i, 3, "%02x", mac[i]);
    bool ok = false;
    for (const char *v = strstr(end, ",v1="); v; v = strstr(v + 1, ",v1="))
        ok |= strlen(v + 4) >= 64 && po_ct_equal(v + 4, want, 64) &&
              (v[4 + 64] == '\0' || v[4 + 64] == ',');
    return ok;
}

static bool seen_before(struct po_sim_receiver *r, const char *id)
{
    for (int i = 0; i < r->nseen; i++)
        if (strcmp(r->seen[i], id) == 0)
            return true;
    if (r->nseen < SEEN_MAX) {
        char **n = realloc(r->seen, (size_t)(r->nseen + 1) * sizeof *n);
        if (n) {
            r->seen = n;
            r->seen[r->nseen] = strdup(id);
            r->nseen += r->seen[r->nseen] != NULL;
        }
    }
    return false;
}

/* One delivery: its answer and what the receiver says of it. */
static unsigned take(struct po_sim_receiver *r, const char *sig, const char *body, size_t len)
{
    json_t *j = json_loadb(body, len, 0, NULL);
    const char *id = json_string_value(json_object_get(j, "id")),
               *type = json_string_value(json_object_get(j, "type"));
    json_t *obj = json_object_get(json_object_get(j, "data"), "object");
    const char *no = json_string_value(json_object_get(obj, "out_trade_no"));
    unsigned status = 200;
    const char *verdict;
    pthread_mutex_lock(&r->mu);
    r->stats.deliveries++;
    if (!po_sim_webhook_verify(r->cfg.secret, sig, body, len, (int64_t)time(NULL)) || !id ||
        !type) {
        status = 400;
        r->stats.bad_signatures++;
        verdict = "refused: the signature does not verify";
    } else if (r->refused_left > 0) {
        r->refused_left--;
        status = 500;
        verdict = "answered 500 (--fail): payonce will retry";
    } else if (seen_before(r, id)) {
        r->stats.duplicates++;
        verdict = "seen before: acknowledged, not acted on again";
    } else {
        r->stats.events++;
        verdict = "new: acted on";
        if (r->record) {
            fprintf(r->record, "%.*s\n", (int)len, body);
            fflush(r->record);
        }
    }
    printf("receiver: %s %-18s %-10s %s\n", id ? id : "?", type ? type : "?", no ? no : "",
           verdict);
    fflush(stdout);
    pthread_mutex_unlock(&r->mu);
    json_decref(j);
    return status;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *size, void **state)
{
    (void)url, (void)version;
    struct po_sim_receiver *r = cls;
    struct upload *up = *state;
    if (!up) {
        if (strcmp(method, "POST") != 0)
            return MHD_NO;
        *state = up = calloc(1, sizeof *up);
        return up ? MHD_YES : MHD_NO;
    }
    if (*size) {
        if (po_body_append(&up->body, data, *size, 64 * 1024))
            return MHD_NO;
        *size = 0;
        return MHD_YES;
    }
    unsigned status =
        up->body.too_large
            ? 413
            : take(r, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Payonce-Signature"),
                   up->body.data ? up->body.data : "", up->body.len);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(0, (void *)(uintptr_t) "", MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    enum MHD_Result ok = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ok;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    struct upload *up = *state;
    if (up)
        po_body_free(&up->body);
    free(up);
    *state = NULL;
}

po_err po_sim_receiver_start(const struct po_sim_receiver_cfg *cfg, struct po_sim_receiver **out,
                             char *err, size_t errcap)
{
    struct po_sim_receiver *r = calloc(1, sizeof *r);
    if (!r)
        return PO_ERR_NOMEM;
    r->cfg = *cfg;
    r->refused_left = cfg->fail_first;
    pthread_mutex_init(&r->mu, NULL);
    if (cfg->record_path && !(r->record = fopen(cfg->record_path, "a"))) {
        po_errf(err, errcap, "cannot write %s", cfg->record_path);
        po_sim_receiver_stop(r);
        return PO_ERR_IO;
    }
    if (cfg->down_ms > 0) { /* down: connections are refused meanwhile */
        struct timespec t = {cfg->down_ms / 1000, (long)(cfg->down_ms % 1000) * 1000000L};
        nanosleep(&t, NULL);
    }
    r->daemon = po_sim_listen(cfg->listen, on_request, on_completed, NULL, r, err, errcap);
    if (!r->daemon) {
        po_sim_receiver_stop(r);
        return PO_ERR_IO;
    }
    *out = r;
    return PO_OK;
}

unsigned po_sim_receiver_port(const struct po_sim_receiver *r)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(r->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return i ? i->port : 0;
}

void po_sim_receiver_stats(struct po_sim_receiver *r, struct po_sim_receiver_stats *out)
{
    pthread_mutex_lock(&r->mu);
    *out = r->stats;
    pthread_mutex_unlock(&r->mu);
}

void po_sim_receiver_stop(struct po_sim_receiver *r)
{
    if (!r)
        return;
    if (r->daemon)
        MHD_stop_daemon(r->daemon);
    if (r->record)
        fclose(r->record);
    for (int i = 0; i < r->nseen; i++)
        free(r->seen[i]);
    free(r->seen);
    pthread_mutex_destroy(&r->mu);
    free(r);
}
