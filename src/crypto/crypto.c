/*
 * crypto.c — OpenSSL 3 behind the small interface of crypto.h.
 */
#include "crypto_int.h"

#include <crack.h>
#include <ctype.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

struct po_pubkey {
    EVP_PKEY *pkey;
};
struct po_privkey {
    EVP_PKEY *pkey;
};

#define B64_INPUT_MAX (4 * 1024 * 1024)

/* ---- algorithms fetched once, contexts reused per thread ----
 * OpenSSL 3 looks an algorithm up by name (in a store guarded by a
 * read-write lock) each time EVP_sha256() and friends are used, and a new
 * context costs allocations: on a gateway verifying thousands of callbacks
 * a second on every core both show. So the algorithms are fetched once for
 * the process, and each thread keeps one digest and one cipher context
 * that it resets after use (freed when the thread ends). */
static pthread_once_t algs_once = PTHREAD_ONCE_INIT;
static EVP_MD *md_sha256, *md_sha1;
static EVP_CIPHER *aes_gcm[3]; /* 128, 192, 256 */
static pthread_key_t ctx_key;

struct thread_ctx {
    EVP_MD_CTX *md;
    EVP_CIPHER_CTX *cipher;
};

static void thread_ctx_free(void *p)
{
    struct thread_ctx *t = p;
    EVP_MD_CTX_free(t->md);
    EVP_CIPHER_CTX_free(t->cipher);
    free(t);
}

static void algs_init(void)
{
    md_sha256 = EVP_MD_fetch(NULL, "SHA2-256", NULL);
    md_sha1 = EVP_MD_fetch(NULL, "SHA1", NULL);
    aes_gcm[0] = EVP_CIPHER_fetch(NULL, "AES-128-GCM", NULL);
    aes_gcm[1] = EVP_CIPHER_fetch(NULL, "AES-192-GCM", NULL);
    aes_gcm[2] = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
    PO_ASSERT(md_sha256 && md_sha1 && aes_gcm[0] && aes_gcm[1] && aes_gcm[2]);
    PO_ASSERT(pthread_key_create(&ctx_key, thread_ctx_free) == 0);
}

static const EVP_MD *sha256(void)
{
    pthread_once(&algs_once, algs_init);
    return md_sha256;
}

/* This thread's contexts (NULL when out of memory). */
static struct thread_ctx *thread_ctx(void)
{
    pthread_once(&algs_once, algs_init);
    struct thread_ctx *t = pthread_getspecific(ctx_key);
    if (t)
        return t;
    t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->md = EVP_MD_CTX_new();
    t->cipher = EVP_CIPHER_CTX_new();
    if (!t->md || !t->cipher || pthread_setspecific(ctx_key, t) != 0) {
        thread_ctx_free(t);
        return NULL;
    }
    return t;
}

po_err po_b64_decode(const char *in, size_t len, unsigned char **out, size_t *out_len)
{
    if (len == 0 || len % 4 != 0 || len > B64_INPUT_MAX)
        return PO_ERR_INVALID;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '+' || c == '/' || (c == '=' && i >= len - 2);
        if (!ok || (i == len - 2 && c == '=' && in[len - 1] != '='))
            return PO_ERR_INVALID;
    }
    unsigned char *buf = malloc(len / 4 * 3 + 1);
    if (!buf)
        return PO_ERR_NOMEM;
    int n = EVP_DecodeBlock(buf, (const unsigned char *)in, (int)len);
    if (n < 0) {
        free(buf);
        return PO_ERR_INVALID;
    }
    size_t pad = (in[len - 1] == '=') + (in[len - 2] == '=');
    *out_len = (size_t)n - pad;
    buf[*out_len] = '\0';
    *out = buf;
    return PO_OK;
}

po_err po_b64_encode(const unsigned char *in, size_t len, char **out)
{
    if (len > B64_INPUT_MAX)
        return PO_ERR_LIMIT;
    char *buf = malloc((len + 2) / 3 * 4 + 1);
    if (!buf)
        return PO_ERR_NOMEM;
    EVP_EncodeBlock((unsigned char *)buf, in, (int)len);
    *out = buf;
    return PO_OK;
}

/* Takes ownership of pkey (freed on failure). */
static po_err wrap_pub(EVP_PKEY *pkey, struct po_pubkey **out)
{
    struct po_pubkey *k = malloc(sizeof *k);
    if (!k) {
        EVP_PKEY_free(pkey);
        return PO_ERR_NOMEM;
    }
    k->pkey = pkey;
    *out = k;
    return PO_OK;
}

static po_err wrap_priv(EVP_PKEY *pkey, struct po_privkey **out)
{
    struct po_privkey *k = malloc(sizeof *k);
    if (!k) {
        EVP_PKEY_free(pkey);
        return PO_ERR_NOMEM;
    }
    k->pkey = pkey;
    *out = k;
    return PO_OK;
}

po_err po_pubkey_from_pem(const char *pem, size_t len, struct po_pubkey **out, char *serial,
                          size_t serial_cap, char *err, size_t errcap)
{
    po_err rc = PO_ERR_INVALID;
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    X509 *cert = NULL;
    EVP_PKEY *pkey = NULL;
    if (!bio)
        return PO_ERR_NOMEM;
    if (serial_cap)
        serial[0] = '\0';
    if (memmem(pem, len, "BEGIN CERTIFICATE", 17)) {
        cert = PEM_read_bio_X509(bio, NULL, NULL, NULL);
        if (!cert) {
            po_errf(err, errcap, "not a valid PEM certificate");
            goto out;
        }
        pkey = X509_get_pubkey(cert);
        BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), NULL);
        char *hex = bn ? BN_bn2hex(bn) : NULL;
        BN_free(bn);
        if (!hex || po_strcpy(serial, serial_cap, hex)) {
            OPENSSL_free(hex);
            po_errf(err, errcap, "certificate serial missing or too long");
            goto out;
        }
        OPENSSL_free(hex);
    } else {
        pkey = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
    }
    if (!pkey || EVP_PKEY_get_base_id(pkey) != EVP_PKEY_RSA) {
        po_errf(err, errcap, "not an RSA public key or certificate in PEM");
        goto out;
    }
    rc = wrap_pub(pkey, out);
    pkey = NULL;
out:
    EVP_PKEY_free(pkey);
    X509_free(cert);
    BIO_free(bio);
    return rc;
}

po_err po_pubkey_from_spki_b64(const char *b64, struct po_pubkey **out, char *err, size_t errcap)
{
    unsigned char *der = NULL;
    size_t der_len = 0;
    if (po_b64_decode(b64, strlen(b64), &der, &der_len)) {
        po_errf(err, errcap, "public key is not valid base64");
        return PO_ERR_INVALID;
    }
    const unsigned char *p = der;
    EVP_PKEY *pkey = d2i_PUBKEY(NULL, &p, (long)der_len);
    free(der);
    if (!pkey || EVP_PKEY_get_base_id(pkey) != EVP_PKEY_RSA) {
        EVP_PKEY_free(pkey);
        po_errf(err, errcap, "not an RSA SubjectPublicKeyInfo");
        return PO_ERR_INVALID;
    }
    return wrap_pub(pkey, out);
}

/* Copies a memory BIO's contents into a NUL-terminated heap string. */
static po_err bio_to_string(BIO *bio, char **out)
{
    char *data = NULL;
    long n = BIO_get_mem_data(bio, &data);
    if (n < 0)
        return PO_ERR_INTERNAL;
    char *s = malloc((size_t)n + 1);
    if (!s)
        return PO_ERR_NOMEM;
    memcpy(s, data, (size_t)n);
    s[n] = '\0';
    *out = s;
    return PO_OK;
}

static po_err pub_pem(EVP_PKEY *pkey, char **out)
{
    BIO *bio = BIO_new(BIO_s_mem());
    if (!bio)
        return PO_ERR_NOMEM;
    po_err rc = PEM_write_bio_PUBKEY(bio, pkey) == 1 ? bio_to_string(bio, out) : PO_ERR_INTERNAL;
    BIO_free(bio);
    return rc;
}

po_err po_pubkey_to_pem(const struct po_pubkey *k, char **out)
{
    return pub_pem(k->pkey, out);
}

void po_pubkey_free(struct po_pubkey *k)
{
    if (!k)
        return;
    EVP_PKEY_free(k->pkey);
    free(k);
}

po_err po_privkey_from_pem(const char *pem, size_t len, struct po_privkey **out)
{
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    if (!bio)
        return PO_ERR_NOMEM;
    EVP_PKEY *pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    BIO_free(bio);
    if (!pkey || EVP_PKEY_get_base_id(pkey) != EVP_PKEY_RSA) {
        EVP_PKEY_free(pkey);
        return PO_ERR_INVALID;
    }
    return wrap_priv(pkey, out);
}

po_err po_privkey_generate(struct po_privkey **out)
{
    EVP_PKEY *pkey = EVP_RSA_gen(2048);
    if (!pkey)
        return PO_ERR_INTERNAL;
    return wrap_priv(pkey, out);
}

po_err po_privkey_to_pem(const struct po_privkey *k, char **out_priv_pem, char **out_pub_pem)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *priv = NULL;
    if (!bio)
        return PO_ERR_NOMEM;
    po_err rc = PEM_write_bio_PrivateKey(bio, k->pkey, NULL, NULL, 0, NULL, NULL) == 1
                    ? bio_to_string(bio, &priv)
                    : PO_ERR_INTERNAL;
    BIO_free(bio);
    if (rc)
        return rc;
    rc = pub_pem(k->pkey, out_pub_pem);
    if (rc) {
        free(priv);
        return rc;
    }
    *out_priv_pem = priv;
    return PO_OK;
}

po_err po_cert_validity(const char *pem, size_t len, int64_t *not_before, int64_t *not_after)
{
    if (!memmem(pem, len, "BEGIN CERTIFICATE", 17))
        return PO_ERR_NOT_FOUND;
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    X509 *cert = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
    struct tm b, a;
    po_err rc = cert && ASN1_TIME_to_tm(X509_get0_notBefore(cert), &b) == 1 &&
                        ASN1_TIME_to_tm(X509_get0_notAfter(cert), &a) == 1
                    ? PO_OK
                    : PO_ERR_INVALID;
    if (!rc) {
        *not_before = (int64_t)timegm(&b);
        *not_after = (int64_t)timegm(&a);
    }
    X509_free(cert);
    BIO_free(bio);
    return rc;
}

po_err po_cert_self_signed(const struct po_privkey *k, const char *serial_hex, const char *cn,
                           char **out_pem)
{
    int64_t now = (int64_t)time(NULL);
    return po_cert_self_signed_valid(k, serial_hex, cn, now - 3600, now + INT64_C(5) * 365 * 86400,
                                     out_pem);
}

po_err po_cert_self_signed_valid(const struct po_privkey *k, const char *serial_hex, const char *cn,
                                 int64_t not_before, int64_t not_after, char **out_pem)
{
    po_err rc = PO_ERR_INTERNAL;
    X509 *x = X509_new();
    BIGNUM *bn = NULL;
    BIO *bio = NULL;
    if (!x || !BN_hex2bn(&bn, serial_hex) || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)))
        goto out;
    X509_NAME *name = X509_get_subject_name(x);
    if (X509_set_version(x, 2) != 1 ||
        !X509_time_adj_ex(X509_getm_notBefore(x), 0, 0, &(time_t){(time_t)not_before}) ||
        !X509_time_adj_ex(X509_getm_notAfter(x), 0, 0, &(time_t){(time_t)not_after}) ||
        X509_set_pubkey(x, k->pkey) != 1 ||
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1,
                                   0) != 1 ||
        X509_set_issuer_name(x, name) != 1 || X509_sign(x, k->pkey, sha256()) <= 0)
        goto out;
    bio = BIO_new(BIO_s_mem());
    if (bio && PEM_write_bio_X509(bio, x) == 1)
        rc = bio_to_string(bio, out_pem);
out:
    BIO_free(bio);
    BN_free(bn);
    X509_free(x);
    return rc;
}

void po_privkey_free(struct po_privkey *k)
{
    if (!k)
        return;
    EVP_PKEY_free(k->pkey);
    free(k);
}

/* Why an OpenSSL operation failed, from this thread's error queue (which
 * it empties): PO_ERR_NOMEM when an allocation failed; PO_ERR_INVALID when
 * the library `judge` refused the input (for a signature: the RSA layer
 * found it wrong); PO_ERR_INTERNAL when the check could not be made at all
 * (OpenSSL 3.0 under memory pressure also fails with "initialization
 * error", "not able to copy ctx" or "digest not allowed", no malloc reason
 * given: such a failure must be a retry, not a "bad signature"). */
static po_err openssl_failure(int judge)
{
    po_err rc = PO_ERR_INTERNAL;
    for (unsigned long e; (e = ERR_get_error()) != 0;)
        if (ERR_GET_REASON(e) == ERR_R_MALLOC_FAILURE)
            rc = PO_ERR_NOMEM;
        else if (rc == PO_ERR_INTERNAL && judge && ERR_GET_LIB(e) == judge)
            rc = PO_ERR_INVALID;
    return rc;
}

po_err po_rsa_sha256_verify(const struct po_pubkey *k, const void *msg, size_t len,
                            const unsigned char *sig, size_t sig_len)
{
    struct thread_ctx *t = thread_ctx();
    if (!t)
        return PO_ERR_NOMEM;
    ERR_clear_error();
    po_err rc = PO_OK;
    if (EVP_DigestVerifyInit(t->md, NULL, sha256(), NULL, k->pkey) != 1)
        rc = openssl_failure(0);
    else if (EVP_DigestVerify(t->md, sig, sig_len, msg, len) != 1)
        rc = openssl_failure(ERR_LIB_RSA);
    (void)EVP_MD_CTX_reset(t->md);
    return rc;
}

po_err po_rsa_sha256_sign_b64(const struct po_privkey *k, const void *msg, size_t len,
                              char **out_b64)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char sig[1024];
    size_t sig_len = sizeof sig;
    if (!ctx)
        return PO_ERR_NOMEM;
    int ok = EVP_DigestSignInit(ctx, NULL, sha256(), NULL, k->pkey) == 1 &&
             EVP_DigestSign(ctx, sig, &sig_len, msg, len) == 1;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return PO_ERR_INTERNAL;
    return po_b64_encode(sig, sig_len, out_b64);
}

static const EVP_CIPHER *gcm_for(size_t key_len)
{
    pthread_once(&algs_once, algs_init);
    switch (key_len) {
    case 16:
        return aes_gcm[0];
    case 24:
        return aes_gcm[1];
    case 32:
        return aes_gcm[2];
    default:
        return NULL;
    }
}

#define GCM_TAG_LEN 16

po_err po_aes_gcm_decrypt(const unsigned char *key, size_t key_len, const unsigned char *nonce,
                          size_t nonce_len, const unsigned char *aad, size_t aad_len,
                          const unsigned char *ct, size_t ct_len, unsigned char **out,
                          size_t *out_len)
{
    const EVP_CIPHER *cipher = gcm_for(key_len);
    if (!cipher || ct_len < GCM_TAG_LEN || nonce_len == 0 || nonce_len > 64 || ct_len > INT32_MAX ||
        aad_len > INT32_MAX)
        return PO_ERR_INVALID;
    size_t n = ct_len - GCM_TAG_LEN;
    unsigned char *pt = malloc(n + 1);
    struct thread_ctx *t = thread_ctx();
    EVP_CIPHER_CTX *ctx = t ? t->cipher : NULL;
    po_err rc = PO_ERR_INVALID;
    int len1 = 0, len2 = 0;
    unsigned char tag[GCM_TAG_LEN];
    memcpy(tag, ct + n, GCM_TAG_LEN); /* OpenSSL takes the tag as non-const */
    if (!pt || !ctx) {
        rc = PO_ERR_NOMEM;
        goto out;
    }
    ERR_clear_error();
    if (EVP_DecryptInit_ex(ctx, cipher, NULL, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, (int)nonce_len, NULL) != 1 ||
        EVP_DecryptInit_ex(ctx, NULL, NULL, key, nonce) != 1 ||
        (aad_len && EVP_DecryptUpdate(ctx, NULL, &len1, aad, (int)aad_len) != 1) ||
        EVP_DecryptUpdate(ctx, pt, &len1, ct, (int)n) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, GCM_TAG_LEN, tag) != 1) {
        rc = openssl_failure(0);
        goto out;
    }
    if (EVP_DecryptFinal_ex(ctx, pt + len1, &len2) != 1) {
        /* A tag that does not match fails here without an error queued. */
        rc = ERR_peek_error() ? openssl_failure(0) : PO_ERR_INVALID;
        goto out;
    }
    pt[len1 + len2] = '\0';
    *out_len = (size_t)(len1 + len2);
    *out = pt;
    pt = NULL;
    rc = PO_OK;
out:
    if (pt)
        OPENSSL_cleanse(pt, n + 1);
    free(pt);
    if (ctx)
        (void)EVP_CIPHER_CTX_reset(ctx); /* also wipes the key schedule */
    return rc;
}

po_err po_aes_gcm_encrypt(const unsigned char *key, size_t key_len, const unsigned char *nonce,
                          size_t nonce_len, const unsigned char *aad, size_t aad_len,
                          const unsigned char *pt, size_t pt_len, unsigned char **out,
                          size_t *out_len)
{
    const EVP_CIPHER *cipher = gcm_for(key_len);
    if (!cipher || nonce_len == 0 || nonce_len > 64 || pt_len > INT32_MAX - GCM_TAG_LEN)
        return PO_ERR_INVALID;
    unsigned char *ct = malloc(pt_len + GCM_TAG_LEN);
    struct thread_ctx *t = thread_ctx();
    EVP_CIPHER_CTX *ctx = t ? t->cipher : NULL;
    po_err rc = PO_ERR_INTERNAL;
    int len1 = 0, len2 = 0;
    if (!ct || !ctx) {
        rc = PO_ERR_NOMEM;
        goto out;
    }
    if (EVP_EncryptInit_ex(ctx, cipher, NULL, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, (int)nonce_len, NULL) != 1 ||
        EVP_EncryptInit_ex(ctx, NULL, NULL, key, nonce) != 1 ||
        (aad_len && EVP_EncryptUpdate(ctx, NULL, &len1, aad, (int)aad_len) != 1) ||
        EVP_EncryptUpdate(ctx, ct, &len1, pt, (int)pt_len) != 1 ||
        EVP_EncryptFinal_ex(ctx, ct + len1, &len2) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, GCM_TAG_LEN, ct + len1 + len2) != 1)
        goto out;
    *out_len = (size_t)(len1 + len2) + GCM_TAG_LEN;
    *out = ct;
    ct = NULL;
    rc = PO_OK;
out:
    free(ct);
    if (ctx)
        (void)EVP_CIPHER_CTX_reset(ctx);
    return rc;
}

po_err po_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t len,
                      unsigned char out[32])
{
    unsigned int n = 32;
    if (!HMAC(sha256(), key, (int)key_len, msg, len, out, &n))
        return PO_ERR_NOMEM; /* the only way HMAC fails with valid arguments */
    PO_ASSERT(n == 32);
    return PO_OK;
}

/* md's digest of msg (size bytes) into out. */
static po_err digest(const EVP_MD *md, const void *msg, size_t len, unsigned char *out,
                     unsigned size)
{
    unsigned int n = 0;
    if (EVP_Digest(msg, len, out, &n, md, NULL) != 1)
        return PO_ERR_NOMEM;
    PO_ASSERT(n == size);
    return PO_OK;
}

static po_err digest_hex(const EVP_MD *md, const void *msg, size_t len, char *out, unsigned size)
{
    unsigned char d[EVP_MAX_MD_SIZE];
    po_err rc = digest(md, msg, len, d, size);
    for (unsigned i = 0; !rc && i < size; i++)
        (void)snprintf(out + 2 * i, 3, "%02x", d[i]);
    return rc;
}

po_err po_sha256(const void *msg, size_t len, unsigned char out[32])
{
    return digest(sha256(), msg, len, out, 32);
}

po_err po_sha256_hex(const void *msg, size_t len, char out[65])
{
    return digest_hex(sha256(), msg, len, out, 32);
}

po_err po_sha1_hex(const void *msg, size_t len, char out[41])
{
    pthread_once(&algs_once, algs_init);
    return digest_hex(md_sha1, msg, len, out, 20);
}

void po_secure_zero(void *p, size_t len)
{
    if (p && len)
        OPENSSL_cleanse(p, len);
}

bool po_ct_equal(const void *a, const void *b, size_t len)
{
    return CRYPTO_memcmp(a, b, len) == 0;
}

po_err po_random(void *buf, size_t len)
{
    return RAND_bytes(buf, (int)len) == 1 ? PO_OK : PO_ERR_INTERNAL;
}

/* scrypt's cost: N = 2^PW_LN, r, p; maxmem leaves room above 128·r·N. */
#define PW_LN 15
#define PW_R 8
#define PW_P 1
#define PW_SALT 16
#define PW_KEY 32
#define PW_MAXMEM (UINT64_C(96) << 20)

static po_err scrypt_key(const char *password, size_t len, const unsigned char *salt,
                         size_t salt_len, unsigned ln, unsigned r, unsigned p,
                         unsigned char key[PW_KEY])
{
    if (len == 0 || len > PO_PASSWORD_MAX)
        return PO_ERR_INVALID;
    return EVP_PBE_scrypt(password, len, salt, salt_len, UINT64_C(1) << ln, r, p, PW_MAXMEM, key,
                          PW_KEY) == 1
               ? PO_OK
               : PO_ERR_NOMEM;
}

/* base64 without its padding, as the modular-crypt form writes it */
static void b64_bare(const unsigned char *in, size_t len, char *out, size_t cap)
{
    int n = EVP_EncodeBlock((unsigned char *)out, in, (int)len);
    PO_ASSERT(n >= 0 && (size_t)n < cap);
    while (n > 0 && out[n - 1] == '=')
        out[--n] = 0;
}

po_err po_password_hash(const char *password, size_t len, char out[PO_PWHASH_SIZE])
{
    unsigned char salt[PW_SALT], key[PW_KEY];
    if (po_random(salt, sizeof salt))
        return PO_ERR_INTERNAL;
    po_err rc = scrypt_key(password, len, salt, sizeof salt, PW_LN, PW_R, PW_P, key);
    if (rc)
        return rc;
    char s64[32], k64[48];
    b64_bare(salt, sizeof salt, s64, sizeof s64);
    b64_bare(key, sizeof key, k64, sizeof k64);
    po_secure_zero(key, sizeof key);
    int n =
        snprintf(out, PO_PWHASH_SIZE, "$scrypt$ln=%d,r=%d,p=%d$%s$%s", PW_LN, PW_R, PW_P, s64, k64);
    return n > 0 && n < PO_PWHASH_SIZE ? PO_OK : PO_ERR_INTERNAL;
}

/* Decodes unpadded base64 of exactly want bytes. */
static bool b64_bare_decode(const char *in, size_t len, unsigned char *out, size_t want)
{
    char pad[64];
    unsigned char raw[64];
    if (len == 0 || len + 3 > sizeof pad)
        return false;
    memcpy(pad, in, len);
    while (len % 4)
        pad[len++] = '=';
    int n = EVP_DecodeBlock(raw, (const unsigned char *)pad, (int)len);
    if (n < 0)
        return false;
    size_t eq = 0;
    while (eq < len && pad[len - 1 - eq] == '=')
        eq++;
    if ((size_t)n - eq != want)
        return false;
    memcpy(out, raw, want);
    return true;
}

po_err po_password_verify(const char *password, size_t len, const char *stored)
{
    unsigned ln = 0, r = 0, p = 0;
    int at = 0;
    if (!stored || sscanf(stored, "$scrypt$ln=%u,r=%u,p=%u$%n", &ln, &r, &p, &at) != 3 || !at ||
        ln < 10 || ln > 22 || r < 1 || r > 32 || p < 1 || p > 4 ||
        (UINT64_C(128) * r * (UINT64_C(1) << ln)) > PW_MAXMEM - (UINT64_C(1) << 20))
        return PO_ERR_INVALID;
    const char *salt = stored + at, *dollar = strchr(salt, '$');
    unsigned char s[PW_SALT], want[PW_KEY], got[PW_KEY];
    if (!dollar || !b64_bare_decode(salt, (size_t)(dollar - salt), s, sizeof s) ||
        !b64_bare_decode(dollar + 1, strlen(dollar + 1), want, sizeof want))
        return PO_ERR_INVALID;
    po_err rc = scrypt_key(password, len, s, sizeof s, ln, r, p, got);
    if (rc == PO_ERR_INVALID) /* an empty or oversized password matches nothing */
        return PO_ERR_NOT_FOUND;
    if (rc)
        return rc;
    bool same = po_ct_equal(got, want, sizeof got);
    po_secure_zero(got, sizeof got);
    return same ? PO_OK : PO_ERR_NOT_FOUND;
}

#define SEAL_NONCE 12

po_err po_seal(const unsigned char master[PO_MASTER_KEY_LEN], const char *aad,
               const unsigned char *secret, size_t len, char **out)
{
    unsigned char *ct = NULL, *blob = NULL;
    size_t ct_len = 0;
    char *b64 = NULL;
    unsigned char nonce[SEAL_NONCE];
    po_err rc = po_random(nonce, sizeof nonce);
    if (rc)
        return rc;
    rc = po_aes_gcm_encrypt(master, PO_MASTER_KEY_LEN, nonce, sizeof nonce,
                            (const unsigned char *)aad, strlen(aad), secret, len, &ct, &ct_len);
    if (rc)
        return rc;
    blob = malloc(SEAL_NONCE + ct_len);
    if (!blob) {
        rc = PO_ERR_NOMEM;
        goto out;
    }
    memcpy(blob, nonce, SEAL_NONCE);
    memcpy(blob + SEAL_NONCE, ct, ct_len);
    rc = po_b64_encode(blob, SEAL_NONCE + ct_len, &b64);
    if (rc)
        goto out;
    size_t n = strlen(PO_SEALED_PREFIX) + strlen(b64) + 1;
    *out = malloc(n);
    if (!*out) {
        rc = PO_ERR_NOMEM;
        goto out;
    }
    (void)snprintf(*out, n, "%s%s", PO_SEALED_PREFIX, b64);
out:
    free(b64);
    free(blob);
    free(ct);
    return rc;
}

po_err po_unseal(const unsigned char master[PO_MASTER_KEY_LEN], const char *aad, const char *sealed,
                 unsigned char **out, size_t *out_len)
{
    size_t plen = strlen(PO_SEALED_PREFIX);
    if (strncmp(sealed, PO_SEALED_PREFIX, plen) != 0)
        return PO_ERR_INVALID;
    unsigned char *blob = NULL;
    size_t blob_len = 0;
    po_err rc = po_b64_decode(sealed + plen, strlen(sealed + plen), &blob, &blob_len);
    if (rc)
        return PO_ERR_INVALID;
    if (blob_len < SEAL_NONCE + GCM_TAG_LEN)
        rc = PO_ERR_INVALID;
    else
        rc = po_aes_gcm_decrypt(master, PO_MASTER_KEY_LEN, blob, SEAL_NONCE,
                                (const unsigned char *)aad, strlen(aad), blob + SEAL_NONCE,
                                blob_len - SEAL_NONCE, out, out_len);
    free(blob);
    return rc;
}

po_err po_secret_store(const unsigned char *master, const char *aad, const void *secret, size_t len,
                       char **out)
{
    if (master)
        return po_seal(master, aad, secret, len, out);
    char *b64 = NULL;
    po_err rc = po_b64_encode(secret, len, &b64);
    if (rc)
        return rc;
    rc = po_fmt_alloc(out, "%s%s", PO_PLAIN_PREFIX, b64);
    free(b64);
    return rc;
}

po_err po_secret_open(const unsigned char *master, const char *aad, const char *stored,
                      unsigned char **out, size_t *out_len)
{
    if (master)
        return po_unseal(master, aad, stored, out, out_len);
    if (!po_secret_is_plain(stored))
        return PO_ERR_INVALID;
    size_t plen = strlen(PO_PLAIN_PREFIX);
    po_err rc = po_b64_decode(stored + plen, strlen(stored + plen), out, out_len);
    return rc == PO_ERR_NOMEM ? rc : rc ? PO_ERR_INVALID : PO_OK;
}

bool po_secret_is_plain(const char *text)
{
    return text && strncmp(text, PO_PLAIN_PREFIX, strlen(PO_PLAIN_PREFIX)) == 0;
}

bool po_secret_is_stored(const char *text)
{
    return po_secret_is_plain(text) ||
           (text && strncmp(text, PO_SEALED_PREFIX, strlen(PO_SEALED_PREFIX)) == 0);
}

po_err po_master_key_load(const char *path, unsigned char out[PO_MASTER_KEY_LEN], char *err,
                          size_t errcap)
{
    char *buf = NULL;
    size_t len = 0;
    /* A key every user of the machine can read seals nothing: refused,
     * like ssh refuses such a private key. Its group may read it (the
     * package's 0640 root:payonce). */
    struct stat st;
    if (stat(path, &st) == 0 && (st.st_mode & (S_IROTH | S_IWOTH))) {
        po_errf(err, errcap,
                "the master key %s is readable or writable by every user (mode %04o): chmod"
                " 600 (or 640 with the service's group) it",
                path, (unsigned)(st.st_mode & 07777));
        return PO_ERR_INVALID;
    }
    po_err rc = po_file_read(path, 128, &buf, &len);
    if (rc) {
        char why[600];
        po_file_why(path, rc, why, sizeof why);
        po_errf(err, errcap, "cannot read %s (the master key): %s", path, why);
        return rc;
    }
    if (len == PO_MASTER_KEY_LEN) {
        memcpy(out, buf, PO_MASTER_KEY_LEN);
        rc = PO_OK;
        goto out;
    }
    if (len > 0 && buf[len - 1] == '\n')
        len--;
    rc = PO_ERR_INVALID;
    if (len != 2 * PO_MASTER_KEY_LEN) {
        po_errf(err, errcap, "master key file must hold 32 raw bytes or 64 hex digits");
        goto out;
    }
    for (size_t i = 0; i < PO_MASTER_KEY_LEN; i++) {
        int hi = po_hexval(buf[2 * i]), lo = po_hexval(buf[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            po_errf(err, errcap, "master key file must hold 32 raw bytes or 64 hex digits");
            goto out;
        }
        out[i] = (unsigned char)(hi * 16 + lo);
    }
    rc = PO_OK;
out:
    OPENSSL_cleanse(buf, len);
    free(buf);
    return rc;
}

/* ---- the password policy (cracklib and the list of common passwords) ---- */

/* cracklib keeps state in statics: one check at a time. */
static pthread_mutex_t crack_mu = PTHREAD_MUTEX_INITIALIZER;

/* cracklib's verdict on pw (NUL-terminated): NULL, or why not. */
static const char *crack(const char *pw, const char *dict, const char *user, char *why, size_t cap)
{
    pthread_mutex_lock(&crack_mu);
    const char *bad = FascistCheckUser(pw, dict, user && *user ? user : "payonce", NULL);
    if (bad)
        (void)snprintf(why, cap, "%s", bad);
    pthread_mutex_unlock(&crack_mu);
    return bad ? why : NULL;
}

/* Whether s (lower case) repeats a shorter unit throughout ("erin-erin-erin"). */
static bool periodic(const char *s, size_t n)
{
    for (size_t u = 1; u <= n / 2; u++) {
        size_t i = u;
        while (i < n && s[i] == s[i - u])
            i++;
        if (i == n)
            return true;
    }
    return false;
}

/* How much of s (lower case) is runs of 3 or more characters that follow
 * one another on a keyboard row, in the alphabet or in the digits, either
 * way ("qwertyuiop123": all of it). */
static size_t in_sequences(const char *s, size_t n)
{
    static const char *const rows[] = {"qwertyuiop", "asdfghjkl", "zxcvbnm",
                                       "abcdefghijklmnopqrstuvwxyz", "01234567890"};
    size_t covered = 0, run = 1;
    for (size_t i = 1; i <= n; i++) {
        bool next = false;
        for (size_t r = 0; i < n && !next && r < sizeof rows / sizeof rows[0]; r++) {
            const char *a = strchr(rows[r], s[i - 1]), *b = a ? strchr(rows[r], s[i]) : NULL;
            next = a && b && (b == a + 1 || b + 1 == a);
        }
        if (next) {
            run++;
        } else {
            covered += run >= 3 ? run : 0;
            run = 1;
        }
    }
    return covered;
}

po_err po_password_policy(const char *password, size_t len, const char *user, char *why, size_t cap)
{
    if (len < PO_PASSWORD_MIN || len > PO_PASSWORD_MAX || memchr(password, 0, len)) {
        (void)snprintf(why, cap, "a password of %d to %d bytes (no NUL)", PO_PASSWORD_MIN,
                       PO_PASSWORD_MAX);
        return PO_ERR_INVALID;
    }
    const char *dict = GetDefaultCracklibDict();
    char pwd[512];
    (void)snprintf(pwd, sizeof pwd, "%s.pwd", dict ? dict : "");
    if (!dict || access(pwd, R_OK) != 0) {
        (void)snprintf(why, cap,
                       "the password dictionary %s is missing (Debian: apt-get install"
                       " cracklib-runtime)",
                       pwd);
        return PO_ERR_IO;
    }
    /* lower: the password in lower case; core: its letters once the digits
     * and symbols around them are cut and its leetspeak undone */
    char *lower = malloc(len + 1), *core = malloc(len + 1);
    if (!lower || !core) {
        free(lower);
        free(core);
        return PO_ERR_NOMEM;
    }
    for (size_t i = 0; i < len; i++)
        lower[i] = (char)tolower((unsigned char)password[i]);
    lower[len] = '\0';
    size_t b = 0, e = len, n = 0;
    while (b < e && !isalpha((unsigned char)lower[b]))
        b++;
    while (e > b && !isalpha((unsigned char)lower[e - 1]))
        e--;
    static const char leet_from[] = "0134578@$!|+", leet_to[] = "oieastbasilt";
    for (size_t i = b; i < e; i++) {
        const char *l = strchr(leet_from, lower[i]);
        core[n++] = l ? leet_to[l - leet_from] : lower[i];
    }
    core[n] = '\0';
    const char *bad = NULL;
    size_t ul = user ? strlen(user) : 0;
    char *name = ul >= 3 ? malloc(ul + 1) : NULL;
    for (size_t i = 0; name && i <= ul; i++)
        name[i] = (char)tolower((unsigned char)user[i]);
    if (name && strstr(lower, name))
        bad = "it contains the operator's name";
    else if (periodic(lower, len))
        bad = "it repeats itself";
    else if (in_sequences(lower, len) + 2 >= len)
        bad = "it is a keyboard, alphabet or digit sequence";
    else if (n && po_password_is_common(core))
        bad = "it is a common password (digits, symbols or letter swaps around it do not help)";
    else if (n >= 4 && n < len && crack(core, dict, user, why, cap) && strstr(why, "dictionary"))
        bad = "it is a dictionary word with digits or symbols around it";
    free(name);
    if (bad)
        (void)snprintf(why, cap, "%s", bad);
    else
        bad = crack(password, dict, user, why, cap); /* the password as it is */
    po_secure_zero(lower, len);
    po_secure_zero(core, len);
    free(lower);
    free(core);
    if (!bad && cap)
        why[0] = '\0';
    return bad ? PO_ERR_INVALID : PO_OK;
}

/* ---- Alipay's certificate mode (公钥证书模式) ---- */

/* alipay-sdk's short name of an attribute (@fidm/x509's table; others
 * have none), so that the issuer's name reads exactly as the SDK writes
 * it. */
static const char *alipay_short_name(int nid)
{
    switch (nid) {
    case NID_commonName:
        return "CN";
    case NID_countryName:
        return "C";
    case NID_localityName:
        return "L";
    case NID_stateOrProvinceName:
        return "ST";
    case NID_organizationName:
        return "O";
    case NID_organizationalUnitName:
        return "OU";
    case NID_pkcs9_emailAddress:
        return "E";
    default:
        return "";
    }
}

/* One certificate's SN (32 lowercase hex digits and a NUL into out). */
static po_err alipay_sn_of(X509 *x, char out[33])
{
    X509_NAME *name = X509_get_issuer_name(x);
    char text[2048];
    size_t len = 0;
    po_err rc = PO_OK;
    /* the issuer's attributes last to first, "SN=value," each */
    for (int i = X509_NAME_entry_count(name) - 1; i >= 0 && !rc; i--) {
        X509_NAME_ENTRY *e = X509_NAME_get_entry(name, i);
        unsigned char *v = NULL;
        int vlen = ASN1_STRING_to_UTF8(&v, X509_NAME_ENTRY_get_data(e));
        const char *sn = alipay_short_name(OBJ_obj2nid(X509_NAME_ENTRY_get_object(e)));
        if (vlen < 0)
            rc = PO_ERR_INVALID;
        else if (len + strlen(sn) + (size_t)vlen + 2 >= sizeof text)
            rc = PO_ERR_LIMIT;
        else
            len += (size_t)snprintf(text + len, sizeof text - len, "%s=%.*s,", sn, vlen, v);
        OPENSSL_free(v);
    }
    if (len)
        len--; /* the last comma */
    BIGNUM *bn = rc ? NULL : ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
    char *dec = bn ? BN_bn2dec(bn) : NULL;
    if (!rc && (!dec || len + strlen(dec) >= sizeof text))
        rc = dec ? PO_ERR_LIMIT : PO_ERR_NOMEM;
    if (!rc) {
        memcpy(text + len, dec, strlen(dec));
        len += strlen(dec);
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    if (!rc && (EVP_Digest(text, len, md, &mdlen, EVP_md5(), NULL) != 1 || mdlen != 16))
        rc = PO_ERR_INTERNAL;
    for (unsigned i = 0; !rc && i < 16; i++)
        (void)snprintf(out + 2 * i, 3, "%02x", md[i]);
    OPENSSL_free(dec);
    BN_free(bn);
    return rc;
}

/* Whether x is signed sha*WithRSAEncryption (OID 1.2.840.113549.1.1.*). */
static bool signed_rsa(X509 *x)
{
    const X509_ALGOR *alg = NULL;
    const ASN1_OBJECT *oid = NULL;
    char txt[80];
    X509_get0_signature(NULL, &alg, x);
    if (alg)
        X509_ALGOR_get0(&oid, NULL, NULL, alg);
    return oid && OBJ_obj2txt(txt, sizeof txt, oid, 1) > 0 &&
           strncmp(txt, "1.2.840.113549.1.1.", 19) == 0;
}

po_err po_cert_alipay_sn(const char *pem, size_t len, bool chain, char *out, size_t cap, char *err,
                         size_t errcap)
{
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    if (!bio)
        return PO_ERR_NOMEM;
    char sn[33], buf[PO_ALIPAY_ROOT_SN_MAX + 1] = "";
    size_t used = 0;
    int certs = 0;
    po_err rc = PO_OK;
    X509 *x;
    while (!rc && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
        certs++;
        if ((chain && !signed_rsa(x)) || (!chain && certs > 1)) {
            X509_free(x);
            continue;
        }
        rc = alipay_sn_of(x, sn);
        X509_free(x);
        if (!rc && used + (used ? 1 : 0) + 32 > PO_ALIPAY_ROOT_SN_MAX)
            rc = PO_ERR_LIMIT;
        if (!rc)
            used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", used ? "_" : "", sn);
    }
    ERR_clear_error();
    BIO_free(bio);
    if (!rc && !certs)
        rc = PO_ERR_INVALID;
    if (!rc && !used)
        rc = PO_ERR_NOT_FOUND;
    if (!rc && po_strcpy(out, cap, buf))
        rc = PO_ERR_LIMIT;
    if (rc)
        po_errf(err, errcap, "%s",
                rc == PO_ERR_INVALID     ? "not a PEM certificate"
                : rc == PO_ERR_NOT_FOUND ? "no certificate signed sha*WithRSA in the chain"
                : rc == PO_ERR_LIMIT     ? "too many certificates or names too long"
                                         : "the SN could not be computed");
    return rc;
}

po_err po_privkey_generate_ec(struct po_privkey **out)
{
    EVP_PKEY *pkey = EVP_EC_gen("P-256");
    if (!pkey)
        return PO_ERR_INTERNAL;
    return wrap_priv(pkey, out);
}

/* dn "/C=CN/O=…/CN=…" into name (values without '/'). */
static bool dn_into(X509_NAME *name, const char *dn)
{
    char buf[512];
    if (po_strcpy(buf, sizeof buf, dn) || buf[0] != '/')
        return false;
    char *save = NULL;
    for (char *part = strtok_r(buf + 1, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
        char *eq = strchr(part, '=');
        if (!eq)
            return false;
        *eq = '\0';
        if (X509_NAME_add_entry_by_txt(name, part, MBSTRING_UTF8, (unsigned char *)eq + 1, -1, -1,
                                       0) != 1)
            return false;
    }
    return true;
}

po_err po_cert_issue(const struct po_privkey *key, const char *dn, const char *serial_hex,
                     const struct po_privkey *issuer_key, const char *issuer_pem, bool ca,
                     char **out_pem)
{
    po_err rc = PO_ERR_INTERNAL;
    X509 *x = X509_new(), *issuer = NULL;
    BIGNUM *bn = NULL;
    BIO *bio = NULL;
    X509_EXTENSION *ext = NULL;
    time_t now = time(NULL);
    if (issuer_pem) {
        BIO *ib = BIO_new_mem_buf(issuer_pem, -1);
        issuer = ib ? PEM_read_bio_X509(ib, NULL, NULL, NULL) : NULL;
        BIO_free(ib);
        if (!issuer)
            goto out;
    }
    if (!x || !BN_hex2bn(&bn, serial_hex) || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) ||
        X509_set_version(x, 2) != 1 || !X509_time_adj_ex(X509_getm_notBefore(x), 0, -3600, &now) ||
        !X509_time_adj_ex(X509_getm_notAfter(x), 5 * 365, 0, &now) ||
        X509_set_pubkey(x, key->pkey) != 1 || !dn_into(X509_get_subject_name(x), dn) ||
        X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer)
                                       : X509_get_subject_name(x)) != 1)
        goto out;
    if (ca &&
        (!(ext = X509V3_EXT_conf_nid(NULL, NULL, NID_basic_constraints, "critical,CA:TRUE")) ||
         X509_add_ext(x, ext, -1) != 1))
        goto out;
    if (X509_sign(x, issuer_key->pkey, sha256()) <= 0)
        goto out;
    bio = BIO_new(BIO_s_mem());
    if (bio && PEM_write_bio_X509(bio, x) == 1)
        rc = bio_to_string(bio, out_pem);
out:
    X509_EXTENSION_free(ext);
    BIO_free(bio);
    BN_free(bn);
    X509_free(x);
    X509_free(issuer);
    return rc;
}
