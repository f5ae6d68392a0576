/* svg.c - dependency-free SVG line charts and CDF plots (see svg.h).
 *
 * Why hand-written SVG: the charts are simple (axes, a few polylines, a
 * legend), the output must be byte-for-byte reproducible for tests and
 * commits, and it keeps gnuplot or a plotting library out of the build.
 * Text is built in a growable buffer; an allocation failure sets a flag
 * that every later append checks, so the drawing code stays linear and
 * the error surfaces once at the end.
 */
#include "crater/svg.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const palette[] = {"#1f77b4",
                                      "#d62728",
                                      "#2ca02c",
                                      "#ff7f0e",
                                      "#9467bd",
                                      "#8c564b",
                                      "#e377c2",
                                      "#7f7f7f"};
#define NPALETTE (sizeof(palette) / sizeof(palette[0]))

struct buf {
    char *s;
    size_t len, cap;
    bool oom;
};

struct frame {
    double xmin, xmax, ymin, ymax, xstep, ystep;
    double w, h, pw, ph;
};

static void put(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void put(struct buf *b, const char *fmt, ...)
{
    va_list ap;

    if (b->oom)
        return;
    if (!b->s) { /* first append: no NULL + 0 arithmetic below */
        if (!(b->s = malloc(b->cap = 4096))) {
            b->oom = true;
            return;
        }
    }
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = 2 * b->cap + (size_t)n + 1;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
}

/* Append s with &, <, >, " escaped. */
static void put_text(struct buf *b, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&':
            put(b, "&amp;");
            break;
        case '<':
            put(b, "&lt;");
            break;
        case '>':
            put(b, "&gt;");
            break;
        case '"':
            put(b, "&quot;");
            break;
        default:
            put(b, "%c", *s);
        }
    }
}

/* ---- scales ------------------------------------------------------------ */

/* 1, 2 or 5 x 10^k, about range / 5. */
static double nice_step(double range)
{
    double raw = range / 5.0, mag = pow(10.0, floor(log10(raw)));
    double f = raw / mag;

    return (f < 1.5 ? 1.0 : f < 3.5 ? 2.0 : f < 7.5 ? 5.0 : 10.0) * mag;
}

static void data_range(
    const crater_svg_series_t *s, size_t ns, bool usey, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (size_t k = 0; k < ns; k++)
        for (size_t i = 0; i < s[k].n; i++) {
            double v = usey ? s[k].y[i] : s[k].x[i];
            if (isnan(v) || isinf(v))
                continue;
            *lo = v < *lo ? v : *lo;
            *hi = v > *hi ? v : *hi;
        }
    if (*lo > *hi)
        *lo = 0, *hi = 1;
    if (*lo == *hi)
        *lo -= 1, *hi += 1;
}

/* Fix one axis: given range, or the data's widened to whole steps. */
static void axis(double *min, double *max, double *step, double lo, double hi)
{
    if (*min != *max) {
        *step = nice_step(*max - *min);
        return;
    }
    *step = nice_step(hi - lo);
    *min = floor(lo / *step) * *step;
    *max = ceil(hi / *step) * *step;
}

static double px(const struct frame *f, double x)
{
    return CRATER_SVG_LEFT + (x - f->xmin) / (f->xmax - f->xmin) * f->pw;
}

static double py(const struct frame *f, double y)
{
    return f->h - CRATER_SVG_BOTTOM
           - (y - f->ymin) / (f->ymax - f->ymin) * f->ph;
}

/* ---- drawing ------------------------------------------------------------- */

static void fmt_tick(char *out, size_t size, double v, double step)
{
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);

    if (fabs(v) < step * 1e-9)
        v = 0; /* no "-0" */
    snprintf(out, size, "%.*f", dec > 6 ? 6 : dec, v);
}

static void draw_xticks(struct buf *b, const struct frame *f)
{
    char t[32];
    double y0 = f->h - CRATER_SVG_BOTTOM;

    for (double v = ceil(f->xmin / f->xstep - 1e-9) * f->xstep;
         v <= f->xmax + f->xstep * 1e-9;
         v += f->xstep) {
        double x = px(f, v);
        fmt_tick(t, sizeof(t), v, f->xstep);
        put(b,
            "<line class=\"grid\" x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" "
            "y2=\"%.2f\" stroke=\"#ddd\"/>\n",
            x,
            CRATER_SVG_TOP,
            x,
            y0);
        put(b,
            "<text class=\"tick\" x=\"%.2f\" y=\"%.2f\" "
            "text-anchor=\"middle\">%s</text>\n",
            x,
            y0 + 16,
            t);
    }
}

static void draw_yticks(struct buf *b, const struct frame *f)
{
    char t[32];
    double x1 = f->w - CRATER_SVG_RIGHT;

    for (double v = ceil(f->ymin / f->ystep - 1e-9) * f->ystep;
         v <= f->ymax + f->ystep * 1e-9;
         v += f->ystep) {
        double y = py(f, v);
        fmt_tick(t, sizeof(t), v, f->ystep);
        put(b,
            "<line class=\"grid\" x1=\"%d\" y1=\"%.2f\" x2=\"%.2f\" "
            "y2=\"%.2f\" stroke=\"#ddd\"/>\n",
            CRATER_SVG_LEFT,
            y,
            x1,
            y);
        put(b,
            "<text class=\"tick\" x=\"%d\" y=\"%.2f\" "
            "text-anchor=\"end\">%s</text>\n",
            CRATER_SVG_LEFT - 6,
            y + 4,
            t);
    }
}

static void draw_frame(struct buf *b,
                       const struct frame *f,
                       const crater_svg_chart_t *c)
{
    double y0 = f->h - CRATER_SVG_BOTTOM;

    put(b,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
        "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" "
        "font-size=\"12\">\n"
        "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
        f->w,
        f->h,
        f->w,
        f->h);
    draw_xticks(b, f);
    draw_yticks(b, f);
    put(b,
        "<rect class=\"axes\" x=\"%d\" y=\"%d\" width=\"%.2f\" "
        "height=\"%.2f\" fill=\"none\" stroke=\"black\"/>\n",
        CRATER_SVG_LEFT,
        CRATER_SVG_TOP,
        f->pw,
        f->ph);
    put(b,
        "<text class=\"title\" x=\"%.2f\" y=\"24\" text-anchor=\"middle\" "
        "font-size=\"15\">",
        f->w / 2);
    put_text(b, c->title);
    put(b,
        "</text>\n<text class=\"xlabel\" x=\"%.2f\" y=\"%.2f\" "
        "text-anchor=\"middle\">",
        CRATER_SVG_LEFT + f->pw / 2,
        y0 + 38);
    put_text(b, c->xlabel);
    put(b,
        "</text>\n<text class=\"ylabel\" x=\"16\" y=\"%.2f\" "
        "text-anchor=\"middle\" transform=\"rotate(-90 16 %.2f)\">",
        CRATER_SVG_TOP + f->ph / 2,
        CRATER_SVG_TOP + f->ph / 2);
    put_text(b, c->ylabel);
    put(b, "</text>\n");
}

static const char *color_of(const crater_svg_series_t *s, size_t k)
{
    return s[k].color ? s[k].color : palette[k % NPALETTE];
}

static void draw_series(struct buf *b,
                        const struct frame *f,
                        const crater_svg_series_t *s,
                        size_t k)
{
    put(b,
        "<polyline class=\"series\" fill=\"none\" stroke=\"%s\" "
        "stroke-width=\"1.5\"%s points=\"",
        color_of(s, k),
        s[k].dashed ? " stroke-dasharray=\"6 4\"" : "");
    for (size_t i = 0; i < s[k].n; i++) {
        if (isnan(s[k].x[i]) || isnan(s[k].y[i]))
            continue;
        put(b, "%s%.2f,%.2f", i ? " " : "", px(f, s[k].x[i]), py(f, s[k].y[i]));
    }
    put(b, "\"/>\n");
}

static void draw_legend(struct buf *b,
                        const struct frame *f,
                        const crater_svg_series_t *s,
                        size_t ns)
{
    double x = CRATER_SVG_LEFT + 10, y = CRATER_SVG_TOP + 16;
    size_t rows = 0, longest = 0;

    (void)f;
    for (size_t k = 0; k < ns; k++)
        if (s[k].name) {
            rows++;
            longest = strlen(s[k].name) > longest ? strlen(s[k].name) : longest;
        }
    if (rows) /* keep the legend readable over the data */
        put(b,
            "<rect class=\"legend-box\" x=\"%.2f\" y=\"%.2f\" "
            "width=\"%.2f\" height=\"%.2f\" fill=\"white\" "
            "fill-opacity=\"0.85\" stroke=\"#ccc\"/>\n",
            x - 6,
            y - 14,
            36 + 7.0 * (double)longest,
            16.0 * (double)rows + 6);
    for (size_t k = 0; k < ns; k++) {
        if (!s[k].name)
            continue;
        put(b,
            "<line class=\"legend\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" "
            "y2=\"%.2f\" stroke=\"%s\" stroke-width=\"3\"%s/>\n",
            x,
            y - 4,
            x + 18,
            y - 4,
            color_of(s, k),
            s[k].dashed ? " stroke-dasharray=\"6 4\"" : "");
        put(b, "<text class=\"legend\" x=\"%.2f\" y=\"%.2f\">", x + 24, y);
        put_text(b, s[k].name);
        put(b, "</text>\n");
        y += 16;
    }
}

static int check_args(const crater_svg_chart_t *c,
                      const crater_svg_series_t *s,
                      size_t ns,
                      bool needy,
                      crater_error_t *err)
{
    unsigned w = c->width ? c->width : 720, h = c->height ? c->height : 420;

    if (w < CRATER_SVG_LEFT + CRATER_SVG_RIGHT + 20
        || h < CRATER_SVG_TOP + CRATER_SVG_BOTTOM + 20)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "width",
                                   "chart %ux%u is too small",
                                   w,
                                   h);
    if (!isfinite(c->xmin) || !isfinite(c->xmax) || !isfinite(c->ymin)
        || !isfinite(c->ymax) || c->xmin > c->xmax || c->ymin > c->ymax)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "xmin",
                                   "axis range must be finite, min <= max");
    for (size_t k = 0; k < ns; k++)
        if (s[k].n && (!s[k].x || (needy && !s[k].y)))
            return crater_errorf_field(err,
                                       CRATER_EINVAL,
                                       "series",
                                       "series %zu has no points array",
                                       k);
    return 0;
}

static char *render(const crater_svg_chart_t *c,
                    const crater_svg_series_t *s,
                    size_t ns,
                    crater_error_t *err)
{
    struct frame f = {.xmin = c->xmin,
                      .xmax = c->xmax,
                      .ymin = c->ymin,
                      .ymax = c->ymax};
    struct buf b = {0};
    double lo, hi;

    f.w = c->width ? c->width : 720;
    f.h = c->height ? c->height : 420;
    f.pw = f.w - CRATER_SVG_LEFT - CRATER_SVG_RIGHT;
    f.ph = f.h - CRATER_SVG_TOP - CRATER_SVG_BOTTOM;
    data_range(s, ns, false, &lo, &hi);
    axis(&f.xmin, &f.xmax, &f.xstep, lo, hi);
    data_range(s, ns, true, &lo, &hi);
    axis(&f.ymin, &f.ymax, &f.ystep, lo, hi);
    draw_frame(&b, &f, c);
    for (size_t k = 0; k < ns; k++)
        draw_series(&b, &f, s, k);
    draw_legend(&b, &f, s, ns);
    put(&b, "</svg>\n");
    if (b.oom || !b.s) {
        free(b.s);
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    return b.s;
}

char *crater_svg_line_chart(const crater_svg_chart_t *chart,
                            const crater_svg_series_t *series,
                            size_t ns,
                            crater_error_t *err)
{
    if (check_args(chart, series, ns, true, err) < 0)
        return NULL;
    return render(chart, series, ns, err);
}

/* ---- CDF ----------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* Sorted non-NaN copy of s->x as a step curve in xs/ys (room for
 * 2 * CRATER_SVG_CDF_POINTS + 1); returns the point count, or -1. */
static long cdf_points(const crater_svg_series_t *s, double *xs, double *ys)
{
    double *v = malloc((s->n ? s->n : 1) * sizeof(*v));
    size_t n = 0, m = 0;

    if (!v)
        return -1;
    for (size_t i = 0; i < s->n; i++)
        if (!isnan(s->x[i]))
            v[n++] = s->x[i];
    qsort(v, n, sizeof(*v), cmp_double);
    size_t keep = n < CRATER_SVG_CDF_POINTS ? n : CRATER_SVG_CDF_POINTS;
    if (n) {
        xs[m] = v[0];
        ys[m++] = 0;
    }
    for (size_t k = 1; k <= keep; k++) {
        size_t i = (k * n + keep - 1) / keep; /* rank reached, 1..n */
        double x = v[i - 1], prev = ys[m - 1];
        xs[m] = x; /* horizontal run at the previous level */
        ys[m++] = prev;
        xs[m] = x; /* vertical step up to the rank reached */
        ys[m++] = (double)i / (double)n;
    }
    free(v);
    return (long)m;
}

char *crater_svg_cdf(const crater_svg_chart_t *chart,
                     const crater_svg_series_t *series,
                     size_t ns,
                     crater_error_t *err)
{
    crater_svg_chart_t c = *chart;
    crater_svg_series_t *cs = calloc(ns ? ns : 1, sizeof(*cs));
    double *pts = malloc((ns ? ns : 1) * 2 * (2 * CRATER_SVG_CDF_POINTS + 1)
                         * sizeof(*pts));
    char *out = NULL;

    if (!cs || !pts) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        goto done;
    }
    if (check_args(chart, series, ns, false, err) < 0)
        goto done;
    if (c.ymin == c.ymax)
        c.ymin = 0, c.ymax = 1;
    for (size_t k = 0; k < ns; k++) {
        double *xs = pts + k * 2 * (2 * CRATER_SVG_CDF_POINTS + 1);
        double *ys = xs + 2 * CRATER_SVG_CDF_POINTS + 1;
        long m = cdf_points(&series[k], xs, ys);
        if (m < 0) {
            crater_errorf(err, CRATER_ENOMEM, "out of memory");
            goto done;
        }
        cs[k] = series[k];
        cs[k].x = xs, cs[k].y = ys, cs[k].n = (size_t)m;
    }
    out = render(&c, cs, ns, err);
done:
    free(cs);
    free(pts);
    return out;
}

int crater_svg_write(const char *path, const char *svg, crater_error_t *err)
{
    FILE *fp = fopen(path, "w");

    if (!fp)
        return crater_errorf_field(err,
                                   CRATER_EIO,
                                   "path",
                                   "%s: %s",
                                   path,
                                   strerror(errno));
    size_t len = strlen(svg);
    bool ok = fwrite(svg, 1, len, fp) == len;
    if (fclose(fp) != 0 || !ok)
        return crater_errorf_field(err,
                                   CRATER_EIO,
                                   "path",
                                   "%s: write failed",
                                   path);
    return 0;
}
