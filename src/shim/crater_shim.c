/* crater_shim.c - crater-shim, the supervisor of one task (taskexec.h).
 *
 * The agent starts one per task, or forks them from a spawner (below),
 * and this small process starts the task with vfork, so a task starts in
 * well under a millisecond of process creation. The agent finds it next
 * to its own executable, at the build tree's path, or through
 * $CRATER_SHIM; without it the agent forks an in-process shim (the same
 * code).
 *
 *   crater-shim EXIT_PATH STDOUT STDERR DIR|- UID GID FLAGS NPROCS PROCS...
 *   -- ARGV...
 *
 * with the task's environment as its own and fd 3 the pipe that takes the
 * task's pid. UID -1: keep the user. FLAGS: "p" hides other users'
 * processes (taskexec_hide_procs), "pn" hides them by entering the mount
 * namespace open at fd 4 (the agent's prepared one), "-" nothing. Not for
 * people to run. Once parsed, its command line shrinks to "crater-shim
 * EXIT_PATH" (the arguments are copied and their memory cleared, as
 * setproctitle does), so `ps` and `pgrep -f` show the task's command once, on
 * the task.
 *
 *   crater-shim --spawner PADDING
 *
 * is the spawner: one per agent, started once, fd 3 a SOCK_SEQPACKET
 * socket to the agent. Each message is one shim's command line and
 * environment ("ARGC\0" then ARGC strings, then the environment's
 * strings, each ending in \0) with the pid pipe's write end (and the
 * namespace's fd) attached; the spawner forks, the child becomes that shim
 * (fds 3 and 4 as above, the command line rewritten over PADDING), and the
 * answer is its pid, or -errno. Why: the agent's posix_spawn copied the
 * agent's descriptor table into each child and closed it again at exec
 * (hundreds of descriptors in `crater up`: its sockets, a pipe and a
 * socket per running task), and each shim loaded itself: a fork of this
 * small process costs neither. The kernel reaps the shims (SIGCHLD
 * ignored here, reset in each shim); the spawner ends when the agent's end
 * closes, and its shims live on (adoption: doc/agent.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/taskexec.h"

static int usage(void)
{
    fputs("crater-shim: started by crater-agent, not by hand\n", stderr);
    return 2;
}

/* Copies of argv[from..argc-1]; the originals' memory cleared. */
static char **hide_args(int argc, char **argv, int from)
{
    char **v = calloc((size_t)argc + 1, sizeof(*v));
    char *end = argv[argc - 1] + strlen(argv[argc - 1]);

    if (!v)
        return NULL;
    for (int i = 0; i < argc; i++)
        if (!(v[i] = strdup(argv[i])))
            return NULL;
    if (from < argc)
        memset(argv[from], 0, (size_t)(end - argv[from]));
    return v;
}

/* The shim: argv as on its command line (argv[0] unused). */
static int shim_main(int argc, char **argv)
{
    extern char **environ;
    static char tmp[4200];
    taskexec_t s = {0};
    long uid, gid, n;
    int i = 9;

    if (argc < 11)
        return usage();
    s.exit_path = argv[1];
    s.out = argv[2];
    s.errf = argv[3];
    s.dir = strcmp(argv[4], "-") != 0 ? argv[4] : NULL;
    uid = strtol(argv[5], NULL, 10);
    gid = strtol(argv[6], NULL, 10);
    s.hide_procs = strchr(argv[7], 'p') != NULL;
    s.procns_fd = s.hide_procs && strchr(argv[7], 'n') ? 4 : -1;
    n = strtol(argv[8], NULL, 10);
    if (n < 0 || n > argc - 10 || strcmp(argv[9 + n], "--") != 0
        || 10 + n >= argc)
        return usage();
    s.procs = argv + i;
    s.nprocs = (size_t)n;
    s.argv = argv + 10 + n;
    s.envp = environ;
    s.switch_user = uid >= 0;
    s.uid = (uid_t)uid;
    s.gid = (gid_t)gid;
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", s.exit_path) >= (int)sizeof(tmp))
        return usage();
    s.exit_tmp = tmp;
    taskexec_shim(&s, 3, true);
}

/* ---- the spawner ------------------------------------------------------- */

/* "ARGC\0" ARGC strings, then the environment's strings: argv and envp
   point into buf (NULL-terminated, calloc'd); -1 when malformed. */
static int parse_msg(char *buf, size_t len, char ***argv, char ***envp)
{
    size_t nstr = 0, k = 0, argc;
    char **v;

    if (len == 0 || buf[len - 1] != '\0')
        return -1;
    for (size_t i = 0; i < len; i++)
        nstr += buf[i] == '\0';
    argc = strtoul(buf, NULL, 10); /* at most the strings that follow */
    if (argc < 1 || argc >= nstr || !(v = calloc(nstr + 2, sizeof(*v))))
        return -1;
    for (char *p = buf + strlen(buf) + 1; p < buf + len; p += strlen(p) + 1) {
        if (k == argc)
            v[k++] = NULL; /* between argv and envp */
        v[k++] = p;
    }
    if (k == argc)
        v[k++] = NULL;
    *argv = v;
    *envp = v + argc + 1;
    return (int)argc;
}

/* The child's command line, over the spawner's (cmdline bytes from start
   to end): "crater-shim EXIT_PATH", cut to fit. */
static void retitle(char *start, char *end, const char *exit_path)
{
    size_t room = (size_t)(end - start), n;

    memset(start, 0, room);
    n = (size_t)snprintf(start, room, "crater-shim");
    if (n + 1 < room)
        snprintf(start + n + 1, room - n - 1, "%s", exit_path);
}

/* In the child: fds[0] to 3, fds[1] (if any) to 4, nothing else open
   beyond 2; never returns. */
static void become_shim(int argc, char **argv, char **envp, int *fds, int nfd)
{
    extern char **environ;
    int hi[2] = {-1, -1};

    signal(SIGCHLD, SIG_DFL); /* the shim waits for its task */
    for (int i = 0; i < nfd; i++)
        if ((hi[i] = fcntl(fds[i], F_DUPFD, 10)) < 0)
            _exit(1);
    if (dup2(hi[0], 3) < 0 || (nfd > 1 && dup2(hi[1], 4) < 0))
        _exit(1);
    for (int i = 0; i < nfd; i++) {
        close(hi[i]);
        if (fds[i] > 4)
            close(fds[i]);
    }
    environ = envp;
    _exit(shim_main(argc, argv));
}

static int spawner(char *title, char *title_end)
{
    static char buf[TASKEXEC_SPAWN_MSG_MAX];

    signal(SIGCHLD, SIG_IGN); /* shims are reaped by the kernel */
    signal(SIGPIPE, SIG_IGN);
    for (;;) {
        union {
            char b[CMSG_SPACE(2 * sizeof(int))];
            struct cmsghdr align;
        } c;
        struct iovec io = {.iov_base = buf, .iov_len = sizeof(buf)};
        struct msghdr m = {.msg_iov = &io,
                           .msg_iovlen = 1,
                           .msg_control = c.b,
                           .msg_controllen = sizeof(c.b)};
        struct cmsghdr *h;
        char **argv = NULL, **envp = NULL;
        int fds[2] = {-1, -1}, nfd = 0, argc;
        int32_t answer;
        ssize_t got = recvmsg(3, &m, MSG_CMSG_CLOEXEC);

        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return 0; /* the agent is gone */
        for (h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h))
            if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
                nfd = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                nfd = nfd > 2 ? 2 : nfd;
                memcpy(fds, CMSG_DATA(h), (size_t)nfd * sizeof(int));
            }
        argc = (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || nfd < 1
                   ? -1
                   : parse_msg(buf, (size_t)got, &argv, &envp);
        answer = argc < 0 ? -EINVAL : (int32_t)fork();
        if (answer == 0) {
            retitle(title, title_end, argv[1] ? argv[1] : "");
            become_shim(argc, argv, envp, fds, nfd);
        }
        if (answer < 0 && argc >= 0)
            answer = -errno;
        for (int i = 0; i < nfd; i++)
            close(fds[i]);
        free(argv);
        if (send(3, &answer, sizeof(answer), 0) != sizeof(answer))
            return 0;
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--spawner") == 0)
        return spawner(argv[0], argv[2] + strlen(argv[2]));
    if (argc < 11 || !(argv = hide_args(argc, argv, 2)))
        return usage();
    return shim_main(argc, argv);
}
