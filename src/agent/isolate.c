/* isolate.c - what keeps one tenant's tasks from another's on this node,
 * set up once at the agent's start (doc/security.md).
 *
 * Users: an agent running as root starts every task under a task user. By
 * default (agent.tenantUsers) that is the uid and gid craterd allocated to
 * the task's tenant (server.taskUidRange, the same on every node), so two
 * tenants' tasks cannot read each other's /proc/PID/environ, ptrace or
 * signal each other, or open each other's 0700 working directories;
 * agent.taskUser is the user of tasks craterd sent no uid for (and of all
 * tasks with agent.tenantUsers false). An agent that is not root runs its
 * tasks as itself.
 *
 * /proc: with agent.hideProcesses, each task runs in a private mount
 * namespace with a procfs mounted hidepid=invisible (Linux 5.8), so it
 * does not even see other users' processes, the agent's and their
 * command lines included. hidepid hides by uid, so one such namespace
 * serves every task: the agent prepares it once (agent_procns) and each
 * task enters it with setns, instead of an unshare and a mount of its own
 * (about 0.7 ms per start, and a namespace torn down at each exit); it is
 * made again when the agent's mount table changed, so that a task sees the
 * mounts there are when it starts. Probed here once, in a child: when it cannot
 * work (an old kernel, no CAP_SYS_ADMIN) the agent warns once and tasks
 * see every process (other uids' environ, fds and memory stay closed).
 *
 * Directories: DATA (task records, logs, tokens) is 0700 whatever
 * existed, so a task user cannot enter it. Default working directories
 * therefore live elsewhere, under agent.workRoot: made root-owned 0711
 * (a task user can pass through to its own 0700 directory, list nothing,
 * create nothing).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/internal.h"
#include "agent/taskexec.h"
#include "crater/log.h"
#include "crater/privdir.h"

/* The task user: agent.taskUser when the agent runs as root (root itself
 * only with agent.allowRootTasks), otherwise the agent's own user. */
static int task_user(crater_agent_t *a, crater_error_t *err)
{
    const char *name = a->cfg ? a->cfg->agent.task_user : "nobody";
    struct passwd *pw;

    a->switch_user = false;
    if (geteuid() != 0)
        return 0;
    if (!name || !(pw = getpwnam(name)))
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "agent.taskUser",
                                   "agent.taskUser: no user '%s' on this "
                                   "machine",
                                   name ? name : "");
    if (pw->pw_uid == 0 && !(a->cfg && a->cfg->agent.allow_root_tasks))
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "agent.taskUser",
                                   "agent.taskUser is root: set "
                                   "agent.allowRootTasks to allow it");
    a->uid = pw->pw_uid;
    a->gid = pw->pw_gid;
    a->switch_user = pw->pw_uid != 0;
    a->tenant_users = !a->cfg || a->cfg->agent.tenant_users;
    return 0;
}

/* mkdir -p of path's parents (0755) and path itself (mode). */
static int mkdirs(const char *path, mode_t mode)
{
    char buf[4096];
    size_t n = strlen(path);

    if (n >= sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(buf, mode) < 0 && errno != EEXIST ? -1 : 0;
}

/* The work root of a root agent: a directory root owns and only root may
 * write to (anyone else could plant a symlink where a task's working
 * directory will be made), mode 0711. */
static int work_root(crater_agent_t *a, crater_error_t *err)
{
    struct stat st;

    if (mkdirs(a->work_root, 0711) < 0 || lstat(a->work_root, &st) < 0)
        return crater_errorf_field(err,
                                   CRATER_EIO,
                                   "agent.workRoot",
                                   "agent.workRoot %s: %s",
                                   a->work_root,
                                   strerror(errno));
    if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022))
        return crater_errorf_field(err,
                                   CRATER_EIO,
                                   "agent.workRoot",
                                   "agent.workRoot %s: must be a directory "
                                   "owned by root that only root writes to",
                                   a->work_root);
    if ((st.st_mode & 07777) != 0711 && chmod(a->work_root, 0711) < 0)
        return crater_errorf_field(err,
                                   CRATER_EIO,
                                   "agent.workRoot",
                                   "agent.workRoot %s: %s",
                                   a->work_root,
                                   strerror(errno));
    return 0;
}

/* DATA, DATA/tasks (task records and output): 0700. The
 * work root: agent.workRoot for a root agent, DATA/work otherwise (its
 * tasks run as the agent's user). */
static int make_dirs(crater_agent_t *a, crater_error_t *err)
{
    static const char *const subs[] = {"/tasks"};
    const char *root = a->cfg ? a->cfg->agent.work_root : NULL;
    char path[4096];

    if (crater_private_dir(a->data_dir, "--data-dir", err) < 0)
        return -1;
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
        snprintf(path, sizeof(path), "%s%s", a->data_dir, subs[i]);
        if (crater_private_dir(path, "--data-dir", err) < 0)
            return -1;
    }
    if (a->switch_user) {
        if (!(a->work_root = strdup(root ? root : "/var/lib/crater/work")))
            return crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return work_root(a, err);
    }
    snprintf(path, sizeof(path), "%s/work", a->data_dir);
    if (!(a->work_root = strdup(path)))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    return crater_private_dir(path, "--data-dir", err);
}

/* Can a child hide /proc? Tried in a child (its namespace dies with it);
 * the cost is logged: it is paid by every task start. */
static bool probe_hide(void)
{
    struct timespec t0, t1;
    int st = 0;
    pid_t pid;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    if ((pid = fork()) == 0)
        _exit(taskexec_hide_procs() == 0 ? 0 : 1);
    if (pid < 0)
        return false;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return false;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return false;
    crater_log(LOG_INFO,
               "tasks get a private /proc (hidepid=invisible): %.0f us "
               "in a probe",
               (double)(t1.tv_sec - t0.tv_sec) * 1e6
                   + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3);
    return true;
}

/* A mount namespace with the hidden /proc, held by an fd (>= 10, so that
 * it is never one the shim's dup2 to 3 or 4 would clobber): a child makes
 * it, says so through a pipe and waits to be killed. -1 when that fails. */
static int procns_make(void)
{
    char path[64], c = 0;
    int p[2], fd = -1, st;
    pid_t pid;

    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    if ((pid = fork()) == 0) {
        c = taskexec_hide_procs() == 0 ? 'y' : 'n';
        if (write(p[1], &c, 1) == 1)
            pause();
        _exit(0);
    }
    close(p[1]);
    if (pid > 0 && read(p[0], &c, 1) == 1 && c == 'y') {
        snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
        if ((st = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
            fd = fcntl(st, F_DUPFD_CLOEXEC, 10);
            close(st);
        }
    }
    close(p[0]);
    if (pid > 0) {
        kill(pid, SIGKILL);
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
    }
    return fd;
}

/* The agent's mounts changed since the last call (poll on its
 * /proc/self/mounts: POLLPRI once per change). */
static bool mounts_changed(crater_agent_t *a)
{
    struct pollfd p = {.fd = a->mounts_fd, .events = POLLPRI};

    return a->mounts_fd >= 0 && poll(&p, 1, 0) > 0
           && (p.revents & (POLLPRI | POLLERR));
}

int agent_procns(crater_agent_t *a)
{
    int fd;

    if (a->procns_fd >= 0 && !mounts_changed(a))
        return a->procns_fd;
    if ((fd = procns_make()) < 0)
        return a->procns_fd; /* the old one, or -1: each task makes its own */
    if (a->procns_fd >= 0)
        close(a->procns_fd);
    return a->procns_fd = fd;
}

void agent_isolation_close(crater_agent_t *a)
{
    if (a->procns_fd >= 0)
        close(a->procns_fd);
    if (a->mounts_fd >= 0)
        close(a->mounts_fd);
    a->procns_fd = a->mounts_fd = -1;
}

int agent_isolation_setup(crater_agent_t *a, crater_error_t *err)
{
    if (task_user(a, err) < 0 || make_dirs(a, err) < 0)
        return -1;
    a->hide_procs = false;
    if (!a->switch_user || (a->cfg && !a->cfg->agent.hide_processes))
        return 0;
    if (!(a->hide_procs = probe_hide())) {
        crater_log(LOG_WARNING,
                   "agent.hideProcesses: cannot mount a private /proc with "
                   "hidepid=invisible (Linux >= 5.8 and CAP_SYS_ADMIN "
                   "needed): tasks see every process on this node; other "
                   "users' environ, memory and fds stay closed to them");
        return 0;
    }
    a->mounts_fd = open("/proc/self/mounts", O_RDONLY | O_CLOEXEC);
    agent_procns(a);
    return 0;
}
