/*
 * stub_cuda.c - a stub libcuda.so.1 for testing libcrater-gpuslice.so
 * without a GPU. Built by the tests, never installed.
 *
 * It implements the entry points the interposer hooks plus what a test
 * needs to get a context, with the real driver's argument checks and
 * return codes: CUDA_ERROR_NOT_INITIALIZED before cuInit,
 * CUDA_ERROR_INVALID_CONTEXT without a current context,
 * CUDA_ERROR_INVALID_VALUE for NULL out-pointers, size 0 and unknown
 * (or already freed) pointers and handles, CUDA_ERROR_INVALID_DEVICE for
 * a bad ordinal, CUDA_ERROR_OUT_OF_MEMORY when the device is full.
 * Device memory is a per-process counter (no host memory behind it): the
 * addresses handed out are never reused, so a double free is always seen.
 *
 * Environment (read at cuInit): STUB_CUDA_MEM bytes per device (default
 * 1 GiB), STUB_CUDA_DEVICES count (default 2, at most 8). Device d has
 * UUID 53545542-0000-4000-8000-0000000000dd ("STUB" then d), which
 * NVML would print as GPU-53545542-0000-4000-8000-0000000000dd, unless
 * STUB_CUDA_UUIDS="GPU-...,GPU-..." (NVML's form) names the UUIDs of
 * devices 0, 1, ... (devices not named keep the default).
 * cuGetProcAddress resolves every entry point here by family name,
 * version and per-thread-default-stream flag like the driver.
 *
 * What NVML would see, for the stub NVML (tests/data/nvmlstub,
 * NVMLSTUB_PROCS_DIR): with STUB_CUDA_NVML_DIR=DIR, while this process
 * holds a context on device d (cuDevicePrimaryCtxRetain until the
 * matching cuDevicePrimaryCtxRelease_v2, or cuCtxCreate_v2), the file
 * DIR/<NVML uuid>.<pid> holds the bytes it uses there in decimal: the
 * context, STUB_CUDA_CTX_BYTES (default 300 MiB), plus its live
 * allocations on d; rewritten (by rename) at every allocation and free,
 * removed at the last release and at exit (not at _exit: the stub NVML
 * ignores files of pids that no longer exist). The context's bytes are
 * not taken from STUB_CUDA_MEM: cuMemGetInfo_v2 and out-of-memory are as
 * without it.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_types.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEV 8
#define MAX_LIVE 8192
#define VMM_GRANULARITY (2ULL << 20)

struct CUctx_st {
    CUdevice dev;
};

typedef struct live {
    uint64_t key; /* 0: free slot */
    uint64_t bytes;
    int dev;
    int handle; /* cuMemCreate handle, not a pointer */
} live_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialized;
static int ndev = 2;
static uint64_t mem = 1ULL << 30;
static uint64_t used[MAX_DEV];
static uint64_t next_addr[MAX_DEV];
static uint64_t next_handle = 0x1000;
static live_t live[MAX_LIVE];
static struct CUctx_st primary[MAX_DEV];
static _Thread_local CUcontext current;
static unsigned char uuids[MAX_DEV][16];
static char nvml_dir[2048]; /* "": no per-process files */
static uint64_t ctx_bytes = 300ULL << 20;
static int held[MAX_DEV]; /* contexts this process holds on the device */

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    return strtoull(s, NULL, 10);
}

/* "GPU-5eed0000-0000-4000-8000-000000000000": 32 hex digits, dashes
 * anywhere. 0 when s holds one (then *end is after it), -1 otherwise. */
static int uuid_parse(const char *s, unsigned char out[16], const char **end)
{
    int nib = 0;

    if (strncmp(s, "GPU-", 4) == 0)
        s += 4;
    memset(out, 0, 16);
    for (; *s && *s != ',' && nib < 32; s++) {
        int v = *s >= '0' && *s <= '9'   ? *s - '0'
                : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10
                : *s >= 'A' && *s <= 'F' ? *s - 'A' + 10
                                         : -1;
        if (*s == '-')
            continue;
        if (v < 0)
            return -1;
        out[nib / 2] |= (unsigned char)(nib % 2 ? v : v << 4);
        nib++;
    }
    *end = s;
    return nib == 32 ? 0 : -1;
}

static void uuid_format(int dev, char *buf, size_t size)
{
    const unsigned char *u = uuids[dev];

    snprintf(buf,
             size,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x",
             u[0],
             u[1],
             u[2],
             u[3],
             u[4],
             u[5],
             u[6],
             u[7],
             u[8],
             u[9],
             u[10],
             u[11],
             u[12],
             u[13],
             u[14],
             u[15]);
}

/* Default UUIDs, then those STUB_CUDA_UUIDS names. */
static void uuids_init(void)
{
    static const unsigned char base[16] =
        {0x53, 0x54, 0x55, 0x42, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0};
    const char *s = getenv("STUB_CUDA_UUIDS");

    for (int d = 0; d < MAX_DEV; d++) {
        memcpy(uuids[d], base, 16);
        uuids[d][15] = (unsigned char)d;
    }
    for (int d = 0; s && *s && d < MAX_DEV; d++) {
        unsigned char u[16];
        if (uuid_parse(s, u, &s) == 0)
            memcpy(uuids[d], u, 16);
        while (*s && *s != ',')
            s++;
        s += *s == ',';
    }
}

/* DIR/<uuid>.<pid>: what this process uses on dev (lock held). */
static void nvml_file(int dev)
{
    char path[2200], tmp[2200], uuid[48];
    FILE *f;

    if (!nvml_dir[0])
        return;
    uuid_format(dev, uuid, sizeof(uuid));
    snprintf(path, sizeof(path), "%s/%s.%d", nvml_dir, uuid, (int)getpid());
    if (held[dev] <= 0) {
        unlink(path);
        return;
    }
    snprintf(tmp, sizeof(tmp), "%s/.%s.%d", nvml_dir, uuid, (int)getpid());
    if (!(f = fopen(tmp, "w")))
        return;
    fprintf(f, "%llu\n", (unsigned long long)(ctx_bytes + used[dev]));
    if (fclose(f) == 0)
        rename(tmp, path);
    else
        unlink(tmp);
}

/* Contexts held on dev: +1 or -1, and the file follows. */
static void hold(int dev, int delta)
{
    pthread_mutex_lock(&lock);
    held[dev] += held[dev] + delta >= 0 ? delta : 0;
    nvml_file(dev);
    pthread_mutex_unlock(&lock);
}

__attribute__((destructor)) static void stub_fini(void)
{
    pthread_mutex_lock(&lock);
    for (int d = 0; d < MAX_DEV; d++)
        if (held[d] > 0) {
            held[d] = 0;
            nvml_file(d);
        }
    pthread_mutex_unlock(&lock);
}

EXPORT CUresult cuInit(unsigned flags)
{
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (!initialized) {
        const char *dir = getenv("STUB_CUDA_NVML_DIR");
        mem = env_u64("STUB_CUDA_MEM", 1ULL << 30);
        uint64_t n = env_u64("STUB_CUDA_DEVICES", 2);
        ndev = n > MAX_DEV ? MAX_DEV : (int)n;
        ctx_bytes = env_u64("STUB_CUDA_CTX_BYTES", 300ULL << 20);
        snprintf(nvml_dir, sizeof(nvml_dir), "%s", dir ? dir : "");
        uuids_init();
        for (int d = 0; d < MAX_DEV; d++) {
            primary[d].dev = d;
            next_addr[d] = 0x700000000000ULL + ((uint64_t)d << 40);
        }
        initialized = 1;
    }
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *v)
{
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    *count = ndev;
    return CUDA_SUCCESS;
}

/* Common checks: initialised, out-pointer, device ordinal. */
static CUresult check_dev(const void *out, CUdevice dev)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    return dev < 0 || dev >= ndev ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    CUresult rc = check_dev(dev, ordinal);
    if (rc == CUDA_SUCCESS)
        *dev = ordinal;
    return rc;
}

EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    CUresult rc = check_dev(uuid, dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    memcpy(uuid->bytes, uuids[dev], 16);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return cuDeviceGetUuid_v2(uuid, dev);
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult rc = check_dev(bytes, dev);
    if (rc == CUDA_SUCCESS)
        *bytes = (size_t)mem;
    return rc;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    CUresult rc = check_dev(ctx, dev);
    if (rc == CUDA_SUCCESS) {
        *ctx = &primary[dev];
        hold(dev, 1);
    }
    return rc;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult rc = check_dev(&dev, dev);
    if (rc == CUDA_SUCCESS)
        hold(dev, -1);
    return rc;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned flags, CUdevice dev)
{
    CUresult rc = check_dev(ctx, dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    (void)flags;
    *ctx = &primary[dev];
    current = *ctx;
    hold(dev, 1);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    current = ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    *ctx = current;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!current)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    *dev = current->dev;
    return CUDA_SUCCESS;
}

/* Checks shared by the pointer allocators: initialised, context, out. */
static CUresult check_alloc(const void *out, size_t bytes)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!current)
        return CUDA_ERROR_INVALID_CONTEXT;
    return !out || bytes == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* Take bytes on dev and record key (a new address when handle is 0). */
static CUresult take(int dev,
                     uint64_t bytes,
                     int handle,
                     unsigned long long *key)
{
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_LIVE && bytes <= mem - used[dev]; i++) {
        if (live[i].key)
            continue;
        if (handle) {
            *key = next_handle++;
        } else {
            *key = next_addr[dev];
            next_addr[dev] += (bytes + 511) & ~511ULL;
        }
        live[i] = (live_t){*key, bytes, dev, handle};
        used[dev] += bytes;
        nvml_file(dev);
        rc = CUDA_SUCCESS;
        break;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

static CUresult give(uint64_t key, int handle)
{
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_LIVE && key; i++) {
        if (live[i].key != key || live[i].handle != handle)
            continue;
        used[live[i].dev] -= live[i].bytes;
        live[i].key = 0;
        nvml_file(live[i].dev);
        rc = CUDA_SUCCESS;
        break;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
    CUresult rc = check_alloc(dptr, bytes);
    return rc != CUDA_SUCCESS ? rc : take(current->dev, bytes, 0, dptr);
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr,
                                  size_t bytes,
                                  unsigned flags)
{
    CUresult rc = check_alloc(dptr, bytes);
    if (rc == CUDA_SUCCESS && flags != CU_MEM_ATTACH_GLOBAL
        && flags != CU_MEM_ATTACH_HOST)
        rc = CUDA_ERROR_INVALID_VALUE;
    return rc != CUDA_SUCCESS ? rc : take(current->dev, bytes, 0, dptr);
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr,
                                   size_t *pitch,
                                   size_t width,
                                   size_t height,
                                   unsigned elem)
{
    CUresult rc = check_alloc(dptr, width);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pitch || height == 0 || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = (width + 511) & ~(size_t)511;
    if (p < width || height > SIZE_MAX / p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = take(current->dev, p * height, 0, dptr);
    if (rc == CUDA_SUCCESS)
        *pitch = p;
    return rc;
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s)
{
    (void)s;
    return cuMemAlloc_v2(dptr, bytes);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr,
                                     size_t bytes,
                                     CUstream s)
{
    (void)s;
    return cuMemAlloc_v2(dptr, bytes);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr,
                                        size_t bytes,
                                        CUmemoryPool pool,
                                        CUstream s)
{
    CUresult rc = check_alloc(dptr, bytes);
    if (rc == CUDA_SUCCESS && !pool)
        rc = CUDA_ERROR_INVALID_VALUE;
    return rc != CUDA_SUCCESS ? rc : cuMemAllocAsync(dptr, bytes, s);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr,
                                             size_t bytes,
                                             CUmemoryPool pool,
                                             CUstream s)
{
    return cuMemAllocFromPoolAsync(dptr, bytes, pool, s);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    return give(dptr, 0);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
    (void)s;
    return give(dptr, 0);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
    (void)s;
    return give(dptr, 0);
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle,
                            size_t size,
                            const CUmemAllocationProp *prop,
                            unsigned long long flags)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!handle || !prop || flags != 0 || size == 0
        || size % VMM_GRANULARITY != 0
        || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED
        || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.id < 0 || prop->location.id >= ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    return take(prop->location.id, size, 1, handle);
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    return give(handle, 1);
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!current)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!free_b || !total_b)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    *free_b = (size_t)(mem - used[current->dev]);
    *total_b = (size_t)mem;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

/* cuGetProcAddress: family name, entry point, first version, ptsz. */
typedef void (*fn_t)(void);
typedef struct proc {
    const char *family;
    fn_t fn;
    int minver;
    int ptsz;
} proc_t;

EXPORT CUresult cuGetProcAddress_v2(const char *symbol,
                                    void **pfn,
                                    int ver,
                                    cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *st);
EXPORT CUresult cuGetProcAddress(const char *symbol,
                                 void **pfn,
                                 int ver,
                                 cuuint64_t flags);

#define P(fam, fn, ver, ptsz)    \
    {                            \
        fam, (fn_t)fn, ver, ptsz \
    }
static const proc_t procs[] = {
    P("cuInit", cuInit, 2000, 0),
    P("cuDriverGetVersion", cuDriverGetVersion, 2020, 0),
    P("cuDeviceGet", cuDeviceGet, 2000, 0),
    P("cuDeviceGetCount", cuDeviceGetCount, 2000, 0),
    P("cuDeviceGetUuid", cuDeviceGetUuid, 9020, 0),
    P("cuDeviceGetUuid", cuDeviceGetUuid_v2, 11040, 0),
    P("cuDeviceTotalMem", cuDeviceTotalMem_v2, 3020, 0),
    P("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain, 7000, 0),
    P("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2, 11000, 0),
    P("cuCtxCreate", cuCtxCreate_v2, 3020, 0),
    P("cuCtxSetCurrent", cuCtxSetCurrent, 4000, 0),
    P("cuCtxGetCurrent", cuCtxGetCurrent, 4000, 0),
    P("cuCtxGetDevice", cuCtxGetDevice, 2000, 0),
    P("cuMemAlloc", cuMemAlloc_v2, 3020, 0),
    P("cuMemAllocPitch", cuMemAllocPitch_v2, 3020, 0),
    P("cuMemAllocManaged", cuMemAllocManaged, 6000, 0),
    P("cuMemAllocAsync", cuMemAllocAsync, 11020, 0),
    P("cuMemAllocAsync", cuMemAllocAsync_ptsz, 11020, 1),
    P("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync, 11020, 0),
    P("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync_ptsz, 11020, 1),
    P("cuMemFree", cuMemFree_v2, 3020, 0),
    P("cuMemFreeAsync", cuMemFreeAsync, 11020, 0),
    P("cuMemFreeAsync", cuMemFreeAsync_ptsz, 11020, 1),
    P("cuMemCreate", cuMemCreate, 10020, 0),
    P("cuMemRelease", cuMemRelease, 10020, 0),
    P("cuMemGetInfo", cuMemGetInfo_v2, 3020, 0),
    P("cuGetProcAddress", cuGetProcAddress, 11030, 0),
    P("cuGetProcAddress", cuGetProcAddress_v2, 12000, 0),
};

/* Newest variant of family that ver allows; ptsz entries only when asked
 * for, the legacy ones otherwise (or when the family has no ptsz). */
static const proc_t *lookup(const char *sym, int ver, int ptsz, int *known)
{
    const proc_t *best = NULL;
    *known = 0;
    for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
        const proc_t *p = &procs[i];
        if (strcmp(p->family, sym) != 0)
            continue;
        *known = 1;
        if (p->minver > ver || (p->ptsz && !ptsz))
            continue;
        if (!best || p->minver > best->minver || (p->ptsz && !best->ptsz))
            best = p;
    }
    return best;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol,
                                    void **pfn,
                                    int ver,
                                    cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *st)
{
    if (!symbol || !pfn
        || flags > CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        return CUDA_ERROR_INVALID_VALUE;
    int known;
    const proc_t *p =
        lookup(symbol,
               ver,
               flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
               &known);
    *pfn = NULL;
    if (st)
        *st = p       ? CU_GET_PROC_ADDRESS_SUCCESS
              : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                      : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!p)
        return CUDA_ERROR_NOT_FOUND;
    memcpy(pfn, &p->fn, sizeof(*pfn));
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGetProcAddress(const char *symbol,
                                 void **pfn,
                                 int ver,
                                 cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, ver, flags, NULL);
}
