/*
 * manifest.h — a backup's manifest (manifest.c; issue 44 item 5): what a
 * database holds that decides who may act — operators and their sessions,
 * API keys, webhook endpoints (where events go, signed with what), channel
 * accounts — each row as a digest of its fields, and every tenant's
 * callback chain head and base; MAC'd with a key derived from the master
 * key (or plain SHA-256 without one, and it says so). `payonce backup`
 * puts one in the copy; `payonce restore` recomputes it from the backup
 * and compares, naming every row added, removed or changed.
 * Part of service.h (which includes every service header).
 */
#ifndef PO_SERVICE_MANIFEST_H
#define PO_SERVICE_MANIFEST_H

#include "../../channel/channel.h"
#include "../../core/core.h"
#include "../../crypto/crypto.h"
#include "../../store/store.h"

#include <jansson.h>

/* The manifest of s's rows now (canonical JSON, heap), MAC'd with master's
 * derived key (NULL: plain, key_id "none"). */
po_err po_manifest_make(struct po_store *s, const unsigned char *master, char **out, char *err,
                        size_t errcap) PO_MUST_CHECK;
/* Writes manifest into s's backup_manifest (the one row it keeps). */
po_err po_manifest_store(struct po_store *s, const char *manifest, char *err,
                         size_t errcap) PO_MUST_CHECK;
/* The manifest s carries: *out heap, NULL when it has none. */
po_err po_manifest_load(struct po_store *s, char **out, char *err, size_t errcap) PO_MUST_CHECK;

#define PO_MANIFEST_DIFFS_MAX 64
struct po_manifest_check {
    bool mac_ok;                           /* the MAC matches, with this master key */
    bool other_key;                        /* made under another master key (key ids differ) */
    bool unkeyed;                          /* the manifest was made without a master key */
    char key_id[20];                       /* the manifest's */
    int ndiffs, more;                      /* differences listed, and past the list */
    char diff[PO_MANIFEST_DIFFS_MAX][160]; /* "operator eve: added" */
};
/* Checks manifest (as po_manifest_load gave it) against s's rows now, with
 * master (NULL: only an unkeyed manifest can be checked). PO_OK with *out
 * filled — the copy matches when mac_ok and ndiffs == 0; PO_ERR_INVALID
 * when it is not a manifest (err says why). */
po_err po_manifest_check(struct po_store *s, const unsigned char *master, const char *manifest,
                         struct po_manifest_check *out, char *err, size_t errcap) PO_MUST_CHECK;

#endif
