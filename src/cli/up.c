/* up.c - `crater up`: the single-node (or simulated multi-node) cluster in
 * one command.
 *
 * craterd and the agents run inside this one process: the daemon as a
 * library (src/daemon) with its SQLite store under --data, and one agent per
 * node (src/agent), each with its own agent token, talking to the daemon
 * over loopback HTTP exactly as remote agents do. Without --hardware the
 * single agent discovers this machine; with --hardware FILE each of the
 * first --agents nodes of the file gets an agent (tasks still run on this
 * machine, limited by cgroups as the file's nodes say). Ctrl-C stops the
 * agents (their tasks get SIGTERM, a short grace, SIGKILL) and then the
 * daemon, which finishes its queued commits.
 *
 * The CLI finds this cluster with no settings when it runs in the same
 * directory: up writes the URL it actually serves on to <data>/server and
 * the admin token to <data>/admin.token, and the CLI reads var/server and
 * var/admin.token (cli_conn_resolve). The server file is removed on a clean
 * stop so that a later CLI does not chase a cluster that is gone.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "cli/cli.h"
#include "crater/hwfile.h"
#include "crater/kb.h"
#include "daemon/buildinfo.h"
#include "daemon/daemon.h"
#include "daemon/process.h"
#include "net/cli_pure.h"

#define MAX_AGENTS 256

typedef struct up_opts {
    const char *config, *data, *listen, *hardware;
    unsigned agents;
} up_opts_t;

static void up_usage(FILE *fp)
{
    fputs("usage: crater up [--data DIR] [--listen ADDR:PORT] [--config FILE]\n"
          "                 [--hardware FILE [--agents N]]\n\n"
          "Runs craterd and node agents in the foreground; Ctrl-C stops them.\n"
          "  --data DIR       store, logs and admin token (default ./var)\n"
          "  --listen ADDR    API address (default 127.0.0.1:7480)\n"
          "  --config FILE    craterd.yaml (doc/config.md)\n"
          "  --hardware FILE  simulate the nodes of a hardware file instead "
          "of\n"
          "                   discovering this machine\n"
          "  --agents N       agents for the first N nodes of --hardware\n"
          "                   (default: all of them)\n",
          fp);
}

static int up_parse(int argc, char **argv, up_opts_t *o)
{
    static const struct option opts[] = {
        {"data", required_argument, NULL, 'd'},
        {"listen", required_argument, NULL, 'l'},
        {"config", required_argument, NULL, 'c'},
        {"hardware", required_argument, NULL, 'H'},
        {"agents", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char *end;
    int c;

    o->data = "./var";
    o->listen = "127.0.0.1:7480";
    optind = 1;
    while ((c = getopt_long(argc, argv, "d:l:c:H:n:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            o->data = optarg;
            break;
        case 'l':
            o->listen = optarg;
            break;
        case 'c':
            o->config = optarg;
            break;
        case 'H':
            o->hardware = optarg;
            break;
        case 'n':
            o->agents = (unsigned)strtoul(optarg, &end, 10);
            if (*end || o->agents == 0 || o->agents > MAX_AGENTS) {
                fprintf(stderr,
                        "crater up: --agents: expected 1-%d\n",
                        MAX_AGENTS);
                return -1;
            }
            break;
        case 'h':
            up_usage(stdout);
            return 1;
        default:
            up_usage(stderr);
            return -1;
        }
    }
    if (optind != argc || (o->agents && !o->hardware)) {
        fprintf(stderr,
                o->agents ? "crater up: --agents needs --hardware\n"
                          : "crater up: unexpected argument\n");
        return -1;
    }
    return 0;
}

/* Node names the agents speak for: the file's first N, or NULL (discover). */
static int node_names(const up_opts_t *o, char ***names, size_t *n)
{
    crater_kb_t *kb = crater_kb_create();
    crater_cluster_t *c = NULL;
    crater_error_t err;
    int rc = -1;

    *names = NULL;
    *n = 1;
    if (!o->hardware) {
        crater_kb_destroy(kb);
        return 0;
    }
    if (crater_hw_load(o->hardware, kb, &c, &err) < 0) {
        fprintf(stderr, "crater up: %s\n", err.text);
        goto out;
    }
    *n = o->agents && o->agents < c->nnodes ? o->agents : c->nnodes;
    *names = calloc(*n, sizeof(**names));
    for (size_t i = 0; *names && i < *n; i++)
        (*names)[i] = strdup(c->nodes[i].name);
    rc = *names ? 0 : -1;
out:
    crater_cluster_destroy(c);
    crater_kb_destroy(kb);
    return rc;
}

static crater_agent_t *one_agent(crater_daemon_t *d,
                                 const up_opts_t *o,
                                 const crater_config_t *cfg,
                                 const char *node,
                                 const char *server)
{
    char tok[64], dir[4096], host[256] = "";
    crater_agent_opts_t ao = {0};
    crater_error_t err;
    crater_agent_t *a;

    if (!node) { /* the discovered node is named after this host */
        gethostname(host, sizeof(host) - 1);
        node = host;
    }
    snprintf(dir, sizeof(dir), "%s/agent-%s", o->data, node);
    if (crater_daemon_create_token(d, "agent", node, tok, sizeof(tok), &err)
        < 0) {
        fprintf(stderr, "crater up: %s\n", err.text);
        return NULL;
    }
    ao.server = server;
    ao.token = tok;
    ao.hardware = o->hardware;
    ao.node = o->hardware ? node : host;
    ao.data_dir = dir;
    ao.cfg = cfg;
    if (!(a = crater_agent_start(&ao, &err)))
        fprintf(stderr, "crater up: agent for %s: %s\n", node, err.text);
    return a;
}

/* Is dir the data directory the CLI looks in ("./var", "var/", ...)? */
static bool cli_finds(const char *dir)
{
    size_t n;

    while (!strncmp(dir, "./", 2))
        dir += 2;
    n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    return n == strlen(CLI_LOCAL_DATA_DIR)
           && !strncmp(dir, CLI_LOCAL_DATA_DIR, n);
}

static void server_file(const up_opts_t *o, char *buf, size_t size)
{
    snprintf(buf, size, "%s/server", o->data);
}

/* Write the URL to <data>/server (whole or not at all: tmp + rename). */
static void write_server_file(const up_opts_t *o, const char *server)
{
    char path[4096], tmp[4200];
    FILE *f;

    server_file(o, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (!(f = fopen(tmp, "w"))) {
        fprintf(stderr,
                "crater up: cannot write %s: %s\n",
                tmp,
                strerror(errno));
        return;
    }
    fprintf(f, "%s\n", server);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr,
                "crater up: cannot write %s: %s\n",
                path,
                strerror(errno));
        unlink(tmp);
    }
}

static void print_banner(crater_daemon_t *d,
                         const up_opts_t *o,
                         const char *server,
                         size_t nagents)
{
    char tok[128] = "", path[4096], found[4200];
    FILE *f;

    snprintf(path, sizeof(path), "%s/admin.token", o->data);
    if ((f = fopen(path, "r"))) {
        if (!fgets(tok, sizeof(tok), f))
            tok[0] = '\0';
        tok[strcspn(tok, "\n")] = '\0';
        fclose(f);
    }
    if (cli_finds(o->data))
        snprintf(found,
                 sizeof(found),
                 "(in this directory the CLI finds this server and %s by\n"
                 " itself; elsewhere set\n",
                 path);
    else
        snprintf(found, sizeof(found), "(for the CLI, set\n");
    if (crater_daemon_gateway_port(d))
        printf("inference gateway on http://127.0.0.1:%u (services at "
               "/NAME/...)\n",
               (unsigned)crater_daemon_gateway_port(d));
    printf("crater %s is up: API on %s, %zu agent%s, data in %s\n"
           "admin token (also in %s): %s\n"
           "dashboard: %s/ (log in with the token)\n\n"
           "In another shell:\n"
           "  ./crater run --cpu 1 --mem 256Mi -- echo hello from crater\n"
           "  ./crater get jobs\n"
           "  ./crater logs 1\n"
           "%s CRATER_SERVER=%s CRATER_TOKEN=<token>)\n"
           "Ctrl-C stops the cluster.\n",
           crater_version(),
           server,
           nagents,
           nagents == 1 ? "" : "s",
           o->data,
           path,
           tok,
           server,
           found,
           server);
    fflush(stdout);
}

static int run_cluster(const up_opts_t *o, crater_config_t *cfg)
{
    /* nodes come from their agents' registrations, not from --hardware:
     * nodes of the file without an agent would stay Unknown forever */
    crater_daemon_opts_t dopt = {.listen = o->listen, .data_dir = o->data};
    crater_agent_t *agents[MAX_AGENTS] = {0};
    char server[CLI_CONN_MAX], path[4096], **names = NULL;
    crater_error_t err;
    crater_daemon_t *d;
    size_t n = 0, started = 0;
    int rc = CLI_EXIT_REJECTED;

    if (node_names(o, &names, &n) < 0)
        return CLI_EXIT_REJECTED;
    if (!(d = crater_daemon_start(cfg, &dopt, &err))) {
        fprintf(stderr, "crater up: %s\n", err.text);
        goto out;
    }
    if (cli_local_url(o->listen, crater_daemon_port(d), server, sizeof(server))
        < 0)
        snprintf(server,
                 sizeof(server),
                 "http://127.0.0.1:%u",
                 crater_daemon_port(d));
    for (size_t i = 0; i < n; i++)
        if ((agents[i] = one_agent(d, o, cfg, names ? names[i] : NULL, server)))
            started++;
    if (started == n) {
        write_server_file(o, server);
        print_banner(d, o, server, n);
        crater_proc_wait_stop();
        printf("\nstopping...\n");
        server_file(o, path, sizeof(path));
        unlink(path);
        rc = CLI_EXIT_OK;
    }
    for (size_t i = 0; i < n; i++)
        crater_agent_request_stop(agents[i]);
    crater_daemon_stop(d); /* answers the agents' long polls at once */
    for (size_t i = 0; i < n; i++)
        crater_agent_stop(agents[i]);
out:
    for (size_t i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

int cli_up(int argc, char **argv)
{
    up_opts_t o = {0};
    crater_config_t cfg;
    crater_error_t err;
    int rc;

    if ((rc = up_parse(argc, argv, &o)) != 0)
        return rc < 0 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    if ((o.config ? crater_config_load(o.config, &cfg, &err)
                  : crater_config_defaults(&cfg))
        < 0) {
        fprintf(stderr,
                "crater up: %s\n",
                o.config ? err.text : "out of memory");
        return CLI_EXIT_REJECTED;
    }
    crater_proc_block_stop_signals();
    rc = run_cluster(&o, &cfg);
    crater_config_clear(&cfg);
    return rc;
}
