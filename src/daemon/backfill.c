/* backfill.c - EASY backfill in craterd: the running jobs' expected ends
 * (doc/queue.md).
 *
 * The rule itself is the core's scheduling pass (src/sched/pass.c), shared
 * with `crater sim replay`: the first job of a pass that fits nowhere and
 * gets no preemption plan becomes the head, its start is reserved with
 * crater_sched_reserve() (a gang's with crater_sched_reserve_gang(), over
 * the ends of every replica listed here), and jobs of its priority or
 * lower behind it are
 * placed with crater_sched_place_backfill() only where they cannot delay
 * it; the reservation is dropped when capacity comes back. What craterd
 * gives the pass is when its placed jobs are expected to have released
 * their resources: started_ms + timeLimit (a job still bound counts from
 * now; one being preempted from now + its grace period; a job without a
 * timeLimit never ends). With scheduler.backfill false the pass makes no
 * reservation and every job that fits starts (greedy).
 *
 * Every pass that makes a reservation asks for the ends; the scan reads
 * every job craterd holds (finished ones too, until their retention), so
 * d->ends_jobs counts the jobs that can have an end (backfill_track, at
 * the three places a job enters, moves and leaves) and none means no
 * scan: a 1,000-element array of jobs without time limits spent 5% of
 * its CPU here (B3).
 *
 * Clocks: started_ms is the agent's start time (kept in order with
 * craterd's history), compared with craterd's clock; skew between the two
 * only moves the shadow time. The limit itself is enforced by the agent
 * on its own boot clock (src/agent/timelimit.c).
 */
#include <stdlib.h>

#include "crater/log.h"
#include "daemon/internal.h"

/* Does j count towards the ends in state st? An over-count only costs a
 * scan: jobs not final with a time limit, and jobs being preempted. */
static bool ends_counted(const djob_t *j, int st)
{
    return st >= 0 && !job_state_final((job_state_t)st)
           && (j->spec->time_limit_ms || st == JS_PREEMPTING);
}

void backfill_track(crater_daemon_t *d, const djob_t *j, int from, int to)
{
    d->ends_jobs -= ends_counted(j, from);
    d->ends_jobs += ends_counted(j, to);
}

/* When placed job j is expected to have released its resources. */
static uint64_t expected_end(const djob_t *j, int64_t now)
{
    int64_t from = j->started_ms ? j->started_ms : now;

    if (j->state == JS_PREEMPTING)
        return (uint64_t)(now + (int64_t)j->spec->grace_period_ms);
    return (uint64_t)(from + (int64_t)j->spec->time_limit_ms);
}

size_t backfill_ends(crater_daemon_t *d, const crater_task_end_t **ends)
{
    int64_t now = dnow_ms();
    crater_task_end_t *buf;
    size_t n = 0, cap = 0;

    *ends = NULL;
    if (d->ends_jobs == 0) /* no job with a time limit, none stopping */
        return 0;
    for (size_t i = 0; i < d->njobs; i++)
        cap += d->jobs[i]->placed ? job_ntasks(d->jobs[i]) : 0;
    buf = realloc(d->ends_buf, (cap ? cap : 1) * sizeof(*buf));
    if (!buf) {
        *ends = NULL;
        return 0; /* no ends: no reservation, greedy this pass */
    }
    d->ends_buf = buf;
    for (size_t i = 0; i < d->njobs; i++) {
        const djob_t *r = d->jobs[i];
        if (!r->placed
            || (!r->spec->time_limit_ms && r->state != JS_PREEMPTING))
            continue;
        for (uint32_t t = 0; t < job_ntasks(r); t++) /* each replica */
            buf[n++] =
                (crater_task_end_t){job_task_id(r, t), expected_end(r, now)};
    }
    *ends = buf;
    return n;
}
