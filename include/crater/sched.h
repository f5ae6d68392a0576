/* sched.h - the scheduling core: cluster state, filter -> score -> reserve,
 * commit and release. Pure: no I/O, no wall clock, no globals. The control
 * plane and the simulator drive the same object; time and randomness come
 * in through crater_sched_env_t.
 *
 * Model. Nodes are added from their capability model (crater_node_t) and
 * get dense ids 0..n-1. Each replica of a job is compiled once into a
 * crater_request_t; crater_sched_place() finds the best node for it and
 * fills a crater_placement_t (node, GPU indices with the MiB charged on
 * each, NUMA node, CPU/memory/disk amounts, storage device) without
 * changing anything; crater_sched_commit() charges a placement to the
 * cluster under a task id and crater_sched_release() returns it exactly.
 *
 * GPU memory is accounted in MiB per GPU. A slice request of m MiB costs
 * m + gpuContextOverhead on each GPU it uses; a GPU holds at most
 * maxTasksPerGPU tasks and at most overcommitRatio x its memory in
 * charges; charges beyond physical memory are admitted only while the
 * GPU's *measured* use plus the new slice stays under safetyWatermark x
 * physical. A whole-GPU request needs GPUs with no task at all.
 *
 * Speed. Nodes in identical state (same static type, same allocation and
 * measurements) give identical filter and score results for any request,
 * so the core groups them into classes and evaluates one representative
 * per class, after a cheap per-class capacity precheck. Ties go to the
 * lowest node id in both the fast path and the brute-force path
 * (crater_sched_place_bruteforce), which must make the same decision;
 * tests and `crater bench sched` compare the two.
 *
 * Ownership: the sched copies what it needs from nodes and config; the
 * request's spec pointer is borrowed for the duration of a call.
 */
#ifndef CRATER_SCHED_H
#define CRATER_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "crater/config.h"
#include "crater/error.h"
#include "crater/jobspec.h"
#include "crater/kb.h"
#include "crater/model.h"

#define CRATER_SCHED_MAX_NUMA 8
#define CRATER_SCHED_MAX_MODELS               \
    63 /* distinct GPU models in one cluster; \
          bit 63 of a model mask means "none" */
#define CRATER_SCHED_NO_NODE UINT32_MAX

typedef struct crater_sched crater_sched_t;

typedef struct crater_sched_env {
    uint64_t (*now_ms)(void *arg); /* current time, ms */
    uint64_t (*random)(void *arg); /* uniform 64-bit random numbers */
    void *arg;
} crater_sched_env_t;

/* Plugin weights and switches the core reads besides crater_config_t. */
typedef struct crater_sched_weights {
    double joint;    /* Σ w_r (1 - util_r) after placement */
    double packing;  /* fragmentation-aware best fit */
    double topology; /* GPUs on few PCIe switches / NUMA nodes */
    double locality; /* preferred dataset present */
    double low_util; /* measured GPU utilisation low (warm replicas) */
} crater_sched_weights_t;

/* What one replica needs, compiled from a job spec. */
typedef struct crater_request {
    uint32_t gpus;      /* GPUs per replica; 0 = CPU-only */
    uint32_t slice_mib; /* per-GPU slice; 0 = whole GPUs */
    uint64_t cpu_milli;
    uint64_t mem_bytes;
    uint64_t disk_iops;
    uint64_t disk_bw; /* bytes/s */
    crater_iface_t disk_iface;
    uint32_t disk_max_latency_us;
    uint64_t model_mask; /* bit i: sched model id i allowed; 0 = any */
    char *vendor;        /* borrowed; NULL = any */
    uint32_t min_sm;
    uint32_t min_cc;
    uint64_t min_hbm_bw;
    crater_nvlink_req_t nvlink;
    crater_numa_policy_t numa;
    int32_t priority;
    bool preemptible;
    bool prefer_low_util;
    const crater_jobspec_t *spec; /* selectors, tolerations, dataset;
                                     borrowed, may be NULL */
} crater_request_t;

typedef struct crater_placement {
    uint32_t node;
    uint32_t ngpus;
    uint8_t gpu[CRATER_MAX_GPUS_PER_NODE];      /* local GPU indices */
    uint32_t gpu_mib[CRATER_MAX_GPUS_PER_NODE]; /* MiB charged on each */
    bool whole;                                 /* whole GPUs held */
    int numa;                                   /* -1: not pinned */
    uint64_t cpu_milli;
    uint64_t mem_bytes;
    uint64_t numa_cpu[CRATER_SCHED_MAX_NUMA]; /* where cpu_milli is charged */
    uint64_t numa_mem[CRATER_SCHED_MAX_NUMA]; /* where mem_bytes is charged */
    uint64_t disk_iops;
    uint64_t disk_bw;
    int storage; /* index into the node's storage, -1 none */
    double score;
} crater_placement_t;

/* Measured utilisation of a node, fractions in [0, 1]. */
typedef struct crater_node_util {
    double cpu, mem, disk;
    double gpu[CRATER_MAX_GPUS_PER_NODE];            /* SM utilisation */
    uint32_t gpu_used_mib[CRATER_MAX_GPUS_PER_NODE]; /* measured memory */
    double pcie[CRATER_MAX_GPUS_PER_NODE]; /* per upstream id: bandwidth
                                              use of that PCIe root */
} crater_node_util_t;

/* Create an empty cluster. cfg and kb are copied from / read during the
 * call (kb is used to compile requests: keep it alive as long as the
 * sched). env may be NULL (time 0, fixed seed). NULL on ENOMEM. */
crater_sched_t *crater_sched_create(const crater_config_t *cfg,
                                    const crater_kb_t *kb,
                                    const crater_sched_env_t *env);
void crater_sched_destroy(crater_sched_t *s);

void crater_sched_set_weights(crater_sched_t *s,
                              const crater_sched_weights_t *w);
crater_sched_weights_t crater_sched_get_weights(const crater_sched_t *s);

/* Add a node; returns its id (>= 0) or -1. The node is copied. */
int crater_sched_add_node(crater_sched_t *s,
                          const crater_node_t *node,
                          crater_error_t *err);
uint32_t crater_sched_node_count(const crater_sched_t *s);
const crater_node_t *crater_sched_node(const crater_sched_t *s, uint32_t id);
/* Node by name; CRATER_SCHED_NO_NODE when unknown. */
uint32_t crater_sched_find_node(const crater_sched_t *s, const char *name);

/* Health: a node that is not ready or is cordoned gets no new work. */
int crater_sched_set_ready(crater_sched_t *s, uint32_t node, bool ready);
int crater_sched_set_cordoned(crater_sched_t *s, uint32_t node, bool cordon);
/* Measured utilisation (from agents; settable in tests). */
int crater_sched_set_util(crater_sched_t *s,
                          uint32_t node,
                          const crater_node_util_t *u);

/* Compile one replica of spec into req (req->spec = spec, borrowed).
 * Errors: an unknown GPU model etc., naming the field. */
int crater_request_from_spec(const crater_sched_t *s,
                             const crater_jobspec_t *spec,
                             crater_request_t *req,
                             crater_error_t *err);

/* Find the best placement. 0 on success; -1 with CRATER_EUNSCHED when
 * no node fits (see explain.h for why). Changes nothing. */
int crater_sched_place(crater_sched_t *s,
                       const crater_request_t *req,
                       crater_placement_t *out,
                       crater_error_t *err);
/* Same decision by scanning every node: the reference for tests and
 * benchmarks. */
int crater_sched_place_bruteforce(crater_sched_t *s,
                                  const crater_request_t *req,
                                  crater_placement_t *out,
                                  crater_error_t *err);

/* Charge p to the cluster as task id (unique, caller-chosen). req gives
 * the priority/preemptibility recorded for the preemption planner. */
int crater_sched_commit(crater_sched_t *s,
                        uint64_t task,
                        const crater_request_t *req,
                        const crater_placement_t *p,
                        crater_error_t *err);
/* Return task's charges exactly; -1 with CRATER_ENOENT if unknown. */
int crater_sched_release(crater_sched_t *s, uint64_t task, crater_error_t *err);

#endif /* CRATER_SCHED_H */
