/* gpu.c - filter and reservation: GPU memory slices (slice + context
 * overhead per GPU, maxTasksPerGPU, overcommitRatio bounded by
 * safetyWatermark of measured use) or whole free GPUs, chosen with the
 * topology rules of fit.c, and the GPU-sharing rule for time-shared
 * whole-GPU jobs (fit.c, scheduler.gpuShare). With numa: strict the GPUs
 * must share one NUMA node that also has the job's CPU and memory. */
#include "sched/internal.h"

static int strict_numa(struct sched_ctx *c)
{
    const struct node_dyn *d = &c->s->dyn[c->node];
    int nnuma = c->s->st[c->node].nnuma;

    for (int k = 0; k < nnuma; k++) {
        uint64_t cand = c->eligible & sched__gpu_mask_on_numa(c->s, c->node, k);
        if (d->numa_cpu_free[k] < c->req->cpu_milli
            || d->numa_mem_free[k] < c->req->mem_bytes || !cand)
            continue;
        if (sched__pick_gpus(c, cand) == 0) {
            c->p.numa = k;
            return 0;
        }
    }
    if (!c->why) {
        c->why = "no NUMA node has the GPUs, CPU and memory together";
        c->need = c->req->gpus;
        c->unit = U_COUNT;
    }
    return -1;
}

static int gpu_filter(struct sched_ctx *c)
{
    if (c->req->gpus == 0)
        return 0;
    if (c->req->numa == CRATER_NUMA_STRICT)
        return strict_numa(c);
    return sched__pick_gpus(c, c->eligible);
}

const sched_filter_ops_t sched__filter_gpu = {
    SCHED_PLUGIN_VERSION,
    "gpu",
    gpu_filter,
};
