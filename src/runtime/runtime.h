/*
 * runtime.h — the gateway's shared runtime parts that know no business:
 * a pool of threads for blocking work, fair between tenants (workers.c),
 * and bounded work in flight per tenant and in all (bulkhead.c). Both are
 * work-conserving: a tenant alone may use everything; a share binds only
 * while another tenant is active. Depends on core only.
 */
#ifndef PO_RUNTIME_H
#define PO_RUNTIME_H

#include "../core/core.h"

/* ---- a pool of threads for blocking work (workers.c) ---- */

struct po_workers;
/* nthreads threads; at most queue_max jobs queued; a tenant's lane runs at
 * most `share` jobs at once while another lane is active (has work, or a
 * tenant's submitted within recent_ms), every thread while alone. */
po_err po_workers_start(int nthreads, int queue_max, int share, int recent_ms,
                        struct po_workers **out) PO_MUST_CHECK;
/* Queues fn(ctx) in tenant's lane (NULL or "": the anonymous lane, for
 * work of no known tenant); PO_ERR_LIMIT when the queue or the lane is
 * full (fn never runs). */
po_err po_workers_submit(struct po_workers *w, const char *tenant, void (*fn)(void *ctx),
                         void *ctx) PO_MUST_CHECK;
/* Runs what is queued, then joins the threads; submit refuses from then
 * on (PO_ERR_LIMIT). Idempotent. */
void po_workers_stop(struct po_workers *w);
/* Stops (if still running) and frees. */
void po_workers_free(struct po_workers *w);

/* ---- bounded work in flight (bulkhead.c) ---- */

/* At most total slots in all; a tenant holds more than per_tenant only
 * while no other tenant holds a slot or asked for one within recent_ms
 * (work-conserving: a lone tenant may use every slot). */
struct po_bulkhead;
po_err po_bulkhead_open(int per_tenant, int total, int recent_ms,
                        struct po_bulkhead **out) PO_MUST_CHECK;
void po_bulkhead_close(struct po_bulkhead *b);
/* Takes a slot for tenant; false (nothing taken) over a limit. A NULL
 * bulkhead always admits. */
bool po_bulkhead_enter(struct po_bulkhead *b, const char *tenant);
void po_bulkhead_leave(struct po_bulkhead *b, const char *tenant);
/* A credential's id (an API key's key_id) that authenticated as tenant;
 * remembered so that the next request bearing it can be refused before
 * the credential is checked, when that tenant is over its share: a flood
 * over its share then costs no database round trip. Only a real tenant's
 * in-flight count decides, so a forged id can never get another tenant
 * refused. */
void po_bulkhead_hint(struct po_bulkhead *b, const char *hint, const char *tenant);
bool po_bulkhead_hint_over_share(struct po_bulkhead *b, const char *hint);
/* The tenant the credential id last authenticated as, into out (""
 * when unknown): the lane its request waits in for a worker. */
void po_bulkhead_hinted(struct po_bulkhead *b, const char *hint, char *out, size_t cap);
uint64_t po_bulkhead_refused(struct po_bulkhead *b);

/* ---- token buckets by key (ratelimit.c) ---- */

/* At most `entries` keys remembered (a full table forgets the key seen
 * longest ago: a flood of new keys cannot grow it); each key may take
 * `burst` at once and `per_minute` more each minute after. Thread-safe. */
struct po_ratelimit;
po_err po_ratelimit_open(int entries, int burst, int per_minute,
                         struct po_ratelimit **out) PO_MUST_CHECK;
void po_ratelimit_close(struct po_ratelimit *r);
/* Takes one token of key's bucket at now_ms; false (nothing taken) when
 * it is empty, with *retry_after_s the whole seconds until one is back
 * (at least 1). Keys are compared whole, up to 95 bytes (longer ones are
 * cut: they share a bucket). */
bool po_ratelimit_take(struct po_ratelimit *r, const char *key, int64_t now_ms, int *retry_after_s);

#endif
