/*
 * api_http.c — one bounded HTTP request to a channel's API (libcurl): 10 s
 * total by default (serve's --channel-timeout-ms), 5 s to connect at most,
 * http(s) only, the answer read up to the bound its API states (limits.h:
 * one object, or a list page), and WeChat Pay's Wechatpay-* response
 * headers kept for its signature check; and one bounded download (a bill:
 * 120 s, streamed to a temporary file up to its own bound).
 *
 * Every request says who sends it — `User-Agent: payonce/<version>
 * curl/<version> (<os> <machine>)` — and what it takes (`Accept`): WeChat
 * Pay API v3 refuses a request without either (400 INVALID_REQUEST, "Http头
 * 缺少Accept或User-Agent"), and every channel's logs name the client by it.
 *
 * An answer longer than its bound is no answer (status 0) with too_large
 * set, so that the caller's reason names the bound (po_api_why_none), never
 * a bare no_answer: an operator then knows to raise nothing but a limit.
 */
#include "channel_int.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>

#ifndef PO_VERSION
#define PO_VERSION "0"
#endif

static char user_agent[200];
static pthread_once_t user_agent_once = PTHREAD_ONCE_INIT;

static void user_agent_init(void)
{
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    struct utsname u;
    bool have_os = uname(&u) == 0;
    (void)snprintf(user_agent, sizeof user_agent, "User-Agent: payonce/%s curl/%s (%s %s)",
                   PO_VERSION, v && v->version ? v->version : "0", have_os ? u.sysname : "Linux",
                   have_os ? u.machine : "unknown");
}

const char *po_api_user_agent(void)
{
    (void)pthread_once(&user_agent_once, user_agent_init);
    return user_agent + sizeof "User-Agent: " - 1;
}

/* Appends to the answer's heap buffer, up to r->max bytes. */
static size_t on_body(char *d, size_t sz, size_t n, void *ctx)
{
    struct po_api_resp *r = ctx;
    size_t take = sz * n;
    if (take > r->max || r->len > r->max - take) {
        r->too_large = true;
        return 0; /* too large: abort the transfer */
    }
    if (r->len + take + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 16384;
        while (cap < r->len + take + 1)
            cap *= 2;
        char *p = realloc(r->body, cap);
        if (!p) {
            r->nomem = true;
            return 0;
        }
        r->body = p;
        r->cap = cap;
    }
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
             {"Wechatpay-Nonce:", r->nonce, sizeof r->nonce},
             {"Retry-After:", r->retry_after, sizeof r->retry_after}};
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

/* A download streamed to a temporary file, bounded by max. */
struct download {
    FILE *f;
    size_t len, max;
    bool too_large, io_error;
};

static size_t on_download(char *d, size_t sz, size_t n, void *ctx)
{
    struct download *b = ctx;
    size_t take = sz * n;
    if (take > b->max || b->len > b->max - take) {
        b->too_large = true;
        return 0; /* too large: abort the transfer */
    }
    if (fwrite(d, 1, take, b->f) != take) {
        b->io_error = true;
        return 0;
    }
    b->len += take;
    return take;
}

/* A channel API call's whole budget (a bill download has its own). */
static atomic_long api_timeout_ms = 10000;

void po_api_set_timeout_ms(long ms)
{
    atomic_store(&api_timeout_ms, ms < 100 ? 100 : ms);
}

/* The common settings of one bounded request: the caller's headers, then
 * the User-Agent and, unless the caller named one, Accept (accept: its
 * value); *h (the caller frees them after the transfer). NULL when out of
 * memory. */
static bool add_header(struct curl_slist **h, const char *line)
{
    struct curl_slist *n = curl_slist_append(*h, line);
    if (n)
        *h = n;
    return n != NULL; /* on failure *h is unchanged, still the caller's to free */
}

static CURL *easy(const char *url, const char *const *headers, int nheaders, const char *accept,
                  long timeout_ms, struct curl_slist **h)
{
    *h = NULL;
    bool has_accept = false, ok = true;
    for (int i = 0; ok && i < nheaders; i++)
        if (headers[i]) {
            has_accept |= strncasecmp(headers[i], "Accept:", 7) == 0;
            ok = add_header(h, headers[i]);
        }
    (void)pthread_once(&user_agent_once, user_agent_init);
    ok = ok && add_header(h, user_agent);
    if (ok && !has_accept) {
        char line[64];
        (void)snprintf(line, sizeof line, "Accept: %s", accept);
        ok = add_header(h, line);
    }
    CURL *c = ok ? curl_easy_init() : NULL;
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

void po_api_resp_release(struct po_api_resp *r)
{
    if (!r)
        return;
    free(r->body);
    r->body = NULL;
    r->len = r->cap = 0;
}

void po_api_why_none(const struct po_api_resp *r, char *why, size_t cap)
{
    if (r->too_large && r->max >= 1024 * 1024 && r->max % (1024 * 1024) == 0)
        (void)snprintf(why, cap, "answer_over_%zuMiB", r->max / (1024 * 1024));
    else if (r->too_large)
        (void)snprintf(why, cap, "answer_over_%zuKiB", r->max / 1024);
    else
        (void)snprintf(why, cap, "no_answer");
}

po_err po_api_download(const char *url, const char *const *headers, int nheaders, size_t max,
                       struct po_api_resp *out)
{
    memset(out, 0, sizeof *out);
    out->max = max;
    struct curl_slist *h;
    FILE *f = tmpfile();
    if (!f)
        return PO_ERR_NOMEM; /* no temporary file: like no memory, try later */
    CURL *c = easy(url, headers, nheaders, "*/*", 120000L, &h);
    if (!c) {
        fclose(f);
        return PO_ERR_NOMEM;
    }
    struct download b = {f, 0, max, false, false};
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_download);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    out->too_large = b.too_large;
    po_err rc = PO_OK;
    if (status && !b.io_error && fflush(f) == 0 && fseek(f, 0, SEEK_SET) == 0) {
        /* the whole file arrived within its bound: one allocation of its size */
        char *data = malloc(b.len + 1);
        if (!data)
            rc = PO_ERR_NOMEM;
        else if (fread(data, 1, b.len, f) != b.len)
            free(data); /* a temporary file that cannot be read back: no answer */
        else {
            data[b.len] = '\0';
            out->body = data;
            out->len = out->cap = b.len;
            out->status = status;
        }
    }
    fclose(f);
    return rc;
}

po_err po_api_request(const char *url, const char *const *headers, int nheaders, const char *body,
                      size_t max, struct po_api_resp *out)
{
    memset(out, 0, sizeof *out);
    out->max = max;
    struct curl_slist *h;
    CURL *c = easy(url, headers, nheaders, "application/json", atomic_load(&api_timeout_ms), &h);
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
    if (out->nomem) {
        po_api_resp_release(out);
        return PO_ERR_NOMEM;
    }
    if (!out->status)
        po_api_resp_release(out); /* no (whole) answer: nothing of it is kept */
    else if (!out->body && !(out->body = calloc(1, 1)))
        return PO_ERR_NOMEM; /* an empty answer reads as "" */
    return PO_OK;
}
