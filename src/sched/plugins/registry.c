/* registry.c - the static plugin registry. Filters run in this order,
 * cheapest and most selective first; the gpu filter must follow
 * gpu-capability (it uses the eligible set) and precede cpu-memory (which
 * pins CPUs next to the chosen GPUs), and gpu-ratio comes last because it
 * looks at the whole reservation. */
#include "sched/internal.h"

extern const sched_filter_ops_t sched__filter_health, sched__filter_selector,
    sched__filter_locality, sched__filter_threshold, sched__filter_capability,
    sched__filter_gpu, sched__filter_cpumem, sched__filter_disk,
    sched__filter_ratio, sched__filter_runtime;
extern const sched_score_ops_t sched__score_joint, sched__score_packing,
    sched__score_topology, sched__score_locality, sched__score_lowutil;

const sched_filter_ops_t *const sched__filters[] = {
    &sched__filter_health,
    &sched__filter_selector,
    &sched__filter_runtime,
    &sched__filter_locality,
    &sched__filter_threshold,
    &sched__filter_capability,
    &sched__filter_gpu,
    &sched__filter_cpumem,
    &sched__filter_disk,
    &sched__filter_ratio,
    NULL,
};

const sched_score_ops_t *const sched__scores[] = {
    &sched__score_joint,
    &sched__score_packing,
    &sched__score_topology,
    &sched__score_locality,
    &sched__score_lowutil,
    NULL,
};
