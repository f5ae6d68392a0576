/* proto.c - encoders and strict decoders of the agent protocol's messages
 * (see crater/proto.h).
 *
 * One encoder and one decoder per message, and nothing else reads or
 * writes these documents: craterd and the agent link the same code, so
 * what one side writes the other decodes by construction, and the fuzzer
 * (fuzz/fuzz_proto.c) checks that whatever decodes encodes to a document
 * that decodes again to the same thing.
 *
 * Decoders are field tables (crater/dec.h). Messages whose shape depends
 * on one field (a work item's "op", an event's "event") read that field
 * first and then decode the whole object against the table of that shape,
 * so a stop order with a "task" or a started event with an "exit_code" is
 * refused like any unknown key. Arrays are allocated once at their final
 * size after the size check, then filled in place. Decoding is rare (an
 * agent sees a handful of orders a second at most), so clarity wins over
 * speed throughout.
 */
#include "crater/proto.h"

#include <stdlib.h>
#include <string.h>

/* ---- names ---------------------------------------------------------- */

static const char *const io_names[] = {
    [CRATER_IO_DEFAULT] = "default",
    [CRATER_IO_TRAINING] = "training",
    [CRATER_IO_INFERENCE] = "inference",
    [CRATER_IO_MODEL_LOADING] = "model-loading",
    [CRATER_IO_NONE] = "none",
};
#define NIO (sizeof(io_names) / sizeof(io_names[0]))

static const char *const iso_names[] = {
    [CRATER_GPU_ISO_SLICE] = "slice",
    [CRATER_GPU_ISO_MPS] = "mps",
    [CRATER_GPU_ISO_MIG] = "mig",
    [CRATER_GPU_ISO_NONE] = "none",
};
#define NISO (sizeof(iso_names) / sizeof(iso_names[0]))
#define NWORKLOAD (CRATER_WORKLOAD_INTERACTIVE + 1)

static const char *const op_names[] = {
    [CRATER_PROTO_START] = "start",
    [CRATER_PROTO_STOP] = "stop",
    [CRATER_PROTO_RESYNC] = "resync",
};
static const char *const event_names[] = {
    [CRATER_PROTO_STARTED] = "started",
    [CRATER_PROTO_EXITED] = "exited",
    [CRATER_PROTO_CHECKPOINT] = "checkpoint",
    [CRATER_PROTO_PROGRESS] = "progress",
    [CRATER_PROTO_READY] = "ready",
};
#define NEVENT (sizeof(event_names) / sizeof(event_names[0]))
static const char *const held_names[] = {"exited", "running"};
static const char *const stream_names[] = {"stdout", "stderr"};

const char *crater_io_profile_name(crater_io_profile_t p)
{
    return (unsigned)p < NIO ? io_names[p] : "?";
}

const char *crater_gpu_isolation_name(crater_gpu_isolation_t m)
{
    return (unsigned)m < NISO ? iso_names[m] : "?";
}

/* ---- decoding helpers ----------------------------------------------- */

#define I64_MAX ((uint64_t)INT64_MAX)

/* A job id: 1-20 decimal digits (the agent names files after it). */
static int dec_job(crater_dec_t *d, json_t *v, char **out)
{
    const char *s = json_string_value(v);
    size_t n = s ? strspn(s, "0123456789") : 0;

    if (!json_is_string(v))
        return crater_dec_str(d, v, 0, out); /* the type error */
    if (n == 0 || n > CRATER_PROTO_JOB_MAX || s[n] != '\0'
        || n != json_string_length(v))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%.32s' is not a job id (1-%d digits)",
                               s,
                               CRATER_PROTO_JOB_MAX);
    return crater_dec_str(d, v, CRATER_PROTO_JOB_MAX, out);
}

static int dec_attempt(crater_dec_t *d, json_t *v, uint32_t *out)
{
    return crater_dec_u32(d, v, 1, UINT32_MAX, out);
}

static int dec_replica(crater_dec_t *d, json_t *v, uint32_t *out)
{
    return crater_dec_u32(d, v, 0, CRATER_JOB_MAX_REPLICAS - 1, out);
}

/* o with "replica": r added when r > 0 (absent means 0); NULL (o freed)
 * when out of memory. */
static json_t *with_replica(json_t *o, uint32_t r)
{
    if (o && r && json_object_set_new(o, "replica", json_integer(r)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int dec_i32(crater_dec_t *d, json_t *v, int32_t lo, int32_t *out)
{
    int64_t x = 0;

    if (crater_dec_int(d, v, lo, INT32_MAX, &x) < 0)
        return -1;
    *out = (int32_t)x;
    return 0;
}

static int dec_time(crater_dec_t *d, json_t *v, int64_t *out)
{
    return crater_dec_int(d, v, 0, INT64_MAX, out);
}

static int dec_u64(crater_dec_t *d, json_t *v, uint64_t *out)
{
    return crater_dec_uint(d, v, 0, I64_MAX, out);
}

/* A workload type by crater_workload_name(), the one table of names. */
static int dec_workload(crater_dec_t *d, json_t *v, crater_workload_t *out)
{
    const char *names[NWORKLOAD];
    int x = 0;

    for (int i = 0; i < (int)NWORKLOAD; i++)
        names[i] = crater_workload_name((crater_workload_t)i);
    if (crater_dec_enum(d, v, names, NWORKLOAD, &x) < 0)
        return -1;
    *out = (crater_workload_t)x;
    return 0;
}

/* calloc room for the n elements of array v (plus extra), when v is an
 * array of at most max entries; crater_dec_array reports the others. *ok
 * is false only when out of memory. */
static void *array_room(json_t *v, size_t max, size_t size, size_t extra)
{
    size_t n =
        json_is_array(v) && json_array_size(v) <= max ? json_array_size(v) : 0;

    return calloc(n + extra ? n + extra : 1, size);
}

/* The value of key in v, decoded as one of names, before the rest of v:
 * it says which table the whole object is decoded with. */
static int peek_enum(crater_dec_t *d,
                     json_t *v,
                     const char *key,
                     const char *const *names,
                     size_t n,
                     int *out)
{
    json_t *k = json_object_get(v, key);
    size_t mark;

    if (!json_is_object(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a mapping, got %s",
                               crater_dec_typename(v));
    if (!k)
        return crater_dec_fail(d,
                               CRATER_EMISSING,
                               "missing required field '%s'",
                               key);
    mark = crater_dec_push_key(d, key);
    if (crater_dec_enum(d, k, names, n, out) < 0)
        return -1;
    crater_dec_pop(d, mark);
    return 0;
}

/* The already-peeked discriminator: accept it as it is. */
static int f_peeked(crater_dec_t *d, json_t *v, void *obj)
{
    (void)d;
    (void)v;
    (void)obj;
    return 0;
}

/* {"stdout": N, "stderr": N} into uint64_t[2] */
static int f_logs_stdout(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &((uint64_t *)obj)[0]);
}

static int f_logs_stderr(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &((uint64_t *)obj)[1]);
}

static const crater_dec_field_t logs_fields[] = {
    {"stdout", f_logs_stdout, CRATER_FIELD_REQUIRED},
    {"stderr", f_logs_stderr, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

static int dec_logs(crater_dec_t *d, json_t *v, bool *has, uint64_t *logs)
{
    *has = true;
    return crater_dec_object(d, v, logs_fields, logs);
}

static json_t *logs_encode(const uint64_t *logs)
{
    return json_pack("{s:I, s:I}",
                     stream_names[0],
                     (json_int_t)logs[0],
                     stream_names[1],
                     (json_int_t)logs[1]);
}

/* ---- placement ------------------------------------------------------ */

#define GPU(obj) ((crater_proto_gpu_t *)(obj))
#define PL(obj) ((crater_proto_placement_t *)(obj))

static int f_gpu_index(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_u32(d,
                          v,
                          0,
                          CRATER_MAX_GPUS_PER_NODE - 1,
                          &GPU(obj)->index);
}

static int f_gpu_uuid(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_str(d, v, 128, &GPU(obj)->uuid);
}

static int f_gpu_model(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_str(d, v, 256, &GPU(obj)->model);
}

static int f_gpu_memory(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &GPU(obj)->memory_bytes);
}

static const crater_dec_field_t gpu_fields[] = {
    {"index", f_gpu_index, CRATER_FIELD_REQUIRED},
    {"uuid", f_gpu_uuid, CRATER_FIELD_REQUIRED},
    {"model", f_gpu_model, 0},
    {"memory_bytes", f_gpu_memory, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

static int e_gpu(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    crater_proto_placement_t *p = obj;

    p->ngpus = (uint32_t)i + 1;
    return crater_dec_object(d, v, gpu_fields, &p->gpus[i]);
}

static int f_pl_node(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_str(d, v, 253, &PL(obj)->node);
}

static int f_pl_gpus(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_array(d, v, CRATER_MAX_GPUS_PER_NODE, e_gpu, obj);
}

static int f_pl_whole(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_bool(d, v, &PL(obj)->whole_gpus);
}

static int f_pl_numa(crater_dec_t *d, json_t *v, void *obj)
{
    int64_t x = 0;

    if (crater_dec_int(d, v, -1, 1023, &x) < 0)
        return -1;
    PL(obj)->numa = (int32_t)x;
    return 0;
}

static int f_pl_cpu(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &PL(obj)->cpu_millis);
}

static int f_pl_mem(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &PL(obj)->memory_bytes);
}

static int f_pl_disk(crater_dec_t *d, json_t *v, void *obj)
{
    char **out = &PL(obj)->disk;

    if (crater_dec_str(d, v, 64, out) < 0)
        return -1;
    if (**out == '\0' || strchr(*out, '/') || strcmp(*out, "..") == 0)
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%s' is not a block device name",
                               *out);
    return 0;
}

static const crater_dec_field_t placement_fields[] = {
    {"node", f_pl_node, CRATER_FIELD_REQUIRED},
    {"gpus", f_pl_gpus, CRATER_FIELD_REQUIRED},
    {"whole_gpus", f_pl_whole, CRATER_FIELD_REQUIRED},
    {"numa", f_pl_numa, CRATER_FIELD_REQUIRED},
    {"cpu_millis", f_pl_cpu, CRATER_FIELD_REQUIRED},
    {"memory_bytes", f_pl_mem, CRATER_FIELD_REQUIRED},
    {"disk", f_pl_disk, 0},
    {NULL, NULL, 0},
};

static void placement_clear(crater_proto_placement_t *p)
{
    free(p->node);
    free(p->disk);
    for (uint32_t i = 0; i < CRATER_MAX_GPUS_PER_NODE; i++) {
        free(p->gpus[i].uuid);
        free(p->gpus[i].model);
    }
    memset(p, 0, sizeof(*p));
}

static json_t *placement_encode(const crater_proto_placement_t *p)
{
    json_t *gpus = json_array(), *o;

    for (uint32_t i = 0; gpus && i < p->ngpus; i++) {
        const crater_proto_gpu_t *g = &p->gpus[i];
        if (json_array_append_new(gpus,
                                  json_pack("{s:i, s:s, s:s*, s:I}",
                                            "index",
                                            (int)g->index,
                                            "uuid",
                                            g->uuid ? g->uuid : "",
                                            "model",
                                            g->model,
                                            "memory_bytes",
                                            (json_int_t)g->memory_bytes))
            < 0) {
            json_decref(gpus);
            return NULL;
        }
    }
    o = json_pack("{s:s, s:o, s:b, s:i, s:I, s:I, s:s*}",
                  "node",
                  p->node ? p->node : "",
                  "gpus",
                  gpus,
                  "whole_gpus",
                  p->whole_gpus,
                  "numa",
                  (int)p->numa,
                  "cpu_millis",
                  (json_int_t)p->cpu_millis,
                  "memory_bytes",
                  (json_int_t)p->memory_bytes,
                  "disk",
                  p->disk);
    return o;
}

/* ---- limits --------------------------------------------------------- */

#define LIM(obj) ((crater_proto_limits_t *)(obj))

static int f_lim_cpu(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &LIM(obj)->cpu_millis);
}

static int f_lim_mem(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &LIM(obj)->memory_bytes);
}

static int f_lim_mult(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_double(d, v, 0, 1000, &LIM(obj)->cpu_limit_multiplier);
}

static int f_lim_burst(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_bool(d, v, &LIM(obj)->cpu_burst);
}

static int f_lim_io(crater_dec_t *d, json_t *v, void *obj)
{
    int x = 0;

    if (crater_dec_enum(d, v, io_names, NIO, &x) < 0)
        return -1;
    LIM(obj)->io_profile = (crater_io_profile_t)x;
    return 0;
}

static int f_lim_workload(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_workload(d, v, &LIM(obj)->workload_type);
}

static int f_lim_iso(crater_dec_t *d, json_t *v, void *obj)
{
    int x = 0;

    if (crater_dec_enum(d, v, iso_names, NISO, &x) < 0)
        return -1;
    LIM(obj)->gpu_isolation = (crater_gpu_isolation_t)x;
    return 0;
}

static const crater_dec_field_t limits_fields[] = {
    {"cpu_millis", f_lim_cpu, CRATER_FIELD_REQUIRED},
    {"memory_bytes", f_lim_mem, CRATER_FIELD_REQUIRED},
    {"cpuLimitMultiplier", f_lim_mult, CRATER_FIELD_REQUIRED},
    {"cpuBurst", f_lim_burst, CRATER_FIELD_REQUIRED},
    {"ioProfile", f_lim_io, CRATER_FIELD_REQUIRED},
    {"workloadType", f_lim_workload, CRATER_FIELD_REQUIRED},
    {"gpuIsolation", f_lim_iso, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

static json_t *limits_encode(const crater_proto_limits_t *l)
{
    return json_pack("{s:I, s:I, s:f, s:b, s:s, s:s, s:s}",
                     "cpu_millis",
                     (json_int_t)l->cpu_millis,
                     "memory_bytes",
                     (json_int_t)l->memory_bytes,
                     "cpuLimitMultiplier",
                     l->cpu_limit_multiplier,
                     "cpuBurst",
                     l->cpu_burst,
                     "ioProfile",
                     crater_io_profile_name(l->io_profile),
                     "workloadType",
                     crater_workload_name(l->workload_type),
                     "gpuIsolation",
                     crater_gpu_isolation_name(l->gpu_isolation));
}

/* ---- task order ----------------------------------------------------- */

#define TASK(obj) ((crater_proto_task_t *)(obj))

static int f_task_job(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_job(d, v, &TASK(obj)->job);
}

static int f_task_replica(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_replica(d, v, &TASK(obj)->replica);
}

static int f_task_attempt(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_attempt(d, v, &TASK(obj)->attempt);
}

/* An argv (a task's command, a readiness command): NULL-terminated into
 * *argv, its length in *n; not empty. */
struct argv_dst {
    char **v;
    size_t *n;
};

static int e_arg(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    struct argv_dst *a = obj;

    *a->n = i + 1;
    return crater_dec_str(d, v, CRATER_PROTO_MAX_STR, &a->v[i]);
}

static int dec_argv(crater_dec_t *d, json_t *v, char ***argv, size_t *n)
{
    struct argv_dst a = {NULL, n};

    if (!(a.v = *argv = array_room(v, CRATER_JOB_MAX_ARGS, sizeof(char *), 1)))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    if (crater_dec_array(d, v, CRATER_JOB_MAX_ARGS, e_arg, &a) < 0)
        return -1;
    if (*n == 0)
        return crater_dec_fail(d, CRATER_EINVAL, "the command is empty");
    return 0;
}

static json_t *argv_encode(char *const *argv, size_t n)
{
    json_t *a = json_array();

    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_string(argv[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static int f_task_argv(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_argv(d, v, &TASK(obj)->argv, &TASK(obj)->nargv);
}

/* A variable name: not empty, no '=' (the agent writes KEY=VALUE). */
static int dec_env_entry(crater_dec_t *d,
                         const char *key,
                         json_t *val,
                         crater_proto_env_t *e)
{
    if (!*key || strchr(key, '='))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%.32s' is not a variable name",
                               key);
    if (crater_dec_str(d, val, CRATER_PROTO_MAX_STR, &e->value) < 0)
        return -1;
    if (!(e->key = strdup(key)))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    return 0;
}

static int f_task_env(crater_dec_t *d, json_t *v, void *obj)
{
    crater_proto_task_t *t = obj;
    const char *key;
    json_t *val;

    if (!json_is_object(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a mapping, got %s",
                               crater_dec_typename(v));
    if (json_object_size(v) > CRATER_PROTO_MAX_ENV)
        return crater_dec_fail(d,
                               CRATER_ELIMIT,
                               "%zu variables, at most %d allowed",
                               json_object_size(v),
                               CRATER_PROTO_MAX_ENV);
    if (!(t->env = calloc(json_object_size(v) + 1, sizeof(*t->env))))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    json_object_foreach(v, key, val)
    {
        size_t mark = crater_dec_push_key(d, key);
        if (dec_env_entry(d, key, val, &t->env[t->nenv++]) < 0)
            return -1;
        crater_dec_pop(d, mark);
    }
    return 0;
}

static int f_task_dir(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_str(d, v, CRATER_PROTO_MAX_STR, &TASK(obj)->working_dir);
}

/* A task user or group: never root (0), never (uid_t)-1. */
static int f_task_uid(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_u32(d, v, 1, UINT32_MAX - 1, &TASK(obj)->uid);
}

static int f_task_gid(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_u32(d, v, 1, UINT32_MAX - 1, &TASK(obj)->gid);
}

static int f_task_placement(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_object(d, v, placement_fields, &TASK(obj)->placement);
}

static int f_task_limits(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_object(d, v, limits_fields, &TASK(obj)->limits);
}

static int f_task_grace(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &TASK(obj)->grace_period_ms);
}

static int f_task_time_limit(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &TASK(obj)->time_limit_ms);
}

static int f_task_ckpt_dir(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_str(d,
                          v,
                          CRATER_PROTO_MAX_STR,
                          &TASK(obj)->checkpoint_dir);
}

/* ---- container: the image, its pull policy and volumes ---- */

/* What a volume entry's fields decode into, and the task it lands in. */
struct volctx {
    crater_proto_task_t *t;
    crater_volume_t *vol;
};

static int f_ctr_image(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_str(d,
                          v,
                          CRATER_PROTO_MAX_STR,
                          &((struct volctx *)obj)->t->image);
}

static int f_ctr_pull(crater_dec_t *d, json_t *v, void *obj)
{
    crater_proto_task_t *t = ((struct volctx *)obj)->t;
    const char *s = json_string_value(v);

    for (int p = CRATER_PULL_IF_NOT_PRESENT; s && p <= CRATER_PULL_NEVER; p++)
        if (strcmp(s, crater_pull_policy_name(p)) == 0) {
            t->image_pull = p;
            return 0;
        }
    return crater_dec_fail(d,
                           CRATER_EINVAL,
                           "expected IfNotPresent, Always or Never");
}

/* An absolute path: a mount's source or target. */
static int dec_abs(crater_dec_t *d, json_t *v, char **out)
{
    if (crater_dec_str(d, v, CRATER_PROTO_MAX_STR, out) < 0)
        return -1;
    if (**out != '/' || strchr(*out, ','))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%.40s' is not an absolute path without ','",
                               *out);
    return 0;
}

static int f_vol_host(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_abs(d, v, &((struct volctx *)obj)->vol->host_path);
}

static int f_vol_scratch(crater_dec_t *d, json_t *v, void *obj)
{
    char **out = &((struct volctx *)obj)->vol->scratch;

    if (crater_dec_str(d, v, 64, out) < 0)
        return -1;
    if (!**out
        || strspn(*out, "abcdefghijklmnopqrstuvwxyz0123456789-_.")
               != strlen(*out)
        || **out == '.')
        return crater_dec_fail(d, CRATER_EINVAL, "'%s' is not a name", *out);
    return 0;
}

static int f_vol_mount(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_abs(d, v, &((struct volctx *)obj)->vol->mount_path);
}

static int f_vol_ro(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_bool(d, v, &((struct volctx *)obj)->vol->read_only);
}

static const crater_dec_field_t vol_fields[] = {
    {"hostPath", f_vol_host, 0},
    {"scratch", f_vol_scratch, 0},
    {"mountPath", f_vol_mount, CRATER_FIELD_REQUIRED},
    {"readOnly", f_vol_ro, 0},
    {NULL, NULL, 0},
};

static int vol_elem(crater_dec_t *d, json_t *el, void *obj, size_t i)
{
    struct volctx *c = obj;

    c->vol = &c->t->volumes[i];
    c->t->nvolumes = i + 1;
    if (crater_dec_object(d, el, vol_fields, obj) < 0)
        return -1;
    if (!c->vol->host_path != !c->vol->scratch)
        return 0;
    return crater_dec_fail(d,
                           CRATER_EINVAL,
                           "needs exactly one of hostPath and scratch");
}

static int f_ctr_volumes(crater_dec_t *d, json_t *v, void *obj)
{
    crater_proto_task_t *t = ((struct volctx *)obj)->t;
    size_t n = json_array_size(v);

    if (json_is_array(v) && n > 0 && n <= CRATER_JOB_MAX_LIST
        && !(t->volumes = calloc(n, sizeof(*t->volumes))))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    return crater_dec_array(d, v, CRATER_JOB_MAX_LIST, vol_elem, obj);
}

static const crater_dec_field_t container_fields[] = {
    {"image", f_ctr_image, CRATER_FIELD_REQUIRED},
    {"pull", f_ctr_pull, 0},
    {"volumes", f_ctr_volumes, 0},
    {NULL, NULL, 0},
};

static int f_task_container(crater_dec_t *d, json_t *v, void *obj)
{
    struct volctx c = {.t = TASK(obj)};

    return crater_dec_object(d, v, container_fields, &c);
}

static json_t *volumes_encode(const crater_proto_task_t *t)
{
    json_t *a = json_array();

    for (size_t i = 0; a && i < t->nvolumes; i++) {
        const crater_volume_t *v = &t->volumes[i];
        json_t *o = json_pack("{s:s*, s:s*, s:s, s:b}",
                              "hostPath",
                              v->host_path,
                              "scratch",
                              v->scratch,
                              "mountPath",
                              v->mount_path ? v->mount_path : "",
                              "readOnly",
                              v->read_only);
        if (!o || json_array_append_new(a, o) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *container_encode(const crater_proto_task_t *t)
{
    return json_pack("{s:s, s:s, s:o}",
                     "image",
                     t->image,
                     "pull",
                     crater_pull_policy_name(t->image_pull),
                     "volumes",
                     volumes_encode(t));
}

/* ---- readiness: a service replica's command ---- */

#define READY_MAX_MS 3600000u /* 1 h, as the job spec allows */

static int f_ready_cmd(crater_dec_t *d, json_t *v, void *obj)
{
    crater_proto_readiness_t *r = obj;

    return dec_argv(d, v, &r->argv, &r->nargv);
}

static int dec_ready_ms(crater_dec_t *d, json_t *v, uint64_t *out)
{
    if (dec_u64(d, v, out) < 0)
        return -1;
    if (*out < 1 || *out > READY_MAX_MS)
        return crater_dec_fail(d, CRATER_ERANGE, "must be 1 ms to 1 h");
    return 0;
}

static int f_ready_period(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_ready_ms(d, v, &((crater_proto_readiness_t *)obj)->period_ms);
}

static int f_ready_timeout(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_ready_ms(d, v, &((crater_proto_readiness_t *)obj)->timeout_ms);
}

static const crater_dec_field_t readiness_fields[] = {
    {"command", f_ready_cmd, CRATER_FIELD_REQUIRED},
    {"period_ms", f_ready_period, CRATER_FIELD_REQUIRED},
    {"timeout_ms", f_ready_timeout, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

static int f_task_readiness(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_object(d, v, readiness_fields, &TASK(obj)->readiness);
}

static json_t *readiness_encode(const crater_proto_readiness_t *r)
{
    return json_pack("{s:o, s:I, s:I}",
                     "command",
                     argv_encode(r->argv, r->nargv),
                     "period_ms",
                     (json_int_t)r->period_ms,
                     "timeout_ms",
                     (json_int_t)r->timeout_ms);
}

static int f_task_logs(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_logs(d, v, &TASK(obj)->has_logs, TASK(obj)->logs);
}

static const crater_dec_field_t task_fields[] = {
    {"job", f_task_job, CRATER_FIELD_REQUIRED},
    {"attempt", f_task_attempt, CRATER_FIELD_REQUIRED},
    {"replica", f_task_replica, 0},
    {"argv", f_task_argv, CRATER_FIELD_REQUIRED},
    {"env", f_task_env, CRATER_FIELD_REQUIRED},
    {"workingDir", f_task_dir, 0},
    {"uid", f_task_uid, 0},
    {"gid", f_task_gid, 0},
    {"placement", f_task_placement, CRATER_FIELD_REQUIRED},
    {"limits", f_task_limits, CRATER_FIELD_REQUIRED},
    {"gracePeriod_ms", f_task_grace, CRATER_FIELD_REQUIRED},
    {"timeLimit_ms", f_task_time_limit, 0},
    {"checkpointDir", f_task_ckpt_dir, 0},
    {"logs", f_task_logs, 0},
    {"container", f_task_container, 0},
    {"readiness", f_task_readiness, 0},
    {NULL, NULL, 0},
};

/* uid and gid come together or not at all. */
static int task_user_check(crater_dec_t *d, const crater_proto_task_t *t)
{
    if (!t->uid == !t->gid)
        return 0;
    crater_dec_push_key(d, t->uid ? "gid" : "uid");
    return crater_dec_fail(d,
                           CRATER_EINVAL,
                           "uid and gid come together (uid %u, gid %u)",
                           t->uid,
                           t->gid);
}

int crater_proto_task_decode(crater_dec_t *d,
                             json_t *v,
                             crater_proto_task_t *out)
{
    memset(out, 0, sizeof(*out));
    out->placement.numa = -1;
    if (crater_dec_object(d, v, task_fields, out) == 0
        && task_user_check(d, out) == 0)
        return 0;
    crater_proto_task_clear(out);
    return -1;
}

void crater_proto_task_clear(crater_proto_task_t *t)
{
    if (!t)
        return;
    free(t->job);
    crater_strv_free(t->argv);
    for (size_t i = 0; t->env && i < t->nenv; i++) {
        free(t->env[i].key);
        free(t->env[i].value);
    }
    free(t->env);
    free(t->working_dir);
    free(t->checkpoint_dir);
    free(t->image);
    crater_volumes_free(t->volumes, t->nvolumes);
    crater_strv_free(t->readiness.argv);
    placement_clear(&t->placement);
    memset(t, 0, sizeof(*t));
}

static json_t *env_encode(const crater_proto_task_t *t)
{
    json_t *env = json_object();

    for (size_t i = 0; env && i < t->nenv; i++)
        if (json_object_set_new(env,
                                t->env[i].key,
                                json_string(t->env[i].value))
            < 0) {
            json_decref(env);
            return NULL;
        }
    return env;
}

json_t *crater_proto_task_encode(const crater_proto_task_t *t)
{
    json_t *argv = argv_encode(t->argv, t->nargv), *o;

    o = json_pack("{s:s, s:I, s:o, s:o, s:s*, s:o, s:o, s:I}",
                  "job",
                  t->job ? t->job : "",
                  "attempt",
                  (json_int_t)t->attempt,
                  "argv",
                  argv,
                  "env",
                  env_encode(t),
                  "workingDir",
                  t->working_dir,
                  "placement",
                  placement_encode(&t->placement),
                  "limits",
                  limits_encode(&t->limits),
                  "gracePeriod_ms",
                  (json_int_t)t->grace_period_ms);
    if (o && t->time_limit_ms
        && json_object_set_new(o,
                               "timeLimit_ms",
                               json_integer((json_int_t)t->time_limit_ms))
               < 0) {
        json_decref(o);
        return NULL;
    }
    if (o && t->has_logs
        && json_object_set_new(o, "logs", logs_encode(t->logs)) < 0) {
        json_decref(o);
        return NULL;
    }
    if (o && t->checkpoint_dir
        && json_object_set_new(o,
                               "checkpointDir",
                               json_string(t->checkpoint_dir))
               < 0) {
        json_decref(o);
        return NULL;
    }
    if (o && t->readiness.argv
        && json_object_set_new(o, "readiness", readiness_encode(&t->readiness))
               < 0) {
        json_decref(o);
        return NULL;
    }
    if (o && t->image
        && json_object_set_new(o, "container", container_encode(t)) < 0) {
        json_decref(o);
        return NULL;
    }
    if (o && t->uid
        && (json_object_set_new(o, "uid", json_integer(t->uid)) < 0
            || json_object_set_new(o, "gid", json_integer(t->gid)) < 0)) {
        json_decref(o);
        return NULL;
    }
    return with_replica(o, t->replica);
}

int crater_proto_task_setenv(crater_proto_task_t *t,
                             const char *key,
                             const char *value)
{
    crater_proto_env_t *e;
    char *k, *v;

    for (size_t i = 0; i < t->nenv; i++)
        if (strcmp(t->env[i].key, key) == 0) {
            if (!(v = strdup(value)))
                return -1;
            free(t->env[i].value);
            t->env[i].value = v;
            return 0;
        }
    e = realloc(t->env, (t->nenv + 1) * sizeof(*e));
    if (!e)
        return -1;
    t->env = e;
    k = strdup(key);
    v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return -1;
    }
    t->env[t->nenv].key = k;
    t->env[t->nenv++].value = v;
    return 0;
}

const char *crater_proto_task_getenv(const crater_proto_task_t *t,
                                     const char *key)
{
    for (size_t i = 0; i < t->nenv; i++)
        if (strcmp(t->env[i].key, key) == 0)
            return t->env[i].value;
    return NULL;
}

/* ---- work items ----------------------------------------------------- */

#define ITEM(obj) ((crater_proto_item_t *)(obj))

static int f_item_seq(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &ITEM(obj)->seq);
}

static int f_item_task(crater_dec_t *d, json_t *v, void *obj)
{
    if (crater_dec_object(d, v, task_fields, &ITEM(obj)->task) < 0)
        return -1;
    return task_user_check(d, &ITEM(obj)->task);
}

static int f_stop_job(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_job(d, v, &ITEM(obj)->stop.job);
}

static int f_stop_replica(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_replica(d, v, &ITEM(obj)->stop.replica);
}

static int f_stop_attempt(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_attempt(d, v, &ITEM(obj)->stop.attempt);
}

static int f_stop_grace(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &ITEM(obj)->stop.grace_period_ms);
}

static int f_stop_reason(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_str(d, v, 1024, &ITEM(obj)->stop.reason);
}

static int f_stop_notice(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_proto_notice_decode(d, v, &ITEM(obj)->stop.notice);
}

static const crater_dec_field_t start_fields[] = {
    {"seq", f_item_seq, CRATER_FIELD_REQUIRED},
    {"op", f_peeked, CRATER_FIELD_REQUIRED},
    {"task", f_item_task, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

static const crater_dec_field_t stop_fields[] = {
    {"seq", f_item_seq, CRATER_FIELD_REQUIRED},
    {"op", f_peeked, CRATER_FIELD_REQUIRED},
    {"job", f_stop_job, CRATER_FIELD_REQUIRED},
    {"attempt", f_stop_attempt, CRATER_FIELD_REQUIRED},
    {"replica", f_stop_replica, 0},
    {"gracePeriod_ms", f_stop_grace, CRATER_FIELD_REQUIRED},
    {"reason", f_stop_reason, 0},
    {"notice", f_stop_notice, 0},
    {NULL, NULL, 0},
};

static const crater_dec_field_t resync_fields[] = {
    {"seq", f_item_seq, CRATER_FIELD_REQUIRED},
    {"op", f_peeked, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

int crater_proto_item_decode(crater_dec_t *d,
                             json_t *v,
                             crater_proto_item_t *out)
{
    static const crater_dec_field_t *const tables[] = {
        [CRATER_PROTO_START] = start_fields,
        [CRATER_PROTO_STOP] = stop_fields,
        [CRATER_PROTO_RESYNC] = resync_fields,
    };
    int op = 0;

    memset(out, 0, sizeof(*out));
    out->task.placement.numa = -1;
    if (peek_enum(d, v, "op", op_names, 3, &op) < 0)
        return -1;
    out->op = (crater_proto_op_t)op;
    if (crater_dec_object(d, v, tables[op], out) == 0)
        return 0;
    crater_proto_item_clear(out);
    return -1;
}

void crater_proto_item_clear(crater_proto_item_t *it)
{
    if (!it)
        return;
    crater_proto_task_clear(&it->task);
    free(it->stop.job);
    free(it->stop.reason);
    memset(it, 0, sizeof(*it));
}

/* A stop order with its replica and, when there is one, its notice. */
static json_t *with_notice(json_t *o, uint32_t r, crater_proto_notice_t n)
{
    o = with_replica(o, r);
    if (o && n != CRATER_NOTICE_NONE
        && json_object_set_new(o,
                               "notice",
                               json_string(crater_proto_notice_name(n)))
               < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *crater_proto_item_encode(const crater_proto_item_t *it)
{
    const crater_proto_stop_t *s = &it->stop;

    switch (it->op) {
    case CRATER_PROTO_START:
        return json_pack("{s:I, s:s, s:o}",
                         "seq",
                         (json_int_t)it->seq,
                         "op",
                         "start",
                         "task",
                         crater_proto_task_encode(&it->task));
    case CRATER_PROTO_STOP:
        return with_notice(json_pack("{s:I, s:s, s:s, s:I, s:I, s:s*}",
                                     "seq",
                                     (json_int_t)it->seq,
                                     "op",
                                     "stop",
                                     "job",
                                     s->job ? s->job : "",
                                     "attempt",
                                     (json_int_t)s->attempt,
                                     "gracePeriod_ms",
                                     (json_int_t)s->grace_period_ms,
                                     "reason",
                                     s->reason),
                           s->replica,
                           s->notice);
    case CRATER_PROTO_RESYNC:
        break;
    }
    return json_pack("{s:I, s:s}", "seq", (json_int_t)it->seq, "op", "resync");
}

#define WORK(obj) ((crater_proto_work_t *)(obj))

static int f_work_seq(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &WORK(obj)->seq);
}

static int e_item(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    crater_proto_work_t *w = obj;

    if (crater_proto_item_decode(d, v, &w->items[i]) < 0)
        return -1;
    w->nitems = i + 1;
    return 0;
}

static int f_work_items(crater_dec_t *d, json_t *v, void *obj)
{
    crater_proto_work_t *w = obj;

    if (!(w->items =
              array_room(v, CRATER_PROTO_MAX_ITEMS, sizeof(*w->items), 0)))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    return crater_dec_array(d, v, CRATER_PROTO_MAX_ITEMS, e_item, w);
}

static const crater_dec_field_t work_fields[] = {
    {"seq", f_work_seq, CRATER_FIELD_REQUIRED},
    {"items", f_work_items, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

json_t *crater_proto_work_encode(uint64_t seq, json_t *items)
{
    return json_pack("{s:I, s:O}", "seq", (json_int_t)seq, "items", items);
}

int crater_proto_work_decode(crater_dec_t *d,
                             json_t *v,
                             crater_proto_work_t *out)
{
    memset(out, 0, sizeof(*out));
    if (crater_dec_object(d, v, work_fields, out) == 0)
        return 0;
    crater_proto_work_clear(out);
    return -1;
}

void crater_proto_work_clear(crater_proto_work_t *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->nitems; i++)
        crater_proto_item_clear(&w->items[i]);
    free(w->items);
    memset(w, 0, sizeof(*w));
}

/* ---- task events ---------------------------------------------------- */

#define EV(obj) ((crater_proto_event_t *)(obj))

static int f_ev_job(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_job(d, v, &EV(obj)->job);
}

static int f_ev_replica(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_replica(d, v, &EV(obj)->replica);
}

static int f_ev_attempt(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_attempt(d, v, &EV(obj)->attempt);
}

static int f_ev_time(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_time(d, v, &EV(obj)->time_ms);
}

static int f_ev_pid(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_i32(d, v, 0, &EV(obj)->pid);
}

static int f_ev_code(crater_dec_t *d, json_t *v, void *obj)
{
    int64_t x = 0;

    if (crater_dec_int(d, v, 0, 255, &x) < 0)
        return -1;
    EV(obj)->exit_code = (int32_t)x;
    return 0;
}

static int f_ev_signal(crater_dec_t *d, json_t *v, void *obj)
{
    int64_t x = 0;

    if (crater_dec_int(d, v, 0, 255, &x) < 0)
        return -1;
    EV(obj)->signal = (int32_t)x;
    return 0;
}

static int f_ev_oom(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_bool(d, v, &EV(obj)->oom);
}

static int f_ev_error(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_str(d, v, 1024, &EV(obj)->error);
}

static int f_ev_logs(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_logs(d, v, &EV(obj)->has_logs, EV(obj)->logs);
}

static const crater_dec_field_t started_fields[] = {
    {"job", f_ev_job, CRATER_FIELD_REQUIRED},
    {"attempt", f_ev_attempt, CRATER_FIELD_REQUIRED},
    {"replica", f_ev_replica, 0},
    {"event", f_peeked, CRATER_FIELD_REQUIRED},
    {"time_ms", f_ev_time, 0},
    {"pid", f_ev_pid, 0},
    {NULL, NULL, 0},
};

static const crater_dec_field_t exited_fields[] = {
    {"job", f_ev_job, CRATER_FIELD_REQUIRED},
    {"attempt", f_ev_attempt, CRATER_FIELD_REQUIRED},
    {"replica", f_ev_replica, 0},
    {"event", f_peeked, CRATER_FIELD_REQUIRED},
    {"time_ms", f_ev_time, 0},
    {"exit_code", f_ev_code, 0},
    {"signal", f_ev_signal, 0},
    {"oom", f_ev_oom, 0},
    {"error", f_ev_error, 0},
    {"logs", f_ev_logs, 0},
    {NULL, NULL, 0},
};

static int f_ev_ckpt(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_proto_ckpt_decode(d, v, &EV(obj)->ckpt);
}

static int f_ev_step(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &EV(obj)->ckpt.step);
}

static const crater_dec_field_t ckpt_fields[] = {
    {"job", f_ev_job, CRATER_FIELD_REQUIRED},
    {"attempt", f_ev_attempt, CRATER_FIELD_REQUIRED},
    {"replica", f_ev_replica, 0},
    {"event", f_peeked, CRATER_FIELD_REQUIRED},
    {"time_ms", f_ev_time, 0},
    {"checkpoint", f_ev_ckpt, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

static const crater_dec_field_t progress_fields[] = {
    {"job", f_ev_job, CRATER_FIELD_REQUIRED},
    {"attempt", f_ev_attempt, CRATER_FIELD_REQUIRED},
    {"replica", f_ev_replica, 0},
    {"event", f_peeked, CRATER_FIELD_REQUIRED},
    {"time_ms", f_ev_time, 0},
    {"step", f_ev_step, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

static int f_ev_ready(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_bool(d, v, &EV(obj)->ready);
}

static const crater_dec_field_t ready_fields[] = {
    {"job", f_ev_job, CRATER_FIELD_REQUIRED},
    {"attempt", f_ev_attempt, CRATER_FIELD_REQUIRED},
    {"replica", f_ev_replica, 0},
    {"event", f_peeked, CRATER_FIELD_REQUIRED},
    {"time_ms", f_ev_time, 0},
    {"ready", f_ev_ready, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

int crater_proto_event_decode(crater_dec_t *d,
                              json_t *v,
                              crater_proto_event_t *out)
{
    static const crater_dec_field_t *const tables[] = {
        [CRATER_PROTO_STARTED] = started_fields,
        [CRATER_PROTO_EXITED] = exited_fields,
        [CRATER_PROTO_CHECKPOINT] = ckpt_fields,
        [CRATER_PROTO_PROGRESS] = progress_fields,
        [CRATER_PROTO_READY] = ready_fields,
    };
    int ev = 0;

    memset(out, 0, sizeof(*out));
    if (peek_enum(d, v, "event", event_names, NEVENT, &ev) < 0)
        return -1;
    out->event = (crater_proto_event_kind_t)ev;
    if (crater_dec_object(d, v, tables[ev], out) == 0)
        return 0;
    crater_proto_event_clear(out);
    return -1;
}

void crater_proto_event_clear(crater_proto_event_t *e)
{
    if (!e)
        return;
    free(e->job);
    free(e->error);
    crater_proto_ckpt_clear(&e->ckpt);
    memset(e, 0, sizeof(*e));
}

/* A checkpoint or progress event. */
static json_t *report_encode(const crater_proto_event_t *e)
{
    bool ck = e->event == CRATER_PROTO_CHECKPOINT;

    return with_replica(json_pack("{s:s, s:I, s:s, s:I, s:o}",
                                  "job",
                                  e->job ? e->job : "",
                                  "attempt",
                                  (json_int_t)e->attempt,
                                  "event",
                                  event_names[e->event],
                                  "time_ms",
                                  (json_int_t)e->time_ms,
                                  ck ? "checkpoint" : "step",
                                  ck ? crater_proto_ckpt_encode(&e->ckpt)
                                     : json_integer((json_int_t)e->ckpt.step)),
                        e->replica);
}

json_t *crater_proto_event_encode(const crater_proto_event_t *e)
{
    const char *job = e->job ? e->job : "";
    json_t *o;

    if (e->event == CRATER_PROTO_CHECKPOINT
        || e->event == CRATER_PROTO_PROGRESS)
        return report_encode(e);
    if (e->event == CRATER_PROTO_READY)
        return with_replica(json_pack("{s:s, s:I, s:s, s:I, s:b}",
                                      "job",
                                      job,
                                      "attempt",
                                      (json_int_t)e->attempt,
                                      "event",
                                      "ready",
                                      "time_ms",
                                      (json_int_t)e->time_ms,
                                      "ready",
                                      e->ready),
                            e->replica);
    if (e->event == CRATER_PROTO_STARTED)
        return with_replica(json_pack("{s:s, s:I, s:s, s:i, s:I}",
                                      "job",
                                      job,
                                      "attempt",
                                      (json_int_t)e->attempt,
                                      "event",
                                      "started",
                                      "pid",
                                      (int)e->pid,
                                      "time_ms",
                                      (json_int_t)e->time_ms),
                            e->replica);
    o = with_replica(json_pack("{s:s, s:I, s:s, s:I, s:i, s:i, s:b, s:s*}",
                               "job",
                               job,
                               "attempt",
                               (json_int_t)e->attempt,
                               "event",
                               "exited",
                               "time_ms",
                               (json_int_t)e->time_ms,
                               "exit_code",
                               (int)e->exit_code,
                               "signal",
                               (int)e->signal,
                               "oom",
                               e->oom,
                               "error",
                               e->error),
                     e->replica);
    if (o && e->has_logs
        && json_object_set_new(o, "logs", logs_encode(e->logs)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int e_event(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    crater_proto_events_t *e = obj;

    if (crater_proto_event_decode(d, v, &e->events[i]) < 0)
        return -1;
    e->nevents = i + 1;
    return 0;
}

static int f_events(crater_dec_t *d, json_t *v, void *obj)
{
    crater_proto_events_t *e = obj;

    if (!(e->events =
              array_room(v, CRATER_PROTO_MAX_EVENTS, sizeof(*e->events), 0)))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    return crater_dec_array(d, v, CRATER_PROTO_MAX_EVENTS, e_event, e);
}

static const crater_dec_field_t events_fields[] = {
    {"events", f_events, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

json_t *crater_proto_events_encode(const crater_proto_events_t *e)
{
    json_t *a = json_array();

    for (size_t i = 0; a && i < e->nevents; i++)
        if (json_array_append_new(a, crater_proto_event_encode(&e->events[i]))
            < 0) {
            json_decref(a);
            return NULL;
        }
    return json_pack("{s:o}", "events", a);
}

int crater_proto_events_decode(crater_dec_t *d,
                               json_t *v,
                               crater_proto_events_t *out)
{
    memset(out, 0, sizeof(*out));
    if (crater_dec_object(d, v, events_fields, out) == 0)
        return 0;
    crater_proto_events_clear(out);
    return -1;
}

void crater_proto_events_clear(crater_proto_events_t *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->nevents; i++)
        crater_proto_event_clear(&e->events[i]);
    free(e->events);
    memset(e, 0, sizeof(*e));
}

/* ---- register ------------------------------------------------------- */

#define HELD(obj) ((crater_proto_held_t *)(obj))
#define REG(obj) ((crater_proto_register_t *)(obj))

static int f_held_job(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_job(d, v, &HELD(obj)->job);
}

static int f_held_replica(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_replica(d, v, &HELD(obj)->replica);
}

static int f_held_attempt(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_attempt(d, v, &HELD(obj)->attempt);
}

static int f_held_state(crater_dec_t *d, json_t *v, void *obj)
{
    int x = 0;

    if (crater_dec_enum(d, v, held_names, 2, &x) < 0)
        return -1;
    HELD(obj)->running = x == 1;
    return 0;
}

static int f_held_pid(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_i32(d, v, 0, &HELD(obj)->pid);
}

static int f_held_started(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_time(d, v, &HELD(obj)->started_ms);
}

static const crater_dec_field_t held_fields[] = {
    {"job", f_held_job, CRATER_FIELD_REQUIRED},
    {"attempt", f_held_attempt, CRATER_FIELD_REQUIRED},
    {"replica", f_held_replica, 0},
    {"state", f_held_state, CRATER_FIELD_REQUIRED},
    {"pid", f_held_pid, 0},
    {"started_ms", f_held_started, 0},
    {NULL, NULL, 0},
};

static int e_held(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    crater_proto_register_t *r = obj;

    r->ntasks = i + 1;
    return crater_dec_object(d, v, held_fields, &r->tasks[i]);
}

static int f_reg_version(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_str(d, v, 64, &REG(obj)->version);
}

static int f_reg_protocol(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_u32(d, v, 1, 1000, &REG(obj)->protocol);
}

/* The hardware document is node_add()'s to decode (crater_hw_decode). */
static int f_reg_node(crater_dec_t *d, json_t *v, void *obj)
{
    if (!json_is_object(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a mapping (a Node document), got %s",
                               crater_dec_typename(v));
    REG(obj)->node = json_incref(v);
    return 0;
}

static int f_reg_tasks(crater_dec_t *d, json_t *v, void *obj)
{
    crater_proto_register_t *r = obj;

    if (!(r->tasks =
              array_room(v, CRATER_PROTO_MAX_TASKS, sizeof(*r->tasks), 0)))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    return crater_dec_array(d, v, CRATER_PROTO_MAX_TASKS, e_held, r);
}

static const crater_dec_field_t register_fields[] = {
    {"version", f_reg_version, CRATER_FIELD_REQUIRED},
    {"protocol", f_reg_protocol, CRATER_FIELD_REQUIRED},
    {"node", f_reg_node, 0},
    {"tasks", f_reg_tasks, 0},
    {NULL, NULL, 0},
};

int64_t crater_proto_register_protocol(json_t *v)
{
    json_t *p = json_object_get(v, "protocol");

    return json_is_integer(p) ? (int64_t)json_integer_value(p) : 1;
}

static json_t *held_encode(const crater_proto_held_t *h)
{
    return with_replica(json_pack("{s:s, s:I, s:s, s:i, s:I}",
                                  "job",
                                  h->job ? h->job : "",
                                  "attempt",
                                  (json_int_t)h->attempt,
                                  "state",
                                  held_names[h->running],
                                  "pid",
                                  (int)h->pid,
                                  "started_ms",
                                  (json_int_t)h->started_ms),
                        h->replica);
}

json_t *crater_proto_register_encode(const crater_proto_register_t *r)
{
    json_t *tasks = json_array(), *o;

    for (size_t i = 0; tasks && i < r->ntasks; i++)
        if (json_array_append_new(tasks, held_encode(&r->tasks[i])) < 0) {
            json_decref(tasks);
            return NULL;
        }
    o = json_pack("{s:s, s:I, s:o}",
                  "version",
                  r->version ? r->version : "",
                  "protocol",
                  (json_int_t)r->protocol,
                  "tasks",
                  tasks);
    if (o && r->node && json_object_set(o, "node", r->node) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int crater_proto_register_decode(crater_dec_t *d,
                                 json_t *v,
                                 crater_proto_register_t *out)
{
    memset(out, 0, sizeof(*out));
    if (crater_dec_object(d, v, register_fields, out) == 0)
        return 0;
    crater_proto_register_clear(out);
    return -1;
}

void crater_proto_register_clear(crater_proto_register_t *r)
{
    if (!r)
        return;
    free(r->version);
    json_decref(r->node);
    for (size_t i = 0; r->tasks && i < r->ntasks; i++)
        free(r->tasks[i].job);
    free(r->tasks);
    memset(r, 0, sizeof(*r));
}

/* ---- register answer ------------------------------------------------ */

#define RGD(obj) ((crater_proto_registered_t *)(obj))

static int f_rgd_node(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_str(d, v, 253, &RGD(obj)->node);
}

static int f_rgd_version(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_str(d, v, 64, &RGD(obj)->version);
}

static int f_rgd_protocol(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_u32(d, v, 1, 1000, &RGD(obj)->protocol);
}

static int f_rgd_seq(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &RGD(obj)->seq);
}

static int f_rgd_hb(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &RGD(obj)->heartbeat_interval_ms);
}

static int f_rgd_hbto(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &RGD(obj)->heartbeat_timeout_ms);
}

static int f_rgd_sampling(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &RGD(obj)->sampling_interval_ms);
}

static int e_rgd_task(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    crater_proto_registered_t *r = obj;

    if (crater_proto_task_decode(d, v, &r->tasks[i]) < 0)
        return -1;
    r->ntasks = i + 1;
    return 0;
}

static int f_rgd_tasks(crater_dec_t *d, json_t *v, void *obj)
{
    crater_proto_registered_t *r = obj;

    if (!(r->tasks =
              array_room(v, CRATER_PROTO_MAX_TASKS, sizeof(*r->tasks), 0)))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    return crater_dec_array(d, v, CRATER_PROTO_MAX_TASKS, e_rgd_task, r);
}

static const crater_dec_field_t registered_fields[] = {
    {"node", f_rgd_node, CRATER_FIELD_REQUIRED},
    {"version", f_rgd_version, CRATER_FIELD_REQUIRED},
    {"protocol", f_rgd_protocol, CRATER_FIELD_REQUIRED},
    {"seq", f_rgd_seq, CRATER_FIELD_REQUIRED},
    {"heartbeatInterval_ms", f_rgd_hb, CRATER_FIELD_REQUIRED},
    {"heartbeatTimeout_ms", f_rgd_hbto, CRATER_FIELD_REQUIRED},
    {"samplingInterval_ms", f_rgd_sampling, CRATER_FIELD_REQUIRED},
    {"tasks", f_rgd_tasks, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

json_t *crater_proto_registered_encode(const crater_proto_registered_t *r)
{
    json_t *tasks = json_array();

    for (size_t i = 0; tasks && i < r->ntasks; i++)
        if (json_array_append_new(tasks, crater_proto_task_encode(&r->tasks[i]))
            < 0) {
            json_decref(tasks);
            return NULL;
        }
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:o}",
                     "node",
                     r->node ? r->node : "",
                     "version",
                     r->version ? r->version : "",
                     "protocol",
                     (json_int_t)r->protocol,
                     "seq",
                     (json_int_t)r->seq,
                     "heartbeatInterval_ms",
                     (json_int_t)r->heartbeat_interval_ms,
                     "heartbeatTimeout_ms",
                     (json_int_t)r->heartbeat_timeout_ms,
                     "samplingInterval_ms",
                     (json_int_t)r->sampling_interval_ms,
                     "tasks",
                     tasks);
}

int crater_proto_registered_decode(crater_dec_t *d,
                                   json_t *v,
                                   crater_proto_registered_t *out)
{
    memset(out, 0, sizeof(*out));
    if (crater_dec_object(d, v, registered_fields, out) == 0)
        return 0;
    crater_proto_registered_clear(out);
    return -1;
}

void crater_proto_registered_clear(crater_proto_registered_t *r)
{
    if (!r)
        return;
    free(r->node);
    free(r->version);
    for (size_t i = 0; r->tasks && i < r->ntasks; i++)
        crater_proto_task_clear(&r->tasks[i]);
    free(r->tasks);
    memset(r, 0, sizeof(*r));
}

/* ---- heartbeat ------------------------------------------------------ */

#define HB(obj) ((crater_proto_heartbeat_t *)(obj))
#define GU(obj) ((crater_proto_gpu_util_t *)(obj))
#define USE(obj) ((crater_proto_usage_t *)(obj))

static int dec_frac(crater_dec_t *d, json_t *v, double *out)
{
    return crater_dec_double(d, v, 0, 1, out);
}

static int f_gu_index(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_u32(d,
                          v,
                          0,
                          CRATER_MAX_GPUS_PER_NODE - 1,
                          &GU(obj)->index);
}

static int f_gu_util(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_frac(d, v, &GU(obj)->util);
}

static int f_gu_used(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &GU(obj)->memory_used_bytes);
}

static int f_gu_mem_act(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_frac(d, v, &GU(obj)->mem_activity);
}

static const crater_dec_field_t gpu_util_fields[] = {
    {"index", f_gu_index, CRATER_FIELD_REQUIRED},
    {"util", f_gu_util, CRATER_FIELD_REQUIRED},
    {"memory_used_bytes", f_gu_used, CRATER_FIELD_REQUIRED},
    {"mem_activity", f_gu_mem_act, 0},
    {NULL, NULL, 0},
};

static int e_gpu_util(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    crater_proto_heartbeat_t *h = obj;

    h->ngpus = (uint32_t)i + 1;
    h->gpus[i].mem_activity = -1; /* unless the agent says */
    return crater_dec_object(d, v, gpu_util_fields, &h->gpus[i]);
}

static int f_util_cpu(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_frac(d, v, &HB(obj)->cpu);
}

static int f_util_mem(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_frac(d, v, &HB(obj)->memory);
}

static int f_util_disk(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_frac(d, v, &HB(obj)->disk);
}

static int f_util_gpus(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_array(d, v, CRATER_MAX_GPUS_PER_NODE, e_gpu_util, obj);
}

static const crater_dec_field_t util_fields[] = {
    {"cpu", f_util_cpu, CRATER_FIELD_REQUIRED},
    {"memory", f_util_mem, CRATER_FIELD_REQUIRED},
    {"disk", f_util_disk, CRATER_FIELD_REQUIRED},
    {"gpus", f_util_gpus, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

static int f_use_cpu(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_double(d, v, 0, 1e9, &USE(obj)->cpu_millis);
}

static int f_use_mem(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_u64(d, v, &USE(obj)->memory_bytes);
}

static const crater_dec_field_t usage_fields[] = {
    {"cpu_millis", f_use_cpu, 0},
    {"memory_bytes", f_use_mem, 0},
    {NULL, NULL, 0},
};

static int f_use_job(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_job(d, v, &USE(obj)->job);
}

static int f_use_replica(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_replica(d, v, &USE(obj)->replica);
}

static int f_use_attempt(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_attempt(d, v, &USE(obj)->attempt);
}

static int f_use_usage(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_object(d, v, usage_fields, obj);
}

static const crater_dec_field_t task_usage_fields[] = {
    {"job", f_use_job, CRATER_FIELD_REQUIRED},
    {"attempt", f_use_attempt, CRATER_FIELD_REQUIRED},
    {"replica", f_use_replica, 0},
    {"usage", f_use_usage, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

static int e_usage(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    crater_proto_heartbeat_t *h = obj;

    h->ntasks = i + 1;
    return crater_dec_object(d, v, task_usage_fields, &h->tasks[i]);
}

static int f_hb_util(crater_dec_t *d, json_t *v, void *obj)
{
    HB(obj)->has_util = true;
    return crater_dec_object(d, v, util_fields, obj);
}

static int f_hb_tasks(crater_dec_t *d, json_t *v, void *obj)
{
    crater_proto_heartbeat_t *h = obj;

    if (!(h->tasks =
              array_room(v, CRATER_PROTO_MAX_TASKS, sizeof(*h->tasks), 0)))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    return crater_dec_array(d, v, CRATER_PROTO_MAX_TASKS, e_usage, h);
}

static int e_port(crater_dec_t *d, json_t *v, void *obj, size_t i)
{
    crater_proto_heartbeat_t *h = obj;
    uint32_t p;

    if (crater_dec_u32(d, v, 1, 65535, &p) < 0)
        return -1;
    if (i > 0 && p <= h->ports[i - 1])
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "ports must be ascending and unique (%u "
                               "after %u)",
                               (unsigned)p,
                               (unsigned)h->ports[i - 1]);
    h->ports[i] = (uint16_t)p;
    h->nports = i + 1;
    return 0;
}

static int f_hb_ports(crater_dec_t *d, json_t *v, void *obj)
{
    crater_proto_heartbeat_t *h = obj;

    if (!(h->ports =
              array_room(v, CRATER_PROTO_MAX_PORTS, sizeof(*h->ports), 0)))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    h->has_ports = true;
    return crater_dec_array(d, v, CRATER_PROTO_MAX_PORTS, e_port, h);
}

static const crater_dec_field_t heartbeat_fields[] = {
    {"util", f_hb_util, 0},
    {"tasks", f_hb_tasks, 0},
    {"listening", f_hb_ports, 0},
    {NULL, NULL, 0},
};

json_t *crater_proto_usage_encode(const crater_proto_usage_t *u)
{
    return with_replica(json_pack("{s:s, s:I, s:{s:f, s:I}}",
                                  "job",
                                  u->job ? u->job : "",
                                  "attempt",
                                  (json_int_t)u->attempt,
                                  "usage",
                                  "cpu_millis",
                                  u->cpu_millis,
                                  "memory_bytes",
                                  (json_int_t)u->memory_bytes),
                        u->replica);
}

static json_t *gpu_util_encode(const crater_proto_gpu_util_t *g)
{
    json_t *o = json_pack("{s:i, s:f, s:I}",
                          "index",
                          (int)g->index,
                          "util",
                          g->util,
                          "memory_used_bytes",
                          (json_int_t)g->memory_used_bytes);

    if (o && g->mem_activity >= 0
        && json_object_set_new(o, "mem_activity", json_real(g->mem_activity))
               < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *util_encode(const crater_proto_heartbeat_t *h)
{
    json_t *gpus = json_array();

    for (uint32_t i = 0; gpus && i < h->ngpus; i++)
        if (json_array_append_new(gpus, gpu_util_encode(&h->gpus[i])) < 0) {
            json_decref(gpus);
            return NULL;
        }
    return json_pack("{s:f, s:f, s:f, s:o}",
                     "cpu",
                     h->cpu,
                     "memory",
                     h->memory,
                     "disk",
                     h->disk,
                     "gpus",
                     gpus);
}

static json_t *ports_encode(const crater_proto_heartbeat_t *h)
{
    json_t *a = json_array();

    for (size_t i = 0; a && i < h->nports; i++)
        if (json_array_append_new(a, json_integer(h->ports[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

json_t *crater_proto_heartbeat_encode(const crater_proto_heartbeat_t *h)
{
    json_t *tasks = json_array(), *o;

    for (size_t i = 0; tasks && i < h->ntasks; i++)
        if (json_array_append_new(tasks,
                                  crater_proto_usage_encode(&h->tasks[i]))
            < 0) {
            json_decref(tasks);
            return NULL;
        }
    o = json_pack("{s:o}", "tasks", tasks);
    if (o && h->has_util
        && json_object_set_new(o, "util", util_encode(h)) < 0) {
        json_decref(o);
        return NULL;
    }
    if (o && h->has_ports
        && json_object_set_new(o, "listening", ports_encode(h)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int crater_proto_heartbeat_decode(crater_dec_t *d,
                                  json_t *v,
                                  crater_proto_heartbeat_t *out)
{
    memset(out, 0, sizeof(*out));
    if (crater_dec_object(d, v, heartbeat_fields, out) == 0)
        return 0;
    crater_proto_heartbeat_clear(out);
    return -1;
}

void crater_proto_heartbeat_clear(crater_proto_heartbeat_t *h)
{
    if (!h)
        return;
    for (size_t i = 0; h->tasks && i < h->ntasks; i++)
        free(h->tasks[i].job);
    free(h->tasks);
    free(h->ports);
    memset(h, 0, sizeof(*h));
}
