/*
 * gpuslice.h - the shared accounting file of a GPU memory slice.
 *
 * The node agent gives every GPU task one small file under /dev/shm (path in
 * the task's environment as CRATER_GPUSLICE_FILE) that lists, per GPU UUID,
 * the bytes the task may use. The interposer libcrater-gpuslice.so (loaded
 * with LD_PRELOAD into every process of the task) maps the file and reserves
 * each allocation there with an atomic compare-and-swap before calling the
 * driver, so all processes of a task share one budget per GPU.
 * doc/gpu-sharing.md describes the whole mechanism and its limits.
 *
 * Layout (native byte order, fixed size, version 1): a header, then
 * CRATER_GPUSLICE_MAX_GPUS GPU records, then CRATER_GPUSLICE_MAX_PROCS
 * process records. Only the agent writes uuid/limit (once, before the task
 * starts); `used` and the process records are updated with atomics by the
 * interposers. used[g] == sum over live process records of bytes[g], except
 * for an allocation in flight.
 */
#ifndef CRATER_GPUSLICE_H
#define CRATER_GPUSLICE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "crater/error.h"

#define CRATER_GPUSLICE_MAGIC 0x31534743u /* "CGS1" little-endian */
#define CRATER_GPUSLICE_VERSION 1u
#define CRATER_GPUSLICE_MAX_GPUS 16
#define CRATER_GPUSLICE_MAX_PROCS 256

/* One GPU of the task. uuid is the 16 raw bytes NVML prints as
 * "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" and cuDeviceGetUuid returns. */
typedef struct crater_gpuslice_gpu {
    uint8_t uuid[16];
    uint64_t limit;        /* bytes the task may hold on this GPU */
    _Atomic uint64_t used; /* bytes reserved by all its processes */
} crater_gpuslice_gpu_t;

/* One process of the task. pid 0: free; -1: being reclaimed. start is the
 * process start time (clock ticks since boot, /proc/PID/stat field 22) so a
 * recycled pid is not taken for the old process. */
typedef struct crater_gpuslice_proc {
    _Atomic int64_t pid;
    _Atomic uint64_t start;
    _Atomic uint64_t bytes[CRATER_GPUSLICE_MAX_GPUS];
} crater_gpuslice_proc_t;

typedef struct crater_gpuslice_file {
    uint32_t magic;   /* CRATER_GPUSLICE_MAGIC */
    uint32_t version; /* CRATER_GPUSLICE_VERSION */
    uint32_t ngpus;   /* records in gpu[] that are in use */
    uint32_t size;    /* sizeof(crater_gpuslice_file_t) */
    crater_gpuslice_gpu_t gpu[CRATER_GPUSLICE_MAX_GPUS];
    crater_gpuslice_proc_t proc[CRATER_GPUSLICE_MAX_PROCS];
} crater_gpuslice_file_t;

/* What the agent asks for (limit) and reads back (used), per GPU. */
typedef struct crater_gpuslice_limit {
    uint8_t uuid[16];
    uint64_t limit;
    uint64_t used; /* ignored by create; filled by read */
} crater_gpuslice_limit_t;

/* Parse "GPU-8c5d...-..." (the "GPU-" prefix is optional, case-insensitive
 * hex, dashes where NVML puts them) into 16 bytes. -1 and err on bad text. */
int crater_gpuslice_uuid_parse(const char *text,
                               uint8_t uuid[16],
                               crater_error_t *err);

/* Format 16 bytes as "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" into buf
 * (at least 41 bytes). Returns buf. */
char *crater_gpuslice_uuid_format(const uint8_t uuid[16], char buf[41]);

/* Create (or atomically replace) the slice file at path for n GPUs (1 to
 * CRATER_GPUSLICE_MAX_GPUS, distinct UUIDs, limits > 0). The file is written
 * to a temporary name beside path and renamed, so an interposer never maps
 * a half-written file. Mode 0600, owned by uid:gid unless they are
 * (uid_t)-1 / (gid_t)-1. Returns 0, or -1 with err. */
int crater_gpuslice_create(const char *path,
                           const crater_gpuslice_limit_t *gpus,
                           size_t n,
                           uid_t uid,
                           gid_t gid,
                           crater_error_t *err);

/* Read the slice file: up to cap GPU records into gpus (uuid, limit, used),
 * their count into *n. Returns 0, or -1 with err (missing file, bad magic,
 * version or size). */
int crater_gpuslice_read(const char *path,
                         crater_gpuslice_limit_t *gpus,
                         size_t cap,
                         size_t *n,
                         crater_error_t *err);

#endif
