/*
 * recon_daily.c — reconciliation by itself (recon_daily.h).
 *
 * A day is the channel's (WeChat Pay and Alipay: Beijing time): its bill is
 * published the next day at the channel's hour (WeChat Pay: 10:00), which
 * is when the round first asks for it. Each try is recorded in recon_day;
 * a day is done once its bill went through the one import (recon.c, whose
 * own record, recon_run, makes a second import of the same file a no-op).
 * Nothing here is timed by sleeping: the round takes the time it runs at,
 * so that the tests move the clock across days.
 */
#include "../accounts/account.h"
#include "recon_daily.h"

#include "../../engine/alert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DAY 86400

bool po_recon_time_parse(const char *hhmm, int64_t *out)
{
    if (!hhmm || strlen(hhmm) != 5 || hhmm[2] != ':')
        return false;
    int h = (hhmm[0] - '0') * 10 + (hhmm[1] - '0'), m = (hhmm[3] - '0') * 10 + (hhmm[4] - '0');
    for (int i = 0; i < 5; i++)
        if (i != 2 && (hhmm[i] < '0' || hhmm[i] > '9'))
            return false;
    if (h > 23 || m > 59)
        return false;
    *out = h * 3600 + m * 60;
    return true;
}

/* YYYY-MM-DD of the day that begins at local_day_start (s since epoch, in
 * the channel's zone). */
static void day_name(int64_t local_day_start, char *out, size_t cap)
{
    time_t t = (time_t)local_day_start;
    struct tm tm;
    gmtime_r(&t, &tm);
    (void)strftime(out, cap, "%Y-%m-%d", &tm);
}

/* Records the day's state (one statement, its own transaction). sticky: a
 * fetch that decided nothing (pending) leaves a day already reconciled (or
 * found empty) as it was — that import still stands; not sticky (a day
 * still open, or reopened), the state is written as it is. fetched: what
 * this fetch came to (imported, none, not_ready, failed), always written. */
static po_err record_day(struct po_store *s, const struct po_channel_account *a, const char *date,
                         const char *state, bool sticky, const char *fetched, const char *error,
                         const char *sha, int64_t next_try, int64_t now, char *err, size_t errcap)
{
    char when[PO_TIME_SIZE], next[PO_TIME_SIZE] = "";
    po_clock_iso_at(now, when, sizeof when);
    if (next_try)
        po_clock_iso_at(next_try, next, sizeof next);
    struct po_param p[] = {PO_TEXT(a->tenant),
                           PO_TEXT(a->channel),
                           PO_TEXT(date),
                           PO_TEXT(state),
                           error && *error ? PO_TEXT(error) : PO_NULLP,
                           next_try ? PO_TEXT(next) : PO_NULLP,
                           sha && *sha ? PO_TEXT(sha) : PO_NULLP,
                           PO_TEXT(when),
                           PO_TEXT(fetched)};
#define UPSERT(KEEP)                                                                               \
    "INSERT INTO recon_day (tenant_id, channel, bill_date, state, attempts,"                       \
    " last_error, next_try_at, file_sha256, updated_at, last_fetch) VALUES (?, ?, ?, ?,"           \
    " 1, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, channel, bill_date) DO UPDATE"                     \
    " SET state = CASE WHEN " KEEP " THEN recon_day.state ELSE"                                    \
    " excluded.state END, attempts = recon_day.attempts + 1,"                                      \
    " last_fetch = excluded.last_fetch,"                                                           \
    " last_error = excluded.last_error, next_try_at = CASE WHEN " KEEP                             \
    " THEN recon_day.next_try_at ELSE excluded.next_try_at END,"                                   \
    " file_sha256 = COALESCE(excluded.file_sha256, recon_day.file_sha256),"                        \
    " updated_at = excluded.updated_at"
    return po_store_exec(s,
                         sticky
                             ? UPSERT("excluded.state = 'pending' AND recon_day.state <> 'pending'")
                             : UPSERT("1 = 0"),
                         p, PO_NELEM(p), NULL, NULL, err, errcap);
#undef UPSERT
}

static po_err day_row(struct po_store *s, const struct po_channel_account *a, const char *date,
                      bool *found, char *state, size_t cap, int64_t *next_try, bool *overdue,
                      char *err, size_t errcap);

/* The file the day was last reconciled with and its rows (-1: none). */
static po_err day_file(struct po_store *s, const struct po_channel_account *a, const char *date,
                       char *sha, size_t cap, int64_t *rows, char *err, size_t errcap)
{
    struct po_rows r;
    po_err rc = po_store_exec(
        s,
        "SELECT COALESCE(d.file_sha256, ''), COALESCE(r.rows_total, -1) FROM recon_day d"
        " LEFT JOIN recon_run r ON r.tenant_id = d.tenant_id AND r.file_sha256 = d.file_sha256"
        " WHERE d.tenant_id = ? AND d.channel = ? AND d.bill_date = ?",
        PO_PARAMS(PO_TEXT(a->tenant), PO_TEXT(a->channel), PO_TEXT(date)), &r, NULL, err, errcap);
    if (rc)
        return rc;
    *rows = -1;
    if (r.nrows == 1) {
        (void)snprintf(sha, cap, "%s", po_rows_get(&r, 0, 0));
        if (po_rows_i64(&r, 0, 1, rows))
            *rows = -1;
    }
    po_rows_free(&r);
    return PO_OK;
}

po_err po_recon_fetch_day(const struct po_door *d, const struct po_channel_account *acct,
                          const char *date, bool force, int64_t now, int64_t retry_s,
                          struct po_recon_day_result *out, char *err, size_t errcap)
{
    struct po_store *s = d->s;
    memset(out, 0, sizeof *out);
    const struct po_channel_ops *ch = po_channel_find(acct->channel);
    if (!ch || !ch->bill_fetch || !ch->bill_parse) {
        char names[128] = "";
        for (int i = 0, n = 0; po_channels[i]; i++)
            if (po_channels[i]->bill_fetch)
                n += snprintf(names + n, sizeof names - (size_t)n, "%s%s", n ? ", " : "",
                              po_channels[i]->name);
        po_errf(err, errcap, "payonce does not download %s's bills (it does: %s)", acct->channel,
                names);
        return PO_ERR_INVALID;
    }
    if (!acct->api_ready) {
        po_errf(err, errcap,
                "the %s account cannot call the channel (channel set --api-base-url and its key)",
                acct->channel);
        return PO_ERR_INVALID;
    }
    int64_t midnight = 0;
    if (po_date_parse(date, &midnight)) {
        po_errf(err, errcap, "the date must be a calendar day, YYYY-MM-DD (%.16s is not)", date);
        return PO_ERR_INVALID;
    }
    /* The day in the channel's zone: [start, start + DAY) in Unix s. */
    int64_t start = midnight - ch->bill_tz_s;
    if (start > now) {
        po_errf(err, errcap,
                "%s has not begun in %s's time zone (UTC%+d): nothing to reconcile yet", date,
                acct->channel, (int)(ch->bill_tz_s / 3600));
        return PO_ERR_INVALID;
    }
    /* Final once the day is over and the channel has published its bill:
     * before, what the bill has is imported, but the day stays pending (a
     * later payment of the day must still be reconciled by the round). */
    out->open = now < start + DAY + ch->bill_publish_s;
    out->final_at = start + DAY + ch->bill_publish_s;
    bool found = false, overdue = false;
    char was[16] = "", was_sha[65] = "";
    int64_t next_try = 0, was_rows = -1;
    po_err rc = day_row(s, acct, date, &found, was, sizeof was, &next_try, &overdue, err, errcap);
    if (!rc && found)
        rc = day_file(s, acct, date, was_sha, sizeof was_sha, &was_rows, err, errcap);
    if (rc)
        return rc;
    struct po_bill_fetch f;
    rc = ch->bill_fetch(acct, date, &f);
    if (rc)
        return rc;
    out->state = f.state;
    (void)snprintf(out->why, sizeof out->why, "%s", f.why);
    const char *state = "pending";
    if (f.state == PO_BILL_NONE) {
        state = "none";
    } else if (f.state == PO_BILL_FETCHED) {
        char ierr[PO_ERRBUF_SIZE] = "";
        rc = po_recon_import(d, acct, f.data, f.len, force, NULL, NULL, &out->report, ierr,
                             sizeof ierr);
        if (!rc) {
            out->imported = true;
            state = "done";
        } else if (rc == PO_ERR_INVALID) { /* a bill that is not the tenant's, or not a bill */
            (void)snprintf(out->why, sizeof out->why, "refused");
            po_log(PO_LOG_WARN, "tenant %s: %s bill of %s refused whole: %s", acct->tenant,
                   acct->channel, date, ierr);
            out->state = PO_BILL_FAILED;
            rc = PO_OK;
        } else {
            po_errf(err, errcap, "%s", ierr);
        }
    }
    free(f.data);
    if (rc)
        return rc;
    if (out->open) {
        state = "pending";
        if (!out->why[0])
            (void)snprintf(out->why, sizeof out->why, "day_not_final");
    } else if (found && strcmp(was, "pending") != 0 && out->imported &&
               !out->report.already_imported && out->report.rows > (was_rows < 0 ? 0 : was_rows)) {
        /* A day done before whose bill now has rows it did not have: not
         * skipped — pending again, so the round fetches and confirms it. */
        out->reopened = true;
        state = "pending";
        (void)snprintf(out->why, sizeof out->why, "reopened_new_rows");
        po_log(PO_LOG_WARN,
               "tenant %s: %s bill of %s was %s (%lld rows) and now has %lld rows: reopened",
               acct->tenant, acct->channel, date, was, (long long)(was_rows < 0 ? 0 : was_rows),
               (long long)out->report.rows);
    }
    bool done = strcmp(state, "pending") != 0;
    const char *fetched = out->imported                     ? "imported"
                          : out->state == PO_BILL_NONE      ? "none"
                          : out->state == PO_BILL_NOT_READY ? "not_ready"
                                                            : "failed";
    return record_day(s, acct, date, state, !out->open && !out->reopened, fetched, out->why,
                      out->imported ? out->report.file_sha256 : "", done ? 0 : now + retry_s, now,
                      err, errcap);
}

/* The day's row: its state, when it may be tried again, whether its
 * overdue alert was raised; *found false when it was never tried. */
static po_err day_row(struct po_store *s, const struct po_channel_account *a, const char *date,
                      bool *found, char *state, size_t cap, int64_t *next_try, bool *overdue,
                      char *err, size_t errcap)
{
    struct po_rows r;
    po_err rc = po_store_exec(s,
                              "SELECT state, COALESCE(next_try_at, ''), overdue FROM recon_day"
                              " WHERE tenant_id = ? AND channel = ? AND bill_date = ?",
                              PO_PARAMS(PO_TEXT(a->tenant), PO_TEXT(a->channel), PO_TEXT(date)), &r,
                              NULL, err, errcap);
    if (rc)
        return rc;
    *found = r.nrows == 1;
    int64_t ov = 0;
    if (*found) {
        (void)snprintf(state, cap, "%s", po_rows_get(&r, 0, 0));
        *next_try = *po_rows_get(&r, 0, 1) ? po_clock_unix_of(po_rows_get(&r, 0, 1)) : 0;
        if (po_rows_i64(&r, 0, 2, &ov))
            ov = 0;
    }
    *overdue = ov != 0;
    po_rows_free(&r);
    return PO_OK;
}

/* The first day ever tried for the account ("" when none): catching up
 * never reaches before it, so a new account is not flooded with the bills
 * of days before payonce. */
static po_err first_day(struct po_store *s, const struct po_channel_account *a, char *out,
                        size_t cap, char *err, size_t errcap)
{
    struct po_rows r;
    po_err rc =
        po_store_exec(s,
                      "SELECT COALESCE(MIN(bill_date), '') FROM recon_day WHERE"
                      " tenant_id = ? AND channel = ?",
                      PO_PARAMS(PO_TEXT(a->tenant), PO_TEXT(a->channel)), &r, NULL, err, errcap);
    if (rc)
        return rc;
    (void)snprintf(out, cap, "%s", r.nrows ? po_rows_get(&r, 0, 0) : "");
    po_rows_free(&r);
    return PO_OK;
}

/* The alert that date is still not reconciled at its deadline, once. */
static po_err raise_overdue(struct po_store *s, const struct po_channel_account *a,
                            const char *date, int64_t now, char *err, size_t errcap)
{
    char key[96], detail[400], when[PO_TIME_SIZE];
    (void)snprintf(key, sizeof key, "recon:%s:%s", a->channel, date);
    (void)snprintf(detail, sizeof detail,
                   "the %s bill of %s is not reconciled by its deadline; payonce keeps trying"
                   " (payonce recon fetch --tenant %s --channel %s --date %s does it by hand)",
                   a->channel, date, a->tenant, a->channel, date);
    po_clock_iso_at(now, when, sizeof when);
    struct po_alert_new al = {.tenant = a->tenant,
                              .key = key,
                              .reason = "recon_overdue",
                              .idem_key = key,
                              .event_type = "RECON",
                              .source = "reconciliation",
                              .currency = "CNY",
                              .detail = detail};
    return po_alert_raise_tx(s, &al, when,
                             "UPDATE recon_day SET overdue = 1 WHERE tenant_id = ? AND channel = ?"
                             " AND bill_date = ?",
                             PO_PARAMS(PO_TEXT(a->tenant), PO_TEXT(a->channel), PO_TEXT(date)), err,
                             errcap);
}

/* The round for one account. */
static po_err account_round(const struct po_door *d, const struct po_channel_ops *ch,
                            const struct po_channel_account *a,
                            const struct po_recon_daily_cfg *cfg, int64_t now,
                            struct po_recon_daily_report *x, char *err, size_t errcap)
{
    struct po_store *s = d->s;
    int64_t local = now + ch->bill_tz_s, today = local - local % DAY;
    int64_t at = cfg->at_s >= 0 ? cfg->at_s : ch->bill_publish_s;
    char first[16];
    po_err rc = first_day(s, a, first, sizeof first, err, errcap);
    for (int back = cfg->days; !rc && back >= 1; back--) {
        int64_t day = today - (int64_t)back * DAY; /* the bill's day, its midnight there */
        if (local < day + DAY + at)
            continue; /* not published yet */
        char date[16], state[16] = "";
        day_name(day, date, sizeof date);
        if (back > 1 && (!*first || strcmp(date, first) < 0))
            continue; /* catching up: never before the first day tried */
        bool found = false, overdue = false;
        int64_t next_try = 0;
        if ((rc = day_row(s, a, date, &found, state, sizeof state, &next_try, &overdue, err,
                          errcap)))
            break;
        bool done = found && strcmp(state, "pending") != 0;
        if (!done && (!found || next_try <= now)) {
            struct po_recon_day_result r;
            x->due++;
            if ((rc = po_recon_fetch_day(d, a, date, false, now, cfg->retry_s, &r, err, errcap)))
                break;
            done = r.imported || r.state == PO_BILL_NONE;
            x->imported += r.imported;
            x->none += r.state == PO_BILL_NONE;
            x->not_ready += r.state == PO_BILL_NOT_READY;
            x->failed += r.state == PO_BILL_FAILED;
            if (r.imported)
                po_log(PO_LOG_INFO,
                       "tenant %s: %s bill of %s reconciled: %lld rows, %lld credited now, %lld"
                       " matched, %lld mismatched, %lld missing from the bill",
                       a->tenant, a->channel, date, (long long)r.report.rows,
                       (long long)r.report.replayed, (long long)r.report.matched,
                       (long long)r.report.mismatched, (long long)r.report.missing_from_bill);
            else if (!done)
                po_log(PO_LOG_INFO, "tenant %s: %s bill of %s: %s; trying again in %lld s",
                       a->tenant, a->channel, date,
                       r.state == PO_BILL_NOT_READY ? "not published yet" : r.why,
                       (long long)cfg->retry_s);
            if (!*first)
                (void)snprintf(first, sizeof first, "%s", date);
        }
        if (!done && !overdue && local >= day + DAY + cfg->deadline_s) {
            if (!(rc = raise_overdue(s, a, date, now, err, errcap)))
                x->overdue++;
        }
    }
    return rc;
}

po_err po_recon_daily_round(const struct po_door *d, struct po_accounts *accounts,
                            const unsigned char *master, const struct po_recon_daily_cfg *cfg,
                            int64_t now, struct po_recon_daily_report *out, char *err,
                            size_t errcap)
{
    struct po_store *s = d->s;
    memset(out, 0, sizeof *out);
    po_err rc = PO_OK;
    for (int c = 0; !rc && po_channels[c]; c++) {
        const struct po_channel_ops *ch = po_channels[c];
        if (!ch->bill_fetch)
            continue;
        char **tenants = NULL;
        int n = 0;
        if ((rc = po_account_tenants(s, ch->name, &tenants, &n)))
            break;
        for (int i = 0; !rc && i < n; i++) {
            struct po_account_ref *ref = NULL;
            char aerr[PO_ERRBUF_SIZE] = "";
            if (po_accounts_use(accounts, s, master, tenants[i], ch->name, &ref, aerr, sizeof aerr))
                continue; /* an account that does not load is reported where it is used */
            if (po_account_of(ref)->api_ready)
                rc = account_round(d, ch, po_account_of(ref), cfg, now, out, err, errcap);
            po_accounts_release(ref);
        }
        po_strings_free(tenants, n);
    }
    return rc;
}
