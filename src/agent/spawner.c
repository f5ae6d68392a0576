/* spawner.c - the agent's side of crater-shim's spawner (crater_shim.c):
 * one small process, started once, that forks each task's shim.
 *
 * Why: posix_spawn of crater-shim from the agent copies the agent's
 * descriptor table into the child and closes it again at exec; in
 * `crater up` (craterd and every node's agent in one process) that is
 * hundreds of descriptors during a burst (HTTP sockets, and a pid pipe and
 * a notice socket per running task), and with the shim's own load it was
 * about a fifth of the agents' CPU in a 1,000-task array (perf, B3 session
 * 10). A fork of the spawner copies a few pages and four descriptors.
 *
 * Protocol (SOCK_SEQPACKET, one message each way per shim): the shim's
 * command line and environment ("ARGC\0", then each string with its \0)
 * with the pid pipe's write end and, when tasks enter the agent's /proc
 * namespace, that namespace's descriptor attached (SCM_RIGHTS); the answer
 * is an int32: the shim's pid, or -errno. The shims are the spawner's
 * children, not the agent's: the agent learns their end from the pid pipe
 * and their exit file, as for an adopted task's shim (task.c).
 *
 * Failure: a spawner that cannot start, dies or answers nonsense is closed
 * and the agent warns once and goes on with posix_spawn; a message larger
 * than TASKEXEC_SPAWN_MSG_MAX (a huge environment) takes posix_spawn too.
 * When the agent stops, its end closes and the spawner exits; when the
 * agent dies, likewise, and the shims live on for the next agent to adopt.
 *
 * Only the work thread spawns (under a->mu), so the socket needs no lock
 * of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/internal.h"
#include "agent/taskexec.h"
#include "crater/log.h"

#define TITLE_ROOM 512 /* bytes each shim may rewrite its command line in */

void spawner_start(crater_agent_t *a)
{
    char pad[TITLE_ROOM],
        *argv[] = {(char *)a->shim_path, "--spawner", pad, NULL};
    char *envp[] = {NULL};
    posix_spawn_file_actions_t fa;
    int sv[2], rc, fd;

    a->spawn_fd = -1;
    if (!a->shim_path
        || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return;
    if (sv[1] == 3 && (fd = fcntl(sv[1], F_DUPFD_CLOEXEC, 10)) >= 0) {
        close(sv[1]); /* dup2(3, 3) would keep close-on-exec */
        sv[1] = fd;
    }
    memset(pad, ' ', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
    rc = posix_spawn(&a->spawner, a->shim_path, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);
    if (rc != 0) {
        crater_log(LOG_WARNING,
                   "crater-shim --spawner: %s; tasks start by posix_spawn",
                   strerror(rc));
        close(sv[0]);
        return;
    }
    a->spawn_fd = sv[0];
}

void spawner_stop(crater_agent_t *a)
{
    if (a->spawn_fd < 0)
        return;
    close(a->spawn_fd); /* the spawner reads EOF and exits */
    a->spawn_fd = -1;
    while (waitpid(a->spawner, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* "ARGC\0" and every string of argv and envp into a new buffer. */
static char *message(char *const *argv, char *const *envp, size_t *len)
{
    size_t n = 24, argc = 0, k;
    char *buf;

    for (char *const *p = argv; *p; p++, argc++)
        n += strlen(*p) + 1;
    for (char *const *p = envp; *p; p++)
        n += strlen(*p) + 1;
    if (n > TASKEXEC_SPAWN_MSG_MAX || !(buf = malloc(n)))
        return NULL;
    k = (size_t)snprintf(buf, 24, "%zu", argc) + 1;
    for (int pass = 0; pass < 2; pass++)
        for (char *const *p = pass ? envp : argv; *p; p++) {
            size_t l = strlen(*p) + 1;
            memcpy(buf + k, *p, l);
            k += l;
        }
    *len = k;
    return buf;
}

static int exchange(
    int fd, const char *msg, size_t len, const int *fds, int nfd)
{
    union {
        char b[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } c;
    struct iovec io = {.iov_base = (void *)msg, .iov_len = len};
    struct msghdr m = {.msg_iov = &io,
                       .msg_iovlen = 1,
                       .msg_control = c.b,
                       .msg_controllen = CMSG_SPACE((size_t)nfd * sizeof(int))};
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    int32_t answer;
    ssize_t got;

    memset(c.b, 0, sizeof(c.b));
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN((size_t)nfd * sizeof(int));
    memcpy(CMSG_DATA(h), fds, (size_t)nfd * sizeof(int));
    if (sendmsg(fd, &m, MSG_NOSIGNAL) != (ssize_t)len)
        return -EPIPE;
    while ((got = recv(fd, &answer, sizeof(answer), 0)) < 0 && errno == EINTR)
        ;
    return got == sizeof(answer) ? answer : -EPIPE;
}

pid_t spawner_spawn(
    crater_agent_t *a, char *const *argv, char *const *envp, int wfd, int nsfd)
{
    int fds[2] = {wfd, nsfd}, r;
    size_t len;
    char *msg;

    if (a->spawn_fd < 0 || !(msg = message(argv, envp, &len)))
        return -1;
    r = exchange(a->spawn_fd, msg, len, fds, nsfd >= 0 ? 2 : 1);
    free(msg);
    if (r > 0)
        return (pid_t)r;
    if (r == -EPIPE || r == 0) { /* gone, or nonsense: never again */
        crater_log(LOG_WARNING,
                   "node %s: the shim spawner is gone; tasks start by "
                   "posix_spawn",
                   a->node.name);
        spawner_stop(a);
    }
    return -1; /* a fork that failed: posix_spawn may still work */
}
