/*
 * access.c — the access log: one JSON line per request, written directly
 * (it is on every request's path). What the client sent (method, path) is
 * escaped whatever its bytes — invalid UTF-8, quotes, control characters —
 * so every request gets its line and every line is valid JSON.
 */
#include "http_int.h"

#include <stdio.h>
#include <string.h>

#define PATH_LOG_MAX 256 /* bytes of the path that are logged */

void po_access_line(const struct po_hreq *req, const char *msg, unsigned status, uint64_t micros,
                    const char *extra)
{
    char ts[PO_TIME_SIZE], method[64], path[PATH_LOG_MAX * 6 + 1], line[2560];
    po_clock_now_iso(ts, sizeof ts);
    const char *m = req->method ? req->method : "", *p = req->path ? req->path : "";
    (void)po_json_escape(m, strnlen(m, 16), method, sizeof method);
    (void)po_json_escape(p, strnlen(p, PATH_LOG_MAX), path, sizeof path);
    int n = snprintf(line, sizeof line,
                     "{\"ts\":\"%s\",\"level\":\"info\",\"msg\":\"%s\",\"request_id\":\"%s\","
                     "\"method\":\"%s\",\"path\":\"%s\",\"status\":%u,\"ms\":%.3f%s}",
                     ts, msg, req->request_id ? req->request_id : "", method, path, status,
                     (double)micros / 1000.0, extra ? extra : "");
    if (n > 0 && (size_t)n < sizeof line)
        po_log_line(line);
}
