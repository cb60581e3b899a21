/*
 * account.h — channel accounts: the stored rows (account_store.c) and their cache in memory with
 * its version guard (account_cache.c). Part of service.h (which includes every service header).
 *
 * accounts/ is the bottom room of service/: who may act. It owns the
 * channel accounts (account_store.c, account_cache.c), the tenants' API
 * keys (apikey.h), the console's operators and their sign-in (operators.h,
 * signin.h) and the backup manifest over those rows (manifest.h). It calls
 * no other service room, only the modules below service/.
 */
#ifndef PO_SERVICE_ACCOUNT_H
#define PO_SERVICE_ACCOUNT_H

#include "../../channel/channel.h"
#include "../../core/core.h"
#include "../../engine/engine.h"
#include "../../runtime/runtime.h"
#include "../../store/store.h"

#include <jansson.h>

/* ---- channel accounts in the store (account_store.c) ---- */

/* A tenant's stored account for a channel, secrets unsealed with master
 * (NULL in insecure development mode). PO_ERR_NOT_FOUND when absent;
 * PO_ERR_STORE (detail in err) when it cannot be loaded. */
po_err po_account_fetch(struct po_store *s, const unsigned char *master, const char *tenant,
                        const char *channel, struct po_channel_account *out, char *err,
                        size_t errcap) PO_MUST_CHECK;
/* The same, with the row's version (the cache's guard): the one reader of
 * a stored account's row. */
po_err po_account_fetch_versioned(struct po_store *s, const unsigned char *master,
                                  const char *tenant, const char *channel,
                                  struct po_channel_account *out, int64_t *version, char *err,
                                  size_t errcap) PO_MUST_CHECK;
/* Loads every stored channel account as the gateway will (secrets
 * unsealed with master): report() for each that does not load, with why
 * (a wrong master key, a damaged document). Counts into *checked and
 * *broken; non-OK only when the store cannot be read. */
po_err po_account_check_all(struct po_store *s, const unsigned char *master,
                            void (*report)(void *ctx, const char *tenant, const char *channel,
                                           const char *why),
                            void *ctx, int *checked, int *broken) PO_MUST_CHECK;
/* The stored document of a tenant's account for channel, parsed (*doc
 * NULL when there is none), and when it was last set (updated_at may be
 * NULL). Secrets in it are sealed. */
po_err po_account_doc(struct po_store *s, const char *tenant, const char *channel, json_t **doc,
                      char *updated_at, size_t cap) PO_MUST_CHECK;
/* Whether the tenant has an account for channel, and whether it holds the
 * key that calls the channel's API (refund submission needs it): the
 * merchant's private key, or Stripe's API key; without unsealing. */
po_err po_account_has_merchant_key(struct po_store *s, const char *tenant, const char *channel,
                                   bool *has_account, bool *has_key) PO_MUST_CHECK;
/* Stores a document built by po_channel_account_build (insert or replace),
 * in its own transaction. PO_ERR_NOT_FOUND when the tenant does not exist. */
po_err po_account_save(struct po_store *s, const char *tenant, const char *channel, const char *doc,
                       char *err, size_t errcap) PO_MUST_CHECK;
/* ---- the channel's verification keys kept current (keys_refresh.c) ---- */

struct po_accounts;

struct po_keys_refresh_report {
    int64_t accounts, added, dropped, failed;
};
/*
 * For every account of a channel that hands out its keys (ops keys_fetch:
 * WeChat Pay's platform certificates) and that verifies with certificates
 * (a public-key account has nothing to rotate) and may call the channel:
 * the keys fetched are added to the stored document, expired ones dropped
 * (at now, Unix s), and the document saved only if nobody changed it
 * meanwhile (the version it was read at) — which bumps its version, so
 * serve's account cache takes the new keys. A fetch that is not whole
 * changes nothing (failed counts it; the log says why). Accounts from
 * accounts, serve's cache (NULL: unsealed with master; po_accounts_use).
 */
po_err po_keys_refresh_round(struct po_store *s, struct po_accounts *accounts,
                             const unsigned char *master, int64_t now,
                             struct po_keys_refresh_report *out, char *err,
                             size_t errcap) PO_MUST_CHECK;
/* The keys the channel hands out for account a, fetched (ops keys_fetch)
 * when there is something to refresh — a verifies with certificates (a
 * public-key account has none to rotate) and may call the channel — as the
 * round does it and `channel check` tries it: *out_tried says whether it
 * was; *out as keys_fetch fills it (zeroed when not tried; free it with
 * po_key_fetch_free either way). */
po_err po_keys_fetch_for(const struct po_channel_ops *ch, const struct po_channel_account *a,
                         bool *out_tried, struct po_key_fetch *out) PO_MUST_CHECK;

/* Tenants having an account for channel, in order (heap array of heap
 * strings; free with po_strings_free). */
po_err po_account_tenants(struct po_store *s, const char *channel, char ***out,
                          int *out_n) PO_MUST_CHECK;
void po_strings_free(char **v, int n);
/* ---- channel accounts in memory (account_cache.c) ---- */

struct po_accounts;
struct po_account_ref;
po_err po_accounts_open(const unsigned char *master, struct po_accounts **out) PO_MUST_CHECK;
void po_accounts_close(struct po_accounts *a);
/* The cached account (a reference: release it), or NULL when not cached. */
struct po_account_ref *po_accounts_get(struct po_accounts *a, const char *tenant,
                                       const char *channel);
/* Loads from the store and caches it (*out: a reference). PO_ERR_NOT_FOUND
 * when absent; PO_ERR_STORE (err) when stored but unusable. */
po_err po_accounts_load(struct po_accounts *a, struct po_store *s, const char *tenant,
                        const char *channel, struct po_account_ref **out, char *err,
                        size_t errcap) PO_MUST_CHECK;
/* Compares the stored version of *ref; when it changed, reloads and
 * replaces *ref with the fresh reference (releasing the one it held), and
 * *out_changed says so. PO_ERR_NOT_FOUND when the account is gone; on any
 * error *ref is unchanged. */
po_err po_accounts_recheck(struct po_accounts *a, struct po_store *s, struct po_account_ref **ref,
                           bool *out_changed, char *err, size_t errcap) PO_MUST_CHECK;
/*
 * The account for an outbound call inside serve (creating a payment,
 * closing, querying, refunding, fetching a bill, refreshing keys): the
 * cached reference when its stored version is still current (one indexed
 * read, so a `channel set` is seen by the very next call, in every process
 * over the database), else loaded from the store and cached. a NULL (the
 * offline CLI, tests): a one-off reference unsealed with master; with a
 * cache, the cache's own master key is used and master is ignored.
 * Errors and err as po_account_fetch's (PO_ERR_NOT_FOUND when absent,
 * PO_ERR_STORE when stored but unusable). *out: release it with
 * po_accounts_release. The account behind it is never changed once loaded,
 * so threads may share it (its key objects are only read).
 */
po_err po_accounts_use(struct po_accounts *a, struct po_store *s, const unsigned char *master,
                       const char *tenant, const char *channel, struct po_account_ref **out,
                       char *err, size_t errcap) PO_MUST_CHECK;
/* Accounts unsealed from the store into the cache since it opened (0 for
 * NULL): payonce_account_loads_total. */
int64_t po_accounts_loads(struct po_accounts *a);
/* The stored version the reference was loaded at. */
int64_t po_account_version(const struct po_account_ref *r);
/* The token of the account reference that verified an event, for the
 * committer's guard. */
void po_accounts_token(const struct po_account_ref *r, struct po_guard_token *out);
/* The committer's guard (po_committer_cfg.guard): a token is stale when
 * its account's stored version differs or the account is gone. One read
 * for the batch. */
po_err po_accounts_guard(struct po_store *s, struct po_guard_token *t, size_t n,
                         void *ctx) PO_MUST_CHECK;
/* Drops every entry whose stored version changed or whose row is gone. */
po_err po_accounts_sweep(struct po_accounts *a, struct po_store *s, int *out_dropped) PO_MUST_CHECK;
const struct po_channel_account *po_account_of(const struct po_account_ref *r);
void po_accounts_release(struct po_account_ref *r);

#endif
