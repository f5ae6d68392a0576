/* cmd_services.c - crater get services, crater describe service NAME
 * (doc/inference.md): GET /api/v1/services and /api/v1/services/{name}
 * as tables; crater rollout -f FILE: POST /api/v1/services/{name}/rollout
 * with the service's new spec.
 *
 * One line per service: its replicas ready in traffic, warm (ready / in
 * the pool), starting, the count the autoscaler wants and the measured
 * model load time; describe adds each replica and the last decisions
 * with their inputs, as the decision log has them.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli/remote.h"
#include "crater/doc.h"

#define PATH_LEN 1024

static json_int_t num(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);

    return json_integer_value(b ? json_object_get(v, b) : v);
}

static void print_header(void)
{
    printf("%-24s %-6s %-7s %-10s %-8s %-7s %-8s %s\n",
           "NAME",
           "JOB",
           "READY",
           "WARM",
           "STARTING",
           "DESIRED",
           "MIN-MAX",
           "LOAD(ms)");
}

static void print_line(const json_t *s)
{
    char ready[24], warm[24], range[24];

    snprintf(ready,
             sizeof(ready),
             "%lld/%lld",
             (long long)num(s, "replicas", "ready"),
             (long long)num(s, "replicas", "traffic"));
    snprintf(warm,
             sizeof(warm),
             "%lld/%lld",
             (long long)num(s, "replicas", "warm_ready"),
             (long long)num(s, "warm_pool", NULL));
    snprintf(range,
             sizeof(range),
             "%lld-%lld",
             (long long)num(s, "min", NULL),
             (long long)num(s, "max", NULL));
    printf("%-24s %-6lld %-7s %-10s %-8lld %-7lld %-8s %lld\n",
           json_string_value(json_object_get(s, "name")),
           (long long)num(s, "job", NULL),
           ready,
           warm,
           (long long)num(s, "replicas", "starting"),
           (long long)num(s, "desired", NULL),
           range,
           (long long)num(s, "load_ms", "last"));
}

static void print_replicas(const json_t *items)
{
    size_t i;
    const json_t *r;

    printf("\nReplicas:\n  %-6s %-24s %-4s %-8s %-10s %-4s %s\n",
           "JOB",
           "NAME",
           "VER",
           "ROLE",
           "STATE",
           "IN",
           "URL");
    json_array_foreach(items, i, r)
        printf("  %-6lld %-24s %-4lld %-8s %-10s %-4s %s\n",
               (long long)num(r, "job", NULL),
               json_string_value(json_object_get(r, "name")),
               (long long)num(r, "version", NULL),
               json_string_value(json_object_get(r, "role")),
               json_string_value(json_object_get(r, "state")),
               json_is_true(json_object_get(r, "in_traffic")) ? "yes" : "no",
               json_string_value(json_object_get(r, "url")));
}

static void print_rollout(const json_t *s)
{
    const json_t *ro = json_object_get(s, "rollout");
    const char *st = json_string_value(json_object_get(ro, "state"));
    const char *why = json_string_value(json_object_get(ro, "reason"));

    printf("\nVersion: %lld", (long long)num(s, "version", NULL));
    if (st && strcmp(st, "none") != 0)
        printf("; rollout %lld -> %lld: %s, %lld of %lld replaced%s%s",
               (long long)num(ro, "from", NULL),
               (long long)num(ro, "to", NULL),
               st,
               (long long)num(ro, "rolled", NULL),
               (long long)num(ro, "total", NULL),
               why ? ": " : "",
               why ? why : "");
    printf("\n");
}

static void print_decisions(const json_t *decs)
{
    size_t i;
    const json_t *e;

    printf("\nLast decisions:\n");
    json_array_foreach(decs, i, e)
    {
        const json_t *in = json_object_get(e, "inputs");
        printf("  %lld: desired %lld (ready %lld, stable %.2f, panic %.2f, "
               "target %.2f) %s; actions %lld\n",
               (long long)num(e, "time_ms", NULL),
               (long long)num(e, "desired", NULL),
               (long long)num(in, "ready", NULL),
               json_number_value(json_object_get(in, "observed_stable")),
               json_number_value(json_object_get(in, "observed_panic")),
               json_number_value(json_object_get(in, "target")),
               json_string_value(json_object_get(e, "reason")),
               (long long)json_array_size(json_object_get(e, "actions")));
    }
}

static int svc_command(
    int argc, char **argv, const char *usage, int nargs, bool one)
{
    static const struct option opts[] = {CLI_REMOTE_LONGOPTS, {0}};
    char path[PATH_LEN] = "/api/v1/services", enc[512];
    cli_common_t co = {0};
    cli_remote_t r = {0};
    json_t *res = NULL;
    size_t i;
    const json_t *s;
    int rc =
        cli__parse_opts(argc, argv, "o:h", opts, usage, &co, NULL, NULL, nargs);

    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (one
        && (cli_urlencode(argv[optind], enc, sizeof(enc)) < 0
            || snprintf(path, sizeof(path), "/api/v1/services/%s", enc)
                   >= (int)sizeof(path)))
        return CLI_EXIT_USAGE;
    if ((rc = cli__remote_open(&r, &co)) == 0)
        rc = cli__api(&r, "GET", path, NULL, &res);
    if (rc == CLI_EXIT_OK && co.fmt != CLI_FMT_TEXT)
        rc = cli__print_raw(res, co.fmt);
    else if (rc == CLI_EXIT_OK) {
        print_header();
        if (one)
            print_line(res);
        json_array_foreach(json_object_get(res, "items"), i, s) if (!one)
            print_line(s);
        if (one) {
            print_rollout(res);
            print_replicas(json_object_get(res, "items"));
            print_decisions(json_object_get(res, "decisions"));
        }
    }
    json_decref(res);
    cli__remote_close(&r);
    return rc;
}

int cli__get_services(int argc, char **argv)
{
    static const char usage[] = "usage: crater get services [-o json|yaml]\n"
                                "Columns: NAME JOB READY(in traffic: "
                                "ready/total) WARM(ready/pool)\n"
                                "STARTING DESIRED MIN-MAX LOAD(the last model "
                                "load time)\n";

    return svc_command(argc, argv, usage, 0, false);
}

int cli__describe_service(int argc, char **argv)
{
    static const char usage[] =
        "usage: crater describe service NAME [-o json|yaml]\n"
        "The service's counts, each replica (role, state, URL) and the\n"
        "autoscaler's last decisions with their inputs.\n";

    return svc_command(argc, argv, usage, 1, true);
}

/* ---- rollout ------------------------------------------------------------ */

typedef struct ro_opts {
    const char *file, *timeout;
} ro_opts_t;

static int ro_opt(int c, const char *arg, void *ctx)
{
    ro_opts_t *o = ctx;

    if (c == 'f')
        o->file = arg;
    else if (c == 'T')
        o->timeout = arg;
    else
        return -1;
    return 0;
}

/* The path for the spec's service: /api/v1/services/NAME/rollout[?..]. */
static int ro_path(const json_t *spec, const ro_opts_t *o, char *path)
{
    const char *name = json_string_value(json_object_get(spec, "name"));
    char enc[512], tmo[128] = "";

    if (!name || cli_urlencode(name, enc, sizeof(enc)) < 0) {
        fprintf(stderr, "crater: error: name: the spec names no service\n");
        return CLI_EXIT_REJECTED;
    }
    if (o->timeout
        && cli_urlencode(o->timeout, tmo + 14, sizeof(tmo) - 14) == 0)
        memcpy(tmo, "?readyTimeout=", 14);
    if (snprintf(path, PATH_LEN, "/api/v1/services/%s/rollout%s", enc, tmo)
        >= PATH_LEN)
        return CLI_EXIT_USAGE;
    return CLI_EXIT_OK;
}

int cli_rollout(int argc, char **argv)
{
    static const char usage[] =
        "usage: crater rollout -f FILE [--ready-timeout D] [-o json|yaml]\n"
        "Roll the service named in FILE over to the spec in FILE: one new\n"
        "replica at a time, each old one stopped only once a new one is\n"
        "ready in the gateway. A new replica not ready within D (5m) or\n"
        "crash-looping stops the rollout. Progress: crater describe\n"
        "service NAME.\n";
    static const struct option opts[] =
        {CLI_REMOTE_LONGOPTS,
         {"file", required_argument, NULL, 'f'},
         {"ready-timeout", required_argument, NULL, 'T'},
         {0}};
    ro_opts_t o = {0};
    cli_common_t co = {0};
    cli_remote_t r = {0};
    crater_doc_t *doc = NULL;
    crater_error_t err;
    char path[PATH_LEN];
    json_t *res = NULL;
    int rc =
        cli__parse_opts(argc, argv, "o:hf:", opts, usage, &co, ro_opt, &o, 0);

    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (!o.file)
        return cli__usage(usage, false);
    if (crater_doc_load(o.file, &doc, &err) < 0) {
        fprintf(stderr, "crater: error: %s\n", err.text);
        return CLI_EXIT_REJECTED;
    }
    rc = ro_path(crater_doc_root(doc, 0), &o, path);
    if (rc == CLI_EXIT_OK && (rc = cli__remote_open(&r, &co)) == CLI_EXIT_OK)
        rc = cli__api(&r, "POST", path, crater_doc_root(doc, 0), &res);
    if (rc == CLI_EXIT_OK && co.fmt != CLI_FMT_TEXT)
        rc = cli__print_raw(res, co.fmt);
    else if (rc == CLI_EXIT_OK)
        printf("service %s: rolling to version %lld\n",
               json_string_value(json_object_get(res, "name")),
               (long long)num(res, "version", NULL));
    json_decref(res);
    crater_doc_destroy(doc);
    cli__remote_close(&r);
    return rc;
}
