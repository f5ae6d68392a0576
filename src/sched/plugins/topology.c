/* topology.c - score: topology affinity of a GPU job. Half for the GPUs
 * sharing NUMA nodes (1 / NUMA nodes used), half for sharing PCIe switches
 * (1 / switches used), times 0.8, plus 0.2 when the job's CPUs and memory
 * are pinned to its GPUs' NUMA node. CPU-only jobs are not scored. */
#include "sched/internal.h"

static double topology_weight(const crater_sched_t *s,
                              const crater_request_t *r)
{
    return r->gpus ? s->w.topology : 0;
}

static double topology_score(const struct sched_ctx *c)
{
    double t;

    if (!c->numa_used || !c->upstream_used)
        return 0;
    t = 0.5 / c->numa_used + 0.5 / c->upstream_used;
    return 0.8 * t + (c->p.numa >= 0 ? 0.2 : 0);
}

const sched_score_ops_t sched__score_topology = {
    SCHED_PLUGIN_VERSION,
    "topology",
    topology_weight,
    topology_score,
};
