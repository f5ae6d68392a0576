/* cli.h - subcommands of the crater command. Each takes (argc, argv) with
 * argv[0] the subcommand name and returns the process exit code. */
#ifndef CRATER_CLI_H
#define CRATER_CLI_H

#include <jansson.h>

enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_REJECTED = 1,
    CLI_EXIT_USAGE = 2,
    CLI_EXIT_UNAVAIL = 3 /* no answer from the server (or it is not ready) */
};

typedef enum cli_format {
    CLI_FMT_TEXT,
    CLI_FMT_JSON,
    CLI_FMT_YAML
} cli_format_t;

struct cli_cmd {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
};

int cli_validate(int argc, char **argv);
int cli_up(int argc, char **argv);
/* The crater command's `up`: exec crater-up with cli_main_argv (up_exec.c);
 * returns only on failure. */
int cli_up_exec(int argc, char **argv);
extern char **cli_main_argv; /* main()'s argv, set before any subcommand */
int cli_config(int argc, char **argv);
int cli_kb(int argc, char **argv);
int cli_version(int argc, char **argv);
int cli_bench(int argc, char **argv);
/* bench submit (bench_api.c); argv[0] is the verb. */
int cli_bench_submit(int argc, char **argv);
int cli_sim(int argc, char **argv);

/* sim replay / sim synthetic (sim_replay.c); argv[0] is the verb. */
int cli_sim_replay(int argc, char **argv);
int cli_sim_synthetic(int argc, char **argv);
/* sim whatif (sim_whatif.c): the live cluster under another config. */
int cli_sim_whatif(int argc, char **argv);

/* sim util (sim_util.c): measured GPU utilisation; argv[0] is the verb. */
int cli_sim_util(int argc, char **argv);

/* sim bound (sim_bound.c); argv[0] is the verb. */
int cli_sim_bound(int argc, char **argv);

/* Commands that talk to craterd (cmd_jobs.c, cmd_nodes.c; doc/cli.md). */
int cli_submit(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_get(int argc, char **argv);
int cli_describe(int argc, char **argv);
int cli_explain(int argc, char **argv);
int cli_logs(int argc, char **argv);
int cli_cancel(int argc, char **argv);
int cli_rollout(int argc, char **argv);
int cli_top(int argc, char **argv);
int cli_cost(int argc, char **argv);
int cli_nodes(int argc, char **argv);
int cli_token(int argc, char **argv);
/* export k8s (export.c): a job spec as a Kubernetes manifest. */
int cli_export(int argc, char **argv);

/* "-o json|yaml|text" value to a format; -1 when unknown. */
int cli_parse_format(const char *s);
/* Print v (borrowed) to stdout in fmt (JSON pretty or YAML). 0 or -1. */
int cli_print(const json_t *v, cli_format_t fmt);

#endif /* CRATER_CLI_H */
