/* idle.c - idle-GPU reclaim in craterd (issue 14, doc/scheduling.md
 * "Idle-GPU reclaim").
 *
 * A job that holds GPUs and leaves them idle keeps others waiting. With
 * scheduler.idleGpuWindow set, every heartbeat that carries samples is a
 * reading for each running task it lists: the task is idle when every
 * GPU its placement holds on that node read idle (crater_idle_reading:
 * SM utilisation and memory activity under scheduler.idleGpuThreshold).
 * A GPU the heartbeat has no reading of counts busy: reclaim never acts
 * on a guess. The readings feed the job's crater_idle_t (src/core/idle.c);
 * after the window the job is warned (a history entry, the decision log,
 * the crater_idle_gpu_jobs gauge, "idle" in its JSON), after
 * scheduler.idleGpuGrace more it is reclaimed: a preemption whose stop
 * order carries the notice "idle", so the task may checkpoint, and the
 * job is requeued as the next attempt without counting a failure (as any
 * preemption, api_agents.c). Never deleted, never failed.
 *
 * GPU readings are per GPU, not per process: a slice shares its GPU with
 * other tasks, and any busy co-tenant makes the GPU (so each of its
 * tasks) read busy. That errs on the safe side: an idle slice next to a
 * busy one is not reclaimed. Per-process SM utilisation
 * (nvmlDeviceGetProcessUtilization) would separate them; not used yet.
 *
 * Opt-outs: the job's spec idleReclaim: false, or its tenant's
 * (PUT /api/v1/tenants/{name} {"idleReclaim": false}). The state resets at
 * every new attempt and whenever a reading is busy. */
#include "crater/idle.h"

#include <inttypes.h>
#include <stdio.h>

#include "crater/log.h"
#include "daemon/internal.h"

static crater_idle_params_t idle_params(const crater_daemon_t *d)
{
    return (crater_idle_params_t){
        .threshold = d->cfg.scheduler.idle_gpu_threshold,
        .window_ms = d->cfg.scheduler.idle_gpu_window_ms,
        .grace_ms = d->cfg.scheduler.idle_gpu_grace_ms,
    };
}

/* The job's tenant set idleReclaim: false (PUT /api/v1/tenants). */
static bool tenant_opted_out(crater_daemon_t *d, const djob_t *j)
{
    const dtenant_t *t = j->tenant ? tenant_find(d, j->tenant) : NULL;

    return t && t->no_idle_reclaim;
}

/* Did every GPU pl holds read idle in h? */
static bool task_idle(const crater_idle_params_t *p,
                      const crater_placement_t *pl,
                      const crater_proto_heartbeat_t *h)
{
    if (!pl->ngpus)
        return false;
    for (uint32_t k = 0; k < pl->ngpus; k++) {
        const crater_proto_gpu_util_t *g = NULL;
        for (uint32_t i = 0; i < h->ngpus && !g; i++)
            if (h->gpus[i].index == pl->gpu[k])
                g = &h->gpus[i];
        if (!g || !crater_idle_reading(p, g->util, g->mem_activity))
            return false;
    }
    return true;
}

static void idle_note(crater_daemon_t *d,
                      djob_t *j,
                      const char *decision,
                      const char *reason,
                      int64_t now)
{
    job_event(j, now, j->state, reason);
    job_save(d, j, NULL, NULL);
    declog_write(d,
                 json_pack("{s:I, s:s, s:I, s:s}",
                           "time_ms",
                           (json_int_t)now,
                           "decision",
                           decision,
                           "job",
                           (json_int_t)j->id,
                           "reason",
                           reason));
    crater_log(LOG_NOTICE, "job %" PRIu64 ": %s", j->id, reason);
}

static void idle_warn(crater_daemon_t *d,
                      djob_t *j,
                      const crater_idle_params_t *p,
                      int64_t now)
{
    char reason[256];

    snprintf(reason,
             sizeof(reason),
             "idle GPU: SM utilisation and memory activity under %.0f%% "
             "for %" PRIu64 "s (scheduler.idleGpuWindow); reclaimed "
             "(checkpoint notice idle, requeued) in %" PRIu64 "s unless busy "
             "again",
             p->threshold * 100,
             p->window_ms / 1000,
             p->grace_ms / 1000);
    idle_note(d, j, "idle-warn", reason, now);
}

static void idle_reclaim(crater_daemon_t *d,
                         djob_t *j,
                         const crater_idle_params_t *p,
                         int64_t now)
{
    crater_proto_notice_t was = j->stop_notice;
    char reason[256];

    snprintf(reason,
             sizeof(reason),
             "requeued: idle GPU reclaim: still idle %" PRIu64 "s after "
             "the warning (idleGpuGrace)",
             p->grace_ms / 1000);
    /* the notice rides on the stop order the transition sends */
    j->stop_notice = CRATER_NOTICE_IDLE;
    if (job_apply(d, j, JE_PREEMPT, reason) < 0) {
        j->stop_notice = was;
        return;
    }
    crater_metric_add(d->m_idle_reclaims, NULL, 1);
    declog_write(d,
                 json_pack("{s:I, s:s, s:I, s:s}",
                           "time_ms",
                           (json_int_t)now,
                           "decision",
                           "idle-reclaim",
                           "job",
                           (json_int_t)j->id,
                           "reason",
                           reason));
}

void idle_observe(crater_daemon_t *d,
                  djob_t *j,
                  uint32_t replica,
                  const crater_proto_heartbeat_t *h,
                  int64_t now)
{
    crater_idle_params_t p = idle_params(d);
    bool idle;

    if (j->idle_attempt != j->attempts) { /* a new attempt: a new run */
        j->idle = (crater_idle_t){0};
        j->idle_attempt = j->attempts;
    }
    if (!h->has_util || j->state != JS_RUNNING)
        return;
    if (j->spec->no_idle_reclaim || tenant_opted_out(d, j))
        p.window_ms = 0; /* resets: never warned */
    idle = task_idle(&p, job_task_pl(j, replica), h);
    switch (crater_idle_observe(&j->idle, &p, idle, now)) {
    case CRATER_IDLE_WARN:
        idle_warn(d, j, &p, now);
        break;
    case CRATER_IDLE_RECLAIM:
        idle_reclaim(d, j, &p, now);
        break;
    case CRATER_IDLE_BUSY_AGAIN:
        idle_note(d,
                  j,
                  "idle-clear",
                  "GPUs busy again: idle GPU reclaim called off",
                  now);
        break;
    case CRATER_IDLE_NONE:
        break;
    }
}

json_t *idle_json(const crater_daemon_t *d, const djob_t *j)
{
    crater_idle_params_t p = idle_params(d);

    if (!j->idle.idle || !job_state_holds(j->state)
        || j->idle_attempt != j->attempts)
        return NULL;
    return json_pack("{s:I, s:b, s:o}",
                     "since_ms",
                     (json_int_t)j->idle.since_ms,
                     "warned",
                     j->idle.warned,
                     "reclaim_at_ms",
                     j->idle.warned
                         ? json_integer(crater_idle_reclaim_at(&j->idle, &p))
                         : json_null());
}

size_t idle_warned_jobs(const crater_daemon_t *d)
{
    size_t n = 0;

    for (size_t i = 0; i < d->njobs; i++) {
        const djob_t *j = d->jobs[i];
        n += j->idle.warned && j->state == JS_RUNNING
             && j->idle_attempt == j->attempts;
    }
    return n;
}
