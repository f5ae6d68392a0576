/* proto.h - the agent protocol's messages as C types, with one encoder and
 * one strict decoder per message, shared by craterd and crater-agent
 * (doc/api.md "Agent protocol", doc/agent.md).
 *
 * Messages: the task order (what an agent needs to run one attempt of a
 * job; also each entry of the register answer, there with the log bytes
 * craterd holds), the stop and resync orders, the work response (the
 * long poll's answer: a sequence number and numbered items), the task
 * events (started, exited), the register request and its answer, and the
 * heartbeat (machine utilisation, each running task's usage and the
 * node's listening TCP ports).
 *
 * The wire format is JSON with the field names doc/api.md documents.
 * Decoders use the field-table decoder (crater/dec.h): an unknown key, a
 * value of the wrong type or a number out of range is an error whose
 * err->field names the path ("task.limits.cpuBurst", "events[0].event").
 * Job ids are 1-20 decimal digits: an agent builds file and cgroup names
 * from them. A task is one replica of one attempt of a job: orders, events
 * and held tasks carry "replica" (0 to CRATER_JOB_MAX_REPLICAS - 1,
 * absent when 0) besides job and attempt. The order carries no job spec:
 * everything the agent applies is a typed field here, in base units
 * (millicores, bytes, milliseconds).
 *
 * Ownership: a decoded message owns every string and array it points to
 * (malloc'd); crater_proto_*_clear() frees them and zeroes the struct
 * (NULL and a zeroed struct are accepted). A decoder clears *out first and
 * again on failure, so a failed decode leaves nothing to free. The
 * register request's node document is a new reference the message owns.
 * Encoders return a new reference the caller owns, or NULL when out of
 * memory; they borrow their argument.
 */
#ifndef CRATER_PROTO_H
#define CRATER_PROTO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crater/dec.h"
#include "crater/jobspec.h"
#include "crater/model.h"

/* Limits that keep a hostile message from exhausting memory. */
#define CRATER_PROTO_MAX_ENV 1024
#define CRATER_PROTO_MAX_STR 4096   /* argv entries, env values, paths */
#define CRATER_PROTO_MAX_TASKS 4096 /* per register or heartbeat */
#define CRATER_PROTO_MAX_ITEMS 65536
#define CRATER_PROTO_MAX_EVENTS 4096
#define CRATER_PROTO_MAX_PORTS 16384 /* per heartbeat ("listening") */
#define CRATER_PROTO_JOB_MAX 20      /* digits of a uint64 */

/* ---- names: one table per enum -------------------------------------- */

/* "default", "training", "inference", "model-loading", "none"
 * (doc/jobspec.md ioProfile); "?" outside the enum. Static strings. */
const char *crater_io_profile_name(crater_io_profile_t p);
/* "slice", "mps", "mig", "none" (resources.gpu.isolation). */
const char *crater_gpu_isolation_name(crater_gpu_isolation_t m);
/* Workload types use crater_workload_name() (crater/jobspec.h). */

/* ---- the task order ------------------------------------------------- */

typedef struct crater_proto_env {
    char *key, *value;
} crater_proto_env_t;

typedef struct crater_proto_gpu {
    uint32_t index;        /* the node's GPU index */
    char *uuid;            /* "GPU-..."; may be "" (hardware files) */
    char *model;           /* informative; may be NULL */
    uint64_t memory_bytes; /* charged on this GPU: the slice, or all */
} crater_proto_gpu_t;

typedef struct crater_proto_placement {
    char *node;
    uint32_t ngpus;
    crater_proto_gpu_t gpus[CRATER_MAX_GPUS_PER_NODE];
    bool whole_gpus; /* whole GPUs, not memory slices */
    int32_t numa;    /* NUMA node to pin to; -1 = none */
    uint64_t cpu_millis, memory_bytes;
    char *disk; /* block device the job's IO is placed on; NULL = none */
} crater_proto_placement_t;

typedef struct crater_proto_limits {
    uint64_t cpu_millis;         /* the request; quota = x multiplier */
    uint64_t memory_bytes;       /* memory.max */
    double cpu_limit_multiplier; /* 0 = the agent's default */
    bool cpu_burst;
    crater_io_profile_t io_profile;
    crater_workload_t workload_type;      /* resolved: explicit or inferred */
    crater_gpu_isolation_t gpu_isolation; /* how a GPU slice is enforced */
} crater_proto_limits_t;

/* A service replica's readiness command (the job's service's
 * inference.readiness): the agent runs it every period_ms as the task
 * runs (its user, cgroup, environment and working directory), killed
 * past timeout_ms, and reports "ready" events when the answer changes.
 * On the wire "readiness": {"command": [...], "period_ms", "timeout_ms"}. */
typedef struct crater_proto_readiness {
    char **argv; /* NULL-terminated; NULL = none */
    size_t nargv;
    uint64_t period_ms, timeout_ms; /* 1 ms to 1 h */
} crater_proto_readiness_t;

typedef struct crater_proto_task {
    char *job;
    uint32_t attempt; /* >= 1 */
    uint32_t replica; /* replica index of a multi-replica job; 0 = the
                         first (or only); "replica" on the wire, absent
                         when 0 */
    char **argv;      /* NULL-terminated, at least one entry */
    size_t nargv;
    crater_proto_env_t *env;
    size_t nenv;
    char *working_dir; /* NULL: the agent makes one */
    /* The tenant's task user, the same on every node (craterd allocates
     * it from server.taskUidRange and keeps it with the tenant); 0 = none
     * sent: the agent's agent.taskUser. Never root: 1 to 2^32-2. */
    uint32_t uid, gid;
    crater_proto_placement_t placement;
    crater_proto_limits_t limits;
    uint64_t grace_period_ms;
    /* The job's timeLimit: the agent stops the task (as for a stop order,
     * with grace_period_ms) this long after it started it; 0 = none.
     * Sent only when set ("timeLimit_ms"). */
    uint64_t time_limit_ms;
    /* The job's checkpoint.dir ("checkpointDir"): the agent creates it
     * (as the task's user) and sets CRATER_CHECKPOINT_DIR; the same on
     * every attempt. NULL = the job does not checkpoint. */
    char *checkpoint_dir;
    /* Register answer only ("logs"): bytes of stdout, stderr craterd
     * holds, where shipping resumes. */
    bool has_logs;
    uint64_t logs[2];
    /* The job's image: the agent runs the task in a container of it
     * (doc/containers.md); NULL = on the host. On the wire "container":
     * {"image", "pull": "IfNotPresent"|"Always"|"Never", "volumes": [the
     * job spec's entries]}, absent without an image. */
    char *image;
    crater_pull_policy_t image_pull;
    crater_volume_t *volumes;
    size_t nvolumes;
    crater_proto_readiness_t readiness;
} crater_proto_task_t;

json_t *crater_proto_task_encode(const crater_proto_task_t *t);
int crater_proto_task_decode(crater_dec_t *d,
                             json_t *v,
                             crater_proto_task_t *out);
void crater_proto_task_clear(crater_proto_task_t *t);
/* Append a variable (copies); -1 when out of memory. */
int crater_proto_task_setenv(crater_proto_task_t *t,
                             const char *key,
                             const char *value);
/* The value of key, or NULL. Borrowed. */
const char *crater_proto_task_getenv(const crater_proto_task_t *t,
                                     const char *key);

/* ---- work channel --------------------------------------------------- */

typedef enum crater_proto_op {
    CRATER_PROTO_START,
    CRATER_PROTO_STOP,
    CRATER_PROTO_RESYNC, /* register again: craterd reconciles */
} crater_proto_op_t;

/* Why a task is stopped, as its preemption notice says ("notice" on the
 * wire, the names of crater_proto_notice_name()). NONE: no notice (a
 * cancellation); the others are preemptions the job is requeued after.
 * TIME_LIMIT is the agent's own (timeLimit), never sent by craterd. */
typedef enum crater_proto_notice {
    CRATER_NOTICE_NONE,
    CRATER_NOTICE_PRIORITY,   /* "priority": a higher-priority job */
    CRATER_NOTICE_DRAIN,      /* "drain": its node is drained */
    CRATER_NOTICE_IDLE,       /* "idle": idle-GPU reclaim */
    CRATER_NOTICE_MEMORY,     /* "memory": the GPU safety watermark */
    CRATER_NOTICE_TIME_LIMIT, /* "time-limit" */
    CRATER_NOTICE_COST_CAP,   /* "cost-cap": its costCap was reached (a
                                 cancellation that may checkpoint) */
} crater_proto_notice_t;

#define CRATER_NOTICE_COUNT (CRATER_NOTICE_COST_CAP + 1)

/* "none", "priority", "drain", "idle", "memory", "time-limit"; "?"
 * outside the enum. Static strings. */
const char *crater_proto_notice_name(crater_proto_notice_t n);
/* One of those names, into *out; an error naming them otherwise. */
int crater_proto_notice_decode(crater_dec_t *d,
                               json_t *v,
                               crater_proto_notice_t *out);

typedef struct crater_proto_stop {
    char *job;
    uint32_t attempt;
    uint32_t replica;
    uint64_t grace_period_ms;     /* SIGTERM now, SIGKILL after this */
    char *reason;                 /* may be NULL */
    crater_proto_notice_t notice; /* "notice", absent when NONE */
} crater_proto_stop_t;

typedef struct crater_proto_item {
    uint64_t seq;
    crater_proto_op_t op;
    crater_proto_task_t task; /* start */
    crater_proto_stop_t stop; /* stop */
} crater_proto_item_t;

typedef struct crater_proto_work {
    uint64_t seq;
    crater_proto_item_t *items;
    size_t nitems;
} crater_proto_work_t;

json_t *crater_proto_item_encode(const crater_proto_item_t *it);
int crater_proto_item_decode(crater_dec_t *d,
                             json_t *v,
                             crater_proto_item_t *out);
void crater_proto_item_clear(crater_proto_item_t *it);
/* The work response: items are borrowed JSON items as craterd keeps them
 * (already encoded); the decoder types them all. */
json_t *crater_proto_work_encode(uint64_t seq, json_t *items);
int crater_proto_work_decode(crater_dec_t *d,
                             json_t *v,
                             crater_proto_work_t *out);
void crater_proto_work_clear(crater_proto_work_t *w);

/* ---- task events ---------------------------------------------------- */

typedef enum crater_proto_event_kind {
    CRATER_PROTO_STARTED,
    CRATER_PROTO_EXITED,
    CRATER_PROTO_CHECKPOINT, /* the task reported a finished checkpoint */
    CRATER_PROTO_PROGRESS,   /* the task reported its step */
    CRATER_PROTO_READY,      /* its readiness command's answer changed */
} crater_proto_event_kind_t;

/* A checkpoint a task reported on its agent socket ("checkpoint": {...}
 * of a checkpoint event; a progress event carries "step" only). */
typedef struct crater_proto_ckpt {
    uint64_t step;
    char *path;     /* where it is (the step's directory); may be NULL */
    char *digest;   /* the manifest's digest, hex; may be NULL */
    uint64_t bytes; /* bytes written by the save */
    double seconds; /* how long the save took, >= 0 */
} crater_proto_ckpt_t;

#define CRATER_PROTO_MAX_DIGEST 128

/* {"step", "path", "digest", "bytes", "seconds"} (absent strings left
 * out); strict decoder as the others. */
json_t *crater_proto_ckpt_encode(const crater_proto_ckpt_t *c);
int crater_proto_ckpt_decode(crater_dec_t *d,
                             json_t *v,
                             crater_proto_ckpt_t *out);
void crater_proto_ckpt_clear(crater_proto_ckpt_t *c);

typedef struct crater_proto_event {
    char *job;
    uint32_t attempt;
    uint32_t replica;
    crater_proto_event_kind_t event;
    int64_t time_ms; /* the node's clock; 0 = not given */
    /* started */
    int32_t pid;
    /* exited */
    int32_t exit_code; /* 0-255 */
    int32_t signal;    /* 0 = none */
    bool oom;
    char *error; /* could not start, killed by the watchdog; may be NULL */
    bool has_logs;
    uint64_t logs[2]; /* stdout, stderr sizes at exit */
    /* checkpoint ("checkpoint"); progress: ckpt.step only ("step") */
    crater_proto_ckpt_t ckpt;
    /* ready ("ready"): the readiness command exited 0 */
    bool ready;
} crater_proto_event_t;

typedef struct crater_proto_events {
    crater_proto_event_t *events;
    size_t nevents;
} crater_proto_events_t;

json_t *crater_proto_event_encode(const crater_proto_event_t *e);
int crater_proto_event_decode(crater_dec_t *d,
                              json_t *v,
                              crater_proto_event_t *out);
void crater_proto_event_clear(crater_proto_event_t *e);
/* {"events": [...]} */
json_t *crater_proto_events_encode(const crater_proto_events_t *e);
int crater_proto_events_decode(crater_dec_t *d,
                               json_t *v,
                               crater_proto_events_t *out);
void crater_proto_events_clear(crater_proto_events_t *e);

/* ---- register ------------------------------------------------------- */

typedef struct crater_proto_held {
    char *job;
    uint32_t attempt;
    uint32_t replica;
    bool running; /* "running", else "exited" */
    int32_t pid;
    int64_t started_ms; /* 0 = not given */
} crater_proto_held_t;

typedef struct crater_proto_register {
    char *version;     /* the agent's Crater version */
    uint32_t protocol; /* CRATER_AGENT_PROTOCOL */
    json_t *node;      /* hardware-file Node document; NULL = absent */
    crater_proto_held_t *tasks;
    size_t ntasks;
} crater_proto_register_t;

/* The protocol version a register body claims, before anything else is
 * decoded (1 when absent or not an integer): a body of another version is
 * refused with both numbers rather than with its first unknown field. */
int64_t crater_proto_register_protocol(json_t *v);
json_t *crater_proto_register_encode(const crater_proto_register_t *r);
int crater_proto_register_decode(crater_dec_t *d,
                                 json_t *v,
                                 crater_proto_register_t *out);
void crater_proto_register_clear(crater_proto_register_t *r);

typedef struct crater_proto_registered {
    char *node, *version;
    uint32_t protocol;
    uint64_t seq; /* where the work channel starts */
    uint64_t heartbeat_interval_ms, heartbeat_timeout_ms;
    uint64_t sampling_interval_ms;
    crater_proto_task_t *tasks; /* placed there, each with has_logs */
    size_t ntasks;
} crater_proto_registered_t;

json_t *crater_proto_registered_encode(const crater_proto_registered_t *r);
int crater_proto_registered_decode(crater_dec_t *d,
                                   json_t *v,
                                   crater_proto_registered_t *out);
void crater_proto_registered_clear(crater_proto_registered_t *r);

/* ---- heartbeat ------------------------------------------------------ */

typedef struct crater_proto_gpu_util {
    uint32_t index;
    double util; /* [0, 1]: share of the period a kernel ran */
    uint64_t memory_used_bytes;
    /* [0, 1]: share of the period device memory was read or written
     * (NVML's memory "utilization": bandwidth activity, not memory held);
     * -1 = not reported (optional on the wire: older agents) */
    double mem_activity;
} crater_proto_gpu_util_t;

typedef struct crater_proto_usage {
    char *job;
    uint32_t attempt;
    uint32_t replica;
    double cpu_millis; /* measured CPU use, millicores */
    uint64_t memory_bytes;
} crater_proto_usage_t;

typedef struct crater_proto_heartbeat {
    bool has_util;
    double cpu, memory, disk; /* fractions in [0, 1] */
    uint32_t ngpus;
    crater_proto_gpu_util_t gpus[CRATER_MAX_GPUS_PER_NODE];
    crater_proto_usage_t *tasks; /* running tasks */
    size_t ntasks;
    /* "listening": the TCP ports something listens on at the node (any
     * address, IPv4 or IPv6), ascending and unique, so that craterd picks
     * MASTER_PORT and CRATER_SERVICE_PORT among the others; has_ports
     * false = not reported (the last report stands) */
    bool has_ports;
    uint16_t *ports;
    size_t nports;
} crater_proto_heartbeat_t;

json_t *crater_proto_heartbeat_encode(const crater_proto_heartbeat_t *h);
int crater_proto_heartbeat_decode(crater_dec_t *d,
                                  json_t *v,
                                  crater_proto_heartbeat_t *out);
void crater_proto_heartbeat_clear(crater_proto_heartbeat_t *h);
/* One task's usage: {job, attempt, usage: {cpu_millis, memory_bytes}}
 * (also the job's sample that craterd keeps). */
json_t *crater_proto_usage_encode(const crater_proto_usage_t *u);

#endif /* CRATER_PROTO_H */
