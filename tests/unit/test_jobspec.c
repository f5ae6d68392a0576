/* test_jobspec.c - job spec decode, defaults, workloadType inference,
 * validation (with and without the knowledge base), limits, and
 * decode(encode(spec)) == spec round trips in JSON and YAML.
 *
 * Error tests compare the whole message, so a change in wording, path or
 * line number shows up here.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/doc.h"
#include "crater/jobspec.h"

static crater_kb_t *kb;

/* ---- helpers ------------------------------------------------------------ */

/* Parse and decode text; NULL with err filled on failure. */
static crater_jobspec_t *decode_text(const char *text,
                                     const char *name,
                                     crater_error_t *err)
{
    crater_doc_t *doc;
    crater_dec_t d;
    crater_jobspec_t *s = NULL;

    crater_error_clear(err);
    if (crater_doc_parse(text, strlen(text), name, &doc, err) < 0)
        return NULL;
    crater_dec_init(&d, doc, 0, err);
    if (crater_jobspec_decode(&d, crater_doc_root(doc, 0), &s) < 0)
        s = NULL;
    crater_doc_destroy(doc);
    return s;
}

static crater_jobspec_t *decode_ok(const char *text)
{
    crater_error_t err;
    crater_jobspec_t *s = decode_text(text, "t.yaml", &err);

    ck_assert_msg(s != NULL, "decode failed: %s", err.text);
    return s;
}

/* Decoding must fail with exactly this message. */
static void decode_fails(const char *text,
                         crater_errno_t errnum,
                         const char *msg)
{
    crater_error_t err;
    crater_jobspec_t *s = decode_text(text, "t.yaml", &err);

    ck_assert_msg(s == NULL, "decode of '%s' succeeded", text);
    ck_assert_str_eq(err.text, msg);
    ck_assert_str_eq(crater_errno_name(err.errnum), crater_errno_name(errnum));
}

/* Decoding succeeds, validation fails with this message and field. */
static void validate_fails(const char *text,
                           const crater_kb_t *k,
                           crater_errno_t errnum,
                           const char *field,
                           const char *msg)
{
    crater_error_t err;
    crater_jobspec_t *s = decode_ok(text);

    ck_assert_int_eq(crater_jobspec_validate(s, k, &err), -1);
    ck_assert_str_eq(err.text, msg);
    ck_assert_str_eq(err.field, field);
    ck_assert_str_eq(crater_errno_name(err.errnum), crater_errno_name(errnum));
    crater_jobspec_destroy(s);
}

static void validate_ok(const char *text)
{
    crater_error_t err;
    crater_jobspec_t *s = decode_ok(text);

    ck_assert_msg(crater_jobspec_validate(s, kb, &err) == 0, "%s", err.text);
    crater_jobspec_destroy(s);
}

static char *read_source(const char *rel, size_t *len)
{
    char path[512];
    FILE *fp;
    char *buf = malloc(1 << 20);

    snprintf(path, sizeof(path), "%s/%s", CRATER_SOURCE_DIR, rel);
    ck_assert_msg((fp = fopen(path, "rb")) != NULL, "cannot open %s", path);
    ck_assert_ptr_nonnull(buf);
    *len = fread(buf, 1, (1 << 20) - 1, fp);
    buf[*len] = '\0';
    fclose(fp);
    return buf;
}

/* Load a repository file as a document named by its relative path. */
static crater_doc_t *load_source(const char *rel)
{
    size_t len;
    char *buf = read_source(rel, &len);
    crater_doc_t *doc = NULL;
    crater_error_t err;

    ck_assert_msg(crater_doc_parse(buf, len, rel, &doc, &err) == 0,
                  "%s",
                  err.text);
    free(buf);
    return doc;
}

static bool str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool strv_eq(char *const *a, char *const *b)
{
    size_t n = crater_strv_len(a);

    if ((a == NULL) != (b == NULL) || n != crater_strv_len(b))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!str_eq(a[i], b[i]))
            return false;
    return true;
}

static bool kv_eq(const crater_kv_t *a,
                  size_t na,
                  const crater_kv_t *b,
                  size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (!str_eq(a[i].key, b[i].key) || !str_eq(a[i].value, b[i].value))
            return false;
    return true;
}

#define DIFF(cond, what) \
    do {                 \
        if (!(cond))     \
            return what; \
    } while (0)

static const char *gpu_diff(const crater_gpu_req_t *a,
                            const crater_gpu_req_t *b)
{
    DIFF(a->count == b->count, "gpu.count");
    DIFF(a->memory_bytes == b->memory_bytes, "gpu.memory");
    DIFF(strv_eq(a->models, b->models), "gpu.model");
    DIFF(str_eq(a->vendor, b->vendor), "gpu.vendor");
    DIFF(a->min_sm_count == b->min_sm_count, "gpu.minSmCount");
    DIFF(a->min_compute_cap == b->min_compute_cap, "gpu.minComputeCap");
    DIFF(a->min_hbm_bandwidth == b->min_hbm_bandwidth, "gpu.minHbm");
    DIFF(a->nvlink == b->nvlink, "gpu.nvlink");
    return NULL;
}

static const char *res_diff(const crater_resources_t *a,
                            const crater_resources_t *b)
{
    const char *g = gpu_diff(&a->gpu, &b->gpu);

    DIFF(!g, g);
    DIFF(a->cpu_milli == b->cpu_milli, "cpu");
    DIFF(a->memory_bytes == b->memory_bytes, "memory");
    DIFF(a->disk.iops == b->disk.iops, "disk.iops");
    DIFF(a->disk.bandwidth == b->disk.bandwidth, "disk.bandwidth");
    DIFF(a->disk.iface == b->disk.iface, "disk.interface");
    DIFF(a->disk.max_latency_us == b->disk.max_latency_us, "disk.maxLatency");
    return NULL;
}

static const char *inf_diff(const crater_inference_t *a,
                            const crater_inference_t *b)
{
    DIFF(a->enabled == b->enabled, "inference");
    DIFF(a->port == b->port, "inference.port");
    DIFF(a->min_replicas == b->min_replicas, "inference.minReplicas");
    DIFF(a->max_replicas == b->max_replicas, "inference.maxReplicas");
    DIFF(a->target_qps == b->target_qps, "inference.targetQPS");
    DIFF(a->warm_pool_size == b->warm_pool_size, "inference.warmPoolSize");
    DIFF(a->max_batch_size == b->max_batch_size, "inference.maxBatchSize");
    DIFF(a->batch_timeout_ms == b->batch_timeout_ms, "inference.batchTimeout");
    DIFF(a->target_concurrency == b->target_concurrency,
         "inference.targetConcurrency");
    DIFF(a->stable_window_ms == b->stable_window_ms, "inference.stableWindow");
    DIFF(a->panic_window_ms == b->panic_window_ms, "inference.panicWindow");
    DIFF(a->scale_down_delay_ms == b->scale_down_delay_ms,
         "inference.scaleDownDelay");
    DIFF(a->zero_grace_ms == b->zero_grace_ms, "inference.scaleToZeroGrace");
    DIFF(strv_eq(a->ready_cmd, b->ready_cmd), "inference.readiness.command");
    DIFF(a->ready_period_ms == b->ready_period_ms,
         "inference.readiness.period");
    DIFF(a->ready_timeout_ms == b->ready_timeout_ms,
         "inference.readiness.timeout");
    return NULL;
}

static const char *vol_diff(const crater_jobspec_t *a,
                            const crater_jobspec_t *b)
{
    if (a->image_pull != b->image_pull)
        return "imagePullPolicy";
    if (a->nvolumes != b->nvolumes)
        return "volumes";
    for (size_t i = 0; i < a->nvolumes; i++) {
        const crater_volume_t *x = &a->volumes[i], *y = &b->volumes[i];
        if (!str_eq(x->host_path, y->host_path)
            || !str_eq(x->scratch, y->scratch)
            || !str_eq(x->mount_path, y->mount_path)
            || x->read_only != y->read_only)
            return "volumes[i]";
    }
    return NULL;
}

static const char *tol_diff(const crater_jobspec_t *a,
                            const crater_jobspec_t *b)
{
    DIFF(a->ntolerations == b->ntolerations, "ntolerations");
    for (size_t i = 0; i < a->ntolerations; i++) {
        DIFF(str_eq(a->tolerations[i].key, b->tolerations[i].key), "tol.key");
        DIFF(str_eq(a->tolerations[i].value, b->tolerations[i].value),
             "tol.value");
        DIFF(a->tolerations[i].effect == b->tolerations[i].effect,
             "tol.effect");
    }
    return NULL;
}

/* NULL when a and b are equal field by field, else the first difference. */
static const char *spec_diff(const crater_jobspec_t *a,
                             const crater_jobspec_t *b)
{
    const char *r;

    DIFF(str_eq(a->name, b->name), "name");
    DIFF(str_eq(a->tenant, b->tenant), "tenant");
    DIFF(a->workload_type == b->workload_type, "workloadType");
    DIFF(a->workload_type_explicit == b->workload_type_explicit,
         "workloadType explicit");
    DIFF(a->priority == b->priority, "priority");
    DIFF(str_eq(a->priority_class, b->priority_class), "priorityClass");
    DIFF(a->preemptible == b->preemptible, "preemptible");
    DIFF(a->no_idle_reclaim == b->no_idle_reclaim, "idleReclaim");
    DIFF(a->grace_period_ms == b->grace_period_ms, "gracePeriod");
    DIFF(a->time_limit_ms == b->time_limit_ms, "timeLimit");
    DIFF(!(r = res_diff(&a->resources, &b->resources)), r);
    DIFF(a->cpu_limit_multiplier == b->cpu_limit_multiplier, "cpuLimitMult");
    DIFF(a->cpu_burst == b->cpu_burst, "cpuBurst");
    DIFF(a->io_profile == b->io_profile, "ioProfile");
    DIFF(a->numa == b->numa, "numa");
    DIFF(str_eq(a->dataset, b->dataset), "dataLocality.dataset");
    DIFF(a->locality == b->locality, "dataLocality.mode");
    DIFF(str_eq(a->checkpoint.dir, b->checkpoint.dir), "checkpoint.dir");
    DIFF(a->checkpoint.interval_ms == b->checkpoint.interval_ms,
         "checkpoint.interval");
    DIFF(a->checkpoint.incremental_interval_ms
             == b->checkpoint.incremental_interval_ms,
         "checkpoint.incremental");
    DIFF(a->deadline_ms == b->deadline_ms, "deadline");
    DIFF(a->deadline_policy == b->deadline_policy, "deadlinePolicy");
    DIFF(a->cost_cap == b->cost_cap, "costCap");
    DIFF(str_eq(a->profile, b->profile), "profile");
    DIFF(a->replicas == b->replicas, "replicas");
    DIFF(a->gang == b->gang, "gang");
    DIFF(strv_eq(a->after, b->after), "after");
    DIFF(!(r = inf_diff(&a->inference, &b->inference)), r);
    DIFF(strv_eq(a->command, b->command), "command");
    DIFF(str_eq(a->image, b->image), "image");
    DIFF(!(r = vol_diff(a, b)), r);
    DIFF(kv_eq(a->env, a->nenv, b->env, b->nenv), "env");
    DIFF(str_eq(a->workdir, b->workdir), "workdir");
    DIFF(kv_eq(a->selector, a->nselector, b->selector, b->nselector),
         "nodeSelector");
    return tol_diff(a, b);
}

/* encode -> JSON text -> decode, and encode_yaml -> YAML text -> decode:
 * both must give back s. */
static void check_round_trip(const crater_jobspec_t *s)
{
    json_t *enc = crater_jobspec_encode(s);
    json_t *ency = crater_jobspec_encode_yaml(s);
    char *json, *yaml;
    crater_jobspec_t *back;
    crater_error_t err;
    const char *diff;

    ck_assert_ptr_nonnull(enc);
    ck_assert_ptr_nonnull(ency);
    json = json_dumps(enc, JSON_INDENT(2));
    yaml = crater_json_to_yaml(ency);
    ck_assert_ptr_nonnull(json);
    ck_assert_ptr_nonnull(yaml);
    ck_assert_msg(json[0] == '{', "not JSON");

    back = decode_text(json, "enc.json", &err);
    ck_assert_msg(back != NULL, "JSON decode: %s\n%s", err.text, json);
    diff = spec_diff(s, back);
    ck_assert_msg(diff == NULL,
                  "JSON round trip differs in %s\n%s",
                  diff,
                  json);
    crater_jobspec_destroy(back);

    back = decode_text(yaml, "enc.yaml", &err);
    ck_assert_msg(back != NULL, "YAML decode: %s\n%s", err.text, yaml);
    diff = spec_diff(s, back);
    ck_assert_msg(diff == NULL,
                  "YAML round trip differs in %s\n%s",
                  diff,
                  yaml);
    crater_jobspec_destroy(back);
    free(json);
    free(yaml);
    json_decref(enc);
    json_decref(ency);
}

static const char *const examples[] = {
    "examples/jobs/train-ddp.yaml",
    "examples/jobs/bert-finetune.yaml",
    "examples/jobs/infer-llm.yaml",
    "examples/jobs/batch-cpu.yaml",
};

static crater_jobspec_t *load_example(const char *rel)
{
    crater_doc_t *doc = load_source(rel);
    crater_error_t err;
    crater_dec_t d;
    crater_jobspec_t *s = NULL;

    crater_dec_init(&d, doc, 0, &err);
    ck_assert_msg(crater_jobspec_decode(&d, crater_doc_root(doc, 0), &s) == 0,
                  "%s",
                  err.text);
    crater_doc_destroy(doc);
    return s;
}

/* A spec with every field set to a non-default value. */
static const char *full_spec = "apiVersion: crater/v1\n"
                               "kind: Job\n"
                               "name: every-field.v2\n"
                               "tenant: team-a\n"
                               "workloadType: inference\n"
                               "priority: -42\n"
                               "priorityClass: high\n"
                               "preemptible: true\n"
                               "idleReclaim: false\n"
                               "gracePeriod: 1m30s\n"
                               "resources:\n"
                               "  gpu:\n"
                               "    count: 2\n"
                               "    memory: 20000MB\n"
                               "    model: [a100-sxm4-80gb, H100 SXM5 80GB]\n"
                               "    vendor: nvidia\n"
                               "    minSmCount: 100\n"
                               "    minComputeCapability: 8.0\n"
                               "    minHbmBandwidth: 1.5TB/s\n"
                               "    nvlink: preferred\n"
                               "  cpu: 2500m\n"
                               "  memory: 1.5Gi\n"
                               "  disk:\n"
                               "    iops: 1.5k\n"
                               "    bandwidth: 1Gbps\n"
                               "    interface: virtio\n"
                               "    maxLatency: 1500ns\n"
                               "cpuLimitMultiplier: 2.5\n"
                               "cpuBurst: true\n"
                               "ioProfile: model-loading\n"
                               "numa: strict\n"
                               "dataLocality: {dataset: imagenet, mode: "
                               "required}\n"
                               "checkpoint:\n"
                               "  dir: /ckpt\n"
                               "  checkpointInterval: 1h\n"
                               "  incrementalInterval: 10m\n"
                               "deadline: 2024-06-15T10:00:00.25+08:00\n"
                               "deadlinePolicy: hard\n"
                               "costCap: 99.95\n"
                               "profile: bert-train-infer@1.0\n"
                               "replicas: 3\n"
                               "gang: true\n"
                               "after: [prep, tokenize]\n"
                               "inference:\n"
                               "  port: 9000\n"
                               "  minReplicas: 2\n"
                               "  maxReplicas: 6\n"
                               "  targetQPS: 1200.5\n"
                               "  warmPoolSize: 2\n"
                               "  maxBatchSize: 32\n"
                               "  batchTimeout: 10ms\n"
                               "command: [python3, serve.py, --workers, 4]\n"
                               "image: registry.local/llm:1.2\n"
                               "env:\n"
                               "  RATIO: 0.10\n"
                               "  DEBUG: True\n"
                               "  EMPTY: ''\n"
                               "  NULLISH: 'null'\n"
                               "workdir: /srv/app\n"
                               "nodeSelector:\n"
                               "  zone: b\n"
                               "  crater.io/gpu-count: 8\n"
                               "tolerations:\n"
                               "  - {key: gpu, value: 'true', effect: "
                               "NoExecute}\n"
                               "  - {key: spot, operator: Exists}\n";

/* ---- defaults ------------------------------------------------------------ */

START_TEST(test_create_defaults)
{
    crater_jobspec_t *s = crater_jobspec_create();

    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_null(s->name);
    ck_assert_str_eq(s->tenant, "default");
    ck_assert_int_eq(s->priority, 0);
    ck_assert(!s->preemptible);
    ck_assert(!s->no_idle_reclaim); /* idle reclaim applies by default */
    ck_assert_uint_eq(s->grace_period_ms, 30000);
    ck_assert(s->cpu_limit_multiplier == 1.0);
    ck_assert_int_eq(s->io_profile, CRATER_IO_DEFAULT);
    ck_assert_int_eq(s->numa, CRATER_NUMA_PREFERRED);
    ck_assert_int_eq(s->locality, CRATER_LOCALITY_NONE);
    ck_assert_int_eq(s->deadline_policy, CRATER_DEADLINE_SOFT);
    ck_assert_uint_eq(s->replicas, 1);
    ck_assert(!s->gang);
    ck_assert(!s->inference.enabled);
    ck_assert_uint_eq(s->resources.gpu.count, 0);
    crater_jobspec_destroy(s);
    crater_jobspec_destroy(NULL);
}
END_TEST

START_TEST(test_decode_empty)
{
    crater_jobspec_t *s = decode_ok("{}");
    crater_jobspec_t *def = crater_jobspec_create();

    ck_assert_ptr_null(spec_diff(s, def));
    ck_assert_int_eq(s->workload_type, CRATER_WORKLOAD_BATCH);
    ck_assert(!s->workload_type_explicit);
    ck_assert_int_eq(crater_jobspec_validate(s, kb, NULL), 0);
    check_round_trip(s);
    crater_jobspec_destroy(s);
    crater_jobspec_destroy(def);
}
END_TEST

START_TEST(test_gang_default)
{
    crater_jobspec_t *s;

    s = decode_ok("replicas: 2\ncommand: [torchrun, train.py]\n");
    ck_assert(s->gang); /* multi-replica training: gang by default */
    crater_jobspec_destroy(s);
    s = decode_ok("replicas: 2\ncommand: [torchrun, train.py]\ngang: false");
    ck_assert(!s->gang); /* explicit wins */
    crater_jobspec_destroy(s);
    s = decode_ok("replicas: 1\nworkloadType: training\n");
    ck_assert(!s->gang);
    crater_jobspec_destroy(s);
    s = decode_ok("replicas: 4\ncommand: [python, etl.py]\n");
    ck_assert(!s->gang); /* batch */
    crater_jobspec_destroy(s);
    s = decode_ok("gang: true\n");
    ck_assert(s->gang);
    crater_jobspec_destroy(s);
}
END_TEST

START_TEST(test_inference_defaults)
{
    crater_jobspec_t *s;

    s = decode_ok("inference: {port: 8000}\n");
    ck_assert(s->inference.enabled);
    ck_assert_int_eq(s->workload_type, CRATER_WORKLOAD_INFERENCE);
    ck_assert(!s->workload_type_explicit);
    ck_assert_uint_eq(s->inference.min_replicas, 1);
    ck_assert_uint_eq(s->inference.max_replicas, 1);
    ck_assert_uint_eq(s->replicas, 1);
    crater_jobspec_destroy(s);

    s = decode_ok("inference: {minReplicas: 3}\n");
    ck_assert_uint_eq(s->inference.max_replicas, 3);
    ck_assert_uint_eq(s->replicas, 3);
    crater_jobspec_destroy(s);

    s = decode_ok("replicas: 5\ninference: {minReplicas: 2}\n");
    ck_assert_uint_eq(s->inference.max_replicas, 5);
    ck_assert_uint_eq(s->replicas, 5);
    ck_assert(!s->gang);
    crater_jobspec_destroy(s);

    s = decode_ok("inference: {minReplicas: 0}\n");
    ck_assert_uint_eq(s->inference.max_replicas, 1);
    ck_assert_uint_eq(s->replicas, 1);
    crater_jobspec_destroy(s);
}
END_TEST

/* ---- decoding every field ------------------------------------------------ */

START_TEST(test_full_spec_resources)
{
    crater_jobspec_t *s = decode_ok(full_spec);
    const crater_gpu_req_t *g = &s->resources.gpu;

    ck_assert_uint_eq(g->count, 2);
    ck_assert_uint_eq(g->memory_bytes, 20000000000ull); /* not 20000 MiB */
    ck_assert_str_eq(g->models[0], "a100-sxm4-80gb");
    ck_assert_str_eq(g->models[1], "H100 SXM5 80GB");
    ck_assert_ptr_null(g->models[2]);
    ck_assert_str_eq(g->vendor, "nvidia");
    ck_assert_uint_eq(g->min_sm_count, 100);
    ck_assert_uint_eq(g->min_compute_cap, 80);
    ck_assert_uint_eq(g->min_hbm_bandwidth, 1500000000000ull);
    ck_assert_int_eq(g->nvlink, CRATER_NVLINK_PREFERRED);
    ck_assert_uint_eq(s->resources.cpu_milli, 2500);
    ck_assert_uint_eq(s->resources.memory_bytes, 1610612736ull);
    ck_assert_uint_eq(s->resources.disk.iops, 1500);
    ck_assert_uint_eq(s->resources.disk.bandwidth, 125000000ull);
    ck_assert_int_eq(s->resources.disk.iface, CRATER_IFACE_VIRTIO);
    ck_assert_uint_eq(s->resources.disk.max_latency_us, 2); /* rounded up */
    crater_jobspec_destroy(s);
}
END_TEST

START_TEST(test_full_spec_values)
{
    crater_jobspec_t *s = decode_ok(full_spec);

    ck_assert_str_eq(s->name, "every-field.v2");
    ck_assert_str_eq(s->tenant, "team-a");
    ck_assert_int_eq(s->workload_type, CRATER_WORKLOAD_INFERENCE);
    ck_assert(s->workload_type_explicit);
    ck_assert_int_eq(s->priority, -42);
    ck_assert_str_eq(s->priority_class, "high");
    ck_assert(s->preemptible);
    ck_assert(s->no_idle_reclaim); /* idleReclaim: false */
    ck_assert_uint_eq(s->grace_period_ms, 90000);
    ck_assert(s->cpu_limit_multiplier == 2.5);
    ck_assert(s->cpu_burst);
    ck_assert_int_eq(s->io_profile, CRATER_IO_MODEL_LOADING);
    ck_assert_int_eq(s->numa, CRATER_NUMA_STRICT);
    ck_assert_str_eq(s->dataset, "imagenet");
    ck_assert_int_eq(s->locality, CRATER_LOCALITY_REQUIRED);
    ck_assert_str_eq(s->checkpoint.dir, "/ckpt");
    ck_assert_uint_eq(s->checkpoint.interval_ms, 3600000);
    ck_assert_uint_eq(s->checkpoint.incremental_interval_ms, 600000);
    /* 2024-06-15T02:00:00.250Z */
    ck_assert_int_eq(s->deadline_ms, 1718416800250ll);
    ck_assert_int_eq(s->deadline_policy, CRATER_DEADLINE_HARD);
    ck_assert(s->cost_cap == 99.95);
    ck_assert_str_eq(s->profile, "bert-train-infer@1.0");
    ck_assert_uint_eq(s->replicas, 3);
    ck_assert(s->gang);
    ck_assert_str_eq(s->after[0], "prep");
    ck_assert_str_eq(s->after[1], "tokenize");
    ck_assert_ptr_null(s->after[2]);
    ck_assert(s->inference.enabled);
    ck_assert_uint_eq(s->inference.port, 9000);
    ck_assert_uint_eq(s->inference.min_replicas, 2);
    ck_assert_uint_eq(s->inference.max_replicas, 6);
    ck_assert(s->inference.target_qps == 1200.5);
    ck_assert_uint_eq(s->inference.warm_pool_size, 2);
    ck_assert_uint_eq(s->inference.max_batch_size, 32);
    ck_assert_uint_eq(s->inference.batch_timeout_ms, 10);
    ck_assert_str_eq(s->command[3], "4"); /* a YAML integer, as text */
    ck_assert_str_eq(s->image, "registry.local/llm:1.2");
    ck_assert_uint_eq(s->nenv, 4);
    ck_assert_str_eq(s->env[0].key, "RATIO");
    ck_assert_str_eq(s->env[0].value, "0.10"); /* as written, not 0.1 */
    ck_assert_str_eq(s->env[1].value, "True");
    ck_assert_str_eq(s->env[2].value, "");
    ck_assert_str_eq(s->env[3].value, "null");
    ck_assert_str_eq(s->workdir, "/srv/app");
    ck_assert_uint_eq(s->nselector, 2);
    ck_assert_str_eq(s->selector[1].key, "crater.io/gpu-count");
    ck_assert_str_eq(s->selector[1].value, "8");
    ck_assert_uint_eq(s->ntolerations, 2);
    ck_assert_str_eq(s->tolerations[0].value, "true");
    ck_assert_int_eq(s->tolerations[0].effect, CRATER_TAINT_NO_EXECUTE);
    ck_assert_str_eq(s->tolerations[1].key, "spot");
    ck_assert_ptr_null(s->tolerations[1].value);
    ck_assert_int_eq(s->tolerations[1].effect, -1);
    ck_assert_int_eq(crater_jobspec_validate(s, kb, NULL), 0);
    check_round_trip(s);
    crater_jobspec_destroy(s);
}
END_TEST

START_TEST(test_quantities)
{
    crater_jobspec_t *s;

    s = decode_ok("gracePeriod: 300\nresources: {cpu: 0.5, memory: 20000MB}");
    ck_assert_uint_eq(s->grace_period_ms, 300000); /* bare = seconds */
    ck_assert_uint_eq(s->resources.cpu_milli, 500);
    ck_assert_uint_eq(s->resources.memory_bytes, 20000000000ull);
    crater_jobspec_destroy(s);
    s = decode_ok("gracePeriod: 1500us\nresources: {cpu: 8, memory: 1Gi}");
    ck_assert_uint_eq(s->grace_period_ms, 2); /* ns -> ms rounds up */
    ck_assert_uint_eq(s->resources.cpu_milli, 8000);
    ck_assert_uint_eq(s->resources.memory_bytes, 1073741824ull);
    crater_jobspec_destroy(s);
    s = decode_ok("{\"gracePeriod\": \"0s\", \"resources\": {\"cpu\": "
                  "\"250m\", \"memory\": 4096}}");
    ck_assert_uint_eq(s->grace_period_ms, 0);
    ck_assert_uint_eq(s->resources.cpu_milli, 250);
    ck_assert_uint_eq(s->resources.memory_bytes, 4096);
    crater_jobspec_destroy(s);
    decode_fails("resources: {disk: {bandwidth: 500}}",
                 CRATER_EUNIT,
                 "t.yaml:1:20: resources.disk.bandwidth: '500': a bandwidth "
                 "needs a unit (e.g. 2039GB/s or 100Gbps)");
    decode_fails("gracePeriod: -5s",
                 CRATER_EUNIT,
                 "t.yaml:1:1: gracePeriod: '-5s': a duration cannot be "
                 "negative");
}
END_TEST

/* Issue 11: job arrays. The expression parses to sorted, distinct
 * indexes and a cap; every malformed form is refused saying why; the
 * normalised spec carries the canonical text, and decoding it again gives
 * the same array. */
static void array_ok(const char *text,
                     size_t n,
                     uint32_t first,
                     uint32_t last,
                     uint32_t par,
                     const char *canon)
{
    uint32_t *idx = NULL, p = 0;
    size_t got = 0;
    crater_error_t err = {0};
    char *f;

    ck_assert_msg(crater_array_parse(text, &idx, &got, &p, &err) == 0,
                  "%s: %s",
                  text,
                  err.text);
    ck_assert_uint_eq(got, n);
    ck_assert_uint_eq(idx[0], first);
    ck_assert_uint_eq(idx[n - 1], last);
    ck_assert_uint_eq(p, par);
    f = crater_array_format(idx, got, p);
    ck_assert_str_eq(f, canon);
    free(f);
    free(idx);
}

static void array_bad(const char *text, const char *want)
{
    uint32_t *idx = NULL, p = 0;
    size_t got = 0;
    crater_error_t err = {0};

    ck_assert_int_eq(crater_array_parse(text, &idx, &got, &p, &err), -1);
    ck_assert_msg(strstr(err.text, want), "%s: '%s'", text, err.text);
    ck_assert_ptr_null(idx);
}

/* Issue 12: a request near 2^64 once wrapped a tenant's quota sum; every
 * request has a maximum now, with a clear error naming the field. */
START_TEST(test_request_maxima)
{
    validate_fails("resources: {memory: 18446744072635809792B}",
                   NULL,
                   CRATER_ERANGE,
                   "resources.memory",
                   "resources.memory: 18446744072635809792 bytes is more "
                   "than 1Pi, the most a job may ask for");
    validate_fails("resources: {gpu: {count: 1, memory: 2Ti}}",
                   NULL,
                   CRATER_ERANGE,
                   "resources.gpu.memory",
                   "resources.gpu.memory: 2199023255552 bytes is more than "
                   "1Ti, the most a GPU slice may be");
    validate_fails("resources: {cpu: 1000001}",
                   NULL,
                   CRATER_ERANGE,
                   "resources.cpu",
                   "resources.cpu: 1000001000 millicores is more than "
                   "1000000 cores, the most a job may ask for");
    validate_ok("resources: {memory: 1Pi, cpu: 1000000}");
}
END_TEST

START_TEST(test_arrays)
{
    crater_jobspec_t *s;
    json_t *norm;

    array_ok("0-999", 1000, 0, 999, 0, "0-999");
    array_ok("0-999%10", 1000, 0, 999, 10, "0-999%10");
    array_ok("7", 1, 7, 7, 0, "7");
    array_ok("5,1,3-4,1", 4, 1, 5, 0, "1,3-5");
    array_ok("0-10:5%1", 3, 0, 10, 1, "0,5,10%1");
    array_ok("0-9999", 10000, 0, 9999, 0, "0-9999");
    array_bad("", "not an array expression");
    array_bad("5-2", "'5-2': the range ends before it starts");
    array_bad("0-10000", "at most 10000 jobs");
    array_bad("1-x", "not an array expression");
    array_bad("1,,2", "not an array expression");
    array_bad("0-9%0", "%P needs a whole number");
    array_bad("0-9%", "%P needs a whole number");
    array_bad("0-9:0", "not an array expression");
    array_bad("-1", "not an array expression");
    array_bad("1234567890", "not an array expression");
    array_bad("10000000", "indexes go up to 9999999");
    decode_fails("array: 5",
                 CRATER_ETYPE,
                 "t.yaml:1:1: array: expected a string such as \"0-999\" "
                 "or \"1,3,5-7%2\", got an integer");
    decode_fails("array: \"3-1\"",
                 CRATER_EINVAL,
                 "t.yaml:1:1: array: '3-1': the range ends before it starts");
    s = decode_ok("array: \"4,0-2%2\"");
    ck_assert_uint_eq(s->narray, 4);
    ck_assert_uint_eq(s->array_parallelism, 2);
    norm = crater_jobspec_encode(s);
    ck_assert_str_eq(json_string_value(json_object_get(norm, "array")),
                     "0-2,4%2");
    json_decref(norm);
    crater_jobspec_destroy(s);
}
END_TEST

/* Issue 11: a size a person writes needs a unit, in YAML or as a string;
 * a JSON number (the normalised form craterd stores) stays bytes. */
START_TEST(test_sizes_need_units)
{
    crater_jobspec_t *s;
    crater_dec_t d;
    crater_error_t err;
    json_t *norm;

    decode_fails("resources: {memory: 512}",
                 CRATER_EUNIT,
                 "t.yaml:1:13: resources.memory: '512' has no unit: write "
                 "512Mi or 512M");
    decode_fails("resources: {memory: \"512\"}",
                 CRATER_EUNIT,
                 "t.yaml:1:13: resources.memory: '512' has no unit: write "
                 "512Mi or 512M");
    decode_fails("resources:\n  gpu: {count: 1, memory: 20480}\n",
                 CRATER_EUNIT,
                 "t.yaml:2:19: resources.gpu.memory: '20480' has no unit: "
                 "write 20480Mi or 20480M");
    decode_fails("resources: {memory: 1.5}",
                 CRATER_EUNIT,
                 "t.yaml:1:13: resources.memory: '1.5' has no unit: write "
                 "1.5Mi or 1.5M");
    decode_fails("{\"resources\": {\"memory\": \"512\"}}",
                 CRATER_EUNIT,
                 "t.yaml: resources.memory: '512' has no unit: write 512Mi "
                 "or 512M");
    s = decode_ok("resources: {memory: 0, gpu: {count: 1, memory: 0}}");
    ck_assert_uint_eq(s->resources.memory_bytes, 0);
    crater_jobspec_destroy(s);
    s = decode_ok("{\"resources\": {\"memory\": 536870912, \"gpu\": "
                  "{\"count\": 1, \"memory\": 21474836480}}}");
    ck_assert_uint_eq(s->resources.memory_bytes, 512ull << 20);
    ck_assert_uint_eq(s->resources.gpu.memory_bytes, 20ull << 30);
    /* the normalised spec, as craterd re-reads it from its store */
    norm = crater_jobspec_encode(s);
    crater_jobspec_destroy(s);
    ck_assert_int_eq(json_integer_value(
                         json_object_get(json_object_get(norm, "resources"),
                                         "memory")),
                     512ll << 20);
    crater_dec_init(&d, NULL, 0, &err);
    s = NULL;
    ck_assert_msg(crater_jobspec_decode(&d, norm, &s) == 0, "%s", err.text);
    ck_assert_uint_eq(s->resources.memory_bytes, 512ull << 20);
    ck_assert_uint_eq(s->resources.gpu.memory_bytes, 20ull << 30);
    crater_jobspec_destroy(s);
    json_decref(norm);
}
END_TEST

START_TEST(test_gpu_forms)
{
    crater_jobspec_t *s;

    s = decode_ok("resources: {gpu: 2}");
    ck_assert_uint_eq(s->resources.gpu.count, 2);
    ck_assert_uint_eq(s->resources.gpu.memory_bytes, 0);
    crater_jobspec_destroy(s);
    s = decode_ok("resources: {gpu: {memory: 10Gi}}");
    ck_assert_uint_eq(s->resources.gpu.count, 1); /* mapping: count 1 */
    crater_jobspec_destroy(s);
    s = decode_ok("resources: {gpu: {count: 2, nvlink: true, model: t4}}");
    ck_assert_int_eq(s->resources.gpu.nvlink, CRATER_NVLINK_REQUIRED);
    ck_assert_str_eq(s->resources.gpu.models[0], "t4");
    crater_jobspec_destroy(s);
    s = decode_ok("resources: {gpu: {nvlink: false}}");
    ck_assert_int_eq(s->resources.gpu.nvlink, CRATER_NVLINK_ANY);
    crater_jobspec_destroy(s);
    s = decode_ok("resources: {gpu: {minComputeCapability: sm_75}}");
    ck_assert_uint_eq(s->resources.gpu.min_compute_cap, 75);
    crater_jobspec_destroy(s);
    s = decode_ok("resources: {gpu: {minComputeCapability: 7.5}}");
    ck_assert_uint_eq(s->resources.gpu.min_compute_cap, 75);
    crater_jobspec_destroy(s);
    s = decode_ok("resources: {gpu: {minComputeCapability: 75}}");
    ck_assert_uint_eq(s->resources.gpu.min_compute_cap, 75);
    crater_jobspec_destroy(s);
    s = decode_ok("resources: {gpu: {minComputeCapability: '9.0'}}");
    ck_assert_uint_eq(s->resources.gpu.min_compute_cap, 90);
    crater_jobspec_destroy(s);
    decode_fails("resources:\n  gpu: 0.5\n",
                 CRATER_ETYPE,
                 "t.yaml:2:3: resources.gpu: a fraction of a GPU is a memory "
                 "slice: write gpu: {count: 1, memory: 20Gi}");
    decode_fails("resources: {gpu: '2'}",
                 CRATER_ETYPE,
                 "t.yaml:1:13: resources.gpu: expected a GPU count or a "
                 "mapping, got a string");
    decode_fails("resources: {gpu: {model: []}}",
                 CRATER_EINVAL,
                 "t.yaml:1:19: resources.gpu.model: empty list; leave model "
                 "out to allow any GPU");
    decode_fails("resources: {gpu: {nvlink: always}}",
                 CRATER_EINVAL,
                 "t.yaml:1:19: resources.gpu.nvlink: 'always' is not one "
                 "of: any, preferred, required");
}
END_TEST

/* Issue 13: timeLimit is a duration of 1s to 366d; absent means none;
 * the normalised spec carries it only when set. */
START_TEST(test_time_limit)
{
    crater_jobspec_t *s;
    json_t *enc;

    s = decode_ok("timeLimit: 2h");
    ck_assert_uint_eq(s->time_limit_ms, 7200000);
    enc = crater_jobspec_encode(s);
    ck_assert_str_eq(json_string_value(json_object_get(enc, "timeLimit")),
                     "7200000ms");
    json_decref(enc);
    check_round_trip(s);
    crater_jobspec_destroy(s);
    s = decode_ok("timeLimit: 90"); /* bare = seconds */
    ck_assert_uint_eq(s->time_limit_ms, 90000);
    crater_jobspec_destroy(s);
    s = decode_ok("name: x");
    ck_assert_uint_eq(s->time_limit_ms, 0);
    enc = crater_jobspec_encode(s);
    ck_assert_ptr_null(json_object_get(enc, "timeLimit"));
    json_decref(enc);
    crater_jobspec_destroy(s);
    decode_fails("timeLimit: 500ms",
                 CRATER_ERANGE,
                 "t.yaml:1:1: timeLimit: must be between 1s and 366d (omit "
                 "it for no limit), got 500ms");
    decode_fails("timeLimit: 0",
                 CRATER_ERANGE,
                 "t.yaml:1:1: timeLimit: must be between 1s and 366d (omit "
                 "it for no limit), got 0ms");
    decode_fails("timeLimit: 400d",
                 CRATER_ERANGE,
                 "t.yaml:1:1: timeLimit: must be between 1s and 366d (omit "
                 "it for no limit), got 34560000000ms");
    decode_fails("timeLimit: -1h",
                 CRATER_EUNIT,
                 "t.yaml:1:1: timeLimit: '-1h': a duration cannot be "
                 "negative");
}
END_TEST

START_TEST(test_deadline)
{
    crater_jobspec_t *s;
    json_t *enc;

    s = decode_ok("deadline: 2024-06-15T10:00:00Z");
    ck_assert_int_eq(s->deadline_ms, 1718445600000ll);
    crater_jobspec_destroy(s);
    s = decode_ok("deadline: 2024-06-15t10:00:00-05:30");
    ck_assert_int_eq(s->deadline_ms, 1718445600000ll + 19800000ll);
    crater_jobspec_destroy(s);
    s = decode_ok("deadline: '2024-02-29 00:00:00.0001Z'"); /* rounds up */
    ck_assert_int_eq(s->deadline_ms, 1709164800001ll);
    enc = crater_jobspec_encode(s);
    ck_assert_str_eq(json_string_value(json_object_get(enc, "deadline")),
                     "2024-02-29T00:00:00.001Z");
    json_decref(enc);
    check_round_trip(s);
    crater_jobspec_destroy(s);
    decode_fails("deadline: 2023-02-29T00:00:00Z",
                 CRATER_ERANGE,
                 "t.yaml:1:1: deadline: '2023-02-29T00:00:00Z': no such date "
                 "or time, or before 1970");
    decode_fails("deadline: 1969-12-31T23:59:59Z",
                 CRATER_ERANGE,
                 "t.yaml:1:1: deadline: '1969-12-31T23:59:59Z': no such date "
                 "or time, or before 1970");
    decode_fails("deadline: 2024-06-15",
                 CRATER_EINVAL,
                 "t.yaml:1:1: deadline: '2024-06-15' is not an RFC 3339 "
                 "timestamp such as 2024-06-15T10:00:00Z");
    decode_fails("deadline: 2024-06-15T10:00:00",
                 CRATER_EINVAL,
                 "t.yaml:1:1: deadline: '2024-06-15T10:00:00' is not an RFC "
                 "3339 timestamp such as 2024-06-15T10:00:00Z");
    decode_fails("deadline: 1718445600",
                 CRATER_ETYPE,
                 "t.yaml:1:1: deadline: expected an RFC 3339 timestamp such "
                 "as 2024-06-15T10:00:00Z, got an integer");
}
END_TEST

START_TEST(test_command_and_env)
{
    crater_jobspec_t *s;

    s = decode_ok("command: [python, -c, 'print(1)', 3, 2.50, true]");
    ck_assert_str_eq(s->command[3], "3");
    ck_assert_str_eq(s->command[4], "2.50");
    ck_assert_str_eq(s->command[5], "true");
    ck_assert_ptr_null(s->command[6]);
    crater_jobspec_destroy(s);
    decode_fails("command: python train.py",
                 CRATER_ETYPE,
                 "t.yaml:1:1: command: give a list, not a string: Crater "
                 "runs argv without a shell, e.g. [python, train.py]");
    decode_fails("command: []",
                 CRATER_EINVAL,
                 "t.yaml:1:1: command: empty list; give at least the program "
                 "to run");
    decode_fails("command: ['', x]",
                 CRATER_EINVAL,
                 "t.yaml:1:12: command[0]: the program name must not be "
                 "empty");
    decode_fails("command: [a, {b: c}]",
                 CRATER_ETYPE,
                 "t.yaml:1:14: command[1]: expected a string, number or "
                 "boolean, got a mapping");
    decode_fails("env:\n  A: 1\n  B-C: x\n",
                 CRATER_EINVAL,
                 "t.yaml:3:3: env.B-C: not a valid variable name: use "
                 "letters, digits and '_', not starting with a digit");
    decode_fails("env:\n  CUDA_VISIBLE_DEVICES: '0'\n",
                 CRATER_ECONFLICT,
                 "t.yaml:2:3: env.CUDA_VISIBLE_DEVICES: set by Crater from "
                 "the GPUs it assigns; remove it");
    decode_fails("env:\n  X: ~\n",
                 CRATER_ETYPE,
                 "t.yaml:2:3: env.X: expected a string, number or boolean, "
                 "got null");
    decode_fails("env: [A=1]",
                 CRATER_ETYPE,
                 "t.yaml:1:1: env: expected a mapping, got a list");
    decode_fails("workdir: srv/app",
                 CRATER_EINVAL,
                 "t.yaml:1:1: workdir: 'srv/app' is not an absolute path");
}
END_TEST

START_TEST(test_names_and_enums)
{
    crater_jobspec_t *s = decode_ok("name: a\ntenant: 0-x.y\n");

    ck_assert_str_eq(s->name, "a");
    ck_assert_str_eq(s->tenant, "0-x.y");
    crater_jobspec_destroy(s);
    decode_fails("name: My_Job",
                 CRATER_EINVAL,
                 "t.yaml:1:1: name: not a valid name: use 1-63 of a-z 0-9 - "
                 ". starting and ending with a-z or 0-9");
    decode_fails("tenant: -team",
                 CRATER_EINVAL,
                 "t.yaml:1:1: tenant: not a valid name: use 1-63 of a-z 0-9 "
                 "- . starting and ending with a-z or 0-9");
    decode_fails("name: ''",
                 CRATER_EINVAL,
                 "t.yaml:1:1: name: not a valid name: use 1-63 of a-z 0-9 - "
                 ". starting and ending with a-z or 0-9");
    decode_fails("after: [ok, Not-Ok]",
                 CRATER_EINVAL,
                 "t.yaml:1:13: after[1]: not a valid name: use 1-63 of a-z "
                 "0-9 - . starting and ending with a-z or 0-9");
    decode_fails("workloadType: train",
                 CRATER_EINVAL,
                 "t.yaml:1:1: workloadType: 'train' is not one of: training, "
                 "inference, batch, interactive");
    decode_fails("ioProfile: fast",
                 CRATER_EINVAL,
                 "t.yaml:1:1: ioProfile: 'fast' is not one of: default, "
                 "training, inference, model-loading, none");
    decode_fails("apiVersion: crater/v2",
                 CRATER_EINVAL,
                 "t.yaml:1:1: apiVersion: 'crater/v2' is not supported here "
                 "(expected crater/v1)");
    decode_fails("kind: Profile",
                 CRATER_EINVAL,
                 "t.yaml:1:1: kind: 'Profile' is not supported here (expected "
                 "Job)");
    decode_fails("priority: 1000001",
                 CRATER_ERANGE,
                 "t.yaml:1:1: priority: 1000001 is out of range [-1000000, "
                 "1000000]");
    decode_fails("cpuLimitMultiplier: 0.5",
                 CRATER_ERANGE,
                 "t.yaml:1:1: cpuLimitMultiplier: 0.5 is out of range [1, "
                 "16]");
    decode_fails("costCap: -1",
                 CRATER_ERANGE,
                 "t.yaml:1:1: costCap: -1 is out of range [0, 1e+15]");
    decode_fails("idleReclaim: off",
                 CRATER_ETYPE,
                 "t.yaml:1:1: idleReclaim: expected true or false, got a "
                 "string");
    decode_fails("preemptible: yes",
                 CRATER_ETYPE,
                 "t.yaml:1:1: preemptible: expected true or false, got a "
                 "string");
    decode_fails("profile: 'bert train'",
                 CRATER_EINVAL,
                 "t.yaml:1:1: profile: expected name@version without "
                 "spaces");
    decode_fails("- a\n- b\n",
                 CRATER_ETYPE,
                 "t.yaml:1:1: expected a mapping, got a list");
}
END_TEST

START_TEST(test_sections)
{
    crater_jobspec_t *s;

    s = decode_ok("dataLocality: {dataset: c4}");
    ck_assert_int_eq(s->locality, CRATER_LOCALITY_PREFERRED);
    crater_jobspec_destroy(s);
    decode_fails("dataLocality:\n  mode: required\n",
                 CRATER_EMISSING,
                 "t.yaml:1:1: dataLocality: missing required field "
                 "'dataset'");
    decode_fails("checkpoint:\n  checkpointInterval: 10m\n",
                 CRATER_EMISSING,
                 "t.yaml:1:1: checkpoint: missing required field 'dir'");
    decode_fails("checkpointInterval: 10m",
                 CRATER_EFIELD,
                 "t.yaml:1:1: checkpointInterval: unknown field "
                 "'checkpointInterval'");
    decode_fails("inference:\n  warmPoolSise: 1\n",
                 CRATER_EFIELD,
                 "t.yaml:2:3: inference.warmPoolSise: unknown field "
                 "'warmPoolSise' (did you mean 'warmPoolSize'?)");
    decode_fails("inference: {port: 0}",
                 CRATER_ERANGE,
                 "t.yaml:1:13: inference.port: 0 is out of range [1, "
                 "65535]");
    decode_fails("tolerations:\n  - {key: a, operator: Exists, value: b}\n",
                 CRATER_ECONFLICT,
                 "t.yaml:2:14: tolerations[0].operator: Exists matches any "
                 "value; remove value");
    decode_fails("tolerations:\n  - {key: a, operator: Equal}\n",
                 CRATER_ECONFLICT,
                 "t.yaml:2:14: tolerations[0].operator: Equal needs a value");
    decode_fails("tolerations:\n  - {key: a, effect: NoRun}\n",
                 CRATER_EINVAL,
                 "t.yaml:2:14: tolerations[0].effect: 'NoRun' is not one of: "
                 "NoSchedule, PreferNoSchedule, NoExecute");
    decode_fails("tolerations:\n  - {value: a}\n",
                 CRATER_EMISSING,
                 "t.yaml:2:5: tolerations[0]: missing required field 'key'");
}
END_TEST

/* ---- workloadType inference ---------------------------------------------- */

static crater_workload_t infer(const char *a0,
                               const char *a1,
                               const char *a2,
                               const char *image)
{
    char *argv[] = {(char *)a0, (char *)a1, (char *)a2, NULL};

    return crater_workload_infer(a0 ? argv : NULL, image);
}

START_TEST(test_infer_rules)
{
    const crater_workload_t T = CRATER_WORKLOAD_TRAINING;
    const crater_workload_t I = CRATER_WORKLOAD_INFERENCE;
    const crater_workload_t B = CRATER_WORKLOAD_BATCH;

    /* training */
    ck_assert_int_eq(infer("torchrun", "--nproc-per-node=8", "x.py", NULL), T);
    ck_assert_int_eq(infer("/usr/local/bin/deepspeed", "x.py", NULL, NULL), T);
    ck_assert_int_eq(infer("accelerate", "launch", "x.py", NULL), T);
    ck_assert_int_eq(infer("python", "train.py", NULL, NULL), T);
    ck_assert_int_eq(infer("python", "scripts/pretrain_gpt.py", NULL, NULL), T);
    ck_assert_int_eq(infer("python", "-m", "torch.distributed.run", NULL), T);
    ck_assert_int_eq(infer("python", "Trainer.py", NULL, NULL), T);
    /* a training word wins over an inference word */
    ck_assert_int_eq(infer("python", "train.py", "--port=29500", NULL), T);
    /* inference */
    ck_assert_int_eq(infer("vllm", "serve", "m", NULL), I);
    ck_assert_int_eq(infer("/opt/tritonserver/bin/tritonserver",
                           NULL,
                           NULL,
                           NULL),
                     I);
    ck_assert_int_eq(infer("triton", NULL, NULL, NULL), I);
    ck_assert_int_eq(infer("python", "serve.py", NULL, NULL), I);
    ck_assert_int_eq(infer("python", "app.py", "--port", NULL), I);
    ck_assert_int_eq(infer("python", "app.py", "--port=8000", NULL), I);
    ck_assert_int_eq(infer("python", "-m", "vllm.entrypoints.openai", NULL), I);
    /* words, not substrings */
    ck_assert_int_eq(infer("python", "solve.py", "--constraints", NULL), B);
    ck_assert_int_eq(infer("python", "observe.py", "--ports=2", NULL), B);
    ck_assert_int_eq(infer("python", "accelerate.py", "launch", NULL), B);
    /* image, when the command says nothing */
    ck_assert_int_eq(infer("python", "main.py", NULL, "vllm/vllm-openai:v1"),
                     I);
    ck_assert_int_eq(infer(NULL,
                           NULL,
                           NULL,
                           "nvcr.io/nvidia/tritonserver:24.01-py3"),
                     I);
    ck_assert_int_eq(infer(NULL, NULL, NULL, "myorg/bert-train:1"), T);
    ck_assert_int_eq(infer(NULL, NULL, NULL, "pytorch/pytorch:2.3"), B);
    /* the command wins over the image */
    ck_assert_int_eq(infer("torchrun", "x.py", NULL, "vllm/vllm-openai"), T);
    ck_assert_int_eq(infer(NULL, NULL, NULL, NULL), B);
    ck_assert_str_eq(crater_workload_name(T), "training");
    ck_assert_str_eq(crater_workload_name(CRATER_WORKLOAD_INTERACTIVE),
                     "interactive");
}
END_TEST

START_TEST(test_infer_in_decode)
{
    crater_jobspec_t *s;

    s = decode_ok("command: [torchrun, x.py]\n");
    ck_assert_int_eq(s->workload_type, CRATER_WORKLOAD_TRAINING);
    ck_assert(!s->workload_type_explicit);
    check_round_trip(s);
    crater_jobspec_destroy(s);
    s = decode_ok("command: [torchrun, x.py]\nworkloadType: batch\n");
    ck_assert_int_eq(s->workload_type, CRATER_WORKLOAD_BATCH); /* explicit */
    ck_assert(s->workload_type_explicit);
    check_round_trip(s);
    crater_jobspec_destroy(s);
    s = decode_ok("image: vllm/vllm-openai\n");
    ck_assert_int_eq(s->workload_type, CRATER_WORKLOAD_INFERENCE);
    crater_jobspec_destroy(s);
    /* an inference section makes it inference, whatever the command */
    s = decode_ok("command: [python, train.py]\ninference: {port: 80}\n");
    ck_assert_int_eq(s->workload_type, CRATER_WORKLOAD_INFERENCE);
    ck_assert(!s->workload_type_explicit);
    check_round_trip(s);
    crater_jobspec_destroy(s);
}
END_TEST

/* ---- validation ------------------------------------------------------------
 */

START_TEST(test_validate_contradictions)
{
    validate_fails("gang: true\nreplicas: 0\n",
                   NULL,
                   CRATER_ECONFLICT,
                   "replicas",
                   "replicas: gang: true needs at least 1 replica, but "
                   "replicas is 0");
    validate_fails("replicas: 0\n",
                   NULL,
                   CRATER_ERANGE,
                   "replicas",
                   "replicas: must be at least 1 (inference.minReplicas: 0 "
                   "lets a service scale to zero)");
    validate_fails("resources: {gpu: {count: 0, memory: 10Gi}}",
                   NULL,
                   CRATER_ECONFLICT,
                   "resources.gpu.memory",
                   "resources.gpu.memory: a GPU memory slice needs "
                   "resources.gpu.count >= 1 (count is 0)");
    validate_fails("resources: {gpu: {count: 0, model: t4}}",
                   NULL,
                   CRATER_ECONFLICT,
                   "resources.gpu.model",
                   "resources.gpu.model: GPU constraints need "
                   "resources.gpu.count >= 1 (count is 0)");
    validate_fails("resources: {gpu: {count: 0, minSmCount: 80}}",
                   NULL,
                   CRATER_ECONFLICT,
                   "resources.gpu.minSmCount",
                   "resources.gpu.minSmCount: GPU constraints need "
                   "resources.gpu.count >= 1 (count is 0)");
    validate_fails("resources: {gpu: {count: 1, nvlink: required}}",
                   NULL,
                   CRATER_ECONFLICT,
                   "resources.gpu.nvlink",
                   "resources.gpu.nvlink: required NVLink needs count >= 2 "
                   "GPUs per replica (count is 1)");
    validate_fails("resources: {gpu: {count: 2, isolation: mig}}",
                   NULL,
                   CRATER_ECONFLICT,
                   "resources.gpu.isolation",
                   "resources.gpu.isolation: isolation: mig runs a task on "
                   "one MIG device (a CUDA process sees one), so it needs "
                   "count: 1 (count is 2)");
}
END_TEST

START_TEST(test_validate_inference_checkpoint)
{
    validate_fails("inference: {minReplicas: 4, maxReplicas: 2}",
                   NULL,
                   CRATER_ECONFLICT,
                   "inference.minReplicas",
                   "inference.minReplicas: 4 is more than "
                   "inference.maxReplicas (2)");
    validate_fails("inference: {maxReplicas: 2, warmPoolSize: 3}",
                   NULL,
                   CRATER_ECONFLICT,
                   "inference.warmPoolSize",
                   "inference.warmPoolSize: 3 is more than "
                   "inference.maxReplicas (2)");
    validate_fails("replicas: 9\ninference: {maxReplicas: 4}",
                   NULL,
                   CRATER_ECONFLICT,
                   "replicas",
                   "replicas: 9 is outside inference.minReplicas..maxReplicas "
                   "(1..4)");
    validate_fails("workloadType: training\ninference: {port: 80}",
                   NULL,
                   CRATER_ECONFLICT,
                   "inference",
                   "inference: an inference section needs workloadType "
                   "inference (workloadType is training)");
    validate_fails("checkpoint: {dir: /c, checkpointInterval: 5m, "
                   "incrementalInterval: 5m}",
                   NULL,
                   CRATER_ECONFLICT,
                   "checkpoint.incrementalInterval",
                   "checkpoint.incrementalInterval: 5m must be shorter than "
                   "checkpointInterval 5m");
    validate_fails("checkpoint: {dir: /c, incrementalInterval: 30s}",
                   NULL,
                   CRATER_ECONFLICT,
                   "checkpoint.incrementalInterval",
                   "checkpoint.incrementalInterval: needs "
                   "checkpoint.checkpointInterval (incremental checkpoints "
                   "build on full ones)");
    validate_fails("deadlinePolicy: hard\n",
                   NULL,
                   CRATER_ECONFLICT,
                   "deadlinePolicy",
                   "deadlinePolicy: hard needs a deadline");
    validate_fails("name: a\nafter: [b, a]\n",
                   NULL,
                   CRATER_ECONFLICT,
                   "after[1]",
                   "after[1]: job 'a' cannot wait for itself");
}
END_TEST

/* Contradictions that decoding cannot produce (a required field makes
 * them a decode error) are still caught for specs built in code. */
START_TEST(test_validate_built_specs)
{
    crater_jobspec_t *s = crater_jobspec_create();
    crater_error_t err;

    s->checkpoint.interval_ms = 60000;
    ck_assert_int_eq(crater_jobspec_validate(s, NULL, &err), -1);
    ck_assert_str_eq(err.text,
                     "checkpoint.checkpointInterval: checkpoint "
                     "intervals need checkpoint.dir");
    s->checkpoint.interval_ms = 0;
    s->locality = CRATER_LOCALITY_REQUIRED;
    ck_assert_int_eq(crater_jobspec_validate(s, NULL, &err), -1);
    ck_assert_str_eq(err.text, "dataLocality.mode: needs dataLocality.dataset");
    ck_assert_str_eq(err.field, "dataLocality.mode");
    s->locality = CRATER_LOCALITY_NONE;
    ck_assert_int_eq(crater_jobspec_validate(s, NULL, &err), 0);
    crater_jobspec_destroy(s);
}
END_TEST

START_TEST(test_validate_kb)
{
    validate_ok("resources: {gpu: {count: 1, memory: 80Gi, model: "
                "a100-sxm4-80gb}}");
    validate_ok("resources: {gpu: {count: 8, model: 'NVIDIA H100 80GB HBM3', "
                "nvlink: required}}");
    validate_fails("resources: {gpu: {count: 2, model: a100-80gb}}",
                   kb,
                   CRATER_EINVAL,
                   "resources.gpu.model",
                   "resources.gpu.model: unknown GPU model 'a100-80gb' (did "
                   "you mean 'a100-pcie-80gb'?)");
    validate_fails("resources: {gpu: {count: 2, model: [t4, h100]}}",
                   kb,
                   CRATER_EINVAL,
                   "resources.gpu.model[1]",
                   "resources.gpu.model[1]: unknown GPU model 'h100' (did you "
                   "mean 'h100-sxm5-80gb'?)");
    validate_fails("resources: {gpu: {memory: 41Gi, model: [t4, "
                   "a100-sxm4-40gb]}}",
                   kb,
                   CRATER_EIMPOSSIBLE,
                   "resources.gpu.memory",
                   "resources.gpu.memory: a 41Gi slice is larger than any "
                   "allowed GPU (largest: 40Gi, a100-sxm4-40gb)");
    /* no model given: the largest GPU in the knowledge base */
    validate_fails("resources: {gpu: {memory: 200Gi}}",
                   kb,
                   CRATER_EIMPOSSIBLE,
                   "resources.gpu.memory",
                   "resources.gpu.memory: a 200Gi slice is larger than any "
                   "allowed GPU (largest: 143771Mi, h200-sxm-141gb)");
}
END_TEST

START_TEST(test_validate_kb_capabilities)
{
    validate_fails("resources: {gpu: {minSmCount: 200}}",
                   kb,
                   CRATER_EIMPOSSIBLE,
                   "resources.gpu.minSmCount",
                   "resources.gpu.minSmCount: no allowed GPU has 200 SMs "
                   "(most: 142, l40s)");
    validate_fails("resources: {gpu: {model: t4, minComputeCapability: "
                   "sm_80}}",
                   kb,
                   CRATER_EIMPOSSIBLE,
                   "resources.gpu.minComputeCapability",
                   "resources.gpu.minComputeCapability: no allowed GPU "
                   "reaches sm_80 (highest: sm_75, t4)");
    validate_fails("resources: {gpu: {minHbmBandwidth: 10TB/s}}",
                   kb,
                   CRATER_EIMPOSSIBLE,
                   "resources.gpu.minHbmBandwidth",
                   "resources.gpu.minHbmBandwidth: no allowed GPU reaches "
                   "10TB/s (fastest: 4800GB/s, h200-sxm-141gb)");
    /* constraints narrow each other: a 60Gi slice leaves the 80GB A100s,
     * the H100s and the H200, so the 142-SM L40S no longer counts */
    validate_fails("resources: {gpu: {memory: 60Gi, minComputeCapability: "
                   "8.9, minSmCount: 140}}",
                   kb,
                   CRATER_EIMPOSSIBLE,
                   "resources.gpu.minSmCount",
                   "resources.gpu.minSmCount: no allowed GPU has 140 SMs "
                   "(most: 132, h100-sxm5-80gb)");
    validate_fails("resources: {gpu: {count: 2, model: [t4, l4], nvlink: "
                   "required}}",
                   kb,
                   CRATER_EIMPOSSIBLE,
                   "resources.gpu.nvlink",
                   "resources.gpu.nvlink: NVLink is required but no allowed "
                   "GPU model has it");
    validate_fails("resources: {gpu: {vendor: amd}}",
                   kb,
                   CRATER_EIMPOSSIBLE,
                   "resources.gpu.vendor",
                   "resources.gpu.vendor: no known GPU model is from vendor "
                   "'amd'");
    /* without a kb the model checks are skipped */
    {
        crater_jobspec_t *s = decode_ok("resources: {gpu: {model: nope}}");
        ck_assert_int_eq(crater_jobspec_validate(s, NULL, NULL), 0);
        crater_jobspec_destroy(s);
    }
}
END_TEST

/* ---- bad input files --------------------------------------------------------
 */

struct bad_file {
    const char *file;
    bool at_decode;
    crater_errno_t errnum;
    const char *text;
    int line; /* of err.field in the document, for validate errors */
};

static const struct bad_file bad_files[] = {
    {"bad-unknown-field.yaml",
     true,
     CRATER_EFIELD,
     "tests/data/jobs/bad-unknown-field.yaml:5:5: resources.gpu.memroy: "
     "unknown field 'memroy' (did you mean 'memory'?)",
     0},
    {"bad-unknown-top.yaml",
     true,
     CRATER_EFIELD,
     "tests/data/jobs/bad-unknown-top.yaml:2:1: resourses: unknown field "
     "'resourses' (did you mean 'resources'?)",
     0},
    /* the unit parser's list of units is cut at 160 characters: compare
     * what is ours */
    {"bad-unit.yaml",
     true,
     CRATER_EUNIT,
     "tests/data/jobs/bad-unit.yaml:5:5: resources.gpu.memory: '20GB/s': "
     "'GB/s' is a bandwidth unit, expected a memory size",
     0},
    {"bad-command-string.yaml",
     true,
     CRATER_ETYPE,
     "tests/data/jobs/bad-command-string.yaml:2:1: command: give a list, not "
     "a string: Crater runs argv without a shell, e.g. [python, train.py]",
     0},
    {"bad-name.yaml",
     true,
     CRATER_EINVAL,
     "tests/data/jobs/bad-name.yaml:1:1: name: not a valid name: use 1-63 of "
     "a-z 0-9 - . starting and ending with a-z or 0-9",
     0},
    {"bad-type.json",
     true,
     CRATER_ETYPE,
     "tests/data/jobs/bad-type.json: replicas: expected an integer, got a "
     "string",
     0},
    {"bad-deadline.yaml",
     true,
     CRATER_ERANGE,
     "tests/data/jobs/bad-deadline.yaml:2:1: deadline: "
     "'2024-02-30T10:00:00Z': no such date or time, or before 1970",
     0},
    {"bad-gpu-fraction.yaml",
     true,
     CRATER_ETYPE,
     "tests/data/jobs/bad-gpu-fraction.yaml:3:3: resources.gpu: a fraction "
     "of a GPU is a memory slice: write gpu: {count: 1, memory: 20Gi}",
     0},
    {"bad-env.yaml",
     true,
     CRATER_EINVAL,
     "tests/data/jobs/bad-env.yaml:4:3: env.2BAD: not a valid variable name: "
     "use letters, digits and '_', not starting with a digit",
     0},
    {"bad-gang-replicas0.yaml",
     false,
     CRATER_ECONFLICT,
     "replicas: gang: true needs at least 1 replica, but replicas is 0",
     4},
    {"bad-slice-too-big.yaml",
     false,
     CRATER_EIMPOSSIBLE,
     "resources.gpu.memory: a 100Gi slice is larger than any allowed GPU "
     "(largest: 80Gi, a100-sxm4-80gb)",
     5},
    {"bad-model.yaml",
     false,
     CRATER_EINVAL,
     "resources.gpu.model[1]: unknown GPU model 'a100-80gb' (did you mean "
     "'a100-pcie-80gb'?)",
     5},
    {"bad-inference-training.yaml",
     false,
     CRATER_ECONFLICT,
     "inference: an inference section needs workloadType inference "
     "(workloadType is training)",
     3},
};

START_TEST(test_bad_files)
{
    const struct bad_file *b = &bad_files[_i];
    char rel[128];
    crater_doc_t *doc;
    crater_error_t err;
    crater_dec_t d;
    crater_jobspec_t *s = NULL;
    int rc, line = 0, col = 0;

    snprintf(rel, sizeof(rel), "tests/data/jobs/%s", b->file);
    doc = load_source(rel);
    crater_dec_init(&d, doc, 0, &err);
    rc = crater_jobspec_decode(&d, crater_doc_root(doc, 0), &s);
    ck_assert_int_eq(rc, b->at_decode ? -1 : 0);
    if (!b->at_decode) {
        ck_assert_int_eq(crater_jobspec_validate(s, kb, &err), -1);
        ck_assert_int_eq(crater_doc_where(doc, 0, err.field, &line, &col), 0);
        ck_assert_int_eq(line, b->line);
    }
    if (b->errnum == CRATER_EUNIT)
        ck_assert_msg(strncmp(err.text, b->text, strlen(b->text)) == 0,
                      "'%s' does not start with '%s'",
                      err.text,
                      b->text);
    else
        ck_assert_str_eq(err.text, b->text);
    ck_assert_str_eq(crater_errno_name(err.errnum),
                     crater_errno_name(b->errnum));
    crater_jobspec_destroy(s);
    crater_doc_destroy(doc);
}
END_TEST

/* ---- limits ---------------------------------------------------------------
 */

/* A JSON document {"key": [n copies of item]} (item is raw JSON). */
static char *json_list(const char *key, size_t n, const char *item)
{
    size_t len = strlen(key) + 16 + n * (strlen(item) + 1);
    char *buf = malloc(len), *p = buf;

    ck_assert_ptr_nonnull(buf);
    p += sprintf(p, "{\"%s\": [", key);
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "%s%s", i ? "," : "", item);
    strcpy(p, "]}");
    return buf;
}

START_TEST(test_limits)
{
    char *text, name[80];
    crater_error_t err;
    crater_jobspec_t *s;

    memset(name, 'a', 64);
    strcpy(name + 64, "\n");
    text = malloc(100);
    snprintf(text, 100, "name: %s", name);
    decode_fails(text,
                 CRATER_EINVAL,
                 "t.yaml:1:1: name: not a valid name: use 1-63 of a-z 0-9 - "
                 ". starting and ending with a-z or 0-9");
    snprintf(text, 100, "name: %.63s", name);
    s = decode_ok(text);
    ck_assert_uint_eq(strlen(s->name), 63);
    crater_jobspec_destroy(s);
    free(text);

    text = json_list("command", CRATER_JOB_MAX_ARGS, "\"x\"");
    s = decode_ok(text);
    ck_assert_uint_eq(crater_strv_len(s->command), CRATER_JOB_MAX_ARGS);
    crater_jobspec_destroy(s);
    free(text);
    text = json_list("command", CRATER_JOB_MAX_ARGS + 1, "\"x\"");
    ck_assert_ptr_null(decode_text(text, "t.json", &err));
    ck_assert_str_eq(err.text,
                     "t.json: command: list has 1025 entries, at most 1024 "
                     "allowed");
    ck_assert_int_eq(err.errnum, CRATER_ELIMIT);
    free(text);

    text = malloc(CRATER_JOB_MAX_ARG_LEN + 64);
    strcpy(text, "{\"command\": [\"");
    memset(text + strlen(text), 'y', CRATER_JOB_MAX_ARG_LEN + 1);
    strcpy(text + 14 + CRATER_JOB_MAX_ARG_LEN + 1, "\"]}");
    ck_assert_ptr_null(decode_text(text, "t.json", &err));
    ck_assert_str_eq(err.text,
                     "t.json: command[0]: string is 4097 "
                     "characters, at most 4096 allowed");
    free(text);

    text = json_list("after", CRATER_JOB_MAX_LIST + 1, "\"j\"");
    ck_assert_ptr_null(decode_text(text, "t.json", &err));
    ck_assert_str_eq(err.text,
                     "t.json: after: list has 65 entries, at most 64 allowed");
    free(text);
    text = json_list("tolerations", CRATER_JOB_MAX_LIST + 1, "{\"key\":\"k\"}");
    ck_assert_ptr_null(decode_text(text, "t.json", &err));
    ck_assert_str_eq(err.text,
                     "t.json: tolerations: list has 65 entries, at "
                     "most 64 allowed");
    free(text);

    decode_fails("replicas: 10001",
                 CRATER_ERANGE,
                 "t.yaml:1:1: replicas: 10001 is out of range [0, 10000]");
    decode_fails("resources: {gpu: 65}",
                 CRATER_ERANGE,
                 "t.yaml:1:13: resources.gpu: 65 is out of range [0, 64]");
    decode_fails("resources: {gpu: {count: 65}}",
                 CRATER_ERANGE,
                 "t.yaml:1:19: resources.gpu.count: 65 is out of range [0, "
                 "64]");
}
END_TEST

START_TEST(test_env_limit)
{
    size_t n = CRATER_JOB_MAX_ENV + 1;
    char *text = malloc(n * 16 + 16), *p = text;
    crater_error_t err;

    p += sprintf(p, "{\"env\": {");
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "%s\"V%zu\": \"1\"", i ? "," : "", i);
    strcpy(p, "}}");
    ck_assert_ptr_null(decode_text(text, "t.json", &err));
    ck_assert_str_eq(err.text, "t.json: env: 257 entries, at most 256 allowed");
    ck_assert_int_eq(err.errnum, CRATER_ELIMIT);
    free(text);
}
END_TEST

/* ---- encoding and round trips ------------------------------------------ */

START_TEST(test_encode_form)
{
    crater_jobspec_t *s = decode_ok("resources:\n  cpu: 1.5\n  memory: 2Gi\n"
                                    "  gpu: {count: 1, minHbmBandwidth: "
                                    "2TB/s}\n  disk: {maxLatency: 1ms}\n");
    json_t *e = crater_jobspec_encode(s);
    json_t *r = json_object_get(e, "resources");
    char *text;

    ck_assert_str_eq(json_string_value(json_object_get(e, "apiVersion")),
                     "crater/v1");
    ck_assert_str_eq(json_string_value(json_object_get(e, "kind")), "Job");
    ck_assert_str_eq(json_string_value(json_object_get(e, "gracePeriod")),
                     "30000ms");
    ck_assert_str_eq(json_string_value(json_object_get(r, "cpu")), "1500m");
    ck_assert_int_eq(json_integer_value(json_object_get(r, "memory")),
                     2147483648ll);
    ck_assert_str_eq(json_string_value(
                         json_object_get(json_object_get(r, "gpu"),
                                         "minHbmBandwidth")),
                     "2000000000000B/s");
    ck_assert_str_eq(json_string_value(
                         json_object_get(json_object_get(r, "disk"),
                                         "maxLatency")),
                     "1000us");
    ck_assert_str_eq(json_string_value(json_object_get(e, "ioProfile")),
                     "default");
    /* inferred workloadType is not written (it would become explicit) */
    ck_assert_ptr_null(json_object_get(e, "workloadType"));
    ck_assert_ptr_null(json_object_get(e, "inference"));
    text = json_dumps(e, JSON_COMPACT);
    ck_assert_ptr_nonnull(strstr(text, "\"tolerations\":[]"));
    free(text);
    json_decref(e);
    crater_jobspec_destroy(s);
}
END_TEST

START_TEST(test_round_trip_examples)
{
    crater_jobspec_t *s = load_example(examples[_i]);
    crater_error_t err;

    ck_assert_msg(crater_jobspec_validate(s, kb, &err) == 0,
                  "%s: %s",
                  examples[_i],
                  err.text);
    check_round_trip(s);
    crater_jobspec_destroy(s);
}
END_TEST

START_TEST(test_example_values)
{
    crater_jobspec_t *s = load_example("examples/jobs/train-ddp.yaml");

    ck_assert_uint_eq(s->replicas, 2);
    ck_assert(s->gang);
    ck_assert_uint_eq(s->resources.gpu.count, 8);
    ck_assert_uint_eq(s->resources.gpu.memory_bytes, 0);
    ck_assert_int_eq(s->resources.gpu.nvlink, CRATER_NVLINK_REQUIRED);
    ck_assert_int_eq(s->numa, CRATER_NUMA_STRICT);
    ck_assert_uint_eq(s->grace_period_ms, 300000);
    ck_assert_str_eq(s->checkpoint.dir, "/checkpoints/llama-7b");
    crater_jobspec_destroy(s);

    s = load_example("examples/jobs/bert-finetune.yaml");
    ck_assert_uint_eq(s->resources.gpu.memory_bytes, 20ull << 30);
    ck_assert_int_eq(s->workload_type, CRATER_WORKLOAD_TRAINING);
    ck_assert(!s->workload_type_explicit);
    ck_assert_ptr_null(s->profile);
    crater_jobspec_destroy(s);

    s = load_example("examples/jobs/infer-llm.yaml");
    ck_assert_uint_eq(s->inference.max_batch_size, 32);
    ck_assert_uint_eq(s->inference.batch_timeout_ms, 10);
    ck_assert_uint_eq(s->inference.warm_pool_size, 1);
    ck_assert_int_eq(s->io_profile, CRATER_IO_MODEL_LOADING);
    ck_assert_uint_eq(s->resources.gpu.memory_bytes, 40ull << 30);
    crater_jobspec_destroy(s);

    s = load_example("examples/jobs/batch-cpu.yaml");
    ck_assert_uint_eq(s->resources.gpu.count, 0);
    ck_assert_int_eq(s->workload_type, CRATER_WORKLOAD_BATCH);
    ck_assert_str_eq(s->command[3], "2024-06-14");
    crater_jobspec_destroy(s);
}
END_TEST

/* Values at the edges of what encode must write back exactly. */
START_TEST(test_round_trip_edges)
{
    crater_jobspec_t *s = crater_jobspec_create();

    s->resources.memory_bytes = UINT64_MAX; /* beyond a JSON integer */
    s->resources.disk.iops = (uint64_t)INT64_MAX + 1;
    s->resources.gpu.min_hbm_bandwidth = UINT64_MAX;
    s->resources.cpu_milli = UINT64_MAX;
    s->grace_period_ms = UINT64_MAX / 1000000;
    s->resources.disk.max_latency_us = UINT32_MAX;
    s->cost_cap = 0.1;
    s->cpu_limit_multiplier = 1.0 / 3.0 + 1.0;
    s->deadline_ms = 253402300799999ll; /* 9999-12-31T23:59:59.999Z */
    s->locality = CRATER_LOCALITY_NONE;
    s->dataset = strdup("cached-only");
    check_round_trip(s);
    crater_jobspec_destroy(s);
}
END_TEST

/* Issue 15: the autoscaler's fields of a service decode, keep their
 * units and survive the round trip. */
START_TEST(test_inference_autoscale_fields)
{
    crater_jobspec_t *s = decode_ok("inference:\n"
                                    "  minReplicas: 0\n"
                                    "  maxReplicas: 4\n"
                                    "  targetConcurrency: 2.5\n"
                                    "  stableWindow: 30s\n"
                                    "  panicWindow: 3s\n"
                                    "  scaleDownDelay: 1m\n"
                                    "  scaleToZeroGrace: 45s\n");
    crater_error_t err;

    ck_assert(s->inference.target_concurrency == 2.5);
    ck_assert_uint_eq(s->inference.stable_window_ms, 30000);
    ck_assert_uint_eq(s->inference.panic_window_ms, 3000);
    ck_assert_uint_eq(s->inference.scale_down_delay_ms, 60000);
    ck_assert_uint_eq(s->inference.zero_grace_ms, 45000);
    check_round_trip(s);
    crater_jobspec_destroy(s);
    ck_assert(decode_text("inference: {stableWindow: 5Gi}\n", "t.yaml", &err)
              == NULL);
    ck_assert_str_eq(err.field, "inference.stableWindow");
}
END_TEST

/* Issue 15: inference.readiness (a command instead of the HTTP probe):
 * decoded, round trip, refused naming the field. */
START_TEST(test_inference_readiness)
{
    crater_jobspec_t *s = decode_ok("inference:\n"
                                    "  readiness:\n"
                                    "    command: [test, -e, /tmp/ready]\n"
                                    "    period: 250ms\n"
                                    "    timeout: 2s\n");

    ck_assert_str_eq(s->inference.ready_cmd[0], "test");
    ck_assert_str_eq(s->inference.ready_cmd[2], "/tmp/ready");
    ck_assert_ptr_null(s->inference.ready_cmd[3]);
    ck_assert_uint_eq(s->inference.ready_period_ms, 250);
    ck_assert_uint_eq(s->inference.ready_timeout_ms, 2000);
    check_round_trip(s);
    crater_jobspec_destroy(s);
    s = decode_ok("inference: {readiness: {command: [true]}}\n");
    ck_assert_uint_eq(s->inference.ready_period_ms, 0); /* the default */
    check_round_trip(s);
    crater_jobspec_destroy(s);
    decode_fails("inference: {readiness: {command: 'test -e x'}}",
                 CRATER_ETYPE,
                 "t.yaml:1:25: inference.readiness.command: give a list, not "
                 "a string: the command runs without a shell, e.g. [test, -e, "
                 "ready]");
    decode_fails("inference: {readiness: {command: []}}",
                 CRATER_EINVAL,
                 "t.yaml:1:25: inference.readiness.command: empty list; give "
                 "at least the program to run");
    decode_fails("inference: {readiness: {command: [true], period: 0s}}",
                 CRATER_EINVAL,
                 "t.yaml:1:42: inference.readiness.period: must be 1 ms to 1 "
                 "h, not 0 ms");
}
END_TEST

/* Issue 14: restartPolicy and backoffLimit (defaults, round trip, the
 * Never + backoffLimit conflict, range) and checkpoint.dir's form. */
START_TEST(test_restart_policy)
{
    crater_jobspec_t *s = decode_ok("restartPolicy: OnFailure\n");
    crater_error_t err;

    ck_assert_int_eq(s->restart_policy, CRATER_RESTART_ON_FAILURE);
    ck_assert_uint_eq(s->backoff_limit, CRATER_BACKOFF_LIMIT_DEFAULT);
    ck_assert_int_eq(crater_jobspec_validate(s, NULL, &err), 0);
    crater_jobspec_destroy(s);
    s = decode_ok("command: [x]\n");
    ck_assert_int_eq(s->restart_policy, CRATER_RESTART_NEVER);
    crater_jobspec_destroy(s);
    s = decode_ok("restartPolicy: OnFailure\nbackoffLimit: 0\n");
    ck_assert_uint_eq(s->backoff_limit, 0);
    crater_jobspec_destroy(s);
    decode_fails("restartPolicy: Always\n",
                 CRATER_EINVAL,
                 "t.yaml:1:1: restartPolicy: 'Always' is not one of: Never, "
                 "OnFailure");
    decode_fails("restartPolicy: OnFailure\nbackoffLimit: 1001\n",
                 CRATER_ERANGE,
                 "t.yaml:2:1: backoffLimit: 1001 is out of range [0, 1000]");
    validate_fails("backoffLimit: 3",
                   NULL,
                   CRATER_ECONFLICT,
                   "backoffLimit",
                   "backoffLimit: needs restartPolicy: OnFailure (with Never "
                   "the first failure fails the job)");
    validate_fails("checkpoint: {dir: ck/x}",
                   NULL,
                   CRATER_EINVAL,
                   "checkpoint.dir",
                   "checkpoint.dir: 'ck/x' is not an absolute path");
    validate_fails("checkpoint: {dir: /a/../etc}",
                   NULL,
                   CRATER_EINVAL,
                   "checkpoint.dir",
                   "checkpoint.dir: '/a/../etc' has a '.' or '..' component");
    validate_ok("checkpoint: {dir: /a/..b/.c}");
}
END_TEST

/* image, imagePullPolicy and volumes (doc/containers.md). */
START_TEST(test_container_fields)
{
    crater_jobspec_t *s;

    s = decode_ok("image: localhost/x:1\ncommand: [true]\n");
    ck_assert_int_eq(s->image_pull, CRATER_PULL_IF_NOT_PRESENT);
    ck_assert_uint_eq(s->nvolumes, 0);
    check_round_trip(s);
    crater_jobspec_destroy(s);
    s = decode_ok("image: localhost/x:1\n"
                  "imagePullPolicy: Never\n"
                  "volumes:\n"
                  "  - {hostPath: /srv/data, mountPath: /data, "
                  "readOnly: true}\n"
                  "  - {scratch: work, mountPath: /scratch}\n");
    ck_assert_int_eq(s->image_pull, CRATER_PULL_NEVER);
    ck_assert_uint_eq(s->nvolumes, 2);
    ck_assert_str_eq(s->volumes[0].host_path, "/srv/data");
    ck_assert_str_eq(s->volumes[0].mount_path, "/data");
    ck_assert(s->volumes[0].read_only);
    ck_assert_ptr_null(s->volumes[0].scratch);
    ck_assert_str_eq(s->volumes[1].scratch, "work");
    ck_assert(!s->volumes[1].read_only);
    check_round_trip(s);
    crater_jobspec_destroy(s);
    validate_ok("image: x\nimagePullPolicy: Always\n"
                "volumes: [{scratch: a, mountPath: /a}]\n");
}
END_TEST

START_TEST(test_container_errors)
{
    decode_fails("image: x\nimagePullPolicy: Sometimes",
                 CRATER_EINVAL,
                 "t.yaml:2:1: imagePullPolicy: 'Sometimes' is not one of: "
                 "IfNotPresent, Always, Never");
    decode_fails("image: x\nvolumes: [{hostPath: /a}]",
                 CRATER_EMISSING,
                 "t.yaml:2:11: volumes[0]: missing required field "
                 "'mountPath'");
    decode_fails("image: x\nvolumes: [{hostPath: /a, scratch: b, "
                 "mountPath: /c}]",
                 CRATER_EINVAL,
                 "t.yaml:2:11: volumes[0]: hostPath and scratch: give one");
    decode_fails("image: x\nvolumes: [{mountPath: /c}]",
                 CRATER_EINVAL,
                 "t.yaml:2:11: volumes[0]: needs hostPath or scratch");
    decode_fails("image: x\nvolumes: [{hostPath: data, mountPath: /c}]",
                 CRATER_EINVAL,
                 "t.yaml:2:12: volumes[0].hostPath: 'data' is not an "
                 "absolute path");
    decode_fails("image: x\nvolumes: [{hostPath: /a/../etc, mountPath: /c}]",
                 CRATER_EINVAL,
                 "t.yaml:2:12: volumes[0].hostPath: '/a/../etc': no '..' "
                 "component or ',' allowed");
    decode_fails("image: x\nvolumes: [{hostPath: /a, mountPath: /c, "
                 "readonly: true}]",
                 CRATER_EFIELD,
                 "t.yaml:2:41: volumes[0].readonly: unknown field "
                 "'readonly' (did you mean 'readOnly'?)");
    validate_fails("volumes: [{scratch: a, mountPath: /a}]",
                   kb,
                   CRATER_ECONFLICT,
                   "volumes",
                   "volumes: needs image");
    validate_fails("imagePullPolicy: Never",
                   kb,
                   CRATER_ECONFLICT,
                   "imagePullPolicy",
                   "imagePullPolicy: needs image");
    validate_fails("image: x\nvolumes: [{scratch: a, mountPath: /a}, "
                   "{hostPath: /b, mountPath: /a}]",
                   kb,
                   CRATER_ECONFLICT,
                   "volumes[1].mountPath",
                   "volumes[1].mountPath: '/a' is also "
                   "volumes[0].mountPath");
}
END_TEST

static Suite *jobspec_suite(void)
{
    Suite *s = suite_create("jobspec");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_container_fields);
    tcase_add_test(tc, test_container_errors);
    tcase_add_test(tc, test_create_defaults);
    tcase_add_test(tc, test_decode_empty);
    tcase_add_test(tc, test_gang_default);
    tcase_add_test(tc, test_inference_defaults);
    tcase_add_test(tc, test_full_spec_resources);
    tcase_add_test(tc, test_full_spec_values);
    tcase_add_test(tc, test_quantities);
    tcase_add_test(tc, test_sizes_need_units);
    tcase_add_test(tc, test_gpu_forms);
    tcase_add_test(tc, test_deadline);
    tcase_add_test(tc, test_time_limit);
    tcase_add_test(tc, test_command_and_env);
    tcase_add_test(tc, test_names_and_enums);
    tcase_add_test(tc, test_sections);
    tcase_add_test(tc, test_infer_rules);
    tcase_add_test(tc, test_infer_in_decode);
    tcase_add_test(tc, test_validate_contradictions);
    tcase_add_test(tc, test_validate_inference_checkpoint);
    tcase_add_test(tc, test_validate_built_specs);
    tcase_add_test(tc, test_validate_kb);
    tcase_add_test(tc, test_validate_kb_capabilities);
    tcase_add_loop_test(tc,
                        test_bad_files,
                        0,
                        (int)(sizeof(bad_files) / sizeof(bad_files[0])));
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_arrays);
    tcase_add_test(tc, test_request_maxima);
    tcase_add_test(tc, test_env_limit);
    tcase_add_test(tc, test_encode_form);
    tcase_add_loop_test(tc,
                        test_round_trip_examples,
                        0,
                        (int)(sizeof(examples) / sizeof(examples[0])));
    tcase_add_test(tc, test_example_values);
    tcase_add_test(tc, test_round_trip_edges);
    tcase_add_test(tc, test_restart_policy);
    tcase_add_test(tc, test_inference_autoscale_fields);
    tcase_add_test(tc, test_inference_readiness);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr;
    int failures;

    kb = crater_kb_create();
    if (!kb)
        return 1;
    sr = srunner_create(jobspec_suite());
    srunner_run_all(sr, CK_NORMAL);
    failures = srunner_ntests_failed(sr);
    srunner_free(sr);
    crater_kb_destroy(kb);
    return failures ? 1 : 0;
}
