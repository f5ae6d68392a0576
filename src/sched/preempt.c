/* preempt.c - the preemption planner: when a request fits nowhere, find
 * the cheapest set of running lower-priority preemptible tasks whose
 * release makes it fit, and return it as a plan without executing it
 * (the control plane does that: SIGTERM, grace period, SIGKILL).
 *
 * Cost is lexicographic: the highest victim priority (lower is better),
 * then the work lost (sum over victims of now - max(start, last
 * checkpoint)), then the number of victims.
 *
 * Why this way. A request is one replica, so its victims all sit on the
 * node it will land on; nodes are planned independently. On each node the
 * candidates are sorted by (priority, lost work, id) and released one by
 * one on the real state until the request fits there: the first prefix
 * that fits has the lowest possible highest-priority. Then every chosen
 * victim is put back once, most expensive first, and stays back if the
 * request still fits, which makes the set minimal. The filters are the
 * real ones (sched__eval on that node), so the plan cannot disagree with
 * what crater_sched_place() will do once the victims are gone.
 *
 * Releasing and re-committing is exact (state.c), so the state is the
 * same afterwards; the task records (start, checkpoint) are restored by
 * hand because a commit stamps a new start time. Preemption is rare and
 * a node has few tasks, so the cost of evaluating the node after each
 * step is fine.
 */
#include <stdlib.h>
#include <string.h>

#include "sched/explain.h"
#include "sched/internal.h"

#define MAXV CRATER_PREEMPT_MAX_VICTIMS

struct cand {
    struct task t; /* copy of the task record, to re-commit it */
    uint64_t lost;
    uint8_t gone; /* released by the planner right now */
};

int crater_sched_set_task_checkpoint(crater_sched_t *s,
                                     uint64_t task,
                                     uint64_t ms)
{
    struct task *t = sched__task_find(s, task);

    if (!t)
        return -1;
    t->ckpt_ms = ms;
    return 0;
}

static uint64_t lost_work(const struct task *t, uint64_t now)
{
    uint64_t since = t->ckpt_ms > t->start_ms ? t->ckpt_ms : t->start_ms;

    return now > since ? now - since : 0;
}

static int by_node_cost(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;

    if (x->t.p.node != y->t.p.node)
        return x->t.p.node < y->t.p.node ? -1 : 1;
    if (x->t.priority != y->t.priority)
        return x->t.priority < y->t.priority ? -1 : 1;
    if (x->lost != y->lost)
        return x->lost < y->lost ? -1 : 1;
    return x->t.id < y->t.id ? -1 : x->t.id > y->t.id;
}

static int by_id(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Preemptible tasks below prio, sorted by node then cost. Caller frees. */
static struct cand *collect(const crater_sched_t *s,
                            int32_t prio,
                            uint32_t *n,
                            int *oom)
{
    uint64_t now = s->env.now_ms(s->env.arg);
    struct cand *c;

    *n = 0;
    *oom = 0;
    if (!s->tused)
        return NULL;
    if (!(c = calloc(s->tused, sizeof(*c)))) {
        *oom = 1;
        return NULL;
    }
    for (uint32_t i = 0; i < s->tsize; i++) {
        const struct task *t = &s->tasks[i];
        if (t->id && t->preemptible && t->priority < prio) {
            c[*n].t = *t;
            c[*n].lost = lost_work(t, now);
            (*n)++;
        }
    }
    qsort(c, *n, sizeof(*c), by_node_cost);
    return c;
}

static int take(crater_sched_t *s, struct cand *c)
{
    if (crater_sched_release(s, c->t.id, NULL) < 0)
        return -1;
    c->gone = 1;
    return 0;
}

/* Re-commit c exactly as it was, start time and checkpoint included. */
static int put(crater_sched_t *s, struct cand *c)
{
    crater_request_t r = {.priority = c->t.priority,
                          .preemptible = c->t.preemptible};
    struct task *t;

    if (crater_sched_commit(s, c->t.id, &r, &c->t.p, NULL) < 0)
        return -1;
    t = sched__task_find(s, c->t.id);
    t->start_ms = c->t.start_ms;
    t->ckpt_ms = c->t.ckpt_ms;
    c->gone = 0;
    return 0;
}

/* Put back every candidate still released, last released first. */
static int restore(crater_sched_t *s, struct cand *c, uint32_t n)
{
    int rc = 0;

    for (uint32_t i = n; i-- > 0;)
        if (c[i].gone && put(s, &c[i]) < 0)
            rc = -1;
    return rc;
}

static int fits(crater_sched_t *s,
                uint32_t node,
                const crater_request_t *r,
                struct sched_ctx *ctx)
{
    return sched__eval(s, node, r, ctx) == 0;
}

/* Release the cheapest prefix that makes r fit, then put back whatever is
 * not needed. 1: fits with c[i].gone marking the victims; 0: no plan on
 * this node (everything restored); -1: out of memory. */
static int shrink_set(crater_sched_t *s,
                      const crater_request_t *r,
                      struct cand *c,
                      uint32_t n)
{
    uint32_t node = c[0].t.p.node, k = 0;
    struct sched_ctx ctx;
    int ok = 0;

    while (!ok && k < n && k < MAXV) {
        if (take(s, &c[k++]) < 0)
            return -1;
        ok = fits(s, node, r, &ctx);
    }
    if (!ok)
        return restore(s, c, k) < 0 ? -1 : 0;
    for (uint32_t i = k; i-- > 0;) {
        if (put(s, &c[i]) < 0)
            return -1;
        if (!fits(s, node, r, &ctx) && take(s, &c[i]) < 0)
            return -1;
    }
    return 1;
}

static void fill_plan(crater_sched_t *s,
                      const crater_request_t *r,
                      const struct cand *c,
                      uint32_t n,
                      crater_preempt_plan_t *plan)
{
    struct sched_ctx ctx;

    memset(plan, 0, sizeof(*plan));
    plan->max_priority = INT32_MIN;
    for (uint32_t i = 0; i < n; i++) {
        if (!c[i].gone)
            continue;
        plan->victims[plan->nvictims++] = c[i].t.id;
        plan->lost_ms += c[i].lost;
        if (c[i].t.priority > plan->max_priority)
            plan->max_priority = c[i].t.priority;
    }
    qsort(plan->victims, plan->nvictims, sizeof(plan->victims[0]), by_id);
    sched__eval(s, c[0].t.p.node, r, &ctx); /* fits: shrink_set said so */
    plan->placement = ctx.p;
}

/* Plan on the node of c[0..n-1]: 1 found, 0 none, -1 out of memory. The
 * state is restored in every case but the last. */
static int plan_node(crater_sched_t *s,
                     const crater_request_t *r,
                     struct cand *c,
                     uint32_t n,
                     crater_preempt_plan_t *plan)
{
    int rc = shrink_set(s, r, c, n);

    if (rc == 1)
        fill_plan(s, r, c, n, plan);
    if (rc != 0 && restore(s, c, n) < 0)
        return -1;
    return rc;
}

static int cheaper(const crater_preempt_plan_t *a,
                   const crater_preempt_plan_t *b)
{
    if (a->max_priority != b->max_priority)
        return a->max_priority < b->max_priority;
    if (a->lost_ms != b->lost_ms)
        return a->lost_ms < b->lost_ms;
    return a->nvictims < b->nvictims;
}

/* Plan node by node (c is sorted by node, so ties keep the lowest id). */
static int plan_all(crater_sched_t *s,
                    const crater_request_t *r,
                    struct cand *c,
                    uint32_t n,
                    crater_preempt_plan_t *best,
                    uint32_t *nnodes)
{
    crater_preempt_plan_t cur;
    int found = 0, rc;

    *nnodes = 0;
    for (uint32_t a = 0, b; a < n; a = b) {
        for (b = a + 1; b < n && c[b].t.p.node == c[a].t.p.node; b++)
            ;
        (*nnodes)++;
        if ((rc = plan_node(s, r, c + a, b - a, &cur)) < 0)
            return -1;
        if (rc == 1 && (!found || cheaper(&cur, best))) {
            *best = cur;
            found = 1;
        }
    }
    return found;
}

static int no_plan(const crater_request_t *r,
                   uint32_t ncand,
                   uint32_t nnodes,
                   crater_error_t *err)
{
    if (!ncand)
        return crater_errorf(err,
                             CRATER_EUNSCHED,
                             "no preemption plan: no running preemptible "
                             "task has a priority below %d",
                             (int)r->priority);
    return crater_errorf(err,
                         CRATER_EUNSCHED,
                         "no preemption plan: no preemptible lower-priority "
                         "tasks whose release would make it fit (%u "
                         "candidate task(s) below priority %d on %u "
                         "node(s))",
                         ncand,
                         (int)r->priority,
                         nnodes);
}

int crater_sched_plan_preemption(crater_sched_t *s,
                                 const crater_request_t *req,
                                 crater_preempt_plan_t *plan,
                                 crater_error_t *err)
{
    crater_preempt_plan_t best;
    uint32_t n, nnodes = 0;
    struct cand *c;
    int oom, rc;

    memset(&best, 0, sizeof(best));
    best.max_priority = INT32_MIN;
    if (crater_sched_place(s, req, &best.placement, NULL) == 0) {
        *plan = best;
        return 0;
    }
    c = collect(s, req->priority, &n, &oom);
    if (oom)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    /* Planning releases and re-commits victims many times on the real
     * state; the index only has to be right once they are all back, so
     * it is held and the touched nodes reindexed afterwards (a no-op for
     * a node back in its old state). */
    s->reindex_hold++;
    rc = n ? plan_all(s, req, c, n, &best, &nnodes) : 0;
    s->reindex_hold--;
    for (uint32_t i = 0; i < n; i++)
        if (sched__reindex(s, c[i].t.p.node) < 0)
            rc = -1;
    free(c);
    if (rc < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (rc == 0)
        return no_plan(req, n, nnodes, err);
    *plan = best;
    return 0;
}
