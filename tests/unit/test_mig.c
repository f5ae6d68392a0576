/* test_mig.c - isolation: mig. The pure choice of a MIG device
 * (agent_mig_pick: smallest that fits, busy ones skipped, the largest for
 * a whole GPU), MIG device listing through NVML against the stub library
 * (tests/data/nvmlstub, configured by NVMLSTUB_MIG) with the errors for
 * GPUs that are not in MIG mode, the stub's own NVML return codes, and the
 * agent's setup of a task (src/agent/slice.c): CUDA_VISIBLE_DEVICES names
 * the chosen MIG device, no watchdog, devices held by running tasks are
 * not handed out twice. */
#include <check.h>
#include <dlfcn.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/internal.h"
#include "agent/nvml.h"
#include "crater/proto.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)
#define MIG_UUID(g, k) "MIG-5eed000" #g "-000" #k "-4000-8000-000000000000"

static void setup(void)
{
    unsetenv("NVMLSTUB_GPUS");
    unsetenv("NVMLSTUB_MODEL");
    unsetenv("NVMLSTUB_MEM");
    unsetenv("NVMLSTUB_NVLINK");
    unsetenv("NVMLSTUB_MIG");
}

/* ---- agent_mig_pick ---- */

static const crater_nvml_mig_t four[] = {
    {"a", 71680 * MIB, 0},
    {"b", 35840 * MIB, 1},
    {"c", 17920 * MIB, 2},
    {"d", 35840 * MIB, 3},
};

START_TEST(pick_smallest_fitting)
{
    ck_assert_int_eq(agent_mig_pick(four, 4, NULL, 20 * GIB, false), 1);
    ck_assert_int_eq(agent_mig_pick(four, 4, NULL, 17920 * MIB, false), 2);
    ck_assert_int_eq(agent_mig_pick(four, 4, NULL, 17920 * MIB + 1, false), 1);
    ck_assert_int_eq(agent_mig_pick(four, 4, NULL, 1, false), 2);
    ck_assert_int_eq(agent_mig_pick(four, 4, NULL, 40 * GIB, false), 0);
}
END_TEST

START_TEST(pick_skips_busy)
{
    bool busy[4] = {false, true, false, false};

    ck_assert_int_eq(agent_mig_pick(four, 4, busy, 20 * GIB, false), 3);
    busy[3] = true;
    ck_assert_int_eq(agent_mig_pick(four, 4, busy, 20 * GIB, false), 0);
    busy[2] = true;
    ck_assert_int_eq(agent_mig_pick(four, 4, busy, 1, false), 0);
}
END_TEST

START_TEST(pick_whole_takes_largest)
{
    bool busy[4] = {true, false, false, false};

    ck_assert_int_eq(agent_mig_pick(four, 4, NULL, 200 * GIB, true), 0);
    ck_assert_int_eq(agent_mig_pick(four, 4, busy, 200 * GIB, true), 1);
    busy[1] = true;
    ck_assert_int_eq(agent_mig_pick(four, 4, busy, 0, true), 3);
}
END_TEST

START_TEST(pick_none)
{
    bool busy[4] = {true, true, true, true};

    ck_assert_int_eq(agent_mig_pick(four, 4, NULL, 71680 * MIB + 1, false), -1);
    ck_assert_int_eq(agent_mig_pick(four, 4, busy, 1, false), -1);
    ck_assert_int_eq(agent_mig_pick(four, 4, busy, 0, true), -1);
    ck_assert_int_eq(agent_mig_pick(four, 0, NULL, 1, false), -1);
    ck_assert_int_eq(agent_mig_pick(four, 0, NULL, 0, true), -1);
}
END_TEST

/* ---- crater_nvml_migs against the stub ---- */

static crater_nvml_t *stub(const char *mig)
{
    crater_error_t err = {0};
    crater_nvml_t *n;

    if (mig)
        setenv("NVMLSTUB_MIG", mig, 1);
    n = crater_nvml_open(NVMLSTUB_PATH, &err);
    ck_assert_msg(n != NULL, "%s", err.text);
    return n;
}

START_TEST(migs_listed_in_index_order)
{
    crater_nvml_t *n = stub("0=71680,-,17920;1=off");
    crater_nvml_mig_t m[4];
    crater_error_t err = {0};
    size_t c = 99;

    ck_assert_int_eq(crater_nvml_migs(n, 0, m, 4, &c, &err), 0);
    ck_assert_uint_eq(c, 2); /* index 1 empty, 3..6 NOT_FOUND */
    ck_assert_str_eq(m[0].uuid, MIG_UUID(0, 0));
    ck_assert_uint_eq(m[0].memory_bytes, 71680 * MIB);
    ck_assert_uint_eq(m[0].index, 0);
    ck_assert_str_eq(m[1].uuid, MIG_UUID(0, 2));
    ck_assert_uint_eq(m[1].memory_bytes, 17920 * MIB);
    ck_assert_uint_eq(m[1].index, 2);
    crater_nvml_close(n);
}
END_TEST

START_TEST(migs_count_past_max)
{
    crater_nvml_t *n = stub("1=1000,2000,3000");
    crater_nvml_mig_t m[2];
    crater_error_t err = {0};
    size_t c = 0;

    memset(m, 0, sizeof(m));
    ck_assert_int_eq(crater_nvml_migs(n, 1, m, 1, &c, &err), 0);
    ck_assert_uint_eq(c, 3);
    ck_assert_str_eq(m[0].uuid, MIG_UUID(1, 0));
    ck_assert_uint_eq(m[0].memory_bytes, 1000 * MIB);
    ck_assert_str_eq(m[1].uuid, ""); /* untouched */
    ck_assert_int_eq(crater_nvml_migs(n, 1, NULL, 0, &c, &err), 0);
    ck_assert_uint_eq(c, 3);
    ck_assert_int_eq(crater_nvml_migs(n, 1, NULL, 1, &c, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    crater_nvml_close(n);
}
END_TEST

START_TEST(migs_mode_on_without_devices)
{
    crater_nvml_t *n = stub("0=");
    crater_nvml_mig_t m[2];
    crater_error_t err = {0};
    size_t c = 99;

    ck_assert_int_eq(crater_nvml_migs(n, 0, m, 2, &c, &err), 0);
    ck_assert_uint_eq(c, 0);
    crater_nvml_close(n);
}
END_TEST

START_TEST(migs_disabled)
{
    crater_nvml_t *n;
    crater_nvml_mig_t m[2];
    crater_error_t err = {0};
    size_t c = 99;

    setenv("NVMLSTUB_GPUS", "3", 1);
    n = stub("0=1000;1=off");
    ck_assert_int_eq(crater_nvml_migs(n, 1, m, 2, &c, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
    ck_assert_str_eq(err.text,
                     "GPU 1: MIG mode is disabled; run nvidia-smi -i 1 -mig "
                     "1, then create instances (nvidia-smi mig -i 1 -cgi "
                     "<profiles> -C)");
    ck_assert_uint_eq(c, 99);
    /* not listed: an H200 is MIG capable, its mode off */
    ck_assert_int_eq(crater_nvml_migs(n, 2, m, 2, &c, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
    ck_assert_ptr_nonnull(strstr(err.text, "GPU 2: MIG mode is disabled"));
    crater_nvml_close(n);
}
END_TEST

START_TEST(migs_pending_reset)
{
    crater_nvml_t *n = stub("0=pending");
    crater_nvml_mig_t m[2];
    crater_error_t err = {0};
    size_t c = 0;

    ck_assert_int_eq(crater_nvml_migs(n, 0, m, 2, &c, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
    ck_assert_str_eq(err.text,
                     "GPU 0: MIG mode is pending a GPU reset (nvidia-smi -i "
                     "0 -r), then create instances (nvidia-smi mig -i 0 "
                     "-cgi <profiles> -C)");
    crater_nvml_close(n);
}
END_TEST

START_TEST(migs_not_capable)
{
    crater_nvml_t *n;
    crater_nvml_mig_t m[2];
    crater_error_t err = {0};
    size_t c = 0;

    setenv("NVMLSTUB_MODEL", "NVIDIA L40S", 1);
    n = stub(NULL);
    ck_assert_int_eq(crater_nvml_migs(n, 0, m, 2, &c, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
    ck_assert_str_eq(err.text, "GPU 0 does not support MIG");
    crater_nvml_close(n);
    setenv("NVMLSTUB_MODEL", "NVIDIA H200", 1);
    n = stub("1=unsupported");
    ck_assert_int_eq(crater_nvml_migs(n, 1, m, 2, &c, &err), -1);
    ck_assert_str_eq(err.text, "GPU 1 does not support MIG");
    ck_assert_int_eq(crater_nvml_migs(n, 2, m, 2, &c, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL); /* no GPU 2 */
    crater_nvml_close(n);
}
END_TEST

/* ---- the stub's MIG entry points answer like NVML ---- */

typedef int (*f_mode)(void *, unsigned *, unsigned *);
typedef int (*f_max)(void *, unsigned *);
typedef int (*f_mh)(void *, unsigned, void **);
typedef int (*f_str)(void *, char *, unsigned);
typedef int (*f_h)(unsigned, void **);

struct stubfns {
    void *lib;
    int (*init)(void), (*shut)(void);
    f_h handle;
    f_mode mode;
    f_max max;
    f_mh mig;
    f_str uuid, name;
};

static struct stubfns stub_fns(void)
{
    struct stubfns f = {.lib = dlopen(NVMLSTUB_PATH, RTLD_NOW | RTLD_LOCAL)};

    ck_assert_ptr_nonnull(f.lib);
    *(void **)&f.init = dlsym(f.lib, "nvmlInit_v2");
    *(void **)&f.shut = dlsym(f.lib, "nvmlShutdown");
    *(void **)&f.handle = dlsym(f.lib, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&f.mode = dlsym(f.lib, "nvmlDeviceGetMigMode");
    *(void **)&f.max = dlsym(f.lib, "nvmlDeviceGetMaxMigDeviceCount");
    *(void **)&f.mig = dlsym(f.lib, "nvmlDeviceGetMigDeviceHandleByIndex");
    *(void **)&f.uuid = dlsym(f.lib, "nvmlDeviceGetUUID");
    *(void **)&f.name = dlsym(f.lib, "nvmlDeviceGetName");
    ck_assert(f.init && f.shut && f.handle && f.mode && f.max && f.mig && f.uuid
              && f.name);
    return f;
}

START_TEST(stub_mig_codes)
{
    struct stubfns f;
    void *g0 = NULL, *g1 = NULL, *m = NULL;
    unsigned cur = 9, pend = 9, max = 9;
    char buf[96];

    setenv("NVMLSTUB_MIG", "0=1000,-,3000;1=off", 1);
    f = stub_fns();
    ck_assert_int_eq(f.mode(g0, &cur, &pend), 1); /* UNINITIALIZED */
    ck_assert_int_eq(f.init(), 0);
    ck_assert_int_eq(f.handle(0, &g0), 0);
    ck_assert_int_eq(f.handle(1, &g1), 0);
    ck_assert_int_eq(f.mode(NULL, &cur, &pend), 2); /* INVALID_ARGUMENT */
    ck_assert_int_eq(f.mode(g0, &cur, NULL), 2);
    ck_assert_int_eq(f.mode(g0, &cur, &pend), 0);
    ck_assert_uint_eq(cur, 1);
    ck_assert_uint_eq(pend, 1);
    ck_assert_int_eq(f.mode(g1, &cur, &pend), 0);
    ck_assert_uint_eq(cur, 0);
    ck_assert_uint_eq(pend, 0);
    ck_assert_int_eq(f.max(g0, NULL), 2);
    ck_assert_int_eq(f.max(g0, &max), 0);
    ck_assert_uint_eq(max, 7);
    ck_assert_int_eq(f.max(g1, &max), 0);
    ck_assert_uint_eq(max, 0);
    ck_assert_int_eq(f.mig(g1, 0, &m), 3); /* NOT_SUPPORTED: MIG off */
    ck_assert_int_eq(f.mig(g0, 0, NULL), 2);
    ck_assert_int_eq(f.mig(g0, 7, &m), 2);
    ck_assert_int_eq(f.mig(g0, 1, &m), 6); /* NOT_FOUND */
    ck_assert_int_eq(f.mig(g0, 3, &m), 6);
    ck_assert_int_eq(f.mig(g0, 2, &m), 0);
    ck_assert_int_eq(f.uuid(m, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, MIG_UUID(0, 2));
    ck_assert_int_eq(f.name(m, buf, sizeof(buf)), 2); /* GPU handles only */
    ck_assert_int_eq(f.mode(m, &cur, &pend), 2);
    ck_assert_int_eq(f.shut(), 0);
    ck_assert_int_eq(f.mig(g0, 2, &m), 1);
    ck_assert_int_eq(f.uuid(m, buf, sizeof(buf)), 1);
    dlclose(f.lib);
}
END_TEST

/* ---- the agent's setup of a mig task ---- */

/* Set up t (one GPU, need bytes) in a; CUDA_VISIBLE_DEVICES, or NULL. */
static const char *start(crater_agent_t *a,
                         atask_t *t,
                         uint64_t need,
                         bool whole,
                         crater_error_t *err)
{
    static char vis[96];
    crater_proto_task_t task;
    const char *v;
    int rc;

    memset(&task, 0, sizeof(task));
    task.placement.whole_gpus = whole;
    task.limits.gpu_isolation = CRATER_GPU_ISO_MIG;
    ck_assert_int_eq(crater_proto_task_setenv(&task,
                                              "CUDA_VISIBLE_DEVICES",
                                              "GPU-5eed0000-0000-4000-"
                                              "8000-000000000000"),
                     0);
    t->job = "j";
    t->state = AT_RUNNING;
    t->ngpus = t->ngpus ? t->ngpus : 1;
    t->gpu_bytes[0] = need;
    a->tasks[a->ntasks++] = t; /* task_start adds it before the setup */
    rc = agent_slice_setup(a, t, &task, err);
    v = crater_proto_task_getenv(&task, "CUDA_VISIBLE_DEVICES");
    snprintf(vis, sizeof(vis), "%s", v ? v : "");
    ck_assert_ptr_null(crater_proto_task_getenv(&task, "LD_PRELOAD"));
    crater_proto_task_clear(&task);
    return rc == 0 ? vis : NULL;
}

START_TEST(agent_picks_and_holds)
{
    crater_agent_t a;
    atask_t t[5], *tasks[5];
    crater_error_t err = {0};

    memset(&a, 0, sizeof(a));
    memset(t, 0, sizeof(t));
    a.tasks = tasks;
    a.nvml = stub("0=71680,35840,17920,35840");
    ck_assert_str_eq(start(&a, &t[0], 20 * GIB, false, &err), MIG_UUID(0, 1));
    ck_assert_str_eq(t[0].mig_uuid, MIG_UUID(0, 1));
    ck_assert(!t[0].watch);
    ck_assert_str_eq(start(&a, &t[1], 20 * GIB, false, &err), MIG_UUID(0, 3));
    ck_assert_str_eq(start(&a, &t[2], 20 * GIB, false, &err), MIG_UUID(0, 0));
    ck_assert_ptr_null(start(&a, &t[3], 20 * GIB, false, &err));
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
    ck_assert_str_eq(err.field, "resources.gpu.isolation");
    ck_assert_str_eq(err.text,
                     "no free MIG device with 20480 MiB on GPU 0 (#0 71680 "
                     "MiB busy, #1 35840 MiB busy, #2 17920 MiB, #3 35840 "
                     "MiB busy)");
    ck_assert_str_eq(t[3].mig_uuid, "");
    t[3].state = AT_EXITED; /* failed to start */
    t[1].state = AT_EXITED; /* #3 is free again */
    ck_assert_str_eq(start(&a, &t[4], 20 * GIB, false, &err), MIG_UUID(0, 3));
    crater_nvml_close(a.nvml);
}
END_TEST

START_TEST(agent_whole_gpu_takes_largest)
{
    crater_agent_t a;
    atask_t t[2], *tasks[2];
    crater_error_t err = {0};

    memset(&a, 0, sizeof(a));
    memset(t, 0, sizeof(t));
    a.tasks = tasks;
    a.nvml = stub("0=17920,71680,35840");
    ck_assert_str_eq(start(&a, &t[0], 140 * GIB, true, &err), MIG_UUID(0, 1));
    ck_assert_str_eq(start(&a, &t[1], 140 * GIB, true, &err), MIG_UUID(0, 2));
    crater_nvml_close(a.nvml);
}
END_TEST

START_TEST(agent_refuses)
{
    crater_agent_t a;
    atask_t t[4], *tasks[4];
    crater_error_t err = {0};

    memset(&a, 0, sizeof(a));
    memset(t, 0, sizeof(t));
    a.tasks = tasks;
    t[0].ngpus = 2;
    ck_assert_ptr_null(start(&a, &t[0], GIB, false, &err));
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_str_eq(err.field, "resources.gpu.isolation");
    ck_assert_ptr_nonnull(strstr(err.text, "this task has 2"));
    ck_assert_ptr_null(start(&a, &t[1], GIB, false, &err)); /* no NVML */
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
    a.nvml = stub("0=;1=off");
    ck_assert_ptr_null(start(&a, &t[2], GIB, false, &err));
    ck_assert_ptr_nonnull(strstr(err.text, "has no MIG devices"));
    ck_assert_str_eq(err.field, "resources.gpu.isolation");
    t[3].gpu[0] = 1;
    ck_assert_ptr_null(start(&a, &t[3], GIB, false, &err));
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
    ck_assert_str_eq(err.field, "resources.gpu.isolation");
    ck_assert_ptr_nonnull(strstr(err.text, "GPU 1: MIG mode is disabled"));
    crater_nvml_close(a.nvml);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mig");
    TCase *pick = tcase_create("pick"), *nvml = tcase_create("nvml");
    TCase *agent = tcase_create("agent");
    SRunner *sr;
    int failed;

    tcase_add_test(pick, pick_smallest_fitting);
    tcase_add_test(pick, pick_skips_busy);
    tcase_add_test(pick, pick_whole_takes_largest);
    tcase_add_test(pick, pick_none);
    tcase_add_checked_fixture(nvml, setup, NULL);
    tcase_add_test(nvml, migs_listed_in_index_order);
    tcase_add_test(nvml, migs_count_past_max);
    tcase_add_test(nvml, migs_mode_on_without_devices);
    tcase_add_test(nvml, migs_disabled);
    tcase_add_test(nvml, migs_pending_reset);
    tcase_add_test(nvml, migs_not_capable);
    tcase_add_test(nvml, stub_mig_codes);
    tcase_add_checked_fixture(agent, setup, NULL);
    tcase_add_test(agent, agent_picks_and_holds);
    tcase_add_test(agent, agent_whole_gpu_takes_largest);
    tcase_add_test(agent, agent_refuses);
    suite_add_tcase(s, pick);
    suite_add_tcase(s, nvml);
    suite_add_tcase(s, agent);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
