/* metrics.h - a thread-safe metrics registry rendered in the Prometheus
 * text exposition format (version 0.0.4) for craterd's /metrics.
 *
 * A registry holds families (crater_metric_t): a name, help text, a type
 * (counter, gauge, histogram) and fixed label names. A family holds
 * series, one per distinct tuple of label values, created on first use.
 * A family without labels has its single series from registration on, so
 * it renders as 0 before anything happens (as Prometheus clients do).
 *
 * Threads: every function may be called from any thread, except that
 * crater_metrics_destroy() must not race with anything on that registry.
 * Updating an existing series costs a hash lookup under the family's
 * mutex and allocates nothing; the first use of a label tuple allocates.
 *
 * Families belong to the registry: they stay valid until
 * crater_metrics_destroy() and must not be freed by the caller.
 */
#ifndef CRATER_METRICS_H
#define CRATER_METRICS_H

#include <stddef.h>

#include "crater/error.h"

typedef struct crater_metrics crater_metrics_t;
typedef struct crater_metric crater_metric_t; /* a family */

/* NULL on ENOMEM. */
crater_metrics_t *crater_metrics_create(void);
/* Frees the registry and all its families. NULL is accepted. */
void crater_metrics_destroy(crater_metrics_t *m);

/* Register a family. label_names: NULL-terminated array, or NULL for no
 * labels; copied. Metric names match [a-zA-Z_:][a-zA-Z0-9_:]*, label
 * names [a-zA-Z_][a-zA-Z0-9_]* and must not start with "__" or repeat.
 * Errors (NULL returned): CRATER_EINVAL naming the bad name, CRATER_EEXIST
 * when the metric name is already registered, CRATER_ENOMEM. help may be
 * NULL (rendered as empty help). */
crater_metric_t *crater_metrics_counter(crater_metrics_t *m,
                                        const char *name,
                                        const char *help,
                                        const char *const *label_names,
                                        crater_error_t *err);
crater_metric_t *crater_metrics_gauge(crater_metrics_t *m,
                                      const char *name,
                                      const char *help,
                                      const char *const *label_names,
                                      crater_error_t *err);
/* buckets: n finite, strictly ascending upper bounds (copied); the +Inf
 * bucket is implicit. A histogram may not have a label named "le". */
crater_metric_t *crater_metrics_histogram(crater_metrics_t *m,
                                          const char *name,
                                          const char *help,
                                          const char *const *label_names,
                                          const double *buckets,
                                          size_t n,
                                          crater_error_t *err);

/* label_values: one non-NULL UTF-8 string per label name, in the order of
 * the family's label names; ignored (may be NULL) for a family without
 * labels. v must be finite. Each returns 0, or -1 (nothing changed) for:
 * a wrong family type, a non-finite v, a negative add to a counter,
 * missing or non-UTF-8 label values, or out of memory. */
int crater_metric_add(crater_metric_t *f,
                      const char *const *label_values,
                      double v); /* counter or gauge */
int crater_metric_set(crater_metric_t *f,
                      const char *const *label_values,
                      double v); /* gauge */
int crater_metric_observe(crater_metric_t *f,
                          const char *const *label_values,
                          double v); /* histogram */

/* Remove all series of a family (meant for gauges re-published from a
 * snapshot, such as per-node utilisation). Works on any type. */
void crater_metric_reset(crater_metric_t *f);

/* Render all families in registration order, series sorted by label
 * values: "# HELP" and "# TYPE" lines, then samples; histograms as
 * cumulative _bucket{le="..."} lines ending with le="+Inf", then _sum and
 * _count. Integral values print without exponent, others as the shortest
 * text that reads back to the same double; +Inf, -Inf, NaN as Prometheus
 * spells them. Returns a malloc'd NUL-terminated string the caller frees
 * (its length in *len when len is not NULL), or NULL on ENOMEM. */
char *crater_metrics_render(crater_metrics_t *m, size_t *len);

#endif /* CRATER_METRICS_H */
