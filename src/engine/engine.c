/*
 * engine.c — one event in its savepoint, the three layers statement by
 * statement (the batch driver in batch.c calls it for every event that
 * does not take the set-based path, and for all of them when that path
 * fails).
 *
 * Statement order for a payment, inside the event's savepoint:
 *   SELECT order            business checks (reject -> alert, no key taken)
 *   SELECT notify_log       layer 1
 *   UPDATE … AND status=    layer 2 (affected rows is the referee)
 *   INSERT notify_log       layer 3 (unique (tenant_id, idem_key))
 *   INSERT journal/posting  ledger (journal is unique on the same key)
 * and, once per transaction, the balance deltas before COMMIT.
 *
 * Invariant: an event's outcome is reported as applied, duplicate, rejected
 * or suspense only if COMMIT succeeded; otherwise every event of the batch
 * is `retry` and nothing of the batch is in the database.
 */
#include "objects.h"
#include "alert.h"
#include "engine_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool po_engine_layer_on(const struct po_engine_cfg *cfg, unsigned layer_bit)
{
#ifdef PO_MUTANT_DOUBLE_CREDIT /* tests' payonce_mutant only: see wechatpay.c */
    if (layer_bit & (PO_ENGINE_NO_LAYER1 | PO_ENGINE_NO_LAYER2))
        return false;
#endif
    return !cfg || !(cfg->disabled_layers & layer_bit);
}

static bool layer_on(const struct ev_ctx *c, unsigned layer_bit)
{
    return po_engine_layer_on(c->cfg, layer_bit);
}

void po_engine_outcome(struct po_outcome *o, enum po_outcome_kind k, int layer,
                       enum po_reason reason)
{
    o->kind = k;
    o->layer = layer;
    o->reason = reason;
}

static void set_outcome(struct po_outcome *o, enum po_outcome_kind k, int layer,
                        enum po_reason reason)
{
    po_engine_outcome(o, k, layer, reason);
}

void po_engine_ctx(struct ev_ctx *c, struct po_store *s, const struct po_engine_cfg *cfg,
                   const struct po_event *ev, const char *now, struct po_ledger_batch *deltas)
{
    memset(c, 0, sizeof *c);
    c->s = s;
    c->cfg = cfg;
    c->ev = ev;
    c->now = now;
    c->deltas = deltas;
    po_err rc = po_event_key(ev, c->key, sizeof c->key);
    PO_ASSERT(rc == PO_OK); /* validated fields fit PO_KEY_SIZE */
}

/* The human-readable detail stored with an alert. */
static void detailf(struct ev_ctx *c, const char *fmt, ...) PO_PRINTF(2, 3);
static void detailf(struct ev_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(c->detail, sizeof c->detail, fmt, ap);
    va_end(ap);
}

static po_err reject(struct po_outcome *o, enum po_reason reason)
{
    set_outcome(o, PO_OUT_REJECTED, 0, reason);
    return PO_OK;
}

static po_err query(struct ev_ctx *c, const char *sql, const struct po_param *p, int n,
                    struct po_rows *rows)
{
    return po_store_exec(c->s, sql, p, n, rows, NULL, c->err, sizeof c->err);
}

static po_err change(struct ev_ctx *c, const char *sql, const struct po_param *p, int n,
                     int64_t *changes)
{
    return po_store_exec(c->s, sql, p, n, NULL, changes, c->err, sizeof c->err);
}

/* Layer 1: is the key already in the processed-record table? When it is,
 * *out_same says whether the stored record names the same order and amount:
 * a key is only a duplicate of the same business event. */
static po_err layer1_seen(struct ev_ctx *c, bool *out_seen, bool *out_same)
{
    struct po_rows r;
    struct po_param p[] = {PO_TEXT(c->ev->tenant), PO_TEXT(c->key)};
    po_err rc = query(c,
                      "SELECT COALESCE(out_trade_no, ''), amount, currency FROM notify_log"
                      " WHERE tenant_id = ? AND idem_key = ?",
                      p, PO_NELEM(p), &r);
    if (rc)
        return rc;
    *out_seen = r.nrows > 0;
    *out_same = true;
    if (*out_seen) {
        int64_t amount = 0;
        rc = po_rows_i64(&r, 0, 1, &amount);
        *out_same = strcmp(po_rows_get(&r, 0, 0), c->ev->out_trade_no) == 0 &&
                    amount == c->ev->amount_minor;
        if (!*out_same) {
            char was[PO_MONEY_MAX], now[PO_MONEY_MAX];
            po_money_format(amount, po_rows_get(&r, 0, 2), was, sizeof was);
            po_money_format(c->ev->amount_minor, c->ev->currency, now, sizeof now);
            detailf(c,
                    "%s was recorded for order %s amount %s; this event names order %s"
                    " amount %s",
                    c->key, po_rows_get(&r, 0, 0), was, c->ev->out_trade_no, now);
        }
    }
    po_rows_free(&r);
    return rc;
}

/* Layer 1 with its test switch and the post-lookup hook. A key already
 * recorded for other business fields is not a duplicate but a conflict:
 * rejected with an alert, never silently acked. */
static po_err layer1(struct ev_ctx *c, struct po_outcome *o, bool *out_dup)
{
    *out_dup = false;
    if (layer_on(c, PO_ENGINE_NO_LAYER1)) {
        bool same = true;
        po_err rc = layer1_seen(c, out_dup, &same);
        if (rc)
            return rc;
        if (*out_dup) {
            if (same)
                set_outcome(o, PO_OUT_DUPLICATE, c->conflicted ? 3 : 1, PO_R_NONE);
            else
                (void)reject(o, PO_R_CONFLICTING_DUPLICATE);
            return PO_OK;
        }
    }
    if (c->cfg && c->cfg->after_layer1)
        c->cfg->after_layer1(c->cfg->hook_ctx, c->ev);
    return PO_OK;
}

/* Layer 3: claims the key. A twin's committed row makes this fail with
 * PO_ERR_CONFLICT, which the batch loop turns into a duplicate. */
static po_err record(struct ev_ctx *c, const char *outcome, enum po_reason reason)
{
    const struct po_event *ev = c->ev;
    struct po_param p[PO_RECORD_COLUMNS] = {
        PO_TEXT(ev->tenant),
        PO_TEXT(c->key),
        PO_TEXT(ev->channel),
        PO_TEXT(po_event_type_name(ev->type)),
        PO_TEXT(po_source_name(ev->source)),
        PO_TEXT(outcome),
        reason != PO_R_NONE ? PO_TEXT(po_reason_name(reason)) : PO_NULLP,
        PO_TEXT(ev->out_trade_no),
        PO_I64(ev->amount_minor),
        PO_TEXT(ev->currency),
    };
    struct po_rowset rs = {PO_RECORD_COLUMNS, 1, p};
    return po_engine_record_rows(c->s, &rs, c->now, c->err, sizeof c->err);
}

/* Durable alert; a retried bad event finds its alert already there. Its
 * log line names the event as a callback's do: tenant, channel, key and the
 * outcome (NULL: not a callback's, e.g. reconciliation's missing_from_bill). */
static po_err alert(struct ev_ctx *c, enum po_reason reason_code, const char *outcome)
{
    const char *reason = po_reason_name(reason_code);
    const struct po_event *ev = c->ev;
    char akey[PO_KEY_SIZE + PO_REASON_SIZE + 2], context[PO_ID_MAX + PO_KEY_SIZE + 96];
    po_err rc = po_fmt(akey, sizeof akey, "%s|%s", c->key, reason);
    PO_ASSERT(rc == PO_OK);
    (void)snprintf(context, sizeof context, "tenant %s, channel %s, key %s, outcome %s", ev->tenant,
                   ev->channel, c->key, outcome ? outcome : "-");
    struct po_alert_new a = {.tenant = ev->tenant,
                             .key = akey,
                             .reason = reason,
                             .idem_key = c->key,
                             .event_type = po_event_type_name(ev->type),
                             .source = po_source_name(ev->source),
                             .out_trade_no = ev->out_trade_no,
                             .amount = ev->amount_minor,
                             .currency = ev->currency,
                             .detail = c->detail,
                             .log_context = context};
    return po_alert_raise(c->s, &a, c->now, NULL, c->err, sizeof c->err);
}

static void two_lines(struct po_journal *j, const char *debit, const char *credit, int64_t amount)
{
    PO_ASSERT(po_strcpy(j->lines[0].account, sizeof j->lines[0].account, debit) == PO_OK);
    PO_ASSERT(po_strcpy(j->lines[1].account, sizeof j->lines[1].account, credit) == PO_OK);
    j->lines[0].amount_minor = amount;
    j->lines[1].amount_minor = -amount;
    j->nlines = 2;
}

static po_err post(struct ev_ctx *c, const char *kind, const char *debit, const char *credit)
{
    const struct po_event *ev = c->ev;
    struct po_journal j = {
        .tenant = ev->tenant,
        .idem_key = c->key,
        .kind = kind,
        .out_trade_no = ev->out_trade_no,
        .out_refund_no = ev->out_refund_no[0] ? ev->out_refund_no : NULL,
        .currency = ev->currency,
        .created_at = c->now,
    };
    two_lines(&j, debit, credit, ev->amount_minor);
    return po_ledger_post(c->s, &j, c->deltas, c->err, sizeof c->err);
}

void po_engine_event_payload(const struct po_event *ev, const char *merchant, enum po_reason reason,
                             struct po_outbox_json *j)
{
    bool refund = ev->out_refund_no[0] != '\0', share = ev->type == PO_EV_PROFIT_SHARE_RESULT;
    po_outbox_json_init(j);
    po_outbox_json_str(j, "object", refund ? "refund" : share ? "profit_share" : "payment");
    po_outbox_json_str(j, "out_trade_no", ev->out_trade_no);
    if (refund) {
        po_outbox_json_str(j, "out_refund_no", ev->out_refund_no);
        po_outbox_json_str(j, "channel_refund_id", ev->channel_refund_id);
    }
    if (share)
        po_outbox_json_str(j, "receiver", ev->receiver);
    po_outbox_json_str(j, "merchant", merchant);
    po_outbox_json_str(j, "channel", ev->channel);
    po_outbox_json_str(j, "channel_txn_id", ev->channel_txn_id);
    po_outbox_json_i64(j, "amount", ev->amount_minor);
    po_outbox_json_str(j, "currency", ev->currency);
    po_outbox_json_str(j, "source", po_source_name(ev->source));
    po_outbox_json_str(j, "occurred_at", ev->occurred_at);
    if (reason != PO_R_NONE)
        po_outbox_json_str(j, "reason", po_reason_name(reason));
}

/* The outbox row of this event's effect, in its savepoint, at seq among
 * its order's events (0: the next, taken now). */
static po_err emit_at(struct ev_ctx *c, const char *type, const char *merchant,
                      enum po_reason reason, int64_t seq)
{
    struct po_outbox_json *j = malloc(sizeof *j);
    if (!j)
        return PO_ERR_NOMEM;
    po_engine_event_payload(c->ev, merchant, reason, j);
    if (c->suspense_key[0])
        po_outbox_json_str(j, "suspense_key", c->suspense_key);
    po_err rc = po_outbox_put_at(c->s, c->ev->tenant, c->key, type, c->ev->out_trade_no, seq,
                                 po_outbox_json_end(j), c->now, c->err, sizeof c->err);
    free(j);
    return rc;
}

static po_err emit(struct ev_ctx *c, const char *type, const char *merchant, enum po_reason reason)
{
    return emit_at(c, type, merchant, reason, 0);
}

void po_engine_account(char *buf, size_t cap, const char *prefix, const char *id)
{
    PO_ASSERT(po_fmt(buf, cap, "%s:%s", prefix, id) == PO_OK);
}

#define account po_engine_account

/* Illegal transition: the money is real, so it is recorded (the key is
 * taken), parked in suspense and raised to operators. money_in says whether
 * the channel received (payment) or paid out (refund) the amount. */
static po_err suspense(struct ev_ctx *c, struct po_outcome *o, enum po_reason reason, bool money_in)
{
    char clearing[PO_ACCOUNT_SIZE];
    account(clearing, sizeof clearing, "channel_clearing", c->ev->channel);
    po_err rc = record(c, "suspense", reason);
    if (!rc)
        rc =
            post(c, "SUSPENSE", money_in ? clearing : "suspense", money_in ? "suspense" : clearing);
    if (!rc)
        rc = emit(c, money_in ? "payment.suspense" : "refund.suspense", NULL, reason);
    if (!rc)
        rc = alert(c, reason, "suspense");
    if (!rc)
        set_outcome(o, PO_OUT_SUSPENSE, 0, reason);
    return rc;
}

enum po_reason po_engine_order_check(const struct po_event *ev, const char *merchant,
                                     int64_t amount, const char *currency, const char *channel,
                                     bool amount_exact)
{
    if (ev->merchant[0] && strcmp(ev->merchant, merchant) != 0)
        return PO_R_MERCHANT_MISMATCH;
    if (channel[0] && strcmp(channel, ev->channel) != 0)
        return PO_R_CHANNEL_MISMATCH;
    if (strcmp(currency, ev->currency) != 0)
        return PO_R_CURRENCY_MISMATCH;
    if (amount_exact ? amount != ev->amount_minor : ev->amount_minor > amount)
        return PO_R_AMOUNT_MISMATCH;
    return PO_R_NONE;
}

/* The checks every event against an order shares. Returns true and sets the
 * rejection, with its detail, when one fails. */
static bool order_mismatch(struct ev_ctx *c, struct po_outcome *o, const char *merchant,
                           int64_t amount, const char *currency, const char *channel,
                           bool amount_exact)
{
    const struct po_event *ev = c->ev;
    enum po_reason reason =
        po_engine_order_check(ev, merchant, amount, currency, channel, amount_exact);
    switch (reason) {
    case PO_R_NONE:
        return false;
    case PO_R_MERCHANT_MISMATCH:
        detailf(c, "event merchant %s, order merchant %s", ev->merchant, merchant);
        break;
    case PO_R_CHANNEL_MISMATCH:
        detailf(c, "event channel %s, order channel %s", ev->channel, channel);
        break;
    case PO_R_CURRENCY_MISMATCH:
        detailf(c, "event %s, expected %s", ev->currency, currency);
        break;
    default: { /* for people: major units (the alert also carries the amount) */
        char got[PO_MONEY_MAX], want[PO_MONEY_MAX];
        po_money_format(ev->amount_minor, ev->currency, got, sizeof got);
        po_money_format(amount, currency, want, sizeof want);
        detailf(c, "event %s, expected %s", got, want);
        break;
    }
    }
    (void)reject(o, reason);
    return true;
}

/* Where load_row puts one column of its row: a text field and its size
 * (dst NULL: the amount's column, 1). */
struct text_field {
    char *dst;
    size_t cap;
};

/* The one row of the event's tenant and key read by sql: its column 1 (an
 * integer) into *amount, every other column i into f[i] (nf of them, one a
 * column). *found false when there is none; a column that is NULL, not an
 * integer where it must be, or too long for its field: PO_ERR_STORE. */
static po_err load_row(struct ev_ctx *c, const char *sql, const char *key, int64_t *amount,
                       const struct text_field *f, int nf, bool *found)
{
    struct po_rows r;
    struct po_param p[] = {PO_TEXT(c->ev->tenant), PO_TEXT(key)};
    po_err rc = query(c, sql, p, PO_NELEM(p), &r);
    if (rc)
        return rc;
    *found = r.nrows == 1;
    if (*found) {
        PO_ASSERT(r.ncols == nf && !f[1].dst);
        rc = po_rows_i64(&r, 0, 1, amount);
        for (int i = 0; !rc && i < nf; i++)
            if (f[i].dst && po_strcpy(f[i].dst, f[i].cap, po_rows_get(&r, 0, i)))
                rc = PO_ERR_STORE;
    }
    po_rows_free(&r);
    return rc;
}

struct order_row {
    char merchant[PO_ID_MAX + 1];
    int64_t amount;
    char currency[4];
    char status[16];
    char txn[PO_TXN_ID_MAX + 1];
    char channel[PO_CHANNEL_SIZE];
};

static po_err load_order(struct ev_ctx *c, struct order_row *out, bool *found)
{
    const struct text_field f[] = {
        {out->merchant, sizeof out->merchant}, {NULL, 0},
        {out->currency, sizeof out->currency}, {out->status, sizeof out->status},
        {out->txn, sizeof out->txn},           {out->channel, sizeof out->channel}};
    return load_row(c,
                    "SELECT merchant_id, amount, currency, status, COALESCE(channel_txn_id, ''),"
                    " COALESCE(channel, '') FROM pay_order WHERE tenant_id = ? AND"
                    " out_trade_no = ?",
                    c->ev->out_trade_no, &out->amount, f, PO_NELEM(f), found);
}

/* Loads the event's order and runs the business checks against it; *decided
 * is set when the outcome (a rejection) is already known. */
static po_err checked_order(struct ev_ctx *c, struct po_outcome *o, struct order_row *ord,
                            bool amount_exact, bool *decided)
{
    bool found = false;
    *decided = true;
    po_err rc = load_order(c, ord, &found);
    if (rc)
        return rc;
    if (!found) {
        detailf(c, "no order %s", c->ev->out_trade_no);
        return reject(o, PO_R_UNKNOWN_ORDER);
    }
    if (order_mismatch(c, o, ord->merchant, ord->amount, ord->currency, ord->channel, amount_exact))
        return PO_OK;
    *decided = false;
    return PO_OK;
}

/* A refused payment an operator is refunding (park_in_suspense): recorded
 * with its own key, the money parked in suspense for the refund to take it
 * back from; its alert is there already. */
static po_err park(struct ev_ctx *c, struct po_outcome *o, enum po_reason reason)
{
    bool dup = false;
    char clearing[PO_ACCOUNT_SIZE];
    po_err rc = layer1(c, o, &dup);
    if (rc || dup)
        return rc;
    account(clearing, sizeof clearing, "channel_clearing", c->ev->channel);
    rc = record(c, "suspense", reason);
    if (!rc)
        rc = post(c, "SUSPENSE", clearing, "suspense");
    if (!rc)
        rc = emit(c, "payment.suspense", NULL, reason);
    if (!rc)
        set_outcome(o, PO_OUT_SUSPENSE, 0, reason);
    return rc;
}

static po_err apply_payment(struct ev_ctx *c, struct po_outcome *o)
{
    const struct po_event *ev = c->ev;
    struct order_row ord;
    bool found = false, dup = false, decided = false;
    int64_t changes = 0;
    po_err rc = checked_order(c, o, &ord, true, &decided);
    if (!rc && decided && ev->park_in_suspense && o->reason != PO_R_UNKNOWN_ORDER)
        return park(c, o, o->reason);
    if (!rc && decided && o->reason != PO_R_UNKNOWN_ORDER) {
        /* Refused again — unless an operator has since parked it to refund
         * it (its key is recorded): then this is a redelivery. */
        bool seen = false, same = true;
        char why[PO_DETAIL_SIZE];
        memcpy(why, c->detail, sizeof why);
        rc = layer1_seen(c, &seen, &same);
        if (!rc && seen && same)
            set_outcome(o, PO_OUT_DUPLICATE, 1, PO_R_NONE);
        memcpy(c->detail, why, sizeof why); /* the refusal's, for its alert */
    }
    if (rc || decided)
        return rc;
    rc = layer1(c, o, &dup);
    if (rc || dup)
        return rc;

    struct po_param up[] = {PO_TEXT(ev->tenant), PO_TEXT(ev->out_trade_no),
                            PO_TEXT(ev->channel_txn_id), PO_TEXT(ev->channel)};
    struct po_rowset urs = {4, 1, up};
    struct po_rows moved;
    rc = po_engine_mark_paid(c->s, layer_on(c, PO_ENGINE_NO_LAYER2), &urs, c->now, &moved, c->err,
                             sizeof c->err);
    if (rc)
        return rc;
    int64_t seq = 0;
    changes = moved.nrows;
    if (changes == 1 && po_rows_i64(&moved, 0, 3, &seq))
        rc = PO_ERR_STORE;
    po_rows_free(&moved);
    if (rc || changes > 1)
        return rc ? rc : PO_ERR_STORE;
    if (changes == 0) {
        /* Layer 2 refereed: someone else moved the order. Re-read it. */
        rc = load_order(c, &ord, &found);
        if (rc)
            return rc;
        PO_ASSERT(found);
        if (strcmp(ord.status, "PAID") == 0 && strcmp(ord.txn, ev->channel_txn_id) == 0) {
            set_outcome(o, PO_OUT_DUPLICATE, 2, PO_R_NONE);
            return PO_OK;
        }
        bool paid = strcmp(ord.status, "PAID") == 0;
        detailf(c, "payment %s for order %s in status %s%s%s", ev->channel_txn_id, ev->out_trade_no,
                ord.status, paid ? " by " : "", paid ? ord.txn : "");
        return suspense(c, o, paid ? PO_R_DUPLICATE_PAYMENT : PO_R_PAID_AFTER_CLOSE, true);
    }
    rc = record(c, "applied", PO_R_NONE);
    if (rc)
        return rc;
    char clearing[PO_ACCOUNT_SIZE], payable[PO_ACCOUNT_SIZE];
    account(clearing, sizeof clearing, "channel_clearing", ev->channel);
    account(payable, sizeof payable, "merchant_payable", ord.merchant);
    rc = post(c, "PAY", clearing, payable);
    if (!rc) /* its place among the order's events: taken by the UPDATE above */
        rc = emit_at(c, "payment.credited", ord.merchant, PO_R_NONE, seq);
    if (!rc)
        set_outcome(o, PO_OUT_APPLIED, 0, PO_R_NONE);
    return rc;
}

static const char *refund_target(enum po_event_type t)
{
    switch (t) {
    case PO_EV_REFUND_SUCCESS:
        return "SUCCESS";
    case PO_EV_REFUND_CLOSED:
        return "CLOSED";
    default:
        return "ABNORMAL";
    }
}

struct refund_row {
    char out_trade_no[PO_ID_MAX + 1];
    int64_t amount;
    char currency[4];
    char status[16];
    char channel[PO_CHANNEL_SIZE];
    char merchant[PO_ID_MAX + 1];
    char suspense_key[PO_KEY_SIZE]; /* "" unless it refunds a suspense payment */
};

static po_err load_refund(struct ev_ctx *c, struct refund_row *out, bool *found)
{
    const struct text_field f[] = {
        {out->out_trade_no, sizeof out->out_trade_no}, {NULL, 0},
        {out->currency, sizeof out->currency},         {out->status, sizeof out->status},
        {out->channel, sizeof out->channel},           {out->merchant, sizeof out->merchant},
        {out->suspense_key, sizeof out->suspense_key}};
    return load_row(c,
                    "SELECT r.out_trade_no, r.amount, r.currency, r.status,"
                    " COALESCE(r.channel, o.channel, ''), o.merchant_id,"
                    " COALESCE(r.suspense_key, '') FROM refund r"
                    " JOIN pay_order o ON o.tenant_id = r.tenant_id AND"
                    " o.out_trade_no = r.out_trade_no WHERE r.tenant_id = ? AND"
                    " r.out_refund_no = ?",
                    c->ev->out_refund_no, &out->amount, f, PO_NELEM(f), found);
}

/* The order-side effect of a refund reaching its final state: a success
 * adds to the refunded amount (never beyond what was reserved), a close
 * gives the reservation back. */
static po_err refund_order_update(struct ev_ctx *c, bool success, int64_t *changes)
{
    const struct po_event *ev = c->ev;
    if (!success)
        return po_order_release_refund(c->s, ev->tenant, ev->out_trade_no, ev->amount_minor, c->now,
                                       changes, c->err, sizeof c->err);
    struct po_param p[] = {PO_I64(ev->amount_minor), PO_TEXT(c->now), PO_TEXT(ev->tenant),
                           PO_TEXT(ev->out_trade_no), PO_I64(ev->amount_minor)};
    return change(c,
                  "UPDATE pay_order SET refunded_amount = refunded_amount + ?,"
                  " updated_at = ? WHERE tenant_id = ? AND out_trade_no = ? AND"
                  " refunded_amount + ? <= refund_reserved",
                  p, PO_NELEM(p), changes);
}

/* An operator's acceptance (po_alert_accept) of a refund success that
 * arrived after payonce had closed the refund (refund_after_close: the money
 * left the channel and was parked in suspense). The refund becomes the
 * order's after all: CLOSED -> SUCCESS (guarded), reserved and refunded on
 * the order (guarded: never beyond what was paid), and the amount moves
 * from suspense to the merchant's payable — with the net effect of an
 * ordinary refund. Its own key (the success's + "|accepted"): once. */
static po_err apply_accept(struct ev_ctx *c, struct po_outcome *o)
{
    const struct po_event *ev = c->ev;
    struct refund_row rf;
    bool found = false, dup = false;
    int64_t changes = 0;
    po_err rc = load_refund(c, &rf, &found);
    if (rc)
        return rc;
    if (!found || strcmp(rf.out_trade_no, ev->out_trade_no) != 0 || rf.suspense_key[0]) {
        detailf(c, "refund %s of order %s cannot be accepted", ev->out_refund_no, ev->out_trade_no);
        return reject(o, found ? PO_R_ORDER_MISMATCH : PO_R_UNKNOWN_REFUND);
    }
    if (order_mismatch(c, o, rf.merchant, rf.amount, rf.currency, rf.channel, true))
        return PO_OK;
    rc = layer1(c, o, &dup);
    if (rc || dup)
        return rc;
    rc = change(c,
                "UPDATE refund SET status = 'SUCCESS', channel_refund_id = ?, updated_at = ?"
                " WHERE tenant_id = ? AND out_refund_no = ? AND status = 'CLOSED'",
                PO_PARAMS(PO_TEXT(ev->channel_refund_id), PO_TEXT(c->now), PO_TEXT(ev->tenant),
                          PO_TEXT(ev->out_refund_no)),
                &changes);
    if (rc)
        return rc;
    if (changes == 0) {
        detailf(c, "refund %s is %s, not CLOSED", ev->out_refund_no, rf.status);
        return reject(o, PO_R_STALE_REFUND_STATUS);
    }
    rc = record(c, "applied", PO_R_NONE);
    if (!rc)
        rc = change(c,
                    "UPDATE pay_order SET refund_reserved = refund_reserved + ?,"
                    " refunded_amount = refunded_amount + ?, updated_at = ? WHERE tenant_id = ?"
                    " AND out_trade_no = ? AND status = 'PAID' AND refund_reserved + ? <= amount",
                    PO_PARAMS(PO_I64(ev->amount_minor), PO_I64(ev->amount_minor), PO_TEXT(c->now),
                              PO_TEXT(ev->tenant), PO_TEXT(ev->out_trade_no),
                              PO_I64(ev->amount_minor)),
                    &changes);
    if (rc)
        return rc;
    if (changes == 0) {
        detailf(c, "order %s cannot take refund %s back: it would refund more than was paid",
                ev->out_trade_no, ev->out_refund_no);
        return reject(o, PO_R_REFUND_EXCEEDS_RESERVED);
    }
    char payable[PO_ACCOUNT_SIZE];
    account(payable, sizeof payable, "merchant_payable", rf.merchant);
    rc = post(c, "REFUND", payable, "suspense");
    if (!rc)
        rc = emit(c, "refund.succeeded", rf.merchant, PO_R_NONE);
    if (!rc)
        set_outcome(o, PO_OUT_APPLIED, 0, PO_R_NONE);
    return rc;
}

static po_err apply_refund(struct ev_ctx *c, struct po_outcome *o)
{
    const struct po_event *ev = c->ev;
    const char *target = refund_target(ev->type);
    struct refund_row rf;
    bool found = false, dup = false;
    int64_t changes = 0;
    po_err rc = load_refund(c, &rf, &found);
    if (rc)
        return rc;
    if (!found) {
        detailf(c, "no refund %s", ev->out_refund_no);
        return reject(o, PO_R_UNKNOWN_REFUND);
    }
    if (strcmp(rf.out_trade_no, ev->out_trade_no) != 0) {
        detailf(c, "refund %s belongs to order %s, not %s", ev->out_refund_no, rf.out_trade_no,
                ev->out_trade_no);
        return reject(o, PO_R_ORDER_MISMATCH);
    }
    if (ev->amount_is_cumulative && ev->amount_minor >= rf.amount) {
        /* The channel reported the payment's refunded total, which covers
         * this refund: from here on the event is this refund's amount. */
        c->resolved = *ev;
        c->resolved.amount_minor = rf.amount;
        c->resolved.amount_is_cumulative = false;
        c->ev = ev = &c->resolved;
    }
    bool from_suspense = rf.suspense_key[0] != '\0';
    memcpy(c->suspense_key, rf.suspense_key, sizeof c->suspense_key);
    if (order_mismatch(c, o, rf.merchant, rf.amount, rf.currency, rf.channel, true))
        return PO_OK;
    rc = layer1(c, o, &dup);
    if (rc || dup)
        return rc;

    struct po_param up[] = {
        PO_TEXT(target),     PO_TEXT(ev->channel_refund_id), PO_TEXT(ev->channel), PO_TEXT(c->now),
        PO_TEXT(ev->tenant), PO_TEXT(ev->out_refund_no),     PO_TEXT(target)};
    rc = change(c,
                layer_on(c, PO_ENGINE_NO_LAYER2)
                    ? "UPDATE refund SET status = ?, channel_refund_id = ?,"
                      " channel = COALESCE(channel, ?), updated_at = ? WHERE tenant_id = ? AND"
                      " out_refund_no = ? AND status IN ('PROCESSING', 'ABNORMAL') AND status <> ?"
                    : "UPDATE refund SET status = ?, channel_refund_id = ?,"
                      " channel = COALESCE(channel, ?), updated_at = ? WHERE tenant_id = ? AND"
                      " out_refund_no = ?",
                up, layer_on(c, PO_ENGINE_NO_LAYER2) ? 7 : 6, &changes);
    if (rc)
        return rc;
    if (changes == 0) {
        rc = load_refund(c, &rf, &found);
        if (rc)
            return rc;
        PO_ASSERT(found);
        if (strcmp(rf.status, target) == 0) {
            set_outcome(o, PO_OUT_DUPLICATE, 2, PO_R_NONE);
            return PO_OK;
        }
        detailf(c, "refund %s is %s; channel says %s", ev->out_refund_no, rf.status, target);
        if (ev->type == PO_EV_REFUND_SUCCESS)
            return suspense(c, o, PO_R_REFUND_AFTER_CLOSE, false);
        return reject(o, PO_R_STALE_REFUND_STATUS);
    }
    rc = record(c, "applied", PO_R_NONE);
    if (rc || ev->type == PO_EV_REFUND_ABNORMAL)
        goto done;
    if (!from_suspense) { /* a suspense refund reserved nothing on the order */
        rc = refund_order_update(c, ev->type == PO_EV_REFUND_SUCCESS, &changes);
        if (rc)
            return rc;
        if (changes == 0) {
            detailf(c, "refund %s of %lld would exceed what order %s reserved for refunds",
                    ev->out_refund_no, (long long)ev->amount_minor, ev->out_trade_no);
            return reject(o, PO_R_REFUND_EXCEEDS_RESERVED);
        }
    }
    if (ev->type == PO_EV_REFUND_SUCCESS) {
        /* The money goes back to the payer from where it was: the
         * merchant's payable, or the suspense account that parked it. */
        char clearing[PO_ACCOUNT_SIZE], payable[PO_ACCOUNT_SIZE];
        account(clearing, sizeof clearing, "channel_clearing", ev->channel);
        account(payable, sizeof payable, "merchant_payable", rf.merchant);
        rc = post(c, "REFUND", from_suspense ? "suspense" : payable, clearing);
        if (!rc && from_suspense) {
            char note[PO_ID_MAX + PO_TXN_ID_MAX + 96];
            (void)snprintf(note, sizeof note,
                           "refunded: %s (channel refund %s); the money left suspense",
                           ev->out_refund_no, ev->channel_refund_id);
            rc = po_alert_settle_refunded(c->s, ev->tenant, rf.suspense_key, note, c->now, c->err,
                                          sizeof c->err);
        }
    }
done:
    if (!rc)
        rc = emit(c,
                  ev->type == PO_EV_REFUND_SUCCESS
                      ? (from_suspense ? "suspense.refunded" : "refund.succeeded")
                  : ev->type == PO_EV_REFUND_CLOSED ? "refund.closed"
                                                    : "refund.abnormal",
                  rf.merchant, PO_R_NONE);
    if (!rc)
        set_outcome(o, PO_OUT_APPLIED, 0, PO_R_NONE);
    return rc;
}

/* No state machine: layers 1 and 3 only. */
static po_err apply_profit_share(struct ev_ctx *c, struct po_outcome *o)
{
    const struct po_event *ev = c->ev;
    struct order_row ord;
    bool dup = false, decided = false;
    po_err rc = checked_order(c, o, &ord, false, &decided);
    if (rc || decided)
        return rc;
    if (strcmp(ord.status, "PAID") != 0) {
        detailf(c, "order %s is %s", ev->out_trade_no, ord.status);
        return reject(o, PO_R_ORDER_NOT_PAID);
    }
    rc = layer1(c, o, &dup);
    if (rc || dup)
        return rc;
    rc = record(c, "applied", PO_R_NONE);
    if (rc)
        return rc;
    char payable[PO_ACCOUNT_SIZE], receiver[PO_ACCOUNT_SIZE];
    account(payable, sizeof payable, "merchant_payable", ord.merchant);
    account(receiver, sizeof receiver, "profit_share", ev->receiver);
    rc = post(c, "PROFIT_SHARE", payable, receiver);
    if (!rc)
        rc = emit(c, "profit_share.recorded", ord.merchant, PO_R_NONE);
    if (!rc)
        set_outcome(o, PO_OUT_APPLIED, 0, PO_R_NONE);
    return rc;
}

static po_err apply_one(struct ev_ctx *c, struct po_outcome *o)
{
    switch (c->ev->type) {
    case PO_EV_PAY_SUCCESS:
        return apply_payment(c, o);
    case PO_EV_PROFIT_SHARE_RESULT:
        return apply_profit_share(c, o);
    default:
        return c->ev->accept_after_close ? apply_accept(c, o) : apply_refund(c, o);
    }
}

static po_err sp(struct ev_ctx *c, const char *sql)
{
    return change(c, sql, PO_NO_PARAMS, NULL);
}

/* A failure of the event's own statement: roll the event back to its
 * savepoint and answer it `retry`; the batch goes on. Returns non-OK when
 * even that fails (the transaction is lost). */
static po_err event_failed(struct ev_ctx *c, po_err why, struct po_outcome *o)
{
    char err[PO_ERRBUF_SIZE];
    memcpy(err, c->err, sizeof err);
    po_err rc = sp(c, "ROLLBACK TO SAVEPOINT po_event");
    if (!rc)
        rc = sp(c, "RELEASE SAVEPOINT po_event");
    if (rc)
        return rc;
    po_log(PO_LOG_WARN,
           "tenant %s, channel %s, key %s, outcome retry: not applied (%s), the rest of its"
           " batch is: %s",
           c->ev->tenant, c->ev->channel, c->key, po_err_name(why), err);
    set_outcome(o, PO_OUT_RETRY, 0,
                why == PO_ERR_TRANSIENT ? PO_R_STORE_UNAVAILABLE : PO_R_STORE_ERROR);
    return PO_OK;
}

po_err po_engine_run_event(struct ev_ctx *c, struct po_ledger_batch *batch_deltas,
                           struct po_outcome *o)
{
    po_err rc = sp(c, "SAVEPOINT po_event");
    if (rc)
        return rc;
    po_ledger_batch_reset(c->deltas);
    c->detail[0] = '\0';
    c->suspense_key[0] = '\0';
    rc = apply_one(c, o);
    if (rc == PO_ERR_CONFLICT) {
        rc = sp(c, "ROLLBACK TO SAVEPOINT po_event");
        if (rc)
            return rc;
        /* Is the twin's processed record really there? If not, the
         * violation was something else: retry, never a duplicate (that
         * would lose a payment). If it is, it must be the same business
         * event: another order or amount is a conflict, as at layer 1. */
        bool dup = false, same = true;
        rc = layer1_seen(c, &dup, &same);
        if (!rc && !dup) {
            po_log(PO_LOG_WARN,
                   "tenant %s, channel %s, key %s: unexpected constraint violation (the event"
                   " is retried): %s",
                   c->ev->tenant, c->ev->channel, c->key, c->err);
            rc = PO_ERR_TRANSIENT;
        }
        if (rc)
            return event_failed(c, rc, o);
        if (same) {
            set_outcome(o, PO_OUT_DUPLICATE, 3, PO_R_NONE);
            return sp(c, "RELEASE SAVEPOINT po_event");
        }
        (void)reject(o, PO_R_CONFLICTING_DUPLICATE);
    } else if (rc)
        return event_failed(c, rc, o);
    if (o->kind == PO_OUT_REJECTED) {
        /* Nothing of a rejected event stays but its alert. */
        rc = sp(c, "ROLLBACK TO SAVEPOINT po_event");
        if (!rc)
            rc = alert(c, o->reason, "rejected");
        if (rc)
            return event_failed(c, rc, o);
        return sp(c, "RELEASE SAVEPOINT po_event");
    }
    rc = sp(c, "RELEASE SAVEPOINT po_event");
    if (rc)
        return event_failed(c, rc, o);
    rc = po_ledger_batch_merge(batch_deltas, c->deltas);
    PO_ASSERT(rc == PO_OK); /* bounded: PO_BATCH_MAX events x PO_LEDGER_LINES_MAX */
    return PO_OK;
}

po_err po_engine_alert_in(struct po_store *s, const struct po_event *ev, enum po_reason reason,
                          const char *detail, const char *outcome)
{
    struct ev_ctx *c = calloc(1, sizeof *c);
    char now[PO_TIME_SIZE];
    if (!c)
        return PO_ERR_NOMEM;
    po_clock_now_iso(now, sizeof now);
    c->s = s;
    c->ev = ev;
    c->now = now;
    detailf(c, "%s", detail ? detail : "");
    po_err rc = po_event_key(ev, c->key, sizeof c->key);
    PO_ASSERT(rc == PO_OK);
    rc = alert(c, reason, outcome);
    free(c);
    return rc;
}

po_err po_engine_alert(struct po_store *s, const struct po_event *ev, enum po_reason reason,
                       const char *detail, const char *outcome)
{
    char err[PO_ERRBUF_SIZE];
    po_err rc = po_store_begin(s, err, sizeof err);
    if (!rc) {
        rc = po_engine_alert_in(s, ev, reason, detail, outcome);
        if (rc)
            po_store_rollback(s);
        else
            rc = po_store_commit(s, err, sizeof err);
    }
    return rc;
}
