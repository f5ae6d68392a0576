/* test_pass.c - one scheduling pass, two hosts: the differential test of
 * issue 13 at unit level.
 *
 * The same job list goes through `crater sim replay` (crater_replay_run,
 * replay.c's ops) and through a second host written here the way craterd
 * drives the pass (loop.c's ops: pending reasons kept, dependencies asked
 * through ready, fair-share input from the placed tasks in
 * GPU-equivalents, expected ends from the running tasks), on its own core
 * with the same clock of events. Both must start the same jobs on the
 * same nodes and GPUs at the same times in the same order: keeping
 * reasons (which makes the core build explanations and the pass ask the
 * planner below its victim floor) and fair-share input must change no
 * decision. Random workloads with slices, priorities, time limits (EASY
 * reservations) and jobs that never fit. craterd itself is not started
 * here: its ops need agents and a store (the integration tests cover
 * them); this checks that the pass does not depend on which host runs it.
 * Preemption is left out: craterd's victims stop asynchronously, which a
 * host of this size would only imitate.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/pass.h"
#include "crater/replay.h"

#define NJOBS 160

struct start {
    size_t job;
    uint32_t node, ngpus;
    uint8_t gpu[CRATER_MAX_GPUS_PER_NODE];
    uint32_t mib[CRATER_MAX_GPUS_PER_NODE];
    uint64_t t;
};

struct log {
    struct start v[4 * NJOBS];
    size_t n;
};

static crater_kb_t *kb;
static crater_cluster_t *cl;

static void record(void *arg, size_t j, const crater_placement_t *p, uint64_t t)
{
    struct log *l = arg;
    struct start *s = &l->v[l->n++];

    ck_assert_uint_lt(l->n, 4 * NJOBS);
    memset(s, 0, sizeof(*s));
    s->job = j;
    s->node = p->node;
    s->ngpus = p->ngpus;
    memcpy(s->gpu, p->gpu, p->ngpus);
    memcpy(s->mib, p->gpu_mib, p->ngpus * sizeof(*s->mib));
    s->t = t;
}

/* ---- the craterd-like host ----------------------------------------------- */

struct host {
    crater_sched_t *s;
    crater_queue_t *q;
    crater_pass_t *pass;
    const crater_replay_job_t *jobs;
    size_t n;
    int st[NJOBS]; /* 0 future, 1 pending, 2 running, 3 done */
    uint64_t end[NJOBS], now;
    crater_task_end_t ends[NJOBS];
    crater_placement_t pl[NJOBS];
    crater_tenant_usage_t usage;
    struct log *log;
    size_t reasons;
};

static int h_job(void *arg, uint64_t id, crater_pass_job_t *out)
{
    struct host *h = arg;
    size_t j = id - 1;

    if (h->st[j] != 1)
        return 0;
    out->req = &h->jobs[j].req;
    out->replicas = 1;
    out->task = id;
    out->time_limit_ms = h->jobs[j].time_limit_ms;
    return 1;
}

static int h_ready(void *arg, uint64_t id, crater_error_t *why)
{
    (void)arg;
    (void)id;
    (void)why;
    return 1; /* no job here names another in "after" */
}

static int h_bind(void *arg,
                  uint64_t id,
                  const crater_placement_t *pl,
                  uint32_t n,
                  crater_error_t *err)
{
    struct host *h = arg;
    size_t j = id - 1;
    uint64_t run = h->jobs[j].runtime_ms, lim = h->jobs[j].time_limit_ms;

    (void)err;
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(crater_queue_remove(h->q, id, NULL), 0);
    h->st[j] = 2;
    h->pl[j] = *pl;
    h->end[j] = h->now + (lim && lim < run ? lim : run);
    record(h->log, j, pl, h->now);
    return 0;
}

static int h_preempt(void *arg,
                     uint64_t id,
                     const crater_preempt_plan_t *plan,
                     crater_error_t *err)
{
    (void)arg;
    (void)id;
    (void)plan;
    (void)err;
    ck_abort_msg("no job is preemptible in these workloads");
    return -1;
}

static void h_pending(void *arg,
                      uint64_t id,
                      crater_pass_wait_t kind,
                      const crater_error_t *why)
{
    struct host *h = arg;

    (void)id;
    (void)kind;
    ck_assert(why->text[0] != '\0'); /* a reason, always */
    h->reasons++;
}

static void h_fail(void *arg, uint64_t id, const char *reason)
{
    (void)arg;
    ck_abort_msg("job %llu failed: %s", (unsigned long long)id, reason);
}

static size_t h_ends(void *arg, const crater_task_end_t **ends)
{
    struct host *h = arg;
    size_t k = 0;

    for (size_t j = 0; j < h->n; j++)
        if (h->st[j] == 2 && h->jobs[j].time_limit_ms)
            h->ends[k++] = (crater_task_end_t){j + 1,
                                               h->end[j] - h->jobs[j].runtime_ms
                                                   + h->jobs[j].time_limit_ms};
    *ends = h->ends;
    return k;
}

/* One tenant, as the replay's queue entries: what it holds in
 * GPU-equivalents, millicores and bytes. */
static int h_share(void *arg, crater_share_input_t *in)
{
    struct host *h = arg;

    memset(in, 0, sizeof(*in));
    memset(&h->usage, 0, sizeof(h->usage));
    h->usage.tenant = "replay";
    for (uint32_t i = 0; i < crater_sched_node_count(h->s); i++)
        in->capacity[CRATER_QDIM_GPU] += crater_sched_node(h->s, i)->ngpus;
    for (size_t j = 0; j < h->n; j++)
        if (h->st[j] == 2)
            h->usage.alloc[CRATER_QDIM_GPU] +=
                crater_sched_gpus_held(h->s, &h->pl[j]);
    in->usage = &h->usage;
    in->nusage = 1;
    return 0;
}

static const crater_pass_ops_t host_ops = {
    .version = CRATER_PASS_OPS_VERSION,
    .job = h_job,
    .ready = h_ready,
    .bind = h_bind,
    .preempt = h_preempt,
    .pending = h_pending,
    .fail = h_fail,
    .ends = h_ends,
    .share = h_share,
};

static void h_enqueue(struct host *h, size_t j)
{
    const crater_replay_job_t *job = &h->jobs[j];
    uint64_t run = job->runtime_ms, lim = job->time_limit_ms;
    crater_queue_entry_t e = {
        .id = j + 1,
        .tenant = "replay",
        .priority = job->req.priority,
        .submit_ms = job->submit_ms,
        .est_runtime_ms = lim && lim < run ? lim : run,
    };

    e.demand[CRATER_QDIM_GPU] = job->gpu_milli / 1000.0;
    ck_assert_int_eq(crater_queue_push(h->q, &e, NULL), 0);
    ck_assert_int_eq(crater_pass_queued(h->pass, e.id, NULL), 0);
    h->st[j] = 1;
}

/* The next event time: an arrival or a departure, UINT64_MAX none. */
static uint64_t h_next(const struct host *h)
{
    uint64_t t = UINT64_MAX;

    for (size_t j = 0; j < h->n; j++) {
        if (h->st[j] == 0 && h->jobs[j].submit_ms < t)
            t = h->jobs[j].submit_ms;
        if (h->st[j] == 2 && h->end[j] < t)
            t = h->end[j];
    }
    return t;
}

/* Departures, then arrivals in job order (jobs are sorted by submit
 * time), then one pass: the replay's event, by hand. */
static void h_event(struct host *h, uint64_t t)
{
    bool released = false;
    crater_error_t err;
    int rc;

    h->now = t;
    for (size_t j = 0; j < h->n; j++)
        if (h->st[j] == 2 && h->end[j] == t) {
            ck_assert_int_eq(crater_sched_release(h->s, j + 1, NULL), 0);
            h->st[j] = 3;
            released = true;
        }
    for (size_t j = 0; j < h->n; j++)
        if (h->st[j] == 0 && h->jobs[j].submit_ms == t)
            h_enqueue(h, j);
    if (released)
        crater_pass_capacity_changed(h->pass);
    rc = crater_pass_run(h->pass, t, &err);
    ck_assert_msg(rc == 0, "%s", err.text);
}

static void host_run(crater_sched_t *s,
                     const crater_replay_job_t *jobs,
                     size_t n,
                     struct log *log)
{
    static struct host h;
    crater_pass_params_t prm = {.preempt = true, .backfill = true};
    uint64_t t;

    memset(&h, 0, sizeof(h));
    h.s = s;
    h.jobs = jobs;
    h.n = n;
    h.log = log;
    h.q = crater_queue_create();
    h.pass = crater_pass_create(s, h.q, &prm, &host_ops, &h);
    ck_assert(h.q && h.pass);
    while ((t = h_next(&h)) != UINT64_MAX)
        h_event(&h, t);
    ck_assert_uint_gt(h.reasons, 0);
    crater_pass_destroy(h.pass);
    crater_queue_destroy(h.q);
}

/* ---- workloads ----------------------------------------------------------- */

static void make_cluster(void)
{
    crater_trace_node_t t[3];
    crater_error_t err;
    const uint32_t gpus[3] = {8, 4, 2};

    for (size_t i = 0; i < 3; i++) {
        memset(&t[i], 0, sizeof(t[i]));
        snprintf(t[i].name, sizeof(t[i].name), "n%zu", i);
        t[i].cpu_milli = 64000;
        t[i].memory_mib = 262144;
        t[i].gpus = gpus[i];
        snprintf(t[i].model, sizeof(t[i].model), i == 2 ? "T4" : "V100M16");
    }
    ck_assert_msg(crater_openb_cluster(t, 3, kb, 1, &cl, &err) == 0,
                  "%s",
                  err.text);
}

static void setup(void)
{
    kb = crater_kb_create();
    make_cluster();
}

static void teardown(void)
{
    crater_cluster_destroy(cl);
    crater_kb_destroy(kb);
}

static crater_sched_t *sched(void)
{
    crater_error_t err;
    crater_sched_t *s =
        crater_replay_sched_create(cl, kb, CRATER_REPLAY_CRATER, 1, &err);

    ck_assert_msg(s != NULL, "%s", err.text);
    return s;
}

/* A random job list, sorted by submit time: whole-GPU and sliced jobs of
 * the three classes, some too large for any node, half with a time
 * limit (1x or 2x the run time). Nothing is preemptible. */
static void workload(crater_sched_t *s,
                     unsigned seed,
                     crater_replay_job_t *jobs)
{
    static const crater_qos_t qos[3] = {CRATER_QOS_LS,
                                        CRATER_QOS_BURSTABLE,
                                        CRATER_QOS_BE};
    uint64_t t = 0;

    srand(seed);
    for (size_t i = 0; i < NJOBS; i++) {
        crater_trace_pod_t p;
        crater_error_t err;
        memset(&p, 0, sizeof(p));
        snprintf(p.name, sizeof(p.name), "p%zu", i);
        p.cpu_milli = 1000 + (uint32_t)(rand() % 8) * 1000;
        p.memory_mib = 1024 + (uint32_t)(rand() % 16) * 1024;
        p.num_gpu = rand() % 4 ? 1 : 1 + (uint32_t)(rand() % 9);
        p.gpu_milli = p.num_gpu == 1 && rand() % 2 ? 100 + rand() % 900 : 1000;
        p.qos = qos[rand() % 3];
        p.creation = p.scheduled = p.deletion = -1;
        memset(&jobs[i], 0, sizeof(jobs[i]));
        ck_assert_msg(crater_openb_request(s, &p, 1, &jobs[i].req, &err) == 0,
                      "%s",
                      err.text);
        t += (uint64_t)(rand() % 3) * 1000; /* some arrive together */
        jobs[i].submit_ms = t;
        jobs[i].runtime_ms = 1000 + (uint64_t)(rand() % 60) * 1000;
        jobs[i].gpu_milli = p.num_gpu == 1 ? p.gpu_milli : p.num_gpu * 1000;
        crater_replay_job_class(&jobs[i],
                                crater_replay_class_of_qos(p.qos),
                                CRATER_REPLAY_CRATER);
        jobs[i].req.preemptible = false;
        if (rand() % 2)
            jobs[i].time_limit_ms = jobs[i].runtime_ms * (1 + rand() % 2);
    }
}

static void assert_same(const struct log *a, const struct log *b)
{
    ck_assert_uint_eq(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        const struct start *x = &a->v[i], *y = &b->v[i];
        ck_assert_msg(x->job == y->job && x->node == y->node
                          && x->ngpus == y->ngpus && x->t == y->t
                          && memcmp(x->gpu, y->gpu, sizeof(x->gpu)) == 0
                          && memcmp(x->mib, y->mib, sizeof(x->mib)) == 0,
                      "start %zu: sim job %zu node %u t %llu, host job %zu "
                      "node %u t %llu",
                      i,
                      x->job,
                      x->node,
                      (unsigned long long)x->t,
                      y->job,
                      y->node,
                      (unsigned long long)y->t);
    }
}

START_TEST(sim_and_craterd_host_agree)
{
    static crater_replay_job_t jobs[NJOBS];
    static struct log a, b;
    crater_sched_t *s1 = sched(), *s2 = sched();
    crater_replay_opts_t o = {.preempt = true,
                              .backfill = true,
                              .cluster = cl,
                              .on_start = record,
                              .on_start_arg = &a};
    crater_replay_result_t r;
    crater_error_t err;

    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    workload(s1, 1000 + (unsigned)_i, jobs);
    ck_assert_msg(crater_replay_run(s1, jobs, NJOBS, &o, &r, &err) == 0,
                  "%s",
                  err.text);
    ck_assert_uint_gt(a.n, NJOBS / 2);
    host_run(s2, jobs, NJOBS, &b);
    assert_same(&a, &b);
    crater_replay_result_clear(&r);
    crater_sched_destroy(s1);
    crater_sched_destroy(s2);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("pass");
    TCase *tc = tcase_create("differential");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, sim_and_craterd_host_agree, 0, 20);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
