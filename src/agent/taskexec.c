/* taskexec.c - the task's and the shim's code after fork (taskexec.h):
 * shared by the agent (its fallback, in-process shim) and crater-shim.
 * Only async-signal-safe calls: both run in children of a multithreaded
 * process or of a vfork.
 */
#include "agent/taskexec.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Decimal digits of v (>= 0) at *k in buf. */
static void put_num(char *buf, size_t *k, int64_t v)
{
    char tmp[24];
    int n = 0;

    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    while (n > 0)
        buf[(*k)++] = tmp[--n];
}

/* Closes every descriptor from lo up: close_range(2) by its number, since
 * musl (the shim's libc where the build has it) has no wrapper. */
static void close_from(unsigned lo)
{
    (void)syscall(SYS_close_range, lo, ~0U, 0);
}

/* This process into the task's cgroups: "0" is the writer (v1's "tasks"
 * files: this thread, the only one; crater_cg_procs_paths()). */
static void join_cgroups(char *const *procs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int fd = open(procs[i], O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (write(fd, "0", 1) < 0)
                _exit(126);
            close(fd);
        }
    }
}

/* "crater: WHAT ARG: REASON\n" on fd 2 (the task's stderr log), then
 * _exit(code): a task that cannot start says why in its own log. */
static void fail(const char *what, const char *arg, int e, int code)
    __attribute__((noreturn));
static void fail(const char *what, const char *arg, int e, int code)
{
    const char *why = e == ENOENT    ? "no such file or directory"
                      : e == EACCES  ? "permission denied"
                      : e == ENOTDIR ? "not a directory"
                      : e == EPERM   ? "operation not permitted"
                      : e == ENOEXEC ? "not an executable format"
                                     : "system error";
    const char *parts[] = {"crater: ", what, " ", arg, ": ", why, "\n"};

    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        if (write(2, parts[i], strlen(parts[i])) < 0)
            break;
    _exit(code);
}

int taskexec_hide_procs(void)
{
    if (unshare(CLONE_NEWNS) < 0
        || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return -1;
    return mount("proc",
                 "/proc",
                 "proc",
                 MS_NOSUID | MS_NODEV | MS_NOEXEC,
                 "hidepid=invisible");
}

/* Groups, gid, uid: after this the task has no privilege left. */
static void drop_user(const taskexec_t *s)
{
    if (s->switch_user
        && (setgroups(0, NULL) < 0 || setgid(s->gid) < 0 || setuid(s->uid) < 0))
        fail("cannot switch to the task user of", s->argv[0], errno, 126);
}

/* open(path, O_WRONLY | O_CREAT | extra) cut to 0 bytes, truncating only
 * a file that is not empty: ext4 flushes a file on close once it was
 * truncated (auto_da_alloc), and the task's files are usually recycled
 * empty ones (spare.c). */
int taskexec_open_empty(const char *path, int extra, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | extra, mode);
    struct stat st;

    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0
        && ftruncate(fd, 0) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void taskexec_child(const taskexec_t *s)
{
    sigset_t none;
    int in = open("/dev/null", O_RDONLY);
    int out = taskexec_open_empty(s->out, O_NOFOLLOW, 0640);
    int err = taskexec_open_empty(s->errf, O_NOFOLLOW, 0640);

    /* default dispositions first (the shim ignores TERM/INT/HUP): once
     * this process has its group, a stop signal kills it or waits, blocked
     * (the agent's thread mask), until the mask is cleared before exec;
     * it is never ignored */
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    setpgid(0, 0);
    join_cgroups(s->procs, s->nprocs);
    if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0
        || dup2(err, 2) < 0)
        _exit(126);
    /* the agent probed this at start: failing now is not expected, and a
     * task that would see every process does not run */
    if (s->hide_procs
        && (s->procns_fd >= 0 ? setns(s->procns_fd, CLONE_NEWNS)
                              : taskexec_hide_procs())
               < 0)
        fail("cannot hide other users' processes for", s->argv[0], errno, 126);
    close_from(3);
    drop_user(s);
    /* entered as the task user: it reaches only what that user may */
    if (s->dir && chdir(s->dir) < 0)
        fail("cannot enter the working directory", s->dir, errno, 126);
    /* the agent blocks its stop signals: a task starts without that */
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvpe(s->argv[0], s->argv, s->envp);
    fail("cannot execute", s->argv[0], errno, errno == ENOENT ? 127 : 126);
}

static void write_exit(const taskexec_t *s, int status)
    __attribute__((noreturn));
static void write_exit(const taskexec_t *s, int status)
{
    struct timespec ts;
    char buf[64];
    size_t k = 0;
    int fd;

    clock_gettime(CLOCK_REALTIME, &ts);
    put_num(buf, &k, status);
    buf[k++] = ' ';
    put_num(buf, &k, (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    buf[k++] = '\n';
    /* written and renamed, not fsynced: the file is for an agent that
     * died and came back on a running machine (the page cache holds it).
     * After a power loss the task is gone too and, if its end was not yet
     * reported, the record says "status unknown"; an fsync per task was a
     * third of the shim's CPU time in a 1,000-element array (B3) */
    fd = taskexec_open_empty(s->exit_tmp, O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, buf, k) != (ssize_t)k)
        _exit(1);
    close(fd);
    _exit(rename(s->exit_tmp, s->exit_path) < 0 ? 1 : 0);
}

void taskexec_shim(const taskexec_t *s, int wfd, bool vfork_task)
{
    taskexec_t c = *s;
    int status = 0, fd, ns = -1;
    pid_t t;

    setsid();
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    /* the namespace's fd kept at 4 (moved out of the way first) */
    if (s->procns_fd >= 0 && (ns = fcntl(s->procns_fd, F_DUPFD, 10)) < 0)
        _exit(1);
    if ((wfd != 3 && dup2(wfd, 3) < 0) || (ns >= 0 && dup2(ns, 4) < 0))
        _exit(1);
    c.procns_fd = ns >= 0 ? 4 : -1;
    if ((fd = open("/dev/null", O_RDWR)) >= 0)
        for (int i = 0; i < 3; i++)
            if (fd != i)
                dup2(fd, i);
    close_from(ns >= 0 ? 5 : 4); /* the agent's sockets and files */
    t = vfork_task ? vfork() : fork();
    if (t == 0)
        taskexec_child(&c);
    if (c.procns_fd >= 0)
        close(c.procns_fd); /* the task has entered it */
    if (write(3, &t, sizeof(t)) != sizeof(t) || t < 0)
        _exit(1);
    /* fd 3 stays open until this process exits: its end is how the agent
     * learns at once that the exit file is there (task.c) */
    while (waitpid(t, &status, 0) < 0)
        if (errno != EINTR)
            _exit(1);
    write_exit(s, status);
}
