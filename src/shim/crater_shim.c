/* crater_shim.c - crater-shim, the supervisor of one task (taskexec.h).
 *
 * The agent starts it with posix_spawn (a vfork: cheap even from a big
 * agent process) instead of forking itself, and this small process starts
 * the task with vfork, so a task starts in well under a millisecond of
 * process creation. The agent finds it next to its own executable, at the
 * build tree's path, or through $CRATER_SHIM; without it the agent forks
 * an in-process shim (the same code).
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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(int argc, char **argv)
{
    extern char **environ;
    static char tmp[4200];
    taskexec_t s = {0};
    long uid, gid, n;
    int i = 9;

    if (argc < 11 || !(argv = hide_args(argc, argv, 2)))
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
