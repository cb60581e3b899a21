/*
 * sim.h — building callbacks exactly as the channels send them: WeChat Pay
 * v3 (AEAD_AES_256_GCM resource, SHA256withRSA over "ts\nnonce\nbody\n"),
 * Alipay (form body, RSA2 over the rsaCheckV1 string) and Stripe-style
 * (HMAC-SHA256 over "t.body"). Used by the simulator and by the tests.
 */
#ifndef PO_SIM_H
#define PO_SIM_H

#include "../core/core.h"
#include "../crypto/crypto.h"

#define PO_SIM_HEADERS_MAX 8

struct po_sim_request {
    char *body; /* heap; NUL-terminated */
    size_t body_len;
    const char *content_type;
    int nheaders;
    char name[PO_SIM_HEADERS_MAX][48];
    char value[PO_SIM_HEADERS_MAX][512];
};
void po_sim_request_free(struct po_sim_request *r);
/* Sets (or replaces) a header. */
void po_sim_set_header(struct po_sim_request *r, const char *name, const char *value);
const char *po_sim_get_header(const struct po_sim_request *r, const char *name);

/* A WeChat Pay v3 callback: resource_json is encrypted with apiv3_key
 * (random 12-character nonce), wrapped in the notification body, and the
 * whole is signed with key under serial at timestamp ts. */
po_err po_sim_wechatpay(const struct po_privkey *key, const char *serial,
                        const unsigned char *apiv3_key, size_t apiv3_key_len,
                        const char *event_type, const char *resource_json, int64_t ts,
                        struct po_sim_request *out) PO_MUST_CHECK;

/* Signs an arbitrary body as WeChat Pay does and sets the Wechatpay-*
 * headers of out (whose body is left as it is). */
po_err po_sim_wechatpay_sign(const struct po_privkey *key, const char *serial, const char *body,
                             size_t len, int64_t ts, struct po_sim_request *out) PO_MUST_CHECK;

/* An Alipay notification from n key/value pairs (sign and sign_type are
 * added), form-encoded, signed with key. */
po_err po_sim_alipay(const struct po_privkey *key, const char *const *keys,
                     const char *const *values, int n, struct po_sim_request *out) PO_MUST_CHECK;

/* A Stripe-style webhook: payload as is, Stripe-Signature for secret at ts. */
po_err po_sim_stripe(const unsigned char *secret, size_t secret_len, const char *payload,
                     int64_t ts, struct po_sim_request *out) PO_MUST_CHECK;

#endif
