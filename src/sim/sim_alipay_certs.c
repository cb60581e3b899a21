/*
 * sim_alipay_certs.c — the simulated Alipay's certificate mode (公钥证书模式):
 * the certificates `payonce sim keys` writes beside the keys, shaped like
 * the ones an Alipay app downloads from the open platform, and what the
 * simulated gateway reads of them.
 *
 *   alipayRootCert.crt            Alipay's root chain: two RSA roots and an
 *                                 ECC one (alipay_root_cert_sn is the RSA
 *                                 roots' SNs joined by "_"; the real file
 *                                 also holds an ECC and an SM2 root)
 *   alipayCertPublicKey_RSA2.crt  Alipay's public-key certificate (its key
 *                                 alipay_public_key.pem), issued by the first
 *                                 root, followed by that root as the real file
 *                                 carries its issuer
 *   appCertPublicKey.crt          the app's public-key certificate (the
 *                                 merchant key pair), issued the same way
 *   alipayCertPublicKey_RSA2_next.crt, alipay_private_key_next.pem
 *                                 Alipay's next certificate and key: a
 *                                 rotation (DIR/alipay_cert_next switches
 *                                 the gateway's answers to it)
 *
 * The SNs are computed by crypto's po_cert_alipay_sn, which payonce uses
 * too; the conformance suite checks both against alipay-sdk's own
 * computation (tests/conformance: the judge and sdk/alipay.mjs).
 */
#include "sim_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* dir/name as text (heap), or NULL. */
static char *read_in(const char *dir, const char *name, size_t *len)
{
    char path[1024], *out = NULL;
    (void)snprintf(path, sizeof path, "%s/%s", dir, name);
    return po_file_read(path, PO_KEY_FILE_MAX, &out, len) == PO_OK ? out : NULL;
}

static po_err write_in(const char *dir, const char *name, const char *text)
{
    char path[1024];
    (void)snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return PO_ERR_IO;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? PO_OK : PO_ERR_IO;
}

/* a positive serial, 16 hex digits */
static void serial(char out[17])
{
    unsigned char r[8];
    PO_ASSERT(po_random(r, sizeof r) == PO_OK);
    for (int i = 0; i < 8; i++)
        (void)snprintf(out + 2 * i, 3, "%02X", r[i]);
    out[0] = "123456789ABCDEF"[r[0] % 15];
}

/* A leaf certificate of key issued by root, followed by root (as the
 * files Alipay hands out carry their issuer), into dir/name. */
static po_err leaf(const char *dir, const char *name, const struct po_privkey *key, const char *dn,
                   const struct po_privkey *root_key, const char *root_pem)
{
    char sn[17], *pem = NULL;
    serial(sn);
    po_err rc = po_cert_issue(key, dn, sn, root_key, root_pem, false, &pem);
    size_t len = pem ? strlen(pem) + strlen(root_pem) + 1 : 0;
    char *both = pem ? malloc(len) : NULL;
    if (!rc && !both)
        rc = PO_ERR_NOMEM;
    if (!rc) {
        (void)snprintf(both, len, "%s%s", pem, root_pem);
        rc = write_in(dir, name, both);
    }
    free(both);
    free(pem);
    return rc;
}

static struct po_privkey *key_in(const char *dir, const char *name)
{
    size_t len = 0;
    char *pem = read_in(dir, name, &len);
    struct po_privkey *k = NULL;
    if (pem && po_privkey_from_pem(pem, len, &k))
        k = NULL;
    if (pem)
        po_secure_zero(pem, len);
    free(pem);
    return k;
}

po_err po_sim_alipay_certs_generate(const char *dir, char *err, size_t errcap)
{
    struct po_privkey *r1 = NULL, *r2 = NULL, *ec = NULL, *next = NULL;
    struct po_privkey *ali = key_in(dir, "alipay_private_key.pem");
    struct po_privkey *app = key_in(dir, "merchant_private_key.pem");
    char *p1 = NULL, *p2 = NULL, *pe = NULL, *chain = NULL, *next_priv = NULL, *next_pub = NULL;
    char s1[17], s2[17], se[17];
    serial(s1);
    serial(s2);
    serial(se);
    po_err rc = ali && app ? PO_OK : PO_ERR_IO;
    if (!rc && !(rc = po_privkey_generate(&r1)) && !(rc = po_privkey_generate(&r2)) &&
        !(rc = po_privkey_generate_ec(&ec)) && !(rc = po_privkey_generate(&next)))
        rc = po_privkey_to_pem(next, &next_priv, &next_pub);
    static const char dn1[] = "/C=CN/O=payonce simulated Ant Financial/OU=Certification"
                              " Authority/CN=payonce simulated Alipay Root R1";
    static const char dn2[] = "/C=CN/O=payonce simulated Ant Financial/OU=Certification"
                              " Authority/CN=payonce simulated Alipay Root R2";
    static const char dne[] = "/C=CN/O=payonce simulated Ant Financial/OU=Certification"
                              " Authority/CN=payonce simulated Alipay Root E1";
    if (!rc && !(rc = po_cert_issue(r1, dn1, s1, r1, NULL, true, &p1)) &&
        !(rc = po_cert_issue(r2, dn2, s2, r2, NULL, true, &p2)))
        rc = po_cert_issue(ec, dne, se, ec, NULL, true, &pe);
    size_t len = p1 && p2 && pe ? strlen(p1) + strlen(p2) + strlen(pe) + 1 : 0;
    if (!rc && !(chain = malloc(len)))
        rc = PO_ERR_NOMEM;
    if (!rc) {
        (void)snprintf(chain, len, "%s%s%s", p1, pe, p2);
        rc = write_in(dir, "alipayRootCert.crt", chain);
    }
    if (!rc)
        rc = leaf(dir, "alipayCertPublicKey_RSA2.crt", ali,
                  "/C=CN/O=payonce simulated Alipay/OU=Alipay/CN=payonce simulated Alipay RSA2", r1,
                  p1);
    if (!rc)
        rc = leaf(dir, "alipayCertPublicKey_RSA2_next.crt", next,
                  "/C=CN/O=payonce simulated Alipay/OU=Alipay/CN=payonce simulated Alipay RSA2"
                  " next",
                  r1, p1);
    if (!rc)
        rc = leaf(dir, "appCertPublicKey.crt", app,
                  "/C=CN/O=payonce simulated merchant/OU=Alipay/CN=2021000000000001", r1, p1);
    if (!rc)
        rc = write_in(dir, "alipay_private_key_next.pem", next_priv);
    if (rc)
        po_errf(err, errcap, "the simulated Alipay certificates could not be made in %s (%s)", dir,
                po_err_name(rc));
    if (next_priv)
        po_secure_zero(next_priv, strlen(next_priv));
    free(next_priv);
    free(next_pub);
    free(p1);
    free(p2);
    free(pe);
    free(chain);
    po_privkey_free(r1);
    po_privkey_free(r2);
    po_privkey_free(ec);
    po_privkey_free(next);
    po_privkey_free(ali);
    po_privkey_free(app);
    return rc;
}

po_err sim_alipay_certs_load(const char *dir, struct sim_alipay_certs *out)
{
    memset(out, 0, sizeof *out);
    static const char *const names[] = {"appCertPublicKey.crt", "alipayRootCert.crt",
                                        "alipayCertPublicKey_RSA2.crt",
                                        "alipayCertPublicKey_RSA2_next.crt"};
    char *sn[] = {out->app_sn, out->root_sn, out->alipay_sn[0], out->alipay_sn[1]};
    size_t cap[] = {sizeof out->app_sn, sizeof out->root_sn, sizeof out->alipay_sn[0],
                    sizeof out->alipay_sn[1]};
    po_err rc = PO_OK;
    for (int i = 0; i < 4 && !rc; i++) {
        size_t len = 0;
        char *pem = read_in(dir, names[i], &len);
        rc = pem ? po_cert_alipay_sn(pem, len, i == 1, sn[i], cap[i], NULL, 0) : PO_ERR_NOT_FOUND;
        free(pem);
    }
    if (!rc && !(out->next_key = key_in(dir, "alipay_private_key_next.pem")))
        rc = PO_ERR_IO;
    return rc;
}

void sim_alipay_certs_free(struct sim_alipay_certs *c)
{
    po_privkey_free(c->next_key);
    c->next_key = NULL;
}
