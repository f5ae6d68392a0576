/*
 * interpose.c - libcrater-gpuslice.so: how calls reach the wrappers.
 *
 * A CUDA program reaches the driver three ways, and each is covered:
 *  1. Direct linking (-lcuda): the wrappers in hooks.c are exported under
 *     the driver's names; LD_PRELOAD puts this library first in the global
 *     lookup scope, so the program binds to them.
 *  2. dlsym(handle, "cuMemAlloc_v2") on a libcuda.so.1 handle (the CUDA
 *     runtime does this for cuGetProcAddress): dlsym itself is exported
 *     here. A lookup of a hooked name that finds something returns the
 *     wrapper instead. dlsym(RTLD_NEXT, ...) depends on its caller's
 *     object, which glibc takes from the return address: on x86-64 a
 *     four-instruction trampoline tail-jumps to the real dlsym, so the
 *     return address (and the semantics) stay the caller's.
 *  3. cuGetProcAddress / cuGetProcAddress_v2: the real one is called
 *     first with the same version and flags; if it returned the address of
 *     a hooked entry point (compared against the real exports, or by
 *     family, version and flags when the driver hands out other addresses),
 *     the wrapper is returned instead. The symbolStatus stays the driver's.
 *
 * The real dlsym comes from dlvsym(RTLD_NEXT, "dlsym", version): glibc
 * 2.34+ defines dlsym in libc.so.6 as dlsym@@GLIBC_2.34 plus the old
 * dlsym@GLIBC_2.2.5 (x86-64) / GLIBC_2.17 (aarch64); our own unversioned
 * definition satisfies callers bound to either version.
 *
 * Nothing here runs per allocation except the pthread_once fast path.
 * Environment and slice file are read once, in the constructor; libcuda is
 * opened on the first CUDA call, so a CPU-only process with the preload
 * never loads the driver.
 */
#include "interpose.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gs_real_t crater__gs_real;
gs_state_t crater__gs = {
    .slot = -1,
    .slot_lock = PTHREAD_MUTEX_INITIALIZER,
    .ptrs = CRATER__GS_TAB_INIT,
    .handles = CRATER__GS_TAB_INIT,
};

typedef void *(*dlsym_f)(void *, const char *);

/* Read by the trampoline below; NULL until resolved. */
__attribute__((visibility("hidden"))) _Atomic(dlsym_f) crater__real_dlsym;

static dlsym_f real_dlsym(void)
{
    return atomic_load_explicit(&crater__real_dlsym, memory_order_acquire);
}

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

typedef void (*fn_t)(void);

/* ISO C has no conversion between object and function pointers; dlsym's
 * contract (POSIX) is that the bits are the function's address. */
static void *fn2ptr(fn_t f)
{
    void *p;
    memcpy(&p, &f, sizeof(p));
    return p;
}

static void set_fn(void *member, void *p)
{
    memcpy(member, &p, sizeof(p));
}

typedef struct hook {
    const char *name;
    const char *family;
    int ptsz;
    int minver;
    fn_t wrapper;
    void *real; /* address of the member of crater__gs_real */
} hook_t;

#define GS_HOOK_ROW(fn, fam, ptsz, minver) \
    {#fn, fam, ptsz, minver, (fn_t)fn, &crater__gs_real.fn},
static const hook_t hooks[] = {GS_HOOKS(GS_HOOK_ROW)};
#define NHOOKS (sizeof(hooks) / sizeof(hooks[0]))

static void *real_of(const hook_t *h)
{
    void *p;
    memcpy(&p, h->real, sizeof(p));
    return p;
}

static void resolve_dlsym(void)
{
    static const char *const versions[] = {"GLIBC_2.34",
                                           "GLIBC_2.2.5",
                                           "GLIBC_2.17"};
    if (real_dlsym())
        return;
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        void *p = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
        if (p) {
            dlsym_f f;
            set_fn(&f, p);
            atomic_store_explicit(&crater__real_dlsym, f, memory_order_release);
            return;
        }
    }
}

/* Bytes from CRATER_GPUSLICE_CTX_OVERHEAD (decimal), default 300 MiB. */
static int parse_overhead(uint64_t *out)
{
    const char *s = getenv("CRATER_GPUSLICE_CTX_OVERHEAD");
    *out = 300ULL << 20;
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || *s == '-')
        return -1;
    *out = v;
    return 0;
}

static void env_init(void)
{
    const char *path = getenv("CRATER_GPUSLICE_FILE");
    if (!path || !*path)
        return;
    if (parse_overhead(&crater__gs.overhead) < 0) {
        crater__gs.broken = 1;
        fprintf(stderr,
                "crater-gpuslice: CRATER_GPUSLICE_CTX_OVERHEAD is not a "
                "byte count; refusing GPU allocations\n");
        return;
    }
    crater__gs.file = crater__gs_map(path);
    if (!crater__gs.file) {
        crater__gs.broken = 1;
        fprintf(stderr,
                "crater-gpuslice: cannot use slice file %s: %s; refusing GPU "
                "allocations\n",
                path,
                errno == EINVAL ? "not a version 1 slice file"
                                : strerror(errno));
    }
}

static void atfork_child(void)
{
    crater__gs_hooks_atfork_child();
}

__attribute__((constructor)) static void gs_constructor(void)
{
    pthread_once(&env_once, env_init);
    pthread_atfork(NULL, NULL, atfork_child);
}

/* Leaving early gives the share back at once; the reclaim of dead pids
 * is the fallback for processes that never get here (SIGKILL). */
__attribute__((destructor)) static void gs_destructor(void)
{
    int slot = atomic_exchange(&crater__gs.slot, -1);
    if (crater__gs.file && slot >= 0)
        crater__gs_leave(crater__gs.file, slot);
}

static void do_init(void)
{
    pthread_once(&env_once, env_init);
    resolve_dlsym();
    dlsym_f sym = real_dlsym();
    if (!sym)
        return;
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_LAZY);
    if (!h)
        return;
    for (size_t i = 0; i < NHOOKS; i++)
        set_fn(hooks[i].real, sym(h, hooks[i].name));
    gs_real_t *r = &crater__gs_real;
    set_fn(&r->cuCtxGetDevice, sym(h, "cuCtxGetDevice"));
    set_fn(&r->cuDeviceGet, sym(h, "cuDeviceGet"));
    set_fn(&r->cuDeviceGetUuid_v2, sym(h, "cuDeviceGetUuid_v2"));
    set_fn(&r->cuDeviceGetUuid, sym(h, "cuDeviceGetUuid"));
}

void crater__gs_init(void)
{
    pthread_once(&init_once, do_init);
}

static int active(void)
{
    return crater__gs.file != NULL || crater__gs.broken;
}

static const hook_t *hook_by_name(const char *name)
{
    for (size_t i = 0; i < NHOOKS; i++)
        if (strcmp(hooks[i].name, name) == 0)
            return &hooks[i];
    return NULL;
}

/* dlsym for handles other than RTLD_NEXT (and RTLD_NEXT before the real
 * dlsym is known, or off x86-64: then the search starts after this
 * library instead of after the caller). Must not call crater__gs_init:
 * libcuda's own constructors may call dlsym while we are opening it. */
__attribute__((visibility("hidden"))) void *crater__dlsym_slow(void *handle,
                                                               const char *name)
{
    resolve_dlsym();
    dlsym_f sym = real_dlsym();
    if (!sym)
        return NULL;
    void *p = sym(handle, name);
    if (!p || handle == RTLD_NEXT || !name)
        return p;
    pthread_once(&env_once, env_init);
    const hook_t *h = active() ? hook_by_name(name) : NULL;
    return h ? fn2ptr(h->wrapper) : p;
}

#if defined(__x86_64__) && !defined(CRATER_GPUSLICE_C_DLSYM)
/* dlsym(RTLD_NEXT = -1, name) with the real dlsym known: jump to it with
 * the caller's return address on the stack. Everything else: the slow
 * path in C. -DCRATER_GPUSLICE_C_DLSYM builds the plain C wrapper instead
 * (to see that tests/gpuslice catches its wrong RTLD_NEXT semantics). */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "    cmpq $-1, %rdi\n"
        "    jne 1f\n"
        "    movq crater__real_dlsym(%rip), %rax\n"
        "    testq %rax, %rax\n"
        "    je 1f\n"
        "    jmp *%rax\n"
        "1:  jmp crater__dlsym_slow\n"
        ".size dlsym, .-dlsym\n");
#else
GS_EXPORT void *dlsym(void *handle, const char *name)
{
    return crater__dlsym_slow(handle, name);
}
#endif

/* The wrapper to hand out for what the real cuGetProcAddress returned. */
static void *substitute(const char *sym, void *pfn, int ver, cuuint64_t fl)
{
    const hook_t *pick = NULL;
    for (size_t i = 0; i < NHOOKS; i++) {
        const hook_t *h = &hooks[i];
        if (strcmp(h->family, sym) != 0)
            continue;
        if (real_of(h) == pfn)
            return fn2ptr(h->wrapper); /* exact: the driver's own export */
        int want_ptsz =
            (fl & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
        if (ver >= h->minver && h->ptsz == want_ptsz
            && (!pick || h->minver > pick->minver))
            pick = h; /* newest variant the version allows */
    }
    return pick ? fn2ptr(pick->wrapper) : pfn;
}

GS_EXPORT CUresult cuGetProcAddress_v2(const char *symbol,
                                       void **pfn,
                                       int cudaVersion,
                                       cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *status)
{
    crater__gs_init();
    if (!crater__gs_real.cuGetProcAddress_v2)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = crater__gs_real.cuGetProcAddress_v2(symbol,
                                                      pfn,
                                                      cudaVersion,
                                                      flags,
                                                      status);
    if (rc == CUDA_SUCCESS && symbol && pfn && *pfn && active())
        *pfn = substitute(symbol, *pfn, cudaVersion, flags);
    return rc;
}

GS_EXPORT CUresult cuGetProcAddress(const char *symbol,
                                    void **pfn,
                                    int cudaVersion,
                                    cuuint64_t flags)
{
    crater__gs_init();
    if (!crater__gs_real.cuGetProcAddress)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc =
        crater__gs_real.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
    if (rc == CUDA_SUCCESS && symbol && pfn && *pfn && active())
        *pfn = substitute(symbol, *pfn, cudaVersion, flags);
    return rc;
}
