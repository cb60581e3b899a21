/*
 * cmd_sim.c — `payonce sim`: a channel simulator for integrators and the demo.
 *
 *   payonce sim keys --dir DIR [--mode cert|pubkey] [--tenant T] [--script]
 *       fresh platform key pair (certificate or PUB_KEY_ID mode), APIv3 key,
 *       Alipay key pair, webhook secret; prints the `payonce channel set`
 *       commands that configure a tenant to trust them (--script: only
 *       them, a shell script on stdout; what was written on stderr)
 *   payonce sim pay --dir DIR --notify-url URL --order NO:AMOUNT [...]
 *       the channel "pays" the orders and notifies at least once, on its
 *       real retry schedule (compressed by --time-factor), until acked;
 *       with --created, --order NO pays the payment payonce created at the
 *       simulated channel, to the notify URL it was given
 *
 *   payonce sim serve --dir DIR [--listen 127.0.0.1:PORT] [--time-factor F]
 *       [--refund-delay-ms MS] [--search-lag-s S]
 *       the channel's own APIs (WeChat Pay v3 paths): order query, trade
 *       bill download, refund requests with a later refund-result callback
 *
 * Payments are appended to DIR/payments.jsonl (lost ones too): the record
 * of what the channel believes happened.
 */
#include "cli_int.h"

#include "../sim/sim.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *sim_dir(const struct opts *o)
{
    return cli_opt(o, "dir") && *cli_opt(o, "dir") ? cli_opt(o, "dir") : "./payonce-sim";
}

/* A URL to print into a shell line: http(s)://, bounded, nothing a shell
 * would split or expand. */
static bool url_ok(const char *u)
{
    if ((strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) || strlen(u) > 200)
        return false;
    for (const char *c = u; *c; c++)
        if (*c <= ' ' || strchr("\"'`$\\;&|<>()*?!{}", *c) || (unsigned char)*c >= 0x7f)
            return false;
    return u[strlen(u) - 1] != '/';
}

int cmd_sim_keys(struct po_store *s, const struct opts *o)
{
    (void)s;
    const char *dir = sim_dir(o), *mode = cli_opt(o, "mode") ? cli_opt(o, "mode") : "cert";
    const char *tenant = cli_opt(o, "tenant") ? cli_opt(o, "tenant") : "TENANT";
    const char *api = cli_opt(o, "api-url"), *gw = cli_opt(o, "gateway-url");
    if ((api && !url_ok(api)) || (gw && !url_ok(gw))) {
        fprintf(stderr, "payonce: --api-url, --gateway-url: an http:// or https:// URL of at"
                        " most 200 characters, without spaces or quotes\n");
        return EXIT_USAGE;
    }
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_sim_identity_generate(dir, mode, err, sizeof err);
    if (rc)
        return cli_fail(rc, err);
    struct po_sim_identity id;
    if ((rc = po_sim_identity_load(dir, &id, err, sizeof err)))
        return cli_fail(rc, err);
    /* --script: stdout is the commands alone (`| sh` runs them) */
    bool script = cli_flag(o, "script");
    fprintf(script ? stderr : stdout, "simulator keys written to %s (%s mode, serial %s)\n%s", dir,
            mode, id.serial, script ? "" : "\n");
    if (!script)
        printf("Configure a tenant to trust this simulator:\n\n");
    if (strcmp(mode, "pubkey") == 0)
        printf("payonce channel set --tenant %s --channel wechatpay --mchid %s --appid %s \\\n"
               "  --apiv3-key-file %s/apiv3.key \\\n"
               "  --platform-public-key-file %s/wechatpay_platform_pub.pem --public-key-id %s",
               tenant, id.mchid, id.appid, dir, dir, id.serial);
    else
        printf(
            "payonce channel set --tenant %s --channel wechatpay --mchid %s --appid %s \\\n"
            "  --apiv3-key-file %s/apiv3.key --platform-cert-file %s/wechatpay_platform_cert.pem",
            tenant, id.mchid, id.appid, dir, dir);
    if (api)
        printf(" \\\n  --api-base-url %s --merchant-private-key-file %s/merchant_private_key.pem"
               " --merchant-serial %s",
               api, dir, id.merchant_serial);
    if (gw)
        printf(" \\\n  --notify-url %s/notify/wechatpay/%s", gw, tenant);
    printf("\npayonce channel set --tenant %s --channel alipay --app-id %s --seller-id %s \\\n"
           "  --alipay-public-key-file %s/alipay_public_key.pem",
           tenant, id.app_id, id.seller_id, dir);
    if (api)
        printf(" \\\n  --api-base-url %s/gateway.do --merchant-private-key-file"
               " %s/merchant_private_key.pem",
               api, dir);
    if (gw)
        printf(" \\\n  --notify-url %s/notify/alipay/%s", gw, tenant);
    printf("\npayonce channel set --tenant %s --channel stripe --webhook-secret-file"
           " %s/stripe_webhook_secret",
           tenant, dir);
    if (api)
        printf(" \\\n  --api-key-file %s/stripe_api_key --api-base-url %s", dir, api);
    printf("\n");
    if (!api || !gw)
        printf("\n# These lines make payonce trust the simulator's callbacks. To call its APIs\n"
               "# as well (order query and close, refunds, bills), run `payonce sim keys` with\n"
               "# --api-url (where `payonce sim serve` listens, http://127.0.0.1:8090 by\n"
               "# default) and --gateway-url (where payonce serve listens): the lines then\n"
               "# carry the API base URL, the merchant's key and the notify URL.\n");
    po_sim_identity_free(&id);
    return 0;
}

/* One order to pay. */
struct sim_order {
    char out_trade_no[PO_ID_MAX + 1];
    int64_t amount;
    char txn[PO_TXN_ID_MAX + 1];
    /* --created: as the payment was created at the channel */
    char currency[4];
    char url[512];
};

/* --created: the order is paid as it was created at the simulated
 * channel — its amount, currency, notify URL (Stripe: its PaymentIntent). */
static int created_order(const struct opts *o, const char *channel, struct sim_order *so,
                         bool amount_given)
{
    struct po_sim_created cp;
    if (po_sim_created_find(sim_dir(o), channel, so->out_trade_no, &cp)) {
        fprintf(stderr, "payonce: --created: no payment was created at %s for %s\n", channel,
                so->out_trade_no);
        return EXIT_USAGE;
    }
    if (amount_given && so->amount != cp.amount) {
        fprintf(stderr, "payonce: --created: %s was created for %lld, not %lld\n", so->out_trade_no,
                (long long)cp.amount, (long long)so->amount);
        return EXIT_USAGE;
    }
    so->amount = cp.amount;
    memcpy(so->currency, cp.currency, sizeof so->currency);
    memcpy(so->url, cp.notify_url, sizeof so->url);
    if (cp.intent[0])
        memcpy(so->txn, cp.intent, sizeof so->txn);
    return 0;
}

/* One copy of one notification, delivered on the schedule. */
struct copy {
    struct po_sim_delivery d;
    struct po_sim_result r;
    char label[PO_ID_MAX + 32];
};

static void *deliver_thread(void *arg)
{
    struct copy *c = arg;
    po_sim_deliver(&c->d, &c->r);
    return NULL;
}

/* The orders of --orders-file: NO:AMOUNT a line, # comments, blank lines
 * skipped; their values point into *buf (the caller frees it), line[i]
 * each one's line. 0, or EXIT_USAGE after naming the file's line and the
 * limit it passes. */
static int orders_file(const char *path, char **buf, const char **vals, int *line, int *k)
{
    size_t len = 0;
    if (cli_read_input(
            path, (size_t)PO_SIM_ORDERS_MAX * PO_SIM_ORDERS_LINE_MAX,
            PO_STR(PO_SIM_ORDERS_MAX) " lines of " PO_STR(PO_SIM_ORDERS_LINE_MAX) " bytes", buf,
            &len))
        return EXIT_USAGE;
    if (memchr(*buf, '\0', len)) {
        fprintf(stderr, "payonce: --orders-file %s: not a text file\n", path);
        return EXIT_USAGE;
    }
    int n = 0;
    char *next = NULL;
    for (char *l = *buf; l && *l; l = next) {
        next = strchr(l, '\n');
        if (next)
            *next++ = '\0';
        n++;
        size_t ll = strlen(l);
        if (ll > PO_SIM_ORDERS_LINE_MAX) {
            fprintf(stderr, "payonce: --orders-file %s:%d: longer than %d bytes\n", path, n,
                    PO_SIM_ORDERS_LINE_MAX);
            return EXIT_USAGE;
        }
        while (ll && (l[ll - 1] == '\r' || l[ll - 1] == ' ' || l[ll - 1] == '\t'))
            l[--ll] = '\0';
        while (*l == ' ' || *l == '\t')
            l++;
        if (!*l || *l == '#')
            continue;
        if (*k >= PO_SIM_ORDERS_MAX) {
            fprintf(stderr, "payonce: --orders-file %s:%d: more than %d orders\n", path, n,
                    PO_SIM_ORDERS_MAX);
            return EXIT_USAGE;
        }
        line[*k] = n;
        vals[(*k)++] = l;
    }
    return 0;
}

/* The orders to pay, from --order (at most PO_SIM_ORDERS_ARGV_MAX) and
 * --orders-file, into *out (heap, the caller frees it). */
static int parse_orders(const struct opts *o, const char *channel, struct sim_order **out, int *n)
{
    const char *path = cli_opt(o, "orders-file");
    const char **vals = calloc(PO_SIM_ORDERS_MAX, sizeof *vals);
    int *line = calloc(PO_SIM_ORDERS_MAX, sizeof *line);
    struct sim_order *orders = NULL;
    char *buf = NULL, where[600];
    int k = cli_opt_all(o, "order", vals, PO_SIM_ORDERS_ARGV_MAX + 1), ret = 0;
    if (!vals || !line) {
        ret = cli_fail(PO_ERR_NOMEM, "the orders");
        goto out;
    }
    if (k > PO_SIM_ORDERS_ARGV_MAX) {
        fprintf(stderr,
                "payonce: at most %d --order on the command line; more (up to %d) with"
                " --orders-file FILE, NO:AMOUNT a line\n",
                PO_SIM_ORDERS_ARGV_MAX, PO_SIM_ORDERS_MAX);
        ret = EXIT_USAGE;
        goto out;
    }
    if (path && (ret = orders_file(path, &buf, vals, line, &k)))
        goto out;
    if (k == 0) {
        fprintf(stderr,
                "payonce: no orders: give --order NO:AMOUNT (up to %d) or --orders-file"
                " FILE\n",
                PO_SIM_ORDERS_ARGV_MAX);
        ret = EXIT_USAGE;
        goto out;
    }
    if (!(orders = calloc((size_t)k, sizeof *orders))) {
        ret = cli_fail(PO_ERR_NOMEM, "the orders");
        goto out;
    }
    if (cli_opt(o, "txn") && k != 1) {
        fprintf(stderr, "payonce: --txn goes with a single --order\n");
        ret = EXIT_USAGE;
        goto out;
    }
    if (cli_flag(o, "again") && (cli_opt(o, "txn") || cli_flag(o, "lose") ||
                                 cli_flag(o, "created") || cli_flag(o, "forge"))) {
        fprintf(stderr, "payonce: --again delivers earlier payments: not with --txn, --lose,"
                        " --created or --forge\n");
        ret = EXIT_USAGE;
        goto out;
    }
    bool created = cli_flag(o, "created");
    for (int i = 0; i < k; i++) {
        const char *colon = strrchr(vals[i], ':');
        struct sim_order *so = &orders[i];
        if (line[i])
            (void)snprintf(where, sizeof where, "--orders-file %s:%d: %s", path, line[i], vals[i]);
        else
            (void)snprintf(where, sizeof where, "--order %s", vals[i]);
        if (created && !colon)
            colon = vals[i] + strlen(vals[i]);
        if (!colon || (size_t)(colon - vals[i]) > PO_ID_MAX ||
            ((!created || *colon) && po_parse_i64(colon + 1, 1, PO_AMOUNT_MAX, &so->amount))) {
            fprintf(stderr, "payonce: %s: expected OUT_TRADE_NO:AMOUNT_MINOR\n", where);
            ret = EXIT_USAGE;
            goto out;
        }
        memcpy(so->out_trade_no, vals[i], (size_t)(colon - vals[i]));
        so->out_trade_no[colon - vals[i]] = '\0';
        if (!po_id_valid(so->out_trade_no, PO_ID_MAX)) {
            fprintf(stderr, "payonce: %s: bad out_trade_no\n", where);
            ret = EXIT_USAGE;
            goto out;
        }
        if (cli_flag(o, "again")) { /* the channel's redelivery: the same transaction */
            if (!po_sim_payment_txn(sim_dir(o), channel, so->out_trade_no, so->txn,
                                    sizeof so->txn)) {
                fprintf(stderr, "payonce: --again: no earlier payment of %s in %s\n",
                        so->out_trade_no, sim_dir(o));
                ret = EXIT_USAGE;
                goto out;
            }
        } else if (cli_opt(o, "txn")) {
            if (!po_id_valid(cli_opt(o, "txn"), PO_TXN_ID_MAX) ||
                po_strcpy(so->txn, sizeof so->txn, cli_opt(o, "txn"))) {
                fprintf(stderr, "payonce: --txn: 1-64 characters of [A-Za-z0-9_-]\n");
                ret = EXIT_USAGE;
                goto out;
            }
        } else {
            po_sim_new_txn(channel, so->txn, sizeof so->txn);
        }
        int r = created ? created_order(o, channel, so, *colon != '\0') : 0;
        if (r) {
            ret = r;
            goto out;
        }
        if (created && !so->url[0] && !cli_opt(o, "notify-url") && !cli_flag(o, "lose")) {
            fprintf(stderr,
                    "payonce: --created: %s notifies the endpoint set in its dashboard:"
                    " give --notify-url\n",
                    channel);
            ret = EXIT_USAGE;
            goto out;
        }
    }
    *n = k;
    *out = orders;
    orders = NULL;
out:
    free(orders);
    free(buf);
    free(vals);
    free(line);
    return ret;
}

static void record(const char *dir, const char *channel, const struct sim_order *so,
                   const char *currency, bool lost, const char *paid_on)
{
    char path[1024], when[32];
    time_t t = time(NULL) + 8 * 3600; /* Beijing time, as WeChat Pay's bills */
    struct tm tm;
    gmtime_r(&t, &tm);
    (void)strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    if (paid_on) /* an earlier day's payment: that day, at this time of day */
        memcpy(when, paid_on, 10);
    (void)snprintf(path, sizeof path, "%s/payments.jsonl", dir);
    json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:b}", "channel", channel, "out_trade_no",
                          so->out_trade_no, "txn", so->txn, "amount", (json_int_t)so->amount,
                          "currency", currency, "time", when, "lost", lost);
    FILE *f = fopen(path, "a");
    if (f && j)
        json_dumpf(j, f, JSON_COMPACT), fputc('\n', f);
    if (f)
        fclose(f);
    json_decref(j);
}

/* Replaces the identity's signing material with strangers' (a forgery). */
static int forge(struct po_sim_identity *id)
{
    po_privkey_free(id->wx_key);
    po_privkey_free(id->ali_key);
    id->wx_key = id->ali_key = NULL;
    if (po_privkey_generate(&id->wx_key) || po_privkey_generate(&id->ali_key) ||
        po_random(id->secret, 16))
        return cli_fail(PO_ERR_INTERNAL, "cannot generate forger keys");
    id->secret_len = 16;
    return 0;
}

struct sim_pay_args {
    const char *channel, *currency, *url;
    const char *urls[PO_SIM_COPIES_MAX + 1]; /* --notify-url repeated: copy c to urls[c % nurls] */
    int nurls, copies;
    bool concurrent, forged;
    double factor;
    int max_attempts, deadline_ms;
    int pace_ms; /* between orders: load spread over time (tests) */
};

static int pay_args(const struct opts *o, struct sim_pay_args *a)
{
    int64_t copies = 1, attempts = 0, deadline = 5000, factor = 1, pace = 0;
    a->channel = cli_opt(o, "channel") ? cli_opt(o, "channel") : "wechatpay";
    a->currency = cli_opt(o, "currency") ? cli_opt(o, "currency") : "CNY";
    a->nurls = cli_opt_all(o, "notify-url", a->urls, PO_SIM_COPIES_MAX + 1);
    a->url = a->nurls ? a->urls[0] : NULL;
    if (a->nurls > PO_SIM_COPIES_MAX) {
        fprintf(stderr, "payonce: --notify-url at most %d times (one per copy)\n",
                PO_SIM_COPIES_MAX);
        return EXIT_USAGE;
    }
    a->concurrent = cli_flag(o, "concurrent");
    a->forged = cli_flag(o, "forge");
    if (!po_sim_channel_known(a->channel) || !po_currency_valid(a->currency)) {
        fprintf(stderr, "payonce: --channel wechatpay|alipay|stripe; --currency ISO 4217\n");
        return EXIT_USAGE;
    }
    if ((cli_opt(o, "copies") &&
         po_parse_i64(cli_opt(o, "copies"), 1, PO_SIM_COPIES_MAX, &copies)) ||
        (cli_opt(o, "max-attempts") &&
         po_parse_i64(cli_opt(o, "max-attempts"), 1, 100, &attempts)) ||
        (cli_opt(o, "deadline-ms") &&
         po_parse_i64(cli_opt(o, "deadline-ms"), 100, 60000, &deadline)) ||
        (cli_opt(o, "time-factor") &&
         po_parse_i64(cli_opt(o, "time-factor"), 1, 1000000, &factor)) ||
        (cli_opt(o, "pace-ms") && po_parse_i64(cli_opt(o, "pace-ms"), 0, 60000, &pace))) {
        fprintf(stderr,
                "payonce: --copies 1-%d, --max-attempts 1-100, --deadline-ms"
                " 100-60000, --time-factor 1-1000000, --pace-ms 0-60000\n",
                PO_SIM_COPIES_MAX);
        return EXIT_USAGE;
    }
    const char *on = cli_opt(o, "paid-on");
    if (on && (!cli_flag(o, "lose") || strlen(on) != 10 || !po_time_valid(on))) {
        fprintf(stderr, "payonce: --paid-on YYYY-MM-DD goes with --lose (a payment of an earlier"
                        " day whose notification never came)\n");
        return EXIT_USAGE;
    }
    if (!a->url && !cli_flag(o, "lose") && !cli_flag(o, "created")) {
        fprintf(stderr, "payonce: --notify-url is required (unless --lose or --created)\n");
        return EXIT_USAGE;
    }
    if (!cli_opt(o, "time-factor") && !a->forged && !cli_flag(o, "lose") && attempts != 1) {
        int k = 0;
        int64_t total = 0;
        const int *sched = po_sim_schedule(a->channel, &k);
        for (int i = 0; i < k; i++)
            total += sched[i];
        fprintf(stderr,
                "payonce: sim pay: no --time-factor: a callback that is not acked is retried on"
                " %s's real schedule (%d more times over %.1f hours); --time-factor 1000 runs"
                " it 1000 times faster\n",
                a->channel, k, (double)total / 3600.0);
    }
    a->copies = (int)copies;
    a->max_attempts = a->forged ? 1 : (int)attempts; /* a forger does not retry */
    a->deadline_ms = (int)deadline;
    a->factor = (double)factor;
    a->pace_ms = (int)pace;
    return 0;
}

static int pay(const struct opts *o, struct sim_pay_args a, struct sim_order *orders, int n);

int cmd_sim_pay(struct po_store *s, const struct opts *o)
{
    (void)s;
    struct sim_pay_args a;
    struct sim_order *orders = NULL;
    int n = 0, ret = pay_args(o, &a);
    if (!ret)
        ret = parse_orders(o, a.channel, &orders, &n);
    if (!ret)
        ret = pay(o, a, orders, n);
    free(orders);
    return ret;
}

/* Pays the n orders as a says (the body of sim pay). */
static int pay(const struct opts *o, struct sim_pay_args a, struct sim_order *orders, int n)
{
    int ret = 0;
    int64_t tamper = 0;
    if (cli_opt(o, "tamper-amount") &&
        po_parse_i64(cli_opt(o, "tamper-amount"), 1, PO_AMOUNT_MAX, &tamper)) {
        fprintf(stderr, "payonce: --tamper-amount: a positive amount in minor units\n");
        return EXIT_USAGE;
    }
    struct po_sim_identity id;
    char err[PO_ERRBUF_SIZE] = "";
    if (po_sim_identity_load(sim_dir(o), &id, err, sizeof err))
        return cli_fail(PO_ERR_INVALID, err);
    if (a.forged && (ret = forge(&id))) {
        po_sim_identity_free(&id);
        return ret;
    }
    if (cli_flag(o, "reorder")) /* deliver in a shuffled order */
        for (int i = n - 1; i > 0; i--) {
            unsigned char r;
            PO_ASSERT(po_random(&r, 1) == PO_OK);
            int j = r % (i + 1);
            struct sim_order t = orders[i];
            orders[i] = orders[j];
            orders[j] = t;
        }
    struct po_sim_history *hist = NULL;
    if (cli_opt(o, "history") && po_sim_history_open(cli_opt(o, "history"), &hist)) {
        po_sim_identity_free(&id);
        fprintf(stderr, "payonce: --history %s: cannot append to it\n", cli_opt(o, "history"));
        return EXIT_USAGE;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int attempts = 0, acked = 0, refused = 0, unacked = 0, lost = 0, answered_fail = 0,
        no_answer = 0, credited = 0, not_credited = 0;
    for (int i = 0; i < n && !ret; i++) {
        struct sim_order *so = &orders[i];
        if (i && a.pace_ms) {
            struct timespec ts = {a.pace_ms / 1000, (long)(a.pace_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        const char *cur = so->currency[0] ? so->currency : a.currency;
        const char *url = so->url[0] && !cli_opt(o, "notify-url") ? so->url : a.url;
        if (!a.forged && !cli_flag(o, "again")) /* a redelivery is not a new payment */
            record(sim_dir(o), a.channel, so, cur, cli_flag(o, "lose"), cli_opt(o, "paid-on"));
        if (cli_flag(o, "lose")) {
            printf("  %-28s lost: never sent (reconciliation must find it)\n", so->out_trade_no);
            lost++;
            continue;
        }
        struct po_sim_payment p = {a.channel, so->out_trade_no,
                                   so->txn,   tamper ? tamper : so->amount,
                                   cur,       (int64_t)time(NULL)};
        struct po_sim_notice notice = {&id, &p, NULL};
        struct po_sim_request probe; /* built once up front: a failure is ours */
        if (po_sim_notice_build(&notice, p.paid_at, &probe)) {
            ret = cli_fail(PO_ERR_INTERNAL, "cannot build the notification");
            break;
        }
        po_sim_request_free(&probe);
        struct copy copies[PO_SIM_COPIES_MAX];
        pthread_t th[PO_SIM_COPIES_MAX];
        for (int c = 0; c < a.copies; c++) {
            memset(&copies[c], 0, sizeof copies[c]);
            (void)snprintf(copies[c].label, sizeof copies[c].label, "%s%s#%d", so->out_trade_no,
                           a.forged ? "(forged)" : "", c + 1);
            /* several --notify-url: the channel's senders spread over gateway nodes */
            copies[c].d = (struct po_sim_delivery){.url = a.nurls > 1 ? a.urls[c % a.nurls] : url,
                                                   .channel = a.channel,
                                                   .notice = &notice,
                                                   .time_factor = a.factor,
                                                   .deadline_ms = a.deadline_ms,
                                                   .max_attempts = a.max_attempts,
                                                   .label = copies[c].label,
                                                   .log = stdout,
                                                   .history = hist,
                                                   .copy = c + 1};
            if (a.concurrent)
                pthread_create(&th[c], NULL, deliver_thread, &copies[c]);
            else
                deliver_thread(&copies[c]);
        }
        for (int c = 0; a.concurrent && c < a.copies; c++)
            pthread_join(th[c], NULL);
        /* Credited: payonce said applied or duplicate to some copy (its
         * Payonce-Outcome header); an ack alone may be a suspense. */
        bool said = false, ok_said = false;
        const char *other = NULL;
        for (int c = 0; c < a.copies; c++) {
            const char *oc = copies[c].r.last_outcome;
            if (!oc[0])
                continue;
            said = true;
            if (strncmp(oc, "applied", 7) == 0 || strncmp(oc, "duplicate", 9) == 0)
                ok_said = true;
            else if (copies[c].r.acked)
                other = oc;
        }
        if (!a.forged && said && ok_said)
            credited++;
        else if (!a.forged && said && other) {
            not_credited++;
            printf("  %-28s NOT credited: payonce said %s\n", so->out_trade_no, other);
        }
        for (int c = 0; c < a.copies; c++) {
            attempts += copies[c].r.attempts;
            if (copies[c].r.acked)
                acked++;
            else if (a.forged && copies[c].r.last_status >= 400 && copies[c].r.last_status < 500)
                refused++;
            else
                unacked++;
            /* how the last attempt ended: a FAIL (5xx) answer, or none */
            if (!copies[c].r.acked && copies[c].r.last_status >= 500)
                answered_fail++;
            else if (!copies[c].r.acked && copies[c].r.last_status == 0)
                no_answer++;
        }
    }
    curl_global_cleanup();
    po_sim_identity_free(&id);
    po_sim_history_close(hist);
    if (ret)
        return ret;
    bool ok = a.forged ? acked == 0 && unacked == 0 : unacked == 0 && not_credited == 0;
    json_t *sum =
        json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b}", "notifications", n,
                  "attempts", attempts, "acked", acked, "refused", refused, "unacked", unacked,
                  "answered_fail", answered_fail, "no_answer", no_answer, "lost", lost, "credited",
                  credited, "not_credited", not_credited, "ok", ok);
    char *js = sum ? json_dumps(sum, JSON_COMPACT) : NULL;
    printf("sim: %s\n", js ? js : "{}");
    free(js);
    json_decref(sum);
    return ok ? 0 : EXIT_FAIL;
}

int cmd_sim_serve(struct po_store *s, const struct opts *o)
{
    (void)s;
    int64_t factor = 1, delay = 1000, lag = PO_SIM_SEARCH_LAG_S;
    if ((cli_opt(o, "time-factor") &&
         po_parse_i64(cli_opt(o, "time-factor"), 1, 1000000, &factor)) ||
        (cli_opt(o, "refund-delay-ms") &&
         po_parse_i64(cli_opt(o, "refund-delay-ms"), 0, 600000, &delay)) ||
        (cli_opt(o, "search-lag-s") && po_parse_i64(cli_opt(o, "search-lag-s"), 0, 86400, &lag))) {
        fprintf(stderr, "payonce: --time-factor 1-1000000, --refund-delay-ms 0-600000,"
                        " --search-lag-s 0-86400\n");
        return EXIT_USAGE;
    }
    struct po_sim_server_cfg cfg = {sim_dir(o),
                                    cli_opt(o, "listen") ? cli_opt(o, "listen") : "127.0.0.1:8090",
                                    (double)factor, (int)delay, lag ? (int)lag : -1};
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct po_sim_server *srv = NULL;
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_sim_server_start(&cfg, &srv, err, sizeof err);
    if (rc) {
        curl_global_cleanup();
        return cli_fail(rc, err);
    }
    printf("simulator listening on port %u\n", po_sim_server_port(srv));
    fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    po_sim_server_stop(srv);
    curl_global_cleanup();
    return 0;
}

int cmd_sim_receiver(struct po_store *s, const struct opts *o)
{
    (void)s;
    int64_t fail_n = 0, duration = 0, down_ms = 0;
    if ((cli_opt(o, "fail") && po_parse_i64(cli_opt(o, "fail"), 0, 1000000, &fail_n)) ||
        (cli_opt(o, "duration-s") && po_parse_i64(cli_opt(o, "duration-s"), 1, 86400, &duration)) ||
        (cli_opt(o, "down-ms") && po_parse_i64(cli_opt(o, "down-ms"), 0, 3600000, &down_ms))) {
        fprintf(stderr, "payonce: --fail 0-1000000, --duration-s 1-86400, --down-ms 0-3600000\n");
        return EXIT_USAGE;
    }
    if (down_ms && strcmp(cli_opt(o, "listen") ? cli_opt(o, "listen") : "", "127.0.0.1:0") == 0) {
        fprintf(stderr,
                "payonce: --down-ms needs a fixed --listen port (the sender must know it)\n");
        return EXIT_USAGE;
    }
    char *secret = NULL;
    size_t len = 0;
    po_err rc = po_file_read(cli_opt(o, "secret-file"), PO_KEY_FILE_MAX, &secret, &len);
    if (rc) {
        char why[600];
        po_file_why(cli_opt(o, "secret-file"), rc, why, sizeof why);
        fprintf(stderr, "payonce: cannot read %s: %s\n", cli_opt(o, "secret-file"), why);
        return EXIT_USAGE;
    }
    while (len > 0 && (secret[len - 1] == '\n' || secret[len - 1] == '\r'))
        secret[--len] = '\0';
    struct po_sim_receiver_cfg cfg = {cli_opt(o, "listen") ? cli_opt(o, "listen")
                                                           : "127.0.0.1:8091",
                                      secret, cli_opt(o, "record"), (int)fail_n, (int)down_ms};
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    struct po_sim_receiver *r = NULL;
    char err[PO_ERRBUF_SIZE] = "";
    rc = po_sim_receiver_start(&cfg, &r, err, sizeof err);
    if (rc) {
        po_secure_zero(secret, len);
        free(secret);
        return cli_fail(rc, err);
    }
    printf("receiver listening on port %u\n", po_sim_receiver_port(r)); /* after --down-ms */
    fflush(stdout);
    if (duration)
        alarm((unsigned)duration);
    int sig = 0;
    sigwait(&stop, &sig);
    struct po_sim_receiver_stats st;
    po_sim_receiver_stats(r, &st);
    po_sim_receiver_stop(r);
    printf("receiver: %d deliveries, %d events acted on, %d duplicates ignored, %d bad"
           " signatures\n",
           st.deliveries, st.events, st.duplicates, st.bad_signatures);
    po_secure_zero(secret, len);
    free(secret);
    return 0;
}
