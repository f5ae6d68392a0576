/* fuzz_common.h - shared driver for the parser fuzz targets.
 *
 * Each target parses the input as a document and runs one decoder over
 * every root. Besides "no crash, no leak, no UB" (the sanitizers), each
 * checks a property: whatever decodes must encode to a document that
 * decodes again to the same normalised form. A violation aborts, which
 * libFuzzer records as a crash.
 */
#ifndef CRATER_FUZZ_COMMON_H
#define CRATER_FUZZ_COMMON_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "crater/dec.h"
#include "crater/doc.h"

/* Decode root; on success return the normalised form (new reference). */
typedef json_t *(*fuzz_decode_f)(crater_dec_t *d, json_t *root);

static void fuzz_round_trip(json_t *first, fuzz_decode_f decode)
{
    crater_error_t err;
    crater_dec_t d;
    json_t *second;

    crater_dec_init(&d, NULL, 0, &err);
    second = decode(&d, first);
    if (!second || !json_equal(first, second)) {
        char *a = json_dumps(first, JSON_SORT_KEYS);
        fprintf(stderr,
                "round trip failed: %s\nfirst: %s\n",
                second ? "documents differ" : err.text,
                a ? a : "?");
        free(a);
        abort();
    }
    json_decref(second);
}

static int fuzz_run(const uint8_t *data, size_t size, fuzz_decode_f decode)
{
    crater_doc_t *doc = NULL;
    crater_error_t err;

    if (crater_doc_parse((const char *)data, size, "fuzz", &doc, &err) < 0)
        return 0;
    for (size_t i = 0; i < crater_doc_count(doc); i++) {
        crater_dec_t d;
        json_t *normal;

        crater_dec_init(&d, doc, i, &err);
        normal = decode(&d, crater_doc_root(doc, i));
        if (normal)
            fuzz_round_trip(normal, decode);
        json_decref(normal);
    }
    crater_doc_destroy(doc);
    return 0;
}

#endif /* CRATER_FUZZ_COMMON_H */
