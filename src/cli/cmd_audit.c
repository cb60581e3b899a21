/*
 * cmd_audit.c — the callback record (docs/reliability.md, "The callback
 * record"): `payonce audit verify` walks every tenant's hash chain and names
 * the first broken link; `audit head` prints the chains' heads (save them
 * somewhere the database's writers cannot reach: `verify --anchor` then also
 * catches a chain rewritten as a whole); `audit show` gives the evidence for
 * a dispute, the request as received; `audit seal` seals what serve has not
 * (serve seals every two seconds; this is for a store no serve runs on).
 */
#include "../core/core.h"
#include "../crypto/crypto.h"
#include "../engine/engine.h"
#include "../store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_int.h"

#define ANCHORS_MAX 100000
#define ANCHOR_LINE_MAX 256

static bool hex64(const char *s)
{
    if (strlen(s) != 64)
        return false;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return false;
    return true;
}

/* "TENANT SEQ HASH BASE_SEQ BASE_HASH" lines (audit head's output; #
 * comments, blank lines; the base may be left out: an anchor of an older
 * payonce). */
static int read_anchors(const char *path, struct po_audit_anchor **out, int *n)
{
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "payonce: --anchor %s: %s\n", path, strerror(errno));
        return EXIT_FAIL;
    }
    char line[ANCHOR_LINE_MAX + 2];
    int lineno = 0, ret = 0, cap = 0;
    struct po_audit_anchor *a = NULL;
    while (!ret && fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len && line[len - 1] == '\n')
            line[--len] = '\0';
        else if (!feof(f)) {
            fprintf(stderr, "payonce: %s:%d: line longer than %d bytes\n", path, lineno,
                    ANCHOR_LINE_MAX);
            ret = EXIT_USAGE;
            break;
        }
        if (!line[0] || line[0] == '#')
            continue;
        char tenant[PO_ID_MAX + 2], seq[24], hash[80], bseq[24], bhash[80], extra[2];
        int got =
            sscanf(line, "%65s %23s %79s %23s %79s %1s", tenant, seq, hash, bseq, bhash, extra);
        int64_t v = 0, bv = -1;
        if ((got != 3 && got != 5) || !po_id_valid(tenant, PO_ID_MAX) ||
            po_parse_i64(seq, 1, INT64_MAX, &v) || !hex64(hash) ||
            (got == 5 && (po_parse_i64(bseq, 0, v, &bv) || !hex64(bhash)))) {
            fprintf(stderr,
                    "payonce: %s:%d: not TENANT SEQ HASH BASE_SEQ BASE_HASH (as audit head"
                    " prints)\n",
                    path, lineno);
            ret = EXIT_USAGE;
            break;
        }
        if (*n == ANCHORS_MAX) {
            fprintf(stderr, "payonce: %s: more than %d anchors\n", path, ANCHORS_MAX);
            ret = EXIT_USAGE;
            break;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            struct po_audit_anchor *b = realloc(a, (size_t)cap * sizeof *a);
            if (!b) {
                ret = cli_fail(PO_ERR_NOMEM, "anchors");
                break;
            }
            a = b;
        }
        struct po_audit_anchor *x = &a[(*n)++];
        memset(x, 0, sizeof *x);
        PO_ASSERT(po_strcpy(x->tenant, sizeof x->tenant, tenant) == PO_OK);
        x->seq = v;
        PO_ASSERT(po_strcpy(x->hash, sizeof x->hash, hash) == PO_OK);
        x->base_seq = bv;
        if (got == 5)
            PO_ASSERT(po_strcpy(x->base_hash, sizeof x->base_hash, bhash) == PO_OK);
    }
    fclose(f);
    if (ret) {
        free(a);
        *n = 0;
        return ret;
    }
    *out = a;
    return 0;
}

/* The chains' key from the master key (--master-key-file,
 * PAYONCE_MASTER_KEY_FILE); *have false without one (plain links). */
static int chain_key(const struct opts *o, unsigned char key[PO_AUDIT_KEY_LEN], bool *have)
{
    unsigned char master[PO_MASTER_KEY_LEN];
    int ret = cli_load_master_key(o, master, have);
    if (!ret && *have)
        po_audit_key(master, key);
    po_secure_zero(master, sizeof master);
    return ret;
}

int cmd_audit_verify(struct po_store *s, const struct opts *o)
{
    const char *tenant = cli_opt(o, "tenant"), *anchor = cli_opt(o, "anchor");
    int64_t late = 0;
    int ret = cli_int_opt(o, "late", 1, 86400 * 30, 60, &late);
    if (ret)
        return ret;
    if (tenant && !po_id_valid(tenant, PO_ID_MAX)) {
        fprintf(stderr, "payonce: --tenant: not a tenant id\n");
        return EXIT_USAGE;
    }
    struct po_audit_anchor *anchors = NULL;
    int nanchors = 0;
    if (anchor && (ret = read_anchors(anchor, &anchors, &nanchors)) != 0)
        return ret;
    char err[PO_ERRBUF_SIZE] = "", before[PO_TIME_SIZE];
    po_clock_iso_ms(po_clock_now_ms() - late * 1000, before, sizeof before);
    unsigned char key[PO_AUDIT_KEY_LEN];
    bool keyed = false;
    if ((ret = chain_key(o, key, &keyed)) != 0) {
        free(anchors);
        return ret;
    }
    struct po_audit_report *r = malloc(sizeof *r);
    if (!r) {
        free(anchors);
        return cli_fail(PO_ERR_NOMEM, "report");
    }
    po_err rc = po_audit_verify(s, keyed ? key : NULL, tenant, before, anchors, nanchors, r, err,
                                sizeof err);
    po_secure_zero(key, sizeof key);
    free(anchors);
    if (rc) {
        free(r);
        return cli_fail(rc, err);
    }
    bool ok = r->broken == 0;
    if (cli_flag(o, "json")) {
        json_t *list = json_array();
        for (int i = 0; i < r->nproblems; i++)
            json_array_append_new(list, json_pack("{s:s, s:s}", "tenant", r->problem[i].tenant,
                                                  "problem", r->problem[i].what));
        ret = cli_print_json(json_pack(
            "{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:I, s:o}", "ok", ok, "tenants",
            (json_int_t)r->tenants, "records", (json_int_t)r->records, "unsealed",
            (json_int_t)r->unsealed, "anchors_checked", (json_int_t)r->anchors_checked,
            "anchors_pruned", (json_int_t)r->anchors_pruned, "checkpoints",
            (json_int_t)r->checkpoints, "unkeyed_chains", (json_int_t)r->unkeyed, "keyed", keyed,
            "problems_count", (json_int_t)r->broken, "problems", list));
    } else {
        for (int i = 0; i < r->nproblems; i++)
            fprintf(stderr, "audit: tenant %s: %s\n", r->problem[i].tenant, r->problem[i].what);
        if (ok)
            printf("audit: ok (%" PRId64 " tenant chain%s, %" PRId64
                   " sealed records linked, %" PRId64 " checkpoint%s, %" PRId64
                   " not sealed yet%s)\n",
                   r->tenants, r->tenants == 1 ? "" : "s", r->records, r->checkpoints,
                   r->checkpoints == 1 ? "" : "s", r->unsealed, anchor ? ", anchors matched" : "");
        if (r->unkeyed && !keyed)
            printf("audit: %" PRId64 " chain%s with plain SHA-256 links (no master key): anyone"
                   " who can write the database could recompute them; anchors are the only"
                   " check\n",
                   r->unkeyed, r->unkeyed == 1 ? "" : "s");
        else
            fprintf(stderr, "audit: %" PRId64 " problem%s\n", r->broken, r->broken == 1 ? "" : "s");
        if (anchor)
            printf("audit: %" PRId64 " anchor%s checked, %" PRId64 " older than what is kept\n",
                   r->anchors_checked, r->anchors_checked == 1 ? "" : "s", r->anchors_pruned);
    }
    free(r);
    return ret ? ret : ok ? 0 : EXIT_VERIFY;
}

int cmd_audit_head(struct po_store *s, const struct opts *o)
{
    struct po_rows r = {0};
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_audit_heads(s, &r, err, sizeof err);
    if (rc)
        return cli_fail(rc, err);
    int ret = 0;
    if (cli_flag(o, "json")) {
        json_t *list = json_array();
        for (int i = 0; i < r.nrows; i++) {
            int64_t seq = 0, base = 0, keyed = 0;
            if (po_rows_i64(&r, i, 1, &seq) || po_rows_i64(&r, i, 3, &base) ||
                po_rows_i64(&r, i, 5, &keyed))
                seq = base = keyed = -1;
            json_array_append_new(
                list, json_pack("{s:s, s:I, s:s, s:I, s:s, s:I}", "tenant", po_rows_get(&r, i, 0),
                                "seq", (json_int_t)seq, "hash", po_rows_get(&r, i, 2), "base_seq",
                                (json_int_t)base, "base_hash", po_rows_get(&r, i, 4), "keyed_from",
                                (json_int_t)keyed));
        }
        ret = cli_print_json(list);
    } else {
        printf("# payonce audit head: TENANT SEQ HASH BASE_SEQ BASE_HASH (an anchor file for"
               " audit verify)\n");
        for (int i = 0; i < r.nrows; i++)
            if (strcmp(po_rows_get(&r, i, 1), "0") != 0)
                printf("%s %s %s %s %s\n", po_rows_get(&r, i, 0), po_rows_get(&r, i, 1),
                       po_rows_get(&r, i, 2), po_rows_get(&r, i, 3), po_rows_get(&r, i, 4));
    }
    po_rows_free(&r);
    return ret;
}

po_err cli_seal_all(struct po_store *s, const unsigned char *key, int64_t *out_sealed, char *err,
                    size_t errcap)
{
    int64_t n = 0;
    po_err rc = PO_OK;
    *out_sealed = 0;
    /* a round seals up to 1000; the records are finite and none is sealed
     * twice, so a round with fewer is the last */
    do {
        rc = po_store_begin(s, err, errcap);
        if (!rc)
            rc = po_audit_seal(s, key, 1000, &n, err, errcap);
        if (!rc)
            rc = po_store_commit(s, err, errcap);
        else
            po_store_rollback(s);
        *out_sealed += rc ? 0 : n;
    } while (!rc && n == 1000);
    return rc;
}

int cmd_audit_seal(struct po_store *s, const struct opts *o)
{
    char err[PO_ERRBUF_SIZE] = "";
    int64_t total = 0;
    unsigned char key[PO_AUDIT_KEY_LEN];
    bool keyed = false;
    int ret = chain_key(o, key, &keyed);
    if (ret)
        return ret;
    po_err rc = cli_seal_all(s, keyed ? key : NULL, &total, err, sizeof err);
    po_secure_zero(key, sizeof key);
    if (rc)
        return cli_fail(rc, err);
    printf("audit: %" PRId64 " record%s sealed\n", total, total == 1 ? "" : "s");
    return 0;
}

/* The decoded bytes of a base64 column, NUL-terminated (NULL: not base64). */
static char *decoded(const char *b64, size_t *len)
{
    unsigned char *out = NULL;
    if (po_b64_decode(b64, strlen(b64), &out, len))
        return NULL;
    char *s = realloc(out, *len + 1);
    if (!s) {
        free(out);
        return NULL;
    }
    s[*len] = '\0';
    return s;
}

/* Printable as it is: UTF-8 text without control characters but tab and
 * line ends (else shown as base64, exactly). */
static bool printable(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)
            return false;
    }
    return po_utf8_valid(s, n);
}

static void show_text(const struct po_rows *r, int i, bool intact, const char *h, size_t hl,
                      const char *b, size_t bl)
{
    const char *seq = po_rows_get(r, i, 0);
    printf("record %s of request %s (%s)\n", seq ? seq : "(not sealed yet)", po_rows_get(r, i, 1),
           intact ? "content matches its digest and its link" : "CHANGED: verify the chain");
    printf("  received  %s\n  channel   %s\n  path      %s\n  order     %s\n  digest    %s\n",
           po_rows_get(r, i, 2), po_rows_get(r, i, 3), po_rows_get(r, i, 4), po_rows_get(r, i, 5),
           po_rows_get(r, i, 8));
    if (seq)
        printf("  prev      %s\n  hash      %s\n", po_rows_get(r, i, 9), po_rows_get(r, i, 10));
    printf("  headers:\n");
    for (const char *p = h; h && p < h + hl;) {
        const char *e = strstr(p, "\r\n");
        size_t n = e ? (size_t)(e - p) : (size_t)(h + hl - p);
        printf("    %.*s\n", (int)n, p);
        p += n + 2;
    }
    if (b && printable(b, bl))
        printf("  body (%zu bytes):\n%s\n", bl, b);
    else
        printf("  body (%zu bytes, base64):\n%s\n", bl, po_rows_get(r, i, 7));
}

int cmd_audit_show(struct po_store *s, const struct opts *o)
{
    const char *tenant = cli_need(o, "tenant"), *no = cli_opt(o, "out-trade-no"),
               *req = cli_opt(o, "request-id");
    if (!tenant)
        return EXIT_USAGE;
    int64_t seq = 0;
    int ret = cli_int_opt(o, "seq", 1, INT64_MAX, 0, &seq);
    if (ret)
        return ret;
    if (!no && !req && !seq) {
        fprintf(stderr, "payonce: audit show: --out-trade-no, --request-id or --seq\n");
        return EXIT_USAGE;
    }
    struct po_rows r = {0};
    char err[PO_ERRBUF_SIZE] = "";
    po_err rc = po_audit_find(s, tenant, no, req, seq, &r, err, sizeof err);
    if (rc)
        return cli_fail(rc, err);
    if (r.nrows == 0) {
        po_rows_free(&r);
        return cli_fail(PO_ERR_NOT_FOUND, "no callback record of that tenant matches");
    }
    bool json = cli_flag(o, "json"), keyed = false;
    unsigned char key[PO_AUDIT_KEY_LEN];
    int kret = chain_key(o, key, &keyed);
    if (kret) {
        po_rows_free(&r);
        return kret;
    }
    json_t *list = json ? json_array() : NULL;
    for (int i = 0; !rc && i < r.nrows; i++) {
        bool intact = false;
        size_t hl = 0, bl = 0;
        rc = po_audit_row_ok(&r, i, tenant, keyed ? key : NULL, &intact);
        char *h = decoded(po_rows_get(&r, i, 6), &hl), *b = decoded(po_rows_get(&r, i, 7), &bl);
        if (!rc && json) {
            const char *sq = po_rows_get(&r, i, 0);
            json_t *x = json_pack(
                "{s:s?, s:s, s:s, s:s, s:s, s:s, s:s, s:s?, s:s?, s:b, s:s?, s:s, s:s}", "seq", sq,
                "request_id", po_rows_get(&r, i, 1), "received_at", po_rows_get(&r, i, 2),
                "channel", po_rows_get(&r, i, 3), "path", po_rows_get(&r, i, 4), "out_trade_no",
                po_rows_get(&r, i, 5), "digest", po_rows_get(&r, i, 8), "prev_hash",
                po_rows_get(&r, i, 9), "hash", po_rows_get(&r, i, 10), "intact", intact, "headers",
                h && printable(h, hl) ? h : NULL, "headers_base64", po_rows_get(&r, i, 6),
                "body_base64", po_rows_get(&r, i, 7));
            if (x && sq)
                json_object_set_new(x, "seq", json_integer(strtoll(sq, NULL, 10)));
            if (x && b && printable(b, bl))
                json_object_set_new(x, "body", json_stringn(b, bl));
            json_array_append_new(list, x);
        } else if (!rc) {
            show_text(&r, i, intact, h, hl, b, bl);
        }
        free(h);
        free(b);
    }
    po_rows_free(&r);
    po_secure_zero(key, sizeof key);
    if (rc) {
        json_decref(list);
        return cli_fail(rc, "a record could not be checked");
    }
    return json ? cli_print_json(json_pack("{s:s, s:o}", "tenant", tenant, "records", list)) : 0;
}
