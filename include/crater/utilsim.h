/* utilsim.h - `crater sim util`: measured (not allocated) GPU utilisation
 * of an openb-shaped workload under three schedulers, through the shared
 * scheduling pass (replay.h -> pass.h).
 *
 * Each job gets demands (utilmodel.h): an intrinsic GPU utilisation (how
 * busy its GPUs are when fully fed), the loader CPU, disk bandwidth and
 * memory bandwidth that feed its GPUs at that rate, an idle tail
 * (interactive jobs: the GPUs are held, nothing runs) or a diurnal load
 * (inference services). The replay decides placements and times; this
 * module follows every start and end (opts.on_start / on_end) and, per
 * node, integrates exactly over the piecewise-constant states between
 * them: at each change the node's tasks are solved for contention
 * (crater_util_solve) and the achieved GPU busy time, training steps and
 * served inference load are accumulated.
 *
 * A job holds its allocation for its runtime whatever its speed (a
 * time-boxed run): a starved job does less work, it does not run longer.
 *
 * Every assumption is a field of crater_util_params_t with its default
 * and source in doc/simulator.md; `crater sim util --set key=value`
 * overrides one, `--sensitivity` halves and doubles each.
 */
#ifndef CRATER_UTILSIM_H
#define CRATER_UTILSIM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"
#include "crater/replay.h"

typedef enum crater_util_policy {
    CRATER_UTIL_GPUCOUNT, /* whole GPUs, first fit, CPU/memory fit only */
    CRATER_UTIL_K8S,      /* whole GPUs, least-allocated spreading */
    CRATER_UTIL_CRATER,   /* slices, joint placement with profiled
                             demands, overcommit, idle reclaim, preemption,
                             GPU sharing by profile */
    CRATER_UTIL_NPOLICY
} crater_util_policy_t;

/* The assumptions (doc/simulator.md lists their sources). */
typedef struct crater_util_params {
    uint64_t nodes, jobs, seed;
    double load;                /* offered GPU load after all adjustments */
    double intr_lo, intr_hi;    /* training intrinsic util, uniform */
    double cpu_per_gpu;         /* loader cores per whole GPU, median */
    double disk_per_gpu;        /* loader disk bytes/s per GPU, median */
    double membw_per_gpu;       /* memory bytes/s per GPU, median */
    double sigma;               /* lognormal spread of the three above */
    double cpuonly_burst;       /* CPU-only pods use this x their request */
    double cpu_req_scale;       /* GPU pods ask this x openb's CPU */
    double node_disk;           /* node disk bandwidth, bytes/s */
    double node_membw_per_core; /* node memory bandwidth per core */
    double interactive;         /* share of GPU jobs that are interactive */
    double idle_frac;           /* idle share of an interactive job's run */
    double inference;           /* share of LS GPU pods that serve */
    double trough;              /* diurnal trough, fraction of peak */
    double infer_intr;          /* a service's GPU use at peak */
    uint64_t infer_runtime_ms;  /* how long a service runs */
    double step_s;              /* a training step's compute, seconds */
    /* Crater's mechanisms, each can be switched off (0) */
    double overcommit;        /* scheduler.overcommitRatio */
    uint64_t idle_reclaim_ms; /* idleGpuWindow + idleGpuGrace */
    bool profile_cpu;         /* request the loader CPU it measured */
    bool profile_disk;        /* request the disk bandwidth */
    bool profile_disk_high;   /* ... for high-priority jobs too */
    bool profile_disk_soft;   /* high priority (profile_disk_high off):
                                 as a preference (crater_request_t
                                 disk_soft) rather than not at all */
    bool profile_gpu;         /* time-share whole-GPU jobs by their GPU
                                 profile (scheduler.gpuShare) */
    double gpu_mem;           /* a whole-GPU job's peak GPU memory, share
                                 of its GPU, median (lognormal) */
    double gpu_mem_sigma;     /* its lognormal spread */
    double max_util;          /* gpuShare.maxUtil (capped at 1) */
    double mem_margin;        /* gpuShare.memoryMargin */
    bool whole_only;          /* keep only whole-GPU pods ("whole") */
} crater_util_params_t;

/* Defaults of the workload the seeds describe ("seeds"); "plain" is
 * openb's shapes with ideal jobs (intrinsic 1, demands within requests,
 * no idle, no services); "whole" is plain with whole-GPU jobs only.
 * CRATER_EINVAL for another name. */
int crater_util_params_preset(const char *name,
                              crater_util_params_t *p,
                              crater_error_t *err);
/* Set one field from "key=value" (names as in doc/simulator.md).
 * CRATER_EINVAL naming the key. */
int crater_util_params_set(crater_util_params_t *p,
                           const char *kv,
                           crater_error_t *err);
/* The value of field key (hours for durations, 0/1 for switches); NaN
 * for an unknown key. */
double crater_util_params_get(const crater_util_params_t *p, const char *key);
const char *crater_util_policy_name(crater_util_policy_t p);

typedef struct crater_util_result {
    crater_util_policy_t policy;
    double window_h;            /* arrival window, hours */
    double gpu_alloc;           /* GPUs held, time-weighted (replay) */
    double gpu_measured;        /* GPU busy time / capacity time */
    double steps_per_h;         /* training steps done per hour */
    double infer_served;        /* inference load served / offered */
    double offered;             /* offered GPU load */
    crater_replay_result_t rep; /* waits, preemptions, reclaims */
} crater_util_result_t;

/* Build the cluster and workload of p and run policy pol. dir: openb
 * directory (NULL or missing files: the built-in mix). res is filled;
 * clear with crater_util_result_clear(). */
int crater_util_run(const crater_util_params_t *p,
                    crater_util_policy_t pol,
                    const char *dir,
                    crater_util_result_t *res,
                    crater_error_t *err);
void crater_util_result_clear(crater_util_result_t *res);
/* New reference; NULL on ENOMEM. */
json_t *crater_util_result_json(const crater_util_result_t *res);

#endif /* CRATER_UTILSIM_H */
