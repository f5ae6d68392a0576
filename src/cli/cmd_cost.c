/* cmd_cost.c - `crater cost`: GET /api/v1/cost as a table (or the JSON).
 *
 * crater cost [--window 24h] [--by job|tenant|user|node|resource]
 *             [--step 1h] [--basis allocation|usage|billing] [-o json]
 *
 * The query string is built from the flags as given; craterd checks the
 * values and its error names the parameter. The table lists one line per
 * name and step, largest total first within a step, then the sum.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/remote.h"

enum {
    O_WINDOW = RO_FIRST_CMD,
    O_BY,
    O_STEP,
    O_BASIS
};

typedef struct cost_opts {
    const char *window, *by, *step, *basis;
} cost_opts_t;

static int cost_opt(int c, const char *arg, void *ctx)
{
    cost_opts_t *o = ctx;

    switch (c) {
    case O_WINDOW:
        o->window = arg;
        return 0;
    case O_BY:
        o->by = arg;
        return 0;
    case O_STEP:
        o->step = arg;
        return 0;
    case O_BASIS:
        o->basis = arg;
        return 0;
    }
    return -1;
}

static int cmp_total(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    json_int_t sx = json_integer_value(json_object_get(x, "start_ms"));
    json_int_t sy = json_integer_value(json_object_get(y, "start_ms"));
    json_int_t tx = json_integer_value(json_object_get(x, "totalCostMicros"));
    json_int_t ty = json_integer_value(json_object_get(y, "totalCostMicros"));

    if (sx != sy)
        return sx < sy ? -1 : 1;
    return tx > ty ? -1 : tx < ty;
}

static void print_table(const json_t *ans)
{
    const json_t *items = json_object_get(ans, "items");
    size_t n = json_array_size(items);
    json_t **v = calloc(n ? n : 1, sizeof(*v));
    json_int_t sum = 0;

    for (size_t i = 0; v && i < n; i++)
        v[i] = json_array_get(items, i);
    if (v)
        qsort(v, n, sizeof(*v), cmp_total);
    printf("%-24s %-13s %12s %12s %12s %12s %14s\n",
           "NAME",
           "START(h)",
           "GPU",
           "CPU",
           "RAM",
           "DISK",
           "TOTAL");
    for (size_t i = 0; v && i < n; i++) {
        json_int_t t =
            json_integer_value(json_object_get(v[i], "totalCostMicros"));
        sum += t;
        printf("%-24s %-13lld %12.4f %12.4f %12.4f %12.4f %14.6f\n",
               json_string_value(json_object_get(v[i], "name")),
               (long long)json_integer_value(json_object_get(v[i], "start_ms"))
                   / 3600000,
               json_number_value(json_object_get(v[i], "gpuCost")),
               json_number_value(json_object_get(v[i], "cpuCost")),
               json_number_value(json_object_get(v[i], "ramCost")),
               json_number_value(json_object_get(v[i], "diskCost")),
               (double)t / 1e6);
    }
    printf("%-24s %-13s %12s %12s %12s %12s %14.6f %s (%s)\n",
           "TOTAL",
           "",
           "",
           "",
           "",
           "",
           (double)sum / 1e6,
           json_string_value(json_object_get(ans, "currency")),
           json_string_value(json_object_get(ans, "basis")));
    free(v);
}

static void add_param(char *q, size_t n, const char *name, const char *v)
{
    size_t len = strlen(q);

    if (v)
        snprintf(q + len,
                 n - len,
                 "%s%s=%s",
                 q[len - 1] == '?' ? "" : "&",
                 name,
                 v);
}

int cli_cost(int argc, char **argv)
{
    static const char usage[] =
        "usage: crater cost [--window 24h] [--by job|tenant|user|node|"
        "resource]\n"
        "                   [--step 1h] [--basis allocation|usage|billing] "
        "[-o json|yaml]\n"
        "What jobs were charged over the window (whole hours), per name and "
        "step;\nadmins also see the nodes' idle cost (__idle__).\n";
    static const struct option opts[] =
        {{"window", required_argument, NULL, O_WINDOW},
         {"by", required_argument, NULL, O_BY},
         {"step", required_argument, NULL, O_STEP},
         {"basis", required_argument, NULL, O_BASIS},
         CLI_REMOTE_LONGOPTS,
         {0}};
    char path[512] = "/api/v1/cost?";
    cost_opts_t o = {0};
    cli_common_t co = {0};
    cli_remote_t r = {0};
    json_t *ans = NULL;
    int rc =
        cli__parse_opts(argc, argv, "o:h", opts, usage, &co, cost_opt, &o, 0);

    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    add_param(path, sizeof(path), "window", o.window);
    add_param(path, sizeof(path), "aggregate", o.by);
    add_param(path, sizeof(path), "step", o.step);
    add_param(path, sizeof(path), "basis", o.basis);
    if ((rc = cli__remote_open(&r, &co)) == 0)
        rc = cli__api(&r, "GET", path, NULL, &ans);
    if (rc == CLI_EXIT_OK && co.fmt != CLI_FMT_TEXT)
        rc = cli__print_raw(ans, co.fmt);
    else if (rc == CLI_EXIT_OK)
        print_table(ans);
    json_decref(ans);
    cli__remote_close(&r);
    return rc;
}
