/*
 * runtime_int.h — private to src/runtime: what the worker pool's lanes and
 * the bulkheads both need (common.c).
 */
#ifndef PO_RUNTIME_INT_H
#define PO_RUNTIME_INT_H

#include "runtime.h"

#include <stdint.h>

/* The two tenants that asked last and when (monotonic ms): whether another
 * tenant is active without a table of every tenant. last[0] is the
 * latest; the two are never the same tenant. Guarded by the owner's lock. */
struct po_recent {
    struct {
        char tenant[PO_ID_MAX + 1];
        int64_t at_ms;
    } last[2];
};
/* Remembers that tenant (non-empty, at most PO_ID_MAX) asked at now. */
void po_recent_note(struct po_recent *r, const char *tenant, int64_t now);
/* Whether a tenant other than this one asked within recent_ms of now. */
bool po_recent_other(const struct po_recent *r, const char *tenant, int64_t now, int64_t recent_ms);

/* FNV-1a of a NUL-terminated string: the tenant tables' open addressing. */
uint64_t po_runtime_hash(const char *s);

#endif
