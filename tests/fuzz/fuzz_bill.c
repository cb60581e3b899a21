/* fuzz_bill.c — the WeChat Pay daily bill parser (what `payonce recon
 * import` reads): arbitrary bytes never crash it; a bill it accepts has
 * bounded, well-formed rows (amounts positive and within range, ids
 * non-empty), and parsing it again gives the same rows. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256 * 1024)
        return 0;
    const struct po_channel_ops *ops = po_channel_find("wechatpay");
    struct po_bill b = {0}, again = {0};
    char err[PO_ERRBUF_SIZE];
    if (ops->bill_parse((const char *)data, size, &b, err, sizeof err) != PO_OK)
        return 0;
    for (int i = 0; i < b.nrows; i++) {
        const struct po_bill_row *r = &b.rows[i];
        if (!po_amount_valid(r->amount) || !r->txn[0] || !r->out_trade_no[0] ||
            strlen(r->currency) != 3)
            abort();
    }
    if (ops->bill_parse((const char *)data, size, &again, err, sizeof err) != PO_OK ||
        again.nrows != b.nrows ||
        (b.nrows && memcmp(again.rows, b.rows, (size_t)b.nrows * sizeof b.rows[0]) != 0))
        abort();
    po_bill_free(&b);
    po_bill_free(&again);
    return 0;
}
