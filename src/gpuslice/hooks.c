/*
 * hooks.c - the allocation wrappers of libcrater-gpuslice.so.
 *
 * Every allocation follows one pattern: find the slice GPU of the device
 * (UUID looked up once per CUdevice), reserve the bytes in the shared file
 * (plus the context overhead at this process's first allocation on that
 * GPU), call the driver, and either remember pointer -> bytes or roll the
 * reservation back. A free takes the entry out of the table first (so an
 * address the driver hands out again right after cannot be confused with
 * it), calls the driver, and gives the bytes back only if the driver
 * freed. Calls the driver rejects for their arguments (NULL out-pointer,
 * size 0, no context) are passed through without accounting, so every
 * wrapper returns exactly the driver's code for bad input; the only code
 * the interposer adds is CUDA_ERROR_OUT_OF_MEMORY.
 *
 * What is counted where: cuMemAlloc/Pitch/Managed and the async pair on
 * the current context's device; cuMemCreate on prop->location's device at
 * create, given back at cuMemRelease (mapping does not allocate).
 */
#include <string.h>
#include <unistd.h>

#include "interpose.h"

#define R crater__gs_real
#define S crater__gs
#define GPU_NONE (-1)   /* device not in the slice: not counted */
#define GPU_REFUSE (-2) /* slice file unusable: refuse allocations */
#define GPU_UNKNOWN (-3)

static int active(void)
{
    return S.file != NULL || S.broken;
}

/* Slice GPU index of dev; cached as index + 2 (0: not looked up yet). */
static int dev_gpu(CUdevice dev)
{
    if (S.broken)
        return GPU_REFUSE;
    if (dev >= 0 && dev < GS_MAX_DEVICES) {
        int c = atomic_load_explicit(&S.devgpu[dev], memory_order_relaxed);
        if (c)
            return c - 2;
    }
    CUuuid u;
    CUresult rc = CUDA_ERROR_NOT_FOUND;
    if (R.cuDeviceGetUuid_v2)
        rc = R.cuDeviceGetUuid_v2(&u, dev);
    if (rc != CUDA_SUCCESS && R.cuDeviceGetUuid)
        rc = R.cuDeviceGetUuid(&u, dev);
    if (rc != CUDA_SUCCESS)
        return GPU_UNKNOWN; /* not cached: the driver will reject dev */
    int g = crater__gs_find_gpu(S.file, (const uint8_t *)u.bytes);
    if (dev >= 0 && dev < GS_MAX_DEVICES)
        atomic_store_explicit(&S.devgpu[dev], g + 2, memory_order_relaxed);
    return g;
}

static int ctx_gpu(void)
{
    CUdevice dev;
    if (!R.cuCtxGetDevice || R.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return GPU_UNKNOWN; /* no context: the driver call will fail */
    return dev_gpu(dev);
}

static int my_slot(void)
{
    int slot = atomic_load_explicit(&S.slot, memory_order_acquire);
    if (slot >= 0)
        return slot;
    pthread_mutex_lock(&S.slot_lock);
    slot = atomic_load(&S.slot);
    if (slot < 0) {
        int64_t pid = getpid();
        slot = crater__gs_claim(S.file, pid, crater__gs_proc_start(pid));
        atomic_store_explicit(&S.slot, slot, memory_order_release);
    }
    pthread_mutex_unlock(&S.slot_lock);
    return slot;
}

/* Reserve n bytes on slice GPU g (>= 0), plus the context overhead the
 * first time this process allocates there. */
static CUresult reserve(int g, uint64_t n)
{
    int slot = my_slot();
    if (slot < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    int first = !atomic_exchange(&S.charged[g], 1);
    uint64_t need = n + (first ? S.overhead : 0);
    if (need >= n && crater__gs_reserve(S.file, slot, g, need) == 0)
        return CUDA_SUCCESS;
    if (first)
        atomic_store(&S.charged[g], 0);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static void unreserve(int g, uint64_t n)
{
    int slot = atomic_load(&S.slot);
    if (g >= 0 && slot >= 0)
        crater__gs_release(S.file, slot, g, n);
}

/* Record a successful allocation; if the table cannot grow the bytes stay
 * reserved until the process exits (over-counting, never under). */
static void remember(crater__gs_tab_t *t, uint64_t key, uint64_t n, int g)
{
    if (g >= 0)
        crater__gs_tab_put(t, key, n, g);
}

/* Before an allocation of n bytes on slice GPU g: CUDA_SUCCESS to go on
 * (reserved if g >= 0), or the code to return. */
static CUresult admit(int g, uint64_t n)
{
    if (g == GPU_REFUSE)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return g >= 0 ? reserve(g, n) : CUDA_SUCCESS;
}

static CUresult finish(CUresult rc, CUdeviceptr *dptr, uint64_t n, int g)
{
    if (rc == CUDA_SUCCESS)
        remember(&S.ptrs, *dptr, n, g);
    else
        unreserve(g, n);
    return rc;
}

GS_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    crater__gs_init();
    if (!R.cuMemAlloc_v2)
        return CUDA_ERROR_NOT_FOUND;
    int g = active() && dptr && bytesize ? ctx_gpu() : GPU_NONE;
    CUresult rc = admit(g, bytesize);
    if (rc != CUDA_SUCCESS)
        return rc;
    return finish(R.cuMemAlloc_v2(dptr, bytesize), dptr, bytesize, g);
}

GS_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr,
                                     size_t bytesize,
                                     unsigned flags)
{
    crater__gs_init();
    if (!R.cuMemAllocManaged)
        return CUDA_ERROR_NOT_FOUND;
    int g = active() && dptr && bytesize ? ctx_gpu() : GPU_NONE;
    CUresult rc = admit(g, bytesize);
    if (rc != CUDA_SUCCESS)
        return rc;
    return finish(R.cuMemAllocManaged(dptr, bytesize, flags),
                  dptr,
                  bytesize,
                  g);
}

/* The pitch is chosen by the driver; reserve for the widest alignment
 * (512 bytes) and give back the difference once it is known. */
GS_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr,
                                      size_t *pitch,
                                      size_t width,
                                      size_t height,
                                      unsigned elementSize)
{
    crater__gs_init();
    if (!R.cuMemAllocPitch_v2)
        return CUDA_ERROR_NOT_FOUND;
    uint64_t row = ((uint64_t)width + 511) & ~(uint64_t)511;
    int ok = dptr && pitch && width && height && row >= width
             && height <= UINT64_MAX / row;
    int g = active() && ok ? ctx_gpu() : GPU_NONE;
    uint64_t est = ok ? row * height : 0;
    CUresult rc = admit(g, est);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = R.cuMemAllocPitch_v2(dptr, pitch, width, height, elementSize);
    if (rc != CUDA_SUCCESS || g < 0)
        return finish(rc, dptr, est, g);
    uint64_t real = (uint64_t)*pitch * height;
    if (real < est)
        unreserve(g, est - real);
    if (real > est && reserve(g, real - est) != CUDA_SUCCESS) {
        R.cuMemFree_v2(*dptr);
        unreserve(g, est);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    remember(&S.ptrs, *dptr, real, g);
    return CUDA_SUCCESS;
}

static CUresult alloc_async(gs_async_f f,
                            CUdeviceptr *dptr,
                            size_t bytesize,
                            CUstream s)
{
    if (!f)
        return CUDA_ERROR_NOT_FOUND;
    int g = active() && dptr && bytesize ? ctx_gpu() : GPU_NONE;
    CUresult rc = admit(g, bytesize);
    if (rc != CUDA_SUCCESS)
        return rc;
    return finish(f(dptr, bytesize, s), dptr, bytesize, g);
}

GS_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr,
                                   size_t bytesize,
                                   CUstream s)
{
    crater__gs_init();
    return alloc_async(R.cuMemAllocAsync, dptr, bytesize, s);
}

GS_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr,
                                        size_t bytesize,
                                        CUstream s)
{
    crater__gs_init();
    return alloc_async(R.cuMemAllocAsync_ptsz, dptr, bytesize, s);
}

static CUresult alloc_pool(gs_pool_f f,
                           CUdeviceptr *dptr,
                           size_t bytesize,
                           CUmemoryPool pool,
                           CUstream s)
{
    if (!f)
        return CUDA_ERROR_NOT_FOUND;
    int g = active() && dptr && bytesize && pool ? ctx_gpu() : GPU_NONE;
    CUresult rc = admit(g, bytesize);
    if (rc != CUDA_SUCCESS)
        return rc;
    return finish(f(dptr, bytesize, pool, s), dptr, bytesize, g);
}

GS_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr,
                                           size_t bytesize,
                                           CUmemoryPool pool,
                                           CUstream s)
{
    crater__gs_init();
    return alloc_pool(R.cuMemAllocFromPoolAsync, dptr, bytesize, pool, s);
}

GS_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr,
                                                size_t bytesize,
                                                CUmemoryPool pool,
                                                CUstream s)
{
    crater__gs_init();
    return alloc_pool(R.cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool, s);
}

GS_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle,
                               size_t size,
                               const CUmemAllocationProp *prop,
                               unsigned long long flags)
{
    crater__gs_init();
    if (!R.cuMemCreate)
        return CUDA_ERROR_NOT_FOUND;
    int g = GPU_NONE;
    CUdevice dev;
    if (active() && handle && prop && size && flags == 0
        && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && R.cuDeviceGet
        && R.cuDeviceGet(&dev, prop->location.id) == CUDA_SUCCESS)
        g = dev_gpu(dev);
    CUresult rc = admit(g, size);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = R.cuMemCreate(handle, size, prop, flags);
    if (rc == CUDA_SUCCESS)
        remember(&S.handles, *handle, size, g);
    else
        unreserve(g, size);
    return rc;
}

/* After the driver's free of an entry taken out of t: give the bytes back
 * if it freed, put the entry back if it did not. */
static CUresult free_tracked(crater__gs_tab_t *t,
                             CUresult rc,
                             int had,
                             const crater__gs_entry_t *e)
{
    if (!had)
        return rc;
    if (rc == CUDA_SUCCESS)
        unreserve(e->gpu, e->bytes);
    else
        crater__gs_tab_put(t, e->key, e->bytes, e->gpu);
    return rc;
}

GS_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    crater__gs_init();
    if (!R.cuMemFree_v2)
        return CUDA_ERROR_NOT_FOUND;
    crater__gs_entry_t e = {0, 0, 0};
    int had = active() && dptr && crater__gs_tab_take(&S.ptrs, dptr, &e) == 0;
    return free_tracked(&S.ptrs, R.cuMemFree_v2(dptr), had, &e);
}

GS_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    crater__gs_init();
    if (!R.cuMemRelease)
        return CUDA_ERROR_NOT_FOUND;
    crater__gs_entry_t e = {0, 0, 0};
    int had =
        active() && handle && crater__gs_tab_take(&S.handles, handle, &e) == 0;
    return free_tracked(&S.handles, R.cuMemRelease(handle), had, &e);
}

static CUresult free_async(gs_freeasync_f f, CUdeviceptr dptr, CUstream s)
{
    if (!f)
        return CUDA_ERROR_NOT_FOUND;
    crater__gs_entry_t e = {0, 0, 0};
    int had = active() && dptr && crater__gs_tab_take(&S.ptrs, dptr, &e) == 0;
    return free_tracked(&S.ptrs, f(dptr, s), had, &e);
}

GS_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
    crater__gs_init();
    return free_async(R.cuMemFreeAsync, dptr, s);
}

GS_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
    crater__gs_init();
    return free_async(R.cuMemFreeAsync_ptsz, dptr, s);
}

/* total = the slice, free = what the slice has left (counting the context
 * overhead this process will be charged), never more than the GPU has. */
GS_EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b)
{
    crater__gs_init();
    if (!R.cuMemGetInfo_v2)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = R.cuMemGetInfo_v2(free_b, total_b);
    int g = rc == CUDA_SUCCESS && S.file ? ctx_gpu() : GPU_NONE;
    if (g < 0)
        return rc;
    uint64_t limit = S.file->gpu[g].limit;
    uint64_t used = atomic_load(&S.file->gpu[g].used);
    if (!atomic_load(&S.charged[g]))
        used += S.overhead;
    uint64_t left = used < limit ? limit - used : 0;
    if (left < *free_b)
        *free_b = (size_t)left;
    if (limit < *total_b)
        *total_b = (size_t)limit;
    return rc;
}

GS_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    crater__gs_init();
    if (!R.cuDeviceTotalMem_v2)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = R.cuDeviceTotalMem_v2(bytes, dev);
    int g = rc == CUDA_SUCCESS && S.file ? dev_gpu(dev) : GPU_NONE;
    if (g >= 0 && S.file->gpu[g].limit < *bytes)
        *bytes = (size_t)S.file->gpu[g].limit;
    return rc;
}

void crater__gs_hooks_atfork_child(void)
{
    atomic_store(&S.slot, -1);
    pthread_mutex_init(&S.slot_lock, NULL);
    for (int g = 0; g < CRATER_GPUSLICE_MAX_GPUS; g++)
        atomic_store(&S.charged[g], 0);
    crater__gs_tab_reset(&S.ptrs);
    crater__gs_tab_reset(&S.handles);
}
