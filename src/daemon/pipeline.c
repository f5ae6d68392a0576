/* pipeline.c - train -> serve: a service with `after: [JOB]` serves what
 * the training job JOB wrote (doc/inference.md, "Train -> serve").
 *
 * The service waits (no replica) until a job named JOB of its tenant has
 * succeeded; its replicas then get CRATER_MODEL_PATH (JOB's checkpoint
 * directory, `checkpoint.dir`, else its working directory `workdir`) and
 * CRATER_MODEL_JOB (its id) in their environment. When a newer job named
 * JOB succeeds (training submitted again), the service rolls to it
 * (rollout.c: same spec, a new version, one replica at a time); a model
 * whose rollout failed is not tried again until a newer one succeeds.
 *
 * Why a succeeded job and not each checkpoint: a checkpoint mid-run may be
 * one the job itself later discards, and "the job succeeded" is what the
 * `after:` of every other job already means.
 *
 * All functions run with d->mu held.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "crater/log.h"
#include "daemon/services.h"

/* The newest succeeded job named name in tenant, or NULL. */
static djob_t *newest_success(crater_daemon_t *d,
                              const char *tenant,
                              const char *name)
{
    for (size_t i = d->njobs; i-- > 0;) {
        djob_t *j = d->jobs[i];
        if (j->durable && j->state == JS_SUCCEEDED && !j->svc_id
            && strcmp(j->name, name) == 0 && strcmp(j->tenant, tenant) == 0)
            return j;
    }
    return NULL;
}

int pipeline_env(crater_daemon_t *d,
                 const djob_t *svc,
                 crater_jobspec_t *spec,
                 json_t *norm)
{
    const djob_t *m = svc->svc_model ? job_find(d, svc->svc_model) : NULL;
    const char *path = NULL;
    char id[24];

    if (!m)
        return 0;
    path = m->spec->checkpoint.dir ? m->spec->checkpoint.dir : m->spec->workdir;
    snprintf(id, sizeof(id), "%" PRIu64, m->id);
    if (job_add_env(spec, norm, "CRATER_MODEL_JOB", id) < 0)
        return -1;
    return path ? job_add_env(spec, norm, "CRATER_MODEL_PATH", path) : 0;
}

/* Roll s to model m: the same spec, a new version. */
static void roll_to(crater_daemon_t *d, dservice_t *s, djob_t *svc, djob_t *m)
{
    json_t *norm = json_deep_copy(svc->spec_json);
    crater_jobspec_t *spec = NULL;
    uint64_t prev = svc->svc_model;
    crater_error_t err = {0};
    crater_dec_t dec;

    crater_dec_init(&dec, NULL, 0, &err);
    svc->svc_model = m->id;
    if (!norm || crater_jobspec_decode(&dec, norm, &spec) < 0
        || rollout_start(d, s, svc, spec, norm, 0, &err) < 0) {
        svc->svc_model = prev;
        crater_jobspec_destroy(spec);
        json_decref(norm);
        crater_log(LOG_WARNING,
                   "service %s: cannot roll to job %" PRIu64 ": %s",
                   s->name,
                   m->id,
                   err.text);
        return;
    }
    s->ro.model = m->id;
    s->ro.prev_model = prev;
    rollout_save(d, s);
    crater_log(LOG_INFO,
               "service %s: rolling to the model of job %" PRIu64,
               s->name,
               m->id);
}

bool pipeline_step(crater_daemon_t *d, dservice_t *s)
{
    djob_t *svc = job_find(d, s->id), *m;

    if (!svc || !svc->spec->after || !svc->spec->after[0])
        return false;
    if (!(m = newest_success(d, svc->tenant, svc->spec->after[0])))
        return svc->svc_model == 0;
    if (m->id == svc->svc_model || s->ro.state == RO_ROLLING
        || (s->ro.state == RO_FAILED && s->ro.model == m->id))
        return false;
    if (svc->svc_model == 0) { /* the first model: nothing to roll */
        svc->svc_model = m->id;
        job_save(d, svc, NULL, NULL);
        return false;
    }
    roll_to(d, s, svc, m);
    return false;
}
