/* daemon.c - craterd's start and stop: the order in which the parts come
 * up and go down.
 *
 * Start: data directory (0700 whatever existed), knowledge base (with the
 * config's overrides), scheduler core, queue, store (SQLite under
 * DATA_DIR/crater.db), rebuild from the store (a promoted standby: from its
 * warm copy of the store's records, opts->warm), first admin token (only when
 * the store has no token), nodes from --hardware, routes, HTTP server,
 * scheduler thread; /readyz answers 200 from then on. Stop is the reverse: the
 * scheduler thread ends (completing every suspended long poll), the HTTP server
 * stops, the store finishes its queued commits (their callbacks still find the
 * state), then memory is freed.
 *
 * The configuration is copied shallowly: its strings are borrowed, so the
 * caller keeps cfg alive until crater_daemon_stop() returns.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crater/hwfile.h"
#include "crater/log.h"
#include "crater/privdir.h"
#include "daemon/audit.h"
#include "daemon/cost.h"
#include "daemon/internal.h"
#include "daemon/leader.h"

static uint64_t env_now(void *arg)
{
    (void)arg;
    return (uint64_t)dnow_ms();
}

static uint64_t env_random(void *arg)
{
    uint64_t r = 0;

    (void)arg;
    if (getrandom(&r, sizeof(r), 0) != sizeof(r))
        r = (uint64_t)dnow_ms() * 6364136223846793005ull;
    return r;
}

static const crater_sched_env_t sched_env = {env_now, env_random, NULL};

static int mkdir_p(const char *dir, crater_error_t *err)
{
    char path[4096];
    size_t n = strlen(dir);

    if (n == 0 || n >= sizeof(path))
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "server.dataDir",
                                   "data directory path is empty or too long");
    memcpy(path, dir, n + 1);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
            goto fail;
        *p = '/';
    }
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        goto fail;
    return 0;
fail:
    return crater_errorf_field(err,
                               CRATER_EIO,
                               "server.dataDir",
                               "cannot create %s: %s",
                               path,
                               strerror(errno));
}

/* "none" in the config means unset. */
static const char *opt_str(const char *s)
{
    return s && strcmp(s, "none") != 0 ? s : NULL;
}

/* The etcd store from the store.etcd* keys. */
static crater_store_t *open_etcd(const crater_config_t *c, crater_error_t *err)
{
    crater_store_etcd_opts_t o = {
        .endpoints = c->store.etcd_endpoints,
        .prefix = c->store.etcd_prefix,
        .ca_file = opt_str(c->store.etcd_ca_file),
        .cert_file = opt_str(c->store.etcd_cert_file),
        .key_file = opt_str(c->store.etcd_key_file),
        .user = opt_str(c->store.etcd_user),
        .password = opt_str(c->store.etcd_password),
        .max_request_bytes = (size_t)c->store.etcd_max_request_bytes,
    };

    return crater_store_open_etcd(&o, err);
}

static int open_parts(crater_daemon_t *d,
                      const crater_daemon_opts_t *o,
                      crater_error_t *err)
{
    crater_store_opts_t so = {.no_sync = o && o->no_sync};
    char path[4096];
    crater_dec_t dec;

    /* 0700 whatever existed: the store, tokens and job logs */
    if (mkdir_p(d->data_dir, err) < 0
        || crater_private_dir(d->data_dir, "server.dataDir", err) < 0)
        return -1;
    snprintf(path, sizeof(path), "%s/logs", d->data_dir);
    if (crater_private_dir(path, "server.dataDir", err) < 0)
        return -1;
    if (!(d->kb = crater_kb_create()) || !(d->queue = crater_queue_create())
        || !(d->profiles = crater_profiles_create())
        || !(d->metrics = crater_metrics_create())
        || !(d->router = crater_router_create()))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    crater_dec_init(&dec, NULL, 0, err);
    if (d->cfg.kb_override
        && crater_kb_override(d->kb, &dec, d->cfg.kb_override) < 0)
        return -1;
    if (!(d->sched = crater_sched_create(&d->cfg, d->kb, &sched_env))
        || !(d->twin = crater_sched_create(&d->cfg, d->kb, &sched_env)))
        return crater_errorf(err, CRATER_ENOMEM, "cannot create scheduler");
    if (loop_init(d, err) < 0 || typical_init(d, err) < 0
        || k8s_init(d, err) < 0 || metrics_setup(d, err) < 0)
        return -1;
    snprintf(path, sizeof(path), "%s/decisions.log", d->data_dir);
    if (!(d->declog_path = strdup(path)))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (d->cfg.store.backend == CRATER_STORE_ETCD) {
        if (!(d->store = open_etcd(&d->cfg, err)))
            return -1;
        return o && o->fence_rev > 0 ? crater_store_set_fence(d->store,
                                                              CRATER_LEADER_KEY,
                                                              o->fence_rev,
                                                              err)
                                     : 0;
    }
    snprintf(path, sizeof(path), "%s/crater.db", d->data_dir);
    if (!(d->store = crater_store_open_sqlite(path, &so, err)))
        return -1;
    return 0;
}

/* Write the token file with mode 0600, replacing an old one. */
static int write_token_file(const char *dir,
                            const char *name,
                            const char *tok,
                            crater_error_t *err)
{
    char path[4096];
    int fd;
    ssize_t w;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return crater_errorf(err, CRATER_EIO, "%s: %s", path, strerror(errno));
    w = write(fd, tok, strlen(tok));
    w += write(fd, "\n", 1);
    close(fd);
    return w == (ssize_t)strlen(tok) + 1
               ? 0
               : crater_errorf(err, CRATER_EIO, "%s: short write", path);
}

static int make_token(crater_daemon_t *d,
                      crater_role_t role,
                      const char *scope,
                      const char *name,
                      int64_t expires_ms,
                      bool read_only,
                      char *buf,
                      size_t size,
                      crater_error_t *err)
{
    crater_token_rec_t rec = {.role = role,
                              .created_ms = dnow_ms(),
                              .expires_ms = expires_ms,
                              .read_only = read_only};
    char key[256];
    crater_txn_t *t;
    char *text;
    int rc;

    if (crater_token_generate(buf, size, err) < 0)
        return -1;
    crater_token_hash(buf, rec.hash);
    if (role == CRATER_ROLE_USER)
        rec.tenant = strdup(scope);
    if (role == CRATER_ROLE_AGENT)
        rec.node = strdup(scope);
    if (name)
        rec.name = strdup(name);
    json_t *v = crater_token_rec_to_json(&rec);
    crater_token_rec_t check = {0};

    /* what the loader refuses at the next start is refused now (a
     * tenant 'A' once made craterd unrestartable) */
    if (!v || crater_token_rec_from_json(v, &check, err) < 0) {
        json_decref(v);
        crater_token_rec_free(&rec);
        return v ? -1 : crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    crater_token_rec_free(&check);
    text = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    snprintf(key, sizeof(key), KEY_TOKENS "%s", rec.hash);
    t = crater_txn_create();
    rc = t && text && crater_txn_put(t, key, text, strlen(text), 0, err) == 0
                 && crater_store_commit(d->store, t, NULL, err) == 0
             ? 0
             : -1;
    crater_txn_destroy(t);
    free(text);
    if (rc < 0) {
        crater_token_rec_free(&rec);
        return -1;
    }
    pthread_mutex_lock(&d->mu);
    rc = token_add(d, &rec);
    pthread_mutex_unlock(&d->mu);
    return rc < 0 ? crater_errorf(err, CRATER_ENOMEM, "out of memory") : 0;
}

int crater_daemon_create_token(crater_daemon_t *d,
                               const char *role,
                               const char *scope,
                               char *buf,
                               size_t size,
                               crater_error_t *err)
{
    return crater_daemon_create_token_named(d,
                                            role,
                                            scope,
                                            NULL,
                                            0,
                                            false,
                                            buf,
                                            size,
                                            err);
}

int crater_daemon_create_token_named(crater_daemon_t *d,
                                     const char *role,
                                     const char *scope,
                                     const char *name,
                                     int64_t expires_ms,
                                     bool read_only,
                                     char *buf,
                                     size_t size,
                                     crater_error_t *err)
{
    crater_role_t r;

    if (crater_role_parse(role, &r, err) < 0) {
        snprintf(err->field, sizeof(err->field), "role");
        return -1;
    }
    if (r != CRATER_ROLE_ADMIN && (!scope || !*scope))
        return crater_errorf_field(err,
                                   CRATER_EMISSING,
                                   r == CRATER_ROLE_USER ? "tenant" : "node",
                                   "a %s token needs a %s",
                                   role,
                                   r == CRATER_ROLE_USER ? "tenant" : "node");
    if (read_only && r == CRATER_ROLE_AGENT)
        return crater_errorf_field(err,
                                   CRATER_ECONFLICT,
                                   "readOnly",
                                   "an agent token cannot be read-only (it "
                                   "reports its node's state)");
    return make_token(d, r, scope, name, expires_ms, read_only, buf, size, err);
}

static int first_admin(crater_daemon_t *d, crater_error_t *err)
{
    char tok[CRATER_TOKEN_LEN + 1], path[4096];

    if (d->ntokens > 0)
        return 0;
    /* An empty store in a directory where a cluster lived (its admin
     * token is there) was lost or truncated: starting would be a new,
     * empty cluster that overwrites the token. */
    snprintf(path, sizeof(path), "%s/admin.token", d->data_dir);
    if (access(path, F_OK) == 0)
        return crater_errorf(err,
                             CRATER_EEXIST,
                             "%s: empty store beside an admin.token (the "
                             "store was lost): restore crater.db, or move "
                             "the directory away",
                             d->data_dir);
    if (make_token(d,
                   CRATER_ROLE_ADMIN,
                   NULL,
                   "first admin",
                   0,
                   false,
                   tok,
                   sizeof(tok),
                   err)
            < 0
        || write_token_file(d->data_dir, "admin.token", tok, err) < 0)
        return -1;
    d->admin_token = strdup(tok);
    return 0;
}

static int load_hardware(crater_daemon_t *d,
                         const char *path,
                         crater_error_t *err)
{
    crater_cluster_t *c = NULL;
    int rc = 0;

    if (crater_hw_load(path, d->kb, &c, err) < 0)
        return -1;
    for (size_t i = 0; i < c->nnodes && rc == 0; i++) {
        json_t *hw;
        dnode_t *n;
        if (node_find(d, c->nodes[i].name))
            continue;
        hw = crater_hw_encode_node(&c->nodes[i]);
        n = hw ? node_add(d, hw, NULL, err) : NULL;
        json_decref(hw);
        if (!n)
            rc = -1;
        else
            node_save(d, n);
    }
    crater_cluster_destroy(c);
    return rc;
}

static int start_server(crater_daemon_t *d,
                        const crater_daemon_opts_t *o,
                        crater_error_t *err)
{
    crater_http_opts_t ho = {0};

    ho.listen = o && o->listen ? o->listen : d->cfg.server.listen;
    ho.threads = o ? o->threads : 0;
    ho.max_body = d->cfg.server.max_body_bytes;
    ho.max_conns = d->cfg.server.max_connections;
    ho.max_conns_per_client = d->cfg.server.max_connections_per_client;
    ho.header_timeout_ms = (unsigned)d->cfg.server.header_timeout_ms;
    ho.rate = d->cfg.server.request_rate;
    ho.burst = d->cfg.server.request_burst;
    ho.rate_exempt = api_rate_exempt;
    ho.rate_exempt_arg = d;
    if (api_add_routes(d, err) < 0)
        return -1;
    d->http = crater_http_start(&ho, d->router, err);
    return d->http ? 0 : -1;
}

/* The state from the store, or from a promoted standby's warm copy
 * (borrowed for this call only: persist_list reads it). */
static int load_state(crater_daemon_t *d,
                      const crater_daemon_opts_t *o,
                      crater_error_t *err)
{
    int rc;

    d->warm = o ? o->warm : NULL;
    rc = persist_load(d, err) < 0 || cost_init(d, err) < 0 ? -1 : 0;
    d->warm = NULL;
    return rc;
}

crater_daemon_t *crater_daemon_start(const crater_config_t *cfg,
                                     const crater_daemon_opts_t *o,
                                     crater_error_t *err)
{
    crater_daemon_t *d = calloc(1, sizeof(*d));
    const char *dir;

    if (!d) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->wake, NULL);
    pthread_cond_init(&d->svc_wake, NULL);
    pthread_rwlock_init(&d->prof_lock, NULL);
    d->cfg = *cfg;
    d->next_id = 1;
    dir = o && o->data_dir ? o->data_dir : cfg->server.data_dir;
    d->fenced = o && o->fence_rev > 0;
    if (o && o->advertise_url)
        d->advertise_url = strdup(o->advertise_url);
    if (!(d->data_dir = strdup(dir ? dir : "./var"))
        || (o && o->advertise_url && !d->advertise_url)) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        goto fail;
    }
    if (open_parts(d, o, err) < 0 || load_state(d, o, err) < 0
        || cost_metrics_setup(d, err) < 0 || ops_metrics_setup(d, err) < 0
        || audit_init(d, err) < 0 || first_admin(d, err) < 0
        || (o && o->hardware && load_hardware(d, o->hardware, err) < 0)
        || start_server(d, o, err) < 0 || loop_start(d, err) < 0
        || services_start(d, o ? o->listen : NULL, err) < 0)
        goto fail;
    pthread_mutex_lock(&d->mu);
    d->ready = true;
    loop_kick(d);
    pthread_mutex_unlock(&d->mu);
    return d;
fail:
    crater_daemon_stop(d);
    return NULL;
}

uint16_t crater_daemon_port(const crater_daemon_t *d)
{
    return d->http ? crater_http_port(d->http) : 0;
}

uint16_t crater_daemon_gateway_port(const crater_daemon_t *d)
{
    return service_gateway_port(d);
}

const char *crater_daemon_admin_token(const crater_daemon_t *d)
{
    return d->admin_token;
}

static void free_state(crater_daemon_t *d)
{
    free(d->arrays);
    for (size_t i = 0; i < d->njobs; i++)
        job_free(d->jobs[i]);
    free(d->jobs);
    free(d->save_ids);
    for (size_t i = 0; i < d->nnodes; i++) {
        dnode_t *n = d->nodes[i];
        for (size_t k = 0; k < n->nwork; k++)
            json_decref(n->work[k].item);
        free(n->work);
        json_decref(n->hw);
        crater_cluster_destroy(n->model);
        free(n->reason);
        free(n->addr);
        free(n->hw_change);
        free(n->held);
        free(n->name);
        free(n);
    }
    free(d->nodes);
    for (size_t i = 0; i < d->ntenants; i++) {
        free(d->tenants[i]->name);
        free(d->tenants[i]);
    }
    free(d->tenants);
    for (size_t i = 0; i < d->ntokens; i++) {
        crater_token_rec_free(&d->tokens[i]->rec);
        free(d->tokens[i]);
    }
    free(d->tokens);
    for (size_t i = 0; i < d->nrevoked; i++) {
        crater_token_rec_free(&d->revoked[i]->rec);
        free(d->revoked[i]);
    }
    free(d->revoked);
}

void crater_daemon_step_down(crater_daemon_t *d)
{
    crater_error_t err;

    if (!d || !d->fenced || !d->store)
        return;
    pthread_mutex_lock(&d->mu);
    d->deposed = true; /* GET /api/v1/leader stops saying "leader" */
    pthread_mutex_unlock(&d->mu);
    (void)crater_store_set_fence(d->store, CRATER_LEADER_KEY, -1, &err);
}

void crater_daemon_pause(crater_daemon_t *d, bool on)
{
    int64_t now = dnow_ms(), since;
    bool was;

    if (!d)
        return;
    pthread_mutex_lock(&d->mu);
    was = d->paused;
    since = d->paused_ms;
    if (on && !d->paused)
        d->paused_ms = now;
    if (!on && d->paused)
        for (size_t i = 0; i < d->nnodes; i++) /* no heartbeat could come */
            d->nodes[i]->last_hb_ms += now - d->paused_ms;
    d->paused = on;
    d->dirty |= !on; /* a pass at once: what came before the pause */
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->mu);
    if (on == was)
        return;
    if (on)
        crater_log(LOG_WARNING,
                   "leader: paused (not sure it still leads): the API "
                   "answers 503, nothing is scheduled");
    else
        crater_log(LOG_INFO,
                   "leader: resumed after %lld ms",
                   (long long)(now - since));
}

void crater_daemon_stop(crater_daemon_t *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->mu);
    d->stopping = true;
    d->ready = false;
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->mu);
    if (d->sched_started)
        pthread_join(d->sched_thread, NULL);
    /* the API first: GET /metrics renders the gateway's families, which
     * services_stop() frees (TSan, test_history) */
    crater_http_stop(d->http);
    services_stop(d);
    crater_store_close(d->store);
    if (d->declog)
        fclose(d->declog);
    free_state(d);
    crater_router_destroy(d->router);
    crater_metrics_destroy(d->metrics);
    crater_pass_destroy(d->pass);
    free(d->share_buf);
    free(d->ends_buf);
    typical_free(d);
    k8s_free(d);
    cost_free(d);
    audit_free(d);
    ops_metrics_free(d);
    crater_sched_destroy(d->sched);
    crater_sched_destroy(d->twin);
    crater_queue_destroy(d->queue);
    tenant_profiles_free(d);
    crater_profiles_destroy(d->profiles);
    crater_kb_destroy(d->kb);
    free(d->declog_path);
    free(d->data_dir);
    free(d->advertise_url);
    free(d->admin_token);
    pthread_cond_destroy(&d->wake);
    pthread_cond_destroy(&d->svc_wake);
    pthread_rwlock_destroy(&d->prof_lock);
    pthread_mutex_destroy(&d->mu);
    free(d);
}
