/* sim.c - `crater sim`: the FGD-protocol simulator on the openb traces.
 *
 *   crater sim openb [--trace NAME | --pods FILE] [--nodes FILE]
 *                    [--policy P] [--seed S] [--json]
 *   crater sim compare [--traces all|NAME,...] [--policies all|P,...]
 *                      [--seeds 42-51] [--json] [--markdown]
 *   crater sim bound ... (sim_bound.c)
 *
 * A trace NAME is a pod list of the openb data directory
 * (crater_openb_dir()): "default" means openb_pod_list_default.csv. The
 * node list defaults to that directory's GPU node list. `compare` runs
 * every trace x policy x seed in this process and prints, per trace, the
 * mean over seeds next to the paper's cached numbers (fgd_expected.md in
 * the same directory) and the difference. Progress goes to stderr.
 * A policy is one of the core's or "crater-learned" (Crater's policy with
 * the typical tasks learned from the arrivals, as craterd runs it).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "crater/fgd.h"
#include "crater/svg.h"

#define MAX_TRACES 32
#define MAX_POLICIES 16
#define MAX_SEEDS 256

static const char *const all_traces[] = {
    "cpu050",
    "cpu100",
    "cpu200",
    "default",
    "gpushare40",
    "gpushare60",
    "gpushare80",
    "gpuspec10",
    "gpuspec20",
    "multigpu20",
    "multigpu30",
    NULL,
};

static const int steps[] = {50, 70, 80, 90, 100, 110, 120, 130};
#define NSTEPS 8

/* Paper numbers for one trace x policy (fgd_expected.md). */
struct paper {
    int have;
    double alloc[NSTEPS];
    double unalloc, unalloc_sd, frag, fragratio;
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void trace_path(char *buf,
                       size_t size,
                       const char *dir,
                       const char *name)
{
    snprintf(buf, size, "%s/openb_pod_list_%s.csv", dir, name);
}

struct data {
    crater_trace_node_t *nodes;
    size_t nnodes;
    crater_trace_pod_t *pods;
    size_t npods;
};

static void data_free(struct data *d)
{
    crater_trace_nodes_free(d->nodes);
    crater_trace_free(d->pods);
    memset(d, 0, sizeof(*d));
}

static int load(struct data *d, const char *nodes, const char *pods)
{
    crater_error_t err;

    if (crater_openb_load_nodes(nodes, &d->nodes, &d->nnodes, &err) < 0
        || crater_openb_load_pods(pods, &d->pods, &d->npods, &err) < 0) {
        fprintf(stderr, "crater: %s\n", err.text);
        data_free(d);
        return -1;
    }
    return 0;
}

static int run_one(const struct data *d,
                   const char *policy,
                   uint64_t seed,
                   crater_fgd_result_t *res)
{
    crater_fgd_opts_t o = {policy, seed, 1.3, 95};
    crater_error_t err;

    if (crater_fgd_run(d->nodes,
                       d->nnodes,
                       d->pods,
                       d->npods,
                       NULL,
                       &o,
                       res,
                       &err)
        < 0) {
        fprintf(stderr, "crater: %s\n", err.text);
        return -1;
    }
    return 0;
}

/* ---- openb
 * ------------------------------------------------------------------- */

static json_t *result_json(const crater_fgd_result_t *r,
                           const char *policy,
                           uint64_t seed,
                           double secs)
{
    json_t *curve = json_array(), *room = json_array();

    for (int i = 0; i < CRATER_FGD_STEPS; i++)
        json_array_append_new(curve, json_real(r->alloc[i]));
    for (int i = 0; i < 11; i++)
        json_array_append_new(room, json_real(r->end_room[i]));
    return json_pack("{s:s, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:I, "
                     "s:I, s:I, s:f, s:o, s:o, s:f}",
                     "policy",
                     policy,
                     "seed",
                     (json_int_t)seed,
                     "alloc_at_100",
                     r->alloc_at_100,
                     "alloc_at_130",
                     r->alloc_at_130,
                     "unallocated_gpus_at_100",
                     r->unallocated_gpus_at_100,
                     "unallocated_gpus_at_130",
                     r->unallocated_gpus_at_130,
                     "frag_pct_at_100",
                     r->frag_pct_at_100,
                     "frag_ratio_at_100",
                     r->frag_ratio_at_100,
                     "capacity_gpus",
                     (json_int_t)(r->capacity_milli / 1000),
                     "pods",
                     (json_int_t)r->pods,
                     "arrived",
                     (json_int_t)r->arrived,
                     "placed",
                     (json_int_t)r->placed,
                     "typical_shapes",
                     (json_int_t)r->typical,
                     "seconds",
                     secs,
                     "curve",
                     curve,
                     "end_room_gpus",
                     room,
                     "end_room_cpu_starved_gpus",
                     r->end_room_cpu_starved);
}

static void print_result(const crater_fgd_result_t *r,
                         const char *policy,
                         uint64_t seed,
                         double secs)
{
    printf("policy %s, seed %llu: %zu GPU nodes (%llu GPUs), %zu pods in the "
           "trace, %zu "
           "arrived, %zu placed, %zu dropped (%.2f s)\n",
           policy,
           (unsigned long long)seed,
           r->gpu_nodes,
           (unsigned long long)(r->capacity_milli / 1000),
           r->pods,
           r->arrived,
           r->placed,
           r->dropped,
           secs);
    printf("arrived%%  allocated%%\n");
    for (int i = 0; i < NSTEPS; i++)
        printf("%7d%%  %10.2f\n", steps[i], r->alloc[steps[i]]);
    printf("unallocated GPUs: %.1f at 100%%, %.1f at 130%%\n",
           r->unallocated_gpus_at_100,
           r->unallocated_gpus_at_130);
    printf("fragmentation at 100%%: %.2f%% of capacity, %.2f%% of idle GPU\n",
           r->frag_pct_at_100,
           r->frag_ratio_at_100);
    printf("unallocated at the end, by room left per GPU (GPUs):");
    for (int i = 0; i < 10; i++)
        printf(" 0.%d-:%.1f", i, r->end_room[i]);
    printf(" whole:%.1f; on nodes with < 1 free core: %.1f\n",
           r->end_room[10],
           r->end_room_cpu_starved);
}

static int sim_openb(int argc, char **argv)
{
    static const struct option opts[] = {
        {"trace", required_argument, NULL, 't'},
        {"pods", required_argument, NULL, 'p'},
        {"nodes", required_argument, NULL, 'n'},
        {"policy", required_argument, NULL, 'P'},
        {"seed", required_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *trace = "default", *pods = NULL, *nodes = NULL,
               *policy = "crater";
    const char *dir = crater_openb_dir();
    char pbuf[1024], nbuf[1024];
    uint64_t seed = 42;
    int json = 0, c;
    struct data d = {0};
    crater_fgd_result_t r;

    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            trace = optarg;
            break;
        case 'p':
            pods = optarg;
            break;
        case 'n':
            nodes = optarg;
            break;
        case 'P':
            policy = optarg;
            break;
        case 's':
            seed = strtoull(optarg, NULL, 10);
            break;
        case 'j':
            json = 1;
            break;
        case 'h':
            printf("usage: crater sim openb [--trace NAME|--pods FILE] "
                   "[--nodes FILE] "
                   "[--policy P] [--seed S] [--json]\n");
            return CLI_EXIT_OK;
        default:
            return CLI_EXIT_USAGE;
        }
    }
    if ((!pods || !nodes) && !dir) {
        fprintf(stderr,
                "crater: openb data not found: set CRATER_OPENB_DIR or give "
                "--pods "
                "and --nodes\n");
        return CLI_EXIT_USAGE;
    }
    if (!pods)
        trace_path(pbuf, sizeof(pbuf), dir, trace), pods = pbuf;
    if (!nodes)
        snprintf(nbuf, sizeof(nbuf), "%s/openb_node_list_gpu_node.csv", dir),
            nodes = nbuf;
    if (load(&d, nodes, pods) < 0)
        return CLI_EXIT_REJECTED;
    double t0 = now_s();
    int rc = run_one(&d, policy, seed, &r);
    double secs = now_s() - t0;
    data_free(&d);
    if (rc < 0)
        return CLI_EXIT_REJECTED;
    if (json) {
        json_t *j = result_json(&r, policy, seed, secs);
        cli_print(j, CLI_FMT_JSON);
        json_decref(j);
    } else {
        print_result(&r, policy, seed, secs);
    }
    return CLI_EXIT_OK;
}

/* ---- compare
 * ------------------------------------------------------------------ */

static const char *paper_name(const char *policy)
{
    static const char *const map[][2] = {
        {"random", "01-Random"},
        {"dotprod", "02-DotProd"},
        {"gpuclustering", "03-GpuClustering"},
        {"gpupacking", "04-GpuPacking"},
        {"bestfit", "05-BestFit"},
        {"fgd", "06-FGD"},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(map[i][0], policy) == 0)
            return map[i][1];
    return NULL;
}

/* Find "## openb_pod_list_TRACE" then "| NAME | ..." in fgd_expected.md. */
static void load_paper(const char *dir,
                       const char *trace,
                       const char *policy,
                       struct paper *p)
{
    char path[1024], line[1024], head[128];
    const char *name = paper_name(policy);
    int in = 0;
    FILE *f;

    memset(p, 0, sizeof(*p));
    snprintf(path, sizeof(path), "%s/fgd_expected.md", dir ? dir : ".");
    if (!name || !(f = fopen(path, "r")))
        return;
    snprintf(head, sizeof(head), "## openb_pod_list_%s ", trace);
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "## ", 3) == 0)
            in = strncmp(line, head, strlen(head)) == 0;
        if (!in || strncmp(line, "| ", 2) != 0
            || strncmp(line + 2, name, strlen(name)) != 0)
            continue;
        char *q = strchr(line + 2, '|');
        double v[NSTEPS];
        int n = 0;
        for (; q && n < NSTEPS; n++) {
            v[n] = strtod(q + 1, &q);
            q = strchr(q, '|');
        }
        if (n == NSTEPS && q
            && sscanf(q,
                      "| %lf ± %lf | %lf | %lf",
                      &p->unalloc,
                      &p->unalloc_sd,
                      &p->frag,
                      &p->fragratio)
                   == 4) {
            memcpy(p->alloc, v, sizeof(v));
            p->have = 1;
        }
    }
    fclose(f);
}

static int known(const char *name, const char *const *all)
{
    for (; *all; all++)
        if (strcmp(*all, name) == 0)
            return 1;
    return 0;
}

/* "all" or a comma-separated list of names from all; -1 (reported, naming
 * the option) for a name not in all. */
static int split_list(char *s,
                      const char **out,
                      int max,
                      const char *const *all,
                      const char *option)
{
    int n = 0;

    if (strcmp(s, "all") == 0) {
        for (; all[n] && n < max; n++)
            out[n] = all[n];
        return n;
    }
    for (char *t = strtok(s, ","); t && n < max; t = strtok(NULL, ",")) {
        if (!known(t, all)) {
            fprintf(stderr,
                    "crater: %s: unknown name '%s' (one of:",
                    option,
                    t);
            for (; *all; all++)
                fprintf(stderr, " %s", *all);
            fprintf(stderr, ")\n");
            return -1;
        }
        out[n++] = t;
    }
    return n;
}

static int parse_seeds(const char *s, uint64_t *seeds, int max)
{
    unsigned long long a, b;
    int n = 0;

    if (sscanf(s, "%llu-%llu", &a, &b) == 2) {
        for (unsigned long long x = a; x <= b && n < max; x++)
            seeds[n++] = x;
        return n;
    }
    char *copy = strdup(s);
    for (char *t = strtok(copy, ","); t && n < max; t = strtok(NULL, ","))
        seeds[n++] = strtoull(t, NULL, 10);
    free(copy);
    return n;
}

struct agg {
    double alloc[NSTEPS];
    double curve[CRATER_FGD_STEPS]; /* sum over seeds, every 1% */
    double unalloc, unalloc_sq, frag, fragratio;
    int n;
};

static void agg_add(struct agg *a, const crater_fgd_result_t *r)
{
    for (int i = 0; i < NSTEPS; i++)
        a->alloc[i] += r->alloc[steps[i]];
    for (int i = 0; i < CRATER_FGD_STEPS; i++)
        a->curve[i] += r->alloc[i];
    a->unalloc += r->unallocated_gpus_at_130;
    a->unalloc_sq += r->unallocated_gpus_at_130 * r->unallocated_gpus_at_130;
    a->frag += r->frag_pct_at_100;
    a->fragratio += r->frag_ratio_at_100;
    a->n++;
}

static double sd(const struct agg *a)
{
    double m = a->unalloc / a->n, v = a->unalloc_sq / a->n - m * m;

    return a->n > 1 && v > 0 ? sqrt(v * a->n / (a->n - 1)) : 0;
}

/* Policies without a paper row (crater, k8s) are set against the paper's
 * FGD, marked "FGD". */
static void print_row(const char *policy,
                      const struct agg *a,
                      const struct paper *p,
                      const struct paper *fgd)
{
    const struct paper *ref = p->have ? p : fgd;
    const char *tag = p->have ? "" : "FGD ";

    printf("| %s |", policy);
    for (int i = 0; i < NSTEPS; i++)
        printf(" %.2f |", a->alloc[i] / a->n);
    printf(" %.0f ± %.0f | %.2f |", a->unalloc / a->n, sd(a), a->frag / a->n);
    if (ref->have)
        printf(" %s%.2f (%+.2f) | %s%.2f (%+.2f) | %s%.0f (%+.0f) | %s%.2f |\n",
               tag,
               ref->alloc[4],
               a->alloc[4] / a->n - ref->alloc[4],
               tag,
               ref->alloc[7],
               a->alloc[7] / a->n - ref->alloc[7],
               tag,
               ref->unalloc,
               a->unalloc / a->n - ref->unalloc,
               tag,
               ref->frag);
    else
        printf(" - | - | - | - |\n");
}

static json_t *row_json(const char *trace,
                        const char *policy,
                        const struct agg *a,
                        const struct paper *p)
{
    json_t *al = json_object();

    for (int i = 0; i < NSTEPS; i++) {
        char k[16];
        snprintf(k, sizeof(k), "%d", steps[i]);
        json_object_set_new(al, k, json_real(a->alloc[i] / a->n));
    }
    json_t *o = json_pack("{s:s, s:s, s:i, s:o, s:f, s:f, s:f, s:f}",
                          "trace",
                          trace,
                          "policy",
                          policy,
                          "seeds",
                          a->n,
                          "alloc",
                          al,
                          "unallocated_gpus_at_130",
                          a->unalloc / a->n,
                          "unallocated_gpus_at_130_sd",
                          sd(a),
                          "frag_pct_at_100",
                          a->frag / a->n,
                          "frag_ratio_at_100",
                          a->fragratio / a->n);
    if (p->have)
        json_object_set_new(o,
                            "paper",
                            json_pack("{s:f, s:f, s:f, s:f}",
                                      "alloc_at_100",
                                      p->alloc[4],
                                      "alloc_at_130",
                                      p->alloc[7],
                                      "unallocated_gpus_at_130",
                                      p->unalloc,
                                      "frag_pct_at_100",
                                      p->frag));
    return o;
}

struct cmp {
    const char *traces[MAX_TRACES], *policies[MAX_POLICIES];
    int ntraces, npolicies, nseeds, json, markdown;
    const char *plotdir;                /* --plot DIR, or NULL */
    char tracebuf[512], policybuf[512]; /* traces[], policies[] point here */
    uint64_t seeds[MAX_SEEDS];
};

/* DIR/alloc-TRACE.svg: the mean allocation curve of each policy from 80%
 * to 130% arrived, where the policies part ways. */
#define PLOT_FROM 80
static int plot_trace(const struct cmp *c,
                      const char *trace,
                      const struct agg *aggs)
{
    static double x[CRATER_FGD_STEPS];
    double y[MAX_POLICIES][CRATER_FGD_STEPS];
    crater_svg_series_t ser[MAX_POLICIES];
    char title[128], path[1024];
    crater_svg_chart_t chart = {.xlabel = "arrived workload (% of GPU "
                                          "capacity)",
                                .ylabel = "GPUs allocated (% of capacity)"};
    size_t n = CRATER_FGD_STEPS - PLOT_FROM;
    crater_error_t err;
    char *svg;
    int rc;

    snprintf(title,
             sizeof(title),
             "openb_pod_list_%s: allocation (mean of %d seeds)",
             trace,
             c->nseeds);
    chart.title = title;
    for (size_t i = 0; i < n; i++)
        x[i] = (double)(PLOT_FROM + i);
    for (int p = 0; p < c->npolicies; p++) {
        for (size_t i = 0; i < n; i++)
            y[p][i] = aggs[p].curve[PLOT_FROM + i] / aggs[p].n;
        ser[p] = (crater_svg_series_t){c->policies[p],
                                       x,
                                       y[p],
                                       n,
                                       NULL,
                                       strcmp(c->policies[p], "fgd") == 0};
    }
    if (!(svg =
              crater_svg_line_chart(&chart, ser, (size_t)c->npolicies, &err))) {
        fprintf(stderr, "crater: %s\n", err.text);
        return -1;
    }
    snprintf(path, sizeof(path), "%s/alloc-%s.svg", c->plotdir, trace);
    rc = crater_svg_write(path, svg, &err);
    if (rc < 0)
        fprintf(stderr, "crater: %s\n", err.text);
    free(svg);
    return rc;
}

static int compare_trace(const struct cmp *c,
                         const char *dir,
                         const char *trace,
                         json_t *rows)
{
    char pods[1024], nodes[1024];
    struct data d = {0};

    trace_path(pods, sizeof(pods), dir, trace);
    snprintf(nodes, sizeof(nodes), "%s/openb_node_list_gpu_node.csv", dir);
    if (load(&d, nodes, pods) < 0)
        return -1;
    if (!c->json)
        printf("\n## openb_pod_list_%s\n\n| policy | alloc@50 | alloc@70 | "
               "alloc@80 | "
               "alloc@90 | alloc@100 | alloc@110 | alloc@120 | alloc@130 | "
               "unalloc GPUs@130 "
               "| frag%%@100 | paper alloc@100 (diff) | paper alloc@130 (diff) "
               "| paper "
               "unalloc@130 (diff) | paper frag%%@100 "
               "|\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---"
               "|\n",
               trace);
    struct agg *aggs = calloc((size_t)c->npolicies, sizeof(*aggs));

    if (!aggs) {
        data_free(&d);
        return -1;
    }
    for (int p = 0; p < c->npolicies; p++) {
        struct agg *ap = &aggs[p], a = {0};
        struct paper pp, fgd;
        for (int s = 0; s < c->nseeds; s++) {
            crater_fgd_result_t r;
            fprintf(stderr,
                    "\r%-12s %-14s seed %llu   ",
                    trace,
                    c->policies[p],
                    (unsigned long long)c->seeds[s]);
            if (run_one(&d, c->policies[p], c->seeds[s], &r) < 0) {
                data_free(&d);
                free(aggs);
                return -1;
            }
            agg_add(&a, &r);
        }
        *ap = a;
        load_paper(dir, trace, c->policies[p], &pp);
        load_paper(dir, trace, "fgd", &fgd);
        if (c->json)
            json_array_append_new(rows,
                                  row_json(trace, c->policies[p], &a, &pp));
        else
            print_row(c->policies[p], &a, &pp, &fgd);
        fflush(stdout);
    }
    data_free(&d);
    if (c->plotdir && plot_trace(c, trace, aggs) < 0) {
        free(aggs);
        return -1;
    }
    free(aggs);
    return 0;
}

/* Options of `sim compare` into c. 0 to run, 1 after --help, -1 on a
 * usage error (already reported). */
static int compare_opts(int argc, char **argv, struct cmp *c)
{
    static const struct option opts[] = {
        {"traces", required_argument, NULL, 't'},
        {"policies", required_argument, NULL, 'p'},
        {"seeds", required_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},
        {"markdown", no_argument, NULL, 'm'},
        {"plot", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;

    snprintf(c->tracebuf, sizeof(c->tracebuf), "all");
    snprintf(c->policybuf, sizeof(c->policybuf), "all");
    c->nseeds = parse_seeds("42-51", c->seeds, MAX_SEEDS);
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 't':
            snprintf(c->tracebuf, sizeof(c->tracebuf), "%s", optarg);
            break;
        case 'p':
            snprintf(c->policybuf, sizeof(c->policybuf), "%s", optarg);
            break;
        case 's':
            c->nseeds = parse_seeds(optarg, c->seeds, MAX_SEEDS);
            break;
        case 'j':
            c->json = 1;
            break;
        case 'm':
            c->markdown = 1;
            break;
        case 'P':
            c->plotdir = optarg;
            break;
        case 'h':
            printf("usage: crater sim compare [--traces all|NAME,...] "
                   "[--policies all|P,...] "
                   "[--seeds 42-51] [--json] [--markdown] [--plot DIR]\n"
                   "  --plot DIR  write DIR/alloc-TRACE.svg: each policy's "
                   "mean allocation curve, 80-130%% arrived\n");
            return 1;
        default:
            return -1;
        }
    }
    c->ntraces =
        split_list(c->tracebuf, c->traces, MAX_TRACES, all_traces, "--traces");
    c->npolicies = split_list(c->policybuf,
                              c->policies,
                              MAX_POLICIES,
                              crater_fgd_policy_names(),
                              "--policies");
    if (c->ntraces < 0 || c->npolicies < 0)
        return -1;
    if (!c->ntraces || !c->npolicies || !c->nseeds) {
        fprintf(stderr, "crater: empty --traces, --policies or --seeds\n");
        return -1;
    }
    return 0;
}

static int sim_compare(int argc, char **argv)
{
    struct cmp c = {0};
    const char *dir = crater_openb_dir();
    int rc;

    if ((rc = compare_opts(argc, argv, &c)) != 0)
        return rc > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (!dir) {
        fprintf(stderr, "crater: openb data not found: set CRATER_OPENB_DIR\n");
        return CLI_EXIT_USAGE;
    }
    /* before the long run, not after it */
    if (c.plotdir && mkdir(c.plotdir, 0777) < 0
        && access(c.plotdir, W_OK) < 0) {
        fprintf(stderr,
                "crater: --plot %s: cannot create or write: %s\n",
                c.plotdir,
                strerror(errno));
        return CLI_EXIT_USAGE;
    }
    json_t *rows = json_array();
    double t0 = now_s();
    if (!c.json)
        printf("FGD protocol (BENCHMARKS.md B1), mean of %d seeds "
               "(%llu..%llu); allocation %% "
               "of GPU capacity at X%% arrived workload; paper = "
               "fgd_expected.md\n",
               c.nseeds,
               (unsigned long long)c.seeds[0],
               (unsigned long long)c.seeds[c.nseeds - 1]);
    for (int t = 0; t < c.ntraces; t++)
        if (compare_trace(&c, dir, c.traces[t], rows) < 0) {
            json_decref(rows);
            return CLI_EXIT_REJECTED;
        }
    fprintf(stderr, "\rdone in %.1f s%30s\n", now_s() - t0, "");
    if (c.json)
        cli_print(rows, CLI_FMT_JSON);
    json_decref(rows);
    return CLI_EXIT_OK;
}

int cli_sim(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0
        || strcmp(argv[1], "-h") == 0) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: crater sim "
                "openb|compare|replay|synthetic|bound|whatif|util [OPTIONS]\n"
                "  openb    one FGD-protocol run (BENCHMARKS.md B1)\n"
                "  compare  traces x policies x seeds, side by side with the "
                "paper\n"
                "  replay   real-time replay with arrivals and departures "
                "(B4)\n"
                "  synthetic SPEC  replay a synthetic workload (B6)\n"
                "  bound    an upper bound on any policy's allocation under "
                "the FGD protocol\n"
                "  whatif   the live cluster under another configuration\n"
                "  util     measured GPU utilisation, three schedulers "
                "(issue 19)\n");
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "openb") == 0)
        return sim_openb(argc - 1, argv + 1);
    if (strcmp(argv[1], "compare") == 0)
        return sim_compare(argc - 1, argv + 1);
    if (strcmp(argv[1], "replay") == 0) /* sim_replay.c */
        return cli_sim_replay(argc - 1, argv + 1);
    if (strcmp(argv[1], "synthetic") == 0)
        return cli_sim_synthetic(argc - 1, argv + 1);
    if (strcmp(argv[1], "whatif") == 0) /* sim_whatif.c */
        return cli_sim_whatif(argc - 1, argv + 1);
    if (strcmp(argv[1], "bound") == 0) /* sim_bound.c */
        return cli_sim_bound(argc - 1, argv + 1);
    if (strcmp(argv[1], "util") == 0) /* sim_util.c */
        return cli_sim_util(argc - 1, argv + 1);
    fprintf(stderr,
            "crater: sim: unknown mode '%s' (openb, compare, replay, "
            "synthetic, bound, whatif, util)\n",
            argv[1]);
    return CLI_EXIT_USAGE;
}
