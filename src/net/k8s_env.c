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
