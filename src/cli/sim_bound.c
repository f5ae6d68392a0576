/* sim_bound.c - `crater sim bound`: the upper bound on the GPU allocation
 * any policy can reach under the FGD protocol (include/crater/bound.h),
 * next to what the chosen policies reach on the same arrival sequences.
 *
 *   crater sim bound [--trace NAME | --pods FILE] [--nodes FILE]
 *                    [--seeds 42-51] [--policies crater,fgd|none]
 *                    [--inflate 1.3] [--json]
 *
 * Per seed: the bound, each policy's allocation at the end (130% arrived)
 * and its distance to the bound in GPUs and in points of capacity; then the
 * means, and per shape above half a GPU how many of its arrivals every
 * policy places and the idle GPU their holes leave. This is the CLI, so it
 * prints; the library computes.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "crater/bound.h"

#define MAX_SEEDS 256
#define MAX_POL 8

struct bopts {
    const char *trace, *pods, *nodes;
    char polbuf[256];
    const char *pol[MAX_POL];
    int npol, nseeds, json;
    double inflate;
    uint64_t seeds[MAX_SEEDS];
};

/* One seed's numbers: the bound and each policy's allocation (milli). */
struct row {
    uint64_t seed;
    crater_bound_result_t b;
    double alloc[MAX_POL]; /* GPU milli allocated at the end */
};

static int parse_seeds(const char *s, uint64_t *seeds, int max)
{
    unsigned long long a, b;
    char *copy, *save = NULL;
    int n = 0;

    if (sscanf(s, "%llu-%llu", &a, &b) == 2) {
        for (unsigned long long x = a; x <= b && n < max; x++)
            seeds[n++] = x;
        return n;
    }
    if (!(copy = strdup(s)))
        return 0;
    for (char *t = strtok_r(copy, ",", &save); t && n < max;
         t = strtok_r(NULL, ",", &save))
        seeds[n++] = strtoull(t, NULL, 10);
    free(copy);
    return n;
}

static int split_policies(struct bopts *o)
{
    char *save = NULL;

    o->npol = 0;
    if (strcmp(o->polbuf, "none") == 0)
        return 0;
    for (char *t = strtok_r(o->polbuf, ",", &save); t && o->npol < MAX_POL;
         t = strtok_r(NULL, ",", &save)) {
        const char *const *all = crater_sched_policy_names();
        while (*all && strcmp(*all, t) != 0)
            all++;
        if (!*all) {
            fprintf(stderr, "crater: --policies: unknown policy '%s'\n", t);
            return -1;
        }
        o->pol[o->npol++] = t;
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: crater sim bound [--trace NAME|--pods FILE] [--nodes "
            "FILE] [--seeds 42-51] [--policies crater,fgd|none] [--inflate "
            "1.3] [--json]\n"
            "  an upper bound on the GPU allocation any policy reaches "
            "under the FGD protocol\n");
}

/* 0 to run, 1 after --help, -1 on a usage error (reported). */
static int bound_opts(int argc, char **argv, struct bopts *o)
{
    static const struct option opts[] = {
        {"trace", required_argument, NULL, 't'},
        {"pods", required_argument, NULL, 'p'},
        {"nodes", required_argument, NULL, 'n'},
        {"seeds", required_argument, NULL, 's'},
        {"policies", required_argument, NULL, 'P'},
        {"inflate", required_argument, NULL, 'i'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;

    o->trace = "default";
    o->inflate = 1.3;
    snprintf(o->polbuf, sizeof(o->polbuf), "crater,fgd");
    o->nseeds = parse_seeds("42-51", o->seeds, MAX_SEEDS);
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 't':
            o->trace = optarg;
            break;
        case 'p':
            o->pods = optarg;
            break;
        case 'n':
            o->nodes = optarg;
            break;
        case 's':
            o->nseeds = parse_seeds(optarg, o->seeds, MAX_SEEDS);
            break;
        case 'P':
            snprintf(o->polbuf, sizeof(o->polbuf), "%s", optarg);
            break;
        case 'i':
            o->inflate = strtod(optarg, NULL);
            break;
        case 'j':
            o->json = 1;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            return -1;
        }
    }
    if (split_policies(o) < 0)
        return -1;
    if (!o->nseeds || o->inflate <= 0) {
        fprintf(stderr, "crater: empty --seeds or --inflate not above 0\n");
        return -1;
    }
    return 0;
}

struct data {
    crater_trace_node_t *nodes;
    size_t nnodes;
    crater_trace_pod_t *pods;
    size_t npods;
};

static int load(const struct bopts *o, struct data *d)
{
    const char *dir = crater_openb_dir();
    char pbuf[1024], nbuf[1024];
    crater_error_t err;

    if ((!o->pods || !o->nodes) && !dir) {
        fprintf(stderr,
                "crater: openb data not found: set CRATER_OPENB_DIR or give "
                "--pods and --nodes\n");
        return -1;
    }
    snprintf(pbuf, sizeof(pbuf), "%s/openb_pod_list_%s.csv", dir, o->trace);
    snprintf(nbuf, sizeof(nbuf), "%s/openb_node_list_gpu_node.csv", dir);
    if (crater_openb_load_nodes(o->nodes ? o->nodes : nbuf,
                                &d->nodes,
                                &d->nnodes,
                                &err)
            < 0
        || crater_openb_load_pods(o->pods ? o->pods : pbuf,
                                  &d->pods,
                                  &d->npods,
                                  &err)
               < 0) {
        fprintf(stderr, "crater: %s\n", err.text);
        return -1;
    }
    return 0;
}

static int run_seed(const struct bopts *o, const struct data *d, struct row *r)
{
    crater_error_t err;

    if (isatty(2))
        fprintf(stderr, "\rseed %llu   ", (unsigned long long)r->seed);
    if (crater_bound_run(d->nodes,
                         d->nnodes,
                         d->pods,
                         d->npods,
                         r->seed,
                         o->inflate,
                         &r->b,
                         &err)
        < 0)
        goto fail;
    for (int p = 0; p < o->npol; p++) {
        crater_fgd_opts_t fo = {o->pol[p], r->seed, o->inflate, 95};
        crater_fgd_result_t res;
        if (crater_fgd_run(d->nodes,
                           d->nnodes,
                           d->pods,
                           d->npods,
                           NULL,
                           &fo,
                           &res,
                           &err)
            < 0)
            goto fail;
        r->alloc[p] = res.alloc[CRATER_FGD_STEPS - 1] / 100.0
                      * (double)res.capacity_milli;
    }
    return 0;
fail:
    fprintf(stderr, "\ncrater: %s\n", err.text);
    return -1;
}

/* ---- output --------------------------------------------------------------
 */

static double pct(double milli, uint64_t cap)
{
    return cap ? milli * 100.0 / (double)cap : 0;
}

static void print_head(const struct bopts *o)
{
    printf("| seed | arrived pods | forced shares > 0.5 | bound (GPUs, %% of "
           "capacity) | idle under every policy (GPUs) |");
    for (int p = 0; p < o->npol; p++)
        printf(" %s alloc %% | %s to bound (GPUs, points) |",
               o->pol[p],
               o->pol[p]);
    printf("\n|---|---|---|---|---|");
    for (int p = 0; p < o->npol; p++)
        printf("---|---|");
    printf("\n");
}

static void print_row(const struct bopts *o,
                      const char *label,
                      const struct row *r,
                      double n)
{
    const crater_bound_result_t *b = &r->b;
    uint64_t cap = b->capacity_milli;

    printf("| %s | %.0f | %.0f | %.1f (%.2f%%) | %.1f |",
           label,
           (double)b->arrived / n,
           (double)b->forced / n,
           (double)b->bound_milli / n / 1000,
           pct((double)b->bound_milli / n, cap),
           ((double)cap - (double)b->bound_milli / n) / 1000);
    for (int p = 0; p < o->npol; p++) {
        double gap = ((double)b->bound_milli - r->alloc[p]) / n;
        printf(" %.2f | %.1f (%.2f) |",
               pct(r->alloc[p] / n, cap),
               gap / 1000,
               pct(gap, cap));
    }
    printf("\n");
}

/* Sum of the rows (the mean is the sum over n). */
static void add_row(struct row *sum, const struct row *r, int npol)
{
    sum->b.capacity_milli = r->b.capacity_milli;
    sum->b.arrived += r->b.arrived;
    sum->b.forced += r->b.forced;
    sum->b.bound_milli += r->b.bound_milli;
    sum->b.waste_milli += r->b.waste_milli;
    sum->b.holes_milli += r->b.holes_milli;
    sum->b.fill_milli += r->b.fill_milli;
    for (int p = 0; p < npol; p++)
        sum->alloc[p] += r->alloc[p];
}

/* The shapes of every seed, summed by shape into acc (at most max). */
static size_t add_shapes(crater_bound_shape_t *acc,
                         size_t n,
                         size_t max,
                         const crater_bound_result_t *b)
{
    for (size_t i = 0; i < b->nshapes; i++) {
        const crater_bound_shape_t *s = &b->shapes[i];
        size_t k = 0;
        while (k < n
               && (acc[k].share != s->share || acc[k].cpu_milli != s->cpu_milli
                   || acc[k].memory_mib != s->memory_mib
                   || strcmp(acc[k].gpu_spec, s->gpu_spec) != 0))
            k++;
        if (k == n) {
            if (n == max)
                continue;
            acc[n++] = *s;
            continue;
        }
        acc[k].arrived += s->arrived;
        acc[k].forced += s->forced;
        acc[k].forced_until_pct += s->forced_until_pct;
        acc[k].hole_milli += s->hole_milli;
        acc[k].drop_bound_milli += s->drop_bound_milli;
        acc[k].drop_at_pct += s->drop_at_pct;
    }
    return n;
}

static void print_shapes(const crater_bound_shape_t *acc, size_t n, int seeds)
{
    printf("\nShares above half a GPU (mean over seeds): every policy places "
           "the forced ones, each leaving 1000 - share milli that only "
           "smaller shares can use.\n\n| share | cpu | memory MiB | gpu_spec "
           "| arrived | forced | forced until (%% arrived) | holes (GPUs) "
           "| first-drop bound (GPUs) | at (%% arrived) "
           "|\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < n; i++)
        printf("| %u | %.3g | %llu | %s | %.1f | %.1f | %.1f | %.1f | %.1f "
               "| %.1f |\n",
               acc[i].share,
               acc[i].cpu_milli / 1000.0,
               (unsigned long long)acc[i].memory_mib,
               acc[i].gpu_spec[0] ? acc[i].gpu_spec : "any",
               (double)acc[i].arrived / seeds,
               (double)acc[i].forced / seeds,
               acc[i].forced_until_pct / seeds,
               (double)acc[i].hole_milli / seeds / 1000,
               (double)acc[i].drop_bound_milli / seeds / 1000,
               acc[i].drop_at_pct / seeds);
}

static json_t *row_json(const struct bopts *o, const struct row *r)
{
    const crater_bound_result_t *b = &r->b;
    json_t *pol = json_object(), *sh = json_array();

    for (int p = 0; p < o->npol; p++)
        json_object_set_new(pol,
                            o->pol[p],
                            json_pack("{s:f, s:f, s:f}",
                                      "alloc_milli",
                                      r->alloc[p],
                                      "to_bound_gpus",
                                      ((double)b->bound_milli - r->alloc[p])
                                          / 1000,
                                      "to_bound_points",
                                      pct((double)b->bound_milli - r->alloc[p],
                                          b->capacity_milli)));
    for (size_t i = 0; i < b->nshapes; i++)
        json_array_append_new(sh,
                              json_pack("{s:i, s:I, s:I, s:s, s:I, s:I, "
                                        "s:f, s:I, s:I, s:f}",
                                        "share",
                                        (int)b->shapes[i].share,
                                        "cpu_milli",
                                        (json_int_t)b->shapes[i].cpu_milli,
                                        "memory_mib",
                                        (json_int_t)b->shapes[i].memory_mib,
                                        "gpu_spec",
                                        b->shapes[i].gpu_spec,
                                        "arrived",
                                        (json_int_t)b->shapes[i].arrived,
                                        "forced",
                                        (json_int_t)b->shapes[i].forced,
                                        "forced_until_pct",
                                        b->shapes[i].forced_until_pct,
                                        "hole_milli",
                                        (json_int_t)b->shapes[i].hole_milli,
                                        "drop_bound_milli",
                                        (json_int_t)b->shapes[i]
                                            .drop_bound_milli,
                                        "drop_at_pct",
                                        b->shapes[i].drop_at_pct));
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
                     "s:I, s:f, s:o, s:o}",
                     "seed",
                     (json_int_t)r->seed,
                     "arrived",
                     (json_int_t)b->arrived,
                     "forced",
                     (json_int_t)b->forced,
                     "capacity_milli",
                     (json_int_t)b->capacity_milli,
                     "arrived_milli",
                     (json_int_t)b->arrived_milli,
                     "holes_milli",
                     (json_int_t)b->holes_milli,
                     "fill_milli",
                     (json_int_t)b->fill_milli,
                     "waste_milli",
                     (json_int_t)b->waste_milli,
                     "forced_bound_milli",
                     (json_int_t)b->forced_bound_milli,
                     "drop_bound_milli",
                     (json_int_t)b->drop_bound_milli,
                     "bound_milli",
                     (json_int_t)b->bound_milli,
                     "bound_pct",
                     pct((double)b->bound_milli, b->capacity_milli),
                     "policies",
                     pol,
                     "shapes",
                     sh);
}

#define MAX_SHAPES 64

/* Every seed: a row (or a JSON object into rows); then the means. */
static int run_all(const struct bopts *o, const struct data *d, json_t *rows)
{
    struct row sum = {0};
    crater_bound_shape_t acc[MAX_SHAPES];
    size_t nacc = 0;
    char label[32];

    if (!o->json)
        print_head(o);
    for (int s = 0; s < o->nseeds; s++) {
        struct row r = {.seed = o->seeds[s]};
        if (run_seed(o, d, &r) < 0)
            return -1;
        snprintf(label, sizeof(label), "%llu", (unsigned long long)r.seed);
        if (o->json)
            json_array_append_new(rows, row_json(o, &r));
        else
            print_row(o, label, &r, 1);
        fflush(stdout);
        add_row(&sum, &r, o->npol);
        nacc = add_shapes(acc, nacc, MAX_SHAPES, &r.b);
        crater_bound_result_clear(&r.b);
    }
    if (isatty(2))
        fprintf(stderr, "\r%20s\r", "");
    if (!o->json) {
        print_row(o, "mean", &sum, o->nseeds);
        print_shapes(acc, nacc, o->nseeds);
    }
    return 0;
}

int cli_sim_bound(int argc, char **argv)
{
    struct bopts o = {0};
    struct data d = {0};
    json_t *rows;
    int rc;

    if ((rc = bound_opts(argc, argv, &o)) != 0)
        return rc > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (load(&o, &d) < 0) {
        crater_trace_nodes_free(d.nodes);
        return CLI_EXIT_REJECTED;
    }
    rows = json_array();
    rc = run_all(&o, &d, rows);
    if (rc == 0 && o.json)
        cli_print(rows, CLI_FMT_JSON);
    json_decref(rows);
    crater_trace_nodes_free(d.nodes);
    crater_trace_free(d.pods);
    return rc < 0 ? CLI_EXIT_REJECTED : CLI_EXIT_OK;
}
