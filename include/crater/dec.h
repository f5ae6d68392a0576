/* dec.h - strict decoding of a jansson tree into C structs, with errors
 * that name the field path and, for files, the line.
 *
 * A decoder walks one document root. Objects are decoded against a table
 * of fields; a key not in the table is an error with a "did you mean"
 * suggestion ("unknown field 'resourses' (did you mean 'resources'?)").
 * Each typed helper checks the JSON type, range and units and reports
 * "file.yaml:12:7: resources.gpu.memory: '20GB/s': 'GB/s' is a bandwidth
 * unit, expected a memory size". err->field receives the path.
 *
 * The decoder holds borrowed pointers only; it allocates nothing itself.
 * Helpers that store strings (crater_dec_str and friends) free the old
 * value at *out and store a malloc'd copy the caller owns.
 */
#ifndef CRATER_DEC_H
#define CRATER_DEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crater/doc.h"
#include "crater/error.h"
#include "crater/units.h"

typedef struct crater_dec {
    const crater_doc_t *doc; /* may be NULL: no line numbers */
    size_t docidx;
    crater_error_t *err;
    char path[CRATER_PATH_MAX];
    size_t len;
} crater_dec_t;

void crater_dec_init(crater_dec_t *d,
                     const crater_doc_t *doc,
                     size_t docidx,
                     crater_error_t *err);

/* Path stack. push returns a mark to give back to crater_dec_pop(). */
size_t crater_dec_push_key(crater_dec_t *d, const char *key);
size_t crater_dec_push_index(crater_dec_t *d, size_t index);
void crater_dec_pop(crater_dec_t *d, size_t mark);

/* Fail at the current path: "name:line:col: path: message". Returns -1. */
int crater_dec_fail(crater_dec_t *d,
                    crater_errno_t errnum,
                    const char *fmt,
                    ...) __attribute__((format(printf, 3, 4)));

/* "a string", "a number", ... for messages. */
const char *crater_dec_typename(const json_t *v);

typedef int (*crater_dec_field_f)(crater_dec_t *d, json_t *v, void *obj);

enum {
    CRATER_FIELD_REQUIRED = 1
};

typedef struct crater_dec_field {
    const char *name;
    crater_dec_field_f fn;
    unsigned flags;
} crater_dec_field_t;

/* Decode object v against fields (terminated by a {NULL} row): for each
 * key call its fn with the path extended by the key. Unknown keys and
 * missing required keys are errors. Stops at the first error. */
int crater_dec_object(crater_dec_t *d,
                      json_t *v,
                      const crater_dec_field_t *fields,
                      void *obj);

/* Call fn(d, element, obj, index) for each element of array v with the
 * path extended by [i]. At most max elements. */
typedef int (*crater_dec_elem_f)(crater_dec_t *d,
                                 json_t *v,
                                 void *obj,
                                 size_t index);
int crater_dec_array(
    crater_dec_t *d, json_t *v, size_t max, crater_dec_elem_f fn, void *obj);

/* Typed helpers; all check the JSON type first. */
int crater_dec_str(crater_dec_t *d, json_t *v, size_t maxlen, char **out);
int crater_dec_bool(crater_dec_t *d, json_t *v, bool *out);
int crater_dec_uint(
    crater_dec_t *d, json_t *v, uint64_t min, uint64_t max, uint64_t *out);
/* crater_dec_uint into a uint32_t (max must fit). */
int crater_dec_u32(
    crater_dec_t *d, json_t *v, uint32_t min, uint32_t max, uint32_t *out);
int crater_dec_int(
    crater_dec_t *d, json_t *v, int64_t min, int64_t max, int64_t *out);
int crater_dec_double(
    crater_dec_t *d, json_t *v, double min, double max, double *out);
/* A quantity: a string with units, or a number meaning the dimension's
 * bare unit (bytes, cores, seconds, ops; bandwidth needs a unit). */
int crater_dec_quantity(crater_dec_t *d,
                        json_t *v,
                        crater_dim_t dim,
                        uint64_t *out);
/* A byte size a person writes (a job's memory): a string needs a unit, and
 * so does a YAML number ("'512' has no unit: write 512Mi or 512M"); 0 is
 * fine. A JSON number (no source literal: JSON input, the normalised spec,
 * a tree built in memory) is a count of bytes, as crater_dec_quantity. */
int crater_dec_size(crater_dec_t *d, json_t *v, uint64_t *out);
/* One of names[0..n-1] (case-sensitive); the error lists them. */
int crater_dec_enum(
    crater_dec_t *d, json_t *v, const char *const *names, size_t n, int *out);
/* A string or a list of strings. *out is a NULL-terminated array the
 * caller frees with crater_strv_free(); previous value freed. */
int crater_dec_strv(crater_dec_t *d,
                    json_t *v,
                    size_t maxn,
                    size_t maxlen,
                    char ***out,
                    size_t *n);
/* A header field such as apiVersion or kind: v must be the string want.
 * "'crater/v2' is not supported here (expected crater/v1)". */
int crater_dec_literal(crater_dec_t *d, json_t *v, const char *want);

/* The literal text of a scalar (number as written, or string). Borrowed. */
const char *crater_dec_text(crater_dec_t *d, json_t *v, char *buf, size_t size);

/* Label and taint keys (nodes, nodeSelector, tolerations): 1-253 of
 * letters, digits and - _ . / (Kubernetes' character set). */
#define CRATER_LABEL_KEY_MAX 253
bool crater_label_key_ok(const char *s);

void crater_strv_free(char **v);
size_t crater_strv_len(char *const *v);
/* Deep copy; NULL in, NULL out. NULL on allocation failure too (check
 * the input to tell them apart). */
char **crater_strv_dup(char *const *v);

/* Levenshtein distance, capped at 255; for suggestions. */
unsigned crater_edit_distance(const char *a, const char *b);

#endif /* CRATER_DEC_H */
