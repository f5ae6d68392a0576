/* test_preempt_skip.c - what lets the preemption planner skip work
 * (psum.c, preempt.c) changes no plan:
 * - the per-node sums of preemptible tasks by priority, and the nodes by
 *   their lowest preemptible priority, equal a recount from the task
 *   table after every random commit, release and checkpoint;
 * - on small random clusters (random tasks, releases, cordons,
 *   checkpoints, a clock that sometimes goes back), the planner with a
 *   memo kept per request shape (crater_sched_plan_preemption_memo, as
 *   pass.c calls it) returns what a brute-force planner returns (the plain
 *   algorithm of preempt.c's design comment: every node, every candidate,
 *   no bound, no sums, no memo), and the same error text as a call
 *   without memo; with preemptionMinRuntime too, where the memo is off.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/explain.h"
#include "sched/internal.h"
#include "sched_fixture.h"

#define NSHAPES 6
#define MAXV CRATER_PREEMPT_MAX_VICTIMS

static uint64_t now;
static uint64_t rng = 88172645463325252ull;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static uint64_t clock_now(void *arg)
{
    return *(uint64_t *)arg;
}

/* Copies of the 8-GPU H100 and the 2-GPU A100 nodes, alternating. */
static crater_sched_t *cluster(uint32_t nnodes)
{
    crater_sched_env_t env = {.now_ms = clock_now, .arg = &now};
    crater_sched_t *s = crater_sched_create(&cfg, kb, &env);
    crater_cluster_t *h = NULL, *a = NULL;
    crater_error_t err;
    char name[16];

    ck_assert(crater_hw_load(EX("h100x8.yaml"), kb, &h, &err) == 0);
    ck_assert(crater_hw_load(EX("a2-a100.yaml"), kb, &a, &err) == 0);
    for (uint32_t i = 0; i < nnodes; i++) {
        crater_node_t n = i % 2 ? a->nodes[0] : h->nodes[0];
        snprintf(name, sizeof(name), "n-%u", i);
        n.name = name;
        ck_assert_msg(crater_sched_add_node(s, &n, &err) >= 0, "%s", err.text);
    }
    crater_cluster_destroy(h);
    crater_cluster_destroy(a);
    return s;
}

/* A random request: CPU-only, whole GPUs or a slice. */
static crater_request_t random_req(void)
{
    static const uint32_t slices[] = {0, 0, 10240, 20480, 40960};
    crater_request_t r = req_slice(rnd(3), slices[rnd(5)]);

    if (r.gpus != 1)
        r.slice_mib = 0; /* slices are one GPU's; none without GPUs */
    r.cpu_milli = 1000 * (1 + rnd(24));
    r.mem_bytes = (1ull + rnd(200)) << 30;
    r.priority = (int32_t)rnd(3) * 5;
    r.preemptible = rnd(4) != 0;
    return r;
}

/* ---- the sums against a recount ---------------------------------------- */

static void check_sums(const crater_sched_t *s)
{
    uint32_t nodes_at[16] = {0}; /* nodes by lowest priority / 5 */

    for (uint32_t node = 0; node < s->ntcap; node++) {
        const struct node_tasks *nt = &s->ntasks[node];
        struct psum want[3] = {{0}};
        uint32_t k = 0;
        int low = -1;
        for (uint32_t i = 0; i < nt->n; i++) {
            const struct task *t = sched__task_find(s, nt->ids[i]);
            struct psum *e = &want[t->priority / 5];
            if (!t->preemptible)
                continue;
            e->prio = t->priority;
            e->n++;
            e->ngpus += t->p.ngpus;
            e->cpu += t->p.cpu_milli;
            e->mem += t->p.mem_bytes;
            for (uint32_t g = 0; g < t->p.ngpus; g++)
                e->mib += t->p.gpu_mib[g];
        }
        for (uint32_t q = 0; q < 3; q++) {
            if (!want[q].n)
                continue;
            ck_assert_uint_lt(k, nt->nps);
            ck_assert_mem_eq(&nt->ps[k], &want[q], sizeof(want[q]));
            low = low < 0 ? (int)q : low;
            k++;
        }
        ck_assert_uint_eq(k, nt->nps);
        if (low >= 0)
            nodes_at[low]++;
    }
    for (uint32_t i = 0, q = 0; q < 3; q++) {
        if (!nodes_at[q])
            continue;
        ck_assert_uint_lt(i, s->npnodes);
        ck_assert_int_eq(s->pnodes[i].prio, (int32_t)q * 5);
        ck_assert_uint_eq(s->pnodes[i].n, nodes_at[q]);
        i++;
    }
}

/* One random change: a commit, a release, a checkpoint, a cordon, or the
 * clock moving (sometimes back). ids[] holds the running tasks. */
static void step(crater_sched_t *s, uint64_t *ids, uint32_t *n, uint64_t *next)
{
    uint32_t what = rnd(10);

    if (what < 5) {
        crater_request_t r = random_req();
        crater_placement_t p;
        if (crater_sched_place(s, &r, &p, NULL) == 0
            && crater_sched_commit(s, *next, &r, &p, NULL) == 0)
            ids[(*n)++] = (*next)++;
    } else if (what < 8 && *n) {
        uint32_t i = rnd(*n);
        ck_assert_int_eq(crater_sched_release(s, ids[i], NULL), 0);
        ids[i] = ids[--*n];
    } else if (what == 8 && *n) {
        uint64_t t = now + rnd(3) * 1000; /* now, or in the future */
        crater_sched_set_task_checkpoint(s,
                                         ids[rnd(*n)],
                                         t > 500 ? t - 500 : 0);
    } else if (rnd(4) == 0) {
        uint32_t node = rnd(crater_sched_node_count(s));
        crater_sched_set_cordoned(s, node, rnd(3) == 0);
    }
    now = rnd(20) ? now + rnd(2000) : (now > 3000 ? now - 3000 : 0);
}

START_TEST(sums_equal_recount)
{
    crater_sched_t *s = cluster(6);
    uint64_t ids[4096], next = 1;
    uint32_t n = 0;

    for (int i = 0; i < 3000; i++) {
        step(s, ids, &n, &next);
        check_sums(s);
    }
    while (n) {
        ck_assert_int_eq(crater_sched_release(s, ids[--n], NULL), 0);
        check_sums(s);
    }
    ck_assert_uint_eq(s->npnodes, 0);
    crater_sched_destroy(s);
}
END_TEST

/* ---- the planner against a brute-force one ------------------------------ */

struct bcand {
    const struct task *t;
    uint64_t lost;
    int gone;
};

static uint64_t since_of(const struct task *t)
{
    return t->ckpt_ms > t->start_ms ? t->ckpt_ms : t->start_ms;
}

static int bcand_cmp(const void *a, const void *b)
{
    const struct bcand *x = a, *y = b;

    if (x->t->priority != y->t->priority)
        return x->t->priority < y->t->priority ? -1 : 1;
    if (x->lost != y->lost)
        return x->lost < y->lost ? -1 : 1;
    return x->t->id < y->t->id ? -1 : x->t->id > y->t->id;
}

static int bfits(crater_sched_t *s, uint32_t node, const crater_request_t *r)
{
    struct sched_ctx ctx;

    return s->dyn[node].ready && !s->dyn[node].cordoned
           && sched__eval(s, node, r, &ctx) == 0;
}

static void bflip(crater_sched_t *s, struct bcand *c, int gone)
{
    sched__apply(s, &c->t->p, gone ? -1 : +1);
    c->gone = gone;
}

/* Node's candidates for r, cheapest first; their count. */
static uint32_t bgather(crater_sched_t *s,
                        const crater_request_t *r,
                        uint32_t node,
                        struct bcand *c)
{
    const struct node_tasks *nt = &s->ntasks[node];
    uint32_t n = 0;

    ck_assert_uint_le(nt->n, 256);
    for (uint32_t i = 0; i < nt->n; i++) {
        const struct task *t = sched__task_find(s, nt->ids[i]);
        uint64_t since = since_of(t);
        if (!t->preemptible || t->priority >= r->priority
            || (s->preempt_min_ms && now < t->start_ms + s->preempt_min_ms))
            continue;
        c[n++] = (struct bcand){t, now > since ? now - since : 0, 0};
    }
    qsort(c, n, sizeof(*c), bcand_cmp);
    return n;
}

/* The plain plan on one node: the first prefix that fits, made minimal;
 * 1 with *out (victims sorted by id, placement) or 0. */
static int bnode(crater_sched_t *s,
                 const crater_request_t *r,
                 uint32_t node,
                 crater_preempt_plan_t *out)
{
    struct bcand c[256];
    struct sched_ctx ctx;
    uint32_t n = bgather(s, r, node, c), k = 0;
    int ok = 0;

    while (!ok && k < n && k < MAXV) {
        bflip(s, &c[k++], 1);
        ok = bfits(s, node, r);
    }
    if (ok) {
        for (uint32_t i = k - 1; i-- > 0;) {
            bflip(s, &c[i], 0);
            if (!bfits(s, node, r))
                bflip(s, &c[i], 1);
        }
        memset(out, 0, sizeof(*out));
        out->max_priority = INT32_MIN;
        for (uint32_t i = 0; i < k; i++) {
            if (!c[i].gone)
                continue;
            out->victims[out->nvictims++] = c[i].t->id;
            out->lost_ms += c[i].lost;
            if (c[i].t->priority > out->max_priority)
                out->max_priority = c[i].t->priority;
        }
        sched__eval(s, node, r, &ctx);
        out->placement = ctx.p;
    }
    for (uint32_t i = k; i-- > 0;)
        if (c[i].gone)
            bflip(s, &c[i], 0);
    return ok;
}

static int bcheaper(const crater_preempt_plan_t *a,
                    const crater_preempt_plan_t *b)
{
    if (a->max_priority != b->max_priority)
        return a->max_priority < b->max_priority;
    if (a->lost_ms != b->lost_ms)
        return a->lost_ms < b->lost_ms;
    return a->nvictims < b->nvictims; /* ties: the lower node, seen first */
}

static int by_id(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static int brute(crater_sched_t *s,
                 const crater_request_t *r,
                 crater_preempt_plan_t *best)
{
    crater_preempt_plan_t cur;
    int found = 0;

    for (uint32_t node = 0; node < s->ntcap && node < s->n; node++)
        if (bnode(s, r, node, &cur) && (!found || bcheaper(&cur, best))) {
            *best = cur;
            found = 1;
        }
    if (found)
        qsort(best->victims, best->nvictims, sizeof(best->victims[0]), by_id);
    return found;
}

static void check_same(const crater_preempt_plan_t *a,
                       const crater_preempt_plan_t *b)
{
    ck_assert_uint_eq(a->nvictims, b->nvictims);
    ck_assert_mem_eq(a->victims, b->victims, a->nvictims * sizeof(uint64_t));
    ck_assert_int_eq(a->max_priority, b->max_priority);
    ck_assert_uint_eq(a->lost_ms, b->lost_ms);
    ck_assert_uint_eq(a->placement.node, b->placement.node);
    ck_assert_uint_eq(a->placement.ngpus, b->placement.ngpus);
    ck_assert_mem_eq(a->placement.gpu, b->placement.gpu, a->placement.ngpus);
}

/* Shape k of the few requests planned again and again (fixed). */
static crater_request_t shape(uint32_t k)
{
    static crater_request_t sh[NSHAPES];
    static int made;

    if (!made) {
        for (uint32_t i = 0; i < NSHAPES; i++) {
            sh[i] = random_req();
            sh[i].priority = 10; /* above every task but its own class */
            sh[i].cpu_milli += 40000 * (i % 2); /* tight on CPU too */
        }
        sh[2].priority = 5;
        sh[5].gpus = 2; /* often no plan: victims of priority 0 only */
        sh[5].slice_mib = 0;
        sh[5].priority = 5;
        made = 1;
    }
    return sh[k];
}

static void run_random(uint32_t rounds, uint64_t min_ms)
{
    crater_plan_memo_t memo[NSHAPES] = {{0}};
    crater_sched_t *s;
    uint64_t ids[4096], next = 1;
    uint32_t n = 0, plans = 0, fails = 0, reused = 0;

    cfg.scheduler.gpu_context_overhead = 0;
    cfg.scheduler.preemption_min_runtime_ms = min_ms;
    s = cluster(2 + rnd(6));
    for (uint32_t i = 0; i < rounds; i++) {
        uint32_t k = rnd(NSHAPES);
        crater_request_t r = shape(k);
        crater_preempt_plan_t got, plain, want;
        crater_error_t e1, e2;
        int rc1, rc2, fits;
        step(s, ids, &n, &next);
        reused += memo[k].ver != 0;
        fits = crater_sched_place(s, &r, &want.placement, NULL) == 0;
        rc1 = crater_sched_plan_preemption_memo(s, &r, &memo[k], &got, &e1);
        rc2 = crater_sched_plan_preemption(s, &r, &plain, &e2);
        ck_assert_int_eq(rc1, rc2);
        if (fits) {
            ck_assert_int_eq(rc1, 0);
            ck_assert_uint_eq(got.nvictims, 0);
            continue;
        }
        if (brute(s, &r, &want)) {
            ck_assert_int_eq(rc1, 0);
            check_same(&got, &want);
            check_same(&plain, &want);
            plans++;
        } else {
            ck_assert_int_eq(rc1, -1);
            ck_assert_str_eq(e1.text, e2.text);
            fails++;
        }
    }
    ck_assert_uint_gt(plans, 10); /* both outcomes were exercised */
    ck_assert_uint_gt(fails, 10);
    ck_assert(min_ms ? reused == 0 : reused > 10);
    crater_sched_destroy(s);
}

START_TEST(memo_plans_like_brute_force)
{
    rng += (uint64_t)_i * 7919;
    run_random(4000, 0);
}
END_TEST

START_TEST(min_runtime_plans_like_brute_force)
{
    rng += (uint64_t)_i * 104729;
    run_random(2000, 1500);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("preempt_skip");
    TCase *tc = tcase_create("skip");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, sums_equal_recount);
    tcase_add_loop_test(tc, memo_plans_like_brute_force, 0, 6);
    tcase_add_loop_test(tc, min_runtime_plans_like_brute_force, 0, 2);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
