/* health.c - filter: a node that is not ready or is cordoned (drained by an
 * operator) gets no new work. */
#include "sched/internal.h"

static int health_filter(struct sched_ctx *c)
{
    const struct node_dyn *d = &c->s->dyn[c->node];

    if (!d->ready) {
        c->why = "node not ready";
        return -1;
    }
    if (d->cordoned) {
        c->why = "node cordoned";
        return -1;
    }
    return 0;
}

const sched_filter_ops_t sched__filter_health = {
    SCHED_PLUGIN_VERSION,
    "health",
    health_filter,
};
