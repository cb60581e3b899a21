/*
 * api_routes.c — what each /v1 route does (the table is in routes.c, the
 * pipeline in api.c): the POST routes' body validation and their effect
 * inside the transaction, and the GET routes' reads (service views).
 *
 *   POST /v1/orders                      create an order (PAYING)
 *   GET  /v1/orders                      ?status=&merchant=&since=&limit=&cursor=
 *   GET  /v1/orders/{out_trade_no}
 *   POST /v1/orders/{out_trade_no}/close PAYING -> CLOSED only
 *   POST /v1/refunds                     reserve, record PROCESSING, submit
 *   GET  /v1/refunds/{out_refund_no}
 *   GET  /v1/balances
 *   GET  /v1/alerts                      ?state=&limit=&cursor=
 *   GET  /v1/journal                     ?limit=&cursor=&out_trade_no=
 */
#include "api_int.h"

#include "../engine/objects.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- request validation ---- */

/* The body is one JSON object whose members are all in allowed. */
static bool parse_body(struct po_api_call *c, const char *const *allowed, int n, bool may_be_empty)
{
    const struct po_hreq *q = c->req;
    char jerr[PO_ERRBUF_SIZE] = "";
    po_err rc = PO_OK;
    if (may_be_empty && q->body_len == 0)
        rc = (c->in = json_object()) ? PO_OK : PO_ERR_NOMEM;
    else
        rc = po_json_parse(q->body, q->body_len, &c->in, jerr, sizeof jerr);
    if (rc == PO_ERR_NOMEM) {
        po_api_out_of_memory(c);
        return false;
    }
    if (rc || !json_is_object(c->in)) {
        char msg[300];
        (void)snprintf(msg, sizeof msg, "the body must be one JSON object: %s",
                       rc ? jerr : "not an object");
        po_api_fail(c, 400, "malformed_json", msg, NULL);
        return false;
    }
    const char *k;
    json_t *v;
    json_object_foreach(c->in, k, v)
    {
        bool ok = false;
        for (int i = 0; i < n && !ok; i++)
            ok = strcmp(k, allowed[i]) == 0;
        if (!ok) {
            char msg[160];
            (void)snprintf(msg, sizeof msg, "unknown parameter '%.64s'", k);
            po_api_fail(c, 400, "unknown_parameter", msg, NULL);
            return false;
        }
    }
    return true;
}

/* A required (or optional, with dflt) identifier member. */
static const char *id_member(struct po_api_call *c, const char *name, bool required,
                             const char *dflt)
{
    json_t *v = json_object_get(c->in, name);
    if (!v && !required)
        return dflt;
    const char *s = json_string_value(v);
    if (!s || !po_id_valid(s, PO_ID_MAX)) {
        char msg[160];
        (void)snprintf(msg, sizeof msg, "%s: %s 1-%d characters of [A-Za-z0-9_-.:|*]", name,
                       v ? "must be" : "required,", PO_ID_MAX);
        po_api_fail(c, 400, v ? "invalid_parameter" : "missing_parameter", msg, name);
        return NULL;
    }
    return s;
}

/* amount: a JSON integer in 1..PO_AMOUNT_MAX minor units. */
static bool amount_member(struct po_api_call *c, int64_t *out)
{
    json_t *v = json_object_get(c->in, "amount");
    if (!json_is_integer(v) || !po_amount_valid((int64_t)json_integer_value(v))) {
        char msg[160];
        (void)snprintf(msg, sizeof msg,
                       "amount: %s an integer number of minor units in 1..%lld (no decimals,"
                       " no strings)",
                       v ? "must be" : "required,", (long long)PO_AMOUNT_MAX);
        po_api_fail(c, 400, v ? "invalid_amount" : "missing_parameter", msg, "amount");
        return false;
    }
    *out = (int64_t)json_integer_value(v);
    return true;
}

/* currency: optional; a supported ISO 4217 code. */
static bool currency_member(struct po_api_call *c, const char **out, const char *dflt)
{
    json_t *v = json_object_get(c->in, "currency");
    *out = dflt;
    if (!v)
        return true;
    const char *s = json_string_value(v);
    if (!s || !po_currency_valid(s)) {
        po_api_fail(c, 400, "invalid_currency", "currency: a supported ISO 4217 code such as CNY",
                    "currency");
        return false;
    }
    *out = s;
    return true;
}

/* ---- POST routes: validation, and the effect inside the transaction ---- */

static const char *const ORDER_CREATE_FIELDS[] = {
    "merchant",   "out_trade_no", "amount",       "currency",        "channel",   "time_expire",
    "pay_method", "description",  "payer_openid", "payer_client_ip", "return_url"};

/* time_expire: RFC 3339 with its offset (WeChat Pay's form), after now and
 * within PO_ORDER_EXPIRY_MAX_S; *at 0 when absent. */
static bool expiry_member(struct po_api_call *c, int64_t *at)
{
    json_t *v = json_object_get(c->in, "time_expire");
    *at = 0;
    if (!v || json_is_null(v))
        return true;
    int64_t now = po_clock_now_ms() / 1000;
    if (!json_string_value(v) || po_time_parse(json_string_value(v), at) || *at <= now ||
        *at > now + PO_ORDER_EXPIRY_MAX_S) {
        po_api_fail(c, 400, "invalid_parameter",
                    "time_expire: an RFC 3339 time with its offset, in the future and within 90"
                    " days, e.g. 2026-12-04T18:00:00+08:00",
                    "time_expire");
        return false;
    }
    return true;
}

/* A text member within max bytes, no control characters (NULL when
 * absent; false with the answer set when bad). */
static bool text_member(struct po_api_call *c, const char *name, size_t max, const char *what,
                        const char **out)
{
    json_t *v = json_object_get(c->in, name);
    *out = NULL;
    if (!v || json_is_null(v))
        return true;
    const char *s = json_string_value(v);
    bool ok = s && *s && strlen(s) <= max;
    for (const char *p = s; ok && *p; p++)
        ok = (unsigned char)*p >= 0x20 && *p != 0x7f;
    if (!ok) {
        char msg[200];
        (void)snprintf(msg, sizeof msg, "%s: %s, at most %zu bytes", name, what, max);
        po_api_fail(c, 400, "invalid_parameter", msg, name);
        return false;
    }
    *out = s;
    return true;
}

/* pay_method and the members that go with it (docs/api.md, "Creating the
 * payment at the channel"). */
static bool pay_members(struct po_api_call *c, const char *channel)
{
    const char *m = NULL, *desc = NULL, *openid = NULL, *ip = NULL, *ret = NULL;
    if (!text_member(c, "pay_method", 23, "one of the channel's pay methods", &m) ||
        !text_member(c, "description", 256, "what is bought, shown to the buyer", &desc) ||
        !text_member(c, "payer_openid", PO_ID_MAX, "the payer's openid", &openid) ||
        !text_member(c, "payer_client_ip", 45, "the payer's IP address", &ip) ||
        !text_member(c, "return_url", 500, "an https:// URL", &ret))
        return false;
    const struct po_channel_ops *ops = channel ? po_channel_find(channel) : NULL;
    bool known = false;
    for (int i = 0; m && ops && ops->pay_methods && ops->pay_methods[i]; i++)
        known = known || strcmp(ops->pay_methods[i], m) == 0;
    const char *bad = NULL, *param = NULL;
    unsigned char addr[16];
    if (!m && (desc || openid || ip || ret))
        bad = "description, payer_openid, payer_client_ip and return_url go with a pay_method",
        param = "pay_method";
    else if (m && !ops)
        bad = "pay_method: needs the order's channel", param = "channel";
    else if (m && !known)
        bad = "pay_method: wechatpay native|jsapi|h5, alipay precreate|page|wap, stripe"
              " payment_intent",
        param = "pay_method";
    else if (m && (strcmp(m, "jsapi") == 0) != (openid != NULL))
        bad = "payer_openid: required with pay_method jsapi, and only with it",
        param = "payer_openid";
    else if (openid && !po_id_valid(openid, PO_ID_MAX))
        bad = "payer_openid: the payer's openid under the account's appid", param = "payer_openid";
    else if (m && (strcmp(m, "h5") == 0) != (ip != NULL))
        bad = "payer_client_ip: required with pay_method h5, and only with it",
        param = "payer_client_ip";
    else if (ip && inet_pton(strchr(ip, ':') ? AF_INET6 : AF_INET, ip, addr) != 1)
        bad = "payer_client_ip: an IPv4 or IPv6 address", param = "payer_client_ip";
    else if (ret && ((strcmp(m, "page") && strcmp(m, "wap")) ||
                     (strncmp(ret, "https://", 8) && strncmp(ret, "http://", 7)) ||
                     strpbrk(ret, " \"'<>\\")))
        bad = "return_url: an http(s) URL, only with pay_method page or wap", param = "return_url";
    if (bad)
        po_api_fail(c, 400, "invalid_parameter", bad, param);
    return !bad;
}

static bool order_create_validate(struct po_api_call *c)
{
    int64_t amount = 0, at = 0;
    const char *cur = NULL;
    if (!parse_body(c, ORDER_CREATE_FIELDS, (int)PO_NELEM(ORDER_CREATE_FIELDS), false) ||
        !id_member(c, "merchant", true, NULL) || !id_member(c, "out_trade_no", true, NULL) ||
        !amount_member(c, &amount) || !currency_member(c, &cur, "CNY") || !expiry_member(c, &at))
        return false;
    json_t *ch = json_object_get(c->in, "channel");
    if (ch && !json_is_null(ch) &&
        (!json_string_value(ch) || !po_channel_find(json_string_value(ch)))) {
        char names[128], msg[160];
        po_channel_names(0, names, sizeof names);
        (void)snprintf(msg, sizeof msg, "channel: one of %s", names);
        po_api_fail(c, 400, "invalid_parameter", msg, "channel");
        return false;
    }
    if (!pay_members(c, json_string_value(ch)))
        return false;
    /* the channel's own field rules: an order it would refuse is not made */
    struct po_pay_request rq = {
        .tenant = c->tenant,
        .out_trade_no = json_string_value(json_object_get(c->in, "out_trade_no")),
        .pay_method = json_string_value(json_object_get(c->in, "pay_method")),
        .amount = amount,
        .currency = cur,
        .description = json_string_value(json_object_get(c->in, "description")),
    };
    const char *param = NULL, *rule = po_channel_order_rule(json_string_value(ch), &rq, &param);
    if (rule)
        po_api_fail(c, 400, "invalid_parameter", rule, param);
    return !rule;
}

/* The order as the body describes it (strings borrowed from c->in). */
static struct po_order_spec order_spec(struct po_api_call *c)
{
    const char *cur = json_string_value(json_object_get(c->in, "currency"));
    const char *te = json_string_value(json_object_get(c->in, "time_expire"));
    int64_t at = 0;
    if (te && po_time_parse(te, &at)) /* validated: it parses */
        at = 0;
    struct po_order_spec spec = {c->tenant,
                                 json_string_value(json_object_get(c->in, "merchant")),
                                 json_string_value(json_object_get(c->in, "out_trade_no")),
                                 (int64_t)json_integer_value(json_object_get(c->in, "amount")),
                                 cur ? cur : "CNY",
                                 json_string_value(json_object_get(c->in, "channel")),
                                 at};
    return spec;
}

/* A before step that could not decide: out of memory, or the store. */
static bool before_failed(struct po_api_call *c, po_err rc)
{
    if (rc == PO_ERR_NOMEM)
        po_api_out_of_memory(c);
    else
        po_api_unavailable(c);
    return false;
}

static void pay_job_free(void *p)
{
    po_pay_job_free(p);
    free(p);
}

static unsigned refusal_status(const char *code)
{
    return strcmp(code, "invalid_request") == 0 ? 400 : 409;
}

/* With a pay_method, before the transaction and holding no connection:
 * the order is recorded, then its payment created at the channel
 * (service/payments/order_pay.c); the effect records the channel's answer. No
 * decisive answer: 503 channel_unavailable (the order stays PAYING, the
 * same request again creates it); the channel refused: 409
 * channel_refused with its code. */
static bool create_before(struct po_api_call *c)
{
    const char *method = json_string_value(json_object_get(c->in, "pay_method"));
    if (!method)
        return true;
    const struct po_gateway_parts *gw = c->ctx->gw;
    struct po_pay_job *job = calloc(1, sizeof *job);
    if (!job) {
        po_api_out_of_memory(c);
        return false;
    }
    c->state = job;
    c->state_free = pay_job_free;
    struct po_order_spec spec = order_spec(c);
    struct po_pay_ask ask = {method, json_string_value(json_object_get(c->in, "description")),
                             json_string_value(json_object_get(c->in, "payer_openid")),
                             json_string_value(json_object_get(c->in, "payer_client_ip")),
                             json_string_value(json_object_get(c->in, "return_url"))};
    if (!po_api_acquire(c)) {
        po_api_unavailable(c);
        return false;
    }
    po_err rc = po_order_pay_prepare(c->s, gw->cb.accounts, gw->cfg->master_key, &spec, &ask, job);
    po_api_release(c);
    if (rc)
        return before_failed(c, rc);
    if (job->step == PO_PAYSTEP_REFUSED && job->order_refused) {
        /* the order itself is refused: the effect answers as without a
         * pay_method (and the answer is stored under the key) */
        pay_job_free(job);
        c->state = NULL;
        c->state_free = NULL;
        return true;
    }
    if (job->step == PO_PAYSTEP_REFUSED) {
        po_api_fail(c, refusal_status(job->code), job->code, job->err, NULL);
        return false;
    }
    if (job->step == PO_PAYSTEP_STORED)
        return true;
    if (!po_bulkhead_enter(gw->outbound_bulkhead, c->tenant)) {
        po_api_fail(c, 503, "channel_unavailable",
                    "this tenant's calls to its channels are at their limit: the order is"
                    " recorded (PAYING), its payment not created yet; retry",
                    NULL);
        c->retry_after = 5;
        return false;
    }
    rc = po_order_pay_call(job);
    po_bulkhead_leave(gw->outbound_bulkhead, c->tenant);
    if (rc) {
        po_api_out_of_memory(c);
        return false;
    }
    if (job->ans.state == PO_PAY_CREATED)
        return true;
    char msg[300];
    bool refused = job->ans.state == PO_PAY_REFUSED;
    (void)snprintf(msg, sizeof msg,
                   refused ? "%s refused the payment (%s): the order is recorded (PAYING)"
                           : "%s did not create the payment (%s): the order is recorded (PAYING);"
                             " retry",
                   job->ch->name, job->ans.why);
    po_log(PO_LOG_WARN, "request %s: payment of %s at %s: %s", c->req->request_id,
           job->out_trade_no, job->ch->name, job->ans.why);
    po_api_fail(c, refused ? 409 : 503, refused ? "channel_refused" : "channel_unavailable", msg,
                NULL);
    c->retry_after = refused ? 0 : 5;
    return false;
}

static po_err order_create_effect(struct po_api_call *c)
{
    struct po_order_spec spec = order_spec(c);
    struct po_pay_job *job = c->state;
    bool created = false;
    char code[48] = "", err[PO_ERRBUF_SIZE] = "";
    po_err rc = job ? po_order_pay_record(c->s, &spec, job, code, sizeof code, err, sizeof err)
                    : po_order_insert(c->s, &spec, &created, code, sizeof code, err, sizeof err);
    if (rc)
        return po_api_business(c, rc, code, err);
    rc = po_view_order(c->s, c->tenant, spec.out_trade_no, &c->resp);
    if (!rc && !c->resp)
        rc = PO_ERR_STORE;
    c->status = (job ? job->created : created) ? 201 : 200;
    return rc;
}

static bool close_validate(struct po_api_call *c)
{
    return parse_body(c, NULL, 0, true);
}

/* Before the transaction, holding no connection: an open order is closed
 * at its channel first (docs/api.md). The channel closed it (or never had
 * it): the effect closes it here. The channel has its payment: credited
 * through the engine, and the effect then answers 409 order_paid. No
 * decisive answer: 503 channel_unavailable, the order stays PAYING. */
static bool close_before(struct po_api_call *c)
{
    const struct po_gateway_parts *gw = c->ctx->gw;
    struct po_close_job *job = calloc(1, sizeof *job);
    if (!job) {
        po_api_out_of_memory(c);
        return false;
    }
    if (!po_api_acquire(c)) {
        free(job);
        po_api_unavailable(c);
        return false;
    }
    po_err rc =
        po_order_close_prepare(c->s, gw->cb.accounts, gw->cfg->master_key, c->tenant, c->no, job);
    po_api_release(c);
    struct po_close_report rep = {.result = PO_CC_LOCAL};
    bool busy = false;
    if (!rc && job->callable) {
        busy = !po_bulkhead_enter(gw->outbound_bulkhead, c->tenant);
        if (!busy) {
            rc = po_order_close_call(job, NULL, gw->cb.committer, &rep);
            po_bulkhead_leave(gw->outbound_bulkhead, c->tenant);
        }
    }
    const char *channel = job->ch ? job->ch->name : "";
    po_close_job_free(job);
    free(job);
    if (rc == PO_ERR_NOT_FOUND) /* the effect answers 404 */
        return true;
    if (rc)
        return before_failed(c, rc);
    if (busy || rep.result == PO_CC_UNDECIDED) {
        char msg[300];
        (void)snprintf(msg, sizeof msg,
                       busy ? "this tenant's calls to its channels are at their limit: the"
                              " order stays PAYING; retry"
                            : "%s did not confirm the close (%s): the order stays PAYING; retry",
                       channel, rep.why);
        po_log(PO_LOG_WARN, "request %s: close of %s at %s: %s", c->req->request_id, c->no, channel,
               busy ? "outbound_busy" : rep.why);
        po_api_fail(c, 503, "channel_unavailable", msg, NULL);
        c->retry_after = 5;
        return false;
    }
    if (rep.result == PO_CC_PAID)
        po_log(PO_LOG_INFO, "request %s: %s had paid %s before the close: %s", c->req->request_id,
               channel, c->no, po_outcome_name(rep.outcome.kind));
    return true;
}

static po_err close_effect(struct po_api_call *c)
{
    bool now = false;
    char code[48] = "", err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_order_close(c->s, c->tenant, c->no, &now, code, sizeof code, err, sizeof err);
    if (rc)
        return po_api_business(c, rc, code, err);
    rc = po_view_order(c->s, c->tenant, c->no, &c->resp);
    if (!rc && !c->resp)
        rc = PO_ERR_STORE;
    c->status = 200;
    return rc;
}

static const char *const REFUND_CREATE_FIELDS[] = {"out_trade_no", "out_refund_no", "amount",
                                                   "currency"};

static bool refund_validate(struct po_api_call *c)
{
    int64_t amount = 0;
    const char *cur = NULL;
    return parse_body(c, REFUND_CREATE_FIELDS, 4, false) &&
           id_member(c, "out_trade_no", true, NULL) && id_member(c, "out_refund_no", true, NULL) &&
           amount_member(c, &amount) && currency_member(c, &cur, NULL);
}

static po_err refund_effect(struct po_api_call *c)
{
    const char *no = json_string_value(json_object_get(c->in, "out_trade_no"));
    const char *rno = json_string_value(json_object_get(c->in, "out_refund_no"));
    /* Refunds of a channel with a refund API are submitted to it after
     * commit; the other channels' refunds wait for the notification. */
    char channel[PO_CHANNEL_SIZE] = "";
    bool found = false;
    po_err rc = po_view_order_channel(c->s, c->tenant, no, channel, sizeof channel, &found);
    if (rc)
        return rc;
    const struct po_channel_ops *ops = found ? po_channel_find(channel) : NULL;
    bool submit = ops && ops->refund_submit;
    bool has_account = false, has_key = false;
    if (submit &&
        (rc = po_account_has_merchant_key(c->s, c->tenant, channel, &has_account, &has_key)))
        return rc;
    /* A channel account without the merchant's API key cannot sign the
     * refund request: refused now, nothing recorded (issue 13 item 10) —
     * unless the channel takes refunds made in it (Stripe's dashboard). */
    if (submit && has_account && !has_key && ops->manual_refunds_without_key)
        submit = false;
    if (submit && has_account && !has_key) {
        char msg[200];
        (void)snprintf(msg, sizeof msg,
                       "the tenant's %s account has no merchant API key to sign the refund"
                       " request (channel set --merchant-private-key-file)",
                       channel);
        po_api_fail(c, 409, "no_merchant_key", msg, NULL);
        return PO_OK;
    }
    struct po_refund_spec f = {c->tenant,
                               no,
                               rno,
                               (int64_t)json_integer_value(json_object_get(c->in, "amount")),
                               json_string_value(json_object_get(c->in, "currency")),
                               submit ? "pending" : "manual"};
    bool created = false;
    char code[48] = "", err[PO_ERRBUF_SIZE] = "";
    rc = po_refund_insert(c->s, &f, &created, code, sizeof code, err, sizeof err);
    if (rc)
        return po_api_business(c, rc, code, err);
    rc = po_view_refund(c->s, c->tenant, rno, &c->resp);
    if (!rc && !c->resp)
        rc = PO_ERR_STORE;
    c->status = created ? 201 : 200;
    if (!rc && created && submit && po_strcpy(c->submit_refund, sizeof c->submit_refund, rno))
        rc = PO_ERR_INTERNAL;
    return rc;
}

const struct po_api_route po_api_order_create = {NULL, order_create_validate, order_create_effect,
                                                 create_before};
const struct po_api_route po_api_order_close = {NULL, close_validate, close_effect, close_before};
const struct po_api_route po_api_refund_create = {NULL, refund_validate, refund_effect};

/* ---- GET routes ---- */

static void get_object(struct po_api_call *c,
                       po_err (*view)(struct po_store *, const char *, const char *, json_t **),
                       const char *what)
{
    json_t *o = NULL;
    if (!po_api_acquire(c) || view(c->s, c->tenant, c->no, &o)) {
        po_api_unavailable(c);
        return;
    }
    if (!o) {
        char msg[120], code[40];
        (void)snprintf(msg, sizeof msg, "no %s %s", what, c->no);
        (void)snprintf(code, sizeof code, "%s_not_found", what);
        po_api_fail(c, 404, code, msg, NULL);
        return;
    }
    c->resp = o;
    c->status = 200;
}

static void get_order(struct po_api_call *c)
{
    get_object(c, po_view_order, "order");
}

static void get_refund(struct po_api_call *c)
{
    get_object(c, po_view_refund, "refund");
}

static void get_balances(struct po_api_call *c)
{
    json_t *data = NULL;
    if (!po_api_acquire(c) || po_view_balances(c->s, c->tenant, &data)) {
        po_api_unavailable(c);
        return;
    }
    c->resp = json_pack("{s:s, s:o}", "object", "list", "data", data);
    c->status = 200;
}

/* Keyset paging on (created_at, key): the cursor is the hex of
 * "created_at|key" of the last item returned. */
struct cursor {
    char ts[PO_TIME_SIZE];
    char key[PO_KEY_SIZE + 1];
};

static bool page_args(struct po_api_call *c, struct po_page *pg, struct cursor *cu)
{
    const char *lim = c->req->arg(c->req->ctx, "limit");
    const char *cur = c->req->arg(c->req->ctx, "cursor");
    memset(pg, 0, sizeof *pg);
    cu->ts[0] = cu->key[0] = '\0';
    pg->limit = PO_PAGE_DEFAULT;
    pg->after_ts = cu->ts;
    pg->after_key = cu->key;
    if (lim && po_parse_i64(lim, 1, PO_PAGE_MAX, &pg->limit)) {
        po_api_fail(c, 400, "invalid_parameter", "limit: an integer in 1..100", "limit");
        return false;
    }
    if (!cur)
        return true;
    size_t n = strlen(cur);
    char plain[PO_TIME_SIZE + PO_KEY_SIZE + 2];
    bool ok = n % 2 == 0 && n / 2 < sizeof plain;
    for (size_t i = 0; ok && i < n; i += 2) {
        int hi = po_hexval(cur[i]), lo = po_hexval(cur[i + 1]);
        ok = hi >= 0 && lo >= 0 && (hi | lo) != 0;
        if (ok)
            plain[i / 2] = (char)(hi << 4 | lo);
    }
    char *bar = NULL;
    if (ok) {
        plain[n / 2] = '\0';
        bar = strchr(plain, '|');
    }
    if (bar)
        *bar = '\0';
    if (!bar || strlen(plain) >= sizeof cu->ts || !po_time_valid(plain) ||
        strlen(bar + 1) > PO_KEY_SIZE) {
        po_api_fail(c, 400, "invalid_parameter", "cursor: pass back next_cursor unchanged",
                    "cursor");
        return false;
    }
    PO_ASSERT(po_strcpy(cu->ts, sizeof cu->ts, plain) == PO_OK);
    PO_ASSERT(po_strcpy(cu->key, sizeof cu->key, bar + 1) == PO_OK);
    return true;
}

static json_t *next_cursor(const char *ts, const char *key)
{
    size_t n = strlen(ts) + 1 + strlen(key);
    char plain[PO_TIME_SIZE + PO_KEY_SIZE + PO_REASON_SIZE + 4];
    char *h = malloc(2 * n + 1);
    if (!h)
        return json_null();
    (void)snprintf(plain, sizeof plain, "%s|%s", ts, key);
    for (size_t i = 0; i < n && i + 1 < sizeof plain; i++)
        (void)snprintf(h + 2 * i, 3, "%02x", (unsigned char)plain[i]);
    json_t *j = json_string(h);
    free(h);
    return j;
}

/* A page of a list: {"object":"list","data":…,"has_more":…,"next_cursor":…}. */
static void list_answer(struct po_api_call *c, json_t *data, const struct po_page *pg)
{
    c->resp =
        json_pack("{s:s, s:o, s:b, s:o}", "object", "list", "data", data, "has_more", pg->more,
                  "next_cursor", pg->more ? next_cursor(pg->last_ts, pg->last_key) : json_null());
    c->status = 200;
}

static void get_alerts(struct po_api_call *c)
{
    struct po_page pg;
    struct cursor cu;
    json_t *data = NULL;
    if (!page_args(c, &pg, &cu))
        return;
    const char *state = c->req->arg(c->req->ctx, "state");
    if (state && !po_alert_state_valid(state)) {
        po_api_fail(c, 400, "invalid_parameter", "state: open, acknowledged or resolved", "state");
        return;
    }
    if (!po_api_acquire(c) || po_view_alerts(c->s, c->tenant, state, &pg, &data)) {
        po_api_unavailable(c);
        return;
    }
    list_answer(c, data, &pg);
}

/* GET /v1/orders: the tenant's orders, oldest first, filtered. */
static void get_orders(struct po_api_call *c)
{
    struct po_page pg;
    struct cursor cu;
    json_t *data = NULL;
    if (!page_args(c, &pg, &cu))
        return;
    struct po_order_filter f = {c->req->arg(c->req->ctx, "status"),
                                c->req->arg(c->req->ctx, "merchant"),
                                c->req->arg(c->req->ctx, "since")};
    if (f.status && strcmp(f.status, "PAYING") != 0 && strcmp(f.status, "PAID") != 0 &&
        strcmp(f.status, "CLOSED") != 0) {
        po_api_fail(c, 400, "invalid_parameter", "status: PAYING, PAID or CLOSED", "status");
        return;
    }
    if (f.merchant && !po_id_valid(f.merchant, PO_ID_MAX)) {
        po_api_fail(c, 400, "invalid_parameter", "merchant: a merchant id", "merchant");
        return;
    }
    if (f.since && !po_since_valid(f.since)) {
        po_api_fail(c, 400, "invalid_parameter",
                    "since: an ISO 8601 UTC time, e.g. 2026-12-01T00:00:00Z", "since");
        return;
    }
    if (!po_api_acquire(c) || po_view_orders(c->s, c->tenant, &f, &pg, &data)) {
        po_api_unavailable(c);
        return;
    }
    list_answer(c, data, &pg);
}

static void get_journal(struct po_api_call *c)
{
    struct po_page pg;
    struct cursor cu;
    json_t *data = NULL;
    if (!page_args(c, &pg, &cu))
        return;
    const char *order = c->req->arg(c->req->ctx, "out_trade_no");
    if (order && !po_id_valid(order, PO_ID_MAX)) {
        po_api_fail(c, 400, "invalid_parameter", "out_trade_no: an order number", "out_trade_no");
        return;
    }
    if (!po_api_acquire(c) || po_view_journal(c->s, c->tenant, order, &pg, &data)) {
        po_api_unavailable(c);
        return;
    }
    list_answer(c, data, &pg);
}

/* GET /v1/events?type=…&out_trade_no=…: the outbox, for a tenant that
 * pulls (or catches up) instead of, or beside, its webhooks. */
static void get_events(struct po_api_call *c)
{
    struct po_page pg;
    struct cursor cu;
    json_t *data = NULL;
    if (!page_args(c, &pg, &cu))
        return;
    const char *type = c->req->arg(c->req->ctx, "type"),
               *order = c->req->arg(c->req->ctx, "out_trade_no");
    if (type && !po_outbox_type_valid(type)) {
        po_api_fail(c, 400, "invalid_parameter", "type: an event type (docs/webhooks.md)", "type");
        return;
    }
    if (order && !po_id_valid(order, PO_ID_MAX)) {
        po_api_fail(c, 400, "invalid_parameter", "out_trade_no: an order number", "out_trade_no");
        return;
    }
    if (!po_api_acquire(c) || po_view_events(c->s, c->tenant, type, order, &pg, &data)) {
        po_api_unavailable(c);
        return;
    }
    list_answer(c, data, &pg);
}

/* ---- webhook endpoints: answered directly, outside the Idempotency-Key
 * pipeline, because their answers carry a signing secret that must never
 * be stored in plain text (a stored answer would be). ---- */

static void get_endpoints(struct po_api_call *c)
{
    struct po_page pg;
    struct cursor cu;
    json_t *data = NULL;
    if (!page_args(c, &pg, &cu))
        return;
    if (!po_api_acquire(c) || po_webhook_list(c->s, c->tenant, &pg, &data)) {
        po_api_unavailable(c);
        return;
    }
    list_answer(c, data, &pg);
}

/* The answer of a write: the endpoint, and its secret when there is one. */
static void endpoint_answer(struct po_api_call *c, unsigned status, const char *id,
                            const char *secret)
{
    json_t *found = NULL;
    if (po_webhook_get(c->s, c->tenant, id, &found)) {
        po_api_unavailable(c);
        return;
    }
    if (secret)
        json_object_set_new(found, "secret", json_string(secret));
    c->resp = found;
    c->status = status;
}

static void create_endpoint(struct po_api_call *c)
{
    static const char *const allowed[] = {"url", "events"};
    if (!po_api_body_ok(c) || !parse_body(c, allowed, PO_NELEM(allowed), false))
        return;
    const char *u = json_string_value(json_object_get(c->in, "url")),
               *ev = json_string_value(json_object_get(c->in, "events"));
    char err[PO_ERRBUF_SIZE] = "";
    if (!u || (json_object_get(c->in, "events") && !ev)) {
        po_api_fail(c, 400, "missing_parameter", "url (and events, a string) are required", "url");
        return;
    }
    if (!po_egress_url_ok(&c->ctx->gw->cfg->egress, u, err, sizeof err)) {
        po_api_fail(c, 400, "invalid_parameter", err, "url");
        return;
    }
    if (!po_webhook_events_ok(ev, err, sizeof err)) {
        po_api_fail(c, 400, "invalid_parameter", err, "events");
        return;
    }
    struct po_webhook_new n;
    if (!po_api_acquire(c)) {
        po_api_unavailable(c);
        return;
    }
    po_err rc = po_webhook_add(c->s, c->ctx->gw->cfg->master_key, c->tenant, u, ev,
                               &c->ctx->gw->cfg->egress, &n, err, sizeof err);
    if (rc == PO_ERR_LIMIT)
        po_api_fail(c, 409, "endpoint_limit", err, NULL);
    else if (rc)
        po_api_unavailable(c);
    else
        endpoint_answer(c, 201, n.id, n.secret);
    po_secure_zero(n.secret, sizeof n.secret);
}

static void remove_endpoint(struct po_api_call *c)
{
    char err[PO_ERRBUF_SIZE] = "";
    if (!po_api_acquire(c)) {
        po_api_unavailable(c);
        return;
    }
    po_err rc = po_webhook_remove(c->s, c->tenant, c->no, err, sizeof err);
    if (rc == PO_ERR_NOT_FOUND)
        po_api_fail(c, 404, "endpoint_not_found", err, NULL);
    else if (rc)
        po_api_unavailable(c);
    else {
        c->resp =
            json_pack("{s:s, s:s, s:b}", "object", "webhook_endpoint", "id", c->no, "removed", 1);
        c->status = 200;
    }
}

static void rotate_endpoint(struct po_api_call *c)
{
    char err[PO_ERRBUF_SIZE] = "", secret[PO_WEBHOOK_SECRET_SIZE];
    if (!po_api_acquire(c)) {
        po_api_unavailable(c);
        return;
    }
    po_err rc = po_webhook_rotate(c->s, c->ctx->gw->cfg->master_key, c->tenant, c->no, secret, err,
                                  sizeof err);
    if (rc == PO_ERR_NOT_FOUND)
        po_api_fail(c, 404, "endpoint_not_found", err, NULL);
    else if (rc)
        po_api_unavailable(c);
    else
        endpoint_answer(c, 200, c->no, secret);
    po_secure_zero(secret, sizeof secret);
}

const struct po_api_route po_api_events = {get_events, NULL, NULL};
const struct po_api_route po_api_endpoints_get = {get_endpoints, NULL, NULL};
const struct po_api_route po_api_endpoint_create = {create_endpoint, NULL, NULL};
const struct po_api_route po_api_endpoint_remove = {remove_endpoint, NULL, NULL};
const struct po_api_route po_api_endpoint_rotate = {rotate_endpoint, NULL, NULL};
const struct po_api_route po_api_order_get = {get_order, NULL, NULL};
const struct po_api_route po_api_orders = {get_orders, NULL, NULL};
const struct po_api_route po_api_refund_get = {get_refund, NULL, NULL};
const struct po_api_route po_api_balances = {get_balances, NULL, NULL};
const struct po_api_route po_api_alerts = {get_alerts, NULL, NULL};
const struct po_api_route po_api_journal = {get_journal, NULL, NULL};
