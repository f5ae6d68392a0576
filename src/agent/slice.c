/* slice.c - the agent's side of GPU sharing: per-task slice files for the
 * interposer, the task environment for each isolation mode, and the NVML
 * watchdog (doc/gpu-sharing.md).
 *
 * Modes (job spec gpuIsolation): "slice" (default for GPU-memory slices):
 * the agent writes /dev/shm/crater-<cgroup>.slice with the task's limit
 * on each GPU UUID and preloads libcrater-gpuslice.so, which makes an
 * allocation past the limit fail with CUDA_ERROR_OUT_OF_MEMORY; "mps":
 * trusted co-located tasks share SMs through an MPS server, which enforces
 * CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, and CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
 * caps the SMs in proportion to the slice; "none": no enforcement.
 * Whole-GPU tasks need none of this.
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
    static char found[4096];
    char exe[4096], *slash;
    const char *env = getenv("CRATER_GPUSLICE_LIB");
    ssize_t n;

    if (env && access(env, R_OK) == 0)
        return env;
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        if ((slash = strrchr(exe, '/')))
            *slash = '\0';
        if (snprintf(found, sizeof(found), "%s/libcrater-gpuslice.so", exe)
                < (int)sizeof(found)
            && access(found, R_OK) == 0)
            return found;
        if (snprintf(found,
                     sizeof(found),
                     "%s/src/gpuslice/libcrater-gpuslice.so",
                     exe)
                < (int)sizeof(found)
            && access(found, R_OK) == 0)
            return found;
    }
#ifdef CRATER_GPUSLICE_BUILD_PATH
    if (access(CRATER_GPUSLICE_BUILD_PATH, R_OK) == 0)
        return CRATER_GPUSLICE_BUILD_PATH;
#endif
    if (access("/usr/lib/crater/libcrater-gpuslice.so", R_OK) == 0)
        return "/usr/lib/crater/libcrater-gpuslice.so";
    return NULL;
}

/* A slice (not whole GPUs) was placed: the task's limit per GPU. */
static bool has_slice(const atask_t *t, json_t *task)
{
    json_t *pl = json_object_get(task, "placement");

    return t->ngpus > 0 && !json_is_true(json_object_get(pl, "whole_gpus"));
}

static const char *isolation(json_t *task)
{
    json_t *spec = json_object_get(task, "spec");
    json_t *gpu = json_object_get(json_object_get(spec, "resources"), "gpu");
    const char *m = json_string_value(json_object_get(gpu, "isolation"));

    return m ? m : "slice";
}

static int write_slice_file(crater_agent_t *a,
                            atask_t *t,
                            json_t *task,
                            crater_error_t *err)
{
    crater_gpuslice_limit_t lim[CRATER_GPUSLICE_MAX_GPUS];
    json_t *gpus = json_object_get(json_object_get(task, "placement"), "gpus");
    char path[256];
    json_t *g;
    size_t i;

    memset(lim, 0, sizeof(lim));
    json_array_foreach(gpus, i, g)
    {
        if (i >= CRATER_GPUSLICE_MAX_GPUS
            || crater_gpuslice_uuid_parse(json_string_value(
                                              json_object_get(g, "uuid")),
                                          lim[i].uuid,
                                          err)
                   < 0)
            return -1;
        lim[i].limit =
            (uint64_t)json_integer_value(json_object_get(g, "memory_bytes"));
    }
    snprintf(path, sizeof(path), "/dev/shm/crater-%s.slice", t->cg);
    if (crater_gpuslice_create(path,
                               lim,
                               json_array_size(gpus),
                               a->switch_user ? a->uid : getuid(),
                               a->switch_user ? a->gid : getgid(),
                               err)
        < 0)
        return -1;
    t->slice_path = strdup(path);
    return 0;
}

static void setenv_json(json_t *env, const char *k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void setenv_json(json_t *env, const char *k, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    json_object_set_new(env, k, json_string(buf));
}

static int slice_env(crater_agent_t *a,
                     atask_t *t,
                     json_t *task,
                     json_t *env,
                     crater_error_t *err)
{
    const char *lib = agent_gpuslice_lib();
    const char *pre = json_string_value(json_object_get(env, "LD_PRELOAD"));
    uint64_t overhead = a->cfg ? a->cfg->scheduler.gpu_context_overhead : 0;

    if (write_slice_file(a, t, task, err) < 0)
        return -1;
    if (!lib) {
        crater_log(LOG_WARNING,
                   "job %s: libcrater-gpuslice.so not found (set "
                   "CRATER_GPUSLICE_LIB); the slice is enforced by the "
                   "watchdog only",
                   t->job);
        return 0;
    }
    setenv_json(env, "CRATER_GPUSLICE_FILE", "%s", t->slice_path);
    setenv_json(env, "CRATER_GPUSLICE_CTX_OVERHEAD", "%" PRIu64, overhead);
    setenv_json(env,
                "LD_PRELOAD",
                "%s%s%s",
                lib,
                pre ? ":" : "",
                pre ? pre : "");
    return 0;
}

/* MPS: the server enforces the pinned memory limit per device (by the
 * index CUDA_VISIBLE_DEVICES gives the task); SMs in proportion to the
 * share of the GPU's memory. */
static void mps_env(crater_agent_t *a, atask_t *t, json_t *env)
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
    json_object_set_new(env,
                        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
                        json_string(lim));
    setenv_json(env,
                "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                "%d",
                share * 100 < 1 ? 1 : (int)(share * 100 + 0.5));
}

int agent_slice_setup(crater_agent_t *a,
                      atask_t *t,
                      json_t *task,
                      json_t *env,
                      crater_error_t *err)
{
    const char *mode = isolation(task);

    if (!has_slice(t, task) || strcmp(mode, "none") == 0)
        return 0;
    if (strcmp(mode, "mig") == 0)
        return crater_errorf_field(err,
                                   CRATER_EUNAVAIL,
                                   "resources.gpu.isolation",
                                   "isolation: mig is not available yet on "
                                   "this agent (use slice or mps)");
    t->watch = true;
    if (strcmp(mode, "mps") == 0) {
        mps_env(a, t, env);
        return 0;
    }
    return slice_env(a, t, task, env, err);
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

void agent_watchdog(crater_agent_t *a)
{
    uint64_t overhead = a->cfg ? a->cfg->scheduler.gpu_context_overhead : 0;
    uint64_t used[CRATER_MAX_GPUS_PER_NODE];
    size_t g;

    if (!a->nvml)
        return;
    for (size_t i = 0; i < a->ntasks; i++) {
        atask_t *t = a->tasks[i];
        if (t->state != AT_RUNNING || !t->watch || t->stop_requested)
            continue;
        measure_task(a, t, used);
        if (agent_slice_over(used, t->gpu_bytes, t->ngpus, overhead, &g))
            strike(a, t, used, g);
        else
            t->strikes = 0;
    }
}
