/* internal.h - the agent's state, shared by src/agent/agent.c (register,
 * work, heartbeat), src/agent/report.c (events and logs),
 * src/agent/task.c (running tasks) and src/agent/taskstate.c (task records
 * on disk, adoption). Not a public header.
 *
 * a->mu guards the task table; each thread has its own HTTP client. Only
 * the log thread removes tasks (once their exit was acknowledged and their
 * output shipped), so it may read a task's immutable fields and its own
 * log offsets without the lock while it ships.
 */
#ifndef CRATER_AGENT_INTERNAL_H
#define CRATER_AGENT_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/agent.h"
#include "agent/cgroup.h"
#include "agent/nvml.h"
#include "agent/sampler.h"
#include "crater/client.h"
#include "crater/model.h"
#include "crater/proto.h"

/* Spare task directories an agent keeps at most (spare.c). */
#define SPARE_MAX 1024
/* Spares of each kind made ahead when agent.spareTasks is not set. */
#define SPARE_RESERVE 64
/* A pool of emptied directories DATA/<sub>/<n> (spare.c). */
typedef struct spool {
    const char *sub;          /* "spare" or "spare-work" */
    unsigned slot[SPARE_MAX]; /* <n> ready to take */
    size_t n, giving;         /* giving: slots reserved, being renamed */
    unsigned next;            /* the next <n> (wraps) */
    bool on;                  /* false: keeps nothing */
} spool_t;
/* Finished tasks' cgroups an agent keeps at most (cgpool.c). */
#define CGPOOL_MAX 128
#define AGENT_NUMA_CACHE 16 /* NUMA nodes whose cpulist is kept (task.c) */
#define AGENT_CKQ_MAX 8     /* unsent checkpoint reports kept per task */

typedef struct notice_srv notice_srv_t;

/* A kept cgroup and the limits last written to it (cgpool.c). */
typedef struct cgpool_ent {
    char name[64];
    crater_cg_limits_t lim;
} cgpool_ent_t;

typedef enum atask_state {
    AT_RUNNING,
    AT_EXITED, /* exit status known; final report not yet acknowledged */
} atask_state_t;

typedef struct atask {
    char *job;
    uint32_t attempt;
    uint32_t replica;          /* of a multi-replica job; 0 = the first */
    char cg[64];               /* cgroup name: "job-<id>-<attempt>-<instance>"
                                  ("job-<id>-<attempt>-r<replica>-<instance>"),
                                  or a kept one's "pool-<hash>-<n>" (cgpool.c) */
    bool cg_pooled;            /* cg came from cgpool_take(): may be kept */
    crater_cg_limits_t cg_lim; /* its limits (cpuset fields NULL) */
    pid_t pid;                 /* the task (its process group) */
    pid_t shim;          /* its supervisor: waits for it, writes dir/exit */
    uint64_t shim_start; /* the shim's start time (/proc/PID/stat field 22):
                            a reused pid is not taken for it */
    bool shim_child;     /* the shim is this agent's child: reap it */
    bool pid_wait;       /* spawned; pid_fd brings its pid (task.c) */
    bool exit_watch;     /* pid_fd read, kept open: it ends when the shim
                            does (after its exit file), waking sup_main */
    int pid_fd;
    bool adopted;     /* left running by an earlier agent */
    char *dir;        /* DATA/tasks/<job>.<attempt>[.r<replica>]:
                         task.json, exit */
    char *workdir;    /* the default working directory made for it */
    bool switch_user; /* runs as uid/gid (the agent is root) */
    uid_t uid;        /* the tenant's task user, or agent.taskUser */
    gid_t gid;
    atask_state_t state;
    int exit_code, signal;
    bool oom;
    bool stop_requested;
    bool term_sent; /* SIGTERM reached its process group */
    bool killed;
    int64_t started_ms, ended_ms; /* this machine's clock */
    int64_t kill_at_ms; /* SIGKILL the cgroup at this time; 0 = none */
    /* time limit (timelimit.c): stop at limit_at_boot_ms on the boot
     * clock (CLOCK_BOOTTIME) with grace_ms; 0 = no limit */
    uint64_t time_limit_ms, grace_ms;
    int64_t limit_at_boot_ms;
    bool limit_hit; /* stopped for its time limit (error says so) */
    /* reporting: events acknowledged by craterd */
    bool start_sent, exit_sent;
    /* logs (the log thread's): bytes shipped, size at exit, done */
    char *log_path[2]; /* stdout, stderr */
    uint64_t log_sent[2];
    uint64_t log_final[2];
    bool log_done[2];
    bool log_resync;      /* adopted: take log_from from register */
    uint64_t log_from[2]; /* what craterd holds (register answer) */
    uint64_t mem_limit;
    uint64_t req_cpu_milli; /* requested (synthetic samples) */
    /* synthetic samples: the SM utilisation and memory activity its GPUs
     * read, from the task's env CRATER_SYNTHETIC_GPU_UTIL (a fraction;
     * tests make a job look idle with it); unset: 0.9 */
    bool synth_gpu_set;
    double synth_gpu_util;
    uint32_t ngpus;
    uint32_t gpu[CRATER_MAX_GPUS_PER_NODE]; /* local GPU indices */
    uint64_t gpu_bytes[CRATER_MAX_GPUS_PER_NODE];
    uint64_t cpu_ns_prev;
    int64_t cpu_ms_prev;
    double cpu_millis; /* last measured CPU use */
    uint64_t mem_bytes;
    char *error;       /* could not start, or killed by the watchdog */
    char *slice_path;  /* /dev/shm slice file of the interposer, or NULL */
    bool watch;        /* the GPU watchdog checks this task */
    unsigned strikes;  /* consecutive watchdog checks over the slice */
    char mig_uuid[96]; /* isolation: mig: the MIG device it runs on, or "" */
    /* checkpoints (ckenv.c, notice.c): the task's listening socket
     * (abstract name) until the notice thread takes it over
     * (notice_fd_held: t still owns notice_fd) */
    int notice_fd;
    bool notice_fd_held;
    char notice_name[48];         /* "crater-<32 hex>" (no '@'), or "": kept in
                                     task.json so an adoption binds it again */
    crater_proto_notice_t notice; /* why it is being stopped; NONE */
    bool notice_acked;            /* the task acknowledged the notice */
    /* reports for craterd, oldest first, sent by the event thread */
    crater_proto_ckpt_t ckq[AGENT_CKQ_MAX];
    unsigned nckq;
    uint64_t progress_step;
    bool progress_pending;
    /* containers (ctrtask.c): its container's name and image, or NULL for
     * a bare task; kept in task.json so an adoption knows it */
    char *ctr;
    char *ctr_image;
    /* readiness (probe.c): a service replica's command, or NULL; its
       last answer, whether there is one, and whether craterd has it */
    struct probe *probe;
    bool ready, ready_known, ready_pending;
} atask_t;

/* The container runtime this agent drives, found at its start
 * (ctrtask.c); one per process, shared by `crater up`'s agents. */
typedef struct ctr_host {
    char podman[256]; /* podman's path */
    char runtime[16]; /* OCI runtime for --runtime, or "": podman's */
    bool init;        /* catatonit is there: --init */
} ctr_host_t;

struct crater_agent {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    int sup_wake[2]; /* a pipe: new tasks for sup_main to watch (task.c) */
    bool stopping;
    pthread_t work_thread, sup_thread, ev_thread, log_thread, notice_thread,
        probe_thread, spare_thread;
    pthread_cond_t probe_wake; /* probe.c: a probe was added */
    size_t nthreads;           /* started, in the order of start_threads() */
    notice_srv_t *notice_srv;  /* the task sockets' server (notice.c) */

    char *server, *token, *data_dir;
    const crater_config_t *cfg;
    uint64_t stop_grace_ms;
    crater_node_t node; /* hardware model (owned) */
    json_t *hw;         /* hardware document sent at register */
    bool synthetic;     /* samples: synthetic */

    crater_client_t *work_client; /* work thread only */
    /* task.c, work thread only: each NUMA node's cpulist as read once
       ("" when it could not be) */
    char numa_cpus[AGENT_NUMA_CACHE][64];
    bool numa_read[AGENT_NUMA_CACHE];
    crater_client_t *sup_client; /* supervisor thread only */
    crater_client_t *ev_client;  /* event thread only */
    crater_client_t *log_client; /* log thread only */
    pthread_cond_t ev_wake;      /* an event to report */
    pthread_cond_t log_wake;     /* output to ship */
    crater_cgroups_t *cg;
    crater_sampler_t *sampler;
    crater_nvml_t *nvml;
    /* What a CUDA context costs on each GPU, measured at start
     * (ctxprobe.c); 0 = not measured: scheduler.gpuContextOverhead. */
    uint64_t ctx_overhead[CRATER_MAX_GPUS_PER_NODE];

    uint64_t seq;      /* work channel position */
    uint32_t instance; /* random per start: task cgroups of two agents
                          (or two test clusters) on one machine never
                          share a name */
    bool need_register;
    unsigned reg_switches; /* work_client's server moves at the register */
    uint64_t hb_interval_ms;
    int64_t next_hb_ms;
    bool hb_now; /* a task finished: heartbeat at once */

    uid_t uid; /* agent.taskUser: tasks craterd sent no uid for */
    gid_t gid;
    bool switch_user;  /* the agent is root: tasks drop to a task user */
    bool tenant_users; /* agent.tenantUsers: the tenant's uid from craterd */
    bool hide_procs;   /* agent.hideProcesses, and the probe worked */
    int procns_fd;     /* isolate.c: the namespace tasks enter, or -1 */
    int mounts_fd;     /* /proc/self/mounts, polled for changes, or -1 */
    char *work_root;   /* default working directories (make_dirs()) */
    const char *shim_path; /* crater-shim, or NULL: fork a shim */
    int spawn_fd;          /* spawner.c: crater-shim --spawner, or -1 */
    pid_t spawner;

    atask_t **tasks;
    size_t ntasks, captasks;

    /* spare.c: finished tasks' directories kept for the next ones, in
       DATA/spare/<n> (task directories) and DATA/spare-work/<n>
       (working directories); spare_mu guards both pools */
    pthread_mutex_t spare_mu;
    spool_t spare, wspare;
    long wspare_flags; /* inode flags of a new working directory */

    /* cgpool.c: finished tasks' cgroups kept for the next ones */
    pthread_mutex_t cgpool_mu;
    char cg_prefix[40]; /* "pool-<hash of DATA>-<pid>-" */
    cgpool_ent_t cgpool[CGPOOL_MAX];
    size_t ncgpool;
    unsigned cg_next;              /* the next <n> of a new one */
    char cgdoomed[CGPOOL_MAX][64]; /* to remove, not yet gone (EBUSY) */
    size_t ncgdoomed;

    /* ctrtask.c: containers; ctr NULL = none here (jobs with an image are
     * not placed on this node) */
    const ctr_host_t *ctr;
    uint32_t ctr_hash; /* of data_dir: container names and label */
    char *cg_root;     /* the cgroup root and parent the agent opened */
    char *cg_parent;
};

int64_t agent_now_ms(void);

/* ctrtask.c: find podman (root, cgroups, `podman info` works: once per
 * process), set the node's CRATER_LABEL_RUNTIMES and write the CDI spec
 * of its GPUs to DATA/cdi/crater-gpus.json. Never fails the agent: a node
 * without a runtime only refuses images. */
int ctr_setup(crater_agent_t *a, crater_error_t *err);
/* t runs in a container: argv becomes podman's, env its environment
 * (both replaced, caller frees), the task's variables go to a file in
 * t->dir. 0, or -1 with err saying why the task cannot start. */
int ctr_prepare(crater_agent_t *a,
                atask_t *t,
                const crater_proto_task_t *task,
                char ***argv,
                char ***env,
                crater_error_t *err);
/* SIGTERM to t's container (a stop): podman kill; 0, or -1 when there is
 * no container (yet) to signal. */
int ctr_term(crater_agent_t *a, const atask_t *t);
/* SIGKILL t's container (its grace period ended): podman kill. */
void ctr_kill(crater_agent_t *a, const atask_t *t);
/* t's podman exited with status: OOM and image errors set on t, the
 * container removed, the cgroup directories podman made removed. */
void ctr_exited(crater_agent_t *a, atask_t *t, int status);
/* Remove this agent's containers (its label) that no adopted task runs
 * in: what an agent that crashed left (after adoption, before threads). */
void ctr_sweep(crater_agent_t *a);
/* t's scratch volumes removed (its record goes). */
void ctr_cleanup(crater_agent_t *a, const atask_t *t);

/* probe.c: readiness commands of service replicas. */
typedef struct probe probe_t;
/* What the task's start prepared, borrowed: its environment, its
 * cgroup.procs files, its working directory (NULL: the agent's). */
typedef struct probe_exec {
    char *const *envp, *const *procs;
    size_t nprocs;
    const char *dir;
} probe_exec_t;
/* t->probe made from the order's readiness (r->argv set): run as the task
 * (x, t's user; in t's container when it has one); 0, or -1 (no memory). */
int probe_prepare(crater_agent_t *a,
                  atask_t *t,
                  const crater_proto_readiness_t *r,
                  const probe_exec_t *x);
void probe_free(probe_t *p);
void *probe_main(void *arg);

/* spare.c: DATA/spare made, and the spares an earlier agent left taken
 * back (before any thread runs). */
int spare_init(crater_agent_t *a, crater_error_t *err);
/* t's directory (DATA/tasks/..., with its log files) renamed from a
 * spare; false when there is none (then mkdir). */
bool spare_take(crater_agent_t *a, const atask_t *t);
/* t's directory (its exit acknowledged, its output shipped) emptied and
 * kept as a spare; false when the pool is full or a rename failed: then
 * remove it. */
bool spare_give(crater_agent_t *a, const atask_t *t);
/* t's default working directory (t->workdir) kept as a spare when the
 * task left it as it was made (empty, no extended attribute, no inode
 * flag of its own); false otherwise: then remove it. */
bool spare_give_workdir(crater_agent_t *a, const atask_t *t);
/* A kept working directory renamed to path; false when there is none or
 * path exists (then mkdir). */
bool spare_take_workdir(crater_agent_t *a, const char *path);
/* Up to want task directories and want working directories made ahead
 * into the pools (each pool stops at want); stops early when the agent
 * stops or the filesystem refuses. Returns how many were made. */
size_t spare_fill(crater_agent_t *a, size_t want);
/* The thread that fills the pools to agent.spareTasks at SCHED_IDLE, then
 * ends. */
void *spare_main(void *arg);

/* cgpool.c: the kept cgroups of an earlier agent on this DATA removed
 * (adopted tasks' kept), after adoption and before the threads. */
int cgpool_init(crater_agent_t *a, crater_error_t *err);
/* t's cgroup with lim written: a kept one when may_pool and lim is plain
 * (t->cg becomes its name), else crater_cg_create(t->cg). */
int cgpool_take(crater_agent_t *a,
                atask_t *t,
                const crater_cg_limits_t *lim,
                bool may_pool,
                crater_error_t *err);
/* t's cgroup kept for the next task when it may be (cgpool.c); then
 * t->cg is emptied, and true. Callers hold a->mu. */
bool cgpool_keep(crater_agent_t *a, atask_t *t);
/* t's cgroup (its processes gone) kept, or removed unless another task
 * of the table names it. Callers hold a->mu (or run alone). */
void cgpool_give(crater_agent_t *a, atask_t *t);
/* Try again to remove the cgroups that would not go yet (wait: with the
 * usual retries, else one rmdir each). */
void cgpool_retry(crater_agent_t *a, bool wait);
/* Remove every kept cgroup (agent stop). */
void cgpool_close(crater_agent_t *a);

/* report.c: the event and log threads (started by agent.c) */
void *report_events_main(void *arg);
void *report_logs_main(void *arg);
/* Wake the event thread (caller holds a->mu). */
void report_kick(crater_agent_t *a);

/* taskstate.c (callers hold a->mu, or run before the threads) */
/* DATA/tasks/<job>.<attempt>/task.json: what an agent needs to adopt t. */
int taskstate_save(crater_agent_t *a, atask_t *t, crater_error_t *err);
/* Load every task record under DATA/tasks into the task table (adopted):
 * running when its shim still lives, exited when the shim wrote its exit
 * status, failed ("supervisor lost") when neither. Returns the count. */
int taskstate_adopt(crater_agent_t *a);
/* t's exit file, if written: 1 and *status, *ended_ms; 0 when absent. */
int taskstate_exit(const atask_t *t, int *status, int64_t *ended_ms);
/* pid is alive and started at start (clock ticks since boot); start 0 =
 * any start. */
bool taskstate_alive(pid_t pid, uint64_t start);
/* The start time of pid (/proc/PID/stat field 22), 0 when unknown. */
uint64_t taskstate_start_of(pid_t pid);
/* Remove t's record and default working directory. */
void taskstate_remove(const atask_t *t);

/* timelimit.c (callers hold a->mu) */
int64_t timelimit_boot_ms(void);
/* Start t's clock: its deadline is now + limit_ms on the boot clock. */
void timelimit_arm(atask_t *t, uint64_t limit_ms, uint64_t grace_ms);
/* Stop t (reason in t->error, record saved) once its deadline passed. */
void timelimit_check(crater_agent_t *a, atask_t *t);
/* Add t's limit to its task record / restore it from one. */
int timelimit_save(const atask_t *t, json_t *record);
void timelimit_load(atask_t *t, json_t *record);

/* task.c (callers hold a->mu) */
atask_t *task_find(crater_agent_t *a,
                   const char *job,
                   uint32_t attempt,
                   uint32_t replica);
/* The suffix replica r adds to a task's file names: "" for replica 0 (the
 * names single-replica jobs always had), else ".r<r>". */
const char *task_rtag(uint32_t replica, char buf[16]);
/* Start the order's task (the order's environment is completed in place:
 * GPU sharing adds its variables). */
int task_start(crater_agent_t *a, crater_proto_task_t *task);
/* An adopted task's readiness command, from craterd's order for it (the
 * register answer): probed again as at its start. */
void task_probe_adopted(crater_agent_t *a,
                        atask_t *t,
                        const crater_proto_task_t *order);
/* The pids of the tasks task_start() spawned, and their records: before
 * any other order touches them, and at the end of each work batch. */
void task_start_finish(crater_agent_t *a);
/* The tasks whose shim has ended, handled now (caller holds a->mu): what
 * the supervisor does when it wakes, for a work batch that holds a->mu. */
void task_reap(crater_agent_t *a);
void task_stop(crater_agent_t *a, atask_t *t, uint64_t grace_ms);
/* Exits, time limits, stop deadlines and usage of the running tasks:
 * every task when full, else only those whose kept pid pipe (exit_watch)
 * is among ready[0..nready) (sup_main's poll). Callers hold a->mu. */
void task_supervise(
    crater_agent_t *a, int64_t now, const int *ready, size_t nready, bool full);
int task_add(crater_agent_t *a, atask_t *t);
/* A file the agent needs (mode R_OK or X_OK): $env, then each path of
 * beside (NULL-terminated) relative to this executable's directory, then
 * build_path (may be NULL). The result is env's value, build_path or buf
 * (n bytes, the caller's); NULL when none is there. */
const char *agent_locate(const char *env,
                         const char *const *beside,
                         const char *build_path,
                         int mode,
                         char *buf,
                         size_t n);
/* crater-shim: $CRATER_SHIM, next to this executable, or the build
 * tree's; NULL when none is there (static storage). */
const char *agent_shim_path(void);
/* a->stopping, read under a->mu (agent.c). */
bool agent_stopping(crater_agent_t *a);
/* spawner.c: crater-shim --spawner started (a->spawn_fd), or -1 with a
 * warning; before the agent's threads. */
void spawner_start(crater_agent_t *a);
/* A shim forked by the spawner with argv (its command line) and envp, wfd
 * as its fd 3 and nsfd (>= 0) as its fd 4: its pid (not the agent's
 * child), or -1: start it another way. Caller holds a->mu. */
pid_t spawner_spawn(
    crater_agent_t *a, char *const *argv, char *const *envp, int wfd, int nsfd);
/* The spawner told to exit, and reaped. */
void spawner_stop(crater_agent_t *a);
/* The messages about t; each borrows t's strings (valid while t lives
 * and a->mu is held). Heartbeat entry of a running task: */
crater_proto_usage_t task_usage(const atask_t *t);
/* Event for craterd: started (pid, start time) or exited (code, signal,
 * OOM, reason, end time, the log sizes at exit). */
crater_proto_event_t task_event(const atask_t *t, bool exit);
/* Register entry: running or exited, pid, start time. */
crater_proto_held_t task_held(const atask_t *t);
void task_free(crater_agent_t *a, atask_t *t);
/* Take t out of the table and free it; an exited task's log files, record
 * and working directory are deleted. */
void task_remove(crater_agent_t *a, atask_t *t);
/* isolate.c: the task user, the data and work directories (0700 and
 * the work root), and whether tasks get a private /proc. At start, before
 * the threads (it forks a probe). */
int agent_isolation_setup(crater_agent_t *a, crater_error_t *err);
/* isolate.c: the fd of the mount namespace with the hidden /proc that
 * tasks enter, made again first when the agent's mounts changed; -1 when
 * there is none (each task then makes its own). Work thread only. */
int agent_procns(crater_agent_t *a);
void agent_isolation_close(crater_agent_t *a);

/* ckenv.c (callers hold a->mu): a task's checkpoint environment. Make
 * the task's checkpoint directory (task->checkpoint_dir, as the task's
 * user) and its socket (an abstract name, t->notice_name), and add
 * CRATER_CHECKPOINT_DIR and
 * CRATER_AGENT_SOCKET to task's environment. A socket that cannot be
 * made is a warning (the task still gets SIGTERM); a checkpoint
 * directory that cannot be made fails the start. */
int ckenv_setup(crater_agent_t *a,
                atask_t *t,
                crater_proto_task_t *task,
                crater_error_t *err);
/* Close t's socket if the notice thread has not taken it; drop its
 * queued reports. */
void ckenv_cleanup(atask_t *t);
/* An adopted task (taskstate.c): listen again on the name its record
 * keeps (t->notice_name), so its CRATER_AGENT_SOCKET works under the new
 * agent. A name that cannot be bound is a warning (SIGTERM only). */
void ckenv_adopt(crater_agent_t *a, atask_t *t);
/* Queue a checkpoint report (moved: *c is zeroed) / a progress step for
 * craterd; the oldest report goes when AGENT_CKQ_MAX are unsent. */
void ckenv_report(crater_agent_t *a, atask_t *t, crater_proto_ckpt_t *c);
void ckenv_progress(crater_agent_t *a, atask_t *t, uint64_t step);

/* notice.c: the thread serving the task sockets. notice_create before
 * the threads start (-1 when out of descriptors), notice_destroy after
 * they stopped (NULL ok). notice_kick (any thread, async-safe): look at
 * the task table again (a task started, stopped or went). */
int notice_create(crater_agent_t *a);
void notice_destroy(crater_agent_t *a);
void *notice_main(void *arg);
void notice_kick(crater_agent_t *a);
/* Record why t is stopped and wake the thread (caller holds a->mu): the
 * task's long poll answers at once. Call before task_stop(). */
void task_notice(crater_agent_t *a, atask_t *t, crater_proto_notice_t why);

/* slice.c (callers hold a->mu) */
const char *agent_gpuslice_lib(void);
int agent_slice_setup(crater_agent_t *a,
                      atask_t *t,
                      crater_proto_task_t *task,
                      crater_error_t *err);
void agent_slice_cleanup(atask_t *t);
bool agent_slice_over(const uint64_t *used,
                      const uint64_t *limit,
                      size_t n,
                      uint64_t overhead,
                      size_t *which);
void agent_watchdog(crater_agent_t *a);
/* isolation: mig: the MIG device for a task that needs need bytes, from
 * the n devices of its GPU (busy[i]: another task runs on migs[i]; NULL =
 * none busy): the smallest free one with at least need bytes, or for a
 * whole-GPU task (whole) the largest free one whatever need says. Ties go
 * to the lower position. Returns the position in migs, or -1. */
int agent_mig_pick(const crater_nvml_mig_t *migs,
                   size_t n,
                   const bool *busy,
                   uint64_t need,
                   bool whole);

/* ctxprobe.c: what a CUDA context costs, measured.
 * agent_ctx_measure: a forked child loads cuda_lib (NULL =
 * "libcuda.so.1") with dlopen, makes the primary context current on the
 * CUDA device whose UUID is gpu_uuid (NVML's "GPU-..." form) and allocates
 * 2 MiB; *bytes = the child's memory on NVML GPU gpu_idx minus those
 * 2 MiB (not below 0). The child is reaped before it returns. Errors:
 * CRATER_ENOENT (cuda_lib cannot be loaded, or no CUDA device has the
 * UUID), CRATER_EIO (a CUDA call failed: its name and code are in the
 * text; the child died), CRATER_EUNAVAIL (not ready within 30 s, or NVML
 * does not list the child), CRATER_EPERM (NVML lists it without memory),
 * CRATER_EINVAL (bad UUID). The child calls dlopen after fork: no other
 * thread of the process may be loading a library then (ctxprobe.c). */
int agent_ctx_measure(crater_nvml_t *nvml,
                      unsigned gpu_idx,
                      const char *gpu_uuid,
                      const char *cuda_lib,
                      uint64_t *bytes,
                      crater_error_t *err);
/* The cache file, a JSON object {"<model>|<driver>": bytes}.
 * agent_ctx_cache_get: 1 and *bytes when path holds key, 0 when the file
 * or the key is absent, -1 when the file is not such an object.
 * agent_ctx_cache_put: set key (other keys kept; an unreadable file is
 * replaced), written to path.tmp and renamed. */
int agent_ctx_cache_get(const char *path,
                        const char *key,
                        uint64_t *bytes,
                        crater_error_t *err);
int agent_ctx_cache_put(const char *path,
                        const char *key,
                        uint64_t bytes,
                        crater_error_t *err);
/* At start, after NVML opens (nothing without a->nvml): fill
 * a->ctx_overhead for every GPU, once per GPU model (measured on its
 * first GPU, or read from DATA_DIR/gpu-context-overhead.json under
 * "<model>|<driver version>"), and log the figure per model, with a
 * warning when it exceeds scheduler.gpuContextOverhead. $CRATER_CUDA_LIB
 * names the CUDA driver to load. Failures are warnings. Returns the
 * number of GPUs with a measured figure. */
int agent_ctx_overheads(crater_agent_t *a);
/* GPU gpu's measured context overhead, else the configured one. */
uint64_t agent_ctx_overhead(const crater_agent_t *a, uint32_t gpu);

#endif /* CRATER_AGENT_INTERNAL_H */
