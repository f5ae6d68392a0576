/* typical.c - craterd's typical-task distribution: what Crater's policy
 * measures fragmentation against (crater/typhist.h, doc/scheduling.md).
 *
 * scheduler.typicalTasks: "learned" (the default) counts every admitted
 * submission's request shape in a decayed histogram, once per replica, and
 * installs it in the core whenever it moved enough (crater_typhist_observe);
 * before typicalMinSamples submissions, and always with "prior", the
 * core has the fixed whole-GPU prior; "off" installs nothing (the plugin
 * scores alone, craterd before issue 13).
 *
 * Why fed at admission, in the commit callback: that is where a job
 * becomes durable and schedulable, so the histogram counts exactly the
 * jobs the store holds. At a restart it is rebuilt from the stored jobs in
 * id order (their submission order), which gives the histogram the running
 * daemon had, less the jobs retention has removed since.
 *
 * A node registration changes the mean GPU memory and the models' shares
 * the core derives from the distribution at install; reinstalling per
 * registration would be quadratic on a large cluster coming up, so it
 * only marks the distribution stale and the next submission reinstalls.
 *
 * Everything here runs under d->mu.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "crater/log.h"
#include "crater/typhist.h"
#include "daemon/internal.h"

int typical_init(crater_daemon_t *d, crater_error_t *err)
{
    crater_typhist_opts_t o;

    if (d->cfg.scheduler.typical_tasks == CRATER_TYPICAL_OFF)
        return 0;
    crater_typhist_opts_from_config(&d->cfg, &o);
    if (!(d->typ = crater_typhist_create(&o)))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    return crater_typhist_install(d->typ, d->sched, err);
}

void typical_free(crater_daemon_t *d)
{
    crater_typhist_destroy(d->typ);
    d->typ = NULL;
}

static bool learning(const crater_daemon_t *d)
{
    return d->typ && d->cfg.scheduler.typical_tasks == CRATER_TYPICAL_LEARNED;
}

static void install(crater_daemon_t *d)
{
    crater_error_t err;

    if (crater_typhist_install(d->typ, d->sched, &err) < 0)
        crater_log(LOG_WARNING, "typical tasks not installed: %s", err.text);
    d->typ_stale = false;
}

void typical_note(crater_daemon_t *d, const djob_t *j)
{
    crater_error_t err;
    int rc = 0;

    if (!d->typ)
        return;
    for (uint32_t r = 0; learning(d) && r < job_ntasks(j) && rc >= 0; r++)
        rc = crater_typhist_observe(d->typ, d->sched, &j->req, &err);
    if (rc < 0)
        crater_log(LOG_WARNING, "typical tasks: %s", err.text);
    if (rc > 0)
        crater_log(LOG_DEBUG,
                   "typical tasks installed (%s, %" PRIu64 " submissions)",
                   crater_typhist_is_prior(d->typ) ? "prior" : "learned",
                   crater_typhist_seen(d->typ));
    if (rc > 0)
        d->typ_stale = false;
    else if (d->typ_stale)
        install(d);
}

void typical_rebuild(crater_daemon_t *d)
{
    crater_typical_t t;

    if (!learning(d))
        return;
    for (size_t i = 0; i < d->njobs; i++) {
        crater_typhist_shape(&d->jobs[i]->req, &t);
        for (uint32_t r = 0; r < job_ntasks(d->jobs[i]); r++)
            crater_typhist_add(d->typ, &t, NULL);
    }
    install(d);
}

void typical_nodes_changed(crater_daemon_t *d)
{
    if (d->typ)
        d->typ_stale = true;
}

static const char *const mode_names[] = {"learned", "prior", "off"};

/* GET /api/v1/scheduler: the policy and its typical tasks. */
static void h_scheduler(crater_http_req_t *r,
                        crater_http_resp_t *resp,
                        void *arg)
{
    crater_daemon_t *d = arg;
    principal_t p;
    json_t *typ;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0)
        goto out;
    typ = d->typ ? crater_typhist_json(d->typ) : json_null();
    crater_http_json(resp,
                     200,
                     json_pack("{s:s, s:s, s:o*}",
                               "policy",
                               crater_sched_policy(d->sched),
                               "typicalTasks",
                               mode_names[d->cfg.scheduler.typical_tasks],
                               "typical",
                               typ));
out:
    pthread_mutex_unlock(&d->mu);
}

int api_typical_routes(crater_daemon_t *d, crater_error_t *err)
{
    static const api_route_t routes[] = {
        {"GET", "/api/v1/scheduler", h_scheduler},
    };

    return api_register(d, routes, sizeof(routes) / sizeof(routes[0]), err);
}
