/* replay.h - real-time replay: jobs arrive, wait in the queue, run for
 * their duration and leave, on a simulated clock, through the same
 * scheduler core the control plane uses (sched.h) and the same queue
 * order (queue.h).
 *
 * The driver is event-driven: a binary heap of departures merged with
 * the arrivals sorted by submit time; the clock jumps from one event to
 * the next, there is no wall clock. At every event the scheduling pass
 * craterd runs (pass.h) decides: the pending jobs in crater_queue_order()
 * order (priority class, then age) after a departure, only the new ones
 * otherwise; a job that does not fit does not block the ones behind it
 * (backfill). A job that fits nowhere gets a preemption plan when
 * preemption is on (crater_sched_plan_preemption(): the cheapest set of
 * lower-priority preemptible victims); the plan is executed at once
 * (victims released and requeued with their remaining runtime, i.e. as
 * if they had checkpointed) and the job placed. With opts.backfill the
 * first job that fits nowhere and gets no plan (the head) also gets a
 * reservation (reserve.h, from the running jobs' time limits) that later
 * jobs of its priority or lower must not delay (EASY backfill, as
 * craterd).
 *
 * Utilisation is integrated exactly over the piecewise-constant
 * allocation: util = allocated resource-time / capacity-time.
 *
 * Ownership: jobs are caller-owned and borrowed for the run (their
 * requests' borrowed pointers must stay valid). The result owns its
 * arrays; free them with crater_replay_result_clear().
 */
#ifndef CRATER_REPLAY_H
#define CRATER_REPLAY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crater/doc.h"
#include "crater/error.h"
#include "crater/kb.h"
#include "crater/model.h"
#include "crater/sched.h"
#include "crater/sim.h"

typedef enum crater_replay_policy {
    CRATER_REPLAY_K8S_DEFAULT, /* whole GPUs, least allocated, no preemption */
    CRATER_REPLAY_CRATER,      /* default config and weights, slices,
                                  preemption */
} crater_replay_policy_t;

/* Priority classes of the replay, from QoS: LS and Guaranteed are high
 * (queue class "high", 1000), Burstable normal (0), BE low (-1000) and
 * preemptible. */
typedef enum crater_replay_class {
    CRATER_REPLAY_HIGH,
    CRATER_REPLAY_NORMAL,
    CRATER_REPLAY_LOW,
    CRATER_REPLAY_NCLASS
} crater_replay_class_t;

typedef struct crater_replay_job {
    uint64_t submit_ms;
    uint64_t runtime_ms;  /* > 0 */
    crater_request_t req; /* one replica; priority/preemptible are set by
                             crater_replay_job_class() */
    crater_replay_class_t cls;
    uint32_t gpu_milli;     /* GPU share the job asked for, in 1/1000 GPU
                               (num_gpu x gpu_milli); for "requested"
                               utilisation */
    uint64_t time_limit_ms; /* the job's timeLimit; 0 = none (unbounded).
                               A run is cut at it. */
    /* Non-NULL: the job is already running when it arrives (`crater sim
     * whatif`'s snapshot): it is committed on this placement at submit_ms
     * without going through the queue, as craterd holds a running job,
     * and counts no wait. Borrowed for the run. */
    const crater_placement_t *pin;
    /* Idle profile: the last idle_tail_ms of runtime_ms hold the job's
     * GPUs without using them (a finished run waiting on a person, an
     * open notebook); 0 = busy to the end. See opts.idle_reclaim_ms. */
    uint64_t idle_tail_ms;
} crater_replay_job_t;

/* Averages over one sample interval [t_ms, t_ms + sample_ms). */
typedef struct crater_replay_sample {
    uint64_t t_ms;
    double gpu_alloc; /* fraction of GPUs held by placements */
    double gpu_req;   /* fraction of GPU capacity jobs asked for */
    double cpu, mem;  /* fraction of CPU / memory capacity allocated */
    double pending;   /* mean number of pending jobs */
} crater_replay_sample_t;

typedef struct crater_replay_opts {
    bool preempt; /* plan preemptions for jobs that fit nowhere */
    /* EASY backfill (reserve.h): the first job of a pass that does not
     * fit gets a reservation from the running jobs' time limits, and
     * later jobs start only when they cannot delay it. Off: every job
     * that fits starts (greedy, as kube-scheduler). With no job holding
     * a time limit the two are the same. */
    bool backfill;
    uint64_t sample_ms; /* utilisation sample interval; 0: 1/300 of the
                           arrival window */
    /* The nodes s was built from, for CPU and memory capacity (the core
     * keeps no copy of them); NULL: CPU and memory utilisation are 0. */
    const crater_cluster_t *cluster;
    /* Crater's typical tasks learned from the arrivals as craterd learns
     * them from submissions (typhist.h): each arriving job is observed,
     * and installed into s when it moved enough. NULL: s keeps whatever
     * distribution it has. Borrowed. */
    struct crater_typhist *learn;
    /* Called every few thousand events; may be NULL. */
    void (*progress)(void *arg, size_t done, size_t total);
    void *progress_arg;
    /* Called when job (index into jobs) starts a run on p at t_ms, in
     * decision order; may be NULL. For differential tests (test_pass). */
    void (*on_start)(void *arg,
                     size_t job,
                     const crater_placement_t *p,
                     uint64_t t_ms);
    void *on_start_arg;
    /* Called when job's run ends at t_ms, whatever the reason (completed,
     * idle-reclaimed, evicted by a preemption, stopped at the horizon),
     * after its charges left the core; may be NULL. Every on_start is
     * followed by exactly one on_end. `crater sim util` integrates the
     * measured utilisation of the node between the two. */
    void (*on_end)(void *arg, size_t job, uint64_t t_ms);
    void *on_end_arg;
    /* Stop at this time (0: run until every job ended or can never
     * start): jobs still running are released from the core, jobs still
     * pending count as never started, utilisation is over [first submit,
     * horizon]. */
    uint64_t horizon_ms;
    /* Called after each event's scheduling pass with the core as the
     * pass left it and the allocation at that instant (now->pending: the
     * jobs still queued); may be NULL. `crater sim whatif` measures the
     * allocation and fragmentation of "now" there. */
    void (*after_pass)(void *arg,
                       const crater_sched_t *s,
                       const crater_replay_sample_t *now);
    void *after_pass_arg;
    /* Idle-GPU reclaim as craterd does it (scheduler.idleGpuWindow +
     * idleGpuGrace, doc/scheduling.md): a job whose idle tail is longer
     * is reclaimed this long into it, and its run ends there (its work
     * was done: the requeued attempt would resume from its checkpoint
     * with nothing left). 0 = off. */
    uint64_t idle_reclaim_ms;
} crater_replay_opts_t;

typedef struct crater_replay_stats {
    size_t jobs, started, completed;
    double wait_p50, wait_p99, wait_mean, wait_max; /* seconds */
    double jct_p50, jct_p99, jct_mean;              /* seconds */
} crater_replay_stats_t;

typedef struct crater_replay_result {
    size_t jobs;          /* jobs given */
    size_t completed;     /* ran to the end */
    size_t never_started; /* still pending when nothing else could
                             happen: they fit no node even when empty */
    size_t preemptions;   /* victims evicted (a job may count twice) */
    size_t events, place_calls, plan_calls;
    double gpus, cpu_cores, mem_gib; /* cluster capacity */
    uint64_t t_first_ms, t_last_submit_ms, t_end_ms;
    /* Time-weighted utilisation over the arrival window [first submit,
     * last submit] and over the whole run [first submit, end]. */
    double util_gpu_alloc, util_gpu_req, util_cpu, util_mem;
    double util_gpu_alloc_all, util_gpu_req_all;
    /* GPU-time held and busy (held less the idle tails the jobs held),
     * over the whole run, and the jobs idle reclaim ended */
    double util_gpu_busy_all;
    size_t idle_reclaims;
    crater_replay_stats_t cls[CRATER_REPLAY_NCLASS], all;
    crater_replay_stats_t multi_gpu;      /* jobs asking for 2 or more GPUs */
    double *wait_s[CRATER_REPLAY_NCLASS]; /* sorted waits, seconds */
    size_t nwait[CRATER_REPLAY_NCLASS];
    crater_replay_sample_t *samples;
    size_t nsamples;
    uint64_t sample_ms;
} crater_replay_result_t;

/* "k8s-default" / "crater". */
const char *crater_replay_policy_name(crater_replay_policy_t p);
/* Parse a policy name; CRATER_EINVAL listing the names. */
int crater_replay_policy_parse(const char *name,
                               crater_replay_policy_t *out,
                               crater_error_t *err);
/* "high", "normal", "low". */
const char *crater_replay_class_name(crater_replay_class_t c);
crater_replay_class_t crater_replay_class_of_qos(crater_qos_t q);

/* A scheduler for policy p over cluster c. milli != 0: GPU memory is in
 * units of 1/1000 GPU (crater_openb_cluster(..., milli=1)), so the GPU
 * context overhead is set to 0 to keep shares exact. k8s-default sets the
 * plugin weights to joint = 1, everything else 0. Caller destroys. */
crater_sched_t *crater_replay_sched_create(const crater_cluster_t *c,
                                           const crater_kb_t *kb,
                                           crater_replay_policy_t p,
                                           int milli,
                                           crater_error_t *err);

/* Set job->cls and the request's priority / preemptible flag for policy p
 * (k8s-default: nothing preemptible, and a GPU slice becomes one whole
 * GPU). */
void crater_replay_job_class(crater_replay_job_t *job,
                             crater_replay_class_t cls,
                             crater_replay_policy_t p);

/* Replay jobs from an openb pod list (milli mode requests via
 * crater_openb_request). Pods that never ran (no scheduled or deletion
 * time, or deletion before scheduling) are skipped and counted in
 * *skipped. Times are shifted so that the first pod arrives at 0. *jobs
 * is caller-owned (free()). */
int crater_replay_jobs_from_trace(const crater_sched_t *s,
                                  const crater_trace_pod_t *pods,
                                  size_t n,
                                  crater_replay_policy_t p,
                                  crater_replay_job_t **jobs,
                                  size_t *njobs,
                                  size_t *skipped,
                                  crater_error_t *err);

/* Run the replay. s must hold no tasks with ids 1..njobs. On success s
 * is left empty again (every job either completed or never started) and
 * res is filled (clear it with crater_replay_result_clear()). On error
 * res is cleared. Errors: CRATER_EINVAL for a job with runtime 0,
 * CRATER_ENOMEM, or the core's error. */
int crater_replay_run(crater_sched_t *s,
                      const crater_replay_job_t *jobs,
                      size_t njobs,
                      const crater_replay_opts_t *opts,
                      crater_replay_result_t *res,
                      crater_error_t *err);

void crater_replay_result_clear(crater_replay_result_t *res);

/* Offered GPU load of jobs on a cluster of gpus GPUs: the GPU-time they
 * ask for (gpu_milli / 1000 x runtime) over gpus x the arrival window
 * (first to last submit). 0 when the window or gpus is 0. */
double crater_replay_offered_load(const crater_replay_job_t *jobs,
                                  size_t n,
                                  double gpus);
/* Compress time between arrivals by factor (> 0): submit_ms becomes
 * first + (submit_ms - first) / factor, runtimes unchanged, so the
 * offered load is multiplied by factor. Used to replay a sparse trace at
 * a chosen load (`--load`). */
void crater_replay_compress(crater_replay_job_t *jobs, size_t n, double factor);

/* Summary as JSON (no samples unless with_samples). New reference; NULL
 * on ENOMEM. */
json_t *crater_replay_result_json(const crater_replay_result_t *res,
                                  bool with_samples);

/* ---- synthetic workloads (synth.c) --------------------------------------
 *
 * `--synthetic nodes=10000,jobs=1000000,mix=openb`: a cluster of `nodes`
 * nodes drawn (with replacement, uniformly over rows, so in the trace's
 * proportions) from the openb GPU node list, and `jobs` jobs whose shapes
 * (cpu, memory, GPUs, GPU share, gpu_spec, QoS) are drawn from the openb
 * default pod list. mix=builtin (or mix=openb when the data is absent,
 * which the caller should report) uses small built-in tables with about
 * the same proportions. Arrivals are a Poisson process whose rate makes
 * the offered GPU load (rate x mean GPU demand x mean runtime / GPUs)
 * equal `load`; runtimes are exponential (dist=exp, the default) or
 * lognormal with sigma 1 (dist=lognormal, heavier tail), with mean
 * `runtime`, at least 1 s. Everything is drawn from one seeded PRNG
 * (xoshiro256**), so a spec and seed give the same workload everywhere.
 */
typedef struct crater_synth_spec {
    uint64_t nodes, jobs;
    bool builtin;        /* mix=builtin */
    uint64_t seed;       /* default 1 */
    double load;         /* default 0.9 */
    uint64_t runtime_ms; /* mean; default 1h */
    bool lognormal;      /* dist=lognormal */
    /* idle profile: share of jobs with an idle tail (idle=, default 0),
     * the share of such a job's runtime it is (idletail=, default 0.5),
     * and idle-GPU reclaim's window + grace (idlereclaim=, default 0:
     * off; the replay's opts.idle_reclaim_ms) */
    double idle, idle_tail;
    uint64_t idle_reclaim_ms;
} crater_synth_spec_t;

/* Parse "key=value,..." (keys nodes, jobs, mix, seed, load, runtime,
 * dist, idle, idletail, idlereclaim; nodes and jobs required). Errors name the
 * key: CRATER_EINVAL "synthetic.nodes: 'x' is not a positive integer". */
int crater_synth_parse(const char *text,
                       crater_synth_spec_t *out,
                       crater_error_t *err);

/* The node and pod mixes to draw from: the openb lists under dir (NULL or
 * absent files with mix=openb: the built-in tables, *builtin set true). */
typedef struct crater_synth_mix {
    crater_trace_node_t *nodes;
    size_t nnodes;
    crater_trace_pod_t *pods;
    size_t npods;
    bool builtin;
} crater_synth_mix_t;

int crater_synth_mix_load(const crater_synth_spec_t *sp,
                          const char *dir,
                          crater_synth_mix_t *mix,
                          crater_error_t *err);
void crater_synth_mix_clear(crater_synth_mix_t *mix);

/* sp->nodes trace nodes named synth-node-NNNNNN. Caller frees with
 * crater_trace_nodes_free(). */
int crater_synth_nodes(const crater_synth_spec_t *sp,
                       const crater_synth_mix_t *mix,
                       crater_trace_node_t **nodes,
                       crater_error_t *err);

/* sp->jobs replay jobs for s (a milli-mode cluster of the synthetic
 * nodes) under policy p, sorted by submit time. *jobs is caller-owned
 * (free()). Pod shapes that no node type of the cluster could ever host
 * are still generated: the replay reports them as never started. */
int crater_synth_jobs(const crater_synth_spec_t *sp,
                      const crater_synth_mix_t *mix,
                      const crater_sched_t *s,
                      crater_replay_policy_t p,
                      crater_replay_job_t **jobs,
                      crater_error_t *err);

/* ---- job lists (joblist.c) ------------------------------------------------
 *
 * A YAML or JSON document
 *   kind: JobList
 *   jobs:
 *     - submit: 10s        # offset from the start of the replay
 *       duration: 1h       # run time once started
 *       priorityClass: high   # optional: high | normal | low (default
 *                             # from the spec's priorityClass/priority)
 *       spec: {<a job spec, as for crater submit>}
 * Each spec is decoded with crater_jobspec_decode() and compiled with
 * crater_request_from_spec(); errors carry file:line and the field path
 * ("jobs.yaml:7:9: jobs[1].spec.resources.gpu: ..."). A spec with
 * replicas > 1 becomes that many jobs submitted together.
 */
typedef struct crater_joblist crater_joblist_t;

/* Load and decode path. Caller frees with crater_joblist_destroy(). */
int crater_joblist_load(const char *path,
                        crater_joblist_t **out,
                        crater_error_t *err);
/* Decode an already loaded document (doc's document 0). */
int crater_joblist_decode(const crater_doc_t *doc,
                          crater_joblist_t **out,
                          crater_error_t *err);
void crater_joblist_destroy(crater_joblist_t *jl);
size_t crater_joblist_count(const crater_joblist_t *jl);

/* Replay jobs for s under policy p. The requests borrow the list's specs:
 * keep jl alive while the jobs are used. *jobs caller-owned (free()). */
int crater_joblist_jobs(const crater_joblist_t *jl,
                        const crater_sched_t *s,
                        crater_replay_policy_t p,
                        crater_replay_job_t **jobs,
                        size_t *njobs,
                        crater_error_t *err);

#endif /* CRATER_REPLAY_H */
