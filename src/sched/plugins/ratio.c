/* ratio.c - filter: CPU:GPU and memory:GPU ratios. With minCpuPerGpu /
 * minMemoryPerGpu set, a placement must leave at least that much CPU and
 * memory for each GPU that stays free, so CPU-heavy work cannot strand
 * GPUs (a GPU without cores to feed it is a wasted GPU). */
#include "sched/internal.h"

static uint32_t free_gpus_after(const struct sched_ctx *c)
{
    const struct node_static *st = &c->s->st[c->node];
    uint64_t taken = 0;
    uint32_t n = 0;

    for (uint32_t i = 0; i < c->p.ngpus; i++)
        taken |= 1ull << c->p.gpu[i];
    for (uint32_t i = 0; i < st->ngpus; i++)
        n += c->s->gd[st->gpu_first + i].ntasks == 0 && !(taken >> i & 1);
    return n;
}

static int ratio_filter(struct sched_ctx *c)
{
    const struct node_dyn *d = &c->s->dyn[c->node];
    uint32_t n;

    if (!c->s->min_cpu_per_gpu && !c->s->min_mem_per_gpu)
        return 0;
    n = free_gpus_after(c);
    if (d->cpu_free - c->p.cpu_milli < n * c->s->min_cpu_per_gpu) {
        c->why = "would leave free GPUs without CPU (minCpuPerGpu)";
        c->need = n * c->s->min_cpu_per_gpu;
        c->have = d->cpu_free - c->p.cpu_milli;
        c->unit = U_MILLI;
        return -1;
    }
    if (d->mem_free - c->p.mem_bytes < n * c->s->min_mem_per_gpu) {
        c->why = "would leave free GPUs without memory (minMemoryPerGpu)";
        c->need = n * c->s->min_mem_per_gpu;
        c->have = d->mem_free - c->p.mem_bytes;
        c->unit = U_BYTES;
        return -1;
    }
    return 0;
}

const sched_filter_ops_t sched__filter_ratio = {
    SCHED_PLUGIN_VERSION,
    "gpu-ratio",
    ratio_filter,
};
