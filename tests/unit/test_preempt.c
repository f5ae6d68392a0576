/* test_preempt.c - the preemption planner: it never picks a
 * non-preemptible task or one of equal or higher priority, it returns a
 * minimal set, it prefers lower victim priority, then less lost work
 * (with an injected clock and checkpoints), then fewer victims, it leaves
 * the state unchanged, and its plan works when executed. */
#include <check.h>
#include <string.h>

#include "crater/hwfile.h"
#include "crater/sched.h"

#define EX(f) CRATER_SOURCE_DIR "/examples/hardware/" f

static crater_kb_t *kb;
static crater_config_t cfg;
static uint64_t now; /* the injected clock, ms */

static uint64_t clock_now(void *arg)
{
    return *(uint64_t *)arg;
}

static void setup(void)
{
    kb = crater_kb_create();
    ck_assert_int_eq(crater_config_defaults(&cfg), 0);
    cfg.scheduler.gpu_context_overhead = 0;
    cfg.scheduler.preemption_min_runtime_ms = 0; /* tested on its own */
    now = 0;
}

static void teardown(void)
{
    crater_config_clear(&cfg);
    crater_kb_destroy(kb);
}

/* Load a hardware file; cordon all nodes but the first `keep`. */
static crater_sched_t *load(const char *path, uint32_t keep)
{
    crater_sched_env_t env = {.now_ms = clock_now, .arg = &now};
    crater_sched_t *s = crater_sched_create(&cfg, kb, &env);
    crater_cluster_t *cl = NULL;
    crater_error_t err;

    ck_assert_msg(crater_hw_load(path, kb, &cl, &err) == 0, "%s", err.text);
    for (size_t i = 0; i < cl->nnodes; i++)
        ck_assert_msg(crater_sched_add_node(s, &cl->nodes[i], &err) >= 0,
                      "%s",
                      err.text);
    crater_cluster_destroy(cl);
    for (uint32_t n = keep; n < crater_sched_node_count(s); n++)
        crater_sched_set_cordoned(s, n, true);
    return s;
}

/* Commit a hand-made task on one GPU at time t: a slice of mib, or the
 * whole GPU when mib is 0 (81920 MiB on the A100 80GB cards). */
static void task(crater_sched_t *s,
                 uint64_t id,
                 uint32_t node,
                 uint8_t gpu,
                 uint32_t mib,
                 int32_t prio,
                 bool preemptible,
                 uint64_t t)
{
    crater_request_t r = {.priority = prio, .preemptible = preemptible};
    crater_placement_t p = {.node = node,
                            .ngpus = 1,
                            .gpu = {gpu},
                            .gpu_mib = {mib ? mib : 81920},
                            .whole = mib == 0,
                            .numa = -1,
                            .storage = -1};
    crater_error_t err;

    now = t;
    ck_assert_msg(crater_sched_commit(s, id, &r, &p, &err) == 0,
                  "%s",
                  err.text);
}

/* One whole GPU, priority 10. */
static crater_request_t whole1(void)
{
    crater_request_t r = {.gpus = 1,
                          .cpu_milli = 1000,
                          .mem_bytes = 1ull << 30,
                          .numa = CRATER_NUMA_PREFERRED,
                          .priority = 10};
    return r;
}

static void expect_victims(const crater_preempt_plan_t *p,
                           uint32_t node,
                           uint32_t n,
                           const uint64_t *ids)
{
    ck_assert_uint_eq(p->placement.node, node);
    ck_assert_uint_eq(p->nvictims, n);
    for (uint32_t i = 0; i < n; i++)
        ck_assert_uint_eq(p->victims[i], ids[i]);
}

/* a2-a100: GPU 0 held by a non-preemptible task, GPU 1 by a preemptible
 * one: only the second may go; with both protected there is no plan. */
START_TEST(never_non_preemptible)
{
    crater_sched_t *s = load(EX("a2-a100.yaml"), 1);
    crater_request_t r = whole1();
    crater_preempt_plan_t plan;
    crater_error_t err;

    task(s, 1, 0, 0, 0, 0, false, 0);
    task(s, 2, 0, 1, 0, 5, true, 0);
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    expect_victims(&plan, 0, 1, (uint64_t[]){2});
    ck_assert_int_eq(plan.max_priority, 5);
    ck_assert_uint_eq(plan.placement.gpu[0], 1);
    ck_assert_int_eq(crater_sched_release(s, 2, &err), 0);
    task(s, 2, 0, 1, 0, 0, false, 0);
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNSCHED);
    ck_assert_str_eq(err.text,
                     "no preemption plan: none of the 2 running task(s) may "
                     "be preempted (2 non-preemptible)");
    crater_sched_destroy(s);
}
END_TEST

/* crater_sched_retag: a warm inference replica (low priority, preemptible)
 * promoted into traffic is no victim any more; demoted again, it is. The
 * charges stay. */
START_TEST(retag_moves_a_task_in_and_out_of_reach)
{
    crater_sched_t *s = load(EX("a2-a100.yaml"), 1);
    crater_request_t r = whole1();
    crater_preempt_plan_t plan;
    crater_placement_t pl;
    crater_error_t err;

    task(s, 1, 0, 0, 0, 0, false, 0);
    task(s, 2, 0, 1, 0, -1000, true, 0);
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    expect_victims(&plan, 0, 1, (uint64_t[]){2});
    ck_assert_int_eq(crater_sched_retag(s, 2, 0, false, &err), 0);
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNSCHED);
    ck_assert_int_eq(crater_sched_place(s, &r, &pl, &err), -1); /* held */
    ck_assert_int_eq(crater_sched_retag(s, 2, -1000, true, &err), 0);
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    expect_victims(&plan, 0, 1, (uint64_t[]){2});
    ck_assert_int_eq(plan.max_priority, -1000);
    ck_assert_int_eq(crater_sched_retag(s, 9, 0, false, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(never_equal_or_higher_priority)
{
    crater_sched_t *s = load(EX("a2-a100.yaml"), 1);
    crater_request_t r = whole1();
    crater_preempt_plan_t plan;
    crater_error_t err;

    task(s, 1, 0, 0, 0, 10, true, 0); /* equal: never */
    task(s, 2, 0, 1, 0, 11, true, 0); /* higher: never */
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), -1);
    ck_assert_str_eq(err.text,
                     "no preemption plan: none of the 2 running task(s) may "
                     "be preempted (2 at priority 10 or above)");
    r.priority = 11; /* now task 1 is below */
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    expect_victims(&plan, 0, 1, (uint64_t[]){1});
    crater_sched_destroy(s);
}
END_TEST

/* Candidates that exist but cannot free enough: a clear error. */
START_TEST(no_release_makes_it_fit)
{
    crater_sched_t *s = load(EX("a2-a100.yaml"), 1);
    crater_request_t r = whole1();
    crater_preempt_plan_t plan;
    crater_error_t err;

    task(s, 1, 0, 0, 0, 0, false, 0);
    task(s, 2, 0, 1, 40000, 1, true, 0);
    task(s, 3, 0, 1, 40000, 0, false, 0);
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNSCHED);
    ck_assert_str_eq(err.text,
                     "no preemption plan: no preemptible lower-priority "
                     "tasks whose release would make it fit (1 candidate "
                     "task(s) below priority 10 on 1 node(s); not "
                     "candidates: 2 non-preemptible)");
    crater_sched_destroy(s);
}
END_TEST

/* GPU 0 full of slices (10000 + 40000 + 30000 of 81920 MiB), GPU 1 held.
 * Cheapest first: task 1 (lost least), then task 2 makes 40000 MiB fit;
 * putting task 1 back still fits, so the set is {2} alone. */
START_TEST(minimal_set)
{
    crater_sched_t *s = load(EX("a2-a100.yaml"), 1);
    crater_request_t r = whole1();
    crater_preempt_plan_t plan;
    crater_error_t err;

    task(s, 9, 0, 1, 0, 0, false, 0);
    task(s, 3, 0, 0, 30000, 1, true, 100);
    task(s, 2, 0, 0, 40000, 1, true, 200);
    task(s, 1, 0, 0, 10000, 1, true, 300);
    now = 1000;
    r.slice_mib = 40000;
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    expect_victims(&plan, 0, 1, (uint64_t[]){2});
    ck_assert_uint_eq(plan.lost_ms, 800);
    ck_assert_uint_eq(plan.placement.gpu[0], 0);
    ck_assert_uint_eq(plan.placement.gpu_mib[0], 40000);
    /* 60000 MiB needs 58080 freed: only tasks 2 and 3 together do it
     * (task 1 is released first, then put back) */
    r.slice_mib = 60000;
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    expect_victims(&plan, 0, 2, (uint64_t[]){2, 3});
    ck_assert_uint_eq(plan.lost_ms, 1700);
    crater_sched_destroy(s);
}
END_TEST

/* On one node, either GPU's task would do: the lower priority goes first
 * even though it has lost more work; at equal priority, less lost work. */
START_TEST(within_node_priority_then_lost_work)
{
    crater_sched_t *s = load(EX("a2-a100.yaml"), 1);
    crater_request_t r = whole1();
    crater_preempt_plan_t plan;
    crater_error_t err;

    task(s, 1, 0, 0, 0, 2, true, 990);
    task(s, 2, 0, 1, 0, 1, true, 0);
    now = 1000;
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    expect_victims(&plan, 0, 1, (uint64_t[]){2});
    ck_assert_uint_eq(plan.placement.gpu[0], 1);
    ck_assert_int_eq(crater_sched_release(s, 1, &err), 0);
    ck_assert_int_eq(crater_sched_release(s, 2, &err), 0);
    task(s, 1, 0, 0, 0, 1, true, 0);  /* lost 1000 */
    task(s, 2, 0, 1, 0, 1, true, 10); /* lost 990 */
    now = 1000;
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    expect_victims(&plan, 0, 1, (uint64_t[]){2});
    ck_assert_uint_eq(plan.placement.gpu[0], 1);
    ck_assert_uint_eq(plan.lost_ms, 990);
    crater_sched_destroy(s);
}
END_TEST

/* cluster.yaml, a100-0 and a100-1 only: GPUs 1-7 of both held by
 * protected tasks; the GPU 0 tasks decide. */
static crater_sched_t *two_nodes(void)
{
    crater_sched_t *s = load(EX("cluster.yaml"), 2);
    uint64_t id = 100;

    for (uint32_t n = 0; n < 2; n++)
        for (uint8_t g = 1; g < 8; g++)
            task(s, id++, n, g, 0, 0, false, 0);
    return s;
}

START_TEST(prefers_lower_priority_then_less_lost_work)
{
    crater_sched_t *s = two_nodes();
    crater_request_t r = whole1();
    crater_preempt_plan_t plan;
    crater_error_t err;

    task(s, 1, 0, 0, 0, 2, true, 990); /* lost 10, priority 2 */
    task(s, 2, 1, 0, 0, 1, true, 0);   /* lost 1000, priority 1 */
    now = 1000;
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    expect_victims(&plan, 1, 1, (uint64_t[]){2});
    ck_assert_int_eq(plan.max_priority, 1);
    ck_assert_uint_eq(plan.lost_ms, 1000);
    /* same priority: less lost work wins */
    ck_assert_int_eq(crater_sched_release(s, 1, &err), 0);
    task(s, 1, 0, 0, 0, 1, true, 400); /* lost 600 at t=1000 */
    now = 1000;
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    expect_victims(&plan, 0, 1, (uint64_t[]){1});
    ck_assert_uint_eq(plan.lost_ms, 600);
    /* a checkpoint at 950 makes task 2 lose only 50 */
    ck_assert_int_eq(crater_sched_set_task_checkpoint(s, 2, 950), 0);
    ck_assert_int_eq(crater_sched_set_task_checkpoint(s, 77, 950), -1);
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    expect_victims(&plan, 1, 1, (uint64_t[]){2});
    ck_assert_uint_eq(plan.lost_ms, 50);
    /* a checkpoint older than the start changes nothing */
    ck_assert_int_eq(crater_sched_set_task_checkpoint(s, 2, 0), 0);
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    expect_victims(&plan, 0, 1, (uint64_t[]){1});
    crater_sched_destroy(s);
}
END_TEST

/* Same priority and the same lost work (100): one victim on a100-1 beats
 * two on a100-0 although a100-0 has the lower id. */
START_TEST(prefers_fewer_victims)
{
    crater_sched_t *s = two_nodes();
    crater_request_t r = whole1();
    crater_preempt_plan_t plan;
    crater_error_t err;

    task(s, 1, 0, 0, 10000, 1, true, 950);
    task(s, 2, 0, 0, 10000, 1, true, 950);
    task(s, 3, 1, 0, 10000, 1, true, 900);
    now = 1000;
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    expect_victims(&plan, 1, 1, (uint64_t[]){3});
    ck_assert_uint_eq(plan.lost_ms, 100);
    /* an exact tie goes to the lowest node id */
    ck_assert_int_eq(crater_sched_release(s, 3, &err), 0);
    task(s, 3, 1, 0, 10000, 1, true, 950);
    task(s, 4, 1, 0, 10000, 1, true, 950);
    now = 1000;
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    expect_victims(&plan, 0, 2, (uint64_t[]){1, 2});
    crater_sched_destroy(s);
}
END_TEST

static void probe_all(crater_sched_t *s, crater_placement_t out[3])
{
    crater_request_t pr[3] = {whole1(), whole1(), whole1()};
    crater_error_t err;

    pr[1].slice_mib = 5000;
    pr[2].gpus = 0;
    for (int i = 0; i < 3; i++) {
        memset(&out[i], 0, sizeof(out[i]));
        if (crater_sched_place(s, &pr[i], &out[i], &err) < 0)
            out[i].node = CRATER_SCHED_NO_NODE;
    }
}

/* Planning changes nothing (probes and a second plan agree); executing
 * the plan (release the victims, then place) lands where it said. */
START_TEST(state_unchanged_and_plan_executes)
{
    crater_sched_t *s = two_nodes();
    crater_request_t r = whole1();
    crater_placement_t before[3], after[3], p, q;
    crater_preempt_plan_t plan, again;
    crater_error_t err;

    task(s, 1, 0, 0, 30000, 1, true, 100);
    task(s, 2, 0, 0, 30000, 2, true, 200);
    task(s, 3, 1, 0, 50000, 3, true, 300);
    crater_sched_set_task_checkpoint(s, 1, 500);
    now = 1000;
    probe_all(s, before);
    ck_assert_int_eq(crater_sched_place(s, &r, &p, &err), -1);
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    probe_all(s, after);
    ck_assert_int_eq(memcmp(before, after, sizeof(before)), 0);
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &again, &err), 0);
    ck_assert_int_eq(memcmp(&plan, &again, sizeof(plan)), 0);
    expect_victims(&plan, 0, 2, (uint64_t[]){1, 2});
    ck_assert_uint_eq(plan.lost_ms, 500 + 800);
    for (uint32_t i = 0; i < plan.nvictims; i++)
        ck_assert_int_eq(crater_sched_release(s, plan.victims[i], &err), 0);
    ck_assert_int_eq(crater_sched_place(s, &r, &p, &err), 0);
    ck_assert_int_eq(crater_sched_place_bruteforce(s, &r, &q, &err), 0);
    ck_assert_int_eq(memcmp(&p, &plan.placement, sizeof(p)), 0);
    ck_assert_int_eq(memcmp(&q, &plan.placement, sizeof(q)), 0);
    ck_assert_int_eq(crater_sched_commit(s, 50, &r, &p, &err), 0);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(fits_already_needs_no_victims)
{
    crater_sched_t *s = two_nodes();
    crater_request_t r = whole1();
    crater_placement_t p;
    crater_preempt_plan_t plan;
    crater_error_t err;

    task(s, 1, 1, 0, 0, 1, true, 0);
    ck_assert_int_eq(crater_sched_place(s, &r, &p, &err), 0);
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    ck_assert_uint_eq(plan.nvictims, 0);
    ck_assert_int_eq(plan.max_priority, INT32_MIN);
    ck_assert_int_eq(memcmp(&p, &plan.placement, sizeof(p)), 0);
    crater_sched_destroy(s);
}
END_TEST

/* Issue 13, preemption thrash: short high-priority jobs preempted the same
 * job as soon as it was back. A task younger than preemptionMinRuntime is
 * no victim; the plan moves to an older one, or there is none and the
 * reason says why; once it is old enough it may go. */
START_TEST(min_runtime_protects_a_victim)
{
    crater_sched_t *s;
    crater_request_t r = whole1();
    crater_preempt_plan_t plan;
    crater_error_t err;

    cfg.scheduler.preemption_min_runtime_ms = 60000;
    s = load(EX("a2-a100.yaml"), 1);
    task(s, 1, 0, 0, 0, 0, true, 0);     /* old */
    task(s, 2, 0, 1, 0, 0, true, 50000); /* back 10 s ago */
    now = 60000;
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    expect_victims(&plan, 0, 1, (uint64_t[]){1}); /* else 2: less lost */
    ck_assert_int_eq(crater_sched_release(s, 1, &err), 0);
    task(s, 1, 0, 0, 0, 0, false, 0);
    now = 60000;
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), -1);
    ck_assert_str_eq(err.text,
                     "no preemption plan: none of the 2 running task(s) may "
                     "be preempted (1 non-preemptible, 1 running for less "
                     "than preemptionMinRuntime (60s))");
    now = 110000; /* task 2 has run 60 s */
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    expect_victims(&plan, 0, 1, (uint64_t[]){2});
    crater_sched_destroy(s);
}
END_TEST

/* The planner's per-node bound is kept between calls; a protected task
 * that comes of age must still be seen (the bound is not kept while a
 * candidate is protected). */
START_TEST(min_runtime_bound_not_stale)
{
    crater_sched_t *s;
    crater_request_t r = whole1();
    crater_preempt_plan_t plan;
    crater_error_t err;

    cfg.scheduler.preemption_min_runtime_ms = 1000;
    s = load(EX("a2-a100.yaml"), 1);
    task(s, 1, 0, 0, 0, 0, false, 0);
    task(s, 2, 0, 1, 0, 0, true, 0);
    now = 500;
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), -1);
    now = 1000;
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    expect_victims(&plan, 0, 1, (uint64_t[]){2});
    crater_sched_destroy(s);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("preempt");
    TCase *tc = tcase_create("planner");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, never_non_preemptible);
    tcase_add_test(tc, retag_moves_a_task_in_and_out_of_reach);
    tcase_add_test(tc, never_equal_or_higher_priority);
    tcase_add_test(tc, no_release_makes_it_fit);
    tcase_add_test(tc, minimal_set);
    tcase_add_test(tc, within_node_priority_then_lost_work);
    tcase_add_test(tc, prefers_lower_priority_then_less_lost_work);
    tcase_add_test(tc, prefers_fewer_victims);
    tcase_add_test(tc, state_unchanged_and_plan_executes);
    tcase_add_test(tc, fits_already_needs_no_victims);
    tcase_add_test(tc, min_runtime_protects_a_victim);
    tcase_add_test(tc, min_runtime_bound_not_stale);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
