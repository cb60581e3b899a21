/*
 * cmd_recon.c — `payonce recon import` and `payonce recon query`.
 *
 *   payonce recon import --tenant ID --channel wechatpay FILE [--force] [--json]
 *   payonce recon query  --tenant ID [--min-age SECONDS] [--limit N] [--json]
 */
#include "cli_int.h"

#include "../recon/recon.h"
#include "../service/service.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void progress(void *ctx, int64_t done, int64_t total)
{
    (void)ctx;
    if (total >= 1000)
        fprintf(stderr, "  %lld / %lld rows\n", (long long)done, (long long)total);
}

/* An amount of the report (fine_digits 3: the fees' thousandths of the
 * minor unit) in the bill's currency; without one (several, or a run
 * recorded before payonce kept it) in minor units, said so. */
static void money(const struct po_recon_report *r, int64_t amount, int fine_digits, char *out,
                  size_t cap)
{
    if (r->currency[0] && !r->several_currencies)
        po_money_format_fine(amount, fine_digits, r->currency, out, cap);
    else
        (void)snprintf(out, cap,
                       fine_digits ? "%lld thousandths of a minor unit" : "%lld minor units",
                       (long long)amount);
}

/* The report of one import, as JSON (--json) or for people; what names
 * the bill. */
static int print_report(const struct opts *o, const char *what, const struct po_recon_report *rp)
{
    struct po_recon_report r = *rp;
    if (cli_flag(o, "json")) {
        json_t *j = po_recon_report_json(&r);
        char *doc = j ? po_json_dumps(j, JSON_COMPACT) : NULL;
        printf("%s\n", doc ? doc : "{}");
        free(doc);
        json_decref(j);
        return 0;
    }
    char a[PO_MONEY_MAX + 40], b[PO_MONEY_MAX + 40], c[PO_MONEY_MAX + 40], f[PO_MONEY_MAX + 40];
    if (r.already_imported)
        printf("%s was already imported (sha256 %.16s…); nothing changed. Its report:\n", what,
               r.file_sha256);
    money(&r, r.payments_amount, 0, a, sizeof a);
    money(&r, r.refunds_amount, 0, b, sizeof b);
    money(&r, r.replayed_amount, 0, c, sizeof c);
    money(&r, r.fees_milli, 3, f, sizeof f);
    if (r.several_currencies)
        printf("the bill's rows are in several currencies: amounts in minor units, summed (--json"
               " has them)\n");
    printf("reconciled %s .. %s, %lld rows\n", r.period_start, r.period_end, (long long)r.rows);
    printf("  %-44s %6lld  %16s\n", "payments in the bill", (long long)r.payments, a);
    printf("  %-44s %6lld  %16s\n", "refunds in the bill", (long long)r.refunds, b);
    printf("  %-44s %6lld  %16s\n", "replayed now (we had missed them)", (long long)r.replayed, c);
    printf("  %-44s %6lld\n", "already applied (duplicates)", (long long)r.matched);
    printf("  %-44s %6lld\n", "mismatched or unknown to us (alerts)", (long long)r.mismatched);
    printf("  %-44s %6lld\n", "parked in suspense (alerts)", (long long)r.suspense);
    printf("  %-44s %6lld\n", "zero-amount rows (nothing to credit)", (long long)r.zero_amount);
    printf("  %-44s %6lld\n", "our PAID orders missing from the bill (alerts)",
           (long long)r.missing_from_bill);
    printf("  %-44s %6s  %16s\n", "channel fees", "", f);
    return 0;
}

int cmd_recon_import(struct po_store *s, const struct opts *o)
{
    const char *tenant = cli_opt(o, "tenant"), *channel = cli_opt(o, "channel"),
               *file = cli_opt(o, "file");
    if (!file || !*file) {
        fprintf(stderr, "payonce: the bill FILE is required\n");
        return EXIT_USAGE;
    }
    const struct po_channel_ops *ch = po_channel_find(channel);
    if (!ch || !ch->bill_parse) {
        char names[128];
        po_channel_names(PO_CAN_BILL, names, sizeof names);
        fprintf(stderr, "payonce: --channel: payonce reads the bills of %s\n", names);
        return EXIT_USAGE;
    }
    char *data = NULL;
    size_t len = 0;
    po_err rc = po_file_read(file, PO_BILL_MAX, &data, &len);
    if (rc) {
        char why[600];
        po_file_why(file, rc, why, sizeof why);
        fprintf(stderr, "payonce: cannot read %s: %s\n", file, why);
        return EXIT_FAIL;
    }
    struct po_channel_account acct;
    int ret = cli_account(s, o, tenant, channel, &acct);
    if (ret) {
        free(data);
        return ret;
    }
    struct po_recon_report r;
    char err[PO_ERRBUF_SIZE] = "";
    struct po_door d = {s, NULL}; /* the offline CLI: no committer */
    rc = po_recon_import(&d, &acct, data, len, cli_flag(o, "force"), progress, NULL, &r, err,
                         sizeof err);
    po_channel_account_free(&acct);
    free(data);
    if (rc) {
        fprintf(stderr, "payonce: %s: refused, nothing applied from it: %s\n", file, err);
        return EXIT_FAIL;
    }
    return print_report(o, file, &r);
}

int cmd_recon_query(struct po_store *s, const struct opts *o)
{
    const char *tenant = cli_opt(o, "tenant");
    int64_t min_age = 300, limit = 1000;
    if ((cli_opt(o, "min-age") && po_parse_i64(cli_opt(o, "min-age"), 0, 86400 * 30, &min_age)) ||
        (cli_opt(o, "limit") && po_parse_i64(cli_opt(o, "limit"), 1, 100000, &limit))) {
        fprintf(stderr, "payonce: --min-age 0..2592000 seconds, --limit 1..100000\n");
        return EXIT_USAGE;
    }
    const char *channel = cli_opt(o, "channel") ? cli_opt(o, "channel") : "wechatpay";
    struct po_channel_account acct;
    int ret = cli_account(s, o, tenant, channel, &acct);
    if (ret)
        return ret;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct po_query_report q;
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_order_query_round(s, NULL, &acct, min_age, (int)limit, &q, err, sizeof err);
    po_channel_account_free(&acct);
    curl_global_cleanup();
    if (rc)
        return cli_fail(rc, err);
    if (cli_flag(o, "json")) {
        json_t *doc = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "queried", (json_int_t)q.queried,
                                "paid", (json_int_t)q.paid, "replayed", (json_int_t)q.replayed,
                                "matched", (json_int_t)q.matched, "not_paid",
                                (json_int_t)q.not_paid, "failed", (json_int_t)q.failed);
        if (doc && q.failed)
            json_object_set_new(doc, "first_failure", json_string(q.first_failure));
        (void)cli_print_json(doc);
    } else {
        printf("queried %lld orders still PAYING: %lld paid at the channel (%lld credited now,"
               " %lld already), %lld not paid, %lld failed\n",
               (long long)q.queried, (long long)q.paid, (long long)q.replayed, (long long)q.matched,
               (long long)q.not_paid, (long long)q.failed);
    }
    /* Why, without --log-level: the first failure (each is in the log). */
    if (q.failed)
        fprintf(stderr, "payonce: %lld order queries failed; the first: %s\n", (long long)q.failed,
                q.first_failure);
    return q.failed ? EXIT_FAIL : 0;
}

int cmd_recon_runs(struct po_store *s, const struct opts *o)
{
    const char *tenant = cli_opt(o, "tenant");
    json_t *list = NULL;
    po_err rc = po_recon_runs(s, tenant, &list);
    if (rc)
        return cli_fail(rc, "cannot read the reconciliation runs");
    if (cli_flag(o, "json")) {
        json_t *doc = json_pack("{s:s, s:o}", "tenant", tenant, "runs", list);
        char *js = doc ? po_json_dumps(doc, JSON_COMPACT) : NULL;
        printf("%s\n", js ? js : "{}");
        free(js);
        json_decref(doc);
        return 0;
    }
    printf("%-24s %-10s %-23s %7s  %s\n", "imported at", "channel", "period", "rows",
           "file sha256");
    size_t i;
    json_t *run;
    json_array_foreach(list, i, run) printf(
        "%-24s %-10s %s..%s %7lld  %.16s\n", json_string_value(json_object_get(run, "imported_at")),
        json_string_value(json_object_get(run, "channel")),
        json_string_value(json_object_get(run, "period_start")),
        json_string_value(json_object_get(run, "period_end")),
        (long long)json_integer_value(json_object_get(run, "rows")),
        json_string_value(json_object_get(run, "file_sha256")));
    json_decref(list);
    return 0;
}

int cmd_recon_fetch(struct po_store *s, const struct opts *o)
{
    const char *tenant = cli_opt(o, "tenant"), *channel = cli_opt(o, "channel"),
               *date = cli_opt(o, "date");
    const struct po_channel_ops *ch = po_channel_find(channel);
    if (!ch || !ch->bill_fetch) {
        char names[128] = "";
        for (int i = 0, n = 0; po_channels[i]; i++)
            if (po_channels[i]->bill_fetch)
                n += snprintf(names + n, sizeof names - (size_t)n, "%s%s", n ? ", " : "",
                              po_channels[i]->name);
        fprintf(stderr, "payonce: --channel: payonce downloads the bills of %s\n", names);
        return EXIT_USAGE;
    }
    int64_t midnight;
    if (!date || po_date_parse(date, &midnight)) {
        fprintf(stderr,
                "payonce: --date: a calendar day YYYY-MM-DD, the channel's day (%.16s is"
                " not)\n",
                date ? date : "none given");
        return EXIT_USAGE;
    }
    struct po_channel_account acct;
    int ret = cli_account(s, o, tenant, channel, &acct);
    if (ret)
        return ret;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct po_recon_day_result r;
    char err[PO_ERRBUF_SIZE] = "";
    struct po_door d = {s, NULL}; /* the offline CLI: no committer */
    po_err rc = po_recon_fetch_day(&d, &acct, date, cli_flag(o, "force"), po_clock_now_ms() / 1000,
                                   1800, &r, err, sizeof err);
    po_channel_account_free(&acct);
    curl_global_cleanup();
    if (rc)
        return cli_fail(rc, err);
    if (r.open || r.reopened) { /* on stderr: --json's stdout stays one document */
        char at[PO_TIME_SIZE];
        po_clock_iso_at(r.final_at, at, sizeof at);
        if (r.open)
            fprintf(stderr,
                    "payonce: %s is not final yet (the day is not over in %s's time zone, or its"
                    " bill not published until %s): what the bill has is imported, the day stays"
                    " pending and the daily round fetches it again\n",
                    date, channel, at);
        else
            fprintf(stderr,
                    "payonce: the %s bill of %s gained rows since the day was reconciled: the new"
                    " rows are imported and the day is pending again (the daily round confirms"
                    " it)\n",
                    channel, date);
    }
    if (r.imported) {
        char what[64];
        (void)snprintf(what, sizeof what, "the %s bill of %s", channel, date);
        return print_report(o, what, &r.report);
    }
    const char *msg = r.state == PO_BILL_NONE        ? "the channel has no bill for the day (no"
                                                       " trades): nothing to reconcile"
                      : r.state == PO_BILL_NOT_READY ? "not published yet: try again later"
                                                     : "could not be fetched";
    if (cli_flag(o, "json"))
        printf("{\"date\":\"%s\",\"state\":\"%s\",\"why\":\"%s\"}\n", date,
               r.state == PO_BILL_NONE        ? "none"
               : r.state == PO_BILL_NOT_READY ? "not_ready"
                                              : "failed",
               r.why);
    else
        printf("the %s bill of %s: %s%s%s\n", channel, date, msg, r.why[0] ? ": " : "", r.why);
    return r.state == PO_BILL_NONE ? 0 : r.state == PO_BILL_NOT_READY ? EXIT_TEMPFAIL : EXIT_FAIL;
}
