/* ctxprobe.c - what one CUDA context costs on each GPU model, measured.
 *
 * The interposer charges every process a fixed context overhead at its
 * first allocation on a GPU (CRATER_GPUSLICE_CTX_OVERHEAD) and the
 * watchdog allows it on top of the slice. What a context really holds
 * depends on the GPU and the driver, so the agent measures it at start,
 * once per GPU model and driver version, and keeps the figures in
 * DATA_DIR/gpu-context-overhead.json ({"<model>|<driver>": bytes}): a
 * restart, or a new driver, is the only time it measures again.
 *
 * How: a forked child (never the agent itself: a context holds GPU memory
 * for the life of its process) loads libcuda with dlopen (the agent is
 * never linked against it), finds the device whose cuDeviceGetUuid_v2 is
 * the NVML UUID (CUDA_VISIBLE_DEVICES names it too, but a driver that
 * ignores or renumbers it must not fool us), makes the primary context
 * current as PyTorch does, allocates 2 MiB and reports over a pipe. The
 * parent then reads the child's memory on that GPU from NVML (per
 * process, retried for a while: NVML lags), subtracts the 2 MiB and
 * closes a second pipe, on which the child waits, to let it exit. Every
 * wait has a bound; a child that does not go is killed.
 *
 * It measures the driver's context plus the granule of one allocation,
 * not what libraries load later (cuBLAS workspaces, kernel images): that
 * stays the watchdog tolerance's job (doc/gpu-sharing.md).
 *
 * The agent forks at start, before its own threads exist. In `crater up`
 * craterd's threads and earlier agents' threads do exist: glibc's fork()
 * takes malloc's locks, so malloc works in the child, and dlopen does as
 * long as no other thread is inside dlopen at that moment (none of those
 * threads loads libraries; glibc before 2.38 could deadlock otherwise).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/internal.h"
#include "crater/gpuslice.h"
#include "crater/log.h"
#include "gpuslice/cuda_types.h"

#define PROBE_BYTES (2ull << 20) /* the child's one allocation */
#define READY_MS 30000           /* cuInit and a context, at most */
#define NVML_TRIES 30            /* NVML may list the child late */
#define NVML_WAIT_MS 100
#define REAP_MS 5000 /* the child exits once the pipe closes */
#define PROCS_MAX 256
#define CACHE_FILE "gpu-context-overhead.json"
#define MIB (1ull << 20)

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ---- the child ---------------------------------------------------------- */

typedef struct cu {
    CUresult (*init)(unsigned);
    CUresult (*count)(int *);
    CUresult (*get)(CUdevice *, int);
    CUresult (*uuid)(CUuuid *, CUdevice);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set_current)(CUcontext);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*release)(CUdevice);             /* optional */
    CUresult (*name)(CUresult, const char **); /* optional */
} cu_t;

#define CU_LOAD(h, field, sym) (*(void **)&c->field = dlsym(h, sym))

/* The entry points; the name of the first one missing, or NULL. */
static const char *cu_load(void *h, cu_t *c)
{
    CU_LOAD(h, name, "cuGetErrorName");
    CU_LOAD(h, release, "cuDevicePrimaryCtxRelease_v2");
    if (!CU_LOAD(h, uuid, "cuDeviceGetUuid_v2")
        && !CU_LOAD(h, uuid, "cuDeviceGetUuid"))
        return "cuDeviceGetUuid_v2";
    return !CU_LOAD(h, init, "cuInit")              ? "cuInit"
           : !CU_LOAD(h, count, "cuDeviceGetCount") ? "cuDeviceGetCount"
           : !CU_LOAD(h, get, "cuDeviceGet")        ? "cuDeviceGet"
           : !CU_LOAD(h, retain, "cuDevicePrimaryCtxRetain") ? "cuDevicePrimary"
                                                               "CtxRetain"
           : !CU_LOAD(h, set_current, "cuCtxSetCurrent")     ? "cuCtxSetCurrent"
           : !CU_LOAD(h, alloc, "cuMemAlloc_v2")             ? "cuMemAlloc_v2"
                                                             : NULL;
}

/* The driver's name for r (cuGetErrorName), else ours. */
static const char *cu_errname(const cu_t *c, CUresult r, char buf[48])
{
    static const struct {
        CUresult r;
        const char *s;
    } known[] = {
        {1, "CUDA_ERROR_INVALID_VALUE"},
        {2, "CUDA_ERROR_OUT_OF_MEMORY"},
        {3, "CUDA_ERROR_NOT_INITIALIZED"},
        {4, "CUDA_ERROR_DEINITIALIZED"},
        {34, "CUDA_ERROR_STUB_LIBRARY"},
        {46, "CUDA_ERROR_DEVICE_UNAVAILABLE"},
        {100, "CUDA_ERROR_NO_DEVICE"},
        {101, "CUDA_ERROR_INVALID_DEVICE"},
        {201, "CUDA_ERROR_INVALID_CONTEXT"},
        {304, "CUDA_ERROR_OPERATING_SYSTEM"},
        {500, "CUDA_ERROR_NOT_FOUND"},
        {802, "CUDA_ERROR_SYSTEM_NOT_READY"},
        {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
        {999, "CUDA_ERROR_UNKNOWN"},
    };
    const char *s = NULL;

    if (c->name && c->name(r, &s) == CUDA_SUCCESS && s)
        return s;
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (known[i].r == r)
            return known[i].s;
    snprintf(buf, 48, "CUDA error %d", r);
    return buf;
}

static int cu_fail(const cu_t *c,
                   crater_error_t *e,
                   const char *what,
                   CUresult r,
                   const char *uuid)
{
    char buf[48];

    return crater_errorf(e,
                         CRATER_EIO,
                         "%s: %s (%d) on GPU %s",
                         what,
                         cu_errname(c, r, buf),
                         r,
                         uuid);
}

/* The CUDA device whose UUID is want. */
static int find_dev(const cu_t *c,
                    const uint8_t want[16],
                    const char *uuid,
                    CUdevice *dev,
                    crater_error_t *e)
{
    int n = 0;
    CUresult r = c->count(&n);

    if (r != CUDA_SUCCESS)
        return cu_fail(c, e, "cuDeviceGetCount", r, uuid);
    for (int i = 0; i < n; i++) {
        CUuuid u;
        if ((r = c->get(dev, i)) != CUDA_SUCCESS)
            return cu_fail(c, e, "cuDeviceGet", r, uuid);
        if ((r = c->uuid(&u, *dev)) != CUDA_SUCCESS)
            return cu_fail(c, e, "cuDeviceGetUuid_v2", r, uuid);
        if (memcmp(u.bytes, want, 16) == 0)
            return 0;
    }
    return crater_errorf(e,
                         CRATER_ENOENT,
                         "no CUDA device has UUID %s (%d visible with "
                         "CUDA_VISIBLE_DEVICES set to it)",
                         uuid,
                         n);
}

/* Load the driver, make the context current on the device, allocate. */
static int probe(const char *lib,
                 const char *uuid,
                 const uint8_t want[16],
                 cu_t *c,
                 CUdevice *dev,
                 crater_error_t *e)
{
    const char *missing;
    CUcontext ctx = NULL;
    CUdeviceptr p = 0;
    void *h;
    CUresult r;

    if (setenv("CUDA_VISIBLE_DEVICES", uuid, 1) < 0)
        return crater_errorf(e, CRATER_ENOMEM, "out of memory");
    if (!(h = dlopen(lib, RTLD_NOW | RTLD_LOCAL)))
        return crater_errorf(e,
                             CRATER_ENOENT,
                             "cannot load the CUDA driver: %s",
                             dlerror());
    if ((missing = cu_load(h, c)))
        return crater_errorf(e,
                             CRATER_EIO,
                             "%s has no %s: not a CUDA driver",
                             lib,
                             missing);
    if ((r = c->init(0)) != CUDA_SUCCESS)
        return cu_fail(c, e, "cuInit", r, uuid);
    if (find_dev(c, want, uuid, dev, e) < 0)
        return -1;
    if ((r = c->retain(&ctx, *dev)) != CUDA_SUCCESS)
        return cu_fail(c, e, "cuDevicePrimaryCtxRetain", r, uuid);
    if ((r = c->set_current(ctx)) != CUDA_SUCCESS)
        return cu_fail(c, e, "cuCtxSetCurrent", r, uuid);
    if ((r = c->alloc(&p, PROBE_BYTES)) != CUDA_SUCCESS)
        return cu_fail(c, e, "cuMemAlloc_v2", r, uuid);
    return 0;
}

/* Report (an error, or CRATER_OK once the context holds its memory), wait
 * for the parent to close hold, go. Never returns. */
static void child_main(const char *lib,
                       const char *uuid,
                       const uint8_t want[16],
                       int ready,
                       int hold)
{
    crater_error_t e;
    cu_t c;
    CUdevice dev = 0;
    char byte;
    int ok;

    memset(&c, 0, sizeof(c));
    crater_error_clear(&e);
    ok = probe(lib, uuid, want, &c, &dev, &e) == 0;
    if (write(ready, &e, sizeof(e)) != (ssize_t)sizeof(e))
        _exit(2);
    while (ok && read(hold, &byte, 1) < 0 && errno == EINTR)
        ;
    if (ok && c.release)
        c.release(dev);
    _exit(ok ? 0 : 1);
}

/* ---- the parent ------------------------------------------------------- */

/* Wait up to ms for pid to exit, then SIGKILL it. Its wait status. */
static int reap(pid_t pid, int ms)
{
    int st = 0;

    for (int waited = 0;; waited += 10) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            return st;
        if (waited >= ms)
            break;
        sleep_ms(10);
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return st;
}

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The child's report. On EOF (it died) the child is reaped: *pid = 0. */
static int wait_ready(int fd, pid_t *pid, crater_error_t *err)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int64_t end = mono_ms() + READY_MS;
    crater_error_t m;
    ssize_t n;
    int rc, st;

    do
        rc = poll(&p, 1, (int)(end - mono_ms() > 0 ? end - mono_ms() : 0));
    while (rc < 0 && errno == EINTR);
    if (rc < 0)
        return crater_errorf(err, CRATER_EIO, "poll: %s", strerror(errno));
    if (rc == 0)
        return crater_errorf(err,
                             CRATER_EUNAVAIL,
                             "CUDA context probe (pid %d) not ready after "
                             "%d s",
                             (int)*pid,
                             READY_MS / 1000);
    while ((n = read(fd, &m, sizeof(m))) < 0 && errno == EINTR)
        ;
    if (n == (ssize_t)sizeof(m) && m.errnum == CRATER_OK)
        return 0;
    if (n == (ssize_t)sizeof(m)) {
        m.text[sizeof(m.text) - 1] = '\0';
        return crater_errorf(err, m.errnum, "%s", m.text);
    }
    st = reap(*pid, REAP_MS);
    *pid = 0;
    return crater_errorf(err,
                         CRATER_EIO,
                         "CUDA context probe died before it reported (%s "
                         "%d)",
                         WIFSIGNALED(st) ? "signal" : "exit status",
                         WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

/* The child's memory on GPU idx as NVML sees it, minus its allocation. */
static int nvml_used(crater_nvml_t *nvml,
                     unsigned idx,
                     pid_t pid,
                     uint64_t *bytes,
                     crater_error_t *err)
{
    crater_nvml_proc_t procs[PROCS_MAX];
    bool seen = false;

    for (int t = 0; t < NVML_TRIES; t++) {
        size_t n = 0;
        if (t)
            sleep_ms(NVML_WAIT_MS);
        if (crater_nvml_procs(nvml, idx, procs, PROCS_MAX, &n, err) < 0)
            return -1;
        for (size_t k = 0; k < n && k < PROCS_MAX; k++) {
            if (procs[k].pid != (uint32_t)pid)
                continue;
            seen = true;
            if (procs[k].used_bytes == 0)
                continue; /* no permission, or not yet accounted */
            *bytes = procs[k].used_bytes > PROBE_BYTES
                         ? procs[k].used_bytes - PROBE_BYTES
                         : 0;
            return 0;
        }
    }
    if (seen)
        return crater_errorf(err,
                             CRATER_EPERM,
                             "NVML lists the CUDA context probe (pid %d) on "
                             "GPU %u without its memory (no permission?)",
                             (int)pid,
                             idx);
    return crater_errorf(err,
                         CRATER_EUNAVAIL,
                         "NVML does not list the CUDA context probe (pid "
                         "%d) on GPU %u after %d ms (another PID "
                         "namespace?)",
                         (int)pid,
                         idx,
                         NVML_TRIES * NVML_WAIT_MS);
}

int agent_ctx_measure(crater_nvml_t *nvml,
                      unsigned gpu_idx,
                      const char *gpu_uuid,
                      const char *cuda_lib,
                      uint64_t *bytes,
                      crater_error_t *err)
{
    int ready[2], hold[2], rc;
    uint8_t want[16];
    pid_t pid;

    if (!nvml || !bytes)
        return crater_errorf(err, CRATER_EINVAL, "no NVML or no output");
    if (crater_gpuslice_uuid_parse(gpu_uuid, want, err) < 0)
        return -1;
    if (pipe2(ready, O_CLOEXEC) < 0)
        return crater_errorf(err, CRATER_EIO, "pipe: %s", strerror(errno));
    if (pipe2(hold, O_CLOEXEC) < 0) {
        close(ready[0]), close(ready[1]);
        return crater_errorf(err, CRATER_EIO, "pipe: %s", strerror(errno));
    }
    if ((pid = fork()) == 0) {
        close(ready[0]), close(hold[1]);
        child_main(cuda_lib ? cuda_lib : "libcuda.so.1",
                   gpu_uuid,
                   want,
                   ready[1],
                   hold[0]);
    }
    close(ready[1]), close(hold[0]);
    if (pid < 0)
        rc = crater_errorf(err, CRATER_EIO, "fork: %s", strerror(errno));
    else if ((rc = wait_ready(ready[0], &pid, err)) == 0)
        rc = nvml_used(nvml, gpu_idx, pid, bytes, err);
    close(ready[0]), close(hold[1]);
    if (pid > 0)
        reap(pid, REAP_MS);
    return rc;
}

/* ---- the cache file ---------------------------------------------------- */

int agent_ctx_cache_get(const char *path,
                        const char *key,
                        uint64_t *bytes,
                        crater_error_t *err)
{
    json_error_t je;
    json_t *doc, *v;
    int rc = 0;

    if (access(path, F_OK) < 0 && errno == ENOENT)
        return 0;
    if (!(doc = json_load_file(path, 0, &je)))
        return crater_errorf(err,
                             CRATER_EPARSE,
                             "%s:%d: %s",
                             path,
                             je.line,
                             je.text);
    v = json_object_get(doc, key);
    if (!json_is_object(doc))
        rc = crater_errorf(err, CRATER_ETYPE, "%s: not a JSON object", path);
    else if (v && (!json_is_integer(v) || json_integer_value(v) < 0))
        rc = crater_errorf_field(err,
                                 CRATER_ETYPE,
                                 key,
                                 "%s: \"%s\" is not a byte count",
                                 path,
                                 key);
    else if (v) {
        *bytes = (uint64_t)json_integer_value(v);
        rc = 1;
    }
    json_decref(doc);
    return rc;
}

int agent_ctx_cache_put(const char *path,
                        const char *key,
                        uint64_t bytes,
                        crater_error_t *err)
{
    json_t *doc = json_load_file(path, 0, NULL);
    char tmp[4096];
    int rc = 0;

    if (!json_is_object(doc)) {
        json_decref(doc); /* absent or unreadable: start afresh */
        doc = json_object();
    }
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
        rc = crater_errorf(err, CRATER_ELIMIT, "%s: path too long", path);
    else if (!doc
             || json_object_set_new(doc, key, json_integer((json_int_t)bytes))
                    < 0)
        rc = crater_errorf(err, CRATER_ENOMEM, "out of memory");
    else if (json_dump_file(doc, tmp, JSON_INDENT(2) | JSON_SORT_KEYS) < 0
             || rename(tmp, path) < 0) {
        rc = crater_errorf(err, CRATER_EIO, "%s: %s", path, strerror(errno));
        unlink(tmp);
    }
    json_decref(doc);
    return rc;
}

/* ---- per model, at agent start ----------------------------------------- */

static uint64_t configured(const crater_agent_t *a)
{
    return a->cfg ? a->cfg->scheduler.gpu_context_overhead : 0;
}

uint64_t agent_ctx_overhead(const crater_agent_t *a, uint32_t gpu)
{
    if (gpu < CRATER_MAX_GPUS_PER_NODE && a->ctx_overhead[gpu])
        return a->ctx_overhead[gpu];
    return configured(a);
}

static uint64_t mib_ceil(uint64_t b)
{
    return (b + MIB - 1) / MIB;
}

/* The overhead of GPU first's model: cached, else measured and cached.
 * 0 when it cannot be had (warned). */
static uint64_t model_overhead(crater_agent_t *a,
                               unsigned first,
                               const char *driver,
                               const char *path,
                               bool *cached)
{
    const crater_gpu_t *g = &a->node.gpus[first];
    crater_error_t err;
    uint64_t v = 0;
    char key[256];
    int rc;

    snprintf(key, sizeof(key), "%s|%s", g->model, driver);
    if ((rc = agent_ctx_cache_get(path, key, &v, &err)) < 0)
        crater_log(LOG_WARNING, "%s; measuring again", err.text);
    if ((*cached = rc == 1))
        return v;
    if (agent_ctx_measure(a->nvml,
                          first,
                          g->uuid,
                          getenv("CRATER_CUDA_LIB"),
                          &v,
                          &err)
        < 0) {
        crater_log(LOG_WARNING,
                   "GPU model %s, driver %s: cannot measure a CUDA context "
                   "on GPU %u (%s); using scheduler.gpuContextOverhead, "
                   "%" PRIu64 " MiB",
                   g->model,
                   driver,
                   first,
                   err.text,
                   mib_ceil(configured(a)));
        return 0;
    }
    if (agent_ctx_cache_put(path, key, v, &err) < 0)
        crater_log(LOG_WARNING,
                   "cannot remember the context overhead: %s",
                   err.text);
    return v;
}

static void report(const crater_agent_t *a,
                   const crater_gpu_t *g,
                   const char *driver,
                   uint64_t v,
                   bool cached)
{
    uint64_t conf = configured(a);

    crater_log(LOG_INFO,
               "GPU model %s, driver %s: a CUDA context costs %" PRIu64
               " MiB (measured%s; scheduler.gpuContextOverhead is "
               "%" PRIu64 " MiB)",
               g->model,
               driver,
               mib_ceil(v),
               cached ? " earlier, " CACHE_FILE : "",
               mib_ceil(conf));
    if (v > conf)
        crater_log(LOG_WARNING,
                   "GPU model %s: a CUDA context costs more than "
                   "scheduler.gpuContextOverhead (%" PRIu64 " > %" PRIu64
                   " MiB), so the scheduler under-charges every GPU "
                   "process; raise scheduler.gpuContextOverhead to at "
                   "least %" PRIu64 " MiB",
                   g->model,
                   mib_ceil(v),
                   mib_ceil(conf),
                   mib_ceil(v));
}

int agent_ctx_overheads(crater_agent_t *a)
{
    bool done[CRATER_MAX_GPUS_PER_NODE] = {false};
    char driver[96], path[4096];
    crater_error_t err;
    unsigned n;
    int known = 0;

    if (!a->nvml || !a->data_dir)
        return 0; /* no NVML: a --hardware node or no driver */
    n = crater_nvml_count(a->nvml);
    n = n < a->node.ngpus ? n : a->node.ngpus;
    n = n < CRATER_MAX_GPUS_PER_NODE ? n : CRATER_MAX_GPUS_PER_NODE;
    if (n == 0)
        return 0;
    if (crater_nvml_driver(a->nvml, driver, sizeof(driver), NULL, &err) < 0) {
        crater_log(LOG_WARNING,
                   "CUDA context overhead not measured: %s",
                   err.text);
        return 0;
    }
    snprintf(path, sizeof(path), "%s/%s", a->data_dir, CACHE_FILE);
    for (unsigned i = 0; i < n; i++) {
        const char *m = a->node.gpus[i].model;
        bool cached = false;
        uint64_t v;
        if (done[i] || !m || !a->node.gpus[i].uuid)
            continue;
        v = model_overhead(a, i, driver, path, &cached);
        for (unsigned j = i; j < n; j++) {
            const char *mj = a->node.gpus[j].model;
            if (!done[j] && mj && strcmp(mj, m) == 0) {
                done[j] = true;
                a->ctx_overhead[j] = v;
                known += v > 0;
            }
        }
        if (v > 0)
            report(a, &a->node.gpus[i], driver, v, cached);
    }
    return known;
}
