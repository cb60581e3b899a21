/*
 * common.c — the helpers workers.c and bulkhead.c share (runtime_int.h).
 */
#include "runtime_int.h"

#include <string.h>

void po_recent_note(struct po_recent *r, const char *tenant, int64_t now)
{
    if (strcmp(r->last[0].tenant, tenant) != 0) {
        r->last[1] = r->last[0];
        PO_ASSERT(po_strcpy(r->last[0].tenant, sizeof r->last[0].tenant, tenant) == PO_OK);
    }
    r->last[0].at_ms = now;
}

bool po_recent_other(const struct po_recent *r, const char *tenant, int64_t now, int64_t recent_ms)
{
    for (int i = 0; i < 2; i++)
        if (r->last[i].tenant[0] && strcmp(r->last[i].tenant, tenant) != 0 &&
            now - r->last[i].at_ms < recent_ms)
            return true;
    return false;
}

uint64_t po_runtime_hash(const char *s)
{
    uint64_t h = UINT64_C(1469598103934665603);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        h = (h ^ *p) * UINT64_C(1099511628211);
    return h;
}
