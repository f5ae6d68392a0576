/* cpumem.c - filter and reservation: CPU and memory, pinned to the NUMA
 * node of the job's GPUs when numa is strict (required) or preferred (when
 * it fits), spread across NUMA nodes otherwise. */
#include "sched/internal.h"

static int cpumem_filter(struct sched_ctx *c)
{
    return sched__pick_cpu_mem(c);
}

const sched_filter_ops_t sched__filter_cpumem = {
    SCHED_PLUGIN_VERSION,
    "cpu-memory",
    cpumem_filter,
};
