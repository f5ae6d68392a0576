/* test_reserve.c - EASY backfill on the scheduling core (reserve.h): the
 * head's shadow time from the running tasks' expected ends (tasks with no
 * time limit never end), its extra, the verdict for later jobs (ends
 * before the shadow time; another node; the head's node without its GPUs
 * and within its extra CPU and memory; otherwise refused, or placed again
 * away from the head's node), and that the core is unchanged afterwards.
 */
#include <check.h>
#include <stdlib.h>
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

/* crater_sched_place_backfill at time 0 for a job of limit ms (0: none);
 * the placement in *p, the verdict in *v, the reason in *err. */
static int bf(crater_sched_t *s,
              const crater_request_t *q,
              uint64_t limit,
              crater_reservation_t *r,
              crater_placement_t *p,
              crater_backfill_verdict_t *v,
              crater_error_t *err)
{
    return crater_sched_place_backfill(s, q, 0, limit, r, p, v, err);
}

/* One node: head 6 GPUs at 1000 (the 2 free GPUs are part of it). */
START_TEST(verdicts_on_the_head_node)
{
    crater_sched_t *s = nodes(1);
    crater_request_t head = req_slice(6, 0), cpu = req_slice(0, 0);
    crater_request_t one = req_slice(1, 0), three = req_slice(3, 0);
    crater_task_end_t ends[] = {{1, 1000}};
    crater_reservation_t r;
    crater_placement_t p;
    crater_backfill_verdict_t v;
    crater_error_t err;
    double cpu_extra;

    run_on(s, 1, 0, 4);
    run_on(s, 2, 0, 2);
    ck_assert_int_eq(crater_sched_reserve(s, &head, ends, 1, &r, &err), 0);
    r.head = 7;
    /* nothing asked: fits anywhere, holds none of the head's GPUs */
    ck_assert_int_eq(bf(s, &(crater_request_t){0}, 0, &r, &p, &v, &err), 0);
    ck_assert_int_eq(v, CRATER_BACKFILL_EXTRA);
    /* 1 GPU for 500 ms from 0: gone by the shadow time */
    ck_assert_int_eq(bf(s, &one, 500, &r, &p, &v, &err), 0);
    ck_assert_int_eq(v, CRATER_BACKFILL_BEFORE_SHADOW);
    /* the boundary is allowed */
    ck_assert_int_eq(bf(s, &one, 1000, &r, &p, &v, &err), 0);
    ck_assert_int_eq(v, CRATER_BACKFILL_BEFORE_SHADOW);
    /* longer, or unbounded: it would hold one of the head's GPUs */
    ck_assert_int_eq(bf(s, &one, 1001, &r, &p, &v, &err), 1);
    ck_assert_int_eq(v, CRATER_BACKFILL_DENY);
    ck_assert(strstr(err.text, "job 7 at the head") != NULL);
    ck_assert_int_eq(bf(s, &one, 0, &r, &p, &v, &err), 1);
    /* CPU only, unbounded: into the extra, which it uses up */
    cpu_extra = r.w.extra[CRATER_QDIM_CPU];
    cpu.cpu_milli = (uint64_t)cpu_extra / 2 + 1000;
    ck_assert_int_eq(bf(s, &cpu, 0, &r, &p, &v, &err), 0);
    ck_assert_int_eq(v, CRATER_BACKFILL_EXTRA);
    ck_assert(r.w.extra[CRATER_QDIM_CPU] == cpu_extra - (double)p.cpu_milli);
    ck_assert_int_eq(bf(s, &cpu, 0, &r, &p, &v, &err), 1);
    /* does not fit now at all: -1 */
    ck_assert_int_eq(bf(s, &three, 10, &r, &p, &v, &err), -1);
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

/* ---- differential: the walk in time order against its definition ------ */

#define RND_NODES 4
#define RND_TASKS 24

struct rnd {
    crater_sched_t *s;
    crater_request_t req[RND_TASKS + 1];
    crater_placement_t pl[RND_TASKS + 1];
    crater_task_end_t ends[RND_TASKS];
    size_t nends;
    uint64_t seed;
};

static uint32_t rnd_next(struct rnd *x, uint32_t n)
{
    x->seed = x->seed * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(x->seed >> 33) % n;
}

/* Random tasks on random nodes; most get an expected end (few distinct
 * times, so that ends tie), some run for ever. */
static void rnd_fill(struct rnd *x)
{
    crater_error_t err;

    x->s = nodes(RND_NODES);
    x->nends = 0;
    for (uint64_t id = 1; id <= RND_TASKS; id++) {
        uint32_t node = rnd_next(x, RND_NODES),
                 n = crater_sched_node_count(x->s);
        x->req[id] = rnd_next(x, 3) ? req_slice(1 + rnd_next(x, 3), 0)
                                    : req_slice(1, 10240);
        for (uint32_t i = 0; i < n; i++)
            crater_sched_set_cordoned(x->s, i, i != node);
        if (crater_sched_place(x->s, &x->req[id], &x->pl[id], NULL) == 0) {
            ck_assert_int_eq(crater_sched_commit(x->s,
                                                 id,
                                                 &x->req[id],
                                                 &x->pl[id],
                                                 &err),
                             0);
            if (rnd_next(x, 5))
                x->ends[x->nends++] =
                    (crater_task_end_t){id, 100 * (1 + rnd_next(x, 4))};
        }
        for (uint32_t i = 0; i < n; i++)
            crater_sched_set_cordoned(x->s, i, false);
    }
}

/* Does head fit on node alone? */
static bool fits_on(crater_sched_t *s,
                    const crater_request_t *head,
                    uint32_t node)
{
    crater_placement_t p;
    bool ok;

    for (uint32_t i = 0; i < RND_NODES; i++)
        crater_sched_set_cordoned(s, i, i != node);
    ok = crater_sched_place(s, head, &p, NULL) == 0;
    for (uint32_t i = 0; i < RND_NODES; i++)
        crater_sched_set_cordoned(s, i, false);
    return ok;
}

/* Tasks ending by t released (sign -1) or committed again (+1). */
static void rnd_release(struct rnd *x, uint64_t t, int sign)
{
    crater_error_t err;

    for (size_t i = 0; i < x->nends; i++) {
        uint64_t id = x->ends[i].task;
        if (x->ends[i].end_ms > t)
            continue;
        if (sign < 0)
            ck_assert_int_eq(crater_sched_release(x->s, id, &err), 0);
        else
            ck_assert_int_eq(crater_sched_commit(x->s,
                                                 id,
                                                 &x->req[id],
                                                 &x->pl[id],
                                                 &err),
                             0);
    }
}

/* The definition: the earliest end time at which head fits on some node
 * once every task ending by then has ended, and the lowest such node. */
static bool reference(struct rnd *x,
                      const crater_request_t *head,
                      uint64_t *at,
                      uint32_t *node)
{
    for (uint64_t t = 100; t <= 400; t += 100) {
        bool found = false;
        rnd_release(x, t, -1);
        for (uint32_t n = 0; n < RND_NODES && !found; n++)
            found = fits_on(x->s, head, n);
        for (uint32_t n = 0; found && n < RND_NODES; n++)
            if (fits_on(x->s, head, n)) {
                *node = n;
                break;
            }
        rnd_release(x, t, +1);
        if (found) {
            *at = t;
            return true;
        }
    }
    return false;
}

static int cmp_end(const void *a, const void *b)
{
    const crater_task_end_t *x = a, *y = b;

    if (x->end_ms != y->end_ms)
        return x->end_ms < y->end_ms ? -1 : 1;
    return (x->task > y->task) - (x->task < y->task);
}

/* Two replicas of q as task ids first, first + 1, with a 5000 ms limit
   (crater_sched_place_gang_backfill). */
static int gang_bf(crater_sched_t *s,
                   const crater_request_t *q,
                   uint64_t first,
                   const crater_reservation_t *r,
                   crater_placement_t *out,
                   crater_error_t *err)
{
    return crater_sched_place_gang_backfill(s,
                                            q,
                                            2,
                                            first,
                                            0,
                                            5000,
                                            r,
                                            out,
                                            err);
}

/* A gang head of two 8-GPU replicas on three nodes: nodes 0 and 2 empty
 * at 3000 and 2000, node 1 never (no limit): the shadow time is 3000,
 * when the second node empties, and the reservation names nodes 0 and
 * 2; the core is as before. Later jobs that do not end by then go only
 * to node 1; one that ends by then goes anywhere. */
START_TEST(gang_head_reservation)
{
    crater_sched_t *s = nodes(3);
    crater_request_t head = req_slice(8, 0), one = req_slice(1, 0);
    crater_task_end_t ends[] = {{1, 3000}, {3, 2000}};
    crater_reservation_t r;
    crater_backfill_verdict_t v;
    crater_placement_t p, out[2];
    crater_error_t err;

    run_on(s, 1, 0, 8);
    run_on(s, 2, 1, 4); /* no limit */
    run_on(s, 3, 2, 8);
    ck_assert_int_eq(crater_sched_reserve_gang(s, &head, 2, ends, 2, &r, &err),
                     0);
    ck_assert_uint_eq(r.w.shadow_ms, 3000);
    ck_assert_uint_eq(r.nnodes, 2);
    ck_assert_uint_eq(r.nodes[0], 0);
    ck_assert_uint_eq(r.nodes[1], 2);
    ck_assert_uint_eq(r.placement.node, 0);
    ck_assert_uint_eq(r.placement.ngpus, 8);
    ck_assert(!fits(s, req_slice(5, 0))); /* node 1 still has only 4 */
    ck_assert(fits(s, req_slice(4, 0)));
    /* three replicas never fit (node 1 never empties) */
    ck_assert_int_eq(crater_sched_reserve_gang(s, &head, 3, ends, 2, &r, &err),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNSCHED);
    ck_assert_int_eq(crater_sched_reserve_gang(s, &head, 2, ends, 2, &r, &err),
                     0);
    /* a long job goes to node 1; one ending by 3000 anywhere */
    ck_assert_int_eq(bf(s, &one, 5000, &r, &p, &v, &err), 0);
    ck_assert_uint_eq(p.node, 1);
    ck_assert_int_eq(v, CRATER_BACKFILL_EXTRA);
    ck_assert_int_eq(bf(s, &one, 3000, &r, &p, &v, &err), 0);
    ck_assert_int_eq(v, CRATER_BACKFILL_BEFORE_SHADOW);
    /* a gang behind it: two one-GPU replicas fit on node 1 only */
    ck_assert_int_eq(gang_bf(s, &one, 100, &r, out, &err), 0);
    ck_assert_uint_eq(out[0].node, 1);
    ck_assert_uint_eq(out[1].node, 1);
    ck_assert_int_eq(gang_bf(s, &one, 200, &r, out, &err), 0);
    /* node 1 is full now: a third gang fits nowhere: -1 */
    ck_assert_int_eq(gang_bf(s, &one, 300, &r, out, &err), -1);
    ck_assert(!fits(s, one));
    crater_sched_destroy(s);
}
END_TEST

/* A gang that fits only on the head's node waits (1), nothing held. */
START_TEST(gang_backfill_refused_on_head_node)
{
    crater_sched_t *s = nodes(2);
    crater_request_t head = req_slice(8, 0), two = req_slice(2, 0);
    crater_task_end_t ends[] = {{1, 3000}};
    crater_reservation_t r;
    crater_placement_t out[2];
    crater_error_t err;

    run_on(s, 1, 0, 4);
    run_on(s, 2, 1, 8); /* no limit */
    ck_assert_int_eq(crater_sched_reserve(s, &head, ends, 1, &r, &err), 0);
    ck_assert_uint_eq(r.placement.node, 0);
    ck_assert_int_eq(crater_sched_place_gang_backfill(s,
                                                      &two,
                                                      2,
                                                      100,
                                                      0,
                                                      5000,
                                                      &r,
                                                      out,
                                                      &err),
                     1);
    ck_assert_ptr_nonnull(strstr(err.text, "delay"));
    ck_assert(fits(s, req_slice(4, 0))); /* nothing was kept */
    /* ending by the shadow time, it goes */
    ck_assert_int_eq(crater_sched_place_gang_backfill(s,
                                                      &two,
                                                      2,
                                                      100,
                                                      0,
                                                      3000,
                                                      &r,
                                                      out,
                                                      &err),
                     0);
    crater_sched_destroy(s);
}
END_TEST

/* Both entry points (a list in any order, a heap: a sorted array is one)
 * give the reservation the definition gives, and leave the core as it
 * was. 200 random clusters, every head shape that fits nowhere now. */
START_TEST(reservation_matches_definition)
{
    struct rnd x = {.seed = 7};
    size_t checked = 0, found = 0;

    for (int round = 0; round < 200; round++) {
        rnd_fill(&x);
        for (uint32_t g = 1; g <= 8; g++) {
            crater_request_t head = req_slice(g, 0);
            crater_reservation_t a, b;
            crater_task_end_t sorted[RND_TASKS];
            crater_error_t err;
            uint64_t at = 0;
            uint32_t node = 0;
            bool want;
            int ra, rb;
            if (fits(x.s, head))
                continue;
            want = reference(&x, &head, &at, &node);
            ra = crater_sched_reserve(x.s, &head, x.ends, x.nends, &a, &err);
            memcpy(sorted, x.ends, x.nends * sizeof(*sorted));
            qsort(sorted, x.nends, sizeof(*sorted), cmp_end);
            rb = crater_sched_reserve_heap(x.s,
                                           &head,
                                           sorted,
                                           x.nends,
                                           &b,
                                           &err);
            ck_assert_int_eq(ra, want ? 0 : -1);
            ck_assert_int_eq(rb, ra);
            ck_assert(!fits(x.s, head)); /* the core is unchanged */
            checked++;
            if (!want)
                continue;
            found++;
            ck_assert_uint_eq(a.w.shadow_ms, at);
            ck_assert_uint_eq(a.placement.node, node);
            ck_assert_uint_eq(a.placement.ngpus, g);
            ck_assert(memcmp(&a.placement, &b.placement, sizeof(a.placement))
                      == 0);
            ck_assert(memcmp(&a.w, &b.w, sizeof(a.w)) == 0);
        }
        crater_sched_destroy(x.s);
    }
    ck_assert_uint_gt(checked, 200);
    ck_assert_uint_gt(found, 100);
    ck_assert_uint_gt(checked - found, 10);
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
    tcase_add_test(tc, reservation_matches_definition);
    tcase_add_test(tc, gang_head_reservation);
    tcase_add_test(tc, gang_backfill_refused_on_head_node);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
