/* utilmodel.c - contention of co-located tasks for the resources that feed
 * their GPUs, the supply curve and its fit, the diurnal load curve
 * (include/crater/utilmodel.h has the model). Pure arithmetic: the
 * simulator (utilsim.c) calls it at every change of a node's task set,
 * with a handful to a few dozen tasks per node, so plain O(n log n) water
 * filling per pool is plenty. */
#include "crater/utilmodel.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#define SOLVE_ROUNDS 4
#define MIN_WEIGHT 1e-3

/* ---- water filling --------------------------------------------------------
 * Weighted max-min: claimant i is satisfied at level lambda when
 * min(want_i, quota_i) <= weight_i x lambda. Sort by that threshold, give
 * the satisfied their fill, split the rest by weight. */

struct wf {
    double lim, w; /* min(want, quota), weight */
    size_t i;
};

static int cmp_wf(const void *a, const void *b)
{
    const struct wf *x = a, *y = b;
    double tx = x->lim / x->w, ty = y->lim / y->w;

    return tx < ty ? -1 : tx > ty;
}

static double claim_limit(double want, const double *quota, size_t i)
{
    double q = quota ? quota[i] : 0;

    return q > 0 && q < want ? q : want;
}

int crater_util_waterfill(double cap,
                          const double *want,
                          const double *weight,
                          const double *quota,
                          size_t n,
                          double *got)
{
    struct wf *v = malloc((n ? n : 1) * sizeof(*v));
    double wsum = 0, left = cap > 0 ? cap : 0;

    if (!v) {
        errno = ENOMEM;
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        double w = weight && weight[i] > MIN_WEIGHT ? weight[i] : MIN_WEIGHT;
        v[i] = (struct wf){claim_limit(want[i], quota, i), w, i};
        wsum += w;
    }
    qsort(v, n, sizeof(*v), cmp_wf);
    for (size_t k = 0; k < n; k++) {
        double fair = left * v[k].w / wsum;
        double g = v[k].lim < fair ? v[k].lim : fair;
        got[v[k].i] = g;
        left -= g;
        wsum -= v[k].w;
    }
    free(v);
    return 0;
}

/* ---- the node solve --------------------------------------------------------
 * y[i][c]: the rate task i's other claims allowed in the last round; claim
 * c asks want x y. */

struct solve {
    const double *cap;
    size_t npool, n;
    crater_util_task_t *t;
    double *ratio; /* n x CRATER_UTIL_MAX_CLAIMS: got / want */
    double *want, *weight, *quota, *got;
    size_t *who; /* claim index: task * MAX + c */
};

static double other_min(const struct solve *s, size_t i, uint32_t c)
{
    double m = 1;

    for (uint32_t k = 0; k < s->t[i].nclaim; k++)
        if (k != c && s->ratio[i * CRATER_UTIL_MAX_CLAIMS + k] < m)
            m = s->ratio[i * CRATER_UTIL_MAX_CLAIMS + k];
    return m;
}

static size_t gather(struct solve *s, uint32_t pool)
{
    size_t m = 0;

    for (size_t i = 0; i < s->n; i++)
        for (uint32_t c = 0; c < s->t[i].nclaim; c++) {
            const crater_util_claim_t *cl = &s->t[i].claim[c];
            if (cl->pool != pool || !(cl->want > 0))
                continue;
            s->want[m] = cl->want * other_min(s, i, c);
            s->weight[m] = cl->weight;
            s->quota[m] = cl->cap;
            s->who[m++] = i * CRATER_UTIL_MAX_CLAIMS + c;
        }
    return m;
}

static int solve_pool(struct solve *s, uint32_t pool, double *next)
{
    size_t m = gather(s, pool);

    if (crater_util_waterfill(s->cap[pool],
                              s->want,
                              s->weight,
                              s->quota,
                              m,
                              s->got)
        < 0)
        return -1;
    for (size_t k = 0; k < m; k++) {
        size_t i = s->who[k] / CRATER_UTIL_MAX_CLAIMS;
        uint32_t c = (uint32_t)(s->who[k] % CRATER_UTIL_MAX_CLAIMS);
        next[s->who[k]] = s->got[k] / s->t[i].claim[c].want;
    }
    return 0;
}

static int solve_round(struct solve *s, double *next)
{
    for (size_t k = 0; k < s->n * CRATER_UTIL_MAX_CLAIMS; k++)
        next[k] = 1;
    for (uint32_t p = 0; p < s->npool; p++)
        if (solve_pool(s, p, next) < 0)
            return -1;
    for (size_t k = 0; k < s->n * CRATER_UTIL_MAX_CLAIMS; k++)
        s->ratio[k] = next[k] < 1 ? next[k] : 1;
    return 0;
}

static void set_rates(struct solve *s)
{
    for (size_t i = 0; i < s->n; i++) {
        double m = 1;
        for (uint32_t c = 0; c < s->t[i].nclaim; c++)
            if (s->t[i].claim[c].want > 0)
                m = fmin(m, s->ratio[i * CRATER_UTIL_MAX_CLAIMS + c]);
        s->t[i].rate = m;
    }
}

int crater_util_solve(const double *pool_cap,
                      size_t npool,
                      crater_util_task_t *t,
                      size_t n)
{
    size_t slots = (n ? n : 1) * CRATER_UTIL_MAX_CLAIMS;
    struct solve s = {.cap = pool_cap, .npool = npool, .n = n, .t = t};
    double *buf = malloc(slots * 6 * sizeof(double));
    size_t *who = malloc(slots * sizeof(size_t));
    int rc = -1;

    for (size_t i = 0; i < n; i++)
        t[i].rate = 1;
    if (buf && who) {
        s.ratio = buf, s.want = buf + slots, s.weight = buf + 2 * slots;
        s.quota = buf + 3 * slots, s.got = buf + 4 * slots, s.who = who;
        for (size_t k = 0; k < slots; k++)
            s.ratio[k] = 1;
        rc = 0;
        for (int r = 0; r < SOLVE_ROUNDS && rc == 0; r++)
            rc = solve_round(&s, buf + 5 * slots);
        if (rc == 0)
            set_rates(&s);
    }
    if (rc < 0)
        errno = ENOMEM;
    free(buf);
    free(who);
    return rc;
}

/* ---- the supply curve and its fit ------------------------------------------
 */

double crater_util_supply_ratio(double demand, double supply)
{
    if (!(demand > 0))
        return 1;
    return supply >= demand ? 1 : (supply > 0 ? supply / demand : 0);
}

double crater_util_step_time(double compute_s, double demand, double supply)
{
    double r = crater_util_supply_ratio(demand, supply);

    return r > 0 ? compute_s / r : INFINITY;
}

double crater_util_fit_step(const crater_util_point_t *p,
                            double compute_s,
                            double demand,
                            double avail)
{
    double sup = p->supply > 0 && isfinite(p->supply) ? p->supply : avail;

    return crater_util_step_time(compute_s, demand, fmin(sup, avail));
}

static double fit_err(
    const crater_util_point_t *pt, size_t n, double g, double d, double a)
{
    double e = 0;

    for (size_t i = 0; i < n; i++) {
        double rel = crater_util_fit_step(&pt[i], g, d, a) / pt[i].step_s - 1;
        e += rel * rel;
    }
    return e;
}

/* Grid of 41 x 41 over [dlo, dhi] x [alo, ahi], then zoom around the best
 * point three times. Demands and ceilings span 1e-3 .. 1e12 (cores, bytes
 * per second), so the first grid is logarithmic around the supplies. */
void crater_util_fit(const crater_util_point_t *pt,
                     size_t n,
                     double compute_s,
                     double *demand,
                     double *avail)
{
    double smax = 0;

    for (size_t i = 0; i < n; i++)
        if (isfinite(pt[i].supply) && pt[i].supply > smax)
            smax = pt[i].supply;
    double lo = log(smax / 1000), hi = log(smax * 100);
    double dlo = lo, dhi = hi, alo = lo, ahi = hi, bd = 0, ba = 0;
    for (int zoom = 0; zoom < 4; zoom++) {
        double best = INFINITY;
        for (int i = 0; i <= 40; i++)
            for (int j = 0; j <= 40; j++) {
                double d = dlo + (dhi - dlo) * i / 40;
                double a = alo + (ahi - alo) * j / 40;
                double e = fit_err(pt, n, compute_s, exp(d), exp(a));
                if (e < best)
                    best = e, bd = d, ba = a;
            }
        double wd = (dhi - dlo) / 10, wa = (ahi - alo) / 10;
        dlo = bd - wd, dhi = bd + wd, alo = ba - wa, ahi = ba + wa;
    }
    *demand = exp(bd);
    *avail = exp(ba);
}

/* ---- diurnal load
 * ------------------------------------------------------------ */

double crater_util_diurnal(uint64_t t_ms, double trough)
{
    const double pi = 3.14159265358979323846;
    double h = (double)(t_ms / 3600000 % 24) + 0.5;

    return trough + (1 - trough) * (1 + cos(2 * pi * (h - 14) / 24)) / 2;
}
