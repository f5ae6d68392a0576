/* policy.c - scheduling policies: the registry, selection, and the FGD
 * paper's baselines (USENIX ATC'23, "Beware of Fragmentation").
 *
 * A policy only ranks nodes that passed every filter, and may choose the
 * GPUs inside a node (sched_policy_ops_t in internal.h). "crater" is the
 * weighted plugin scores (src/sched/plugins) with fit.c's GPU choice; it
 * is what the control plane runs by default. The baselines follow the
 * published descriptions as the paper's simulator implements them: their
 * scores are the Kubernetes framework's integers in [0, 100], so ties are
 * common; like the artifact (whose results we reproduce only this way)
 * they go to the first node, i.e. the lowest node id. Random draws one
 * feasible node uniformly (random_ties) and a share's GPU uniformly among
 * those that fit, as the paper's runs do (-gpusel random). The others use
 * best fit for a share (the fitting GPU with the least left; fit.c does
 * exactly that) and the lowest-index free GPUs for whole GPUs. Resource vectors
 * are (CPU millicores, GPU units) with maxima 128 cores and 8 GPUs.
 *
 * GPU units: the core counts GPU memory in MiB; in the FGD protocol every
 * GPU has 1000 "MiB" so these are milli-GPUs. Elsewhere the same formulas
 * run on MiB, scaled by the node's GPU size where the paper uses 1000.
 */
#include <math.h>
#include <string.h>

#include "sched/internal.h"

#define MAX_CPU 128000.0 /* paper: MaxSpecCpu, millicores */
#define MAX_GPU 8.0      /* paper: MaxSpecGpu, in GPUs */

void sched__gpu_left(const crater_sched_t *s, uint32_t node, uint32_t *left)
{
    const struct node_static *st = &s->st[node];

    for (uint32_t i = 0; i < st->ngpus; i++)
        left[i] = sched__room_mib(s, st->gpu_first + i);
}

/* GPU units of one whole GPU of node (1000 in the FGD protocol). */
static double gpu_unit(const crater_sched_t *s, uint32_t node)
{
    const struct node_static *st = &s->st[node];

    return st->ngpus ? (double)s->gs[st->gpu_first].mem_mib : 1000.0;
}

/* Total charges the placement puts on GPUs. */
static uint64_t placed_units(const struct sched_ctx *c)
{
    uint64_t u = 0;

    for (uint32_t i = 0; i < c->p.ngpus; i++)
        u += c->p.gpu_mib[i];
    return u;
}

static uint64_t left_total(const crater_sched_t *s, uint32_t node)
{
    uint32_t left[MAX_GPUS];
    uint64_t t = 0;

    sched__gpu_left(s, node, left);
    for (uint32_t i = 0; i < s->st[node].ngpus; i++)
        t += left[i];
    return t;
}

static unsigned fully_free(const crater_sched_t *s, uint32_t node)
{
    const struct node_static *st = &s->st[node];
    unsigned n = 0;

    for (uint32_t i = 0; i < st->ngpus; i++)
        n += s->gd[st->gpu_first + i].ntasks == 0;
    return n;
}

/* ---- random ----------------------------------------------------------------
 */

static double random_score(const struct sched_ctx *c)
{
    (void)c;
    return 0; /* every feasible node ties: uniform over nodes */
}

/* A share goes to a GPU drawn uniformly among those that can take it
 * (the paper's runs use random GPU selection for Random). */
static int random_pick(struct sched_ctx *c, uint64_t cand)
{
    crater_sched_t *s = c->s;
    uint32_t left[MAX_GPUS], need = c->req->slice_mib + s->ctx_mib, seen = 0;
    int pick = -1;

    if (!c->req->slice_mib || c->req->gpus != 1)
        return sched__pick_gpus_default(c, cand);
    sched__gpu_left(s, c->node, left);
    for (uint64_t m = cand; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        if (left[i] >= need && s->env.random(s->env.arg) % ++seen == 0)
            pick = i;
    }
    if (pick < 0)
        return sched__pick_gpus_default(c, cand); /* fails with the reason */
    c->p.ngpus = 1;
    c->p.whole = false;
    c->p.gpu[0] = (uint8_t)pick;
    c->p.gpu_mib[0] = need;
    return 0;
}

static const sched_policy_ops_t policy_random = {
    SCHED_POLICY_VERSION,
    "random",
    random_score,
    random_pick,
    true,
    true,
    NULL,
};

/* ---- best fit
 * ---------------------------------------------------------------- */

/* Σ over {cpu, gpu} of 0.5 (free - request) / max, lowest wins; as the
 * artifact: 100 (1 - that), truncated to an integer. */
static double bestfit_score(const struct sched_ctx *c)
{
    const crater_sched_t *s = c->s;
    double unit = gpu_unit(s, c->node);
    double cpu = (double)(s->dyn[c->node].cpu_free - c->p.cpu_milli);
    double gpu =
        ((double)left_total(s, c->node) - (double)placed_units(c)) / unit;
    double v = 0.5 * cpu / MAX_CPU + 0.5 * gpu / MAX_GPU;

    return (double)(int64_t)((1.0 - v) * 100.0);
}

static const sched_policy_ops_t policy_bestfit = {
    SCHED_POLICY_VERSION,
    "bestfit",
    bestfit_score,
    NULL,
    false,
    false,
    NULL,
};

/* ---- GPU packing -----------------------------------------------------------
 */

/* Prefer, in order: shared GPUs (100 - their free percentage / 10, at
 * least 50), free GPUs on a used node (50 - GPUs taken, at least 33),
 * free GPUs on an idle node (33 - free GPUs). CPU-only: 0 everywhere. */
static double packing_score(const struct sched_ctx *c)
{
    const crater_sched_t *s = c->s;
    uint32_t first = s->st[c->node].gpu_first;
    unsigned ngpus = s->st[c->node].ngpus, free = fully_free(s, c->node);
    double unit = gpu_unit(s, c->node);
    int64_t whole = 0, pct = 0;

    if (c->req->gpus == 0)
        return 0;
    if (free == ngpus)
        return (double)(33 - (int64_t)free > (int64_t)free ? 33 - (int64_t)free
                                                           : (int64_t)free);
    for (uint32_t i = 0; i < c->p.ngpus; i++) {
        const struct gpu_dyn *d = &s->gd[first + c->p.gpu[i]];
        whole += d->ntasks == 0;
        pct += (int64_t)((unit - (double)d->reserved_mib) * 100 / unit);
    }
    if (whole)
        return (double)(50 - whole > 33 ? 50 - whole : 33);
    return (double)(100 - pct / 10 > 50 ? 100 - pct / 10 : 50);
}

static const sched_policy_ops_t policy_packing = {
    SCHED_POLICY_VERSION,
    "gpupacking",
    packing_score,
    NULL,
    false,
    false,
    NULL,
};

/* ---- GPU clustering --------------------------------------------------------
 */

/* Keep tasks of one kind together. The paper tags tasks by their GPU
 * request; the core keeps no per-task tags on nodes, so the kinds here
 * are "GPU share" and "whole GPUs", read from the GPUs' state: a node
 * holding only the task's kind scores in (75, 100], one holding it among
 * others (50, 75], an idle node (25, 50], others (0, 25]; within a band
 * the more GPU is used, the higher. An approximation of the artifact. */
static double clustering_score(const struct sched_ctx *c)
{
    const crater_sched_t *s = c->s;
    const struct node_static *st = &s->st[c->node];
    int shared = 0, whole = 0, mine = c->req->slice_mib ? 1 : 2;
    double unit = gpu_unit(s, c->node);
    int64_t used, band;

    if (c->req->gpus == 0)
        return 0;
    for (uint32_t i = 0; i < st->ngpus; i++) {
        const struct gpu_dyn *d = &s->gd[st->gpu_first + i];
        shared |= d->ntasks > 0 && !d->whole;
        whole |= d->whole;
    }
    int have = shared | (whole << 1);
    if (have & mine)
        band = have == mine ? 75 : 50;
    else
        band = have ? 0 : 25;
    used = (int64_t)(MAX_GPU * 1000
                     - (double)left_total(s, c->node) * 1000 / unit);
    return (double)(25 * used / (int64_t)(MAX_GPU * 1000) + band);
}

static const sched_policy_ops_t policy_clustering = {
    SCHED_POLICY_VERSION,
    "gpuclustering",
    clustering_score,
    NULL,
    false,
    false,
    NULL,
};

/* ---- dot product ------------------------------------------------------------
 */

/* Tetris-style alignment, as the paper's runs configure it (dimensions
 * merged: CPU and the node's total free GPU; normalised by the maxima):
 * 100 (1 - dot/2) as an integer, where dot is the product of the free
 * vector and the request vector. GPU choice: best fit. */
static double dotprod_score(const struct sched_ctx *c)
{
    const crater_sched_t *s = c->s;
    double unit = gpu_unit(s, c->node);
    double rc = (double)c->req->cpu_milli / MAX_CPU;
    double rg = (double)placed_units(c) / unit / MAX_GPU;
    double fc = (double)s->dyn[c->node].cpu_free / MAX_CPU;
    double fg = (double)left_total(s, c->node) / unit / MAX_GPU;

    return (double)(int64_t)(100 * (1 - (fc * rc + fg * rg) / 2));
}

static const sched_policy_ops_t policy_dotprod = {
    SCHED_POLICY_VERSION,
    "dotprod",
    dotprod_score,
    NULL,
    false,
    false,
    NULL,
};

/* ---- Kubernetes-default-like
 * --------------------------------------------------- */

/* Whole GPUs only: a share takes a whole free GPU. */
static int k8s_pick(struct sched_ctx *c, uint64_t cand)
{
    crater_request_t whole = *c->req;
    const crater_request_t *orig = c->req;
    int rc;

    whole.slice_mib = 0;
    c->req = &whole;
    rc = sched__pick_gpus_default(c, cand);
    c->req = orig;
    return rc;
}

/* Least allocated: the mean free fraction of CPU and GPUs after the
 * placement, highest wins (spreading). */
static double k8s_score(const struct sched_ctx *c)
{
    const crater_sched_t *s = c->s;
    const struct node_static *st = &s->st[c->node];
    double cpu =
        st->cpu_cap
            ? (double)(s->dyn[c->node].cpu_free - c->p.cpu_milli) / st->cpu_cap
            : 0;
    double gpu = 0;

    if (st->ngpus)
        gpu = (double)(fully_free(s, c->node) - c->p.ngpus) / st->ngpus;
    return st->ngpus ? (cpu + gpu) / 2 : cpu;
}

static const sched_policy_ops_t policy_k8s = {
    SCHED_POLICY_VERSION,
    "k8s",
    k8s_score,
    k8s_pick,
    false,
    false,
    NULL,
};

/* ---- registry ---------------------------------------------------------------
 */

extern const sched_policy_ops_t sched__policy_fgd, sched__policy_crater;

static const sched_policy_ops_t *const policies[] = {
    &sched__policy_crater,
    &policy_random,
    &policy_dotprod,
    &policy_clustering,
    &policy_packing,
    &policy_bestfit,
    &sched__policy_fgd,
    &policy_k8s,
    NULL,
};

/* The names are configuration vocabulary (scheduler.policy is checked
 * when the file is loaded, on the core floor): config.c lists them, in
 * this table's order; test_sched checks that each one is implemented. */
const char *const *crater_sched_policy_names(void)
{
    return crater_config_policy_names();
}

static const sched_policy_ops_t *find(const char *name)
{
    for (int i = 0; policies[i]; i++)
        if (strcmp(policies[i]->name, name) == 0)
            return policies[i];
    return NULL;
}

void sched__policy_init(crater_sched_t *s, const char *name)
{
    const sched_policy_ops_t *p = name ? find(name) : NULL;

    s->policy = p ? p : &sched__policy_crater;
}

int crater_sched_set_policy(crater_sched_t *s,
                            const char *name,
                            crater_error_t *err)
{
    const sched_policy_ops_t *p = name ? find(name) : NULL;

    if (!p)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "policy",
                                   "unknown policy '%s' (crater, random, "
                                   "dotprod, gpuclustering, "
                                   "gpupacking, bestfit, fgd, k8s)",
                                   name ? name : "");
    s->policy = p;
    s->memo_epoch++;
    return 0;
}

const char *crater_sched_policy(const crater_sched_t *s)
{
    return s->policy ? s->policy->name : "crater";
}
