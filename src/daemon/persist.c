/* persist.c - what craterd keeps in the store, and rebuilding memory from
 * it at start.
 *
 * Keys (see internal.h): /crater/jobs/<20-digit id>, /crater/nodes/<name>,
 * /crater/tokens/<sha256 hex>, /crater/tenants/<name>,
 * /crater/profiles/<name>@<version>. Values are compact JSON. Writes are
 * asynchronous group commits issued under d->mu, so they reach the store
 * in the order the state changed; the last write of a key wins.
 *
 * Rebuild order: tokens, tenants, profiles, nodes (added to the core in key
 * order; a node is NotReady until its agent registers again, and its jobs
 * are only treated as lost one heartbeatTimeout after the restart), then
 * jobs: pending jobs go back in the queue, jobs holding a placement are
 * charged to the core exactly as recorded.
 *
 * A promoted standby (ha.c) loads from its warm copy of the records
 * (warm.h, caught up to the store's revision) instead of listing the
 * store: persist_list() is the one place that chooses, and everything
 * after it - decoding, quarantine, the order, the restart's rules above -
 * is the same code for both.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "crater/log.h"
#include "daemon/cost.h"
#include "daemon/internal.h"
#include "daemon/warm.h"

static void put_done(int rc, int64_t rev, const crater_error_t *err, void *arg)
{
    (void)rev;
    (void)arg;
    if (rc < 0)
        crater_log(LOG_ERR, "store: commit failed: %s", err ? err->text : "");
}

int persist_put_json(crater_daemon_t *d,
                     const char *key,
                     json_t *v,
                     crater_store_done_f cb,
                     void *arg)
{
    crater_txn_t *t = crater_txn_create();
    char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
    crater_error_t err;
    int rc = -1;

    json_decref(v);
    if (t && text && crater_txn_put(t, key, text, strlen(text), 0, &err) == 0) {
        rc = crater_store_commit_async(d->store,
                                       t,
                                       cb ? cb : put_done,
                                       arg,
                                       &err);
        t = NULL; /* owned by the store now, even on failure */
        crater_metric_add(d->m_commits, NULL, 1);
    }
    if (rc < 0)
        crater_log(LOG_ERR, "store: cannot write %s", key);
    crater_txn_destroy(t);
    free(text);
    return rc;
}

int persist_list(crater_daemon_t *d,
                 const char *prefix,
                 crater_skv_list_t *out,
                 crater_error_t *err)
{
    return d->warm ? crater_warm_list(d->warm, prefix, out, err)
                   : crater_store_list(d->store, prefix, out, err);
}

typedef int (*load_f)(crater_daemon_t *d,
                      json_t *v,
                      const char *key,
                      crater_error_t *err);

/* A row that cannot be loaded is moved to KEY_QUARANTINE + its key (one
 * transaction) and reported; the rest of the cluster starts. */
static int quarantine(crater_daemon_t *d,
                      const crater_skv_t *kv,
                      const crater_error_t *why)
{
    char qkey[1024];
    crater_error_t err = {0};
    crater_txn_t *t = crater_txn_create();
    int rc;

    snprintf(qkey, sizeof(qkey), KEY_QUARANTINE "%s", kv->key);
    rc = t && crater_txn_put(t, qkey, kv->value, kv->len, 0, &err) == 0
                 && crater_txn_delete(t, kv->key, &err) == 0
                 && crater_store_commit(d->store, t, NULL, &err) == 0
             ? 0
             : -1;
    crater_txn_destroy(t);
    if (strncmp(kv->key, KEY_JOBS, strlen(KEY_JOBS)) == 0) {
        /* its id stays used: no later job takes it */
        uint64_t id = strtoull(kv->key + strlen(KEY_JOBS), NULL, 10);
        if (id >= d->next_id)
            d->next_id = id + 1;
    }
    crater_log(LOG_ERR,
               "store: %s cannot be loaded (%s): %s %s",
               kv->key,
               why->text,
               rc == 0 ? "moved to" : "left in place; could not move it to",
               qkey);
    d->quarantined++;
    return 0;
}

static int load_prefix(crater_daemon_t *d,
                       const char *prefix,
                       load_f fn,
                       crater_error_t *err)
{
    crater_skv_list_t l = {0};
    json_error_t jerr;
    int rc = 0;

    if (persist_list(d, prefix, &l, err) < 0)
        return -1;
    for (size_t i = 0; i < l.count && rc == 0; i++) {
        json_t *v = json_loadb(l.items[i].value, l.items[i].len, 0, &jerr);
        if (!v)
            rc = crater_errorf(err,
                               CRATER_EPARSE,
                               "store: %s: %s",
                               l.items[i].key,
                               jerr.text);
        else
            rc = fn(d, v, l.items[i].key, err);
        json_decref(v);
        if (rc < 0 && err->errnum != CRATER_ENOMEM)
            rc = quarantine(d, &l.items[i], err);
    }
    crater_skv_list_free(&l);
    return rc;
}

static int load_token(crater_daemon_t *d,
                      json_t *v,
                      const char *key,
                      crater_error_t *err)
{
    crater_token_rec_t rec;

    (void)key;
    if (crater_token_rec_from_json(v, &rec, err) < 0)
        return -1;
    return token_add(d, &rec) < 0
               ? crater_errorf(err, CRATER_ENOMEM, "out of memory")
               : 0;
}

static int load_tenant(crater_daemon_t *d,
                       json_t *v,
                       const char *key,
                       crater_error_t *err)
{
    dtenant_t *t = tenant_get(d, key + strlen(KEY_TENANTS));
    json_int_t g = 0, gm = 0, c = 0, m = 0, uid = 0, dc = 0, dm = 0;
    double w = 1.0;

    if (!t)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (json_unpack(v,
                    "{s?I, s?I, s?I, s?I, s?F, s?I, s?I, s?I}",
                    "gpus",
                    &g,
                    "gpu_memory",
                    &gm,
                    "cpu_millis",
                    &c,
                    "memory",
                    &m,
                    "weight",
                    &w,
                    "uid",
                    &uid,
                    "default_cpu_millis",
                    &dc,
                    "default_memory",
                    &dm)
            < 0
        || uid < 0 || uid >= UINT32_MAX || dc < 0 || dm < 0)
        return crater_errorf(err, CRATER_EPARSE, "store: %s: malformed", key);
    /* records without "gpus" only keep a task uid (access.c) */
    t->has_quota = json_object_get(v, "gpus") != NULL;
    t->q_gpus = (uint64_t)g;
    t->q_gpu_mem = (uint64_t)gm;
    t->q_cpu = (uint64_t)c;
    t->q_mem = (uint64_t)m;
    t->weight = w;
    t->uid = (uint32_t)uid;
    t->d_cpu = (uint64_t)dc;
    t->d_mem = (uint64_t)dm;
    t->no_idle_reclaim = json_is_false(json_object_get(v, "idle_reclaim"));
    return crater_queue_set_tenant_weight(d->queue, t->name, w, err);
}

/* A tenant's registry during the load: created unshared, so that loading
 * never refuses a name an admin published after the tenant did. */
static crater_profiles_t *load_tenant_profiles(crater_daemon_t *d,
                                               const char *tenant)
{
    crater_profiles_t *reg = tenant_profiles(d, tenant, true);

    if (reg)
        crater_profiles_share(reg, NULL);
    return reg;
}

static int load_profile(crater_daemon_t *d,
                        json_t *v,
                        const char *key,
                        crater_error_t *err)
{
    const char *rest = key + strlen(KEY_PROFILES), *slash = strchr(rest, '/');
    crater_profiles_t *reg = d->profiles;
    char tenant[128];
    crater_dec_t dec;

    /* KEY_PROFILES<tenant>/<name>@<version>: a tenant's own. Its shadow
     * check is off while loading (its registry sees the shared ones only
     * when created through tenant_profiles after the shared are in): an
     * admin may have published its name later. */
    if (slash) {
        if ((size_t)(slash - rest) >= sizeof(tenant))
            return crater_errorf(err, CRATER_EINVAL, "%s: bad key", key);
        memcpy(tenant, rest, (size_t)(slash - rest));
        tenant[slash - rest] = '\0';
        reg = load_tenant_profiles(d, tenant);
        if (!reg)
            return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    crater_dec_init(&dec, NULL, 0, err);
    return crater_profile_decode(&dec, v, reg);
}

static int load_node(crater_daemon_t *d,
                     json_t *v,
                     const char *key,
                     crater_error_t *err)
{
    json_t *hw = json_object_get(v, "hardware");
    const char *reason = json_string_value(json_object_get(v, "reason"));
    dnode_t *n;

    (void)key;
    if (!(n = node_add(d, hw, NULL, err)))
        return -1;
    n->registered = true;
    n->ready = false;
    n->notready_since_ms =
        dnow_ms() + (int64_t)d->cfg.agent.heartbeat_timeout_ms;
    n->cordoned = json_is_true(json_object_get(v, "cordoned"));
    n->draining = json_is_true(json_object_get(v, "draining"));
    if (reason && *reason)
        n->reason = strdup(reason);
    crater_sched_set_cordoned(d->sched, n->sid, n->cordoned);
    return 0;
}

/* A loaded job queued again (the table's restore: nothing is charged or
 * queued yet, so its only effect, the queueing, is load_job's). */
static void restore(djob_t *j)
{
    if (job_life_apply(&j->state, JE_RESTORE, NULL) == 0)
        job_event(j, dnow_ms(), JS_PENDING, "requeued at restart");
}

static int load_job(crater_daemon_t *d,
                    json_t *v,
                    const char *key,
                    crater_error_t *err)
{
    djob_t *j = job_from_store(d, v, err);

    if (!j)
        return crater_errorf(err, err->errnum, "store: %s: %s", key, err->text);
    if (j->placed && job_state_holds(j->state)
        && (j->nrep
                ? gang_recommit(d, j, err)
                : crater_sched_commit(d->sched, j->id, &j->req, &j->pl, err))
               < 0) {
        crater_log(LOG_WARNING,
                   "job %" PRIu64 ": placement no longer fits"
                   " (%s); requeued",
                   j->id,
                   err->text);
        j->placed = false;
        restore(j);
    }
    if (!job_state_holds(j->state))
        j->placed = false;
    if (j->state == JS_PREEMPTED)
        restore(j);
    if (job_insert(d, j) < 0) {
        job_free(j);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    if (j->state == JS_PENDING && !job_is_service(j))
        queue_push_job(d, j); /* a service is attached by services_start */
    return 0;
}

int persist_load(crater_daemon_t *d, crater_error_t *err)
{
    if (load_prefix(d, KEY_TOKENS, load_token, err) < 0
        || load_prefix(d, KEY_TENANTS, load_tenant, err) < 0
        || load_prefix(d, KEY_PROFILES, load_profile, err) < 0
        || load_prefix(d, KEY_NODES, load_node, err) < 0
        || load_prefix(d, KEY_JOBS, load_job, err) < 0
        || load_prefix(d, KEY_K8S, k8s_load_binding, err) < 0)
        return -1;
    typical_rebuild(d);
    for (size_t i = 0; i < d->ntprofiles; i++)
        crater_profiles_share(d->tprofiles[i].reg, d->profiles);
    /* a preemptor waiting for victims restarts its wait from scratch */
    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        if (j->state == JS_PREEMPTING && j->preempted_by) {
            djob_t *p = job_find(d, j->preempted_by);
            if (p)
                p->waiting_for++;
        }
    }
    d->dirty = true;
    return 0;
}

/* ---- metrics ------------------------------------------------------------- */

static const double lat_buckets[] =
    {1e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 5e-2, 1e-1, 1};

int metrics_setup(crater_daemon_t *d, crater_error_t *err)
{
    crater_metrics_t *m = d->metrics;
    static const char *const nr[] = {"node", "resource", NULL};
    static const char *const pr[] = {"priority", NULL};
    static const char *const st[] = {"state", NULL};
    static const char *const rs[] = {"result", NULL};

    d->m_util = crater_metrics_gauge(m,
                                     "crater_resource_capability_allocation",
                                     "Share of a node's capability committed "
                                     "to jobs (0-1); measured use is "
                                     "crater_resource_capability_utilization",
                                     nr,
                                     err);
    d->m_queue = crater_metrics_gauge(m,
                                      "crater_queue_length",
                                      "Pending jobs per priority class",
                                      pr,
                                      err);
    d->m_jobs =
        crater_metrics_gauge(m, "crater_jobs", "Jobs per state", st, err);
    d->m_nodes =
        crater_metrics_gauge(m, "crater_nodes", "Nodes per state", st, err);
    d->m_lat =
        crater_metrics_histogram(m,
                                 "crater_scheduling_latency_seconds",
                                 "Time the scheduler core took per placement "
                                 "decision",
                                 NULL,
                                 lat_buckets,
                                 sizeof(lat_buckets) / sizeof(lat_buckets[0]),
                                 err);
    d->m_dec = crater_metrics_counter(m,
                                      "crater_decisions_total",
                                      "Scheduling decisions by result",
                                      rs,
                                      err);
    d->m_preempt = crater_metrics_counter(m,
                                          "crater_preemptions_total",
                                          "Jobs preempted",
                                          NULL,
                                          err);
    d->m_commits = crater_metrics_counter(m,
                                          "crater_store_commits_total",
                                          "Store transactions issued",
                                          NULL,
                                          err);
    d->m_idle_jobs = crater_metrics_gauge(m,
                                          "crater_idle_gpu_jobs",
                                          "Running jobs warned for idle GPUs "
                                          "(scheduler.idleGpuWindow)",
                                          NULL,
                                          err);
    d->m_idle_reclaims = crater_metrics_counter(m,
                                                "crater_idle_reclaims_total",
                                                "Jobs reclaimed (preempted) "
                                                "for idle GPUs",
                                                NULL,
                                                err);
    if (!d->m_util || !d->m_queue || !d->m_jobs || !d->m_nodes || !d->m_lat
        || !d->m_dec || !d->m_preempt || !d->m_commits || !d->m_idle_jobs
        || !d->m_idle_reclaims)
        return -1;
    return history_metrics_setup(d, err);
}

static void publish_util(crater_daemon_t *d)
{
    json_t *items = nodes_to_json(d), *o;
    size_t i;

    json_array_foreach(items, i, o)
    {
        const char *name = json_string_value(json_object_get(o, "name"));
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(o, "utilization"), k, v)
        {
            const char *lv[] = {name, k};
            crater_metric_set(d->m_util, lv, json_real_value(v));
        }
    }
    json_decref(items);
}

static void publish(crater_daemon_t *d)
{
    double states[JS_COUNT] = {0};
    size_t nready = 0, nnot = 0, nunk = 0;

    crater_metric_reset(d->m_util);
    crater_metric_reset(d->m_queue);
    for (size_t i = 0; crater_priority_class_name(i); i++)
        crater_metric_set(d->m_queue,
                          (const char *[]){crater_priority_class_name(i)},
                          0);
    for (size_t i = 0; i < d->njobs; i++) {
        const djob_t *j = d->jobs[i];
        states[j->state]++;
        if (j->state == JS_PENDING) {
            const char *c =
                j->spec->priority_class ? j->spec->priority_class : "custom";
            crater_metric_add(d->m_queue, (const char *[]){c}, 1);
        }
    }
    for (int s = 0; s < JS_COUNT; s++)
        crater_metric_set(d->m_jobs,
                          (const char *[]){job_state_name((job_state_t)s)},
                          states[s]);
    for (size_t i = 0; i < d->nnodes; i++) {
        const char *s = node_state_name(d->nodes[i]);
        nready += s[0] == 'R';
        nnot += s[0] == 'N';
        nunk += s[0] == 'U';
    }
    publish_util(d);
    crater_metric_set(d->m_idle_jobs, NULL, (double)idle_warned_jobs(d));
    crater_metric_set(d->m_nodes, (const char *[]){"Ready"}, (double)nready);
    crater_metric_set(d->m_nodes, (const char *[]){"NotReady"}, (double)nnot);
    crater_metric_set(d->m_nodes, (const char *[]){"Unknown"}, (double)nunk);
}

/* craterd's families, then the gateway's (per service: requests by
 * code, batch sizes, queue and backend time; distinct names). Takes both;
 * NULL on ENOMEM. */
static char *metrics_join(char *a, size_t *len, char *b, size_t blen)
{
    char *p;

    if (!a || !b) {
        free(b);
        return a;
    }
    if (!(p = realloc(a, *len + blen + 1))) {
        free(a);
        free(b);
        return NULL;
    }
    memcpy(p + *len, b, blen);
    *len += blen;
    p[*len] = '\0';
    free(b);
    return p;
}

char *metrics_render(crater_daemon_t *d, size_t *len)
{
    size_t glen = 0;
    char *own, *gw;

    pthread_mutex_lock(&d->mu);
    publish(d);
    cost_metrics_publish(d);
    ops_metrics_publish(d);
    services_metrics_publish(d);
    pthread_mutex_unlock(&d->mu);
    history_metrics_publish(d); /* no lock: the store's own atomics */
    own = crater_metrics_render(d->metrics, len);
    gw = services_metrics_render(d, &glen); /* glen set: a statement apart */
    return metrics_join(own, len, gw, glen);
}
