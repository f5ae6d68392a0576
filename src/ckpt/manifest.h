/* manifest.h - the checkpoint manifest: encoding and strict parsing.
 *
 * The manifest is a small text file, one record per line (doc/checkpoint.md
 * "Format"); its last line is the SHA-256 of every byte before it, so a
 * torn or bit-flipped manifest is refused rather than half-read. The parser
 * accepts exactly what the encoder (or python/crater_ckpt) writes: fixed
 * line order, canonical decimals, percent-encoded names, chunk lengths
 * that add up. It is fed files from disk, which may hold anything.
 *
 * A parsed or built manifest owns its arrays and names; free them with
 * crater__ckpt_manifest_free().
 */
#ifndef CRATER_CKPT_MANIFEST_H
#define CRATER_CKPT_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "crater/ckpt.h"
#include "crater/error.h"

#define CRATER__CKPT_MAGIC "crater-ckpt"
#define CRATER__CKPT_MANIFEST_MAX (256u << 20)
#define CRATER__CKPT_ENTRIES_MAX (1u << 20)

typedef struct crater__ckpt_chunk {
    char hex[CRATER_CKPT_HASH_HEX];
    uint32_t len;
} crater__ckpt_chunk_t;

typedef struct crater__ckpt_mentry {
    char *name;    /* decoded; owned */
    uint64_t size; /* bytes */
    size_t first;  /* index of its first chunk in chunks */
    size_t nchunks;
} crater__ckpt_mentry_t;

typedef struct crater__ckpt_manifest {
    uint64_t step;
    int64_t parent; /* -1: none */
    uint32_t chunk_size;
    size_t nentries;
    crater__ckpt_mentry_t *entries;
    size_t nchunks;
    crater__ckpt_chunk_t *chunks;
    char digest[CRATER_CKPT_HASH_HEX];
} crater__ckpt_manifest_t;

/* Parse text (len bytes) into m (zeroed first). On error m holds nothing. */
int crater__ckpt_manifest_parse(const char *text,
                                size_t len,
                                crater__ckpt_manifest_t *m,
                                crater_error_t *err);
/* Encode m; sets m->digest. Returns a malloc()ed text (caller frees) and
 * its length in *len; NULL on allocation failure. */
char *crater__ckpt_manifest_encode(crater__ckpt_manifest_t *m, size_t *len);
void crater__ckpt_manifest_free(crater__ckpt_manifest_t *m);

/* Percent-encode name (bytes outside [A-Za-z0-9._-] become %XX) into out
 * (size bytes); -1 when it does not fit. */
int crater__ckpt_name_encode(const char *name, char *out, size_t size);

#endif /* CRATER_CKPT_MANIFEST_H */
