/* threshold.c - filter: measured utilisation thresholds. A node whose CPU
 * is already above cpuThreshold (default 80%) or whose memory is above
 * memoryThreshold takes no new task, even with free GPUs: the seeds'
 * observation is that data loading slows down before the CPUs saturate. */
#include "sched/internal.h"

static int threshold_filter(struct sched_ctx *c)
{
    const struct node_dyn *d = &c->s->dyn[c->node];

    if (d->util_cpu > (float)c->s->cpu_thr) { /* measured in float */
        c->why = "cpuThreshold exceeded";
        c->need = (uint64_t)(c->s->cpu_thr * 100 + 0.5);
        c->have = (uint64_t)(d->util_cpu * 100 + 0.5);
        c->unit = U_PERCENT;
        return -1;
    }
    if (d->util_mem > (float)c->s->mem_thr) {
        c->why = "memoryThreshold exceeded";
        c->need = (uint64_t)(c->s->mem_thr * 100 + 0.5);
        c->have = (uint64_t)(d->util_mem * 100 + 0.5);
        c->unit = U_PERCENT;
        return -1;
    }
    return 0;
}

const sched_filter_ops_t sched__filter_threshold = {
    SCHED_PLUGIN_VERSION,
    "utilisation-threshold",
    threshold_filter,
};
