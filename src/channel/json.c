/*
 * json.c — the one parser for JSON from outside (callback bodies, decrypted
 * resources, channel API answers, tenant API bodies, `apply --event`).
 *
 * Strict RFC 8259 into jansson values, written here rather than taken from
 * json_loadb because jansson 2.14's lexer (Debian 12) ignores an allocation
 * that fails while it saves a token (its lex_save drops the error) and then
 * reads past its buffer: a callback parsed under memory pressure crashed the
 * gateway (found by tests/fault/test_alloc.c; upstream akheron/jansson#362).
 * jansson also reports an allocation failure as a syntax error, which would
 * blame the channel (400) for the gateway's own condition. Here:
 *  - every allocation failure is PO_ERR_NOMEM (the caller answers retry);
 *  - malformed input is PO_ERR_INVALID with the byte offset and the reason;
 *  - nesting deeper than PO_JSON_DEPTH_MAX is PO_ERR_LIMIT;
 *  - duplicate object keys, invalid UTF-8, unescaped control characters,
 *    \u0000, lone surrogates, leading zeros, integers beyond int64 and
 *    reals beyond double are refused; the top level is an object or array.
 * Values are built with jansson's constructors, which do check allocations.
 *
 * Output: jansson 2.14's json_dumps ignores a failure while it writes an
 * object's key and goes on, so under memory pressure it returns text that
 * is not JSON, or not the document ({"amount":100,":null,...}): a stored
 * idempotent answer that can never be replayed, a request fingerprint that
 * refuses the client's honest retry (both found by test_alloc).
 * po_json_dumps gives jansson an allocator that remembers, per thread,
 * that it failed, and returns NULL for any text made while one did.
 */
#include "channel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local bool alloc_failed;

static void *tracked_malloc(size_t n)
{
    void *p = malloc(n);
    if (!p)
        alloc_failed = true;
    return p;
}

/* Before main: every jansson allocation of the process is tracked. */
__attribute__((constructor)) static void json_alloc_init(void)
{
    json_set_alloc_funcs(tracked_malloc, free);
}

char *po_json_dumps(const json_t *v, size_t flags)
{
    alloc_failed = false;
    char *text = v ? json_dumps(v, flags) : NULL;
    if (text && alloc_failed) {
        free(text);
        text = NULL;
    }
    return text;
}

struct jp {
    const unsigned char *start, *p, *end;
    int depth;
    po_err rc;
    char *err;
    size_t errcap;
};

static json_t *fail(struct jp *j, po_err rc, const char *why)
{
    if (!j->rc) {
        j->rc = rc;
        if (rc == PO_ERR_NOMEM)
            po_errf(j->err, j->errcap, "out of memory while parsing JSON");
        else
            po_errf(j->err, j->errcap, "%s at byte %zu", why, (size_t)(j->p - j->start));
    }
    return NULL;
}

/* A jansson constructor's result: NULL is always an allocation failure. */
static json_t *made(struct jp *j, json_t *v)
{
    return v ? v : fail(j, PO_ERR_NOMEM, NULL);
}

static void skip_ws(struct jp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static bool literal(struct jp *j, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0)
        return false;
    j->p += n;
    return true;
}

static int hex4(const unsigned char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int d = po_hexval((char)p[i]);
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t put_utf8(unsigned char *o, unsigned c)
{
    if (c < 0x80) {
        o[0] = (unsigned char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (unsigned char)(0xc0 | (c >> 6));
        o[1] = (unsigned char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (unsigned char)(0xe0 | (c >> 12));
        o[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
        o[2] = (unsigned char)(0x80 | (c & 0x3f));
        return 3;
    }
    o[0] = (unsigned char)(0xf0 | (c >> 18));
    o[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
    o[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
    o[3] = (unsigned char)(0x80 | (c & 0x3f));
    return 4;
}

/* One escape after the backslash at j->p: its code point, or -1. */
static long escape(struct jp *j)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    if (j->p + 1 >= j->end)
        return -1;
    unsigned char e = j->p[1];
    const char *at = e ? strchr(from, e) : NULL;
    if (at) {
        j->p += 2;
        return (unsigned char)to[at - from];
    }
    if (e != 'u' || j->end - j->p < 6)
        return -1;
    int hi = hex4(j->p + 2);
    if (hi < 0)
        return -1;
    j->p += 6;
    if (hi < 0xd800 || hi > 0xdfff)
        return hi;
    /* A high surrogate must be followed by \u and its low surrogate. */
    if (hi > 0xdbff || j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u')
        return -1;
    int lo = hex4(j->p + 2);
    if (lo < 0xdc00 || lo > 0xdfff)
        return -1;
    j->p += 6;
    return 0x10000 + (((long)hi - 0xd800) << 10) + (lo - 0xdc00);
}

/* A string at j->p (its opening quote) into a new buffer *out (*len bytes,
 * NUL-terminated): decoded, well-formed UTF-8 without NUL. */
static bool string(struct jp *j, char **out, size_t *len)
{
    const unsigned char *q = ++j->p;
    while (q < j->end && *q != '"')
        q += *q == '\\' && q + 1 < j->end ? 2 : 1;
    if (q >= j->end) {
        fail(j, PO_ERR_INVALID, "unterminated string");
        return false;
    }
    /* Decoded text is never longer than its escaped form. */
    unsigned char *buf = malloc((size_t)(q - j->p) + 1), *o = buf;
    if (!buf) {
        fail(j, PO_ERR_NOMEM, NULL);
        return false;
    }
    while (j->p < q) {
        if (*j->p == '\\') {
            long c = escape(j);
            if (c <= 0) { /* malformed, or \u0000 */
                free(buf);
                fail(j, PO_ERR_INVALID, c ? "invalid escape in string" : "NUL in string");
                return false;
            }
            o += put_utf8(o, (unsigned)c);
        } else if (*j->p < 0x20) {
            free(buf);
            fail(j, PO_ERR_INVALID, "control character in string");
            return false;
        } else {
            *o++ = *j->p++;
        }
    }
    j->p++; /* the closing quote */
    *len = (size_t)(o - buf);
    *o = '\0';
    if (!po_utf8_valid((const char *)buf, *len)) {
        free(buf);
        fail(j, PO_ERR_INVALID, "invalid UTF-8 in string");
        return false;
    }
    *out = (char *)buf;
    return true;
}

static json_t *number(struct jp *j)
{
    const unsigned char *s = j->p, *q = s;
    bool integer = true;
    if (q < j->end && *q == '-')
        q++;
    if (q < j->end && *q == '0')
        q++;
    else if (q < j->end && *q >= '1' && *q <= '9')
        while (q < j->end && *q >= '0' && *q <= '9')
            q++;
    else
        return fail(j, PO_ERR_INVALID, "invalid number");
    if (q < j->end && *q == '.') {
        integer = false;
        if (++q >= j->end || *q < '0' || *q > '9')
            return fail(j, PO_ERR_INVALID, "invalid number");
        while (q < j->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < j->end && (*q == 'e' || *q == 'E')) {
        integer = false;
        if (++q < j->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= j->end || *q < '0' || *q > '9')
            return fail(j, PO_ERR_INVALID, "invalid number");
        while (q < j->end && *q >= '0' && *q <= '9')
            q++;
    }
    /* strtoll/strtod need a terminated copy (the input is not). */
    char small[64], *text = small;
    size_t n = (size_t)(q - s);
    if (n >= sizeof small && !(text = malloc(n + 1)))
        return fail(j, PO_ERR_NOMEM, NULL);
    memcpy(text, s, n);
    text[n] = '\0';
    errno = 0;
    json_t *v = NULL;
    if (integer) {
        long long i = strtoll(text, NULL, 10);
        v = errno == ERANGE ? fail(j, PO_ERR_INVALID, "integer out of range")
                            : made(j, json_integer((json_int_t)i));
    } else {
        double d = strtod(text, NULL);
        v = errno == ERANGE && (d > 1.0 || d < -1.0) ? fail(j, PO_ERR_INVALID, "real out of range")
                                                     : made(j, json_real(d));
    }
    if (text != small)
        free(text);
    j->p = q;
    return v;
}

static json_t *value(struct jp *j);

/* One member (key: value) into obj; false when it fails (j->rc set). */
static bool member(struct jp *j, json_t *obj)
{
    char *key = NULL;
    size_t klen = 0;
    skip_ws(j);
    if (j->p >= j->end || *j->p != '"') {
        fail(j, PO_ERR_INVALID, "object key expected");
        return false;
    }
    const unsigned char *at = j->p;
    if (!string(j, &key, &klen))
        return false;
    skip_ws(j);
    json_t *v = NULL;
    if (j->p >= j->end || *j->p != ':') {
        fail(j, PO_ERR_INVALID, "':' expected");
    } else if (json_object_getn(obj, key, klen)) {
        j->p = at;
        fail(j, PO_ERR_INVALID, "duplicate object key");
    } else {
        j->p++;
        v = value(j);
    }
    int set = v ? json_object_setn_new_nocheck(obj, key, klen, v) : -1;
    free(key);
    if (set != 0 && v) /* the value was taken (and released) by jansson */
        fail(j, PO_ERR_NOMEM, NULL);
    return set == 0;
}

/* One element into arr; false when it fails (j->rc set). */
static bool element(struct jp *j, json_t *arr)
{
    json_t *v = value(j);
    if (v && json_array_append_new(arr, v) != 0)
        fail(j, PO_ERR_NOMEM, NULL);
    return v && !j->rc;
}

/* The object or array at j->p: members or elements separated by ','. */
static json_t *container(struct jp *j, bool is_object)
{
    char close = is_object ? '}' : ']';
    json_t *c = made(j, is_object ? json_object() : json_array());
    if (!c)
        return NULL;
    j->p++;
    skip_ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        return c;
    }
    while (is_object ? member(j, c) : element(j, c)) {
        skip_ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == close) {
            j->p++;
            return c;
        }
        fail(j, PO_ERR_INVALID, is_object ? "',' or '}' expected" : "',' or ']' expected");
        break;
    }
    json_decref(c);
    return NULL;
}

static json_t *value(struct jp *j)
{
    skip_ws(j);
    if (j->p >= j->end)
        return fail(j, PO_ERR_INVALID, "value expected");
    json_t *v = NULL;
    switch (*j->p) {
    case '{':
    case '[':
        if (j->depth >= PO_JSON_DEPTH_MAX)
            return fail(j, PO_ERR_LIMIT, "nesting too deep");
        j->depth++;
        v = container(j, *j->p == '{');
        j->depth--;
        return v;
    case '"': {
        char *s = NULL;
        size_t n = 0;
        if (!string(j, &s, &n))
            return NULL;
        v = made(j, json_stringn_nocheck(s, n));
        free(s);
        return v;
    }
    case 't':
        return literal(j, "true") ? made(j, json_true()) : fail(j, PO_ERR_INVALID, "bad literal");
    case 'f':
        return literal(j, "false") ? made(j, json_false()) : fail(j, PO_ERR_INVALID, "bad literal");
    case 'n':
        return literal(j, "null") ? made(j, json_null()) : fail(j, PO_ERR_INVALID, "bad literal");
    default:
        return number(j);
    }
}

po_err po_json_parse(const char *text, size_t len, json_t **out, char *err, size_t errcap)
{
    struct jp j = {.start = (const unsigned char *)text,
                   .p = (const unsigned char *)text,
                   .end = (const unsigned char *)text + len,
                   .err = err,
                   .errcap = errcap};
    skip_ws(&j);
    if (j.p >= j.end || (*j.p != '{' && *j.p != '[')) {
        fail(&j, PO_ERR_INVALID, "a JSON object or array expected");
        return j.rc;
    }
    json_t *v = value(&j);
    if (v) {
        skip_ws(&j);
        if (j.p == j.end) {
            *out = v;
            return PO_OK;
        }
        json_decref(v);
        fail(&j, PO_ERR_INVALID, "text after the JSON value");
    }
    return j.rc;
}

json_t *po_json_append(json_t *list, json_t *item)
{
    if (list && item && json_array_append_new(list, item) == 0)
        return list;
    if (!list)
        json_decref(item);
    json_decref(list);
    return NULL;
}
