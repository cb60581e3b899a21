/*
 * api_http.c — one bounded HTTP request to a channel's API (libcurl): 10 s
 * total by default (serve's --channel-timeout-ms), 5 s to connect at most, http(s) only, the answer
 * capped at 16 KiB, and WeChat Pay's Wechatpay-* response headers kept for its signature check; and
 * one bounded download (a bill: 120 s, up to a stated size).
 */
#include "channel_int.h"

#include <curl/curl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
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

/* A download's growing buffer, bounded by max. */
struct download {
    char *data;
    size_t len, cap, max;
    bool nomem;
};

static size_t on_download(char *d, size_t sz, size_t n, void *ctx)
{
    struct download *b = ctx;
    size_t take = sz * n;
    if (b->len + take + 1 > b->max)
        return 0; /* too large: abort the transfer */
    if (b->len + take + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->len + take + 1)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) {
            b->nomem = true;
            return 0;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, d, take);
    b->len += take;
    b->data[b->len] = '\0';
    return take;
}

/* The common settings of one bounded request, its headers in *h (the
 * caller frees them after the transfer); NULL when out of memory. */
/* A channel API call's whole budget (a bill download has its own). */
static atomic_long api_timeout_ms = 10000;

void po_api_set_timeout_ms(long ms)
{
    atomic_store(&api_timeout_ms, ms < 100 ? 100 : ms);
}

static CURL *easy(const char *url, const char *const *headers, int nheaders, long timeout_ms,
                  struct curl_slist **h)
{
    *h = NULL;
    for (int i = 0; i < nheaders; i++)
        if (headers[i])
            *h = curl_slist_append(*h, headers[i]);
    CURL *c = curl_easy_init();
    if (!c) {
        curl_slist_free_all(*h);
        *h = NULL;
        return NULL;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 5000 ? timeout_ms : 5000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    return c;
}

po_err po_api_download(const char *url, const char *const *headers, int nheaders, size_t max,
                       char **data, size_t *len, long *status)
{
    *data = NULL;
    *len = 0;
    *status = 0;
    struct curl_slist *h;
    CURL *c = easy(url, headers, nheaders, 120000L, &h);
    if (!c)
        return PO_ERR_NOMEM;
    struct download b = {NULL, 0, 0, max, false};
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_download);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (b.nomem || !*status) {
        free(b.data);
        return b.nomem ? PO_ERR_NOMEM : PO_OK;
    }
    *data = b.data ? b.data : calloc(1, 1);
    *len = b.len;
    return *data ? PO_OK : PO_ERR_NOMEM;
}

po_err po_api_request(const char *url, const char *const *headers, int nheaders, const char *body,
                      struct po_api_resp *out)
{
    struct curl_slist *h;
    CURL *c = easy(url, headers, nheaders, atomic_load(&api_timeout_ms), &h);
    if (!c)
        return PO_ERR_NOMEM;
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, out);
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
