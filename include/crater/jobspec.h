/* jobspec.h - the job spec: what a user submits (YAML or JSON).
 *
 * Field names follow the source documents (workloadType, gracePeriod,
 * ioProfile, dataLocality, warmPoolSize ...); doc/jobspec.md lists every
 * field with its default. All quantities are held in base units: bytes,
 * bytes/second, millicores, milliseconds (durations), IOPS.
 *
 * Lifecycle: crater_jobspec_decode() builds a spec from a document root
 * (after profile expansion, see profile.h), checking types, units and
 * unknown fields; crater_jobspec_validate() checks the semantics that need
 * the knowledge base (contradictions, impossible requests). The caller
 * owns the spec and frees it with crater_jobspec_destroy().
 */
#ifndef CRATER_JOBSPEC_H
#define CRATER_JOBSPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "crater/dec.h"
#include "crater/kb.h"
#include "crater/model.h"

/* Size limits that keep hostile input from exhausting memory. */
#define CRATER_JOB_MAX_ARGS 1024
#define CRATER_JOB_MAX_ARG_LEN 4096
#define CRATER_JOB_MAX_ENV 256
#define CRATER_JOB_MAX_LIST 64 /* models, after, selectors, tolerations */
#define CRATER_ARRAY_MAX 10000 /* elements of one job array */
#define CRATER_ARRAY_MAX_INDEX 9999999
/* The most one job may ask for (validation): far beyond any node, and
 * small enough that sums over 10,000 replicas and a whole cluster's jobs
 * cannot wrap a uint64 (issue 12: a memory request near 2^64 once wrapped
 * a tenant's quota). */
#define CRATER_JOB_MAX_MEMORY (1ull << 50)     /* 1 PiB */
#define CRATER_JOB_MAX_GPU_MEMORY (1ull << 40) /* 1 TiB per GPU */
#define CRATER_JOB_MAX_CPU_MILLI 1000000000ull /* 1,000,000 cores */
#define CRATER_JOB_MAX_REPLICAS 10000
#define CRATER_JOB_MAX_GPUS 64 /* per replica */
/* timeLimit bounds: at least a second (a bare number is seconds), at most
 * a year, so start + limit never wraps. */
#define CRATER_JOB_MIN_TIME_LIMIT_MS 1000ull
#define CRATER_JOB_MAX_TIME_LIMIT_MS (366ull * 24 * 3600 * 1000)

typedef enum crater_workload {
    CRATER_WORKLOAD_TRAINING,
    CRATER_WORKLOAD_INFERENCE,
    CRATER_WORKLOAD_BATCH,
    CRATER_WORKLOAD_INTERACTIVE,
} crater_workload_t;

typedef enum crater_io_profile {
    CRATER_IO_DEFAULT,       /* chosen from workloadType */
    CRATER_IO_TRAINING,      /* high bandwidth, low IOPS */
    CRATER_IO_INFERENCE,     /* low bandwidth, high IOPS */
    CRATER_IO_MODEL_LOADING, /* high IOPS */
    CRATER_IO_NONE,          /* no IO limits */
} crater_io_profile_t;

typedef enum crater_numa_policy {
    CRATER_NUMA_PREFERRED,
    CRATER_NUMA_STRICT,
    CRATER_NUMA_NONE,
} crater_numa_policy_t;

typedef enum crater_locality {
    CRATER_LOCALITY_NONE,
    CRATER_LOCALITY_PREFERRED,
    CRATER_LOCALITY_REQUIRED,
} crater_locality_t;

/* restartPolicy: what a failed attempt (nonzero exit, signal, OOM, a
 * reason from the agent) does. Preemption never counts as a failure. */
typedef enum crater_restart_policy {
    CRATER_RESTART_NEVER,      /* "Never": the job fails */
    CRATER_RESTART_ON_FAILURE, /* "OnFailure": a new attempt, up to
                                  backoffLimit retries */
} crater_restart_policy_t;

#define CRATER_BACKOFF_LIMIT_DEFAULT 6 /* Kubernetes' */
#define CRATER_BACKOFF_LIMIT_MAX 1000

typedef enum crater_deadline_policy {
    CRATER_DEADLINE_SOFT,
    CRATER_DEADLINE_HARD,
} crater_deadline_policy_t;

typedef enum crater_nvlink_req {
    CRATER_NVLINK_ANY,
    CRATER_NVLINK_PREFERRED,
    CRATER_NVLINK_REQUIRED,
} crater_nvlink_req_t;

/* How a GPU-memory slice is enforced on the node (doc/gpu-sharing.md). */
typedef enum crater_gpu_isolation {
    CRATER_GPU_ISO_SLICE, /* the interposer + watchdog (default) */
    CRATER_GPU_ISO_MPS,   /* MPS limits for trusted co-located tasks */
    CRATER_GPU_ISO_MIG,   /* a MIG instance (hard isolation) */
    CRATER_GPU_ISO_NONE,  /* not enforced */
} crater_gpu_isolation_t;

typedef struct crater_gpu_req {
    uint32_t count;        /* GPUs per replica; 0 = CPU-only job */
    uint64_t memory_bytes; /* per-GPU slice; 0 = whole GPUs */
    char **models;         /* allowed models (kb keys); NULL = any */
    char *vendor;          /* NULL = any */
    uint32_t min_sm_count;
    uint32_t min_compute_cap;   /* major*10+minor; 0 = any */
    uint64_t min_hbm_bandwidth; /* bytes/s */
    crater_nvlink_req_t nvlink;
    crater_gpu_isolation_t isolation; /* resources.gpu.isolation */
} crater_gpu_req_t;

typedef struct crater_disk_req {
    uint64_t iops;
    uint64_t bandwidth;      /* bytes/s */
    crater_iface_t iface;    /* CRATER_IFACE_UNKNOWN = any */
    uint32_t max_latency_us; /* 0 = any */
} crater_disk_req_t;

typedef struct crater_resources {
    crater_gpu_req_t gpu;
    uint64_t cpu_milli;
    uint64_t memory_bytes;
    crater_disk_req_t disk;
} crater_resources_t;

typedef struct crater_checkpoint {
    char *dir; /* NULL = no checkpointing */
    uint64_t interval_ms;
    uint64_t incremental_interval_ms;
} crater_checkpoint_t;

typedef struct crater_inference {
    bool enabled; /* an inference: section was given */
    uint32_t port;
    uint32_t min_replicas, max_replicas;
    double target_qps;
    uint32_t warm_pool_size;
    uint32_t max_batch_size;
    uint64_t batch_timeout_ms;
    /* autoscaler (doc/inference.md); 0 = the autoscaler's default */
    double target_concurrency; /* requests in flight per replica */
    uint64_t stable_window_ms, panic_window_ms, scale_down_delay_ms;
    uint64_t zero_grace_ms;
    /* readiness: {command, period, timeout}: a replica is ready while
     * the command exits 0 (run by its agent as the task,
     * doc/inference.md); NULL = the
     * HTTP probe GET /v2/health/ready. argv NULL-terminated, owned. */
    char **ready_cmd;
    uint64_t ready_period_ms, ready_timeout_ms; /* 0 = 1 s, 1 s */
} crater_inference_t;

typedef struct crater_toleration {
    char *key;
    char *value; /* NULL = any value (operator Exists) */
    int effect;  /* crater_taint_effect_t, or -1 = all effects */
} crater_toleration_t;

/* imagePullPolicy (doc/containers.md): IfNotPresent (the default) pulls
 * only an image the node does not hold, Always pulls every start, Never
 * only uses a local one (`podman load`). */
typedef enum crater_pull_policy {
    CRATER_PULL_IF_NOT_PRESENT,
    CRATER_PULL_ALWAYS,
    CRATER_PULL_NEVER,
} crater_pull_policy_t;

/* One entry of volumes: exactly one of host_path (absolute, on the node)
 * and scratch (a name: a directory per job and attempt the agent makes
 * and removes), mounted at mount_path (absolute) in the container. */
typedef struct crater_volume {
    char *host_path;
    char *scratch;
    char *mount_path;
    bool read_only;
} crater_volume_t;

typedef struct crater_jobspec {
    char *name;
    char *tenant; /* default "default" */
    crater_workload_t workload_type;
    bool workload_type_explicit; /* false: inferred from command/image */
    int32_t priority;            /* higher runs first */
    char *priority_class;        /* NULL or a class name from config */
    bool preemptible;
    /* idleReclaim: false: never reclaimed for idle GPUs
     * (scheduler.idleGpuWindow); stored negated so that zero is the
     * default */
    bool no_idle_reclaim;
    uint64_t grace_period_ms;
    /* timeLimit: the agent stops the task this long after it started and
     * the job fails; backfill takes it as the job's longest run time.
     * 0 = none (unbounded). */
    uint64_t time_limit_ms;
    crater_restart_policy_t restart_policy;
    /* failed attempts retried under OnFailure (the next failure fails the
     * job); default CRATER_BACKOFF_LIMIT_DEFAULT; given with Never is an
     * error (backoff_limit_set says it was given) */
    uint32_t backoff_limit;
    bool backoff_limit_set;
    crater_resources_t resources;
    double cpu_limit_multiplier; /* quota = request x this; >= 1 */
    bool cpu_burst;
    crater_io_profile_t io_profile;
    crater_numa_policy_t numa;
    char *dataset; /* dataLocality.dataset */
    crater_locality_t locality;
    crater_checkpoint_t checkpoint;
    int64_t deadline_ms; /* Unix epoch ms; 0 = none */
    crater_deadline_policy_t deadline_policy;
    double cost_cap; /* 0 = none */
    char *profile;   /* "name@version" as resolved, or NULL */
    uint32_t replicas;
    bool gang;
    char **after; /* job names this one waits for; may be NULL */
    crater_inference_t inference;
    char **command; /* argv, NULL-terminated; may be NULL */
    /* image: the task runs in this OCI image under the node's container
     * runtime (doc/containers.md); NULL = on the host. Also used for
     * workloadType inference. */
    char *image;
    crater_pull_policy_t image_pull;
    crater_volume_t *volumes; /* only with image */
    size_t nvolumes;
    crater_kv_t *env;
    size_t nenv;
    char *workdir;
    crater_kv_t *selector; /* nodeSelector labels */
    size_t nselector;
    crater_toleration_t *tolerations;
    size_t ntolerations;
    /* array: "0-999%10": one job per index (sorted, distinct), at most
     * array_parallelism of them holding resources at once (0 = no cap).
     * narray 0 = not an array. */
    uint32_t *array;
    size_t narray;
    uint32_t array_parallelism;
} crater_jobspec_t;

/* Parse an array expression: indexes "N", "N-M" or "N-M:STEP" separated
 * by commas (0 <= N <= M <= CRATER_ARRAY_MAX_INDEX), then optionally
 * "%P" (P >= 1) to cap how many elements run at once. The indexes come
 * out sorted and distinct, at most CRATER_ARRAY_MAX. *idx is malloc'd.
 * Errors say what is wrong ("'5-2': the range ends before it starts"). */
int crater_array_parse(const char *s,
                       uint32_t **idx,
                       size_t *n,
                       uint32_t *parallelism,
                       crater_error_t *err);
/* The canonical text of idx[0..n-1] (+ "%P" when parallelism > 0), with
 * runs of consecutive indexes as ranges ("0-999%10", "1,3,5-7").
 * malloc'd; NULL on ENOMEM. */
char *crater_array_format(const uint32_t *idx, size_t n, uint32_t parallelism);

/* A spec holding every default. NULL on allocation failure. */
crater_jobspec_t *crater_jobspec_create(void);
void crater_jobspec_destroy(crater_jobspec_t *spec);

/* Decode a job document root. On error returns -1, err (via d) names the
 * field path and line, and *out is untouched. */
int crater_jobspec_decode(crater_dec_t *d,
                          json_t *root,
                          crater_jobspec_t **out);

/* Semantic checks: contradictions (gang with replicas 0, minReplicas >
 * maxReplicas, whole-GPU fields on a slice ...) and impossible requests (a
 * slice larger than every GPU model the job is constrained to, an unknown
 * model, more GPUs than any node could hold). kb may be NULL (skips the
 * model checks). Errors name the field path. */
int crater_jobspec_validate(const crater_jobspec_t *spec,
                            const crater_kb_t *kb,
                            crater_error_t *err);

/* The normalised document: every field, every quantity in base units.
 * Decoding it yields an equal spec. New reference; NULL on ENOMEM. */
json_t *crater_jobspec_encode(const crater_jobspec_t *spec);
/* The same for YAML output (`crater validate -o yaml`): sizes are written
 * "21474836480B", not as bare integers, because in YAML a size without a
 * unit is refused (a person may have meant MiB). New reference. */
json_t *crater_jobspec_encode_yaml(const crater_jobspec_t *spec);

/* workloadType from argv/image: torchrun, deepspeed, train -> training;
 * vllm, triton, serve, --port -> inference; otherwise batch. */
crater_workload_t crater_workload_infer(char *const *command,
                                        const char *image);

const char *crater_workload_name(crater_workload_t w);
/* Free n volumes and their strings (v may be NULL). */
void crater_volumes_free(crater_volume_t *v, size_t n);
/* Deep copy of n volumes into *out (NULL when n is 0): 0, or -1 on
 * ENOMEM with *out NULL. Caller frees with crater_volumes_free(). */
int crater_volumes_dup(const crater_volume_t *v,
                       size_t n,
                       crater_volume_t **out);
/* "IfNotPresent", "Always", "Never"; "?" for anything else. Static. */
const char *crater_pull_policy_name(crater_pull_policy_t p);

#endif /* CRATER_JOBSPEC_H */
