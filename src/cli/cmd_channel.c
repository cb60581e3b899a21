/*
 * cmd_channel.c — `payonce channel set`: a tenant's credentials for one channel.
 *
 * The options come from the channel registry; the document (public keys as
 * PEM, secrets sealed with the master key, bound to
 * "<tenant>/<channel>/<field>") is built by channel/account.c and stored by
 * the account service. Without a master key the command refuses, unless
 * --insecure-dev, which stores secrets base64-encoded in the clear and says so.
 */
#include "cli_int.h"

#include "../channel/channel.h"
#include "../crypto/crypto.h"
#include "../service/service.h"

#include <curl/curl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The options of `channel set`: the common ones and every registered
 * channel's, from the registry (space-separated, for the option parser). */
void cli_channel_set_options(char *buf, size_t cap)
{
    size_t j = 0;
    const char *common = "tenant channel master-key-file";
    PO_ASSERT(po_strcpy(buf, cap, common) == PO_OK);
    j = strlen(buf);
    for (int i = 0; po_channels[i]; i++)
        for (const struct po_channel_option *op = po_channels[i]->options; op->name; op++) {
            char pat[64];
            (void)snprintf(pat, sizeof pat, " %s ", op->name);
            char have[2048];
            (void)snprintf(have, sizeof have, " %s ", buf);
            if (strstr(have, pat))
                continue;
            size_t n = strlen(op->name);
            PO_ASSERT(j + n + 2 < cap);
            buf[j++] = ' ';
            memcpy(buf + j, op->name, n + 1);
            j += n;
        }
}

static const char *input_opt(void *ctx, const char *name)
{
    return cli_opt(ctx, name);
}

static int input_opt_all(void *ctx, const char *name, const char **vals, int max)
{
    return cli_opt_all(ctx, name, vals, max);
}

static void input_note(void *ctx, const char *line)
{
    (void)ctx;
    printf("  %s\n", line);
}

/* The channel's own options: one that only other channels have is
 * refused, so a typo or a mix-up is not silently ignored. The parser has
 * taken only known options, so any other (tenant, --config, --log-level,
 * --verbose, what the config file gave) is every command's or every
 * channel's. */
static int check_channel_options(const struct po_channel_ops *ch, const struct opts *o)
{
    for (int i = 0; i < o->n; i++) {
        const char *n = o->name[i];
        bool ours = false;
        for (const struct po_channel_option *op = ch->options; !ours && op->name; op++)
            ours = strcmp(op->name, n) == 0;
        char owners[128] = "";
        size_t used = 0;
        for (int c = 0; !ours && po_channels[c]; c++)
            for (const struct po_channel_option *op = po_channels[c]->options; op->name; op++)
                if (strcmp(op->name, n) == 0 && used + PO_CHANNEL_SIZE + 2 < sizeof owners)
                    used += (size_t)snprintf(owners + used, sizeof owners - used, "%s%s",
                                             used ? ", " : "", po_channels[c]->name);
        if (used) {
            fprintf(stderr, "payonce: --%s is not an option of channel %s (it is for %s only)\n", n,
                    ch->name, owners);
            return EXIT_USAGE;
        }
    }
    return 0;
}

int cmd_channel_set(struct po_store *s, const struct opts *o)
{
    const char *tenant = cli_opt(o, "tenant"), *channel = cli_opt(o, "channel");
    const struct po_channel_ops *ch = po_channel_find(channel);
    unsigned char master[32];
    bool have = false;
    if (!ch) {
        char names[128];
        po_channel_names(0, names, sizeof names);
        fprintf(stderr, "payonce: --channel must be one of %s\n", names);
        return EXIT_USAGE;
    }
    int ret = check_channel_options(ch, o);
    if (!ret)
        ret = cli_load_master_key(o, master, &have);
    if (ret)
        return ret;
    if (!have && !cli_flag(o, "insecure-dev")) {
        fprintf(stderr,
                "payonce: secrets are sealed with a master key: give --master-key-file"
                " FILE or PAYONCE_MASTER_KEY_FILE (32 random bytes, e.g.\n"
                "  (umask 077; head -c 32 /dev/urandom > master.key)), or --insecure-dev\n");
        return EXIT_USAGE;
    }
    if (!have)
        fprintf(stderr, "payonce: WARNING: --insecure-dev: secrets stored UNSEALED\n");
    printf("%s for tenant %s:\n", channel, tenant);
    struct po_account_input in = {.tenant = tenant,
                                  .master = have ? master : NULL,
                                  .opt = input_opt,
                                  .opt_all = input_opt_all,
                                  .note = input_note,
                                  .ctx = (void *)(uintptr_t)o};
    char err[PO_ERRBUF_SIZE] = "", *doc = NULL;
    po_err rc = po_channel_account_build(ch, &in, &doc, err, sizeof err);
    po_secure_zero(master, sizeof master);
    if (rc == PO_ERR_INVALID || rc == PO_ERR_IO) {
        fprintf(stderr, "payonce: %s\n", err);
        return rc == PO_ERR_INVALID ? EXIT_USAGE : EXIT_FAIL;
    }
    if (rc)
        return cli_fail(rc, err);
    rc = po_account_save(s, tenant, channel, doc, err, sizeof err);
    free(doc);
    if (rc)
        return cli_fail(rc, err);
    printf("saved (secrets %s)\n", have ? "sealed with the master key" : "NOT sealed");
    return 0;
}

/* `payonce channel check`: the account loads (its secrets unseal, its keys
 * parse) and each API payonce calls at the channel answers, signed, with
 * the tenant's keys — tried with harmless calls about an order nobody has
 * (payonce-check-<random>): the order query must say "not paid", the close
 * "closed, or never there". Refunds are signed with the same key and not
 * tried (no refund is harmless). */
int cmd_channel_check(struct po_store *s, const struct opts *o)
{
    const char *tenant = cli_opt(o, "tenant"), *channel = cli_opt(o, "channel");
    const struct po_channel_ops *ch = po_channel_find(channel);
    if (!ch) {
        char names[128];
        po_channel_names(0, names, sizeof names);
        fprintf(stderr, "payonce: --channel must be one of %s\n", names);
        return EXIT_USAGE;
    }
    struct po_channel_account acct;
    int ret = cli_account(s, o, tenant, channel, &acct);
    if (ret)
        return ret;
    printf("%s account of tenant %s: loads (%d verification key(s))\n", channel, tenant,
           acct.nkeys);
    if (!acct.api_ready) {
        printf("  API calls      none: no API key (notifications only)\n");
        po_channel_account_free(&acct);
        return 0;
    }
    char no[40] = "payonce-check-";
    unsigned char rnd[6];
    PO_ASSERT(po_random(rnd, sizeof rnd) == PO_OK);
    for (int i = 0; i < 6; i++)
        (void)snprintf(no + 14 + 2 * i, 3, "%02x", rnd[i]);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int bad = 0;
    struct po_query_answer *qa = malloc(sizeof *qa);
    if (!qa) {
        po_channel_account_free(&acct);
        return cli_fail(PO_ERR_NOMEM, "out of memory");
    }
    /* a channel that asks by its own id of a payment (ops
     * order_id_prefix: Stripe's PaymentIntent) is asked by one nobody has */
    char pid[40] = "";
    if (ch->order_id_prefix)
        (void)snprintf(pid, sizeof pid, "%.8s%s", ch->order_id_prefix, no + 14);
    struct po_order_ref ref = {no, pid, ""};
    if (ch->order_query) {
        bool ok = ch->order_query(&acct, &ref, qa) == PO_OK && qa->state == PO_QUERY_NOT_PAID;
        bad += !ok;
        printf("  order query    %s (HTTP %ld%s%s)\n", ok ? "works" : "FAILS", qa->http_status,
               qa->why[0] ? ": " : "", qa->why);
    }
    if (ch->order_close) {
        struct po_close_answer ca;
        bool ok = ch->order_close(&acct, &ref, &ca) == PO_OK && ca.state == PO_CLOSE_CLOSED;
        bad += !ok;
        printf("  close          %s (HTTP %ld%s%s)\n", ok ? "works" : "FAILS", ca.http_status,
               ca.why[0] ? ": " : "", ca.why);
    }
    if (ch->refund_query) {
        char rno[48];
        (void)snprintf(rno, sizeof rno, "%s-r", no);
        struct po_refund_request rq = {no, rno, 1, 1, "CNY", pid};
        struct po_refund_query_answer *ra = malloc(sizeof *ra);
        /* a signed answer: no such refund (Alipay: nothing refunded yet) */
        bool ok = ra && ch->refund_query(&acct, &rq, ra) == PO_OK &&
                  (ra->state == PO_RQ_NOT_FOUND || ra->state == PO_RQ_PENDING);
        bad += !ok;
        printf("  refund query   %s (HTTP %ld%s%s)\n", ok ? "works" : "FAILS",
               ra ? ra->http_status : 0, ra && ra->why[0] ? ": " : "", ra ? ra->why : "");
        free(ra);
    }
    struct po_key_fetch kf; /* as the keys' refresh round fetches them */
    bool tried = false;
    po_err krc = po_keys_fetch_for(ch, &acct, &tried, &kf);
    if (tried) {
        bool ok = krc == PO_OK && kf.ok;
        bad += !ok;
        printf("  certificates   %s (HTTP %ld%s%s, %d handed out)\n", ok ? "works" : "FAILS",
               kf.http_status, kf.why[0] ? ": " : "", kf.why, kf.n);
    }
    po_key_fetch_free(&kf);
    if (ch->events_since) { /* the last hour's events, one page */
        struct po_event_walk w;
        po_err rc = ch->events_since(&acct, (int64_t)time(NULL) - 3600, 10, 10, &w);
        bool more = rc == PO_OK && !w.ok && strcmp(w.why, "too_many_events") == 0;
        bool ok = rc == PO_OK && (w.ok || more); /* the pages were answered */
        bad += !ok;
        printf("  events         %s (HTTP %ld%s%s, %s%d in the last hour)\n",
               ok ? "works" : "FAILS", w.http_status, w.why[0] && !more ? ": " : "",
               more ? "" : w.why, more ? "at least " : "", w.n);
        po_event_walk_free(&w);
    }
    if (ch->bill_fetch) { /* the day before yesterday's bill, in the channel's zone */
        char day[16];
        time_t t = time(NULL) + ch->bill_tz_s - 2 * 86400;
        struct tm tm;
        gmtime_r(&t, &tm);
        (void)strftime(day, sizeof day, "%Y-%m-%d", &tm);
        struct po_bill_fetch bf;
        bool ok = ch->bill_fetch(&acct, day, &bf) == PO_OK && bf.state != PO_BILL_FAILED;
        bad += !ok;
        static const char *const said[] = {"failed", "not published yet", "no trades",
                                           "downloaded"};
        printf("  bill           %s (%s: %s, HTTP %ld%s%s)\n", ok ? "works" : "FAILS", day,
               said[bf.state], bf.http_status, bf.why[0] ? ": " : "", bf.why);
        free(bf.data);
    }
    if (ch->pay_create)
        printf("  create         sent with the same key and address (not tried: it would make a"
               " payment)\n");
    if (ch->refund_submit)
        printf("  refunds        sent with the same key and address (not tried)\n");
    free(qa);
    curl_global_cleanup();
    po_channel_account_free(&acct);
    return bad ? EXIT_FAIL : 0;
}
