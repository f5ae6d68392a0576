/* bound.h - an upper bound on the GPU allocation that any placement policy
 * can reach on one arrival sequence of the FGD protocol (BENCHMARKS.md B1).
 *
 * The protocol places every pod that fits somewhere when it arrives and
 * never moves one. An offline packing of the same pods is not a bound that
 * says anything here: with 130% of the capacity arrived, an offline packer
 * would skip the 0.81-GPU pods and fill every GPU with whole-GPU pods. The
 * bound below uses the protocol instead:
 *
 * 1. Forced pods. A fractional pod of share s, cpu c and memory m is
 *    dropped only if every node allowed by its gpu_spec is blocked: its CPU
 *    use is above cap - c, or its memory use above cap - m, or every one of
 *    its GPUs has more than 1000 - s used. Blocking costs resources, and
 *    the only resources in use are those of pods that arrived earlier. For
 *    weights l = (l_cpu, l_mem, l_gpu) >= 0, let a node's cost be the
 *    least of l_cpu (cap_cpu - c + 1), l_mem (cap_mem - m + 1) and
 *    l_gpu x its GPU count, and a pod's worth the largest of l_cpu cpu,
 *    l_mem mem and l_gpu x its blocking power (num_gpu for whole GPUs,
 *    min(1, share / (1001 - s)) for a share: a GPU is blocked only when
 *    its pods' powers sum to 1 or more). If the costs of all allowed nodes
 *    sum to more than the worth of all earlier arrivals, no history blocks
 *    them all (each placed pod works for one node, in one mode at a time),
 *    so every policy places the pod. The sums only grow with the arrival
 *    index, so per pod shape the forced pods are a prefix of its arrivals;
 *    a grid of weights finds the longest prefix it can certify.
 * 2. Holes. A forced pod of share s > 500 has a GPU to itself among such
 *    pods, and the 1000 - s left on that GPU can only hold shares of at
 *    most 1000 - s. The most all arrived small shares can fill (a
 *    fractional matching, smallest holes first: exact for nested
 *    eligibility) is subtracted from the holes; the rest is idle under
 *    every policy.
 * 3. First drop. Pods of a shape above half a GPU past the forced prefix
 *    may be dropped, but the first drop costs: once pod p fits nowhere,
 *    no later pod that needs at least p's CPU, memory and GPU room (any
 *    whole-GPU pod does, for the room) on a subset of p's models ever fits
 *    again, since free resources only shrink. So in any run, either every
 *    arrival of the shape is placed (all their holes count), or the first
 *    drop is at some arrival k past the forced prefix, and then the
 *    allocation is at most min(capacity - the unfilled holes of the
 *    shape's arrivals before k and the other shapes' forced ones, the GPU
 *    request arrived before k + that of later arrivals that do not
 *    dominate p). The largest of these over the cases bounds every run;
 *    every shape gives such a bound and the least is kept.
 *
 * bound = min(capacity - (holes - fill), the first-drop bounds, GPU
 * request of the arrivals that fit an empty node). CPU and memory enter
 * only through the forced-pod certificate and the first-drop dominance; no
 * CPU or memory bound of its own is computed (neither per node nor in
 * total). Everything is in GPU milli.
 */
#ifndef CRATER_BOUND_H
#define CRATER_BOUND_H

#include <stddef.h>
#include <stdint.h>

#include "crater/fgd.h"

/* One shape of share above half a GPU: what the bound knows about it. */
typedef struct crater_bound_shape {
    uint32_t share; /* gpu_milli, 501..999 */
    uint32_t cpu_milli;
    uint64_t memory_mib;
    char gpu_spec[64];
    size_t arrived, forced;  /* pods of the shape; those every policy places */
    double forced_until_pct; /* arrived workload (% of capacity) before the
                              * first arrival of the shape not certified */
    uint64_t hole_milli;     /* forced x (1000 - share) */
    size_t forced_end;       /* the index of that arrival (or the count) */
    uint64_t drop_bound_milli; /* the first-drop bound of this shape (3.) */
    double drop_at_pct;        /* arrived % before the first drop where it is
                                * reached (all arrived: no drop at all) */
} crater_bound_shape_t;

typedef struct crater_bound_result {
    uint64_t capacity_milli;  /* 1000 x GPUs of the GPU nodes */
    uint64_t arrived_milli;   /* GPU request of the whole sequence */
    uint64_t placeable_milli; /* of the arrivals that fit an empty node */
    uint64_t holes_milli, fill_milli, waste_milli; /* waste = holes - fill */
    uint64_t forced_bound_milli; /* capacity - waste (1. and 2.) */
    uint64_t drop_bound_milli;   /* the least first-drop bound (3.) */
    uint64_t bound_milli;        /* the least of all: no policy allocates
                                  * more */
    size_t arrived, forced;
    crater_bound_shape_t *shapes; /* nshapes, by share descending; owned */
    size_t nshapes;
} crater_bound_result_t;

/* The bound for the arrival sequence pods[order[0]], pods[order[1]], ...
 * on the GPU nodes of nodes (nodes without GPUs are skipped). forced, when
 * not NULL, has norder entries: forced[i] is set to 1 when every policy
 * places arrival i (only shares above 500 are examined), else 0. On
 * success res->shapes is malloc'd: free with crater_bound_result_clear().
 * Returns -1 with err set (nothing allocated) on failure. */
int crater_bound_sequence(const crater_trace_node_t *nodes,
                          size_t nnodes,
                          const crater_trace_pod_t *pods,
                          const size_t *order,
                          size_t norder,
                          uint8_t *forced,
                          crater_bound_result_t *res,
                          crater_error_t *err);

/* The bound on the protocol's arrival sequence for seed and inflate (0 =
 * 1.3): the same sequence crater_fgd_run() places. */
int crater_bound_run(const crater_trace_node_t *nodes,
                     size_t nnodes,
                     const crater_trace_pod_t *pods,
                     size_t npods,
                     uint64_t seed,
                     double inflate,
                     crater_bound_result_t *res,
                     crater_error_t *err);

/* Frees res->shapes; res may be NULL. */
void crater_bound_result_clear(crater_bound_result_t *res);

#endif /* CRATER_BOUND_H */
