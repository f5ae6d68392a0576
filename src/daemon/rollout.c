/* rollout.c - a running service moves to a new spec without dropping
 * below its ready replicas (doc/inference.md, "Rollouts").
 *
 * POST /api/v1/services/{name}/rollout with a new spec (the same name)
 * replaces the service job's spec and raises its version; the replicas
 * of older versions are then replaced one at a time, as a Kubernetes
 * Deployment with maxSurge 1, maxUnavailable 0:
 *   1. start a replica of the new version, in traffic;
 *   2. wait until it is ready and in the gateway;
 *   3. drain and stop one old replica in traffic (services.c svc_retire:
 *      out of the gateway at once, stopped when its requests in flight
 *      are answered);
 * until no old replica is in traffic; old warm replicas are stopped
 * then, and the plan refills the pool with the new version. The plan
 * (autoscaling) waits while a rollout runs: a surge replica would
 * otherwise be "one too many" and stopped.
 *
 * A new version that fails stops the rollout: a new replica not ready
 * within the ready timeout (default ROLLOUT_READY_MS), or
 * ROLLOUT_MAX_CRASHES new replicas ending before they were ready (the
 * crash-loop backoff of services.c spaces their starts). The service's
 * spec is the old one again, the new replica not ready is stopped, the
 * replicas that were rolled and are ready stay; the reason is kept for
 * describe.
 *
 * What a rollout may change: everything of the replicas' spec but its
 * name, tenant, resources, priority and inference section (quotas count
 * a service at submission; the autoscaler keeps its windows): those are
 * refused naming the field (cancel and submit again).
 *
 * All functions here run with d->mu held.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "crater/log.h"
#include "daemon/services.h"
#include "sched/svcplan.h"

#define ROLLOUT_READY_MS 300000
#define ROLLOUT_MAX_CRASHES 3

static const char *const fixed_fields[] = {
    "name",
    "tenant",
    "resources",
    "inference",
    "priority",
    "priorityClass",
    "preemptible",
    "workloadType",
};

/* The first field a rollout may not change that norm changes, or NULL. */
static const char *changed_fixed(const json_t *old, const json_t *norm)
{
    for (size_t i = 0; i < sizeof(fixed_fields) / sizeof(*fixed_fields); i++) {
        const json_t *a = json_object_get(old, fixed_fields[i]);
        const json_t *b = json_object_get(norm, fixed_fields[i]);
        if (!(a == b || (a && b && json_equal(a, b))))
            return fixed_fields[i];
    }
    return NULL;
}

void rollout_free(rollout_t *ro)
{
    json_decref(ro->prev_norm);
    crater_jobspec_destroy(ro->prev_spec);
    ro->prev_norm = NULL;
    ro->prev_spec = NULL;
}

static unsigned old_traffic(crater_daemon_t *d, const dservice_t *s)
{
    const djob_t *svc = job_find(d, s->id);
    unsigned n = 0;

    for (size_t i = 0; svc && i < d->njobs; i++) {
        const djob_t *j = d->jobs[i];
        n += rep_of(j, s) && rep_live(j) && j->svc_role == CRATER__SVC_TRAFFIC
             && j->svc_version != svc->svc_version;
    }
    return n;
}

int rollout_start(crater_daemon_t *d,
                  dservice_t *s,
                  djob_t *svc,
                  crater_jobspec_t *spec,
                  json_t *norm,
                  int64_t ready_timeout_ms,
                  crater_error_t *err)
{
    const char *field;

    if (s->ro.state == RO_ROLLING)
        return crater_errorf_field(err,
                                   CRATER_EEXIST,
                                   "name",
                                   "name: service '%s' is rolling to "
                                   "version %" PRIu32 " (%u of %u replicas)",
                                   s->name,
                                   s->ro.to,
                                   s->ro.rolled,
                                   s->ro.total);
    if ((field = changed_fixed(svc->spec_json, norm)))
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   field,
                                   "%s: a rollout cannot change it (cancel "
                                   "the service and submit it again)",
                                   field);
    rollout_free(&s->ro);
    s->ro =
        (rollout_t){.state = RO_ROLLING,
                    .from = svc->svc_version,
                    .to = ++s->top_version,
                    .started_ms = dnow_ms(),
                    .ready_timeout_ms = ready_timeout_ms > 0 ? ready_timeout_ms
                                                             : ROLLOUT_READY_MS,
                    .prev_norm = svc->spec_json,
                    .prev_spec = svc->spec};
    svc->spec_json = norm;
    svc->spec = spec;
    svc->svc_version = s->ro.to;
    s->ro.total = old_traffic(d, s);
    s->crashes = 0;
    s->next_start_ms = 0;
    job_save(d, svc, NULL, NULL);
    crater_log(LOG_INFO,
               "service %s: rolling from version %" PRIu32 " to %" PRIu32,
               s->name,
               s->ro.from,
               s->ro.to);
    pthread_cond_signal(&d->svc_wake);
    return 0;
}

void rollout_resume(crater_daemon_t *d, dservice_t *s)
{
    const djob_t *svc = job_find(d, s->id);

    if (!svc)
        return;
    for (size_t i = 0; i < d->njobs; i++)
        if (d->jobs[i]->svc_id == s->id
            && d->jobs[i]->svc_version > s->top_version)
            s->top_version = d->jobs[i]->svc_version;
    if (svc->svc_version > s->top_version)
        s->top_version = svc->svc_version;
    if (old_traffic(d, s) == 0)
        return;
    s->ro = (rollout_t){.state = RO_ROLLING,
                        .to = svc->svc_version,
                        .started_ms = dnow_ms(),
                        .ready_timeout_ms = ROLLOUT_READY_MS,
                        .total = old_traffic(d, s)};
}

void rollout_crash(dservice_t *s, const djob_t *j)
{
    if (s->ro.state == RO_ROLLING && j->svc_version == s->ro.to)
        s->ro.crashes++;
}

static void note(json_t *actions, const char *op, uint64_t job)
{
    json_array_append_new(actions,
                          json_pack("{s:s, s:I}", "op", op, "job", job));
}

/* The rollout ends: old warm replicas go (the plan refills the pool). */
static void ro_done(crater_daemon_t *d,
                    dservice_t *s,
                    int64_t now,
                    json_t *actions)
{
    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        if (rep_of(j, s) && rep_live(j) && j->svc_version != s->ro.to) {
            svc_retire(d, s, j, "rolled to a new version", now);
            note(actions, "rollout-stop", j->id);
        }
    }
    s->ro.state = RO_DONE;
    s->ro.ended_ms = now;
    rollout_free(&s->ro);
    crater_log(LOG_INFO,
               "service %s: rolled to version %" PRIu32,
               s->name,
               s->ro.to);
}

/* The new version failed: the old spec is the service's again. */
static void ro_fail(crater_daemon_t *d,
                    dservice_t *s,
                    int64_t now,
                    json_t *actions,
                    const char *why)
{
    djob_t *svc = job_find(d, s->id), *surge = job_find(d, s->ro.surge);

    snprintf(s->ro.reason, sizeof(s->ro.reason), "%s", why);
    if (surge && rep_live(surge)) {
        svc_retire(d, s, surge, "its version failed to roll out", now);
        note(actions, "rollout-stop", surge->id);
    }
    if (svc && s->ro.prev_norm) {
        json_decref(svc->spec_json);
        crater_jobspec_destroy(svc->spec);
        svc->spec_json = s->ro.prev_norm;
        svc->spec = s->ro.prev_spec;
        svc->svc_version = s->ro.from;
        if (s->ro.model)
            svc->svc_model = s->ro.prev_model;
        s->ro.prev_norm = NULL;
        s->ro.prev_spec = NULL;
        job_save(d, svc, NULL, NULL);
    }
    s->ro.state = RO_FAILED;
    s->ro.ended_ms = now;
    s->ro.surge = 0;
    crater_log(LOG_WARNING,
               "service %s: rollout to version %" PRIu32 " failed: %s",
               s->name,
               s->ro.to,
               why);
}

/* The old replica in traffic to replace next: one not ready, else the
 * oldest. */
static djob_t *next_old(crater_daemon_t *d, const dservice_t *s)
{
    djob_t *pick = NULL;

    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        if (!rep_of(j, s) || !rep_live(j) || j->svc_role != CRATER__SVC_TRAFFIC
            || j->svc_version == s->ro.to)
            continue;
        if (!pick || (pick->svc_ready && !j->svc_ready))
            pick = j;
    }
    return pick;
}

/* The surge replica: true while it is waited for (failures decided). */
static bool surge_wait(crater_daemon_t *d,
                       dservice_t *s,
                       djob_t *old,
                       int64_t now,
                       json_t *actions)
{
    djob_t *n = s->ro.surge ? job_find(d, s->ro.surge) : NULL;
    char why[200];

    if (!n || !rep_live(n)) {
        s->ro.surge = 0; /* ended before ready: a crash, counted */
        return false;
    }
    if (n->svc_in_gw) {
        svc_retire(d, s, old, "replaced by a replica of a new version", now);
        note(actions, "rollout-stop", old->id);
        s->ro.rolled++;
        s->ro.surge = 0;
        return true;
    }
    if (now - s->ro.surge_ms >= s->ro.ready_timeout_ms) {
        snprintf(why,
                 sizeof(why),
                 "replica %" PRIu64 " of version %" PRIu32 " not ready after "
                 "%" PRId64 " ms",
                 n->id,
                 s->ro.to,
                 s->ro.ready_timeout_ms);
        ro_fail(d, s, now, actions, why);
    }
    return true;
}

bool rollout_step(crater_daemon_t *d,
                  dservice_t *s,
                  int64_t now,
                  json_t *actions)
{
    djob_t *old;
    char why[200];

    if (s->ro.state != RO_ROLLING)
        return false;
    if (!(old = next_old(d, s))) {
        ro_done(d, s, now, actions);
        return false;
    }
    if (s->ro.surge && surge_wait(d, s, old, now, actions))
        return true;
    if (s->ro.crashes >= ROLLOUT_MAX_CRASHES) {
        snprintf(why,
                 sizeof(why),
                 "%u replicas of version %" PRIu32 " ended before they were "
                 "ready (crash loop)",
                 s->ro.crashes,
                 s->ro.to);
        ro_fail(d, s, now, actions, why);
        return false;
    }
    if (now < s->next_start_ms || s->creating)
        return true;
    if ((s->ro.surge = svc_start(d, s, CRATER__SVC_TRAFFIC))) {
        s->ro.surge_ms = now;
        note(actions, "rollout-start", s->ro.surge);
    }
    return true;
}

static const char *ro_name(ro_state_t st)
{
    static const char *const names[] = {"none", "rolling", "done", "failed"};

    return names[st];
}

json_t *rollout_json(const dservice_t *s)
{
    json_t *o = json_pack("{s:s, s:i, s:i, s:i, s:i, s:I, s:I}",
                          "state",
                          ro_name(s->ro.state),
                          "from",
                          (int)s->ro.from,
                          "to",
                          (int)s->ro.to,
                          "rolled",
                          (int)s->ro.rolled,
                          "total",
                          (int)s->ro.total,
                          "started_ms",
                          (json_int_t)s->ro.started_ms,
                          "ended_ms",
                          (json_int_t)s->ro.ended_ms);

    if (o && s->ro.surge)
        json_object_set_new(o, "waiting_for", json_integer(s->ro.surge));
    if (o && s->ro.reason[0])
        json_object_set_new(o, "reason", json_string(s->ro.reason));
    return o;
}
