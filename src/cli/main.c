/* main.c - the crater command: subcommand dispatch and process set-up.
 *
 * This is the only place that decides how library log messages reach the
 * user (stderr, prefixed "crater: ") and that turns errors into exit codes:
 * 0 success, 1 the input was rejected, 2 bad usage.
 *
 * Built twice: as crater, whose `up` execs crater-up (up_exec.c), and with
 * CRATER_UP_MAIN as crater-up, the server side, whose only command is up.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "crater/log.h"

#ifdef CRATER_UP_MAIN
static const struct cli_cmd commands[] = {
    {"up", cli_up, "run a cluster on this machine: craterd + agents"},
    {NULL, NULL, NULL},
};
#else
static const struct cli_cmd commands[] = {
    {"up", cli_up_exec, "run a cluster on this machine: craterd + agents"},
    {"validate",
     cli_validate,
     "check job specs, profiles, hardware files, "
     "configs and job lists"},
    {"config", cli_config, "print the configuration reference or defaults"},
    {"kb", cli_kb, "print the hardware knowledge base"},
    {"bench", cli_bench, "benchmarks: bench sched (placement throughput)"},
    {"sim",
     cli_sim,
     "simulate: sim openb|compare|replay|synthetic|bound|whatif"},
    {"submit", cli_submit, "submit job specs: submit -f job.yaml"},
    {"run", cli_run, "run a command as a job: run [--gpu 1 ...] -- cmd"},
    {"get", cli_get, "list: get jobs|job ID|nodes|node NAME|profiles"},
    {"describe", cli_describe, "details: describe job ID | node NAME"},
    {"explain", cli_explain, "why a job is pending or where it went"},
    {"logs", cli_logs, "a job's output: logs ID [-f]"},
    {"cancel", cli_cancel, "cancel a job"},
    {"rollout", cli_rollout, "roll a service to a new spec: rollout -f FILE"},
    {"top", cli_top, "per-node utilisation of GPU, CPU, memory, disk"},
    {"cost", cli_cost, "cost by job|tenant|user|node|resource over a window"},
    {"nodes", cli_nodes, "nodes cordon|uncordon|drain NAME (admin)"},
    {"token", cli_token, "token create --role user --tenant T (admin)"},
    {"export",
     cli_export,
     "export k8s JOB.yaml [--job ID]: a Kubernetes manifest"},
    {"version", cli_version, "print the version"},
    {NULL, NULL, NULL},
};
#endif

static void log_stderr(int level, const char *msg, void *arg)
{
    (void)arg;
    fprintf(stderr,
            "crater: %s%s\n",
            level <= LOG_ERR       ? "error: "
            : level == LOG_WARNING ? "warning: "
                                   : "",
            msg);
}

static void usage(FILE *fp)
{
    fprintf(fp,
            "usage: crater [--debug SUBSYS,...] COMMAND [ARGS]\n\n"
            "commands:\n");
    for (const struct cli_cmd *c = commands; c->name; c++)
        fprintf(fp, "  %-10s %s\n", c->name, c->help);
    fprintf(fp, "\nRun 'crater COMMAND --help' for a command's options.\n");
}

static int set_debug(const char *spec)
{
    crater_error_t err;
    unsigned mask;

    if (crater_log_parse_debug(spec, &mask, &err) < 0) {
        fprintf(stderr, "crater: %s\n", err.text);
        return -1;
    }
    crater_log_set_debug(mask);
    crater_log_set_level(LOG_DEBUG);
    return 0;
}

int main(int argc, char **argv)
{
    int i = 1;

    crater_log_set_handler(log_stderr, NULL);
#ifndef CRATER_UP_MAIN
    cli_main_argv = argv;
#endif
    if (i + 1 < argc && strcmp(argv[i], "--debug") == 0) {
        if (set_debug(argv[i + 1]) < 0)
            return CLI_EXIT_USAGE;
        i += 2;
    }
    if (i >= argc || !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
        usage(i >= argc ? stderr : stdout);
        return i >= argc ? CLI_EXIT_USAGE : 0;
    }
    for (const struct cli_cmd *c = commands; c->name; c++)
        if (strcmp(argv[i], c->name) == 0)
            return c->fn(argc - i, argv + i);
    fprintf(stderr, "crater: unknown command '%s'\n", argv[i]);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
