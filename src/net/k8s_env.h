/* k8s_env.h - the environment a Kubernetes pod needs to use the GPUs
 * Crater placed it on: the same variables the agent sets for a task
 * (doc/gpu-sharing.md), written as Kubernetes EnvVar objects. Shared by
 * craterd's scheduler extender (the bind answer) and `crater export k8s`
 * (the manifest), so both say the same thing. Pure: no I/O.
 */
#ifndef CRATER_NET_K8S_ENV_H
#define CRATER_NET_K8S_ENV_H

#include <jansson.h>
#include <stdint.h>

#include "crater/jobspec.h"

/* Where the interposer is installed on a node (doc/gpu-sharing.md). */
#define CRATER_K8S_GPUSLICE_LIB "/usr/lib/crater/libcrater-gpuslice.so"

/* [{"name", "value"}...] for placement, a placement object of doc/api.md
 * ({"gpus": [{"uuid", "memory_bytes"}...], "whole_gpus"}):
 * CUDA_VISIBLE_DEVICES (the GPUs' UUIDs in placement order) and
 * CUDA_DEVICE_ORDER; for slices (whole_gpus false) also LD_PRELOAD,
 * CRATER_GPUSLICE_FILE (/dev/shm/crater-k8s-KEY.slice) and
 * CRATER_GPUSLICE_CTX_OVERHEAD (ctx_bytes). A placement without GPUs
 * gives []. Missing fields read as empty. Caller must json_decref(); NULL
 * on ENOMEM. */
json_t *crater__k8s_slice_env(const json_t *placement,
                              uint64_t ctx_bytes,
                              const char *key);

/* The Kubernetes object equal to spec (`crater export k8s`): a v1 Pod,
 * or a batch/v1 Job (Indexed, completions = parallelism = replicas) for
 * a multi-replica job. Resources: cpu and memory requests; whole GPUs as
 * nvidia.com/gpu limits; a slice as the crater.io/gpu and
 * crater.io/gpu-memory annotations (what the extender reads). placement:
 * the job object of doc/api.md when the job is placed (NULL when not):
 * its node(s) become a required node affinity on kubernetes.io/hostname
 * and, for a Pod, its GPUs the slice environment. ctx_bytes: the context
 * overhead for the environment. Caller must json_decref(); NULL on
 * ENOMEM. */
json_t *crater__k8s_manifest(const crater_jobspec_t *spec,
                             const json_t *job,
                             uint64_t ctx_bytes);

#endif
