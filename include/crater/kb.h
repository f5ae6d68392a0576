/* kb.h - the hardware knowledge base: known GPU and CPU models and their
 * datasheet capabilities.
 *
 * crater_kb_create() returns the built-in table (values from vendor
 * datasheets, cited in kb.c). Config can override or add entries
 * (hardware_knowledge_base.override) through crater_kb_override(). The
 * knowledge base is an object, not a global: the daemon, the agent and the
 * simulator each hold one. Lookups normalise names, so "NVIDIA A100-SXM4-80GB"
 * (NVML), "a100-sxm4-80gb" and "A100 SXM4 80GB" find the same entry.
 *
 * Entries and their strings are owned by the kb; pointers returned by
 * lookups stay valid until crater_kb_destroy() or the next override.
 */
#ifndef CRATER_KB_H
#define CRATER_KB_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "crater/dec.h"
#include "crater/error.h"

typedef struct crater_kb_gpu {
    char *key;     /* canonical model key, e.g. "a100-sxm4-80gb" */
    char *vendor;  /* "nvidia" */
    char *aliases; /* '|'-separated other names (NVML names, trace names) */
    uint64_t memory_bytes;
    uint32_t sm_count;
    uint32_t compute_cap;      /* major * 10 + minor */
    uint64_t mem_bandwidth;    /* bytes/s */
    uint64_t nvlink_bandwidth; /* bytes/s total; 0 when none */
    double fp16_tflops;        /* dense FP16 tensor */
    char *form_factor;         /* "sxm", "pcie" */
} crater_kb_gpu_t;

typedef struct crater_kb_cpu {
    char *key;    /* "epyc-7763" */
    char *vendor; /* "amd", "intel" */
    char *aliases;
    uint32_t cores;
    double ipc_baseline;       /* relative to a Skylake-SP core = 1.0 */
    uint64_t memory_bandwidth; /* bytes/s per socket */
} crater_kb_cpu_t;

typedef struct crater_kb crater_kb_t;

/* The built-in table. NULL on allocation failure. */
crater_kb_t *crater_kb_create(void);
void crater_kb_destroy(crater_kb_t *kb);

/* Lookups by any known name; NULL when unknown. */
const crater_kb_gpu_t *crater_kb_gpu(const crater_kb_t *kb, const char *name);
const crater_kb_cpu_t *crater_kb_cpu(const crater_kb_t *kb, const char *name);

size_t crater_kb_gpu_count(const crater_kb_t *kb);
const crater_kb_gpu_t *crater_kb_gpu_at(const crater_kb_t *kb, size_t i);
size_t crater_kb_cpu_count(const crater_kb_t *kb);
const crater_kb_cpu_t *crater_kb_cpu_at(const crater_kb_t *kb, size_t i);

/* Apply hardware_knowledge_base.override: a list of entries, each
 * {type: gpu|cpu, vendor, model, ...fields} (schema in doc/hardware.md);
 * an entry whose model is known replaces the fields it names (aliases are
 * appended), an unknown model is added. d's path is where list sits;
 * errors name the entry and field. On error kb is unchanged. list NULL
 * is a no-op. */
int crater_kb_override(crater_kb_t *kb, crater_dec_t *d, json_t *list);

/* Decoders shared by knowledge-base overrides and hardware files.
 * Compute capability: 80, 8.0, "8.0", "80" or "sm_80" -> 80.
 * GB/s: a plain number of decimal GB/s, converted exactly (204.8 ->
 * 204,800,000,000 B/s); strings are refused (use a quantity field). */
int crater_kb_dec_compute_cap(crater_dec_t *d, json_t *v, uint32_t *out);
int crater_kb_dec_gbps(crater_dec_t *d, json_t *v, uint64_t *out);

/* Canonical form of a model name: surrounding blanks trimmed, lowercase,
 * leading "nvidia "/"tesla " dropped, each run of spaces and '_' turned
 * into one '-'. Writes into buf (size bytes); NULL when name is NULL or
 * the result does not fit. */
char *crater_kb_normalize(const char *name, char *buf, size_t size);

/* The whole table as JSON (base units), for `crater kb` and docs. */
json_t *crater_kb_encode(const crater_kb_t *kb);

#endif /* CRATER_KB_H */
