/* test_plugins.c - one group of tests per filter and score plugin of the
 * scheduling core (src/sched/plugins): health, selector, data locality,
 * thresholds, GPU capability, GPU slices and whole GPUs, CPU/memory and
 * NUMA, disk, the CPU:GPU ratio, and the joint, packing, topology,
 * locality and low-utilisation scores.
 *
 * Every placement is made twice, by the fast class-based path and by the
 * brute-force scan, and the two must agree byte for byte (failures: the
 * same explanation). Clusters are small hardware files under
 * tests/data/sched/ (plus examples/hardware/), jobs are YAML job specs
 * decoded the way the control plane decodes them. Unless a test is about
 * a score, all plugin weights are 0, so every feasible node scores the
 * same and the lowest node id wins: the chosen node then shows exactly
 * which nodes the filters let through.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "crater/doc.h"
#include "crater/hwfile.h"
#include "crater/jobspec.h"
#include "crater/sched.h"

#define EX(f) CRATER_SOURCE_DIR "/examples/hardware/" f
#define HW(f) CRATER_SOURCE_DIR "/tests/data/sched/" f
#define GIB (1ull << 30)
#define MAX_SPECS 32

static crater_kb_t *kb;
static crater_config_t cfg;
static crater_jobspec_t *specs[MAX_SPECS];
static int nspecs;

static void setup(void)
{
    kb = crater_kb_create();
    ck_assert_int_eq(crater_config_defaults(&cfg), 0);
    nspecs = 0;
}

static void teardown(void)
{
    while (nspecs)
        crater_jobspec_destroy(specs[--nspecs]);
    crater_config_clear(&cfg);
    crater_kb_destroy(kb);
}

static void weigh(crater_sched_t *s,
                  double joint,
                  double packing,
                  double topology,
                  double locality,
                  double low_util)
{
    crater_sched_weights_t w = {joint, packing, topology, locality, low_util};

    crater_sched_set_weights(s, &w);
}

/* A sched over the nodes of a hardware file, every plugin weight 0. */
static crater_sched_t *load(const char *path)
{
    crater_sched_t *s = crater_sched_create(&cfg, kb, NULL);
    crater_cluster_t *cl = NULL;
    crater_error_t err;

    ck_assert_msg(crater_hw_load(path, kb, &cl, &err) == 0, "%s", err.text);
    for (size_t i = 0; i < cl->nnodes; i++)
        ck_assert_msg(crater_sched_add_node(s, &cl->nodes[i], &err) >= 0,
                      "%s",
                      err.text);
    crater_cluster_destroy(cl);
    weigh(s, 0, 0, 0, 0, 0);
    return s;
}

static uint32_t id_of(const crater_sched_t *s, const char *name)
{
    uint32_t id = crater_sched_find_node(s, name);

    ck_assert_msg(id != CRATER_SCHED_NO_NODE, "no node %s", name);
    return id;
}

/* Decode a YAML job spec; freed in teardown. */
static const crater_jobspec_t *spec(const char *yaml)
{
    crater_doc_t *doc;
    crater_dec_t d;
    crater_error_t err;
    crater_jobspec_t *js = NULL;

    ck_assert_msg(crater_doc_parse(yaml, strlen(yaml), "job.yaml", &doc, &err)
                      == 0,
                  "%s",
                  err.text);
    crater_dec_init(&d, doc, 0, &err);
    ck_assert_msg(crater_jobspec_decode(&d, crater_doc_root(doc, 0), &js) == 0,
                  "%s",
                  err.text);
    crater_doc_destroy(doc);
    ck_assert_int_lt(nspecs, MAX_SPECS);
    specs[nspecs++] = js;
    return js;
}

static crater_request_t job(const crater_sched_t *s, const char *yaml)
{
    crater_request_t r;
    crater_error_t err;

    ck_assert_msg(crater_request_from_spec(s, spec(yaml), &r, &err) == 0,
                  "%s",
                  err.text);
    return r;
}

/* Place with both paths; they must make the same decision. */
static int place(crater_sched_t *s,
                 const crater_request_t *r,
                 crater_placement_t *p,
                 crater_error_t *err)
{
    crater_placement_t b;
    crater_error_t e2;
    int ra, rb;

    memset(p, 0, sizeof(*p));
    memset(&b, 0, sizeof(b));
    ra = crater_sched_place(s, r, p, err);
    rb = crater_sched_place_bruteforce(s, r, &b, &e2);
    ck_assert_int_eq(ra, rb);
    if (ra < 0) {
        ck_assert_int_eq(err->errnum, CRATER_EUNSCHED);
        ck_assert_int_eq(e2.errnum, CRATER_EUNSCHED);
        ck_assert_str_eq(err->text, e2.text);
    } else {
        ck_assert_int_eq(memcmp(p, &b, sizeof(b)), 0);
    }
    return ra;
}

/* The request must land on node; the placement comes back in p. */
static void expect_on(crater_sched_t *s,
                      const crater_request_t *r,
                      const char *node,
                      crater_placement_t *p)
{
    crater_error_t err;

    ck_assert_msg(place(s, r, p, &err) == 0, "unschedulable: %s", err.text);
    ck_assert_str_eq(crater_sched_node(s, p->node)->name, node);
}

static void expect_fail(crater_sched_t *s,
                        const crater_request_t *r,
                        const char *text)
{
    crater_placement_t p;
    crater_error_t err;

    ck_assert_int_eq(place(s, r, &p, &err), -1);
    ck_assert_str_eq(err.text, text);
}

static void commit(crater_sched_t *s,
                   uint64_t task,
                   const crater_request_t *r,
                   const crater_placement_t *p)
{
    crater_error_t err;

    ck_assert_msg(crater_sched_commit(s, task, r, p, &err) == 0,
                  "%s",
                  err.text);
}

static void place_on(crater_sched_t *s,
                     uint64_t task,
                     const crater_request_t *r,
                     const char *node,
                     crater_placement_t *p)
{
    expect_on(s, r, node, p);
    commit(s, task, r, p);
}

static void release(crater_sched_t *s, uint64_t task)
{
    crater_error_t err;

    ck_assert_msg(crater_sched_release(s, task, &err) == 0, "%s", err.text);
}

static void util(crater_sched_t *s, const char *node, crater_node_util_t u)
{
    ck_assert_int_eq(crater_sched_set_util(s, id_of(s, node), &u), 0);
}

static void cordon(crater_sched_t *s, const char *node, bool on)
{
    ck_assert_int_eq(crater_sched_set_cordoned(s, id_of(s, node), on), 0);
}

/* A whole GPU held by hand, to shape a node's free set exactly. */
static void hold_gpu(crater_sched_t *s, uint64_t task, uint32_t node, int gpu)
{
    crater_placement_t h = {.node = node, .ngpus = 1, .whole = true};

    h.numa = -1;
    h.storage = -1;
    h.gpu[0] = (uint8_t)gpu;
    h.gpu_mib[0] = 81920;
    commit(s, task, NULL, &h);
}

/* ---- health ------------------------------------------------------------ */

START_TEST(health_skips_unready_and_cordoned)
{
    crater_sched_t *s = load(HW("cpu3.yaml"));
    crater_request_t r = job(s, "resources: {cpu: 1, memory: 1Gi}\n");
    crater_placement_t p;

    ck_assert_int_eq(crater_sched_set_ready(s, id_of(s, "n-0"), false), 0);
    cordon(s, "n-1", true);
    expect_on(s, &r, "n-2", &p);
    ck_assert_int_eq(p.numa, 0);
    ck_assert_uint_eq(p.numa_cpu[0], 1000);
    ck_assert_uint_eq(p.numa_mem[0], GIB);
    cordon(s, "n-2", true);
    expect_fail(s, &r, "0/3 nodes fit: 2 node cordoned, 1 node not ready");
    ck_assert_int_eq(crater_sched_set_ready(s, id_of(s, "n-0"), true), 0);
    expect_on(s, &r, "n-0", &p);
    cordon(s, "n-1", false);
    cordon(s, "n-2", false);
    ck_assert_int_eq(crater_sched_set_ready(s, id_of(s, "n-0"), false), 0);
    expect_on(s, &r, "n-1", &p);
    crater_sched_destroy(s);
}
END_TEST

/* ---- selector ---------------------------------------------------------- */

START_TEST(selector_node_selector)
{
    crater_sched_t *s = load(HW("labels.yaml"));
    crater_request_t any = job(s, "resources: {cpu: 1}\n");
    crater_request_t b =
        job(s, "resources: {cpu: 1}\nnodeSelector: {zone: b}\n");
    crater_request_t x =
        job(s, "resources: {cpu: 1}\nnodeSelector: {zone: x}\n");
    crater_request_t bx =
        job(s, "resources: {cpu: 1}\nnodeSelector: {zone: b, pool: x}\n");
    crater_placement_t p;

    expect_on(s, &any, "plain", &p);
    expect_on(s, &b, "zone-b", &p);
    expect_fail(s, &x, "0/4 nodes fit: 4 nodeSelector does not match");
    expect_fail(s, &bx, "0/4 nodes fit: 4 nodeSelector does not match");
    crater_sched_destroy(s);
}
END_TEST

/* ---- runtime ----------------------------------------------------------- */

/* An image goes only where a container runtime is; a bare job anywhere. */
START_TEST(runtime_image_needs_runtime)
{
    crater_sched_t *s = load(HW("runtimes.yaml"));
    crater_request_t bare = job(s, "resources: {cpu: 1}\n");
    crater_request_t img =
        job(s, "resources: {cpu: 1}\nimage: localhost/x:1\n");
    crater_request_t big =
        job(s, "resources: {cpu: 9}\nimage: localhost/x:1\n");
    crater_placement_t p;

    expect_on(s, &bare, "bare", &p);
    expect_on(s, &img, "podman", &p);
    expect_fail(s,
                &big,
                "0/2 nodes fit: 1 insufficient CPU (need 9 CPU, best 8 CPU "
                "on podman), 1 no container runtime for image");
    crater_sched_destroy(s);
}
END_TEST

START_TEST(selector_taints_and_tolerations)
{
    crater_sched_t *s = load(HW("labels.yaml"));
    const char *fail = "0/4 nodes fit: 3 nodeSelector does not match, "
                       "1 untolerated taint";
    crater_request_t none =
        job(s, "resources: {cpu: 1}\nnodeSelector: {zone: c}\n");
    crater_request_t exact = job(s,
                                 "resources: {cpu: 1}\n"
                                 "nodeSelector: {zone: c}\n"
                                 "tolerations: [{key: dedicated, value: "
                                 "infer, effect: NoSchedule}]\n");
    crater_request_t other = job(s,
                                 "resources: {cpu: 1}\n"
                                 "nodeSelector: {zone: c}\n"
                                 "tolerations: [{key: dedicated, value: "
                                 "train}]\n");
    crater_request_t exists = job(s,
                                  "resources: {cpu: 1}\n"
                                  "nodeSelector: {zone: c}\n"
                                  "tolerations: [{key: dedicated}]\n");
    crater_request_t noexec = job(s,
                                  "resources: {cpu: 1}\n"
                                  "nodeSelector: {zone: c}\n"
                                  "tolerations: [{key: dedicated, "
                                  "operator: Exists, effect: NoExecute}]\n");
    crater_request_t soft =
        job(s, "resources: {cpu: 1}\nnodeSelector: {zone: d}\n");
    crater_request_t any = job(s, "resources: {cpu: 1}\n");
    crater_placement_t p;

    expect_fail(s, &none, fail);
    expect_on(s, &exact, "tainted", &p);
    expect_fail(s, &other, fail);         /* value must match */
    expect_on(s, &exists, "tainted", &p); /* no value: any value */
    expect_fail(s, &noexec, fail);        /* other effect only */
    expect_on(s, &soft, "soft", &p);      /* PreferNoSchedule */
    cordon(s, "plain", true);
    cordon(s, "zone-b", true);
    expect_on(s, &any, "soft", &p); /* tainted skipped, soft taken */
    cordon(s, "soft", true);
    expect_fail(s, &any, "0/4 nodes fit: 3 node cordoned, 1 untolerated taint");
    crater_sched_destroy(s);
}
END_TEST

/* ---- data locality ----------------------------------------------------- */

START_TEST(locality_required_filters)
{
    crater_sched_t *s = load(HW("datasets.yaml"));
    crater_request_t r = job(s,
                             "resources: {cpu: 1}\n"
                             "dataLocality: {dataset: imagenet, "
                             "mode: required}\n");
    crater_request_t coco = job(s,
                                "resources: {cpu: 1}\n"
                                "dataLocality: {dataset: coco, "
                                "mode: required}\n");
    crater_placement_t p;

    expect_on(s, &r, "d-1", &p);
    expect_fail(s, &coco, "0/2 nodes fit: 2 required dataset not cached");
    cordon(s, "d-1", true);
    expect_fail(s,
                &r,
                "0/2 nodes fit: 1 node cordoned, 1 required dataset not "
                "cached");
    crater_sched_destroy(s);
}
END_TEST

START_TEST(locality_preferred_breaks_tie)
{
    crater_sched_t *s = load(HW("datasets.yaml"));
    crater_request_t r = job(s,
                             "resources: {cpu: 1}\n"
                             "dataLocality: {dataset: imagenet}\n");
    crater_request_t coco = job(s,
                                "resources: {cpu: 1}\n"
                                "dataLocality: {dataset: coco}\n");
    crater_request_t off = job(s,
                               "resources: {cpu: 1}\n"
                               "dataLocality: {dataset: imagenet, "
                               "mode: none}\n");
    crater_placement_t p;

    expect_on(s, &r, "d-0", &p); /* weight 0: a tie, lowest id */
    weigh(s, 0, 0, 0, 1, 0);
    expect_on(s, &r, "d-1", &p);
    ck_assert_double_eq(p.score, 1.0);
    expect_on(s, &coco, "d-0", &p); /* cached nowhere: a tie again */
    ck_assert_double_eq(p.score, 0.0);
    expect_on(s, &off, "d-0", &p); /* mode none: no preference */
    cordon(s, "d-1", true);        /* preferred is not required */
    expect_on(s, &r, "d-0", &p);
    crater_sched_destroy(s);
}
END_TEST

/* ---- thresholds -------------------------------------------------------- */

START_TEST(cpu_threshold_at_and_above)
{
    crater_sched_t *s;
    crater_request_t r;
    crater_placement_t p;

    cfg.scheduler.cpu_threshold = 0.5;
    s = load(HW("cpu3.yaml"));
    r = job(s, "resources: {cpu: 1}\n");
    util(s, "n-0", (crater_node_util_t){.cpu = 0.5});
    expect_on(s, &r, "n-0", &p); /* at the limit */
    util(s, "n-0", (crater_node_util_t){.cpu = 0.51});
    expect_on(s, &r, "n-1", &p); /* just above */
    util(s, "n-1", (crater_node_util_t){.cpu = 0.9});
    util(s, "n-2", (crater_node_util_t){.cpu = 0.6});
    expect_fail(s,
                &r,
                "0/3 nodes fit: 3 cpuThreshold exceeded (limit 50%, best "
                "51% on n-0)");
    util(s, "n-2", (crater_node_util_t){.cpu = 0.5, .mem = 0.8});
    expect_on(s, &r, "n-2", &p); /* memory at its default 80% */
    crater_sched_destroy(s);
}
END_TEST

START_TEST(memory_threshold_at_and_above)
{
    crater_sched_t *s;
    crater_request_t r;
    crater_placement_t p;

    cfg.scheduler.memory_threshold = 0.7;
    s = load(HW("cpu3.yaml"));
    r = job(s, "resources: {memory: 1Gi}\n");
    util(s, "n-0", (crater_node_util_t){.mem = 0.7});
    expect_on(s, &r, "n-0", &p);
    util(s, "n-0", (crater_node_util_t){.mem = 0.71});
    expect_on(s, &r, "n-1", &p);
    util(s, "n-0", (crater_node_util_t){.cpu = 0.9});
    util(s, "n-1", (crater_node_util_t){.mem = 0.9});
    util(s, "n-2", (crater_node_util_t){.mem = 0.75});
    expect_fail(s,
                &r,
                "0/3 nodes fit: 2 memoryThreshold exceeded (limit 70%, "
                "best 75% on n-2), 1 cpuThreshold exceeded (limit 80%, "
                "best 90% on n-0)");
    crater_sched_destroy(s);
}
END_TEST

/* ---- capability -------------------------------------------------------- */

START_TEST(capability_compute_capability_and_models)
{
    crater_sched_t *s = load(HW("gpu-mix.yaml"));
    crater_request_t sm80 =
        job(s, "resources: {gpu: {count: 1, minComputeCapability: sm_80}}\n");
    crater_request_t sm75 =
        job(s, "resources: {gpu: {count: 1, minComputeCapability: 7.5}}\n");
    crater_request_t sm90 =
        job(s, "resources: {gpu: {count: 1, minComputeCapability: 90}}\n");
    crater_request_t five = job(s,
                                "resources: {gpu: {count: 5, "
                                "minComputeCapability: sm_80}}\n");
    crater_request_t list = job(s,
                                "resources: {gpu: {model: [h100-sxm5-80gb, "
                                "V100M32]}}\n");
    crater_request_t nvml = job(s,
                                "resources: {gpu: {model: NVIDIA H100 80GB "
                                "HBM3}}\n");
    crater_request_t absent =
        job(s, "resources: {gpu: {model: a100-pcie-80gb}}\n");
    crater_placement_t p;

    expect_on(s, &sm80, "a100", &p); /* sm_80 excludes T4 and V100 */
    ck_assert_uint_eq(p.ngpus, 1);
    ck_assert_uint_eq(p.gpu[0], 0);
    ck_assert(p.whole);
    ck_assert_uint_eq(p.gpu_mib[0], 81920);
    expect_on(s, &sm75, "t4", &p);
    ck_assert_uint_eq(p.gpu_mib[0], 15360);
    expect_on(s, &sm90, "h100", &p);
    ck_assert_uint_eq(p.gpu_mib[0], 81559);
    expect_on(s, &list, "v100", &p);
    ck_assert_uint_eq(p.gpu_mib[0], 32768);
    expect_on(s, &nvml, "h100", &p);
    cordon(s, "a100", true);
    expect_on(s, &sm80, "h100", &p);
    cordon(s, "a100", false);
    expect_fail(s,
                &five,
                "0/4 nodes fit: 4 fewer GPUs than the job asks for (need 5, "
                "best 4 on t4)");
    expect_fail(s,
                &absent,
                "0/4 nodes fit: 4 no GPU meets the model/capability "
                "constraints (need 1, best 0 on t4)");
    crater_sched_destroy(s);
}
END_TEST

START_TEST(capability_vendor_sm_count_hbm)
{
    crater_sched_t *s = load(HW("gpu-mix.yaml"));
    crater_request_t nv = job(s, "resources: {gpu: {vendor: NVIDIA}}\n");
    crater_request_t amd = job(s, "resources: {gpu: {vendor: amd}}\n");
    crater_request_t sm80 = job(s, "resources: {gpu: {minSmCount: 80}}\n");
    crater_request_t sm81 = job(s, "resources: {gpu: {minSmCount: 81}}\n");
    crater_request_t sm133 = job(s, "resources: {gpu: {minSmCount: 133}}\n");
    crater_request_t hbm900 =
        job(s, "resources: {gpu: {minHbmBandwidth: 900GB/s}}\n");
    crater_request_t hbm2t =
        job(s, "resources: {gpu: {minHbmBandwidth: 2TB/s}}\n");
    crater_request_t hbm21 =
        job(s, "resources: {gpu: {minHbmBandwidth: 2.1TB/s}}\n");
    crater_placement_t p;

    expect_on(s, &nv, "t4", &p); /* vendor compared case-insensitively */
    expect_fail(s,
                &amd,
                "0/4 nodes fit: 4 no GPU meets the model/capability "
                "constraints (need 1, best 0 on t4)");
    expect_on(s, &sm80, "v100", &p); /* exactly 80 SMs */
    expect_on(s, &sm81, "a100", &p);
    expect_fail(s,
                &sm133,
                "0/4 nodes fit: 4 no GPU meets the model/capability "
                "constraints (need 1, best 0 on t4)");
    expect_on(s, &hbm900, "v100", &p);
    expect_on(s, &hbm2t, "a100", &p); /* 2039 GB/s */
    expect_on(s, &hbm21, "h100", &p);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(capability_pcie_saturation)
{
    crater_sched_t *s = load(HW("gpu-mix.yaml"));
    crater_request_t r =
        job(s, "resources: {gpu: {count: 1, minComputeCapability: sm_80}}\n");
    crater_placement_t p;

    util(s, "a100", (crater_node_util_t){.pcie = {0.9}});
    expect_on(s, &r, "a100", &p); /* at pcieThreshold (0.9) */
    util(s, "a100", (crater_node_util_t){.pcie = {0.95}});
    expect_on(s, &r, "h100", &p);
    util(s, "h100", (crater_node_util_t){.pcie = {1.0}});
    expect_fail(s,
                &r,
                "0/4 nodes fit: 2 PCIe root complex saturated (need 1, best "
                "0 on a100), 2 no GPU meets the model/capability constraints "
                "(need 1, best 0 on t4)");
    crater_sched_destroy(s);

    /* h100x8: GPUs 0-1 share PCIe switch 0; saturating it leaves 6 */
    s = load(EX("h100x8.yaml"));
    crater_request_t two = job(s, "resources: {gpu: 2}\n");
    crater_request_t seven = job(s, "resources: {gpu: 7}\n");
    util(s, "gpu-h100-0", (crater_node_util_t){.pcie = {1.0}});
    expect_on(s, &two, "gpu-h100-0", &p);
    ck_assert_uint_eq(p.gpu[0], 2);
    ck_assert_uint_eq(p.gpu[1], 3);
    expect_fail(s,
                &seven,
                "0/1 nodes fit: 1 PCIe root complex saturated (need 7, best "
                "6 on gpu-h100-0)");
    crater_sched_destroy(s);
}
END_TEST

/* ---- gpu --------------------------------------------------------------- */

/* a2-a100: one node, 2 x A100 80GB PCIe; context overhead 300 MiB. */
START_TEST(gpu_eight_tasks_per_gpu)
{
    crater_sched_t *s;
    crater_request_t r;
    crater_placement_t p;

    cfg.scheduler.max_tasks_per_gpu = 8;
    s = load(EX("a2-a100.yaml"));
    r = job(s, "resources: {gpu: {count: 1, memory: 1Gi}}\n");
    for (uint64_t t = 1; t <= 8; t++) {
        place_on(s, t, &r, "gpu-a100-0", &p);
        ck_assert_uint_eq(p.gpu[0], 0); /* best fit keeps filling GPU 0 */
        ck_assert_uint_eq(p.gpu_mib[0], 1024 + 300);
        ck_assert(!p.whole);
    }
    place_on(s, 9, &r, "gpu-a100-0", &p);
    ck_assert_uint_eq(p.gpu[0], 1); /* the 9th task does not join GPU 0 */
    release(s, 9);
    release(s, 4);
    place_on(s, 10, &r, "gpu-a100-0", &p);
    ck_assert_uint_eq(p.gpu[0], 0); /* 7 tasks: room for the 8th again */
    crater_sched_destroy(s);
}
END_TEST

START_TEST(gpu_zero_gpus_on_gpu_node)
{
    crater_sched_t *s = load(EX("a2-a100.yaml"));
    crater_request_t cpu = job(s, "resources: {cpu: 4, memory: 8Gi}\n");
    crater_request_t both = job(s, "resources: {gpu: 2}\n");
    crater_placement_t p;

    place_on(s, 1, &cpu, "gpu-a100-0", &p);
    ck_assert_uint_eq(p.ngpus, 0);
    ck_assert(!p.whole);
    ck_assert_int_eq(p.numa, 0);
    ck_assert_uint_eq(p.cpu_milli, 4000);
    ck_assert_uint_eq(p.numa_cpu[0], 4000);
    ck_assert_uint_eq(p.numa_mem[0], 8 * GIB);
    ck_assert_int_eq(p.storage, -1);
    place_on(s, 2, &both, "gpu-a100-0", &p); /* GPUs untouched */
    ck_assert_uint_eq(p.ngpus, 2);
    ck_assert_uint_eq(p.gpu[0], 0);
    ck_assert_uint_eq(p.gpu[1], 1);
    place_on(s, 3, &cpu, "gpu-a100-0", &p); /* still fine with GPUs held */
    ck_assert_uint_eq(p.ngpus, 0);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(gpu_whole_needs_fully_free)
{
    crater_sched_t *s = load(EX("a2-a100.yaml"));
    crater_request_t slice =
        job(s, "resources: {gpu: {count: 1, memory: 1Gi}}\n");
    crater_request_t one = job(s, "resources: {gpu: 1}\n");
    crater_request_t two = job(s, "resources: {gpu: 2}\n");
    crater_placement_t p;

    place_on(s, 1, &slice, "gpu-a100-0", &p);
    ck_assert_uint_eq(p.gpu[0], 0);
    expect_fail(s,
                &two,
                "0/1 nodes fit: 1 not enough free GPUs (need 2, best 1 on "
                "gpu-a100-0)");
    place_on(s, 2, &one, "gpu-a100-0", &p);
    ck_assert_uint_eq(p.gpu[0], 1);
    ck_assert_uint_eq(p.gpu_mib[0], 81920);
    ck_assert(p.whole);
    place_on(s, 3, &slice, "gpu-a100-0", &p); /* not onto the whole GPU */
    ck_assert_uint_eq(p.gpu[0], 0);
    release(s, 1);
    release(s, 3);
    place_on(s, 4, &one, "gpu-a100-0", &p);
    ck_assert_uint_eq(p.gpu[0], 0);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(gpu_nvlink_required_needs_a_mesh)
{
    crater_sched_t *s = load(HW("gpu-mix.yaml"));
    crater_request_t nv =
        job(s, "resources: {gpu: {count: 2, nvlink: required}}\n");
    crater_request_t pref =
        job(s, "resources: {gpu: {count: 2, nvlink: preferred}}\n");
    crater_placement_t p;

    expect_on(s, &nv, "a100", &p); /* T4 and V100 have no NVLink peers */
    ck_assert_uint_eq(p.gpu[0], 0);
    ck_assert_uint_eq(p.gpu[1], 1);
    expect_on(s, &pref, "t4", &p);
    cordon(s, "a100", true);
    cordon(s, "h100", true);
    expect_fail(s,
                &nv,
                "0/4 nodes fit: 2 no NVLink-connected set of free GPUs "
                "(need 2, best 0 on t4), 2 node cordoned");
    crater_sched_destroy(s);
}
END_TEST

/* nvlink-partial: 0, 2, 3 form an NVLink triangle, GPU 1 has none. */
START_TEST(gpu_nvlink_partial_graph_whole)
{
    crater_sched_t *s = load(HW("nvlink-partial.yaml"));
    crater_request_t two =
        job(s, "resources: {gpu: {count: 2, nvlink: true}}\n");
    crater_request_t three =
        job(s, "resources: {gpu: {count: 3, nvlink: required}}\n");
    crater_request_t four =
        job(s, "resources: {gpu: {count: 4, nvlink: required}}\n");
    crater_request_t plain = job(s, "resources: {gpu: 2}\n");
    crater_placement_t p;

    expect_on(s, &plain, "partial", &p); /* without NVLink: lowest two */
    ck_assert_uint_eq(p.gpu[0], 0);
    ck_assert_uint_eq(p.gpu[1], 1);
    expect_on(s, &three, "partial", &p);
    ck_assert_uint_eq(p.ngpus, 3);
    ck_assert_uint_eq(p.gpu[0], 0);
    ck_assert_uint_eq(p.gpu[1], 2);
    ck_assert_uint_eq(p.gpu[2], 3);
    expect_fail(s,
                &four,
                "0/1 nodes fit: 1 no NVLink-connected set of free GPUs "
                "(need 4, best 0 on partial)");
    place_on(s, 1, &two, "partial", &p);
    ck_assert_uint_eq(p.gpu[0], 0);
    ck_assert_uint_eq(p.gpu[1], 2);
    expect_fail(s, /* {1, 3} are free but not linked */
                &two,
                "0/1 nodes fit: 1 no NVLink-connected set of free GPUs "
                "(need 2, best 0 on partial)");
    place_on(s, 2, &plain, "partial", &p);
    ck_assert_uint_eq(p.gpu[0], 1);
    ck_assert_uint_eq(p.gpu[1], 3);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(gpu_nvlink_partial_graph_slices)
{
    crater_sched_t *s = load(HW("nvlink-partial.yaml"));
    crater_request_t two = job(s,
                               "resources: {gpu: {count: 2, memory: 10Gi, "
                               "nvlink: required}}\n");
    crater_request_t four = job(s,
                                "resources: {gpu: {count: 4, memory: 10Gi, "
                                "nvlink: required}}\n");
    crater_placement_t p;

    place_on(s, 1, &two, "partial", &p);
    ck_assert_uint_eq(p.ngpus, 2);
    ck_assert_uint_eq(p.gpu[0], 0);
    ck_assert_uint_eq(p.gpu[1], 2);
    ck_assert_uint_eq(p.gpu_mib[0], 10240 + 300);
    ck_assert_uint_eq(p.gpu_mib[1], 10240 + 300);
    ck_assert(!p.whole);
    place_on(s, 2, &two, "partial", &p); /* same pair again: best fit */
    ck_assert_uint_eq(p.gpu[0], 0);
    ck_assert_uint_eq(p.gpu[1], 2);
    expect_fail(s,
                &four,
                "0/1 nodes fit: 1 no NVLink-connected set of GPUs with room "
                "(need 4, best 0 on partial)");
    crater_sched_destroy(s);
}
END_TEST

START_TEST(gpu_multi_gpu_slices_distinct)
{
    crater_sched_t *s = load(EX("a2-a100.yaml"));
    crater_request_t big =
        job(s, "resources: {gpu: {count: 1, memory: 40Gi}}\n");
    crater_request_t two =
        job(s, "resources: {gpu: {count: 2, memory: 10Gi}}\n");
    crater_request_t huge =
        job(s, "resources: {gpu: {count: 2, memory: 45Gi}}\n");
    crater_placement_t p;

    place_on(s, 1, &big, "gpu-a100-0", &p);
    ck_assert_uint_eq(p.gpu[0], 0);
    ck_assert_uint_eq(p.gpu_mib[0], 40960 + 300);
    place_on(s, 2, &two, "gpu-a100-0", &p);
    ck_assert_uint_eq(p.ngpus, 2);
    ck_assert_uint_eq(p.gpu[0], 0); /* tightest first */
    ck_assert_uint_eq(p.gpu[1], 1); /* never the same GPU twice */
    ck_assert_uint_eq(p.gpu_mib[0], 10540);
    ck_assert_uint_eq(p.gpu_mib[1], 10540);
    /* GPU 1 could take one 46380 MiB charge, GPU 0 (30120 left) not */
    expect_fail(s,
                &huge,
                "0/1 nodes fit: 1 insufficient GPU memory (need 46380 MiB, "
                "best 30120 MiB on gpu-a100-0)");
    crater_sched_destroy(s);
}
END_TEST

/* ---- cpu-memory -------------------------------------------------------- */

START_TEST(cpumem_insufficient_messages)
{
    crater_sched_t *s = load(HW("cpu3.yaml"));
    crater_request_t four = job(s, "resources: {cpu: 4, memory: 8Gi}\n");
    crater_request_t cpu = job(s, "resources: {cpu: 17}\n");
    crater_request_t mem = job(s, "resources: {memory: 65Gi}\n");
    crater_request_t full = job(s, "resources: {cpu: 16, memory: 64Gi}\n");
    crater_placement_t p;

    place_on(s, 1, &four, "n-0", &p);
    expect_fail(s,
                &cpu,
                "0/3 nodes fit: 3 insufficient CPU (need 17 CPU, best 16 "
                "CPU on n-1)");
    expect_fail(s,
                &mem,
                "0/3 nodes fit: 3 insufficient memory (need 65Gi, best 64Gi "
                "on n-1)");
    place_on(s, 2, &full, "n-1", &p); /* exactly full */
    ck_assert_uint_eq(p.numa_cpu[0], 16000);
    expect_fail(s,
                &cpu,
                "0/3 nodes fit: 3 insufficient CPU (need 17 CPU, best 16 "
                "CPU on n-2)");
    crater_sched_destroy(s);
}
END_TEST

/* h100x8: NUMA 0 and 1 with 112 CPUs each; GPUs 0-3 on 0, 4-7 on 1. */
START_TEST(cpumem_numa_preferred_spreads)
{
    crater_sched_t *s = load(EX("h100x8.yaml"));
    crater_request_t hog =
        job(s, "resources: {cpu: 100, memory: 1Gi}\nnuma: none\n");
    crater_request_t r = job(s, "resources: {gpu: 2, cpu: 20, memory: 1Gi}\n");
    crater_placement_t p;

    place_on(s, 1, &hog, "gpu-h100-0", &p);
    ck_assert_int_eq(p.numa, -1);
    ck_assert_uint_eq(p.numa_cpu[0], 100000);
    ck_assert_uint_eq(p.numa_cpu[1], 0);
    place_on(s, 2, &r, "gpu-h100-0", &p);
    ck_assert_uint_eq(p.gpu[0], 0);
    ck_assert_uint_eq(p.gpu[1], 1);
    ck_assert_int_eq(p.numa, -1); /* NUMA 0 has 12 CPUs left: spread */
    ck_assert_uint_eq(p.cpu_milli, 20000);
    ck_assert_uint_eq(p.numa_cpu[0], 12000);
    ck_assert_uint_eq(p.numa_cpu[1], 8000);
    ck_assert_uint_eq(p.numa_mem[0], GIB);
    ck_assert_uint_eq(p.numa_mem[1], 0);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(cpumem_numa_strict)
{
    crater_sched_t *s = load(EX("h100x8.yaml"));
    crater_request_t hog =
        job(s, "resources: {cpu: 100, memory: 1Gi}\nnuma: none\n");
    crater_request_t r =
        job(s, "resources: {gpu: 2, cpu: 20, memory: 1Gi}\nnuma: strict\n");
    crater_request_t big =
        job(s, "resources: {gpu: 2, cpu: 93}\nnuma: strict\n");
    crater_request_t cpu = job(s, "resources: {cpu: 93}\nnuma: strict\n");
    crater_request_t mem =
        job(s, "resources: {gpu: 2, memory: 1100Gi}\nnuma: strict\n");
    crater_placement_t p;

    place_on(s, 1, &hog, "gpu-h100-0", &p);
    place_on(s, 2, &r, "gpu-h100-0", &p);
    ck_assert_int_eq(p.numa, 1); /* NUMA 0 is short: GPUs from NUMA 1 */
    ck_assert_uint_eq(p.gpu[0], 4);
    ck_assert_uint_eq(p.gpu[1], 5);
    ck_assert_uint_eq(p.numa_cpu[0], 0);
    ck_assert_uint_eq(p.numa_cpu[1], 20000);
    ck_assert_uint_eq(p.numa_mem[1], GIB);
    expect_fail(s,
                &big,
                "0/1 nodes fit: 1 no NUMA node has the GPUs, CPU and memory "
                "together (need 2, best 0 on gpu-h100-0)");
    expect_fail(s,
                &cpu,
                "0/1 nodes fit: 1 no NUMA node has the CPU and memory next "
                "to its GPUs (need 93 CPU, best 92 CPU on gpu-h100-0)");
    expect_fail(s, /* memory: 1Ti per NUMA node */
                &mem,
                "0/1 nodes fit: 1 no NUMA node has the GPUs, CPU and memory "
                "together (need 2, best 0 on gpu-h100-0)");
    mem.numa = CRATER_NUMA_PREFERRED;
    expect_on(s, &mem, "gpu-h100-0", &p);
    ck_assert_int_eq(p.numa, -1);
    ck_assert_uint_eq(p.numa_mem[0] + p.numa_mem[1], 1100 * GIB);
    crater_sched_destroy(s);
}
END_TEST

/* ---- disk -------------------------------------------------------------- */

/* disk.yaml: sda sata 98k/100us, nvme0n1 1000k/80us, nvme1n1 500k/20us,
 * sdb = sda */
START_TEST(disk_interface_latency_bandwidth)
{
    crater_sched_t *s = load(HW("disk.yaml"));
    crater_request_t sata = job(s, "resources: {disk: {interface: sata}}\n");
    crater_request_t nvme = job(s, "resources: {disk: {interface: nvme}}\n");
    crater_request_t lat = job(s, "resources: {disk: {maxLatency: 50us}}\n");
    crater_request_t lat80 =
        job(s, "resources: {disk: {maxLatency: 80us, iops: 600k}}\n");
    crater_request_t fast = job(s, "resources: {disk: {maxLatency: 10us}}\n");
    crater_request_t sas = job(s, "resources: {disk: {interface: sas}}\n");
    crater_request_t bw = job(s, "resources: {disk: {bandwidth: 4GB/s}}\n");
    crater_request_t none = job(s, "resources: {cpu: 1}\n");
    const char *nodev = "0/1 nodes fit: 1 no storage device with the "
                        "interface, latency, IOPS and bandwidth asked "
                        "(need 0, best 1000000 on disk)";
    crater_placement_t p;

    expect_on(s, &sata, "disk", &p);
    ck_assert_int_eq(p.storage, 0); /* sda and sdb tie: lower index */
    expect_on(s, &nvme, "disk", &p);
    ck_assert_int_eq(p.storage, 2); /* best fit: fewer IOPS left */
    expect_on(s, &lat, "disk", &p);
    ck_assert_int_eq(p.storage, 2);
    expect_on(s, &lat80, "disk", &p);
    ck_assert_int_eq(p.storage, 1);
    ck_assert_uint_eq(p.disk_iops, 600000);
    expect_on(s, &bw, "disk", &p);
    ck_assert_int_eq(p.storage, 1);
    ck_assert_uint_eq(p.disk_bw, 4000000000ull);
    expect_on(s, &none, "disk", &p);
    ck_assert_int_eq(p.storage, -1);
    expect_fail(s, &fast, nodev);
    expect_fail(s, &sas, nodev);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(disk_iops_best_fit_and_release)
{
    crater_sched_t *s = load(HW("disk.yaml"));
    crater_request_t small = job(s, "resources: {disk: {iops: 50k}}\n");
    crater_request_t mid = job(s, "resources: {disk: {iops: 400k}}\n");
    crater_request_t exact = job(s, "resources: {disk: {iops: 500k}}\n");
    crater_request_t big = job(s, "resources: {disk: {iops: 700k}}\n");
    crater_placement_t p;

    place_on(s, 3, &small, "disk", &p);
    ck_assert_int_eq(p.storage, 0); /* 48k left on sda (and sdb) */
    ck_assert_uint_eq(p.disk_iops, 50000);
    place_on(s, 4, &small, "disk", &p);
    ck_assert_int_eq(p.storage, 3); /* sda has 48k left now */
    expect_on(s, &small, "disk", &p);
    ck_assert_int_eq(p.storage, 2); /* no SATA left: the smaller NVMe */
    release(s, 3);
    release(s, 4);
    place_on(s, 1, &mid, "disk", &p);
    ck_assert_int_eq(p.storage, 2);
    place_on(s, 2, &mid, "disk", &p); /* nvme1n1 has 100k left */
    ck_assert_int_eq(p.storage, 1);
    expect_fail(s,
                &big,
                "0/1 nodes fit: 1 no storage device with the interface, "
                "latency, IOPS and bandwidth asked (need 700000, best "
                "600000 on disk)");
    release(s, 1);
    expect_on(s, &exact, "disk", &p); /* released exactly: 500k fits */
    ck_assert_int_eq(p.storage, 2);
    release(s, 2);
    expect_on(s, &big, "disk", &p);
    ck_assert_int_eq(p.storage, 1);
    crater_sched_destroy(s);
}
END_TEST

/* ---- ratio ------------------------------------------------------------- */

/* gpu-cpu: "gpu" has 8 L4 and 40 CPUs, "cpu" 40 CPUs; both 256Gi. */
START_TEST(ratio_min_cpu_per_gpu)
{
    crater_sched_t *s;
    crater_request_t ten, eight, gpu;
    crater_placement_t p;

    cfg.scheduler.min_cpu_per_gpu = 4;
    s = load(HW("gpu-cpu.yaml"));
    ten = job(s, "resources: {cpu: 10}\n");
    eight = job(s, "resources: {cpu: 8}\n");
    gpu = job(s, "resources: {gpu: 1, cpu: 10}\n");
    expect_on(s, &ten, "cpu", &p);   /* 30 left < 8 free GPUs x 4 */
    expect_on(s, &eight, "gpu", &p); /* 32 left: exactly enough */
    expect_on(s, &gpu, "gpu", &p);   /* 7 free GPUs need 28 */
    cordon(s, "cpu", true);
    expect_fail(s,
                &ten,
                "0/2 nodes fit: 1 node cordoned, 1 would leave free GPUs "
                "without CPU (minCpuPerGpu) (need 32 CPU, best 30 CPU on "
                "gpu)");
    crater_sched_destroy(s);
}
END_TEST

START_TEST(ratio_min_memory_per_gpu)
{
    crater_sched_t *s;
    crater_request_t one, zero;
    crater_placement_t p;

    cfg.scheduler.min_memory_per_gpu = 32 * GIB;
    s = load(HW("gpu-cpu.yaml"));
    one = job(s, "resources: {cpu: 1, memory: 1Gi}\n");
    zero = job(s, "resources: {cpu: 1}\n");
    expect_on(s, &one, "cpu", &p);
    expect_on(s, &zero, "gpu", &p); /* 256Gi left for 8 GPUs: enough */
    cordon(s, "cpu", true);
    expect_fail(s,
                &one,
                "0/2 nodes fit: 1 node cordoned, 1 would leave free GPUs "
                "without memory (minMemoryPerGpu) (need 256Gi, best 255Gi on "
                "gpu)");
    crater_sched_destroy(s);
}
END_TEST

/* ---- scores ------------------------------------------------------------ */

/* pair: p-0 and p-1, 4 A100 each, switches {0,1} and {2,3}. */
START_TEST(score_joint_prefers_emptier)
{
    crater_sched_t *s = load(HW("pair.yaml"));
    crater_request_t r = job(s, "resources: {gpu: {count: 1, memory: 10Gi}}\n");
    crater_request_t cpu = job(s, "resources: {cpu: 4}\n");
    crater_placement_t p;

    place_on(s, 1, &r, "p-0", &p);
    expect_on(s, &r, "p-0", &p); /* no score: lowest id */
    weigh(s, 1, 0, 0, 0, 0);
    expect_on(s, &r, "p-1", &p);
    /* gpu, cpu, memory weighted 0.25 each (no disk): 1 - u_gpu / 3 */
    ck_assert_double_eq_tol(p.score, 1 - 10540.0 / (4 * 81920) / 3, 1e-12);
    place_on(s, 4, &cpu, "p-1", &p); /* CPU counts too */
    ck_assert_double_eq_tol(p.score, 1 - 4.0 / 32 / 3, 1e-12);
    release(s, 4);
    place_on(s, 2, &r, "p-1", &p);
    place_on(s, 3, &r, "p-0", &p); /* equal again: lowest id */
    crater_sched_destroy(s);
}
END_TEST

START_TEST(score_packing_prefers_fuller)
{
    crater_sched_t *s = load(HW("pair.yaml"));
    crater_request_t r =
        job(s, "resources: {gpu: {count: 1, memory: 10Gi}, cpu: 4}\n");
    crater_placement_t p;

    weigh(s, 0, 1, 0, 0, 0);
    cordon(s, "p-0", true);
    place_on(s, 1, &r, "p-1", &p);
    cordon(s, "p-0", false);
    place_on(s, 2, &r, "p-1", &p);  /* the fuller node, though higher id */
    ck_assert_uint_eq(p.gpu[0], 0); /* and the fuller GPU on it */
    weigh(s, 1, 0, 0, 0, 0);
    expect_on(s, &r, "p-0", &p); /* joint alone: the other way */
    crater_sched_destroy(s);

    s = load(HW("cpu3.yaml")); /* CPU only: the node with fewer CPUs free */
    r = job(s, "resources: {cpu: 4}\n");
    weigh(s, 0, 1, 0, 0, 0);
    cordon(s, "n-0", true);
    place_on(s, 1, &r, "n-1", &p);
    cordon(s, "n-0", false);
    expect_on(s, &r, "n-1", &p);
    ck_assert_double_eq_tol(p.score, 1 - (0.5 + 1) / 2, 1e-12);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(score_packing_keeps_cpu_jobs_off_gpu_nodes)
{
    crater_sched_t *s = load(HW("gpu-cpu.yaml"));
    crater_request_t r = job(s, "resources: {cpu: 8, memory: 16Gi}\n");
    crater_placement_t p;

    expect_on(s, &r, "gpu", &p); /* no score: lowest id */
    weigh(s, 0, 1, 0, 0, 0);
    expect_on(s, &r, "cpu", &p);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(score_topology_prefers_fewer_switches)
{
    crater_sched_t *s = load(HW("pair.yaml"));
    crater_request_t r = job(s, "resources: {gpu: 2, cpu: 4}\n");
    crater_request_t loose =
        job(s, "resources: {gpu: 2, cpu: 4}\nnuma: none\n");
    crater_placement_t p;

    hold_gpu(s, 1, id_of(s, "p-0"), 1); /* p-0 free: 0 and 3 */
    hold_gpu(s, 2, id_of(s, "p-0"), 2);
    expect_on(s, &r, "p-0", &p); /* no score: lowest id, two switches */
    ck_assert_uint_eq(p.gpu[0], 0);
    ck_assert_uint_eq(p.gpu[1], 3);
    ck_assert_double_eq_tol(p.score, 0.0, 1e-12);
    weigh(s, 0, 0, 1, 0, 0);
    expect_on(s, &r, "p-1", &p);
    ck_assert_uint_eq(p.gpu[0], 0);
    ck_assert_uint_eq(p.gpu[1], 1);
    ck_assert_double_eq_tol(p.score, 1.0, 1e-12);
    expect_on(s, &loose, "p-1", &p); /* CPUs not pinned: no 0.2 */
    ck_assert_int_eq(p.numa, -1);
    ck_assert_double_eq_tol(p.score, 0.8, 1e-12);
    cordon(s, "p-1", true);
    expect_on(s, &r, "p-0", &p); /* 0.8 x (1/2 + 1/4) + 0.2 pinned */
    ck_assert_double_eq_tol(p.score, 0.8, 1e-12);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(score_low_utilization)
{
    crater_sched_t *s;
    crater_request_t r, warm;
    crater_placement_t p;
    crater_node_util_t busy = {.gpu = {0.7, 0.7, 0.7, 0.7}};
    crater_node_util_t idle = {.gpu = {0.2, 0.2, 0.2, 0.2}};

    s = load(HW("pair.yaml"));
    r = job(s, "resources: {gpu: 1}\n");
    util(s, "p-0", busy);
    util(s, "p-1", idle);
    weigh(s, 0, 0, 0, 0, 1);
    expect_on(s, &r, "p-0", &p); /* not asked: no preference */
    r.prefer_low_util = true;
    expect_on(s, &r, "p-1", &p);
    ck_assert_double_eq_tol(p.score, 0.8, 1e-6);
    warm = job(s,
               "resources: {gpu: 1}\n"
               "inference: {port: 8000, maxReplicas: 4, warmPoolSize: 2}\n");
    ck_assert(warm.prefer_low_util); /* warm replicas ask for it */
    expect_on(s, &warm, "p-1", &p);
    crater_sched_destroy(s);

    cfg.scheduler.prefer_low_utilization = true; /* every job */
    s = load(HW("pair.yaml"));
    r = job(s, "resources: {gpu: 1}\n");
    util(s, "p-0", busy);
    util(s, "p-1", idle);
    weigh(s, 0, 0, 0, 0, 1);
    expect_on(s, &r, "p-1", &p);
    crater_sched_destroy(s);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("plugins");
    TCase *tc = tcase_create("plugins");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, health_skips_unready_and_cordoned);
    tcase_add_test(tc, selector_node_selector);
    tcase_add_test(tc, selector_taints_and_tolerations);
    tcase_add_test(tc, runtime_image_needs_runtime);
    tcase_add_test(tc, locality_required_filters);
    tcase_add_test(tc, locality_preferred_breaks_tie);
    tcase_add_test(tc, cpu_threshold_at_and_above);
    tcase_add_test(tc, memory_threshold_at_and_above);
    tcase_add_test(tc, capability_compute_capability_and_models);
    tcase_add_test(tc, capability_vendor_sm_count_hbm);
    tcase_add_test(tc, capability_pcie_saturation);
    tcase_add_test(tc, gpu_eight_tasks_per_gpu);
    tcase_add_test(tc, gpu_zero_gpus_on_gpu_node);
    tcase_add_test(tc, gpu_whole_needs_fully_free);
    tcase_add_test(tc, gpu_nvlink_required_needs_a_mesh);
    tcase_add_test(tc, gpu_nvlink_partial_graph_whole);
    tcase_add_test(tc, gpu_nvlink_partial_graph_slices);
    tcase_add_test(tc, gpu_multi_gpu_slices_distinct);
    tcase_add_test(tc, cpumem_insufficient_messages);
    tcase_add_test(tc, cpumem_numa_preferred_spreads);
    tcase_add_test(tc, cpumem_numa_strict);
    tcase_add_test(tc, disk_interface_latency_bandwidth);
    tcase_add_test(tc, disk_iops_best_fit_and_release);
    tcase_add_test(tc, ratio_min_cpu_per_gpu);
    tcase_add_test(tc, ratio_min_memory_per_gpu);
    tcase_add_test(tc, score_joint_prefers_emptier);
    tcase_add_test(tc, score_packing_prefers_fuller);
    tcase_add_test(tc, score_packing_keeps_cpu_jobs_off_gpu_nodes);
    tcase_add_test(tc, score_topology_prefers_fewer_switches);
    tcase_add_test(tc, score_low_utilization);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
