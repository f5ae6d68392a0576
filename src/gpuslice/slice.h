/*
 * slice.h - operations on a mapped slice file (crater/gpuslice.h), shared
 * by the interposer and the agent-side API. No allocation, no logging, no
 * crater_error_t: the interposer links nothing of libcrater. Functions that
 * can fail return -1 with errno set.
 *
 * Concurrency: every field an interposer changes is an atomic in the shared
 * mapping; the only compare-and-swap loops are reserve (used + n <= limit),
 * release (clamped at zero) and the pid field of a process record (claim,
 * reclaim). A process killed between "used += n" and "bytes += n" leaks n
 * until the next process that finds itself alone in the file repairs used
 * (crater__gs_claim); see doc/gpu-sharing.md.
 */
#ifndef CRATER_GPUSLICE_SLICE_H
#define CRATER_GPUSLICE_SLICE_H

#include <stdint.h>

#include "crater/gpuslice.h"

/* Map path read-write. NULL with errno (EINVAL: not a slice file of this
 * version and size). Unmap with crater__gs_unmap. */
crater_gpuslice_file_t *crater__gs_map(const char *path);
void crater__gs_unmap(crater_gpuslice_file_t *f);

/* Index of the GPU record with this UUID, or -1. */
int crater__gs_find_gpu(const crater_gpuslice_file_t *f,
                        const uint8_t uuid[16]);

/* Start time of pid (/proc/PID/stat field 22), 0 when it cannot be read. */
uint64_t crater__gs_proc_start(int64_t pid);

/* Take a free process record for pid (after reclaiming dead ones). When no
 * other live process is in the file, used[] is reset to zero (repairing a
 * leak left by a process killed mid-reservation). Returns the record
 * index, or -1 (ENOSPC: all records taken by live processes). */
int crater__gs_claim(crater_gpuslice_file_t *f, int64_t pid, uint64_t start);

/* Free every record whose process is dead (or whose pid was recycled),
 * giving its bytes back. Never touches record `self`. Returns how many. */
int crater__gs_reclaim(crater_gpuslice_file_t *f, int self);

/* Reserve n bytes on GPU g for record slot: used[g] + n <= limit[g], by
 * compare-and-swap. When that fails, dead processes are reclaimed and it is
 * tried once more. 0, or -1 (ENOMEM) with nothing changed. */
int crater__gs_reserve(crater_gpuslice_file_t *f, int slot, int g, uint64_t n);

/* Give back n bytes of record slot on GPU g (clamped at zero). */
void crater__gs_release(crater_gpuslice_file_t *f, int slot, int g, uint64_t n);

/* Give back everything record slot holds and free the record. */
void crater__gs_leave(crater_gpuslice_file_t *f, int slot);

#endif
