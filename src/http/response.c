/*
 * response.c — building an answer (struct po_hresp, http_int.h): what every
 * handler writes and only server.c sends. Apart from server.c, so that the
 * handlers (api.c, notify.c, admin.c) depend on it and not on the server.
 */
#include "http_int.h"

#include <stdlib.h>
#include <string.h>

void po_hresp_set(struct po_hresp *r, unsigned status, const char *content_type, const char *body)
{
    r->status = status;
    r->content_type = content_type;
    free(r->body);
    r->body = body ? strdup(body) : NULL;
}

void po_hresp_header(struct po_hresp *r, const char *name, const char *value)
{
    PO_ASSERT(r->nheaders < PO_HRESP_HEADERS_MAX);
    r->hname[r->nheaders] = name;
    PO_ASSERT(po_strcpy(r->hvalue[r->nheaders], sizeof r->hvalue[0], value) == PO_OK);
    r->nheaders++;
}
