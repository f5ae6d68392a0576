/* test_replay.c - the real-time replay: queueing on a one-GPU node with
 * exact waits, completion times and time-weighted utilisation; GPU
 * slices (crater) against whole GPUs (k8s-default); a preemption with a
 * stale departure; jobs that never fit; utilisation samples; trace pods
 * that never ran; load scaling; and JobList files with file:line errors.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/hwfile.h"
#include "crater/replay.h"

static crater_kb_t *kb;
static crater_cluster_t *cl;

/* A cluster of n one-node-type nodes with g T4 GPUs each (milli mode). */
static void make_cluster(size_t n, uint32_t g)
{
    crater_trace_node_t t[4];
    crater_error_t err;

    for (size_t i = 0; i < n; i++) {
        memset(&t[i], 0, sizeof(t[i]));
        snprintf(t[i].name, sizeof(t[i].name), "n%zu", i);
        t[i].cpu_milli = 32000;
        t[i].memory_mib = 65536;
        t[i].gpus = g;
        snprintf(t[i].model, sizeof(t[i].model), "T4");
    }
    ck_assert_msg(crater_openb_cluster(t, n, kb, 1, &cl, &err) == 0,
                  "%s",
                  err.text);
}

static void setup(void)
{
    kb = crater_kb_create();
    cl = NULL;
}

static void teardown(void)
{
    crater_cluster_destroy(cl);
    crater_kb_destroy(kb);
}

static crater_trace_pod_t pod(uint32_t gpus, uint32_t milli, crater_qos_t q)
{
    crater_trace_pod_t p;

    memset(&p, 0, sizeof(p));
    snprintf(p.name, sizeof(p.name), "p");
    p.cpu_milli = 1000;
    p.memory_mib = 1024;
    p.num_gpu = gpus;
    p.gpu_milli = milli;
    p.qos = q;
    p.creation = p.scheduled = p.deletion = -1;
    return p;
}

static crater_replay_job_t job(crater_sched_t *s,
                               crater_replay_policy_t pol,
                               crater_trace_pod_t p,
                               uint64_t submit_s,
                               uint64_t run_s)
{
    crater_replay_job_t j;
    crater_error_t err;

    memset(&j, 0, sizeof(j));
    ck_assert_msg(crater_openb_request(s, &p, 1, &j.req, &err) == 0,
                  "%s",
                  err.text);
    j.submit_ms = submit_s * 1000;
    j.runtime_ms = run_s * 1000;
    j.gpu_milli = p.num_gpu == 1 ? p.gpu_milli : p.num_gpu * 1000;
    crater_replay_job_class(&j, crater_replay_class_of_qos(p.qos), pol);
    return j;
}

static crater_sched_t *sched(crater_replay_policy_t pol)
{
    crater_error_t err;
    crater_sched_t *s = crater_replay_sched_create(cl, kb, pol, 1, &err);

    ck_assert_msg(s != NULL, "%s", err.text);
    return s;
}

static void run(crater_sched_t *s,
                crater_replay_job_t *j,
                size_t n,
                bool preempt,
                crater_replay_result_t *r)
{
    crater_replay_opts_t o = {.preempt = preempt, .cluster = cl};
    crater_error_t err;

    ck_assert_msg(crater_replay_run(s, j, n, &o, r, &err) == 0, "%s", err.text);
}

START_TEST(second_whole_gpu_job_waits)
{
    make_cluster(1, 1);
    crater_sched_t *s = sched(CRATER_REPLAY_CRATER);
    crater_replay_job_t j[2] = {
        job(s, CRATER_REPLAY_CRATER, pod(1, 1000, CRATER_QOS_BURSTABLE), 0, 10),
        job(s, CRATER_REPLAY_CRATER, pod(1, 1000, CRATER_QOS_BURSTABLE), 0, 10),
    };
    crater_replay_result_t r;

    run(s, j, 2, true, &r);
    ck_assert_uint_eq(r.completed, 2);
    ck_assert_uint_eq(r.never_started, 0);
    ck_assert_uint_eq(r.t_end_ms, 20000);
    const crater_replay_stats_t *n = &r.cls[CRATER_REPLAY_NORMAL];
    ck_assert_uint_eq(n->jobs, 2);
    ck_assert_double_eq(n->wait_p50, 0);
    ck_assert_double_eq(n->wait_p99, 10);
    ck_assert_double_eq(n->wait_mean, 5);
    ck_assert_double_eq(n->jct_p50, 10);
    ck_assert_double_eq(n->jct_p99, 20);
    /* all arrivals at one instant: utilisation over the whole run */
    ck_assert_double_eq_tol(r.util_gpu_alloc, 1.0, 1e-12);
    ck_assert_double_eq_tol(r.util_gpu_req, 1.0, 1e-12);
    ck_assert_double_eq_tol(r.util_cpu, 1000.0 / 32000.0, 1e-12);
    ck_assert_double_eq(r.gpus, 1);
    ck_assert_uint_eq(crater_sched_class_count(s) > 0, 1);
    crater_replay_result_clear(&r);
    crater_sched_destroy(s);
}
END_TEST

/* Two half-GPU jobs share the GPU under crater; k8s-default gives each a
 * whole GPU, so the second waits and requested utilisation halves. */
START_TEST(slices_versus_whole_gpus)
{
    make_cluster(1, 1);
    crater_replay_result_t r;

    crater_sched_t *s = sched(CRATER_REPLAY_CRATER);
    crater_replay_job_t a[2] = {
        job(s, CRATER_REPLAY_CRATER, pod(1, 500, CRATER_QOS_LS), 0, 10),
        job(s, CRATER_REPLAY_CRATER, pod(1, 500, CRATER_QOS_LS), 0, 10),
    };
    ck_assert_uint_eq(a[0].req.slice_mib, 500);
    run(s, a, 2, true, &r);
    ck_assert_uint_eq(r.t_end_ms, 10000);
    ck_assert_double_eq(r.cls[CRATER_REPLAY_HIGH].wait_p99, 0);
    ck_assert_double_eq_tol(r.util_gpu_alloc, 1.0, 1e-12);
    ck_assert_double_eq_tol(r.util_gpu_req, 1.0, 1e-12);
    crater_replay_result_clear(&r);
    crater_sched_destroy(s);

    s = sched(CRATER_REPLAY_K8S_DEFAULT);
    crater_replay_job_t b[2] = {
        job(s, CRATER_REPLAY_K8S_DEFAULT, pod(1, 500, CRATER_QOS_LS), 0, 10),
        job(s, CRATER_REPLAY_K8S_DEFAULT, pod(1, 500, CRATER_QOS_LS), 0, 10),
    };
    ck_assert_uint_eq(b[0].req.slice_mib, 0);
    ck_assert_uint_eq(b[0].req.gpus, 1);
    ck_assert_double_eq(crater_sched_get_weights(s).joint, 1.0);
    ck_assert_double_eq(crater_sched_get_weights(s).packing, 0.0);
    run(s, b, 2, false, &r);
    ck_assert_uint_eq(r.t_end_ms, 20000);
    ck_assert_double_eq(r.cls[CRATER_REPLAY_HIGH].wait_p99, 10);
    ck_assert_double_eq_tol(r.util_gpu_alloc, 1.0, 1e-12);
    ck_assert_double_eq_tol(r.util_gpu_req, 0.5, 1e-12);
    crater_replay_result_clear(&r);
    crater_sched_destroy(s);
}
END_TEST

/* A BE job holds the GPU; an LS job arriving at 10 s preempts it; the
 * victim resumes at 20 s with 90 s left and ends at 110 s (its original
 * departure at 100 s must be ignored). Without preemption the LS job
 * waits 90 s. */
START_TEST(preemption_requeues_with_remaining_time)
{
    make_cluster(1, 1);
    crater_replay_result_t r;
    crater_sched_t *s = sched(CRATER_REPLAY_CRATER);
    crater_replay_job_t j[2] = {
        job(s, CRATER_REPLAY_CRATER, pod(1, 1000, CRATER_QOS_BE), 0, 100),
        job(s, CRATER_REPLAY_CRATER, pod(1, 1000, CRATER_QOS_LS), 10, 10),
    };

    ck_assert(j[0].req.preemptible);
    ck_assert(!j[1].req.preemptible);
    run(s, j, 2, true, &r);
    ck_assert_uint_eq(r.preemptions, 1);
    ck_assert_uint_eq(r.completed, 2);
    ck_assert_double_eq(r.cls[CRATER_REPLAY_HIGH].wait_p99, 0);
    ck_assert_double_eq(r.cls[CRATER_REPLAY_HIGH].jct_p50, 10);
    ck_assert_double_eq(r.cls[CRATER_REPLAY_LOW].jct_p50, 110);
    ck_assert_double_eq(r.cls[CRATER_REPLAY_LOW].wait_p50, 0);
    ck_assert_uint_eq(r.t_end_ms, 110000);
    /* window [0, 10 s]: the GPU was busy all along */
    ck_assert_double_eq_tol(r.util_gpu_alloc, 1.0, 1e-12);
    ck_assert_double_eq_tol(r.util_gpu_alloc_all, 1.0, 1e-12);
    crater_replay_result_clear(&r);
    crater_sched_destroy(s);

    s = sched(CRATER_REPLAY_K8S_DEFAULT);
    crater_replay_job_t k[2] = {
        job(s, CRATER_REPLAY_K8S_DEFAULT, pod(1, 1000, CRATER_QOS_BE), 0, 100),
        job(s, CRATER_REPLAY_K8S_DEFAULT, pod(1, 1000, CRATER_QOS_LS), 10, 10),
    };
    ck_assert(!k[0].req.preemptible);
    run(s, k, 2, false, &r);
    ck_assert_uint_eq(r.preemptions, 0);
    ck_assert_double_eq(r.cls[CRATER_REPLAY_HIGH].wait_p99, 90);
    ck_assert_uint_eq(r.t_end_ms, 110000);
    crater_replay_result_clear(&r);
    crater_sched_destroy(s);
}
END_TEST

/* Higher priority goes first when both wait; a job too big for any node
 * never starts and does not block the others. */
START_TEST(priority_order_and_never_started)
{
    make_cluster(1, 1);
    crater_replay_result_t r;
    crater_sched_t *s = sched(CRATER_REPLAY_K8S_DEFAULT);
    crater_replay_job_t j[4] = {
        job(s, CRATER_REPLAY_K8S_DEFAULT, pod(1, 1000, CRATER_QOS_BE), 0, 10),
        job(s, CRATER_REPLAY_K8S_DEFAULT, pod(2, 1000, CRATER_QOS_LS), 1, 10),
        job(s, CRATER_REPLAY_K8S_DEFAULT, pod(1, 1000, CRATER_QOS_BE), 2, 10),
        job(s, CRATER_REPLAY_K8S_DEFAULT, pod(1, 1000, CRATER_QOS_LS), 3, 10),
    };

    run(s, j, 4, false, &r);
    ck_assert_uint_eq(r.never_started, 1);
    ck_assert_uint_eq(r.completed, 3);
    /* LS (submitted at 3) runs 10..20, the second BE 20..30 */
    ck_assert_uint_eq(r.cls[CRATER_REPLAY_HIGH].started, 1);
    ck_assert_double_eq(r.cls[CRATER_REPLAY_HIGH].wait_p50, 7);
    ck_assert_double_eq(r.cls[CRATER_REPLAY_LOW].wait_p99, 18);
    ck_assert_uint_eq(r.t_end_ms, 30000);
    crater_replay_result_clear(&r);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(samples_average_each_interval)
{
    make_cluster(1, 2);
    crater_replay_result_t r;
    crater_replay_opts_t o = {.sample_ms = 5000, .cluster = cl};
    crater_error_t err;
    crater_sched_t *s = sched(CRATER_REPLAY_CRATER);
    crater_replay_job_t j[2] = {
        job(s, CRATER_REPLAY_CRATER, pod(1, 1000, CRATER_QOS_LS), 0, 10),
        job(s, CRATER_REPLAY_CRATER, pod(1, 1000, CRATER_QOS_LS), 20, 2),
    };

    ck_assert_int_eq(crater_replay_run(s, j, 2, &o, &r, &err), 0);
    /* buckets [0,5) [5,10) [10,15) [15,20) [20,22) */
    ck_assert_uint_eq(r.nsamples, 5);
    ck_assert_double_eq_tol(r.samples[0].gpu_alloc, 0.5, 1e-12);
    ck_assert_double_eq_tol(r.samples[1].gpu_alloc, 0.5, 1e-12);
    ck_assert_double_eq_tol(r.samples[2].gpu_alloc, 0.0, 1e-12);
    ck_assert_uint_eq(r.samples[4].t_ms, 20000);
    ck_assert_double_eq_tol(r.samples[4].gpu_alloc, 0.5, 1e-12);
    /* window [0, 20 s]: 10 s of one GPU out of two */
    ck_assert_double_eq_tol(r.util_gpu_alloc, 0.25, 1e-12);
    ck_assert_double_eq_tol(r.util_gpu_alloc_all, 12.0 / 44.0, 1e-12);
    json_t *js = crater_replay_result_json(&r, true);
    ck_assert_ptr_nonnull(js);
    ck_assert_int_eq(json_array_size(json_object_get(js, "samples")), 5);
    ck_assert_int_eq(json_integer_value(json_object_get(js, "completed")), 2);
    json_decref(js);
    crater_replay_result_clear(&r);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(trace_pods_that_never_ran_are_skipped)
{
    make_cluster(1, 1);
    crater_sched_t *s = sched(CRATER_REPLAY_CRATER);
    crater_trace_pod_t p[3] = {pod(1, 300, CRATER_QOS_BE),
                               pod(1, 1000, CRATER_QOS_LS),
                               pod(0, 0, CRATER_QOS_BURSTABLE)};
    crater_replay_job_t *j;
    size_t n, skipped;
    crater_error_t err;

    p[0].creation = 100, p[0].scheduled = 105, p[0].deletion = 165;
    p[1].creation = 50; /* pending: never scheduled */
    p[2].creation = 200, p[2].scheduled = 200, p[2].deletion = 201;
    ck_assert_int_eq(crater_replay_jobs_from_trace(s,
                                                   p,
                                                   3,
                                                   CRATER_REPLAY_CRATER,
                                                   &j,
                                                   &n,
                                                   &skipped,
                                                   &err),
                     0);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(skipped, 1);
    ck_assert_uint_eq(j[0].submit_ms, 0);
    ck_assert_uint_eq(j[0].runtime_ms, 60000);
    ck_assert_uint_eq(j[0].gpu_milli, 300);
    ck_assert_int_eq(j[0].cls, CRATER_REPLAY_LOW);
    ck_assert_uint_eq(j[1].submit_ms, 100000);
    ck_assert_int_eq(j[1].cls, CRATER_REPLAY_NORMAL);
    ck_assert_uint_eq(j[1].gpu_milli, 0);
    /* 0.3 GPU for 60 s over a 100 s window on 1 GPU */
    ck_assert_double_eq_tol(crater_replay_offered_load(j, n, 1), 0.18, 1e-12);
    crater_replay_compress(j, n, 4);
    ck_assert_uint_eq(j[1].submit_ms, 25000);
    ck_assert_uint_eq(j[1].runtime_ms, 1000);
    ck_assert_double_eq_tol(crater_replay_offered_load(j, n, 1), 0.72, 1e-12);
    free(j);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(policy_names)
{
    crater_replay_policy_t p;
    crater_error_t err;

    ck_assert_int_eq(crater_replay_policy_parse("crater", &p, &err), 0);
    ck_assert_int_eq(p, CRATER_REPLAY_CRATER);
    ck_assert_int_eq(crater_replay_policy_parse("k8s-default", &p, &err), 0);
    ck_assert_int_eq(p, CRATER_REPLAY_K8S_DEFAULT);
    ck_assert_int_eq(crater_replay_policy_parse("fgd", &p, &err), -1);
    ck_assert_str_eq(err.field, "policy");
    ck_assert_str_eq(err.text,
                     "unknown replay policy 'fgd' (expected "
                     "k8s-default or crater)");
    ck_assert_int_eq(crater_replay_class_of_qos(CRATER_QOS_GUARANTEED),
                     CRATER_REPLAY_HIGH);
    ck_assert_str_eq(crater_replay_class_name(CRATER_REPLAY_LOW), "low");
}
END_TEST

START_TEST(runtime_zero_rejected)
{
    make_cluster(1, 1);
    crater_sched_t *s = sched(CRATER_REPLAY_CRATER);
    crater_replay_job_t j =
        job(s, CRATER_REPLAY_CRATER, pod(1, 1000, CRATER_QOS_LS), 0, 0);
    crater_replay_result_t r;
    crater_error_t err;

    ck_assert_int_eq(crater_replay_run(s, &j, 1, NULL, &r, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_ptr_null(r.samples);
    crater_sched_destroy(s);
}
END_TEST

/* ---- job lists ------------------------------------------------------------
 */

static int parse_list(const char *text,
                      crater_joblist_t **jl,
                      crater_error_t *err)
{
    crater_doc_t *doc;

    if (crater_doc_parse(text, strlen(text), "jobs.yaml", &doc, err) < 0)
        return -1;
    int rc = crater_joblist_decode(doc, jl, err);
    crater_doc_destroy(doc);
    return rc;
}

static const char *good_list = "kind: JobList\n"
                               "jobs:\n"
                               "  - submit: 0s\n"
                               "    duration: 10s\n"
                               "    spec: {name: a, resources: {gpu: 1}}\n"
                               "  - submit: 5s\n"
                               "    duration: 1m\n"
                               "    priorityClass: high\n"
                               "    spec: {name: b, resources: {gpu: 1}}\n";

START_TEST(joblist_replays)
{
    crater_joblist_t *jl;
    crater_error_t err;
    crater_cluster_t *hw;
    crater_replay_job_t *j;
    crater_replay_result_t r;
    size_t n;

    ck_assert_msg(parse_list(good_list, &jl, &err) == 0, "%s", err.text);
    ck_assert_uint_eq(crater_joblist_count(jl), 2);
    ck_assert_msg(crater_hw_load(CRATER_SOURCE_DIR "/examples/hardware/"
                                                   "h100x8.yaml",
                                 kb,
                                 &hw,
                                 &err)
                      == 0,
                  "%s",
                  err.text);
    crater_sched_t *s =
        crater_replay_sched_create(hw, kb, CRATER_REPLAY_CRATER, 0, &err);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(crater_joblist_jobs(jl,
                                         s,
                                         CRATER_REPLAY_CRATER,
                                         &j,
                                         &n,
                                         &err),
                     0);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(j[1].submit_ms, 5000);
    ck_assert_uint_eq(j[1].runtime_ms, 60000);
    ck_assert_int_eq(j[1].cls, CRATER_REPLAY_HIGH);
    ck_assert_int_eq(j[0].cls, CRATER_REPLAY_NORMAL);
    ck_assert_uint_eq(j[0].gpu_milli, 1000);
    crater_replay_opts_t o = {.cluster = hw};
    ck_assert_int_eq(crater_replay_run(s, j, n, &o, &r, &err), 0);
    ck_assert_uint_eq(r.completed, 2);
    ck_assert_uint_eq(r.t_end_ms, 65000);
    crater_replay_result_clear(&r);
    free(j);
    crater_sched_destroy(s);
    crater_cluster_destroy(hw);
    crater_joblist_destroy(jl);
}
END_TEST

static void list_error(const char *text, const char *want)
{
    crater_joblist_t *jl = NULL;
    crater_error_t err;

    ck_assert_int_eq(parse_list(text, &jl, &err), -1);
    ck_assert_msg(strstr(err.text, want) != NULL,
                  "got '%s', want '%s'",
                  err.text,
                  want);
    ck_assert_ptr_null(jl);
}

START_TEST(joblist_errors_name_file_line_and_path)
{
    list_error("kind: JobList\njobs:\n  - submit: 0s\n    duration: 10s\n"
               "    spec: {name: a, resources: {gpu: 1, cpuu: 2}}\n",
               "jobs.yaml:5:");
    list_error("kind: JobList\njobs:\n  - submit: 0s\n    duration: 10s\n"
               "    spec: {name: a, resources: {gpu: 1, cpuu: 2}}\n",
               "jobs[0].spec.resources");
    list_error("kind: JobList\njobs:\n  - submit: 10GB\n    duration: 1s\n"
               "    spec: {name: a}\n",
               "jobs.yaml:3:");
    list_error("kind: JobList\njobs:\n  - submit: 0s\n    duration: 0s\n"
               "    spec: {name: a}\n",
               "duration must be at least 1ms");
    list_error("kind: JobList\njobs:\n  - submit: 0s\n    spec: {name: a}\n",
               "duration");
    list_error("kind: JobList\njobs:\n  - submit: 0s\n    duration: 1s\n"
               "    priorityClass: urgent\n    spec: {name: a}\n",
               "jobs.yaml:5:");
    list_error("kind: Job\njobs: []\n", "kind");
    list_error("kind: JobList\njobs: []\nextra: 1\n", "extra");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("replay");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, second_whole_gpu_job_waits);
    tcase_add_test(tc, slices_versus_whole_gpus);
    tcase_add_test(tc, preemption_requeues_with_remaining_time);
    tcase_add_test(tc, priority_order_and_never_started);
    tcase_add_test(tc, samples_average_each_interval);
    tcase_add_test(tc, trace_pods_that_never_ran_are_skipped);
    tcase_add_test(tc, policy_names);
    tcase_add_test(tc, runtime_zero_rejected);
    tcase_add_test(tc, joblist_replays);
    tcase_add_test(tc, joblist_errors_name_file_line_and_path);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
