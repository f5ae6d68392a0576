/* jobspec_codec.c - job spec documents (YAML or JSON, already loaded as a
 * jansson tree by doc.c) <-> crater_jobspec_t.
 *
 * Decoding is one field table per mapping, driven by crater_dec_object(),
 * so every error says "file:line:col: path: reason" and unknown keys get
 * a "did you mean". All field functions receive one struct ctx: the spec
 * being filled plus the few "was this given?" flags that the defaults
 * depending on other fields need (gang, replicas, maxReplicas). Those
 * derived defaults are applied once, after the whole document is read
 * (finish()), so field order in the document never matters.
 *
 * Encoding writes the normalised document: every field, quantities in
 * base units written so that decoding reads them back exactly (bytes and
 * IOPS as integers, millicores as "1500m", durations as "30000ms",
 * bandwidth as "2039000000000B/s"); for YAML output sizes are "...B"
 * strings too (encode_yaml). decode(encode(s)) equals s; the unit
 * tests check this for every example and for a spec with every field set.
 * Sizes (memory, gpu.memory) go through crater_dec_size(): a person must
 * write a unit ("512" in YAML or a string is refused; Slurm users mean
 * MiB), while a JSON integer, the normalised form, stays a byte count.
 * doc/jobspec.md documents both directions.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/jobspec.h"

#define NAME_LEN 63      /* job, tenant, priority class names */
#define TEXT_LEN 4096    /* paths, dataset names, values */
#define IMAGE_LEN 1024   /* container image references */
#define SHORT_LEN 253    /* vendor, profile, label keys and values */
#define ENV_NAME_LEN 256 /* environment variable names */
#define PRIORITY_MAX 1000000
#define MULTIPLIER_MAX 16.0
#define COST_MAX 1e15
#define QPS_MAX 1e9
#define BATCH_MAX 65536
#define NS_PER_MS 1000000u

#define N(a) (sizeof(a) / sizeof((a)[0]))

struct ctx {
    crater_jobspec_t *s;
    bool gang_set, replicas_set, max_set;
    crater_toleration_t *tol; /* the toleration being decoded */
    crater_volume_t *vol;     /* the volume being decoded */
    int tol_op;               /* its operator: -1 none, 0 Equal, 1 Exists */
};

#define SPEC(obj) (((struct ctx *)(obj))->s)

/* Value names; the index is the enum value. */
static const char *const workload_names[] = {"training",
                                             "inference",
                                             "batch",
                                             "interactive"};
static const char *const io_names[] = {"default",
                                       "training",
                                       "inference",
                                       "model-loading",
                                       "none"};
static const char *const numa_names[] = {"preferred", "strict", "none"};
static const char *const locality_names[] = {"none", "preferred", "required"};
static const char *const policy_names[] = {"soft", "hard"};
static const char *const restart_names[] = {"Never", "OnFailure"};
static const char *const pull_names[] = {"IfNotPresent", "Always", "Never"};
static const char *const nvlink_names[] = {"any", "preferred", "required"};
static const char *const isolation_names[] = {"slice", "mps", "mig", "none"};
static const char *const iface_names[] =
    {"any", "nvme", "sata", "sas", "virtio", "network"};
static const char *const effect_names[] = {"NoSchedule",
                                           "PreferNoSchedule",
                                           "NoExecute"};
static const char *const operator_names[] = {"Equal", "Exists"};

/* names[i], or "?" for a value outside the table (a corrupt spec). */
static const char *ename(const char *const *names, size_t n, int i)
{
    return i >= 0 && (size_t)i < n && names[i] ? names[i] : "?";
}

#define ENAME(names, i) json_string(ename(names, N(names), (int)(i)))

/* ---- typed helpers ------------------------------------------------------ */

static int dec_text(crater_dec_t *d, json_t *v, size_t maxlen, char **out)
{
    if (crater_dec_str(d, v, maxlen, out) < 0)
        return -1;
    if (!**out)
        return crater_dec_fail(d, CRATER_EINVAL, "must not be empty");
    return 0;
}

static bool valid_name(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > NAME_LEN)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

        if (!alnum && !((c == '-' || c == '.') && i > 0 && i < n - 1))
            return false;
    }
    return true;
}

/* Job, tenant and priority class names: DNS-label-like. */
static int dec_name(crater_dec_t *d, json_t *v, char **out)
{
    if (crater_dec_str(d, v, TEXT_LEN, out) < 0)
        return -1;
    if (!valid_name(*out))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "not a valid name: use 1-63 of a-z 0-9 - . "
                               "starting and ending with a-z or 0-9");
    return 0;
}

/* A string, or a number or boolean rendered as written ("0.10", "True"). */
static int dec_scalar_text(crater_dec_t *d,
                           json_t *v,
                           size_t maxlen,
                           char **out)
{
    char buf[64], *s;
    const char *t;

    if (json_is_string(v))
        return crater_dec_str(d, v, maxlen, out);
    if (!json_is_number(v) && !json_is_boolean(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a string, number or boolean, got %s",
                               crater_dec_typename(v));
    if (!(t = crater_dec_text(d, v, buf, sizeof(buf))))
        t = json_is_true(v) ? "true" : "false";
    if (strlen(t) > maxlen)
        return crater_dec_fail(d,
                               CRATER_ELIMIT,
                               "at most %zu characters",
                               maxlen);
    if (!(s = strdup(t)))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    free(*out);
    *out = s;
    return 0;
}

/* Durations are parsed in ns and stored in ms, rounding up. */
static int dec_ms(crater_dec_t *d, json_t *v, uint64_t *out)
{
    uint64_t ns;

    if (crater_dec_quantity(d, v, CRATER_DIM_DURATION, &ns) < 0)
        return -1;
    *out = ns / NS_PER_MS + (ns % NS_PER_MS != 0);
    return 0;
}

static int dec_enum_into(
    crater_dec_t *d, json_t *v, const char *const *names, size_t n, int *out)
{
    return crater_dec_enum(d, v, names, n, out);
}

#define DEC_ENUM(d, v, names, field)                       \
    do {                                                   \
        int e_;                                            \
        if (dec_enum_into(d, v, names, N(names), &e_) < 0) \
            return -1;                                     \
        field = e_;                                        \
    } while (0)

/* ---- RFC 3339 timestamps ------------------------------------------------ */

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    int64_t era;
    unsigned yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = (unsigned)(y - era * 400);
    doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    int64_t era;
    unsigned doe, yoe, doy, mp;

    z += 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = (unsigned)(z - era * 146097);
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

/* n decimal digits at *p into *out; advances *p. */
static bool digits(const char **p, int n, int *out)
{
    *out = 0;
    for (int i = 0; i < n; i++, (*p)++) {
        if (!isdigit((unsigned char)**p))
            return false;
        *out = *out * 10 + (**p - '0');
    }
    return true;
}

static bool expect(const char **p, const char *set)
{
    if (!**p || !strchr(set, **p))
        return false;
    (*p)++;
    return true;
}

static unsigned month_days(int y, int m)
{
    static const unsigned days[] =
        {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

    return days[m - 1] + (m == 2 && leap);
}

/* ".123456" -> milliseconds, rounded up. */
static int frac_ms(const char **p)
{
    int ms = 0, n = 0;
    bool rest = false;

    if (**p != '.')
        return 0;
    for ((*p)++; isdigit((unsigned char)**p); (*p)++, n++) {
        if (n < 3)
            ms = ms * 10 + (**p - '0');
        else
            rest = rest || **p != '0';
    }
    if (n == 0)
        return -1;
    for (; n < 3; n++)
        ms *= 10;
    return ms + rest;
}

/* Offset east of UTC in seconds: "Z", "+08:00", "-05:30". */
static bool parse_offset(const char **p, int *secs)
{
    int sign, h, m;

    if (expect(p, "Zz")) {
        *secs = 0;
        return true;
    }
    sign = **p == '-' ? -1 : 1;
    if (!expect(p, "+-") || !digits(p, 2, &h) || !expect(p, ":")
        || !digits(p, 2, &m) || h > 23 || m > 59)
        return false;
    *secs = sign * (h * 3600 + m * 60);
    return true;
}

/* "2024-06-15T10:00:00Z" -> Unix epoch ms. Returns 0, -1 when the text
 * is not RFC 3339, -2 when it is but names no such moment (Feb 30, 25:00)
 * or one before 1970. */
static int parse_rfc3339(const char *s, int64_t *out)
{
    int y, mo, d, h, mi, sec, off, ms;
    const char *p = s;

    if (!digits(&p, 4, &y) || !expect(&p, "-") || !digits(&p, 2, &mo)
        || !expect(&p, "-") || !digits(&p, 2, &d) || !expect(&p, "Tt ")
        || !digits(&p, 2, &h) || !expect(&p, ":") || !digits(&p, 2, &mi)
        || !expect(&p, ":") || !digits(&p, 2, &sec))
        return -1;
    if ((ms = frac_ms(&p)) < 0 || !parse_offset(&p, &off) || *p)
        return -1;
    if (mo < 1 || mo > 12 || d < 1 || (unsigned)d > month_days(y, mo) || h > 23
        || mi > 59 || sec > 59)
        return -2;
    *out = ((days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600
             + mi * 60 + sec - off)
            * 1000)
           + ms;
    return *out > 0 ? 0 : -2;
}

static json_t *format_rfc3339(int64_t ms)
{
    int64_t secs = ms / 1000 - (ms % 1000 < 0), y;
    int64_t days = secs / 86400 - (secs % 86400 < 0);
    int64_t rem = secs - days * 86400, frac = ms - secs * 1000;
    unsigned m, d;
    char buf[48];

    civil_from_days(days, &y, &m, &d);
    snprintf(buf,
             sizeof(buf),
             "%04" PRId64 "-%02u-%02uT%02d:%02d:%02d",
             y,
             m,
             d,
             (int)(rem / 3600),
             (int)(rem / 60 % 60),
             (int)(rem % 60));
    if (frac)
        snprintf(buf + strlen(buf),
                 sizeof(buf) - strlen(buf),
                 ".%03d",
                 (int)frac);
    strcat(buf, "Z");
    return json_string(buf);
}

/* ---- resources ---------------------------------------------------------- */

static int f_gpu_count(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_u32(d,
                          v,
                          0,
                          CRATER_JOB_MAX_GPUS,
                          &SPEC(obj)->resources.gpu.count);
}

static int f_gpu_memory(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_size(d, v, &SPEC(obj)->resources.gpu.memory_bytes);
}

static int f_gpu_model(crater_dec_t *d, json_t *v, void *obj)
{
    crater_gpu_req_t *g = &SPEC(obj)->resources.gpu;
    size_t n;

    if (crater_dec_strv(d, v, CRATER_JOB_MAX_LIST, SHORT_LEN, &g->models, &n)
        < 0)
        return -1;
    if (n == 0)
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "empty list; leave model out to allow any GPU");
    for (size_t i = 0; i < n; i++) {
        if (*g->models[i])
            continue;
        if (json_is_array(v)) /* the failing path stays in d */
            crater_dec_push_index(d, i);
        return crater_dec_fail(d, CRATER_EINVAL, "must not be empty");
    }
    return 0;
}

static int f_gpu_vendor(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_text(d, v, SHORT_LEN, &SPEC(obj)->resources.gpu.vendor);
}

static int f_gpu_min_sm(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_u32(d,
                          v,
                          0,
                          1000000,
                          &SPEC(obj)->resources.gpu.min_sm_count);
}

static int f_gpu_min_cc(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_kb_dec_compute_cap(d,
                                     v,
                                     &SPEC(obj)->resources.gpu.min_compute_cap);
}

static int f_gpu_min_hbm(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_quantity(d,
                               v,
                               CRATER_DIM_BANDWIDTH,
                               &SPEC(obj)->resources.gpu.min_hbm_bandwidth);
}

static int f_gpu_nvlink(crater_dec_t *d, json_t *v, void *obj)
{
    crater_gpu_req_t *g = &SPEC(obj)->resources.gpu;

    if (json_is_boolean(v)) {
        g->nvlink =
            json_is_true(v) ? CRATER_NVLINK_REQUIRED : CRATER_NVLINK_ANY;
        return 0;
    }
    DEC_ENUM(d, v, nvlink_names, g->nvlink);
    return 0;
}

static int f_gpu_isolation(crater_dec_t *d, json_t *v, void *obj)
{
    crater_gpu_req_t *g = &SPEC(obj)->resources.gpu;

    DEC_ENUM(d, v, isolation_names, g->isolation);
    return 0;
}

static const crater_dec_field_t gpu_fields[] = {
    {"count", f_gpu_count, 0},
    {"memory", f_gpu_memory, 0},
    {"model", f_gpu_model, 0},
    {"vendor", f_gpu_vendor, 0},
    {"minSmCount", f_gpu_min_sm, 0},
    {"minComputeCapability", f_gpu_min_cc, 0},
    {"minHbmBandwidth", f_gpu_min_hbm, 0},
    {"nvlink", f_gpu_nvlink, 0},
    {"isolation", f_gpu_isolation, 0},
    {NULL, NULL, 0},
};

/* gpu: 2 (whole GPUs) or a mapping; a mapping without count means 1. */
static int f_gpu(crater_dec_t *d, json_t *v, void *obj)
{
    crater_gpu_req_t *g = &SPEC(obj)->resources.gpu;

    if (json_is_integer(v))
        return f_gpu_count(d, v, obj);
    if (json_is_real(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "a fraction of a GPU is a memory slice: write "
                               "gpu: {count: 1, memory: 20Gi}");
    if (!json_is_object(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a GPU count or a mapping, got %s",
                               crater_dec_typename(v));
    g->count = 1;
    return crater_dec_object(d, v, gpu_fields, obj);
}

static int f_cpu(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_quantity(d,
                               v,
                               CRATER_DIM_CPU,
                               &SPEC(obj)->resources.cpu_milli);
}

static int f_memory(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_size(d, v, &SPEC(obj)->resources.memory_bytes);
}

static int f_disk_iops(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_quantity(d,
                               v,
                               CRATER_DIM_IOPS,
                               &SPEC(obj)->resources.disk.iops);
}

static int f_disk_bandwidth(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_quantity(d,
                               v,
                               CRATER_DIM_BANDWIDTH,
                               &SPEC(obj)->resources.disk.bandwidth);
}

static int f_disk_iface(crater_dec_t *d, json_t *v, void *obj)
{
    DEC_ENUM(d, v, iface_names, SPEC(obj)->resources.disk.iface);
    return 0;
}

/* Stored in microseconds, rounded up. */
static int f_disk_latency(crater_dec_t *d, json_t *v, void *obj)
{
    uint64_t ns, us;

    if (crater_dec_quantity(d, v, CRATER_DIM_DURATION, &ns) < 0)
        return -1;
    us = ns / 1000 + (ns % 1000 != 0);
    if (us > UINT32_MAX)
        return crater_dec_fail(d,
                               CRATER_ERANGE,
                               "at most %" PRIu32 "us (about 71 minutes)",
                               UINT32_MAX);
    SPEC(obj)->resources.disk.max_latency_us = (uint32_t)us;
    return 0;
}

static const crater_dec_field_t disk_fields[] = {
    {"iops", f_disk_iops, 0},
    {"bandwidth", f_disk_bandwidth, 0},
    {"interface", f_disk_iface, 0},
    {"maxLatency", f_disk_latency, 0},
    {NULL, NULL, 0},
};

static int f_disk(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_object(d, v, disk_fields, obj);
}

static const crater_dec_field_t resources_fields[] = {
    {"gpu", f_gpu, 0},
    {"cpu", f_cpu, 0},
    {"memory", f_memory, 0},
    {"disk", f_disk, 0},
    {NULL, NULL, 0},
};

static int f_resources(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_object(d, v, resources_fields, obj);
}

/* ---- dataLocality, checkpoint, inference -------------------------------- */

static int f_dataset(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_text(d, v, TEXT_LEN, &SPEC(obj)->dataset);
}

static int f_locality_mode(crater_dec_t *d, json_t *v, void *obj)
{
    DEC_ENUM(d, v, locality_names, SPEC(obj)->locality);
    return 0;
}

static const crater_dec_field_t locality_fields[] = {
    {"dataset", f_dataset, CRATER_FIELD_REQUIRED},
    {"mode", f_locality_mode, 0},
    {NULL, NULL, 0},
};

static int f_locality(crater_dec_t *d, json_t *v, void *obj)
{
    SPEC(obj)->locality = CRATER_LOCALITY_PREFERRED;
    return crater_dec_object(d, v, locality_fields, obj);
}

static int f_ckpt_dir(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_text(d, v, TEXT_LEN, &SPEC(obj)->checkpoint.dir);
}

static int f_ckpt_interval(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_ms(d, v, &SPEC(obj)->checkpoint.interval_ms);
}

static int f_ckpt_incremental(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_ms(d, v, &SPEC(obj)->checkpoint.incremental_interval_ms);
}

static const crater_dec_field_t checkpoint_fields[] = {
    {"dir", f_ckpt_dir, CRATER_FIELD_REQUIRED},
    {"checkpointInterval", f_ckpt_interval, 0},
    {"incrementalInterval", f_ckpt_incremental, 0},
    {NULL, NULL, 0},
};

static int f_checkpoint(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_object(d, v, checkpoint_fields, obj);
}

static int f_inf_port(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_u32(d, v, 1, 65535, &SPEC(obj)->inference.port);
}

static int f_inf_min(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_u32(d,
                          v,
                          0,
                          CRATER_JOB_MAX_REPLICAS,
                          &SPEC(obj)->inference.min_replicas);
}

static int f_inf_max(crater_dec_t *d, json_t *v, void *obj)
{
    ((struct ctx *)obj)->max_set = true;
    return crater_dec_u32(d,
                          v,
                          1,
                          CRATER_JOB_MAX_REPLICAS,
                          &SPEC(obj)->inference.max_replicas);
}

static int f_inf_qps(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_double(d,
                             v,
                             0,
                             QPS_MAX,
                             &SPEC(obj)->inference.target_qps);
}

static int f_inf_warm(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_u32(d,
                          v,
                          0,
                          CRATER_JOB_MAX_REPLICAS,
                          &SPEC(obj)->inference.warm_pool_size);
}

static int f_inf_batch(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_u32(d,
                          v,
                          0,
                          BATCH_MAX,
                          &SPEC(obj)->inference.max_batch_size);
}

static int f_inf_timeout(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_ms(d, v, &SPEC(obj)->inference.batch_timeout_ms);
}

static int f_inf_conc(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_double(d,
                             v,
                             0,
                             QPS_MAX,
                             &SPEC(obj)->inference.target_concurrency);
}

static int f_inf_stable(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_ms(d, v, &SPEC(obj)->inference.stable_window_ms);
}

static int f_inf_panic(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_ms(d, v, &SPEC(obj)->inference.panic_window_ms);
}

static int f_inf_delay(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_ms(d, v, &SPEC(obj)->inference.scale_down_delay_ms);
}

static int f_inf_grace(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_ms(d, v, &SPEC(obj)->inference.zero_grace_ms);
}

#define READY_PERIOD_MAX_MS 3600000ull

static int ready_arg(crater_dec_t *d, json_t *el, void *obj, size_t i)
{
    char **argv = SPEC(obj)->inference.ready_cmd;

    if (dec_scalar_text(d, el, CRATER_JOB_MAX_ARG_LEN, &argv[i]) < 0)
        return -1;
    if (i == 0 && !*argv[0])
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "the program name must not be empty");
    return 0;
}

static int f_ready_cmd(crater_dec_t *d, json_t *v, void *obj)
{
    crater_inference_t *inf = &SPEC(obj)->inference;
    size_t n = json_array_size(v);

    if (json_is_string(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "give a list, not a string: the command runs "
                               "without a shell, e.g. [test, -e, ready]");
    if (json_is_array(v) && n == 0)
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "empty list; give at least the program to run");
    if (json_is_array(v) && n <= CRATER_JOB_MAX_ARGS
        && !(inf->ready_cmd = calloc(n + 1, sizeof(*inf->ready_cmd))))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    return crater_dec_array(d, v, CRATER_JOB_MAX_ARGS, ready_arg, obj);
}

/* A duration of 1 ms to an hour. */
static int dec_ready_ms(crater_dec_t *d, json_t *v, uint64_t *out)
{
    if (dec_ms(d, v, out) < 0)
        return -1;
    if (*out < 1 || *out > READY_PERIOD_MAX_MS)
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "must be 1 ms to 1 h, not %" PRIu64 " ms",
                               *out);
    return 0;
}

static int f_ready_period(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_ready_ms(d, v, &SPEC(obj)->inference.ready_period_ms);
}

static int f_ready_timeout(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_ready_ms(d, v, &SPEC(obj)->inference.ready_timeout_ms);
}

static const crater_dec_field_t readiness_fields[] = {
    {"command", f_ready_cmd, 1},
    {"period", f_ready_period, 0},
    {"timeout", f_ready_timeout, 0},
    {NULL, NULL, 0},
};

static int f_inf_ready(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_object(d, v, readiness_fields, obj);
}

static const crater_dec_field_t inference_fields[] = {
    {"port", f_inf_port, 0},
    {"minReplicas", f_inf_min, 0},
    {"maxReplicas", f_inf_max, 0},
    {"targetQPS", f_inf_qps, 0},
    {"warmPoolSize", f_inf_warm, 0},
    {"maxBatchSize", f_inf_batch, 0},
    {"batchTimeout", f_inf_timeout, 0},
    {"targetConcurrency", f_inf_conc, 0},
    {"stableWindow", f_inf_stable, 0},
    {"panicWindow", f_inf_panic, 0},
    {"scaleDownDelay", f_inf_delay, 0},
    {"scaleToZeroGrace", f_inf_grace, 0},
    {"readiness", f_inf_ready, 0},
    {NULL, NULL, 0},
};

static int f_inference(crater_dec_t *d, json_t *v, void *obj)
{
    SPEC(obj)->inference.enabled = true;
    return crater_dec_object(d, v, inference_fields, obj);
}

/* ---- command, env, selectors, tolerations ------------------------------- */

static int arg_elem(crater_dec_t *d, json_t *el, void *obj, size_t i)
{
    char **argv = SPEC(obj)->command;

    if (dec_scalar_text(d, el, CRATER_JOB_MAX_ARG_LEN, &argv[i]) < 0)
        return -1;
    if (i == 0 && !*argv[0])
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "the program name must not be empty");
    return 0;
}

static int f_command(crater_dec_t *d, json_t *v, void *obj)
{
    crater_jobspec_t *s = SPEC(obj);
    size_t n = json_array_size(v);

    if (json_is_string(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "give a list, not a string: Crater runs argv "
                               "without a shell, e.g. [python, train.py]");
    if (!json_is_array(v) || n > CRATER_JOB_MAX_ARGS)
        return crater_dec_array(d, v, CRATER_JOB_MAX_ARGS, arg_elem, obj);
    if (n == 0)
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "empty list; give at least the program to run");
    if (!(s->command = calloc(n + 1, sizeof(*s->command))))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    return crater_dec_array(d, v, CRATER_JOB_MAX_ARGS, arg_elem, obj);
}

static bool valid_env_name(const char *s)
{
    if (!*s || strlen(s) > ENV_NAME_LEN || isdigit((unsigned char)*s))
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

static int check_env_key(crater_dec_t *d, const char *key)
{
    if (!valid_env_name(key))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "not a valid variable name: use letters, "
                               "digits and '_', not starting with a digit");
    if (strcmp(key, "CUDA_VISIBLE_DEVICES") == 0)
        return crater_dec_fail(d,
                               CRATER_ECONFLICT,
                               "set by Crater from the GPUs it assigns; "
                               "remove it");
    return 0;
}

static int check_label_key(crater_dec_t *d, const char *key)
{
    if (!crater_label_key_ok(key))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "not a valid label key: use letters, digits "
                               "and - _ . /");
    return 0;
}

/* A mapping of NAME: scalar into a crater_kv_t array (*kv, *n). */
static int dec_kv(crater_dec_t *d,
                  json_t *v,
                  size_t max,
                  size_t maxlen,
                  int (*check)(crater_dec_t *, const char *),
                  crater_kv_t **kv,
                  size_t *n)
{
    const char *key;
    json_t *val;

    if (!json_is_object(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a mapping, got %s",
                               crater_dec_typename(v));
    if (json_object_size(v) > max)
        return crater_dec_fail(d,
                               CRATER_ELIMIT,
                               "%zu entries, at most %zu allowed",
                               json_object_size(v),
                               max);
    if (json_object_size(v)
        && !(*kv = calloc(json_object_size(v), sizeof(**kv))))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    json_object_foreach(v, key, val)
    {
        size_t mark = crater_dec_push_key(d, key);

        if (check(d, key) < 0)
            return -1;
        if (!((*kv)[*n].key = strdup(key)))
            return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
        if (dec_scalar_text(d, val, maxlen, &(*kv)[(*n)++].value) < 0)
            return -1;
        crater_dec_pop(d, mark);
    }
    return 0;
}

static int f_env(crater_dec_t *d, json_t *v, void *obj)
{
    crater_jobspec_t *s = SPEC(obj);

    return dec_kv(d,
                  v,
                  CRATER_JOB_MAX_ENV,
                  CRATER_JOB_MAX_ARG_LEN,
                  check_env_key,
                  &s->env,
                  &s->nenv);
}

static int f_selector(crater_dec_t *d, json_t *v, void *obj)
{
    crater_jobspec_t *s = SPEC(obj);

    return dec_kv(d,
                  v,
                  CRATER_JOB_MAX_LIST,
                  SHORT_LEN,
                  check_label_key,
                  &s->selector,
                  &s->nselector);
}

static int f_tol_key(crater_dec_t *d, json_t *v, void *obj)
{
    crater_toleration_t *t = ((struct ctx *)obj)->tol;

    if (dec_text(d, v, SHORT_LEN, &t->key) < 0)
        return -1;
    return check_label_key(d, t->key);
}

static int f_tol_value(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_scalar_text(d, v, SHORT_LEN, &((struct ctx *)obj)->tol->value);
}

static int f_tol_effect(crater_dec_t *d, json_t *v, void *obj)
{
    DEC_ENUM(d, v, effect_names, ((struct ctx *)obj)->tol->effect);
    return 0;
}

static int f_tol_operator(crater_dec_t *d, json_t *v, void *obj)
{
    DEC_ENUM(d, v, operator_names, ((struct ctx *)obj)->tol_op);
    return 0;
}

static const crater_dec_field_t toleration_fields[] = {
    {"key", f_tol_key, CRATER_FIELD_REQUIRED},
    {"operator", f_tol_operator, 0},
    {"value", f_tol_value, 0},
    {"effect", f_tol_effect, 0},
    {NULL, NULL, 0},
};

/* operator is optional: Exists means no value, Equal needs one. */
static int tol_elem(crater_dec_t *d, json_t *el, void *obj, size_t i)
{
    struct ctx *c = obj;
    size_t mark;

    c->tol = &c->s->tolerations[i];
    c->tol->effect = -1;
    c->tol_op = -1;
    c->s->ntolerations = i + 1;
    if (crater_dec_object(d, el, toleration_fields, obj) < 0)
        return -1;
    if (c->tol_op < 0 || (c->tol_op == 1) == !c->tol->value)
        return 0;
    mark = crater_dec_push_key(d, "operator");
    crater_dec_fail(d,
                    CRATER_ECONFLICT,
                    "%s",
                    c->tol_op ? "Exists matches any value; remove value"
                              : "Equal needs a value");
    crater_dec_pop(d, mark);
    return -1;
}

static int f_tolerations(crater_dec_t *d, json_t *v, void *obj)
{
    crater_jobspec_t *s = SPEC(obj);
    size_t n = json_array_size(v);

    if (json_is_array(v) && n > 0 && n <= CRATER_JOB_MAX_LIST
        && !(s->tolerations = calloc(n, sizeof(*s->tolerations))))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    return crater_dec_array(d, v, CRATER_JOB_MAX_LIST, tol_elem, obj);
}

static int after_elem(crater_dec_t *d, json_t *el, void *obj, size_t i)
{
    return dec_name(d, el, &SPEC(obj)->after[i]);
}

static int f_after(crater_dec_t *d, json_t *v, void *obj)
{
    crater_jobspec_t *s = SPEC(obj);
    size_t n = json_array_size(v);

    if (json_is_array(v) && n > 0 && n <= CRATER_JOB_MAX_LIST
        && !(s->after = calloc(n + 1, sizeof(*s->after))))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    return crater_dec_array(d, v, CRATER_JOB_MAX_LIST, after_elem, obj);
}

/* ---- top level ---------------------------------------------------------- */

static int f_api_version(crater_dec_t *d, json_t *v, void *obj)
{
    (void)obj;
    return crater_dec_literal(d, v, "crater/v1");
}

static int f_kind(crater_dec_t *d, json_t *v, void *obj)
{
    (void)obj;
    return crater_dec_literal(d, v, "Job");
}

static int f_name(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_name(d, v, &SPEC(obj)->name);
}

static int f_tenant(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_name(d, v, &SPEC(obj)->tenant);
}

static int f_workload(crater_dec_t *d, json_t *v, void *obj)
{
    DEC_ENUM(d, v, workload_names, SPEC(obj)->workload_type);
    SPEC(obj)->workload_type_explicit = true;
    return 0;
}

static int f_priority(crater_dec_t *d, json_t *v, void *obj)
{
    int64_t p;

    if (crater_dec_int(d, v, -PRIORITY_MAX, PRIORITY_MAX, &p) < 0)
        return -1;
    SPEC(obj)->priority = (int32_t)p;
    return 0;
}

static int f_priority_class(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_name(d, v, &SPEC(obj)->priority_class);
}

static int f_preemptible(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_bool(d, v, &SPEC(obj)->preemptible);
}

static int f_idle_reclaim(crater_dec_t *d, json_t *v, void *obj)
{
    bool b = true;

    if (crater_dec_bool(d, v, &b) < 0)
        return -1;
    SPEC(obj)->no_idle_reclaim = !b;
    return 0;
}

static int f_grace(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_ms(d, v, &SPEC(obj)->grace_period_ms);
}

/* timeLimit: a duration of 1s to 366d; absent = no limit. */
static int f_time_limit(crater_dec_t *d, json_t *v, void *obj)
{
    uint64_t ms;

    if (dec_ms(d, v, &ms) < 0)
        return -1;
    if (ms < CRATER_JOB_MIN_TIME_LIMIT_MS || ms > CRATER_JOB_MAX_TIME_LIMIT_MS)
        return crater_dec_fail(d,
                               CRATER_ERANGE,
                               "must be between 1s and 366d (omit it for "
                               "no limit), got %" PRIu64 "ms",
                               ms);
    SPEC(obj)->time_limit_ms = ms;
    return 0;
}

static int f_multiplier(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_double(d,
                             v,
                             1.0,
                             MULTIPLIER_MAX,
                             &SPEC(obj)->cpu_limit_multiplier);
}

static int f_burst(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_bool(d, v, &SPEC(obj)->cpu_burst);
}

static int f_io(crater_dec_t *d, json_t *v, void *obj)
{
    DEC_ENUM(d, v, io_names, SPEC(obj)->io_profile);
    return 0;
}

static int f_numa(crater_dec_t *d, json_t *v, void *obj)
{
    DEC_ENUM(d, v, numa_names, SPEC(obj)->numa);
    return 0;
}

static int f_deadline(crater_dec_t *d, json_t *v, void *obj)
{
    if (!json_is_string(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected an RFC 3339 timestamp such as "
                               "2024-06-15T10:00:00Z, got %s",
                               crater_dec_typename(v));
    switch (parse_rfc3339(json_string_value(v), &SPEC(obj)->deadline_ms)) {
    case 0:
        return 0;
    case -1:
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%.40s' is not an RFC 3339 timestamp such as "
                               "2024-06-15T10:00:00Z",
                               json_string_value(v));
    default:
        return crater_dec_fail(d,
                               CRATER_ERANGE,
                               "'%.40s': no such date or time, or "
                               "before 1970",
                               json_string_value(v));
    }
}

static int f_deadline_policy(crater_dec_t *d, json_t *v, void *obj)
{
    DEC_ENUM(d, v, policy_names, SPEC(obj)->deadline_policy);
    return 0;
}

static int f_restart_policy(crater_dec_t *d, json_t *v, void *obj)
{
    DEC_ENUM(d, v, restart_names, SPEC(obj)->restart_policy);
    return 0;
}

static int f_backoff_limit(crater_dec_t *d, json_t *v, void *obj)
{
    SPEC(obj)->backoff_limit_set = true;
    return crater_dec_u32(d,
                          v,
                          0,
                          CRATER_BACKOFF_LIMIT_MAX,
                          &SPEC(obj)->backoff_limit);
}

static int f_cost_cap(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_double(d, v, 0, COST_MAX, &SPEC(obj)->cost_cap);
}

static int f_profile(crater_dec_t *d, json_t *v, void *obj)
{
    char **p = &SPEC(obj)->profile;

    if (dec_text(d, v, SHORT_LEN, p) < 0)
        return -1;
    for (const char *c = *p; *c; c++)
        if (isspace((unsigned char)*c) || iscntrl((unsigned char)*c))
            return crater_dec_fail(d,
                                   CRATER_EINVAL,
                                   "expected name@version without spaces");
    return 0;
}

static int f_replicas(crater_dec_t *d, json_t *v, void *obj)
{
    ((struct ctx *)obj)->replicas_set = true;
    return crater_dec_u32(d,
                          v,
                          0,
                          CRATER_JOB_MAX_REPLICAS,
                          &SPEC(obj)->replicas);
}

static int f_gang(crater_dec_t *d, json_t *v, void *obj)
{
    ((struct ctx *)obj)->gang_set = true;
    return crater_dec_bool(d, v, &SPEC(obj)->gang);
}

static int f_image(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_text(d, v, IMAGE_LEN, &SPEC(obj)->image);
}

static int f_image_pull(crater_dec_t *d, json_t *v, void *obj)
{
    DEC_ENUM(d, v, pull_names, SPEC(obj)->image_pull);
    return 0;
}

/* An absolute path without "..": a mount source or target. */
static int dec_abs_path(crater_dec_t *d, json_t *v, char **out)
{
    if (crater_dec_str(d, v, TEXT_LEN, out) < 0)
        return -1;
    if (**out != '/')
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%.40s' is not an absolute path",
                               *out);
    if (strstr(*out, "/..") || strchr(*out, ','))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%.40s': no '..' component or ',' allowed",
                               *out);
    return 0;
}

static int f_vol_host(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_abs_path(d, v, &((struct ctx *)obj)->vol->host_path);
}

static int f_vol_scratch(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_name(d, v, &((struct ctx *)obj)->vol->scratch);
}

static int f_vol_mount(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_abs_path(d, v, &((struct ctx *)obj)->vol->mount_path);
}

static int f_vol_ro(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_bool(d, v, &((struct ctx *)obj)->vol->read_only);
}

static const crater_dec_field_t volume_fields[] = {
    {"hostPath", f_vol_host, 0},
    {"scratch", f_vol_scratch, 0},
    {"mountPath", f_vol_mount, CRATER_FIELD_REQUIRED},
    {"readOnly", f_vol_ro, 0},
    {NULL, NULL, 0},
};

/* Exactly one source: hostPath or scratch. */
static int vol_elem(crater_dec_t *d, json_t *el, void *obj, size_t i)
{
    struct ctx *c = obj;
    crater_volume_t *vol = &c->s->volumes[i];

    c->vol = vol;
    c->s->nvolumes = i + 1;
    if (crater_dec_object(d, el, volume_fields, obj) < 0)
        return -1;
    if (!vol->host_path != !vol->scratch)
        return 0;
    return crater_dec_fail(d,
                           CRATER_EINVAL,
                           "%s",
                           vol->host_path ? "hostPath and scratch: give one"
                                          : "needs hostPath or scratch");
}

static int f_volumes(crater_dec_t *d, json_t *v, void *obj)
{
    crater_jobspec_t *s = SPEC(obj);
    size_t n = json_array_size(v);

    if (json_is_array(v) && n > 0 && n <= CRATER_JOB_MAX_LIST
        && !(s->volumes = calloc(n, sizeof(*s->volumes))))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    return crater_dec_array(d, v, CRATER_JOB_MAX_LIST, vol_elem, obj);
}

static int f_workdir(crater_dec_t *d, json_t *v, void *obj)
{
    char **w = &SPEC(obj)->workdir;

    if (crater_dec_str(d, v, TEXT_LEN, w) < 0)
        return -1;
    if (**w != '/')
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%.40s' is not an absolute path",
                               *w);
    return 0;
}

static int f_array(crater_dec_t *d, json_t *v, void *obj)
{
    crater_jobspec_t *s = SPEC(obj);
    crater_error_t e = {0};
    char *text = NULL;
    int rc;

    if (!json_is_string(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a string such as \"0-999\" or "
                               "\"1,3,5-7%%2\", got %s",
                               crater_dec_typename(v));
    if (crater_dec_str(d, v, TEXT_LEN, &text) < 0)
        return -1;
    free(s->array);
    s->array = NULL;
    rc = crater_array_parse(text,
                            &s->array,
                            &s->narray,
                            &s->array_parallelism,
                            &e);
    free(text);
    return rc < 0 ? crater_dec_fail(d, e.errnum, "%s", e.text) : 0;
}

static const crater_dec_field_t job_fields[] = {
    {"apiVersion", f_api_version, 0},
    {"kind", f_kind, 0},
    {"name", f_name, 0},
    {"tenant", f_tenant, 0},
    {"workloadType", f_workload, 0},
    {"priority", f_priority, 0},
    {"priorityClass", f_priority_class, 0},
    {"preemptible", f_preemptible, 0},
    {"idleReclaim", f_idle_reclaim, 0},
    {"gracePeriod", f_grace, 0},
    {"timeLimit", f_time_limit, 0},
    {"restartPolicy", f_restart_policy, 0},
    {"backoffLimit", f_backoff_limit, 0},
    {"resources", f_resources, 0},
    {"cpuLimitMultiplier", f_multiplier, 0},
    {"cpuBurst", f_burst, 0},
    {"ioProfile", f_io, 0},
    {"numa", f_numa, 0},
    {"dataLocality", f_locality, 0},
    {"checkpoint", f_checkpoint, 0},
    {"deadline", f_deadline, 0},
    {"deadlinePolicy", f_deadline_policy, 0},
    {"costCap", f_cost_cap, 0},
    {"profile", f_profile, 0},
    {"replicas", f_replicas, 0},
    {"gang", f_gang, 0},
    {"after", f_after, 0},
    {"array", f_array, 0},
    {"inference", f_inference, 0},
    {"command", f_command, 0},
    {"image", f_image, 0},
    {"imagePullPolicy", f_image_pull, 0},
    {"volumes", f_volumes, 0},
    {"env", f_env, 0},
    {"workdir", f_workdir, 0},
    {"nodeSelector", f_selector, 0},
    {"tolerations", f_tolerations, 0},
    {NULL, NULL, 0},
};

static uint32_t max_u32(uint32_t a, uint32_t b)
{
    return a > b ? a : b;
}

/* Defaults that depend on other fields (doc/jobspec.md, "Defaults"). */
static void finish(struct ctx *c)
{
    crater_jobspec_t *s = c->s;
    crater_inference_t *inf = &s->inference;

    if (inf->enabled && !c->max_set)
        inf->max_replicas = max_u32(max_u32(inf->min_replicas, 1),
                                    c->replicas_set ? s->replicas : 0);
    if (inf->enabled && !c->replicas_set)
        s->replicas = max_u32(inf->min_replicas, 1);
    if (!s->workload_type_explicit)
        s->workload_type = inf->enabled
                               ? CRATER_WORKLOAD_INFERENCE
                               : crater_workload_infer(s->command, s->image);
    if (!s->backoff_limit_set)
        s->backoff_limit = CRATER_BACKOFF_LIMIT_DEFAULT;
    if (!c->gang_set)
        s->gang =
            s->replicas > 1 && s->workload_type == CRATER_WORKLOAD_TRAINING;
}

int crater_jobspec_decode(crater_dec_t *d, json_t *root, crater_jobspec_t **out)
{
    struct ctx c = {.s = crater_jobspec_create()};

    if (!c.s)
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    if (!root || crater_dec_object(d, root, job_fields, &c) < 0) {
        if (!root)
            crater_dec_fail(d, CRATER_EINVAL, "no document");
        crater_jobspec_destroy(c.s);
        return -1;
    }
    finish(&c);
    *out = c.s;
    return 0;
}

/* ---- encoding ----------------------------------------------------------- */

/* Steals v; a NULL v (allocation failure) is an error. */
static int put(json_t *o, const char *key, json_t *v)
{
    return json_object_set_new(o, key, v) < 0 ? -1 : 0;
}

static int put_str(json_t *o, const char *key, const char *s)
{
    return s ? put(o, key, json_string(s)) : 0;
}

/* IOPS read back from a bare integer; values above INT64_MAX (beyond
 * JSON's exact integers) as a string of digits, which the unit parser
 * reads the same way. */
static json_t *j_count(uint64_t v)
{
    if (v > INT64_MAX)
        return json_sprintf("%" PRIu64, v);
    return json_integer((json_int_t)v);
}

/* A size: an integer count of bytes; above 2^63-1 (no JSON integer) a
 * "...B" string, since a size written as a string needs a unit. */
static json_t *j_size(uint64_t v)
{
    if (v > INT64_MAX)
        return json_sprintf("%" PRIu64 "B", v);
    return json_integer((json_int_t)v);
}

static json_t *j_ms(uint64_t ms)
{
    return json_sprintf("%" PRIu64 "ms", ms);
}

static json_t *j_strv(char *const *v)
{
    json_t *a = json_array();

    for (size_t i = 0; a && v && v[i]; i++) {
        if (json_array_append_new(a, json_string(v[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *j_kv(const crater_kv_t *kv, size_t n)
{
    json_t *o = json_object();

    for (size_t i = 0; o && i < n; i++) {
        if (put(o, kv[i].key, json_string(kv[i].value)) < 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* Build an object from put() calls; NULL if any failed. */
static json_t *done(json_t *o, int rc)
{
    if (rc < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *enc_gpu(const crater_gpu_req_t *g)
{
    json_t *o = json_object();
    int rc = o ? 0 : -1;

    rc |= put(o, "count", json_integer(g->count));
    rc |= put(o, "memory", j_size(g->memory_bytes));
    if (g->models)
        rc |= put(o, "model", j_strv(g->models));
    rc |= put_str(o, "vendor", g->vendor);
    rc |= put(o, "minSmCount", json_integer(g->min_sm_count));
    if (g->min_compute_cap) /* the decoder refuses 0: omitted means any */
        rc |= put(o, "minComputeCapability", json_integer(g->min_compute_cap));
    rc |= put(o,
              "minHbmBandwidth",
              json_sprintf("%" PRIu64 "B/s", g->min_hbm_bandwidth));
    rc |= put(o, "nvlink", ENAME(nvlink_names, g->nvlink));
    rc |= put(o, "isolation", ENAME(isolation_names, g->isolation));
    return done(o, rc);
}

static json_t *enc_resources(const crater_resources_t *r)
{
    json_t *o = json_object(), *disk = json_object();
    int rc = o && disk ? 0 : -1;

    rc |= put(disk, "iops", j_count(r->disk.iops));
    rc |= put(disk,
              "bandwidth",
              json_sprintf("%" PRIu64 "B/s", r->disk.bandwidth));
    rc |= put(disk, "interface", ENAME(iface_names, r->disk.iface));
    rc |= put(disk,
              "maxLatency",
              json_sprintf("%" PRIu32 "us", r->disk.max_latency_us));
    rc |= put(o, "gpu", enc_gpu(&r->gpu));
    rc |= put(o, "cpu", json_sprintf("%" PRIu64 "m", r->cpu_milli));
    rc |= put(o, "memory", j_size(r->memory_bytes));
    rc |= put(o, "disk", done(disk, 0));
    return done(o, rc);
}

static json_t *enc_readiness(const crater_inference_t *inf)
{
    json_t *o = json_object();
    int rc = o ? 0 : -1;

    rc |= put(o, "command", j_strv(inf->ready_cmd));
    if (inf->ready_period_ms)
        rc |= put(o, "period", j_ms(inf->ready_period_ms));
    if (inf->ready_timeout_ms)
        rc |= put(o, "timeout", j_ms(inf->ready_timeout_ms));
    return done(o, rc);
}

static json_t *enc_inference(const crater_inference_t *inf)
{
    json_t *o = json_object();
    int rc = o ? 0 : -1;

    if (inf->port)
        rc |= put(o, "port", json_integer(inf->port));
    rc |= put(o, "minReplicas", json_integer(inf->min_replicas));
    rc |= put(o, "maxReplicas", json_integer(inf->max_replicas));
    rc |= put(o, "targetQPS", json_real(inf->target_qps));
    rc |= put(o, "warmPoolSize", json_integer(inf->warm_pool_size));
    rc |= put(o, "maxBatchSize", json_integer(inf->max_batch_size));
    rc |= put(o, "batchTimeout", j_ms(inf->batch_timeout_ms));
    if (inf->target_concurrency > 0)
        rc |= put(o, "targetConcurrency", json_real(inf->target_concurrency));
    if (inf->stable_window_ms)
        rc |= put(o, "stableWindow", j_ms(inf->stable_window_ms));
    if (inf->panic_window_ms)
        rc |= put(o, "panicWindow", j_ms(inf->panic_window_ms));
    if (inf->scale_down_delay_ms)
        rc |= put(o, "scaleDownDelay", j_ms(inf->scale_down_delay_ms));
    if (inf->zero_grace_ms)
        rc |= put(o, "scaleToZeroGrace", j_ms(inf->zero_grace_ms));
    if (inf->ready_cmd)
        rc |= put(o, "readiness", enc_readiness(inf));
    return done(o, rc);
}

static json_t *enc_checkpoint(const crater_checkpoint_t *c)
{
    json_t *o = json_object();
    int rc = o ? 0 : -1;

    rc |= put_str(o, "dir", c->dir);
    rc |= put(o, "checkpointInterval", j_ms(c->interval_ms));
    rc |= put(o, "incrementalInterval", j_ms(c->incremental_interval_ms));
    return done(o, rc);
}

static json_t *enc_tolerations(const crater_jobspec_t *s)
{
    json_t *a = json_array();
    int rc = a ? 0 : -1;

    for (size_t i = 0; rc == 0 && i < s->ntolerations; i++) {
        const crater_toleration_t *t = &s->tolerations[i];
        json_t *o = json_object();
        int trc = o ? 0 : -1;

        trc |= put_str(o, "key", t->key);
        trc |= put_str(o, "value", t->value);
        if (t->effect >= 0)
            trc |= put(o, "effect", ENAME(effect_names, t->effect));
        rc |= json_array_append_new(a, done(o, trc));
    }
    return done(a, rc);
}

static int enc_identity(json_t *o, const crater_jobspec_t *s)
{
    int rc = 0;

    rc |= put(o, "apiVersion", json_string("crater/v1"));
    rc |= put(o, "kind", json_string("Job"));
    rc |= put_str(o, "name", s->name);
    rc |= put_str(o, "tenant", s->tenant);
    if (s->workload_type_explicit)
        rc |= put(o,
                  "workloadType",
                  json_string(crater_workload_name(s->workload_type)));
    rc |= put(o, "priority", json_integer(s->priority));
    rc |= put_str(o, "priorityClass", s->priority_class);
    rc |= put(o, "preemptible", json_boolean(s->preemptible));
    if (s->no_idle_reclaim)
        rc |= put(o, "idleReclaim", json_false());
    rc |= put(o, "gracePeriod", j_ms(s->grace_period_ms));
    if (s->time_limit_ms)
        rc |= put(o, "timeLimit", j_ms(s->time_limit_ms));
    return rc;
}

static int enc_placement(json_t *o, const crater_jobspec_t *s)
{
    int rc = 0;

    rc |= put(o, "resources", enc_resources(&s->resources));
    rc |= put(o, "cpuLimitMultiplier", json_real(s->cpu_limit_multiplier));
    rc |= put(o, "cpuBurst", json_boolean(s->cpu_burst));
    rc |= put(o, "ioProfile", ENAME(io_names, s->io_profile));
    rc |= put(o, "numa", ENAME(numa_names, s->numa));
    if (s->dataset || s->locality != CRATER_LOCALITY_NONE) {
        json_t *dl = json_object();
        int drc = dl ? 0 : -1;
        drc |= put_str(dl, "dataset", s->dataset);
        drc |= put(dl, "mode", ENAME(locality_names, s->locality));
        rc |= put(o, "dataLocality", done(dl, drc));
    }
    if (s->checkpoint.dir || s->checkpoint.interval_ms
        || s->checkpoint.incremental_interval_ms)
        rc |= put(o, "checkpoint", enc_checkpoint(&s->checkpoint));
    return rc;
}

static int enc_lifecycle(json_t *o, const crater_jobspec_t *s)
{
    int rc = 0;

    if (s->deadline_ms)
        rc |= put(o, "deadline", format_rfc3339(s->deadline_ms));
    rc |= put(o, "deadlinePolicy", ENAME(policy_names, s->deadline_policy));
    if (s->restart_policy != CRATER_RESTART_NEVER) { /* Never: as before */
        rc |= put(o, "restartPolicy", ENAME(restart_names, s->restart_policy));
        rc |= put(o, "backoffLimit", json_integer(s->backoff_limit));
    }
    rc |= put(o, "costCap", json_real(s->cost_cap));
    rc |= put_str(o, "profile", s->profile);
    rc |= put(o, "replicas", json_integer(s->replicas));
    rc |= put(o, "gang", json_boolean(s->gang));
    if (s->after && s->after[0])
        rc |= put(o, "after", j_strv(s->after));
    if (s->narray) {
        char *a =
            crater_array_format(s->array, s->narray, s->array_parallelism);
        rc |= a ? put(o, "array", json_string(a)) : -1;
        free(a);
    }
    if (s->inference.enabled)
        rc |= put(o, "inference", enc_inference(&s->inference));
    return rc;
}

static json_t *enc_volumes(const crater_jobspec_t *s)
{
    json_t *a = json_array();
    int rc = a ? 0 : -1;

    for (size_t i = 0; rc == 0 && i < s->nvolumes; i++) {
        const crater_volume_t *v = &s->volumes[i];
        json_t *o = json_object();
        int vrc = o ? 0 : -1;

        vrc |= put_str(o, "hostPath", v->host_path);
        vrc |= put_str(o, "scratch", v->scratch);
        vrc |= put_str(o, "mountPath", v->mount_path);
        vrc |= put(o, "readOnly", json_boolean(v->read_only));
        rc |= json_array_append_new(a, done(o, vrc));
    }
    return done(a, rc);
}

/* image, and imagePullPolicy and volumes only with one (validation
 * refuses them without). */
static int enc_container(json_t *o, const crater_jobspec_t *s)
{
    int rc = put_str(o, "image", s->image);

    if (s->image || s->image_pull != CRATER_PULL_IF_NOT_PRESENT)
        rc |= put(o, "imagePullPolicy", ENAME(pull_names, s->image_pull));
    if (s->nvolumes)
        rc |= put(o, "volumes", enc_volumes(s));
    return rc;
}

static int enc_process(json_t *o, const crater_jobspec_t *s)
{
    int rc = 0;

    if (s->command)
        rc |= put(o, "command", j_strv(s->command));
    rc |= enc_container(o, s);
    rc |= put(o, "env", j_kv(s->env, s->nenv));
    rc |= put_str(o, "workdir", s->workdir);
    rc |= put(o, "nodeSelector", j_kv(s->selector, s->nselector));
    rc |= put(o, "tolerations", enc_tolerations(s));
    return rc;
}

json_t *crater_jobspec_encode(const crater_jobspec_t *spec)
{
    json_t *o = json_object();

    if (!o)
        return NULL;
    return done(o,
                enc_identity(o, spec) | enc_placement(o, spec)
                    | enc_lifecycle(o, spec) | enc_process(o, spec));
}

json_t *crater_jobspec_encode_yaml(const crater_jobspec_t *spec)
{
    json_t *o = crater_jobspec_encode(spec);
    json_t *res = json_object_get(o, "resources");
    int rc = o ? 0 : -1;

    rc |= put(res,
              "memory",
              json_sprintf("%" PRIu64 "B", spec->resources.memory_bytes));
    rc |= put(json_object_get(res, "gpu"),
              "memory",
              json_sprintf("%" PRIu64 "B", spec->resources.gpu.memory_bytes));
    return done(o, rc);
}
