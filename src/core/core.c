/*
 * core.c — errors, bounded strings, strict parsing, validation, clock, log.
 * Nothing here allocates except po_file_read (documented ownership).
 */
#include "core.h"

#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *po_err_name(po_err rc)
{
    switch (rc) {
    case PO_OK:
        return "ok";
    case PO_ERR_INVALID:
        return "invalid";
    case PO_ERR_NOT_FOUND:
        return "not_found";
    case PO_ERR_CONFLICT:
        return "conflict";
    case PO_ERR_TRANSIENT:
        return "transient";
    case PO_ERR_STORE:
        return "store";
    case PO_ERR_NOMEM:
        return "nomem";
    case PO_ERR_IO:
        return "io";
    case PO_ERR_LIMIT:
        return "limit";
    case PO_ERR_INTERNAL:
        return "internal";
    }
    return "unknown";
}

void po_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "payonce: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}

po_err po_strcpy(char *dst, size_t cap, const char *src)
{
    PO_ASSERT(cap > 0);
    size_t n = strlen(src);
    if (n >= cap) {
        dst[0] = '\0';
        return PO_ERR_LIMIT;
    }
    memcpy(dst, src, n + 1);
    return PO_OK;
}

po_err po_fmt_alloc(char **out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(out, fmt, ap);
    va_end(ap);
    if (n < 0) {
        *out = NULL;
        return PO_ERR_NOMEM;
    }
    return PO_OK;
}

po_err po_fmt(char *dst, size_t cap, const char *fmt, ...)
{
    PO_ASSERT(cap > 0);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap) {
        dst[0] = '\0';
        return PO_ERR_LIMIT;
    }
    return PO_OK;
}

void po_errf(char *buf, size_t cap, const char *fmt, ...)
{
    if (!buf || cap == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(buf, cap, fmt, ap); /* truncation of a message is acceptable */
    va_end(ap);
}

po_err po_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (!s || !*s)
        return PO_ERR_INVALID;
    const char *p = s;
    if (*p == '-')
        p++;
    if (!*p || strlen(p) > 19)
        return PO_ERR_INVALID;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9')
            return PO_ERR_INVALID;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || *end != '\0')
        return PO_ERR_INVALID;
    if (v < min || v > max)
        return PO_ERR_INVALID;
    *out = (int64_t)v;
    return PO_OK;
}

bool po_id_valid(const char *s, size_t max_len)
{
    if (!s)
        return false;
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.' || c == ':' || c == '|' || c == '*';
        if (!ok || n >= max_len)
            return false;
    }
    return n > 0;
}

/* Active ISO 4217 codes payonce accepts. Adding one is a code change on
 * purpose: a currency also needs its minor-unit exponent checked by channels. */
static const char *const currencies[] = {
    "AED", "AUD", "BRL", "CAD", "CHF", "CNY", "CZK", "DKK", "EUR", "GBP", "HKD", "HUF",
    "IDR", "ILS", "INR", "JPY", "KRW", "MOP", "MXN", "MYR", "NOK", "NZD", "PHP", "PLN",
    "RUB", "SAR", "SEK", "SGD", "THB", "TRY", "TWD", "USD", "VND", "ZAR",
};

bool po_currency_valid(const char *s)
{
    if (!s || strlen(s) != 3)
        return false;
    for (size_t i = 0; i < sizeof currencies / sizeof currencies[0]; i++)
        if (strcmp(currencies[i], s) == 0)
            return true;
    return false;
}

int po_currency_exponent(const char *currency)
{
    /* ISO 4217 minor units of the currencies above: 2, except these */
    static const char *const zero[] = {"JPY", "KRW", "VND"};
    for (int i = 0; i < PO_NELEM(zero); i++)
        if (currency && strcmp(currency, zero[i]) == 0)
            return 0;
    return 2;
}

void po_money_format(int64_t minor, const char *currency, char *buf, size_t cap)
{
    po_money_format_fine(minor, 0, currency, buf, cap);
}

void po_money_format_fine(int64_t amount, int fine_digits, const char *currency, char *buf,
                          size_t cap)
{
    PO_ASSERT(fine_digits >= 0 && fine_digits <= PO_MONEY_FINE_MAX);
    int e = po_currency_exponent(currency), digits = e + fine_digits;
    uint64_t div = 1;
    for (int i = 0; i < digits; i++)
        div *= 10;
    uint64_t mag = amount < 0 ? (uint64_t)0 - (uint64_t)amount : (uint64_t)amount;
    uint64_t whole = mag / div, frac = mag % div;
    /* the finer digits only as far as they are not zero */
    while (digits > e && frac % 10 == 0) {
        frac /= 10;
        digits--;
    }
    const char *sign = amount < 0 ? "-" : "";
    const char *cur = currency && *currency ? currency : "?";
    if (digits == 0)
        (void)snprintf(buf, cap, "%s%" PRIu64 " %s", sign, whole, cur);
    else
        (void)snprintf(buf, cap, "%s%" PRIu64 ".%0*" PRIu64 " %s", sign, whole, digits, frac, cur);
}

void po_money_expand(const char *text, char *out, size_t cap)
{
    size_t n = 0;
    if (!cap)
        return;
    for (const char *p = text; *p && n + 1 < cap;) {
        const char *close = *p == '{' ? strchr(p, '}') : NULL;
        char amount[32], cur[8], money[PO_MONEY_MAX];
        int64_t minor = 0;
        /* "{" digits " " three letters "}" */
        if (close && close - p < 32 && sscanf(p, "{%31[-0-9] %7[A-Z?]}", amount, cur) == 2 &&
            strlen(cur) == 3 && (size_t)(close - p) == strlen(amount) + strlen(cur) + 2 &&
            po_parse_i64(amount, INT64_MIN, INT64_MAX, &minor) == PO_OK) {
            po_money_format(minor, cur, money, sizeof money);
            n += (size_t)snprintf(out + n, cap - n, "%s", money);
            if (n >= cap)
                n = cap - 1;
            p = close + 1;
            continue;
        }
        out[n++] = *p++;
    }
    out[n] = '\0';
}

int po_hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool po_amount_valid(int64_t amount_minor)
{
    return amount_minor > 0 && amount_minor <= PO_AMOUNT_MAX;
}

bool po_since_valid(const char *s)
{
    return po_time_valid(s) && !strchr(s + 10, '+') && !strchr(s + 10, '-');
}

/* The four digits at s as a number (po_time_valid checked they are). */
static int atoi_4(const char *s)
{
    return (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
}

bool po_time_valid(const char *s)
{
    if (!s)
        return false;
    size_t n = strlen(s);
    if (n < 10 || n >= PO_TIME_SIZE)
        return false;
    /* YYYY-MM-DD then optional time part of digits and T:.+-Z */
    for (size_t i = 0; i < 10; i++) {
        bool dash = (i == 4 || i == 7);
        if (dash ? s[i] != '-' : (s[i] < '0' || s[i] > '9'))
            return false;
    }
    for (size_t i = 10; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || c == 'T' || c == ':' || c == '.' || c == '+' || c == '-' ||
              c == 'Z'))
            return false;
    }
    return true;
}

po_err po_date_parse(const char *s, int64_t *out)
{
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (!s || strlen(s) != 10 || !po_time_valid(s))
        return PO_ERR_INVALID;
    int y = atoi_4(s), mo = (s[5] - '0') * 10 + (s[6] - '0'), d = (s[8] - '0') * 10 + (s[9] - '0');
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] + (mo == 2 && leap))
        return PO_ERR_INVALID;
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d};
    *out = (int64_t)timegm(&tm);
    return PO_OK;
}

po_err po_time_parse(const char *s, int64_t *out)
{
    int y, mo, d, h, mi, se, n = 0;
    if (!po_time_valid(s) ||
        sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &n) != 6 || n != 19 ||
        mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
        return PO_ERR_INVALID;
    const char *p = s + 19;
    if (*p == '.') {
        do
            p++;
        while (*p >= '0' && *p <= '9');
        if (p == s + 20)
            return PO_ERR_INVALID;
    }
    int64_t off = 0;
    if (*p == 'Z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om, k = 0;
        if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &k) != 2 || k != 5 || oh > 23 || om > 59)
            return PO_ERR_INVALID;
        off = (*p == '+' ? 1 : -1) * (int64_t)(oh * 3600 + om * 60);
        p += 6;
    } else {
        return PO_ERR_INVALID;
    }
    if (*p)
        return PO_ERR_INVALID;
    struct tm tm = {.tm_year = y - 1900,
                    .tm_mon = mo - 1,
                    .tm_mday = d,
                    .tm_hour = h,
                    .tm_min = mi,
                    .tm_sec = se};
    time_t t = timegm(&tm);
    if (tm.tm_mday != d) /* 31 February */
        return PO_ERR_INVALID;
    *out = (int64_t)t - off;
    return PO_OK;
}

void po_clock_iso_ms(int64_t unix_ms, char *buf, size_t cap)
{
    struct tm tm;
    time_t t = (time_t)(unix_ms / 1000);
    gmtime_r(&t, &tm);
    (void)snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                   tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                   (int)(unix_ms % 1000));
}

int64_t po_clock_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void po_clock_now_iso(char *buf, size_t cap)
{
    po_clock_iso_ms(po_clock_now_ms(), buf, cap);
}

void po_clock_iso_at(int64_t unix_s, char *buf, size_t cap)
{
    po_clock_iso_ms(unix_s * 1000, buf, cap);
}

int64_t po_clock_unix_of(const char *iso)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (!iso || sscanf(iso, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                       &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm);
}

/* The length of the well-formed UTF-8 sequence at p (1-4), or 0. */
static size_t utf8_seq(const unsigned char *p, size_t len)
{
    unsigned c = p[0], min;
    size_t n;
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0) {
        n = 1;
        min = 0x80;
        c &= 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        n = 2;
        min = 0x800;
        c &= 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        n = 3;
        min = 0x10000;
        c &= 0x07;
    } else {
        return 0;
    }
    if (n >= len) /* the sequence is cut off */
        return 0;
    for (size_t k = 1; k <= n; k++) {
        if ((p[k] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (p[k] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    return n + 1;
}

bool po_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0, n; i < len; i += n)
        if (!(n = utf8_seq(p + i, len - i)))
            return false;
    return true;
}

size_t po_json_escape(const char *s, size_t len, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t j = 0;
    PO_ASSERT(cap > 0);
    for (size_t i = 0; i < len;) {
        size_t n = utf8_seq(p + i, len - i);
        char tmp[8];
        size_t tl = 0;
        if (n == 1 && (p[i] == '"' || p[i] == '\\')) {
            tmp[tl++] = '\\';
            tmp[tl++] = (char)p[i];
        } else if (n == 1 && (p[i] < 0x20 || p[i] == 0x7f)) {
            memcpy(tmp, "\\u00", 4);
            tl = 4;
            tmp[tl++] = hex[p[i] >> 4];
            tmp[tl++] = hex[p[i] & 15];
        } else if (n == 0) {
            /* not UTF-8: shown as the text \xNN, so the line stays JSON */
            memcpy(tmp, "\\\\x", 3);
            tl = 3;
            tmp[tl++] = hex[p[i] >> 4];
            tmp[tl++] = hex[p[i] & 15];
            n = 1;
        } else {
            memcpy(tmp, p + i, n);
            tl = n;
        }
        if (j + tl >= cap)
            break;
        memcpy(out + j, tmp, tl);
        j += tl;
        i += n;
    }
    out[j] = '\0';
    return j;
}

static _Atomic int log_level = PO_LOG_INFO; /* SIGHUP may change it while threads log */
static bool log_json = true;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void po_log_set_level(enum po_log_level lvl)
{
    log_level = (int)lvl;
}

void po_log_set_json(bool json)
{
    log_json = json;
}

bool po_log_level_parse(const char *name, enum po_log_level *out)
{
    for (int i = 0; i < PO_NELEM(level_names); i++)
        if (name && strcmp(name, level_names[i]) == 0) {
            *out = (enum po_log_level)i;
            return true;
        }
    return false;
}

void po_log(enum po_log_level lvl, const char *fmt, ...)
{
    if ((int)lvl < log_level)
        return;
    char msg[1024];
    char esc[2200];
    char ts[PO_TIME_SIZE];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!log_json) { /* for a terminal: no control characters */
        for (char *p = msg; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                *p = '?';
        pthread_mutex_lock(&log_mu);
        fprintf(stderr, "payonce: %s: %s\n", level_names[lvl], msg);
        pthread_mutex_unlock(&log_mu);
        return;
    }
    (void)po_json_escape(msg, strlen(msg), esc, sizeof esc);
    po_clock_now_iso(ts, sizeof ts);
    pthread_mutex_lock(&log_mu);
    fprintf(stderr, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"}\n", ts, level_names[lvl], esc);
    pthread_mutex_unlock(&log_mu);
}

void po_log_line(const char *json)
{
    pthread_mutex_lock(&log_mu);
    fputs(json, stderr);
    fputc('\n', stderr);
    pthread_mutex_unlock(&log_mu);
}

po_err po_file_read(const char *path, size_t max, char **out, size_t *out_len)
{
    po_err rc = PO_OK;
    char *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno == ENOENT ? PO_ERR_NOT_FOUND : PO_ERR_IO;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = PO_ERR_IO;
        goto out_close;
    }
    if ((uint64_t)st.st_size > max) {
        rc = PO_ERR_LIMIT;
        goto out_close;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        rc = PO_ERR_NOMEM;
        goto out_close;
    }
    size_t n = fread(buf, 1, (size_t)st.st_size + 1, f);
    if (ferror(f)) {
        rc = PO_ERR_IO;
        goto out_free;
    }
    if (n > (size_t)st.st_size) { /* grew while reading */
        rc = PO_ERR_LIMIT;
        goto out_free;
    }
    buf[n] = '\0';
    *out = buf;
    *out_len = n;
    buf = NULL;
out_free:
    free(buf);
out_close:
    fclose(f);
    return rc;
}

const char *po_file_error(po_err rc)
{
    switch (rc) {
    case PO_ERR_NOT_FOUND:
        return "no such file";
    case PO_ERR_LIMIT:
        return "too large";
    case PO_ERR_NOMEM:
        return "out of memory";
    case PO_ERR_IO:
        return "not a readable regular file (permissions? a directory?)";
    default:
        return po_err_name(rc);
    }
}

void po_file_why(const char *path, po_err rc, char *buf, size_t cap)
{
    if ((rc == PO_ERR_NOT_FOUND || rc == PO_ERR_IO) && po_path_why(path, false, buf, cap))
        return;
    (void)snprintf(buf, cap, "%s", po_file_error(rc));
}

/* The name of user uid (its number when the system has none). */
static void user_name(uid_t uid, char *buf, size_t cap)
{
    struct passwd pw, *found = NULL;
    char scratch[1024];
    if (getpwuid_r(uid, &pw, scratch, sizeof scratch, &found) == 0 && found)
        (void)snprintf(buf, cap, "%s", found->pw_name);
    else
        (void)snprintf(buf, cap, "uid %u", (unsigned)uid);
}

/* "permission denied (the WHAT NAME is 0750 root:payonce; you are alice)" */
static void denied(const char *what, const char *name, const struct stat *st, char *buf, size_t cap)
{
    char owner[64], group[64], me[64];
    struct group gr, *found = NULL;
    char scratch[1024];
    user_name(st->st_uid, owner, sizeof owner);
    if (getgrgid_r(st->st_gid, &gr, scratch, sizeof scratch, &found) == 0 && found)
        (void)snprintf(group, sizeof group, "%s", found->gr_name);
    else
        (void)snprintf(group, sizeof group, "gid %u", (unsigned)st->st_gid);
    user_name(geteuid(), me, sizeof me);
    (void)snprintf(buf, cap, "permission denied (the %s%s%s is %04o %s:%s; you are %s)", what,
                   *name ? " " : "", name, (unsigned)(st->st_mode & 07777), owner, group, me);
}

/* true, with why in buf, when no file can be made in directory dir */
static bool dir_unwritable(const char *dir, char *buf, size_t cap)
{
    struct stat st;
    if (stat(dir, &st) != 0 || access(dir, W_OK) == 0)
        return false;
    if (errno == EROFS)
        (void)snprintf(buf, cap, "%s is on a read-only file system", dir);
    else
        denied("directory", dir, &st, buf, cap);
    return true;
}

bool po_path_why(const char *path, bool write, char *buf, size_t cap)
{
    char p[4096];
    struct stat st;
    buf[0] = '\0';
    if (!path || !*path || po_strcpy(p, sizeof p, path))
        return false;
    /* each directory on the way, from the root (or the current one) down */
    for (char *slash = strchr(p + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        bool ok = true;
        if (stat(p, &st) != 0) {
            if (errno == ENOENT)
                (void)snprintf(buf, cap, "no such directory %s", p);
            else if (errno == ENOTDIR)
                (void)snprintf(buf, cap, "%s is not a directory", p);
            else
                (void)snprintf(buf, cap, "%s: %s", p, strerror(errno));
            ok = false;
        } else if (!S_ISDIR(st.st_mode)) {
            (void)snprintf(buf, cap, "%s is not a directory", p);
            ok = false;
        } else if (access(p, X_OK) != 0) {
            denied("directory", p, &st, buf, cap);
            ok = false;
        }
        *slash = '/';
        if (!ok)
            return true;
    }
    /* the file's own directory, for a file to create */
    char dir[4096];
    const char *last = strrchr(p, '/');
    if (last)
        (void)snprintf(dir, sizeof dir, "%.*s", last == p ? 1 : (int)(last - p), p);
    else
        (void)snprintf(dir, sizeof dir, ".");
    if (stat(p, &st) != 0) {
        if (errno != ENOENT) {
            (void)snprintf(buf, cap, "%s", strerror(errno));
            return true;
        }
        if (!(write && dir_unwritable(dir, buf, cap)))
            (void)snprintf(buf, cap, "no such file");
        return true;
    }
    if (S_ISDIR(st.st_mode)) {
        (void)snprintf(buf, cap, "a directory, not a file");
        return true;
    }
    if (access(p, write ? R_OK | W_OK : R_OK) != 0) {
        if (errno == EROFS)
            (void)snprintf(buf, cap, "%s is on a read-only file system", dir);
        else
            denied("file", "", &st, buf, cap);
        return true;
    }
    return write && dir_unwritable(dir, buf, cap);
}

const char *po_tmp_dir(void)
{
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

po_err po_stream_read(FILE *f, size_t max, char **out, size_t *out_len)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        return PO_ERR_NOMEM;
    for (;;) {
        if (len + 1 >= cap) {
            if (cap > max + 1) {
                free(buf);
                return PO_ERR_LIMIT;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return PO_ERR_NOMEM;
            }
            buf = nb;
            cap *= 2;
        }
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
    }
    if (ferror(f) || len > max) {
        free(buf);
        return ferror(f) ? PO_ERR_IO : PO_ERR_LIMIT;
    }
    buf[len] = '\0';
    *out = buf;
    *out_len = len;
    return PO_OK;
}

po_err po_body_append(struct po_body *b, const char *piece, size_t n, size_t max)
{
    if (b->too_large || b->len + n > max) {
        b->too_large = true;
        return PO_OK;
    }
    char *d = realloc(b->data, b->len + n + 1);
    if (!d)
        return PO_ERR_NOMEM;
    memcpy(d + b->len, piece, n);
    b->data = d;
    b->len += n;
    d[b->len] = '\0';
    return PO_OK;
}

void po_body_free(struct po_body *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

uint64_t po_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int64_t po_mono_ms(void)
{
    return (int64_t)(po_now_us() / 1000u);
}

void po_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

struct timespec po_deadline_us(int64_t us)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += (time_t)(us / 1000000);
    t.tv_nsec += (long)(us % 1000000) * 1000L;
    t.tv_sec += t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    return t;
}
