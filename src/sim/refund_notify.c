/*
 * refund_notify.c — the refund results the simulated channels notify
 * later, each from a thread of its own, through the delivery (deliver.c)
 * on the channel's schedule. Called by the API handlers (sim_wechatpay.c,
 * sim_alipay.c); it sits above the delivery and the notices it builds.
 */
#include "sim_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct refund_job {
    struct po_sim_server *s;
    char url[512];
    struct po_sim_refund r;
    char out_trade_no[65], txn[65], out_refund_no[65], refund_id[40];
};

static void *notify_refund(void *arg)
{
    struct refund_job *j = arg;
    struct timespec ts = {j->s->refund_delay_ms / 1000, (j->s->refund_delay_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    struct po_sim_server *srv = j->s;
    j->r.out_trade_no = j->out_trade_no;
    j->r.txn = j->txn;
    j->r.out_refund_no = j->out_refund_no;
    j->r.refund_id = j->refund_id;
    j->r.refunded_at = (int64_t)time(NULL);
    struct po_sim_notice notice = {&j->s->id, NULL, &j->r};
    /* While stopping, one last attempt only. */
    struct po_sim_delivery d = {.url = j->url,
                                .channel = j->r.channel,
                                .notice = &notice,
                                .time_factor = srv->time_factor,
                                .deadline_ms = 5000,
                                .max_attempts = atomic_load(&srv->stopping) ? 1 : 0,
                                .label = j->out_refund_no,
                                .log = stdout,
                                .cancel = &srv->stopping};
    struct po_sim_result res;
    po_sim_deliver(&d, &res);
    free(j);
    atomic_fetch_sub(&srv->jobs, 1);
    return NULL;
}

/* Notifies the refund's result to url on the channel's schedule, from a
 * detached thread (po_sim_server_stop waits for it). */
void sim_start_refund_job(struct po_sim_server *s, const char *url, const char *channel,
                          const char *out_trade_no, const char *txn, const char *out_refund_no,
                          const char *refund_id, int64_t amount, int64_t total)
{
    struct refund_job *job = calloc(1, sizeof *job);
    if (!job)
        return;
    job->s = s;
    (void)snprintf(job->url, sizeof job->url, "%s", url);
    (void)snprintf(job->out_trade_no, sizeof job->out_trade_no, "%s", out_trade_no);
    (void)snprintf(job->txn, sizeof job->txn, "%s", txn);
    (void)snprintf(job->out_refund_no, sizeof job->out_refund_no, "%s", out_refund_no);
    (void)snprintf(job->refund_id, sizeof job->refund_id, "%s", refund_id);
    job->r = (struct po_sim_refund){channel, NULL, NULL, NULL, NULL, amount, total, "SUCCESS"};
    pthread_t th;
    atomic_fetch_add(&s->jobs, 1);
    if (pthread_create(&th, NULL, notify_refund, job) == 0) {
        pthread_detach(th);
    } else {
        atomic_fetch_sub(&s->jobs, 1);
        free(job);
    }
}
