/* kb.c - the hardware knowledge base (see kb.h and doc/hardware.md).
 *
 * A small table (a few dozen models) that maps model names to datasheet
 * capabilities. It is read at node registration, hardware-file loading
 * and job validation, never on the per-decision hot path, so lookups are
 * a linear scan that normalises names on the fly; that keeps aliases in
 * the form users and NVML write them, which `crater kb` prints.
 *
 * Values come from the vendor documents cited next to each row. Memory
 * is what NVML reports as the device total where that is known (it is
 * what a scheduler can hand out), otherwise the datasheet size taken as
 * GiB. FP16 is the dense tensor figure; where a datasheet lists only the
 * 2:4-sparsity figure, the dense one is half of it. PCIe cards whose
 * NVLink bridge is optional (A100 PCIe, H100 PCIe) carry nvlink 0: a
 * bridge is a property of a node, so a hardware file sets
 * nvlink_bandwidth on the GPUs that have one.
 *
 * Overrides decode into a scratch copy that replaces the table only when
 * every entry decoded, so a bad config never leaves a half-applied kb.
 */
#include "crater/kb.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define KB_NAME_MAX 128 /* longest model name or alias we compare */
#define KB_MAX_OVERRIDES 1024
#define KB_MAX_ALIASES 32
#define GB 1000000000ull /* bandwidths are decimal GB/s on datasheets */
#define MIB (1024ull * 1024ull)

struct crater_kb {
    crater_kb_gpu_t *gpus;
    size_t ngpus;
    crater_kb_cpu_t *cpus;
    size_t ncpus;
};

/* One built-in GPU: memory in MiB, bandwidths in MB/s (exact integers). */
struct gpu_row {
    const char *key, *aliases;
    uint64_t mem_mib;
    uint32_t sm, cc;
    uint64_t bw_mbs, nvlink_mbs;
    double fp16;
    const char *form;
};

/* NVML totals: "NVML" below means the device total NVML reports
 * (nvidia-smi's Memory-Usage total): H200 143771 MiB measured on our GPU
 * machine (shared/MACHINES.md); H100 SXM 81559, A100 80GB 81920, A100
 * 40GB 40960, A10 23028, L40S 46068, L4 23034, T4 15360 MiB as tabulated
 * from nvidia-smi in "Why does an NVIDIA H100 80GB card offer 85.52 GB?"
 * (Modal, thundergolfer.com/blog/nvidia-gpu-memory-capacity); V100 SXM2
 * 16GB 16160 MiB from nvidia-smi output in 4paradigm/k8s-vgpu-scheduler
 * issue 7 (driver 440.64). */
static const struct gpu_row gpu_rows[] = {
    /* NVIDIA Tesla V100 GPU Accelerator datasheet (2018): SXM2 900 GB/s,
     * NVLink 300 GB/s, 125 tensor TFLOPS; PCIe 900 GB/s, 112 TFLOPS.
     * NVIDIA Tesla V100 GPU Architecture whitepaper (GV100, 2017): 80 SMs,
     * compute capability 7.0. Memory: NVML (16GB SXM2), else 16/32 GiB. */
    {"v100-sxm2-16gb",
     "Tesla V100-SXM2-16GB|V100M16",
     16160,
     80,
     70,
     900000,
     300000,
     125.0,
     "sxm"},
    {"v100-sxm2-32gb",
     "Tesla V100-SXM2-32GB|V100M32",
     32768,
     80,
     70,
     900000,
     300000,
     125.0,
     "sxm"},
    {"v100-pcie-16gb",
     "Tesla V100-PCIE-16GB",
     16384,
     80,
     70,
     900000,
     0,
     112.0,
     "pcie"},
    {"v100-pcie-32gb",
     "Tesla V100-PCIE-32GB",
     32768,
     80,
     70,
     900000,
     0,
     112.0,
     "pcie"},
    /* NVIDIA Tesla P100 datasheet (2016): 732 GB/s; FP16 21.2 TFLOPS (SXM2,
     * NVLink 160 GB/s), 18.7 TFLOPS (PCIe). Pascal has no tensor cores:
     * fp16 is the plain half-precision peak. NVIDIA Tesla P100 whitepaper
     * (GP100, 2016): 56 SMs, compute capability 6.0. "P100" is the
     * Alibaba openb trace name; Alibaba's P100 instances are PCIe cards. */
    {"p100-pcie-16gb",
     "Tesla P100-PCIE-16GB|P100",
     16384,
     56,
     60,
     732000,
     0,
     18.7,
     "pcie"},
    {"p100-sxm2-16gb",
     "Tesla P100-SXM2-16GB",
     16384,
     56,
     60,
     732000,
     160000,
     21.2,
     "sxm"},
    /* NVIDIA T4 Tensor Core GPU datasheet (2019): 320+ GB/s, 65 TFLOPS
     * FP16 mixed precision. NVIDIA Turing GPU Architecture whitepaper
     * (2018): T4 has 40 SMs (2560 CUDA cores), compute capability 7.5.
     * Memory: NVML. */
    {"t4", "Tesla T4", 15360, 40, 75, 320000, 0, 65.0, "pcie"},
    /* NVIDIA A10 Tensor Core GPU datasheet (2021): 600 GB/s, FP16 tensor
     * 125 TFLOPS (250 with sparsity); NVIDIA Ampere GA102 GPU Architecture
     * whitepaper: A10 has 72 SMs (9216 CUDA cores), compute capability
     * 8.6. Memory: NVML. */
    {"a10", "NVIDIA A10", 23028, 72, 86, 600000, 0, 125.0, "pcie"},
    /* NVIDIA L4 Tensor Core GPU datasheet (2023): 300 GB/s, FP16 tensor
     * 242 TFLOPS with sparsity (121 dense), 7424 CUDA cores = 58 SMs of
     * 128 (NVIDIA Ada GPU Architecture whitepaper), compute capability
     * 8.9. Memory: NVML. */
    {"l4", "NVIDIA L4", 23034, 58, 89, 300000, 0, 121.0, "pcie"},
    /* NVIDIA L40S datasheet (2023): 864 GB/s, FP16 tensor 362.05 TFLOPS
     * (733 with sparsity), 18176 CUDA cores = 142 SMs of 128 (Ada
     * whitepaper), compute capability 8.9. Memory: NVML. */
    {"l40s", "NVIDIA L40S", 46068, 142, 89, 864000, 0, 362.05, "pcie"},
    /* NVIDIA A100 Tensor Core GPU datasheet (2021): 40GB 1555 GB/s; 80GB
     * PCIe 1935 GB/s, SXM 2039 GB/s; FP16 tensor 312 TFLOPS (624 sparse);
     * SXM NVLink 600 GB/s, PCIe only through an optional 2-GPU bridge.
     * NVIDIA A100 Tensor Core GPU Architecture whitepaper (GA100, 2020):
     * 108 SMs, compute capability 8.0. Memory: NVML. */
    {"a100-pcie-40gb",
     "NVIDIA A100-PCIE-40GB",
     40960,
     108,
     80,
     1555000,
     0,
     312.0,
     "pcie"},
    {"a100-sxm4-40gb",
     "NVIDIA A100-SXM4-40GB",
     40960,
     108,
     80,
     1555000,
     600000,
     312.0,
     "sxm"},
    {"a100-pcie-80gb",
     "NVIDIA A100 80GB PCIe",
     81920,
     108,
     80,
     1935000,
     0,
     312.0,
     "pcie"},
    {"a100-sxm4-80gb",
     "NVIDIA A100-SXM4-80GB|NVIDIA A100-SXM-80GB",
     81920,
     108,
     80,
     2039000,
     600000,
     312.0,
     "sxm"},
    /* NVIDIA H100 Tensor Core GPU datasheet (2023): SXM 3.35 TB/s, NVLink
     * 900 GB/s, FP16 tensor 1979 TFLOPS with sparsity (989.5 dense); PCIe
     * 2 TB/s, 1513 sparse (756.5 dense), NVLink only through an optional
     * bridge. NVIDIA H100 Tensor Core GPU Architecture whitepaper (GH100,
     * 2022): SXM5 132 SMs, PCIe 114 SMs, compute capability 9.0.
     * Memory: NVML (SXM), datasheet 80 GiB (PCIe). */
    {"h100-sxm5-80gb",
     "NVIDIA H100 80GB HBM3|H100 SXM5 80GB",
     81559,
     132,
     90,
     3350000,
     900000,
     989.5,
     "sxm"},
    {"h100-pcie-80gb",
     "NVIDIA H100 PCIe",
     81920,
     114,
     90,
     2000000,
     0,
     756.5,
     "pcie"},
    /* NVIDIA H200 Tensor Core GPU datasheet (2024): SXM 141 GB HBM3e at
     * 4.8 TB/s, NVLink 900 GB/s, FP16 tensor 1979 TFLOPS with sparsity
     * (989.5 dense). The datasheet lists no SM count; H200 is the GH100 of
     * the H100 SXM5 (132 SMs, compute capability 9.0, H100 whitepaper).
     * Memory: NVML, measured on our H200. */
    {"h200-sxm-141gb",
     "NVIDIA H200|H200 SXM 141GB",
     143771,
     132,
     90,
     4800000,
     900000,
     989.5,
     "sxm"},
};

/* One built-in CPU: per-socket memory bandwidth in MB/s (exact). */
struct cpu_row {
    const char *key, *vendor, *aliases;
    uint32_t cores;
    double ipc;
    uint64_t bw_mbs;
};

/* ipc_baseline is NOT a datasheet value. It is an estimate of per-clock
 * throughput relative to a Skylake-SP core (1.00), made by chaining the
 * vendors' own generational IPC claims, which were measured on their
 * chosen (mostly client) workloads:
 *   Cascade Lake = Skylake-SP core (same microarchitecture)   1.00
 *   Ice Lake-SP (Sunny Cove): Intel claims ~18% over Skylake   1.18
 *   Sapphire Rapids (Golden Cove): +19% over Sunny Cove class  1.40
 *   Zen 2: assumed ~5% above Skylake per clock (our estimate)  1.05
 *   Zen 3: AMD claims +19% over Zen 2                          1.25
 *   Zen 4: AMD claims +13% over Zen 3                          1.41
 * Override it with measured values (hardware_knowledge_base.override).
 * Memory bandwidth is channels x MT/s x 8 bytes per socket from the
 * vendor spec pages cited per row. */
static const struct cpu_row cpu_rows[] = {
    /* AMD EPYC 7502 product page (amd.com): 32 cores, 8 channels DDR4-3200,
     * per-socket memory bandwidth 204.8 GB/s. Zen 2. */
    {"epyc-7502",
     "amd",
     "AMD EPYC 7502 32-Core Processor|amd-epyc-7502",
     32,
     1.05,
     204800},
    /* AMD EPYC 7742 product page: 64 cores, 8 channels DDR4-3200, 204.8
     * GB/s. Zen 2. */
    {"epyc-7742",
     "amd",
     "AMD EPYC 7742 64-Core Processor|amd-epyc-7742",
     64,
     1.05,
     204800},
    /* AMD EPYC 7763 product page: 64 cores, 8 channels DDR4-3200, 204.8
     * GB/s. Zen 3. */
    {"epyc-7763",
     "amd",
     "AMD EPYC 7763 64-Core Processor|amd-epyc-7763",
     64,
     1.25,
     204800},
    /* AMD EPYC 9654 product page: 96 cores, 12 channels DDR5-4800, 460.8
     * GB/s. Zen 4. */
    {"epyc-9654",
     "amd",
     "AMD EPYC 9654 96-Core Processor|amd-epyc-9654",
     96,
     1.41,
     460800},
    /* Intel ARK, Xeon Gold 6248R: 24 cores, 6 channels DDR4-2933:
     * 6 x 2933 x 8 = 140.784 GB/s. Cascade Lake. */
    {"xeon-gold-6248r",
     "intel",
     "Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz|intel-xeon-gold-6248r",
     24,
     1.00,
     140784},
    /* Intel ARK, Xeon Platinum 8380: 40 cores, 8 channels DDR4-3200:
     * 204.8 GB/s. Ice Lake-SP. */
    {"xeon-platinum-8380",
     "intel",
     "Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz|intel-xeon-platinum-8380",
     40,
     1.18,
     204800},
    /* Intel ARK, Xeon Platinum 8480+: 56 cores, 8 channels DDR5-4800:
     * 307.2 GB/s. Sapphire Rapids. */
    {"xeon-platinum-8480+",
     "intel",
     "Intel(R) Xeon(R) Platinum 8480+|intel-xeon-platinum-8480+",
     56,
     1.40,
     307200},
};

#define NGPU_ROWS (sizeof(gpu_rows) / sizeof(gpu_rows[0]))
#define NCPU_ROWS (sizeof(cpu_rows) / sizeof(cpu_rows[0]))

/* ---- names ---- */

static const char *skip_prefixes(const char *p)
{
    static const char *const prefixes[] = {"nvidia ", "tesla "};
    int again = 1;

    while (again) {
        again = 0;
        for (size_t i = 0; i < 2; i++) {
            size_t n = strlen(prefixes[i]);
            if (strncasecmp(p, prefixes[i], n) == 0) {
                p += n;
                while (*p == ' ')
                    p++;
                again = 1;
            }
        }
    }
    return p;
}

char *crater_kb_normalize(const char *name, char *buf, size_t size)
{
    const char *p, *end;
    size_t len = 0;

    if (!name || !size)
        return NULL;
    for (p = name; isspace((unsigned char)*p); p++)
        ;
    p = skip_prefixes(p);
    for (end = p + strlen(p); end > p && isspace((unsigned char)end[-1]);)
        end--;
    for (; p < end; p++) {
        int sep = *p == ' ' || *p == '_' || *p == '\t';
        if (sep && len && buf[len - 1] == '-')
            continue;
        if (len + 1 >= size)
            return NULL;
        buf[len++] = sep ? '-' : (char)tolower((unsigned char)*p);
    }
    buf[len] = '\0';
    return buf;
}

/* Does normalised name match key or any '|'-separated alias? */
static int names_match(const char *norm, const char *key, const char *aliases)
{
    char one[KB_NAME_MAX], nbuf[KB_NAME_MAX];
    const char *p = aliases;

    if (key && strcmp(norm, key) == 0)
        return 1;
    while (p && *p) {
        size_t n = strcspn(p, "|");
        if (n < sizeof(one)) {
            memcpy(one, p, n);
            one[n] = '\0';
            if (crater_kb_normalize(one, nbuf, sizeof(nbuf))
                && strcmp(nbuf, norm) == 0)
                return 1;
        }
        p += n + (p[n] == '|');
    }
    return 0;
}

static long find_gpu(const crater_kb_t *kb, const char *norm)
{
    for (size_t i = 0; i < kb->ngpus; i++)
        if (names_match(norm, kb->gpus[i].key, kb->gpus[i].aliases))
            return (long)i;
    return -1;
}

static long find_cpu(const crater_kb_t *kb, const char *norm)
{
    for (size_t i = 0; i < kb->ncpus; i++)
        if (names_match(norm, kb->cpus[i].key, kb->cpus[i].aliases))
            return (long)i;
    return -1;
}

const crater_kb_gpu_t *crater_kb_gpu(const crater_kb_t *kb, const char *name)
{
    char norm[KB_NAME_MAX];
    long i;

    if (!kb || !crater_kb_normalize(name, norm, sizeof(norm)) || !*norm)
        return NULL;
    i = find_gpu(kb, norm);
    return i < 0 ? NULL : &kb->gpus[i];
}

const crater_kb_cpu_t *crater_kb_cpu(const crater_kb_t *kb, const char *name)
{
    char norm[KB_NAME_MAX];
    long i;

    if (!kb || !crater_kb_normalize(name, norm, sizeof(norm)) || !*norm)
        return NULL;
    i = find_cpu(kb, norm);
    return i < 0 ? NULL : &kb->cpus[i];
}

size_t crater_kb_gpu_count(const crater_kb_t *kb)
{
    return kb ? kb->ngpus : 0;
}

const crater_kb_gpu_t *crater_kb_gpu_at(const crater_kb_t *kb, size_t i)
{
    return kb && i < kb->ngpus ? &kb->gpus[i] : NULL;
}

size_t crater_kb_cpu_count(const crater_kb_t *kb)
{
    return kb ? kb->ncpus : 0;
}

const crater_kb_cpu_t *crater_kb_cpu_at(const crater_kb_t *kb, size_t i)
{
    return kb && i < kb->ncpus ? &kb->cpus[i] : NULL;
}

/* ---- life cycle ---- */

static void gpu_entry_free(crater_kb_gpu_t *g)
{
    free(g->key);
    free(g->vendor);
    free(g->aliases);
    free(g->form_factor);
}

static void cpu_entry_free(crater_kb_cpu_t *c)
{
    free(c->key);
    free(c->vendor);
    free(c->aliases);
}

static void kb_clear(crater_kb_t *kb)
{
    for (size_t i = 0; i < kb->ngpus; i++)
        gpu_entry_free(&kb->gpus[i]);
    for (size_t i = 0; i < kb->ncpus; i++)
        cpu_entry_free(&kb->cpus[i]);
    free(kb->gpus);
    free(kb->cpus);
    memset(kb, 0, sizeof(*kb));
}

void crater_kb_destroy(crater_kb_t *kb)
{
    if (!kb)
        return;
    kb_clear(kb);
    free(kb);
}

/* strdup that maps NULL to NULL; *ok cleared on allocation failure. */
static char *dup_or_null(const char *s, int *ok)
{
    char *c;

    if (!s)
        return NULL;
    if (!(c = strdup(s)))
        *ok = 0;
    return c;
}

static int gpu_entry_copy(crater_kb_gpu_t *dst, const crater_kb_gpu_t *src)
{
    int ok = 1;

    *dst = *src;
    dst->key = dup_or_null(src->key, &ok);
    dst->vendor = dup_or_null(src->vendor, &ok);
    dst->aliases = dup_or_null(src->aliases, &ok);
    dst->form_factor = dup_or_null(src->form_factor, &ok);
    if (!ok)
        gpu_entry_free(dst);
    return ok ? 0 : -1;
}

static int cpu_entry_copy(crater_kb_cpu_t *dst, const crater_kb_cpu_t *src)
{
    int ok = 1;

    *dst = *src;
    dst->key = dup_or_null(src->key, &ok);
    dst->vendor = dup_or_null(src->vendor, &ok);
    dst->aliases = dup_or_null(src->aliases, &ok);
    if (!ok)
        cpu_entry_free(dst);
    return ok ? 0 : -1;
}

static int add_gpu(crater_kb_t *kb, const crater_kb_gpu_t *g)
{
    crater_kb_gpu_t *n = realloc(kb->gpus, (kb->ngpus + 1) * sizeof(*n));

    if (!n)
        return -1;
    kb->gpus = n;
    if (gpu_entry_copy(&kb->gpus[kb->ngpus], g) < 0)
        return -1;
    kb->ngpus++;
    return 0;
}

static int add_cpu(crater_kb_t *kb, const crater_kb_cpu_t *c)
{
    crater_kb_cpu_t *n = realloc(kb->cpus, (kb->ncpus + 1) * sizeof(*n));

    if (!n)
        return -1;
    kb->cpus = n;
    if (cpu_entry_copy(&kb->cpus[kb->ncpus], c) < 0)
        return -1;
    kb->ncpus++;
    return 0;
}

static int add_builtin_gpu(crater_kb_t *kb, const struct gpu_row *r)
{
    crater_kb_gpu_t g = {
        .key = (char *)r->key,
        .vendor = (char *)"nvidia",
        .aliases = (char *)r->aliases,
        .memory_bytes = r->mem_mib * MIB,
        .sm_count = r->sm,
        .compute_cap = r->cc,
        .mem_bandwidth = r->bw_mbs * 1000000ull,
        .nvlink_bandwidth = r->nvlink_mbs * 1000000ull,
        .fp16_tflops = r->fp16,
        .form_factor = (char *)r->form,
    };

    return add_gpu(kb, &g);
}

static int add_builtin_cpu(crater_kb_t *kb, const struct cpu_row *r)
{
    crater_kb_cpu_t c = {
        .key = (char *)r->key,
        .vendor = (char *)r->vendor,
        .aliases = (char *)r->aliases,
        .cores = r->cores,
        .ipc_baseline = r->ipc,
        .memory_bandwidth = r->bw_mbs * 1000000ull,
    };

    return add_cpu(kb, &c);
}

crater_kb_t *crater_kb_create(void)
{
    crater_kb_t *kb = calloc(1, sizeof(*kb));

    if (!kb)
        return NULL;
    for (size_t i = 0; i < NGPU_ROWS; i++) {
        if (add_builtin_gpu(kb, &gpu_rows[i]) < 0)
            goto fail;
    }
    for (size_t i = 0; i < NCPU_ROWS; i++) {
        if (add_builtin_cpu(kb, &cpu_rows[i]) < 0)
            goto fail;
    }
    return kb;
fail:
    crater_kb_destroy(kb);
    return NULL;
}

static int kb_copy(crater_kb_t *dst, const crater_kb_t *src)
{
    memset(dst, 0, sizeof(*dst));
    for (size_t i = 0; i < src->ngpus; i++) {
        if (add_gpu(dst, &src->gpus[i]) < 0)
            goto fail;
    }
    for (size_t i = 0; i < src->ncpus; i++) {
        if (add_cpu(dst, &src->cpus[i]) < 0)
            goto fail;
    }
    return 0;
fail:
    kb_clear(dst);
    return -1;
}

/* ---- shared decoders ---- */

static unsigned take_digits(const char **p, unsigned max, unsigned *out)
{
    unsigned v = 0, n = 0;

    while (n < max && isdigit((unsigned char)**p)) {
        v = v * 10 + (unsigned)(**p - '0');
        (*p)++;
        n++;
    }
    *out = v;
    return n;
}

/* "8.0" and "8.6" (major.minor), "80" and "sm_80" (major*10+minor). */
static int cc_from_text(const char *s, uint32_t *out)
{
    unsigned major, minor;
    int sm = strncmp(s, "sm_", 3) == 0;

    if (sm)
        s += 3;
    if (!take_digits(&s, 3, &major))
        return -1;
    if (!sm && *s == '.') {
        s++;
        if (take_digits(&s, 1, &minor) != 1 || *s || !major)
            return -1;
        *out = major * 10 + minor;
        return 0;
    }
    if (*s || major < 10)
        return -1;
    *out = major;
    return 0;
}

int crater_kb_dec_compute_cap(crater_dec_t *d, json_t *v, uint32_t *out)
{
    const char *lit =
        d->doc ? crater_doc_literal(d->doc, d->docidx, d->path) : NULL;
    uint32_t cc = 0;
    int bad;

    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        bad = i < 10 || i > 999;
        cc = (uint32_t)i;
    } else if (json_is_real(v) && lit) { /* "8.10" must not pass as 8.1 */
        bad = cc_from_text(lit, &cc) < 0;
    } else if (json_is_real(v)) {
        double x = json_real_value(v) * 10.0;
        bad = !(x >= 10.0 && x <= 999.0) || fabs(x - round(x)) > 1e-6;
        cc = bad ? 0 : (uint32_t)round(x);
    } else if (json_is_string(v)) {
        bad = cc_from_text(json_string_value(v), &cc) < 0;
    } else {
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a compute capability, got %s",
                               crater_dec_typename(v));
    }
    if (bad)
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "not a compute capability: write it as 8.0, "
                               "\"sm_80\" or 80");
    *out = cc;
    return 0;
}

int crater_kb_dec_gbps(crater_dec_t *d, json_t *v, uint64_t *out)
{
    char buf[64], q[96];
    const char *text;
    crater_error_t uerr;

    if (!json_is_number(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a number of GB/s, got %s (a "
                               "quantity with units goes in the field "
                               "without _gbps)",
                               crater_dec_typename(v));
    text = crater_dec_text(d, v, buf, sizeof(buf));
    snprintf(q, sizeof(q), "%sGB/s", text ? text : "");
    if (crater_parse_quantity(q, CRATER_DIM_BANDWIDTH, out, &uerr) < 0)
        return crater_dec_fail(d, uerr.errnum, "%s", uerr.text);
    return 0;
}

/* ---- overrides ---- */

/* Which fields an override entry named. */
enum {
    OV_VENDOR = 1u << 0,
    OV_CORES = 1u << 1,
    OV_IPC = 1u << 2,
    OV_MEMBW = 1u << 3,
    OV_MEM = 1u << 4,
    OV_SM = 1u << 5,
    OV_CC = 1u << 6,
    OV_NVLINK = 1u << 7,
    OV_FP16 = 1u << 8,
    OV_FORM = 1u << 9,
};

struct ov {
    crater_kb_t *kb; /* the scratch copy */
    unsigned given;
    const char *bw_key, *nvl_key; /* which spelling set a bandwidth */
    char *model, *vendor, *form;
    char **aliases;
    size_t naliases;
    json_t *aliases_json; /* borrowed, for error paths */
    crater_kb_gpu_t g;
    crater_kb_cpu_t c;
};

static void ov_free(struct ov *o)
{
    free(o->model);
    free(o->vendor);
    free(o->form);
    crater_strv_free(o->aliases);
}

static int f_skip(crater_dec_t *d, json_t *v, void *obj)
{
    (void)d, (void)v, (void)obj;
    return 0; /* 'type' was read before the table ran */
}

static int f_vendor(crater_dec_t *d, json_t *v, void *obj)
{
    struct ov *o = obj;

    o->given |= OV_VENDOR;
    return crater_dec_str(d, v, 64, &o->vendor);
}

static int f_model(crater_dec_t *d, json_t *v, void *obj)
{
    struct ov *o = obj;
    char norm[KB_NAME_MAX];

    if (crater_dec_str(d, v, KB_NAME_MAX - 1, &o->model) < 0)
        return -1;
    if (!crater_kb_normalize(o->model, norm, sizeof(norm)) || !*norm)
        return crater_dec_fail(d, CRATER_EINVAL, "empty model name");
    return 0;
}

static int alias_ok(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    (void)obj, (void)i;
    if (strchr(json_string_value(v), '|') || !*json_string_value(v))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "an alias must be non-empty and not "
                               "contain '|'");
    return 0;
}

static int f_aliases(crater_dec_t *d, json_t *v, void *obj)
{
    struct ov *o = obj;

    o->aliases_json = v;
    if (crater_dec_strv(d,
                        v,
                        KB_MAX_ALIASES,
                        KB_NAME_MAX - 1,
                        &o->aliases,
                        &o->naliases)
        < 0)
        return -1;
    return json_is_array(v)
               ? crater_dec_array(d, v, KB_MAX_ALIASES, alias_ok, o)
               : alias_ok(d, v, o, 0);
}

/* Mark bit; a second spelling of the same field is a conflict. */
static int mark(crater_dec_t *d,
                struct ov *o,
                unsigned bit,
                const char **seen,
                const char *key)
{
    if (o->given & bit)
        return crater_dec_fail(d,
                               CRATER_ECONFLICT,
                               "conflicts with '%s' (give one of them)",
                               *seen);
    o->given |= bit;
    *seen = key;
    return 0;
}

static uint64_t *bw_slot(struct ov *o, int gpu)
{
    return gpu ? &o->g.mem_bandwidth : &o->c.memory_bandwidth;
}

static int membw(crater_dec_t *d, json_t *v, struct ov *o, int gpu, int gbps)
{
    const char *key = gbps ? "memory_bandwidth_gbps" : "memory_bandwidth";

    if (mark(d, o, OV_MEMBW, &o->bw_key, key) < 0)
        return -1;
    return gbps ? crater_kb_dec_gbps(d, v, bw_slot(o, gpu))
                : crater_dec_quantity(d,
                                      v,
                                      CRATER_DIM_BANDWIDTH,
                                      bw_slot(o, gpu));
}

static int f_gpu_bw(crater_dec_t *d, json_t *v, void *obj)
{
    return membw(d, v, obj, 1, 0);
}

static int f_gpu_bw_gbps(crater_dec_t *d, json_t *v, void *obj)
{
    return membw(d, v, obj, 1, 1);
}

static int f_cpu_bw(crater_dec_t *d, json_t *v, void *obj)
{
    return membw(d, v, obj, 0, 0);
}

static int f_cpu_bw_gbps(crater_dec_t *d, json_t *v, void *obj)
{
    return membw(d, v, obj, 0, 1);
}

static int f_nvlink(crater_dec_t *d, json_t *v, void *obj)
{
    struct ov *o = obj;

    if (mark(d, o, OV_NVLINK, &o->nvl_key, "nvlink_bandwidth") < 0)
        return -1;
    return crater_dec_quantity(d,
                               v,
                               CRATER_DIM_BANDWIDTH,
                               &o->g.nvlink_bandwidth);
}

static int f_nvlink_gbps(crater_dec_t *d, json_t *v, void *obj)
{
    struct ov *o = obj;

    if (mark(d, o, OV_NVLINK, &o->nvl_key, "nvlink_bandwidth_gbps") < 0)
        return -1;
    return crater_kb_dec_gbps(d, v, &o->g.nvlink_bandwidth);
}

static int f_memory(crater_dec_t *d, json_t *v, void *obj)
{
    struct ov *o = obj;

    o->given |= OV_MEM;
    if (crater_dec_quantity(d, v, CRATER_DIM_BYTES, &o->g.memory_bytes) < 0)
        return -1;
    if (!o->g.memory_bytes)
        return crater_dec_fail(d, CRATER_ERANGE, "memory must be above 0");
    return 0;
}

static int f_sm(crater_dec_t *d, json_t *v, void *obj)
{
    struct ov *o = obj;

    o->given |= OV_SM;
    return crater_dec_u32(d, v, 1, 100000, &o->g.sm_count);
}

static int f_cc(crater_dec_t *d, json_t *v, void *obj)
{
    struct ov *o = obj;

    o->given |= OV_CC;
    return crater_kb_dec_compute_cap(d, v, &o->g.compute_cap);
}

static int f_fp16(crater_dec_t *d, json_t *v, void *obj)
{
    struct ov *o = obj;

    o->given |= OV_FP16;
    return crater_dec_double(d, v, 0.0, 1e6, &o->g.fp16_tflops);
}

static int f_form(crater_dec_t *d, json_t *v, void *obj)
{
    static const char *const forms[] = {"sxm", "pcie", "oam"};
    struct ov *o = obj;
    int i;

    o->given |= OV_FORM;
    if (crater_dec_enum(d, v, forms, 3, &i) < 0)
        return -1;
    free(o->form);
    if (!(o->form = strdup(forms[i])))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    return 0;
}

static int f_cores(crater_dec_t *d, json_t *v, void *obj)
{
    struct ov *o = obj;

    o->given |= OV_CORES;
    return crater_dec_u32(d, v, 1, 100000, &o->c.cores);
}

static int f_ipc(crater_dec_t *d, json_t *v, void *obj)
{
    struct ov *o = obj;

    o->given |= OV_IPC;
    if (crater_dec_double(d, v, 0.0, 100.0, &o->c.ipc_baseline) < 0)
        return -1;
    if (o->c.ipc_baseline <= 0.0)
        return crater_dec_fail(d,
                               CRATER_ERANGE,
                               "ipc_baseline must be above 0");
    return 0;
}

static const crater_dec_field_t gpu_fields[] = {
    {"type", f_skip, CRATER_FIELD_REQUIRED},
    {"vendor", f_vendor, CRATER_FIELD_REQUIRED},
    {"model", f_model, CRATER_FIELD_REQUIRED},
    {"aliases", f_aliases, 0},
    {"memory", f_memory, 0},
    {"sm_count", f_sm, 0},
    {"compute_capability", f_cc, 0},
    {"memory_bandwidth", f_gpu_bw, 0},
    {"memory_bandwidth_gbps", f_gpu_bw_gbps, 0},
    {"nvlink_bandwidth", f_nvlink, 0},
    {"nvlink_bandwidth_gbps", f_nvlink_gbps, 0},
    {"fp16_tflops", f_fp16, 0},
    {"form_factor", f_form, 0},
    {NULL, NULL, 0},
};

static const crater_dec_field_t cpu_fields[] = {
    {"type", f_skip, CRATER_FIELD_REQUIRED},
    {"vendor", f_vendor, CRATER_FIELD_REQUIRED},
    {"model", f_model, CRATER_FIELD_REQUIRED},
    {"aliases", f_aliases, 0},
    {"cores", f_cores, 0},
    {"ipc_baseline", f_ipc, 0},
    {"memory_bandwidth", f_cpu_bw, 0},
    {"memory_bandwidth_gbps", f_cpu_bw_gbps, 0},
    {NULL, NULL, 0},
};

/* New aliases must not name another entry; then append them. */
static int append_aliases(
    crater_dec_t *d, struct ov *o, char **aliases, int gpu, long self)
{
    char norm[KB_NAME_MAX];

    for (size_t i = 0; i < o->naliases; i++) {
        size_t len = *aliases ? strlen(*aliases) : 0;
        long other;
        char *n;

        crater_kb_normalize(o->aliases[i], norm, sizeof(norm));
        other = gpu ? find_gpu(o->kb, norm) : find_cpu(o->kb, norm);
        if (other >= 0 && other != self) {
            crater_dec_push_key(d, "aliases");
            if (json_is_array(o->aliases_json))
                crater_dec_push_index(d, i);
            return crater_dec_fail(d,
                                   CRATER_ECONFLICT,
                                   "alias '%s' already names '%s'",
                                   o->aliases[i],
                                   gpu ? o->kb->gpus[other].key
                                       : o->kb->cpus[other].key);
        }
        if (!(n = realloc(*aliases, len + strlen(o->aliases[i]) + 2)))
            return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
        sprintf(n + len, "%s%s", len ? "|" : "", o->aliases[i]);
        *aliases = n;
    }
    return 0;
}

static int replace_str(crater_dec_t *d, char **dst, const char *src)
{
    char *c;

    if (!src)
        return 0;
    if (!(c = strdup(src)))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    free(*dst);
    *dst = c;
    return 0;
}

static void merge_gpu(crater_kb_gpu_t *e, const struct ov *o)
{
    if (o->given & OV_MEM)
        e->memory_bytes = o->g.memory_bytes;
    if (o->given & OV_SM)
        e->sm_count = o->g.sm_count;
    if (o->given & OV_CC)
        e->compute_cap = o->g.compute_cap;
    if (o->given & OV_MEMBW)
        e->mem_bandwidth = o->g.mem_bandwidth;
    if (o->given & OV_NVLINK)
        e->nvlink_bandwidth = o->g.nvlink_bandwidth;
    if (o->given & OV_FP16)
        e->fp16_tflops = o->g.fp16_tflops;
}

static int apply_gpu(crater_dec_t *d, struct ov *o)
{
    char norm[KB_NAME_MAX];
    long i;
    crater_kb_gpu_t *e;

    crater_kb_normalize(o->model, norm, sizeof(norm));
    if ((i = find_gpu(o->kb, norm)) < 0) {
        crater_kb_gpu_t fresh = {.key = norm};
        if (!(o->given & OV_MEM))
            return crater_dec_fail(d,
                                   CRATER_EMISSING,
                                   "GPU model '%s' is not in the knowledge "
                                   "base: a new entry needs 'memory'",
                                   o->model);
        if (add_gpu(o->kb, &fresh) < 0)
            return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
        i = (long)o->kb->ngpus - 1;
    }
    e = &o->kb->gpus[i];
    merge_gpu(e, o);
    if (replace_str(d, &e->vendor, o->vendor) < 0
        || replace_str(d, &e->form_factor, o->form) < 0)
        return -1;
    return append_aliases(d, o, &o->kb->gpus[i].aliases, 1, i);
}

static int apply_cpu(crater_dec_t *d, struct ov *o)
{
    char norm[KB_NAME_MAX];
    long i;
    crater_kb_cpu_t *e;

    crater_kb_normalize(o->model, norm, sizeof(norm));
    if ((i = find_cpu(o->kb, norm)) < 0) {
        crater_kb_cpu_t fresh = {.key = norm};
        if (!(o->given & OV_IPC))
            return crater_dec_fail(d,
                                   CRATER_EMISSING,
                                   "CPU model '%s' is not in the knowledge "
                                   "base: a new entry needs 'ipc_baseline'",
                                   o->model);
        if (add_cpu(o->kb, &fresh) < 0)
            return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
        i = (long)o->kb->ncpus - 1;
    }
    e = &o->kb->cpus[i];
    if (o->given & OV_CORES)
        e->cores = o->c.cores;
    if (o->given & OV_IPC)
        e->ipc_baseline = o->c.ipc_baseline;
    if (o->given & OV_MEMBW)
        e->memory_bandwidth = o->c.memory_bandwidth;
    if (replace_str(d, &e->vendor, o->vendor) < 0)
        return -1;
    return append_aliases(d, o, &o->kb->cpus[i].aliases, 0, i);
}

static int entry_type(crater_dec_t *d, json_t *v, int *gpu)
{
    static const char *const types[] = {"gpu", "cpu"};
    json_t *t = json_object_get(v, "type");
    size_t mk;
    int i;

    if (!json_is_object(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a mapping, got %s",
                               crater_dec_typename(v));
    if (!t)
        return crater_dec_fail(d,
                               CRATER_EMISSING,
                               "missing required field 'type' (gpu or cpu)");
    mk = crater_dec_push_key(d, "type");
    if (crater_dec_enum(d, t, types, 2, &i) < 0)
        return -1;
    crater_dec_pop(d, mk);
    *gpu = i == 0;
    return 0;
}

static int override_entry(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    struct ov o = {.kb = obj};
    int gpu = 0, rc;

    (void)i;
    if (entry_type(d, v, &gpu) < 0)
        return -1;
    rc = crater_dec_object(d, v, gpu ? gpu_fields : cpu_fields, &o);
    if (rc == 0)
        rc = gpu ? apply_gpu(d, &o) : apply_cpu(d, &o);
    ov_free(&o);
    return rc;
}

int crater_kb_override(crater_kb_t *kb, crater_dec_t *d, json_t *list)
{
    crater_kb_t scratch;

    if (!list)
        return 0;
    if (kb_copy(&scratch, kb) < 0)
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    if (crater_dec_array(d, list, KB_MAX_OVERRIDES, override_entry, &scratch)
        < 0) {
        kb_clear(&scratch);
        return -1;
    }
    kb_clear(kb);
    *kb = scratch;
    return 0;
}

/* ---- encoding ---- */

static json_t *aliases_json(const char *aliases)
{
    json_t *a = json_array();
    const char *p = aliases;

    while (a && p && *p) {
        size_t n = strcspn(p, "|");
        if (json_array_append_new(a, json_stringn(p, n)) < 0) {
            json_decref(a);
            return NULL;
        }
        p += n + (p[n] == '|');
    }
    return a;
}

static json_t *gpu_json(const crater_kb_gpu_t *g)
{
    return json_pack("{s:s, s:s?, s:o, s:I, s:I, s:I, s:I, s:I, s:f, s:s?}",
                     "model",
                     g->key,
                     "vendor",
                     g->vendor,
                     "aliases",
                     aliases_json(g->aliases),
                     "memory",
                     (json_int_t)g->memory_bytes,
                     "sm_count",
                     (json_int_t)g->sm_count,
                     "compute_capability",
                     (json_int_t)g->compute_cap,
                     "memory_bandwidth",
                     (json_int_t)g->mem_bandwidth,
                     "nvlink_bandwidth",
                     (json_int_t)g->nvlink_bandwidth,
                     "fp16_tflops",
                     g->fp16_tflops,
                     "form_factor",
                     g->form_factor);
}

static json_t *cpu_json(const crater_kb_cpu_t *c)
{
    return json_pack("{s:s, s:s?, s:o, s:I, s:f, s:I}",
                     "model",
                     c->key,
                     "vendor",
                     c->vendor,
                     "aliases",
                     aliases_json(c->aliases),
                     "cores",
                     (json_int_t)c->cores,
                     "ipc_baseline",
                     c->ipc_baseline,
                     "memory_bandwidth",
                     (json_int_t)c->memory_bandwidth);
}

json_t *crater_kb_encode(const crater_kb_t *kb)
{
    json_t *gpus = json_array(), *cpus = json_array();

    for (size_t i = 0; gpus && i < kb->ngpus; i++) {
        if (json_array_append_new(gpus, gpu_json(&kb->gpus[i])) < 0) {
            json_decref(gpus);
            gpus = NULL;
        }
    }
    for (size_t i = 0; cpus && i < kb->ncpus; i++) {
        if (json_array_append_new(cpus, cpu_json(&kb->cpus[i])) < 0) {
            json_decref(cpus);
            cpus = NULL;
        }
    }
    return json_pack("{s:o, s:o}", "gpus", gpus, "cpus", cpus);
}
