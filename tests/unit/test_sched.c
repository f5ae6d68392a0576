/* test_sched.c - the scheduling core: GPU slice accounting boundaries,
 * whole GPUs, overcommit against the measured watermark, topology, NUMA,
 * thresholds, commit/release as exact inverses, the fast path against the
 * brute-force scan on random clusters, and explanations. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/sched.h"
#include "sched_fixture.h"

/* Place with both paths, check they agree, commit under task id. */
static int place_commit(crater_sched_t *s,
                        const crater_request_t *r,
                        uint64_t task,
                        crater_placement_t *out)
{
    crater_placement_t a, b;
    crater_error_t e1, e2;
    int ra = crater_sched_place(s, r, &a, &e1);
    int rb = crater_sched_place_bruteforce(s, r, &b, &e2);

    ck_assert_int_eq(ra, rb);
    if (ra < 0) {
        ck_assert_str_eq(e1.text, e2.text);
        return -1;
    }
    ck_assert_int_eq(memcmp(&a, &b, sizeof(a)), 0);
    ck_assert_int_eq(crater_sched_commit(s, task, r, &a, &e1), 0);
    if (out)
        *out = a;
    return 0;
}

/* a2-a100: one node, 2 x A100 80GB PCIe (81920 MiB each). */
/* Every policy name the configuration accepts (config.c lists them, on the
   core floor) is one the scheduler implements, and an unknown one is
   refused naming the policies. */
START_TEST(every_configured_policy_is_implemented)
{
    const char *const *names = crater_config_policy_names();
    crater_sched_t *s = crater_sched_create(&cfg, kb, NULL);
    crater_error_t err;
    size_t n = 0;

    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_eq(crater_sched_policy_names(), names);
    for (; names[n]; n++) {
        ck_assert_msg(crater_sched_set_policy(s, names[n], &err) == 0,
                      "%s: %s",
                      names[n],
                      err.text);
        ck_assert_str_eq(crater_sched_policy(s), names[n]);
    }
    ck_assert_uint_ge(n, 8);
    ck_assert_int_eq(crater_sched_set_policy(s, "no-such", &err), -1);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(slice_accounting_boundaries)
{
    crater_sched_t *s;
    crater_placement_t p;
    crater_request_t fill = req_slice(1, 81920 - 300),
                     over = req_slice(1, 81920 - 299), one = req_slice(1, 1);

    cfg.scheduler.gpu_context_overhead = 300ull << 20;
    s = load(EX("a2-a100.yaml"));
    /* slice + context overhead exactly fills a GPU; one MiB more fits
     * nowhere */
    ck_assert_int_eq(place_commit(s, &over, 1, &p), -1);
    ck_assert_int_eq(place_commit(s, &fill, 1, &p), 0);
    ck_assert_uint_eq(p.gpu_mib[0], 81920);
    ck_assert_int_eq(place_commit(s, &one, 2, &p), 0);
    ck_assert_uint_eq(p.gpu[0], 1); /* GPU 0 is exactly full */
    ck_assert_uint_eq(p.gpu_mib[0], 301);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(max_tasks_per_gpu)
{
    crater_sched_t *s;
    crater_request_t r = req_slice(1, 1000);
    crater_placement_t p;
    crater_error_t err;

    cfg.scheduler.max_tasks_per_gpu = 8;
    s = load(EX("a2-a100.yaml"));
    for (uint64_t t = 1; t <= 16; t++) { /* best fit: GPU 0 first */
        ck_assert_int_eq(place_commit(s, &r, t, &p), 0);
        ck_assert_uint_eq(p.gpu[0], t <= 8 ? 0 : 1);
    }
    ck_assert_int_eq(crater_sched_place(s, &r, &p, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNSCHED);
    ck_assert_str_eq(err.text,
                     "0/1 nodes fit: 1 GPUs full: held whole or at "
                     "maxTasksPerGPU (need 1, best 0 on gpu-a100-0)");
    ck_assert_int_eq(crater_sched_release(s, 3, &err), 0);
    ck_assert_int_eq(place_commit(s, &r, 17, &p), 0);
    ck_assert_uint_eq(p.gpu[0], 0);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(whole_gpu_needs_a_free_gpu)
{
    crater_sched_t *s = load(EX("a2-a100.yaml"));
    crater_request_t slice = req_slice(1, 100), whole = req_slice(1, 0);
    crater_placement_t p;
    crater_error_t err;

    ck_assert_int_eq(place_commit(s, &slice, 1, &p), 0);
    ck_assert_int_eq(place_commit(s, &whole, 2, &p), 0);
    ck_assert(p.whole);
    ck_assert_uint_eq(p.gpu[0], 1); /* GPU 0 holds the slice */
    ck_assert_uint_eq(p.gpu_mib[0], 81920);
    ck_assert_int_eq(crater_sched_place(s, &whole, &p, &err), -1);
    ck_assert_str_eq(err.text,
                     "0/1 nodes fit: 1 not enough free GPUs "
                     "(need 1, best 0 on gpu-a100-0)");
    /* nothing may join a GPU held whole */
    ck_assert_int_eq(crater_sched_release(s, 1, &err), 0);
    ck_assert_int_eq(place_commit(s, &slice, 3, &p), 0);
    ck_assert_uint_eq(p.gpu[0], 0);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(overcommit_bounded_by_measured_watermark)
{
    crater_sched_t *s;
    crater_request_t r = req_slice(1, 40000), whole = req_slice(1, 0);
    crater_node_util_t u = {0};
    crater_placement_t p;
    crater_error_t err;

    cfg.scheduler.gpu_context_overhead = 0;
    cfg.scheduler.overcommit_ratio = 1.5;
    cfg.scheduler.safety_watermark = 0.9;
    s = load(EX("a2-a100.yaml"));
    ck_assert_int_eq(place_commit(s, &whole, 100, &p), 0);
    ck_assert_uint_eq(p.gpu[0], 0); /* slices below all land on GPU 1 */
    ck_assert_int_eq(place_commit(s, &r, 1, &p), 0);
    ck_assert_int_eq(place_commit(s, &r, 2, &p), 0); /* 80000 MiB */
    /* 120000 MiB > 81920 physical but <= 1.5x: admitted while measured
     * use + slice <= 0.9 * 81920 = 73728 MiB */
    u.gpu_used_mib[1] = 33729;
    crater_sched_set_util(s, 0, &u);
    ck_assert_int_eq(place_commit(s, &r, 3, &p), -1);
    u.gpu_used_mib[1] = 33728;
    crater_sched_set_util(s, 0, &u);
    ck_assert_int_eq(place_commit(s, &r, 3, &p), 0);
    ck_assert_uint_eq(p.gpu[0], 1);
    /* past 1.5x never, whatever the measurement says */
    u.gpu_used_mib[1] = 0;
    crater_sched_set_util(s, 0, &u);
    ck_assert_int_eq(crater_sched_place(s, &r, &p, &err), -1);
    ck_assert_str_eq(err.text,
                     "0/1 nodes fit: 1 insufficient GPU memory "
                     "(need 40000 MiB, best 2880 MiB on "
                     "gpu-a100-0)");
    crater_sched_destroy(s);
}
END_TEST

/* Issue 13: with overcommitRatio 2 a second slice went onto the half-used
 * GPU 0 (best fit: least room left) past its physical memory while GPU 1
 * was free. Overcommit is the last resort: GPU 1 first; only once no GPU
 * can take a slice within physical memory does one overcommit. */
START_TEST(overcommit_only_when_nothing_else_fits)
{
    crater_sched_t *s;
    crater_request_t r = req_slice(1, 50000);
    crater_placement_t p;

    cfg.scheduler.gpu_context_overhead = 0;
    cfg.scheduler.overcommit_ratio = 2.0;
    s = load(EX("a2-a100.yaml"));
    ck_assert_int_eq(place_commit(s, &r, 1, &p), 0);
    ck_assert_uint_eq(p.gpu[0], 0);
    ck_assert_int_eq(place_commit(s, &r, 2, &p), 0);
    ck_assert_uint_eq(p.gpu[0], 1); /* was 0: 100000 MiB on 81920 */
    ck_assert_int_eq(place_commit(s, &r, 3, &p), 0); /* now it must */
    ck_assert_uint_eq(p.gpu[0], 0);
    crater_sched_destroy(s);
}
END_TEST

/* The same between nodes: a node the slice would overcommit loses to one
 * where it fits physically, whatever packing prefers; both paths agree. */
START_TEST(overcommit_last_between_nodes)
{
    crater_sched_t *s = NULL;
    crater_cluster_t *cl = NULL;
    crater_request_t r = req_slice(1, 50000);
    crater_placement_t p;
    crater_error_t err;
    char *name;

    cfg.scheduler.gpu_context_overhead = 0;
    cfg.scheduler.overcommit_ratio = 2.0;
    s = crater_sched_create(&cfg, kb, NULL);
    ck_assert_int_eq(crater_hw_load(EX("a2-a100.yaml"), kb, &cl, &err), 0);
    ck_assert_int_ge(crater_sched_add_node(s, &cl->nodes[0], &err), 0);
    name = cl->nodes[0].name;
    cl->nodes[0].name = "gpu-a100-1";
    ck_assert_int_ge(crater_sched_add_node(s, &cl->nodes[0], &err), 0);
    cl->nodes[0].name = name;
    crater_cluster_destroy(cl);
    crater_sched_set_cordoned(s, 1, true);
    ck_assert_int_eq(place_commit(s, &r, 1, &p), 0);
    ck_assert_int_eq(place_commit(s, &r, 2, &p), 0);
    ck_assert_uint_eq(p.node, 0); /* both GPUs of node 0 half full */
    crater_sched_set_cordoned(s, 1, false);
    ck_assert_int_eq(place_commit(s, &r, 3, &p), 0);
    ck_assert_uint_eq(p.node, 1);
    ck_assert_int_eq(place_commit(s, &r, 4, &p), 0);
    ck_assert_uint_eq(p.node, 1);
    ck_assert_int_eq(place_commit(s, &r, 5, &p), 0); /* nothing else */
    ck_assert(p.score < -1e5);
    crater_sched_destroy(s);
}
END_TEST

/* The safety watermark acting: the newest task on an overcommitted GPU
 * whose measured use is past safetyWatermark; nothing when the GPU is
 * within physical memory, whatever it measures, or below the watermark. */
START_TEST(watermark_names_newest_overcommitted_task)
{
    crater_sched_t *s;
    crater_request_t r = req_slice(1, 30000), whole = req_slice(1, 0);
    crater_node_util_t u = {0};
    crater_placement_t p;
    uint64_t v[4];

    cfg.scheduler.gpu_context_overhead = 0;
    cfg.scheduler.overcommit_ratio = 2.0;
    cfg.scheduler.safety_watermark = 0.9;
    s = load(EX("a2-a100.yaml"));
    ck_assert_int_eq(place_commit(s, &whole, 100, &p), 0);
    ck_assert_int_eq(place_commit(s, &r, 1, &p), 0);
    ck_assert_int_eq(place_commit(s, &r, 2, &p), 0); /* 60000: physical */
    u.gpu_used_mib[1] = 81000;
    crater_sched_set_util(s, 0, &u);
    ck_assert_uint_eq(crater_sched_watermark_victims(s, 0, v, 4), 0);
    u.gpu_used_mib[1] = 40000;
    crater_sched_set_util(s, 0, &u);
    ck_assert_int_eq(place_commit(s, &r, 3, &p), 0); /* 90000: over */
    ck_assert_uint_eq(p.gpu[0], 1);
    ck_assert_uint_eq(crater_sched_watermark_victims(s, 0, v, 4), 0);
    u.gpu_used_mib[1] = 73729; /* > 0.9 x 81920 */
    crater_sched_set_util(s, 0, &u);
    ck_assert_uint_eq(crater_sched_watermark_victims(s, 0, v, 4), 1);
    ck_assert_uint_eq(v[0], 3);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(cpu_threshold_blocks_gpu_job)
{
    crater_sched_t *s = load(EX("a2-a100.yaml"));
    crater_request_t r = req_slice(1, 0);
    crater_node_util_t u = {.cpu = 0.85};
    crater_placement_t p;
    crater_error_t err;

    crater_sched_set_util(s, 0, &u);
    ck_assert_int_eq(crater_sched_place(s, &r, &p, &err), -1);
    ck_assert_str_eq(err.text,
                     "0/1 nodes fit: 1 cpuThreshold exceeded "
                     "(limit 80%, best 85% on gpu-a100-0)");
    u.cpu = 0.8; /* at the threshold still takes work */
    crater_sched_set_util(s, 0, &u);
    ck_assert_int_eq(crater_sched_place(s, &r, &p, &err), 0);
    crater_sched_destroy(s);
}
END_TEST

/* h100x8: GPUs 0-3 on NUMA 0 (switches {0,1} {2,3}), 4-7 on NUMA 1. */
START_TEST(topology_keeps_jobs_on_one_switch)
{
    crater_sched_t *s = load(EX("h100x8.yaml"));
    crater_request_t two = req_slice(2, 0), four = req_slice(4, 0);
    crater_placement_t p;

    ck_assert_int_eq(place_commit(s, &two, 1, &p), 0);
    ck_assert_uint_eq(p.gpu[0], 0);
    ck_assert_uint_eq(p.gpu[1], 1);
    ck_assert_int_eq(p.numa, 0);
    ck_assert_uint_eq(p.numa_cpu[0], 1000);
    /* four whole GPUs: no switch has 4 free; NUMA 1 has exactly 4 */
    ck_assert_int_eq(place_commit(s, &four, 2, &p), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(p.gpu[i], 4 + i);
    ck_assert_int_eq(p.numa, 1);
    ck_assert_int_eq(place_commit(s, &two, 3, &p), 0);
    ck_assert_uint_eq(p.gpu[0], 2);
    ck_assert_uint_eq(p.gpu[1], 3);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(numa_strict_needs_cpu_next_to_gpus)
{
    crater_sched_t *s = load(EX("h100x8.yaml"));
    crater_request_t hog = {.cpu_milli = 112000,
                            .mem_bytes = 1ull << 30,
                            .numa = CRATER_NUMA_STRICT};
    crater_request_t r = req_slice(4, 0);
    crater_placement_t p;

    ck_assert_int_eq(place_commit(s, &hog, 1, &p), 0); /* fills one NUMA */
    ck_assert_int_ne(p.numa, -1);
    r.numa = CRATER_NUMA_STRICT;
    r.cpu_milli = 16000;
    ck_assert_int_eq(place_commit(s, &r, 2, &p), 0);
    ck_assert_int_eq(p.numa, hog.numa == 0 ? 1 : 1 - 0);
    for (uint32_t i = 0; i < p.ngpus; i++)
        ck_assert_uint_eq(p.gpu[i] / 4, (uint32_t)p.numa);
    ck_assert_uint_eq(p.numa_cpu[p.numa], 16000);
    crater_sched_destroy(s);
}
END_TEST

/* Random commits and releases return the state exactly; and the fast
 * path agrees with brute force at every step. */
START_TEST(random_commit_release_inverse_and_differential)
{
    crater_sched_t *s = load(EX("cluster.yaml"));
    crater_placement_t before, after;
    crater_error_t err;
    uint64_t live[256];
    int nlive = 0;
    unsigned seed = 7;
    crater_request_t probe = req_slice(1, 10000);

    ck_assert_int_eq(crater_sched_place(s, &probe, &before, &err), 0);
    for (int step = 0; step < 2000; step++) {
        int op = rand_r(&seed) % 3;
        if (op < 2 && nlive < 256) {
            crater_request_t r =
                req_slice((uint32_t)(rand_r(&seed) % 3),
                          (uint32_t)(rand_r(&seed) % 3) * 12000);
            r.cpu_milli = (uint64_t)(rand_r(&seed) % 16) * 1000;
            r.numa = (crater_numa_policy_t)(rand_r(&seed) % 3);
            if (place_commit(s, &r, (uint64_t)step + 1, NULL) == 0)
                live[nlive++] = (uint64_t)step + 1;
        } else if (nlive) {
            int k = rand_r(&seed) % nlive;
            ck_assert_int_eq(crater_sched_release(s, live[k], &err), 0);
            live[k] = live[--nlive];
        }
    }
    while (nlive)
        ck_assert_int_eq(crater_sched_release(s, live[--nlive], &err), 0);
    ck_assert_int_eq(crater_sched_place(s, &probe, &after, &err), 0);
    ck_assert_int_eq(memcmp(&before, &after, sizeof(before)), 0);
    ck_assert_int_eq(crater_sched_release(s, 1, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(capability_constraints_explained)
{
    crater_sched_t *s = load(EX("cluster.yaml"));
    crater_request_t r = req_slice(1, 0);
    crater_placement_t p;
    crater_error_t err;

    r.min_cc = 90; /* only the H100 node */
    ck_assert_int_eq(crater_sched_place(s, &r, &p, &err), 0);
    ck_assert_str_eq(crater_sched_node(s, p.node)->name, "h100");
    r.gpus = 2;
    r.min_cc = 100; /* no model has it */
    ck_assert_int_eq(crater_sched_place(s, &r, &p, &err), -1);
    {
        const char *want = "0/7 nodes fit: 3 no GPU meets the "
                           "model/capability constraints (need 2, best 0 on "
                           "a100-0), 2 fewer GPUs than the job asks for (need "
                           "2, best 0 on cpu-0)";
        ck_assert_int_eq(strncmp(err.text, want, strlen(want)), 0);
    }
    r.gpus = 9;
    ck_assert_int_eq(crater_sched_place(s, &r, &p, &err), -1);
    ck_assert_str_eq(err.text,
                     "0/7 nodes fit: 5 fewer GPUs than the job asks for (need "
                     "9, "
                     "best 8 on a100-0), 2 untolerated taint");
    crater_sched_destroy(s);
}
END_TEST

/* A random node: 0-8 GPUs of one of three models with random memory,
 * NUMA and switch layout, NVLink on some, 1-2 NUMA nodes, 0-2 disks. */
static void random_node(crater_node_t *n, int id, unsigned *seed)
{
    static char *models[] = {"a100-sxm4-80gb", "t4", "h100-sxm5-80gb"};
    static char names[64][16];
    int nnuma = 1 + rand_r(seed) % 2, ngpus = rand_r(seed) % 9;
    int model = rand_r(seed) % 3, nv = rand_r(seed) % 2;

    memset(n, 0, sizeof(*n));
    snprintf(names[id], sizeof(names[id]), "r%d", id);
    n->name = names[id];
    n->ncpus = n->nmems = (size_t)nnuma;
    n->cpus = calloc((size_t)nnuma, sizeof(*n->cpus));
    n->mems = calloc((size_t)nnuma, sizeof(*n->mems));
    for (int k = 0; k < nnuma; k++) {
        n->cpus[k].cores = (uint32_t)(8 + rand_r(seed) % 4 * 8);
        n->cpus[k].numa_node = k;
        n->mems[k].numa_node = k;
        n->mems[k].capacity = (uint64_t)(16 + rand_r(seed) % 4 * 16) << 30;
    }
    n->ngpus = (size_t)ngpus;
    n->gpus = calloc(9, sizeof(*n->gpus));
    for (int i = 0; i < ngpus; i++) {
        crater_gpu_t *g = &n->gpus[i];
        g->model = models[model];
        g->vendor = "nvidia";
        g->memory_bytes = (uint64_t)(16 + model * 32) << 30;
        g->compute_cap = model == 1 ? 75 : 80 + 10 * (model == 2);
        g->sm_count = model == 1 ? 40 : 108;
        g->numa_node = i * nnuma / (ngpus ? ngpus : 1);
        g->upstream = rand_r(seed) % 2 ? "sw0" : "sw1";
        g->nvlink_peers = nv ? ((1ull << ngpus) - 1) & ~(1ull << i) : 0;
    }
    n->nstorage = (size_t)(rand_r(seed) % 3);
    n->storage = calloc(3, sizeof(*n->storage));
    for (size_t i = 0; i < n->nstorage; i++) {
        n->storage[i].iops = (uint64_t)(1 + rand_r(seed) % 4) * 100000;
        n->storage[i].bandwidth = 2000000000ull;
        n->storage[i].iface = CRATER_IFACE_NVME;
        n->storage[i].latency_us = 80;
    }
}

static void random_node_free(crater_node_t *n)
{
    free(n->cpus);
    free(n->mems);
    free(n->gpus);
    free(n->storage);
}

static crater_request_t random_request(unsigned *seed)
{
    crater_request_t r =
        req_slice((uint32_t)(rand_r(seed) % 4),
                  rand_r(seed) % 2 ? 0
                                   : (uint32_t)(1 + rand_r(seed) % 40) * 1024);
    r.cpu_milli = (uint64_t)(rand_r(seed) % 12) * 1000;
    r.mem_bytes = (uint64_t)(rand_r(seed) % 24) << 30;
    r.numa = (crater_numa_policy_t)(rand_r(seed) % 3);
    r.nvlink =
        rand_r(seed) % 4 == 0 ? CRATER_NVLINK_REQUIRED : CRATER_NVLINK_ANY;
    r.min_cc = rand_r(seed) % 5 == 0 ? 80 : 0;
    r.disk_iops = rand_r(seed) % 4 == 0 ? 50000 : 0;
    return r;
}

/* The fast path and the brute-force scan make the same decision (and the
 * same explanation) at every step on random clusters, while tasks come
 * and go and measurements change. */
START_TEST(differential_random_clusters)
{
    for (unsigned cl = 0; cl < 20; cl++) {
        unsigned seed = 1000 + cl;
        crater_sched_t *s;
        /* every other cluster overcommits, with measured GPU memory */
        cfg.scheduler.overcommit_ratio = cl % 2 ? 2.0 : 1.0;
        s = crater_sched_create(&cfg, kb, NULL);
        crater_error_t err;
        uint64_t live[512];
        int nlive = 0, nodes = 2 + rand_r(&seed) % 40;

        for (int i = 0; i < nodes; i++) {
            crater_node_t n;
            random_node(&n, i, &seed);
            ck_assert_int_ge(crater_sched_add_node(s, &n, &err), 0);
            random_node_free(&n);
        }
        for (uint64_t t = 1; t <= 400; t++) {
            crater_request_t r = random_request(&seed);
            if (place_commit(s, &r, t, NULL) == 0 && nlive < 512)
                live[nlive++] = t;
            if (nlive && rand_r(&seed) % 3 == 0) {
                int k = rand_r(&seed) % nlive;
                ck_assert_int_eq(crater_sched_release(s, live[k], &err), 0);
                live[k] = live[--nlive];
            }
            if (rand_r(&seed) % 25 == 0) {
                crater_node_util_t u = {.cpu = (rand_r(&seed) % 10) / 10.0};
                for (int g = 0; g < CRATER_MAX_GPUS_PER_NODE; g++)
                    u.gpu_used_mib[g] = (uint32_t)(rand_r(&seed) % 90000);
                crater_sched_set_util(s, (uint32_t)(rand_r(&seed) % nodes), &u);
            }
        }
        crater_sched_destroy(s);
    }
}
END_TEST

int main(void)
{
    Suite *su = suite_create("sched");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, every_configured_policy_is_implemented);
    tcase_add_test(tc, slice_accounting_boundaries);
    tcase_add_test(tc, max_tasks_per_gpu);
    tcase_add_test(tc, whole_gpu_needs_a_free_gpu);
    tcase_add_test(tc, overcommit_bounded_by_measured_watermark);
    tcase_add_test(tc, overcommit_only_when_nothing_else_fits);
    tcase_add_test(tc, overcommit_last_between_nodes);
    tcase_add_test(tc, watermark_names_newest_overcommitted_task);
    tcase_add_test(tc, cpu_threshold_blocks_gpu_job);
    tcase_add_test(tc, topology_keeps_jobs_on_one_switch);
    tcase_add_test(tc, numa_strict_needs_cpu_next_to_gpus);
    tcase_add_test(tc, random_commit_release_inverse_and_differential);
    tcase_add_test(tc, capability_constraints_explained);
    tcase_add_test(tc, differential_random_clusters);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
