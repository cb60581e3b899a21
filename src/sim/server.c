/*
 * server.c — `payonce sim serve`: the simulated channels' own APIs (see
 * sim.h), behind libmicrohttpd. State lives in the simulator's directory:
 * payments.jsonl (written by `payonce sim pay`, lost payments included —
 * the channel took the money) and refunds.jsonl (written here). Both are
 * read afresh on every request. The APIs themselves are in
 * sim_wechatpay.c and sim_alipay.c.
 */
#include "listen.h"
#include "sim_int.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct req {
    struct po_body body;
    char *uri;  /* the request target as sent (path and query, undecoded) */
    bool begun; /* its headers seen (the first call) */
};

/* The raw request target, kept for the handlers (WeChat Pay signs it as
 * sent); the first *req_cls of the request. Bounded like a request line. */
static void *uri_of(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    (void)c;
    struct req *q = calloc(1, sizeof *q);
    if (q && !(q->uri = strndup(uri, 8192))) {
        free(q);
        q = NULL;
    }
    return q;
}

/* ---- libmicrohttpd ---- */

static const char *header_of(void *ctx, const char *name)
{
    return MHD_lookup_connection_value((struct MHD_Connection *)ctx, MHD_HEADER_KIND, name);
}

static const char *arg_of(void *ctx, const char *name)
{
    return MHD_lookup_connection_value((struct MHD_Connection *)ctx, MHD_GET_ARGUMENT_KIND, name);
}

struct args_walk {
    void (*each)(void *each_ctx, const char *k, const char *v);
    void *each_ctx;
};

static enum MHD_Result one_arg(void *cls, enum MHD_ValueKind kind, const char *k, const char *v)
{
    (void)kind;
    struct args_walk *w = cls;
    w->each(w->each_ctx, k, v);
    return MHD_YES;
}

static void args_of(void *ctx, void (*each)(void *each_ctx, const char *k, const char *v),
                    void *each_ctx)
{
    struct args_walk w = {each, each_ctx};
    MHD_get_connection_values((struct MHD_Connection *)ctx, MHD_GET_ARGUMENT_KIND, one_arg, &w);
}

/* One character of an answer changed, near its middle: a digit moved on
 * by one (the text stays well-formed); in a file, a bit of its data: a
 * zip's first file's, a gzip's deflate stream (a bit of a header's date
 * would change nothing the file says). */
static void sim_tamper(char *b, size_t n)
{
    const unsigned char *u = (const unsigned char *)b;
    if (n > 30 && memcmp(b, "PK\x03\x04", 4) == 0) {
        size_t size =
            (size_t)u[18] | (size_t)u[19] << 8 | (size_t)u[20] << 16 | (size_t)u[21] << 24;
        size_t at = 30 + ((size_t)u[26] | (size_t)u[27] << 8) +
                    ((size_t)u[28] | (size_t)u[29] << 8) + size / 2;
        if (size && at < n) {
            b[at] ^= 0x01;
            return;
        }
    }
    if (n > 36 && u[0] == 0x1f && u[1] == 0x8b) { /* gzip: its deflate data */
        b[n / 2] ^= 0x01;
        return;
    }
    for (size_t k = 0; k < n; k++) {
        size_t i = (n / 2 + k) % n;
        if (b[i] >= '0' && b[i] <= '9') {
            b[i] = b[i] == '9' ? '0' : (char)(b[i] + 1);
            return;
        }
    }
    b[n / 2] ^= 0x01;
}

/* Queues the answer, signed like WeChat Pay's when asked: Wechatpay-*
 * headers over "ts\nnonce\nbody\n" with the platform key. */
static enum MHD_Result send_answer(struct po_sim_server *s, struct MHD_Connection *c,
                                   struct sim_call *call)
{
    const char *body = call->body_out ? call->body_out : "";
    size_t blen = call->body_out_len ? call->body_out_len : strlen(body);
    /* tampered on the way: what is sent differs from what was signed */
    char *changed = call->tamper && blen ? malloc(blen) : NULL;
    if (changed) {
        memcpy(changed, body, blen);
        sim_tamper(changed, blen);
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(
        blen, changed ? changed : (void *)(uintptr_t)body, MHD_RESPMEM_MUST_COPY);
    free(changed);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", call->type ? call->type : "application/json");
    struct po_sim_request sig;
    memset(&sig, 0, sizeof sig);
    if (call->wx_signed && po_sim_wechatpay_sign(s->id.wx_key, s->id.serial, body, blen,
                                                 (int64_t)time(NULL), &sig) == PO_OK)
        for (int i = 0; i < sig.nheaders; i++) {
            /* nothing to change in an empty answer: its signed timestamp */
            if (call->tamper && !blen && strcmp(sig.name[i], "Wechatpay-Timestamp") == 0)
                sim_tamper(sig.value[i], strlen(sig.value[i]));
            MHD_add_response_header(r, sig.name[i], sig.value[i]);
        }
    enum MHD_Result ok = MHD_queue_response(c, call->status ? call->status : 500, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    (void)version;
    struct po_sim_server *s = cls;
    struct req *q = *req_cls;
    if (!q) /* out of memory when the request began */
        return MHD_NO;
    if (!q->begun) {
        q->begun = true;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        return po_body_append(&q->body, upload_data, n, PO_BODY_MAX) ? MHD_NO : MHD_YES;
    }
    struct sim_call call = {.method = method,
                            .path = url,
                            .header = header_of,
                            .arg = arg_of,
                            .args = args_of,
                            .ctx = c,
                            .uri = q->uri,
                            .body = q->body.data ? q->body.data : ""};
    /* the channel failing, as the tests asked (DIR/faults) */
    int fault = q->body.too_large ? -1 : sim_fault_take(s, &call, NULL);
    call.tamper = fault == PO_SIM_FAULT_TAMPER;
    bool lost = fault == PO_SIM_FAULT_LOST; /* served, its answer held */
    if (q->body.too_large)
        sim_error(&call, 413, "PARAM_ERROR", "body too large");
    else if (fault >= 0 && !call.tamper && !lost)
        sim_fault_answer(&call, fault);
    else if (po_sim_wx_route(s, &call) < 0 && po_sim_alipay_route(s, &call) < 0 &&
             po_sim_stripe_route(s, &call) < 0)
        sim_error(&call, 404, "NOT_FOUND", "no such API in the simulator");
    if (lost) {
        struct timespec ts = {PO_SIM_HANG_MS / 1000, (PO_SIM_HANG_MS % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    enum MHD_Result r = send_answer(s, c, &call);
    free(call.body_out);
    return r;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct req *q = *req_cls;
    if (q) {
        po_body_free(&q->body);
        free(q->uri);
    }
    free(q);
    *req_cls = NULL;
}

struct MHD_Daemon *po_sim_listen(const char *listen, MHD_AccessHandlerCallback handler,
                                 MHD_RequestCompletedCallback completed,
                                 void *(*uri_log)(void *cls, const char *uri,
                                                  struct MHD_Connection *c),
                                 void *cls, char *err, size_t errcap)
{
    const char *colon = strrchr(listen ? listen : "", ':');
    int64_t port = 0;
    if (!colon || po_parse_i64(colon + 1, 0, 65535, &port) ||
        strncmp(listen, "127.0.0.1:", 10) != 0) {
        po_errf(err, errcap, "--listen must be 127.0.0.1:PORT (the simulator stays on loopback)");
        return NULL;
    }
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL, 0, NULL,
        NULL, handler, cls, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&a,
        MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_CONNECTION_TIMEOUT, 10u,
        MHD_OPTION_NOTIFY_COMPLETED, completed, cls, MHD_OPTION_URI_LOG_CALLBACK, uri_log, cls,
        MHD_OPTION_END);
    if (!d)
        po_errf(err, errcap, "cannot listen on %s", listen);
    return d;
}

po_err po_sim_server_start(const struct po_sim_server_cfg *cfg, struct po_sim_server **out,
                           char *err, size_t errcap)
{
    struct po_sim_server *s = calloc(1, sizeof *s);
    if (!s)
        return PO_ERR_NOMEM;
    po_err rc = po_sim_identity_load(cfg->dir, &s->id, err, errcap);
    if (rc) {
        free(s);
        return rc;
    }
    (void)snprintf(s->dir, sizeof s->dir, "%s", cfg->dir);
    s->time_factor = cfg->time_factor >= 1 ? cfg->time_factor : 1;
    s->refund_delay_ms = cfg->refund_delay_ms;
    pthread_mutex_init(&s->mu, NULL);
    s->daemon = po_sim_listen(cfg->listen, on_request, on_completed, uri_of, s, err, errcap);
    if (!s->daemon) {
        po_sim_identity_free(&s->id);
        free(s);
        return PO_ERR_IO;
    }
    *out = s;
    return PO_OK;
}

unsigned po_sim_server_port(const struct po_sim_server *s)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return i ? i->port : 0;
}

void po_sim_server_stop(struct po_sim_server *s)
{
    if (!s)
        return;
    MHD_stop_daemon(s->daemon);
    /* Let refund notifications under way finish (bounded: 30 s). */
    atomic_store(&s->stopping, true);
    for (int i = 0; i < 3000 && atomic_load(&s->jobs) > 0; i++) {
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&s->jobs) > 0)
        return; /* leak rather than free under a running thread */
    pthread_mutex_destroy(&s->mu);
    po_sim_identity_free(&s->id);
    free(s);
}
