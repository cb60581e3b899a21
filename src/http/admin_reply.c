/*
 * admin_reply.c — the console's JSON answers (admin_int.h): an error, a
 * document, the store's 503; what both the doors (admin.c) and the views
 * and actions (admin_api.c) answer with.
 */
#include "admin_int.h"

#include <stdio.h>
#include <stdlib.h>

void po_admin_error(struct po_hcall *h, unsigned status, const char *code, const char *message)
{
    char body[384];
    (void)snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code,
                   message);
    po_hresp_set(&h->resp, status, "application/json", body);
}

void po_admin_json(struct po_hcall *h, json_t *doc)
{
    char *text = doc ? po_json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!text) {
        po_admin_error(h, 500, "internal", "out of memory");
        return;
    }
    po_hresp_set(&h->resp, 200, "application/json", text);
    free(text);
}

void po_admin_unavailable(struct po_hcall *h)
{
    po_admin_error(h, 503, "store_unavailable", "the database did not answer; retry");
}
