/* node.c - adding a node: a deep copy of its capability model, and the
 * static arrays (capacities per NUMA node, GPU models and topology,
 * storage devices) the filters read on the hot path.
 *
 * GPU models are interned into a small per-sched table so that a request's
 * allowed models become a 64-bit mask; PCIe upstream ids are interned per
 * node. A node whose topology is unknown (no NUMA ids, no upstream ids)
 * is treated as one NUMA node behind one switch, which makes the topology
 * score neutral rather than wrong.
 */
#include <stdlib.h>
#include <string.h>

#include "crater/dec.h"
#include "crater/units.h"
#include "sched/internal.h"

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static int copy_kv(crater_kv_t **dst, const crater_kv_t *src, size_t n)
{
    if (n == 0)
        return 0;
    if (!(*dst = calloc(n, sizeof(**dst))))
        return -1;
    for (size_t i = 0; i < n; i++) {
        (*dst)[i].key = dup_or_null(src[i].key);
        (*dst)[i].value = dup_or_null(src[i].value);
        if (!(*dst)[i].key)
            return -1;
    }
    return 0;
}

static int copy_taints(crater_node_t *d, const crater_node_t *n)
{
    if (n->ntaints == 0)
        return 0;
    if (!(d->taints = calloc(n->ntaints, sizeof(*d->taints))))
        return -1;
    d->ntaints = n->ntaints;
    for (size_t i = 0; i < n->ntaints; i++) {
        d->taints[i].key = dup_or_null(n->taints[i].key);
        d->taints[i].value = dup_or_null(n->taints[i].value);
        d->taints[i].effect = n->taints[i].effect;
        if (!d->taints[i].key)
            return -1;
    }
    return 0;
}

/* The parts of a node the core keeps: name, labels, taints, datasets and
 * the GPU list (for UUIDs in placements). */
static int node_copy(crater_node_t *d, const crater_node_t *n)
{
    memset(d, 0, sizeof(*d));
    d->samples = n->samples;
    if (!(d->name = dup_or_null(n->name ? n->name : "")))
        return -1;
    if (copy_kv(&d->labels, n->labels, n->nlabels) < 0)
        return -1;
    d->nlabels = n->nlabels;
    if (copy_taints(d, n) < 0)
        return -1;
    if (n->datasets && !(d->datasets = crater_strv_dup(n->datasets)))
        return -1;
    if (n->ngpus && !(d->gpus = calloc(n->ngpus, sizeof(*d->gpus))))
        return -1;
    d->ngpus = n->ngpus;
    for (size_t i = 0; i < n->ngpus; i++) {
        d->gpus[i] = n->gpus[i];
        d->gpus[i].uuid = dup_or_null(n->gpus[i].uuid);
        d->gpus[i].vendor = dup_or_null(n->gpus[i].vendor);
        d->gpus[i].model = dup_or_null(n->gpus[i].model);
        d->gpus[i].pci_bus_id = dup_or_null(n->gpus[i].pci_bus_id);
        d->gpus[i].upstream = dup_or_null(n->gpus[i].upstream);
    }
    return 0;
}

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
    uint32_t ncap = *cap ? *cap : 16;
    void *np;

    if (need <= *cap)
        return 0;
    while (ncap < need)
        ncap *= 2;
    if (!(np = realloc(*p, (size_t)ncap * elem)))
        return -1;
    memset((char *)np + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
    *p = np;
    *cap = ncap;
    return 0;
}

static int reserve(crater_sched_t *s, const crater_node_t *n)
{
    uint32_t nc = s->ncap, gc = s->gcap, dc = s->dcap;

    if (grow((void **)&s->nodes, &nc, s->n + 1, sizeof(*s->nodes)) < 0)
        return -1;
    nc = s->ncap;
    if (grow((void **)&s->st, &nc, s->n + 1, sizeof(*s->st)) < 0)
        return -1;
    nc = s->ncap;
    if (grow((void **)&s->dyn, &nc, s->n + 1, sizeof(*s->dyn)) < 0)
        return -1;
    s->ncap = nc;
    if (grow((void **)&s->gs, &gc, s->ngpu + (uint32_t)n->ngpus, sizeof(*s->gs))
        < 0)
        return -1;
    gc = s->gcap;
    if (grow((void **)&s->gd, &gc, s->ngpu + (uint32_t)n->ngpus, sizeof(*s->gd))
        < 0)
        return -1;
    s->gcap = gc;
    if (grow((void **)&s->ds,
             &dc,
             s->ndev + (uint32_t)n->nstorage,
             sizeof(*s->ds))
        < 0)
        return -1;
    dc = s->dcap;
    if (grow((void **)&s->dd,
             &dc,
             s->ndev + (uint32_t)n->nstorage,
             sizeof(*s->dd))
        < 0)
        return -1;
    s->dcap = dc;
    return 0;
}

static int model_id(crater_sched_t *s, const crater_gpu_t *g)
{
    const char *key = g->model ? g->model : "unknown";

    for (uint32_t i = 0; i < s->nmodels; i++)
        if (strcmp(s->models[i].key, key) == 0)
            return (int)i;
    if (s->nmodels >= CRATER_SCHED_MAX_MODELS)
        return -1;
    struct sched_model *m = &s->models[s->nmodels];
    memset(m, 0, sizeof(*m));
    strncpy(m->key, key, sizeof(m->key) - 1);
    strncpy(m->vendor, g->vendor ? g->vendor : "", sizeof(m->vendor) - 1);
    m->sm = g->sm_count;
    m->cc = g->compute_cap;
    m->hbm = g->hbm_bandwidth;
    return (int)s->nmodels++;
}

static int numa_of(int numa)
{
    return numa >= 0 && numa < MAX_NUMA ? numa : 0;
}

static void setup_cpu_mem(crater_sched_t *s,
                          uint32_t id,
                          const crater_node_t *n)
{
    struct node_static *st = &s->st[id];
    struct node_dyn *d = &s->dyn[id];
    int maxn = 0;

    for (size_t i = 0; i < n->ncpus; i++) {
        int k = numa_of(n->cpus[i].numa_node);
        uint32_t t = n->cpus[i].threads ? n->cpus[i].threads : n->cpus[i].cores;
        st->numa_cpu_cap[k] += (uint64_t)t * 1000;
        maxn = k > maxn ? k : maxn;
    }
    for (size_t i = 0; i < n->nmems; i++) {
        int k = numa_of(n->mems[i].numa_node);
        st->numa_mem_cap[k] += n->mems[i].capacity;
        maxn = k > maxn ? k : maxn;
    }
    st->nnuma = (uint16_t)(maxn + 1);
    for (int k = 0; k < MAX_NUMA; k++) {
        st->cpu_cap += st->numa_cpu_cap[k];
        st->mem_cap += st->numa_mem_cap[k];
        d->numa_cpu_free[k] = st->numa_cpu_cap[k];
        d->numa_mem_free[k] = st->numa_mem_cap[k];
    }
    d->cpu_free = st->cpu_cap;
    d->mem_free = st->mem_cap;
}

/* Node-local id of each GPU's upstream switch, by first appearance. */
static void upstream_ids(const crater_node_t *n, uint8_t *ids)
{
    const char *seen[MAX_GPUS];
    uint8_t nseen = 0;

    for (size_t i = 0; i < n->ngpus; i++) {
        const char *u = n->gpus[i].upstream;
        uint8_t k = 0;
        while (u && k < nseen && strcmp(seen[k], u) != 0)
            k++;
        if (u && k == nseen)
            seen[nseen++] = u;
        ids[i] = u ? k : 0;
    }
}

static int setup_gpus(crater_sched_t *s,
                      uint32_t id,
                      const crater_node_t *n,
                      crater_error_t *err)
{
    struct node_static *st = &s->st[id];
    uint8_t ups[MAX_GPUS];

    upstream_ids(n, ups);
    st->gpu_first = s->ngpu;
    st->ngpus = (uint16_t)n->ngpus;
    for (size_t i = 0; i < n->ngpus; i++) {
        struct gpu_static *g = &s->gs[s->ngpu + i];
        int m = model_id(s, &n->gpus[i]);
        if (m < 0)
            return crater_errorf(err,
                                 CRATER_ELIMIT,
                                 "more than %d GPU models in one cluster",
                                 CRATER_SCHED_MAX_MODELS);
        memset(g, 0, sizeof(*g));
        g->mem_mib =
            (uint32_t)crater_bytes_to_mib_floor(n->gpus[i].memory_bytes);
        g->model = (uint16_t)m;
        g->numa = (int8_t)(n->gpus[i].numa_node >= 0
                                   && n->gpus[i].numa_node < MAX_NUMA
                               ? n->gpus[i].numa_node
                               : -1);
        g->upstream = ups[i];
        g->nvlink = n->gpus[i].nvlink_peers;
        memset(&s->gd[s->ngpu + i], 0, sizeof(s->gd[0]));
        st->gpu_mib_total += g->mem_mib;
    }
    s->ngpu += (uint32_t)n->ngpus;
    return 0;
}

static void setup_devs(crater_sched_t *s, uint32_t id, const crater_node_t *n)
{
    struct node_static *st = &s->st[id];

    st->dev_first = s->ndev;
    st->ndevs = (uint16_t)n->nstorage;
    for (size_t i = 0; i < n->nstorage; i++) {
        struct dev_static *d = &s->ds[s->ndev + i];
        memset(d, 0, sizeof(*d));
        d->iops = n->storage[i].iops;
        d->bw = n->storage[i].bandwidth;
        d->latency_us = n->storage[i].latency_us;
        d->iface = (uint8_t)n->storage[i].iface;
        s->dd[s->ndev + i].iops_free = d->iops;
        s->dd[s->ndev + i].bw_free = d->bw;
        st->iops_cap += d->iops;
        st->bw_cap += d->bw;
    }
    s->ndev += (uint32_t)n->nstorage;
}

static int check_node(const crater_sched_t *s,
                      const crater_node_t *n,
                      crater_error_t *err)
{
    if (n->ngpus > MAX_GPUS)
        return crater_errorf(err,
                             CRATER_ELIMIT,
                             "node %s: %zu GPUs, at most "
                             "%d",
                             n->name,
                             n->ngpus,
                             MAX_GPUS);
    if (n->nstorage > MAX_DEVS)
        return crater_errorf(err,
                             CRATER_ELIMIT,
                             "node %s: %zu storage "
                             "devices, at most %d",
                             n->name,
                             n->nstorage,
                             MAX_DEVS);
    if (n->name && crater_sched_find_node(s, n->name) != CRATER_SCHED_NO_NODE)
        return crater_errorf(err,
                             CRATER_EEXIST,
                             "node %s already exists",
                             n->name);
    return 0;
}

int crater_sched_add_node(crater_sched_t *s,
                          const crater_node_t *n,
                          crater_error_t *err)
{
    uint32_t id = s->n;

    if (check_node(s, n, err) < 0)
        return -1;
    if (reserve(s, n) < 0 || node_copy(&s->nodes[id], n) < 0) {
        crater_node_clear(&s->nodes[id]);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    memset(&s->st[id], 0, sizeof(s->st[id]));
    memset(&s->dyn[id], 0, sizeof(s->dyn[id]));
    s->dyn[id].ready = 1;
    setup_cpu_mem(s, id, n);
    if (setup_gpus(s, id, n, err) < 0) {
        crater_node_clear(&s->nodes[id]);
        return -1;
    }
    setup_devs(s, id, n);
    s->n++;
    s->memo_epoch++;
    if (sched__name_add(s, id) < 0 || sched__type_of(s, id) < 0
        || sched__reindex(s, id) < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    return (int)id;
}
