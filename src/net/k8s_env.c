/* k8s_env.c - a placement's GPU environment as Kubernetes EnvVars (see
 * k8s_env.h). Why a placement object and not crater_placement_t: the CLI
 * only has the API's JSON, and craterd builds that JSON anyway, so one
 * reader serves both. Why the slice file path is named here: the slice
 * file is made on the node by whoever starts the pod's containers (the
 * agent does it for Crater tasks; for pods that is the container part of
 * the bridge, doc/kubernetes.md), and the pod must be told the same path.
 */
#include "net/k8s_env.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void env_add(json_t *env, const char *name, const char *value)
{
    json_array_append_new(env,
                          json_pack("{s:s, s:s}",
                                    "name",
                                    name,
                                    "value",
                                    value));
}

/* The GPUs' UUIDs, comma-separated, into buf; their count. */
static size_t gpu_uuids(const json_t *gpus, char *buf, size_t n)
{
    size_t off = 0, i;
    json_t *g;

    buf[0] = '\0';
    json_array_foreach(gpus, i, g)
    {
        const char *u = json_string_value(json_object_get(g, "uuid"));
        int w = snprintf(buf + off, n - off, "%s%s", i ? "," : "", u ? u : "");
        if (w < 0 || (size_t)w >= n - off)
            break;
        off += (size_t)w;
    }
    return json_array_size(gpus);
}

json_t *crater__k8s_slice_env(const json_t *placement,
                              uint64_t ctx_bytes,
                              const char *key)
{
    json_t *env = json_array();
    const json_t *gpus = json_object_get(placement, "gpus");
    char uuids[1024], buf[256];

    if (!env || gpu_uuids(gpus, uuids, sizeof(uuids)) == 0)
        return env;
    env_add(env, "CUDA_VISIBLE_DEVICES", uuids);
    env_add(env, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    if (json_is_true(json_object_get(placement, "whole_gpus")))
        return env;
    env_add(env, "LD_PRELOAD", CRATER_K8S_GPUSLICE_LIB);
    snprintf(buf,
             sizeof(buf),
             "/dev/shm/crater-k8s-%s.slice",
             key && *key ? key : "pod");
    env_add(env, "CRATER_GPUSLICE_FILE", buf);
    snprintf(buf, sizeof(buf), "%" PRIu64, ctx_bytes);
    env_add(env, "CRATER_GPUSLICE_CTX_OVERHEAD", buf);
    return env;
}

/* ---- the manifest ------------------------------------------------------ */

/* A Kubernetes name from a Crater one (lowercase, [a-z0-9-.]). */
static void k8s_name(const char *in, char *out, size_t n)
{
    size_t k = 0;

    for (; in && *in && k + 1 < n; in++) {
        char c = *in;
        c = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
        out[k++] = ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'
                    || c == '.')
                       ? c
                       : '-';
    }
    out[k] = '\0';
    if (k == 0)
        snprintf(out, n, "crater-job");
}

static json_t *resources(const crater_jobspec_t *spec)
{
    const crater_resources_t *r = &spec->resources;
    json_t *req = json_object(), *lim = json_object();
    char buf[32];

    if (r->cpu_milli) {
        snprintf(buf, sizeof(buf), "%" PRIu64 "m", r->cpu_milli);
        json_object_set_new(req, "cpu", json_string(buf));
    }
    if (r->memory_bytes) {
        snprintf(buf, sizeof(buf), "%" PRIu64, r->memory_bytes);
        json_object_set_new(req, "memory", json_string(buf));
    }
    if (r->gpu.count && !r->gpu.memory_bytes) {
        snprintf(buf, sizeof(buf), "%" PRIu32, r->gpu.count);
        json_object_set_new(lim, "nvidia.com/gpu", json_string(buf));
    }
    return json_pack("{s:o, s:o}", "requests", req, "limits", lim);
}

static json_t *container(const crater_jobspec_t *spec, json_t *env)
{
    json_t *c = json_pack("{s:s, s:s, s:o}",
                          "name",
                          "main",
                          "image",
                          spec->image ? spec->image : "busybox",
                          "resources",
                          resources(spec));
    json_t *cmd = json_array();

    for (char **a = spec->command; a && *a; a++)
        json_array_append_new(cmd, json_string(*a));
    json_object_set_new(c, "command", cmd);
    for (size_t i = spec->nenv; i > 0; i--) /* the job's own go first */
        json_array_insert_new(env,
                              0,
                              json_pack("{s:s, s:s}",
                                        "name",
                                        spec->env[i - 1].key,
                                        "value",
                                        spec->env[i - 1].value));
    if (json_array_size(env))
        json_object_set_new(c, "env", json_incref(env));
    json_decref(env);
    return c;
}

/* The node names of a job object's placement(s), each once. */
static json_t *placed_nodes(const json_t *job)
{
    json_t *out = json_array(), *rep;
    const json_t *pl = json_object_get(job, "placement");
    size_t i;

    if (pl)
        json_array_append(out, json_object_get(pl, "node"));
    json_array_foreach(json_object_get(job, "replicas"), i, rep)
    {
        json_t *n = json_object_get(json_object_get(rep, "placement"), "node");
        size_t k;
        json_t *seen;
        int dup = 0;
        json_array_foreach(out, k, seen) dup |= json_equal(seen, n);
        if (json_is_string(n) && !dup)
            json_array_append(out, n);
    }
    return out;
}

static json_t *affinity(json_t *nodes)
{
    return json_pack("{s:{s:{s:[{s:[{s:s, s:s, s:o}]}]}}}",
                     "nodeAffinity",
                     "requiredDuringSchedulingIgnoredDuringExecution",
                     "nodeSelectorTerms",
                     "matchExpressions",
                     "key",
                     "kubernetes.io/hostname",
                     "operator",
                     "In",
                     "values",
                     nodes);
}

static json_t *pod_meta(const crater_jobspec_t *spec, const char *name)
{
    const crater_gpu_req_t *g = &spec->resources.gpu;
    json_t *md = json_pack("{s:s, s:{s:s}}",
                           "name",
                           name,
                           "labels",
                           "crater.io/job",
                           name);
    char buf[32];

    if (g->count && g->memory_bytes) { /* a slice: the extender's keys */
        json_t *an = json_object();
        snprintf(buf, sizeof(buf), "%" PRIu32, g->count);
        json_object_set_new(an, "crater.io/gpu", json_string(buf));
        snprintf(buf, sizeof(buf), "%" PRIu64, g->memory_bytes);
        json_object_set_new(an, "crater.io/gpu-memory", json_string(buf));
        json_object_set_new(md, "annotations", an);
    }
    return md;
}

json_t *crater__k8s_manifest(const crater_jobspec_t *spec,
                             const json_t *job,
                             uint64_t ctx_bytes)
{
    char name[64];
    bool multi = spec->replicas > 1;
    json_t *env, *podspec, *nodes = job ? placed_nodes(job) : NULL;
    const json_t *pl = job ? json_object_get(job, "placement") : NULL;

    k8s_name(spec->name, name, sizeof(name));
    env = !multi && pl ? crater__k8s_slice_env(pl, ctx_bytes, name)
                       : json_array();
    podspec = json_pack("{s:s, s:[o]}",
                        "restartPolicy",
                        "Never",
                        "containers",
                        container(spec, env));
    if (nodes && json_array_size(nodes))
        json_object_set_new(podspec, "affinity", affinity(nodes));
    else
        json_decref(nodes);
    if (!multi)
        return json_pack("{s:s, s:s, s:o, s:o}",
                         "apiVersion",
                         "v1",
                         "kind",
                         "Pod",
                         "metadata",
                         pod_meta(spec, name),
                         "spec",
                         podspec);
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:I, s:I, s:{s:o, s:o}}}",
                     "apiVersion",
                     "batch/v1",
                     "kind",
                     "Job",
                     "metadata",
                     "name",
                     name,
                     "spec",
                     "completionMode",
                     "Indexed",
                     "completions",
                     (json_int_t)spec->replicas,
                     "parallelism",
                     (json_int_t)spec->replicas,
                     "template",
                     "metadata",
                     pod_meta(spec, name),
                     "spec",
                     podspec);
}
