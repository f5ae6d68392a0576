/* discover.c - CPUs, memory, GPUs and disks of this machine (discover.h).
 *
 * hwloc gives the NUMA nodes with their cores, threads and local memory,
 * the CPU model strings, and (with I/O objects enabled, which hwloc does
 * not do by default) the PCI tree that places GPUs under root ports.
 * NVML gives the GPUs (nvml.c), sysfs the disks (discover_storage.c).
 *
 * Containers and VMs often hide NUMA: hwloc then reports no NUMA object
 * or zero local memory, and we fall back to one NUMA node 0 from sysconf
 * and /proc/meminfo rather than fail. Some VMs report NUMA nodes that
 * hold only part of the memory (measured on a 24.7 GB VM: node0's
 * meminfo says 5.2 GB, and hwloc with it), so the NUMA figures are
 * checked against /proc/meminfo MemTotal, the memory the kernel actually
 * manages, and raised to it when they fall short by more than 3%
 * (crater_discover_fit_memory). A last pass sets every GPU or disk
 * NUMA id that has no cpus/memory entry to -1, because the hardware-file
 * schema (and the scheduler) require NUMA ids to exist.
 *
 * hwloc's PCI plugin uses libpciaccess, which keeps state in globals and
 * loses about 1 KiB each time hwloc unloads it after a topology load
 * (measured: it grows per load; LeakSanitizer reports it). Discovery
 * pins libpciaccess in memory once (RTLD_NODELETE), so repeated
 * discovery in a long-running agent does not leak.
 *
 * GPU upstream: the root port (topmost PCI-to-PCI bridge) above the GPU.
 * The bridge directly above a GPU behind a PCIe switch is a downstream
 * port that no other GPU shares; the root port is shared by all GPUs
 * behind one switch, which is the grouping the topology score wants.
 */
#include "agent/discover.h"

#include <ctype.h>
#include <dlfcn.h>
#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/nvml.h"
#include "crater/log.h"

#define MAX_NUMA 64 /* hardware-file limit on cpus[] and memory[] */

static int oom(crater_error_t *err)
{
    return crater_errorf(err, CRATER_ENOMEM, "out of memory");
}

/* ---- names ---- */

char *crater_discover_node_name(const char *host, char *buf, size_t size)
{
    size_t len = 0;

    for (const char *p = host ? host : ""; *p && len + 1 < size; p++) {
        char c = (char)tolower((unsigned char)*p);
        buf[len++] = isalnum((unsigned char)c) || c == '.' ? c : '-';
    }
    while (len && (buf[len - 1] == '-' || buf[len - 1] == '.'))
        len--;
    buf[len] = '\0';
    len = strspn(buf, "-.");
    memmove(buf, buf + len, strlen(buf + len) + 1);
    if (!*buf)
        snprintf(buf, size, "node");
    return buf;
}

/* "Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz" -> "Intel Xeon Gold 6248R",
 * "AMD EPYC 7763 64-Core Processor" -> "AMD EPYC 7763": the part a kb
 * alias or a readable key is made of. */
static void clean_cpu(const char *raw, char *out, size_t size)
{
    static const char *const drop[] = {"(R)", "(r)", "(TM)", "(tm)"};
    char *p;

    snprintf(out, size, "%s", raw);
    for (size_t i = 0; i < sizeof(drop) / sizeof(*drop); i++)
        while ((p = strstr(out, drop[i])))
            memmove(p, p + strlen(drop[i]), strlen(p + strlen(drop[i])) + 1);
    if ((p = strstr(out, " @ ")))
        *p = '\0';
    if ((p = strstr(out, "-Core Processor")))
        while (p > out && p[-1] != ' ')
            *--p = '\0';
    if ((p = strstr(out, " CPU")) && (p[4] == '\0' || p[4] == ' '))
        *p = '\0';
    if ((p = strstr(out, " Processor")) && p[10] == '\0')
        *p = '\0';
}

static char *cpu_vendor(const char *raw)
{
    char buf[64];

    if (!raw || !*raw)
        return NULL;
    if (!strcmp(raw, "GenuineIntel"))
        return strdup("intel");
    if (!strcmp(raw, "AuthenticAMD"))
        return strdup("amd");
    return strdup(crater_kb_normalize(raw, buf, sizeof(buf)) ? buf : "other");
}

/* Model key (kb key when known) into c; kb values complete it. */
static int cpu_model(const crater_kb_t *kb, const char *raw, crater_cpu_t *c)
{
    const crater_kb_cpu_t *k = NULL;
    char clean[160], norm[160];

    c->ipc_baseline = 1.0; /* the schema's default for unknown models */
    if (!raw || !*raw)
        return 0;
    clean_cpu(raw, clean, sizeof(clean));
    if (kb && !(k = crater_kb_cpu(kb, raw)))
        k = crater_kb_cpu(kb, clean);
    if (k) {
        c->ipc_baseline = k->ipc_baseline;
        c->memory_bandwidth = k->memory_bandwidth;
        return (c->model = strdup(k->key)) ? 0 : -1;
    }
    if (!crater_kb_normalize(clean, norm, sizeof(norm)) || !*norm)
        return 0;
    return (c->model = strdup(norm)) ? 0 : -1;
}

/* ---- hwloc ---- */

static hwloc_obj_t package_of(hwloc_topology_t t, hwloc_obj_t numa)
{
    hwloc_obj_t p = NULL;

    while ((p = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PACKAGE, p)))
        if (hwloc_bitmap_intersects(p->cpuset, numa->cpuset))
            return p;
    return NULL;
}

static const char *info(hwloc_topology_t t, hwloc_obj_t pkg, const char *k)
{
    const char *v = pkg ? hwloc_obj_get_info_by_name(pkg, k) : NULL;

    return v ? v : hwloc_obj_get_info_by_name(hwloc_get_root_obj(t), k);
}

static int fmt_pci(hwloc_obj_t o, char **out)
{
    char buf[32];
    unsigned domain = (unsigned)o->attr->pcidev.domain; /* 16 or 32 bits
                                                           by hwloc build */

    snprintf(buf,
             sizeof(buf),
             domain > 0xffff ? "%08x:%02x:%02x.%x" : "%04x:%02x:%02x.%x",
             domain,
             o->attr->pcidev.bus,
             o->attr->pcidev.dev,
             o->attr->pcidev.func);
    return (*out = strdup(buf)) ? 0 : -1;
}

static int is_pci_bridge(hwloc_obj_t o)
{
    return o && o->type == HWLOC_OBJ_BRIDGE
           && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

/* First PCI object below a host bridge local to cpuset: the root port. */
static int pci_root_of(hwloc_topology_t t, hwloc_obj_t numa, char **out)
{
    hwloc_obj_t hb = NULL;

    while ((hb = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_BRIDGE, hb))) {
        hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(t, hb);
        if (hb->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_HOST
            || !hb->io_first_child || !local
            || !hwloc_bitmap_intersects(local->cpuset, numa->cpuset))
            continue;
        if (hb->io_first_child->type == HWLOC_OBJ_BRIDGE
            || hb->io_first_child->type == HWLOC_OBJ_PCI_DEVICE)
            return fmt_pci(hb->io_first_child, out);
    }
    return 0;
}

static int numa_entry(hwloc_topology_t t,
                      hwloc_obj_t numa,
                      const crater_kb_t *kb,
                      crater_node_t *out)
{
    int cores =
        hwloc_get_nbobjs_inside_cpuset_by_type(t, numa->cpuset, HWLOC_OBJ_CORE);
    int pus =
        hwloc_get_nbobjs_inside_cpuset_by_type(t, numa->cpuset, HWLOC_OBJ_PU);
    hwloc_obj_t pkg = package_of(t, numa);
    crater_mem_t *m = &out->mems[out->nmems];
    crater_cpu_t *c = &out->cpus[out->ncpus];

    if (numa->attr->numanode.local_memory) {
        m->numa_node = (int)numa->os_index;
        m->capacity = numa->attr->numanode.local_memory;
        out->nmems++;
    }
    if (pus <= 0)
        return 0; /* memory-only node (CXL, HBM) */
    out->ncpus++;
    c->numa_node = (int)numa->os_index;
    c->threads = (uint32_t)pus;
    c->cores = cores > 0 ? (uint32_t)cores : (uint32_t)pus;
    c->vendor = cpu_vendor(info(t, pkg, "CPUVendor"));
    if (cpu_model(kb, info(t, pkg, "CPUModel"), c) < 0)
        return -1;
    return pci_root_of(t, numa, &c->pci_root);
}

static int hw_numa(hwloc_topology_t t,
                   const crater_kb_t *kb,
                   crater_node_t *out,
                   crater_error_t *err)
{
    hwloc_obj_t numa = NULL;

    out->cpus = calloc(MAX_NUMA, sizeof(*out->cpus));
    out->mems = calloc(MAX_NUMA, sizeof(*out->mems));
    if (!out->cpus || !out->mems)
        return oom(err);
    while ((numa = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, numa))) {
        if (numa->os_index > 1023 || out->nmems >= MAX_NUMA
            || out->ncpus >= MAX_NUMA)
            continue;
        if (numa_entry(t, numa, kb, out) < 0)
            return oom(err);
    }
    return 0;
}

static void pin_pciaccess(void)
{
    /* never closed on purpose; absent (no PCI plugin) is fine */
    (void)dlopen("libpciaccess.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
}

static hwloc_topology_t topo_load(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    hwloc_topology_t t;

    pthread_once(&once, pin_pciaccess);
    if (hwloc_topology_init(&t) < 0)
        return NULL;
    if (hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT)
            < 0
        || hwloc_topology_load(t) < 0) {
        hwloc_topology_destroy(t);
        return NULL;
    }
    return t;
}

/* ---- fallback: no NUMA information ---- */

static uint64_t meminfo_total(const char *proc_root)
{
    unsigned long long kb = 0;
    char line[256], path[1024];
    FILE *f;

    snprintf(path, sizeof(path), "%s/meminfo", proc_root ? proc_root : "/proc");
    f = fopen(path, "r");
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb <= UINT64_MAX / 1024 ? kb * 1024 : 0;
}

/* Threshold: per-node MemTotal and /proc/meminfo MemTotal count the same
 * pages on a sound machine, so they agree to well under 1%; 3% leaves
 * room for rounding and memory hot-plugged between the two reads. When
 * raising, the difference goes to the entries in proportion to their
 * capacity (the last one takes the rounding), which puts it all on node
 * 0 of a single-NUMA VM: we cannot know where the hidden memory sits,
 * and proportional keeps the nodes' ratios, which NUMA-local placement
 * relies on. */
int crater_discover_fit_memory(crater_node_t *n, const char *proc_root)
{
    uint64_t total = meminfo_total(proc_root), sum = 0, given = 0;

    for (size_t i = 0; i < n->nmems; i++)
        sum += n->mems[i].capacity;
    if (!n->nmems || !sum || !total || sum >= total
        || total - sum <= total / 100 * 3)
        return 0;
    crater_log(LOG_WARNING,
               "NUMA nodes hold %llu bytes (%.1f GB) but /proc/meminfo "
               "MemTotal is %llu bytes (%.1f GB): using MemTotal, spread "
               "over %zu NUMA node(s) in proportion",
               (unsigned long long)sum,
               (double)sum / 1e9,
               (unsigned long long)total,
               (double)total / 1e9,
               n->nmems);
    for (size_t i = 0; i + 1 < n->nmems; i++) {
        crater_mem_t *m = &n->mems[i];
        m->capacity = (uint64_t)((long double)total * m->capacity / sum);
        given += m->capacity;
    }
    n->mems[n->nmems - 1].capacity = total - given;
    return 1;
}

static int fallback(const char *proc_root,
                    crater_node_t *out,
                    crater_error_t *err)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t mem = meminfo_total(proc_root);

    crater_debug(CRATER_SUB_AGENT, "hwloc gave no NUMA data: one node 0");
    if (!out->ncpus && n > 0) {
        if (!out->cpus && !(out->cpus = calloc(1, sizeof(*out->cpus))))
            return oom(err);
        out->cpus[0] = (crater_cpu_t){.cores = (uint32_t)n,
                                      .threads = (uint32_t)n,
                                      .ipc_baseline = 1.0};
        out->ncpus = 1;
    }
    if (!out->nmems && mem) {
        if (!out->mems && !(out->mems = calloc(1, sizeof(*out->mems))))
            return oom(err);
        out->mems[0] = (crater_mem_t){.numa_node = 0, .capacity = mem};
        out->nmems = 1;
    }
    return 0;
}

/* ---- GPUs ---- */

/* Root port above the GPU at bus (NULL when it hangs off the host). */
static int gpu_upstream(hwloc_topology_t t, crater_gpu_t *g)
{
    unsigned dom, bus, dev, fn;
    hwloc_obj_t o, top = NULL;

    if (!t || !g->pci_bus_id
        || sscanf(g->pci_bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4
        || !(o = hwloc_get_pcidev_by_busid(t, dom, bus, dev, fn)))
        return 0;
    for (o = o->parent; is_pci_bridge(o); o = o->parent)
        top = o;
    return top ? fmt_pci(top, &g->upstream) : 0;
}

static int gpu_list(crater_nvml_t *n,
                    hwloc_topology_t t,
                    const crater_kb_t *kb,
                    crater_node_t *out,
                    crater_error_t *err)
{
    unsigned cnt = crater_nvml_count(n);

    if (!(out->gpus = calloc(cnt ? cnt : 1, sizeof(*out->gpus))))
        return oom(err);
    for (unsigned i = 0; i < cnt; i++) {
        if (crater_nvml_gpu(n, i, kb, &out->gpus[i], err) < 0)
            return -1;
        out->ngpus = i + 1;
        if (gpu_upstream(t, &out->gpus[i]) < 0)
            return oom(err);
    }
    return 0;
}

static int gpus(const crater_discover_opts_t *o,
                hwloc_topology_t t,
                const crater_kb_t *kb,
                crater_node_t *out,
                crater_error_t *err)
{
    crater_error_t e = {0};
    crater_nvml_t *n = crater_nvml_open(o->nvml_lib, &e);
    int rc;

    if (!n && e.errnum == CRATER_ENOENT) {
        crater_debug(CRATER_SUB_AGENT, "%s: no GPUs", e.text);
        return 0;
    }
    if (!n) {
        if (err)
            *err = e;
        return -1;
    }
    rc = crater_nvml_set_sys_root(n, o->sys_root, err);
    if (rc == 0)
        rc = gpu_list(n, t, kb, out, err);
    crater_nvml_close(n);
    return rc;
}

/* ---- assembly ---- */

static int numa_known(const crater_node_t *n, int numa)
{
    for (size_t i = 0; i < n->ncpus; i++)
        if (n->cpus[i].numa_node == numa)
            return 1;
    for (size_t i = 0; i < n->nmems; i++)
        if (n->mems[i].numa_node == numa)
            return 1;
    return 0;
}

static void fix_numa(crater_node_t *n)
{
    for (size_t i = 0; i < n->ngpus; i++)
        if (!numa_known(n, n->gpus[i].numa_node))
            n->gpus[i].numa_node = -1;
    for (size_t i = 0; i < n->nstorage; i++)
        if (!numa_known(n, n->storage[i].numa_node))
            n->storage[i].numa_node = -1;
}

static int set_name(const crater_discover_opts_t *o,
                    crater_node_t *out,
                    crater_error_t *err)
{
    char host[256] = "", name[CRATER_NAME_MAX + 1];

    if (!o->name && gethostname(host, sizeof(host) - 1) < 0)
        host[0] = '\0';
    crater_discover_node_name(o->name ? o->name : host, name, sizeof(name));
    return (out->name = strdup(name)) ? 0 : oom(err);
}

static int run(const crater_discover_opts_t *o,
               const crater_kb_t *kb,
               crater_node_t *out,
               crater_error_t *err)
{
    hwloc_topology_t t = topo_load();
    int rc = set_name(o, out, err);

    if (rc == 0 && t)
        rc = hw_numa(t, kb, out, err);
    if (rc == 0 && (!out->ncpus || !out->nmems))
        rc = fallback(o->proc_root, out, err);
    if (rc == 0)
        crater_discover_fit_memory(out, o->proc_root);
    if (rc == 0 && !o->no_gpus)
        rc = gpus(o, t, kb, out, err);
    if (rc == 0)
        rc = crater_discover_storage(o->sys_root,
                                     o->no_disk_probe ? NULL
                                     : o->disk_probe  ? o->disk_probe
                                                      : crater_disk_probe,
                                     o->disk_probe_arg,
                                     out,
                                     err);
    if (t)
        hwloc_topology_destroy(t);
    return rc;
}

int crater_discover(const crater_discover_opts_t *o,
                    const crater_kb_t *kb,
                    crater_node_t *out,
                    crater_error_t *err)
{
    static const crater_discover_opts_t defaults = {0};

    memset(out, 0, sizeof(*out));
    out->samples = CRATER_SAMPLES_REAL;
    if (run(o ? o : &defaults, kb, out, err) < 0) {
        crater_node_clear(out);
        return -1;
    }
    fix_numa(out);
    return 0;
}
