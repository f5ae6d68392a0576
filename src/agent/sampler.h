/* sampler.h - host load sampling for the node agent.
 *
 * Every sampling interval the agent calls crater_sampler_sample(); it reads
 * /proc/stat, /proc/meminfo and /proc/diskstats, turns counters into rates
 * against the previous call (the seeds' cheap alternative to running fio)
 * and keeps the last `window` samples so crater_sampler_get() returns a
 * moving average. doc/agent.md "Sampling" describes every formula.
 *
 * Not thread-safe: one sampler belongs to one thread (the agent's loop).
 */
#ifndef CRATER_SAMPLER_H
#define CRATER_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"

typedef struct crater_disk_sample {
    char name[32];
    double read_iops, write_iops; /* completed requests per second */
    double read_bps, write_bps;   /* bytes per second (512-byte sectors) */
    double util;                  /* busy time / elapsed time, 0-1 */
} crater_disk_sample_t;

#define CRATER_SAMPLER_MAX_DISKS 32

typedef struct crater_host_sample {
    double cpu; /* busy fraction 0-1, smoothed */
    double mem; /* used fraction 0-1 = 1 - MemAvailable/MemTotal, smoothed */
    uint64_t mem_total, mem_available; /* bytes, latest */
    size_t ndisks;
    /* smoothed deltas; whole disks only (partitions, loop, ram, dm-, zram,
       sr skipped); the first CRATER_SAMPLER_MAX_DISKS in diskstats order */
    crater_disk_sample_t disks[CRATER_SAMPLER_MAX_DISKS];
    double disk_util; /* max util over disks */
    unsigned samples; /* how many samples went into the window */
} crater_host_sample_t;

typedef struct crater_sampler crater_sampler_t;

/* proc_root: NULL = "/proc" (tests use tests/data/proc fixtures); the string
 * is copied. window: smoothing_window samples (moving average), >= 1.
 * Returns NULL with err on a bad window or out of memory. Caller destroys. */
crater_sampler_t *crater_sampler_create(const char *proc_root,
                                        unsigned window,
                                        crater_error_t *err);
void crater_sampler_destroy(crater_sampler_t *s); /* NULL is accepted */

/* Read <root>/stat, <root>/meminfo, <root>/diskstats. Rates are deltas
 * against the previous successful call divided by the elapsed now_ms (a
 * monotonic clock in milliseconds); the first call records only levels
 * (mem), no rates. now_ms must increase between calls (else CRATER_EINVAL).
 * On error (unreadable or malformed file, message "path:line: reason") the
 * sampler is unchanged. */
int crater_sampler_sample(crater_sampler_t *s,
                          uint64_t now_ms,
                          crater_error_t *err);
/* The smoothed view. Before any sample: all zero. */
void crater_sampler_get(const crater_sampler_t *s, crater_host_sample_t *out);

/* Pure parsers (exported for tests). Malformed input -> -1 with err naming
 * "stat:LINE" / "meminfo:LINE" / "diskstats:LINE" and the reason.
 * busy = user+nice+system+irq+softirq+steal, total = busy+idle+iowait
 * (guest time is already inside user). Memory in bytes; a kernel without
 * MemAvailable gets MemFree+Buffers+Cached. */
int crater_proc_stat_parse(const char *text,
                           uint64_t *busy,
                           uint64_t *total,
                           crater_error_t *err);
int crater_meminfo_parse(const char *text,
                         uint64_t *total,
                         uint64_t *avail,
                         crater_error_t *err);

/* One /proc/diskstats line's counters. */
typedef struct crater_diskstat {
    char name[32];
    uint32_t major, minor;
    uint64_t rd_ios, rd_sectors, wr_ios, wr_sectors, io_ticks_ms;
} crater_diskstat_t;

/* Parse diskstats, keeping whole disks only (crater_disk_is_whole), at most
 * max of them (the rest are counted in *n but not stored: *n may exceed
 * max). */
int crater_diskstats_parse(const char *text,
                           crater_diskstat_t *out,
                           size_t max,
                           size_t *n,
                           crater_error_t *err);
/* Name rule used above: false for loop*, ram*, zram*, dm-*, sr*, fd*,
 * partitions sdXN / hdXN / vdXN / xvdXN and <...digit>pN (nvme0n1p1,
 * mmcblk0p2). */
int crater_disk_is_whole(const char *name);

#endif /* CRATER_SAMPLER_H */
