/* services.c - inference services in craterd (doc/inference.md).
 *
 * A job with an `inference:` section is a service. Its own job holds no
 * resources and never enters the queue (its state reads "serving" in the
 * API); its replicas are jobs of their own, one task each, created by
 * this controller and placed by the shared scheduling pass like any job
 * (non-gang: each replica is placed, preempted, failed and requeued on its
 * own). A replica's job record names its service and its role: in
 * traffic, or warm (started and ready, out of traffic, at a lower priority
 * and preemptible).
 *
 * The controller is one thread, ticking every SVC_TICK_MS:
 *   1. under d->mu, list the running replicas and their URLs
 *      (http://<node addr>:<CRATER_SERVICE_PORT>);
 *   2. without the lock, probe each: GET /v2/health/ready, 200 = ready
 *      (the KServe V2 readiness endpoint; a slow replica cannot stall the
 *      API, only this thread);
 *   3. under d->mu: readiness and the model load time (start -> first
 *      ready), the gateway's table (a ready in-traffic replica is a
 *      backend, nothing else is), the autoscaler (src/sched/autoscale.c)
 *      with the load the gateway sees, the plan (src/sched/svcplan.c:
 *      starts, promotions, demotions, stops) and the decision log.
 *
 * Why the gateway runs inside craterd: craterd already knows each
 * replica's readiness and role, so the gateway's backends follow them the
 * moment they change (a warm replica takes traffic in the tick it is
 * promoted, not a poll later), and the load the autoscaler needs is two
 * counters of the same process; there is no second token, no second
 * process to supervise. The cost: the data path shares craterd's process
 * (a gateway that must scale on its own, or survive craterd's restart,
 * would be crater-gateway fed through GET /api/v1/services/{name}/
 * endpoints, which exists for that).
 *
 * The API's views of this state are in api_services.c (services.h).
 *
 * Replica ports: craterd picks CRATER_SERVICE_PORT at bind from
 * [gangPortBase + gangPorts, + gangPorts), unique over all placed
 * replicas of the cluster (nodes of `crater up` share one host) and of
 * the ports the replica's node reports listening (its agent's heartbeat:
 * a process outside Crater holding one), as MASTER_PORT is.
 */
#include "daemon/services.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "crater/log.h"
#include "crater/metrics.h"
#include "gateway/gateway.h"
#include "sched/svcplan.h"

#define SVC_TICK_MS 1000
/* a decision that changes nothing is logged at most this often */
#define SVC_HOLD_LOG_MS 60000
#define SVC_PROBE_MS 500
#define SVC_MAX_ACTIONS 64
#define SVC_WARM_PRIORITY (-1000) /* the "low" class */

/* ---- the table ---------------------------------------------------------- */

dservice_t *svc_find(crater_daemon_t *d, uint64_t id)
{
    for (size_t i = 0; i < d->nsvcs; i++)
        if (d->svcs[i]->id == id)
            return d->svcs[i];
    return NULL;
}

dservice_t *svc_by_name(crater_daemon_t *d, const char *name)
{
    for (size_t i = 0; i < d->nsvcs; i++)
        if (strcmp(d->svcs[i]->name, name) == 0)
            return d->svcs[i];
    return NULL;
}

static void svc_free(dservice_t *s)
{
    if (!s)
        return;
    crater__as_destroy(s->as);
    json_decref(s->decisions);
    rollout_free(&s->ro);
    free(s->name);
    free(s);
}

/* The autoscaler's parameters from the spec (0 = its default). */
static void svc_params(const crater_inference_t *inf, crater__as_params_t *p)
{
    crater__as_params_default(p);
    if (inf->target_qps > 0) {
        p->metric = CRATER__AS_RPS;
        p->target = inf->target_qps;
    } else if (inf->target_concurrency > 0) {
        p->target = inf->target_concurrency;
    }
    if (inf->stable_window_ms)
        p->stable_window_ms = (int64_t)inf->stable_window_ms;
    if (inf->panic_window_ms)
        p->panic_window_ms = (int64_t)inf->panic_window_ms;
    else if (p->panic_window_ms > p->stable_window_ms)
        p->panic_window_ms =
            p->stable_window_ms / 10 ? p->stable_window_ms / 10 : 1;
    if (inf->scale_down_delay_ms)
        p->scale_down_delay_ms = (int64_t)inf->scale_down_delay_ms;
    if (inf->zero_grace_ms)
        p->zero_grace_ms = (int64_t)inf->zero_grace_ms;
    p->min_replicas = inf->min_replicas;
    p->max_replicas = inf->max_replicas;
    p->scale_to_zero = inf->min_replicas == 0;
}

/* The service's name is its route in the gateway: /NAME/... */
static int check_name(const char *name, crater_error_t *err)
{
    size_t n = name ? strlen(name) : 0;

    if (n == 0 || n >= GW_NAME_MAX || strcmp(name, "metrics") == 0
        || strspn(name,
                  "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                  "0123456789_.-")
               != n)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "name",
                                   "name: a service needs a name of 1 to "
                                   "%d of [A-Za-z0-9_.-], not 'metrics' "
                                   "(it is its route in the gateway)",
                                   GW_NAME_MAX - 1);
    return 0;
}

int service_name_free(crater_daemon_t *d,
                      const crater_jobspec_t *spec,
                      crater_error_t *err)
{
    if (!spec->inference.enabled || !spec->name || !svc_by_name(d, spec->name))
        return 0;
    return crater_errorf_field(err,
                               CRATER_EEXIST,
                               "name",
                               "name: a service named '%s' is running "
                               "(the gateway routes /%s/ to it)",
                               spec->name,
                               spec->name);
}

/* The fields craterd does not act on for a service: the first given, or
 * NULL, with why in *why. */
static const char *refused_field(const crater_jobspec_t *spec, const char **why)
{
    const struct {
        bool given;
        const char *field, *why;
    } rows[] = {
        {spec->inference.port != 0,
         "inference.port",
         "not built: craterd gives each replica its own port in "
         "CRATER_SERVICE_PORT; leave inference.port out"},
        {spec->gang,
         "gang",
         "a service's replicas are placed one by one; gang: true is not "
         "built for them"},
        {spec->after && spec->after[0] && spec->after[1],
         "after",
         "a service follows one training job (after: [JOB]): its "
         "replicas serve what JOB's last successful run wrote"},
        {spec->deadline_ms != 0,
         "deadline",
         "not built for a service (its replicas would fail and be "
         "replaced without end)"},
        {spec->narray != 0, "array", "a service cannot be a job array"},
    };

    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (rows[i].given) {
            *why = rows[i].why;
            return rows[i].field;
        }
    return NULL;
}

int service_check_spec(const crater_jobspec_t *spec, crater_error_t *err)
{
    const crater_inference_t *inf = &spec->inference;
    const char *field, *why = NULL;
    crater__as_params_t p;
    crater_error_t as = {0};
    const char *text;
    char name[96];
    size_t len;

    if (!inf->enabled)
        return 0;
    if ((field = refused_field(spec, &why)))
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   field,
                                   "%s: %s",
                                   field,
                                   why);
    if (check_name(spec->name, err) < 0)
        return -1;
    if ((uint64_t)inf->max_replicas + inf->warm_pool_size > JOB_MAX_REPLICAS)
        return crater_errorf_field(err,
                                   CRATER_EIMPOSSIBLE,
                                   "inference.maxReplicas",
                                   "inference.maxReplicas: craterd runs at "
                                   "most %d replicas of a service, warm "
                                   "ones included (this one: %u + %u)",
                                   JOB_MAX_REPLICAS,
                                   inf->max_replicas,
                                   inf->warm_pool_size);
    svc_params(inf, &p);
    if (crater__as_params_check(&p, &as) == 0)
        return 0;
    snprintf(name, sizeof(name), "inference.%.80s", as.field);
    text = as.text;
    len = strlen(as.field);
    if (len && strncmp(text, as.field, len) == 0 && text[len] == ':')
        text += len + 1 + (text[len + 1] == ' '); /* its own "field: " */
    return crater_errorf_field(err, CRATER_EINVAL, name, "%s: %s", name, text);
}

int service_attach(crater_daemon_t *d, djob_t *j)
{
    crater_error_t err;
    dservice_t *s = calloc(1, sizeof(*s));
    void *grown;

    if (!s || !(s->name = strdup(j->name)) || !(s->decisions = json_array()))
        goto nomem;
    svc_params(&j->spec->inference, &s->params);
    if (!(s->as = crater__as_create(&s->params, &err)))
        goto nomem;
    s->id = j->id;
    for (size_t i = 0; i < d->njobs; i++) /* after a restart: its replicas */
        if (d->jobs[i]->svc_id == j->id
            && d->jobs[i]->svc_index >= s->next_index)
            s->next_index = d->jobs[i]->svc_index + 1;
    s->initial = s->desired = j->spec->replicas;
    s->warm = j->spec->inference.warm_pool_size
                  ? j->spec->inference.warm_pool_size
                  : d->cfg.inference.warm_pool_size;
    s->created_ms = s->prev_ms = dnow_ms();
    s->hold_n = s->initial;
    s->hold_initial = true;
    s->hold_until_ms = s->created_ms + s->params.stable_window_ms;
    rollout_resume(d, s);
    if (d->nsvcs == d->capsvcs) {
        size_t cap = d->capsvcs ? d->capsvcs * 2 : 8;
        if (!(grown = realloc(d->svcs, cap * sizeof(*d->svcs))))
            goto nomem;
        d->svcs = grown;
        d->capsvcs = cap;
    }
    d->svcs[d->nsvcs++] = s;
    pthread_cond_signal(&d->svc_wake);
    return 0;
nomem:
    crater_log(LOG_ERR, "service %s: out of memory", j->name);
    svc_free(s);
    return -1;
}

/* ---- replicas ------------------------------------------------------------ */

bool rep_of(const djob_t *j, const dservice_t *s)
{
    return j->svc_id == s->id && j->durable;
}

bool rep_live(const djob_t *j)
{
    return !job_state_final(j->state) && !j->cancel_requested
           && !j->svc_draining;
}

const char *role_name(int role)
{
    return role == CRATER__SVC_WARM ? "warm" : "traffic";
}

/* The replica's base URL (its node's address as its agent registered). */
int rep_url(crater_daemon_t *d, const djob_t *j, char *buf, size_t n)
{
    dnode_t *node = node_by_sid(d, j->pl.node);
    const char *host = node && node->addr ? node->addr
                       : node             ? node->name
                                          : NULL;

    if (!host || !j->master_port)
        return -1;
    snprintf(buf, n, "http://%s:%" PRIu32, host, j->master_port);
    return 0;
}

static bool port_used(crater_daemon_t *d, const djob_t *j, uint32_t port)
{
    if (node_port_held(d, j->pl.node, port)) /* a process of the node's */
        return true;
    for (size_t i = 0; i < d->njobs; i++) {
        const djob_t *o = d->jobs[i];
        if (o != j && o->svc_id && o->placed && o->master_port == port)
            return true;
    }
    return false;
}

void service_bound(crater_daemon_t *d, djob_t *j)
{
    uint32_t count = d->cfg.server.gang_ports;
    uint32_t base = d->cfg.server.gang_port_base + count;

    if (base + count > 65536)
        base = 65536 - count; /* the config keeps base + count <= 65536 */
    j->svc_ready = j->svc_loaded = false;
    j->svc_probe_fails = 0;
    for (uint32_t k = 0; k < count; k++) {
        uint32_t p = base + (uint32_t)((j->id + k) % count);
        if (!port_used(d, j, p)) {
            j->master_port = p;
            return;
        }
    }
    j->master_port = base + (uint32_t)(j->id % count); /* all taken: share */
}

/* The priority and preemptibility of a replica in role. */
static void role_priority(const djob_t *svc,
                          int role,
                          int32_t *prio,
                          bool *preemptible)
{
    *prio = svc->priority;
    *preemptible = svc->spec->preemptible;
    if (role == CRATER__SVC_WARM) {
        *prio = svc->priority > SVC_WARM_PRIORITY ? SVC_WARM_PRIORITY
                                                  : svc->priority - 1;
        *preemptible = true;
    }
}

static void norm_priority(json_t *norm, int32_t prio, bool preemptible)
{
    json_object_del(norm, "priorityClass");
    json_object_set_new(norm, "priority", json_integer(prio));
    json_object_set_new(norm, "preemptible", json_boolean(preemptible));
}

/* The replica's spec: the service's, one task, no inference section. */
static json_t *rep_norm(const djob_t *svc, uint32_t index, int role)
{
    json_t *norm = json_deep_copy(svc->spec_json);
    char name[200];
    int32_t prio;
    bool pre;

    if (!norm)
        return NULL;
    snprintf(name, sizeof(name), "%.180s-%" PRIu32, svc->name, index);
    json_object_del(norm, "inference");
    json_object_del(norm, "after"); /* the service waits, not its replicas */
    json_object_set_new(norm, "name", json_string(name));
    json_object_set_new(norm, "replicas", json_integer(1));
    json_object_set_new(norm, "gang", json_false());
    json_object_set_new(norm, "workloadType", json_string("inference"));
    role_priority(svc, role, &prio, &pre);
    norm_priority(norm, prio, pre);
    return norm;
}

static djob_t *rep_job(crater_daemon_t *d,
                       const djob_t *svc,
                       uint32_t index,
                       int role,
                       crater_error_t *err)
{
    json_t *norm = rep_norm(svc, index, role);
    crater_jobspec_t *spec = NULL;
    crater_dec_t dec;
    char v[24];
    djob_t *j = NULL;

    crater_dec_init(&dec, NULL, 0, err);
    snprintf(v, sizeof(v), "%" PRIu32, index);
    if (!norm || crater_jobspec_decode(&dec, norm, &spec) < 0
        || job_add_env(spec, norm, "CRATER_SERVICE", svc->name) < 0
        || job_add_env(spec, norm, "CRATER_SERVICE_REPLICA", v) < 0
        || pipeline_env(d, svc, spec, norm) < 0
        || !(j = job_create(d, spec, norm, err))) {
        crater_jobspec_destroy(spec);
        json_decref(norm);
        if (err->errnum == CRATER_OK)
            crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    j->svc_id = svc->id;
    j->svc_role = role;
    j->svc_index = index;
    j->svc_version = svc->svc_version;
    return j;
}

typedef struct created {
    crater_daemon_t *d;
    uint64_t svc, job;
} created_t;

static void rep_stored(int rc,
                       int64_t rev,
                       const crater_error_t *err,
                       void *arg)
{
    created_t *c = arg;
    crater_daemon_t *d = c->d;
    djob_t *j;
    dservice_t *s;

    (void)rev;
    pthread_mutex_lock(&d->mu);
    s = svc_find(d, c->svc);
    if (s && s->creating)
        s->creating--;
    if ((j = job_find(d, c->job)) && rc == 0) {
        j->durable = true;
        if (s)
            queue_push_job(d, j);
        else /* its service ended while it was being stored */
            job_cancel(d, j, "its service ended");
        loop_kick(d);
    } else if (j) {
        crater_log(LOG_ERR,
                   "service replica %" PRIu64 " not stored: %s",
                   c->job,
                   err ? err->text : "store error");
        job_remove(d, j);
        job_free(j);
    }
    pthread_mutex_unlock(&d->mu);
    free(c);
}

/* Create and store a replica of s in role; it is queued once stored. */
uint64_t svc_start(crater_daemon_t *d, dservice_t *s, int role)
{
    djob_t *svc = job_find(d, s->id), *j;
    created_t *c = calloc(1, sizeof(*c));
    crater_error_t err = {0};

    if (!svc || !c || !(j = rep_job(d, svc, s->next_index, role, &err))) {
        crater_log(LOG_ERR, "service %s: replica: %s", s->name, err.text);
        free(c);
        return 0;
    }
    s->next_index++;
    j->id = d->next_id++;
    job_event(j,
              j->submitted_ms,
              JS_PENDING,
              role == CRATER__SVC_WARM ? "replica for the warm pool"
                                       : "replica for traffic");
    if (job_insert(d, j) < 0) {
        job_free(j);
        free(c);
        return 0;
    }
    *c = (created_t){d, s->id, j->id};
    s->creating++;
    if (job_save(d, j, rep_stored, c) < 0) {
        s->creating--;
        job_remove(d, j);
        job_free(j);
        free(c);
        return 0;
    }
    return c->job;
}

/* Move replica j into role: its priority and preemptibility follow, in
 * the queue or in the core. */
static void rep_retag(crater_daemon_t *d, djob_t *j, int role)
{
    djob_t *svc = job_find(d, j->svc_id);
    crater_error_t err;
    int32_t prio;
    bool pre;

    if (!svc)
        return;
    role_priority(svc, role, &prio, &pre);
    j->svc_role = role;
    j->priority = j->req.priority = prio;
    j->req.preemptible = j->spec->preemptible = pre;
    norm_priority(j->spec_json, prio, pre);
    if (j->placed
        && crater_sched_retag(d->sched, job_task_id(j, 0), prio, pre, &err) < 0)
        crater_log(LOG_WARNING, "replica %" PRIu64 ": %s", j->id, err.text);
    if (j->state == JS_PENDING && j->durable) {
        crater_queue_remove(d->queue, j->id, NULL);
        queue_push_job(d, j);
    }
    job_save(d, j, NULL, NULL);
}

/* ---- the gateway's table --------------------------------------------------
 */

static void gw_out(crater_daemon_t *d, const dservice_t *s, djob_t *j)
{
    char url[GW_URL_MAX];
    crater_error_t err;

    if (!j->svc_in_gw)
        return;
    j->svc_in_gw = false;
    if (d->gwt && rep_url(d, j, url, sizeof(url)) == 0)
        gw__table_remove(d->gwt, s->name, url, &err);
}

static void gw_in(crater_daemon_t *d, const dservice_t *s, djob_t *j)
{
    char url[GW_URL_MAX];
    crater_error_t err;

    if (j->svc_in_gw || !d->gwt || rep_url(d, j, url, sizeof(url)) < 0)
        return;
    if (gw__table_add(d->gwt, s->name, url, &err) < 0
        && err.errnum != CRATER_EEXIST) {
        crater_log(LOG_WARNING, "service %s: %s", s->name, err.text);
        return;
    }
    gw__table_set_ready(d->gwt, s->name, url, true, &err);
    j->svc_in_gw = true;
}

/* A ready replica in traffic is a backend; nothing else is. */
static void gw_sync(crater_daemon_t *d, const dservice_t *s)
{
    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        if (!rep_of(j, s))
            continue;
        if (j->state != JS_RUNNING)
            j->svc_ready = false;
        if (j->state == JS_RUNNING && j->svc_ready && rep_live(j)
            && j->svc_role == CRATER__SVC_TRAFFIC)
            gw_in(d, s, j);
        else
            gw_out(d, s, j);
    }
}

/* ---- draining ------------------------------------------------------------ */

#define SVC_DRAIN_MS 30000

/* The drain of j is over (or abandoned): the gateway's backend goes. */
static void drain_end(crater_daemon_t *d, djob_t *j)
{
    if (j->svc_drain && d->gwt)
        gw__table_release(d->gwt, j->svc_drain);
    j->svc_drain = NULL;
}

void svc_retire(
    crater_daemon_t *d, dservice_t *s, djob_t *j, const char *why, int64_t now)
{
    char url[GW_URL_MAX];
    crater_error_t err;

    if (j->svc_in_gw && d->gwt && rep_url(d, j, url, sizeof(url)) == 0)
        j->svc_drain = gw__table_drain(d->gwt, s->name, url, &err);
    j->svc_in_gw = false;
    if (!j->svc_drain) {
        job_cancel(d, j, why);
        return;
    }
    j->svc_draining = true;
    j->svc_drain_ms = now;
    crater_log(LOG_INFO,
               "service %s: replica %" PRIu64 " draining (%s)",
               s->name,
               j->id,
               why);
}

/* Stop the draining replicas with nothing in flight any more. */
static void svc_drains(crater_daemon_t *d, dservice_t *s, int64_t now)
{
    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        if (j->svc_id != s->id || !j->svc_draining)
            continue;
        if (j->svc_drain && !job_state_final(j->state)
            && gw__table_outstanding(d->gwt, j->svc_drain) > 0
            && now - j->svc_drain_ms < SVC_DRAIN_MS)
            continue;
        drain_end(d, j);
        j->svc_draining = false;
        if (!job_state_final(j->state) && !j->cancel_requested)
            job_cancel(d, j, "drained");
    }
}

static int gw_service(crater_daemon_t *d, const djob_t *svc)
{
    const crater_inference_t *inf = &svc->spec->inference;
    unsigned batch = inf->max_batch_size ? inf->max_batch_size
                                         : d->cfg.inference.max_batch_size;
    uint64_t tmo = inf->batch_timeout_ms ? inf->batch_timeout_ms
                                         : d->cfg.inference.batch_timeout_ms;
    crater_error_t err;

    if (!d->gwt || gw__table_service(d->gwt, svc->name))
        return 0;
    if (gw__table_add_service(d->gwt, svc->name, &err) < 0
        || gw__table_set_hold(d->gwt,
                              svc->name,
                              (int64_t)d->cfg.inference.activation_timeout_ms
                                  * 1000,
                              &err)
               < 0
        || (batch > 1
            && gw__table_set_batch(d->gwt,
                                   svc->name,
                                   batch,
                                   (int64_t)tmo * 1000,
                                   1,
                                   &err)
                   < 0)) {
        crater_log(LOG_WARNING, "service %s: gateway: %s", svc->name, err.text);
        return -1;
    }
    return 0;
}

/* ---- readiness probes (without d->mu) ------------------------------------ */

typedef struct probe {
    uint64_t job;
    uint32_t attempt;
    char url[GW_URL_MAX + 32];
    bool ok;
} probe_t;

static size_t curl_sink(char *p, size_t size, size_t n, void *arg)
{
    (void)p;
    (void)arg;
    return size * n;
}

static bool probe_one(const char *url)
{
    CURL *c = curl_easy_init();
    long code = 0;

    if (!c)
        return false;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)SVC_PROBE_MS);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, curl_sink);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    return code == 200;
}

/* The running replicas to probe over HTTP (*out: malloc'd; caller frees
 * it); those with a readiness command are probed by their agents
 * (svc_ready_report()). */
static size_t probes_list(crater_daemon_t *d, probe_t **out)
{
    size_t n = 0;
    probe_t *p = calloc(d->njobs ? d->njobs : 1, sizeof(*p));
    char url[GW_URL_MAX];
    for (size_t i = 0; p && i < d->njobs; i++) {
        djob_t *j = d->jobs[i], *svc;
        if (!j->svc_id || j->state != JS_RUNNING
            || rep_url(d, j, url, sizeof(url)) < 0
            || !(svc = job_find(d, j->svc_id)))
            continue;
        if (svc->spec->inference.ready_cmd)
            continue;
        p[n].job = j->id;
        p[n].attempt = j->attempts;
        snprintf(p[n].url, sizeof(p[n].url), "%s/v2/health/ready", url);
        n++;
    }
    *out = p;
    return n;
}

static void load_measured(dservice_t *s, int64_t ms, int64_t now)
{
    /* the submission's count holds a stable window past its first load */
    if (s->loads == 0 && s->hold_initial
        && s->hold_until_ms < now + s->params.stable_window_ms)
        s->hold_until_ms = now + s->params.stable_window_ms;
    s->load_last_ms = ms;
    s->load_sum_ms += ms;
    s->loads++;
    if (ms > s->load_max_ms)
        s->load_max_ms = ms;
}

/* Replica j (running) is ready or not, by a probe that ended now. */
static void rep_ready(crater_daemon_t *d, djob_t *j, bool ok, int64_t now)
{
    dservice_t *s = svc_find(d, j->svc_id);

    j->svc_ready = ok;
    if (ok && !j->svc_loaded && s && j->started_ms) {
        j->svc_loaded = true;
        load_measured(s, now - j->started_ms, now);
    }
}

/* A ready replica leaves traffic after this many failed probes in a row
 * (Kubernetes' failureThreshold, 3 by default): one probe that missed its
 * 500 ms on a loaded node is not a replica gone (a rollout counted one
 * as such, test_rollout); a replica not ready yet enters at its first
 * success. */
#define SVC_PROBE_FAILURES 3

static void probes_apply(crater_daemon_t *d,
                         const probe_t *p,
                         size_t n,
                         int64_t now)
{
    for (size_t i = 0; i < n; i++) {
        djob_t *j = job_find(d, p[i].job);
        bool ok = p[i].ok;
        if (!j || j->state != JS_RUNNING || j->attempts != p[i].attempt)
            continue;
        if (ok)
            j->svc_probe_fails = 0;
        else if (j->svc_ready && ++j->svc_probe_fails < SVC_PROBE_FAILURES)
            ok = true; /* still in traffic */
        rep_ready(d, j, ok, now);
    }
}

void svc_ready_report(crater_daemon_t *d, djob_t *j, bool ready)
{
    const djob_t *svc = j->svc_id ? job_find(d, j->svc_id) : NULL;

    if (j->state != JS_RUNNING || !svc || !svc->spec->inference.ready_cmd)
        return; /* only what its agent was asked to probe */
    rep_ready(d, j, ready, dnow_ms());
    pthread_cond_signal(&d->svc_wake); /* the gateway follows at once */
}

/* ---- the autoscaler ---------------------------------------------------- */

counts_t svc_counts(crater_daemon_t *d, const dservice_t *s)
{
    counts_t c = {0};

    for (size_t i = 0; i < d->njobs; i++) {
        const djob_t *j = d->jobs[i];
        if (!rep_of(j, s) || !rep_live(j))
            continue;
        bool warm = j->svc_role == CRATER__SVC_WARM;
        c.traffic += !warm;
        c.warm += warm;
        c.ready += !warm && j->svc_ready;
        c.warm_ready += warm && j->svc_ready;
        c.starting += !j->svc_ready;
    }
    return c;
}

/* What the autoscaler cannot know. The count asked at submission holds
 * for a stable window after the first replica has loaded (the windows
 * start empty: zero load would otherwise stop a model before it ever
 * served).
 * An activation (requests refused at zero) holds its count for a stable
 * window plus the load time: the next tick sees no request waiting, and
 * would stop the replica that is loading for them. */
static void svc_hold(dservice_t *s,
                     int64_t now,
                     const counts_t *c,
                     const crater__as_input_t *in,
                     crater__as_decision_t *dec)
{
    if (c->ready == 0 && in->waiting > 0 && dec->desired > 0) {
        s->hold_initial = false;
        s->hold_n = dec->desired;
        s->hold_until_ms = now + s->params.stable_window_ms + s->load_max_ms;
        return;
    }
    if (dec->desired >= s->hold_n
        || (now >= s->hold_until_ms && !(s->hold_initial && s->loads == 0)))
        return;
    dec->desired = s->hold_n;
    snprintf(dec->reason,
             sizeof(dec->reason),
             "%s: %u held",
             s->hold_initial ? "initial replicas" : "activation",
             s->hold_n);
}

/* One sample of the gateway's load and a decision. */
static void svc_decide(crater_daemon_t *d,
                       dservice_t *s,
                       int64_t now,
                       const counts_t *c,
                       crater__as_decision_t *dec)
{
    gw_service_t *g = d->gwt ? gw__table_service(d->gwt, s->name) : NULL;
    uint64_t answered = g ? atomic_load(&g->answered) : 0;
    uint64_t unserved = g ? atomic_load(&g->unserved) : 0;
    double dt = (double)(now - s->prev_ms) / 1000.0;
    crater__as_sample_t smp = {.time_ms = now};
    crater__as_input_t in = {.now_ms = now,
                             .current = c->ready,
                             .load_ms = s->load_max_ms};
    crater_error_t err;

    smp.concurrency = g ? atomic_load(&g->queued) : 0;
    smp.rps = dt > 0 ? (double)(answered - s->answered_prev) / dt : 0;
    in.waiting = c->ready ? 0
                          : (unsigned)(unserved - s->unserved_prev)
                                + (g ? atomic_load(&g->held) : 0);
    s->answered_prev = answered;
    s->unserved_prev = unserved;
    s->prev_ms = now;
    if (crater__as_record(s->as, &smp, &err) < 0
        || crater__as_decide(s->as, &in, dec, &err) < 0) {
        crater_log(LOG_WARNING,
                   "service %s: autoscaler: %s",
                   s->name,
                   err.text);
        *dec = s->last;
        return;
    }
    svc_hold(s, now, c, &in, dec);
}

/* ---- replicas that end on their own ----------------------------------------
 */

#define SVC_BACKOFF_MAX_MS 300000

/* A replica that ended without being stopped (its model server exited or
 * failed, its node was lost for good) is replaced by the plan; one that
 * never became ready counts as a crash, and starts wait 1 s, 2 s, 4 s ...
 * up to 5 min after the last one, as Kubernetes backs off a crash-looping
 * pod: a service whose model cannot start does not create a job a
 * second. A replica becoming ready ends the run. */
static void svc_reap(crater_daemon_t *d, dservice_t *s, int64_t now)
{
    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        if (!rep_of(j, s))
            continue;
        if (j->svc_ready)
            s->crashes = 0;
        if (!job_state_final(j->state) || j->svc_reaped)
            continue;
        j->svc_reaped = true;
        if (j->cancel_requested || j->svc_loaded || j->svc_draining)
            continue;
        rollout_crash(s, j);
        s->crashes++;
        int64_t wait = SVC_BACKOFF_MAX_MS;
        if (s->crashes < 20 && (1000ll << (s->crashes - 1)) < wait)
            wait = 1000ll << (s->crashes - 1);
        s->next_start_ms = now + wait;
        crater_log(LOG_WARNING,
                   "service %s: replica %" PRIu64 " ended before it was "
                   "ready (%u in a row): starts wait %" PRId64 " ms",
                   s->name,
                   j->id,
                   s->crashes,
                   wait);
    }
}

/* Drop the starts while backing off (the rest of the plan stands). */
static size_t no_starts(crater__svc_action_t *a, size_t k)
{
    size_t n = 0;

    for (size_t i = 0; i < k; i++)
        if (a[i].op != CRATER__SVC_START_TRAFFIC
            && a[i].op != CRATER__SVC_START_WARM)
            a[n++] = a[i];
    return n;
}

/* ---- the plan and its actions ------------------------------------------ */

static size_t svc_reps(crater_daemon_t *d,
                       const dservice_t *s,
                       crater__svc_rep_t *reps,
                       size_t max)
{
    size_t n = 0;

    for (size_t i = 0; i < d->njobs && n < max; i++) {
        const djob_t *j = d->jobs[i];
        if (!rep_of(j, s) || !rep_live(j) || !rollout_plans(s, j))
            continue;
        reps[n++] = (crater__svc_rep_t){.id = j->id,
                                        .role = j->svc_role,
                                        .ready = j->svc_ready,
                                        .since_ms = j->submitted_ms};
    }
    return n;
}

static void act(crater_daemon_t *d,
                dservice_t *s,
                const crater__svc_action_t *a)
{
    djob_t *j = a->id ? job_find(d, a->id) : NULL;

    switch (a->op) {
    case CRATER__SVC_START_TRAFFIC:
    case CRATER__SVC_START_WARM:
        svc_start(d,
                  s,
                  a->op == CRATER__SVC_START_WARM ? CRATER__SVC_WARM
                                                  : CRATER__SVC_TRAFFIC);
        break;
    case CRATER__SVC_PROMOTE:
        if (j)
            rep_retag(d, j, CRATER__SVC_TRAFFIC);
        break;
    case CRATER__SVC_DEMOTE:
        if (j) {
            gw_out(d, s, j);
            rep_retag(d, j, CRATER__SVC_WARM);
        }
        break;
    case CRATER__SVC_STOP:
        if (j)
            svc_retire(d, s, j, "service scaled down", dnow_ms());
        break;
    }
}

static json_t *decision_json(const dservice_t *s,
                             const crater__as_decision_t *dec,
                             const counts_t *c,
                             json_t *actions)
{
    return json_pack("{s:I, s:s, s:s, s:I, s:{s:f, s:f, s:f, s:i, s:i, s:i, "
                     "s:i, s:I},"
                     " s:i, s:i, s:i, s:b, s:s, s:o}",
                     "time_ms",
                     (json_int_t)dec->now_ms,
                     "decision",
                     "autoscale",
                     "service",
                     s->name,
                     "job",
                     (json_int_t)s->id,
                     "inputs",
                     "observed_stable",
                     dec->observed_stable,
                     "observed_panic",
                     dec->observed_panic,
                     "target",
                     dec->target,
                     "ready",
                     (int)c->ready,
                     "traffic",
                     (int)c->traffic,
                     "warm",
                     (int)c->warm,
                     "starting",
                     (int)c->starting,
                     "load_ms",
                     (json_int_t)s->load_max_ms,
                     "current",
                     (int)dec->current,
                     "desired",
                     (int)dec->desired,
                     "warm_pool",
                     (int)s->warm,
                     "panic",
                     dec->panic,
                     "reason",
                     dec->reason,
                     "actions",
                     actions);
}

/* Keep it for describe and write it to the decision log when it acts,
 * changes the count, or a minute has passed since the last one logged. */
static void svc_log(crater_daemon_t *d,
                    dservice_t *s,
                    const crater__as_decision_t *dec,
                    const counts_t *c,
                    json_t *actions,
                    int64_t now)
{
    bool moved = json_array_size(actions) > 0 || !s->decided
                 || dec->desired != s->last.desired;
    json_t *e;

    if (!moved && now - s->logged_ms < SVC_HOLD_LOG_MS) {
        json_decref(actions);
        return;
    }
    if (!(e = decision_json(s, dec, c, actions)))
        return;
    s->logged_ms = now;
    if (json_array_size(s->decisions) >= SVC_DECISIONS)
        json_array_remove(s->decisions, 0);
    json_array_append(s->decisions, e);
    crater_log(LOG_INFO,
               "service %s: desired %u (%s)",
               s->name,
               dec->desired,
               dec->reason);
    declog_write(d, e);
}

static void svc_step(crater_daemon_t *d, dservice_t *s, int64_t now)
{
    crater__svc_rep_t reps[JOB_MAX_REPLICAS];
    crater__svc_action_t acts[SVC_MAX_ACTIONS];
    crater__as_decision_t dec;
    counts_t c = svc_counts(d, s);
    json_t *actions = json_array();
    size_t n = 0, k = 0;
    unsigned want, warm;

    gw_sync(d, s);
    svc_reap(d, s, now);
    svc_drains(d, s, now);
    svc_decide(d, s, now, &c, &dec);
    if (pipeline_step(d, s)) {
        /* no model to serve yet */
    } else {
        /* while rolling, the count applies to the new version (its
         * replicas are the plan's; old ones beyond it drain) */
        rollout_step(d, s, now, actions);
        rollout_split(d, s, dec.desired, now, actions, &want, &warm);
        if (s->creating == 0) { /* starts being stored count next tick */
            n = svc_reps(d, s, reps, JOB_MAX_REPLICAS);
            k = crater__svc_plan(reps, n, want, warm, acts, SVC_MAX_ACTIONS);
            if (now < s->next_start_ms)
                k = no_starts(acts, k);
        }
    }
    for (size_t i = 0; i < k; i++) {
        act(d, s, &acts[i]);
        json_array_append_new(actions,
                              json_pack("{s:s, s:I}",
                                        "op",
                                        crater__svc_op_name(acts[i].op),
                                        "job",
                                        (json_int_t)acts[i].id));
    }
    if (k || json_array_size(actions))
        gw_sync(d, s); /* a promoted ready replica takes traffic now */
    svc_log(d, s, &dec, &c, actions, now);
    s->last = dec;
    s->desired = dec.desired;
    s->decided = true;
}

/* The replicas gauge of a service (crater_service_replicas). */
static void replicas_set(crater_daemon_t *d,
                         const char *name,
                         const counts_t *c)
{
    const struct {
        const char *state;
        unsigned n;
    } rows[] = {
        {"ready", c->ready},
        {"traffic", c->traffic},
        {"warm", c->warm},
        {"warm_ready", c->warm_ready},
        {"starting", c->starting},
    };

    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const char *lv[] = {name, rows[i].state};
        crater_metric_set(d->svc_replicas, lv, rows[i].n);
    }
}

/* The service's job ended (cancelled): stop its replicas, forget it. */
static void svc_end(crater_daemon_t *d, size_t idx)
{
    dservice_t *s = d->svcs[idx];

    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        if (j->svc_id != s->id)
            continue;
        gw_out(d, s, j);
        drain_end(d, j);
        if (!job_state_final(j->state) && !j->cancel_requested)
            job_cancel(d, j, "its service ended");
    }
    if (d->svc_replicas)
        replicas_set(d, s->name, &(counts_t){0});
    memmove(&d->svcs[idx],
            &d->svcs[idx + 1],
            (d->nsvcs - idx - 1) * sizeof(*d->svcs));
    d->nsvcs--;
    svc_free(s);
    loop_kick(d);
}

static void svc_tick(crater_daemon_t *d, int64_t now)
{
    for (size_t i = d->nsvcs; i-- > 0;) {
        djob_t *j = job_find(d, d->svcs[i]->id);
        if (!j || job_state_final(j->state)) {
            svc_end(d, i);
            continue;
        }
        gw_service(d, j);
        svc_step(d, d->svcs[i], now);
    }
}

/* ---- the thread ------------------------------------------------------------
 */

static void svc_round(crater_daemon_t *d)
{
    probe_t *p = NULL;
    size_t n = probes_list(d, &p);

    pthread_mutex_unlock(&d->mu);
    for (size_t i = 0; i < n; i++)
        p[i].ok = probe_one(p[i].url);
    pthread_mutex_lock(&d->mu);
    if (!d->stopping) {
        int64_t now = dnow_ms();
        probes_apply(d, p, n, now);
        svc_tick(d, now);
    }
    free(p);
}

static void *svc_main(void *arg)
{
    crater_daemon_t *d = arg;
    struct timespec ts;

    pthread_setname_np(pthread_self(), "services"); /* top -H, perf, gdb */

    pthread_mutex_lock(&d->mu);
    while (!d->stopping) {
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)SVC_TICK_MS % 1000 * 1000000L;
        ts.tv_sec += SVC_TICK_MS / 1000 + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&d->svc_wake, &d->mu, &ts);
        if (!d->stopping && d->nsvcs)
            svc_round(d);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* The gateway's table (empty; the services are added before it
 * listens). */
static int gw_open(crater_daemon_t *d, crater_error_t *err)
{
    const char *conf = d->cfg.inference.gateway;

    if (!conf || strcmp(conf, "none") == 0)
        return 0;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK
        || !(d->gwt = gw__table_create()))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    return 0;
}

/* An API on port 0 (tests, several daemons on one host) puts the gateway
 * on a free port too; GET /api/v1/services and `crater up` tell which. */
static int gw_listen(crater_daemon_t *d, const char *api, crater_error_t *err)
{
    const char *conf = d->cfg.inference.gateway, *colon;
    gw_opts_t o = {.listen = conf, .threads = 4};
    char any[300];

    if (!d->gwt)
        return 0;
    colon = strrchr(conf, ':');
    if (api && strlen(api) > 2 && !strcmp(api + strlen(api) - 2, ":0")
        && colon) {
        snprintf(any, sizeof(any), "%.*s:0", (int)(colon - conf), conf);
        o.listen = any;
    }
    if (!(d->gw = gw__start(&o, d->gwt, err)))
        return crater_errorf(err,
                             err->errnum,
                             "inference.gateway %s: %s",
                             o.listen,
                             err->text);
    return 0;
}

/* The stored services are attached again, and routed by the gateway
 * before it listens: a request arriving just after a restart is held
 * for a ready replica, not answered 404 (test_rollout_restart). */
static void svcs_attach(crater_daemon_t *d)
{
    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        /* a replica running across the restart loaded its model before */
        j->svc_loaded = j->svc_id && job_state_holds(j->state);
        j->svc_reaped = j->svc_id && job_state_final(j->state);
        if (job_is_service(j) && !job_state_final(j->state)
            && service_attach(d, j) == 0)
            gw_service(d, j);
    }
    for (size_t i = 0; i < d->njobs; i++) { /* replicas of ended services */
        djob_t *j = d->jobs[i];
        if (j->svc_id && !job_state_final(j->state) && !j->cancel_requested
            && !svc_find(d, j->svc_id))
            job_cancel(d, j, "its service ended");
    }
}

int services_start(crater_daemon_t *d, const char *api, crater_error_t *err)
{
    if (gw_open(d, err) < 0)
        return -1;
    pthread_mutex_lock(&d->mu);
    svcs_attach(d);
    pthread_mutex_unlock(&d->mu);
    if (gw_listen(d, api, err) < 0)
        return -1;
    if (pthread_create(&d->svc_thread, NULL, svc_main, d) != 0)
        return crater_errorf(err, CRATER_ENOMEM, "cannot start a thread");
    d->svc_started = true;
    return 0;
}

void services_stop(crater_daemon_t *d)
{
    pthread_mutex_lock(&d->mu);
    d->stopping = true;
    pthread_cond_signal(&d->svc_wake);
    for (size_t i = 0; i < d->njobs; i++)
        drain_end(d, d->jobs[i]);
    pthread_mutex_unlock(&d->mu);
    if (d->svc_started)
        pthread_join(d->svc_thread, NULL);
    d->svc_started = false;
    gw__stop(d->gw);
    d->gw = NULL;
    gw__table_destroy(d->gwt);
    d->gwt = NULL;
    for (size_t i = 0; i < d->nsvcs; i++)
        svc_free(d->svcs[i]);
    free(d->svcs);
    d->svcs = NULL;
    d->nsvcs = d->capsvcs = 0;
}

/* ---- metrics ------------------------------------------------------------ */

void services_metrics_publish(crater_daemon_t *d)
{
    crater_error_t err;
    static const char *const labels[] = {"service", "state", NULL};

    if (!d->svc_replicas)
        d->svc_replicas = crater_metrics_gauge(d->metrics,
                                               "crater_service_replicas",
                                               "Replicas of an inference "
                                               "service by state: ready (in "
                                               "traffic), traffic, warm, "
                                               "warm_ready, starting",
                                               labels,
                                               &err);
    for (size_t i = 0; d->svc_replicas && i < d->nsvcs; i++) {
        counts_t c = svc_counts(d, d->svcs[i]);
        replicas_set(d, d->svcs[i]->name, &c);
    }
}

char *services_metrics_render(crater_daemon_t *d, size_t *len)
{
    *len = 0;
    return d->gw ? gw__metrics_render(d->gw, len) : NULL;
}

uint16_t service_gateway_port(const crater_daemon_t *d)
{
    return d->gw ? gw__port(d->gw) : 0;
}
