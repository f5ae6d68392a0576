/* dec.c - field-table decoding with path-and-line errors (see dec.h).
 *
 * The path lives in a fixed buffer inside the decoder and is extended and
 * truncated as the walk descends and returns, so decoding allocates only
 * what it stores into the caller's structs.
 */
#include "crater/dec.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void crater_dec_init(crater_dec_t *d,
                     const crater_doc_t *doc,
                     size_t docidx,
                     crater_error_t *err)
{
    d->doc = doc;
    d->docidx = docidx;
    d->err = err;
    d->path[0] = '\0';
    d->len = 0;
}

/* Append seg to the path; an over-long path is truncated, never overrun. */
static size_t push_text(crater_dec_t *d, const char *sep, const char *seg)
{
    size_t mark = d->len, room = sizeof(d->path) - d->len;
    int n = snprintf(d->path + d->len, room, "%s%s", sep, seg);

    if (n < 0 || (size_t)n >= room) {
        d->len = sizeof(d->path) - 1;
        d->path[d->len] = '\0';
    } else {
        d->len += (size_t)n;
    }
    return mark;
}

size_t crater_dec_push_key(crater_dec_t *d, const char *key)
{
    return push_text(d, d->len ? "." : "", key);
}

size_t crater_dec_push_index(crater_dec_t *d, size_t index)
{
    char seg[32];

    snprintf(seg, sizeof(seg), "[%zu]", index);
    return push_text(d, "", seg);
}

void crater_dec_pop(crater_dec_t *d, size_t mark)
{
    d->len = mark;
    d->path[mark] = '\0';
}

int crater_dec_fail(crater_dec_t *d,
                    crater_errno_t errnum,
                    const char *fmt,
                    ...)
{
    char msg[512], where[320];
    int line, col;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (d->doc
        && crater_doc_where(d->doc, d->docidx, d->path, &line, &col) == 0)
        snprintf(where,
                 sizeof(where),
                 "%s:%d:%d: ",
                 crater_doc_name(d->doc),
                 line,
                 col);
    else if (d->doc)
        snprintf(where, sizeof(where), "%s: ", crater_doc_name(d->doc));
    else
        where[0] = '\0';
    return crater_errorf_field(d->err,
                               errnum,
                               d->path,
                               "%s%s%s%s",
                               where,
                               d->path,
                               d->len ? ": " : "",
                               msg);
}

const char *crater_dec_typename(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "a mapping";
    case JSON_ARRAY:
        return "a list";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

unsigned crater_edit_distance(const char *a, const char *b)
{
    unsigned row[64], n = (unsigned)strlen(b), m = (unsigned)strlen(a);

    if (n >= 64 || m >= 64)
        return 255;
    for (unsigned j = 0; j <= n; j++)
        row[j] = j;
    for (unsigned i = 1; i <= m; i++) {
        unsigned prev = row[0], tmp;
        row[0] = i;
        for (unsigned j = 1; j <= n; j++) {
            unsigned cost = a[i - 1] != b[j - 1];
            tmp = row[j];
            row[j] = row[j] + 1 < row[j - 1] + 1 ? row[j] + 1 : row[j - 1] + 1;
            if (prev + cost < row[j])
                row[j] = prev + cost;
            prev = tmp;
        }
    }
    return row[n] > 255 ? 255 : row[n];
}

static const crater_dec_field_t *find_field(const crater_dec_field_t *f,
                                            const char *key)
{
    for (; f->name; f++)
        if (strcmp(f->name, key) == 0)
            return f;
    return NULL;
}

static int unknown_field(crater_dec_t *d,
                         const crater_dec_field_t *fields,
                         const char *key)
{
    const char *best = NULL;
    unsigned bestd = 3; /* suggest only close matches */

    for (const crater_dec_field_t *f = fields; f->name; f++) {
        unsigned dist = crater_edit_distance(key, f->name);
        if (dist < bestd) {
            bestd = dist;
            best = f->name;
        }
    }
    if (best)
        return crater_dec_fail(d,
                               CRATER_EFIELD,
                               "unknown field '%s' (did you mean '%s'?)",
                               key,
                               best);
    return crater_dec_fail(d, CRATER_EFIELD, "unknown field '%s'", key);
}

static int check_required(crater_dec_t *d,
                          json_t *v,
                          const crater_dec_field_t *fields)
{
    for (const crater_dec_field_t *f = fields; f->name; f++) {
        if ((f->flags & CRATER_FIELD_REQUIRED) && !json_object_get(v, f->name))
            return crater_dec_fail(d,
                                   CRATER_EMISSING,
                                   "missing required field '%s'",
                                   f->name);
    }
    return 0;
}

int crater_dec_object(crater_dec_t *d,
                      json_t *v,
                      const crater_dec_field_t *fields,
                      void *obj)
{
    const char *key;
    json_t *val;

    if (!json_is_object(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a mapping, got %s",
                               crater_dec_typename(v));
    json_object_foreach(v, key, val)
    {
        const crater_dec_field_t *f = find_field(fields, key);
        size_t mark = crater_dec_push_key(d, key);
        int rc = f ? f->fn(d, val, obj) : unknown_field(d, fields, key);

        if (rc < 0)
            return -1; /* keep the failing path in d for the caller */
        crater_dec_pop(d, mark);
    }
    return check_required(d, v, fields);
}

int crater_dec_array(
    crater_dec_t *d, json_t *v, size_t max, crater_dec_elem_f fn, void *obj)
{
    size_t i;
    json_t *el;

    if (!json_is_array(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a list, got %s",
                               crater_dec_typename(v));
    if (json_array_size(v) > max)
        return crater_dec_fail(d,
                               CRATER_ELIMIT,
                               "list has %zu entries, at most %zu allowed",
                               json_array_size(v),
                               max);
    json_array_foreach(v, i, el)
    {
        size_t mark = crater_dec_push_index(d, i);
        if (fn(d, el, obj, i) < 0)
            return -1;
        crater_dec_pop(d, mark);
    }
    return 0;
}

int crater_dec_str(crater_dec_t *d, json_t *v, size_t maxlen, char **out)
{
    char *s;

    if (!json_is_string(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a string, got %s",
                               crater_dec_typename(v));
    if (json_string_length(v) > maxlen)
        return crater_dec_fail(d,
                               CRATER_ELIMIT,
                               "string is %zu characters, at most %zu allowed",
                               json_string_length(v),
                               maxlen);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return crater_dec_fail(d, CRATER_EINVAL, "string contains a NUL");
    if (!(s = strdup(json_string_value(v))))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    free(*out);
    *out = s;
    return 0;
}

int crater_dec_bool(crater_dec_t *d, json_t *v, bool *out)
{
    if (!json_is_boolean(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected true or false, got %s",
                               crater_dec_typename(v));
    *out = json_is_true(v);
    return 0;
}

int crater_dec_int(
    crater_dec_t *d, json_t *v, int64_t min, int64_t max, int64_t *out)
{
    json_int_t i;

    if (!json_is_integer(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected an integer, got %s",
                               crater_dec_typename(v));
    i = json_integer_value(v);
    if (i < min || i > max)
        return crater_dec_fail(d,
                               CRATER_ERANGE,
                               "%" PRId64 " is out of range [%" PRId64
                               ", %" PRId64 "]",
                               (int64_t)i,
                               min,
                               max);
    *out = i;
    return 0;
}

int crater_dec_uint(
    crater_dec_t *d, json_t *v, uint64_t min, uint64_t max, uint64_t *out)
{
    json_int_t i;

    if (!json_is_integer(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected an integer, got %s",
                               crater_dec_typename(v));
    i = json_integer_value(v);
    if (i < 0 || (uint64_t)i < min || (uint64_t)i > max)
        return crater_dec_fail(d,
                               CRATER_ERANGE,
                               "%" PRId64 " is out of range [%" PRIu64
                               ", %" PRIu64 "]",
                               (int64_t)i,
                               min,
                               max);
    *out = (uint64_t)i;
    return 0;
}

int crater_dec_u32(
    crater_dec_t *d, json_t *v, uint32_t min, uint32_t max, uint32_t *out)
{
    uint64_t x = 0;

    if (crater_dec_uint(d, v, min, max, &x) < 0)
        return -1;
    *out = (uint32_t)x;
    return 0;
}

int crater_dec_double(
    crater_dec_t *d, json_t *v, double min, double max, double *out)
{
    double x;

    if (!json_is_number(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a number, got %s",
                               crater_dec_typename(v));
    x = json_number_value(v);
    if (!isfinite(x) || x < min || x > max)
        return crater_dec_fail(d,
                               CRATER_ERANGE,
                               "%g is out of range [%g, %g]",
                               x,
                               min,
                               max);
    *out = x;
    return 0;
}

const char *crater_dec_text(crater_dec_t *d, json_t *v, char *buf, size_t size)
{
    const char *lit;

    if (json_is_string(v))
        return json_string_value(v);
    lit = d->doc ? crater_doc_literal(d->doc, d->docidx, d->path) : NULL;
    if (lit)
        return lit;
    if (json_is_integer(v))
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, size, "%.15g", json_real_value(v));
    else
        return NULL;
    return buf;
}

int crater_dec_quantity(crater_dec_t *d,
                        json_t *v,
                        crater_dim_t dim,
                        uint64_t *out)
{
    char buf[64];
    const char *text;
    crater_error_t uerr;

    if (!json_is_string(v) && !json_is_number(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a %s, got %s",
                               crater_dim_name(dim),
                               crater_dec_typename(v));
    text = crater_dec_text(d, v, buf, sizeof(buf));
    if (crater_parse_quantity(text, dim, out, &uerr) < 0)
        return crater_dec_fail(d, uerr.errnum, "%s", uerr.text);
    return 0;
}

/* A number with no source text is JSON (or a tree built in memory): the
 * normalised form, where sizes are byte counts. Anything a person typed in
 * YAML, and every string, goes through crater_parse_size(). */
int crater_dec_size(crater_dec_t *d, json_t *v, uint64_t *out)
{
    char buf[64];
    const char *text;
    crater_error_t uerr;

    if (json_is_number(v)
        && !(d->doc && crater_doc_literal(d->doc, d->docidx, d->path)))
        return crater_dec_quantity(d, v, CRATER_DIM_BYTES, out);
    if (!json_is_string(v) && !json_is_number(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a %s, got %s",
                               crater_dim_name(CRATER_DIM_BYTES),
                               crater_dec_typename(v));
    text = crater_dec_text(d, v, buf, sizeof(buf));
    if (crater_parse_size(text, out, &uerr) < 0)
        return crater_dec_fail(d, uerr.errnum, "%s", uerr.text);
    return 0;
}

int crater_dec_enum(
    crater_dec_t *d, json_t *v, const char *const *names, size_t n, int *out)
{
    char allowed[256] = "";
    size_t len = 0;

    if (!json_is_string(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a string, got %s",
                               crater_dec_typename(v));
    for (size_t i = 0; i < n; i++) {
        if (names[i] && strcmp(names[i], json_string_value(v)) == 0) {
            *out = (int)i;
            return 0;
        }
    }
    for (size_t i = 0; i < n && len < sizeof(allowed); i++) {
        if (names[i])
            len += (size_t)snprintf(allowed + len,
                                    sizeof(allowed) - len,
                                    "%s%s",
                                    len ? ", " : "",
                                    names[i]);
    }
    return crater_dec_fail(d,
                           CRATER_EINVAL,
                           "'%s' is not one of: %s",
                           json_string_value(v),
                           allowed);
}

int crater_dec_literal(crater_dec_t *d, json_t *v, const char *want)
{
    if (!json_is_string(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a string, got %s",
                               crater_dec_typename(v));
    if (strcmp(json_string_value(v), want) != 0)
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%.40s' is not supported here (expected %s)",
                               json_string_value(v),
                               want);
    return 0;
}

bool crater_label_key_ok(const char *s)
{
    if (!*s || strlen(s) > CRATER_LABEL_KEY_MAX)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("-_./", *s))
            return false;
    return true;
}

void crater_strv_free(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

size_t crater_strv_len(char *const *v)
{
    size_t n = 0;

    while (v && v[n])
        n++;
    return n;
}

char **crater_strv_dup(char *const *v)
{
    size_t n = crater_strv_len(v);
    char **c;

    if (!v || !(c = calloc(n + 1, sizeof(*c))))
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!(c[i] = strdup(v[i]))) {
            crater_strv_free(c);
            return NULL;
        }
    }
    return c;
}

struct strv_ctx {
    char **v;
    size_t maxlen;
};

static int strv_elem(crater_dec_t *d, json_t *el, void *obj, size_t i)
{
    struct strv_ctx *c = obj;

    return crater_dec_str(d, el, c->maxlen, &c->v[i]);
}

int crater_dec_strv(crater_dec_t *d,
                    json_t *v,
                    size_t maxn,
                    size_t maxlen,
                    char ***out,
                    size_t *n)
{
    struct strv_ctx c = {.maxlen = maxlen};
    size_t count = json_is_array(v) ? json_array_size(v) : 1;

    if (!json_is_array(v) && !json_is_string(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a string or a list of strings, got %s",
                               crater_dec_typename(v));
    if (count > maxn)
        return crater_dec_fail(d,
                               CRATER_ELIMIT,
                               "list has %zu entries, at most %zu allowed",
                               count,
                               maxn);
    if (!(c.v = calloc(count + 1, sizeof(*c.v))))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    if ((json_is_array(v) ? crater_dec_array(d, v, maxn, strv_elem, &c)
                          : crater_dec_str(d, v, maxlen, &c.v[0]))
        < 0) {
        crater_strv_free(c.v);
        return -1;
    }
    crater_strv_free(*out);
    *out = c.v;
    if (n)
        *n = count;
    return 0;
}
