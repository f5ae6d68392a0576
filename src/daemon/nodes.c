/* nodes.c - craterd's node registry: nodes known from agents (or a
 * hardware file), their health from heartbeats, and the work channel that
 * carries start/stop orders to each node's agent.
 *
 * The work channel is a per-node list of items numbered by a sequence
 * number. An agent long-polls GET /agents/{node}/work?after=SEQ: items at
 * or below SEQ are acknowledged and dropped; if items remain they are
 * returned at once, otherwise the request is suspended (holding no server
 * thread) until an item is pushed or its wait expires. Pushing an item
 * completes the suspended poll in the same critical section, so a task
 * reaches its agent as soon as its binding is durable. Re-sending is safe:
 * the agent keys tasks by job id and attempt.
 *
 * Health: a node whose last heartbeat is older than heartbeatTimeout
 * becomes NotReady; its jobs are handled by agent.migrationPolicy (see
 * node_health_tick). Callers hold d->mu.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/hwfile.h"
#include "crater/log.h"
#include "crater/proto.h"
#include "crater/units.h"
#include "daemon/internal.h"

dnode_t *node_find(crater_daemon_t *d, const char *name)
{
    for (size_t i = 0; i < d->nnodes; i++)
        if (strcmp(d->nodes[i]->name, name) == 0)
            return d->nodes[i];
    return NULL;
}

/* Nodes are added to the core and to d->nodes together, so a node's core id
 * is its index; the scan is only a fallback. */
dnode_t *node_by_sid(crater_daemon_t *d, uint32_t sid)
{
    if (sid < d->nnodes && d->nodes[sid]->sid == sid)
        return d->nodes[sid];
    for (size_t i = 0; i < d->nnodes; i++)
        if (d->nodes[i]->sid == sid)
            return d->nodes[i];
    return NULL;
}

static int nodes_grow(crater_daemon_t *d)
{
    size_t cap;
    dnode_t **n;

    if (d->nnodes < d->capnodes)
        return 0;
    cap = d->capnodes ? d->capnodes * 2 : 16;
    n = realloc(d->nodes, cap * sizeof(*n));
    if (!n)
        return -1;
    d->nodes = n;
    d->capnodes = cap;
    return 0;
}

const crater_node_t *node_model(crater_daemon_t *d, uint32_t sid)
{
    dnode_t *n = node_by_sid(d, sid);

    return n ? &n->model->nodes[0] : NULL;
}

/* hw: a Node document (or a Cluster of one node) in the hardware-file
 * schema; expect: the name it must have, or NULL. */
dnode_t *node_add(crater_daemon_t *d,
                  json_t *hw,
                  const char *expect,
                  crater_error_t *err)
{
    crater_cluster_t *c = NULL;
    crater_dec_t dec;
    dnode_t *n = NULL;
    int sid;

    crater_dec_init(&dec, NULL, 0, err);
    if (crater_hw_decode(&dec, hw, d->kb, &c) < 0)
        return NULL;
    if (c->nnodes != 1) {
        crater_errorf_field(err,
                            CRATER_EINVAL,
                            "node",
                            "expected one Node document, got %zu nodes",
                            c->nnodes);
        goto out;
    }
    if (expect && strcmp(c->nodes[0].name, expect) != 0) {
        crater_errorf_field(err,
                            CRATER_ECONFLICT,
                            "node.name",
                            "node.name '%s' does not match the path's '%s'",
                            c->nodes[0].name,
                            expect);
        goto out;
    }
    if (node_find(d, c->nodes[0].name)) {
        crater_errorf_field(err,
                            CRATER_EEXIST,
                            "metadata.name",
                            "node '%s' is already registered",
                            c->nodes[0].name);
        goto out;
    }
    if (nodes_grow(d) < 0 || !(n = calloc(1, sizeof(*n)))
        || !(n->name = strdup(c->nodes[0].name))) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        goto fail;
    }
    if ((sid = crater_sched_add_node(d->sched, &c->nodes[0], err)) < 0)
        goto fail;
    /* admission's empty twin; without it a job is only not refused early */
    if (crater_sched_add_node(d->twin, &c->nodes[0], NULL) < 0)
        crater_log(LOG_WARNING,
                   "node %s: admission will not know it",
                   c->nodes[0].name);
    typical_nodes_changed(d);
    n->sid = (uint32_t)sid;
    n->hw = crater_hw_encode_node(&c->nodes[0]);
    n->model = c;
    c = NULL;
    crater_sched_set_ready(d->sched, n->sid, false);
    d->nodes[d->nnodes++] = n;
    goto out;
fail:
    if (n)
        free(n->name);
    free(n);
    n = NULL;
out:
    crater_cluster_destroy(c);
    return n;
}

int node_save(crater_daemon_t *d, dnode_t *n)
{
    char key[512];
    json_t *v = json_pack("{s:O, s:b, s:b, s:s}",
                          "hardware",
                          n->hw,
                          "cordoned",
                          n->cordoned,
                          "draining",
                          n->draining,
                          "reason",
                          n->reason ? n->reason : "");

    snprintf(key, sizeof(key), KEY_NODES "%s", n->name);
    return persist_put_json(d, key, v, NULL, NULL);
}

/* Total GPU memory of a node. */
static uint64_t gpu_mem_of(const crater_node_t *n)
{
    uint64_t m = 0;

    for (size_t i = 0; i < n->ngpus; i++)
        m += n->gpus[i].memory_bytes;
    return m;
}

/* "8 GPUs (640Gi), 224 CPUs, 2Ti memory" into buf. */
static const char *capacity_text(const crater_node_t *n, char *buf, size_t size)
{
    char gm[32], cpu[32], mem[32];

    crater_format_quantity(gpu_mem_of(n), CRATER_DIM_BYTES, gm, sizeof(gm));
    crater_format_quantity(crater_node_cpu_milli(n),
                           CRATER_DIM_CPU,
                           cpu,
                           sizeof(cpu));
    crater_format_quantity(crater_node_memory_bytes(n),
                           CRATER_DIM_BYTES,
                           mem,
                           sizeof(mem));
    snprintf(buf,
             size,
             "%zu GPUs (%s), %s CPU, %s memory",
             n->ngpus,
             gm,
             cpu,
             mem);
    return buf;
}

void node_check_hardware(crater_daemon_t *d, dnode_t *n, json_t *hw)
{
    const crater_node_t *was = &n->model->nodes[0];
    crater_cluster_t *c = NULL;
    crater_error_t err = {0};
    crater_dec_t dec;
    char text[CRATER_ERROR_TEXT + 64];

    crater_dec_init(&dec, NULL, 0, &err);
    if (!hw || crater_hw_decode(&dec, hw, d->kb, &c) < 0 || c->nnodes != 1) {
        snprintf(text, sizeof(text), "unreadable hardware: %s", err.text);
    } else {
        const crater_node_t *now = &c->nodes[0];
        if (now->ngpus == was->ngpus && gpu_mem_of(now) == gpu_mem_of(was)
            && crater_node_cpu_milli(now) == crater_node_cpu_milli(was)
            && crater_node_memory_bytes(now) == crater_node_memory_bytes(was))
            text[0] = '\0';
        else {
            char now_s[160], was_s[160];
            snprintf(text,
                     sizeof(text),
                     "the agent reports %s; the node keeps its registered %s",
                     capacity_text(now, now_s, sizeof(now_s)),
                     capacity_text(was, was_s, sizeof(was_s)));
        }
    }
    crater_cluster_destroy(c);
    if (!text[0] || (n->hw_change && !strcmp(n->hw_change, text))) {
        if (!text[0]) {
            free(n->hw_change);
            n->hw_change = NULL;
        }
        return;
    }
    crater_log(LOG_WARNING, "node %s: hardware changed: %s", n->name, text);
    free(n->hw_change);
    n->hw_change = strdup(text);
}

/* ---- JSON ---------------------------------------------------------------- */

/* What jobs hold on a node. gpu_mib[i] sums the charges on GPU i, which
 * under overcommit (scheduler.overcommitRatio > 1) may exceed its
 * memory: node_json() shows allocation against physical memory and the
 * excess apart (doc/gpu-sharing.md), never a share above 100%. */
typedef struct alloc {
    uint64_t gpu_mem, cpu, mem;
    uint64_t gpu_mib[CRATER_MAX_GPUS_PER_NODE];
} alloc_t;

static size_t node_index(crater_daemon_t *d, const dnode_t *n)
{
    size_t i = 0;

    if (n->sid < d->nnodes && d->nodes[n->sid] == n)
        return n->sid;
    while (i + 1 < d->nnodes && d->nodes[i] != n)
        i++;
    return i;
}

typedef struct node_agg {
    alloc_t a;
    json_t *jobs; /* ids of the jobs placed there */
} node_agg_t;

/* Add task r of j to its node's allocation and jobs. */
static void aggregate_task(crater_daemon_t *d,
                           node_agg_t *agg,
                           const djob_t *j,
                           uint32_t r,
                           char id[24])
{
    const crater_placement_t *pl = job_task_pl(j, r);
    dnode_t *n = node_by_sid(d, pl->node);
    const char *last;
    node_agg_t *g;

    if (!n)
        return;
    g = &agg[node_index(d, n)];
    for (uint32_t k = 0; k < pl->ngpus; k++) {
        g->a.gpu_mem += (uint64_t)pl->gpu_mib[k] << 20;
        g->a.gpu_mib[pl->gpu[k]] += pl->gpu_mib[k];
    }
    g->a.cpu += pl->cpu_milli;
    g->a.mem += pl->mem_bytes;
    snprintf(id, 24, "%" PRIu64, j->id);
    last = json_string_value(
        json_array_get(g->jobs, json_array_size(g->jobs) - 1));
    if (!last || strcmp(last, id) != 0) /* two replicas on one node */
        json_array_append_new(g->jobs, json_string(id));
}

/* Allocation and jobs of every node in one pass over the jobs: O(jobs +
 * nodes), not O(jobs x nodes). Indexed like d->nodes. */
static node_agg_t *aggregate(crater_daemon_t *d)
{
    node_agg_t *agg = calloc(d->nnodes ? d->nnodes : 1, sizeof(*agg));
    char id[24];

    if (!agg)
        return NULL;
    for (size_t i = 0; i < d->nnodes; i++)
        agg[i].jobs = json_array();
    for (size_t i = 0; i < d->njobs; i++)
        for (uint32_t r = 0; d->jobs[i]->placed && r < job_ntasks(d->jobs[i]);
             r++)
            aggregate_task(d, agg, d->jobs[i], r, id);
    return agg;
}

static void aggregate_free(crater_daemon_t *d, node_agg_t *agg)
{
    for (size_t i = 0; agg && i < d->nnodes; i++)
        json_decref(agg[i].jobs);
    free(agg);
}

static uint64_t node_gpu_mem(const crater_node_t *cn)
{
    uint64_t m = 0;

    for (size_t i = 0; i < cn->ngpus; i++)
        m += cn->gpus[i].memory_bytes;
    return m;
}

static double frac(uint64_t a, uint64_t b)
{
    return b ? (double)a / (double)b : 0.0;
}

/* GPUs holding any task, and the bytes charged beyond physical memory
 * summed over the GPUs (0 without overcommit). */
static uint64_t gpus_held(const crater_node_t *cn, const alloc_t *a)
{
    uint64_t n = 0;

    for (size_t i = 0; i < cn->ngpus && i < CRATER_MAX_GPUS_PER_NODE; i++)
        n += a->gpu_mib[i] != 0;
    return n;
}

static uint64_t gpu_over(const crater_node_t *cn, const alloc_t *a)
{
    uint64_t over = 0;

    for (size_t i = 0; i < cn->ngpus && i < CRATER_MAX_GPUS_PER_NODE; i++) {
        uint64_t held = a->gpu_mib[i] << 20;
        if (held > cn->gpus[i].memory_bytes)
            over += held - cn->gpus[i].memory_bytes;
    }
    return over;
}

/* The node's "allocated" and "utilization" objects (see alloc_t). */
static json_t *alloc_json(const crater_node_t *cn, const alloc_t *a)
{
    uint64_t gmem = node_gpu_mem(cn), held = gpus_held(cn, a);
    uint64_t over = gpu_over(cn, a);

    return json_pack("{s:{s:I, s:I, s:I, s:I, s:I},"
                     " s:{s:f, s:f, s:f, s:f, s:f, s:f}}",
                     "allocated",
                     "gpus",
                     (json_int_t)held,
                     "gpu_memory_bytes",
                     (json_int_t)a->gpu_mem,
                     "gpu_memory_overcommitted_bytes",
                     (json_int_t)over,
                     "cpu_millis",
                     (json_int_t)a->cpu,
                     "memory_bytes",
                     (json_int_t)a->mem,
                     "utilization",
                     "gpu",
                     frac(held, cn->ngpus),
                     "gpu_memory",
                     frac(a->gpu_mem - over, gmem),
                     "gpu_memory_overcommit",
                     frac(over, gmem),
                     "cpu",
                     frac(a->cpu, crater_node_cpu_milli(cn)),
                     "memory",
                     frac(a->mem, crater_node_memory_bytes(cn)),
                     "disk",
                     0.0);
}

const char *node_state_name(const dnode_t *n)
{
    if (!n->registered)
        return "Unknown";
    return n->ready ? "Ready" : "NotReady";
}

/* The container runtimes the node's agent advertised (its
 * CRATER_LABEL_RUNTIMES label, comma-separated): ["podman"] or []. */
static json_t *runtimes_json(const crater_node_t *cn)
{
    json_t *a = json_array();
    char buf[128], *save = NULL, *w;

    for (size_t i = 0; a && i < cn->nlabels; i++) {
        if (strcmp(cn->labels[i].key, CRATER_LABEL_RUNTIMES) != 0
            || !cn->labels[i].value)
            continue;
        snprintf(buf, sizeof(buf), "%s", cn->labels[i].value);
        for (w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save))
            json_array_append_new(a, json_string(w));
    }
    return a;
}

static json_t *node_json(crater_daemon_t *d, const dnode_t *n, node_agg_t *g)
{
    const crater_node_t *cn = node_model(d, n->sid);
    json_t *jobs = g && g->jobs ? json_incref(g->jobs) : json_array();
    alloc_t a = g ? g->a : (alloc_t){0};
    json_t *o;
    double gu = 0;

    for (size_t i = 0; i < cn->ngpus; i++)
        gu += n->util.gpu[i];
    o = json_pack("{s:s, s:s, s:b, s:b, s:s, s:I, s:{s:I, s:I, s:I, s:I},"
                  " s:{s:f, s:f, s:f, s:f}, s:o}",
                  "name",
                  n->name,
                  "state",
                  node_state_name(n),
                  "cordoned",
                  n->cordoned,
                  "draining",
                  n->draining,
                  "reason",
                  n->reason ? n->reason : "",
                  "last_heartbeat_ms",
                  (json_int_t)n->last_hb_ms,
                  "capacity",
                  "gpus",
                  (json_int_t)cn->ngpus,
                  "gpu_memory_bytes",
                  (json_int_t)node_gpu_mem(cn),
                  "cpu_millis",
                  (json_int_t)crater_node_cpu_milli(cn),
                  "memory_bytes",
                  (json_int_t)crater_node_memory_bytes(cn),
                  "measured",
                  "gpu",
                  cn->ngpus ? gu / (double)cn->ngpus : 0.0,
                  "cpu",
                  n->util.cpu,
                  "memory",
                  n->util.mem,
                  "disk",
                  n->util.disk,
                  "jobs",
                  jobs);
    if (o
        && (json_object_update_new(o, alloc_json(cn, &a)) < 0
            || json_object_set_new(o, "runtimes", runtimes_json(cn)) < 0)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* o with "hardware_change" when an agent reported other capacity, and
 * "heldPorts" when something outside craterd's choice holds ports of its
 * ranges there. */
static json_t *with_change(json_t *o, const dnode_t *n)
{
    json_t *a;

    if (o && n->hw_change)
        json_object_set_new(o, "hardware_change", json_string(n->hw_change));
    if (o && n->nheld && (a = json_array())) {
        for (size_t i = 0; i < n->nheld; i++)
            json_array_append_new(a, json_integer(n->held[i]));
        json_object_set_new(o, "heldPorts", a);
    }
    return o;
}

/* [lo, hi): the ports craterd gives out (gang.c, services.c). */
static void port_range(const crater_daemon_t *d, uint32_t *lo, uint32_t *hi)
{
    *lo = d->cfg.server.gang_port_base;
    *hi = *lo + 2 * d->cfg.server.gang_ports;
    if (*hi > 65536)
        *hi = 65536;
}

void node_held_set(crater_daemon_t *d,
                   dnode_t *n,
                   const uint16_t *ports,
                   size_t nports)
{
    uint32_t lo, hi;
    size_t k = 0;
    uint16_t *h;

    port_range(d, &lo, &hi);
    for (size_t i = 0; i < nports; i++)
        k += ports[i] >= lo && ports[i] < hi;
    if (k == n->nheld && k > 0) { /* the common case: no change */
        size_t j = 0;
        for (size_t i = 0; i < nports && j < k; i++)
            if (ports[i] >= lo && ports[i] < hi && ports[i] != n->held[j++])
                goto changed;
        return;
    }
changed:
    h = k ? malloc(k * sizeof(*h)) : NULL;
    if (k && !h)
        return; /* out of memory: keep the last report */
    k = 0;
    for (size_t i = 0; i < nports; i++)
        if (ports[i] >= lo && ports[i] < hi)
            h[k++] = ports[i];
    free(n->held);
    n->held = h;
    n->nheld = k;
}

bool node_port_held(crater_daemon_t *d, uint32_t sid, uint32_t port)
{
    const dnode_t *n = node_by_sid(d, sid);
    size_t lo = 0, hi = n ? n->nheld : 0;

    while (lo < hi) { /* held is ascending */
        size_t mid = lo + (hi - lo) / 2;
        if (n->held[mid] == port)
            return true;
        if (n->held[mid] < port)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

json_t *node_to_json(crater_daemon_t *d, const dnode_t *n)
{
    node_agg_t *agg = aggregate(d);
    json_t *o =
        with_change(node_json(d, n, agg ? &agg[node_index(d, n)] : NULL), n);

    aggregate_free(d, agg);
    return o;
}

json_t *nodes_to_json(crater_daemon_t *d)
{
    node_agg_t *agg = aggregate(d);
    json_t *items = json_array();

    for (size_t i = 0; i < d->nnodes; i++)
        json_array_append_new(items,
                              with_change(node_json(d,
                                                    d->nodes[i],
                                                    agg ? &agg[i] : NULL),
                                          d->nodes[i]));
    aggregate_free(d, agg);
    return items;
}

/* ---- work channel ---------------------------------------------------------
 */

void node_complete_poll(dnode_t *n)
{
    crater_http_resp_t resp = {0};
    json_t *items;

    if (!n->poll)
        return;
    items = json_array();
    for (size_t i = 0; i < n->nwork; i++)
        if (n->work[i].seq > n->poll_after)
            json_array_append(items, n->work[i].item);
    crater_http_json(&resp, 200, crater_proto_work_encode(n->seq, items));
    json_decref(items);
    crater_http_complete(n->poll, &resp);
    n->poll = NULL;
}

int node_push_work(crater_daemon_t *d, dnode_t *n, json_t *item)
{
    (void)d;
    if (!item)
        return -1;
    if (n->nwork == n->capwork) {
        size_t cap = n->capwork ? n->capwork * 2 : 16;
        work_item_t *w = realloc(n->work, cap * sizeof(*w));
        if (!w) {
            json_decref(item);
            return -1;
        }
        n->work = w;
        n->capwork = cap;
    }
    n->seq++;
    json_object_set_new(item, "seq", json_integer((json_int_t)n->seq));
    n->work[n->nwork].seq = n->seq;
    n->work[n->nwork++].item = item;
    node_complete_poll(n);
    return 0;
}

void node_poll_tick(crater_daemon_t *d, int64_t now)
{
    for (size_t i = 0; i < d->nnodes; i++) {
        dnode_t *n = d->nodes[i];
        if (n->poll && (now >= n->poll_deadline_ms || d->stopping))
            node_complete_poll(n);
    }
}

/* The job's variables, then what craterd sets: its GPUs' UUIDs in
 * placement order, the job id and the attempt (and a replica's torchrun
 * variables, gang.c). */
static int order_env(crater_daemon_t *d,
                     const djob_t *j,
                     uint32_t r,
                     const crater_node_t *cn,
                     crater_proto_task_t *t)
{
    const crater_placement_t *pl = job_task_pl(j, r);
    char uuids[CRATER_MAX_GPUS_PER_NODE * 48] = "", num[24];
    size_t off = 0;
    int rc = 0;

    for (size_t i = 0; i < j->spec->nenv; i++)
        rc |= crater_proto_task_setenv(t,
                                       j->spec->env[i].key,
                                       j->spec->env[i].value);
    for (uint32_t i = 0; i < pl->ngpus && cn; i++) {
        const char *u = cn->gpus[pl->gpu[i]].uuid;
        off += (size_t)snprintf(uuids + off,
                                sizeof(uuids) - off,
                                "%s%s",
                                i ? "," : "",
                                u ? u : "");
        if (off >= sizeof(uuids))
            break;
    }
    rc |= crater_proto_task_setenv(t, "CUDA_VISIBLE_DEVICES", uuids);
    rc |= crater_proto_task_setenv(t, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    snprintf(num, sizeof(num), "%" PRIu64, j->id);
    rc |= crater_proto_task_setenv(t, "CRATER_JOB_ID", num);
    snprintf(num, sizeof(num), "%" PRIu32, j->attempts);
    rc |= crater_proto_task_setenv(t, "CRATER_ATTEMPT", num);
    if (j->spec->checkpoint.interval_ms) { /* the SDK's default schedule */
        snprintf(num, sizeof(num), "%" PRIu64, j->spec->checkpoint.interval_ms);
        rc |= crater_proto_task_setenv(t, "CRATER_CHECKPOINT_INTERVAL_MS", num);
    }
    if (j->spec->checkpoint.incremental_interval_ms) {
        snprintf(num,
                 sizeof(num),
                 "%" PRIu64,
                 j->spec->checkpoint.incremental_interval_ms);
        rc |=
            crater_proto_task_setenv(t, "CRATER_INCREMENTAL_INTERVAL_MS", num);
    }
    if (j->nrep)
        rc |= gang_env(d, j, r, t);
    if (j->svc_id) { /* the port its model server listens on */
        snprintf(num, sizeof(num), "%" PRIu32, j->master_port);
        rc |= crater_proto_task_setenv(t, "CRATER_SERVICE_PORT", num);
    }
    return rc ? -1 : 0;
}

/* Where j runs: its node, its GPUs with the memory charged on each, its
 * NUMA node and the block device its IO was placed on. */
static int order_placement(const crater_placement_t *pl,
                           const crater_node_t *cn,
                           crater_proto_placement_t *p)
{
    p->node = strdup(cn ? cn->name : "");
    for (uint32_t i = 0; i < pl->ngpus && cn; i++) {
        const crater_gpu_t *g = &cn->gpus[pl->gpu[i]];
        p->gpus[i].index = pl->gpu[i];
        p->gpus[i].uuid = strdup(g->uuid ? g->uuid : "");
        p->gpus[i].model = g->model ? strdup(g->model) : NULL;
        p->gpus[i].memory_bytes = (uint64_t)pl->gpu_mib[i] << 20;
        p->ngpus = i + 1;
        if (!p->gpus[i].uuid || (g->model && !p->gpus[i].model))
            return -1;
    }
    p->whole_gpus = pl->whole;
    p->numa = pl->numa;
    p->cpu_millis = pl->cpu_milli;
    p->memory_bytes = pl->mem_bytes;
    if (cn && pl->storage >= 0 && (size_t)pl->storage < cn->nstorage
        && !(p->disk = strdup(cn->storage[pl->storage].device)))
        return -1;
    return p->node ? 0 : -1;
}

/* The image, its pull policy and volumes (doc/containers.md). */
static int order_container(const crater_jobspec_t *s, crater_proto_task_t *t)
{
    if (!s->image)
        return 0;
    t->image_pull = s->image_pull;
    t->nvolumes = s->nvolumes;
    if (!(t->image = strdup(s->image))
        || crater_volumes_dup(s->volumes, s->nvolumes, &t->volumes) < 0) {
        t->nvolumes = 0;
        return -1;
    }
    return 0;
}

/* A service replica's readiness command (its service's
 * inference.readiness; a rollout cannot change it): the agent runs it
 * as the task (doc/inference.md "Ports and readiness"). */
static int order_readiness(crater_daemon_t *d,
                           const djob_t *j,
                           crater_proto_task_t *t)
{
    const djob_t *svc = j->svc_id ? job_find(d, j->svc_id) : NULL;
    const crater_inference_t *inf = svc ? &svc->spec->inference : NULL;

    if (!inf || !inf->ready_cmd)
        return 0;
    t->readiness.period_ms =
        inf->ready_period_ms ? inf->ready_period_ms : READY_DEFAULT_MS;
    t->readiness.timeout_ms =
        inf->ready_timeout_ms ? inf->ready_timeout_ms : READY_DEFAULT_MS;
    t->readiness.nargv = crater_strv_len(inf->ready_cmd);
    t->readiness.argv = crater_strv_dup(inf->ready_cmd);
    return t->readiness.argv ? 0 : -1;
}

int task_order(crater_daemon_t *d,
               const djob_t *j,
               uint32_t r,
               crater_proto_task_t *t)
{
    const crater_placement_t *pl = job_task_pl(j, r);
    const crater_node_t *cn = node_model(d, pl->node);
    const crater_jobspec_t *s = j->spec;
    crater_error_t err;
    char id[24];

    memset(t, 0, sizeof(*t));
    snprintf(id, sizeof(id), "%" PRIu64, j->id);
    t->job = strdup(id);
    t->attempt = j->attempts;
    t->replica = r;
    t->argv = crater_strv_dup(s->command);
    t->nargv = crater_strv_len(s->command);
    t->working_dir = s->workdir ? strdup(s->workdir) : NULL;
    t->limits = (crater_proto_limits_t){
        .cpu_millis = pl->cpu_milli,
        .memory_bytes = pl->mem_bytes,
        .cpu_limit_multiplier = s->cpu_limit_multiplier,
        .cpu_burst = s->cpu_burst,
        .io_profile = s->io_profile,
        .workload_type = s->workload_type,
        .gpu_isolation = s->resources.gpu.isolation,
    };
    t->grace_period_ms = s->grace_period_ms;
    t->time_limit_ms = s->time_limit_ms;
    if ((s->checkpoint.dir && !(t->checkpoint_dir = strdup(s->checkpoint.dir)))
        || order_container(s, t) < 0) {
        crater_proto_task_clear(t);
        return -1;
    }
    if (tenant_uid(d, j->tenant, &t->uid, &err) < 0) {
        crater_log(LOG_ERR, "job %s: %s", id, err.text);
        crater_proto_task_clear(t);
        return -1;
    }
    t->gid = t->uid;
    if (!t->job || (s->command && !t->argv) || (s->workdir && !t->working_dir)
        || order_env(d, j, r, cn, t) < 0 || order_readiness(d, j, t) < 0
        || order_placement(pl, cn, &t->placement) < 0) {
        crater_proto_task_clear(t);
        return -1;
    }
    return 0;
}

void node_send_start(crater_daemon_t *d, djob_t *j, const dnode_t *only)
{
    for (uint32_t r = 0; j->placed && r < job_ntasks(j); r++) {
        dnode_t *n = node_by_sid(d, job_task_pl(j, r)->node);
        crater_proto_item_t it = {.op = CRATER_PROTO_START};
        if (!n || (only && n != only) || task_order(d, j, r, &it.task) < 0)
            continue;
        node_push_work(d, n, crater_proto_item_encode(&it));
        crater_proto_item_clear(&it);
    }
}

/* Push a stop order (borrows s). */
static void order_stop(crater_daemon_t *d,
                       dnode_t *n,
                       const crater_proto_stop_t *s)
{
    crater_proto_item_t it = {.op = CRATER_PROTO_STOP, .stop = *s};

    node_push_work(d, n, crater_proto_item_encode(&it)); /* borrows it */
}

void node_send_stop_replica(crater_daemon_t *d,
                            djob_t *j,
                            uint32_t r,
                            const char *reason)
{
    dnode_t *n = j->placed ? node_by_sid(d, job_task_pl(j, r)->node) : NULL;
    char id[24];

    if (!n)
        return;
    if (j->nrep)
        j->rep[r].stopping = true;
    snprintf(id, sizeof(id), "%" PRIu64, j->id);
    order_stop(d,
               n,
               &(crater_proto_stop_t){.job = id,
                                      .attempt = j->attempts,
                                      .replica = r,
                                      .grace_period_ms =
                                          job_stop_grace_ms(d, j),
                                      .reason = (char *)(reason ? reason : ""),
                                      .notice = j->stop_notice});
}

void node_send_stop(crater_daemon_t *d, djob_t *j, const char *reason)
{
    for (uint32_t r = 0; r < job_ntasks(j); r++)
        if (!j->nrep || !job_state_final(j->rep[r].state))
            node_send_stop_replica(d, j, r, reason);
}

static void watermark_stop(crater_daemon_t *d, dnode_t *n, djob_t *j)
{
    crater_proto_notice_t was = j->stop_notice;
    char reason[256];

    j->stop_notice = CRATER_NOTICE_MEMORY; /* rides on the stop order */
    snprintf(reason,
             sizeof(reason),
             "requeued: GPU memory measured on %s went past "
             "scheduler.safetyWatermark (%.0f%%) while overcommitted; "
             "the newest task on the GPU goes",
             n->name,
             d->cfg.scheduler.safety_watermark * 100);
    if (job_apply(d, j, JE_PREEMPT, reason) < 0) { /* stops it */
        j->stop_notice = was;
        return;
    }
    declog_write(d,
                 json_pack("{s:I, s:s, s:I, s:s, s:s}",
                           "time_ms",
                           (json_int_t)dnow_ms(),
                           "decision",
                           "watermark",
                           "job",
                           (json_int_t)j->id,
                           "node",
                           n->name,
                           "reason",
                           reason));
    crater_metric_add(d->m_dec, (const char *[]){"watermark"}, 1);
}

void node_watermark(crater_daemon_t *d, dnode_t *n)
{
    uint64_t ids[CRATER_MAX_GPUS_PER_NODE];
    uint32_t k = crater_sched_watermark_victims(d->sched,
                                                n->sid,
                                                ids,
                                                CRATER_MAX_GPUS_PER_NODE);

    for (uint32_t i = 0; i < k; i++) {
        /* a gang's tasks carry their replica: one stop per job */
        djob_t *j = job_find(d, task_job_id(ids[i]));
        if (j && (j->state == JS_BOUND || j->state == JS_RUNNING))
            watermark_stop(d, n, j);
    }
}

void node_order_stop(crater_daemon_t *d,
                     dnode_t *n,
                     const char *job,
                     uint32_t attempt,
                     uint32_t replica,
                     uint64_t grace_ms,
                     const char *reason)
{
    crater_proto_item_t it = {
        .op = CRATER_PROTO_STOP,
        .stop = {.job = (char *)job,
                 .attempt = attempt,
                 .replica = replica,
                 .grace_period_ms = grace_ms,
                 .reason = (char *)(reason ? reason : "")},
    };

    node_push_work(d, n, crater_proto_item_encode(&it)); /* borrows it */
}

/* ---- health -------------------------------------------------------------- */

/* A job whose cancel was requested is not requeued with its lost node:
 * its tasks were being stopped, and a requeue would run it again. */
static void cancel_node_lost(crater_daemon_t *d, djob_t *j)
{
    if (j->state == JS_PREEMPTING)
        job_apply(d, j, JE_EXIT_STOPPED, "node lost while stopping");
    job_apply(d, j, JE_EXIT_CANCELLED, "cancelled; its node was lost");
}

/* What happens to a job whose node stopped heartbeating. */
static void job_node_lost(crater_daemon_t *d, djob_t *j, int64_t now)
{
    const crater_config_t *c = &d->cfg;
    int64_t ran = j->started_ms ? now - j->started_ms : 0;

    if (j->cancel_requested) {
        cancel_node_lost(d, j);
        return;
    }
    if (j->state == JS_LOST) {
        /* conservative: already waited one more timeout for a reconnect */
        if (now - j->lost_since_ms < (int64_t)c->agent.heartbeat_timeout_ms)
            return;
        job_apply(d, j, JE_REQUEUE, "requeued: node did not come back");
        return;
    }
    if (c->agent.migration_policy == CRATER_MIGRATION_NEVER) {
        job_apply(d, j, JE_FAIL, "node lost (migrationPolicy never)");
        return;
    }
    if (c->agent.migration_policy == CRATER_MIGRATION_CONSERVATIVE
        && j->state == JS_RUNNING
        && ran >= (int64_t)c->agent.migration_min_runtime_ms) {
        j->lost_since_ms = now;
        job_apply(d,
                  j,
                  JE_NODE_SILENT,
                  "node not responding; waiting for it to reconnect");
        return;
    }
    job_apply(d, j, JE_REQUEUE, "requeued: node lost");
}

/* Is a node of one of j's tasks gone (a gang is lost with any replica)? */
static bool node_lost(crater_daemon_t *d, const djob_t *j, int64_t now)
{
    for (uint32_t r = 0; r < job_ntasks(j); r++) {
        dnode_t *n = node_by_sid(d, job_task_pl(j, r)->node);
        if (n && n->registered && !n->ready && now >= n->notready_since_ms)
            return true;
    }
    return false;
}

static void node_went_away(crater_daemon_t *d, dnode_t *n, int64_t now)
{
    n->ready = false;
    n->notready_since_ms = now;
    crater_sched_set_ready(d->sched, n->sid, false);
    declog_write(d,
                 json_pack("{s:I, s:s, s:s, s:s}",
                           "time_ms",
                           (json_int_t)now,
                           "decision",
                           "node-notready",
                           "node",
                           n->name,
                           "reason",
                           "no heartbeat within heartbeatTimeout"));
}

void node_health_tick(crater_daemon_t *d, int64_t now)
{
    int64_t timeout = (int64_t)d->cfg.agent.heartbeat_timeout_ms;
    bool lost = false;

    for (size_t i = 0; i < d->nnodes; i++) {
        dnode_t *n = d->nodes[i];
        if (n->registered && n->ready && now - n->last_hb_ms > timeout)
            node_went_away(d, n, now);
        lost |= n->registered && !n->ready && now >= n->notready_since_ms;
    }
    for (size_t i = 0; lost && i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        if (j->placed && job_state_holds(j->state) && node_lost(d, j, now))
            job_node_lost(d, j, now);
    }
}
