/* api_nodes.c - /api/v1/nodes and /api/v1/resources.
 *
 * Cordon stops new placements on a node; drain also stops its jobs, which
 * are requeued when their agent reports them gone (preemptible or not: the
 * operator asked). Resources are the node's devices seen one by one: every
 * GPU by its UUID, each NUMA node's CPUs and memory, each disk; their
 * ids are the GPU UUID or "<node>/cpu<numa>", "<node>/mem<numa>",
 * "<node>/disk/<device>". force-release (admin) takes a GPU back at once:
 * its jobs are told to stop and requeued, and the core forgets their
 * charges immediately.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/internal.h"

static dnode_t *named_node(crater_daemon_t *d,
                           crater_http_req_t *r,
                           crater_http_resp_t *resp)
{
    const char *name = crater_http_param(r, "name");
    dnode_t *n = name ? node_find(d, name) : NULL;

    if (!n)
        api_errorf(resp,
                   CRATER_ENOENT,
                   "name",
                   "no node '%s'",
                   name ? name : "");
    return n;
}

/* A user sees the ids of its own tenant's jobs on a node, not the other
 * tenants' (their existence is not the user's to learn). */
static json_t *for_principal(crater_daemon_t *d,
                             json_t *node,
                             const principal_t *p)
{
    json_t *jobs = json_object_get(node, "jobs"), *mine, *v;
    size_t i;

    if (p->role != CRATER_ROLE_USER || !json_is_array(jobs))
        return node;
    mine = json_array();
    json_array_foreach(jobs, i, v)
    {
        const char *id = json_string_value(v);
        djob_t *j = id ? job_find(d, strtoull(id, NULL, 10)) : NULL;
        if (j && j->tenant && p->tenant && strcmp(j->tenant, p->tenant) == 0)
            json_array_append(mine, v);
    }
    json_object_set_new(node, "jobs", mine);
    return node;
}

/* ?hardware=1 (admin: it shows the machines' topology): each node with
 * the hardware-file Node document it registered with, as `crater sim
 * whatif` needs to rebuild the cluster. */
static int want_hardware(crater_http_req_t *r,
                         crater_http_resp_t *resp,
                         const principal_t *p)
{
    const char *v = crater_http_query(r, "hardware");

    if (!v || !strcmp(v, "0") || !strcmp(v, "false"))
        return 0;
    if (strcmp(v, "1") && strcmp(v, "true")) {
        api_errorf(resp,
                   CRATER_EINVAL,
                   "hardware",
                   "hardware: expected 1 or 0, got '%s'",
                   v);
        return -1;
    }
    return api_require_admin(p, resp) < 0 ? -1 : 1;
}

static void with_hardware(crater_daemon_t *d, json_t *items)
{
    json_t *o;
    size_t i;

    json_array_foreach(items, i, o)
    {
        dnode_t *n =
            node_find(d, json_string_value(json_object_get(o, "name")));
        if (n && n->hw)
            json_object_set(o, "hardware", n->hw);
    }
}

static void h_nodes(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    principal_t p;
    json_t *items;
    int hw;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0
        && (hw = want_hardware(r, resp, &p)) >= 0) {
        json_t *n;
        size_t i;
        items = nodes_to_json(d);
        json_array_foreach(items, i, n) for_principal(d, n, &p);
        if (hw)
            with_hardware(d, items);
        crater_http_json(resp,
                         200,
                         json_pack("{s:o, s:n}", "items", items, "next"));
    }
    pthread_mutex_unlock(&d->mu);
}

static void h_node(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    principal_t p;
    dnode_t *n;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0 && (n = named_node(d, r, resp)))
        crater_http_json(resp, 200, for_principal(d, node_to_json(d, n), &p));
    pthread_mutex_unlock(&d->mu);
}

/* Stop a job so that it is requeued when its agent reports it gone. */
static void evict(crater_daemon_t *d, djob_t *j, const char *reason)
{
    crater_proto_notice_t was = j->stop_notice;

    /* a job on a silent node is not waited for; the others stop first,
     * told it is a drain (the notice rides on the stop order) */
    if (j->state == JS_LOST) {
        job_apply(d, j, JE_REQUEUE, reason);
        return;
    }
    j->stop_notice = CRATER_NOTICE_DRAIN;
    if (job_apply(d, j, JE_PREEMPT, reason) < 0)
        j->stop_notice = was;
}

static void drain(crater_daemon_t *d, dnode_t *n, const char *why)
{
    char reason[320];

    snprintf(reason,
             sizeof(reason),
             "node %s drained%s%s",
             n->name,
             *why ? ": " : "",
             why);
    n->draining = true;
    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        if (j->placed && job_on_node(j, n->sid))
            evict(d, j, reason);
    }
}

static void set_cordon(crater_http_req_t *r,
                       crater_http_resp_t *resp,
                       crater_daemon_t *d,
                       int what)
{
    char *why = NULL;
    principal_t p;
    dnode_t *n;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0 || api_require_admin(&p, resp) < 0
        || !(n = named_node(d, r, resp)) || api_body_reason(r, &why, resp) < 0)
        goto out;
    n->cordoned = what != 0;
    if (!what)
        n->draining = false;
    free(n->reason);
    n->reason = why;
    why = NULL;
    crater_sched_set_cordoned(d->sched, n->sid, n->cordoned);
    loop_capacity_changed(d);
    if (what == 2)
        drain(d, n, n->reason);
    node_save(d, n);
    declog_write(d,
                 json_pack("{s:I, s:s, s:s, s:s}",
                           "time_ms",
                           (json_int_t)dnow_ms(),
                           "decision",
                           what == 2   ? "node-drain"
                           : what == 1 ? "node-cordon"
                                       : "node-uncordon",
                           "node",
                           n->name,
                           "reason",
                           n->reason));
    loop_kick(d);
    crater_http_json(resp, 200, node_to_json(d, n));
    api_answer_when_stored(d, r, resp);
out:
    free(why);
    pthread_mutex_unlock(&d->mu);
}

static void h_cordon(crater_http_req_t *r, crater_http_resp_t *resp, void *a)
{
    set_cordon(r, resp, a, 1);
}

static void h_uncordon(crater_http_req_t *r, crater_http_resp_t *resp, void *a)
{
    set_cordon(r, resp, a, 0);
}

static void h_drain(crater_http_req_t *r, crater_http_resp_t *resp, void *a)
{
    set_cordon(r, resp, a, 2);
}

/* ---- resources ------------------------------------------------------------
 */

typedef struct res_filter {
    const char *type; /* NULL = all */
    const char *node;
} res_filter_t;

static int parse_res_filter(const char *s,
                            res_filter_t *f,
                            char *buf,
                            size_t n,
                            crater_http_resp_t *resp)
{
    char *save = NULL;

    memset(f, 0, sizeof(*f));
    if (!s)
        return 0;
    snprintf(buf, n, "%s", s);
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        if (strncmp(t, "type:", 5) == 0)
            f->type = t + 5;
        else if (strncmp(t, "node:", 5) == 0)
            f->node = t + 5;
        else {
            api_errorf(resp,
                       CRATER_EINVAL,
                       "filter",
                       "unknown filter '%s' (type:gpu|cpu|memory|disk,"
                       " node:NAME)",
                       t);
            return -1;
        }
    }
    if (f->type && strcmp(f->type, "gpu") && strcmp(f->type, "cpu")
        && strcmp(f->type, "memory") && strcmp(f->type, "disk")) {
        api_errorf(resp,
                   CRATER_EINVAL,
                   "filter",
                   "unknown resource type '%s' (gpu, cpu, memory, disk)",
                   f->type);
        return -1;
    }
    return 0;
}

static void gpu_use(
    crater_daemon_t *d, const dnode_t *n, size_t g, uint64_t *bytes, int *tasks)
{
    *bytes = 0;
    *tasks = 0;
    for (size_t i = 0; i < d->njobs; i++) {
        const djob_t *j = d->jobs[i];
        for (uint32_t r = 0; j->placed && r < job_ntasks(j); r++) {
            const crater_placement_t *pl = job_task_pl(j, r);
            for (uint32_t k = 0; pl->node == n->sid && k < pl->ngpus; k++)
                if (pl->gpu[k] == g) {
                    *bytes += (uint64_t)pl->gpu_mib[k] << 20;
                    (*tasks)++;
                }
        }
    }
}

static json_t *gpu_caps(const crater_gpu_t *g)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:I, s:i, s:i, s:I, s:I, s:f,"
                     " s:s?, s:s?, s:i, s:I}",
                     "type",
                     "gpu",
                     "uuid",
                     g->uuid ? g->uuid : "",
                     "vendor",
                     g->vendor ? g->vendor : "",
                     "model",
                     g->model ? g->model : "",
                     "memory_bytes",
                     (json_int_t)g->memory_bytes,
                     "sm_count",
                     (int)g->sm_count,
                     "compute_capability",
                     (int)g->compute_cap,
                     "hbm_bandwidth_bytes_per_s",
                     (json_int_t)g->hbm_bandwidth,
                     "nvlink_bandwidth_bytes_per_s",
                     (json_int_t)g->nvlink_bandwidth,
                     "fp16_tflops",
                     g->fp16_tflops,
                     "pci_bus_id",
                     g->pci_bus_id,
                     "upstream",
                     g->upstream,
                     "numa_node",
                     g->numa_node,
                     "nvlink_peers",
                     (json_int_t)g->nvlink_peers);
}

static void add_gpus(crater_daemon_t *d,
                     const dnode_t *n,
                     const crater_node_t *cn,
                     json_t *items)
{
    for (size_t g = 0; g < cn->ngpus; g++) {
        uint64_t used;
        int tasks;
        json_t *o = gpu_caps(&cn->gpus[g]);
        gpu_use(d, n, g, &used, &tasks);
        json_object_set_new(o, "node", json_string(n->name));
        json_object_set_new(o, "index", json_integer((json_int_t)g));
        json_object_set_new(o, "allocated_bytes", json_integer(used));
        json_object_set_new(o, "tasks", json_integer(tasks));
        /* the agent's last sample: what the dashboard's heat map shows */
        json_object_set_new(o,
                            "measured",
                            json_pack("{s:f, s:I}",
                                      "util",
                                      n->util.gpu[g],
                                      "memory_used_bytes",
                                      (json_int_t)n->util.gpu_used_mib[g]
                                          << 20));
        json_array_append_new(items, o);
    }
}

static void add_host(const dnode_t *n,
                     const crater_node_t *cn,
                     const res_filter_t *f,
                     json_t *items)
{
    char id[512];
    bool all = !f->type;

    for (size_t i = 0; i < cn->ncpus && (all || !strcmp(f->type, "cpu")); i++) {
        snprintf(id, sizeof(id), "%s/cpu%d", n->name, cn->cpus[i].numa_node);
        json_array_append_new(items,
                              json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i}",
                                        "type",
                                        "cpu",
                                        "uuid",
                                        id,
                                        "node",
                                        n->name,
                                        "model",
                                        cn->cpus[i].model ? cn->cpus[i].model
                                                          : "",
                                        "numa_node",
                                        cn->cpus[i].numa_node,
                                        "cores",
                                        (int)cn->cpus[i].cores,
                                        "threads",
                                        (int)cn->cpus[i].threads));
    }
    for (size_t i = 0; i < cn->nmems && (all || !strcmp(f->type, "memory"));
         i++) {
        snprintf(id, sizeof(id), "%s/mem%d", n->name, cn->mems[i].numa_node);
        json_array_append_new(items,
                              json_pack("{s:s, s:s, s:s, s:i, s:I, s:I}",
                                        "type",
                                        "memory",
                                        "uuid",
                                        id,
                                        "node",
                                        n->name,
                                        "numa_node",
                                        cn->mems[i].numa_node,
                                        "capacity_bytes",
                                        (json_int_t)cn->mems[i].capacity,
                                        "bandwidth_bytes_per_s",
                                        (json_int_t)cn->mems[i].bandwidth));
    }
    for (size_t i = 0; i < cn->nstorage && (all || !strcmp(f->type, "disk"));
         i++) {
        const crater_storage_t *s = &cn->storage[i];
        snprintf(id, sizeof(id), "%s/disk/%s", n->name, s->device);
        json_array_append_new(items,
                              json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, "
                                        "s:I, s:b}",
                                        "type",
                                        "disk",
                                        "uuid",
                                        id,
                                        "node",
                                        n->name,
                                        "device",
                                        s->device,
                                        "interface",
                                        crater_iface_name(s->iface),
                                        "capacity_bytes",
                                        (json_int_t)s->capacity,
                                        "iops",
                                        (json_int_t)s->iops,
                                        "bandwidth_bytes_per_s",
                                        (json_int_t)s->bandwidth,
                                        "rotational",
                                        s->rotational));
    }
}

static void h_resources(crater_http_req_t *r,
                        crater_http_resp_t *resp,
                        void *arg)
{
    crater_daemon_t *d = arg;
    char buf[256];
    res_filter_t f;
    principal_t p;
    json_t *items;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0
        || parse_res_filter(crater_http_query(r, "filter"),
                            &f,
                            buf,
                            sizeof(buf),
                            resp)
               < 0)
        goto out;
    items = json_array();
    for (size_t i = 0; i < d->nnodes; i++) {
        const dnode_t *n = d->nodes[i];
        const crater_node_t *cn = node_model(d, n->sid);
        if (f.node && strcmp(f.node, n->name) != 0)
            continue;
        if (!f.type || !strcmp(f.type, "gpu"))
            add_gpus(d, n, cn, items);
        add_host(n, cn, &f, items);
    }
    crater_http_json(resp, 200, json_pack("{s:o}", "items", items));
out:
    pthread_mutex_unlock(&d->mu);
}

/* GPU by UUID: node and index. */
static int find_gpu(crater_daemon_t *d,
                    const char *uuid,
                    dnode_t **n,
                    size_t *idx)
{
    for (size_t i = 0; i < d->nnodes; i++) {
        const crater_node_t *cn = node_model(d, d->nodes[i]->sid);
        for (size_t g = 0; g < cn->ngpus; g++)
            if (cn->gpus[g].uuid && strcmp(cn->gpus[g].uuid, uuid) == 0) {
                *n = d->nodes[i];
                *idx = g;
                return 0;
            }
    }
    return -1;
}

static json_t *host_caps(crater_daemon_t *d, const char *id)
{
    json_t *items = json_array(), *v, *found = NULL;
    res_filter_t f = {0};
    size_t i;

    for (size_t k = 0; k < d->nnodes; k++)
        add_host(d->nodes[k], node_model(d, d->nodes[k]->sid), &f, items);
    json_array_foreach(items, i, v)
    {
        if (strcmp(json_string_value(json_object_get(v, "uuid")), id) == 0)
            found = json_incref(v);
    }
    json_decref(items);
    return found;
}

static void h_caps(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    const char *id = crater_http_param(r, "uuid");
    principal_t p;
    dnode_t *n;
    size_t g;
    json_t *o;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0)
        goto out;
    if (find_gpu(d, id, &n, &g) == 0) {
        o = gpu_caps(&node_model(d, n->sid)->gpus[g]);
        json_object_set_new(o, "node", json_string(n->name));
        crater_http_json(resp, 200, o);
    } else if ((o = host_caps(d, id)))
        crater_http_json(resp, 200, o);
    else
        api_errorf(resp, CRATER_ENOENT, "uuid", "no resource '%s'", id);
out:
    pthread_mutex_unlock(&d->mu);
}

static json_t *force_release(crater_daemon_t *d,
                             dnode_t *n,
                             size_t g,
                             const char *why)
{
    json_t *released = json_array();
    char reason[320];

    snprintf(reason,
             sizeof(reason),
             "GPU force-released by admin%s%s",
             *why ? ": " : "",
             why);
    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        bool on = false;
        for (uint32_t r = 0; j->placed && r < job_ntasks(j); r++) {
            const crater_placement_t *pl = job_task_pl(j, r);
            for (uint32_t k = 0; pl->node == n->sid && k < pl->ngpus; k++)
                on |= pl->gpu[k] == g;
        }
        if (!on)
            continue;
        j->stop_notice = CRATER_NOTICE_DRAIN; /* the task may checkpoint */
        node_send_stop(d, j, reason);
        j->stop_notice = CRATER_NOTICE_NONE;
        job_apply(d, j, JE_REQUEUE, reason);
        json_array_append_new(released, json_sprintf("%" PRIu64, j->id));
    }
    loop_kick(d);
    return released;
}

static void h_force_release(crater_http_req_t *r,
                            crater_http_resp_t *resp,
                            void *arg)
{
    crater_daemon_t *d = arg;
    const char *uuid, *why;
    json_t *body = NULL;
    principal_t p;
    dnode_t *n;
    size_t g;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0 || api_require_admin(&p, resp) < 0
        || api_body_json(r, &body, resp) < 0)
        goto out;
    uuid = json_string_value(json_object_get(body, "uuid"));
    why = json_string_value(json_object_get(body, "reason"));
    if (!uuid)
        api_errorf(resp,
                   CRATER_EMISSING,
                   "uuid",
                   "uuid: the GPU UUID to release is required");
    else if (find_gpu(d, uuid, &n, &g) < 0)
        api_errorf(resp, CRATER_ENOENT, "uuid", "no GPU '%s'", uuid);
    else
        crater_http_json(resp,
                         200,
                         json_pack("{s:s, s:o}",
                                   "uuid",
                                   uuid,
                                   "requeued",
                                   force_release(d, n, g, why ? why : "")));
out:
    json_decref(body);
    pthread_mutex_unlock(&d->mu);
}

int api_nodes_routes(crater_daemon_t *d, crater_error_t *err)
{
    static const api_route_t routes[] = {
        {"GET", "/api/v1/nodes", h_nodes},
        {"GET", "/api/v1/nodes/{name}", h_node},
        {"POST", "/api/v1/nodes/{name}/cordon", h_cordon},
        {"POST", "/api/v1/nodes/{name}/uncordon", h_uncordon},
        {"POST", "/api/v1/nodes/{name}/drain", h_drain},
        {"GET", "/api/v1/resources", h_resources},
        {"GET", "/api/v1/resources/{uuid}/capabilities", h_caps},
        {"POST", "/api/v1/resources/force-release", h_force_release},
    };

    return api_register(d, routes, sizeof(routes) / sizeof(routes[0]), err);
}
