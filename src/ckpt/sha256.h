/* sha256.h - SHA-256 (FIPS 180-4), streaming, for libcrater-ckpt.
 *
 * The checkpoint library may depend on libc only, so it carries this small
 * implementation (checked against the FIPS and NIST vectors in
 * tests/unit/test_ckpt.c). Plain C, one block at a time: about 200-400 MB/s,
 * enough for checkpoints that are written to disk anyway.
 */
#ifndef CRATER_CKPT_SHA256_H
#define CRATER_CKPT_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct crater__sha256 {
    uint32_t h[8];
    uint64_t len; /* bytes hashed so far */
    uint8_t buf[64];
    size_t fill;
} crater__sha256_t;

void crater__sha256_init(crater__sha256_t *s);
void crater__sha256_update(crater__sha256_t *s, const void *data, size_t n);
void crater__sha256_final(crater__sha256_t *s, uint8_t out[32]);
/* 32 bytes to 64 lowercase hex digits and a NUL. */
void crater__sha256_hex(const uint8_t digest[32], char hex[65]);

#endif /* CRATER_CKPT_SHA256_H */
