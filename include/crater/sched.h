/* sched.h - the scheduling core: cluster state, filter -> score -> reserve,
 * commit and release. Pure: no I/O, no wall clock, no globals. The control
 * plane and the simulator drive the same object; time and randomness come
 * in through crater_sched_env_t.
 *
 * Model. Nodes are added from their capability model (crater_node_t) and
 * get dense ids 0..n-1. Each replica of a job is compiled once into a
 * crater_request_t; crater_sched_place() finds the best node for it and
 * fills a crater_placement_t (node, GPU indices with the MiB charged on
 * each, NUMA node, CPU/memory/disk amounts, storage device) without
 * changing anything; crater_sched_commit() charges a placement to the
 * cluster under a task id and crater_sched_release() returns it exactly.
 *
 * GPU memory is accounted in MiB per GPU. A slice request of m MiB costs
 * m + gpuContextOverhead on each GPU it uses; a GPU holds at most
 * maxTasksPerGPU tasks and at most overcommitRatio x its memory in
 * charges; charges beyond physical memory are admitted only while the
 * GPU's *measured* use plus the new slice stays under safetyWatermark x
 * physical. A whole-GPU request needs GPUs with no task at all. With
 * scheduler.gpuShare a profiled whole-GPU request may be made time-shared
 * (crater_sched_share): a slice that joins only other time-shared jobs,
 * their profiled use summed within maxUtil, empty GPUs first.
 *
 * Speed. Nodes in identical state (same static type, same allocation and
 * measurements) give identical filter and score results for any request,
 * so the core groups them into classes and evaluates one representative
 * per class, after a cheap per-class capacity precheck. Ties go to the
 * lowest node id in both the fast path and the brute-force path
 * (crater_sched_place_bruteforce), which must make the same decision;
 * tests and `crater bench sched` compare the two.
 *
 * Ownership: the sched copies what it needs from nodes and config; the
 * request's spec pointer is borrowed for the duration of a call.
 */
#ifndef CRATER_SCHED_H
#define CRATER_SCHED_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crater/config.h"
#include "crater/error.h"
#include "crater/jobspec.h"
#include "crater/kb.h"
#include "crater/model.h"

#define CRATER_SCHED_MAX_NUMA 8
#define CRATER_SCHED_MAX_MODELS               \
    63 /* distinct GPU models in one cluster; \
          bit 63 of a model mask means "none" */
#define CRATER_SCHED_NO_NODE UINT32_MAX

typedef struct crater_sched crater_sched_t;

typedef struct crater_sched_env {
    uint64_t (*now_ms)(void *arg); /* current time, ms */
    uint64_t (*random)(void *arg); /* uniform 64-bit random numbers */
    void *arg;
} crater_sched_env_t;

/* Plugin weights and switches the core reads besides crater_config_t. */
typedef struct crater_sched_weights {
    double joint;    /* Σ w_r (1 - util_r) after placement */
    double packing;  /* fragmentation-aware best fit */
    double topology; /* GPUs on few PCIe switches / NUMA nodes */
    double locality; /* preferred dataset present */
    double low_util; /* measured GPU utilisation low (warm replicas) */
} crater_sched_weights_t;

/* What one replica needs, compiled from a job spec. */
typedef struct crater_request {
    uint32_t gpus;      /* GPUs per replica; 0 = CPU-only */
    uint32_t slice_mib; /* per-GPU slice; 0 = whole GPUs */
    uint64_t cpu_milli;
    uint64_t mem_bytes;
    uint64_t disk_iops;
    uint64_t disk_bw; /* bytes/s */
    crater_iface_t disk_iface;
    uint32_t disk_max_latency_us;
    uint64_t model_mask; /* bit i: sched model id i allowed; 0 = any */
    char *vendor;        /* borrowed; NULL = any */
    uint32_t min_sm;
    uint32_t min_cc;
    uint64_t min_hbm_bw;
    crater_nvlink_req_t nvlink;
    crater_numa_policy_t numa;
    int32_t priority;
    bool preemptible;
    bool prefer_low_util;
    /* A time-shared whole-GPU job (crater_sched_share): its profiled GPU
     * use in thousandths, > 0 only with slice_mib > 0; 0: not shared. */
    uint16_t share_milli;
    /* disk_bw is a preference: where no node has it free, the request is
     * placed without it (crater_sched_place tries it first) */
    bool disk_soft;
    const crater_jobspec_t *spec; /* selectors, tolerations, dataset;
                                     borrowed, may be NULL */
} crater_request_t;

typedef struct crater_placement {
    uint32_t node;
    uint32_t ngpus;
    uint8_t gpu[CRATER_MAX_GPUS_PER_NODE];      /* local GPU indices */
    uint32_t gpu_mib[CRATER_MAX_GPUS_PER_NODE]; /* MiB charged on each */
    bool whole;                                 /* whole GPUs held */
    int numa;                                   /* -1: not pinned */
    uint64_t cpu_milli;
    uint64_t mem_bytes;
    uint64_t numa_cpu[CRATER_SCHED_MAX_NUMA]; /* where cpu_milli is charged */
    uint64_t numa_mem[CRATER_SCHED_MAX_NUMA]; /* where mem_bytes is charged */
    uint64_t disk_iops;
    uint64_t disk_bw;
    int storage; /* index into the node's storage, -1 none */
    /* profiled use (thousandths) charged on each of its GPUs: a
     * time-shared whole-GPU job's slices; 0: none */
    uint16_t share_milli;
    double score;
} crater_placement_t;

/* Measured utilisation of a node, fractions in [0, 1]. */
typedef struct crater_node_util {
    double cpu, mem, disk;
    double gpu[CRATER_MAX_GPUS_PER_NODE];            /* SM utilisation */
    uint32_t gpu_used_mib[CRATER_MAX_GPUS_PER_NODE]; /* measured memory */
    double pcie[CRATER_MAX_GPUS_PER_NODE]; /* per upstream id: bandwidth
                                              use of that PCIe root */
} crater_node_util_t;

/* Create an empty cluster. cfg and kb are copied from / read during the
 * call (kb is used to compile requests: keep it alive as long as the
 * sched). env may be NULL (time 0, fixed seed). NULL on ENOMEM. */
crater_sched_t *crater_sched_create(const crater_config_t *cfg,
                                    const crater_kb_t *kb,
                                    const crater_sched_env_t *env);
void crater_sched_destroy(crater_sched_t *s);

void crater_sched_set_weights(crater_sched_t *s,
                              const crater_sched_weights_t *w);
crater_sched_weights_t crater_sched_get_weights(const crater_sched_t *s);

/* Add a node; returns its id (>= 0) or -1. The node is copied. */
int crater_sched_add_node(crater_sched_t *s,
                          const crater_node_t *node,
                          crater_error_t *err);
uint32_t crater_sched_node_count(const crater_sched_t *s);
const crater_node_t *crater_sched_node(const crater_sched_t *s, uint32_t id);
/* GPUs a placement holds, in GPU-equivalents of its node: a whole GPU
 * counts 1, a slice its MiB over that GPU's real memory (fair share and
 * the simulator's allocation use this one definition). */
double crater_sched_gpus_held(const crater_sched_t *s,
                              const crater_placement_t *p);
/* Live equivalence classes (index.c): the distinct (node type, state)
 * groups a decision may have to evaluate. For benchmarks and metrics. */
uint32_t crater_sched_class_count(const crater_sched_t *s);
/* Node by name; CRATER_SCHED_NO_NODE when unknown. */
uint32_t crater_sched_find_node(const crater_sched_t *s, const char *name);

/* Health: a node that is not ready or is cordoned gets no new work. */
int crater_sched_set_ready(crater_sched_t *s, uint32_t node, bool ready);
int crater_sched_set_cordoned(crater_sched_t *s, uint32_t node, bool cordon);
/* Measured utilisation (from agents; settable in tests). */
int crater_sched_set_util(crater_sched_t *s,
                          uint32_t node,
                          const crater_node_util_t *u);

/* The safety watermark acting: for each GPU of node that is overcommitted
 * (its charges exceed its physical memory) and whose measured memory use
 * (crater_sched_set_util) is above safetyWatermark x physical, the newest
 * task holding a slice of it (latest start, then highest id): the one to
 * stop or requeue before the GPU runs out of memory. Each task once, into
 * out[0..max); returns how many. Changes nothing; the caller acts and
 * asks again with the next measurement (a task it is already stopping
 * stays the newest until it is released). */
uint32_t crater_sched_watermark_victims(const crater_sched_t *s,
                                        uint32_t node,
                                        uint64_t *out,
                                        uint32_t max);

/* Compile one replica of spec into req (req->spec = spec, borrowed).
 * Errors: an unknown GPU model etc., naming the field. */
int crater_request_from_spec(const crater_sched_t *s,
                             const crater_jobspec_t *spec,
                             crater_request_t *req,
                             crater_error_t *err);

/* GPU sharing (scheduler.gpuShare, doc/scheduling.md "GPU sharing"):
 * turn a whole-GPU request into a time-shared one, a slice of
 * peak_mib x (1 + memoryMargin) MiB per GPU carrying its profiled GPU
 * use util (a fraction), so that it may join other time-shared jobs on a
 * GPU while their profiled use adds up to at most maxUtil. The caller
 * passes the job's measured profile (a job without one is never shared).
 * Returns 1 when req was changed; 0 when it stays as it was, with *why
 * (static text; why may be NULL) naming the reason: sharing off, not a
 * whole-GPU request, use at or above maxUtil, or a slice larger than
 * every GPU of the cluster. */
int crater_sched_share(const crater_sched_t *s,
                       crater_request_t *req,
                       double util,
                       uint64_t peak_mib,
                       const char **why);

/* Find the best placement. 0 on success; -1 with CRATER_EUNSCHED when
 * no node fits (see explain.h for why). Changes nothing. err may be NULL:
 * a failure then skips building the explanation (a second scan), for
 * callers such as the simulator that only need the verdict. */
int crater_sched_place(crater_sched_t *s,
                       const crater_request_t *req,
                       crater_placement_t *out,
                       crater_error_t *err);
/* Same decision by scanning every node: the reference for tests and
 * benchmarks. */
int crater_sched_place_bruteforce(crater_sched_t *s,
                                  const crater_request_t *req,
                                  crater_placement_t *out,
                                  crater_error_t *err);

/* Evaluate req on one node only (filters, then the policy's score):
 * 0 with *out filled when it fits, -1 with *why (static text, may be
 * NULL) naming the first filter that refused it. out->score is the
 * policy's score without the first-fit bias (the caller names the nodes,
 * so there is no order to favour). Changes nothing. */
int crater_sched_place_on(crater_sched_t *s,
                          const crater_request_t *req,
                          uint32_t node,
                          crater_placement_t *out,
                          const char **why);

/* Charge p to the cluster as task id (unique, caller-chosen). req gives
 * the priority/preemptibility recorded for the preemption planner. */
int crater_sched_commit(crater_sched_t *s,
                        uint64_t task,
                        const crater_request_t *req,
                        const crater_placement_t *p,
                        crater_error_t *err);
/* Return task's charges exactly; -1 with CRATER_ENOENT if unknown. */
int crater_sched_release(crater_sched_t *s, uint64_t task, crater_error_t *err);
/* Change a placed task's priority and preemptibility in place (an
 * inference replica moving between the warm pool and traffic): its
 * charges stay, the preemption sums follow. -1 with CRATER_ENOENT if
 * unknown, CRATER_ENOMEM (nothing changed). */
int crater_sched_retag(crater_sched_t *s,
                       uint64_t task,
                       int32_t priority,
                       bool preemptible,
                       crater_error_t *err);

/* ---- preemption, gangs, explanations ------------------------------------ */

#define CRATER_PREEMPT_MAX_VICTIMS 32

/* Record that task wrote a checkpoint at time ms (the env clock's scale):
 * work done before it is not lost when the task is preempted. -1 if the
 * task is unknown (like crater_sched_set_ready, no error text). */
int crater_sched_set_task_checkpoint(crater_sched_t *s,
                                     uint64_t task,
                                     uint64_t ms);

/* A preemption plan: release victims[0..nvictims-1], then placement fits.
 * Cost, compared lexicographically: max_priority (highest victim
 * priority), then lost_ms (sum over victims of now - max(start, last
 * checkpoint)), then nvictims. */
typedef struct crater_preempt_plan {
    crater_placement_t placement; /* where req goes once victims are gone */
    uint32_t nvictims;            /* 0: req fits without preemption */
    uint64_t victims[CRATER_PREEMPT_MAX_VICTIMS]; /* task ids, ascending */
    int32_t max_priority; /* highest victim priority; INT32_MIN if none */
    uint64_t lost_ms;
} crater_preempt_plan_t;

/* Find the cheapest set of running preemptible tasks with a priority
 * below req->priority, all on one node, whose release makes req fit
 * there; ties go to the lowest node id. Never picks a non-preemptible
 * task, nor one committed less than scheduler.preemptionMinRuntime ago
 * (env clock): a victim that is back is protected that long. When there
 * is no plan, err says why, counting the running tasks that may not be
 * victims by cause (non-preemptible, priority at or above req's, too
 * young). Does not execute the plan: the cluster state is unchanged on
 * return (the planner releases and re-commits candidates internally,
 * which are exact inverses). When req fits already the plan has no
 * victims and the placement crater_sched_place() would return. -1 with
 * CRATER_EUNSCHED when no plan exists (CRATER_ENOMEM on allocation
 * failure). plan is caller-owned and written only on success. */
int crater_sched_plan_preemption(crater_sched_t *s,
                                 const crater_request_t *req,
                                 crater_preempt_plan_t *plan,
                                 crater_error_t *err);
/* What a failed plan leaves for the next plan of the same request:
 * nodes not touched since (no commit, release, health or checkpoint
 * change) still have no plan, so the next call plans only the nodes
 * touched since. Zeroed: nothing known. */
typedef struct crater_plan_memo {
    uint64_t ver;   /* the sched's node version clock at the failure */
    uint64_t epoch; /* settings epoch (policy, weights, nodes) */
    uint64_t now;   /* env clock at the failure */
} crater_plan_memo_t;

/* crater_sched_plan_preemption() for a caller that plans the same request
 * again and again (pass.c, per request shape): *memo (zeroed the first
 * time) is what the last call for exactly this request left; on return it
 * is set after a failure (CRATER_EUNSCHED) and zeroed otherwise. The
 * result is the same as crater_sched_plan_preemption()'s. The memo is not
 * used with preemptionMinRuntime (a task becomes a candidate with time
 * alone) nor with a policy that breaks ties at random (planning fewer
 * nodes would draw fewer numbers). memo may be NULL. */
int crater_sched_plan_preemption_memo(crater_sched_t *s,
                                      const crater_request_t *req,
                                      crater_plan_memo_t *memo,
                                      crater_preempt_plan_t *plan,
                                      crater_error_t *err);
/* A preemption plan for a gang of replicas copies of req (gang_preempt.c):
 * victims (possibly on several nodes) whose release lets every replica
 * fit, chosen replica by replica with crater_sched_plan_preemption()'s
 * rules (each replica planned on the state where the earlier replicas'
 * victims are released and the earlier replicas committed), or, when
 * that greedy order finds none, the candidates on the nodes where the
 * gang fits once every candidate is released. All or nothing: -1 with
 * CRATER_EUNSCHED (no plan, or more than CRATER_PREEMPT_MAX_VICTIMS
 * victims) and no victim named. On success plan->victims (ascending),
 * max_priority, lost_ms and nvictims cover all replicas, plan->placement
 * is replica 0's and out[] (replicas entries, caller-owned) holds every
 * replica's placement once the victims are gone, to be committed in
 * order under task ids first_task + i. nvictims 0: the gang fits as it
 * is. Task ids first_task .. first_task + replicas - 1 must be unused
 * (the plan commits them tentatively). The cluster state is unchanged on
 * return (ENOMEM while undoing is reported). */
int crater_sched_plan_gang_preemption(crater_sched_t *s,
                                      const crater_request_t *req,
                                      uint32_t replicas,
                                      uint64_t first_task,
                                      crater_preempt_plan_t *plan,
                                      crater_placement_t *out,
                                      crater_error_t *err);
/* The lowest priority of a running preemptible task (INT32_MAX when there
 * is none): a request at or below it can have no victim, whatever its
 * shape. O(tasks). For callers that plan many requests (pass.c). */
int32_t crater_sched_victim_floor(const crater_sched_t *s);

/* Place replicas copies of req all together or not at all. Replica i is
 * placed with crater_sched_place() and COMMITTED under task id
 * first_task + i, so later replicas see the earlier ones; when that
 * greedy pass fails, a bounded, deterministic backtracking search over
 * nodes and each node's GPU sets (gang.c) looks for an arrangement that
 * fits. out[] (replicas entries, caller-owned) receives the
 * placements. On success the replicas
 * stay committed (release them with crater_sched_release()). On failure
 * every replica committed so far is released, the state is as before,
 * and -1 is returned: CRATER_EUNSCHED naming the replica that did not
 * fit and why, or the commit's error (e.g. CRATER_EEXIST for a task id
 * in use), or CRATER_EINVAL for replicas == 0 or task ids that would
 * wrap or include 0. */
int crater_sched_place_gang(crater_sched_t *s,
                            const crater_request_t *req,
                            uint32_t replicas,
                            uint64_t first_task,
                            crater_placement_t *out,
                            crater_error_t *err);
/* The reference for tests: an exhaustive search over every node and GPU
 * set for every replica (exponential: small cases only). Same contract;
 * its error is CRATER_EUNSCHED without a per-replica reason. */
int crater_sched_place_gang_bruteforce(crater_sched_t *s,
                                       const crater_request_t *req,
                                       uint32_t replicas,
                                       uint64_t first_task,
                                       crater_placement_t *out,
                                       crater_error_t *err);

/* Why req fits or does not fit, as JSON: {"nodes": N, "fit": F,
 * "reasons": [{"reason", "nodes", "need", "have", "unit",
 * "closest_node"}...], "message": text}. Reasons cover the nodes that
 * were ruled out (also when req fits elsewhere), most frequent first;
 * need/have/unit appear only for reasons with a quantity (unit is one of
 * "MiB", "millicores", "bytes", "percent", "count"). message is the
 * full text that crater_sched_place() puts in err.text when nothing fits
 * (err.text cuts it with "..." past 159 characters). Changes nothing.
 * Caller must json_decref() the result; NULL on ENOMEM. */
json_t *crater_sched_explain(crater_sched_t *s, const crater_request_t *req);

/* Why placed task sits where it does: {"policy", "nodes", "fit",
 * "chosen": E, "runner_up": E or null, "margin"}, where E is {"node",
 * "fits", "score", "policy_score", "order_bias", "overcommit", "plugins":
 * [{"name", "weight", "score"}...]} (or {"node", "fits": false, "reason"}
 * when the chosen node would no longer take it), evaluated on the cluster
 * as it is now with the task's own charges taken off (req is the task's
 * request). "fit" counts the nodes that would take it; "margin" is the
 * chosen node's score less the runner-up's. The state is unchanged on
 * return. NULL when task is not committed, or on ENOMEM. Caller must
 * json_decref() the result. */
json_t *crater_sched_explain_placed(crater_sched_t *s,
                                    uint64_t task,
                                    const crater_request_t *req);

/* ---- policies ------------------------------------------------------------
 *
 * A policy decides how feasible nodes are ranked and, optionally, which
 * GPUs a request takes inside a node; the filters (what fits) are the
 * same for every policy. "crater" (the default) is the weighted plugin
 * scores of src/sched/plugins and fit.c's GPU choice. The others are the
 * baselines of the FGD paper (USENIX ATC'23), from their published
 * descriptions: "random", "dotprod", "gpuclustering", "gpupacking",
 * "bestfit", "fgd", and "k8s" (Kubernetes-default-like: whole GPUs only,
 * least-allocated spreading). Ties go to the lowest node id (as in the
 * paper's artifact), except for "random", which draws uniformly over the
 * feasible nodes with env.random (the fast path weights each class of
 * identical nodes by its size). All but "random" are deterministic and
 * make the same decision in crater_sched_place() and
 * crater_sched_place_bruteforce(). "crater" and "fgd" use the typical-task
 * distribution set with crater_sched_set_typical(); without one, "crater"
 * is the plugin scores alone. */

/* Select a policy by name. -1 with CRATER_EINVAL naming the known ones.
 * crater_sched_create() starts with cfg->scheduler.policy when it names a
 * policy, else with "crater". */
int crater_sched_set_policy(crater_sched_t *s,
                            const char *name,
                            crater_error_t *err);
const char *crater_sched_policy(const crater_sched_t *s);
/* NULL-terminated list of policy names, default first. */
const char *const *crater_sched_policy_names(void);

/* One "typical" task shape with its share of the workload: FGD measures
 * fragmentation against these (the shapes making up 95% of the tasks). */
typedef struct crater_typical {
    uint64_t cpu_milli;
    uint32_t gpus;       /* 0 = CPU-only */
    uint32_t slice;      /* per-GPU share in GPU memory units; 0 = whole */
    uint64_t model_mask; /* as crater_request_t; 0 = any */
    double weight;       /* shares sum to 1 */
} crater_typical_t;

/* Copy the typical-task distribution (n may be 0 to clear). -1 on
 * ENOMEM. */
int crater_sched_set_typical(crater_sched_t *s,
                             const crater_typical_t *t,
                             size_t n,
                             crater_error_t *err);
/* Expected fragmentation of one node against the typical tasks, in GPU
 * memory units (milli-GPUs in the FGD protocol). */
double crater_sched_node_frag(const crater_sched_t *s, uint32_t node);
/* The room left on each GPU of node (memory units, as charged: milli-GPUs
 * in the FGD protocol) into room[0..max); returns the node's GPU count
 * (0 for an unknown node). */
uint32_t crater_sched_gpu_room(const crater_sched_t *s,
                               uint32_t node,
                               uint32_t *room,
                               size_t max);
/* Free CPU of node in millicores (0 for an unknown node). */
uint64_t crater_sched_cpu_free(const crater_sched_t *s, uint32_t node);

/* Model mask for a list of model names (NULL-terminated; kb aliases
 * resolve as in crater_request_from_spec). Bit 63 alone when none of them
 * is in the cluster. */
int crater_sched_model_mask(const crater_sched_t *s,
                            char *const *models,
                            uint64_t *mask);
/* The sched's id of a model key, -1 when no node has it. */
int crater_sched_model_id(const crater_sched_t *s, const char *key);

#endif /* CRATER_SCHED_H */
