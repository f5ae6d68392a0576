/* test_hwfile.c - hardware files: every example loads with exact values,
 * knowledge-base completion, count expansion, deterministic uuids, the
 * encode -> decode round trip (JSON and YAML text), and bad inputs
 * rejected with the exact path, line and column. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crater/doc.h"
#include "crater/hwfile.h"

#define GB 1000000000ull
#define GIB (1ull << 30)
#define MIB (1ull << 20)
#define EX CRATER_SOURCE_DIR "/examples/hardware/"
#define BAD CRATER_SOURCE_DIR "/tests/data/hardware/"

static crater_kb_t *kb;

static void setup(void)
{
    kb = crater_kb_create();
    ck_assert_ptr_nonnull(kb);
}

static void teardown(void)
{
    crater_kb_destroy(kb);
}

static crater_cluster_t *load(const char *path)
{
    crater_cluster_t *c = NULL;
    crater_error_t err;

    ck_assert_msg(crater_hw_load(path, kb, &c, &err) == 0,
                  "%s: %s",
                  path,
                  err.text);
    return c;
}

/* Decode YAML text; returns 0 or -1 with err filled. */
static int decode_text(const char *text,
                       const crater_kb_t *k,
                       crater_cluster_t **out,
                       crater_error_t *err)
{
    crater_doc_t *doc = NULL;
    crater_dec_t d;
    int rc;

    if (crater_doc_parse(text, strlen(text), "hw.yaml", &doc, err) < 0)
        return -1;
    crater_dec_init(&d, doc, 0, err);
    rc = crater_hw_decode(&d, crater_doc_root(doc, 0), k, out);
    crater_doc_destroy(doc);
    return rc;
}

static crater_cluster_t *decode_ok(const char *text, const crater_kb_t *k)
{
    crater_cluster_t *c = NULL;
    crater_error_t err;

    ck_assert_msg(decode_text(text, k, &c, &err) == 0, "%s", err.text);
    return c;
}

/* Decode text that must fail; returns the message (static). */
static const char *decode_fail(const char *text,
                               const char *field,
                               crater_errno_t errnum)
{
    static crater_error_t err;
    crater_cluster_t *c = NULL;

    ck_assert_int_eq(decode_text(text, kb, &c, &err), -1);
    ck_assert_ptr_null(c);
    ck_assert_str_eq(err.field, field);
    ck_assert_str_eq(crater_errno_name(err.errnum), crater_errno_name(errnum));
    return err.text;
}

/* ---- equality, field by field ---- */

static int str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void gpu_eq(const crater_gpu_t *a, const crater_gpu_t *b)
{
    ck_assert(str_eq(a->uuid, b->uuid));
    ck_assert(str_eq(a->vendor, b->vendor));
    ck_assert(str_eq(a->model, b->model));
    ck_assert(str_eq(a->pci_bus_id, b->pci_bus_id));
    ck_assert(str_eq(a->upstream, b->upstream));
    ck_assert_uint_eq(a->memory_bytes, b->memory_bytes);
    ck_assert_uint_eq(a->sm_count, b->sm_count);
    ck_assert_uint_eq(a->compute_cap, b->compute_cap);
    ck_assert_uint_eq(a->hbm_bandwidth, b->hbm_bandwidth);
    ck_assert_uint_eq(a->nvlink_bandwidth, b->nvlink_bandwidth);
    ck_assert_double_eq(a->fp16_tflops, b->fp16_tflops);
    ck_assert_int_eq(a->numa_node, b->numa_node);
    ck_assert_uint_eq(a->nvlink_peers, b->nvlink_peers);
}

static void cpu_eq(const crater_cpu_t *a, const crater_cpu_t *b)
{
    ck_assert(str_eq(a->vendor, b->vendor));
    ck_assert(str_eq(a->model, b->model));
    ck_assert(str_eq(a->pci_root, b->pci_root));
    ck_assert_uint_eq(a->cores, b->cores);
    ck_assert_uint_eq(a->threads, b->threads);
    ck_assert_int_eq(a->numa_node, b->numa_node);
    ck_assert_double_eq(a->ipc_baseline, b->ipc_baseline);
    ck_assert_uint_eq(a->memory_bandwidth, b->memory_bandwidth);
}

static void storage_eq(const crater_storage_t *a, const crater_storage_t *b)
{
    ck_assert(str_eq(a->device, b->device));
    ck_assert(str_eq(a->model, b->model));
    ck_assert_int_eq(a->iface, b->iface);
    ck_assert_uint_eq(a->capacity, b->capacity);
    ck_assert_uint_eq(a->iops, b->iops);
    ck_assert_uint_eq(a->bandwidth, b->bandwidth);
    ck_assert_uint_eq(a->latency_us, b->latency_us);
    ck_assert_uint_eq(a->queue_depth, b->queue_depth);
    ck_assert_int_eq(a->rotational, b->rotational);
    ck_assert_int_eq(a->numa_node, b->numa_node);
}

static void meta_eq(const crater_node_t *a, const crater_node_t *b)
{
    size_t nd = crater_strv_len(a->datasets);

    ck_assert_str_eq(a->name, b->name);
    ck_assert_int_eq(a->samples, b->samples);
    ck_assert_uint_eq(a->nlabels, b->nlabels);
    for (size_t i = 0; i < a->nlabels; i++) {
        ck_assert_str_eq(a->labels[i].key, b->labels[i].key);
        ck_assert_str_eq(a->labels[i].value, b->labels[i].value);
    }
    ck_assert_uint_eq(a->ntaints, b->ntaints);
    for (size_t i = 0; i < a->ntaints; i++) {
        ck_assert_str_eq(a->taints[i].key, b->taints[i].key);
        ck_assert(str_eq(a->taints[i].value, b->taints[i].value));
        ck_assert_int_eq(a->taints[i].effect, b->taints[i].effect);
    }
    ck_assert_uint_eq(nd, crater_strv_len(b->datasets));
    for (size_t i = 0; i < nd; i++)
        ck_assert_str_eq(a->datasets[i], b->datasets[i]);
}

static void node_eq(const crater_node_t *a, const crater_node_t *b)
{
    meta_eq(a, b);
    ck_assert_uint_eq(a->ngpus, b->ngpus);
    for (size_t i = 0; i < a->ngpus; i++)
        gpu_eq(&a->gpus[i], &b->gpus[i]);
    ck_assert_uint_eq(a->ncpus, b->ncpus);
    for (size_t i = 0; i < a->ncpus; i++)
        cpu_eq(&a->cpus[i], &b->cpus[i]);
    ck_assert_uint_eq(a->nmems, b->nmems);
    for (size_t i = 0; i < a->nmems; i++) {
        ck_assert_int_eq(a->mems[i].numa_node, b->mems[i].numa_node);
        ck_assert_uint_eq(a->mems[i].capacity, b->mems[i].capacity);
        ck_assert_uint_eq(a->mems[i].bandwidth, b->mems[i].bandwidth);
        ck_assert_uint_eq(a->mems[i].latency_ns, b->mems[i].latency_ns);
    }
    ck_assert_uint_eq(a->nstorage, b->nstorage);
    for (size_t i = 0; i < a->nstorage; i++)
        storage_eq(&a->storage[i], &b->storage[i]);
}

static void cluster_eq(const crater_cluster_t *a, const crater_cluster_t *b)
{
    ck_assert_uint_eq(a->nnodes, b->nnodes);
    for (size_t i = 0; i < a->nnodes; i++)
        node_eq(&a->nodes[i], &b->nodes[i]);
}

/* encode -> text (JSON or YAML) -> parse -> decode, with and without kb */
static void round_trip(const crater_cluster_t *c,
                       int yaml,
                       const crater_kb_t *k)
{
    json_t *j = crater_hw_encode(c);
    char *text;
    crater_cluster_t *back;

    ck_assert_ptr_nonnull(j);
    text = yaml ? crater_json_to_yaml(j) : json_dumps(j, JSON_COMPACT);
    ck_assert_ptr_nonnull(text);
    back = decode_ok(text, k);
    cluster_eq(c, back);
    crater_cluster_destroy(back);
    free(text);
    json_decref(j);
}

START_TEST(every_example_loads_and_round_trips)
{
    DIR *dir = opendir(EX);
    struct dirent *de;
    int n = 0;

    ck_assert_ptr_nonnull(dir);
    while ((de = readdir(dir))) {
        char path[1024];
        size_t len = strlen(de->d_name);
        crater_cluster_t *c;

        if (len < 6 || strcmp(de->d_name + len - 5, ".yaml") != 0)
            continue;
        snprintf(path, sizeof(path), "%s%s", EX, de->d_name);
        c = load(path);
        ck_assert_uint_gt(c->nnodes, 0);
        round_trip(c, 0, kb);
        round_trip(c, 1, kb);
        round_trip(c, 0, NULL); /* normalised form needs no kb */
        crater_cluster_destroy(c);
        n++;
    }
    closedir(dir);
    ck_assert_int_ge(n, 4);
}
END_TEST

START_TEST(a2_a100_values)
{
    crater_cluster_t *c = load(EX "a2-a100.yaml");
    const crater_node_t *n = &c->nodes[0];
    const crater_gpu_t *g;

    ck_assert_uint_eq(c->nnodes, 1);
    ck_assert_str_eq(n->name, "gpu-a100-0");
    ck_assert_uint_eq(n->nlabels, 2);
    ck_assert_str_eq(n->labels[1].key, "rack");
    ck_assert_str_eq(n->labels[1].value, "r07");
    ck_assert_int_eq(n->samples, CRATER_SAMPLES_SYNTHETIC);
    ck_assert_str_eq(n->datasets[1], "coco");
    ck_assert_ptr_null(n->datasets[2]);
    ck_assert_uint_eq(n->ngpus, 2);
    g = &n->gpus[1];
    ck_assert_str_eq(g->model, "a100-pcie-80gb");
    ck_assert_str_eq(g->vendor, "nvidia");
    ck_assert_str_eq(g->uuid, "GPU-9e8d7c6b-5a49-4837-a261-0f1e2d3c4b5a");
    ck_assert_str_eq(g->pci_bus_id, "0000:c1:00.0");
    ck_assert_str_eq(g->upstream, "0000:c0:01.1");
    ck_assert_uint_eq(g->memory_bytes, 81920 * MIB); /* from the kb */
    ck_assert_uint_eq(g->sm_count, 108);
    ck_assert_uint_eq(g->compute_cap, 80);
    ck_assert_uint_eq(g->hbm_bandwidth, 1935 * GB);
    ck_assert_uint_eq(g->nvlink_bandwidth, 600 * GB); /* file: bridge */
    ck_assert_uint_eq(g->nvlink_peers, 1u << 0);
    ck_assert_uint_eq(n->gpus[0].nvlink_peers, 1u << 1);
    ck_assert_double_eq(g->fp16_tflops, 312.0);
    ck_assert_uint_eq(n->ncpus, 1);
    ck_assert_double_eq(n->cpus[0].ipc_baseline, 1.25);
    ck_assert_uint_eq(n->cpus[0].memory_bandwidth, 204800000000ull);
    ck_assert_str_eq(n->cpus[0].pci_root, "0000:00:00.0");
    ck_assert_uint_eq(crater_node_cpu_milli(n), 128000);
    ck_assert_uint_eq(crater_node_memory_bytes(n), 512 * GIB);
    ck_assert_uint_eq(n->mems[0].bandwidth, 204800000000ull);
    ck_assert_uint_eq(n->mems[0].latency_ns, 90);
    ck_assert_uint_eq(n->nstorage, 1);
    ck_assert_str_eq(n->storage[0].device, "nvme0n1");
    ck_assert_int_eq(n->storage[0].iface, CRATER_IFACE_NVME);
    ck_assert_uint_eq(n->storage[0].capacity, 3840000000000ull);
    ck_assert_uint_eq(n->storage[0].iops, 1000000);
    ck_assert_uint_eq(n->storage[0].bandwidth, 6900000000ull);
    ck_assert_uint_eq(n->storage[0].latency_us, 80);
    ck_assert_uint_eq(n->storage[0].queue_depth, 2048);
    ck_assert_int_eq(n->storage[0].rotational, 0);
    crater_cluster_destroy(c);
}
END_TEST

START_TEST(h100x8_topology)
{
    crater_cluster_t *c = load(EX "h100x8.yaml"), *again;
    const crater_node_t *n = &c->nodes[0];

    ck_assert_uint_eq(n->ngpus, 8);
    for (size_t i = 0; i < 8; i++) {
        const crater_gpu_t *g = &n->gpus[i];
        ck_assert_uint_eq(g->nvlink_peers, 0xffu & ~(1u << i));
        ck_assert_uint_eq(g->nvlink_bandwidth, 900 * GB);
        ck_assert_uint_eq(g->memory_bytes, 81559 * MIB);
        ck_assert_int_eq(g->numa_node, i < 4 ? 0 : 1);
        ck_assert_str_eq(g->upstream, n->gpus[i ^ 1].upstream); /* pairs */
        ck_assert_str_ne(g->upstream, n->gpus[(i + 2) % 8].upstream);
        ck_assert_uint_eq(strlen(g->uuid), 40);
        ck_assert(strncmp(g->uuid, "GPU-", 4) == 0);
        for (size_t j = 0; j < i; j++)
            ck_assert_str_ne(g->uuid, n->gpus[j].uuid);
    }
    ck_assert_str_eq(n->gpus[2].pci_bus_id, "0000:3a:00.0");
    ck_assert_uint_eq(n->ncpus, 2);
    ck_assert_uint_eq(crater_node_cpu_milli(n), 224000);
    ck_assert_uint_eq(crater_node_memory_bytes(n), 2048 * GIB);
    ck_assert_uint_eq(n->nstorage, 4);
    ck_assert_int_eq(n->storage[3].numa_node, 1);
    ck_assert_uint_eq(n->storage[3].iops, 1450000);
    /* generated uuids are deterministic */
    again = load(EX "h100x8.yaml");
    for (size_t i = 0; i < 8; i++)
        ck_assert_str_eq(again->nodes[0].gpus[i].uuid, n->gpus[i].uuid);
    crater_cluster_destroy(again);
    crater_cluster_destroy(c);
}
END_TEST

START_TEST(cpu_only_values)
{
    crater_cluster_t *c = load(EX "cpu-only.yaml");
    const crater_node_t *n = &c->nodes[0];

    ck_assert_uint_eq(n->ngpus, 0);
    ck_assert_uint_eq(n->cpus[1].cores, 96); /* from the kb */
    ck_assert_str_eq(n->cpus[1].vendor, "amd");
    ck_assert_uint_eq(n->cpus[1].memory_bandwidth, 460800000000ull);
    ck_assert_uint_eq(crater_node_cpu_milli(n), 384000);
    ck_assert_uint_eq(n->ntaints, 1);
    ck_assert_str_eq(n->taints[0].key, "dedicated");
    ck_assert_str_eq(n->taints[0].value, "cpu");
    ck_assert_int_eq(n->taints[0].effect, CRATER_TAINT_PREFER_NO_SCHEDULE);
    ck_assert_int_eq(n->storage[0].iface, CRATER_IFACE_SATA);
    ck_assert_uint_eq(n->storage[0].queue_depth, 32);
    ck_assert_uint_eq(n->storage[0].bandwidth, 550000000ull);
    crater_cluster_destroy(c);
}
END_TEST

START_TEST(cluster_expansion)
{
    static const char *const names[] =
        {"a100-0", "a100-1", "h100", "infer-l4", "infer-t4", "cpu-0", "cpu-1"};
    crater_cluster_t *c = load(EX "cluster.yaml");
    const crater_node_t *a0 = &c->nodes[0], *a1 = &c->nodes[1];

    ck_assert_uint_eq(c->nnodes, 7);
    for (size_t i = 0; i < 7; i++)
        ck_assert_str_eq(c->nodes[i].name, names[i]);
    ck_assert_uint_eq(a0->ngpus, 8);
    for (size_t i = 0; i < 8; i++) {
        ck_assert_str_eq(a0->gpus[i].model, "a100-sxm4-80gb");
        ck_assert_int_eq(a0->gpus[i].numa_node, i < 4 ? 0 : 1);
        ck_assert_uint_eq(a0->gpus[i].nvlink_peers, 0xffu & ~(1u << i));
        ck_assert_str_ne(a0->gpus[i].uuid, a1->gpus[i].uuid);
        ck_assert_ptr_null(a0->gpus[i].pci_bus_id);
    }
    ck_assert_str_eq(a1->labels[1].value, "training");
    ck_assert_str_eq(a1->datasets[0], "imagenet");
    ck_assert_str_eq(c->nodes[2].gpus[5].model, "h100-sxm5-80gb"); /* NVML */
    ck_assert_str_eq(c->nodes[4].gpus[3].model, "t4");
    ck_assert_uint_eq(c->nodes[4].gpus[3].nvlink_peers, 0);
    ck_assert_int_eq(c->nodes[3].taints[0].effect, CRATER_TAINT_NO_SCHEDULE);
    ck_assert_int_eq(c->nodes[3].cpus[0].numa_node, 0); /* default */
    ck_assert_uint_eq(c->nodes[3].cpus[0].cores, 32);
    ck_assert_uint_eq(c->nodes[4].mems[0].bandwidth, 0); /* not given */
    ck_assert_uint_eq(c->nodes[6].cpus[1].memory_bandwidth, 140784000000ull);
    crater_cluster_destroy(c);
}
END_TEST

START_TEST(kb_completion_and_defaults)
{
    crater_cluster_t *c = decode_ok("kind: Node\nname: n\n"
                                    "gpus:\n"
                                    "  - {model: A100 SXM4 80GB, memory: "
                                    "40Gi,\n"
                                    "     memory_bandwidth_gbps: 1555}\n"
                                    "  - {model: acme-x1, memory: 32Gi, "
                                    "sm_count: 10,\n"
                                    "     compute_capability: sm_90, vendor: "
                                    "acme}\n"
                                    "cpus: [{cores: 16}]\n",
                                    kb);
    const crater_node_t *n = &c->nodes[0];

    ck_assert_str_eq(n->gpus[0].model, "a100-sxm4-80gb");
    ck_assert_uint_eq(n->gpus[0].memory_bytes, 40 * GIB); /* file wins */
    ck_assert_uint_eq(n->gpus[0].hbm_bandwidth, 1555 * GB);
    ck_assert_uint_eq(n->gpus[0].sm_count, 108); /* kb fills the rest */
    ck_assert_uint_eq(n->gpus[0].nvlink_bandwidth, 600 * GB);
    ck_assert_int_eq(n->gpus[0].numa_node, -1);
    ck_assert_str_eq(n->gpus[1].model, "acme-x1");
    ck_assert_str_eq(n->gpus[1].vendor, "acme");
    ck_assert_uint_eq(n->gpus[1].compute_cap, 90);
    ck_assert_uint_eq(n->gpus[1].hbm_bandwidth, 0);
    ck_assert_int_eq(n->samples, CRATER_SAMPLES_SYNTHETIC);
    ck_assert_uint_eq(n->cpus[0].threads, 16);
    ck_assert_double_eq(n->cpus[0].ipc_baseline, 1.0);
    ck_assert_ptr_null(n->cpus[0].model);
    ck_assert_uint_eq(crater_node_cpu_milli(n), 16000);
    round_trip(c, 0, kb);
    round_trip(c, 1, NULL);
    crater_cluster_destroy(c);

    /* without a kb the model is only normalised and memory is required */
    c = decode_ok("{\"kind\": \"Node\", \"name\": \"n\", \"samples\": \"real\","
                  " \"gpus\": [{\"model\": \"NVIDIA A100-SXM4-80GB\","
                  " \"memory\": \"80Gi\"}]}",
                  NULL);
    ck_assert_str_eq(c->nodes[0].gpus[0].model, "a100-sxm4-80gb");
    ck_assert_uint_eq(c->nodes[0].gpus[0].sm_count, 0);
    ck_assert_int_eq(c->nodes[0].samples, CRATER_SAMPLES_REAL);
    crater_cluster_destroy(c);
}
END_TEST

START_TEST(gpu_count_expansion)
{
    crater_cluster_t *c = decode_ok("kind: Node\nname: box\n"
                                    "gpus:\n"
                                    "  - {model: l40s, count: 3, "
                                    "upstream_pci_bus_id: "
                                    "\"0000:40:01.0\"}\n"
                                    "  - {model: l4, pci_bus_id: "
                                    "\"00000000:81:00.0\"}\n",
                                    kb);
    const crater_node_t *n = &c->nodes[0];

    ck_assert_uint_eq(n->ngpus, 4);
    for (size_t i = 0; i < 3; i++) {
        ck_assert_str_eq(n->gpus[i].model, "l40s");
        ck_assert_str_eq(n->gpus[i].upstream, "0000:40:01.0");
        ck_assert_uint_eq(n->gpus[i].memory_bytes, 46068 * MIB);
    }
    ck_assert_str_eq(n->gpus[3].model, "l4");
    ck_assert_str_eq(n->gpus[3].pci_bus_id, "00000000:81:00.0");
    ck_assert_str_ne(n->gpus[0].uuid, n->gpus[1].uuid);
    crater_cluster_destroy(c);

    decode_fail("kind: Node\nname: n\ngpus:\n"
                "  - {model: t4, count: 40}\n  - {model: t4, count: 30}\n",
                "gpus[1].count",
                CRATER_ELIMIT);
    decode_fail("kind: Node\nname: n\ngpus: [{model: t4, count: 65}]\n",
                "gpus[0].count",
                CRATER_ERANGE);
    decode_fail("kind: Node\nname: n\ngpus:\n"
                "  - {model: a100-sxm4-80gb, count: 2, nvlink_peers: [1]}\n",
                "gpus[0].nvlink_peers",
                CRATER_ECONFLICT);
    decode_fail("kind: Node\nname: n\ngpus:\n"
                "  - {model: t4, count: 2, pci_bus_id: \"0000:07:00.0\"}\n",
                "gpus[0].pci_bus_id",
                CRATER_ECONFLICT);
}
END_TEST

START_TEST(node_count_and_limits)
{
    crater_cluster_t *c = decode_ok("kind: Cluster\nnodes:\n"
                                    "  - {name: w, count: 12, cpus: "
                                    "[{cores: 2}]}\n",
                                    kb);

    ck_assert_uint_eq(c->nnodes, 12);
    ck_assert_str_eq(c->nodes[0].name, "w-0");
    ck_assert_str_eq(c->nodes[11].name, "w-11");
    crater_cluster_destroy(c);
    c = decode_ok("kind: Cluster\nnodes: []\n", kb);
    ck_assert_uint_eq(c->nnodes, 0);
    crater_cluster_destroy(c);
    decode_fail("kind: Cluster\nnodes:\n"
                "  - {name: a, count: 60000}\n  - {name: b, count: 50000}\n",
                "nodes[1].count",
                CRATER_ELIMIT);
    decode_fail("kind: Cluster\nnodes:\n  - {name: a, count: 100001}\n",
                "nodes[0].count",
                CRATER_ERANGE);
    decode_fail("kind: Cluster\nnodes:\n  - {name: a, count: 100}\n"
                "  - {name: b, count: 20000, gpus: [{model: t4, count: 64}]}\n",
                "nodes[1].count",
                CRATER_ELIMIT);
    /* a uuid cannot be shared by every node a counted entry makes */
    decode_fail("kind: Cluster\nnodes:\n"
                "  - name: a\n    count: 2\n    gpus:\n"
                "      - {model: t4, uuid: "
                "GPU-00000000-1111-2222-3333-444444444444}\n",
                "nodes[0].gpus[0].uuid",
                CRATER_ECONFLICT);
    decode_fail("kind: Cluster\nnodes:\n"
                "  - {name: a, gpus: [{model: t4, uuid: "
                "GPU-00000000-1111-2222-3333-444444444444}]}\n"
                "  - {name: b, gpus: [{model: t4, uuid: "
                "GPU-00000000-1111-2222-3333-444444444444}]}\n",
                "nodes[1].gpus",
                CRATER_ECONFLICT);
}
END_TEST

/* Document shape, names, GPUs and NVLink. */
START_TEST(node_field_errors)
{
    const char *msg;

    msg = decode_fail("kind: Node\nname: n\n"
                      "memory: [{capacity: 1Gi, latency: 90ns, "
                      "latency_ns: 90}]\n",
                      "memory[0].latency_ns",
                      CRATER_ECONFLICT);
    ck_assert_str_eq(msg,
                     "hw.yaml:3:41: memory[0].latency_ns: conflicts "
                     "with 'latency' (give one of them)");
    decode_fail("kind: Node\nname: n\n"
                "gpus: [{model: t4, pci_bus_id: \"0000:07:00\"}]\n",
                "gpus[0].pci_bus_id",
                CRATER_EINVAL);
    decode_fail("kind: Node\nname: n\ngpus: [{model: t4, uuid: GPU-1234}]\n",
                "gpus[0].uuid",
                CRATER_EINVAL);
    decode_fail("kind: Node\nname: Web_1\n", "name", CRATER_EINVAL);
    decode_fail("kind: Node\n", "", CRATER_EMISSING);
    decode_fail("name: n\n", "", CRATER_EMISSING);
    decode_fail("- 1\n", "", CRATER_ETYPE);
    decode_fail("kind: Node\nname: n\ngpus:\n"
                "  - {model: a100-sxm4-80gb, nvlink_peers: [0]}\n",
                "gpus[0].nvlink_peers[0]",
                CRATER_EINVAL);
    decode_fail("kind: Node\nname: n\ngpus:\n"
                "  - {model: t4, nvlink_peers: [1]}\n"
                "  - {model: t4, nvlink_peers: [0]}\n",
                "gpus[0].nvlink_peers",
                CRATER_EINVAL);
    decode_fail("kind: Node\nname: n\ngpus:\n"
                "  - {model: t4, nvlink_peers: some}\n",
                "gpus[0].nvlink_peers",
                CRATER_ETYPE);
    decode_fail("kind: Node\nname: n\ngpus:\n"
                "  - {model: t4, pci_bus_id: \"0000:07:00.0\"}\n"
                "  - {model: t4, pci_bus_id: \"0000:07:00.0\"}\n",
                "gpus[1].pci_bus_id",
                CRATER_ECONFLICT);
}
END_TEST

/* CPU, memory, storage, taint and label entries. */
START_TEST(node_resource_errors)
{
    const char *msg;

    decode_fail("kind: Node\nname: n\ncpus: [{model: power10}]\n",
                "cpus[0].model",
                CRATER_EMISSING);
    decode_fail("kind: Node\nname: n\ncpus: [{cores: 8, threads: 4}]\n",
                "cpus[0].threads",
                CRATER_ERANGE);
    decode_fail("kind: Node\nname: n\ncpus: [{cores: 8}, {cores: 8}]\n",
                "cpus[1]",
                CRATER_ECONFLICT);
    msg = decode_fail("kind: Node\nname: n\nmemory:\n"
                      "  - {capacity: 1Gi}\n  - {capacity: 1Gi, numa_node: "
                      "0}\n",
                      "memory[1].numa_node",
                      CRATER_ECONFLICT);
    ck_assert_str_eq(msg,
                     "hw.yaml:5:21: memory[1].numa_node: two memory entries "
                     "on NUMA node 0 (give one entry per NUMA node)");
    decode_fail("kind: Node\nname: n\nstorage:\n"
                "  - {device: sda, capacity: 1TB}\n"
                "  - {device: sda, capacity: 1TB}\n",
                "storage[1].device",
                CRATER_ECONFLICT);
    decode_fail("kind: Node\nname: n\nstorage:\n"
                "  - {device: sda, capacity: 1TB, interface: unknown}\n",
                "storage[0].interface",
                CRATER_EINVAL);
    decode_fail("kind: Node\nname: n\nstorage:\n"
                "  - {device: sda, capacity: 1TB, numa_node: 2}\n"
                "memory: [{capacity: 1Gi}]\n",
                "storage[0].numa_node",
                CRATER_EINVAL);
    decode_fail("kind: Node\nname: n\ntaints: [{key: a, effect: Never}]\n",
                "taints[0].effect",
                CRATER_EINVAL);
    decode_fail("kind: Node\nname: n\nlabels: {zone: 1}\n",
                "labels.zone",
                CRATER_ETYPE);
    decode_fail("kind: Node\nname: n\nsamples: fake\n",
                "samples",
                CRATER_EINVAL);
    decode_fail("kind: Cluster\nnodes: [{name: a, kind: Node}]\n",
                "nodes[0].kind",
                CRATER_EFIELD);
}
END_TEST

START_TEST(storage_latency_rounding)
{
    crater_cluster_t *c = decode_ok("kind: Node\nname: n\nstorage:\n"
                                    "  - {device: a, capacity: 1Ti, "
                                    "latency: 100ns}\n"
                                    "  - {device: b, capacity: 1Ti, "
                                    "latency_us: 45, bandwidth_gbps: 3.5}\n"
                                    "  - {device: c, capacity: 1Ti, "
                                    "latency: 2ms, rotational: true}\n",
                                    kb);
    const crater_storage_t *s = c->nodes[0].storage;

    ck_assert_uint_eq(s[0].latency_us, 1); /* rounded up */
    ck_assert_uint_eq(s[1].latency_us, 45);
    ck_assert_uint_eq(s[1].bandwidth, 3500000000ull);
    ck_assert_uint_eq(s[2].latency_us, 2000);
    ck_assert_int_eq(s[2].rotational, 1);
    ck_assert_int_eq(s[0].iface, CRATER_IFACE_UNKNOWN);
    round_trip(c, 0, kb);
    crater_cluster_destroy(c);
}
END_TEST

struct bad_file {
    const char *file;
    crater_errno_t errnum;
    const char *where; /* "line:col: path" */
    const char *msg;
};

static const struct bad_file bad_files[] = {
    {"unknown-field.yaml",
     CRATER_EFIELD,
     "7:5: gpus[0].sm_cont",
     "unknown field 'sm_cont' (did you mean 'sm_count'?)"},
    {"bad-unit.yaml",
     CRATER_EUNIT,
     "6:5: memory[0].capacity",
     "'512GB/s': 'GB/s' is a bandwidth unit, expected a memory size"},
    {"nvlink-peer-range.yaml",
     CRATER_EINVAL,
     "6:23: gpus[0].nvlink_peers[1]",
     "no GPU 4: the node has 2 GPUs (0-1)"},
    {"duplicate-node.yaml",
     CRATER_ECONFLICT,
     "7:5: nodes[1].name",
     "duplicate node name 'web-1'"},
    {"unknown-model.yaml",
     CRATER_EMISSING,
     "8:9: nodes[1].gpus[0].model",
     "GPU model 'G2' is not in the knowledge base: give its memory"},
    {"wrong-kind.yaml",
     CRATER_EINVAL,
     "2:1: kind",
     "'Pod' is not one of: Node, Cluster"},
    {"numa-missing.yaml",
     CRATER_EINVAL,
     "8:17: gpus[1].numa_node",
     "NUMA node 1 has no cpus or memory entry"},
    {"uuid-with-count.yaml",
     CRATER_ECONFLICT,
     "7:5: gpus[0].uuid",
     "a uuid names one GPU: not allowed with count > 1"},
    {"nvlink-asymmetric.yaml",
     CRATER_EINVAL,
     "5:29: gpus[0].nvlink_peers",
     "GPU 0 lists GPU 1 as an NVLink peer but GPU 1 does not list GPU 0"},
    {"bad-api-version.yaml",
     CRATER_EINVAL,
     "1:1: apiVersion",
     "'crater/v2' is not supported here (expected crater/v1)"},
};

START_TEST(bad_inputs)
{
    const struct bad_file *b = &bad_files[_i];
    char path[1024], want[1200];
    crater_cluster_t *c = NULL;
    crater_error_t err;

    snprintf(path, sizeof(path), "%s%s", BAD, b->file);
    ck_assert_int_eq(crater_hw_load(path, kb, &c, &err), -1);
    ck_assert_ptr_null(c);
    snprintf(want, sizeof(want), "%s:%s: %s", path, b->where, b->msg);
    ck_assert_msg(strncmp(err.text, want, strlen(want)) == 0,
                  "got '%s'\nwant '%s'",
                  err.text,
                  want);
    ck_assert_str_eq(err.field, strchr(b->where, ' ') + 1);
    ck_assert_str_eq(crater_errno_name(err.errnum),
                     crater_errno_name(b->errnum));
}
END_TEST

START_TEST(bad_inputs_all_listed)
{
    DIR *dir = opendir(BAD);
    struct dirent *de;
    size_t n = 0, listed = sizeof(bad_files) / sizeof(bad_files[0]);

    ck_assert_ptr_nonnull(dir);
    while ((de = readdir(dir))) {
        int found = 0;
        if (de->d_name[0] == '.')
            continue;
        for (size_t i = 0; i < listed; i++)
            found |= strcmp(bad_files[i].file, de->d_name) == 0;
        ck_assert_msg(found, "%s has no expected error", de->d_name);
        n++;
    }
    closedir(dir);
    ck_assert_uint_eq(n, listed);
}
END_TEST

/* Write text to a fresh temporary file; caller unlinks and frees. */
static char *temp_file(const char *text)
{
    char *path = strdup("/tmp/crater-hw-XXXXXX.yaml");
    int fd = mkstemps(path, 5);
    FILE *fp;

    ck_assert_int_ge(fd, 0);
    fp = fdopen(fd, "w");
    fputs(text, fp);
    fclose(fp);
    return path;
}

START_TEST(multi_document_files)
{
    char *ok = temp_file("kind: Node\nname: a\n---\n"
                         "kind: Cluster\nnodes: [{name: b, count: 2}]\n");
    char *dup = temp_file("kind: Node\nname: b-1\n---\n"
                          "kind: Cluster\nnodes:\n"
                          "  - {name: b, count: 2}\n");
    char *empty = temp_file("# nothing\n");
    char *null_doc = temp_file("---\n");
    crater_cluster_t *c = NULL;
    crater_error_t err;
    char want[256];

    ck_assert_int_eq(crater_hw_load(ok, kb, &c, &err), 0);
    ck_assert_uint_eq(c->nnodes, 3);
    ck_assert_str_eq(c->nodes[2].name, "b-1");
    crater_cluster_destroy(c);
    c = NULL;
    ck_assert_int_eq(crater_hw_load(dup, kb, &c, &err), -1);
    snprintf(want,
             sizeof(want),
             "%s:6:6: nodes[0].name: duplicate node "
             "name 'b-1'",
             dup);
    ck_assert_str_eq(err.text, want);
    ck_assert_int_eq(crater_hw_load(empty, kb, &c, &err), -1);
    ck_assert_str_eq(crater_errno_name(err.errnum), "EPARSE");
    ck_assert_int_eq(crater_hw_load(null_doc, kb, &c, &err), -1);
    ck_assert_str_eq(crater_errno_name(err.errnum), "ETYPE");
    ck_assert_ptr_nonnull(strstr(err.text, "must be a mapping, got null"));
    ck_assert_int_eq(crater_hw_load("/nonexistent/hw.yaml", kb, &c, &err), -1);
    ck_assert_ptr_null(c);
    unlink(ok);
    unlink(dup);
    unlink(empty);
    unlink(null_doc);
    free(null_doc);
    free(ok);
    free(dup);
    free(empty);
}
END_TEST

START_TEST(encode_node_document)
{
    crater_cluster_t *c = load(EX "cpu-only.yaml"), *back;
    json_t *j = crater_hw_encode_node(&c->nodes[0]);
    crater_doc_t *doc = crater_doc_from_json(j, "mem");
    crater_error_t err;
    crater_dec_t d;

    ck_assert_str_eq(json_string_value(json_object_get(j, "kind")), "Node");
    ck_assert_int_eq(json_integer_value(
                         json_object_get(json_array_get(json_object_get(j,
                                                                        "memor"
                                                                        "y"),
                                                        0),
                                         "capacity")),
                     768 * GIB);
    ck_assert_str_eq(json_string_value(
                         json_object_get(json_array_get(json_object_get(j,
                                                                        "memor"
                                                                        "y"),
                                                        0),
                                         "bandwidth")),
                     "460800000000B/s");
    crater_dec_init(&d, doc, 0, &err);
    ck_assert_int_eq(crater_hw_decode(&d, crater_doc_root(doc, 0), NULL, &back),
                     0);
    cluster_eq(c, back);
    crater_cluster_destroy(back);
    crater_doc_destroy(doc);
    json_decref(j);
    crater_cluster_destroy(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hwfile");
    TCase *tc = tcase_create("hwfile");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, every_example_loads_and_round_trips);
    tcase_add_test(tc, a2_a100_values);
    tcase_add_test(tc, h100x8_topology);
    tcase_add_test(tc, cpu_only_values);
    tcase_add_test(tc, cluster_expansion);
    tcase_add_test(tc, kb_completion_and_defaults);
    tcase_add_test(tc, gpu_count_expansion);
    tcase_add_test(tc, node_count_and_limits);
    tcase_add_test(tc, node_field_errors);
    tcase_add_test(tc, node_resource_errors);
    tcase_add_test(tc, storage_latency_rounding);
    tcase_add_loop_test(tc,
                        bad_inputs,
                        0,
                        sizeof(bad_files) / sizeof(bad_files[0]));
    tcase_add_test(tc, bad_inputs_all_listed);
    tcase_add_test(tc, multi_document_files);
    tcase_add_test(tc, encode_node_document);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
