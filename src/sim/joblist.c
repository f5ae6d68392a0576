/* joblist.c - Crater's own replay input: a JobList document of job specs
 * with submit offsets and durations (format in include/crater/replay.h
 * and doc/simulator.md).
 *
 * Every field goes through the strict decoding helpers, and each spec
 * through crater_jobspec_decode() with the path extended by
 * "jobs[i].spec", so a mistake deep in a spec is reported exactly as
 * `crater validate` would, with the file's line.
 */
#include <stdlib.h>
#include <string.h>

#include "crater/dec.h"
#include "crater/jobspec.h"
#include "crater/queue.h"
#include "crater/replay.h"

#define JOBLIST_MAX 1000000
#define NS_PER_MS 1000000ull

struct entry {
    uint64_t submit_ms, duration_ms;
    int cls; /* crater_replay_class_t, or -1: from the spec's priority */
    crater_jobspec_t *spec;
};

struct crater_joblist {
    struct entry *e;
    size_t n;
};

static const char *const class_names[] = {"high", "normal", "low"};

/* ---- decoding ------------------------------------------------------------ */

static int f_kind(crater_dec_t *d, json_t *v, void *obj)
{
    static const char *const kinds[] = {"JobList"};
    int k;

    (void)obj;
    return crater_dec_enum(d, v, kinds, 1, &k);
}

static int f_api(crater_dec_t *d, json_t *v, void *obj)
{
    static const char *const apis[] = {"crater/v1"};
    int k;

    (void)obj;
    return crater_dec_enum(d, v, apis, 1, &k);
}

static int f_submit(crater_dec_t *d, json_t *v, void *obj)
{
    uint64_t ns;

    if (crater_dec_quantity(d, v, CRATER_DIM_DURATION, &ns) < 0)
        return -1;
    ((struct entry *)obj)->submit_ms = ns / NS_PER_MS;
    return 0;
}

static int f_duration(crater_dec_t *d, json_t *v, void *obj)
{
    uint64_t ns;

    if (crater_dec_quantity(d, v, CRATER_DIM_DURATION, &ns) < 0)
        return -1;
    if (ns < NS_PER_MS)
        return crater_dec_fail(d,
                               CRATER_ERANGE,
                               "duration must be at least 1ms");
    ((struct entry *)obj)->duration_ms = ns / NS_PER_MS;
    return 0;
}

static int f_class(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_enum(d, v, class_names, 3, &((struct entry *)obj)->cls);
}

static int f_spec(crater_dec_t *d, json_t *v, void *obj)
{
    struct entry *e = obj;

    if (!json_is_object(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a job spec, got %s",
                               crater_dec_typename(v));
    return crater_jobspec_decode(d, v, &e->spec);
}

static const crater_dec_field_t entry_fields[] = {
    {"submit", f_submit, CRATER_FIELD_REQUIRED},
    {"duration", f_duration, CRATER_FIELD_REQUIRED},
    {"priorityClass", f_class, 0},
    {"spec", f_spec, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

static int f_entry(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    struct crater_joblist *jl = obj;
    struct entry *e = &jl->e[i];

    e->cls = -1;
    jl->n = i + 1; /* destroy frees a spec decoded before a later error */
    if (!json_is_object(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected an object, got %s",
                               crater_dec_typename(v));
    return crater_dec_object(d, v, entry_fields, e);
}

static int f_jobs(crater_dec_t *d, json_t *v, void *obj)
{
    struct crater_joblist *jl = obj;
    size_t n = json_array_size(v);

    if (!json_is_array(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a list, got %s",
                               crater_dec_typename(v));
    if (!(jl->e = calloc(n ? n : 1, sizeof(*jl->e))))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    return crater_dec_array(d, v, JOBLIST_MAX, f_entry, jl);
}

static const crater_dec_field_t list_fields[] = {
    {"apiVersion", f_api, 0},
    {"kind", f_kind, CRATER_FIELD_REQUIRED},
    {"jobs", f_jobs, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

int crater_joblist_decode(const crater_doc_t *doc,
                          crater_joblist_t **out,
                          crater_error_t *err)
{
    struct crater_joblist *jl = calloc(1, sizeof(*jl));
    json_t *root = crater_doc_root(doc, 0);
    crater_dec_t d;

    if (!jl)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    crater_dec_init(&d, doc, 0, err);
    if (!root || !json_is_object(root)) {
        crater_dec_fail(&d, CRATER_ETYPE, "a JobList must be an object");
        crater_joblist_destroy(jl);
        return -1;
    }
    if (crater_dec_object(&d, root, list_fields, jl) < 0) {
        crater_joblist_destroy(jl);
        return -1;
    }
    *out = jl;
    return 0;
}

int crater_joblist_load(const char *path,
                        crater_joblist_t **out,
                        crater_error_t *err)
{
    crater_doc_t *doc;

    if (crater_doc_load(path, &doc, err) < 0)
        return -1;
    int rc = crater_joblist_decode(doc, out, err);
    crater_doc_destroy(doc);
    return rc;
}

void crater_joblist_destroy(crater_joblist_t *jl)
{
    if (!jl)
        return;
    for (size_t i = 0; i < jl->n; i++)
        crater_jobspec_destroy(jl->e[i].spec);
    free(jl->e);
    free(jl);
}

size_t crater_joblist_count(const crater_joblist_t *jl)
{
    return jl ? jl->n : 0;
}

/* ---- jobs ---------------------------------------------------------------- */

static crater_replay_class_t class_of(const struct entry *e,
                                      int32_t *prio,
                                      crater_error_t *err,
                                      int *rc)
{
    int32_t p;

    *rc = 0;
    if (e->cls >= 0)
        return (crater_replay_class_t)e->cls;
    if (crater_effective_priority(e->spec->priority_class,
                                  e->spec->priority,
                                  &p,
                                  err)
        < 0) {
        *rc = -1;
        return CRATER_REPLAY_NORMAL;
    }
    *prio = p;
    return p >= 1000 ? CRATER_REPLAY_HIGH
           : p < 0   ? CRATER_REPLAY_LOW
                     : CRATER_REPLAY_NORMAL;
}

/* Largest GPU memory in the cluster, MiB: a slice's requested share is
 * taken against it (an approximation: the GPU it lands on may be
 * smaller). */
static double max_gpu_mib(const crater_sched_t *s)
{
    double m = 0;

    for (uint32_t i = 0; i < crater_sched_node_count(s); i++) {
        const crater_node_t *n = crater_sched_node(s, i);
        for (size_t g = 0; g < n->ngpus; g++)
            if ((double)(n->gpus[g].memory_bytes >> 20) > m)
                m = (double)(n->gpus[g].memory_bytes >> 20);
    }
    return m;
}

static int entry_job(const struct entry *e,
                     const crater_sched_t *s,
                     crater_replay_policy_t p,
                     double gmib,
                     crater_replay_job_t *j,
                     crater_error_t *err)
{
    int rc;
    int32_t prio = 0;
    crater_replay_class_t cls = class_of(e, &prio, err, &rc);

    if (rc < 0 || crater_request_from_spec(s, e->spec, &j->req, err) < 0)
        return -1;
    j->submit_ms = e->submit_ms;
    j->runtime_ms = e->duration_ms;
    j->gpu_milli = j->req.gpus * 1000u;
    if (j->req.slice_mib && gmib > 0) {
        double share = j->req.slice_mib / gmib;
        j->gpu_milli =
            (uint32_t)(j->req.gpus * 1000.0 * (share < 1 ? share : 1));
    }
    crater_replay_job_class(j, cls, p);
    if (e->cls < 0) { /* the spec's own priority and preemptibility, as
                         craterd queues them (test_differential.sh) */
        j->req.priority = prio;
        j->req.preemptible = p == CRATER_REPLAY_CRATER && e->spec->preemptible;
    } else if (p == CRATER_REPLAY_CRATER && e->spec->preemptible) {
        j->req.preemptible = true;
    }
    return 0;
}

int crater_joblist_jobs(const crater_joblist_t *jl,
                        const crater_sched_t *s,
                        crater_replay_policy_t p,
                        crater_replay_job_t **jobs,
                        size_t *njobs,
                        crater_error_t *err)
{
    size_t total = 0, k = 0;
    double gmib = max_gpu_mib(s);

    for (size_t i = 0; i < jl->n; i++)
        total += jl->e[i].spec->replicas ? jl->e[i].spec->replicas : 1;
    crater_replay_job_t *j = calloc(total ? total : 1, sizeof(*j));
    if (!j)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    for (size_t i = 0; i < jl->n; i++) {
        uint32_t r = jl->e[i].spec->replicas ? jl->e[i].spec->replicas : 1;
        for (uint32_t x = 0; x < r; x++, k++)
            if (entry_job(&jl->e[i], s, p, gmib, &j[k], err) < 0) {
                char why[sizeof(err->text)];
                memcpy(why, err->text, sizeof(why));
                crater_errorf_field(err,
                                    err->errnum,
                                    "jobs",
                                    "jobs[%zu]: %s",
                                    i,
                                    why);
                free(j);
                return -1;
            }
    }
    *jobs = j;
    *njobs = total;
    return 0;
}
