/*
 * crypto_int.h — private to src/crypto: what crypto.c's password policy
 * reads from the list of the commonest passwords (password_list.c).
 */
#ifndef PO_CRYPTO_INT_H
#define PO_CRYPTO_INT_H

#include "crypto.h"

/* Whether core (lower case, no digits or symbols around it, leetspeak
 * undone) is one of the passwords people choose most. */
bool po_password_is_common(const char *core);

#endif
