/* whatif.c - the live cluster's snapshot as a replay (whatif.h).
 *
 * The API's JSON is decoded strictly where the replay depends on it (a
 * running job's node, GPUs and charges; every spec) and errors name the
 * field; fields the replay does not read are ignored, so that a newer
 * craterd's additions do not break an older CLI. A running job's
 * placement is rebuilt exactly from its NUMA charges (numa_charges), so
 * that the core accepts it as craterd holds it.
 */
#include "crater/whatif.h"

#include <stdlib.h>
#include <string.h>

#include "crater/hwfile.h"

static int fail_at(crater_error_t *err,
                   const char *what,
                   size_t i,
                   const char *field,
                   const char *msg)
{
    return crater_errorf_field(err,
                               CRATER_EINVAL,
                               field,
                               "%s[%zu].%s: %s",
                               what,
                               i,
                               field,
                               msg);
}

/* ---- nodes --------------------------------------------------------------- */

/* Move the one node of c to the end of w's cluster. */
static int take_node(crater_whatif_t *w, crater_cluster_t *c, bool unavail)
{
    size_t n = w->cluster->nnodes;
    crater_node_t *nodes = realloc(w->cluster->nodes, (n + 1) * sizeof(*nodes));
    bool *u = realloc(w->unavailable, (n + 1) * sizeof(*u));

    if (nodes)
        w->cluster->nodes = nodes;
    if (u)
        w->unavailable = u;
    if (!nodes || !u)
        return -1;
    nodes[n] = c->nodes[0];
    u[n] = unavail;
    w->cluster->nnodes = n + 1;
    c->nnodes = 0; /* the node moved: c frees only its array */
    return 0;
}

static int add_node(crater_whatif_t *w,
                    json_t *o,
                    size_t i,
                    const crater_kb_t *kb,
                    crater_error_t *err)
{
    json_t *hw = json_object_get(o, "hardware");
    const char *state = json_string_value(json_object_get(o, "state"));
    crater_cluster_t *c = NULL;
    crater_dec_t dec;
    int rc;

    if (!json_is_object(hw))
        return fail_at(err,
                       "nodes",
                       i,
                       "hardware",
                       "missing (GET /api/v1/nodes?hardware=1, as an admin)");
    crater_dec_init(&dec, NULL, 0, err);
    crater_dec_push_key(&dec, "nodes");
    crater_dec_push_index(&dec, i);
    crater_dec_push_key(&dec, "hardware");
    if (crater_hw_decode(&dec, hw, kb, &c) < 0)
        return -1;
    if (c->nnodes != 1) {
        crater_cluster_destroy(c);
        return fail_at(err, "nodes", i, "hardware", "not one node");
    }
    rc = take_node(w,
                   c,
                   json_is_true(json_object_get(o, "cordoned")) || !state
                       || strcmp(state, "Ready") != 0);
    crater_cluster_destroy(c);
    return rc < 0 ? crater_errorf(err, CRATER_ENOMEM, "out of memory") : 0;
}

static int node_index(const crater_whatif_t *w, const char *name)
{
    for (size_t i = 0; name && i < w->cluster->nnodes; i++)
        if (strcmp(w->cluster->nodes[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* ---- jobs ---------------------------------------------------------------- */

static int64_t int_of(json_t *o, const char *key)
{
    return (int64_t)json_integer_value(json_object_get(o, key));
}

static int pin_gpus(json_t *gpus, crater_placement_t *pl)
{
    json_t *g;
    size_t k;

    if (!json_is_array(gpus)
        || json_array_size(gpus) > CRATER_MAX_GPUS_PER_NODE)
        return -1;
    json_array_foreach(gpus, k, g)
    {
        json_int_t idx = json_integer_value(json_object_get(g, "index"));
        if (!json_is_integer(json_object_get(g, "index")) || idx < 0
            || idx >= CRATER_MAX_GPUS_PER_NODE)
            return -1;
        pl->gpu[k] = (uint8_t)idx;
        pl->gpu_mib[k] = (uint32_t)(int_of(g, "memory_bytes") >> 20);
    }
    pl->ngpus = (uint32_t)json_array_size(gpus);
    return 0;
}

static int pin_numa(json_t *charges, crater_placement_t *pl)
{
    json_t *c;
    size_t k;

    if (!json_is_array(charges)
        || json_array_size(charges) > CRATER_SCHED_MAX_NUMA)
        return -1;
    json_array_foreach(charges, k, c)
    {
        pl->numa_cpu[k] = (uint64_t)int_of(c, "cpu_millis");
        pl->numa_mem[k] = (uint64_t)int_of(c, "memory_bytes");
    }
    return 0;
}

/* A running job's placement from its "placement" object. */
static int pin(const crater_whatif_t *w,
               json_t *o,
               size_t i,
               crater_placement_t *pl,
               crater_error_t *err)
{
    json_t *p = json_object_get(o, "placement");
    const char *node = json_string_value(json_object_get(p, "node"));
    int idx = node_index(w, node);

    memset(pl, 0, sizeof(*pl));
    if (!json_is_object(p))
        return fail_at(err, "jobs", i, "placement", "missing");
    if (idx < 0)
        return fail_at(err, "jobs", i, "placement.node", "no such node");
    pl->node = (uint32_t)idx;
    pl->storage = -1; /* disk bandwidth is not replayed */
    pl->numa = (int)int_of(p, "numa");
    pl->whole = json_is_true(json_object_get(p, "whole_gpus"));
    pl->cpu_milli = (uint64_t)int_of(p, "cpu_millis");
    pl->mem_bytes = (uint64_t)int_of(p, "memory_bytes");
    if (pin_gpus(json_object_get(p, "gpus"), pl) < 0)
        return fail_at(err, "jobs", i, "placement.gpus", "malformed");
    if (pin_numa(json_object_get(p, "numa_charges"), pl) < 0)
        return fail_at(err,
                       "jobs",
                       i,
                       "placement.numa_charges",
                       "missing or malformed (craterd too old?)");
    return 0;
}

static int decode_spec(json_t *o,
                       size_t i,
                       crater_jobspec_t **spec,
                       crater_error_t *err)
{
    crater_dec_t dec;

    crater_dec_init(&dec, NULL, 0, err);
    crater_dec_push_key(&dec, "jobs");
    crater_dec_push_index(&dec, i);
    crater_dec_push_key(&dec, "spec");
    return crater_jobspec_decode(&dec, json_object_get(o, "spec"), spec);
}

/* Time left to a running job, or the run time of a pending one. */
static uint64_t time_left(const crater_jobspec_t *spec,
                          json_t *o,
                          bool running,
                          uint64_t now_ms,
                          uint64_t assume_ms,
                          bool *assumed)
{
    uint64_t lim = spec->time_limit_ms;
    int64_t started = int_of(o, "started_ms");
    uint64_t ran = 0;

    *assumed = lim == 0;
    if (!lim)
        return assume_ms;
    if (running && started > 0 && now_ms > (uint64_t)started)
        ran = now_ms - (uint64_t)started;
    return lim > ran ? lim - ran : 1;
}

/* 1: it is in the snapshot, 0: not (another state, or skipped). */
static int add_job(crater_whatif_t *w,
                   json_t *o,
                   size_t i,
                   uint64_t now_ms,
                   uint64_t assume_ms,
                   crater_error_t *err)
{
    const char *st = json_string_value(json_object_get(o, "state"));
    bool running = st && (!strcmp(st, "running") || !strcmp(st, "bound"));
    crater_whatif_job_t *j = &w->jobs[w->njobs];
    const char *id;
    crater_error_t e;

    if (!running && !(st && !strcmp(st, "pending")))
        return 0;
    memset(j, 0, sizeof(*j));
    if (decode_spec(o, i, &j->spec, &e) < 0) {
        w->skipped++;
        return 0;
    }
    if (j->spec->replicas > 1) { /* a gang: not replayed */
        crater_jobspec_destroy(j->spec);
        w->skipped++;
        return 0;
    }
    if (running && pin(w, o, i, &j->pl, err) < 0) {
        crater_jobspec_destroy(j->spec);
        return -1;
    }
    id = json_string_value(json_object_get(o, "id"));
    if (!(j->id = strdup(id ? id : ""))) {
        crater_jobspec_destroy(j->spec);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    j->submitted_ms = (uint64_t)int_of(o, "submitted_ms");
    j->priority = (int32_t)int_of(o, "priority");
    j->running = running;
    j->runtime_ms =
        time_left(j->spec, o, running, now_ms, assume_ms, &j->assumed);
    w->nassumed += j->assumed;
    w->njobs++;
    return 1;
}

/* Running first, then the queue: priority, then age, then id order. */
static int cmp_job(const void *a, const void *b)
{
    const crater_whatif_job_t *x = a, *y = b;

    if (x->running != y->running)
        return x->running ? -1 : 1;
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    if (x->submitted_ms != y->submitted_ms)
        return x->submitted_ms < y->submitted_ms ? -1 : 1;
    return strcmp(x->id, y->id);
}

static int build(crater_whatif_t *w,
                 json_t *nodes,
                 json_t *jobs,
                 uint64_t now_ms,
                 uint64_t assume_ms,
                 const crater_kb_t *kb,
                 crater_error_t *err)
{
    json_t *o;
    size_t i;

    if (!json_is_array(nodes) || !json_is_array(jobs))
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "items",
                                   "nodes and jobs must be arrays");
    w->cluster = calloc(1, sizeof(*w->cluster));
    w->jobs = calloc(json_array_size(jobs) + 1, sizeof(*w->jobs));
    if (!w->cluster || !w->jobs)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    json_array_foreach(nodes, i, o)
    {
        if (add_node(w, o, i, kb, err) < 0)
            return -1;
    }
    json_array_foreach(jobs, i, o)
    {
        if (add_job(w, o, i, now_ms, assume_ms, err) < 0)
            return -1;
    }
    for (i = 0; i < w->njobs; i++)
        w->nrunning += w->jobs[i].running;
    w->npending = w->njobs - w->nrunning;
    qsort(w->jobs, w->njobs, sizeof(*w->jobs), cmp_job);
    return 0;
}

int crater_whatif_build(json_t *nodes,
                        json_t *jobs,
                        uint64_t now_ms,
                        uint64_t assume_ms,
                        const crater_kb_t *kb,
                        crater_whatif_t *out,
                        crater_error_t *err)
{
    memset(out, 0, sizeof(*out));
    if (assume_ms == 0)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "assume_ms",
                                   "the assumed run time must be > 0");
    if (build(out, nodes, jobs, now_ms, assume_ms, kb, err) < 0) {
        crater_whatif_clear(out);
        return -1;
    }
    return 0;
}

void crater_whatif_clear(crater_whatif_t *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->njobs; i++) {
        free(w->jobs[i].id);
        crater_jobspec_destroy(w->jobs[i].spec);
    }
    free(w->jobs);
    free(w->unavailable);
    crater_cluster_destroy(w->cluster);
    memset(w, 0, sizeof(*w));
}

/* ---- the replay ---------------------------------------------------------- */

static crater_replay_class_t class_of(int32_t prio)
{
    return prio >= 1000 ? CRATER_REPLAY_HIGH
           : prio < 0   ? CRATER_REPLAY_LOW
                        : CRATER_REPLAY_NORMAL;
}

static int one_job(const crater_whatif_job_t *wj,
                   const crater_sched_t *s,
                   crater_replay_job_t *j,
                   crater_error_t *err)
{
    if (crater_request_from_spec(s, wj->spec, &j->req, err) < 0)
        return -1;
    j->req.priority = wj->priority;
    j->req.preemptible = wj->spec->preemptible;
    j->cls = class_of(wj->priority);
    j->submit_ms = 0;
    j->runtime_ms = wj->runtime_ms;
    j->gpu_milli = j->req.gpus * 1000u;
    /* a running job's limit is what it has left; a pending one's whole */
    j->time_limit_ms = wj->assumed ? 0 : wj->runtime_ms;
    j->pin = wj->running ? &wj->pl : NULL;
    return 0;
}

int crater_whatif_jobs(const crater_whatif_t *w,
                       const crater_sched_t *s,
                       crater_replay_job_t **jobs,
                       crater_error_t *err)
{
    crater_replay_job_t *j = calloc(w->njobs + 1, sizeof(*j));

    if (!j)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    for (size_t i = 0; i < w->njobs; i++)
        if (one_job(&w->jobs[i], s, &j[i], err) < 0) {
            char why[sizeof(err->text)];
            memcpy(why, err->text, sizeof(why));
            crater_errorf_field(err,
                                err->errnum,
                                "jobs",
                                "job %s: %s",
                                w->jobs[i].id,
                                why);
            free(j);
            return -1;
        }
    *jobs = j;
    return 0;
}

int crater_whatif_apply_nodes(const crater_whatif_t *w,
                              crater_sched_t *s,
                              crater_error_t *err)
{
    for (size_t i = 0; i < w->cluster->nnodes; i++)
        if (w->unavailable[i]
            && crater_sched_set_cordoned(s, (uint32_t)i, true) < 0)
            return crater_errorf(err,
                                 CRATER_EINVAL,
                                 "node %zu: cannot cordon",
                                 i);
    return 0;
}
