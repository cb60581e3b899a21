/* fuzz_json.c — the parser of JSON from outside (src/channel/json.c),
 * differentially against jansson's json_loadb: arbitrary bytes never crash
 * it; what it accepts jansson accepts too, as an equal value (and encodes
 * and parses back to an equal value); what jansson accepts it accepts too,
 * except nesting beyond PO_JSON_DEPTH_MAX (jansson allows 2048) and text
 * with a NUL byte (jansson takes a NUL for the end of its input). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > PO_BODY_MAX)
        return 0;
    json_t *ours = NULL, *back = NULL;
    char err[PO_ERRBUF_SIZE];
    po_err rc = po_json_parse((const char *)data, size, &ours, err, sizeof err);
    json_t *theirs = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (rc == PO_OK) {
        if (!theirs || !json_equal(ours, theirs))
            abort();
        char *text = json_dumps(ours, JSON_COMPACT);
        if (!text || po_json_parse(text, strlen(text), &back, err, sizeof err) ||
            !json_equal(ours, back))
            abort();
        free(text);
    } else if (theirs && rc != PO_ERR_LIMIT && !memchr(data, '\0', size)) {
        abort();
    } else if (rc != PO_ERR_INVALID && rc != PO_ERR_LIMIT) {
        abort();
    }
    json_decref(ours);
    json_decref(back);
    json_decref(theirs);
    return 0;
}
