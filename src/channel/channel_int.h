/*
 * channel_int.h — private to src/channel: helpers the adapters share.
 */
#ifndef PO_CHANNEL_INT_H
#define PO_CHANNEL_INT_H

#include "channel.h"

#include <jansson.h>
#include <stdarg.h>

/* Marks *out as a verification failure with a reason code and detail. */
void po_notify_reject(struct po_notify_result *out, const char *reason, const char *fmt, ...)
    PO_PRINTF(3, 4);
/* Marks *out as verified but for another merchant/app (alert, ack success). */
void po_notify_mismatch(struct po_notify_result *out, const char *reason, const char *fmt, ...)
    PO_PRINTF(3, 4);
/* ts (decimal Unix seconds) within the account's window of now; rejects
 * with bad_timestamp / stale_timestamp / future_timestamp otherwise. */
bool po_notify_window_ok(const struct po_channel_account *a, const char *ts, int64_t now,
                         struct po_notify_result *out);
/* A string member of a JSON object, or NULL. */
const char *po_json_str(json_t *obj, const char *name);
/* Bounded copy of a possibly-NULL string; false when NULL or too long. */
bool po_set_field(char *dst, size_t cap, const char *src);
bool po_utf8_valid(const char *s, size_t len);

/* One request to a channel API (api_http.c): POST when body is not NULL,
 * GET otherwise; headers are "Name: value" lines (NULL entries skipped).
 * out->status stays 0 when there was no complete answer. Non-OK only for
 * out-of-memory. */
po_err po_api_request(const char *url, const char *const *headers, int nheaders, const char *body,
                      struct po_api_resp *out) PO_MUST_CHECK;

#endif
