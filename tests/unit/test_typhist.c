/* test_typhist.c - the learned typical-task distribution (typhist.h): the
 * decay by half-life, the weights and the 95% cut, the prior until
 * min_samples, the bounded table keeping the frequent shapes, determinism,
 * reinstalling only when the distribution moved, that an install reaches
 * the core, and that Crater's policy with a learned distribution on a
 * mixed MiB cluster (examples/hardware/cluster.yaml, GPU shares) makes the
 * same decisions in the fast path and the brute force. The FGD protocol's
 * "crater-learned" run is deterministic by seed.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "crater/fgd.h"
#include "crater/typhist.h"
#include "sched_fixture.h"

#define OB(f) CRATER_SOURCE_DIR "/tests/data/openb/" f

static crater_typical_t shape(uint32_t gpus, uint32_t slice, uint64_t cpu)
{
    crater_typical_t t = {cpu, gpus, slice, 0, 1};
    return t;
}

static void add(crater_typhist_t *h, crater_typical_t t, int times)
{
    for (int i = 0; i < times; i++)
        ck_assert_int_eq(crater_typhist_add(h, &t, NULL), 0);
}

/* The distribution as installed: n shapes into t (at most max). */
static size_t get(const crater_typhist_t *h, crater_typical_t *t, size_t max)
{
    crater_typical_t *v = NULL;
    size_t n = 0;

    ck_assert_int_eq(crater_typhist_get(h, &v, &n, NULL), 0);
    ck_assert_uint_le(n, max);
    memcpy(t, v, n * sizeof(*t));
    free(v);
    return n;
}

START_TEST(decay_halves_at_half_life)
{
    crater_typhist_opts_t o = {.half_life = 10, .pct = 100};
    crater_typhist_t *h = crater_typhist_create(&o);
    crater_typical_t t[4];

    add(h, shape(1, 0, 1000), 1);
    add(h, shape(2, 0, 1000), 10);
    /* the first weighs 2^-1 after 10 more; the others sum the series */
    double b = 0;
    for (int k = 0; k < 10; k++)
        b += pow(2.0, -k / 10.0);
    ck_assert_double_eq_tol(crater_typhist_total(h), 0.5 + b, 1e-9);
    ck_assert_uint_eq(get(h, t, 4), 2);
    ck_assert_uint_eq(t[0].gpus, 2);
    ck_assert_double_eq_tol(t[1].weight, 0.5 / (0.5 + b), 1e-9);
    ck_assert_double_eq_tol(t[0].weight + t[1].weight, 1.0, 1e-12);
    ck_assert_uint_eq(crater_typhist_seen(h), 11);
    crater_typhist_destroy(h);
}
END_TEST

START_TEST(weights_and_the_cut)
{
    crater_typhist_opts_t o = {.half_life = 10000000};
    crater_typhist_t *h = crater_typhist_create(&o);
    crater_typical_t t[4];

    add(h, shape(1, 40960, 2000), 18);
    add(h, shape(0, 0, 4000), 1);
    add(h, shape(8, 0, 64000), 1);
    add(h, shape(2, 0, 1000), 1);
    /* 95% of 21 is 19.95: the heaviest, then two of the three singles,
     * the most recent first (the decay, however slow, orders them) */
    ck_assert_uint_eq(get(h, t, 4), 3);
    ck_assert_uint_eq(t[0].slice, 40960);
    ck_assert_uint_eq(t[1].gpus, 2);
    ck_assert_uint_eq(t[2].gpus, 8);
    ck_assert_double_eq_tol(t[0].weight, 18.0 / 20.0, 1e-6);
    ck_assert_double_eq_tol(t[1].weight, 1.0 / 20.0, 1e-6);
    crater_typhist_destroy(h);
}
END_TEST

START_TEST(prior_until_min_samples)
{
    crater_typhist_opts_t o = {.min_samples = 5};
    crater_typhist_t *h = crater_typhist_create(&o);
    crater_sched_t *s = load(EX("h100x8.yaml"));
    crater_request_t r = req_slice(1, 1024);
    crater_typical_t t[8];
    size_t np;
    const crater_typical_t *p = crater_typhist_prior(&np);

    /* the first observation installs the prior; the next three nothing */
    ck_assert_int_eq(crater_typhist_observe(h, s, &r, NULL), 1);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(crater_typhist_observe(h, s, &r, NULL), 0);
    ck_assert(crater_typhist_is_prior(h));
    ck_assert_uint_eq(get(h, t, 8), np);
    ck_assert_mem_eq(t, p, np * sizeof(*p));
    /* the fifth installs the learned one */
    ck_assert_int_eq(crater_typhist_observe(h, s, &r, NULL), 1);
    ck_assert(!crater_typhist_is_prior(h));
    ck_assert_uint_eq(get(h, t, 8), 1);
    ck_assert_uint_eq(t[0].slice, 1024);
    ck_assert(t[0].weight == 1.0);
    ck_assert_uint_eq(crater_typhist_installs(h), 2);
    crater_sched_destroy(s);
    crater_typhist_destroy(h);
}
END_TEST

START_TEST(bounded_keeps_the_frequent)
{
    crater_typhist_opts_t o = {.capacity = 4, .half_life = 50};
    crater_typhist_t *h = crater_typhist_create(&o);
    crater_typical_t t[4];

    for (uint64_t i = 0; i < 400; i++) {
        add(h, shape(1, 0, 1000), 1);
        add(h, shape(0, 0, 100 + i), 1); /* a new shape every time */
    }
    size_t n = get(h, t, 4);
    ck_assert_uint_ge(n, 1);
    ck_assert_uint_eq(t[0].gpus, 1);
    ck_assert_uint_eq(t[0].cpu_milli, 1000);
    ck_assert_double_gt(t[0].weight, 0.9);
    crater_typhist_destroy(h);
}
END_TEST

/* A pseudo-random request sequence (splitmix64 from seed). */
static crater_typical_t draw(uint64_t *st)
{
    static const uint32_t g[] = {0, 1, 1, 1, 2, 4, 8};
    uint64_t x = crater_splitmix64(st);
    uint32_t gpus = g[x % 7];

    return shape(gpus,
                 gpus == 1 && (x >> 8) % 2 ? 1024 * (1 + (x >> 9) % 40) : 0,
                 1000 * (1 + (x >> 16) % 16));
}

START_TEST(deterministic)
{
    crater_typhist_opts_t o = {.capacity = 32, .half_life = 100};
    crater_typhist_t *a = crater_typhist_create(&o),
                     *b = crater_typhist_create(&o);
    crater_typical_t ta[32], tb[32];
    uint64_t sa = 7, sb = 7;

    for (int i = 0; i < 3000; i++) {
        crater_typical_t x = draw(&sa), y = draw(&sb);
        ck_assert_int_eq(crater_typhist_add(a, &x, NULL), 0);
        ck_assert_int_eq(crater_typhist_add(b, &y, NULL), 0);
    }
    size_t n = get(a, ta, 32);
    ck_assert_uint_eq(get(b, tb, 32), n);
    ck_assert_mem_eq(ta, tb, n * sizeof(*ta));
    ck_assert(crater_typhist_total(a) == crater_typhist_total(b));
    crater_typhist_destroy(a);
    crater_typhist_destroy(b);
}
END_TEST

START_TEST(reinstalls_when_moved)
{
    crater_typhist_opts_t o = {.half_life = 20, .move = 0.05};
    crater_typhist_t *h = crater_typhist_create(&o);
    crater_sched_t *s = load(EX("h100x8.yaml"));
    crater_request_t one = req_slice(1, 0), two = req_slice(2, 0);
    int installs = 0;

    for (int i = 0; i < 100; i++)
        installs += crater_typhist_observe(h, s, &one, NULL);
    /* the first install, then a steady workload: nothing moves */
    ck_assert_int_eq(installs, 1);
    ck_assert_double_lt(crater_typhist_moved(h), 1e-9);
    installs = 0;
    for (int i = 0; i < 100; i++)
        installs += crater_typhist_observe(h, s, &two, NULL);
    /* the shift is followed: reinstalled a few times, not 100 */
    ck_assert_int_gt(installs, 2);
    ck_assert_int_lt(installs, 30);
    ck_assert_double_lt(crater_typhist_moved(h), 0.05);
    crater_sched_destroy(s);
    crater_typhist_destroy(h);
}
END_TEST

/* The installed distribution is what the core measures against: a node
 * with one GPU left is fragmented for 2-GPU typical tasks only once
 * something is installed. */
START_TEST(install_reaches_the_core)
{
    crater_typhist_t *h = crater_typhist_create(NULL);
    crater_sched_t *s = load(EX("h100x8.yaml"));
    crater_request_t seven = req_slice(7, 0), two = req_slice(2, 0);
    crater_placement_t p;
    crater_error_t err;

    ck_assert_int_eq(crater_sched_place(s, &seven, &p, &err), 0);
    ck_assert_int_eq(crater_sched_commit(s, 1, &seven, &p, &err), 0);
    ck_assert(crater_sched_node_frag(s, 0) == 0);
    ck_assert_int_eq(crater_typhist_observe(h, s, &two, &err), 1);
    ck_assert_double_gt(crater_sched_node_frag(s, 0), 0);
    crater_sched_destroy(s);
    crater_typhist_destroy(h);
}
END_TEST

/* Crater's policy against a learned distribution with GPU shares on a
 * mixed cluster in MiB: the fast path equals the brute force. */
START_TEST(learned_fast_equals_bruteforce)
{
    crater_sched_t *a = load(EX("cluster.yaml")), *b = load(EX("cluster.yaml"));
    crater_typhist_opts_t o = {.min_samples = 10, .half_life = 50};
    crater_typhist_t *ha = crater_typhist_create(&o),
                     *hb = crater_typhist_create(&o);
    uint64_t st = 3;

    for (uint64_t i = 1; i <= 300; i++) {
        crater_typical_t t = draw(&st);
        crater_request_t r = req_slice(t.gpus, t.slice);
        crater_placement_t pa, pb;
        r.cpu_milli = t.cpu_milli;
        ck_assert_int_ge(crater_typhist_observe(ha, a, &r, NULL), 0);
        ck_assert_int_ge(crater_typhist_observe(hb, b, &r, NULL), 0);
        int ra = crater_sched_place(a, &r, &pa, NULL);
        int rb = crater_sched_place_bruteforce(b, &r, &pb, NULL);
        ck_assert_int_eq(ra, rb);
        if (ra < 0)
            continue;
        ck_assert_msg(pa.node == pb.node && pa.ngpus == pb.ngpus
                          && memcmp(pa.gpu, pb.gpu, pa.ngpus) == 0,
                      "decision %llu: node %u vs %u",
                      (unsigned long long)i,
                      pa.node,
                      pb.node);
        ck_assert_int_eq(crater_sched_commit(a, i, &r, &pa, NULL), 0);
        ck_assert_int_eq(crater_sched_commit(b, i, &r, &pb, NULL), 0);
        if (i % 3 == 0) { /* some leave, so the cluster never just fills */
            ck_assert_int_eq(crater_sched_release(a, i, NULL), 0);
            ck_assert_int_eq(crater_sched_release(b, i, NULL), 0);
        }
    }
    ck_assert(!crater_typhist_is_prior(ha));
    crater_typhist_destroy(ha);
    crater_typhist_destroy(hb);
    crater_sched_destroy(a);
    crater_sched_destroy(b);
}
END_TEST

START_TEST(fgd_learned_deterministic)
{
    crater_trace_node_t *nodes;
    crater_trace_pod_t *pods;
    crater_fgd_opts_t o = {"crater-learned", 42, 1.3, 95};
    crater_fgd_result_t r1, r2;
    crater_error_t err;
    size_t nn, np;

    ck_assert_int_eq(crater_openb_load_nodes(OB("nodes.csv"),
                                             &nodes,
                                             &nn,
                                             &err),
                     0);
    ck_assert_int_eq(crater_openb_load_pods(OB("pods.csv"), &pods, &np, &err),
                     0);
    ck_assert_int_eq(crater_fgd_run(nodes, nn, pods, np, NULL, &o, &r1, &err),
                     0);
    ck_assert_int_eq(crater_fgd_run(nodes, nn, pods, np, NULL, &o, &r2, &err),
                     0);
    ck_assert_mem_eq(r1.alloc, r2.alloc, sizeof(r1.alloc));
    ck_assert_uint_gt(r1.placed, 0);
    ck_assert_uint_gt(r1.typical, 0);
    crater_trace_nodes_free(nodes);
    crater_trace_free(pods);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("typhist");
    TCase *tc = tcase_create("typhist");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, decay_halves_at_half_life);
    tcase_add_test(tc, weights_and_the_cut);
    tcase_add_test(tc, prior_until_min_samples);
    tcase_add_test(tc, bounded_keeps_the_frequent);
    tcase_add_test(tc, deterministic);
    tcase_add_test(tc, reinstalls_when_moved);
    tcase_add_test(tc, install_reaches_the_core);
    tcase_add_test(tc, learned_fast_equals_bruteforce);
    tcase_add_test(tc, fgd_learned_deterministic);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
