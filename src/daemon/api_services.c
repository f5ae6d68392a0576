/* api_services.c - inference services in the API: the "service" of a
 * job object, a replica's stored service record, GET
 * /api/v1/services[/{name}[/endpoints]] and POST
 * /api/v1/services/{name}/rollout (doc/api.md, doc/inference.md).
 * The controller that keeps them is services.c; this file only reads its
 * state, under d->mu.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "crater/units.h"
#include "daemon/services.h"
#include "gateway/gateway.h"
#include "sched/svcplan.h"

/* ---- JSON --------------------------------------------------------------- */

json_t *service_job_store(const djob_t *j)
{
    if (!j->svc_id)
        return NULL;
    return json_pack("{s:I, s:s, s:i, s:i, s:I}",
                     "job",
                     (json_int_t)j->svc_id,
                     "role",
                     role_name(j->svc_role),
                     "index",
                     (int)j->svc_index,
                     "port",
                     (int)j->master_port,
                     "version",
                     (json_int_t)j->svc_version);
}

void service_job_load(djob_t *j, json_t *v)
{
    json_int_t id = 0, index = 0, port = 0, version = 0;
    const char *role = "traffic";

    if (!json_is_object(v)
        || json_unpack(v,
                       "{s:I, s?s, s?I, s?I, s?I}",
                       "job",
                       &id,
                       "role",
                       &role,
                       "index",
                       &index,
                       "port",
                       &port,
                       "version",
                       &version)
               < 0)
        return;
    j->svc_version = (uint32_t)version;
    j->svc_id = (uint64_t)id;
    j->svc_role =
        strcmp(role, "warm") == 0 ? CRATER__SVC_WARM : CRATER__SVC_TRAFFIC;
    j->svc_index = (uint32_t)index;
    j->master_port = (uint32_t)port;
}

static json_t *rep_json(crater_daemon_t *d, const djob_t *j)
{
    char url[GW_URL_MAX] = "";
    const char *state = job_state_name(j->state);

    if (j->state == JS_RUNNING)
        state = j->svc_ready ? "ready" : "starting";
    if (job_state_holds(j->state))
        rep_url(d, j, url, sizeof(url));
    if (j->svc_draining)
        state = "draining";
    return json_pack("{s:I, s:s, s:i, s:s, s:s, s:b, s:s, s:i}",
                     "job",
                     (json_int_t)j->id,
                     "name",
                     j->name,
                     "index",
                     (int)j->svc_index,
                     "role",
                     role_name(j->svc_role),
                     "state",
                     state,
                     "in_traffic",
                     j->svc_in_gw,
                     "url",
                     url,
                     "version",
                     (int)j->svc_version);
}

static json_t *svc_json(crater_daemon_t *d, const dservice_t *s, bool full)
{
    counts_t c = svc_counts(d, s);
    json_t *o =
        json_pack("{s:s, s:I, s:{s:i, s:i, s:i, s:i, s:i}, s:i, s:i, s:i, s:i,"
                  " s:{s:I, s:I, s:I, s:i}}",
                  "name",
                  s->name,
                  "job",
                  (json_int_t)s->id,
                  "replicas",
                  "ready",
                  (int)c.ready,
                  "traffic",
                  (int)c.traffic,
                  "warm",
                  (int)c.warm,
                  "warm_ready",
                  (int)c.warm_ready,
                  "starting",
                  (int)c.starting,
                  "desired",
                  (int)s->desired,
                  "warm_pool",
                  (int)s->warm,
                  "min",
                  (int)s->params.min_replicas,
                  "max",
                  (int)s->params.max_replicas,
                  "load_ms",
                  "last",
                  (json_int_t)s->load_last_ms,
                  "max",
                  (json_int_t)s->load_max_ms,
                  "mean",
                  (json_int_t)(s->loads ? s->load_sum_ms / s->loads : 0),
                  "count",
                  (int)s->loads);
    json_t *items = json_array();
    const djob_t *svc = job_find(d, s->id);

    if (o) {
        json_object_set_new(o,
                            "version",
                            json_integer(svc ? svc->svc_version : 0));
        json_object_set_new(o, "rollout", rollout_json(s));
        if (svc && svc->spec->after && svc->spec->after[0])
            json_object_set_new(o,
                                "model",
                                json_pack("{s:s, s:I}",
                                          "after",
                                          svc->spec->after[0],
                                          "job",
                                          (json_int_t)svc->svc_model));
    }
    if (!o || !full || !items) {
        json_decref(items);
        return o;
    }
    for (size_t i = 0; i < d->njobs; i++)
        if (rep_of(d->jobs[i], s) && !job_state_final(d->jobs[i]->state))
            json_array_append_new(items, rep_json(d, d->jobs[i]));
    json_object_set_new(o, "items", items);
    json_object_set(o, "decisions", s->decisions);
    if (d->gw)
        json_object_set_new(o,
                            "gateway",
                            json_sprintf("/%s/ on port %u",
                                         s->name,
                                         (unsigned)gw__port(d->gw)));
    return o;
}

void service_job_view(crater_daemon_t *d, const djob_t *j, json_t *o)
{
    dservice_t *s;

    if (j->svc_id) {
        json_object_set_new(o,
                            "service",
                            json_pack("{s:I, s:s, s:b, s:b}",
                                      "job",
                                      (json_int_t)j->svc_id,
                                      "role",
                                      role_name(j->svc_role),
                                      "ready",
                                      j->svc_ready,
                                      "in_traffic",
                                      j->svc_in_gw));
        return;
    }
    if (!(s = svc_find(d, j->id)))
        return;
    json_object_set_new(o, "service", svc_json(d, s, false));
    if (j->state == JS_PENDING) /* served: never queued itself */
        json_object_set_new(o, "state", json_string("serving"));
}

/* ---- API ------------------------------------------------------------------
 */

static dservice_t *visible_svc(crater_daemon_t *d,
                               crater_http_req_t *r,
                               const principal_t *p,
                               crater_http_resp_t *resp)
{
    const char *name = crater_http_param(r, "name");
    dservice_t *s = name ? svc_by_name(d, name) : NULL;
    djob_t *j = s ? job_find(d, s->id) : NULL;

    if (!j || (user_tenant(p) && strcmp(j->tenant, user_tenant(p)) != 0)) {
        api_errorf(resp,
                   CRATER_ENOENT,
                   "name",
                   "no service '%s'",
                   name ? name : "");
        return NULL;
    }
    return s;
}

static void h_list(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    principal_t p;
    json_t *items;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0 && (items = json_array())) {
        for (size_t i = 0; i < d->nsvcs; i++) {
            djob_t *j = job_find(d, d->svcs[i]->id);
            if (j && (!user_tenant(&p) || !strcmp(j->tenant, p.tenant)))
                json_array_append_new(items, svc_json(d, d->svcs[i], false));
        }
        crater_http_json(resp,
                         200,
                         json_pack("{s:o, s:n, s:i}",
                                   "items",
                                   items,
                                   "next",
                                   "gateway_port",
                                   (int)service_gateway_port(d)));
    }
    pthread_mutex_unlock(&d->mu);
}

static void h_get(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    principal_t p;
    dservice_t *s;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0 && (s = visible_svc(d, r, &p, resp)))
        crater_http_json(resp, 200, svc_json(d, s, true));
    pthread_mutex_unlock(&d->mu);
}

/* The ready, in-traffic replicas: what a gateway outside craterd routes
 * to (crater-gateway fed from here). */
static void h_endpoints(crater_http_req_t *r,
                        crater_http_resp_t *resp,
                        void *arg)
{
    crater_daemon_t *d = arg;
    char url[GW_URL_MAX];
    principal_t p;
    dservice_t *s;
    json_t *items;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0 && (s = visible_svc(d, r, &p, resp))
        && (items = json_array())) {
        for (size_t i = 0; i < d->njobs; i++) {
            djob_t *j = d->jobs[i];
            if (rep_of(j, s) && j->svc_in_gw
                && rep_url(d, j, url, sizeof(url)) == 0)
                json_array_append_new(items,
                                      json_pack("{s:s, s:I}",
                                                "url",
                                                url,
                                                "job",
                                                (json_int_t)j->id));
        }
        crater_http_json(resp, 200, json_pack("{s:o}", "items", items));
    }
    pthread_mutex_unlock(&d->mu);
}

/* ?readyTimeout=DURATION -> *ms (0: absent). -1 with resp answered. */
static int ready_timeout(crater_http_req_t *r,
                         crater_http_resp_t *resp,
                         int64_t *ms)
{
    const char *q = crater_http_query(r, "readyTimeout");
    crater_error_t err;
    uint64_t ns = 0;

    *ms = 0;
    if (!q)
        return 0;
    if (crater_parse_duration_ns(q, &ns, &err) < 0 || ns < 1000000) {
        api_errorf(resp,
                   CRATER_EINVAL,
                   "readyTimeout",
                   "readyTimeout: '%.40s' is not a duration of at least 1ms "
                   "(such as 90s)",
                   q);
        return -1;
    }
    *ms = (int64_t)(ns / 1000000);
    return 0;
}

/* The new spec, checked as a submission of the service would be, with
 * the service's tenant. -1 with err. */
static int rollout_check(crater_daemon_t *d,
                         const djob_t *svc,
                         job_doc_t *doc,
                         size_t n,
                         crater_error_t *err)
{
    if (n != 1)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "",
                                   "a rollout takes one Job document (%zu "
                                   "given)",
                                   n);
    json_t *tenant = json_object_get(svc->spec_json, "tenant");

    free(doc->spec->tenant); /* the service's, as it was stored */
    doc->spec->tenant = svc->spec->tenant ? strdup(svc->spec->tenant) : NULL;
    if (tenant)
        json_object_set_new(doc->norm, "tenant", json_copy(tenant));
    else
        json_object_del(doc->norm, "tenant");
    job_defaults(d, doc->spec, doc->norm);
    if (!doc->spec->inference.enabled)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "inference",
                                   "inference: the new spec must be a "
                                   "service's");
    return service_check_spec(doc->spec, err);
}

static void rollout_locked(crater_daemon_t *d,
                           crater_http_req_t *r,
                           crater_http_resp_t *resp,
                           const principal_t *p,
                           job_doc_t *docs,
                           size_t n)
{
    crater_error_t err = {0};
    dservice_t *s = visible_svc(d, r, p, resp);
    djob_t *svc = s ? job_find(d, s->id) : NULL;
    int64_t tmo;

    if (!svc || ready_timeout(r, resp, &tmo) < 0)
        return;
    if (rollout_check(d, svc, docs, n, &err) < 0
        || rollout_start(d, s, svc, docs[0].spec, docs[0].norm, tmo, &err)
               < 0) {
        crater_http_error(resp, &err);
        return;
    }
    docs[0].spec = NULL; /* the service's now */
    docs[0].norm = NULL;
    crater_http_json(resp, 202, svc_json(d, s, false));
}

static void h_rollout(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    crater_error_t err = {0};
    job_doc_t *docs = NULL;
    size_t len, n = 0;
    const char *body = crater_http_body(r, &len);
    principal_t p;
    int rc;

    pthread_mutex_lock(&d->mu);
    rc = api_auth(d, r, resp, &p);
    pthread_mutex_unlock(&d->mu);
    if (rc < 0)
        return;
    if (p.role == CRATER_ROLE_AGENT) {
        api_errorf(resp,
                   CRATER_EPERM,
                   NULL,
                   "agent tokens cannot roll out services");
        return;
    }
    if (job_parse_docs(d, user_tenant(&p), body, len, &docs, &n, &err) < 0) {
        crater_http_error(resp, &err);
        return;
    }
    pthread_mutex_lock(&d->mu);
    rollout_locked(d, r, resp, &p, docs, n);
    pthread_mutex_unlock(&d->mu);
    job_docs_free(docs, n);
}

int api_services_routes(crater_daemon_t *d, crater_error_t *err)
{
    static const api_route_t routes[] = {
        {"GET", "/api/v1/services", h_list},
        {"GET", "/api/v1/services/{name}", h_get},
        {"GET", "/api/v1/services/{name}/endpoints", h_endpoints},
        {"POST", "/api/v1/services/{name}/rollout", h_rollout},
    };

    return api_register(d, routes, sizeof(routes) / sizeof(routes[0]), err);
}
