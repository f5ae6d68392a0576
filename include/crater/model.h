/* model.h - the capability model (RCDL): a node is a set of typed
 * resources with attributes, not a GPU count.
 *
 * These are plain data structs shared by the codecs, the scheduler, the
 * agent and the simulator. All quantities are exact integers in base
 * units: bytes, bytes/second, millicores, nanoseconds where not named
 * otherwise. Strings are malloc'd and owned by the struct that holds them;
 * crater_node_clear() frees everything a node holds (but not the node
 * itself), crater_cluster_destroy() a whole cluster.
 */
#ifndef CRATER_MODEL_H
#define CRATER_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CRATER_MAX_GPUS_PER_NODE 64 /* nvlink_peers is a 64-bit mask */
#define CRATER_NAME_MAX 253         /* node and job names (DNS subdomain) */

typedef enum crater_res_type {
    CRATER_RES_GPU,
    CRATER_RES_CPU,
    CRATER_RES_MEMORY,
    CRATER_RES_STORAGE,
} crater_res_type_t;

typedef enum crater_iface {
    CRATER_IFACE_UNKNOWN,
    CRATER_IFACE_NVME,
    CRATER_IFACE_SATA,
    CRATER_IFACE_SAS,
    CRATER_IFACE_VIRTIO,
    CRATER_IFACE_NETWORK,
} crater_iface_t;

typedef struct crater_gpu {
    char *uuid;   /* "GPU-..." as NVML reports it; generated when absent */
    char *vendor; /* "nvidia" */
    char *model;  /* knowledge-base key, e.g. "a100-sxm4-80gb" */
    uint64_t memory_bytes;
    uint32_t sm_count;
    uint32_t compute_cap;      /* major * 10 + minor: 80 is sm_80 */
    uint64_t hbm_bandwidth;    /* device memory bandwidth, bytes/s */
    uint64_t nvlink_bandwidth; /* total NVLink bandwidth, bytes/s; 0 none */
    double fp16_tflops;        /* dense FP16 tensor TFLOPs */
    char *pci_bus_id;          /* "0000:07:00.0" */
    char *upstream;            /* PCIe switch / root complex it hangs off */
    int numa_node;             /* -1 when unknown */
    uint64_t nvlink_peers;     /* bit i: NVLink to GPU i of the same node */
} crater_gpu_t;

typedef struct crater_cpu { /* one socket or NUMA domain's cores */
    char *vendor;           /* "amd", "intel" */
    char *model;            /* knowledge-base key, e.g. "epyc-7763" */
    uint32_t cores;         /* physical cores */
    uint32_t threads;       /* hardware threads (>= cores) */
    int numa_node;
    double ipc_baseline;       /* relative IPC, from the knowledge base */
    uint64_t memory_bandwidth; /* bytes/s */
    char *pci_root;            /* root complex id, e.g. "0000:00:01.0" */
} crater_cpu_t;

typedef struct crater_mem { /* memory of one NUMA node */
    int numa_node;
    uint64_t capacity;  /* bytes */
    uint64_t bandwidth; /* bytes/s; 0 unknown */
    uint32_t latency_ns;
} crater_mem_t;

typedef struct crater_storage {
    char *device; /* "nvme0n1" */
    char *model;
    crater_iface_t iface;
    uint64_t capacity;  /* bytes */
    uint64_t iops;      /* random 4k read IOPS */
    uint64_t bandwidth; /* sequential read, bytes/s */
    uint32_t latency_us;
    uint32_t queue_depth;
    bool rotational;
    int numa_node;
} crater_storage_t;

typedef struct crater_kv {
    char *key;
    char *value;
} crater_kv_t;

typedef enum crater_taint_effect {
    CRATER_TAINT_NO_SCHEDULE,
    CRATER_TAINT_PREFER_NO_SCHEDULE,
    CRATER_TAINT_NO_EXECUTE,
} crater_taint_effect_t;

typedef struct crater_taint {
    char *key;
    char *value; /* may be NULL */
    crater_taint_effect_t effect;
} crater_taint_t;

typedef enum crater_samples {
    CRATER_SAMPLES_REAL,      /* agent samples this machine */
    CRATER_SAMPLES_SYNTHETIC, /* deterministic synthetic samples */
} crater_samples_t;

/* The node label an agent sets to the container runtimes it can run
 * (comma-separated, "podman"), detected at its start: a job with an image
 * is placed only on a node that has it (the runtime filter,
 * doc/containers.md). A hardware file may set it for the simulator. */
#define CRATER_LABEL_RUNTIMES "crater.io/runtimes"

typedef struct crater_node {
    char *name;
    crater_kv_t *labels;
    size_t nlabels;
    crater_taint_t *taints;
    size_t ntaints;
    crater_gpu_t *gpus;
    size_t ngpus;
    crater_cpu_t *cpus;
    size_t ncpus;
    crater_mem_t *mems;
    size_t nmems;
    crater_storage_t *storage;
    size_t nstorage;
    char **datasets; /* NULL-terminated; cached datasets; may be NULL */
    crater_samples_t samples;
} crater_node_t;

typedef struct crater_cluster {
    crater_node_t *nodes;
    size_t nnodes;
} crater_cluster_t;

/* Free everything n holds and zero it. NULL is accepted. */
void crater_node_clear(crater_node_t *n);
/* Free a cluster from crater_hw_* and its nodes. NULL is accepted. */
void crater_cluster_destroy(crater_cluster_t *c);

/* Totals over a node's resources. cpu_milli counts hardware threads
 * (cores where threads is 0), 1000 per thread; memory_bytes sums mems[]. */
uint64_t crater_node_cpu_milli(const crater_node_t *n);
uint64_t crater_node_memory_bytes(const crater_node_t *n);

const char *crater_iface_name(crater_iface_t iface);
/* "nvme" -> CRATER_IFACE_NVME; -1 when unknown. */
int crater_iface_parse(const char *name);

#endif /* CRATER_MODEL_H */
