/*
 * core.h — what every payonce module shares: the error enum, limits,
 * assertions that stay on in production, bounded string helpers, strict
 * number parsing, money and currency validation, the clock and logging.
 *
 * Invariants:
 *  - po_err is 0 on success; every fallible function returns it and is
 *    marked PO_MUST_CHECK. Out-params are written only on success, with
 *    one kind of exception, said at each function: a destination buffer
 *    that a failed copy or format leaves empty ("" or NULL) — never a
 *    truncated string that could pass for the real one (po_strcpy,
 *    po_fmt, po_fmt_alloc).
 *  - Every limit on outside input lives in limits.h (PO_*_MAX) and is checked.
 *  - Money is int64 minor units plus an ISO 4217 code; no floating point.
 */
#ifndef PO_CORE_H
#define PO_CORE_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "limits.h"

#define PO_MUST_CHECK __attribute__((warn_unused_result))
/* The number of elements of an array (not a pointer). */
#define PO_NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))
/* A numeric constant's digits as a string literal (for SQL and libpq
 * settings): one spelling of each number, PO_STR(PO_LOCK_WAIT_MS). */
#define PO_STR_(x) #x
#define PO_STR(x) PO_STR_(x)
#define PO_PRINTF(a, b) __attribute__((format(printf, a, b)))

typedef enum po_err {
    PO_OK = 0,
    PO_ERR_INVALID,   /* bad input from outside: nothing was changed */
    PO_ERR_NOT_FOUND, /* the named object does not exist */
    PO_ERR_CONFLICT,  /* a unique constraint rejected a row */
    PO_ERR_TRANSIENT, /* busy, locked, lost connection, disk: retry later */
    PO_ERR_STORE,     /* any other storage error (bug or schema problem) */
    PO_ERR_NOMEM,
    PO_ERR_IO,
    PO_ERR_LIMIT, /* an input exceeded one of the PO_*_MAX limits */
    PO_ERR_INTERNAL
} po_err;

const char *po_err_name(po_err rc);

/* Every bound on outside input and on internal queues: limits.h. */

/* ---- assertions: programmer errors; stay on in release builds ---- */
void po_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define PO_ASSERT(e) ((e) ? (void)0 : po_assert_fail(#e, __FILE__, __LINE__))

/* ---- bounded strings ---- */
/* Copies src into dst (capacity cap, cap > 0). Fails with PO_ERR_LIMIT, leaving
 * dst an empty string, when src does not fit. */
po_err po_strcpy(char *dst, size_t cap, const char *src) PO_MUST_CHECK;
/* snprintf that reports truncation as PO_ERR_LIMIT, leaving dst "". */
po_err po_fmt(char *dst, size_t cap, const char *fmt, ...) PO_PRINTF(3, 4) PO_MUST_CHECK;
/* Formats into a new heap string (*out, freed by the caller); *out is
 * NULL on failure (PO_ERR_NOMEM). */
po_err po_fmt_alloc(char **out, const char *fmt, ...) PO_PRINTF(2, 3) PO_MUST_CHECK;
/* Writes a message into a caller-supplied error buffer; buf may be NULL. */
void po_errf(char *buf, size_t cap, const char *fmt, ...) PO_PRINTF(3, 4);

/* ---- strict parsing ---- */
/* Whole string must be a base-10 integer in [min, max]; no spaces, no '+'. */
po_err po_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out) PO_MUST_CHECK;
/* An identifier: 1..max_len bytes of [A-Za-z0-9_-.:|*]. */
bool po_id_valid(const char *s, size_t max_len);
/* An ISO 4217 code this build knows (upper case, 3 letters). */
bool po_currency_valid(const char *s);
/* Digits after the decimal point of a currency (ISO 4217): 0 for JPY, KRW
 * and VND, 2 for the others payonce knows. */
int po_currency_exponent(const char *currency);
/* An amount in minor units as a person reads it: "12.80 CNY", "-0.01 CNY",
 * "1000 JPY". For people only: JSON keeps integer minor units. Every
 * amount a command or the console shows a person goes through here (or
 * po_money_format_fine), so money is never printed in two units. */
void po_money_format(int64_t minor, const char *currency, char *buf, size_t cap);
/* The same for an amount in 10^-fine_digits of the minor unit (fees are in
 * thousandths: fine_digits 3), in major units with its currency: the
 * currency's own digits always, the finer ones only as far as they are not
 * zero — 11000 thousandths of a fen is "0.11 CNY", 11500 "0.115 CNY", 11
 * "0.00011 CNY". fine_digits is 0..PO_MONEY_FINE_MAX. */
void po_money_format_fine(int64_t amount, int fine_digits, const char *currency, char *buf,
                          size_t cap);
#define PO_MONEY_FINE_MAX 6
/* text with each "{MINOR CUR}" (an integer amount in minor units and its
 * currency, as a query writes it) said as po_money_format does: "postings
 * {-100 CNY} cached {-95 CNY}" -> "postings -1.00 CNY cached -0.95 CNY".
 * Anything else is copied as it is; cut to cap. */
void po_money_expand(const char *text, char *out, size_t cap);
#define PO_MONEY_MAX 40
/* The value of a hexadecimal digit, or -1. */
int po_hexval(char c);
/* A positive amount in minor units not above PO_AMOUNT_MAX. */
bool po_amount_valid(int64_t amount_minor);
/* A plausible RFC 3339 timestamp (shape only, length-bounded). */
bool po_time_valid(const char *s);
/* A time to compare with stored times (UTC, compared as text): a date, or
 * a po_time_valid time without an offset other than Z. */
bool po_since_valid(const char *s);
/* An RFC 3339 time with its offset — "YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)",
 * as WeChat Pay's time_expire — as Unix seconds; PO_ERR_INVALID for
 * anything else (an out-of-range field included). */
po_err po_time_parse(const char *s, int64_t *out) PO_MUST_CHECK;
/* A calendar day "YYYY-MM-DD" (years 1970-9999, months 1-12, the days the
 * month has, leap years included) -> its midnight as seconds since the
 * epoch, read as UTC; PO_ERR_INVALID for anything else ("2026-13-01",
 * "2026-02-30", "2026-1-01"). *out is written only on success. */
po_err po_date_parse(const char *s, int64_t *out) PO_MUST_CHECK;

/* ---- clock ---- */
/* Current UTC time as "YYYY-MM-DDTHH:MM:SS.mmmZ" into buf (>= PO_TIME_SIZE). */
void po_clock_now_iso(char *buf, size_t cap);
/* A Unix time (seconds) in the same format, milliseconds .000 — the same
 * text ordering, for "older than" comparisons in SQL. */
void po_clock_iso_at(int64_t unix_s, char *buf, size_t cap);
/* A Unix time in milliseconds in the same format (ISO 8601 UTC, .mmmZ). */
void po_clock_iso_ms(int64_t unix_ms, char *buf, size_t cap);
/* Milliseconds since the epoch (wall clock). */
int64_t po_clock_now_ms(void);
/* Seconds since the epoch of a stored time ("YYYY-MM-DDTHH:MM:SS…", UTC);
 * 0 when it does not parse. */
int64_t po_clock_unix_of(const char *iso);
/* Microseconds on the monotonic clock (for durations). */
uint64_t po_now_us(void);
/* Milliseconds on the monotonic clock. */
int64_t po_mono_ms(void);

/* ---- waiting ---- */
/* A condition variable whose timed waits count on the monotonic clock (a
 * wall-clock step never shortens or stretches them). */
void po_cond_init(pthread_cond_t *cv);
/* The monotonic time us microseconds from now, for pthread_cond_timedwait
 * on a po_cond_init variable. */
struct timespec po_deadline_us(int64_t us);

/* ---- logging: one JSON object per line on stderr (the server), or
 * "payonce: LEVEL: message" lines (the other commands) ---- */
enum po_log_level { PO_LOG_DEBUG, PO_LOG_INFO, PO_LOG_WARN, PO_LOG_ERROR };
void po_log_set_level(enum po_log_level lvl);
void po_log_set_json(bool json);
/* "debug", "info", "warn" or "error"; false for anything else. */
bool po_log_level_parse(const char *name, enum po_log_level *out);
/* The message is escaped; callers must never pass secrets. */
void po_log(enum po_log_level lvl, const char *fmt, ...) PO_PRINTF(2, 3);

/* Well-formed UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF). */
bool po_utf8_valid(const char *s, size_t len);

/* s[0..len) as the inside of a JSON string, NUL-terminated in out (cap > 0),
 * cut at a whole escape when it does not fit: quotes, backslashes and
 * control characters escaped, bytes that are not UTF-8 written as the text
 * \xNN. Whatever a client sends, the log line stays valid JSON. Returns
 * the length written. */
size_t po_json_escape(const char *s, size_t len, char *out, size_t cap);

/* Writes one pre-rendered JSON object as a log line (the caller includes
 * ts and level). */
void po_log_line(const char *json);

/* ---- request bodies ---- */
/* A request body read in pieces, bounded: once it would exceed max, the
 * bytes are dropped and too_large is set (the caller answers 413). */
struct po_body {
    char *data; /* NUL-terminated; heap */
    size_t len;
    bool too_large;
};
/* PO_ERR_NOMEM only; exceeding max is not an error here. */
po_err po_body_append(struct po_body *b, const char *piece, size_t n, size_t max) PO_MUST_CHECK;
void po_body_free(struct po_body *b);

/* ---- files ---- */
/* Reads a whole regular file of at most max bytes into a NUL-terminated heap
 * buffer (*out, length *out_len). PO_ERR_LIMIT if larger. */
po_err po_file_read(const char *path, size_t max, char **out, size_t *out_len) PO_MUST_CHECK;
/* $TMPDIR, or /tmp when it is not set: where temporary files go. */
const char *po_tmp_dir(void);
/* Why po_file_read failed, for "cannot read PATH: REASON" messages. */
const char *po_file_error(po_err rc);
/* Why path cannot be opened, as the cause in "cannot open PATH: CAUSE",
 * found by looking at the path itself, each directory from the root down:
 * "no such file", "no such directory /var/lib/payonce", "permission
 * denied (the directory /var/lib/payonce is 0750 payonce:payonce; you are
 * alice)", "permission denied (the file is 0600 root:root; you are
 * alice)", "/etc/payonce is not a directory", "a directory, not a file".
 * write: the file is to be written (or created when absent) and files
 * made beside it (SQLite's -wal and -shm, a file renamed into place): its
 * directory must be writable too. false, with buf "", when nothing in the
 * path explains a failure (the caller keeps its own reason). */
bool po_path_why(const char *path, bool write, char *buf, size_t cap);
/* Why po_file_read(path) failed with rc: po_path_why's cause for a file
 * that is missing or cannot be read, else po_file_error's. */
void po_file_why(const char *path, po_err rc, char *buf, size_t cap);
/* The same for a stream read to its end (standard input). */
po_err po_stream_read(FILE *f, size_t max, char **out, size_t *out_len) PO_MUST_CHECK;

#endif
