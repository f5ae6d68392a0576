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

static void h_token_create(crater_http_req_t *r,
                           crater_http_resp_t *resp,
                           void *arg)
{
    crater_daemon_t *d = arg;
    char tok[CRATER_TOKEN_LEN + 1], hex[65];
    const char *role, *scope = NULL;
    crater_error_t err = {0};
    json_t *body = NULL;
    principal_t p;
    int rc;

    pthread_mutex_lock(&d->mu);
    rc = api_auth(d, r, resp, &p) < 0 || api_require_admin(&p, resp) < 0
                 || api_body_json(r, &body, resp) < 0
             ? -1
             : 0;
    pthread_mutex_unlock(&d->mu);
    if (rc < 0)
        goto out;
    role = json_string_value(json_object_get(body, "role"));
    if (!role) {
        api_errorf(resp,
                   CRATER_EMISSING,
                   "role",
                   "role: one of admin, user, agent is required");
        goto out;
    }
    scope = json_string_value(json_object_get(body, "tenant"));
    if (!scope)
        scope = json_string_value(json_object_get(body, "node"));
    /* make_token commits synchronously: never under d->mu */
    if (crater_daemon_create_token_named(d,
                                         role,
                                         scope,
                                         json_string_value(
                                             json_object_get(body, "name")),
                                         tok,
                                         sizeof(tok),
                                         &err)
        < 0) {
        crater_http_error(resp, &err);
        goto out;
    }
    crater_token_hash(tok, hex);
    crater_http_json(resp,
                     201,
                     json_pack("{s:s, s:s, s:s, s:s?}",
                               "token",
                               tok,
                               "hash",
                               hex,
                               "role",
                               role,
                               "scope",
                               scope));
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
        items = json_array();
        for (size_t i = 0; i < d->ntokens; i++)
            json_array_append_new(items,
                                  crater_token_rec_to_json(&d->tokens[i]->rec));
        crater_http_json(resp, 200, json_pack("{s:o}", "items", items));
    }
    pthread_mutex_unlock(&d->mu);
}

/* The token record with this hash, and how many admin tokens there are;
 * caller holds d->mu. */
static dtoken_t *token_by_hash(crater_daemon_t *d,
                               const char *hash,
                               size_t *admins)
{
    dtoken_t *found = NULL;

    *admins = 0;
    for (size_t i = 0; i < d->ntokens; i++) {
        *admins += d->tokens[i]->rec.role == CRATER_ROLE_ADMIN;
        if (hash && strcmp(d->tokens[i]->rec.hash, hash) == 0)
            found = d->tokens[i];
    }
    return found;
}

static void token_forget(crater_daemon_t *d, const char *hash)
{
    for (size_t i = 0; i < d->ntokens; i++)
        if (strcmp(d->tokens[i]->rec.hash, hash) == 0) {
            crater_token_rec_free(&d->tokens[i]->rec);
            free(d->tokens[i]);
            d->tokens[i] = d->tokens[--d->ntokens];
            return;
        }
}

/* DELETE /api/v1/tokens/{hash}: the token stops working at once. The last
 * admin token cannot be revoked (nobody could create another). */
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
        else if (tok->rec.role == CRATER_ROLE_ADMIN && admins == 1)
            api_errorf(resp,
                       CRATER_EEXIST,
                       "hash",
                       "the last admin token cannot be revoked: create "
                       "another admin token first");
        else
            rc = 0;
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

static int quota_field(json_t *q,
                       const char *name,
                       crater_dim_t dim,
                       uint64_t *out,
                       crater_http_resp_t *resp)
{
    json_t *v = json_object_get(q, name);
    crater_error_t err;
    char field[64];

    snprintf(field, sizeof(field), "quota.%s", name);
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

static int parse_quota(json_t *body,
                       uint64_t q[4],
                       double *weight,
                       crater_http_resp_t *resp)
{
    static const char *const known[] = {"quota", "weight"};
    json_t *quota = json_object_get(body, "quota"), *w;
    json_t *g = json_object_get(quota, "gpus");
    const char *k;
    json_t *v;

    json_object_foreach(body, k, v)
    {
        if (strcmp(k, known[0]) && strcmp(k, known[1])) {
            api_errorf(resp,
                       CRATER_EFIELD,
                       k,
                       "%s: unknown field (quota, weight)",
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
    if (quota_field(quota, "gpuMemory", CRATER_DIM_BYTES, &q[1], resp) < 0
        || quota_field(quota, "cpu", CRATER_DIM_CPU, &q[2], resp) < 0
        || quota_field(quota, "memory", CRATER_DIM_BYTES, &q[3], resp) < 0)
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

static json_t *tenant_json(const dtenant_t *t)
{
    return json_pack("{s:s, s:{s:I, s:I, s:I, s:I}, s:f, s:I}",
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
                     (json_int_t)t->uid);
}

static void h_tenant_put(crater_http_req_t *r,
                         crater_http_resp_t *resp,
                         void *arg)
{
    crater_daemon_t *d = arg;
    const char *name = crater_http_param(r, "name");
    crater_error_t err = {0};
    json_t *body = NULL;
    uint64_t q[4];
    double w;
    principal_t p;
    dtenant_t *t;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0 || api_require_admin(&p, resp) < 0
        || api_body_json(r, &body, resp) < 0
        || parse_quota(body, q, &w, resp) < 0)
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

static void profile_add(crater_daemon_t *d,
                        json_t *root,
                        const crater_doc_t *doc,
                        crater_http_resp_t *resp)
{
    size_t before = crater_profiles_count(d->profiles);
    const crater_profile_t *pr;
    crater_error_t err = {0};
    crater_dec_t dec;
    char key[512];

    crater_dec_init(&dec, doc, 0, &err);
    pthread_rwlock_wrlock(&d->prof_lock);
    int rc = crater_profile_decode(&dec, root, d->profiles);
    pthread_rwlock_unlock(&d->prof_lock);
    if (rc < 0) {
        if (strstr(err.text, "exists") || strstr(err.text, "already"))
            err.errnum = CRATER_EEXIST;
        crater_http_error(resp, &err);
        return;
    }
    if (crater_profiles_count(d->profiles) == before)
        return;
    pr =
        crater_profiles_at(d->profiles, crater_profiles_count(d->profiles) - 1);
    snprintf(key, sizeof(key), KEY_PROFILES "%s@%s", pr->name, pr->version);
    persist_put_json(d, key, json_deep_copy(root), NULL, NULL);
    crater_http_json(resp, 201, crater_profile_encode(pr));
}

static void h_profile_create(crater_http_req_t *r,
                             crater_http_resp_t *resp,
                             void *arg)
{
    crater_daemon_t *d = arg;
    crater_error_t err = {0};
    crater_doc_t *doc = NULL;
    principal_t p;
    size_t len;
    const char *body = crater_http_body(r, &len);

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0)
        goto out;
    if (p.role != CRATER_ROLE_ADMIN) {
        /* profiles are shared by every tenant: a tenant publishing
         * default@99 would change other tenants' jobs */
        api_errorf(resp,
                   CRATER_EPERM,
                   NULL,
                   "profiles are shared by every tenant, so only an admin "
                   "publishes them");
        goto out;
    }
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
        profile_add(d, crater_doc_root(doc, 0), doc, resp);
        api_answer_when_stored(d, r, resp);
    }
out:
    crater_doc_destroy(doc);
    pthread_mutex_unlock(&d->mu);
}

static void h_profiles(crater_http_req_t *r,
                       crater_http_resp_t *resp,
                       void *arg)
{
    crater_daemon_t *d = arg;
    principal_t p;
    json_t *items;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0) {
        items = json_array();
        for (size_t i = 0; i < crater_profiles_count(d->profiles); i++)
            json_array_append_new(items,
                                  crater_profile_encode(
                                      crater_profiles_at(d->profiles, i)));
        crater_http_json(resp, 200, json_pack("{s:o}", "items", items));
    }
    pthread_mutex_unlock(&d->mu);
}

static void h_profile(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    const char *ref = crater_http_param(r, "ref");
    const crater_profile_t *pr;
    principal_t p;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0) {
        if ((pr = crater_profiles_get(d->profiles, ref)))
            crater_http_json(resp, 200, crater_profile_encode(pr));
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
