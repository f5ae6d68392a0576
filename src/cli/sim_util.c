/* sim_util.c - `crater sim util`: measured GPU utilisation, throughput and
 * queueing of one workload under the GPU-count scheduler, a Kubernetes-
 * default-like spreading scheduler and Crater (src/sim/utilsim.c,
 * doc/simulator.md "Measured GPU utilisation").
 *
 *   crater sim util [--workload seeds|plain|whole] [--set key=value]...
 *                   [--policies gpu-count,k8s-spread,crater]
 *                   [--sensitivity] [--json]
 *   crater sim util --calibration bench/util/calibration.csv
 *   crater sim util --plot FILE.svg   (offered load 0.5 .. 2.5)
 *
 * --sensitivity reruns gpu-count and crater with each assumption halved
 * and doubled (booleans: switched) and prints the ratio of measured
 * utilisation each time, so a reader sees which assumption the gain
 * rests on.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "crater/sim.h"
#include "crater/svg.h"
#include "crater/utilmodel.h"
#include "crater/utilsim.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: crater sim util [--workload seeds|plain|whole] "
            "[--set key=value]... [--policies P,...] [--sensitivity] "
            "[--json]\n");
}

static void row(const crater_util_result_t *r)
{
    const crater_replay_stats_t *c = r->rep.cls;

    printf("%-10s %6.1f%% %8.1f%% %10.0f %7.1f%% %7.0f %7.0f %7.0f %7.0f "
           "%7.0f %7.0f %6zu %6zu\n",
           crater_util_policy_name(r->policy),
           100 * r->gpu_alloc,
           100 * r->gpu_measured,
           r->steps_per_h,
           100 * r->infer_served,
           c[0].wait_p50,
           c[0].wait_p99,
           c[1].wait_p50,
           c[1].wait_p99,
           c[2].wait_p50,
           c[2].wait_p99,
           r->rep.preemptions,
           r->rep.idle_reclaims);
}

static void header(const crater_util_result_t *r)
{
    printf("offered GPU load %.2f, arrival window %.1f h\n",
           r->offered,
           r->window_h);
    printf("%-10s %7s %9s %10s %8s %15s %15s %15s %6s %6s\n",
           "policy",
           "alloc",
           "measured",
           "steps/h",
           "served",
           "high p50/p99 s",
           "normal p50/p99",
           "low p50/p99",
           "preem",
           "reclm");
}

static int parse_policies(const char *s, bool *on)
{
    char buf[128];

    snprintf(buf, sizeof(buf), "%s", s);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        int k = -1;
        for (int p = 0; p < CRATER_UTIL_NPOLICY; p++)
            if (!strcmp(t, crater_util_policy_name(p)))
                k = p;
        if (k < 0) {
            fprintf(stderr,
                    "crater: sim util: unknown policy '%s' (gpu-count, "
                    "k8s-spread, crater)\n",
                    t);
            return -1;
        }
        on[k] = true;
    }
    return 0;
}

static int run_all(const crater_util_params_t *p, const bool *on, bool json)
{
    json_t *arr = json_array();
    crater_error_t err = {0};
    int first = 1;

    for (int k = 0; k < CRATER_UTIL_NPOLICY; k++) {
        crater_util_result_t r;
        if (!on[k])
            continue;
        fprintf(stderr,
                "crater: sim util: %s ...\n",
                crater_util_policy_name(k));
        if (crater_util_run(p, k, crater_openb_dir(), &r, &err) < 0) {
            fprintf(stderr, "crater: sim util: %s\n", err.text);
            json_decref(arr);
            return CLI_EXIT_REJECTED;
        }
        if (json)
            json_array_append_new(arr, crater_util_result_json(&r));
        else {
            if (first)
                header(&r);
            first = 0;
            row(&r);
        }
        crater_util_result_clear(&r);
    }
    if (json) {
        json_dumpf(arr, stdout, JSON_INDENT(2));
        printf("\n");
    }
    json_decref(arr);
    return CLI_EXIT_OK;
}

/* measured utilisation of gpu-count and crater under p */
static int pair(const crater_util_params_t *p, double *g, double *c)
{
    crater_util_result_t r;
    crater_error_t err = {0};

    if (crater_util_run(p, CRATER_UTIL_GPUCOUNT, crater_openb_dir(), &r, &err)
        < 0)
        goto fail;
    *g = r.gpu_measured;
    crater_util_result_clear(&r);
    if (crater_util_run(p, CRATER_UTIL_CRATER, crater_openb_dir(), &r, &err)
        < 0)
        goto fail;
    *c = r.gpu_measured;
    crater_util_result_clear(&r);
    return 0;
fail:
    fprintf(stderr, "crater: sim util: %s\n", err.text);
    return -1;
}

static const char *const swept[] = {
    "load",          "intr_lo",       "cpu_per_gpu",
    "disk_per_gpu",  "membw_per_gpu", "sigma",
    "cpuonly_burst", "cpu_req_scale", "node_disk",
    "interactive",   "idle_frac",     "inference",
    "trough",        "overcommit",    "idle_reclaim_h",
    "profile_cpu",   "profile_disk",  "profile_disk_high",
    "profile_gpu",   "gpu_mem",       "gpu_mem_sigma",
    "max_util",      "mem_margin",
};

static int sweep_one(const crater_util_params_t *base, const char *key)
{
    crater_error_t err = {0};
    const char *val[2][2] = {{"x0.5", "0"}, {"x2", "1"}};

    for (int v = 0; v < 2; v++) {
        crater_util_params_t p = *base;
        char kv[96];
        double g, c, x = 0;
        bool flag = !strncmp(key, "profile", 7);
        /* read the current value through the setter's table: set it to
         * itself scaled */
        snprintf(kv, sizeof(kv), "%s=%s", key, val[v][1]);
        if (!flag) {
            x = crater_util_params_get(&p, key) * (v ? 2 : 0.5);
            snprintf(kv, sizeof(kv), "%s=%.9g", key, x);
        }
        if (crater_util_params_set(&p, kv, &err) < 0) {
            fprintf(stderr, "crater: sim util: %s\n", err.text);
            return -1;
        }
        if (pair(&p, &g, &c) < 0)
            return -1;
        printf("%-16s %-10s %8.1f%% %8.1f%% %6.2fx\n",
               key,
               flag ? kv + strlen(key) + 1 : val[v][0],
               100 * g,
               100 * c,
               g > 0 ? c / g : 0);
        fflush(stdout);
    }
    return 0;
}

static int sensitivity(const crater_util_params_t *p)
{
    double g, c;

    printf("%-16s %-10s %9s %9s %7s\n",
           "assumption",
           "value",
           "gpu-count",
           "crater",
           "ratio");
    if (pair(p, &g, &c) < 0)
        return CLI_EXIT_REJECTED;
    printf("%-16s %-10s %8.1f%% %8.1f%% %6.2fx\n",
           "(as given)",
           "",
           100 * g,
           100 * c,
           g > 0 ? c / g : 0);
    for (size_t i = 0; i < sizeof(swept) / sizeof(swept[0]); i++)
        if (sweep_one(p, swept[i]) < 0)
            return CLI_EXIT_REJECTED;
    return CLI_EXIT_OK;
}

/* ---- --plot: measured (solid) and allocated (dashed) GPU against the
 * offered load, one pair of lines per policy ---- */

#define NLOADS 9

static int sweep_loads(const crater_util_params_t *base,
                       double (*meas)[NLOADS],
                       double (*alloc)[NLOADS],
                       double *x)
{
    crater_error_t err = {0};

    for (int i = 0; i < NLOADS; i++) {
        crater_util_params_t p = *base;
        p.load = x[i] = 0.5 + 0.25 * i;
        for (int k = 0; k < CRATER_UTIL_NPOLICY; k++) {
            crater_util_result_t r;
            if (crater_util_run(&p, k, crater_openb_dir(), &r, &err) < 0) {
                fprintf(stderr, "crater: sim util: %s\n", err.text);
                return -1;
            }
            meas[k][i] = 100 * r.gpu_measured;
            alloc[k][i] = 100 * r.gpu_alloc;
            crater_util_result_clear(&r);
        }
        fprintf(stderr, "crater: sim util: load %.2f done\n", x[i]);
    }
    return 0;
}

static int plot(const crater_util_params_t *p, const char *path)
{
    static const char *const col[] = {"#d62728", "#7f7f7f", "#1f77b4"};
    double m[CRATER_UTIL_NPOLICY][NLOADS], a[CRATER_UTIL_NPOLICY][NLOADS];
    double x[NLOADS];
    char name[CRATER_UTIL_NPOLICY][2][48];
    crater_svg_series_t se[2 * CRATER_UTIL_NPOLICY];
    crater_svg_chart_t ch = {"GPU measured (solid) and held (dashed)",
                             "offered GPU load",
                             "% of GPU capacity",
                             0.5,
                             2.5,
                             0,
                             100,
                             0,
                             0};
    crater_error_t err = {0};
    char *svg;

    if (sweep_loads(p, m, a, x) < 0)
        return CLI_EXIT_REJECTED;
    for (int k = 0; k < CRATER_UTIL_NPOLICY; k++) {
        snprintf(name[k][0], 48, "%s measured", crater_util_policy_name(k));
        snprintf(name[k][1], 48, "%s held", crater_util_policy_name(k));
        se[2 * k] =
            (crater_svg_series_t){name[k][0], x, m[k], NLOADS, col[k], false};
        se[2 * k + 1] =
            (crater_svg_series_t){name[k][1], x, a[k], NLOADS, col[k], true};
    }
    svg = crater_svg_line_chart(&ch, se, 2 * CRATER_UTIL_NPOLICY, &err);
    if (!svg || crater_svg_write(path, svg, &err) < 0) {
        fprintf(stderr, "crater: sim util: %s\n", err.text);
        free(svg);
        return CLI_EXIT_REJECTED;
    }
    free(svg);
    for (int i = 0; i < NLOADS; i++)
        printf("load %.2f: measured %.1f / %.1f / %.1f %%\n",
               x[i],
               m[0][i],
               m[1][i],
               m[2][i]);
    return CLI_EXIT_OK;
}

/* ---- --calibration: the fit of bench/util/calibrate.py's points ---- */

struct cseries {
    char name[16];
    crater_util_point_t pt[32];
    double comp[32];
    size_t n;
};

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static void fit_print(struct cseries *s)
{
    double c[32], g, d, a;

    memcpy(c, s->comp, s->n * sizeof(double));
    qsort(c, s->n, sizeof(double), cmp_d);
    g = s->n % 2 ? c[s->n / 2] : (c[s->n / 2 - 1] + c[s->n / 2]) / 2;
    crater_util_fit(s->pt, s->n, g, &d, &a);
    printf("%s: compute %.4f s/step, fitted demand %.4g, ceiling %.4g\n",
           s->name,
           g,
           d,
           a);
    for (size_t i = 0; i < s->n; i++) {
        double m = crater_util_fit_step(&s->pt[i], g, d, a);
        printf("  supply %-10.4g measured %.4f s  model %.4f s  %+5.1f%%\n",
               s->pt[i].supply,
               s->pt[i].step_s,
               m,
               100 * (m / s->pt[i].step_s - 1));
    }
}

static int calibration(const char *path)
{
    struct cseries s[4] = {0};
    size_t ns = 0;
    char line[256];
    FILE *f = fopen(path, "r");

    if (!f) {
        perror(path);
        return CLI_EXIT_REJECTED;
    }
    while (fgets(line, sizeof(line), f)) {
        char name[16];
        double sup, st, comp;
        size_t k = 0;
        if (line[0] == '#'
            || sscanf(line, "%15[^,],%lf,%lf,%lf", name, &sup, &st, &comp) != 4)
            continue;
        while (k < ns && strcmp(s[k].name, name))
            k++;
        if (k == ns && ns < 4)
            snprintf(s[ns++].name, sizeof(s[0].name), "%s", name);
        if (k < ns && s[k].n < 32) {
            s[k].pt[s[k].n] = (crater_util_point_t){sup, st};
            s[k].comp[s[k].n++] = comp;
        }
    }
    fclose(f);
    for (size_t k = 0; k < ns; k++)
        fit_print(&s[k]);
    return CLI_EXIT_OK;
}

int cli_sim_util(int argc, char **argv)
{
    static const struct option lo[] = {
        {"workload", required_argument, NULL, 'w'},
        {"set", required_argument, NULL, 's'},
        {"policies", required_argument, NULL, 'p'},
        {"sensitivity", no_argument, NULL, 'S'},
        {"calibration", required_argument, NULL, 'C'},
        {"plot", required_argument, NULL, 'P'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    crater_util_params_t p;
    crater_error_t err = {0};
    bool on[CRATER_UTIL_NPOLICY] = {true, true, true}, json = false;
    bool sens = false, chosen = false;
    const char *plotfile = NULL;
    int c;

    crater_util_params_preset("seeds", &p, &err);
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (c == 'w' && crater_util_params_preset(optarg, &p, &err) < 0) {
            fprintf(stderr, "crater: sim util: %s\n", err.text);
            return CLI_EXIT_USAGE;
        } else if (c == 's' && crater_util_params_set(&p, optarg, &err) < 0) {
            fprintf(stderr, "crater: sim util: %s\n", err.text);
            return CLI_EXIT_USAGE;
        } else if (c == 'p') {
            if (!chosen)
                memset(on, 0, sizeof(on));
            chosen = true;
            if (parse_policies(optarg, on) < 0)
                return CLI_EXIT_USAGE;
        } else if (c == 'P') {
            plotfile = optarg;
        } else if (c == 'C') {
            return calibration(optarg);
        } else if (c == 'S') {
            sens = true;
        } else if (c == 'j') {
            json = true;
        } else if (c == 'h' || c == '?') {
            usage(c == 'h' ? stdout : stderr);
            return c == 'h' ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
    }
    if (plotfile)
        return plot(&p, plotfile);
    return sens ? sensitivity(&p) : run_all(&p, on, json);
}
