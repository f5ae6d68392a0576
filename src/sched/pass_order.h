/* pass_order.h - the scheduling pass's cached queue order (internal to
 * src/sched; see pass_order.c for why it is kept by merging).
 *
 * Ownership: the pass embeds one pass_order_t (zeroed to start) and frees
 * its buffers with pass__order_free(). ids[] and shape[] are owned here;
 * the pass reads them and writes shape[] (a tag it keeps per position).
 */
#ifndef CRATER_SCHED_PASS_ORDER_H
#define CRATER_SCHED_PASS_ORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"
#include "crater/queue.h"

#define PASS_SHAPE_NONE UINT32_MAX

typedef struct pass_order {
    uint64_t *ids;   /* the queue order; may hold jobs since placed */
    uint32_t *shape; /* per position: the pass's tag, or PASS_SHAPE_NONE */
    size_t n, cap;
    uint64_t *spare_ids; /* the merge writes here, then swaps */
    uint32_t *spare_shape;
    uint64_t *added; /* ids queued since ids[] was built */
    size_t nadded, capadded;
    bool built; /* ids[] is a whole order (a merge may follow) */
    bool lost;  /* an id was not remembered: the next build is whole */
} pass_order_t;

/* Id was queued: the next pass__order_update() takes it in. */
void pass__order_queued(pass_order_t *o, uint64_t id);

/* Bring ids[] up to date: with share input (or an age boost) the whole
 * crater_queue_order(); otherwise, when jobs were queued since, a merge
 * of them into the kept order. Either way ids[] is then exactly the
 * queue's order (plus jobs no longer queued, only if nothing was queued
 * since). 0, or -1 with CRATER_ENOMEM or queue.h's errors. */
int pass__order_update(pass_order_t *o,
                       crater_queue_t *q,
                       uint64_t now_ms,
                       const crater_share_input_t *share,
                       crater_error_t *err);

void pass__order_free(pass_order_t *o);

#endif /* CRATER_SCHED_PASS_ORDER_H */
