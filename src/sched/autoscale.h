/* autoscale.h - the inference-service autoscaler (internal to Crater; see
 * autoscale.c for the algorithm). Pure: the caller passes the time in every
 * call, so craterd and the tests drive the same code.
 *
 *     crater__as_params_t p;
 *     crater__as_params_default(&p);
 *     p.target = 4;                       // 4 requests in flight per replica
 *     p.min_replicas = 0; p.max_replicas = 8; p.scale_to_zero = true;
 *     crater__as_t *a = crater__as_create(&p, &err);
 *     every tick:
 *         crater__as_sample_t s = {.time_ms = now, .concurrency = c,
 *                                  .rps = q};
 *         crater__as_record(a, &s, &err);
 *         crater__as_input_t in = {.now_ms = now, .current = ready,
 *                                  .waiting = queued, .load_ms = load};
 *         crater__as_decide(a, &in, &d, &err);   // d.desired, d.reason ...
 *     crater__as_destroy(a);
 *
 * Ownership: crater__as_create() copies the parameters; the caller frees
 * the autoscaler with crater__as_destroy() (NULL accepted). A decision is
 * a plain struct the caller owns (it holds no pointers), ready for a
 * decision log. Not thread-safe: one autoscaler per service, used by one
 * thread at a time.
 */
#ifndef CRATER_SCHED_AUTOSCALE_H
#define CRATER_SCHED_AUTOSCALE_H

#include <stdbool.h>
#include <stdint.h>

#include "crater/error.h"

/* What "load per replica" is measured in. */
typedef enum crater__as_metric {
    CRATER__AS_CONCURRENCY, /* requests in flight */
    CRATER__AS_RPS,         /* requests per second */
} crater__as_metric_t;

typedef struct crater__as_params {
    crater__as_metric_t metric;
    double target;               /* per replica, > 0 */
    int64_t stable_window_ms;    /* default 60000 */
    int64_t panic_window_ms;     /* default 6000; <= stable window */
    double panic_threshold;      /* default 2.0 = 200% of target */
    double max_scale_up_rate;    /* default 1000 (x current per decision) */
    double max_scale_down_rate;  /* default 2 (current / 2 per decision) */
    int64_t scale_down_delay_ms; /* default 0; max desired over it */
    double tolerance;            /* default 0.1: keep current within 10% */
    unsigned min_replicas;       /* default 0 */
    unsigned max_replicas;       /* default 0 = unbounded */
    bool scale_to_zero;          /* default true (needs min_replicas 0) */
    int64_t zero_grace_ms;       /* default 30000; at least the load time */
} crater__as_params_t;

/* One observation of a service, summed over its replicas. time_ms must not
 * go backwards from one sample to the next. */
typedef struct crater__as_sample {
    int64_t time_ms;
    double concurrency; /* requests in flight (waiting ones included) */
    double rps;         /* requests per second */
} crater__as_sample_t;

/* What the caller knows at decision time. */
typedef struct crater__as_input {
    int64_t now_ms;
    unsigned current; /* replicas ready now */
    unsigned waiting; /* requests held while no replica is ready */
    int64_t load_ms;  /* measured model load time (0 = unknown) */
} crater__as_input_t;

#define CRATER__AS_REASON 128

/* A decision and everything it was made from, for the decision log. */
typedef struct crater__as_decision {
    int64_t now_ms;
    unsigned current;
    double target;          /* per replica */
    double observed_stable; /* average over the stable window */
    double observed_panic;  /* average over the panic window */
    unsigned stable_samples, panic_samples;
    unsigned want_stable;  /* ceil(observed_stable / target) */
    unsigned want_panic;   /* ceil(observed_panic / target) */
    unsigned want;         /* the mode's choice, before rate limits */
    unsigned rate_limited; /* after the scale-up/-down rate limits */
    unsigned delayed;      /* after the scale-down delay */
    unsigned desired;      /* final: after min/max, zero grace, activation */
    bool panic;            /* in panic mode after this decision */
    bool changed;          /* desired != current */
    char reason[CRATER__AS_REASON];
} crater__as_decision_t;

typedef struct crater__as crater__as_t;

/* Fill p with the defaults above (metric concurrency, target 1). */
void crater__as_params_default(crater__as_params_t *p);

/* 0, or -1 with CRATER_EINVAL naming the parameter (err->field is its name:
 * "target", "panicWindow", ...) and the reason. */
int crater__as_params_check(const crater__as_params_t *p, crater_error_t *err);

/* NULL with err filled: the params check above, or CRATER_ENOMEM. */
crater__as_t *crater__as_create(const crater__as_params_t *p,
                                crater_error_t *err);
void crater__as_destroy(crater__as_t *a);

/* Add a sample. -1 with CRATER_EINVAL when its time goes backwards or a
 * value is negative or not finite (the sample is not kept); CRATER_ENOMEM. */
int crater__as_record(crater__as_t *a,
                      const crater__as_sample_t *s,
                      crater_error_t *err);

/* Decide the desired replica count at in->now_ms (not before the last
 * decision: -1 with CRATER_EINVAL). Fills *d (also on success only). */
int crater__as_decide(crater__as_t *a,
                      const crater__as_input_t *in,
                      crater__as_decision_t *d,
                      crater_error_t *err);

#endif /* CRATER_SCHED_AUTOSCALE_H */
