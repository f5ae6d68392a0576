/* reserve.c - EASY backfill reservations on the scheduling core (see
 * include/crater/reserve.h for the rule).
 *
 * How the shadow time is found. Tasks that end are grouped by node and
 * sorted by (node, end, id). Each node is then walked on its own: its
 * ending tasks are released in end order with sched__apply (which touches
 * only the node's dynamic state and is undone exactly, as the preemption
 * planner does), and after each distinct end time the head is evaluated
 * with the real filters (sched__eval). The first end time at which it
 * fits is that node's start time for the head; the node is then put back
 * bit for bit. The earliest over nodes wins (ties: lowest node id), and a
 * node whose first ending task ends after the best time found so far is
 * skipped, so a pass reads only the nodes that can still win.
 *
 * Cost: O(T log T) for T ending tasks plus one evaluation per distinct end
 * time on the nodes visited; the class index is never touched, except
 * when crater_sched_place_backfill() leaves the head's node out of a
 * second placement (a cordon, undone at once).
 */
#include "crater/reserve.h"

#include <stdlib.h>
#include <string.h>

#include "sched/explain.h"
#include "sched/internal.h"

struct ending {
    uint32_t node;
    uint64_t end_ms, id;
    const struct task *t;
};

static int cmp_ending(const void *a, const void *b)
{
    const struct ending *x = a, *y = b;

    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    if (x->end_ms != y->end_ms)
        return x->end_ms < y->end_ms ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int fits(crater_sched_t *s,
                uint32_t node,
                const crater_request_t *r,
                crater_placement_t *p)
{
    struct sched_ctx c;

    if (!s->dyn[node].ready || s->dyn[node].cordoned)
        return 0;
    if (sched__eval(s, node, r, &c) < 0)
        return 0;
    if (p)
        *p = c.p;
    return 1;
}

/* Release e[0..n-1] (one node's, in end order) until r fits; *at the end
 * time that made it fit. Everything released is put back. 1 when it fits
 * by best (exclusive), 0 otherwise. */
static int walk_node(crater_sched_t *s,
                     const crater_request_t *r,
                     const struct ending *e,
                     size_t n,
                     uint64_t best,
                     uint64_t *at)
{
    size_t i = 0, k;
    int found = 0;

    while (i < n && e[i].end_ms < best && !found) {
        for (k = i; k < n && e[k].end_ms == e[i].end_ms; k++)
            sched__apply(s, &e[k].t->p, -1);
        if (fits(s, e[i].node, r, NULL)) {
            *at = e[i].end_ms;
            found = 1;
        }
        i = k;
    }
    while (i-- > 0)
        sched__apply(s, &e[i].t->p, +1);
    return found;
}

/* What the head's node has free at the shadow time once the head runs:
 * e[0..n-1] are that node's ending tasks, released up to shadow. */
static void fill_extra(crater_sched_t *s,
                       const crater_request_t *r,
                       const struct ending *e,
                       size_t n,
                       crater_reservation_t *out)
{
    size_t k = 0;
    uint32_t node;

    while (k < n && e[k].end_ms <= out->w.shadow_ms)
        sched__apply(s, &e[k++].t->p, -1);
    node = e[0].node;
    fits(s, node, r, &out->placement);
    sched__apply(s, &out->placement, +1);
    memset(out->w.extra, 0, sizeof(out->w.extra));
    out->w.extra[CRATER_QDIM_GPU] =
        (double)(s->st[node].ngpus - out->placement.ngpus);
    out->w.extra[CRATER_QDIM_CPU] = (double)s->dyn[node].cpu_free;
    out->w.extra[CRATER_QDIM_MEM] = (double)s->dyn[node].mem_free;
    sched__apply(s, &out->placement, -1);
    while (k-- > 0)
        sched__apply(s, &e[k].t->p, +1);
}

static struct ending *collect(const crater_sched_t *s,
                              const crater_task_end_t *ends,
                              size_t n,
                              size_t *m)
{
    struct ending *e = malloc((n ? n : 1) * sizeof(*e));

    *m = 0;
    for (size_t i = 0; e && i < n; i++) {
        const struct task *t = sched__task_find(s, ends[i].task);
        if (t)
            e[(*m)++] = (struct ending){t->p.node, ends[i].end_ms, t->id, t};
    }
    if (e)
        qsort(e, *m, sizeof(*e), cmp_ending);
    return e;
}

int crater_sched_reserve(crater_sched_t *s,
                         const crater_request_t *head,
                         const crater_task_end_t *ends,
                         size_t n,
                         crater_reservation_t *out,
                         crater_error_t *err)
{
    size_t m, i = 0, bi = 0, bn = 0;
    uint64_t best = UINT64_MAX, at;
    struct ending *e = collect(s, ends, n, &m);

    if (!e)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    while (i < m) {
        size_t k = i;
        while (k < m && e[k].node == e[i].node)
            k++;
        if (walk_node(s, head, e + i, k - i, best, &at)) {
            best = at;
            bi = i;
            bn = k - i;
        }
        i = k;
    }
    if (best == UINT64_MAX) {
        free(e);
        return crater_errorf(err,
                             CRATER_EUNSCHED,
                             "no reservation: the head fits nowhere even "
                             "after every task with a time limit ended");
    }
    memset(out, 0, sizeof(*out));
    out->w.shadow_ms = best;
    fill_extra(s, head, e + bi, bn, out);
    free(e);
    return 0;
}

/* p shares a GPU with the head's reserved placement. */
static bool shares_gpu(const crater_placement_t *p, const crater_placement_t *h)
{
    for (uint32_t i = 0; i < p->ngpus; i++)
        for (uint32_t k = 0; k < h->ngpus; k++)
            if (p->gpu[i] == h->gpu[k])
                return true;
    return false;
}

/* The verdict for placement p (commits the extra it uses). */
static crater_backfill_verdict_t judge(crater_reservation_t *r,
                                       uint64_t now_ms,
                                       uint64_t limit_ms,
                                       const crater_placement_t *p)
{
    double demand[CRATER_QDIM_COUNT] = {0};
    crater_backfill_verdict_t v;

    demand[CRATER_QDIM_GPU] = (double)p->ngpus;
    demand[CRATER_QDIM_CPU] = (double)p->cpu_milli;
    demand[CRATER_QDIM_MEM] = (double)p->mem_bytes;
    if (limit_ms
        && crater_backfill_check(&r->w, now_ms, limit_ms, demand)
               == CRATER_BACKFILL_BEFORE_SHADOW)
        return CRATER_BACKFILL_BEFORE_SHADOW;
    if (p->node != r->placement.node)
        return CRATER_BACKFILL_EXTRA; /* the head's node is untouched */
    if (shares_gpu(p, &r->placement))
        return CRATER_BACKFILL_DENY;
    v = crater_backfill_check(&r->w, now_ms, 0, demand);
    crater_backfill_commit(&r->w, v, demand);
    return v;
}

/* Place req with the head's node left out; 0 when it fits elsewhere. */
static int place_elsewhere(crater_sched_t *s,
                           const crater_request_t *req,
                           uint32_t node,
                           crater_placement_t *p)
{
    int rc;

    if (crater_sched_set_cordoned(s, node, true) < 0)
        return -1;
    rc = crater_sched_place(s, req, p, NULL);
    crater_sched_set_cordoned(s, node, false);
    return rc;
}

int crater_sched_place_backfill(crater_sched_t *s,
                                const crater_request_t *req,
                                uint64_t now_ms,
                                uint64_t limit_ms,
                                crater_reservation_t *r,
                                crater_placement_t *p,
                                crater_backfill_verdict_t *v,
                                crater_error_t *err)
{
    *v = CRATER_BACKFILL_DENY;
    if (crater_sched_place(s, req, p, err) < 0)
        return -1;
    *v = judge(r, now_ms, limit_ms, p);
    if (*v != CRATER_BACKFILL_DENY)
        return 0;
    if (place_elsewhere(s, req, r->placement.node, p) == 0) {
        *v = CRATER_BACKFILL_EXTRA;
        return 0;
    }
    crater_errorf(err,
                  CRATER_EUNSCHED,
                  "would delay the reserved start of job %llu at the head "
                  "of the queue",
                  (unsigned long long)r->head);
    return 1;
}
