/*
 * signin.c — the console's sign-in, off the payment path (signin.h).
 *
 * The steps of one attempt: the buckets (the caller's thread: a lock and a
 * few comparisons); the claim, which counts the attempt against the name
 * before anything is checked (the pool's connection, one short UPDATE);
 * the password's hash (no connection held); the session when it matched
 * (the pool's connection again). The connection is opened on first use and
 * again after it failed; one at a time uses it (the statements are short:
 * the hash runs outside the lock).
 */
#include "signin.h"

#include "../../runtime/runtime.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

struct po_signin {
    struct po_workers *pool;
    struct po_ratelimit *by_addr, *by_name;
    char *db_url;
    pthread_mutex_t db_mu;
    struct po_store *db; /* under db_mu; NULL until first used or after a failure */
};

po_err po_signin_open(const char *db_url, struct po_signin **out, char *err, size_t errcap)
{
    struct po_signin *si = calloc(1, sizeof *si);
    po_err rc = si && (si->db_url = strdup(db_url)) ? PO_OK : PO_ERR_NOMEM;
    if (!rc)
        pthread_mutex_init(&si->db_mu, NULL);
    if (!rc)
        rc = po_ratelimit_open(PO_SIGNIN_KEYS, PO_SIGNIN_ADDR_BURST, PO_SIGNIN_ADDR_PER_MIN,
                               &si->by_addr);
    if (!rc)
        rc = po_ratelimit_open(PO_SIGNIN_KEYS, PO_SIGNIN_NAME_BURST, PO_SIGNIN_NAME_PER_MIN,
                               &si->by_name);
    if (!rc)
        rc = po_workers_start(PO_SIGNIN_THREADS, PO_SIGNIN_QUEUE, PO_SIGNIN_THREADS, 0, &si->pool);
    if (rc) {
        po_errf(err, errcap, "the sign-in pool cannot start (out of memory or threads)");
        if (si && si->db_url)
            pthread_mutex_destroy(&si->db_mu);
        po_signin_close(si);
        return rc;
    }
    *out = si;
    return PO_OK;
}

void po_signin_close(struct po_signin *si)
{
    if (!si)
        return;
    po_workers_free(si->pool);
    po_ratelimit_close(si->by_addr);
    po_ratelimit_close(si->by_name);
    if (si->db_url) {
        po_store_close(si->db);
        pthread_mutex_destroy(&si->db_mu);
    }
    free(si->db_url);
    free(si);
}

/* The pool's connection, under db_mu (opened when needed); NULL when the
 * database cannot be reached. */
static struct po_store *db_lock(struct po_signin *si)
{
    pthread_mutex_lock(&si->db_mu);
    char err[PO_ERRBUF_SIZE] = "";
    if (!si->db && po_store_open(si->db_url, &si->db, err, sizeof err)) {
        po_log(PO_LOG_WARN, "console sign-in: cannot open the database: %s", err);
        si->db = NULL;
    }
    if (!si->db)
        pthread_mutex_unlock(&si->db_mu);
    return si->db;
}

/* Releases db_lock's connection; one that failed is closed (reopened next
 * time). */
static void db_unlock(struct po_signin *si, po_err rc)
{
    if (rc && rc != PO_ERR_NOT_FOUND && rc != PO_ERR_INVALID) {
        po_store_close(si->db);
        si->db = NULL;
    }
    pthread_mutex_unlock(&si->db_mu);
}

static void check(void *arg)
{
    struct po_signin_req *r = arg;
    struct po_signin *si = r->si;
    /* payments first: this thread runs only sign-ins */
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), PO_SIGNIN_NICE);
    char err[PO_ERRBUF_SIZE] = "";
    struct po_login_claim c = {0};
    struct po_store *s = db_lock(si);
    po_err rc = s ? po_operator_login_claim(s, r->name, &c, err, sizeof err) : PO_ERR_STORE;
    if (s)
        db_unlock(si, rc);
    if (rc) {
        r->result = PO_SIGNIN_UNAVAILABLE;
    } else {
        po_err v = po_password_verify(r->password, r->len, c.hash);
        r->result = c.counted && v == PO_OK ? PO_SIGNIN_OK : PO_SIGNIN_REFUSED;
    }
    if (r->result == PO_SIGNIN_OK) {
        s = db_lock(si);
        rc = s ? po_operator_login_finish(s, r->name, c.role, &r->ses, err, sizeof err)
               : PO_ERR_STORE;
        if (s)
            db_unlock(si, rc);
        if (rc)
            r->result = PO_SIGNIN_UNAVAILABLE;
    }
    if (r->result == PO_SIGNIN_UNAVAILABLE)
        po_log(PO_LOG_WARN, "console sign-in of %s: the database did not answer: %s", r->name, err);
    po_secure_zero(&c, sizeof c);
    po_secure_zero(r->password, r->len);
    free(r->password);
    r->password = NULL;
    r->done(r);
}

bool po_signin_start(struct po_signin *si, const char *addr, const char *name, const char *password,
                     size_t len, struct po_signin_req *r)
{
    r->si = si;
    r->result = PO_SIGNIN_LIMITED;
    r->retry_after_s = 0;
    memset(&r->ses, 0, sizeof r->ses);
    int64_t now = po_clock_now_ms();
    int wait_addr = 0, wait_name = 0;
    /* Both buckets are asked (neither spares the other), before any work. */
    bool by_addr = po_ratelimit_take(si->by_addr, addr && *addr ? addr : "-", now, &wait_addr);
    bool by_name = po_ratelimit_take(si->by_name, name ? name : "", now, &wait_name);
    if (!by_addr || !by_name) {
        r->retry_after_s = wait_addr > wait_name ? wait_addr : wait_name;
        return false;
    }
    if (!name || po_strcpy(r->name, sizeof r->name, name) || len > PO_PASSWORD_MAX) {
        r->name[0] = '\0'; /* no operator has it: still the dummy's work */
        len = len > PO_PASSWORD_MAX ? PO_PASSWORD_MAX : len;
    }
    if (!(r->password = malloc(len + 1))) {
        r->retry_after_s = 1;
        return false;
    }
    memcpy(r->password, password, len);
    r->password[len] = '\0';
    r->len = len;
    if (po_workers_submit(si->pool, NULL, check, r) != PO_OK) { /* a full queue */
        po_secure_zero(r->password, len);
        free(r->password);
        r->password = NULL;
        r->retry_after_s = 1;
        return false;
    }
    return true;
}
