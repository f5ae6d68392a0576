/* test_ctxprobe.c - the measured CUDA context overhead (src/agent/ctxprobe.c)
 * against the two stubs, which agree like a real driver does: the stub
 * libcuda (src/gpuslice/stub_cuda.c) takes the NVML UUIDs
 * (STUB_CUDA_UUIDS) and writes what each process uses per GPU into a
 * directory (STUB_CUDA_NVML_DIR), which the stub NVML
 * (tests/data/nvmlstub) lists as running processes (NVMLSTUB_PROCS_DIR).
 *
 * A context costs STUB_CUDA_CTX_BYTES = 123 MiB there, so the measurement
 * must be exactly that on each GPU; a UUID no CUDA device has, a missing
 * driver, a child NVML does not list on that GPU each fail with their own
 * error; the child is always reaped. Then the cache file, the agent's
 * start-up pass (once per model, from the cache the second time, its log
 * lines) and the overhead a slice task is given.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/internal.h"
#include "agent/nvml.h"
#include "crater/log.h"
#include "crater/proto.h"

#define MIB (1ull << 20)
#define CTX (123 * MIB)
#define UUID0 "GPU-5eed0000-0000-4000-8000-000000000000"
#define UUID1 "GPU-5eed0000-0000-4000-8000-000000000001"

static char dir[64];
static char logbuf[8192];

static void capture(int level, const char *msg, void *arg)
{
    size_t n = strlen(logbuf);

    (void)arg;
    snprintf(logbuf + n,
             sizeof(logbuf) - n,
             "%s %s\n",
             level == LOG_WARNING ? "W" : "I",
             msg);
}

static void setup(void)
{
    char ctx[32];

    snprintf(dir, sizeof(dir), "/tmp/ctxprobe-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(ctx, sizeof(ctx), "%llu", (unsigned long long)CTX);
    setenv("STUB_CUDA_UUIDS", UUID0 "," UUID1, 1);
    setenv("STUB_CUDA_CTX_BYTES", ctx, 1);
    setenv("STUB_CUDA_NVML_DIR", dir, 1);
    setenv("NVMLSTUB_PROCS_DIR", dir, 1);
    unsetenv("STUB_CUDA_DEVICES");
    unsetenv("NVMLSTUB_GPUS");
    unsetenv("NVMLSTUB_MODEL");
    unsetenv("NVMLSTUB_MIG");
    unsetenv("CRATER_CUDA_LIB");
    logbuf[0] = '\0';
    crater_log_set_handler(capture, NULL);
}

/* Files left in dir (the stub's per-process files and the cache). */
static int entries(const char *prefix)
{
    struct dirent *e;
    DIR *d = opendir(dir);
    int n = 0;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)))
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static void teardown(void)
{
    char path[512];
    struct dirent *e;
    DIR *d = opendir(dir);

    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || e->d_name[1] == '.'))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
    crater_log_set_handler(NULL, NULL);
}

static crater_nvml_t *nvml(void)
{
    crater_error_t err = {0};
    crater_nvml_t *n = crater_nvml_open(NVMLSTUB_PATH, &err);

    ck_assert_msg(n != NULL, "%s", err.text);
    return n;
}

/* No child of this process is left, zombie or not. */
static void no_children(void)
{
    int st;

    errno = 0;
    ck_assert_int_eq(waitpid(-1, &st, WNOHANG), -1);
    ck_assert_int_eq(errno, ECHILD);
}

/* ---- agent_ctx_measure ---- */

START_TEST(measures_each_gpu)
{
    crater_nvml_t *n = nvml();
    crater_error_t err = {0};
    uint64_t b = 0;

    ck_assert_msg(agent_ctx_measure(n, 0, UUID0, STUB_CUDA_PATH, &b, &err) == 0,
                  "%s",
                  err.text);
    ck_assert_uint_eq(b, CTX);
    no_children();
    b = 0;
    ck_assert_msg(agent_ctx_measure(n, 1, UUID1, STUB_CUDA_PATH, &b, &err) == 0,
                  "%s",
                  err.text);
    ck_assert_uint_eq(b, CTX);
    no_children();
    /* the child released its context: the stub removed its file */
    ck_assert_int_eq(entries("GPU-"), 0);
    crater_nvml_close(n);
}
END_TEST

START_TEST(measures_with_another_context_cost)
{
    crater_nvml_t *n = nvml();
    crater_error_t err = {0};
    uint64_t b = 0;

    setenv("STUB_CUDA_CTX_BYTES", "1048576", 1); /* below the 2 MiB probe */
    ck_assert_int_eq(agent_ctx_measure(n, 0, UUID0, STUB_CUDA_PATH, &b, &err),
                     0);
    ck_assert_uint_eq(b, 1048576);
    setenv("STUB_CUDA_CTX_BYTES", "0", 1);
    ck_assert_int_eq(agent_ctx_measure(n, 0, UUID0, STUB_CUDA_PATH, &b, &err),
                     0);
    ck_assert_uint_eq(b, 0);
    no_children();
    crater_nvml_close(n);
}
END_TEST

START_TEST(unknown_uuid)
{
    crater_nvml_t *n = nvml();
    crater_error_t err = {0};
    uint64_t b = 77;
    const char *u = "GPU-5eed0000-0000-4000-8000-0000000000ff";

    ck_assert_int_eq(agent_ctx_measure(n, 0, u, STUB_CUDA_PATH, &b, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    ck_assert_str_eq(err.text,
                     "no CUDA device has UUID "
                     "GPU-5eed0000-0000-4000-8000-0000000000ff (2 visible "
                     "with CUDA_VISIBLE_DEVICES set to it)");
    ck_assert_uint_eq(b, 77);
    no_children();
    /* the stub's own UUIDs are not NVML's: nothing matches either */
    unsetenv("STUB_CUDA_UUIDS");
    ck_assert_int_eq(agent_ctx_measure(n, 0, UUID0, STUB_CUDA_PATH, &b, &err),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    no_children();
    crater_nvml_close(n);
}
END_TEST

START_TEST(bad_uuid)
{
    crater_nvml_t *n = nvml();
    crater_error_t err = {0};
    uint64_t b = 0;

    ck_assert_int_eq(agent_ctx_measure(n,
                                       0,
                                       "GPU-zz",
                                       STUB_CUDA_PATH,
                                       &b,
                                       &err),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    no_children(); /* refused before forking */
    crater_nvml_close(n);
}
END_TEST

START_TEST(no_driver)
{
    crater_nvml_t *n = nvml();
    crater_error_t err = {0};
    uint64_t b = 0;

    ck_assert_int_eq(agent_ctx_measure(n,
                                       0,
                                       UUID0,
                                       "/nonexistent/libcuda.so.1",
                                       &b,
                                       &err),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    ck_assert_msg(strstr(err.text, "cannot load the CUDA driver: ")
                      && strstr(err.text, "/nonexistent/libcuda.so.1"),
                  "%s",
                  err.text);
    no_children();
    /* a library that is not a CUDA driver */
    ck_assert_int_eq(agent_ctx_measure(n, 0, UUID0, NVMLSTUB_PATH, &b, &err),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_EIO);
    ck_assert_msg(strstr(err.text,
                         "has no cuDeviceGetUuid_v2: not a CUDA "
                         "driver"),
                  "%s",
                  err.text);
    no_children();
    crater_nvml_close(n);
}
END_TEST

START_TEST(child_not_on_that_gpu)
{
    crater_nvml_t *n = nvml();
    crater_error_t err = {0};
    uint64_t b = 0;

    /* the context is on GPU 1; NVML GPU 0 never lists the child */
    ck_assert_int_eq(agent_ctx_measure(n, 0, UUID1, STUB_CUDA_PATH, &b, &err),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
    ck_assert_msg(strstr(err.text, "NVML does not list the CUDA context probe")
                      && strstr(err.text, "on GPU 0 after 3000 ms"),
                  "%s",
                  err.text);
    no_children();
    ck_assert_int_eq(entries("GPU-"), 0);
    crater_nvml_close(n);
}
END_TEST

/* ---- the cache file ---- */

START_TEST(cache_round_trip)
{
    char path[128], bad[128];
    crater_error_t err = {0};
    uint64_t b = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/c.json", dir);
    ck_assert_int_eq(agent_ctx_cache_get(path, "m|1", &b, &err), 0);
    ck_assert_int_eq(agent_ctx_cache_put(path, "m|1", 5 * MIB, &err), 0);
    ck_assert_int_eq(agent_ctx_cache_put(path, "n|2", 7 * MIB, &err), 0);
    ck_assert_int_eq(agent_ctx_cache_put(path, "m|1", 6 * MIB, &err), 0);
    ck_assert_int_eq(agent_ctx_cache_get(path, "m|1", &b, &err), 1);
    ck_assert_uint_eq(b, 6 * MIB);
    ck_assert_int_eq(agent_ctx_cache_get(path, "n|2", &b, &err), 1);
    ck_assert_uint_eq(b, 7 * MIB);
    ck_assert_int_eq(agent_ctx_cache_get(path, "m|2", &b, &err), 0);
    ck_assert_int_eq(entries("c.json.tmp"), 0);

    snprintf(bad, sizeof(bad), "%s/bad.json", dir);
    f = fopen(bad, "w");
    fputs("{\"m|1\": \"lots\", \"n|1\": -3}\n", f);
    fclose(f);
    ck_assert_int_eq(agent_ctx_cache_get(bad, "m|1", &b, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ETYPE);
    ck_assert_str_eq(err.field, "m|1");
    ck_assert_int_eq(agent_ctx_cache_get(bad, "n|1", &b, &err), -1);
    f = fopen(bad, "w");
    fputs("{\"m|1\": 3,\n", f);
    fclose(f);
    ck_assert_int_eq(agent_ctx_cache_get(bad, "m|1", &b, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EPARSE);
    ck_assert_msg(strncmp(err.text, bad, strlen(bad)) == 0, "%s", err.text);
    /* put replaces a file it cannot read */
    ck_assert_int_eq(agent_ctx_cache_put(bad, "m|1", 9, &err), 0);
    ck_assert_int_eq(agent_ctx_cache_get(bad, "m|1", &b, &err), 1);
    ck_assert_uint_eq(b, 9);
}
END_TEST

/* ---- the agent's pass at start ---- */

/* An agent with two GPUs of the given models, NVML from the stub. */
static void agent_init(crater_agent_t *a,
                       crater_gpu_t *g,
                       const crater_config_t *cfg,
                       const char *m0,
                       const char *m1)
{
    memset(a, 0, sizeof(*a));
    memset(g, 0, 2 * sizeof(*g));
    g[0].model = (char *)m0;
    g[0].uuid = (char *)UUID0;
    g[1].model = (char *)m1;
    g[1].uuid = (char *)UUID1;
    a->node.gpus = g;
    a->node.ngpus = 2;
    a->cfg = cfg;
    a->data_dir = dir;
    a->nvml = nvml();
}

START_TEST(agent_measures_once_per_model_then_caches)
{
    static crater_config_t cfg;
    char path[128];
    crater_error_t err = {0};
    crater_agent_t a;
    crater_gpu_t g[2];
    uint64_t b = 0;

    cfg.scheduler.gpu_context_overhead = 100 * MIB;
    setenv("CRATER_CUDA_LIB", STUB_CUDA_PATH, 1);
    agent_init(&a, g, &cfg, "h200-test", "h200-test");
    ck_assert_int_eq(agent_ctx_overheads(&a), 2);
    ck_assert_uint_eq(a.ctx_overhead[0], CTX);
    ck_assert_uint_eq(a.ctx_overhead[1], CTX);
    ck_assert_uint_eq(agent_ctx_overhead(&a, 1), CTX);
    ck_assert_uint_eq(agent_ctx_overhead(&a, 2), 100 * MIB);
    ck_assert_str_eq(logbuf,
                     "I GPU model h200-test, driver 580.159.04: a CUDA "
                     "context costs 123 MiB (measured; "
                     "scheduler.gpuContextOverhead is 100 MiB)\n"
                     "W GPU model h200-test: a CUDA context costs more "
                     "than scheduler.gpuContextOverhead (123 > 100 MiB), so "
                     "the scheduler under-charges every GPU process; raise "
                     "scheduler.gpuContextOverhead to at least 123 MiB\n");
    snprintf(path, sizeof(path), "%s/gpu-context-overhead.json", dir);
    ck_assert_int_eq(agent_ctx_cache_get(path,
                                         "h200-test|580.159.04",
                                         &b,
                                         &err),
                     1);
    ck_assert_uint_eq(b, CTX);
    crater_nvml_close(a.nvml);
    no_children();

    /* again, without a driver: the figure comes from the file */
    setenv("CRATER_CUDA_LIB", "/nonexistent/libcuda.so.1", 1);
    cfg.scheduler.gpu_context_overhead = 200 * MIB;
    logbuf[0] = '\0';
    agent_init(&a, g, &cfg, "h200-test", "h200-test");
    ck_assert_int_eq(agent_ctx_overheads(&a), 2);
    ck_assert_uint_eq(a.ctx_overhead[0], CTX);
    ck_assert_uint_eq(a.ctx_overhead[1], CTX);
    ck_assert_str_eq(logbuf,
                     "I GPU model h200-test, driver 580.159.04: a CUDA "
                     "context costs 123 MiB (measured earlier, "
                     "gpu-context-overhead.json; "
                     "scheduler.gpuContextOverhead is 200 MiB)\n");
    crater_nvml_close(a.nvml);
    no_children();
}
END_TEST

START_TEST(agent_failure_is_a_warning)
{
    static crater_config_t cfg;
    crater_agent_t a;
    crater_gpu_t g[2];

    cfg.scheduler.gpu_context_overhead = 300 * MIB;
    setenv("CRATER_CUDA_LIB", STUB_CUDA_PATH, 1);
    /* two models: each measured on its own first GPU */
    agent_init(&a, g, &cfg, "model-a", "model-b");
    ck_assert_int_eq(agent_ctx_overheads(&a), 2);
    ck_assert_uint_eq(a.ctx_overhead[0], CTX);
    ck_assert_uint_eq(a.ctx_overhead[1], CTX);
    ck_assert_ptr_null(strstr(logbuf, "W "));
    crater_nvml_close(a.nvml);

    /* model-c has no cache entry and no driver: configured value */
    setenv("CRATER_CUDA_LIB", "/nonexistent/libcuda.so.1", 1);
    logbuf[0] = '\0';
    agent_init(&a, g, &cfg, "model-a", "model-c");
    ck_assert_int_eq(agent_ctx_overheads(&a), 1);
    ck_assert_uint_eq(a.ctx_overhead[0], CTX);
    ck_assert_uint_eq(a.ctx_overhead[1], 0);
    ck_assert_uint_eq(agent_ctx_overhead(&a, 1), 300 * MIB);
    ck_assert_msg(strstr(logbuf,
                         "W GPU model model-c, driver 580.159.04: cannot "
                         "measure a CUDA context on GPU 1 (cannot load the "
                         "CUDA driver: "),
                  "%s",
                  logbuf);
    ck_assert_msg(strstr(logbuf, "using scheduler.gpuContextOverhead, 300 MiB"),
                  "%s",
                  logbuf);
    crater_nvml_close(a.nvml);

    /* no NVML (a --hardware node): nothing at all */
    logbuf[0] = '\0';
    memset(&a, 0, sizeof(a));
    a.data_dir = dir;
    ck_assert_int_eq(agent_ctx_overheads(&a), 0);
    ck_assert_str_eq(logbuf, "");
    no_children();
}
END_TEST

/* ---- what a slice task is given ---- */

START_TEST(slice_task_gets_largest_overhead)
{
    static crater_config_t cfg;
    crater_error_t err = {0};
    crater_agent_t a;
    atask_t t, *tasks[1];
    crater_proto_task_t task;

    memset(&a, 0, sizeof(a));
    memset(&t, 0, sizeof(t));
    memset(&task, 0, sizeof(task));
    cfg.scheduler.gpu_context_overhead = 300 * MIB;
    a.cfg = &cfg;
    a.tasks = tasks;
    a.ctx_overhead[3] = 123 * MIB;
    a.ctx_overhead[5] = 456 * MIB;
    setenv("CRATER_GPUSLICE_LIB", STUB_CUDA_PATH, 1); /* any readable file */
    t.job = "j";
    snprintf(t.cg, sizeof(t.cg), "ctxprobe-%d", (int)getpid());
    t.ngpus = 2;
    t.gpu[0] = 3, t.gpu[1] = 5;
    t.gpu_bytes[0] = t.gpu_bytes[1] = 1024 * MIB;
    task.placement.ngpus = 2;
    task.placement.gpus[0] = (crater_proto_gpu_t){.index = 3,
                                                  .uuid = UUID0,
                                                  .memory_bytes = 1024 * MIB};
    task.placement.gpus[1] = (crater_proto_gpu_t){.index = 5,
                                                  .uuid = UUID1,
                                                  .memory_bytes = 1024 * MIB};
    ck_assert_msg(agent_slice_setup(&a, &t, &task, &err) == 0, "%s", err.text);
    ck_assert_str_eq(crater_proto_task_getenv(&task,
                                              "CRATER_GPUSLICE_CTX_OVERHEAD"),
                     "478150656"); /* 456 MiB */
    agent_slice_cleanup(&t);
    /* one GPU not measured: the configured 300 MiB is the larger */
    a.ctx_overhead[5] = 0;
    ck_assert_int_eq(agent_slice_setup(&a, &t, &task, &err), 0);
    ck_assert_str_eq(crater_proto_task_getenv(&task,
                                              "CRATER_GPUSLICE_CTX_OVERHEAD"),
                     "314572800");
    agent_slice_cleanup(&t);
    for (size_t i = 0; i < task.nenv; i++) {
        free(task.env[i].key);
        free(task.env[i].value);
    }
    free(task.env);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ctxprobe");
    TCase *m = tcase_create("measure"), *c = tcase_create("cache");
    TCase *ag = tcase_create("agent");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(m, setup, teardown);
    tcase_set_timeout(m, 30);
    tcase_add_test(m, measures_each_gpu);
    tcase_add_test(m, measures_with_another_context_cost);
    tcase_add_test(m, unknown_uuid);
    tcase_add_test(m, bad_uuid);
    tcase_add_test(m, no_driver);
    tcase_add_test(m, child_not_on_that_gpu);
    tcase_add_checked_fixture(c, setup, teardown);
    tcase_add_test(c, cache_round_trip);
    tcase_add_checked_fixture(ag, setup, teardown);
    tcase_set_timeout(ag, 30);
    tcase_add_test(ag, agent_measures_once_per_model_then_caches);
    tcase_add_test(ag, agent_failure_is_a_warning);
    tcase_add_test(ag, slice_task_gets_largest_overhead);
    suite_add_tcase(s, m);
    suite_add_tcase(s, c);
    suite_add_tcase(s, ag);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
