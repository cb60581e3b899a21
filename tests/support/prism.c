/*
 * prism.c — see prism.h.
 */
#include "prism.h"

#include "testutil.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PRISM_START_S 180    /* six node processes on a loaded two-core machine */
#define VIOLATIONS_MAX 16384 /* bytes of an sl-violations header kept */

/* One gateway port and its two proxies. */
struct upstream {
    unsigned port, strict_port, lenient_port;
    pid_t strict_pid, lenient_pid;
};

static struct {
    bool on;
    int n;
    struct upstream up[T_PRISM_UPSTREAMS_MAX];
    atomic_int through, refused, around_json, around_path, violations, direct;
    pthread_mutex_t mu; /* t_fail */
} P = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "prism: %s: %s\n", what, detail);
    exit(1);
}

bool t_prism_on(void)
{
    return P.on;
}

/* ---- ports and processes ---- */

static bool bindable(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
              bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* A free loopback port below the ephemeral range (so that no outgoing
 * connection takes it while a gateway is between two cases), not one of
 * taken[0..ntaken). */
static unsigned pick_port(const unsigned *taken, int ntaken)
{
    unsigned lo_eph = 32768, hi_eph = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%u %u", &lo_eph, &hi_eph) != 2)
            lo_eph = 32768;
        fclose(f);
    }
    unsigned lo = 15000, hi = lo_eph > lo + 1000 ? lo_eph : 32768;
    static unsigned seed;
    if (!seed)
        seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    for (int tries = 0; tries < 1000; tries++) {
        unsigned p = lo + (unsigned)rand_r(&seed) % (hi - lo);
        bool used = false;
        for (int i = 0; i < ntaken; i++)
            used = used || taken[i] == p;
        if (!used && bindable(p))
            return p;
    }
    die("no free port", "15000 and up");
    return 0;
}

static pid_t spawn(const char *dir, const char *prism, const char *spec, unsigned up, unsigned port,
                   bool strict)
{
    char upstream[64], portbuf[16], log[400];
    (void)snprintf(upstream, sizeof upstream, "http://127.0.0.1:%u", up);
    (void)snprintf(portbuf, sizeof portbuf, "%u", port);
    (void)snprintf(log, sizeof log, "%s/prism-%u-%s.log", dir, up, strict ? "strict" : "lenient");
    fflush(stdout); /* the child's freopen would write what is buffered again */
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        die("fork", prism);
    if (pid == 0) {
        /* never outlive the test, even when it dies on a failed check */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        FILE *o = freopen(log, "w", stdout);
        (void)o;
        dup2(1, 2);
        execl(prism, prism, "proxy", strict ? "--errors" : "--errors=false", spec, upstream, "-p",
              portbuf, "-h", "127.0.0.1", "--cors=false", "-v", "warn", (char *)NULL);
        _exit(127);
    }
    return pid;
}

static bool listening(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

bool t_prism_start(const char *dir, int n, unsigned upstream[])
{
    const char *prism = getenv("PAYONCE_PRISM"), *spec = getenv("PAYONCE_OPENAPI");
    if (!prism || !*prism)
        return false;
    if (!spec || !*spec || n < 1 || n > T_PRISM_UPSTREAMS_MAX)
        die("PAYONCE_PRISM is set", "PAYONCE_OPENAPI must name the description too");
    unsigned taken[3 * T_PRISM_UPSTREAMS_MAX];
    int nt = 0;
    for (int i = 0; i < n; i++) {
        struct upstream *u = &P.up[i];
        unsigned *mine[3] = {&u->port, &u->strict_port, &u->lenient_port};
        for (int k = 0; k < 3; k++) {
            *mine[k] = pick_port(taken, nt);
            taken[nt++] = *mine[k];
        }
        u->strict_pid = spawn(dir, prism, spec, u->port, u->strict_port, true);
        u->lenient_pid = spawn(dir, prism, spec, u->port, u->lenient_port, false);
        upstream[i] = u->port;
    }
    P.n = n;
    uint64_t t0 = po_now_us();
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 2; k++) {
            unsigned port = k ? P.up[i].lenient_port : P.up[i].strict_port;
            pid_t pid = k ? P.up[i].lenient_pid : P.up[i].strict_pid;
            while (!listening(port)) {
                int st = 0;
                if (waitpid(pid, &st, WNOHANG) == pid)
                    die("prism exited at its start; see its log in", dir);
                if (po_now_us() - t0 > PRISM_START_S * UINT64_C(1000000))
                    die("prism did not listen in time; see its log in", dir);
                struct timespec ms = {0, 100000000L};
                nanosleep(&ms, NULL);
            }
        }
    printf("# prism: %d x 2 validating proxies of %s up in %llu ms\n", n, spec,
           (unsigned long long)(po_now_us() - t0) / 1000);
    fflush(stdout);
    P.on = true;
    return true;
}

void t_prism_stop(const char *name)
{
    if (!P.on)
        return;
    for (int i = 0; i < P.n; i++) {
        pid_t pids[2] = {P.up[i].strict_pid, P.up[i].lenient_pid};
        for (int k = 0; k < 2; k++) {
            kill(pids[k], SIGTERM);
            waitpid(pids[k], NULL, 0);
        }
    }
    P.on = false;
    t_figure("# %s: %d exchanges validated by prism against docs/openapi.json, %d requests the"
             " description refuses refused by payonce too (its answers validated), %d sent"
             " around prism (%d JSON bodies it would re-encode, %d paths it cannot decode), %d"
             " not the tenant API's; %d violations\n",
             name, atomic_load(&P.through), atomic_load(&P.refused),
             atomic_load(&P.around_json) + atomic_load(&P.around_path), atomic_load(&P.around_json),
             atomic_load(&P.around_path), atomic_load(&P.direct), atomic_load(&P.violations));
    T_CHECK(atomic_load(&P.violations) == 0,
            "%s: %d exchanges violated docs/openapi.json (the FAIL lines above)", name,
            atomic_load(&P.violations));
}

/* ---- what prism carries unchanged ---- */

/* Integers JavaScript holds exactly (prism re-encodes a JSON body through
 * JSON.parse and JSON.stringify). */
static bool numbers_exact(json_t *j)
{
    const char *k;
    json_t *v;
    size_t i;
    if (json_is_integer(j))
        return json_integer_value(j) <= (INT64_C(1) << 53) &&
               json_integer_value(j) >= -(INT64_C(1) << 53);
    if (json_is_object(j)) {
        json_object_foreach(j, k, v) if (!numbers_exact(v)) return false;
    }
    if (json_is_array(j)) {
        json_array_foreach(j, i, v) if (!numbers_exact(v)) return false;
    }
    return true;
}

static const char *header_value(const struct t_http_req *q, const char *name)
{
    size_t n = strlen(name);
    for (const char *const *l = q->headers; l && *l; l++)
        if (strncasecmp(*l, name, n) == 0 && (*l)[n] == ':')
            return *l + n + 1 + strspn(*l + n + 1, " ");
    return NULL;
}

/* A body prism forwards as the same request: none, not declared JSON (it
 * passes such bodies through), or JSON it parses and re-encodes to the
 * same members and values. */
static bool body_faithful(const struct t_http_req *q)
{
    size_t len = q->body ? (q->body_len ? q->body_len : strlen(q->body)) : 0;
    const char *ct = header_value(q, "Content-Type");
    if (len == 0 || (ct && !strstr(ct, "json")))
        return true;
    /* re-encoded without its blanks, a body over the limit would pass it */
    if (len > PO_BODY_MAX)
        return false;
    json_t *j = json_loadb(q->body, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
    bool ok = j && numbers_exact(j);
    json_decref(j);
    return ok;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The path's percent-decoding is UTF-8 (prism 5.14's router dies on a
 * path that is not: decodeURIComponent throws). */
static bool path_faithful(const char *path)
{
    unsigned char dec[2048];
    size_t n = 0;
    for (const char *p = path; *p && n < sizeof dec; p++) {
        if (*p == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
            dec[n++] = (unsigned char)(hexval(p[1]) << 4 | hexval(p[2]));
            p += 2;
        } else {
            dec[n++] = (unsigned char)*p;
        }
    }
    for (size_t i = 0; i < n;) {
        unsigned char c = dec[i];
        size_t more = c < 0x80             ? 0
                      : (c & 0xe0) == 0xc0 ? 1
                      : (c & 0xf0) == 0xe0 ? 2
                      : (c & 0xf8) == 0xf0 ? 3
                                           : 9;
        if (more == 9 || (more == 1 && c < 0xc2) || i + more >= n)
            return false;
        for (size_t k = 1; k <= more; k++)
            if ((dec[i + k] & 0xc0) != 0x80)
                return false;
        i += more + 1;
    }
    return true;
}

/* ---- one exchange ---- */

/* What an answer's headers say about it, with the caller's own header
 * callback still called for every line. */
struct seen {
    const struct t_http_req *q;
    char ctype[128];
    char violations[VIOLATIONS_MAX];
};

static void header_copy(char *dst, size_t cap, const char *v, size_t n)
{
    while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
        n--;
    (void)snprintf(dst, cap, "%.*s", (int)n, v);
}

static size_t on_header(char *d, size_t sz, size_t n, void *ctx)
{
    struct seen *s = ctx;
    size_t len = sz * n;
    if (len > 13 && strncasecmp(d, "content-type:", 13) == 0)
        header_copy(s->ctype, sizeof s->ctype, d + 13 + strspn(d + 13, " "),
                    len - 13 - strspn(d + 13, " "));
    else if (len > 14 && strncasecmp(d, "sl-violations:", 14) == 0)
        header_copy(s->violations, sizeof s->violations, d + 14 + strspn(d + 14, " "),
                    len - 14 - strspn(d + 14, " "));
    if (s->q->on_header)
        return s->q->on_header(d, sz, n, s->q->header_ctx);
    return len;
}

static long send_to(const struct t_http_req *q, unsigned port, const char *path, char *out,
                    size_t cap, size_t *len, struct seen *s)
{
    char u[2300];
    (void)snprintf(u, sizeof u, "http://127.0.0.1:%u%s", port, path);
    memset(s, 0, sizeof *s);
    s->q = q;
    struct t_http_req r = *q;
    r.url = u;
    r.on_header = on_header;
    r.header_ctx = s;
    return t_http(&r, out, cap, len);
}

/* Prism's own answer (application/problem+json, a type of its errors):
 * its type's fragment into kind ("" when the answer is payonce's). */
static void prism_kind(const struct seen *s, const char *body, char *kind, size_t cap)
{
    kind[0] = '\0';
    if (!strstr(s->ctype, "problem+json"))
        return;
    json_t *j = json_loads(body, 0, NULL);
    const char *t = json_string_value(json_object_get(j, "type"));
    const char *hash = t && strstr(t, "stoplight.io/prism/errors#") ? strchr(t, '#') : NULL;
    (void)snprintf(kind, cap, "%s", hash ? hash + 1 : "");
    json_decref(j);
}

static void violation(const struct t_http_req *q, const char *path, long status, const char *why,
                      const char *detail)
{
    atomic_fetch_add(&P.violations, 1);
    pthread_mutex_lock(&P.mu);
    t_fail("openapi: %s %s -> %ld: %s: %.2000s",
           q->method ? q->method
           : q->body ? "POST"
                     : "GET",
           path, status, why, detail);
    pthread_mutex_unlock(&P.mu);
}

/* The sl-violations entries of the answer's own part (response), or all. */
static bool response_clean(const struct seen *s, bool all, char *why, size_t cap)
{
    why[0] = '\0';
    if (!s->violations[0])
        return true;
    json_t *j = json_loads(s->violations, 0, NULL), *v;
    size_t i;
    bool clean = j != NULL;
    json_array_foreach(j, i, v)
    {
        const char *where = json_string_value(json_array_get(json_object_get(v, "location"), 0));
        if (all || (where && strcmp(where, "response") == 0))
            clean = false;
    }
    json_decref(j);
    if (!clean)
        (void)snprintf(why, cap, "%s", s->violations);
    return clean;
}

long t_prism_http(const struct t_http_req *q, unsigned port, const char *path, char *out,
                  size_t cap, size_t *len)
{
    struct upstream *u = NULL;
    for (int i = 0; i < P.n && !u; i++)
        u = P.up[i].port == port ? &P.up[i] : NULL;
    bool body_ok = body_faithful(q), path_ok = path_faithful(path);
    if (strncmp(path, "/v1/", 4) != 0)
        u = NULL; /* not the tenant API (/metrics) */
    if (!P.on || !u || !body_ok || !path_ok) {
        atomic_fetch_add(!P.on || !u ? &P.direct : !body_ok ? &P.around_json : &P.around_path, 1);
        struct seen s;
        return send_to(q, port, path, out, cap, len, &s);
    }
    struct seen *s = malloc(sizeof *s);
    if (!s)
        die("out of memory", path);
    char kind[64], why[VIOLATIONS_MAX];
    long st = send_to(q, u->strict_port, path, out, cap, len, s);
    prism_kind(s, out, kind, sizeof kind);
    if (st == 0) {
        violation(q, path, st, "no answer through prism", "see the prism-*-strict.log");
    } else if (strcmp(kind, "VIOLATIONS") == 0) {
        violation(q, path, st, "payonce's answer is not what the description allows", out);
    } else if (kind[0]) {
        /* The description refuses the request: payonce must too. */
        char refusal[2048];
        (void)snprintf(refusal, sizeof refusal, "%s", out);
        st = send_to(q, u->lenient_port, path, out, cap, len, s);
        prism_kind(s, out, kind, sizeof kind);
        if (st == 0 || kind[0])
            violation(q, path, st, "prism did not forward it", out);
        else if (st < 400)
            violation(q, path, st, "payonce accepts a request the description refuses", refusal);
        else if (!response_clean(s, false, why, sizeof why))
            violation(q, path, st, "payonce's refusal is not what the description allows", why);
        else
            atomic_fetch_add(&P.refused, 1);
    } else if (!response_clean(s, true, why, sizeof why)) {
        violation(q, path, st, "prism's warnings", why);
    } else {
        atomic_fetch_add(&P.through, 1);
    }
    free(s);
    return st;
}
