/* test_metrics.c - the Prometheus registry: exact exposition text for
 * counters, labelled gauges and histograms, escaping, number formatting,
 * name validation, rejected updates, exact totals under concurrency, and
 * a realistic craterd registry checked by promtool. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crater/metrics.h"

static crater_error_t err;

static void assert_render(crater_metrics_t *m, const char *want)
{
    size_t len = 0;
    char *got = crater_metrics_render(m, &len);

    ck_assert_ptr_nonnull(got);
    ck_assert_str_eq(got, want);
    ck_assert_uint_eq(len, strlen(want));
    free(got);
}

START_TEST(test_counter)
{
    crater_metrics_t *m = crater_metrics_create();
    crater_metric_t *c = crater_metrics_counter(m,
                                                "crater_decisions_total",
                                                "Scheduling decisions.",
                                                NULL,
                                                &err);

    ck_assert_ptr_nonnull(c);
    /* A label-less family renders 0 before any update. */
    assert_render(m,
                  "# HELP crater_decisions_total Scheduling decisions.\n"
                  "# TYPE crater_decisions_total counter\n"
                  "crater_decisions_total 0\n");
    ck_assert_int_eq(crater_metric_add(c, NULL, 1), 0);
    ck_assert_int_eq(crater_metric_add(c, NULL, 2.5), 0);
    assert_render(m,
                  "# HELP crater_decisions_total Scheduling decisions.\n"
                  "# TYPE crater_decisions_total counter\n"
                  "crater_decisions_total 3.5\n");
    crater_metrics_destroy(m);
}
END_TEST

START_TEST(test_labelled_gauge)
{
    crater_metrics_t *m = crater_metrics_create();
    const char *const labels[] = {"state", NULL};
    const char *const running[] = {"running"}, *const pending[] = {"pending"};
    crater_metric_t *g =
        crater_metrics_gauge(m, "crater_jobs", "Jobs by state.", labels, &err);

    ck_assert_ptr_nonnull(g);
    assert_render(m,
                  "# HELP crater_jobs Jobs by state.\n"
                  "# TYPE crater_jobs gauge\n");
    ck_assert_int_eq(crater_metric_set(g, running, 3), 0);
    ck_assert_int_eq(crater_metric_set(g, pending, 10), 0);
    ck_assert_int_eq(crater_metric_add(g, pending, -1), 0);
    assert_render(m,
                  "# HELP crater_jobs Jobs by state.\n"
                  "# TYPE crater_jobs gauge\n"
                  "crater_jobs{state=\"pending\"} 9\n"
                  "crater_jobs{state=\"running\"} 3\n");
    crater_metric_reset(g);
    assert_render(m,
                  "# HELP crater_jobs Jobs by state.\n"
                  "# TYPE crater_jobs gauge\n");
    ck_assert_int_eq(crater_metric_set(g, running, 1), 0);
    assert_render(m,
                  "# HELP crater_jobs Jobs by state.\n"
                  "# TYPE crater_jobs gauge\n"
                  "crater_jobs{state=\"running\"} 1\n");
    crater_metrics_destroy(m);
}
END_TEST

START_TEST(test_two_labels_sorted)
{
    crater_metrics_t *m = crater_metrics_create();
    const char *const labels[] = {"node", "resource", NULL};
    const char *const v1[] = {"n2", "gpu"}, *const v2[] = {"n1", "memory"},
                      *const v3[] = {"n1", "cpu"};
    crater_metric_t *g = crater_metrics_gauge(m, "u", "U.", labels, &err);

    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(crater_metric_set(g, v1, 0.5), 0);
    ck_assert_int_eq(crater_metric_set(g, v2, 0.25), 0);
    ck_assert_int_eq(crater_metric_set(g, v3, 1), 0);
    assert_render(m,
                  "# HELP u U.\n"
                  "# TYPE u gauge\n"
                  "u{node=\"n1\",resource=\"cpu\"} 1\n"
                  "u{node=\"n1\",resource=\"memory\"} 0.25\n"
                  "u{node=\"n2\",resource=\"gpu\"} 0.5\n");
    crater_metrics_destroy(m);
}
END_TEST

START_TEST(test_histogram)
{
    crater_metrics_t *m = crater_metrics_create();
    const double b[] = {0.5, 1, 8};
    const double obs[] = {0.25, 0.5, 0.5, 2, 64};
    crater_metric_t *h = crater_metrics_histogram(m,
                                                  "lat_seconds",
                                                  "Latency.",
                                                  NULL,
                                                  b,
                                                  3,
                                                  &err);

    ck_assert_ptr_nonnull(h);
    for (size_t i = 0; i < 5; i++)
        ck_assert_int_eq(crater_metric_observe(h, NULL, obs[i]), 0);
    assert_render(m,
                  "# HELP lat_seconds Latency.\n"
                  "# TYPE lat_seconds histogram\n"
                  "lat_seconds_bucket{le=\"0.5\"} 3\n"
                  "lat_seconds_bucket{le=\"1\"} 3\n"
                  "lat_seconds_bucket{le=\"8\"} 4\n"
                  "lat_seconds_bucket{le=\"+Inf\"} 5\n"
                  "lat_seconds_sum 67.25\n"
                  "lat_seconds_count 5\n");
    crater_metrics_destroy(m);
}
END_TEST

START_TEST(test_histogram_labelled)
{
    crater_metrics_t *m = crater_metrics_create();
    const char *const labels[] = {"phase", NULL};
    const char *const place[] = {"place"};
    const double b[] = {0.001};
    crater_metric_t *h =
        crater_metrics_histogram(m, "h", "H.", labels, b, 1, &err);

    ck_assert_ptr_nonnull(h);
    assert_render(m, "# HELP h H.\n# TYPE h histogram\n");
    ck_assert_int_eq(crater_metric_observe(h, place, 0.5), 0);
    assert_render(m,
                  "# HELP h H.\n"
                  "# TYPE h histogram\n"
                  "h_bucket{phase=\"place\",le=\"0.001\"} 0\n"
                  "h_bucket{phase=\"place\",le=\"+Inf\"} 1\n"
                  "h_sum{phase=\"place\"} 0.5\n"
                  "h_count{phase=\"place\"} 1\n");
    crater_metrics_destroy(m);
}
END_TEST

START_TEST(test_escaping)
{
    crater_metrics_t *m = crater_metrics_create();
    const char *const labels[] = {"v", NULL};
    const char *const val[] = {"a\\b\"c\nd"};
    const char *const utf8[] = {"\xe6\x97\xa5\xe6\x9c\xac"}; /* 日本 */
    crater_metric_t *g =
        crater_metrics_gauge(m, "e", "line1\nback\\slash \"q\"", labels, &err);

    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(crater_metric_set(g, val, 1), 0);
    ck_assert_int_eq(crater_metric_set(g, utf8, 2), 0);
    assert_render(m,
                  "# HELP e line1\\nback\\\\slash \"q\"\n"
                  "# TYPE e gauge\n"
                  "e{v=\"a\\\\b\\\"c\\nd\"} 1\n"
                  "e{v=\"\xe6\x97\xa5\xe6\x9c\xac\"} 2\n");
    crater_metrics_destroy(m);
}
END_TEST

START_TEST(test_numbers)
{
    crater_metrics_t *m = crater_metrics_create();
    const char *const labels[] = {"k", NULL};
    const struct {
        const char *k;
        double v;
    } cases[] = {{"a", 0.1},
                 {"b", 1.0 / 3},
                 {"c", -2},
                 {"d", 1e300},
                 {"e", 123456789012},
                 {"f", 1e-9},
                 {"g", 0}};
    crater_metric_t *g = crater_metrics_gauge(m, "n", "N.", labels, &err);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *v[] = {cases[i].k};
        ck_assert_int_eq(crater_metric_set(g, v, cases[i].v), 0);
    }
    assert_render(m,
                  "# HELP n N.\n"
                  "# TYPE n gauge\n"
                  "n{k=\"a\"} 0.1\n"
                  "n{k=\"b\"} 0.3333333333333333\n"
                  "n{k=\"c\"} -2\n"
                  "n{k=\"d\"} 1e+300\n"
                  "n{k=\"e\"} 123456789012\n"
                  "n{k=\"f\"} 1e-09\n"
                  "n{k=\"g\"} 0\n");
    crater_metrics_destroy(m);
}
END_TEST

static void expect_bad(crater_metric_t *f, crater_errno_t e, const char *name)
{
    ck_assert_ptr_null(f);
    ck_assert_int_eq(err.errnum, e);
    ck_assert_msg(strstr(err.text, name), "'%s' not in '%s'", name, err.text);
}

START_TEST(test_invalid_names)
{
    crater_metrics_t *m = crater_metrics_create();
    const char *const dunder[] = {"__x", NULL}, *const colon[] = {"a:b", NULL};
    const char *const le[] = {"le", NULL}, *const dup[] = {"a", "a", NULL};
    const double bad_b[] = {1, 1}, nan_b[] = {NAN};

    expect_bad(crater_metrics_counter(m, "1abc", "h", NULL, &err),
               CRATER_EINVAL,
               "'1abc'");
    expect_bad(crater_metrics_gauge(m, "a-b", "h", NULL, &err),
               CRATER_EINVAL,
               "'a-b'");
    expect_bad(crater_metrics_gauge(m, "", "h", NULL, &err),
               CRATER_EINVAL,
               "''");
    expect_bad(crater_metrics_gauge(m, "ok", "h", dunder, &err),
               CRATER_EINVAL,
               "'__x'");
    expect_bad(crater_metrics_gauge(m, "ok", "h", colon, &err),
               CRATER_EINVAL,
               "'a:b'");
    expect_bad(crater_metrics_histogram(m, "ok", "h", le, NULL, 0, &err),
               CRATER_EINVAL,
               "'le'");
    expect_bad(crater_metrics_gauge(m, "ok", "h", dup, &err),
               CRATER_EINVAL,
               "'a' repeated");
    expect_bad(crater_metrics_histogram(m, "ok", "h", NULL, bad_b, 2, &err),
               CRATER_EINVAL,
               "bucket 1");
    expect_bad(crater_metrics_histogram(m, "ok", "h", NULL, nan_b, 1, &err),
               CRATER_EINVAL,
               "bucket 0");
    /* Colons are fine in metric names; names are unique. */
    ck_assert_ptr_nonnull(
        crater_metrics_gauge(m, "job:rate:5m", "h", le, &err));
    expect_bad(crater_metrics_counter(m, "job:rate:5m", "h", NULL, &err),
               CRATER_EEXIST,
               "'job:rate:5m'");
    assert_render(m,
                  "# HELP job:rate:5m h\n"
                  "# TYPE job:rate:5m gauge\n");
    crater_metrics_destroy(m);
}
END_TEST

START_TEST(test_rejected_updates)
{
    crater_metrics_t *m = crater_metrics_create();
    const char *const labels[] = {"a", "b", NULL};
    const char *const half[] = {"x", NULL}, *const badutf[] = {"x", "\xc3("};
    const double b[] = {1};
    crater_metric_t *c = crater_metrics_counter(m, "c_total", "C.", NULL, &err);
    crater_metric_t *g = crater_metrics_gauge(m, "g", "G.", labels, &err);
    crater_metric_t *h =
        crater_metrics_histogram(m, "h", "H.", NULL, b, 1, &err);

    ck_assert_int_eq(crater_metric_add(c, NULL, 2), 0);
    ck_assert_int_eq(crater_metric_add(c, NULL, -1), -1);
    ck_assert_int_eq(crater_metric_add(c, NULL, INFINITY), -1);
    ck_assert_int_eq(crater_metric_set(c, NULL, 5), -1);
    ck_assert_int_eq(crater_metric_observe(c, NULL, 5), -1);
    ck_assert_int_eq(crater_metric_add(g, NULL, 1), -1);
    ck_assert_int_eq(crater_metric_add(g, half, 1), -1);
    ck_assert_int_eq(crater_metric_add(g, badutf, 1), -1);
    ck_assert_int_eq(crater_metric_set(g, half, NAN), -1);
    ck_assert_int_eq(crater_metric_add(h, NULL, 1), -1);
    ck_assert_int_eq(crater_metric_observe(h, NULL, NAN), -1);
    ck_assert_int_eq(crater_metric_observe(h, NULL, -3), 0);
    assert_render(m,
                  "# HELP c_total C.\n# TYPE c_total counter\nc_total 2\n"
                  "# HELP g G.\n# TYPE g gauge\n"
                  "# HELP h H.\n# TYPE h histogram\n"
                  "h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\n"
                  "h_sum -3\nh_count 1\n");
    crater_metrics_destroy(m);
}
END_TEST

/* Many series force the table to grow; each keeps its value. */
START_TEST(test_many_series)
{
    crater_metrics_t *m = crater_metrics_create();
    const char *const labels[] = {"i", NULL};
    crater_metric_t *g = crater_metrics_gauge(m, "g", "G.", labels, &err);
    char key[16], line[64], *text;

    for (int i = 0; i < 1000; i++) {
        const char *v[] = {key};
        snprintf(key, sizeof(key), "%04d", i);
        ck_assert_int_eq(crater_metric_set(g, v, i), 0);
        ck_assert_int_eq(crater_metric_add(g, v, 1), 0);
    }
    text = crater_metrics_render(m, NULL);
    ck_assert_ptr_nonnull(text);
    snprintf(line, sizeof(line), "# TYPE g gauge\ng{i=\"0000\"} 1\n");
    ck_assert_ptr_nonnull(strstr(text, line));
    ck_assert_ptr_nonnull(
        strstr(text, "g{i=\"0998\"} 999\ng{i=\"0999\"} 1000\n"));
    free(text);
    crater_metrics_destroy(m);
}
END_TEST

typedef struct worker {
    crater_metric_t *c, *h, *g;
    crater_metrics_t *m;
    int id;
} worker_t;

static void *work(void *arg)
{
    worker_t *w = arg;
    const char *shared[] = {"shared"};
    char own[16];
    const char *mine[] = {own};

    snprintf(own, sizeof(own), "t%d", w->id);
    for (int i = 0; i < 10000; i++) {
        crater_metric_add(w->c, shared, 1);
        crater_metric_observe(w->h, NULL, (i % 4) * 0.5);
        crater_metric_add(w->g, mine, 1);
        if (i % 2000 == 0)
            free(crater_metrics_render(w->m, NULL));
    }
    return NULL;
}

START_TEST(test_concurrency)
{
    crater_metrics_t *m = crater_metrics_create();
    const char *const labels[] = {"k", NULL};
    const double b[] = {0.5};
    worker_t w[8];
    pthread_t t[8];
    char *text;

    w[0].c = crater_metrics_counter(m, "c_total", "C.", labels, &err);
    w[0].h = crater_metrics_histogram(m, "h", "H.", NULL, b, 1, &err);
    w[0].g = crater_metrics_gauge(m, "g", "G.", labels, &err);
    for (int i = 0; i < 8; i++) {
        w[i] = w[0];
        w[i].m = m;
        w[i].id = i;
        ck_assert_int_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    text = crater_metrics_render(m, NULL);
    ck_assert_ptr_nonnull(strstr(text, "c_total{k=\"shared\"} 80000\n"));
    /* (i % 4) * 0.5 is 0, 0.5, 1, 1.5: half land in le=0.5. */
    ck_assert_ptr_nonnull(strstr(text,
                                 "h_bucket{le=\"0.5\"} 40000\n"
                                 "h_bucket{le=\"+Inf\"} 80000\n"
                                 "h_sum 60000\n"
                                 "h_count 80000\n"));
    ck_assert_ptr_nonnull(strstr(text, "g{k=\"t0\"} 10000\n"));
    ck_assert_ptr_nonnull(strstr(text, "g{k=\"t7\"} 10000\n"));
    free(text);
    crater_metrics_destroy(m);
}
END_TEST

/* The families craterd publishes (issue 5), filled with plausible data. */
static crater_metrics_t *realistic(void)
{
    crater_metrics_t *m = crater_metrics_create();
    const char *const nr[] = {"node", "resource", NULL};
    const char *const prio[] = {"priority", NULL}, *const st[] = {"state",
                                                                  NULL};
    const double lat[] = {0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 1};
    const char *nodes[] = {"gpu-a100-1", "gpu-h100-2"};
    const char *res[] = {"gpu", "gpu_memory", "cpu", "memory", "disk_iops"};
    crater_metric_t *u, *q, *l, *d, *p, *j;

    u = crater_metrics_gauge(m,
                             "crater_resource_capability_utilization",
                             "Fraction of a node's capability in use.",
                             nr,
                             &err);
    q = crater_metrics_gauge(m,
                             "crater_queue_length",
                             "Pending jobs per priority.",
                             prio,
                             &err);
    l = crater_metrics_histogram(m,
                                 "crater_scheduling_latency_seconds",
                                 "Time to place one job.",
                                 NULL,
                                 lat,
                                 8,
                                 &err);
    d = crater_metrics_counter(m,
                               "crater_decisions_total",
                               "Scheduling decisions.",
                               NULL,
                               &err);
    p = crater_metrics_counter(m,
                               "crater_preemptions_total",
                               "Jobs preempted.",
                               NULL,
                               &err);
    j = crater_metrics_gauge(m, "crater_jobs", "Jobs by state.", st, &err);
    ck_assert_msg(u && q && l && d && p && j, "%s", err.text);
    for (int i = 0; i < 10; i++) {
        const char *v[] = {nodes[i % 2], res[i % 5]};
        crater_metric_set(u, v, i / 10.0);
    }
    crater_metric_set(q, (const char *[]){"high"}, 2);
    crater_metric_set(q, (const char *[]){"normal"}, 17);
    for (int i = 0; i < 100; i++)
        crater_metric_observe(l, NULL, i * 0.00037);
    crater_metric_add(d, NULL, 100);
    crater_metric_add(p, NULL, 3);
    crater_metric_set(j, (const char *[]){"pending"}, 19);
    crater_metric_set(j, (const char *[]){"running"}, 42);
    return m;
}

START_TEST(test_promtool)
{
    crater_metrics_t *m = realistic();
    char path[] = "/tmp/crater-metrics-XXXXXX", cmd[256], out[4096];
    size_t len, n;
    char *text = crater_metrics_render(m, &len);
    int fd, status;
    FILE *pp;

    crater_metrics_destroy(m);
    ck_assert_ptr_nonnull(text);
    if (system("command -v promtool >/dev/null 2>&1") != 0) {
        fprintf(stderr, "test_promtool: promtool not installed, skipped\n");
        free(text);
        return;
    }
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
    free(text);
    snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
    pp = popen(cmd, "r");
    ck_assert_ptr_nonnull(pp);
    n = fread(out, 1, sizeof(out) - 1, pp);
    out[n] = '\0';
    status = pclose(pp);
    unlink(path);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "promtool status %d: %s",
                  status,
                  out);
    ck_assert_msg(n == 0, "promtool said: %s", out);
}
END_TEST

static Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_counter);
    tcase_add_test(tc, test_labelled_gauge);
    tcase_add_test(tc, test_two_labels_sorted);
    tcase_add_test(tc, test_histogram);
    tcase_add_test(tc, test_histogram_labelled);
    tcase_add_test(tc, test_escaping);
    tcase_add_test(tc, test_numbers);
    tcase_add_test(tc, test_invalid_names);
    tcase_add_test(tc, test_rejected_updates);
    tcase_add_test(tc, test_many_series);
    tcase_add_test(tc, test_concurrency);
    tcase_add_test(tc, test_promtool);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(metrics_suite());
    int failures;

    srunner_run_all(sr, CK_NORMAL);
    failures = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failures ? 1 : 0;
}
