/* locality.c - data locality. dataLocality.mode required makes it a filter
 * (the dataset must be cached on the node), preferred makes it a score (1
 * when cached, 0 when not). */
#include <string.h>

#include "sched/internal.h"

static int has_dataset(const struct sched_ctx *c)
{
    const char *want = c->req->spec ? c->req->spec->dataset : NULL;
    char *const *ds = c->s->nodes[c->node].datasets;

    for (size_t i = 0; want && ds && ds[i]; i++)
        if (strcmp(ds[i], want) == 0)
            return 1;
    return 0;
}

static int locality_filter(struct sched_ctx *c)
{
    const crater_jobspec_t *spec = c->req->spec;

    if (!spec || spec->locality != CRATER_LOCALITY_REQUIRED || has_dataset(c))
        return 0;
    c->why = "required dataset not cached";
    return -1;
}

static double locality_weight(const crater_sched_t *s,
                              const crater_request_t *r)
{
    return r->spec && r->spec->locality == CRATER_LOCALITY_PREFERRED
               ? s->w.locality
               : 0;
}

static double locality_score(const struct sched_ctx *c)
{
    return has_dataset(c);
}

const sched_filter_ops_t sched__filter_locality = {
    SCHED_PLUGIN_VERSION,
    "data-locality",
    locality_filter,
};

const sched_score_ops_t sched__score_locality = {
    SCHED_PLUGIN_VERSION,
    "data-locality",
    locality_weight,
    locality_score,
};
