/* svcplan.h - what an inference service's replicas must do to reach the
 * count the autoscaler wants (internal to Crater; see svcplan.c).
 *
 * Pure: the caller (craterd's service controller, src/daemon/services.c)
 * describes each replica it holds and the counts it wants; the planner
 * returns the actions, the caller performs them. The unit test drives the
 * same function.
 *
 *     crater__svc_rep_t reps[n] = {...};        // id, role, ready, since
 *     crater__svc_action_t act[CRATER__SVC_MAX_ACTIONS];
 *     size_t k = crater__svc_plan(reps, n, desired, warm, act, max);
 *
 * Ownership: the caller owns every array; nothing is kept between calls.
 */
#ifndef CRATER_SCHED_SVCPLAN_H
#define CRATER_SCHED_SVCPLAN_H

#include <stddef.h>
#include <stdint.h>

/* Where a replica serves: in traffic (the gateway routes to it once
 * ready) or in the warm pool (started and ready, out of traffic). */
typedef enum crater__svc_role {
    CRATER__SVC_TRAFFIC,
    CRATER__SVC_WARM,
} crater__svc_role_t;

typedef struct crater__svc_rep {
    uint64_t id;             /* the caller's name for it (a job id) */
    crater__svc_role_t role; /* where it serves now */
    int ready;               /* answers its readiness probe */
    int64_t since_ms;        /* created: the newest goes first */
} crater__svc_rep_t;

typedef enum crater__svc_op {
    CRATER__SVC_START_TRAFFIC, /* create a replica for traffic (id 0) */
    CRATER__SVC_START_WARM,    /* create a replica for the warm pool */
    CRATER__SVC_PROMOTE,       /* a warm replica moves into traffic */
    CRATER__SVC_DEMOTE,        /* a ready replica leaves traffic, stays warm */
    CRATER__SVC_STOP,          /* stop a replica */
} crater__svc_op_t;

typedef struct crater__svc_action {
    crater__svc_op_t op;
    uint64_t id; /* the replica (0 for the starts) */
} crater__svc_action_t;

/* Plan the actions that bring reps to `desired` replicas in traffic and
 * `warm` in the warm pool. At most max actions are written to out; the
 * return value is how many. The order of preference:
 *   - short of traffic: promote warm replicas, ready ones first (oldest
 *     first), then starting ones; only then start new ones;
 *   - too many in traffic: the ones not ready go first, then the newest;
 *     a ready one is demoted into the warm pool while the pool is short,
 *     else stopped;
 *   - then the warm pool is filled (starts) or trimmed (starting ones
 *     first, then the newest).
 * Replicas are stopped, never left over: the counts after the plan are
 * exactly desired and warm. */
size_t crater__svc_plan(const crater__svc_rep_t *reps,
                        size_t n,
                        unsigned desired,
                        unsigned warm,
                        crater__svc_action_t *out,
                        size_t max);

/* During a rollout (maxSurge 1, maxUnavailable 0: src/daemon/rollout.c)
 * the autoscaler keeps acting: its count applies to the new version, the
 * old versions drain. What the caller does with one decision: */
typedef struct crater__svc_split {
    unsigned retire_old;  /* old replicas in traffic to drain now (the
                             caller picks: not ready first, then oldest) */
    unsigned desired_new; /* crater__svc_plan's count for the new
                             version's replicas in traffic (the surge
                             replica waited for apart) */
    unsigned warm_new;    /* and its warm pool (old warm ones fill it
                             until the rollout ends) */
} crater__svc_split_t;

/* What the caller counts (live replicas only). */
typedef struct crater__svc_roll_in {
    unsigned desired;     /* the autoscaler's count */
    unsigned old_traffic; /* replicas of older versions in traffic */
    unsigned old_ready;   /* of those, ready */
    unsigned new_traffic; /* of the new version in traffic, surge apart */
    unsigned ready;       /* every ready replica in traffic (surge too) */
    unsigned warm;        /* the warm pool's size */
    unsigned old_warm;    /* old replicas in the warm pool */
} crater__svc_roll_in_t;

/* Beyond desired, old replicas go first (the new version is what the
 * service is moving to), the ones not ready first, and a ready one only
 * while the ready replicas in traffic stay at least desired
 * (maxUnavailable 0 holds through a scale-down too); short of desired,
 * new-version replicas start. */
crater__svc_split_t crater__svc_roll_split(const crater__svc_roll_in_t *in);

/* A name for an action ("start-traffic", "promote", ...). */
const char *crater__svc_op_name(crater__svc_op_t op);

#endif /* CRATER_SCHED_SVCPLAN_H */
