/* pass.h - the scheduling pass, shared by craterd and `crater sim replay`.
 *
 * One pass takes the pending jobs in order and decides, for each: place
 * it (a gang: all replicas at once), else plan a preemption for it (a
 * gang: victims for all its replicas, crater_sched_plan_gang_preemption),
 * else say why it waits. Around that it expires hard deadlines, asks the host
 * whether a job's dependencies are met, keeps the EASY backfill
 * reservation of the queue's head (reserve.h) and chooses between a full
 * pass and a fresh one:
 *
 *   full pass   capacity came back since the last full pass (a release, a
 *               node up, new utilisation: crater_pass_capacity_changed):
 *               every pending job in crater_queue_order() order (with the
 *               host's fair-share input), a new reservation;
 *   fresh pass  otherwise, only the jobs queued since the last pass
 *               (crater_pass_queued), highest priority first, then id:
 *               capacity only shrank, so the others still do not fit.
 *
 * Within one pass a request shape that fits nowhere is not tried again
 * (a memo keyed by every request field the core reads and the replica
 * count), until a preemption frees capacity.
 *
 * Effects go through crater_pass_ops_t: craterd binds, stops victims on
 * their agents and writes the decision log; the simulator starts runs on
 * its simulated clock and evicts victims at once. The pass itself is pure
 * like the rest of the core: no I/O, no clock (now_ms is an argument), no
 * globals. It commits what it places to the core (task ids from the
 * host); releasing a task that ended or was preempted is the host's.
 *
 * Ownership: the pass borrows the core and the queue (the host pushes and
 * removes queue entries: a bound or failed job leaves the queue in the
 * host's op). Errors: -1 with err set; CRATER_ENOMEM, or an op's error.
 * "A function that takes a callback and fails before calling it never
 * calls it."
 */
#ifndef CRATER_PASS_H
#define CRATER_PASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"
#include "crater/queue.h"
#include "crater/reserve.h"
#include "crater/sched.h"

typedef struct crater_pass crater_pass_t;

/* What the pass needs to know about one pending job. */
typedef struct crater_pass_job {
    const crater_request_t *req; /* borrowed until the next op call */
    uint32_t replicas;           /* > 1: a gang, placed all at once */
    uint64_t task;               /* core task id (of replica 0) */
    uint64_t time_limit_ms;      /* what its run may still take; 0 none */
} crater_pass_job_t;

/* Why a job stays pending (crater_pass_ops_t.pending). */
typedef enum crater_pass_wait {
    CRATER_PASS_WAIT_READY,    /* not ready: dependency, cap (host's why) */
    CRATER_PASS_WAIT_BACKFILL, /* fits now but would delay the head */
    CRATER_PASS_WAIT_GANG,     /* a gang that does not fit at once */
    CRATER_PASS_WAIT_NOPLAN,   /* fits nowhere, no preemption plan */
    CRATER_PASS_WAIT_STOPPING  /* its plan's victims are already stopping */
} crater_pass_wait_t;

#define CRATER_PASS_OPS_VERSION 1

/* The host's side. arg is crater_pass_create's. Ops marked optional may
 * be NULL. Ops are called from within crater_pass_run() only. */
typedef struct crater_pass_ops {
    int version; /* CRATER_PASS_OPS_VERSION */
    /* Job id as the pass sees it: 1 and *job when it is pending and to
     * be considered now; 0 to skip it (gone, placed, waiting for its
     * victims to stop). */
    int (*job)(void *arg, uint64_t id, crater_pass_job_t *job);
    /* Optional. 1 ready; 0 wait (*why says why); -1 it can never run
     * (*why says why: the pass fails it). */
    int (*ready)(void *arg, uint64_t id, crater_error_t *why);
    /* The job was placed and committed to the core (n placements: one,
     * or one per gang replica under task ids task .. task + n - 1). */
    int (*bind)(void *arg,
                uint64_t id,
                const crater_placement_t *pl,
                uint32_t n,
                crater_error_t *err);
    /* Preempt plan->victims (core task ids) for job id. 1: they are gone
     * now, released from the core (the pass then commits and binds the
     * job on plan->placement; a gang on every replica's planned
     * placement, plan->placement being replica 0's; the victims may be
     * on several nodes); 0: they were ordered to stop (the job
     * waits; the host calls crater_pass_capacity_changed once they have);
     * 2: every victim was already stopping (nothing new decided; the
     * pass records CRATER_PASS_WAIT_STOPPING); -1 error. */
    int (*preempt)(void *arg,
                   uint64_t id,
                   const crater_preempt_plan_t *plan,
                   crater_error_t *err);
    /* Optional. Job id stays pending for why. Without it no reasons are
     * built (the core skips its explanations: the simulator's case). */
    void (*pending)(void *arg,
                    uint64_t id,
                    crater_pass_wait_t kind,
                    const crater_error_t *why);
    /* Job id can never run (reason: hard deadline, failed dependency). */
    void (*fail)(void *arg, uint64_t id, const char *reason);
    /* Optional (no backfill without it). The running tasks' expected ends
     * for the head's reservation: *ends points at host-owned memory valid
     * until the next op call; returns how many. */
    size_t (*ends)(void *arg, const crater_task_end_t **ends);
    /* Optional. Fair-share input for the queue order; in->usage is
     * host-owned, valid until the next op call. 0, or -1 for none. */
    int (*share)(void *arg, crater_share_input_t *in);
} crater_pass_ops_t;

typedef struct crater_pass_params {
    bool preempt;  /* plan preemptions for jobs that fit nowhere */
    bool backfill; /* EASY: reserve the head's start (needs ops.ends) */
    /* The host promises that a job's request, replica count and task id
     * (all of crater_pass_job_t but the time limit) never change while
     * the job exists, and it has neither ops.ready nor ops.pending (the
     * simulator). The pass then tags its kept queue order with each job's
     * request shape and skips, in a full pass, a job whose shape already
     * fits nowhere in this pass without asking ops.job: the same
     * decisions, without touching every queued job on every release. */
    bool fixed_requests;
    /* ops.ends gives a binary min-heap by (end_ms, task) (reserve.h:
     * crater_sched_reserve_heap), not a list in any order. */
    bool ends_heap;
} crater_pass_params_t;

/* Counters since creation. */
typedef struct crater_pass_stats {
    uint64_t full_passes, fresh_passes;
    uint64_t place_calls, plan_calls;
    uint64_t bound, preemptions; /* preempt ops that stopped victims */
} crater_pass_stats_t;

/* NULL on ENOMEM or a bad ops version. s, q, ops and arg are borrowed and
 * must outlive the pass. Starts with capacity "changed": the first run is
 * a full pass. */
crater_pass_t *crater_pass_create(crater_sched_t *s,
                                  crater_queue_t *q,
                                  const crater_pass_params_t *params,
                                  const crater_pass_ops_t *ops,
                                  void *arg);
void crater_pass_destroy(crater_pass_t *p); /* NULL: nothing */

/* Job id was pushed onto the queue (submitted or requeued): the next pass
 * considers it even when it is a fresh one. 0, or -1 CRATER_ENOMEM (the
 * next pass is then a full one, so nothing is lost). */
int crater_pass_queued(crater_pass_t *p, uint64_t id, crater_error_t *err);
/* Capacity came back: the next pass is a full one. */
void crater_pass_capacity_changed(crater_pass_t *p);
/* Is a pass due (capacity changed, or jobs queued since the last)? */
bool crater_pass_due(const crater_pass_t *p);

/* Run one pass at now_ms (the host's clock). 1: a preemption freed
 * capacity during the pass (victims gone at once): the next pass is a
 * full one, and the host decides when to run it; 0 done; -1 error (the
 * pass stops at the job that failed; what was decided before stays). */
int crater_pass_run(crater_pass_t *p, uint64_t now_ms, crater_error_t *err);

void crater_pass_get_stats(const crater_pass_t *p, crater_pass_stats_t *out);
/* The head's reservation, or NULL when there is none. Borrowed. */
const crater_reservation_t *crater_pass_reservation(const crater_pass_t *p);

#endif /* CRATER_PASS_H */
