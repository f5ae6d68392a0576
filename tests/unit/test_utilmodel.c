/* test_utilmodel.c - the contention model (utilmodel.h), its fit to the
 * calibration measurements in bench/util/calibration.csv, and the
 * accounting of `crater sim util` (utilsim.h) against cases whose answer
 * is known: ideal jobs measure exactly what they asked for, jobs idle all
 * their run measure 0. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crater/sim.h"
#include "crater/utilmodel.h"
#include "crater/utilsim.h"

/* The calibration points must be reproduced within this relative error
 * (the stated tolerance of the fit: see doc/simulator.md). */
#define CALIB_TOL 0.15

START_TEST(waterfill_shares)
{
    double want[3] = {8, 8, 0}, w[3] = {1, 3, 1}, got[3];
    double want2[2] = {1, 20}, got2[2], quota[2] = {0, 2};

    ck_assert_int_eq(crater_util_waterfill(10, want, w, NULL, 3, got), 0);
    ck_assert_double_eq_tol(got[0], 2.5, 1e-9);
    ck_assert_double_eq_tol(got[1], 7.5, 1e-9);
    ck_assert_double_eq_tol(got[2], 0, 1e-9);
    /* work-conserving: what the small claimant leaves goes to the other */
    ck_assert_int_eq(crater_util_waterfill(10, want2, NULL, NULL, 2, got2), 0);
    ck_assert_double_eq_tol(got2[0], 1, 1e-9);
    ck_assert_double_eq_tol(got2[1], 9, 1e-9);
    /* a quota caps even when the pool has room */
    ck_assert_int_eq(crater_util_waterfill(10, want2, NULL, quota, 2, got2), 0);
    ck_assert_double_eq_tol(got2[1], 2, 1e-9);
    /* enough for everyone: everyone gets what it wants */
    ck_assert_int_eq(crater_util_waterfill(100, want, w, NULL, 3, got), 0);
    ck_assert_double_eq_tol(got[0], 8, 1e-9);
}
END_TEST

/* A is starved of disk (0.25 of what it needs): it can use only a quarter
 * of its CPU, and B, sharing the CPU, gets the rest instead of an even
 * split. */
START_TEST(solve_no_hoarding)
{
    crater_util_task_t t[2] = {0};
    double cap[2] = {4, 0.25};

    t[0].claim[0] = (crater_util_claim_t){0, 4, 1, 0};
    t[0].claim[1] = (crater_util_claim_t){1, 1, 1, 0};
    t[0].nclaim = 2;
    t[1].claim[0] = (crater_util_claim_t){0, 4, 1, 0};
    t[1].nclaim = 1;
    ck_assert_int_eq(crater_util_solve(cap, 2, t, 2), 0);
    ck_assert_double_eq_tol(t[0].rate, 0.25, 1e-6);
    ck_assert_double_eq_tol(t[1].rate, 0.75, 1e-6);
    /* no contention: both at full rate */
    cap[0] = 8, cap[1] = 1;
    ck_assert_int_eq(crater_util_solve(cap, 2, t, 2), 0);
    ck_assert_double_eq_tol(t[0].rate, 1, 1e-9);
    ck_assert_double_eq_tol(t[1].rate, 1, 1e-9);
}
END_TEST

START_TEST(supply_and_diurnal)
{
    ck_assert_double_eq_tol(crater_util_supply_ratio(2, 1), 0.5, 1e-12);
    ck_assert_double_eq_tol(crater_util_supply_ratio(2, 3), 1, 1e-12);
    ck_assert_double_eq_tol(crater_util_supply_ratio(0, 0), 1, 1e-12);
    ck_assert_double_eq_tol(crater_util_step_time(0.1, 2, 0.5), 0.4, 1e-12);
    /* peak hour 14:00-15:00 is 1 minus half an hour's cosine; 02:00 the
     * trough */
    double peak = crater_util_diurnal(14 * 3600000ull, 0.2);
    double low = crater_util_diurnal(2 * 3600000ull, 0.2);
    ck_assert(peak > 0.99 && peak <= 1.0);
    ck_assert(low >= 0.2 && low < 0.21);
    ck_assert_double_eq_tol(crater_util_diurnal((24 + 14) * 3600000ull, 0.2),
                            peak,
                            1e-12);
}
END_TEST

struct series {
    crater_util_point_t pt[16];
    double compute[16];
    size_t n;
};

static void read_calibration(struct series *cpu, struct series *io)
{
    char path[512], line[256];
    FILE *f;

    snprintf(path,
             sizeof(path),
             "%s/bench/util/calibration.csv",
             CRATER_SOURCE_DIR);
    f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    while (fgets(line, sizeof(line), f)) {
        char name[16];
        double sup, step, comp;
        if (line[0] == '#'
            || sscanf(line, "%15[^,],%lf,%lf,%lf", name, &sup, &step, &comp)
                   != 4)
            continue;
        struct series *s = !strcmp(name, "cpu") ? cpu : io;
        ck_assert(s->n < 16);
        s->pt[s->n] = (crater_util_point_t){sup, step};
        s->compute[s->n++] = comp;
    }
    fclose(f);
}

static double median(double *v, size_t n)
{
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void check_series(struct series *s, const char *what)
{
    double g, d, a;

    ck_assert_msg(s->n >= 5, "%s: only %zu calibration points", what, s->n);
    g = median(s->compute, s->n);
    crater_util_fit(s->pt, s->n, g, &d, &a);
    for (size_t i = 0; i < s->n; i++) {
        double m = crater_util_fit_step(&s->pt[i], g, d, a);
        double rel = fabs(m / s->pt[i].step_s - 1);
        ck_assert_msg(rel <= CALIB_TOL,
                      "%s supply %g: model %.4f s, measured %.4f s "
                      "(%.0f%% off; demand %g, ceiling %g)",
                      what,
                      s->pt[i].supply,
                      m,
                      s->pt[i].step_s,
                      100 * rel,
                      d,
                      a);
    }
}

/* The model's supply curve reproduces every measured point. The IO
 * series also checks the fitted demand against what the loader is known
 * to read: 16 samples x 64 KiB per step, over the compute time. */
START_TEST(calibration_points)
{
    struct series cpu = {0}, io = {0};
    double g, d, a;

    read_calibration(&cpu, &io);
    check_series(&cpu, "cpu");
    check_series(&io, "io");
    g = median(io.compute, io.n);
    crater_util_fit(io.pt, io.n, g, &d, &a);
    ck_assert_msg(fabs(d * g / (16.0 * 65536) - 1) < 0.2,
                  "io demand %g B/s x compute %g s is not one batch",
                  d,
                  g);
}
END_TEST

/* Ideal jobs (intrinsic 1, nothing scarce, never idle) measure what they
 * asked for: the measured utilisation equals the replay's requested
 * utilisation. Built-in mix (no data needed). */
START_TEST(ideal_jobs_measure_their_request)
{
    crater_util_params_t p;
    crater_error_t err = {0};
    crater_util_result_t r;

    ck_assert_int_eq(crater_util_params_preset("plain", &p, &err), 0);
    ck_assert_int_eq(crater_util_params_set(&p, "nodes=10", &err), 0);
    ck_assert_int_eq(crater_util_params_set(&p, "jobs=400", &err), 0);
    ck_assert_int_eq(crater_util_params_set(&p, "load=0.6", &err), 0);
    ck_assert_int_eq(crater_util_params_set(&p, "cpu_per_gpu=0", &err), 0);
    for (int pol = 0; pol < CRATER_UTIL_NPOLICY; pol++) {
        ck_assert_msg(crater_util_run(&p, pol, NULL, &r, &err) == 0,
                      "%s",
                      err.text);
        ck_assert_msg(fabs(r.gpu_measured - r.rep.util_gpu_req) < 1e-6,
                      "%s: measured %f, requested %f",
                      crater_util_policy_name(pol),
                      r.gpu_measured,
                      r.rep.util_gpu_req);
        ck_assert(r.gpu_measured > 0.1);
        ck_assert(r.gpu_measured <= r.gpu_alloc + 1e-9);
        crater_util_result_clear(&r);
    }
}
END_TEST

/* Jobs idle for their whole run hold GPUs and measure nothing; Crater
 * reclaims them, the GPU-count scheduler does not. */
START_TEST(idle_jobs_measure_zero)
{
    crater_util_params_t p;
    crater_error_t err = {0};
    crater_util_result_t g, c;

    ck_assert_int_eq(crater_util_params_preset("plain", &p, &err), 0);
    ck_assert_int_eq(crater_util_params_set(&p, "nodes=10", &err), 0);
    ck_assert_int_eq(crater_util_params_set(&p, "jobs=300", &err), 0);
    ck_assert_int_eq(crater_util_params_set(&p, "interactive=1", &err), 0);
    /* above 1: the tail is clamped to the run (it once wrapped around
     * and counted such jobs busy their whole run) */
    ck_assert_int_eq(crater_util_params_set(&p, "idle_frac=1.5", &err), 0);
    ck_assert_int_eq(crater_util_run(&p, CRATER_UTIL_GPUCOUNT, NULL, &g, &err),
                     0);
    ck_assert_int_eq(crater_util_run(&p, CRATER_UTIL_CRATER, NULL, &c, &err),
                     0);
    ck_assert_double_eq_tol(g.gpu_measured, 0, 1e-12);
    ck_assert_double_eq_tol(c.gpu_measured, 0, 1e-12);
    ck_assert(g.gpu_alloc > 0.1);
    ck_assert_uint_eq(g.rep.idle_reclaims, 0);
    ck_assert(c.rep.idle_reclaims > 0);
    ck_assert(c.gpu_alloc < g.gpu_alloc);
    crater_util_result_clear(&g);
    crater_util_result_clear(&c);
}
END_TEST

START_TEST(params_errors)
{
    crater_util_params_t p;
    crater_error_t err = {0};

    ck_assert_int_eq(crater_util_params_preset("nope", &p, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_int_eq(crater_util_params_preset("seeds", &p, &err), 0);
    ck_assert_int_eq(crater_util_params_set(&p, "bogus=1", &err), -1);
    ck_assert_int_eq(crater_util_params_set(&p, "load=abc", &err), -1);
    ck_assert_ptr_nonnull(strstr(err.text, "util.load"));
    ck_assert_int_eq(crater_util_params_set(&p, "idle_reclaim_h=0.5", &err), 0);
    ck_assert_uint_eq(p.idle_reclaim_ms, 1800000);
    ck_assert_double_eq_tol(crater_util_params_get(&p, "idle_reclaim_h"),
                            0.5,
                            1e-12);
}
END_TEST

/* On openb shapes (skipped without the data) the seeds' workload: the
 * gpu-count baseline measures far below what it allocates, and Crater
 * measures more than it. */
START_TEST(openb_seeds_workload)
{
    const char *dir = crater_openb_dir();
    char path[1024];
    crater_util_params_t p;
    crater_error_t err = {0};
    crater_util_result_t g, c;

    snprintf(path,
             sizeof(path),
             "%s/openb_pod_list_default.csv",
             dir ? dir : "");
    if (!dir || access(path, R_OK) != 0) {
        fprintf(stderr, "test_utilmodel: openb data absent, skipped\n");
        return;
    }
    ck_assert_int_eq(crater_util_params_preset("seeds", &p, &err), 0);
    ck_assert_int_eq(crater_util_params_set(&p, "jobs=1500", &err), 0);
    ck_assert_int_eq(crater_util_params_set(&p, "nodes=30", &err), 0);
    ck_assert_int_eq(crater_util_params_set(&p, "load=1.5", &err), 0);
    ck_assert_int_eq(crater_util_run(&p, CRATER_UTIL_GPUCOUNT, dir, &g, &err),
                     0);
    ck_assert_int_eq(crater_util_run(&p, CRATER_UTIL_CRATER, dir, &c, &err), 0);
    ck_assert(g.gpu_measured < 0.7 * g.gpu_alloc);
    /* Crater's profiled requests are capped to fit an empty node: every
     * job starts (44 of 6,000 did not before the cap) */
    ck_assert_uint_eq(c.rep.never_started, 0);
    ck_assert_msg(c.gpu_measured > g.gpu_measured,
                  "crater %f gpu-count %f",
                  c.gpu_measured,
                  g.gpu_measured);
    crater_util_result_clear(&g);
    crater_util_result_clear(&c);
}
END_TEST

/* GPU sharing in the simulator: ideal jobs (use 1, the "plain" preset)
 * are never time-shared, so switching it changes nothing there; on the
 * seeds workload whole-GPU jobs of low profiled use are, so Crater holds
 * less GPU (a shared job holds its memory slice) and gets more done. */
START_TEST(gpu_sharing_in_the_simulator)
{
    const char *dir = crater_openb_dir();
    crater_util_params_t p;
    crater_error_t err = {0};
    crater_util_result_t on, off;

    ck_assert_int_eq(crater_util_params_preset("plain", &p, &err), 0);
    ck_assert_int_eq(crater_util_params_set(&p, "jobs=400", &err), 0);
    ck_assert_int_eq(crater_util_params_set(&p, "nodes=10", &err), 0);
    ck_assert_int_eq(crater_util_run(&p, CRATER_UTIL_CRATER, dir, &on, &err),
                     0);
    ck_assert_int_eq(crater_util_params_set(&p, "profile_gpu=0", &err), 0);
    ck_assert_int_eq(crater_util_run(&p, CRATER_UTIL_CRATER, dir, &off, &err),
                     0);
    ck_assert_double_eq(on.gpu_measured, off.gpu_measured);
    ck_assert_double_eq(on.gpu_alloc, off.gpu_alloc);
    crater_util_result_clear(&on);
    crater_util_result_clear(&off);

    ck_assert_int_eq(crater_util_params_preset("seeds", &p, &err), 0);
    ck_assert_int_eq(crater_util_params_set(&p, "jobs=1500", &err), 0);
    ck_assert_int_eq(crater_util_params_set(&p, "nodes=30", &err), 0);
    ck_assert_int_eq(crater_util_params_set(&p, "load=1.5", &err), 0);
    ck_assert_int_eq(crater_util_run(&p, CRATER_UTIL_CRATER, dir, &on, &err),
                     0);
    ck_assert_int_eq(crater_util_params_set(&p, "profile_gpu=0", &err), 0);
    ck_assert_int_eq(crater_util_run(&p, CRATER_UTIL_CRATER, dir, &off, &err),
                     0);
    ck_assert_msg(on.gpu_alloc < 0.9 * off.gpu_alloc,
                  "alloc on %f off %f",
                  on.gpu_alloc,
                  off.gpu_alloc);
    ck_assert_msg(on.gpu_measured > off.gpu_measured,
                  "measured on %f off %f",
                  on.gpu_measured,
                  off.gpu_measured);
    ck_assert_uint_eq(on.rep.never_started, 0);
    crater_util_result_clear(&on);
    crater_util_result_clear(&off);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("utilmodel");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int nf;

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, waterfill_shares);
    tcase_add_test(tc, solve_no_hoarding);
    tcase_add_test(tc, supply_and_diurnal);
    tcase_add_test(tc, calibration_points);
    tcase_add_test(tc, gpu_sharing_in_the_simulator);
    tcase_add_test(tc, ideal_jobs_measure_their_request);
    tcase_add_test(tc, idle_jobs_measure_zero);
    tcase_add_test(tc, params_errors);
    tcase_add_test(tc, openb_seeds_workload);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
