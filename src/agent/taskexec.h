/* taskexec.h - starting a task under its shim: the code shared by the
 * agent (src/agent/task.c) and the crater-shim program
 * (src/shim/crater_shim.c). Only async-signal-safe calls after a fork.
 *
 * The shim (slurmstepd, containerd-shim): leaves the agent's session,
 * ignores SIGTERM/SIGINT/SIGHUP, keeps only fd 3 (where it writes the
 * task's pid, and which it keeps open until it exits, so the agent's end
 * of the pipe reports the exit at once), starts the task, waits for it
 * and writes "<wait status> <end time ms>\n" to exit_tmp (no fsync) and
 * renames it to exit_path. The
 * task: its own process group, "0" (itself) written into each cgroup file
 * path (limited before it runs any code of its own), stdin /dev/null,
 * stdout/stderr to its log files (opened as root in its 0700 record
 * directory under the agent's 0700 DATA, O_NOFOLLOW: no path the task controls
 * is opened as root), with hide_procs a private mount namespace whose /proc is
 * a fresh procfs mounted hidepid=invisible (other users' processes, the agent's
 * too, are not there: the agent's prepared one entered with setns, else one of
 * its own), the task user (groups, gid, uid), and only then its working
 * directory, entered with the task user's rights: a directory the task
 * user cannot reach is refused in its stderr log, never entered as root.
 * Then an empty signal mask and default dispositions, and execvpe.
 */
#ifndef CRATER_AGENT_TASKEXEC_H
#define CRATER_AGENT_TASKEXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Everything the shim and the task need, prepared before any fork.
 * Borrowed pointers; the caller keeps them alive. */
typedef struct taskexec {
    char *const *argv, *const *envp;
    char *const *procs; /* its cgroups (crater_cg_procs_paths()) */
    size_t nprocs;
    const char *out, *errf, *dir; /* dir NULL: stay */
    const char *exit_tmp, *exit_path;
    bool switch_user;
    bool hide_procs; /* own /proc, hidepid=invisible (before the drop) */
    int procns_fd;   /* with hide_procs: a mount namespace that has such a
                        /proc (setns), or -1: unshare and mount one */
    uid_t uid;
    gid_t gid;
} taskexec_t;

/* Unshare the mount namespace, make / recursively private and mount a
 * fresh procfs on /proc with hidepid=invisible: 0, or -1 and errno. Only
 * async-signal-safe calls; for a child that is about to drop root (and
 * for the agent's probe at start). */
int taskexec_hide_procs(void);

/* The task, in a child: never returns (exit 126 when its setup fails,
 * 127 when it cannot be executed). */
void taskexec_child(const taskexec_t *s) __attribute__((noreturn));

/* open(path, O_WRONLY | O_CREAT | extra, mode), the file cut to 0 bytes
 * only when it is not empty already (a recycled file, spare.c: ext4
 * flushes a truncated file when it is closed); -1 and errno on error.
 * Async-signal-safe. */
int taskexec_open_empty(const char *path, int extra, mode_t mode);

/* Largest message to crater-shim's spawner (crater_shim.c): a shim's
 * command line and environment; a larger one is started by posix_spawn. */
#define TASKEXEC_SPAWN_MSG_MAX (128 * 1024)

/* The shim, in a fresh process whose fd wfd takes the task's pid (-1 when
 * it cannot start it): never returns. vfork_task: start the task with
 * vfork (cheap in a small process such as crater-shim; a fork of the big
 * agent process copies its page tables). */
void taskexec_shim(const taskexec_t *s, int wfd, bool vfork_task)
    __attribute__((noreturn));

#endif /* CRATER_AGENT_TASKEXEC_H */
