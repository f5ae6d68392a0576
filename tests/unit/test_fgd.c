/* test_fgd.c - the FGD protocol driver (src/sim/fgd.c) and the scheduling
 * policies (src/sched/policy*.c): exact allocation curves on tiny traces,
 * determinism by seed, the typical-pod rule, one placement check per
 * policy where the policies differ, and fast path == brute force for every
 * deterministic policy. The full openb data is used when present (a
 * BestFit run on the default trace); otherwise that test says it skipped.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/fgd.h"

#define OB(f) CRATER_SOURCE_DIR "/tests/data/openb/" f

struct trace {
    crater_trace_node_t *nodes;
    size_t nn;
    crater_trace_pod_t *pods;
    size_t np;
};

static void load(struct trace *t, const char *nodes, const char *pods)
{
    crater_error_t err;

    ck_assert_msg(crater_openb_load_nodes(nodes, &t->nodes, &t->nn, &err) == 0,
                  "%s",
                  err.text);
    ck_assert_msg(crater_openb_load_pods(pods, &t->pods, &t->np, &err) == 0,
                  "%s",
                  err.text);
}

static void unload(struct trace *t)
{
    crater_trace_nodes_free(t->nodes);
    crater_trace_free(t->pods);
}

static void run(const struct trace *t,
                const char *policy,
                uint64_t seed,
                crater_fgd_result_t *r)
{
    crater_fgd_opts_t o = {policy, seed, 1.3, 95};
    crater_error_t err;

    ck_assert_msg(crater_fgd_run(t->nodes,
                                 t->nn,
                                 t->pods,
                                 t->np,
                                 NULL,
                                 &o,
                                 r,
                                 &err)
                      == 0,
                  "%s",
                  err.text);
}

/* 4 x half a GPU on one 2-GPU node: the trace fills it exactly; one more
 * half arrives (125%), the next would pass 130%. Any seed, any policy. */
START_TEST(test_four_halves)
{
    static const char *const pols[] =
        {"crater", "random", "bestfit", "fgd", "dotprod", NULL};
    struct trace t;
    crater_fgd_result_t r;

    load(&t, OB("one_node.csv"), OB("four_halves.csv"));
    for (int i = 0; pols[i]; i++) {
        run(&t, pols[i], 7, &r);
        ck_assert_uint_eq(r.capacity_milli, 2000);
        ck_assert_uint_eq(r.arrived, 5);
        ck_assert_uint_eq(r.placed, 4);
        ck_assert_uint_eq(r.dropped, 1);
        ck_assert_double_eq(r.alloc[0], 25);
        ck_assert_double_eq(r.alloc[25], 25);
        ck_assert_double_eq(r.alloc[26], 50);
        ck_assert_double_eq(r.alloc[100], 100);
        ck_assert_double_eq(r.alloc[130], 100);
        ck_assert_double_eq(r.unallocated_gpus_at_130, 0);
        ck_assert_double_eq(r.frag_pct_at_100, 0);
    }
    unload(&t);
}
END_TEST

/* 0.6 GPU pods on one 2-GPU node: two fit, 0.4 of each GPU is stranded,
 * and that is fragmentation for the only typical pod (0.6). */
START_TEST(test_one_share)
{
    struct trace t;
    crater_fgd_result_t r;

    load(&t, OB("one_node.csv"), OB("one_share.csv"));
    run(&t, "bestfit", 42, &r);
    ck_assert_uint_eq(r.arrived, 4); /* 600, 1200, 1800, 2400 <= 2600 */
    ck_assert_uint_eq(r.placed, 2);
    ck_assert_double_eq(r.alloc[30], 30);
    ck_assert_double_eq(r.alloc[31], 60);
    ck_assert_double_eq(r.alloc[130], 60);
    ck_assert_double_eq_tol(r.unallocated_gpus_at_130, 0.8, 1e-9);
    ck_assert_double_eq_tol(r.unallocated_gpus_at_100, 0.8, 1e-9);
    ck_assert_double_eq_tol(r.frag_pct_at_100, 40, 1e-9);
    ck_assert_double_eq_tol(r.frag_ratio_at_100, 100, 1e-9);
    ck_assert_uint_eq(r.typical, 1);
    /* the end state: two GPUs with 0.4 free each, nothing else; the node
     * has CPU left */
    for (int k = 0; k < 11; k++)
        ck_assert_double_eq_tol(r.end_room[k], k == 4 ? 0.8 : 0, 1e-9);
    ck_assert_double_eq_tol(r.end_room_cpu_starved, 0, 1e-9);
    unload(&t);
}
END_TEST

START_TEST(test_deterministic)
{
    struct trace t;
    crater_fgd_result_t a, b;

    load(&t, OB("nodes.csv"), OB("pods.csv"));
    for (int p = 0; p < 2; p++) {
        const char *pol = p ? "random" : "fgd";
        run(&t, pol, 3, &a);
        run(&t, pol, 3, &b);
        ck_assert_mem_eq(a.alloc, b.alloc, sizeof(a.alloc));
        ck_assert_uint_eq(a.placed, b.placed);
        ck_assert_uint_eq(a.arrived, b.arrived);
    }
    unload(&t);
}
END_TEST

/* Five shapes once each: all needed for 95%, larger shapes first on equal
 * counts; 50% takes three. */
START_TEST(test_typical)
{
    crater_config_t cfg;
    crater_sched_t *s;
    crater_typical_t *ty;
    crater_error_t err;
    struct trace t;
    size_t n;

    load(&t, OB("nodes.csv"), OB("pods.csv"));
    ck_assert_int_eq(crater_config_defaults(&cfg), 0);
    s = crater_sched_create(&cfg, NULL, NULL);
    ck_assert_int_eq(crater_fgd_typical(s, t.pods, t.np, 95, &ty, &n, &err), 0);
    ck_assert_uint_eq(n, 5);
    ck_assert_uint_eq(ty[0].cpu_milli, 88000);
    ck_assert_uint_eq(ty[0].gpus, 8);
    ck_assert_uint_eq(ty[4].cpu_milli, 4000);
    ck_assert_uint_eq(ty[4].slice, 500);
    ck_assert_double_eq_tol(ty[2].weight, 0.2, 1e-12);
    free(ty);
    ck_assert_int_eq(crater_fgd_typical(s, t.pods, t.np, 50, &ty, &n, &err), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_double_eq_tol(ty[0].weight, 1.0 / 3, 1e-12);
    free(ty);
    crater_sched_destroy(s);
    crater_config_clear(&cfg);
    unload(&t);
}
END_TEST

/* ---- policies in the core
 * ------------------------------------------------------ */

static uint64_t counter_random(void *arg)
{
    uint64_t *st = arg;
    return crater_splitmix64(st);
}

struct core {
    crater_config_t cfg;
    crater_cluster_t *cl;
    crater_sched_t *s;
    uint64_t rng;
};

/* Milli-mode cluster from a node file, each row copies times. */
static void core_init(struct core *c, const char *nodes, int copies)
{
    crater_trace_node_t *rows, *many;
    crater_sched_env_t env = {NULL, counter_random, &c->rng};
    crater_error_t err;
    size_t n;

    c->rng = 1;
    ck_assert_int_eq(crater_openb_load_nodes(nodes, &rows, &n, &err), 0);
    many = calloc(n * (size_t)copies, sizeof(*many));
    for (int k = 0; k < copies; k++)
        for (size_t i = 0; i < n; i++) {
            many[(size_t)k * n + i] = rows[i];
            snprintf(many[(size_t)k * n + i].name,
                     sizeof(rows[i].name),
                     "%.32s-%d",
                     rows[i].name,
                     k);
        }
    ck_assert_int_eq(crater_openb_cluster(many,
                                          n * (size_t)copies,
                                          NULL,
                                          1,
                                          &c->cl,
                                          &err),
                     0);
    free(many);
    crater_trace_nodes_free(rows);
    ck_assert_int_eq(crater_config_defaults(&c->cfg), 0);
    c->cfg.scheduler.gpu_context_overhead = 0;
    c->cfg.scheduler.max_tasks_per_gpu = 255;
    c->cfg.scheduler.overcommit_ratio = 1.0;
    c->s = crater_sched_create(&c->cfg, NULL, &env);
    for (size_t i = 0; i < c->cl->nnodes; i++)
        ck_assert_int_ge(crater_sched_add_node(c->s, &c->cl->nodes[i], &err),
                         0);
}

static void core_free(struct core *c)
{
    crater_sched_destroy(c->s);
    crater_cluster_destroy(c->cl);
    crater_config_clear(&c->cfg);
}

static crater_request_t share(uint32_t milli)
{
    crater_request_t r;

    memset(&r, 0, sizeof(r));
    r.gpus = 1;
    r.slice_mib = milli;
    r.cpu_milli = 1000;
    r.mem_bytes = 1ull << 30;
    r.numa = CRATER_NUMA_NONE;
    return r;
}

/* Two 2-GPU nodes; node 0 GPU 0 holds 0.3 GPU. A 0.5 share: */
static crater_placement_t place_half(const char *policy, int typical)
{
    struct core c;
    crater_request_t r = share(300);
    crater_placement_t p;
    crater_typical_t ty = {1000, 1, 500, 0, 1.0};
    crater_error_t err;

    core_init(&c, OB("two_nodes.csv"), 1);
    ck_assert_int_eq(crater_sched_place(c.s, &r, &p, &err), 0);
    ck_assert_uint_eq(p.node, 0);
    ck_assert_uint_eq(p.gpu[0], 0);
    ck_assert_int_eq(crater_sched_commit(c.s, 1, &r, &p, &err), 0);
    ck_assert_int_eq(crater_sched_set_policy(c.s, policy, &err), 0);
    ck_assert_str_eq(crater_sched_policy(c.s), policy);
    if (typical)
        ck_assert_int_eq(crater_sched_set_typical(c.s, &ty, 1, &err), 0);
    r = share(500);
    ck_assert_int_eq(crater_sched_place(c.s, &r, &p, &err), 0);
    core_free(&c);
    return p;
}

START_TEST(test_policy_choices)
{
    crater_placement_t p;

    p = place_half("bestfit", 0); /* tightest GPU: 0.7 left */
    ck_assert_uint_eq(p.node, 0);
    ck_assert_uint_eq(p.gpu[0], 0);
    p = place_half("gpupacking", 0); /* a shared GPU first */
    ck_assert_uint_eq(p.node, 0);
    ck_assert_uint_eq(p.gpu[0], 0);
    p = place_half("fgd", 1); /* 0.2 left on GPU 0 would strand a 0.5 pod */
    ck_assert_uint_eq(p.node, 0);
    ck_assert_uint_eq(p.gpu[0], 1);
    p = place_half("crater", 1);
    ck_assert_uint_eq(p.node, 0);
    ck_assert_uint_eq(p.gpu[0], 1);
    p = place_half("k8s", 0); /* whole GPU, the emptier node */
    ck_assert_uint_eq(p.node, 1);
    ck_assert(p.whole);
    ck_assert_uint_eq(p.gpu_mib[0], 1000);
}
END_TEST

START_TEST(test_policy_random)
{
    struct core c;
    crater_request_t r = share(500);
    crater_placement_t p;
    crater_error_t err;
    int hits[8] = {0};

    core_init(&c, OB("two_nodes.csv"), 4); /* 8 identical nodes: one class */
    ck_assert_int_eq(crater_sched_set_policy(c.s, "random", &err), 0);
    for (int i = 0; i < 800; i++) {
        ck_assert_int_eq(crater_sched_place(c.s, &r, &p, &err), 0);
        hits[p.node]++;
    }
    for (int i = 0; i < 8; i++)
        ck_assert_msg(hits[i] > 50 && hits[i] < 150,
                      "node %d drawn %d times of 800",
                      i,
                      hits[i]);
    core_free(&c);
}
END_TEST

START_TEST(test_policy_unknown)
{
    struct core c;
    crater_error_t err;

    core_init(&c, OB("two_nodes.csv"), 1);
    ck_assert_int_eq(crater_sched_set_policy(c.s, "tetris", &err), -1);
    ck_assert_str_eq(err.text,
                     "unknown policy 'tetris' (crater, random, dotprod, "
                     "gpuclustering, "
                     "gpupacking, bestfit, fgd, k8s)");
    ck_assert_str_eq(err.field, "policy");
    ck_assert_str_eq(crater_sched_policy(c.s), "crater");
    core_free(&c);
}
END_TEST

/* Every deterministic policy: the class fast path and the brute-force scan
 * make the same decisions on a mixed sequence (two clusters, each
 * committing its own decisions). */
/* Place n pods drawn from pods (splitmix64 from seed) on two copies of the
 * cluster in nodes (copies times), one through crater_sched_place() and
 * one through the brute force, with policy and the pods' typical tasks;
 * every decision must be the same. */
static void same_as_bruteforce(const char *nodes,
                               int copies,
                               const crater_trace_pod_t *pods,
                               size_t np,
                               const char *policy,
                               uint64_t n,
                               uint64_t seed)
{
    struct core a, b;
    crater_typical_t *ty;
    crater_error_t err;
    size_t nt;

    core_init(&a, nodes, copies);
    core_init(&b, nodes, copies);
    ck_assert_int_eq(crater_sched_set_policy(a.s, policy, &err), 0);
    ck_assert_int_eq(crater_sched_set_policy(b.s, policy, &err), 0);
    ck_assert_int_eq(crater_fgd_typical(a.s, pods, np, 95, &ty, &nt, &err), 0);
    crater_sched_set_typical(a.s, ty, nt, &err);
    crater_sched_set_typical(b.s, ty, nt, &err);
    free(ty);
    for (uint64_t i = 1; i <= n; i++) {
        const crater_trace_pod_t *p = &pods[crater_splitmix64(&seed) % np];
        crater_request_t r;
        crater_placement_t pa, pb;
        ck_assert_int_eq(crater_openb_request(a.s, p, 1, &r, &err), 0);
        int ra = crater_sched_place(a.s, &r, &pa, NULL);
        int rb = crater_sched_place_bruteforce(b.s, &r, &pb, NULL);
        ck_assert_int_eq(ra, rb);
        if (ra < 0)
            continue;
        ck_assert_msg(pa.node == pb.node && pa.ngpus == pb.ngpus
                          && memcmp(pa.gpu, pb.gpu, pa.ngpus) == 0,
                      "%s: decision %llu: node %u vs %u",
                      policy,
                      (unsigned long long)i,
                      pa.node,
                      pb.node);
        ck_assert_int_eq(crater_sched_commit(a.s, i, &r, &pa, &err), 0);
        ck_assert_int_eq(crater_sched_commit(b.s, i, &r, &pb, &err), 0);
    }
    core_free(&a);
    core_free(&b);
}

START_TEST(test_fast_equals_bruteforce)
{
    const char *const *names = crater_sched_policy_names();
    crater_trace_pod_t *pods;
    crater_error_t err;
    size_t np;

    ck_assert_int_eq(crater_openb_load_pods(OB("pods.csv"), &pods, &np, &err),
                     0);
    for (int k = 0; names[k]; k++)
        if (strcmp(names[k], "random") != 0)
            same_as_bruteforce(OB("nodes.csv"), 3, pods, np, names[k], 150, 99);
    crater_trace_free(pods);
}
END_TEST

/* The full trace: BestFit on the default trace lands near the paper's
 * 93.08% at 130% (one seed: a wide band). */
START_TEST(test_openb_default_bestfit)
{
    const char *dir = crater_openb_dir();
    char nodes[1024], pods[1024];
    struct trace t;
    crater_fgd_result_t r;

    if (!dir) {
        fprintf(stderr,
                "test_fgd: openb data not found (CRATER_OPENB_DIR): skipping "
                "the "
                "full-trace run\n");
        return;
    }
    snprintf(nodes, sizeof(nodes), "%s/openb_node_list_gpu_node.csv", dir);
    snprintf(pods, sizeof(pods), "%s/openb_pod_list_default.csv", dir);
    load(&t, nodes, pods);
    run(&t, "bestfit", 42, &r);
    ck_assert_uint_eq(r.capacity_milli, 6212000);
    ck_assert_uint_eq(r.gpu_nodes, 1213);
    ck_assert_msg(r.alloc_at_130 > 92.0 && r.alloc_at_130 < 94.0,
                  "alloc@130 %.2f",
                  r.alloc_at_130);
    unload(&t);
}
END_TEST

/* The full trace through the fast path and the brute force: Crater's
 * policy (with its first-fit bias, kept outside the class memo) decides
 * identically for 250 pods of the default trace (FGD and the others: on
 * the excerpt, test_fast_equals_bruteforce; the brute force is slow under
 * the sanitizers). */
START_TEST(test_openb_fast_equals_bruteforce)
{
    const char *dir = crater_openb_dir();
    char nodes[1024], pods[1024];
    crater_trace_pod_t *pv;
    crater_error_t err;
    size_t np;

    if (!dir) {
        fprintf(stderr, "test_fgd: openb data not found: skipping\n");
        return;
    }
    snprintf(nodes, sizeof(nodes), "%s/openb_node_list_gpu_node.csv", dir);
    snprintf(pods, sizeof(pods), "%s/openb_pod_list_default.csv", dir);
    ck_assert_int_eq(crater_openb_load_pods(pods, &pv, &np, &err), 0);
    same_as_bruteforce(nodes, 1, pv, np, "crater", 250, 42);
    crater_trace_free(pv);
}
END_TEST

/* FGD on cpu200 (the trace whose fidelity depends on the artifact's
 * shuffled node order, src/sim/fgd.c) lands near the paper's 95.05% at
 * 130%: 95.16 with seed 42; without the shuffle it was 94.0. */
START_TEST(test_openb_cpu200_fgd)
{
    const char *dir = crater_openb_dir();
    char nodes[1024], pods[1024];
    struct trace t;
    crater_fgd_result_t r;

    if (!dir) {
        fprintf(stderr, "test_fgd: openb data not found: skipping\n");
        return;
    }
    snprintf(nodes, sizeof(nodes), "%s/openb_node_list_gpu_node.csv", dir);
    snprintf(pods, sizeof(pods), "%s/openb_pod_list_cpu200.csv", dir);
    load(&t, nodes, pods);
    run(&t, "fgd", 42, &r);
    ck_assert_msg(r.alloc_at_130 > 94.7 && r.alloc_at_130 < 95.5,
                  "alloc@130 %.2f",
                  r.alloc_at_130);
    unload(&t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fgd");
    TCase *tc = tcase_create("fgd");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_four_halves);
    tcase_add_test(tc, test_one_share);
    tcase_add_test(tc, test_deterministic);
    tcase_add_test(tc, test_typical);
    tcase_add_test(tc, test_policy_choices);
    tcase_add_test(tc, test_policy_random);
    tcase_add_test(tc, test_policy_unknown);
    tcase_add_test(tc, test_fast_equals_bruteforce);
    tcase_add_test(tc, test_openb_default_bestfit);
    tcase_add_test(tc, test_openb_fast_equals_bruteforce);
    tcase_add_test(tc, test_openb_cpu200_fgd);
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
