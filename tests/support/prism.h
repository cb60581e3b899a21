/*
 * prism.h — the tenant API's description (docs/openapi.json) enforced on a
 * test's own traffic: Stoplight Prism's validating proxy between the test's
 * HTTP client and its gateways (tests/e2e/openapi.sh runs test_api so).
 *
 * When PAYONCE_PRISM names prism's command (tests/openapi/node_modules/
 * .bin/prism) and PAYONCE_OPENAPI the description, t_prism_start chooses n
 * fixed loopback ports for the test's gateways to listen on (the same in
 * every case: prism starts once and proxies to them) and starts two
 * proxies in front of each, `prism proxy --errors` (strict) and `prism
 * proxy` (lenient, which forwards what the description refuses and says so
 * in its sl-violations header). t_prism_http then sends a request:
 *
 *  - through the strict proxy, which checks the request and payonce's
 *    answer (status, headers, body) against the description: an answer it
 *    does not allow is a violation (prism's 500, or an sl-violations
 *    header, which also names an undocumented status);
 *  - when the strict proxy refuses the request itself (it violates the
 *    description: the test's bad input, a missing key, an unknown route),
 *    again through the lenient one: payonce must refuse it too (4xx), or the
 *    description refuses what the code accepts — a violation — and its
 *    answer is checked all the same;
 *  - around both, straight to the gateway, when prism could not carry it
 *    unchanged: a JSON body it would re-encode into another request
 *    (duplicate members, numbers beyond 2^53, invalid UTF-8, nesting it
 *    cannot parse, a body over the gateway's limit that re-encoded without
 *    its blanks would fit) or a path whose percent-encoding is not UTF-8
 *    (prism 5.14 dies on it). These are counted and named in the figure;
 *    so are requests outside /v1 (/metrics), which go straight too.
 *
 * Every violation is a failed check of the calling case, printed with
 * prism's own words, and t_prism_stop counts one check: none over the run.
 */
#ifndef PO_TEST_PRISM_H
#define PO_TEST_PRISM_H

#include "simenv.h"

#include <stdbool.h>

#define T_PRISM_UPSTREAMS_MAX 4

/* Starts the proxies for n (≤ T_PRISM_UPSTREAMS_MAX) gateway ports, chosen
 * here into upstream[]; their logs go to dir/prism-*.log. false when
 * PAYONCE_PRISM is not set (nothing started); aborts the test when prism
 * does not start. */
bool t_prism_start(const char *dir, int n, unsigned upstream[]);

/* Whether the proxies run. */
bool t_prism_on(void);

/* One request of q's method, headers and body to path on the gateway that
 * listens on port (one of upstream[]), as t_http: payonce's answer (status,
 * headers through q->on_header, body into out), judged on the way as above.
 * Thread-safe. */
long t_prism_http(const struct t_http_req *q, unsigned port, const char *path, char *out,
                  size_t cap, size_t *len);

/* Stops the proxies, prints the figure (what went through, what the
 * description refused, what went around) under name and counts the check
 * that no exchange violated the description. */
void t_prism_stop(const char *name);

#endif
