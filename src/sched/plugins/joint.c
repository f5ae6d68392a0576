/* joint.c - score: the seeds' joint score, sum over gpu/cpu/memory/disk of
 * w_r * (1 - util_r) with scoreWeights, where util_r is the node's
 * allocated fraction of r after this placement. Dimensions the node does
 * not have are left out and the weights renormalised, so a CPU-only node
 * is not penalised for having no GPUs. High = the node stays free. */
#include "sched/internal.h"

static double joint_weight(const crater_sched_t *s, const crater_request_t *r)
{
    (void)r;
    return s->w.joint;
}

static double gpu_util_after(const struct sched_ctx *c)
{
    const struct node_static *st = &c->s->st[c->node];
    uint64_t used = 0;

    for (uint32_t i = 0; i < st->ngpus; i++)
        used += c->s->gd[st->gpu_first + i].reserved_mib;
    for (uint32_t i = 0; i < c->p.ngpus; i++)
        used += c->p.gpu_mib[i];
    return (double)used / st->gpu_mib_total;
}

static double iops_util_after(const struct sched_ctx *c)
{
    const struct node_static *st = &c->s->st[c->node];
    uint64_t free = 0;

    for (uint32_t i = 0; i < st->ndevs; i++)
        free += c->s->dd[st->dev_first + i].iops_free;
    return (double)(st->iops_cap - free + c->p.disk_iops) / st->iops_cap;
}

static double joint_score(const struct sched_ctx *c)
{
    const struct node_static *st = &c->s->st[c->node];
    const struct node_dyn *d = &c->s->dyn[c->node];
    const double *w = c->s->score_w;
    double sum = 0, wsum = 0, u;

    if (st->gpu_mib_total) {
        u = gpu_util_after(c);
        sum += w[0] * (1 - u), wsum += w[0];
    }
    if (st->cpu_cap) {
        u = (double)(st->cpu_cap - d->cpu_free + c->p.cpu_milli) / st->cpu_cap;
        sum += w[1] * (1 - u), wsum += w[1];
    }
    if (st->mem_cap) {
        u = (double)(st->mem_cap - d->mem_free + c->p.mem_bytes) / st->mem_cap;
        sum += w[2] * (1 - u), wsum += w[2];
    }
    if (st->iops_cap) {
        u = iops_util_after(c);
        sum += w[3] * (1 - u), wsum += w[3];
    }
    return wsum > 0 ? sum / wsum : 0;
}

const sched_score_ops_t sched__score_joint = {
    SCHED_PLUGIN_VERSION,
    "joint",
    joint_weight,
    joint_score,
};
