/*
 * console_pages.c — the console's pages of one thing (an alert, a tenant
 * event, a journal entry, a webhook endpoint), the endpoints and the
 * channels' keys, and the two actions beyond alerts, each audited in
 * console_action (console.h).
 *
 * The actions call what the command line calls — po_webhook_redrive
 * (`payonce webhook redrive`) and po_recon_fetch_day (`payonce recon
 * fetch`) — so that the console never does a thing differently. A
 * redrive and its audit row commit in one transaction: there is no
 * redrive nobody wrote down. A re-fetch talks to the channel for seconds
 * and imports in transactions of its own, so its audit row is written
 * after it, with what came of it — a failure included.
 */
#include "../accounts/account.h"
#include "../alerts/alerts.h"
#include "console.h"
#include "../jobs/recon_daily.h"
#include "views.h"
#include "../webhooks/webhook.h"

#include "../../crypto/crypto.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NF(f) ((int)(sizeof(f) / sizeof((f)[0])))
#define NOTE_MAX 500
#define ACTIONS_SHOWN 50
#define KEYS_ACCOUNTS_MAX 1000 /* channel accounts one keys page reads */

/* The one row of sql over (tenant, key) as an object; NULL when none. */
static po_err one_row(struct po_store *s, const char *sql, const char *tenant, const char *key,
                      const char *const *f, int nf, json_t **out)
{
    json_t *rows = NULL;
    po_err rc = po_view_rows(s, sql, PO_PARAMS(PO_TEXT(tenant), PO_TEXT(key)), f, nf, &rows);
    *out = rc ? NULL : json_incref(json_array_get(rows, 0));
    json_decref(rows);
    return rc;
}

/* Sets member name of doc to the rows of sql over (tenant, key). */
static po_err rows_into(struct po_store *s, json_t *doc, const char *name, const char *sql,
                        const char *tenant, const char *key, const char *const *f, int nf)
{
    json_t *rows = NULL;
    po_err rc = po_view_rows(s, sql, PO_PARAMS(PO_TEXT(tenant), PO_TEXT(key)), f, nf, &rows);
    if (!rc && json_object_set_new(doc, name, rows))
        rc = PO_ERR_NOMEM;
    return rc;
}

/* ---- one alert ---- */

po_err po_console_alert(struct po_store *s, const char *tenant, const char *id, json_t **out)
{
    static const char *const fa[] = {"tenant",     "key",        "reason",       "idem_key",
                                     "event_type", "source",     "out_trade_no", "#amount",
                                     "currency",   "detail",     "created_at",   "state",
                                     "state_by",   "state_note", "state_at"};
    static const char *const fx[] = {"#seq", "action", "actor", "note", "at"};
    char key[PO_KEY_SIZE + PO_REASON_SIZE + 2], err[PO_ERRBUF_SIZE];
    json_t *a = NULL;
    *out = NULL;
    po_err rc = po_alert_key_of(s, tenant, id, key, sizeof key, err, sizeof err);
    if (rc == PO_ERR_NOT_FOUND)
        return PO_OK;
    if (!rc)
        rc = one_row(s,
                     "SELECT tenant_id, alert_key, reason, idem_key, event_type, source,"
                     " out_trade_no, amount, currency, detail, created_at, state, state_by,"
                     " state_note, state_at FROM alert WHERE tenant_id = ? AND alert_key = ?",
                     tenant, key, fa, NF(fa), &a);
    if (rc || !a)
        return rc;
    char sid[PO_ALERT_SHORT_SIZE];
    po_alert_short_id(key, sid);
    json_object_set_new(a, "id", json_string(sid));
    rc = rows_into(s, a, "actions",
                   "SELECT seq, action, actor, note, at FROM alert_action WHERE tenant_id = ? AND"
                   " alert_key = ? ORDER BY seq LIMIT 200",
                   tenant, key, fx, NF(fx));
    if (rc)
        json_decref(a);
    else
        *out = a;
    return rc;
}

/* ---- one tenant event ---- */

po_err po_console_event(struct po_store *s, const char *tenant, const char *event_id, json_t **out)
{
    static const char *const fe[] = {"tenant",    "event_id",   "type",
                                     "object_id", "created_at", "payload"};
    static const char *const fd[] = {"endpoint_id", "state",   "#attempts", "#last_status",
                                     "last_error",  "next_at", "updated_at"};
    json_t *e = NULL, *att = NULL, *body = NULL;
    char *text = NULL;
    *out = NULL;
    po_err rc = one_row(s,
                        "SELECT tenant_id, event_id, type, object_id, created_at, payload FROM"
                        " outbox_event WHERE tenant_id = ? AND event_id = ?",
                        tenant, event_id, fe, NF(fe), &e);
    if (rc || !e)
        return rc;
    /* the body as the endpoints receive it */
    rc = po_event_envelope(event_id, json_string_value(json_object_get(e, "type")),
                           json_string_value(json_object_get(e, "created_at")), tenant,
                           json_string_value(json_object_get(e, "payload")), &text);
    if (!rc)
        rc = po_json_parse(text, strlen(text), &body, NULL, 0) ? PO_ERR_STORE : PO_OK;
    free(text);
    json_object_del(e, "payload");
    if (!rc && json_object_set_new(e, "body", body))
        rc = PO_ERR_NOMEM;
    if (!rc)
        rc = rows_into(s, e, "deliveries",
                       "SELECT endpoint_id, state, attempts, last_status, last_error, next_at,"
                       " updated_at FROM webhook_delivery WHERE tenant_id = ? AND event_id = ?"
                       " ORDER BY endpoint_id LIMIT " PO_STR(PO_WEBHOOK_ENDPOINTS_MAX) " * 4",
                       tenant, event_id, fd, NF(fd));
    if (!rc)
        rc = po_webhook_attempts(s, tenant, event_id, &att);
    if (!rc && json_object_set_new(e, "attempts", att))
        rc = PO_ERR_NOMEM;
    if (rc)
        json_decref(e);
    else
        *out = e;
    return rc;
}

/* ---- one journal entry ---- */

po_err po_console_entry(struct po_store *s, const char *tenant, const char *key, json_t **out)
{
    static const char *const fj[] = {"tenant",        "key",      "kind",      "out_trade_no",
                                     "out_refund_no", "currency", "created_at"};
    static const char *const fp[] = {"#line", "account", "#amount", "currency"};
    static const char *const fn[] = {"channel", "event_type", "source",   "outcome",
                                     "reason",  "#amount",    "currency", "first_seen_at"};
    json_t *j = NULL, *n = NULL;
    *out = NULL;
    po_err rc = one_row(s,
                        "SELECT tenant_id, idem_key, kind, out_trade_no, out_refund_no, currency,"
                        " created_at FROM journal WHERE tenant_id = ? AND idem_key = ?",
                        tenant, key, fj, NF(fj), &j);
    if (rc || !j)
        return rc;
    rc = rows_into(s, j, "postings",
                   "SELECT line_no, account, amount, currency FROM posting WHERE tenant_id = ? AND"
                   " idem_key = ? ORDER BY line_no",
                   tenant, key, fp, NF(fp));
    if (!rc)
        rc = one_row(s,
                     "SELECT channel, event_type, source, outcome, reason, amount, currency,"
                     " first_seen_at FROM notify_log WHERE tenant_id = ? AND idem_key = ?",
                     tenant, key, fn, NF(fn), &n);
    if (!rc && json_object_set_new(j, "processed", n ? n : json_null()))
        rc = PO_ERR_NOMEM;
    if (rc)
        json_decref(j);
    else
        *out = j;
    return rc;
}

/* ---- webhook endpoints ---- */

static const char *const endpoint_fields[] = {"tenant",     "id",         "url",
                                              "events",     "created_at", "failing_since",
                                              "removed_at", "#pending",   "#dead"};
/* An endpoint's columns, with its pending and dead deliveries counted up
 * to the cap (webhook_delivery_endpoint: one range each). */
#define ENDPOINT_SELECT                                                                            \
    "SELECT w.tenant_id, w.endpoint_id, w.url, w.events, w.created_at, w.failing_since,"           \
    " w.removed_at, (SELECT COUNT(*) FROM (SELECT 1 FROM webhook_delivery d WHERE d.tenant_id ="   \
    " w.tenant_id AND d.endpoint_id = w.endpoint_id AND d.state = 'pending' LIMIT " PO_STR(        \
        PO_CONSOLE_COUNT_MAX) ") p), (SELECT COUNT(*) FROM (SELECT 1 FROM webhook_delivery d"      \
                              " WHERE d.tenant_id = w.tenant_id AND d.endpoint_id = "              \
                              "w.endpoint_id AND d.state = 'dead'"                                 \
                              " LIMIT " PO_STR(                                                    \
                                  PO_CONSOLE_COUNT_MAX) ") x) FROM webhook_endpoint w"

po_err po_console_endpoints(struct po_store *s, const char *tenant, json_t **out)
{
    const char *t = tenant ? tenant : "";
    return po_view_rows(s,
                        ENDPOINT_SELECT " WHERE w.removed_at IS NULL AND (? = '' OR w.tenant_id ="
                                        " ?) ORDER BY w.tenant_id, w.created_at, w.endpoint_id"
                                        " LIMIT " PO_STR(PO_CONSOLE_PAGE_MAX),
                        PO_PARAMS(PO_TEXT(t), PO_TEXT(t)), endpoint_fields, NF(endpoint_fields),
                        out);
}

/* The console's own actions of the tenant on target (NULL: any), newest first. */
static po_err actions_into(struct po_store *s, json_t *doc, const char *tenant, const char *action,
                           const char *target)
{
    static const char *const f[] = {"tenant", "at", "actor", "action", "target", "note", "result"};
    const char *t = tenant ? tenant : "", *g = target ? target : "";
    json_t *rows = NULL;
    po_err rc =
        po_view_rows(s,
                     "SELECT tenant_id, at, actor, action, target, note, result FROM"
                     " console_action WHERE (? = '' OR tenant_id = ?) AND action = ? AND"
                     " (? = '' OR target = ?) ORDER BY at DESC, action_id DESC"
                     " LIMIT " PO_STR(ACTIONS_SHOWN),
                     PO_PARAMS(PO_TEXT(t), PO_TEXT(t), PO_TEXT(action), PO_TEXT(g), PO_TEXT(g)), f,
                     NF(f), &rows);
    if (!rc && json_object_set_new(doc, "actions", rows))
        rc = PO_ERR_NOMEM;
    return rc;
}

po_err po_console_endpoint(struct po_store *s, const char *tenant, const char *id,
                           struct po_console_page *pg, json_t **out)
{
    json_t *e = NULL, *dead = NULL, *doc = NULL;
    *out = NULL;
    po_err rc = one_row(s, ENDPOINT_SELECT " WHERE w.tenant_id = ? AND w.endpoint_id = ?", tenant,
                        id, endpoint_fields, NF(endpoint_fields), &e);
    if (rc || !e)
        return rc;
    rc = po_console_dead_letters(s, tenant, id, pg, &dead);
    if (!rc && !(doc = json_pack("{s:o, s:o}", "endpoint", e, "dead_letters", dead)))
        rc = PO_ERR_NOMEM;
    else if (rc)
        json_decref(e);
    if (!rc)
        rc = actions_into(s, doc, tenant, "webhook_redrive", id);
    if (rc)
        json_decref(doc);
    else
        *out = doc;
    return rc;
}

/* ---- reconciliation days ---- */

po_err po_console_recon(struct po_store *s, const char *tenant, const char *status_filter,
                        struct po_console_page *pg, json_t **out)
{
    po_err rc = po_console_recon_days(s, tenant, status_filter, pg, out);
    if (!rc && (rc = actions_into(s, *out, tenant, "recon_fetch", NULL)) != PO_OK) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}

/* ---- the channels' verification keys ---- */

/* Appends {tenant, channel, kind, serial, not_after, days_left, expired}. */
static po_err key_row(json_t *list, const char *tenant, const char *channel, const char *kind,
                      const char *serial, int64_t not_after, int64_t now)
{
    json_t *k = json_pack("{s:s, s:s, s:s, s:s}", "tenant", tenant, "channel", channel, "kind",
                          kind, "serial", serial ? serial : "");
    if (k && not_after) {
        char at[PO_TIME_SIZE];
        po_clock_iso_at(not_after, at, sizeof at);
        json_object_set_new(k, "not_after", json_string(at));
        /* whole days left, rounded down; negative once it has passed */
        int64_t left = not_after - now;
        json_object_set_new(
            k, "days_left",
            json_integer((json_int_t)(left >= 0 ? left / 86400 : -((-left + 86399) / 86400))));
        json_object_set_new(k, "expired", json_boolean(not_after < now));
    } else if (k) {
        json_object_set_new(k, "not_after", json_null());
        json_object_set_new(k, "days_left", json_null());
        json_object_set_new(k, "expired", json_false());
    }
    return k && !json_array_append_new(list, k) ? PO_OK : PO_ERR_NOMEM;
}

/* One account's keys from its stored document (no secret is opened):
 * WeChat Pay's platform certificates and keys ("keys": serial, not_after
 * as payonce read it from the certificate), Alipay's certificates
 * ("alipay_certs": their validity read from the PEM here) or its public
 * key, Stripe's webhook secrets (how many; sealed, no expiry). */
static po_err account_keys(json_t *list, const char *tenant, const char *channel, json_t *doc,
                           int64_t now)
{
    po_err rc = PO_OK;
    size_t i;
    json_t *k;
    json_array_foreach(json_object_get(doc, "keys"), i, k)
    {
        json_t *na = json_object_get(k, "not_after");
        int64_t at = json_is_integer(na) ? (int64_t)json_integer_value(na) : 0;
        if (!rc)
            rc = key_row(list, tenant, channel, at ? "certificate" : "public key",
                         json_string_value(json_object_get(k, "serial")), at, now);
    }
    json_array_foreach(json_object_get(doc, "alipay_certs"), i, k)
    {
        const char *pem = json_string_value(json_object_get(k, "pem"));
        int64_t nb = 0, na = 0;
        if (!rc && (!pem || po_cert_validity(pem, strlen(pem), &nb, &na)))
            na = 0; /* not a certificate payonce can read: shown without expiry */
        if (!rc)
            rc = key_row(list, tenant, channel, na ? "certificate" : "public key",
                         json_string_value(json_object_get(k, "sn")), na, now);
    }
    if (!rc && json_is_string(json_object_get(doc, "public_key_pem")))
        rc = key_row(list, tenant, channel, "public key", "", 0, now);
    json_t *secrets = json_object_get(doc, "webhook_secrets");
    if (!rc && json_array_size(secrets)) {
        char what[32];
        (void)snprintf(what, sizeof what, "%zu sealed", json_array_size(secrets));
        rc = key_row(list, tenant, channel, "webhook secrets", what, 0, now);
    }
    return rc;
}

/* Soonest expiry first, keys without one last, then by tenant and channel. */
static int by_expiry(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    const char *ex = json_string_value(json_object_get(x, "not_after")),
               *ey = json_string_value(json_object_get(y, "not_after"));
    if (ex && ey && strcmp(ex, ey) != 0)
        return strcmp(ex, ey);
    if (!ex != !ey)
        return ex ? -1 : 1;
    int c = strcmp(json_string_value(json_object_get(x, "tenant")),
                   json_string_value(json_object_get(y, "tenant")));
    return c ? c
             : strcmp(json_string_value(json_object_get(x, "channel")),
                      json_string_value(json_object_get(y, "channel")));
}

po_err po_console_keys(struct po_store *s, const char *tenant, int64_t now_unix, json_t **out)
{
    const char *t = tenant ? tenant : "";
    struct po_rows r;
    *out = NULL;
    po_err rc = po_store_exec(s,
                              "SELECT tenant_id, channel, config FROM channel_account WHERE (? = ''"
                              " OR tenant_id = ?) ORDER BY tenant_id, channel"
                              " LIMIT " PO_STR(KEYS_ACCOUNTS_MAX),
                              PO_PARAMS(PO_TEXT(t), PO_TEXT(t)), &r, NULL, NULL, 0);
    if (rc)
        return rc;
    json_t *list = json_array();
    rc = list ? PO_OK : PO_ERR_NOMEM;
    for (int i = 0; !rc && i < r.nrows; i++) {
        const char *cfg = po_rows_get(&r, i, 2);
        json_t *doc = NULL;
        if (!cfg || po_json_parse(cfg, strlen(cfg), &doc, NULL, 0))
            rc = PO_ERR_STORE; /* the store holds what payonce wrote */
        else
            rc = account_keys(list, po_rows_get(&r, i, 0), po_rows_get(&r, i, 1), doc, now_unix);
        json_decref(doc);
    }
    po_rows_free(&r);
    size_t n = rc ? 0 : json_array_size(list);
    json_t **items = n ? malloc(n * sizeof *items) : NULL;
    if (n && !items)
        rc = PO_ERR_NOMEM;
    if (!rc && n) { /* sorted in place: the array keeps its references */
        for (size_t i = 0; i < n; i++)
            items[i] = json_incref(json_array_get(list, i));
        qsort(items, n, sizeof *items, by_expiry);
        json_array_clear(list);
        for (size_t i = 0; i < n; i++)
            json_array_append_new(list, items[i]);
    }
    free(items);
    if (rc)
        json_decref(list);
    else
        *out = list;
    return rc;
}

/* ---- actions ---- */

/* A note as the console takes it: 1..NOTE_MAX bytes. */
static bool actor_ok(const struct po_console_actor *who)
{
    return who && who->name && *who->name && strlen(who->name) <= PO_ID_MAX && who->note &&
           *who->note && strlen(who->note) <= NOTE_MAX;
}

/* The audit row of one action (in the caller's transaction, when any). */
static po_err audit(struct po_store *s, const char *tenant, const char *action, const char *target,
                    const struct po_console_actor *who, const char *result, char *err,
                    size_t errcap)
{
    /* action ids sort as the actions were taken: the wall clock's
     * milliseconds, then this process's count (two actions in one
     * millisecond), then random bits (another node in that millisecond) */
    static atomic_uint seq;
    unsigned char rnd[4];
    char id[40], now[PO_TIME_SIZE];
    po_err rc = po_random(rnd, sizeof rnd);
    if (rc)
        return rc;
    int64_t ms = po_clock_now_ms();
    po_clock_iso_ms(ms, now, sizeof now);
    (void)snprintf(id, sizeof id, "ca_%012llx%04x%02x%02x%02x%02x", (unsigned long long)ms,
                   atomic_fetch_add(&seq, 1) & 0xffffu, rnd[0], rnd[1], rnd[2], rnd[3]);
    return po_store_exec(s,
                         "INSERT INTO console_action (tenant_id, action_id, at, actor, action,"
                         " target, note, result) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         PO_PARAMS(PO_TEXT(tenant), PO_TEXT(id), PO_TEXT(now), PO_TEXT(who->name),
                                   PO_TEXT(action), PO_TEXT(target), PO_TEXT(who->note),
                                   PO_TEXT(result)),
                         NULL, NULL, err, errcap);
}

po_err po_console_redrive(struct po_store *s, const char *tenant, const char *endpoint_id,
                          const char *event_id, const char *since,
                          const struct po_console_actor *who, int64_t *out_count, char *err,
                          size_t errcap)
{
    struct po_rows r;
    char result[160];
    int64_t n = 0;
    if (!actor_ok(who) || !endpoint_id || (since && !po_time_valid(since))) {
        po_errf(err, errcap, "an endpoint, a note (1-%d bytes), since an RFC 3339 time", NOTE_MAX);
        return PO_ERR_INVALID;
    }
    po_err rc = po_store_begin(s, err, errcap);
    if (!rc)
        rc = po_store_exec(s,
                           "SELECT 1 FROM webhook_endpoint WHERE tenant_id = ? AND endpoint_id = ?"
                           " AND removed_at IS NULL",
                           PO_PARAMS(PO_TEXT(tenant), PO_TEXT(endpoint_id)), &r, NULL, err, errcap);
    if (!rc) {
        if (r.nrows != 1) {
            po_errf(err, errcap, "tenant %s has no live endpoint %s", tenant, endpoint_id);
            rc = PO_ERR_NOT_FOUND;
        }
        po_rows_free(&r);
    }
    if (!rc)
        rc = po_webhook_redrive(s, tenant, event_id, endpoint_id, since, &n, err, errcap);
    if (!rc)
        rc = po_fmt(result, sizeof result, "%lld dead deliveries sent again (%s%s)", (long long)n,
                    event_id ? "event "
                    : since  ? "created since "
                             : "all of them",
                    event_id ? event_id
                    : since  ? since
                             : "");
    if (!rc)
        rc = audit(s, tenant, "webhook_redrive", endpoint_id, who, result, err, errcap);
    if (!rc)
        rc = po_store_commit(s, err, errcap);
    else
        po_store_rollback(s);
    if (!rc)
        *out_count = n;
    return rc;
}

/* What a fetch came to, for the console and its audit. */
static json_t *fetch_json(const struct po_recon_day_result *r)
{
    const char *state = r->imported && !r->open && !r->reopened ? "done"
                        : r->state == PO_BILL_NONE              ? "none"
                        : r->state == PO_BILL_NOT_READY         ? "not_ready"
                        : r->imported                           ? "pending"
                                                                : "failed";
    return json_pack("{s:s, s:s, s:b, s:b, s:I, s:I, s:I, s:I, s:I}", "state", state, "why", r->why,
                     "imported", r->imported, "open", r->open, "rows", (json_int_t)r->report.rows,
                     "matched", (json_int_t)r->report.matched, "replayed",
                     (json_int_t)r->report.replayed, "mismatched", (json_int_t)r->report.mismatched,
                     "missing", (json_int_t)r->report.missing_from_bill);
}

po_err po_console_refetch(const struct po_door *d, struct po_accounts *accounts,
                          const unsigned char *master, const char *tenant, const char *channel,
                          const char *date, int64_t now, int64_t retry_s,
                          const struct po_console_actor *who, json_t **out, char *err,
                          size_t errcap)
{
    struct po_store *s = d->s;
    struct po_account_ref *ref = NULL;
    struct po_recon_day_result r;
    char target[PO_CHANNEL_SIZE + 16], result[PO_ERRBUF_SIZE + 64], aerr[PO_ERRBUF_SIZE] = "";
    int64_t midnight = 0;
    *out = NULL;
    if (!actor_ok(who) || !channel || strlen(channel) >= PO_CHANNEL_SIZE || !date ||
        strlen(date) != 10 || po_date_parse(date, &midnight)) {
        po_errf(err, errcap, "a channel, a day YYYY-MM-DD and a note (1-%d bytes)", NOTE_MAX);
        return PO_ERR_INVALID;
    }
    (void)snprintf(target, sizeof target, "%s %s", channel, date);
    po_err rc = po_accounts_use(accounts, s, master, tenant, channel, &ref, err, errcap);
    if (rc)
        return rc; /* no account to fetch for: nothing was done */
    rc = po_recon_fetch_day(d, po_account_of(ref), date, false, now, retry_s, &r, err, errcap);
    po_accounts_release(ref);
    json_t *doc = rc ? NULL : fetch_json(&r);
    if (!rc && !doc)
        rc = PO_ERR_NOMEM;
    if (doc)
        (void)snprintf(result, sizeof result, "%s%s%s: %lld rows, %lld matched, %lld replayed",
                       json_string_value(json_object_get(doc, "state")), r.why[0] ? " " : "", r.why,
                       (long long)r.report.rows, (long long)r.report.matched,
                       (long long)r.report.replayed);
    else
        (void)snprintf(result, sizeof result, "not done (%s): %s", po_err_name(rc), err);
    /* audited whatever came of it; the fetch's own error stays in err */
    po_err arc = audit(s, tenant, "recon_fetch", target, who, result, aerr, sizeof aerr);
    if (!rc && arc) {
        po_errf(err, errcap, "%s", aerr);
        rc = arc;
    }
    if (rc)
        json_decref(doc);
    else
        *out = doc;
    return rc;
}
