/*
 * api_http.c — one bounded HTTP request to a channel's API (libcurl): 10 s
 * total, 5 s to connect, http(s) only, the answer capped at 16 KiB, and
 * WeChat Pay's Wechatpay-* response headers kept for its signature check.
 */
#include "channel_int.h"

#include <curl/curl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static size_t on_body(char *d, size_t sz, size_t n, void *ctx)
{
    struct po_api_resp *r = ctx;
    size_t take = sz * n;
    if (r->len + take >= sizeof r->body)
        return 0; /* too large: abort the transfer */
    memcpy(r->body + r->len, d, take);
    r->len += take;
    r->body[r->len] = '\0';
    return take;
}

static size_t on_header(char *d, size_t sz, size_t n, void *ctx)
{
    struct po_api_resp *r = ctx;
    size_t len = sz * n;
    struct {
        const char *name;
        char *dst;
        size_t cap;
    } h[] = {{"Wechatpay-Serial:", r->serial, sizeof r->serial},
             {"Wechatpay-Signature:", r->sig, sizeof r->sig},
             {"Wechatpay-Timestamp:", r->ts, sizeof r->ts},
             {"Wechatpay-Nonce:", r->nonce, sizeof r->nonce}};
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++) {
        size_t nl = strlen(h[i].name);
        if (len > nl && strncasecmp(d, h[i].name, nl) == 0) {
            const char *v = d + nl;
            size_t vl = len - nl;
            while (vl && (*v == ' ' || *v == '\t'))
                v++, vl--;
            while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n'))
                vl--;
            if (vl < h[i].cap) {
                memcpy(h[i].dst, v, vl);
                h[i].dst[vl] = '\0';
            }
        }
    }
    return len;
}

po_err po_api_request(const char *url, const char *const *headers, int nheaders, const char *body,
                      struct po_api_resp *out)
{
    CURL *c = curl_easy_init();
    if (!c)
        return PO_ERR_NOMEM;
    struct curl_slist *h = NULL;
    for (int i = 0; i < nheaders; i++)
        if (headers[i])
            h = curl_slist_append(h, headers[i]);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return PO_OK;
}
