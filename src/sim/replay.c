/* replay.c - real-time replay of jobs through the scheduling core on a
 * simulated clock (see include/crater/replay.h for the model).
 *
 * Events: arrivals come from an index sorted by submit time, departures
 * from a binary min-heap keyed by end time. A departure carries the
 * generation of the run it ends, so a preempted job's stale departure is
 * recognised and dropped instead of being searched for in the heap.
 *
 * The scheduling pass is craterd's: crater_pass_run() (src/sched/pass.c)
 * with this file's ops. An event with a departure tells the pass that
 * capacity came back (a full pass over the queue), arrivals are queued
 * (a fresh pass tries just them), and the simulator's side of each effect
 * is immediate: a bound job starts now, a preemption's victims are
 * evicted at once and requeued (so one more full pass runs right away:
 * victims and leftover room; anything still waiting is retried at the
 * next release, so a burst of preemptions costs one pass over the queue,
 * not one per preemption). What differs from craterd is only the host:
 * no agents, no store, no dependencies or deadlines in the traces.
 *
 * Utilisation is integrated exactly: the allocation is constant between
 * events, so area += level x (t1 - t0), also per sample bucket.
 */
#include "crater/replay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "crater/pass.h"
#include "crater/queue.h"
#include "crater/reserve.h"
#include "crater/typhist.h"

#define MIB (1024.0 * 1024.0)
#define PROGRESS_EVERY 4096u
#define MULTI_GPU (CRATER_REPLAY_NCLASS + 1) /* collect(): 2+ GPU jobs */

enum {
    DIM_GALLOC,
    DIM_GREQ,
    DIM_CPU,
    DIM_MEM,
    DIM_PENDING,
    NDIM
};
enum {
    ST_FUTURE,
    ST_PENDING,
    ST_RUNNING,
    ST_DONE,
    ST_STOPPED, /* still running at the horizon */
    ST_FAILED
};

static const int32_t class_prio[CRATER_REPLAY_NCLASS] = {1000, 0, -1000};
static const char *const class_names[CRATER_REPLAY_NCLASS] = {"high",
                                                              "normal",
                                                              "low"};
static const char *const policy_names[] = {"k8s-default", "crater"};

struct jstate {
    uint64_t start_ms, first_start_ms, remaining_ms, done_ms;
    uint64_t cpu, mem;
    double galloc;
    uint64_t exp_end; /* expected end of the current run (time limit);
                         UINT64_MAX: none */
    uint32_t gen;
    uint32_t rpos; /* position in run.running while running */
    uint32_t epos; /* position in run.ends while it has an expected end */
    uint8_t st;
    bool reclaim;          /* idle reclaim ends its run (idle_profile()) */
    uint64_t idle_held_ms; /* the idle tail it holds at the end of its run */
};

struct dep {
    uint64_t t;
    uint32_t j, gen;
};

struct run {
    crater_sched_t *s;
    const crater_replay_job_t *jobs;
    size_t n;
    crater_replay_opts_t o;
    crater_replay_result_t *res;
    crater_error_t *err;
    struct jstate *st;
    uint32_t *arr; /* job indices by submit time */
    size_t next_arr;
    struct dep *heap;
    size_t nheap, heap_cap;
    crater_queue_t *q;
    crater_pass_t *pass;
    /* the running jobs; of them, those with a time limit as a min-heap
     * of their expected ends (backfill: reserve.h reads it in order) */
    uint32_t *running;
    size_t nrunning;
    crater_task_end_t *ends;
    size_t nends;
    uint64_t now;
    double cur[NDIM], cap[NDIM];
    double area_win[NDIM], area_all[NDIM], bucket[NDIM];
    double idle_area; /* GPU-time held idle by completed jobs */
    size_t sample_cap;
};

/* ---- names ------------------------------------------------------------ */

const char *crater_replay_policy_name(crater_replay_policy_t p)
{
    return p <= CRATER_REPLAY_CRATER ? policy_names[p] : "unknown";
}

int crater_replay_policy_parse(const char *name,
                               crater_replay_policy_t *out,
                               crater_error_t *err)
{
    for (int i = 0; i <= CRATER_REPLAY_CRATER; i++)
        if (name && strcmp(name, policy_names[i]) == 0) {
            *out = (crater_replay_policy_t)i;
            return 0;
        }
    return crater_errorf_field(err,
                               CRATER_EINVAL,
                               "policy",
                               "unknown replay policy '%s' (expected "
                               "k8s-default or crater)",
                               name ? name : "");
}

const char *crater_replay_class_name(crater_replay_class_t c)
{
    return c < CRATER_REPLAY_NCLASS ? class_names[c] : "unknown";
}

crater_replay_class_t crater_replay_class_of_qos(crater_qos_t q)
{
    switch (q) {
    case CRATER_QOS_LS:
    case CRATER_QOS_GUARANTEED:
        return CRATER_REPLAY_HIGH;
    case CRATER_QOS_BURSTABLE:
        return CRATER_REPLAY_NORMAL;
    default:
        return CRATER_REPLAY_LOW;
    }
}

void crater_replay_job_class(crater_replay_job_t *job,
                             crater_replay_class_t cls,
                             crater_replay_policy_t p)
{
    job->cls = cls;
    job->req.priority = class_prio[cls];
    job->req.preemptible =
        p == CRATER_REPLAY_CRATER && cls == CRATER_REPLAY_LOW;
    if (p == CRATER_REPLAY_K8S_DEFAULT && job->req.slice_mib) {
        job->req.slice_mib = 0; /* a share takes a whole GPU */
        if (job->req.gpus == 0)
            job->req.gpus = 1;
    }
}

/* ---- scheduler set-up --------------------------------------------------- */

crater_sched_t *crater_replay_sched_create(const crater_cluster_t *c,
                                           const crater_kb_t *kb,
                                           crater_replay_policy_t p,
                                           int milli,
                                           crater_error_t *err)
{
    crater_config_t cfg;
    crater_sched_t *s = NULL;

    if (crater_config_defaults(&cfg) < 0) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    if (milli)
        cfg.scheduler.gpu_context_overhead = 0;
    /* The core gets no clock here (every task starts at time 0), so a
     * minimum run time would protect every task for ever: off until the
     * replay hands the core its simulated clock. */
    cfg.scheduler.preemption_min_runtime_ms = 0;
    s = crater_sched_create(&cfg, kb, NULL);
    crater_config_clear(&cfg);
    if (!s) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    if (p == CRATER_REPLAY_K8S_DEFAULT) {
        crater_sched_weights_t w = {.joint = 1.0};
        crater_sched_set_weights(s, &w);
    }
    for (size_t i = 0; i < c->nnodes; i++)
        if (crater_sched_add_node(s, &c->nodes[i], err) < 0) {
            crater_sched_destroy(s);
            return NULL;
        }
    return s;
}

/* ---- departure heap ----------------------------------------------------- */

static bool dep_less(const struct dep *a, const struct dep *b)
{
    return a->t < b->t || (a->t == b->t && a->j < b->j);
}

/* The heap may hold stale departures of preempted runs besides one live
 * departure per running job, so it grows on demand. */
static int heap_push(struct run *r, struct dep d)
{
    if (r->nheap == r->heap_cap) {
        size_t cap = 2 * r->heap_cap;
        void *p = realloc(r->heap, cap * sizeof(*r->heap));
        if (!p)
            return crater_errorf(r->err, CRATER_ENOMEM, "out of memory");
        r->heap = p;
        r->heap_cap = cap;
    }
    size_t i = r->nheap++;

    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!dep_less(&d, &r->heap[up]))
            break;
        r->heap[i] = r->heap[up];
        i = up;
    }
    r->heap[i] = d;
    return 0;
}

static struct dep heap_pop(struct run *r)
{
    struct dep top = r->heap[0], last = r->heap[--r->nheap];
    size_t i = 0, n = r->nheap;

    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && dep_less(&r->heap[c + 1], &r->heap[c]))
            c++;
        if (!dep_less(&r->heap[c], &last))
            break;
        r->heap[i] = r->heap[c];
        i = c;
    }
    if (n)
        r->heap[i] = last;
    return top;
}

/* ---- clock and utilisation ---------------------------------------------- */

/* Close the bucket starting at t0 that covered len ms. */
static int push_sample(struct run *r, uint64_t t0, double len)
{
    crater_replay_result_t *res = r->res;

    if (res->nsamples == r->sample_cap) {
        size_t cap = r->sample_cap ? 2 * r->sample_cap : 512;
        void *p = realloc(res->samples, cap * sizeof(*res->samples));
        if (!p)
            return crater_errorf(r->err, CRATER_ENOMEM, "out of memory");
        res->samples = p;
        r->sample_cap = cap;
    }
    crater_replay_sample_t *sm = &res->samples[res->nsamples++];
    sm->t_ms = t0;
    sm->gpu_alloc = r->bucket[DIM_GALLOC] / len / r->cap[DIM_GALLOC];
    sm->gpu_req = r->bucket[DIM_GREQ] / len / r->cap[DIM_GREQ];
    sm->cpu = r->bucket[DIM_CPU] / len / r->cap[DIM_CPU];
    sm->mem = r->bucket[DIM_MEM] / len / r->cap[DIM_MEM];
    sm->pending = r->bucket[DIM_PENDING] / len;
    memset(r->bucket, 0, sizeof(r->bucket));
    return 0;
}

static void add_area(double *area, const double *cur, double dt)
{
    for (int d = 0; d < NDIM; d++)
        area[d] += cur[d] * dt;
}

/* Move the clock to t, integrating the current levels. */
static int advance(struct run *r, uint64_t t)
{
    uint64_t first = r->res->t_first_ms, last = r->res->t_last_submit_ms;
    uint64_t step = r->res->sample_ms;

    r->cur[DIM_PENDING] = (double)crater_queue_count(r->q);
    add_area(r->area_all, r->cur, (double)(t - r->now));
    if (r->now < last)
        add_area(r->area_win, r->cur, (double)((t < last ? t : last) - r->now));
    while (r->now < t) {
        uint64_t b0 = first + (r->now - first) / step * step;
        uint64_t end = b0 + step < t ? b0 + step : t;
        add_area(r->bucket, r->cur, (double)(end - r->now));
        r->now = end;
        if (end == b0 + step && push_sample(r, b0, (double)step) < 0)
            return -1;
    }
    return 0;
}

/* ---- starting, ending, preempting ---------------------------------------- */

static void level(struct run *r, uint32_t j, double sign)
{
    const struct jstate *st = &r->st[j];

    r->cur[DIM_GALLOC] += sign * st->galloc;
    r->cur[DIM_GREQ] += sign * r->jobs[j].gpu_milli / 1000.0;
    r->cur[DIM_CPU] += sign * (double)st->cpu;
    r->cur[DIM_MEM] += sign * (double)st->mem;
}

/* The time limit left to job j's next run: its limit less what it ran
 * before a preemption (runs resume, as if checkpointed). */
static uint64_t limit_left(const struct run *r, uint32_t j)
{
    uint64_t lim = r->jobs[j].time_limit_ms, rt = r->jobs[j].runtime_ms;
    uint64_t done;

    if (!lim)
        return 0;
    rt = rt < lim ? rt : lim; /* a run is cut at its limit */
    done = rt > r->st[j].remaining_ms ? rt - r->st[j].remaining_ms : 0;
    return lim > done ? lim - done : 1;
}

/* ---- expected ends: a min-heap by (end, task), positions in st[].epos */

static bool end_less(const crater_task_end_t *a, const crater_task_end_t *b)
{
    return a->end_ms < b->end_ms
           || (a->end_ms == b->end_ms && a->task < b->task);
}

static void end_put(struct run *r, size_t i, crater_task_end_t e)
{
    r->ends[i] = e;
    r->st[e.task - 1].epos = (uint32_t)i;
}

static void end_up(struct run *r, size_t i, crater_task_end_t e)
{
    while (i > 0 && end_less(&e, &r->ends[(i - 1) / 2])) {
        end_put(r, i, r->ends[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    end_put(r, i, e);
}

static void end_down(struct run *r, size_t i, crater_task_end_t e)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= r->nends)
            break;
        if (c + 1 < r->nends && end_less(&r->ends[c + 1], &r->ends[c]))
            c++;
        if (!end_less(&r->ends[c], &e))
            break;
        end_put(r, i, r->ends[c]);
        i = c;
    }
    end_put(r, i, e);
}

/* Job j's expected end leaves the heap. */
static void end_remove(struct run *r, uint32_t j)
{
    size_t i = r->st[j].epos;
    crater_task_end_t last = r->ends[--r->nends];

    if (i == r->nends)
        return;
    if (i > 0 && end_less(&last, &r->ends[(i - 1) / 2]))
        end_up(r, i, last);
    else
        end_down(r, i, last);
}

/* Job i's idle tail (not cut by a time limit): held to the end, or
 * until idle reclaim ends the run idle_reclaim_ms into it. */
static void idle_profile(struct run *r, size_t i)
{
    struct jstate *st = &r->st[i];
    uint64_t tail = r->jobs[i].idle_tail_ms, rc = r->o.idle_reclaim_ms;

    tail = tail < r->jobs[i].runtime_ms ? tail : r->jobs[i].runtime_ms;
    st->idle_held_ms = tail;
    if (!rc || tail <= rc)
        return;
    st->reclaim = true;
    st->idle_held_ms = rc;
    st->remaining_ms -= tail - rc;
}

static void running_add(struct run *r, uint32_t j)
{
    uint64_t left = limit_left(r, j);

    r->st[j].exp_end = left ? r->now + left : UINT64_MAX;
    r->st[j].rpos = (uint32_t)r->nrunning;
    r->running[r->nrunning++] = j;
    if (left)
        end_up(r, r->nends++, (crater_task_end_t){j + 1ull, r->st[j].exp_end});
}

static void running_remove(struct run *r, uint32_t j)
{
    uint32_t last = r->running[--r->nrunning], pos = r->st[j].rpos;

    r->running[pos] = last;
    r->st[last].rpos = pos;
    if (r->st[j].exp_end != UINT64_MAX)
        end_remove(r, j);
    if (r->o.on_end)
        r->o.on_end(r->o.on_end_arg, j, r->now);
}

/* Job j runs from now on p (committed to the core). */
static int run_on(struct run *r, uint32_t j, const crater_placement_t *p)
{
    struct jstate *st = &r->st[j];

    st->st = ST_RUNNING;
    st->start_ms = r->now;
    st->galloc = crater_sched_gpus_held(r->s, p);
    st->cpu = p->cpu_milli;
    st->mem = p->mem_bytes;
    level(r, j, 1.0);
    running_add(r, j);
    return heap_push(r, (struct dep){r->now + st->remaining_ms, j, ++st->gen});
}

/* Job j was placed and committed by the pass: it starts now. */
static int start(struct run *r, uint32_t j, const crater_placement_t *p)
{
    struct jstate *st = &r->st[j];

    if (crater_queue_remove(r->q, j + 1ull, r->err) < 0)
        return -1;
    if (r->o.on_start)
        r->o.on_start(r->o.on_start_arg, j, p, r->now);
    if (st->first_start_ms == UINT64_MAX)
        st->first_start_ms = r->now;
    return run_on(r, j, p);
}

static int enqueue(struct run *r, uint32_t j)
{
    const crater_replay_job_t *job = &r->jobs[j];
    crater_queue_entry_t e = {
        .id = j + 1ull,
        .tenant = "replay",
        .priority = job->req.priority,
        .submit_ms = job->submit_ms,
        .est_runtime_ms = r->st[j].remaining_ms,
    };

    e.demand[CRATER_QDIM_GPU] = job->gpu_milli / 1000.0;
    r->st[j].st = ST_PENDING;
    if (crater_queue_push(r->q, &e, r->err) < 0)
        return -1;
    return crater_pass_queued(r->pass, e.id, r->err);
}

static int evict(struct run *r, uint32_t j)
{
    struct jstate *st = &r->st[j];
    uint64_t ran = r->now - st->start_ms;

    if (crater_sched_release(r->s, j + 1ull, r->err) < 0)
        return -1;
    level(r, j, -1.0);
    running_remove(r, j);
    st->remaining_ms = st->remaining_ms > ran ? st->remaining_ms - ran : 1;
    st->gen++; /* its departure in the heap is now stale */
    r->res->preemptions++;
    return enqueue(r, j);
}

/* Job j was already running when the replay began (a snapshot): it is
 * charged on its placement as it arrives, with no wait. */
static int pinned(struct run *r, uint32_t j)
{
    const crater_replay_job_t *job = &r->jobs[j];

    if (crater_sched_commit(r->s, j + 1ull, &job->req, job->pin, r->err) < 0)
        return -1;
    return run_on(r, j, job->pin);
}

/* An arrival: learnt from (crater_typhist) and queued, or pinned. */
static int arrive(struct run *r, uint32_t j)
{
    if (r->jobs[j].pin)
        return pinned(r, j);
    if (r->o.learn
        && crater_typhist_observe(r->o.learn, r->s, &r->jobs[j].req, r->err)
               < 0)
        return -1;
    return enqueue(r, j);
}

/* ---- the pass's ops ------------------------------------------------------ */

static int op_job(void *arg, uint64_t id, crater_pass_job_t *job)
{
    struct run *r = arg;
    uint32_t j = (uint32_t)(id - 1);

    if (r->st[j].st != ST_PENDING)
        return 0;
    job->req = &r->jobs[j].req;
    job->replicas = 1;
    job->task = id;
    job->time_limit_ms = limit_left(r, j);
    return 1;
}

static int op_bind(void *arg,
                   uint64_t id,
                   const crater_placement_t *pl,
                   uint32_t n,
                   crater_error_t *err)
{
    (void)n; /* the traces have no gangs */
    (void)err;
    return start(arg, (uint32_t)(id - 1), pl);
}

/* Victims are evicted at once and requeued; the pass starts the job. */
static int op_preempt(void *arg,
                      uint64_t id,
                      const crater_preempt_plan_t *plan,
                      crater_error_t *err)
{
    (void)id;
    (void)err;
    for (uint32_t v = 0; v < plan->nvictims; v++)
        if (evict(arg, (uint32_t)(plan->victims[v] - 1)) < 0)
            return -1;
    return 1;
}

/* Nothing in a trace can fail a job (no deadlines, no dependencies);
 * should one, it leaves the queue and is counted as never started. */
static void op_fail(void *arg, uint64_t id, const char *reason)
{
    struct run *r = arg;

    (void)reason;
    crater_queue_remove(r->q, id, NULL);
    r->st[id - 1].st = ST_FAILED;
}

/* The running jobs' expected ends (their time limits), as the heap kept
 * on every start and end: a saturated cluster asks once per pass, which
 * must not cost a scan of every running job (a scan made 1,000,000 jobs
 * on 10,000 nodes take over 12 min instead of 35 s, B6). */
static size_t op_ends(void *arg, const crater_task_end_t **ends)
{
    struct run *r = arg;

    *ends = r->ends;
    return r->nends;
}

static const crater_pass_ops_t replay_ops = {
    .version = CRATER_PASS_OPS_VERSION,
    .job = op_job,
    .bind = op_bind,
    .preempt = op_preempt,
    .fail = op_fail,
    .ends = op_ends,
};

/* A departure gave capacity back (full pass); a pass whose preemptions
 * freed capacity is followed by one more full pass. */
static int schedule(struct run *r, bool released)
{
    int rc;

    if (released)
        crater_pass_capacity_changed(r->pass);
    rc = crater_pass_run(r->pass, r->now, r->err);
    if (rc > 0)
        rc = crater_pass_run(r->pass, r->now, r->err);
    return rc < 0 ? -1 : 0;
}

/* ---- the event loop ------------------------------------------------------ */

/* The allocation at this instant, to the host's after_pass. */
static void after_pass(struct run *r, uint64_t t)
{
    crater_replay_sample_t now = {
        .t_ms = t,
        .gpu_alloc = r->cur[DIM_GALLOC] / r->cap[DIM_GALLOC],
        .gpu_req = r->cur[DIM_GREQ] / r->cap[DIM_GREQ],
        .cpu = r->cur[DIM_CPU] / r->cap[DIM_CPU],
        .mem = r->cur[DIM_MEM] / r->cap[DIM_MEM],
        .pending = (double)crater_queue_count(r->q),
    };

    r->o.after_pass(r->o.after_pass_arg, r->s, &now);
}

static int process_event(struct run *r, uint64_t t)
{
    bool released = false;

    if (advance(r, t) < 0)
        return -1;
    while (r->nheap && r->heap[0].t == t) {
        struct dep d = heap_pop(r);
        struct jstate *st = &r->st[d.j];
        if (st->gen != d.gen || st->st != ST_RUNNING)
            continue;
        if (crater_sched_release(r->s, d.j + 1ull, r->err) < 0)
            return -1;
        level(r, d.j, -1.0);
        running_remove(r, d.j);
        st->st = ST_DONE;
        st->done_ms = t;
        r->res->completed++;
        r->idle_area += st->galloc * (double)st->idle_held_ms;
        r->res->idle_reclaims += st->reclaim;
        released = true;
    }
    while (r->next_arr < r->n && r->jobs[r->arr[r->next_arr]].submit_ms == t) {
        if (arrive(r, r->arr[r->next_arr++]) < 0)
            return -1;
    }
    if (schedule(r, released) < 0)
        return -1;
    if (r->o.after_pass)
        after_pass(r, t);
    return 0;
}

/* At the horizon: the clock stops there and the jobs still running give
 * their charges back, so that the core is left empty. */
static int stop_at_horizon(struct run *r)
{
    if (advance(r, r->o.horizon_ms) < 0)
        return -1;
    while (r->nrunning) {
        uint32_t j = r->running[r->nrunning - 1];
        if (crater_sched_release(r->s, j + 1ull, r->err) < 0)
            return -1;
        level(r, j, -1.0);
        running_remove(r, j);
        r->st[j].st = ST_STOPPED;
    }
    return 0;
}

static int event_loop(struct run *r)
{
    for (size_t ev = 0; r->next_arr < r->n || r->nheap; ev++) {
        uint64_t t = UINT64_MAX;
        if (r->next_arr < r->n)
            t = r->jobs[r->arr[r->next_arr]].submit_ms;
        if (r->nheap && r->heap[0].t < t)
            t = r->heap[0].t;
        if (r->o.horizon_ms && t > r->o.horizon_ms) {
            if (stop_at_horizon(r) < 0)
                return -1;
            break;
        }
        if (process_event(r, t) < 0)
            return -1;
        r->res->events++;
        if (r->o.progress && ev % PROGRESS_EVERY == 0)
            r->o.progress(r->o.progress_arg, r->next_arr, r->n);
    }
    r->res->t_end_ms = r->now;
    /* flush the last partial bucket */
    uint64_t part = (r->now - r->res->t_first_ms) % r->res->sample_ms;
    if (part)
        return push_sample(r, r->now - part, (double)part);
    return 0;
}

/* ---- set-up and results -------------------------------------------------- */

struct arr_key {
    uint64_t t;
    uint32_t j;
};

static int cmp_arr(const void *a, const void *b)
{
    const struct arr_key *x = a, *y = b;

    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->j < y->j ? -1 : x->j > y->j;
}

static int sort_arrivals(struct run *r)
{
    struct arr_key *k = malloc((r->n ? r->n : 1) * sizeof(*k));

    if (!k)
        return crater_errorf(r->err, CRATER_ENOMEM, "out of memory");
    for (size_t i = 0; i < r->n; i++)
        k[i] = (struct arr_key){r->jobs[i].submit_ms, (uint32_t)i};
    qsort(k, r->n, sizeof(*k), cmp_arr);
    for (size_t i = 0; i < r->n; i++)
        r->arr[i] = k[i].j;
    free(k);
    return 0;
}

static void capacity(struct run *r)
{
    uint32_t nn = crater_sched_node_count(r->s);
    const crater_cluster_t *cl = r->o.cluster;
    double g = 0, c = 0, m = 0;

    for (uint32_t i = 0; i < nn; i++)
        g += (double)crater_sched_node(r->s, i)->ngpus;
    for (size_t i = 0; cl && i < cl->nnodes; i++) {
        c += (double)crater_node_cpu_milli(&cl->nodes[i]);
        m += (double)crater_node_memory_bytes(&cl->nodes[i]);
    }
    r->cap[DIM_GALLOC] = r->cap[DIM_GREQ] = g > 0 ? g : 1;
    r->cap[DIM_CPU] = c > 0 ? c : 1;
    r->cap[DIM_MEM] = m > 0 ? m : 1;
    r->res->gpus = g;
    r->res->cpu_cores = c / 1000.0;
    r->res->mem_gib = m / (1024.0 * MIB);
}

static int run_init(struct run *r)
{
    size_t n = r->n ? r->n : 1;

    r->st = calloc(n, sizeof(*r->st));
    r->arr = malloc(n * sizeof(*r->arr));
    r->heap_cap = n;
    r->heap = malloc(n * sizeof(*r->heap));
    r->running = malloc(n * sizeof(*r->running));
    r->ends = malloc(n * sizeof(*r->ends));
    r->q = crater_queue_create();
    if (r->q) {
        crater_pass_params_t prm = {.preempt = r->o.preempt,
                                    .backfill = r->o.backfill,
                                    .fixed_requests = true,
                                    .ends_heap = true};
        r->pass = crater_pass_create(r->s, r->q, &prm, &replay_ops, r);
    }
    if (!r->st || !r->arr || !r->heap || !r->pass || !r->running || !r->ends
        || !r->q)
        return crater_errorf(r->err, CRATER_ENOMEM, "out of memory");
    for (size_t i = 0; i < r->n; i++) {
        if (r->jobs[i].runtime_ms == 0)
            return crater_errorf_field(r->err,
                                       CRATER_EINVAL,
                                       "runtime",
                                       "job %zu has runtime 0",
                                       i);
        r->st[i].remaining_ms = r->jobs[i].runtime_ms;
        if (r->jobs[i].time_limit_ms
            && r->jobs[i].time_limit_ms < r->jobs[i].runtime_ms)
            r->st[i].remaining_ms = r->jobs[i].time_limit_ms; /* cut */
        else
            idle_profile(r, i);
        r->st[i].first_start_ms = UINT64_MAX;
    }
    return sort_arrivals(r);
}

static void run_free(struct run *r)
{
    free(r->st);
    free(r->arr);
    free(r->heap);
    free(r->running);
    free(r->ends);
    crater_pass_destroy(r->pass);
    crater_queue_destroy(r->q);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v[0..n-1]. */
static double pct(const double *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t k = (size_t)ceil(p * (double)n);
    return v[k ? k - 1 : 0];
}

static void fill_stats(
    crater_replay_stats_t *s, double *w, size_t nw, double *c, size_t nc)
{
    double sw = 0, sc = 0;

    qsort(w, nw, sizeof(*w), cmp_double);
    qsort(c, nc, sizeof(*c), cmp_double);
    for (size_t i = 0; i < nw; i++)
        sw += w[i];
    for (size_t i = 0; i < nc; i++)
        sc += c[i];
    s->started = nw;
    s->completed = nc;
    s->wait_p50 = pct(w, nw, 0.5);
    s->wait_p99 = pct(w, nw, 0.99);
    s->wait_max = nw ? w[nw - 1] : 0;
    s->wait_mean = nw ? sw / (double)nw : 0;
    s->jct_p50 = pct(c, nc, 0.5);
    s->jct_p99 = pct(c, nc, 0.99);
    s->jct_mean = nc ? sc / (double)nc : 0;
}

/* Gather waits / completion times of class cls (NCLASS: all) into w, c. */
static void collect(const struct run *r,
                    int cls,
                    double *w,
                    size_t *nw,
                    double *c,
                    size_t *nc,
                    size_t *njobs)
{
    *nw = *nc = *njobs = 0;
    for (size_t i = 0; i < r->n; i++) {
        const struct jstate *st = &r->st[i];
        uint64_t sub = r->jobs[i].submit_ms;
        if (cls < CRATER_REPLAY_NCLASS && (int)r->jobs[i].cls != cls)
            continue;
        if (cls == MULTI_GPU && r->jobs[i].req.gpus < 2)
            continue;
        (*njobs)++;
        if (st->first_start_ms != UINT64_MAX)
            w[(*nw)++] = (double)(st->first_start_ms - sub) / 1000.0;
        if (st->st == ST_DONE)
            c[(*nc)++] = (double)(st->done_ms - sub) / 1000.0;
    }
}

static int stats(struct run *r)
{
    crater_replay_result_t *res = r->res;
    size_t n = r->n ? r->n : 1, nw, nc;
    double *c = malloc(n * sizeof(*c)), *all = malloc(n * sizeof(*all));

    if (!c || !all) {
        free(c);
        free(all);
        return crater_errorf(r->err, CRATER_ENOMEM, "out of memory");
    }
    for (int k = 0; k <= CRATER_REPLAY_NCLASS; k++) {
        crater_replay_stats_t *s =
            k < CRATER_REPLAY_NCLASS ? &res->cls[k] : &res->all;
        double *w = k < CRATER_REPLAY_NCLASS ? malloc(n * sizeof(*w)) : all;
        if (!w) {
            free(c);
            free(all);
            return crater_errorf(r->err, CRATER_ENOMEM, "out of memory");
        }
        collect(r, k, w, &nw, c, &nc, &s->jobs);
        fill_stats(s, w, nw, c, nc);
        if (k < CRATER_REPLAY_NCLASS) {
            res->wait_s[k] = w;
            res->nwait[k] = nw;
        }
    }
    collect(r, MULTI_GPU, all, &nw, c, &nc, &res->multi_gpu.jobs);
    fill_stats(&res->multi_gpu, all, nw, c, nc);
    free(c);
    free(all);
    return 0;
}

static void utilisation(struct run *r)
{
    crater_replay_result_t *res = r->res;
    double win = (double)(res->t_last_submit_ms - res->t_first_ms);
    double all = (double)(res->t_end_ms - res->t_first_ms);
    const double *area = r->area_win;

    if (win <= 0) { /* all arrivals at one instant: use the whole run */
        win = all;
        area = r->area_all;
    }
    if (win > 0) {
        res->util_gpu_alloc = area[DIM_GALLOC] / win / r->cap[DIM_GALLOC];
        res->util_gpu_req = area[DIM_GREQ] / win / r->cap[DIM_GREQ];
        res->util_cpu = area[DIM_CPU] / win / r->cap[DIM_CPU];
        res->util_mem = area[DIM_MEM] / win / r->cap[DIM_MEM];
    }
    if (all > 0) {
        res->util_gpu_alloc_all =
            r->area_all[DIM_GALLOC] / all / r->cap[DIM_GALLOC];
        res->util_gpu_req_all = r->area_all[DIM_GREQ] / all / r->cap[DIM_GREQ];
        res->util_gpu_busy_all =
            (r->area_all[DIM_GALLOC] - r->idle_area) / all / r->cap[DIM_GALLOC];
    }
}

static void window(struct run *r)
{
    crater_replay_result_t *res = r->res;

    if (r->n) {
        res->t_first_ms = r->jobs[r->arr[0]].submit_ms;
        res->t_last_submit_ms = r->jobs[r->arr[r->n - 1]].submit_ms;
    }
    res->sample_ms = r->o.sample_ms;
    if (!res->sample_ms)
        res->sample_ms = (res->t_last_submit_ms - res->t_first_ms) / 300;
    if (!res->sample_ms)
        res->sample_ms = 1;
    r->now = res->t_first_ms;
}

int crater_replay_run(crater_sched_t *s,
                      const crater_replay_job_t *jobs,
                      size_t njobs,
                      const crater_replay_opts_t *opts,
                      crater_replay_result_t *res,
                      crater_error_t *err)
{
    struct run r = {.s = s, .jobs = jobs, .n = njobs, .res = res, .err = err};
    int rc;

    memset(res, 0, sizeof(*res));
    if (opts)
        r.o = *opts;
    if (njobs >= UINT32_MAX)
        return crater_errorf(err, CRATER_ELIMIT, "too many jobs: %zu", njobs);
    res->jobs = njobs;
    rc = run_init(&r);
    if (rc == 0) {
        capacity(&r);
        window(&r);
        rc = event_loop(&r);
    }
    if (rc == 0) {
        crater_pass_stats_t ps;
        crater_pass_get_stats(r.pass, &ps);
        res->place_calls = ps.place_calls;
        res->plan_calls = ps.plan_calls;
        res->never_started = crater_queue_count(r.q);
        utilisation(&r);
        rc = stats(&r);
    }
    run_free(&r);
    if (rc < 0)
        crater_replay_result_clear(res);
    return rc;
}

double crater_replay_offered_load(const crater_replay_job_t *jobs,
                                  size_t n,
                                  double gpus)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    double work = 0;

    for (size_t i = 0; i < n; i++) {
        lo = jobs[i].submit_ms < lo ? jobs[i].submit_ms : lo;
        hi = jobs[i].submit_ms > hi ? jobs[i].submit_ms : hi;
        work += jobs[i].gpu_milli / 1000.0 * (double)jobs[i].runtime_ms;
    }
    if (n == 0 || hi == lo || gpus <= 0)
        return 0;
    return work / (gpus * (double)(hi - lo));
}

void crater_replay_compress(crater_replay_job_t *jobs, size_t n, double factor)
{
    uint64_t lo = UINT64_MAX;

    for (size_t i = 0; i < n; i++)
        lo = jobs[i].submit_ms < lo ? jobs[i].submit_ms : lo;
    for (size_t i = 0; i < n && factor > 0; i++)
        jobs[i].submit_ms =
            lo + (uint64_t)((double)(jobs[i].submit_ms - lo) / factor);
}

void crater_replay_result_clear(crater_replay_result_t *res)
{
    if (!res)
        return;
    for (int k = 0; k < CRATER_REPLAY_NCLASS; k++)
        free(res->wait_s[k]);
    free(res->samples);
    memset(res, 0, sizeof(*res));
}

/* ---- JSON ---------------------------------------------------------------- */

static json_t *stats_json(const crater_replay_stats_t *s)
{
    return json_pack("{s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:f}",
                     "jobs",
                     (json_int_t)s->jobs,
                     "started",
                     (json_int_t)s->started,
                     "completed",
                     (json_int_t)s->completed,
                     "wait_p50_s",
                     s->wait_p50,
                     "wait_p99_s",
                     s->wait_p99,
                     "wait_mean_s",
                     s->wait_mean,
                     "wait_max_s",
                     s->wait_max,
                     "jct_p50_s",
                     s->jct_p50,
                     "jct_p99_s",
                     s->jct_p99,
                     "jct_mean_s",
                     s->jct_mean);
}

static json_t *samples_json(const crater_replay_result_t *r)
{
    json_t *a = json_array();

    for (size_t i = 0; a && i < r->nsamples; i++) {
        const crater_replay_sample_t *s = &r->samples[i];
        if (json_array_append_new(a,
                                  json_pack("{s:f,s:f,s:f,s:f,s:f,s:f}",
                                            "t_s",
                                            (double)s->t_ms / 1000.0,
                                            "gpu_alloc",
                                            s->gpu_alloc,
                                            "gpu_req",
                                            s->gpu_req,
                                            "cpu",
                                            s->cpu,
                                            "mem",
                                            s->mem,
                                            "pending",
                                            s->pending))
            < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

json_t *crater_replay_result_json(const crater_replay_result_t *r,
                                  bool with_samples)
{
    json_t *cls = json_object(), *o;

    for (int k = 0; cls && k < CRATER_REPLAY_NCLASS; k++)
        json_object_set_new(cls, class_names[k], stats_json(&r->cls[k]));
    o = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:"
                  "f,"
                  "s:f,s:f,s:f,s:o,s:o}",
                  "jobs",
                  (json_int_t)r->jobs,
                  "completed",
                  (json_int_t)r->completed,
                  "never_started",
                  (json_int_t)r->never_started,
                  "preemptions",
                  (json_int_t)r->preemptions,
                  "events",
                  (json_int_t)r->events,
                  "place_calls",
                  (json_int_t)r->place_calls,
                  "plan_calls",
                  (json_int_t)r->plan_calls,
                  "gpus",
                  r->gpus,
                  "cpu_cores",
                  r->cpu_cores,
                  "mem_gib",
                  r->mem_gib,
                  "window_s",
                  (double)(r->t_last_submit_ms - r->t_first_ms) / 1000.0,
                  "makespan_s",
                  (double)(r->t_end_ms - r->t_first_ms) / 1000.0,
                  "util_gpu_alloc",
                  r->util_gpu_alloc,
                  "util_gpu_req",
                  r->util_gpu_req,
                  "util_cpu",
                  r->util_cpu,
                  "util_mem",
                  r->util_mem,
                  "util_gpu_alloc_all",
                  r->util_gpu_alloc_all,
                  "util_gpu_req_all",
                  r->util_gpu_req_all,
                  "all",
                  stats_json(&r->all),
                  "classes",
                  cls);
    if (o)
        json_object_set_new(o, "multi_gpu", stats_json(&r->multi_gpu));
    if (o)
        json_object_set_new(o,
                            "util_gpu_busy_all",
                            json_real(r->util_gpu_busy_all));
    if (o)
        json_object_set_new(o,
                            "idle_reclaims",
                            json_integer((json_int_t)r->idle_reclaims));
    if (o && with_samples)
        json_object_set_new(o, "samples", samples_json(r));
    return o;
}
