/* jobspec.c - the job spec model: defaults, workloadType inference and the
 * semantic checks that run after decoding (see jobspec.h).
 *
 * Decoding (src/core/jobspec_codec.c) checks what one field can tell on
 * its own: types, units, ranges, name syntax. This file checks what needs
 * several fields or the hardware knowledge base: contradictions (gang
 * with replicas 0, a GPU slice with count 0, minReplicas > maxReplicas)
 * and requests no known GPU can ever satisfy. The knowledge-base checks
 * narrow the set of allowed GPU models one constraint at a time, so the
 * error names the first constraint that leaves no model, together with
 * the best value that was still on offer ("largest: 80Gi, a100-sxm4-80gb").
 *
 * workloadType inference looks at words, not substrings, so "--constraint"
 * is not "train" and "observe" is not "serve". The rules are listed in
 * doc/jobspec.md and each has a test.
 */
#include "crater/jobspec.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "crater/priority.h"

#define DEFAULT_TENANT "default"
#define DEFAULT_GRACE_MS 30000

/* ---- create / destroy -------------------------------------------------- */

crater_jobspec_t *crater_jobspec_create(void)
{
    crater_jobspec_t *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    if (!(s->tenant = strdup(DEFAULT_TENANT))) {
        free(s);
        return NULL;
    }
    s->workload_type = CRATER_WORKLOAD_BATCH;
    s->grace_period_ms = DEFAULT_GRACE_MS;
    s->cpu_limit_multiplier = 1.0;
    s->io_profile = CRATER_IO_DEFAULT;
    s->numa = CRATER_NUMA_PREFERRED;
    s->locality = CRATER_LOCALITY_NONE;
    s->deadline_policy = CRATER_DEADLINE_SOFT;
    s->backoff_limit = CRATER_BACKOFF_LIMIT_DEFAULT;
    s->replicas = 1;
    s->inference.min_replicas = 1;
    s->inference.max_replicas = 1;
    return s;
}

static void free_kv(crater_kv_t *kv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(kv[i].key);
        free(kv[i].value);
    }
    free(kv);
}

void crater_jobspec_destroy(crater_jobspec_t *s)
{
    if (!s)
        return;
    free(s->array);
    free(s->name);
    free(s->tenant);
    free(s->priority_class);
    crater_strv_free(s->resources.gpu.models);
    free(s->resources.gpu.vendor);
    free(s->dataset);
    free(s->checkpoint.dir);
    free(s->profile);
    crater_strv_free(s->after);
    crater_strv_free(s->command);
    crater_strv_free(s->inference.ready_cmd);
    free(s->image);
    crater_volumes_free(s->volumes, s->nvolumes);
    free_kv(s->env, s->nenv);
    free(s->workdir);
    free_kv(s->selector, s->nselector);
    for (size_t i = 0; i < s->ntolerations; i++) {
        free(s->tolerations[i].key);
        free(s->tolerations[i].value);
    }
    free(s->tolerations);
    free(s);
}

void crater_volumes_free(crater_volume_t *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        free(v[i].host_path);
        free(v[i].scratch);
        free(v[i].mount_path);
    }
    free(v);
}

static char *dup_or_null(const char *s, bool *ok)
{
    char *d = s ? strdup(s) : NULL;

    if (s && !d)
        *ok = false;
    return d;
}

int crater_volumes_dup(const crater_volume_t *v,
                       size_t n,
                       crater_volume_t **out)
{
    bool ok = true;

    *out = NULL;
    if (n == 0)
        return 0;
    if (!(*out = calloc(n, sizeof(**out))))
        return -1;
    for (size_t i = 0; i < n; i++) {
        (*out)[i].host_path = dup_or_null(v[i].host_path, &ok);
        (*out)[i].scratch = dup_or_null(v[i].scratch, &ok);
        (*out)[i].mount_path = dup_or_null(v[i].mount_path, &ok);
        (*out)[i].read_only = v[i].read_only;
    }
    if (ok)
        return 0;
    crater_volumes_free(*out, n);
    *out = NULL;
    return -1;
}

const char *crater_pull_policy_name(crater_pull_policy_t p)
{
    switch (p) {
    case CRATER_PULL_IF_NOT_PRESENT:
        return "IfNotPresent";
    case CRATER_PULL_ALWAYS:
        return "Always";
    case CRATER_PULL_NEVER:
        return "Never";
    }
    return "?";
}

const char *crater_workload_name(crater_workload_t w)
{
    switch (w) {
    case CRATER_WORKLOAD_TRAINING:
        return "training";
    case CRATER_WORKLOAD_INFERENCE:
        return "inference";
    case CRATER_WORKLOAD_BATCH:
        return "batch";
    case CRATER_WORKLOAD_INTERACTIVE:
        return "interactive";
    }
    return "unknown";
}

/* ---- workloadType inference -------------------------------------------- */

/* A word is a maximal run of ASCII letters and digits; matching is
 * case-insensitive. */
static bool word_is(const char *w, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(w, lit, n) == 0;
}

/* "train", "trainer", "pretrain", "train_bert" - but not "constraint",
 * "restrain" or "strain", where "train" follows an 's'. */
static bool word_has_train(const char *w, size_t n)
{
    for (size_t i = 0; i + 5 <= n; i++)
        if (strncasecmp(w + i, "train", 5) == 0
            && (i == 0 || tolower((unsigned char)w[i - 1]) != 's'))
            return true;
    return false;
}

static bool training_word(const char *w, size_t n)
{
    return word_is(w, n, "torchrun") || word_is(w, n, "deepspeed")
           || word_has_train(w, n);
}

static bool inference_word(const char *w, size_t n)
{
    static const char *const words[] = {
        "vllm",
        "triton",
        "tritonserver",
        "torchserve",
        "serve",
        "serving",
        "sglang",
    };

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (word_is(w, n, words[i]))
            return true;
    return false;
}

static bool any_word(const char *s, bool (*pred)(const char *, size_t))
{
    while (s && *s) {
        size_t n = 0;

        while (s[n] && isalnum((unsigned char)s[n]))
            n++;
        if (n && pred(s, n))
            return true;
        s += n ? n : 1;
    }
    return false;
}

static const char *basename_of(const char *arg)
{
    const char *slash = strrchr(arg, '/');

    return slash ? slash + 1 : arg;
}

static bool argv_training(char *const *argv)
{
    for (size_t i = 0; argv && argv[i]; i++) {
        if (any_word(argv[i], training_word)
            || strncmp(argv[i], "torch.distributed.", 18) == 0)
            return true;
        if (strcmp(basename_of(argv[i]), "accelerate") == 0 && argv[i + 1]
            && strcmp(argv[i + 1], "launch") == 0)
            return true;
    }
    return false;
}

static bool argv_inference(char *const *argv)
{
    for (size_t i = 0; argv && argv[i]; i++) {
        if (any_word(argv[i], inference_word) || strcmp(argv[i], "--port") == 0
            || strncmp(argv[i], "--port=", 7) == 0)
            return true;
    }
    return false;
}

crater_workload_t crater_workload_infer(char *const *command, const char *image)
{
    if (argv_training(command))
        return CRATER_WORKLOAD_TRAINING;
    if (argv_inference(command))
        return CRATER_WORKLOAD_INFERENCE;
    if (any_word(image, training_word))
        return CRATER_WORKLOAD_TRAINING;
    if (any_word(image, inference_word))
        return CRATER_WORKLOAD_INFERENCE;
    return CRATER_WORKLOAD_BATCH;
}

/* ---- validation: contradictions ---------------------------------------- */

/* "field: message" with err->field set, so a caller holding the document
 * can add the line (crater_doc_where). Returns -1. */
static int fail(crater_error_t *err,
                crater_errno_t errnum,
                const char *field,
                const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));

static int fail(crater_error_t *err,
                crater_errno_t errnum,
                const char *field,
                const char *fmt,
                ...)
{
    char msg[CRATER_ERROR_TEXT];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return crater_errorf_field(err, errnum, field, "%s: %s", field, msg);
}

static const char *fmt_ms(uint64_t ms, char *buf, size_t size)
{
    if (ms > UINT64_MAX / 1000000u)
        snprintf(buf, size, "%llums", (unsigned long long)ms);
    else
        crater_format_quantity(ms * 1000000u, CRATER_DIM_DURATION, buf, size);
    return buf;
}

static int check_replicas(const crater_jobspec_t *s, crater_error_t *err)
{
    if (s->replicas == 0 && s->gang)
        return fail(err,
                    CRATER_ECONFLICT,
                    "replicas",
                    "gang: true needs at least 1 replica, but replicas is 0");
    if (s->replicas == 0)
        return fail(err,
                    CRATER_ERANGE,
                    "replicas",
                    "must be at least 1 (inference.minReplicas: 0 lets a "
                    "service scale to zero)");
    return 0;
}

/* The first GPU constraint that is set, as a field path; NULL if none. */
static const char *gpu_constraint(const crater_gpu_req_t *g)
{
    if (g->memory_bytes)
        return "resources.gpu.memory";
    if (g->models)
        return "resources.gpu.model";
    if (g->vendor)
        return "resources.gpu.vendor";
    if (g->min_sm_count)
        return "resources.gpu.minSmCount";
    if (g->min_compute_cap)
        return "resources.gpu.minComputeCapability";
    if (g->min_hbm_bandwidth)
        return "resources.gpu.minHbmBandwidth";
    if (g->nvlink != CRATER_NVLINK_ANY)
        return "resources.gpu.nvlink";
    return NULL;
}

static int check_gpu(const crater_gpu_req_t *g, crater_error_t *err)
{
    const char *field = gpu_constraint(g);

    if (g->count == 0 && g->memory_bytes)
        return fail(err,
                    CRATER_ECONFLICT,
                    field,
                    "a GPU memory slice needs resources.gpu.count >= 1 "
                    "(count is 0)");
    if (g->count == 0 && field)
        return fail(err,
                    CRATER_ECONFLICT,
                    field,
                    "GPU constraints need resources.gpu.count >= 1 (count "
                    "is 0)");
    if (g->nvlink == CRATER_NVLINK_REQUIRED && g->count < 2)
        return fail(err,
                    CRATER_ECONFLICT,
                    "resources.gpu.nvlink",
                    "required NVLink needs count >= 2 GPUs per replica "
                    "(count is %u)",
                    g->count);
    if (g->isolation == CRATER_GPU_ISO_MIG && g->count > 1)
        return fail(err,
                    CRATER_ECONFLICT,
                    "resources.gpu.isolation",
                    "isolation: mig runs a task on one MIG device (a CUDA "
                    "process sees one), so it needs count: 1 (count is %u)",
                    g->count);
    return 0;
}

static int check_inference(const crater_jobspec_t *s, crater_error_t *err)
{
    const crater_inference_t *inf = &s->inference;

    if (!inf->enabled)
        return 0;
    if (s->workload_type_explicit
        && s->workload_type != CRATER_WORKLOAD_INFERENCE)
        return fail(err,
                    CRATER_ECONFLICT,
                    "inference",
                    "an inference section needs workloadType inference "
                    "(workloadType is %s)",
                    crater_workload_name(s->workload_type));
    if (inf->min_replicas > inf->max_replicas)
        return fail(err,
                    CRATER_ECONFLICT,
                    "inference.minReplicas",
                    "%u is more than inference.maxReplicas (%u)",
                    inf->min_replicas,
                    inf->max_replicas);
    if (inf->warm_pool_size > inf->max_replicas)
        return fail(err,
                    CRATER_ECONFLICT,
                    "inference.warmPoolSize",
                    "%u is more than inference.maxReplicas (%u)",
                    inf->warm_pool_size,
                    inf->max_replicas);
    if (s->replicas < inf->min_replicas || s->replicas > inf->max_replicas)
        return fail(err,
                    CRATER_ECONFLICT,
                    "replicas",
                    "%u is outside inference.minReplicas..maxReplicas "
                    "(%u..%u)",
                    s->replicas,
                    inf->min_replicas,
                    inf->max_replicas);
    return 0;
}

/* checkpoint.dir is the same path on every node and every attempt (the
 * task finds its last checkpoint there after a requeue): absolute, so it
 * does not depend on the working directory, without "." or ".."
 * components, so the agent that creates it creates what it says. */
static int check_ckpt_dir(const char *dir, crater_error_t *err)
{
    const char *p = dir;

    if (!dir)
        return 0;
    if (dir[0] != '/')
        return fail(err,
                    CRATER_EINVAL,
                    "checkpoint.dir",
                    "'%.64s' is not an absolute path",
                    dir);
    while ((p = strchr(p, '/'))) {
        size_t n = strcspn(++p, "/");
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return fail(err,
                        CRATER_EINVAL,
                        "checkpoint.dir",
                        "'%.64s' has a '.' or '..' component",
                        dir);
    }
    return 0;
}

static int check_restart(const crater_jobspec_t *s, crater_error_t *err)
{
    if (s->restart_policy == CRATER_RESTART_NEVER && s->backoff_limit_set)
        return fail(err,
                    CRATER_ECONFLICT,
                    "backoffLimit",
                    "needs restartPolicy: OnFailure (with Never the first "
                    "failure fails the job)");
    return 0;
}

static int check_checkpoint(const crater_checkpoint_t *c, crater_error_t *err)
{
    char a[32], b[32];

    if (check_ckpt_dir(c->dir, err) < 0)
        return -1;
    if (!c->dir && c->interval_ms)
        return fail(err,
                    CRATER_ECONFLICT,
                    "checkpoint.checkpointInterval",
                    "checkpoint intervals need checkpoint.dir");
    if (!c->dir && c->incremental_interval_ms)
        return fail(err,
                    CRATER_ECONFLICT,
                    "checkpoint.incrementalInterval",
                    "checkpoint intervals need checkpoint.dir");
    if (c->incremental_interval_ms && !c->interval_ms)
        return fail(err,
                    CRATER_ECONFLICT,
                    "checkpoint.incrementalInterval",
                    "needs checkpoint.checkpointInterval (incremental "
                    "checkpoints build on full ones)");
    if (c->incremental_interval_ms
        && c->incremental_interval_ms >= c->interval_ms)
        return fail(err,
                    CRATER_ECONFLICT,
                    "checkpoint.incrementalInterval",
                    "%s must be shorter than checkpointInterval %s",
                    fmt_ms(c->incremental_interval_ms, a, sizeof(a)),
                    fmt_ms(c->interval_ms, b, sizeof(b)));
    return 0;
}

static int check_misc(const crater_jobspec_t *s, crater_error_t *err)
{
    char field[32];

    if (!s->dataset && s->locality != CRATER_LOCALITY_NONE)
        return fail(err,
                    CRATER_ECONFLICT,
                    "dataLocality.mode",
                    "needs dataLocality.dataset");
    if (s->deadline_policy == CRATER_DEADLINE_HARD && s->deadline_ms == 0)
        return fail(err,
                    CRATER_ECONFLICT,
                    "deadlinePolicy",
                    "hard needs a deadline");
    for (size_t i = 0; s->name && s->after && s->after[i]; i++) {
        if (strcmp(s->after[i], s->name) == 0) {
            snprintf(field, sizeof(field), "after[%zu]", i);
            return fail(err,
                        CRATER_ECONFLICT,
                        field,
                        "job '%s' cannot wait for itself",
                        s->name);
        }
    }
    return 0;
}

/* volumes and imagePullPolicy mean something only in a container, and
 * two volumes cannot share a mount point. */
static int check_container(const crater_jobspec_t *s, crater_error_t *err)
{
    char field[48];

    if (!s->image && s->nvolumes)
        return fail(err, CRATER_ECONFLICT, "volumes", "needs image");
    if (!s->image && s->image_pull != CRATER_PULL_IF_NOT_PRESENT)
        return fail(err, CRATER_ECONFLICT, "imagePullPolicy", "needs image");
    for (size_t i = 0; i < s->nvolumes; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(s->volumes[i].mount_path, s->volumes[j].mount_path)
                == 0) {
                snprintf(field, sizeof(field), "volumes[%zu].mountPath", i);
                return fail(err,
                            CRATER_ECONFLICT,
                            field,
                            "'%.60s' is also volumes[%zu].mountPath",
                            s->volumes[i].mount_path,
                            j);
            }
    return 0;
}

/* ---- validation: the knowledge base ------------------------------------ */

/* The kb key closest to name: one that contains it, else the smallest
 * edit distance. NULL for an empty kb. */
static const char *closest_model(const crater_kb_t *kb, const char *name)
{
    char norm[128];
    const char *best = NULL;
    unsigned bestd = 256;

    if (!crater_kb_normalize(name, norm, sizeof(norm)))
        snprintf(norm, sizeof(norm), "%s", name);
    for (size_t i = 0; i < crater_kb_gpu_count(kb); i++) {
        const char *key = crater_kb_gpu_at(kb, i)->key;
        unsigned dist = strstr(key, norm) && *norm
                            ? (unsigned)(strlen(key) - strlen(norm)) / 8
                            : crater_edit_distance(norm, key);

        if (dist < bestd) {
            bestd = dist;
            best = key;
        }
    }
    return best;
}

static int check_models(const crater_gpu_req_t *g,
                        const crater_kb_t *kb,
                        crater_error_t *err)
{
    size_t n = crater_strv_len(g->models);
    char field[48];

    for (size_t i = 0; i < n; i++) {
        const char *best;

        if (crater_kb_gpu(kb, g->models[i]))
            continue;
        if (n == 1)
            snprintf(field, sizeof(field), "resources.gpu.model");
        else
            snprintf(field, sizeof(field), "resources.gpu.model[%zu]", i);
        if ((best = closest_model(kb, g->models[i])))
            return fail(err,
                        CRATER_EINVAL,
                        field,
                        "unknown GPU model '%.40s' (did you mean '%s'?)",
                        g->models[i],
                        best);
        return fail(err,
                    CRATER_EINVAL,
                    field,
                    "unknown GPU model '%.40s'",
                    g->models[i]);
    }
    return 0;
}

typedef uint64_t (*attr_f)(const crater_kb_gpu_t *e);

static uint64_t attr_mem(const crater_kb_gpu_t *e)
{
    return e->memory_bytes;
}

static uint64_t attr_sm(const crater_kb_gpu_t *e)
{
    return e->sm_count;
}

static uint64_t attr_cc(const crater_kb_gpu_t *e)
{
    return e->compute_cap;
}

static uint64_t attr_hbm(const crater_kb_gpu_t *e)
{
    return e->mem_bandwidth;
}

static uint64_t attr_nvlink(const crater_kb_gpu_t *e)
{
    return e->nvlink_bandwidth;
}

/* Keep the candidates whose attr is at least min. When none would be
 * left, leave c alone and return the candidate with the highest attr
 * (for the message); otherwise return NULL. */
static const crater_kb_gpu_t *narrow(const crater_kb_gpu_t **c,
                                     size_t *n,
                                     attr_f attr,
                                     uint64_t min)
{
    const crater_kb_gpu_t *best = NULL;
    size_t m = 0;

    for (size_t i = 0; i < *n; i++) {
        if (!best || attr(c[i]) > attr(best))
            best = c[i];
        if (attr(c[i]) >= min)
            m++;
    }
    if (m == 0)
        return best;
    m = 0;
    for (size_t i = 0; i < *n; i++)
        if (attr(c[i]) >= min)
            c[m++] = c[i];
    *n = m;
    return NULL;
}

/* The allowed models: gpu.model (or every kb GPU) from gpu.vendor. */
static size_t allowed_models(const crater_gpu_req_t *g,
                             const crater_kb_t *kb,
                             const crater_kb_gpu_t **c)
{
    size_t n = 0;

    for (size_t i = 0; i < crater_kb_gpu_count(kb); i++) {
        const crater_kb_gpu_t *e = crater_kb_gpu_at(kb, i);
        bool listed = !g->models || !g->models[0];

        for (size_t j = 0; !listed && g->models[j]; j++)
            listed = crater_kb_gpu(kb, g->models[j]) == e;
        if (listed && (!g->vendor || strcasecmp(g->vendor, e->vendor) == 0))
            c[n++] = e;
    }
    return n;
}

/* Each capability check narrows the candidates c[0..*n) or fails,
 * naming the best value still on offer. */
static int need_memory(const crater_gpu_req_t *g,
                       const crater_kb_gpu_t **c,
                       size_t *n,
                       crater_error_t *err)
{
    const crater_kb_gpu_t *b;
    char want[32], have[32];

    if (!g->memory_bytes || !(b = narrow(c, n, attr_mem, g->memory_bytes)))
        return 0;
    crater_format_quantity(g->memory_bytes, CRATER_DIM_BYTES, want, 32);
    crater_format_quantity(b->memory_bytes, CRATER_DIM_BYTES, have, 32);
    return fail(err,
                CRATER_EIMPOSSIBLE,
                "resources.gpu.memory",
                "a %s slice is larger than any allowed GPU (largest: %s, %s)",
                want,
                have,
                b->key);
}

static int need_sm(const crater_gpu_req_t *g,
                   const crater_kb_gpu_t **c,
                   size_t *n,
                   crater_error_t *err)
{
    const crater_kb_gpu_t *b;

    if (!g->min_sm_count || !(b = narrow(c, n, attr_sm, g->min_sm_count)))
        return 0;
    return fail(err,
                CRATER_EIMPOSSIBLE,
                "resources.gpu.minSmCount",
                "no allowed GPU has %u SMs (most: %u, %s)",
                g->min_sm_count,
                b->sm_count,
                b->key);
}

static int need_cc(const crater_gpu_req_t *g,
                   const crater_kb_gpu_t **c,
                   size_t *n,
                   crater_error_t *err)
{
    const crater_kb_gpu_t *b;

    if (!g->min_compute_cap || !(b = narrow(c, n, attr_cc, g->min_compute_cap)))
        return 0;
    return fail(err,
                CRATER_EIMPOSSIBLE,
                "resources.gpu.minComputeCapability",
                "no allowed GPU reaches sm_%u (highest: sm_%u, %s)",
                g->min_compute_cap,
                b->compute_cap,
                b->key);
}

static int need_hbm(const crater_gpu_req_t *g,
                    const crater_kb_gpu_t **c,
                    size_t *n,
                    crater_error_t *err)
{
    const crater_kb_gpu_t *b;
    char want[32], have[32];

    if (!g->min_hbm_bandwidth
        || !(b = narrow(c, n, attr_hbm, g->min_hbm_bandwidth)))
        return 0;
    crater_format_quantity(g->min_hbm_bandwidth,
                           CRATER_DIM_BANDWIDTH,
                           want,
                           32);
    crater_format_quantity(b->mem_bandwidth, CRATER_DIM_BANDWIDTH, have, 32);
    return fail(err,
                CRATER_EIMPOSSIBLE,
                "resources.gpu.minHbmBandwidth",
                "no allowed GPU reaches %s (fastest: %s, %s)",
                want,
                have,
                b->key);
}

static int need_nvlink(const crater_gpu_req_t *g,
                       const crater_kb_gpu_t **c,
                       size_t *n,
                       crater_error_t *err)
{
    if (g->nvlink != CRATER_NVLINK_REQUIRED || !narrow(c, n, attr_nvlink, 1))
        return 0;
    return fail(err,
                CRATER_EIMPOSSIBLE,
                "resources.gpu.nvlink",
                "NVLink is required but no allowed GPU model has it");
}

static int check_capabilities(const crater_gpu_req_t *g,
                              const crater_kb_gpu_t **c,
                              size_t n,
                              crater_error_t *err)
{
    if (need_memory(g, c, &n, err) < 0 || need_sm(g, c, &n, err) < 0
        || need_cc(g, c, &n, err) < 0 || need_hbm(g, c, &n, err) < 0
        || need_nvlink(g, c, &n, err) < 0)
        return -1;
    return 0;
}

static int check_kb(const crater_gpu_req_t *g,
                    const crater_kb_t *kb,
                    crater_error_t *err)
{
    const crater_kb_gpu_t **c;
    size_t n;
    int rc;

    if (g->count == 0 || check_models(g, kb, err) < 0)
        return g->count == 0 ? 0 : -1;
    if (!(c = calloc(crater_kb_gpu_count(kb) + 1, sizeof(*c))))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    n = allowed_models(g, kb, c);
    if (n == 0 && g->vendor)
        rc = fail(err,
                  CRATER_EIMPOSSIBLE,
                  "resources.gpu.vendor",
                  "no %s GPU model is from vendor '%.40s'",
                  g->models ? "allowed" : "known",
                  g->vendor);
    else if (n == 0)
        rc = fail(err,
                  CRATER_EIMPOSSIBLE,
                  "resources.gpu.count",
                  "the hardware knowledge base has no GPU models");
    else
        rc = check_capabilities(g, c, n, err);
    free(c);
    return rc;
}

/* priorityClass must name one of the classes the queue orders by. */
static int check_priority_class(const crater_jobspec_t *spec,
                                crater_error_t *err)
{
    int32_t v;

    if (!spec->priority_class
        || crater_priority_class_value(spec->priority_class, &v) == 0)
        return 0;
    return crater_errorf_field(err,
                               CRATER_EINVAL,
                               "priorityClass",
                               "priorityClass: unknown class '%s' (one of: %s)",
                               spec->priority_class,
                               crater_priority_class_list());
}

/* Requests beyond CRATER_JOB_MAX_*: no node has them, and sums of them
 * could wrap. */
static int check_maxima(const crater_resources_t *r, crater_error_t *err)
{
    if (r->memory_bytes > CRATER_JOB_MAX_MEMORY)
        return crater_errorf_field(err,
                                   CRATER_ERANGE,
                                   "resources.memory",
                                   "resources.memory: %llu bytes is more "
                                   "than 1Pi, the most a job may ask for",
                                   (unsigned long long)r->memory_bytes);
    if (r->gpu.memory_bytes > CRATER_JOB_MAX_GPU_MEMORY)
        return crater_errorf_field(err,
                                   CRATER_ERANGE,
                                   "resources.gpu.memory",
                                   "resources.gpu.memory: %llu bytes is "
                                   "more than 1Ti, the most a GPU slice "
                                   "may be",
                                   (unsigned long long)r->gpu.memory_bytes);
    if (r->cpu_milli > CRATER_JOB_MAX_CPU_MILLI)
        return crater_errorf_field(err,
                                   CRATER_ERANGE,
                                   "resources.cpu",
                                   "resources.cpu: %llu millicores is more "
                                   "than 1000000 cores, the most a job may "
                                   "ask for",
                                   (unsigned long long)r->cpu_milli);
    return 0;
}

int crater_jobspec_validate(const crater_jobspec_t *spec,
                            const crater_kb_t *kb,
                            crater_error_t *err)
{
    if (check_maxima(&spec->resources, err) < 0
        || check_priority_class(spec, err) < 0 || check_replicas(spec, err) < 0
        || check_gpu(&spec->resources.gpu, err) < 0
        || check_inference(spec, err) < 0
        || check_checkpoint(&spec->checkpoint, err) < 0
        || check_restart(spec, err) < 0 || check_misc(spec, err) < 0
        || check_container(spec, err) < 0)
        return -1;
    return kb ? check_kb(&spec->resources.gpu, kb, err) : 0;
}

/* ---- job arrays --------------------------------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

/* One decimal number at *p (advanced); -1 when there is none. */
static int64_t array_num(const char **p)
{
    int64_t v = 0;
    int digits = 0;

    while (**p >= '0' && **p <= '9' && digits < 9) {
        v = v * 10 + (**p - '0');
        (*p)++;
        digits++;
    }
    return digits && !(**p >= '0' && **p <= '9') ? v : -1;
}

/* One item "N", "N-M" or "N-M:S" at *p, appended to v. */
static int array_item(const char **p,
                      uint32_t *v,
                      size_t *n,
                      const char *text,
                      crater_error_t *err)
{
    const char *start = *p;
    int64_t a = array_num(p), b, step = 1;

    b = a;
    if (a >= 0 && **p == '-') {
        (*p)++;
        b = array_num(p);
    }
    if (a >= 0 && b >= 0 && **p == ':') {
        (*p)++;
        step = array_num(p);
    }
    if (a < 0 || b < 0 || step < 1 || (**p && **p != ',' && **p != '%'))
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "'%.60s' is not an array expression (indexes "
                             "like 0-999, 1,3,5-7 or 0-99:2, then %%P to "
                             "run at most P at once)",
                             text);
    if (b < a)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "'%.*s': the range ends before it starts",
                             (int)(*p - start),
                             start);
    if (b > CRATER_ARRAY_MAX_INDEX)
        return crater_errorf(err,
                             CRATER_ERANGE,
                             "'%.*s': indexes go up to %d",
                             (int)(*p - start),
                             start,
                             CRATER_ARRAY_MAX_INDEX);
    for (int64_t i = a; i <= b; i += step) {
        if (*n == CRATER_ARRAY_MAX)
            return crater_errorf(err,
                                 CRATER_ERANGE,
                                 "an array holds at most %d jobs",
                                 CRATER_ARRAY_MAX);
        v[(*n)++] = (uint32_t)i;
    }
    return 0;
}

int crater_array_parse(const char *s,
                       uint32_t **idx,
                       size_t *n,
                       uint32_t *parallelism,
                       crater_error_t *err)
{
    uint32_t *v = malloc(CRATER_ARRAY_MAX * sizeof(*v));
    const char *p = s;
    size_t k = 0, m = 0;
    int64_t par = 0;

    if (!v)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    *n = 0;
    do {
        if (p != s)
            p++; /* the comma */
        if (array_item(&p, v, &k, s, err) < 0)
            goto fail;
    } while (*p == ',');
    if (*p == '%') {
        p++;
        if ((par = array_num(&p)) < 1 || *p) {
            crater_errorf(err,
                          CRATER_EINVAL,
                          "'%.60s': %%P needs a whole number of jobs >= 1",
                          s);
            goto fail;
        }
    }
    qsort(v, k, sizeof(*v), cmp_u32);
    for (size_t i = 0; i < k; i++)
        if (m == 0 || v[m - 1] != v[i])
            v[m++] = v[i];
    *idx = v;
    *n = m;
    *parallelism = (uint32_t)par;
    return 0;
fail:
    free(v);
    return -1;
}

char *crater_array_format(const uint32_t *idx, size_t n, uint32_t parallelism)
{
    size_t cap = n * 18 + 24, len = 0;
    char *out = malloc(cap);

    if (!out)
        return NULL;
    out[0] = '\0';
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && idx[j + 1] == idx[j] + 1)
            j++;
        len += (size_t)snprintf(out + len,
                                cap - len,
                                j > i ? "%s%u-%u" : "%s%u",
                                i ? "," : "",
                                idx[i],
                                idx[j]);
        i = j + 1;
    }
    if (parallelism)
        snprintf(out + len, cap - len, "%%%u", parallelism);
    return out;
}
