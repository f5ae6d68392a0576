/* units.h - the one parser for every quantity a user writes.
 *
 * Each quantity has a dimension and is stored as an exact unsigned integer
 * in that dimension's base unit:
 *
 *   dimension   base unit     units accepted (bare number means)
 *   bytes       byte          Ki Mi Gi Ti Pi (+B), K/k M G T P (+B), B  (bytes;
 *                             crater_parse_size: error unless 0)
 *   cpu         millicore     m                                    (cores)
 *   duration    nanosecond    ns us ms s m h d, compound "1h30m"   (seconds)
 *   bandwidth   byte/second   B/s KB/s MB/s GB/s TB/s KiB/s MiB/s GiB/s TiB/s
 *                             Kbps Mbps Gbps Tbps            (error: no unit)
 *   iops        op/second     k K M                                (ops)
 *
 * Decimal prefixes are powers of 1000 and binary ones powers of 1024, so
 * "20000MB" is 20,000,000,000 bytes (19073.49 MiB), never 20000 MiB.
 * Numbers are decimal with an optional fraction and exponent ("1.5Gi",
 * "2e3m"); the product is computed exactly in 128-bit integers and a
 * fractional remainder is rounded UP to the next base unit (0.3Gi is
 * 322122548 bytes), as Kubernetes does. Negative numbers, NaN, infinity,
 * empty strings, results above UINT64_MAX and units of another dimension
 * are errors whose text names the problem ("'GB/s' is a bandwidth unit,
 * expected a memory size").
 *
 * Pure functions; no allocation.
 */
#ifndef CRATER_UNITS_H
#define CRATER_UNITS_H

#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"

typedef enum crater_dim {
    CRATER_DIM_BYTES,
    CRATER_DIM_CPU,
    CRATER_DIM_DURATION,
    CRATER_DIM_BANDWIDTH,
    CRATER_DIM_IOPS,
    CRATER_DIM_MAX
} crater_dim_t;

/* Parse s as a quantity of dimension dim into *out (base units).
 * On error *out is untouched and err->errnum is CRATER_EUNIT. */
int crater_parse_quantity(const char *s,
                          crater_dim_t dim,
                          uint64_t *out,
                          crater_error_t *err);

int crater_parse_bytes(const char *s, uint64_t *out, crater_error_t *err);
/* A size a person wrote (a job's memory, --mem, a quota): as
 * crater_parse_bytes() but a bare number other than 0 is refused with
 * "'512' has no unit: write 512Mi or 512M". Slurm users mean megabytes by
 * --mem 512; taking it as 512 bytes got their jobs OOM-killed. Hardware
 * files, config and the normalised spec use crater_parse_bytes(). */
int crater_parse_size(const char *s, uint64_t *out, crater_error_t *err);
int crater_parse_millicpu(const char *s, uint64_t *out, crater_error_t *err);
int crater_parse_duration_ns(const char *s, uint64_t *out, crater_error_t *err);
int crater_parse_bandwidth(const char *s, uint64_t *out, crater_error_t *err);
int crater_parse_iops(const char *s, uint64_t *out, crater_error_t *err);

/* "memory size", "CPU quantity", ... for messages. Static string. */
const char *crater_dim_name(crater_dim_t dim);

/* Render v for humans in the largest unit that represents it exactly
 * ("20Gi", "1500m", "90s", "2039GB/s"). buf of at least 32 bytes.
 * Returns buf. */
char *crater_format_quantity(uint64_t v,
                             crater_dim_t dim,
                             char *buf,
                             size_t size);

#define CRATER_MIB (1024ull * 1024ull)
/* Byte counts to MiB: requests round up, capacities round down. */
static inline uint64_t crater_bytes_to_mib_ceil(uint64_t b)
{
    return b / CRATER_MIB + (b % CRATER_MIB != 0);
}
static inline uint64_t crater_bytes_to_mib_floor(uint64_t b)
{
    return b / CRATER_MIB;
}

#endif /* CRATER_UNITS_H */
