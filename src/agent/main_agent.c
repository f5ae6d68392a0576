/* main_agent.c - the crater-agent program: flags to crater_agent_opts_t,
 * then run until SIGINT/SIGTERM. `--discover` prints this machine in the
 * hardware-file schema and exits; `--measure-context` prints what one CUDA
 * context costs on each GPU (src/agent/ctxprobe.c) and exits.
 *
 * Exit codes: 0 clean stop, 1 could not start (the message says why),
 * 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/agent.h"
#include "agent/internal.h"
#include "crater/log.h"
#include "daemon/buildinfo.h"
#include "daemon/process.h"

static void usage(FILE *fp)
{
    fputs("usage: crater-agent --server URL --token-file FILE [--hardware FILE "
          "[--node NAME]]\n"
          "                    [--data DIR] [--config FILE]\n"
          "       crater-agent --discover [-o yaml|json] [--node NAME]\n"
          "       crater-agent --measure-context\n\n"
          "  --server URL     craterd (default $CRATER_SERVER or "
          "http://127.0.0.1:7480);\n"
          "                   URL,URL,... the craterds of an HA cluster: "
          "the agent\n"
          "                   follows the leader\n"
          "  --token-file FILE  agent token for this node, read from FILE\n"
          "                   (mode 0600; default $CRATER_TOKEN); --token "
          "TOKEN\n"
          "                   works too but is scrubbed from the command line\n"
          "                   and warned about\n"
          "  --hardware FILE  use this hardware file instead of discovery\n"
          "  --node NAME      node name (default: the hostname; required for\n"
          "                   a hardware file holding several nodes)\n"
          "  --data DIR       task logs (default ./var/agent)\n"
          "  --config FILE    craterd.yaml for the agent.* keys\n"
          "  --discover       print this machine as a hardware file\n"
          "  --measure-context  print what a CUDA context costs on each GPU\n"
          "                   (one JSON line per GPU; libcuda from\n"
          "                   $CRATER_CUDA_LIB or libcuda.so.1)\n",
          fp);
}

typedef struct flags {
    crater_agent_opts_t o;
    const char *config, *token_file;
    char token_buf[256];
    bool discover, json, measure;
} flags_t;

static int parse(int argc, char **argv, flags_t *f)
{
    static const struct option opts[] = {
        {"server", required_argument, NULL, 's'},
        {"token", required_argument, NULL, 't'},
        {"token-file", required_argument, NULL, 'T'},
        {"hardware", required_argument, NULL, 'H'},
        {"node", required_argument, NULL, 'n'},
        {"data", required_argument, NULL, 'd'},
        {"config", required_argument, NULL, 'c'},
        {"discover", no_argument, NULL, 'D'},
        {"measure-context", no_argument, NULL, 'M'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    while ((c = getopt_long(argc, argv, "s:t:T:H:n:d:c:Do:h", opts, NULL))
           != -1) {
        switch (c) {
        case 's':
            f->o.server = optarg;
            break;
        case 't': /* keep a copy; clear it where /proc/PID/cmdline shows it */
            snprintf(f->token_buf, sizeof(f->token_buf), "%s", optarg);
            memset(optarg, 'x', strlen(optarg));
            f->o.token = f->token_buf;
            fprintf(stderr,
                    "crater-agent: warning: --token puts the token where "
                    "every process can read it (/proc/*/cmdline) until this "
                    "agent clears it; use --token-file or $CRATER_TOKEN\n");
            break;
        case 'T':
            f->token_file = optarg;
            break;
        case 'H':
            f->o.hardware = optarg;
            break;
        case 'n':
            f->o.node = optarg;
            break;
        case 'd':
            f->o.data_dir = optarg;
            break;
        case 'c':
            f->config = optarg;
            break;
        case 'D':
            f->discover = true;
            break;
        case 'M':
            f->measure = true;
            break;
        case 'o':
            if (strcmp(optarg, "yaml") && strcmp(optarg, "json")) {
                fprintf(stderr, "crater-agent: -o: yaml or json\n");
                return -1;
            }
            f->json = strcmp(optarg, "json") == 0;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return -1;
        }
    }
    if (optind != argc) {
        fprintf(stderr,
                "crater-agent: unexpected argument '%s'\n",
                argv[optind]);
        return -1;
    }
    return 0;
}

static int discover(const flags_t *f)
{
    crater_error_t err;
    char *text = NULL;

    if (crater_agent_discover_json(f->o.node, &text, !f->json, &err) < 0) {
        fprintf(stderr, "crater-agent: %s\n", err.text);
        return 1;
    }
    fputs(text, stdout);
    if (f->json)
        putchar('\n');
    free(text);
    return 0;
}

/* One GPU: a JSON line with its context cost, or with the error. */
static int measure_one(crater_nvml_t *n, unsigned i, const char *driver)
{
    crater_gpu_t g;
    crater_error_t err;
    uint64_t bytes = 0;
    json_t *o;
    int rc = crater_nvml_gpu(n, i, NULL, &g, &err);

    if (rc == 0)
        rc = agent_ctx_measure(n,
                               i,
                               g.uuid,
                               getenv("CRATER_CUDA_LIB"),
                               &bytes,
                               &err);
    o = json_pack("{s:i, s:s?, s:s?, s:s}",
                  "gpu",
                  (int)i,
                  "uuid",
                  g.uuid,
                  "model",
                  g.model,
                  "driver",
                  driver);
    if (rc == 0) {
        json_object_set_new(o,
                            "context_bytes",
                            json_integer((json_int_t)bytes));
        json_object_set_new(o,
                            "context_mib",
                            json_real((double)bytes / (1 << 20)));
    } else {
        json_object_set_new(o, "error", json_string(err.text));
    }
    char *line = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    if (line)
        puts(line);
    free(line);
    json_decref(o);
    crater_nvml_gpu_clear(&g);
    return rc;
}

/* --measure-context: 0 when every GPU was measured, 1 otherwise. */
static int measure_context(void)
{
    crater_error_t err;
    crater_nvml_t *n = crater_nvml_open(NULL, &err);
    char driver[96] = "";
    int cuda = 0, failed = 0;
    unsigned count;

    if (!n) {
        fprintf(stderr, "crater-agent: %s\n", err.text);
        return 1;
    }
    if (crater_nvml_driver(n, driver, sizeof(driver), &cuda, &err) < 0)
        snprintf(driver, sizeof(driver), "unknown");
    count = crater_nvml_count(n);
    for (unsigned i = 0; i < count; i++)
        failed |= measure_one(n, i, driver) < 0;
    if (count == 0)
        fprintf(stderr, "crater-agent: NVML sees no GPU\n");
    crater_nvml_close(n);
    return failed || count == 0 ? 1 : 0;
}

/* The token from --token-file: its first line. A file others may read is
 * refused (a token is a password). */
static int read_token_file(flags_t *f)
{
    struct stat st;
    FILE *fp = fopen(f->token_file, "r");

    if (!fp || fstat(fileno(fp), &st) < 0) {
        fprintf(stderr,
                "crater-agent: --token-file: %s: %s\n",
                f->token_file,
                strerror(errno));
        if (fp)
            fclose(fp);
        return -1;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        fprintf(stderr,
                "crater-agent: --token-file: %s is readable by others (mode "
                "%03o): chmod 600 it\n",
                f->token_file,
                (unsigned)(st.st_mode & 0777));
        fclose(fp);
        return -1;
    }
    if (!fgets(f->token_buf, sizeof(f->token_buf), fp))
        f->token_buf[0] = '\0';
    fclose(fp);
    f->token_buf[strcspn(f->token_buf, "\r\n")] = '\0';
    f->o.token = f->token_buf;
    return 0;
}

static int run(flags_t *f, crater_config_t *cfg)
{
    crater_error_t err;
    crater_agent_t *a;

    if (!f->o.server)
        f->o.server = getenv("CRATER_SERVER");
    if (f->token_file && read_token_file(f) < 0)
        return 2;
    if (!f->o.token)
        f->o.token = getenv("CRATER_TOKEN");
    if (!f->o.token || !*f->o.token) {
        fprintf(stderr,
                "crater-agent: --token: an agent token is required "
                "(crater token create --role agent --node NAME)\n");
        return 2;
    }
    f->o.cfg = cfg;
    crater_proc_block_stop_signals();
    if (!(a = crater_agent_start(&f->o, &err))) {
        fprintf(stderr, "crater-agent: %s\n", err.text);
        return 1;
    }
    fprintf(stderr,
            "crater-agent %s: node %s, server %s\n",
            crater_version(),
            crater_agent_node(a),
            f->o.server ? f->o.server : "http://127.0.0.1:7480");
    crater_proc_wait_stop();
    crater_agent_stop(a);
    return 0;
}

int main(int argc, char **argv)
{
    flags_t f = {0};
    crater_config_t cfg;
    crater_error_t err;
    int rc;

    crater_log_set_handler(crater_proc_log_stderr, (void *)"crater-agent");
    crater_log_set_level(LOG_INFO);
    if ((rc = parse(argc, argv, &f)) != 0)
        return rc < 0 ? 2 : 0;
    if (f.discover)
        return discover(&f);
    if (f.measure)
        return measure_context();
    if ((f.config ? crater_config_load(f.config, &cfg, &err)
                  : crater_config_defaults(&cfg))
        < 0) {
        fprintf(stderr,
                "crater-agent: %s\n",
                f.config ? err.text : "out of memory");
        return 1;
    }
    rc = run(&f, &cfg);
    crater_config_clear(&cfg);
    return rc;
}
