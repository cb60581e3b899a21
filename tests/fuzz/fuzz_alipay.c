/* fuzz_alipay.c — the Alipay adapter: a raw form body (form decoding,
 * charset, verification), arbitrary key/value lines signed validly
 * (everything after verification), and a raw gateway answer (finding the
 * signed "<method>_response" member, checking its signature). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct po_channel_account wx, ali, st;
    static int ready;
    if (!ready++)
        fuzz_accounts(&wx, &ali, &st);
    if (size < 1 || size > 8192)
        return 0;
    struct po_sim_request r;
    if (data[0] % 4 == 3) {
        struct po_api_resp *resp = calloc(1, sizeof *resp);
        resp->body = malloc(size);
        memcpy(resp->body, data + 1, size - 1);
        resp->body[size - 1] = '\0';
        resp->len = size - 1;
        resp->status = 200;
        char why[64];
        json_decref(po_alipay_resp_verified(&ali, resp, "alipay.trade.refund", why, sizeof why));
        po_api_resp_release(resp);
        free(resp);
        return 0;
    }
    if (data[0] % 2 == 0) {
        fuzz_split(data + 1, size - 1, NULL, 0, &r);
    } else {
        /* Lines "key=value" become signed parameters. */
        char *text = malloc(size);
        memcpy(text, data + 1, size - 1);
        text[size - 1] = '\0';
        const char *keys[40], *vals[40];
        int n = 0;
        for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && n < 40;
             line = strtok_r(NULL, "\n", &save)) {
            char *eq = strchr(line, '=');
            if (!eq || eq == line)
                continue;
            *eq = '\0';
            keys[n] = line;
            vals[n] = eq + 1;
            n++;
        }
        if (n == 0 || po_sim_alipay(fuzz_key, keys, vals, n, &r)) {
            free(text);
            return 0;
        }
        free(text);
    }
    fuzz_parse(&ali, &r);
    po_sim_request_free(&r);
    return 0;
}
