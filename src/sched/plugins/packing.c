/* packing.c - score: fragmentation-aware packing. 1 - the mean free
 * fraction left on the node after the placement, over the dimensions it
 * has (GPU memory, CPU, memory): the tighter the fit the higher, so work
 * fills partly used nodes first and whole nodes stay whole for big jobs.
 * A CPU-only job scores lower on a node with free GPUs than on a CPU-only
 * node (the free GPU memory counts against it), which keeps CPU work from
 * stranding GPUs. Inside a node, fit.c's best-fit GPU choice does the same
 * per GPU. (The simulator issue tunes this against FGD.) */
#include "sched/internal.h"

static double packing_weight(const crater_sched_t *s, const crater_request_t *r)
{
    (void)r;
    return s->w.packing;
}

static double packing_score(const struct sched_ctx *c)
{
    const struct node_static *st = &c->s->st[c->node];
    const struct node_dyn *d = &c->s->dyn[c->node];
    double free = 0;
    int dims = 0;

    if (st->gpu_mib_total) {
        uint64_t used = 0;
        for (uint32_t i = 0; i < st->ngpus; i++)
            used += c->s->gd[st->gpu_first + i].reserved_mib;
        for (uint32_t i = 0; i < c->p.ngpus; i++)
            used += c->p.gpu_mib[i];
        free += used >= st->gpu_mib_total
                    ? 0
                    : (double)(st->gpu_mib_total - used) / st->gpu_mib_total;
        dims++;
    }
    if (st->cpu_cap) {
        free += (double)(d->cpu_free - c->p.cpu_milli) / st->cpu_cap;
        dims++;
    }
    if (st->mem_cap) {
        free += (double)(d->mem_free - c->p.mem_bytes) / st->mem_cap;
        dims++;
    }
    return dims ? 1 - free / dims : 0;
}

const sched_score_ops_t sched__score_packing = {
    SCHED_PLUGIN_VERSION,
    "packing",
    packing_weight,
    packing_score,
};
