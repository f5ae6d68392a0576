/* metrics.c - Prometheus metrics registry (see crater/metrics.h).
 *
 * Workload: the scheduler loop and API handlers update a few series per
 * request or decision (thousands per second); /metrics is scraped every
 * few seconds. So updates must be cheap and rendering may be slow-ish.
 *
 * Each family owns a chained hash table of series keyed by the tuple of
 * label values (FNV-1a over the values, 0xff between them: a byte that
 * never occurs in UTF-8), guarded by one mutex per family. An update on an
 * existing series is hash + compare + arithmetic under that mutex and never
 * allocates. A series is one allocation: the struct, its histogram bucket
 * counts, its NULL-terminated label value array and the strings.
 *
 * The registry's mutex guards only the family list; rendering holds it so
 * that registration and rendering do not interleave, and takes each
 * family's mutex in turn while it copies that family's samples out.
 * Histogram buckets are stored per bucket and made cumulative on render.
 */
#include "crater/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/dec.h"

typedef enum kind {
    KIND_COUNTER,
    KIND_GAUGE,
    KIND_HISTOGRAM
} kind_t;

static const char *const kind_names[] = {"counter", "gauge", "histogram"};

typedef struct series {
    struct series *next; /* hash chain */
    uint64_t hash;
    char **vals;       /* nlabels values + NULL, inside this allocation */
    double value;      /* counter/gauge value; histogram sum */
    uint64_t count;    /* histogram observations */
    uint64_t bucket[]; /* histogram: nbounds + 1, not cumulative */
} series_t;

struct crater_metric {
    kind_t kind;
    char *name;
    char *help;
    char **labels; /* NULL-terminated */
    size_t nlabels;
    double *bounds;
    size_t nbounds;
    pthread_mutex_t lock; /* guards everything below */
    series_t **table;
    size_t tsize; /* power of two */
    size_t nseries;
};

struct crater_metrics {
    pthread_mutex_t lock; /* guards fams, n, cap */
    crater_metric_t **fams;
    size_t n, cap;
};

#define TABLE_MIN 8

/* ---- names and values ------------------------------------------------ */

static bool name_char_ok(char c, bool first, bool colon)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
        return true;
    if (c == ':')
        return colon;
    return !first && c >= '0' && c <= '9';
}

/* Metric names allow ':', label names do not. */
static bool name_ok(const char *s, bool colon)
{
    if (!s || !*s)
        return false;
    for (size_t i = 0; s[i]; i++) {
        if (!name_char_ok(s[i], i == 0, colon))
            return false;
    }
    return true;
}

/* Length of the UTF-8 sequence at s, 0 if invalid (overlong, surrogate,
 * beyond U+10FFFF or truncated). */
static size_t utf8_seq(const unsigned char *s)
{
    uint32_t cp;
    size_t n;

    if (s[0] < 0x80)
        return 1;
    if (s[0] < 0xc2 || s[0] > 0xf4)
        return 0; /* continuation byte, overlong lead or beyond U+10FFFF */
    n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;
    cp = s[0] & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff)))
        || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return n;
}

static bool utf8_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    while (*p) {
        size_t n = utf8_seq(p);
        if (n == 0)
            return false;
        p += n;
    }
    return true;
}

/* ---- series table ---------------------------------------------------- */

static uint64_t hash_values(const char *const *vals, size_t n)
{
    uint64_t h = 14695981039346656037ULL;

    for (size_t i = 0; i < n; i++) {
        for (const unsigned char *p = (const unsigned char *)vals[i]; *p; p++)
            h = (h ^ *p) * 1099511628211ULL;
        h = (h ^ 0xff) * 1099511628211ULL;
    }
    return h;
}

static bool values_equal(char *const *a, const char *const *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(a[i], b[i]) != 0)
            return false;
    }
    return true;
}

static series_t *find(const crater_metric_t *f,
                      const char *const *vals,
                      uint64_t h)
{
    series_t *s = f->table[h & (f->tsize - 1)];

    while (s && !(s->hash == h && values_equal(s->vals, vals, f->nlabels)))
        s = s->next;
    return s;
}

/* One block: struct, buckets, value pointers, then the strings. */
static series_t *series_new(const crater_metric_t *f,
                            const char *const *vals,
                            uint64_t h)
{
    size_t nb = f->kind == KIND_HISTOGRAM ? f->nbounds + 1 : 0;
    size_t off = sizeof(series_t) + nb * sizeof(uint64_t), size;
    series_t *s;
    char *p;

    off = (off + alignof(char *) - 1) / alignof(char *) * alignof(char *);
    size = off + (f->nlabels + 1) * sizeof(char *);
    for (size_t i = 0; i < f->nlabels; i++)
        size += strlen(vals[i]) + 1;
    if (!(s = calloc(1, size)))
        return NULL;
    s->hash = h;
    s->vals = (char **)((char *)s + off);
    p = (char *)(s->vals + f->nlabels + 1);
    for (size_t i = 0; i < f->nlabels; i++) {
        size_t len = strlen(vals[i]) + 1;
        s->vals[i] = memcpy(p, vals[i], len);
        p += len;
    }
    return s;
}

/* Double the table when it holds as many series as buckets. */
static int grow(crater_metric_t *f)
{
    size_t nsize = f->tsize * 2;
    series_t **nt = calloc(nsize, sizeof(*nt));

    if (!nt)
        return -1;
    for (size_t i = 0; i < f->tsize; i++) {
        series_t *s = f->table[i], *next;
        for (; s; s = next) {
            next = s->next;
            s->next = nt[s->hash & (nsize - 1)];
            nt[s->hash & (nsize - 1)] = s;
        }
    }
    free(f->table);
    f->table = nt;
    f->tsize = nsize;
    return 0;
}

/* With f->lock held: the series for vals, created on first use. NULL for
 * invalid label values or out of memory. */
static series_t *get_series(crater_metric_t *f, const char *const *vals)
{
    uint64_t h = hash_values(vals, f->nlabels);
    series_t *s = find(f, vals, h);

    if (s)
        return s;
    for (size_t i = 0; i < f->nlabels; i++) {
        if (!utf8_ok(vals[i]))
            return NULL;
    }
    if (f->nseries >= f->tsize && grow(f) < 0)
        return NULL;
    if (!(s = series_new(f, vals, h)))
        return NULL;
    s->next = f->table[h & (f->tsize - 1)];
    f->table[h & (f->tsize - 1)] = s;
    f->nseries++;
    return s;
}

static void clear_table(crater_metric_t *f)
{
    for (size_t i = 0; i < f->tsize; i++) {
        series_t *s = f->table[i], *next;
        for (; s; s = next) {
            next = s->next;
            free(s);
        }
        f->table[i] = NULL;
    }
    f->nseries = 0;
}

/* ---- updates --------------------------------------------------------- */

typedef enum op {
    OP_ADD,
    OP_SET,
    OP_OBSERVE
} op_t;

/* Index of the first bucket whose upper bound is >= v (le semantics);
 * nbounds for the implicit +Inf bucket. */
static size_t bucket_index(const crater_metric_t *f, double v)
{
    size_t lo = 0, hi = f->nbounds;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v <= f->bounds[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static void apply(crater_metric_t *f, series_t *s, op_t op, double v)
{
    switch (op) {
    case OP_ADD:
        s->value += v;
        break;
    case OP_SET:
        s->value = v;
        break;
    case OP_OBSERVE:
        s->bucket[bucket_index(f, v)]++;
        s->value += v;
        s->count++;
        break;
    }
}

static bool op_allowed(const crater_metric_t *f, op_t op, double v)
{
    if (!isfinite(v))
        return false;
    switch (op) {
    case OP_ADD:
        return f->kind == KIND_GAUGE || (f->kind == KIND_COUNTER && v >= 0);
    case OP_SET:
        return f->kind == KIND_GAUGE;
    case OP_OBSERVE:
        return f->kind == KIND_HISTOGRAM;
    }
    return false;
}

static int update(crater_metric_t *f,
                  const char *const *vals,
                  op_t op,
                  double v)
{
    series_t *s;

    if (!f || !op_allowed(f, op, v))
        return -1;
    if (f->nlabels > 0) {
        if (!vals)
            return -1;
        for (size_t i = 0; i < f->nlabels; i++) {
            if (!vals[i])
                return -1;
        }
    }
    pthread_mutex_lock(&f->lock);
    s = get_series(f, vals);
    if (s)
        apply(f, s, op, v);
    pthread_mutex_unlock(&f->lock);
    return s ? 0 : -1;
}

int crater_metric_add(crater_metric_t *f,
                      const char *const *label_values,
                      double v)
{
    return update(f, label_values, OP_ADD, v);
}

int crater_metric_set(crater_metric_t *f,
                      const char *const *label_values,
                      double v)
{
    return update(f, label_values, OP_SET, v);
}

int crater_metric_observe(crater_metric_t *f,
                          const char *const *label_values,
                          double v)
{
    return update(f, label_values, OP_OBSERVE, v);
}

void crater_metric_reset(crater_metric_t *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    clear_table(f);
    pthread_mutex_unlock(&f->lock);
}

/* ---- registration ---------------------------------------------------- */

static void family_free(crater_metric_t *f)
{
    if (!f)
        return;
    if (f->table) {
        clear_table(f);
        pthread_mutex_destroy(&f->lock);
    }
    free(f->table);
    free(f->name);
    free(f->help);
    crater_strv_free(f->labels);
    free(f->bounds);
    free(f);
}

static int check_labels(kind_t kind,
                        const char *name,
                        const char *const *labels,
                        crater_error_t *err)
{
    for (size_t i = 0; labels && labels[i]; i++) {
        const char *l = labels[i];
        if (!name_ok(l, false) || strncmp(l, "__", 2) == 0
            || (kind == KIND_HISTOGRAM && strcmp(l, "le") == 0))
            return crater_errorf(err,
                                 CRATER_EINVAL,
                                 "metric '%s': invalid label name '%s'",
                                 name,
                                 l);
        for (size_t j = 0; j < i; j++) {
            if (strcmp(labels[j], l) == 0)
                return crater_errorf(err,
                                     CRATER_EINVAL,
                                     "metric '%s': label '%s' repeated",
                                     name,
                                     l);
        }
    }
    return 0;
}

static int check_bounds(const char *name,
                        const double *b,
                        size_t n,
                        crater_error_t *err)
{
    if (n > 0 && !b)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "histogram '%s': buckets missing",
                             name);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(b[i]) || (i > 0 && !(b[i] > b[i - 1])))
            return crater_errorf(err,
                                 CRATER_EINVAL,
                                 "histogram '%s': bucket %zu (%g) is not "
                                 "finite and above the previous bound",
                                 name,
                                 i,
                                 b[i]);
    }
    return 0;
}

static int check_def(kind_t kind,
                     const char *name,
                     const char *const *labels,
                     const double *b,
                     size_t n,
                     crater_error_t *err)
{
    if (!name_ok(name, true))
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "invalid metric name '%s'",
                             name ? name : "(null)");
    if (check_labels(kind, name, labels, err) < 0)
        return -1;
    return kind == KIND_HISTOGRAM ? check_bounds(name, b, n, err) : 0;
}

/* Build an unpublished family; a label-less one gets its series now. */
static crater_metric_t *family_new(kind_t kind,
                                   const char *name,
                                   const char *help,
                                   const char *const *labels,
                                   const double *b,
                                   size_t n)
{
    crater_metric_t *f = calloc(1, sizeof(*f));
    const char *none[] = {NULL};

    if (!f)
        return NULL;
    f->kind = kind;
    f->name = strdup(name);
    f->help = strdup(help ? help : "");
    f->labels = crater_strv_dup((char *const *)(labels ? labels : none));
    f->nlabels = f->labels ? crater_strv_len(f->labels) : 0;
    f->nbounds = kind == KIND_HISTOGRAM ? n : 0;
    f->bounds = malloc((f->nbounds + 1) * sizeof(double));
    if (!f->name || !f->help || !f->labels || !f->bounds
        || !(f->table = calloc(TABLE_MIN, sizeof(series_t *)))) {
        family_free(f);
        return NULL;
    }
    if (f->nbounds)
        memcpy(f->bounds, b, n * sizeof(double));
    f->tsize = TABLE_MIN;
    pthread_mutex_init(&f->lock, NULL);
    if (f->nlabels == 0 && !get_series(f, NULL)) {
        family_free(f);
        return NULL;
    }
    return f;
}

/* With m->lock held. */
static int publish(crater_metrics_t *m, crater_metric_t *f, crater_error_t *err)
{
    for (size_t i = 0; i < m->n; i++) {
        if (strcmp(m->fams[i]->name, f->name) == 0)
            return crater_errorf(err,
                                 CRATER_EEXIST,
                                 "metric '%s' is already registered",
                                 f->name);
    }
    if (m->n == m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 16;
        crater_metric_t **nf = realloc(m->fams, ncap * sizeof(*nf));
        if (!nf)
            return crater_errorf(err, CRATER_ENOMEM, "out of memory");
        m->fams = nf;
        m->cap = ncap;
    }
    m->fams[m->n++] = f;
    return 0;
}

static crater_metric_t *reg_family(crater_metrics_t *m,
                                   kind_t kind,
                                   const char *name,
                                   const char *help,
                                   const char *const *labels,
                                   const double *b,
                                   size_t n,
                                   crater_error_t *err)
{
    crater_metric_t *f;
    int rc;

    if (!m) {
        crater_errorf(err, CRATER_EINVAL, "no metrics registry");
        return NULL;
    }
    if (check_def(kind, name, labels, b, n, err) < 0)
        return NULL;
    if (!(f = family_new(kind, name, help, labels, b, n))) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_lock(&m->lock);
    rc = publish(m, f, err);
    pthread_mutex_unlock(&m->lock);
    if (rc < 0) {
        family_free(f);
        return NULL;
    }
    return f;
}

crater_metric_t *crater_metrics_counter(crater_metrics_t *m,
                                        const char *name,
                                        const char *help,
                                        const char *const *label_names,
                                        crater_error_t *err)
{
    return reg_family(m, KIND_COUNTER, name, help, label_names, NULL, 0, err);
}

crater_metric_t *crater_metrics_gauge(crater_metrics_t *m,
                                      const char *name,
                                      const char *help,
                                      const char *const *label_names,
                                      crater_error_t *err)
{
    return reg_family(m, KIND_GAUGE, name, help, label_names, NULL, 0, err);
}

crater_metric_t *crater_metrics_histogram(crater_metrics_t *m,
                                          const char *name,
                                          const char *help,
                                          const char *const *label_names,
                                          const double *buckets,
                                          size_t n,
                                          crater_error_t *err)
{
    return reg_family(m,
                      KIND_HISTOGRAM,
                      name,
                      help,
                      label_names,
                      buckets,
                      n,
                      err);
}

crater_metrics_t *crater_metrics_create(void)
{
    crater_metrics_t *m = calloc(1, sizeof(*m));

    if (m)
        pthread_mutex_init(&m->lock, NULL);
    return m;
}

void crater_metrics_destroy(crater_metrics_t *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++)
        family_free(m->fams[i]);
    free(m->fams);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* ---- rendering ------------------------------------------------------- */

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf_t;

static void buf_put(buf_t *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap : 4096;
        char *np;
        while (ncap < b->len + n + 1)
            ncap *= 2;
        if (!(np = realloc(b->p, ncap))) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_puts(buf_t *b, const char *s)
{
    buf_put(b, s, strlen(s));
}

/* HELP text escapes \ and newline; label values also escape ". */
static void buf_escaped(buf_t *b, const char *s, bool quote)
{
    const char *run = s;

    for (; *s; s++) {
        const char *rep = *s == '\\'           ? "\\\\"
                          : *s == '\n'         ? "\\n"
                          : quote && *s == '"' ? "\\\""
                                               : NULL;
        if (rep) {
            buf_put(b, run, (size_t)(s - run));
            buf_puts(b, rep);
            run = s + 1;
        }
    }
    buf_put(b, run, (size_t)(s - run));
}

/* Prometheus number text; out holds at least 32 bytes. */
static void fmt_num(char *out, size_t size, double v)
{
    if (isnan(v)) {
        snprintf(out, size, "NaN");
    } else if (isinf(v)) {
        snprintf(out, size, "%s", v > 0 ? "+Inf" : "-Inf");
    } else if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        snprintf(out, size, "%.0f", v); /* exact below 2^53 */
    } else {
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(out, size, "%.*g", prec, v);
            if (strtod(out, NULL) == v)
                break;
        }
    }
}

static void buf_num(buf_t *b, double v)
{
    char num[40];

    fmt_num(num, sizeof(num), v);
    buf_puts(b, num);
}

/* {a="x",b="y"} plus le="..." for buckets; nothing when both are empty. */
static void put_labels(buf_t *b,
                       const crater_metric_t *f,
                       char *const *vals,
                       const char *le)
{
    if (f->nlabels == 0 && !le)
        return;
    buf_puts(b, "{");
    for (size_t i = 0; i < f->nlabels; i++) {
        buf_puts(b, i ? "," : "");
        buf_puts(b, f->labels[i]);
        buf_puts(b, "=\"");
        buf_escaped(b, vals[i], true);
        buf_puts(b, "\"");
    }
    if (le) {
        buf_puts(b, f->nlabels ? ",le=\"" : "le=\"");
        buf_puts(b, le);
        buf_puts(b, "\"");
    }
    buf_puts(b, "}");
}

static void put_sample(buf_t *b,
                       const crater_metric_t *f,
                       const char *suffix,
                       char *const *vals,
                       const char *le,
                       double v)
{
    buf_puts(b, f->name);
    buf_puts(b, suffix);
    put_labels(b, f, vals, le);
    buf_puts(b, " ");
    buf_num(b, v);
    buf_puts(b, "\n");
}

static void put_histogram(buf_t *b, const crater_metric_t *f, series_t *s)
{
    char le[40];
    uint64_t cum = 0;

    for (size_t i = 0; i <= f->nbounds; i++) {
        cum += s->bucket[i];
        if (i < f->nbounds)
            fmt_num(le, sizeof(le), f->bounds[i]);
        else
            snprintf(le, sizeof(le), "+Inf");
        put_sample(b, f, "_bucket", s->vals, le, (double)cum);
    }
    put_sample(b, f, "_sum", s->vals, NULL, s->value);
    put_sample(b, f, "_count", s->vals, NULL, (double)s->count);
}

static int cmp_series(const void *pa, const void *pb)
{
    char *const *a = (*(series_t *const *)pa)->vals;
    char *const *b = (*(series_t *const *)pb)->vals;

    for (; *a && *b; a++, b++) {
        int c = strcmp(*a, *b);
        if (c)
            return c;
    }
    return 0; /* same family: same number of values */
}

/* With f->lock held. */
static void put_series(buf_t *b, crater_metric_t *f)
{
    series_t **all;
    size_t n = 0;

    if (f->nseries == 0)
        return;
    if (!(all = malloc(f->nseries * sizeof(*all)))) {
        b->oom = true;
        return;
    }
    for (size_t i = 0; i < f->tsize; i++) {
        for (series_t *s = f->table[i]; s; s = s->next)
            all[n++] = s;
    }
    qsort(all, n, sizeof(*all), cmp_series);
    for (size_t i = 0; i < n; i++) {
        if (f->kind == KIND_HISTOGRAM)
            put_histogram(b, f, all[i]);
        else
            put_sample(b, f, "", all[i]->vals, NULL, all[i]->value);
    }
    free(all);
}

static void put_family(buf_t *b, crater_metric_t *f)
{
    buf_puts(b, "# HELP ");
    buf_puts(b, f->name);
    buf_puts(b, " ");
    buf_escaped(b, f->help, false);
    buf_puts(b, "\n# TYPE ");
    buf_puts(b, f->name);
    buf_puts(b, " ");
    buf_puts(b, kind_names[f->kind]);
    buf_puts(b, "\n");
    pthread_mutex_lock(&f->lock);
    put_series(b, f);
    pthread_mutex_unlock(&f->lock);
}

char *crater_metrics_render(crater_metrics_t *m, size_t *len)
{
    buf_t b = {0};

    if (!m)
        return NULL;
    buf_put(&b, "", 0); /* an empty registry renders as "" */
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->n && !b.oom; i++)
        put_family(&b, m->fams[i]);
    pthread_mutex_unlock(&m->lock);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (len)
        *len = b.len;
    return b.p;
}
