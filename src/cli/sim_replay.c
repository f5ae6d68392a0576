/* sim_replay.c - `crater sim replay` and `crater sim synthetic`: real-time
 * replay of an openb pod list, a JobList file or a synthetic workload
 * through the scheduling core (src/sim/replay.c), one run per policy.
 *
 *   crater sim replay [--trace NAME | --pods FILE] [--nodes FILE]
 *                     [--joblist FILE --hardware FILE]
 *                     [--synthetic SPEC] [--policy k8s-default|crater|both]
 *                     [--sample DURATION] [--json] [--csv] [--plot DIR]
 *   crater sim synthetic SPEC [same options]
 *
 * The table goes to stdout, a progress line to stderr when it is a
 * terminal; --json and --csv print machine-readable summaries instead;
 * --plot DIR writes SVG charts (utilisation over time, queueing delay
 * CDF). This is the CLI, so it prints and measures wall-clock time; the
 * library it drives does neither. --learn-typical gives crater the
 * typical tasks learned from the arrivals, as craterd learns them from
 * its submissions (crater/typhist.h); without it crater has none (the
 * plugin scores), as before. --placements FILE writes every start as a
 * JSON line (policy, job index, time, node, GPU indices) in decision
 * order, to compare with what craterd placed (test_differential.sh).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "crater/hwfile.h"
#include "crater/replay.h"
#include "crater/svg.h"
#include "crater/typhist.h"
#include "crater/units.h"

#define NPOL 2

struct ropts {
    const char *trace, *pods, *nodes, *joblist, *hardware, *synthetic;
    const char *plot;
    const char *placements; /* --placements FILE: one JSON line per start */
    FILE *pl_out;
    int policies[NPOL], npol;
    uint64_t sample_ms;
    double load;   /* 0: replay the trace's own times */
    double limits; /* --time-limits F: timeLimit = F x run time; 0 none */
    bool json, csv, no_preempt, no_backfill;
    bool learn; /* --learn-typical: crater learns its typical tasks */
};

/* One policy's run. */
struct prun {
    crater_replay_policy_t pol;
    crater_replay_result_t res;
    double build_s, run_s;
    double offered, factor; /* offered GPU load before --load; factor */
    size_t skipped;
    bool builtin;
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void progress(void *arg, size_t done, size_t total)
{
    fprintf(stderr,
            "\rreplay %-12s %5.1f%% of arrivals",
            (const char *)arg,
            total ? 100.0 * (double)done / (double)total : 100.0);
}

/* ---- building the cluster and jobs --------------------------------------- */

struct input {
    crater_kb_t *kb;
    crater_cluster_t *cl;
    crater_trace_pod_t *pods;
    size_t npods;
    crater_joblist_t *jl;
    crater_synth_spec_t sp;
    crater_synth_mix_t mix;
    int milli;
};

static void input_free(struct input *in)
{
    crater_cluster_destroy(in->cl);
    crater_trace_free(in->pods);
    crater_joblist_destroy(in->jl);
    crater_synth_mix_clear(&in->mix);
    crater_kb_destroy(in->kb);
}

static int trace_cluster(const crater_trace_node_t *tn,
                         size_t n,
                         struct input *in,
                         crater_error_t *err)
{
    in->milli = 1;
    return crater_openb_cluster(tn, n, in->kb, 1, &in->cl, err);
}

static int load_openb(const struct ropts *o,
                      struct input *in,
                      crater_error_t *err)
{
    const char *dir = crater_openb_dir();
    char pbuf[1024], nbuf[1024];
    const char *pods = o->pods, *nodes = o->nodes;
    crater_trace_node_t *tn = NULL;
    size_t nn = 0;

    if ((!pods || !nodes) && !dir)
        return crater_errorf(err,
                             CRATER_ENOENT,
                             "openb data not found: set CRATER_OPENB_DIR or "
                             "give --pods and --nodes");
    if (!pods)
        snprintf(pbuf, sizeof(pbuf), "%s/openb_pod_list_%s.csv", dir, o->trace),
            pods = pbuf;
    if (!nodes)
        snprintf(nbuf, sizeof(nbuf), "%s/openb_node_list_gpu_node.csv", dir),
            nodes = nbuf;
    if (crater_openb_load_nodes(nodes, &tn, &nn, err) < 0)
        return -1;
    int rc = crater_openb_load_pods(pods, &in->pods, &in->npods, err);
    if (rc == 0)
        rc = trace_cluster(tn, nn, in, err);
    crater_trace_nodes_free(tn);
    return rc;
}

static int load_synth(const struct ropts *o,
                      struct input *in,
                      crater_error_t *err)
{
    crater_trace_node_t *tn = NULL;

    if (crater_synth_parse(o->synthetic, &in->sp, err) < 0
        || crater_synth_mix_load(&in->sp, crater_openb_dir(), &in->mix, err) < 0
        || crater_synth_nodes(&in->sp, &in->mix, &tn, err) < 0)
        return -1;
    int rc = trace_cluster(tn, in->sp.nodes, in, err);
    crater_trace_nodes_free(tn);
    if (rc == 0 && in->mix.builtin)
        fprintf(stderr,
                "crater: openb data not found (or mix=builtin): "
                "using the built-in node and pod mix\n");
    return rc;
}

static int load_input(const struct ropts *o,
                      struct input *in,
                      crater_error_t *err)
{
    if (!(in->kb = crater_kb_create()))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (o->synthetic)
        return load_synth(o, in, err);
    if (o->joblist) {
        if (!o->hardware)
            return crater_errorf_field(err,
                                       CRATER_EMISSING,
                                       "hardware",
                                       "--joblist needs --hardware FILE "
                                       "(a Cluster document)");
        if (crater_hw_load(o->hardware, in->kb, &in->cl, err) < 0)
            return -1;
        return crater_joblist_load(o->joblist, &in->jl, err);
    }
    return load_openb(o, in, err);
}

static int make_jobs(const struct input *in,
                     const crater_sched_t *s,
                     struct prun *pr,
                     crater_replay_job_t **jobs,
                     size_t *n,
                     crater_error_t *err)
{
    if (in->jl)
        return crater_joblist_jobs(in->jl, s, pr->pol, jobs, n, err);
    if (in->mix.nnodes) {
        pr->builtin = in->mix.builtin;
        *n = in->sp.jobs;
        return crater_synth_jobs(&in->sp, &in->mix, s, pr->pol, jobs, err);
    }
    return crater_replay_jobs_from_trace(s,
                                         in->pods,
                                         in->npods,
                                         pr->pol,
                                         jobs,
                                         n,
                                         &pr->skipped,
                                         err);
}

static int set_load(const struct ropts *o,
                    const crater_sched_t *s,
                    struct prun *pr,
                    crater_replay_job_t *jobs,
                    size_t n,
                    crater_error_t *err)
{
    double gpus = 0;

    for (uint32_t i = 0; i < crater_sched_node_count(s); i++)
        gpus += (double)crater_sched_node(s, i)->ngpus;
    pr->offered = crater_replay_offered_load(jobs, n, gpus);
    pr->factor = 1;
    if (o->load <= 0)
        return 0;
    if (pr->offered <= 0)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "load",
                                   "--load: the jobs offer no GPU load to "
                                   "scale");
    pr->factor = o->load / pr->offered;
    crater_replay_compress(jobs, n, pr->factor);
    return 0;
}

/* --learn-typical, policy crater: craterd's histogram, the prior in s. */
static int learn_setup(const struct ropts *o,
                       const struct prun *pr,
                       crater_sched_t *s,
                       crater_typhist_t **out,
                       crater_error_t *err)
{
    crater_config_t cfg;
    crater_typhist_opts_t to;

    *out = NULL;
    if (!o->learn || pr->pol != CRATER_REPLAY_CRATER)
        return 0;
    if (crater_config_defaults(&cfg) < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    crater_typhist_opts_from_config(&cfg, &to);
    crater_config_clear(&cfg);
    if (!(*out = crater_typhist_create(&to)))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    return crater_typhist_install(*out, s, err);
}

/* --placements: each start as one JSON line, in decision order, for
   comparing with craterd's placements (tests/integration/
   test_differential.sh). */
struct pl_sink {
    FILE *f;
    const crater_sched_t *s;
    const char *policy;
};

static void on_start(void *arg,
                     size_t job,
                     const crater_placement_t *p,
                     uint64_t t_ms)
{
    const struct pl_sink *k = arg;
    const crater_node_t *n = crater_sched_node(k->s, p->node);

    fprintf(k->f,
            "{\"policy\":\"%s\",\"job\":%zu,\"t_ms\":%llu,\"node\":\"%s\","
            "\"gpus\":[",
            k->policy,
            job,
            (unsigned long long)t_ms,
            n && n->name ? n->name : "");
    for (uint32_t g = 0; g < p->ngpus; g++)
        fprintf(k->f, "%s%u", g ? "," : "", (unsigned)p->gpu[g]);
    fprintf(k->f, "]}\n");
}

static int run_policy(const struct ropts *o,
                      const struct input *in,
                      struct prun *pr,
                      crater_error_t *err)
{
    crater_replay_job_t *jobs = NULL;
    size_t n = 0;
    double t0 = now_s();
    crater_sched_t *s =
        crater_replay_sched_create(in->cl, in->kb, pr->pol, in->milli, err);
    const char *name = crater_replay_policy_name(pr->pol);
    crater_replay_opts_t ro = {
        .preempt = pr->pol == CRATER_REPLAY_CRATER && !o->no_preempt,
        .backfill = !o->no_backfill,
        .sample_ms = o->sample_ms,
        .progress = isatty(2) ? progress : NULL,
        .cluster = in->cl,
        .progress_arg = (void *)name,
        .idle_reclaim_ms = in->mix.nnodes ? in->sp.idle_reclaim_ms : 0,
    };

    struct pl_sink sink = {o->pl_out, s, name};

    if (!s)
        return -1;
    if (o->pl_out) {
        ro.on_start = on_start;
        ro.on_start_arg = &sink;
    }
    int rc = learn_setup(o, pr, s, &ro.learn, err);
    if (rc == 0)
        rc = make_jobs(in, s, pr, &jobs, &n, err);
    if (rc == 0)
        rc = set_load(o, s, pr, jobs, n, err);
    for (size_t i = 0; rc == 0 && o->limits > 0 && i < n; i++)
        jobs[i].time_limit_ms =
            (uint64_t)((double)jobs[i].runtime_ms * o->limits);
    pr->build_s = now_s() - t0;
    if (rc == 0) {
        t0 = now_s();
        rc = crater_replay_run(s, jobs, n, &ro, &pr->res, err);
        pr->run_s = now_s() - t0;
    }
    if (ro.progress)
        fprintf(stderr, "\r%60s\r", "");
    free(jobs);
    crater_typhist_destroy(ro.learn);
    crater_sched_destroy(s);
    return rc;
}

/* ---- output -------------------------------------------------------------- */

static void print_table(const struct prun *pr, int n)
{
    printf("%-12s %8s %8s %6s %6s %8s %9s %8s %8s\n",
           "policy",
           "gpu-alloc",
           "gpu-req",
           "cpu",
           "mem",
           "preempt",
           "never-ran",
           "run s",
           "jobs");
    for (int i = 0; i < n; i++) {
        const crater_replay_result_t *r = &pr[i].res;
        printf("%-12s %8.1f%% %7.1f%% %5.1f%% %5.1f%% %8zu %9zu %8.2f %8zu\n",
               crater_replay_policy_name(pr[i].pol),
               100 * r->util_gpu_alloc,
               100 * r->util_gpu_req,
               100 * r->util_cpu,
               100 * r->util_mem,
               r->preemptions,
               r->never_started,
               pr[i].run_s,
               r->jobs);
    }
}

/* Row k of the per-class tables: the classes, "all", then "multi-gpu"
 * (jobs asking for 2 or more GPUs, whatever their class). */
static const crater_replay_stats_t *stats_of(const crater_replay_result_t *r,
                                             int k)
{
    if (k < CRATER_REPLAY_NCLASS)
        return &r->cls[k];
    return k == CRATER_REPLAY_NCLASS ? &r->all : &r->multi_gpu;
}

static const char *stats_name(int k)
{
    if (k < CRATER_REPLAY_NCLASS)
        return crater_replay_class_name((crater_replay_class_t)k);
    return k == CRATER_REPLAY_NCLASS ? "all" : "multi-gpu";
}

static void print_classes(const struct prun *pr, int n)
{
    printf("\nqueueing delay (s) and completion time (s) per priority:\n");
    printf("%-12s %-9s %5s %10s %10s %10s %10s\n",
           "policy",
           "class",
           "jobs",
           "wait p50",
           "wait p99",
           "jct p50",
           "jct p99");
    for (int i = 0; i < n; i++)
        for (int k = 0; k <= CRATER_REPLAY_NCLASS + 1; k++) {
            const crater_replay_stats_t *s = stats_of(&pr[i].res, k);
            if (!s->jobs)
                continue;
            printf("%-12s %-9s %5zu %10.0f %10.0f %10.0f %10.0f\n",
                   crater_replay_policy_name(pr[i].pol),
                   stats_name(k),
                   s->jobs,
                   s->wait_p50,
                   s->wait_p99,
                   s->jct_p50,
                   s->jct_p99);
        }
}

/* Synthetic jobs with an idle profile (idle=): the GPU-time held busy,
 * and what idle reclaim (idlereclaim=) ended. */
static void print_idle(const struct prun *pr, int n, const struct input *in)
{
    if (!(in->sp.idle > 0))
        return;
    printf("\nidle profile: %.0f%% of jobs idle for the last %.0f%% of their "
           "runtime; idle reclaim after %.0f min%s\n",
           100 * in->sp.idle,
           100 * in->sp.idle_tail,
           (double)in->sp.idle_reclaim_ms / 60000.0,
           in->sp.idle_reclaim_ms ? "" : " (off)");
    for (int i = 0; i < n; i++)
        printf("%-12s GPUs held %5.1f%%, busy %5.1f%% (whole run); %zu idle "
               "reclaims\n",
               crater_replay_policy_name(pr[i].pol),
               100 * pr[i].res.util_gpu_alloc_all,
               100 * pr[i].res.util_gpu_busy_all,
               pr[i].res.idle_reclaims);
}

static void print_footer(const struct prun *pr)
{
    const crater_replay_result_t *r = &pr[0].res;
    printf("\ncluster: %.0f GPUs, %.0f cores, %.0f GiB; arrival window %.1f h, "
           "makespan %.1f h",
           r->gpus,
           r->cpu_cores,
           r->mem_gib,
           (double)(r->t_last_submit_ms - r->t_first_ms) / 3.6e6,
           (double)(r->t_end_ms - r->t_first_ms) / 3.6e6);
    if (pr[0].skipped)
        printf("; %zu pods never ran in the trace (skipped)", pr[0].skipped);
    printf("\noffered GPU load %.2f%%", 100 * pr[0].offered);
    if (pr[0].factor != 1)
        printf(", arrivals compressed %.1fx to %.0f%% (--load)",
               pr[0].factor,
               100 * pr[0].offered * pr[0].factor);
    printf("\n");
}

static void print_csv(const struct prun *pr, int n)
{
    printf("policy,class,jobs,started,completed,wait_p50_s,wait_p99_s,"
           "jct_p50_s,jct_p99_s,util_gpu_alloc,util_gpu_req,preemptions\n");
    for (int i = 0; i < n; i++)
        for (int k = 0; k <= CRATER_REPLAY_NCLASS + 1; k++) {
            const crater_replay_result_t *r = &pr[i].res;
            const crater_replay_stats_t *s = stats_of(r, k);
            printf("%s,%s,%zu,%zu,%zu,%.3f,%.3f,%.3f,%.3f,%.6f,%.6f,%zu\n",
                   crater_replay_policy_name(pr[i].pol),
                   stats_name(k),
                   s->jobs,
                   s->started,
                   s->completed,
                   s->wait_p50,
                   s->wait_p99,
                   s->jct_p50,
                   s->jct_p99,
                   r->util_gpu_alloc,
                   r->util_gpu_req,
                   r->preemptions);
        }
}

static int print_json(const struct prun *pr, int n)
{
    json_t *a = json_array();

    for (int i = 0; a && i < n; i++) {
        json_t *o = crater_replay_result_json(&pr[i].res, false);
        if (!o)
            break;
        json_object_set_new(o,
                            "policy",
                            json_string(crater_replay_policy_name(pr[i].pol)));
        json_object_set_new(o, "run_s", json_real(pr[i].run_s));
        json_object_set_new(o, "build_s", json_real(pr[i].build_s));
        json_object_set_new(o,
                            "skipped",
                            json_integer((json_int_t)pr[i].skipped));
        json_object_set_new(o, "offered_load", json_real(pr[i].offered));
        json_object_set_new(o, "time_compression", json_real(pr[i].factor));
        json_array_append_new(a, o);
    }
    int rc = a ? cli_print(a, CLI_FMT_JSON) : -1;
    json_decref(a);
    return rc;
}

/* ---- plots --------------------------------------------------------------- */

static int write_svg(const char *dir,
                     const char *file,
                     char *svg,
                     crater_error_t *err)
{
    char path[4096];

    if (!svg)
        return -1;
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    int rc = crater_svg_write(path, svg, err);
    free(svg);
    if (rc == 0)
        fprintf(stderr, "crater: wrote %s\n", path);
    return rc;
}

/* Sample times in hours and one column of the samples. */
static int columns(const crater_replay_result_t *r, double **t, double *y[5])
{
    size_t n = r->nsamples ? r->nsamples : 1;

    *t = malloc(n * sizeof(**t));
    for (int d = 0; d < 5; d++)
        y[d] = malloc(n * sizeof(*y[d]));
    if (!*t || !y[0] || !y[1] || !y[2] || !y[3] || !y[4])
        return -1;
    for (size_t i = 0; i < r->nsamples; i++) {
        const crater_replay_sample_t *s = &r->samples[i];
        (*t)[i] = (double)(s->t_ms - r->t_first_ms) / 3.6e6;
        y[0][i] = 100 * s->gpu_alloc;
        y[1][i] = 100 * s->gpu_req;
        y[2][i] = 100 * s->cpu;
        y[3][i] = 100 * s->mem;
        y[4][i] = s->pending;
    }
    return 0;
}

static void free_columns(double *t, double *y[5])
{
    free(t);
    for (int d = 0; d < 5; d++)
        free(y[d]);
}

static int plot_dims(const char *dir,
                     const struct prun *pr,
                     crater_error_t *err)
{
    static const char *const names[] = {"GPU allocated",
                                        "GPU requested",
                                        "CPU",
                                        "memory"};
    const char *pol = crater_replay_policy_name(pr->pol);
    double *t = NULL, *y[5] = {0};
    crater_svg_series_t s[4];
    char title[128], file[128];
    int rc = -1;

    if (columns(&pr->res, &t, y) == 0) {
        for (int d = 0; d < 4; d++)
            s[d] = (crater_svg_series_t){names[d],
                                         t,
                                         y[d],
                                         pr->res.nsamples,
                                         NULL,
                                         d == 1};
        snprintf(title, sizeof(title), "Utilisation over time (%s)", pol);
        snprintf(file, sizeof(file), "replay-util-%s.svg", pol);
        crater_svg_chart_t c = {.title = title,
                                .xlabel = "time (h)",
                                .ylabel = "allocated (% of capacity)",
                                .ymin = 0,
                                .ymax = 100};
        rc = write_svg(dir, file, crater_svg_line_chart(&c, s, 4, err), err);
    } else {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    free_columns(t, y);
    return rc;
}

static int plot_gpu(const char *dir,
                    const struct prun *pr,
                    int n,
                    crater_error_t *err)
{
    double *t[NPOL] = {0}, *y[NPOL][5] = {{0}};
    crater_svg_series_t s[2 * NPOL];
    char names[2 * NPOL][64];
    int rc = 0;

    for (int i = 0; i < n && rc == 0; i++) {
        rc = columns(&pr[i].res, &t[i], y[i]);
        for (int k = 0; k < 2 && rc == 0; k++) {
            snprintf(names[2 * i + k],
                     64,
                     "%s, GPU %s",
                     crater_replay_policy_name(pr[i].pol),
                     k ? "requested" : "allocated");
            s[2 * i + k] = (crater_svg_series_t){names[2 * i + k],
                                                 t[i],
                                                 y[i][k],
                                                 pr[i].res.nsamples,
                                                 NULL,
                                                 k == 1};
        }
    }
    crater_svg_chart_t c = {.title = "GPU utilisation over time",
                            .xlabel = "time (h)",
                            .ylabel = "GPUs (% of capacity)",
                            .ymin = 0,
                            .ymax = 100};
    if (rc == 0)
        rc = write_svg(dir,
                       "replay-gpu-util.svg",
                       crater_svg_line_chart(&c, s, (size_t)(2 * n), err),
                       err);
    else
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++)
        free_columns(t[i], y[i]);
    return rc;
}

static int plot_cdf(const char *dir,
                    const struct prun *pr,
                    int n,
                    crater_error_t *err)
{
    crater_svg_series_t s[NPOL * CRATER_REPLAY_NCLASS];
    char names[NPOL * CRATER_REPLAY_NCLASS][64];
    double *mins[NPOL * CRATER_REPLAY_NCLASS] = {0};
    size_t ns = 0;
    int rc = 0;

    for (int i = 0; i < n; i++)
        for (int k = 0; k < CRATER_REPLAY_NCLASS; k++) {
            size_t m = pr[i].res.nwait[k];
            if (!m)
                continue;
            if (!(mins[ns] = malloc(m * sizeof(double))))
                rc = crater_errorf(err, CRATER_ENOMEM, "out of memory");
            for (size_t j = 0; rc == 0 && j < m; j++)
                mins[ns][j] = pr[i].res.wait_s[k][j] / 60.0;
            snprintf(names[ns],
                     64,
                     "%s, %s priority",
                     crater_replay_policy_name(pr[i].pol),
                     crater_replay_class_name((crater_replay_class_t)k));
            s[ns] = (crater_svg_series_t){names[ns],
                                          mins[ns],
                                          NULL,
                                          m,
                                          NULL,
                                          false};
            ns++;
        }
    crater_svg_chart_t c = {.title = "Queueing delay CDF",
                            .xlabel = "queueing delay (min)",
                            .ylabel = "fraction of jobs"};
    if (rc == 0)
        rc = write_svg(dir,
                       "replay-wait-cdf.svg",
                       crater_svg_cdf(&c, s, ns, err),
                       err);
    for (size_t i = 0; i < ns; i++)
        free(mins[i]);
    return rc;
}

static int plots(const char *dir,
                 const struct prun *pr,
                 int n,
                 crater_error_t *err)
{
    if (mkdir(dir, 0777) < 0 && access(dir, W_OK) < 0)
        return crater_errorf_field(err,
                                   CRATER_EIO,
                                   "plot",
                                   "%s: cannot create or write",
                                   dir);
    for (int i = 0; i < n; i++)
        if (plot_dims(dir, &pr[i], err) < 0)
            return -1;
    if (plot_gpu(dir, pr, n, err) < 0)
        return -1;
    return plot_cdf(dir, pr, n, err);
}

/* ---- options ------------------------------------------------------------- */

static void usage(FILE *fp)
{
    fprintf(fp,
            "usage: crater sim replay [--trace NAME|--pods FILE] [--nodes "
            "FILE]\n"
            "                         [--joblist FILE --hardware FILE]\n"
            "                         [--synthetic SPEC]\n"
            "                         [--policy k8s-default|crater|both]\n"
            "                         [--load L] [--sample DURATION] "
            "[--no-preempt]\n"
            "                         [--time-limits F] [--no-backfill]\n"
            "                         [--learn-typical] [--placements FILE]\n"
            "                         [--json|--csv] [--plot DIR]\n"
            "       crater sim synthetic SPEC [same options]\n"
            "SPEC: nodes=N,jobs=M[,mix=openb|builtin][,seed=S][,load=0.9]"
            "[,runtime=1h][,dist=exp|lognormal]\n");
}

static int parse_policy(const char *v, struct ropts *o)
{
    crater_replay_policy_t p;
    crater_error_t err;

    if (!strcmp(v, "both")) {
        o->policies[0] = CRATER_REPLAY_K8S_DEFAULT;
        o->policies[1] = CRATER_REPLAY_CRATER;
        o->npol = 2;
        return 0;
    }
    if (crater_replay_policy_parse(v, &p, &err) < 0) {
        fprintf(stderr, "crater: --policy: %s (or both)\n", err.text);
        return -1;
    }
    o->policies[0] = (int)p;
    o->npol = 1;
    return 0;
}

static int parse_sample(const char *v, struct ropts *o)
{
    uint64_t ns;
    crater_error_t err;

    if (crater_parse_duration_ns(v, &ns, &err) < 0 || ns < 1000000) {
        fprintf(stderr, "crater: --sample: '%s' is not a duration >= 1ms\n", v);
        return -1;
    }
    o->sample_ms = ns / 1000000;
    return 0;
}

static int parse_load(const char *v, struct ropts *o)
{
    char *end;
    double x = strtod(v, &end);

    if (end == v || (*end && strcmp(end, "%")) || !(x > 0) || x > 1000) {
        fprintf(stderr,
                "crater: --load: '%s' is not a load like 0.8 or "
                "80%%\n",
                v);
        return -1;
    }
    o->load = *end ? x / 100 : x;
    return 0;
}

/* --time-limits F: every job's timeLimit is F x its run time (F >= 1: a
 * user's estimate that is never too short). */
static int parse_limits(const char *v, struct ropts *o)
{
    char *end;
    double x = strtod(v, &end);

    if (end == v || *end || !(x >= 1) || x > 1000) {
        fprintf(stderr,
                "crater: --time-limits: '%s' is not a factor from 1 to "
                "1000\n",
                v);
        return -1;
    }
    o->limits = x;
    return 0;
}

static const struct option long_opts[] = {
    {"trace", required_argument, NULL, 't'},
    {"pods", required_argument, NULL, 'p'},
    {"nodes", required_argument, NULL, 'n'},
    {"joblist", required_argument, NULL, 'J'},
    {"hardware", required_argument, NULL, 'H'},
    {"synthetic", required_argument, NULL, 'S'},
    {"policy", required_argument, NULL, 'P'},
    {"sample", required_argument, NULL, 's'},
    {"load", required_argument, NULL, 'L'},
    {"plot", required_argument, NULL, 'o'},
    {"json", no_argument, NULL, 'j'},
    {"csv", no_argument, NULL, 'c'},
    {"no-preempt", no_argument, NULL, 'N'},
    {"time-limits", required_argument, NULL, 'T'},
    {"no-backfill", no_argument, NULL, 'B'},
    {"learn-typical", no_argument, NULL, 'l'},
    {"placements", required_argument, NULL, 'O'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Apply option c; 0, -1 after --help, or an exit code. */
static int set_opt(int c, struct ropts *o)
{
    switch (c) {
    case 't':
        o->trace = optarg;
        break;
    case 'p':
        o->pods = optarg;
        break;
    case 'n':
        o->nodes = optarg;
        break;
    case 'J':
        o->joblist = optarg;
        break;
    case 'H':
        o->hardware = optarg;
        break;
    case 'S':
        o->synthetic = optarg;
        break;
    case 'o':
        o->plot = optarg;
        break;
    case 'O':
        o->placements = optarg;
        break;
    case 'j':
        o->json = true;
        break;
    case 'c':
        o->csv = true;
        break;
    case 'N':
        o->no_preempt = true;
        break;
    case 'B':
        o->no_backfill = true;
        break;
    case 'l':
        o->learn = true;
        break;
    case 'T':
        if (parse_limits(optarg, o) < 0)
            return CLI_EXIT_USAGE;
        break;
    case 'P':
        if (parse_policy(optarg, o) < 0)
            return CLI_EXIT_USAGE;
        break;
    case 's':
        if (parse_sample(optarg, o) < 0)
            return CLI_EXIT_USAGE;
        break;
    case 'L':
        if (parse_load(optarg, o) < 0)
            return CLI_EXIT_USAGE;
        break;
    case 'h':
        usage(stdout);
        return -1;
    default:
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

static int parse_opts(int argc, char **argv, struct ropts *o)
{
    int c, rc;

    optind = 1;
    while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1)
        if ((rc = set_opt(c, o)) != 0)
            return rc;
    if (optind < argc) {
        fprintf(stderr,
                "crater: sim replay: unexpected argument '%s'\n",
                argv[optind]);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

static int replay_main(struct ropts *o)
{
    struct input in = {0};
    struct prun pr[NPOL] = {0};
    crater_error_t err = {0};
    int n = 0, rc = load_input(o, &in, &err);

    if (rc == 0 && o->placements && !(o->pl_out = fopen(o->placements, "w")))
        rc = crater_errorf_field(&err,
                                 CRATER_EIO,
                                 "placements",
                                 "%s: %s",
                                 o->placements,
                                 strerror(errno));

    for (; rc == 0 && n < o->npol; n++) {
        pr[n].pol = (crater_replay_policy_t)o->policies[n];
        if (run_policy(o, &in, &pr[n], &err) < 0)
            rc = -1;
    }
    if (rc == 0) {
        if (o->json)
            rc = print_json(pr, n);
        else if (o->csv)
            print_csv(pr, n);
        else {
            print_table(pr, n);
            print_classes(pr, n);
            print_footer(pr);
            print_idle(pr, n, &in);
        }
    }
    if (rc == 0 && o->plot)
        rc = plots(o->plot, pr, n, &err);
    if (rc < 0)
        fprintf(stderr, "crater: %s\n", err.text);
    for (int i = 0; i < NPOL; i++)
        crater_replay_result_clear(&pr[i].res);
    if (o->pl_out && fclose(o->pl_out) != 0 && rc == 0) {
        fprintf(stderr, "crater: %s: %s\n", o->placements, strerror(errno));
        rc = -1;
    }
    input_free(&in);
    return rc < 0 ? CLI_EXIT_REJECTED : CLI_EXIT_OK;
}

static void defaults(struct ropts *o)
{
    memset(o, 0, sizeof(*o));
    o->trace = "default";
    o->policies[0] = CRATER_REPLAY_K8S_DEFAULT;
    o->policies[1] = CRATER_REPLAY_CRATER;
    o->npol = 2;
}

int cli_sim_replay(int argc, char **argv)
{
    struct ropts o;

    defaults(&o);
    int rc = parse_opts(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    return replay_main(&o);
}

int cli_sim_synthetic(int argc, char **argv)
{
    struct ropts o;

    defaults(&o);
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && !strcmp(argv[1], "--help")) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    o.synthetic = argv[1];
    int rc = parse_opts(argc - 1, argv + 1, &o);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    return replay_main(&o);
}
