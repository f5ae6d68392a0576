/* test_svcplan.c - the service controller's plan (src/sched/svcplan.c):
 * desired count -> starts and stops, warm-pool promotion before any cold
 * start (ready before starting, oldest first), scale-down order (not
 * ready, then newest; a ready one refills a short pool), the action cap,
 * and a randomised check that applying a plan always reaches exactly the
 * desired traffic and warm counts without a cold start while a warm
 * replica was left unpromoted; the split of the autoscaler's count during
 * a rollout (old replicas drain first, new ones start). */
#include <check.h>
#include <stdbool.h>
#include <stdlib.h>

#include "sched/svcplan.h"

#define T CRATER__SVC_TRAFFIC
#define W CRATER__SVC_WARM
#define MAXA 64

static size_t plan(const crater__svc_rep_t *r,
                   size_t n,
                   unsigned desired,
                   unsigned warm,
                   crater__svc_action_t *a)
{
    return crater__svc_plan(r, n, desired, warm, a, MAXA);
}

static void expect(const crater__svc_action_t *a,
                   size_t k,
                   size_t i,
                   crater__svc_op_t op,
                   uint64_t id)
{
    ck_assert_uint_gt(k, i);
    ck_assert_msg(a[i].op == op && a[i].id == id,
                  "action %zu: %s %llu, expected %s %llu",
                  i,
                  crater__svc_op_name(a[i].op),
                  (unsigned long long)a[i].id,
                  crater__svc_op_name(op),
                  (unsigned long long)id);
}

START_TEST(starts_from_nothing)
{
    crater__svc_action_t a[MAXA];
    size_t k = plan(NULL, 0, 2, 1, a);

    ck_assert_uint_eq(k, 3);
    expect(a, k, 0, CRATER__SVC_START_TRAFFIC, 0);
    expect(a, k, 1, CRATER__SVC_START_TRAFFIC, 0);
    expect(a, k, 2, CRATER__SVC_START_WARM, 0);
}
END_TEST

START_TEST(warm_replica_promoted_before_a_cold_start)
{
    crater__svc_rep_t r[] = {{1, T, 1, 1}, {2, W, 1, 2}};
    crater__svc_action_t a[MAXA];
    size_t k = plan(r, 2, 3, 1, a);

    ck_assert_uint_eq(k, 3);
    expect(a, k, 0, CRATER__SVC_PROMOTE, 2);
    expect(a, k, 1, CRATER__SVC_START_TRAFFIC, 0);
    expect(a, k, 2, CRATER__SVC_START_WARM, 0); /* the pool refills */
}
END_TEST

START_TEST(promotion_order_ready_oldest_first)
{
    crater__svc_rep_t r[] = {{1, T, 1, 1},
                             {2, W, 1, 10},
                             {3, W, 1, 5},
                             {4, W, 0, 1}};
    crater__svc_action_t a[MAXA];
    size_t k = plan(r, 4, 3, 0, a);

    ck_assert_uint_eq(k, 3);
    expect(a, k, 0, CRATER__SVC_PROMOTE, 3);
    expect(a, k, 1, CRATER__SVC_PROMOTE, 2);
    expect(a, k, 2, CRATER__SVC_STOP, 4); /* pool of 0: trimmed */
    k = plan(r, 4, 4, 0, a);              /* a starting warm one too */
    expect(a, k, 2, CRATER__SVC_PROMOTE, 4);
    ck_assert_uint_eq(k, 3);
}
END_TEST

START_TEST(scale_down_order)
{
    crater__svc_rep_t r[] = {{1, T, 1, 1},
                             {2, T, 1, 2},
                             {3, T, 0, 3},
                             {4, T, 1, 4}};
    crater__svc_action_t a[MAXA];
    size_t k = plan(r, 4, 1, 1, a);

    ck_assert_uint_eq(k, 3);
    expect(a, k, 0, CRATER__SVC_STOP, 3);   /* not ready: first */
    expect(a, k, 1, CRATER__SVC_DEMOTE, 4); /* newest ready refills pool */
    expect(a, k, 2, CRATER__SVC_STOP, 2);
}
END_TEST

START_TEST(same_time_newest_is_larger_id)
{
    crater__svc_rep_t r[] = {{7, T, 1, 5}, {9, T, 1, 5}, {8, T, 1, 5}};
    crater__svc_action_t a[MAXA];
    size_t k = plan(r, 3, 1, 0, a);

    ck_assert_uint_eq(k, 2);
    expect(a, k, 0, CRATER__SVC_STOP, 9);
    expect(a, k, 1, CRATER__SVC_STOP, 8);
}
END_TEST

START_TEST(warm_pool_trimmed_starting_first)
{
    crater__svc_rep_t r[] = {{1, W, 1, 1}, {2, W, 0, 2}, {3, W, 1, 3}};
    crater__svc_action_t a[MAXA];
    size_t k = plan(r, 3, 0, 1, a);

    ck_assert_uint_eq(k, 2);
    expect(a, k, 0, CRATER__SVC_STOP, 2);
    expect(a, k, 1, CRATER__SVC_STOP, 3);
}
END_TEST

START_TEST(steady_state_and_cap)
{
    crater__svc_rep_t r[] = {{1, T, 1, 1}, {2, W, 1, 2}};
    crater__svc_action_t a[MAXA];

    ck_assert_uint_eq(plan(r, 2, 1, 1, a), 0);
    ck_assert_uint_eq(crater__svc_plan(NULL, 0, 10, 0, a, 4), 4);
    ck_assert_uint_eq(crater__svc_plan(r, 2, 5, 1, a, 0), 0);
}
END_TEST

/* Apply a plan to counts the way the controller does. */
static void check_random_plan(crater__svc_rep_t *r, size_t n, unsigned seed)
{
    unsigned desired = (unsigned)rand_r(&seed) % 6;
    unsigned warm = (unsigned)rand_r(&seed) % 4;
    crater__svc_action_t a[MAXA];
    size_t k = plan(r, n, desired, warm, a);
    unsigned traffic = 0, pool = 0;
    bool cold = false;

    for (size_t i = 0; i < n; i++)
        r[i].role == T ? traffic++ : pool++;
    for (size_t i = 0; i < k; i++) {
        switch (a[i].op) {
        case CRATER__SVC_START_TRAFFIC:
            traffic++, cold = true;
            break;
        case CRATER__SVC_START_WARM:
            pool++;
            break;
        case CRATER__SVC_PROMOTE:
            ck_assert_msg(!cold, "a cold start before a promotion");
            traffic++, pool--;
            break;
        case CRATER__SVC_DEMOTE:
            traffic--, pool++;
            break;
        case CRATER__SVC_STOP:
            for (size_t j = 0; j < n; j++)
                if (r[j].id == a[i].id)
                    r[j].role == T ? traffic-- : pool--;
            break;
        }
    }
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(traffic, desired);
    ck_assert_uint_eq(pool, warm);
}

START_TEST(random_plans_reach_the_counts)
{
    crater__svc_rep_t r[12];

    for (unsigned seed = 1; seed <= 2000; seed++) {
        unsigned s = seed;
        size_t n = (size_t)rand_r(&s) % 12;
        for (size_t i = 0; i < n; i++)
            r[i] = (crater__svc_rep_t){.id = i + 1,
                                       .role = rand_r(&s) % 2 ? T : W,
                                       .ready = rand_r(&s) % 2,
                                       .since_ms = rand_r(&s) % 5};
        check_random_plan(r, n, s);
    }
}
END_TEST

static void split_is(crater__svc_split_t r,
                     unsigned retire,
                     unsigned want,
                     unsigned warm)
{
    ck_assert_uint_eq(r.retire_old, retire);
    ck_assert_uint_eq(r.desired_new, want);
    ck_assert_uint_eq(r.warm_new, warm);
}

/* split(desired, old, old ready, new, ready in traffic, warm, old warm) */
static crater__svc_split_t split(unsigned d,
                                 unsigned o,
                                 unsigned oready,
                                 unsigned n,
                                 unsigned ready,
                                 unsigned warm,
                                 unsigned owarm)
{
    crater__svc_roll_in_t in = {d, o, oready, n, ready, warm, owarm};

    return crater__svc_roll_split(&in);
}

START_TEST(rollout_split_steady)
{
    /* 2 old, nothing new yet: the new version's plan wants none (the
     * rollout's surge replica moves them one at a time) */
    split_is(split(2, 2, 2, 0, 2, 0, 0), 0, 0, 0);
    /* half-way: 1 old, 1 new */
    split_is(split(2, 1, 1, 1, 2, 0, 0), 0, 1, 0);
    /* done: no old one left, the plan owns them all */
    split_is(split(2, 0, 0, 2, 2, 1, 0), 0, 2, 1);
}
END_TEST

START_TEST(rollout_split_scale_up_starts_new)
{
    /* load rises to 4 while 2 old and 1 new serve: 1 more of the new
     * version, no old one started */
    split_is(split(4, 2, 2, 1, 3, 0, 0), 0, 2, 0);
    split_is(split(5, 2, 2, 0, 2, 0, 0), 0, 3, 0);
}
END_TEST

START_TEST(rollout_split_scale_down_drains_old_first)
{
    /* load falls to 1 with 2 old and 1 new, all ready: both old drain */
    split_is(split(1, 2, 2, 1, 3, 0, 0), 2, 1, 0);
    /* to 2: one old drains */
    split_is(split(2, 2, 2, 1, 3, 0, 0), 1, 1, 0);
    /* to 0: everything goes */
    split_is(split(0, 3, 3, 2, 5, 0, 0), 3, 0, 0);
    /* fewer old than the excess: the rest falls on the new ones */
    split_is(split(1, 1, 1, 3, 4, 0, 0), 1, 1, 0);
}
END_TEST

START_TEST(rollout_split_keeps_ready)
{
    /* 1 old ready, 2 new not ready (one started before a restart), the
     * count 2: the old one stays (the ready ones would drop to 1); the
     * plan keeps 1 new one */
    split_is(split(2, 1, 1, 2, 1, 0, 0), 0, 1, 0);
    /* an old one not ready goes before a ready one */
    split_is(split(2, 2, 1, 1, 2, 0, 0), 1, 1, 0);
    /* the count falls to 1, nothing new ready: one old ready may go */
    split_is(split(1, 2, 2, 1, 2, 0, 0), 1, 0, 0);
}
END_TEST

START_TEST(rollout_split_warm_pool)
{
    /* old warm replicas fill the pool until the rollout ends */
    split_is(split(2, 2, 2, 0, 2, 2, 1), 0, 0, 1);
    split_is(split(2, 2, 2, 0, 2, 1, 3), 0, 0, 0);
}
END_TEST

/* Random counts: the ready replicas in traffic never fall below the
 * count (or below what they were), no old replica goes while the count is
 * short, and what stays of the old ones plus the new version's count is
 * at least the count. */
START_TEST(rollout_split_random)
{
    srand(7);
    for (int i = 0; i < 20000; i++) {
        unsigned d = (unsigned)rand() % 20, o = (unsigned)rand() % 20;
        unsigned n = (unsigned)rand() % 20;
        unsigned oready = (unsigned)rand() % (o + 1);
        /* the new ones ready, and the surge replica perhaps */
        unsigned ready = oready + (unsigned)rand() % (n + 2);
        crater__svc_split_t r = split(d, o, oready, n, ready, 0, 0);
        unsigned unready = o - oready, kept = o - r.retire_old;
        unsigned ready_gone =
            r.retire_old > unready ? r.retire_old - unready : 0;
        ck_assert_uint_le(r.retire_old, o);
        if (o + n <= d)
            ck_assert_uint_eq(r.retire_old, 0);
        if (ready_gone)
            ck_assert_uint_ge(ready - ready_gone, d);
        ck_assert_uint_ge(kept + r.desired_new, d);
        if (kept <= d)
            ck_assert_uint_eq(kept + r.desired_new, d);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("svcplan");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, starts_from_nothing);
    tcase_add_test(tc, warm_replica_promoted_before_a_cold_start);
    tcase_add_test(tc, promotion_order_ready_oldest_first);
    tcase_add_test(tc, scale_down_order);
    tcase_add_test(tc, same_time_newest_is_larger_id);
    tcase_add_test(tc, warm_pool_trimmed_starting_first);
    tcase_add_test(tc, steady_state_and_cap);
    tcase_add_test(tc, random_plans_reach_the_counts);
    tcase_add_test(tc, rollout_split_steady);
    tcase_add_test(tc, rollout_split_scale_up_starts_new);
    tcase_add_test(tc, rollout_split_scale_down_drains_old_first);
    tcase_add_test(tc, rollout_split_keeps_ready);
    tcase_add_test(tc, rollout_split_warm_pool);
    tcase_add_test(tc, rollout_split_random);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
