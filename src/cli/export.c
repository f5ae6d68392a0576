/* export.c - `crater export k8s JOB.yaml [--job ID]`: the Kubernetes
 * manifest equal to a Crater job spec (doc/cli.md, doc/kubernetes.md).
 *
 * The spec is checked locally as `crater submit` checks it (loader,
 * decoder, validation; a spec naming a profile is refused: profiles live
 * on the server). With --job the job's object is fetched from craterd and
 * its placement becomes node affinity and the slice environment; without
 * it nothing talks to the network. The object itself is built by
 * crater__k8s_manifest() (src/net/k8s_env.c, shared with craterd's
 * extender). Output: YAML, or JSON with -o json; both are manifests
 * kubectl reads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/remote.h"
#include "crater/doc.h"
#include "crater/kb.h"
#include "crater/kind.h"
#include "crater/profile.h"
#include "net/k8s_env.h"

#define DEFAULT_CTX_BYTES 314572800ull /* scheduler.gpuContextOverhead */

enum {
    O_JOB = RO_FIRST_CMD
};

struct export
{
    const char *job; /* --job ID or NULL */
};

static int export_opt(int c, const char *arg, void *ctx)
{
    struct export *e = ctx;

    if (c != O_JOB)
        return -1;
    e->job = arg;
    return 0;
}

/* The one Job document of path, decoded and validated. */
static crater_jobspec_t *load_spec(const char *path, crater_error_t *err)
{
    crater_doc_t *doc = NULL;
    crater_jobspec_t *spec = NULL;
    crater_profiles_t *reg = crater_profiles_create();
    crater_kb_t *kb = crater_kb_create();
    json_t *job = NULL, *root;
    crater_dec_t d;

    if (!reg || !kb)
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
    else if (crater_doc_load(path, &doc, err) == 0) {
        root = crater_doc_root(doc, 0);
        crater_dec_init(&d, doc, 0, err);
        if (crater_doc_count(doc) != 1
            || crater_kind_of(root) != CRATER_KIND_JOB)
            crater_errorf(err, CRATER_EINVAL, "%s: expected one Job", path);
        else if (json_object_get(root, "profile"))
            crater_errorf(err,
                          CRATER_EINVAL,
                          "%s: names a profile; profiles live on the "
                          "server: export its expanded form",
                          path);
        else if (!(job = crater_profiles_expand(reg, &d, root))
                 || crater_jobspec_decode(&d, job, &spec) < 0
                 || crater_jobspec_validate(spec, kb, err) < 0) {
            crater_jobspec_destroy(spec);
            spec = NULL;
        }
    }
    json_decref(job);
    crater_doc_destroy(doc);
    crater_profiles_destroy(reg);
    crater_kb_destroy(kb);
    return spec;
}

/* The context overhead the server charged: a placed slice's memory less
 * the slice asked; the default otherwise. */
static uint64_t ctx_bytes(const crater_jobspec_t *spec, const json_t *job)
{
    json_t *g =
        json_array_get(json_object_get(json_object_get(job, "placement"),
                                       "gpus"),
                       0);
    json_int_t m = json_integer_value(json_object_get(g, "memory_bytes"));
    uint64_t want = spec->resources.gpu.memory_bytes;

    return want && (uint64_t)m > want ? (uint64_t)m - want : DEFAULT_CTX_BYTES;
}

static int print_manifest(const json_t *m, cli_format_t fmt)
{
    char *text = fmt == CLI_FMT_JSON ? json_dumps(m, JSON_INDENT(2))
                                     : crater_json_to_yaml(m);

    if (!text)
        return CLI_EXIT_REJECTED;
    fputs(text, stdout);
    if (fmt == CLI_FMT_JSON)
        putchar('\n');
    free(text);
    return CLI_EXIT_OK;
}

/* The job object of --job, or NULL without it; exit code in *rc. */
static json_t *fetch_job(const struct export *e,
                         const cli_common_t *co,
                         int *rc)
{
    cli_remote_t r = {0};
    char path[256];
    json_t *job = NULL;

    if (!e->job)
        return NULL;
    snprintf(path, sizeof(path), "/api/v1/jobs/%s", e->job);
    if ((*rc = cli__remote_open(&r, co)) == CLI_EXIT_OK)
        *rc = cli__api(&r, "GET", path, NULL, &job);
    cli__remote_close(&r);
    return job;
}

int cli_export(int argc, char **argv)
{
    static const char usage[] =
        "usage: crater export k8s JOB.yaml [--job ID] [-o yaml|json]\n"
        "Print the Kubernetes Pod (a batch/v1 Job for replicas > 1) equal "
        "to a job\nspec: resources, the crater.io annotations, and with "
        "--job the job's\nplacement as node affinity and GPU environment.\n";
    static const struct option opts[] =
        {CLI_REMOTE_LONGOPTS, {"job", required_argument, NULL, O_JOB}, {0}};
    struct export e = {0};
    cli_common_t co = {.fmt = CLI_FMT_YAML};
    crater_error_t err = {0};
    crater_jobspec_t *spec;
    json_t *job, *m;
    int rc =
        cli__parse_opts(argc, argv, "o:h", opts, usage, &co, export_opt, &e, 2);

    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (strcmp(argv[optind], "k8s") != 0)
        return cli__usage(usage, false);
    if (!(spec = load_spec(argv[optind + 1], &err))) {
        fprintf(stderr, "crater: %s\n", err.text);
        return CLI_EXIT_REJECTED;
    }
    rc = CLI_EXIT_OK;
    job = fetch_job(&e, &co, &rc);
    if (rc == CLI_EXIT_OK) {
        m = crater__k8s_manifest(spec, job, ctx_bytes(spec, job));
        rc = m ? print_manifest(m, co.fmt) : CLI_EXIT_REJECTED;
        json_decref(m);
    }
    json_decref(job);
    crater_jobspec_destroy(spec);
    return rc;
}
