/* test_kb.c - the hardware knowledge base: lookups by NVML, trace and
 * written names, exact datasheet values, overrides (add, replace, errors
 * that name the path and leave the kb unchanged), the shared decoders and
 * the JSON encoding. Also the model.c helpers. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "crater/dec.h"
#include "crater/doc.h"
#include "crater/kb.h"
#include "crater/model.h"

#define GB 1000000000ull
#define MIB (1024ull * 1024ull)

static crater_kb_t *kb;

static void setup(void)
{
    kb = crater_kb_create();
    ck_assert_ptr_nonnull(kb);
}

static void teardown(void)
{
    crater_kb_destroy(kb);
    kb = NULL;
}

static const char *gkey(const char *name)
{
    const crater_kb_gpu_t *g = crater_kb_gpu(kb, name);
    return g ? g->key : "(none)";
}

static const char *ckey(const char *name)
{
    const crater_kb_cpu_t *c = crater_kb_cpu(kb, name);
    return c ? c->key : "(none)";
}

START_TEST(nvml_names)
{
    ck_assert_str_eq(gkey("NVIDIA A100-SXM4-80GB"), "a100-sxm4-80gb");
    ck_assert_str_eq(gkey("NVIDIA A100-SXM4-40GB"), "a100-sxm4-40gb");
    ck_assert_str_eq(gkey("NVIDIA A100-PCIE-40GB"), "a100-pcie-40gb");
    ck_assert_str_eq(gkey("NVIDIA A100 80GB PCIe"), "a100-pcie-80gb");
    ck_assert_str_eq(gkey("NVIDIA H100 80GB HBM3"), "h100-sxm5-80gb");
    ck_assert_str_eq(gkey("NVIDIA H100 PCIe"), "h100-pcie-80gb");
    ck_assert_str_eq(gkey("NVIDIA H200"), "h200-sxm-141gb");
    ck_assert_str_eq(gkey("Tesla V100-SXM2-32GB"), "v100-sxm2-32gb");
    ck_assert_str_eq(gkey("Tesla V100-SXM2-16GB"), "v100-sxm2-16gb");
    ck_assert_str_eq(gkey("Tesla V100-PCIE-16GB"), "v100-pcie-16gb");
    ck_assert_str_eq(gkey("Tesla V100-PCIE-32GB"), "v100-pcie-32gb");
    ck_assert_str_eq(gkey("Tesla T4"), "t4");
    ck_assert_str_eq(gkey("NVIDIA A10"), "a10");
    ck_assert_str_eq(gkey("NVIDIA L4"), "l4");
    ck_assert_str_eq(gkey("NVIDIA L40S"), "l40s");
    ck_assert_str_eq(gkey("Tesla P100-PCIE-16GB"), "p100-pcie-16gb");
    ck_assert_str_eq(gkey("Tesla P100-SXM2-16GB"), "p100-sxm2-16gb");
    /* CPUs by /proc/cpuinfo model name */
    ck_assert_str_eq(ckey("AMD EPYC 7763 64-Core Processor"), "epyc-7763");
    ck_assert_str_eq(ckey("Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz"),
                     "xeon-gold-6248r");
    ck_assert_str_eq(ckey("Intel(R) Xeon(R) Platinum 8480+"),
                     "xeon-platinum-8480+");
}
END_TEST

START_TEST(openb_and_written_names)
{
    ck_assert_str_eq(gkey("V100M32"), "v100-sxm2-32gb");
    ck_assert_str_eq(gkey("V100M16"), "v100-sxm2-16gb");
    ck_assert_str_eq(gkey("T4"), "t4");
    ck_assert_str_eq(gkey("P100"), "p100-pcie-16gb");
    ck_assert_str_eq(gkey("A10"), "a10");
    /* G2 and G3 are unknown Alibaba-internal models: no invented rows */
    ck_assert_ptr_null(crater_kb_gpu(kb, "G2"));
    ck_assert_ptr_null(crater_kb_gpu(kb, "G3"));
    ck_assert_str_eq(gkey("A100 SXM4 80GB"), "a100-sxm4-80gb");
    ck_assert_str_eq(gkey("a100_sxm4_80gb"), "a100-sxm4-80gb");
    ck_assert_str_eq(gkey("  H100 SXM5 80GB "), "h100-sxm5-80gb");
    ck_assert_str_eq(ckey("EPYC 9654"), "epyc-9654");
    ck_assert_ptr_null(crater_kb_gpu(kb, ""));
    ck_assert_ptr_null(crater_kb_gpu(kb, NULL));
    ck_assert_ptr_null(crater_kb_gpu(NULL, "t4"));
    ck_assert_ptr_null(crater_kb_gpu(kb, "epyc-7763")); /* not a GPU */
    ck_assert_ptr_null(crater_kb_cpu(kb, "t4"));
}
END_TEST

START_TEST(normalize)
{
    char buf[64], tiny[4];

    ck_assert_str_eq(crater_kb_normalize("NVIDIA A100-SXM4-80GB", buf, 64),
                     "a100-sxm4-80gb");
    ck_assert_str_eq(crater_kb_normalize("Tesla V100-SXM2-32GB", buf, 64),
                     "v100-sxm2-32gb");
    ck_assert_str_eq(crater_kb_normalize("NVIDIA Tesla T4", buf, 64), "t4");
    ck_assert_str_eq(crater_kb_normalize("NVIDIA H100 80GB HBM3", buf, 64),
                     "h100-80gb-hbm3");
    ck_assert_str_eq(crater_kb_normalize("  A100 _ SXM4\t80GB  ", buf, 64),
                     "a100-sxm4-80gb");
    ck_assert_str_eq(crater_kb_normalize("nvidiax", buf, 64), "nvidiax");
    ck_assert_str_eq(crater_kb_normalize("", buf, 64), "");
    ck_assert_ptr_null(crater_kb_normalize("a100-sxm4", tiny, sizeof(tiny)));
    ck_assert_str_eq(crater_kb_normalize("a10", tiny, sizeof(tiny)), "a10");
    ck_assert_ptr_null(crater_kb_normalize(NULL, buf, 64));
}
END_TEST

START_TEST(gpu_values)
{
    const crater_kb_gpu_t *g = crater_kb_gpu(kb, "a100-sxm4-80gb");

    ck_assert_ptr_nonnull(g);
    ck_assert_uint_eq(g->memory_bytes, 81920 * MIB);
    ck_assert_uint_eq(g->sm_count, 108);
    ck_assert_uint_eq(g->compute_cap, 80);
    ck_assert_uint_eq(g->mem_bandwidth, 2039 * GB);
    ck_assert_uint_eq(g->nvlink_bandwidth, 600 * GB);
    ck_assert_double_eq(g->fp16_tflops, 312.0);
    ck_assert_str_eq(g->form_factor, "sxm");
    ck_assert_str_eq(g->vendor, "nvidia");

    g = crater_kb_gpu(kb, "h200-sxm-141gb");
    ck_assert_uint_eq(g->memory_bytes, 143771 * MIB);
    ck_assert_uint_eq(g->mem_bandwidth, 4800 * GB);
    ck_assert_uint_eq(g->nvlink_bandwidth, 900 * GB);
    ck_assert_uint_eq(g->compute_cap, 90);
    ck_assert_double_eq(g->fp16_tflops, 989.5);

    g = crater_kb_gpu(kb, "a100-pcie-80gb");
    ck_assert_uint_eq(g->mem_bandwidth, 1935 * GB);
    ck_assert_uint_eq(g->nvlink_bandwidth, 0); /* bridge is optional */
    ck_assert_str_eq(g->form_factor, "pcie");

    g = crater_kb_gpu(kb, "h100-sxm5-80gb");
    ck_assert_uint_eq(g->memory_bytes, 81559 * MIB);
    ck_assert_uint_eq(g->sm_count, 132);
    ck_assert_uint_eq(g->mem_bandwidth, 3350 * GB);

    g = crater_kb_gpu(kb, "t4");
    ck_assert_uint_eq(g->memory_bytes, 15360 * MIB);
    ck_assert_uint_eq(g->compute_cap, 75);
    ck_assert_uint_eq(g->mem_bandwidth, 320 * GB);
    ck_assert_double_eq(g->fp16_tflops, 65.0);

    g = crater_kb_gpu(kb, "v100-sxm2-32gb");
    ck_assert_uint_eq(g->memory_bytes, 32ull << 30);
    ck_assert_uint_eq(g->nvlink_bandwidth, 300 * GB);
    ck_assert_double_eq(g->fp16_tflops, 125.0);
}
END_TEST

START_TEST(cpu_values)
{
    const crater_kb_cpu_t *c = crater_kb_cpu(kb, "epyc-9654");

    ck_assert_uint_eq(c->cores, 96);
    ck_assert_uint_eq(c->memory_bandwidth, 460800000000ull); /* 12x4800x8 */
    ck_assert_str_eq(c->vendor, "amd");
    c = crater_kb_cpu(kb, "xeon-gold-6248r");
    ck_assert_uint_eq(c->cores, 24);
    ck_assert_uint_eq(c->memory_bandwidth, 140784000000ull); /* 6x2933x8 */
    ck_assert_double_eq(c->ipc_baseline, 1.0); /* a Skylake-SP core */
    c = crater_kb_cpu(kb, "xeon-platinum-8480+");
    ck_assert_uint_eq(c->memory_bandwidth, 307200000000ull);
    ck_assert_uint_eq(c->cores, 56);
}
END_TEST

START_TEST(table_complete_and_unambiguous)
{
    static const char *const gpus[] = {"v100-sxm2-16gb",
                                       "v100-sxm2-32gb",
                                       "v100-pcie-16gb",
                                       "v100-pcie-32gb",
                                       "a100-pcie-40gb",
                                       "a100-sxm4-40gb",
                                       "a100-pcie-80gb",
                                       "a100-sxm4-80gb",
                                       "h100-sxm5-80gb",
                                       "h100-pcie-80gb",
                                       "h200-sxm-141gb",
                                       "l40s",
                                       "l4",
                                       "a10",
                                       "t4",
                                       "p100-pcie-16gb",
                                       "p100-sxm2-16gb"};
    static const char *const cpus[] = {"epyc-7502",
                                       "epyc-7763",
                                       "epyc-9654",
                                       "xeon-gold-6248r",
                                       "xeon-platinum-8380",
                                       "xeon-platinum-8480+"};

    for (size_t i = 0; i < sizeof(gpus) / sizeof(*gpus); i++)
        ck_assert_str_eq(gkey(gpus[i]), gpus[i]);
    for (size_t i = 0; i < sizeof(cpus) / sizeof(*cpus); i++)
        ck_assert_str_eq(ckey(cpus[i]), cpus[i]);
    /* every alias of every entry leads back to that entry */
    for (size_t i = 0; i < crater_kb_gpu_count(kb); i++) {
        const crater_kb_gpu_t *g = crater_kb_gpu_at(kb, i);
        char *copy = strdup(g->aliases), *save = NULL;
        ck_assert_ptr_eq(crater_kb_gpu(kb, g->key), g);
        ck_assert(g->memory_bytes && g->sm_count && g->compute_cap);
        ck_assert(g->mem_bandwidth && g->fp16_tflops > 0);
        for (char *a = strtok_r(copy, "|", &save); a;
             a = strtok_r(NULL, "|", &save))
            ck_assert_ptr_eq(crater_kb_gpu(kb, a), g);
        free(copy);
    }
    for (size_t i = 0; i < crater_kb_cpu_count(kb); i++) {
        const crater_kb_cpu_t *c = crater_kb_cpu_at(kb, i);
        ck_assert_ptr_eq(crater_kb_cpu(kb, c->key), c);
        ck_assert(c->cores && c->memory_bandwidth && c->ipc_baseline > 0);
    }
    ck_assert_ptr_null(crater_kb_gpu_at(kb, crater_kb_gpu_count(kb)));
    ck_assert_ptr_null(crater_kb_cpu_at(kb, crater_kb_cpu_count(kb)));
}
END_TEST

/* Parse a config snippet and apply its hardware_knowledge_base.override. */
static int apply(const char *yaml, crater_error_t *err)
{
    crater_doc_t *doc = NULL;
    crater_dec_t d;
    json_t *hkb;
    int rc;

    ck_assert_int_eq(crater_doc_parse(yaml,
                                      strlen(yaml),
                                      "crater.yaml",
                                      &doc,
                                      err),
                     0);
    hkb = json_object_get(crater_doc_root(doc, 0), "hardware_knowledge_base");
    crater_dec_init(&d, doc, 0, err);
    crater_dec_push_key(&d, "hardware_knowledge_base");
    crater_dec_push_key(&d, "override");
    rc = crater_kb_override(kb, &d, json_object_get(hkb, "override"));
    crater_doc_destroy(doc);
    return rc;
}

START_TEST(override_replace_and_add)
{
    crater_error_t err;
    const crater_kb_cpu_t *c;
    const crater_kb_gpu_t *g;
    size_t n = crater_kb_gpu_count(kb);

    ck_assert_int_eq(apply("hardware_knowledge_base:\n"
                           "  override:\n"
                           "    - type: cpu\n"
                           "      vendor: amd\n"
                           "      model: epyc-9654\n"
                           "      ipc_baseline: 1.82\n"
                           "      memory_bandwidth_gbps: 420\n"
                           "    - type: gpu\n"
                           "      vendor: amd\n"
                           "      model: mi300x\n"
                           "      memory: 192Gi\n"
                           "      sm_count: 304\n"
                           "      compute_capability: 9.4\n"
                           "      memory_bandwidth: 5.3TB/s\n"
                           "      fp16_tflops: 1307.4\n"
                           "      form_factor: oam\n"
                           "      aliases: [AMD Instinct MI300X]\n"
                           "    - type: gpu\n"
                           "      vendor: nvidia\n"
                           "      model: NVIDIA H100 80GB HBM3\n"
                           "      memory_bandwidth: 3.3TB/s\n"
                           "      nvlink_bandwidth_gbps: 450.5\n"
                           "      aliases: hgx-h100\n",
                           &err),
                     0);
    c = crater_kb_cpu(kb, "epyc-9654");
    ck_assert_double_eq(c->ipc_baseline, 1.82);
    ck_assert_uint_eq(c->memory_bandwidth, 420 * GB);
    ck_assert_uint_eq(c->cores, 96); /* not named: kept */
    g = crater_kb_gpu(kb, "AMD Instinct MI300X");
    ck_assert_ptr_nonnull(g);
    ck_assert_str_eq(g->key, "mi300x");
    ck_assert_str_eq(g->vendor, "amd");
    ck_assert_str_eq(g->form_factor, "oam");
    ck_assert_uint_eq(g->memory_bytes, 192ull << 30);
    ck_assert_uint_eq(g->compute_cap, 94);
    ck_assert_uint_eq(g->mem_bandwidth, 5300 * GB);
    ck_assert_uint_eq(g->nvlink_bandwidth, 0);
    ck_assert_uint_eq(crater_kb_gpu_count(kb), n + 1);
    g = crater_kb_gpu(kb, "hgx-h100");
    ck_assert_str_eq(g->key, "h100-sxm5-80gb");
    ck_assert_uint_eq(g->mem_bandwidth, 3300 * GB);
    ck_assert_uint_eq(g->nvlink_bandwidth, 450500000000ull);
    ck_assert_uint_eq(g->sm_count, 132);
    ck_assert_ptr_eq(crater_kb_gpu(kb, "NVIDIA H100 80GB HBM3"), g);
    ck_assert_int_eq(apply("x: 1\n", &err), 0); /* no override: no-op */
    ck_assert_uint_eq(crater_kb_gpu_count(kb), n + 1);
}
END_TEST

struct bad_override {
    const char *entry; /* YAML of override[0..] after "  override:\n" */
    crater_errno_t errnum;
    const char *where; /* "line:col: path" */
    const char *msg;   /* substring of the message */
};

static const struct bad_override bad_overrides[] = {
    {"    - {type: cpu, vendor: amd, model: epyc-9654, ipc_baseline: 2}\n"
     "    - type: gpu\n"
     "      vendor: nvidia\n"
     "      model: t4\n"
     "      memory_bandwith: 300GB/s\n",
     CRATER_EFIELD,
     "7:7: hardware_knowledge_base.override[1].memory_bandwith",
     "did you mean 'memory_bandwidth'?"},
    {"    - {type: cpu, vendor: amd, model: epyc-9654, "
     "memory_bandwidth: 420GB}\n",
     CRATER_EUNIT,
     "3:50: hardware_knowledge_base.override[0].memory_bandwidth",
     "'GB' is a memory size unit"},
    {"    - {vendor: amd, model: epyc-9654, ipc_baseline: 2}\n",
     CRATER_EMISSING,
     "3:7: hardware_knowledge_base.override[0]",
     "missing required field 'type'"},
    {"    - {type: tpu, vendor: google, model: v5e}\n",
     CRATER_EINVAL,
     "3:8: hardware_knowledge_base.override[0].type",
     "not one of: gpu, cpu"},
    {"    - {type: cpu, vendor: amd, model: epyc-9654,\n"
     "       memory_bandwidth: 420GB/s, memory_bandwidth_gbps: 420}\n",
     CRATER_ECONFLICT,
     "4:35: hardware_knowledge_base.override[0].memory_bandwidth_gbps",
     "conflicts with 'memory_bandwidth'"},
    {"    - {type: cpu, vendor: amd, model: epyc-9654,\n"
     "       memory_bandwidth_gbps: \"420\"}\n",
     CRATER_ETYPE,
     "4:8: hardware_knowledge_base.override[0].memory_bandwidth_gbps",
     "expected a number of GB/s"},
    {"    - {type: gpu, vendor: acme, model: x1, sm_count: 10}\n",
     CRATER_EMISSING,
     "3:7: hardware_knowledge_base.override[0]",
     "a new entry needs 'memory'"},
    {"    - {type: cpu, vendor: acme, model: c1, cores: 8}\n",
     CRATER_EMISSING,
     "3:7: hardware_knowledge_base.override[0]",
     "a new entry needs 'ipc_baseline'"},
    {"    - {type: gpu, vendor: nvidia, model: t4, aliases: [NVIDIA L4]}\n",
     CRATER_ECONFLICT,
     "3:56: hardware_knowledge_base.override[0].aliases[0]",
     "alias 'NVIDIA L4' already names 'l4'"},
    {"    - {type: gpu, vendor: nvidia, model: t4, compute_capability: 7}\n",
     CRATER_EINVAL,
     "3:46: hardware_knowledge_base.override[0].compute_capability",
     "write it as 8.0"},
    {"    - {type: gpu, model: t4, memory: 16Gi}\n",
     CRATER_EMISSING,
     "3:7: hardware_knowledge_base.override[0]",
     "missing required field 'vendor'"},
    {"    - {type: cpu, vendor: amd, model: epyc-9654, sm_count: 4}\n",
     CRATER_EFIELD,
     "3:50: hardware_knowledge_base.override[0].sm_count",
     "unknown field 'sm_count'"},
    {"    - {type: cpu, vendor: amd, model: epyc-9654, ipc_baseline: 0}\n",
     CRATER_ERANGE,
     "3:50: hardware_knowledge_base.override[0].ipc_baseline",
     "above 0"},
};

START_TEST(override_errors)
{
    const struct bad_override *b = &bad_overrides[_i];
    char yaml[1024], want[256];
    crater_error_t err;
    json_t *before = crater_kb_encode(kb), *after;

    snprintf(yaml,
             sizeof(yaml),
             "hardware_knowledge_base:\n  override:\n%s",
             b->entry);
    ck_assert_int_eq(apply(yaml, &err), -1);
    snprintf(want, sizeof(want), "crater.yaml:%s: ", b->where);
    ck_assert_msg(strncmp(err.text, want, strlen(want)) == 0,
                  "got '%s', want prefix '%s'",
                  err.text,
                  want);
    ck_assert_msg(strstr(err.text, b->msg),
                  "'%s' lacks '%s'",
                  err.text,
                  b->msg);
    ck_assert_str_eq(crater_errno_name(err.errnum),
                     crater_errno_name(b->errnum));
    ck_assert_str_eq(err.field, strchr(b->where, ' ') + 1);
    after = crater_kb_encode(kb);
    ck_assert_msg(json_equal(before, after), "kb changed by a failed override");
    json_decref(before);
    json_decref(after);
}
END_TEST

START_TEST(override_not_a_list)
{
    crater_error_t err;

    ck_assert_int_eq(apply("hardware_knowledge_base:\n  override: {a: 1}\n",
                           &err),
                     -1);
    ck_assert_str_eq(err.field, "hardware_knowledge_base.override");
    ck_assert_str_eq(crater_errno_name(err.errnum), "ETYPE");
}
END_TEST

/* Decode v (YAML "v: <text>") with a shared decoder. */
static int cc_of(const char *text, uint32_t *out, crater_error_t *err)
{
    char yaml[64];
    crater_doc_t *doc = NULL;
    crater_dec_t d;
    int rc;

    snprintf(yaml, sizeof(yaml), "v: %s\n", text);
    ck_assert_int_eq(crater_doc_parse(yaml, strlen(yaml), "t", &doc, err), 0);
    crater_dec_init(&d, doc, 0, err);
    crater_dec_push_key(&d, "v");
    rc =
        crater_kb_dec_compute_cap(&d,
                                  json_object_get(crater_doc_root(doc, 0), "v"),
                                  out);
    crater_doc_destroy(doc);
    return rc;
}

START_TEST(compute_capability_forms)
{
    static const char *const good[] = {"8.0",
                                       "\"8.0\"",
                                       "sm_80",
                                       "80",
                                       "\"80\""};
    static const char *const bad[] =
        {"8", "sm_8", "8.10", "x", "-8.0", "[8]", "1000", "0.5"};
    crater_error_t err;
    uint32_t cc;

    for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
        cc = 0;
        ck_assert_msg(cc_of(good[i], &cc, &err) == 0,
                      "%s: %s",
                      good[i],
                      err.text);
        ck_assert_uint_eq(cc, 80);
    }
    ck_assert_int_eq(cc_of("8.6", &cc, &err), 0);
    ck_assert_uint_eq(cc, 86);
    ck_assert_int_eq(cc_of("sm_120", &cc, &err), 0);
    ck_assert_uint_eq(cc, 120);
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        ck_assert_msg(cc_of(bad[i], &cc, &err) == -1, "%s accepted", bad[i]);
        ck_assert_str_eq(err.field, "v");
    }
}
END_TEST

START_TEST(compute_capability_json_real)
{
    crater_error_t err;
    crater_dec_t d;
    json_t *x = json_real(8.6), *y = json_real(8.65);
    uint32_t cc = 0;

    crater_dec_init(&d, NULL, 0, &err); /* JSON values carry no literal */
    ck_assert_int_eq(crater_kb_dec_compute_cap(&d, x, &cc), 0);
    ck_assert_uint_eq(cc, 86);
    ck_assert_int_eq(crater_kb_dec_compute_cap(&d, y, &cc), -1);
    json_decref(x);
    json_decref(y);
}
END_TEST

START_TEST(gbps_exact)
{
    const char *yaml = "a: 204.8\nb: 2039\nc: 2039GB/s\nd: -1\n";
    crater_doc_t *doc = NULL;
    crater_error_t err;
    crater_dec_t d;
    uint64_t v;
    json_t *r;

    ck_assert_int_eq(crater_doc_parse(yaml, strlen(yaml), "t", &doc, &err), 0);
    r = crater_doc_root(doc, 0);
    crater_dec_init(&d, doc, 0, &err);
    crater_dec_push_key(&d, "a");
    ck_assert_int_eq(crater_kb_dec_gbps(&d, json_object_get(r, "a"), &v), 0);
    ck_assert_uint_eq(v, 204800000000ull);
    crater_dec_pop(&d, 0);
    crater_dec_push_key(&d, "b");
    ck_assert_int_eq(crater_kb_dec_gbps(&d, json_object_get(r, "b"), &v), 0);
    ck_assert_uint_eq(v, 2039 * GB);
    crater_dec_pop(&d, 0);
    crater_dec_push_key(&d, "c");
    ck_assert_int_eq(crater_kb_dec_gbps(&d, json_object_get(r, "c"), &v), -1);
    ck_assert_str_eq(crater_errno_name(err.errnum), "ETYPE");
    crater_dec_pop(&d, 0);
    crater_dec_push_key(&d, "d");
    ck_assert_int_eq(crater_kb_dec_gbps(&d, json_object_get(r, "d"), &v), -1);
    ck_assert_str_eq(err.field, "d");
    crater_doc_destroy(doc);
}
END_TEST

START_TEST(encode)
{
    json_t *j = crater_kb_encode(kb), *g = NULL, *el;
    size_t i;

    ck_assert_ptr_nonnull(j);
    ck_assert_uint_eq(json_array_size(json_object_get(j, "gpus")),
                      crater_kb_gpu_count(kb));
    ck_assert_uint_eq(json_array_size(json_object_get(j, "cpus")),
                      crater_kb_cpu_count(kb));
    json_array_foreach(json_object_get(j, "gpus"), i, el)
    {
        if (!strcmp(json_string_value(json_object_get(el, "model")),
                    "a100-sxm4-80gb"))
            g = el;
    }
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(json_integer_value(json_object_get(g, "memory")),
                     85899345920);
    ck_assert_int_eq(json_integer_value(json_object_get(g, "memory_bandwidth")),
                     2039000000000);
    ck_assert_int_eq(json_integer_value(
                         json_object_get(g, "compute_capability")),
                     80);
    ck_assert_str_eq(json_string_value(
                         json_array_get(json_object_get(g, "aliases"), 0)),
                     "NVIDIA A100-SXM4-80GB");
    ck_assert_str_eq(json_string_value(json_object_get(g, "form_factor")),
                     "sxm");
    json_decref(j);
}
END_TEST

START_TEST(model_helpers)
{
    crater_cpu_t cpus[2] = {{.cores = 32, .threads = 64}, {.cores = 8}};
    crater_mem_t mems[2] = {{.capacity = 1ull << 30}, {.capacity = 512}};
    crater_node_t n = {.cpus = cpus, .ncpus = 2, .mems = mems, .nmems = 2};
    crater_node_t *heap = calloc(1, sizeof(*heap));

    ck_assert_uint_eq(crater_node_cpu_milli(&n), 72000);
    ck_assert_uint_eq(crater_node_memory_bytes(&n), (1ull << 30) + 512);
    ck_assert_uint_eq(crater_node_cpu_milli(NULL), 0);
    ck_assert_str_eq(crater_iface_name(CRATER_IFACE_NVME), "nvme");
    ck_assert_str_eq(crater_iface_name(CRATER_IFACE_NETWORK), "network");
    ck_assert_str_eq(crater_iface_name((crater_iface_t)99), "unknown");
    ck_assert_int_eq(crater_iface_parse("sata"), CRATER_IFACE_SATA);
    ck_assert_int_eq(crater_iface_parse("virtio"), CRATER_IFACE_VIRTIO);
    ck_assert_int_eq(crater_iface_parse("NVME"), -1);
    ck_assert_int_eq(crater_iface_parse(NULL), -1);
    heap->name = strdup("n");
    heap->datasets = calloc(2, sizeof(char *));
    heap->datasets[0] = strdup("imagenet");
    crater_node_clear(heap);
    ck_assert_ptr_null(heap->name);
    ck_assert_ptr_null(heap->datasets);
    free(heap);
    crater_node_clear(NULL);
    crater_cluster_destroy(NULL);
    crater_kb_destroy(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kb");
    TCase *tc = tcase_create("kb");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, nvml_names);
    tcase_add_test(tc, openb_and_written_names);
    tcase_add_test(tc, normalize);
    tcase_add_test(tc, gpu_values);
    tcase_add_test(tc, cpu_values);
    tcase_add_test(tc, table_complete_and_unambiguous);
    tcase_add_test(tc, override_replace_and_add);
    tcase_add_loop_test(tc,
                        override_errors,
                        0,
                        sizeof(bad_overrides) / sizeof(bad_overrides[0]));
    tcase_add_test(tc, override_not_a_list);
    tcase_add_test(tc, compute_capability_forms);
    tcase_add_test(tc, compute_capability_json_real);
    tcase_add_test(tc, gbps_exact);
    tcase_add_test(tc, encode);
    tcase_add_test(tc, model_helpers);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
