/* reserve.h - reservations for EASY backfill, on the scheduling core.
 *
 * The queue (queue.h) decides with a shadow time and an "extra"; this is
 * where both come from, node by node, with the core's real filters, and
 * where a candidate is checked against them:
 *
 *   crater_sched_reserve()        the head job H fits nowhere now: given
 *                                 when running tasks are expected to end
 *                                 (start + timeLimit; a task with no limit
 *                                 never ends), find the earliest time H
 *                                 fits on some node (the shadow time), the
 *                                 placement it would get there, and what
 *                                 that node still has free at that time
 *                                 once H has started (the extra);
 *   crater_sched_place_backfill() place a later job J now only if it
 *                                 cannot delay H: J ends by the shadow
 *                                 time (crater_backfill_check's
 *                                 before-shadow), or J lands on another
 *                                 node than H's, or on H's node with none
 *                                 of H's GPUs and within its extra CPU and
 *                                 memory. A J the core would put on H's
 *                                 node against these rules is placed
 *                                 again with that node left out.
 *
 * Shared by craterd (src/daemon/backfill.c) and `crater sim replay`
 * (src/sim/replay.c), so the simulator measures the rule the daemon runs.
 * Pure like the core: times are arguments (ms on the caller's clock).
 *
 * A gang head (crater_sched_reserve_gang) is reserved the same way: the
 * shadow time is the earliest end time at which all its replicas fit,
 * and its reservation names every node its replicas would take then
 * (nnodes, nodes[]). Behind it a J that does not end by the shadow time
 * goes only to the other nodes (no extra on a gang's nodes). A gang
 * behind any head is placed with crater_sched_place_gang_backfill: by
 * the same rule, all its replicas off the head's node(s).
 *
 * Approximations, said where they are made: the extra on H's node counts
 * CPU and memory, not which NUMA node they come from. A gang head's
 * replicas are counted node by node with the filters' own choice of GPUs
 * (no search over GPU sets as gang.c does), so its shadow time can be
 * late when only another arrangement would fit earlier. A running task
 * that overruns its expected end (a limit stop takes up to its grace
 * period) makes the shadow time late by that much.
 */
#ifndef CRATER_RESERVE_H
#define CRATER_RESERVE_H

#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"
#include "crater/queue.h"
#include "crater/sched.h"

/* A running task and when it is expected to have ended. */
typedef struct crater_task_end {
    uint64_t task;
    uint64_t end_ms;
} crater_task_end_t;

/* The most nodes a gang head's reservation can name: a gang whose
 * replicas would spread wider gets none. */
#define CRATER_RESV_MAX_NODES 64

typedef struct crater_reservation {
    uint64_t head;                /* caller's id of H (informative) */
    crater_placement_t placement; /* H (a gang: its first replica) at the
                                     shadow time */
    crater_backfill_window_t w;   /* shadow time; extra on H's node:
                                     GPUs outside H's, CPU millicores,
                                     memory bytes (disk unused; none for
                                     a gang) */
    uint32_t nnodes; /* a gang head: how many nodes its replicas take at
                        the shadow time; 0: one job on placement.node */
    uint32_t nodes[CRATER_RESV_MAX_NODES]; /* those nodes, ascending */
} crater_reservation_t;

/* Find H's reservation. ends[] (any order; tasks the core does not know
 * are skipped) lists the running tasks that will end; the others are
 * taken to run forever. Nodes are tried with their ending tasks released
 * in end order (exactly undone afterwards: the core's state is unchanged
 * on return); the earliest time wins, then the lowest node id. 0 and
 * *out on success; -1 with CRATER_EUNSCHED when H does not fit even
 * after every listed task ended (no reservation: the caller falls back
 * to placing later jobs greedily), CRATER_ENOMEM. */
int crater_sched_reserve(crater_sched_t *s,
                         const crater_request_t *head,
                         const crater_task_end_t *ends,
                         size_t n,
                         crater_reservation_t *out,
                         crater_error_t *err);

/* The same from ends kept by the caller as a binary min-heap (h[i] no
 * later than h[2i+1] and h[2i+2], by end_ms, then task): it is read, not
 * changed, and only up to the shadow time, so the cost does not grow with
 * the number of running tasks (the simulator keeps its ends so). */
int crater_sched_reserve_heap(crater_sched_t *s,
                              const crater_request_t *head,
                              const crater_task_end_t *heap,
                              size_t n,
                              crater_reservation_t *out,
                              crater_error_t *err);

/* The reservation of a gang head of replicas copies of head: the
 * earliest end time at which every replica fits (each node holding as
 * many as the filters fit on it one after another), the nodes they take
 * (lowest ids first), the first replica's placement there; no extra.
 * ends[] any order (crater_sched_reserve_gang) or a heap
 * (crater_sched_reserve_gang_heap), as above. The state is unchanged on
 * return. -1 with CRATER_EUNSCHED when the gang does not fit even after
 * every listed task ended, or would take more than CRATER_RESV_MAX_NODES
 * nodes; CRATER_ENOMEM. */
int crater_sched_reserve_gang(crater_sched_t *s,
                              const crater_request_t *head,
                              uint32_t replicas,
                              const crater_task_end_t *ends,
                              size_t n,
                              crater_reservation_t *out,
                              crater_error_t *err);
int crater_sched_reserve_gang_heap(crater_sched_t *s,
                                   const crater_request_t *head,
                                   uint32_t replicas,
                                   const crater_task_end_t *heap,
                                   size_t n,
                                   crater_reservation_t *out,
                                   crater_error_t *err);

/* Place a gang (crater_sched_place_gang: replicas committed under task
 * ids first_task + i on success) without delaying r's head: when its
 * run ends by the shadow time (limit_ms, 0 = unbounded) anywhere, else
 * with the head's node(s) left out. 0 placed; 1 it fits, but only on the
 * head's node(s) (nothing committed; err says so); -1 it does not fit
 * (err from crater_sched_place_gang). */
int crater_sched_place_gang_backfill(crater_sched_t *s,
                                     const crater_request_t *req,
                                     uint32_t replicas,
                                     uint64_t first_task,
                                     uint64_t now_ms,
                                     uint64_t limit_ms,
                                     const crater_reservation_t *r,
                                     crater_placement_t *out,
                                     crater_error_t *err);

/* Place req now without delaying r's head. limit_ms is req's run time
 * bound (timeLimit; 0 = unbounded). 0: *p is where to commit it and *v
 * says why (BEFORE_SHADOW, or EXTRA: on another node or in r's extra,
 * which is then used up by crater_backfill_commit). 1: it fits now but
 * would delay the head (*v DENY, err says so: CRATER_EUNSCHED). -1 with
 * CRATER_EUNSCHED: it fits nowhere now (err from the core; may be NULL
 * as for crater_sched_place). Changes only r. */
int crater_sched_place_backfill(crater_sched_t *s,
                                const crater_request_t *req,
                                uint64_t now_ms,
                                uint64_t limit_ms,
                                crater_reservation_t *r,
                                crater_placement_t *p,
                                crater_backfill_verdict_t *v,
                                crater_error_t *err);

#endif /* CRATER_RESERVE_H */
