/* nvmlstub.c - a stand-in libnvidia-ml.so.1 for tests (no GPU on CI).
 *
 * It exports the NVML entry points the agent uses and behaves like the
 * real library where tests can tell: nvmlInit_v2 first (else
 * NVML_ERROR_UNINITIALIZED, init/shutdown nest), NVML_ERROR_INVALID_ARGUMENT
 * for NULL pointers and bad indices, NVML_ERROR_INSUFFICIENT_SIZE with
 * the needed count for short process buffers, NVML_ERROR_NOT_SUPPORTED
 * where a whole H100/H200 answers it (nvmlDeviceGetAttributes_v2 and
 * nvmlDeviceGetNumaNodeId on x86 hosts).
 *
 * The machine is read from the environment at nvmlInit_v2:
 *   NVMLSTUB_GPUS    number of GPUs (default 2, at most 8)
 *   NVMLSTUB_MODEL   nvmlDeviceGetName (default "NVIDIA H200")
 *   NVMLSTUB_MEM     total memory in bytes (default 143771 MiB)
 *   NVMLSTUB_NVLINK  "direct" (default: GPUs 2k and 2k+1 joined by links
 *                    0-3), "switch" (links 0-17 to NVSwitches) or "none"
 * Fixed: uuids GPU-5eed0000-0000-4000-8000-00000000000<i>, bus ids
 * 00000000:<07 + 8i>:00.0 in NVML's uppercase form, utilisation 37+i %,
 * used memory (i+1) GiB, GPU 0 runs compute pid 4242 (1 GiB) and graphics
 * pids 4242 (2 GiB) and 4243 (512 MiB), driver 580.159.04, CUDA 13000.
 *
 * Processes of the stub libcuda (src/gpuslice/stub_cuda.c, which writes
 * them with STUB_CUDA_NVML_DIR):
 *   NVMLSTUB_PROCS_DIR  the compute process lists of a GPU also hold one
 *                    entry per file DIR/<the GPU's uuid>.<pid> whose pid
 *                    exists (kill(pid, 0)), its usedGpuMemory the decimal
 *                    number in the file (at most 64 per GPU). Read at every
 *                    call, like the driver's live view.
 *
 * Utilisation (idle-GPU reclaim tests):
 *   NVMLSTUB_UTIL_FILE  line i of the file, "SM MEM" in percent, is what
 *                    nvmlDeviceGetUtilizationRates reports for GPU i
 *                    (utilization.gpu, utilization.memory); read at every
 *                    call so a test can make a GPU idle or busy. A GPU
 *                    with no such line keeps the fixed 37+i % and 10 %.
 *
 * MIG (nvmlDeviceGetMigMode, nvmlDeviceGetMaxMigDeviceCount,
 * nvmlDeviceGetMigDeviceHandleByIndex):
 *   NVMLSTUB_MIG     "<gpu>=<spec>;<gpu>=<spec>...", spec one of
 *                    "<MiB>,<MiB>,..." MIG mode on with one MIG device per
 *                    entry, in index order ("-" leaves that index empty,
 *                    "" none at all); "off" MIG capable, mode disabled;
 *                    "pending" disabled, enabled after a reset;
 *                    "unsupported" not MIG capable.
 *                    e.g. "0=71680,35840,17920;1=off"
 * GPUs not listed: MIG capable and disabled when the model names an A100,
 * A30, H100, H200 or B200, else not capable (NVML_ERROR_NOT_SUPPORTED from
 * nvmlDeviceGetMigMode). The maximum MIG device count is 7 in MIG mode and
 * 0 otherwise; an index below 7 without a device answers
 * NVML_ERROR_NOT_FOUND, 7 and above NVML_ERROR_INVALID_ARGUMENT, and a GPU
 * not in MIG mode NVML_ERROR_NOT_SUPPORTED. MIG device handles answer
 * nvmlDeviceGetUUID (MIG-5eed000<gpu>-000<index>-4000-8000-000000000000)
 * and nvmlDeviceGetMemoryInfo (total = the instance, nothing used); other
 * entry points answer NVML_ERROR_INVALID_ARGUMENT for them.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define MAXG 8
#define NLINKS 18
#define GIB (1024ull * 1024ull * 1024ull)
#define MAXMIG 7 /* MIG devices per GPU (A100/H100/H200: 7) */
#define MAXFILEPROCS 64

typedef struct dev {
    unsigned idx;
    unsigned mig; /* 0: the GPU itself; k + 1: its MIG device k */
} dev_t_;
typedef dev_t_ *nvml_dev;

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
    unsigned pid;
    unsigned long long used;
    unsigned gi, ci;
} nvml_procinfo;

typedef struct {
    unsigned mp_count, copy_engines, decoders, encoders, jpegs, ofas;
    unsigned gi_slices, ci_slices;
    unsigned long long memory_mb;
} nvml_attrs;

enum {
    OK = 0,
    UNINIT = 1,
    INVALID = 2,
    NOT_SUPPORTED = 3,
    NOT_FOUND = 6,
    INSUFFICIENT = 7
};

static int refs;
static unsigned ngpus = 2;
static char model[96] = "NVIDIA H200";
static unsigned long long mem_total = 143771ull * 1024 * 1024;
static int link_mode;        /* 0 direct, 1 switch, 2 none */
static char procs_dir[2048]; /* NVMLSTUB_PROCS_DIR, "" for none */
static dev_t_ devs[MAXG];

enum {
    MIG_UNSUPPORTED = -1,
    MIG_OFF,
    MIG_ON,
    MIG_PENDING
};
static int mig_state[MAXG];
static unsigned long long mig_mib[MAXG][MAXMIG]; /* 0: no device */
static dev_t_ migdevs[MAXG * MAXMIG];

static int mig_capable(void)
{
    static const char *const names[] = {"A100", "A30", "H100", "H200", "B200"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strstr(model, names[i]))
            return 1;
    return 0;
}

/* "71680,-,17920" into mig_mib[g]; "off" etc. into mig_state[g]. */
static void mig_spec(unsigned g, const char *spec, size_t len)
{
    char buf[256], *save = NULL, *tok;
    unsigned k = 0;

    snprintf(buf, sizeof(buf), "%.*s", (int)len, spec);
    if (!strcmp(buf, "off") || !strcmp(buf, "pending")
        || !strcmp(buf, "unsupported")) {
        mig_state[g] = buf[0] == 'o'   ? MIG_OFF
                       : buf[0] == 'p' ? MIG_PENDING
                                       : MIG_UNSUPPORTED;
        return;
    }
    mig_state[g] = MIG_ON;
    for (tok = strtok_r(buf, ",", &save); tok && k < MAXMIG;
         tok = strtok_r(NULL, ",", &save), k++)
        mig_mib[g][k] = strcmp(tok, "-") ? strtoull(tok, NULL, 10) : 0;
}

static void mig_configure(void)
{
    const char *e = getenv("NVMLSTUB_MIG");

    memset(mig_mib, 0, sizeof(mig_mib));
    for (unsigned g = 0; g < MAXG; g++) {
        mig_state[g] = mig_capable() ? MIG_OFF : MIG_UNSUPPORTED;
        for (unsigned k = 0; k < MAXMIG; k++)
            migdevs[g * MAXMIG + k] = (dev_t_){g, k + 1};
    }
    while (e && *e) {
        const char *end = strchr(e, ';'), *eq = strchr(e, '=');
        size_t n = end ? (size_t)(end - e) : strlen(e);
        unsigned g = (unsigned)atoi(e);
        if (eq && eq < e + n && g < MAXG)
            mig_spec(g, eq + 1, n - (size_t)(eq + 1 - e));
        e += n + (end != NULL);
    }
}

static void configure(void)
{
    const char *g = getenv("NVMLSTUB_GPUS"), *m = getenv("NVMLSTUB_MODEL");
    const char *b = getenv("NVMLSTUB_MEM"), *l = getenv("NVMLSTUB_NVLINK");

    ngpus = g ? (unsigned)atoi(g) : 2;
    ngpus = ngpus > MAXG ? MAXG : ngpus;
    snprintf(model, sizeof(model), "%s", m ? m : "NVIDIA H200");
    mem_total = b ? strtoull(b, NULL, 10) : 143771ull * 1024 * 1024;
    link_mode = !l || !strcmp(l, "direct") ? 0 : !strcmp(l, "switch") ? 1 : 2;
    l = getenv("NVMLSTUB_PROCS_DIR");
    snprintf(procs_dir, sizeof(procs_dir), "%s", l ? l : "");
    for (unsigned i = 0; i < MAXG; i++)
        devs[i].idx = i;
    mig_configure();
}

EXPORT int nvmlInit_v2(void)
{
    if (refs++ == 0)
        configure();
    return OK;
}

EXPORT int nvmlShutdown(void)
{
    if (!refs)
        return UNINIT;
    refs--;
    return OK;
}

EXPORT const char *nvmlErrorString(int r)
{
    static const char *const s[] = {"Success",
                                    "Uninitialized",
                                    "Invalid Argument",
                                    "Not Supported"};
    return r >= 0 && r < 4     ? s[r]
           : r == NOT_FOUND    ? "Not Found"
           : r == INSUFFICIENT ? "Insufficient Size"
                               : "Unknown Error";
}

/* The common checks: initialised, device valid, pointers given. */
static int chk(nvml_dev d, const void *p)
{
    if (!refs)
        return UNINIT;
    if (!p || (d && (d < devs || d >= devs + ngpus)))
        return INVALID;
    return OK;
}

static int chk_dev(nvml_dev d, const void *p)
{
    return !refs ? UNINIT : !d ? INVALID : chk(d, p);
}

/* d is a MIG device handle that exists now. */
static int mig_valid(nvml_dev d)
{
    uintptr_t p = (uintptr_t)d, lo = (uintptr_t)migdevs;

    if (p < lo || p >= lo + sizeof(migdevs) || (p - lo) % sizeof(*d))
        return 0;
    return d->idx < ngpus && mig_state[d->idx] == MIG_ON
           && mig_mib[d->idx][d->mig - 1] > 0;
}

/* chk_dev, and MIG device handles are good too. */
static int chk_any(nvml_dev d, const void *p)
{
    if (refs && d && mig_valid(d))
        return p ? OK : INVALID;
    return chk_dev(d, p);
}

EXPORT int nvmlDeviceGetCount_v2(unsigned *n)
{
    int r = chk(NULL, n);

    if (r == OK)
        *n = ngpus;
    return r;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned i, nvml_dev *d)
{
    int r = chk(NULL, d);

    if (r == OK && i >= ngpus)
        return INVALID;
    if (r == OK)
        *d = &devs[i];
    return r;
}

static int put(char *buf, unsigned len, const char *s)
{
    if (strlen(s) >= len)
        return INSUFFICIENT;
    strcpy(buf, s);
    return OK;
}

EXPORT int nvmlDeviceGetUUID(nvml_dev d, char *buf, unsigned len)
{
    char s[64];
    int r = chk_any(d, buf);

    if (r != OK)
        return r;
    if (d->mig)
        snprintf(s,
                 sizeof(s),
                 "MIG-5eed%04u-%04u-4000-8000-000000000000",
                 d->idx,
                 d->mig - 1);
    else
        snprintf(s,
                 sizeof(s),
                 "GPU-5eed0000-0000-4000-8000-00000000000%u",
                 d->idx);
    return put(buf, len, s);
}

EXPORT int nvmlDeviceGetName(nvml_dev d, char *buf, unsigned len)
{
    int r = chk_dev(d, buf);

    return r != OK ? r : put(buf, len, model);
}

static void pci_of(unsigned idx, nvml_pci *p)
{
    memset(p, 0, sizeof(*p));
    p->bus = 0x07 + 8 * idx;
    p->pci_device_id = 0x233510de;
    snprintf(p->bus_id, sizeof(p->bus_id), "00000000:%02X:00.0", p->bus);
    snprintf(p->bus_id_legacy,
             sizeof(p->bus_id_legacy),
             "0000:%02X:00.0",
             p->bus);
}

EXPORT int nvmlDeviceGetPciInfo_v3(nvml_dev d, nvml_pci *p)
{
    int r = chk_dev(d, p);

    if (r == OK)
        pci_of(d->idx, p);
    return r;
}

EXPORT int nvmlDeviceGetMemoryInfo(nvml_dev d, nvml_mem *m)
{
    int r = chk_any(d, m);

    if (r != OK)
        return r;
    if (d->mig) {
        m->total = mig_mib[d->idx][d->mig - 1] << 20;
        m->used = 0;
        m->free = m->total;
        return OK;
    }
    m->total = mem_total;
    m->used = (d->idx + 1) * GIB;
    m->free = m->total - m->used;
    return OK;
}

EXPORT int nvmlDeviceGetCudaComputeCapability(nvml_dev d, int *ma, int *mi)
{
    int r = chk_dev(d, ma);

    if (r == OK && !mi)
        r = INVALID;
    if (r == OK)
        *ma = 9, *mi = 0;
    return r;
}

EXPORT int nvmlDeviceGetAttributes_v2(nvml_dev d, nvml_attrs *a)
{
    int r = chk_dev(d, a);

    return r != OK ? r : NOT_SUPPORTED; /* MIG device handles only */
}

EXPORT int nvmlDeviceGetNumaNodeId(nvml_dev d, unsigned *node)
{
    int r = chk_dev(d, node);

    return r != OK ? r : NOT_SUPPORTED; /* GPU memory is not a NUMA node */
}

static int link_chk(nvml_dev d, unsigned link, const void *p)
{
    int r = chk_dev(d, p);

    if (r != OK)
        return r;
    if (link >= NLINKS)
        return INVALID;
    if (link_mode == 2)
        return NOT_SUPPORTED;
    if (link_mode == 0 && (d->idx ^ 1) >= ngpus)
        return NOT_SUPPORTED; /* the odd GPU out has no partner */
    return OK;
}

static int link_on(unsigned link)
{
    return link_mode == 1 || link < 4;
}

EXPORT int nvmlDeviceGetNvLinkState(nvml_dev d, unsigned link, unsigned *on)
{
    int r = link_chk(d, link, on);

    if (r == OK)
        *on = (unsigned)link_on(link);
    return r;
}

EXPORT int nvmlDeviceGetNvLinkVersion(nvml_dev d, unsigned link, unsigned *v)
{
    int r = link_chk(d, link, v);

    if (r == OK)
        *v = 4;
    return r;
}

EXPORT int nvmlDeviceGetNvLinkRemoteDeviceType(nvml_dev d,
                                               unsigned link,
                                               unsigned *t)
{
    int r = link_chk(d, link, t);

    if (r == OK)
        *t = link_mode == 1 ? 2 : 0;
    return r;
}

EXPORT int nvmlDeviceGetNvLinkRemotePciInfo_v2(nvml_dev d,
                                               unsigned link,
                                               nvml_pci *p)
{
    int r = link_chk(d, link, p);

    if (r == OK && !link_on(link))
        return NOT_SUPPORTED;
    if (r != OK)
        return r;
    if (link_mode == 1) {
        pci_of(0x20 + link, p); /* an NVSwitch */
        return OK;
    }
    pci_of(d->idx ^ 1, p);
    return OK;
}

/* Line idx of NVMLSTUB_UTIL_FILE into u; 0 when there is none. */
static int file_util(unsigned idx, nvml_util *u)
{
    const char *path = getenv("NVMLSTUB_UTIL_FILE");
    unsigned sm, mem, i = 0;
    char line[128];
    int found = 0;
    FILE *f;

    if (!path || !(f = fopen(path, "r")))
        return 0;
    while (!found && fgets(line, sizeof(line), f))
        if (i++ == idx && sscanf(line, "%u %u", &sm, &mem) == 2) {
            u->gpu = sm, u->memory = mem;
            found = 1;
        }
    fclose(f);
    return found;
}

EXPORT int nvmlDeviceGetUtilizationRates(nvml_dev d, nvml_util *u)
{
    int r = chk_dev(d, u);

    if (r == OK && !file_util(d->idx, u))
        u->gpu = 37 + d->idx, u->memory = 10;
    return r;
}

/* The stub libcuda's processes on GPU idx: files <uuid>.<pid> in
 * procs_dir whose pid exists. Appended to out (room for max). */
static unsigned file_procs(unsigned idx, nvml_procinfo *out, unsigned max)
{
    char uuid[64], path[2400];
    struct dirent *e;
    unsigned n = 0;
    size_t ul;
    DIR *dir;

    if (!procs_dir[0] || !(dir = opendir(procs_dir)))
        return 0;
    snprintf(uuid,
             sizeof(uuid),
             "GPU-5eed0000-0000-4000-8000-00000000000%u",
             idx);
    ul = strlen(uuid);
    while (n < max && (e = readdir(dir))) {
        unsigned long long used = 0;
        unsigned long pid;
        char *end;
        FILE *f;
        if (strncmp(e->d_name, uuid, ul) != 0 || e->d_name[ul] != '.')
            continue;
        pid = strtoul(e->d_name + ul + 1, &end, 10);
        if (*end || pid == 0 || (kill((pid_t)pid, 0) < 0 && errno == ESRCH))
            continue;
        snprintf(path, sizeof(path), "%s/%s", procs_dir, e->d_name);
        if (!(f = fopen(path, "r")))
            continue; /* gone since readdir */
        if (fscanf(f, "%llu", &used) == 1)
            out[n++] = (nvml_procinfo){(unsigned)pid, used, 0, 0};
        fclose(f);
    }
    closedir(dir);
    return n;
}

static int procs(nvml_dev d, unsigned *count, nvml_procinfo *p, int gfx)
{
    static const nvml_procinfo compute[] = {{4242, GIB, 0, 0}};
    static const nvml_procinfo graphics[] = {{4242, 2 * GIB, 0, 0},
                                             {4243, GIB / 2, 0, 0}};
    nvml_procinfo all[2 + MAXFILEPROCS];
    unsigned n;
    int r = chk_dev(d, count);

    if (r != OK)
        return r;
    n = d->idx == 0 ? (gfx ? 2 : 1) : 0;
    memcpy(all, gfx ? graphics : compute, n * sizeof(*all));
    if (!gfx)
        n += file_procs(d->idx, all + n, MAXFILEPROCS);
    if (*count < n) {
        *count = n;
        return INSUFFICIENT;
    }
    if (n && !p)
        return INVALID;
    if (n)
        memcpy(p, all, n * sizeof(*p));
    *count = n;
    return OK;
}

EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(nvml_dev d,
                                                   unsigned *c,
                                                   nvml_procinfo *p)
{
    return procs(d, c, p, 0);
}

EXPORT int nvmlDeviceGetComputeRunningProcesses_v2(nvml_dev d,
                                                   unsigned *c,
                                                   nvml_procinfo *p)
{
    return procs(d, c, p, 0);
}

EXPORT int nvmlDeviceGetGraphicsRunningProcesses_v3(nvml_dev d,
                                                    unsigned *c,
                                                    nvml_procinfo *p)
{
    return procs(d, c, p, 1);
}

EXPORT int nvmlDeviceGetGraphicsRunningProcesses_v2(nvml_dev d,
                                                    unsigned *c,
                                                    nvml_procinfo *p)
{
    return procs(d, c, p, 1);
}

EXPORT int nvmlSystemGetDriverVersion(char *buf, unsigned len)
{
    int r = chk(NULL, buf);

    return r != OK ? r : put(buf, len, "580.159.04");
}

EXPORT int nvmlSystemGetCudaDriverVersion_v2(int *v)
{
    int r = chk(NULL, v);

    if (r == OK)
        *v = 13000;
    return r;
}

EXPORT int nvmlDeviceGetMigMode(nvml_dev d, unsigned *cur, unsigned *pending)
{
    int r = chk_dev(d, cur);

    if (r == OK && !pending)
        r = INVALID;
    if (r != OK)
        return r;
    if (mig_state[d->idx] == MIG_UNSUPPORTED)
        return NOT_SUPPORTED;
    *cur = mig_state[d->idx] == MIG_ON;
    *pending = mig_state[d->idx] != MIG_OFF;
    return OK;
}

EXPORT int nvmlDeviceGetMaxMigDeviceCount(nvml_dev d, unsigned *count)
{
    int r = chk_dev(d, count);

    if (r == OK)
        *count = mig_state[d->idx] == MIG_ON ? MAXMIG : 0;
    return r;
}

EXPORT int nvmlDeviceGetMigDeviceHandleByIndex(nvml_dev d,
                                               unsigned i,
                                               nvml_dev *out)
{
    int r = chk_dev(d, out);

    if (r != OK)
        return r;
    if (mig_state[d->idx] != MIG_ON)
        return NOT_SUPPORTED;
    if (i >= MAXMIG)
        return INVALID;
    if (!mig_mib[d->idx][i])
        return NOT_FOUND;
    *out = &migdevs[d->idx * MAXMIG + i];
    return OK;
}
