/* priority.h - the built-in priority classes and a job's effective
 * priority. Job semantics (the core floor): the job-spec validator, the
 * queue and the scheduler all use them. Static tables, no state.
 */
#ifndef CRATER_PRIORITY_H
#define CRATER_PRIORITY_H

#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"

/* Look up a built-in class: critical 1000000, high 1000, normal 0,
 * low -1000, best-effort -1000000. Names are matched exactly (lower
 * case). 0 and *value set on success; -1 (value untouched) when name is
 * unknown or NULL. */
int crater_priority_class_value(const char *name, int32_t *value);

/* The i-th class name in descending value order ("critical" first), NULL
 * past the end. Static strings. */
const char *crater_priority_class_name(size_t i);

/* "critical, high, normal, low, best-effort": for error messages. Static
 * string. */
const char *crater_priority_class_list(void);

/* A job's effective priority: the class value when priority_class is not
 * NULL (priority is then ignored), else priority. An unknown class is
 * CRATER_EINVAL naming field "priorityClass" and listing the classes. */
int crater_effective_priority(const char *priority_class,
                              int32_t priority,
                              int32_t *out,
                              crater_error_t *err);

#endif
