/*
 * outcome.c — the outcome and reason tables of event.h, read by the
 * engine (outcomes), the callback handler (acks and HTTP statuses), the
 * metrics (labels) and the alerts (reason names).
 */
#include "event.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    bool acks;
} outcomes[] = {
#define X(id, name, ack) [PO_OUT_##id] = {name, ack},
    PO_OUTCOMES(X)
#undef X
};

static const struct {
    const char *name;
    enum po_reason_class cls;
    unsigned status;
} reasons[] = {
#define X(id, name, cls, status) [PO_R_##id] = {name, PO_RC_##cls, status},
    PO_REASONS(X)
#undef X
};

const char *po_outcome_name(enum po_outcome_kind k)
{
    PO_ASSERT((unsigned)k < PO_OUT_COUNT);
    return outcomes[k].name;
}

bool po_outcome_acks(enum po_outcome_kind k)
{
    PO_ASSERT((unsigned)k < PO_OUT_COUNT);
    return outcomes[k].acks;
}

const char *po_reason_name(enum po_reason r)
{
    PO_ASSERT((unsigned)r < PO_R_COUNT);
    return reasons[r].name;
}

enum po_reason_class po_reason_class(enum po_reason r)
{
    PO_ASSERT((unsigned)r < PO_R_COUNT);
    return reasons[r].cls;
}

unsigned po_reason_status(enum po_reason r)
{
    PO_ASSERT((unsigned)r < PO_R_COUNT);
    return reasons[r].status;
}

enum po_reason po_reason_find(const char *name)
{
    for (int r = 1; name && r < PO_R_COUNT; r++)
        if (strcmp(reasons[r].name, name) == 0)
            return (enum po_reason)r;
    return PO_R_NONE;
}

po_err po_outcome_to_json(const struct po_outcome *o, char *buf, size_t cap)
{
    const char *name = po_outcome_name(o->kind);
    switch (o->kind) {
    case PO_OUT_APPLIED:
    case PO_OUT_IGNORED:
        return po_fmt(buf, cap, "{\"outcome\":\"%s\"}", name);
    case PO_OUT_DUPLICATE:
        return po_fmt(buf, cap, "{\"outcome\":\"%s\",\"layer\":%d}", name, o->layer);
    default:
        /* Reason names are our own [a-z_] codes: safe unescaped in JSON. */
        return po_fmt(buf, cap, "{\"outcome\":\"%s\",\"reason\":\"%s\"}", name,
                      po_reason_name(o->reason));
    }
}
