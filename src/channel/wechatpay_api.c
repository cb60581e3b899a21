/*
 * wechatpay_api.c — outbound calls to WeChat Pay API v3 (order query, refund
 * submission): the merchant's WECHATPAY2-SHA256-RSA2048 Authorization over
 * "METHOD\nPATH\nTIMESTAMP\nNONCE\nBODY\n", a bounded response, and the
 * platform's response signature checked the same way as a callback's.
 */
#include "channel_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char *resp_header(void *ctx, const char *name)
{
    struct po_api_resp *r = ctx;
    if (strcasecmp(name, "Wechatpay-Serial") == 0)
        return r->serial;
    if (strcasecmp(name, "Wechatpay-Signature") == 0)
        return r->sig;
    if (strcasecmp(name, "Wechatpay-Timestamp") == 0)
        return r->ts;
    if (strcasecmp(name, "Wechatpay-Nonce") == 0)
        return r->nonce;
    return NULL;
}

/* "Authorization: WECHATPAY2-SHA256-RSA2048 …" for one request, or "" when
 * the account has no merchant key. */
static po_err authorization(const struct po_channel_account *a, const char *method,
                            const char *path, const char *body, char *out, size_t cap)
{
    out[0] = '\0';
    if (!a->merchant_key)
        return PO_OK;
    char ts[24], nonce[33], *sig = NULL;
    unsigned char rnd[16];
    po_err rc = po_random(rnd, sizeof rnd);
    if (rc)
        return rc;
    for (int i = 0; i < 16; i++)
        (void)snprintf(nonce + 2 * i, 3, "%02X", rnd[i]);
    (void)snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
    size_t mlen = strlen(method) + strlen(path) + strlen(ts) + strlen(nonce) + strlen(body) + 6;
    char *msg = malloc(mlen);
    if (!msg)
        return PO_ERR_NOMEM;
    (void)snprintf(msg, mlen, "%s\n%s\n%s\n%s\n%s\n", method, path, ts, nonce, body);
    rc = po_rsa_sha256_sign_b64(a->merchant_key, msg, strlen(msg), &sig);
    free(msg);
    if (!rc)
        rc = po_fmt(out, cap,
                    "Authorization: WECHATPAY2-SHA256-RSA2048 mchid=\"%s\",nonce_str=\"%s\","
                    "signature=\"%s\",timestamp=\"%s\",serial_no=\"%s\"",
                    a->mchid, nonce, sig, ts, a->merchant_serial);
    free(sig);
    return rc;
}

po_err po_wechatpay_call(const struct po_channel_account *a, const char *method, const char *path,
                         const char *body, struct po_api_resp *out)
{
    memset(out, 0, sizeof *out);
    char url[512], auth[1400];
    po_err rc = po_fmt(url, sizeof url, "%s%s", a->api_base_url, path);
    if (!rc)
        rc = authorization(a, method, path, body ? body : "", auth, sizeof auth);
    if (rc)
        return rc;
    const char *h[3] = {"Accept: application/json", body ? "Content-Type: application/json" : NULL,
                        auth[0] ? auth : NULL};
    return po_api_request(url, h, 3, body, out);
}

bool po_wechatpay_resp_signed(const struct po_channel_account *a, const struct po_api_resp *r,
                              char *reason, size_t cap)
{
    struct po_notify_req req = {r->body, r->len, resp_header, (void *)(uintptr_t)r,
                                (int64_t)time(NULL)};
    struct po_notify_result *vr = calloc(1, sizeof *vr);
    bool ok = false;
    if (vr && po_wechatpay_verify(a, &req, vr, &ok) == PO_OK && !ok && reason &&
        po_strcpy(reason, cap, vr->reason) != PO_OK)
        reason[0] = '\0';
    free(vr);
    return ok;
}
