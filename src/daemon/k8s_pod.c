/* k8s_pod.c - what a Kubernetes Pod asks of Crater, read from the v1.Pod
 * that kube-scheduler puts in an extender request (doc/kubernetes.md).
 *
 * The Pod is Kubernetes' object, not ours: it has hundreds of fields and
 * gains more every release, so it is NOT decoded strictly. Only the fields
 * that carry a request are read, and those strictly: wrong types and bad
 * quantities are errors naming the field ("Pod.spec.containers[1].
 * resources.requests.cpu: ..."). What is read:
 *
 *   metadata.name, .namespace, .uid            who (uid keys the binding)
 *   metadata.annotations["crater.io/gpu"]        GPUs (a count)
 *   metadata.annotations["crater.io/gpu-memory"] per-GPU slice (a quantity)
 *   spec.containers[].resources.requests/limits  cpu, memory,
 *        nvidia.com/gpu (whole GPUs), crater.io/gpu-memory (slice)
 *   spec.initContainers[] the same; the pod needs max(sum of containers,
 *        largest init container), as kube-scheduler computes it.
 *
 * An annotation wins over the extended resource. A request falls back to
 * the limit when absent (Kubernetes defaults requests to limits).
 * Quantities are Kubernetes' (resource.Quantity): a decimal number with an
 * optional suffix m, k M G T P E or Ki Mi Gi Ti Pi Ei; a bare number of
 * memory means bytes (unlike Crater's own specs, which refuse it). They are
 * kept exactly in thousandths of the unit.
 *
 * The request is turned into a Crater job spec (JSON, numbers in base
 * units) and parsed by the ordinary job parser, so defaults, validation
 * and the compiled request are the same as for `crater submit`.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/internal.h"

/* One suffix of a Kubernetes quantity: the multiplier in units. */
typedef struct qsuffix {
    const char *s;
    uint64_t mul;
} qsuffix_t;

static const qsuffix_t qsuffixes[] = {
    {"Ki", 1ull << 10},
    {"Mi", 1ull << 20},
    {"Gi", 1ull << 30},
    {"Ti", 1ull << 40},
    {"Pi", 1ull << 50},
    {"Ei", 1ull << 60},
    {"k", 1000ull},
    {"M", 1000000ull},
    {"G", 1000000000ull},
    {"T", 1000000000000ull},
    {"P", 1000000000000000ull},
    {"E", 1000000000000000000ull},
    {"", 1},
};

/* Mantissa "12.5" as thousandths (12500); -1 on junk or overflow. */
static int mantissa_milli(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    int frac = -1; /* digits after the point so far; -1 before it */

    if (n == 0 || (n == 1 && s[0] == '.'))
        return -1; /* "." alone is no number; ".5" is one */
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '.' && frac < 0) {
            frac = 0;
            continue;
        }
        if (s[i] < '0' || s[i] > '9' || frac >= 3 || v > UINT64_MAX / 20)
            return -1; /* more than 3 decimals are below a milli-unit */
        v = v * 10 + (uint64_t)(s[i] - '0');
        frac += frac >= 0;
    }
    for (int k = frac < 0 ? 0 : frac; k < 3; k++) {
        if (v > UINT64_MAX / 10)
            return -1;
        v *= 10;
    }
    *out = v;
    return 0;
}

int k8s_quantity_milli(const char *q, uint64_t *out)
{
    size_t n = strlen(q), digits = strspn(q, "0123456789.");
    uint64_t m;

    if (n > 1 && digits == n - 1 && q[n - 1] == 'm') /* "500m" */
        return mantissa_milli(q, digits, &m) < 0 ? -1 : (*out = m / 1000, 0);
    for (size_t i = 0; digits && i < sizeof(qsuffixes) / sizeof(*qsuffixes);
         i++)
        if (strcmp(q + digits, qsuffixes[i].s) == 0) {
            uint64_t mul = qsuffixes[i].mul;
            if (mantissa_milli(q, digits, &m) < 0 || m > UINT64_MAX / mul)
                return -1;
            *out = m * mul;
            return 0;
        }
    return -1;
}

/* Read one quantity value (a string, or a JSON integer) at path. */
static int quantity_at(json_t *v,
                       const char *path,
                       uint64_t *milli,
                       crater_error_t *err)
{
    char buf[64];
    const char *q = buf;

    if (json_is_integer(v) && json_integer_value(v) >= 0)
        snprintf(buf,
                 sizeof(buf),
                 "%" JSON_INTEGER_FORMAT,
                 json_integer_value(v));
    else if (json_is_string(v))
        q = json_string_value(v);
    else
        return crater_errorf_field(err,
                                   CRATER_ETYPE,
                                   path,
                                   "%s: expected a quantity string",
                                   path);
    if (k8s_quantity_milli(q, milli) < 0)
        return crater_errorf_field(err,
                                   CRATER_EUNIT,
                                   path,
                                   "%s: '%s' is not a Kubernetes quantity "
                                   "(e.g. 500m, 2, 20Gi)",
                                   path,
                                   q);
    return 0;
}

/* The resources Crater reads from one container, in thousandths. */
enum {
    R_CPU,
    R_MEM,
    R_NVGPU,
    R_GPUMEM,
    R_N
};
static const char *const rnames[R_N] = {"cpu",
                                        "memory",
                                        "nvidia.com/gpu",
                                        "crater.io/gpu-memory"};

static int container_res(json_t *c,
                         const char *path,
                         uint64_t r[R_N],
                         crater_error_t *err)
{
    json_t *res = json_object_get(c, "resources");
    char p[192];

    memset(r, 0, R_N * sizeof(*r));
    if (!res || json_is_null(res))
        return 0;
    if (!json_is_object(res))
        return crater_errorf_field(err,
                                   CRATER_ETYPE,
                                   path,
                                   "%s.resources: expected an object",
                                   path);
    for (int pass = 0; pass < 2; pass++) { /* limits, then requests win */
        const char *k = pass ? "requests" : "limits";
        json_t *m = json_object_get(res, k);
        if (!m || json_is_null(m))
            continue;
        snprintf(p, sizeof(p), "%s.resources.%s", path, k);
        if (!json_is_object(m))
            return crater_errorf_field(err,
                                       CRATER_ETYPE,
                                       p,
                                       "%s: expected an object",
                                       p);
        for (int i = 0; i < R_N; i++) {
            json_t *v = json_object_get(m, rnames[i]);
            char fp[256];
            snprintf(fp, sizeof(fp), "%s.%s", p, rnames[i]);
            if (v && quantity_at(v, fp, &r[i], err) < 0)
                return -1;
        }
    }
    return 0;
}

/* Sum (init: max) of the containers of list key into tot. */
static int containers_res(json_t *spec,
                          const char *key,
                          bool init,
                          uint64_t tot[R_N],
                          crater_error_t *err)
{
    json_t *a = json_object_get(spec, key), *c;
    size_t i;
    char p[96];

    memset(tot, 0, R_N * sizeof(*tot));
    if (!a || json_is_null(a))
        return 0;
    if (!json_is_array(a))
        return crater_errorf_field(err,
                                   CRATER_ETYPE,
                                   key,
                                   "Pod.spec.%s: expected an array",
                                   key);
    json_array_foreach(a, i, c)
    {
        uint64_t r[R_N];
        snprintf(p, sizeof(p), "Pod.spec.%s[%zu]", key, i);
        if (container_res(c, p, r, err) < 0)
            return -1;
        for (int k = 0; k < R_N; k++)
            tot[k] = init ? (r[k] > tot[k] ? r[k] : tot[k]) : tot[k] + r[k];
    }
    return 0;
}

/* A string at obj[key] (absent: def); field path for errors. */
static int str_at(json_t *obj,
                  const char *key,
                  const char *path,
                  const char *def,
                  const char **out,
                  crater_error_t *err)
{
    json_t *v = obj ? json_object_get(obj, key) : NULL;

    *out = def;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return crater_errorf_field(err,
                                   CRATER_ETYPE,
                                   path,
                                   "%s: expected a string",
                                   path);
    *out = json_string_value(v);
    return 0;
}

static int pod_meta(json_t *pod, k8s_pod_t *out, crater_error_t *err)
{
    json_t *md = json_object_get(pod, "metadata");
    json_t *an;

    if (!json_is_object(md))
        return crater_errorf_field(err,
                                   CRATER_ETYPE,
                                   "Pod.metadata",
                                   "Pod.metadata: expected an object");
    if (str_at(md, "name", "Pod.metadata.name", "", &out->name, err) < 0
        || str_at(md,
                  "namespace",
                  "Pod.metadata.namespace",
                  "default",
                  &out->ns,
                  err)
               < 0
        || str_at(md, "uid", "Pod.metadata.uid", "", &out->uid, err) < 0)
        return -1;
    an = json_object_get(md, "annotations");
    if (an && !json_is_null(an) && !json_is_object(an))
        return crater_errorf_field(err,
                                   CRATER_ETYPE,
                                   "Pod.metadata.annotations",
                                   "Pod.metadata.annotations: expected an "
                                   "object");
    out->annotations = json_is_object(an) ? an : NULL;
    return 0;
}

/* The annotations override the extended resources (thousandths). */
static int pod_annotations(const k8s_pod_t *pod,
                           uint64_t *ngpu_milli,
                           uint64_t *gpumem_milli,
                           crater_error_t *err)
{
    static const char *keys[2] = {"crater.io/gpu", "crater.io/gpu-memory"};
    uint64_t *outs[2] = {ngpu_milli, gpumem_milli};

    for (int i = 0; i < 2 && pod->annotations; i++) {
        json_t *v = json_object_get(pod->annotations, keys[i]);
        char p[96];
        snprintf(p, sizeof(p), "Pod.metadata.annotations.%s", keys[i]);
        if (v && quantity_at(v, p, outs[i], err) < 0)
            return -1;
    }
    return 0;
}

static int pod_resources(json_t *pod, k8s_pod_t *out, crater_error_t *err)
{
    json_t *spec = json_object_get(pod, "spec");
    uint64_t run[R_N], init[R_N];

    if (!json_is_object(spec))
        return crater_errorf_field(err,
                                   CRATER_ETYPE,
                                   "Pod.spec",
                                   "Pod.spec: expected an object");
    if (containers_res(spec, "containers", false, run, err) < 0
        || containers_res(spec, "initContainers", true, init, err) < 0)
        return -1;
    for (int k = 0; k < R_N; k++)
        run[k] = init[k] > run[k] ? init[k] : run[k];
    if (pod_annotations(out, &run[R_NVGPU], &run[R_GPUMEM], err) < 0)
        return -1;
    if (run[R_NVGPU] % 1000)
        return crater_errorf_field(err,
                                   CRATER_ERANGE,
                                   "Pod.metadata.annotations.crater.io/gpu",
                                   "Pod: a GPU count must be whole");
    out->gpus = (uint32_t)(run[R_NVGPU] / 1000);
    out->gpu_mem_bytes = run[R_GPUMEM] / 1000;
    if (out->gpu_mem_bytes && !out->gpus)
        out->gpus = 1; /* a slice is of one GPU unless told */
    out->cpu_milli = run[R_CPU];
    out->mem_bytes = run[R_MEM] / 1000;
    return 0;
}

int k8s_pod_read(json_t *pod, k8s_pod_t *out, crater_error_t *err)
{
    memset(out, 0, sizeof(*out));
    if (!json_is_object(pod))
        return crater_errorf_field(err,
                                   CRATER_ETYPE,
                                   "Pod",
                                   "Pod: expected an object (v1.Pod)");
    return pod_meta(pod, out, err) < 0 || pod_resources(pod, out, err) < 0 ? -1
                                                                           : 0;
}

/* The Crater job spec equal to the pod's request, as JSON. */
static json_t *pod_jobspec(const k8s_pod_t *p)
{
    json_t *res = json_object(), *spec;

    if (p->cpu_milli) {
        char cpu[32];
        snprintf(cpu, sizeof(cpu), "%" PRIu64 "m", p->cpu_milli);
        json_object_set_new(res, "cpu", json_string(cpu));
    }
    if (p->mem_bytes)
        json_object_set_new(res,
                            "memory",
                            json_integer((json_int_t)p->mem_bytes));
    if (p->gpus) {
        json_t *g = json_pack("{s:I}", "count", (json_int_t)p->gpus);
        if (p->gpu_mem_bytes)
            json_object_set_new(g,
                                "memory",
                                json_integer((json_int_t)p->gpu_mem_bytes));
        json_object_set_new(res, "gpu", g);
    }
    spec = json_pack("{s:s, s:o, s:[s]}",
                     "name",
                     "k8s-pod",
                     "resources",
                     res,
                     "command",
                     "k8s-pod");
    return spec;
}

int k8s_pod_spec(crater_daemon_t *d,
                 const k8s_pod_t *p,
                 crater_jobspec_t **spec,
                 crater_error_t *err)
{
    json_t *js = pod_jobspec(p), *norm = NULL;
    char *text = js ? json_dumps(js, JSON_COMPACT) : NULL;
    int rc = -1;

    *spec = NULL;
    if (!text)
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
    else if (job_parse_body(d, NULL, text, strlen(text), spec, &norm, err)
             == 0) {
        job_defaults(d, *spec, norm);
        rc = 0;
    }
    json_decref(norm);
    json_decref(js);
    free(text);
    return rc;
}
