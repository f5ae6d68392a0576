/* nvml.c - NVML through dlopen (see nvml.h).
 *
 * Why dlopen: the agent must build, start and schedule CPU work on
 * machines without the NVIDIA driver, and linking libnvidia-ml would make
 * the driver a hard dependency. So the handful of NVML entry points and
 * types used are declared here from NVML's public ABI (nvml.h of the CUDA
 * toolkit; the _v2/_v3 suffixes are the versioned symbols the library
 * exports). Entry points that older drivers lack are optional: a NULL
 * pointer is treated like NVML_ERROR_FUNCTION_NOT_FOUND.
 *
 * MIG: a MIG device handle (nvmlDeviceGetMigDeviceHandleByIndex) answers
 * nvmlDeviceGetUUID ("MIG-...") and nvmlDeviceGetMemoryInfo (the
 * instance's memory) like a GPU handle, so listing instances needs only
 * the three MIG entry points. Indices between 0 and the GPU's maximum
 * without a compute instance answer NVML_ERROR_NOT_FOUND and are skipped.
 *
 * NVLink peers: a link's remote PCI address names the peer GPU on
 * machines where GPUs are wired to each other; on HGX boards the links
 * end at NVSwitches, and every GPU with an active link to a switch can
 * reach every other such GPU. Bus ids of all GPUs are read at open so a
 * remote address can be mapped to a local index.
 */
#include "agent/nvml.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/log.h"

/* ---- the NVML ABI subset ---- */

typedef int nvml_ret;
typedef struct nvml_dev *nvml_dev;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
};

#define NVML_BUF 96        /* NVML_DEVICE_{UUID,NAME}_V2_BUFFER_SIZE */
#define NVML_NVLINK_MAX 18 /* NVML_NVLINK_MAX_LINKS (Hopper) */
#define NVML_LINK_SWITCH 2 /* NVML_NVLINK_DEVICE_TYPE_SWITCH */
#define NVML_NA (~0ull)    /* NVML_VALUE_NOT_AVAILABLE */
#define GBPS 1000000000ull
#define NVML_MIG_SLOTS 64 /* more than any GPU's maximum (7 today) */

typedef struct {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
} nvml_pci;

typedef struct {
    unsigned long long total, free, used;
} nvml_mem;

typedef struct {
    unsigned gpu, memory;
} nvml_util;

typedef struct {
    unsigned mp_count, copy_engines, decoders, encoders, jpegs, ofas;
    unsigned gi_slices, ci_slices;
    unsigned long long memory_mb;
} nvml_attrs;

typedef struct { /* nvmlProcessInfo_t (v2 and v3 share the layout) */
    unsigned pid;
    unsigned long long used;
    unsigned gi, ci;
} nvml_procinfo;

typedef nvml_ret (*f_void)(void);
typedef const char *(*f_errstr)(nvml_ret);
typedef nvml_ret (*f_uint)(unsigned *);
typedef nvml_ret (*f_handle)(unsigned, nvml_dev *);
typedef nvml_ret (*f_str)(nvml_dev, char *, unsigned);
typedef nvml_ret (*f_sysstr)(char *, unsigned);
typedef nvml_ret (*f_int)(int *);
typedef nvml_ret (*f_mem)(nvml_dev, nvml_mem *);
typedef nvml_ret (*f_pci)(nvml_dev, nvml_pci *);
typedef nvml_ret (*f_cc)(nvml_dev, int *, int *);
typedef nvml_ret (*f_devuint)(nvml_dev, unsigned *);
typedef nvml_ret (*f_attrs)(nvml_dev, nvml_attrs *);
typedef nvml_ret (*f_link)(nvml_dev, unsigned, unsigned *);
typedef nvml_ret (*f_linkpci)(nvml_dev, unsigned, nvml_pci *);
typedef nvml_ret (*f_util)(nvml_dev, nvml_util *);
typedef nvml_ret (*f_procs)(nvml_dev, unsigned *, nvml_procinfo *);
typedef nvml_ret (*f_migmode)(nvml_dev, unsigned *, unsigned *);
typedef nvml_ret (*f_mighandle)(nvml_dev, unsigned, nvml_dev *);

struct fns {
    f_void init, shutdown;
    f_errstr errstr;
    f_uint count;
    f_handle handle;
    f_str uuid, name;
    f_sysstr driver;
    f_int cuda;
    f_mem mem;
    f_pci pci;
    f_cc cc;
    f_devuint numa;
    f_attrs attrs;
    f_link link_state, link_version, link_type;
    f_linkpci link_pci;
    f_util util;
    f_procs compute3, compute2, graphics3, graphics2;
    f_migmode mig_mode;
    f_devuint mig_max;
    f_mighandle mig_handle;
};

struct gpuinfo {
    nvml_dev dev;
    char bus[20]; /* "0000:07:00.0" */
};

struct crater_nvml {
    void *lib;
    struct fns f;
    unsigned n;
    struct gpuinfo *gpus;
    char *sys_root;
};

/* ---- loading ---- */

static void *sym(void *lib, const char *name)
{
    return dlsym(lib, name);
}

#define LOAD(field, name) (*(void **)&n->f.field = sym(n->lib, name))

static int load_fns(crater_nvml_t *n)
{
    LOAD(errstr, "nvmlErrorString");
    LOAD(driver, "nvmlSystemGetDriverVersion");
    LOAD(cuda, "nvmlSystemGetCudaDriverVersion_v2");
    LOAD(cc, "nvmlDeviceGetCudaComputeCapability");
    LOAD(numa, "nvmlDeviceGetNumaNodeId");
    LOAD(attrs, "nvmlDeviceGetAttributes_v2");
    LOAD(link_state, "nvmlDeviceGetNvLinkState");
    LOAD(link_version, "nvmlDeviceGetNvLinkVersion");
    LOAD(link_type, "nvmlDeviceGetNvLinkRemoteDeviceType");
    LOAD(link_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    LOAD(util, "nvmlDeviceGetUtilizationRates");
    LOAD(compute3, "nvmlDeviceGetComputeRunningProcesses_v3");
    LOAD(compute2, "nvmlDeviceGetComputeRunningProcesses_v2");
    LOAD(graphics3, "nvmlDeviceGetGraphicsRunningProcesses_v3");
    LOAD(graphics2, "nvmlDeviceGetGraphicsRunningProcesses_v2");
    LOAD(mig_mode, "nvmlDeviceGetMigMode");
    LOAD(mig_max, "nvmlDeviceGetMaxMigDeviceCount");
    LOAD(mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex");
    /* required: without these it is not a usable NVML */
    return LOAD(init, "nvmlInit_v2") && LOAD(shutdown, "nvmlShutdown")
                   && LOAD(count, "nvmlDeviceGetCount_v2")
                   && LOAD(handle, "nvmlDeviceGetHandleByIndex_v2")
                   && LOAD(uuid, "nvmlDeviceGetUUID")
                   && LOAD(name, "nvmlDeviceGetName")
                   && LOAD(mem, "nvmlDeviceGetMemoryInfo")
                   && LOAD(pci, "nvmlDeviceGetPciInfo_v3")
               ? 0
               : -1;
}

static const char *estr(const crater_nvml_t *n, nvml_ret r)
{
    const char *s = n->f.errstr ? n->f.errstr(r) : NULL;

    return s ? s : "unknown NVML error";
}

static int nverr(const crater_nvml_t *n,
                 crater_error_t *err,
                 const char *what,
                 nvml_ret r)
{
    crater_errno_t e = r == NVML_ERROR_NO_PERMISSION      ? CRATER_EPERM
                       : r == NVML_ERROR_INVALID_ARGUMENT ? CRATER_EINVAL
                                                          : CRATER_EIO;

    return crater_errorf(err, e, "NVML %s: %s (%d)", what, estr(n, r), r);
}

/* "00000000:0F:00.0" -> "0000:0f:00.0"; -1 when it is not an address. */
static int bus_norm(const char *in, char *out, size_t size)
{
    unsigned dom, bus, dev, fn;
    char tail;

    if (sscanf(in, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4
        || bus > 0xff || dev > 0x1f || fn > 7)
        return -1;
    snprintf(out,
             size,
             dom > 0xffff ? "%08x:%02x:%02x.%x" : "%04x:%02x:%02x.%x",
             dom,
             bus,
             dev,
             fn);
    return 0;
}

static int read_gpus(crater_nvml_t *n, crater_error_t *err)
{
    nvml_ret r = n->f.count(&n->n);

    if (r != NVML_SUCCESS)
        return nverr(n, err, "nvmlDeviceGetCount_v2", r);
    if (n->n > CRATER_MAX_GPUS_PER_NODE)
        return crater_errorf(err,
                             CRATER_ELIMIT,
                             "NVML reports %u GPUs; at most %d per node",
                             n->n,
                             CRATER_MAX_GPUS_PER_NODE);
    if (!(n->gpus = calloc(n->n ? n->n : 1, sizeof(*n->gpus))))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    for (unsigned i = 0; i < n->n; i++) {
        nvml_pci pci = {0};
        if ((r = n->f.handle(i, &n->gpus[i].dev)) != NVML_SUCCESS)
            return nverr(n, err, "nvmlDeviceGetHandleByIndex_v2", r);
        if ((r = n->f.pci(n->gpus[i].dev, &pci)) != NVML_SUCCESS)
            return nverr(n, err, "nvmlDeviceGetPciInfo_v3", r);
        pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
        if (bus_norm(pci.bus_id, n->gpus[i].bus, sizeof(n->gpus[i].bus)) < 0)
            return crater_errorf(err,
                                 CRATER_EIO,
                                 "NVML: GPU %u has PCI bus id '%s'",
                                 i,
                                 pci.bus_id);
    }
    return 0;
}

static crater_nvml_t *open_fail(crater_nvml_t *n, int inited)
{
    if (inited)
        n->f.shutdown();
    if (n->lib)
        dlclose(n->lib);
    free(n->gpus);
    free(n);
    return NULL;
}

static int init(crater_nvml_t *n, const char *lib, crater_error_t *err)
{
    nvml_ret r = n->f.init();

    if (r == NVML_SUCCESS)
        return 0;
    if (r == NVML_ERROR_DRIVER_NOT_LOADED || r == NVML_ERROR_LIBRARY_NOT_FOUND)
        crater_errorf(err,
                      CRATER_ENOENT,
                      "%s: no NVIDIA driver: %s",
                      lib,
                      estr(n, r));
    else
        nverr(n, err, "nvmlInit_v2", r);
    return -1;
}

crater_nvml_t *crater_nvml_open(const char *lib, crater_error_t *err)
{
    crater_nvml_t *n = calloc(1, sizeof(*n));

    lib = lib ? lib : "libnvidia-ml.so.1";
    if (!n) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    if (!(n->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL))) {
        const char *why = dlerror();
        crater_errorf(err, CRATER_ENOENT, "no NVML: %s", why ? why : lib);
        return open_fail(n, 0);
    }
    if (load_fns(n) < 0) {
        crater_errorf(err, CRATER_EIO, "%s lacks NVML entry points", lib);
        return open_fail(n, 0);
    }
    if (init(n, lib, err) < 0)
        return open_fail(n, 0);
    if (read_gpus(n, err) < 0)
        return open_fail(n, 1);
    crater_debug(CRATER_SUB_AGENT, "NVML %s: %u GPUs", lib, n->n);
    return n;
}

void crater_nvml_close(crater_nvml_t *n)
{
    if (!n)
        return;
    n->f.shutdown();
    dlclose(n->lib);
    free(n->gpus);
    free(n->sys_root);
    free(n);
}

int crater_nvml_set_sys_root(crater_nvml_t *n,
                             const char *root,
                             crater_error_t *err)
{
    char *s = strdup(root ? root : "/sys");

    if (!s)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    free(n->sys_root);
    n->sys_root = s;
    return 0;
}

unsigned crater_nvml_count(const crater_nvml_t *n)
{
    return n ? n->n : 0;
}

static int check_idx(const crater_nvml_t *n, unsigned idx, crater_error_t *err)
{
    if (!n || idx >= n->n)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "no GPU %u (NVML has %u)",
                             idx,
                             n ? n->n : 0);
    return 0;
}

/* ---- NVLink ---- */

struct links {
    uint64_t direct; /* GPUs at the far end of an active link */
    int to_switch;   /* an active link ends at an NVSwitch */
    unsigned active, version;
};

static int gpu_by_bus(const crater_nvml_t *n, const char *bus)
{
    for (unsigned i = 0; i < n->n; i++)
        if (strcmp(n->gpus[i].bus, bus) == 0)
            return (int)i;
    return -1;
}

static void one_link(const crater_nvml_t *n,
                     nvml_dev dev,
                     unsigned l,
                     struct links *o)
{
    unsigned type = 0xff;
    nvml_pci pci = {0};
    char bus[20];
    int peer = -1;

    o->active++;
    if (n->f.link_version && !o->version)
        n->f.link_version(dev, l, &o->version);
    if (n->f.link_type && n->f.link_type(dev, l, &type) == NVML_SUCCESS
        && type == NVML_LINK_SWITCH) {
        o->to_switch = 1;
        return;
    }
    if (!n->f.link_pci || n->f.link_pci(dev, l, &pci) != NVML_SUCCESS)
        return;
    pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
    if (bus_norm(pci.bus_id, bus, sizeof(bus)) == 0)
        peer = gpu_by_bus(n, bus);
    if (peer >= 0)
        o->direct |= 1ull << peer;
    else
        o->to_switch = 1; /* not a GPU of ours: an NVSwitch */
}

static struct links links_of(const crater_nvml_t *n, unsigned idx)
{
    struct links o = {0};
    nvml_dev dev = n->gpus[idx].dev;

    for (unsigned l = 0; n->f.link_state && l < NVML_NVLINK_MAX; l++) {
        unsigned on = 0;
        if (n->f.link_state(dev, l, &on) != NVML_SUCCESS)
            continue; /* NOT_SUPPORTED: no NVLink, or no such link */
        if (on)
            one_link(n, dev, l, &o);
    }
    o.direct &= ~(1ull << idx);
    return o;
}

static uint64_t peers_of(const crater_nvml_t *n,
                         unsigned idx,
                         struct links *self)
{
    uint64_t peers;

    *self = links_of(n, idx);
    peers = self->direct;
    if (!self->to_switch)
        return peers;
    for (unsigned j = 0; j < n->n; j++)
        if (j != idx && links_of(n, j).to_switch)
            peers |= 1ull << j;
    return peers;
}

/* Per-link bandwidth, both directions: NVLink 1 40 GB/s, 2-4 50 GB/s,
 * 5 100 GB/s (NVIDIA P100/V100/A100/H100/B200 datasheets). Older drivers
 * report the major version (1-4); newer ones an nvmlNvlinkVersion_t
 * (1.0=1, 2.0=2, 2.2=3, 3.0=4, 3.1=5, 4.0=6, 5.0=7). Only 1 and 7 differ
 * from 50 GB/s, and neither value is ambiguous between the schemes. */
static uint64_t link_bw(unsigned version)
{
    return version == 1 ? 40 * GBPS : version == 7 ? 100 * GBPS : 50 * GBPS;
}

/* ---- static facts ---- */

static int read_numa(const crater_nvml_t *n, unsigned idx)
{
    char path[512];
    unsigned node;
    FILE *f;
    int v = -1;

    snprintf(path,
             sizeof(path),
             "%s/bus/pci/devices/%s/numa_node",
             n->sys_root ? n->sys_root : "/sys",
             n->gpus[idx].bus);
    if ((f = fopen(path, "r"))) {
        if (fscanf(f, "%d", &v) != 1)
            v = -1;
        fclose(f);
    }
    if (v < 0 && n->f.numa && n->f.numa(n->gpus[idx].dev, &node) == NVML_SUCCESS
        && node < 1024)
        v = (int)node;
    return v;
}

static int set_model(const crater_kb_t *kb,
                     const char *name,
                     crater_gpu_t *g,
                     const crater_kb_gpu_t **k)
{
    char norm[NVML_BUF];

    *k = kb ? crater_kb_gpu(kb, name) : NULL;
    if (*k)
        g->model = strdup((*k)->key);
    else if (crater_kb_normalize(name, norm, sizeof(norm)))
        g->model = strdup(norm);
    return g->model ? 0 : -1;
}

static void from_kb(crater_gpu_t *g, const crater_kb_gpu_t *k)
{
    if (!k)
        return;
    g->sm_count = g->sm_count ? g->sm_count : k->sm_count;
    g->compute_cap = g->compute_cap ? g->compute_cap : k->compute_cap;
    g->hbm_bandwidth = k->mem_bandwidth;
    g->nvlink_bandwidth = k->nvlink_bandwidth;
    g->fp16_tflops = k->fp16_tflops;
}

static int ids(crater_nvml_t *n,
               unsigned idx,
               crater_gpu_t *g,
               char *name,
               crater_error_t *err)
{
    nvml_dev dev = n->gpus[idx].dev;
    char uuid[NVML_BUF] = "";
    nvml_ret r;

    if ((r = n->f.uuid(dev, uuid, sizeof(uuid))) != NVML_SUCCESS)
        return nverr(n, err, "nvmlDeviceGetUUID", r);
    if ((r = n->f.name(dev, name, NVML_BUF)) != NVML_SUCCESS)
        return nverr(n, err, "nvmlDeviceGetName", r);
    uuid[sizeof(uuid) - 1] = name[NVML_BUF - 1] = '\0';
    g->uuid = strdup(uuid);
    g->vendor = strdup("nvidia");
    g->pci_bus_id = strdup(n->gpus[idx].bus);
    if (!g->uuid || !g->vendor || !g->pci_bus_id)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    return 0;
}

static int numbers(crater_nvml_t *n,
                   unsigned idx,
                   crater_gpu_t *g,
                   crater_error_t *err)
{
    nvml_dev dev = n->gpus[idx].dev;
    nvml_attrs a = {0};
    nvml_mem m = {0};
    int major = 0, minor = 0;
    nvml_ret r;

    if ((r = n->f.mem(dev, &m)) != NVML_SUCCESS)
        return nverr(n, err, "nvmlDeviceGetMemoryInfo", r);
    g->memory_bytes = m.total;
    if (n->f.cc && n->f.cc(dev, &major, &minor) == NVML_SUCCESS && major > 0
        && major < 100 && minor >= 0 && minor < 10)
        g->compute_cap = (uint32_t)(major * 10 + minor);
    /* whole GPUs answer NOT_SUPPORTED on most drivers (MIG handles only) */
    if (n->f.attrs && n->f.attrs(dev, &a) == NVML_SUCCESS)
        g->sm_count = a.mp_count;
    g->numa_node = read_numa(n, idx);
    return 0;
}

int crater_nvml_gpu(crater_nvml_t *n,
                    unsigned idx,
                    const crater_kb_t *kb,
                    crater_gpu_t *g,
                    crater_error_t *err)
{
    const crater_kb_gpu_t *k = NULL;
    char name[NVML_BUF] = "";
    struct links l;

    memset(g, 0, sizeof(*g));
    if (check_idx(n, idx, err) < 0)
        return -1;
    if (ids(n, idx, g, name, err) < 0 || numbers(n, idx, g, err) < 0)
        goto fail;
    if (set_model(kb, name, g, &k) < 0) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        goto fail;
    }
    from_kb(g, k);
    g->nvlink_peers = peers_of(n, idx, &l);
    if (l.active && !g->nvlink_bandwidth)
        g->nvlink_bandwidth = l.active * link_bw(l.version);
    return 0;
fail:
    crater_nvml_gpu_clear(g);
    return -1;
}

void crater_nvml_gpu_clear(crater_gpu_t *g)
{
    if (!g)
        return;
    free(g->uuid);
    free(g->vendor);
    free(g->model);
    free(g->pci_bus_id);
    free(g->upstream);
    memset(g, 0, sizeof(*g));
}

int crater_nvml_driver(crater_nvml_t *n,
                       char *driver,
                       size_t dn,
                       int *cuda_version,
                       crater_error_t *err)
{
    char buf[NVML_BUF] = "";
    nvml_ret r;

    if (!n || !driver || !dn)
        return crater_errorf(err, CRATER_EINVAL, "no NVML or no buffer");
    if (!n->f.driver)
        return crater_errorf(err, CRATER_EIO, "NVML has no driver version");
    if ((r = n->f.driver(buf, sizeof(buf))) != NVML_SUCCESS)
        return nverr(n, err, "nvmlSystemGetDriverVersion", r);
    buf[sizeof(buf) - 1] = '\0';
    if (strlen(buf) >= dn)
        return crater_errorf(err,
                             CRATER_ELIMIT,
                             "driver version '%s' does not fit",
                             buf);
    strcpy(driver, buf);
    if (cuda_version && (!n->f.cuda || n->f.cuda(cuda_version) != NVML_SUCCESS))
        *cuda_version = 0;
    return 0;
}

int crater_nvml_util(crater_nvml_t *n,
                     unsigned idx,
                     double *sm_util,
                     double *mem_activity,
                     uint64_t *mem_used,
                     crater_error_t *err)
{
    nvml_util u = {0};
    nvml_mem m = {0};
    nvml_ret r;

    if (check_idx(n, idx, err) < 0)
        return -1;
    if (!n->f.util)
        return crater_errorf(err, CRATER_EIO, "NVML has no utilisation");
    if ((r = n->f.util(n->gpus[idx].dev, &u)) != NVML_SUCCESS)
        return nverr(n, err, "nvmlDeviceGetUtilizationRates", r);
    if ((r = n->f.mem(n->gpus[idx].dev, &m)) != NVML_SUCCESS)
        return nverr(n, err, "nvmlDeviceGetMemoryInfo", r);
    *sm_util = (u.gpu > 100 ? 100 : u.gpu) / 100.0;
    if (mem_activity)
        *mem_activity = (u.memory > 100 ? 100 : u.memory) / 100.0;
    *mem_used = m.used;
    return 0;
}

/* ---- processes ---- */

/* One NVML process list into a malloc'd array (*out, *cnt). */
static nvml_ret list_procs(f_procs fn,
                           nvml_dev dev,
                           nvml_procinfo **out,
                           unsigned *cnt)
{
    unsigned cap = 32;

    for (int tries = 0; tries < 4; tries++) {
        nvml_procinfo *p = calloc(cap, sizeof(*p));
        unsigned c = cap;
        nvml_ret r;
        if (!p)
            return -1;
        r = fn(dev, &c, p);
        if (r == NVML_SUCCESS) {
            *out = p, *cnt = c < cap ? c : cap;
            return r;
        }
        free(p);
        if (r != NVML_ERROR_INSUFFICIENT_SIZE)
            return r;
        cap = c > cap ? c + 8 : cap * 2; /* processes may have started */
    }
    return NVML_ERROR_INSUFFICIENT_SIZE;
}

/* Merge src into out[0..*count) by pid, keeping the larger usage. */
static void merge(const nvml_procinfo *src,
                  unsigned ns,
                  crater_nvml_proc_t *out,
                  size_t max,
                  size_t *count)
{
    for (unsigned i = 0; i < ns; i++) {
        uint64_t used = src[i].used == NVML_NA ? 0 : src[i].used;
        size_t j, lim = *count < max ? *count : max;
        for (j = 0; j < lim && out[j].pid != src[i].pid; j++)
            ;
        if (j < lim) {
            out[j].used_bytes =
                used > out[j].used_bytes ? used : out[j].used_bytes;
            continue;
        }
        if (*count < max)
            out[*count] = (crater_nvml_proc_t){src[i].pid, used};
        (*count)++;
    }
}

static int one_kind(crater_nvml_t *n,
                    unsigned idx,
                    f_procs v3,
                    f_procs v2,
                    crater_nvml_proc_t *out,
                    size_t max,
                    size_t *count,
                    crater_error_t *err)
{
    nvml_procinfo *p = NULL;
    unsigned np = 0;
    nvml_ret r = NVML_ERROR_NOT_SUPPORTED;

    if (v3)
        r = list_procs(v3, n->gpus[idx].dev, &p, &np);
    if (!v3 && v2)
        r = list_procs(v2, n->gpus[idx].dev, &p, &np);
    if (r == -1)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (r == NVML_ERROR_NOT_SUPPORTED)
        return 0; /* e.g. no graphics processes on a compute GPU */
    if (r != NVML_SUCCESS)
        return nverr(n, err, "nvmlDevice*RunningProcesses", r);
    merge(p, np, out, max, count);
    free(p);
    return 0;
}

int crater_nvml_procs(crater_nvml_t *n,
                      unsigned idx,
                      crater_nvml_proc_t *out,
                      size_t max,
                      size_t *count,
                      crater_error_t *err)
{
    size_t c = 0;

    if (check_idx(n, idx, err) < 0)
        return -1;
    if ((max && !out) || !count)
        return crater_errorf(err, CRATER_EINVAL, "no output buffer");
    if (one_kind(n, idx, n->f.compute3, n->f.compute2, out, max, &c, err) < 0
        || one_kind(n, idx, n->f.graphics3, n->f.graphics2, out, max, &c, err)
               < 0)
        return -1;
    *count = c;
    return 0;
}

/* ---- MIG ---- */

/* 0 when GPU idx is in MIG mode, else the error that says how to get
 * there. */
static int mig_enabled(crater_nvml_t *n, unsigned idx, crater_error_t *err)
{
    unsigned cur = 0, pending = 0;
    nvml_ret r = NVML_ERROR_NOT_SUPPORTED;

    if (n->f.mig_mode && n->f.mig_max && n->f.mig_handle)
        r = n->f.mig_mode(n->gpus[idx].dev, &cur, &pending);
    if (r == NVML_ERROR_NOT_SUPPORTED)
        return crater_errorf(err,
                             CRATER_EUNAVAIL,
                             "GPU %u does not support MIG",
                             idx);
    if (r != NVML_SUCCESS)
        return nverr(n, err, "nvmlDeviceGetMigMode", r);
    if (cur == 1)
        return 0;
    if (pending == 1)
        return crater_errorf(err,
                             CRATER_EUNAVAIL,
                             "GPU %u: MIG mode is pending a GPU reset "
                             "(nvidia-smi -i %u -r), then create instances "
                             "(nvidia-smi mig -i %u -cgi <profiles> -C)",
                             idx,
                             idx,
                             idx);
    return crater_errorf(err,
                         CRATER_EUNAVAIL,
                         "GPU %u: MIG mode is disabled; run nvidia-smi -i %u "
                         "-mig 1, then create instances (nvidia-smi mig -i "
                         "%u -cgi <profiles> -C)",
                         idx,
                         idx,
                         idx);
}

/* MIG device slot i of GPU idx into *m; 1 when there is none. */
static int mig_one(crater_nvml_t *n,
                   unsigned idx,
                   unsigned i,
                   crater_nvml_mig_t *m,
                   crater_error_t *err)
{
    nvml_dev h = NULL;
    nvml_mem mem = {0};
    nvml_ret r = n->f.mig_handle(n->gpus[idx].dev, i, &h);

    if (r == NVML_ERROR_NOT_FOUND)
        return 1;
    if (r != NVML_SUCCESS)
        return nverr(n, err, "nvmlDeviceGetMigDeviceHandleByIndex", r);
    memset(m, 0, sizeof(*m));
    if ((r = n->f.uuid(h, m->uuid, sizeof(m->uuid))) != NVML_SUCCESS)
        return nverr(n, err, "nvmlDeviceGetUUID (MIG)", r);
    if ((r = n->f.mem(h, &mem)) != NVML_SUCCESS)
        return nverr(n, err, "nvmlDeviceGetMemoryInfo (MIG)", r);
    m->uuid[sizeof(m->uuid) - 1] = '\0';
    m->memory_bytes = mem.total;
    m->index = i;
    return 0;
}

int crater_nvml_migs(crater_nvml_t *n,
                     unsigned idx,
                     crater_nvml_mig_t *out,
                     size_t max,
                     size_t *count,
                     crater_error_t *err)
{
    crater_nvml_mig_t m;
    unsigned slots = 0;
    size_t c = 0;
    nvml_ret r;

    if (check_idx(n, idx, err) < 0)
        return -1;
    if ((max && !out) || !count)
        return crater_errorf(err, CRATER_EINVAL, "no output buffer");
    if (mig_enabled(n, idx, err) < 0)
        return -1;
    if ((r = n->f.mig_max(n->gpus[idx].dev, &slots)) != NVML_SUCCESS)
        return nverr(n, err, "nvmlDeviceGetMaxMigDeviceCount", r);
    for (unsigned i = 0; i < slots && i < NVML_MIG_SLOTS; i++) {
        int rc = mig_one(n, idx, i, &m, err);
        if (rc < 0)
            return -1;
        if (rc == 0 && c < max)
            out[c] = m;
        c += rc == 0;
    }
    *count = c;
    return 0;
}
