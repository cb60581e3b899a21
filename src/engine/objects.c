/*
 * objects.c — object creation with input validation (see objects.h).
 */
#include "objects.h"
#include "engine.h"

#include <stdio.h>
#include <string.h>

static bool exists(struct po_store *s, const char *sql, const struct po_param *p, int n, po_err *rc)
{
    struct po_rows r;
    *rc = po_store_exec(s, sql, p, n, &r, NULL, NULL, 0);
    if (*rc)
        return false;
    bool found = r.nrows > 0;
    po_rows_free(&r);
    return found;
}

po_err po_tenant_check(struct po_store *s, const char *tenant, char *err, size_t errcap)
{
    struct po_param p[] = {PO_TEXT(tenant)};
    po_err rc = PO_OK;
    if (exists(s, "SELECT 1 FROM tenant WHERE tenant_id = ?", p, PO_NELEM(p), &rc))
        return PO_OK;
    if (rc)
        po_errf(err, errcap, "tenant %.64s: the database did not answer", tenant);
    else
        po_errf(err, errcap,
                "no tenant '%.64s' ('payonce tenant list' shows them, 'payonce tenant add'"
                " adds one)",
                tenant);
    return rc ? rc : PO_ERR_NOT_FOUND;
}

po_err po_tenant_set_order_ttl(struct po_store *s, const char *tenant, int64_t ttl_s, char *err,
                               size_t errcap)
{
    if (ttl_s < 0 || ttl_s > PO_ORDER_EXPIRY_MAX_S) {
        po_errf(err, errcap, "order expiry: 0 (none) to %d seconds", PO_ORDER_EXPIRY_MAX_S);
        return PO_ERR_INVALID;
    }
    int64_t n = 0;
    po_err rc = po_store_begin(s, err, errcap);
    if (!rc)
        rc = po_store_exec(s, "UPDATE tenant SET order_ttl_s = ? WHERE tenant_id = ?",
                           PO_PARAMS(ttl_s ? PO_I64(ttl_s) : PO_NULLP, PO_TEXT(tenant)), NULL, &n,
                           err, errcap);
    if (!rc && n != 1) {
        po_errf(err, errcap, "no tenant %s", tenant);
        rc = PO_ERR_NOT_FOUND;
    }
    if (!rc)
        return po_store_commit(s, err, errcap);
    po_store_rollback(s);
    return rc;
}

po_err po_tenant_add(struct po_store *s, const char *tenant, const char *name, bool *created,
                     char *err, size_t errcap)
{
    if (created)
        *created = false;
    if (!po_id_valid(tenant, PO_ID_MAX)) {
        po_errf(err, errcap, "tenant id: 1-%d characters of [A-Za-z0-9_-.:|*]", PO_ID_MAX);
        return PO_ERR_INVALID;
    }
    if (name && (strlen(name) > PO_NAME_MAX)) {
        po_errf(err, errcap, "tenant name: at most %d bytes", PO_NAME_MAX);
        return PO_ERR_INVALID;
    }
    char now[PO_TIME_SIZE];
    po_clock_now_iso(now, sizeof now);
    struct po_param p[] = {PO_TEXT(tenant), PO_TEXT(name ? name : tenant), PO_TEXT(now)};
    po_err rc = po_store_exec_tx(s,
                                 "INSERT INTO tenant (tenant_id, name, created_at) VALUES"
                                 " (?, ?, ?)",
                                 p, PO_NELEM(p), NULL, err, errcap);
    if (rc == PO_ERR_CONFLICT) { /* the same again is fine; another name is not */
        struct po_param q[] = {PO_TEXT(tenant), PO_TEXT(name ? name : tenant)};
        if (exists(s, "SELECT 1 FROM tenant WHERE tenant_id = ? AND name = ?", q, PO_NELEM(q), &rc))
            return PO_OK;
        if (!rc) {
            po_errf(err, errcap, "tenant %s already exists with another name", tenant);
            rc = PO_ERR_CONFLICT;
        }
        return rc;
    }
    if (!rc && created)
        *created = true;
    return rc;
}

po_err po_merchant_add(struct po_store *s, const char *tenant, const char *merchant, bool *created,
                       char *err, size_t errcap)
{
    if (created)
        *created = false;
    if (!po_id_valid(tenant, PO_ID_MAX) || !po_id_valid(merchant, PO_ID_MAX)) {
        po_errf(err, errcap, "tenant and merchant ids: 1-%d characters of [A-Za-z0-9_-.:|*]",
                PO_ID_MAX);
        return PO_ERR_INVALID;
    }
    po_err rc;
    struct po_param t[] = {PO_TEXT(tenant)};
    if (!exists(s, "SELECT 1 FROM tenant WHERE tenant_id = ?", t, PO_NELEM(t), &rc)) {
        if (!rc)
            po_errf(err, errcap, "no tenant %s", tenant);
        return rc ? rc : PO_ERR_NOT_FOUND;
    }
    char now[PO_TIME_SIZE];
    po_clock_now_iso(now, sizeof now);
    struct po_param p[] = {PO_TEXT(tenant), PO_TEXT(merchant), PO_TEXT(now)};
    rc = po_store_exec_tx(s,
                          "INSERT INTO merchant (tenant_id, merchant_id, created_at) VALUES"
                          " (?, ?, ?)",
                          p, PO_NELEM(p), NULL, err, errcap);
    if (rc == PO_ERR_CONFLICT) /* the same merchant again: nothing to do */
        return PO_OK;
    if (!rc && created)
        *created = true;
    return rc;
}

static po_err order_validate(const struct po_order_spec *o, char *err, size_t errcap)
{
    if (!po_id_valid(o->tenant, PO_ID_MAX) || !po_id_valid(o->merchant, PO_ID_MAX) ||
        !po_id_valid(o->out_trade_no, PO_ID_MAX)) {
        po_errf(err, errcap,
                "tenant, merchant, out_trade_no: 1-%d characters of"
                " [A-Za-z0-9_-.:|*]",
                PO_ID_MAX);
        return PO_ERR_INVALID;
    }
    if (!po_amount_valid(o->amount_minor)) {
        po_errf(err, errcap, "amount: a positive integer in minor units, at most %lld",
                (long long)PO_AMOUNT_MAX);
        return PO_ERR_INVALID;
    }
    if (!po_currency_valid(o->currency)) {
        po_errf(err, errcap, "currency: not a supported ISO 4217 code");
        return PO_ERR_INVALID;
    }
    /* The caller checks that the channel is registered (engine/ sits
     * below the channel registry); here only its shape. */
    if (o->channel && !po_id_valid(o->channel, PO_CHANNEL_SIZE - 1)) {
        po_errf(err, errcap, "channel: a registered channel's name");
        return PO_ERR_INVALID;
    }
    return PO_OK;
}

/* Compares an existing order with a repeated create; fills err with the
 * first difference. */
static po_err same_order(struct po_store *s, const struct po_order_spec *o, char *err,
                         size_t errcap)
{
    struct po_rows r;
    struct po_param p[] = {PO_TEXT(o->tenant), PO_TEXT(o->out_trade_no)};
    po_err rc = po_store_exec(s,
                              "SELECT merchant_id, amount, currency, COALESCE(channel, '')"
                              " FROM pay_order WHERE tenant_id = ? AND out_trade_no = ?",
                              p, PO_NELEM(p), &r, NULL, err, errcap);
    if (rc)
        return rc;
    int64_t amount = 0;
    if (r.nrows != 1 || po_rows_i64(&r, 0, 1, &amount)) {
        rc = PO_ERR_STORE;
        goto out;
    }
    rc = PO_ERR_CONFLICT;
    if (strcmp(po_rows_get(&r, 0, 0), o->merchant) != 0)
        po_errf(err, errcap, "order %s exists with merchant %s", o->out_trade_no,
                po_rows_get(&r, 0, 0));
    else if (amount != o->amount_minor) {
        char money[PO_MONEY_MAX];
        po_money_format(amount, po_rows_get(&r, 0, 2), money, sizeof money);
        po_errf(err, errcap, "order %s exists with amount %s", o->out_trade_no, money);
    } else if (strcmp(po_rows_get(&r, 0, 2), o->currency) != 0)
        po_errf(err, errcap, "order %s exists with currency %s", o->out_trade_no,
                po_rows_get(&r, 0, 2));
    else if (strcmp(po_rows_get(&r, 0, 3), o->channel ? o->channel : "") != 0)
        po_errf(err, errcap, "order %s exists with channel '%s'", o->out_trade_no,
                po_rows_get(&r, 0, 3));
    else
        rc = PO_OK;
out:
    po_rows_free(&r);
    return rc;
}

static void set_code(char *code, size_t cap, const char *v)
{
    if (code && po_strcpy(code, cap, v) != PO_OK)
        code[0] = '\0';
}

/* The order (tenant, out_trade_no) read by sql — its parameters those
 * two — into *out_row, for the caller to say why a guarded statement
 * changed nothing (the caller po_rows_frees it). No such order:
 * PO_ERR_NOT_FOUND, said in err, code order_not_found, *out_row empty. */
static po_err order_row(struct po_store *s, const char *sql, const char *tenant,
                        const char *out_trade_no, struct po_rows *out_row, char *code,
                        size_t codecap, char *err, size_t errcap)
{
    po_err rc = po_store_exec(s, sql, PO_PARAMS(PO_TEXT(tenant), PO_TEXT(out_trade_no)), out_row,
                              NULL, err, errcap);
    if (rc)
        return rc;
    if (out_row->nrows == 0) {
        po_rows_free(out_row);
        po_errf(err, errcap, "no order %s", out_trade_no);
        set_code(code, codecap, "order_not_found");
        return PO_ERR_NOT_FOUND;
    }
    return PO_OK;
}

/* An order's guarded UPDATE (sql with p) — update or say why: *out_changed
 * when it changed the row; otherwise the order read by why_sql as
 * order_row reads it, its row in *out_row for the caller to say why (the
 * caller po_rows_frees it). */
static po_err update_or_why(struct po_store *s, const char *sql, const struct po_param *p, int np,
                            const char *why_sql, const char *tenant, const char *out_trade_no,
                            bool *out_changed, struct po_rows *out_row, char *code, size_t codecap,
                            char *err, size_t errcap)
{
    int64_t changes = 0;
    po_err rc = po_store_exec(s, sql, p, np, NULL, &changes, err, errcap);
    if (rc)
        return rc;
    *out_changed = changes == 1;
    if (*out_changed)
        return PO_OK;
    return order_row(s, why_sql, tenant, out_trade_no, out_row, code, codecap, err, errcap);
}

po_err po_order_insert(struct po_store *s, const struct po_order_spec *o, bool *out_created,
                       char *code, size_t codecap, char *err, size_t errcap)
{
    set_code(code, codecap, "");
    po_err rc = order_validate(o, err, errcap);
    if (rc) {
        set_code(code, codecap, "invalid_request");
        return rc;
    }
    struct po_param m[] = {PO_TEXT(o->tenant), PO_TEXT(o->merchant)};
    if (!exists(s, "SELECT 1 FROM merchant WHERE tenant_id = ? AND merchant_id = ?", m, PO_NELEM(m),
                &rc)) {
        if (rc)
            return rc;
        po_errf(err, errcap, "no merchant %s in tenant %s", o->merchant, o->tenant);
        set_code(code, codecap, "merchant_not_found");
        return PO_ERR_NOT_FOUND;
    }
    char now[PO_TIME_SIZE], expires[PO_TIME_SIZE] = "";
    int64_t changes = 0, at = o->expires_at;
    po_clock_now_iso(now, sizeof now);
    if (!at) { /* the tenant's default, if it has one */
        struct po_rows t;
        rc = po_store_exec(s, "SELECT COALESCE(order_ttl_s, 0) FROM tenant WHERE tenant_id = ?",
                           PO_PARAMS(PO_TEXT(o->tenant)), &t, NULL, err, errcap);
        if (rc)
            return rc;
        int64_t ttl = 0;
        if (t.nrows == 1 && po_rows_i64(&t, 0, 0, &ttl) == PO_OK && ttl > 0)
            at = po_clock_unix_of(now) + ttl;
        po_rows_free(&t);
    }
    if (at)
        po_clock_iso_at(at, expires, sizeof expires);
    struct po_param p[] = {PO_TEXT(o->tenant),
                           PO_TEXT(o->out_trade_no),
                           PO_TEXT(o->merchant),
                           o->channel ? PO_TEXT(o->channel) : PO_NULLP,
                           PO_I64(o->amount_minor),
                           PO_TEXT(o->currency),
                           PO_TEXT(now),
                           PO_TEXT(now),
                           at ? PO_TEXT(expires) : PO_NULLP};
    /* ON CONFLICT DO NOTHING: a repeat (or a concurrent twin, once it has
     * committed) leaves the transaction usable on both backends. */
    rc = po_store_exec(
        s,
        "INSERT INTO pay_order (tenant_id, out_trade_no, merchant_id, channel, amount,"
        " currency, status, created_at, updated_at, expires_at) VALUES (?, ?, ?, ?, ?, ?,"
        " 'PAYING', ?, ?, ?) ON CONFLICT DO NOTHING",
        p, PO_NELEM(p), NULL, &changes, err, errcap);
    if (rc)
        return rc;
    if (changes == 1) {
        *out_created = true;
        return PO_OK;
    }
    rc = same_order(s, o, err, errcap);
    if (rc == PO_ERR_CONFLICT)
        set_code(code, codecap, "order_exists");
    if (!rc)
        *out_created = false;
    return rc;
}

po_err po_order_create(struct po_store *s, const struct po_order_spec *o, bool *out_created,
                       char *err, size_t errcap)
{
    po_err rc = po_store_begin(s, err, errcap);
    if (rc)
        return rc;
    bool created = false;
    rc = po_order_insert(s, o, &created, NULL, 0, err, errcap);
    if (!rc)
        rc = po_store_commit(s, err, errcap);
    else
        po_store_rollback(s);
    if (!rc)
        *out_created = created;
    return rc;
}

po_err po_order_set_payment(struct po_store *s, const char *tenant, const char *out_trade_no,
                            const char *pay_method, const char *channel_id, const char *payment,
                            char *code, size_t codecap, char *err, size_t errcap)
{
    set_code(code, codecap, "");
    char now[PO_TIME_SIZE];
    po_clock_now_iso(now, sizeof now);
    struct po_param p[] = {PO_TEXT(pay_method), *channel_id ? PO_TEXT(channel_id) : PO_NULLP,
                           PO_TEXT(payment),    PO_TEXT(now),
                           PO_TEXT(tenant),     PO_TEXT(out_trade_no)};
    struct po_rows r;
    bool changed = false;
    po_err rc = update_or_why(s,
                              "UPDATE pay_order SET pay_method = ?, channel_order_id = ?,"
                              " payment = ?, updated_at = ? WHERE tenant_id = ? AND"
                              " out_trade_no = ? AND pay_method IS NULL",
                              p, PO_NELEM(p),
                              "SELECT COALESCE(pay_method, '') FROM pay_order WHERE tenant_id = ?"
                              " AND out_trade_no = ?",
                              tenant, out_trade_no, &changed, &r, code, codecap, err, errcap);
    if (rc || changed)
        return rc;
    if (strcmp(po_rows_get(&r, 0, 0), pay_method) != 0) {
        po_errf(err, errcap, "order %s's payment was created with pay_method %s", out_trade_no,
                po_rows_get(&r, 0, 0));
        set_code(code, codecap, "order_exists");
        rc = PO_ERR_CONFLICT;
    }
    po_rows_free(&r);
    return rc;
}

po_err po_order_close(struct po_store *s, const char *tenant, const char *out_trade_no,
                      bool *out_closed_now, char *code, size_t codecap, char *err, size_t errcap)
{
    set_code(code, codecap, "");
    char now[PO_TIME_SIZE];
    po_clock_now_iso(now, sizeof now);
    struct po_param p[] = {PO_TEXT(now), PO_TEXT(tenant), PO_TEXT(out_trade_no)};
    struct po_rows r;
    bool changed = false;
    /* The guard is the state machine: only PAYING closes. */
    po_err rc = update_or_why(
        s,
        "UPDATE pay_order SET status = 'CLOSED', updated_at = ? WHERE"
        " tenant_id = ? AND out_trade_no = ? AND status = 'PAYING'",
        p, PO_NELEM(p), "SELECT status FROM pay_order WHERE tenant_id = ? AND out_trade_no = ?",
        tenant, out_trade_no, &changed, &r, code, codecap, err, errcap);
    if (rc)
        return rc;
    if (changed) {
        *out_closed_now = true;
        char key[PO_ID_MAX + 16];
        struct po_outbox_json j;
        PO_ASSERT(po_fmt(key, sizeof key, "order:%s:CLOSED", out_trade_no) == PO_OK);
        po_outbox_json_init(&j);
        po_outbox_json_str(&j, "object", "order");
        po_outbox_json_str(&j, "out_trade_no", out_trade_no);
        po_outbox_json_str(&j, "status", "CLOSED");
        po_outbox_json_str(&j, "closed_at", now);
        return po_outbox_put(s, tenant, key, "order.closed", out_trade_no, po_outbox_json_end(&j),
                             now, err, errcap);
    }
    if (strcmp(po_rows_get(&r, 0, 0), "CLOSED") == 0) {
        *out_closed_now = false; /* closing twice is the same close */
    } else {
        po_errf(err, errcap, "order %s is %s; only a PAYING order can be closed", out_trade_no,
                po_rows_get(&r, 0, 0));
        set_code(code, codecap, "order_paid");
        rc = PO_ERR_CONFLICT;
    }
    po_rows_free(&r);
    return rc;
}

/* An existing refund with this out_refund_no: identical request -> PO_OK
 * (*found), otherwise PO_ERR_CONFLICT naming the difference. */
static po_err same_refund(struct po_store *s, const struct po_refund_spec *f, bool *found,
                          char *code, size_t codecap, char *err, size_t errcap)
{
    struct po_rows r;
    struct po_param p[] = {PO_TEXT(f->tenant), PO_TEXT(f->out_refund_no)};
    po_err rc = po_store_exec(s,
                              "SELECT out_trade_no, amount, currency,"
                              " COALESCE(suspense_key, '') FROM refund WHERE"
                              " tenant_id = ? AND out_refund_no = ?",
                              p, PO_NELEM(p), &r, NULL, err, errcap);
    if (rc)
        return rc;
    *found = r.nrows == 1;
    int64_t amount = 0;
    if (!*found)
        goto out;
    if (po_rows_i64(&r, 0, 1, &amount)) {
        rc = PO_ERR_STORE;
        goto out;
    }
    rc = PO_ERR_CONFLICT;
    if (po_rows_get(&r, 0, 3)[0]) /* an operator's refund of a suspense payment */
        po_errf(err, errcap, "refund %s returns a payment parked in suspense (%s)",
                f->out_refund_no, po_rows_get(&r, 0, 3));
    else if (strcmp(po_rows_get(&r, 0, 0), f->out_trade_no) != 0)
        po_errf(err, errcap, "refund %s exists for order %s", f->out_refund_no,
                po_rows_get(&r, 0, 0));
    else if (amount != f->amount_minor) {
        char money[PO_MONEY_MAX];
        po_money_format(amount, po_rows_get(&r, 0, 2), money, sizeof money);
        po_errf(err, errcap, "refund %s exists with amount %s", f->out_refund_no, money);
    } else if (f->currency && strcmp(po_rows_get(&r, 0, 2), f->currency) != 0)
        po_errf(err, errcap, "refund %s exists with currency %s", f->out_refund_no,
                po_rows_get(&r, 0, 2));
    else
        rc = PO_OK;
    if (rc == PO_ERR_CONFLICT)
        set_code(code, codecap, "refund_exists");
out:
    po_rows_free(&r);
    return rc;
}

/* Why the guarded reservation reserved nothing. */
static po_err why_not_reserved(struct po_store *s, const struct po_refund_spec *f, char *code,
                               size_t codecap, char *err, size_t errcap)
{
    struct po_rows r;
    po_err rc = order_row(s,
                          "SELECT status, currency, amount - refund_reserved FROM pay_order"
                          " WHERE tenant_id = ? AND out_trade_no = ?",
                          f->tenant, f->out_trade_no, &r, code, codecap, err, errcap);
    if (rc)
        return rc;
    if (f->currency && strcmp(po_rows_get(&r, 0, 1), f->currency) != 0) {
        po_errf(err, errcap, "order %s is in %s", f->out_trade_no, po_rows_get(&r, 0, 1));
        set_code(code, codecap, "currency_mismatch");
        rc = PO_ERR_CONFLICT;
    } else if (strcmp(po_rows_get(&r, 0, 0), "PAID") != 0) {
        po_errf(err, errcap, "order %s is %s; only a PAID order can be refunded", f->out_trade_no,
                po_rows_get(&r, 0, 0));
        set_code(code, codecap, "order_not_paid");
        rc = PO_ERR_CONFLICT;
    } else {
        char want[PO_MONEY_MAX], left[PO_MONEY_MAX];
        int64_t remains = 0;
        if (po_rows_i64(&r, 0, 2, &remains)) {
            po_errf(err, errcap, "order %s: what remains refundable cannot be read",
                    f->out_trade_no);
            rc = PO_ERR_STORE;
            goto out;
        }
        po_money_format(f->amount_minor, po_rows_get(&r, 0, 1), want, sizeof want);
        po_money_format(remains, po_rows_get(&r, 0, 1), left, sizeof left);
        po_errf(err, errcap, "refund of %s exceeds what remains refundable on order %s (%s)", want,
                f->out_trade_no, left);
        set_code(code, codecap, "refund_exceeds_paid");
        rc = PO_ERR_CONFLICT;
    }
out:
    po_rows_free(&r);
    return rc;
}

po_err po_refund_insert(struct po_store *s, const struct po_refund_spec *f, bool *out_created,
                        char *code, size_t codecap, char *err, size_t errcap)
{
    set_code(code, codecap, "");
    if (!po_id_valid(f->tenant, PO_ID_MAX) || !po_id_valid(f->out_trade_no, PO_ID_MAX) ||
        !po_id_valid(f->out_refund_no, PO_ID_MAX) || !po_amount_valid(f->amount_minor) ||
        (f->currency && !po_currency_valid(f->currency))) {
        po_errf(err, errcap,
                "out_trade_no, out_refund_no: 1-%d characters of"
                " [A-Za-z0-9_-.:|*]; amount a positive integer in minor units;"
                " currency a supported ISO 4217 code",
                PO_ID_MAX);
        set_code(code, codecap, "invalid_request");
        return PO_ERR_INVALID;
    }
    bool found = false;
    po_err rc = same_refund(s, f, &found, code, codecap, err, errcap);
    if (rc || found) {
        if (!rc)
            *out_created = false;
        return rc;
    }
    char now[PO_TIME_SIZE];
    int64_t changes = 0;
    po_clock_now_iso(now, sizeof now);
    /* The reservation: concurrent requests can never reserve more than was
     * paid, because the guard is re-evaluated on the locked row. */
    const char *cur = f->currency ? f->currency : "";
    struct po_param r[] = {PO_I64(f->amount_minor),  PO_TEXT(now), PO_TEXT(f->tenant),
                           PO_TEXT(f->out_trade_no), PO_TEXT(cur), PO_TEXT(cur),
                           PO_I64(f->amount_minor)};
    rc = po_store_exec(s,
                       "UPDATE pay_order SET refund_reserved = refund_reserved + ?, updated_at = ?"
                       " WHERE tenant_id = ? AND out_trade_no = ? AND status = 'PAID' AND"
                       " (currency = ? OR ? = '') AND refund_reserved + ? <= amount",
                       r, PO_NELEM(r), NULL, &changes, err, errcap);
    if (rc)
        return rc;
    if (changes == 0) {
        /* A twin with this out_refund_no may have committed meanwhile. */
        rc = same_refund(s, f, &found, code, codecap, err, errcap);
        if (rc || found) {
            if (!rc)
                *out_created = false;
            return rc;
        }
        return why_not_reserved(s, f, code, codecap, err, errcap);
    }
    struct po_param p[] = {PO_TEXT(f->tenant),
                           PO_TEXT(f->out_refund_no),
                           PO_I64(f->amount_minor),
                           PO_TEXT(f->submit_state ? f->submit_state : "none"),
                           PO_TEXT(now),
                           PO_TEXT(now),
                           PO_TEXT(f->tenant),
                           PO_TEXT(f->out_trade_no)};
    rc =
        po_store_exec(s,
                      "INSERT INTO refund (tenant_id, out_refund_no, out_trade_no, channel, amount,"
                      " currency, status, submit_state, created_at, updated_at) SELECT ?, ?,"
                      " out_trade_no, channel, CAST(? AS BIGINT), currency, 'PROCESSING', ?, ?, ?"
                      " FROM pay_order WHERE tenant_id = ? AND out_trade_no = ?"
                      " ON CONFLICT DO NOTHING",
                      p, PO_NELEM(p), NULL, &changes, err, errcap);
    if (rc)
        return rc;
    if (changes == 1) {
        *out_created = true;
        return PO_OK;
    }
    /* A concurrent twin committed the same out_refund_no after our first
     * look: give our reservation back and answer as for a repeat. */
    struct po_param back[] = {PO_I64(f->amount_minor), PO_TEXT(f->tenant),
                              PO_TEXT(f->out_trade_no)};
    rc = po_store_exec(s,
                       "UPDATE pay_order SET refund_reserved = refund_reserved - ? WHERE"
                       " tenant_id = ? AND out_trade_no = ?",
                       back, PO_NELEM(back), NULL, NULL, err, errcap);
    if (!rc)
        rc = same_refund(s, f, &found, code, codecap, err, errcap);
    if (!rc && !found)
        rc = PO_ERR_TRANSIENT; /* vanished again: let the caller retry */
    if (!rc)
        *out_created = false;
    return rc;
}

po_err po_refund_create(struct po_store *s, const char *tenant, const char *out_trade_no,
                        const char *out_refund_no, int64_t amount_minor, char *err, size_t errcap)
{
    struct po_refund_spec f = {tenant, out_trade_no, out_refund_no, amount_minor, NULL, "none"};
    po_err rc = po_store_begin(s, err, errcap);
    if (rc)
        return rc;
    bool created = false;
    rc = po_refund_insert(s, &f, &created, NULL, 0, err, errcap);
    if (!rc)
        rc = po_store_commit(s, err, errcap);
    else
        po_store_rollback(s);
    return rc;
}

po_err po_order_release_refund(struct po_store *s, const char *tenant, const char *out_trade_no,
                               int64_t amount_minor, const char *now, int64_t *out_changes,
                               char *err, size_t errcap)
{
    struct po_param p[] = {PO_I64(amount_minor), PO_TEXT(now), PO_TEXT(tenant),
                           PO_TEXT(out_trade_no), PO_I64(amount_minor)};
    return po_store_exec(s,
                         "UPDATE pay_order SET refund_reserved = refund_reserved - ?,"
                         " updated_at = ? WHERE tenant_id = ? AND out_trade_no = ? AND"
                         " refund_reserved - ? >= refunded_amount",
                         p, PO_NELEM(p), NULL, out_changes, err, errcap);
}

po_err po_order_by_txn(struct po_store *s, const char *tenant, const char *channel,
                       const char *channel_txn_id, char *out_trade_no, size_t cap)
{
    struct po_rows r;
    struct po_param p[] = {PO_TEXT(tenant), PO_TEXT(channel), PO_TEXT(channel_txn_id)};
    po_err rc = po_store_exec(s,
                              "SELECT out_trade_no FROM pay_order WHERE tenant_id = ? AND"
                              " channel = ? AND channel_txn_id = ?",
                              p, PO_NELEM(p), &r, NULL, NULL, 0);
    if (rc)
        return rc;
    rc = r.nrows == 1 ? po_strcpy(out_trade_no, cap, po_rows_get(&r, 0, 0)) : PO_ERR_NOT_FOUND;
    po_rows_free(&r);
    return rc;
}
