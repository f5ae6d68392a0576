/* services.h - the service controller's state, shared by services.c (the
 * controller) and api_services.c (its JSON and API). Internal to
 * src/daemon; every function here is called with d->mu held.
 */
#ifndef CRATER_DAEMON_SERVICES_H
#define CRATER_DAEMON_SERVICES_H

#include "daemon/internal.h"
#include "sched/autoscale.h"

#define SVC_DECISIONS 16 /* kept per service for describe */

/* A rollout (rollout.c): the service's replicas move, one at a time, from
 * the versions they run to the service's version `to`. */
typedef enum ro_state {
    RO_NONE,    /* never rolled */
    RO_ROLLING, /* in progress: the plan waits */
    RO_DONE,    /* every replica runs `to` */
    RO_FAILED,  /* stopped: `reason`; the spec is `from` again */
} ro_state_t;

typedef struct rollout {
    ro_state_t state;
    uint32_t from, to;
    unsigned total, rolled; /* old replicas in traffic at start; replaced */
    uint64_t surge;         /* the new replica waited for (0: none) */
    int64_t surge_ms, started_ms, ended_ms, ready_timeout_ms;
    unsigned crashes;            /* new replicas ended before ready */
    uint64_t model, prev_model;  /* a pipeline's new and old model job */
    json_t *prev_norm;           /* version `from`, owned until the end */
    crater_jobspec_t *prev_spec; /* (NULL after a restart) */
    char reason[200];
} rollout_t;

/* One inference service: its job, its autoscaler and what the controller
 * remembers between ticks. Owned by d->svcs. */
typedef struct dservice {
    uint64_t id; /* its job */
    char *name;
    crater__as_t *as;
    crater__as_params_t params;
    unsigned initial, desired, warm;
    int64_t created_ms;
    unsigned creating; /* replica submissions not committed yet */
    uint32_t next_index;
    int64_t load_last_ms, load_max_ms, load_sum_ms;
    uint32_t loads;
    uint64_t answered_prev, unserved_prev;
    int64_t prev_ms, logged_ms;
    uint32_t crashes;      /* replicas ended on their own in a row */
    int64_t next_start_ms; /* no start before (backoff after crashes) */
    unsigned hold_n;       /* at least this many in traffic ... */
    int64_t hold_until_ms; /* ... until then (svc_hold) */
    bool hold_initial;     /* the submission's count: also until loaded */
    json_t *decisions;     /* the last SVC_DECISIONS, oldest first */
    crater__as_decision_t last;
    bool decided;
    uint32_t top_version; /* the highest version ever asked for */
    rollout_t ro;
} dservice_t;

/* A service's replicas by role and readiness (not the ended ones). */
typedef struct counts {
    unsigned traffic, ready, warm, warm_ready, starting;
} counts_t;

dservice_t *svc_find(crater_daemon_t *d, uint64_t id);
dservice_t *svc_by_name(crater_daemon_t *d, const char *name);
counts_t svc_counts(crater_daemon_t *d, const dservice_t *s);
/* Is j a stored replica of s? */
bool rep_of(const djob_t *j, const dservice_t *s);
const char *role_name(int role); /* "traffic" or "warm" */
/* The replica's base URL, http://<node addr>:<port>; -1 when unplaced. */
int rep_url(crater_daemon_t *d, const djob_t *j, char *buf, size_t n);

/* A replica neither ended, nor being stopped or drained. */
bool rep_live(const djob_t *j);
/* Create a replica of s in role from its job's spec (its version): the
 * new job's id, 0 on failure (logged). */
uint64_t svc_start(crater_daemon_t *d, dservice_t *s, int role);
/* Stop replica j: out of the gateway at once, and stopped once the
 * requests in flight to it are answered (at most SVC_DRAIN_MS). */
void svc_retire(
    crater_daemon_t *d, dservice_t *s, djob_t *j, const char *why, int64_t now);

/* ---- rollout.c ---- */

/* Start rolling s (its job svc) to spec/norm (taken on success): -1 with
 * err naming the field (a rollout running: EEXIST; a field a rollout may
 * not change). ready_timeout_ms: how long a new replica may take to be
 * ready (0: ROLLOUT_READY_MS). */
int rollout_start(crater_daemon_t *d,
                  dservice_t *s,
                  djob_t *svc,
                  crater_jobspec_t *spec,
                  json_t *norm,
                  int64_t ready_timeout_ms,
                  crater_error_t *err);
/* One tick: true while rolling (the plan must wait); actions logged in
 * actions. */
bool rollout_step(crater_daemon_t *d,
                  dservice_t *s,
                  int64_t now,
                  json_t *actions);
/* Replica j of s ended before it was ever ready. */
void rollout_crash(dservice_t *s, const djob_t *j);
/* After a restart: the stored rollout is s's again (a rolling one goes
 * on); a record without one, with replicas of other versions than the
 * job's in traffic, resumes a rollout from what is known (no old spec). */
void rollout_resume(crater_daemon_t *d, dservice_t *s);
/* Store s's rollout with its service job (the job's record is written). */
void rollout_save(crater_daemon_t *d, dservice_t *s);
json_t *rollout_json(const dservice_t *s);
/* Is replica j one the plan handles (while rolling: the new version's,
 * the surge replica apart; else all)? */
bool rollout_plans(const dservice_t *s, const djob_t *j);
/* While rolling, the autoscaler's count `desired` applies to the new
 * version: old replicas in traffic beyond it are drained now (logged in
 * actions), and *want, *warm are the plan's counts for the replicas
 * rollout_plans() admits. Not rolling: desired and the pool's size. */
void rollout_split(crater_daemon_t *d,
                   dservice_t *s,
                   unsigned desired,
                   int64_t now,
                   json_t *actions,
                   unsigned *want,
                   unsigned *warm);

/* ---- pipeline.c ---- */

/* A service with `after: [JOB]`: true while no job named JOB has
 * succeeded yet (the plan waits: no replica); a newer succeeded JOB than
 * the one served starts a rollout to it. */
bool pipeline_step(crater_daemon_t *d, dservice_t *s);
/* CRATER_MODEL_PATH and CRATER_MODEL_JOB for a replica of svc. -1 ENOMEM */
int pipeline_env(crater_daemon_t *d,
                 const djob_t *svc,
                 crater_jobspec_t *spec,
                 json_t *norm);
void rollout_free(rollout_t *ro);

#endif /* CRATER_DAEMON_SERVICES_H */
