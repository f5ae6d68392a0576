/* reserve.c - EASY backfill reservations on the scheduling core (see
 * include/crater/reserve.h for the rule).
 *
 * How the shadow time is found. The expected ends are visited in time
 * order (then task id), as a min-heap gives them up: every task ending at
 * the next end time is released with sched__apply (which touches only
 * its node's dynamic state and is undone exactly, as the preemption
 * planner does), then each node that released something at that time is
 * evaluated for the head with the real filters (sched__eval), lowest node
 * id first. The first fit is the shadow time and the head's node: the
 * earliest time, ties to the lowest node id. Everything released is then
 * put back in reverse order, bit for bit. A node's filters read only that
 * node, so a node is evaluated in the state it has once all its tasks
 * ending by then are released, whatever else is released elsewhere.
 *
 * Why this way. The pass asks for a reservation on every release of a
 * saturated cluster, and the running tasks far outnumber those that end
 * before the head fits. The visit reads only the ends up to the shadow
 * time: k of them cost O(k log k) and an evaluation per (time, node)
 * pair, whatever the number of running tasks, when the caller keeps its
 * ends as a heap (crater_sched_reserve_heap: the simulator maintains one
 * on start and end). A list in any order is first made into a heap, O(n).
 * (Before, every end was looked up, sorted by node and walked node by
 * node: O(n log n) per pass, 25-35% of a time-limited replay, B4.)
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

static bool end_less(const crater_task_end_t *a, const crater_task_end_t *b)
{
    return a->end_ms < b->end_ms
           || (a->end_ms == b->end_ms && a->task < b->task);
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

/* ---- visiting a heap of ends in order ------------------------------------ */

/* The heap h[0..n-1] is left alone; a second heap of its indices holds
 * the frontier (the children of what was taken). */
struct visit {
    const crater_task_end_t *h;
    size_t n;
    size_t *idx, nidx;
};

static bool idx_less(const struct visit *v, size_t a, size_t b)
{
    return end_less(&v->h[v->idx[a]], &v->h[v->idx[b]]);
}

static void idx_push(struct visit *v, size_t i)
{
    size_t k = v->nidx++;

    v->idx[k] = i;
    while (k > 0 && idx_less(v, k, (k - 1) / 2)) {
        size_t up = (k - 1) / 2, t = v->idx[up];
        v->idx[up] = v->idx[k];
        v->idx[k] = t;
        k = up;
    }
}

/* The next end in order (v->nidx > 0). */
static const crater_task_end_t *idx_pop(struct visit *v)
{
    size_t top = v->idx[0], k = 0;

    v->idx[0] = v->idx[--v->nidx];
    for (;;) {
        size_t c = 2 * k + 1, t;
        if (c >= v->nidx)
            break;
        if (c + 1 < v->nidx && idx_less(v, c + 1, c))
            c++;
        if (!idx_less(v, c, k))
            break;
        t = v->idx[c];
        v->idx[c] = v->idx[k];
        v->idx[k] = t;
        k = c;
    }
    if (2 * top + 1 < v->n)
        idx_push(v, 2 * top + 1);
    if (2 * top + 2 < v->n)
        idx_push(v, 2 * top + 2);
    return &v->h[top];
}

/* ---- the walk ------------------------------------------------------------ */

/* What was released so far, in release order. */
struct walk {
    struct ending *e;
    size_t n, cap;
};

static int walk_add(struct walk *w, const struct ending *x)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        struct ending *e = realloc(w->e, cap * sizeof(*e));
        if (!e)
            return -1;
        w->e = e;
        w->cap = cap;
    }
    w->e[w->n++] = *x;
    return 0;
}

/* Release every task ending at the next end time; -1 on ENOMEM. */
static int release_next(crater_sched_t *s, struct visit *v, struct walk *w)
{
    uint64_t t = v->h[v->idx[0]].end_ms;

    while (v->nidx && v->h[v->idx[0]].end_ms == t) {
        const crater_task_end_t *x = idx_pop(v);
        const struct task *k = sched__task_find(s, x->task);
        if (!k)
            continue; /* not the core's: skipped */
        if (walk_add(w, &(struct ending){k->p.node, t, k->id, k}) < 0)
            return -1;
        sched__apply(s, &k->p, -1);
    }
    return 0;
}

static int cmp_node(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

/* Of the nodes released from w->e[from..], the lowest that fits r now;
 * UINT32_MAX when none. nodes has room for w->n - from. */
static uint32_t first_fit(crater_sched_t *s,
                          const crater_request_t *r,
                          const struct walk *w,
                          size_t from,
                          uint32_t *nodes)
{
    size_t m = 0;

    for (size_t i = from; i < w->n; i++)
        nodes[m++] = w->e[i].node;
    qsort(nodes, m, sizeof(*nodes), cmp_node);
    for (size_t i = 0; i < m; i++)
        if ((i == 0 || nodes[i] != nodes[i - 1]) && fits(s, nodes[i], r, NULL))
            return nodes[i];
    return UINT32_MAX;
}

/* Walk the ends in order until r fits: *at, *node. 1 found, 0 not, -1
 * ENOMEM. Everything released is put back (w keeps the list). */
static int walk(crater_sched_t *s,
                const crater_request_t *r,
                struct visit *v,
                struct walk *w,
                uint64_t *at,
                uint32_t *node)
{
    uint32_t *nodes = NULL;
    int found = 0;

    while (!found && v->nidx) {
        size_t from = w->n;
        void *p;
        if (release_next(s, v, w) < 0
            || !(p = realloc(nodes, (w->n - from + 1) * sizeof(*nodes)))) {
            found = -1;
            break;
        }
        nodes = p;
        *node = first_fit(s, r, w, from, nodes);
        if (*node != UINT32_MAX) {
            *at = w->e[w->n - 1].end_ms;
            found = 1;
        }
    }
    for (size_t i = w->n; i-- > 0;)
        sched__apply(s, &w->e[i].t->p, +1);
    free(nodes);
    return found;
}

/* What the head's node has free at the shadow time once the head runs:
 * w->e holds, in end order, every task ending by then. */
static void fill_extra(crater_sched_t *s,
                       const crater_request_t *r,
                       const struct walk *w,
                       uint32_t node,
                       crater_reservation_t *out)
{
    for (size_t k = 0; k < w->n; k++)
        if (w->e[k].node == node)
            sched__apply(s, &w->e[k].t->p, -1);
    fits(s, node, r, &out->placement);
    sched__apply(s, &out->placement, +1);
    memset(out->w.extra, 0, sizeof(out->w.extra));
    out->w.extra[CRATER_QDIM_GPU] =
        (double)(s->st[node].ngpus - out->placement.ngpus);
    out->w.extra[CRATER_QDIM_CPU] = (double)s->dyn[node].cpu_free;
    out->w.extra[CRATER_QDIM_MEM] = (double)s->dyn[node].mem_free;
    sched__apply(s, &out->placement, -1);
    for (size_t k = w->n; k-- > 0;)
        if (w->e[k].node == node)
            sched__apply(s, &w->e[k].t->p, +1);
}

int crater_sched_reserve_heap(crater_sched_t *s,
                              const crater_request_t *head,
                              const crater_task_end_t *heap,
                              size_t n,
                              crater_reservation_t *out,
                              crater_error_t *err)
{
    struct visit v = {heap, n, malloc((n + 1) * sizeof(size_t)), 0};
    struct walk w = {0};
    uint64_t at = 0;
    uint32_t node = 0;
    int rc = -1;

    if (v.idx && n)
        idx_push(&v, 0);
    if (v.idx)
        rc = walk(s, head, &v, &w, &at, &node);
    if (rc < 0)
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
    else if (rc == 0)
        crater_errorf(err,
                      CRATER_EUNSCHED,
                      "no reservation: the head fits nowhere even "
                      "after every task with a time limit ended");
    else {
        memset(out, 0, sizeof(*out));
        out->w.shadow_ms = at;
        fill_extra(s, head, &w, node, out);
    }
    free(v.idx);
    free(w.e);
    return rc > 0 ? 0 : -1;
}

static void sift_down(crater_task_end_t *h, size_t n, size_t i)
{
    for (;;) {
        size_t c = 2 * i + 1;
        crater_task_end_t t;
        if (c >= n)
            return;
        if (c + 1 < n && end_less(&h[c + 1], &h[c]))
            c++;
        if (!end_less(&h[c], &h[i]))
            return;
        t = h[c];
        h[c] = h[i];
        h[i] = t;
        i = c;
    }
}

/* ends[0..n-1] as a heap in a new array (caller frees); NULL ENOMEM. */
static crater_task_end_t *heap_of(const crater_task_end_t *ends, size_t n)
{
    crater_task_end_t *h = malloc((n ? n : 1) * sizeof(*h));

    if (!h)
        return NULL;
    if (n)
        memcpy(h, ends, n * sizeof(*h));
    for (size_t i = n / 2; i-- > 0;)
        sift_down(h, n, i);
    return h;
}

int crater_sched_reserve(crater_sched_t *s,
                         const crater_request_t *head,
                         const crater_task_end_t *ends,
                         size_t n,
                         crater_reservation_t *out,
                         crater_error_t *err)
{
    crater_task_end_t *h = heap_of(ends, n);
    int rc;

    if (!h)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    rc = crater_sched_reserve_heap(s, head, h, n, out, err);
    free(h);
    return rc;
}

/* ---- gang heads -----------------------------------------------------------
 *
 * A gang fits once the nodes together hold all its replicas. How many a
 * node holds depends on that node alone (its filters read only it), so
 * the count is kept per node and redone only for the nodes that release
 * something at each end time; the first time the sum reaches the replica
 * count is the shadow time. */

struct gcount {
    const crater_request_t *r;
    uint32_t want;          /* replicas */
    uint32_t *k;            /* per node: replicas it holds (<= want) */
    uint64_t total;         /* sum of k */
    crater_placement_t *pl; /* want entries: scratch */
};

/* How many replicas node holds now (at most g->want): the filters'
 * placement charged one after another (sched__apply), then returned. */
static uint32_t count_on(crater_sched_t *s, struct gcount *g, uint32_t node)
{
    uint32_t k = 0;

    while (k < g->want && fits(s, node, g->r, &g->pl[k]))
        sched__apply(s, &g->pl[k++], +1);
    for (uint32_t i = k; i-- > 0;)
        sched__apply(s, &g->pl[i], -1);
    return k;
}

static void recount(crater_sched_t *s, struct gcount *g, uint32_t node)
{
    g->total -= g->k[node];
    g->k[node] = count_on(s, g, node);
    g->total += g->k[node];
}

/* Recount the nodes released from w->e[from..]; nodes has room. */
static void recount_released(crater_sched_t *s,
                             struct gcount *g,
                             const struct walk *w,
                             size_t from,
                             uint32_t *nodes)
{
    size_t m = 0;

    for (size_t i = from; i < w->n; i++)
        nodes[m++] = w->e[i].node;
    qsort(nodes, m, sizeof(*nodes), cmp_node);
    for (size_t i = 0; i < m; i++)
        if (i == 0 || nodes[i] != nodes[i - 1])
            recount(s, g, nodes[i]);
}

/* The nodes the replicas take (lowest ids first) and the first one's
 * placement, in the current state. -1 when they are too many. */
static int gang_nodes(crater_sched_t *s,
                      struct gcount *g,
                      crater_reservation_t *out)
{
    uint32_t left = g->want;

    out->nnodes = 0;
    for (uint32_t node = 0; node < s->n && left; node++) {
        if (!g->k[node])
            continue;
        if (out->nnodes == CRATER_RESV_MAX_NODES)
            return -1;
        if (out->nnodes == 0)
            fits(s, node, g->r, &out->placement);
        out->nodes[out->nnodes++] = node;
        left -= g->k[node] < left ? g->k[node] : left;
    }
    return 0;
}

/* Walk the ends until the gang fits, then fill out (in that state).
 * 1 found, 0 not, 2 too many nodes, -1 ENOMEM. State restored. */
static int gang_walk(crater_sched_t *s,
                     struct gcount *g,
                     struct visit *v,
                     struct walk *w,
                     crater_reservation_t *out)
{
    uint32_t *nodes = NULL;
    uint64_t at = 0;
    int found = 0;

    for (uint32_t node = 0; node < s->n; node++)
        recount(s, g, node);
    while (g->total < g->want && v->nidx) {
        size_t from = w->n;
        void *p;
        if (release_next(s, v, w) < 0
            || !(p = realloc(nodes, (w->n - from + 1) * sizeof(*nodes)))) {
            found = -1;
            break;
        }
        nodes = p;
        recount_released(s, g, w, from, nodes);
        at = w->e[w->n - 1].end_ms;
    }
    if (found == 0 && g->total >= g->want) {
        out->w.shadow_ms = at;
        found = gang_nodes(s, g, out) < 0 ? 2 : 1;
    }
    for (size_t i = w->n; i-- > 0;)
        sched__apply(s, &w->e[i].t->p, +1);
    free(nodes);
    return found;
}

int crater_sched_reserve_gang_heap(crater_sched_t *s,
                                   const crater_request_t *head,
                                   uint32_t replicas,
                                   const crater_task_end_t *heap,
                                   size_t n,
                                   crater_reservation_t *out,
                                   crater_error_t *err)
{
    struct visit v = {heap, n, malloc((n + 1) * sizeof(size_t)), 0};
    struct gcount g = {head,
                       replicas,
                       calloc(s->n + 1, sizeof(uint32_t)),
                       0,
                       malloc((replicas + 1) * sizeof(*g.pl))};
    struct walk w = {0};
    crater_reservation_t r;
    int rc = -1;

    memset(&r, 0, sizeof(r));
    if (v.idx && n)
        idx_push(&v, 0);
    if (v.idx && g.k && g.pl && replicas)
        rc = gang_walk(s, &g, &v, &w, &r);
    if (rc < 0)
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
    else if (rc == 0)
        crater_errorf(err,
                      CRATER_EUNSCHED,
                      "no reservation: the gang's %u replicas do not fit "
                      "even after every task with a time limit ended",
                      replicas);
    else if (rc == 2)
        crater_errorf(err,
                      CRATER_EUNSCHED,
                      "no reservation: the gang would take more than %d "
                      "nodes",
                      CRATER_RESV_MAX_NODES);
    else
        *out = r;
    free(v.idx);
    free(g.k);
    free(g.pl);
    free(w.e);
    return rc == 1 ? 0 : -1;
}

int crater_sched_reserve_gang(crater_sched_t *s,
                              const crater_request_t *head,
                              uint32_t replicas,
                              const crater_task_end_t *ends,
                              size_t n,
                              crater_reservation_t *out,
                              crater_error_t *err)
{
    crater_task_end_t *h = heap_of(ends, n);
    int rc;

    if (!h)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    rc = crater_sched_reserve_gang_heap(s, head, replicas, h, n, out, err);
    free(h);
    return rc;
}

/* Is node one the reservation holds (its head's node, or a gang's)? */
static bool reserved_node(const crater_reservation_t *r, uint32_t node)
{
    if (r->nnodes == 0)
        return node == r->placement.node;
    for (uint32_t i = 0; i < r->nnodes; i++)
        if (r->nodes[i] == node)
            return true;
    return false;
}

/* Cordon (on) or uncordon the reservation's nodes that were not cordoned
 * before (was[], one per reserved node, filled when on). */
static void cordon_reserved(crater_sched_t *s,
                            const crater_reservation_t *r,
                            bool on,
                            bool *was)
{
    uint32_t n = r->nnodes ? r->nnodes : 1;

    for (uint32_t i = 0; i < n; i++) {
        uint32_t node = r->nnodes ? r->nodes[i] : r->placement.node;
        if (node >= s->n)
            continue;
        if (on)
            was[i] = s->dyn[node].cordoned;
        if (!was[i])
            crater_sched_set_cordoned(s, node, on);
    }
}

int crater_sched_place_gang_backfill(crater_sched_t *s,
                                     const crater_request_t *req,
                                     uint32_t replicas,
                                     uint64_t first_task,
                                     uint64_t now_ms,
                                     uint64_t limit_ms,
                                     const crater_reservation_t *r,
                                     crater_placement_t *out,
                                     crater_error_t *err)
{
    bool was[CRATER_RESV_MAX_NODES];
    int rc;

    if (limit_ms && now_ms + limit_ms <= r->w.shadow_ms)
        return crater_sched_place_gang(s, req, replicas, first_task, out, err);
    cordon_reserved(s, r, true, was);
    rc = crater_sched_place_gang(s, req, replicas, first_task, out, err);
    cordon_reserved(s, r, false, was);
    if (rc == 0 || (err && err->errnum != CRATER_EUNSCHED))
        return rc;
    if (crater_sched_place_gang(s, req, replicas, first_task, out, NULL) < 0)
        return -1; /* err: why it fits nowhere else */
    for (uint32_t i = replicas; i-- > 0;)
        crater_sched_release(s, first_task + i, NULL);
    crater_errorf(err,
                  CRATER_EUNSCHED,
                  "gang would delay the reserved start of job %llu at the "
                  "head of the queue (it fits only on that job's node(s))",
                  (unsigned long long)r->head);
    return 1;
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
    if (!reserved_node(r, p->node))
        return CRATER_BACKFILL_EXTRA; /* the head's node is untouched */
    if (r->nnodes)
        return CRATER_BACKFILL_DENY; /* a gang's nodes keep no extra */
    if (shares_gpu(p, &r->placement))
        return CRATER_BACKFILL_DENY;
    v = crater_backfill_check(&r->w, now_ms, 0, demand);
    crater_backfill_commit(&r->w, v, demand);
    return v;
}

/* Place req with the head's node(s) left out; 0 when it fits elsewhere. */
static int place_elsewhere(crater_sched_t *s,
                           const crater_request_t *req,
                           const crater_reservation_t *r,
                           crater_placement_t *p)
{
    bool was[CRATER_RESV_MAX_NODES];
    int rc;

    cordon_reserved(s, r, true, was);
    rc = crater_sched_place(s, req, p, NULL);
    cordon_reserved(s, r, false, was);
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
    if (place_elsewhere(s, req, r, p) == 0) {
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
