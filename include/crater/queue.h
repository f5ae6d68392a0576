/* queue.h - the pending-job queue: priority classes, scheduling order
 * (priority, EDF, weighted fair share, age, id) and the EASY backfill rule.
 *
 * Pure: no I/O, no clock, no globals. Time comes in as arguments (ms on
 * the same clock as submit_ms and deadline_ms, normally Unix epoch ms), so
 * the control plane and the simulator get the same order for the same
 * inputs. The queue does not own allocations: each call to
 * crater_queue_order() is told the cluster capacity and what every tenant
 * holds right now.
 *
 * Order (doc/queue.md has the formulas and a worked example):
 *   1. effective priority, higher first (plus the optional age boost);
 *   2. EDF: jobs with a deadline (soft or hard) before jobs without, the
 *      earlier deadline first;
 *   3. weighted fair share: among jobs still tied, the tenant with the
 *      lowest weighted dominant share goes next; after one of its jobs is
 *      emitted that job's demand is added to the tenant's allocation for
 *      the rest of the pass (DRF progressive filling), so a tenant with a
 *      thousand small jobs does not take the whole tie;
 *   4. age: older submit_ms first;
 *   5. id, so the order is total and deterministic, independent of the
 *      order in which jobs were pushed.
 *
 * Ownership: the queue copies every entry it is given (including the
 * tenant string) and frees its copies in crater_queue_destroy(). Entry
 * pointers returned by crater_queue_get() are borrowed and stay valid
 * until the next push, remove or destroy.
 */
#ifndef CRATER_QUEUE_H
#define CRATER_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"
#include "crater/priority.h" /* the classes it orders by */

/* ---- entries ----------------------------------------------------------- */

/* Resource dimensions for fair share and backfill. Units are the caller's
 * choice as long as demand, allocation, capacity and backfill "extra" use
 * the same unit per dimension (e.g. GPUs, millicores, bytes, IOPS). */
typedef enum crater_qdim {
    CRATER_QDIM_GPU,
    CRATER_QDIM_CPU,
    CRATER_QDIM_MEM,
    CRATER_QDIM_DISK,
    CRATER_QDIM_COUNT
} crater_qdim_t;

typedef struct crater_queue_entry {
    uint64_t id;
    char *tenant;                     /* non-empty; copied by push */
    int32_t priority;                 /* effective priority (see above) */
    int64_t deadline_ms;              /* 0 = none; otherwise > 0 */
    bool hard_deadline;               /* needs deadline_ms != 0 */
    uint64_t submit_ms;               /* age key */
    uint64_t est_runtime_ms;          /* 0 = unknown */
    double demand[CRATER_QDIM_COUNT]; /* finite, >= 0 */
} crater_queue_entry_t;

typedef struct crater_queue crater_queue_t;

/* NULL on out-of-memory. */
crater_queue_t *crater_queue_create(void);
/* Frees the queue, its entries and tenant table. NULL is accepted. */
void crater_queue_destroy(crater_queue_t *q);

/* Copy e into the queue. Errors (the queue is unchanged): CRATER_EEXIST
 * for an id already queued; CRATER_EINVAL for a NULL or empty tenant;
 * CRATER_ERANGE for a negative deadline or a negative/non-finite demand;
 * CRATER_ECONFLICT for hard_deadline without a deadline; CRATER_ELIMIT
 * past UINT32_MAX - 1 entries; CRATER_ENOMEM. Error fields name the
 * entry member ("deadline_ms", "demand[1]"). */
int crater_queue_push(crater_queue_t *q,
                      const crater_queue_entry_t *e,
                      crater_error_t *err);

/* Remove the entry with this id. CRATER_ENOENT when there is none. */
int crater_queue_remove(crater_queue_t *q, uint64_t id, crater_error_t *err);

size_t crater_queue_count(const crater_queue_t *q);

/* Borrowed pointer to the entry with this id, NULL when there is none. */
const crater_queue_entry_t *crater_queue_get(const crater_queue_t *q,
                                             uint64_t id);

/* Tenant weight for fair share: finite and > 0 (CRATER_ERANGE otherwise).
 * Tenants default to 1.0. A weight may be set before the tenant has any
 * job and persists after its last job leaves. */
int crater_queue_set_tenant_weight(crater_queue_t *q,
                                   const char *tenant,
                                   double weight,
                                   crater_error_t *err);
/* 1.0 for a tenant never given a weight. */
double crater_queue_tenant_weight(const crater_queue_t *q, const char *tenant);

/* Optional aging: a job that has waited w ms (now_ms - submit_ms) gets
 * min(cap, step * floor(w / interval_ms)) added to its priority for
 * ordering. interval_ms 0 turns aging off (the default). step and cap
 * must be >= 0 (CRATER_ERANGE). Keep cap below the gap between classes
 * if a boosted job must never overtake a higher class. */
int crater_queue_set_age_boost(crater_queue_t *q,
                               uint64_t interval_ms,
                               int32_t step,
                               int32_t cap,
                               crater_error_t *err);

/* ---- ordering ---------------------------------------------------------- */

/* Without share input, does crater_queue_order() depend on the entries
 * alone (no age boost, so not on now_ms)? Its order is then the one of
 * crater_queue_entry_cmp(), total and fixed for an entry while it is
 * queued: a caller may keep an order and merge new entries into it
 * instead of asking for the whole queue again (the scheduling pass). */
bool crater_queue_order_is_static(const crater_queue_t *q);
/* <0, 0 or >0: a comes before, is, or comes after b in that order
 * (priority, jobs with a deadline by deadline, submit time, id). */
int crater_queue_entry_cmp(const crater_queue_entry_t *a,
                           const crater_queue_entry_t *b);

/* What one tenant holds in the cluster now (same units as demand). */
typedef struct crater_tenant_usage {
    const char *tenant;
    double alloc[CRATER_QDIM_COUNT];
} crater_tenant_usage_t;

typedef struct crater_share_input {
    double capacity[CRATER_QDIM_COUNT]; /* cluster total; a dimension
                                           with capacity 0 is ignored */
    const crater_tenant_usage_t *usage; /* may be NULL when nusage is 0;
                                           tenants not listed hold 0 */
    size_t nusage;
} crater_share_input_t;

/* Weighted dominant share of an allocation:
 *   max over d with capacity[d] > 0 of alloc[d] / capacity[d], / weight. */
double crater_weighted_dominant_share(const double alloc[CRATER_QDIM_COUNT],
                                      const double capacity[CRATER_QDIM_COUNT],
                                      double weight);

/* Write every queued id, in scheduling order, to ids_out (room for
 * crater_queue_count(q) ids). share may be NULL (no allocations: fair
 * share then only reacts to the demand emitted during this pass, with
 * all capacities ignored, i.e. it falls through to age and id). Jobs
 * whose hard deadline has already been missed are still listed: call
 * crater_queue_expired() first and fail those.
 * Errors: CRATER_ERANGE for a negative/non-finite capacity or alloc,
 * CRATER_EINVAL for a NULL or duplicate tenant in usage (field
 * "usage.tenant", the index in the text), CRATER_ENOMEM. O(n log n). */
int crater_queue_order(const crater_queue_t *q,
                       uint64_t now_ms,
                       const crater_share_input_t *share,
                       uint64_t *ids_out,
                       crater_error_t *err);

/* Jobs with a hard deadline that can no longer be met: now_ms +
 * est_runtime_ms > deadline_ms, taking an unknown runtime as 0 (so such a
 * job expires once now_ms > deadline_ms). Soft deadlines never expire.
 * Writes their ids in ascending order to ids_out (room for
 * crater_queue_count(q) ids; may be NULL to only count) and returns how
 * many. The queue is not changed. */
size_t crater_queue_expired(const crater_queue_t *q,
                            uint64_t now_ms,
                            uint64_t *ids_out);

/* ---- backfill (EASY) ----------------------------------------------------
 *
 * The head job H (the first job in order that does not fit now) gets a
 * reservation: its earliest start time, the "shadow time", and the
 * resources that will still be free at that time once H has started, the
 * "extra". Both are computed by the caller from the running jobs' expected
 * ends. A later job J that fits now may start without delaying H if
 *   now_ms + J.est_runtime_ms <= shadow_ms   (it is gone by then), or
 *   J.demand <= extra in every dimension     (H has room even so).
 * A job with unknown runtime (0) may only use extra. When J starts on the
 * strength of the extra, the extra shrinks by its demand for the next
 * candidates (crater_backfill_commit). This is EASY backfilling (Lifka,
 * "The ANL/IBM SP scheduling system", JSSPP 1995) as done by Maui and
 * Slurm's sched/backfill, which call the two quantities the shadow time
 * and the extra nodes.
 */
typedef struct crater_backfill_window {
    uint64_t shadow_ms;
    double extra[CRATER_QDIM_COUNT];
} crater_backfill_window_t;

typedef enum crater_backfill_verdict {
    CRATER_BACKFILL_DENY = 0,      /* would delay the head job */
    CRATER_BACKFILL_BEFORE_SHADOW, /* ends by the shadow time */
    CRATER_BACKFILL_EXTRA,         /* fits in the extra resources */
} crater_backfill_verdict_t;

/* Decide for one candidate. Ending before the shadow time is preferred
 * when both hold, because it leaves the extra for others. */
crater_backfill_verdict_t crater_backfill_check(
    const crater_backfill_window_t *w,
    uint64_t now_ms,
    uint64_t est_runtime_ms,
    const double demand[CRATER_QDIM_COUNT]);

/* Record that a candidate started with verdict v: CRATER_BACKFILL_EXTRA
 * subtracts demand from w->extra; other verdicts change nothing. */
void crater_backfill_commit(crater_backfill_window_t *w,
                            crater_backfill_verdict_t v,
                            const double demand[CRATER_QDIM_COUNT]);

/* "deny", "before-shadow", "extra". Static strings. */
const char *crater_backfill_verdict_name(crater_backfill_verdict_t v);

#endif /* CRATER_QUEUE_H */
