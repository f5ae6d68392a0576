/* validate.c - `crater validate [-o json|yaml] [-q] FILE...`
 *
 * Checks every document of every file and reports each problem with the
 * file, line and field path; exits 1 if anything was rejected. Documents
 * are taken in dependency order whatever the order of the files: configs
 * first (their knowledge-base overrides apply to what follows), then
 * profiles (jobs may name them), then hardware files, then jobs. With -o
 * the normalised form of each valid document is printed (base units).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "crater/config.h"
#include "crater/hwfile.h"
#include "crater/jobspec.h"
#include "crater/kind.h"
#include "crater/profile.h"
#include "crater/replay.h"

struct vctx {
    crater_kb_t *kb;
    crater_profiles_t *profiles;
    cli_format_t fmt;
    int quiet;
    int ok, rejected;
};

struct vdoc {
    const char *path;
    const crater_doc_t *doc;
    size_t idx;
};

static void report_error(struct vctx *c,
                         const struct vdoc *v,
                         const crater_error_t *err)
{
    int line, col;

    c->rejected++;
    /* decoder errors carry "file:line:col:" already; semantic ones carry
     * only the field path, so look its line up here */
    if (strncmp(err->text, v->path, strlen(v->path)) != 0 && err->field[0]
        && crater_doc_where(v->doc, v->idx, err->field, &line, &col) == 0)
        fprintf(stderr,
                "crater: %s:%d:%d: %s\n",
                v->path,
                line,
                col,
                err->text);
    else if (strncmp(err->text, v->path, strlen(v->path)) != 0)
        fprintf(stderr, "crater: %s: %s\n", v->path, err->text);
    else
        fprintf(stderr, "crater: %s\n", err->text);
}

static void report_ok(struct vctx *c,
                      const struct vdoc *v,
                      const char *kind,
                      const char *name,
                      json_t *normal)
{
    c->ok++;
    if (c->fmt != CLI_FMT_TEXT && normal) {
        if (c->fmt == CLI_FMT_YAML && c->ok > 1)
            fputs("---\n", stdout);
        cli_print(normal, c->fmt);
    } else if (!c->quiet) {
        printf("ok  %s", v->path);
        if (crater_doc_count(v->doc) > 1)
            printf(" (document %zu)", v->idx + 1);
        printf(": %s%s%s\n", kind, name ? " " : "", name ? name : "");
    }
    json_decref(normal);
}

static int do_job(struct vctx *c,
                  const struct vdoc *v,
                  crater_dec_t *d,
                  json_t *root)
{
    json_t *job = crater_profiles_expand(c->profiles, d, root);
    crater_jobspec_t *spec = NULL;
    int rc = -1;

    if (job && crater_jobspec_decode(d, job, &spec) == 0
        && crater_jobspec_validate(spec, c->kb, d->err) == 0) {
        report_ok(c,
                  v,
                  "Job",
                  spec->name,
                  c->fmt == CLI_FMT_YAML ? crater_jobspec_encode_yaml(spec)
                                         : crater_jobspec_encode(spec));
        rc = 0;
    }
    crater_jobspec_destroy(spec);
    json_decref(job);
    return rc;
}

static int do_hw(struct vctx *c,
                 const struct vdoc *v,
                 crater_dec_t *d,
                 json_t *root)
{
    crater_cluster_t *cl = NULL;
    char what[64];

    if (crater_hw_decode(d, root, c->kb, &cl) < 0)
        return -1;
    snprintf(what,
             sizeof(what),
             "%zu node%s",
             cl->nnodes,
             cl->nnodes == 1 ? "" : "s");
    report_ok(c,
              v,
              crater_kind_name(crater_kind_of(root)),
              what,
              crater_hw_encode(cl));
    crater_cluster_destroy(cl);
    return 0;
}

static int do_profile(struct vctx *c,
                      const struct vdoc *v,
                      crater_dec_t *d,
                      json_t *root)
{
    const crater_profile_t *p;
    char ref[200];

    if (crater_profile_decode(d, root, c->profiles) < 0)
        return -1;
    p = crater_profiles_at(c->profiles, crater_profiles_count(c->profiles) - 1);
    snprintf(ref, sizeof(ref), "%s@%s", p->name, p->version);
    report_ok(c, v, "Profile", ref, crater_profile_encode(p));
    return 0;
}

/* A config's own kind/apiVersion header is not a config key. */
static json_t *config_body(json_t *root)
{
    json_t *body = json_copy(root);

    if (body) {
        json_object_del(body, "kind");
        json_object_del(body, "apiVersion");
    }
    return body;
}

static int do_config(struct vctx *c,
                     const struct vdoc *v,
                     crater_dec_t *d,
                     json_t *root)
{
    crater_config_t cfg;
    json_t *body = config_body(root);
    int rc = -1;

    if (crater_config_defaults(&cfg) < 0 || !body) {
        json_decref(body);
        return crater_errorf(d->err, CRATER_ENOMEM, "out of memory");
    }
    if (crater_config_decode(d, body, &cfg) == 0) {
        size_t mark = crater_dec_push_key(d, "hardware_knowledge_base");
        crater_dec_push_key(d, "override");
        rc =
            cfg.kb_override ? crater_kb_override(c->kb, d, cfg.kb_override) : 0;
        crater_dec_pop(d, mark);
    }
    if (rc == 0)
        report_ok(c, v, "Config", NULL, crater_config_encode(&cfg));
    crater_config_clear(&cfg);
    json_decref(body);
    return rc;
}

/* A simulator job list: every spec decoded as crater sim replay would. */
static int do_joblist(struct vctx *c,
                      const struct vdoc *v,
                      crater_dec_t *d,
                      json_t *root)
{
    crater_joblist_t *jl = NULL;
    char what[64];

    (void)root;
    if (v->idx != 0)
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "a JobList must be the file's only document");
    if (crater_joblist_decode(v->doc, &jl, d->err) < 0)
        return -1;
    snprintf(what,
             sizeof(what),
             "%zu job%s",
             crater_joblist_count(jl),
             crater_joblist_count(jl) == 1 ? "" : "s");
    report_ok(c, v, "JobList", what, NULL);
    crater_joblist_destroy(jl);
    return 0;
}

typedef int (*vfn)(struct vctx *,
                   const struct vdoc *,
                   crater_dec_t *,
                   json_t *);

static vfn handler(crater_kind_t kind)
{
    switch (kind) {
    case CRATER_KIND_JOB:
        return do_job;
    case CRATER_KIND_PROFILE:
        return do_profile;
    case CRATER_KIND_NODE:
    case CRATER_KIND_CLUSTER:
        return do_hw;
    case CRATER_KIND_CONFIG:
        return do_config;
    case CRATER_KIND_JOBLIST:
        return do_joblist;
    default:
        return NULL;
    }
}

/* Dependency order: configs, profiles, hardware, jobs. */
static int pass_of(crater_kind_t kind)
{
    switch (kind) {
    case CRATER_KIND_CONFIG:
        return 0;
    case CRATER_KIND_PROFILE:
        return 1;
    case CRATER_KIND_NODE:
    case CRATER_KIND_CLUSTER:
        return 2;
    default:
        return 3;
    }
}

static void check_doc(struct vctx *c, const struct vdoc *v, int pass)
{
    json_t *root = crater_doc_root(v->doc, v->idx);
    crater_kind_t kind = crater_kind_of(root);
    crater_error_t err;
    crater_dec_t d;
    vfn fn = handler(kind);

    if (pass_of(kind) != pass)
        return;
    crater_dec_init(&d, v->doc, v->idx, &err);
    if (!fn) {
        crater_dec_push_key(&d, "kind");
        crater_dec_fail(&d,
                        CRATER_EINVAL,
                        json_is_object(root) ? "unknown kind (Job, Profile, "
                                               "Node, Cluster, "
                                               "Config, JobList)"
                                             : "a document must be a mapping");
        report_error(c, v, &err);
        return;
    }
    crater_error_clear(&err);
    if (fn(c, v, &d, root) < 0)
        report_error(c, v, &err);
}

static int load_all(struct vctx *c, int n, char **paths, crater_doc_t **docs)
{
    crater_error_t err;

    for (int i = 0; i < n; i++) {
        if (crater_doc_load(paths[i], &docs[i], &err) < 0) {
            fprintf(stderr, "crater: %s\n", err.text);
            c->rejected++;
            docs[i] = NULL;
        }
    }
    return 0;
}

static void run_passes(struct vctx *c, int n, char **paths, crater_doc_t **docs)
{
    for (int pass = 0; pass < 4; pass++) {
        for (int i = 0; i < n; i++) {
            for (size_t j = 0; docs[i] && j < crater_doc_count(docs[i]); j++) {
                struct vdoc v = {paths[i], docs[i], j};
                check_doc(c, &v, pass);
            }
        }
    }
}

static int parse_opts(int argc, char **argv, struct vctx *c)
{
    static const char *usage = "usage: crater validate [-q] [-o json|yaml] "
                               "FILE...\n"
                               "Check job specs, profiles, hardware files and "
                               "configs; '-' reads "
                               "stdin.\n";
    int opt, f;

    optind = 1;
    while ((opt = getopt(argc, argv, "qo:h")) != -1) {
        if (opt == 'q')
            c->quiet = 1;
        else if (opt == 'o' && (f = cli_parse_format(optarg)) >= 0)
            c->fmt = (cli_format_t)f;
        else {
            if (opt == 'o')
                fprintf(stderr, "crater: -o: unknown format '%s'\n", optarg);
            fputs(usage, opt == 'h' ? stdout : stderr);
            return opt == 'h' ? 1 : -1;
        }
    }
    if (optind >= argc) {
        fputs(usage, stderr);
        return -1;
    }
    return 0;
}

int cli_validate(int argc, char **argv)
{
    struct vctx c = {.fmt = CLI_FMT_TEXT};
    crater_doc_t **docs;
    int n, rc = parse_opts(argc, argv, &c);

    if (rc)
        return rc > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    n = argc - optind;
    c.kb = crater_kb_create();
    c.profiles = crater_profiles_create();
    docs = calloc((size_t)n, sizeof(*docs));
    if (!c.kb || !c.profiles || !docs) {
        fprintf(stderr, "crater: error: out of memory\n");
        rc = CLI_EXIT_REJECTED;
    } else {
        load_all(&c, n, argv + optind, docs);
        run_passes(&c, n, argv + optind, docs);
        fflush(stdout);
        if (!c.quiet || c.rejected)
            fprintf(stderr,
                    "%d document%s valid, %d rejected\n",
                    c.ok,
                    c.ok == 1 ? "" : "s",
                    c.rejected);
        rc = c.rejected ? CLI_EXIT_REJECTED : CLI_EXIT_OK;
    }
    for (int i = 0; docs && i < n; i++)
        crater_doc_destroy(docs[i]);
    free(docs);
    crater_profiles_destroy(c.profiles);
    crater_kb_destroy(c.kb);
    return rc;
}
