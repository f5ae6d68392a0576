/* test_cgroup.c - the cgroup layer.
 *
 * The v2 writer runs against a FAKE cgroupfs (plain files in a temp dir:
 * cgroup.controllers, and cpu.max.burst / memory.swap.max in the parent to
 * say "this kernel has them"), so exact file contents can be asserted on
 * any machine. The real hierarchy under /sys/fs/cgroup (v1 here, v2 on the
 * GPU machine) gets a live test: limits read back, a child attaches itself
 * through the procs paths, is listed, killed and reaped, and a memory hog
 * is OOM-killed. Without write access those tests print "SKIP: ..." and
 * pass.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/cgroup.h"

static char root[64];

static void put(const char *rel, const char *text)
{
    char p[512];
    FILE *f;

    snprintf(p, sizeof(p), "%s/%s", root, rel);
    f = fopen(p, "w");
    ck_assert_msg(f != NULL, "create %s", p);
    fputs(text, f);
    fclose(f);
}

/* Contents of root/rel without the trailing newline; static buffer. */
static const char *get(const char *rel)
{
    static char buf[512];
    char p[512];
    FILE *f;
    size_t n;

    snprintf(p, sizeof(p), "%s/%s", root, rel);
    f = fopen(p, "r");
    if (!f)
        return NULL;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (n && buf[n - 1] == '\n')
        buf[n - 1] = '\0';
    return buf;
}

static bool there(const char *rel)
{
    char p[512];

    snprintf(p, sizeof(p), "%s/%s", root, rel);
    return access(p, F_OK) == 0;
}

/* A fake v2 root; features: whether the parent advertises cpu.max.burst,
   memory.swap.max and cgroup.kill. */
static void fake_v2(const char *controllers, bool features)
{
    char p[512];

    strcpy(root, "/tmp/crater-cgfake-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    put("cgroup.controllers", controllers);
    put("cgroup.subtree_control", "");
    snprintf(p, sizeof(p), "%s/crater", root);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    if (features) {
        put("crater/cpu.max.burst", "0\n");
        put("crater/memory.swap.max", "max\n");
    }
}

static void rm_fake(void)
{
    char cmd[256];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
}

static crater_cg_limits_t full_limits(void)
{
    crater_cg_limits_t lim = {
        .cpu_quota_milli = 1500,
        .cpu_burst_us = 50000,
        .mem_bytes = 64ull << 20,
        .cpuset_cpus = "0-15",
        .cpuset_mems = "0",
        .io = {{8, 0, 1048576, 2097152, 100, 200}},
        .nio = 1,
        .pids_max = 4096,
    };
    return lim;
}

START_TEST(v2_fake_writes_exact_files)
{
    crater_cg_limits_t lim = full_limits();
    crater_error_t err;
    crater_cgroups_t *cg;

    fake_v2("cpuset cpu io memory pids\n", true);
    cg = crater_cg_open(root, "crater", &err);
    ck_assert_msg(cg != NULL, "%s", err.text);
    ck_assert_int_eq(crater_cg_version(cg), CRATER_CG_V2);
    ck_assert_uint_eq(crater_cg_controllers(cg),
                      CRATER_CG_CPU | CRATER_CG_CPUSET | CRATER_CG_MEMORY
                          | CRATER_CG_IO | CRATER_CG_PIDS);
    ck_assert_str_eq(get("cgroup.subtree_control"),
                     "+cpu +io +memory +cpuset +pids");
    ck_assert_str_eq(get("crater/cgroup.subtree_control"),
                     "+cpu +io +memory +cpuset +pids");
    ck_assert_msg(crater_cg_create(cg, "job-1.0", &lim, &err) == 0,
                  "%s",
                  err.text);
    ck_assert_str_eq(get("crater/job-1.0/cpu.max"), "150000 100000");
    ck_assert_str_eq(get("crater/job-1.0/cpu.max.burst"), "50000");
    ck_assert_str_eq(get("crater/job-1.0/memory.max"), "67108864");
    ck_assert_str_eq(get("crater/job-1.0/memory.swap.max"), "0");
    ck_assert_str_eq(get("crater/job-1.0/io.max"),
                     "8:0 rbps=1048576 wbps=2097152 riops=100 wiops=200");
    ck_assert_str_eq(get("crater/job-1.0/cpuset.cpus"), "0-15");
    ck_assert_str_eq(get("crater/job-1.0/cpuset.mems"), "0");
    ck_assert_str_eq(get("crater/job-1.0/pids.max"), "4096");
    crater_cg_close(cg);
    rm_fake();
}
END_TEST

START_TEST(v2_fake_procs_events_usage_destroy)
{
    crater_cg_limits_t lim = {.mem_bytes = 1 << 20};
    crater_error_t err;
    crater_cgroups_t *cg;
    char **paths;
    size_t n;
    pid_t pids[4];
    uint64_t oom, cpu, mem;
    char want[512];

    fake_v2("cpu memory\n", true);
    cg = crater_cg_open(root, "crater", &err);
    ck_assert_ptr_nonnull(cg);
    ck_assert_int_eq(crater_cg_create(cg, "t", &lim, &err), 0);
    ck_assert_int_eq(crater_cg_procs_paths(cg, "t", &paths, &n, &err), 0);
    ck_assert_uint_eq(n, 1);
    snprintf(want, sizeof(want), "%s/crater/t/cgroup.procs", root);
    ck_assert_str_eq(paths[0], want);
    crater_cg_paths_free(paths, n);

    ck_assert_int_eq(crater_cg_attach(cg, "t", 4242, &err), 0);
    ck_assert_str_eq(get("crater/t/cgroup.procs"), "4242");
    put("crater/t/cgroup.procs", "123\n456\n789\n");
    ck_assert_int_eq(crater_cg_pids(cg, "t", pids, 2, &n, &err), 0);
    ck_assert_uint_eq(n, 3); /* all counted, first 2 stored */
    ck_assert_int_eq(pids[0], 123);
    ck_assert_int_eq(pids[1], 456);

    put("crater/t/memory.events",
        "low 0\nhigh 0\nmax 17\noom 3\noom_kill 2\noom_group_kill 0\n");
    ck_assert_int_eq(crater_cg_oom_kills(cg, "t", &oom, &err), 0);
    ck_assert_uint_eq(oom, 2);
    put("crater/t/cpu.stat", "usage_usec 1500\nuser_usec 1000\n");
    put("crater/t/memory.current", "4096\n");
    ck_assert_int_eq(crater_cg_usage(cg, "t", &cpu, &mem, &err), 0);
    ck_assert_uint_eq(cpu, 1500000);
    ck_assert_uint_eq(mem, 4096);

    ck_assert_int_eq(crater_cg_destroy(cg, "t", &err), 0);
    ck_assert(!there("crater/t"));
    ck_assert_int_eq(crater_cg_destroy(cg, "t", &err), 0); /* idempotent */
    crater_cg_close(cg);
    rm_fake();
}
END_TEST

/* A reused cgroup (crater_cg_update with the limits it had): only what
   differs is written, a limit no longer asked for goes back to the
   kernel's default. The sentinel shows a file left alone. */
START_TEST(v2_fake_update_writes_only_changes)
{
    crater_cg_limits_t a = {.cpu_quota_milli = 500,
                            .mem_bytes = 16 << 20,
                            .pids_max = 100},
                       b = a, c = {0};
    crater_error_t err;
    crater_cgroups_t *cg;

    fake_v2("cpu memory pids\n", true);
    cg = crater_cg_open(root, "crater", &err);
    ck_assert_ptr_nonnull(cg);
    ck_assert_int_eq(crater_cg_update(cg, "p-1", &a, NULL, &err), 0);
    ck_assert_str_eq(get("crater/p-1/cpu.max"), "50000 100000");
    ck_assert_str_eq(get("crater/p-1/pids.max"), "100");
    put("crater/p-1/cpu.max", "sentinel");
    put("crater/p-1/memory.max", "sentinel");
    b.pids_max = 200; /* only pids differs */
    ck_assert_int_eq(crater_cg_update(cg, "p-1", &b, &a, &err), 0);
    ck_assert_str_eq(get("crater/p-1/cpu.max"), "sentinel");
    ck_assert_str_eq(get("crater/p-1/memory.max"), "sentinel");
    ck_assert_str_eq(get("crater/p-1/pids.max"), "200");
    ck_assert_int_eq(crater_cg_update(cg, "p-1", &c, &b, &err), 0);
    ck_assert_str_eq(get("crater/p-1/cpu.max"), "max 100000");
    ck_assert_str_eq(get("crater/p-1/cpu.max.burst"), "0");
    ck_assert_str_eq(get("crater/p-1/memory.max"), "max");
    ck_assert_str_eq(get("crater/p-1/memory.swap.max"), "max");
    ck_assert_str_eq(get("crater/p-1/pids.max"), "max");
    /* removed by someone meanwhile: made again, every limit written,
       whatever prev says */
    ck_assert_int_eq(crater_cg_destroy(cg, "p-1", &err), 0);
    ck_assert_int_eq(crater_cg_update(cg, "p-1", &b, &b, &err), 0);
    ck_assert_str_eq(get("crater/p-1/cpu.max"), "50000 100000");
    ck_assert_str_eq(get("crater/p-1/memory.max"), "16777216");
    ck_assert_str_eq(get("crater/p-1/pids.max"), "200");
    ck_assert(crater_cg_plain(cg, &a));
    b.cpuset_cpus = "0";
    ck_assert(!crater_cg_plain(cg, &b));
    crater_cg_close(cg);
    rm_fake();
}
END_TEST

/* Reusable: empty, no OOM kill, little memory left charged; listed by
   prefix. */
START_TEST(v2_fake_reusable_and_list)
{
    crater_cg_limits_t lim = {.mem_bytes = 1 << 20};
    crater_error_t err;
    crater_cgroups_t *cg;
    char **names;
    size_t n;

    fake_v2("cpu memory pids\n", true);
    cg = crater_cg_open(root, "crater", &err);
    ck_assert_ptr_nonnull(cg);
    ck_assert_int_eq(crater_cg_create(cg, "pool-1", &lim, &err), 0);
    ck_assert_int_eq(crater_cg_create(cg, "pool-2", &lim, &err), 0);
    ck_assert_int_eq(crater_cg_create(cg, "other", &lim, &err), 0);
    put("crater/pool-1/cgroup.procs", "");
    put("crater/pool-1/memory.events", "oom 0\noom_kill 0\n");
    put("crater/pool-1/memory.current", "8192\n");
    put("crater/pool-1/pids.current", "0\n");
    ck_assert(crater_cg_reusable(cg, "pool-1", 1 << 20));
    put("crater/pool-1/pids.current", "3\n"); /* killed, not yet reaped */
    ck_assert(!crater_cg_reusable(cg, "pool-1", 1 << 20));
    put("crater/pool-1/pids.current", "0\n");
    ck_assert(!crater_cg_reusable(cg, "pool-1", 4096)); /* charge left */
    put("crater/pool-1/cgroup.procs", "77\n");
    ck_assert(!crater_cg_reusable(cg, "pool-1", 1 << 20)); /* a process */
    put("crater/pool-1/cgroup.procs", "");
    put("crater/pool-1/memory.events", "oom 1\noom_kill 1\n");
    ck_assert(!crater_cg_reusable(cg, "pool-1", 1 << 20)); /* an OOM kill */
    ck_assert(!crater_cg_reusable(cg, "pool-2", 1 << 20)); /* unreadable */
    ck_assert_int_eq(crater_cg_list(cg, "pool-", &names, &n, &err), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert(!strncmp(names[0], "pool-", 5) && !strncmp(names[1], "pool-", 5));
    crater_cg_paths_free(names, n);
    crater_cg_close(cg);
    rm_fake();
}
END_TEST

/* A kernel without cpu.max.burst / memory.swap.max: those are not
   written; a limit for a missing controller is refused, not dropped. */
START_TEST(v2_fake_missing_features)
{
    crater_cg_limits_t lim = full_limits();
    crater_error_t err;
    crater_cgroups_t *cg;

    fake_v2("memory pids\n", false);
    cg = crater_cg_open(root, "crater", &err);
    ck_assert_ptr_nonnull(cg);
    ck_assert_str_eq(get("cgroup.subtree_control"), "+memory +pids");
    ck_assert_int_eq(crater_cg_create(cg, "j", &lim, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
    ck_assert_str_eq(err.text, "cgroup: the cpu controller is not available");
    ck_assert(!there("crater/j")); /* nothing half-made left */
    lim.cpu_quota_milli = lim.cpu_burst_us = 0;
    lim.cpuset_cpus = lim.cpuset_mems = NULL;
    lim.nio = 0;
    ck_assert_int_eq(crater_cg_create(cg, "j", &lim, &err), 0);
    ck_assert_str_eq(get("crater/j/memory.max"), "67108864");
    ck_assert(!there("crater/j/memory.swap.max"));
    ck_assert(!there("crater/j/cpu.max.burst"));
    crater_cg_close(cg);
    rm_fake();
}
END_TEST

START_TEST(none_is_a_no_op)
{
    crater_cg_limits_t lim = full_limits();
    crater_error_t err;
    crater_cgroups_t *cg;
    char **paths;
    size_t n = 9;
    pid_t pids[2];
    uint64_t cpu, mem;

    fake_v2("hugetlb\n", false); /* v2 mounted but nothing we use */
    cg = crater_cg_open(root, "crater", &err);
    ck_assert_ptr_nonnull(cg);
    ck_assert_int_eq(crater_cg_version(cg), CRATER_CG_NONE);
    ck_assert_uint_eq(crater_cg_controllers(cg), 0);
    ck_assert_int_eq(crater_cg_create(cg, "x", &lim, &err), 0);
    ck_assert(!there("crater/x"));
    ck_assert_int_eq(crater_cg_procs_paths(cg, "x", &paths, &n, &err), 0);
    ck_assert_uint_eq(n, 0);
    crater_cg_paths_free(paths, n);
    ck_assert_int_eq(crater_cg_pids(cg, "x", pids, 2, &n, &err), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(crater_cg_kill(cg, "x", SIGKILL, &err), 0);
    ck_assert_int_eq(crater_cg_usage(cg, "x", &cpu, &mem, &err), 0);
    ck_assert_uint_eq(cpu, UINT64_MAX);
    ck_assert_int_eq(crater_cg_destroy(cg, "x", &err), 0);
    crater_cg_close(cg);
    rm_fake();
}
END_TEST

START_TEST(names_checked)
{
    crater_cg_limits_t lim = {0};
    crater_error_t err;
    crater_cgroups_t *cg;

    fake_v2("cpu memory\n", false);
    ck_assert_ptr_null(crater_cg_open(root, "a/b", &err));
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    cg = crater_cg_open(root, "crater", &err);
    ck_assert_int_eq(crater_cg_create(cg, "../evil", &lim, &err), -1);
    ck_assert_str_eq(err.text,
                     "cgroup task name '../evil' is not 1-64 "
                     "characters of [A-Za-z0-9._-]");
    ck_assert_int_eq(crater_cg_create(cg, "..", &lim, &err), -1);
    ck_assert_int_eq(crater_cg_create(cg, "", &lim, &err), -1);
    crater_cg_close(cg);
    rm_fake();
}
END_TEST

START_TEST(format_cpu_and_io)
{
    crater_cg_limits_t lim = {.cpu_quota_milli = 1500};
    crater_cg_io_t io = {259, 1, 0, 5, 0, 7};
    char buf[64];

    ck_assert_int_eq(crater_cg_format_cpu_max(&lim, buf, sizeof(buf)), 13);
    ck_assert_str_eq(buf, "150000 100000");
    lim.cpu_quota_milli = 0;
    crater_cg_format_cpu_max(&lim, buf, sizeof(buf));
    ck_assert_str_eq(buf, "max 100000");
    lim.cpu_quota_milli = 5; /* 500 us: raised to the kernel's 1 ms */
    crater_cg_format_cpu_max(&lim, buf, sizeof(buf));
    ck_assert_str_eq(buf, "1000 100000");
    lim = (crater_cg_limits_t){.cpu_quota_milli = 2000, .cpu_period_us = 50000};
    crater_cg_format_cpu_max(&lim, buf, sizeof(buf));
    ck_assert_str_eq(buf, "100000 50000");
    ck_assert_int_eq(crater_cg_format_cpu_max(&lim, buf, 5), -1);
    crater_cg_format_io_max(&io, buf, sizeof(buf));
    ck_assert_str_eq(buf, "259:1 rbps=max wbps=5 riops=max wiops=7");
}
END_TEST

START_TEST(io_profiles)
{
    crater_cg_io_t io;

    ck_assert_int_eq(crater_cg_io_profile(CRATER_IO_TRAINING,
                                          CRATER_WORKLOAD_INFERENCE,
                                          8,
                                          0,
                                          &io),
                     1);
    ck_assert_uint_eq(io.major, 8);
    ck_assert_uint_eq(io.rbps, 1024ull << 20);
    ck_assert_uint_eq(io.riops, 2000);
    ck_assert_int_eq(crater_cg_io_profile(CRATER_IO_MODEL_LOADING,
                                          CRATER_WORKLOAD_TRAINING,
                                          8,
                                          0,
                                          &io),
                     1);
    ck_assert_uint_eq(io.riops, 50000);
    ck_assert_uint_eq(io.rbps, 500ull << 20);
    /* default: from the workload */
    crater_cg_io_profile(CRATER_IO_DEFAULT,
                         CRATER_WORKLOAD_INFERENCE,
                         8,
                         0,
                         &io);
    ck_assert_uint_eq(io.riops, 10000);
    ck_assert_uint_eq(io.rbps, 200ull << 20);
    crater_cg_io_profile(CRATER_IO_DEFAULT, CRATER_WORKLOAD_BATCH, 8, 0, &io);
    ck_assert_uint_eq(io.riops, 2000);
    ck_assert_int_eq(crater_cg_io_profile(CRATER_IO_DEFAULT,
                                          CRATER_WORKLOAD_INTERACTIVE,
                                          8,
                                          0,
                                          &io),
                     0);
    ck_assert_int_eq(crater_cg_io_profile(CRATER_IO_NONE,
                                          CRATER_WORKLOAD_TRAINING,
                                          8,
                                          0,
                                          &io),
                     0);
}
END_TEST

START_TEST(parsers)
{
    crater_error_t err;
    pid_t p[4];
    size_t n;
    uint64_t v;

    ck_assert_int_eq(crater_cg_parse_procs("f", "", p, 4, &n, &err), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(crater_cg_parse_procs("f", "12\n\n34", p, 4, &n, &err), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(p[1], 34);
    ck_assert_int_eq(crater_cg_parse_procs("f", "12\nabc\n", p, 4, &n, &err),
                     -1);
    ck_assert_str_eq(err.text, "f:2: expected a pid");
    ck_assert_int_eq(crater_cg_parse_keyed("m",
                                           "oom_kill_disable 0\n"
                                           "under_oom 0\noom_kill 5\n",
                                           "oom_kill",
                                           &v,
                                           &err),
                     0);
    ck_assert_uint_eq(v, 5);
    ck_assert_int_eq(crater_cg_parse_keyed("m",
                                           "a 1\nb 2\noom_kill x\n",
                                           "oom_kill",
                                           &v,
                                           &err),
                     -1);
    ck_assert_str_eq(err.text, "m:3: oom_kill: value is not a number");
    ck_assert_int_eq(crater_cg_parse_keyed("m",
                                           "oom_kill_disable 0\n",
                                           "oom_kill",
                                           &v,
                                           &err),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
}
END_TEST

/* ---- the real hierarchy ---- */

static char parent[64];

static crater_cgroups_t *real_open(void)
{
    crater_error_t err;
    crater_cgroups_t *cg;

    snprintf(parent, sizeof(parent), "crater-test-%ld", (long)getpid());
    if (geteuid() != 0) {
        printf("SKIP: real cgroup tests need root\n");
        return NULL;
    }
    cg = crater_cg_open(NULL, parent, &err);
    if (!cg) {
        printf("SKIP: cannot set up /sys/fs/cgroup/%s: %s\n", parent, err.text);
        return NULL;
    }
    if (crater_cg_version(cg) == CRATER_CG_NONE
        || !(crater_cg_controllers(cg) & CRATER_CG_MEMORY)) {
        printf("SKIP: no usable cgroup hierarchy with memory here\n");
        crater_cg_close(cg);
        return NULL;
    }
    return cg;
}

static void real_close(crater_cgroups_t *cg)
{
    crater_error_t err;

    ck_assert_msg(crater_cg_destroy_parent(cg, &err) == 0, "%s", err.text);
    crater_cg_close(cg);
}

/* Contents of <task dir for ctl>/<file>, newline stripped. */
static const char *task_file(crater_cgroups_t *cg,
                             const char *ctl,
                             const char *task,
                             const char *file)
{
    static char buf[256];
    char dir[512], p[600];
    crater_error_t err;
    FILE *f;
    size_t n;

    ck_assert_msg(crater_cg_dir(cg, ctl, task, dir, sizeof(dir), &err) == 0,
                  "%s",
                  err.text);
    snprintf(p, sizeof(p), "%s/%s", dir, file);
    ck_assert_msg((f = fopen(p, "r")) != NULL, "open %s", p);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (n && buf[n - 1] == '\n')
        buf[n - 1] = '\0';
    return buf;
}

/* The agent's own (parent) v1 cpuset file equals want. */
static bool same_as_agent(crater_cgroups_t *cg,
                          const char *file,
                          const char *want)
{
    char dir[512], p[600], buf[256] = "";
    crater_error_t err;
    FILE *f;
    size_t n;

    if (crater_cg_version(cg) != CRATER_CG_V1
        || crater_cg_dir(cg, "cpuset", "x", dir, sizeof(dir), &err) < 0)
        return false;
    *strrchr(dir, '/') = '\0'; /* the agent's directory */
    snprintf(p, sizeof(p), "%s/%s", dir, file);
    if (!(f = fopen(p, "r")))
        return false;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return strcmp(buf, want) == 0;
}

static bool dir_there(crater_cgroups_t *cg, const char *ctl, const char *task)
{
    char dir[512];
    crater_error_t err;

    ck_assert_int_eq(crater_cg_dir(cg, ctl, task, dir, sizeof(dir), &err), 0);
    return access(dir, F_OK) == 0;
}

/* Fork a child that joins the task's cgroup with open/write/close only
   (as the runner's child does before exec), then runs fn. */
static pid_t spawn_in(crater_cgroups_t *cg, const char *task, void (*fn)(void))
{
    crater_error_t err;
    char **paths, c = 0;
    size_t n, i;
    int pfd[2], fd;
    pid_t pid;

    ck_assert_int_eq(crater_cg_procs_paths(cg, task, &paths, &n, &err), 0);
    ck_assert_int_eq(pipe(pfd), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        for (i = 0; i < n; i++) {
            fd = open(paths[i], O_WRONLY);
            if (fd < 0 || write(fd, "0", 1) != 1)
                _exit(100 + (int)i);
            close(fd);
        }
        c = 1;
        if (write(pfd[1], &c, 1) != 1)
            _exit(99);
        fn();
        _exit(0);
    }
    close(pfd[1]);
    ck_assert_int_eq(read(pfd[0], &c, 1), 1); /* attached */
    close(pfd[0]);
    crater_cg_paths_free(paths, n);
    return pid;
}

static void sleeper(void)
{
    for (;;)
        pause();
}

static void hog(void)
{
    size_t sz = 256u << 20;
    char *p = mmap(NULL,
                   sz,
                   PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS,
                   -1,
                   0);

    if (p == MAP_FAILED)
        _exit(98);
    for (size_t i = 0; i < sz; i += 4096)
        p[i] = 1;
    _exit(0); /* survived: the limit did not hold */
}

static crater_cg_limits_t real_limits(crater_cgroups_t *cg)
{
    crater_cg_limits_t lim = {.cpu_quota_milli = 1500,
                              .cpu_burst_us = 20000,
                              .mem_bytes = 64ull << 20,
                              .cpuset_cpus = "0",
                              .cpuset_mems = "0"};
    crater_error_t err;

    if (!(crater_cg_controllers(cg) & CRATER_CG_CPUSET))
        lim.cpuset_cpus = lim.cpuset_mems = NULL;
    if (!(crater_cg_controllers(cg) & CRATER_CG_IO))
        return lim;
    if (crater_cg_disk_of_path("/", &lim.io[0].major, &lim.io[0].minor, &err)
        == 0) {
        lim.io[0].rbps = lim.io[0].wbps = 10u << 20;
        lim.io[0].riops = lim.io[0].wiops = 1000;
        lim.nio = 1;
    } else {
        printf("SKIP (blkio part): %s\n", err.text);
    }
    return lim;
}

static bool has(crater_cgroups_t *cg, const char *ctl, const char *file)
{
    char dir[512], p[600];
    crater_error_t err;

    ck_assert_int_eq(crater_cg_dir(cg, ctl, "live", dir, sizeof(dir), &err), 0);
    snprintf(p, sizeof(p), "%s/%s", dir, file);
    if (access(p, F_OK) == 0)
        return true;
    printf("kernel has no %s\n", file);
    return false;
}

static void check_limits(crater_cgroups_t *cg, const crater_cg_limits_t *lim)
{
    char want[64];

    if (crater_cg_version(cg) == CRATER_CG_V1) {
        ck_assert_str_eq(task_file(cg, "cpu", "live", "cpu.cfs_quota_us"),
                         "150000");
        ck_assert_str_eq(task_file(cg, "cpu", "live", "cpu.cfs_period_us"),
                         "100000");
        ck_assert_str_eq(task_file(cg,
                                   "memory",
                                   "live",
                                   "memory.limit_in_bytes"),
                         "67108864");
        if (has(cg, "cpu", "cpu.cfs_burst_us"))
            ck_assert_str_eq(task_file(cg, "cpu", "live", "cpu.cfs_burst_us"),
                             "20000");
        if (has(cg, "memory", "memory.memsw.limit_in_bytes"))
            ck_assert_str_eq(task_file(cg,
                                       "memory",
                                       "live",
                                       "memory.memsw.limit_in_bytes"),
                             "67108864");
    } else {
        if (has(cg, "cpu", "cpu.max.burst"))
            ck_assert_str_eq(task_file(cg, "cpu", "live", "cpu.max.burst"),
                             "20000");
        if (has(cg, "memory", "memory.swap.max"))
            ck_assert_str_eq(task_file(cg, "memory", "live", "memory.swap.max"),
                             "0");
        ck_assert_str_eq(task_file(cg, "cpu", "live", "cpu.max"),
                         "150000 100000");
        ck_assert_str_eq(task_file(cg, "memory", "live", "memory.max"),
                         "67108864");
    }
    if (lim->cpuset_cpus && !same_as_agent(cg, "cpuset.cpus", "0"))
        ck_assert_str_eq(task_file(cg, "cpuset", "live", "cpuset.cpus"), "0");
    if (lim->nio && crater_cg_version(cg) == CRATER_CG_V1) {
        snprintf(want,
                 sizeof(want),
                 "%u:%u 10485760",
                 lim->io[0].major,
                 lim->io[0].minor);
        ck_assert_str_eq(task_file(cg,
                                   "blkio",
                                   "live",
                                   "blkio.throttle.read_bps_device"),
                         want);
    } else if (lim->nio) {
        snprintf(want,
                 sizeof(want),
                 "%u:%u rbps=10485760 wbps=10485760 riops=1000 wiops=1000",
                 lim->io[0].major,
                 lim->io[0].minor);
        ck_assert_str_eq(task_file(cg, "io", "live", "io.max"), want);
    }
}

START_TEST(real_limits_attach_kill_destroy)
{
    crater_cgroups_t *cg = real_open();
    crater_cg_limits_t lim;
    crater_error_t err;
    pid_t pid, pids[16];
    size_t n;
    int st;
    uint64_t cpu, mem;
    char dir[512];

    if (!cg)
        return;
    printf("real cgroup v%d, controllers 0x%x\n",
           crater_cg_version(cg) == CRATER_CG_V1 ? 1 : 2,
           crater_cg_controllers(cg));
    lim = real_limits(cg);
    ck_assert_msg(crater_cg_create(cg, "live", &lim, &err) == 0,
                  "%s",
                  err.text);
    check_limits(cg, &lim);
    pid = spawn_in(cg, "live", sleeper);
    ck_assert_int_eq(crater_cg_pids(cg, "live", pids, 16, &n, &err), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(pids[0], pid);
    ck_assert_msg(crater_cg_usage(cg, "live", &cpu, &mem, &err) == 0,
                  "%s",
                  err.text);
    ck_assert_uint_ne(mem, UINT64_MAX);
    if (crater_cg_version(cg) == CRATER_CG_V2
        || (crater_cg_controllers(cg) & CRATER_CG_CPUACCT))
        ck_assert_uint_ne(cpu, UINT64_MAX);
    ck_assert_int_eq(crater_cg_kill(cg, "live", SIGKILL, &err), 0);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    ck_assert_int_eq(crater_cg_pids(cg, "live", pids, 16, &n, &err), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(crater_cg_dir(cg,
                                   "memory",
                                   "live",
                                   dir,
                                   sizeof(dir),
                                   &err),
                     0);
    ck_assert_msg(crater_cg_destroy(cg, "live", &err) == 0, "%s", err.text);
    ck_assert_int_ne(access(dir, F_OK), 0);
    real_close(cg);
}
END_TEST

/* The kernel refuses a malformed CPU list: the error names the file
   and the errno text, and no half-made cgroup is left behind. */
START_TEST(real_kernel_error_named_and_rolled_back)
{
    crater_cgroups_t *cg = real_open();
    crater_cg_limits_t lim = {.cpuset_cpus = "nonsense", .cpuset_mems = "0"};
    crater_error_t err;
    char dir[512];
    const char *tail = "/bad/cpuset.cpus: Invalid argument";

    if (!cg)
        return;
    if (!(crater_cg_controllers(cg) & CRATER_CG_CPUSET)) {
        printf("SKIP: no cpuset controller\n");
        real_close(cg);
        return;
    }
    ck_assert_int_eq(crater_cg_create(cg, "bad", &lim, &err), -1);
    ck_assert_msg(strlen(err.text) > strlen(tail)
                      && !strcmp(err.text + strlen(err.text) - strlen(tail),
                                 tail),
                  "%s",
                  err.text);
    ck_assert_int_eq(crater_cg_dir(cg, "cpuset", "bad", dir, sizeof(dir), &err),
                     0);
    ck_assert_int_ne(access(dir, F_OK), 0);
    real_close(cg);
}
END_TEST

/* v1: a task that asks for the agent's own cpuset and no IO limit gets
   no directory in the cpuset and blkio hierarchies (each one is a mkdir,
   writes, an attach and an rmdir per task); it joins, is listed, killed
   and removed through the others. One that asks for another cpuset gets
   its directory. */
START_TEST(real_v1_no_dir_for_the_agents_settings)
{
    crater_cgroups_t *cg = real_open();
    crater_cg_limits_t lim = {.mem_bytes = 64ull << 20};
    crater_error_t err;
    char cpus[256], dir[512], p[600], **paths;
    pid_t pid, pids[4];
    size_t n, all;
    int st;
    FILE *f;

    if (!cg)
        return;
    if (crater_cg_version(cg) != CRATER_CG_V1
        || !(crater_cg_controllers(cg) & CRATER_CG_CPUSET)) {
        printf("SKIP: not cgroup v1 with cpuset\n");
        real_close(cg);
        return;
    }
    ck_assert_int_eq(crater_cg_dir(cg, "cpuset", "x", dir, sizeof(dir), &err),
                     0);
    *strrchr(dir, '/') = '\0'; /* the agent's directory */
    snprintf(p, sizeof(p), "%s/cpuset.cpus", dir);
    ck_assert_ptr_nonnull(f = fopen(p, "r"));
    ck_assert_ptr_nonnull(fgets(cpus, sizeof(cpus), f));
    fclose(f);
    cpus[strcspn(cpus, "\n")] = '\0';
    lim.cpuset_cpus = cpus;
    ck_assert_msg(crater_cg_create(cg, "same", &lim, &err) == 0,
                  "%s",
                  err.text);
    ck_assert(!dir_there(cg, "cpuset", "same"));
    if (crater_cg_controllers(cg) & CRATER_CG_IO)
        ck_assert(!dir_there(cg, "blkio", "same"));
    ck_assert(dir_there(cg, "memory", "same"));
    ck_assert_int_eq(crater_cg_procs_paths(cg, "same", &paths, &n, &err), 0);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(access(paths[i], W_OK), 0);
    crater_cg_paths_free(paths, n);
    pid = spawn_in(cg, "same", sleeper);
    ck_assert_int_eq(crater_cg_pids(cg, "same", pids, 4, &all, &err), 0);
    ck_assert_uint_eq(all, 1);
    ck_assert_int_eq(crater_cg_kill(cg, "same", SIGKILL, &err), 0);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(crater_cg_destroy(cg, "same", &err) == 0, "%s", err.text);
    ck_assert(!dir_there(cg, "memory", "same"));
    if (strcmp(cpus, "0") != 0) { /* another cpuset: its own directory */
        lim.cpuset_cpus = "0";
        ck_assert_msg(crater_cg_create(cg, "other", &lim, &err) == 0,
                      "%s",
                      err.text);
        ck_assert_str_eq(task_file(cg, "cpuset", "other", "cpuset.cpus"), "0");
        ck_assert_msg(crater_cg_destroy(cg, "other", &err) == 0,
                      "%s",
                      err.text);
    }
    real_close(cg);
}
END_TEST

/* A finished task's cgroup taken by the next task: empty, reusable, and
   the limits the next task does not ask for are back to the kernel's. */
START_TEST(real_reuse_after_exit)
{
    crater_cgroups_t *cg = real_open();
    crater_cg_limits_t lim = {.cpu_quota_milli = 500,
                              .mem_bytes = 64ull << 20,
                              .pids_max = 50},
                       none = {0};
    bool v1;
    crater_error_t err;
    pid_t pid;
    int st;

    if (!cg)
        return;
    v1 = crater_cg_version(cg) == CRATER_CG_V1;
    ck_assert_msg(crater_cg_create(cg, "live", &lim, &err) == 0,
                  "%s",
                  err.text);
    pid = spawn_in(cg, "live", sleeper);
    ck_assert(!crater_cg_reusable(cg, "live", UINT64_MAX)); /* it runs */
    ck_assert_int_eq(crater_cg_kill(cg, "live", SIGKILL, &err), 0);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(crater_cg_reusable(cg, "live", 1u << 20));
    ck_assert_msg(crater_cg_update(cg, "live", &none, &lim, &err) == 0,
                  "%s",
                  err.text);
    ck_assert_str_eq(task_file(cg,
                               "cpu",
                               "live",
                               v1 ? "cpu.cfs_quota_us" : "cpu.max"),
                     v1 ? "-1" : "max 100000");
    ck_assert_str_ne(task_file(cg,
                               "memory",
                               "live",
                               v1 ? "memory.limit_in_bytes" : "memory.max"),
                     "67108864");
    if (crater_cg_controllers(cg) & CRATER_CG_PIDS)
        ck_assert_str_eq(task_file(cg, "pids", "live", "pids.max"), "max");
    pid = spawn_in(cg, "live", sleeper); /* and it takes a task again */
    ck_assert_int_eq(crater_cg_kill(cg, "live", SIGKILL, &err), 0);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(crater_cg_destroy(cg, "live", &err) == 0, "%s", err.text);
    real_close(cg);
}
END_TEST

START_TEST(real_memory_hog_is_oom_killed)
{
    crater_cgroups_t *cg = real_open();
    crater_cg_limits_t lim = {.mem_bytes = 64ull << 20};
    crater_error_t err;
    uint64_t kills = 0;
    pid_t pid;
    int st;

    if (!cg)
        return;
    ck_assert_msg(crater_cg_create(cg, "hog", &lim, &err) == 0, "%s", err.text);
    pid = spawn_in(cg, "hog", hog);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
                  "hog ended with status 0x%x, not SIGKILL",
                  st);
    if (crater_cg_oom_kills(cg, "hog", &kills, &err) == 0)
        ck_assert_uint_ge(kills, 1);
    else
        printf("no oom_kill counter (%s): SIGKILL checked instead\n", err.text);
    /* a cgroup that counted an OOM kill is never given to another task */
    ck_assert(!crater_cg_reusable(cg, "hog", UINT64_MAX));
    ck_assert_msg(crater_cg_destroy(cg, "hog", &err) == 0, "%s", err.text);
    real_close(cg);
}
END_TEST

static Suite *cgroup_suite(void)
{
    Suite *s = suite_create("cgroup");
    TCase *f = tcase_create("fake"), *r = tcase_create("real");

    tcase_add_test(f, v2_fake_writes_exact_files);
    tcase_add_test(f, v2_fake_procs_events_usage_destroy);
    tcase_add_test(f, v2_fake_missing_features);
    tcase_add_test(f, v2_fake_update_writes_only_changes);
    tcase_add_test(f, v2_fake_reusable_and_list);
    tcase_add_test(f, none_is_a_no_op);
    tcase_add_test(f, names_checked);
    tcase_add_test(f, format_cpu_and_io);
    tcase_add_test(f, io_profiles);
    tcase_add_test(f, parsers);
    tcase_add_test(r, real_limits_attach_kill_destroy);
    tcase_add_test(r, real_memory_hog_is_oom_killed);
    tcase_add_test(r, real_reuse_after_exit);
    tcase_add_test(r, real_v1_no_dir_for_the_agents_settings);
    tcase_add_test(r, real_kernel_error_named_and_rolled_back);
    tcase_set_timeout(r, 30);
    suite_add_tcase(s, f);
    suite_add_tcase(s, r);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cgroup_suite());
    int failures;

    srunner_run_all(sr, CK_NORMAL);
    failures = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failures ? 1 : 0;
}
