/* nvml.h - NVIDIA's management library (NVML), loaded with dlopen.
 *
 * The agent is never linked against NVML: a machine without the driver
 * simply has no GPUs, and everything builds and tests without one (the
 * tests load a stub libnvidia-ml.so.1 from tests/data/nvmlstub by path).
 * The few NVML types used are declared in nvml.c, not here.
 *
 * A crater_nvml_t is one nvmlInit_v2 .. nvmlShutdown session. It is not
 * thread-safe: callers serialise (the agent's sampler owns it).
 * Strings written into a crater_gpu_t are malloc'd and belong to the GPU
 * (freed with its node by crater_node_clear()). crater_nvml_migs() and
 * crater_nvml_procs() write into caller-owned arrays and allocate nothing
 * the caller must free.
 */
#ifndef CRATER_NVML_H
#define CRATER_NVML_H

#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"
#include "crater/kb.h"
#include "crater/model.h"

typedef struct crater_nvml crater_nvml_t;

/* Load lib (NULL = "libnvidia-ml.so.1") and call nvmlInit_v2. A machine
 * without NVML (library absent, or present but no driver loaded) returns
 * NULL with err CRATER_ENOENT: callers treat that as "no GPUs". Other
 * failures: CRATER_EIO (a library that is not NVML, init failed),
 * CRATER_EPERM, CRATER_ENOMEM. Free with crater_nvml_close(). */
crater_nvml_t *crater_nvml_open(const char *lib, crater_error_t *err);
/* nvmlShutdown and dlclose. NULL is accepted. */
void crater_nvml_close(crater_nvml_t *n);

/* Where crater_nvml_gpu() reads PCI NUMA affinity
 * (<root>/bus/pci/devices/<bus id>/numa_node). Default "/sys"; root is
 * copied. Returns -1 (CRATER_ENOMEM) on allocation failure. */
int crater_nvml_set_sys_root(crater_nvml_t *n,
                             const char *root,
                             crater_error_t *err);

/* Number of GPUs NVML sees (0 for NULL). */
unsigned crater_nvml_count(const crater_nvml_t *n);

/* Static facts of GPU idx into g, which the call zeroes first. g->model is
 * the knowledge-base key when kb knows the NVML name, else the normalised
 * NVML name (crater_kb_normalize). memory_bytes, compute_cap, uuid and
 * pci_bus_id (lowercase, "0000:07:00.0") come from NVML; sm_count from
 * nvmlDeviceGetAttributes_v2 where the driver answers for a whole GPU,
 * else the kb. numa_node: the PCI device's numa_node in sysfs, else
 * nvmlDeviceGetNumaNodeId, else -1. nvlink_peers: GPUs of this machine at
 * the far end of an active NVLink; all GPUs on an NVSwitch are peers of
 * each other. Bandwidths and fp16_tflops come from the kb; a GPU with
 * NVLink peers that the kb does not know gets active links x per-link
 * bandwidth of its NVLink version. upstream is left NULL (discovery fills
 * it from hwloc). On failure g is cleared and nothing is leaked. */
int crater_nvml_gpu(crater_nvml_t *n,
                    unsigned idx,
                    const crater_kb_t *kb,
                    crater_gpu_t *g,
                    crater_error_t *err);

/* Free the strings of one GPU filled by crater_nvml_gpu and zero it. */
void crater_nvml_gpu_clear(crater_gpu_t *g);

/* Driver version string ("580.159.04") into driver (dn bytes) and the
 * CUDA driver API version (13000 for 13.0; 0 when NVML does not say). */
int crater_nvml_driver(crater_nvml_t *n,
                       char *driver,
                       size_t dn,
                       int *cuda_version,
                       crater_error_t *err);

/* Live, from nvmlDeviceGetUtilizationRates over NVML's last sample
 * period (1/6 s to 1 s by product): *sm_util, the share of it in which
 * any kernel ran (0-1; one small kernel running all the time reads 1),
 * and *mem_activity (may be NULL), the share in which device memory was
 * read or written: bandwidth activity, not capacity, so a job holding
 * 70 GiB and doing nothing reads 0. *mem_used: memory allocated on the
 * GPU, bytes (nvmlDeviceGetMemoryInfo). */
int crater_nvml_util(crater_nvml_t *n,
                     unsigned idx,
                     double *sm_util,
                     double *mem_activity,
                     uint64_t *mem_used,
                     crater_error_t *err);

typedef struct crater_nvml_proc {
    uint32_t pid;
    uint64_t used_bytes; /* 0 when NVML cannot tell (no permission) */
} crater_nvml_proc_t;

/* Processes using GPU idx, compute and graphics merged by pid
 * (nvmlDevice*RunningProcesses_v3, falling back to _v2). Writes at most
 * max entries to out; *count is the number of processes found, which may
 * be above max (then out holds the first max). */
int crater_nvml_procs(crater_nvml_t *n,
                      unsigned idx,
                      crater_nvml_proc_t *out,
                      size_t max,
                      size_t *count,
                      crater_error_t *err);

/* One MIG device (a compute instance inside a GPU instance) of a GPU in
 * MIG mode. Plain value, nothing to free. */
typedef struct crater_nvml_mig {
    char uuid[96];         /* "MIG-<uuid>", what CUDA_VISIBLE_DEVICES takes */
    uint64_t memory_bytes; /* the instance's memory (NVML total) */
    unsigned index;        /* NVML MIG device index under its GPU */
} crater_nvml_mig_t;

/* The MIG devices the operator created on GPU idx (nvidia-smi mig -cgi
 * ... -C), in NVML index order; indices without a device are skipped.
 * Writes at most max entries to out; *count is the number found, which
 * may be above max. Errors, all CRATER_EUNAVAIL and naming the GPU: the
 * driver's NVML has no MIG entry points or the GPU does not support MIG;
 * MIG mode is disabled (or enabled but pending a GPU reset), with the
 * nvidia-smi commands that fix it. A GPU in MIG mode without instances
 * is not an error: *count = 0. Other NVML failures: as crater_nvml_gpu. */
int crater_nvml_migs(crater_nvml_t *n,
                     unsigned idx,
                     crater_nvml_mig_t *out,
                     size_t max,
                     size_t *count,
                     crater_error_t *err);

#endif /* CRATER_NVML_H */
