/* api_jobs.c - /api/v1/jobs and /api/v1/schedule.
 *
 * Submission is acknowledged only once durable: the handler validates the
 * spec, checks the tenant's quota, enters the job in the table as not yet
 * durable (invisible to readers and to the scheduler, but counted by the
 * next submission's quota check, so two racing submissions cannot both
 * pass), queues an asynchronous group commit and suspends the request.
 * The commit's callback makes the job visible, queues it for scheduling
 * and answers 201; a failed commit removes the job and answers 503.
 *
 * Tenancy: a user token sees and acts on its own tenant's jobs only; any
 * other job is reported as not found, so job ids of other tenants leak
 * nothing.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/cost.h"
#include "daemon/internal.h"

#define LIST_DEFAULT 100
#define LIST_MAX 1000
#define LOG_CHUNK_DEFAULT 65536
#define LOG_CHUNK_MAX (1 << 20)

/* Parse a decimal id; 0 when malformed. */
static uint64_t parse_id(const char *s)
{
    uint64_t v = 0;

    return crater_http_parse_uint(s, UINT64_MAX, &v) == 0 ? v : 0;
}

/* "17" (a job id) or "17_5" (index 5 of array 17). */
static djob_t *job_find_text(crater_daemon_t *d, const char *s)
{
    const char *us = s ? strchr(s, '_') : NULL;
    char head[24];
    uint64_t idx;

    if (!us)
        return job_find(d, parse_id(s));
    if ((size_t)(us - s) >= sizeof(head))
        return NULL;
    memcpy(head, s, (size_t)(us - s));
    head[us - s] = '\0';
    idx = parse_id(us + 1);
    if (!parse_id(head) || (idx == 0 && strcmp(us + 1, "0") != 0)
        || idx > UINT32_MAX)
        return NULL;
    return array_job(d, parse_id(head), (uint32_t)idx);
}

/* The job named by {id} if p may see it; otherwise fills a 404. */
static djob_t *visible_job(crater_daemon_t *d,
                           crater_http_req_t *r,
                           const principal_t *p,
                           crater_http_resp_t *resp)
{
    const char *s = crater_http_param(r, "id");
    djob_t *j = job_find_text(d, s);

    if (p->role == CRATER_ROLE_AGENT)
        j = NULL;
    if (j
        && (!j->durable
            || (p->role == CRATER_ROLE_USER
                && strcmp(j->tenant, p->tenant) != 0)))
        j = NULL;
    if (!j)
        api_errorf(resp, CRATER_ENOENT, "id", "no job '%s'", s ? s : "");
    return j;
}

/* ---- submit ---------------------------------------------------------------
 *
 * A body holds one or more Job documents (up to 256); a document with
 * `array:` becomes one job per index. Everything a request creates is
 * admitted, numbered (consecutive ids) and written in ONE store
 * transaction: all of it becomes visible in the commit's callback, or
 * none of it does. One plain document answers with its job; otherwise
 * the answer lists the first job of each document, with its array.
 */

typedef struct submit_ctx {
    crater_daemon_t *d;
    djob_t **jobs; /* every job created, in id order */
    size_t njobs;
    size_t *first; /* index in jobs of each document's first job */
    size_t ndocs;
    bool plain; /* one document, no array: answer with the job alone */
    crater_http_pending_t *pend;
} submit_ctx_t;

void job_remove(crater_daemon_t *d, djob_t *j)
{
    for (size_t i = 0; i < d->njobs; i++)
        if (d->jobs[i] == j) {
            memmove(&d->jobs[i],
                    &d->jobs[i + 1],
                    (d->njobs - i - 1) * sizeof(*d->jobs));
            d->njobs--;
            array_track(d, j, -1);
            backfill_track(d, j, (int)j->state, -1);
            return;
        }
}

static void submit_ctx_free(submit_ctx_t *c)
{
    if (!c)
        return;
    free(c->jobs);
    free(c->first);
    free(c);
}

/* Take the created jobs out again (not stored). */
static void submit_undo(crater_daemon_t *d, submit_ctx_t *c)
{
    for (size_t i = c->njobs; i-- > 0;) {
        job_remove(d, c->jobs[i]);
        job_free(c->jobs[i]);
    }
    c->njobs = 0;
}

static json_t *submit_answer(crater_daemon_t *d, const submit_ctx_t *c)
{
    json_t *items;

    if (c->plain)
        return job_to_json(d, c->jobs[0], true);
    items = json_array();
    for (size_t k = 0; k < c->ndocs; k++) {
        djob_t *j = c->jobs[c->first[k]];
        json_t *o = job_to_json(d, j, c->ndocs == 1);
        darray_t *a = j->array_id ? array_find(d, j->array_id) : NULL;
        if (a)
            json_object_set_new(o, "array", array_to_json(d, a));
        if (c->ndocs == 1) {
            json_decref(items);
            return o;
        }
        json_array_append_new(items, o);
    }
    return json_pack("{s:o, s:i}", "items", items, "jobs", (int)c->njobs);
}

static void submit_done(int rc,
                        int64_t rev,
                        const crater_error_t *err,
                        void *arg)
{
    submit_ctx_t *c = arg;
    crater_daemon_t *d = c->d;
    crater_http_resp_t resp = {0};
    char loc[64];

    (void)rev;
    pthread_mutex_lock(&d->mu);
    if (rc == 0) {
        for (size_t i = 0; i < c->njobs; i++) {
            c->jobs[i]->durable = true;
            typical_note(d, c->jobs[i]);
            if (job_is_service(c->jobs[i]))
                service_attach(d, c->jobs[i]);
            else
                queue_push_job(d, c->jobs[i]);
        }
        loop_kick(d);
        crater_http_json(&resp, 201, submit_answer(d, c));
        snprintf(loc, sizeof(loc), "/api/v1/jobs/%" PRIu64, c->jobs[0]->id);
        resp.location = strdup(loc);
    } else {
        submit_undo(d, c);
        api_errorf(&resp,
                   CRATER_EUNAVAIL,
                   NULL,
                   "%s not stored: %s",
                   c->plain ? "job" : "jobs",
                   err ? err->text : "store error");
    }
    crater_http_complete(c->pend, &resp);
    pthread_mutex_unlock(&d->mu);
    submit_ctx_free(c);
}

/* Tenant of a new job: a user's own; an admin's choice (default). */
static int job_tenant(const principal_t *p,
                      crater_jobspec_t *spec,
                      crater_http_resp_t *resp)
{
    if (p->role == CRATER_ROLE_AGENT) {
        api_errorf(resp, CRATER_EPERM, NULL, "agent tokens cannot submit jobs");
        return -1;
    }
    if (p->role == CRATER_ROLE_USER) {
        if (spec->tenant && strcmp(spec->tenant, "default") != 0
            && strcmp(spec->tenant, p->tenant) != 0) {
            api_errorf(resp,
                       CRATER_EPERM,
                       "metadata.tenant",
                       "your token belongs to tenant '%s', not '%s'",
                       p->tenant,
                       spec->tenant);
            return -1;
        }
        free(spec->tenant);
        spec->tenant = strdup(p->tenant);
    }
    return 0;
}

djob_t *job_create(crater_daemon_t *d,
                   crater_jobspec_t *spec,
                   json_t *norm,
                   crater_error_t *err)
{
    djob_t *j = calloc(1, sizeof(*j));

    if (!j) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    j->spec = spec;
    j->spec_json = norm;
    j->history = json_array();
    j->samples = json_array();
    j->name = strdup(job_default_name(spec));
    j->tenant = strdup(spec->tenant ? spec->tenant : "default");
    j->submitted_ms = dnow_ms();
    j->attempts = 1;
    j->state = JS_PENDING;
    if (!j->history || !j->samples || !j->name || !j->tenant
        || gang_init(j, err) < 0
        || crater_effective_priority(spec->priority_class,
                                     spec->priority,
                                     &j->priority,
                                     err)
               < 0
        || crater_request_from_spec(d->sched, spec, &j->req, err) < 0) {
        j->spec = NULL;
        j->spec_json = NULL;
        job_free(j);
        if (err->errnum == CRATER_OK)
            crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    return j;
}

static int admit(crater_daemon_t *d,
                 crater_jobspec_t *spec,
                 crater_error_t *err)
{
    const char *tenant = spec->tenant ? spec->tenant : "default";
    uint32_t uid;

    if (spec->replicas > JOB_MAX_REPLICAS)
        return crater_errorf_field(err,
                                   CRATER_EIMPOSSIBLE,
                                   "replicas",
                                   "craterd runs at most %d replicas of a "
                                   "job, this one asks %u",
                                   JOB_MAX_REPLICAS,
                                   spec->replicas);
    if (tenant_admit(d, tenant, spec, err) < 0)
        return -1;
    return tenant_uid(d, tenant, &uid, err); /* stored before the job */
}

/* A multi-replica job: could all its replicas run at once on the empty
 * cluster (the core's gang placement on the twin, released at once)? */
static int feasible_gang(crater_daemon_t *d,
                         const crater_jobspec_t *spec,
                         const crater_request_t *req,
                         crater_error_t *err)
{
    crater_placement_t *pl = calloc(spec->replicas, sizeof(*pl));
    crater_error_t why = {0};
    int rc;

    if (!pl)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    rc = crater_sched_place_gang(d->twin, req, spec->replicas, 1, pl, &why);
    for (uint32_t r = 0; rc == 0 && r < spec->replicas; r++)
        crater_sched_release(d->twin, 1 + r, NULL);
    free(pl);
    if (rc == 0)
        return 0;
    if (why.errnum != CRATER_EUNSCHED)
        return crater_errorf(err, why.errnum, "%s", why.text);
    return crater_errorf_field(err,
                               CRATER_EIMPOSSIBLE,
                               "replicas",
                               "no arrangement of this cluster's nodes could "
                               "ever run its %u replicas at once, even "
                               "empty: %s",
                               spec->replicas,
                               why.text);
}

/* Could the job ever run here: does it fit some node of the cluster when
 * that node is empty, ready and uncordoned (d->twin)? Slurm refuses such
 * a job at submission ("Requested node configuration is not available");
 * left pending it would wait forever. A cluster with no node yet takes
 * every job. Caller holds d->mu. */
static int feasible(crater_daemon_t *d,
                    const crater_jobspec_t *spec,
                    crater_error_t *err)
{
    crater_placement_t pl;
    crater_request_t req;
    crater_error_t why = {0};

    if (crater_sched_node_count(d->twin) == 0)
        return 0;
    if (crater_request_from_spec(d->twin, spec, &req, err) < 0)
        return -1;
    if (spec->replicas > 1 && !spec->inference.enabled)
        return feasible_gang(d, spec, &req, err); /* a service's replicas
                                                      are placed one by one */
    if (crater_sched_place(d->twin, &req, &pl, &why) == 0)
        return 0;
    if (why.errnum != CRATER_EUNSCHED)
        return crater_errorf(err, why.errnum, "%s", why.text);
    return crater_errorf_field(err,
                               CRATER_EIMPOSSIBLE,
                               why.field[0] ? why.field : "resources",
                               "no node of this cluster could ever run it, "
                               "even empty: %s",
                               why.text);
}

/* name=value in the environment of spec and of its normalised form. */
int job_add_env(crater_jobspec_t *spec,
                json_t *norm,
                const char *name,
                const char *value)
{
    crater_kv_t *kv = realloc(spec->env, (spec->nenv + 1) * sizeof(*kv));
    json_t *env = json_object_get(norm, "env");

    if (!kv)
        return -1;
    spec->env = kv;
    kv[spec->nenv].key = strdup(name);
    kv[spec->nenv].value = strdup(value);
    if (!kv[spec->nenv].key || !kv[spec->nenv].value) {
        free(kv[spec->nenv].key);
        free(kv[spec->nenv].value);
        return -1;
    }
    spec->nenv++;
    if (!json_is_object(env)) {
        env = json_object();
        json_object_set_new(norm, "env", env);
    }
    return json_object_set_new(env, name, json_string(value));
}

/* The job of one array element (index k of the document's array). */
static djob_t *array_element(crater_daemon_t *d,
                             const job_doc_t *doc,
                             size_t k,
                             uint64_t array_id,
                             crater_error_t *err)
{
    crater_jobspec_t *spec = NULL;
    json_t *norm = json_deep_copy(doc->norm);
    char v[24];
    crater_dec_t dec;
    djob_t *j;

    crater_dec_init(&dec, NULL, 0, err);
    if (!norm || crater_jobspec_decode(&dec, norm, &spec) < 0) {
        json_decref(norm);
        if (err->errnum == CRATER_OK)
            crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    snprintf(v, sizeof(v), "%" PRIu64, array_id);
    if (job_add_env(spec, norm, "CRATER_ARRAY_ID", v) < 0
        || (snprintf(v, sizeof(v), "%" PRIu32, doc->spec->array[k]) < 0)
        || job_add_env(spec, norm, "CRATER_ARRAY_INDEX", v) < 0
        || !(j = job_create(d, spec, norm, err))) {
        crater_jobspec_destroy(spec);
        json_decref(norm);
        if (err->errnum == CRATER_OK)
            crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    j->array_id = array_id;
    j->array_index = doc->spec->array[k];
    return j;
}

/* Create, number and insert the jobs of one document. */
/* Every name in spec's "after" is a job of its tenant that craterd knows
 * (stored, or earlier in this request): a misspelt dependency would
 * otherwise wait forever. Caller holds d->mu. */
static int after_known(crater_daemon_t *d,
                       const submit_ctx_t *c,
                       const crater_jobspec_t *spec,
                       crater_error_t *err)
{
    const char *tenant = spec->tenant ? spec->tenant : "default";
    size_t k = 0;

    for (char **a = spec->after; a && *a; a++, k++) {
        bool found = false;
        for (size_t i = 0; !found && i < c->njobs; i++)
            found = !strcmp(c->jobs[i]->name, *a)
                    && !strcmp(c->jobs[i]->tenant, tenant);
        for (size_t i = d->njobs; !found && i-- > 0;)
            found = d->jobs[i]->durable && !strcmp(d->jobs[i]->name, *a)
                    && !strcmp(d->jobs[i]->tenant, tenant);
        if (!found)
            return crater_errorf_field(err,
                                       CRATER_ENOENT,
                                       "after",
                                       "after[%zu]: no job named '%s' in "
                                       "tenant '%s' (a dependency must be "
                                       "submitted first, or earlier in "
                                       "the same request)",
                                       k,
                                       *a,
                                       tenant);
    }
    return 0;
}

static int submit_doc(crater_daemon_t *d,
                      submit_ctx_t *c,
                      job_doc_t *doc,
                      crater_error_t *err)
{
    size_t n = doc->spec->narray ? doc->spec->narray : 1;
    uint64_t first = d->next_id;

    job_defaults(d, doc->spec, doc->norm);
    if (service_check_spec(doc->spec, err) < 0
        || service_name_free(d, doc->spec, err) < 0
        || after_known(d, c, doc->spec, err) < 0 || admit(d, doc->spec, err) < 0
        || feasible(d, doc->spec, err) < 0)
        return -1;
    for (size_t k = 0; k < n; k++) {
        djob_t *j = doc->spec->narray
                        ? array_element(d, doc, k, first, err)
                        : job_create(d, doc->spec, doc->norm, err);
        if (!j)
            return -1;
        if (!doc->spec->narray)
            doc->spec = NULL, doc->norm = NULL; /* owned by j now */
        j->id = d->next_id++;
        job_event(j, j->submitted_ms, JS_PENDING, "submitted");
        if (job_insert(d, j) < 0) {
            job_free(j);
            return crater_errorf(err, CRATER_ENOMEM, "out of memory");
        }
        c->jobs[c->njobs++] = j;
        /* the quota counts what this request already created */
        if (k + 1 < n && doc->spec && admit(d, doc->spec, err) < 0)
            return -1;
    }
    return 0;
}

static crater_txn_t *submit_txn(crater_daemon_t *d, const submit_ctx_t *c)
{
    crater_txn_t *t = crater_txn_create();
    crater_error_t err;
    char key[64];

    for (size_t i = 0; t && i < c->njobs; i++) {
        json_t *v = job_to_store(d, c->jobs[i]);
        char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
        int rc = -1;
        snprintf(key, sizeof(key), KEY_JOBS "%020" PRIu64, c->jobs[i]->id);
        if (text)
            rc = crater_txn_put(t, key, text, strlen(text), 0, &err);
        json_decref(v);
        free(text);
        if (rc < 0) {
            crater_txn_destroy(t);
            return NULL;
        }
    }
    return t;
}

static size_t jobs_in(const job_doc_t *docs, size_t n)
{
    size_t total = 0;

    for (size_t k = 0; k < n; k++)
        total += docs[k].spec->narray ? docs[k].spec->narray : 1;
    return total;
}

static void submit_locked(crater_daemon_t *d,
                          crater_http_req_t *r,
                          crater_http_resp_t *resp,
                          job_doc_t *docs,
                          size_t ndocs)
{
    crater_error_t err = {0};
    size_t total = jobs_in(docs, ndocs);
    submit_ctx_t *c = calloc(1, sizeof(*c));
    crater_txn_t *t;

    if (c) {
        c->jobs = calloc(total, sizeof(*c->jobs));
        c->first = calloc(ndocs, sizeof(*c->first));
    }
    if (!c || !c->jobs || !c->first) {
        submit_ctx_free(c);
        api_errorf(resp, CRATER_ENOMEM, NULL, "out of memory");
        return;
    }
    c->d = d;
    c->ndocs = ndocs;
    c->plain = ndocs == 1 && !docs[0].spec->narray;
    for (size_t k = 0; k < ndocs; k++) {
        c->first[k] = c->njobs;
        if (submit_doc(d, c, &docs[k], &err) < 0) {
            if (ndocs > 1)
                crater_errorf_field(&err,
                                    err.errnum,
                                    err.field,
                                    "document %zu: %s (nothing was "
                                    "submitted)",
                                    k + 1,
                                    err.text);
            submit_undo(d, c);
            submit_ctx_free(c);
            crater_http_error(resp, &err);
            return;
        }
    }
    c->pend = crater_http_suspend(r);
    t = c->pend ? submit_txn(d, c) : NULL;
    if (!t
        || crater_store_commit_async(d->store, t, submit_done, c, &err) < 0) {
        /* the store takes t even when it refuses, and then never calls
         * submit_done: answer here */
        crater_http_resp_t fail = {0};
        submit_undo(d, c);
        if (c->pend) {
            api_errorf(&fail,
                       t ? CRATER_EUNAVAIL : CRATER_ENOMEM,
                       NULL,
                       t ? "not stored: the store is closing"
                         : "out of memory");
            crater_http_complete(c->pend, &fail);
        } else {
            api_errorf(resp, CRATER_EUNAVAIL, NULL, "server is shutting down");
        }
        submit_ctx_free(c);
        return;
    }
    crater_metric_add(d->m_commits, NULL, 1);
}

/* Parsing and validating the body (the expensive part) happens outside
 * d->mu: token records and the knowledge base never change once created,
 * and the profile registry has its own read-write lock. */
static void h_submit(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    crater_error_t err = {0};
    job_doc_t *docs = NULL;
    size_t ndocs = 0;
    principal_t p;
    size_t len;
    const char *body = crater_http_body(r, &len);
    int rc;

    pthread_mutex_lock(&d->mu);
    rc = api_auth(d, r, resp, &p);
    pthread_mutex_unlock(&d->mu);
    if (rc < 0)
        return;
    if (job_parse_docs(d, user_tenant(&p), body, len, &docs, &ndocs, &err)
        < 0) {
        crater_http_error(resp, &err);
        return;
    }
    if (jobs_in(docs, ndocs) > CRATER_ARRAY_MAX) {
        api_errorf(resp,
                   CRATER_ERANGE,
                   "array",
                   "one request submits at most %d jobs (this one: %zu)",
                   CRATER_ARRAY_MAX,
                   jobs_in(docs, ndocs));
        job_docs_free(docs, ndocs);
        return;
    }
    for (size_t k = 0; k < ndocs; k++) {
        if (job_tenant(&p, docs[k].spec, resp) < 0) {
            job_docs_free(docs, ndocs);
            return;
        }
        if (docs[k].spec->tenant) /* the stored spec carries its tenant */
            json_object_set_new(docs[k].norm,
                                "tenant",
                                json_string(docs[k].spec->tenant));
    }
    pthread_mutex_lock(&d->mu);
    submit_locked(d, r, resp, docs, ndocs);
    pthread_mutex_unlock(&d->mu);
    job_docs_free(docs, ndocs);
}

/* ---- list / get / cancel --------------------------------------------------
 */

typedef struct list_filter {
    unsigned states; /* bit per state; 0 = all */
    const char *tenant;
    int workload; /* -1 = any */
    uint64_t after;
    size_t limit;
} list_filter_t;

static int parse_states(const char *s, unsigned *out, crater_http_resp_t *resp)
{
    char buf[256], *save = NULL;

    *out = 0;
    if (!s)
        return 0;
    snprintf(buf, sizeof(buf), "%s", s);
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        int st = job_state_parse(t);
        if (st < 0) {
            api_errorf(resp,
                       CRATER_EINVAL,
                       "state",
                       "unknown state '%s' (pending, bound, running, "
                       "succeeded, failed, cancelled, preempting, preempted,"
                       " lost)",
                       t);
            return -1;
        }
        *out |= 1u << st;
    }
    return 0;
}

static int parse_filter(crater_http_req_t *r,
                        const principal_t *p,
                        list_filter_t *f,
                        crater_http_resp_t *resp)
{
    const char *wl = crater_http_query(r, "workloadType");
    const char *lim = crater_http_query(r, "limit");
    const char *after = crater_http_query(r, "after");

    f->tenant = p->role == CRATER_ROLE_USER ? p->tenant
                                            : crater_http_query(r, "tenant");
    f->workload = -1;
    f->limit = LIST_DEFAULT;
    f->after = 0;
    if (parse_states(crater_http_query(r, "state"), &f->states, resp) < 0)
        return -1;
    for (int w = CRATER_WORKLOAD_TRAINING;
         wl && w <= CRATER_WORKLOAD_INTERACTIVE;
         w++)
        if (strcmp(wl, crater_workload_name((crater_workload_t)w)) == 0)
            f->workload = w;
    if (wl && f->workload < 0) {
        api_errorf(resp,
                   CRATER_EINVAL,
                   "workloadType",
                   "unknown workloadType '%s' (training, inference, batch,"
                   " interactive)",
                   wl);
        return -1;
    }
    if (lim && ((f->limit = parse_id(lim)) == 0 || f->limit > LIST_MAX)) {
        api_errorf(resp,
                   CRATER_ERANGE,
                   "limit",
                   "limit must be between 1 and %d",
                   LIST_MAX);
        return -1;
    }
    if (after && !(f->after = parse_id(after))) {
        api_errorf(resp,
                   CRATER_EINVAL,
                   "after",
                   "after must be a job id from a previous page's 'next'");
        return -1;
    }
    return 0;
}

static bool list_match(const djob_t *j, const list_filter_t *f)
{
    return j->durable && j->id > f->after
           && (!f->states || (f->states & (1u << j->state)))
           && (!f->tenant || strcmp(j->tenant, f->tenant) == 0)
           && (f->workload < 0 || (int)j->spec->workload_type == f->workload);
}

static void h_list(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    json_t *items, *next = json_null();
    list_filter_t f;
    principal_t p;
    char id[24];

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0 || parse_filter(r, &p, &f, resp) < 0)
        goto out;
    items = json_array();
    for (size_t i = 0; i < d->njobs; i++) {
        if (!list_match(d->jobs[i], &f))
            continue;
        if (json_array_size(items) == f.limit) {
            snprintf(id,
                     sizeof(id),
                     "%" PRIu64,
                     (uint64_t)json_integer_value(
                         json_object_get(json_array_get(items, f.limit - 1),
                                         "_id")));
            json_decref(next);
            next = json_string(id);
            break;
        }
        json_t *o = job_to_json(d, d->jobs[i], false);
        json_object_set_new(o, "_id", json_integer((json_int_t)d->jobs[i]->id));
        json_array_append_new(items, o);
    }
    for (size_t i = 0; i < json_array_size(items); i++)
        json_object_del(json_array_get(items, i), "_id");
    crater_http_json(resp,
                     200,
                     json_pack("{s:o, s:o}", "items", items, "next", next));
out:
    pthread_mutex_unlock(&d->mu);
}

/* The read-only job endpoints: authenticate, find the job the token may
 * see, answer 200 with view(d, j) (a new reference). */
typedef json_t *(*job_view_f)(crater_daemon_t *d, djob_t *j);

static void read_job(crater_http_req_t *r,
                     crater_http_resp_t *resp,
                     crater_daemon_t *d,
                     job_view_f view)
{
    principal_t p;
    djob_t *j;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0 && (j = visible_job(d, r, &p, resp)))
        crater_http_json(resp, 200, view(d, j));
    pthread_mutex_unlock(&d->mu);
}

static json_t *view_full(crater_daemon_t *d, djob_t *j)
{
    return job_to_json(d, j, true);
}

/* GET /api/v1/jobs/{id}/checkpoints: visible as the job is. */
static void h_checkpoints(crater_http_req_t *r,
                          crater_http_resp_t *resp,
                          void *arg)
{
    read_job(r, resp, arg, job_ckpts_json);
}

static void h_get(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    read_job(r, resp, arg, view_full);
}

void job_cancel(crater_daemon_t *d, djob_t *j, const char *reason)
{
    job_step_t s;

    /* A job with tasks on a node stays as it is until its agent reports
     * them gone (the table's stay); one without ends now. */
    if (job_life_step(j->state, JE_CANCEL, &s) == 0)
        job_apply(d,
                  j,
                  JE_CANCEL,
                  s.to == j->state ? "cancel requested; stopping" : reason);
}

static void cancel_job(crater_daemon_t *d,
                       djob_t *j,
                       const char *reason,
                       crater_http_resp_t *resp)
{
    if (job_state_final(j->state)) {
        api_errorf(resp,
                   CRATER_EEXIST,
                   "state",
                   "job %" PRIu64 " already %s",
                   j->id,
                   job_state_name(j->state));
        return;
    }
    job_cancel(d, j, reason);
    loop_kick(d);
    crater_http_json(resp, 200, job_to_json(d, j, true));
}

static void h_cancel(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    char reason[256], *why = NULL;
    principal_t p;
    djob_t *j;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0 && (j = visible_job(d, r, &p, resp))
        && api_body_reason(r, &why, resp) == 0) {
        snprintf(reason,
                 sizeof(reason),
                 "cancelled%s%s",
                 *why ? ": " : "",
                 why);
        cancel_job(d, j, reason, resp);
        api_answer_when_stored(d, r, resp);
    }
    pthread_mutex_unlock(&d->mu);
    free(why);
}

/* ---- explain / events / metrics / logs ------------------------------------
 */

static json_t *explain_json(crater_daemon_t *d, djob_t *j)
{
    char id[24];
    json_t *o;

    snprintf(id, sizeof(id), "%" PRIu64, j->id);
    o = json_pack("{s:s, s:s, s:b}",
                  "job",
                  id,
                  "state",
                  job_state_name(j->state),
                  "fits",
                  j->placed);
    if (j->placed) {
        json_t *why = crater_sched_explain_placed(d->sched, j->id, &j->req);
        json_object_set_new(o, "placement", placement_json(d, &j->pl));
        json_object_set_new(o, "score", json_real(j->pl.score));
        if (why) /* the chosen node against the runner-up, as of now */
            json_object_set_new(o, "scores", why);
        return o;
    }
    if (j->state == JS_PENDING) {
        json_t *e = crater_sched_explain(d->sched, &j->req);
        if (j->waiting_for)
            json_object_set_new(o,
                                "reason",
                                json_sprintf("waiting for %" PRIu64 " preempted"
                                             " job(s) "
                                             "to stop",
                                             j->waiting_for));
        else if (j->last_reason)
            json_object_set_new(o, "reason", json_string(j->last_reason));
        if (e)
            json_object_set_new(o, "explain", e);
    }
    return o;
}

static void h_explain(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    read_job(r, resp, arg, explain_json);
}

static json_t *view_events(crater_daemon_t *d, djob_t *j)
{
    (void)d;
    return json_pack("{s:O}", "items", j->history);
}

static void h_events(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    read_job(r, resp, arg, view_events);
}

static json_t *view_metrics(crater_daemon_t *d, djob_t *j)
{
    return json_pack("{s:o, s:o, s:o, s:O, s:o*}",
                     "job",
                     json_sprintf("%" PRIu64, j->id),
                     "start_ms",
                     j->started_ms ? json_integer(j->started_ms) : json_null(),
                     "end_ms",
                     j->finished_ms ? json_integer(j->finished_ms)
                                    : json_null(),
                     "samples",
                     j->samples,
                     "cost",
                     cost_job_json(d, j));
}

static void h_jmetrics(crater_http_req_t *r,
                       crater_http_resp_t *resp,
                       void *arg)
{
    read_job(r, resp, arg, view_metrics);
}

int log_path(crater_daemon_t *d,
             uint64_t id,
             uint32_t attempt,
             const char *stream,
             int *which,
             char *buf,
             size_t n)
{
    int w = strcmp(stream, "stdout") == 0   ? 0
            : strcmp(stream, "stderr") == 0 ? 1
                                            : -1;

    if (w < 0)
        return -1;
    if (which)
        *which = w;
    snprintf(buf,
             n,
             "%s/logs/%" PRIu64 ".%" PRIu32 ".%s",
             d->data_dir,
             id,
             attempt,
             stream);
    return 0;
}

int log_path_replica(crater_daemon_t *d,
                     uint64_t id,
                     uint32_t attempt,
                     uint32_t replica,
                     const char *stream,
                     int *which,
                     char *buf,
                     size_t n)
{
    if (log_path(d, id, attempt, stream, which, buf, n) < 0)
        return -1;
    if (replica)
        snprintf(buf,
                 n,
                 "%s/logs/%" PRIu64 ".%" PRIu32 ".r%" PRIu32 ".%s",
                 d->data_dir,
                 id,
                 attempt,
                 replica,
                 stream);
    return 0;
}

/* The attempt a log request reads: ?attempt=N (1..attempts), else the
 * latest attempt that has output (a requeued job waiting for its next
 * attempt shows the previous one's). 0 with resp filled on error. */
static uint32_t log_attempt_of(crater_daemon_t *d,
                               crater_http_req_t *r,
                               const djob_t *j,
                               const char *stream,
                               crater_http_resp_t *resp)
{
    const char *a = crater_http_query(r, "attempt");
    char path[4096];
    uint64_t n;

    if (a) {
        n = parse_id(a);
        if (n == 0 || n > j->attempts) {
            api_errorf(resp,
                       CRATER_ERANGE,
                       "attempt",
                       "attempt must be between 1 and %" PRIu32 " (the job's "
                       "attempts so "
                       "far)",
                       j->attempts);
            return 0;
        }
        return (uint32_t)n;
    }
    for (n = j->attempts; n > 1; n--)
        if (log_path(d, j->id, (uint32_t)n, stream, NULL, path, sizeof(path))
                == 0
            && access(path, F_OK) == 0)
            break;
    return n ? (uint32_t)n : 1;
}

/* ?replica=N of a multi-replica job (0..replicas-1; default 0). */
static int log_replica_of(crater_http_req_t *r,
                          const djob_t *j,
                          uint32_t *out,
                          crater_http_resp_t *resp)
{
    const char *s = crater_http_query(r, "replica");
    uint64_t n = 0;

    if (s
        && (crater_http_parse_uint(s, UINT32_MAX, &n) < 0
            || n >= job_ntasks(j))) {
        api_errorf(resp,
                   CRATER_ERANGE,
                   "replica",
                   "replica must be between 0 and %" PRIu32,
                   job_ntasks(j) - 1);
        return -1;
    }
    *out = (uint32_t)n;
    return 0;
}

static void read_log(const char *path,
                     uint64_t off,
                     uint64_t lim,
                     bool final,
                     crater_http_resp_t *resp)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char *buf = malloc(lim + 1);
    ssize_t got = 0;
    char hdr[128];
    off_t size = 0;

    if (fd >= 0) {
        got = pread(fd, buf, lim, (off_t)off);
        size = lseek(fd, 0, SEEK_END);
        close(fd);
    }
    if (got < 0)
        got = 0;
    resp->body = buf;
    resp->len = (size_t)got;
    resp->content_type = "text/plain; charset=utf-8";
    snprintf(hdr,
             sizeof(hdr),
             "X-Crater-Log-Next: %" PRIu64 "\r\nX-Crater-Log-Complete: %s",
             off + (uint64_t)got,
             final && off + (uint64_t)got >= (uint64_t)size ? "true" : "false");
    resp->headers = strdup(hdr);
}

static void h_logs(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    const char *stream = crater_http_query(r, "stream");
    const char *lim = crater_http_query(r, "limit");
    uint64_t o;
    uint64_t l = lim ? parse_id(lim) : LOG_CHUNK_DEFAULT;
    char path[4096];
    principal_t p;
    uint32_t att, rep;
    bool complete;
    djob_t *j;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0 || !(j = visible_job(d, r, &p, resp))
        || api_query_offset(r, "offset", &o, resp) < 0)
        goto out;
    if (!stream)
        stream = "stdout";
    if (strcmp(stream, "stdout") != 0 && strcmp(stream, "stderr") != 0) {
        api_errorf(resp,
                   CRATER_EINVAL,
                   "stream",
                   "stream must be stdout or stderr");
        goto out;
    }
    if (!(att = log_attempt_of(d, r, j, stream, resp))
        || log_replica_of(r, j, &rep, resp) < 0)
        goto out;
    log_path_replica(d, j->id, att, rep, stream, NULL, path, sizeof(path));
    /* an earlier attempt's log is complete: its task is gone */
    complete = att < j->attempts || job_logs_complete(j);
    if (l == 0 || l > LOG_CHUNK_MAX) {
        api_errorf(resp,
                   CRATER_ERANGE,
                   "limit",
                   "limit must be between 1 and %d bytes",
                   LOG_CHUNK_MAX);
        goto out;
    }
    read_log(path, o, l, complete, resp);
out:
    pthread_mutex_unlock(&d->mu);
}

/* ---- dry run ---------------------------------------------------------------
 */

static void dry_run(crater_daemon_t *d,
                    crater_jobspec_t *spec,
                    crater_http_resp_t *resp)
{
    crater_request_t req;
    crater_placement_t pl;
    crater_error_t err = {0};

    if (crater_request_from_spec(d->sched, spec, &req, &err) < 0) {
        crater_http_error(resp, &err);
        return;
    }
    if (crater_sched_place(d->sched, &req, &pl, &err) == 0) {
        crater_http_json(resp,
                         200,
                         json_pack("{s:b, s:o}",
                                   "fits",
                                   1,
                                   "placement",
                                   placement_json(d, &pl)));
        return;
    }
    json_t *e = crater_sched_explain(d->sched, &req);
    crater_http_json(resp,
                     200,
                     json_pack("{s:b, s:s, s:o}",
                               "fits",
                               0,
                               "reason",
                               err.text,
                               "explain",
                               e ? e : json_null()));
}

/* ---- what-if on a batch ----------------------------------------------------
 *
 * POST /api/v1/schedule with several documents (or an array, or replicas)
 * answers what would happen to the batch, in order, on the cluster as it
 * is now: each job is placed and COMMITTED to the core under a scratch
 * task id, so the next one sees it, and every scratch charge is released
 * before d->mu is dropped (the scheduler thread never sees them). Nothing
 * is stored and no queue order or preemption is simulated: it answers
 * "does this batch fit, where, and what stays pending". */

#define WHATIF_TASK_BASE (1ull << 62) /* no job id or gang task id here */

typedef struct whatif {
    crater_daemon_t *d;
    uint64_t next; /* scratch task ids committed: BASE .. BASE + next */
    size_t placed, pending;
    json_t *items;
} whatif_t;

/* One job (all its replicas) of the batch: placed and committed, or why
 * not. */
static void whatif_job(whatif_t *w,
                       const crater_jobspec_t *spec,
                       const char *name,
                       json_t *index)
{
    uint32_t n = spec->replicas > 1 ? spec->replicas : 1;
    crater_placement_t *pl = calloc(n, sizeof(*pl));
    crater_error_t err = {0};
    crater_request_t req;
    json_t *it = json_pack("{s:s}", "name", name), *where;
    int rc = -1;

    if (index)
        json_object_set_new(it, "index", index);
    if (!pl)
        crater_errorf(&err, CRATER_ENOMEM, "out of memory");
    else if (crater_request_from_spec(w->d->sched, spec, &req, &err) == 0)
        rc = crater_sched_place_gang(w->d->sched,
                                     &req,
                                     n,
                                     WHATIF_TASK_BASE + w->next,
                                     pl,
                                     &err);
    if (rc == 0) {
        w->next += n;
        w->placed++;
        where = json_array();
        for (uint32_t r = 0; r < n; r++)
            json_array_append_new(where, placement_json(w->d, &pl[r]));
        json_object_set_new(it, "fits", json_true());
        json_object_set_new(it, "placements", where);
    } else {
        w->pending++;
        json_object_set_new(it, "fits", json_false());
        json_object_set_new(it, "reason", json_string(err.text));
    }
    json_array_append_new(w->items, it);
    free(pl);
}

static void whatif_release(whatif_t *w)
{
    for (uint64_t k = 0; k < w->next; k++)
        crater_sched_release(w->d->sched, WHATIF_TASK_BASE + k, NULL);
}

/* The batch answer: {"items": [...], "placed": N, "pending": M}. */
static void whatif_batch(crater_daemon_t *d,
                         job_doc_t *docs,
                         size_t ndocs,
                         crater_http_resp_t *resp)
{
    whatif_t w = {.d = d, .items = json_array()};

    for (size_t k = 0; k < ndocs; k++) {
        const crater_jobspec_t *spec = docs[k].spec;
        const char *name = job_default_name(spec);
        size_t n = spec->narray ? spec->narray : 1;
        for (size_t i = 0; i < n; i++)
            whatif_job(&w,
                       spec,
                       name,
                       spec->narray ? json_integer((json_int_t)i) : NULL);
    }
    whatif_release(&w);
    crater_http_json(resp,
                     200,
                     json_pack("{s:o, s:I, s:I}",
                               "items",
                               w.items,
                               "placed",
                               (json_int_t)w.placed,
                               "pending",
                               (json_int_t)w.pending));
}

static void h_schedule(crater_http_req_t *r,
                       crater_http_resp_t *resp,
                       void *arg)
{
    crater_daemon_t *d = arg;
    crater_error_t err = {0};
    job_doc_t *docs = NULL;
    size_t ndocs = 0, len;
    principal_t p;
    const char *body = crater_http_body(r, &len);

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0)
        goto out;
    if (job_parse_docs(d, user_tenant(&p), body, len, &docs, &ndocs, &err)
        < 0) {
        crater_http_error(resp, &err);
        goto out;
    }
    if (jobs_in(docs, ndocs) > CRATER_ARRAY_MAX) {
        api_errorf(resp,
                   CRATER_ERANGE,
                   "array",
                   "one request asks about at most %d jobs (this one: %zu)",
                   CRATER_ARRAY_MAX,
                   jobs_in(docs, ndocs));
        goto out;
    }
    for (size_t k = 0; k < ndocs; k++) {
        if (job_tenant(&p, docs[k].spec, resp) < 0)
            goto out;
        job_defaults(d, docs[k].spec, docs[k].norm);
    }
    /* one plain job: the placement and, when it does not fit, why */
    if (ndocs == 1 && !docs[0].spec->narray && docs[0].spec->replicas <= 1)
        dry_run(d, docs[0].spec, resp);
    else
        whatif_batch(d, docs, ndocs, resp);
out:
    job_docs_free(docs, ndocs);
    pthread_mutex_unlock(&d->mu);
}

int api_jobs_routes(crater_daemon_t *d, crater_error_t *err)
{
    static const api_route_t routes[] = {
        {"POST", "/api/v1/jobs", h_submit},
        {"GET", "/api/v1/jobs", h_list},
        {"GET", "/api/v1/jobs/{id}", h_get},
        {"DELETE", "/api/v1/jobs/{id}", h_cancel},
        {"POST", "/api/v1/jobs/{id}/cancel", h_cancel},
        {"GET", "/api/v1/jobs/{id}/explain", h_explain},
        {"GET", "/api/v1/jobs/{id}/events", h_events},
        {"GET", "/api/v1/jobs/{id}/metrics", h_jmetrics},
        {"GET", "/api/v1/jobs/{id}/logs", h_logs},
        {"GET", "/api/v1/jobs/{id}/checkpoints", h_checkpoints},
        {"POST", "/api/v1/schedule", h_schedule},
    };

    return api_register(d, routes, sizeof(routes) / sizeof(routes[0]), err);
}
