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
 * {vendor, model, ...fields}; an entry whose model is known replaces the
 * fields it names, an unknown model is added. GPU entries are those with
 * GPU fields (memory, sm_count, ...), CPU entries those with CPU fields
 * (ipc_baseline, memory_bandwidth_gbps, ...). On error kb is unchanged. */
int crater_kb_override(crater_kb_t *kb, crater_dec_t *d, json_t *list);

/* Canonical form of a model name: lowercase, "nvidia"/"tesla" prefixes
 * dropped, spaces and '_' turned into '-'. Writes into buf (size bytes). */
char *crater_kb_normalize(const char *name, char *buf, size_t size);

/* The whole table as JSON (base units), for `crater kb` and docs. */
json_t *crater_kb_encode(const crater_kb_t *kb);

#endif /* CRATER_KB_H */
