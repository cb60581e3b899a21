/*
 * test_audit.c — the tamper-evident callback record (engine/audit.c), on
 * each backend (argv[1]): records commit with their batch and only with it;
 * sealing links them per tenant, two sealers at once make one chain; and
 * `verify` names the first broken link of each planted fault: a body
 * changed, a record removed (in the middle, the oldest, the newest), two
 * records swapped, a record inserted by hand, a chain rewritten whole
 * (caught by an anchor); retention keeps what is left linked. The links
 * are keyed with a key derived from the master key (issue 44 item 4), and
 * the base moves only through a checkpoint: a re-based chain, an edited
 * record relinked without the key, a checkpoint made by hand and a chain
 * turned back to plain links are each named.
 */
#include "../support/testutil.h"

#include "../../src/engine/engine.h"
#include "../../src/service/service.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define S T_S

static const char future[] = "2999-01-01T00:00:00.000Z"; /* nothing is late */
static const unsigned char master[PO_MASTER_KEY_LEN] = "0123456789abcdef0123456789abcdef";
static unsigned char key[PO_AUDIT_KEY_LEN];
static const unsigned char *K; /* the key the tests seal and verify with (NULL: plain) */

static struct po_audit_record *rec(const char *tenant, const char *req, const char *order,
                                   const char *body, int64_t at_ms)
{
    char hdr[256];
    int n = snprintf(hdr, sizeof hdr,
                     "Host: 127.0.0.1\r\nWechatpay-Signature: sig-%s\r\nContent-Type:"
                     " application/json\r\n",
                     req);
    struct po_audit_record *r = NULL;
    assert_int_equal(po_audit_record_new(&(struct po_audit_in){.tenant = tenant,
                                                               .request_id = req,
                                                               .channel = "wechatpay",
                                                               .path = "/notify/wechatpay/t1",
                                                               .out_trade_no = order,
                                                               .received_ms = at_ms,
                                                               .headers = hdr,
                                                               .headers_len = (size_t)n,
                                                               .body = body,
                                                               .body_len = strlen(body)},
                                         &r),
                     PO_OK);
    return r;
}

/* Applies one payment with its record through the batch; its outcome. */
static struct po_outcome pay_recorded(struct po_store *s, const char *no, const char *req,
                                      int64_t at_ms)
{
    struct po_event ev = t_pay_event(no, no, 100);
    char body[128];
    (void)snprintf(body, sizeof body, "{\"out_trade_no\":\"%s\",\"amount\":100}", no);
    struct po_audit_record *r = rec("t1", req, no, body, at_ms);
    struct po_outcome out;
    po_engine_apply_recorded(s, NULL, &ev, 1, &out, NULL, 0, &r, 1);
    po_audit_record_free(r);
    return out;
}

static int64_t seal(struct po_store *s)
{
    char err[PO_ERRBUF_SIZE] = "";
    int64_t n = 0;
    assert_int_equal(po_records_seal(s, NULL, K ? master : NULL, (int64_t)time(NULL), 0, false, &n,
                                     NULL, err, sizeof err),
                     PO_OK);
    return n;
}

static struct po_audit_report *check(struct po_store *s, struct po_audit_anchor *a, int na)
{
    static struct po_audit_report r;
    char err[PO_ERRBUF_SIZE] = "";
    assert_int_equal(po_audit_verify(s, K, NULL, future, a, na, &r, err, sizeof err), PO_OK);
    for (int i = 0; i < r.nproblems; i++)
        printf("# audit: %s: %s\n", r.problem[i].tenant, r.problem[i].what);
    return &r;
}

static void broken_with(struct po_store *s, const char *words)
{
    struct po_audit_report *r = check(s, NULL, 0);
    assert_int_equal(r->broken, 1);
    if (!strstr(r->problem[0].what, words)) {
        printf("# expected \"%s\" in: %s\n", words, r->problem[0].what);
        fail();
    }
}

static void exec(struct po_store *s, const char *sql)
{
    char err[PO_ERRBUF_SIZE] = "";
    if (po_store_exec(s, sql, PO_NO_PARAMS, NULL, NULL, err, sizeof err)) {
        printf("# %s: %s\n", sql, err);
        fail();
    }
}

/* Five payments of t1 recorded and sealed: records 1..5 (R-1..R-5), R-i
 * received at five_at + i. */
static int64_t five_at;
static void five(struct po_store *s)
{
    int64_t now = five_at = po_clock_now_ms();
    for (int i = 1; i <= 5; i++) {
        char no[16], req[16];
        (void)snprintf(no, sizeof no, "A-%d", i);
        (void)snprintf(req, sizeof req, "R-%d", i);
        t_seed_order(s, no, 100);
        assert_int_equal(pay_recorded(s, no, req, now + i).kind, PO_OUT_APPLIED);
    }
    assert_int_equal(seal(s), 5);
    assert_int_equal(check(s, NULL, 0)->broken, 0);
}

static void records_commit_with_their_batch(void **state)
{
    t_seed_order(S, "A-1", 100);
    assert_int_equal(pay_recorded(S, "A-1", "R-1", po_clock_now_ms()).kind, PO_OUT_APPLIED);
    /* the duplicate is recorded too: every verified callback */
    assert_int_equal(pay_recorded(S, "A-1", "R-2", po_clock_now_ms()).kind, PO_OUT_DUPLICATE);
    assert_int_equal(t_count(S,
                             "SELECT COUNT(*) FROM callback_record WHERE tenant_id = 't1'"
                             " AND out_trade_no = 'A-1' AND seq IS NULL",
                             NULL, 0),
                     2);
    /* a batch that does not commit leaves no record: a record whose key
     * another row already holds fails the batch, and the credit with it */
    t_seed_order(S, "A-2", 100);
    struct po_outcome o = pay_recorded(S, "A-2", "R-1", po_clock_now_ms());
    assert_int_equal(o.kind, PO_OUT_RETRY);
    assert_int_equal(
        t_count(S, "SELECT COUNT(*) FROM pay_order WHERE out_trade_no = 'A-2' AND status = 'PAID'",
                NULL, 0),
        0);
    assert_int_equal(t_count(S, "SELECT COUNT(*) FROM callback_record", NULL, 0), 2);
    /* unsealed records are named once they are late */
    struct po_audit_report r;
    char err[PO_ERRBUF_SIZE] = "";
    assert_int_equal(
        po_audit_verify(S, K, NULL, "2000-01-01T00:00:00Z", NULL, 0, &r, err, sizeof err), PO_OK);
    assert_int_equal(r.broken, 0);
    assert_int_equal(r.unsealed, 2);
    assert_int_equal(check(S, NULL, 0)->broken, 1);
    assert_non_null(strstr(check(S, NULL, 0)->problem[0].what, "are not sealed"));
    assert_int_equal(seal(S), 2);
    r = *check(S, NULL, 0);
    assert_int_equal(r.broken, 0);
    assert_int_equal(r.records, 2);
    assert_int_equal(r.unsealed, 0);
    /* what was stored is what came: the body decodes to its bytes */
    struct po_rows rows = {0};
    assert_int_equal(po_audit_find(S, "t1", "A-1", NULL, 0, &rows, err, sizeof err), PO_OK);
    assert_int_equal(rows.nrows, 2);
    assert_string_equal(po_rows_get(&rows, 0, 1), "R-1");
    unsigned char *body = NULL;
    size_t len = 0;
    const char *b64 = po_rows_get(&rows, 0, 7);
    assert_int_equal(po_b64_decode(b64, strlen(b64), &body, &len), PO_OK);
    assert_memory_equal(body, "{\"out_trade_no\":\"A-1\",\"amount\":100}", len);
    free(body);
    bool ok = false;
    assert_int_equal(po_audit_row_ok(&rows, 1, "t1", K, &ok), PO_OK);
    assert_true(ok);
    po_rows_free(&rows);
}

static void a_changed_body_is_named(void **state)
{
    five(S);
    /* the body of record 3 replaced (base64 of another amount) */
    exec(S, "UPDATE callback_body SET body = 'eyJhbW91bnQiOjEwMDAwfQ==' WHERE request_id = 'R-3'");
    broken_with(S, "record 3 (request R-3, order A-3) was changed");
    /* a digest recomputed to match the new body still breaks the link */
    struct po_rows rows = {0};
    char err[PO_ERRBUF_SIZE] = "";
    assert_int_equal(po_audit_find(S, "t1", NULL, "R-3", 0, &rows, err, sizeof err), PO_OK);
    bool ok = true;
    assert_int_equal(po_audit_row_ok(&rows, 0, "t1", K, &ok), PO_OK);
    assert_false(ok);
    po_rows_free(&rows);
}

static void a_removed_record_is_named(void **state)
{
    five(S);
    exec(S, "DELETE FROM callback_record WHERE seq = 2");
    broken_with(S, "record 2 is missing (removed): the chain goes from 1 to 3");
}

static void the_oldest_removed_is_named(void **state)
{
    five(S);
    exec(S, "DELETE FROM callback_record WHERE seq = 1");
    broken_with(S, "record 1 is missing");
}

static void the_newest_removed_is_named(void **state)
{
    five(S);
    exec(S, "DELETE FROM callback_record WHERE seq = 5");
    broken_with(S, "the chain ends at record 4 but its head is record 5");
}

static void two_swapped_are_named(void **state)
{
    five(S);
    /* records 2 and 4 trade places (their seq numbers) */
    exec(S, "UPDATE callback_record SET seq = -2 WHERE seq = 2");
    exec(S, "UPDATE callback_record SET seq = 2 WHERE seq = 4");
    exec(S, "UPDATE callback_record SET seq = 4 WHERE seq = -2");
    broken_with(S, "record 2 (request R-4, order A-4) is not linked to record 1");
}

static void one_inserted_by_hand_is_named(void **state)
{
    five(S);
    /* a copy of record 5 as record 6, past the head */
    exec(S, "INSERT INTO callback_record (tenant_id, request_id, received_at, channel, path,"
            " out_trade_no, digest, seq, prev_hash, hash) SELECT tenant_id, 'R-X', received_at,"
            " channel, path, out_trade_no, digest, 6, hash, hash FROM callback_record WHERE"
            " seq = 5");
    exec(S, "INSERT INTO callback_body (tenant_id, request_id, headers, body) SELECT tenant_id,"
            " 'R-X', headers, body FROM callback_body WHERE request_id = 'R-5'");
    broken_with(S, "record 6 (request R-X, order A-5) was changed");
    exec(S, "DELETE FROM callback_record WHERE seq = 6");
    /* a body removed: its record no longer has what it stands for */
    exec(S, "DELETE FROM callback_body WHERE request_id = 'R-2'");
    broken_with(S, "record 2 (request R-2) lost a field or its body");
    exec(S, "INSERT INTO callback_body (tenant_id, request_id, headers, body) SELECT tenant_id,"
            " 'R-2', headers, body FROM callback_body WHERE request_id = 'R-X'");
    broken_with(S, "record 2 (request R-2, order A-2) was changed");
    exec(S, "DELETE FROM callback_body WHERE request_id = 'R-2'");
    exec(S, "DELETE FROM callback_body WHERE request_id = 'R-X'");
    exec(S, "DELETE FROM callback_record WHERE request_id = 'R-2'");
    exec(S, "UPDATE callback_record SET seq = 2 WHERE seq = 3"); /* keep it short: no gap */
    /* unsealed, inserted by hand long ago */
    exec(S, "INSERT INTO callback_record (tenant_id, request_id, received_at, channel, path,"
            " out_trade_no, digest) VALUES ('t1', 'R-Y', '2020-01-01T00:00:00Z', 'wechatpay', '/',"
            " 'A-9', 'x')");
    struct po_audit_report *r = check(S, NULL, 0);
    assert_int_equal(r->broken, 2); /* the moved record 3, and the unsealed one */
    assert_non_null(strstr(r->problem[1].what, "are not sealed"));
}

static void a_rewritten_chain_needs_an_anchor(void **state)
{
    five(S);
    struct po_rows h = {0};
    char err[PO_ERRBUF_SIZE] = "";
    assert_int_equal(po_audit_heads(S, &h, err, sizeof err), PO_OK);
    assert_int_equal(h.nrows, 1);
    struct po_audit_anchor a = {.tenant = "t1", .seq = 5, .base_seq = -1};
    assert_int_equal(po_strcpy(a.hash, sizeof a.hash, po_rows_get(&h, 0, 2)), PO_OK);
    po_rows_free(&h);
    assert_int_equal(check(S, &a, 1)->broken, 0);
    assert_int_equal(check(S, &a, 1)->anchors_checked, 1);
    /* someone with the database rewrites record 3 and re-seals everything
     * from it: unsealed, then sealed again by the rules */
    exec(S, "UPDATE callback_record SET seq = NULL, prev_hash = NULL, hash = NULL WHERE seq >= 3");
    exec(S, "UPDATE callback_chain SET seq = 2, hash = (SELECT hash FROM callback_record WHERE"
            " seq = 2)");
    exec(S, "DELETE FROM callback_record WHERE request_id = 'R-3'");
    assert_int_equal(seal(S), 2);
    assert_int_equal(check(S, NULL, 0)->broken, 0); /* consistent by itself */
    struct po_audit_report *r = check(S, &a, 1);
    assert_int_equal(r->broken, 1);
    assert_non_null(strstr(r->problem[0].what, "past the chain's head 4"));
}

static void retention_keeps_the_rest_linked(void **state)
{
    int64_t day = INT64_C(86400000), now = po_clock_now_ms();
    for (int i = 1; i <= 6; i++) {
        char no[16], req[16];
        (void)snprintf(no, sizeof no, "P-%d", i);
        (void)snprintf(req, sizeof req, "Q-%d", i);
        t_seed_order(S, no, 100);
        /* three received 10 days ago, three now */
        assert_int_equal(pay_recorded(S, no, req, i <= 3 ? now - 10 * day + i : now + i).kind,
                         PO_OUT_APPLIED);
    }
    char err[PO_ERRBUF_SIZE] = "";
    int64_t sealed = 0, pruned = 0;
    assert_int_equal(
        po_records_seal(S, NULL, master, now / 1000, 7, true, &sealed, &pruned, err, sizeof err),
        PO_OK);
    assert_int_equal(sealed, 6);
    assert_int_equal(pruned, 3);
    struct po_audit_report *r = check(S, NULL, 0);
    assert_int_equal(r->broken, 0);
    assert_int_equal(r->records, 3);
    assert_int_equal(t_count(S, "SELECT base_seq FROM callback_chain", NULL, 0), 3);
    assert_int_equal(t_count(S, "SELECT COUNT(*) FROM callback_body", NULL, 0), 3); /* bodies too */
    /* and the oldest kept, removed, is still seen */
    exec(S, "DELETE FROM callback_record WHERE seq = 4");
    broken_with(S, "record 4 is missing");
}

/* The heads of t1 as an anchor (audit head: head and base). */
static struct po_audit_anchor anchor_now(struct po_store *s)
{
    struct po_rows h = {0};
    char err[PO_ERRBUF_SIZE] = "";
    assert_int_equal(po_audit_heads(s, &h, err, sizeof err), PO_OK);
    assert_int_equal(h.nrows, 1);
    struct po_audit_anchor a = {.tenant = "t1"};
    assert_int_equal(po_rows_i64(&h, 0, 1, &a.seq), PO_OK);
    assert_int_equal(po_rows_i64(&h, 0, 3, &a.base_seq), PO_OK);
    assert_int_equal(po_strcpy(a.hash, sizeof a.hash, po_rows_get(&h, 0, 2)), PO_OK);
    assert_int_equal(po_strcpy(a.base_hash, sizeof a.base_hash, po_rows_get(&h, 0, 4)), PO_OK);
    po_rows_free(&h);
    return a;
}

static void named(struct po_audit_report *r, const char *words)
{
    for (int i = 0; i < r->nproblems; i++)
        if (strstr(r->problem[i].what, words))
            return;
    printf("# expected \"%s\" among %d problem(s)\n", words, r->nproblems);
    fail();
}

/* Issue 44's first reproduction: audit head saved; record 3 deleted and
 * the chain's base moved onto it by hand. No checkpoint moved it: named,
 * with and without the anchor. */
static void a_rebased_chain_is_named(void **state)
{
    five(S);
    struct po_audit_anchor a = anchor_now(S);
    assert_int_equal(check(S, &a, 1)->broken, 0);
    exec(S, "UPDATE callback_chain SET base_seq = 3, base_hash = (SELECT hash FROM"
            " callback_record WHERE seq = 3)");
    exec(S, "DELETE FROM callback_record WHERE seq <= 3");
    broken_with(S, "the chain's base was moved to record 3 without a checkpoint");
    struct po_audit_report *r = check(S, &a, 1);
    assert_true(r->broken >= 1);
    named(r, "without a checkpoint");
    /* a checkpoint forged by hand (its MAC computed without the key) */
    exec(S, "INSERT INTO callback_checkpoint (tenant_id, cp_seq, kind, old_base_seq,"
            " old_base_hash, new_base_seq, new_base_hash, head_seq, at, who, why, keyed, mac)"
            " SELECT 't1', 2, 'prune', 0, base_hash, 3, base_hash, 5, '2026-01-01T00:00:00Z',"
            " 'payonce', 'retention', 1, '00' FROM callback_chain");
    broken_with(S, "checkpoint 2 (prune, by payonce at 2026-01-01T00:00:00Z) does not match its"
                   " MAC");
    exec(S, "UPDATE callback_checkpoint SET keyed = 0 WHERE cp_seq = 2");
    broken_with(S, "checkpoint 2 is not keyed although the chain was keyed before it");
}

/* Issue 44's second reproduction: a record's body edited and its digest
 * recomputed as anyone can (the digest is plain SHA-256 over the record's
 * fields: po_audit_record_new makes the same one); its link cannot be, the
 * key is the master key's: named; the base moved past it needs a
 * checkpoint: named. */
static void an_edited_record_cannot_be_relinked(void **state)
{
    five(S);
    static const char edited[] = "{\"out_trade_no\":\"A-3\",\"amount\":10000}";
    struct po_audit_record *r = rec("t1", "R-3", "A-3", edited, five_at + 3);
    char sql[512];
    (void)snprintf(sql, sizeof sql, "UPDATE callback_body SET body = '%s' WHERE request_id = 'R-3'",
                   r->body);
    exec(S, sql);
    (void)snprintf(sql, sizeof sql,
                   "UPDATE callback_record SET digest = '%s' WHERE request_id = 'R-3'", r->digest);
    exec(S, sql);
    po_audit_record_free(r);
    broken_with(S, "record 3 (request R-3, order A-3): its hash does not match its content and"
                   " place");
    exec(S, "UPDATE callback_chain SET base_seq = 3, base_hash = (SELECT hash FROM"
            " callback_record WHERE seq = 3)");
    broken_with(S, "without a checkpoint");
}

/* A chain sealed without a master key is plain and said so; verify with
 * the key calls it unkeyed until a keyed seal adopts it (its plain records
 * kept, its new ones keyed); then verify without the key cannot check it. */
static void plain_and_keyed_chains(void **state)
{
    K = NULL;
    five(S);
    struct po_audit_report *r = check(S, NULL, 0);
    assert_int_equal(r->broken, 0);
    assert_int_equal(r->unkeyed, 1);
    K = key;
    broken_with(S, "the chain is not keyed");
    assert_int_equal(seal(S), 0); /* nothing new, but the chain adopted */
    r = check(S, NULL, 0);
    assert_int_equal(r->broken, 0);
    assert_int_equal(r->unkeyed, 0);
    assert_int_equal(r->checkpoints, 1);
    assert_int_equal(t_count(S, "SELECT keyed_from FROM callback_chain", NULL, 0), 6);
    t_seed_order(S, "A-6", 100);
    assert_int_equal(pay_recorded(S, "A-6", "R-6", po_clock_now_ms()).kind, PO_OUT_APPLIED);
    assert_int_equal(seal(S), 1);
    assert_int_equal(check(S, NULL, 0)->broken, 0);
    /* its record 6 relinked in plain SHA-256 by someone without the key */
    exec(S, "UPDATE callback_chain SET keyed_from = 7");
    broken_with(S, "its adoption from 6: changed by hand");
    exec(S, "UPDATE callback_chain SET keyed_from = 6");
    K = NULL;
    broken_with(S, "the chain is keyed (HMAC from record 6): verify it with the master key");
    K = key;
}

/* Retention moves the base through a checkpoint: an anchor saved before
 * still checks (its base is one a checkpoint moved on from); an anchor
 * whose base is ahead of the chain's is a chain cut back. */
static void anchors_follow_checkpoints(void **state)
{
    int64_t day = INT64_C(86400000), now = po_clock_now_ms();
    for (int i = 1; i <= 4; i++) {
        char no[16], req[16];
        (void)snprintf(no, sizeof no, "P-%d", i);
        (void)snprintf(req, sizeof req, "Q-%d", i);
        t_seed_order(S, no, 100);
        assert_int_equal(pay_recorded(S, no, req, i <= 2 ? now - 10 * day + i : now + i).kind,
                         PO_OUT_APPLIED);
    }
    assert_int_equal(seal(S), 4);
    struct po_audit_anchor before = anchor_now(S);
    char err[PO_ERRBUF_SIZE] = "";
    int64_t pruned = 0;
    assert_int_equal(
        po_records_seal(S, NULL, master, now / 1000, 7, true, NULL, &pruned, err, sizeof err),
        PO_OK);
    assert_int_equal(pruned, 2);
    struct po_audit_report *r = check(S, &before, 1);
    assert_int_equal(r->broken, 0);
    assert_int_equal(r->checkpoints, 2); /* adopt, prune */
    assert_int_equal(t_count(S,
                             "SELECT COUNT(*) FROM callback_checkpoint WHERE kind = 'prune' AND"
                             " old_base_seq = 0 AND new_base_seq = 2",
                             NULL, 0),
                     1);
    struct po_audit_anchor after = anchor_now(S);
    assert_int_equal(after.base_seq, 2);
    assert_int_equal(check(S, &after, 1)->broken, 0);
    /* pruning again within the hour: the base stays (checkpoints stay few) */
    assert_int_equal(po_records_seal(S, NULL, master, now / 1000 + 30 * 86400, 7, true, NULL,
                                     &pruned, err, sizeof err),
                     PO_OK);
    assert_int_equal(pruned, 0);
    /* an anchor whose base is ahead of the chain's: cut back */
    after.base_seq = 3;
    named(check(S, &after, 1), "the chain was re-based");
}

/* Two sealers at once (PostgreSQL: two connections; SQLite: one after the
 * other on its one writer) over records of two tenants: one chain each. */
struct sealer {
    const char *url;
    int64_t sealed;
};

static void *sealer(void *arg)
{
    struct sealer *x = arg;
    struct po_store *s = t_open(x->url);
    char err[PO_ERRBUF_SIZE] = "";
    for (int i = 0; i < 20; i++) {
        int64_t n = 0;
        po_err rc = po_records_seal(s, NULL, master, (int64_t)time(NULL), 0, false, &n, NULL, err,
                                    sizeof err);
        if (rc == PO_OK)
            x->sealed += n;
    }
    po_store_close(s);
    return NULL;
}

static void sealers_race_to_one_chain(void **state)
{
    int64_t now = po_clock_now_ms();
    char err[PO_ERRBUF_SIZE] = "";
    bool added = false;
    assert_int_equal(po_tenant_add(S, "t2", NULL, &added, err, sizeof err), PO_OK);
    struct po_audit_record *r[200];
    for (int i = 0; i < 200; i++) {
        char req[16], no[16];
        (void)snprintf(req, sizeof req, "S-%d", i);
        (void)snprintf(no, sizeof no, "X-%d", i);
        r[i] = rec(i % 2 ? "t1" : "t2", req, no, "{}", now + i);
    }
    assert_int_equal(po_store_begin(S, err, sizeof err), PO_OK);
    assert_int_equal(po_audit_insert(S, r, 200, err, sizeof err), PO_OK);
    assert_int_equal(po_store_commit(S, err, sizeof err), PO_OK);
    for (int i = 0; i < 200; i++)
        po_audit_record_free(r[i]);
    struct sealer x[2] = {{T_URL, 0}, {T_URL, 0}};
    pthread_t th[2];
    for (int k = 0; k < 2; k++)
        assert_int_equal(pthread_create(&th[k], NULL, sealer, &x[k]), 0);
    for (int k = 0; k < 2; k++)
        pthread_join(th[k], NULL);
    assert_int_equal(seal(S) + x[0].sealed + x[1].sealed, 200);
    struct po_audit_report *rep = check(S, NULL, 0);
    assert_int_equal(rep->broken, 0);
    assert_int_equal(rep->records, 200);
    assert_int_equal(rep->tenants, 2);
    assert_int_equal(
        t_count(S, "SELECT MAX(seq) FROM callback_record WHERE tenant_id = 't2'", NULL, 0), 100);
}

int main(int argc, char **argv)
{
    t_fx_backend = t_backend(argc, argv);
    po_audit_key(master, key);
    K = key;
#define T(name) cmocka_unit_test_setup_teardown(name, t_fx_setup_seeded, t_fx_teardown)
    const struct CMUnitTest tests[] = {
        T(records_commit_with_their_batch), T(a_changed_body_is_named),
        T(a_removed_record_is_named),       T(the_oldest_removed_is_named),
        T(the_newest_removed_is_named),     T(two_swapped_are_named),
        T(one_inserted_by_hand_is_named),   T(a_rewritten_chain_needs_an_anchor),
        T(retention_keeps_the_rest_linked), T(sealers_race_to_one_chain),
        T(a_rebased_chain_is_named),        T(an_edited_record_cannot_be_relinked),
        T(plain_and_keyed_chains),          T(anchors_follow_checkpoints),
    };
    char name[64];
    snprintf(name, sizeof name, "audit[%s]", t_fx_backend);
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
