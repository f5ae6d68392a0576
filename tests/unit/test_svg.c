/* test_svg.c - SVG charts: well-formed XML (a tiny tag-stack checker),
 * element counts, exact coordinates of a 2-point series against the
 * layout formula in svg.h, text escaping, auto ranges, the CDF step
 * curve, and the error paths. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/svg.h"

/* Well-formed enough for our output: every <tag> is closed by </tag> in
 * LIFO order or self-closed, one root <svg>, attribute values quoted,
 * no raw '&' outside entities, no '<' in text. Returns the number of
 * elements, or -1. */
static int xml_check(const char *s)
{
    char stack[64][32];
    int depth = 0, elems = 0, roots = 0;

    if (strncmp(s, "<?xml", 5) == 0)
        s = strstr(s, "?>") + 2;
    for (; *s; s++) {
        if (*s == '&') {
            if (strncmp(s, "&amp;", 5) && strncmp(s, "&lt;", 4)
                && strncmp(s, "&gt;", 4) && strncmp(s, "&quot;", 6))
                return -1;
            continue;
        }
        if (*s != '<')
            continue;
        const char *end = strchr(s, '>');
        if (!end)
            return -1;
        for (const char *q = s + 1; q < end; q++)
            if (*q == '<')
                return -1;
        if (s[1] == '/') {
            size_t n = strcspn(s + 2, ">");
            if (depth == 0 || strlen(stack[depth - 1]) != n
                || strncmp(stack[depth - 1], s + 2, n))
                return -1;
            depth--;
        } else {
            size_t n = strcspn(s + 1, " />");
            int quotes = 0;
            for (const char *q = s; q < end; q++)
                quotes += *q == '"';
            if (quotes % 2 || n >= 32)
                return -1;
            elems++;
            if (depth == 0)
                roots++;
            if (end[-1] != '/') {
                if (depth == 64)
                    return -1;
                memcpy(stack[depth], s + 1, n);
                stack[depth++][n] = '\0';
            }
        }
        s = end;
    }
    return depth == 0 && roots == 1 ? elems : -1;
}

static int count(const char *s, const char *needle)
{
    int n = 0;

    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

START_TEST(two_point_series_exact_coordinates)
{
    double x[] = {0, 10}, y[] = {0, 100};
    crater_svg_series_t s = {"a", x, y, 2, NULL, false};
    crater_svg_chart_t c = {.title = "T",
                            .xlabel = "X",
                            .ylabel = "Y",
                            .xmin = 0,
                            .xmax = 10,
                            .ymin = 0,
                            .ymax = 100};
    crater_error_t err;
    char *svg = crater_svg_line_chart(&c, &s, 1, &err);

    ck_assert_ptr_nonnull(svg);
    /* X = 70 + x/10 * 630, Y = 420 - 50 - y/100 * 330 */
    ck_assert_ptr_nonnull(strstr(svg, "points=\"70.00,370.00 700.00,40.00\""));
    ck_assert_int_eq(count(svg, "<polyline"), 1);
    ck_assert_int_gt(xml_check(svg), 0);
    free(svg);
}
END_TEST

START_TEST(ticks_labels_legend)
{
    double x[] = {0, 10}, y[] = {0, 100}, y2[] = {50, 50};
    crater_svg_series_t s[] = {{"first", x, y, 2, NULL, false},
                               {"second", x, y2, 2, "#000000", true}};
    crater_svg_chart_t c = {.title = "a<b & \"c\"",
                            .xlabel = "X",
                            .ylabel = "Y",
                            .xmin = 0,
                            .xmax = 10,
                            .ymin = 0,
                            .ymax = 100};
    crater_error_t err;
    char *svg = crater_svg_line_chart(&c, s, 2, &err);

    ck_assert_ptr_nonnull(svg);
    /* x step 2 (0..10: 6 ticks), y step 20 (0..100: 6 ticks) */
    ck_assert_int_eq(count(svg, "class=\"tick\""), 12);
    ck_assert_int_eq(count(svg, "<line class=\"grid\""), 12);
    ck_assert_int_eq(count(svg, "<text class=\"legend\""), 2);
    ck_assert_int_eq(count(svg, "class=\"legend-box\""), 1);
    /* the dashed series: its polyline and its legend line */
    ck_assert_int_eq(count(svg, "stroke-dasharray=\"6 4\""), 2);
    ck_assert_int_eq(count(svg, "<polyline"), 2);
    ck_assert_ptr_nonnull(strstr(svg, ">a&lt;b &amp; &quot;c&quot;</text>"));
    ck_assert_ptr_nonnull(strstr(svg, "stroke=\"#000000\""));
    ck_assert_ptr_nonnull(strstr(svg, ">100</text>"));
    ck_assert_ptr_nonnull(strstr(svg, "points=\"70.00,205.00 700.00,205.00\""));
    ck_assert_int_gt(xml_check(svg), 0);
    free(svg);
}
END_TEST

START_TEST(auto_range_widens_to_ticks)
{
    double x[] = {0.5, 9.5}, y[] = {3, 47};
    crater_svg_series_t s = {NULL, x, y, 2, NULL, false};
    crater_svg_chart_t c = {0};
    crater_error_t err;
    char *svg = crater_svg_line_chart(&c, &s, 1, &err);

    ck_assert_ptr_nonnull(svg);
    /* x: step 2 -> 0..10; y: range 44, step 10 -> 0..50 */
    ck_assert_ptr_nonnull(strstr(svg, "points=\"101.50,350.20 668.50,59.80\""));
    ck_assert_int_eq(count(svg, "class=\"legend\""), 0);
    ck_assert_int_gt(xml_check(svg), 0);
    free(svg);
}
END_TEST

START_TEST(nan_points_skipped)
{
    double x[] = {0, 5, 10}, y[] = {0, NAN, 100};
    crater_svg_series_t s = {"a", x, y, 3, NULL, false};
    crater_svg_chart_t c = {.xmin = 0, .xmax = 10, .ymin = 0, .ymax = 100};
    crater_error_t err;
    char *svg = crater_svg_line_chart(&c, &s, 1, &err);

    ck_assert_ptr_nonnull(svg);
    ck_assert_ptr_nonnull(strstr(svg, "points=\"70.00,370.00 700.00,40.00\""));
    free(svg);
}
END_TEST

START_TEST(cdf_step_curve)
{
    double v[] = {4, 1, 3, 2};
    crater_svg_series_t s = {"w", v, NULL, 4, NULL, false};
    crater_svg_chart_t c = {.xmin = 0, .xmax = 4};
    crater_error_t err;
    char *svg = crater_svg_cdf(&c, &s, 1, &err);

    ck_assert_ptr_nonnull(svg);
    /* (1,0) (1,0) (1,.25) (2,.25) (2,.5) (3,.5) (3,.75) (4,.75) (4,1):
     * X = 70 + x/4 * 630, Y = 370 - f * 330 */
    ck_assert_ptr_nonnull(strstr(svg,
                                 "points=\"227.50,370.00 227.50,370.00 "
                                 "227.50,287.50 "
                                 "385.00,287.50 385.00,205.00 542.50,205.00 "
                                 "542.50,122.50 "
                                 "700.00,122.50 700.00,40.00\""));
    ck_assert_int_gt(xml_check(svg), 0);
    free(svg);
}
END_TEST

START_TEST(cdf_large_sample_thinned)
{
    size_t n = 100000;
    double *v = malloc(n * sizeof(*v));
    crater_svg_series_t s = {"w", v, NULL, n, NULL, false};
    crater_svg_chart_t c = {0};
    crater_error_t err;

    for (size_t i = 0; i < n; i++)
        v[i] = (double)((i * 7919) % n);
    char *svg = crater_svg_cdf(&c, &s, 1, &err);
    ck_assert_ptr_nonnull(svg);
    const char *p = strstr(svg, "points=\"");
    ck_assert_ptr_nonnull(p);
    int pts = 1;
    for (p += 8; *p != '"'; p++)
        pts += *p == ' ';
    ck_assert_int_eq(pts, 2 * CRATER_SVG_CDF_POINTS + 1);
    ck_assert_int_gt(xml_check(svg), 0);
    free(svg);
    free(v);
}
END_TEST

START_TEST(errors)
{
    crater_svg_series_t s = {"a", NULL, NULL, 2, NULL, false};
    crater_svg_chart_t c = {0}, small = {.width = 50, .height = 50};
    crater_svg_chart_t bad = {.xmin = 2, .xmax = 1};
    crater_error_t err;

    ck_assert_ptr_null(crater_svg_line_chart(&c, &s, 1, &err));
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_str_eq(err.field, "series");
    ck_assert_ptr_null(crater_svg_line_chart(&small, NULL, 0, &err));
    ck_assert_str_eq(err.text, "chart 50x50 is too small");
    ck_assert_ptr_null(crater_svg_cdf(&bad, NULL, 0, &err));
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_int_eq(crater_svg_write("/nonexistent/dir/x.svg", "<svg/>", &err),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_EIO);
}
END_TEST

START_TEST(write_round_trip)
{
    char path[] = "/tmp/crater-svg-XXXXXX";
    crater_error_t err;
    char buf[64] = {0};
    int fd = mkstemp(path);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(crater_svg_write(path, "<svg/>\n", &err), 0);
    FILE *fp = fopen(path, "r");
    ck_assert_uint_eq(fread(buf, 1, sizeof(buf) - 1, fp), 7);
    fclose(fp);
    ck_assert_str_eq(buf, "<svg/>\n");
    remove(path);
}
END_TEST

START_TEST(checker_rejects_bad_xml)
{
    ck_assert_int_eq(xml_check("<svg><g></svg></g>"), -1);
    ck_assert_int_eq(xml_check("<svg>a & b</svg>"), -1);
    ck_assert_int_eq(xml_check("<svg/><svg/>"), -1);
    ck_assert_int_eq(xml_check("<svg><g/></svg>"), 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("svg");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, two_point_series_exact_coordinates);
    tcase_add_test(tc, ticks_labels_legend);
    tcase_add_test(tc, auto_range_widens_to_ticks);
    tcase_add_test(tc, nan_points_skipped);
    tcase_add_test(tc, cdf_step_curve);
    tcase_add_test(tc, cdf_large_sample_thinned);
    tcase_add_test(tc, errors);
    tcase_add_test(tc, write_round_trip);
    tcase_add_test(tc, checker_rejects_bad_xml);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
