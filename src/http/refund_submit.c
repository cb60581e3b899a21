/*
 * refund_submit.c — hands an API refund (submit_state 'pending') to the
 * channel's refund API after the request's transaction committed.
 *
 * WeChat Pay: POST /v3/refund/domestic/refunds at the account's
 * api_base_url, signed WECHATPAY2-SHA256-RSA2048 with the merchant key.
 * The channel is idempotent on out_refund_no, so a resubmission after a
 * lost answer is the same refund. Only a platform-signed answer decides:
 *   2xx            -> submitted; the refund stays PROCESSING until the
 *                     refund-result callback (engine) moves it, once
 *   4xx (not 429)  -> rejected: the refund is CLOSED, its reservation
 *                     released, an alert recorded — in one transaction
 *   anything else  -> stays pending (attempts counted); serve retries it.
 *
 * Alipay: alipay.trade.refund at the account's gateway URL, signed RSA2
 * with the app's private key, out_request_no = out_refund_no (Alipay is
 * idempotent on it per trade). Only an answer signed with the Alipay key
 * decides, on its code:
 *   10000                        -> submitted (the refund notification
 *                                   completes it, as above)
 *   40002 / 40004 / 40006        -> rejected (as above; the sub_code is
 *                                   the error), except sub_code
 *                                   ACQ.SYSTEM_ERROR, which is retried
 *   anything else, unsigned, no answer -> stays pending, retried.
 */
#include "http_int.h"

#include "../engine/admin.h"
#include "../recon/recon.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REFUND_PATH "/v3/refund/domestic/refunds"
#define ALIPAY_REFUND "alipay.trade.refund"

struct pending {
    char out_trade_no[PO_ID_MAX + 1];
    char currency[4];
    char channel[PO_CHANNEL_MAX];
    int64_t amount, total;
};

/* The refund if it is still PROCESSING and pending submission. */
static po_err load_pending(struct po_store *s, const char *tenant, const char *out_refund_no,
                           struct pending *out, bool *found)
{
    struct po_rows r;
    struct po_param p[] = {PO_TEXT(tenant), PO_TEXT(out_refund_no)};
    po_err rc = po_store_exec(s,
                              "SELECT r.out_trade_no, r.currency, COALESCE(r.channel, o.channel,"
                              " ''), r.amount, o.amount FROM refund r JOIN pay_order o ON"
                              " o.tenant_id = r.tenant_id AND o.out_trade_no = r.out_trade_no"
                              " WHERE r.tenant_id = ? AND r.out_refund_no = ? AND"
                              " r.status = 'PROCESSING' AND r.submit_state = 'pending'",
                              p, 2, &r, NULL, NULL, 0);
    if (rc)
        return rc;
    *found = r.nrows == 1;
    if (*found && (po_strcpy(out->out_trade_no, sizeof out->out_trade_no, po_rows_get(&r, 0, 0)) ||
                   po_strcpy(out->currency, sizeof out->currency, po_rows_get(&r, 0, 1)) ||
                   po_strcpy(out->channel, sizeof out->channel, po_rows_get(&r, 0, 2)) ||
                   po_rows_i64(&r, 0, 3, &out->amount) || po_rows_i64(&r, 0, 4, &out->total)))
        rc = PO_ERR_STORE;
    po_rows_free(&r);
    return rc;
}

/* The refund request body WeChat Pay expects. */
static char *request_body(const struct po_channel_account *a, const char *out_refund_no,
                          const struct pending *p)
{
    json_t *j = json_pack("{s:s, s:s, s:{s:I, s:I, s:s}}", "out_trade_no", p->out_trade_no,
                          "out_refund_no", out_refund_no, "amount", "refund",
                          (json_int_t)p->amount, "total", (json_int_t)p->total, "currency",
                          p->currency);
    if (j && a->notify_url[0])
        json_object_set_new(j, "notify_url", json_string(a->notify_url));
    char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return body;
}

/* A channel's error code, bounded to 40 characters of [A-Za-z0-9_.-]
 * ("HTTP_<status>" when there is none). */
static void clean_code(const char *c, long status, char *out, size_t cap)
{
    size_t n = 0;
    for (; c && c[n] && n + 1 < cap && n < 40; n++) {
        char ch = c[n];
        bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-';
        out[n] = ok ? ch : '?';
    }
    out[n] = '\0';
    if (!n)
        (void)snprintf(out, cap, "HTTP_%ld", status);
}

/* WeChat Pay: POST the refund; decide on the platform-signed answer. */
static po_err submit_wechatpay(const struct po_channel_account *acct, const char *out_refund_no,
                               const struct pending *p, struct po_api_resp *resp,
                               const char **decision, char *code, size_t cap)
{
    char *body = request_body(acct, out_refund_no, p), why[PO_REASON_MAX] = "";
    if (!body || po_wechatpay_call(acct, "POST", REFUND_PATH, body, resp)) {
        free(body);
        return PO_ERR_NOMEM;
    }
    free(body);
    bool is_signed = resp->status && po_wechatpay_resp_signed(acct, resp, why, sizeof why);
    json_t *j = is_signed ? json_loads(resp->body, 0, NULL) : NULL;
    if (is_signed && resp->status >= 200 && resp->status < 300) {
        *decision = "submitted";
    } else if (is_signed && resp->status >= 400 && resp->status < 500 && resp->status != 429) {
        *decision = "rejected";
        clean_code(json_string_value(json_object_get(j, "code")), resp->status, code, cap);
    } else if (resp->status == 0) {
        (void)snprintf(code, cap, "no_answer");
    } else if (!is_signed) {
        (void)snprintf(code, cap, "HTTP_%ld_unsigned:%.20s", resp->status, why);
    } else {
        clean_code(json_string_value(json_object_get(j, "code")), resp->status, code, cap);
    }
    json_decref(j);
    return PO_OK;
}

/* Alipay: alipay.trade.refund; decide on the Alipay-signed answer. */
static po_err submit_alipay(const struct po_channel_account *acct, const char *out_refund_no,
                            const struct pending *p, struct po_api_resp *resp,
                            const char **decision, char *code, size_t cap)
{
    char yuan[32], why[PO_REASON_MAX] = "";
    (void)snprintf(yuan, sizeof yuan, "%lld.%02lld", (long long)(p->amount / 100),
                   (long long)(p->amount % 100));
    json_t *biz = json_pack("{s:s, s:s, s:s}", "out_trade_no", p->out_trade_no, "refund_amount",
                            yuan, "out_request_no", out_refund_no);
    char *text = biz ? json_dumps(biz, JSON_COMPACT) : NULL;
    json_decref(biz);
    po_err rc = text ? po_alipay_call(acct, ALIPAY_REFUND, text, resp) : PO_ERR_NOMEM;
    free(text);
    if (rc == PO_ERR_INVALID) {
        (void)snprintf(code, cap, "no_app_private_key");
        return PO_OK;
    }
    if (rc)
        return rc;
    json_t *n = resp->status == 200
                    ? po_alipay_resp_verified(acct, resp, ALIPAY_REFUND, why, sizeof why)
                    : NULL;
    const char *c = json_string_value(json_object_get(n, "code"));
    const char *sub = json_string_value(json_object_get(n, "sub_code"));
    if (resp->status == 0) {
        (void)snprintf(code, cap, "no_answer");
    } else if (resp->status != 200) {
        (void)snprintf(code, cap, "HTTP_%ld", resp->status);
    } else if (!n) {
        (void)snprintf(code, cap, "unsigned:%.20s", why);
    } else if (c && strcmp(c, "10000") == 0) {
        *decision = "submitted";
    } else {
        bool final = c && (strcmp(c, "40002") == 0 || strcmp(c, "40004") == 0 ||
                           strcmp(c, "40006") == 0) &&
                     !(sub && strstr(sub, "SYSTEM_ERROR"));
        if (final)
            *decision = "rejected";
        clean_code(sub ? sub : c, resp->status, code, cap);
    }
    json_decref(n);
    return PO_OK;
}

/* The channels whose refund API payonce calls: the one list both
 * po_refund_submittable and po_refund_submit read. */
typedef po_err (*submit_fn)(const struct po_channel_account *, const char *,
                            const struct pending *, struct po_api_resp *, const char **, char *,
                            size_t);
static const struct {
    const char *channel;
    submit_fn submit;
} SUBMITTERS[] = {{"wechatpay", submit_wechatpay}, {"alipay", submit_alipay}};

static submit_fn submitter(const char *channel)
{
    for (size_t i = 0; channel && i < sizeof SUBMITTERS / sizeof SUBMITTERS[0]; i++)
        if (strcmp(channel, SUBMITTERS[i].channel) == 0)
            return SUBMITTERS[i].submit;
    return NULL;
}

bool po_refund_submittable(const char *channel)
{
    return submitter(channel) != NULL;
}

static po_err record(struct po_store *s, const char *tenant, const char *out_refund_no,
                     const struct pending *p, const char *decision, const char *error)
{
    char now[PO_TIME_MAX], err[PO_ERRBUF_MAX];
    int64_t changes = 0;
    po_clock_now_iso(now, sizeof now);
    po_err rc = po_store_begin(s, err, sizeof err);
    if (rc)
        return rc;
    if (strcmp(decision, "rejected") == 0) {
        /* Guarded: only a refund still PROCESSING and pending closes, and
         * only then is its reservation released. */
        struct po_param u[] = {PO_TEXT(error), PO_TEXT(now), PO_TEXT(tenant),
                               PO_TEXT(out_refund_no)};
        rc = po_store_exec(s,
                           "UPDATE refund SET status = 'CLOSED', submit_state = 'rejected',"
                           " submit_attempts = submit_attempts + 1, submit_error = ?,"
                           " updated_at = ? WHERE tenant_id = ? AND out_refund_no = ? AND"
                           " status = 'PROCESSING' AND submit_state = 'pending'",
                           u, 4, NULL, &changes, err, sizeof err);
        struct po_param o[] = {PO_I64(p->amount), PO_TEXT(now), PO_TEXT(tenant),
                               PO_TEXT(p->out_trade_no), PO_I64(p->amount)};
        if (!rc && changes == 1)
            rc = po_store_exec(s, po_sql_refund_release, o, 5, NULL, &changes, err, sizeof err);
        char key[PO_ID_MAX + 16], akey[PO_ID_MAX + 48], detail[200];
        (void)snprintf(key, sizeof key, "api:refund:%.64s", out_refund_no);
        (void)snprintf(akey, sizeof akey, "%s|refund_rejected_by_channel", key);
        (void)snprintf(detail, sizeof detail, "the channel refused refund %s of order %s: %s",
                       out_refund_no, p->out_trade_no, error);
        struct po_param a[] = {PO_TEXT(tenant),   PO_TEXT(akey),           PO_TEXT(key),
                               PO_TEXT(p->out_trade_no), PO_I64(p->amount), PO_TEXT(p->currency),
                               PO_TEXT(detail),   PO_TEXT(now)};
        if (!rc && changes == 1)
            rc = po_store_exec(s,
                               "INSERT INTO alert (tenant_id, alert_key, reason, idem_key,"
                               " event_type, source, out_trade_no, amount, currency, detail,"
                               " created_at) VALUES (?, ?, 'refund_rejected_by_channel', ?,"
                               " 'REFUND_SUBMIT', 'api', ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                               a, 8, NULL, NULL, err, sizeof err);
    } else {
        struct po_param u[] = {PO_TEXT(decision), PO_TEXT(error), PO_TEXT(now), PO_TEXT(tenant),
                               PO_TEXT(out_refund_no)};
        rc = po_store_exec(s,
                           "UPDATE refund SET submit_state = ?, submit_attempts ="
                           " submit_attempts + 1, submit_error = NULLIF(?, ''), updated_at = ?"
                           " WHERE tenant_id = ? AND out_refund_no = ? AND submit_state ="
                           " 'pending'",
                           u, 5, NULL, NULL, err, sizeof err);
    }
    if (rc) {
        po_store_rollback(s);
        return rc;
    }
    return po_store_commit(s, err, sizeof err);
}

po_err po_refund_submit(struct po_store *s, const unsigned char *master, const char *tenant,
                        const char *out_refund_no, char *state, size_t cap)
{
    struct pending p;
    bool found = false;
    if (state && cap)
        state[0] = '\0';
    po_err rc = load_pending(s, tenant, out_refund_no, &p, &found);
    if (rc || !found)
        return rc;
    struct po_channel_account *acct = calloc(1, sizeof *acct);
    struct po_api_resp *resp = calloc(1, sizeof *resp);
    char err[PO_ERRBUF_MAX] = "", code[48] = "";
    const char *decision = "pending";
    if (!acct || !resp) {
        rc = PO_ERR_NOMEM;
        goto out;
    }
    rc = po_account_fetch(s, master, tenant, p.channel, acct, err, sizeof err);
    if (rc) {
        po_log(PO_LOG_WARN, "tenant %s: refund %s cannot be submitted: %s account: %s", tenant,
               out_refund_no, p.channel, err);
        (void)snprintf(code, sizeof code, "no_channel_account");
        rc = record(s, tenant, out_refund_no, &p, decision, code);
        goto out;
    }
    submit_fn submit = submitter(p.channel);
    if (!submit)
        (void)snprintf(code, sizeof code, "no_refund_api"); /* stays pending, visible */
    else if ((rc = submit(acct, out_refund_no, &p, resp, &decision, code, sizeof code)))
        goto out;
    po_log(strcmp(decision, "submitted") == 0 ? PO_LOG_INFO : PO_LOG_WARN,
           "tenant %s: refund %s submitted to %s: HTTP %ld -> %s %s", tenant, out_refund_no,
           p.channel, resp->status, decision, code);
    rc = record(s, tenant, out_refund_no, &p, decision, code);
out:
    if (!rc && state && po_strcpy(state, cap, decision))
        state[0] = '\0';
    free(resp);
    if (acct)
        po_channel_account_free(acct);
    free(acct);
    return rc;
}

po_err po_refund_submit_pending(struct po_store *s, const unsigned char *master,
                                int64_t min_age_s, int limit, int *out_submitted)
{
    char cutoff[PO_TIME_MAX];
    /* last attempt at least min_age_s ago, to the second */
    po_clock_iso_at((int64_t)time(NULL) - min_age_s + 1, cutoff, sizeof cutoff);
    struct po_rows r;
    struct po_param p[] = {PO_TEXT(cutoff), PO_I64(limit)};
    po_err rc = po_store_exec(s,
                              "SELECT tenant_id, out_refund_no FROM refund WHERE submit_state ="
                              " 'pending' AND status = 'PROCESSING' AND updated_at < ?"
                              " ORDER BY updated_at LIMIT ?",
                              p, 2, &r, NULL, NULL, 0);
    if (rc)
        return rc;
    int n = 0;
    for (int i = 0; i < r.nrows; i++) {
        char state[16];
        if (po_refund_submit(s, master, po_rows_get(&r, i, 0), po_rows_get(&r, i, 1), state,
                             sizeof state) == PO_OK &&
            strcmp(state, "submitted") == 0)
            n++;
    }
    po_rows_free(&r);
    if (out_submitted)
        *out_submitted = n;
    return PO_OK;
}
