/* test_idle.c - idle-GPU detection (src/core/idle.c): the threshold on
 * SM utilisation and memory activity, the window, the grace after the
 * warning, and a busy reading resetting the run. */
#include <check.h>

#include "crater/idle.h"

static const crater_idle_params_t P = {
    .threshold = 0.05,
    .window_ms = 60000,
    .grace_ms = 30000,
};

START_TEST(reading_threshold)
{
    ck_assert(crater_idle_reading(&P, 0.0, 0.0));
    ck_assert(crater_idle_reading(&P, 0.049, 0.01));
    ck_assert(!crater_idle_reading(&P, 0.05, 0.0)); /* at the threshold */
    ck_assert(!crater_idle_reading(&P, 0.9, 0.0));
    /* kernels idle but memory traffic (copies): not idle */
    ck_assert(!crater_idle_reading(&P, 0.0, 0.3));
    /* memory activity unknown (an old agent): SM utilisation decides */
    ck_assert(crater_idle_reading(&P, 0.0, -1));
    ck_assert(!crater_idle_reading(&P, 0.5, -1));
}
END_TEST

START_TEST(warn_after_window_then_reclaim_after_grace)
{
    crater_idle_t s = {0};

    ck_assert_int_eq(crater_idle_observe(&s, &P, true, 1000), CRATER_IDLE_NONE);
    ck_assert_int_eq(crater_idle_observe(&s, &P, true, 60999),
                     CRATER_IDLE_NONE);
    ck_assert_int_eq(crater_idle_reclaim_at(&s, &P), 0);
    ck_assert_int_eq(crater_idle_observe(&s, &P, true, 61000),
                     CRATER_IDLE_WARN);
    ck_assert_int_eq(crater_idle_reclaim_at(&s, &P), 91000);
    ck_assert_int_eq(crater_idle_observe(&s, &P, true, 70000),
                     CRATER_IDLE_NONE);
    ck_assert_int_eq(crater_idle_observe(&s, &P, true, 90999),
                     CRATER_IDLE_NONE);
    ck_assert_int_eq(crater_idle_observe(&s, &P, true, 91000),
                     CRATER_IDLE_RECLAIM);
    /* once per run */
    ck_assert_int_eq(crater_idle_observe(&s, &P, true, 95000),
                     CRATER_IDLE_NONE);
}
END_TEST

START_TEST(busy_reading_resets_the_run)
{
    crater_idle_t s = {0};

    crater_idle_observe(&s, &P, true, 0);
    ck_assert_int_eq(crater_idle_observe(&s, &P, false, 59000),
                     CRATER_IDLE_NONE);
    ck_assert(!s.idle);
    /* the window counts again from the next idle reading */
    ck_assert_int_eq(crater_idle_observe(&s, &P, true, 60000),
                     CRATER_IDLE_NONE);
    ck_assert_int_eq(crater_idle_observe(&s, &P, true, 119999),
                     CRATER_IDLE_NONE);
    ck_assert_int_eq(crater_idle_observe(&s, &P, true, 120000),
                     CRATER_IDLE_WARN);
    /* busy within the grace: the warning is over, no reclaim */
    ck_assert_int_eq(crater_idle_observe(&s, &P, false, 130000),
                     CRATER_IDLE_BUSY_AGAIN);
    ck_assert(!s.warned);
    ck_assert_int_eq(crater_idle_observe(&s, &P, true, 150001),
                     CRATER_IDLE_NONE);
    ck_assert_int_eq(crater_idle_observe(&s, &P, false, 150002),
                     CRATER_IDLE_NONE); /* not warned: nothing to undo */
}
END_TEST

START_TEST(window_zero_is_off)
{
    crater_idle_params_t off = P;
    crater_idle_t s = {0};

    off.window_ms = 0;
    for (int64_t t = 0; t < 10 * 3600000; t += 60000)
        ck_assert_int_eq(crater_idle_observe(&s, &off, true, t),
                         CRATER_IDLE_NONE);
    ck_assert(!s.idle && !s.warned);
}
END_TEST

START_TEST(zero_grace_reclaims_on_the_next_reading)
{
    crater_idle_params_t p = P;
    crater_idle_t s = {0};

    p.grace_ms = 0;
    crater_idle_observe(&s, &p, true, 0);
    ck_assert_int_eq(crater_idle_observe(&s, &p, true, 60000),
                     CRATER_IDLE_WARN);
    ck_assert_int_eq(crater_idle_observe(&s, &p, true, 60001),
                     CRATER_IDLE_RECLAIM);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("idle");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, reading_threshold);
    tcase_add_test(tc, warn_after_window_then_reclaim_after_grace);
    tcase_add_test(tc, busy_reading_resets_the_run);
    tcase_add_test(tc, window_zero_is_off);
    tcase_add_test(tc, zero_grace_reclaims_on_the_next_reading);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
