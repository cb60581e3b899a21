/*
 * webhook.h — tenant webhooks: endpoints (webhook_endpoints.c) and deliveries (webhook_delivery.c).
 * Part of service.h (which includes every service header).
 *
 * webhooks/ owns the tenants' webhook endpoints and the outbox's delivery
 * to them (webhook_int.h is the two files' own). It calls no other service
 * room; alerts/, console/ and gateway/ call it.
 */
#ifndef PO_SERVICE_WEBHOOK_H
#define PO_SERVICE_WEBHOOK_H

#include "../../channel/channel.h"
#include "../../core/core.h"
#include "../../engine/engine.h"
#include "../../runtime/runtime.h"
#include "../../store/store.h"

#include <jansson.h>

/* ---- tenant webhooks (webhook_endpoints.c, webhook_delivery.c; docs/webhooks.md) ---- */

/* "*" or a comma-separated list of outbox event types. */
bool po_webhook_events_ok(const char *events, char *err, size_t errcap);

struct po_webhook_new {
    char id[PO_ID_MAX + 1];              /* we_ + 16 hex */
    char secret[PO_WEBHOOK_SECRET_SIZE]; /* whsec_…, shown once */
};
/* A new endpoint of tenant for events (NULL: all); its URL must pass the
 * egress policy (po_egress_url_ok: PO_ERR_INVALID); a tenant has at most
 * PO_WEBHOOK_ENDPOINTS_MAX live ones (PO_ERR_LIMIT, nothing added). The
 * secret is sealed with master (stored plain only without one, in
 * insecure development). */
po_err po_webhook_add(struct po_store *s, const unsigned char *master, const char *tenant,
                      const char *url, const char *events, const struct po_egress_policy *egress,
                      struct po_webhook_new *out, char *err, size_t errcap) PO_MUST_CHECK;
/* The tenant's live endpoints (no secrets), with pending and dead counts,
 * keyset-paged on (created_at, id). */
po_err po_webhook_list(struct po_store *s, const char *tenant, struct po_page *pg,
                       json_t **out) PO_MUST_CHECK;
/* One live endpoint as po_webhook_list shows it; PO_ERR_NOT_FOUND. */
po_err po_webhook_get(struct po_store *s, const char *tenant, const char *id,
                      json_t **out) PO_MUST_CHECK;
/* Removes the endpoint: nothing more is sent to it (its pending
 * deliveries end dead, "endpoint removed"; an attempt already in flight
 * finishes and records nothing). */
po_err po_webhook_remove(struct po_store *s, const char *tenant, const char *id, char *err,
                         size_t errcap) PO_MUST_CHECK;
/* Opens every live endpoint's secret as a gateway with master would
 * (a plain one is refused when master is set): *out_broken of
 * *out_checked cannot be opened, the first named in err. */
po_err po_webhook_check_secrets(struct po_store *s, const unsigned char *master, int *out_checked,
                                int *out_broken, char *err, size_t errcap) PO_MUST_CHECK;
/* Judges every live endpoint's URL by egress as a delivery would before it
 * resolves the host (po_egress_url_ok): report() for the first report_max
 * refused, with the policy's reason (never the URL: `webhook list` shows
 * it, and a URL may carry a tenant's token), in (tenant, endpoint) order.
 * Counts every one into *checked and *refused; changes nothing; non-OK
 * only when the store cannot be read (err says why). serve runs it at
 * start, config check with the configuration it checks: a URL registered
 * under another policy (webhook add --insecure-dev, a serve without it) is
 * said before any delivery fails. */
po_err po_webhook_check_urls(
    struct po_store *s, const struct po_egress_policy *egress, int report_max,
    void (*report)(void *ctx, const char *tenant, const char *endpoint, const char *why), void *ctx,
    int *checked, int *refused, char *err, size_t errcap) PO_MUST_CHECK;
/* A new secret for the endpoint (the old one stops at once). */
po_err po_webhook_rotate(struct po_store *s, const unsigned char *master, const char *tenant,
                         const char *id, char secret[PO_WEBHOOK_SECRET_SIZE], char *err,
                         size_t errcap) PO_MUST_CHECK;
/* Dead deliveries of the tenant back to pending: one event (event_id), or
 * an endpoint's (endpoint_id) created at or after since (NULL: all). */
po_err po_webhook_redrive(struct po_store *s, const char *tenant, const char *event_id,
                          const char *endpoint_id, const char *since, int64_t *out_count, char *err,
                          size_t errcap) PO_MUST_CHECK;
/* Every attempt at delivering event_id, per endpoint. */
po_err po_webhook_attempts(struct po_store *s, const char *tenant, const char *event_id,
                           json_t **out) PO_MUST_CHECK;
/* An outbox row as the tenant receives it (webhook body, /v1/events):
 * {"id","object":"event","type","created" (unix s),"tenant","data":
 * {"object": payload}} (heap text). */
po_err po_event_envelope(const char *event_id, const char *type, const char *created_at,
                         const char *tenant, const char *payload, char **out) PO_MUST_CHECK;
/* Payonce-Signature: "t=<t>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>". */
po_err po_webhook_sign(const char *secret, int64_t t, const char *body, char *header,
                       size_t cap) PO_MUST_CHECK;

struct po_webhooks_cfg {
    const char *db_url;
    const unsigned char *master;    /* NULL in insecure development mode */
    struct po_egress_policy egress; /* where deliveries may go (channel.h) */
    int senders;                    /* concurrent deliveries (1..32) */
    /* In flight at once: per endpoint always; per tenant only while
     * another tenant has deliveries due (a lone tenant may use every
     * sender), and then at most an equal share of the senders. */
    int per_endpoint, per_tenant;
    int64_t pending_max; /* a tenant's pending deliveries before its fan-out waits */
    long timeout_ms;     /* one attempt */
    int64_t retry_base_ms, retry_cap_ms, max_age_s, alert_after_s;
    int poll_ms; /* how often due deliveries are looked for */
};
struct po_webhooks_stats {
    uint64_t delivered, failed, dead;
    int64_t depth, oldest_age_ms;
};
struct po_webhooks;
po_err po_webhooks_start(const struct po_webhooks_cfg *cfg, struct po_webhooks **out, char *err,
                         size_t errcap) PO_MUST_CHECK;
void po_webhooks_stop(struct po_webhooks *w);
void po_webhooks_stats(struct po_webhooks *w, struct po_webhooks_stats *out);

#endif
