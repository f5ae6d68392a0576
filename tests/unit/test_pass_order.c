/* test_pass_order.c - the pass's kept queue order (src/sched/pass_order.c)
 * against crater_queue_order() after every step of a random history:
 * pushes (also older submit times and other priorities), removals, jobs
 * requeued unchanged and requeued changed (the merge must notice its kept
 * order is no longer sorted and fall back to the whole order), and an age
 * boost switched on (the whole order, kept while nothing is queued).
 * Tags of kept positions follow their jobs through a merge.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "sched/pass_order.h"

#define MAXID 400

static uint64_t seed = 11;

static uint32_t rnd(uint32_t n)
{
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(seed >> 33) % n;
}

static void push(crater_queue_t *q, pass_order_t *o, uint64_t id)
{
    static const char *const tenants[] = {"a", "b", "c"};
    crater_queue_entry_t e = {
        .id = id,
        .tenant = (char *)tenants[rnd(3)],
        .priority = (int32_t)rnd(3) * 100,
        .deadline_ms = rnd(5) ? 0 : 1 + rnd(100),
        .submit_ms = rnd(50),
    };
    crater_error_t err;

    ck_assert_int_eq(crater_queue_push(q, &e, &err), 0);
    pass__order_queued(o, id);
}

/* o's jobs still queued, in order, are exactly crater_queue_order's. */
static void check(crater_queue_t *q, pass_order_t *o, uint64_t now)
{
    uint64_t want[MAXID];
    size_t n = crater_queue_count(q), k = 0;
    crater_error_t err;

    ck_assert_int_eq(pass__order_update(o, q, now, NULL, &err), 0);
    ck_assert_int_eq(crater_queue_order(q, now, NULL, want, &err), 0);
    for (size_t i = 0; i < o->n; i++) {
        if (!crater_queue_get(q, o->ids[i]))
            continue; /* placed since; the pass skips it */
        ck_assert_uint_lt(k, n);
        ck_assert_uint_eq(o->ids[i], want[k]);
        /* a tag stays with its job: here, its id */
        ck_assert(o->shape[i] == PASS_SHAPE_NONE || o->shape[i] == o->ids[i]);
        o->shape[i] = (uint32_t)o->ids[i];
        k++;
    }
    ck_assert_uint_eq(k, n);
}

START_TEST(kept_order_is_the_queue_order)
{
    crater_queue_t *q = crater_queue_create();
    pass_order_t o = {0};
    crater_error_t err;

    for (int step = 0; step < 3000; step++) {
        uint64_t id = 1 + rnd(MAXID - 1);
        int what = (int)rnd(10);
        if (crater_queue_get(q, id) && what < 5) {
            crater_queue_entry_t e = *crater_queue_get(q, id);
            ck_assert_int_eq(crater_queue_remove(q, id, &err), 0);
            if (what == 0) { /* requeued unchanged (a victim) */
                ck_assert_int_eq(crater_queue_push(q, &e, &err), 0);
                pass__order_queued(&o, id);
            } else if (what == 1) { /* requeued changed */
                e.priority += 50;
                ck_assert_int_eq(crater_queue_push(q, &e, &err), 0);
                pass__order_queued(&o, id);
            }
        } else if (!crater_queue_get(q, id)) {
            push(q, &o, id);
        }
        if (step == 2000)
            ck_assert_int_eq(crater_queue_set_age_boost(q, 10, 1, 5, &err), 0);
        if (rnd(3) == 0)
            check(q, &o, 1000); /* one clock: a kept order is of its time */
    }
    pass__order_free(&o);
    crater_queue_destroy(q);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("pass_order");
    TCase *tc = tcase_create("pass_order");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, kept_order_is_the_queue_order);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
