/*
 * sim_form.c — the simulator's own form decoder (application/x-www-form-
 * urlencoded), written apart from src/channel/form.c so that each checks
 * the other: the simulator reads what payonce encodes (Alipay's gateway
 * requests, Stripe's API requests).
 */
#include "sim_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sim_form_free(struct sim_form *f)
{
    for (int i = 0; i < f->n; i++) {
        free(f->k[i]);
        free(f->v[i]);
    }
    f->n = 0;
}

static char *sim_unescape(const char *s, size_t len)
{
    char *d = malloc(len + 1);
    size_t j = 0;
    for (size_t i = 0; d && i < len; i++) {
        unsigned hi, lo;
        if (s[i] == '+') {
            d[j++] = ' ';
        } else if (s[i] == '%' && i + 2 < len && sscanf(s + i + 1, "%1x%1x", &hi, &lo) == 2) {
            d[j++] = (char)(hi * 16 + lo);
            i += 2;
        } else if (s[i] == '%') {
            free(d);
            return NULL;
        } else {
            d[j++] = s[i];
        }
    }
    if (d)
        d[j] = '\0';
    return d;
}

bool sim_form_parse(const char *body, struct sim_form *f)
{
    for (const char *p = body; *p && f->n < 32;) {
        size_t len = strcspn(p, "&");
        const char *eq = memchr(p, '=', len);
        if (!eq)
            return false;
        f->k[f->n] = sim_unescape(p, (size_t)(eq - p));
        f->v[f->n] = sim_unescape(eq + 1, (size_t)(p + len - eq - 1));
        if (!f->k[f->n] || !f->v[f->n]) {
            free(f->k[f->n]);
            free(f->v[f->n]);
            return false;
        }
        f->n++;
        p += len + (p[len] == '&');
    }
    return f->n > 0;
}

const char *sim_form_get(const struct sim_form *f, const char *k)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->k[i], k) == 0)
            return f->v[i];
    return "";
}

bool sim_form_add(struct sim_form *f, const char *k, const char *v)
{
    if (f->n >= 32 || *sim_form_get(f, k))
        return false;
    f->k[f->n] = strdup(k);
    f->v[f->n] = strdup(v ? v : "");
    if (!f->k[f->n] || !f->v[f->n]) {
        free(f->k[f->n]);
        free(f->v[f->n]);
        return false;
    }
    f->n++;
    return true;
}
