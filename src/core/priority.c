/* priority.c - the built-in priority classes (priority.h): job semantics
 * the job-spec validator and the queue share, so they live on the core
 * floor (scripts/check-layers.sh), not in the queue that orders by them.
 */
#include "crater/priority.h"

#include <string.h>

static const struct {
    const char *name;
    int32_t value;
} classes[] = {
    {"critical", 1000000},
    {"high", 1000},
    {"normal", 0},
    {"low", -1000},
    {"best-effort", -1000000},
};

#define NCLASSES (sizeof(classes) / sizeof(classes[0]))

int crater_priority_class_value(const char *name, int32_t *value)
{
    if (!name)
        return -1;
    for (size_t i = 0; i < NCLASSES; i++) {
        if (strcmp(name, classes[i].name) == 0) {
            *value = classes[i].value;
            return 0;
        }
    }
    return -1;
}

const char *crater_priority_class_name(size_t i)
{
    return i < NCLASSES ? classes[i].name : NULL;
}

const char *crater_priority_class_list(void)
{
    return "critical, high, normal, low, best-effort";
}

int crater_effective_priority(const char *priority_class,
                              int32_t priority,
                              int32_t *out,
                              crater_error_t *err)
{
    int32_t v;

    if (!priority_class) {
        *out = priority;
        return 0;
    }
    if (crater_priority_class_value(priority_class, &v) < 0)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "priorityClass",
                                   "unknown priority class '%.40s' (known: %s)",
                                   priority_class,
                                   crater_priority_class_list());
    *out = v;
    return 0;
}
