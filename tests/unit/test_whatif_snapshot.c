/* test_whatif_snapshot.c - the live cluster's snapshot as a replay (whatif.h):
 * the cluster rebuilt from the nodes' hardware documents, a running job pinned
 * on its placement for the time its timeLimit leaves, pending jobs in queue
 * order with assumed run times, gangs and other states left out, errors naming
 * the field; then the replay from the snapshot, with and without a horizon.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "crater/hwfile.h"
#include "crater/whatif.h"

#define MIN_MS 60000ull
#define NOW_MS 1000000000ull

static crater_kb_t *kb;
static json_t *nodes, *jobs;

/* One node, gpu-a100-0 (two A100 80GB), as GET /api/v1/nodes?hardware=1
 * gives it. */
static json_t *node_items(void)
{
    crater_cluster_t *c = NULL;
    crater_error_t err;
    json_t *hw;

    ck_assert_msg(crater_hw_load(CRATER_SOURCE_DIR "/examples/hardware/"
                                                   "a2-a100.yaml",
                                 kb,
                                 &c,
                                 &err)
                      == 0,
                  "%s",
                  err.text);
    hw = crater_hw_encode_node(&c->nodes[0]);
    crater_cluster_destroy(c);
    return json_pack("[{s:s, s:s, s:b, s:o}]",
                     "name",
                     "gpu-a100-0",
                     "state",
                     "Ready",
                     "cordoned",
                     0,
                     "hardware",
                     hw);
}

static json_t *spec(int gpus, const char *limit, int replicas)
{
    json_t *s = json_pack("{s:s, s:[s], s:{s:{s:i}, s:i, s:s}}",
                          "name",
                          "j",
                          "command",
                          "true",
                          "resources",
                          "gpu",
                          "count",
                          gpus,
                          "cpu",
                          1,
                          "memory",
                          "1Gi");
    if (limit)
        json_object_set_new(s, "timeLimit", json_string(limit));
    if (replicas > 1)
        json_object_set_new(s, "replicas", json_integer(replicas));
    return s;
}

static json_t *job(
    const char *id, const char *state, int prio, uint64_t submitted, json_t *sp)
{
    return json_pack("{s:s, s:s, s:i, s:I, s:o}",
                     "id",
                     id,
                     "state",
                     state,
                     "priority",
                     prio,
                     "submitted_ms",
                     (json_int_t)submitted,
                     "spec",
                     sp);
}

/* Job 1 runs on GPU 0 since 30 min with a 2 h limit; job 2 (2 GPUs, no
 * limit) and job 3 (high priority, 10 min limit) wait; job 4 is a gang,
 * job 5 has ended. */
static void setup(void)
{
    json_t *r;

    kb = crater_kb_create();
    nodes = node_items();
    r = job("1", "running", 0, NOW_MS - 40 * MIN_MS, spec(1, "2h", 1));
    json_object_set_new(r, "started_ms", json_integer(NOW_MS - 30 * MIN_MS));
    json_object_set_new(r,
                        "placement",
                        json_pack("{s:s, s:[{s:i, s:I}], s:b, s:i, s:I, s:I, "
                                  "s:[{s:I, s:I}]}",
                                  "node",
                                  "gpu-a100-0",
                                  "gpus",
                                  "index",
                                  0,
                                  "memory_bytes",
                                  (json_int_t)80 << 30,
                                  "whole_gpus",
                                  1,
                                  "numa",
                                  0,
                                  "cpu_millis",
                                  (json_int_t)1000,
                                  "memory_bytes",
                                  (json_int_t)1 << 30,
                                  "numa_charges",
                                  "cpu_millis",
                                  (json_int_t)1000,
                                  "memory_bytes",
                                  (json_int_t)1 << 30));
    jobs = json_pack("[o, o, o, o, o]",
                     r,
                     job("2",
                         "pending",
                         0,
                         NOW_MS - 20 * MIN_MS,
                         spec(2, NULL, 1)),
                     job("3",
                         "pending",
                         1000,
                         NOW_MS - 5 * MIN_MS,
                         spec(1, "10m", 1)),
                     job("4", "pending", 0, NOW_MS, spec(1, NULL, 2)),
                     job("5", "succeeded", 0, NOW_MS, spec(1, NULL, 1)));
}

static void teardown(void)
{
    json_decref(nodes);
    json_decref(jobs);
    crater_kb_destroy(kb);
}

START_TEST(snapshot_from_the_api)
{
    crater_whatif_t w;
    crater_error_t err;

    ck_assert_msg(crater_whatif_build(nodes,
                                      jobs,
                                      NOW_MS,
                                      60 * MIN_MS,
                                      kb,
                                      &w,
                                      &err)
                      == 0,
                  "%s",
                  err.text);
    ck_assert_uint_eq(w.cluster->nnodes, 1);
    ck_assert_uint_eq(w.cluster->nodes[0].ngpus, 2);
    ck_assert(!w.unavailable[0]);
    ck_assert_uint_eq(w.njobs, 3);
    ck_assert_uint_eq(w.nrunning, 1);
    ck_assert_uint_eq(w.npending, 2);
    ck_assert_uint_eq(w.skipped, 1); /* the gang */
    ck_assert_uint_eq(w.nassumed, 1);
    /* running first: 2 h limit less 30 min run */
    ck_assert_str_eq(w.jobs[0].id, "1");
    ck_assert(w.jobs[0].running);
    ck_assert_uint_eq(w.jobs[0].runtime_ms, 90 * MIN_MS);
    ck_assert_uint_eq(w.jobs[0].pl.ngpus, 1);
    ck_assert_uint_eq(w.jobs[0].pl.gpu_mib[0], 80 * 1024);
    ck_assert_uint_eq(w.jobs[0].pl.numa_cpu[0], 1000);
    /* then the queue: the high-priority job first though younger */
    ck_assert_str_eq(w.jobs[1].id, "3");
    ck_assert_uint_eq(w.jobs[1].runtime_ms, 10 * MIN_MS);
    ck_assert_str_eq(w.jobs[2].id, "2");
    ck_assert(w.jobs[2].assumed);
    ck_assert_uint_eq(w.jobs[2].runtime_ms, 60 * MIN_MS);
    crater_whatif_clear(&w);
    crater_whatif_clear(NULL);
}
END_TEST

START_TEST(errors_name_the_field)
{
    crater_whatif_t w;
    crater_error_t err;
    json_t *p = json_object_get(json_array_get(jobs, 0), "placement");

    json_object_set_new(p, "node", json_string("gone"));
    ck_assert_int_eq(crater_whatif_build(nodes,
                                         jobs,
                                         NOW_MS,
                                         MIN_MS,
                                         kb,
                                         &w,
                                         &err),
                     -1);
    ck_assert_str_eq(err.field, "placement.node");
    ck_assert_ptr_nonnull(strstr(err.text, "jobs[0].placement.node"));
    ck_assert_ptr_null(w.cluster); /* nothing left behind */
    json_object_del(json_array_get(nodes, 0), "hardware");
    ck_assert_int_eq(crater_whatif_build(nodes,
                                         jobs,
                                         NOW_MS,
                                         MIN_MS,
                                         kb,
                                         &w,
                                         &err),
                     -1);
    ck_assert_ptr_nonnull(strstr(err.text, "nodes[0].hardware: missing"));
    ck_assert_int_eq(crater_whatif_build(nodes, jobs, NOW_MS, 0, kb, &w, &err),
                     -1);
}
END_TEST

struct starts {
    size_t n;
    size_t job[8];
    uint64_t t[8];
};

static void on_start(void *arg,
                     size_t j,
                     const crater_placement_t *p,
                     uint64_t t)
{
    struct starts *s = arg;

    (void)p;
    s->job[s->n] = j;
    s->t[s->n++] = t;
}

/* The running job holds GPU 0 until 90 min: the high-priority job takes
 * GPU 1 now, the 2-GPU job starts when both have ended. */
static void replay(uint64_t horizon, struct starts *st, size_t *never)
{
    crater_whatif_t w;
    crater_error_t err;
    crater_config_t cfg;
    crater_replay_job_t *rj = NULL;
    crater_replay_result_t res;
    crater_replay_opts_t o = {.preempt = true,
                              .sample_ms = MIN_MS,
                              .on_start = on_start,
                              .on_start_arg = st,
                              .horizon_ms = horizon};
    crater_sched_t *s;

    ck_assert(
        crater_whatif_build(nodes, jobs, NOW_MS, 60 * MIN_MS, kb, &w, &err)
        == 0);
    ck_assert(crater_config_defaults(&cfg) == 0);
    s = crater_sched_create(&cfg, kb, NULL);
    crater_config_clear(&cfg);
    ck_assert(crater_sched_add_node(s, &w.cluster->nodes[0], &err) == 0);
    ck_assert(crater_whatif_apply_nodes(&w, s, &err) == 0);
    ck_assert_msg(crater_whatif_jobs(&w, s, &rj, &err) == 0, "%s", err.text);
    ck_assert_ptr_eq(rj[0].pin, &w.jobs[0].pl);
    ck_assert_msg(crater_replay_run(s, rj, w.njobs, &o, &res, &err) == 0,
                  "%s",
                  err.text);
    *never = res.never_started;
    /* the core is left empty: the pinned job's placement fits again */
    ck_assert(crater_sched_commit(s, 99, &rj[0].req, &w.jobs[0].pl, &err) == 0);
    crater_replay_result_clear(&res);
    free(rj);
    crater_sched_destroy(s);
    crater_whatif_clear(&w);
}

START_TEST(replay_from_the_snapshot)
{
    struct starts st = {0};
    size_t never;

    replay(0, &st, &never);
    ck_assert_uint_eq(st.n, 2); /* the pinned job is not started again */
    ck_assert_uint_eq(st.job[0], 1);
    ck_assert_uint_eq(st.t[0], 0);
    ck_assert_uint_eq(st.job[1], 2);
    ck_assert_uint_eq(st.t[1], 90 * MIN_MS);
    ck_assert_uint_eq(never, 0);
    memset(&st, 0, sizeof(st));
    replay(60 * MIN_MS, &st, &never); /* stops before the 2-GPU job */
    ck_assert_uint_eq(st.n, 1);
    ck_assert_uint_eq(never, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("whatif");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, snapshot_from_the_api);
    tcase_add_test(tc, errors_name_the_field);
    tcase_add_test(tc, replay_from_the_snapshot);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
