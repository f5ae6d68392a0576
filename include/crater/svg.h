/* svg.h - dependency-free SVG charts for the simulator: line charts with
 * axes, "nice" ticks, labels and a legend, and empirical CDF plots.
 *
 * The output is a complete, well-formed SVG 1.1 document (one <svg> root,
 * every element closed, text XML-escaped) as a NUL-terminated string.
 * Coordinates are printed with two decimals. Layout, for a chart of W x H
 * pixels (default 720 x 420): the plot area spans
 *   x from CRATER_SVG_LEFT to W - CRATER_SVG_RIGHT,
 *   y from CRATER_SVG_TOP to H - CRATER_SVG_BOTTOM,
 * and a data point (x, y) is drawn at
 *   X = LEFT + (x - xmin) / (xmax - xmin) * (W - LEFT - RIGHT)
 *   Y = H - BOTTOM - (y - ymin) / (ymax - ymin) * (H - TOP - BOTTOM).
 * Each series is one <polyline class="series">; NaN points are skipped.
 * The legend (series with a name) sits top left on a white box.
 *
 * Allocation curve (the FGD protocol plot): call crater_svg_line_chart()
 * with one series per policy, x = arrived workload in percent of GPU
 * capacity (0..130), y = GPU allocation ratio in percent, and set
 * xmin/xmax/ymin/ymax to fix the axes (e.g. 0..130 and 0..100) so plots
 * of several runs compare at a glance.
 *
 * Ownership: series arrays are borrowed for the call; the returned
 * string is the caller's (free()).
 */
#ifndef CRATER_SVG_H
#define CRATER_SVG_H

#include <stdbool.h>
#include <stddef.h>

#include "crater/error.h"

#define CRATER_SVG_LEFT 70
#define CRATER_SVG_RIGHT 20
#define CRATER_SVG_TOP 40
#define CRATER_SVG_BOTTOM 50

typedef struct crater_svg_series {
    const char *name;    /* legend text; NULL: no legend entry */
    const double *x, *y; /* n points; y unused by crater_svg_cdf() */
    size_t n;
    const char *color; /* "#1f77b4"...; NULL: next palette colour */
    bool dashed;       /* dashed line, e.g. for a series that lies on top
                          of another */
} crater_svg_series_t;

typedef struct crater_svg_chart {
    const char *title, *xlabel, *ylabel; /* may be NULL */
    /* Axis ranges; when min == max (e.g. both 0) the range is taken from
     * the data and widened to whole tick steps. */
    double xmin, xmax, ymin, ymax;
    unsigned width, height; /* 0: 720 x 420 */
} crater_svg_chart_t;

/* A line chart of ns series. NULL with err set: CRATER_EINVAL when a
 * series has x or y NULL with n > 0, or a size too small for the
 * margins; CRATER_ENOMEM. */
char *crater_svg_line_chart(const crater_svg_chart_t *chart,
                            const crater_svg_series_t *series,
                            size_t ns,
                            crater_error_t *err);

/* Empirical CDF of each series' x values (unsorted, NaN ignored): a step
 * curve through (v_i, i/n) for the sorted values, thinned to at most
 * CRATER_SVG_CDF_POINTS points for large samples. The y axis is the
 * fraction 0..1 unless chart sets another range. */
#define CRATER_SVG_CDF_POINTS 1000
char *crater_svg_cdf(const crater_svg_chart_t *chart,
                     const crater_svg_series_t *series,
                     size_t ns,
                     crater_error_t *err);

/* Write svg to path (created or truncated). CRATER_EIO naming the path. */
int crater_svg_write(const char *path, const char *svg, crater_error_t *err);

#endif /* CRATER_SVG_H */
