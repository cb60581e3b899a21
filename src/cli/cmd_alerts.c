/*
 * cmd_alerts.c — the alerts commands: list, and the operator's actions on one
 * (ack, resolve, replay, accept, refund from suspense), each audited.
 */
#include "../channel/channel.h"
#include "../core/core.h"
#include "../engine/objects.h"
#include "../engine/engine.h"
#include "../ledger/ledger.h"
#include "../service/service.h"
#include "../store/store.h"

#include <jansson.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_int.h"

int cmd_alerts(struct po_store *s, const struct opts *o)
{
    const char *t = cli_need(o, "tenant");
    if (!t)
        return EXIT_USAGE;
    const char *state = cli_opt(o, "state");
    if (state && !po_alert_state_valid(state)) {
        fprintf(stderr, "payonce: --state: open, acknowledged or resolved\n");
        return EXIT_USAGE;
    }
    struct po_page pg = {.after_ts = "", .after_key = "", .limit = 1000};
    json_t *list = NULL;
    po_err rc = po_view_alerts(s, t, state, &pg, &list);
    if (rc)
        return cli_fail(rc, "cannot read the alerts");
    if (cli_flag(o, "json"))
        return cli_print_json(json_pack("{s:s, s:o}", "tenant", t, "alerts", list));
    size_t i;
    json_t *a;
    json_array_foreach(list, i, a)
    {
        char money[PO_MONEY_MAX];
        po_money_format((int64_t)json_integer_value(json_object_get(a, "amount")),
                        json_string_value(json_object_get(a, "currency")), money, sizeof money);
        const char *order = json_string_value(json_object_get(a, "out_trade_no"));
        printf("%s %-12s %-22s %s  %s\n   id %s  order %s  key %s",
               json_string_value(json_object_get(a, "created_at")),
               json_string_value(json_object_get(a, "state")),
               json_string_value(json_object_get(a, "reason")), money,
               json_string_value(json_object_get(a, "detail")),
               json_string_value(json_object_get(a, "short_id")), order && *order ? order : "-",
               json_string_value(json_object_get(a, "id")));
        if (json_is_string(json_object_get(a, "state_by")))
            printf("  (%s by %s at %s%s%s)", json_string_value(json_object_get(a, "state")),
                   json_string_value(json_object_get(a, "state_by")),
                   json_string_value(json_object_get(a, "state_at")),
                   json_is_string(json_object_get(a, "state_note")) ? ": " : "",
                   json_is_string(json_object_get(a, "state_note"))
                       ? json_string_value(json_object_get(a, "state_note"))
                       : "");
        printf("\n");
    }
    printf("%zu alert%s\n", json_array_size(list), json_array_size(list) == 1 ? "" : "s");
    json_decref(list);
    return 0;
}

/* A login name (the service checks an actor's length: 1-64 printable). */
#define ACTOR_BUF 256

/* Who acts on an alert, for its audit: --by, else the login name of the
 * user running the command (the password database's, not $USER, which
 * anyone sets); NULL after saying so when neither is known — never a
 * made-up name (a role's name once stood in for nobody). */
static const char *actor(const struct opts *o, char *buf, size_t cap)
{
    const char *by = cli_opt(o, "by");
    if (by && *by)
        return by;
    struct passwd pw, *found = NULL;
    char scratch[1024];
    if (getpwuid_r(geteuid(), &pw, scratch, sizeof scratch, &found) == 0 && found &&
        found->pw_name[0] && po_strcpy(buf, cap, found->pw_name) == PO_OK)
        return buf;
    fprintf(stderr, "payonce: who acts? this user (uid %u) has no name: give --by NAME\n",
            (unsigned)geteuid());
    return NULL;
}

/* alerts ack|resolve */
static int alert_act(struct po_store *s, const struct opts *o, enum po_alert_action action)
{
    char name[ACTOR_BUF];
    const char *by = actor(o, name, sizeof name);
    if (!by)
        return EXIT_USAGE;
    char err[PO_ERRBUF_SIZE] = "";
    bool changed = false;
    po_err rc = po_alert_act(s, cli_opt(o, "tenant"), cli_opt(o, "alert"), action, by,
                             cli_opt(o, "note"), &changed, err, sizeof err);
    if (rc)
        return cli_fail(rc, err);
    printf("alert %s %s\n", cli_opt(o, "alert"),
           !changed                 ? "was acknowledged already"
           : action == PO_ALERT_ACK ? "acknowledged"
                                    : "resolved");
    return 0;
}

int cmd_alerts_ack(struct po_store *s, const struct opts *o)
{
    return alert_act(s, o, PO_ALERT_ACK);
}

int cmd_alerts_resolve(struct po_store *s, const struct opts *o)
{
    return alert_act(s, o, PO_ALERT_RESOLVE);
}

typedef po_err (*alert_engine_fn)(const struct po_door *d, const char *tenant, const char *alert_id,
                                  const char *actor, const char *note, struct po_outcome *out,
                                  bool *resolved, char *err, size_t errcap);

/* An alert's event through the engine, audited (replay, accept): prints the
 * outcome and whether the alert is resolved (exit 1 when it is not). */
static int alert_engine(struct po_store *s, const struct opts *o, alert_engine_fn act,
                        const char *verb, const char *yes, const char *no)
{
    char name[ACTOR_BUF];
    const char *by = actor(o, name, sizeof name);
    if (!by)
        return EXIT_USAGE;
    char err[PO_ERRBUF_SIZE] = "", js[256];
    struct po_outcome out;
    bool resolved = false;
    struct po_door d = {s, NULL}; /* the offline CLI: no committer */
    po_err rc = act(&d, cli_opt(o, "tenant"), cli_opt(o, "alert"), by, cli_opt(o, "note"), &out,
                    &resolved, err, sizeof err);
    if (rc)
        return cli_fail(rc, err);
    if (po_outcome_to_json(&out, js, sizeof js))
        js[0] = '\0';
    printf("%s alert %s: %s; %s\n", verb, cli_opt(o, "alert"), js, resolved ? yes : no);
    return resolved ? 0 : EXIT_FAIL;
}

/* alerts replay: the refused payment through the engine again (after the
 * cause was fixed, e.g. the order created); audited; resolves when credited. */
int cmd_alerts_replay(struct po_store *s, const struct opts *o)
{
    return alert_engine(s, o, po_alert_replay, "replayed", "credited, the alert is resolved",
                        "not credited, the alert stays (fix the cause and replay again)");
}

/* alerts accept: a refund the channel made after payonce had closed it,
 * taken as the order's through the engine; audited; resolves when applied. */
int cmd_alerts_accept(struct po_store *s, const struct opts *o)
{
    return alert_engine(s, o, po_alert_accept, "accepted",
                        "the refund is the order's, the money left suspense, the alert is resolved",
                        "not applied, the alert stays (docs/operations.md)");
}

/* alerts redrive: a dead tenant event's deliveries sent again, the alert
 * resolved saying so. */
int cmd_alerts_redrive(struct po_store *s, const struct opts *o)
{
    char name[ACTOR_BUF];
    const char *by = actor(o, name, sizeof name);
    if (!by)
        return EXIT_USAGE;
    char err[PO_ERRBUF_SIZE] = "";
    int64_t n = 0;
    po_err rc = po_alert_redrive(s, cli_opt(o, "tenant"), cli_opt(o, "alert"), by,
                                 cli_opt(o, "note"), &n, err, sizeof err);
    if (rc)
        return cli_fail(rc, err);
    printf("%lld dead deliveries sent again; the alert is resolved (payonce webhook attempts"
           " follows them)\n",
           (long long)n);
    return 0;
}

/* alerts refund: a payment parked in suspense back to the payer, through
 * the channel's refund and the engine; audited; payonce resolves the alert
 * when the channel's success is applied. */
int cmd_alerts_refund(struct po_store *s, const struct opts *o)
{
    char name[ACTOR_BUF];
    const char *by = actor(o, name, sizeof name);
    if (!by)
        return EXIT_USAGE;
    unsigned char master[32];
    bool have = false;
    int ret = cli_load_master_key(o, master, &have);
    if (ret)
        return ret;
    char err[PO_ERRBUF_SIZE] = "", money[PO_MONEY_MAX];
    struct po_suspense_refund r;
    struct po_door d = {s, NULL}; /* the offline CLI: no committer */
    po_err rc =
        po_alert_refund(&d, NULL, have ? master : NULL, cli_opt(o, "tenant"), cli_opt(o, "alert"),
                        cli_opt(o, "out-refund-no"), by, cli_opt(o, "note"), &r, err, sizeof err);
    po_secure_zero(master, sizeof master);
    if (rc)
        return cli_fail(rc, err);
    po_money_format(r.amount, r.currency, money, sizeof money);
    printf("refund %s of %s (%s transaction %s) %s: %s, submission %s%s%s\n", r.out_refund_no,
           money, r.channel, r.txn_id, r.created ? "requested" : "was requested already", r.status,
           r.submit_state, r.submit_error[0] ? ", last error " : "", r.submit_error);
    if (strcmp(r.status, "SUCCESS") == 0)
        printf("the channel refunded it: the money left suspense, the alert is resolved\n");
    else if (strcmp(r.submit_state, "manual") == 0)
        printf("%s has no refund API: refund it in the channel's merchant platform with refund"
               " number %s; its notification clears the suspense\n",
               r.channel, r.out_refund_no);
    else if (strcmp(r.status, "CLOSED") == 0)
        printf("the refund is closed: see the refund_rejected_by_channel alert, fix the cause and"
               " request again with a new number\n");
    else
        printf("the channel's refund notification (or the next bill) moves the money out of"
               " suspense and resolves the alert; 'payonce refund show' follows it\n");
    return strcmp(r.status, "CLOSED") == 0 ? EXIT_FAIL : 0;
}
