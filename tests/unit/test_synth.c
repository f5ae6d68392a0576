/* test_synth.c - the synthetic workload generator: spec parsing with its
 * error messages, the built-in mix, reproducibility from the seed,
 * arrival order, runtimes, the offered load it aims for, and a small end
 * to end replay. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/replay.h"

START_TEST(parse_defaults_and_keys)
{
    crater_synth_spec_t sp;
    crater_error_t err;

    ck_assert_int_eq(crater_synth_parse("nodes=10000,jobs=1000000,mix=openb",
                                        &sp,
                                        &err),
                     0);
    ck_assert_uint_eq(sp.nodes, 10000);
    ck_assert_uint_eq(sp.jobs, 1000000);
    ck_assert(!sp.builtin);
    ck_assert_uint_eq(sp.seed, 1);
    ck_assert_double_eq(sp.load, 0.9);
    ck_assert_uint_eq(sp.runtime_ms, 3600000);
    ck_assert(!sp.lognormal);
    ck_assert_int_eq(crater_synth_parse("jobs=5,nodes=2,mix=builtin,seed=7,"
                                        "load=1.5,runtime=30m,dist=lognormal",
                                        &sp,
                                        &err),
                     0);
    ck_assert(sp.builtin);
    ck_assert_uint_eq(sp.seed, 7);
    ck_assert_double_eq(sp.load, 1.5);
    ck_assert_uint_eq(sp.runtime_ms, 1800000);
    ck_assert(sp.lognormal);
    ck_assert_double_eq(sp.idle, 0); /* no idle profile by default */
    ck_assert_double_eq(sp.idle_tail, 0.5);
    ck_assert_uint_eq(sp.idle_reclaim_ms, 0);
    ck_assert_int_eq(crater_synth_parse("jobs=5,nodes=2,idle=0.25,"
                                        "idletail=0.75,idlereclaim=40m",
                                        &sp,
                                        &err),
                     0);
    ck_assert_double_eq(sp.idle, 0.25);
    ck_assert_double_eq(sp.idle_tail, 0.75);
    ck_assert_uint_eq(sp.idle_reclaim_ms, 2400000);
}
END_TEST

static void parse_error(const char *text, const char *field, const char *msg)
{
    crater_synth_spec_t sp;
    crater_error_t err;

    ck_assert_int_eq(crater_synth_parse(text, &sp, &err), -1);
    ck_assert_str_eq(err.field, field);
    ck_assert_str_eq(err.text, msg);
}

START_TEST(parse_errors)
{
    parse_error("nodes=abc,jobs=1",
                "synthetic.nodes",
                "synthetic.nodes: 'abc' is not a positive integer below "
                "2^32-1");
    parse_error("nodes=0,jobs=1",
                "synthetic.nodes",
                "synthetic.nodes: '0' is not a positive integer below 2^32-1");
    parse_error("nodes=1,jobs=-5",
                "synthetic.jobs",
                "synthetic.jobs: '-5' is not a positive integer below 2^32-1");
    parse_error("nodes=1,jobs=1,mix=alibaba",
                "synthetic.mix",
                "synthetic.mix: 'alibaba' is not a mix (expected openb or "
                "builtin)");
    parse_error("nodes=1,jobs=1,load=0",
                "synthetic.load",
                "synthetic.load: '0' is not a number in (0, 10]");
    parse_error("nodes=1,jobs=1,runtime=5GB",
                "synthetic.runtime",
                "synthetic.runtime: '5GB' is not a duration of at least 1s");
    parse_error("nodes=1,jobs=1,dist=pareto",
                "synthetic.dist",
                "synthetic.dist: 'pareto' is not a distribution (expected exp "
                "or lognormal)");
    parse_error("nodes=1,jobs=1,node=3",
                "synthetic",
                "synthetic: unknown key 'node' (expected nodes, jobs, mix, "
                "seed, load, runtime, dist, idle, idletail, idlereclaim)");
    parse_error("nodes=1,jobs=1,idle=1.5",
                "synthetic.idle",
                "synthetic.idle: '1.5' is not a fraction in [0, 1]");
    parse_error("nodes=1,jobs=1,idletail=0",
                "synthetic.idletail",
                "synthetic.idletail: '0' is not a fraction in (0, 1]");
    parse_error("nodes=1,jobs=1,idlereclaim=soon",
                "synthetic.idlereclaim",
                "synthetic.idlereclaim: 'soon' is not a duration (0: off)");
    parse_error("nodes=1,jobs",
                "synthetic",
                "synthetic: 'jobs' is not key=value");
    parse_error("nodes=1",
                "synthetic",
                "synthetic: nodes= and jobs= are required");
}
END_TEST

struct world {
    crater_kb_t *kb;
    crater_synth_mix_t mix;
    crater_trace_node_t *tn;
    crater_cluster_t *cl;
    crater_sched_t *s;
};

static void build(struct world *w, const crater_synth_spec_t *sp)
{
    crater_error_t err;

    memset(w, 0, sizeof(*w));
    w->kb = crater_kb_create();
    ck_assert_int_eq(crater_synth_mix_load(sp, NULL, &w->mix, &err), 0);
    ck_assert(w->mix.builtin);
    ck_assert_int_eq(crater_synth_nodes(sp, &w->mix, &w->tn, &err), 0);
    ck_assert_int_eq(crater_openb_cluster(w->tn,
                                          sp->nodes,
                                          w->kb,
                                          1,
                                          &w->cl,
                                          &err),
                     0);
    w->s =
        crater_replay_sched_create(w->cl, w->kb, CRATER_REPLAY_CRATER, 1, &err);
    ck_assert_ptr_nonnull(w->s);
}

static void destroy(struct world *w)
{
    crater_sched_destroy(w->s);
    crater_cluster_destroy(w->cl);
    crater_trace_nodes_free(w->tn);
    crater_synth_mix_clear(&w->mix);
    crater_kb_destroy(w->kb);
}

START_TEST(same_seed_same_workload)
{
    crater_synth_spec_t sp;
    crater_error_t err;
    struct world w;
    crater_replay_job_t *a, *b, *c;

    ck_assert_int_eq(crater_synth_parse("nodes=50,jobs=20000,mix=builtin",
                                        &sp,
                                        &err),
                     0);
    build(&w, &sp);
    ck_assert_str_eq(w.tn[49].name, "synth-node-000049");
    ck_assert_int_eq(crater_synth_jobs(&sp,
                                       &w.mix,
                                       w.s,
                                       CRATER_REPLAY_CRATER,
                                       &a,
                                       &err),
                     0);
    ck_assert_int_eq(crater_synth_jobs(&sp,
                                       &w.mix,
                                       w.s,
                                       CRATER_REPLAY_CRATER,
                                       &b,
                                       &err),
                     0);
    sp.seed = 2;
    ck_assert_int_eq(crater_synth_jobs(&sp,
                                       &w.mix,
                                       w.s,
                                       CRATER_REPLAY_CRATER,
                                       &c,
                                       &err),
                     0);
    size_t differ = 0;
    for (size_t i = 0; i < sp.jobs; i++) {
        ck_assert_uint_eq(a[i].submit_ms, b[i].submit_ms);
        ck_assert_uint_eq(a[i].runtime_ms, b[i].runtime_ms);
        ck_assert_uint_eq(a[i].req.cpu_milli, b[i].req.cpu_milli);
        ck_assert_uint_ge(a[i].runtime_ms, 1000);
        if (i)
            ck_assert_uint_ge(a[i].submit_ms, a[i - 1].submit_ms);
        differ += a[i].submit_ms != c[i].submit_ms;
    }
    ck_assert_uint_gt(differ, sp.jobs / 2);
    /* the arrival rate is set for an offered GPU load of 0.9 */
    double gpus = 0;
    for (size_t i = 0; i < w.cl->nnodes; i++)
        gpus += (double)w.cl->nodes[i].ngpus;
    double load = crater_replay_offered_load(a, sp.jobs, gpus);
    ck_assert_msg(fabs(load - 0.9) < 0.05, "offered load %f", load);
    free(a);
    free(b);
    free(c);
    destroy(&w);
}
END_TEST

START_TEST(lognormal_mean)
{
    crater_synth_spec_t sp;
    crater_error_t err;
    struct world w;
    crater_replay_job_t *a;

    ck_assert_int_eq(crater_synth_parse("nodes=5,jobs=50000,mix=builtin,"
                                        "dist=lognormal,runtime=10m",
                                        &sp,
                                        &err),
                     0);
    build(&w, &sp);
    ck_assert_int_eq(crater_synth_jobs(&sp,
                                       &w.mix,
                                       w.s,
                                       CRATER_REPLAY_K8S_DEFAULT,
                                       &a,
                                       &err),
                     0);
    double sum = 0;
    for (size_t i = 0; i < sp.jobs; i++) {
        sum += (double)a[i].runtime_ms;
        ck_assert(!a[i].req.preemptible); /* k8s-default preempts nothing */
        ck_assert_uint_eq(a[i].req.slice_mib, 0);
    }
    ck_assert_msg(fabs(sum / (double)sp.jobs / 600000.0 - 1) < 0.05,
                  "mean %f",
                  sum / (double)sp.jobs);
    free(a);
    destroy(&w);
}
END_TEST

START_TEST(small_end_to_end)
{
    crater_synth_spec_t sp;
    crater_error_t err;
    struct world w;
    crater_replay_job_t *a;
    crater_replay_result_t r;

    ck_assert_int_eq(crater_synth_parse("nodes=20,jobs=3000,mix=builtin,"
                                        "runtime=10m,seed=3",
                                        &sp,
                                        &err),
                     0);
    build(&w, &sp);
    ck_assert_int_eq(crater_synth_jobs(&sp,
                                       &w.mix,
                                       w.s,
                                       CRATER_REPLAY_CRATER,
                                       &a,
                                       &err),
                     0);
    crater_replay_opts_t o = {.preempt = true, .cluster = w.cl};
    ck_assert_msg(crater_replay_run(w.s, a, sp.jobs, &o, &r, &err) == 0,
                  "%s",
                  err.text);
    ck_assert_uint_eq(r.completed + r.never_started, sp.jobs);
    ck_assert_uint_eq(r.all.jobs, sp.jobs);
    ck_assert(r.util_gpu_req > 0.3 && r.util_gpu_req <= 1.0);
    ck_assert(r.util_gpu_alloc >= r.util_gpu_req - 1e-9);
    crater_replay_result_clear(&r);
    free(a);
    destroy(&w);
}
END_TEST

/* One replay of the spec text on its synthetic cluster. */
static void run_spec(const char *text, crater_replay_result_t *r)
{
    crater_synth_spec_t sp;
    crater_error_t err;
    struct world w;
    crater_replay_job_t *a;

    ck_assert_int_eq(crater_synth_parse(text, &sp, &err), 0);
    build(&w, &sp);
    ck_assert_int_eq(crater_synth_jobs(&sp,
                                       &w.mix,
                                       w.s,
                                       CRATER_REPLAY_CRATER,
                                       &a,
                                       &err),
                     0);
    crater_replay_opts_t o = {.preempt = true,
                              .cluster = w.cl,
                              .idle_reclaim_ms = sp.idle_reclaim_ms};
    ck_assert_msg(crater_replay_run(w.s, a, sp.jobs, &o, r, &err) == 0,
                  "%s",
                  err.text);
    free(a);
    destroy(&w);
}

/* Idle profile: half the jobs hold their GPUs idle for the last 60 % of
 * their runtime. Without reclaim they hold them to the end; with a 10 min
 * reclaim the same work is done (busy GPU-time equal) holding less, and
 * every idle job whose tail is longer than 10 min is reclaimed. */
START_TEST(idle_profile_and_reclaim)
{
    static const char base[] = "nodes=20,jobs=1500,mix=builtin,runtime=1h,"
                               "seed=5,idle=0.5,idletail=0.6";
    char with[160];
    crater_replay_result_t off, on, none;

    snprintf(with, sizeof(with), "%s,idlereclaim=10m", base);
    run_spec(base, &off);
    run_spec(with, &on);
    run_spec("nodes=20,jobs=1500,mix=builtin,runtime=1h,seed=5", &none);
    ck_assert_uint_eq(off.idle_reclaims, 0);
    ck_assert_uint_gt(on.idle_reclaims, 500);
    ck_assert_uint_le(on.idle_reclaims, on.completed);
    /* idle tails held: busy below held; none without the profile */
    ck_assert(off.util_gpu_busy_all < off.util_gpu_alloc_all - 0.1);
    ck_assert(fabs(none.util_gpu_busy_all - none.util_gpu_alloc_all) < 1e-9);
    /* reclaim: less held, a larger share of what is held is busy */
    ck_assert(on.util_gpu_alloc_all < off.util_gpu_alloc_all);
    ck_assert(on.util_gpu_busy_all / on.util_gpu_alloc_all
              > off.util_gpu_busy_all / off.util_gpu_alloc_all + 0.1);
    ck_assert(on.all.wait_mean <= off.all.wait_mean);
    crater_replay_result_clear(&off);
    crater_replay_result_clear(&on);
    crater_replay_result_clear(&none);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("synth");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, parse_defaults_and_keys);
    tcase_add_test(tc, parse_errors);
    tcase_add_test(tc, same_seed_same_workload);
    tcase_add_test(tc, lognormal_mean);
    tcase_add_test(tc, small_end_to_end);
    tcase_add_test(tc, idle_profile_and_reclaim);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
