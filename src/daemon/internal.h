/* internal.h - craterd's in-memory state, shared by the files of
 * src/daemon. Not a public header.
 *
 * Threads. The HTTP server's pool threads run the API handlers; one
 * scheduler thread runs the scheduling loop and the periodic health tick;
 * the store's writer thread runs commit callbacks. ALL mutable state below
 * is guarded by the one mutex d->mu. Rules that keep this deadlock-free:
 *   - never call a blocking crater_store_commit() while holding d->mu (the
 *     writer's callbacks take d->mu); use crater_store_commit_async();
 *   - never call crater_http_complete() while holding d->mu is allowed (it
 *     only queues a resume), so completing under the lock is fine.
 *
 * Durability order. A submission enters memory only in its commit
 * callback, after it is on disk; a binding is sent to the agent only in
 * the callback of the commit that recorded it, so after a crash the agent
 * never runs something the store does not know.
 */
#ifndef CRATER_DAEMON_INTERNAL_H
#define CRATER_DAEMON_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "crater/auth.h"
#include "crater/config.h"
#include "crater/http.h"
#include "crater/idle.h"
#include "crater/jobspec.h"
#include "crater/kb.h"
#include "crater/metrics.h"
#include "crater/pass.h"
#include "crater/profile.h"
#include "crater/proto.h"
#include "crater/queue.h"
#include "crater/reserve.h"
#include "crater/sched.h"
#include "crater/typhist.h"
#include "daemon/daemon.h"
#include "daemon/lifecycle.h"
#include "store/store.h"

/* Store layout (keys sort by id: ids are zero-padded). */
#define KEY_JOBS "/crater/jobs/"
#define KEY_NODES "/crater/nodes/"
#define KEY_TOKENS "/crater/tokens/"
#define KEY_TENANTS "/crater/tenants/"
#define KEY_PROFILES "/crater/profiles/"
#define KEY_QUARANTINE "/crater/quarantine" /* + the key of a bad row */
#define KEY_K8S "/crater/k8s/pods/"         /* + a bound pod's UID (k8s.c) */

#define JOB_MAX_SAMPLES 720

/* Replicas craterd runs per job (gang.c); a spec asking more is refused
 * at admission. Core task ids hold the index in 16 bits. */
#define JOB_MAX_REPLICAS 256

/* One replica of a multi-replica job (gang.c): where it runs and how it
 * ended. state is JS_BOUND, JS_RUNNING, or the final state it reached
 * (JS_CANCELLED: stopped because the gang ended); JS_PENDING before the
 * gang is placed. */
typedef struct djob_rep {
    crater_placement_t pl;
    job_state_t state;
    int exit_code, exit_signal;
    bool oom;
    bool stopping;    /* a stop order went out for this attempt */
    uint32_t attempt; /* the attempt it was bound for */
} djob_rep_t;

typedef struct djob {
    uint64_t id;
    bool durable;     /* its submission is committed: visible, schedulable */
    bool save_queued; /* job_save_defer(): written at job_save_flush() */
    char *name;
    char *tenant;
    job_state_t state;
    int32_t priority;
    crater_jobspec_t *spec; /* owned */
    json_t *spec_json;      /* normalised spec, owned */
    crater_request_t req;   /* compiled from spec; req.spec = spec */
    bool placed;            /* pl is charged to the core */
    bool ever_placed;       /* pl holds the last placement */
    crater_placement_t pl;
    int64_t submitted_ms, started_ms, finished_ms;
    uint32_t attempts;
    int exit_code, exit_signal;
    bool oom;
    bool cancel_requested;
    uint64_t preempted_by; /* job waiting for this one to stop; 0 none */
    uint64_t waiting_for;  /* victims still stopping for this job */
    int64_t lost_since_ms; /* JS_LOST: when the node went away */
    char *last_reason;     /* last unschedulable reason (dedups events) */
    json_t *history;       /* array of {time_ms, state, reason} */
    json_t *samples;       /* array of utilisation samples (not stored) */
    /* Output of attempt log_attempt, per stream (stdout, stderr): bytes
     * received (offset + length of the furthest upload), the size the
     * agent reported when the task exited (log_final) and whether
     * logs.maxBytes cut it. Not stored: after a restart a log counts as
     * complete. */
    uint32_t log_attempt;
    uint64_t log_bytes[2];
    uint64_t log_expect[2];
    bool log_final;
    bool log_truncated[2];
    uint32_t prev_attempt; /* the attempt before a requeue, and the node */
    uint32_t prev_node;    /* it ran on (its output may still arrive) */
    uint64_t array_id;     /* its array (the first job's id); 0 = none */
    uint32_t array_index;  /* its index in the array */
    /* Multi-replica jobs (spec replicas > 1, gang.c): nrep replicas, all
     * placed together (pl mirrors rep[0].pl) and run, failed, preempted
     * and requeued as a unit; nrep 0 for a single-replica job. Owned. */
    uint32_t nrep;
    djob_rep_t *rep;
    uint32_t master_port; /* the gang's MASTER_PORT while placed */
    /* Checkpoints (ckpts.c): the reports of its tasks, oldest first, at
     * most JOB_MAX_CKPTS ({attempt, replica, step, path, digest, bytes,
     * seconds, time_ms}; stored); the longest measured save; the last
     * progress report (not stored). */
    json_t *ckpts;
    double ckpt_max_s;
    uint64_t progress_step;
    int64_t progress_ms;
    /* the notice its next stop order carries (why it is stopped); NONE
     * for a cancellation */
    crater_proto_notice_t stop_notice;
    uint32_t failures; /* failed attempts (restartPolicy; stored) */
    /* idle-GPU reclaim (idle.c): the current run of idle readings of
     * attempt idle_attempt (not stored: a restart starts over) */
    crater_idle_t idle;
    uint32_t idle_attempt;
    /* GPU sharing (gshare.c, in memory): the GPU profile over its
     * attempts (readings, their utilisation summed, peak MiB in use) and
     * why it is not time-shared (static text; NULL: not asked yet) */
    uint32_t gs_samples;
    double gs_use_sum;
    uint64_t gs_peak_mib;
    const char *gs_why;
    bool gs_off;      /* a time-shared attempt failed: never shared again */
    bool cost_capped; /* cost.c: stopped for its costCap (not stored) */
    /* A replica of an inference service (services.c): the service's job
     * id (0: not a replica), its role (crater__svc_role_t), its number in
     * the service, and in memory only: its readiness probe answered 200
     * (this attempt), its URL is in the gateway, its load was measured.
     * Its port (CRATER_SERVICE_PORT) is master_port, chosen at bind. */
    uint64_t svc_id;
    int svc_role;
    uint32_t svc_index;
    bool svc_ready, svc_in_gw, svc_loaded;
    /* failed HTTP probes in a row of a ready replica (services.c: it
     * leaves traffic at SVC_PROBE_FAILURES, as Kubernetes' failureThreshold) */
    uint8_t svc_probe_fails;
    bool svc_reaped; /* its end was seen by the controller */
    /* The spec version it runs (a replica), or serves (a service's job;
     * a rollout raises it). Stored. */
    uint32_t svc_version;
    /* A service's job with `after:` (pipeline.c): the succeeded training
     * job whose output its replicas serve (0: none yet). Stored. */
    uint64_t svc_model;
    /* A service's job: its rollout as stored (rollout.c writes it, with
     * the previous version's spec while rolling; NULL: never rolled).
     * Owned; stored. */
    json_t *svc_rollout;
    /* Draining (in memory): out of the gateway, stopped once the requests
     * it has in flight are answered (svc_drain: the gateway's backend,
     * referenced; since svc_drain_ms). */
    bool svc_draining;
    void *svc_drain;
    int64_t svc_drain_ms;
} djob_t;

/* A job array's running counts (arrays.c). */
typedef struct darray {
    uint64_t id;          /* its first job's id */
    uint64_t last;        /* its last job's id: its jobs lie in [id, last]
                             (retention may leave gaps) */
    uint32_t count;       /* jobs of it craterd holds */
    uint32_t active;      /* of those, holding resources */
    uint32_t parallelism; /* %P: at most this many active; 0 = no cap */
} darray_t;

typedef struct work_item {
    uint64_t seq;
    json_t *item; /* {"seq","op",...} */
} work_item_t;

typedef struct dnode {
    char *name;
    uint32_t sid; /* the core's node id */
    bool registered;
    bool ready;
    bool cordoned;
    bool draining;
    char *reason;
    int64_t last_hb_ms;
    int64_t notready_since_ms;
    char *hw_change;         /* a re-registration reported other capacity: what
                                (capacity stays as registered; NULL = none) */
    json_t *hw;              /* the Node document as stored */
    crater_cluster_t *model; /* hw decoded: the full model (the core keeps
                                only what it schedules on) */
    char *addr; /* the agent's address as craterd saw it at register (its
                   replicas' MASTER_ADDR); NULL = the node's name */
    crater_node_util_t util;
    double util_mem_bw; /* unused placeholder for later dimensions */
    /* the ports of craterd's gang and service ranges that something
       listens on there, as its agent last reported (ascending; node_held_*
       in nodes.c) */
    uint16_t *held;
    size_t nheld;
    /* work channel */
    work_item_t *work;
    size_t nwork, capwork;
    uint64_t seq;
    crater_http_pending_t *poll;
    uint64_t poll_after;
    int64_t poll_deadline_ms;
} dnode_t;

typedef struct dtenant {
    char *name;
    bool has_quota;
    uint64_t q_gpus, q_gpu_mem, q_cpu, q_mem; /* 0 = unlimited */
    double weight;
    uint64_t d_cpu, d_mem; /* defaults (millicores, bytes); 0 = server's */
    uint32_t uid;          /* its tasks' uid and gid (access.c); 0 = none yet */
    bool no_idle_reclaim;  /* idleReclaim: false: its jobs are never
                              reclaimed for idle GPUs (idle.c) */
} dtenant_t;

typedef struct dtoken {
    crater_token_rec_t rec; /* rec.last_used_ms: the last request's time */
    int64_t stored_used_ms; /* the last_used_ms the store holds */
    bool revoking;          /* its delete is being committed */
} dtoken_t;

#define HISTORY_NOTES 16

struct dservice; /* services.c */
struct gw_table; /* src/gateway/backends.h */
struct gw;       /* src/gateway/gateway.h */

struct crater_daemon {
    pthread_mutex_t mu;
    pthread_cond_t wake;        /* scheduler thread */
    pthread_rwlock_t prof_lock; /* profiles: parse reads, publish writes */
    bool stopping;
    bool dirty; /* something changed: run a pass */
    bool ready;
    /* job_save_defer(): the jobs whose record is written once at
       job_save_flush() (ids; a job freed meanwhile is skipped) */
    bool save_defer;
    uint64_t *save_ids;
    size_t nsave, capsave;
    pthread_t sched_thread;
    bool sched_started;

    crater_config_t cfg; /* owned copy of the strings */
    crater_kb_t *kb;
    crater_sched_t *sched;
    crater_sched_t *twin; /* every node, empty and ready: what could ever
                             run (admission refuses the rest) */
    /* typical.c: the submissions' typical-task histogram (NULL with
     * scheduler.typicalTasks off); stale: a node came since its install */
    crater_typhist_t *typ;
    bool typ_stale;
    struct k8s_state *k8s; /* k8s.c: the scheduler extender's pods */
    crater_queue_t *queue;
    crater_profiles_t *profiles; /* shared: the admin's */
    struct tprofiles {           /* each tenant's own, under prof_lock */
        char *tenant;
        crater_profiles_t *reg;
    } * tprofiles;
    size_t ntprofiles, captprofiles;
    crater_store_t *store;
    bool fenced;  /* leader election: the store has a fence */
    bool deposed; /* ... revoked: stepping down */
    /* ... not renewed for renewDeadline (crater_daemon_pause): the API
       answers 503, the scheduler thread waits; since when (monotonic) */
    bool paused;
    int64_t paused_ms;
    /* During the start only: a standby's warm copy to load instead of
     * listing the store (opts->warm, borrowed; NULL afterwards). */
    const struct crater_warm *warm;
    char *advertise_url; /* leader election: this craterd's URL, or NULL */
    crater_metrics_t *metrics;
    crater_http_server_t *http;
    crater_router_t *router;
    char *data_dir;
    char *admin_token; /* only when created at this start */

    djob_t **jobs; /* sorted by id */
    size_t njobs, capjobs;
    uint64_t next_id;
    uint64_t quarantined;     /* rows set aside at start (persist.c) */
    uint64_t running_pending; /* submissions awaiting their commit */

    darray_t *arrays; /* sorted by id */
    size_t narrays, caparrays;

    dnode_t **nodes;
    size_t nnodes, capnodes;

    dtenant_t **tenants;
    size_t ntenants, captenants;

    dtoken_t **tokens;
    size_t ntokens, captokens;
    /* revoked tokens: freed only at the end, as a principal_t taken under
     * d->mu keeps pointing into its record after the lock is dropped */
    dtoken_t **revoked;
    size_t nrevoked;

    FILE *declog;
    char *declog_path;
    uint64_t declog_bytes;

    /* metrics families */
    crater_metric_t *m_util, *m_queue, *m_jobs, *m_lat, *m_dec, *m_preempt,
        *m_http, *m_commits, *m_nodes, *m_idle_jobs, *m_idle_reclaims;
    uint64_t decisions;

    /* The core's scheduling pass (pass.h) with loop.c's ops: it tells a
     * full pass (capacity came back: loop_capacity_changed) from a fresh
     * one (only the jobs queued since: job_enqueue), and keeps the queue
     * head's EASY reservation. */
    crater_pass_t *pass;
    double decide_t0; /* loop.c: when the job's decision began */
    crater_tenant_usage_t *share_buf; /* loop.c: fair-share input */
    crater_task_end_t *ends_buf;      /* backfill.c: expected ends */
    size_t ends_jobs; /* backfill.c: jobs that may have an expected end */
    bool util_dirty;
    int64_t recheck_ms; /* a full pass then (loop.c), 0 none */

    /* history.c: (time, store revision) noted every tenth of
     * store.historyRetention, oldest first, for the periodic compaction */
    struct {
        int64_t ms, rev;
    } hist[HISTORY_NOTES];
    size_t hist_n;
    int64_t hist_next_ms;
    crater_metric_t *m_store[5]; /* store revision, size (history.c) */
    struct dcost *cost;          /* cost.c: the ledger and its state */
    struct daudit *audit;        /* audit.c: the audit log */
    struct dops *ops;            /* opsmetrics.c: alerting gauges */

    /* services.c: inference services, the gateway craterd runs for them
     * (its table is fed from here), and the controller thread */
    struct dservice **svcs;
    size_t nsvcs, capsvcs;
    struct gw_table *gwt;
    struct gw *gw;
    pthread_t svc_thread;
    bool svc_started;
    pthread_cond_t svc_wake;
    struct crater_metric *svc_replicas; /* by service and state */
};

/* ---- time ---------------------------------------------------------------- */
int64_t dnow_ms(void);

/* ---- jobs.c ---------------------------------------------------------------
 */
djob_t *job_find(crater_daemon_t *d, uint64_t id);
const char *job_default_name(const crater_jobspec_t *spec);
int job_insert(crater_daemon_t *d, djob_t *j);
void job_free(djob_t *j);
void job_event(djob_t *j, int64_t now, job_state_t to, const char *reason);
json_t *job_to_json(crater_daemon_t *d, const djob_t *j, bool full);
json_t *job_to_store(crater_daemon_t *d, const djob_t *j);
djob_t *job_from_store(crater_daemon_t *d, json_t *v, crater_error_t *err);
/* Decode and validate a stored normalised spec (*spec: caller destroys). */
int job_spec_from_norm(crater_daemon_t *d,
                       json_t *norm,
                       crater_jobspec_t **spec,
                       crater_error_t *err);
/* One parsed Job document: the spec and its normalised JSON (owned). */
typedef struct job_doc {
    crater_jobspec_t *spec;
    json_t *norm;
} job_doc_t;
/* Every Job document of a body (up to the loader's 256), all or none:
 * *docs (n of them) freed with job_docs_free(). tenant: the user's (its
 * profiles expand the jobs), or NULL for each document's own. */
int job_parse_docs(crater_daemon_t *d,
                   const char *tenant,
                   const char *body,
                   size_t len,
                   job_doc_t **docs,
                   size_t *n,
                   crater_error_t *err);
void job_docs_free(job_doc_t *docs, size_t n);
/* Parse a body (JSON or YAML) of one Job into spec + normalised JSON. */
int job_parse_body(crater_daemon_t *d,
                   const char *tenant,
                   const char *body,
                   size_t len,
                   crater_jobspec_t **spec,
                   json_t **norm,
                   crater_error_t *err);
/* Persist j's record (async, no wait). cb may be NULL. */
int job_save(crater_daemon_t *d, djob_t *j, crater_store_done_f cb, void *arg);
/* Between these two (under d->mu), job_save() without a callback writes
 * each job's record once, at the flush, in its last state: an agent's
 * report of a start and an exit of one job is one write, not two. */
void job_save_defer(crater_daemon_t *d);
void job_save_flush(crater_daemon_t *d);
json_t *placement_json(crater_daemon_t *d, const crater_placement_t *pl);
json_t *placement_store(crater_daemon_t *d, const crater_placement_t *pl);
const char *node_state_name(const dnode_t *n);
int placement_load(crater_daemon_t *d, json_t *v, crater_placement_t *pl);
int queue_push_job(crater_daemon_t *d, djob_t *j);
void job_release(crater_daemon_t *d, djob_t *j);
/* The one way a job changes state (lifecycle.h): look (j->state, ev) up
 * in the transition table, perform its effects, move, append a history
 * entry (reason) at time_ms (the agent's clock for what happened on a
 * node; <= 0 = now) and persist the record. -1 when the table refuses
 * the pair: nothing changes (a late or duplicate report). */
int job_apply(crater_daemon_t *d, djob_t *j, job_ev_t ev, const char *reason);
int job_apply_at(crater_daemon_t *d,
                 djob_t *j,
                 job_ev_t ev,
                 const char *reason,
                 int64_t time_ms);
/* The same without persisting (the caller saves: op_bind, with the
 * callback that sends the start orders). */
int job_step(crater_daemon_t *d,
             djob_t *j,
             job_ev_t ev,
             const char *reason,
             int64_t time_ms);

/* Cancel j (not final): at once when it holds nothing, else through its
 * agent (SIGTERM, gracePeriod, SIGKILL). */
void job_cancel(crater_daemon_t *d, djob_t *j, const char *reason);

/* ---- gang.c ---------------------------------------------------------------
 *
 * A job's tasks: one for a single-replica job (j->pl, core task id
 * j->id), nrep for a multi-replica one (rep[r].pl, core task ids
 * GANG_TASK_BIT | id << 16 | r, consecutive as the core's gang placement
 * wants). */
#define GANG_TASK_BIT (1ull << 63)
static inline uint32_t job_ntasks(const djob_t *j)
{
    return j->nrep ? j->nrep : 1;
}
static inline const crater_placement_t *job_task_pl(const djob_t *j, uint32_t r)
{
    return j->nrep ? &j->rep[r].pl : &j->pl;
}
uint64_t job_task_id(const djob_t *j, uint32_t r);
/* The job id of a core task id (either form). */
uint64_t task_job_id(uint64_t task);
/* Does one of j's tasks hold node sid (j->placed)? */
bool job_on_node(const djob_t *j, uint32_t sid);
/* Size j->rep for its spec (at submission and load); -1 on ENOMEM. */
int gang_init(djob_t *j, crater_error_t *err);
/* The pass placed and committed every replica of j (pl[0..nrep-1]):
 * fills rep[].pl, j->pl and the gang's MASTER_PORT. */
void gang_placed(crater_daemon_t *d, djob_t *j, const crater_placement_t *pl);
/* Mark the replicas bound for the current attempt. */
void gang_bound(djob_t *j);
/* Return every replica's charges to the core. */
void gang_release(crater_daemon_t *d, djob_t *j);
/* Charge a loaded job's replicas again (restart). */
int gang_recommit(crater_daemon_t *d, djob_t *j, crater_error_t *err);
struct crater_proto_task;
/* The torchrun variables of replica r (MASTER_ADDR, MASTER_PORT,
 * WORLD_SIZE, RANK, LOCAL_RANK, NODE_RANK, CRATER_REPLICA). */
int gang_env(crater_daemon_t *d,
             const djob_t *j,
             uint32_t r,
             struct crater_proto_task *t);
/* Replica r of j started (pid): j runs once any of them does. */
void gang_started(crater_daemon_t *d, djob_t *j, uint32_t r, int64_t at);
/* Replica r exited (code, signal, OOM): record it. Returns true when the
 * job's state follows from this exit (the caller applies the job-level
 * transition: the first failure fails the gang, the last success
 * succeeds it, the last replica of a gang being preempted or cancelled
 * to go ends its stop); false when the job keeps its state (other
 * replicas still run or still stop). */
bool gang_exited(
    djob_t *j, uint32_t r, int code, int signal, bool oom, bool *failed);
/* j's tasks ended with the job (state to): mark them; stop the ones
 * still running. Called by job_set_state_at before the release. */
void gang_ended(crater_daemon_t *d, djob_t *j, job_state_t to);
/* "replicas": [{replica, node, state, exit}] (API) and the stored form. */
json_t *gang_json(crater_daemon_t *d, const djob_t *j);
json_t *gang_store(crater_daemon_t *d, const djob_t *j);
int gang_load(crater_daemon_t *d, djob_t *j, json_t *v);

/* ---- services.c (doc/inference.md) ----------------------------------------
 */
/* Is j the job of an inference service (not one of its replicas)? */
static inline bool job_is_service(const djob_t *j)
{
    return j->spec && j->spec->inference.enabled && j->svc_id == 0;
}
/* What craterd refuses of an inference spec (a field it does not act on,
 * autoscaler parameters that do not hold); 0 for other specs. */
int service_check_spec(const crater_jobspec_t *spec, crater_error_t *err);
/* No live service has spec's name (it is a route in the gateway): 0, or
 * -1 with CRATER_EEXIST naming "name". Under d->mu. */
int service_name_free(crater_daemon_t *d,
                      const crater_jobspec_t *spec,
                      crater_error_t *err);
/* j (a service's job, durable) is served from now on. Under d->mu. */
int service_attach(crater_daemon_t *d, djob_t *j);
/* After persist_load: the gateway (api: the API's listen address), the
 * services of the stored jobs and the controller thread. */
int services_start(crater_daemon_t *d, const char *api, crater_error_t *err);
void services_stop(crater_daemon_t *d);
/* Replica j's agent reports the answer of its readiness command
 * (inference.readiness; the agent runs it as the task). Under d->mu. */
void svc_ready_report(crater_daemon_t *d, djob_t *j, bool ready);
/* inference.readiness period and timeout when the spec gives none. */
#define READY_DEFAULT_MS 1000
/* A replica j was bound: its CRATER_SERVICE_PORT (in master_port). */
void service_bound(crater_daemon_t *d, djob_t *j);
/* "service" in the API's job object o (and state "serving" for a
 * service's own job); the stored record's "service"; load it. */
void service_job_view(crater_daemon_t *d, const djob_t *j, json_t *o);
json_t *service_job_store(const djob_t *j);
void service_job_load(djob_t *j, json_t *v);
uint16_t service_gateway_port(const crater_daemon_t *d);
/* The services' metrics (under d->mu): replicas by state; and the
 * gateway's own families, rendered (malloc'd, NULL without a gateway;
 * without d->mu). */
void services_metrics_publish(crater_daemon_t *d);
char *services_metrics_render(crater_daemon_t *d, size_t *len);
int api_services_routes(crater_daemon_t *d, crater_error_t *err);
/* GET / and /ui/{file}: the dashboard (dashboard.c, doc/dashboard.md). */
int api_dashboard_routes(crater_daemon_t *d, crater_error_t *err);
/* Shared with api_jobs.c: a new pending job (takes spec and norm on
 * success), name=value in its environment, and taking one out of the
 * table again. */
djob_t *job_create(crater_daemon_t *d,
                   crater_jobspec_t *spec,
                   json_t *norm,
                   crater_error_t *err);
int job_add_env(crater_jobspec_t *spec,
                json_t *norm,
                const char *name,
                const char *value);
void job_remove(crater_daemon_t *d, djob_t *j);

/* ---- arrays.c -------------------------------------------------------------
 */
darray_t *array_find(crater_daemon_t *d, uint64_t id);
/* j (of an array) enters (+1) or leaves (-1) craterd's job table. */
void array_track(crater_daemon_t *d, const djob_t *j, int delta);
/* j moved from state from to state to. */
void array_moved(crater_daemon_t *d,
                 const djob_t *j,
                 job_state_t from,
                 job_state_t to);
/* j's array already runs its parallelism cap; err says so. */
bool array_at_cap(crater_daemon_t *d, const djob_t *j, crater_error_t *err);
/* The job with index in array array_id, or NULL. */
djob_t *array_job(crater_daemon_t *d, uint64_t array_id, uint32_t index);
json_t *array_to_json(crater_daemon_t *d, const darray_t *a);
int api_arrays_routes(crater_daemon_t *d, crater_error_t *err);

/* ---- nodes.c --------------------------------------------------------------
 */
dnode_t *node_find(crater_daemon_t *d, const char *name);
dnode_t *node_by_sid(crater_daemon_t *d, uint32_t sid);
/* The full hardware model of the core's node sid (NULL if unknown). */
const crater_node_t *node_model(crater_daemon_t *d, uint32_t sid);
dnode_t *node_add(crater_daemon_t *d,
                  json_t *hw,
                  const char *expect,
                  crater_error_t *err);
json_t *node_to_json(crater_daemon_t *d, const dnode_t *n);
/* The heartbeat's listening ports: keeps those in the gang and service
 * ranges (server.gangPortBase, 2 x gangPorts) as n->held. */
void node_held_set(crater_daemon_t *d,
                   dnode_t *n,
                   const uint16_t *ports,
                   size_t nports);
/* Whether something listens on port at the node whose core id is sid. */
bool node_port_held(crater_daemon_t *d, uint32_t sid, uint32_t port);
json_t *nodes_to_json(crater_daemon_t *d); /* all nodes, one pass */
int node_save(crater_daemon_t *d, dnode_t *n);
/* A re-registering agent's hardware hw against n's registered capacity:
 * GPUs, GPU memory, CPU, memory. On a difference n->hw_change says what
 * (logged once per change); capacity never follows an agent's word, so a
 * stolen agent token cannot invent capacity. Caller holds d->mu. */
void node_check_hardware(crater_daemon_t *d, dnode_t *n, json_t *hw);
void node_health_tick(crater_daemon_t *d, int64_t now);
/* Work channel. */
int node_push_work(crater_daemon_t *d, dnode_t *n, json_t *item);
void node_poll_tick(crater_daemon_t *d, int64_t now);
void node_complete_poll(dnode_t *n);
/* Fill *out with j's start order (crater/proto.h); the caller clears it
 * with crater_proto_task_clear(). -1 when out of memory. */
struct crater_proto_task;
int task_order(crater_daemon_t *d,
               const djob_t *j,
               uint32_t replica,
               struct crater_proto_task *out);
/* Start orders for j's tasks: on every node, or only on only. */
void node_send_start(crater_daemon_t *d, djob_t *j, const dnode_t *only);
void node_send_stop(crater_daemon_t *d, djob_t *j, const char *reason);
/* The safety watermark acting, after a heartbeat's measurements reached
 * the core: each task crater_sched_watermark_victims() names on n that is
 * bound or running is stopped and requeued (state preempting, a reason,
 * a "watermark" decision); one already stopping is left to finish. */
void node_watermark(crater_daemon_t *d, dnode_t *n);
/* A stop order for one replica of j's current attempt. */
void node_send_stop_replica(crater_daemon_t *d,
                            djob_t *j,
                            uint32_t r,
                            const char *reason);
/* A stop order for job's attempt on n (reason may be NULL). */
void node_order_stop(crater_daemon_t *d,
                     dnode_t *n,
                     const char *job,
                     uint32_t attempt,
                     uint32_t replica,
                     uint64_t grace_ms,
                     const char *reason);

/* ---- ckpts.c (under d->mu) ----------------------------------------------- */

/* Record a checkpoint event of j (stored with the job; the core learns
 * the task's checkpoint time) / a progress event (kept in memory). */
void job_checkpoint(crater_daemon_t *d,
                    djob_t *j,
                    const crater_proto_event_t *ev,
                    int64_t at);
void job_progress(djob_t *j, const crater_proto_event_t *ev, int64_t at);
/* The grace period of j's next stop order: gracePeriod, or for a
 * preemption (j->stop_notice) of a job that reported checkpoints its
 * longest save + 25%, capped by scheduler.maxCheckpointGrace. */
uint64_t job_stop_grace_ms(const crater_daemon_t *d, const djob_t *j);
/* GET /api/v1/jobs/{id}/checkpoints: a new reference. */
json_t *job_ckpts_json(crater_daemon_t *d, djob_t *j);
/* Take the stored "checkpoints" array (borrowed; NULL ok). */
void job_ckpts_load(djob_t *j, json_t *v);
/* j's attempt failed (why: exit code, signal ...): counted; under
 * restartPolicy OnFailure j is requeued as its next attempt, or failed
 * once backoffLimit is spent, and true is returned; false: the caller
 * fails j as before (restartPolicy Never). */
bool job_retry_failure(crater_daemon_t *d, djob_t *j, const char *why);

/* ---- backfill.c (under d->mu) -------------------------------------------- */
/* The placed tasks' expected ends, for the head's reservation (the
 * pass's ends op): *ends points at d->ends_buf; returns how many. */
size_t backfill_ends(crater_daemon_t *d, const crater_task_end_t **ends);
/* j entered (from -1), moved or left (to -1): keeps d->ends_jobs. */
void backfill_track(crater_daemon_t *d, const djob_t *j, int from, int to);

/* ---- loop.c ---------------------------------------------------------------
 */
/* Create d->pass (after d->sched and d->queue, before loading jobs). */
int loop_init(crater_daemon_t *d, crater_error_t *err);
int loop_start(crater_daemon_t *d, crater_error_t *err);
void loop_kick(crater_daemon_t *d);                   /* under d->mu */
void loop_capacity_changed(crater_daemon_t *d);       /* under d->mu */
void declog_write(crater_daemon_t *d, json_t *entry); /* steals entry */

/* ---- idle-GPU reclaim (idle.c) ---- */
/* One heartbeat's reading of j's task replica (placed on the heartbeat's
 * node): warns, reclaims (JE_PREEMPT with notice idle) or resets j->idle.
 * Caller holds d->mu. */
void idle_observe(crater_daemon_t *d,
                  djob_t *j,
                  uint32_t replica,
                  const crater_proto_heartbeat_t *h,
                  int64_t now);
/* {since_ms, warned, reclaim_at_ms} while j's GPUs read idle; NULL
 * otherwise. New reference. */
json_t *idle_json(const crater_daemon_t *d, const djob_t *j);
/* Running jobs warned for idle GPUs (the crater_idle_gpu_jobs gauge). */
size_t idle_warned_jobs(const crater_daemon_t *d);

/* ---- GPU sharing (gshare.c) ---- */
/* One heartbeat's reading of j's task replica, into j's GPU profile.
 * Caller holds d->mu (as all three). */
void gshare_observe(crater_daemon_t *d,
                    djob_t *j,
                    uint32_t replica,
                    const crater_proto_heartbeat_t *h);
/* Before the pass places pending j: make its request time-shared when
 * gpuShare is on and its profile qualifies (crater_sched_share). */
void gshare_prepare(crater_daemon_t *d, djob_t *j);
/* j's attempt failed: when it ran time-shared, its next attempts get
 * their GPUs whole again (the slice sized from its profile may be what
 * failed it: a job whose memory grew), and it is never shared again. */
void gshare_failed(djob_t *j);
/* {shared, samples, use, peak_mib, slice_mib | why_not} for a GPU job
 * while gpuShare is on; NULL otherwise. New reference. */
json_t *gshare_json(const crater_daemon_t *d, const djob_t *j);

/* ---- retention.c ----------------------------------------------------------
 */
/* Forget finished jobs older than server.jobRetention; returns how many.
 * Under d->mu, scheduler thread. */
size_t jobs_expire(crater_daemon_t *d, int64_t now);
/* How often to call it: a minute, or a quarter of the retention if less. */
int64_t jobs_expire_every(const crater_daemon_t *d);

/* ---- history.c ------------------------------------------------------------
 */
/* Compact the store's history to what it was store.historyRetention ago
 * (asynchronously; when due). Under d->mu, scheduler thread, every tick. */
void history_tick(crater_daemon_t *d, int64_t now);
/* The crater_store_* gauges: registered once, set at each scrape. */
int history_metrics_setup(crater_daemon_t *d, crater_error_t *err);
void history_metrics_publish(crater_daemon_t *d);

/* ---- tenants / tokens (access.c) ------------------------------------------
 */
dtenant_t *tenant_find(crater_daemon_t *d, const char *name);
dtenant_t *tenant_get(crater_daemon_t *d, const char *name); /* creates */
/* A job that asks no CPU or no memory gets its tenant's default, else
 * server.defaultCpu / defaultMemory (as a Kubernetes LimitRange), in spec
 * and in norm (its stored form), before the quota check counts it.
 * Caller holds d->mu. */
void job_defaults(crater_daemon_t *d, crater_jobspec_t *spec, json_t *norm);
/* Store the tenant's record (quota, weight, task uid) at KEY_TENANTS. */
int tenant_persist(crater_daemon_t *d, const dtenant_t *t);
/* The tenant's task uid (= gid) in *uid, allocated and stored at its first
 * call: 0 when server.taskUidRange is none; -1 when the range is used up
 * or out of memory. */
int tenant_uid(crater_daemon_t *d,
               const char *name,
               uint32_t *uid,
               crater_error_t *err);
int tenant_admit(crater_daemon_t *d,
                 const char *tenant,
                 const crater_jobspec_t *spec,
                 crater_error_t *err);
crater_token_rec_t *token_lookup(crater_daemon_t *d, const char *tok);
/* Store a token's last use at its first use, then when it moved on by a
 * minute (a write per request would double the store's load); caller
 * holds d->mu. */
void tokens_flush_use(crater_daemon_t *d, int64_t now);
int token_add(crater_daemon_t *d, crater_token_rec_t *rec); /* steals */
/* Tenant t's own profile registry; with create, made (empty, after the
 * shared ones) when missing. NULL when absent (or ENOMEM). Caller holds
 * d->prof_lock (for writing when create). */
crater_profiles_t *tenant_profiles(crater_daemon_t *d,
                                   const char *tenant,
                                   bool create);
/* The registry a job of tenant resolves its profile in: the tenant's
 * (which defers to the shared names) or the shared one. prof_lock held. */
const crater_profiles_t *profiles_for(crater_daemon_t *d, const char *tenant);
void tenant_profiles_free(crater_daemon_t *d);

/* ---- api_*.c --------------------------------------------------------------
 */
typedef struct principal {
    crater_role_t role;
    const char *tenant; /* user */
    const char *node;   /* agent */
} principal_t;

/* The HTTP server's rate_exempt hook: true for a request carrying a
 * valid admin or agent token (they are not rate-limited: agents share an
 * address, `crater up` runs them in-process, and an admin's automation is
 * trusted). Takes d->mu. */
bool api_rate_exempt(const crater_http_req_t *r, void *arg);

/* Fill p from the Authorization header; on failure fill resp (401) and
 * return -1. Caller holds d->mu. */
int api_auth(crater_daemon_t *d,
             crater_http_req_t *r,
             crater_http_resp_t *resp,
             principal_t *p);
int api_require_admin(const principal_t *p, crater_http_resp_t *resp);
/* A paused leader (crater_daemon_pause): true after answering 503. */
bool api_paused(crater_daemon_t *d, crater_http_resp_t *resp);
/* A user's tenant; NULL for admins and agents. */
static inline const char *user_tenant(const principal_t *p)
{
    return p->role == CRATER_ROLE_USER ? p->tenant : NULL;
}
void api_errorf(crater_http_resp_t *resp,
                crater_errno_t e,
                const char *field,
                const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));
int api_body_json(crater_http_req_t *r, json_t **out, crater_http_resp_t *resp);
typedef struct api_route {
    const char *method, *path;
    crater_http_handler_f fn;
} api_route_t;
/* Add n routes, each with d as its argument. */
/* The optional {"reason": "..."} body of cancel, cordon, uncordon and
 * drain: *out gets a malloc'd copy ("" without a body; caller frees).
 * -1 with a 400 in resp for malformed JSON, another field, or a reason
 * that is not a string. */
int api_body_reason(crater_http_req_t *r, char **out, crater_http_resp_t *resp);
/* Send resp (a success the handler filled) only once every write queued
 * so far (the handler's own, through the store's async commits) is on
 * disk: a state change is acknowledged after its commit, as a submission
 * is. Call under d->mu after the change; an error resp is answered at
 * once. */
void api_answer_when_stored(crater_daemon_t *d,
                            crater_http_req_t *r,
                            crater_http_resp_t *resp);
/* Query parameter name as a byte offset (digits only, at most
 * CRATER_API_MAX_OFFSET); absent: 0. Fills a 400 naming it otherwise. */
#define CRATER_API_MAX_OFFSET (1ull << 53)
int api_query_offset(crater_http_req_t *r,
                     const char *name,
                     uint64_t *out,
                     crater_http_resp_t *resp);
int api_register(crater_daemon_t *d,
                 const api_route_t *routes,
                 size_t n,
                 crater_error_t *err);
int api_add_routes(crater_daemon_t *d, crater_error_t *err);
int api_jobs_routes(crater_daemon_t *d, crater_error_t *err);
int api_typical_routes(crater_daemon_t *d, crater_error_t *err);

/* ---- k8s.c, k8s_pod.c ------------------------------------------------------
 *
 * The kube-scheduler extender (doc/kubernetes.md). */
/* A stored binding (KEY_K8S + uid) charged to the core again at start
 * (persist_load, after the nodes); -1 with err for a malformed record. */
int k8s_load_binding(crater_daemon_t *d,
                     json_t *v,
                     const char *key,
                     crater_error_t *err);
/* What a v1.Pod asks; strings borrowed from the pod's JSON. */
typedef struct k8s_pod {
    const char *name, *ns, *uid;
    json_t *annotations; /* borrowed; NULL when none */
    uint32_t gpus;
    uint64_t gpu_mem_bytes; /* per GPU; 0: whole GPUs */
    uint64_t cpu_milli, mem_bytes;
} k8s_pod_t;
/* A Kubernetes quantity ("500m", "2", "20Gi", "1e3" is refused) in
 * thousandths of its unit; -1 when it is not one or overflows. */
int k8s_quantity_milli(const char *q, uint64_t *out);
/* Read pod (v1.Pod JSON); errors name the field ("Pod.spec..."). */
int k8s_pod_read(json_t *pod, k8s_pod_t *out, crater_error_t *err);
/* The Crater job spec of p, defaults applied (caller destroys). */
int k8s_pod_spec(crater_daemon_t *d,
                 const k8s_pod_t *p,
                 crater_jobspec_t **spec,
                 crater_error_t *err);
int k8s_init(crater_daemon_t *d, crater_error_t *err);
void k8s_free(crater_daemon_t *d);
int api_k8s_routes(crater_daemon_t *d, crater_error_t *err);

/* ---- typical.c ------------------------------------------------------------
 *
 * Crater's typical-task distribution (scheduler.typicalTasks). */
/* Create the histogram and install the prior (nothing when off). */
int typical_init(crater_daemon_t *d, crater_error_t *err);
void typical_free(crater_daemon_t *d);
/* An admitted submission: count j's request once per replica and install
 * the distribution in d->sched when it moved enough. */
void typical_note(crater_daemon_t *d, const djob_t *j);
/* At load: count every stored job in id order, then install. */
void typical_rebuild(crater_daemon_t *d);
/* A node was added: reinstall at the next submission. */
void typical_nodes_changed(crater_daemon_t *d);
int api_nodes_routes(crater_daemon_t *d, crater_error_t *err);
int api_agents_routes(crater_daemon_t *d, crater_error_t *err);
int api_admin_routes(crater_daemon_t *d, crater_error_t *err);

/* ---- persist.c ------------------------------------------------------------
 */
/* DATA/logs/<id>.<attempt>.<stream>; -1 when stream is not stdout or
 * stderr (0: the stream index in *which when which is not NULL). */
int log_path(crater_daemon_t *d,
             uint64_t id,
             uint32_t attempt,
             const char *stream,
             int *which,
             char *buf,
             size_t n);
/* The same for replica r of a multi-replica job:
 * DATA/logs/<id>.<attempt>.r<r>.<stream> (r 0: log_path's name). */
int log_path_replica(crater_daemon_t *d,
                     uint64_t id,
                     uint32_t attempt,
                     uint32_t replica,
                     const char *stream,
                     int *which,
                     char *buf,
                     size_t n);
/* Log counters of j reset for a later attempt (a no-op for attempt <=
 * the one they count). */
void job_log_attempt(djob_t *j, uint32_t attempt);
/* Every byte of j's latest attempt's output has arrived (or the job is
 * not finished: then false). */
bool job_logs_complete(const djob_t *j);
int persist_load(crater_daemon_t *d, crater_error_t *err);
/* The records under prefix for the start's load: from the warm copy when
 * the start has one (a promoted standby), else listed from the store.
 * Caller frees out with crater_skv_list_free. */
int persist_list(crater_daemon_t *d,
                 const char *prefix,
                 crater_skv_list_t *out,
                 crater_error_t *err);
int persist_put_json(crater_daemon_t *d,
                     const char *key,
                     json_t *v,
                     crater_store_done_f cb,
                     void *arg);
int metrics_setup(crater_daemon_t *d, crater_error_t *err);
/* opsmetrics.c: the gauges the alert rules need (setup after the store
 * opens; publish under d->mu at each scrape; free after the store closes). */
int ops_metrics_setup(crater_daemon_t *d, crater_error_t *err);
void ops_metrics_publish(crater_daemon_t *d);
void ops_metrics_free(crater_daemon_t *d);
char *metrics_render(crater_daemon_t *d, size_t *len);

#endif /* CRATER_DAEMON_INTERNAL_H */
