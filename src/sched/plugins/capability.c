/* capability.c - filter: which GPUs of the node a job may use at all: the
 * allowed models, vendor, minimum SM count, compute capability and HBM
 * bandwidth, and not behind a PCIe root complex whose measured bandwidth
 * use is above pcieThreshold. Leaves the eligible set in c->eligible for
 * the gpu filter. */
#include <strings.h>

#include "sched/internal.h"

static int model_ok(const crater_sched_t *s,
                    const crater_request_t *r,
                    const struct sched_model *m,
                    uint16_t id)
{
    if (r->model_mask && !(r->model_mask & (1ull << id)))
        return 0;
    if (r->vendor && strcasecmp(r->vendor, m->vendor) != 0)
        return 0;
    (void)s;
    return m->sm >= r->min_sm && m->cc >= r->min_cc && m->hbm >= r->min_hbm_bw;
}

static int capability_filter(struct sched_ctx *c)
{
    const crater_sched_t *s = c->s;
    const struct node_static *st = &s->st[c->node];
    uint64_t ok = 0, capable = 0;

    c->eligible = 0;
    if (c->req->gpus == 0)
        return 0;
    if (st->ngpus < c->req->gpus) {
        c->why = "fewer GPUs than the job asks for";
        c->need = c->req->gpus;
        c->have = st->ngpus;
        c->unit = U_COUNT;
        return -1;
    }
    for (uint32_t i = 0; i < st->ngpus; i++) {
        uint32_t g = st->gpu_first + i;
        if (!model_ok(s, c->req, &s->models[s->gs[g].model], s->gs[g].model))
            continue;
        capable |= 1ull << i;
        if (s->gd[g].pcie <= (float)s->pcie_thr)
            ok |= 1ull << i;
    }
    c->eligible = ok;
    if ((unsigned)__builtin_popcountll(ok) >= c->req->gpus)
        return 0;
    c->why = (unsigned)__builtin_popcountll(capable) >= c->req->gpus
                 ? "PCIe root complex saturated"
                 : "no GPU meets the model/capability constraints";
    c->need = c->req->gpus;
    c->have = (uint64_t)__builtin_popcountll(ok);
    c->unit = U_COUNT;
    return -1;
}

const sched_filter_ops_t sched__filter_capability = {
    SCHED_PLUGIN_VERSION,
    "gpu-capability",
    capability_filter,
};
