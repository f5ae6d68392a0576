/* psum.c - what the preemption planner may skip: per-node sums of the
 * preemptible tasks by priority, the nodes by their lowest preemptible
 * priority, and a log of node touches in version order.
 *
 * Why. A plan for a request of priority P may release only preemptible
 * tasks below P, and all its victims sit on one node. The sums of those
 * tasks' CPU, memory, GPU count and GPU MiB on a node bound what any set
 * of them could give back, so a node where even all of them would not
 * pass place.c's precheck can have no plan and is skipped without reading
 * its tasks (preempt.c). A node holds a handful of priorities (the
 * classes), so a node's sums are a short sorted array, updated on commit
 * and release in O(priorities).
 *
 * The nodes by lowest preemptible priority give, for any P, how many
 * nodes hold a candidate at all (the planner's "no plan" text) without
 * visiting them; the task counts by priority (state.c's pcount) give the
 * rest of that text.
 *
 * The touch log lists (node, ver) in the order the vers were handed out,
 * so "the nodes changed since ver v" is a binary search and a walk: a
 * failed plan for a request stays failed on every node not touched since
 * (preempt.c), and a saturated cluster touches a few nodes between two
 * passes, not 10,000. The log keeps a node's older entries until it is
 * compacted (only each node's latest entry kept, order unchanged), which
 * happens when it is full and at least half stale: amortised O(1) per
 * touch, at most twice the nodes ever touched. A touch that cannot be
 * logged (out of memory) is remembered by its ver, and a failed plan
 * older than it is not trusted.
 */
#include <stdlib.h>
#include <string.h>

#include "sched/internal.h"

int sched__pcount_need(struct prio_count **v, uint32_t *cap, uint32_t n)
{
    struct prio_count *p;
    uint32_t c;

    if (n < *cap)
        return 0;
    c = *cap ? 2 * *cap : 4;
    if (!(p = realloc(*v, c * sizeof(*p))))
        return -1;
    *v = p;
    *cap = c;
    return 0;
}

void sched__pcount_add(struct prio_count *v,
                       uint32_t *n,
                       int32_t prio,
                       int sign)
{
    uint32_t i = 0;

    while (i < *n && v[i].prio < prio)
        i++;
    if (sign > 0 && (i == *n || v[i].prio != prio)) {
        memmove(v + i + 1, v + i, (*n - i) * sizeof(*v));
        (*n)++;
        v[i] = (struct prio_count){prio, 0};
    }
    if (sign > 0) {
        v[i].n++;
    } else if (--v[i].n == 0) {
        memmove(v + i, v + i + 1, (*n - i - 1) * sizeof(*v));
        (*n)--;
    }
}

int sched__psum_need(crater_sched_t *s, uint32_t node)
{
    struct node_tasks *nt = &s->ntasks[node];
    struct psum *p;
    uint32_t cap;

    /* a node's lowest priority is a task's, so pnodes never holds more
     * entries than pcount: with room for pcount's next one, a release
     * (which cannot fail) never needs more */
    while (s->pnodescap <= s->npcount)
        if (sched__pcount_need(&s->pnodes, &s->pnodescap, s->pnodescap) < 0)
            return -1;
    if (nt->nps < nt->capps)
        return 0;
    cap = nt->capps ? 2 * nt->capps : 2;
    if (!(p = realloc(nt->ps, cap * sizeof(*p))))
        return -1;
    nt->ps = p;
    nt->capps = cap;
    return 0;
}

/* The entry of prio in nt's sums, made (zero) when absent and sign > 0. */
static struct psum *psum_at(struct node_tasks *nt, int32_t prio, int sign)
{
    uint32_t i = 0;

    while (i < nt->nps && nt->ps[i].prio < prio)
        i++;
    if (sign > 0 && (i == nt->nps || nt->ps[i].prio != prio)) {
        memmove(nt->ps + i + 1, nt->ps + i, (nt->nps - i) * sizeof(*nt->ps));
        nt->nps++;
        nt->ps[i] = (struct psum){.prio = prio};
    }
    return &nt->ps[i];
}

static void psum_apply(struct psum *e, const crater_placement_t *p, int sign)
{
    uint64_t mib = 0;

    for (uint32_t i = 0; i < p->ngpus; i++)
        mib += p->gpu_mib[i];
    e->n += (uint32_t)sign;
    e->ngpus += (uint32_t)sign * p->ngpus;
    e->cpu += (uint64_t)sign * p->cpu_milli;
    e->mem += (uint64_t)sign * p->mem_bytes;
    e->mib += (uint64_t)sign * mib;
}

void sched__psum_add(crater_sched_t *s, const struct task *t, int sign)
{
    struct node_tasks *nt = &s->ntasks[t->p.node];
    int had = nt->nps > 0;
    int32_t low = had ? nt->ps[0].prio : 0;
    struct psum *e = psum_at(nt, t->priority, sign);

    psum_apply(e, &t->p, sign);
    if (e->n == 0) {
        uint32_t i = (uint32_t)(e - nt->ps);
        memmove(e, e + 1, (nt->nps - i - 1) * sizeof(*e));
        nt->nps--;
    }
    if (had && (!nt->nps || nt->ps[0].prio != low))
        sched__pcount_add(s->pnodes, &s->npnodes, low, -1);
    if (nt->nps && (!had || nt->ps[0].prio != low))
        sched__pcount_add(s->pnodes, &s->npnodes, nt->ps[0].prio, +1);
}

/* Keep only each node's latest entry (its ver is the node's), in order. */
static void log_compact(crater_sched_t *s)
{
    uint32_t k = 0;

    for (uint32_t i = 0; i < s->ntlog; i++)
        if (s->tlog[i].ver == s->ntasks[s->tlog[i].node].ver)
            s->tlog[k++] = s->tlog[i];
    s->ntlog = k;
}

void sched__touch_log(crater_sched_t *s, uint32_t node, uint64_t ver)
{
    if (s->ntlog == s->tlogcap && s->ntlog >= 2 * s->ntcap)
        log_compact(s);
    if (s->ntlog == s->tlogcap) {
        uint32_t cap = s->tlogcap ? 2 * s->tlogcap : 1024;
        struct touch *t = realloc(s->tlog, cap * sizeof(*t));
        if (!t) {
            s->tlog_lost = ver;
            return;
        }
        s->tlog = t;
        s->tlogcap = cap;
    }
    s->tlog[s->ntlog++] = (struct touch){node, ver};
}

uint32_t sched__touched_since(const crater_sched_t *s, uint64_t ver)
{
    uint32_t lo = 0, hi = s->ntlog;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->tlog[mid].ver <= ver)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void sched__psum_free(crater_sched_t *s)
{
    for (uint32_t i = 0; i < s->ntcap; i++)
        free(s->ntasks[i].ps);
    free(s->pnodes);
    free(s->tlog);
}
