/* fuzz_gateway.h — the HTTP handlers' context for the fuzz targets that
 * drive them (fuzz_http, fuzz_api). */
#ifndef PO_FUZZ_GATEWAY_H
#define PO_FUZZ_GATEWAY_H

#include "../../src/http/http_int.h"

#include <stdlib.h>
#include <string.h>

/* What the HTTP server gives its handlers: the pool, the account cache,
 * a worker pool and a committer (one thread, batches as in serve). */
static inline void fuzz_http_ctx(const char *url, struct po_http_ctx *ctx)
{
    char err[256];
    struct po_committer_cfg cc = {
        .db_url = url, .workers = 1, .batch_max = 16, .queue_max = 64, .guard = po_accounts_guard};
    memset(ctx, 0, sizeof *ctx);
    if (po_store_pool_open(url, 2, &ctx->pool, err, sizeof err) ||
        po_accounts_open(NULL, &ctx->cb.accounts) ||
        po_workers_start(2, 64, 2, 1000, &ctx->cb.workers) ||
        po_committer_start(&cc, &ctx->cb.committer, err, sizeof err) ||
        po_idem_local_open(&ctx->idem_local))
        abort();
    ctx->cb.pool = ctx->pool;
}

#endif
