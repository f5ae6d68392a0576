/* explain.c - aggregate filter failures into an explanation a user can act
 * on: "0/1213 nodes fit: 812 insufficient GPU memory (need 20780 MiB, best
 * 16384 MiB on node-17), 401 cpuThreshold exceeded (limit 80%, best 85% on
 * node-3)". Reasons are ordered by count, then by text, so the fast and
 * the brute-force paths produce the same words. */
#include "sched/explain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/units.h"

static int closer(const struct sched_reason *r, uint64_t have, uint32_t node)
{
    if (have == r->have)
        return node < r->best;
    return r->unit == U_PERCENT ? have < r->have : have > r->have;
}

static void add(struct sched_explain *ex,
                const struct sched_ctx *c,
                uint32_t weight)
{
    struct sched_reason *r = NULL;

    for (uint32_t i = 0; i < ex->nreasons && !r; i++)
        if (ex->r[i].why == c->why)
            r = &ex->r[i];
    if (!r && ex->nreasons == SCHED_EXPLAIN_MAX)
        return;
    if (!r) {
        r = &ex->r[ex->nreasons++];
        *r = (struct sched_reason){c->why,
                                   0,
                                   c->node,
                                   c->need,
                                   c->have,
                                   c->unit};
    } else if (closer(r, c->have, c->node)) {
        r->best = c->node;
        r->need = c->need;
        r->have = c->have;
    }
    r->count += weight;
}

static int by_count(const void *a, const void *b)
{
    const struct sched_reason *x = a, *y = b;

    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return strcmp(x->why, y->why);
}

static void fmt_amount(char *buf, size_t size, uint64_t v, int unit)
{
    char q[32];

    switch (unit) {
    case U_MIB:
        snprintf(buf, size, "%llu MiB", (unsigned long long)v);
        break;
    case U_MILLI:
        snprintf(buf,
                 size,
                 "%s CPU",
                 crater_format_quantity(v, CRATER_DIM_CPU, q, sizeof(q)));
        break;
    case U_BYTES:
        snprintf(buf,
                 size,
                 "%s",
                 crater_format_quantity(v, CRATER_DIM_BYTES, q, sizeof(q)));
        break;
    case U_PERCENT:
        snprintf(buf, size, "%llu%%", (unsigned long long)v);
        break;
    default:
        snprintf(buf, size, "%llu", (unsigned long long)v);
    }
}

static size_t fmt_reason(const crater_sched_t *s,
                         const struct sched_reason *r,
                         char *buf,
                         size_t size)
{
    char need[48], have[48];

    if (r->unit == U_NONE)
        return (size_t)snprintf(buf, size, "%u %s", r->count, r->why);
    fmt_amount(need, sizeof(need), r->need, r->unit);
    fmt_amount(have, sizeof(have), r->have, r->unit);
    return (size_t)snprintf(buf,
                            size,
                            "%u %s (%s %s, best %s on %s)",
                            r->count,
                            r->why,
                            r->unit == U_PERCENT ? "limit" : "need",
                            need,
                            have,
                            s->nodes[r->best].name);
}

static void render(const crater_sched_t *s, struct sched_explain *ex)
{
    size_t len = (size_t)snprintf(ex->text,
                                  sizeof(ex->text),
                                  "%u/%u nodes fit",
                                  ex->fit,
                                  ex->nodes);

    for (uint32_t i = 0; i < ex->nreasons && len < sizeof(ex->text); i++) {
        len += (size_t)snprintf(ex->text + len,
                                sizeof(ex->text) - len,
                                "%s",
                                i ? ", " : ": ");
        if (len < sizeof(ex->text))
            len += fmt_reason(s,
                              &ex->r[i],
                              ex->text + len,
                              sizeof(ex->text) - len);
    }
}

void sched__explain_run(crater_sched_t *s,
                        const crater_request_t *r,
                        int by_class,
                        struct sched_explain *ex)
{
    struct sched_ctx c;

    memset(ex, 0, sizeof(*ex));
    ex->nodes = s->n;
    if (by_class) {
        for (uint32_t i = 0; i < s->nlive; i++) {
            const struct sclass *k = &s->classes[s->live[i]];
            if (sched__eval(s, k->members[0], r, &c) == 0)
                ex->fit += k->nmembers;
            else
                add(ex, &c, k->nmembers);
        }
    } else {
        for (uint32_t n = 0; n < s->n; n++) {
            if (sched__eval(s, n, r, &c) == 0)
                ex->fit++;
            else
                add(ex, &c, 1);
        }
    }
    qsort(ex->r, ex->nreasons, sizeof(ex->r[0]), by_count);
    render(s, ex);
}
