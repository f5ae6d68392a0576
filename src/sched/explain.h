/* explain.h - why a request fits nowhere: per filter reason, on how many
 * nodes it failed, and the node that came closest. Internal to src/sched;
 * the public form is crater_sched_explain() (JSON). */
#ifndef CRATER_SCHED_EXPLAIN_H
#define CRATER_SCHED_EXPLAIN_H

#include <stdint.h>

#include "sched/internal.h"

#define SCHED_EXPLAIN_MAX 24

struct sched_reason {
    const char *why; /* static text from the failing filter */
    uint32_t count;  /* nodes that failed with it */
    uint32_t best;   /* closest node (max have; min for percentages) */
    uint64_t need, have;
    int unit;
};

struct sched_explain {
    uint32_t nodes, fit;
    uint32_t nreasons;
    struct sched_reason r[SCHED_EXPLAIN_MAX]; /* count desc, then text */
    char text[1024];
};

/* Evaluate every node (by_class: every class, weighted by its size, which
 * gives the same result) and fill ex. */
void sched__explain_run(crater_sched_t *s,
                        const crater_request_t *r,
                        int by_class,
                        struct sched_explain *ex);

/* Run all filters and the scores on one node; 0 when it fits. */
int sched__eval(crater_sched_t *s,
                uint32_t node,
                const crater_request_t *r,
                struct sched_ctx *c);

#endif /* CRATER_SCHED_EXPLAIN_H */
