/* utilint.h - what utilwork.c (assumptions, workload, cluster) and
 * utilsim.c (the run and its accounting) share; not a public interface. */
#ifndef CRATER_SIM_UTILINT_H
#define CRATER_SIM_UTILINT_H

#include <stddef.h>

#include "crater/replay.h"
#include "crater/utilsim.h"

enum ujob_kind {
    UJ_CPU,
    UJ_TRAIN,
    UJ_INTERACTIVE,
    UJ_INFER
};

/* A job's demands at its full rate (the whole job, all its GPUs). */
struct ujob {
    enum ujob_kind kind;
    double intr;    /* GPU busy fraction when fed */
    double cpu;     /* loader cores (CPU-only: cores used) */
    double cpu_req; /* cores requested by the pod (its CFS weight) */
    double disk;    /* bytes/s */
    double membw;   /* bytes/s */
    double gpu_mem; /* peak GPU memory per GPU, share of the GPU */
    uint32_t gpu_milli;
};

size_t crater__util_param_count(void);
const char *crater__util_param_key(size_t i);
double crater__util_param_get(const crater_util_params_t *p, size_t i);

/* p->jobs jobs for policy pol on s (the cluster has gpus GPUs), their
 * demands in *uj, arrivals compressed to offered load p->load. Both
 * arrays caller-owned (free()). */
int crater__util_jobs(const crater_util_params_t *p,
                      crater_util_policy_t pol,
                      const crater_synth_mix_t *mix,
                      const crater_sched_t *s,
                      double gpus,
                      crater_replay_job_t **jobs,
                      struct ujob **uj,
                      crater_error_t *err);
void crater__util_mix_whole(crater_synth_mix_t *mix);
int crater__util_add_storage(crater_cluster_t *c,
                             double bw,
                             crater_error_t *err);

#endif /* CRATER_SIM_UTILINT_H */
