/* test_gang_preempt.c - preemption plans for gangs
 * (crater_sched_plan_gang_preemption): victims on several nodes, all or
 * nothing, the state left exactly as it was (failed or not), and a
 * brute-force reference on random small clusters (2-4 nodes) that
 * enumerates the sets of candidate victims: the planner finds a plan
 * exactly when some set lets every replica fit, its victims are all
 * preemptible and of lower priority, and the plan executes (victims
 * released, replicas committed in order). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "crater/hwfile.h"
#include "crater/sched.h"
#include "sched/internal.h"

#define EX(f) CRATER_SOURCE_DIR "/examples/hardware/" f
#define GANG_TASK 9000

static crater_kb_t *kb;
static crater_config_t cfg;
static uint64_t now;

static uint64_t clock_now(void *arg)
{
    return *(uint64_t *)arg;
}

static void setup(void)
{
    kb = crater_kb_create();
    ck_assert_int_eq(crater_config_defaults(&cfg), 0);
    cfg.scheduler.gpu_context_overhead = 0;
    cfg.scheduler.preemption_min_runtime_ms = 0;
    now = 0;
}

static void teardown(void)
{
    crater_config_clear(&cfg);
    crater_kb_destroy(kb);
}

/* cluster.yaml: a100 x8, a100 x8, h100 x8, l4 x4, ...; the first keep
 * nodes stay, the others are cordoned. */
static crater_sched_t *load(uint32_t keep)
{
    crater_sched_env_t env = {.now_ms = clock_now, .arg = &now};
    crater_sched_t *s = crater_sched_create(&cfg, kb, &env);
    crater_cluster_t *cl = NULL;
    crater_error_t err;

    ck_assert_msg(crater_hw_load(EX("cluster.yaml"), kb, &cl, &err) == 0,
                  "%s",
                  err.text);
    for (size_t i = 0; i < cl->nnodes; i++)
        ck_assert(crater_sched_add_node(s, &cl->nodes[i], &err) >= 0);
    crater_cluster_destroy(cl);
    for (uint32_t n = keep; n < crater_sched_node_count(s); n++)
        crater_sched_set_cordoned(s, n, true);
    return s;
}

static crater_request_t req(uint32_t gpus, uint32_t mib, int32_t prio)
{
    crater_request_t r = {.gpus = gpus,
                          .slice_mib = mib,
                          .cpu_milli = 1000,
                          .mem_bytes = 1ull << 30,
                          .numa = CRATER_NUMA_PREFERRED,
                          .priority = prio};
    return r;
}

/* Place and commit a task of r (preemptible or not) at time t. */
static bool run_task(crater_sched_t *s,
                     uint64_t id,
                     crater_request_t r,
                     bool preemptible,
                     uint64_t t)
{
    crater_placement_t p;

    now = t;
    r.preemptible = preemptible;
    if (crater_sched_place(s, &r, &p, NULL) < 0)
        return false;
    ck_assert_int_eq(crater_sched_commit(s, id, &r, &p, NULL), 0);
    return true;
}

/* ---- the state, for exact comparison ------------------------------------- */

struct snap {
    struct node_dyn *dyn;
    struct gpu_dyn *gd;
    struct dev_dyn *dd;
    struct task *tasks; /* by id */
    uint32_t ntasks, npcount;
    struct prio_count pcount[16];
    uint64_t since_max;
    crater_placement_t probe[3];
};

static int cmp_task(const void *a, const void *b)
{
    const struct task *x = a, *y = b;

    return x->id < y->id ? -1 : x->id > y->id;
}

static void take_snap(crater_sched_t *s, struct snap *x)
{
    crater_request_t pr[3] = {req(1, 0, 0), req(1, 5000, 0), req(0, 0, 0)};

    memset(x, 0, sizeof(*x));
    x->dyn = malloc(s->n * sizeof(*x->dyn));
    x->gd = malloc(s->ngpu * sizeof(*x->gd));
    x->dd = malloc((s->ndev + 1) * sizeof(*x->dd));
    x->tasks = calloc(s->tused + 1, sizeof(*x->tasks));
    memcpy(x->dyn, s->dyn, s->n * sizeof(*x->dyn));
    memcpy(x->gd, s->gd, s->ngpu * sizeof(*x->gd));
    memcpy(x->dd, s->dd, s->ndev * sizeof(*x->dd));
    for (uint32_t i = 0; i < s->tsize; i++)
        if (s->tasks[i].id)
            x->tasks[x->ntasks++] = s->tasks[i];
    qsort(x->tasks, x->ntasks, sizeof(*x->tasks), cmp_task);
    ck_assert_uint_le(s->npcount, 16);
    x->npcount = s->npcount;
    memcpy(x->pcount, s->pcount, s->npcount * sizeof(*s->pcount));
    x->since_max = s->since_max;
    for (int i = 0; i < 3; i++)
        if (crater_sched_place(s, &pr[i], &x->probe[i], NULL) < 0)
            x->probe[i].node = CRATER_SCHED_NO_NODE;
}

static void same_snap(crater_sched_t *s, struct snap *a)
{
    struct snap b;

    take_snap(s, &b);
    ck_assert_int_eq(memcmp(a->dyn, b.dyn, s->n * sizeof(*a->dyn)), 0);
    ck_assert_int_eq(memcmp(a->gd, b.gd, s->ngpu * sizeof(*a->gd)), 0);
    ck_assert_int_eq(memcmp(a->dd, b.dd, s->ndev * sizeof(*a->dd)), 0);
    ck_assert_uint_eq(a->ntasks, b.ntasks);
    ck_assert_int_eq(memcmp(a->tasks, b.tasks, a->ntasks * sizeof(*a->tasks)),
                     0);
    ck_assert_uint_eq(a->npcount, b.npcount);
    ck_assert_int_eq(memcmp(a->pcount,
                            b.pcount,
                            a->npcount * sizeof(*a->pcount)),
                     0);
    ck_assert_uint_eq(a->since_max, b.since_max);
    ck_assert_int_eq(memcmp(a->probe, b.probe, sizeof(a->probe)), 0);
    free(b.dyn);
    free(b.gd);
    free(b.dd);
    free(b.tasks);
}

static void free_snap(struct snap *x)
{
    free(x->dyn);
    free(x->gd);
    free(x->dd);
    free(x->tasks);
}

/* ---- hand-made cases ----------------------------------------------------- */

/* Two A100 nodes, seven GPUs each held by a non-preemptible task and the
 * eighth by a preemptible one of priority low (ids 1 and 2); ids 100+
 * for the others. */
/* Commit a task holding GPU gpu of node whole at time t. */
static void whole_gpu(crater_sched_t *s,
                      uint64_t id,
                      uint32_t node,
                      uint8_t gpu,
                      int32_t prio,
                      bool preemptible,
                      uint64_t t)
{
    crater_request_t r = {.priority = prio, .preemptible = preemptible};
    crater_placement_t p = {.node = node,
                            .ngpus = 1,
                            .gpu = {gpu},
                            .gpu_mib = {81920},
                            .whole = true,
                            .numa = -1,
                            .storage = -1};

    now = t;
    ck_assert_int_eq(crater_sched_commit(s, id, &r, &p, NULL), 0);
}

static crater_sched_t *two_full_nodes(int32_t low, bool second_preemptible)
{
    crater_sched_t *s = load(2);
    uint64_t id = 100;

    for (uint32_t n = 0; n < 2; n++)
        for (uint8_t g = 1; g < 8; g++)
            whole_gpu(s, id++, n, g, 0, false, 0);
    whole_gpu(s, 1, 0, 0, low, true, 10);
    whole_gpu(s, 2, 1, 0, low, second_preemptible, 20);
    return s;
}

/* One victim on each node: the plan spans both and executes. */
START_TEST(victims_on_two_nodes)
{
    crater_sched_t *s = two_full_nodes(1, true);
    crater_request_t r = req(1, 0, 10);
    crater_placement_t out[2], again[2];
    crater_preempt_plan_t plan, plan2;
    crater_error_t err;
    struct snap before;

    now = 1000;
    ck_assert_int_eq(crater_sched_place_gang(s, &r, 2, GANG_TASK, out, &err),
                     -1);
    take_snap(s, &before);
    ck_assert_msg(crater_sched_plan_gang_preemption(s,
                                                    &r,
                                                    2,
                                                    GANG_TASK,
                                                    &plan,
                                                    out,
                                                    &err)
                      == 0,
                  "%s",
                  err.text);
    same_snap(s, &before);
    ck_assert_uint_eq(plan.nvictims, 2);
    ck_assert_uint_eq(plan.victims[0], 1);
    ck_assert_uint_eq(plan.victims[1], 2);
    ck_assert_int_eq(plan.max_priority, 1);
    ck_assert_uint_eq(plan.lost_ms, 990 + 980);
    ck_assert_uint_ne(out[0].node, out[1].node);
    ck_assert_int_eq(memcmp(&plan.placement, &out[0], sizeof(out[0])), 0);
    /* the same again: nothing was left behind to change it */
    ck_assert_int_eq(crater_sched_plan_gang_preemption(s,
                                                       &r,
                                                       2,
                                                       GANG_TASK,
                                                       &plan2,
                                                       again,
                                                       &err),
                     0);
    ck_assert_int_eq(memcmp(&plan, &plan2, sizeof(plan)), 0);
    ck_assert_int_eq(memcmp(out, again, sizeof(out)), 0);
    for (uint32_t i = 0; i < plan.nvictims; i++)
        ck_assert_int_eq(crater_sched_release(s, plan.victims[i], NULL), 0);
    for (uint32_t i = 0; i < 2; i++)
        ck_assert_int_eq(crater_sched_commit(s,
                                             GANG_TASK + i,
                                             &r,
                                             &out[i],
                                             &err),
                         0);
    free_snap(&before);
    crater_sched_destroy(s);
}
END_TEST

/* One replica has a victim, the other none: no plan, nothing touched. */
START_TEST(all_or_nothing)
{
    crater_sched_t *s = two_full_nodes(1, false);
    crater_request_t r = req(1, 0, 10);
    crater_placement_t out[2];
    crater_preempt_plan_t plan;
    crater_error_t err;
    struct snap before;

    now = 1000;
    take_snap(s, &before);
    ck_assert_int_eq(crater_sched_plan_gang_preemption(s,
                                                       &r,
                                                       2,
                                                       GANG_TASK,
                                                       &plan,
                                                       out,
                                                       &err),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNSCHED);
    ck_assert_ptr_nonnull(strstr(err.text, "replica 2 of 2"));
    same_snap(s, &before);
    /* one replica alone has its plan */
    ck_assert_int_eq(crater_sched_plan_preemption(s, &r, &plan, &err), 0);
    ck_assert_uint_eq(plan.nvictims, 1);
    free_snap(&before);
    crater_sched_destroy(s);
}
END_TEST

/* Victims of equal or higher priority are never taken. */
START_TEST(never_equal_priority)
{
    crater_sched_t *s = two_full_nodes(10, true);
    crater_request_t r = req(1, 0, 10);
    crater_placement_t out[2];
    crater_preempt_plan_t plan;
    crater_error_t err;

    now = 1000;
    ck_assert_int_eq(crater_sched_plan_gang_preemption(s,
                                                       &r,
                                                       2,
                                                       GANG_TASK,
                                                       &plan,
                                                       out,
                                                       &err),
                     -1);
    crater_sched_destroy(s);
}
END_TEST

/* Commit a slice of mib on GPU gpu of node 0 at time t. */
static void slice_task(crater_sched_t *s,
                       uint64_t id,
                       uint8_t gpu,
                       uint32_t mib,
                       int32_t prio,
                       bool preemptible)
{
    crater_request_t r = {.priority = prio, .preemptible = preemptible};
    crater_placement_t p = {.node = 0,
                            .ngpus = 1,
                            .gpu = {gpu},
                            .gpu_mib = {mib},
                            .numa = -1,
                            .storage = -1};

    ck_assert_int_eq(crater_sched_commit(s, id, &r, &p, NULL), 0);
}

/* GPUs with 40, 30 and 30 GiB free, the first behind a preemptible task
 * of 40 GiB: two replicas of two 30 GiB slices fit only as (0,1) and
 * (0,2) once it is gone. Planned replica by replica, the first replica
 * fits as it is and best fit gives it (1,2), which leaves the second
 * nothing even with the victim gone: the plan must look further (every
 * candidate released, the gang search). */
START_TEST(plan_beyond_replica_order)
{
    crater_sched_t *s = load(1);
    crater_request_t r = req(2, 30720, 10);
    crater_placement_t out[2];
    crater_preempt_plan_t plan;
    crater_error_t err;
    struct snap before;

    for (uint8_t g = 3; g < 8; g++)
        whole_gpu(s, 100 + g, 0, g, 0, false, 0);
    slice_task(s, 1, 0, 40960, 1, true);
    slice_task(s, 2, 1, 51200, 1, false);
    slice_task(s, 3, 2, 51200, 1, false);
    now = 1000;
    ck_assert_int_eq(crater_sched_place_gang(s, &r, 2, GANG_TASK, out, &err),
                     -1);
    take_snap(s, &before);
    ck_assert_msg(crater_sched_plan_gang_preemption(s,
                                                    &r,
                                                    2,
                                                    GANG_TASK,
                                                    &plan,
                                                    out,
                                                    &err)
                      == 0,
                  "%s",
                  err.text);
    same_snap(s, &before);
    ck_assert_uint_eq(plan.nvictims, 1);
    ck_assert_uint_eq(plan.victims[0], 1);
    ck_assert_int_eq(crater_sched_release(s, 1, NULL), 0);
    for (uint32_t i = 0; i < 2; i++)
        ck_assert_int_eq(crater_sched_commit(s,
                                             GANG_TASK + i,
                                             &r,
                                             &out[i],
                                             &err),
                         0);
    free_snap(&before);
    crater_sched_destroy(s);
}
END_TEST

/* ---- against the brute force --------------------------------------------- */

#define MAXT 24

struct world {
    crater_sched_t *s;
    uint64_t ids[MAXT];
    int32_t prio[MAXT];
    bool pre[MAXT];
    uint32_t n;
};

/* A random cluster of 2-4 nodes, filled with random tasks. */
static void fill(struct world *w, unsigned *seed)
{
    uint32_t nodes = 2 + (uint32_t)rand_r(seed) % 3;

    w->s = load(nodes);
    w->n = 0;
    for (uint32_t k = 0; k < 40 && w->n < MAXT; k++) {
        uint32_t gpus = 1 + (uint32_t)rand_r(seed) % 2;
        uint32_t mib = rand_r(seed) % 2 ? 10000 * (1 + rand_r(seed) % 6) : 0;
        int32_t prio = rand_r(seed) % 4;
        bool pre = rand_r(seed) % 3 != 0;
        uint64_t id = w->n + 1;
        if (!run_task(w->s, id, req(mib ? 1 : gpus, mib, prio), pre, 10 * id))
            continue;
        w->ids[w->n] = id;
        w->prio[w->n] = prio;
        w->pre[w->n] = pre;
        w->n++;
    }
}

/* Does releasing the tasks of mask over cands let the gang fit (the
 * brute-force gang placement)? The state is restored. */
static bool fits_with(struct world *w,
                      const crater_request_t *r,
                      uint32_t replicas,
                      const uint32_t *cands,
                      uint32_t nc,
                      uint32_t mask)
{
    crater_placement_t out[4], p[MAXT];
    crater_request_t back;
    bool ok;

    for (uint32_t i = 0; i < nc; i++)
        if (mask >> i & 1) {
            p[i] = sched__task_find(w->s, w->ids[cands[i]])->p;
            ck_assert_int_eq(crater_sched_release(w->s, w->ids[cands[i]], NULL),
                             0);
        }
    ok = crater_sched_place_gang_bruteforce(w->s,
                                            r,
                                            replicas,
                                            GANG_TASK,
                                            out,
                                            NULL)
         == 0;
    for (uint32_t i = replicas; ok && i-- > 0;)
        crater_sched_release(w->s, GANG_TASK + i, NULL);
    for (uint32_t i = nc; i-- > 0;)
        if (mask >> i & 1) {
            back = req(0, 0, w->prio[cands[i]]);
            back.preemptible = true;
            ck_assert_int_eq(crater_sched_commit(w->s,
                                                 w->ids[cands[i]],
                                                 &back,
                                                 &p[i],
                                                 NULL),
                             0);
            sched__task_find(w->s, w->ids[cands[i]])->start_ms =
                10 * w->ids[cands[i]]; /* as fill() started it */
        }
    return ok;
}

/* Some set of candidate victims lets the gang fit: 1 yes, 0 no, -1 too
 * many candidates to enumerate (the round is skipped). */
static int plan_exists(struct world *w,
                       const crater_request_t *r,
                       uint32_t replicas)
{
    uint32_t cands[MAXT], nc = 0;

    for (uint32_t i = 0; i < w->n; i++)
        if (w->pre[i] && w->prio[i] < r->priority)
            cands[nc++] = i;
    if (nc > 8)
        return -1;
    for (uint32_t mask = 0; mask < (1u << nc); mask++)
        if (fits_with(w, r, replicas, cands, nc, mask))
            return 1;
    return 0;
}

/* Check a plan: victims allowed, and it executes. */
static void check_plan(struct world *w,
                       const crater_request_t *r,
                       uint32_t replicas,
                       const crater_preempt_plan_t *plan,
                       const crater_placement_t *out)
{
    crater_error_t err;

    for (uint32_t v = 0; v < plan->nvictims; v++) {
        uint32_t i = (uint32_t)plan->victims[v] - 1;
        ck_assert_uint_lt(i, w->n);
        ck_assert(w->pre[i]);
        ck_assert_int_lt(w->prio[i], r->priority);
        ck_assert_int_eq(crater_sched_release(w->s, plan->victims[v], NULL), 0);
    }
    for (uint32_t i = 0; i < replicas; i++)
        ck_assert_int_eq(crater_sched_commit(w->s,
                                             GANG_TASK + 100 + i,
                                             r,
                                             &out[i],
                                             &err),
                         0);
}

START_TEST(matches_bruteforce)
{
    unsigned seed = 1234;
    int found = 0, none = 0;

    for (int round = 0; round < 300; round++) {
        struct world w;
        uint32_t replicas = 2 + (uint32_t)rand_r(&seed) % 2;
        crater_request_t r =
            req(1 + (uint32_t)rand_r(&seed) % 2, 0, 1 + rand_r(&seed) % 4);
        crater_placement_t out[4];
        crater_preempt_plan_t plan;
        crater_error_t err;
        struct snap before;
        int exists, rc;

        if (replicas == 3)
            r.gpus = 1; /* keeps the brute force small */
        fill(&w, &seed);
        now = 5000;
        if (crater_sched_place_gang(w.s, &r, replicas, GANG_TASK, out, NULL)
            == 0) {
            crater_sched_destroy(w.s);
            continue; /* fits as it is: nothing to plan */
        }
        if ((exists = plan_exists(&w, &r, replicas)) < 0) {
            crater_sched_destroy(w.s);
            continue;
        }
        take_snap(w.s, &before);
        rc = crater_sched_plan_gang_preemption(w.s,
                                               &r,
                                               replicas,
                                               GANG_TASK,
                                               &plan,
                                               out,
                                               &err);
        same_snap(w.s, &before);
        ck_assert_msg((rc == 0) == exists,
                      "round %d: planner %d, brute force %d (%s)",
                      round,
                      rc,
                      exists,
                      rc ? err.text : "");
        if (rc == 0) {
            ck_assert_uint_gt(plan.nvictims, 0);
            check_plan(&w, &r, replicas, &plan, out);
            found++;
        } else {
            none++;
        }
        free_snap(&before);
        crater_sched_destroy(w.s);
    }
    ck_assert_int_gt(found, 20); /* both outcomes are exercised */
    ck_assert_int_gt(none, 10);
}
END_TEST

static Suite *suite(void)
{
    Suite *su = suite_create("gang_preempt");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, victims_on_two_nodes);
    tcase_add_test(tc, all_or_nothing);
    tcase_add_test(tc, never_equal_priority);
    tcase_add_test(tc, plan_beyond_replica_order);
    tcase_add_test(tc, matches_bruteforce);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
