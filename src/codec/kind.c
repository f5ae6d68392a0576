/* kind.c - classify a document root by its `kind` field or its shape.
 *
 * Shape rules, used only when `kind` is absent: a config has one of the
 * config sections at top level; a cluster has `nodes`; a node has `gpus`,
 * `cpus` or `memory` as a list; a profile has `version` together with a
 * `training` or `inference` mapping; anything else is a job (the legacy
 * {gpu: 2} form included).
 */
#include "crater/kind.h"

#include <string.h>

static const char *const kind_names[] = {
    [CRATER_KIND_UNKNOWN] = "unknown",
    [CRATER_KIND_JOB] = "Job",
    [CRATER_KIND_PROFILE] = "Profile",
    [CRATER_KIND_NODE] = "Node",
    [CRATER_KIND_CLUSTER] = "Cluster",
    [CRATER_KIND_CONFIG] = "Config",
    [CRATER_KIND_JOBLIST] = "JobList",
};

const char *crater_kind_name(crater_kind_t kind)
{
    return kind <= CRATER_KIND_JOBLIST ? kind_names[kind] : "unknown";
}

static crater_kind_t explicit_kind(const char *s)
{
    for (int k = CRATER_KIND_JOB; k <= CRATER_KIND_JOBLIST; k++)
        if (strcmp(s, kind_names[k]) == 0)
            return (crater_kind_t)k;
    return CRATER_KIND_UNKNOWN;
}

static int has(const json_t *root, const char *key)
{
    return json_object_get(root, key) != NULL;
}

static int is_config(const json_t *root)
{
    static const char *const sections[] = {
        "scheduler",
        "agent",
        "monitoring",
        "server",
        "store",
        "hardware_knowledge_base",
    };

    for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
        if (has(root, sections[i]))
            return 1;
    return 0;
}

crater_kind_t crater_kind_of(const json_t *root)
{
    const json_t *kind = json_object_get(root, "kind");

    if (!json_is_object(root))
        return CRATER_KIND_UNKNOWN;
    if (kind)
        return json_is_string(kind) ? explicit_kind(json_string_value(kind))
                                    : CRATER_KIND_UNKNOWN;
    if (is_config(root))
        return CRATER_KIND_CONFIG;
    if (has(root, "nodes"))
        return CRATER_KIND_CLUSTER;
    if (json_is_array(json_object_get(root, "gpus"))
        || json_is_array(json_object_get(root, "cpus"))
        || json_is_array(json_object_get(root, "memory")))
        return CRATER_KIND_NODE;
    if (has(root, "version")
        && (json_is_object(json_object_get(root, "training"))
            || json_is_object(json_object_get(root, "inference"))))
        return CRATER_KIND_PROFILE;
    return CRATER_KIND_JOB;
}
