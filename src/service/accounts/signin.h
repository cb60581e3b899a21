/*
 * signin.h — the console's sign-in, off the payment path (signin.c).
 *
 * A password check is scrypt: ~0.1 s of a core and 32 MiB. It runs on a
 * pool of its own — PO_SIGNIN_THREADS threads at a lower scheduling
 * priority (so at most PO_SIGNIN_THREADS x 32 MiB, and payments preempt
 * it), at most PO_SIGNIN_QUEUE waiting — with a database connection of its
 * own: never one of the gateway's connections, never a tenant's worker.
 * Before anything is queued, the attempt takes a token from two buckets,
 * the source address's and the name's (whether the name exists or not):
 * an empty bucket is 429 with Retry-After, with no hash, no query.
 * Part of service.h (which includes every service header).
 */
#ifndef PO_SERVICE_SIGNIN_H
#define PO_SERVICE_SIGNIN_H

#include "../../core/core.h"
#include "operators.h"

#define PO_SIGNIN_THREADS 2
#define PO_SIGNIN_QUEUE 8
#define PO_SIGNIN_NICE 10 /* added to the threads' nice value */
/* per source address: a burst, then so many a minute */
#define PO_SIGNIN_ADDR_BURST 30
#define PO_SIGNIN_ADDR_PER_MIN 30
/* per name (any name asked for, known or not) */
#define PO_SIGNIN_NAME_BURST 10
#define PO_SIGNIN_NAME_PER_MIN 10
#define PO_SIGNIN_KEYS 4096 /* buckets remembered, each table */

enum po_signin_result {
    PO_SIGNIN_OK,          /* ses holds the new session */
    PO_SIGNIN_REFUSED,     /* unknown operator, wrong password or locked: one answer */
    PO_SIGNIN_LIMITED,     /* over a rate limit or the queue full: retry_after_s */
    PO_SIGNIN_UNAVAILABLE, /* the database did not answer */
};

struct po_signin_req {
    /* in: the name and password are copied by po_signin_start */
    void (*done)(struct po_signin_req *r); /* from a sign-in thread, once */
    void *user;
    /* out */
    enum po_signin_result result;
    int retry_after_s;
    struct po_session ses;
    /* internal */
    struct po_signin *si;
    char name[PO_OPERATOR_MAX + 1];
    char *password;
    size_t len;
};

struct po_signin;
po_err po_signin_open(const char *db_url, struct po_signin **out, char *err,
                      size_t errcap) PO_MUST_CHECK;
/* Lets queued checks finish, then frees. NULL is fine. */
void po_signin_close(struct po_signin *si);
/* Rate-limits (addr: the client's address) and queues the check of name's
 * password; true when r->done will be called from the pool, false when
 * decided now: r->result LIMITED with retry_after_s (a bucket empty, the
 * queue full). r must stay valid until done. */
bool po_signin_start(struct po_signin *si, const char *addr, const char *name, const char *password,
                     size_t len, struct po_signin_req *r);

#endif
