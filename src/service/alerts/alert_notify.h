/*
 * alert_notify.h — alerts that reach people (alert_notify.c): serve's
 * notifier tells the operator's receivers what is firing and what was
 * resolved. Part of service.h.
 */
#ifndef PO_SERVICE_ALERT_NOTIFY_H
#define PO_SERVICE_ALERT_NOTIFY_H

#include "../../channel/channel.h"
#include "../../core/core.h"
#include "../../store/store.h"

/* Where and how (the gateway's options alert-*; docs/operations.md,
 * "Alerts that reach people"). */
struct po_alert_notify_cfg {
    const char *url;      /* the operator's webhook (NULL or "": none) */
    const char *format;   /* "alertmanager" (default) or "slack" */
    const char *email_to; /* an address mailed through the local MTA (NULL or "": none) */
    const char *sendmail; /* the MTA's sendmail (default /usr/sbin/sendmail) */
    int64_t interval_s;   /* how often the notifier looks */
    int64_t group_wait_s; /* a new group waits this long for company */
    int64_t repeat_s;     /* a group still firing (open alerts) is said again after */
    long timeout_ms;      /* one POST's budget */
    bool insecure_dev;    /* http:// to loopback allowed (a local relay) */
};

/* Whether any receiver is configured. */
bool po_alert_notify_on(const struct po_alert_notify_cfg *c);
/* Checks the configuration (format, URL, address); err names the option. */
po_err po_alert_notify_check(const struct po_alert_notify_cfg *c, char *err,
                             size_t errcap) PO_MUST_CHECK;

struct po_alert_notify_report {
    int64_t groups_sent, groups_failed, alerts_firing, alerts_resolved;
};
/*
 * One round at unix time now: the alerts grouped by tenant and reason; a
 * group is sent when it has an alert never said (and its oldest such alert
 * is group_wait_s old, or the group is already firing), when it still has
 * open alerts last said repeat_s ago (acknowledged ones are someone's: not
 * repeated), or when an alert said firing has been resolved. One message
 * per group to every receiver, in the receiver's format; when all of them
 * took it, its alerts are marked as said. A receiver that failed is tried
 * again next round (so another may hear a group twice: at least once).
 */
po_err po_alert_notify_round(struct po_store *s, const struct po_alert_notify_cfg *c, int64_t now,
                             struct po_alert_notify_report *out, char *err,
                             size_t errcap) PO_MUST_CHECK;

#endif
