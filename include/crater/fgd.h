/* fgd.h - the FGD paper's placement protocol (BENCHMARKS.md B1) driven
 * through the scheduler core.
 *
 * One run: the GPU node list becomes a cluster in milli mode (each GPU
 * 1000 units, no context overhead, no overcommit); the pods are shuffled
 * with the seed (Fisher-Yates driven by splitmix64), then pods sampled
 * uniformly with replacement from the shuffled list are appended until
 * the total GPU request (num_gpu x gpu_milli) would pass inflate x the GPU
 * capacity (the sample that would pass it is not added); the pods are
 * placed one at a time with crater_sched_place() + crater_sched_commit()
 * under the chosen policy, and a pod that fits nowhere is dropped. The
 * GPU allocation ratio is recorded at each 1% of arrived workload (GPU
 * request arrived so far / capacity): the first value at or past each
 * step. The policy's random numbers (ties) come from a second splitmix64
 * stream of the same seed, so a run is a pure function of its inputs.
 */
#ifndef CRATER_FGD_H
#define CRATER_FGD_H

#include <stddef.h>
#include <stdint.h>

#include "crater/sim.h"

#define CRATER_FGD_STEPS 131 /* arrived 0%..130% */

typedef struct crater_fgd_opts {
    /* crater_fgd_policy_names(); NULL = "crater" */
    const char *policy;
    uint64_t seed;
    double inflate;     /* 1.3 in the paper; 0 = 1.3 */
    double typical_pct; /* typical pods: shapes making up this % (95) */
} crater_fgd_opts_t;

typedef struct crater_fgd_result {
    double alloc[CRATER_FGD_STEPS]; /* allocated GPU milli / capacity, % */
    double alloc_at_100, alloc_at_130;
    double unallocated_gpus_at_100, unallocated_gpus_at_130;
    double frag_pct_at_100;   /* fragmented GPU milli / capacity, % */
    double frag_ratio_at_100; /* fragmented / idle GPU milli, % */
    uint64_t capacity_milli;
    size_t gpu_nodes, pods, arrived, placed, dropped;
    size_t typical; /* typical pod shapes */
    /* Where the unallocated GPUs are at the end (after 130% arrived), in
     * GPUs: end_room[k] sums the room left on GPUs with k/10 to (k+1)/10
     * of a GPU free (k = 0..9), end_room[10] the wholly free GPUs;
     * end_room_cpu_starved the part of all that is on nodes with less than
     * one free core. */
    double end_room[11];
    double end_room_cpu_starved;
} crater_fgd_result_t;

/* The core's policies and "crater-learned": Crater's policy against the
 * histogram of the pods arrived so far (crater/typhist.h with craterd's
 * default settings) instead of the whole trace's typical pods. Static,
 * NULL-terminated. */
const char *const *crater_fgd_policy_names(void);

/* Typical pod shapes of a trace (the FGD artifact's rule: shapes by
 * (cpu, gpu_milli, num_gpu, gpu_spec), most frequent first, ties by the
 * larger shape, taken until they make up pct % of the pods, shares
 * renormalised to 1). *out is malloc'd (caller frees). */
int crater_fgd_typical(const crater_sched_t *s,
                       const crater_trace_pod_t *pods,
                       size_t n,
                       double pct,
                       crater_typical_t **out,
                       size_t *nout,
                       crater_error_t *err);

/* One run. Nodes without GPUs are skipped (the protocol's GPU node list).
 * kb may be NULL. */
int crater_fgd_run(const crater_trace_node_t *nodes,
                   size_t nnodes,
                   const crater_trace_pod_t *pods,
                   size_t npods,
                   const crater_kb_t *kb,
                   const crater_fgd_opts_t *o,
                   crater_fgd_result_t *res,
                   crater_error_t *err);

/* The protocol's arrival sequence (steps 2-3): indices into pods, shuffled
 * with seed, then draws with replacement appended while the total GPU
 * request stays within limit (GPU milli: inflate x capacity). *order is
 * malloc'd (caller frees); nothing is allocated on failure. */
int crater_fgd_arrivals(const crater_trace_pod_t *pods,
                        size_t n,
                        uint64_t seed,
                        double limit,
                        size_t **order,
                        size_t *norder,
                        crater_error_t *err);

/* splitmix64: the documented PRNG of the protocol. */
uint64_t crater_splitmix64(uint64_t *state);

#endif /* CRATER_FGD_H */
