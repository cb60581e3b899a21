/*
 * options.h — `payonce serve`'s options, declared once (options.c).
 *
 * One table says, for every option, its type, default, bounds, what it
 * means and which field of struct po_gateway_cfg it fills. From it come
 * the gateway's defaults (po_gateway_cfg_init) and bounds (po_gateway_open)
 * and, in cli/cmd_config.c, the command line's checks, the config file's
 * parser, `payonce config check`, `payonce config doc`
 * (docs/configuration.md) and the options' lines in `serve --help`.
 * Part of service.h (which includes every service header).
 */
#ifndef PO_SERVICE_OPTIONS_H
#define PO_SERVICE_OPTIONS_H

#include "../../core/core.h"
#include "gateway.h"

#include <stddef.h>

enum po_opt_type { PO_OPT_INT, PO_OPT_STR, PO_OPT_FLAG };
struct po_option {
    const char *name; /* the flag without "--", and the config file's key */
    enum po_opt_type type;
    int64_t min, max, dflt; /* PO_OPT_INT */
    const char *sdflt;      /* PO_OPT_STR: the default as shown */
    const char *arg;        /* what the value is, for help */
    const char *doc;
    bool secret; /* shown redacted by config check */
    /* The field of struct po_gateway_cfg it sets (size 0: the command
     * line's own, e.g. the master key's file). */
    size_t off, size;
};

/* The table, in the order help and the docs show it. */
extern const struct po_option po_options[];
extern const int po_options_count;
/* NULL when there is no such option. */
const struct po_option *po_option_find(const char *name);
/* Sets the option's field of cfg (PO_OPT_INT with a field; the value is
 * not checked here: po_gateway_open checks every field). */
void po_option_set(struct po_gateway_cfg *cfg, const struct po_option *o, int64_t v);
/* The same for a PO_OPT_STR with a field: v (NULL: none) must outlive cfg. */
void po_option_set_str(struct po_gateway_cfg *cfg, const struct po_option *o, const char *v);
/* The option's field of cfg (PO_OPT_INT with a field). */
int64_t po_option_get(const struct po_gateway_cfg *cfg, const struct po_option *o);

#endif
