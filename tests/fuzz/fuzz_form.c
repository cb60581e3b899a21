/* fuzz_form.c — the form parser (Alipay notifications and gateway
 * answers): arbitrary bytes never crash it; a form it accepts has unique
 * plain keys and no NUL in any value, encodes and parses back to the same
 * fields, and its sign content has exactly the length it reports.
 *
 * PAYONCE_FUZZ_PLANT=KEY plants a bug for tests/e2e/fuzz_keep.sh: a form
 * with the field KEY aborts, as a parser bug would. The fuzzer has to find
 * such a form itself; the test checks that the crash is kept as a
 * regression input and replayed by the next run. Unset, nothing changes. */
#include "fuzz_common.h"

static const char *planted(void)
{
    static int done;
    static const char *key;
    if (!done) {
        key = getenv("PAYONCE_FUZZ_PLANT");
        done = 1;
    }
    return key && *key ? key : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > PO_BODY_MAX)
        return 0;
    struct po_form f = {0}, g = {0};
    if (po_form_parse((const char *)data, size, &f) != PO_OK) {
        po_form_free(&f);
        return 0;
    }
    for (int i = 0; i < f.n; i++) {
        if (memchr(f.p[i].val, '\0', f.p[i].val_len) || strlen(f.p[i].val) != f.p[i].val_len)
            abort();
        for (int k = 0; k < i; k++)
            if (strcmp(f.p[k].key, f.p[i].key) == 0)
                abort();
    }
    if (planted() && po_form_get(&f, planted()))
        abort();
    size_t len = 0, clen = 0;
    char *enc = po_form_encode(&f, &len);
    if (!enc || po_form_parse(enc, len, &g) != PO_OK || g.n != f.n)
        abort();
    for (int i = 0; i < f.n; i++)
        if (strcmp(po_form_get(&g, f.p[i].key), f.p[i].val) != 0)
            abort();
    char *content = po_alipay_sign_content(&f, true, true, &clen);
    if (!content || strlen(content) != clen)
        abort();
    free(content);
    free(enc);
    po_form_free(&f);
    po_form_free(&g);
    return 0;
}
