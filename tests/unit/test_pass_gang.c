/* test_pass_gang.c - gangs in the scheduling pass (pass.c): a gang at
 * the head of the queue gets an EASY reservation, so a stream of small
 * jobs cannot keep it out forever (before, gangs reserved nothing: each
 * freed GPU went to the next small job and the gang started only once
 * the stream stopped); a high-priority gang that fits nowhere preempts
 * lower-priority preemptible jobs on several nodes, with victims gone at
 * once (the simulator's host) or stopping later (craterd's), and starts
 * on the capacity they free.
 *
 * The host here is a small event loop over a job list on two 8-GPU A100
 * nodes (examples/hardware/cluster.yaml, the other nodes cordoned). Job
 * j (queue id j + 1) runs its replicas under task ids (j + 1) * 100 + i.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "crater/hwfile.h"
#include "crater/pass.h"

#define EX(f) CRATER_SOURCE_DIR "/examples/hardware/" f
#define MAXJ 1200
#define NEVER UINT64_MAX

enum {
    FUTURE,
    PENDING,
    RUNNING,
    DONE
};

struct job {
    crater_request_t req;
    uint32_t replicas;
    uint64_t submit, runtime, limit;
    int st;
    uint64_t start, end, stop_at; /* stop_at: a preemption's stop */
    uint64_t waiting;             /* victims still stopping for it */
};

struct host {
    crater_sched_t *s;
    crater_queue_t *q;
    crater_pass_t *pass;
    struct job j[MAXJ];
    size_t n;
    uint64_t now;
    bool stop_later; /* craterd: victims stop after 5 ms */
    crater_task_end_t ends[MAXJ * 2];
    uint32_t preempt_ops;
};

static crater_kb_t *kb;
static crater_config_t cfg;

static uint64_t clock_now(void *arg)
{
    return ((struct host *)arg)->now;
}

static void setup(void)
{
    kb = crater_kb_create();
    ck_assert_int_eq(crater_config_defaults(&cfg), 0);
    cfg.scheduler.preemption_min_runtime_ms = 0;
}

static void teardown(void)
{
    crater_config_clear(&cfg);
    crater_kb_destroy(kb);
}

static uint64_t task_of(size_t j, uint32_t i)
{
    return (j + 1) * 100 + i;
}

/* ---- ops ------------------------------------------------------------------
 */

static int h_job(void *arg, uint64_t id, crater_pass_job_t *out)
{
    struct host *h = arg;
    struct job *j = &h->j[id - 1];

    if (j->st != PENDING || j->waiting)
        return 0;
    out->req = &j->req;
    out->replicas = j->replicas;
    out->task = task_of(id - 1, 0);
    out->time_limit_ms = j->limit;
    return 1;
}

static int h_bind(void *arg,
                  uint64_t id,
                  const crater_placement_t *pl,
                  uint32_t n,
                  crater_error_t *err)
{
    struct host *h = arg;
    struct job *j = &h->j[id - 1];

    (void)pl;
    (void)err;
    ck_assert_uint_eq(n, j->replicas);
    ck_assert_int_eq(crater_queue_remove(h->q, id, NULL), 0);
    j->st = RUNNING;
    j->start = h->now;
    j->end = h->now + j->runtime;
    j->stop_at = NEVER;
    return 0;
}

static void push(struct host *h, size_t k)
{
    crater_queue_entry_t e = {.id = k + 1,
                              .tenant = "t",
                              .priority = h->j[k].req.priority,
                              .submit_ms = h->j[k].submit,
                              .est_runtime_ms = h->j[k].runtime};

    ck_assert_int_eq(crater_queue_push(h->q, &e, NULL), 0);
    ck_assert_int_eq(crater_pass_queued(h->pass, e.id, NULL), 0);
    h->j[k].st = PENDING;
}

/* Job k's replicas leave the core; it is queued again (a victim). */
static void evict(struct host *h, size_t k)
{
    for (uint32_t i = 0; i < h->j[k].replicas; i++)
        ck_assert_int_eq(crater_sched_release(h->s, task_of(k, i), NULL), 0);
    push(h, k);
}

static int h_preempt(void *arg,
                     uint64_t id,
                     const crater_preempt_plan_t *plan,
                     crater_error_t *err)
{
    struct host *h = arg;
    uint32_t stopping = 0;

    (void)err;
    h->preempt_ops++;
    for (uint32_t v = 0; v < plan->nvictims; v++) {
        size_t k = plan->victims[v] / 100 - 1;
        ck_assert_int_lt(h->j[k].req.priority, h->j[id - 1].req.priority);
        ck_assert(h->j[k].req.preemptible);
        if (h->j[k].st != RUNNING || h->j[k].stop_at != NEVER)
            continue; /* one of its replicas was named already */
        if (!h->stop_later) {
            evict(h, k);
            continue;
        }
        h->j[k].stop_at = h->now + 5;
        h->j[id - 1].waiting++;
        stopping++;
    }
    return h->stop_later ? (stopping ? 0 : 2) : 1;
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
        for (uint32_t i = 0;
             h->j[j].st == RUNNING && h->j[j].limit && i < h->j[j].replicas;
             i++)
            h->ends[k++] = (crater_task_end_t){task_of(j, i),
                                               h->j[j].start + h->j[j].limit};
    *ends = h->ends;
    return k;
}

static const crater_pass_ops_t ops = {
    .version = CRATER_PASS_OPS_VERSION,
    .job = h_job,
    .bind = h_bind,
    .preempt = h_preempt,
    .fail = h_fail,
    .ends = h_ends,
};

/* ---- the loop -------------------------------------------------------------
 */

static uint64_t next_event(const struct host *h)
{
    uint64_t t = NEVER;

    for (size_t k = 0; k < h->n; k++) {
        const struct job *j = &h->j[k];
        if (j->st == FUTURE && j->submit < t)
            t = j->submit;
        if (j->st == RUNNING && j->end < t)
            t = j->end;
        if (j->st == RUNNING && j->stop_at < t)
            t = j->stop_at;
    }
    return t;
}

/* Ends and stops at t, then arrivals, then one pass (two when a
 * preemption freed capacity at once). */
static void event(struct host *h, uint64_t t)
{
    bool released = false;
    crater_error_t err;
    int rc;

    h->now = t;
    for (size_t k = 0; k < h->n; k++) {
        struct job *j = &h->j[k];
        if (j->st != RUNNING || (j->end != t && j->stop_at != t))
            continue;
        released = true;
        if (j->stop_at == t) {
            for (size_t p = 0; p < h->n; p++)
                if (h->j[p].waiting)
                    h->j[p].waiting--; /* one preemptor in these tests */
            evict(h, k);
            continue;
        }
        for (uint32_t i = 0; i < j->replicas; i++)
            ck_assert_int_eq(crater_sched_release(h->s, task_of(k, i), NULL),
                             0);
        j->st = DONE;
    }
    for (size_t k = 0; k < h->n; k++)
        if (h->j[k].st == FUTURE && h->j[k].submit == t)
            push(h, k);
    if (released)
        crater_pass_capacity_changed(h->pass);
    do
        rc = crater_pass_run(h->pass, t, &err);
    while (rc == 1);
    ck_assert_msg(rc == 0, "%s", err.text);
}

static struct host *host_create(bool backfill)
{
    struct host *h = calloc(1, sizeof(*h));
    crater_sched_env_t env = {.now_ms = clock_now, .arg = h};
    crater_pass_params_t prm = {.preempt = true, .backfill = backfill};
    crater_cluster_t *cl = NULL;
    crater_error_t err;

    h->s = crater_sched_create(&cfg, kb, &env);
    ck_assert_msg(crater_hw_load(EX("cluster.yaml"), kb, &cl, &err) == 0,
                  "%s",
                  err.text);
    for (size_t i = 0; i < cl->nnodes; i++)
        ck_assert(crater_sched_add_node(h->s, &cl->nodes[i], &err) >= 0);
    crater_cluster_destroy(cl);
    for (uint32_t n = 2; n < crater_sched_node_count(h->s); n++)
        crater_sched_set_cordoned(h->s, n, true);
    h->q = crater_queue_create();
    h->pass = crater_pass_create(h->s, h->q, &prm, &ops, h);
    ck_assert(h->q && h->pass);
    return h;
}

static void host_run(struct host *h)
{
    uint64_t t;

    while ((t = next_event(h)) != NEVER)
        event(h, t);
}

static void host_destroy(struct host *h)
{
    crater_pass_destroy(h->pass);
    crater_queue_destroy(h->q);
    crater_sched_destroy(h->s);
    free(h);
}

static struct job *add(struct host *h,
                       uint32_t gpus,
                       uint32_t replicas,
                       int32_t prio,
                       bool preemptible,
                       uint64_t submit,
                       uint64_t runtime)
{
    struct job *j = &h->j[h->n++];

    ck_assert_uint_le(h->n, MAXJ);
    j->req = (crater_request_t){.gpus = gpus,
                                .cpu_milli = 1000,
                                .mem_bytes = 1ull << 30,
                                .numa = CRATER_NUMA_PREFERRED,
                                .priority = prio,
                                .preemptible = preemptible};
    j->replicas = replicas;
    j->submit = submit;
    j->runtime = runtime;
    j->limit = runtime;
    j->stop_at = NEVER;
    return j;
}

/* ---- tests ----------------------------------------------------------------
 */

/* One-GPU jobs of 160 ms arrive every 10 ms from t = 0 to 5000 (so up
 * to 16 run at once, one ending every 10 ms). A gang of two 8-GPU
 * replicas, queued at t = 5 behind the first, needs both nodes empty.
 * Its reservation (the shadow time: 160 ms, when the only job running
 * at its arrival ends) keeps the later jobs, whose limits end after it,
 * off both nodes: it starts at 160. Without a reservation each freed GPU
 * went to the next small job, and the gang started only once the stream
 * had ended (5,160 ms). */
START_TEST(gang_head_not_starved)
{
    struct host *h = host_create(true);
    struct job *gang;
    size_t gi;

    for (uint64_t t = 0; t < 160; t += 10)
        add(h, 1, 1, 0, false, t, 160);
    gi = h->n;
    gang = add(h, 8, 2, 0, false, 5, 100);
    for (uint64_t t = 160; t <= 5000; t += 10)
        add(h, 1, 1, 0, false, t, 160);
    host_run(h);
    ck_assert_int_eq(h->j[gi].st, DONE);
    ck_assert_msg(gang->start == 160,
                  "the gang started at %llu ms: starved by the stream",
                  (unsigned long long)gang->start);
    host_destroy(h);
}
END_TEST

/* Behind a reserved single head, a gang that fits off the head's node
 * starts at once (before, any gang behind a reserved head waited unless
 * it ended by the shadow time). One node is full until 100 ms, the other
 * has 2 GPUs free until 1000 ms. The 8-GPU head reserves the first at
 * 100; a gang of two one-GPU replicas with a long limit takes the two
 * free GPUs of the other at once, and the head still starts at 100. */
START_TEST(gang_behind_head_keeps_off_its_node)
{
    struct host *h = host_create(true);
    struct job *head, *gang;

    add(h, 8, 1, 0, false, 0, 100);
    add(h, 6, 1, 0, false, 0, 1000);
    head = add(h, 8, 1, 0, false, 1, 100);
    gang = add(h, 1, 2, 0, false, 2, 5000);
    host_run(h);
    ck_assert_uint_eq(gang->start, 2);
    ck_assert_uint_eq(head->start, 100);
    host_destroy(h);
}
END_TEST

/* 16 low-priority preemptible one-GPU jobs fill both nodes; a gang of
 * two 8-GPU replicas of higher priority preempts all of them (victims on
 * both nodes, one plan) and starts at once; the victims are requeued and
 * run after it. */
START_TEST(gang_preempts_at_once)
{
    struct host *h = host_create(false);
    struct job *gang;

    for (int k = 0; k < 16; k++)
        add(h, 1, 1, 0, true, 0, 10000);
    gang = add(h, 8, 2, 10, false, 50, 100);
    host_run(h);
    ck_assert_uint_eq(gang->start, 50);
    ck_assert_uint_eq(h->preempt_ops, 1);
    for (int k = 0; k < 16; k++)
        ck_assert_uint_ge(h->j[k].end, 150 + 10000);
    host_destroy(h);
}
END_TEST

/* The same with victims that stop 5 ms after the order (craterd): the
 * gang waits for them, then starts on what they freed. */
START_TEST(gang_preempts_later)
{
    struct host *h = host_create(false);
    struct job *gang;

    h->stop_later = true;
    for (int k = 0; k < 16; k++)
        add(h, 1, 1, 0, true, 0, 10000);
    gang = add(h, 8, 2, 10, false, 50, 100);
    host_run(h);
    ck_assert_uint_eq(gang->start, 55);
    ck_assert_uint_eq(h->preempt_ops, 1);
    host_destroy(h);
}
END_TEST

/* A gang whose replicas need more than the lower-priority jobs give
 * back preempts nobody: all or nothing. */
START_TEST(gang_no_partial_preemption)
{
    struct host *h = host_create(false);
    struct job *gang;

    for (int k = 0; k < 8; k++)
        add(h, 1, 1, 0, true, 0, 1000);
    for (int k = 0; k < 8; k++)
        add(h, 1, 1, 20, false, 0, 1000); /* higher than the gang */
    gang = add(h, 8, 2, 10, false, 50, 100);
    host_run(h);
    ck_assert_uint_eq(h->preempt_ops, 0);
    ck_assert_uint_ge(gang->start, 1000);
    for (int k = 0; k < 8; k++)
        ck_assert_uint_eq(h->j[k].start, 0);
    host_destroy(h);
}
END_TEST

static Suite *suite(void)
{
    Suite *su = suite_create("pass_gang");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, gang_head_not_starved);
    tcase_add_test(tc, gang_behind_head_keeps_off_its_node);
    tcase_add_test(tc, gang_preempts_at_once);
    tcase_add_test(tc, gang_preempts_later);
    tcase_add_test(tc, gang_no_partial_preemption);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
