/*
 * gs_check - scenarios for libcrater-gpuslice.so against the stub
 * libcuda.so.1, run by test_gpuslice.sh with and without LD_PRELOAD.
 * Linked to the stub like a program linked with -lcuda; reaches the
 * driver by direct calls, dlsym and cuGetProcAddress.
 *
 *   gs_check route        every path reaches the interposer (slice set)
 *   gs_check passthrough  no slice file: the driver's own entry points
 *   gs_check limit        each allocator: OOM (2) exactly at the limit,
 *                         success again after a free; mem info = slice
 *   gs_check uuid         only the GPU named in the file is limited
 *   gs_check codes        one line "case rc" per invalid input (diffed)
 *   gs_check race         two forked processes race; never past the slice
 *   gs_check hold N       allocate N bytes, print "held", wait to be killed
 *   gs_check alloc N      allocate N bytes, print the return code
 *
 * Expected values come from the environment: GS_LIMIT (bytes of the slice
 * on device 0), CRATER_GPUSLICE_CTX_OVERHEAD, STUB_CUDA_MEM.
 * Exit status: 0 when every check passed, 1 otherwise.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "interpose.h"

CUresult cuInit(unsigned flags);
CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned flags, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
void *gs_next_probe(void); /* libgs_next.so */

static int failures;

#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fputc('\n', stderr);                                 \
            failures++;                                          \
        }                                                        \
    } while (0)

#define MiB (1ULL << 20)

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *s = getenv(name);
    return s && *s ? strtoull(s, NULL, 10) : dflt;
}

static void *fn2ptr(void (*f)(void))
{
    void *p;
    memcpy(&p, &f, sizeof(p));
    return p;
}
#define FNPTR(f) fn2ptr((void (*)(void))(f))

/* The object that defines address p ("libcuda.so.1", ...). */
static const char *owner(void *p)
{
    Dl_info info;
    if (!p || !dladdr(p, &info) || !info.dli_fname)
        return "?";
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

static void context(int ordinal)
{
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuInit(0) == CUDA_SUCCESS, "cuInit");
    CHECK(cuDeviceGet(&dev, ordinal) == CUDA_SUCCESS, "cuDeviceGet");
    CHECK(cuCtxCreate_v2(&ctx, 0, dev) == CUDA_SUCCESS, "cuCtxCreate");
}

/* used[0] of the slice file, read directly from the shared mapping. */
static uint64_t slice_used(int g)
{
    static crater_gpuslice_file_t *f;
    if (!f)
        f = crater__gs_map(getenv("CRATER_GPUSLICE_FILE"));
    return f ? atomic_load(&f->gpu[g].used) : UINT64_MAX;
}

typedef CUresult (*gpa2_f)(
    const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

/* Routes 1 and 2: a direct call and dlsym on a libcuda.so.1 handle. */
static void route_direct_dlsym(void *h, uint64_t o, CUdeviceptr *b)
{
    CUdeviceptr a = 0;
    gs_alloc_f alloc;
    void *p;

    CHECK(cuMemAlloc_v2(&a, MiB) == CUDA_SUCCESS, "direct alloc");
    CHECK(slice_used(0) == o + MiB,
          "direct: used %llu",
          (unsigned long long)slice_used(0));
    p = dlsym(h, "cuMemAlloc_v2");
    memcpy(&alloc, &p, sizeof(p));
    CHECK(strcmp(owner(p), "libcrater-gpuslice.so") == 0,
          "dlsym(cuMemAlloc_v2) from %s",
          owner(p));
    CHECK(alloc && alloc(b, 2 * MiB) == CUDA_SUCCESS, "dlsym alloc");
    CHECK(slice_used(0) == o + 3 * MiB,
          "dlsym: used %llu",
          (unsigned long long)slice_used(0));
}

/* Route 3: cuGetProcAddress_v2 found with dlsym, the _ptsz variant, the
 * legacy variant, and names that must or must not be wrapped. */
static void route_gpa(void *h, uint64_t o, CUdeviceptr *c)
{
    CUdriverProcAddressQueryResult st = -1;
    void *p = dlsym(h, "cuGetProcAddress_v2"), *q = NULL;
    gs_async_f async;
    gpa2_f gpa;

    memcpy(&gpa, &p, sizeof(p));
    CHECK(strcmp(owner(p), "libcrater-gpuslice.so") == 0,
          "dlsym(cuGetProcAddress_v2) from %s",
          owner(p));
    CHECK(gpa("cuMemAllocAsync",
              &q,
              12000,
              CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
              &st)
              == CUDA_SUCCESS,
          "gpa cuMemAllocAsync");
    CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS, "symbolStatus %d", st);
    CHECK(q == FNPTR(cuMemAllocAsync_ptsz),
          "ptsz wrapper not returned (%s)",
          owner(q));
    memcpy(&async, &q, sizeof(q));
    CHECK(async && async(c, 4 * MiB, NULL) == CUDA_SUCCESS, "ptsz alloc");
    CHECK(slice_used(0) == o + 7 * MiB,
          "ptsz: used %llu",
          (unsigned long long)slice_used(0));
    CHECK(gpa("cuMemAllocAsync", &q, 12000, 0, NULL) == CUDA_SUCCESS
              && q == FNPTR(cuMemAllocAsync),
          "legacy async wrapper");
    CHECK(gpa("cuMemFree", &q, 12000, 0, NULL) == CUDA_SUCCESS
              && q == FNPTR(cuMemFree_v2),
          "cuMemFree wrapper");
    CHECK(gpa("cuGetProcAddress", &q, 12000, 0, NULL) == CUDA_SUCCESS
              && q == FNPTR(cuGetProcAddress_v2),
          "cuGetProcAddress wrapper");
    CHECK(cuGetProcAddress("cuMemGetInfo", &q, 11030, 0) == CUDA_SUCCESS
              && q == FNPTR(cuMemGetInfo_v2),
          "v1 cuGetProcAddress");
    CHECK(gpa("cuCtxGetDevice", &q, 12000, 0, NULL) == CUDA_SUCCESS
              && strcmp(owner(q), "libcuda.so.1") == 0,
          "unhooked name must stay the driver's, got %s",
          owner(q));
}

static int route(void)
{
    uint64_t o = env_u64("CRATER_GPUSLICE_CTX_OVERHEAD", 0);
    CUdeviceptr b = 0, c = 0;
    void *h, *p;

    context(0);
    CHECK(slice_used(0) == 0,
          "used %llu before",
          (unsigned long long)slice_used(0));
    h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, "libcuda.so.1 not loaded");
    route_direct_dlsym(h, o, &b);
    route_gpa(h, o, &c);
    CHECK(cuMemFree_v2(b) == CUDA_SUCCESS && cuMemFreeAsync_ptsz(c, NULL) == 0,
          "frees");
    CHECK(slice_used(0) == o + MiB,
          "after frees: used %llu",
          (unsigned long long)slice_used(0));
    /* dlsym(RTLD_NEXT) from the program: the next definition after the
     * program itself, i.e. the interposer's export. */
    p = dlsym(RTLD_NEXT, "cuMemAlloc_v2");
    CHECK(strcmp(owner(p), "libcrater-gpuslice.so") == 0,
          "RTLD_NEXT from the program found %s",
          owner(p));
    /* ... and from a library: the search starts after that library */
    p = gs_next_probe();
    CHECK(p == NULL, "RTLD_NEXT from libgs_next.so found %s", owner(p));
    return failures != 0;
}

static int passthrough(void)
{
    context(0);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *p = dlsym(h, "cuMemAlloc_v2");
    CHECK(strcmp(owner(p), "libcuda.so.1") == 0, "dlsym from %s", owner(p));
    void *q = NULL;
    CHECK(cuGetProcAddress_v2("cuMemAlloc", &q, 12000, 0, NULL) == 0
              && strcmp(owner(q), "libcuda.so.1") == 0,
          "cuGetProcAddress gave %s",
          owner(q));
    size_t fr, tot;
    uint64_t mem = env_u64("STUB_CUDA_MEM", 1ULL << 30);
    CHECK(cuMemGetInfo_v2(&fr, &tot) == 0 && tot == mem && fr == mem,
          "mem info %zu/%zu",
          fr,
          tot);
    CUdeviceptr a;
    CHECK(cuMemAlloc_v2(&a, mem) == CUDA_SUCCESS, "whole device");
    CHECK(cuMemAlloc_v2(&a, 1) == CUDA_ERROR_OUT_OF_MEMORY, "device full");
    p = gs_next_probe();
    CHECK(p == NULL, "RTLD_NEXT from libgs_next.so found %s", owner(p));
    return failures != 0;
}

/* One allocator under test: allocate n bytes / free what it returned. */
typedef struct kind {
    const char *name;
    uint64_t unit; /* allocation granularity */
    CUresult (*alloc)(uint64_t n, unsigned long long *key);
    CUresult (*free)(unsigned long long key);
} kind_t;

static CUresult a_plain(uint64_t n, unsigned long long *k)
{
    return cuMemAlloc_v2(k, n);
}
static CUresult a_managed(uint64_t n, unsigned long long *k)
{
    return cuMemAllocManaged(k, n, CU_MEM_ATTACH_GLOBAL);
}
static CUresult a_pitch(uint64_t n, unsigned long long *k)
{
    size_t pitch;
    return cuMemAllocPitch_v2(k, &pitch, 512, n / 512, 4);
}
static CUresult a_async(uint64_t n, unsigned long long *k)
{
    return cuMemAllocAsync(k, n, NULL);
}
static CUresult a_async_ptsz(uint64_t n, unsigned long long *k)
{
    return cuMemAllocAsync_ptsz(k, n, NULL);
}
#define POOL ((CUmemoryPool)(uintptr_t)0x1234)
static CUresult a_pool(uint64_t n, unsigned long long *k)
{
    return cuMemAllocFromPoolAsync(k, n, POOL, NULL);
}
static CUresult a_pool_ptsz(uint64_t n, unsigned long long *k)
{
    return cuMemAllocFromPoolAsync_ptsz(k, n, POOL, NULL);
}
static CUresult a_create(uint64_t n, unsigned long long *k)
{
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    return cuMemCreate(k, n, &prop, 0);
}
static CUresult f_plain(unsigned long long k)
{
    return cuMemFree_v2(k);
}
static CUresult f_async(unsigned long long k)
{
    return cuMemFreeAsync(k, NULL);
}
static CUresult f_async_ptsz(unsigned long long k)
{
    return cuMemFreeAsync_ptsz(k, NULL);
}
static CUresult f_release(unsigned long long k)
{
    return cuMemRelease(k);
}

static const kind_t kinds[] = {
    {"cuMemAlloc_v2", 1, a_plain, f_plain},
    {"cuMemAllocManaged", 1, a_managed, f_plain},
    {"cuMemAllocPitch_v2", 512, a_pitch, f_plain},
    {"cuMemAllocAsync", 1, a_async, f_async},
    {"cuMemAllocAsync_ptsz", 1, a_async_ptsz, f_async_ptsz},
    {"cuMemAllocFromPoolAsync", 1, a_pool, f_async},
    {"cuMemAllocFromPoolAsync_ptsz", 1, a_pool_ptsz, f_plain},
    {"cuMemCreate", 2 * MiB, a_create, f_release},
};

/* Fill the slice with kind k to exactly the limit, check the next unit
 * fails with 2, free, check it succeeds again, free everything. */
static void limit_kind(const kind_t *k, uint64_t room)
{
    unsigned long long big, one, again;
    CHECK(k->alloc(room, &big) == CUDA_SUCCESS,
          "%s: %llu bytes (all)",
          k->name,
          (unsigned long long)room);
    CUresult rc = k->alloc(k->unit, &one);
    CHECK(rc == CUDA_ERROR_OUT_OF_MEMORY,
          "%s: one unit past the slice: %d",
          k->name,
          rc);
    size_t fr, tot;
    CHECK(cuMemGetInfo_v2(&fr, &tot) == 0 && fr == 0,
          "%s: free %zu when full",
          k->name,
          fr);
    CHECK(k->free(big) == CUDA_SUCCESS, "%s: free", k->name);
    CHECK(k->alloc(k->unit, &again) == CUDA_SUCCESS, "%s: after free", k->name);
    CHECK(k->free(again) == CUDA_SUCCESS, "%s: free again", k->name);
    CHECK(slice_used(0) == env_u64("CRATER_GPUSLICE_CTX_OVERHEAD", 0),
          "%s: used %llu after",
          k->name,
          (unsigned long long)slice_used(0));
}

static int limit(void)
{
    uint64_t lim = env_u64("GS_LIMIT", 0);
    uint64_t o = env_u64("CRATER_GPUSLICE_CTX_OVERHEAD", 0);
    uint64_t mem = env_u64("STUB_CUDA_MEM", 1ULL << 30);
    context(0);
    size_t fr, tot, total1;
    CHECK(cuMemGetInfo_v2(&fr, &tot) == 0 && tot == lim && fr == lim - o,
          "before: free %zu total %zu",
          fr,
          tot);
    CHECK(cuDeviceTotalMem_v2(&tot, 0) == 0 && tot == lim,
          "total mem %zu",
          tot);
    CHECK(cuDeviceTotalMem_v2(&total1, 1) == 0 && total1 == mem,
          "device 1 (no slice) total %zu",
          total1);
    /* limit - overhead succeeds, one more byte fails */
    CUdeviceptr a, b;
    CHECK(cuMemAlloc_v2(&a, lim - o) == CUDA_SUCCESS, "limit - overhead");
    CHECK(cuMemAlloc_v2(&b, 1) == CUDA_ERROR_OUT_OF_MEMORY, "one byte more");
    CHECK(slice_used(0) == lim, "used %llu", (unsigned long long)slice_used(0));
    CHECK(cuMemFree_v2(a) == CUDA_SUCCESS, "free");
    CHECK(cuMemGetInfo_v2(&fr, &tot) == 0 && fr == lim - o && tot == lim,
          "after free: free %zu total %zu",
          fr,
          tot);
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        limit_kind(&kinds[i], lim - o);
    CHECK(slice_used(0) == o,
          "used %llu at the end (overhead %llu)",
          (unsigned long long)slice_used(0),
          (unsigned long long)o);
    return failures != 0;
}

static int uuid(void)
{
    uint64_t lim = env_u64("GS_LIMIT", 0);
    uint64_t o = env_u64("CRATER_GPUSLICE_CTX_OVERHEAD", 0);
    CUdeviceptr a, b;
    context(0); /* not in the file: not limited */
    CHECK(cuMemAlloc_v2(&a, 2 * lim) == CUDA_SUCCESS, "device 0 unlimited");
    context(1);
    CHECK(cuMemAlloc_v2(&b, lim - o) == CUDA_SUCCESS, "device 1 slice");
    CHECK(cuMemAlloc_v2(&b, 1) == CUDA_ERROR_OUT_OF_MEMORY, "device 1 full");
    CHECK(slice_used(0) == lim, "used %llu", (unsigned long long)slice_used(0));
    return failures != 0;
}

/* Invalid inputs: print the code of each so the script can diff the runs
 * with and without the interposer. */
static int codes(void)
{
    CUdeviceptr p = 0;
    CUmemGenericAllocationHandle h = 0;
    size_t a, b;
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
#define SHOW(name, call) printf("%-34s %d\n", name, (int)(call))
    SHOW("uninit cuMemAlloc_v2", cuMemAlloc_v2(&p, 1));
    SHOW("uninit cuMemGetInfo_v2", cuMemGetInfo_v2(&a, &b));
    SHOW("uninit cuDeviceTotalMem_v2", cuDeviceTotalMem_v2(&a, 0));
    SHOW("uninit cuMemCreate", cuMemCreate(&h, 2 * MiB, &prop, 0));
    SHOW("uninit cuMemFree_v2", cuMemFree_v2(0x1000));
    SHOW("uninit cuMemRelease", cuMemRelease(0x1000));
    cuInit(0);
    SHOW("noctx cuMemAlloc_v2", cuMemAlloc_v2(&p, 1));
    SHOW("noctx cuMemAllocManaged", cuMemAllocManaged(&p, 1, 1));
    SHOW("noctx cuMemAllocAsync", cuMemAllocAsync(&p, 1, NULL));
    SHOW("noctx cuMemGetInfo_v2", cuMemGetInfo_v2(&a, &b));
    context(0);
    SHOW("null cuMemAlloc_v2", cuMemAlloc_v2(NULL, 1));
    SHOW("zero cuMemAlloc_v2", cuMemAlloc_v2(&p, 0));
    SHOW("null cuMemAllocManaged", cuMemAllocManaged(NULL, 1, 1));
    SHOW("flags cuMemAllocManaged", cuMemAllocManaged(&p, 1, 7));
    SHOW("null cuMemAllocPitch_v2", cuMemAllocPitch_v2(NULL, &a, 1, 1, 4));
    SHOW("nullpitch cuMemAllocPitch_v2", cuMemAllocPitch_v2(&p, NULL, 1, 1, 4));
    SHOW("elem cuMemAllocPitch_v2", cuMemAllocPitch_v2(&p, &a, 1, 1, 3));
    SHOW("null cuMemAllocAsync", cuMemAllocAsync(NULL, 1, NULL));
    SHOW("null cuMemAllocAsync_ptsz", cuMemAllocAsync_ptsz(NULL, 1, NULL));
    SHOW("zero cuMemAllocAsync_ptsz", cuMemAllocAsync_ptsz(&p, 0, NULL));
    SHOW("nopool cuMemAllocFromPoolAsync",
         cuMemAllocFromPoolAsync(&p, 1, NULL, NULL));
    SHOW("nopool cuMemAllocFromPoolAsync_ptsz",
         cuMemAllocFromPoolAsync_ptsz(&p, 1, NULL, NULL));
    SHOW("null cuMemCreate", cuMemCreate(NULL, 2 * MiB, &prop, 0));
    SHOW("noprop cuMemCreate", cuMemCreate(&h, 2 * MiB, NULL, 0));
    SHOW("flags cuMemCreate", cuMemCreate(&h, 2 * MiB, &prop, 1));
    SHOW("size cuMemCreate", cuMemCreate(&h, 1, &prop, 0));
    prop.location.id = 7;
    SHOW("device cuMemCreate", cuMemCreate(&h, 2 * MiB, &prop, 0));
    prop.location.id = 0;
    SHOW("unknown cuMemFree_v2", cuMemFree_v2(0x1000));
    SHOW("zero cuMemFree_v2", cuMemFree_v2(0));
    SHOW("unknown cuMemFreeAsync", cuMemFreeAsync(0x1000, NULL));
    SHOW("unknown cuMemFreeAsync_ptsz", cuMemFreeAsync_ptsz(0x1000, NULL));
    SHOW("unknown cuMemRelease", cuMemRelease(0x99999));
    SHOW("alloc cuMemAlloc_v2", cuMemAlloc_v2(&p, 4096));
    SHOW("free cuMemFree_v2", cuMemFree_v2(p));
    SHOW("double cuMemFree_v2", cuMemFree_v2(p));
    SHOW("create cuMemCreate", cuMemCreate(&h, 2 * MiB, &prop, 0));
    SHOW("release cuMemRelease", cuMemRelease(h));
    SHOW("double cuMemRelease", cuMemRelease(h));
    SHOW("null cuMemGetInfo_v2", cuMemGetInfo_v2(NULL, &b));
    SHOW("null cuDeviceTotalMem_v2", cuDeviceTotalMem_v2(NULL, 0));
    SHOW("device cuDeviceTotalMem_v2", cuDeviceTotalMem_v2(&a, 9));
    void *q;
    SHOW("null cuGetProcAddress_v2",
         cuGetProcAddress_v2(NULL, &q, 12000, 0, NULL));
    SHOW("nopfn cuGetProcAddress_v2",
         cuGetProcAddress_v2("cuMemAlloc", NULL, 12000, 0, NULL));
    SHOW("unknown cuGetProcAddress_v2",
         cuGetProcAddress_v2("cuNoSuch", &q, 12000, 0, NULL));
    SHOW("version cuGetProcAddress_v2",
         cuGetProcAddress_v2("cuMemAllocAsync", &q, 11000, 0, NULL));
    SHOW("flags cuGetProcAddress",
         cuGetProcAddress("cuMemAlloc", &q, 12000, 9));
    SHOW("oom cuMemAlloc_v2", cuMemAlloc_v2(&p, 1ULL << 50));
#undef SHOW
    return 0;
}

/* Child of race(): wait for the start, random allocations and frees of up
 * to 16 chunks, then fill up; report the bytes it holds (with its context
 * overhead once it has allocated at all) and wait for the parent. */
static void racer(int wfd, int gofd, int rfd, unsigned seed, uint64_t lim)
{
    uint64_t o = env_u64("CRATER_GPUSLICE_CTX_OVERHEAD", 0);
    CUdeviceptr held[4096];
    int n = 0, ever = 0;
    uint64_t chunk = 3 * MiB;
    char c;
    context(0);
    if (read(gofd, &c, 1) != 1)
        _exit(1);
    for (int i = 0; i < 3000; i++) {
        if (n > 0 && (rand_r(&seed) % 3 == 0 || n == 16))
            CHECK(cuMemFree_v2(held[--n]) == 0, "racer free");
        else if (cuMemAlloc_v2(&held[n], chunk) == 0)
            n++, ever = 1;
        CHECK(slice_used(0) <= lim,
              "used %llu over the slice",
              (unsigned long long)slice_used(0));
    }
    while (n < 4096 && cuMemAlloc_v2(&held[n], chunk) == CUDA_SUCCESS)
        n++, ever = 1;
    uint64_t bytes = (uint64_t)n * chunk + (ever ? o : 0);
    if (write(wfd, &bytes, sizeof(bytes)) != sizeof(bytes)
        || read(rfd, &c, 1) != 1)
        failures++;
    exit(failures != 0); /* not _exit: the interposer's destructor runs */
}

static int race(void)
{
    uint64_t lim = env_u64("GS_LIMIT", 0);
    uint64_t o = env_u64("CRATER_GPUSLICE_CTX_OVERHEAD", 0);
    int up[2], go[2], down[2];
    if (pipe(up) < 0 || pipe(go) < 0 || pipe(down) < 0)
        return 1;
    pid_t pid[2];
    for (int i = 0; i < 2; i++)
        if ((pid[i] = fork()) == 0)
            racer(up[1], go[0], down[0], 17u + (unsigned)i, lim);
    CHECK(write(go[1], "go", 2) == 2, "start racers");
    uint64_t held[2] = {0, 0};
    for (int i = 0; i < 2; i++)
        CHECK(read(up[0], &held[i], sizeof(held[i])) == sizeof(held[i]),
              "racer report");
    uint64_t sum = held[0] + held[1];
    printf("race: %llu + %llu bytes (overheads included) = %llu of %llu\n",
           (unsigned long long)held[0],
           (unsigned long long)held[1],
           (unsigned long long)sum,
           (unsigned long long)lim);
    CHECK(sum <= lim, "together past the slice");
    CHECK(sum + 3 * MiB + o > lim,
          "slice not filled: %llu",
          (unsigned long long)sum);
    CHECK(slice_used(0) == sum,
          "file says %llu",
          (unsigned long long)slice_used(0));
    CHECK(write(down[1], "xx", 2) == 2, "release racers");
    for (int i = 0; i < 2; i++) {
        int st;
        CHECK(waitpid(pid[i], &st, 0) == pid[i] && WIFEXITED(st)
                  && WEXITSTATUS(st) == 0,
              "racer %d failed",
              i);
    }
    CHECK(slice_used(0) == 0,
          "after exit used %llu",
          (unsigned long long)slice_used(0));
    return failures != 0;
}

static int hold(uint64_t n)
{
    CUdeviceptr p;
    context(0);
    CUresult rc = cuMemAlloc_v2(&p, n);
    printf("%s\n", rc == CUDA_SUCCESS ? "held" : "failed");
    fflush(stdout);
    if (rc == CUDA_SUCCESS)
        for (;;)
            pause();
    return 1;
}

static int alloc(uint64_t n)
{
    CUdeviceptr p;
    context(0);
    printf("%d\n", cuMemAlloc_v2(&p, n));
    return 0;
}

int main(int argc, char **argv)
{
    const char *s = argc > 1 ? argv[1] : "";
    uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 0;
    if (strcmp(s, "route") == 0)
        return route();
    if (strcmp(s, "passthrough") == 0)
        return passthrough();
    if (strcmp(s, "limit") == 0)
        return limit();
    if (strcmp(s, "uuid") == 0)
        return uuid();
    if (strcmp(s, "codes") == 0)
        return codes();
    if (strcmp(s, "race") == 0)
        return race();
    if (strcmp(s, "hold") == 0)
        return hold(n);
    if (strcmp(s, "alloc") == 0)
        return alloc(n);
    fprintf(stderr, "gs_check: unknown scenario '%s'\n", s);
    return 2;
}
