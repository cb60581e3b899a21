/*
 * form.c — application/x-www-form-urlencoded as Alipay speaks it: parsing a
 * notification or a gateway request, encoding a request, and the RSA2 sign
 * content (keys sorted, empty values skipped or kept, `sign` never included;
 * `sign_type` excluded when checking a notification — rsaCheckV1 — and
 * included when signing an API request).
 */
#include "channel.h"

#include <stdlib.h>
#include <string.h>

void po_form_free(struct po_form *f)
{
    for (int i = 0; i < f->n; i++) {
        free(f->p[i].key);
        free(f->p[i].val);
    }
    f->n = 0;
}

/* Percent-decodes s[0..len) ('+' is a space) into a new string *out. */
static po_err pct_decode(const char *s, size_t len, char **out, size_t *out_len)
{
    char *d = malloc(len + 1);
    size_t j = 0;
    if (!d)
        return PO_ERR_NOMEM;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '+') {
            d[j++] = ' ';
        } else if (s[i] == '%') {
            int hi = i + 2 < len ? po_hexval(s[i + 1]) : -1;
            int lo = i + 2 < len ? po_hexval(s[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                free(d);
                return PO_ERR_INVALID;
            }
            d[j++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            d[j++] = s[i];
        }
    }
    d[j] = '\0';
    *out_len = j;
    *out = d;
    return PO_OK;
}

po_err po_form_parse(const char *body, size_t len, struct po_form *f)
{
    size_t i = 0;
    f->n = 0;
    while (i < len) {
        size_t end = i;
        while (end < len && body[end] != '&')
            end++;
        if (end > i) {
            const char *eq = memchr(body + i, '=', end - i);
            if (!eq || eq == body + i || f->n >= PO_FORM_PARAMS_MAX)
                return PO_ERR_INVALID;
            size_t klen = 0;
            struct po_form_param *p = &f->p[f->n++];
            po_err rc = pct_decode(body + i, (size_t)(eq - (body + i)), &p->key, &klen);
            if (!rc)
                rc = pct_decode(eq + 1, (size_t)(body + end - (eq + 1)), &p->val, &p->val_len);
            if (rc)
                return rc;
            /* A NUL in a key or value is refused: nothing after it could be
             * told apart by C string handling, so nothing after it may be
             * trusted (the signature covers explicit lengths regardless). */
            if (klen != strlen(p->key) || !po_id_valid(p->key, 64) ||
                memchr(p->val, '\0', p->val_len))
                return PO_ERR_INVALID;
            for (int k = 0; k < f->n - 1; k++)
                if (strcmp(f->p[k].key, p->key) == 0)
                    return PO_ERR_INVALID;
        }
        i = end + 1;
    }
    return f->n > 0 ? PO_OK : PO_ERR_INVALID;
}

const char *po_form_get(const struct po_form *f, const char *key)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->p[i].key, key) == 0)
            return f->p[i].val;
    return NULL;
}

po_err po_form_add(struct po_form *f, const char *key, const char *val)
{
    if (f->n >= PO_FORM_PARAMS_MAX || po_form_get(f, key))
        return PO_ERR_INVALID;
    struct po_form_param *p = &f->p[f->n];
    p->key = strdup(key);
    p->val = strdup(val);
    if (!p->key || !p->val) {
        free(p->key);
        free(p->val);
        return PO_ERR_NOMEM;
    }
    p->val_len = strlen(val);
    f->n++;
    return PO_OK;
}

static int param_cmp(const void *a, const void *b)
{
    return strcmp(((const struct po_form_param *)a)->key, ((const struct po_form_param *)b)->key);
}

char *po_alipay_sign_content(const struct po_form *f, bool notify, bool keep_empty, size_t *out_len)
{
    struct po_form_param sorted[PO_FORM_PARAMS_MAX];
    size_t total = 1;
    int n = 0;
    for (int i = 0; i < f->n; i++) {
        const struct po_form_param *p = &f->p[i];
        if (strcmp(p->key, "sign") == 0 || (notify && strcmp(p->key, "sign_type") == 0) ||
            (p->val_len == 0 && !keep_empty))
            continue;
        sorted[n++] = *p;
        total += strlen(p->key) + p->val_len + 2;
    }
    qsort(sorted, (size_t)n, sizeof sorted[0], param_cmp);
    char *s = malloc(total);
    size_t j = 0;
    if (!s)
        return NULL;
    for (int i = 0; i < n; i++) {
        size_t kl = strlen(sorted[i].key);
        if (i)
            s[j++] = '&';
        memcpy(s + j, sorted[i].key, kl);
        j += kl;
        s[j++] = '=';
        memcpy(s + j, sorted[i].val, sorted[i].val_len);
        j += sorted[i].val_len;
    }
    s[j] = '\0';
    *out_len = j;
    return s;
}

po_err po_alipay_sign_form(const struct po_privkey *key, struct po_form *f, bool notify)
{
    size_t len = 0;
    char *content = po_alipay_sign_content(f, notify, false, &len), *sig = NULL;
    if (!content)
        return PO_ERR_NOMEM;
    po_err rc = po_rsa_sha256_sign_b64(key, content, len, &sig);
    free(content);
    if (!rc)
        rc = po_form_add(f, "sign", sig);
    free(sig);
    return rc;
}

char *po_form_encode(const struct po_form *f, size_t *out_len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t cap = 1;
    for (int i = 0; i < f->n; i++)
        cap += 3 * (strlen(f->p[i].key) + f->p[i].val_len) + 2;
    char *out = malloc(cap);
    size_t j = 0;
    if (!out)
        return NULL;
    for (int i = 0; i < f->n; i++) {
        if (i)
            out[j++] = '&';
        for (int part = 0; part < 2; part++) {
            const unsigned char *s = (const unsigned char *)(part ? f->p[i].val : f->p[i].key);
            size_t len = part ? f->p[i].val_len : strlen(f->p[i].key);
            for (size_t k = 0; k < len; k++) {
                unsigned char c = s[k];
                if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == '*') {
                    out[j++] = (char)c;
                } else if (c == ' ') {
                    out[j++] = '+';
                } else {
                    out[j++] = '%';
                    out[j++] = hex[c >> 4];
                    out[j++] = hex[c & 15];
                }
            }
            if (!part)
                out[j++] = '=';
        }
    }
    out[j] = '\0';
    if (out_len)
        *out_len = j;
    return out;
}
