/* task.c - running a task: its cgroup, the exec, stopping it, reaping it.
 *
 * Start: the limits are computed from the task craterd sent (CPU quota =
 * request x cpuLimitMultiplier, plus burst when asked; memory limit; IO
 * limits from ioProfile on the placed device; cpuset/mems on the NUMA node
 * of its GPUs), the task's cgroup is created, and the agent starts the
 * task's supervisor (the shim, as slurmstepd or containerd-shim): the
 * crater-shim program through posix_spawn, or a fork of the agent when
 * that program is missing (taskexec.h: the same code). The shim leaves
 * the agent's session, closes every descriptor it inherited, forks the
 * task, sends its pid back through a pipe, waits for it and writes its
 * wait status to DATA/tasks/<job>.<attempt>/exit (written, renamed) before
 * it exits. The agent can therefore die and come back: the task keeps
 * running, its output keeps going to its log files, and the next agent
 * adopts it from its record (taskstate.c) and learns its end from the exit
 * file. The task writes its own pid into the cgroup.procs files (so it is
 * limited before it runs any task code), redirects stdout/stderr to its
 * log files, gets its own /proc (agent.hideProcesses), drops to its task
 * user (its tenant's uid and gid, isolate.c), and only then enters its
 * working directory (by default WORK/<instance>.<job>.<attempt>, made for
 * it and owned by it, also its HOME) and execs the argv: never a shell.
 * Everything both children need is prepared before fork; they only make
 * async-signal-safe calls.
 *
 * Stop: SIGTERM to the task's process group, and SIGKILL to everything in
 * its cgroup when the grace period ends. Exit: the exit file, checked on
 * each tick (the shim is reaped when it is this agent's child); an exit
 * after a SIGKILL with an OOM kill recorded in the cgroup is reported as
 * OOM-killed. A shim that vanished without an exit file fails the task.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/internal.h"
#include "agent/taskexec.h"
#include "crater/log.h"

extern char **environ;

int64_t agent_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* attempt 0: any attempt of the job's replica */
atask_t *task_find(crater_agent_t *a,
                   const char *job,
                   uint32_t attempt,
                   uint32_t replica)
{
    for (size_t i = 0; i < a->ntasks; i++)
        if (strcmp(a->tasks[i]->job, job) == 0
            && a->tasks[i]->replica == replica
            && (!attempt || a->tasks[i]->attempt == attempt))
            return a->tasks[i];
    return NULL;
}

const char *task_rtag(uint32_t replica, char buf[16])
{
    if (replica == 0)
        return "";
    snprintf(buf, 16, ".r%u", replica);
    return buf;
}

/* ---- limits ----------------------------------------------------------------
 */

static int read_small(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t r;

    if (fd < 0)
        return -1;
    r = read(fd, buf, n - 1);
    close(fd);
    if (r <= 0)
        return -1;
    buf[r] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

/* IO throttles from ioProfile on the device the job was placed on:
 * craterd sends the profile and the workload type it resolved (explicit
 * or inferred), so an ioProfile applies whenever it is set. */
static void io_limits(const crater_proto_task_t *task, crater_cg_limits_t *lim)
{
    const char *dev = task->placement.disk;
    uint32_t major, minor;
    char path[256], mm[32];

    if (!dev)
        return;
    snprintf(path, sizeof(path), "/sys/block/%s/dev", dev);
    if (read_small(path, mm, sizeof(mm)) < 0
        || sscanf(mm, "%u:%u", &major, &minor) != 2)
        return;
    if (crater_cg_io_profile(task->limits.io_profile,
                             task->limits.workload_type,
                             major,
                             minor,
                             &lim->io[0])
        == 1)
        lim->nio = 1;
}

/* Only what this machine's cgroups can enforce is asked for: a missing
 * controller would make crater_cg_create() refuse the task. */
static void drop_unavailable(crater_agent_t *a, crater_cg_limits_t *lim)
{
    unsigned c = crater_cg_controllers(a->cg);

    if (!(c & CRATER_CG_CPU))
        lim->cpu_quota_milli = lim->cpu_burst_us = 0;
    if (!(c & CRATER_CG_MEMORY))
        lim->mem_bytes = 0;
    if (!(c & CRATER_CG_CPUSET))
        lim->cpuset_cpus = lim->cpuset_mems = NULL;
    if (!(c & CRATER_CG_IO))
        lim->nio = 0;
    if (!(c & CRATER_CG_PIDS))
        lim->pids_max = 0;
}

/* NUMA node numa's cpulist into buf: read once per node (a sysfs open per
   task start showed in B3's profile), the rest of the agent's life from
   the cache; 0, or -1 when the node has none. */
static int numa_cpulist(crater_agent_t *a, int numa, char *buf, size_t n)
{
    char path[128];
    char *c = numa < AGENT_NUMA_CACHE ? a->numa_cpus[numa] : NULL;

    if (c && a->numa_read[numa]) {
        snprintf(buf, n, "%s", c);
        return c[0] ? 0 : -1;
    }
    snprintf(path,
             sizeof(path),
             "/sys/devices/system/node/node%d/cpulist",
             numa);
    if (read_small(path, buf, n) < 0)
        buf[0] = '\0';
    if (c && strlen(buf) < 64) { /* a longer list is read each time */
        snprintf(c, 64, "%s", buf);
        a->numa_read[numa] = true;
    }
    return buf[0] ? 0 : -1;
}

static void task_limits(crater_agent_t *a,
                        const crater_proto_task_t *task,
                        crater_cg_limits_t *lim,
                        char *cpus,
                        size_t n)
{
    const crater_proto_limits_t *l = &task->limits;
    double mult = l->cpu_limit_multiplier;
    int numa = task->placement.numa;

    memset(lim, 0, sizeof(*lim));
    if (mult < 1)
        mult = a->cfg ? a->cfg->agent.cpu_limit_multiplier : 1.0;
    lim->cpu_quota_milli = (uint64_t)((double)l->cpu_millis * mult);
    if (l->cpu_burst)
        lim->cpu_burst_us = 100000;
    lim->mem_bytes = l->memory_bytes;
    if (numa >= 0 && numa_cpulist(a, numa, cpus, n) == 0) {
        lim->cpuset_cpus = cpus;
        snprintf(cpus + strlen(cpus) + 1, n - strlen(cpus) - 1, "%d", numa);
        lim->cpuset_mems = cpus + strlen(cpus) + 1;
    }
    io_limits(task, lim);
    lim->pids_max = a->cfg ? a->cfg->agent.pids_limit : 4096;
    drop_unavailable(a, lim);
}

/* ---- exec ------------------------------------------------------------------
 */

/* What a start prepares (owned), and the taskexec view of it. */
typedef struct spawn {
    char **argv, **envp, **procs;
    size_t nprocs;
    const char *out, *errf, *dir;
    char exit_tmp[4200], exit_path[4200]; /* the shim's status file */
    bool switch_user, hide_procs;
    int procns_fd; /* with hide_procs: the agent's namespace, or -1 */
    uid_t uid;
    gid_t gid;
} spawn_t;

static taskexec_t exec_view(const spawn_t *s)
{
    return (taskexec_t){.argv = s->argv,
                        .envp = s->envp,
                        .procs = s->procs,
                        .nprocs = s->nprocs,
                        .out = s->out,
                        .errf = s->errf,
                        .dir = s->dir,
                        .exit_tmp = s->exit_tmp,
                        .exit_path = s->exit_path,
                        .switch_user = s->switch_user,
                        .hide_procs = s->hide_procs,
                        .procns_fd = s->procns_fd,
                        .uid = s->uid,
                        .gid = s->gid};
}

#define TASK_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* A clean PATH, LANG and HOME (its working directory), then the task's
 * variables, which may override any of them. */
static char **task_env(const crater_proto_task_t *task, const char *home)
{
    size_t n = task->nenv + 4, k = 0;
    char **v = calloc(n, sizeof(*v));

    if (!v)
        return NULL;
    if (!crater_proto_task_getenv(task, "PATH")
        && (v[k] = strdup("PATH=" TASK_PATH)))
        k++;
    if (!crater_proto_task_getenv(task, "LANG")
        && (v[k] = strdup("LANG=C.UTF-8")))
        k++;
    if (home && !crater_proto_task_getenv(task, "HOME")
        && asprintf(&v[k], "HOME=%s", home) >= 0)
        k++;
    for (size_t i = 0; i < task->nenv; i++)
        if (asprintf(&v[k], "%s=%s", task->env[i].key, task->env[i].value) >= 0)
            k++;
    return v;
}

/* Synthetic nodes only: CRATER_SYNTHETIC_GPU_UTIL in the task's env sets
 * what its GPUs read (see atask_t); anything but a fraction is ignored. */
static void synth_gpu_util(atask_t *t, const crater_proto_task_t *task)
{
    const char *v = crater_proto_task_getenv(task, "CRATER_SYNTHETIC_GPU_UTIL");
    char *end = NULL;
    double u;

    if (!v || !*v)
        return;
    u = strtod(v, &end);
    if (*end || !(u >= 0 && u <= 1))
        return;
    t->synth_gpu_set = true;
    t->synth_gpu_util = u;
}

/* What the task asked for: CPU and its GPUs with their slices. */
static void task_requests(atask_t *t, const crater_proto_task_t *task)
{
    const crater_proto_placement_t *pl = &task->placement;

    t->req_cpu_milli = task->limits.cpu_millis;
    synth_gpu_util(t, task);
    for (uint32_t i = 0; i < pl->ngpus && i < CRATER_MAX_GPUS_PER_NODE; i++) {
        t->gpu[t->ngpus] = pl->gpus[i].index;
        t->gpu_bytes[t->ngpus++] = pl->gpus[i].memory_bytes;
    }
}

static char *path_printf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static char *path_printf(const char *fmt, ...)
{
    va_list ap;
    char *p = NULL;

    va_start(ap, fmt);
    if (vasprintf(&p, fmt, ap) < 0)
        p = NULL;
    va_end(ap);
    return p;
}

static atask_t *task_new(crater_agent_t *a, const crater_proto_task_t *task)
{
    atask_t *t = calloc(1, sizeof(*t));
    char rb[16], cb[16];
    const char *r = task_rtag(task->replica, rb);

    if (!t)
        return NULL;
    t->job = strdup(task->job);
    t->attempt = task->attempt;
    t->replica = task->replica;
    if (task->replica)
        snprintf(cb, sizeof(cb), "-r%u", task->replica);
    snprintf(t->cg,
             sizeof(t->cg),
             "job-%s-%u%s-%08x",
             t->job,
             t->attempt,
             task->replica ? cb : "",
             a->instance);
    t->dir =
        path_printf("%s/tasks/%s.%u%s", a->data_dir, t->job, t->attempt, r);
    if (t->dir) {
        t->log_path[0] = path_printf("%s/stdout", t->dir);
        t->log_path[1] = path_printf("%s/stderr", t->dir);
    }
    t->started_ms = agent_now_ms();
    t->state = AT_RUNNING;
    timelimit_arm(t, task->time_limit_ms, task->grace_period_ms);
    task_requests(t, task);
    if (!t->job || !t->log_path[0] || !t->log_path[1] || !t->dir) {
        task_free(a, t);
        return NULL;
    }
    return t;
}

int task_add(crater_agent_t *a, atask_t *t)
{
    if (a->ntasks == a->captasks) {
        size_t cap = a->captasks ? a->captasks * 2 : 16;
        atask_t **n = realloc(a->tasks, cap * sizeof(*n));
        if (!n)
            return -1;
        a->tasks = n;
        a->captasks = cap;
    }
    a->tasks[a->ntasks++] = t;
    return 0;
}

/* Who t runs as: the tenant's uid and gid from craterd (agent.tenantUsers,
 * an agent running as root), else the agent's task user (task_user()). */
static void task_user_of(crater_agent_t *a,
                         atask_t *t,
                         const crater_proto_task_t *task)
{
    bool tenant = a->switch_user && task->uid && a->tenant_users;

    t->switch_user = a->switch_user;
    t->uid = tenant ? (uid_t)task->uid : a->uid;
    t->gid = tenant ? (gid_t)task->gid : a->gid;
}

/* The default working directory, the task's own (0700, its uid and gid)
 * and its HOME: WORK/<instance>.<job>.<attempt> under the agent's work
 * root (make_dirs(): root-owned 0711, so the task user reaches it but
 * cannot list it; the instance keeps two agents' jobs of the same id
 * apart). Made by root in a directory only root writes to, or a kept
 * one renamed there (spare.c: mkdir and rmdir of a directory per task
 * were a quarter of the agents' CPU in a burst of short tasks); t->workdir. */
static const char *make_workdir(crater_agent_t *a,
                                atask_t *t,
                                crater_error_t *err)
{
    char rb[16];

    if (!(t->workdir = path_printf("%s/%08x.%s.%u%s",
                                   a->work_root,
                                   a->instance,
                                   t->job,
                                   t->attempt,
                                   task_rtag(t->replica, rb)))) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    if ((!spare_take_workdir(a, t->workdir) && mkdir(t->workdir, 0700) < 0
         && errno != EEXIST)
        || (t->switch_user
            && fchownat(AT_FDCWD,
                        t->workdir,
                        t->uid,
                        t->gid,
                        AT_SYMLINK_NOFOLLOW)
                   < 0)) {
        crater_errorf(err, CRATER_EIO, "%s: %s", t->workdir, strerror(errno));
        return NULL;
    }
    return t->workdir;
}

const char *agent_locate(const char *env,
                         const char *const *beside,
                         const char *build_path,
                         int mode,
                         char *buf,
                         size_t n)
{
    const char *v = getenv(env);
    char exe[4096], *slash;
    ssize_t len;

    if (v && access(v, mode) == 0)
        return v;
    len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len > 0) {
        exe[len] = '\0';
        if ((slash = strrchr(exe, '/')))
            *slash = '\0';
        for (; beside && *beside; beside++)
            if (snprintf(buf, n, "%s/%s", exe, *beside) < (int)n
                && access(buf, mode) == 0)
                return buf;
    }
    if (build_path && access(build_path, mode) == 0)
        return build_path;
    return NULL;
}

const char *agent_shim_path(void)
{
    static const char *const beside[] = {"crater-shim", NULL};
    static char found[4096];
#ifdef CRATER_SHIM_BUILD_PATH
    const char *build = CRATER_SHIM_BUILD_PATH;
#else
    const char *build = NULL;
#endif

    return agent_locate("CRATER_SHIM",
                        beside,
                        build,
                        X_OK,
                        found,
                        sizeof(found));
}

/* crater-shim's argv (crater_shim.c); NULL on ENOMEM. v[5..8] are
 * allocated (UID GID FLAGS NPROCS), the rest borrowed. */
static char **shim_argv(const char *shim, const spawn_t *s)
{
    size_t nargs = 0, k = 0;
    char **v, num[4][24];

    while (s->argv[nargs])
        nargs++;
    if (!(v = calloc(11 + s->nprocs + nargs, sizeof(*v))))
        return NULL;
    snprintf(num[0],
             sizeof(num[0]),
             "%ld",
             s->switch_user ? (long)s->uid : -1L);
    snprintf(num[1], sizeof(num[1]), "%ld", (long)s->gid);
    snprintf(num[2],
             sizeof(num[2]),
             "%s",
             !s->hide_procs      ? "-"
             : s->procns_fd >= 0 ? "pn"
                                 : "p");
    snprintf(num[3], sizeof(num[3]), "%zu", s->nprocs);
    v[k++] = (char *)shim;
    v[k++] = (char *)s->exit_path;
    v[k++] = (char *)s->out;
    v[k++] = (char *)s->errf;
    v[k++] = (char *)(s->dir ? s->dir : "-");
    for (int i = 0; i < 4; i++)
        if (!(v[k++] = strdup(num[i]))) {
            for (size_t j = 5; j < k - 1; j++)
                free(v[j]);
            free(v);
            return NULL;
        }
    for (size_t i = 0; i < s->nprocs; i++)
        v[k++] = s->procs[i];
    v[k++] = "--";
    for (size_t i = 0; i < nargs; i++)
        v[k++] = s->argv[i];
    return v;
}

/* crater-shim with wfd as its fd 3: forked by the spawner (*child
 * false), else posix_spawn'd (*child true); -1 and errno. */
static pid_t spawn_shim(crater_agent_t *a,
                        const spawn_t *s,
                        int wfd,
                        bool *child)
{
    posix_spawn_file_actions_t fa;
    char **v = shim_argv(a->shim_path, s);
    pid_t pid = -1;
    int rc;

    if (!v) {
        errno = ENOMEM;
        return -1;
    }
    pid = spawner_spawn(a, v, s->envp, wfd, s->hide_procs ? s->procns_fd : -1);
    if ((*child = pid <= 0)) {
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, wfd, 3);
        if (s->hide_procs && s->procns_fd >= 0) /* >= 10: never 3 or 4 */
            posix_spawn_file_actions_adddup2(&fa, s->procns_fd, 4);
        rc = posix_spawn(&pid, a->shim_path, &fa, NULL, v, s->envp);
        posix_spawn_file_actions_destroy(&fa);
    } else {
        rc = 0;
    }
    for (int i = 5; i < 9; i++)
        free(v[i]);
    free(v);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return pid;
}

/* Start the shim (crater-shim, else a fork of this process running the
 * same code); t->pid from its pipe. */
static int start_shim(crater_agent_t *a,
                      atask_t *t,
                      spawn_t *s,
                      crater_error_t *err)
{
    taskexec_t x = exec_view(s);
    int p[2], hi;
    bool child = true;

    if (pipe2(p, O_CLOEXEC) < 0)
        return crater_errorf(err, CRATER_EIO, "pipe: %s", strerror(errno));
    if (p[1] == 3 && (hi = fcntl(p[1], F_DUPFD_CLOEXEC, 10)) >= 0) {
        close(p[1]); /* dup2(3, 3) would keep close-on-exec */
        p[1] = hi;
    }
    if (a->shim_path) {
        t->shim = spawn_shim(a, s, p[1], &child);
    } else if ((t->shim = fork()) == 0) {
        close(p[0]);
        taskexec_shim(&x, p[1], false);
    }
    close(p[1]);
    if (t->shim < 0) {
        close(p[0]);
        return crater_errorf(err,
                             CRATER_EIO,
                             "starting the task's supervisor: %s",
                             strerror(errno));
    }
    t->shim_child = child;
    t->pid_fd = p[0]; /* the pid comes later: task_start_finish() */
    t->pid_wait = true;
    return 0;
}

/* The pid t's shim sends once the task has joined its cgroup, dropped its
 * privileges and exec'd; then t's record. */
static int shim_pid(crater_agent_t *a, atask_t *t, crater_error_t *err)
{
    ssize_t got;

    while ((got = read(t->pid_fd, &t->pid, sizeof(t->pid))) < 0
           && errno == EINTR)
        ;
    t->pid_wait = false;
    if (got != sizeof(t->pid) || t->pid <= 0) {
        close(t->pid_fd);
        return crater_errorf(err,
                             CRATER_EIO,
                             "the task's supervisor could not start it");
    }
    t->exit_watch = true; /* its end is the shim's exit: sup_main polls it */
    t->started_ms = agent_now_ms();
    t->shim_start = taskstate_start_of(t->shim);
    if (taskstate_save(a, t, err) < 0) /* the task runs; adoption will not */
        crater_log(LOG_WARNING, "job %s: %s", t->job, err->text);
    return 0;
}

/* A task with an image: its shim runs podman as root, which drops to the
 * task user inside the container (ctrtask.c); podman's own view of /proc
 * stays whole (the container has its own), and podman stays out of the
 * task's cgroup (do_spawn()): the container is created inside it, and
 * podman's and its monitor's ~17 MB would count against the task. */
static int container_spawn(crater_agent_t *a,
                           atask_t *t,
                           const crater_proto_task_t *task,
                           spawn_t *s,
                           crater_error_t *err)
{
    char **argv, **env;

    if (ctr_prepare(a, t, task, &argv, &env, err) < 0) {
        crater_strv_free(argv);
        crater_strv_free(env);
        return -1;
    }
    crater_strv_free(s->argv);
    crater_strv_free(s->envp);
    s->argv = argv;
    s->envp = env;
    s->switch_user = s->hide_procs = false;
    s->procns_fd = -1;
    return 0;
}

static int prepare(crater_agent_t *a,
                   atask_t *t,
                   crater_proto_task_t *task,
                   spawn_t *s,
                   crater_error_t *err)
{
    int rc = -1;

    task_user_of(a, t, task);
    s->argv = crater_strv_dup(task->argv);
    s->dir = task->working_dir;
    if (!s->dir && !(s->dir = make_workdir(a, t, err)))
        goto out;
    if (agent_slice_setup(a, t, task, err) < 0
        || ckenv_setup(a, t, task, err) < 0)
        goto out;
    s->envp = task_env(task, s->dir);
    s->out = t->log_path[0];
    s->errf = t->log_path[1];
    snprintf(s->exit_tmp, sizeof(s->exit_tmp), "%s/exit.tmp", t->dir);
    snprintf(s->exit_path, sizeof(s->exit_path), "%s/exit", t->dir);
    s->switch_user = t->switch_user;
    s->hide_procs = a->hide_procs;
    s->procns_fd = a->hide_procs ? agent_procns(a) : -1;
    s->uid = t->uid;
    s->gid = t->gid;
    if (!s->envp || (!task->image && (!s->argv || !s->argv[0]))) {
        crater_errorf(err, CRATER_EINVAL, "task has no command");
        goto out;
    }
    if (!spare_take(a, t) && mkdir(t->dir, 0700) < 0 && errno != EEXIST) {
        crater_errorf(err, CRATER_EIO, "%s: %s", t->dir, strerror(errno));
        goto out;
    }
    if (task->image && container_spawn(a, t, task, s, err) < 0)
        goto out;
    unlink(s->exit_path); /* a record left by an earlier start */
    rc = 0;
out:
    return rc;
}

static int do_spawn(crater_agent_t *a,
                    atask_t *t,
                    crater_proto_task_t *task,
                    crater_error_t *err)
{
    spawn_t *s = calloc(1, sizeof(*s));
    crater_cg_limits_t lim;
    char cpus[512] = "";
    int rc = -1;

    if (!s)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    task_limits(a, task, &lim, cpus, sizeof(cpus));
    t->mem_limit = lim.mem_bytes;
    if (prepare(a, t, task, s, err) < 0
        || cgpool_take(a,
                       t,
                       &lim,
                       task->placement.ngpus == 0 && !task->image,
                       err)
               < 0
        || (!task->image /* podman stays out: only the container is in */
            && crater_cg_procs_paths(a->cg, t->cg, &s->procs, &s->nprocs, err)
                   < 0)
        || start_shim(a, t, s, err) < 0)
        goto out;
    if (task->readiness.argv
        && probe_prepare(a,
                         t,
                         &task->readiness,
                         &(probe_exec_t){.envp = s->envp,
                                         .procs = s->procs,
                                         .nprocs = s->nprocs,
                                         .dir = s->dir})
               < 0)
        crater_log(LOG_ERR,
                   "job %s: out of memory for its readiness command: "
                   "never ready",
                   t->job);
    rc = 0;
out:
    crater_strv_free(s->argv);
    crater_strv_free(s->envp);
    crater_cg_paths_free(s->procs, s->nprocs);
    free(s);
    return rc;
}

void task_probe_adopted(crater_agent_t *a,
                        atask_t *t,
                        const crater_proto_task_t *order)
{
    const char *dir = order->working_dir ? order->working_dir : t->workdir;
    char **envp, **procs = NULL;
    size_t nprocs = 0;
    crater_error_t err;

    if (t->probe || !order->readiness.argv || t->state != AT_RUNNING)
        return;
    task_user_of(a, t, order); /* as at its start: the same order */
    envp = task_env(order, dir);
    if (!envp
        || (!t->ctr
            && crater_cg_procs_paths(a->cg, t->cg, &procs, &nprocs, &err) < 0)
        || probe_prepare(a,
                         t,
                         &order->readiness,
                         &(probe_exec_t){.envp = envp,
                                         .procs = procs,
                                         .nprocs = nprocs,
                                         .dir = dir})
               < 0)
        crater_log(LOG_ERR,
                   "job %s: its readiness command cannot run: never ready",
                   t->job);
    crater_strv_free(envp);
    crater_cg_paths_free(procs, nprocs);
}

static void start_failed(atask_t *t, const crater_error_t *err)
{
    crater_log(LOG_ERR, "job %s: cannot start: %s", t->job, err->text);
    t->error = strdup(err->text);
    t->state = AT_EXITED;
    t->exit_code = 127;
    t->ended_ms = agent_now_ms();
    t->log_done[0] = t->log_done[1] = true;
}

/* Start the task unless this job and attempt already runs here (craterd
 * re-sends start orders after a reconnect): its shim is spawned, and its
 * pid collected by task_start_finish(), so that the tasks of one work
 * batch start side by side. */
int task_start(crater_agent_t *a, crater_proto_task_t *task)
{
    const char *job = task->job;
    crater_error_t err = {0};
    atask_t *t;

    if (task_find(a, job, task->attempt, task->replica))
        return 0;
    if (!(t = task_new(a, task)) || task_add(a, t) < 0) {
        task_free(a, t);
        return -1;
    }
    if (do_spawn(a, t, task, &err) < 0)
        start_failed(t, &err);
    report_kick(a);
    return 0;
}

void task_start_finish(crater_agent_t *a)
{
    crater_error_t err = {0};
    bool started = false;

    for (size_t i = 0; i < a->ntasks; i++) {
        started |= a->tasks[i]->pid_wait;
        atask_t *t = a->tasks[i];
        if (t->pid_wait && shim_pid(a, t, &err) < 0)
            start_failed(t, &err);
    }
    if (started && write(a->sup_wake[1], "", 1) < 0 && errno != EAGAIN)
        crater_log(LOG_WARNING,
                   "agent: waking the supervisor: %s",
                   strerror(errno));
}

/* SIGTERM to t's process group and cgroup. A task stopped the moment it
 * started may not have its group yet (its first step, taskexec.c): then
 * nothing got the signal, and the supervisor tries again each tick. A
 * container gets it from its runtime (`podman kill`): podman's own
 * forwarding (--sig-proxy) loses a SIGTERM that comes right after the
 * container started; before the container exists, podman gets it. */
static void term(crater_agent_t *a, atask_t *t)
{
    if (t->ctr && ctr_term(a, t) == 0) { /* the container's init has it */
        t->term_sent = true;
        return;
    }
    if (t->pid > 0 && kill(-t->pid, SIGTERM) == 0)
        t->term_sent = true;
    if (!t->ctr)
        crater_cg_kill(a->cg, t->cg, SIGTERM, NULL);
}

void task_stop(crater_agent_t *a, atask_t *t, uint64_t grace_ms)
{
    int64_t at = agent_now_ms() + (int64_t)grace_ms;

    if (t->state != AT_RUNNING)
        return;
    if (!t->stop_requested || at < t->kill_at_ms)
        t->kill_at_ms = at;
    t->stop_requested = true;
    term(a, t);
}

/* ---- supervision ------------------------------------------------------------
 */

static uint64_t file_size(const char *path)
{
    struct stat st;

    return path && stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* status < 0: the shim vanished without writing one. */
static void exited(crater_agent_t *a, atask_t *t, int status, int64_t at)
{
    uint64_t ooms = 0;

    if (t->exit_watch) {
        close(t->pid_fd);
        t->exit_watch = false;
    }
    t->state = AT_EXITED;
    t->ended_ms = at > 0 ? at : agent_now_ms();
    if (status < 0) {
        t->exit_code = 255;
        free(t->error);
        t->error = strdup("the task's supervisor died; its exit status is "
                          "unknown");
    }
    if (status >= 0 && WIFEXITED(status))
        t->exit_code = WEXITSTATUS(status);
    if (status >= 0 && WIFSIGNALED(status))
        t->signal = WTERMSIG(status);
    if (crater_cg_oom_kills(a->cg, t->cg, &ooms, NULL) == 0 && ooms > 0)
        t->oom = true;
    crater_cg_kill(a->cg, t->cg, SIGKILL, NULL); /* stragglers */
    ctr_exited(a, t, status);
    /* the next task may take its cgroup now, and its working directory
     * when the task left it as made: no process is left to write in it */
    if (cgpool_keep(a, t) && t->workdir && spare_give_workdir(a, t)) {
        free(t->workdir);
        t->workdir = NULL;
    }
    /* its GPU slice file goes before craterd hears of the exit: a job
     * reported finished holds nothing on the node's shared memory */
    agent_slice_cleanup(t);
    for (int s = 0; s < 2; s++)
        t->log_final[s] = file_size(t->log_path[s]);
    report_kick(a);
}

static void measure(crater_agent_t *a, atask_t *t, int64_t now)
{
    uint64_t cpu_ns = 0, mem = 0;

    if (crater_cg_usage(a->cg, t->cg, &cpu_ns, &mem, NULL) < 0)
        return;
    if (t->cpu_ms_prev && now > t->cpu_ms_prev && cpu_ns >= t->cpu_ns_prev)
        t->cpu_millis = (double)(cpu_ns - t->cpu_ns_prev) / 1e3
                        / (double)(now - t->cpu_ms_prev);
    t->cpu_ns_prev = cpu_ns;
    t->cpu_ms_prev = now;
    t->mem_bytes = mem;
}

/* The pid pipe's writer is gone (checked now: a descriptor number that a
   poll reported may belong to a newer task's pipe by the time it is
   looked at). */
static bool pipe_ended(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};

    return poll(&p, 1, 0) == 1 && (p.revents & POLLHUP);
}

/* A shim that is not this agent's child (the spawner's, an adopted one)
 * is gone: its pid pipe has hung up (the shim closes it only by exiting),
 * or, with no pipe watched, /proc no longer has it. */
static bool stray_shim_gone(const atask_t *t)
{
    return t->exit_watch ? pipe_ended(t->pid_fd)
                         : !taskstate_alive(t->shim, t->shim_start);
}

/* 1 when t ended: its exit file, or its shim gone without one. */
static int check_exit(crater_agent_t *a, atask_t *t)
{
    int status, st, reaped = 0;
    int64_t at;

    if (t->shim_child && t->shim > 0
        && waitpid(t->shim, &st, WNOHANG) == t->shim) {
        t->shim_child = false;
        reaped = 1;
    }
    if (taskstate_exit(t, &status, &at) == 1) {
        exited(a, t, status, at);
        return 1;
    }
    if (reaped || (!t->shim_child && stray_shim_gone(t))) {
        crater_log(LOG_ERR,
                   "job %s: the supervisor of pid %d is gone without an exit "
                   "status",
                   t->job,
                   (int)t->pid);
        exited(a, t, -1, 0);
        return 1;
    }
    return 0;
}

static bool among(int fd, const int *set, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (set[i] == fd)
            return true;
    return false;
}

void task_supervise(
    crater_agent_t *a, int64_t now, const int *ready, size_t nready, bool full)
{
    for (size_t i = 0; i < a->ntasks; i++) {
        atask_t *t = a->tasks[i];
        if (t->state != AT_RUNNING)
            continue;
        if (!full) { /* only the tasks whose shim just ended */
            if (t->exit_watch && among(t->pid_fd, ready, nready))
                check_exit(a, t);
            continue;
        }
        if (check_exit(a, t))
            continue;
        timelimit_check(a, t);
        if (t->stop_requested && !t->term_sent && !t->killed)
            term(a, t);
        if (t->kill_at_ms && now >= t->kill_at_ms && !t->killed) {
            t->killed = true;
            ctr_kill(a, t); /* not in the process group */
            if (t->pid > 0)
                kill(-t->pid, SIGKILL);
            crater_cg_kill(a->cg, t->cg, SIGKILL, NULL);
        }
        measure(a, t, now);
    }
}

void task_reap(crater_agent_t *a)
{
    struct pollfd *fds = calloc(a->ntasks + 1, sizeof(*fds));
    atask_t **of = calloc(a->ntasks + 1, sizeof(*of));
    size_t n = 0;

    for (size_t i = 0; fds && of && i < a->ntasks; i++)
        if (a->tasks[i]->state == AT_RUNNING && a->tasks[i]->exit_watch) {
            of[n] = a->tasks[i];
            fds[n] = (struct pollfd){.fd = of[n]->pid_fd, .events = POLLIN};
            n++;
        }
    if (n > 0 && poll(fds, n, 0) > 0)
        for (size_t i = 0; i < n; i++)
            if (fds[i].revents)
                check_exit(a, of[i]);
    free(fds);
    free(of);
}

crater_proto_usage_t task_usage(const atask_t *t)
{
    return (crater_proto_usage_t){
        .job = t->job,
        .attempt = t->attempt,
        .replica = t->replica,
        .cpu_millis = t->cpu_millis,
        .memory_bytes = t->mem_bytes,
    };
}

crater_proto_event_t task_event(const atask_t *t, bool exit)
{
    if (!exit)
        return (crater_proto_event_t){
            .job = t->job,
            .attempt = t->attempt,
            .replica = t->replica,
            .event = CRATER_PROTO_STARTED,
            .pid = t->pid,
            .time_ms = t->started_ms,
        };
    return (crater_proto_event_t){
        .job = t->job,
        .attempt = t->attempt,
        .replica = t->replica,
        .event = CRATER_PROTO_EXITED,
        .time_ms = t->ended_ms,
        .exit_code = t->exit_code,
        .signal = t->signal,
        .oom = t->oom,
        .error = t->error,
        .has_logs = true,
        .logs = {t->log_final[0], t->log_final[1]},
    };
}

crater_proto_held_t task_held(const atask_t *t)
{
    return (crater_proto_held_t){
        .job = t->job,
        .attempt = t->attempt,
        .replica = t->replica,
        .running = t->state == AT_RUNNING,
        .pid = t->pid,
        .started_ms = t->started_ms,
    };
}

void task_free(crater_agent_t *a, atask_t *t)
{
    if (!t)
        return;
    if (t->pid_wait || t->exit_watch)
        close(t->pid_fd);
    if (t->state == AT_EXITED || t->pid <= 0)
        cgpool_give(a, t);
    probe_free(t->probe);
    free(t->job);
    free(t->log_path[0]);
    free(t->log_path[1]);
    free(t->dir);
    free(t->workdir);
    free(t->error);
    free(t->ctr);
    free(t->ctr_image);
    agent_slice_cleanup(t);
    ckenv_cleanup(t);
    free(t);
}

void task_remove(crater_agent_t *a, atask_t *t)
{
    for (size_t i = 0; i < a->ntasks; i++)
        if (a->tasks[i] == t) {
            a->tasks[i] = a->tasks[--a->ntasks];
            break;
        }
    if (t->state == AT_EXITED)
        ctr_cleanup(a, t);
    if (t->state == AT_EXITED && spare_give(a, t)) {
        if (!spare_give_workdir(a, t))
            taskstate_remove(&(atask_t){.workdir = t->workdir});
    } else if (t->state == AT_EXITED) { /* its files served their purpose */
        unlink(t->log_path[0]);
        unlink(t->log_path[1]);
        taskstate_remove(t);
    }
    task_free(a, t);
}
