/* fgd.c - the FGD placement protocol (BENCHMARKS.md B1) through the real
 * scheduler core; see include/crater/fgd.h for the protocol.
 *
 * Why through crater_sched_place(): the point of the benchmark is that the
 * policy measured is the one the control plane runs, so the driver only
 * builds the cluster, orders the pods and records what the core decides.
 * The workload is a list of indices into the trace (no copies of rows).
 *
 * "crater-learned" is Crater's policy as craterd runs it: no oracle
 * distribution, but the decayed histogram of the pods arrived so far
 * (crater/typhist.h, craterd's defaults), fed at each arrival before the
 * pod is placed, as craterd feeds it at each admitted submission.
 */
#include "crater/fgd.h"

#include <stdlib.h>
#include <string.h>

#include "crater/typhist.h"

uint64_t crater_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t env_random(void *arg)
{
    return crater_splitmix64(arg);
}

static uint64_t pod_gpu(const crater_trace_pod_t *p)
{
    return (uint64_t)p->num_gpu * p->gpu_milli;
}

/* ---- typical pods ---------------------------------------------------------
 */

struct shape {
    const crater_trace_pod_t *p; /* first pod of this shape */
    size_t count;
};

static int shape_cmp_key(const crater_trace_pod_t *a,
                         const crater_trace_pod_t *b)
{
    if (a->cpu_milli != b->cpu_milli)
        return a->cpu_milli < b->cpu_milli ? -1 : 1;
    if (a->gpu_milli != b->gpu_milli)
        return a->gpu_milli < b->gpu_milli ? -1 : 1;
    if (a->num_gpu != b->num_gpu)
        return a->num_gpu < b->num_gpu ? -1 : 1;
    return strcmp(a->gpu_spec, b->gpu_spec);
}

static int by_key(const void *a, const void *b)
{
    return shape_cmp_key(*(const crater_trace_pod_t *const *)a,
                         *(const crater_trace_pod_t *const *)b);
}

/* Most frequent first; equal counts: the larger shape first. */
static int by_count(const void *a, const void *b)
{
    const struct shape *x = a, *y = b;

    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return -shape_cmp_key(x->p, y->p);
}

/* Group pods by shape: sort pointers, count runs. */
static struct shape *group_shapes(const crater_trace_pod_t *pods,
                                  size_t n,
                                  size_t *nshapes)
{
    const crater_trace_pod_t **v = malloc((n ? n : 1) * sizeof(*v));
    struct shape *sh = malloc((n ? n : 1) * sizeof(*sh));
    size_t k = 0;

    if (!v || !sh) {
        free(v);
        free(sh);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = &pods[i];
    qsort(v, n, sizeof(*v), by_key);
    for (size_t i = 0; i < n; i++) {
        if (k && shape_cmp_key(sh[k - 1].p, v[i]) == 0) {
            sh[k - 1].count++;
            continue;
        }
        sh[k].p = v[i];
        sh[k++].count = 1;
    }
    free(v);
    qsort(sh, k, sizeof(*sh), by_count);
    *nshapes = k;
    return sh;
}

static void typical_of(const crater_sched_t *s,
                       const crater_trace_pod_t *p,
                       double w,
                       crater_typical_t *t)
{
    crater_request_t r;

    memset(t, 0, sizeof(*t));
    t->cpu_milli = p->cpu_milli;
    t->gpus = p->num_gpu;
    t->slice = p->num_gpu == 1 && p->gpu_milli < 1000 ? p->gpu_milli : 0;
    if (p->gpu_spec[0] && crater_openb_request(s, p, 1, &r, NULL) == 0)
        t->model_mask = r.model_mask;
    t->weight = w;
}

int crater_fgd_typical(const crater_sched_t *s,
                       const crater_trace_pod_t *pods,
                       size_t n,
                       double pct,
                       crater_typical_t **out,
                       size_t *nout,
                       crater_error_t *err)
{
    size_t nshapes = 0, take = 0, cum = 0;
    struct shape *sh = group_shapes(pods, n, &nshapes);
    crater_typical_t *t;

    if (!sh)
        return crater_errorf(err,
                             CRATER_ENOMEM,
                             "out of memory grouping %zu pods",
                             n);
    while (take < nshapes && (double)cum < pct / 100.0 * (double)n)
        cum += sh[take++].count;
    if (!(t = malloc((take ? take : 1) * sizeof(*t)))) {
        free(sh);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < take; i++)
        typical_of(s, sh[i].p, (double)sh[i].count / (double)cum, &t[i]);
    free(sh);
    *out = t;
    *nout = take;
    return 0;
}

/* ---- the run
 * ----------------------------------------------------------------- */

static const char *const fgd_policies[] = {
    "crater",
    "random",
    "dotprod",
    "gpuclustering",
    "gpupacking",
    "bestfit",
    "fgd",
    "k8s",
    "crater-learned",
    NULL,
};

const char *const *crater_fgd_policy_names(void)
{
    return fgd_policies;
}

static bool learned(const char *policy)
{
    return policy && strcmp(policy, "crater-learned") == 0;
}

struct run {
    crater_sched_t *s;
    crater_typhist_t *learn; /* "crater-learned": the arrivals' histogram */
    crater_config_t cfg;
    crater_cluster_t *cluster;
    size_t *order;
    size_t norder;
    uint64_t rng_policy;
};

static void run_free(struct run *r)
{
    crater_typhist_destroy(r->learn);
    crater_sched_destroy(r->s);
    crater_cluster_destroy(r->cluster);
    crater_config_clear(&r->cfg);
    free(r->order);
}

/* The artifact sorts the nodes by name and renames node i to
 * "%04d-<name>" with rand.Perm(n)[i] (simulator.go,
 * syncClusterResourceList, seeded with the run's seed), and its selectHost
 * gives equal scores to the smallest name: ties go to the first node of a
 * seeded random permutation, not of the file. Shuffling the nodes with the
 * seed makes our lowest node id play that role (statistically: this is
 * splitmix64, not Go's math/rand). Without it our FGD was 0.9 points under
 * the paper on cpu200, whose file starts with 22 small 2-GPU nodes that the
 * CPU-only pods' tied scores piled onto. */
static void shuffle_nodes(crater_trace_node_t *v, size_t n, uint64_t st)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(crater_splitmix64(&st) % i);
        crater_trace_node_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

/* Milli mode: 1000 units per GPU, exact shares, no overheads. */
static int make_sched(struct run *r,
                      const crater_trace_node_t *nodes,
                      size_t n,
                      const crater_kb_t *kb,
                      const char *policy,
                      crater_error_t *err)
{
    crater_sched_env_t env = {NULL, env_random, &r->rng_policy};
    crater_trace_node_t *gpu = malloc((n ? n : 1) * sizeof(*gpu));
    size_t k = 0;
    int rc;

    if (!gpu)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (nodes[i].gpus)
            gpu[k++] = nodes[i];
    shuffle_nodes(gpu, k, r->rng_policy ^ 0x243f6a8885a308d3ull);
    rc = crater_openb_cluster(gpu, k, kb, 1, &r->cluster, err);
    free(gpu);
    if (rc < 0 || crater_config_defaults(&r->cfg) < 0)
        return rc < 0 ? -1 : crater_errorf(err, CRATER_ENOMEM, "out of memory");
    r->cfg.scheduler.gpu_context_overhead = 0;
    r->cfg.scheduler.max_tasks_per_gpu = 255;
    r->cfg.scheduler.overcommit_ratio = 1.0;
    r->cfg.scheduler.min_cpu_per_gpu = 0;
    r->cfg.scheduler.min_memory_per_gpu = 0;
    if (!(r->s = crater_sched_create(&r->cfg, kb, &env)))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    for (size_t i = 0; i < r->cluster->nnodes; i++)
        if (crater_sched_add_node(r->s, &r->cluster->nodes[i], err) < 0)
            return -1;
    if (learned(policy))
        policy = "crater";
    return crater_sched_set_policy(r->s, policy ? policy : "crater", err);
}

int crater_fgd_arrivals(const crater_trace_pod_t *pods,
                        size_t n,
                        uint64_t seed,
                        double limit,
                        size_t **out,
                        size_t *nout,
                        crater_error_t *err)
{
    uint64_t st = seed, total = 0;
    size_t cap = n * 2 + 16, norder = n;
    size_t *order = malloc(cap * sizeof(*order));

    if (!order)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        order[i] = i;
        total += pod_gpu(&pods[i]);
    }
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(crater_splitmix64(&st) % i), t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    while (n) {
        size_t pick = order[crater_splitmix64(&st) % n];
        if ((double)(total + pod_gpu(&pods[pick])) > limit)
            break;
        if (norder == cap) {
            size_t *no = realloc(order, (cap *= 2) * sizeof(*no));
            if (!no) {
                free(order);
                return crater_errorf(err, CRATER_ENOMEM, "out of memory");
            }
            order = no;
        }
        order[norder++] = pick;
        total += pod_gpu(&pods[pick]);
    }
    *out = order;
    *nout = norder;
    return 0;
}

static double cluster_frag(const crater_sched_t *s)
{
    double f = 0;
    uint32_t n = crater_sched_node_count(s);

    for (uint32_t i = 0; i < n; i++)
        f += crater_sched_node_frag(s, i);
    return f;
}

static void record(crater_fgd_result_t *res,
                   const crater_sched_t *s,
                   uint64_t arrived,
                   uint64_t alloc,
                   int *step)
{
    double cap = (double)res->capacity_milli;

    while (*step < CRATER_FGD_STEPS
           && (double)arrived * 100.0 >= (double)*step * cap) {
        res->alloc[*step] = (double)alloc * 100.0 / cap;
        if (*step == 100) {
            double frag = cluster_frag(s), idle = cap - (double)alloc;
            res->frag_pct_at_100 = frag * 100.0 / cap;
            res->frag_ratio_at_100 = idle > 0 ? frag * 100.0 / idle : 0;
            res->unallocated_gpus_at_100 = idle / 1000.0;
        }
        (*step)++;
    }
}

/* The room left on every GPU at the end, binned by tenths of a GPU
 * (milli mode: 1000 units per GPU). */
static void end_state(const crater_sched_t *s, crater_fgd_result_t *res)
{
    uint32_t n = crater_sched_node_count(s), room[CRATER_MAX_GPUS_PER_NODE];

    for (uint32_t i = 0; i < n; i++) {
        uint32_t g =
            crater_sched_gpu_room(s, i, room, CRATER_MAX_GPUS_PER_NODE);
        bool starved = crater_sched_cpu_free(s, i) < 1000;
        for (uint32_t k = 0; k < g && k < CRATER_MAX_GPUS_PER_NODE; k++) {
            uint32_t bin = room[k] >= 1000 ? 10 : room[k] / 100;
            res->end_room[bin] += room[k] / 1000.0;
            if (starved)
                res->end_room_cpu_starved += room[k] / 1000.0;
        }
    }
}

static int place_all(struct run *r,
                     const crater_trace_pod_t *pods,
                     crater_fgd_result_t *res,
                     crater_error_t *err)
{
    uint64_t arrived = 0, alloc = 0;
    int step = 0;

    for (size_t i = 0; i < r->norder; i++) {
        const crater_trace_pod_t *p = &pods[r->order[i]];
        crater_request_t req;
        crater_placement_t pl;
        crater_error_t e;
        if (crater_openb_request(r->s, p, 1, &req, err) < 0)
            return -1;
        if (r->learn && crater_typhist_observe(r->learn, r->s, &req, err) < 0)
            return -1;
        if (crater_sched_place(r->s, &req, &pl, &e) == 0) {
            if (crater_sched_commit(r->s, i + 1, &req, &pl, err) < 0)
                return -1;
            alloc += pod_gpu(p);
            res->placed++;
        } else if (e.errnum != CRATER_EUNSCHED) {
            *err = e;
            return -1;
        } else {
            res->dropped++;
        }
        arrived += pod_gpu(p);
        record(res, r->s, arrived, alloc, &step);
    }
    res->arrived = r->norder;
    end_state(r->s, res);
    /* the inflation stops short of 130%: the last value stands for the rest */
    record(res, r->s, (uint64_t)(res->capacity_milli * 2), alloc, &step);
    return 0;
}

/* craterd's histogram settings (config defaults), the prior installed. */
static int learn_init(struct run *r, crater_error_t *err)
{
    crater_typhist_opts_t o;

    crater_typhist_opts_from_config(&r->cfg, &o);
    if (!(r->learn = crater_typhist_create(&o)))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    return crater_typhist_install(r->learn, r->s, err);
}

static size_t learn_shapes(const crater_typhist_t *h)
{
    crater_typical_t *t = NULL;
    size_t n = 0;

    if (crater_typhist_get(h, &t, &n, NULL) < 0)
        return 0;
    free(t);
    return n;
}

int crater_fgd_run(const crater_trace_node_t *nodes,
                   size_t nnodes,
                   const crater_trace_pod_t *pods,
                   size_t npods,
                   const crater_kb_t *kb,
                   const crater_fgd_opts_t *o,
                   crater_fgd_result_t *res,
                   crater_error_t *err)
{
    struct run r = {0};
    crater_typical_t *typ = NULL;
    double inflate = o->inflate > 0 ? o->inflate : 1.3;
    double pct = o->typical_pct > 0 ? o->typical_pct : 95.0;
    int rc = -1;

    memset(res, 0, sizeof(*res));
    r.rng_policy = o->seed ^ 0x5851f42d4c957f2dull;
    if (make_sched(&r, nodes, nnodes, kb, o->policy, err) < 0)
        goto out;
    for (size_t i = 0; i < r.cluster->nnodes; i++)
        res->capacity_milli += 1000ull * r.cluster->nodes[i].ngpus;
    res->gpu_nodes = r.cluster->nnodes;
    res->pods = npods;
    if (learned(o->policy)
            ? learn_init(&r, err) < 0
            : crater_fgd_typical(r.s,
                                 pods,
                                 npods,
                                 pct,
                                 &typ,
                                 &res->typical,
                                 err)
                      < 0
                  || crater_sched_set_typical(r.s, typ, res->typical, err) < 0)
        goto out;
    if (crater_fgd_arrivals(pods,
                            npods,
                            o->seed,
                            inflate * (double)res->capacity_milli,
                            &r.order,
                            &r.norder,
                            err)
            < 0
        || place_all(&r, pods, res, err) < 0)
        goto out;
    if (r.learn)
        res->typical = learn_shapes(r.learn);
    res->alloc_at_100 = res->alloc[100];
    res->alloc_at_130 = res->alloc[130];
    res->unallocated_gpus_at_130 =
        (double)res->capacity_milli * (1 - res->alloc[130] / 100) / 1000;
    rc = 0;
out:
    free(typ);
    run_free(&r);
    return rc;
}
