/*
 * api_int.h — private to the tenant API files of src/http (api.c, the
 * pipeline; api_routes.c, the routes' validation and work).
 */
#ifndef PO_API_INT_H
#define PO_API_INT_H

#include "http_int.h"

#include <jansson.h>

/* One /v1 request in progress. */
struct po_api_call {
    const struct po_http_ctx *ctx;
    const struct po_hreq *req;
    const struct po_route *route; /* NULL for an unknown route */
    struct po_store *s;           /* a pool connection, once needed */
    char tenant[PO_ID_MAX + 1];   /* the API key's tenant */
    const char *no;               /* the path's object id (validated), or NULL */
    json_t *in;                   /* parsed POST body */
    json_t *resp;                 /* the answer's JSON */
    unsigned status;
    char code[48]; /* machine-readable code of an error answer */
    bool replayed;
    bool in_bulkhead;     /* holds a slot of ctx->api_bulkhead */
    unsigned retry_after; /* seconds; 0 = none */
    const char *allow;    /* 405: allowed methods */
    /* after commit: a refund to hand to the channel */
    char submit_refund[PO_ID_MAX + 1];
    /* What a route's before step leaves for its effect, released with
     * state_free when the call ends. */
    void *state;
    void (*state_free)(void *state);
};

/* Sets an error answer {"error":{"code","message","param"?}}. */
/* A POST body within the limit and declared as JSON (else 413 / 415 set). */
bool po_api_body_ok(struct po_api_call *c);
/* 503 out_of_memory with Retry-After: nothing was done, retry. */
void po_api_out_of_memory(struct po_api_call *c);
void po_api_fail(struct po_api_call *c, unsigned status, const char *code, const char *message,
                 const char *param);
/* 503 store_unavailable, Retry-After 1. */
void po_api_unavailable(struct po_api_call *c);
/* Maps an admin error to the answer (404 / 409 / 400 with code or a
 * default); PO_OK when it was such a business answer, rc otherwise. */
po_err po_api_business(struct po_api_call *c, po_err rc, const char *code, const char *err);
/* Borrows a pool connection for the rest of the call; false when none
 * frees up in time (the answer is then 503). */
bool po_api_acquire(struct po_api_call *c);
/* Gives it back (before a call that may wait). */
void po_api_release(struct po_api_call *c);

#endif
