/*
 * drv_slice.c - driver-API check of libcrater-gpuslice.so on a real GPU
 * (bench/gpuslice/run-on-gpu.sh items 1 and 4). Declares the few driver
 * functions itself (src/gpuslice/cuda_types.h), links libcuda.so.1.
 *
 *   drv_slice check          768 MiB ok, +512 MiB -> 2, ok after a free,
 *                            cuMemGetInfo / cuDeviceTotalMem under the slice
 *   drv_slice fill MiB N SEC allocate up to N chunks of MiB (stop at the
 *                            first OOM), print what it holds, hold SEC s
 * Prints one "key: value" line per result; exit 0 when all checks held.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_types.h"

CUresult cuInit(unsigned flags);
CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b);
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);

#define MiB (1ULL << 20)

static int bad;

static void expect(const char *what, CUresult rc, CUresult want)
{
    printf("%s: rc=%d (want %d) %s\n",
           what,
           rc,
           want,
           rc == want ? "ok" : "MISMATCH");
    bad |= rc != want;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static CUdevice setup(void)
{
    CUdevice dev = 0;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev)
        || cuCtxSetCurrent(ctx)) {
        printf("driver: cannot get a context\n");
        exit(2);
    }
    return dev;
}

static int check(void)
{
    CUdevice dev = setup();
    CUdeviceptr a, b, c;
    size_t fr, tot, devtot;
    cuMemGetInfo_v2(&fr, &tot);
    printf("mem_get_info before: free %zu MiB total %zu MiB\n",
           fr / MiB,
           tot / MiB);
    expect("alloc 768 MiB", cuMemAlloc_v2(&a, 768 * MiB), CUDA_SUCCESS);
    double t0 = now();
    CUresult rc = cuMemAlloc_v2(&b, 512 * MiB);
    double t1 = now();
    expect("alloc 512 MiB more", rc, CUDA_ERROR_OUT_OF_MEMORY);
    printf("refused allocation took %.1f us\n", (t1 - t0) * 1e6);
    expect("free 768 MiB", cuMemFree_v2(a), CUDA_SUCCESS);
    expect("alloc 512 MiB after free",
           cuMemAlloc_v2(&c, 512 * MiB),
           CUDA_SUCCESS);
    cuMemGetInfo_v2(&fr, &tot);
    cuDeviceTotalMem_v2(&devtot, dev);
    printf("mem_get_info: free %zu MiB total %zu MiB\n", fr / MiB, tot / MiB);
    printf("cuDeviceTotalMem: %zu MiB\n", devtot / MiB);
    const char *want = getenv("EXPECT_TOTAL_MIB");
    if (want) {
        int ok = tot / MiB == strtoull(want, NULL, 10)
                 && devtot / MiB == strtoull(want, NULL, 10);
        printf("total = %s MiB: %s\n", want, ok ? "ok" : "MISMATCH");
        bad |= !ok;
    }
    /* allocation latency: 2000 x (alloc 2 MiB + free) */
    t0 = now();
    for (int i = 0; i < 2000; i++) {
        if (cuMemAlloc_v2(&a, 2 * MiB) == CUDA_SUCCESS)
            cuMemFree_v2(a);
    }
    printf("alloc+free 2 MiB: %.2f us per pair\n", (now() - t0) / 2000 * 1e6);
    cuMemFree_v2(c);
    printf("driver check: %s\n", bad ? "FAIL" : "PASS");
    return bad;
}

static int fill(unsigned long long chunk_mib, int n, int hold_s)
{
    setup();
    unsigned long long held = 0;
    CUdeviceptr p;
    for (int i = 0; i < n && cuMemAlloc_v2(&p, chunk_mib * MiB) == 0; i++)
        held += chunk_mib;
    printf("pid %d holds %llu MiB\n", (int)getpid(), held);
    fflush(stdout);
    sleep((unsigned)hold_s);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "check") == 0)
        return check();
    if (argc == 5 && strcmp(argv[1], "fill") == 0)
        return fill(strtoull(argv[2], NULL, 10), atoi(argv[3]), atoi(argv[4]));
    fprintf(stderr, "usage: drv_slice check | fill MiB N SEC\n");
    return 2;
}
