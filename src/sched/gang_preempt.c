/* gang_preempt.c - preemption plans for gangs: which running lower-priority
 * preemptible tasks to stop so that ALL replicas of a gang fit.
 *
 * How. Replica by replica, the single-request planner (preempt.c, with
 * its rules: preemptible, lower priority, preemptionMinRuntime, cost
 * order) plans for one replica on the state where the victims chosen for
 * the earlier replicas are released and the earlier replicas committed;
 * then this replica's victims are released and the replica committed
 * under its task id, and the next replica is planned. Replicas are
 * identical, so each takes the cheapest victims left for one replica.
 *
 * That greedy order can miss an arrangement (as greedy gang placement
 * can, gang.c: a replica's GPUs may leave the next one nothing). So when
 * it fails, every candidate victim (every task the single planner may
 * pick for this request) is released and the gang is placed with
 * crater_sched_place_gang (greedy, then its bounded search): releasing
 * more never makes a request fit less, so when this fails no set of
 * victims helps (up to the search's budget). When it succeeds the victims
 * are the candidates on the nodes the replicas took (the other nodes'
 * candidates are put back first: the replicas' nodes are then in the
 * very state they were placed in). That plan may stop more than needed;
 * it is the rare case where the cheap one does not exist.
 *
 * Exactness. Release and commit are exact inverses (state.c): a victim
 * released here is committed again with its priority, preemptibility and
 * placement, and gets back its start and checkpoint times; the replicas
 * are released before any victim comes back, newest first, and the
 * victims come back in the reverse order of their release, so every step
 * is a state the cluster was in. On return, success or not, the node,
 * GPU, device and task state is as before (task versions and the class
 * index's internal numbering may differ; no decision reads them).
 *
 * All or nothing: a plan names victims for every replica or there is no
 * plan. At most CRATER_PREEMPT_MAX_VICTIMS victims in all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/internal.h"

#define MAXV CRATER_PREEMPT_MAX_VICTIMS

/* What the tentative plan changed, to be undone. */
struct tent {
    crater_sched_t *s;
    struct task *gone; /* released victims, in release order */
    uint32_t ngone, cap;
    uint64_t first;  /* the gang's first task id */
    uint32_t placed; /* replicas committed: first .. first + placed - 1 */
    uint64_t since_max;
    bool broken; /* a restore failed (out of memory) */
};

/* Release task id for the plan, keeping its record. */
static int tent_release(struct tent *x, uint64_t id)
{
    struct task *t = sched__task_find(x->s, id);

    if (!t)
        return -1;
    if (x->ngone == x->cap) {
        uint32_t cap = x->cap ? 2 * x->cap : 16;
        struct task *g = realloc(x->gone, cap * sizeof(*g));
        if (!g)
            return -1;
        x->gone = g;
        x->cap = cap;
    }
    x->gone[x->ngone++] = *t;
    return crater_sched_release(x->s, id, NULL);
}

/* Commit released task k again, exactly as it was. */
static int tent_restore_one(struct tent *x, const struct task *k)
{
    crater_request_t r = {.priority = k->priority,
                          .preemptible = k->preemptible};
    struct task *t;

    if (crater_sched_commit(x->s, k->id, &r, &k->p, NULL) < 0)
        return -1;
    t = sched__task_find(x->s, k->id);
    t->start_ms = k->start_ms;
    t->ckpt_ms = k->ckpt_ms;
    return 0;
}

/* Put back the released tasks (all, or those not on a node in keep[]
 * when keep is given) in reverse order; the others stay in x->gone. */
static void tent_restore(struct tent *x, const bool *keep)
{
    uint32_t m = 0;

    for (uint32_t i = x->ngone; i-- > 0;) {
        const struct task *k = &x->gone[i];
        if (keep && keep[k->p.node])
            continue;
        if (tent_restore_one(x, k) < 0)
            x->broken = true;
    }
    for (uint32_t i = 0; keep && i < x->ngone; i++)
        if (keep[x->gone[i].p.node])
            x->gone[m++] = x->gone[i];
    x->ngone = keep ? m : 0;
    x->s->since_max = x->since_max;
}

/* Undo everything: replicas newest first, then the victims. */
static void tent_undo(struct tent *x)
{
    for (uint32_t i = x->placed; i-- > 0;)
        if (crater_sched_release(x->s, x->first + i, NULL) < 0)
            x->broken = true;
    x->placed = 0;
    tent_restore(x, NULL);
}

/* ---- the plan ------------------------------------------------------------ */

static uint64_t lost_of(const struct task *t, uint64_t now)
{
    uint64_t since = t->ckpt_ms > t->start_ms ? t->ckpt_ms : t->start_ms;

    return now > since ? now - since : 0;
}

/* The plan's victims and cost from x->gone. -1 when too many. */
static int plan_from(const struct tent *x,
                     uint64_t now,
                     crater_preempt_plan_t *plan)
{
    if (x->ngone > MAXV)
        return -1;
    plan->nvictims = x->ngone;
    plan->max_priority = INT32_MIN;
    plan->lost_ms = 0;
    for (uint32_t i = 0; i < x->ngone; i++) {
        plan->victims[i] = x->gone[i].id;
        if (x->gone[i].priority > plan->max_priority)
            plan->max_priority = x->gone[i].priority;
        plan->lost_ms += lost_of(&x->gone[i], now);
    }
    return 0;
}

/* Replica i: plan for it, release its victims, commit it. */
static int replica(struct tent *x,
                   const crater_request_t *req,
                   uint32_t i,
                   crater_placement_t *out,
                   crater_error_t *why)
{
    crater_preempt_plan_t p;

    if (crater_sched_plan_preemption(x->s, req, &p, why) < 0)
        return -1;
    if (x->ngone + p.nvictims > MAXV)
        return crater_errorf(why,
                             CRATER_EUNSCHED,
                             "more than %d victims in all",
                             MAXV);
    for (uint32_t v = 0; v < p.nvictims; v++)
        if (tent_release(x, p.victims[v]) < 0)
            return crater_errorf(why, CRATER_ENOMEM, "out of memory");
    if (crater_sched_commit(x->s, x->first + i, req, &p.placement, why) < 0)
        return -1;
    x->placed++;
    out[i] = p.placement;
    return 0;
}

/* The cheap way: replica by replica. 0 with everything applied. */
static int by_replica(struct tent *x,
                      const crater_request_t *req,
                      uint32_t replicas,
                      crater_placement_t *out,
                      crater_error_t *why)
{
    for (uint32_t i = 0; i < replicas; i++)
        if (replica(x, req, i, out, why) < 0) {
            char text[sizeof(why->text)];
            memcpy(text, why->text, sizeof(text));
            return crater_errorf(why,
                                 why->errnum,
                                 "gang replica %u of %u: %.120s",
                                 i + 1,
                                 replicas,
                                 text);
        }
    return 0;
}

/* May t be a victim of r at now (preempt.c's rule)? */
static bool candidate(const crater_sched_t *s,
                      const struct task *t,
                      const crater_request_t *r,
                      uint64_t now)
{
    return t->preemptible && t->priority < r->priority
           && !(s->preempt_min_ms && now < t->start_ms + s->preempt_min_ms);
}

/* Release every candidate victim of req. */
static int release_all(struct tent *x,
                       const crater_request_t *req,
                       uint64_t now)
{
    crater_sched_t *s = x->s;

    for (uint32_t node = 0; node < s->ntcap; node++) {
        struct node_tasks *nt = &s->ntasks[node];
        for (uint32_t i = nt->n; i-- > 0;) {
            const struct task *t = sched__task_find(s, nt->ids[i]);
            if (candidate(s, t, req, now) && tent_release(x, t->id) < 0)
                return -1;
        }
    }
    return 0;
}

/* The complete way: every candidate released, the gang placed, the
 * candidates off its nodes put back. 0 with everything applied. */
static int all_released(struct tent *x,
                        const crater_request_t *req,
                        uint32_t replicas,
                        uint64_t now,
                        crater_placement_t *out,
                        crater_error_t *why)
{
    bool *used;

    if (release_all(x, req, now) < 0)
        return crater_errorf(why, CRATER_ENOMEM, "out of memory");
    if (crater_sched_place_gang(x->s, req, replicas, x->first, out, NULL) < 0)
        return crater_errorf(why,
                             CRATER_EUNSCHED,
                             "no preemption plan: the %u replicas do not fit "
                             "even with every lower-priority preemptible "
                             "task stopped",
                             replicas);
    x->placed = replicas;
    if (!(used = calloc(x->s->n, sizeof(*used))))
        return crater_errorf(why, CRATER_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < replicas; i++)
        used[out[i].node] = true;
    tent_restore(x, used);
    free(used);
    return 0;
}

/* Run the two ways; 0 with the plan applied (x), -1 with why. */
static int plan_applied(struct tent *x,
                        const crater_request_t *req,
                        uint32_t replicas,
                        uint64_t now,
                        crater_placement_t *out,
                        crater_error_t *why)
{
    crater_error_t first;

    if (by_replica(x, req, replicas, out, &first) == 0)
        return 0;
    tent_undo(x);
    if (first.errnum != CRATER_EUNSCHED || x->broken) {
        *why = first;
        return -1;
    }
    if (all_released(x, req, replicas, now, out, why) == 0)
        return 0;
    if (why->errnum == CRATER_EUNSCHED)
        *why = first; /* the replica that found none says more */
    return -1;
}

static int by_id(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

int crater_sched_plan_gang_preemption(crater_sched_t *s,
                                      const crater_request_t *req,
                                      uint32_t replicas,
                                      uint64_t first_task,
                                      crater_preempt_plan_t *plan,
                                      crater_placement_t *out,
                                      crater_error_t *err)
{
    struct tent x = {.s = s, .first = first_task, .since_max = s->since_max};
    uint64_t now = s->env.now_ms(s->env.arg);
    crater_preempt_plan_t p;
    crater_error_t why;
    int rc = -1;

    if (replicas == 0 || first_task == 0
        || first_task > UINT64_MAX - (replicas - 1))
        return crater_errorf(err, CRATER_EINVAL, "bad gang arguments");
    memset(&p, 0, sizeof(p));
    if (plan_applied(&x, req, replicas, now, out, &why) < 0) {
        if (err)
            *err = why;
    } else if (plan_from(&x, now, &p) < 0) {
        crater_errorf(err,
                      CRATER_EUNSCHED,
                      "no preemption plan: the gang needs more than %d "
                      "victims",
                      MAXV);
    } else
        rc = 0;
    tent_undo(&x);
    free(x.gone);
    if (x.broken)
        return crater_errorf(err,
                             CRATER_ENOMEM,
                             "out of memory undoing a plan");
    if (rc == 0) {
        p.placement = out[0];
        qsort(p.victims, p.nvictims, sizeof(p.victims[0]), by_id);
        *plan = p;
    }
    return rc;
}
