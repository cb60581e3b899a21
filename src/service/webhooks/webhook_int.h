/*
 * webhook_int.h — what the two halves of tenant webhooks share
 * (webhook_endpoints.c, webhook_delivery.c).
 */
#ifndef PO_WEBHOOK_INT_H
#define PO_WEBHOOK_INT_H

#include "webhook.h"

/* An endpoint's signing secret from its stored form: sealed with the
 * master key (bound to the tenant and endpoint), or "plain:" only where
 * there is no master key (insecure development; a gateway with a key
 * refuses one). */
po_err po_webhook_open_secret(const unsigned char *master, const char *tenant, const char *id,
                              const char *stored, char out[PO_WEBHOOK_SECRET_SIZE]) PO_MUST_CHECK;

#endif
