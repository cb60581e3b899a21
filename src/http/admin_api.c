/*
 * admin_api.c — the console's views and actions (admin_int.h), for a
 * request admin.c has let in and authenticated:
 *
 *   GET  /admin/api/VIEW   me, summary, tenants, overview, accounts, journal,
 *                          search (exact, for scripts), order, alerts,
 *                          report, operators (admins); and for triage
 *                          (service/console/console.h): find (prefix or substring,
 *                          paged), counts and list (lists by state), alert,
 *                          event, entry (a journal entry), webhooks,
 *                          endpoint (with its dead letters), recon (the
 *                          reconciliation days), keys (their expiry)
 *   POST /admin/api/alerts/ACTION     ack, resolve, replay, accept, refund, redrive
 *   POST /admin/api/webhooks/redrive  {tenant, endpoint, event?, since?, note}
 *   POST /admin/api/recon/fetch       {tenant, channel, date, note}
 *
 * Every parameter is checked here before a service sees it (an id, a
 * time, a cursor, a page of 1..PO_CONSOLE_PAGE_MAX): a bad one is 400
 * and reads nothing. Viewers read; operators and admins act, under their
 * own name, with a note, each action audited by the service it calls.
 */
#include "admin_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOTE_MAX 500
#define PAGE_DEFAULT 20

static const char *arg(const struct po_hcall *h, const char *name)
{
    const char *v = h->req.arg(h->req.ctx, name);
    return v && *v ? v : NULL;
}

/* The tenant filter: none (every tenant), or one that exists; false after
 * answering 400/404. */
static bool tenant_arg(struct po_hcall *h, struct po_store *s, bool required, const char **out)
{
    const char *t = arg(h, "tenant");
    *out = t;
    if (!t && !required)
        return true;
    if (!t || !po_id_valid(t, PO_ID_MAX)) {
        po_admin_error(h, 400, "invalid_request", "tenant: a tenant id");
        return false;
    }
    char err[PO_ERRBUF_SIZE];
    po_err rc = po_tenant_check(s, t, err, sizeof err);
    if (rc == PO_ERR_NOT_FOUND)
        po_admin_error(h, 404, "tenant_not_found", "no such tenant");
    else if (rc)
        po_admin_unavailable(h);
    return rc == PO_OK;
}

static void me(struct po_hcall *h, const struct po_admin_who *w)
{
    if (w->token)
        po_admin_json(
            h, json_pack("{s:s, s:s, s:b}", "name", "dashboard", "role", "admin", "token", true));
    else
        po_admin_json(h, json_pack("{s:s, s:s, s:s, s:s}", "name", w->ses.name, "role",
                                   po_role_name(w->ses.role), "csrf", w->ses.csrf, "expires_at",
                                   w->ses.expires_at));
}

static void summary(struct po_hcall *h, struct po_store *s)
{
    json_t *d = NULL;
    if (po_view_dashboard(s, &d)) {
        po_admin_unavailable(h);
        return;
    }
    char now[PO_TIME_SIZE];
    po_clock_now_iso(now, sizeof now);
    json_object_set_new(d, "now", json_string(now));
    json_object_set_new(d, "last_hour", po_metrics_last_hour());
    po_admin_json(h, d);
}

/* Answers a view's result: 503 when the store failed, 404 when the object
 * is not there. */
static void view_answer(struct po_hcall *h, po_err rc, json_t **docp, const char *what)
{
    json_t *doc = *docp; /* read after the view ran (arguments have no order) */
    if (rc == PO_ERR_INVALID)
        po_admin_error(h, 400, "invalid_request", what);
    else if (rc)
        po_admin_unavailable(h);
    else if (!doc)
        po_admin_error(h, 404, "not_found", what);
    else
        po_admin_json(h, doc);
}

static void report(struct po_hcall *h, struct po_store *s, const char *tenant)
{
    const char *from = arg(h, "from"), *to = arg(h, "to"), *format = arg(h, "format");
    if (!po_report_dates_ok(from, to)) {
        po_admin_error(h, 400, "invalid_request", "from, to: days YYYY-MM-DD (UTC), from <= to");
        return;
    }
    struct po_report r;
    char err[PO_ERRBUF_SIZE] = "";
    if (po_report_make(s, tenant, from, to, &r, err, sizeof err)) {
        po_admin_unavailable(h);
        return;
    }
    if (format && strcmp(format, "csv") == 0) {
        char *csv = po_report_csv(&r);
        if (csv) {
            char disp[160];
            (void)snprintf(disp, sizeof disp, "attachment; filename=\"payonce-%s-report.csv\"",
                           tenant);
            po_hresp_set(&h->resp, 200, "text/csv; charset=utf-8", csv);
            po_hresp_header(&h->resp, "Content-Disposition", disp);
        } else {
            po_admin_error(h, 500, "internal", "out of memory");
        }
        free(csv);
    } else {
        po_admin_json(h, po_report_json(&r, from, to));
    }
    po_report_free(&r);
}

static int int_arg(const struct po_hcall *h, const char *name, int min, int max, int dflt)
{
    int64_t v = 0;
    const char *t = arg(h, name);
    return t && po_parse_i64(t, min, max, &v) == PO_OK ? (int)v : dflt;
}

/* A message for an error answer from a service's err text: quotes,
 * backslashes and control characters would break the JSON it goes into. */
static void fail_with(struct po_hcall *h, unsigned status, const char *code, const char *prefix,
                      const char *err)
{
    char msg[300];
    (void)snprintf(msg, sizeof msg, "%s%s", prefix, err);
    for (char *p = msg; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
            *p = '\'';
    po_admin_error(h, status, code, msg);
}

/* A key (journal, processed record, alert) as payonce writes them: printable
 * ASCII without spaces, shorter than PO_KEY_SIZE. */
static bool key_ok(const char *k)
{
    if (!k || !*k || strlen(k) >= PO_KEY_SIZE)
        return false;
    for (const char *p = k; *p; p++)
        if (*p <= ' ' || *p > '~')
            return false;
    return true;
}

/* The page a request asks for: limit (1..PO_CONSOLE_PAGE_MAX, default
 * PAGE_DEFAULT) and after (a cursor, checked again by the service); false
 * after answering 400. */
static bool page_arg(struct po_hcall *h, struct po_console_page *pg)
{
    const char *lim = arg(h, "limit");
    int64_t v = PAGE_DEFAULT;
    pg->after = arg(h, "after");
    if ((lim && po_parse_i64(lim, 1, PO_CONSOLE_PAGE_MAX, &v)) ||
        (pg->after && strlen(pg->after) >= PO_CONSOLE_CURSOR_SIZE)) {
        po_admin_error(h, 400, "invalid_request",
                       "limit: 1.." PO_STR(PO_CONSOLE_PAGE_MAX) "; after: a page's next");
        return false;
    }
    pg->limit = (int)v;
    return true;
}

typedef void (*view_fn)(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w);

static void v_me(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    (void)s;
    me(h, w);
}

static void v_summary(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    (void)w;
    summary(h, s);
}

static void v_tenants(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    json_t *doc = NULL;
    (void)w;
    view_answer(h, po_view_tenants(s, &doc), &doc, "tenants");
}

static void v_operators(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    json_t *doc = NULL;
    if (!w->token && w->ses.role != PO_ROLE_ADMIN)
        po_admin_error(h, 403, "forbidden", "the operators are shown to admins");
    else
        view_answer(h, po_view_operators(s, &doc), &doc, "operators");
}

/* The overview over the last `hours`, or (fit=1) over the data's own span
 * within them. */
static void v_overview(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *tenant = NULL, *fit = arg(h, "fit");
    json_t *doc = NULL;
    (void)w;
    if (tenant_arg(h, s, false, &tenant))
        view_answer(h,
                    po_view_traffic(s, tenant, int_arg(h, "hours", 1, 720, 24),
                                    fit && strcmp(fit, "1") == 0, h->req.now_unix, &doc),
                    &doc, "hours: 1..720");
}

static void v_accounts(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *tenant = NULL;
    json_t *doc = NULL;
    (void)w;
    if (tenant_arg(h, s, false, &tenant))
        view_answer(h, po_view_accounts(s, tenant, &doc), &doc, "accounts");
}

static void v_journal(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *tenant = NULL, *account = arg(h, "account"), *cur = arg(h, "currency");
    json_t *doc = NULL;
    (void)w;
    if (!tenant_arg(h, s, true, &tenant))
        return;
    if (!account || strlen(account) >= PO_ACCOUNT_SIZE || !cur || !po_currency_valid(cur))
        po_admin_error(h, 400, "invalid_request", "account and currency");
    else
        view_answer(h,
                    po_view_account_journal(s, tenant, account, cur,
                                            int_arg(h, "limit", 1, 1000, 100), &doc),
                    &doc, "account");
}

/* The exact search scripts have used since the console began. */
static void v_search(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *tenant = NULL, *q = arg(h, "q");
    json_t *doc = NULL;
    (void)w;
    if (!tenant_arg(h, s, false, &tenant))
        return;
    if (!q || !po_id_valid(q, PO_TXN_ID_MAX))
        po_admin_error(h, 400, "invalid_request", "q: an out_trade_no or a channel transaction id");
    else
        view_answer(h, po_view_find_orders(s, tenant, q, &doc), &doc, "orders");
}

/* find?q=&field=order|txn|refund&match=prefix|contains&tenant=&after=&limit= */
static void v_find(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *tenant = NULL, *q = arg(h, "q"), *field = arg(h, "field"), *match = arg(h, "match");
    enum po_find_field f = PO_FIND_ORDER;
    struct po_console_page pg;
    json_t *doc = NULL;
    (void)w;
    if (!tenant_arg(h, s, false, &tenant) || !page_arg(h, &pg))
        return;
    if (!q || !po_id_valid(q, PO_TXN_ID_MAX) || (field && !po_find_field_parse(field, &f)) ||
        (match && strcmp(match, "prefix") != 0 && strcmp(match, "contains") != 0))
        po_admin_error(h, 400, "invalid_request",
                       "q: 1-64 letters, digits or _-.:|*; field: order, txn or refund; match:"
                       " prefix or contains");
    else
        view_answer(
            h, po_console_find(s, tenant, f, match && strcmp(match, "contains") == 0, q, &pg, &doc),
            &doc, "after: not a cursor of this search");
}

static void v_counts(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *tenant = NULL;
    char now[PO_TIME_SIZE];
    json_t *doc = NULL;
    (void)w;
    po_clock_now_iso(now, sizeof now);
    if (tenant_arg(h, s, false, &tenant))
        view_answer(h, po_console_counts(s, tenant, now, &doc), &doc, "counts");
}

/* list?name=orders_paying|orders_expired|refunds_processing|deliveries_failing|dead_letters */
static void v_list(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *tenant = NULL;
    enum po_console_list l;
    struct po_console_page pg;
    char now[PO_TIME_SIZE];
    json_t *doc = NULL;
    (void)w;
    po_clock_now_iso(now, sizeof now);
    if (!tenant_arg(h, s, false, &tenant) || !page_arg(h, &pg))
        return;
    if (!po_console_list_parse(arg(h, "name"), &l))
        po_admin_error(h, 400, "invalid_request",
                       "name: orders_paying, orders_expired, refunds_processing,"
                       " deliveries_failing or dead_letters");
    else
        view_answer(h, po_console_list(s, tenant, l, now, &pg, &doc), &doc,
                    "after: not a cursor of this list");
}

static void v_order(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *tenant = NULL, *no = arg(h, "out_trade_no");
    json_t *doc = NULL;
    (void)w;
    if (!tenant_arg(h, s, true, &tenant))
        return;
    if (!no || !po_id_valid(no, PO_ID_MAX))
        po_admin_error(h, 400, "invalid_request", "out_trade_no");
    else
        view_answer(h, po_view_order_trail(s, tenant, no, &doc), &doc, "no such order");
}

static void v_alerts(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *tenant = NULL, *state = arg(h, "state");
    json_t *doc = NULL;
    (void)w;
    if (!tenant_arg(h, s, false, &tenant))
        return;
    if (state && !po_alert_state_valid(state))
        po_admin_error(h, 400, "invalid_request", "state: open, acknowledged or resolved");
    else
        view_answer(h, po_view_alerts_console(s, tenant, state, &doc), &doc, "alerts");
}

/* alert?tenant=&id= (its short id or its key) */
static void v_alert(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *tenant = NULL, *id = arg(h, "id");
    json_t *doc = NULL;
    (void)w;
    if (!tenant_arg(h, s, true, &tenant))
        return;
    po_err rc = key_ok(id) ? po_console_alert(s, tenant, id, &doc) : PO_ERR_INVALID;
    if (rc == PO_ERR_CONFLICT)
        po_admin_error(h, 409, "conflict", "two alerts share this short id: use the alert's key");
    else
        view_answer(h, rc, &doc, rc == PO_ERR_INVALID ? "id: an alert's id" : "no such alert");
}

static void v_event(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *tenant = NULL, *id = arg(h, "event_id");
    json_t *doc = NULL;
    (void)w;
    if (!tenant_arg(h, s, true, &tenant))
        return;
    view_answer(h,
                id && po_id_valid(id, PO_EVENT_ID_SIZE - 1) ? po_console_event(s, tenant, id, &doc)
                                                            : PO_ERR_INVALID,
                &doc, id && po_id_valid(id, PO_EVENT_ID_SIZE - 1) ? "no such event" : "event_id");
}

/* entry?tenant=&key= : one journal entry */
static void v_entry(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *tenant = NULL, *key = arg(h, "key");
    json_t *doc = NULL;
    (void)w;
    if (!tenant_arg(h, s, true, &tenant))
        return;
    view_answer(h, key_ok(key) ? po_console_entry(s, tenant, key, &doc) : PO_ERR_INVALID, &doc,
                key_ok(key) ? "no such journal entry" : "key: a journal's key");
}

static void v_webhooks(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *tenant = NULL;
    json_t *doc = NULL;
    (void)w;
    if (tenant_arg(h, s, false, &tenant))
        view_answer(h, po_console_endpoints(s, tenant, &doc), &doc, "webhooks");
}

static void v_endpoint(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *tenant = NULL, *id = arg(h, "id");
    struct po_console_page pg;
    json_t *doc = NULL;
    (void)w;
    if (!tenant_arg(h, s, true, &tenant) || !page_arg(h, &pg))
        return;
    bool ok = id && po_id_valid(id, PO_ID_MAX);
    view_answer(h, ok ? po_console_endpoint(s, tenant, id, &pg, &doc) : PO_ERR_INVALID, &doc,
                ok ? "no such endpoint (or after: not a cursor of its dead letters)"
                   : "id: an endpoint's id");
}

static void v_recon(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *tenant = NULL, *status = arg(h, "status");
    struct po_console_page pg;
    json_t *doc = NULL;
    (void)w;
    if (tenant_arg(h, s, false, &tenant) && page_arg(h, &pg))
        view_answer(h, po_console_recon(s, tenant, status, &pg, &doc), &doc,
                    "status: done, failed or pending; after: a page's next");
}

static void v_keys(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *tenant = NULL;
    json_t *doc = NULL;
    (void)w;
    if (tenant_arg(h, s, false, &tenant))
        view_answer(h, po_console_keys(s, tenant, h->req.now_unix, &doc), &doc, "keys");
}

static void v_report(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *tenant = NULL;
    (void)w;
    if (tenant_arg(h, s, true, &tenant))
        report(h, s, tenant);
}

static const struct {
    const char *name;
    view_fn fn;
} views[] = {
    {"me", v_me},
    {"summary", v_summary},
    {"tenants", v_tenants},
    {"operators", v_operators},
    {"overview", v_overview},
    {"accounts", v_accounts},
    {"journal", v_journal},
    {"search", v_search},
    {"find", v_find},
    {"counts", v_counts},
    {"list", v_list},
    {"order", v_order},
    {"alerts", v_alerts},
    {"alert", v_alert},
    {"event", v_event},
    {"entry", v_entry},
    {"webhooks", v_webhooks},
    {"endpoint", v_endpoint},
    {"recon", v_recon},
    {"keys", v_keys},
    {"report", v_report},
};

void po_admin_view(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    for (size_t i = 0; i < sizeof views / sizeof views[0]; i++)
        if (strcmp(h->req.params[0], views[i].name) == 0) {
            views[i].fn(h, s, w);
            return;
        }
    po_admin_error(h, 404, "not_found", "no such view");
}

/* POST /admin/api/alerts/ACTION {tenant, id, note, out_refund_no?} */
static void alert_action(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w,
                         json_t *in)
{
    const char *action = h->req.params[0];
    const char *tenant = json_string_value(json_object_get(in, "tenant"));
    const char *id = json_string_value(json_object_get(in, "id"));
    const char *note = json_string_value(json_object_get(in, "note"));
    const char *refund_no = json_string_value(json_object_get(in, "out_refund_no"));
    const char *actor = w->token ? "dashboard" : w->ses.name;
    char err[PO_ERRBUF_SIZE] = "";
    bool changed = false, resolved = false;
    int64_t redriven = 0;
    struct po_outcome out = {0};
    struct po_door d = {s, h->ctx->gw->cb.committer}; /* replay, accept, refund */
    struct po_suspense_refund sr;
    po_err rc = PO_ERR_INVALID;
    bool known = true;
    if (!tenant || !id || !po_id_valid(tenant, PO_ID_MAX) || strlen(id) >= PO_KEY_SIZE) {
        rc = PO_ERR_INVALID;
    } else if ((note && strlen(note) > NOTE_MAX) ||
               ((!note || !*note) && !(w->token && strcmp(action, "ack") == 0))) {
        /* (a script's acknowledgement may come without one, as it could) */
        po_admin_error(h, 400, "note_required",
                       "every action on the console takes a note (1-500 bytes)");
        return;
    } else if (strcmp(action, "ack") == 0) {
        rc = po_alert_act(s, tenant, id, PO_ALERT_ACK, actor, note, &changed, err, sizeof err);
    } else if (strcmp(action, "resolve") == 0) {
        rc = po_alert_act(s, tenant, id, PO_ALERT_RESOLVE, actor, note, &changed, err, sizeof err);
    } else if (strcmp(action, "replay") == 0) {
        rc = po_alert_replay(&d, tenant, id, actor, note, &out, &resolved, err, sizeof err);
    } else if (strcmp(action, "accept") == 0) {
        rc = po_alert_accept(&d, tenant, id, actor, note, &out, &resolved, err, sizeof err);
    } else if (strcmp(action, "redrive") == 0) {
        rc = po_alert_redrive(s, tenant, id, actor, note, &redriven, err, sizeof err);
    } else if (strcmp(action, "refund") == 0) {
        rc = refund_no && po_id_valid(refund_no, PO_ID_MAX)
                 ? po_alert_refund(&d, h->ctx->gw->cb.accounts, h->ctx->gw->cfg->master_key, tenant,
                                   id, refund_no, actor, note, &sr, err, sizeof err)
                 : PO_ERR_INVALID;
    } else {
        known = false;
    }
    if (!known) {
        po_admin_error(h, 404, "not_found",
                       "actions: ack, resolve, replay, accept, refund, redrive");
    } else if (rc == PO_ERR_NOT_FOUND) {
        po_admin_error(h, 404, "alert_not_found", "no such alert");
    } else if (rc == PO_ERR_CONFLICT) {
        fail_with(h, 409, "conflict", "not done: ", err[0] ? err : "the alert is resolved");
    } else if (rc == PO_ERR_INVALID) {
        po_admin_error(
            h, 400, "invalid_request",
            "tenant, id (the alert's), a note; refund: out_refund_no, a new refund number");
    } else if (rc) {
        po_admin_unavailable(h);
    } else if (strcmp(action, "refund") == 0) {
        po_admin_json(h, json_pack("{s:s, s:s, s:s, s:b}", "action", action, "out_refund_no",
                                   sr.out_refund_no, "status", sr.status, "created", sr.created));
    } else if (strcmp(action, "redrive") == 0) {
        po_admin_json(h, json_pack("{s:s, s:I, s:s}", "action", action, "deliveries",
                                   (json_int_t)redriven, "state", "resolved"));
    } else if (strcmp(action, "replay") == 0 || strcmp(action, "accept") == 0) {
        po_admin_json(h, json_pack("{s:s, s:s, s:b}", "action", action, "outcome",
                                   po_outcome_name(out.kind), "resolved", resolved));
    } else {
        po_admin_json(h, json_pack("{s:s, s:s, s:b}", "action", action, "state",
                                   strcmp(action, "ack") == 0 ? "acknowledged" : "resolved",
                                   "changed", changed));
    }
}

/* The note every action takes (1..NOTE_MAX bytes); false after answering 400. */
static bool note_ok(struct po_hcall *h, const char *note)
{
    if (note && *note && strlen(note) <= NOTE_MAX)
        return true;
    po_admin_error(h, 400, "note_required",
                   "every action on the console takes a note (1-500 bytes)");
    return false;
}

/* POST /admin/api/webhooks/redrive {tenant, endpoint, event?, since?, note}:
 * an endpoint's dead deliveries (all, one event's, or those created since)
 * sent again, as `payonce webhook redrive` does, audited. */
static void webhook_action(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w,
                           json_t *in)
{
    const char *tenant = json_string_value(json_object_get(in, "tenant")),
               *endpoint = json_string_value(json_object_get(in, "endpoint")),
               *event = json_string_value(json_object_get(in, "event")),
               *since = json_string_value(json_object_get(in, "since")),
               *note = json_string_value(json_object_get(in, "note"));
    char err[PO_ERRBUF_SIZE] = "";
    int64_t n = 0;
    if (strcmp(h->req.params[0], "redrive") != 0) {
        po_admin_error(h, 404, "not_found", "webhook actions: redrive");
        return;
    }
    if (!tenant || !po_id_valid(tenant, PO_ID_MAX) || !endpoint ||
        !po_id_valid(endpoint, PO_ID_MAX) || (event && !po_id_valid(event, PO_EVENT_ID_SIZE - 1)) ||
        (since && !po_time_valid(since))) {
        po_admin_error(h, 400, "invalid_request",
                       "tenant, endpoint (its id), event (an event id) or since (an RFC 3339"
                       " time), note");
        return;
    }
    if (!note_ok(h, note))
        return;
    struct po_console_actor who = {w->token ? "dashboard" : w->ses.name, note};
    po_err rc = po_console_redrive(s, tenant, endpoint, event, since, &who, &n, err, sizeof err);
    if (rc == PO_ERR_NOT_FOUND)
        fail_with(h, 404, "endpoint_not_found", "", err);
    else if (rc == PO_ERR_INVALID)
        fail_with(h, 400, "invalid_request", "", err);
    else if (rc)
        po_admin_unavailable(h);
    else
        po_admin_json(h, json_pack("{s:s, s:s, s:I}", "action", "redrive", "endpoint", endpoint,
                                   "deliveries", (json_int_t)n));
}

/* POST /admin/api/recon/fetch {tenant, channel, date, note}: one day's bill
 * fetched again and imported, as `payonce recon fetch` does, audited. */
static void recon_action(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w,
                         json_t *in)
{
    const char *tenant = json_string_value(json_object_get(in, "tenant")),
               *channel = json_string_value(json_object_get(in, "channel")),
               *date = json_string_value(json_object_get(in, "date")),
               *note = json_string_value(json_object_get(in, "note"));
    char err[PO_ERRBUF_SIZE] = "";
    int64_t day = 0;
    json_t *doc = NULL;
    if (strcmp(h->req.params[0], "fetch") != 0) {
        po_admin_error(h, 404, "not_found", "reconciliation actions: fetch");
        return;
    }
    if (!tenant || !po_id_valid(tenant, PO_ID_MAX) || !channel || !po_channel_find(channel) ||
        !date || strlen(date) != 10 || po_date_parse(date, &day)) {
        po_admin_error(h, 400, "invalid_request",
                       "tenant, channel (a channel's name), date"
                       " (YYYY-MM-DD), note");
        return;
    }
    if (!note_ok(h, note))
        return;
    struct po_console_actor who = {w->token ? "dashboard" : w->ses.name, note};
    const struct po_gateway_cfg *cfg = h->ctx->gw->cfg;
    struct po_door d = {s, h->ctx->gw->cb.committer};
    po_err rc =
        po_console_refetch(&d, h->ctx->gw->cb.accounts, cfg->master_key, tenant, channel, date,
                           h->req.now_unix, cfg->recon_retry_s, &who, &doc, err, sizeof err);
    if (rc == PO_ERR_NOT_FOUND)
        fail_with(h, 404, "account_not_found", "", err);
    else if (rc == PO_ERR_INVALID)
        fail_with(h, 409, "refused", "not done: ", err);
    else if (rc)
        fail_with(h, 502, "fetch_failed", "not done (audited): ", err);
    else
        po_admin_json(h, doc);
}

void po_admin_act(struct po_hcall *h, struct po_store *s, const struct po_admin_who *w)
{
    const char *area = h->req.path + strlen("/admin/api/");
    json_t *in = NULL;
    if (!w->token && w->ses.role == PO_ROLE_VIEWER) {
        po_admin_error(h, 403, "forbidden", "a viewer reads; operators and admins act");
        return;
    }
    if (po_json_parse(h->req.body, h->req.body_len, &in, NULL, 0) || !json_is_object(in)) {
        json_decref(in);
        po_admin_error(h, 400, "invalid_request", "a JSON object");
        return;
    }
    if (strncmp(area, "alerts/", 7) == 0)
        alert_action(h, s, w, in);
    else if (strncmp(area, "webhooks/", 9) == 0)
        webhook_action(h, s, w, in);
    else if (strncmp(area, "recon/", 6) == 0)
        recon_action(h, s, w, in);
    else
        po_admin_error(h, 404, "not_found", "actions: alerts/…, webhooks/redrive, recon/fetch");
    json_decref(in);
}
