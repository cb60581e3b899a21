/*
 * apikey.h — tenant API keys, only hashes stored (apikey.c).
 * Part of service.h (which includes every service header).
 */
#ifndef PO_SERVICE_APIKEY_H
#define PO_SERVICE_APIKEY_H

#include "../../channel/channel.h"
#include "../../core/core.h"
#include "../../engine/engine.h"
#include "../../runtime/runtime.h"
#include "../../store/store.h"

#include <jansson.h>

/* ---- tenant API keys (apikey.c) ---- */

/* Creates a key for an existing tenant: the whole key is written to key
 * (shown once), only its SHA-256 is stored. */
po_err po_apikey_create(struct po_store *s, const char *tenant, char key[PO_APIKEY_LEN + 1],
                        char key_id[PO_APIKEY_ID_LEN + 1], char *err, size_t errcap) PO_MUST_CHECK;
/* Revokes at once; revoking twice is fine. PO_ERR_NOT_FOUND: no such key. */
po_err po_apikey_revoke(struct po_store *s, const char *tenant, const char *key_id, char *err,
                        size_t errcap) PO_MUST_CHECK;
/* The tenant of a valid, unrevoked key; PO_ERR_NOT_FOUND otherwise. */
po_err po_apikey_auth(struct po_store *s, const char *key,
                      char tenant[PO_ID_MAX + 1]) PO_MUST_CHECK;

#endif
