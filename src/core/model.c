/* model.c - lifetime and totals for the capability model (see model.h).
 *
 * The model structs are plain data so that codecs, the scheduler and the
 * simulator can fill and read them directly; this file only knows how to
 * free what they own and how to sum them. Every free tolerates fields a
 * partial decode left NULL, so a decoder can call crater_node_clear() on
 * a half-built node in its error path.
 */
#include "crater/model.h"

#include <stdlib.h>
#include <string.h>

static void gpus_free(crater_gpu_t *g, size_t n)
{
    for (size_t i = 0; g && i < n; i++) {
        free(g[i].uuid);
        free(g[i].vendor);
        free(g[i].model);
        free(g[i].pci_bus_id);
        free(g[i].upstream);
    }
    free(g);
}

static void cpus_free(crater_cpu_t *c, size_t n)
{
    for (size_t i = 0; c && i < n; i++) {
        free(c[i].vendor);
        free(c[i].model);
        free(c[i].pci_root);
    }
    free(c);
}

static void storage_free(crater_storage_t *s, size_t n)
{
    for (size_t i = 0; s && i < n; i++) {
        free(s[i].device);
        free(s[i].model);
    }
    free(s);
}

static void meta_free(crater_node_t *n)
{
    for (size_t i = 0; n->labels && i < n->nlabels; i++) {
        free(n->labels[i].key);
        free(n->labels[i].value);
    }
    free(n->labels);
    for (size_t i = 0; n->taints && i < n->ntaints; i++) {
        free(n->taints[i].key);
        free(n->taints[i].value);
    }
    free(n->taints);
    if (n->datasets) {
        for (char **p = n->datasets; *p; p++)
            free(*p);
        free(n->datasets);
    }
}

void crater_node_clear(crater_node_t *n)
{
    if (!n)
        return;
    free(n->name);
    meta_free(n);
    gpus_free(n->gpus, n->ngpus);
    cpus_free(n->cpus, n->ncpus);
    free(n->mems);
    storage_free(n->storage, n->nstorage);
    memset(n, 0, sizeof(*n));
}

void crater_cluster_destroy(crater_cluster_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; c->nodes && i < c->nnodes; i++)
        crater_node_clear(&c->nodes[i]);
    free(c->nodes);
    free(c);
}

/* A node's CPU capacity counts hardware threads, as cgroup CPU quotas and
 * Kubernetes do: one logical CPU is 1000 millicores. An entry that gives
 * only physical cores (threads 0) counts its cores. */
uint64_t crater_node_cpu_milli(const crater_node_t *n)
{
    uint64_t total = 0;

    for (size_t i = 0; n && i < n->ncpus; i++) {
        const crater_cpu_t *c = &n->cpus[i];
        total += 1000ull * (c->threads ? c->threads : c->cores);
    }
    return total;
}

uint64_t crater_node_memory_bytes(const crater_node_t *n)
{
    uint64_t total = 0;

    for (size_t i = 0; n && i < n->nmems; i++)
        total += n->mems[i].capacity;
    return total;
}

static const char *const iface_names[] = {
    [CRATER_IFACE_UNKNOWN] = "unknown",
    [CRATER_IFACE_NVME] = "nvme",
    [CRATER_IFACE_SATA] = "sata",
    [CRATER_IFACE_SAS] = "sas",
    [CRATER_IFACE_VIRTIO] = "virtio",
    [CRATER_IFACE_NETWORK] = "network",
};

#define NIFACE (sizeof(iface_names) / sizeof(iface_names[0]))

const char *crater_iface_name(crater_iface_t iface)
{
    if ((size_t)iface >= NIFACE)
        return "unknown";
    return iface_names[iface];
}

int crater_iface_parse(const char *name)
{
    for (size_t i = 0; name && i < NIFACE; i++)
        if (strcmp(iface_names[i], name) == 0)
            return (int)i;
    return -1;
}
