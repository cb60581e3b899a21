/*
 * fuzz_common.h — shared by the libFuzzer targets: accounts with keys the
 * fuzzer owns, so that inputs can also be signed validly and reach the
 * parsing that only runs after verification.
 */
#ifndef PO_FUZZ_COMMON_H
#define PO_FUZZ_COMMON_H

#include "../../src/channel/channel.h"
#include "../../src/crypto/crypto.h"
#include "../../src/sim/sim.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FUZZ_APIV3 "0123456789abcdef0123456789abcdef"
#define FUZZ_SECRET "whsec_fuzz"

static struct po_privkey *fuzz_key;

/* Lookup over a po_sim_request's headers. */
static inline const char *fuzz_header(void *ctx, const char *name)
{
    return po_sim_get_header((const struct po_sim_request *)ctx, name);
}

/* A stored document (doc, taken) loaded as the gateway loads it, in
 * development mode ("plain:" secrets, no master key). */
static inline void fuzz_load(const char *channel, json_t *doc, struct po_channel_account *out)
{
    char *text = doc ? po_json_dumps(doc, JSON_COMPACT) : NULL;
    if (!text || po_channel_account_load("t1", channel, text, NULL, out, NULL, 0))
        abort();
    free(text);
    json_decref(doc);
}

static inline json_t *fuzz_plain(const char *secret)
{
    char *stored = NULL;
    if (po_secret_store(NULL, "", secret, strlen(secret), &stored))
        abort();
    json_t *j = json_string(stored);
    free(stored);
    return j;
}

static inline void fuzz_accounts(struct po_channel_account *wx, struct po_channel_account *ali,
                                 struct po_channel_account *st)
{
    if (!fuzz_key && po_privkey_generate(&fuzz_key))
        abort();
    char *priv = NULL, *pub = NULL;
    if (po_privkey_to_pem(fuzz_key, &priv, &pub))
        abort();
    fuzz_load("wechatpay",
              json_pack("{s:i, s:s, s:o, s:[{s:s, s:s}]}", "window_s", 300, "mchid", "1230000109",
                        "apiv3_key", fuzz_plain(FUZZ_APIV3), "keys", "serial", "PUB_KEY_ID_FUZZ",
                        "public_key_pem", pub),
              wx);
    fuzz_load("alipay",
              json_pack("{s:i, s:s, s:s}", "window_s", 300, "app_id", "2021000000000001",
                        "public_key_pem", pub),
              ali);
    fuzz_load(
        "stripe",
        json_pack("{s:i, s:[o]}", "window_s", 300, "webhook_secrets", fuzz_plain(FUZZ_SECRET)), st);
    free(priv);
    free(pub);
}

/* Splits "h1\nh2\n...\n\nbody": the first lines become header values in
 * order of names[], the rest the body. */
static inline void fuzz_split(const uint8_t *data, size_t size, const char *const *names, int n,
                              struct po_sim_request *r)
{
    memset(r, 0, sizeof *r);
    size_t i = 0;
    for (int h = 0; h < n && i < size; h++) {
        size_t end = i;
        while (end < size && data[end] != '\n' && end - i < 500)
            end++;
        char v[512];
        memcpy(v, data + i, end - i);
        v[end - i] = '\0';
        po_sim_set_header(r, names[h], v);
        i = end + 1;
    }
    if (i > size)
        i = size;
    r->body = malloc(size - i + 1);
    memcpy(r->body, data + i, size - i);
    r->body[size - i] = '\0';
    r->body_len = size - i;
}

static inline void fuzz_parse(const struct po_channel_account *a, struct po_sim_request *r)
{
    struct po_notify_req req = {.body = r->body,
                                .body_len = r->body_len,
                                .header = fuzz_header,
                                .hctx = r,
                                .now_unix = (int64_t)time(NULL)};
    struct po_notify_result out;
    if (po_channel_parse(a, &req, &out) == PO_OK && out.status == PO_NOTIFY_EVENT) {
        char err[PO_ERRBUF_SIZE];
        /* Whatever an adapter hands on must be a valid event. */
        if (!out.pay_txn_id[0] && po_event_validate(&out.ev, err, sizeof err))
            abort();
    }
}

#endif
