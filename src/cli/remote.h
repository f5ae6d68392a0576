/* remote.h - plumbing shared by the crater commands that talk to craterd
 * (cmd_jobs.c, cmd_nodes.c): common options, the connection, API calls
 * that print errors and return exit codes, and the --watch loop.
 *
 * Exit codes: CLI_EXIT_OK, CLI_EXIT_REJECTED (the server said no, or the
 * object does not exist), CLI_EXIT_USAGE, CLI_EXIT_UNAVAIL (no answer
 * from the server).
 */
#ifndef CRATER_CLI_REMOTE_H
#define CRATER_CLI_REMOTE_H

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/cli.h"
#include "crater/client.h"
#include "net/cli_pure.h"

/* Long-option ids of the options every remote command takes. */
enum {
    RO_SERVER = 1000,
    RO_TOKEN,
    RO_WATCH,
    RO_INTERVAL,
    RO_FIRST_CMD /* commands number their own options from here */
};

/* Put these first in a command's option table; "o:h" in its optstring. */
#define CLI_REMOTE_LONGOPTS                           \
    {"server", required_argument, NULL, RO_SERVER},   \
        {"token", required_argument, NULL, RO_TOKEN}, \
        {"output", required_argument, NULL, 'o'},     \
    {                                                 \
        "help", no_argument, NULL, 'h'                \
    }

/* Also accepted by the commands that can redraw (get, top). */
#define CLI_WATCH_LONGOPTS                               \
    {"watch", no_argument, NULL, RO_WATCH},              \
    {                                                    \
        "interval", required_argument, NULL, RO_INTERVAL \
    }

typedef struct cli_common {
    const char *server, *token; /* flags, NULL when not given */
    cli_format_t fmt;
    bool watch;
    long interval_ms; /* default 2000 */
} cli_common_t;

typedef struct cli_remote {
    crater_client_t *client;
    cli_conn_t conn;
} cli_remote_t;

/* Handle a common option from getopt_long. Returns 1 when c was one of
 * them, 0 when not, -1 on a bad value (message printed). */
int cli__common_opt(int c, const char *arg, cli_common_t *co);

/* getopt_long over shortopts ("o:h" plus the command's) and opts (options
 * may follow positionals): common options go to co, others to extra (which
 * returns 0 when it took the option, -1 to reject it). Exactly npos positional
 * arguments must remain (any number when npos < 0); they start at optind.
 * Returns CLI_EXIT_OK, -1 when --help was printed (exit 0), or an exit
 * code after printing the usage. */
typedef int (*cli_extra_opt_f)(int c, const char *arg, void *ctx);
int cli__parse_opts(int argc,
                    char **argv,
                    const char *shortopts,
                    const struct option *opts,
                    const char *usage,
                    cli_common_t *co,
                    cli_extra_opt_f extra,
                    void *ctx,
                    int npos);

/* Resolve the connection (flags, env, config file) and create the client.
 * Returns CLI_EXIT_OK or an exit code (message printed). */
int cli__remote_open(cli_remote_t *r, const cli_common_t *co);
void cli__remote_close(cli_remote_t *r);

/* method path with an optional JSON body; *out (may be NULL to ignore)
 * receives the parsed response (caller decrefs). Prints the error and
 * returns its exit code on failure. */
int cli__api(cli_remote_t *r,
             const char *method,
             const char *path,
             const json_t *body,
             json_t **out);

/* As cli__api with a body sent as is (submit sends YAML as written). */
struct cli_body {
    const char *ctype; /* "application/yaml" ... */
    const char *data;
    size_t len;
};
int cli__api_body(cli_remote_t *r,
                  const char *method,
                  const char *path,
                  const struct cli_body *body,
                  json_t **out);

/* A raw GET (logs): *resp malloc'd, caller frees. Exit code. */
int cli__api_raw(cli_remote_t *r, const char *path, char **resp, size_t *len);

/* Print v as JSON/YAML (fmt not text). Exit code. */
int cli__print_raw(const json_t *v, cli_format_t fmt);

/* Milliseconds since the epoch (wall clock, for ages). */
int64_t cli__now_ms(void);

/* Ctrl-C handling for loops: install once; cli__interrupted() then tells
 * whether SIGINT arrived. cli__sleep_ms() returns early on Ctrl-C. */
void cli__catch_sigint(void);
bool cli__interrupted(void);
void cli__sleep_ms(long ms);

/* Call draw(r, arg) once, or with co->watch every interval until Ctrl-C,
 * clearing the screen first when stdout is a terminal. Exit code of the
 * last draw (0 when interrupted after a successful one). */
typedef int (*cli_draw_f)(cli_remote_t *r, void *arg);
int cli__watch(cli_remote_t *r,
               const cli_common_t *co,
               cli_draw_f draw,
               void *arg);

/* Print "usage: ..." to stdout (help) or stderr. Returns the exit code
 * for that case: CLI_EXIT_OK for help, CLI_EXIT_USAGE otherwise. */
int cli__usage(const char *text, bool help);

/* Node commands (cmd_nodes.c), reached from `get` and `describe`. */
int cli__get_nodes(int argc, char **argv);
int cli__describe_node(int argc, char **argv);
/* cmd_services.c */
int cli__get_services(int argc, char **argv);
int cli__describe_service(int argc, char **argv);

#endif /* CRATER_CLI_REMOTE_H */
