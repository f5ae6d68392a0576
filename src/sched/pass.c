/* pass.c - the scheduling pass shared by craterd and the simulator (see
 * include/crater/pass.h for the contract).
 *
 * Why fresh and full passes. Placement only ever shrinks free capacity,
 * so between two releases a job that did not fit still does not fit. A
 * pass with nothing released therefore tries only the jobs queued since
 * the last one; a release (an epoch) makes the next pass a full one over
 * the whole queue. This is what makes the simulator's million-job replays
 * and craterd's passes under a submission storm cheap.
 *
 * Why a memo of failed shapes. Within one pass the same argument holds
 * between jobs: a request shape that fit nowhere and got no plan still
 * does not (until a preemption frees capacity, which resets the memo). The
 * key is every request field the core reads plus the replica count;
 * craterd's requests carry their job spec (selectors, dataset), so there a
 * shape is in practice one job. A job refused for the head's sake is not
 * remembered when it could end before the shadow time (another job of its
 * shape may not). When the host keeps reasons, the memo keeps the first
 * job's, so a job skipped by the memo is told the same thing.
 *
 * Why a victim floor. Most jobs that fit nowhere are of the lowest
 * class, for which no running task can be a victim; the pass keeps the
 * lowest priority of any running preemptible task (taken at its start,
 * lowered by what it binds; evictions only raise the true one) and does
 * not ask the planner for a job at or below it. That skips only calls
 * whose failure is certain, so no decision changes; a host that keeps
 * reasons still asks, for the planner's explanation.
 *
 * The queue order is recomputed for every full pass when the host gives
 * fair-share input (usage changes with every bind); without it (the
 * simulator: one tenant) the jobs queued since are merged into the kept
 * order (pass_order.c), and placed jobs are simply skipped in it. A host
 * with fixed requests also has each kept position tagged with its job's
 * shape, so that a full pass skips the jobs of a memoised shape without
 * looking them up (see "shapes" below).
 */
#include "crater/pass.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/pass_order.h"

#define MEMO_SLOTS 16384u
#define MEMO_FILL 8192u
#define SHAPE_SLOTS 16384u
#define SHAPE_MAX 8192u

struct memo_key {
    uint64_t cpu, mem, iops, bw, model_mask, hbm;
    const void *vendor, *spec;
    uint32_t gpus, slice, lat, min_sm, min_cc, replicas;
    int32_t prio;
    int32_t iface, nvlink, numa;
    int32_t flags, share; /* share: crater_request_t.share_milli */
};

struct memo_slot {
    struct memo_key key;
    uint32_t hash, stamp, why; /* why: index into p->why */
};

/* A request shape interned for good (fixed requests, see shape_of). */
struct shape_slot {
    struct memo_key key;
    uint32_t hash;
    bool used;
};

struct crater_pass {
    crater_sched_t *s;
    crater_queue_t *q;
    crater_pass_params_t prm;
    crater_pass_ops_t ops;
    void *arg;
    uint64_t epoch, full_epoch;
    uint64_t *fresh;
    size_t nfresh, capfresh;
    pass_order_t ord;
    struct memo_slot *memo;
    uint32_t stamp, memo_fill;
    struct {
        struct memo_key key;
        uint32_t hash, shape;
    } cur;                          /* the job being decided */
    struct shape_slot *shapes;      /* fixed requests only, else NULL */
    uint32_t *shape_failed;         /* per shape: stamp of its memo entry */
    crater_plan_memo_t *shape_plan; /* per shape: its last failed plan */
    uint32_t nshapes;
    struct memo_why {
        crater_pass_wait_t kind;
        crater_error_t err;
    } * why; /* MEMO_FILL, only when ops.pending */
    bool resv_ok;
    int32_t resv_prio;
    crater_reservation_t resv;
    bool freed;     /* a preemption freed capacity in this pass */
    int32_t floor;  /* <= every running preemptible task's priority */
    int32_t noplan; /* a plan failed this pass for a job of this priority */
    uint64_t now;
    crater_pass_stats_t st;
};

/* ---- memo ---------------------------------------------------------------- */

static struct memo_key key_of(const crater_pass_job_t *j)
{
    const crater_request_t *q = j->req;
    struct memo_key k;

    memset(&k, 0, sizeof(k)); /* padding too: keys are memcmp'd */
    k.cpu = q->cpu_milli;
    k.mem = q->mem_bytes;
    k.iops = q->disk_iops;
    k.bw = q->disk_bw;
    k.model_mask = q->model_mask;
    k.hbm = q->min_hbm_bw;
    k.vendor = q->vendor;
    k.spec = q->spec;
    k.gpus = q->gpus;
    k.slice = q->slice_mib;
    k.lat = q->disk_max_latency_us;
    k.min_sm = q->min_sm;
    k.min_cc = q->min_cc;
    k.replicas = j->replicas;
    k.prio = q->priority;
    k.iface = (int32_t)q->disk_iface;
    k.nvlink = (int32_t)q->nvlink;
    k.numa = (int32_t)q->numa;
    k.flags = (q->preemptible ? 1 : 0) | (q->prefer_low_util ? 2 : 0)
              | (q->disk_soft ? 4 : 0);
    k.share = q->share_milli;
    return k;
}

/* Word-wise multiply-xorshift over the key (padding is zeroed). */
static uint32_t key_hash(const struct memo_key *k)
{
    uint64_t w[sizeof(*k) / 8], h = 0x9e3779b97f4a7c15ull;

    _Static_assert(sizeof(*k) % 8 == 0, "memo key is whole words");
    memcpy(w, k, sizeof(w));
    for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
        h = (h ^ w[i]) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    return (uint32_t)(h ^ (h >> 32));
}

/* The slot holding k, or the empty one where it goes. */
static struct memo_slot *memo_find(crater_pass_t *p,
                                   const struct memo_key *k,
                                   uint32_t h)
{
    uint32_t i = h & (MEMO_SLOTS - 1);

    while (p->memo[i].stamp == p->stamp
           && (p->memo[i].hash != h
               || memcmp(&p->memo[i].key, k, sizeof(*k)) != 0))
        i = (i + 1) & (MEMO_SLOTS - 1);
    return &p->memo[i];
}

static void memo_reset(crater_pass_t *p)
{
    if (++p->stamp == 0) { /* wrapped: really clear */
        memset(p->memo, 0, MEMO_SLOTS * sizeof(*p->memo));
        if (p->shape_failed)
            memset(p->shape_failed, 0, SHAPE_SLOTS * sizeof(uint32_t));
        p->stamp = 1;
    }
    p->memo_fill = 0;
}

/* The current job's shape fits nowhere in this pass. */
static void memo_add(crater_pass_t *p,
                     crater_pass_wait_t kind,
                     const crater_error_t *why)
{
    struct memo_slot *m;

    if (p->memo_fill >= MEMO_FILL)
        return; /* full: later shapes are simply tried again */
    m = memo_find(p, &p->cur.key, p->cur.hash);
    m->key = p->cur.key;
    m->hash = p->cur.hash;
    m->stamp = p->stamp;
    m->why = p->memo_fill++;
    if (p->cur.shape != PASS_SHAPE_NONE)
        p->shape_failed[p->cur.shape] = p->stamp; /* the same, by tag */
    if (p->why) {
        p->why[m->why].kind = kind;
        p->why[m->why].err = *why;
    }
}

/* The memo entry of the current job's shape in this pass, or NULL. */
static const struct memo_slot *memo_get(crater_pass_t *p)
{
    const struct memo_slot *m = memo_find(p, &p->cur.key, p->cur.hash);

    return m->stamp == p->stamp ? m : NULL;
}

/* ---- shapes (fixed requests) --------------------------------------------
 *
 * A host whose jobs keep their request (the simulator) lets the pass tag
 * each position of its kept order with the job's shape, interned here for
 * good. A full pass then skips a job whose shape's memo entry is of this
 * pass by its tag alone: no ops.job, no key, no probe. On a saturated
 * cluster that is most of the queue on every release (B6: 44% of the run
 * went to looking jobs up only to find their shape in the memo).
 * shape_failed[s] == stamp exactly when the memo holds shape s's key in
 * this pass (memo_add sets both; a new stamp clears both). The table
 * stops growing at SHAPE_MAX: later shapes keep no tag and are decided
 * the ordinary way. */

/* The current job's shape, interned; PASS_SHAPE_NONE when full. */
static uint32_t shape_of(crater_pass_t *p)
{
    uint32_t i = p->cur.hash & (SHAPE_SLOTS - 1);
    struct shape_slot *sl;

    for (;; i = (i + 1) & (SHAPE_SLOTS - 1)) {
        sl = &p->shapes[i];
        if (!sl->used)
            break;
        if (sl->hash == p->cur.hash
            && memcmp(&sl->key, &p->cur.key, sizeof(sl->key)) == 0)
            return i;
    }
    if (p->nshapes >= SHAPE_MAX)
        return PASS_SHAPE_NONE;
    p->nshapes++;
    sl->key = p->cur.key;
    sl->hash = p->cur.hash;
    sl->used = true;
    return i;
}

/* Position i's job is known to fit nowhere in this pass (its tag). */
static bool skip_by_tag(const crater_pass_t *p, size_t i)
{
    uint32_t sh = p->ord.shape[i];

    /* with a reservation a job's own time limit can let it past the
     * memo (early), which only ops.job tells */
    return sh != PASS_SHAPE_NONE && !p->resv_ok
           && p->shape_failed[sh] == p->stamp;
}

/* ---- set-up -------------------------------------------------------------- */

crater_pass_t *crater_pass_create(crater_sched_t *s,
                                  crater_queue_t *q,
                                  const crater_pass_params_t *params,
                                  const crater_pass_ops_t *ops,
                                  void *arg)
{
    crater_pass_t *p;

    if (!ops || ops->version != CRATER_PASS_OPS_VERSION || !ops->job
        || !ops->bind || !ops->preempt || !ops->fail)
        return NULL;
    if (!(p = calloc(1, sizeof(*p))))
        return NULL;
    p->s = s;
    p->q = q;
    p->prm = *params;
    p->ops = *ops;
    p->arg = arg;
    p->epoch = 1; /* != full_epoch: the first pass is a full one */
    p->stamp = 1;
    p->memo = calloc(MEMO_SLOTS, sizeof(*p->memo));
    if (ops->pending)
        p->why = malloc(MEMO_FILL * sizeof(*p->why));
    if (params->fixed_requests && !ops->pending && !ops->ready) {
        p->shapes = calloc(SHAPE_SLOTS, sizeof(*p->shapes));
        p->shape_failed = calloc(SHAPE_SLOTS, sizeof(*p->shape_failed));
        p->shape_plan = calloc(SHAPE_SLOTS, sizeof(*p->shape_plan));
        if (!p->shapes || !p->shape_failed || !p->shape_plan) {
            crater_pass_destroy(p);
            return NULL;
        }
    }
    if (!p->memo || (ops->pending && !p->why)) {
        crater_pass_destroy(p);
        return NULL;
    }
    return p;
}

void crater_pass_destroy(crater_pass_t *p)
{
    if (!p)
        return;
    free(p->fresh);
    pass__order_free(&p->ord);
    free(p->memo);
    free(p->why);
    free(p->shapes);
    free(p->shape_failed);
    free(p->shape_plan);
    free(p);
}

int crater_pass_queued(crater_pass_t *p, uint64_t id, crater_error_t *err)
{
    pass__order_queued(&p->ord, id);
    if (p->nfresh == p->capfresh) {
        size_t cap = p->capfresh ? 2 * p->capfresh : 256;
        uint64_t *f = realloc(p->fresh, cap * sizeof(*f));
        if (!f) {
            crater_pass_capacity_changed(p); /* a full pass finds it */
            return crater_errorf(err, CRATER_ENOMEM, "out of memory");
        }
        p->fresh = f;
        p->capfresh = cap;
    }
    p->fresh[p->nfresh++] = id;
    return 0;
}

void crater_pass_capacity_changed(crater_pass_t *p)
{
    p->epoch++;
}

bool crater_pass_due(const crater_pass_t *p)
{
    return p->epoch != p->full_epoch || p->nfresh > 0;
}

void crater_pass_get_stats(const crater_pass_t *p, crater_pass_stats_t *out)
{
    *out = p->st;
}

const crater_reservation_t *crater_pass_reservation(const crater_pass_t *p)
{
    return p->resv_ok ? &p->resv : NULL;
}

/* ---- one job ------------------------------------------------------------- */

static void pending(crater_pass_t *p,
                    uint64_t id,
                    crater_pass_wait_t kind,
                    const crater_error_t *why)
{
    if (p->ops.pending)
        p->ops.pending(p->arg, id, kind, why);
}

/* The placement's reason and, after it, why no preemption helps (no
 * candidates: non-preemptible, equal or higher priority, too young). */
static void with_plan(crater_error_t *err, const crater_error_t *perr)
{
    size_t len = strlen(err->text), add = strlen(perr->text);

    if (perr->errnum != CRATER_EUNSCHED || len + 3 >= sizeof(err->text))
        return;
    if (add > sizeof(err->text) - len - 3)
        add = sizeof(err->text) - len - 3; /* cut, as err.text is */
    memcpy(err->text + len, "; ", 2);
    memcpy(err->text + len + 2, perr->text, add);
    err->text[len + 2 + add] = '\0';
}

static void victims_stopping(const crater_preempt_plan_t *plan,
                             crater_error_t *err)
{
    size_t len, cap = sizeof(err->text);

    err->errnum = CRATER_EUNSCHED;
    err->field[0] = '\0';
    len = (size_t)snprintf(err->text, cap, "waiting for job(s)");
    for (uint32_t i = 0; i < plan->nvictims && len < cap; i++)
        len += (size_t)snprintf(err->text + len,
                                cap - len,
                                "%s %" PRIu64,
                                i ? "," : "",
                                plan->victims[i]);
    if (len < cap)
        snprintf(err->text + len,
                 cap - len,
                 " already being preempted to stop");
}

/* Commit a single placement and hand it to the host. */
static int bind_one(crater_pass_t *p,
                    uint64_t id,
                    const crater_pass_job_t *j,
                    const crater_placement_t *pl,
                    crater_error_t *err)
{
    crater_error_t e;

    if (crater_sched_commit(p->s, j->task, j->req, pl, &e) < 0) {
        if (e.errnum == CRATER_ENOMEM)
            return crater_errorf(err, e.errnum, "%s", e.text);
        pending(p, id, CRATER_PASS_WAIT_NOPLAN, &e); /* e.g. id in use */
        return 0;
    }
    p->st.bound++;
    if (j->req->preemptible && j->req->priority < p->floor)
        p->floor = j->req->priority;
    return p->ops.bind(p->arg, id, pl, 1, err);
}

/* Place j now: behind a reserved head (a job of its priority or lower)
 * only where it cannot delay the head (reserve.h). 0 placed (*pl), 1
 * refused for the head's sake, -1 does not fit. */
static int place_now(crater_pass_t *p,
                     uint64_t id,
                     const crater_pass_job_t *j,
                     crater_placement_t *pl,
                     crater_error_t *why)
{
    crater_backfill_verdict_t v;

    p->st.place_calls++;
    if (!p->resv_ok || j->req->priority > p->resv_prio || id == p->resv.head)
        return crater_sched_place(p->s, j->req, pl, why);
    return crater_sched_place_backfill(p->s,
                                       j->req,
                                       p->now,
                                       j->time_limit_ms,
                                       &p->resv,
                                       pl,
                                       &v,
                                       why);
}

/* The reservation of head j (a gang's when it has replicas). */
static int reserve(crater_pass_t *p,
                   const crater_pass_job_t *j,
                   const crater_task_end_t *ends,
                   size_t n,
                   crater_error_t *e)
{
    crater_sched_t *s = p->s;

    if (j->replicas > 1 && p->prm.ends_heap)
        return crater_sched_reserve_gang_heap(s,
                                              j->req,
                                              j->replicas,
                                              ends,
                                              n,
                                              &p->resv,
                                              e);
    if (j->replicas > 1)
        return crater_sched_reserve_gang(s,
                                         j->req,
                                         j->replicas,
                                         ends,
                                         n,
                                         &p->resv,
                                         e);
    if (p->prm.ends_heap) /* the host keeps its ends as a heap */
        return crater_sched_reserve_heap(s, j->req, ends, n, &p->resv, e);
    return crater_sched_reserve(s, j->req, ends, n, &p->resv, e);
}

/* The head j (a single job or a gang) fits nowhere and has no plan:
 * reserve its start from the running tasks' expected ends (none when it
 * cannot fit even after all of them ended). */
static int reserve_head(crater_pass_t *p,
                        uint64_t id,
                        const crater_pass_job_t *j,
                        crater_error_t *err)
{
    const crater_task_end_t *ends = NULL;
    size_t n;
    crater_error_t e;

    if (!p->prm.backfill || !p->ops.ends || p->resv_ok)
        return 0;
    n = p->ops.ends(p->arg, &ends);
    p->resv_ok = reserve(p, j, ends, n, &e) == 0;
    if (!p->resv_ok && e.errnum != CRATER_EUNSCHED)
        return crater_errorf(err, e.errnum, "%s", e.text);
    p->resv.head = id;
    p->resv_prio = j->req->priority;
    return 0;
}

/* A gang's replicas were committed (pl): count it and hand it over. */
static int bound_gang(crater_pass_t *p,
                      uint64_t id,
                      const crater_pass_job_t *j,
                      const crater_placement_t *pl,
                      crater_error_t *err)
{
    p->st.bound++;
    if (j->req->preemptible && j->req->priority < p->floor)
        p->floor = j->req->priority;
    return p->ops.bind(p->arg, id, pl, j->replicas, err);
}

/* Commit a gang's planned placements in order and hand it over; a
 * replica that cannot be committed undoes the others (j waits). */
static int bind_gang(crater_pass_t *p,
                     uint64_t id,
                     const crater_pass_job_t *j,
                     const crater_placement_t *pl,
                     crater_error_t *err)
{
    crater_error_t e;

    for (uint32_t i = 0; i < j->replicas; i++) {
        if (crater_sched_commit(p->s, j->task + i, j->req, &pl[i], &e) == 0)
            continue;
        while (i-- > 0)
            crater_sched_release(p->s, j->task + i, NULL);
        if (e.errnum == CRATER_ENOMEM)
            return crater_errorf(err, e.errnum, "%s", e.text);
        pending(p, id, CRATER_PASS_WAIT_NOPLAN, &e);
        return 0;
    }
    return bound_gang(p, id, j, pl, err);
}

/* Victims are gone at once (the simulator): commit and bind on the plan,
 * and everything this pass learnt about fitting is stale. */
static int preempted_now(crater_pass_t *p,
                         uint64_t id,
                         const crater_pass_job_t *j,
                         const crater_preempt_plan_t *plan,
                         const crater_placement_t *gang,
                         crater_error_t *err)
{
    p->freed = true;
    p->epoch++;
    memo_reset(p);
    p->resv_ok = false;
    if (gang)
        return bind_gang(p, id, j, gang, err);
    return bind_one(p, id, j, &plan->placement, err);
}

/* The current job's shape's last failed plan (shapes are requests, so
 * the core may plan only what changed since), or NULL. */
static crater_plan_memo_t *plan_memo(crater_pass_t *p)
{
    return p->cur.shape != PASS_SHAPE_NONE ? &p->shape_plan[p->cur.shape]
                                           : NULL;
}

/* May a preemption be planned for j in this pass? 0 not (*perr why). */
static int may_plan(const crater_pass_t *p,
                    const crater_pass_job_t *j,
                    crater_error_t *perr)
{
    /* Below the floor no task can be a victim: the planner's failure is
     * certain, so it is asked only for its explanation (reasons kept). */
    if (j->req->priority <= p->floor && !p->why) {
        perr->errnum = CRATER_EUNSCHED;
        return 0;
    }
    /* Preemption is planned for the first job of a pass that fits nowhere
     * (the head) and, while plans succeed, for the next; once one fails,
     * jobs of its priority or lower behind it wait for the next pass, as
     * behind the head's reservation (one plan per waiting job and pass
     * made B6 with preemption, 1e6 jobs, run for hours). */
    if (j->req->priority <= p->noplan) {
        *perr = (crater_error_t){.errnum = CRATER_EUNSCHED};
        if (p->why)
            snprintf(perr->text,
                     sizeof(perr->text),
                     "no preemption planned: a job of priority %d ahead of "
                     "it found none in this pass",
                     p->noplan);
        return 0;
    }
    return 1;
}

/* Hand plan to the host (gang: a gang's placements, else NULL). 1
 * decided, 0 no victims, -1 error. */
static int execute(crater_pass_t *p,
                   uint64_t id,
                   const crater_pass_job_t *j,
                   const crater_preempt_plan_t *plan,
                   const crater_placement_t *gang,
                   crater_error_t *err)
{
    crater_error_t why;
    int rc;

    if (plan->nvictims == 0)
        return 0;
    if ((rc = p->ops.preempt(p->arg, id, plan, err)) < 0)
        return -1;
    if (rc == 2) {
        if (p->why)
            victims_stopping(plan, &why);
        pending(p, id, CRATER_PASS_WAIT_STOPPING, &why);
        return 1;
    }
    p->st.preemptions++;
    if (rc == 1 && preempted_now(p, id, j, plan, gang, err) < 0)
        return -1;
    return 1;
}

/* j fits nowhere: plan a preemption. 1 decided (preempting or waiting
 * for victims already stopping), 0 no plan (*perr why), -1 error. A
 * shape's plan keeps a memo of its last failure, so that the core plans
 * only the nodes touched since (crater_sched_plan_preemption_memo). */
static int try_preempt(crater_pass_t *p,
                       uint64_t id,
                       const crater_pass_job_t *j,
                       crater_error_t *perr,
                       crater_error_t *err)
{
    crater_preempt_plan_t plan;

    if (!may_plan(p, j, perr))
        return 0;
    p->st.plan_calls++;
    if (crater_sched_plan_preemption_memo(p->s,
                                          j->req,
                                          plan_memo(p),
                                          &plan,
                                          perr)
        < 0) {
        if (perr->errnum != CRATER_EUNSCHED)
            return crater_errorf(err, perr->errnum, "%s", perr->text);
        p->noplan = j->req->priority;
        return 0;
    }
    return execute(p, id, j, &plan, NULL, err);
}

/* A gang fits nowhere: plan victims for all its replicas (pl: room for
 * them). As try_preempt, except that a gang's failed plan does not stop
 * the jobs behind it from planning (a gang needs much more than one of
 * them would). */
static int try_preempt_gang(crater_pass_t *p,
                            uint64_t id,
                            const crater_pass_job_t *j,
                            crater_placement_t *pl,
                            crater_error_t *perr,
                            crater_error_t *err)
{
    crater_preempt_plan_t plan;

    if (!may_plan(p, j, perr))
        return 0;
    p->st.plan_calls++;
    if (crater_sched_plan_gang_preemption(p->s,
                                          j->req,
                                          j->replicas,
                                          j->task,
                                          &plan,
                                          pl,
                                          perr)
        < 0) {
        if (perr->errnum != CRATER_EUNSCHED)
            return crater_errorf(err, perr->errnum, "%s", perr->text);
        return 0;
    }
    return execute(p, id, j, &plan, pl, err);
}

/* A single-replica job that is ready and not in the memo. */
static int decide_one(crater_pass_t *p,
                      uint64_t id,
                      const crater_pass_job_t *j,
                      bool early,
                      crater_error_t *err)
{
    crater_placement_t pl;
    crater_error_t why = {0}, perr = {0};
    int rc;

    /* no reasons wanted: the core skips the explanation it builds */
    rc = place_now(p, id, j, &pl, p->why ? &why : NULL);
    if (rc == 0)
        return bind_one(p, id, j, &pl, err);
    if (rc > 0) {
        if (!early)
            memo_add(p, CRATER_PASS_WAIT_BACKFILL, &why);
        pending(p, id, CRATER_PASS_WAIT_BACKFILL, &why);
        return 0;
    }
    if (p->prm.preempt && (rc = try_preempt(p, id, j, &perr, err)) != 0)
        return rc < 0 ? -1 : 0;
    with_plan(&why, &perr);
    if (!early)
        memo_add(p, CRATER_PASS_WAIT_NOPLAN, &why);
    if (reserve_head(p, id, j, err) < 0)
        return -1;
    pending(p, id, CRATER_PASS_WAIT_NOPLAN, &why);
    return 0;
}

/* Is j ready to run (dependencies, caps)? 1 yes, 0 not (told). */
static int ready(crater_pass_t *p, uint64_t id)
{
    crater_error_t why = {0};
    int rc;

    if (!p->ops.ready || (rc = p->ops.ready(p->arg, id, &why)) > 0)
        return 1;
    if (rc < 0)
        p->ops.fail(p->arg, id, why.text);
    else
        pending(p, id, CRATER_PASS_WAIT_READY, &why);
    return 0;
}

/* Place gang j now: behind a reserved head (of its priority or higher)
 * only where it cannot delay the head (all replicas off the head's
 * node(s), or ending by the shadow time). 0 placed (pl), 1 refused for
 * the head's sake, -1 does not fit. */
static int gang_now(crater_pass_t *p,
                    uint64_t id,
                    const crater_pass_job_t *j,
                    crater_placement_t *pl,
                    crater_error_t *why)
{
    p->st.place_calls++;
    if (!p->resv_ok || j->req->priority > p->resv_prio || id == p->resv.head)
        return crater_sched_place_gang(p->s,
                                       j->req,
                                       j->replicas,
                                       j->task,
                                       pl,
                                       why);
    return crater_sched_place_gang_backfill(p->s,
                                            j->req,
                                            j->replicas,
                                            j->task,
                                            p->now,
                                            j->time_limit_ms,
                                            &p->resv,
                                            pl,
                                            why);
}

/* A gang that fits nowhere: preempt for it, else wait (and reserve its
 * start when it is the head). */
static int gang_waits(crater_pass_t *p,
                      uint64_t id,
                      const crater_pass_job_t *j,
                      crater_placement_t *pl,
                      bool early,
                      crater_error_t *why,
                      crater_error_t *err)
{
    crater_error_t perr = {0};
    int rc;

    if (p->prm.preempt
        && (rc = try_preempt_gang(p, id, j, pl, &perr, err)) != 0)
        return rc < 0 ? -1 : 0;
    with_plan(why, &perr);
    if (!early)
        memo_add(p, CRATER_PASS_WAIT_GANG, why);
    if (reserve_head(p, id, j, err) < 0)
        return -1;
    pending(p, id, CRATER_PASS_WAIT_GANG, why);
    return 0;
}

/* A gang that is ready and not in the memo. */
static int decide_gang(crater_pass_t *p,
                       uint64_t id,
                       const crater_pass_job_t *j,
                       bool early,
                       crater_error_t *err)
{
    crater_placement_t *pl = calloc(j->replicas, sizeof(*pl));
    crater_error_t why = {0};
    int rc;

    if (!pl)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    rc = gang_now(p, id, j, pl, &why);
    if (rc == 0) {
        rc = bound_gang(p, id, j, pl, err);
    } else if (rc > 0) {
        if (!early)
            memo_add(p, CRATER_PASS_WAIT_BACKFILL, &why);
        pending(p, id, CRATER_PASS_WAIT_BACKFILL, &why);
        rc = 0;
    } else if (why.errnum != CRATER_EUNSCHED) {
        pending(p, id, CRATER_PASS_WAIT_GANG, &why); /* not the shape's */
        rc = 0;
    } else {
        rc = gang_waits(p, id, j, pl, early, &why, err);
    }
    free(pl);
    return rc;
}

/* Decide job id; *tag (a kept order's position, or NULL) learns its
 * shape when requests are fixed. */
static int decide(crater_pass_t *p,
                  uint64_t id,
                  uint32_t *tag,
                  crater_error_t *err)
{
    crater_pass_job_t j = {0};
    const struct memo_slot *m;
    bool early;

    if (p->ops.job(p->arg, id, &j) <= 0 || !ready(p, id))
        return 0;
    p->cur.key = key_of(&j);
    p->cur.hash = key_hash(&p->cur.key);
    p->cur.shape = p->shapes ? shape_of(p) : PASS_SHAPE_NONE;
    if (tag)
        *tag = p->cur.shape;
    early = p->resv_ok && j.time_limit_ms
            && p->now + j.time_limit_ms <= p->resv.w.shadow_ms;
    if (!early && (m = memo_get(p))) {
        if (p->why)
            pending(p, id, p->why[m->why].kind, &p->why[m->why].err);
        return 0;
    }
    if (j.replicas > 1)
        return decide_gang(p, id, &j, early, err);
    return decide_one(p, id, &j, early, err);
}

/* ---- passes -------------------------------------------------------------- */

/* Hard deadlines that can no longer be met fail the job (the kept order
 * drops them at its next merge; until then ops.job skips them). */
static int expire(crater_pass_t *p, crater_error_t *err)
{
    size_t n = crater_queue_expired(p->q, p->now, NULL);
    uint64_t *ids;

    if (n == 0)
        return 0;
    if (!(ids = malloc(n * sizeof(*ids))))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    n = crater_queue_expired(p->q, p->now, ids);
    for (size_t i = 0; i < n; i++)
        p->ops.fail(p->arg, ids[i], "hard deadline can no longer be met");
    free(ids);
    return 0;
}

static int order(crater_pass_t *p, crater_error_t *err)
{
    crater_share_input_t in = {0};
    bool share = p->ops.share && p->ops.share(p->arg, &in) == 0;

    return pass__order_update(&p->ord, p->q, p->now, share ? &in : NULL, err);
}

static int full_pass(crater_pass_t *p, crater_error_t *err)
{
    p->full_epoch = p->epoch;
    p->resv_ok = false; /* capacity came back: a new head, a new shadow */
    p->st.full_passes++;
    if (order(p, err) < 0)
        return -1;
    for (size_t i = 0; i < p->ord.n; i++) {
        if (skip_by_tag(p, i))
            continue; /* what decide would find in the memo */
        if (decide(p, p->ord.ids[i], &p->ord.shape[i], err) < 0)
            return -1;
    }
    return 0;
}

static int cmp_fresh(const void *a, const void *b, void *arg)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    const crater_queue_entry_t *ex = crater_queue_get(arg, x);
    const crater_queue_entry_t *ey = crater_queue_get(arg, y);
    int32_t px = ex ? ex->priority : INT32_MIN;
    int32_t py = ey ? ey->priority : INT32_MIN;

    if (px != py)
        return px > py ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The first n jobs queued since the last pass, highest priority first,
 * each once. */
static int fresh_pass(crater_pass_t *p, size_t n, crater_error_t *err)
{
    p->st.fresh_passes++;
    if (n > 1) /* p->fresh may still be NULL: no qsort_r(NULL, 0) */
        qsort_r(p->fresh, n, sizeof(*p->fresh), cmp_fresh, p->q);
    for (size_t i = 0; i < n; i++) {
        if (i && p->fresh[i] == p->fresh[i - 1])
            continue;
        if (decide(p, p->fresh[i], NULL, err) < 0)
            return -1;
    }
    return 0;
}

/* Forget the first n fresh jobs (considered); those queued during the
 * pass (a preemption's victims) stay for the next one. */
static void fresh_drop(crater_pass_t *p, size_t n)
{
    if (n == 0) /* p->fresh may be NULL: NULL + 0 is undefined */
        return;
    memmove(p->fresh, p->fresh + n, (p->nfresh - n) * sizeof(*p->fresh));
    p->nfresh -= n;
}

int crater_pass_run(crater_pass_t *p, uint64_t now_ms, crater_error_t *err)
{
    size_t n = p->nfresh;
    int rc = 0;

    p->now = now_ms;
    p->freed = false;
    p->floor = p->prm.preempt ? crater_sched_victim_floor(p->s) : INT32_MIN;
    p->noplan = INT32_MIN;
    memo_reset(p);
    if (expire(p, err) < 0)
        return -1;
    if (p->epoch != p->full_epoch)
        rc = full_pass(p, err);
    else if (n)
        rc = fresh_pass(p, n, err);
    fresh_drop(p, n);
    if (rc < 0)
        return -1;
    return p->freed ? 1 : 0;
}
