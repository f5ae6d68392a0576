/* batch.c - KServe V2 infer requests for dynamic batching: a strict parser
 * that also computes each request's compatibility key, concatenation of
 * compatible requests along the first dimension, and the split of the
 * backend's answer back into one answer per request.
 *
 * The key is the model name, the request's "outputs" and "parameters"
 * (compact JSON with sorted keys) and, per input in order, its name,
 * datatype, non-batch dimensions and parameters: two requests with equal
 * keys differ only in their rows, which is what makes the concatenation
 * the same computation as the requests one by one for a model whose rows
 * are independent (the V2 batching contract).
 *
 * Data may come flat or nested (row-major); it is kept flat, so the split
 * is slicing: request i owns elements [offset_i x inner, (offset_i +
 * rows_i) x inner) of each output. Expected sizes are tens of requests of
 * up to thousands of elements; jansson values are moved, not copied, where
 * the input is consumed.
 */
#include "batch.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INPUTS 64
#define MAX_ELEMS (64u << 20)

static const char *const datatypes[] = {
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BYTES",
    NULL,
};

static int fail(crater_error_t *err,
                crater_errno_t code,
                const char *field,
                const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));

/* err->text is "field: reason", err->field the path. */
static int fail(crater_error_t *err,
                crater_errno_t code,
                const char *field,
                const char *fmt,
                ...)
{
    char why[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return crater_errorf_field(err, code, field, "%s: %s", field, why);
}

static void tensor_clear(gw_tensor_t *t)
{
    json_decref(t->data);
    json_decref(t->params);
}

void gw__v2_free(gw_v2_t *r)
{
    if (r == NULL)
        return;
    for (unsigned i = 0; i < r->ninputs; i++)
        tensor_clear(&r->inputs[i]);
    free(r->inputs);
    json_decref(r->id);
    json_decref(r->rest);
    free(r->key);
    free(r);
}

/* ---- parsing -------------------------------------------------------- */

static bool elem_ok(const char *dt, const json_t *v)
{
    if (strcmp(dt, "BOOL") == 0)
        return json_is_boolean(v);
    if (strcmp(dt, "BYTES") == 0)
        return json_is_string(v);
    if (dt[0] == 'F')
        return json_is_number(v);
    return json_is_integer(v);
}

/* Append v's elements (recursing into nested arrays) to flat. */
static int flatten(json_t *flat,
                   json_t *v,
                   const gw_tensor_t *t,
                   const char *path,
                   crater_error_t *err)
{
    size_t i;
    json_t *e;

    json_array_foreach(v, i, e)
    {
        if (json_is_array(e)) {
            if (flatten(flat, e, t, path, err) < 0)
                return -1;
            continue;
        }
        if (!elem_ok(t->datatype, e))
            return fail(err,
                        CRATER_ETYPE,
                        path,
                        "element %zu is %s, not a %s value",
                        json_array_size(flat),
                        json_is_string(e) ? "a string" : "of another kind",
                        t->datatype);
        if (json_array_size(flat) >= MAX_ELEMS
            || json_array_append(flat, e) < 0)
            return fail(err, CRATER_ELIMIT, path, "too many elements");
    }
    return 0;
}

static int parse_shape(gw_tensor_t *t,
                       json_t *v,
                       const char *path,
                       crater_error_t *err)
{
    size_t i, total = 1;
    json_t *e;

    if (!json_is_array(v))
        return fail(err, CRATER_ETYPE, path, "must be an array of integers");
    if (json_array_size(v) > GW_MAX_RANK)
        return fail(err,
                    CRATER_ERANGE,
                    path,
                    "more than %d dimensions",
                    GW_MAX_RANK);
    json_array_foreach(v, i, e)
    {
        if (!json_is_integer(e) || json_integer_value(e) < 0
            || json_integer_value(e) > (json_int_t)MAX_ELEMS)
            return fail(err,
                        CRATER_ETYPE,
                        path,
                        "dimension %zu must be an integer 0..%u",
                        i,
                        MAX_ELEMS);
        t->shape[i] = json_integer_value(e);
        if (i > 0)
            total *= (size_t)t->shape[i];
        if (total > MAX_ELEMS)
            return fail(err, CRATER_ELIMIT, path, "too many elements");
    }
    t->rank = (unsigned)json_array_size(v);
    t->inner = total;
    return 0;
}

static int parse_name(gw_tensor_t *t,
                      json_t *in,
                      const char *path,
                      crater_error_t *err)
{
    json_t *name = json_object_get(in, "name");
    json_t *dt = json_object_get(in, "datatype");
    char f[160];
    unsigned k;

    snprintf(f, sizeof f, "%s.name", path);
    if (name == NULL)
        return fail(err, CRATER_EMISSING, f, "is required");
    if (!json_is_string(name) || json_string_length(name) == 0
        || json_string_length(name) >= sizeof t->name)
        return fail(err, CRATER_ETYPE, f, "must be a string of 1..127 bytes");
    snprintf(t->name, sizeof t->name, "%s", json_string_value(name));
    snprintf(f, sizeof f, "%s.datatype", path);
    if (dt == NULL)
        return fail(err, CRATER_EMISSING, f, "is required");
    for (k = 0; datatypes[k] != NULL; k++)
        if (json_is_string(dt)
            && strcmp(json_string_value(dt), datatypes[k]) == 0)
            break;
    if (datatypes[k] == NULL)
        return fail(err,
                    CRATER_EINVAL,
                    f,
                    "must be one of BOOL, UINT8..64, INT8..64, FP16, FP32, "
                    "FP64, BYTES");
    snprintf(t->datatype, sizeof t->datatype, "%s", datatypes[k]);
    return 0;
}

static int check_keys(json_t *obj,
                      const char *const *allowed,
                      const char *path,
                      crater_error_t *err)
{
    const char *k;
    json_t *v;
    char f[160];

    json_object_foreach(obj, k, v)
    {
        unsigned i = 0;
        while (allowed[i] != NULL && strcmp(allowed[i], k) != 0)
            i++;
        if (allowed[i] == NULL) {
            snprintf(f, sizeof f, "%s%s%s", path, *path ? "." : "", k);
            return fail(err, CRATER_EFIELD, f, "unknown field");
        }
    }
    return 0;
}

static int parse_input(gw_tensor_t *t,
                       json_t *in,
                       size_t idx,
                       crater_error_t *err)
{
    static const char *const keys[] =
        {"name", "datatype", "shape", "data", "parameters", NULL};
    char path[64], f[160];
    json_t *data;
    size_t want;

    snprintf(path, sizeof path, "inputs[%zu]", idx);
    if (!json_is_object(in))
        return fail(err, CRATER_ETYPE, path, "must be an object");
    if (check_keys(in, keys, path, err) < 0 || parse_name(t, in, path, err) < 0)
        return -1;
    snprintf(f, sizeof f, "%s.shape", path);
    if (json_object_get(in, "shape") == NULL)
        return fail(err, CRATER_EMISSING, f, "is required");
    if (parse_shape(t, json_object_get(in, "shape"), f, err) < 0)
        return -1;
    t->params = json_incref(json_object_get(in, "parameters"));
    if (t->params != NULL && !json_is_object(t->params))
        return fail(err, CRATER_ETYPE, path, "parameters must be an object");
    snprintf(f, sizeof f, "%s.data", path);
    data = json_object_get(in, "data");
    if (data == NULL)
        return fail(err, CRATER_EMISSING, f, "is required");
    if (!json_is_array(data))
        return fail(err, CRATER_ETYPE, f, "must be an array");
    if ((t->data = json_array()) == NULL)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (flatten(t->data, data, t, f, err) < 0)
        return -1;
    want = t->rank ? t->inner * (size_t)t->shape[0] : 1;
    if (json_array_size(t->data) != want)
        return fail(err,
                    CRATER_EINVAL,
                    f,
                    "has %zu elements, shape needs %zu",
                    json_array_size(t->data),
                    want);
    return 0;
}

static int parse_inputs(gw_v2_t *r, json_t *ins, crater_error_t *err)
{
    size_t i;
    json_t *in;

    if (ins == NULL)
        return fail(err, CRATER_EMISSING, "inputs", "is required");
    if (!json_is_array(ins) || json_array_size(ins) == 0)
        return fail(err, CRATER_ETYPE, "inputs", "must be a non-empty array");
    if (json_array_size(ins) > MAX_INPUTS)
        return fail(err, CRATER_ELIMIT, "inputs", "more than %d", MAX_INPUTS);
    r->inputs = calloc(json_array_size(ins), sizeof(*r->inputs));
    if (r->inputs == NULL)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    json_array_foreach(ins, i, in)
    {
        r->ninputs++;
        if (parse_input(&r->inputs[i], in, i, err) < 0)
            return -1;
        for (size_t j = 0; j < i; j++)
            if (strcmp(r->inputs[j].name, r->inputs[i].name) == 0) {
                char f[64];
                snprintf(f, sizeof f, "inputs[%zu].name", i);
                return fail(err,
                            CRATER_EINVAL,
                            f,
                            "'%s' repeats inputs[%zu]",
                            r->inputs[i].name,
                            j);
            }
    }
    return 0;
}

static int parse_top(gw_v2_t *r, json_t *doc, crater_error_t *err)
{
    static const char *const keys[] = {"id",
                                       "inputs",
                                       "outputs",
                                       "parameters",
                                       NULL};
    json_t *v;

    if (!json_is_object(doc))
        return fail(err, CRATER_ETYPE, "body", "must be a JSON object");
    if (check_keys(doc, keys, "", err) < 0)
        return -1;
    r->id = json_incref(json_object_get(doc, "id"));
    if (r->id != NULL && !json_is_string(r->id))
        return fail(err, CRATER_ETYPE, "id", "must be a string");
    if ((r->rest = json_object()) == NULL)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if ((v = json_object_get(doc, "outputs")) != NULL) {
        if (!json_is_array(v))
            return fail(err, CRATER_ETYPE, "outputs", "must be an array");
        json_object_set(r->rest, "outputs", v);
    }
    if ((v = json_object_get(doc, "parameters")) != NULL) {
        if (!json_is_object(v))
            return fail(err, CRATER_ETYPE, "parameters", "must be an object");
        json_object_set(r->rest, "parameters", v);
    }
    return parse_inputs(r, json_object_get(doc, "inputs"), err);
}

/* The compatibility key, or NULL (not batchable; r->rows = 0). */
static int make_key(gw_v2_t *r, const char *model, crater_error_t *err)
{
    json_t *k = json_pack("[s,O,[]]", model, r->rest);
    json_t *ins = k ? json_array_get(k, 2) : NULL;

    r->rows = r->inputs[0].rank ? r->inputs[0].shape[0] : 0;
    for (unsigned i = 0; i < r->ninputs; i++)
        if (r->inputs[i].rank == 0 || r->inputs[i].shape[0] != r->rows)
            r->rows = 0;
    for (unsigned i = 0; ins != NULL && i < r->ninputs; i++) {
        const gw_tensor_t *t = &r->inputs[i];
        json_t *dims = json_array();
        for (unsigned d = 1; dims != NULL && d < t->rank; d++)
            json_array_append_new(dims, json_integer(t->shape[d]));
        json_array_append_new(ins,
                              json_pack("[s,s,o,O?]",
                                        t->name,
                                        t->datatype,
                                        dims,
                                        t->params));
    }
    if (r->rows > 0 && ins != NULL)
        r->key = json_dumps(k, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(k);
    if (r->rows > 0 && r->key == NULL)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    return 0;
}

gw_v2_t *gw__v2_parse(const char *model,
                      const char *body,
                      size_t len,
                      crater_error_t *err)
{
    json_error_t jerr;
    json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    gw_v2_t *r;

    if (doc == NULL) {
        fail(err,
             CRATER_EPARSE,
             "body",
             "malformed JSON at line %d column %d: %s",
             jerr.line,
             jerr.column,
             jerr.text);
        return NULL;
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
    } else if (parse_top(r, doc, err) < 0 || make_key(r, model, err) < 0) {
        gw__v2_free(r);
        r = NULL;
    }
    json_decref(doc);
    return r;
}

/* ---- concatenation -------------------------------------------------- */

static json_t *shape_json(const gw_tensor_t *t, int64_t rows)
{
    json_t *s = json_array();

    json_array_append_new(s, json_integer(rows));
    for (unsigned d = 1; d < t->rank; d++)
        json_array_append_new(s, json_integer(t->shape[d]));
    return s;
}

static json_t *concat_input(gw_v2_t *const *reqs, size_t n, unsigned i)
{
    const gw_tensor_t *t0 = &reqs[0]->inputs[i];
    json_t *data = json_array();
    int64_t rows = 0;

    for (size_t k = 0; data != NULL && k < n; k++) {
        json_array_extend(data, reqs[k]->inputs[i].data);
        rows += reqs[k]->rows;
    }
    return json_pack("{s:s,s:s,s:o,s:o,s:O*}",
                     "name",
                     t0->name,
                     "datatype",
                     t0->datatype,
                     "shape",
                     shape_json(t0, rows),
                     "data",
                     data,
                     "parameters",
                     t0->params);
}

char *gw__v2_concat(gw_v2_t *const *reqs,
                    size_t n,
                    size_t *len,
                    crater_error_t *err)
{
    json_t *doc, *ins;
    char *text = NULL;

    for (size_t k = 0; k < n; k++)
        if (reqs[k]->key == NULL || strcmp(reqs[k]->key, reqs[0]->key) != 0) {
            crater_errorf(err,
                          CRATER_EINVAL,
                          "request %zu cannot batch with request 0",
                          k);
            return NULL;
        }
    doc = json_deep_copy(reqs[0]->rest);
    ins = json_array();
    for (unsigned i = 0; ins != NULL && i < reqs[0]->ninputs; i++)
        json_array_append_new(ins, concat_input(reqs, n, i));
    if (doc != NULL && json_object_set_new(doc, "inputs", ins) == 0)
        text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    if (text == NULL)
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
    else
        *len = strlen(text);
    return text;
}

/* ---- split ---------------------------------------------------------- */

typedef struct out {
    json_t *obj;  /* the answer's output object */
    json_t *data; /* flat */
    gw_tensor_t t;
} out_t;

static int check_output(
    out_t *o, json_t *v, size_t k, int64_t total, crater_error_t *err)
{
    char path[64], f[160];
    size_t want;

    snprintf(path, sizeof path, "outputs[%zu]", k);
    if (!json_is_object(v))
        return fail(err, CRATER_ETYPE, path, "must be an object");
    o->obj = v;
    if (parse_name(&o->t, v, path, err) < 0)
        return -1;
    snprintf(f, sizeof f, "%s.shape", path);
    if (parse_shape(&o->t, json_object_get(v, "shape"), f, err) < 0)
        return -1;
    if (o->t.rank == 0 || o->t.shape[0] != total)
        return fail(err,
                    CRATER_EINVAL,
                    f,
                    "first dimension must be the batch's %lld rows",
                    (long long)total);
    snprintf(f, sizeof f, "%s.data", path);
    if (!json_is_array(json_object_get(v, "data")))
        return fail(err, CRATER_ETYPE, f, "must be an array");
    if ((o->data = json_array()) == NULL)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (flatten(o->data, json_object_get(v, "data"), &o->t, f, err) < 0)
        return -1;
    want = o->t.inner * (size_t)total;
    if (json_array_size(o->data) != want)
        return fail(err,
                    CRATER_EINVAL,
                    f,
                    "has %zu elements, shape needs %zu",
                    json_array_size(o->data),
                    want);
    return 0;
}

/* The answer for rows [off, off + rows) of every output. */
static char *slice_answer(
    json_t *top, out_t *outs, size_t nout, const gw_v2_t *r, int64_t off)
{
    json_t *doc = json_deep_copy(top), *arr = json_array();
    char *text = NULL;

    for (size_t k = 0; doc != NULL && arr != NULL && k < nout; k++) {
        json_t *o = json_copy(outs[k].obj), *d = json_array();
        size_t from = (size_t)off * outs[k].t.inner;
        size_t to = from + (size_t)r->rows * outs[k].t.inner;
        for (size_t e = from; d != NULL && e < to; e++)
            json_array_append(d, json_array_get(outs[k].data, e));
        json_object_set_new(o, "shape", shape_json(&outs[k].t, r->rows));
        json_object_set_new(o, "data", d);
        json_array_append_new(arr, o);
    }
    if (doc != NULL && arr != NULL) {
        json_object_set(doc, "outputs", arr);
        if (r->id != NULL)
            json_object_set(doc, "id", r->id);
        else
            json_object_del(doc, "id");
        text = json_dumps(doc, JSON_COMPACT);
    }
    json_decref(arr);
    json_decref(doc);
    return text;
}

static int split_doc(json_t *doc,
                     gw_v2_t *const *reqs,
                     size_t n,
                     char **bodies,
                     size_t *lens,
                     crater_error_t *err)
{
    json_t *outs = json_object_get(doc, "outputs"), *top;
    size_t nout = json_array_size(outs);
    int64_t total = 0, off = 0;
    out_t *o;
    int rc = 0;

    if (!json_is_object(doc) || !json_is_array(outs) || nout == 0)
        return fail(err,
                    CRATER_ETYPE,
                    "outputs",
                    "the answer has no outputs array");
    for (size_t i = 0; i < n; i++)
        total += reqs[i]->rows;
    o = calloc(nout, sizeof(*o));
    top = json_copy(doc);
    if (o == NULL || top == NULL)
        rc = crater_errorf(err, CRATER_ENOMEM, "out of memory");
    for (size_t k = 0; rc == 0 && k < nout; k++)
        rc = check_output(&o[k], json_array_get(outs, k), k, total, err);
    if (top != NULL)
        json_object_del(top, "outputs");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        bodies[i] = slice_answer(top, o, nout, reqs[i], off);
        off += reqs[i]->rows;
        if (bodies[i] == NULL) {
            for (size_t j = 0; j < i; j++)
                free(bodies[j]);
            rc = crater_errorf(err, CRATER_ENOMEM, "out of memory");
        } else {
            lens[i] = strlen(bodies[i]);
        }
    }
    for (size_t k = 0; o != NULL && k < nout; k++)
        json_decref(o[k].data);
    free(o);
    json_decref(top);
    return rc;
}

int gw__v2_split(const char *answer,
                 size_t len,
                 gw_v2_t *const *reqs,
                 size_t n,
                 char **bodies,
                 size_t *lens,
                 crater_error_t *err)
{
    json_error_t jerr;
    json_t *doc = json_loadb(answer, len, 0, &jerr);
    int rc;

    if (doc == NULL)
        return fail(err,
                    CRATER_EPARSE,
                    "answer",
                    "the backend's answer is not JSON: %s",
                    jerr.text);
    rc = split_doc(doc, reqs, n, bodies, lens, err);
    json_decref(doc);
    return rc;
}
