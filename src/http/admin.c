/*
 * admin.c — the operator's console (docs/operations.md, "The console"),
 * served by `payonce serve --console` (or with --admin-token-file) on the
 * operations listener when there is one:
 *
 *   GET  /admin, /admin/console.js, /admin/console.css
 *                               the page, its script and style, embedded
 *                               (src/http/console/); nothing is fetched
 *                               from elsewhere and no script is inline
 *                               (Content-Security-Policy says so)
 *   POST /admin/login           {"name","password"} → a session cookie
 *   POST /admin/logout
 *   GET  /admin/api/VIEW        the views (admin_api.c)
 *   POST /admin/api/AREA/ACTION the actions: alerts/ack, resolve, replay,
 *                               accept, refund, redrive; webhooks/redrive;
 *                               recon/fetch (admin_api.c)
 *
 * Whom it answers: a request whose Host is one of the console's own
 * addresses (--console-origin, by default the listener's; 421 otherwise:
 * a DNS-rebinding page speaks to us under its own name) and whose Origin,
 * when a browser sends one, is one of its origins (403 otherwise). A
 * sign-in runs on its own pool, rate-limited per address and per name
 * before any password is hashed (service/accounts/signin.h).
 *
 * Who asks: an operator signed in (the cookie po_session: HttpOnly,
 * SameSite=Strict, Path=/admin, Secure when the request came over TLS,
 * i.e. X-Forwarded-Proto: https from the proxy that ends it), whose role
 * decides what they may do; or a script with the admin token as a bearer
 * (acts as "dashboard"). A POST on a session must carry the session's CSRF
 * token in X-CSRF-Token; the login takes JSON only (a cross-site form
 * cannot send it). Every
 * answer is JSON (the report also CSV); the page puts every value in as
 * text, never as markup.
 */
#include "admin_int.h"

#include "../crypto/crypto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct po_asset {
    const char *name, *type, *text;
};
extern const struct po_asset po_console_assets[];
extern const int po_console_assets_count;

#define COOKIE "po_session"

static bool bearer_ok(const struct po_hcall *h)
{
    const char *auth = h->req.header(h->req.ctx, "Authorization");
    size_t n = strlen(h->ctx->admin_token);
    return n && auth && strncmp(auth, "Bearer ", 7) == 0 && strlen(auth + 7) == n &&
           po_ct_equal(auth + 7, h->ctx->admin_token, n);
}

/* The value of cookie `name` in the Cookie header, or false. */
static bool cookie(const struct po_hcall *h, const char *name, char *out, size_t cap)
{
    const char *c = h->req.header(h->req.ctx, "Cookie");
    size_t nl = strlen(name);
    while (c && *c) {
        c += strspn(c, " ;");
        size_t len = strcspn(c, ";");
        if (len > nl && strncmp(c, name, nl) == 0 && c[nl] == '=') {
            size_t v = len - nl - 1;
            if (v >= cap)
                return false;
            memcpy(out, c + nl + 1, v);
            out[v] = 0;
            return true;
        }
        c += len;
    }
    return false;
}

static bool over_tls(const struct po_hcall *h)
{
    const char *p = h->req.header(h->req.ctx, "X-Forwarded-Proto");
    return p && strcmp(p, "https") == 0;
}

static void set_cookie(struct po_hcall *h, const char *value, int max_age)
{
    char c[192];
    (void)snprintf(c, sizeof c, COOKIE "=%s; Path=/admin; Max-Age=%d; HttpOnly; SameSite=Strict%s",
                   value, max_age, over_tls(h) ? "; Secure" : "");
    po_hresp_header(&h->resp, "Set-Cookie", c);
}

/* ---- who may be answered: the allow-list (--console-origin) ---- */

/* An authority "host:port" of letters, digits and .-:[] only. */
static bool authority_ok(const char *a)
{
    if (!*a || strlen(a) >= 128)
        return false;
    for (const char *p = a; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr(".-:[]", *p)))
            return false;
    return true;
}

static bool add_origin(struct po_http_ctx *ctx, const char *scheme, const char *authority)
{
    if (ctx->norigins == PO_CONSOLE_ORIGINS_MAX || !authority_ok(authority))
        return false;
    int i = ctx->norigins++;
    (void)snprintf(ctx->console_host[i], sizeof ctx->console_host[i], "%s", authority);
    (void)snprintf(ctx->console_origin[i], sizeof ctx->console_origin[i], "%s://%s", scheme,
                   authority);
    return true;
}

po_err po_admin_origins(struct po_http_ctx *ctx, const char *list, const char *listen,
                        unsigned port, char *err, size_t errcap)
{
    ctx->norigins = 0;
    if (list && *list) {
        char copy[1024];
        if (po_strcpy(copy, sizeof copy, list)) {
            po_errf(err, errcap, "console-origin: at most %zu bytes", sizeof copy - 1);
            return PO_ERR_INVALID;
        }
        for (char *save = NULL, *o = strtok_r(copy, ", ", &save); o;
             o = strtok_r(NULL, ", ", &save)) {
            const char *scheme = strncmp(o, "https://", 8) == 0  ? "https"
                                 : strncmp(o, "http://", 7) == 0 ? "http"
                                                                 : NULL;
            const char *auth = scheme ? o + strlen(scheme) + 3 : NULL;
            if (!scheme || !add_origin(ctx, scheme, auth)) {
                po_errf(err, errcap,
                        "console-origin: %.80s: at most %d origins, each http(s)://host[:port]"
                        " (no path)",
                        o, PO_CONSOLE_ORIGINS_MAX);
                return PO_ERR_INVALID;
            }
        }
        return PO_OK;
    }
    /* The listener's own address; a wildcard one is reached by its loopback
     * names until --console-origin says more. */
    char host[100] = "", a[128];
    const char *colon = strrchr(listen ? listen : "", ':');
    size_t hl = colon ? (size_t)(colon - listen) : 0;
    if (hl < sizeof host)
        memcpy(host, listen, hl), host[hl] = '\0';
    bool wild = !*host || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "[::]") == 0 ||
                strcmp(host, "::") == 0 || strcmp(host, "*") == 0;
    const char *const loop[] = {"127.0.0.1", "localhost", "[::1]"};
    for (int i = 0; i < (wild ? 3 : 1); i++) {
        (void)snprintf(a, sizeof a, "%s:%u", wild ? loop[i] : host, port);
        if (!add_origin(ctx, "http", a) || !add_origin(ctx, "https", a)) {
            po_errf(err, errcap, "console: the listener's address %.100s is not a host:port",
                    listen);
            return PO_ERR_INVALID;
        }
    }
    return PO_OK;
}

/* 0 when the request may be answered: its Host is an allowed authority
 * and its Origin, when the browser sends one, an allowed origin; else the
 * status to refuse it with — 421 for another Host (a DNS-rebinding page
 * speaks to us under its own name), 403 for another Origin. */
static unsigned not_allowed(const struct po_hcall *h)
{
    const char *origin = h->req.header(h->req.ctx, "Origin"),
               *host = h->req.header(h->req.ctx, "Host");
    bool host_ok = false, origin_ok = !origin;
    for (int i = 0; i < h->ctx->norigins; i++) {
        host_ok = host_ok || (host && strcasecmp(host, h->ctx->console_host[i]) == 0);
        origin_ok = origin_ok || strcasecmp(origin, h->ctx->console_origin[i]) == 0;
    }
    return !host_ok ? 421 : !origin_ok ? 403 : 0;
}

/* POST /admin/login {"name","password"}: checked here (cheap), then the
 * password on the sign-in pool (service/accounts/signin.h), never on a worker nor
 * with one of the gateway's connections. */
struct login_call {
    struct po_signin_req r;
    struct po_hcall *h;
    char name[PO_OPERATOR_MAX + 1]; /* for the log, when valid */
};

static void login_answer(struct po_hcall *h, enum po_signin_result res, int retry_after_s,
                         struct po_session *ses)
{
    char ra[16];
    switch (res) {
    case PO_SIGNIN_OK:
        set_cookie(h, ses->token, PO_SESSION_TTL_S);
        po_admin_json(h, json_pack("{s:s, s:s, s:s, s:s}", "name", ses->name, "role",
                                   po_role_name(ses->role), "csrf", ses->csrf, "expires_at",
                                   ses->expires_at));
        break;
    case PO_SIGNIN_REFUSED: /* unknown, locked or wrong: one answer */
        po_admin_error(h, 401, "unauthorized", "unknown operator or wrong password");
        break;
    case PO_SIGNIN_LIMITED:
        po_admin_error(h, 429, "rate_limited", "too many sign-in attempts: try again later");
        (void)snprintf(ra, sizeof ra, "%d", retry_after_s > 0 ? retry_after_s : 1);
        po_hresp_header(&h->resp, "Retry-After", ra);
        break;
    case PO_SIGNIN_UNAVAILABLE:
        po_admin_unavailable(h);
        break;
    }
    po_secure_zero(ses, sizeof *ses);
}

static void login_log(const char *name, enum po_signin_result res)
{
    /* a flood over the rate limit is not a line per attempt */
    po_log(res == PO_SIGNIN_OK        ? PO_LOG_INFO
           : res == PO_SIGNIN_LIMITED ? PO_LOG_DEBUG
                                      : PO_LOG_WARN,
           "console: %s signs in%s", *name ? name : "(bad name)",
           res == PO_SIGNIN_OK        ? ""
           : res == PO_SIGNIN_LIMITED ? ": rate limited"
                                      : ": refused");
}

static void login_done(struct po_signin_req *r)
{
    struct login_call *lc = r->user;
    struct po_hcall *h = lc->h;
    login_answer(h, r->result, r->retry_after_s, &r->ses);
    login_log(lc->name, r->result);
    free(lc);
    h->complete(h);
}

static bool login(struct po_hcall *h)
{
    const char *type = h->req.header(h->req.ctx, "Content-Type");
    if (!type || strncmp(type, "application/json", 16) != 0) {
        po_admin_error(h, 403, "forbidden", "sign in from the console's page (JSON, same origin)");
        return false;
    }
    json_t *in = NULL;
    if (po_json_parse(h->req.body, h->req.body_len, &in, NULL, 0) || !json_is_object(in)) {
        json_decref(in);
        po_admin_error(h, 400, "invalid_request", "a JSON object {name, password}");
        return false;
    }
    const char *name = json_string_value(json_object_get(in, "name"));
    json_t *pw = json_object_get(in, "password");
    struct login_call *lc = calloc(1, sizeof *lc);
    if (!lc) {
        json_decref(in);
        po_admin_unavailable(h);
        return false;
    }
    lc->h = h;
    lc->r.done = login_done;
    lc->r.user = lc;
    if (name && po_operator_name_valid(name))
        PO_ASSERT(po_strcpy(lc->name, sizeof lc->name, name) == PO_OK);
    bool pending = po_signin_start(h->ctx->signin, h->req.client_addr, name ? name : "",
                                   json_is_string(pw) ? json_string_value(pw) : "",
                                   json_is_string(pw) ? json_string_length(pw) : 0, &lc->r);
    json_decref(in);
    if (pending)
        return true;
    login_answer(h, lc->r.result, lc->r.retry_after_s, &lc->r.ses);
    login_log(lc->name, lc->r.result);
    free(lc);
    /* a refusal over the rate limit goes a second late: a client looping
     * on it costs a held connection, not a served request a moment */
    return h->ctx->hold && h->ctx->hold(h->ctx->hold_ctx, h);
}

/* The session or bearer of the request; false after answering 401/403. */
static bool authenticate(struct po_hcall *h, struct po_store *s, struct po_admin_who *w)
{
    memset(w, 0, sizeof *w);
    char token[PO_SESSION_TOKEN_SIZE + 1];
    if (h->req.header(h->req.ctx, "Authorization")) {
        if (bearer_ok(h)) {
            w->token = true;
            return true;
        }
    } else if (cookie(h, COOKIE, token, sizeof token)) {
        po_err rc = po_operator_session(s, token, &w->ses);
        if (rc && rc != PO_ERR_NOT_FOUND) {
            po_admin_unavailable(h);
            return false;
        }
        if (!rc) {
            if (strcmp(h->req.method, "POST") != 0)
                return true;
            const char *csrf = h->req.header(h->req.ctx, "X-CSRF-Token");
            if (csrf && strlen(csrf) == strlen(w->ses.csrf) &&
                po_ct_equal(csrf, w->ses.csrf, strlen(csrf)))
                return true; /* (Host and Origin were checked first of all) */
            po_admin_error(h, 403, "csrf",
                           "a change needs the session's X-CSRF-Token, from this origin");
            return false;
        }
    }
    po_admin_error(h, 401, "unauthorized",
                   "sign in (POST /admin/login) or send the admin token as a bearer");
    return false;
}

static void admin_job(void *arg)
{
    struct po_hcall *h = arg;
    struct po_store *s = NULL;
    char err[PO_ERRBUF_SIZE] = "";
    const char *path = h->req.path;
    bool post = strcmp(h->req.method, "POST") == 0;
    struct po_admin_who w;
    if (po_store_pool_acquire(h->ctx->gw->pool, 2000, &s, err, sizeof err)) {
        po_admin_error(h, 503, "store_unavailable", "no database connection free; retry");
        h->complete(h);
        return;
    }
    if (authenticate(h, s, &w)) {
        if (strcmp(path, "/admin/logout") == 0) {
            char token[PO_SESSION_TOKEN_SIZE + 1];
            if (!w.token && cookie(h, COOKIE, token, sizeof token) &&
                po_operator_logout(s, token)) {
                po_admin_unavailable(h);
            } else {
                set_cookie(h, "", 0);
                po_admin_json(h, json_pack("{s:b}", "signed_out", true));
            }
        } else if (post) {
            po_admin_act(h, s, &w);
        } else {
            po_admin_view(h, s, &w);
        }
    }
    po_store_pool_release(h->ctx->gw->pool, s);
    h->complete(h);
}

static void security_headers(struct po_hcall *h)
{
    po_hresp_header(&h->resp, "Content-Security-Policy",
                    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
                    " connect-src 'self'; form-action 'none'; base-uri 'none';"
                    " frame-ancestors 'none'");
    po_hresp_header(&h->resp, "X-Frame-Options", "DENY"); /* browsers before CSP 2 */
    po_hresp_header(&h->resp, "X-Content-Type-Options", "nosniff");
    po_hresp_header(&h->resp, "Referrer-Policy", "no-referrer");
}

bool po_admin_start(struct po_hcall *h,
                    bool (*submit)(void *ctx, struct po_hcall *h, void (*job)(void *)), void *ctx)
{
    if (!h->ctx->console) {
        po_admin_error(h, 404, "not_found", "no console: serve runs without --console");
        return false;
    }
    unsigned refuse = not_allowed(h);
    if (refuse) {
        po_admin_error(h, refuse, refuse == 421 ? "misdirected_request" : "forbidden",
                       refuse == 421
                           ? "the console answers only under its own address (--console-origin)"
                           : "a page of another origin (--console-origin)");
        return false;
    }
    const char *path = h->req.path;
    if (strcmp(path, "/admin/login") == 0 && strcmp(h->req.method, "POST") == 0)
        return login(h);
    if (strcmp(h->req.method, "GET") == 0 && strncmp(path, "/admin/api/", 11) != 0) {
        const char *name = strcmp(path, "/admin") == 0 ? "index.html" : path + 7;
        for (int i = 0; i < po_console_assets_count; i++)
            if (strcmp(po_console_assets[i].name, name) == 0) {
                po_hresp_set(&h->resp, 200, po_console_assets[i].type, po_console_assets[i].text);
                security_headers(h);
                return false;
            }
        po_admin_error(h, 404, "not_found", "no such page");
        return false;
    }
    return submit(ctx, h, admin_job);
}
