/* ckenv.c - what a task gets for checkpointing (issue 14, doc/agent.md
 * "Checkpoints"): its checkpoint directory, its agent socket, and the
 * queue of reports the event thread sends to craterd.
 *
 * The checkpoint directory is the job's checkpoint.dir, the same path on
 * every attempt so that a requeued job finds its last checkpoint. It is
 * made with the task's own uid and gid: a forked child drops to the task
 * user and runs mkdir -p (mode 0700) there, so the agent (root) never
 * creates or chowns anything in a place the tenant named; what the task
 * user may not make fails the start with the path and the reason.
 *
 * The socket: one per task, an abstract Unix socket (Linux) named
 * "crater-" and 128 random bits, given as CRATER_AGENT_SOCKET=@<name> (the
 * '@' stands for the leading NUL, as in ss and systemd). Abstract names
 * have no file: a task start makes and removes no directory or inode for
 * it (each was two inodes in the work root, on the filesystem where
 * inode churn is expensive, spare.c). They have no permissions either:
 * another process in the node's network namespace that learns the name
 * (/proc/net/unix lists them) can connect, so the server drops every peer
 * whose uid (SO_PEERCRED, from the kernel) is not the task's or root's
 * (notice.c), before reading a byte; the random name keeps anyone from
 * binding it first. It is listening before the task starts; when it
 * cannot be made the task has SIGTERM only, with a warning. The name is
 * kept in the task record (taskstate.c), and an agent that adopts the
 * task binds it again (ckenv_adopt), so the task's CRATER_AGENT_SOCKET
 * outlives a restart of the agent: clients that reconnect after a failed
 * call (the SDKs do) find it again.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/internal.h"
#include "crater/log.h"

/* mkdir -p path, mode 0700 for what it makes; errno on failure. Only
 * async-signal-safe calls (it runs in a forked child). */
static int mkdirs_700(const char *path)
{
    char buf[CRATER_PROTO_MAX_STR + 1];
    size_t n = strlen(path);

    if (n >= sizeof(buf))
        return ENAMETOOLONG;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        buf[i] = '\0';
        if (mkdir(buf, 0700) < 0 && errno != EEXIST)
            return errno;
        buf[i] = path[i];
    }
    return access(path, W_OK | X_OK) < 0 ? errno : 0;
}

/* Make dir as the task's user: a child that drops to it first. */
static int make_ckpt_dir(const atask_t *t, const char *dir, crater_error_t *err)
{
    int status = 0, e;
    pid_t pid;

    if (!t->switch_user)
        e = mkdirs_700(dir);
    else if ((pid = fork()) < 0)
        e = errno;
    else if (pid == 0) {
        if (setgroups(0, NULL) < 0 || setgid(t->gid) < 0 || setuid(t->uid) < 0)
            _exit(EPERM);
        _exit(mkdirs_700(dir) & 0xff);
    } else {
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        e = WIFEXITED(status) ? WEXITSTATUS(status) : EIO;
    }
    if (e)
        return crater_errorf_field(err,
                                   CRATER_EIO,
                                   "checkpoint.dir",
                                   "checkpoint.dir %s: %s (as uid %u)",
                                   dir,
                                   strerror(e),
                                   (unsigned)t->uid);
    return 0;
}

/* A fresh name "crater-<128 random bits>" into name (n >= 40). */
static int new_name(char *name, size_t n)
{
    unsigned char r[16];
    size_t len;

    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
        return -1;
    len = (size_t)snprintf(name, n, "crater-");
    for (size_t i = 0; i < sizeof(r) && len + 2 < n; i++)
        len += (size_t)snprintf(name + len, n - len, "%02x", r[i]);
    return 0;
}

/* Bind and listen on the abstract name "\0<name>". */
static int listen_abstract(const char *name)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    int fd;

    if (len + 1 > sizeof(sa.sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(sa.sun_path + 1, name, len); /* sun_path[0] = 0: abstract */
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (bind(fd,
             (struct sockaddr *)&sa,
             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len))
            < 0
        || listen(fd, 8) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static void open_socket(crater_agent_t *a,
                        atask_t *t,
                        crater_proto_task_t *task)
{
    char name[sizeof(t->notice_name)], env[sizeof(name) + 1];
    int fd = -1;

    if (new_name(name, sizeof(name)) < 0 || (fd = listen_abstract(name)) < 0) {
        crater_log(LOG_WARNING,
                   "job %s: no agent socket (%s); the task gets SIGTERM only",
                   t->job,
                   strerror(errno));
        return;
    }
    t->notice_fd = fd;
    t->notice_fd_held = true;
    memcpy(t->notice_name, name, sizeof(name));
    snprintf(env, sizeof(env), "@%s", name);
    if (crater_proto_task_setenv(task, "CRATER_AGENT_SOCKET", env) < 0)
        crater_log(LOG_WARNING, "job %s: out of memory", t->job);
    notice_kick(a);
}

/* The old agent's descriptors died with it, so the kernel freed the name;
 * only the task record knew it, and 128 random bits keep anyone else from
 * having taken it meanwhile (if someone did, bind fails and we warn). */
void ckenv_adopt(crater_agent_t *a, atask_t *t)
{
    int fd;

    if (!t->notice_name[0] || t->notice_fd_held)
        return;
    if ((fd = listen_abstract(t->notice_name)) < 0) {
        crater_log(LOG_WARNING,
                   "job %s attempt %u: agent socket @%s not bound again "
                   "(%s); the task gets SIGTERM only",
                   t->job,
                   t->attempt,
                   t->notice_name,
                   strerror(errno));
        return;
    }
    t->notice_fd = fd;
    t->notice_fd_held = true;
    notice_kick(a);
}

int ckenv_setup(crater_agent_t *a,
                atask_t *t,
                crater_proto_task_t *task,
                crater_error_t *err)
{
    const char *dir = task->checkpoint_dir;

    if (dir) {
        if (dir[0] != '/')
            return crater_errorf_field(err,
                                       CRATER_EINVAL,
                                       "checkpoint.dir",
                                       "checkpoint.dir %s: not absolute",
                                       dir);
        if (make_ckpt_dir(t, dir, err) < 0)
            return -1;
        if (crater_proto_task_setenv(task, "CRATER_CHECKPOINT_DIR", dir) < 0)
            return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    open_socket(a, t, task);
    return 0;
}

void ckenv_cleanup(atask_t *t)
{
    if (t->notice_fd_held)
        close(t->notice_fd);
    t->notice_fd_held = false;
    for (unsigned i = 0; i < t->nckq; i++)
        crater_proto_ckpt_clear(&t->ckq[i]);
    t->nckq = 0;
}

void ckenv_report(crater_agent_t *a, atask_t *t, crater_proto_ckpt_t *c)
{
    if (t->nckq == AGENT_CKQ_MAX) { /* craterd is away: keep the newest */
        crater_proto_ckpt_clear(&t->ckq[0]);
        memmove(&t->ckq[0], &t->ckq[1], (AGENT_CKQ_MAX - 1) * sizeof(*c));
        t->nckq--;
    }
    t->ckq[t->nckq++] = *c;
    memset(c, 0, sizeof(*c));
    report_kick(a);
}

void ckenv_progress(crater_agent_t *a, atask_t *t, uint64_t step)
{
    t->progress_step = step;
    t->progress_pending = true;
    report_kick(a);
}

void task_notice(crater_agent_t *a, atask_t *t, crater_proto_notice_t why)
{
    if (t->state != AT_RUNNING || why == CRATER_NOTICE_NONE
        || t->notice != CRATER_NOTICE_NONE)
        return;
    t->notice = why;
    crater_log(LOG_INFO,
               "job %s attempt %u: preemption notice (%s)",
               t->job,
               t->attempt,
               crater_proto_notice_name(why));
    notice_kick(a);
}
