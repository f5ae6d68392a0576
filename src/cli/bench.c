/* bench.c - `crater bench sched`: placement throughput of the scheduling
 * core on a synthetic cluster, checked against the brute-force scan.
 *
 * The cluster is N identical DGX-A100-like nodes (8 x A100-SXM4-80GB by
 * default, 2 x EPYC 7742 = 128 cores / 256 threads, 1 TiB in two NUMA
 * nodes, GPUs split half per NUMA node and two per PCIe switch, NVLink
 * all-to-all through NVSwitch, one NVMe). Job shapes are drawn with a
 * seeded PRNG from the openb pod list (Alibaba's GPU-sharing trace, as
 * used by the FGD paper): gpu_milli < 1000 becomes a slice of that
 * fraction of the GPU's memory, num_gpu whole GPUs otherwise, num_gpu 0
 * a CPU-only job. Without the trace a small built-in mix stands in and
 * the output says so.
 *
 * Two runs on two fresh clusters: crater_sched_place() then commit for
 * every job (only this loop is timed, on the calling thread), then the
 * same jobs through crater_sched_place_bruteforce(). Every decision is
 * kept as (node, hash of the placement's fields) and compared; each run
 * commits its own decisions, so a mismatch also shows where the two
 * cluster states start to differ (first_mismatch). Fields are hashed one
 * by one rather than memcmp'd so that struct padding cannot matter.
 *
 * Library code never prints; this file is the CLI, so it does.
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "crater/sched.h"

#define GPU_MODEL "a100-sxm4-80gb"
#define CPU_MODEL "epyc-7742"
#define NUMA_NODES 2

struct shape {
    uint32_t cpu_milli, mem_mib, num_gpu, gpu_milli;
};

struct opts {
    uint32_t nodes, gpus, jobs, bf_jobs;
    uint64_t seed;
    bool json, no_bf, bf_jobs_set, trace_set;
    const char *trace; /* openb_pod_list_<trace>.csv, or "builtin" */
};

struct decision {
    uint32_t node; /* CRATER_SCHED_NO_NODE: unplaced */
    uint64_t hash;
};

struct run {
    double secs, secs_k; /* whole loop; first bf_jobs decisions */
    uint32_t placed, classes_max;
    uint64_t gpu_milli_placed;
    size_t mem_before, mem_built, mem_after;
    struct decision *d;
};

/* Small mix used when the openb trace is absent: roughly the default
 * trace's proportions (48% whole single GPUs, 13% CPU-only, 37% shares). */
static const struct shape builtin_mix[] = {
    {12000, 16384, 1, 1000},
    {12000, 16384, 1, 1000},
    {8000, 32768, 1, 1000},
    {16000, 65536, 1, 1000},
    {6000, 12288, 1, 460},
    {4000, 8192, 1, 810},
    {2000, 4096, 1, 230},
    {8000, 16384, 1, 470},
    {4000, 15360, 0, 0},
    {64000, 262144, 8, 1000},
    {16000, 65536, 2, 1000},
    {32000, 131072, 4, 1000},
    {6000, 24576, 1, 320},
    {1000, 2048, 0, 0},
    {12000, 24576, 1, 650},
};

/* ---- shapes
 * ---------------------------------------------------------------------- */

static int col_of(char *header, const char *name)
{
    int i = 0;

    for (char *t = strtok(header, ",\r\n"); t; t = strtok(NULL, ",\r\n"), i++)
        if (strcmp(t, name) == 0)
            return i;
    return -1;
}

/* Field i of a CSV line (no quoting in openb). */
static uint32_t field(const char *line, int i)
{
    for (; i > 0 && line; i--)
        if ((line = strchr(line, ',')))
            line++;
    return line ? (uint32_t)strtoul(line, NULL, 10) : 0;
}

static int push_shape(struct shape **v, size_t *n, size_t *cap, struct shape s)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        struct shape *p = realloc(*v, nc * sizeof(*p));
        if (!p)
            return -1;
        *v = p;
        *cap = nc;
    }
    (*v)[(*n)++] = s;
    return 0;
}

static int read_shapes(FILE *fp, struct shape **out, size_t *nout)
{
    char line[1024], hdr[1024];
    int col[4];
    const char *names[4] = {"cpu_milli", "memory_mib", "num_gpu", "gpu_milli"};
    size_t cap = 0;

    if (!fgets(line, sizeof(line), fp))
        return -1;
    for (int i = 0; i < 4; i++) {
        memcpy(hdr, line, sizeof(hdr));
        if ((col[i] = col_of(hdr, names[i])) < 0)
            return -1;
    }
    while (fgets(line, sizeof(line), fp)) {
        struct shape s = {field(line, col[0]),
                          field(line, col[1]),
                          field(line, col[2]),
                          field(line, col[3])};
        if (push_shape(out, nout, &cap, s) < 0)
            return -1;
    }
    return *nout ? 0 : -1;
}

/* Try $CRATER_OPENB_DIR, ./../shared/data/openb, then the source tree's
 * ../shared/data/openb (found from this file's path). */
static FILE *open_trace(const char *trace, char *path, size_t size)
{
    char src[1024];
    const char *dirs[3] = {getenv("CRATER_OPENB_DIR"),
                           "../shared/data/openb",
                           NULL};

    snprintf(src, sizeof(src), "%s", __FILE__);
    if (src[0] == '/') { /* <src>/src/cli/bench.c -> <src>/../shared/... */
        char *d = dirname(dirname(dirname(src)));
        memmove(src, d, strlen(d) + 1);
        strncat(src, "/../shared/data/openb", sizeof(src) - strlen(src) - 1);
        dirs[2] = src;
    }
    for (int i = 0; i < 3; i++) {
        FILE *fp;
        if (!dirs[i])
            continue;
        snprintf(path, size, "%s/openb_pod_list_%s.csv", dirs[i], trace);
        if ((fp = fopen(path, "r")))
            return fp;
    }
    return NULL;
}

static int use_builtin(struct shape **out, size_t *n)
{
    if (!(*out = malloc(sizeof(builtin_mix))))
        return -1;
    memcpy(*out, builtin_mix, sizeof(builtin_mix));
    *n = sizeof(builtin_mix) / sizeof(builtin_mix[0]);
    return 0;
}

/* Shapes from the trace, or the built-in mix (*openb false): asked for
 * with --trace builtin, or as a stand-in when the default trace is
 * absent. A trace named with --trace must exist. */
static int load_shapes(const struct opts *o,
                       struct shape **out,
                       size_t *n,
                       bool *openb,
                       char *path,
                       size_t size)
{
    bool builtin = strcmp(o->trace, "builtin") == 0;
    FILE *fp = builtin ? NULL : open_trace(o->trace, path, size);
    int rc;

    *out = NULL;
    *n = 0;
    *openb = fp != NULL;
    if (!fp && o->trace_set && !builtin) {
        fprintf(stderr,
                "crater: error: openb_pod_list_%s.csv not found in "
                "$CRATER_OPENB_DIR, ../shared/data/openb or the source "
                "tree's ../shared/data/openb\n",
                o->trace);
        return -1;
    }
    if (!fp && !builtin)
        fprintf(stderr,
                "crater: warning: openb trace not found; using the "
                "built-in shape mix\n");
    if (!fp) {
        path[0] = '\0';
        return use_builtin(out, n);
    }
    rc = read_shapes(fp, out, n);
    fclose(fp);
    if (rc < 0)
        fprintf(stderr, "crater: error: %s: not an openb pod list\n", path);
    return rc;
}

/* ---- cluster
 * --------------------------------------------------------------------- */

struct node_tmpl {
    crater_node_t n;
    crater_gpu_t gpus[CRATER_MAX_GPUS_PER_NODE];
    char ups[CRATER_MAX_GPUS_PER_NODE][16];
    crater_cpu_t cpus[NUMA_NODES];
    crater_mem_t mems[NUMA_NODES];
    crater_storage_t disk;
    crater_kv_t label;
    char name[32];
};

static void tmpl_gpus(struct node_tmpl *t,
                      const crater_kb_gpu_t *g,
                      uint32_t ngpus)
{
    uint64_t all = ngpus >= 64 ? UINT64_MAX : (1ull << ngpus) - 1;

    for (uint32_t i = 0; i < ngpus; i++) {
        crater_gpu_t *d = &t->gpus[i];
        snprintf(t->ups[i], sizeof(t->ups[i]), "sw%u", i / 2);
        *d = (crater_gpu_t){.vendor = g->vendor,
                            .model = g->key,
                            .memory_bytes = g->memory_bytes,
                            .sm_count = g->sm_count,
                            .compute_cap = g->compute_cap,
                            .hbm_bandwidth = g->mem_bandwidth,
                            .nvlink_bandwidth = g->nvlink_bandwidth,
                            .fp16_tflops = g->fp16_tflops,
                            .upstream = t->ups[i],
                            .numa_node = (int)(i * NUMA_NODES / ngpus),
                            .nvlink_peers = all & ~(1ull << i)};
    }
    t->n.gpus = t->gpus;
    t->n.ngpus = ngpus;
}

static void tmpl_host(struct node_tmpl *t, const crater_kb_cpu_t *c)
{
    for (int k = 0; k < NUMA_NODES; k++) {
        t->cpus[k] = (crater_cpu_t){.vendor = c->vendor,
                                    .model = c->key,
                                    .cores = 64,
                                    .threads = 128,
                                    .numa_node = k,
                                    .ipc_baseline = c->ipc_baseline,
                                    .memory_bandwidth = c->memory_bandwidth};
        t->mems[k] = (crater_mem_t){.numa_node = k, .capacity = 512ull << 30};
    }
    t->disk = (crater_storage_t){.device = "nvme0n1",
                                 .iface = CRATER_IFACE_NVME,
                                 .capacity = 3840000000000ull,
                                 .iops = 1000000,
                                 .bandwidth = 6900000000ull,
                                 .latency_us = 80,
                                 .queue_depth = 2048,
                                 .numa_node = 0};
    t->label = (crater_kv_t){"pool", "a100"};
    t->n.cpus = t->cpus;
    t->n.ncpus = NUMA_NODES;
    t->n.mems = t->mems;
    t->n.nmems = NUMA_NODES;
    t->n.storage = &t->disk;
    t->n.nstorage = 1;
    t->n.labels = &t->label;
    t->n.nlabels = 1;
    t->n.name = t->name;
    t->n.samples = CRATER_SAMPLES_SYNTHETIC;
}

static size_t heap_bytes(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static crater_sched_t *build(const crater_config_t *cfg,
                             const crater_kb_t *kb,
                             struct node_tmpl *t,
                             uint32_t nodes)
{
    crater_sched_t *s = crater_sched_create(cfg, kb, NULL);
    crater_error_t err;

    if (!s) {
        fprintf(stderr, "crater: error: out of memory\n");
        return NULL;
    }
    for (uint32_t i = 0; i < nodes; i++) {
        snprintf(t->name, sizeof(t->name), "node-%05u", i);
        if (crater_sched_add_node(s, &t->n, &err) < 0) {
            fprintf(stderr, "crater: error: %s\n", err.text);
            crater_sched_destroy(s);
            return NULL;
        }
    }
    return s;
}

/* ---- jobs
 * ------------------------------------------------------------------------ */

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static crater_request_t request_of(const struct shape *sh, uint32_t gpu_mib)
{
    crater_request_t r = {.cpu_milli = sh->cpu_milli,
                          .mem_bytes = (uint64_t)sh->mem_mib << 20,
                          .numa = CRATER_NUMA_PREFERRED}; /* job default */

    if (sh->num_gpu == 0)
        return r;
    r.gpus = sh->num_gpu;
    if (sh->gpu_milli < 1000) /* a share: that fraction of the memory */
        r.slice_mib = (uint32_t)((uint64_t)gpu_mib * sh->gpu_milli / 1000);
    if (sh->gpu_milli < 1000 && r.slice_mib == 0)
        r.slice_mib = 1;
    return r;
}

static uint32_t gpu_milli_of(const crater_request_t *r, const struct shape *sh)
{
    return r->slice_mib ? sh->gpu_milli : r->gpus * 1000;
}

/* ---- runs
 * ------------------------------------------------------------------------ */

typedef int (*place_f)(crater_sched_t *,
                       const crater_request_t *,
                       crater_placement_t *,
                       crater_error_t *);

static uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ull;
}

/* Every field of a placement, padding excluded. */
static uint64_t placement_hash(const crater_placement_t *p)
{
    uint64_t h = 0xcbf29ce484222325ull, score;

    memcpy(&score, &p->score, sizeof(score));
    h = mix(mix(mix(h, p->node), p->ngpus), p->whole);
    for (uint32_t i = 0; i < p->ngpus; i++)
        h = mix(mix(h, p->gpu[i]), p->gpu_mib[i]);
    h = mix(mix(mix(h, (uint64_t)(int64_t)p->numa), p->cpu_milli),
            p->mem_bytes);
    for (int k = 0; k < CRATER_SCHED_MAX_NUMA; k++)
        h = mix(mix(h, p->numa_cpu[k]), p->numa_mem[k]);
    h = mix(mix(h, p->disk_iops), p->disk_bw);
    return mix(mix(h, (uint64_t)(int64_t)p->storage), score);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One decision: place, commit, record. 0, or -1 on a real error. */
static int decide(crater_sched_t *s,
                  place_f place,
                  const crater_request_t *r,
                  uint32_t i,
                  struct decision *d)
{
    crater_placement_t p;
    crater_error_t err;

    d->node = CRATER_SCHED_NO_NODE;
    d->hash = 0;
    if (place(s, r, &p, &err) < 0) {
        if (err.errnum == CRATER_EUNSCHED)
            return 0;
    } else if (crater_sched_commit(s, (uint64_t)i + 1, r, &p, &err) == 0) {
        d->node = p.node;
        d->hash = placement_hash(&p);
        return 0;
    }
    fprintf(stderr, "crater: error: job %u: %s\n", i, err.text);
    return -1;
}

static int run_jobs(crater_sched_t *s,
                    place_f place,
                    const crater_request_t *req,
                    const uint32_t *gmilli,
                    uint32_t n,
                    uint32_t k,
                    struct run *out)
{
    double t0 = now_s();

    out->secs_k = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t live;
        if (decide(s, place, &req[i], i, &out->d[i]) < 0)
            return -1;
        if (out->d[i].node != CRATER_SCHED_NO_NODE) {
            out->placed++;
            out->gpu_milli_placed += gmilli[i];
        }
        live = crater_sched_class_count(s);
        out->classes_max = live > out->classes_max ? live : out->classes_max;
        if (i + 1 == k)
            out->secs_k = now_s() - t0;
    }
    out->secs = now_s() - t0;
    return 0;
}

/* Build a fresh cluster and run the first n jobs through place. */
static int run_one(const crater_config_t *cfg,
                   const crater_kb_t *kb,
                   struct node_tmpl *t,
                   const struct opts *o,
                   place_f place,
                   const crater_request_t *req,
                   const uint32_t *gmilli,
                   uint32_t n,
                   struct run *out)
{
    crater_sched_t *s;
    int rc;

    memset(out, 0, sizeof(*out));
    if (!(out->d = calloc(n ? n : 1, sizeof(*out->d))))
        return -1;
    out->mem_before = heap_bytes();
    if (!(s = build(cfg, kb, t, o->nodes)))
        return -1;
    out->mem_built = heap_bytes();
    rc = run_jobs(s, place, req, gmilli, n, o->bf_jobs, out);
    out->mem_after = heap_bytes();
    crater_sched_destroy(s);
    return rc;
}

/* ---- options and output
 * ------------------------------------------------------------ */

static const char usage_text[] =
    "usage: crater bench sched [--nodes N] [--gpus-per-node G] [--jobs M]\n"
    "                          [--seed S] [--trace NAME] [--json]\n"
    "                          [--no-bruteforce] [--bruteforce-jobs K]\n"
    "Places M jobs with openb shapes on N synthetic 8 x A100 nodes through\n"
    "the full filter -> score -> reserve path, then replays the first K\n"
    "(default all) with the brute-force scan and compares every decision.\n"
    "--trace NAME reads openb_pod_list_NAME.csv from $CRATER_OPENB_DIR,\n"
    "../shared/data/openb or the source tree's ../shared/data/openb;\n"
    "--trace builtin uses a small built-in mix instead.\n"
    "Defaults: 1000 nodes, 8 GPUs, 10 jobs per node, seed 1, trace "
    "default\n(the built-in mix when it is absent).\n";

static int parse_u32(const char *name,
                     const char *v,
                     uint32_t lo,
                     uint32_t *out)
{
    char *end;
    unsigned long long x;

    errno = 0;
    x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-' || x < lo || x > UINT32_MAX) {
        fprintf(stderr,
                "crater: --%s: '%s' is not an integer >= %u\n",
                name,
                v,
                lo);
        return -1;
    }
    *out = (uint32_t)x;
    return 0;
}

static int parse_opt(struct opts *o, int c, const char *arg)
{
    uint32_t v;

    switch (c) {
    case 'n':
        return parse_u32("nodes", arg, 1, &o->nodes);
    case 'g':
        if (parse_u32("gpus-per-node", arg, 0, &o->gpus) < 0)
            return -1;
        return o->gpus <= CRATER_MAX_GPUS_PER_NODE
                   ? 0
                   : (fprintf(stderr,
                              "crater: --gpus-per-node: at most %d\n",
                              CRATER_MAX_GPUS_PER_NODE),
                      -1);
    case 'j':
        return parse_u32("jobs", arg, 0, &o->jobs);
    case 's':
        if (parse_u32("seed", arg, 0, &v) < 0)
            return -1;
        o->seed = v;
        return 0;
    case 'k':
        o->bf_jobs_set = true;
        return parse_u32("bruteforce-jobs", arg, 0, &o->bf_jobs);
    case 't':
        o->trace = arg;
        o->trace_set = true;
        return 0;
    case 'J':
        o->json = true;
        return 0;
    case 'B':
        o->no_bf = true;
        return 0;
    }
    return -1;
}

/* 0 ok, 1 help printed, -1 usage error. */
static int parse_args(int argc, char **argv, struct opts *o)
{
    static const struct option longs[] = {
        {"nodes", required_argument, NULL, 'n'},
        {"gpus-per-node", required_argument, NULL, 'g'},
        {"jobs", required_argument, NULL, 'j'},
        {"seed", required_argument, NULL, 's'},
        {"trace", required_argument, NULL, 't'},
        {"bruteforce-jobs", required_argument, NULL, 'k'},
        {"no-bruteforce", no_argument, NULL, 'B'},
        {"json", no_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool jobs_set = false;
    int c;

    *o = (struct opts){.nodes = 1000, .gpus = 8, .seed = 1, .trace = "default"};
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        if (c == 'h')
            return fputs(usage_text, stdout), 1;
        if (c == '?' || parse_opt(o, c, optarg) < 0)
            return fputs(usage_text, stderr), -1;
        jobs_set |= c == 'j';
    }
    if (optind < argc)
        return fprintf(stderr,
                       "crater: unexpected '%s'\n%s",
                       argv[optind],
                       usage_text),
               -1;
    if (!jobs_set)
        o->jobs = o->nodes * 10;
    if (!o->bf_jobs_set || o->bf_jobs > o->jobs)
        o->bf_jobs = o->jobs;
    if (o->no_bf)
        o->bf_jobs = 0;
    return 0;
}

struct result {
    const struct opts *o;
    struct run fast, bf;
    uint32_t mismatches;
    int64_t first_mismatch;
    bool openb;
    const char *trace_path;
};

static uint32_t compare(const struct run *a,
                        const struct run *b,
                        uint32_t k,
                        int64_t *first)
{
    uint32_t bad = 0;

    *first = -1;
    for (uint32_t i = 0; i < k; i++) {
        if (a->d[i].node == b->d[i].node && a->d[i].hash == b->d[i].hash)
            continue;
        if (!bad++)
            *first = i;
    }
    return bad;
}

static double rate(uint32_t n, double secs)
{
    return secs > 0 ? n / secs : 0;
}

static json_t *bf_json(const struct result *r, json_t *v)
{
    const struct opts *o = r->o;
    double fast = rate(o->bf_jobs, r->fast.secs_k);
    double slow = rate(o->bf_jobs, r->bf.secs);

    if (o->no_bf) {
        json_object_set_new(v, "identical_to_bruteforce", json_null());
        return v;
    }
    json_object_set_new(v, "bruteforce_jobs", json_integer(o->bf_jobs));
    json_object_set_new(v, "bruteforce_seconds", json_real(r->bf.secs));
    json_object_set_new(v, "bruteforce_placements_per_sec", json_real(slow));
    json_object_set_new(v,
                        "fast_placements_per_sec_same_jobs",
                        json_real(fast));
    json_object_set_new(v, "speedup", json_real(slow > 0 ? fast / slow : 0));
    json_object_set_new(v,
                        "identical_to_bruteforce",
                        json_boolean(r->mismatches == 0));
    json_object_set_new(v, "mismatches", json_integer(r->mismatches));
    json_object_set_new(v,
                        "first_mismatch",
                        r->first_mismatch < 0
                            ? json_null()
                            : json_integer(r->first_mismatch));
    return v;
}

static json_t *to_json(const struct result *r)
{
    const struct opts *o = r->o;
    const struct run *f = &r->fast;
    double gpus = (double)o->nodes * o->gpus * 1000;

    json_t *v =
        json_pack("{s:I, s:I, s:s, s:I, s:I, s:I, s:f, s:f, s:f, s:I, s:I, "
                  "s:I, s:I,"
                  " s:s, s:s?, s:I}",
                  "nodes",
                  (json_int_t)o->nodes,
                  "gpus_per_node",
                  (json_int_t)o->gpus,
                  "gpu_model",
                  GPU_MODEL,
                  "jobs",
                  (json_int_t)o->jobs,
                  "placed",
                  (json_int_t)f->placed,
                  "unplaced",
                  (json_int_t)(o->jobs - f->placed),
                  "seconds",
                  f->secs,
                  "placements_per_sec",
                  rate(o->jobs, f->secs),
                  "gpu_allocated",
                  gpus > 0 ? (double)f->gpu_milli_placed / gpus : 0.0,
                  "classes_live_max",
                  (json_int_t)f->classes_max,
                  "memory_per_node_bytes",
                  (json_int_t)((f->mem_after - f->mem_before) / o->nodes),
                  "memory_per_node_bytes_empty",
                  (json_int_t)((f->mem_built - f->mem_before) / o->nodes),
                  "one_core",
                  (json_int_t)1,
                  "shapes",
                  r->openb ? "openb" : "builtin",
                  "trace",
                  r->openb ? r->trace_path : NULL,
                  "seed",
                  (json_int_t)o->seed);

    return v ? bf_json(r, v) : NULL;
}

static void print_text(const struct result *r)
{
    const struct opts *o = r->o;
    const struct run *f = &r->fast;

    printf("%u nodes x %u %s, %u jobs (%s shapes, seed %llu)\n",
           o->nodes,
           o->gpus,
           GPU_MODEL,
           o->jobs,
           r->openb ? "openb" : "builtin",
           (unsigned long long)o->seed);
    printf("placed %u, unplaced %u, %.0f placements/s (%.3f s), "
           "%u live classes at most, %zu bytes/node\n",
           f->placed,
           o->jobs - f->placed,
           rate(o->jobs, f->secs),
           f->secs,
           f->classes_max,
           (f->mem_after - f->mem_before) / o->nodes);
    if (o->no_bf) {
        printf("brute force: skipped\n");
        return;
    }
    printf("brute force: %u decisions compared, %.0f placements/s, "
           "speedup %.1fx, %s (%u mismatches)\n",
           o->bf_jobs,
           rate(o->bf_jobs, r->bf.secs),
           rate(o->bf_jobs, f->secs_k) / rate(o->bf_jobs, r->bf.secs),
           r->mismatches ? "DIFFERENT" : "identical",
           r->mismatches);
}

/* ---- the command
 * ----------------------------------------------------------------- */

struct setup {
    crater_config_t cfg;
    crater_kb_t *kb;
    struct node_tmpl *tmpl;
    crater_request_t *req;
    uint32_t *gmilli;
};

static int make_jobs(struct setup *st,
                     const struct opts *o,
                     const struct shape *shapes,
                     size_t nshapes,
                     uint32_t gpu_mib)
{
    uint64_t x = o->seed;

    st->req = calloc(o->jobs ? o->jobs : 1, sizeof(*st->req));
    st->gmilli = calloc(o->jobs ? o->jobs : 1, sizeof(*st->gmilli));
    if (!st->req || !st->gmilli)
        return -1;
    for (uint32_t i = 0; i < o->jobs; i++) {
        const struct shape *sh = &shapes[splitmix(&x) % nshapes];
        st->req[i] = request_of(sh, gpu_mib);
        st->gmilli[i] = gpu_milli_of(&st->req[i], sh);
    }
    return 0;
}

static int make_setup(struct setup *st, const struct opts *o)
{
    const crater_kb_gpu_t *g;
    const crater_kb_cpu_t *c;

    memset(st, 0, sizeof(*st));
    if (crater_config_defaults(&st->cfg) < 0 || !(st->kb = crater_kb_create())
        || !(st->tmpl = calloc(1, sizeof(*st->tmpl))))
        return -1;
    st->cfg.scheduler.gpu_context_overhead = 0; /* shares are fractions */
    g = crater_kb_gpu(st->kb, GPU_MODEL);
    c = crater_kb_cpu(st->kb, CPU_MODEL);
    if (!g || !c)
        return -1;
    tmpl_gpus(st->tmpl, g, o->gpus);
    tmpl_host(st->tmpl, c);
    return 0;
}

static void free_setup(struct setup *st)
{
    crater_config_clear(&st->cfg);
    crater_kb_destroy(st->kb);
    free(st->tmpl);
    free(st->req);
    free(st->gmilli);
}

static int bench(const struct opts *o, struct setup *st, struct result *r)
{
    int rc = run_one(&st->cfg,
                     st->kb,
                     st->tmpl,
                     o,
                     crater_sched_place,
                     st->req,
                     st->gmilli,
                     o->jobs,
                     &r->fast);

    if (rc == 0 && !o->no_bf)
        rc = run_one(&st->cfg,
                     st->kb,
                     st->tmpl,
                     o,
                     crater_sched_place_bruteforce,
                     st->req,
                     st->gmilli,
                     o->bf_jobs,
                     &r->bf);
    if (rc == 0 && !o->no_bf)
        r->mismatches =
            compare(&r->fast, &r->bf, o->bf_jobs, &r->first_mismatch);
    return rc;
}

static int report(const struct result *r)
{
    json_t *v;
    int rc;

    if (!r->o->json) {
        print_text(r);
        return 0;
    }
    if (!(v = to_json(r)))
        return -1;
    rc = cli_print(v, CLI_FMT_JSON);
    json_decref(v);
    return rc;
}

static int bench_sched(int argc, char **argv)
{
    struct opts o;
    struct setup st;
    struct result r = {.o = &o, .first_mismatch = -1};
    struct shape *shapes = NULL;
    size_t nshapes;
    char path[1200];
    int rc = parse_args(argc, argv, &o);

    if (rc != 0)
        return rc > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    rc = make_setup(&st, &o) < 0
         || load_shapes(&o, &shapes, &nshapes, &r.openb, path, sizeof(path)) < 0
         || make_jobs(&st,
                      &o,
                      shapes,
                      nshapes,
                      (uint32_t)(st.tmpl->gpus[0].memory_bytes >> 20))
                < 0;
    r.trace_path = path;
    if (rc)
        fprintf(stderr, "crater: error: bench set-up failed\n");
    else
        rc = bench(&o, &st, &r) < 0 || report(&r) < 0;
    free(r.fast.d);
    free(r.bf.d);
    free(shapes);
    free_setup(&st);
    if (rc)
        return CLI_EXIT_REJECTED;
    return !o.no_bf && r.mismatches ? CLI_EXIT_REJECTED : CLI_EXIT_OK;
}

int cli_bench(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "sched") == 0)
        return bench_sched(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "submit") == 0)
        return cli_bench_submit(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage_text, stdout);
        return CLI_EXIT_OK;
    }
    fprintf(stderr,
            "crater: bench: unknown benchmark '%s' (sched)\n",
            argc >= 2 ? argv[1] : "");
    fputs(usage_text, stderr);
    return CLI_EXIT_USAGE;
}
