/*
 * alert_notify.c — alerts that reach people (alert_notify.h).
 *
 * The alerts are the database's (one row per fact, worked through by
 * operators: alerts.c); this is what the operator's pager hears of them.
 * A round reads every alert that is not resolved, and every resolved one
 * still said to be firing, grouped by tenant and reason as Alertmanager
 * groups by labels; decides per group (alert_notify.h) and sends one
 * message per group: Alertmanager's webhook payload (version 4: what an
 * Alertmanager sends its receivers, so anything that takes one takes
 * payonce's), a Slack incoming-webhook text, and a mail through the local
 * MTA. What was said is written on the alerts afterwards (notified_state,
 * notified_at), so a restart or another node (the notifier runs on the
 * lease holder: jobs.c) goes on from there.
 */
#include "alert_notify.h"
#include "alerts.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOTIFY_ROWS_MAX 5000  /* alerts read a round */
#define NOTIFY_GROUP_SHOWN 50 /* alerts in one message (the rest counted) */

enum {
    C_TENANT,
    C_REASON,
    C_KEY,
    C_ORDER,
    C_AMOUNT,
    C_CURRENCY,
    C_DETAIL,
    C_CREATED,
    C_STATE,
    C_STATE_BY,
    C_STATE_NOTE,
    C_STATE_AT,
    C_NSTATE,
    C_NAT
};

bool po_alert_notify_on(const struct po_alert_notify_cfg *c)
{
    return (c->url && *c->url) || (c->email_to && *c->email_to);
}

static bool address_ok(const char *a)
{
    const char *at = strchr(a, '@');
    if (!at || at == a || !at[1] || strlen(a) > 254 || strchr(at + 1, '@'))
        return false;
    for (const char *p = a; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("._%+-@", *p)))
            return false;
    return true;
}

static void receiver_policy(struct po_egress_policy *p)
{
    /* The operator's own receiver, configured by the operator: any
     * address, http:// to loopback (a local relay) too. */
    PO_ASSERT(po_egress_policy_parse("0.0.0.0/0, ::/0", true, p, NULL, 0) == PO_OK);
}

po_err po_alert_notify_check(const struct po_alert_notify_cfg *c, char *err, size_t errcap)
{
    if (c->format && *c->format && strcmp(c->format, "alertmanager") != 0 &&
        strcmp(c->format, "slack") != 0) {
        po_errf(err, errcap, "alert-webhook-format: alertmanager or slack");
        return PO_ERR_INVALID;
    }
    if (c->url && *c->url) {
        struct po_egress_policy p;
        char why[PO_ERRBUF_SIZE] = "";
        receiver_policy(&p);
        if (!po_egress_url_ok(&p, c->url, why, sizeof why)) {
            po_errf(err, errcap, "alert-webhook-url: %s", why);
            return PO_ERR_INVALID;
        }
    }
    if (c->email_to && *c->email_to) {
        if (!address_ok(c->email_to)) {
            po_errf(err, errcap, "alert-email-to: one address, user@host");
            return PO_ERR_INVALID;
        }
        if (!c->sendmail || c->sendmail[0] != '/' || access(c->sendmail, X_OK) != 0) {
            po_errf(err, errcap,
                    "alert-sendmail: %s is not an executable (install a local MTA, or name its"
                    " sendmail)",
                    c->sendmail ? c->sendmail : "(none)");
            return PO_ERR_INVALID;
        }
    }
    return PO_OK;
}

/* One group's rows [from, to) of r and what to say about them. */
struct group {
    const struct po_rows *r;
    int from, to;
    bool firing; /* any alert not resolved */
};

static const char *cell(const struct group *g, int row, int col)
{
    const char *v = po_rows_get(g->r, row, col);
    return v ? v : "";
}

static bool is_resolved(const struct group *g, int row)
{
    return strcmp(cell(g, row, C_STATE), "resolved") == 0;
}

/* Whether the group is due (alert_notify.h). */
static bool group_due(struct group *g, const struct po_alert_notify_cfg *c, int64_t now)
{
    bool any_new = false, any_said = false, repeat = false, resolved = false;
    int64_t oldest_new = INT64_MAX;
    for (int i = g->from; i < g->to; i++) {
        const char *ns = cell(g, i, C_NSTATE);
        if (is_resolved(g, i)) {
            resolved = true; /* said firing (the query's condition), now resolved */
            continue;
        }
        g->firing = true;
        if (!*ns) {
            any_new = true;
            int64_t t = po_clock_unix_of(cell(g, i, C_CREATED));
            oldest_new = t < oldest_new ? t : oldest_new;
        } else {
            any_said = true;
            if (strcmp(cell(g, i, C_STATE), "open") == 0 &&
                now - po_clock_unix_of(cell(g, i, C_NAT)) >= c->repeat_s)
                repeat = true;
        }
    }
    return resolved || repeat || (any_new && (any_said || now - oldest_new >= c->group_wait_s));
}

static json_t *am_alert(const struct group *g, int i)
{
    char sid[PO_ALERT_SHORT_SIZE];
    po_alert_short_id(cell(g, i, C_KEY), sid);
    bool res = is_resolved(g, i);
    json_t *labels = json_pack("{s:s, s:s, s:s, s:s, s:s}", "alertname", cell(g, i, C_REASON),
                               "tenant", cell(g, i, C_TENANT), "service", "payonce", "severity",
                               "warning", "alert_id", sid);
    if (labels && *cell(g, i, C_ORDER))
        json_object_set_new(labels, "order", json_string(cell(g, i, C_ORDER)));
    json_t *ann = json_pack("{s:s}", "summary", cell(g, i, C_DETAIL));
    if (ann && *cell(g, i, C_STATE_NOTE))
        json_object_set_new(ann, "note",
                            json_sprintf("%s by %s: %s", cell(g, i, C_STATE),
                                         cell(g, i, C_STATE_BY), cell(g, i, C_STATE_NOTE)));
    return json_pack("{s:s, s:o, s:o, s:s, s:s, s:s, s:s}", "status", res ? "resolved" : "firing",
                     "labels", labels, "annotations", ann, "startsAt", cell(g, i, C_CREATED),
                     "endsAt", res ? cell(g, i, C_STATE_AT) : "0001-01-01T00:00:00Z",
                     "generatorURL", "", "fingerprint", sid + 3);
}

/* Alertmanager's webhook payload (version 4) of the group's shown alerts. */
static char *am_payload(const struct group *g, const int *rows, int n, int truncated)
{
    json_t *alerts = json_array();
    for (int k = 0; alerts && k < n; k++)
        json_array_append_new(alerts, am_alert(g, rows[k]));
    const char *t = cell(g, g->from, C_TENANT), *reason = cell(g, g->from, C_REASON);
    json_t *doc = json_pack(
        "{s:s, s:o, s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s}, s:{}, s:s, s:s, s:i}", "version",
        "4", "alerts", alerts, "status", g->firing ? "firing" : "resolved", "receiver", "payonce",
        "groupLabels", "alertname", reason, "tenant", t, "commonLabels", "alertname", reason,
        "tenant", t, "service", "payonce", "commonAnnotations", "externalURL", "", "groupKey",
        "{}:{alertname, tenant}", "truncatedAlerts", truncated);
    if (doc)
        json_object_set_new(doc, "groupKey",
                            json_sprintf("{}:{alertname=\"%s\", tenant=\"%s\"}", reason, t));
    char *out = doc ? po_json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    return out;
}

/* The group as lines of text (Slack, mail); subject is the first line. */
static char *text_of(const struct group *g, const int *rows, int n, int truncated, char *subject,
                     size_t subcap)
{
    int firing = 0;
    for (int k = 0; k < n; k++)
        firing += !is_resolved(g, rows[k]);
    (void)snprintf(subject, subcap, "[%s%s%d] payonce %s, tenant %s",
                   g->firing ? "FIRING" : "RESOLVED", ":", g->firing ? firing : n - firing,
                   cell(g, g->from, C_REASON), cell(g, g->from, C_TENANT));
    size_t cap = strlen(subject) + 64;
    for (int k = 0; k < n; k++)
        cap += 64 + strlen(cell(g, rows[k], C_ORDER)) + strlen(cell(g, rows[k], C_DETAIL)) +
               strlen(cell(g, rows[k], C_STATE)) + strlen(cell(g, rows[k], C_STATE_BY)) +
               strlen(cell(g, rows[k], C_STATE_NOTE));
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t len = (size_t)snprintf(out, cap, "%s", subject);
    for (int k = 0; k < n; k++) {
        int i = rows[k];
        char sid[PO_ALERT_SHORT_SIZE];
        po_alert_short_id(cell(g, i, C_KEY), sid);
        len += (size_t)snprintf(
            out + len, cap - len, "\n- %s %s%s%s: %s", sid, is_resolved(g, i) ? "RESOLVED " : "",
            *cell(g, i, C_ORDER) ? "order " : "", cell(g, i, C_ORDER), cell(g, i, C_DETAIL));
        len = len < cap ? len : cap - 1;
        if (*cell(g, i, C_STATE_NOTE))
            len += (size_t)snprintf(out + len, cap - len, " (%s by %s: %s)", cell(g, i, C_STATE),
                                    cell(g, i, C_STATE_BY), cell(g, i, C_STATE_NOTE));
        len = len < cap ? len : cap - 1;
    }
    if (truncated)
        (void)snprintf(out + len, cap - len, "\n… and %d more", truncated);
    return out;
}

static bool post(const struct po_alert_notify_cfg *c, const char *body, char *why, size_t cap)
{
    struct po_egress_policy p;
    struct po_egress_result res;
    receiver_policy(&p);
    const char *h[] = {"Content-Type: application/json", "User-Agent: payonce-alerts/1", "Expect:"};
    if (po_http_post(&p, c->url, h, PO_NELEM(h), body, c->timeout_ms, &res)) {
        (void)snprintf(why, cap, "out of memory");
        return false;
    }
    if (res.error)
        (void)snprintf(why, cap, "%s (%.160s)", po_egress_error_text(res.error), res.detail);
    else if (res.status < 200 || res.status >= 300)
        (void)snprintf(why, cap, "HTTP %ld", res.status);
    return !res.error && res.status >= 200 && res.status < 300;
}

/* The message through the local MTA: sendmail -t -oi, the headers on its
 * standard input (the address was checked: one user@host, nothing else). */
static bool mail(const struct po_alert_notify_cfg *c, const char *subject, const char *text,
                 char *why, size_t cap)
{
    int fds[2];
    if (pipe(fds) != 0) {
        (void)snprintf(why, cap, "pipe: %s", strerror(errno));
        return false;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        (void)snprintf(why, cap, "fork: %s", strerror(errno));
        return false;
    }
    if (pid == 0) {
        (void)dup2(fds[0], 0);
        close(fds[0]);
        close(fds[1]);
        execl(c->sendmail, c->sendmail, "-t", "-oi", (char *)NULL);
        _exit(127);
    }
    close(fds[0]);
    FILE *f = fdopen(fds[1], "w");
    bool wrote = f && fprintf(f,
                              "To: %s\nSubject: %s\nContent-Type: text/plain; charset=utf-8\n"
                              "Auto-Submitted: auto-generated\n\n%s\n",
                              c->email_to, subject, text) > 0;
    if (f)
        wrote = fclose(f) == 0 && wrote;
    else
        close(fds[1]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    bool ok = wrote && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!ok)
        (void)snprintf(why, cap, "%s exited %d", c->sendmail, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return ok;
}

/* What was said, written on the alerts (one transaction). */
static po_err mark(struct po_store *s, const struct group *g, const int *rows, int n,
                   const char *now, char *err, size_t errcap)
{
    po_err rc = po_store_begin(s, err, errcap);
    for (int k = 0; !rc && k < n; k++)
        rc = po_store_exec(s,
                           "UPDATE alert SET notified_state = ?, notified_at = ? WHERE"
                           " tenant_id = ? AND alert_key = ?",
                           PO_PARAMS(PO_TEXT(is_resolved(g, rows[k]) ? "resolved" : "firing"),
                                     PO_TEXT(now), PO_TEXT(cell(g, rows[k], C_TENANT)),
                                     PO_TEXT(cell(g, rows[k], C_KEY))),
                           NULL, NULL, err, errcap);
    if (!rc)
        rc = po_store_commit(s, err, errcap);
    else
        po_store_rollback(s);
    return rc;
}

static po_err send_group(struct po_store *s, const struct po_alert_notify_cfg *c, struct group *g,
                         const char *now, struct po_alert_notify_report *out, char *err,
                         size_t errcap)
{
    int rows[NOTIFY_GROUP_SHOWN], n = 0, total = 0;
    /* the firing alerts first (oldest first), then the ones just resolved */
    for (int pass = 0; pass < 2; pass++)
        for (int i = g->from; i < g->to; i++)
            if (is_resolved(g, i) == (pass == 1)) {
                total++;
                if (n < NOTIFY_GROUP_SHOWN)
                    rows[n++] = i;
            }
    char subject[256] = "", why[PO_ERRBUF_SIZE] = "";
    bool ok = true, slack = c->url && *c->url && c->format && strcmp(c->format, "slack") == 0,
         mailing = c->email_to && *c->email_to;
    /* the text (Slack's and the mail's) is written once */
    char *text = slack || mailing ? text_of(g, rows, n, total - n, subject, sizeof subject) : NULL;
    if (c->url && *c->url) {
        char *body = NULL;
        if (slack) {
            json_t *doc = text ? json_pack("{s:s}", "text", text) : NULL;
            body = doc ? po_json_dumps(doc, JSON_COMPACT) : NULL;
            json_decref(doc);
        } else {
            body = am_payload(g, rows, n, total - n);
        }
        ok = body && post(c, body, why, sizeof why);
        if (!body)
            (void)snprintf(why, sizeof why, "out of memory");
        if (!ok)
            po_log(PO_LOG_WARN, "alerts: tenant %s, %s: the operator's webhook did not take it: %s",
                   cell(g, g->from, C_TENANT), cell(g, g->from, C_REASON), why);
        free(body);
    }
    if (mailing) {
        bool mailed = text && mail(c, subject, text, why, sizeof why);
        if (!mailed)
            po_log(PO_LOG_WARN, "alerts: tenant %s, %s: not mailed to %s: %s",
                   cell(g, g->from, C_TENANT), cell(g, g->from, C_REASON), c->email_to,
                   text ? why : "out of memory");
        ok = ok && mailed;
    }
    free(text);
    if (!ok) {
        out->groups_failed++;
        return PO_OK; /* tried again next round */
    }
    out->groups_sent++;
    for (int k = 0; k < n; k++) {
        if (is_resolved(g, rows[k]))
            out->alerts_resolved++;
        else
            out->alerts_firing++;
    }
    return mark(s, g, rows, n, now, err, errcap);
}

po_err po_alert_notify_round(struct po_store *s, const struct po_alert_notify_cfg *c, int64_t now,
                             struct po_alert_notify_report *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    if (!po_alert_notify_on(c))
        return PO_OK;
    struct po_rows r;
    po_err rc = po_store_exec(
        s,
        "SELECT tenant_id, reason, alert_key, out_trade_no, amount, currency, detail, created_at,"
        " state, state_by, state_note, state_at, notified_state, notified_at FROM alert WHERE"
        " state <> 'resolved' OR notified_state = 'firing' ORDER BY tenant_id, reason,"
        " created_at, alert_key LIMIT ?",
        PO_PARAMS(PO_I64(NOTIFY_ROWS_MAX)), &r, NULL, err, errcap);
    if (rc)
        return rc;
    char at[PO_TIME_SIZE];
    po_clock_iso_ms(now * 1000, at, sizeof at);
    for (int from = 0; !rc && from < r.nrows;) {
        struct group g = {.r = &r, .from = from, .to = from + 1};
        while (g.to < r.nrows && strcmp(cell(&g, g.to, C_TENANT), cell(&g, from, C_TENANT)) == 0 &&
               strcmp(cell(&g, g.to, C_REASON), cell(&g, from, C_REASON)) == 0)
            g.to++;
        if (group_due(&g, c, now))
            rc = send_group(s, c, &g, at, out, err, errcap);
        from = g.to;
    }
    po_rows_free(&r);
    return rc;
}
