/* lowutil.c - score: preferLowUtilization. 1 - the node's mean measured
 * GPU utilisation (CPU utilisation on nodes without GPUs), for jobs that
 * ask for it (warm inference replicas) and for every job when the config
 * sets scheduler.preferLowUtilization. */
#include "sched/internal.h"

static double lowutil_weight(const crater_sched_t *s, const crater_request_t *r)
{
    return r->prefer_low_util || s->prefer_low_util ? s->w.low_util : 0;
}

static double lowutil_score(const struct sched_ctx *c)
{
    const struct node_static *st = &c->s->st[c->node];
    double sum = 0;

    if (!st->ngpus)
        return 1 - c->s->dyn[c->node].util_cpu;
    for (uint32_t i = 0; i < st->ngpus; i++)
        sum += c->s->gd[st->gpu_first + i].util;
    return 1 - sum / st->ngpus;
}

const sched_score_ops_t sched__score_lowutil = {
    SCHED_PLUGIN_VERSION,
    "low-utilization",
    lowutil_weight,
    lowutil_score,
};
