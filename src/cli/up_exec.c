/* up_exec.c - `crater up` in the crater command: exec crater-up.
 *
 * `crater up` runs craterd and the agents in one process, which needs
 * SQLite, libmicrohttpd, hwloc and nettle. Every other subcommand is a
 * client (libcurl, jansson, libfyaml) that starts once per call: loading
 * the server's libraries and resolving their symbols (they are linked
 * with BIND_NOW) cost each `crater run` about 1.3 ms of CPU, a tenth of
 * it. So the server side is its own program, crater-up, installed beside
 * crater; `crater up` replaces itself with it (same pid, same arguments:
 * a supervisor or a test that signals the pid it started still signals
 * the cluster). crater-up is found beside the running crater, or at
 * $CRATER_UP.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

char **cli_main_argv;

static const char *up_path(char *buf, size_t n)
{
    const char *v = getenv("CRATER_UP");
    char exe[PATH_MAX], *slash;
    ssize_t len;

    if (v != NULL && *v != '\0')
        return v;
    len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len <= 0)
        return NULL;
    exe[len] = '\0';
    if ((slash = strrchr(exe, '/')) == NULL)
        return NULL;
    *slash = '\0';
    if (snprintf(buf, n, "%s/crater-up", exe) >= (int)n)
        return NULL;
    return buf;
}

int cli_up_exec(int argc, char **argv)
{
    char buf[PATH_MAX];
    const char *path = up_path(buf, sizeof(buf));

    (void)argc;
    (void)argv;
    if (path == NULL) {
        fprintf(stderr, "crater up: cannot tell where crater is installed\n");
        return CLI_EXIT_REJECTED;
    }
    cli_main_argv[0] = (char *)path;
    execv(path, cli_main_argv);
    fprintf(stderr,
            "crater up: cannot run %s: %s (crater-up is built and installed "
            "beside crater; CRATER_UP names another path)\n",
            path,
            strerror(errno));
    return CLI_EXIT_REJECTED;
}
