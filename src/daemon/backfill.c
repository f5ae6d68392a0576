/* backfill.c - EASY backfill in craterd's scheduling loop (doc/queue.md).
 *
 * The first job of a pass that fits nowhere and gets no preemption plan
 * becomes the head: its start is reserved with crater_sched_reserve()
 * from the running jobs' expected ends, started_ms + timeLimit (a job
 * still bound counts from now; one being preempted from now + its grace
 * period; a job without a timeLimit never ends). Jobs of its priority or
 * lower that come after it, in the same pass or in later passes of newly
 * submitted jobs, are placed with crater_sched_place_backfill(): only
 * where they cannot delay the head. A job of higher priority is ordered
 * before the head anyway and is placed as usual. The reservation is
 * dropped when capacity comes back (a full pass recomputes it), so a
 * head that was placed, cancelled or overtaken holds nothing back for
 * long. With scheduler.backfill false no reservation is made and every
 * job that fits starts (greedy). The same core functions drive
 * `crater sim replay`, which is where their effect is measured.
 *
 * Clocks: started_ms is the agent's start time (kept in order with
 * craterd's history), compared with craterd's clock; skew between the two
 * only moves the shadow time. The limit itself is enforced by the agent
 * on its own boot clock (src/agent/timelimit.c).
 */
#include <stdlib.h>

#include "crater/log.h"
#include "daemon/internal.h"

void backfill_reset(crater_daemon_t *d)
{
    d->resv_ok = false;
}

int backfill_place(crater_daemon_t *d,
                   djob_t *j,
                   crater_placement_t *pl,
                   crater_error_t *err)
{
    crater_backfill_verdict_t v;

    if (!d->resv_ok || j->priority > d->resv_prio || j->id == d->resv.head)
        return crater_sched_place(d->sched, &j->req, pl, err);
    return crater_sched_place_backfill(d->sched,
                                       &j->req,
                                       (uint64_t)dnow_ms(),
                                       j->spec->time_limit_ms,
                                       &d->resv,
                                       pl,
                                       &v,
                                       err);
}

/* When placed job j is expected to have released its resources. */
static uint64_t expected_end(const djob_t *j, int64_t now)
{
    int64_t from = j->started_ms ? j->started_ms : now;

    if (j->state == JS_PREEMPTING)
        return (uint64_t)(now + (int64_t)j->spec->grace_period_ms);
    return (uint64_t)(from + (int64_t)j->spec->time_limit_ms);
}

void backfill_reserve(crater_daemon_t *d, djob_t *j)
{
    crater_task_end_t *ends;
    crater_error_t err;
    int64_t now = dnow_ms();
    size_t n = 0;

    if (d->resv_ok || !d->cfg.scheduler.backfill)
        return;
    ends = malloc((d->njobs ? d->njobs : 1) * sizeof(*ends));
    if (!ends)
        return;
    for (size_t i = 0; i < d->njobs; i++) {
        const djob_t *r = d->jobs[i];
        if (r->placed && (r->spec->time_limit_ms || r->state == JS_PREEMPTING))
            ends[n++] = (crater_task_end_t){r->id, expected_end(r, now)};
    }
    d->resv_ok =
        crater_sched_reserve(d->sched, &j->req, ends, n, &d->resv, &err) == 0;
    free(ends);
    if (!d->resv_ok)
        return;
    d->resv.head = j->id;
    d->resv_prio = j->priority;
    crater_log(LOG_DEBUG,
               "job %llu: reserved to start in %lld ms",
               (unsigned long long)j->id,
               (long long)((int64_t)d->resv.w.shadow_ms - now));
}
