/* runtime.c - filter: a job with an image runs only where a container
 * runtime is (doc/containers.md). Agents advertise theirs in the node
 * label crater.io/runtimes (CRATER_LABEL_RUNTIMES, "podman"), set when
 * `podman info` worked at their start; a node without it is refused
 * with a reason the decision log and `crater explain` show, so an image
 * never runs on the host. Any non-empty value counts: podman is the only
 * runtime the agent drives. */
#include <string.h>

#include "sched/internal.h"

static bool has_runtime(const crater_node_t *n)
{
    for (size_t i = 0; i < n->nlabels; i++)
        if (strcmp(n->labels[i].key, CRATER_LABEL_RUNTIMES) == 0)
            return n->labels[i].value && n->labels[i].value[0];
    return false;
}

static int runtime_filter(struct sched_ctx *c)
{
    const crater_jobspec_t *spec = c->req->spec;

    if (!spec || !spec->image || has_runtime(&c->s->nodes[c->node]))
        return 0;
    c->why = "no container runtime for image";
    return -1;
}

const sched_filter_ops_t sched__filter_runtime = {
    SCHED_PLUGIN_VERSION,
    "runtime",
    runtime_filter,
};
