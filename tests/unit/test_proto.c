/* test_proto.c - the agent protocol's messages (crater/proto.h): every
 * message survives encode -> decode -> encode unchanged with its typed
 * fields intact, and malformed input is refused with the field named. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "crater/proto.h"

typedef int (*decode_f)(crater_dec_t *d, json_t *v, void *out);
typedef json_t *(*encode_f)(const void *in);
typedef void (*clear_f)(void *m);

/* decode(v) into out, which the caller clears; asserts success. */
static void decode_ok(json_t *v, decode_f dec, void *out)
{
    crater_error_t err = {0};
    crater_dec_t d;
    char *s = json_dumps(v, JSON_SORT_KEYS);

    crater_dec_init(&d, NULL, 0, &err);
    ck_assert_msg(dec(&d, v, out) == 0, "%s: %s", s, err.text);
    free(s);
}

/* encode(in) decodes into out and encodes again to the same document. */
static void round_trip(const void *in, encode_f enc, decode_f dec, void *out)
{
    json_t *a = enc(in), *b;

    ck_assert_ptr_nonnull(a);
    decode_ok(a, dec, out);
    b = enc(out);
    ck_assert_msg(json_equal(a, b), "round trip changed the document");
    json_decref(a);
    json_decref(b);
}

/* decoding text fails with field (a prefix match of err.field). */
static void refused(
    const char *text, decode_f dec, clear_f clr, size_t size, const char *field)
{
    json_t *v = json_loads(text, 0, NULL);
    crater_error_t err = {0};
    void *out = calloc(1, size);
    crater_dec_t d;

    ck_assert_msg(v != NULL, "bad test JSON: %s", text);
    crater_dec_init(&d, NULL, 0, &err);
    ck_assert_msg(dec(&d, v, out) < 0, "accepted: %s", text);
    ck_assert_msg(strcmp(err.field, field) == 0,
                  "%s: field '%s', expected '%s' (%s)",
                  text,
                  err.field,
                  field,
                  err.text);
    clr(out); /* a failed decode left nothing to free: clear is a no-op */
    free(out);
    json_decref(v);
}

#define DEC(fn) ((decode_f)(void (*)(void))(fn))
#define ENC(fn) ((encode_f)(void (*)(void))(fn))
#define CLR(fn) ((clear_f)(void (*)(void))(fn))

static void sample_task(crater_proto_task_t *t)
{
    static char *argv[] = {"python", "train.py", "--epochs=3", NULL};

    memset(t, 0, sizeof(*t));
    t->job = strdup("17");
    t->attempt = 2;
    t->replica = 3;
    t->argv = crater_strv_dup(argv);
    t->nargv = 3;
    ck_assert_int_eq(crater_proto_task_setenv(t, "A", "1"), 0);
    ck_assert_int_eq(crater_proto_task_setenv(t,
                                              "CUDA_VISIBLE_DEVICES",
                                              "GPU-0,GPU-1"),
                     0);
    t->working_dir = strdup("/scratch/17");
    t->uid = 200001;
    t->gid = 200001;
    t->placement.node = strdup("gpu-3");
    t->placement.ngpus = 2;
    for (uint32_t i = 0; i < 2; i++) {
        t->placement.gpus[i].index = 4 + i;
        t->placement.gpus[i].uuid = strdup(i ? "GPU-1" : "GPU-0");
        t->placement.gpus[i].memory_bytes = (uint64_t)(i + 10) << 30;
    }
    t->placement.gpus[0].model = strdup("H100");
    t->placement.numa = 1;
    t->placement.cpu_millis = 8000;
    t->placement.memory_bytes = 64ull << 30;
    t->placement.disk = strdup("nvme0n1");
    t->limits = (crater_proto_limits_t){
        .cpu_millis = 8000,
        .memory_bytes = 64ull << 30,
        .cpu_limit_multiplier = 1.5,
        .cpu_burst = true,
        .io_profile = CRATER_IO_MODEL_LOADING,
        .workload_type = CRATER_WORKLOAD_INFERENCE,
        .gpu_isolation = CRATER_GPU_ISO_MPS,
    };
    t->grace_period_ms = 30000;
}

static void check_task(const crater_proto_task_t *t)
{
    ck_assert_str_eq(t->job, "17");
    ck_assert_uint_eq(t->attempt, 2);
    ck_assert_uint_eq(t->replica, 3);
    ck_assert_uint_eq(t->nargv, 3);
    ck_assert_str_eq(t->argv[2], "--epochs=3");
    ck_assert_ptr_null(t->argv[3]);
    ck_assert_str_eq(crater_proto_task_getenv(t, "CUDA_VISIBLE_DEVICES"),
                     "GPU-0,GPU-1");
    ck_assert_str_eq(t->working_dir, "/scratch/17");
    ck_assert_uint_eq(t->uid, 200001);
    ck_assert_uint_eq(t->gid, 200001);
    ck_assert_uint_eq(t->placement.ngpus, 2);
    ck_assert_uint_eq(t->placement.gpus[1].index, 5);
    ck_assert_uint_eq(t->placement.gpus[1].memory_bytes, 11ull << 30);
    ck_assert_int_eq(t->placement.numa, 1);
    ck_assert_str_eq(t->placement.disk, "nvme0n1");
    ck_assert_int_eq(t->limits.io_profile, CRATER_IO_MODEL_LOADING);
    ck_assert_int_eq(t->limits.workload_type, CRATER_WORKLOAD_INFERENCE);
    ck_assert_int_eq(t->limits.gpu_isolation, CRATER_GPU_ISO_MPS);
    ck_assert(t->limits.cpu_burst);
    ck_assert_double_eq(t->limits.cpu_limit_multiplier, 1.5);
    ck_assert_uint_eq(t->grace_period_ms, 30000);
}

START_TEST(task_round_trip)
{
    crater_proto_task_t in, out;
    json_t *v;

    sample_task(&in);
    round_trip(&in,
               ENC(crater_proto_task_encode),
               DEC(crater_proto_task_decode),
               &out);
    check_task(&out);
    ck_assert(!out.has_logs);
    v = crater_proto_task_encode(&in);
    ck_assert_ptr_null(json_object_get(v, "spec")); /* no job spec */
    json_decref(v);
    crater_proto_task_clear(&out);
    /* optional parts absent: no workingDir, disk, NUMA node */
    free(in.working_dir);
    in.working_dir = NULL;
    free(in.placement.disk);
    in.placement.disk = NULL;
    in.placement.numa = -1;
    round_trip(&in,
               ENC(crater_proto_task_encode),
               DEC(crater_proto_task_decode),
               &out);
    ck_assert_ptr_null(out.working_dir);
    ck_assert_ptr_null(out.placement.disk);
    ck_assert_int_eq(out.placement.numa, -1);
    crater_proto_task_clear(&out);
    crater_proto_task_clear(&in);
    crater_proto_task_clear(NULL);
}
END_TEST

/* A task with an image: "container" carries it, its pull policy and its
 * volumes; strict like the rest. */
START_TEST(task_container)
{
    crater_proto_task_t in, out;
    json_t *v;
    char *bad;

    sample_task(&in);
    in.image = strdup("localhost/x:1");
    in.image_pull = CRATER_PULL_NEVER;
    in.nvolumes = 2;
    in.volumes = calloc(2, sizeof(*in.volumes));
    in.volumes[0].host_path = strdup("/srv/data");
    in.volumes[0].mount_path = strdup("/data");
    in.volumes[0].read_only = true;
    in.volumes[1].scratch = strdup("work");
    in.volumes[1].mount_path = strdup("/scratch");
    round_trip(&in,
               ENC(crater_proto_task_encode),
               DEC(crater_proto_task_decode),
               &out);
    check_task(&out);
    ck_assert_str_eq(out.image, "localhost/x:1");
    ck_assert_int_eq(out.image_pull, CRATER_PULL_NEVER);
    ck_assert_uint_eq(out.nvolumes, 2);
    ck_assert_str_eq(out.volumes[0].host_path, "/srv/data");
    ck_assert(out.volumes[0].read_only);
    ck_assert_str_eq(out.volumes[1].scratch, "work");
    ck_assert_str_eq(out.volumes[1].mount_path, "/scratch");
    crater_proto_task_clear(&out);
    v = crater_proto_task_encode(&in);
    json_object_set_new(json_object_get(v, "container"),
                        "pull",
                        json_string("Sometimes"));
    bad = json_dumps(v, 0);
    refused(bad,
            DEC(crater_proto_task_decode),
            CLR(crater_proto_task_clear),
            sizeof(crater_proto_task_t),
            "container.pull");
    free(bad);
    json_object_set_new(json_object_get(v, "container"),
                        "volumes",
                        json_pack("[{s:s}]", "hostPath", "/a"));
    json_object_set_new(json_object_get(v, "container"),
                        "pull",
                        json_string("Always"));
    bad = json_dumps(v, 0);
    refused(bad,
            DEC(crater_proto_task_decode),
            CLR(crater_proto_task_clear),
            sizeof(crater_proto_task_t),
            "container.volumes[0]");
    free(bad);
    json_decref(v);
    crater_proto_task_clear(&in);
    v = crater_proto_task_encode(&in); /* bare: no "container" */
    ck_assert_ptr_null(json_object_get(v, "container"));
    json_decref(v);
}
END_TEST

START_TEST(items_round_trip)
{
    crater_proto_item_t start = {.seq = 7, .op = CRATER_PROTO_START};
    crater_proto_item_t stop = {
        .seq = 8,
        .op = CRATER_PROTO_STOP,
        .stop = {.job = "9",
                 .attempt = 1,
                 .grace_period_ms = 5000,
                 .reason = "preempted by 17"},
    };
    crater_proto_item_t resync = {.seq = 9, .op = CRATER_PROTO_RESYNC};
    crater_proto_item_t out;
    crater_proto_work_t w;
    json_t *items = json_array(), *v;

    sample_task(&start.task);
    round_trip(&start,
               ENC(crater_proto_item_encode),
               DEC(crater_proto_item_decode),
               &out);
    ck_assert_int_eq(out.op, CRATER_PROTO_START);
    check_task(&out.task);
    crater_proto_item_clear(&out);
    round_trip(&stop,
               ENC(crater_proto_item_encode),
               DEC(crater_proto_item_decode),
               &out);
    ck_assert_str_eq(out.stop.job, "9");
    ck_assert_str_eq(out.stop.reason, "preempted by 17");
    ck_assert_uint_eq(out.stop.grace_period_ms, 5000);
    crater_proto_item_clear(&out);
    round_trip(&resync,
               ENC(crater_proto_item_encode),
               DEC(crater_proto_item_decode),
               &out);
    ck_assert_int_eq(out.op, CRATER_PROTO_RESYNC);
    crater_proto_item_clear(&out);

    json_array_append_new(items, crater_proto_item_encode(&start));
    json_array_append_new(items, crater_proto_item_encode(&stop));
    json_array_append_new(items, crater_proto_item_encode(&resync));
    v = crater_proto_work_encode(9, items);
    decode_ok(v, DEC(crater_proto_work_decode), &w);
    ck_assert_uint_eq(w.seq, 9);
    ck_assert_uint_eq(w.nitems, 3);
    check_task(&w.items[0].task);
    ck_assert_int_eq(w.items[1].op, CRATER_PROTO_STOP);
    ck_assert_uint_eq(w.items[2].seq, 9);
    crater_proto_work_clear(&w);
    json_decref(v);
    json_decref(items);
    crater_proto_task_clear(&start.task);
}
END_TEST

START_TEST(events_round_trip)
{
    crater_proto_event_t ev[2] = {
        {.job = "17",
         .attempt = 1,
         .event = CRATER_PROTO_STARTED,
         .pid = 4242,
         .time_ms = 1700000000000},
        {.job = "9",
         .attempt = 2,
         .replica = 1,
         .event = CRATER_PROTO_EXITED,
         .time_ms = 1700000001000,
         .exit_code = 3,
         .signal = 9,
         .oom = true,
         .error = "killed by the GPU watchdog",
         .has_logs = true,
         .logs = {52428800, 7}},
    };
    crater_proto_events_t in = {.events = ev, .nevents = 2}, out;

    round_trip(&in,
               ENC(crater_proto_events_encode),
               DEC(crater_proto_events_decode),
               &out);
    ck_assert_uint_eq(out.nevents, 2);
    ck_assert_int_eq(out.events[0].pid, 4242);
    ck_assert_int_eq(out.events[0].time_ms, 1700000000000);
    ck_assert_int_eq(out.events[1].event, CRATER_PROTO_EXITED);
    ck_assert_int_eq(out.events[1].exit_code, 3);
    ck_assert_uint_eq(out.events[0].replica, 0);
    ck_assert_uint_eq(out.events[1].replica, 1);
    ck_assert_int_eq(out.events[1].signal, 9);
    ck_assert(out.events[1].oom);
    ck_assert_str_eq(out.events[1].error, "killed by the GPU watchdog");
    ck_assert_uint_eq(out.events[1].logs[0], 52428800);
    crater_proto_events_clear(&out);
}
END_TEST

START_TEST(register_round_trip)
{
    crater_proto_held_t held[2] = {
        {.job = "17",
         .attempt = 1,
         .running = true,
         .pid = 42,
         .started_ms = 5},
        {.job = "18", .attempt = 3, .running = false},
    };
    json_t *node = json_pack("{s:s, s:{s:s}}",
                             "kind",
                             "Node",
                             "metadata",
                             "name",
                             "gpu-3");
    crater_proto_register_t in = {.version = "0.1.0",
                                  .protocol = 2,
                                  .node = node,
                                  .tasks = held,
                                  .ntasks = 2};
    crater_proto_register_t out;
    crater_proto_registered_t rin = {
        .node = "gpu-3",
        .version = "0.1.0",
        .protocol = 2,
        .seq = 12,
        .heartbeat_interval_ms = 5000,
        .heartbeat_timeout_ms = 90000,
        .sampling_interval_ms = 5000,
        .ntasks = 1,
    };
    crater_proto_registered_t rout;
    crater_proto_task_t task;
    json_t *v;

    round_trip(&in,
               ENC(crater_proto_register_encode),
               DEC(crater_proto_register_decode),
               &out);
    ck_assert_uint_eq(out.protocol, 2);
    ck_assert(json_equal(out.node, node));
    ck_assert_uint_eq(out.ntasks, 2);
    ck_assert(out.tasks[0].running && !out.tasks[1].running);
    ck_assert_int_eq(out.tasks[0].pid, 42);
    crater_proto_register_clear(&out);
    v = crater_proto_register_encode(&in);
    ck_assert_int_eq(crater_proto_register_protocol(v), 2);
    json_object_del(v, "protocol");
    ck_assert_int_eq(crater_proto_register_protocol(v), 1);
    json_decref(v);
    json_decref(node);

    sample_task(&task);
    task.has_logs = true;
    task.logs[0] = 1024;
    rin.tasks = &task;
    round_trip(&rin,
               ENC(crater_proto_registered_encode),
               DEC(crater_proto_registered_decode),
               &rout);
    ck_assert_uint_eq(rout.seq, 12);
    ck_assert_uint_eq(rout.heartbeat_timeout_ms, 90000);
    check_task(&rout.tasks[0]);
    ck_assert(rout.tasks[0].has_logs);
    ck_assert_uint_eq(rout.tasks[0].logs[0], 1024);
    crater_proto_registered_clear(&rout);
    crater_proto_task_clear(&task);
}
END_TEST

START_TEST(heartbeat_round_trip)
{
    crater_proto_usage_t use = {.job = "17",
                                .attempt = 1,
                                .cpu_millis = 900.5,
                                .memory_bytes = 1 << 20};
    crater_proto_heartbeat_t *in = calloc(1, sizeof(*in));
    crater_proto_heartbeat_t *out = calloc(1, sizeof(*out));

    in->has_util = true;
    in->cpu = 0.4;
    in->memory = 0.3;
    in->disk = 0.1;
    in->ngpus = 2;
    in->gpus[1] = (crater_proto_gpu_util_t){.index = 1,
                                            .util = 0.9,
                                            .memory_used_bytes = 1 << 30,
                                            .mem_activity = 0.25};
    in->gpus[0].mem_activity = -1; /* not measured: left off the wire */
    in->tasks = &use;
    in->ntasks = 1;
    round_trip(in,
               ENC(crater_proto_heartbeat_encode),
               DEC(crater_proto_heartbeat_decode),
               out);
    ck_assert(out->has_util);
    ck_assert_double_eq(out->cpu, 0.4);
    ck_assert_uint_eq(out->ngpus, 2);
    ck_assert_uint_eq(out->gpus[1].memory_used_bytes, 1 << 30);
    ck_assert_double_eq(out->gpus[1].mem_activity, 0.25);
    ck_assert_double_eq(out->gpus[0].mem_activity, -1);
    ck_assert_str_eq(out->tasks[0].job, "17");
    ck_assert_double_eq(out->tasks[0].cpu_millis, 900.5);
    ck_assert(!out->has_ports); /* not reported: left off the wire */
    crater_proto_heartbeat_clear(out);
    /* samples are optional: {"tasks": []} is a heartbeat */
    in->has_util = false;
    in->ntasks = 0;
    round_trip(in,
               ENC(crater_proto_heartbeat_encode),
               DEC(crater_proto_heartbeat_decode),
               out);
    ck_assert(!out->has_util);
    crater_proto_heartbeat_clear(out);
    /* protocol 7: the node's listening ports; none is a report too */
    in->has_ports = true;
    in->ports = (uint16_t[]){22, 29501, 65535};
    in->nports = 3;
    round_trip(in,
               ENC(crater_proto_heartbeat_encode),
               DEC(crater_proto_heartbeat_decode),
               out);
    ck_assert(out->has_ports);
    ck_assert_uint_eq(out->nports, 3);
    ck_assert_uint_eq(out->ports[0], 22);
    ck_assert_uint_eq(out->ports[1], 29501);
    ck_assert_uint_eq(out->ports[2], 65535);
    crater_proto_heartbeat_clear(out);
    in->nports = 0;
    round_trip(in,
               ENC(crater_proto_heartbeat_encode),
               DEC(crater_proto_heartbeat_decode),
               out);
    ck_assert(out->has_ports);
    ck_assert_uint_eq(out->nports, 0);
    crater_proto_heartbeat_clear(out);
    free(in);
    free(out);
}
END_TEST

/* A valid task order with one change made by jq-like surgery. */
static char *task_with(const char *path, json_t *val)
{
    crater_proto_task_t t;
    json_t *v, *o;
    char *s, *dot, buf[128];

    sample_task(&t);
    v = crater_proto_task_encode(&t);
    crater_proto_task_clear(&t);
    snprintf(buf, sizeof(buf), "%s", path);
    o = v;
    while ((dot = strchr(buf, '.'))) { /* descend to the last key */
        *dot = '\0';
        o = json_object_get(o, buf);
        memmove(buf, dot + 1, strlen(dot + 1) + 1);
    }
    if (val)
        json_object_set_new(o, buf, val);
    else
        json_object_del(o, buf);
    s = json_dumps(v, 0);
    json_decref(v);
    return s;
}

static void task_refused(const char *path, json_t *val, const char *field)
{
    char *s = task_with(path, val);

    refused(s,
            DEC(crater_proto_task_decode),
            CLR(crater_proto_task_clear),
            sizeof(crater_proto_task_t),
            field);
    free(s);
}

START_TEST(task_malformed)
{
    task_refused("spec", json_object(), "spec"); /* the spec is gone */
    task_refused("job", json_string("../etc"), "job");
    task_refused("job", json_integer(17), "job");
    task_refused("attempt", json_integer(0), "attempt");
    task_refused("replica", json_integer(-1), "replica");
    task_refused("replica", json_integer(CRATER_JOB_MAX_REPLICAS), "replica");
    task_refused("replica", json_string("1"), "replica");
    task_refused("argv", json_array(), "argv");
    task_refused("argv", json_string("sleep 1"), "argv");
    task_refused("env.A", json_integer(1), "env.A");
    task_refused("env.A=B", json_string("x"), "env.A=B");
    task_refused("limits.cpuBurst", json_string("yes"), "limits.cpuBurst");
    task_refused("limits.ioProfile", json_string("fast"), "limits.ioProfile");
    task_refused("limits.workloadType",
                 json_string("hpc"),
                 "limits.workloadType");
    task_refused("limits.gpuIsolation",
                 json_string("vgpu"),
                 "limits.gpuIsolation");
    task_refused("limits.memory_bytes",
                 json_integer(-1),
                 "limits.memory_bytes");
    task_refused("limits.cpuLimitMultiplier",
                 json_real(1e9),
                 "limits.cpuLimitMultiplier");
    task_refused("limits.extra", json_true(), "limits.extra");
    task_refused("limits.gpuIsolation", NULL, "limits");
    task_refused("placement.numa", json_integer(-2), "placement.numa");
    task_refused("placement.disk", json_string("../sda"), "placement.disk");
    task_refused("placement.gpus",
                 json_pack("[{s:i, s:s, s:i}]",
                           "index",
                           64,
                           "uuid",
                           "GPU-0",
                           "memory_bytes",
                           1),
                 "placement.gpus[0].index");
    task_refused("gracePeriod_ms", json_real(1.5), "gracePeriod_ms");
    /* the task user: never root, never (uid_t)-1, uid and gid together */
    task_refused("uid", json_integer(0), "uid");
    task_refused("gid", json_integer(4294967295LL), "gid");
    task_refused("gid", NULL, "gid");
}
END_TEST

START_TEST(messages_malformed)
{
    size_t ev = sizeof(crater_proto_events_t);
    decode_f evd = DEC(crater_proto_events_decode);
    clear_f evc = CLR(crater_proto_events_clear);

    refused("{\"events\":[{\"job\":\"1\",\"event\":\"finished\"}]}",
            evd,
            evc,
            ev,
            "events[0].event");
    refused("{\"events\":[{\"job\":\"1\",\"attempt\":1,\"event\":\"started\","
            "\"exit_code\":0}]}",
            evd,
            evc,
            ev,
            "events[0].exit_code");
    refused("{\"events\":[{\"job\":\"1\",\"attempt\":1,\"event\":\"exited\","
            "\"exit_code\":256}]}",
            evd,
            evc,
            ev,
            "events[0].exit_code");
    refused("{\"events\":[{\"job\":\"1\",\"event\":\"exited\"}]}",
            evd,
            evc,
            ev,
            "events[0]");
    refused("{\"events\":{}}", evd, evc, ev, "events");
    refused("[]", evd, evc, ev, "");
    refused("{\"seq\":1,\"items\":[{\"seq\":1,\"op\":\"stop\",\"task\":{}}]}",
            DEC(crater_proto_work_decode),
            CLR(crater_proto_work_clear),
            sizeof(crater_proto_work_t),
            "items[0].task");
    refused("{\"seq\":1,\"items\":[{\"seq\":1,\"op\":\"kill\"}]}",
            DEC(crater_proto_work_decode),
            CLR(crater_proto_work_clear),
            sizeof(crater_proto_work_t),
            "items[0].op");
    refused("{\"version\":\"1\",\"protocol\":2,\"node\":[]}",
            DEC(crater_proto_register_decode),
            CLR(crater_proto_register_clear),
            sizeof(crater_proto_register_t),
            "node");
    refused("{\"version\":\"1\",\"protocol\":2,\"tasks\":[{\"job\":\"1\","
            "\"attempt\":1,\"state\":\"lost\"}]}",
            DEC(crater_proto_register_decode),
            CLR(crater_proto_register_clear),
            sizeof(crater_proto_register_t),
            "tasks[0].state");
    refused("{\"util\":{\"cpu\":1.5,\"memory\":0,\"disk\":0,\"gpus\":[]}}",
            DEC(crater_proto_heartbeat_decode),
            CLR(crater_proto_heartbeat_clear),
            sizeof(crater_proto_heartbeat_t),
            "util.cpu");
    refused("{\"tasks\":[{\"job\":\"1\",\"attempt\":1,\"usage\":{\"gpu\":1}}]}",
            DEC(crater_proto_heartbeat_decode),
            CLR(crater_proto_heartbeat_clear),
            sizeof(crater_proto_heartbeat_t),
            "tasks[0].usage.gpu");
    refused("{\"listening\":[22,0]}",
            DEC(crater_proto_heartbeat_decode),
            CLR(crater_proto_heartbeat_clear),
            sizeof(crater_proto_heartbeat_t),
            "listening[1]");
    refused("{\"listening\":[65536]}",
            DEC(crater_proto_heartbeat_decode),
            CLR(crater_proto_heartbeat_clear),
            sizeof(crater_proto_heartbeat_t),
            "listening[0]");
    refused("{\"listening\":[80,22]}",
            DEC(crater_proto_heartbeat_decode),
            CLR(crater_proto_heartbeat_clear),
            sizeof(crater_proto_heartbeat_t),
            "listening[1]");
    refused("{\"listening\":[80,80]}",
            DEC(crater_proto_heartbeat_decode),
            CLR(crater_proto_heartbeat_clear),
            sizeof(crater_proto_heartbeat_t),
            "listening[1]");
    refused("{\"listening\":\"22\"}",
            DEC(crater_proto_heartbeat_decode),
            CLR(crater_proto_heartbeat_clear),
            sizeof(crater_proto_heartbeat_t),
            "listening");
}
END_TEST

/* Issue 14: checkpoint and progress events, the stop order's notice and
 * the task order's checkpointDir survive a round trip; bad reports are
 * refused with the field named. */
START_TEST(checkpoint_messages)
{
    crater_proto_event_t ev[2] = {
        {.job = "9",
         .attempt = 2,
         .event = CRATER_PROTO_CHECKPOINT,
         .time_ms = 5,
         .ckpt = {.step = 40,
                  .path = "/ck/step-40",
                  .digest = "ab12",
                  .bytes = 4096,
                  .seconds = 0.25}},
        {.job = "9",
         .attempt = 2,
         .replica = 1,
         .event = CRATER_PROTO_PROGRESS,
         .ckpt = {.step = 41}},
    };
    crater_proto_events_t in = {.events = ev, .nevents = 2}, out;
    crater_proto_item_t stop = {.op = CRATER_PROTO_STOP,
                                .stop = {.job = "9",
                                         .attempt = 2,
                                         .grace_period_ms = 60000,
                                         .notice = CRATER_NOTICE_DRAIN}},
                        sout;
    crater_proto_task_t task = {.job = "9",
                                .attempt = 1,
                                .argv = (char *[]){"true", NULL},
                                .nargv = 1,
                                .checkpoint_dir = "/data/ck/9"},
                        tout;

    round_trip(&in,
               ENC(crater_proto_events_encode),
               DEC(crater_proto_events_decode),
               &out);
    ck_assert_int_eq(out.events[0].event, CRATER_PROTO_CHECKPOINT);
    ck_assert_uint_eq(out.events[0].ckpt.step, 40);
    ck_assert_str_eq(out.events[0].ckpt.path, "/ck/step-40");
    ck_assert_str_eq(out.events[0].ckpt.digest, "ab12");
    ck_assert_uint_eq(out.events[0].ckpt.bytes, 4096);
    ck_assert(out.events[0].ckpt.seconds == 0.25);
    ck_assert_int_eq(out.events[1].event, CRATER_PROTO_PROGRESS);
    ck_assert_uint_eq(out.events[1].ckpt.step, 41);
    crater_proto_events_clear(&out);
    round_trip(&stop,
               ENC(crater_proto_item_encode),
               DEC(crater_proto_item_decode),
               &sout);
    ck_assert_int_eq(sout.stop.notice, CRATER_NOTICE_DRAIN);
    crater_proto_item_clear(&sout);
    round_trip(&task,
               ENC(crater_proto_task_encode),
               DEC(crater_proto_task_decode),
               &tout);
    ck_assert_str_eq(tout.checkpoint_dir, "/data/ck/9");
    crater_proto_task_clear(&tout);
    ck_assert_str_eq(crater_proto_notice_name(CRATER_NOTICE_TIME_LIMIT),
                     "time-limit");
}
END_TEST

/* A replica's readiness command in its task order and the "ready" event
   (protocol 6): both round trip; a bad command or period is refused with
   the field named. */
START_TEST(readiness_messages)
{
    crater_proto_event_t ev = {.job = "12",
                               .attempt = 1,
                               .replica = 2,
                               .event = CRATER_PROTO_READY,
                               .time_ms = 7,
                               .ready = true};
    crater_proto_events_t in = {.events = &ev, .nevents = 1}, out;
    crater_proto_task_t task, tout;

    round_trip(&in,
               ENC(crater_proto_events_encode),
               DEC(crater_proto_events_decode),
               &out);
    ck_assert_int_eq(out.events[0].event, CRATER_PROTO_READY);
    ck_assert(out.events[0].ready);
    ck_assert_uint_eq(out.events[0].replica, 2);
    crater_proto_events_clear(&out);
    refused("{\"job\": \"1\", \"attempt\": 1, \"event\": \"ready\"}",
            DEC(crater_proto_event_decode),
            CLR(crater_proto_event_clear),
            sizeof(crater_proto_event_t),
            ""); /* a missing field names the object it is missing from */
    sample_task(&task);
    task.readiness.argv = crater_strv_dup((char *[]){"test", "-e", "/m", NULL});
    task.readiness.nargv = 3;
    task.readiness.period_ms = 1000;
    task.readiness.timeout_ms = 250;
    round_trip(&task,
               ENC(crater_proto_task_encode),
               DEC(crater_proto_task_decode),
               &tout);
    check_task(&tout);
    ck_assert_uint_eq(tout.readiness.nargv, 3);
    ck_assert_str_eq(tout.readiness.argv[2], "/m");
    ck_assert_ptr_null(tout.readiness.argv[3]);
    ck_assert_uint_eq(tout.readiness.period_ms, 1000);
    ck_assert_uint_eq(tout.readiness.timeout_ms, 250);
    crater_proto_task_clear(&tout);
    crater_proto_task_clear(&task);
    task_refused("readiness",
                 json_pack("{s:[], s:i, s:i}",
                           "command",
                           "period_ms",
                           1000,
                           "timeout_ms",
                           1000),
                 "readiness.command");
    task_refused("readiness",
                 json_pack("{s:[s], s:i, s:i}",
                           "command",
                           "true",
                           "period_ms",
                           0,
                           "timeout_ms",
                           1000),
                 "readiness.period_ms");
    task_refused("readiness",
                 json_pack("{s:[s], s:i}", "command", "true", "period_ms", 5),
                 "readiness");
}
END_TEST

START_TEST(checkpoint_malformed)
{
    size_t ev = sizeof(crater_proto_events_t);
    decode_f evd = DEC(crater_proto_events_decode);
    clear_f evc = CLR(crater_proto_events_clear);
#define CK_EV(body)                                                            \
    "{\"events\":[{\"job\":\"1\",\"attempt\":1,\"event\":\"checkpoint\"," body \
    "}]}"

    refused(CK_EV("\"checkpoint\":{\"step\":-1}"),
            evd,
            evc,
            ev,
            "events[0].checkpoint.step");
    refused(CK_EV("\"checkpoint\":{\"step\":1,\"digest\":\"x y\"}"),
            evd,
            evc,
            ev,
            "events[0].checkpoint.digest");
    refused(CK_EV("\"checkpoint\":{\"step\":1,\"seconds\":-2}"),
            evd,
            evc,
            ev,
            "events[0].checkpoint.seconds");
    refused(CK_EV("\"checkpoint\":{\"step\":1,\"size\":3}"),
            evd,
            evc,
            ev,
            "events[0].checkpoint.size");
    refused(CK_EV("\"step\":1"), evd, evc, ev, "events[0].step");
    refused(CK_EV("\"exit_code\":1"), evd, evc, ev, "events[0].exit_code");
    refused("{\"events\":[{\"job\":\"1\",\"attempt\":1,\"event\":"
            "\"progress\"}]}",
            evd,
            evc,
            ev,
            "events[0]");
    refused("{\"seq\":1,\"items\":[{\"seq\":1,\"op\":\"stop\",\"job\":\"1\","
            "\"attempt\":1,\"gracePeriod_ms\":0,\"notice\":\"bored\"}]}",
            DEC(crater_proto_work_decode),
            CLR(crater_proto_work_clear),
            sizeof(crater_proto_work_t),
            "items[0].notice");
#undef CK_EV
}
END_TEST

START_TEST(names_one_table)
{
    ck_assert_str_eq(crater_io_profile_name(CRATER_IO_MODEL_LOADING),
                     "model-loading");
    ck_assert_str_eq(crater_io_profile_name((crater_io_profile_t)99), "?");
    ck_assert_str_eq(crater_gpu_isolation_name(CRATER_GPU_ISO_MIG), "mig");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("proto");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, task_round_trip);
    tcase_add_test(tc, task_container);
    tcase_add_test(tc, items_round_trip);
    tcase_add_test(tc, events_round_trip);
    tcase_add_test(tc, register_round_trip);
    tcase_add_test(tc, heartbeat_round_trip);
    tcase_add_test(tc, task_malformed);
    tcase_add_test(tc, messages_malformed);
    tcase_add_test(tc, names_one_table);
    tcase_add_test(tc, checkpoint_messages);
    tcase_add_test(tc, checkpoint_malformed);
    tcase_add_test(tc, readiness_messages);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
