/* whatif.h - `crater sim whatif`'s snapshot of a live cluster, turned
 * into a replay (replay.h) that starts where craterd is now.
 *
 * The snapshot is what the API gives (doc/api.md): the nodes with the
 * hardware documents they registered with (GET /api/v1/nodes?hardware=1),
 * and the jobs with their specs (GET /api/v1/jobs/{id}). Running and
 * bound jobs start the replay already placed (crater_replay_job_t.pin)
 * on their node, GPUs and NUMA charges, for the time they have left:
 * timeLimit less what they ran, or an assumed run time when they have no
 * limit. Pending jobs arrive at 0, in queue order (priority, then age),
 * running for their timeLimit or the same assumption. Time 0 is the
 * snapshot: a wait is measured from now.
 *
 * What is not modelled, and counted instead: multi-replica jobs (gangs)
 * and jobs whose spec no longer decodes are left out (skipped); a node
 * that is cordoned or not Ready takes nothing new.
 *
 * Pure: no I/O, no clock (now_ms is the caller's). Ownership: the
 * snapshot owns everything in it; free with crater_whatif_clear(). Jobs
 * built from it borrow its specs and pins: keep it alive while they are
 * used.
 */
#ifndef CRATER_WHATIF_H
#define CRATER_WHATIF_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"
#include "crater/jobspec.h"
#include "crater/kb.h"
#include "crater/model.h"
#include "crater/replay.h"
#include "crater/sched.h"

typedef struct crater_whatif_job {
    char *id;               /* craterd's job id */
    crater_jobspec_t *spec; /* decoded from the job's spec */
    int32_t priority;       /* effective priority, as craterd has it */
    uint64_t submitted_ms;  /* craterd's submit time (queue order) */
    bool running;           /* placed now: pl holds where */
    bool assumed;           /* runtime_ms is the assumption */
    uint64_t runtime_ms;    /* time left (running) or to run (pending) */
    crater_placement_t pl;  /* running: node index into the cluster */
} crater_whatif_job_t;

typedef struct crater_whatif {
    crater_cluster_t *cluster;
    bool *unavailable;         /* per node: cordoned or not Ready */
    crater_whatif_job_t *jobs; /* running first, then pending in queue
                                  order */
    size_t njobs, nrunning, npending;
    size_t skipped;  /* jobs left out (gangs, undecodable specs) */
    size_t nassumed; /* jobs whose run time was assumed */
} crater_whatif_t;

/* Build a snapshot from nodes (the items of GET
 * /api/v1/nodes?hardware=1) and jobs (full job objects, each as GET
 * /api/v1/jobs/{id} returns it; jobs in other states are ignored) at
 * now_ms (the clock craterd's started_ms are on). assume_ms (> 0) is the
 * run time of a job without timeLimit. Errors name the field:
 * CRATER_EINVAL "nodes[2].hardware: ...", "jobs[4].placement.node: no
 * node 'x'"; CRATER_ENOMEM. On error out is left empty. */
int crater_whatif_build(json_t *nodes,
                        json_t *jobs,
                        uint64_t now_ms,
                        uint64_t assume_ms,
                        const crater_kb_t *kb,
                        crater_whatif_t *out,
                        crater_error_t *err);
void crater_whatif_clear(crater_whatif_t *w); /* NULL: nothing */

/* Replay jobs for s (a scheduler over w->cluster, nodes in the cluster's
 * order): requests compiled from the specs, running jobs pinned on their
 * placements, every job arriving at 0, classes from the priority (high
 * >= 1000, low < 0). *jobs is caller-owned (free()); it borrows w. */
int crater_whatif_jobs(const crater_whatif_t *w,
                       const crater_sched_t *s,
                       crater_replay_job_t **jobs,
                       crater_error_t *err);

/* Cordon w's unavailable nodes in s. */
int crater_whatif_apply_nodes(const crater_whatif_t *w,
                              crater_sched_t *s,
                              crater_error_t *err);

#endif /* CRATER_WHATIF_H */
