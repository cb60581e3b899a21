/*
 * egress.c — every outbound request whose destination a tenant chooses
 * (today: webhook endpoints) goes through one policy, so that a tenant's
 * URL can never reach inside the network payonce runs in (SSRF).
 *
 * The policy, in order:
 *   1. the URL is parsed by libcurl's URL API (the parser that will send
 *      it), never by prefix matching: http or https only, no user:password
 *      part, a host; http only to loopback and only in development;
 *   2. the host is resolved ONCE here (a literal address in any of its
 *      spellings — decimal 2130706433, octal 0177.0.0.1, hex 0x7f.1,
 *      IPv4-mapped [::ffff:127.0.0.1] — is taken as that address); every
 *      address it resolves to must be allowed: loopback, private,
 *      carrier-grade NAT, link-local (cloud metadata 169.254.169.254),
 *      multicast, unspecified, reserved, and the IPv6 forms that embed
 *      one of those are refused unless an operator allow-list holds it
 *      (an on-premise receiver), or loopback in development;
 *   3. the connection goes to the addresses that were checked (libcurl's
 *      CURLOPT_RESOLVE pins them; no second resolution, no proxy from the
 *      environment) and redirects are never followed;
 *   4. what the tenant later reads about a failure is a coarse class
 *      (enum po_egress_class), never the transport's text, so an endpoint
 *      cannot be used to map which internal ports are open.
 * Nothing is connected to when the policy refuses (test_egress and
 * test_webhook's SSRF table assert it with a loopback listener).
 */
#include "channel_int.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#define RESOLVE_MAX 8 /* addresses of one host pinned at most */

/* ---- addresses ---- */

/* An IPv4 address as the IPv4-mapped IPv6 address (::ffff:a.b.c.d). */
static void mapped(const struct in_addr *v4, unsigned char out[16])
{
    memset(out, 0, 10);
    out[10] = out[11] = 0xff;
    memcpy(out + 12, &v4->s_addr, 4);
}

static bool in_prefix(const unsigned char a[16], const unsigned char net[16], int bits)
{
    int whole = bits / 8, rest = bits % 8;
    if (memcmp(a, net, (size_t)whole) != 0)
        return false;
    if (rest == 0)
        return true;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return (a[whole] & mask) == (net[whole] & mask);
}

static bool is_v4(const unsigned char a[16])
{
    static const unsigned char pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(a, pre, 12) == 0;
}

/* The class of an IPv4 address (host byte order parts). */
static enum po_egress_class class_v4(const unsigned char *b)
{
    unsigned a0 = b[0], a1 = b[1];
    if (a0 == 127)
        return PO_EGRESS_LOOPBACK;
    if (a0 == 0)
        return PO_EGRESS_UNSPECIFIED; /* 0.0.0.0/8: "this host" (Linux: loopback) */
    if (a0 == 10 || (a0 == 172 && (a1 & 0xf0) == 16) || (a0 == 192 && a1 == 168) ||
        (a0 == 100 && (a1 & 0xc0) == 64) /* carrier-grade NAT */ ||
        (a0 == 198 && (a1 & 0xfe) == 18) /* benchmarking */ ||
        (a0 == 192 && a1 == 0 && (b[2] == 0 || b[2] == 2)) /* IETF, TEST-NET-1 */ ||
        (a0 == 198 && a1 == 51 && b[2] == 100) || (a0 == 203 && a1 == 0 && b[2] == 113))
        return PO_EGRESS_PRIVATE;
    if (a0 == 169 && a1 == 254)
        return PO_EGRESS_LINK_LOCAL;
    if (a0 >= 224 && a0 < 240)
        return PO_EGRESS_MULTICAST;
    if (a0 >= 240)
        return PO_EGRESS_RESERVED; /* and 255.255.255.255 */
    return PO_EGRESS_PUBLIC;
}

enum po_egress_class po_egress_classify(const unsigned char a[16])
{
    static const unsigned char zero[16] = {0};
    if (is_v4(a))
        return class_v4(a + 12);
    if (memcmp(a, zero, 15) == 0)
        return a[15] == 1 ? PO_EGRESS_LOOPBACK : PO_EGRESS_UNSPECIFIED; /* ::1, :: */
    /* Forms that carry an IPv4 address, judged by what they carry: the
     * translations — IPv4-compatible ::a.b.c.d, SIIT's IPv4-translated
     * ::ffff:0:a.b.c.d (::ffff:0:0:0/96), NAT64's well-known 64:ff9b::/96
     * and local-use 64:ff9b:1::/48 (RFC 8215; the address in octets 6-7
     * and 9-10, RFC 6052's /48 layout around the u-octet) — are refused
     * outright, as the address they carry when it is not public; the
     * tunnels — 6to4 2002::/16 (its router's address in octets 2-5) and
     * Teredo 2001::/32 (its server's in octets 4-7, its client's inverted
     * in 12-15) — are what the addresses they carry are. */
    static const unsigned char nat64[16] = {0, 0x64, 0xff, 0x9b};
    static const unsigned char nat64_local[16] = {0, 0x64, 0xff, 0x9b, 0, 1};
    static const unsigned char siit[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0};
    static const unsigned char six2four[16] = {0x20, 0x02};
    static const unsigned char teredo[16] = {0x20, 0x01, 0, 0};
    if (memcmp(a, zero, 12) == 0 || in_prefix(a, nat64, 96) || in_prefix(a, siit, 96)) {
        enum po_egress_class c = class_v4(a + 12);
        return c == PO_EGRESS_PUBLIC ? PO_EGRESS_RESERVED : c;
    }
    if (in_prefix(a, nat64_local, 48)) {
        const unsigned char v4[4] = {a[6], a[7], a[9], a[10]};
        enum po_egress_class c = class_v4(v4);
        return c == PO_EGRESS_PUBLIC ? PO_EGRESS_RESERVED : c;
    }
    if (in_prefix(a, six2four, 16))
        return class_v4(a + 2);
    if (in_prefix(a, teredo, 32)) {
        const unsigned char client[4] = {(unsigned char)~a[12], (unsigned char)~a[13],
                                         (unsigned char)~a[14], (unsigned char)~a[15]};
        enum po_egress_class c = class_v4(a + 4);
        return c != PO_EGRESS_PUBLIC ? c : class_v4(client);
    }
    if ((a[0] & 0xfe) == 0xfc)
        return PO_EGRESS_PRIVATE; /* unique local fc00::/7 */
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
        return PO_EGRESS_LINK_LOCAL; /* fe80::/10 */
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0)
        return PO_EGRESS_PRIVATE; /* site-local fec0::/10 (deprecated) */
    if (a[0] == 0xff)
        return PO_EGRESS_MULTICAST;
    static const unsigned char doc[16] = {0x20, 0x01, 0x0d, 0xb8};
    if (in_prefix(a, doc, 32))
        return PO_EGRESS_RESERVED; /* documentation 2001:db8::/32 */
    return PO_EGRESS_PUBLIC;
}

/* A literal address in any spelling the resolver or libcurl would accept
 * (inet_aton takes 2130706433, 0177.0.0.1, 0x7f.1, 127.1). */
static bool literal(const char *host, unsigned char out[16])
{
    size_t n = strlen(host);
    char buf[64];
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']' && n - 2 < sizeof buf) {
        memcpy(buf, host + 1, n - 2);
        buf[n - 2] = '\0';
        char *zone = strchr(buf, '%'); /* fe80::1%eth0 */
        if (zone)
            *zone = '\0';
        return inet_pton(AF_INET6, buf, out) == 1;
    }
    if (inet_pton(AF_INET6, host, out) == 1)
        return true;
    struct in_addr v4;
    if (inet_aton(host, &v4) == 1) {
        mapped(&v4, out);
        return true;
    }
    return false;
}

/* ---- the operator's allow-list ---- */

po_err po_egress_policy_parse(const char *cidrs, bool allow_loopback, struct po_egress_policy *out,
                              char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    out->allow_loopback = allow_loopback;
    if (!cidrs || !*cidrs)
        return PO_OK;
    char buf[PO_EGRESS_ALLOW_MAX * 48];
    if (po_strcpy(buf, sizeof buf, cidrs)) {
        po_errf(err, errcap, "the allow-list is too long (%d networks at most)",
                PO_EGRESS_ALLOW_MAX);
        return PO_ERR_LIMIT;
    }
    char *save = NULL;
    for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        if (out->nallow == PO_EGRESS_ALLOW_MAX) {
            po_errf(err, errcap, "the allow-list has more than %d networks", PO_EGRESS_ALLOW_MAX);
            return PO_ERR_LIMIT;
        }
        char *slash = strchr(t, '/');
        int64_t bits = -1;
        if (slash)
            *slash = '\0';
        struct in_addr v4;
        unsigned char *a = out->allow[out->nallow].addr;
        bool is4 = inet_pton(AF_INET, t, &v4) == 1;
        bool ok = is4 || inet_pton(AF_INET6, t, a) == 1;
        if (ok && is4)
            mapped(&v4, a);
        if (ok)
            bits = is4 ? 32 : 128;
        if (ok && slash && po_parse_i64(slash + 1, 0, bits, &bits))
            ok = false;
        if (!ok) {
            po_errf(err, errcap,
                    "allow-list: \"%.60s\" is not an address or network (e.g. 10.2.0.0/16,"
                    " fd00::/8)",
                    t);
            return PO_ERR_INVALID;
        }
        out->allow[out->nallow].bits = (int)(is4 ? bits + 96 : bits);
        out->nallow++;
    }
    return PO_OK;
}

/* Whether the policy lets a connection go to address a. */
static bool allowed(const struct po_egress_policy *p, const unsigned char a[16])
{
    enum po_egress_class c = po_egress_classify(a);
    if (c == PO_EGRESS_PUBLIC)
        return true;
    if (c == PO_EGRESS_LOOPBACK && p->allow_loopback)
        return true;
    for (int i = 0; i < p->nallow; i++)
        if (in_prefix(a, p->allow[i].addr, p->allow[i].bits))
            return true;
    return false;
}

const char *po_egress_class_name(enum po_egress_class c)
{
    switch (c) {
    case PO_EGRESS_PUBLIC:
        return "public";
    case PO_EGRESS_LOOPBACK:
        return "loopback";
    case PO_EGRESS_PRIVATE:
        return "private";
    case PO_EGRESS_LINK_LOCAL:
        return "link-local";
    case PO_EGRESS_MULTICAST:
        return "multicast";
    case PO_EGRESS_UNSPECIFIED:
        return "unspecified";
    case PO_EGRESS_RESERVED:
        return "reserved";
    }
    return "?";
}

/* ---- URLs ---- */

/* The parts of a URL the policy looks at; false with the reason when the
 * URL is not one payonce sends to. */
struct target {
    char scheme[8];
    char host[256]; /* as libcurl parsed it (brackets kept for IPv6) */
    long port;
};

static bool parse(const struct po_egress_policy *p, const char *url, struct target *t, char *err,
                  size_t errcap)
{
    size_t n = url ? strlen(url) : 0;
    if (n == 0 || n > PO_URL_MAX) {
        po_errf(err, errcap, "the URL must be 1..%d characters", PO_URL_MAX);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)url[i] <= ' ' || (unsigned char)url[i] >= 0x7f) {
            po_errf(err, errcap, "the URL holds a space or a control or non-ASCII character");
            return false;
        }
    CURLU *u = curl_url();
    if (!u) {
        po_errf(err, errcap, "out of memory");
        return false;
    }
    char *scheme = NULL, *host = NULL, *user = NULL, *pass = NULL, *port = NULL;
    bool ok = curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK;
    if (!ok)
        po_errf(err, errcap, "not a URL (scheme://host[:port]/path)");
    (void)curl_url_get(u, CURLUPART_USER, &user, 0);
    (void)curl_url_get(u, CURLUPART_PASSWORD, &pass, 0);
    if (ok && (user || pass)) {
        po_errf(err, errcap, "the URL may not carry a user or password (user@host)");
        ok = false;
    }
    if (ok && strcmp(scheme, "https") != 0 && strcmp(scheme, "http") != 0) {
        po_errf(err, errcap, "the URL must be https:// (http:// only to loopback, in development)");
        ok = false;
    }
    int64_t portnum = 0;
    if (ok && (po_parse_i64(port, 1, 65535, &portnum) || po_strcpy(t->host, sizeof t->host, host) ||
               po_strcpy(t->scheme, sizeof t->scheme, scheme))) {
        po_errf(err, errcap, "the URL's host or port is not valid");
        ok = false;
    }
    t->port = (long)portnum;
    curl_free(scheme);
    curl_free(host);
    curl_free(user);
    curl_free(pass);
    curl_free(port);
    curl_url_cleanup(u);
    if (!ok)
        return false;
    /* http:// is plain text to anyone on the path: development only, and
     * only to this machine. */
    unsigned char a[16];
    bool loop = strcasecmp(t->host, "localhost") == 0 ||
                (literal(t->host, a) && po_egress_classify(a) == PO_EGRESS_LOOPBACK);
    if (strcmp(t->scheme, "http") == 0 && !(p->allow_loopback && loop)) {
        po_errf(err, errcap,
                p->allow_loopback ? "http:// only to loopback (127.0.0.1, [::1], localhost);"
                                    " elsewhere https://"
                                  : "the URL must be https:// (http:// only to loopback, with"
                                    " --insecure-dev)");
        return false;
    }
    return true;
}

/* Whether a host NAME (not a literal) is one that always means this
 * machine, whatever DNS says (RFC 6761: localhost and *.localhost). */
static bool local_name(const char *host)
{
    size_t n = strlen(host);
    while (n && host[n - 1] == '.')
        n--;
    return (n == 9 && strncasecmp(host, "localhost", 9) == 0) ||
           (n > 10 && strncasecmp(host + n - 10, ".localhost", 10) == 0);
}

bool po_egress_url_ok(const struct po_egress_policy *p, const char *url, char *err, size_t errcap)
{
    struct target t;
    if (!parse(p, url, &t, err, errcap))
        return false;
    unsigned char a[16];
    if (literal(t.host, a)) {
        if (!allowed(p, a)) {
            po_errf(err, errcap,
                    "the URL's address is %s: payonce does not send there (an operator may"
                    " allow a network with webhook-allow-net)",
                    po_egress_class_name(po_egress_classify(a)));
            return false;
        }
    } else if (local_name(t.host) && !p->allow_loopback) {
        po_errf(err, errcap,
                "the URL's host is this machine (localhost): payonce does not send"
                " there");
        return false;
    }
    return true;
}

/* Resolves the target once and checks every address; out: the
 * CURLOPT_RESOLVE entry "host:port:addr1,addr2,…" that pins them. */
static enum po_egress_error resolve(const struct po_egress_policy *p, const struct target *t,
                                    char *pin, size_t pincap, char *detail, size_t dcap)
{
    unsigned char a[16];
    char text[INET6_ADDRSTRLEN + 2];
    /* libcurl connects to a literal host as written: check it, nothing to
     * pin. */
    if (literal(t->host, a)) {
        pin[0] = '\0';
        if (allowed(p, a))
            return PO_EGRESS_OK;
        po_errf(detail, dcap, "%s address", po_egress_class_name(po_egress_classify(a)));
        return PO_EGRESS_REFUSED;
    }
    if (local_name(t->host) && !p->allow_loopback) {
        po_errf(detail, dcap, "localhost");
        return PO_EGRESS_REFUSED;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int g = getaddrinfo(t->host, NULL, &hints, &res);
    if (g != 0 || !res) {
        po_errf(detail, dcap, "%s", gai_strerror(g));
        return PO_EGRESS_DNS;
    }
    int n = snprintf(pin, pincap, "%s:%ld:", t->host, t->port), count = 0;
    const int list = n; /* where the addresses start */
    enum po_egress_error rc = PO_EGRESS_OK;
    for (struct addrinfo *i = res; i && rc == PO_EGRESS_OK && count < RESOLVE_MAX; i = i->ai_next) {
        if (i->ai_family == AF_INET) {
            const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)i->ai_addr;
            mapped(&s4->sin_addr, a);
            inet_ntop(AF_INET, &s4->sin_addr, text, sizeof text);
        } else if (i->ai_family == AF_INET6) {
            const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)i->ai_addr;
            memcpy(a, &s6->sin6_addr, 16);
            text[0] = '[';
            inet_ntop(AF_INET6, &s6->sin6_addr, text + 1, sizeof text - 2);
            size_t l = strlen(text);
            text[l] = ']';
            text[l + 1] = '\0';
        } else {
            continue;
        }
        /* Every address must pass: a name that resolves to one public and
         * one internal address is refused (a rebinding trick). */
        if (!allowed(p, a)) {
            po_errf(detail, dcap, "the name resolves to a %s address",
                    po_egress_class_name(po_egress_classify(a)));
            rc = PO_EGRESS_REFUSED;
        } else if (n < (int)pincap && strstr(pin + list, text) == NULL) {
            n += snprintf(pin + n, n < (int)pincap ? pincap - (size_t)n : 0, "%s%s",
                          count ? "," : "", text);
            count++;
        }
    }
    freeaddrinfo(res);
    if (rc == PO_EGRESS_OK && (count == 0 || n >= (int)pincap)) {
        po_errf(detail, dcap, "no usable address");
        rc = PO_EGRESS_DNS;
    }
    return rc;
}

const char *po_egress_error_text(enum po_egress_error e)
{
    switch (e) {
    case PO_EGRESS_OK:
        return "";
    case PO_EGRESS_REFUSED:
        return "destination refused by payonce's egress policy";
    case PO_EGRESS_BAD_URL:
        return "the URL is not one payonce sends to";
    case PO_EGRESS_DNS:
        return "the host name did not resolve";
    case PO_EGRESS_CONNECT:
        return "could not connect";
    case PO_EGRESS_TIMEOUT:
        return "no answer in time";
    case PO_EGRESS_TLS:
        return "TLS failed (handshake or certificate)";
    case PO_EGRESS_SEND:
        return "the connection failed during the request";
    }
    return "?";
}

/* The body of the answer is read and dropped (its size does not matter). */
static size_t drop_body(char *d, size_t sz, size_t n, void *ctx)
{
    (void)d;
    (void)ctx;
    return sz * n;
}

static enum po_egress_error class_of(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
        return PO_EGRESS_DNS;
    case CURLE_COULDNT_CONNECT:
        return PO_EGRESS_CONNECT;
    case CURLE_OPERATION_TIMEDOUT:
        return PO_EGRESS_TIMEOUT;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
        return PO_EGRESS_TLS;
    default:
        return PO_EGRESS_SEND;
    }
}

po_err po_http_post(const struct po_egress_policy *p, const char *url, const char *const *headers,
                    int nheaders, const char *body, long timeout_ms, struct po_egress_result *out)
{
    memset(out, 0, sizeof *out);
    struct target t;
    char why[PO_ERRBUF_SIZE] = "", pin[PO_URL_MAX + RESOLVE_MAX * (INET6_ADDRSTRLEN + 3)];
    if (!parse(p, url, &t, why, sizeof why)) {
        out->error = PO_EGRESS_BAD_URL;
        po_errf(out->detail, sizeof out->detail, "%s", why);
        return PO_OK;
    }
    out->error = resolve(p, &t, pin, sizeof pin, out->detail, sizeof out->detail);
    if (out->error)
        return PO_OK; /* nothing was connected to */
    CURL *c = curl_easy_init();
    if (!c)
        return PO_ERR_NOMEM;
    struct curl_slist *h = NULL, *r = NULL;
    po_err rc = PO_OK;
    for (int i = 0; !rc && i < nheaders; i++)
        if (headers[i]) {
            struct curl_slist *nh = curl_slist_append(h, headers[i]);
            rc = nh ? PO_OK : PO_ERR_NOMEM;
            h = nh ? nh : h;
        }
    if (!rc && pin[0] && !(r = curl_slist_append(NULL, pin)))
        rc = PO_ERR_NOMEM;
    if (rc) {
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        return rc;
    }
    char cerr[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_RESOLVE, r);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*"); /* no proxy from the environment */
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, drop_body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 5000 ? timeout_ms : 5000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, t.scheme);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    CURLcode cc = curl_easy_perform(c);
    if (cc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    } else {
        out->error = class_of(cc);
        po_errf(out->detail, sizeof out->detail, "%s", cerr[0] ? cerr : curl_easy_strerror(cc));
    }
    curl_slist_free_all(h);
    curl_slist_free_all(r);
    curl_easy_cleanup(c);
    return PO_OK;
}
