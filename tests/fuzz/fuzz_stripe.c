/* fuzz_stripe.c — the Stripe-style adapter: a raw Stripe-Signature header
 * and body, and an arbitrary body signed validly. */
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
    static const char *const names[] = {"Stripe-Signature"};
    if (data[0] % 2 == 0) {
        fuzz_split(data + 1, size - 1, names, 1, &r);
    } else {
        char *body = malloc(size);
        memcpy(body, data + 1, size - 1);
        body[size - 1] = '\0';
        if (po_sim_stripe((const unsigned char *)FUZZ_SECRET, strlen(FUZZ_SECRET), body,
                          (int64_t)time(NULL), &r))
            abort();
        free(body);
    }
    fuzz_parse(&st, &r);
    po_sim_request_free(&r);
    return 0;
}
