/* test_reserve.c - EASY backfill on the scheduling core (reserve.h): the
 * head's shadow time from the running tasks' expected ends (tasks with no
 * time limit never end), its extra, the verdict for later jobs (ends
 * before the shadow time; another node; the head's node without its GPUs
 * and within its extra CPU and memory; otherwise refused, or placed again
 * away from the head's node), and that the core is unchanged afterwards.
 */
#include <check.h>
#include <string.h>

#include "crater/reserve.h"
#include "sched_fixture.h"

/* nnodes copies of the 8-GPU H100 node, named h-0, h-1, ... */
static crater_sched_t *nodes(uint32_t nnodes)
{
    crater_sched_t *s = crater_sched_create(&cfg, kb, NULL);
    crater_cluster_t *cl = NULL;
    crater_error_t err;
    char name[16];

    ck_assert_msg(crater_hw_load(EX("h100x8.yaml"), kb, &cl, &err) == 0,
                  "%s",
                  err.text);
    for (uint32_t i = 0; i < nnodes; i++) {
        crater_node_t n = cl->nodes[0];
        snprintf(name, sizeof(name), "h-%u", i);
        n.name = name;
        ck_assert_msg(crater_sched_add_node(s, &n, &err) >= 0, "%s", err.text);
    }
    crater_cluster_destroy(cl);
    return s;
}

/* Run task id with gpus whole GPUs on node (left out: the others). */
static void run_on(crater_sched_t *s, uint64_t id, uint32_t node, uint32_t g)
{
    crater_request_t r = req_slice(g, 0);
    crater_placement_t p;
    crater_error_t err;
    uint32_t n = crater_sched_node_count(s);

    for (uint32_t i = 0; i < n; i++)
        crater_sched_set_cordoned(s, i, i != node);
    ck_assert_msg(crater_sched_place(s, &r, &p, &err) == 0, "%s", err.text);
    ck_assert_int_eq(crater_sched_commit(s, id, &r, &p, &err), 0);
    for (uint32_t i = 0; i < n; i++)
        crater_sched_set_cordoned(s, i, false);
}

static int fits(crater_sched_t *s, crater_request_t r)
{
    crater_placement_t p;

    return crater_sched_place(s, &r, &p, NULL) == 0;
}

START_TEST(shadow_from_time_limits)
{
    crater_sched_t *s = nodes(1);
    crater_request_t head = req_slice(6, 0);
    crater_task_end_t ends[] = {{1, 1000}, {9, 50}}; /* 9: not running */
    crater_reservation_t r;
    crater_error_t err;

    run_on(s, 1, 0, 4); /* ends at 1000 */
    run_on(s, 2, 0, 2); /* no time limit: never ends */
    ck_assert(!fits(s, head));
    ck_assert_int_eq(crater_sched_reserve(s, &head, ends, 2, &r, &err), 0);
    ck_assert_uint_eq(r.w.shadow_ms, 1000);
    ck_assert_uint_eq(r.placement.node, 0);
    ck_assert_uint_eq(r.placement.ngpus, 6);
    ck_assert(r.w.extra[CRATER_QDIM_GPU] == 2); /* outside the head's */
    ck_assert(r.w.extra[CRATER_QDIM_CPU] > 0);
    /* the core is as before: 2 GPUs free, not 3 */
    ck_assert(fits(s, req_slice(2, 0)));
    ck_assert(!fits(s, req_slice(3, 0)));
    /* without the limit nothing ends: no reservation */
    ck_assert_int_eq(crater_sched_reserve(s, &head, ends + 1, 1, &r, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNSCHED);
    crater_sched_destroy(s);
}
END_TEST

/* The earliest node wins; a later end on a lower node loses. */
START_TEST(earliest_node_wins)
{
    crater_sched_t *s = nodes(2);
    crater_request_t head = req_slice(8, 0);
    crater_task_end_t ends[] = {{1, 5000}, {2, 3000}};
    crater_reservation_t r;
    crater_error_t err;

    run_on(s, 1, 0, 8);
    run_on(s, 2, 1, 8);
    ck_assert_int_eq(crater_sched_reserve(s, &head, ends, 2, &r, &err), 0);
    ck_assert_uint_eq(r.w.shadow_ms, 3000);
    ck_assert_uint_eq(r.placement.node, 1);
    crater_sched_destroy(s);
}
END_TEST

/* One node: head 6 GPUs at 1000 (the 2 free GPUs are part of it). */
START_TEST(verdicts_on_the_head_node)
{
    crater_sched_t *s = nodes(1);
    crater_request_t head = req_slice(6, 0), cpu = req_slice(0, 0);
    crater_task_end_t ends[] = {{1, 1000}};
    crater_reservation_t r;
    crater_placement_t p;
    crater_backfill_verdict_t v;
    crater_error_t err;

    run_on(s, 1, 0, 4);
    run_on(s, 2, 0, 2);
    ck_assert_int_eq(crater_sched_reserve(s, &head, ends, 1, &r, &err), 0);
    r.head = 7;
    /* asks for nothing: fits, holds none of the head's GPUs */
    ck_assert_int_eq(crater_sched_place_backfill(s,
                                                 &(crater_request_t){0},
                                                 0,
                                                 0,
                                                 &r,
                                                 &p,
                                                 &v,
                                                 &err),
                     0); /* nothing asked: fits anywhere, uses no GPU */
    ck_assert_int_eq(v, CRATER_BACKFILL_EXTRA);
    /* 1 GPU for 500 ms from 0: gone by the shadow time */
    crater_request_t one = req_slice(1, 0);
    ck_assert_int_eq(crater_sched_place_backfill(s,
                                                 &one,
                                                 0,
                                                 500,
                                                 &r,
                                                 &p,
                                                 &v,
                                                 &err),
                     0);
    ck_assert_int_eq(v, CRATER_BACKFILL_BEFORE_SHADOW);
    /* the boundary is allowed */
    ck_assert_int_eq(crater_sched_place_backfill(s,
                                                 &one,
                                                 0,
                                                 1000,
                                                 &r,
                                                 &p,
                                                 &v,
                                                 &err),
                     0);
    ck_assert_int_eq(v, CRATER_BACKFILL_BEFORE_SHADOW);
    /* longer, or unbounded: it would hold one of the head's GPUs */
    ck_assert_int_eq(crater_sched_place_backfill(s,
                                                 &one,
                                                 0,
                                                 1001,
                                                 &r,
                                                 &p,
                                                 &v,
                                                 &err),
                     1);
    ck_assert_int_eq(v, CRATER_BACKFILL_DENY);
    ck_assert(strstr(err.text, "job 7 at the head") != NULL);
    ck_assert_int_eq(crater_sched_place_backfill(s,
                                                 &one,
                                                 0,
                                                 0,
                                                 &r,
                                                 &p,
                                                 &v,
                                                 &err),
                     1);
    /* CPU only, unbounded: into the extra, which it uses up */
    double cpu_extra = r.w.extra[CRATER_QDIM_CPU];
    cpu.cpu_milli = (uint64_t)cpu_extra / 2 + 1000;
    ck_assert_int_eq(crater_sched_place_backfill(s,
                                                 &cpu,
                                                 0,
                                                 0,
                                                 &r,
                                                 &p,
                                                 &v,
                                                 &err),
                     0);
    ck_assert_int_eq(v, CRATER_BACKFILL_EXTRA);
    ck_assert(r.w.extra[CRATER_QDIM_CPU] == cpu_extra - (double)p.cpu_milli);
    ck_assert_int_eq(crater_sched_place_backfill(s,
                                                 &cpu,
                                                 0,
                                                 0,
                                                 &r,
                                                 &p,
                                                 &v,
                                                 &err),
                     1);
    /* does not fit now at all: -1 */
    crater_request_t three = req_slice(3, 0);
    ck_assert_int_eq(crater_sched_place_backfill(s,
                                                 &three,
                                                 0,
                                                 10,
                                                 &r,
                                                 &p,
                                                 &v,
                                                 &err),
                     -1);
    crater_sched_destroy(s);
}
END_TEST

/* Two nodes: the core would put an unbounded job on the head's node; it
 * is placed on the other one instead, which cannot delay the head. */
START_TEST(placed_away_from_the_head_node)
{
    crater_sched_t *s = nodes(2);
    crater_request_t head = req_slice(8, 0), one = req_slice(1, 0);
    crater_task_end_t ends[] = {{1, 1000}};
    crater_reservation_t r;
    crater_placement_t p;
    crater_backfill_verdict_t v;
    crater_error_t err;

    run_on(s, 1, 0, 6); /* ends at 1000 */
    run_on(s, 2, 1, 6); /* never ends */
    ck_assert_int_eq(crater_sched_reserve(s, &head, ends, 1, &r, &err), 0);
    ck_assert_uint_eq(r.placement.node, 0);
    ck_assert_int_eq(crater_sched_place_backfill(s,
                                                 &one,
                                                 0,
                                                 0,
                                                 &r,
                                                 &p,
                                                 &v,
                                                 &err),
                     0);
    ck_assert_int_eq(v, CRATER_BACKFILL_EXTRA);
    ck_assert_uint_eq(p.node, 1);
    ck_assert_int_eq(crater_sched_commit(s, 3, &one, &p, &err), 0);
    /* node 0 is schedulable again afterwards */
    ck_assert(fits(s, req_slice(2, 0)));
    crater_sched_destroy(s);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("reserve");
    TCase *tc = tcase_create("reserve");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, shadow_from_time_limits);
    tcase_add_test(tc, earliest_node_wins);
    tcase_add_test(tc, verdicts_on_the_head_node);
    tcase_add_test(tc, placed_away_from_the_head_node);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
