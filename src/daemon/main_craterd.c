/* main_craterd.c - the craterd program: parse flags, load the
 * configuration, run the daemon until SIGINT/SIGTERM. All the work is in
 * src/daemon; this file only wires the process to it.
 *
 * Exit codes: 0 clean stop, 1 the configuration or data directory was
 * rejected (the message names the field), 2 bad usage.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/log.h"
#include "daemon/buildinfo.h"
#include "daemon/daemon.h"
#include "daemon/process.h"

static void usage(FILE *fp)
{
    fputs("usage: craterd [--config FILE] [--listen ADDR:PORT] [--data DIR]\n"
          "               [--hardware FILE] [--threads N] [--no-sync]\n\n"
          "  --config FILE    craterd.yaml (doc/config.md); defaults without\n"
          "  --listen ADDR    overrides server.listen (127.0.0.1:7480)\n"
          "  --data DIR       overrides server.dataDir (./var)\n"
          "  --hardware FILE  nodes known before their agents register\n"
          "  --threads N      HTTP worker threads (default: CPUs)\n"
          "  --no-sync        do not fsync commits (benchmarks only: an\n"
          "                   acknowledged job can be lost on power loss)\n",
          fp);
}

typedef struct flags {
    const char *config;
    crater_daemon_opts_t o;
} flags_t;

static int parse_flags(int argc, char **argv, flags_t *f)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"listen", required_argument, NULL, 'l'},
        {"data", required_argument, NULL, 'd'},
        {"hardware", required_argument, NULL, 'H'},
        {"threads", required_argument, NULL, 't'},
        {"no-sync", no_argument, NULL, 'n'},
        {"version", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    while ((c = getopt_long(argc, argv, "c:l:d:H:t:nvh", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            f->config = optarg;
            break;
        case 'l':
            f->o.listen = optarg;
            break;
        case 'd':
            f->o.data_dir = optarg;
            break;
        case 'H':
            f->o.hardware = optarg;
            break;
        case 't':
            f->o.threads = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'n':
            f->o.no_sync = true;
            break;
        case 'v':
            printf("craterd %s\n", crater_version());
            return 1;
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return -1;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "craterd: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    flags_t f = {0};
    crater_config_t cfg;
    crater_error_t err;
    crater_daemon_t *d;
    int rc;

    crater_log_set_handler(crater_proc_log_stderr, (void *)"craterd");
    if ((rc = parse_flags(argc, argv, &f)) != 0)
        return rc < 0 ? 2 : 0;
    if ((f.config ? crater_config_load(f.config, &cfg, &err)
                  : crater_config_defaults(&cfg))
        < 0) {
        fprintf(stderr, "craterd: %s\n", f.config ? err.text : "out of memory");
        return 1;
    }
    crater_proc_block_stop_signals();
    if (cfg.store.backend == CRATER_STORE_ETCD
        && cfg.ha.election == CRATER_HA_AUTO) {
        rc = crater_ha_run(&cfg, &f.o, &err);
        if (rc < 0)
            fprintf(stderr, "craterd: %s\n", err.text);
        crater_config_clear(&cfg);
        return rc < 0 ? 1 : 0;
    }
    if (!(d = crater_daemon_start(&cfg, &f.o, &err))) {
        fprintf(stderr, "craterd: %s\n", err.text);
        crater_config_clear(&cfg);
        return 1;
    }
    printf("craterd %s listening on http://%s:%u\n",
           crater_version(),
           "127.0.0.1",
           crater_daemon_port(d));
    if (crater_daemon_gateway_port(d))
        printf("inference gateway on port %u\n",
               (unsigned)crater_daemon_gateway_port(d));
    if (crater_daemon_admin_token(d))
        printf("admin token (also in %s/admin.token): %s\n",
               f.o.data_dir ? f.o.data_dir : cfg.server.data_dir,
               crater_daemon_admin_token(d));
    fflush(stdout);
    crater_proc_wait_stop();
    crater_daemon_stop(d);
    crater_config_clear(&cfg);
    return 0;
}
