/*
 * http_int.h — private to src/http: metrics and the callback handler.
 */
#ifndef PO_HTTP_INT_H
#define PO_HTTP_INT_H

#include "../channel/channel.h"
#include "../engine/engine.h"
#include "../store/store.h"
#include "http.h"

#include <stdint.h>

/* ---- metrics (metrics.c) ---- */
/* One callback answered: outcome is an engine outcome name or "ignored". */
void po_metrics_callback(const char *channel, const char *outcome, int layer, uint64_t micros);
void po_metrics_verify_failure(const char *channel, const char *reason);
void po_metrics_http(unsigned status);
/* One tenant API answer (route as api.c names it; "" when unknown). */
void po_metrics_api(const char *route, unsigned status, bool replayed);
/* Renders everything in Prometheus text format into a heap string. */
char *po_metrics_render(void);

/* ---- callbacks (notify.c) ---- */
struct po_notify_ctx {
    struct po_store_pool *pool;
    const unsigned char *master_key;
    const char *request_id;
};

/* What the handler decided, for the ack, the log and the metrics. */
struct po_notify_answer {
    struct po_ack ack;
    const char *outcome;          /* applied|duplicate|rejected|suspense|retry|ignored|invalid */
    int layer;
    char reason[PO_REASON_MAX];
    char out_trade_no[PO_ID_MAX + 1];
};

/* Handles one callback end to end; never fails (errors become acks). */
void po_notify_handle(const struct po_notify_ctx *ctx, const char *channel, const char *tenant,
                      const struct po_notify_req *req, bool body_too_large,
                      struct po_notify_answer *out);


/* ---- Idempotency-Key records (idem.c) ---- */

struct po_idem_req {
    const char *tenant, *route, *key, *hash;
};
enum po_idem_kind { PO_IDEM_CLAIMED, PO_IDEM_REPLAY, PO_IDEM_MISMATCH, PO_IDEM_IN_FLIGHT };
struct po_idem_claim {
    enum po_idem_kind kind;
    unsigned status;  /* REPLAY */
    char *body;       /* REPLAY; heap, caller frees */
    bool taken_over;  /* CLAIMED from an abandoned record */
    char token[PO_IDEM_TOKEN_LEN + 1];
};
po_err po_idem_claim(struct po_store *s, const struct po_idem_req *q, struct po_idem_claim *out)
    PO_MUST_CHECK;
/* Inside the effect's transaction; PO_ERR_CONFLICT when the record was
 * taken over (the caller must roll back). */
po_err po_idem_finish(struct po_store *s, const struct po_idem_req *q, const char *token,
                      unsigned status, const char *body) PO_MUST_CHECK;
po_err po_idem_release(struct po_store *s, const struct po_idem_req *q, const char *token)
    PO_MUST_CHECK;

/* ---- API keys (apikey.c) ---- */
/* The tenant of a valid, unrevoked key; PO_ERR_NOT_FOUND otherwise. */
po_err po_apikey_auth(struct po_store *s, const char *key, char tenant[PO_ID_MAX + 1])
    PO_MUST_CHECK;

/* ---- refund submission (refund_submit.c) ---- */
/* Submits one pending refund; *state (may be NULL) receives submitted,
 * rejected or pending ("" when it was not pending). */
/* Channels whose refund API payonce calls (others: submit_state "manual"). */
bool po_refund_submittable(const char *channel);
po_err po_refund_submit(struct po_store *s, const unsigned char *master, const char *tenant,
                        const char *out_refund_no, char *state, size_t cap) PO_MUST_CHECK;

/* ---- tenant API (api.c) ---- */
struct po_api_ctx {
    struct po_store_pool *pool;
    const unsigned char *master_key;
    const char *request_id;
    int idem_wait_ms;
    void (*hook)(void *ctx, const char *route);
    void *hook_ctx;
};

struct po_api_req {
    const char *method;
    const char *path; /* after "/v1/" */
    const char *(*header)(void *ctx, const char *name);
    const char *(*arg)(void *ctx, const char *name); /* query-string argument */
    void *ctx;
    const char *body;
    size_t body_len;
    bool body_too_large;
};

struct po_api_answer {
    unsigned status;
    char *body; /* heap JSON */
    bool replayed;
    unsigned retry_after; /* seconds; 0 = none */
    const char *allow;    /* 405: allowed methods */
    char tenant[PO_ID_MAX + 1];
    char route[48];
    char code[48];
};

/* Handles one /v1 request end to end; never fails (errors are answers). */
void po_api_handle(const struct po_api_ctx *ctx, const struct po_api_req *req,
                   struct po_api_answer *out);

#endif
