/* selector.c - filter: nodeSelector labels must match, and taints with
 * effect NoSchedule or NoExecute must be tolerated (Kubernetes semantics:
 * a toleration with no value tolerates every value of its key, one with no
 * effect every effect). PreferNoSchedule taints do not filter. */
#include <string.h>

#include "sched/internal.h"

static const char *label(const crater_node_t *n, const char *key)
{
    for (size_t i = 0; i < n->nlabels; i++)
        if (strcmp(n->labels[i].key, key) == 0)
            return n->labels[i].value ? n->labels[i].value : "";
    return NULL;
}

static int tolerated(const crater_jobspec_t *spec, const crater_taint_t *t)
{
    for (size_t i = 0; spec && i < spec->ntolerations; i++) {
        const crater_toleration_t *o = &spec->tolerations[i];
        if (strcmp(o->key, t->key) != 0)
            continue;
        if (o->effect >= 0 && o->effect != (int)t->effect)
            continue;
        if (!o->value || (t->value && strcmp(o->value, t->value) == 0))
            return 1;
    }
    return 0;
}

static int selector_filter(struct sched_ctx *c)
{
    const crater_node_t *n = &c->s->nodes[c->node];
    const crater_jobspec_t *spec = c->req->spec;

    for (size_t i = 0; spec && i < spec->nselector; i++) {
        const char *v = label(n, spec->selector[i].key);
        if (!v || strcmp(v, spec->selector[i].value) != 0) {
            c->why = "nodeSelector does not match";
            return -1;
        }
    }
    for (size_t i = 0; i < n->ntaints; i++) {
        if (n->taints[i].effect == CRATER_TAINT_PREFER_NO_SCHEDULE)
            continue;
        if (!tolerated(spec, &n->taints[i])) {
            c->why = "untolerated taint";
            return -1;
        }
    }
    return 0;
}

const sched_filter_ops_t sched__filter_selector = {
    SCHED_PLUGIN_VERSION,
    "selector",
    selector_filter,
};
