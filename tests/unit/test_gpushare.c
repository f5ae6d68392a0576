/* test_gpushare.c - GPU sharing (scheduler.gpuShare, doc/scheduling.md
 * "GPU sharing"): which whole-GPU requests crater_sched_share turns into
 * time-shared slices and why it refuses the others; the placement rule
 * (time-shared jobs only with time-shared jobs, their profiled use within
 * maxUtil; plain slices never on a time-shared GPU) with its explanations;
 * the fast path against the brute-force scan on random clusters, every
 * GPU's tenants checked against the rule from the live placements alone;
 * and a disk bandwidth request as a preference (disk_soft), the fix for
 * the high-priority waits the profiled disk reservation caused (RESULTS
 * "B4 measured, with GPU sharing"). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/sched.h"
#include "sched_fixture.h"

static void share_on(void)
{
    cfg.scheduler.gpu_share.enabled = true;
    cfg.scheduler.gpu_share.max_util = 0.9;
    cfg.scheduler.gpu_share.memory_margin = 0.2;
}

/* Place with both paths, check they agree (placement or explanation),
 * commit under task id. */
static int place_commit(crater_sched_t *s,
                        const crater_request_t *r,
                        uint64_t task,
                        crater_placement_t *out,
                        char *why)
{
    crater_placement_t a, b;
    crater_error_t e1, e2;
    int ra = crater_sched_place(s, r, &a, &e1);
    int rb = crater_sched_place_bruteforce(s, r, &b, &e2);

    ck_assert_int_eq(ra, rb);
    if (ra < 0) {
        ck_assert_str_eq(e1.text, e2.text);
        if (why)
            snprintf(why, sizeof(e1.text), "%s", e1.text);
        return -1;
    }
    ck_assert_int_eq(memcmp(&a, &b, sizeof(a)), 0);
    ck_assert_int_eq(crater_sched_commit(s, task, r, &a, &e1), 0);
    if (out)
        *out = a;
    return 0;
}

/* A whole-GPU request made time-shared with use util and peak mib. */
static crater_request_t shared(crater_sched_t *s, double util, uint64_t mib)
{
    crater_request_t r = req_slice(1, 0);
    const char *why = NULL;

    ck_assert_int_eq(crater_sched_share(s, &r, util, mib, &why), 1);
    ck_assert_ptr_null(why);
    return r;
}

START_TEST(share_converts_only_profiled_whole_gpu_requests)
{
    crater_request_t r = req_slice(1, 0), sl = req_slice(1, 1000);
    const char *why;
    crater_sched_t *s = load(EX("a2-a100.yaml")); /* sharing off */

    ck_assert_int_eq(crater_sched_share(s, &r, 0.3, 10000, &why), 0);
    ck_assert_str_eq(why, "GPU sharing off (scheduler.gpuShare.enabled)");
    ck_assert_uint_eq(r.slice_mib, 0); /* unchanged */
    crater_sched_destroy(s);

    share_on();
    s = load(EX("a2-a100.yaml"));
    ck_assert_int_eq(crater_sched_share(s, &sl, 0.3, 10000, &why), 0);
    ck_assert_str_eq(why, "not a whole-GPU request");
    ck_assert_int_eq(crater_sched_share(s, &r, 0.9, 10000, &why), 0);
    ck_assert_str_eq(why, "profiled GPU use at or above gpuShare.maxUtil");
    ck_assert_int_eq(crater_sched_share(s, &r, 0.3, 0, &why), 0);
    ck_assert_str_eq(why, "no peak GPU memory measured");
    /* 70000 x 1.2 + 300 context > 81920 MiB */
    ck_assert_int_eq(crater_sched_share(s, &r, 0.3, 70000, &why), 0);
    ck_assert_str_eq(why,
                     "peak GPU memory x (1 + memoryMargin) larger than "
                     "every GPU");
    ck_assert_uint_eq(r.slice_mib, 0);
    ck_assert_int_eq(crater_sched_share(s, &r, 0.3, 10000, &why), 1);
    ck_assert_uint_eq(r.slice_mib, 12000);
    ck_assert_uint_eq(r.share_milli, 300);
    crater_sched_destroy(s);
}
END_TEST

/* Two GPUs of 80 GiB: time-shared jobs stack on a GPU up to maxUtil, and
 * no plain slice or whole job joins them (nor they a plain slice). */
START_TEST(share_rule_and_explanations)
{
    crater_sched_t *s;
    crater_placement_t p;
    crater_request_t a, plain = req_slice(1, 1000), whole = req_slice(1, 0);
    crater_error_t err;
    char why[160];

    share_on();
    s = load(EX("a2-a100.yaml"));
    a = shared(s, 0.4, 10000);
    ck_assert_int_eq(place_commit(s, &a, 1, &p, NULL), 0);
    ck_assert(!p.whole);
    ck_assert_uint_eq(p.share_milli, 400);
    ck_assert_uint_eq(p.gpu_mib[0], 12000 + 300); /* the enforced slice */
    ck_assert_int_eq(place_commit(s, &a, 2, &p, NULL), 0);
    ck_assert_uint_eq(p.gpu[0], 1); /* an empty GPU before co-location */
    ck_assert_int_eq(place_commit(s, &a, 3, &p, NULL), 0);
    ck_assert_uint_eq(p.gpu[0], 0); /* none empty: joins, 0.8 on GPU 0 */
    ck_assert_int_eq(place_commit(s, &plain, 4, &p, why), -1);
    ck_assert_str_eq(why,
                     "0/1 nodes fit: 1 GPUs time-shared by profiled "
                     "whole-GPU jobs (gpuShare) (need 1, best 0 on "
                     "gpu-a100-0)");
    ck_assert_int_eq(place_commit(s, &whole, 4, &p, NULL), -1);
    a = shared(s, 0.6, 10000); /* 1.4 and 1.0 */
    ck_assert_int_eq(place_commit(s, &a, 4, &p, why), -1);
    ck_assert_str_eq(why,
                     "0/1 nodes fit: 1 GPU sharing: profiled use would "
                     "pass gpuShare.maxUtil (limit 90%, best 100% on "
                     "gpu-a100-0)");
    a = shared(s, 0.5, 10000); /* 0.9 on GPU 1: at the limit */
    ck_assert_int_eq(place_commit(s, &a, 4, &p, NULL), 0);
    ck_assert_uint_eq(p.gpu[0], 1);
    for (uint64_t t = 1; t <= 4; t++)
        ck_assert_int_eq(crater_sched_release(s, t, &err), 0);
    /* a plain slice first: a time-shared job avoids its GPU */
    ck_assert_int_eq(place_commit(s, &plain, 5, &p, NULL), 0);
    ck_assert_uint_eq(p.gpu[0], 0);
    a = shared(s, 0.2, 10000);
    ck_assert_int_eq(place_commit(s, &a, 6, &p, NULL), 0);
    ck_assert_uint_eq(p.gpu[0], 1);
    ck_assert_int_eq(place_commit(s, &whole, 7, &p, why), -1);
    ck_assert_int_eq(crater_sched_release(s, 6, &err), 0);
    ck_assert_int_eq(place_commit(s, &whole, 7, &p, NULL), 0);
    ck_assert(p.whole);
    ck_assert_uint_eq(p.gpu[0], 1);
    ck_assert_int_eq(place_commit(s, &a, 8, &p, why), -1);
    ck_assert_str_eq(why,
                     "0/1 nodes fit: 1 GPU sharing: every GPU holds a job "
                     "that is not time-shared (need 1, best 0 on "
                     "gpu-a100-0)");
    ck_assert_int_eq(crater_sched_release(s, 5, &err), 0);
    ck_assert_int_eq(place_commit(s, &a, 8, &p, NULL), 0);
    ck_assert_uint_eq(p.gpu[0], 0);
    a = shared(s, 0.8, 10000); /* 1.0 */
    ck_assert_int_eq(place_commit(s, &a, 9, &p, why), -1);
    ck_assert_str_eq(why,
                     "0/1 nodes fit: 1 GPU sharing: profiled use would "
                     "pass gpuShare.maxUtil (limit 90%, best 100% on "
                     "gpu-a100-0)");
    crater_sched_destroy(s);
}
END_TEST

/* a2-a100 has one 6.9 GB/s disk: a hard request past what is free waits,
 * a soft one is placed without its bandwidth, and with it when free. */
START_TEST(soft_disk_request_is_a_preference)
{
    crater_sched_t *s = load(EX("a2-a100.yaml"));
    crater_request_t hard = req_slice(0, 0), soft;
    crater_placement_t p;
    crater_error_t err;

    hard.disk_bw = 5000000000ull;
    soft = hard;
    soft.disk_soft = true;
    ck_assert_int_eq(place_commit(s, &hard, 1, &p, NULL), 0);
    ck_assert_uint_eq(p.disk_bw, 5000000000ull);
    ck_assert_int_eq(place_commit(s, &hard, 2, &p, NULL), -1);
    ck_assert_int_eq(place_commit(s, &soft, 2, &p, NULL), 0);
    ck_assert_uint_eq(p.disk_bw, 0);
    ck_assert_int_eq(crater_sched_release(s, 1, &err), 0);
    ck_assert_int_eq(place_commit(s, &soft, 3, &p, NULL), 0);
    ck_assert_uint_eq(p.disk_bw, 5000000000ull);
    crater_sched_destroy(s);
}
END_TEST

/* Sharing on but nothing shared: plain requests decide as with it off. */
START_TEST(sharing_on_changes_nothing_without_shared_jobs)
{
    crater_sched_t *off = load(EX("a2-a100.yaml")), *on;
    crater_placement_t p1, p2;
    crater_request_t r[3] = {req_slice(1, 5000),
                             req_slice(1, 0),
                             req_slice(1, 70000)};

    share_on();
    on = load(EX("a2-a100.yaml"));
    for (uint64_t t = 0; t < 3; t++) {
        ck_assert_int_eq(place_commit(off, &r[t], t + 1, &p1, NULL), 0);
        ck_assert_int_eq(place_commit(on, &r[t], t + 1, &p2, NULL), 0);
        ck_assert_int_eq(memcmp(&p1, &p2, sizeof(p1)), 0);
    }
    crater_sched_destroy(off);
    crater_sched_destroy(on);
}
END_TEST

/* ---- random clusters ---------------------------------------------------- */

struct live {
    uint64_t id;
    crater_placement_t p;
};

/* The rule, from the live placements alone: on every GPU either no
 * time-shared task, or only time-shared tasks whose use adds up to at
 * most 900 thousandths; a whole GPU holds one task. */
static void check_rule(const struct live *lv, int n)
{
    for (int i = 0; i < n; i++)
        for (uint32_t k = 0; k < lv[i].p.ngpus; k++) {
            uint32_t node = lv[i].p.node, g = lv[i].p.gpu[k];
            uint32_t use = 0, plain = 0, sh = 0, whole = 0;
            for (int j = 0; j < n; j++)
                for (uint32_t m = 0; m < lv[j].p.ngpus; m++) {
                    if (lv[j].p.node != node || lv[j].p.gpu[m] != g)
                        continue;
                    use += lv[j].p.share_milli;
                    sh += lv[j].p.share_milli != 0;
                    plain += lv[j].p.share_milli == 0;
                    whole += lv[j].p.whole;
                }
            ck_assert(!(sh && plain));
            ck_assert_uint_le(use, 900);
            ck_assert(!whole || plain + sh == 1);
        }
}

static crater_node_t random_node(int id, unsigned *seed)
{
    static char names[64][16];
    static crater_gpu_t gpus[64][8];
    static crater_cpu_t cpu[64];
    static crater_mem_t mem[64];
    crater_node_t n = {0};
    int ngpus = 1 + rand_r(seed) % 8;

    snprintf(names[id], sizeof(names[id]), "r%d", id);
    n.name = names[id];
    cpu[id] = (crater_cpu_t){.cores = 64};
    mem[id] = (crater_mem_t){.capacity = 512ull << 30};
    n.cpus = &cpu[id], n.ncpus = 1;
    n.mems = &mem[id], n.nmems = 1;
    n.gpus = gpus[id];
    n.ngpus = (size_t)ngpus;
    for (int i = 0; i < ngpus; i++)
        gpus[id][i] =
            (crater_gpu_t){.model = rand_r(seed) % 2 ? "t4" : "a100-sxm4-80gb",
                           .vendor = "nvidia",
                           .memory_bytes = (rand_r(seed) % 2 ? 16ull : 80ull)
                                           << 30,
                           .upstream = "sw0"};
    return n;
}

/* Whole, plain slice or time-shared, on 1-2 GPUs; some too hungry to
 * share (use at or above maxUtil, peak beyond every GPU). */
static crater_request_t random_request(crater_sched_t *s, unsigned *seed)
{
    int kind = rand_r(seed) % 4;
    crater_request_t r =
        req_slice(1 + (uint32_t)(rand_r(seed) % 4 == 0),
                  kind == 0 ? (uint32_t)(1 + rand_r(seed) % 20) * 1024 : 0);

    r.cpu_milli = (uint64_t)(rand_r(seed) % 8) * 1000;
    if (kind >= 2)
        crater_sched_share(s,
                           &r,
                           (rand_r(seed) % 100) / 100.0,
                           (uint64_t)(1 + rand_r(seed) % 80) * 1024,
                           NULL);
    return r;
}

START_TEST(differential_random_clusters_with_sharing)
{
    share_on();
    for (unsigned cl = 0; cl < 16; cl++) {
        unsigned seed = 7000 + cl;
        cfg.scheduler.overcommit_ratio = cl % 2 ? 1.5 : 1.0;
        char *keep = cfg.scheduler.policy;
        cfg.scheduler.policy = cl % 4 < 2 ? "crater" : "fgd";
        crater_sched_t *s = crater_sched_create(&cfg, kb, NULL);
        cfg.scheduler.policy = keep; /* the literal is borrowed */
        crater_error_t err;
        struct live lv[512];
        int n = 0, nodes = 2 + rand_r(&seed) % 30, nshared = 0;

        for (int i = 0; i < nodes; i++) {
            crater_node_t nd = random_node(i, &seed);
            ck_assert_int_ge(crater_sched_add_node(s, &nd, &err), 0);
        }
        for (uint64_t t = 1; t <= 500; t++) {
            crater_request_t r = random_request(s, &seed);
            if (n < 512 && place_commit(s, &r, t, &lv[n].p, NULL) == 0) {
                lv[n++].id = t;
                nshared += r.share_milli != 0;
                check_rule(lv, n);
            }
            if (n && rand_r(&seed) % 3 == 0) {
                int k = rand_r(&seed) % n;
                ck_assert_int_eq(crater_sched_release(s, lv[k].id, &err), 0);
                lv[k] = lv[--n];
            }
        }
        ck_assert_int_gt(nshared, 20); /* the rule was exercised */
        crater_sched_destroy(s);
    }
}
END_TEST

int main(void)
{
    Suite *su = suite_create("gpushare");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, share_converts_only_profiled_whole_gpu_requests);
    tcase_add_test(tc, share_rule_and_explanations);
    tcase_add_test(tc, sharing_on_changes_nothing_without_shared_jobs);
    tcase_add_test(tc, soft_disk_request_is_a_preference);
    tcase_add_test(tc, differential_random_clusters_with_sharing);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
