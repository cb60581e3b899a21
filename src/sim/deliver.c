/*
 * deliver.c — at-least-once delivery on the channels' real retry schedules
 * (see sim.h). A channel resends when the ack is not its success, when no
 * answer comes within its deadline, and when it cannot connect; and it
 * signs every delivery when it sends it, so each attempt is built anew at
 * the attempt's time (a resend of the first attempt's bytes would be
 * refused as stale after five minutes).
 */
#include "sim.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct sink {
    char *buf;
    size_t cap, len;
};

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
    struct sink *s = ctx;
    size_t take = size * n;
    if (s->len + take >= s->cap)
        take = s->cap - 1 - s->len;
    memcpy(s->buf + s->len, data, take);
    s->len += take;
    s->buf[s->len] = '\0';
    return size * n;
}

/* What payonce says of an attempt in its answer's headers. */
struct said {
    char *outcome;    /* Payonce-Outcome, char[64] */
    char *request_id; /* X-Request-Id, char[48] */
};

/* Copies header `name`'s value (name with its colon, lower case) into
 * out[cap] when the line is that header. */
static void keep_header(const char *data, size_t len, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    if (len <= nl || strncasecmp(data, name, nl) != 0)
        return;
    size_t b = nl, e = len;
    while (b < e && (data[b] == ' ' || data[b] == '\t'))
        b++;
    while (e > b && (data[e - 1] == '\r' || data[e - 1] == '\n' || data[e - 1] == ' '))
        e--;
    size_t take = e - b < cap - 1 ? e - b : cap - 1;
    memcpy(out, data + b, take);
    out[take] = '\0';
}

static size_t on_header(char *data, size_t size, size_t n, void *ctx)
{
    struct said *said = ctx;
    size_t len = size * n;
    keep_header(data, len, "payonce-outcome:", said->outcome, 64);
    keep_header(data, len, "x-request-id:", said->request_id, 48);
    return len;
}

/* One POST; returns the HTTP status, or 0 with *what describing why not. */
static long post_once(const struct po_sim_delivery *d, const struct po_sim_request *req, char *body,
                      size_t cap, struct po_sim_result *out, const char **what)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char line[600];
    struct sink sink = {body, cap, 0};
    long status = 0;
    body[0] = '\0';
    if (!c) {
        *what = "out of memory";
        return 0;
    }
    (void)snprintf(line, sizeof line, "Content-Type: %s",
                   req->content_type ? req->content_type : "application/json");
    h = curl_slist_append(h, line);
    for (int i = 0; i < req->nheaders; i++) {
        (void)snprintf(line, sizeof line, "%s: %s", req->name[i], req->value[i]);
        h = curl_slist_append(h, line);
    }
    h = curl_slist_append(h, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, d->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)req->body_len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    struct said said = {out->last_outcome, out->last_request_id};
    said.outcome[0] = said.request_id[0] = '\0';
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &said);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(d->deadline_ms > 0 ? d->deadline_ms : 5000));
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    else
        *what = rc == CURLE_OPERATION_TIMEDOUT ? "no answer within the deadline"
                : rc == CURLE_COULDNT_CONNECT  ? "connection refused"
                                               : curl_easy_strerror(rc);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return status;
}

struct po_sim_history {
    pthread_mutex_t mu;
    FILE *f;
};

po_err po_sim_history_open(const char *path, struct po_sim_history **out)
{
    struct po_sim_history *h = calloc(1, sizeof *h);
    if (!h)
        return PO_ERR_NOMEM;
    if (!(h->f = fopen(path, "a"))) {
        free(h);
        return PO_ERR_IO;
    }
    pthread_mutex_init(&h->mu, NULL);
    *out = h;
    return PO_OK;
}

void po_sim_history_close(struct po_sim_history *h)
{
    if (!h)
        return;
    fclose(h->f);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

/* One attempt and its answer: what was sent (the payment or refund the
 * notification carries), when, and what came back. */
static void history_add(const struct po_sim_delivery *d, int attempt, int64_t sent, long status,
                        const char *error, const struct po_sim_result *r)
{
    const struct po_sim_payment *p = d->notice->payment;
    const struct po_sim_refund *f = d->notice->refund;
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:I, s:i, s:s, s:b, s:s, s:s}", "op",
                  p ? "payment" : "refund", "url", d->url, "channel", d->channel, "out_trade_no",
                  p ? p->out_trade_no : f->out_trade_no, "txn", p ? p->txn : f->txn, "copy",
                  d->copy, "attempt", attempt, "sent_ms", (json_int_t)sent, "answered_ms",
                  (json_int_t)po_clock_now_ms(), "status", (int)status, "error", error, "acked",
                  r->acked, "outcome", r->last_outcome, "request_id", r->last_request_id);
    if (j && p) {
        json_object_set_new(j, "amount", json_integer(p->amount));
        json_object_set_new(j, "currency", json_string(p->currency ? p->currency : "CNY"));
    } else if (j) {
        json_object_set_new(j, "out_refund_no", json_string(f->out_refund_no));
        json_object_set_new(j, "refund_id", json_string(f->refund_id));
        json_object_set_new(j, "amount", json_integer(f->amount));
        json_object_set_new(j, "refund_status", json_string(f->status ? f->status : "SUCCESS"));
    }
    char *line = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!line)
        return;
    pthread_mutex_lock(&d->history->mu);
    fprintf(d->history->f, "%s\n", line);
    fflush(d->history->f);
    pthread_mutex_unlock(&d->history->mu);
    free(line);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void po_sim_deliver(const struct po_sim_delivery *d, struct po_sim_result *out)
{
    int n = 0;
    const int *sched = po_sim_schedule(d->channel, &n);
    double factor = d->time_factor >= 1 ? d->time_factor : 1;
    double t0 = mono_s();
    memset(out, 0, sizeof *out);
    for (int k = 0; k <= n; k++) {
        if (d->max_attempts && k >= d->max_attempts)
            break;
        if (k > 0) { /* the wait, in slices that see a cancel */
            double until = mono_s() + sched[k - 1] / factor;
            for (double left;
                 (left = until - mono_s()) > 0 && !(d->cancel && atomic_load(d->cancel));) {
                double w = left < 0.01 ? left : 0.01;
                struct timespec ts = {0, (long)(w * 1e9)};
                nanosleep(&ts, NULL);
            }
            if (d->cancel && atomic_load(d->cancel))
                break;
        }
        const char *what = "";
        int64_t now = d->clock ? d->clock(d->clock_ctx) : (int64_t)time(NULL);
        struct po_sim_request req;
        long status = 0;
        int64_t sent = po_clock_now_ms();
        if (po_sim_notice_build(d->notice, now, &req) == PO_OK) {
            status = post_once(d, &req, out->last_body, sizeof out->last_body, out, &what);
            po_sim_request_free(&req);
        } else {
            what = "the notification could not be built";
        }
        out->attempts++;
        out->last_status = status;
        out->acked = status && po_sim_is_ack(d->channel, status, out->last_body);
        if (d->history)
            history_add(d, k + 1, sent, status, what, out);
        bool last = k == n || (d->max_attempts && k + 1 >= d->max_attempts);
        const char *next = last ? "gives up" : "will retry";
        if (d->log) {
            char said[80] = "";
            if (out->last_outcome[0])
                (void)snprintf(said, sizeof said, " [payonce: %s]", out->last_outcome);
            if (out->acked)
                fprintf(d->log, "  %-28s attempt %2d at +%7.2fs: HTTP %ld -> acked%s\n",
                        d->label ? d->label : "", k + 1, mono_s() - t0, status, said);
            else if (status)
                fprintf(d->log,
                        "  %-28s attempt %2d at +%7.2fs: HTTP %ld -> not acked (%s),"
                        " %s%s\n",
                        d->label ? d->label : "", k + 1, mono_s() - t0, status, out->last_body,
                        next, said);
            else
                fprintf(d->log, "  %-28s attempt %2d at +%7.2fs: %s, %s\n",
                        d->label ? d->label : "", k + 1, mono_s() - t0, what, next);
            fflush(d->log);
        }
        if (out->acked)
            return;
    }
}
