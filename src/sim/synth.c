/* synth.c - synthetic clusters and workloads for scale runs of the replay
 * (`crater sim synthetic nodes=...,jobs=...,mix=openb`).
 *
 * Shapes come from the openb trace (or a built-in table when it is
 * absent); only the arrival process and durations are synthetic. The
 * arrival rate is derived from a target offered GPU load rather than
 * given directly, so that one spec means the same pressure on any cluster
 * size: rate = load x GPUs / (mean GPU demand x mean runtime), with the
 * means taken over the pod mix. A PRNG local to each call (xoshiro256**
 * seeded through splitmix64) keeps runs reproducible and thread-safe.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/replay.h"
#include "crater/units.h"

struct rng {
    uint64_t s[4];
};

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void rng_seed(struct rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(struct rng *r)
{
    uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

/* Uniform in (0, 1]: never 0, so log() is safe. */
static double rng_unit(struct rng *r)
{
    return ((rng_next(r) >> 11) + 1) * 0x1.0p-53;
}

static size_t rng_below(struct rng *r, size_t n)
{
    return (size_t)(rng_unit(r) * (double)n) % n;
}

/* ---- spec ---------------------------------------------------------------- */

static int bad(crater_error_t *err,
               const char *key,
               const char *val,
               const char *what)
{
    char field[48];

    snprintf(field, sizeof(field), "synthetic.%s", key);
    return crater_errorf_field(err,
                               CRATER_EINVAL,
                               field,
                               "%s: '%s' %s",
                               field,
                               val,
                               what);
}

static int parse_count(const char *key,
                       const char *v,
                       uint64_t *out,
                       crater_error_t *err)
{
    char *end;
    unsigned long long x = strtoull(v, &end, 10);

    if (!*v || *end || *v == '-' || x == 0 || x >= UINT32_MAX)
        return bad(err, key, v, "is not a positive integer below 2^32-1");
    *out = x;
    return 0;
}

static int parse_load(const char *v, double *out, crater_error_t *err)
{
    char *end;
    double x = strtod(v, &end);

    if (!*v || *end || !(x > 0) || x > 10)
        return bad(err, "load", v, "is not a number in (0, 10]");
    *out = x;
    return 0;
}

/* A fraction in [lo, 1] (lo_open: lo excluded). */
static int parse_frac(const char *k,
                      const char *v,
                      bool lo_open,
                      double *out,
                      crater_error_t *err)
{
    char *end;
    double x = strtod(v, &end);

    if (!*v || *end || !(x >= 0) || x > 1 || (lo_open && x == 0))
        return bad(err,
                   k,
                   v,
                   lo_open ? "is not a fraction in (0, 1]"
                           : "is not a fraction in [0, 1]");
    *out = x;
    return 0;
}

/* The idle profile's keys (crater_synth_spec_t); 1 when k is none. */
static int set_idle_key(crater_synth_spec_t *sp,
                        const char *k,
                        const char *v,
                        crater_error_t *err)
{
    uint64_t ns;
    crater_error_t e;

    if (!strcmp(k, "idle"))
        return parse_frac(k, v, false, &sp->idle, err);
    if (!strcmp(k, "idletail"))
        return parse_frac(k, v, true, &sp->idle_tail, err);
    if (strcmp(k, "idlereclaim"))
        return 1;
    if (crater_parse_duration_ns(v, &ns, &e) < 0)
        return bad(err, k, v, "is not a duration (0: off)");
    sp->idle_reclaim_ms = ns / 1000000u;
    return 0;
}

static int set_key(crater_synth_spec_t *sp,
                   const char *k,
                   const char *v,
                   crater_error_t *err)
{
    uint64_t ns;
    crater_error_t e;
    int rc;

    if (!strcmp(k, "nodes"))
        return parse_count(k, v, &sp->nodes, err);
    if (!strcmp(k, "jobs"))
        return parse_count(k, v, &sp->jobs, err);
    if (!strcmp(k, "seed"))
        return parse_count(k, v, &sp->seed, err);
    if (!strcmp(k, "load"))
        return parse_load(v, &sp->load, err);
    if (!strcmp(k, "mix")) {
        if (strcmp(v, "openb") && strcmp(v, "builtin"))
            return bad(err, k, v, "is not a mix (expected openb or builtin)");
        sp->builtin = !strcmp(v, "builtin");
        return 0;
    }
    if (!strcmp(k, "dist")) {
        if (strcmp(v, "exp") && strcmp(v, "lognormal"))
            return bad(err,
                       k,
                       v,
                       "is not a distribution (expected exp or "
                       "lognormal)");
        sp->lognormal = !strcmp(v, "lognormal");
        return 0;
    }
    if (!strcmp(k, "runtime")) {
        if (crater_parse_duration_ns(v, &ns, &e) < 0 || ns < 1000000000ull)
            return bad(err, k, v, "is not a duration of at least 1s");
        sp->runtime_ms = ns / 1000000u;
        return 0;
    }
    if ((rc = set_idle_key(sp, k, v, err)) <= 0)
        return rc;
    return crater_errorf_field(err,
                               CRATER_EINVAL,
                               "synthetic",
                               "synthetic: unknown key '%s' (expected nodes, "
                               "jobs, mix, seed, load, runtime, dist, idle, "
                               "idletail, idlereclaim)",
                               k);
}

int crater_synth_parse(const char *text,
                       crater_synth_spec_t *out,
                       crater_error_t *err)
{
    crater_synth_spec_t sp = {.seed = 1,
                              .load = 0.9,
                              .runtime_ms = 3600000,
                              .idle_tail = 0.5};
    char buf[512], *save = NULL;

    if (!text || strlen(text) >= sizeof(buf))
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "synthetic",
                                   "synthetic: spec missing or too long");
    snprintf(buf, sizeof(buf), "%s", text);
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (!eq)
            return crater_errorf_field(err,
                                       CRATER_EINVAL,
                                       "synthetic",
                                       "synthetic: '%s' is not key=value",
                                       t);
        *eq = '\0';
        if (set_key(&sp, t, eq + 1, err) < 0)
            return -1;
    }
    if (!sp.nodes || !sp.jobs)
        return crater_errorf_field(err,
                                   CRATER_EMISSING,
                                   "synthetic",
                                   "synthetic: nodes= and jobs= are required");
    *out = sp;
    return 0;
}

/* ---- mixes --------------------------------------------------------------- */

/* Built-in node types: the openb GPU node list's most common rows. */
static const crater_trace_node_t builtin_nodes[] = {
    {"g2-8", 96000, 393216, 8, "G2"},
    {"t4-2", 104000, 524288, 2, "T4"},
    {"p100-2", 16000, 122880, 2, "P100"},
    {"g3-8", 128000, 786432, 8, "G3"},
    {"v100m16-4", 32000, 131072, 4, "V100M16"},
    {"v100m32-8", 96000, 786432, 8, "V100M32"},
};
/* How many of each per 1000 nodes (openb: 549, 387, 107, 39, 28, 21). */
static const unsigned builtin_node_weight[] = {488, 344, 95, 35, 25, 13};

/* Built-in pod shapes, weighted like the default trace (about 48% whole
 * single GPUs, 13% CPU-only, 37% shares, a few multi-GPU). */
static const struct {
    uint32_t cpu, gpus, milli;
    uint64_t mem;
    crater_qos_t qos;
    unsigned weight;
} builtin_pods[] = {
    {12000, 1, 1000, 16384, CRATER_QOS_LS, 250},
    {8000, 1, 1000, 32768, CRATER_QOS_BE, 230},
    {6000, 1, 460, 12288, CRATER_QOS_LS, 120},
    {4000, 1, 250, 8192, CRATER_QOS_BE, 130},
    {2000, 1, 500, 4096, CRATER_QOS_LS, 120},
    {4000, 0, 0, 15360, CRATER_QOS_BE, 130},
    {32000, 4, 1000, 131072, CRATER_QOS_LS, 10},
    {64000, 8, 1000, 262144, CRATER_QOS_BURSTABLE, 10},
};

static int builtin_mix(crater_synth_mix_t *m, crater_error_t *err)
{
    size_t nn = 0, np = 0;

    for (size_t i = 0; i < sizeof(builtin_node_weight) / sizeof(unsigned); i++)
        nn += builtin_node_weight[i];
    for (size_t i = 0; i < sizeof(builtin_pods) / sizeof(builtin_pods[0]); i++)
        np += builtin_pods[i].weight;
    m->nodes = calloc(nn, sizeof(*m->nodes));
    m->pods = calloc(np, sizeof(*m->pods));
    if (!m->nodes || !m->pods) {
        crater_synth_mix_clear(m);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < sizeof(builtin_node_weight) / sizeof(unsigned); i++)
        for (unsigned k = 0; k < builtin_node_weight[i]; k++)
            m->nodes[m->nnodes++] = builtin_nodes[i];
    for (size_t i = 0; i < sizeof(builtin_pods) / sizeof(builtin_pods[0]); i++)
        for (unsigned k = 0; k < builtin_pods[i].weight; k++) {
            crater_trace_pod_t *p = &m->pods[m->npods++];
            p->cpu_milli = builtin_pods[i].cpu;
            p->memory_mib = builtin_pods[i].mem;
            p->num_gpu = builtin_pods[i].gpus;
            p->gpu_milli = builtin_pods[i].milli;
            p->qos = builtin_pods[i].qos;
        }
    m->builtin = true;
    return 0;
}

int crater_synth_mix_load(const crater_synth_spec_t *sp,
                          const char *dir,
                          crater_synth_mix_t *mix,
                          crater_error_t *err)
{
    char np[4096], pp[4096];

    memset(mix, 0, sizeof(*mix));
    if (sp->builtin || !dir)
        return builtin_mix(mix, err);
    snprintf(np, sizeof(np), "%s/openb_node_list_gpu_node.csv", dir);
    snprintf(pp, sizeof(pp), "%s/openb_pod_list_default.csv", dir);
    if (crater_openb_load_nodes(np, &mix->nodes, &mix->nnodes, err) < 0)
        return -1;
    if (crater_openb_load_pods(pp, &mix->pods, &mix->npods, err) < 0) {
        crater_synth_mix_clear(mix);
        return -1;
    }
    if (!mix->nnodes || !mix->npods) {
        crater_synth_mix_clear(mix);
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "%s: empty node or pod list",
                             dir);
    }
    return 0;
}

void crater_synth_mix_clear(crater_synth_mix_t *mix)
{
    if (!mix)
        return;
    if (mix->builtin) { /* built-in arrays are plain calloc'd */
        free(mix->nodes);
        free(mix->pods);
    } else {
        crater_trace_nodes_free(mix->nodes);
        crater_trace_free(mix->pods);
    }
    memset(mix, 0, sizeof(*mix));
}

/* ---- generation ---------------------------------------------------------- */

int crater_synth_nodes(const crater_synth_spec_t *sp,
                       const crater_synth_mix_t *mix,
                       crater_trace_node_t **nodes,
                       crater_error_t *err)
{
    crater_trace_node_t *n = malloc(sp->nodes * sizeof(*n));
    struct rng r;

    if (!n)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    rng_seed(&r, sp->seed);
    for (uint64_t i = 0; i < sp->nodes; i++) {
        n[i] = mix->nodes[rng_below(&r, mix->nnodes)];
        snprintf(n[i].name,
                 sizeof(n[i].name),
                 "synth-node-%06llu",
                 (unsigned long long)i);
    }
    *nodes = n;
    return 0;
}

static double pod_gpus(const crater_trace_pod_t *p)
{
    return p->num_gpu == 1 ? p->gpu_milli / 1000.0 : (double)p->num_gpu;
}

static double runtime_ms(struct rng *r, const crater_synth_spec_t *sp)
{
    double mean = (double)sp->runtime_ms, x;

    if (sp->lognormal) { /* sigma 1: mu = ln(mean) - 1/2 */
        double u1 = rng_unit(r), u2 = rng_unit(r);
        double z = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
        x = exp(log(mean) - 0.5 + z);
    } else {
        x = -log(rng_unit(r)) * mean;
    }
    return x < 1000.0 ? 1000.0 : x;
}

/* Mean arrival gap, ms, for the offered load (see the file comment). */
static double mean_gap_ms(const crater_synth_spec_t *sp,
                          const crater_synth_mix_t *mix,
                          const crater_sched_t *s)
{
    double g = 0, cap = 0;

    for (size_t i = 0; i < mix->npods; i++)
        g += pod_gpus(&mix->pods[i]);
    g /= (double)mix->npods;
    for (uint32_t i = 0; i < crater_sched_node_count(s); i++)
        cap += (double)crater_sched_node(s, i)->ngpus;
    if (g <= 0 || cap <= 0)
        return 1000.0; /* CPU-only: one job a second */
    return g * (double)sp->runtime_ms / (sp->load * cap);
}

/* A share sp->idle of the jobs get an idle tail of sp->idle_tail of
 * their runtime. Its own random stream: a spec without idle= draws the
 * same workload as before the idle profile existed. */
static void idle_profile(const crater_synth_spec_t *sp, crater_replay_job_t *j)
{
    struct rng r;

    if (!(sp->idle > 0))
        return;
    rng_seed(&r, sp->seed ^ 0x1d1e1d1e1d1eull);
    for (uint64_t i = 0; i < sp->jobs; i++)
        if (rng_unit(&r) <= sp->idle)
            j[i].idle_tail_ms =
                (uint64_t)((double)j[i].runtime_ms * sp->idle_tail);
}

int crater_synth_jobs(const crater_synth_spec_t *sp,
                      const crater_synth_mix_t *mix,
                      const crater_sched_t *s,
                      crater_replay_policy_t p,
                      crater_replay_job_t **jobs,
                      crater_error_t *err)
{
    crater_replay_job_t *j = calloc(sp->jobs, sizeof(*j));
    double gap = mean_gap_ms(sp, mix, s), t = 0;
    struct rng r;

    if (!j)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    rng_seed(&r, sp->seed ^ 0x5eed5eed5eedull);
    for (uint64_t i = 0; i < sp->jobs; i++) {
        const crater_trace_pod_t *pod = &mix->pods[rng_below(&r, mix->npods)];
        if (crater_openb_request(s, pod, 1, &j[i].req, err) < 0) {
            free(j);
            return -1;
        }
        t += -log(rng_unit(&r)) * gap;
        j[i].submit_ms = (uint64_t)t;
        j[i].runtime_ms = (uint64_t)runtime_ms(&r, sp);
        j[i].gpu_milli =
            pod->num_gpu == 1 ? pod->gpu_milli : pod->num_gpu * 1000u;
        crater_replay_job_class(&j[i], crater_replay_class_of_qos(pod->qos), p);
    }
    idle_profile(sp, j);
    *jobs = j;
    return 0;
}
