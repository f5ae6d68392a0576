/* ckpts.c - what craterd does with the checkpoints its jobs report
 * (issue 14, doc/checkpoint.md "Runtime"), and retries of failed
 * attempts (restartPolicy, backoffLimit).
 *
 * A task reports a finished checkpoint on its agent socket; the agent
 * sends it as a "checkpoint" event. craterd keeps the last JOB_MAX_CKPTS
 * reports of each job in the job's record (so they live and go with it:
 * retention removes them with the job), serves them at
 * GET /api/v1/jobs/{id}/checkpoints, and uses them twice:
 *   - the preemption planner's lost work: each report tells the core the
 *     task's last checkpoint time (crater_sched_set_task_checkpoint), so
 *     a victim that just saved loses less than one that ran for hours;
 *   - the grace period of a preemption: at least the longest save the job
 *     measured, plus a quarter, capped by scheduler.maxCheckpointGrace,
 *     never less than the job's gracePeriod.
 * The checkpoint directory itself needs nothing from craterd on a
 * requeue: it is checkpoint.dir, the same path on every attempt, and the
 * SDK's load_latest() finds the newest good checkpoint there.
 *
 * Failures: with restartPolicy OnFailure a failed attempt is requeued as
 * the next attempt while failures <= backoffLimit (Kubernetes counts the
 * same way: backoffLimit 2 allows three attempts). Preemption, drain and
 * the GPU watermark requeue without counting (api_agents.c).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "daemon/internal.h"

#define JOB_MAX_CKPTS 32

static json_t *ckpt_json(const crater_proto_event_t *ev, int64_t at)
{
    json_t *o = crater_proto_ckpt_encode(&ev->ckpt);

    if (o
        && (json_object_set_new(o, "attempt", json_integer(ev->attempt)) < 0
            || json_object_set_new(o, "replica", json_integer(ev->replica)) < 0
            || json_object_set_new(o, "time_ms", json_integer(at)) < 0)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

void job_checkpoint(crater_daemon_t *d,
                    djob_t *j,
                    const crater_proto_event_t *ev,
                    int64_t at)
{
    json_t *o;

    if (at <= 0)
        at = dnow_ms();
    if (!j->ckpts && !(j->ckpts = json_array()))
        return;
    if (!(o = ckpt_json(ev, at)))
        return;
    if (json_array_size(j->ckpts) >= JOB_MAX_CKPTS)
        json_array_remove(j->ckpts, 0);
    json_array_append_new(j->ckpts, o);
    if (ev->ckpt.seconds > j->ckpt_max_s)
        j->ckpt_max_s = ev->ckpt.seconds;
    if (j->placed)
        crater_sched_set_task_checkpoint(d->sched,
                                         job_task_id(j, ev->replica),
                                         (uint64_t)dnow_ms());
    job_save(d, j, NULL, NULL);
}

void job_progress(djob_t *j, const crater_proto_event_t *ev, int64_t at)
{
    j->progress_step = ev->ckpt.step;
    j->progress_ms = at > 0 ? at : dnow_ms();
}

/* The grace period a preemption of j gives. */
static uint64_t preempt_grace_ms(const crater_daemon_t *d, const djob_t *j)
{
    uint64_t grace = j->spec->grace_period_ms;
    uint64_t cap = d->cfg.scheduler.max_checkpoint_grace_ms;
    uint64_t want = (uint64_t)ceil(j->ckpt_max_s * 1250.0);

    if (!j->ckpts)
        return grace;
    if (want > cap)
        want = cap;
    return want > grace ? want : grace;
}

uint64_t job_stop_grace_ms(const crater_daemon_t *d, const djob_t *j)
{
    return j->stop_notice == CRATER_NOTICE_NONE ? j->spec->grace_period_ms
                                                : preempt_grace_ms(d, j);
}

json_t *job_ckpts_json(crater_daemon_t *d, djob_t *j)
{
    json_t *last = json_array_get(j->ckpts, json_array_size(j->ckpts) - 1);

    (void)d;
    return json_pack("{s:o, s:O, s:O*, s:f, s:I}",
                     "id",
                     json_sprintf("%" PRIu64, j->id),
                     "checkpoints",
                     j->ckpts ? j->ckpts : json_array(),
                     "latest",
                     last,
                     "longest_seconds",
                     j->ckpt_max_s,
                     "preempt_grace_ms",
                     (json_int_t)preempt_grace_ms(d, j));
}

void job_ckpts_load(djob_t *j, json_t *v)
{
    json_t *c;
    size_t i;

    json_decref(j->ckpts);
    j->ckpts = json_is_array(v) ? json_incref(v) : NULL;
    json_array_foreach(j->ckpts, i, c)
    {
        double s = json_number_value(json_object_get(c, "seconds"));
        if (s > j->ckpt_max_s)
            j->ckpt_max_s = s;
    }
}

bool job_retry_failure(crater_daemon_t *d, djob_t *j, const char *why)
{
    char reason[512];
    const crater_jobspec_t *s = j->spec;

    j->failures++;
    if (s->restart_policy != CRATER_RESTART_ON_FAILURE)
        return false;
    if (j->failures > s->backoff_limit) {
        snprintf(reason,
                 sizeof(reason),
                 "attempt %u failed: %s; backoffLimit %u reached "
                 "(%u failed attempts)",
                 j->attempts,
                 why,
                 s->backoff_limit,
                 j->failures);
        job_apply(d, j, JE_EXIT_FAIL, reason);
        return true;
    }
    snprintf(reason,
             sizeof(reason),
             "attempt %u failed: %s; requeued (restartPolicy OnFailure, "
             "retry %u of backoffLimit %u)",
             j->attempts,
             why,
             j->failures,
             s->backoff_limit);
    job_apply(d, j, JE_REQUEUE, reason); /* counts the attempt */
    return true;
}
