/*
 * fuzz_common.h — shared by the libFuzzer targets: accounts with keys the
 * fuzzer owns, so that inputs can also be signed validly and reach the
 * parsing that only runs after verification.
 */
#ifndef PO_FUZZ_COMMON_H
#define PO_FUZZ_COMMON_H

#include "../../src/channel/channel.h"
#include "../../src/sim/sim.h"

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

static inline void fuzz_accounts(struct po_channel_account *wx, struct po_channel_account *ali,
                                 struct po_channel_account *st)
{
    if (!fuzz_key && po_privkey_generate(&fuzz_key))
        abort();
    char *priv = NULL, *pub = NULL, serial[PO_SERIAL_MAX + 1];
    if (po_privkey_to_pem(fuzz_key, &priv, &pub))
        abort();
    memset(wx, 0, sizeof *wx);
    memset(ali, 0, sizeof *ali);
    memset(st, 0, sizeof *st);
    strcpy(wx->tenant, "t1");         /* lint-ok */
    strcpy(wx->channel, "wechatpay"); /* lint-ok */
    strcpy(wx->mchid, "1230000109");  /* lint-ok */
    wx->window_s = 300;
    memcpy(wx->apiv3_key, FUZZ_APIV3, 32);
    wx->apiv3_key_len = 32;
    strcpy(wx->keys[0].serial, "PUB_KEY_ID_FUZZ"); /* lint-ok */
    if (po_pubkey_from_pem(pub, strlen(pub), &wx->keys[0].key, serial, sizeof serial, NULL, 0))
        abort();
    wx->nkeys = 1;
    *ali = *wx;
    ali->nkeys = 0;
    strcpy(ali->channel, "alipay");          /* lint-ok */
    strcpy(ali->app_id, "2021000000000001"); /* lint-ok */
    if (po_pubkey_from_pem(pub, strlen(pub), &ali->alipay_key, serial, sizeof serial, NULL, 0))
        abort();
    strcpy(st->tenant, "t1");      /* lint-ok */
    strcpy(st->channel, "stripe"); /* lint-ok */
    st->window_s = 300;
    memcpy(st->secrets[0].v, FUZZ_SECRET, strlen(FUZZ_SECRET));
    st->secrets[0].len = strlen(FUZZ_SECRET);
    st->nsecrets = 1;
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
        char err[PO_ERRBUF_MAX];
        /* Whatever an adapter hands on must be a valid event. */
        if (!out.pay_txn_id[0] && po_event_validate(&out.ev, err, sizeof err))
            abort();
    }
}

#endif
