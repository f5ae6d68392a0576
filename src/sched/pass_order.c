/* pass_order.c - the scheduling pass's queue order, kept by merging.
 *
 * Why. A full pass walks the pending jobs in crater_queue_order(), and
 * on a saturated cluster jobs arrive between almost any two releases, so
 * the order used to be rebuilt (every entry keyed, then sorted) on nearly
 * every pass: 15% of the million-job replay (B6). Without share input and
 * without an age boost the order depends on the entries alone
 * (crater_queue_entry_cmp), so the order already held stays right for the
 * jobs still queued, and the jobs queued since only have to be merged in:
 * sort the few new ones, then one linear merge that also drops the jobs
 * that left the queue. The result is the same sequence crater_queue_order
 * gives (test_queue checks the comparison against it).
 *
 * A job that left and came back (a preemption's victim) is among the new
 * ones and, if its entry did not change, equal to its old place: it is
 * kept once, with its tag. Should a requeued entry have changed (another
 * priority or submit time), the kept order would stop being sorted under
 * the current entries; the merge checks that as it goes and falls back to
 * the whole order, which also forgets the tags.
 *
 * With share input (craterd) or an age boost the order changes with
 * every bind or with time, and is rebuilt in full as before.
 */
#include "sched/pass_order.h"

#include <stdlib.h>
#include <string.h>

static int grow(pass_order_t *o, size_t n)
{
    void *a, *b, *c, *d;

    if (n <= o->cap)
        return 0;
    n = n > 2 * o->cap ? n : 2 * o->cap;
    a = realloc(o->ids, n * sizeof(*o->ids));
    if (a)
        o->ids = a;
    b = realloc(o->shape, n * sizeof(*o->shape));
    if (b)
        o->shape = b;
    c = realloc(o->spare_ids, n * sizeof(*o->spare_ids));
    if (c)
        o->spare_ids = c;
    d = realloc(o->spare_shape, n * sizeof(*o->spare_shape));
    if (d)
        o->spare_shape = d;
    if (!a || !b || !c || !d)
        return -1;
    o->cap = n;
    return 0;
}

void pass__order_queued(pass_order_t *o, uint64_t id)
{
    if (o->lost)
        return;
    if (o->nadded == o->capadded) {
        size_t cap = o->capadded ? 2 * o->capadded : 256;
        uint64_t *a = realloc(o->added, cap * sizeof(*a));
        if (!a) {
            o->lost = true; /* the next build is a whole one */
            return;
        }
        o->added = a;
        o->capadded = cap;
    }
    o->added[o->nadded++] = id;
}

void pass__order_free(pass_order_t *o)
{
    free(o->ids);
    free(o->shape);
    free(o->spare_ids);
    free(o->spare_shape);
    free(o->added);
    memset(o, 0, sizeof(*o));
}

static int whole(pass_order_t *o,
                 crater_queue_t *q,
                 uint64_t now_ms,
                 const crater_share_input_t *share,
                 crater_error_t *err)
{
    size_t n = crater_queue_count(q);

    o->built = false;
    if (grow(o, n) < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (crater_queue_order(q, now_ms, share, o->ids, err) < 0)
        return -1;
    o->n = n;
    for (size_t i = 0; i < n; i++)
        o->shape[i] = PASS_SHAPE_NONE;
    o->nadded = 0;
    o->lost = false;
    o->built = share == NULL;
    return 0;
}

static int cmp_entry(const void *a, const void *b)
{
    return crater_queue_entry_cmp(*(const crater_queue_entry_t *const *)a,
                                  *(const crater_queue_entry_t *const *)b);
}

/* The added jobs still queued, in order, each once; NULL on ENOMEM. */
static const crater_queue_entry_t **sorted_added(pass_order_t *o,
                                                 crater_queue_t *q,
                                                 size_t *m)
{
    const crater_queue_entry_t **e = malloc(o->nadded * sizeof(*e));
    size_t k = 0; /* nadded > 0 here */

    for (size_t i = 0; e && i < o->nadded; i++)
        if ((e[k] = crater_queue_get(q, o->added[i])))
            k++;
    if (!e)
        return NULL;
    qsort(e, k, sizeof(*e), cmp_entry);
    *m = 0;
    for (size_t i = 0; i < k; i++)
        if (*m == 0 || e[*m - 1] != e[i])
            e[(*m)++] = e[i];
    return e;
}

/* Append one job to the spare buffers. */
static void put(pass_order_t *o, size_t *n, uint64_t id, uint32_t shape)
{
    o->spare_ids[*n] = id;
    o->spare_shape[(*n)++] = shape;
}

/* Merge the kept order (jobs still queued) with add[0..m-1] into the
 * spare buffers, then swap. -1 when the kept order is not sorted under
 * the current entries (a requeued entry changed). */
static int merge(pass_order_t *o,
                 crater_queue_t *q,
                 const crater_queue_entry_t **add,
                 size_t m)
{
    const crater_queue_entry_t *last = NULL, *e;
    size_t n = 0, k = 0;
    void *t;

    for (size_t i = 0; i < o->n; i++) {
        if (!(e = crater_queue_get(q, o->ids[i])))
            continue; /* placed, or gone */
        if (last && crater_queue_entry_cmp(last, e) >= 0)
            return -1;
        last = e;
        while (k < m && crater_queue_entry_cmp(add[k], e) < 0)
            put(o, &n, add[k++]->id, PASS_SHAPE_NONE);
        if (k < m && add[k] == e)
            k++; /* requeued unchanged: kept once, with its tag */
        put(o, &n, e->id, o->shape[i]);
    }
    while (k < m)
        put(o, &n, add[k++]->id, PASS_SHAPE_NONE);
    t = o->ids;
    o->ids = o->spare_ids;
    o->spare_ids = t;
    t = o->shape;
    o->shape = o->spare_shape;
    o->spare_shape = t;
    o->n = n;
    return 0;
}

int pass__order_update(pass_order_t *o,
                       crater_queue_t *q,
                       uint64_t now_ms,
                       const crater_share_input_t *share,
                       crater_error_t *err)
{
    const crater_queue_entry_t **add;
    size_t m = 0;
    int rc;

    if (share)
        return whole(o, q, now_ms, share, err);
    if (o->built && !o->lost && o->nadded == 0)
        return 0; /* nothing queued since: kept, as it always was */
    if (!o->built || o->lost || !crater_queue_order_is_static(q))
        return whole(o, q, now_ms, share, err);
    if (grow(o, o->n + o->nadded) < 0 || !(add = sorted_added(o, q, &m)))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    rc = merge(o, q, add, m);
    free(add);
    if (rc < 0)
        return whole(o, q, now_ms, share, err);
    o->nadded = 0;
    return 0;
}
