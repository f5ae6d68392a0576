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
 * then, and the plan refills the pool with the new version.
 *
 * Autoscaling goes on while a rollout runs (rollout_split,
 * sched/svcplan.c crater__svc_roll_split): the autoscaler's count applies
 * to the new version, whose replicas (the surge apart) are planned as
 * usual; beyond the count the old replicas drain first; short of it, new
 * ones start; a failed old replica is replaced by one of the new
 * version. `rolled` is how many of the `total` old replicas in traffic
 * at the start are gone (replaced, drained by a scale-down or ended).
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
 * Restart: the rollout is stored with the service's job
 * ("service_rollout": its state and counts, and while rolling the
 * previous version's spec), written at each step (start, a surge
 * replica started, an old replica replaced, done, failed). A craterd
 * restarted mid-rollout resumes it where it was, reports the same
 * from/to/total/rolled, and can still restore the old spec if the new
 * version then fails. The surge replica waited for gets a full ready
 * timeout again from the restart (craterd's downtime is not its fault).
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

static const char *ro_name(ro_state_t st)
{
    static const char *const names[] = {"none", "rolling", "done", "failed"};

    return names[st];
}

static ro_state_t ro_parse(const char *name)
{
    for (ro_state_t st = RO_NONE; st <= RO_FAILED; st++)
        if (name && strcmp(name, ro_name(st)) == 0)
            return st;
    return RO_NONE;
}

/* The stored form of s's rollout (a new reference; NULL on ENOMEM). */
static json_t *ro_store_json(const dservice_t *s)
{
    const rollout_t *ro = &s->ro;
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I,"
                          " s:I, s:I, s:I, s:s}",
                          "state",
                          ro_name(ro->state),
                          "from",
                          (json_int_t)ro->from,
                          "to",
                          (json_int_t)ro->to,
                          "total",
                          (json_int_t)ro->total,
                          "rolled",
                          (json_int_t)ro->rolled,
                          "surge",
                          (json_int_t)ro->surge,
                          "started_ms",
                          (json_int_t)ro->started_ms,
                          "ended_ms",
                          (json_int_t)ro->ended_ms,
                          "ready_timeout_ms",
                          (json_int_t)ro->ready_timeout_ms,
                          "crashes",
                          (json_int_t)ro->crashes,
                          "model",
                          (json_int_t)ro->model,
                          "prev_model",
                          (json_int_t)ro->prev_model,
                          "reason",
                          ro->reason);

    if (o && ro->prev_norm)
        json_object_set(o, "prev_spec", ro->prev_norm);
    return o;
}

void rollout_save(crater_daemon_t *d, dservice_t *s)
{
    djob_t *svc = job_find(d, s->id);
    json_t *o = ro_store_json(s);

    if (!svc || !o) {
        json_decref(o);
        return;
    }
    json_decref(svc->svc_rollout);
    svc->svc_rollout = o;
    job_save(d, svc, NULL, NULL);
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
    rollout_save(d, s); /* the new spec and version with it */
    crater_log(LOG_INFO,
               "service %s: rolling from version %" PRIu32 " to %" PRIu32,
               s->name,
               s->ro.from,
               s->ro.to);
    pthread_cond_signal(&d->svc_wake);
    return 0;
}

/* The stored rollout of svc into s->ro: -1 when there is none (older
 * records) or its previous spec cannot be decoded. */
static int ro_load(crater_daemon_t *d, dservice_t *s, const djob_t *svc)
{
    json_t *o = svc->svc_rollout, *prev = NULL;
    json_int_t v[12] = {0};
    const char *state = NULL, *reason = "";
    crater_error_t err = {0};
    rollout_t ro = {0};

    if (!o
        || json_unpack(o,
                       "{s:s, s:I, s:I, s:I, s:I, s?I, s?I, s?I, s?I, s?I,"
                       " s?I, s?I, s?s, s?o}",
                       "state",
                       &state,
                       "from",
                       &v[0],
                       "to",
                       &v[1],
                       "total",
                       &v[2],
                       "rolled",
                       &v[3],
                       "surge",
                       &v[4],
                       "started_ms",
                       &v[5],
                       "ended_ms",
                       &v[6],
                       "ready_timeout_ms",
                       &v[7],
                       "crashes",
                       &v[8],
                       "model",
                       &v[9],
                       "prev_model",
                       &v[10],
                       "reason",
                       &reason,
                       "prev_spec",
                       &prev)
               < 0)
        return -1;
    ro = (rollout_t){.state = ro_parse(state),
                     .from = (uint32_t)v[0],
                     .to = (uint32_t)v[1],
                     .total = (unsigned)v[2],
                     .rolled = (unsigned)v[3],
                     .surge = (uint64_t)v[4],
                     .surge_ms = dnow_ms(),
                     .started_ms = v[5],
                     .ended_ms = v[6],
                     .ready_timeout_ms = v[7] > 0 ? v[7] : ROLLOUT_READY_MS,
                     .crashes = (unsigned)v[8],
                     .model = (uint64_t)v[9],
                     .prev_model = (uint64_t)v[10]};
    snprintf(ro.reason, sizeof(ro.reason), "%s", reason);
    if (ro.state == RO_ROLLING && prev) {
        if (job_spec_from_norm(d, prev, &ro.prev_spec, &err) < 0) {
            crater_log(LOG_WARNING,
                       "service %s: the stored spec of version %" PRIu32
                       " does not decode (%s): a failure cannot restore it",
                       s->name,
                       ro.from,
                       err.text);
        } else {
            ro.prev_norm = json_incref(prev);
        }
    }
    s->ro = ro;
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
    if (ro_load(d, s, svc) == 0) {
        if (s->ro.to > s->top_version)
            s->top_version = s->ro.to;
        return;
    }
    if (old_traffic(d, s) == 0)
        return;
    /* a record written before rollouts were stored: what is known */
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

/* rolled: the old replicas in traffic at the start that are gone. */
static void ro_count(crater_daemon_t *d, dservice_t *s)
{
    unsigned old = old_traffic(d, s);

    s->ro.rolled = s->ro.total > old ? s->ro.total - old : 0;
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
    s->ro.surge = 0;
    s->ro.rolled = s->ro.total;
    rollout_free(&s->ro);
    rollout_save(d, s);
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
    }
    s->ro.state = RO_FAILED;
    s->ro.ended_ms = now;
    s->ro.surge = 0;
    rollout_free(&s->ro);
    rollout_save(d, s); /* with the old spec and version */
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
        s->ro.surge = 0;
        ro_count(d, s);
        rollout_save(d, s);
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
        rollout_save(d, s);
    }
    return true;
}

bool rollout_plans(const dservice_t *s, const djob_t *j)
{
    return s->ro.state != RO_ROLLING
           || (j->svc_version == s->ro.to && j->id != s->ro.surge);
}

/* The counts crater__svc_roll_split needs. */
static crater__svc_roll_in_t split_in(crater_daemon_t *d,
                                      const dservice_t *s,
                                      unsigned desired)
{
    crater__svc_roll_in_t in = {.desired = desired, .warm = s->warm};

    for (size_t i = 0; i < d->njobs; i++) {
        const djob_t *j = d->jobs[i];
        if (!rep_of(j, s) || !rep_live(j))
            continue;
        bool old = j->svc_version != s->ro.to;
        if (j->svc_role == CRATER__SVC_WARM) {
            in.old_warm += old;
            continue;
        }
        in.ready += j->svc_ready;
        in.old_traffic += old;
        in.old_ready += old && j->svc_ready;
        in.new_traffic += rollout_plans(s, j);
    }
    return in;
}

void rollout_split(crater_daemon_t *d,
                   dservice_t *s,
                   unsigned desired,
                   int64_t now,
                   json_t *actions,
                   unsigned *want,
                   unsigned *warm)
{
    crater__svc_roll_in_t in;
    crater__svc_split_t r;
    djob_t *j;

    *want = desired;
    *warm = s->warm;
    if (s->ro.state != RO_ROLLING)
        return;
    in = split_in(d, s, desired);
    r = crater__svc_roll_split(&in);
    for (unsigned i = 0; i < r.retire_old && (j = next_old(d, s)); i++) {
        svc_retire(d, s, j, "scaled down while rolling", now);
        note(actions, "stop", j->id);
    }
    *want = r.desired_new;
    *warm = r.warm_new;
    if (r.retire_old) {
        ro_count(d, s);
        rollout_save(d, s);
    }
}

json_t *rollout_json(const dservice_t *s)
{
    json_t *o = json_pack("{s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:b}",
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
                          (json_int_t)s->ro.ended_ms,
                          "autoscalePaused",
                          0);

    if (o && s->ro.surge)
        json_object_set_new(o, "waiting_for", json_integer(s->ro.surge));
    if (o && s->ro.reason[0])
        json_object_set_new(o, "reason", json_string(s->ro.reason));
    return o;
}
