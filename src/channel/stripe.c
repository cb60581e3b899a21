/*
 * stripe.c — Stripe-style webhooks (HMAC-SHA256).
 *
 * Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…]; the signed payload is
 * "<t>.<raw body>"; any v1 may match any of the tenant's secrets (rotation),
 * compared in constant time; t must be within the tolerance (default 300 s)
 * of now, in either direction.
 *
 * Events (data.object):
 *   payment_intent.succeeded  PAY_SUCCESS    id, amount_received, currency,
 *                                            metadata.out_trade_no
 *   refund.created / refund.updated / charge.refund.updated  (a Refund object:
 *                                            id re_…, amount, currency, status,
 *                                            metadata.out_trade_no / out_refund_no)
 *       status succeeded          REFUND_SUCCESS
 *       status failed / canceled  REFUND_CLOSED
 *       pending / requires_action ignored (not final)
 * When the tenant set --account-id / --livemode, an event must name that
 * account ("account") and mode ("livemode"), else it is a merchant
 * mismatch (acknowledged, alerted, not applied).
 * Keyed by the object id (pi_…, re_…). charge.refunded is verified and
 * ignored: a Charge names the charge, so two partial refunds of one charge
 * would share a key and the second would look like a conflicting duplicate.
 * Other types are verified and ignored. A verified event of a type we act
 * on that cannot be mapped (no metadata.out_trade_no, a currency payonce
 * does not know, no amount) is acknowledged and recorded once as an
 * unmappable_event alert keyed by Stripe's event id (evt_…); only a bad
 * signature or a malformed request is a 4xx.
 */
#include "channel_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool hex32(const char *s, size_t len, unsigned char out[32])
{
    if (len != 64)
        return false;
    for (size_t i = 0; i < 32; i++) {
        unsigned v = 0;
        for (int k = 0; k < 2; k++) {
            char c = s[2 * i + (size_t)k];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0)
                return false;
            v = v * 16 + (unsigned)d;
        }
        out[i] = (unsigned char)v;
    }
    return true;
}

static bool verify(const struct po_channel_account *a, const struct po_notify_req *req,
                   struct po_notify_result *out, bool *nomem)
{
    const char *h = req->header(req->hctx, "Stripe-Signature");
    if (!h || !*h || strlen(h) > PO_SIG_HEADER_MAX) {
        po_notify_reject(out, PO_R_MISSING_HEADER, "Stripe-Signature is required");
        return false;
    }
    char ts[24] = "";
    unsigned char v1[PO_SIGNATURES_MAX][32];
    int nv1 = 0;
    for (const char *p = h; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && isspace((unsigned char)*p)) {
            p++;
            len--;
        }
        if (len > 2 && p[0] == 't' && p[1] == '=' && len - 2 < sizeof ts) {
            memcpy(ts, p + 2, len - 2);
            ts[len - 2] = '\0';
        } else if (len > 3 && strncmp(p, "v1=", 3) == 0 && nv1 < PO_SIGNATURES_MAX) {
            if (hex32(p + 3, len - 3, v1[nv1]))
                nv1++;
        }
        p = end ? end + 1 : p + len;
    }
    if (!po_notify_window_ok(a, ts, req->now_unix, out))
        return false;
    if (nv1 == 0) {
        po_notify_reject(out, PO_R_BAD_SIGNATURE, "Stripe-Signature has no v1 signature");
        return false;
    }
    size_t tl = strlen(ts);
    char *msg = malloc(tl + 1 + req->body_len);
    if (!msg) {
        *nomem = true;
        return false;
    }
    memcpy(msg, ts, tl);
    msg[tl] = '.';
    memcpy(msg + tl + 1, req->body, req->body_len);
    bool match = false;
    const struct po_stripe_account *st = po_stripe_of(a);
    for (int s = 0; s < st->nsecrets; s++) {
        unsigned char mac[32];
        if (po_hmac_sha256(st->secrets[s].v, st->secrets[s].len, msg, tl + 1 + req->body_len,
                           mac)) {
            free(msg);
            *nomem = true;
            return false;
        }
        for (int i = 0; i < nv1; i++)
            match |= po_ct_equal(mac, v1[i], 32); /* no early exit */
    }
    free(msg);
    if (!match)
        po_notify_reject(out, PO_R_BAD_SIGNATURE, "no v1 signature matches a webhook secret");
    return match;
}

/* Verified but not mappable: keyed by Stripe's event id, so each such event
 * is recorded once however often Stripe resends it. */
static void unmapped(struct po_notify_result *out, const char *evt_id, const char *why)
{
    struct po_event *ev = &out->ev;
    char *key = po_event_is_refund(ev->type) ? ev->channel_refund_id : ev->channel_txn_id;
    size_t cap =
        po_event_is_refund(ev->type) ? sizeof ev->channel_refund_id : sizeof ev->channel_txn_id;
    PO_ASSERT(po_set_field(key, cap, evt_id));
    po_notify_unmapped(out, "Stripe event %s: %s", evt_id, why);
}

/* The event's account ("account", set on Connect events) and mode
 * ("livemode") against the tenant's, where the tenant configured them: a
 * signature proves only that some holder of the secret sent it, and a
 * secret two tenants share (one Stripe endpoint for both, a test key reused
 * in live) would otherwise let one tenant's event credit the other's order
 * of the same number. A mismatch is a business check: acknowledged, not
 * credited, alerted (merchant_mismatch). */
static void check_account(const struct po_channel_account *account, json_t *root,
                          struct po_notify_result *out)
{
    const struct po_stripe_account *a = po_stripe_of(account);
    const char *acct = po_json_str(root, "account");
    json_t *live = json_object_get(root, "livemode");
    bool acct_ok = !a->account[0] || (acct && strcmp(acct, a->account) == 0);
    bool live_ok =
        a->livemode < 0 || (json_is_boolean(live) && json_is_true(live) == (a->livemode == 1));
    if (acct_ok && live_ok)
        return;
    po_notify_mismatch(out, PO_R_MERCHANT_MISMATCH,
                       "Stripe event for account %.40s livemode %s, tenant has account %.40s"
                       " livemode %s",
                       acct ? acct : "-",
                       json_is_boolean(live) ? (json_is_true(live) ? "true" : "false") : "-",
                       a->account[0] ? a->account : "(any)",
                       a->livemode < 0 ? "(any)"
                       : a->livemode   ? "true"
                                       : "false");
}

void po_stripe_event_map(const struct po_channel_account *a, json_t *root,
                         struct po_notify_result *out)
{
    const char *type = po_json_str(root, "type"), *evt_id = po_json_str(root, "id");
    json_t *obj = json_object_get(json_object_get(root, "data"), "object");
    json_t *meta = json_object_get(obj, "metadata");
    struct po_event *ev = &out->ev;
    if (!type || !json_is_object(obj) || !evt_id || !po_id_valid(evt_id, PO_TXN_ID_MAX)) {
        po_notify_reject(out, PO_R_MALFORMED_BODY, "id, type or data.object missing");
        goto out;
    }
    po_notify_event_init(a, out);
    bool pay = strcmp(type, "payment_intent.succeeded") == 0;
    bool robj = strcmp(type, "refund.created") == 0 || strcmp(type, "refund.updated") == 0 ||
                strcmp(type, "charge.refund.updated") == 0;
    if (strcmp(type, "charge.refunded") == 0) {
        /* A Charge names the charge, not the refund: two partial refunds of
         * one charge would share its key. Refunds come from the Refund
         * events (docs/operations.md lists what to subscribe to). */
        po_notify_ignore(out, "charge.refunded: refunds are applied from refund.* events");
        goto out;
    }
    if (!pay && !robj) {
        po_notify_ignore(out, "event type %.40s: nothing to apply", type);
        goto out;
    }
    const char *rstatus = robj ? po_json_str(obj, "status") : NULL;
    if (robj && rstatus &&
        (strcmp(rstatus, "pending") == 0 || strcmp(rstatus, "requires_action") == 0)) {
        po_notify_ignore(out, "refund %.20s: not final", rstatus);
        goto out;
    }
    bool succeeded = rstatus && strcmp(rstatus, "succeeded") == 0;
    ev->type = pay ? PO_EV_PAY_SUCCESS : succeeded ? PO_EV_REFUND_SUCCESS : PO_EV_REFUND_CLOSED;
    /* From here the event is Stripe's own and verified: what cannot be
     * mapped is acknowledged and recorded, never answered 4xx (Stripe would
     * retry it for days and may disable the endpoint). */
    if (robj && (!rstatus || (strcmp(rstatus, "succeeded") != 0 && strcmp(rstatus, "failed") != 0 &&
                              strcmp(rstatus, "canceled") != 0))) {
        unmapped(out, evt_id, "refund status missing or unknown");
        goto out;
    }
    json_t *amt = json_object_get(obj, pay ? "amount_received" : "amount");
    const char *cur = po_json_str(obj, "currency"), *id = po_json_str(obj, "id");
    if (json_is_integer(amt) && po_amount_valid(json_integer_value(amt)))
        ev->amount_minor = json_integer_value(amt);
    if (cur && strlen(cur) == 3) {
        for (int i = 0; i < 3; i++)
            ev->currency[i] = (char)toupper((unsigned char)cur[i]);
        ev->currency[3] = '\0';
    }
    (void)po_set_field(ev->out_trade_no, sizeof ev->out_trade_no,
                       po_json_str(meta, "out_trade_no"));
    if (!ev->amount_minor || !po_currency_valid(ev->currency) || !id || !ev->out_trade_no[0]) {
        char why[128];
        (void)snprintf(why, sizeof why, "%s missing or not usable",
                       !ev->out_trade_no[0] ? "metadata.out_trade_no"
                       : !id                ? "data.object.id"
                       : !ev->amount_minor  ? "the amount"
                                            : "the currency");
        if (!po_currency_valid(ev->currency))
            ev->currency[0] = '\0';
        unmapped(out, evt_id, why);
        goto out;
    }
    bool id_ok = pay ? po_set_field(ev->channel_txn_id, sizeof ev->channel_txn_id, id)
                     : po_set_field(ev->channel_refund_id, sizeof ev->channel_refund_id, id);
    if (!id_ok || (!pay && !po_set_field(ev->out_refund_no, sizeof ev->out_refund_no,
                                         po_json_str(meta, "out_refund_no")))) {
        unmapped(out, evt_id, id_ok ? "metadata.out_refund_no missing" : "data.object.id too long");
        goto out;
    }
    char verr[PO_ERRBUF_SIZE];
    if (po_event_validate(ev, verr, sizeof verr)) {
        ev->channel_txn_id[0] = ev->channel_refund_id[0] = '\0';
        ev->out_trade_no[0] = '\0';
        unmapped(out, evt_id, verr);
        goto out;
    }
    check_account(a, root, out);
out:
    return;
}

static po_err parse(const struct po_channel_account *a, const struct po_notify_req *req,
                    struct po_notify_result *out)
{
    bool nomem = false;
    if (!verify(a, req, out, &nomem))
        return nomem ? PO_ERR_NOMEM : PO_OK;
    json_t *root = NULL;
    po_err rc =
        po_notify_json(req->body, req->body_len, out, PO_R_MALFORMED_BODY, "the body", &root);
    if (rc || !root)
        return rc;
    po_stripe_event_map(a, root, out);
    json_decref(root);
    return PO_OK;
}

/* ---- the account ---- */

static po_err account_build(const struct po_account_input *in, json_t *cfg, char *err,
                            size_t errcap)
{
    const char *files[PO_WEBHOOK_SECRETS_MAX + 1];
    int n = in->opt_all(in->ctx, "webhook-secret-file", files, PO_WEBHOOK_SECRETS_MAX + 1);
    if (n == 0 || n > PO_WEBHOOK_SECRETS_MAX) {
        po_errf(err, errcap, "give 1-%d --webhook-secret-file", PO_WEBHOOK_SECRETS_MAX);
        return PO_ERR_INVALID;
    }
    json_t *list = json_array();
    for (int i = 0; i < n; i++) {
        size_t len = 0;
        char *sec = po_account_read_file(files[i], true, &len, err, errcap);
        bool read = sec != NULL; /* else err says why: a missing file is named as one */
        char field[48];
        PO_ASSERT(po_fmt(field, sizeof field, "webhook_secret/%d", i) == PO_OK);
        json_t *s = sec && len > 0 && len <= PO_SECRET_MAX
                        ? po_account_seal(in, "stripe", field, sec, len)
                        : NULL;
        if (sec)
            po_secure_zero(sec, len);
        free(sec);
        if (!s) {
            if (read)
                po_errf(err, errcap, "%s: a secret of 1-%d bytes is required", files[i],
                        PO_SECRET_MAX);
            json_decref(list);
            return PO_ERR_IO;
        }
        json_array_append_new(list, s);
    }
    json_object_set_new(cfg, "webhook_secrets", list);
    const char *acct = in->opt(in->ctx, "account-id"), *live = in->opt(in->ctx, "livemode");
    if (acct && (!po_id_valid(acct, PO_ID_MAX) || strncmp(acct, "acct_", 5) != 0)) {
        po_errf(err, errcap, "--account-id: a Stripe account id (acct_…)");
        return PO_ERR_INVALID;
    }
    if (live && strcmp(live, "true") != 0 && strcmp(live, "false") != 0) {
        po_errf(err, errcap, "--livemode: true or false");
        return PO_ERR_INVALID;
    }
    if (acct)
        json_object_set_new(cfg, "account_id", json_string(acct));
    if (live)
        json_object_set_new(cfg, "livemode", json_boolean(strcmp(live, "true") == 0));
    /* The secret (or restricted) API key that lets payonce call Stripe:
     * order query, cancel, refunds. */
    const char *kf = in->opt(in->ctx, "api-key-file");
    if (kf) {
        size_t len = 0;
        char *key = po_account_read_file(kf, true, &len, err, errcap);
        if (!key)
            return PO_ERR_IO;
        while (len && (key[len - 1] == '\n' || key[len - 1] == '\r'))
            key[--len] = '\0';
        bool ok =
            len > 8 && len <= PO_SECRET_MAX &&
            (strncmp(key, "sk_", 3) == 0 || strncmp(key, "rk_", 3) == 0) &&
            strspn(key, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == len;
        json_t *s = ok ? po_account_seal(in, "stripe", "api_key", key, len) : NULL;
        po_secure_zero(key, len);
        free(key);
        if (!s) {
            po_errf(err, errcap, "%s: a Stripe secret or restricted key (sk_… or rk_…)", kf);
            return PO_ERR_IO;
        }
        json_object_set_new(cfg, "api_key", s);
    }
    return po_account_build_api(in, "stripe", false, cfg, err, errcap);
}

static po_err account_load(json_t *root, const unsigned char *master, struct po_channel_account *a,
                           char *err, size_t errcap)
{
    struct po_stripe_account *st = po_account_priv_new(a, sizeof *st);
    if (!st)
        return PO_ERR_NOMEM;
    json_t *list = json_object_get(root, "webhook_secrets");
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (st->nsecrets >= PO_WEBHOOK_SECRETS_MAX)
            break;
        char field[48];
        PO_ASSERT(po_fmt(field, sizeof field, "webhook_secret/%zu", i) == PO_OK);
        po_err rc =
            po_account_unseal(a, field, json_string_value(v), master, st->secrets[st->nsecrets].v,
                              sizeof st->secrets[0].v, &st->secrets[st->nsecrets].len, err, errcap);
        if (rc)
            return rc;
        st->nsecrets++;
    }
    if (st->nsecrets == 0) {
        po_errf(err, errcap, "no webhook secret");
        return PO_ERR_INVALID;
    }
    json_t *live = json_object_get(root, "livemode");
    st->livemode = json_is_boolean(live) ? json_is_true(live) : -1;
    if (!po_set_field(st->account, sizeof st->account, po_json_str(root, "account_id")))
        st->account[0] = '\0';
    const char *key = po_json_str(root, "api_key");
    if (key) {
        size_t len = 0;
        po_err rc = po_account_unseal(a, "api_key", key, master, (unsigned char *)st->api_key,
                                      sizeof st->api_key - 1, &len, err, errcap);
        if (rc)
            return rc;
        st->api_key[len] = '\0';
    }
    po_err rc = po_account_load_api(root, master, a, "https://api.stripe.com", false, err, errcap);
    a->api_ready = !rc && st->api_key[0] && a->api_base_url[0];
    return rc;
}

static void account_free(void *priv)
{
    po_account_priv_free(priv, sizeof(struct po_stripe_account));
}

static void ack(bool success, unsigned fail_status, const char *msg, struct po_ack *out)
{
    out->status = success ? 200 : fail_status;
    out->content_type = "application/json";
    if (success)
        (void)snprintf(out->body, sizeof out->body, "{\"received\":true}");
    else
        (void)snprintf(out->body, sizeof out->body, "{\"error\":\"%s\"}", msg);
}

static const struct po_channel_option options[] = {
    {"webhook-secret-file", "a webhook signing secret (repeatable, for rotation; sealed)"},
    {"timestamp-window", "seconds a webhook's t= may be off (default 300)"},
    {"account-id", "the Stripe account (acct_…) every event must name (Connect's account)"},
    {"livemode", "true or false: every event's livemode must be this"},
    {"api-key-file", "the secret or restricted API key (sk_…, rk_…) that calls Stripe (sealed)"},
    {"api-base-url", "Stripe's API base URL (https://; http:// only on loopback)"},
    {NULL, NULL},
};

/* The balance transactions listed are the API key's own account's: there
 * is no merchant id in them to compare. */
static const char *bill_merchant(const struct po_channel_account *a)
{
    (void)a;
    return "";
}

static const char *const stripe_pay_methods[] = {"payment_intent", NULL};

/* Stripe's field rules for what an order sends: an amount of at most
 * eight digits (99999999: $999,999.99); metadata keys of at most 40
 * characters and values of at most 500 (out_trade_no, at most 64, always
 * fits). */
static const char *order_rule(const struct po_pay_request *r, const char **param)
{
    if (r->amount > 99999999) {
        *param = "amount";
        return "amount: at most 99999999 minor units, eight digits (Stripe)";
    }
    return NULL;
}

const struct po_channel_ops po_channel_stripe = {
    .name = "stripe",
    .title = "Stripe-style webhooks (HMAC-SHA256)",
    .options = options,
    .account_build = account_build,
    .account_load = account_load,
    .account_free = account_free,
    .parse = parse,
    .ack = ack,
    .refund_submit = po_stripe_refund_submit,
    .manual_refunds_without_key = true,
    .order_query = po_stripe_order_query,
    .order_id_prefix = "pi_",
    .pay_methods = stripe_pay_methods,
    .pay_create = po_stripe_pay_create,
    .pay_notify_url = false,
    .order_rule = order_rule,
    .order_close = po_stripe_order_close,
    .events_since = po_stripe_events_since,
    .bill_parse = po_stripe_bill_parse,
    .bill_merchant = bill_merchant,
    .bill_fetch = po_stripe_bill_fetch,
    .bill_tz_s = 0,             /* Stripe's days are UTC */
    .bill_publish_s = 2 * 3600, /* the day's balance transactions, complete */
    .refund_query = po_stripe_refund_query,
};
