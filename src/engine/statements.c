/*
 * statements.c — the payment statements that the batch (batch.c) and the
 * per-event path (engine.c, with a batch of one) share, each written once
 * (see engine_int.h). Below both: it uses the store only.
 */
#include "engine_int.h"

po_err po_engine_mark_paid(struct po_store *s, bool only_paying, const struct po_rowset *rs,
                           const char *now, struct po_rows *out, char *err, size_t errcap)
{
    return po_store_exec(
        s,
        only_paying
            ? "UPDATE pay_order SET status = 'PAID', channel_txn_id = v.txn, channel ="
              " COALESCE(pay_order.channel, v.ch), paid_at = ?, updated_at = ?, event_seq ="
              " pay_order.event_seq + 1 FROM ?{v: t text, o text, txn text, ch text} WHERE"
              " pay_order.tenant_id = v.t AND pay_order.out_trade_no = v.o AND"
              " pay_order.status = 'PAYING' RETURNING pay_order.tenant_id,"
              " pay_order.out_trade_no, pay_order.merchant_id, pay_order.event_seq"
            : "UPDATE pay_order SET status = 'PAID', channel_txn_id = v.txn, channel ="
              " COALESCE(pay_order.channel, v.ch), paid_at = ?, updated_at = ?, event_seq ="
              " pay_order.event_seq + 1 FROM ?{v: t text, o text, txn text, ch text} WHERE"
              " pay_order.tenant_id = v.t AND pay_order.out_trade_no = v.o"
              " RETURNING pay_order.tenant_id, pay_order.out_trade_no, pay_order.merchant_id,"
              " pay_order.event_seq",
        PO_PARAMS(PO_TEXT(now), PO_TEXT(now), PO_ROWS(rs)), out, NULL, err, errcap);
}

po_err po_engine_record_rows(struct po_store *s, const struct po_rowset *rs, const char *now,
                             char *err, size_t errcap)
{
    PO_ASSERT(rs->ncols == PO_RECORD_COLUMNS);
    return po_store_exec(s,
                         "INSERT INTO notify_log (tenant_id, idem_key, channel, event_type, source,"
                         " outcome, reason, out_trade_no, amount, currency, first_seen_at) SELECT"
                         " v.t, v.k, v.ch, v.ty, v.src, v.oc, v.r, v.o, v.amount, v.cur, ? FROM"
                         " ?{v: t text, k text, ch text, ty text, src text, oc text, r text,"
                         " o text, amount int, cur text}",
                         PO_PARAMS(PO_TEXT(now), PO_ROWS(rs)), NULL, NULL, err, errcap);
}
