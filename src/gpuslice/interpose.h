/*
 * interpose.h - private declarations shared by the interposer's files:
 * the real driver entry points, the hook table and the process state.
 * interpose.c holds init, dlsym and cuGetProcAddress; hooks.c the
 * allocation wrappers.
 */
#ifndef CRATER_GPUSLICE_INTERPOSE_H
#define CRATER_GPUSLICE_INTERPOSE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "alloctab.h"
#include "cuda_types.h"
#include "slice.h"

#define GS_EXPORT __attribute__((visibility("default")))
#define GS_MAX_DEVICES 64

/* The hooked entry points: name, family (the name cuGetProcAddress is asked
 * for), per-thread-default-stream variant, first CUDA version with it. */
#define GS_HOOKS(X)                                                      \
    X(cuMemAlloc_v2, "cuMemAlloc", 0, 3020)                              \
    X(cuMemAllocPitch_v2, "cuMemAllocPitch", 0, 3020)                    \
    X(cuMemAllocManaged, "cuMemAllocManaged", 0, 6000)                   \
    X(cuMemCreate, "cuMemCreate", 0, 10020)                              \
    X(cuMemAllocAsync, "cuMemAllocAsync", 0, 11020)                      \
    X(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 1, 11020)                 \
    X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 0, 11020)      \
    X(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 1, 11020) \
    X(cuMemFree_v2, "cuMemFree", 0, 3020)                                \
    X(cuMemRelease, "cuMemRelease", 0, 10020)                            \
    X(cuMemFreeAsync, "cuMemFreeAsync", 0, 11020)                        \
    X(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 1, 11020)                   \
    X(cuMemGetInfo_v2, "cuMemGetInfo", 0, 3020)                          \
    X(cuDeviceTotalMem_v2, "cuDeviceTotalMem", 0, 3020)                  \
    X(cuGetProcAddress, "cuGetProcAddress", 0, 11030)                    \
    X(cuGetProcAddress_v2, "cuGetProcAddress", 0, 12000)

typedef CUresult (*gs_alloc_f)(CUdeviceptr *, size_t);
typedef CUresult (*gs_async_f)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*gs_pool_f)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
typedef CUresult (*gs_freeasync_f)(CUdeviceptr, CUstream);

/* Real entry points, resolved once from libcuda.so.1 (NULL: absent). */
typedef struct gs_real {
    gs_alloc_f cuMemAlloc_v2;
    CUresult (*cuMemAllocPitch_v2)(
        CUdeviceptr *, size_t *, size_t, size_t, unsigned);
    CUresult (*cuMemAllocManaged)(CUdeviceptr *, size_t, unsigned);
    CUresult (*cuMemCreate)(CUmemGenericAllocationHandle *,
                            size_t,
                            const CUmemAllocationProp *,
                            unsigned long long);
    gs_async_f cuMemAllocAsync;
    gs_async_f cuMemAllocAsync_ptsz;
    gs_pool_f cuMemAllocFromPoolAsync;
    gs_pool_f cuMemAllocFromPoolAsync_ptsz;
    CUresult (*cuMemFree_v2)(CUdeviceptr);
    CUresult (*cuMemRelease)(CUmemGenericAllocationHandle);
    gs_freeasync_f cuMemFreeAsync;
    gs_freeasync_f cuMemFreeAsync_ptsz;
    CUresult (*cuMemGetInfo_v2)(size_t *, size_t *);
    CUresult (*cuDeviceTotalMem_v2)(size_t *, CUdevice);
    CUresult (*cuGetProcAddress)(const char *, void **, int, cuuint64_t);
    CUresult (*cuGetProcAddress_v2)(const char *,
                                    void **,
                                    int,
                                    cuuint64_t,
                                    CUdriverProcAddressQueryResult *);
    /* used by the wrappers, not hooked */
    CUresult (*cuCtxGetDevice)(CUdevice *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetUuid_v2)(CUuuid *, CUdevice);
    CUresult (*cuDeviceGetUuid)(CUuuid *, CUdevice);
} gs_real_t;

/* Process state. file == NULL and !broken: pass-through. */
typedef struct gs_state {
    crater_gpuslice_file_t *file;
    int broken;        /* CRATER_GPUSLICE_FILE set but unusable: refuse */
    uint64_t overhead; /* context overhead charged per process and GPU */
    _Atomic int slot;  /* our process record, -1 before the first charge */
    pthread_mutex_t slot_lock;
    _Atomic int
        devgpu[GS_MAX_DEVICES]; /* slice GPU per CUdevice, see hooks.c */
    _Atomic int charged[CRATER_GPUSLICE_MAX_GPUS]; /* overhead charged */
    crater__gs_tab_t ptrs;                         /* device pointers */
    crater__gs_tab_t handles;                      /* cuMemCreate handles */
} gs_state_t;

/* The exported wrappers (hooks.c, interpose.c), same signatures as cuda.h. */
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr,
                            size_t *pitch,
                            size_t width,
                            size_t height,
                            unsigned elementSize);
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned flags);
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle,
                     size_t size,
                     const CUmemAllocationProp *prop,
                     unsigned long long flags);
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream s);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream s);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr,
                                 size_t bytesize,
                                 CUmemoryPool pool,
                                 CUstream s);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr,
                                      size_t bytesize,
                                      CUmemoryPool pool,
                                      CUstream s);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s);
CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b);
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
CUresult cuGetProcAddress(const char *symbol,
                          void **pfn,
                          int cudaVersion,
                          cuuint64_t flags);
CUresult cuGetProcAddress_v2(const char *symbol,
                             void **pfn,
                             int cudaVersion,
                             cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus);

extern gs_real_t crater__gs_real;
extern gs_state_t crater__gs;

/* Resolve libcuda and the real entry points (once, thread-safe). */
void crater__gs_init(void);

/* Reset the per-process state in a forked child. */
void crater__gs_hooks_atfork_child(void);

#endif
