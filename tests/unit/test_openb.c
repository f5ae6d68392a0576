/* test_openb.c - the openb trace loaders (src/sim/openb.c): rows, short
 * pod lists, every malformed-row error with its exact "file:line: column
 * NAME: reason" text, the cluster built from node rows (milli mode and
 * knowledge-base memory) and the requests built from pod rows.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "crater/sim.h"

#define OB(f) CRATER_SOURCE_DIR "/tests/data/openb/" f

static void expect_pod_error(const char *path,
                             const char *tail,
                             const char *field)
{
    crater_trace_pod_t *pods = NULL;
    crater_error_t err;
    char want[CRATER_ERROR_TEXT];
    size_t n = 0;

    snprintf(want, sizeof(want), "%s:%s", path, tail);
    ck_assert_int_eq(crater_openb_load_pods(path, &pods, &n, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EPARSE);
    ck_assert_str_eq(err.text, want);
    ck_assert_str_eq(err.field, field);
    ck_assert_ptr_null(pods);
}

static void expect_node_error(const char *path,
                              const char *tail,
                              const char *field)
{
    crater_trace_node_t *nodes = NULL;
    crater_error_t err;
    char want[CRATER_ERROR_TEXT];
    size_t n = 0;

    snprintf(want, sizeof(want), "%s:%s", path, tail);
    ck_assert_int_eq(crater_openb_load_nodes(path, &nodes, &n, &err), -1);
    ck_assert_str_eq(err.text, want);
    ck_assert_str_eq(err.field, field);
}

START_TEST(test_pods_rows)
{
    crater_trace_pod_t *p;
    crater_error_t err;
    size_t n;

    ck_assert_int_eq(crater_openb_load_pods(OB("pods.csv"), &p, &n, &err), 0);
    ck_assert_uint_eq(n, 5);
    ck_assert_str_eq(p[1].name, "openb-pod-0001");
    ck_assert_uint_eq(p[1].cpu_milli, 6000);
    ck_assert_uint_eq(p[1].memory_mib, 12288);
    ck_assert_uint_eq(p[1].num_gpu, 1);
    ck_assert_uint_eq(p[1].gpu_milli, 460);
    ck_assert_int_eq(p[1].qos, CRATER_QOS_LS);
    ck_assert_int_eq(p[1].creation, 427061);
    ck_assert_int_eq(p[1].deletion, 12902960);
    ck_assert_uint_eq(p[2].num_gpu, 8);
    ck_assert_str_eq(p[2].gpu_spec, "G2");
    ck_assert_int_eq(p[2].qos, CRATER_QOS_BURSTABLE);
    ck_assert_int_eq(p[2].scheduled, -1);
    ck_assert_int_eq(p[3].qos, CRATER_QOS_BE);
    ck_assert_str_eq(p[4].gpu_spec, "T4|P100");
    ck_assert_int_eq(p[4].qos, CRATER_QOS_GUARANTEED);
    ck_assert_int_eq(p[4].deletion, -1);
    crater_trace_free(p);
}
END_TEST

START_TEST(test_pods_short_list)
{
    crater_trace_pod_t *p;
    crater_error_t err;
    size_t n;

    ck_assert_int_eq(crater_openb_load_pods(OB("pods_short.csv"), &p, &n, &err),
                     0);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(p[1].gpu_milli, 460);
    ck_assert_str_eq(p[1].gpu_spec, "");
    ck_assert_int_eq(p[1].creation, -1);
    crater_trace_free(p);
}
END_TEST

START_TEST(test_pod_errors)
{
    expect_pod_error(OB("bad_number.csv"),
                     "3: column cpu_milli: bad number '12x'",
                     "cpu_milli");
    expect_pod_error(OB("negative.csv"),
                     "2: column memory_mib: negative value '-5'",
                     "memory_mib");
    expect_pod_error(OB("milli_over.csv"),
                     "2: column gpu_milli: 1200 is more than one GPU (1000)",
                     "gpu_milli");
    expect_pod_error(OB("multi_share.csv"),
                     "2: column gpu_milli: 500 with num_gpu 2: a multi-GPU pod "
                     "takes whole GPUs "
                     "(1000)",
                     "gpu_milli");
    expect_pod_error(OB("bad_qos.csv"),
                     "2: column qos: unknown qos 'XX' (LS, Guaranteed, "
                     "Burstable, BE)",
                     "qos");
    expect_pod_error(OB("missing_col.csv"),
                     "1: column gpu_milli: missing from the header",
                     "gpu_milli");
    expect_pod_error(OB("unknown_col.csv"),
                     "1: column colour: unknown column",
                     "colour");
    expect_pod_error(OB("short_row.csv"),
                     "2: column gpu_spec: missing (5 of 11 fields)",
                     "gpu_spec");
}
END_TEST

START_TEST(test_missing_file)
{
    crater_trace_pod_t *p;
    crater_error_t err;
    size_t n;

    ck_assert_int_eq(crater_openb_load_pods(OB("nope.csv"), &p, &n, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EIO);
    ck_assert_str_eq(err.text, OB("nope.csv") ": No such file or directory");
}
END_TEST

START_TEST(test_node_errors)
{
    expect_node_error(OB("node_cpu.csv"),
                      "2: column cpu_milli: 1500 is not a whole number of CPUs",
                      "cpu_milli");
    expect_node_error(OB("node_model.csv"),
                      "2: column model: empty for a node with 2 GPUs",
                      "model");
    expect_node_error(OB("pods.csv"), "1: column name: unknown column", "name");
}
END_TEST

static crater_sched_t *cluster_sched(crater_kb_t *kb,
                                     int milli,
                                     crater_cluster_t **cl,
                                     crater_config_t *cfg)
{
    crater_trace_node_t *nodes;
    crater_error_t err;
    crater_sched_t *s;
    size_t n;

    ck_assert_int_eq(crater_openb_load_nodes(OB("nodes.csv"), &nodes, &n, &err),
                     0);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(crater_openb_cluster(nodes, n, kb, milli, cl, &err), 0);
    crater_trace_nodes_free(nodes);
    ck_assert_int_eq(crater_config_defaults(cfg), 0);
    cfg->scheduler.gpu_context_overhead = 0;
    s = crater_sched_create(cfg, kb, NULL);
    ck_assert_ptr_nonnull(s);
    for (size_t i = 0; i < (*cl)->nnodes; i++)
        ck_assert_int_eq(crater_sched_add_node(s, &(*cl)->nodes[i], &err),
                         (int)i);
    return s;
}

START_TEST(test_cluster_milli)
{
    crater_kb_t *kb = crater_kb_create();
    crater_cluster_t *cl;
    crater_config_t cfg;
    crater_sched_t *s = cluster_sched(kb, 1, &cl, &cfg);
    const crater_node_t *g2 = &cl->nodes[1];

    ck_assert_str_eq(g2->name, "openb-node-0001");
    ck_assert_uint_eq(g2->ngpus, 8);
    ck_assert_str_eq(g2->gpus[0].model,
                     "g2"); /* unknown to the kb: lowercased */
    ck_assert_uint_eq(g2->gpus[7].memory_bytes, 1000ull << 20);
    ck_assert_uint_eq(crater_node_cpu_milli(g2), 96000);
    ck_assert_uint_eq(crater_node_memory_bytes(g2), 786432ull << 20);
    ck_assert_uint_eq(cl->nodes[3].ngpus, 0);
    ck_assert_uint_eq(cl->nodes[0].gpus[1].memory_bytes, 1000ull << 20);
    crater_sched_destroy(s);
    crater_cluster_destroy(cl);
    crater_config_clear(&cfg);
    crater_kb_destroy(kb);
}
END_TEST

START_TEST(test_requests)
{
    crater_kb_t *kb = crater_kb_create();
    crater_cluster_t *cl;
    crater_config_t cfg;
    crater_sched_t *s = cluster_sched(kb, 1, &cl, &cfg);
    crater_trace_pod_t *p;
    crater_request_t r;
    crater_error_t err;
    size_t n;

    ck_assert_int_eq(crater_openb_load_pods(OB("pods.csv"), &p, &n, &err), 0);
    ck_assert_int_eq(crater_openb_request(s, &p[0], 1, &r, &err), 0);
    ck_assert_uint_eq(r.gpus, 1);
    ck_assert_uint_eq(r.slice_mib, 0);
    ck_assert_uint_eq(r.cpu_milli, 12000);
    ck_assert_uint_eq(r.mem_bytes, 16384ull << 20);
    ck_assert_int_eq(crater_openb_request(s, &p[1], 1, &r, &err), 0);
    ck_assert_uint_eq(r.slice_mib, 460);
    ck_assert_int_eq(crater_openb_request(s, &p[2], 1, &r, &err), 0);
    ck_assert_uint_eq(r.gpus, 8);
    ck_assert_uint_eq(r.model_mask, 1ull << crater_sched_model_id(s, "g2"));
    ck_assert_int_eq(crater_openb_request(s, &p[3], 1, &r, &err), 0);
    ck_assert_uint_eq(r.gpus, 0);
    ck_assert(r.preemptible);
    ck_assert_int_eq(crater_openb_request(s, &p[4], 1, &r, &err), 0);
    int t4 = crater_sched_model_id(s, cl->nodes[2].gpus[0].model);
    int p100 = crater_sched_model_id(s, cl->nodes[0].gpus[0].model);
    ck_assert_int_ge(t4, 0);
    ck_assert_int_ge(p100, 0);
    ck_assert_uint_eq(r.model_mask, (1ull << t4) | (1ull << p100));
    /* the share goes to a P100 or T4 node, never the G2 */
    crater_placement_t pl;
    ck_assert_int_eq(crater_sched_place(s, &r, &pl, &err), 0);
    ck_assert_uint_ne(pl.node, 1);
    crater_trace_free(p);
    crater_sched_destroy(s);
    crater_cluster_destroy(cl);
    crater_config_clear(&cfg);
    crater_kb_destroy(kb);
}
END_TEST

/* Outside milli mode a share is share x the smallest allowed GPU's memory
 * from the knowledge base. */
START_TEST(test_requests_kb_memory)
{
    crater_kb_t *kb = crater_kb_create();
    crater_cluster_t *cl;
    crater_config_t cfg;
    crater_sched_t *s = cluster_sched(kb, 0, &cl, &cfg);
    crater_trace_pod_t *p;
    crater_request_t r;
    crater_error_t err;
    size_t n;
    uint64_t t4 = cl->nodes[2].gpus[0].memory_bytes >> 20;
    uint64_t p100 = cl->nodes[0].gpus[0].memory_bytes >> 20;

    ck_assert_uint_ne(t4, 1000); /* known models: kb memory */
    ck_assert_uint_eq(cl->nodes[1].gpus[0].memory_bytes,
                      1000ull << 20); /* G2: unknown */
    ck_assert_int_eq(crater_openb_load_pods(OB("pods.csv"), &p, &n, &err), 0);
    ck_assert_int_eq(crater_openb_request(s, &p[4], 0, &r, &err), 0);
    ck_assert_uint_eq(r.slice_mib, (t4 < p100 ? t4 : p100) * 500 / 1000);
    crater_trace_free(p);
    crater_sched_destroy(s);
    crater_cluster_destroy(cl);
    crater_config_clear(&cfg);
    crater_kb_destroy(kb);
}
END_TEST

START_TEST(test_openb_dir_env)
{
    setenv("CRATER_OPENB_DIR", OB(""), 1); /* no node list there */
    ck_assert_ptr_null(crater_openb_dir());
    unsetenv("CRATER_OPENB_DIR");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("openb");
    TCase *tc = tcase_create("loaders");

    tcase_add_test(tc, test_pods_rows);
    tcase_add_test(tc, test_pods_short_list);
    tcase_add_test(tc, test_pod_errors);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_node_errors);
    tcase_add_test(tc, test_cluster_milli);
    tcase_add_test(tc, test_requests);
    tcase_add_test(tc, test_requests_kb_memory);
    tcase_add_test(tc, test_openb_dir_env);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failures;

    srunner_run_all(sr, CK_NORMAL);
    failures = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failures ? 1 : 0;
}
