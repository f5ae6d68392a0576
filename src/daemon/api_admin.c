/* api_admin.c - tokens, tenants (quotas, fair-share weight) and profiles.
 *
 * Tokens are created by admins only and shown once; the store and the
 * listing hold their SHA-256 hashes. Tenant quotas take the job spec's
 * units ("320Gi", "64" CPUs or "64000m") and are checked at submission
 * (access.c). Profiles are immutable once published: a second
 * name@version is 409.
 */
#include <stdlib.h>
#include <string.h>

#include "crater/doc.h"
#include "crater/kind.h"
#include "crater/units.h"
#include "daemon/internal.h"

/* ---- tokens ----------------------------------------------------------------
 */

/* A token request: {"role", "tenant"?, "node"?, "name"?, "expires"?,
 * "readOnly"?}; expires is a duration from now ("30d", "12h"). Strings
 * are borrowed from the body. */
typedef struct token_req {
    const char *role, *tenant, *node, *name;
    uint64_t expires_s;
    bool read_only;
} token_req_t;

#define TOKEN_EXPIRY_MAX_S (10LL * 366 * 86400) /* ten years */

static int tq_str(crater_dec_t *d, json_t *v, const char **out)
{
    if (!json_is_string(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a string, got %s",
                               crater_dec_typename(v));
    *out = json_string_value(v);
    return 0;
}

static int tq_role(crater_dec_t *d, json_t *v, void *o)
{
    return tq_str(d, v, &((token_req_t *)o)->role);
}

static int tq_tenant(crater_dec_t *d, json_t *v, void *o)
{
    return tq_str(d, v, &((token_req_t *)o)->tenant);
}

static int tq_node(crater_dec_t *d, json_t *v, void *o)
{
    return tq_str(d, v, &((token_req_t *)o)->node);
}

static int tq_name(crater_dec_t *d, json_t *v, void *o)
{
    return tq_str(d, v, &((token_req_t *)o)->name);
}

static int tq_expires(crater_dec_t *d, json_t *v, void *o)
{
    uint64_t ns, s;

    if (crater_dec_quantity(d, v, CRATER_DIM_DURATION, &ns) < 0)
        return -1;
    s = ns / 1000000000u;
    if (s < 1 || s > TOKEN_EXPIRY_MAX_S)
        return crater_dec_fail(d,
                               CRATER_ERANGE,
                               "a token expires between 1s and 10 years "
                               "from now (\"30d\", \"12h\")");
    ((token_req_t *)o)->expires_s = s;
    return 0;
}

static int tq_read_only(crater_dec_t *d, json_t *v, void *o)
{
    return crater_dec_bool(d, v, &((token_req_t *)o)->read_only);
}

static int token_req_decode(json_t *body,
                            token_req_t *q,
                            crater_http_resp_t *resp)
{
    static const crater_dec_field_t fields[] = {
        {"role", tq_role, CRATER_FIELD_REQUIRED},
        {"tenant", tq_tenant, 0},
        {"node", tq_node, 0},
        {"name", tq_name, 0},
        {"expires", tq_expires, 0},
        {"readOnly", tq_read_only, 0},
        {NULL, NULL, 0},
    };
    crater_error_t err = {0};
    crater_dec_t dec;

    crater_dec_init(&dec, NULL, 0, &err);
    if (crater_dec_object(&dec, body, fields, q) == 0)
        return 0;
    crater_http_error(resp, &err);
    return -1;
}

static void h_token_create(crater_http_req_t *r,
                           crater_http_resp_t *resp,
                           void *arg)
{
    crater_daemon_t *d = arg;
    char tok[CRATER_TOKEN_LEN + 1], hex[65];
    crater_error_t err = {0};
    token_req_t q = {0};
    json_t *body = NULL, *ans;
    int64_t expires_ms = 0;
    principal_t p;
    int rc;

    pthread_mutex_lock(&d->mu);
    rc = api_auth(d, r, resp, &p) < 0 || api_require_admin(&p, resp) < 0
                 || api_body_json(r, &body, resp) < 0
             ? -1
             : 0;
    pthread_mutex_unlock(&d->mu);
    if (rc < 0 || token_req_decode(body, &q, resp) < 0)
        goto out;
    if (q.tenant && q.node) {
        api_errorf(resp,
                   CRATER_ECONFLICT,
                   "node",
                   "node: a token has a tenant (user) or a node (agent), "
                   "not both");
        goto out;
    }
    if (q.expires_s)
        expires_ms = dnow_ms() + (int64_t)q.expires_s * 1000;
    /* make_token commits synchronously: never under d->mu */
    if (crater_daemon_create_token_named(d,
                                         q.role,
                                         q.tenant ? q.tenant : q.node,
                                         q.name,
                                         expires_ms,
                                         q.read_only,
                                         tok,
                                         sizeof(tok),
                                         &err)
        < 0) {
        crater_http_error(resp, &err);
        goto out;
    }
    crater_token_hash(tok, hex);
    ans = json_pack("{s:s, s:s, s:s, s:s?}",
                    "token",
                    tok,
                    "hash",
                    hex,
                    "role",
                    q.role,
                    "scope",
                    q.tenant ? q.tenant : q.node);
    if (ans && expires_ms)
        json_object_set_new(ans, "expires_ms", json_integer(expires_ms));
    if (ans && q.read_only)
        json_object_set_new(ans, "readOnly", json_true());
    crater_http_json(resp, 201, ans);
out:
    json_decref(body);
}

static void h_token_list(crater_http_req_t *r,
                         crater_http_resp_t *resp,
                         void *arg)
{
    crater_daemon_t *d = arg;
    principal_t p;
    json_t *items;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0 && api_require_admin(&p, resp) == 0) {
        int64_t now = dnow_ms();
        items = json_array();
        for (size_t i = 0; i < d->ntokens; i++) {
            const crater_token_rec_t *t = &d->tokens[i]->rec;
            json_t *o = crater_token_rec_to_json(t);
            if (o)
                json_object_set_new(o,
                                    "expired",
                                    json_boolean(crater_token_expired(t, now)));
            json_array_append_new(items, o);
        }
        crater_http_json(resp, 200, json_pack("{s:o}", "items", items));
    }
    pthread_mutex_unlock(&d->mu);
}

/* An admin token that can still create tokens: not read-only, not
 * expired. */
static bool full_admin(const crater_token_rec_t *t, int64_t now)
{
    return t->role == CRATER_ROLE_ADMIN && !t->read_only
           && !crater_token_expired(t, now);
}

/* The token record with this hash, and how many full admin tokens there
 * are; caller holds d->mu. */
static dtoken_t *token_by_hash(crater_daemon_t *d,
                               const char *hash,
                               size_t *admins)
{
    dtoken_t *found = NULL;
    int64_t now = dnow_ms();

    *admins = 0;
    for (size_t i = 0; i < d->ntokens; i++) {
        *admins += full_admin(&d->tokens[i]->rec, now);
        if (hash && strcmp(d->tokens[i]->rec.hash, hash) == 0)
            found = d->tokens[i];
    }
    return found;
}

/* Out of the list, into d->revoked (requests in flight may still point
 * into its record). */
static void token_forget(crater_daemon_t *d, const char *hash)
{
    for (size_t i = 0; i < d->ntokens; i++)
        if (strcmp(d->tokens[i]->rec.hash, hash) == 0) {
            dtoken_t **g = realloc(d->revoked, (d->nrevoked + 1) * sizeof(*g));
            if (!g) /* listed still, but revoking: never matches */
                return;
            d->revoked = g;
            d->revoked[d->nrevoked++] = d->tokens[i];
            d->tokens[i] = d->tokens[--d->ntokens];
            return;
        }
}

/* DELETE /api/v1/tokens/{hash}: the token stops working at once. The last
 * full admin token (not read-only, not expired) cannot be revoked: nobody
 * could create another. */
static void h_token_revoke(crater_http_req_t *r,
                           crater_http_resp_t *resp,
                           void *arg)
{
    crater_daemon_t *d = arg;
    const char *hash = crater_http_param(r, "hash");
    crater_error_t err = {0};
    crater_txn_t *t = NULL;
    char key[256];
    principal_t p;
    size_t admins;
    dtoken_t *tok;
    int rc = -1;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0 && api_require_admin(&p, resp) == 0) {
        tok = token_by_hash(d, hash, &admins);
        if (!tok)
            api_errorf(resp, CRATER_ENOENT, "hash", "no token '%s'", hash);
        else if (full_admin(&tok->rec, dnow_ms()) && admins == 1)
            api_errorf(resp,
                       CRATER_EEXIST,
                       "hash",
                       "the last admin token cannot be revoked: create "
                       "another admin token first");
        else if (tok->revoking)
            api_errorf(resp,
                       CRATER_ECONFLICT,
                       "hash",
                       "token '%s' is being revoked",
                       hash);
        else {
            tok->revoking = true; /* no last-use write resurrects it */
            rc = 0;
        }
    }
    pthread_mutex_unlock(&d->mu);
    if (rc < 0)
        return;
    /* a synchronous commit: never under d->mu */
    snprintf(key, sizeof(key), KEY_TOKENS "%s", hash);
    if (!(t = crater_txn_create()) || crater_txn_delete(t, key, &err) < 0
        || crater_store_commit(d->store, t, NULL, &err) < 0) {
        crater_txn_destroy(t);
        if (err.errnum == CRATER_OK)
            crater_errorf(&err, CRATER_ENOMEM, "out of memory");
        crater_http_error(resp, &err);
        pthread_mutex_lock(&d->mu);
        if ((tok = token_by_hash(d, hash, &admins)))
            tok->revoking = false;
        pthread_mutex_unlock(&d->mu);
        return;
    }
    crater_txn_destroy(t);
    pthread_mutex_lock(&d->mu);
    token_forget(d, hash);
    pthread_mutex_unlock(&d->mu);
    crater_http_json(resp, 200, json_pack("{s:s}", "revoked", hash));
}

/* ---- tenants ---------------------------------------------------------------
 */

/* section.name of a tenant body ("quota.cpu", "defaults.memory"). */
static int quota_field(json_t *q,
                       const char *section,
                       const char *name,
                       crater_dim_t dim,
                       uint64_t *out,
                       crater_http_resp_t *resp)
{
    json_t *v = json_object_get(q, name);
    crater_error_t err;
    char field[64];

    snprintf(field, sizeof(field), "%s.%s", section, name);
    *out = 0;
    if (!v)
        return 0;
    if (json_is_integer(v) && json_integer_value(v) >= 0
        && dim != CRATER_DIM_BYTES) {
        *out = (uint64_t)json_integer_value(v)
               * (dim == CRATER_DIM_CPU ? 1000 : 1);
        return 0;
    }
    if (json_is_string(v)
        && (dim == CRATER_DIM_BYTES
                ? crater_parse_size(json_string_value(v), out, &err)
                : crater_parse_quantity(json_string_value(v), dim, out, &err))
               == 0)
        return 0;
    api_errorf(resp,
               CRATER_EUNIT,
               field,
               "%s: %s",
               field,
               json_is_string(v) ? err.text : "expected a quantity");
    return -1;
}

/* "defaults": {"cpu": "500m", "memory": "2Gi"}: what a job of the tenant
 * asking none gets (LimitRange); 0 or absent: the server's. */
static int parse_defaults(json_t *dv,
                          uint64_t dflt[2],
                          crater_http_resp_t *resp)
{
    const char *k;
    json_t *v;

    dflt[0] = dflt[1] = 0;
    if (!dv)
        return 0;
    if (!json_is_object(dv)) {
        api_errorf(resp,
                   CRATER_ETYPE,
                   "defaults",
                   "defaults: expected {cpu, memory}");
        return -1;
    }
    json_object_foreach(dv, k, v)
    {
        if (strcmp(k, "cpu") && strcmp(k, "memory")) {
            api_errorf(resp,
                       CRATER_EFIELD,
                       "defaults",
                       "defaults.%s: unknown field (cpu, memory)",
                       k);
            return -1;
        }
    }
    return quota_field(dv, "defaults", "cpu", CRATER_DIM_CPU, &dflt[0], resp)
                       < 0
                   || quota_field(dv,
                                  "defaults",
                                  "memory",
                                  CRATER_DIM_BYTES,
                                  &dflt[1],
                                  resp)
                          < 0
               ? -1
               : 0;
}

static int parse_quota(json_t *body,
                       uint64_t q[4],
                       double *weight,
                       uint64_t dflt[2],
                       crater_http_resp_t *resp)
{
    static const char *const known[] = {"quota",
                                        "weight",
                                        "defaults",
                                        "idleReclaim"};
    json_t *quota = json_object_get(body, "quota"), *w;
    json_t *g = json_object_get(quota, "gpus");
    const char *k;
    json_t *v;

    json_object_foreach(body, k, v)
    {
        if (strcmp(k, known[0]) && strcmp(k, known[1]) && strcmp(k, known[2])
            && strcmp(k, known[3])) {
            api_errorf(resp,
                       CRATER_EFIELD,
                       k,
                       "%s: unknown field (quota, weight, defaults, "
                       "idleReclaim)",
                       k);
            return -1;
        }
    }
    if (g && (!json_is_integer(g) || json_integer_value(g) < 0)) {
        api_errorf(resp,
                   CRATER_ETYPE,
                   "quota.gpus",
                   "quota.gpus: expected a whole number of GPUs");
        return -1;
    }
    q[0] = g ? (uint64_t)json_integer_value(g) : 0;
    if (quota_field(quota, "quota", "gpuMemory", CRATER_DIM_BYTES, &q[1], resp)
            < 0
        || quota_field(quota, "quota", "cpu", CRATER_DIM_CPU, &q[2], resp) < 0
        || quota_field(quota, "quota", "memory", CRATER_DIM_BYTES, &q[3], resp)
               < 0
        || parse_defaults(json_object_get(body, "defaults"), dflt, resp) < 0)
        return -1;
    w = json_object_get(body, "weight");
    *weight = w ? json_number_value(w) : 1.0;
    if (w && (!json_is_number(w) || *weight <= 0)) {
        api_errorf(resp,
                   CRATER_ERANGE,
                   "weight",
                   "weight: expected a number > 0");
        return -1;
    }
    return 0;
}

/* idleReclaim: a boolean, true when absent (the PUT replaces the whole
 * record). */
static int parse_idle_reclaim(json_t *body, bool *off, crater_http_resp_t *resp)
{
    json_t *v = json_object_get(body, "idleReclaim");

    if (v && !json_is_boolean(v)) {
        api_errorf(resp,
                   CRATER_ETYPE,
                   "idleReclaim",
                   "idleReclaim: expected true or false");
        return -1;
    }
    *off = v && json_is_false(v);
    return 0;
}

static json_t *tenant_json_base(const dtenant_t *t)
{
    return json_pack("{s:s, s:{s:I, s:I, s:I, s:I}, s:f, s:I, s:{s:I, s:I}}",
                     "name",
                     t->name,
                     "quota",
                     "gpus",
                     (json_int_t)t->q_gpus,
                     "gpu_memory_bytes",
                     (json_int_t)t->q_gpu_mem,
                     "cpu_millis",
                     (json_int_t)t->q_cpu,
                     "memory_bytes",
                     (json_int_t)t->q_mem,
                     "weight",
                     t->weight,
                     "task_uid",
                     (json_int_t)t->uid,
                     "defaults",
                     "cpu_millis",
                     (json_int_t)t->d_cpu,
                     "memory_bytes",
                     (json_int_t)t->d_mem);
}

static json_t *tenant_json(const dtenant_t *t)
{
    json_t *o = tenant_json_base(t);

    if (o)
        json_object_set_new(o,
                            "idleReclaim",
                            json_boolean(!t->no_idle_reclaim));
    return o;
}

static void h_tenant_put(crater_http_req_t *r,
                         crater_http_resp_t *resp,
                         void *arg)
{
    crater_daemon_t *d = arg;
    const char *name = crater_http_param(r, "name");
    crater_error_t err = {0};
    json_t *body = NULL;
    uint64_t q[4], dflt[2];
    double w;
    bool idle_off;
    principal_t p;
    dtenant_t *t;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0 || api_require_admin(&p, resp) < 0
        || api_body_json(r, &body, resp) < 0
        || parse_quota(body, q, &w, dflt, resp) < 0
        || parse_idle_reclaim(body, &idle_off, resp) < 0)
        goto out;
    if (!(t = tenant_get(d, name))
        || crater_queue_set_tenant_weight(d->queue, name, w, &err) < 0) {
        api_errorf(resp, CRATER_ENOMEM, NULL, "out of memory");
        goto out;
    }
    t->has_quota = true;
    t->q_gpus = q[0];
    t->q_gpu_mem = q[1];
    t->q_cpu = q[2];
    t->q_mem = q[3];
    t->weight = w;
    t->d_cpu = dflt[0];
    t->d_mem = dflt[1];
    t->no_idle_reclaim = idle_off;
    tenant_persist(d, t);
    crater_http_json(resp, 200, tenant_json(t));
    api_answer_when_stored(d, r, resp);
out:
    json_decref(body);
    pthread_mutex_unlock(&d->mu);
}

static void h_tenants(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    principal_t p;
    json_t *items;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0) {
        items = json_array();
        for (size_t i = 0; i < d->ntenants; i++)
            if (p.role != CRATER_ROLE_USER
                || strcmp(p.tenant, d->tenants[i]->name) == 0)
                json_array_append_new(items, tenant_json(d->tenants[i]));
        crater_http_json(resp, 200, json_pack("{s:o}", "items", items));
    }
    pthread_mutex_unlock(&d->mu);
}

/* ---- profiles --------------------------------------------------------------
 */

/* A profile as the API shows it: its document plus whose it is. */
static json_t *profile_json(const crater_profile_t *pr, const char *tenant)
{
    json_t *o = crater_profile_encode(pr);

    if (o && tenant)
        json_object_set_new(o, "tenant", json_string(tenant));
    else if (o)
        json_object_set_new(o, "shared", json_true());
    return o;
}

/* Publish root into tenant's registry (NULL: the shared one). Caller
 * holds d->mu. */
static void profile_add(crater_daemon_t *d,
                        const char *tenant,
                        json_t *root,
                        const crater_doc_t *doc,
                        crater_http_resp_t *resp)
{
    crater_profiles_t *reg;
    const crater_profile_t *pr = NULL;
    crater_error_t err = {0};
    crater_dec_t dec;
    char key[512];
    int rc = -1;

    crater_dec_init(&dec, doc, 0, &err);
    pthread_rwlock_wrlock(&d->prof_lock);
    reg = tenant ? tenant_profiles(d, tenant, true) : d->profiles;
    if (!reg)
        crater_errorf(&err, CRATER_ENOMEM, "out of memory");
    else if ((rc = crater_profile_decode(&dec, root, reg)) == 0)
        pr = crater_profiles_at(reg, crater_profiles_count(reg) - 1);
    pthread_rwlock_unlock(&d->prof_lock);
    if (rc < 0) {
        if (strstr(err.text, "exists") || strstr(err.text, "already"))
            err.errnum = CRATER_EEXIST;
        crater_http_error(resp, &err);
        return;
    }
    snprintf(key,
             sizeof(key),
             KEY_PROFILES "%s%s%s@%s",
             tenant ? tenant : "",
             tenant ? "/" : "",
             pr->name,
             pr->version);
    persist_put_json(d, key, json_deep_copy(root), NULL, NULL);
    crater_http_json(resp, 201, profile_json(pr, tenant));
}

/* The tenant a profile request is about: a user's own; for an admin the
 * ?tenant= parameter (NULL: the shared profiles). -1 (resp filled) when
 * that parameter is not a tenant name or a user names another tenant. */
static int profile_tenant(crater_http_req_t *r,
                          const principal_t *p,
                          const char **tenant,
                          crater_http_resp_t *resp)
{
    const char *q = crater_http_query(r, "tenant");
    size_t n = q ? strlen(q) : 0;

    *tenant = user_tenant(p);
    if (!q)
        return 0;
    if (n == 0 || n > 63
        || strspn(q, "abcdefghijklmnopqrstuvwxyz0123456789-.") != n
        || q[0] == '-' || q[0] == '.' || q[n - 1] == '-' || q[n - 1] == '.') {
        api_errorf(resp,
                   CRATER_EINVAL,
                   "tenant",
                   "tenant: '%s' is not a tenant name",
                   q);
        return -1;
    }
    if (*tenant && strcmp(*tenant, q) != 0) {
        api_errorf(resp,
                   CRATER_EPERM,
                   "tenant",
                   "tenant: a user token works only with its tenant's "
                   "profiles");
        return -1;
    }
    *tenant = q;
    return 0;
}

/* POST /api/v1/profiles: an admin publishes a shared profile (or, with
 * ?tenant=T, one of T's); a user publishes into its own tenant, where a
 * shared name cannot be shadowed and other tenants never look. */
static void h_profile_create(crater_http_req_t *r,
                             crater_http_resp_t *resp,
                             void *arg)
{
    crater_daemon_t *d = arg;
    crater_error_t err = {0};
    crater_doc_t *doc = NULL;
    const char *tenant;
    principal_t p;
    size_t len;
    const char *body = crater_http_body(r, &len);

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0
        || profile_tenant(r, &p, &tenant, resp) < 0)
        goto out;
    if (crater_doc_parse(body, len, "body", &doc, &err) < 0) {
        crater_http_error(resp, &err);
        goto out;
    }
    if (crater_doc_count(doc) != 1
        || crater_kind_of(crater_doc_root(doc, 0)) != CRATER_KIND_PROFILE)
        api_errorf(resp,
                   CRATER_EINVAL,
                   "kind",
                   "body must be one document with kind: Profile");
    else {
        profile_add(d, tenant, crater_doc_root(doc, 0), doc, resp);
        api_answer_when_stored(d, r, resp);
    }
out:
    crater_doc_destroy(doc);
    pthread_mutex_unlock(&d->mu);
}

static void add_profiles(json_t *items,
                         const crater_profiles_t *reg,
                         const char *tenant)
{
    for (size_t i = 0; i < crater_profiles_count(reg); i++)
        json_array_append_new(items,
                              profile_json(crater_profiles_at(reg, i), tenant));
}

/* GET /api/v1/profiles: the shared profiles, then the tenants' own (a
 * user sees its tenant's only). Each carries "tenant" or "shared". */
static void h_profiles(crater_http_req_t *r,
                       crater_http_resp_t *resp,
                       void *arg)
{
    crater_daemon_t *d = arg;
    const char *mine;
    principal_t p;
    json_t *items;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0) {
        mine = user_tenant(&p);
        items = json_array();
        add_profiles(items, d->profiles, NULL);
        for (size_t i = 0; i < d->ntprofiles; i++)
            if (!mine || strcmp(mine, d->tprofiles[i].tenant) == 0)
                add_profiles(items,
                             d->tprofiles[i].reg,
                             d->tprofiles[i].tenant);
        crater_http_json(resp, 200, json_pack("{s:o}", "items", items));
    }
    pthread_mutex_unlock(&d->mu);
}

/* GET /api/v1/profiles/{ref}: resolved as a job of the tenant would
 * resolve it (shared names first). */
static void h_profile(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    const char *ref = crater_http_param(r, "ref"), *tenant;
    const crater_profiles_t *reg;
    const crater_profile_t *pr;
    principal_t p;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0
        && profile_tenant(r, &p, &tenant, resp) == 0) {
        reg = profiles_for(d, tenant);
        pr = crater_profiles_get(reg, ref);
        if (pr)
            crater_http_json(resp,
                             200,
                             profile_json(pr,
                                          crater_profiles_get(d->profiles, ref)
                                                  == pr
                                              ? NULL
                                              : tenant));
        else
            api_errorf(resp, CRATER_ENOENT, "ref", "no profile '%s'", ref);
    }
    pthread_mutex_unlock(&d->mu);
}

int api_admin_routes(crater_daemon_t *d, crater_error_t *err)
{
    static const api_route_t routes[] = {
        {"POST", "/api/v1/tokens", h_token_create},
        {"DELETE", "/api/v1/tokens/{hash}", h_token_revoke},
        {"GET", "/api/v1/tokens", h_token_list},
        {"PUT", "/api/v1/tenants/{name}", h_tenant_put},
        {"GET", "/api/v1/tenants", h_tenants},
        {"POST", "/api/v1/profiles", h_profile_create},
        {"GET", "/api/v1/profiles", h_profiles},
        {"GET", "/api/v1/profiles/{ref}", h_profile},
    };

    return api_register(d, routes, sizeof(routes) / sizeof(routes[0]), err);
}
