/*
 * admin_int.h — what the console's two files share: admin.c holds its
 * doors (the Host/Origin allow-list, sign-in, sessions, the embedded page)
 * and hands an authenticated request to admin_api.c, which holds its views
 * (GET /admin/api/VIEW) and its actions (POST /admin/api/AREA/ACTION).
 * The JSON answers both give are in admin_reply.c, below both.
 */
#ifndef PO_HTTP_ADMIN_INT_H
#define PO_HTTP_ADMIN_INT_H

#include "http_int.h"

/* Who is asking: an operator's session, or the admin token (a script,
 * acting as "dashboard", with an admin's reads and an operator's actions). */
struct po_admin_who {
    bool token;
    struct po_session ses;
};

/* ---- the answers both files give (admin_reply.c) ---- */

/* An error answer {"error":{"code","message"}}; code and message are
 * payonce's own words (put in as they are). */
void po_admin_error(struct po_hcall *h, unsigned status, const char *code, const char *message);
/* A 200 answer of doc (taken; NULL: 500, out of memory). */
void po_admin_json(struct po_hcall *h, json_t *doc);
/* 503: the database did not answer. */
void po_admin_unavailable(struct po_hcall *h);

/* Answers GET /admin/api/{view} for w (admin_api.c). */
void po_admin_view(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w);
/* Answers POST /admin/api/{area}/{action} for w: alerts, webhooks, recon
 * (admin_api.c). A viewer is refused (403) before anything is read. */
void po_admin_act(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w);

#endif
