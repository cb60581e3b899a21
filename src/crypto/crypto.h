/*
 * crypto.h — the only module that includes OpenSSL. Everything a channel
 * adapter, the simulator and secret sealing need: base64, RSA-SHA256
 * (PKCS#1 v1.5) verify and sign, AES-GCM, HMAC-SHA256, constant-time
 * comparison, random bytes.
 *
 * Contracts: outputs are written only on success; heap outputs are owned by
 * the caller (free()); a verification failure is PO_ERR_INVALID, never a
 * crash, whatever the input.
 */
#ifndef PO_CRYPTO_H
#define PO_CRYPTO_H

#include "../core/core.h"

#define PO_MASTER_KEY_LEN 32

struct po_pubkey;  /* an RSA public key */
struct po_privkey; /* an RSA private key (simulator, tests) */

/* Strict base64 (RFC 4648, padding required, no whitespace). */
po_err po_b64_decode(const char *in, size_t len, unsigned char **out,
                     size_t *out_len) PO_MUST_CHECK;
po_err po_b64_encode(const unsigned char *in, size_t len, char **out) PO_MUST_CHECK;

/* A PEM certificate (serial written as upper-case hex into serial) or a PEM
 * public key (serial left empty). */
po_err po_pubkey_from_pem(const char *pem, size_t len, struct po_pubkey **out, char *serial,
                          size_t serial_cap, char *err, size_t errcap) PO_MUST_CHECK;
/* A bare base64 SubjectPublicKeyInfo, as Alipay hands out its public key. */
po_err po_pubkey_from_spki_b64(const char *b64, struct po_pubkey **out, char *err,
                               size_t errcap) PO_MUST_CHECK;
/* PEM "PUBLIC KEY" text of a key (for storing it). */
po_err po_pubkey_to_pem(const struct po_pubkey *k, char **out) PO_MUST_CHECK;
void po_pubkey_free(struct po_pubkey *k);

po_err po_privkey_from_pem(const char *pem, size_t len, struct po_privkey **out) PO_MUST_CHECK;
/* A fresh RSA-2048 key pair (simulator keys); *out_pub_pem is PEM. */
po_err po_privkey_generate(struct po_privkey **out) PO_MUST_CHECK;
po_err po_privkey_to_pem(const struct po_privkey *k, char **out_priv_pem,
                         char **out_pub_pem) PO_MUST_CHECK;
void po_privkey_free(struct po_privkey *k);
/* A PEM certificate's validity period (Unix seconds); PO_ERR_NOT_FOUND
 * when pem is not a certificate (a bare public key has none). */
po_err po_cert_validity(const char *pem, size_t len, int64_t *not_before,
                        int64_t *not_after) PO_MUST_CHECK;
/* The same with an explicit validity period (tests: expired certificates). */
po_err po_cert_self_signed_valid(const struct po_privkey *k, const char *serial_hex, const char *cn,
                                 int64_t not_before, int64_t not_after,
                                 char **out_pem) PO_MUST_CHECK;
/* A self-signed X.509 certificate (SHA256withRSA, 5 years) for key, with the
 * given serial (hex) and common name, as PEM. For simulated platform keys. */
po_err po_cert_self_signed(const struct po_privkey *k, const char *serial_hex, const char *cn,
                           char **out_pem) PO_MUST_CHECK;

/* Alipay's certificate mode (公钥证书模式): a certificate's SN as Alipay
 * and its SDKs compute it — the MD5 (lowercase hex) of the issuer's name
 * (its attributes last to first, "SHORT=value" joined by ",", with
 * alipay-sdk's short names CN C L ST O OU E) followed by the serial number
 * in decimal: the first certificate of pem's (app_cert_sn, alipay_cert_sn),
 * or with chain the SNs of every certificate in pem signed sha*WithRSA
 * (OID 1.2.840.113549.1.1.*; Alipay's root file also holds ECC and SM2
 * roots, left out) joined by "_" (alipay_root_cert_sn). PO_ERR_INVALID: no
 * certificate; PO_ERR_NOT_FOUND: none signed with RSA; err says which. */
po_err po_cert_alipay_sn(const char *pem, size_t len, bool chain, char *out, size_t cap, char *err,
                         size_t errcap) PO_MUST_CHECK;
/* A P-256 key (the simulator's ECC root, which alipay_root_cert_sn leaves
 * out). */
po_err po_privkey_generate_ec(struct po_privkey **out) PO_MUST_CHECK;
/* A certificate (v3, valid from an hour ago for 5 years) of key's public
 * half, subject dn ("/C=CN/O=…/CN=…", values without '/'), serial (hex),
 * signed with issuer_key (SHA-256 with RSA or ECDSA as that key is) under
 * issuer_pem's subject — or self-signed (issuer_pem NULL, issuer_key the
 * key itself); a CA (basicConstraints) when ca. For the simulator. */
po_err po_cert_issue(const struct po_privkey *key, const char *dn, const char *serial_hex,
                     const struct po_privkey *issuer_key, const char *issuer_pem, bool ca,
                     char **out_pem) PO_MUST_CHECK;

/* SHA256withRSA over msg. PO_OK only for a valid signature. */
/* PO_ERR_INVALID: the signature is wrong; PO_ERR_NOMEM / PO_ERR_INTERNAL:
 * it could not be checked (answer retry, not "bad signature"). */
po_err po_rsa_sha256_verify(const struct po_pubkey *k, const void *msg, size_t len,
                            const unsigned char *sig, size_t sig_len) PO_MUST_CHECK;
/* Signs msg; *out_b64 is the base64 signature. */
po_err po_rsa_sha256_sign_b64(const struct po_privkey *k, const void *msg, size_t len,
                              char **out_b64) PO_MUST_CHECK;

/* AES-GCM with a 16-, 24- or 32-byte key; ct ends with the 16-byte tag.
 * PO_ERR_INVALID when authentication fails. *out is NUL-terminated. */
po_err po_aes_gcm_decrypt(const unsigned char *key, size_t key_len, const unsigned char *nonce,
                          size_t nonce_len, const unsigned char *aad, size_t aad_len,
                          const unsigned char *ct, size_t ct_len, unsigned char **out,
                          size_t *out_len) PO_MUST_CHECK;
/* Output is ciphertext followed by the 16-byte tag. */
po_err po_aes_gcm_encrypt(const unsigned char *key, size_t key_len, const unsigned char *nonce,
                          size_t nonce_len, const unsigned char *aad, size_t aad_len,
                          const unsigned char *pt, size_t pt_len, unsigned char **out,
                          size_t *out_len) PO_MUST_CHECK;

/* Digests; PO_ERR_NOMEM when OpenSSL could not allocate (out unset). */
po_err po_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t len,
                      unsigned char out[32]) PO_MUST_CHECK;
po_err po_sha256(const void *msg, size_t len, unsigned char out[32]) PO_MUST_CHECK;
po_err po_sha256_hex(const void *msg, size_t len, char out[65]) PO_MUST_CHECK;
/* SHA-1, only because WeChat Pay's bill API names its hash_type SHA1. */
po_err po_sha1_hex(const void *msg, size_t len, char out[41]) PO_MUST_CHECK;
bool po_ct_equal(const void *a, const void *b, size_t len);
/* Wipes a secret from memory in a way the compiler may not elide. */
void po_secure_zero(void *p, size_t len);
po_err po_random(void *buf, size_t len) PO_MUST_CHECK;

/*
 * Passwords (the console's operators): scrypt (RFC 7914) with a random
 * 16-byte salt, kept in the modular-crypt form
 * "$scrypt$ln=15,r=8,p=1$SALT$HASH" (base64 without padding), so stronger
 * parameters can come later without breaking stored hashes. 32 MiB and
 * about 0.1 s per hash with these. Passwords are 1..PO_PASSWORD_MAX bytes.
 */
#define PO_PASSWORD_MAX 1024
#define PO_PWHASH_SIZE 128
po_err po_password_hash(const char *password, size_t len, char out[PO_PWHASH_SIZE]) PO_MUST_CHECK;
/* PO_OK when password matches stored; PO_ERR_NOT_FOUND when it does not;
 * PO_ERR_INVALID when stored is not a hash this build reads. Takes the
 * same time either way (one scrypt). */
po_err po_password_verify(const char *password, size_t len, const char *stored) PO_MUST_CHECK;
/* The password policy of an operator's new password: at least
 * PO_PASSWORD_MIN bytes, and not one cracklib (libcrack2, with Debian's
 * cracklib-runtime dictionary) refuses — a dictionary word, a common or
 * systematic password, one built on the operator's name. PO_OK, or
 * PO_ERR_INVALID with why ("it is based on a dictionary word"); PO_ERR_IO
 * when the dictionary cannot be read (why says what to install). */
#define PO_PASSWORD_MIN 12
po_err po_password_policy(const char *password, size_t len, const char *user, char *why,
                          size_t cap) PO_MUST_CHECK;

/*
 * Secrets at rest: "sealed:v1:" + base64(nonce[12] | ciphertext | tag[16]),
 * AES-256-GCM under the master key, with `aad` binding the ciphertext to
 * its place (e.g. "t1/wechatpay/apiv3_key") so it cannot be moved.
 */
#define PO_SEALED_PREFIX "sealed:v1:"
po_err po_seal(const unsigned char master[PO_MASTER_KEY_LEN], const char *aad,
               const unsigned char *secret, size_t len, char **out) PO_MUST_CHECK;
po_err po_unseal(const unsigned char master[PO_MASTER_KEY_LEN], const char *aad, const char *sealed,
                 unsigned char **out, size_t *out_len) PO_MUST_CHECK;
/*
 * The one stored form of every secret payonce keeps (channel accounts,
 * webhook endpoints): sealed under the master key with aad, or, without a
 * master key (insecure development mode only), "plain:" + base64.
 * po_secret_open opens only what the mode could have written: with a
 * master key a plain value is refused (it did not come from a gateway
 * with a key), without one a sealed value is. *out is heap (wipe, free).
 */
#define PO_PLAIN_PREFIX "plain:"
po_err po_secret_store(const unsigned char *master, const char *aad, const void *secret, size_t len,
                       char **out) PO_MUST_CHECK;
po_err po_secret_open(const unsigned char *master, const char *aad, const char *stored,
                      unsigned char **out, size_t *out_len) PO_MUST_CHECK;
/* Whether text is in that form (sealed, or plain). */
bool po_secret_is_stored(const char *text);
bool po_secret_is_plain(const char *text);
/* Reads a master key file: exactly 32 raw bytes, or 64 hex digits (an
 * optional trailing newline allowed). */
po_err po_master_key_load(const char *path, unsigned char out[PO_MASTER_KEY_LEN], char *err,
                          size_t errcap) PO_MUST_CHECK;

#endif
