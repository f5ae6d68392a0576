/* cgroup.h - per-task cgroups for the node agent, v2 or v1.
 *
 * The agent puts every task in <root>/<parent>/<task>: on cgroup v2 one
 * directory, on v1 one directory in each controller hierarchy that is
 * mounted (cpu, cpuacct, cpuset, memory, blkio, pids). Limits follow
 * doc/agent.md "Cgroups": CPU quota (+ burst where the kernel has it),
 * memory limit without swap, cpuset, and blkio/io throttles from the job's
 * ioProfile (crater_cg_io_profile()).
 *
 * Without a usable hierarchy (no v2 controllers, no v1 mounts) every call
 * is a successful no-op and crater_cg_version() says CRATER_CG_NONE.
 *
 * Strings are copied; nothing returned points into the handle except where
 * stated. A handle is not thread-safe: use it from one thread, or lock.
 */
#ifndef CRATER_CGROUP_H
#define CRATER_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "crater/error.h"
#include "crater/jobspec.h"

typedef enum crater_cg_version {
    CRATER_CG_NONE,
    CRATER_CG_V1,
    CRATER_CG_V2
} crater_cg_version_t;

typedef struct crater_cg_io {
    uint32_t major, minor;
    uint64_t rbps, wbps, riops, wiops; /* 0 = no limit */
} crater_cg_io_t;

typedef struct crater_cg_limits {
    uint64_t cpu_quota_milli; /* 0 = none; quota per period = milli/1000 *
                                 period, at least 1000 us (kernel minimum) */
    uint32_t cpu_period_us;   /* 0 = 100000 */
    uint64_t cpu_burst_us;    /* 0 = none; written only where the kernel has
                                 cpu.max.burst / cpu.cfs_burst_us; the kernel
                                 wants burst <= quota */
    uint64_t mem_bytes;       /* 0 = none (v1 memory.limit_in_bytes plus
                                 memory.memsw.limit_in_bytes = the same when
                                 present; v2 memory.max plus memory.swap.max
                                 = 0 when present) */
    const char *cpuset_cpus;  /* NULL = inherit; e.g. "0-15" */
    const char *cpuset_mems;  /* NULL = inherit */
    crater_cg_io_t io[8];
    size_t nio;
    uint64_t pids_max; /* 0 = none; pids.max (v1 and v2) */
} crater_cg_limits_t;

/* Controller bits for crater_cg_controllers(). */
typedef enum crater_cg_ctl {
    CRATER_CG_CPU = 1 << 0,
    CRATER_CG_CPUACCT = 1 << 1, /* v1 only; on v2 cpu.stat has usage */
    CRATER_CG_CPUSET = 1 << 2,
    CRATER_CG_MEMORY = 1 << 3,
    CRATER_CG_IO = 1 << 4, /* v1 blkio, v2 io */
    CRATER_CG_PIDS = 1 << 5,
} crater_cg_ctl_t;

typedef struct crater_cgroups crater_cgroups_t;

/* Detect the hierarchy under root (NULL = "/sys/fs/cgroup"): v2 if
 * root/cgroup.controllers lists cpu or memory (then +cpu +io +memory
 * +cpuset, those available, are written to the subtree_control of root and
 * of root/parent); else v1 per-controller mounts (from /proc/self/mountinfo
 * when root is a mount prefix, else root/<controller> directories); else
 * NONE. parent: our sub-tree name, e.g. "crater" (created if missing; for
 * v1 in each controller; v1 cpuset gets cpuset.cpus/mems copied from its
 * parent so children can be populated). Returns NULL with err when the
 * hierarchy exists but cannot be set up (the message names the file and
 * the errno text). Caller closes. */
crater_cgroups_t *crater_cg_open(const char *root,
                                 const char *parent,
                                 crater_error_t *err);
void crater_cg_close(crater_cgroups_t *cg); /* NULL accepted; keeps dirs */
crater_cg_version_t crater_cg_version(const crater_cgroups_t *cg);
/* Bitmask of crater_cg_ctl_t usable here (0 for NONE). */
unsigned crater_cg_controllers(const crater_cgroups_t *cg);

/* Create <parent>/<task> and write lim. task: 1-64 chars of [A-Za-z0-9._-],
 * not "." or "..". A limit whose controller is missing is an error
 * (CRATER_EUNAVAIL), never silently dropped; v1 cpuset without
 * cpuset_cpus/mems copies the parent's. An existing directory is reused.
 * Errors name the file and the errno text. */
int crater_cg_create(crater_cgroups_t *cg,
                     const char *task,
                     const crater_cg_limits_t *lim,
                     crater_error_t *err);
/* crater_cg_create() for a directory made before (or not: it is made),
 * whose limits were prev (NULL: none, the kernel's defaults): only the
 * CPU, memory and pids limits that differ are written (a limit prev had
 * and lim has not is set back to the kernel's default), cpuset and IO as
 * in crater_cg_create(). For reusing a finished task's cgroup: see
 * crater_cg_plain() and crater_cg_reusable(). */
int crater_cg_update(crater_cgroups_t *cg,
                     const char *task,
                     const crater_cg_limits_t *lim,
                     const crater_cg_limits_t *prev,
                     crater_error_t *err);
/* True when lim needs no cpuset and no IO settings of its own (v1: no
 * directory in those hierarchies): only such a cgroup is worth reusing,
 * since its whole state is the CPU, memory and pids limits. */
bool crater_cg_plain(const crater_cgroups_t *cg, const crater_cg_limits_t *lim);
/* True when the task's cgroup can take another task: no process left (nor
 * counted in pids.current: killed but not yet reaped), no OOM kill counted, and
 * at most max_mem bytes still charged to it (page cache the task left; more
 * would count against the next task). Any read error: false. NONE: true. */
bool crater_cg_reusable(crater_cgroups_t *cg,
                        const char *task,
                        uint64_t max_mem);
/* The task directories under <parent> whose name starts with prefix (in
 * any hierarchy, each name once), malloc'd; free with
 * crater_cg_paths_free. NONE: none. */
int crater_cg_list(crater_cgroups_t *cg,
                   const char *prefix,
                   char ***names,
                   size_t *n,
                   crater_error_t *err);
/* Paths of the files a forked child writes "0" into to join task before
 * exec (async-signal-safe there: open/write/close only): v1, each used
 * hierarchy's "tasks" (the child moves only itself, which, single-threaded
 * between fork and exec, is the whole process, without the global lock a
 * whole-process move takes); v2, its cgroup.procs. malloc'd; caller frees
 * with crater_cg_paths_free. NONE: n = 0. */
int crater_cg_procs_paths(crater_cgroups_t *cg,
                          const char *task,
                          char ***paths,
                          size_t *n,
                          crater_error_t *err);
void crater_cg_paths_free(char **paths, size_t n);
int crater_cg_attach(crater_cgroups_t *cg,
                     const char *task,
                     pid_t pid,
                     crater_error_t *err);
/* pids in the task's cgroup (v2 cgroup.procs; v1 the memory controller's
 * cgroup.procs, else pids, else any). *n may exceed max (then only max are
 * stored). */
int crater_cg_pids(crater_cgroups_t *cg,
                   const char *task,
                   pid_t *pids,
                   size_t max,
                   size_t *n,
                   crater_error_t *err);
/* Signal every process in the cgroup (v2 with sig == SIGKILL: cgroup.kill
 * when present; otherwise cgroup.procs is read and each pid signalled,
 * repeated while new pids show up, at most 8 rounds, to catch forks). */
int crater_cg_kill(crater_cgroups_t *cg,
                   const char *task,
                   int sig,
                   crater_error_t *err);
/* OOM kills so far: v2 memory.events "oom_kill"; v1 memory.oom_control
 * "oom_kill" (Linux >= 4.13). A v1 kernel without that line, or no memory
 * controller: -1 with CRATER_EUNAVAIL, and the caller decides from the
 * exit signal (SIGKILL it did not send) instead. memory.failcnt is not
 * used: it counts reclaim at the limit, not kills. */
int crater_cg_oom_kills(crater_cgroups_t *cg,
                        const char *task,
                        uint64_t *count,
                        crater_error_t *err);
/* The most memory the cgroup (with its children) has held: v2
 * memory.peak, v1 memory.max_usage_in_bytes. A container's OOM on v1
 * counts in the container's own child cgroup, gone once the runtime
 * removed it: a SIGKILL the agent did not send while the task's peak
 * reached its limit is the OOM (ctrtask.c). -1 when unreadable. */
int crater_cg_mem_peak(crater_cgroups_t *cg,
                       const char *task,
                       uint64_t *bytes,
                       crater_error_t *err);
/* CPU time (v2 cpu.stat usage_usec * 1000; v1 cpuacct.usage) and memory
 * (v2 memory.current; v1 memory.usage_in_bytes). A value whose controller
 * is not mounted is UINT64_MAX. NONE: both UINT64_MAX. */
int crater_cg_usage(crater_cgroups_t *cg,
                    const char *task,
                    uint64_t *cpu_ns,
                    uint64_t *mem_bytes,
                    crater_error_t *err);
/* rmdir everywhere (processes must be gone; retries for ~200 ms on EBUSY).
 * A missing directory is not an error. On a tree that is not a cgroupfs
 * (the tests' fake tree) the plain files inside are removed first. */
int crater_cg_destroy(crater_cgroups_t *cg,
                      const char *task,
                      crater_error_t *err);
/* crater_cg_destroy() without waiting: one rmdir per hierarchy (EBUSY:
 * try again later). */
int crater_cg_destroy_nowait(crater_cgroups_t *cg,
                             const char *task,
                             crater_error_t *err);
/* rmdir <parent> everywhere (tests, `crater up` cleanup); EBUSY while
 * task cgroups remain. */
int crater_cg_destroy_parent(crater_cgroups_t *cg, crater_error_t *err);
/* The task's directory for a controller ("cpu", "memory", "blkio"/"io",
 * "cpuset", "cpuacct", "pids"; ignored on v2), for tests and the runner's
 * checks. -1 with CRATER_EUNAVAIL when not mounted, CRATER_ELIMIT when buf
 * is too small. */
int crater_cg_dir(const crater_cgroups_t *cg,
                  const char *ctl,
                  const char *task,
                  char *buf,
                  size_t n,
                  crater_error_t *err);

/* The value a limit file would get, for tests and docs: e.g.
 * "150000 100000" for v2 cpu.max with 1500m, "max 100000" without a quota.
 * Returns the length, or -1 if buf is too small. */
int crater_cg_format_cpu_max(const crater_cg_limits_t *lim,
                             char *buf,
                             size_t n);
/* v2 io.max line: "8:0 rbps=1 wbps=max riops=3 wiops=4" (0 -> max). */
int crater_cg_format_io_max(const crater_cg_io_t *io, char *buf, size_t n);

/* The ioProfile table (doc/agent.md): fill *out for device major:minor.
 * DEFAULT resolves from the workload (training/batch -> training,
 * inference -> inference, interactive -> none). Returns 1 when *out holds
 * limits, 0 for none. */
int crater_cg_io_profile(crater_io_profile_t profile,
                         crater_workload_t workload,
                         uint32_t major,
                         uint32_t minor,
                         crater_cg_io_t *out);

/* The whole disk (major:minor) holding path, for io limits: a partition
 * maps to its disk through /sys/dev/block. CRATER_EUNAVAIL when path is not
 * on a block device (tmpfs, overlayfs, NFS). */
int crater_cg_disk_of_path(const char *path,
                           uint32_t *major,
                           uint32_t *minor,
                           crater_error_t *err);

/* Pure parsers (exported for tests); errors name "name:line". */
int crater_cg_parse_procs(const char *name,
                          const char *text,
                          pid_t *pids,
                          size_t max,
                          size_t *n,
                          crater_error_t *err);
/* The value of `key` in a flat-keyed file ("oom_kill 3\n..."): memory.events
 * and v1 memory.oom_control; CRATER_ENOENT when the key is absent. */
int crater_cg_parse_keyed(const char *name,
                          const char *text,
                          const char *key,
                          uint64_t *value,
                          crater_error_t *err);

#endif /* CRATER_CGROUP_H */
