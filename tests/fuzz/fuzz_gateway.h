/* fuzz_gateway.h — the HTTP handlers' context for the fuzz targets that
 * drive them (fuzz_http, fuzz_api). */
#ifndef PO_FUZZ_GATEWAY_H
#define PO_FUZZ_GATEWAY_H

#include "../../src/http/http_int.h"

#include <stdlib.h>
#include <string.h>

/* What the HTTP server gives its handlers: a gateway's parts (the pool,
 * the account cache, a worker pool, a committer with batches as in serve),
 * small, without background jobs or webhook delivery. url must outlive it. */
static inline void fuzz_http_ctx(const char *url, struct po_http_ctx *ctx)
{
    static struct po_gateway *gw;
    struct po_gateway_cfg g;
    char err[256];
    po_gateway_cfg_init(&g);
    g.db_url = url;
    g.pool_size = 2;
    g.workers = 2;
    g.committers = 1;
    g.batch_max = 16;
    g.no_jobs = true;
    g.webhooks.senders = 0;
    if (po_gateway_open(&g, &gw, err, sizeof err))
        abort();
    memset(ctx, 0, sizeof *ctx);
    ctx->gw = po_gateway_parts(gw);
}

#endif
