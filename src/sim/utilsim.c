/* utilsim.c - `crater sim util`'s run: the replay (replay.c, through the
 * shared pass) decides who runs where and when; this file follows every
 * start and end and integrates each node's measured GPU utilisation
 * exactly between them (include/crater/utilsim.h).
 *
 * Per node: the running tasks and the time up to which the node has been
 * integrated. A start or end on a node first integrates it up to now,
 * then changes its task set. Between two changes a node's state is
 * piecewise constant, broken only at known times: the hour boundaries
 * (inference load is constant within an hour) and each task's switch to
 * its idle tail; every piece is solved once (crater_util_solve). Only the
 * arrival window (first to last submit) is counted, as the replay's
 * allocation figures are. Cost: one solve per piece of a node that
 * changed, a few dozen tasks at most. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "crater/utilmodel.h"
#include "sim/utilint.h"

#define HOUR_MS 3600000ull
#define POOL_CPU 0
#define POOL_DISK 1
#define POOL_MEMBW 2
#define POOL_GPU0 3

struct utask {
    crater_placement_t p;
    uint64_t start_ms; /* this run's start */
    uint64_t idle_at;  /* its idle tail starts here (UINT64_MAX: never) */
    uint64_t ran_ms;   /* run time of earlier runs (preempted) */
    bool running;
};

struct unode {
    uint32_t *task; /* job indices running here */
    size_t n, cap;
    uint64_t t; /* integrated up to here */
};

struct acc {
    const crater_util_params_t *p;
    const crater_replay_job_t *jobs;
    const struct ujob *uj;
    const crater_cluster_t *cl;
    struct utask *ut;
    struct unode *node;
    size_t nnodes;
    uint64_t w0, w1;
    double busy, steps, served, offered;
    crater_util_task_t *ct; /* scratch for the solve */
    size_t ctcap;
    int oom;
};

/* ---- one piece of one node ------------------------------------------------
 */

static double load_at(const struct acc *a, uint32_t j, uint64_t t)
{
    if (t >= a->ut[j].idle_at)
        return 0;
    if (a->uj[j].kind == UJ_INFER)
        return crater_util_diurnal(t, a->p->trough);
    return 1;
}

static double share_on(const struct utask *u, uint32_t k)
{
    return u->p.whole ? 1.0 : u->p.gpu_mib[k] / 1000.0;
}

static void add_claim(crater_util_task_t *t, uint32_t pool, double w, double g)
{
    if (t->nclaim < CRATER_UTIL_MAX_CLAIMS && w > 0)
        t->claim[t->nclaim++] = (crater_util_claim_t){pool, w, g, 0};
}

/* A GPU job's GPU claim per GPU it holds: its intrinsic use of its own
 * share (a whole GPU held for a 0.3 share still gets only 0.3 of work). */
static void claims(const struct acc *a,
                   uint32_t j,
                   double L,
                   crater_util_task_t *t)
{
    const struct ujob *u = &a->uj[j];
    const struct utask *x = &a->ut[j];
    double w = (double)x->p.cpu_milli / 1000.0;
    double per = u->gpu_milli / 1000.0 / (x->p.ngpus ? x->p.ngpus : 1);

    t->nclaim = 0;
    add_claim(t, POOL_CPU, L * u->cpu, w);
    add_claim(t, POOL_DISK, L * u->disk, 1);
    add_claim(t, POOL_MEMBW, L * u->membw, 1);
    for (uint32_t k = 0; k < x->p.ngpus; k++) {
        double s = x->p.whole && per < 1 ? per : share_on(x, k);
        if (x->p.share_milli) /* time-shared: its own use, not its slice */
            s = per;
        add_claim(t, POOL_GPU0 + x->p.gpu[k], L * u->intr * s, 1);
    }
}

static void pools(const struct acc *a, uint32_t n, double *cap)
{
    const crater_node_t *nd = &a->cl->nodes[n];
    double cores = (double)crater_node_cpu_milli(nd) / 1000.0;

    cap[POOL_CPU] = cores;
    cap[POOL_DISK] = a->p->node_disk;
    cap[POOL_MEMBW] = a->p->node_membw_per_core * cores;
    for (size_t g = 0; g < CRATER_MAX_GPUS_PER_NODE; g++)
        cap[POOL_GPU0 + g] = 1;
}

static int scratch(struct acc *a, size_t n)
{
    if (n <= a->ctcap)
        return 0;
    crater_util_task_t *t = realloc(a->ct, n * sizeof(*t));
    if (!t)
        return -1;
    a->ct = t;
    a->ctcap = n;
    return 0;
}

static void account(struct acc *a, uint32_t n, uint64_t t, double dt)
{
    const struct unode *nd = &a->node[n];
    double h = dt / (double)HOUR_MS;

    for (size_t i = 0; i < nd->n; i++) {
        uint32_t j = nd->task[i];
        const struct ujob *u = &a->uj[j];
        double L = load_at(a, j, t), r = a->ct[i].rate;
        if (u->kind == UJ_CPU)
            continue;
        a->busy += r * L * u->intr * (u->gpu_milli / 1000.0) * h;
        if (u->kind == UJ_INFER) {
            a->served += r * L * h;
            a->offered += L * h;
        } else {
            a->steps += r * L * dt / 1000.0 / a->p->step_s;
        }
    }
}

static void piece(struct acc *a, uint32_t n, uint64_t t0, uint64_t t1)
{
    struct unode *nd = &a->node[n];
    double cap[POOL_GPU0 + CRATER_MAX_GPUS_PER_NODE];

    if (t1 <= t0 || !nd->n)
        return;
    if (scratch(a, nd->n) < 0) {
        a->oom = 1;
        return;
    }
    for (size_t i = 0; i < nd->n; i++)
        claims(a, nd->task[i], load_at(a, nd->task[i], t0), &a->ct[i]);
    pools(a, n, cap);
    if (crater_util_solve(cap,
                          POOL_GPU0 + CRATER_MAX_GPUS_PER_NODE,
                          a->ct,
                          nd->n)
        < 0) {
        a->oom = 1;
        return;
    }
    account(a, n, t0, (double)(t1 - t0));
}

/* The next time after t0 (and before t1) the node's state changes by
 * itself: an hour boundary when it runs a service, an idle tail. */
static uint64_t next_break(const struct acc *a,
                           uint32_t n,
                           uint64_t t0,
                           uint64_t t1)
{
    const struct unode *nd = &a->node[n];
    uint64_t b = t1;

    for (size_t i = 0; i < nd->n; i++) {
        uint32_t j = nd->task[i];
        uint64_t h = (t0 / HOUR_MS + 1) * HOUR_MS;
        if (a->uj[j].kind == UJ_INFER && h < b)
            b = h;
        if (a->ut[j].idle_at > t0 && a->ut[j].idle_at < b)
            b = a->ut[j].idle_at;
    }
    return b;
}

/* Integrate node n from where it stands to t, within the window. */
static void integrate(struct acc *a, uint32_t n, uint64_t t)
{
    struct unode *nd = &a->node[n];
    uint64_t from = nd->t > a->w0 ? nd->t : a->w0;
    uint64_t to = t < a->w1 ? t : a->w1;

    while (from < to) {
        uint64_t b = next_break(a, n, from, to);
        piece(a, n, from, b);
        from = b;
    }
    nd->t = t > nd->t ? t : nd->t;
}

/* ---- the replay's hooks
 * ------------------------------------------------------ */

static int node_add(struct unode *nd, uint32_t j)
{
    if (nd->n == nd->cap) {
        size_t c = nd->cap ? 2 * nd->cap : 8;
        uint32_t *v = realloc(nd->task, c * sizeof(*v));
        if (!v)
            return -1;
        nd->task = v;
        nd->cap = c;
    }
    nd->task[nd->n++] = j;
    return 0;
}

static void on_start(void *arg,
                     size_t j,
                     const crater_placement_t *p,
                     uint64_t t)
{
    struct acc *a = arg;
    struct utask *u = &a->ut[j];
    const crater_replay_job_t *job = &a->jobs[j];
    uint64_t busy = job->idle_tail_ms < job->runtime_ms
                        ? job->runtime_ms - job->idle_tail_ms
                        : 0; /* the replay clamps a tail to the run */

    integrate(a, p->node, t);
    u->p = *p;
    u->start_ms = t;
    u->running = true;
    u->idle_at = UINT64_MAX;
    if (job->idle_tail_ms)
        u->idle_at = t + (busy > u->ran_ms ? busy - u->ran_ms : 0);
    if (node_add(&a->node[p->node], (uint32_t)j) < 0)
        a->oom = 1;
}

static void on_end(void *arg, size_t j, uint64_t t)
{
    struct acc *a = arg;
    struct utask *u = &a->ut[j];
    struct unode *nd = &a->node[u->p.node];

    integrate(a, u->p.node, t);
    for (size_t i = 0; i < nd->n; i++)
        if (nd->task[i] == j) {
            nd->task[i] = nd->task[--nd->n];
            break;
        }
    u->ran_ms += t - u->start_ms;
    u->running = false;
}

/* ---- a run
 * ---------------------------------------------------------------------- */

const char *crater_util_policy_name(crater_util_policy_t p)
{
    static const char *const names[] = {"gpu-count", "k8s-spread", "crater"};

    return p < CRATER_UTIL_NPOLICY ? names[p] : "?";
}

static crater_sched_t *make_sched(const crater_util_params_t *p,
                                  crater_util_policy_t pol,
                                  const crater_cluster_t *cl,
                                  const crater_kb_t *kb,
                                  crater_error_t *err)
{
    crater_config_t cfg;
    crater_sched_t *s;

    if (crater_config_defaults(&cfg) < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory"), NULL;
    cfg.scheduler.gpu_context_overhead = 0;      /* milli mode: exact shares */
    cfg.scheduler.preemption_min_runtime_ms = 0; /* as crater sim replay */
    if (pol == CRATER_UTIL_CRATER && p->overcommit > 1)
        cfg.scheduler.overcommit_ratio = fmin(p->overcommit, 4);
    cfg.scheduler.gpu_share.enabled =
        pol == CRATER_UTIL_CRATER && p->profile_gpu && p->max_util > 0;
    cfg.scheduler.gpu_share.max_util = fmin(p->max_util, 1);
    cfg.scheduler.gpu_share.memory_margin = p->mem_margin;
    s = crater_sched_create(&cfg, kb, NULL);
    crater_config_clear(&cfg);
    if (!s)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory"), NULL;
    if (pol != CRATER_UTIL_CRATER) {
        crater_sched_weights_t w = {.joint = pol == CRATER_UTIL_K8S};
        crater_sched_set_weights(s, &w); /* gpu-count: all 0, first fit */
    }
    for (size_t i = 0; i < cl->nnodes; i++)
        if (crater_sched_add_node(s, &cl->nodes[i], err) < 0) {
            crater_sched_destroy(s);
            return NULL;
        }
    return s;
}

struct world {
    crater_kb_t *kb;
    crater_synth_mix_t mix;
    crater_cluster_t *cl;
    crater_sched_t *s;
    crater_replay_job_t *jobs;
    struct ujob *uj;
    double gpus;
};

static void world_free(struct world *w)
{
    free(w->jobs);
    free(w->uj);
    crater_sched_destroy(w->s);
    crater_cluster_destroy(w->cl);
    crater_synth_mix_clear(&w->mix);
    crater_kb_destroy(w->kb);
}

static int world_build(const crater_util_params_t *p,
                       crater_util_policy_t pol,
                       const char *dir,
                       struct world *w,
                       crater_error_t *err)
{
    crater_synth_spec_t sp = {.nodes = p->nodes,
                              .jobs = p->jobs,
                              .seed = p->seed,
                              .load = 1.0};
    crater_trace_node_t *tn = NULL;
    int rc;

    if (!(w->kb = crater_kb_create()))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (crater_synth_mix_load(&sp, dir, &w->mix, err) < 0
        || crater_synth_nodes(&sp, &w->mix, &tn, err) < 0)
        return -1;
    if (p->whole_only)
        crater__util_mix_whole(&w->mix);
    rc = crater_openb_cluster(tn, p->nodes, w->kb, 1, &w->cl, err);
    crater_trace_nodes_free(tn);
    if (rc < 0 || crater__util_add_storage(w->cl, p->node_disk, err) < 0
        || !(w->s = make_sched(p, pol, w->cl, w->kb, err)))
        return -1;
    for (size_t i = 0; i < w->cl->nnodes; i++)
        w->gpus += (double)w->cl->nodes[i].ngpus;
    return crater__util_jobs(p,
                             pol,
                             &w->mix,
                             w->s,
                             w->gpus,
                             &w->jobs,
                             &w->uj,
                             err);
}

static void window_of(struct acc *a, const crater_replay_job_t *j, size_t n)
{
    a->w0 = UINT64_MAX;
    a->w1 = 0;
    for (size_t i = 0; i < n; i++) {
        a->w0 = j[i].submit_ms < a->w0 ? j[i].submit_ms : a->w0;
        a->w1 = j[i].submit_ms > a->w1 ? j[i].submit_ms : a->w1;
    }
}

static void acc_free(struct acc *a)
{
    for (size_t i = 0; a->node && i < a->nnodes; i++)
        free(a->node[i].task);
    free(a->node);
    free(a->ut);
    free(a->ct);
}

static int replay(struct world *w,
                  struct acc *a,
                  const crater_util_params_t *p,
                  crater_util_policy_t pol,
                  crater_util_result_t *res,
                  crater_error_t *err)
{
    crater_replay_opts_t o = {
        .preempt = pol == CRATER_UTIL_CRATER,
        .cluster = w->cl,
        .on_start = on_start,
        .on_start_arg = a,
        .on_end = on_end,
        .on_end_arg = a,
        .idle_reclaim_ms = pol == CRATER_UTIL_CRATER ? p->idle_reclaim_ms : 0,
    };

    if (crater_replay_run(w->s, w->jobs, p->jobs, &o, &res->rep, err) < 0)
        return -1;
    for (uint32_t n = 0; n < a->nnodes; n++)
        integrate(a, n, a->w1);
    if (a->oom)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    return 0;
}

static void results(const struct world *w,
                    const struct acc *a,
                    crater_util_result_t *res)
{
    double h = (double)(a->w1 - a->w0) / (double)HOUR_MS;

    res->window_h = h;
    res->gpu_alloc = res->rep.util_gpu_alloc;
    res->gpu_measured = h > 0 ? a->busy / (w->gpus * h) : 0;
    res->steps_per_h = h > 0 ? a->steps / h : 0;
    res->infer_served = a->offered > 0 ? a->served / a->offered : 1;
    res->offered =
        crater_replay_offered_load(w->jobs, (size_t)a->p->jobs, w->gpus);
}

int crater_util_run(const crater_util_params_t *p,
                    crater_util_policy_t pol,
                    const char *dir,
                    crater_util_result_t *res,
                    crater_error_t *err)
{
    struct world w = {0};
    struct acc a = {.p = p};
    int rc = -1;

    memset(res, 0, sizeof(*res));
    res->policy = pol;
    if (world_build(p, pol, dir, &w, err) < 0)
        goto out;
    a.jobs = w.jobs, a.uj = w.uj, a.cl = w.cl, a.nnodes = w.cl->nnodes;
    a.ut = calloc(p->jobs, sizeof(*a.ut));
    a.node = calloc(a.nnodes, sizeof(*a.node));
    if (!a.ut || !a.node) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        goto out;
    }
    window_of(&a, w.jobs, p->jobs);
    if (replay(&w, &a, p, pol, res, err) < 0)
        goto out;
    results(&w, &a, res);
    rc = 0;
out:
    acc_free(&a);
    world_free(&w);
    return rc;
}

void crater_util_result_clear(crater_util_result_t *res)
{
    crater_replay_result_clear(&res->rep);
}

static json_t *waits_json(const crater_replay_result_t *r)
{
    json_t *o = json_object();

    for (int c = 0; o && c < CRATER_REPLAY_NCLASS; c++)
        json_object_set_new(o,
                            crater_replay_class_name(c),
                            json_pack("{s:f,s:f,s:I}",
                                      "p50_s",
                                      r->cls[c].wait_p50,
                                      "p99_s",
                                      r->cls[c].wait_p99,
                                      "jobs",
                                      (json_int_t)r->cls[c].jobs));
    return o;
}

json_t *crater_util_result_json(const crater_util_result_t *res)
{
    return json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:I,s:I,s:o}",
                     "policy",
                     crater_util_policy_name(res->policy),
                     "window_h",
                     res->window_h,
                     "offered_load",
                     res->offered,
                     "gpu_alloc",
                     res->gpu_alloc,
                     "gpu_measured",
                     res->gpu_measured,
                     "steps_per_h",
                     res->steps_per_h,
                     "inference_served",
                     res->infer_served,
                     "preemptions",
                     (json_int_t)res->rep.preemptions,
                     "idle_reclaims",
                     (json_int_t)res->rep.idle_reclaims,
                     "never_started",
                     (json_int_t)res->rep.never_started,
                     "waits",
                     waits_json(&res->rep));
}
