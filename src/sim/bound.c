/* bound.c - the FGD protocol's allocation bound; the derivation and why it
 * is sound are in include/crater/bound.h.
 *
 * Work: nodes are grouped into types (openb: 15 types for 1,213 nodes),
 * and only pod shapes with a share above half a GPU are examined (openb
 * default: 8 shapes). Per shape and per weight vector of the grid, one
 * scan of the arrivals finds where their worth reaches the nodes' cost;
 * the grid has GRID_STEPS + 1 choose 2 points, so a shape costs about
 * 1,900 scans of at most the whole sequence: well under a second for the
 * 10,800 arrivals of the default trace. The hole matching works on counts
 * by share (shares are whole milli), so it is linear in the sequence.
 *
 * Floating point: a pod is counted as forced only when the nodes' cost
 * beats the worth by a relative margin (SAFETY), so rounding cannot make
 * an uncertified pod look forced.
 */
#include "crater/bound.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define GRID_STEPS 60
#define SAFETY 1e-9
#define HALF 500

struct ntype {
    uint32_t cpu, gpus;
    uint64_t mem;
    const char *model;
    size_t count;
};

/* The inputs of one run, and the arrival prefix sums of GPU request. */
struct ctx {
    const crater_trace_pod_t *pods;
    const size_t *order;
    size_t norder;
    struct ntype *types;
    size_t ntypes;
    uint64_t *prefix; /* prefix[i]: GPU request of arrivals before i */
    uint64_t capacity;
};

static uint64_t pod_gpu(const crater_trace_pod_t *p)
{
    return (uint64_t)p->num_gpu * p->gpu_milli;
}

static int is_share(const crater_trace_pod_t *p)
{
    return p->num_gpu == 1 && p->gpu_milli < 1000;
}

/* gpu_spec "A|B" allows model (trace names, case-insensitive, as the core
 * lowercases them without a knowledge base); "" allows every model. */
static int allows(const char *spec, const char *model)
{
    size_t len = strlen(model);

    if (!spec[0])
        return 1;
    for (const char *p = spec; *p;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncasecmp(p, model, n) == 0)
            return 1;
        p += n + (bar != NULL);
    }
    return 0;
}

/* Does p fit some empty node? */
static int placeable(const struct ctx *c, const crater_trace_pod_t *p)
{
    for (size_t i = 0; i < c->ntypes; i++) {
        const struct ntype *t = &c->types[i];
        if (p->cpu_milli <= t->cpu && p->memory_mib <= t->mem
            && p->num_gpu <= t->gpus && allows(p->gpu_spec, t->model))
            return 1;
    }
    return 0;
}

static void add_type(struct ctx *c, const crater_trace_node_t *n)
{
    for (size_t i = 0; i < c->ntypes; i++) {
        struct ntype *t = &c->types[i];
        if (t->cpu == n->cpu_milli && t->mem == n->memory_mib
            && t->gpus == n->gpus && strcasecmp(t->model, n->model) == 0) {
            t->count++;
            return;
        }
    }
    c->types[c->ntypes++] =
        (struct ntype){n->cpu_milli, n->gpus, n->memory_mib, n->model, 1};
}

static int ctx_init(struct ctx *c,
                    const crater_trace_node_t *nodes,
                    size_t nnodes,
                    crater_error_t *err)
{
    c->types = malloc((nnodes ? nnodes : 1) * sizeof(*c->types));
    c->prefix = malloc((c->norder + 1) * sizeof(*c->prefix));
    if (!c->types || !c->prefix)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    for (size_t i = 0; i < nnodes; i++)
        if (nodes[i].gpus) {
            add_type(c, &nodes[i]);
            c->capacity += 1000ull * nodes[i].gpus;
        }
    c->prefix[0] = 0;
    for (size_t i = 0; i < c->norder; i++)
        c->prefix[i + 1] = c->prefix[i] + pod_gpu(&c->pods[c->order[i]]);
    return 0;
}

static void ctx_free(struct ctx *c)
{
    free(c->types);
    free(c->prefix);
}

/* ---- forced pods ---------------------------------------------------------
 */

/* A node type's blocking cost for shape sh in each mode: CPU and memory
 * above cap - request, or all its GPUs (in units of blocking power). */
static void node_cost(const struct ntype *t,
                      const crater_trace_pod_t *sh,
                      double cost[3])
{
    cost[0] = t->cpu >= sh->cpu_milli ? t->cpu - sh->cpu_milli + 1.0 : 0;
    cost[1] =
        t->mem >= sh->memory_mib ? (double)(t->mem - sh->memory_mib) + 1.0 : 0;
    cost[2] = t->gpus;
}

/* What arrival p can do towards blocking nodes for a share of s milli. */
static void pod_worth(const crater_trace_pod_t *p, uint32_t s, double r[3])
{
    double t = 1001.0 - s;

    r[0] = p->cpu_milli;
    r[1] = (double)p->memory_mib;
    if (!p->num_gpu)
        r[2] = 0;
    else if (is_share(p))
        r[2] = p->gpu_milli >= t ? 1.0 : p->gpu_milli / t;
    else
        r[2] = p->num_gpu;
}

static double dot_min(const double l[3], const double v[3])
{
    double a = l[0] * v[0], b = l[1] * v[1], g = l[2] * v[2];

    return a < b ? (a < g ? a : g) : (b < g ? b : g);
}

static double dot_max(const double l[3], const double v[3])
{
    double a = l[0] * v[0], b = l[1] * v[1], g = l[2] * v[2];

    return a > b ? (a > g ? a : g) : (b > g ? b : g);
}

/* The first arrival whose earlier arrivals are worth the nodes' cost under
 * weights l: every arrival before it is certified. */
static size_t certified(const struct ctx *c,
                        double (*worth)[3],
                        const double l[3],
                        double cost)
{
    double sum = 0;
    size_t i;

    for (i = 0; i < c->norder; i++) {
        if (sum >= cost * (1 - SAFETY))
            break;
        sum += dot_max(l, worth[i]);
    }
    return i;
}

/* The nodes' total cost under l (only the types sh may use). */
static double nodes_cost(const struct ctx *c,
                         const crater_trace_pod_t *sh,
                         const double l[3])
{
    double sum = 0, cost[3];

    for (size_t i = 0; i < c->ntypes; i++)
        if (allows(sh->gpu_spec, c->types[i].model)) {
            node_cost(&c->types[i], sh, cost);
            sum += (double)c->types[i].count * dot_min(l, cost);
        }
    return sum;
}

/* Totals of each mode's cost, to put the three units on one scale. */
static void scale(const struct ctx *c,
                  const crater_trace_pod_t *sh,
                  double norm[3])
{
    double cost[3];

    norm[0] = norm[1] = norm[2] = 0;
    for (size_t i = 0; i < c->ntypes; i++)
        if (allows(sh->gpu_spec, c->types[i].model)) {
            node_cost(&c->types[i], sh, cost);
            for (int d = 0; d < 3; d++)
                norm[d] += (double)c->types[i].count * cost[d];
        }
}

/* The longest prefix of the sequence in which every arrival of shape sh is
 * placed by every policy: the best certificate over the weight grid. */
static size_t forced_prefix(const struct ctx *c,
                            const crater_trace_pod_t *sh,
                            double (*worth)[3])
{
    double norm[3], l[3];
    size_t best = 0;

    scale(c, sh, norm);
    if (norm[0] <= 0 || norm[1] <= 0 || norm[2] <= 0)
        return 0; /* some mode blocks every node for free */
    for (int a = 0; a <= GRID_STEPS; a++)
        for (int b = 0; a + b <= GRID_STEPS; b++) {
            int g = GRID_STEPS - a - b;
            l[0] = a / norm[0];
            l[1] = b / norm[1];
            l[2] = g / norm[2];
            size_t k = certified(c, worth, l, nodes_cost(c, sh, l));
            if (k > best)
                best = k;
        }
    return best;
}

/* ---- shapes and holes ----------------------------------------------------
 */

static int same_shape(const crater_trace_pod_t *a, const crater_trace_pod_t *b)
{
    return a->gpu_milli == b->gpu_milli && a->cpu_milli == b->cpu_milli
           && a->memory_mib == b->memory_mib
           && strcmp(a->gpu_spec, b->gpu_spec) == 0;
}

static int by_share_desc(const void *x, const void *y)
{
    const crater_bound_shape_t *a = x, *b = y;

    if (a->share != b->share)
        return a->share > b->share ? -1 : 1;
    return a->arrived > b->arrived ? -1 : a->arrived < b->arrived;
}

/* The shapes above half a GPU, with the index of their first arrival in
 * first[] (a pod standing for the shape). */
static size_t find_shapes(const struct ctx *c,
                          crater_bound_shape_t *sh,
                          size_t *first)
{
    size_t n = 0;

    for (size_t i = 0; i < c->norder; i++) {
        const crater_trace_pod_t *p = &c->pods[c->order[i]];
        size_t k = 0;
        if (!is_share(p) || p->gpu_milli <= HALF)
            continue;
        while (k < n && !same_shape(&c->pods[c->order[first[k]]], p))
            k++;
        if (k == n) {
            memset(&sh[n], 0, sizeof(sh[n]));
            sh[n].share = p->gpu_milli;
            sh[n].cpu_milli = p->cpu_milli;
            sh[n].memory_mib = p->memory_mib;
            memcpy(sh[n].gpu_spec, p->gpu_spec, sizeof(sh[n].gpu_spec));
            first[n++] = i;
        }
        sh[k].arrived++;
    }
    return n;
}

/* Mark the forced arrivals of shape k (those before its prefix end). */
static void mark_forced(const struct ctx *c,
                        const crater_trace_pod_t *rep,
                        size_t end,
                        crater_bound_shape_t *sh,
                        uint8_t *forced)
{
    for (size_t i = 0; i < end; i++)
        if (is_share(&c->pods[c->order[i]])
            && same_shape(&c->pods[c->order[i]], rep)) {
            sh->forced++;
            if (forced)
                forced[i] = 1;
        }
    sh->hole_milli = sh->forced * (1000ull - sh->share);
    sh->forced_until_pct =
        c->capacity ? (double)c->prefix[end] * 100.0 / (double)c->capacity : 0;
}

/* The most the arrived shares of at most HALF milli (mass[q]: their total
 * of share q) can fill of the holes (holes[h]: holes of h milli): smallest
 * holes first, each taking any share that fits it (fractionally), which is
 * optimal because a share that fits a hole fits every larger one. */
static uint64_t fill_holes(const uint64_t *holes, const uint64_t *mass)
{
    uint64_t pool = 0, fill = 0;

    for (uint32_t h = 1; h <= HALF; h++) {
        uint64_t room = holes[h] * h, take;
        pool += mass[h];
        take = room < pool ? room : pool;
        fill += take;
        pool -= take;
    }
    return fill;
}

static uint64_t hole_total(const uint64_t *holes)
{
    uint64_t sum = 0;

    for (uint32_t h = 1; h <= HALF; h++)
        sum += holes[h] * h;
    return sum;
}

/* capacity - (holes - fill): no policy allocates more with these holes. */
static uint64_t after_holes(const struct ctx *c,
                            const uint64_t *holes,
                            const uint64_t *mass)
{
    uint64_t h = hole_total(holes), f = fill_holes(holes, mass);

    return c->capacity - (h > f ? h - f : 0);
}

/* ---- first drop ----------------------------------------------------------
 */

/* Is every model q allows one that p allows? (Unsure: no.) */
static int spec_within(const char *q, const char *p)
{
    char buf[64], *save = NULL;

    if (!p[0])
        return 1;
    if (!q[0])
        return 0;
    snprintf(buf, sizeof(buf), "%s", q);
    for (char *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save))
        if (!allows(p, t))
            return 0;
    return 1;
}

/* Once share p is dropped, q never fits again: it needs at least p's CPU,
 * memory and GPU room (a whole GPU is room >= any share) on a subset of
 * p's models, and free resources only shrink. */
static int dominates(const crater_trace_pod_t *q, const crater_trace_pod_t *p)
{
    return q->num_gpu && (!is_share(q) || q->gpu_milli >= p->gpu_milli)
           && q->cpu_milli >= p->cpu_milli && q->memory_mib >= p->memory_mib
           && spec_within(q->gpu_spec, p->gpu_spec);
}

/* The first-drop bound for shape rep (its forced arrivals end at end):
 * in any run either no arrival of the shape is dropped, or a first one is,
 * at some index k >= end; then every earlier one is placed (holes) and
 * nothing after k that dominates it is. The bound is the largest over
 * those cases of min(capacity - unfilled holes, request before k + request
 * after k of pods that do not dominate it). others: the forced holes of
 * the other shapes (restored on return). */
static uint64_t first_drop(const struct ctx *c,
                           const crater_trace_pod_t *rep,
                           size_t end,
                           uint64_t *others,
                           const uint64_t *mass,
                           uint64_t *suffix,
                           double *at_pct)
{
    uint32_t h = 1000 - rep->gpu_milli;
    uint64_t best = 0, before = 0;

    suffix[c->norder] = 0;
    for (size_t i = c->norder; i-- > 0;) {
        const crater_trace_pod_t *q = &c->pods[c->order[i]];
        suffix[i] = suffix[i + 1] + (dominates(q, rep) ? 0 : pod_gpu(q));
    }
    for (size_t i = 0; i <= c->norder; i++) {
        const crater_trace_pod_t *q =
            i < c->norder ? &c->pods[c->order[i]] : NULL;
        if (q && !(is_share(q) && same_shape(q, rep)))
            continue;
        if (i >= end) {
            uint64_t reach = c->prefix[i] + (q ? suffix[i + 1] : 0), b;
            others[h] += before;
            b = after_holes(c, others, mass);
            others[h] -= before;
            b = b < reach ? b : reach;
            if (b > best) {
                best = b;
                *at_pct = (double)c->prefix[i] * 100.0 / (double)c->capacity;
            }
        }
        before++;
    }
    return best;
}

/* ---- the bound -----------------------------------------------------------
 */

struct work {
    size_t *first;          /* per shape: the index of its first arrival */
    double (*worth)[3];     /* per arrival */
    uint64_t *suffix;       /* per arrival + 1 */
    uint64_t *holes, *mass; /* by milli, 0..HALF */
};

static void work_free(struct work *w)
{
    free(w->first);
    free(w->worth);
    free(w->suffix);
    free(w->holes);
    free(w->mass);
}

static int work_init(struct work *w, const struct ctx *c)
{
    size_t n = c->norder ? c->norder : 1;

    w->first = malloc(n * sizeof(*w->first));
    w->worth = malloc(n * sizeof(*w->worth));
    w->suffix = malloc((n + 1) * sizeof(*w->suffix));
    w->holes = calloc(HALF + 1, sizeof(*w->holes));
    w->mass = calloc(HALF + 1, sizeof(*w->mass));
    if (!w->first || !w->worth || !w->suffix || !w->holes || !w->mass)
        return -1;
    for (size_t i = 0; i < c->norder; i++) {
        const crater_trace_pod_t *p = &c->pods[c->order[i]];
        if (is_share(p) && p->gpu_milli <= HALF)
            w->mass[p->gpu_milli] += p->gpu_milli;
    }
    return 0;
}

/* Forced prefixes of every shape, their holes, and the fill. */
static void forced_holes(const struct ctx *c,
                         struct work *w,
                         crater_bound_result_t *res,
                         crater_bound_shape_t *sh,
                         uint8_t *forced)
{
    for (size_t k = 0; k < res->nshapes; k++) {
        const crater_trace_pod_t *rep = &c->pods[c->order[w->first[k]]];
        for (size_t i = 0; i < c->norder; i++)
            pod_worth(&c->pods[c->order[i]], sh[k].share, w->worth[i]);
        sh[k].forced_end = forced_prefix(c, rep, w->worth);
        mark_forced(c, rep, sh[k].forced_end, &sh[k], forced);
        w->holes[1000 - sh[k].share] += sh[k].forced;
        res->holes_milli += sh[k].hole_milli;
        res->forced += sh[k].forced;
    }
    res->fill_milli = fill_holes(w->holes, w->mass);
    res->waste_milli = res->holes_milli > res->fill_milli
                           ? res->holes_milli - res->fill_milli
                           : 0;
    res->forced_bound_milli = c->capacity - res->waste_milli;
}

/* The first-drop bound of every shape; the least is res->drop_bound. */
static void drop_bounds(const struct ctx *c,
                        struct work *w,
                        crater_bound_result_t *res,
                        crater_bound_shape_t *sh)
{
    res->drop_bound_milli = c->capacity;
    for (size_t k = 0; k < res->nshapes; k++) {
        const crater_trace_pod_t *rep = &c->pods[c->order[w->first[k]]];
        uint32_t h = 1000 - sh[k].share;
        w->holes[h] -= sh[k].forced;
        sh[k].drop_bound_milli = first_drop(c,
                                            rep,
                                            sh[k].forced_end,
                                            w->holes,
                                            w->mass,
                                            w->suffix,
                                            &sh[k].drop_at_pct);
        w->holes[h] += sh[k].forced;
        if (sh[k].drop_bound_milli < res->drop_bound_milli)
            res->drop_bound_milli = sh[k].drop_bound_milli;
    }
}

static int holes_bound(const struct ctx *c,
                       crater_bound_result_t *res,
                       uint8_t *forced,
                       crater_error_t *err)
{
    struct work w = {0};
    crater_bound_shape_t *sh =
        malloc((c->norder ? c->norder : 1) * sizeof(*sh));

    if (!sh || work_init(&w, c) < 0) {
        free(sh);
        work_free(&w);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    res->nshapes = find_shapes(c, sh, w.first);
    forced_holes(c, &w, res, sh, forced);
    drop_bounds(c, &w, res, sh);
    qsort(sh, res->nshapes, sizeof(*sh), by_share_desc);
    res->shapes = sh;
    work_free(&w);
    return 0;
}

int crater_bound_sequence(const crater_trace_node_t *nodes,
                          size_t nnodes,
                          const crater_trace_pod_t *pods,
                          const size_t *order,
                          size_t norder,
                          uint8_t *forced,
                          crater_bound_result_t *res,
                          crater_error_t *err)
{
    struct ctx c = {.pods = pods, .order = order, .norder = norder};
    int rc = -1;

    memset(res, 0, sizeof(*res));
    if (forced)
        memset(forced, 0, norder);
    if (ctx_init(&c, nodes, nnodes, err) < 0)
        goto out;
    res->capacity_milli = c.capacity;
    res->arrived = norder;
    res->arrived_milli = c.prefix[norder];
    for (size_t i = 0; i < norder; i++)
        if (placeable(&c, &pods[order[i]]))
            res->placeable_milli += pod_gpu(&pods[order[i]]);
    if (holes_bound(&c, res, forced, err) < 0)
        goto out;
    res->bound_milli = res->forced_bound_milli;
    if (res->drop_bound_milli < res->bound_milli)
        res->bound_milli = res->drop_bound_milli;
    if (res->placeable_milli < res->bound_milli)
        res->bound_milli = res->placeable_milli;
    rc = 0;
out:
    ctx_free(&c);
    return rc;
}

int crater_bound_run(const crater_trace_node_t *nodes,
                     size_t nnodes,
                     const crater_trace_pod_t *pods,
                     size_t npods,
                     uint64_t seed,
                     double inflate,
                     crater_bound_result_t *res,
                     crater_error_t *err)
{
    uint64_t cap = 0;
    size_t *order = NULL, norder = 0;
    int rc;

    for (size_t i = 0; i < nnodes; i++)
        cap += 1000ull * nodes[i].gpus;
    if (crater_fgd_arrivals(pods,
                            npods,
                            seed,
                            (inflate > 0 ? inflate : 1.3) * (double)cap,
                            &order,
                            &norder,
                            err)
        < 0)
        return -1;
    rc = crater_bound_sequence(nodes,
                               nnodes,
                               pods,
                               order,
                               norder,
                               NULL,
                               res,
                               err);
    free(order);
    return rc;
}

void crater_bound_result_clear(crater_bound_result_t *res)
{
    if (!res)
        return;
    free(res->shapes);
    res->shapes = NULL;
    res->nshapes = 0;
}
