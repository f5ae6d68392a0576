/* autoscale.c - how many replicas an inference service wants, the way
 * Knative's pod autoscaler (KPA) decides it, with time passed in.
 *
 * Inputs. Samples (time, requests in flight, requests per second) summed
 * over the service's replicas, typically one every 2 s; the metric the
 * service scales on (concurrency or rps) and its target per replica.
 *
 * One decision (crater__as_decide):
 *  1. Averages of the metric over the stable window (60 s) and the panic
 *     window (6 s) ending now. No sample in the stable window: keep the
 *     current count (nothing is known).
 *  2. want_stable = ceil(stable / target), want_panic = ceil(panic /
 *     target). Outside panic, when the stable average is within tolerance
 *     (10%) of current x target, want_stable = current: a noisy constant
 *     load then changes nothing (the KPA has no such band; Kubernetes' HPA
 *     has, and without it a load near a whole number of replicas flaps
 *     between two counts).
 *  3. Panic. panic / target >= threshold (2.0) x max(current, 1) enters
 *     panic mode, or extends it; it ends a stable window after the last
 *     time it was over the threshold. In panic the panic average decides
 *     and the count never goes down (not below current, not below the
 *     highest count panic asked for); otherwise the stable average decides.
 *  4. Rate limits per decision: at most ceil(max_scale_up_rate x ready)
 *     and at least floor(ready / max_scale_down_rate), ready = max(current,
 *     1).
 *  5. Scale-down delay: the highest count asked for over the delay window,
 *     so a short dip does not release replicas that are needed again.
 *  6. Bounds: min_replicas..max_replicas; min 0 without scale-to-zero
 *     counts as 1.
 *  7. Scale to zero happens only once zero has been asked for without a
 *     break for the grace period, which is at least the measured model load
 *     time: a replica that takes 40 s to load is not dropped after 30 s of
 *     quiet. Until then the last replica stays.
 *  8. Activation: requests waiting while no replica is ready ask for 1.
 *
 * Every number of the chain lands in the decision record with a reason text,
 * so the decision log says why a service has the replicas it has.
 *
 * Memory: samples older than the stable window and delay entries older than
 * the delay are dropped at each decision; both rings grow by doubling and
 * stay at the number of ticks in a window.
 */
#include "autoscale.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE INT64_MIN

typedef struct ring {
    int64_t *t;
    double *v;
    size_t head, n, cap;
} ring_t;

struct crater__as {
    crater__as_params_t p;
    ring_t samples; /* the metric the service scales on */
    ring_t wants;   /* rate-limited counts, for the scale-down delay */
    int64_t last_sample_ms, last_decide_ms;
    int64_t panic_since_ms; /* last time over the threshold; NONE */
    unsigned panic_max;     /* highest count asked for in this panic */
    int64_t zero_since_ms;  /* zero asked for without a break since; NONE */
};

void crater__as_params_default(crater__as_params_t *p)
{
    *p = (crater__as_params_t){
        .metric = CRATER__AS_CONCURRENCY,
        .target = 1,
        .stable_window_ms = 60000,
        .panic_window_ms = 6000,
        .panic_threshold = 2.0,
        .max_scale_up_rate = 1000,
        .max_scale_down_rate = 2,
        .scale_down_delay_ms = 0,
        .tolerance = 0.1,
        .min_replicas = 0,
        .max_replicas = 0,
        .scale_to_zero = true,
        .zero_grace_ms = 30000,
    };
}

static int bad(crater_error_t *err, const char *field, const char *why)
{
    return crater_errorf_field(err, CRATER_EINVAL, field, "%s: %s", field, why);
}

int crater__as_params_check(const crater__as_params_t *p, crater_error_t *err)
{
    if (!(isfinite(p->target) && p->target > 0))
        return bad(err, "target", "must be a number above 0");
    if (p->stable_window_ms < 1000)
        return bad(err, "stableWindow", "must be at least 1 s");
    if (p->panic_window_ms < 1 || p->panic_window_ms > p->stable_window_ms)
        return bad(err, "panicWindow", "must be 1 ms to the stable window");
    if (!(isfinite(p->panic_threshold) && p->panic_threshold > 1))
        return bad(err, "panicThreshold", "must be above 1.0");
    if (!(isfinite(p->max_scale_up_rate) && p->max_scale_up_rate > 1))
        return bad(err, "maxScaleUpRate", "must be above 1.0");
    if (!(isfinite(p->max_scale_down_rate) && p->max_scale_down_rate > 1))
        return bad(err, "maxScaleDownRate", "must be above 1.0");
    if (p->scale_down_delay_ms < 0 || p->scale_down_delay_ms > 3600000)
        return bad(err, "scaleDownDelay", "must be 0 to 1 h");
    if (!(isfinite(p->tolerance) && p->tolerance >= 0 && p->tolerance < 1))
        return bad(err, "tolerance", "must be 0 to below 1");
    if (p->max_replicas != 0 && p->max_replicas < p->min_replicas)
        return bad(err, "maxReplicas", "must not be below minReplicas");
    if (p->zero_grace_ms < 0)
        return bad(err, "scaleToZeroGrace", "must not be negative");
    return 0;
}

crater__as_t *crater__as_create(const crater__as_params_t *p,
                                crater_error_t *err)
{
    crater__as_t *a;

    if (crater__as_params_check(p, err) < 0)
        return NULL;
    a = calloc(1, sizeof(*a));
    if (a == NULL) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    a->p = *p;
    a->last_sample_ms = NONE;
    a->last_decide_ms = NONE;
    a->panic_since_ms = NONE;
    a->zero_since_ms = NONE;
    return a;
}

static void ring_free(ring_t *r)
{
    free(r->t);
    free(r->v);
}

void crater__as_destroy(crater__as_t *a)
{
    if (a == NULL)
        return;
    ring_free(&a->samples);
    ring_free(&a->wants);
    free(a);
}

/* ---- rings of (time, value), oldest first -------------------------- */

static size_t ring_at(const ring_t *r, size_t i)
{
    return (r->head + i) % r->cap;
}

static int ring_push(ring_t *r, int64_t t, double v)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 32;
        int64_t *nt = malloc(cap * sizeof(*nt));
        double *nv = malloc(cap * sizeof(*nv));
        if (nt == NULL || nv == NULL) {
            free(nt);
            free(nv);
            return -1;
        }
        for (size_t i = 0; i < r->n; i++) {
            nt[i] = r->t[ring_at(r, i)];
            nv[i] = r->v[ring_at(r, i)];
        }
        ring_free(r);
        *r = (ring_t){.t = nt, .v = nv, .head = 0, .n = r->n, .cap = cap};
    }
    r->t[ring_at(r, r->n)] = t;
    r->v[ring_at(r, r->n)] = v;
    r->n++;
    return 0;
}

/* Drop entries at or before cutoff. */
static void ring_trim(ring_t *r, int64_t cutoff)
{
    while (r->n > 0 && r->t[r->head] <= cutoff) {
        r->head = (r->head + 1) % r->cap;
        r->n--;
    }
}

/* Mean of the values in (from, to]; 0 with *count 0 when none. */
static double ring_mean(const ring_t *r, int64_t from, int64_t to, unsigned *n)
{
    double sum = 0;

    *n = 0;
    for (size_t i = 0; i < r->n; i++) {
        size_t k = ring_at(r, i);
        if (r->t[k] > from && r->t[k] <= to) {
            sum += r->v[k];
            (*n)++;
        }
    }
    return *n ? sum / *n : 0;
}

static double ring_max(const ring_t *r, int64_t from, int64_t to)
{
    double m = 0;

    for (size_t i = 0; i < r->n; i++) {
        size_t k = ring_at(r, i);
        if (r->t[k] > from && r->t[k] <= to && r->v[k] > m)
            m = r->v[k];
    }
    return m;
}

int crater__as_record(crater__as_t *a,
                      const crater__as_sample_t *s,
                      crater_error_t *err)
{
    double v = a->p.metric == CRATER__AS_RPS ? s->rps : s->concurrency;

    if (a->last_sample_ms != NONE && s->time_ms < a->last_sample_ms)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "time_ms",
                                   "time_ms: sample at %lld ms is before the "
                                   "previous one at %lld ms",
                                   (long long)s->time_ms,
                                   (long long)a->last_sample_ms);
    if (!(isfinite(s->concurrency) && s->concurrency >= 0))
        return bad(err, "concurrency", "must be a number >= 0");
    if (!(isfinite(s->rps) && s->rps >= 0))
        return bad(err, "rps", "must be a number >= 0");
    if (ring_push(&a->samples, s->time_ms, v) < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    a->last_sample_ms = s->time_ms;
    return 0;
}

/* ---- one decision --------------------------------------------------- */

static void reason(crater__as_decision_t *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Append "; text" (or set the first text) to the decision's reason. */
static void reason(crater__as_decision_t *d, const char *fmt, ...)
{
    size_t len = strlen(d->reason);
    va_list ap;

    if (len > 0 && len + 2 < sizeof d->reason) {
        memcpy(d->reason + len, "; ", 3);
        len += 2;
    }
    va_start(ap, fmt);
    vsnprintf(d->reason + len, sizeof d->reason - len, fmt, ap);
    va_end(ap);
}

/* ceil(x / target) as a count, tolerant of rounding (4.0000000001 is 4). */
static unsigned pods_for(double x, double target)
{
    double n = ceil(x / target - 1e-9);

    if (n <= 0)
        return 0;
    return n >= 1e9 ? 1000000000u : (unsigned)n;
}

static unsigned clampu(unsigned v, unsigned lo, unsigned hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Steps 1-3: averages, panic mode, the mode's count. */
static void observe(crater__as_t *a,
                    const crater__as_input_t *in,
                    crater__as_decision_t *d)
{
    const crater__as_params_t *p = &a->p;
    unsigned ready = in->current ? in->current : 1;
    bool over;

    d->observed_stable = ring_mean(&a->samples,
                                   in->now_ms - p->stable_window_ms,
                                   in->now_ms,
                                   &d->stable_samples);
    d->observed_panic = ring_mean(&a->samples,
                                  in->now_ms - p->panic_window_ms,
                                  in->now_ms,
                                  &d->panic_samples);
    d->want_stable = pods_for(d->observed_stable, p->target);
    d->want_panic = pods_for(d->observed_panic, p->target);
    over =
        d->panic_samples > 0
        && d->observed_panic / p->target >= p->panic_threshold * (double)ready;
    if (over) {
        if (a->panic_since_ms == NONE)
            reason(d,
                   "panic entered: %.3g over %gs >= %g x target %g x %u",
                   d->observed_panic,
                   p->panic_window_ms / 1000.0,
                   p->panic_threshold,
                   p->target,
                   ready);
        a->panic_since_ms = in->now_ms;
    } else if (a->panic_since_ms != NONE
               && in->now_ms - a->panic_since_ms >= p->stable_window_ms) {
        a->panic_since_ms = NONE;
        a->panic_max = 0;
        reason(d, "panic left: under the threshold for a stable window");
    }
    d->panic = a->panic_since_ms != NONE;
}

static void stable_want(const crater__as_t *a,
                        const crater__as_input_t *in,
                        crater__as_decision_t *d)
{
    double ratio;

    d->want = d->want_stable;
    if (in->current == 0) {
        reason(d, "stable: %.3g / target %g", d->observed_stable, a->p.target);
        return;
    }
    ratio = d->observed_stable / (a->p.target * in->current);
    if (fabs(ratio - 1) <= a->p.tolerance) {
        d->want = in->current;
        reason(d,
               "stable: %.3g within %g%% of %u x target %g: keep",
               d->observed_stable,
               a->p.tolerance * 100,
               in->current,
               a->p.target);
        return;
    }
    reason(d, "stable: %.3g / target %g", d->observed_stable, a->p.target);
}

/* Step 4 and the panic floor. */
static void rate_limit(crater__as_t *a,
                       const crater__as_input_t *in,
                       crater__as_decision_t *d)
{
    unsigned ready = in->current ? in->current : 1;
    double up = ceil(a->p.max_scale_up_rate * ready);
    unsigned max_up = up >= 1e9 ? 1000000000u : (unsigned)up;
    unsigned min_down = (unsigned)floor(ready / a->p.max_scale_down_rate);

    d->rate_limited = clampu(d->want, min_down, max_up);
    if (d->rate_limited != d->want)
        reason(d, "rate limit: %u..%u per decision", min_down, max_up);
    if (!d->panic)
        return;
    if (d->rate_limited < in->current)
        d->rate_limited = in->current;
    if (d->rate_limited < a->panic_max)
        d->rate_limited = a->panic_max;
    a->panic_max = d->rate_limited;
}

/* Steps 5-8. Returns -1 on out of memory. */
static int settle(crater__as_t *a,
                  const crater__as_input_t *in,
                  crater__as_decision_t *d)
{
    const crater__as_params_t *p = &a->p;
    unsigned lo = p->min_replicas, hi = p->max_replicas;
    int64_t grace =
        p->zero_grace_ms > in->load_ms ? p->zero_grace_ms : in->load_ms;

    d->delayed = d->rate_limited;
    if (p->scale_down_delay_ms > 0) {
        ring_trim(&a->wants, in->now_ms - p->scale_down_delay_ms);
        if (ring_push(&a->wants, in->now_ms, d->rate_limited) < 0)
            return -1;
        d->delayed = (unsigned)ring_max(&a->wants,
                                        in->now_ms - p->scale_down_delay_ms,
                                        in->now_ms);
        if (d->delayed != d->rate_limited)
            reason(d, "scale-down delay holds %u", d->delayed);
    }
    if (lo == 0 && !p->scale_to_zero)
        lo = 1;
    if (hi == 0)
        hi = UINT32_MAX;
    d->desired = clampu(d->delayed, lo, hi);
    if (d->desired != d->delayed)
        reason(d, "bounds %u..%u", lo, p->max_replicas);
    if (d->desired > 0 || in->waiting > 0) {
        a->zero_since_ms = NONE;
    } else {
        if (a->zero_since_ms == NONE)
            a->zero_since_ms = in->now_ms;
        if (in->current > 0 && in->now_ms - a->zero_since_ms < grace) {
            d->desired = 1;
            reason(d,
                   "zero grace: %lld of %lld ms left",
                   (long long)(grace - (in->now_ms - a->zero_since_ms)),
                   (long long)grace);
        }
    }
    if (d->desired == 0 && in->waiting > 0) {
        d->desired = 1;
        reason(d, "activation: %u waiting at zero", in->waiting);
    }
    return 0;
}

int crater__as_decide(crater__as_t *a,
                      const crater__as_input_t *in,
                      crater__as_decision_t *out,
                      crater_error_t *err)
{
    crater__as_decision_t d = {.now_ms = in->now_ms,
                               .current = in->current,
                               .target = a->p.target};

    if (a->last_decide_ms != NONE && in->now_ms < a->last_decide_ms)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "now_ms",
                                   "now_ms: %lld is before the last "
                                   "decision at %lld",
                                   (long long)in->now_ms,
                                   (long long)a->last_decide_ms);
    ring_trim(&a->samples, in->now_ms - a->p.stable_window_ms);
    observe(a, in, &d);
    if (d.stable_samples == 0) {
        d.want = in->current;
        reason(&d, "no samples in the stable window: keep %u", in->current);
    } else if (d.panic) {
        d.want = d.want_panic;
        reason(&d, "panic: %.3g / target %g", d.observed_panic, a->p.target);
    } else {
        stable_want(a, in, &d);
    }
    rate_limit(a, in, &d);
    if (settle(a, in, &d) < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    d.changed = d.desired != in->current;
    a->last_decide_ms = in->now_ms;
    *out = d;
    return 0;
}
