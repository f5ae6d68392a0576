/* typhist.c - the typical-task distribution learned from the requests
 * seen: a decayed histogram of request shapes (see crater/typhist.h).
 *
 * Why learn it. Crater's policy (policy_frag.c) measures fragmentation
 * against a typical-task distribution; the FGD paper hands it the trace's
 * own shape frequencies (an oracle), which a live scheduler does not have.
 * The shapes a cluster is asked for are the best forecast of the shapes it
 * will be asked for next, so craterd and `crater sim` count them.
 *
 * Why decay by submissions, not by time. A decay per observation
 * (2^(-1/halfLife) on every weight at each submission) makes the histogram
 * a pure function of the sequence of requests: the simulator, which has no
 * wall clock, and craterd, which rebuilds the histogram at a restart from
 * the stored jobs in id order, compute the same weights. A cluster that is
 * idle for a week should not forget its workload either; only new work
 * displaces old work. With halfLife 1000 the last ~1,440 submissions make
 * up the effective sample (1 / (1 - 2^(-1/1000))).
 *
 * Why a prior first. A distribution learned from a handful of submissions
 * is one user's first sweep, not the workload; fragmentation against it
 * would steer every later placement. Until min_samples were seen the
 * installed distribution is a fixed prior: whole-GPU tasks of 1, 2, 4 and
 * 8 GPUs, equally likely, any model, no CPU need. It needs no memory units
 * (valid on a MiB cluster and in the FGD protocol's milli-GPUs alike) and
 * still turns on what Crater's policy does beyond plain scores: fill
 * partly used nodes and keep whole nodes whole for the 8-GPU jobs. The
 * openb mix was the alternative, but its shares are in milli-GPUs of one
 * fleet and would be wrong on a cluster with other GPUs.
 *
 * Why bounded. A request's CPU is any number a user writes, so shapes are
 * unbounded; the histogram keeps at most `capacity` of them and a new
 * shape evicts the lightest (the first in slot order among equals): a
 * frequent shape is never the lightest for long, and the evicted tail is
 * what the 95% cut drops anyway.
 *
 * Why reinstall only when it moved. crater_sched_set_typical() resets the
 * core's placement memo; the distribution of a steady workload barely moves
 * from one submission to the next, so it is installed again once its total
 * variation distance from the installed one reaches opts.move (0.05).
 *
 * Workload: one crater_typhist_add() per admitted submission, O(capacity).
 */
#include "crater/typhist.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct slot {
    crater_typical_t t; /* t.weight unused */
    double w;           /* decayed weight */
    double inst;        /* its share in the histogram at the last install */
};

struct crater_typhist {
    crater_typhist_opts_t o;
    double decay;
    struct slot *slot;
    size_t n;
    uint64_t seen, installs;
    double lost;    /* installed share of evicted shapes */
    bool learned;   /* the installed distribution is the learned one */
    bool installed; /* something was installed */
};

static const crater_typical_t prior[] = {
    {0, 1, 0, 0, 0.25},
    {0, 2, 0, 0, 0.25},
    {0, 4, 0, 0, 0.25},
    {0, 8, 0, 0, 0.25},
};

const crater_typical_t *crater_typhist_prior(size_t *n)
{
    *n = sizeof(prior) / sizeof(prior[0]);
    return prior;
}

void crater_typhist_opts_from_config(const crater_config_t *cfg,
                                     crater_typhist_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->half_life = cfg->scheduler.typical_half_life;
    o->min_samples = cfg->scheduler.typical_min_samples;
}

crater_typhist_t *crater_typhist_create(const crater_typhist_opts_t *o)
{
    crater_typhist_t *h = calloc(1, sizeof(*h));

    if (!h)
        return NULL;
    if (o)
        h->o = *o;
    if (!h->o.half_life)
        h->o.half_life = 1000;
    if (!h->o.capacity)
        h->o.capacity = 256;
    if (h->o.pct <= 0 || h->o.pct > 100)
        h->o.pct = 95;
    if (h->o.move <= 0)
        h->o.move = 0.05;
    h->decay = pow(2.0, -1.0 / h->o.half_life);
    if (!(h->slot = calloc(h->o.capacity, sizeof(*h->slot)))) {
        free(h);
        return NULL;
    }
    return h;
}

void crater_typhist_destroy(crater_typhist_t *h)
{
    if (!h)
        return;
    free(h->slot);
    free(h);
}

void crater_typhist_shape(const crater_request_t *req, crater_typical_t *t)
{
    memset(t, 0, sizeof(*t));
    t->cpu_milli = req->cpu_milli;
    t->gpus = req->gpus;
    t->slice = req->gpus == 1 ? req->slice_mib : 0;
    t->model_mask = req->model_mask;
    t->weight = 1;
}

/* A total order on shapes: CPU, then slice, GPUs, models (FGD's key). */
static int shape_cmp(const crater_typical_t *a, const crater_typical_t *b)
{
    if (a->cpu_milli != b->cpu_milli)
        return a->cpu_milli < b->cpu_milli ? -1 : 1;
    if (a->slice != b->slice)
        return a->slice < b->slice ? -1 : 1;
    if (a->gpus != b->gpus)
        return a->gpus < b->gpus ? -1 : 1;
    if (a->model_mask != b->model_mask)
        return a->model_mask < b->model_mask ? -1 : 1;
    return 0;
}

/* The slot of t, else a free slot, else the lightest (evicted). */
static struct slot *slot_for(crater_typhist_t *h, const crater_typical_t *t)
{
    size_t light = 0;

    for (size_t i = 0; i < h->n; i++) {
        if (shape_cmp(&h->slot[i].t, t) == 0)
            return &h->slot[i];
        if (h->slot[i].w < h->slot[light].w)
            light = i;
    }
    if (h->n < h->o.capacity)
        light = h->n++;
    else
        h->lost += h->slot[light].inst;
    h->slot[light] = (struct slot){*t, 0, 0};
    return &h->slot[light];
}

int crater_typhist_add(crater_typhist_t *h,
                       const crater_typical_t *t,
                       crater_error_t *err)
{
    (void)err; /* the table is allocated up front: nothing can fail */
    for (size_t i = 0; i < h->n; i++)
        h->slot[i].w *= h->decay;
    slot_for(h, t)->w += 1.0;
    h->seen++;
    return 0;
}

double crater_typhist_total(const crater_typhist_t *h)
{
    double w = 0;

    for (size_t i = 0; i < h->n; i++)
        w += h->slot[i].w;
    return w;
}

double crater_typhist_moved(const crater_typhist_t *h)
{
    double total = crater_typhist_total(h), d = h->lost;

    if (!h->learned || total <= 0)
        return 1.0;
    for (size_t i = 0; i < h->n; i++)
        d += fabs(h->slot[i].w / total - h->slot[i].inst);
    return d / 2;
}

/* Heaviest first; equal weights: the larger shape first (as FGD). */
static int by_weight(const void *a, const void *b)
{
    const struct slot *x = a, *y = b;

    if (x->w != y->w)
        return x->w > y->w ? -1 : 1;
    return -shape_cmp(&x->t, &y->t);
}

static bool use_prior(const crater_typhist_t *h)
{
    return h->seen < h->o.min_samples || h->n == 0;
}

static int copy_prior(crater_typical_t **out, size_t *n, crater_error_t *err)
{
    const crater_typical_t *p = crater_typhist_prior(n);

    if (!(*out = malloc(*n * sizeof(**out))))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    memcpy(*out, p, *n * sizeof(**out));
    return 0;
}

int crater_typhist_get(const crater_typhist_t *h,
                       crater_typical_t **out,
                       size_t *n,
                       crater_error_t *err)
{
    struct slot *v;
    double total = crater_typhist_total(h), cum = 0;
    size_t take = 0;

    if (use_prior(h))
        return copy_prior(out, n, err);
    v = malloc(h->n * sizeof(*v));
    *out = malloc(h->n * sizeof(**out));
    if (!v || !*out) {
        free(v);
        free(*out);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    memcpy(v, h->slot, h->n * sizeof(*v));
    qsort(v, h->n, sizeof(*v), by_weight);
    while (take < h->n && cum < h->o.pct / 100.0 * total)
        cum += v[take++].w;
    for (size_t i = 0; i < take; i++) {
        (*out)[i] = v[i].t;
        (*out)[i].weight = v[i].w / cum;
    }
    free(v);
    *n = take;
    return 0;
}

/* Remember the histogram's shares as installed. */
static void mark_installed(crater_typhist_t *h)
{
    double total = crater_typhist_total(h);

    h->learned = !use_prior(h);
    h->lost = 0;
    for (size_t i = 0; i < h->n; i++)
        h->slot[i].inst = total > 0 ? h->slot[i].w / total : 0;
    h->installs++;
    h->installed = true;
}

int crater_typhist_install(crater_typhist_t *h,
                           crater_sched_t *s,
                           crater_error_t *err)
{
    crater_typical_t *t = NULL;
    size_t n = 0;
    int rc;

    if (crater_typhist_get(h, &t, &n, err) < 0)
        return -1;
    rc = crater_sched_set_typical(s, t, n, err);
    free(t);
    if (rc == 0)
        mark_installed(h);
    return rc;
}

int crater_typhist_observe(crater_typhist_t *h,
                           crater_sched_t *s,
                           const crater_request_t *req,
                           crater_error_t *err)
{
    crater_typical_t t;
    bool due;

    crater_typhist_shape(req, &t);
    if (crater_typhist_add(h, &t, err) < 0)
        return -1;
    if (use_prior(h))
        due = !h->installed;
    else
        due = !h->learned || crater_typhist_moved(h) >= h->o.move;
    if (!due)
        return 0;
    return crater_typhist_install(h, s, err) < 0 ? -1 : 1;
}

uint64_t crater_typhist_seen(const crater_typhist_t *h)
{
    return h->seen;
}

uint64_t crater_typhist_installs(const crater_typhist_t *h)
{
    return h->installs;
}

int crater_typhist_is_prior(const crater_typhist_t *h)
{
    return !h->learned;
}

static json_t *shape_json(const crater_typical_t *t)
{
    char mask[24];

    snprintf(mask, sizeof(mask), "0x%" PRIx64, t->model_mask);
    return json_pack("{s:I, s:I, s:I, s:s, s:f}",
                     "gpus",
                     (json_int_t)t->gpus,
                     "slice",
                     (json_int_t)t->slice,
                     "cpuMilli",
                     (json_int_t)t->cpu_milli,
                     "modelMask",
                     mask,
                     "weight",
                     t->weight);
}

json_t *crater_typhist_json(const crater_typhist_t *h)
{
    crater_typical_t *t = NULL;
    size_t n = 0;
    json_t *shapes = json_array(), *o;

    if (!shapes || crater_typhist_get(h, &t, &n, NULL) < 0) {
        json_decref(shapes);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        json_array_append_new(shapes, shape_json(&t[i]));
    free(t);
    o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:f, s:f, s:o}",
                  "source",
                  use_prior(h) ? "prior" : "learned",
                  "seen",
                  (json_int_t)h->seen,
                  "installs",
                  (json_int_t)h->installs,
                  "halfLife",
                  (json_int_t)h->o.half_life,
                  "minSamples",
                  (json_int_t)h->o.min_samples,
                  "weight",
                  crater_typhist_total(h),
                  "moved",
                  crater_typhist_moved(h),
                  "shapes",
                  shapes);
    return o;
}
