/* fuzz_wechatpay.c — the WeChat Pay v3 adapter: raw headers+body (the
 * verification path), a validly signed arbitrary body (body parsing and
 * decryption), and an arbitrary resource plaintext encrypted and signed
 * (resource parsing). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct po_channel_account wx, ali, st;
    static int ready;
    if (!ready++)
        fuzz_accounts(&wx, &ali, &st);
    if (size < 1 || size > PO_BODY_MAX)
        return 0;
    struct po_sim_request r;
    static const char *const names[] = {"Wechatpay-Serial", "Wechatpay-Signature",
                                        "Wechatpay-Timestamp", "Wechatpay-Nonce"};
    int64_t now = (int64_t)time(NULL);
    switch (data[0] % 3) {
    case 0:
        fuzz_split(data + 1, size - 1, names, 4, &r);
        break;
    case 1:
        fuzz_split(data + 1, size - 1, names, 0, &r);
        if (po_sim_wechatpay_sign(fuzz_key, "PUB_KEY_ID_FUZZ", r.body, r.body_len, now, &r))
            abort();
        break;
    default: {
        char *plain = malloc(size);
        memcpy(plain, data + 1, size - 1);
        plain[size - 1] = '\0';
        const char *types[] = {"TRANSACTION.SUCCESS", "REFUND.SUCCESS", "PROFITSHARING.FINISHED"};
        if (po_sim_wechatpay(fuzz_key, "PUB_KEY_ID_FUZZ", (const unsigned char *)FUZZ_APIV3, 32,
                             types[size % 3], plain, now, &r))
            abort();
        free(plain);
    }
    }
    fuzz_parse(&wx, &r);
    po_sim_request_free(&r);
    return 0;
}
