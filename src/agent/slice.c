/* slice.c - the agent's side of GPU sharing: per-task slice files for the
 * interposer, the task environment for each isolation mode, and the NVML
 * watchdog (doc/gpu-sharing.md).
 *
 * Modes (the order's limits.gpuIsolation, from the job spec's
 * resources.gpu.isolation): "slice" (default for GPU-memory slices):
 * the agent writes /dev/shm/crater-<cgroup>.slice with the task's limit
 * on each GPU UUID and preloads libcrater-gpuslice.so, which makes an
 * allocation past the limit fail with CUDA_ERROR_OUT_OF_MEMORY; "mps":
 * trusted co-located tasks share SMs through an MPS server, which enforces
 * CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, and CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
 * caps the SMs in proportion to the slice; "mig": the task runs on one
 * MIG device of its GPU (CUDA_VISIBLE_DEVICES=MIG-<uuid>), chosen among
 * those the operator created: the smallest free one that holds the slice,
 * or the largest free one for a whole-GPU task; the hardware enforces
 * the memory, so neither interposer nor watchdog; "none": no enforcement.
 * Whole-GPU tasks need none of this, except in mig mode (a GPU in MIG
 * mode runs CUDA only on its MIG devices).
 *
 * "Free" means no other running task of this agent holds the MIG device
 * (t->mig_uuid): the agent is the only one starting work on its GPUs.
 *
 * The watchdog, about once a second on machines with NVML, sums the real
 * per-process GPU memory of each task's processes (found through its
 * cgroup) and kills a task that stays over its slice plus tolerance for
 * three checks in a row: this catches programs that bypass the interposer
 * (static CUDA, their own driver loader) and what it cannot count.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/internal.h"
#include "crater/gpuslice.h"
#include "crater/log.h"

#define WATCHDOG_STRIKES 3
#define WATCHDOG_TOLERANCE 0.05 /* of the slice, on top of the overhead */

/* The interposer: $CRATER_GPUSLICE_LIB, next to this program, in the build
 * tree this program came from, or installed. NULL when none exists. */
const char *agent_gpuslice_lib(void)
{
    static const char *const beside[] = {"libcrater-gpuslice.so",
                                         "src/gpuslice/libcrater-gpuslice.so",
                                         NULL};
    static char found[4096];
#ifdef CRATER_GPUSLICE_BUILD_PATH
    const char *build = CRATER_GPUSLICE_BUILD_PATH;
#else
    const char *build = NULL;
#endif
    const char *p = agent_locate("CRATER_GPUSLICE_LIB",
                                 beside,
                                 build,
                                 R_OK,
                                 found,
                                 sizeof(found));

    if (p)
        return p;
    if (access("/usr/lib/crater/libcrater-gpuslice.so", R_OK) == 0)
        return "/usr/lib/crater/libcrater-gpuslice.so";
    return NULL;
}

/* A slice (not whole GPUs) was placed: the task's limit per GPU. */
static bool has_slice(const atask_t *t, const crater_proto_task_t *task)
{
    return t->ngpus > 0 && !task->placement.whole_gpus;
}

static int write_slice_file(atask_t *t,
                            const crater_proto_task_t *task,
                            crater_error_t *err)
{
    crater_gpuslice_limit_t lim[CRATER_GPUSLICE_MAX_GPUS];
    const crater_proto_placement_t *pl = &task->placement;
    char path[256];

    memset(lim, 0, sizeof(lim));
    for (uint32_t i = 0; i < pl->ngpus; i++) {
        if (i >= CRATER_GPUSLICE_MAX_GPUS
            || crater_gpuslice_uuid_parse(pl->gpus[i].uuid, lim[i].uuid, err)
                   < 0)
            return -1;
        lim[i].limit = pl->gpus[i].memory_bytes;
    }
    snprintf(path, sizeof(path), "/dev/shm/crater-%s.slice", t->cg);
    if (crater_gpuslice_create(path,
                               lim,
                               pl->ngpus,
                               t->switch_user ? t->uid : getuid(),
                               t->switch_user ? t->gid : getgid(),
                               err)
        < 0)
        return -1;
    t->slice_path = strdup(path);
    return 0;
}

static int setenv_fmt(crater_proto_task_t *task,
                      const char *k,
                      const char *fmt,
                      ...) __attribute__((format(printf, 3, 4)));

static int setenv_fmt(crater_proto_task_t *task,
                      const char *k,
                      const char *fmt,
                      ...)
{
    char buf[4200];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return crater_proto_task_setenv(task, k, buf);
}

/* The context overhead the interposer charges per process and GPU: one
 * figure for the task, the largest of its GPUs' (measured at agent start,
 * else scheduler.gpuContextOverhead). */
static uint64_t task_overhead(const crater_agent_t *a, const atask_t *t)
{
    uint64_t max = 0;

    for (uint32_t i = 0; i < t->ngpus; i++) {
        uint64_t o = agent_ctx_overhead(a, t->gpu[i]);
        max = o > max ? o : max;
    }
    return max;
}

static int slice_env(crater_agent_t *a,
                     atask_t *t,
                     crater_proto_task_t *task,
                     crater_error_t *err)
{
    const char *lib = agent_gpuslice_lib();
    const char *pre = crater_proto_task_getenv(task, "LD_PRELOAD");
    uint64_t overhead = task_overhead(a, t);
    int rc = 0;

    if (write_slice_file(t, task, err) < 0)
        return -1;
    if (!lib) {
        crater_log(LOG_WARNING,
                   "job %s: libcrater-gpuslice.so not found (set "
                   "CRATER_GPUSLICE_LIB); the slice is enforced by the "
                   "watchdog only",
                   t->job);
        return 0;
    }
    rc |= setenv_fmt(task, "CRATER_GPUSLICE_FILE", "%s", t->slice_path);
    rc |=
        setenv_fmt(task, "CRATER_GPUSLICE_CTX_OVERHEAD", "%" PRIu64, overhead);
    rc |= setenv_fmt(task,
                     "LD_PRELOAD",
                     "%s%s%s",
                     lib,
                     pre ? ":" : "",
                     pre ? pre : "");
    return rc ? crater_errorf(err, CRATER_ENOMEM, "out of memory") : 0;
}

/* MPS: the server enforces the pinned memory limit per device (by the
 * index CUDA_VISIBLE_DEVICES gives the task); SMs in proportion to the
 * share of the GPU's memory. */
static int mps_env(crater_agent_t *a, atask_t *t, crater_proto_task_t *task)
{
    char lim[512] = "";
    size_t off = 0;
    double share = 1.0;

    for (uint32_t i = 0; i < t->ngpus && off < sizeof(lim); i++) {
        uint64_t cap = t->gpu[i] < a->node.ngpus
                           ? a->node.gpus[t->gpu[i]].memory_bytes
                           : 0;
        off += (size_t)snprintf(lim + off,
                                sizeof(lim) - off,
                                "%s%u=%" PRIu64 "M",
                                i ? "," : "",
                                i,
                                t->gpu_bytes[i] >> 20);
        if (cap && (double)t->gpu_bytes[i] / (double)cap < share)
            share = (double)t->gpu_bytes[i] / (double)cap;
    }
    if (crater_proto_task_setenv(task, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", lim)
        < 0)
        return -1;
    return setenv_fmt(task,
                      "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                      "%d",
                      share * 100 < 1 ? 1 : (int)(share * 100 + 0.5));
}

/* ---- MIG ------------------------------------------------------------- */

#define MIG_MAX 16 /* MIG devices per GPU: 7 on A100/H100/H200 */
#define MIG_FIELD "resources.gpu.isolation"

int agent_mig_pick(const crater_nvml_mig_t *migs,
                   size_t n,
                   const bool *busy,
                   uint64_t need,
                   bool whole)
{
    int best = -1;

    for (size_t i = 0; i < n; i++) {
        uint64_t m = migs[i].memory_bytes;
        if ((busy && busy[i]) || (!whole && m < need))
            continue;
        if (best < 0
            || (whole ? m > migs[best].memory_bytes
                      : m < migs[best].memory_bytes))
            best = (int)i;
    }
    return best;
}

/* busy[i]: another running task of this agent holds migs[i]. */
static void mig_busy(const crater_agent_t *a,
                     const atask_t *t,
                     const crater_nvml_mig_t *migs,
                     size_t n,
                     bool *busy)
{
    for (size_t i = 0; i < n; i++) {
        busy[i] = false;
        for (size_t k = 0; k < a->ntasks && !busy[i]; k++) {
            const atask_t *o = a->tasks[k];
            busy[i] = o != t && o->state == AT_RUNNING
                      && strcmp(o->mig_uuid, migs[i].uuid) == 0;
        }
    }
}

/* An NVML error, now on the isolation field. */
static int mig_fail(crater_error_t *err)
{
    char text[CRATER_ERROR_TEXT];

    if (!err)
        return -1;
    snprintf(text, sizeof(text), "%s", err->text);
    return crater_errorf_field(err, err->errnum, MIG_FIELD, "%s", text);
}

/* No MIG device fits: say which there are and which are busy. */
static int mig_none(const atask_t *t,
                    const crater_nvml_mig_t *migs,
                    size_t n,
                    const bool *busy,
                    bool whole,
                    crater_error_t *err)
{
    char list[512] = "", need[64] = "";
    size_t off = 0;

    for (size_t i = 0; i < n && off < sizeof(list); i++)
        off += (size_t)snprintf(list + off,
                                sizeof(list) - off,
                                "%s#%u %" PRIu64 " MiB%s",
                                i ? ", " : "",
                                migs[i].index,
                                migs[i].memory_bytes >> 20,
                                busy[i] ? " busy" : "");
    if (!whole)
        snprintf(need,
                 sizeof(need),
                 " with %" PRIu64 " MiB",
                 t->gpu_bytes[0] >> 20);
    crater_log(LOG_WARNING,
               "job %s: no free MIG device%s on GPU %u: %s",
               t->job,
               need,
               t->gpu[0],
               list);
    return crater_errorf_field(err,
                               CRATER_EUNAVAIL,
                               MIG_FIELD,
                               "no free MIG device%s on GPU %u (%s)",
                               need,
                               t->gpu[0],
                               list);
}

static int mig_check(const crater_agent_t *a,
                     const atask_t *t,
                     crater_error_t *err)
{
    if (t->ngpus != 1)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   MIG_FIELD,
                                   "isolation: mig gives a task one MIG "
                                   "device, so one GPU (CUDA sees one MIG "
                                   "device per process); this task has %u",
                                   t->ngpus);
    if (!a->nvml)
        return crater_errorf_field(err,
                                   CRATER_EUNAVAIL,
                                   MIG_FIELD,
                                   "isolation: mig needs NVML; this node "
                                   "has no NVIDIA driver");
    return 0;
}

/* Run the task on a MIG device of its one GPU. */
static int mig_setup(crater_agent_t *a,
                     atask_t *t,
                     crater_proto_task_t *task,
                     crater_error_t *err)
{
    crater_nvml_mig_t migs[MIG_MAX];
    bool busy[MIG_MAX];
    size_t n = 0;
    int k;

    if (mig_check(a, t, err) < 0)
        return -1;
    if (crater_nvml_migs(a->nvml, t->gpu[0], migs, MIG_MAX, &n, err) < 0)
        return mig_fail(err);
    n = n < MIG_MAX ? n : MIG_MAX;
    if (n == 0)
        return crater_errorf_field(err,
                                   CRATER_EUNAVAIL,
                                   MIG_FIELD,
                                   "GPU %u is in MIG mode but has no MIG "
                                   "devices; create them (nvidia-smi mig "
                                   "-i %u -cgi <profiles> -C)",
                                   t->gpu[0],
                                   t->gpu[0]);
    mig_busy(a, t, migs, n, busy);
    k = agent_mig_pick(migs, n, busy, t->gpu_bytes[0], !has_slice(t, task));
    if (k < 0)
        return mig_none(t, migs, n, busy, !has_slice(t, task), err);
    snprintf(t->mig_uuid, sizeof(t->mig_uuid), "%s", migs[k].uuid);
    if (crater_proto_task_setenv(task, "CUDA_VISIBLE_DEVICES", t->mig_uuid) < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    t->watch = false; /* the hardware enforces the instance's memory */
    crater_log(LOG_INFO,
               "job %s: MIG device %s (%" PRIu64 " MiB) of GPU %u",
               t->job,
               t->mig_uuid,
               migs[k].memory_bytes >> 20,
               t->gpu[0]);
    return 0;
}

/* ---- setup ------------------------------------------------------------ */

int agent_slice_setup(crater_agent_t *a,
                      atask_t *t,
                      crater_proto_task_t *task,
                      crater_error_t *err)
{
    crater_gpu_isolation_t mode = task->limits.gpu_isolation;

    if (t->ngpus == 0 || mode == CRATER_GPU_ISO_NONE)
        return 0;
    if (mode == CRATER_GPU_ISO_MIG)
        return mig_setup(a, t, task, err);
    if (!has_slice(t, task))
        return 0;
    t->watch = true;
    if (mode == CRATER_GPU_ISO_MPS)
        return mps_env(a, t, task) < 0
                   ? crater_errorf(err, CRATER_ENOMEM, "out of memory")
                   : 0;
    return slice_env(a, t, task, err);
}

void agent_slice_cleanup(atask_t *t)
{
    if (t->slice_path)
        unlink(t->slice_path);
    free(t->slice_path);
    t->slice_path = NULL;
}

/* ---- watchdog -------------------------------------------------------------
 */

/* Is any GPU of the task over its slice plus tolerance? used/limit per
 * task GPU; overhead: the contexts NVML sees but the slice does not count. */
bool agent_slice_over(const uint64_t *used,
                      const uint64_t *limit,
                      size_t n,
                      uint64_t overhead,
                      size_t *which)
{
    for (size_t i = 0; i < n; i++) {
        double allowed =
            (double)limit[i] * (1.0 + WATCHDOG_TOLERANCE) + (double)overhead;
        if ((double)used[i] > allowed) {
            *which = i;
            return true;
        }
    }
    return false;
}

static bool task_has_pid(crater_agent_t *a, atask_t *t, uint32_t pid)
{
    pid_t pids[256];
    size_t n = 0;

    if (crater_cg_pids(a->cg, t->cg, pids, 256, &n, NULL) < 0)
        return pid == (uint32_t)t->pid;
    for (size_t i = 0; i < n && i < 256; i++)
        if ((uint32_t)pids[i] == pid)
            return true;
    return false;
}

static void measure_task(crater_agent_t *a, atask_t *t, uint64_t *used)
{
    crater_nvml_proc_t procs[64];

    for (uint32_t g = 0; g < t->ngpus; g++) {
        size_t n = 0;
        used[g] = 0;
        if (crater_nvml_procs(a->nvml, t->gpu[g], procs, 64, &n, NULL) < 0)
            continue;
        for (size_t k = 0; k < n && k < 64; k++)
            if (task_has_pid(a, t, procs[k].pid))
                used[g] += procs[k].used_bytes;
    }
}

static void strike(crater_agent_t *a,
                   atask_t *t,
                   const uint64_t *used,
                   size_t g)
{
    char msg[256];

    if (++t->strikes < WATCHDOG_STRIKES)
        return;
    snprintf(msg,
             sizeof(msg),
             "GPU memory slice exceeded: %" PRIu64 " MiB used of %" PRIu64
             " MiB on GPU %u (killed by the watchdog)",
             used[g] >> 20,
             t->gpu_bytes[g] >> 20,
             t->gpu[g]);
    crater_log(LOG_WARNING, "job %s: %s", t->job, msg);
    free(t->error);
    t->error = strdup(msg);
    task_stop(a, t, 0);
}

/* agent_slice_over, each GPU with its own context overhead. */
static bool task_over(const crater_agent_t *a,
                      const atask_t *t,
                      const uint64_t *used,
                      size_t *which)
{
    size_t unused;

    for (uint32_t i = 0; i < t->ngpus; i++)
        if (agent_slice_over(&used[i],
                             &t->gpu_bytes[i],
                             1,
                             agent_ctx_overhead(a, t->gpu[i]),
                             &unused)) {
            *which = i;
            return true;
        }
    return false;
}

void agent_watchdog(crater_agent_t *a)
{
    uint64_t used[CRATER_MAX_GPUS_PER_NODE];
    size_t g;

    if (!a->nvml)
        return;
    for (size_t i = 0; i < a->ntasks; i++) {
        atask_t *t = a->tasks[i];
        if (t->state != AT_RUNNING || !t->watch || t->stop_requested)
            continue;
        measure_task(a, t, used);
        if (task_over(a, t, used, &g))
            strike(a, t, used, g);
        else
            t->strikes = 0;
    }
}
