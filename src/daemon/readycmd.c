/* readycmd.c - readiness by command (inference.readiness, doc/inference.md
 * "Ports and readiness"): a replica is ready while its command exits 0,
 * as a Kubernetes exec readiness probe.
 *
 * Who runs it: craterd, on its own host, for replicas on nodes whose agent
 * registered from a loopback address (`crater up`, a single-node cluster,
 * an agent beside craterd): those replicas share craterd's file system,
 * processes and network, so the command sees what the replica sees. The
 * agents do not run commands for craterd yet (that needs a new order and
 * report in the agent protocol); a replica on another node is never
 * ready, and craterd says so in its log.
 *
 * How: the controller thread copies what a probe needs (argv, the
 * replica's environment, its workdir) under d->mu (ready_cmd_create),
 * and runs it without the lock (ready_cmd_run): posix_spawn in a process
 * group of its own, stdin/stdout/stderr on /dev/null, waited for by
 * polling every 5 ms up to its timeout, then SIGKILL to the whole group
 * (a shell's children too). Commands run one after another, so a slow
 * one delays the controller's tick by at most its timeout; the expected
 * workload is a few replicas with commands such as `test -e FILE` or a
 * curl of the model server, once per period (default 1 s).
 */
#include "daemon/readycmd.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crater/log.h"

extern char **environ;

struct ready_cmd {
    char **argv; /* NULL-terminated, owned */
    char **envp; /* NULL-terminated, owned */
    size_t nenv;
    char *cwd; /* NULL: craterd's */
    int64_t timeout_ms;
};

void ready_cmd_destroy(ready_cmd_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; c->argv && c->argv[i]; i++)
        free(c->argv[i]);
    for (size_t i = 0; i < c->nenv; i++)
        free(c->envp[i]);
    free(c->argv);
    free(c->envp);
    free(c->cwd);
    free(c);
}

static int env_add(ready_cmd_t *c, const char *k, const char *v)
{
    if (asprintf(&c->envp[c->nenv], "%s=%s", k, v) < 0) {
        c->envp[c->nenv] = NULL;
        return -1;
    }
    c->nenv++;
    return 0;
}

/* PATH and HOME from craterd, CRATER_SERVICE_PORT and _HOST, then the
 * replica's own env (CRATER_SERVICE and CRATER_SERVICE_REPLICA in it). */
static int env_fill(ready_cmd_t *c, const ready_cmd_spec_t *s)
{
    char port[16];
    const char *path = getenv("PATH"), *home = getenv("HOME");
    int rc = 0;

    snprintf(port, sizeof(port), "%" PRIu32, s->port);
    rc |= env_add(c, "PATH", path ? path : "/usr/local/bin:/usr/bin:/bin");
    if (home)
        rc |= env_add(c, "HOME", home);
    rc |= env_add(c, "CRATER_SERVICE_PORT", port);
    rc |= env_add(c, "CRATER_SERVICE_HOST", s->host);
    for (size_t i = 0; rc == 0 && i < s->nenv; i++)
        rc |= env_add(c, s->env[i].key, s->env[i].value);
    return rc;
}

ready_cmd_t *ready_cmd_create(const ready_cmd_spec_t *s)
{
    ready_cmd_t *c = calloc(1, sizeof(*c));
    size_t argc = 0;

    while (s->argv[argc])
        argc++;
    if (!c || !(c->argv = calloc(argc + 1, sizeof(*c->argv)))
        || !(c->envp = calloc(s->nenv + 5, sizeof(*c->envp))))
        goto fail;
    for (size_t i = 0; i < argc; i++)
        if (!(c->argv[i] = strdup(s->argv[i])))
            goto fail;
    if (env_fill(c, s) < 0 || (s->cwd && !(c->cwd = strdup(s->cwd))))
        goto fail;
    c->timeout_ms = s->timeout_ms > 0 ? s->timeout_ms : READY_CMD_TIMEOUT_MS;
    return c;
fail:
    ready_cmd_destroy(c);
    return NULL;
}

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int spawn(const ready_cmd_t *c, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int rc;

    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    if (c->cwd)
        posix_spawn_file_actions_addchdir_np(&fa, c->cwd);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    rc = posix_spawnp(pid, c->argv[0], &fa, &at, c->argv, c->envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return rc;
}

bool ready_cmd_run(const ready_cmd_t *c)
{
    int64_t end = mono_ms() + c->timeout_ms;
    struct timespec tick = {0, 5 * 1000000L};
    pid_t pid;
    int st = 0, rc;

    if ((rc = spawn(c, &pid)) != 0) {
        crater_log(LOG_WARNING,
                   "readiness command %s: %s",
                   c->argv[0],
                   strerror(rc));
        return false;
    }
    while ((rc = (int)waitpid(pid, &st, WNOHANG)) == 0 && mono_ms() < end)
        nanosleep(&tick, NULL);
    if (rc == 0) { /* past its timeout: the group goes */
        kill(-pid, SIGKILL);
        waitpid(pid, &st, 0);
        return false;
    }
    return rc == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}
