/*
 * webhook_endpoints.c — a tenant's webhook endpoints (issue 12,
 * docs/webhooks.md): add / list / remove / rotate-secret, redrive and the
 * attempts of an event, the start-up check of every sealed secret, and the
 * event as the tenant receives it with its Stripe-style signature
 * (t=…,v1=HMAC-SHA256 of "t.body"). The signing secret is sealed with the
 * master key like channel secrets. The deliveries themselves are in
 * webhook_delivery.c.
 */
#include "webhook.h"
#include "webhook_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SECRET_HEX 64             /* 32 random bytes */
#define PO_WEBHOOK_REMOVE_TRIES 5 /* a removal aborted as a lock's victim */
/* The last_error of the deliveries a removal ended. */
#define PO_WEBHOOK_REMOVED "endpoint removed"

/* ---- endpoints ---- */

static void aad_of(const char *tenant, const char *id, char *out, size_t cap)
{
    PO_ASSERT(po_fmt(out, cap, "%s/webhook/%s", tenant, id) == PO_OK);
}

/* A new secret (whsec_ + 64 hex) and its stored form. */
static po_err new_secret(const unsigned char *master, const char *tenant, const char *id,
                         char secret[PO_WEBHOOK_SECRET_SIZE], char **stored)
{
    unsigned char rnd[SECRET_HEX / 2];
    po_err rc = po_random(rnd, sizeof rnd);
    if (rc)
        return rc;
    int n = snprintf(secret, PO_WEBHOOK_SECRET_SIZE, "whsec_");
    for (size_t i = 0; i < sizeof rnd; i++)
        n += snprintf(secret + n, PO_WEBHOOK_SECRET_SIZE - (size_t)n, "%02x", rnd[i]);
    po_secure_zero(rnd, sizeof rnd);
    /* without a master key: insecure development mode, said loudly by serve */
    char aad[160];
    aad_of(tenant, id, aad, sizeof aad);
    return po_secret_store(master, aad, secret, strlen(secret), stored);
}

po_err po_webhook_open_secret(const unsigned char *master, const char *tenant, const char *id,
                              const char *stored, char out[PO_WEBHOOK_SECRET_SIZE])
{
    /* A plain secret is written only without a master key (insecure
     * development); a gateway with a key refuses one, as it refuses plain
     * channel secrets: it would mean the row did not come from payonce.
     * Development rows written before the one stored form kept the secret
     * itself after "plain:" (whsec_…, never base64: '_' is not in its
     * alphabet), and still open. */
    if (!master && strncmp(stored, PO_PLAIN_PREFIX "whsec_", strlen(PO_PLAIN_PREFIX) + 6) == 0)
        return po_strcpy(out, PO_WEBHOOK_SECRET_SIZE, stored + strlen(PO_PLAIN_PREFIX));
    char aad[160];
    unsigned char *plain = NULL;
    size_t len = 0;
    aad_of(tenant, id, aad, sizeof aad);
    po_err rc = po_secret_open(master, aad, stored, &plain, &len);
    if (rc)
        return rc;
    rc = len < PO_WEBHOOK_SECRET_SIZE ? PO_OK : PO_ERR_LIMIT;
    if (!rc) {
        memcpy(out, plain, len);
        out[len] = '\0';
    }
    po_secure_zero(plain, len);
    free(plain);
    return rc;
}

bool po_webhook_events_ok(const char *events, char *err, size_t errcap)
{
    if (!events || strcmp(events, "*") == 0)
        return true;
    char buf[512];
    if (po_strcpy(buf, sizeof buf, events)) {
        po_errf(err, errcap, "--events is too long");
        return false;
    }
    char *save = NULL;
    int n = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), n++)
        if (!po_outbox_type_valid(t)) {
            po_errf(err, errcap, "unknown event type \"%.40s\" (docs/webhooks.md lists them)", t);
            return false;
        }
    if (n == 0 || strstr(events, ",,") || events[0] == ',' || events[strlen(events) - 1] == ',') {
        po_errf(err, errcap, "--events: a comma-separated list of event types, or *");
        return false;
    }
    return true;
}

po_err po_webhook_add(struct po_store *s, const unsigned char *master, const char *tenant,
                      const char *url, const char *events, const struct po_egress_policy *egress,
                      struct po_webhook_new *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    if (!po_egress_url_ok(egress, url, err, errcap) || !po_webhook_events_ok(events, err, errcap))
        return PO_ERR_INVALID;
    unsigned char rnd[8];
    po_err rc = po_random(rnd, sizeof rnd);
    if (rc)
        return rc;
    int n = snprintf(out->id, sizeof out->id, "we_");
    for (size_t i = 0; i < sizeof rnd; i++)
        n += snprintf(out->id + n, sizeof out->id - (size_t)n, "%02x", rnd[i]);
    char *stored = NULL, now[PO_TIME_SIZE];
    rc = new_secret(master, tenant, out->id, out->secret, &stored);
    if (rc)
        return rc;
    po_clock_now_iso(now, sizeof now);
    int64_t added = 0, tenants = 0;
    /* The tenant's row is locked first (an UPDATE that changes nothing),
     * so that two adds at once count each other's endpoint: the limit
     * holds on PostgreSQL too. */
    rc = po_store_begin(s, err, errcap);
    if (!rc)
        rc = po_store_exec(s, "UPDATE tenant SET tenant_id = tenant_id WHERE tenant_id = ?",
                           PO_PARAMS(PO_TEXT(tenant)), NULL, &tenants, err, errcap);
    if (!rc && tenants == 1)
        rc = po_store_exec(
            s,
            "INSERT INTO webhook_endpoint (tenant_id, endpoint_id, url, events, secret,"
            " created_at) SELECT tenant_id, ?, ?, ?, ?, ? FROM tenant WHERE tenant_id = ? AND"
            " (SELECT COUNT(*) FROM webhook_endpoint WHERE tenant_id = ? AND removed_at IS"
            " NULL) < ?",
            PO_PARAMS(PO_TEXT(out->id), PO_TEXT(url), PO_TEXT(events ? events : "*"),
                      PO_TEXT(stored), PO_TEXT(now), PO_TEXT(tenant), PO_TEXT(tenant),
                      PO_I64(PO_WEBHOOK_ENDPOINTS_MAX)),
            NULL, &added, err, errcap);
    if (!rc && tenants == 1 && added == 0) {
        po_errf(err, errcap,
                "tenant %s has %d webhook endpoints, the most it may have: remove one first",
                tenant, PO_WEBHOOK_ENDPOINTS_MAX);
        rc = PO_ERR_LIMIT;
    } else if (!rc && tenants == 0) {
        po_errf(err, errcap, "no tenant %s", tenant);
        rc = PO_ERR_NOT_FOUND;
    }
    if (!rc)
        rc = po_store_commit(s, err, errcap);
    else
        po_store_rollback(s);
    free(stored);
    if (rc)
        po_secure_zero(out->secret, sizeof out->secret);
    return rc;
}

/* One endpoint as the API and the CLI show it (no secret). */
static json_t *endpoint_json(const struct po_rows *r, int i)
{
    int64_t pending = 0, dead = 0;
    if (po_rows_i64(r, i, 5, &pending) || po_rows_i64(r, i, 6, &dead))
        pending = dead = -1;
    const char *failing = po_rows_get(r, i, 4);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:I, s:I}", "object", "webhook_endpoint", "id",
                     po_rows_get(r, i, 0), "url", po_rows_get(r, i, 1), "events",
                     po_rows_get(r, i, 2), "created_at", po_rows_get(r, i, 3), "failing_since",
                     failing ? json_string(failing) : json_null(), "pending", (json_int_t)pending,
                     "dead", (json_int_t)dead);
}

#define ENDPOINT_COLUMNS                                                                           \
    "SELECT endpoint_id, url, events, created_at, failing_since,"                                  \
    " (SELECT COUNT(*) FROM webhook_delivery d WHERE d.tenant_id = w.tenant_id AND"                \
    " d.state = 'pending' AND d.endpoint_id = w.endpoint_id),"                                     \
    " (SELECT COUNT(*) FROM webhook_delivery d WHERE d.tenant_id = w.tenant_id AND"                \
    " d.state = 'dead' AND d.endpoint_id = w.endpoint_id)"                                         \
    " FROM webhook_endpoint w WHERE tenant_id = ? AND removed_at IS NULL"

po_err po_webhook_list(struct po_store *s, const char *tenant, struct po_page *pg, json_t **out)
{
    const char *ts = pg->after_ts ? pg->after_ts : "", *key = pg->after_key ? pg->after_key : "";
    struct po_rows r;
    po_err rc = po_store_exec(s,
                              ENDPOINT_COLUMNS " AND (? = '' OR created_at > ? OR (created_at = ?"
                                               " AND endpoint_id > ?)) ORDER BY created_at,"
                                               " endpoint_id LIMIT ?",
                              PO_PARAMS(PO_TEXT(tenant), PO_TEXT(ts), PO_TEXT(ts), PO_TEXT(ts),
                                        PO_TEXT(key), PO_I64(pg->limit + 1)),
                              &r, NULL, NULL, 0);
    if (rc)
        return rc;
    json_t *list = json_array();
    int shown = r.nrows > pg->limit ? (int)pg->limit : r.nrows;
    for (int i = 0; list && i < shown; i++)
        list = po_json_append(list, endpoint_json(&r, i));
    pg->more = r.nrows > pg->limit;
    if (list && pg->more) {
        PO_ASSERT(po_strcpy(pg->last_ts, sizeof pg->last_ts, po_rows_get(&r, shown - 1, 3)) ==
                  PO_OK);
        PO_ASSERT(po_strcpy(pg->last_key, sizeof pg->last_key, po_rows_get(&r, shown - 1, 0)) ==
                  PO_OK);
    }
    po_rows_free(&r);
    if (!list)
        return PO_ERR_NOMEM;
    *out = list;
    return PO_OK;
}

po_err po_webhook_get(struct po_store *s, const char *tenant, const char *id, json_t **out)
{
    struct po_rows r;
    *out = NULL;
    po_err rc = po_store_exec(s, ENDPOINT_COLUMNS " AND endpoint_id = ?",
                              PO_PARAMS(PO_TEXT(tenant), PO_TEXT(id)), &r, NULL, NULL, 0);
    if (rc)
        return rc;
    if (r.nrows == 1 && !(*out = endpoint_json(&r, 0)))
        rc = PO_ERR_NOMEM;
    else if (r.nrows != 1)
        rc = PO_ERR_NOT_FOUND;
    po_rows_free(&r);
    return rc;
}

static po_err remove_once(struct po_store *s, const char *tenant, const char *id, char *err,
                          size_t errcap)
{
    char now[PO_TIME_SIZE];
    int64_t changed = 0;
    po_clock_now_iso(now, sizeof now);
    /* Its undelivered events stop at once: their deliveries end as dead
     * letters that name the removal (their claims dropped, so an attempt
     * already in flight records nothing), and the claim and the send both
     * refuse a removed endpoint. Redrive does not bring them back. */
    po_err rc = po_store_begin(s, err, errcap);
    if (!rc)
        rc = po_store_exec(s,
                           "UPDATE webhook_endpoint SET removed_at = ? WHERE tenant_id = ? AND"
                           " endpoint_id = ? AND removed_at IS NULL",
                           PO_PARAMS(PO_TEXT(now), PO_TEXT(tenant), PO_TEXT(id)), NULL, &changed,
                           err, errcap);
    if (!rc && changed == 1)
        rc = po_store_exec(
            s,
            "UPDATE webhook_delivery SET state = 'dead', last_error = ?,"
            " claim_token = NULL, claimed_until = NULL, updated_at = ? WHERE"
            " tenant_id = ? AND endpoint_id = ? AND state = 'pending'",
            PO_PARAMS(PO_TEXT(PO_WEBHOOK_REMOVED), PO_TEXT(now), PO_TEXT(tenant), PO_TEXT(id)),
            NULL, NULL, err, errcap);
    if (!rc && changed == 0) {
        po_errf(err, errcap, "tenant %s has no endpoint %s", tenant, id);
        rc = PO_ERR_NOT_FOUND;
    }
    if (!rc)
        rc = po_store_commit(s, err, errcap);
    else
        po_store_rollback(s);
    return rc;
}

/* The removal locks the endpoint and then its deliveries, in the order a
 * delivery's result is recorded (webhook_delivery.c, record: the
 * endpoint's failing streak, then the delivery), so the two do not
 * deadlock each other; they once did, the other way round. Should the
 * database still abort the removal as a deadlock's or a lock wait's
 * victim (PO_ERR_TRANSIENT), it is tried again: an operator's or a
 * tenant's remove does not fail because a delivery was being recorded at
 * that moment. */
po_err po_webhook_remove(struct po_store *s, const char *tenant, const char *id, char *err,
                         size_t errcap)
{
    po_err rc = PO_OK;
    for (int tries = 0; tries < PO_WEBHOOK_REMOVE_TRIES; tries++) {
        rc = remove_once(s, tenant, id, err, errcap);
        if (rc != PO_ERR_TRANSIENT)
            break;
        struct timespec pause = {0, 50000000L * (tries + 1)};
        nanosleep(&pause, NULL);
    }
    return rc;
}

po_err po_webhook_rotate(struct po_store *s, const unsigned char *master, const char *tenant,
                         const char *id, char secret[PO_WEBHOOK_SECRET_SIZE], char *err,
                         size_t errcap)
{
    char *stored = NULL;
    int64_t changed = 0;
    po_err rc = new_secret(master, tenant, id, secret, &stored);
    if (!rc)
        rc = po_store_exec(s,
                           "UPDATE webhook_endpoint SET secret = ? WHERE tenant_id = ? AND"
                           " endpoint_id = ? AND removed_at IS NULL",
                           PO_PARAMS(PO_TEXT(stored), PO_TEXT(tenant), PO_TEXT(id)), NULL, &changed,
                           err, errcap);
    free(stored);
    if (!rc && changed == 0) {
        po_errf(err, errcap, "tenant %s has no endpoint %s", tenant, id);
        rc = PO_ERR_NOT_FOUND;
    }
    if (rc)
        po_secure_zero(secret, PO_WEBHOOK_SECRET_SIZE);
    return rc;
}

po_err po_webhook_redrive(struct po_store *s, const char *tenant, const char *event_id,
                          const char *endpoint_id, const char *since, int64_t *out_count, char *err,
                          size_t errcap)
{
    char now[PO_TIME_SIZE];
    po_clock_now_iso(now, sizeof now);
    *out_count = 0;
    if (!event_id && !endpoint_id) {
        po_errf(err, errcap, "name an event (--event) or an endpoint (--endpoint)");
        return PO_ERR_INVALID;
    }
    return po_store_exec(
        s,
        "UPDATE webhook_delivery SET state = 'pending', attempts = 0, next_at = ?,"
        " claim_token = NULL, claimed_until = NULL, updated_at = ? WHERE"
        " tenant_id = ? AND state = 'dead' AND (? = '' OR event_id = ?) AND"
        " (? = '' OR endpoint_id = ?) AND created_at >= ? AND endpoint_id IN (SELECT"
        " endpoint_id FROM webhook_endpoint w WHERE w.tenant_id = webhook_delivery.tenant_id AND"
        " w.removed_at IS NULL)",
        PO_PARAMS(PO_TEXT(now), PO_TEXT(now), PO_TEXT(tenant), PO_TEXT(event_id ? event_id : ""),
                  PO_TEXT(event_id ? event_id : ""), PO_TEXT(endpoint_id ? endpoint_id : ""),
                  PO_TEXT(endpoint_id ? endpoint_id : ""), PO_TEXT(since ? since : "")),
        NULL, out_count, err, errcap);
}

po_err po_webhook_attempts(struct po_store *s, const char *tenant, const char *event_id,
                           json_t **out)
{
    struct po_rows r;
    po_err rc = po_store_exec(
        s,
        "SELECT a.endpoint_id, a.attempt, a.at, a.status_code, a.latency_ms, a.error, d.state,"
        " (SELECT MAX(b.attempt) FROM webhook_attempt b WHERE b.tenant_id = a.tenant_id AND"
        " b.event_id = a.event_id AND b.endpoint_id = a.endpoint_id) FROM webhook_attempt a JOIN "
        "webhook_delivery d ON d.tenant_id = a.tenant_id "
        "AND"
        " d.event_id = a.event_id AND d.endpoint_id = a.endpoint_id WHERE a.tenant_id = ? AND"
        " a.event_id = ? ORDER BY a.endpoint_id, a.attempt",
        PO_PARAMS(PO_TEXT(tenant), PO_TEXT(event_id)), &r, NULL, NULL, 0);
    if (rc)
        return rc;
    json_t *list = json_array();
    for (int i = 0; list && i < r.nrows; i++) {
        int64_t attempt = 0, status = 0, latency = 0, last = 0;
        if (po_rows_i64(&r, i, 1, &attempt) || po_rows_i64(&r, i, 4, &latency) ||
            po_rows_i64(&r, i, 7, &last))
            attempt = latency = last = -1;
        bool answered = po_rows_get(&r, i, 3) && po_rows_i64(&r, i, 3, &status) == PO_OK;
        const char *error = po_rows_get(&r, i, 5), *state = po_rows_get(&r, i, 6);
        /* What this attempt came to (state is the delivery's, as it stands
         * now): the last attempt of a dead delivery is the one that gave up. */
        const char *result = answered && status >= 200 && status < 300       ? "delivered"
                             : strcmp(state, "dead") == 0 && attempt == last ? "dead"
                                                                             : "failed";
        json_t *e = json_pack(
            "{s:s, s:I, s:s, s:o, s:I, s:o, s:s, s:s}", "endpoint", po_rows_get(&r, i, 0),
            "attempt", (json_int_t)attempt, "at", po_rows_get(&r, i, 2), "status",
            answered ? json_integer(status) : json_null(), "latency_ms", (json_int_t)latency,
            "error", error ? json_string(error) : json_null(), "result", result, "state", state);
        list = po_json_append(list, e);
    }
    po_rows_free(&r);
    if (!list)
        return PO_ERR_NOMEM;
    *out = list;
    return PO_OK;
}

/* Every live endpoint of every tenant: tenant, id, secret, URL, in
 * (tenant, id) order (the start-up checks). */
static po_err live_endpoints(struct po_store *s, struct po_rows *out, char *err, size_t errcap)
{
    return po_store_exec(s,
                         "SELECT tenant_id, endpoint_id, secret, url FROM webhook_endpoint WHERE"
                         " removed_at IS NULL ORDER BY tenant_id, endpoint_id",
                         PO_NO_PARAMS, out, NULL, err, errcap);
}

po_err po_webhook_check_secrets(struct po_store *s, const unsigned char *master, int *out_checked,
                                int *out_broken, char *err, size_t errcap)
{
    struct po_rows r;
    *out_checked = *out_broken = 0;
    po_err rc = live_endpoints(s, &r, err, errcap);
    if (rc)
        return rc;
    for (int i = 0; i < r.nrows; i++) {
        char secret[PO_WEBHOOK_SECRET_SIZE];
        po_err o = po_webhook_open_secret(master, po_rows_get(&r, i, 0), po_rows_get(&r, i, 1),
                                          po_rows_get(&r, i, 2), secret);
        po_secure_zero(secret, sizeof secret);
        if (o == PO_ERR_NOMEM) {
            rc = o;
            break;
        }
        if (o && (*out_broken)++ == 0)
            po_errf(err, errcap, "tenant %s, webhook endpoint %s: its secret %s",
                    po_rows_get(&r, i, 0), po_rows_get(&r, i, 1),
                    po_secret_is_plain(po_rows_get(&r, i, 2))
                        ? "is stored in plain text, refused by a gateway with a master key"
                    : master ? "does not open with this master key"
                             : "is sealed, and there is no master key");
        ++*out_checked;
    }
    po_rows_free(&r);
    return rc;
}

po_err po_webhook_check_urls(struct po_store *s, const struct po_egress_policy *egress,
                             int report_max,
                             void (*report)(void *ctx, const char *tenant, const char *endpoint,
                                            const char *why),
                             void *ctx, int *checked, int *refused, char *err, size_t errcap)
{
    struct po_rows r;
    *checked = *refused = 0;
    po_err rc = live_endpoints(s, &r, err, errcap);
    if (rc)
        return rc;
    for (int i = 0; i < r.nrows; i++) {
        char why[PO_ERRBUF_SIZE] = "";
        ++*checked;
        if (po_egress_url_ok(egress, po_rows_get(&r, i, 3), why, sizeof why))
            continue;
        if (++*refused <= report_max)
            report(ctx, po_rows_get(&r, i, 0), po_rows_get(&r, i, 1), why);
    }
    po_rows_free(&r);
    return PO_OK;
}

/* ---- the event as the tenant receives it ---- */

po_err po_event_envelope(const char *event_id, const char *type, const char *created_at,
                         const char *tenant, const char *payload, char **out)
{
    return po_fmt_alloc(out,
                        "{\"id\":\"%s\",\"object\":\"event\",\"type\":\"%s\",\"created\":%" PRId64
                        ",\"tenant\":\"%s\",\"data\":{\"object\":%s}}",
                        event_id, type, po_clock_unix_of(created_at), tenant, payload);
}

/* ---- signing ---- */

po_err po_webhook_sign(const char *secret, int64_t t, const char *body, char *header, size_t cap)
{
    char *msg = NULL;
    unsigned char mac[32];
    po_err rc = po_fmt_alloc(&msg, "%" PRId64 ".%s", t, body);
    if (!rc)
        rc = po_hmac_sha256(secret, strlen(secret), msg, strlen(msg), mac);
    free(msg);
    if (rc)
        return rc;
    int n = snprintf(header, cap, "t=%" PRId64 ",v1=", t);
    for (int i = 0; i < 32 && (size_t)n < cap; i++)
        n += snprintf(header + n, cap - (size_t)n, "%02x", mac[i]);
    return (size_t)n < cap ? PO_OK : PO_ERR_LIMIT;
}
