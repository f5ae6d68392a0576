/* access.c - who may do what: API tokens (kept hashed) and per-tenant
 * quotas checked at admission.
 *
 * Tokens: only SHA-256 hashes are stored and kept in memory; a request's
 * token is hashed and looked up (a linear scan with a constant-time
 * compare per entry: token tables are small, and the scan leaks nothing
 * about which prefix matched).
 *
 * Quotas, Kubernetes ResourceQuota-style: a submission is refused when the
 * tenant's jobs that are not finished, plus this one, would request more
 * than the quota in any dimension (GPUs, GPU memory, CPU, memory). The
 * error names the dimension, the quota and what is in use.
 *
 * Task users: each tenant's tasks run under a uid (and gid of the same
 * number) of its own, so that on a node one tenant's tasks cannot read
 * another's /proc/PID/environ or signal them (doc/security.md). craterd
 * allocates it, not the agents, so it is the same on every node: at the
 * tenant's first submission, the number after the highest one given out,
 * from server.taskUidRange. It is stored with the tenant's record before
 * the job is (commits reach the store in order), so an acknowledged job's
 * tenant keeps its uid across restarts; uids are never reused.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "crater/log.h"
#include "crater/units.h"
#include "daemon/cost.h"
#include "daemon/internal.h"

dtenant_t *tenant_find(crater_daemon_t *d, const char *name)
{
    for (size_t i = 0; i < d->ntenants; i++)
        if (strcmp(d->tenants[i]->name, name) == 0)
            return d->tenants[i];
    return NULL;
}

dtenant_t *tenant_get(crater_daemon_t *d, const char *name)
{
    dtenant_t *t = tenant_find(d, name);

    if (t)
        return t;
    if (d->ntenants == d->captenants) {
        size_t cap = d->captenants ? d->captenants * 2 : 8;
        dtenant_t **n = realloc(d->tenants, cap * sizeof(*n));
        if (!n)
            return NULL;
        d->tenants = n;
        d->captenants = cap;
    }
    if (!(t = calloc(1, sizeof(*t))) || !(t->name = strdup(name))) {
        free(t);
        return NULL;
    }
    t->weight = 1.0;
    d->tenants[d->ntenants++] = t;
    return t;
}

int tenant_persist(crater_daemon_t *d, const dtenant_t *t)
{
    json_t *v = json_pack("{s:f}", "weight", t->weight);
    char key[512];

    if (v && t->has_quota
        && json_object_update_new(v,
                                  json_pack("{s:I, s:I, s:I, s:I}",
                                            "gpus",
                                            (json_int_t)t->q_gpus,
                                            "gpu_memory",
                                            (json_int_t)t->q_gpu_mem,
                                            "cpu_millis",
                                            (json_int_t)t->q_cpu,
                                            "memory",
                                            (json_int_t)t->q_mem))
               < 0) {
        json_decref(v);
        v = NULL;
    }
    if (v && t->d_cpu
        && json_object_set_new(v,
                               "default_cpu_millis",
                               json_integer((json_int_t)t->d_cpu))
               < 0) {
        json_decref(v);
        v = NULL;
    }
    if (v && t->d_mem
        && json_object_set_new(v,
                               "default_memory",
                               json_integer((json_int_t)t->d_mem))
               < 0) {
        json_decref(v);
        v = NULL;
    }
    if (v && t->no_idle_reclaim
        && json_object_set_new(v, "idle_reclaim", json_false()) < 0) {
        json_decref(v);
        v = NULL;
    }
    if (v && t->uid
        && json_object_set_new(v, "uid", json_integer(t->uid)) < 0) {
        json_decref(v);
        v = NULL;
    }
    snprintf(key, sizeof(key), KEY_TENANTS "%s", t->name);
    return persist_put_json(d, key, v, NULL, NULL);
}

/* The next uid of the range; 0 when it is used up. */
static uint32_t next_uid(crater_daemon_t *d, uint32_t first, uint32_t last)
{
    uint32_t hi = 0;

    for (size_t i = 0; i < d->ntenants; i++)
        if (d->tenants[i]->uid > hi)
            hi = d->tenants[i]->uid;
    if (hi < first)
        return first;
    return hi < last ? hi + 1 : 0;
}

int tenant_uid(crater_daemon_t *d,
               const char *name,
               uint32_t *uid,
               crater_error_t *err)
{
    uint32_t first, last;
    dtenant_t *t;

    *uid = 0;
    if (crater_config_uid_range(d->cfg.server.task_uid_range, &first, &last)
        <= 0)
        return 0;
    if (!(t = tenant_get(d, name)))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (!t->uid) {
        if (!(t->uid = next_uid(d, first, last)))
            return crater_errorf_field(err,
                                       CRATER_EIMPOSSIBLE,
                                       "tenant",
                                       "no task uid left for tenant '%s': "
                                       "server.taskUidRange %s is used up",
                                       name,
                                       d->cfg.server.task_uid_range);
        crater_log(LOG_INFO, "tenant %s: task uid %u", name, t->uid);
        if (tenant_persist(d, t) < 0) {
            t->uid = 0;
            return crater_errorf(err, CRATER_EIO, "cannot store tenant");
        }
    }
    *uid = t->uid;
    return 0;
}

typedef struct usage {
    uint64_t gpus, gpu_mem, cpu, mem;
} usage_t;

/* a + n * x, saturating at UINT64_MAX: a sum that would wrap counts as
 * over every quota instead of as almost nothing. */
static uint64_t add_mul(uint64_t a, uint64_t n, uint64_t x)
{
    uint64_t p, r;

    if (__builtin_mul_overflow(n, x, &p) || __builtin_add_overflow(a, p, &r))
        return UINT64_MAX;
    return r;
}

static void spec_usage(const crater_jobspec_t *s, usage_t *u)
{
    uint64_t n = s->replicas ? s->replicas : 1;
    uint64_t g;

    if (s->inference.enabled) /* a service counts at its largest: every
                                 replica it may run, warm ones included */
        n = (uint64_t)s->inference.max_replicas + s->inference.warm_pool_size;
    g = add_mul(0, n, s->resources.gpu.count);

    u->gpus = add_mul(u->gpus, n, s->resources.gpu.count);
    u->gpu_mem = add_mul(u->gpu_mem, g, s->resources.gpu.memory_bytes);
    u->cpu = add_mul(u->cpu, n, s->resources.cpu_milli);
    u->mem = add_mul(u->mem, n, s->resources.memory_bytes);
}

static int over(crater_error_t *err,
                const char *tenant,
                const char *field,
                const char *what,
                uint64_t quota,
                uint64_t used,
                uint64_t want,
                int kind)
{
    char q[32], u[32], w[32];

    if (kind < 0) {
        snprintf(q, sizeof(q), "%llu", (unsigned long long)quota);
        snprintf(u, sizeof(u), "%llu", (unsigned long long)used);
        snprintf(w, sizeof(w), "%llu", (unsigned long long)want);
    } else {
        crater_format_quantity(quota, (crater_dim_t)kind, q, sizeof(q));
        crater_format_quantity(used, (crater_dim_t)kind, u, sizeof(u));
        crater_format_quantity(want, (crater_dim_t)kind, w, sizeof(w));
    }
    return crater_errorf_field(err,
                               CRATER_EIMPOSSIBLE,
                               field,
                               "tenant '%s' %s quota %s exceeded: %s in use"
                               " by unfinished jobs, this job asks %s",
                               tenant,
                               what,
                               q,
                               u,
                               w);
}

int tenant_admit(crater_daemon_t *d,
                 const char *tenant,
                 const crater_jobspec_t *spec,
                 crater_error_t *err)
{
    dtenant_t *t = tenant_find(d, tenant);
    usage_t used = {0}, want = {0};

    if (cost_admit(d, tenant, err) < 0)
        return -1;
    if (!t || !t->has_quota)
        return 0;
    for (size_t i = 0; i < d->njobs; i++)
        if (!job_state_final(d->jobs[i]->state) && !d->jobs[i]->svc_id
            && strcmp(d->jobs[i]->tenant, tenant) == 0) /* a service's
                replicas count in its own job */
            spec_usage(d->jobs[i]->spec, &used);
    spec_usage(spec, &want);
    if (t->q_gpus && add_mul(used.gpus, 1, want.gpus) > t->q_gpus)
        return over(err,
                    tenant,
                    "resources.gpu.count",
                    "GPU",
                    t->q_gpus,
                    used.gpus,
                    want.gpus,
                    -1);
    if (t->q_gpu_mem && add_mul(used.gpu_mem, 1, want.gpu_mem) > t->q_gpu_mem)
        return over(err,
                    tenant,
                    "resources.gpu.memory",
                    "GPU memory",
                    t->q_gpu_mem,
                    used.gpu_mem,
                    want.gpu_mem,
                    CRATER_DIM_BYTES);
    if (t->q_cpu && add_mul(used.cpu, 1, want.cpu) > t->q_cpu)
        return over(err,
                    tenant,
                    "resources.cpu",
                    "CPU",
                    t->q_cpu,
                    used.cpu,
                    want.cpu,
                    CRATER_DIM_CPU);
    if (t->q_mem && add_mul(used.mem, 1, want.mem) > t->q_mem)
        return over(err,
                    tenant,
                    "resources.memory",
                    "memory",
                    t->q_mem,
                    used.mem,
                    want.mem,
                    CRATER_DIM_BYTES);
    return 0;
}

crater_token_rec_t *token_lookup(crater_daemon_t *d, const char *tok)
{
    char hex[65];
    crater_token_rec_t *found = NULL;

    crater_token_hash(tok, hex);
    for (size_t i = 0; i < d->ntokens; i++)
        if (crater_token_hash_equal(d->tokens[i]->rec.hash, hex)
            && !d->tokens[i]->revoking)
            found = &d->tokens[i]->rec;
    return found;
}

/* ---- defaults (LimitRange) -------------------------------------------------
 */

void job_defaults(crater_daemon_t *d, crater_jobspec_t *spec, json_t *norm)
{
    const dtenant_t *t =
        tenant_find(d, spec->tenant ? spec->tenant : "default");
    uint64_t cpu = (uint64_t)(d->cfg.server.default_cpu * 1000.0 + 0.5);
    uint64_t mem = d->cfg.server.default_memory;
    json_t *res = json_object_get(norm, "resources");

    if (t && t->d_cpu)
        cpu = t->d_cpu;
    if (t && t->d_mem)
        mem = t->d_mem;
    if (spec->resources.cpu_milli == 0 && cpu) {
        spec->resources.cpu_milli = cpu;
        if (json_is_object(res))
            json_object_set_new(res, "cpu", json_sprintf("%" PRIu64 "m", cpu));
    }
    if (spec->resources.memory_bytes == 0 && mem) {
        spec->resources.memory_bytes = mem;
        if (json_is_object(res))
            json_object_set_new(res, "memory", json_integer((json_int_t)mem));
    }
}

#define USE_FLUSH_MS 60000

void tokens_flush_use(crater_daemon_t *d, int64_t now)
{
    char key[256];

    (void)now;
    for (size_t i = 0; i < d->ntokens; i++) {
        dtoken_t *t = d->tokens[i];
        bool first = t->stored_used_ms == 0 && t->rec.last_used_ms > 0;
        if (t->revoking
            || (!first
                && t->rec.last_used_ms < t->stored_used_ms + USE_FLUSH_MS))
            continue;
        snprintf(key, sizeof(key), KEY_TOKENS "%s", t->rec.hash);
        if (persist_put_json(d,
                             key,
                             crater_token_rec_to_json(&t->rec),
                             NULL,
                             NULL)
            == 0)
            t->stored_used_ms = t->rec.last_used_ms;
    }
}

int token_add(crater_daemon_t *d, crater_token_rec_t *rec)
{
    dtoken_t *t;

    if (d->ntokens == d->captokens) {
        size_t cap = d->captokens ? d->captokens * 2 : 8;
        dtoken_t **n = realloc(d->tokens, cap * sizeof(*n));
        if (!n)
            goto fail;
        d->tokens = n;
        d->captokens = cap;
    }
    if (!(t = calloc(1, sizeof(*t))))
        goto fail;
    t->rec = *rec;
    t->stored_used_ms = rec->last_used_ms;
    d->tokens[d->ntokens++] = t;
    return 0;
fail:
    crater_token_rec_free(rec);
    return -1;
}

/* ---- tenants' profiles ---------------------------------------------------
 */

crater_profiles_t *tenant_profiles(crater_daemon_t *d,
                                   const char *tenant,
                                   bool create)
{
    struct tprofiles *n;

    for (size_t i = 0; tenant && i < d->ntprofiles; i++)
        if (strcmp(d->tprofiles[i].tenant, tenant) == 0)
            return d->tprofiles[i].reg;
    if (!tenant || !create)
        return NULL;
    if (d->ntprofiles == d->captprofiles) {
        size_t cap = d->captprofiles ? d->captprofiles * 2 : 8;
        if (!(n = realloc(d->tprofiles, cap * sizeof(*n))))
            return NULL;
        d->tprofiles = n;
        d->captprofiles = cap;
    }
    n = &d->tprofiles[d->ntprofiles];
    if (!(n->tenant = strdup(tenant))
        || !(n->reg = crater_profiles_create_tenant())) {
        free(n->tenant);
        return NULL;
    }
    crater_profiles_share(n->reg, d->profiles);
    d->ntprofiles++;
    return n->reg;
}

const crater_profiles_t *profiles_for(crater_daemon_t *d, const char *tenant)
{
    const crater_profiles_t *t = tenant_profiles(d, tenant, false);

    return t ? t : d->profiles;
}

void tenant_profiles_free(crater_daemon_t *d)
{
    for (size_t i = 0; i < d->ntprofiles; i++) {
        free(d->tprofiles[i].tenant);
        crater_profiles_destroy(d->tprofiles[i].reg);
    }
    free(d->tprofiles);
    d->tprofiles = NULL;
    d->ntprofiles = d->captprofiles = 0;
}
