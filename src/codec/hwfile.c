/* hwfile.c - hardware files <-> the capability model (see hwfile.h and
 * doc/hardware.md for the schema).
 *
 * A file holds Node and Cluster documents. Decoding is one strict pass
 * over each document with the dec.h field tables, writing straight into
 * the model structs (so the error path is just crater_node_clear()), then
 * checks that need the whole node (NUMA nodes exist, NVLink peers are in
 * range and symmetric, uuids and PCI addresses unique) or the whole
 * cluster (node names and GPU uuids unique). Checks that run after the
 * walk re-enter the path they blame, so every message still names the
 * field and its line.
 *
 * Counts keep files short: `count` on a GPU entry makes that many
 * identical GPUs, `count` on a cluster's node entry makes nodes name-0,
 * name-1, ... Things that must differ between copies (uuid, pci_bus_id,
 * an explicit NVLink peer list) are refused on a counted entry. Missing
 * GPU uuids are derived from the node name and GPU index, so a file
 * always yields the same uuids.
 *
 * Encoding writes the fully expanded cluster with every quantity an
 * integer in base units. Bandwidths are the exception: the unit parser
 * refuses a bare bandwidth number (is 2039 GB/s or B/s?), so they are
 * written as "<integer>B/s". Latencies use the latency_ns/latency_us
 * spellings, whose plain integers are unambiguous.
 */
#include "crater/hwfile.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "crater/doc.h"

#define HW_MAX_NODES 100000 /* per load, after count expansion */
/* per load, so a tiny file with large counts cannot ask for gigabytes */
#define HW_MAX_GPUS 1000000
#define HW_MAX_LABELS 64
#define HW_MAX_TAINTS 64
#define HW_MAX_CPUS 64 /* sockets / NUMA domains per node */
#define HW_MAX_MEMS 64 /* NUMA nodes per node */
#define HW_MAX_STORAGE 256
#define HW_MAX_DATASETS 1024
#define HW_MAX_NUMA 1023 /* highest numa_node accepted */
#define HW_STR_MAX 253
#define HW_SHORT_MAX 63
#define MAXG CRATER_MAX_GPUS_PER_NODE

/* ---- small helpers ---- */

static int oom(crater_dec_t *d)
{
    return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
}

/* A quantity that must also fit the int64 JSON integers we encode to. */
static int qty(crater_dec_t *d, json_t *v, crater_dim_t dim, uint64_t *out)
{
    if (crater_dec_quantity(d, v, dim, out) < 0)
        return -1;
    if (*out > (uint64_t)INT64_MAX)
        return crater_dec_fail(d, CRATER_ERANGE, "value is too large");
    return 0;
}

static int dec_numa(crater_dec_t *d, json_t *v, int64_t min, int *out)
{
    int64_t x;

    if (crater_dec_int(d, v, min, HW_MAX_NUMA, &x) < 0)
        return -1;
    *out = (int)x;
    return 0;
}

/* Two spellings of one field (latency / latency_ns): the second is an
 * error naming the first. */
static int spell(crater_dec_t *d,
                 unsigned *given,
                 unsigned bit,
                 const char **seen,
                 const char *key)
{
    if (*given & bit)
        return crater_dec_fail(d,
                               CRATER_ECONFLICT,
                               "conflicts with '%s' (give one of them)",
                               *seen);
    *given |= bit;
    *seen = key;
    return 0;
}

static int is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

/* domain:bus:device.function, domain 4 or 8 hex digits (NVML writes 8). */
static int pci_ok(const char *s)
{
    size_t dom = strcspn(s, ":"), len = strlen(s);

    if ((dom != 4 && dom != 8) || len != dom + 8)
        return 0;
    s += dom;
    return s[0] == ':' && is_hex(s + 1, 2) && s[3] == ':' && is_hex(s + 4, 2)
           && strchr("01", s[4]) && s[6] == '.' && s[7] >= '0' && s[7] <= '7';
}

static int dec_pci(crater_dec_t *d, json_t *v, char **out)
{
    if (crater_dec_str(d, v, 16, out) < 0)
        return -1;
    if (!pci_ok(*out))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%s' is not a PCI address (domain:bus:"
                               "device.function, e.g. 0000:07:00.0)",
                               *out);
    return 0;
}

/* NVML's shape: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx */
static int uuid_ok(const char *s)
{
    static const size_t groups[] = {8, 4, 4, 4, 12};

    if (strncmp(s, "GPU-", 4) != 0)
        return 0;
    s += 4;
    for (size_t i = 0; i < 5; i++) {
        if (!is_hex(s, groups[i]))
            return 0;
        s += groups[i];
        if (*s != (i < 4 ? '-' : '\0'))
            return 0;
        s += i < 4;
    }
    return 1;
}

/* RFC 1123 subdomain, as Kubernetes node names. */
static int dns_ok(const char *s)
{
    size_t n = strlen(s);

    if (!n || !isalnum((unsigned char)s[0])
        || !isalnum((unsigned char)s[n - 1]))
        return 0;
    for (; *s; s++)
        if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s)
              || *s == '-' || *s == '.'))
            return 0;
    return 1;
}

/* Label and taint keys: [prefix/]name of [A-Za-z0-9._-], non-empty. */
/* Normalised model name (kb key shape), malloc'd into *out. */
static int set_model(crater_dec_t *d,
                     const char *model,
                     const char *key,
                     char **out)
{
    char norm[160];

    if (!key && !(key = crater_kb_normalize(model, norm, sizeof(norm))))
        return crater_dec_fail(d, CRATER_ELIMIT, "model name is too long");
    free(*out);
    if (!(*out = strdup(key)))
        return oom(d);
    return 0;
}

/* calloc room for a list about to be decoded element by element; a value
 * that is not a list or too long is left to crater_dec_array to report. */
static int prep(
    crater_dec_t *d, json_t *v, size_t max, size_t elsize, void **out)
{
    size_t n = json_is_array(v) ? json_array_size(v) : 0;

    if (!json_is_array(v) || n > max)
        return 0;
    if (!(*out = calloc(n ? n : 1, elsize)))
        return oom(d);
    return 0;
}

/* ---- decoding context ---- */

/* What one gpus[] entry produced, for the checks after the node. */
struct gsrc {
    size_t first, n;
    int peers_all;
    uint64_t peers;
    json_t *peers_json; /* borrowed */
    int has_uuid, has_pci;
};

struct nctx {
    crater_node_t *n;
    const crater_kb_t *kb;
    uint64_t count; /* node entry count (cluster documents) */
    struct gsrc src[MAXG];
    size_t nsrc;
};

enum {
    G_VENDOR = 1u << 0,
    G_MEM = 1u << 1,
    G_SM = 1u << 2,
    G_CC = 1u << 3,
    G_BW = 1u << 4,
    G_NVL = 1u << 5,
    G_FP16 = 1u << 6,
    G_COUNT = 1u << 7,
};

struct gent {
    struct nctx *nc;
    crater_gpu_t *g;
    struct gsrc *src;
    unsigned given;
    uint64_t count;
    const char *bw_key, *nvl_key;
    char *model_text; /* as written, for messages */
};

/* ---- gpus[] ---- */

static int g_model(crater_dec_t *d, json_t *v, void *obj)
{
    struct gent *e = obj;

    return crater_dec_str(d, v, 128, &e->model_text);
}

static int g_vendor(crater_dec_t *d, json_t *v, void *obj)
{
    struct gent *e = obj;

    e->given |= G_VENDOR;
    return crater_dec_str(d, v, HW_SHORT_MAX, &e->g->vendor);
}

static int g_uuid(crater_dec_t *d, json_t *v, void *obj)
{
    struct gent *e = obj;

    e->src->has_uuid = 1;
    if (crater_dec_str(d, v, 64, &e->g->uuid) < 0)
        return -1;
    if (!uuid_ok(e->g->uuid))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%s' is not a GPU uuid (GPU-xxxxxxxx-xxxx-"
                               "xxxx-xxxx-xxxxxxxxxxxx)",
                               e->g->uuid);
    return 0;
}

static int g_count(crater_dec_t *d, json_t *v, void *obj)
{
    struct gent *e = obj;

    e->given |= G_COUNT;
    return crater_dec_uint(d, v, 1, MAXG, &e->count);
}

static int g_pci(crater_dec_t *d, json_t *v, void *obj)
{
    struct gent *e = obj;

    e->src->has_pci = 1;
    return dec_pci(d, v, &e->g->pci_bus_id);
}

static int g_upstream(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_pci(d, v, &((struct gent *)obj)->g->upstream);
}

static int g_numa(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_numa(d, v, -1, &((struct gent *)obj)->g->numa_node);
}

static int g_memory(crater_dec_t *d, json_t *v, void *obj)
{
    struct gent *e = obj;

    e->given |= G_MEM;
    if (qty(d, v, CRATER_DIM_BYTES, &e->g->memory_bytes) < 0)
        return -1;
    if (!e->g->memory_bytes)
        return crater_dec_fail(d, CRATER_ERANGE, "memory must be above 0");
    return 0;
}

static int g_sm(crater_dec_t *d, json_t *v, void *obj)
{
    struct gent *e = obj;

    e->given |= G_SM;
    return crater_dec_u32(d, v, 1, 100000, &e->g->sm_count);
}

static int g_cc(crater_dec_t *d, json_t *v, void *obj)
{
    struct gent *e = obj;

    e->given |= G_CC;
    return crater_kb_dec_compute_cap(d, v, &e->g->compute_cap);
}

static int g_bw(crater_dec_t *d, json_t *v, void *obj)
{
    struct gent *e = obj;

    if (spell(d, &e->given, G_BW, &e->bw_key, "memory_bandwidth") < 0)
        return -1;
    return qty(d, v, CRATER_DIM_BANDWIDTH, &e->g->hbm_bandwidth);
}

static int g_bw_gbps(crater_dec_t *d, json_t *v, void *obj)
{
    struct gent *e = obj;

    if (spell(d, &e->given, G_BW, &e->bw_key, "memory_bandwidth_gbps") < 0)
        return -1;
    return crater_kb_dec_gbps(d, v, &e->g->hbm_bandwidth);
}

static int g_nvl(crater_dec_t *d, json_t *v, void *obj)
{
    struct gent *e = obj;

    if (spell(d, &e->given, G_NVL, &e->nvl_key, "nvlink_bandwidth") < 0)
        return -1;
    return qty(d, v, CRATER_DIM_BANDWIDTH, &e->g->nvlink_bandwidth);
}

static int g_nvl_gbps(crater_dec_t *d, json_t *v, void *obj)
{
    struct gent *e = obj;

    if (spell(d, &e->given, G_NVL, &e->nvl_key, "nvlink_bandwidth_gbps") < 0)
        return -1;
    return crater_kb_dec_gbps(d, v, &e->g->nvlink_bandwidth);
}

static int g_fp16(crater_dec_t *d, json_t *v, void *obj)
{
    struct gent *e = obj;

    e->given |= G_FP16;
    return crater_dec_double(d, v, 0.0, 1e6, &e->g->fp16_tflops);
}

static int peer_elem(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    struct gsrc *s = obj;
    uint64_t p;

    (void)i;
    if (crater_dec_uint(d, v, 0, MAXG - 1, &p) < 0)
        return -1;
    if (s->peers & (1ull << p))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "GPU %u is listed twice",
                               (unsigned)p);
    s->peers |= 1ull << p;
    return 0;
}

static int g_peers(crater_dec_t *d, json_t *v, void *obj)
{
    struct gent *e = obj;

    e->src->peers_json = v;
    if (json_is_string(v) && strcmp(json_string_value(v), "all") == 0) {
        e->src->peers_all = 1;
        return 0;
    }
    if (!json_is_array(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a list of GPU indices or \"all\", "
                               "got %s",
                               crater_dec_typename(v));
    return crater_dec_array(d, v, MAXG, peer_elem, e->src);
}

static const crater_dec_field_t gpu_fields[] = {
    {"model", g_model, CRATER_FIELD_REQUIRED},
    {"vendor", g_vendor, 0},
    {"count", g_count, 0},
    {"uuid", g_uuid, 0},
    {"pci_bus_id", g_pci, 0},
    {"upstream_pci_bus_id", g_upstream, 0},
    {"numa_node", g_numa, 0},
    {"memory", g_memory, 0},
    {"sm_count", g_sm, 0},
    {"compute_capability", g_cc, 0},
    {"memory_bandwidth", g_bw, 0},
    {"memory_bandwidth_gbps", g_bw_gbps, 0},
    {"nvlink_bandwidth", g_nvl, 0},
    {"nvlink_bandwidth_gbps", g_nvl_gbps, 0},
    {"nvlink_peers", g_peers, 0},
    {"fp16_tflops", g_fp16, 0},
    {NULL, NULL, 0},
};

/* Fail at the current path extended by key (when not NULL). */
__attribute__((format(printf, 4, 5))) static int fail_at(crater_dec_t *d,
                                                         const char *key,
                                                         crater_errno_t errnum,
                                                         const char *fmt,
                                                         ...)
{
    char msg[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (key) /* NULL: blame the object itself (the key is absent) */
        crater_dec_push_key(d, key);
    return crater_dec_fail(d, errnum, "%s", msg);
}

/* Fill what the file left out from the knowledge base. */
static int gpu_complete(crater_dec_t *d, struct gent *e)
{
    const crater_kb_gpu_t *k = crater_kb_gpu(e->nc->kb, e->model_text);
    crater_gpu_t *g = e->g;

    if (set_model(d, e->model_text, k ? k->key : NULL, &g->model) < 0)
        return -1;
    if (!k && !(e->given & G_MEM))
        return fail_at(d,
                       "model",
                       CRATER_EMISSING,
                       e->nc->kb ? "GPU model '%s' is not in the knowledge "
                                   "base: give its memory"
                                 : "no knowledge base to complete GPU model "
                                   "'%s': give its memory",
                       e->model_text);
    if (!k)
        return 0;
    if (!(e->given & G_VENDOR) && k->vendor && !(g->vendor = strdup(k->vendor)))
        return oom(d);
    g->memory_bytes = e->given & G_MEM ? g->memory_bytes : k->memory_bytes;
    g->sm_count = e->given & G_SM ? g->sm_count : k->sm_count;
    g->compute_cap = e->given & G_CC ? g->compute_cap : k->compute_cap;
    g->hbm_bandwidth = e->given & G_BW ? g->hbm_bandwidth : k->mem_bandwidth;
    g->nvlink_bandwidth =
        e->given & G_NVL ? g->nvlink_bandwidth : k->nvlink_bandwidth;
    g->fp16_tflops = e->given & G_FP16 ? g->fp16_tflops : k->fp16_tflops;
    return 0;
}

static int gpu_copy(crater_gpu_t *dst, const crater_gpu_t *src)
{
    *dst = *src;
    dst->uuid = src->uuid ? strdup(src->uuid) : NULL;
    dst->vendor = src->vendor ? strdup(src->vendor) : NULL;
    dst->model = src->model ? strdup(src->model) : NULL;
    dst->pci_bus_id = src->pci_bus_id ? strdup(src->pci_bus_id) : NULL;
    dst->upstream = src->upstream ? strdup(src->upstream) : NULL;
    return (src->uuid && !dst->uuid) || (src->vendor && !dst->vendor)
                   || (src->model && !dst->model)
                   || (src->pci_bus_id && !dst->pci_bus_id)
                   || (src->upstream && !dst->upstream)
               ? -1
               : 0;
}

/* count > 1: copies of the entry's GPU, which must not carry per-GPU ids. */
static int gpu_expand(crater_dec_t *d, struct gent *e)
{
    crater_node_t *n = e->nc->n;

    if (e->count > 1 && e->src->has_uuid)
        return fail_at(d,
                       "uuid",
                       CRATER_ECONFLICT,
                       "a uuid names one GPU: not allowed with count > 1");
    if (e->count > 1 && e->src->has_pci)
        return fail_at(d,
                       "pci_bus_id",
                       CRATER_ECONFLICT,
                       "a PCI address names one GPU: not allowed with "
                       "count > 1");
    if (e->count > 1 && e->src->peers_json && !e->src->peers_all)
        return fail_at(d,
                       "nvlink_peers",
                       CRATER_ECONFLICT,
                       "with count > 1 the only peer list allowed is "
                       "\"all\"");
    if (n->ngpus - 1 + e->count > MAXG)
        return fail_at(d,
                       (e->given & G_COUNT) ? "count" : "model",
                       CRATER_ELIMIT,
                       "a node has at most %d GPUs",
                       MAXG);
    for (uint64_t k = 1; k < e->count; k++) {
        n->ngpus++; /* reserve first: crater_node_clear frees partials */
        if (gpu_copy(&n->gpus[n->ngpus - 1], e->g) < 0)
            return oom(d);
    }
    e->src->n = e->count;
    return 0;
}

static int gpu_elem(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    struct nctx *nc = obj;
    struct gent e = {.nc = nc, .src = &nc->src[i], .count = 1};
    int rc;

    if (nc->n->ngpus >= MAXG)
        return crater_dec_fail(d,
                               CRATER_ELIMIT,
                               "a node has at most %d GPUs",
                               MAXG);
    e.g = &nc->n->gpus[nc->n->ngpus++];
    e.g->numa_node = -1;
    e.src->first = nc->n->ngpus - 1;
    nc->nsrc = i + 1;
    rc = crater_dec_object(d, v, gpu_fields, &e);
    if (rc == 0)
        rc = gpu_complete(d, &e);
    if (rc == 0)
        rc = gpu_expand(d, &e);
    free(e.model_text);
    return rc;
}

static int n_gpus(crater_dec_t *d, json_t *v, void *obj)
{
    struct nctx *nc = obj;

    if (!(nc->n->gpus = calloc(MAXG, sizeof(crater_gpu_t))))
        return oom(d);
    return crater_dec_array(d, v, MAXG, gpu_elem, nc);
}

/* ---- cpus[] ---- */

enum {
    C_CORES = 1u << 0,
    C_THREADS = 1u << 1,
    C_IPC = 1u << 2,
    C_BW = 1u << 3,
    C_VENDOR = 1u << 4,
};

struct cent {
    struct nctx *nc;
    crater_cpu_t *c;
    unsigned given;
    const char *bw_key;
    char *model_text;
};

static int c_vendor(crater_dec_t *d, json_t *v, void *obj)
{
    struct cent *e = obj;

    e->given |= C_VENDOR;
    return crater_dec_str(d, v, HW_SHORT_MAX, &e->c->vendor);
}

static int c_model(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_str(d, v, 128, &((struct cent *)obj)->model_text);
}

static int c_cores(crater_dec_t *d, json_t *v, void *obj)
{
    struct cent *e = obj;

    e->given |= C_CORES;
    return crater_dec_u32(d, v, 1, 100000, &e->c->cores);
}

static int c_threads(crater_dec_t *d, json_t *v, void *obj)
{
    struct cent *e = obj;

    e->given |= C_THREADS;
    return crater_dec_u32(d, v, 1, 400000, &e->c->threads);
}

static int c_numa(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_numa(d, v, 0, &((struct cent *)obj)->c->numa_node);
}

static int c_pci(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_pci(d, v, &((struct cent *)obj)->c->pci_root);
}

static int c_ipc(crater_dec_t *d, json_t *v, void *obj)
{
    struct cent *e = obj;

    e->given |= C_IPC;
    if (crater_dec_double(d, v, 0.0, 100.0, &e->c->ipc_baseline) < 0)
        return -1;
    if (e->c->ipc_baseline <= 0.0)
        return crater_dec_fail(d,
                               CRATER_ERANGE,
                               "ipc_baseline must be above 0");
    return 0;
}

static int c_bw(crater_dec_t *d, json_t *v, void *obj)
{
    struct cent *e = obj;

    if (spell(d, &e->given, C_BW, &e->bw_key, "memory_bandwidth") < 0)
        return -1;
    return qty(d, v, CRATER_DIM_BANDWIDTH, &e->c->memory_bandwidth);
}

static int c_bw_gbps(crater_dec_t *d, json_t *v, void *obj)
{
    struct cent *e = obj;

    if (spell(d, &e->given, C_BW, &e->bw_key, "memory_bandwidth_gbps") < 0)
        return -1;
    return crater_kb_dec_gbps(d, v, &e->c->memory_bandwidth);
}

static const crater_dec_field_t cpu_fields[] = {
    {"vendor", c_vendor, 0},
    {"model", c_model, 0},
    {"cores", c_cores, 0},
    {"threads", c_threads, 0},
    {"numa_node", c_numa, 0},
    {"pci_root", c_pci, 0},
    {"ipc_baseline", c_ipc, 0},
    {"memory_bandwidth", c_bw, 0},
    {"memory_bandwidth_gbps", c_bw_gbps, 0},
    {NULL, NULL, 0},
};

static int cpu_complete(crater_dec_t *d, struct cent *e)
{
    const crater_kb_cpu_t *k = NULL;
    crater_cpu_t *c = e->c;

    if (e->model_text) {
        k = crater_kb_cpu(e->nc->kb, e->model_text);
        if (set_model(d, e->model_text, k ? k->key : NULL, &c->model) < 0)
            return -1;
    }
    if (k && !(e->given & C_VENDOR) && k->vendor
        && !(c->vendor = strdup(k->vendor)))
        return oom(d);
    if (k && !(e->given & C_CORES))
        c->cores = k->cores;
    if (!(e->given & C_IPC))
        c->ipc_baseline = k ? k->ipc_baseline : 1.0;
    if (k && !(e->given & C_BW))
        c->memory_bandwidth = k->memory_bandwidth;
    if (!c->cores && e->model_text)
        return fail_at(d,
                       "model",
                       CRATER_EMISSING,
                       "the core count of CPU model '%s' is not known: "
                       "give cores",
                       e->model_text);
    if (!c->cores)
        return crater_dec_fail(d,
                               CRATER_EMISSING,
                               "missing required field 'cores'");
    if (!(e->given & C_THREADS))
        c->threads = c->cores;
    if (c->threads < c->cores)
        return fail_at(d,
                       "threads",
                       CRATER_ERANGE,
                       "threads (%u) must be at least cores (%u)",
                       c->threads,
                       c->cores);
    return 0;
}

static int cpu_elem(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    struct nctx *nc = obj;
    struct cent e = {.nc = nc, .c = &nc->n->cpus[i]};
    int rc;

    nc->n->ncpus = i + 1;
    rc = crater_dec_object(d, v, cpu_fields, &e);
    if (rc == 0)
        rc = cpu_complete(d, &e);
    for (size_t j = 0; rc == 0 && j < i; j++)
        if (nc->n->cpus[j].numa_node == e.c->numa_node)
            rc = fail_at(d,
                         json_object_get(v, "numa_node") ? "numa_node" : NULL,
                         CRATER_ECONFLICT,
                         "two cpus entries on NUMA node %d (give one "
                         "entry per NUMA node)",
                         e.c->numa_node);
    free(e.model_text);
    return rc;
}

static int n_cpus(crater_dec_t *d, json_t *v, void *obj)
{
    struct nctx *nc = obj;

    if (prep(d, v, HW_MAX_CPUS, sizeof(crater_cpu_t), (void **)&nc->n->cpus)
        < 0)
        return -1;
    return crater_dec_array(d, v, HW_MAX_CPUS, cpu_elem, nc);
}

/* ---- memory[] ---- */

enum {
    M_BW = 1u << 0,
    M_LAT = 1u << 1
};

struct ment {
    crater_mem_t *m;
    unsigned given;
    const char *bw_key, *lat_key;
};

static int m_numa(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_numa(d, v, 0, &((struct ment *)obj)->m->numa_node);
}

static int m_capacity(crater_dec_t *d, json_t *v, void *obj)
{
    struct ment *e = obj;

    if (qty(d, v, CRATER_DIM_BYTES, &e->m->capacity) < 0)
        return -1;
    if (!e->m->capacity)
        return crater_dec_fail(d, CRATER_ERANGE, "capacity must be above 0");
    return 0;
}

static int m_bw(crater_dec_t *d, json_t *v, void *obj)
{
    struct ment *e = obj;

    if (spell(d, &e->given, M_BW, &e->bw_key, "bandwidth") < 0)
        return -1;
    return qty(d, v, CRATER_DIM_BANDWIDTH, &e->m->bandwidth);
}

static int m_bw_gbps(crater_dec_t *d, json_t *v, void *obj)
{
    struct ment *e = obj;

    if (spell(d, &e->given, M_BW, &e->bw_key, "bandwidth_gbps") < 0)
        return -1;
    return crater_kb_dec_gbps(d, v, &e->m->bandwidth);
}

/* A duration quantity in ns that must fit 32 bits of the given unit. */
static int latency(crater_dec_t *d, json_t *v, uint64_t unit_ns, uint32_t *out)
{
    uint64_t ns;

    if (crater_dec_quantity(d, v, CRATER_DIM_DURATION, &ns) < 0)
        return -1;
    ns = ns / unit_ns + (ns % unit_ns != 0); /* round up, as units.h does */
    if (ns > UINT32_MAX)
        return crater_dec_fail(d, CRATER_ERANGE, "latency is too large");
    *out = (uint32_t)ns;
    return 0;
}

static int m_lat(crater_dec_t *d, json_t *v, void *obj)
{
    struct ment *e = obj;

    if (spell(d, &e->given, M_LAT, &e->lat_key, "latency") < 0)
        return -1;
    return latency(d, v, 1, &e->m->latency_ns);
}

static int m_lat_ns(crater_dec_t *d, json_t *v, void *obj)
{
    struct ment *e = obj;

    if (spell(d, &e->given, M_LAT, &e->lat_key, "latency_ns") < 0)
        return -1;
    return crater_dec_u32(d, v, 0, UINT32_MAX, &e->m->latency_ns);
}

static const crater_dec_field_t mem_fields[] = {
    {"numa_node", m_numa, 0},
    {"capacity", m_capacity, CRATER_FIELD_REQUIRED},
    {"bandwidth", m_bw, 0},
    {"bandwidth_gbps", m_bw_gbps, 0},
    {"latency", m_lat, 0},
    {"latency_ns", m_lat_ns, 0},
    {NULL, NULL, 0},
};

static int mem_elem(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    crater_node_t *n = ((struct nctx *)obj)->n;
    struct ment e = {.m = &n->mems[i]};

    n->nmems = i + 1;
    if (crater_dec_object(d, v, mem_fields, &e) < 0)
        return -1;
    for (size_t j = 0; j < i; j++)
        if (n->mems[j].numa_node == e.m->numa_node)
            return fail_at(d,
                           json_object_get(v, "numa_node") ? "numa_node" : NULL,
                           CRATER_ECONFLICT,
                           "two memory entries on NUMA node %d (give one "
                           "entry per NUMA node)",
                           e.m->numa_node);
    return 0;
}

static int n_memory(crater_dec_t *d, json_t *v, void *obj)
{
    struct nctx *nc = obj;

    if (prep(d, v, HW_MAX_MEMS, sizeof(crater_mem_t), (void **)&nc->n->mems)
        < 0)
        return -1;
    return crater_dec_array(d, v, HW_MAX_MEMS, mem_elem, nc);
}

/* ---- storage[] ---- */

struct sent {
    crater_storage_t *s;
    unsigned given;
    const char *bw_key, *lat_key;
};

static int s_device(crater_dec_t *d, json_t *v, void *obj)
{
    struct sent *e = obj;

    if (crater_dec_str(d, v, HW_SHORT_MAX, &e->s->device) < 0)
        return -1;
    if (!*e->s->device)
        return crater_dec_fail(d, CRATER_EINVAL, "empty device name");
    return 0;
}

static int s_iface(crater_dec_t *d, json_t *v, void *obj)
{
    static const char *const names[] =
        {NULL, "nvme", "sata", "sas", "virtio", "network"};
    int i;

    if (crater_dec_enum(d, v, names, 6, &i) < 0)
        return -1;
    ((struct sent *)obj)->s->iface = (crater_iface_t)i;
    return 0;
}

static int s_model(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_str(d, v, 128, &((struct sent *)obj)->s->model);
}

static int s_capacity(crater_dec_t *d, json_t *v, void *obj)
{
    struct sent *e = obj;

    if (qty(d, v, CRATER_DIM_BYTES, &e->s->capacity) < 0)
        return -1;
    if (!e->s->capacity)
        return crater_dec_fail(d, CRATER_ERANGE, "capacity must be above 0");
    return 0;
}

static int s_iops(crater_dec_t *d, json_t *v, void *obj)
{
    return qty(d, v, CRATER_DIM_IOPS, &((struct sent *)obj)->s->iops);
}

static int s_bw(crater_dec_t *d, json_t *v, void *obj)
{
    struct sent *e = obj;

    if (spell(d, &e->given, M_BW, &e->bw_key, "bandwidth") < 0)
        return -1;
    return qty(d, v, CRATER_DIM_BANDWIDTH, &e->s->bandwidth);
}

static int s_bw_gbps(crater_dec_t *d, json_t *v, void *obj)
{
    struct sent *e = obj;

    if (spell(d, &e->given, M_BW, &e->bw_key, "bandwidth_gbps") < 0)
        return -1;
    return crater_kb_dec_gbps(d, v, &e->s->bandwidth);
}

static int s_lat(crater_dec_t *d, json_t *v, void *obj)
{
    struct sent *e = obj;

    if (spell(d, &e->given, M_LAT, &e->lat_key, "latency") < 0)
        return -1;
    return latency(d, v, 1000, &e->s->latency_us);
}

static int s_lat_us(crater_dec_t *d, json_t *v, void *obj)
{
    struct sent *e = obj;

    if (spell(d, &e->given, M_LAT, &e->lat_key, "latency_us") < 0)
        return -1;
    return crater_dec_u32(d, v, 0, UINT32_MAX, &e->s->latency_us);
}

static int s_qd(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_u32(d,
                          v,
                          1,
                          1u << 24,
                          &((struct sent *)obj)->s->queue_depth);
}

static int s_rot(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_bool(d, v, &((struct sent *)obj)->s->rotational);
}

static int s_numa(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_numa(d, v, -1, &((struct sent *)obj)->s->numa_node);
}

static const crater_dec_field_t storage_fields[] = {
    {"device", s_device, CRATER_FIELD_REQUIRED},
    {"interface", s_iface, 0},
    {"model", s_model, 0},
    {"capacity", s_capacity, CRATER_FIELD_REQUIRED},
    {"iops", s_iops, 0},
    {"bandwidth", s_bw, 0},
    {"bandwidth_gbps", s_bw_gbps, 0},
    {"latency", s_lat, 0},
    {"latency_us", s_lat_us, 0},
    {"queue_depth", s_qd, 0},
    {"rotational", s_rot, 0},
    {"numa_node", s_numa, 0},
    {NULL, NULL, 0},
};

static int storage_elem(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    crater_node_t *n = ((struct nctx *)obj)->n;
    struct sent e = {.s = &n->storage[i]};

    n->nstorage = i + 1;
    e.s->numa_node = -1;
    if (crater_dec_object(d, v, storage_fields, &e) < 0)
        return -1;
    for (size_t j = 0; j < i; j++)
        if (strcmp(n->storage[j].device, e.s->device) == 0)
            return fail_at(d,
                           "device",
                           CRATER_ECONFLICT,
                           "device '%s' is listed twice",
                           e.s->device);
    return 0;
}

static int n_storage(crater_dec_t *d, json_t *v, void *obj)
{
    struct nctx *nc = obj;

    if (prep(d,
             v,
             HW_MAX_STORAGE,
             sizeof(crater_storage_t),
             (void **)&nc->n->storage)
        < 0)
        return -1;
    return crater_dec_array(d, v, HW_MAX_STORAGE, storage_elem, nc);
}

/* ---- node metadata ---- */

static int n_name(crater_dec_t *d, json_t *v, void *obj)
{
    crater_node_t *n = ((struct nctx *)obj)->n;

    if (crater_dec_str(d, v, CRATER_NAME_MAX, &n->name) < 0)
        return -1;
    if (!dns_ok(n->name))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%s' is not a valid node name (lowercase "
                               "letters, digits, '-' and '.', starting and "
                               "ending with a letter or digit)",
                               n->name);
    return 0;
}

static int n_labels(crater_dec_t *d, json_t *v, void *obj)
{
    crater_node_t *n = ((struct nctx *)obj)->n;
    const char *key;
    json_t *val;

    if (!json_is_object(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a mapping, got %s",
                               crater_dec_typename(v));
    if (json_object_size(v) > HW_MAX_LABELS)
        return crater_dec_fail(d,
                               CRATER_ELIMIT,
                               "at most %d labels",
                               HW_MAX_LABELS);
    if (!(n->labels = calloc(json_object_size(v) + 1, sizeof(crater_kv_t))))
        return oom(d);
    json_object_foreach(v, key, val)
    {
        size_t mk = crater_dec_push_key(d, key);
        crater_kv_t *kv = &n->labels[n->nlabels++];
        if (!crater_label_key_ok(key))
            return crater_dec_fail(d,
                                   CRATER_EINVAL,
                                   "'%s' is not a valid label key",
                                   key);
        if (!(kv->key = strdup(key)))
            return oom(d);
        if (crater_dec_str(d, val, HW_SHORT_MAX, &kv->value) < 0)
            return -1;
        crater_dec_pop(d, mk);
    }
    return 0;
}

static int t_key(crater_dec_t *d, json_t *v, void *obj)
{
    crater_taint_t *t = obj;

    if (crater_dec_str(d, v, HW_STR_MAX, &t->key) < 0)
        return -1;
    if (!crater_label_key_ok(t->key))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%s' is not a valid taint key",
                               t->key);
    return 0;
}

static int t_value(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_str(d, v, HW_SHORT_MAX, &((crater_taint_t *)obj)->value);
}

static int t_effect(crater_dec_t *d, json_t *v, void *obj)
{
    static const char *const names[] = {
        [CRATER_TAINT_NO_SCHEDULE] = "NoSchedule",
        [CRATER_TAINT_PREFER_NO_SCHEDULE] = "PreferNoSchedule",
        [CRATER_TAINT_NO_EXECUTE] = "NoExecute",
    };
    int i;

    if (crater_dec_enum(d, v, names, 3, &i) < 0)
        return -1;
    ((crater_taint_t *)obj)->effect = (crater_taint_effect_t)i;
    return 0;
}

static const crater_dec_field_t taint_fields[] = {
    {"key", t_key, CRATER_FIELD_REQUIRED},
    {"value", t_value, 0},
    {"effect", t_effect, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

static int taint_elem(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    crater_node_t *n = obj;

    n->ntaints = i + 1;
    return crater_dec_object(d, v, taint_fields, &n->taints[i]);
}

static int n_taints(crater_dec_t *d, json_t *v, void *obj)
{
    crater_node_t *n = ((struct nctx *)obj)->n;

    if (prep(d, v, HW_MAX_TAINTS, sizeof(crater_taint_t), (void **)&n->taints)
        < 0)
        return -1;
    return crater_dec_array(d, v, HW_MAX_TAINTS, taint_elem, n);
}

static int n_samples(crater_dec_t *d, json_t *v, void *obj)
{
    static const char *const names[] = {
        [CRATER_SAMPLES_REAL] = "real",
        [CRATER_SAMPLES_SYNTHETIC] = "synthetic",
    };
    int i;

    if (crater_dec_enum(d, v, names, 2, &i) < 0)
        return -1;
    ((struct nctx *)obj)->n->samples = (crater_samples_t)i;
    return 0;
}

static int n_datasets(crater_dec_t *d, json_t *v, void *obj)
{
    crater_node_t *n = ((struct nctx *)obj)->n;

    return crater_dec_strv(d,
                           v,
                           HW_MAX_DATASETS,
                           HW_STR_MAX,
                           &n->datasets,
                           NULL);
}

static int n_count(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_uint(d, v, 1, HW_MAX_NODES, &((struct nctx *)obj)->count);
}

static int n_api(crater_dec_t *d, json_t *v, void *obj)
{
    (void)obj;
    return crater_dec_literal(d, v, "crater/v1");
}

static int n_kind(crater_dec_t *d, json_t *v, void *obj)
{
    (void)d, (void)v, (void)obj;
    return 0; /* read and checked before the table runs */
}

#define NODE_FIELDS                                                   \
    {"name", n_name, CRATER_FIELD_REQUIRED}, {"labels", n_labels, 0}, \
        {"taints", n_taints, 0}, {"samples", n_samples, 0},           \
        {"datasets", n_datasets, 0}, {"cpus", n_cpus, 0},             \
        {"memory", n_memory, 0}, {"gpus", n_gpus, 0},                 \
    {                                                                 \
        "storage", n_storage, 0                                       \
    }

static const crater_dec_field_t node_doc_fields[] = {
    {"apiVersion", n_api, 0},
    {"kind", n_kind, CRATER_FIELD_REQUIRED},
    NODE_FIELDS,
    {NULL, NULL, 0},
};

static const crater_dec_field_t node_entry_fields[] = {
    {"count", n_count, 0},
    NODE_FIELDS,
    {NULL, NULL, 0},
};

/* ---- whole-node checks ---- */

/* Enter gpus[src].key for a message about GPU entry src. */
static void push_gpu(crater_dec_t *d, size_t src, const char *key)
{
    crater_dec_push_key(d, "gpus");
    crater_dec_push_index(d, src);
    if (key)
        crater_dec_push_key(d, key);
}

static int numa_known(const crater_node_t *n, int numa)
{
    if (numa < 0 || (!n->ncpus && !n->nmems))
        return 1;
    for (size_t i = 0; i < n->ncpus; i++)
        if (n->cpus[i].numa_node == numa)
            return 1;
    for (size_t i = 0; i < n->nmems; i++)
        if (n->mems[i].numa_node == numa)
            return 1;
    return 0;
}

static int check_numa(crater_dec_t *d, struct nctx *nc)
{
    crater_node_t *n = nc->n;

    for (size_t s = 0; s < nc->nsrc; s++) {
        int numa = n->gpus[nc->src[s].first].numa_node;
        if (!numa_known(n, numa)) {
            push_gpu(d, s, "numa_node");
            return crater_dec_fail(d,
                                   CRATER_EINVAL,
                                   "NUMA node %d has no cpus or memory "
                                   "entry",
                                   numa);
        }
    }
    for (size_t i = 0; i < n->nstorage; i++) {
        if (!numa_known(n, n->storage[i].numa_node)) {
            crater_dec_push_key(d, "storage");
            crater_dec_push_index(d, i);
            crater_dec_push_key(d, "numa_node");
            return crater_dec_fail(d,
                                   CRATER_EINVAL,
                                   "NUMA node %d has no cpus or memory "
                                   "entry",
                                   n->storage[i].numa_node);
        }
    }
    return 0;
}

/* Explicit peers: in range and not the GPU itself; blame the element. */
static int check_peer_list(crater_dec_t *d, struct nctx *nc, size_t s)
{
    const struct gsrc *g = &nc->src[s];
    size_t k;
    json_t *el;

    json_array_foreach(g->peers_json, k, el)
    {
        json_int_t p = json_integer_value(el);
        if ((size_t)p < nc->n->ngpus && (size_t)p != g->first)
            continue;
        push_gpu(d, s, "nvlink_peers");
        crater_dec_push_index(d, k);
        if ((size_t)p == g->first)
            return crater_dec_fail(d,
                                   CRATER_EINVAL,
                                   "GPU %zu cannot be its own NVLink peer",
                                   g->first);
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "no GPU %lld: the node has %zu GPUs (0-%zu)",
                               (long long)p,
                               nc->n->ngpus,
                               nc->n->ngpus - 1);
    }
    return 0;
}

static int set_peers(crater_dec_t *d, struct nctx *nc)
{
    crater_node_t *n = nc->n;
    uint64_t all = n->ngpus == 64 ? ~0ull : (1ull << n->ngpus) - 1;

    for (size_t s = 0; s < nc->nsrc; s++) {
        const struct gsrc *g = &nc->src[s];
        if (g->peers_json && !g->peers_all && check_peer_list(d, nc, s) < 0)
            return -1;
        for (size_t i = g->first; i < g->first + g->n; i++)
            n->gpus[i].nvlink_peers =
                g->peers_all ? all & ~(1ull << i) : g->peers;
    }
    return 0;
}

static size_t src_of(const struct nctx *nc, size_t gpu)
{
    for (size_t s = 0; s < nc->nsrc; s++)
        if (gpu >= nc->src[s].first && gpu < nc->src[s].first + nc->src[s].n)
            return s;
    return 0;
}

static int check_links(crater_dec_t *d, struct nctx *nc)
{
    crater_node_t *n = nc->n;

    for (size_t i = 0; i < n->ngpus; i++) {
        for (size_t j = 0; j < n->ngpus; j++) {
            if (!(n->gpus[i].nvlink_peers >> j & 1)
                || (n->gpus[j].nvlink_peers >> i & 1))
                continue;
            push_gpu(d, src_of(nc, i), "nvlink_peers");
            return crater_dec_fail(d,
                                   CRATER_EINVAL,
                                   "GPU %zu lists GPU %zu as an NVLink peer "
                                   "but GPU %zu does not list GPU %zu",
                                   i,
                                   j,
                                   j,
                                   i);
        }
        if (n->gpus[i].nvlink_peers && !n->gpus[i].nvlink_bandwidth) {
            push_gpu(d, src_of(nc, i), "nvlink_peers");
            return crater_dec_fail(d,
                                   CRATER_EINVAL,
                                   "GPU %zu has NVLink peers but no NVLink "
                                   "bandwidth: set nvlink_bandwidth",
                                   i);
        }
    }
    return 0;
}

/* uuids (when given) and PCI addresses are unique within a node; a node
 * entry that makes several nodes cannot give uuids. */
static int check_ids(crater_dec_t *d, struct nctx *nc)
{
    crater_node_t *n = nc->n;

    for (size_t i = 0; i < n->ngpus; i++) {
        const crater_gpu_t *g = &n->gpus[i];
        if (g->uuid && nc->count > 1) {
            push_gpu(d, src_of(nc, i), "uuid");
            return crater_dec_fail(d,
                                   CRATER_ECONFLICT,
                                   "a uuid names one GPU: not allowed in a "
                                   "node entry with count > 1");
        }
        for (size_t j = 0; j < i; j++) {
            const crater_gpu_t *h = &n->gpus[j];
            const char *what =
                g->uuid && h->uuid && !strcmp(g->uuid, h->uuid) ? "uuid"
                : g->pci_bus_id && h->pci_bus_id
                        && !strcasecmp(g->pci_bus_id, h->pci_bus_id)
                    ? "pci_bus_id"
                    : NULL;
            if (!what)
                continue;
            push_gpu(d, src_of(nc, i), what);
            return crater_dec_fail(d,
                                   CRATER_ECONFLICT,
                                   "GPUs %zu and %zu have the same %s",
                                   j,
                                   i,
                                   what);
        }
    }
    return 0;
}

static int node_check(crater_dec_t *d, struct nctx *nc)
{
    size_t mk = d->len;

    if (check_numa(d, nc) < 0 || set_peers(d, nc) < 0 || check_links(d, nc) < 0
        || check_ids(d, nc) < 0)
        return -1;
    crater_dec_pop(d, mk);
    return 0;
}

static int decode_node(crater_dec_t *d,
                       json_t *v,
                       struct nctx *nc,
                       const crater_dec_field_t *fields)
{
    nc->n->samples = CRATER_SAMPLES_SYNTHETIC;
    if (crater_dec_object(d, v, fields, nc) < 0)
        return -1;
    return node_check(d, nc);
}

/* ---- cluster assembly ---- */

struct acc {
    crater_cluster_t *c;
    size_t cap;
    size_t *entry; /* per node: its nodes[] entry, or SIZE_MAX (Node doc) */
    size_t first;  /* first node of the current document */
    size_t ngpus;  /* GPUs placed so far */
    const crater_kb_t *kb;
};

static int acc_grow(struct acc *a, size_t more)
{
    size_t need = a->c->nnodes + more, cap = a->cap ? a->cap : 8;
    crater_node_t *n;
    size_t *e;

    if (need <= a->cap)
        return 0;
    while (cap < need)
        cap *= 2;
    if (!(n = realloc(a->c->nodes, cap * sizeof(*n))))
        return -1;
    a->c->nodes = n;
    if (!(e = realloc(a->entry, cap * sizeof(*e))))
        return -1;
    a->entry = e;
    a->cap = cap;
    return 0;
}

static int strv_copy(char ***dst, char **src)
{
    if (!src)
        return 0;
    *dst = crater_strv_dup(src);
    return *dst ? 0 : -1;
}

static char *sdup(const char *s, int *ok)
{
    char *c = s ? strdup(s) : NULL;

    if (s && !c)
        *ok = 0;
    return c;
}

static int node_meta_copy(crater_node_t *dst, const crater_node_t *src)
{
    int ok = 1;

    if (src->nlabels
        && !(dst->labels = calloc(src->nlabels, sizeof(*dst->labels))))
        return -1;
    for (size_t i = 0; i < src->nlabels; i++, dst->nlabels++) {
        dst->labels[i].key = sdup(src->labels[i].key, &ok);
        dst->labels[i].value = sdup(src->labels[i].value, &ok);
    }
    if (src->ntaints
        && !(dst->taints = calloc(src->ntaints, sizeof(*dst->taints))))
        return -1;
    for (size_t i = 0; i < src->ntaints; i++, dst->ntaints++) {
        dst->taints[i] = src->taints[i];
        dst->taints[i].key = sdup(src->taints[i].key, &ok);
        dst->taints[i].value = sdup(src->taints[i].value, &ok);
    }
    return ok && strv_copy(&dst->datasets, src->datasets) == 0 ? 0 : -1;
}

static int node_res_copy(crater_node_t *dst, const crater_node_t *src)
{
    int ok = 1;

    if ((src->ngpus && !(dst->gpus = calloc(src->ngpus, sizeof(*dst->gpus))))
        || (src->ncpus && !(dst->cpus = calloc(src->ncpus, sizeof(*dst->cpus))))
        || (src->nmems
            && !(dst->mems = malloc(src->nmems * sizeof(*dst->mems))))
        || (src->nstorage
            && !(dst->storage = calloc(src->nstorage, sizeof(*dst->storage)))))
        return -1;
    for (; dst->ngpus < src->ngpus; dst->ngpus++)
        if (gpu_copy(&dst->gpus[dst->ngpus], &src->gpus[dst->ngpus]) < 0)
            ok = 0;
    for (size_t i = 0; i < src->ncpus; i++, dst->ncpus++) {
        dst->cpus[i] = src->cpus[i];
        dst->cpus[i].vendor = sdup(src->cpus[i].vendor, &ok);
        dst->cpus[i].model = sdup(src->cpus[i].model, &ok);
        dst->cpus[i].pci_root = sdup(src->cpus[i].pci_root, &ok);
    }
    if (src->nmems)
        memcpy(dst->mems, src->mems, src->nmems * sizeof(*dst->mems));
    dst->nmems = src->nmems;
    for (size_t i = 0; i < src->nstorage; i++, dst->nstorage++) {
        dst->storage[i] = src->storage[i];
        dst->storage[i].device = sdup(src->storage[i].device, &ok);
        dst->storage[i].model = sdup(src->storage[i].model, &ok);
    }
    return ok ? 0 : -1;
}

/* Deep copy of src named name-k. */
static int node_copy_named(crater_node_t *dst,
                           const crater_node_t *src,
                           uint64_t k)
{
    char name[CRATER_NAME_MAX + 24];

    memset(dst, 0, sizeof(*dst));
    dst->samples = src->samples;
    snprintf(name, sizeof(name), "%s-%llu", src->name, (unsigned long long)k);
    if (!(dst->name = strdup(name)) || node_meta_copy(dst, src) < 0
        || node_res_copy(dst, src) < 0) {
        crater_node_clear(dst);
        return -1;
    }
    return 0;
}

static uint64_t fnv1a(const char *s, uint64_t h)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t mix64(uint64_t x) /* splitmix64's finaliser */
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Deterministic uuids for GPUs the file did not name. */
static int fill_uuids(crater_node_t *n)
{
    for (size_t i = 0; i < n->ngpus; i++) {
        char key[CRATER_NAME_MAX + 32], buf[48];
        uint64_t a, b;

        if (n->gpus[i].uuid)
            continue;
        snprintf(key, sizeof(key), "crater-gpu/%s/%zu", n->name, i);
        a = mix64(fnv1a(key, 0xcbf29ce484222325ull));
        b = mix64(a ^ fnv1a(key, 0x84222325cbf29ce4ull));
        snprintf(buf,
                 sizeof(buf),
                 "GPU-%08x-%04x-%04x-%04x-%012llx",
                 (unsigned)(a >> 32),
                 (unsigned)(a >> 16) & 0xffffu,
                 (unsigned)a & 0xffffu,
                 (unsigned)(b >> 48),
                 (unsigned long long)(b & 0xffffffffffffull));
        if (!(n->gpus[i].uuid = strdup(buf)))
            return -1;
    }
    return 0;
}

/* Move tmpl into the cluster, expanded to count nodes. tmpl is consumed
 * (cleared) either way. */
static int place(crater_dec_t *d,
                 struct acc *a,
                 crater_node_t *tmpl,
                 uint64_t count,
                 size_t entry)
{
    crater_cluster_t *c = a->c;
    int rc = 0;

    if (c->nnodes + count > HW_MAX_NODES)
        rc = crater_dec_fail(d,
                             CRATER_ELIMIT,
                             "more than %d nodes in the cluster",
                             HW_MAX_NODES);
    else if (a->ngpus + count * tmpl->ngpus > HW_MAX_GPUS)
        rc = crater_dec_fail(d,
                             CRATER_ELIMIT,
                             "more than %d GPUs in the cluster",
                             HW_MAX_GPUS);
    else if (acc_grow(a, count) < 0)
        rc = oom(d);
    for (uint64_t k = 0; rc == 0 && count > 1 && k < count; k++) {
        if (node_copy_named(&c->nodes[c->nnodes], tmpl, k) < 0)
            rc = oom(d);
        else
            a->entry[c->nnodes++] = entry;
    }
    if (rc == 0)
        a->ngpus += count * tmpl->ngpus;
    if (rc == 0 && count == 1) {
        c->nodes[c->nnodes] = *tmpl;
        memset(tmpl, 0, sizeof(*tmpl));
        a->entry[c->nnodes++] = entry;
    }
    crater_node_clear(tmpl);
    return rc;
}

static int entry_elem(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    struct acc *a = obj;
    crater_node_t tmpl = {0};
    struct nctx nc = {.n = &tmpl, .kb = a->kb, .count = 1};
    size_t digits = 1;

    if (decode_node(d, v, &nc, node_entry_fields) < 0) {
        crater_node_clear(&tmpl);
        return -1;
    }
    for (uint64_t x = nc.count - 1; x >= 10; x /= 10)
        digits++;
    if (nc.count > 1 && strlen(tmpl.name) + 1 + digits > CRATER_NAME_MAX) {
        crater_node_clear(&tmpl);
        return fail_at(d,
                       "name",
                       CRATER_ELIMIT,
                       "with its count the node names would be longer "
                       "than %d characters",
                       CRATER_NAME_MAX);
    }
    if (nc.count > 1)
        crater_dec_push_key(d, "count");
    return place(d, a, &tmpl, nc.count, i);
}

/* ---- uniqueness across the cluster ---- */

struct ref {
    const char *s;
    size_t idx;
};

static int cmp_ref(const void *x, const void *y)
{
    const struct ref *a = x, *b = y;
    int c = strcmp(a->s, b->s);

    return c ? c : (a->idx > b->idx) - (a->idx < b->idx);
}

/* The earliest second occurrence of any string: its ref index into r
 * sorted, or -1; *other gets the first occurrence. */
static long first_dup(struct ref *r, size_t n, size_t *other)
{
    long best = -1;

    qsort(r, n, sizeof(*r), cmp_ref);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(r[i].s, r[i - 1].s) != 0
            || (i >= 2 && strcmp(r[i - 1].s, r[i - 2].s) == 0))
            continue;
        if (best < 0 || r[i].idx < r[best].idx) {
            best = (long)i;
            *other = r[i - 1].idx;
        }
    }
    return best;
}

static void push_node(crater_dec_t *d, const struct acc *a, size_t node)
{
    if (a->entry[node] == SIZE_MAX)
        return;
    crater_dec_push_key(d, "nodes");
    crater_dec_push_index(d, a->entry[node]);
}

static int check_names(crater_dec_t *d, struct acc *a)
{
    crater_cluster_t *c = a->c;
    struct ref *r = malloc((c->nnodes ? c->nnodes : 1) * sizeof(*r));
    size_t other = 0;
    long dup;

    if (!r)
        return oom(d);
    for (size_t i = 0; i < c->nnodes; i++)
        r[i] = (struct ref){c->nodes[i].name, i};
    dup = first_dup(r, c->nnodes, &other);
    if (dup >= 0) {
        size_t node = r[dup].idx;
        free(r);
        push_node(d, a, node);
        crater_dec_push_key(d, "name");
        return crater_dec_fail(d,
                               CRATER_ECONFLICT,
                               "duplicate node name '%s'",
                               c->nodes[node].name);
    }
    free(r);
    return 0;
}

static int check_uuids(crater_dec_t *d, struct acc *a)
{
    crater_cluster_t *c = a->c;
    size_t n = 0, other = 0;
    struct ref *r;
    long dup;

    for (size_t i = 0; i < c->nnodes; i++)
        n += c->nodes[i].ngpus;
    if (!(r = malloc((n ? n : 1) * sizeof(*r))))
        return oom(d);
    n = 0;
    for (size_t i = 0; i < c->nnodes; i++)
        for (size_t j = 0; j < c->nodes[i].ngpus; j++)
            r[n++] = (struct ref){c->nodes[i].gpus[j].uuid, i * MAXG + j};
    dup = first_dup(r, n, &other);
    if (dup >= 0) {
        size_t node = r[dup].idx / MAXG, gpu = r[dup].idx % MAXG;
        free(r);
        push_node(d, a, node);
        crater_dec_push_key(d, "gpus");
        return crater_dec_fail(d,
                               CRATER_ECONFLICT,
                               "GPU %zu has uuid '%s', also used by node "
                               "'%s'",
                               gpu,
                               c->nodes[node].gpus[gpu].uuid,
                               c->nodes[other / MAXG].name);
    }
    free(r);
    return 0;
}

/* ---- documents ---- */

static int root_kind(crater_dec_t *d, json_t *root, int *cluster)
{
    static const char *const kinds[] = {"Node", "Cluster"};
    json_t *k;
    size_t mk;
    int i;

    if (!json_is_object(root))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "a hardware document must be a mapping, "
                               "got %s",
                               crater_dec_typename(root));
    if (!(k = json_object_get(root, "kind")))
        return crater_dec_fail(d,
                               CRATER_EMISSING,
                               "missing required field 'kind' (Node or "
                               "Cluster)");
    mk = crater_dec_push_key(d, "kind");
    if (crater_dec_enum(d, k, kinds, 2, &i) < 0)
        return -1;
    crater_dec_pop(d, mk);
    *cluster = i == 1;
    return 0;
}

static int c_nodes(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_array(d, v, HW_MAX_NODES, entry_elem, obj);
}

static const crater_dec_field_t cluster_fields[] = {
    {"apiVersion", n_api, 0},
    {"kind", n_kind, CRATER_FIELD_REQUIRED},
    {"nodes", c_nodes, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

static int decode_node_doc(crater_dec_t *d, json_t *root, struct acc *a)
{
    crater_node_t tmpl = {0};
    struct nctx nc = {.n = &tmpl, .kb = a->kb, .count = 1};

    if (decode_node(d, root, &nc, node_doc_fields) < 0) {
        crater_node_clear(&tmpl);
        return -1;
    }
    return place(d, a, &tmpl, 1, SIZE_MAX);
}

/* Decode one document, appending its nodes to a->c. */
static int decode_into(crater_dec_t *d, json_t *root, struct acc *a)
{
    size_t mk = d->len;
    int cluster = 0;

    a->first = a->c->nnodes;
    if (root_kind(d, root, &cluster) < 0)
        return -1;
    if ((cluster ? crater_dec_object(d, root, cluster_fields, a)
                 : decode_node_doc(d, root, a))
        < 0)
        return -1;
    for (size_t i = a->first; i < a->c->nnodes; i++)
        if (fill_uuids(&a->c->nodes[i]) < 0)
            return oom(d);
    crater_dec_pop(d, mk);
    return check_names(d, a) < 0 || check_uuids(d, a) < 0 ? -1 : 0;
}

static crater_cluster_t *acc_init(struct acc *a, const crater_kb_t *kb)
{
    memset(a, 0, sizeof(*a));
    a->kb = kb;
    return a->c = calloc(1, sizeof(*a->c));
}

int crater_hw_decode(crater_dec_t *d,
                     json_t *root,
                     const crater_kb_t *kb,
                     crater_cluster_t **out)
{
    struct acc a;

    if (!acc_init(&a, kb))
        return oom(d);
    if (decode_into(d, root, &a) < 0) {
        crater_cluster_destroy(a.c);
        free(a.entry);
        return -1;
    }
    free(a.entry);
    *out = a.c;
    return 0;
}

int crater_hw_load(const char *path,
                   const crater_kb_t *kb,
                   crater_cluster_t **out,
                   crater_error_t *err)
{
    crater_doc_t *doc;
    struct acc a;
    int rc = 0;

    if (crater_doc_load(path, &doc, err) < 0)
        return -1;
    if (!acc_init(&a, kb))
        rc = crater_errorf(err, CRATER_ENOMEM, "out of memory");
    else if (!crater_doc_count(doc))
        rc = crater_errorf(err,
                           CRATER_EINVAL,
                           "%s: no documents",
                           crater_doc_name(doc));
    for (size_t i = 0; rc == 0 && i < crater_doc_count(doc); i++) {
        crater_dec_t d;
        crater_dec_init(&d, doc, i, err);
        rc = decode_into(&d, crater_doc_root(doc, i), &a);
    }
    crater_doc_destroy(doc);
    free(a.entry);
    if (rc < 0) {
        crater_cluster_destroy(a.c);
        return -1;
    }
    *out = a.c;
    return 0;
}

/* ---- encoding ---- */

/* Set o[k] = v (stolen); a NULL v or a failed set clears *ok. */
static void set(json_t *o, const char *k, json_t *v, int *ok)
{
    if (!v || json_object_set_new(o, k, v) < 0)
        *ok = 0;
}

static void set_str(json_t *o, const char *k, const char *s, int *ok)
{
    if (s)
        set(o, k, json_string(s), ok);
}

static void set_int(json_t *o, const char *k, uint64_t x, int *ok)
{
    set(o, k, json_integer((json_int_t)x), ok);
}

/* Bandwidths keep their unit: a bare number is refused by the parser. */
static void set_bw(json_t *o, const char *k, uint64_t x, int *ok)
{
    set(o, k, json_sprintf("%lluB/s", (unsigned long long)x), ok);
}

static json_t *done(json_t *o, int ok)
{
    if (ok && o)
        return o;
    json_decref(o);
    return NULL;
}

static json_t *peers_json(uint64_t peers)
{
    json_t *a = json_array();

    for (unsigned i = 0; a && i < MAXG; i++) {
        if ((peers >> i & 1) && json_array_append_new(a, json_integer(i)) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *gpu_json(const crater_gpu_t *g)
{
    json_t *o = json_object();
    int ok = o != NULL;

    set_str(o, "model", g->model, &ok);
    set_str(o, "vendor", g->vendor, &ok);
    set_str(o, "uuid", g->uuid, &ok);
    set_str(o, "pci_bus_id", g->pci_bus_id, &ok);
    set_str(o, "upstream_pci_bus_id", g->upstream, &ok);
    set(o, "numa_node", json_integer(g->numa_node), &ok);
    set_int(o, "memory", g->memory_bytes, &ok);
    if (g->sm_count) /* 0: unknown, and only ever from the kb */
        set_int(o, "sm_count", g->sm_count, &ok);
    if (g->compute_cap)
        set_int(o, "compute_capability", g->compute_cap, &ok);
    set_bw(o, "memory_bandwidth", g->hbm_bandwidth, &ok);
    set_bw(o, "nvlink_bandwidth", g->nvlink_bandwidth, &ok);
    if (g->nvlink_peers)
        set(o, "nvlink_peers", peers_json(g->nvlink_peers), &ok);
    set(o, "fp16_tflops", json_real(g->fp16_tflops), &ok);
    return done(o, ok);
}

static json_t *cpu_json(const crater_cpu_t *c)
{
    json_t *o = json_object();
    int ok = o != NULL;

    set_str(o, "vendor", c->vendor, &ok);
    set_str(o, "model", c->model, &ok);
    set_int(o, "cores", c->cores, &ok);
    set_int(o, "threads", c->threads, &ok);
    set(o, "numa_node", json_integer(c->numa_node), &ok);
    set_str(o, "pci_root", c->pci_root, &ok);
    set(o, "ipc_baseline", json_real(c->ipc_baseline), &ok);
    set_bw(o, "memory_bandwidth", c->memory_bandwidth, &ok);
    return done(o, ok);
}

static json_t *mem_json(const crater_mem_t *m)
{
    json_t *o = json_object();
    int ok = o != NULL;

    set(o, "numa_node", json_integer(m->numa_node), &ok);
    set_int(o, "capacity", m->capacity, &ok);
    set_bw(o, "bandwidth", m->bandwidth, &ok);
    set_int(o, "latency_ns", m->latency_ns, &ok);
    return done(o, ok);
}

static json_t *storage_json(const crater_storage_t *s)
{
    json_t *o = json_object();
    int ok = o != NULL;

    set_str(o, "device", s->device, &ok);
    if (s->iface != CRATER_IFACE_UNKNOWN)
        set_str(o, "interface", crater_iface_name(s->iface), &ok);
    set_str(o, "model", s->model, &ok);
    set_int(o, "capacity", s->capacity, &ok);
    set_int(o, "iops", s->iops, &ok);
    set_bw(o, "bandwidth", s->bandwidth, &ok);
    set_int(o, "latency_us", s->latency_us, &ok);
    if (s->queue_depth)
        set_int(o, "queue_depth", s->queue_depth, &ok);
    set(o, "rotational", json_boolean(s->rotational), &ok);
    set(o, "numa_node", json_integer(s->numa_node), &ok);
    return done(o, ok);
}

static json_t *taint_json(const crater_taint_t *t)
{
    static const char *const effects[] = {"NoSchedule",
                                          "PreferNoSchedule",
                                          "NoExecute"};
    json_t *o = json_object();
    int ok = o != NULL && (unsigned)t->effect < 3;

    set_str(o, "key", t->key, &ok);
    set_str(o, "value", t->value, &ok);
    if (ok)
        set_str(o, "effect", effects[t->effect], &ok);
    return done(o, ok);
}

typedef json_t *(*elem_json_f)(const void *elem);

static json_t *list_json(const void *base,
                         size_t n,
                         size_t size,
                         elem_json_f fn)
{
    json_t *a = json_array();

    for (size_t i = 0; a && i < n; i++) {
        if (json_array_append_new(a, fn((const char *)base + i * size)) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *gpu_elem_json(const void *p)
{
    return gpu_json(p);
}
static json_t *cpu_elem_json(const void *p)
{
    return cpu_json(p);
}
static json_t *mem_elem_json(const void *p)
{
    return mem_json(p);
}
static json_t *storage_elem_json(const void *p)
{
    return storage_json(p);
}
static json_t *taint_elem_json(const void *p)
{
    return taint_json(p);
}

static json_t *labels_json(const crater_node_t *n)
{
    json_t *o = json_object();
    int ok = o != NULL;

    for (size_t i = 0; ok && i < n->nlabels; i++)
        set_str(o, n->labels[i].key, n->labels[i].value, &ok);
    return done(o, ok);
}

static json_t *datasets_json(char *const *v)
{
    json_t *a = json_array();

    for (size_t i = 0; a && v[i]; i++) {
        if (json_array_append_new(a, json_string(v[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* A node's fields, as a cluster's nodes[] entry. */
static json_t *node_body(const crater_node_t *n, json_t *o)
{
    static const char *const samples[] = {"real", "synthetic"};
    int ok = o != NULL && (unsigned)n->samples < 2;

    set_str(o, "name", n->name, &ok);
    set(o, "labels", labels_json(n), &ok);
    set(o,
        "taints",
        list_json(n->taints, n->ntaints, sizeof(*n->taints), taint_elem_json),
        &ok);
    if (ok)
        set_str(o, "samples", samples[n->samples], &ok);
    if (n->datasets)
        set(o, "datasets", datasets_json(n->datasets), &ok);
    set(o,
        "cpus",
        list_json(n->cpus, n->ncpus, sizeof(*n->cpus), cpu_elem_json),
        &ok);
    set(o,
        "memory",
        list_json(n->mems, n->nmems, sizeof(*n->mems), mem_elem_json),
        &ok);
    set(o,
        "gpus",
        list_json(n->gpus, n->ngpus, sizeof(*n->gpus), gpu_elem_json),
        &ok);
    set(o,
        "storage",
        list_json(n->storage,
                  n->nstorage,
                  sizeof(*n->storage),
                  storage_elem_json),
        &ok);
    return done(o, ok);
}

json_t *crater_hw_encode_node(const crater_node_t *n)
{
    json_t *o = json_object();
    int ok = o != NULL;

    set_str(o, "apiVersion", "crater/v1", &ok);
    set_str(o, "kind", "Node", &ok);
    return ok ? node_body(n, o) : done(o, ok);
}

static json_t *node_elem_json(const void *p)
{
    return node_body(p, json_object());
}

json_t *crater_hw_encode(const crater_cluster_t *c)
{
    json_t *o = json_object();
    int ok = o != NULL;

    set_str(o, "apiVersion", "crater/v1", &ok);
    set_str(o, "kind", "Cluster", &ok);
    set(o,
        "nodes",
        list_json(c->nodes, c->nnodes, sizeof(*c->nodes), node_elem_json),
        &ok);
    return done(o, ok);
}
