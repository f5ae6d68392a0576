/* test_bound.c - the FGD protocol's allocation bound (src/sim/bound.c).
 *
 * Tiny hand-made sequences where the bound is worked out by hand (and is
 * exact where the comment says so); soundness against an exhaustive
 * adversary: on random tiny instances every run the protocol allows (every
 * choice of node and GPUs for every pod that fits, none dropped while it
 * fits) is enumerated, and the bound must be at least the best of them and
 * every arrival marked forced must be placed in every run; and the bound
 * must be at least what every implemented policy reaches through
 * crater_fgd_run() on random small traces. The openb default trace is used
 * when present; otherwise that test says it skipped.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "crater/bound.h"

#define MAXN 4
#define MAXG 4
#define MAXP 10

static crater_trace_node_t node(uint32_t cpu, uint32_t gpus, const char *m)
{
    crater_trace_node_t n = {.cpu_milli = cpu, .memory_mib = 65536};

    n.gpus = gpus;
    snprintf(n.name, sizeof(n.name), "n%u-%u", cpu, gpus);
    snprintf(n.model, sizeof(n.model), "%s", m);
    return n;
}

/* A pod of n GPUs (n > 1: whole), or a share of milli (n = 1), or none. */
static crater_trace_pod_t pod(uint32_t cpu, uint32_t n, uint32_t milli)
{
    crater_trace_pod_t p = {.cpu_milli = cpu, .memory_mib = 1024};

    p.num_gpu = n;
    p.gpu_milli = n ? milli : 0;
    snprintf(p.name, sizeof(p.name), "p");
    return p;
}

static void bound(const crater_trace_node_t *nodes,
                  size_t nn,
                  const crater_trace_pod_t *pods,
                  size_t np,
                  uint8_t *forced,
                  crater_bound_result_t *r)
{
    size_t order[64];
    crater_error_t err;

    for (size_t i = 0; i < np; i++)
        order[i] = i;
    ck_assert_msg(crater_bound_sequence(nodes,
                                        nn,
                                        pods,
                                        order,
                                        np,
                                        forced,
                                        r,
                                        &err)
                      == 0,
                  "%s",
                  err.text);
}

/* One 0.81 share on an empty one-GPU node: always placed, its 0.19 left
 * idle; a whole GPU after it never fits. Exact: every policy gets 810. */
START_TEST(test_hole)
{
    crater_trace_node_t n[] = {node(8000, 1, "T4")};
    crater_trace_pod_t p[] = {pod(1000, 1, 810), pod(1000, 1, 1000)};
    crater_bound_result_t r;
    uint8_t forced[2];

    bound(n, 1, p, 2, forced, &r);
    ck_assert_uint_eq(r.capacity_milli, 1000);
    ck_assert_uint_eq(r.arrived_milli, 1810);
    ck_assert_uint_eq(forced[0], 1);
    ck_assert_uint_eq(forced[1], 0);
    ck_assert_uint_eq(r.holes_milli, 190);
    ck_assert_uint_eq(r.fill_milli, 0);
    ck_assert_uint_eq(r.bound_milli, 810);
    ck_assert_uint_eq(r.nshapes, 1);
    ck_assert_uint_eq(r.shapes[0].forced, 1);
    crater_bound_result_clear(&r);
}
END_TEST

/* A 0.19 share fills the hole: exact, 1000. A 0.2 does not fit it. */
START_TEST(test_fill)
{
    crater_trace_node_t n[] = {node(8000, 1, "T4")};
    crater_trace_pod_t p[] = {pod(1000, 1, 810), pod(100, 1, 190)};
    crater_bound_result_t r;

    bound(n, 1, p, 2, NULL, &r);
    ck_assert_uint_eq(r.fill_milli, 190);
    ck_assert_uint_eq(r.bound_milli, 1000);
    crater_bound_result_clear(&r);
    p[1].gpu_milli = 200;
    bound(n, 1, p, 2, NULL, &r);
    ck_assert_uint_eq(r.fill_milli, 0);
    ck_assert_uint_eq(r.bound_milli, 810);
    crater_bound_result_clear(&r);
}
END_TEST

/* Two one-GPU nodes, two 0.81 shares, then whole GPUs: the second share's
 * only earlier pod blocks one GPU at most, so both are forced. Exact:
 * 1620. The capacity bound would say 2000. */
START_TEST(test_two_forced)
{
    crater_trace_node_t n[] = {node(8000, 1, "T4"), node(8000, 1, "T4")};
    crater_trace_pod_t p[] = {pod(1000, 1, 810),
                              pod(1000, 1, 810),
                              pod(1000, 1, 1000),
                              pod(1000, 1, 1000)};
    crater_bound_result_t r;
    uint8_t forced[4];

    bound(n, 2, p, 4, forced, &r);
    ck_assert_uint_eq(forced[0] + forced[1], 2);
    ck_assert_uint_eq(forced[2] + forced[3], 0);
    ck_assert_uint_eq(r.bound_milli, 1620);
    crater_bound_result_clear(&r);
}
END_TEST

/* A whole GPU first, then two 0.81 shares on two one-GPU nodes: the second
 * share can be (and is) dropped, so it is not forced; the first drop ends
 * every later whole GPU. Exact: 1810 (the whole GPU and one share). */
START_TEST(test_not_forced)
{
    crater_trace_node_t n[] = {node(2000, 1, "T4"), node(2000, 1, "T4")};
    crater_trace_pod_t p[] = {pod(1000, 1, 1000),
                              pod(1000, 1, 810),
                              pod(1000, 1, 810),
                              pod(1000, 1, 1000)};
    crater_bound_result_t r;
    uint8_t forced[4];

    bound(n, 2, p, 4, forced, &r);
    ck_assert_uint_eq(forced[1], 1);
    ck_assert_uint_eq(forced[2], 0);
    ck_assert_uint_eq(r.bound_milli, 1810);
    crater_bound_result_clear(&r);
}
END_TEST

/* The first-drop cases by hand, one node of two GPUs: 0.2, 0.2, then three
 * 0.81 shares. Nothing is forced (the two 0.2 can block both GPUs), so
 * holes alone give 2000. Cases: first drop at the 1st share: request
 * before 400, nothing after fits (the later shares dominate it); at the
 * 2nd: min(2000 - 190, 1210); at the 3rd: min(2000 - 380, 2020); none
 * dropped: 2000 - 570. Largest: 1620. (The best run reaches 1210.) */
START_TEST(test_first_drop)
{
    crater_trace_node_t n[] = {node(8000, 2, "T4")};
    crater_trace_pod_t p[] = {pod(1000, 1, 200),
                              pod(1000, 1, 200),
                              pod(1000, 1, 810),
                              pod(1000, 1, 810),
                              pod(1000, 1, 810)};
    crater_bound_result_t r;

    bound(n, 1, p, 5, NULL, &r);
    ck_assert_uint_eq(r.forced, 0);
    ck_assert_uint_eq(r.forced_bound_milli, 2000);
    ck_assert_uint_eq(r.drop_bound_milli, 1620);
    ck_assert_uint_eq(r.bound_milli, 1620);
    crater_bound_result_clear(&r);
}
END_TEST

/* gpu_spec: a share allowed only on model B has one GPU to go to; the
 * spec match ignores case. A model no node has: never placeable. */
START_TEST(test_spec)
{
    crater_trace_node_t n[] = {node(8000, 1, "A"), node(8000, 1, "B")};
    crater_trace_pod_t p[] = {pod(1000, 1, 810), pod(1000, 1, 810)};
    crater_bound_result_t r;
    uint8_t forced[2];

    snprintf(p[0].gpu_spec, sizeof(p[0].gpu_spec), "b");
    snprintf(p[1].gpu_spec, sizeof(p[1].gpu_spec), "B");
    bound(n, 2, p, 2, forced, &r);
    ck_assert_uint_eq(forced[0], 1);
    ck_assert_uint_eq(forced[1], 0);
    ck_assert_uint_le(r.bound_milli, 1810);
    crater_bound_result_clear(&r);
    snprintf(p[0].gpu_spec, sizeof(p[0].gpu_spec), "C|D");
    snprintf(p[1].gpu_spec, sizeof(p[1].gpu_spec), "C");
    bound(n, 2, p, 2, forced, &r);
    ck_assert_uint_eq(forced[0] + forced[1], 0);
    ck_assert_uint_eq(r.placeable_milli, 0);
    ck_assert_uint_eq(r.bound_milli, 0);
    crater_bound_result_clear(&r);
}
END_TEST

/* ---- the exhaustive adversary ---------------------------------------------
 */

struct inst {
    crater_trace_node_t n[MAXN];
    crater_trace_pod_t p[MAXP];
    size_t nn, np;
};

struct state {
    uint32_t cpu[MAXN], gfree[MAXN][MAXG];
    uint64_t mem[MAXN];
};

struct search {
    const struct inst *in;
    const uint8_t *forced;
    uint64_t best;
    int forced_dropped;
};

static int allowed(const crater_trace_pod_t *p, const crater_trace_node_t *n)
{
    char buf[64], *save = NULL;

    if (!p->gpu_spec[0])
        return 1;
    snprintf(buf, sizeof(buf), "%s", p->gpu_spec);
    for (char *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save))
        if (strcasecmp(t, n->model) == 0)
            return 1;
    return 0;
}

static void dfs(struct search *s, struct state *st, size_t i, uint64_t alloc);

/* Place pod i on node k using GPU mask (bit g: takes need from GPU g). */
static int try_place(struct search *s,
                     struct state *st,
                     size_t i,
                     size_t k,
                     uint32_t mask,
                     uint64_t alloc)
{
    const crater_trace_pod_t *p = &s->in->p[i];
    uint32_t need = p->num_gpu > 1 ? 1000 : p->gpu_milli;
    struct state next = *st;

    next.cpu[k] -= p->cpu_milli;
    next.mem[k] -= p->memory_mib;
    for (uint32_t g = 0; g < MAXG; g++)
        if (mask >> g & 1)
            next.gfree[k][g] -= need;
    dfs(s, &next, i + 1, alloc + (uint64_t)p->num_gpu * p->gpu_milli);
    return 1;
}

/* Every way pod i can go on node k, up to symmetry (GPUs with the same
 * room are alike: one share per distinct room, whole GPUs on the first
 * free ones); the count of them. */
static int on_node(
    struct search *s, struct state *st, size_t i, size_t k, uint64_t alloc)
{
    const crater_trace_pod_t *p = &s->in->p[i];
    const crater_trace_node_t *n = &s->in->n[k];
    uint32_t mask = 0, taken = 0;
    int ways = 0;

    if (st->cpu[k] < p->cpu_milli || st->mem[k] < p->memory_mib
        || !allowed(p, n))
        return 0;
    if (!p->num_gpu)
        return try_place(s, st, i, k, 0, alloc);
    if (p->num_gpu > 1 || p->gpu_milli == 1000) {
        for (uint32_t g = 0; g < n->gpus && taken < p->num_gpu; g++)
            if (st->gfree[k][g] == 1000) {
                mask |= 1u << g;
                taken++;
            }
        return taken == p->num_gpu ? try_place(s, st, i, k, mask, alloc) : 0;
    }
    for (uint32_t g = 0; g < n->gpus; g++) {
        int seen = 0;
        for (uint32_t h = 0; h < g; h++)
            seen |= st->gfree[k][h] == st->gfree[k][g];
        if (!seen && st->gfree[k][g] >= p->gpu_milli)
            ways += try_place(s, st, i, k, 1u << g, alloc);
    }
    return ways;
}

static void dfs(struct search *s, struct state *st, size_t i, uint64_t alloc)
{
    int ways = 0;

    if (i == s->in->np) {
        if (alloc > s->best)
            s->best = alloc;
        return;
    }
    for (size_t k = 0; k < s->in->nn; k++)
        ways += on_node(s, st, i, k, alloc);
    if (ways)
        return;
    if (s->forced[i])
        s->forced_dropped = 1;
    dfs(s, st, i + 1, alloc); /* fits nowhere: dropped */
}

static uint64_t rnd(uint64_t *st, uint64_t n)
{
    return crater_splitmix64(st) % n;
}

static crater_trace_pod_t random_pod(uint64_t *st)
{
    static const uint32_t share[] = {0, 150, 200, 300, 550, 650, 810, 810};
    static const uint32_t cpu[] = {500, 1000, 2000, 3000};
    uint32_t kind = (uint32_t)rnd(st, 11);
    crater_trace_pod_t p;

    if (kind < 8)
        p = pod(cpu[rnd(st, 4)], kind ? 1 : 0, share[kind]);
    else
        p = pod(cpu[rnd(st, 4)], kind == 10 ? 2 : 1, 1000);
    p.memory_mib = 1024u << rnd(st, 3);
    if (rnd(st, 5) == 0)
        snprintf(p.gpu_spec, sizeof(p.gpu_spec), "%s", rnd(st, 2) ? "A" : "B");
    return p;
}

static void random_inst(struct inst *in, uint64_t *st, size_t maxn, size_t maxp)
{
    in->nn = 1 + rnd(st, maxn);
    for (size_t k = 0; k < in->nn; k++) {
        in->n[k] = node(2000 + 1000 * (uint32_t)rnd(st, 4),
                        1 + (uint32_t)rnd(st, 3),
                        rnd(st, 3) ? "A" : "B");
        in->n[k].memory_mib = 2048u << rnd(st, 2);
        snprintf(in->n[k].name, sizeof(in->n[k].name), "node%zu", k);
    }
    in->np = 3 + rnd(st, maxp - 2);
    for (size_t i = 0; i < in->np; i++)
        in->p[i] = random_pod(st);
}

/* Instances where the bound was below capacity and placeable request,
 * where the exhaustive search reached it, and forced arrivals seen. */
static int nontrivial, tight, nforced;

static void check_inst(const struct inst *in)
{
    crater_bound_result_t r;
    uint8_t forced[MAXP];
    struct search s = {in, forced, 0, 0};
    struct state st;

    bound(in->n, in->nn, in->p, in->np, forced, &r);
    memset(&st, 0, sizeof(st));
    for (size_t k = 0; k < in->nn; k++) {
        st.cpu[k] = in->n[k].cpu_milli;
        st.mem[k] = in->n[k].memory_mib;
        for (uint32_t g = 0; g < in->n[k].gpus; g++)
            st.gfree[k][g] = 1000;
    }
    dfs(&s, &st, 0, 0);
    ck_assert_msg(s.best <= r.bound_milli,
                  "best run %llu above the bound %llu",
                  (unsigned long long)s.best,
                  (unsigned long long)r.bound_milli);
    ck_assert_msg(!s.forced_dropped, "a forced arrival is dropped in a run");
    nontrivial +=
        r.bound_milli < r.capacity_milli && r.bound_milli < r.placeable_milli;
    tight += s.best == r.bound_milli;
    nforced += (int)r.forced;
    crater_bound_result_clear(&r);
}

/* 400 random tiny instances against every run the protocol allows. */
START_TEST(test_sound_exhaustive)
{
    uint64_t st = 20261202;

    for (int t = 0; t < 400; t++) {
        struct inst in;
        random_inst(&in, &st, 3, 8);
        check_inst(&in);
    }
    fprintf(stderr,
            "test_bound: 400 instances: %d with the bound below capacity "
            "and request, %d where the best run reaches it, %d forced "
            "arrivals\n",
            nontrivial,
            tight,
            nforced);
    ck_assert_int_gt(nontrivial, 40);
    ck_assert_int_gt(nforced, 40);
}
END_TEST

/* ---- the implemented policies --------------------------------------------
 */

/* Random small traces through crater_fgd_run() (the protocol's own
 * sequence, inflate 1.3) under every policy: none passes the bound. */
START_TEST(test_sound_policies)
{
    const char *const *pol = crater_sched_policy_names();
    uint64_t st = 42;

    for (int t = 0; t < 25; t++) {
        struct inst in;
        crater_bound_result_t b;
        crater_error_t err;
        uint64_t seed = 42 + (uint64_t)t;
        random_inst(&in, &st, MAXN, MAXP);
        in.p[0] = pod(1000, 1, 1000); /* some GPU request: inflation ends */
        ck_assert_int_eq(crater_bound_run(in.n,
                                          in.nn,
                                          in.p,
                                          in.np,
                                          seed,
                                          1.3,
                                          &b,
                                          &err),
                         0);
        for (int k = 0; pol[k]; k++) {
            crater_fgd_opts_t o = {pol[k], seed, 1.3, 95};
            crater_fgd_result_t r;
            ck_assert_msg(crater_fgd_run(in.n,
                                         in.nn,
                                         in.p,
                                         in.np,
                                         NULL,
                                         &o,
                                         &r,
                                         &err)
                              == 0,
                          "%s",
                          err.text);
            double alloc = r.alloc[CRATER_FGD_STEPS - 1] / 100.0
                           * (double)r.capacity_milli;
            ck_assert_uint_eq(r.arrived, b.arrived);
            ck_assert_msg(alloc <= (double)b.bound_milli + 1e-6,
                          "trace %d, %s: %.0f above the bound %llu",
                          t,
                          pol[k],
                          alloc,
                          (unsigned long long)b.bound_milli);
        }
        crater_bound_result_clear(&b);
    }
}
END_TEST

/* The default trace, seed 42: the bound sits between Crater's allocation
 * and the capacity, and most 0.81 shares before ~55% arrived are forced. */
START_TEST(test_openb_default)
{
    const char *dir = crater_openb_dir();
    char nodes[1024], pods[1024];
    crater_trace_node_t *nv;
    crater_trace_pod_t *pv;
    crater_bound_result_t b;
    crater_fgd_result_t r;
    crater_fgd_opts_t o = {"crater", 42, 1.3, 95};
    crater_error_t err;
    size_t nn, np;

    if (!dir) {
        fprintf(stderr, "test_bound: openb data not found: skipping\n");
        return;
    }
    snprintf(nodes, sizeof(nodes), "%s/openb_node_list_gpu_node.csv", dir);
    snprintf(pods, sizeof(pods), "%s/openb_pod_list_default.csv", dir);
    ck_assert_int_eq(crater_openb_load_nodes(nodes, &nv, &nn, &err), 0);
    ck_assert_int_eq(crater_openb_load_pods(pods, &pv, &np, &err), 0);
    ck_assert_int_eq(crater_bound_run(nv, nn, pv, np, 42, 1.3, &b, &err), 0);
    ck_assert_int_eq(crater_fgd_run(nv, nn, pv, np, NULL, &o, &r, &err), 0);
    ck_assert_uint_eq(b.capacity_milli, 6212000);
    ck_assert_uint_eq(b.arrived, r.arrived);
    ck_assert_double_le(r.alloc_at_130 / 100 * 6212000, b.bound_milli);
    ck_assert_uint_lt(b.bound_milli, 6212000 - 100000);
    ck_assert_uint_gt(b.shapes[0].forced, 500);
    crater_bound_result_clear(&b);
    crater_trace_nodes_free(nv);
    crater_trace_free(pv);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bound");
    TCase *tc = tcase_create("bound");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_hole);
    tcase_add_test(tc, test_fill);
    tcase_add_test(tc, test_two_forced);
    tcase_add_test(tc, test_not_forced);
    tcase_add_test(tc, test_first_drop);
    tcase_add_test(tc, test_spec);
    tcase_add_test(tc, test_sound_exhaustive);
    tcase_add_test(tc, test_sound_policies);
    tcase_add_test(tc, test_openb_default);
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
