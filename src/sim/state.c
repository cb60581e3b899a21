/*
 * state.c — the simulator's records in its directory (payments.jsonl,
 * refunds.jsonl: one JSON document a line, read afresh on every request)
 * and the small formats its channels share: ids, Beijing time, yuan.
 */
#include "sim_int.h"

#include <pthread.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Every line of DIR/name parsed as JSON (NULL entries skipped). */
json_t *sim_read_jsonl(const char *dir, const char *name)
{
    char path[1024];
    (void)snprintf(path, sizeof path, "%s/%s", dir, name);
    json_t *all = json_array();
    FILE *f = fopen(path, "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        if (j)
            json_array_append_new(all, j);
    }
    if (f)
        fclose(f);
    return all;
}

bool po_sim_payment_txn(const char *dir, const char *channel, const char *out_trade_no, char *txn,
                        size_t cap)
{
    json_t *all = sim_read_jsonl(dir, "payments.jsonl");
    size_t i;
    json_t *p;
    bool found = false;
    json_array_foreach(all, i, p)
    {
        if (strcmp(sim_jstr(p, "channel"), channel) == 0 &&
            strcmp(sim_jstr(p, "out_trade_no"), out_trade_no) == 0)
            found = po_strcpy(txn, cap, sim_jstr(p, "txn")) == PO_OK && txn[0];
    }
    json_decref(all);
    return found;
}

void sim_append_jsonl(const char *dir, const char *name, json_t *j)
{
    char path[1024];
    (void)snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    char *s = json_dumps(j, JSON_COMPACT);
    if (s)
        fprintf(f, "%s\n", s);
    free(s);
    fclose(f);
}

const char *sim_jstr(json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

json_int_t sim_jint(json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

/* The refund record's channel (records written before Alipay refunds
 * existed carry none: WeChat Pay). */
bool sim_refund_of(json_t *r, const char *channel)
{
    const char *c = sim_jstr(r, "channel");
    return strcmp(*c ? c : "wechatpay", channel) == 0;
}

json_t *sim_find_payment(json_t *payments, const char *channel, const char *key, const char *value)
{
    size_t i;
    json_t *p;
    json_array_foreach(payments, i, p)
    {
        if (strcmp(sim_jstr(p, "channel"), channel) == 0 && strcmp(sim_jstr(p, key), value) == 0)
            return p;
    }
    return NULL;
}

enum sim_trade sim_trade_of(struct po_sim_server *s, const char *channel, const char *out_trade_no,
                            json_t **prev)
{
    json_t *payments = sim_read_jsonl(s->dir, "payments.jsonl");
    json_t *closed = sim_read_jsonl(s->dir, "closed.jsonl");
    json_t *created = sim_read_jsonl(s->dir, "created.jsonl");
    enum sim_trade t =
        sim_find_payment(payments, channel, "out_trade_no", out_trade_no) ? SIM_TRADE_PAID
        : sim_find_payment(closed, channel, "out_trade_no", out_trade_no) ? SIM_TRADE_CLOSED
                                                                          : SIM_TRADE_OPEN;
    *prev = json_incref(sim_find_created(created, channel, out_trade_no));
    json_decref(payments);
    json_decref(closed);
    json_decref(created);
    return t;
}

json_t *sim_find_created(json_t *created, const char *channel, const char *out_trade_no)
{
    json_t *last = NULL, *p;
    size_t i;
    json_array_foreach(created, i, p) if (strcmp(sim_jstr(p, "channel"), channel) == 0 &&
                                          strcmp(sim_jstr(p, "out_trade_no"), out_trade_no) == 0)
        last = p;
    return last;
}

/* prefix + 24 random digits (the channels' refund ids look so). */
void sim_new_id(const char *prefix, char *out, size_t cap)
{
    char digits[25];
    unsigned char rnd[24];
    PO_ASSERT(po_random(rnd, sizeof rnd) == PO_OK);
    for (int k = 0; k < 24; k++)
        digits[k] = (char)('0' + rnd[k] % 10);
    digits[24] = '\0';
    (void)snprintf(out, cap, "%s%s", prefix, digits);
}

/* "YYYY-MM-DD hh:mm:ss" in Beijing time, as the bills and Alipay write it. */
void sim_beijing_now(char *out, size_t cap)
{
    time_t t = time(NULL) + 8 * 3600;
    struct tm tm;
    gmtime_r(&t, &tm);
    (void)strftime(out, cap, "%Y-%m-%d %H:%M:%S", &tm);
}

void sim_yuan(int64_t minor, char *out, size_t cap)
{
    (void)snprintf(out, cap, "%lld.%02lld", (long long)(minor / 100), (long long)(minor % 100));
}

void sim_record_close(struct po_sim_server *s, const char *channel, const char *out_trade_no)
{
    char when[32];
    sim_beijing_now(when, sizeof when);
    json_t *rec = json_pack("{s:s, s:s, s:s}", "channel", channel, "out_trade_no", out_trade_no,
                            "time", when);
    sim_append_jsonl(s->dir, "closed.jsonl", rec);
    json_decref(rec);
}

po_err po_sim_created_find(const char *dir, const char *channel, const char *out_trade_no,
                           struct po_sim_created *out)
{
    memset(out, 0, sizeof *out);
    bool stripe = strcmp(channel, "stripe") == 0;
    json_t *all = sim_read_jsonl(dir, stripe ? "intents.jsonl" : "created.jsonl"), *p, *hit = NULL;
    size_t i;
    json_array_foreach(all, i, p)
    {
        /* a PaymentIntent's first line is its creation (later ones its
         * status); the others' latest line is the payment */
        if (strcmp(sim_jstr(p, "out_trade_no"), out_trade_no) != 0 ||
            (stripe ? !*sim_jstr(p, "client_secret")
                    : strcmp(sim_jstr(p, "channel"), channel) != 0))
            continue;
        hit = p;
    }
    po_err rc = PO_ERR_NOT_FOUND;
    if (hit && po_strcpy(out->currency, sizeof out->currency, sim_jstr(hit, "currency")) == PO_OK &&
        po_strcpy(out->notify_url, sizeof out->notify_url, sim_jstr(hit, "notify_url")) == PO_OK &&
        po_strcpy(out->intent, sizeof out->intent, stripe ? sim_jstr(hit, "id") : "") == PO_OK) {
        out->amount = sim_jint(hit, "amount");
        rc = PO_OK;
    }
    json_decref(all);
    return rc;
}

bool sim_listed(const struct po_sim_server *s, const char *file, const char *value)
{
    char path[1024], line[256];
    (void)snprintf(path, sizeof path, "%s/%s", s->dir, file);
    FILE *f = fopen(path, "r");
    bool hit = false;
    size_t n = strlen(value);
    while (f && !hit && fgets(line, sizeof line, f))
        hit = strncmp(line, value, n) == 0 && (line[n] == '\n' || line[n] == '\0');
    if (f)
        fclose(f);
    return hit;
}

bool sim_bill_not_ready(const struct po_sim_server *s, const char *date)
{
    return sim_listed(s, "bill_not_ready", date);
}

/* A WeChat Pay error code on a /v3/ line: upper-case letters and '_'. */
static bool wx_code(const char *path, const char *named)
{
    if (strncmp(path, "/v3/", 4) != 0 || !named[0])
        return false;
    for (const char *p = named; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || *p == '_'))
            return false;
    return true;
}

/* Who calls, as the request says it (a DIR/faults line "@CALLER …" is that
 * caller's only): WeChat Pay's merchant id (the mchid its Authorization is
 * signed as, else the query's mchid), Alipay's app_id (query string or form
 * body), Stripe's account (the Stripe-Account header a Connect platform
 * sends, else the secret key the request is made with: the account it
 * names). "" when the request names none. */
static void caller_of(struct sim_call *c, char *out, size_t cap)
{
    out[0] = '\0';
    const char *v = NULL, *end = NULL;
    if (strncmp(c->path, "/v3/", 4) == 0) {
        const char *auth = c->header(c->ctx, "Authorization");
        const char *p = auth ? strstr(auth, "mchid=\"") : NULL;
        if (p && (end = strchr(p + 7, '"')))
            v = p + 7;
        else if ((v = c->arg(c->ctx, "mchid")))
            end = v + strlen(v);
    } else if (strncmp(c->path, "/v1/", 4) == 0) {
        const char *auth = c->header(c->ctx, "Authorization");
        if ((v = c->header(c->ctx, "Stripe-Account")))
            end = v + strlen(v);
        else if (auth && strncmp(auth, "Bearer ", 7) == 0) {
            v = auth + 7;
            end = v + strlen(v);
        }
    } else if ((v = c->arg(c->ctx, "app_id"))) {
        end = v + strlen(v);
    } else {
        /* a form body: app_id=…& (an id needs no decoding) */
        for (const char *p = c->body; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL)
            if (strncmp(p, "app_id=", 7) == 0) {
                v = p + 7;
                end = strchr(v, '&') ? strchr(v, '&') : v + strlen(v);
                break;
            }
    }
    if (v && end && (size_t)(end - v) < cap) {
        memcpy(out, v, (size_t)(end - v));
        out[end - v] = '\0';
    }
}

/* The first line of DIR/faults for c with a count left, its count taken
 * down: "[@CALLER] METHOD PATH-PREFIX STATUS COUNT [FIFTH [SIXTH]]". A line
 * naming a caller is that caller's only (caller_of: the merchant id, app_id
 * or Stripe account the request carries), a line without one anybody's.
 * Which lines are c's besides: with api, the lines naming that Alipay method
 * fifth (the sub_code, sixth, into sub); with code, the lines naming a code
 * fifth (Stripe's, into code); else plain four-field lines, and WeChat Pay
 * /v3/ lines naming one of its codes fifth (into c->fault_code). */
static int fault_take(struct po_sim_server *s, struct sim_call *c, const char *api, char *sub,
                      size_t subcap, char *code, size_t codecap)
{
    if (subcap)
        sub[0] = '\0';
    if (codecap)
        code[0] = '\0';
    char path[1024];
    (void)snprintf(path, sizeof path, "%s/faults", s->dir);
    pthread_mutex_lock(&s->mu);
    FILE *f = fopen(path, "r");
    if (!f) {
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    char lines[16][768], caller[128];
    caller_of(c, caller, sizeof caller);
    int n = 0, hit = -1;
    unsigned status = 0;
    while (n < 16 && fgets(lines[n], sizeof lines[n], f)) {
        char m[16], p[400], named[64] = "", sixth[64] = "", who[130] = "";
        unsigned st = 0;
        int count = 0, at = 0;
        if (lines[n][0] == '@' && sscanf(lines[n], "%129s %n", who, &at) != 1)
            who[0] = '\0';
        int k =
            sscanf(lines[n] + at, "%15s %399s %u %d %63s %63s", m, p, &st, &count, named, sixth);
        bool coded = !api && !code && k == 5 && wx_code(p, named);
        bool mine = api ? k >= 5 && strcmp(named, api) == 0 : code ? k == 5 : k == 4 || coded;
        bool theirs = !who[0] || strcmp(who + 1, caller) == 0;
        if (k >= 4 && mine && theirs && hit < 0 && count > 0 && strcmp(m, c->method) == 0 &&
            strncmp(c->path, p, strlen(p)) == 0) {
            hit = n;
            status = st;
            if (subcap && po_strcpy(sub, subcap, sixth))
                sub[0] = '\0';
            if (codecap && po_strcpy(code, codecap, named))
                code[0] = '\0';
            (void)snprintf(c->fault_code, sizeof c->fault_code, "%s", coded ? named : "");
            (void)snprintf(lines[n], sizeof lines[n], "%s%s%s %s %u %d %s%s%s\n", who,
                           *who ? " " : "", m, p, st, count - 1, named, *sixth ? " " : "", sixth);
        }
        n++;
    }
    fclose(f);
    if (hit >= 0 && (f = fopen(path, "w"))) {
        for (int i = 0; i < n; i++)
            fputs(lines[i], f);
        fclose(f);
    }
    pthread_mutex_unlock(&s->mu);
    return hit < 0 ? -1 : (int)status;
}

int sim_fault_take(struct po_sim_server *s, struct sim_call *c, const char *api)
{
    return fault_take(s, c, api, NULL, 0, NULL, 0);
}

int sim_fault_take_sub(struct po_sim_server *s, struct sim_call *c, const char *api, char *sub,
                       size_t cap)
{
    return fault_take(s, c, api, sub, cap, NULL, 0);
}

int sim_fault_take_code(struct po_sim_server *s, struct sim_call *c, char *code, size_t cap)
{
    return fault_take(s, c, NULL, NULL, 0, code, cap);
}
