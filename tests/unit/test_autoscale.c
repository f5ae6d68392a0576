/* test_autoscale.c - the inference autoscaler (src/sched/autoscale.c) on an
 * invented clock: load steps up and down, panic entry and exit, rate
 * limits, the scale-down delay, a noisy constant load that must not make it
 * flap, scale to zero only after the grace (at least the load time),
 * activation, min/max, and the parameter and sample errors.
 *
 * The driver ticks every 2 s: it records a sample, decides, and makes the
 * replicas ready at once (current = desired), as an ideal cluster would. */
#include <check.h>
#include <string.h>

#include "sched/autoscale.h"

#define TICK 2000

typedef struct sim {
    crater__as_t *a;
    int64_t now;
    unsigned current;
    crater__as_decision_t d;
} sim_t;

static void sim_init(sim_t *s, const crater__as_params_t *p, unsigned cur)
{
    crater_error_t err;

    s->a = crater__as_create(p, &err);
    ck_assert_msg(s->a != NULL, "%s", err.text);
    s->now = 0;
    s->current = cur;
}

/* One tick at load c (concurrency and rps alike), waiting w, load time l. */
static unsigned tick_full(sim_t *s, double c, unsigned w, int64_t l)
{
    crater_error_t err;
    crater__as_sample_t smp = {.time_ms = s->now, .concurrency = c, .rps = c};
    crater__as_input_t in = {.now_ms = s->now,
                             .current = s->current,
                             .waiting = w,
                             .load_ms = l};

    ck_assert_int_eq(crater__as_record(s->a, &smp, &err), 0);
    ck_assert_int_eq(crater__as_decide(s->a, &in, &s->d, &err), 0);
    ck_assert_str_ne(s->d.reason, "");
    s->current = s->d.desired;
    s->now += TICK;
    return s->d.desired;
}

static unsigned tick(sim_t *s, double c)
{
    return tick_full(s, c, 0, 0);
}

static crater__as_params_t params(double target)
{
    crater__as_params_t p;

    crater__as_params_default(&p);
    p.target = target;
    p.scale_to_zero = false;
    return p;
}

START_TEST(step_up_then_down)
{
    crater__as_params_t p = params(1);
    sim_t s;
    unsigned prev;

    sim_init(&s, &p, 5);
    for (int i = 0; i < 40; i++)
        ck_assert_uint_eq(tick(&s, 5), 5);
    /* 5 -> 8 in flight (1.6x: no panic): up as the stable average rises */
    prev = 5;
    for (int i = 0; i < 40; i++) {
        unsigned d = tick(&s, 8);
        ck_assert(!s.d.panic);
        ck_assert_uint_ge(d, prev);
        prev = d;
    }
    ck_assert_uint_eq(prev, 8);
    for (int i = 0; i < 40; i++) {
        unsigned d = tick(&s, 2);
        ck_assert_uint_le(d, prev);
        prev = d;
    }
    ck_assert_uint_eq(prev, 2);
    ck_assert_double_eq_tol(s.d.observed_stable, 2, 1e-9);
    crater__as_destroy(s.a);
}
END_TEST

START_TEST(panic_enters_holds_and_leaves)
{
    crater__as_params_t p = params(1);
    sim_t s;
    unsigned peak;
    int64_t entry;

    sim_init(&s, &p, 2);
    for (int i = 0; i < 30; i++)
        tick(&s, 2);
    ck_assert(!s.d.panic);
    /* a burst to 20 in flight: panic at the first tick, sized by the
     * panic window (the stable average would have said 3) */
    entry = s.now;
    tick(&s, 20);
    ck_assert(s.d.panic);
    ck_assert_ptr_nonnull(strstr(s.d.reason, "panic entered"));
    ck_assert_uint_ge(s.d.desired, 8);
    ck_assert_uint_lt(s.d.want_stable, 4);
    for (int i = 0; i < 3; i++)
        tick(&s, 20);
    peak = s.current;
    ck_assert_uint_eq(peak, 20);
    /* the burst ends: no scale-down while in panic, which lasts at least a
     * stable window after entering */
    for (;;) {
        unsigned d = tick(&s, 2);
        if (!s.d.panic)
            break;
        ck_assert_uint_eq(d, peak);
        ck_assert_int_lt(s.now - entry, 10 * p.stable_window_ms);
    }
    ck_assert_int_ge(s.now - TICK - entry, p.stable_window_ms);
    ck_assert_ptr_nonnull(strstr(s.d.reason, "panic left"));
    ck_assert_uint_lt(s.d.desired, peak);
    crater__as_destroy(s.a);
}
END_TEST

START_TEST(rate_limits_per_decision)
{
    crater__as_params_t p = params(1);
    sim_t s;

    p.stable_window_ms = 2000; /* the last sample only */
    p.panic_window_ms = 1000;
    p.panic_threshold = 1000; /* keep panic out of it */
    p.max_scale_up_rate = 2;
    sim_init(&s, &p, 1);
    ck_assert_uint_eq(tick(&s, 100), 2);
    ck_assert_ptr_nonnull(strstr(s.d.reason, "rate limit"));
    ck_assert_uint_eq(s.d.want, 100);
    ck_assert_uint_eq(s.d.rate_limited, 2);
    ck_assert_uint_eq(tick(&s, 100), 4);
    ck_assert_uint_eq(tick(&s, 100), 8);
    ck_assert_uint_eq(tick(&s, 16), 16);
    /* down at most by half per decision, to the floor of 1 */
    ck_assert_uint_eq(tick(&s, 0), 8);
    ck_assert_uint_eq(tick(&s, 0), 4);
    ck_assert_uint_eq(tick(&s, 0), 2);
    ck_assert_uint_eq(tick(&s, 0), 1);
    ck_assert_uint_eq(tick(&s, 0), 1);
    crater__as_destroy(s.a);
}
END_TEST

START_TEST(scale_down_delay_holds_the_max)
{
    crater__as_params_t p = params(1);
    sim_t s;
    int64_t last10;

    p.stable_window_ms = 2000;
    p.panic_window_ms = 1000;
    p.panic_threshold = 1000;
    p.max_scale_down_rate = 100;
    p.scale_down_delay_ms = 30000;
    sim_init(&s, &p, 10);
    for (int i = 0; i < 5; i++)
        ck_assert_uint_eq(tick(&s, 10), 10);
    last10 = s.now - TICK;
    while (s.now - last10 < p.scale_down_delay_ms) {
        ck_assert_uint_eq(tick(&s, 3), 10);
        ck_assert_uint_eq(s.d.rate_limited, 3);
        ck_assert_ptr_nonnull(strstr(s.d.reason, "scale-down delay"));
    }
    ck_assert_uint_eq(tick(&s, 3), 3);
    /* scaling up is never delayed */
    ck_assert_uint_eq(tick(&s, 9), 9);
    crater__as_destroy(s.a);
}
END_TEST

/* A deterministic generator for the noise (xorshift). */
static double noise(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return (double)(*x % 100001) / 100000.0 * 2 - 1; /* -1..1 */
}

/* Changes of desired over 10 minutes of 2 s ticks at mean +- 20%, after a
 * stable window to settle. */
static int flaps(double mean, double tolerance)
{
    crater__as_params_t p = params(1);
    uint64_t x = 88172645463325252ull;
    sim_t s;
    int changes = 0;

    p.tolerance = tolerance;
    sim_init(&s, &p, (unsigned)mean);
    for (int i = 0; i < 30; i++)
        tick(&s, mean * (1 + 0.2 * noise(&x)));
    for (int i = 0; i < 300; i++) {
        unsigned before = s.current;
        tick(&s, mean * (1 + 0.2 * noise(&x)));
        ck_assert(!s.d.panic);
        changes += s.current != before;
    }
    crater__as_destroy(s.a);
    return changes;
}

START_TEST(no_oscillation_on_noisy_constant_load)
{
    ck_assert_int_le(flaps(10, 0.1), 2);
    ck_assert_int_le(flaps(10.5, 0.1), 2);
    ck_assert_int_le(flaps(3.7, 0.1), 2);
    /* the band is what keeps it still: without it the same load flaps */
    ck_assert_int_gt(flaps(10, 0), 10);
}
END_TEST

START_TEST(zero_only_after_grace_and_load_time)
{
    crater__as_params_t p = params(1);
    sim_t s;
    int64_t quiet;

    p.scale_to_zero = true;
    p.zero_grace_ms = 30000;
    sim_init(&s, &p, 1);
    for (int i = 0; i < 5; i++)
        tick_full(&s, 1, 0, 45000);
    /* quiet from here; the stable window must empty of load first, then
     * the grace (the 45 s load time, above the 30 s grace) runs */
    quiet = s.now;
    while (tick_full(&s, 0, 0, 45000) == 1)
        ck_assert_int_lt(s.now - quiet, 200000);
    ck_assert_int_ge(s.now - TICK - quiet, 45000);
    ck_assert_uint_eq(s.d.desired, 0);
    /* activation: a request waiting at zero asks for a replica */
    ck_assert_uint_eq(tick_full(&s, 0, 0, 45000), 0);
    ck_assert_uint_eq(tick_full(&s, 0, 3, 45000), 1);
    ck_assert_ptr_nonnull(strstr(s.d.reason, "activation"));
    crater__as_destroy(s.a);
}
END_TEST

START_TEST(zero_needs_permission_and_min)
{
    crater__as_params_t p = params(1);
    sim_t s;

    sim_init(&s, &p, 3); /* scale_to_zero false */
    for (int i = 0; i < 200; i++)
        tick(&s, 0);
    ck_assert_uint_eq(s.current, 1);
    crater__as_destroy(s.a);
    p.min_replicas = 2;
    p.max_replicas = 5;
    sim_init(&s, &p, 3);
    for (int i = 0; i < 200; i++)
        tick(&s, 0);
    ck_assert_uint_eq(s.current, 2);
    for (int i = 0; i < 200; i++)
        ck_assert_uint_le(tick(&s, 1000), 5);
    ck_assert_uint_eq(s.current, 5);
    ck_assert_ptr_nonnull(strstr(s.d.reason, "bounds"));
    crater__as_destroy(s.a);
}
END_TEST

START_TEST(rps_metric_and_no_data)
{
    crater__as_params_t p = params(50);
    crater__as_decision_t d;
    crater__as_input_t in = {.now_ms = 1000, .current = 4};
    crater__as_sample_t smp = {.time_ms = 2000, .concurrency = 1, .rps = 260};
    crater_error_t err;
    crater__as_t *a;

    p.metric = CRATER__AS_RPS;
    a = crater__as_create(&p, &err);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(crater__as_decide(a, &in, &d, &err), 0);
    ck_assert_uint_eq(d.desired, 4);
    ck_assert_ptr_nonnull(strstr(d.reason, "no samples"));
    ck_assert_int_eq(crater__as_record(a, &smp, &err), 0);
    in.now_ms = 2000;
    ck_assert_int_eq(crater__as_decide(a, &in, &d, &err), 0);
    ck_assert_uint_eq(d.desired, 6); /* 260 rps / 50 per replica */
    ck_assert(d.changed);
    crater__as_destroy(a);
}
END_TEST

START_TEST(errors_name_the_field)
{
    crater__as_params_t p = params(1);
    crater__as_sample_t smp = {.time_ms = 5000};
    crater__as_input_t in = {.now_ms = 5000};
    crater__as_decision_t d;
    crater_error_t err;
    crater__as_t *a;

    p.target = 0;
    ck_assert_ptr_null(crater__as_create(&p, &err));
    ck_assert_str_eq(err.field, "target");
    p = params(1);
    p.panic_window_ms = p.stable_window_ms + 1;
    ck_assert_int_eq(crater__as_params_check(&p, &err), -1);
    ck_assert_str_eq(err.field, "panicWindow");
    p = params(1);
    p.min_replicas = 3;
    p.max_replicas = 2;
    ck_assert_int_eq(crater__as_params_check(&p, &err), -1);
    ck_assert_str_eq(err.field, "maxReplicas");
    p = params(1);
    a = crater__as_create(&p, &err);
    ck_assert_int_eq(crater__as_record(a, &smp, &err), 0);
    smp.time_ms = 4999;
    ck_assert_int_eq(crater__as_record(a, &smp, &err), -1);
    ck_assert_str_eq(err.field, "time_ms");
    smp.time_ms = 6000;
    smp.concurrency = -1;
    ck_assert_int_eq(crater__as_record(a, &smp, &err), -1);
    ck_assert_str_eq(err.field, "concurrency");
    ck_assert_int_eq(crater__as_decide(a, &in, &d, &err), 0);
    in.now_ms = 4000;
    ck_assert_int_eq(crater__as_decide(a, &in, &d, &err), -1);
    ck_assert_str_eq(err.field, "now_ms");
    crater__as_destroy(a);
    crater__as_destroy(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("autoscale");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, step_up_then_down);
    tcase_add_test(tc, panic_enters_holds_and_leaves);
    tcase_add_test(tc, rate_limits_per_decision);
    tcase_add_test(tc, scale_down_delay_holds_the_max);
    tcase_add_test(tc, no_oscillation_on_noisy_constant_load);
    tcase_add_test(tc, zero_only_after_grace_and_load_time);
    tcase_add_test(tc, zero_needs_permission_and_min);
    tcase_add_test(tc, rps_metric_and_no_data);
    tcase_add_test(tc, errors_name_the_field);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
