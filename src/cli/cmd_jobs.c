/* cmd_jobs.c - the job commands of crater: submit, run, get
 * (jobs|job|profiles, and the dispatch to nodes), describe job, explain,
 * logs, cancel. doc/cli.md shows each with its output; doc/api.md is the
 * contract they speak.
 *
 * submit validates every document of every file locally (the same loader,
 * profile expansion and decoder the server uses) before sending anything,
 * so a typo is reported as file:line:col and nothing half-submitted is
 * left behind. Documents naming a profile are checked by the server only:
 * profiles live there.
 *
 * logs -f follows by byte offset: the next offset is the previous one plus
 * the bytes returned (what X-Crater-Log-Next says), and the log is
 * complete once the job had finished before a read that returned nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/remote.h"
#include "crater/doc.h"
#include "crater/jobspec.h"
#include "crater/kind.h"
#include "crater/profile.h"

#define PATH_LEN 1024

/* "/api/v1/jobs/ID" + suffix, with ID percent-encoded. Exit code. */
static int job_path(const char *id, const char *suffix, char *buf, size_t n)
{
    char enc[512];

    if (cli_urlencode(id, enc, sizeof(enc)) < 0
        || snprintf(buf, n, "/api/v1/jobs/%s%s", enc, suffix) >= (int)n) {
        fprintf(stderr, "crater: error: job id too long\n");
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

static int id_command(int argc,
                      char **argv,
                      const char *usage,
                      cli_common_t *co,
                      cli_extra_opt_f extra,
                      void *ctx,
                      cli_remote_t *r);

/* ---- submit ------------------------------------------------------------ */

#define SUBMIT_MAX_FILES 256

/* One input file: its bytes (sent as written), the parsed documents, and
 * where each document's text lies. */
struct sfile {
    const char *path;
    char *buf;
    size_t len;
    crater_doc_t *doc;
    cli_span_t spans[CRATER_DOC_MAX_DOCS];
    long nspans;
    bool json;
};

struct submit {
    struct sfile *files;
    int nfiles;
    json_t *out; /* job objects, for -o */
    cli_common_t co;
};

static int submit_opt(int c, const char *arg, void *ctx)
{
    struct submit *s = ctx;

    if (c != 'f')
        return -1;
    if (s->nfiles == SUBMIT_MAX_FILES) {
        fprintf(stderr, "crater: error: at most %d files\n", SUBMIT_MAX_FILES);
        return -1;
    }
    s->files[s->nfiles++].path = arg;
    return 0;
}

/* Read path ("-": stdin) whole, at most one byte over the loader's
 * limit so that the loader reports the size error. */
static int read_input(struct sfile *f, crater_error_t *err)
{
    FILE *fp = strcmp(f->path, "-") ? fopen(f->path, "rb") : stdin;
    size_t cap = CRATER_DOC_MAX_BYTES + 1, n;

    if (!fp)
        return crater_errorf(err,
                             CRATER_EIO,
                             "%s: %s",
                             f->path,
                             strerror(errno));
    f->buf = malloc(cap);
    n = f->buf ? fread(f->buf, 1, cap, fp) : 0;
    if (f->buf && ferror(fp))
        crater_errorf(err, CRATER_EIO, "%s: %s", f->path, strerror(errno));
    else if (!f->buf)
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (fp != stdin)
        fclose(fp);
    if (!f->buf || err->errnum != CRATER_OK)
        return -1;
    f->len = n;
    return 0;
}

static int load_input(struct sfile *f, crater_error_t *err)
{
    size_t i = 0;

    crater_error_clear(err);
    if (read_input(f, err) < 0
        || crater_doc_parse(f->buf, f->len, f->path, &f->doc, err) < 0)
        return -1;
    while (i < f->len && strchr(" \t\r\n", f->buf[i]))
        i++;
    f->json = i < f->len && (f->buf[i] == '{' || f->buf[i] == '[');
    f->nspans =
        f->json ? -1
                : cli_yaml_split(f->buf, f->len, f->spans, CRATER_DOC_MAX_DOCS);
    if (crater_doc_count(f->doc) == 0)
        return crater_errorf(err, CRATER_EINVAL, "%s: no documents", f->path);
    return 0;
}

static void report(const char *path,
                   const crater_doc_t *doc,
                   size_t i,
                   const crater_error_t *err)
{
    int line, col;

    if (!strncmp(err->text, path, strlen(path)))
        fprintf(stderr, "crater: %s\n", err->text);
    else if (err->field[0]
             && crater_doc_where(doc, i, err->field, &line, &col) == 0)
        fprintf(stderr, "crater: %s:%d:%d: %s\n", path, line, col, err->text);
    else
        fprintf(stderr, "crater: %s: %s\n", path, err->text);
}

/* Local check of document i: a Job that decodes and validates. */
static int check_job(const char *path,
                     const crater_doc_t *doc,
                     size_t i,
                     const crater_profiles_t *reg,
                     const crater_kb_t *kb)
{
    json_t *root = crater_doc_root(doc, i), *job = NULL;
    crater_jobspec_t *spec = NULL;
    crater_error_t err;
    crater_dec_t d;
    int rc = -1;

    crater_error_clear(&err);
    crater_dec_init(&d, doc, i, &err);
    if (crater_kind_of(root) != CRATER_KIND_JOB)
        crater_errorf(&err,
                      CRATER_EINVAL,
                      "document %zu is %s, not a Job",
                      i + 1,
                      json_is_object(root)
                          ? crater_kind_name(crater_kind_of(root))
                          : "not a mapping");
    else if (json_object_get(root, "profile"))
        rc = 0; /* profiles live on the server: it expands and checks */
    else if ((job = crater_profiles_expand(reg, &d, root))
             && crater_jobspec_decode(&d, job, &spec) == 0
             && crater_jobspec_validate(spec, kb, &err) == 0)
        rc = 0;
    if (rc < 0)
        report(path, doc, i, &err);
    crater_jobspec_destroy(spec);
    json_decref(job);
    return rc;
}

static int submit_check(struct submit *s)
{
    crater_profiles_t *reg = crater_profiles_create();
    crater_kb_t *kb = crater_kb_create();
    crater_error_t err;
    int bad = 0;

    if (!reg || !kb)
        bad = 1, fprintf(stderr, "crater: error: out of memory\n");
    for (int f = 0; !bad && f < s->nfiles; f++) {
        struct sfile *sf = &s->files[f];
        if (load_input(sf, &err) < 0) {
            fprintf(stderr, "crater: %s\n", err.text);
            bad++;
            continue;
        }
        for (size_t i = 0; i < crater_doc_count(sf->doc); i++)
            bad += check_job(sf->path, sf->doc, i, reg, kb) < 0;
    }
    crater_profiles_destroy(reg);
    crater_kb_destroy(kb);
    if (bad)
        fprintf(stderr,
                "crater: nothing submitted (%d error%s)\n",
                bad,
                bad == 1 ? "" : "s");
    return bad ? CLI_EXIT_REJECTED : CLI_EXIT_OK;
}

/* Document i as written when its text is known, else as JSON. */
static int post_doc(cli_remote_t *r,
                    const struct sfile *f,
                    size_t i,
                    json_t **job)
{
    struct cli_body b = {"application/json", f->buf, f->len};

    if (!f->json) {
        if (f->nspans != (long)crater_doc_count(f->doc))
            return cli__api(r,
                            "POST",
                            "/api/v1/jobs",
                            crater_doc_root(f->doc, i),
                            job);
        b = (struct cli_body){"application/yaml",
                              f->buf + f->spans[i].off,
                              f->spans[i].len};
    }
    return cli__api_body(r, "POST", "/api/v1/jobs", &b, job);
}

/* One line per submitted job (an array: one line for all of it). */
static void print_submitted(const json_t *job)
{
    const char *id = json_string_value(json_object_get(job, "id"));
    const char *st = json_string_value(json_object_get(job, "state"));
    const json_t *arr = json_object_get(job, "array");
    json_int_t n = json_integer_value(json_object_get(arr, "count"));

    if (json_is_object(arr) && n > 0)
        printf("array %s submitted: %lld jobs %s_[%s] (%s)\n",
               id ? id : "?",
               (long long)n,
               id ? id : "?",
               json_string_value(json_object_get(arr, "indexes"))
                   ? json_string_value(json_object_get(arr, "indexes"))
                   : "?",
               st ? st : "?");
    else
        printf("job %s submitted (%s)\n", id ? id : "?", st ? st : "?");
}

/* Keep what the server answered: a job, or {"items": [...]} for several
 * documents. Returns how many documents it covers. */
static int submit_keep(struct submit *s, json_t *ans)
{
    json_t *items = json_object_get(ans, "items"), *it;
    size_t i;

    if (!json_is_array(items)) {
        if (s->co.fmt == CLI_FMT_TEXT)
            print_submitted(ans);
        json_array_append(s->out, ans);
        return 1;
    }
    json_array_foreach(items, i, it)
    {
        if (s->co.fmt == CLI_FMT_TEXT)
            print_submitted(it);
        json_array_append(s->out, it);
    }
    return (int)json_array_size(items);
}

static int submit_one(struct submit *s,
                      cli_remote_t *r,
                      const struct sfile *f,
                      size_t i,
                      int *sent)
{
    json_t *job = NULL;
    int rc = post_doc(r, f, i, &job);

    if (rc == CLI_EXIT_OK)
        *sent += submit_keep(s, job);
    json_decref(job);
    return rc;
}

/* A YAML file of several documents goes as one request: craterd stores
 * all of them in one transaction, or none. */
static int submit_file(struct submit *s,
                       cli_remote_t *r,
                       const struct sfile *f,
                       int *sent)
{
    struct cli_body b = {"application/yaml", f->buf, f->len};
    json_t *ans = NULL;
    int rc = CLI_EXIT_OK;

    if (f->json || crater_doc_count(f->doc) < 2
        || f->nspans != (long)crater_doc_count(f->doc)) {
        for (size_t i = 0; rc == CLI_EXIT_OK && i < crater_doc_count(f->doc);
             i++)
            rc = submit_one(s, r, f, i, sent);
        return rc;
    }
    if ((rc = cli__api_body(r, "POST", "/api/v1/jobs", &b, &ans))
        == CLI_EXIT_OK)
        *sent += submit_keep(s, ans);
    json_decref(ans);
    return rc;
}

static int submit_send(struct submit *s)
{
    cli_remote_t r;
    int rc = cli__remote_open(&r, &s->co), sent = 0;

    for (int f = 0; rc == CLI_EXIT_OK && f < s->nfiles; f++)
        rc = submit_file(s, &r, &s->files[f], &sent);
    if (rc != CLI_EXIT_OK && sent)
        fprintf(stderr,
                "crater: %d document%s submitted before the error\n",
                sent,
                sent == 1 ? "" : "s");
    if (s->co.fmt != CLI_FMT_TEXT && json_array_size(s->out))
        cli__print_raw(json_array_size(s->out) == 1 ? json_array_get(s->out, 0)
                                                    : s->out,
                       s->co.fmt);
    cli__remote_close(&r);
    return rc;
}

int cli_submit(int argc, char **argv)
{
    static const char usage[] =
        "usage: crater submit -f FILE [-f FILE ...] [-o json|yaml]\n"
        "                     [--server URL] [--token TOKEN]\n"
        "Submit the Job documents of each FILE ('-' reads stdin; a file may\n"
        "hold several '---' separated documents, stored together in one\n"
        "transaction: all or none). Every document is checked locally\n"
        "first; nothing is sent unless all of them are valid. A document\n"
        "with `array: \"0-999%10\"` is one job per index.\n";
    static const struct option opts[] = {CLI_REMOTE_LONGOPTS,
                                         {"file", required_argument, NULL, 'f'},
                                         {0}};
    struct submit s = {.out = json_array(),
                       .files = calloc(SUBMIT_MAX_FILES, sizeof(struct sfile))};
    int rc = !s.out || !s.files ? CLI_EXIT_REJECTED
                                : cli__parse_opts(argc,
                                                  argv,
                                                  "o:hf:",
                                                  opts,
                                                  usage,
                                                  &s.co,
                                                  submit_opt,
                                                  &s,
                                                  0);

    if (rc == CLI_EXIT_OK && s.nfiles == 0) {
        fprintf(stderr, "crater: error: give at least one -f FILE\n");
        rc = cli__usage(usage, false);
    }
    if (rc == CLI_EXIT_OK)
        rc = submit_check(&s);
    if (rc == CLI_EXIT_OK)
        rc = submit_send(&s);
    for (int f = 0; f < s.nfiles; f++) {
        crater_doc_destroy(s.files[f].doc);
        free(s.files[f].buf);
    }
    free(s.files);
    json_decref(s.out);
    return rc < 0 ? CLI_EXIT_OK : rc;
}

/* ---- run ---------------------------------------------------------------- */

static const char run_usage[] =
    "usage: crater run [OPTIONS] -- COMMAND [ARGS...]\n"
    "Submit COMMAND as a job (argv, no shell), like sbatch.\n"
    "  --name NAME              job name\n"
    "  --tenant T               tenant (admin tokens; users get their own)\n"
    "  --priority N             priority (higher runs first)\n"
    "  --priority-class C       critical, high, normal, low, best-effort\n"
    "  --workload-type W        training, inference, batch, interactive\n"
    "  --preemptible            the job may be preempted\n"
    "  --replicas N             replicas\n"
    "  --grace-period D         SIGTERM to SIGKILL time (30s)\n"
    "  --time D                 time limit: stopped and failed after D "
    "(timeLimit)\n"
    "  --gpu N                  GPUs per replica\n"
    "  --gpu-mem SIZE           per-GPU memory slice (20Gi)\n"
    "  --gpu-model M[,M...]     allowed GPU models (h100-sxm5-80gb,...)\n"
    "  --cpu CPU                CPU request (4, 500m)\n"
    "  --mem SIZE               host memory (16Gi)\n"
    "  --disk-iops N            disk IOPS (50k)\n"
    "  --disk-bandwidth BW      disk bandwidth (500MB/s)\n"
    "  --env NAME=VALUE         environment (repeatable)\n"
    "  --workdir DIR            working directory (absolute)\n"
    "  --array 0-999[%P]        one job per index (CRATER_ARRAY_INDEX), at\n"
    "                           most P running at once\n"
    "  --image IMAGE            container image\n"
    "  --wait                   wait for the job; exit with its exit code\n"
    "  -o, --output json|yaml   print the job object\n";

/* Poll the job until it finishes; its exit status, or an exit code. */
static int run_wait(cli_remote_t *r, const char *id, cli_format_t fmt)
{
    char path[PATH_LEN];
    json_t *job = NULL;
    long delay = 250;
    int rc = job_path(id, "", path, sizeof(path));

    cli__catch_sigint();
    while (rc == CLI_EXIT_OK) {
        json_decref(job);
        job = NULL;
        if ((rc = cli__api(r, "GET", path, NULL, &job)) != CLI_EXIT_OK)
            break;
        if (cli_job_finished(job)) {
            rc = cli_job_exit_status(job);
            fprintf(stderr,
                    "job %s %s (exit status %d)\n",
                    id,
                    json_string_value(json_object_get(job, "state")),
                    rc);
            if (fmt != CLI_FMT_TEXT)
                cli__print_raw(job, fmt);
            break;
        }
        cli__sleep_ms(delay);
        delay = delay < 2000 ? delay * 2 : 2000;
        if (cli__interrupted()) {
            fprintf(stderr,
                    "crater: stopped waiting; job %s goes on "
                    "('crater cancel %s' stops it)\n",
                    id,
                    id);
            rc = 130;
        }
    }
    json_decref(job);
    return rc;
}

static int run_submit(cli_run_t *run, cli_format_t fmt)
{
    cli_common_t co = {.server = run->server, .token = run->token, .fmt = fmt};
    cli_remote_t r;
    json_t *job = NULL;
    const char *id;
    int rc;

    if (run->wait && json_object_get(run->spec, "array")) {
        fprintf(stderr,
                "crater: error: --wait: waits for one job, not an array; "
                "follow an array with `crater get array ID`\n");
        return CLI_EXIT_USAGE;
    }
    rc = cli__remote_open(&r, &co);
    if (rc == CLI_EXIT_OK)
        rc = cli__api(&r, "POST", "/api/v1/jobs", run->spec, &job);
    if (rc == CLI_EXIT_OK) {
        id = json_string_value(json_object_get(job, "id"));
        if (fmt == CLI_FMT_TEXT && !run->wait)
            print_submitted(job);
        else
            fprintf(stderr,
                    "job %s submitted (%s)\n",
                    id ? id : "?",
                    json_string_value(json_object_get(job, "state"))
                        ? json_string_value(json_object_get(job, "state"))
                        : "?");
        if (run->wait && id)
            rc = run_wait(&r, id, fmt);
        else if (fmt != CLI_FMT_TEXT)
            rc = cli__print_raw(job, fmt);
    }
    json_decref(job);
    cli__remote_close(&r);
    return rc;
}

int cli_run(int argc, char **argv)
{
    crater_error_t err;
    cli_run_t run;
    int fmt = CLI_FMT_TEXT, rc;

    if (cli_run_parse(argc, argv, &run, &err) < 0) {
        fprintf(stderr, "crater: error: %s\n", err.text);
        if (err.errnum == CRATER_ENOMEM)
            return CLI_EXIT_REJECTED;
        return cli__usage("Run 'crater run --help' for the options.\n", false);
    }
    if (run.help)
        return cli__usage(run_usage, true);
    if (run.output && strcmp(run.output, "table") != 0
        && (fmt = cli_parse_format(run.output)) < 0) {
        fprintf(stderr, "crater: error: -o: unknown format '%s'\n", run.output);
        json_decref(run.spec);
        return CLI_EXIT_USAGE;
    }
    rc = run_submit(&run, (cli_format_t)fmt);
    json_decref(run.spec);
    return rc;
}

/* ---- get jobs | job | profiles ----------------------------------------- */

enum {
    O_STATE = RO_FIRST_CMD,
    O_TENANT,
    O_WORKLOAD,
    O_LIMIT,
    O_ALL,
    O_STREAM,
    O_REASON,
    O_ATTEMPT,
    O_REPLICA,
    O_ARRAY,
};

struct get_jobs {
    cli_jobs_filter_t f;
    bool all;
    cli_common_t co;
};

static int jobs_opt(int c, const char *arg, void *ctx)
{
    struct get_jobs *g = ctx;
    char *end;

    if (c == O_STATE)
        g->f.state = arg;
    else if (c == O_TENANT)
        g->f.tenant = arg;
    else if (c == O_WORKLOAD)
        g->f.workload_type = arg;
    else if (c == O_ALL)
        g->all = true;
    else if (c == O_LIMIT) {
        g->f.limit = strtol(arg, &end, 10);
        if (*end || g->f.limit < 1 || g->f.limit > 1000) {
            fprintf(stderr,
                    "crater: error: --limit: '%s' is not 1..1000\n",
                    arg);
            return -1;
        }
    } else
        return -1;
    return 0;
}

/* One page, or every page with --all, into *out ({"items", "next"}). */
static int fetch_jobs(cli_remote_t *r, struct get_jobs *g, json_t **out)
{
    char path[PATH_LEN], after[512] = "";
    json_t *all = json_array(), *page = NULL;
    crater_error_t err;
    int rc = all ? CLI_EXIT_OK : CLI_EXIT_REJECTED;

    while (rc == CLI_EXIT_OK) {
        if (cli_jobs_path(&g->f,
                          after[0] ? after : NULL,
                          path,
                          sizeof(path),
                          &err)
            < 0) {
            fprintf(stderr, "crater: error: %s\n", err.text);
            rc = CLI_EXIT_USAGE;
        } else if ((rc = cli__api(r, "GET", path, NULL, &page)) == 0) {
            const char *next = json_string_value(json_object_get(page, "next"));
            json_array_extend(all, json_object_get(page, "items"));
            if (!g->all || !next || !*next || strlen(next) >= sizeof(after))
                break;
            snprintf(after, sizeof(after), "%s", next);
            json_decref(page);
            page = NULL;
        }
    }
    if (rc == CLI_EXIT_OK) {
        if (g->all)
            json_object_set_new(page, "next", json_null());
        json_object_set(page, "items", all);
        *out = page;
    } else
        json_decref(page);
    json_decref(all);
    return rc;
}

static int draw_jobs(cli_remote_t *r, void *arg)
{
    struct get_jobs *g = arg;
    json_t *page = NULL;
    int rc = fetch_jobs(r, g, &page);

    if (rc == CLI_EXIT_OK && g->co.fmt != CLI_FMT_TEXT)
        rc = cli__print_raw(page, g->co.fmt);
    else if (rc == CLI_EXIT_OK
             && cli_print_jobs(stdout,
                               json_object_get(page, "items"),
                               cli__now_ms())
                    < 0)
        rc = CLI_EXIT_REJECTED;
    json_decref(page);
    return rc;
}

static int get_jobs(int argc, char **argv)
{
    static const char usage[] =
        "usage: crater get jobs [--state S[,S...]] [--tenant T]\n"
        "                       [--workload-type W] [--limit N] [--all]\n"
        "                       [-o json|yaml] [--watch] [--interval D]\n"
        "List jobs in the server's order; --all follows\n"
        "every page. Columns: ID NAME TENANT STATE PRIORITY GPUS NODE AGE.\n";
    static const struct option opts[] =
        {CLI_REMOTE_LONGOPTS,
         CLI_WATCH_LONGOPTS,
         {"state", required_argument, NULL, O_STATE},
         {"tenant", required_argument, NULL, O_TENANT},
         {"workload-type", required_argument, NULL, O_WORKLOAD},
         {"limit", required_argument, NULL, O_LIMIT},
         {"all", no_argument, NULL, O_ALL},
         {0}};
    struct get_jobs g = {.all = false};
    cli_remote_t r;
    int rc =
        cli__parse_opts(argc, argv, "o:h", opts, usage, &g.co, jobs_opt, &g, 0);

    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if ((rc = cli__remote_open(&r, &g.co)) == CLI_EXIT_OK)
        rc = cli__watch(&r, &g.co, draw_jobs, &g);
    cli__remote_close(&r);
    return rc;
}

/* get job ID / get profiles: one GET, a table or the raw object. */
struct get_one {
    const char *path;
    bool is_job;
    cli_common_t co;
};

static int draw_one(cli_remote_t *r, void *arg)
{
    struct get_one *g = arg;
    json_t *v = NULL, *items;
    int rc = cli__api(r, "GET", g->path, NULL, &v);

    if (rc == CLI_EXIT_OK && g->co.fmt != CLI_FMT_TEXT)
        rc = cli__print_raw(v, g->co.fmt);
    else if (rc == CLI_EXIT_OK && g->is_job) {
        items = json_pack("[O]", v);
        if (!items || cli_print_jobs(stdout, items, cli__now_ms()) < 0)
            rc = CLI_EXIT_REJECTED;
        json_decref(items);
    } else if (rc == CLI_EXIT_OK
               && cli_print_profiles(stdout, json_object_get(v, "items")) < 0)
        rc = CLI_EXIT_REJECTED;
    json_decref(v);
    return rc;
}

static int get_one(int argc, char **argv, bool is_job)
{
    static const char job_usage[] = "usage: crater get job ID [-o json|yaml] "
                                    "[--watch]\n";
    static const char prof_usage[] = "usage: crater get profiles [-o "
                                     "json|yaml]\n"
                                     "List the profiles (name@version "
                                     "templates) the server knows.\n";
    static const struct option opts[] = {CLI_REMOTE_LONGOPTS,
                                         CLI_WATCH_LONGOPTS,
                                         {0}};
    char path[PATH_LEN] = "/api/v1/profiles";
    struct get_one g = {.path = path, .is_job = is_job};
    cli_remote_t r;
    int rc = cli__parse_opts(argc,
                             argv,
                             "o:h",
                             opts,
                             is_job ? job_usage : prof_usage,
                             &g.co,
                             NULL,
                             NULL,
                             is_job ? 1 : 0);

    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (is_job && (rc = job_path(argv[optind], "", path, sizeof(path))) != 0)
        return rc;
    if ((rc = cli__remote_open(&r, &g.co)) == CLI_EXIT_OK)
        rc = cli__watch(&r, &g.co, draw_one, &g);
    cli__remote_close(&r);
    return rc;
}

/* get array ID: its jobs counted by state. */
static int get_array(int argc, char **argv)
{
    static const char usage[] = "usage: crater get array ID [-o json|yaml]\n"
                                "An array's jobs counted by state.\n";
    char path[PATH_LEN], enc[512];
    cli_common_t co = {0};
    cli_remote_t r = {0};
    json_t *a = NULL, *st;
    const char *k;
    int rc = id_command(argc, argv, usage, &co, NULL, NULL, &r);

    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (cli_urlencode(argv[optind], enc, sizeof(enc)) < 0) {
        cli__remote_close(&r);
        fprintf(stderr, "crater: error: array id too long\n");
        return CLI_EXIT_USAGE;
    }
    snprintf(path, sizeof(path), "/api/v1/arrays/%s", enc);
    rc = cli__api(&r, "GET", path, NULL, &a);
    if (rc == CLI_EXIT_OK && co.fmt != CLI_FMT_TEXT)
        rc = cli__print_raw(a, co.fmt);
    else if (rc == CLI_EXIT_OK) {
        printf("array %s: %lld jobs [%s]",
               argv[optind],
               (long long)json_integer_value(json_object_get(a, "count")),
               json_string_value(json_object_get(a, "indexes"))
                   ? json_string_value(json_object_get(a, "indexes"))
                   : "?");
        json_object_foreach(json_object_get(a, "states"), k, st)
            printf(", %lld %s", (long long)json_integer_value(st), k);
        printf("\n");
    }
    json_decref(a);
    cli__remote_close(&r);
    return rc;
}

int cli_get(int argc, char **argv)
{
    static const char usage[] = "usage: crater get jobs|job ID|array "
                                "ID|nodes|node NAME|profiles|services "
                                "[OPTIONS]\n"
                                "Run 'crater get jobs --help' (etc.) for the "
                                "options.\n";
    const char *what = argc > 1 ? argv[1] : "";

    if (!strcmp(what, "jobs"))
        return get_jobs(argc - 1, argv + 1);
    if (!strcmp(what, "job"))
        return get_one(argc - 1, argv + 1, true);
    if (!strcmp(what, "profiles"))
        return get_one(argc - 1, argv + 1, false);
    if (!strcmp(what, "array"))
        return get_array(argc - 1, argv + 1);
    if (!strcmp(what, "nodes") || !strcmp(what, "node"))
        return cli__get_nodes(argc - 1, argv + 1);
    if (!strcmp(what, "services"))
        return cli__get_services(argc - 1, argv + 1);
    if (!strcmp(what, "-h") || !strcmp(what, "--help"))
        return cli__usage(usage, true);
    if (*what)
        fprintf(stderr, "crater: error: get: unknown object '%s'\n", what);
    return cli__usage(usage, false);
}

/* ---- describe job, explain ---------------------------------------------- */

static int id_command(int argc,
                      char **argv,
                      const char *usage,
                      cli_common_t *co,
                      cli_extra_opt_f extra,
                      void *ctx,
                      cli_remote_t *r)
{
    static const struct option opts[] =
        {CLI_REMOTE_LONGOPTS,
         {"stream", required_argument, NULL, O_STREAM},
         {"follow", no_argument, NULL, 'f'},
         {"reason", required_argument, NULL, O_REASON},
         {"attempt", required_argument, NULL, O_ATTEMPT},
         {"replica", required_argument, NULL, O_REPLICA},
         {"array", no_argument, NULL, O_ARRAY},
         {0}};
    int rc =
        cli__parse_opts(argc, argv, "o:hf", opts, usage, co, extra, ctx, 1);

    if (rc != CLI_EXIT_OK)
        return rc < 0 ? -1 : rc;
    return cli__remote_open(r, co);
}

static int describe_job(int argc, char **argv)
{
    static const char usage[] = "usage: crater describe job ID [-o json|yaml]\n"
                                "The job's spec summary, state history with "
                                "reasons, placement, and\n"
                                "for a pending job the scheduler's "
                                "explanation.\n";
    char path[PATH_LEN];
    cli_common_t co = {0};
    json_t *job = NULL, *ex = NULL;
    const char *st;
    cli_remote_t r = {0};
    int rc = id_command(argc, argv, usage, &co, NULL, NULL, &r);

    if (rc == CLI_EXIT_OK)
        rc = job_path(argv[optind], "", path, sizeof(path));
    if (rc == CLI_EXIT_OK)
        rc = cli__api(&r, "GET", path, NULL, &job);
    st = json_string_value(json_object_get(job, "state"));
    if (rc == CLI_EXIT_OK && co.fmt != CLI_FMT_TEXT)
        rc = cli__print_raw(job, co.fmt);
    else if (rc == CLI_EXIT_OK) {
        if (st && !strcmp(st, "pending")
            && job_path(argv[optind], "/explain", path, sizeof(path)) == 0)
            cli__api(&r, "GET", path, NULL, &ex); /* best effort */
        if (cli_print_job_describe(stdout, job, ex, cli__now_ms()) < 0)
            rc = CLI_EXIT_REJECTED;
    }
    json_decref(job);
    json_decref(ex);
    cli__remote_close(&r);
    return rc < 0 ? CLI_EXIT_OK : rc;
}

int cli_describe(int argc, char **argv)
{
    static const char usage[] = "usage: crater describe job ID | node NAME | "
                                "service NAME\n";
    const char *what = argc > 1 ? argv[1] : "";

    if (!strcmp(what, "job"))
        return describe_job(argc - 1, argv + 1);
    if (!strcmp(what, "node"))
        return cli__describe_node(argc - 1, argv + 1);
    if (!strcmp(what, "service"))
        return cli__describe_service(argc - 1, argv + 1);
    if (!strcmp(what, "-h") || !strcmp(what, "--help"))
        return cli__usage(usage, true);
    if (*what)
        fprintf(stderr, "crater: error: describe: unknown object '%s'\n", what);
    return cli__usage(usage, false);
}

int cli_explain(int argc, char **argv)
{
    static const char usage[] = "usage: crater explain ID [-o json|yaml]\n"
                                "Why the job is where it is: for a pending "
                                "job, how many nodes each\n"
                                "filter rejected and what the closest node "
                                "lacks.\n";
    char path[PATH_LEN];
    cli_common_t co = {0};
    json_t *ex = NULL;
    cli_remote_t r = {0};
    int rc = id_command(argc, argv, usage, &co, NULL, NULL, &r);

    if (rc == CLI_EXIT_OK)
        rc = job_path(argv[optind], "/explain", path, sizeof(path));
    if (rc == CLI_EXIT_OK)
        rc = cli__api(&r, "GET", path, NULL, &ex);
    if (rc == CLI_EXIT_OK && co.fmt != CLI_FMT_TEXT)
        rc = cli__print_raw(ex, co.fmt);
    else if (rc == CLI_EXIT_OK) {
        const char *st = json_string_value(json_object_get(ex, "state"));
        printf("job %s (%s)\n", argv[optind], st ? st : "?");
        if (cli_print_explain(stdout, ex, "  ") < 0)
            rc = CLI_EXIT_REJECTED;
    }
    json_decref(ex);
    cli__remote_close(&r);
    return rc < 0 ? CLI_EXIT_OK : rc;
}

/* ---- logs ---------------------------------------------------------------- */

struct logs {
    const char *stream;
    bool follow;
    unsigned long attempt; /* 0 = the latest */
    const char *replica;   /* of a multi-replica job; NULL = the first */
};

static int logs_opt(int c, const char *arg, void *ctx)
{
    struct logs *l = ctx;
    char *end;

    if (c == 'f') {
        l->follow = true;
    } else if (c == O_STREAM
               && (!strcmp(arg, "stdout") || !strcmp(arg, "stderr"))) {
        l->stream = arg;
    } else if (c == O_REPLICA && arg[0] >= '0' && arg[0] <= '9'
               && strspn(arg, "0123456789") == strlen(arg) && strlen(arg) < 6) {
        l->replica = arg;
    } else if (c == O_ATTEMPT) {
        errno = 0;
        l->attempt = strtoul(arg, &end, 10);
        if (errno || *end || l->attempt == 0 || l->attempt > UINT32_MAX
            || arg[0] == '-') {
            fprintf(stderr,
                    "crater: error: --attempt: '%s' is not an attempt "
                    "number (1, 2, ...)\n",
                    arg);
            return -1;
        }
    } else {
        if (c == O_STREAM)
            fprintf(stderr,
                    "crater: error: --stream: '%s' is not stdout or "
                    "stderr\n",
                    arg);
        if (c == O_REPLICA)
            fprintf(stderr,
                    "crater: error: --replica: '%s' is not a replica "
                    "index (0, 1, ...)\n",
                    arg);
        return -1;
    }
    return 0;
}

/* Print every byte available from *offset on; *got tells whether any came. */
static int drain_log(cli_remote_t *r,
                     const char *id,
                     const struct logs *l,
                     unsigned long long *offset,
                     bool *got)
{
    char suffix[200], att[64] = "", path[PATH_LEN], *buf;
    size_t len;
    int rc;

    if (l->attempt)
        snprintf(att, sizeof(att), "&attempt=%lu", l->attempt);
    if (l->replica)
        snprintf(att + strlen(att),
                 sizeof(att) - strlen(att),
                 "&replica=%s",
                 l->replica);
    *got = false;
    for (;;) {
        snprintf(suffix,
                 sizeof(suffix),
                 "/logs?stream=%s&offset=%llu&limit=65536%s",
                 l->stream,
                 *offset,
                 att);
        if ((rc = job_path(id, suffix, path, sizeof(path))) != 0
            || (rc = cli__api_raw(r, path, &buf, &len)) != 0)
            return rc;
        fwrite(buf, 1, len, stdout);
        free(buf);
        *offset += len;
        if (len == 0 || cli__interrupted())
            break;
        *got = true;
    }
    fflush(stdout);
    return CLI_EXIT_OK;
}

/* The job has finished and craterd holds all of its output (a finished
 * job's last bytes may still be on their way from its node). */
static bool log_complete(const json_t *job)
{
    return cli_job_finished(job)
           && json_is_true(json_object_get(job, "logs_complete"));
}

/* -f: until the job has finished and every byte was printed; without -f:
 * what there is, after waiting (up to 30 s) for a finished job's last
 * bytes to arrive from its node. */
static int print_log(cli_remote_t *r, const char *id, const struct logs *l)
{
    char path[PATH_LEN];
    unsigned long long offset = 0;
    json_t *job = NULL;
    bool done = false, finished, got;
    int rc = job_path(id, "", path, sizeof(path)), waited = 0;

    cli__catch_sigint();
    while (rc == CLI_EXIT_OK && !cli__interrupted()) {
        /* the job's state first: complete before a read that returns
         * nothing means every byte has been seen */
        if ((rc = cli__api(r, "GET", path, NULL, &job)) != CLI_EXIT_OK)
            break;
        /* an earlier attempt's task is gone: its log is what it is */
        done = log_complete(job)
               || (l->attempt
                   && (json_int_t)l->attempt < json_integer_value(
                          json_object_get(job, "attempts")));
        finished = cli_job_finished(job);
        json_decref(job);
        job = NULL;
        if ((rc = drain_log(r, id, l, &offset, &got)) != CLI_EXIT_OK
            || (done && !got) || (!l->follow && (!finished || waited >= 300)))
            break;
        if (!got)
            cli__sleep_ms(l->follow ? 1000 : 100);
        waited += !l->follow;
    }
    return rc;
}

int cli_logs(int argc, char **argv)
{
    static const char usage[] = "usage: crater logs ID [--stream "
                                "stdout|stderr] [--attempt N] [--replica "
                                "R] [-f]\n"
                                "Print the job's output (of its latest "
                                "attempt, or attempt N; of its first "
                                "replica, or replica R); -f follows it\n"
                                "until the job ends (Ctrl-C stops "
                                "following).\n";
    struct logs l = {.stream = "stdout"};
    cli_common_t co = {0};
    cli_remote_t r = {0};
    int rc = id_command(argc, argv, usage, &co, logs_opt, &l, &r);

    if (rc == CLI_EXIT_OK)
        rc = print_log(&r, argv[optind], &l);
    cli__remote_close(&r);
    return rc < 0 ? CLI_EXIT_OK : rc;
}

/* ---- cancel ---------------------------------------------------------------
 */

struct cancel {
    const char *reason;
    bool array;
};

static int cancel_opt(int c, const char *arg, void *ctx)
{
    struct cancel *cn = ctx;

    if (c == O_REASON)
        cn->reason = arg;
    else if (c == O_ARRAY)
        cn->array = true;
    else
        return -1;
    return 0;
}

static void print_cancelled(const char *id, const json_t *ans, bool array)
{
    const char *st = json_string_value(json_object_get(ans, "state"));

    if (array)
        printf("array %s: %lld job%s cancelled\n",
               id,
               (long long)json_integer_value(json_object_get(ans, "cancelled")),
               json_integer_value(json_object_get(ans, "cancelled")) == 1
                   ? ""
                   : "s");
    else if (st && !strcmp(st, "cancelled"))
        printf("job %s cancelled\n", id);
    else
        printf("job %s: cancel requested (%s)\n",
               id,
               st ? st : "state unknown");
}

int cli_cancel(int argc, char **argv)
{
    static const char usage[] =
        "usage: crater cancel ID [--reason TEXT]\n"
        "       crater cancel --array ID [--reason TEXT]\n"
        "Cancel a job: a pending job at once, a running one after its "
        "agent\n"
        "stops it (SIGTERM, gracePeriod, SIGKILL). ID_INDEX names one job "
        "of an\n"
        "array (17_5); --array cancels every unfinished job of array ID.\n";
    struct cancel cn = {0};
    char path[PATH_LEN], enc[512];
    cli_common_t co = {0};
    json_t *body = NULL, *ans = NULL;
    cli_remote_t r = {0};
    int rc = id_command(argc, argv, usage, &co, cancel_opt, &cn, &r);

    if (rc == CLI_EXIT_OK && !cn.array)
        rc = job_path(argv[optind], "/cancel", path, sizeof(path));
    if (rc == CLI_EXIT_OK && cn.array
        && cli_urlencode(argv[optind], enc, sizeof(enc)) == 0)
        snprintf(path, sizeof(path), "/api/v1/arrays/%s/cancel", enc);
    if (rc == CLI_EXIT_OK && cn.reason
        && !(body = json_pack("{ss}", "reason", cn.reason)))
        rc = CLI_EXIT_REJECTED;
    if (rc == CLI_EXIT_OK)
        rc = cli__api(&r, "POST", path, body, &ans);
    if (rc == CLI_EXIT_OK && co.fmt != CLI_FMT_TEXT)
        rc = cli__print_raw(ans, co.fmt);
    else if (rc == CLI_EXIT_OK)
        print_cancelled(argv[optind], ans, cn.array);
    json_decref(body);
    json_decref(ans);
    cli__remote_close(&r);
    return rc < 0 ? CLI_EXIT_OK : rc;
}
