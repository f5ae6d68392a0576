/* utilwork.c - the assumptions of `crater sim util` (one table drives the
 * presets, `--set key=value` and the sensitivity sweep) and the workload:
 * openb-shaped synthetic jobs (synth.c) given demands, idle tails and
 * diurnal services, and the cluster they run on. Each job's demands come
 * from a random stream of its own (seed, index), so the three policies
 * see the same jobs; only their requests differ (the GPU-count and k8s
 * schedulers round a share up to a GPU, Crater asks for the CPU and disk
 * bandwidth its profile measured, high priority's disk as a preference,
 * and time-shares whole-GPU jobs by their GPU profile: intrinsic use x
 * mean load, peak memory a lognormal share of the GPU). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/utilint.h"

#define HOUR_MS 3600000ull

/* ---- the assumptions ------------------------------------------------------
 */

#define PD(f) offsetof(crater_util_params_t, f)
enum ptype {
    P_DOUBLE,
    P_U64,
    P_BOOL,
    P_HOURS
};
static const struct ptab {
    const char *key;
    size_t off;
    enum ptype t;
} ptab[] = {
    {"nodes", PD(nodes), P_U64},
    {"jobs", PD(jobs), P_U64},
    {"seed", PD(seed), P_U64},
    {"load", PD(load), P_DOUBLE},
    {"intr_lo", PD(intr_lo), P_DOUBLE},
    {"intr_hi", PD(intr_hi), P_DOUBLE},
    {"cpu_per_gpu", PD(cpu_per_gpu), P_DOUBLE},
    {"disk_per_gpu", PD(disk_per_gpu), P_DOUBLE},
    {"membw_per_gpu", PD(membw_per_gpu), P_DOUBLE},
    {"sigma", PD(sigma), P_DOUBLE},
    {"cpuonly_burst", PD(cpuonly_burst), P_DOUBLE},
    {"cpu_req_scale", PD(cpu_req_scale), P_DOUBLE},
    {"node_disk", PD(node_disk), P_DOUBLE},
    {"node_membw_per_core", PD(node_membw_per_core), P_DOUBLE},
    {"interactive", PD(interactive), P_DOUBLE},
    {"idle_frac", PD(idle_frac), P_DOUBLE},
    {"inference", PD(inference), P_DOUBLE},
    {"trough", PD(trough), P_DOUBLE},
    {"infer_intr", PD(infer_intr), P_DOUBLE},
    {"infer_hours", PD(infer_runtime_ms), P_HOURS},
    {"step_s", PD(step_s), P_DOUBLE},
    {"overcommit", PD(overcommit), P_DOUBLE},
    {"idle_reclaim_h", PD(idle_reclaim_ms), P_HOURS},
    {"profile_cpu", PD(profile_cpu), P_BOOL},
    {"profile_disk", PD(profile_disk), P_BOOL},
    {"profile_disk_high", PD(profile_disk_high), P_BOOL},
    {"profile_disk_soft", PD(profile_disk_soft), P_BOOL},
    {"profile_gpu", PD(profile_gpu), P_BOOL},
    {"gpu_mem", PD(gpu_mem), P_DOUBLE},
    {"gpu_mem_sigma", PD(gpu_mem_sigma), P_DOUBLE},
    {"max_util", PD(max_util), P_DOUBLE},
    {"mem_margin", PD(mem_margin), P_DOUBLE},
};

static const crater_util_params_t seeds_preset = {
    .nodes = 100,
    .jobs = 6000,
    .seed = 1,
    .load = 1.0,
    .intr_lo = 0.4,
    .intr_hi = 1.0,
    .cpu_per_gpu = 8,
    .disk_per_gpu = 150e6,
    .membw_per_gpu = 5e9,
    .sigma = 0.7,
    .cpuonly_burst = 1.5,
    .cpu_req_scale = 1,
    .node_disk = 1e9,
    .node_membw_per_core = 2e9,
    .interactive = 0.3,
    .idle_frac = 0.6,
    .inference = 0.1,
    .trough = 0.15,
    .infer_intr = 0.8,
    .infer_runtime_ms = 12 * HOUR_MS,
    .step_s = 0.5,
    .overcommit = 1.5,
    .idle_reclaim_ms = HOUR_MS / 4,
    .profile_cpu = true,
    .profile_disk = true,
    .profile_disk_high = false,
    .profile_disk_soft = true,
    .profile_gpu = true,
    .gpu_mem = 0.35,
    .gpu_mem_sigma = 0.6,
    .max_util = 0.9,
    .mem_margin = 0.2,
};

int crater_util_params_preset(const char *name,
                              crater_util_params_t *p,
                              crater_error_t *err)
{
    *p = seeds_preset;
    if (!strcmp(name, "seeds"))
        return 0;
    if (strcmp(name, "plain") && strcmp(name, "whole"))
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "workload",
                                   "workload: '%s' is not one of seeds, "
                                   "plain, whole",
                                   name);
    p->intr_lo = p->intr_hi = 1;
    p->cpu_per_gpu = 2, p->disk_per_gpu = 20e6, p->membw_per_gpu = 1e9;
    p->sigma = 0, p->cpuonly_burst = 1;
    p->interactive = 0, p->inference = 0;
    p->whole_only = !strcmp(name, "whole");
    return 0;
}

static int set_value(crater_util_params_t *p,
                     const struct ptab *e,
                     const char *v,
                     crater_error_t *err)
{
    char *end;
    double x = strtod(v, &end);
    char *f = (char *)p + e->off;

    if (!*v || *end || !(x >= 0) || !isfinite(x))
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   e->key,
                                   "util.%s: '%s' is not a number >= 0",
                                   e->key,
                                   v);
    if (e->t == P_DOUBLE)
        *(double *)f = x;
    else if (e->t == P_U64)
        *(uint64_t *)f = (uint64_t)x;
    else if (e->t == P_HOURS)
        *(uint64_t *)f = (uint64_t)(x * (double)HOUR_MS);
    else
        *(bool *)f = x != 0;
    return 0;
}

int crater_util_params_set(crater_util_params_t *p,
                           const char *kv,
                           crater_error_t *err)
{
    const char *eq = strchr(kv, '=');
    size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);

    for (size_t i = 0; eq && i < sizeof(ptab) / sizeof(ptab[0]); i++)
        if (strlen(ptab[i].key) == klen && !strncmp(ptab[i].key, kv, klen))
            return set_value(p, &ptab[i], eq + 1, err);
    return crater_errorf_field(err,
                               CRATER_EINVAL,
                               "set",
                               "util: '%s' is not key=value with a known key",
                               kv);
}

size_t crater__util_param_count(void)
{
    return sizeof(ptab) / sizeof(ptab[0]);
}

const char *crater__util_param_key(size_t i)
{
    return ptab[i].key;
}

double crater__util_param_get(const crater_util_params_t *p, size_t i)
{
    const char *f = (const char *)p + ptab[i].off;

    if (ptab[i].t == P_DOUBLE)
        return *(const double *)f;
    if (ptab[i].t == P_U64)
        return (double)*(const uint64_t *)f;
    if (ptab[i].t == P_HOURS)
        return (double)*(const uint64_t *)f / (double)HOUR_MS;
    return *(const bool *)f;
}

double crater_util_params_get(const crater_util_params_t *p, const char *key)
{
    for (size_t i = 0; i < sizeof(ptab) / sizeof(ptab[0]); i++)
        if (!strcmp(ptab[i].key, key))
            return crater__util_param_get(p, i);
    return NAN;
}

/* ---- demands ----------------------------------------------------------------
 */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform (0, 1) number k of job i's own stream. */
static double unit(uint64_t seed, size_t i, unsigned k)
{
    uint64_t z = mix64(seed * 0x9e3779b97f4a7c15ull + i * 64 + k + 1);

    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

static double lognormal(
    double median, double sigma, uint64_t seed, size_t i, unsigned k)
{
    const double pi = 3.14159265358979323846;
    double u1 = unit(seed, i, k), u2 = unit(seed, i, k + 1);

    return median * exp(sigma * sqrt(-2.0 * log(u1)) * cos(2 * pi * u2));
}

/* Job i's kind and demands (independent of the policy). */
static void job_demand(const crater_util_params_t *p,
                       const crater_replay_job_t *j,
                       size_t i,
                       struct ujob *u)
{
    double gpus = j->gpu_milli / 1000.0;

    u->gpu_milli = j->gpu_milli;
    u->cpu_req = (double)j->req.cpu_milli / 1000.0;
    if (!j->gpu_milli) {
        u->kind = UJ_CPU;
        u->cpu = u->cpu_req * p->cpuonly_burst;
        return;
    }
    u->kind = UJ_TRAIN;
    if (j->cls == CRATER_REPLAY_HIGH && unit(p->seed, i, 0) < p->inference)
        u->kind = UJ_INFER;
    else if (unit(p->seed, i, 1) < p->interactive)
        u->kind = UJ_INTERACTIVE;
    u->intr = p->intr_lo + (p->intr_hi - p->intr_lo) * unit(p->seed, i, 2);
    if (u->kind == UJ_INFER)
        u->intr = p->infer_intr;
    u->cpu = gpus * lognormal(p->cpu_per_gpu, p->sigma, p->seed, i, 3);
    u->disk = gpus * lognormal(p->disk_per_gpu, p->sigma, p->seed, i, 5);
    u->membw = gpus * lognormal(p->membw_per_gpu, p->sigma, p->seed, i, 7);
    u->gpu_mem =
        fmin(lognormal(p->gpu_mem, p->gpu_mem_sigma, p->seed, i, 9), 1);
}

/* The GPU profile Crater would have measured of a job: its intrinsic use
 * times its mean load (an interactive job idles idle_frac of its run, a
 * service follows the diurnal curve, whose mean is (1 + trough) / 2). */
static double profiled_use(const crater_util_params_t *p, const struct ujob *u)
{
    if (u->kind == UJ_INTERACTIVE)
        return u->intr * (1 - fmin(p->idle_frac, 1));
    if (u->kind == UJ_INFER)
        return u->intr * (1 + p->trough) / 2;
    return u->intr;
}

/* What the policy asks for, now that the demands are known. Crater's
 * profiled requests are capped so that the job still fits an empty node
 * of any type: CPU at its GPUs' share of the leanest node (cpu_per_gpu:
 * the least cores per GPU of the cluster's GPU nodes), disk at a node's
 * bandwidth. Uncapped, 44 of the 6,000 jobs of the seeds workload asked
 * for more than any node has and never started. */
static void job_request(const crater_util_params_t *p,
                        crater_util_policy_t pol,
                        crater_replay_job_t *j,
                        const struct ujob *u,
                        const crater_sched_t *s,
                        double cpu_per_gpu)
{
    if (u->kind == UJ_INTERACTIVE)
        j->idle_tail_ms =
            (uint64_t)((double)j->runtime_ms * fmin(p->idle_frac, 1));
    if (u->kind == UJ_INFER)
        j->runtime_ms = p->infer_runtime_ms;
    if (u->kind != UJ_CPU && p->cpu_req_scale != 1) {
        double c = ceil((double)j->req.cpu_milli * p->cpu_req_scale);
        j->req.cpu_milli = c < 1 ? 1 : (uint64_t)c;
    }
    if (pol != CRATER_UTIL_CRATER || u->kind == UJ_CPU)
        return;
    double cap = u->gpu_milli / 1000.0 * cpu_per_gpu;
    uint64_t want = (uint64_t)ceil(fmin(u->cpu, cap) * 1000);
    if (p->profile_cpu && want > j->req.cpu_milli)
        j->req.cpu_milli = want;
    bool high = j->cls == CRATER_REPLAY_HIGH;
    if (p->profile_disk
        && (p->profile_disk_high || !high || p->profile_disk_soft)) {
        j->req.disk_bw = (uint64_t)fmin(u->disk, p->node_disk);
        j->req.disk_soft = high && !p->profile_disk_high;
    }
    /* whole GPUs only (a share is a slice already); the sim's GPUs are
     * 1000 units of memory (milli mode) */
    if (p->profile_gpu && u->gpu_milli % 1000 == 0)
        crater_sched_share(s,
                           &j->req,
                           profiled_use(p, u),
                           (uint64_t)ceil(u->gpu_mem * 1000),
                           NULL);
}

/* The least cores per GPU over the GPU nodes of s. */
static double lean_cpu_per_gpu(const crater_sched_t *s)
{
    double m = INFINITY;

    for (uint32_t i = 0; i < crater_sched_node_count(s); i++) {
        const crater_node_t *n = crater_sched_node(s, i);
        if (n->ngpus)
            m = fmin(m,
                     (double)crater_node_cpu_milli(n) / 1000.0
                         / (double)n->ngpus);
    }
    return isfinite(m) ? m : 0;
}

static double offered(const crater_replay_job_t *j, size_t n, double gpus)
{
    return crater_replay_offered_load(j, n, gpus);
}

int crater__util_jobs(const crater_util_params_t *p,
                      crater_util_policy_t pol,
                      const crater_synth_mix_t *mix,
                      const crater_sched_t *s,
                      double gpus,
                      crater_replay_job_t **jobs,
                      struct ujob **uj,
                      crater_error_t *err)
{
    crater_synth_spec_t sp = {.nodes = p->nodes,
                              .jobs = p->jobs,
                              .seed = p->seed,
                              .load = 1.0,
                              .runtime_ms = HOUR_MS};
    crater_replay_policy_t rp = pol == CRATER_UTIL_CRATER
                                    ? CRATER_REPLAY_CRATER
                                    : CRATER_REPLAY_K8S_DEFAULT;

    if (crater_synth_jobs(&sp, mix, s, rp, jobs, err) < 0)
        return -1;
    if (!(*uj = calloc(p->jobs, sizeof(**uj)))) {
        free(*jobs);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    double lean = lean_cpu_per_gpu(s);
    for (size_t i = 0; i < p->jobs; i++) {
        job_demand(p, &(*jobs)[i], i, &(*uj)[i]);
        job_request(p, pol, &(*jobs)[i], &(*uj)[i], s, lean);
    }
    double o = offered(*jobs, p->jobs, gpus);
    if (o > 0 && p->load > 0)
        crater_replay_compress(*jobs, p->jobs, p->load / o);
    return 0;
}

/* Whole-GPU pods only ("whole"): the mix keeps its multi-GPU and whole
 * pods and its CPU-only ones. */
void crater__util_mix_whole(crater_synth_mix_t *mix)
{
    size_t k = 0;

    for (size_t i = 0; i < mix->npods; i++)
        if (mix->pods[i].num_gpu != 1 || mix->pods[i].gpu_milli == 1000)
            mix->pods[k++] = mix->pods[i];
    mix->npods = k;
}

/* One storage device per node carrying the node's disk bandwidth, so
 * that Crater's disk filter can reserve it. */
int crater__util_add_storage(crater_cluster_t *c,
                             double bw,
                             crater_error_t *err)
{
    for (size_t i = 0; i < c->nnodes; i++) {
        crater_node_t *n = &c->nodes[i];
        if (n->nstorage)
            continue; /* the trace's nodes have none; keep what exists */
        crater_storage_t *st = calloc(1, sizeof(*st));
        if (!st || !(st->device = strdup("util0"))) {
            free(st);
            return crater_errorf(err, CRATER_ENOMEM, "out of memory");
        }
        st->iface = CRATER_IFACE_NVME;
        st->bandwidth = (uint64_t)bw;
        st->iops = 1000000;
        st->capacity = 1ull << 40;
        n->storage = st;
        n->nstorage = 1;
    }
    return 0;
}
