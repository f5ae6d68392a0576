/* jobs.c - craterd's job table: records, states, their JSON forms (API and
 * store), and the one function through which a job changes state.
 *
 * Jobs live in an array sorted by id (ids grow, so inserts append) and are
 * found by binary search. A job's stored record holds the normalised spec,
 * the state, the history and, while it holds resources, the core's exact
 * placement (GPU indices, MiB per GPU, per-NUMA charges), so that a
 * restarted craterd can charge it to the core again without re-placing.
 * Every transition appends a history entry and persists the record with an
 * asynchronous group commit; callers hold d->mu.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "crater/doc.h"
#include "crater/kind.h"
#include "crater/log.h"
#include "daemon/cost.h"
#include "daemon/internal.h"

djob_t *job_find(crater_daemon_t *d, uint64_t id)
{
    size_t lo = 0, hi = d->njobs;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->jobs[mid]->id == id)
            return d->jobs[mid];
        if (d->jobs[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int job_insert(crater_daemon_t *d, djob_t *j)
{
    size_t i = d->njobs;

    if (d->njobs == d->capjobs) {
        size_t cap = d->capjobs ? d->capjobs * 2 : 256;
        djob_t **n = realloc(d->jobs, cap * sizeof(*n));
        if (!n)
            return -1;
        d->jobs = n;
        d->capjobs = cap;
    }
    while (i > 0 && d->jobs[i - 1]->id > j->id) {
        d->jobs[i] = d->jobs[i - 1];
        i--;
    }
    d->jobs[i] = j;
    d->njobs++;
    if (j->id >= d->next_id)
        d->next_id = j->id + 1;
    array_track(d, j, +1);
    backfill_track(d, j, -1, (int)j->state);
    return 0;
}

void job_free(djob_t *j)
{
    if (!j)
        return;
    free(j->name);
    free(j->tenant);
    free(j->last_reason);
    crater_jobspec_destroy(j->spec);
    json_decref(j->spec_json);
    json_decref(j->history);
    json_decref(j->samples);
    json_decref(j->ckpts);
    json_decref(j->svc_rollout);
    free(j->rep);
    free(j);
}

void job_event(djob_t *j, int64_t now, job_state_t to, const char *reason)
{
    json_array_append_new(j->history,
                          json_pack("{s:I, s:s, s:s}",
                                    "time_ms",
                                    (json_int_t)now,
                                    "state",
                                    job_state_name(to),
                                    "reason",
                                    reason ? reason : ""));
}

/* ---- placement ----------------------------------------------------------- */

/* Where the placement's CPU and memory are charged, one {cpu_millis,
 * memory_bytes} per NUMA node up to the last one charged: enough for
 * `crater sim whatif` to charge a running job exactly as craterd does. */
static json_t *numa_charges(const crater_placement_t *pl)
{
    json_t *a = json_array();
    int last = -1;

    for (int k = 0; k < CRATER_SCHED_MAX_NUMA; k++)
        if (pl->numa_cpu[k] || pl->numa_mem[k])
            last = k;
    for (int k = 0; a && k <= last; k++)
        json_array_append_new(a,
                              json_pack("{s:I, s:I}",
                                        "cpu_millis",
                                        (json_int_t)pl->numa_cpu[k],
                                        "memory_bytes",
                                        (json_int_t)pl->numa_mem[k]));
    return a;
}

json_t *placement_json(crater_daemon_t *d, const crater_placement_t *pl)
{
    const crater_node_t *n = node_model(d, pl->node);
    json_t *gpus = json_array();
    json_t *o;

    for (uint32_t i = 0; i < pl->ngpus && n; i++) {
        const crater_gpu_t *g = &n->gpus[pl->gpu[i]];
        json_array_append_new(gpus,
                              json_pack("{s:i, s:s, s:s, s:I}",
                                        "index",
                                        pl->gpu[i],
                                        "uuid",
                                        g->uuid ? g->uuid : "",
                                        "model",
                                        g->model ? g->model : "",
                                        "memory_bytes",
                                        (json_int_t)((uint64_t)pl->gpu_mib[i]
                                                     << 20)));
    }
    o = json_pack("{s:s, s:o, s:b, s:i, s:I, s:I}",
                  "node",
                  n ? n->name : "",
                  "gpus",
                  gpus,
                  "whole_gpus",
                  pl->whole,
                  "numa",
                  pl->numa,
                  "cpu_millis",
                  (json_int_t)pl->cpu_milli,
                  "memory_bytes",
                  (json_int_t)pl->mem_bytes);
    if (o && n && pl->storage >= 0 && (size_t)pl->storage < n->nstorage)
        json_object_set_new(o,
                            "disk",
                            json_string(n->storage[pl->storage].device));
    if (o)
        json_object_set_new(o, "numa_charges", numa_charges(pl));
    if (o && pl->share_milli) /* time-shared: the profiled use charged */
        json_object_set_new(o,
                            "gpu_share",
                            json_real(pl->share_milli / 1000.0));
    return o;
}

static json_t *u64_array(const uint64_t *v, size_t n)
{
    json_t *a = json_array();

    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer((json_int_t)v[i]));
    return a;
}

json_t *placement_store(crater_daemon_t *d, const crater_placement_t *pl)
{
    const crater_node_t *n = node_model(d, pl->node);
    uint64_t gpu[CRATER_MAX_GPUS_PER_NODE], mib[CRATER_MAX_GPUS_PER_NODE];

    for (uint32_t i = 0; i < pl->ngpus; i++) {
        gpu[i] = pl->gpu[i];
        mib[i] = pl->gpu_mib[i];
    }
    json_t *o = json_pack("{s:s, s:o, s:o, s:b, s:i, s:I, s:I, s:o, s:o, s:I,"
                          " s:I, s:i, s:f}",
                          "node",
                          n ? n->name : "",
                          "gpu",
                          u64_array(gpu, pl->ngpus),
                          "gpu_mib",
                          u64_array(mib, pl->ngpus),
                          "whole",
                          pl->whole,
                          "numa",
                          pl->numa,
                          "cpu_milli",
                          (json_int_t)pl->cpu_milli,
                          "mem_bytes",
                          (json_int_t)pl->mem_bytes,
                          "numa_cpu",
                          u64_array(pl->numa_cpu, CRATER_SCHED_MAX_NUMA),
                          "numa_mem",
                          u64_array(pl->numa_mem, CRATER_SCHED_MAX_NUMA),
                          "disk_iops",
                          (json_int_t)pl->disk_iops,
                          "disk_bw",
                          (json_int_t)pl->disk_bw,
                          "storage",
                          pl->storage,
                          "score",
                          pl->score);

    /* a time-shared job's profiled use (absent otherwise: older records
     * and plain placements read back as 0) */
    if (o && pl->share_milli)
        json_object_set_new(o, "gpu_share", json_integer(pl->share_milli));
    return o;
}

static int load_u64s(json_t *a, uint64_t *out, size_t max, size_t *n)
{
    size_t i;
    json_t *v;

    if (!json_is_array(a) || json_array_size(a) > max)
        return -1;
    json_array_foreach(a, i, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return -1;
        out[i] = (uint64_t)json_integer_value(v);
    }
    *n = json_array_size(a);
    return 0;
}

int placement_load(crater_daemon_t *d, json_t *v, crater_placement_t *pl)
{
    uint64_t gpu[CRATER_MAX_GPUS_PER_NODE], mib[CRATER_MAX_GPUS_PER_NODE];
    json_int_t cpu = 0, mem = 0, iops = 0, bw = 0;
    const char *node = NULL;
    uint32_t sid;
    int whole = 0, numa = -1, storage = -1;
    json_t *jg, *jm, *jnc, *jnm;
    size_t ng, nm, nn;
    double score = 0;
    json_int_t share = 0;

    memset(pl, 0, sizeof(*pl));
    if (json_unpack(v,
                    "{s:s, s:o, s:o, s:b, s:i, s:I, s:I, s:o, s:o, s:I,"
                    " s:I, s:i, s?F, s?I}",
                    "node",
                    &node,
                    "gpu",
                    &jg,
                    "gpu_mib",
                    &jm,
                    "whole",
                    &whole,
                    "numa",
                    &numa,
                    "cpu_milli",
                    &cpu,
                    "mem_bytes",
                    &mem,
                    "numa_cpu",
                    &jnc,
                    "numa_mem",
                    &jnm,
                    "disk_iops",
                    &iops,
                    "disk_bw",
                    &bw,
                    "storage",
                    &storage,
                    "score",
                    &score,
                    "gpu_share",
                    &share)
            < 0
        || share < 0 || share > 1000
        || (sid = crater_sched_find_node(d->sched, node))
               == CRATER_SCHED_NO_NODE
        || load_u64s(jg, gpu, CRATER_MAX_GPUS_PER_NODE, &ng) < 0
        || load_u64s(jm, mib, CRATER_MAX_GPUS_PER_NODE, &nm) < 0 || ng != nm
        || load_u64s(jnc, pl->numa_cpu, CRATER_SCHED_MAX_NUMA, &nn) < 0
        || load_u64s(jnm, pl->numa_mem, CRATER_SCHED_MAX_NUMA, &nn) < 0)
        return -1;
    pl->node = sid;
    pl->ngpus = (uint32_t)ng;
    for (size_t i = 0; i < ng; i++) {
        pl->gpu[i] = (uint8_t)gpu[i];
        pl->gpu_mib[i] = (uint32_t)mib[i];
    }
    pl->whole = whole;
    pl->numa = numa;
    pl->cpu_milli = (uint64_t)cpu;
    pl->mem_bytes = (uint64_t)mem;
    pl->disk_iops = (uint64_t)iops;
    pl->disk_bw = (uint64_t)bw;
    pl->storage = storage;
    pl->score = score;
    pl->share_milli = (uint16_t)share;
    return 0;
}

/* ---- JSON forms ---------------------------------------------------------- */

static json_t *ms_or_null(int64_t ms)
{
    return ms ? json_integer(ms) : json_null();
}

/* The reason of the job's last recorded change (borrowed; JSON null
 * when there is none). */
static json_t *final_reason(const djob_t *j)
{
    json_t *last = json_array_get(j->history, json_array_size(j->history) - 1);
    json_t *r = json_object_get(last, "reason");

    return json_is_string(r) ? r : json_null();
}

/* What the job asks, per replica, as the API shows it. */
static json_t *resources_json(const crater_jobspec_t *spec)
{
    const crater_resources_t *r = &spec->resources;

    return json_pack("{s:i, s:I, s:I, s:I}",
                     "gpus",
                     (int)r->gpu.count,
                     "gpu_memory_bytes",
                     (json_int_t)r->gpu.memory_bytes,
                     "cpu_millis",
                     (json_int_t)r->cpu_milli,
                     "memory_bytes",
                     (json_int_t)r->memory_bytes);
}

/* The latest checkpoint, the last progress report, failed attempts. */
static void job_ckpt_view(const djob_t *j, json_t *o)
{
    size_t n = json_array_size(j->ckpts);

    if (n)
        json_object_set(o, "checkpoint", json_array_get(j->ckpts, n - 1));
    if (j->progress_ms)
        json_object_set_new(o,
                            "progress",
                            json_pack("{s:I, s:I}",
                                      "step",
                                      (json_int_t)j->progress_step,
                                      "time_ms",
                                      (json_int_t)j->progress_ms));
    if (j->failures)
        json_object_set_new(o, "failures", json_integer(j->failures));
}

json_t *job_to_json(crater_daemon_t *d, const djob_t *j, bool full)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:I, s:o, s:o, s:i, "
                          "s:b}",
                          "id",
                          "",
                          "name",
                          j->name ? j->name : "",
                          "tenant",
                          j->tenant,
                          "state",
                          job_state_name(j->state),
                          "priority",
                          j->priority,
                          "workloadType",
                          crater_workload_name(j->spec->workload_type),
                          "submitted_ms",
                          (json_int_t)j->submitted_ms,
                          "started_ms",
                          ms_or_null(j->started_ms),
                          "finished_ms",
                          ms_or_null(j->finished_ms),
                          "attempts",
                          (int)j->attempts,
                          "preemptible",
                          j->spec->preemptible);
    json_t *idle;
    char id[24];

    if (!o)
        return NULL;
    snprintf(id, sizeof(id), "%" PRIu64, j->id);
    json_object_set_new(o, "id", json_string(id));
    json_object_set_new(o, "resources", resources_json(j->spec));
    if (job_state_final(j->state) && j->started_ms)
        json_object_set_new(o,
                            "exit",
                            json_pack("{s:i, s:i, s:b}",
                                      "code",
                                      j->exit_code,
                                      "signal",
                                      j->exit_signal,
                                      "oom",
                                      j->oom));
    if (j->array_id)
        json_object_set_new(o,
                            "array",
                            json_pack("{s:o, s:i}",
                                      "id",
                                      json_sprintf("%" PRIu64, j->array_id),
                                      "index",
                                      (int)j->array_index));
    if (job_state_final(j->state))
        json_object_set_new(o,
                            "logs_complete",
                            json_boolean(job_logs_complete(j)));
    if (j->placed || (j->ever_placed && job_state_final(j->state)))
        json_object_set_new(o, "placement", placement_json(d, &j->pl));
    if (j->nrep)
        json_object_set_new(o, "replicas", gang_json(d, j));
    if (j->spec && (j->svc_id || job_is_service(j)))
        service_job_view(d, j, o);
    if (j->last_reason && j->state == JS_PENDING)
        json_object_set_new(o, "reason", json_string(j->last_reason));
    else if (job_state_final(j->state)) /* why it ended (time limit ...) */
        json_object_set(o, "reason", final_reason(j));
    job_ckpt_view(j, o);
    if ((idle = idle_json(d, j)))
        json_object_set_new(o, "idle", idle);
    if ((idle = cost_job_json(d, j)))
        json_object_set_new(o, "cost", idle);
    if ((idle = gshare_json(d, j)))
        json_object_set_new(o, "gpu_share", idle);
    if (full) {
        json_object_set(o, "spec", j->spec_json);
        json_object_set(o, "history", j->history);
    }
    return o;
}

json_t *job_to_store(crater_daemon_t *d, const djob_t *j)
{
    json_t *o = json_pack("{s:I, s:s, s:i, s:I, s:I, s:I, s:i, s:i, s:i,"
                          " s:b, s:b, s:I, s:O, s:O}",
                          "id",
                          (json_int_t)j->id,
                          "state",
                          job_state_name(j->state),
                          "priority",
                          j->priority,
                          "submitted_ms",
                          (json_int_t)j->submitted_ms,
                          "started_ms",
                          (json_int_t)j->started_ms,
                          "finished_ms",
                          (json_int_t)j->finished_ms,
                          "attempts",
                          (int)j->attempts,
                          "exit_code",
                          j->exit_code,
                          "exit_signal",
                          j->exit_signal,
                          "oom",
                          j->oom,
                          "cancel_requested",
                          j->cancel_requested,
                          "lost_since_ms",
                          (json_int_t)j->lost_since_ms,
                          "spec",
                          j->spec_json,
                          "history",
                          j->history);

    if (o && j->array_id)
        json_object_set_new(o,
                            "array",
                            json_pack("{s:I, s:I}",
                                      "id",
                                      (json_int_t)j->array_id,
                                      "index",
                                      (json_int_t)j->array_index));
    if (o && j->placed)
        json_object_set_new(o, "placement", placement_store(d, &j->pl));
    else if (o && j->ever_placed)
        json_object_set_new(o, "last_placement", placement_store(d, &j->pl));
    if (o && j->nrep && j->ever_placed)
        json_object_set_new(o, "replicas", gang_store(d, j));
    if (o && j->ckpts)
        json_object_set(o, "checkpoints", j->ckpts);
    if (o && j->failures)
        json_object_set_new(o, "failures", json_integer(j->failures));
    if (o && j->svc_id)
        json_object_set_new(o, "service", service_job_store(j));
    else if (o && job_is_service(j) && j->svc_version)
        json_object_set_new(o, "service_version", json_integer(j->svc_version));
    if (o && !j->svc_id && j->svc_model)
        json_object_set_new(o, "service_model", json_integer(j->svc_model));
    if (o && !j->svc_id && j->svc_rollout)
        json_object_set(o, "service_rollout", j->svc_rollout);
    return o;
}

void job_log_attempt(djob_t *j, uint32_t attempt)
{
    if (attempt <= j->log_attempt)
        return;
    j->log_attempt = attempt;
    j->log_final = false;
    for (int s = 0; s < 2; s++) {
        j->log_bytes[s] = j->log_expect[s] = 0;
        j->log_truncated[s] = false;
    }
}

bool job_logs_complete(const djob_t *j)
{
    if (!job_state_final(j->state))
        return false;
    if (!j->log_final || j->log_attempt != j->attempts)
        return true; /* no output is on its way */
    for (int s = 0; s < 2; s++)
        if (!j->log_truncated[s] && j->log_bytes[s] < j->log_expect[s])
            return false;
    return true;
}

static djob_t *job_new(void)
{
    djob_t *j = calloc(1, sizeof(*j));

    if (!j)
        return NULL;
    j->history = json_array();
    j->samples = json_array();
    if (!j->history || !j->samples) {
        job_free(j);
        return NULL;
    }
    return j;
}

/* Decode the normalised spec of a stored or submitted job. */
int job_spec_from_norm(crater_daemon_t *d,
                       json_t *norm,
                       crater_jobspec_t **spec,
                       crater_error_t *err)
{
    crater_dec_t dec;

    crater_dec_init(&dec, NULL, 0, err);
    if (crater_jobspec_decode(&dec, norm, spec) < 0)
        return -1;
    return crater_jobspec_validate(*spec, d->kb, err);
}

/* A job without a name is named after its program, as sbatch does. */
const char *job_default_name(const crater_jobspec_t *spec)
{
    const char *slash;

    if (spec->name)
        return spec->name;
    if (!spec->command || !spec->command[0])
        return "";
    slash = strrchr(spec->command[0], '/');
    return slash ? slash + 1 : spec->command[0];
}

static int job_fill(crater_daemon_t *d, djob_t *j, crater_error_t *err)
{
    const char *tenant = j->spec->tenant ? j->spec->tenant : "default";

    j->name = strdup(job_default_name(j->spec));
    j->tenant = strdup(tenant);
    if (!j->name || !j->tenant || gang_init(j, err) < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    return crater_request_from_spec(d->sched, j->spec, &j->req, err);
}

/* The fields a record may lack (older records, jobs without them). */
static void load_optional(djob_t *j, json_t *v)
{
    json_t *a = json_object_get(v, "array");

    j->array_id = (uint64_t)json_integer_value(json_object_get(a, "id"));
    j->array_index = (uint32_t)json_integer_value(json_object_get(a, "index"));
    job_ckpts_load(j, json_object_get(v, "checkpoints"));
    j->failures = (uint32_t)json_integer_value(json_object_get(v, "failures"));
    service_job_load(j, json_object_get(v, "service"));
    if (!j->svc_id)
        j->svc_version =
            (uint32_t)json_integer_value(json_object_get(v, "service_version"));
    if (!j->svc_id)
        j->svc_model =
            (uint64_t)json_integer_value(json_object_get(v, "service_model"));
    if (!j->svc_id && json_is_object(json_object_get(v, "service_rollout")))
        j->svc_rollout = json_incref(json_object_get(v, "service_rollout"));
}

/* Its placement (it holds one), else its last one (it held one), and a
 * gang's replicas. */
static int load_placement(
    crater_daemon_t *d, djob_t *j, json_t *v, json_t *pl, crater_error_t *err)
{
    json_t *last = json_object_get(v, "last_placement");

    if (pl && placement_load(d, pl, &j->pl) == 0)
        j->placed = j->ever_placed = true;
    if (!pl && last && placement_load(d, last, &j->pl) == 0)
        j->ever_placed = true;
    if (j->nrep && j->ever_placed
        && gang_load(d, j, json_object_get(v, "replicas")) < 0)
        return crater_errorf(err,
                             CRATER_EPARSE,
                             "malformed job record: replicas");
    return 0;
}

djob_t *job_from_store(crater_daemon_t *d, json_t *v, crater_error_t *err)
{
    djob_t *j = job_new();
    json_int_t id = 0, sub = 0, st = 0, fin = 0, lost = 0;
    int attempts = 0, cancel = 0, oom = 0;
    const char *state = NULL;
    json_t *spec = NULL, *hist = NULL, *pl = NULL;

    if (!j)
        return NULL;
    if (json_unpack(v,
                    "{s:I, s:s, s:i, s:I, s:I, s:I, s:i, s:i, s:i, s:b,"
                    " s:b, s?I, s:o, s:o, s?o}",
                    "id",
                    &id,
                    "state",
                    &state,
                    "priority",
                    &j->priority,
                    "submitted_ms",
                    &sub,
                    "started_ms",
                    &st,
                    "finished_ms",
                    &fin,
                    "attempts",
                    &attempts,
                    "exit_code",
                    &j->exit_code,
                    "exit_signal",
                    &j->exit_signal,
                    "oom",
                    &oom,
                    "cancel_requested",
                    &cancel,
                    "lost_since_ms",
                    &lost,
                    "spec",
                    &spec,
                    "history",
                    &hist,
                    "placement",
                    &pl)
            < 0
        || id <= 0 || job_state_parse(state) < 0) {
        crater_errorf(err, CRATER_EPARSE, "malformed job record");
        goto fail;
    }
    j->id = (uint64_t)id;
    j->durable = true;
    j->state = (job_state_t)job_state_parse(state);
    j->submitted_ms = sub;
    j->started_ms = st;
    j->finished_ms = fin;
    j->lost_since_ms = lost;
    j->attempts = (uint32_t)attempts;
    j->oom = oom;
    j->cancel_requested = cancel;
    j->spec_json = json_incref(spec);
    json_decref(j->history);
    j->history = json_incref(hist);
    load_optional(j, v);
    if (job_spec_from_norm(d, spec, &j->spec, err) < 0
        || job_fill(d, j, err) < 0 || load_placement(d, j, v, pl, err) < 0)
        goto fail;
    return j;
fail:
    job_free(j);
    return NULL;
}

/* One Job document of doc, expanded through the profile registry of its
 * tenant (the user's, or for an admin the document's "tenant") and
 * decoded and validated like `crater validate`. */
static int parse_doc(crater_daemon_t *d,
                     const char *tenant,
                     crater_doc_t *doc,
                     size_t i,
                     crater_jobspec_t **spec,
                     json_t **norm,
                     crater_error_t *err)
{
    json_t *root = crater_doc_root(doc, i), *job;
    crater_dec_t dec;
    int rc = -1;

    if (!tenant)
        tenant = json_string_value(json_object_get(root, "tenant"));
    *spec = NULL;
    crater_dec_init(&dec, doc, i, err);
    if (crater_kind_of(root) != CRATER_KIND_JOB)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "kind",
                                   "document %zu: kind: expected Job",
                                   i + 1);
    pthread_rwlock_rdlock(&d->prof_lock);
    job = crater_profiles_expand(profiles_for(d, tenant), &dec, root);
    pthread_rwlock_unlock(&d->prof_lock);
    if (job && crater_jobspec_decode(&dec, job, spec) == 0
        && crater_jobspec_validate(*spec, d->kb, err) == 0) {
        *norm = crater_jobspec_encode(*spec);
        rc = *norm ? 0 : crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    if (rc < 0) {
        crater_jobspec_destroy(*spec);
        *spec = NULL;
    }
    json_decref(job);
    return rc;
}

int job_parse_body(crater_daemon_t *d,
                   const char *tenant,
                   const char *body,
                   size_t len,
                   crater_jobspec_t **spec,
                   json_t **norm,
                   crater_error_t *err)
{
    crater_doc_t *doc = NULL;
    int rc = -1;

    *spec = NULL;
    if (crater_doc_parse(body, len, "body", &doc, err) < 0)
        return -1;
    if (crater_doc_count(doc) != 1)
        crater_errorf(err,
                      CRATER_EINVAL,
                      "body holds %zu documents; one is expected here",
                      crater_doc_count(doc));
    else
        rc = parse_doc(d, tenant, doc, 0, spec, norm, err);
    crater_doc_destroy(doc);
    return rc;
}

int job_parse_docs(crater_daemon_t *d,
                   const char *tenant,
                   const char *body,
                   size_t len,
                   job_doc_t **docs,
                   size_t *n,
                   crater_error_t *err)
{
    crater_doc_t *doc = NULL;
    size_t k = 0, nd;

    *docs = NULL;
    *n = 0;
    if (crater_doc_parse(body, len, "body", &doc, err) < 0)
        return -1;
    nd = crater_doc_count(doc);
    if (nd == 0 || !(*docs = calloc(nd, sizeof(**docs)))) {
        crater_errorf(err,
                      nd ? CRATER_ENOMEM : CRATER_EINVAL,
                      nd ? "out of memory" : "body holds no document");
        crater_doc_destroy(doc);
        return -1;
    }
    for (; k < nd; k++)
        if (parse_doc(d,
                      tenant,
                      doc,
                      k,
                      &(*docs)[k].spec,
                      &(*docs)[k].norm,
                      err)
            < 0)
            break;
    crater_doc_destroy(doc);
    *n = k;
    if (k == nd)
        return 0;
    job_docs_free(*docs, k);
    *docs = NULL;
    *n = 0;
    return -1;
}

void job_docs_free(job_doc_t *docs, size_t n)
{
    for (size_t i = 0; docs && i < n; i++) {
        crater_jobspec_destroy(docs[i].spec);
        json_decref(docs[i].norm);
    }
    free(docs);
}

/* ---- persistence and queue ---------------------------------------------- */

/* j queued for job_save_flush(); false when it cannot be (no memory):
   then it is written now. */
static bool save_queue(crater_daemon_t *d, djob_t *j)
{
    if (j->save_queued)
        return true;
    if (d->nsave == d->capsave) {
        size_t cap = d->capsave ? d->capsave * 2 : 64;
        uint64_t *v = realloc(d->save_ids, cap * sizeof(*v));
        if (!v)
            return false;
        d->save_ids = v;
        d->capsave = cap;
    }
    d->save_ids[d->nsave++] = j->id;
    j->save_queued = true;
    return true;
}

void job_save_defer(crater_daemon_t *d)
{
    d->save_defer = true;
}

void job_save_flush(crater_daemon_t *d)
{
    d->save_defer = false;
    for (size_t i = 0; i < d->nsave; i++) {
        djob_t *j = job_find(d, d->save_ids[i]);
        if (j && j->save_queued) {
            j->save_queued = false;
            job_save(d, j, NULL, NULL);
        }
    }
    d->nsave = 0;
}

int job_save(crater_daemon_t *d, djob_t *j, crater_store_done_f cb, void *arg)
{
    char key[64];

    if (!cb && d->save_defer && save_queue(d, j))
        return 0;

    snprintf(key, sizeof(key), KEY_JOBS "%020" PRIu64, j->id);
    return persist_put_json(d, key, job_to_store(d, j), cb, arg);
}

int queue_push_job(crater_daemon_t *d, djob_t *j)
{
    const crater_resources_t *r = &j->spec->resources;
    crater_queue_entry_t e = {0};
    double gpus = r->gpu.count;

    if (r->gpu.memory_bytes)
        gpus *= (double)r->gpu.memory_bytes / (80.0 * (1ull << 30));
    e.id = j->id;
    e.tenant = j->tenant;
    e.priority = j->priority;
    e.deadline_ms = j->spec->deadline_ms;
    e.hard_deadline = j->spec->deadline_ms
                      && j->spec->deadline_policy == CRATER_DEADLINE_HARD;
    e.submit_ms = (uint64_t)j->submitted_ms;
    e.est_runtime_ms = j->spec->time_limit_ms; /* 0: unbounded */
    e.demand[CRATER_QDIM_GPU] = gpus;
    e.demand[CRATER_QDIM_CPU] = (double)r->cpu_milli;
    e.demand[CRATER_QDIM_MEM] = (double)r->memory_bytes;
    if (crater_queue_push(d->queue, &e, NULL) < 0)
        return -1;
    crater_pass_queued(d->pass, j->id, NULL); /* on ENOMEM: a full pass */
    return 0;
}

void job_release(crater_daemon_t *d, djob_t *j)
{
    if (!j->placed)
        return;
    if (j->nrep)
        gang_release(d, j);
    else
        crater_sched_release(d->sched, j->id, NULL);
    j->placed = false;
    loop_capacity_changed(d);
}

/* The job that preempted j waits for one fewer victim. */
static void unblock_preemptor(crater_daemon_t *d, djob_t *j)
{
    djob_t *by = j->preempted_by ? job_find(d, j->preempted_by) : NULL;

    if (by && by->waiting_for)
        by->waiting_for--;
    j->preempted_by = 0;
}

/* The table's effects (lifecycle.h), in the order of their bits. */
static void job_effects(crater_daemon_t *d,
                        djob_t *j,
                        const job_step_t *s,
                        const char *reason,
                        int64_t now)
{
    unsigned fx = s->effects;

    if (fx & JF_ATTEMPT)
        j->attempts++;
    if (fx & JF_UNBLOCK)
        unblock_preemptor(d, j);
    if (fx & JF_CANCEL)
        j->cancel_requested = true;
    if (fx & JF_STOP)
        node_send_stop(d, j, reason);
    if ((fx & JF_STARTED) && !j->started_ms)
        j->started_ms = now;
    if ((fx & JF_RELEASE) && j->nrep)
        gang_ended(d, j, s->to); /* before the release: stop orders need it */
    if (fx & JF_RELEASE)
        job_release(d, j);
    if (fx & JF_FINISHED)
        j->finished_ms = now;
    if ((fx & JF_QUEUE) && j->ever_placed && j->attempts > 1) {
        j->prev_attempt = j->attempts - 1; /* its output may still come */
        j->prev_node = j->pl.node;
    }
    if (fx & JF_QUEUE) {
        j->started_ms = 0;
        queue_push_job(d, j);
    }
    if (fx & JF_DEQUEUE)
        crater_queue_remove(d->queue, j->id, NULL);
}

int job_step(crater_daemon_t *d,
             djob_t *j,
             job_ev_t ev,
             const char *reason,
             int64_t time_ms)
{
    int64_t now = time_ms > 0 ? time_ms : dnow_ms();
    job_step_t s;

    if (job_life_step(j->state, ev, &s) < 0) {
        crater_log(LOG_DEBUG,
                   "job %" PRIu64 ": %s refused in state %s",
                   j->id,
                   job_ev_name(ev),
                   job_state_name(j->state));
        return -1;
    }
    job_effects(d, j, &s, reason, now);
    array_moved(d, j, j->state, s.to);
    backfill_track(d, j, (int)j->state, (int)s.to);
    j->state = s.to;
    job_event(j, now, s.to, reason);
    return 0;
}

int job_apply_at(crater_daemon_t *d,
                 djob_t *j,
                 job_ev_t ev,
                 const char *reason,
                 int64_t time_ms)
{
    if (job_step(d, j, ev, reason, time_ms) < 0)
        return -1;
    job_save(d, j, NULL, NULL);
    d->dirty = true;
    return 0;
}

int job_apply(crater_daemon_t *d, djob_t *j, job_ev_t ev, const char *reason)
{
    return job_apply_at(d, j, ev, reason, 0);
}
