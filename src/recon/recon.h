/*
 * recon.h — reconciliation: the channel's trade bill and its order-query API
 * against our orders, every replay entering the engine through the same
 * function as a callback, with exactly the key the callback would have had
 * (source "reconciliation" or "query").
 */
#ifndef PO_RECON_H
#define PO_RECON_H

#include "../channel/channel.h"
#include "../core/core.h"
#include "../engine/engine.h"
#include "../store/store.h"

enum po_bill_kind { PO_BILL_PAY, PO_BILL_REFUND };

/* One detail row, amounts exact: money in minor units, fees in thousandths. */
struct po_bill_row {
    enum po_bill_kind kind;
    char time[24];                       /* 交易时间, "YYYY-MM-DD HH:MM:SS" (+08:00) */
    char mchid[PO_ID_MAX + 1];           /* 商户号 */
    char sub_mchid[PO_ID_MAX + 1];       /* 特约商户号 ("0" for direct merchants) */
    char txn[PO_TXN_ID_MAX + 1];         /* 微信订单号 */
    char out_trade_no[PO_ID_MAX + 1];    /* 商户订单号 */
    char currency[4];                    /* 货币种类 */
    int64_t amount;                      /* payments: 订单金额; refunds: 退款金额 */
    char refund_id[PO_TXN_ID_MAX + 1];   /* 微信退款单号 */
    char out_refund_no[PO_ID_MAX + 1];   /* 商户退款单号 */
    char refund_status[16];              /* 退款状态 */
    int64_t fee_milli;                   /* 手续费, thousandths of the minor unit */
};

struct po_bill {
    int nrows;
    struct po_bill_row *rows; /* heap */
    char period_start[11], period_end[11];
};

/*
 * Parses a WeChat Pay trade bill (ALL, SUCCESS or REFUND; UTF-8 BOM, CRLF,
 * backtick-prefixed fields, the summary header and row at the end). Rejects,
 * with the line and the reason in err, anything it cannot account for:
 * wrong column counts, malformed amounts, a missing summary (truncated
 * file), or a summary that disagrees with the detail rows.
 */
po_err po_bill_parse(const char *data, size_t len, struct po_bill *out, char *err, size_t errcap)
    PO_MUST_CHECK;
void po_bill_free(struct po_bill *b);

/* What one reconciliation did, per category, with totals in minor units. */
struct po_recon_report {
    char file_sha256[65];
    bool already_imported;
    int64_t rows;
    int64_t payments, payments_amount, refunds, refunds_amount;
    int64_t replayed, replayed_amount;      /* credited (or refunded) now: we had missed it */
    int64_t matched;                        /* already applied: duplicate */
    int64_t mismatched;                     /* engine rejected (amount, unknown order, ...) */
    int64_t suspense;
    int64_t zero_amount;                    /* 0.00 rows: nothing to credit */
    int64_t missing_from_bill;              /* our PAID orders the bill lacks */
    int64_t fees_milli;
    char period_start[11], period_end[11];
};

/* Progress callback for large files: rows done of rows total. */
typedef void (*po_recon_progress_fn)(void *ctx, int64_t done, int64_t total);

/*
 * Imports a bill for tenant/channel (only wechatpay): checks every row's
 * merchant against the tenant's account, replays every row through the
 * engine (batches of PO_RECON_BATCH), alerts for our PAID orders absent
 * from the bill's days, records fees, and records the run. A file already
 * imported changes nothing (force: run again; replays are idempotent).
 */
po_err po_recon_import(struct po_store *s, const char *tenant, const char *channel,
                       const struct po_channel_account *acct, const char *data, size_t len,
                       bool force, po_recon_progress_fn progress, void *pctx,
                       struct po_recon_report *out, char *err, size_t errcap) PO_MUST_CHECK;

/* A tenant's stored account for a channel, secrets unsealed with master
 * (NULL in insecure development mode). PO_ERR_NOT_FOUND when absent;
 * PO_ERR_STORE (detail in err) when it cannot be loaded. */
po_err po_account_fetch(struct po_store *s, const unsigned char *master, const char *tenant,
                        const char *channel, struct po_channel_account *out, char *err,
                        size_t errcap) PO_MUST_CHECK;

/* Result of an active query round. */
struct po_recon_query_report {
    int64_t queried, paid, replayed, matched, not_paid, failed;
};

/*
 * Active query: every wechatpay order of the tenant still PAYING and older
 * than min_age_s is queried at the channel's order-query API (the account's
 * api_base_url); the response's signature is verified with the tenant's
 * platform keys, and a paid answer is replayed through the engine (source
 * "query"). At most limit orders a round.
 */
po_err po_recon_query(struct po_store *s, const char *tenant,
                      const struct po_channel_account *acct, int64_t min_age_s, int limit,
                      struct po_recon_query_report *out, char *err, size_t errcap) PO_MUST_CHECK;

#endif
