/*
 * listen.h — the simulator's two HTTP servers (the channel's APIs in
 * server.c, the tenant's webhook receiver in receiver.c) listen the same
 * way: on 127.0.0.1 only, a thread per connection, bounded.
 */
#ifndef PO_SIM_LISTEN_H
#define PO_SIM_LISTEN_H

#include "../core/core.h"

#include <microhttpd.h>

/* Starts a daemon on listen ("127.0.0.1:PORT"; port 0 = any) with handler
 * and completed (both given cls); NULL with err set when listen is not a
 * loopback address or the port cannot be had. uri_log (NULL: none) sees
 * each request's target as sent, before anything is decoded; what it
 * returns is the request's first *req_cls. */
struct MHD_Daemon *po_sim_listen(const char *listen, MHD_AccessHandlerCallback handler,
                                 MHD_RequestCompletedCallback completed,
                                 void *(*uri_log)(void *cls, const char *uri,
                                                  struct MHD_Connection *c),
                                 void *cls, char *err, size_t errcap);

#endif
