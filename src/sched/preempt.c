/* preempt.c - the preemption planner: when a request fits nowhere, find
 * the cheapest set of running lower-priority preemptible tasks whose
 * release makes it fit, and return it as a plan without executing it
 * (the control plane does that: SIGTERM, grace period, SIGKILL).
 *
 * Cost is lexicographic: the highest victim priority (lower is better),
 * then the work lost (sum over victims of now - max(start, last
 * checkpoint)), then the number of victims; ties go to the lowest node.
 *
 * Why this way. A request is one replica, so its victims all sit on the
 * node it will land on; nodes are planned independently. On each node the
 * candidates are sorted by (priority, lost work, id) and released one by
 * one until the request fits there: the first prefix that fits has the
 * lowest possible highest-priority. Then every chosen victim but the last
 * is put back once, most expensive first, and stays back if the request
 * still fits, which makes the set minimal (the last one stays: without it
 * the node is in the state of the previous prefix, which did not fit). The
 * filters are the real ones (sched__eval on that node), so the plan cannot
 * disagree with what crater_sched_place() will do once the victims are
 * gone.
 *
 * Why it is fast enough to run once per scheduling pass on 10,000 busy
 * nodes (the decisions are those of the plain algorithm above):
 * - Trial releases and re-commits touch only the node's dynamic state
 *   (sched__apply), which is exact, so the node is bit for bit as before
 *   afterwards: the task table and the class index are never touched.
 * - An evaluation is preceded by place.c's precheck (free CPU, memory,
 *   free whole GPUs or room: conditions every filter run checks anyway),
 *   so a state that cannot fit costs no filter run.
 * - First, per node, the shortest prefix that passes the precheck (worked
 *   out on a scratch copy of the node's GPUs, CPU and memory) gives a
 *   lower bound on that node's cost (its last candidate's priority and
 *   lost work, one victim), and nodes where no prefix passes have no plan.
 *   Nodes are then planned in the order of that bound (a heap) and
 *   planning stops once the bound alone loses to the best plan found (the
 *   winner, the least (cost, node id), does not depend on the visiting
 *   order).
 * - That bound is kept per node (struct pbound) with the node's ver
 *   (state.c) and the request fields it depends on (priority, GPUs,
 *   slice, CPU, memory): most nodes do not change between two plans, so a
 *   call reads their tasks only when they did. The candidate order does
 *   not change with time once every candidate's start or checkpoint is in
 *   the past (lost work = now - that time), so a bound is kept only then
 *   and only used while the clock has not gone back.
 * - The winner's placement is evaluated once, at the end.
 * - A node where even all its preemptible tasks below the request's
 *   priority would not give back enough CPU, memory, whole GPUs or GPU
 *   room (their sums by priority, kept on commit and release by psum.c)
 *   has no prefix passing the precheck, so it is skipped without reading
 *   its tasks (may_plan); the "no plan" text's counts come from kept
 *   counts too (without preemptionMinRuntime).
 * - A caller that plans the same request again (pass.c, per shape) keeps
 *   a memo of its last failure: nodes not touched since still have no
 *   plan (their state, tasks and candidate order are the same), so only
 *   the nodes touched since are planned (psum.c's touch log); on a
 *   saturated cluster a few nodes change between two passes. B6 with
 *   preemption (10,000 nodes, 553,179 plans) went from 945.7 s to 34 s.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/explain.h"
#include "sched/internal.h"

#define MAXV CRATER_PREEMPT_MAX_VICTIMS

struct cand {
    const struct task *t; /* the table does not change while planning */
    uint64_t id, lost;
    int32_t prio;
    uint32_t node;
    uint8_t gone; /* released by the planner right now */
};

/* A node's bound for one request: valid while ver (never 0 when valid),
 * epoch and the request fields match and the clock is at least now. */
struct pbound {
    uint64_t ver, epoch, now;
    uint64_t cpu, mem;
    uint32_t gpus, slice;
    int32_t prio;
    uint32_t ncand; /* candidates on the node */
    uint32_t kpre;  /* shortest prefix passing the precheck, 0: none */
    int32_t lb_prio;
    uint64_t lb_since; /* max(start, checkpoint) of candidate kpre - 1 */
};

/* A node to plan, keyed by its lower bound (lb_prio, lb_lost, node). */
struct nplan {
    uint32_t node, kpre;
    int32_t lb_prio;
    uint64_t lb_lost;
};

/* The planner's memory, kept between calls (sched.pre). */
struct sched_pre {
    struct pbound *b; /* per node, nb entries */
    uint32_t nb;
    struct nplan *heap;
    uint32_t heapcap;
    struct cand *c; /* one node's candidates */
    uint32_t ccap;
};

/* The best plan so far and which of its node's candidates are victims. */
struct best {
    crater_preempt_plan_t plan;
    uint32_t node, mask; /* mask bit i: candidate i is a victim */
    int found;
};

int crater_sched_set_task_checkpoint(crater_sched_t *s,
                                     uint64_t task,
                                     uint64_t ms)
{
    struct task *t = sched__task_find(s, task);

    if (!t)
        return -1;
    t->ckpt_ms = ms;
    if (ms > s->since_max)
        s->since_max = ms;
    sched__node_touch(s, t->p.node);
    return 0;
}

void sched__pre_free(crater_sched_t *s)
{
    if (!s->pre)
        return;
    free(s->pre->b);
    free(s->pre->heap);
    free(s->pre->c);
    free(s->pre);
    s->pre = NULL;
}

/* The buffers sized for the nodes that hold tasks. */
static int pre_need(crater_sched_t *s)
{
    struct sched_pre *x = s->pre;
    void *p;

    if (!x && !(x = s->pre = calloc(1, sizeof(*x))))
        return -1;
    if (x->nb < s->ntcap) {
        if (!(p = realloc(x->b, s->ntcap * sizeof(*x->b))))
            return -1;
        x->b = p;
        memset(x->b + x->nb, 0, (s->ntcap - x->nb) * sizeof(*x->b));
        x->nb = s->ntcap;
    }
    if (x->heapcap < s->ntcap) {
        if (!(p = realloc(x->heap, s->ntcap * sizeof(*x->heap))))
            return -1;
        x->heap = p;
        x->heapcap = s->ntcap;
    }
    return 0;
}

static uint64_t since_of(const struct task *t)
{
    return t->ckpt_ms > t->start_ms ? t->ckpt_ms : t->start_ms;
}

static uint64_t lost_of(uint64_t since, uint64_t now)
{
    return now > since ? now - since : 0;
}

static int by_cost(const struct cand *x, const struct cand *y)
{
    if (x->prio != y->prio)
        return x->prio < y->prio ? -1 : 1;
    if (x->lost != y->lost)
        return x->lost < y->lost ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int by_id(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Sort one node's few candidates by cost (insertion sort: a node holds a
 * handful of tasks, and qsort's set-up costs more than the sort). */
static void sort_run(struct cand *c, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        struct cand x = c[i];
        uint32_t j = i;
        for (; j > 0 && by_cost(&c[j - 1], &x) > 0; j--)
            c[j] = c[j - 1];
        c[j] = x;
    }
}

/* Why task t may not be a victim of r at time now: 0 it may be; 1 it is
 * not preemptible; 2 its priority is not below r's; 3 it has run less
 * than preemptionMinRuntime (a victim's protection against thrash: short
 * high-priority jobs preempting the same job again as soon as it is
 * back). */
static int blocked(const crater_sched_t *s,
                   const struct task *t,
                   const crater_request_t *r,
                   uint64_t now)
{
    if (!t->preemptible)
        return 1;
    if (t->priority >= r->priority)
        return 2;
    if (s->preempt_min_ms && now < t->start_ms + s->preempt_min_ms)
        return 3;
    return 0;
}

/* The preemptible tasks below r's priority on node, sorted by cost, into
 * s->pre->c; *n their count, *timeless whether every start or checkpoint
 * is at most now (then their order does not change as time passes). */
static int gather(crater_sched_t *s,
                  const crater_request_t *r,
                  uint32_t node,
                  uint64_t now,
                  uint32_t *n,
                  int *timeless)
{
    const struct node_tasks *nt = &s->ntasks[node];
    struct sched_pre *x = s->pre;

    if (x->ccap < nt->n) {
        struct cand *c = realloc(x->c, nt->n * sizeof(*c));
        if (!c)
            return -1;
        x->c = c;
        x->ccap = nt->n;
    }
    *n = 0;
    *timeless = 1;
    for (uint32_t i = 0; i < nt->n; i++) {
        const struct task *t = sched__task_find(s, nt->ids[i]);
        int why = blocked(s, t, r, now);
        if (why == 3)
            *timeless = 0; /* it becomes a candidate later */
        if (why)
            continue;
        if (since_of(t) > now)
            *timeless = 0;
        x->c[(*n)++] = (struct cand){t,
                                     t->id,
                                     lost_of(since_of(t), now),
                                     t->priority,
                                     node,
                                     0};
    }
    sort_run(x->c, *n);
    return 0;
}

static void take(crater_sched_t *s, struct cand *c)
{
    sched__apply(s, &c->t->p, -1);
    c->gone = 1;
}

static void put(crater_sched_t *s, struct cand *c)
{
    sched__apply(s, &c->t->p, +1);
    c->gone = 0;
}

/* Put back every candidate still released. */
static void restore(crater_sched_t *s, struct cand *c, uint32_t n)
{
    for (uint32_t i = n; i-- > 0;)
        if (c[i].gone)
            put(s, &c[i]);
}

/* place.c's precheck on the node's current state: necessary conditions
 * that every filter run checks, so failing it means sched__eval fails. */
static int may_fit(const crater_sched_t *s,
                   uint32_t node,
                   const crater_request_t *r)
{
    const struct node_static *st = &s->st[node];
    const struct node_dyn *d = &s->dyn[node];
    uint32_t whole = 0, room = 0;

    if (!d->ready || d->cordoned || d->cpu_free < r->cpu_milli
        || d->mem_free < r->mem_bytes)
        return 0;
    if (r->gpus == 0)
        return 1;
    for (uint32_t i = 0; i < st->ngpus; i++) {
        uint32_t g = st->gpu_first + i, m;
        whole += s->gd[g].ntasks == 0;
        if (r->slice_mib && (m = sched__room_mib(s, g)) > room)
            room = m;
    }
    if (r->slice_mib == 0)
        return whole >= r->gpus;
    return room >= r->slice_mib + s->ctx_mib;
}

static int fits(crater_sched_t *s, uint32_t node, const crater_request_t *r)
{
    struct sched_ctx ctx;

    return may_fit(s, node, r) && sched__eval(s, node, r, &ctx) == 0;
}

/* A scratch copy of what may_fit() reads of one node, for the bound. */
struct scratch {
    uint64_t cpu, mem;
    uint64_t cap[MAX_GPUS]; /* as in sched__room_mib() */
    uint32_t res[MAX_GPUS];
    uint8_t nt[MAX_GPUS], whole[MAX_GPUS];
    uint32_t ngpus;
};

static void scratch_load(const crater_sched_t *s,
                         uint32_t node,
                         struct scratch *x)
{
    const struct node_static *st = &s->st[node];

    x->cpu = s->dyn[node].cpu_free;
    x->mem = s->dyn[node].mem_free;
    x->ngpus = st->ngpus;
    for (uint32_t i = 0; i < st->ngpus; i++) {
        uint32_t g = st->gpu_first + i;
        x->cap[i] = (uint64_t)((double)s->gs[g].mem_mib * s->overcommit);
        x->res[i] = s->gd[g].reserved_mib;
        x->nt[i] = s->gd[g].ntasks;
        x->whole[i] = s->gd[g].whole;
    }
}

/* sched__apply(s, p, -1) on the scratch copy. */
static void scratch_release(struct scratch *x, const crater_placement_t *p)
{
    x->cpu += p->cpu_milli;
    x->mem += p->mem_bytes;
    for (uint32_t i = 0; i < p->ngpus; i++) {
        x->res[p->gpu[i]] -= p->gpu_mib[i];
        x->nt[p->gpu[i]]--;
        x->whole[p->gpu[i]] = 0;
    }
}

/* may_fit() on the scratch copy of a usable node. */
static int scratch_fits(const crater_sched_t *s,
                        const struct scratch *x,
                        const crater_request_t *r)
{
    uint32_t whole = 0, room = 0;

    if (x->cpu < r->cpu_milli || x->mem < r->mem_bytes)
        return 0;
    if (r->gpus == 0)
        return 1;
    for (uint32_t i = 0; i < x->ngpus; i++) {
        whole += x->nt[i] == 0;
        if (r->slice_mib && !x->whole[i] && x->nt[i] < s->max_tasks
            && x->res[i] < x->cap[i] && x->cap[i] - x->res[i] > room)
            room = (uint32_t)(x->cap[i] - x->res[i]);
    }
    if (r->slice_mib == 0)
        return whole >= r->gpus;
    return room >= r->slice_mib + s->ctx_mib;
}

/* The length of the shortest prefix of c[0..n-1] (at most MAXV) whose
 * release passes the precheck, 0 if none does; worked out on a scratch
 * copy of the node, so the state is not touched. */
static uint32_t first_possible(const crater_sched_t *s,
                               const crater_request_t *r,
                               const struct cand *c,
                               uint32_t n)
{
    const struct node_dyn *d = &s->dyn[c[0].node];
    struct scratch x;

    if (!d->ready || d->cordoned)
        return 0;
    scratch_load(s, c[0].node, &x);
    for (uint32_t k = 0; k < n && k < MAXV; k++) {
        scratch_release(&x, &c[k].t->p);
        if (scratch_fits(s, &x, r))
            return k + 1;
    }
    return 0;
}

/* Free whole GPUs of node now (may_fit()'s count). */
static uint32_t whole_free(const crater_sched_t *s, uint32_t node)
{
    const struct node_static *st = &s->st[node];
    uint32_t whole = 0;

    for (uint32_t i = 0; i < st->ngpus; i++)
        whole += s->gd[st->gpu_first + i].ntasks == 0;
    return whole;
}

/* The most room a GPU of node could have once mib MiB of its charges are
 * returned (at least what scratch_fits() finds after any release). */
static uint64_t room_bound(const crater_sched_t *s, uint32_t node, uint64_t mib)
{
    const struct node_static *st = &s->st[node];
    uint64_t room = 0;

    for (uint32_t i = 0; i < st->ngpus; i++) {
        uint32_t g = st->gpu_first + i;
        uint64_t cap = (uint64_t)((double)s->gs[g].mem_mib * s->overcommit);
        uint64_t res = s->gd[g].reserved_mib;
        uint64_t lo = res > mib ? res - mib : 0;
        if (cap > lo && cap - lo > room)
            room = cap - lo;
    }
    return room;
}

/* Could some release on node make r pass the precheck? 0 when even all
 * its preemptible tasks below r's priority (a superset of the candidates)
 * would not give back enough CPU, memory, whole GPUs or GPU room: then
 * first_possible() finds no prefix and the node has no plan, so it is
 * skipped without reading its tasks (psum.c keeps the sums). Each GPU a
 * released task held can become free at most once, and a GPU's charge
 * drops at most by all the charges released. */
static int may_plan(const crater_sched_t *s,
                    const crater_request_t *r,
                    uint32_t node)
{
    const struct node_tasks *nt = &s->ntasks[node];
    const struct node_dyn *d = &s->dyn[node];
    struct psum a = {0};

    for (uint32_t i = 0; i < nt->nps && nt->ps[i].prio < r->priority; i++) {
        a.n += nt->ps[i].n;
        a.ngpus += nt->ps[i].ngpus;
        a.cpu += nt->ps[i].cpu;
        a.mem += nt->ps[i].mem;
        a.mib += nt->ps[i].mib;
    }
    if (!a.n || !d->ready || d->cordoned || d->cpu_free + a.cpu < r->cpu_milli
        || d->mem_free + a.mem < r->mem_bytes)
        return 0;
    if (r->gpus == 0)
        return 1;
    if (r->slice_mib == 0)
        return whole_free(s, node) + a.ngpus >= r->gpus;
    return room_bound(s, node, a.mib) >= (uint64_t)r->slice_mib + s->ctx_mib;
}

/* Release the cheapest prefix that makes r fit (the ones shorter than
 * kpre fail the precheck), then put back whatever is not needed. 1: fits
 * with c[i].gone marking the victims (still released); 0: no plan on
 * this node (everything restored). */
static int shrink_set(crater_sched_t *s,
                      const crater_request_t *r,
                      struct cand *c,
                      uint32_t n,
                      uint32_t kpre)
{
    uint32_t node = c[0].node, k = 0;
    int ok = 0;

    while (k + 1 < kpre)
        take(s, &c[k++]);
    while (!ok && k < n && k < MAXV) {
        take(s, &c[k++]);
        ok = fits(s, node, r);
    }
    if (!ok) {
        restore(s, c, k);
        return 0;
    }
    for (uint32_t i = k - 1; i-- > 0;) {
        put(s, &c[i]);
        if (!fits(s, node, r))
            take(s, &c[i]);
    }
    return 1;
}

/* The cost of the victims marked gone in c[0..n-1], and their mask. */
static void plan_cost(const struct cand *c,
                      uint32_t n,
                      crater_preempt_plan_t *plan,
                      uint32_t *mask)
{
    memset(plan, 0, sizeof(*plan));
    plan->max_priority = INT32_MIN;
    *mask = 0;
    for (uint32_t i = 0; i < n && i < MAXV; i++) {
        if (!c[i].gone)
            continue;
        *mask |= 1u << i;
        plan->victims[plan->nvictims++] = c[i].id;
        plan->lost_ms += c[i].lost;
        if (c[i].prio > plan->max_priority)
            plan->max_priority = c[i].prio;
    }
}

/* (cost, node) order: is a (on node an) cheaper than b (on node bn)? */
static int cheaper(const crater_preempt_plan_t *a,
                   uint32_t an,
                   const crater_preempt_plan_t *b,
                   uint32_t bn)
{
    if (a->max_priority != b->max_priority)
        return a->max_priority < b->max_priority;
    if (a->lost_ms != b->lost_ms)
        return a->lost_ms < b->lost_ms;
    if (a->nvictims != b->nvictims)
        return a->nvictims < b->nvictims;
    return an < bn;
}

static int bound_ok(const crater_sched_t *s,
                    const struct pbound *b,
                    uint32_t node,
                    const crater_request_t *r,
                    uint64_t now)
{
    return b->ver && b->ver == s->ntasks[node].ver && b->epoch == s->memo_epoch
           && now >= b->now && b->prio == r->priority && b->gpus == r->gpus
           && b->slice == r->slice_mib && b->cpu == r->cpu_milli
           && b->mem == r->mem_bytes;
}

/* node's bound for r: kept from an earlier call, or worked out (and kept
 * when the candidate order cannot change with time). */
static int node_bound(crater_sched_t *s,
                      const crater_request_t *r,
                      uint32_t node,
                      uint64_t now,
                      struct pbound *out)
{
    struct pbound *b = &s->pre->b[node];
    const struct cand *c;
    uint32_t n;
    int timeless;

    if (bound_ok(s, b, node, r, now)) {
        *out = *b;
        return 0;
    }
    if (gather(s, r, node, now, &n, &timeless) < 0)
        return -1;
    c = s->pre->c; /* gather may have moved it */
    *out = (struct pbound){.ver = s->ntasks[node].ver,
                           .epoch = s->memo_epoch,
                           .now = now,
                           .cpu = r->cpu_milli,
                           .mem = r->mem_bytes,
                           .gpus = r->gpus,
                           .slice = r->slice_mib,
                           .prio = r->priority,
                           .ncand = n};
    if (n && (out->kpre = first_possible(s, r, c, n)) != 0) {
        out->lb_prio = c[out->kpre - 1].prio;
        out->lb_since = since_of(c[out->kpre - 1].t);
    }
    *b = *out;
    if (!timeless)
        b->ver = 0;
    return 0;
}

/* ---- the nodes to plan, least lower bound first (a binary heap) ---------
 */

static int nless(const struct nplan *a, const struct nplan *b)
{
    if (a->lb_prio != b->lb_prio)
        return a->lb_prio < b->lb_prio;
    if (a->lb_lost != b->lb_lost)
        return a->lb_lost < b->lb_lost;
    return a->node < b->node;
}

static void sift_down(struct nplan *h, uint32_t n, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, m = i;
        struct nplan t;
        if (l < n && nless(&h[l], &h[m]))
            m = l;
        if (l + 1 < n && nless(&h[l + 1], &h[m]))
            m = l + 1;
        if (m == i)
            return;
        t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* Add node to the heap (*m entries) when it may have a plan. */
static int bound_one(crater_sched_t *s,
                     const crater_request_t *r,
                     uint32_t node,
                     uint64_t now,
                     uint32_t *m)
{
    struct pbound b;

    if (!s->ntasks[node].n || !may_plan(s, r, node))
        return 0;
    if (node_bound(s, r, node, now, &b) < 0)
        return -1;
    if (b.kpre)
        s->pre->heap[(*m)++] =
            (struct nplan){node, b.kpre, b.lb_prio, lost_of(b.lb_since, now)};
    return 0;
}

/* Heap the nodes with a possible plan into s->pre->heap (*m of them):
 * every node, or with since (a failed plan's ver, see plan_memo_ok) only
 * those touched after it, each at its latest log entry. */
static int bound_all(crater_sched_t *s,
                     const crater_request_t *r,
                     uint64_t now,
                     const uint64_t *since,
                     uint32_t *m)
{
    *m = 0;
    if (!since) {
        for (uint32_t node = 0; node < s->ntcap; node++)
            if (bound_one(s, r, node, now, m) < 0)
                return -1;
    } else {
        for (uint32_t i = sched__touched_since(s, *since); i < s->ntlog; i++) {
            const struct touch *t = &s->tlog[i];
            if (t->ver == s->ntasks[t->node].ver
                && bound_one(s, r, t->node, now, m) < 0)
                return -1;
        }
    }
    for (uint32_t i = *m / 2; i-- > 0;)
        sift_down(s->pre->heap, *m, i);
    return 0;
}

/* Plan on np's node and keep the plan if it beats b. */
static int plan_node(crater_sched_t *s,
                     const crater_request_t *r,
                     const struct nplan *np,
                     uint64_t now,
                     struct best *b)
{
    crater_preempt_plan_t cur;
    uint32_t n, mask;
    struct cand *c;
    int timeless;

    if (gather(s, r, np->node, now, &n, &timeless) < 0)
        return -1;
    c = s->pre->c;
    if (!shrink_set(s, r, c, n, np->kpre))
        return 0;
    plan_cost(c, n, &cur, &mask);
    restore(s, c, n);
    if (!b->found || cheaper(&cur, np->node, &b->plan, b->node)) {
        b->plan = cur;
        b->node = np->node;
        b->mask = mask;
        b->found = 1;
    }
    return 0;
}

/* Plan nodes by increasing lower bound until the bound alone loses. */
static int plan_all(crater_sched_t *s,
                    const crater_request_t *r,
                    uint32_t m,
                    uint64_t now,
                    struct best *b)
{
    struct nplan *h = s->pre->heap, top;
    crater_preempt_plan_t lb;

    memset(&lb, 0, sizeof(lb));
    lb.nvictims = 1;
    while (m) {
        top = h[0];
        h[0] = h[--m];
        sift_down(h, m, 0);
        lb.max_priority = top.lb_prio;
        lb.lost_ms = top.lb_lost;
        if (b->found && !cheaper(&lb, top.node, &b->plan, b->node)) {
            if (lb.max_priority != b->plan.max_priority
                || lb.lost_ms != b->plan.lost_ms)
                break; /* (prio, lost) above the best: so are the rest */
            continue;
        }
        if (plan_node(s, r, &top, now, b) < 0)
            return -1;
    }
    return 0;
}

/* The winner's placement: evaluated once with its victims released. */
static int finish(crater_sched_t *s,
                  const crater_request_t *r,
                  uint64_t now,
                  const struct best *b,
                  crater_preempt_plan_t *plan)
{
    struct sched_ctx ctx;
    uint32_t n;
    int timeless;

    if (gather(s, r, b->node, now, &n, &timeless) < 0)
        return -1;
    for (uint32_t i = 0; i < n && i < MAXV; i++)
        if (b->mask >> i & 1)
            take(s, &s->pre->c[i]);
    sched__eval(s, b->node, r, &ctx); /* fits: shrink_set said so */
    restore(s, s->pre->c, n);
    *plan = b->plan;
    qsort(plan->victims, plan->nvictims, sizeof(plan->victims[0]), by_id);
    plan->placement = ctx.p;
    return 0;
}

/* count_blocked() from the kept counts, when no task is too young to be
 * a victim: by priority (state.c) and nodes by their lowest (psum.c). */
static void count_kept(const crater_sched_t *s,
                       const crater_request_t *r,
                       uint32_t n[4],
                       uint32_t *nnodes)
{
    uint32_t pre = 0;

    for (uint32_t i = 0; i < s->npcount; i++) {
        pre += s->pcount[i].n;
        n[s->pcount[i].prio < r->priority ? 0 : 2] += s->pcount[i].n;
    }
    n[1] = s->tused - pre;
    for (uint32_t i = 0; i < s->npnodes && s->pnodes[i].prio < r->priority; i++)
        *nnodes += s->pnodes[i].n;
}

/* count_blocked() by reading every task. */
static void count_scan(const crater_sched_t *s,
                       const crater_request_t *r,
                       uint64_t now,
                       uint32_t n[4],
                       uint32_t *nnodes)
{
    for (uint32_t node = 0; node < s->ntcap; node++) {
        const struct node_tasks *nt = &s->ntasks[node];
        uint32_t before = n[0];
        for (uint32_t i = 0; i < nt->n; i++)
            n[blocked(s, sched__task_find(s, nt->ids[i]), r, now)]++;
        *nnodes += n[0] > before;
    }
}

/* Every running task by why it may not be a victim of r (blocked(); n[0]
 * the candidates), and how many nodes hold a candidate. */
static void count_blocked(const crater_sched_t *s,
                          const crater_request_t *r,
                          uint64_t now,
                          uint32_t n[4],
                          uint32_t *nnodes)
{
    memset(n, 0, 4 * sizeof(n[0]));
    *nnodes = 0;
    if (s->preempt_min_ms) {
        count_scan(s, r, now, n, nnodes);
        return;
    }
    count_kept(s, r, n, nnodes);
#ifndef NDEBUG /* the kept counts against the scan they replace */
    uint32_t m[4] = {0}, mnodes = 0;
    count_scan(s, r, now, m, &mnodes);
    assert(memcmp(m, n, sizeof(m)) == 0 && mnodes == *nnodes);
#endif
}

/* "; 2 non-preemptible, 1 at priority 10 or above" for the counts. */
static void fmt_blocked(const crater_sched_t *s,
                        const crater_request_t *r,
                        const uint32_t n[4],
                        char *buf,
                        size_t size)
{
    size_t len = 0;
    int first = 1;

    buf[0] = '\0';
    if (n[1] && len < size)
        len += (size_t)snprintf(buf + len,
                                size - len,
                                "%s%u non-preemptible",
                                first ? "" : ", ",
                                n[1]);
    first &= !n[1];
    if (n[2] && len < size)
        len += (size_t)snprintf(buf + len,
                                size - len,
                                "%s%u at priority %d or above",
                                first ? "" : ", ",
                                n[2],
                                (int)r->priority);
    first &= !n[2];
    if (n[3] && len < size)
        snprintf(buf + len,
                 size - len,
                 "%s%u running for less than preemptionMinRuntime (%llus)",
                 first ? "" : ", ",
                 n[3],
                 (unsigned long long)(s->preempt_min_ms / 1000));
}

/* Why there is no plan: no candidates at all, and why the running tasks
 * are not (non-preemptible, equal or higher priority, protected by
 * preemptionMinRuntime), or candidates whose release is not enough. */
static int no_plan(const crater_sched_t *s,
                   const crater_request_t *r,
                   uint64_t now,
                   crater_error_t *err)
{
    uint32_t n[4], ncand, nnodes;
    char why[256];

    count_blocked(s, r, now, n, &nnodes);
    ncand = n[0];
    fmt_blocked(s, r, n, why, sizeof(why));
    if (!ncand && !n[1] && !n[2] && !n[3])
        return crater_errorf(err,
                             CRATER_EUNSCHED,
                             "no preemption plan: no running tasks");
    if (!ncand)
        return crater_errorf(err,
                             CRATER_EUNSCHED,
                             "no preemption plan: none of the %u running "
                             "task(s) may be preempted (%s)",
                             n[1] + n[2] + n[3],
                             why);
    return crater_errorf(err,
                         CRATER_EUNSCHED,
                         "no preemption plan: no preemptible lower-priority "
                         "tasks whose release would make it fit (%u "
                         "candidate task(s) below priority %d on %u "
                         "node(s)%s%s)",
                         ncand,
                         (int)r->priority,
                         nnodes,
                         *why ? "; not candidates: " : "",
                         why);
}

/* May a failed plan be remembered at all (see crater_plan_memo_t)? */
static int memo_allowed(const crater_sched_t *s)
{
    return !s->preempt_min_ms && !(s->policy && s->policy->random_ties);
}

/* Does memo still say which nodes have no plan? Only nodes touched since
 * its ver can have changed: their tasks, state and health change only
 * with a touch, the settings with memo_epoch, and the candidates' order
 * by lost work not with time (every start and checkpoint was at most its
 * now when it was made, see plan_memo_set, and the clock has not gone
 * back); the log must hold every touch since (tlog_lost). */
static int plan_memo_ok(const crater_sched_t *s,
                        const crater_plan_memo_t *memo,
                        uint64_t now)
{
    return memo && memo->ver && memo->ver >= s->tlog_lost
           && memo->epoch == s->memo_epoch && now >= memo->now
           && memo_allowed(s);
}

static void plan_memo_set(const crater_sched_t *s,
                          crater_plan_memo_t *memo,
                          uint64_t now,
                          int failed)
{
    if (!memo)
        return;
    memset(memo, 0, sizeof(*memo));
    if (failed && memo_allowed(s) && s->since_max <= now)
        *memo = (crater_plan_memo_t){s->ver_clock, s->memo_epoch, now};
}

int crater_sched_plan_preemption_memo(crater_sched_t *s,
                                      const crater_request_t *req,
                                      crater_plan_memo_t *memo,
                                      crater_preempt_plan_t *plan,
                                      crater_error_t *err)
{
    crater_preempt_plan_t none;
    uint32_t m;
    struct best b;
    uint64_t now;
    const uint64_t *since;

    memset(&none, 0, sizeof(none));
    none.max_priority = INT32_MIN;
    if (crater_sched_place(s, req, &none.placement, NULL) == 0) {
        plan_memo_set(s, memo, 0, 0);
        *plan = none;
        return 0;
    }
    now = s->env.now_ms(s->env.arg);
    since = plan_memo_ok(s, memo, now) ? &memo->ver : NULL;
    memset(&b, 0, sizeof(b));
    if (pre_need(s) < 0 || bound_all(s, req, now, since, &m) < 0
        || plan_all(s, req, m, now, &b) < 0
        || (b.found && finish(s, req, now, &b, plan) < 0))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    plan_memo_set(s, memo, now, !b.found);
    return b.found ? 0 : no_plan(s, req, now, err);
}

int crater_sched_plan_preemption(crater_sched_t *s,
                                 const crater_request_t *req,
                                 crater_preempt_plan_t *plan,
                                 crater_error_t *err)
{
    return crater_sched_plan_preemption_memo(s, req, NULL, plan, err);
}

int32_t crater_sched_victim_floor(const crater_sched_t *s)
{
    int32_t floor = s->npcount ? s->pcount[0].prio : INT32_MAX;

#ifndef NDEBUG /* the kept count against the scan it replaces */
    int32_t scan = INT32_MAX;
    for (uint32_t i = 0; i < s->tsize; i++)
        if (s->tasks[i].id && s->tasks[i].preemptible
            && s->tasks[i].priority < scan)
            scan = s->tasks[i].priority;
    assert(scan == floor);
#endif
    return floor;
}
