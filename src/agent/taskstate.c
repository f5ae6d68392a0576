/* taskstate.c - task records on disk, so that an agent can die and come
 * back without losing or duplicating its tasks.
 *
 * Each task has a directory DATA/tasks/<job>.<attempt>/ (replica r > 0 of
 * a multi-replica job: <job>.<attempt>.r<r>/) holding:
 *   task.json  written by the agent once the task runs (tmp + rename):
 *              job, attempt, replica, cgroup, pid of the task and of its
 *              shim with
 *              the shim's start time, start time, what the sampler and the
 *              GPU watchdog need, the time limit's deadline on the boot
 *              clock and whether it was hit (timelimit.c);
 *   exit       written by the shim when the task ends (task.c): "<wait
 *              status> <end time ms>\n";
 *   stdout, stderr  the task's output, opened by its shim as root (no task
 *              user can enter DATA), shipped to craterd by report.c.
 * A new agent adopts every record at start (before its threads run): a
 * task whose shim still lives keeps running under the new agent; one with
 * an exit file is reported exited; one with neither (its shim was killed)
 * is failed, and what is left in its cgroup is killed. The shim's pid is
 * checked together with its start time (/proc/PID/stat field 22), so a
 * reused pid is never taken for it. Records go with their task
 * (task_remove) once craterd has its exit and its output: into a spare
 * directory for the next task (spare.c), else removed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/internal.h"
#include "agent/taskexec.h"
#include "crater/log.h"

/* v into fd in one write: json_dumpfd writes token by token, a dozen
   write(2) calls per record on a task's start path (perf, B3). */
static int dump_record(const json_t *v, int fd)
{
    char *buf = json_dumps(v, JSON_COMPACT);
    size_t len = buf ? strlen(buf) : 0, off = 0;
    int rc = buf ? 0 : -1;

    while (buf && off < len) {
        ssize_t n = write(fd, buf + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = -1;
            break;
        }
        off += (size_t)n;
    }
    free(buf);
    return rc;
}

/* The start of a small file as a string (at most n - 1 bytes); -1 when
 * it cannot be read or is empty. */
static int read_text(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t got;

    if (fd < 0)
        return -1;
    got = read(fd, buf, n - 1);
    close(fd);
    if (got <= 0)
        return -1;
    buf[got] = '\0';
    return 0;
}

uint64_t taskstate_start_of(pid_t pid)
{
    char path[64], buf[1024], *p;
    unsigned long long start = 0;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (read_text(path, buf, sizeof(buf)) < 0 || !(p = strrchr(buf, ')')))
        return 0;
    /* after ") ": field 3 (state) ... field 22 (starttime) */
    if (sscanf(p + 2,
               "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
               "%*d %*d %*d %*d %llu",
               &start)
        != 1)
        return 0;
    return start;
}

bool taskstate_alive(pid_t pid, uint64_t start)
{
    uint64_t now;

    if (pid <= 0 || (kill(pid, 0) < 0 && errno == ESRCH))
        return false;
    now = taskstate_start_of(pid);
    return now != 0 && (start == 0 || now == start);
}

int taskstate_exit(const atask_t *t, int *status, int64_t *ended_ms)
{
    char path[4200], buf[64];
    long long st = 0, at = 0;

    snprintf(path, sizeof(path), "%s/exit", t->dir);
    if (read_text(path, buf, sizeof(buf)) < 0
        || sscanf(buf, "%lld %lld", &st, &at) < 1)
        return 0;
    *status = (int)st;
    *ended_ms = (int64_t)at;
    return 1;
}

static json_t *gpus_json(const atask_t *t)
{
    json_t *g = json_array();

    for (uint32_t i = 0; g && i < t->ngpus; i++)
        json_array_append_new(g,
                              json_pack("{s:i, s:I}",
                                        "index",
                                        (int)t->gpu[i],
                                        "memory_bytes",
                                        (json_int_t)t->gpu_bytes[i]));
    return g;
}

int taskstate_save(crater_agent_t *a, atask_t *t, crater_error_t *err)
{
    char path[4200], tmp[4200];
    json_t *v;
    int rc, fd;

    (void)a;
    v = json_pack("{s:s, s:i, s:i, s:s, s:i, s:i, s:I, s:I, s:I, s:I, s:o,"
                  " s:s?, s:s?, s:s?, s:b, s:I, s:s?}",
                  "job",
                  t->job,
                  "attempt",
                  (int)t->attempt,
                  "replica",
                  (int)t->replica,
                  "cgroup",
                  t->cg,
                  "pid",
                  (int)t->pid,
                  "shim",
                  (int)t->shim,
                  "shim_start",
                  (json_int_t)t->shim_start,
                  "started_ms",
                  (json_int_t)t->started_ms,
                  "memory_limit_bytes",
                  (json_int_t)t->mem_limit,
                  "cpu_millis",
                  (json_int_t)t->req_cpu_milli,
                  "gpus",
                  gpus_json(t),
                  "slice_path",
                  t->slice_path,
                  "mig_uuid",
                  t->mig_uuid[0] ? t->mig_uuid : NULL,
                  "workdir",
                  t->workdir,
                  "watch",
                  t->watch,
                  "uid",
                  (json_int_t)t->uid,
                  "agent_socket",
                  t->notice_name[0] ? t->notice_name : NULL);
    if (v && t->ctr
        && json_object_set_new(v,
                               "container",
                               json_pack("{s:s, s:s?}",
                                         "name",
                                         t->ctr,
                                         "image",
                                         t->ctr_image))
               < 0) {
        json_decref(v);
        v = NULL;
    }
    if (v && timelimit_save(t, v) < 0) {
        json_decref(v);
        v = NULL;
    }
    if (!v)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    snprintf(path, sizeof(path), "%s/task.json", t->dir);
    snprintf(tmp, sizeof(tmp), "%s/task.json.tmp", t->dir);
    if ((fd = taskexec_open_empty(tmp, O_CLOEXEC, 0600)) < 0) {
        rc = -1;
    } else {
        rc = dump_record(v, fd);
        rc = close(fd) < 0 ? -1 : rc;
    }
    json_decref(v);
    if (rc < 0 || rename(tmp, path) < 0)
        return crater_errorf(err,
                             CRATER_EIO,
                             "%s: cannot write the task record",
                             path);
    return 0;
}

static char *dup_or_null(json_t *v)
{
    const char *s = json_string_value(v);

    return s ? strdup(s) : NULL;
}

/* The atask of one record (adopted, running until checked). */
static atask_t *load_one(crater_agent_t *a, const char *dir, json_t *v)
{
    atask_t *t = calloc(1, sizeof(*t));
    const char *job = json_string_value(json_object_get(v, "job"));
    const char *cg = json_string_value(json_object_get(v, "cgroup"));
    json_t *g;
    size_t i;

    if (!t || !job || !cg) {
        free(t);
        return NULL;
    }
    t->adopted = true;
    t->log_resync = true;
    t->job = strdup(job);
    t->attempt = (uint32_t)json_integer_value(json_object_get(v, "attempt"));
    t->replica = (uint32_t)json_integer_value(json_object_get(v, "replica"));
    snprintf(t->cg, sizeof(t->cg), "%s", cg);
    t->pid = (pid_t)json_integer_value(json_object_get(v, "pid"));
    t->shim = (pid_t)json_integer_value(json_object_get(v, "shim"));
    t->shim_start =
        (uint64_t)json_integer_value(json_object_get(v, "shim_start"));
    t->started_ms = json_integer_value(json_object_get(v, "started_ms"));
    t->mem_limit =
        (uint64_t)json_integer_value(json_object_get(v, "memory_limit_bytes"));
    t->req_cpu_milli =
        (uint64_t)json_integer_value(json_object_get(v, "cpu_millis"));
    json_array_foreach(json_object_get(v, "gpus"), i, g)
    {
        if (t->ngpus == CRATER_MAX_GPUS_PER_NODE)
            break;
        t->gpu[t->ngpus] =
            (uint32_t)json_integer_value(json_object_get(g, "index"));
        t->gpu_bytes[t->ngpus++] =
            (uint64_t)json_integer_value(json_object_get(g, "memory_bytes"));
    }
    t->slice_path = dup_or_null(json_object_get(v, "slice_path"));
    snprintf(t->mig_uuid,
             sizeof(t->mig_uuid),
             "%s",
             json_string_value(json_object_get(v, "mig_uuid"))
                 ? json_string_value(json_object_get(v, "mig_uuid"))
                 : "");
    t->workdir = dup_or_null(json_object_get(v, "workdir"));
    t->watch = json_is_true(json_object_get(v, "watch"));
    t->uid = (uid_t)json_integer_value(json_object_get(v, "uid"));
    snprintf(t->notice_name,
             sizeof(t->notice_name),
             "%s",
             json_string_value(json_object_get(v, "agent_socket"))
                 ? json_string_value(json_object_get(v, "agent_socket"))
                 : "");
    timelimit_load(t, v);
    t->ctr =
        dup_or_null(json_object_get(json_object_get(v, "container"), "name"));
    t->ctr_image =
        dup_or_null(json_object_get(json_object_get(v, "container"), "image"));
    t->dir = strdup(dir);
    if (t->dir
        && (asprintf(&t->log_path[0], "%s/stdout", dir) < 0
            || asprintf(&t->log_path[1], "%s/stderr", dir) < 0))
        t->log_path[0] = t->log_path[1] = NULL;
    t->state = AT_RUNNING;
    if (!t->job || !t->dir || !t->log_path[0] || !t->log_path[1]) {
        task_free(a, t);
        return NULL;
    }
    return t;
}

/* Adopt the record in dir; 1 when a task was added. */
static int adopt_dir(crater_agent_t *a, const char *dir)
{
    char path[4500];
    json_t *v;
    atask_t *t;

    snprintf(path, sizeof(path), "%s/task.json", dir);
    if (!(v = json_load_file(path, 0, NULL))) {
        /* started but never recorded: nothing to adopt */
        taskstate_remove(&(atask_t){.dir = (char *)dir});
        return 0;
    }
    t = load_one(a, dir, v);
    json_decref(v);
    if (!t || task_add(a, t) < 0) {
        task_free(a, t);
        return 0;
    }
    if (taskstate_alive(t->shim, t->shim_start))
        ckenv_adopt(a, t); /* its CRATER_AGENT_SOCKET works again */
    crater_log(LOG_INFO,
               "job %s attempt %u: adopted (pid %d, %s)",
               t->job,
               t->attempt,
               (int)t->pid,
               taskstate_alive(t->shim, t->shim_start) ? "running"
                                                       : "ended meanwhile");
    return 1;
}

int taskstate_adopt(crater_agent_t *a)
{
    char path[4096];
    struct dirent *e;
    DIR *d;
    int n = 0;

    snprintf(path, sizeof(path), "%s/tasks", a->data_dir);
    if (!(d = opendir(path)))
        return 0;
    while ((e = readdir(d))) {
        char dir[4400];
        if (e->d_name[0] == '.')
            continue;
        snprintf(dir, sizeof(dir), "%s/%s", path, e->d_name);
        n += adopt_dir(a, dir);
    }
    closedir(d);
    /* the supervisor thread checks each one's exit on its first tick */
    return n;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)f;
    if (flag == FTW_DP)
        rmdir(p);
    else
        unlink(p);
    return 0;
}

/* rm -rf path; an empty directory (most working directories) by one
   rmdir, without the walk's open, read and stat. */
static void rm_rf(const char *path)
{
    if (rmdir(path) == 0 || errno == ENOENT)
        return;
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void taskstate_remove(const atask_t *t)
{
    if (t->dir)
        rm_rf(t->dir);
    if (t->workdir)
        rm_rf(t->workdir);
}
