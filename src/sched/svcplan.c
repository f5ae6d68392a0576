/* svcplan.c - the service controller's pure part: from the replicas a
 * service holds and the counts it wants (in traffic: the autoscaler's
 * desired count; warm: inference.warmPoolSize), the start, promote,
 * demote and stop actions that get there.
 *
 * Why a warm replica goes first: it has loaded its model, so it takes
 * traffic the moment the gateway learns of it, where a new replica takes
 * the model's load time (seconds to minutes). Among warm replicas a
 * ready one goes before one still loading, the oldest first (it has been
 * ready longest). On the way down the replicas not ready go first (they
 * serve nothing yet), then the newest (the oldest have proven
 * themselves, as Kubernetes' ReplicaSet prefers to delete younger pods);
 * a ready one refills the warm pool instead of being stopped when the
 * pool is short: its model stays loaded.
 *
 * Workload: a few to a few hundred replicas, a plan per controller tick
 * (a second or two); the scans are O(replicas x actions) and allocate
 * nothing.
 */
#include "sched/svcplan.h"

#include <stdbool.h>

/* Has an earlier action of this plan already taken replica id? */
static bool taken(const crater__svc_action_t *out, size_t k, uint64_t id)
{
    for (size_t i = 0; i < k; i++)
        if (out[i].id == id)
            return true;
    return false;
}

/* Is a newer than b (created later; the same time: the larger id)? */
static bool younger(const crater__svc_rep_t *a, const crater__svc_rep_t *b)
{
    return a->since_ms != b->since_ms ? a->since_ms > b->since_ms
                                      : a->id > b->id;
}

/* The untaken replica of role with readiness ready, oldest (or newest)
 * first; -1 when none. */
static long pick(const crater__svc_rep_t *reps,
                 size_t n,
                 const crater__svc_action_t *out,
                 size_t k,
                 crater__svc_role_t role,
                 int ready,
                 bool newest)
{
    long best = -1;

    for (size_t i = 0; i < n; i++) {
        const crater__svc_rep_t *r = &reps[i];
        if (r->role != role || !r->ready != !ready || taken(out, k, r->id))
            continue;
        if (best < 0 || younger(r, &reps[best]) == newest)
            best = (long)i;
    }
    return best;
}

static unsigned count_role(const crater__svc_rep_t *reps,
                           size_t n,
                           crater__svc_role_t role)
{
    unsigned c = 0;

    for (size_t i = 0; i < n; i++)
        c += reps[i].role == role;
    return c;
}

static bool push(crater__svc_action_t *out,
                 size_t *k,
                 size_t max,
                 crater__svc_op_t op,
                 uint64_t id)
{
    if (*k >= max)
        return false;
    out[(*k)++] = (crater__svc_action_t){.op = op, .id = id};
    return true;
}

/* Ready replicas of role first (or last, with ready_first false). */
static long pick_pref(const crater__svc_rep_t *reps,
                      size_t n,
                      const crater__svc_action_t *out,
                      size_t k,
                      crater__svc_role_t role,
                      bool ready_first,
                      bool newest)
{
    long i = pick(reps, n, out, k, role, ready_first, newest);

    return i >= 0 ? i : pick(reps, n, out, k, role, !ready_first, newest);
}

size_t crater__svc_plan(const crater__svc_rep_t *reps,
                        size_t n,
                        unsigned desired,
                        unsigned warm,
                        crater__svc_action_t *out,
                        size_t max)
{
    unsigned traffic = count_role(reps, n, CRATER__SVC_TRAFFIC);
    unsigned pool = count_role(reps, n, CRATER__SVC_WARM);
    size_t k = 0;
    bool ok = true;

    for (; ok && traffic < desired; traffic++) {
        long i = pick_pref(reps, n, out, k, CRATER__SVC_WARM, true, false);
        ok = i >= 0 ? push(out, &k, max, CRATER__SVC_PROMOTE, reps[i].id)
                    : push(out, &k, max, CRATER__SVC_START_TRAFFIC, 0);
        pool -= i >= 0;
    }
    for (; ok && traffic > desired; traffic--) {
        long i = pick_pref(reps, n, out, k, CRATER__SVC_TRAFFIC, false, true);
        bool demote = reps[i].ready && pool < warm;
        ok = push(out,
                  &k,
                  max,
                  demote ? CRATER__SVC_DEMOTE : CRATER__SVC_STOP,
                  reps[i].id);
        pool += demote;
    }
    for (; ok && pool < warm; pool++)
        ok = push(out, &k, max, CRATER__SVC_START_WARM, 0);
    for (; ok && pool > warm; pool--) {
        long i = pick_pref(reps, n, out, k, CRATER__SVC_WARM, false, true);
        ok = push(out, &k, max, CRATER__SVC_STOP, reps[i].id);
    }
    return k;
}

static unsigned umin(unsigned a, unsigned b)
{
    return a < b ? a : b;
}

crater__svc_split_t crater__svc_roll_split(const crater__svc_roll_in_t *in)
{
    unsigned total = in->old_traffic + in->new_traffic, old = in->old_traffic;
    unsigned excess = total > in->desired ? total - in->desired : 0;
    unsigned unready = in->old_traffic - umin(in->old_ready, old);
    unsigned spare = in->ready > in->desired ? in->ready - in->desired : 0;
    crater__svc_split_t r = {0};

    r.retire_old = umin(excess, unready);
    r.retire_old += umin(excess - r.retire_old, umin(spare, in->old_ready));
    old -= r.retire_old;
    r.desired_new = in->desired > old ? in->desired - old : 0;
    r.warm_new = in->warm > in->old_warm ? in->warm - in->old_warm : 0;
    return r;
}

const char *crater__svc_op_name(crater__svc_op_t op)
{
    switch (op) {
    case CRATER__SVC_START_TRAFFIC:
        return "start-traffic";
    case CRATER__SVC_START_WARM:
        return "start-warm";
    case CRATER__SVC_PROMOTE:
        return "promote";
    case CRATER__SVC_DEMOTE:
        return "demote";
    case CRATER__SVC_STOP:
        return "stop";
    }
    return "unknown";
}
