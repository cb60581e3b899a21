/*
 * recon_daily.h — reconciliation by itself (recon_daily.c): every day's bill
 * of every tenant's channel account downloaded from the channel once it is
 * published, imported through the one import (src/recon), retried while it
 * is not ready, and an alert when a day is still not reconciled at its
 * deadline. `payonce serve` runs the round; `payonce recon fetch` does one
 * day by hand.
 * Part of service.h (which includes every service header).
 */
#ifndef PO_SERVICE_RECON_DAILY_H
#define PO_SERVICE_RECON_DAILY_H

#include "../../channel/channel.h"
#include "../accounts/account.h"
#include "../../core/core.h"
#include "../../recon/recon.h"
#include "../../store/store.h"

struct po_recon_daily_cfg {
    int64_t at_s;       /* when a day is fetched, seconds after the next midnight in the
                           channel's zone; -1: when the channel publishes it */
    int64_t deadline_s; /* a day not reconciled by then (the same clock) raises an alert */
    int64_t retry_s;    /* a day that could not be done is tried again after this */
    int days;           /* how many past days a round looks at (catching up after a stop),
                           never before the first day reconciled for the account */
};

/* One day of one account: fetched, imported, recorded in recon_day. */
struct po_recon_day_result {
    enum po_bill_state state;
    char why[PO_REASON_SIZE];
    bool imported;                 /* the bill went through the import (report) */
    struct po_recon_report report; /* imported */
    /* The day is not final yet (not over in the channel's zone, or its
     * bill not published by the channel's hour): whatever came was
     * imported, the day left pending until final_at (Unix s). */
    bool open;
    int64_t final_at;
    /* A day done before whose bill now had rows it lacked: pending again. */
    bool reopened;
};

/* Downloads date's bill (YYYY-MM-DD, the channel's day) for the account
 * and imports it (force: import a file imported before again), recording
 * the day's state at now (Unix s) with next try at now + retry_s when it
 * is not done. A day is done (or none) only once it is final — over in the
 * channel's zone and past the channel's publishing hour — so a day still
 * open is imported as far as it goes and stays pending; a done day whose
 * bill has gained rows is reopened (pending). PO_ERR_INVALID, nothing
 * recorded, when the date is not a calendar day or has not begun in the
 * channel's zone, the channel cannot download bills or the account cannot
 * call it (err says which). The bill's events, fees and run go through the
 * door d (inside serve, its committer); d->s reads and records the day. */
po_err po_recon_fetch_day(const struct po_door *d, const struct po_channel_account *acct,
                          const char *date, bool force, int64_t now, int64_t retry_s,
                          struct po_recon_day_result *out, char *err, size_t errcap) PO_MUST_CHECK;

struct po_recon_daily_report {
    int64_t due, imported, none, not_ready, failed, overdue;
};

/*
 * One round at now (Unix s — serve's clock, a test's moved one): for every
 * channel that downloads bills and every tenant account of it that may
 * call the channel, the past cfg->days days whose bill is published by
 * now (at cfg->at_s, in the channel's zone) and not done are fetched
 * (po_recon_fetch_day), each at most every retry_s; a day still not done
 * past its deadline raises one alert (recon_overdue) for the tenant.
 * Accounts from accounts, serve's cache (NULL: unsealed with master).
 */
po_err po_recon_daily_round(const struct po_door *d, struct po_accounts *accounts,
                            const unsigned char *master, const struct po_recon_daily_cfg *cfg,
                            int64_t now, struct po_recon_daily_report *out, char *err,
                            size_t errcap) PO_MUST_CHECK;

/* "HH:MM" -> seconds after midnight; false when malformed. */
bool po_recon_time_parse(const char *hhmm, int64_t *out);

#endif
