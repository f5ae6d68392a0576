/* error.h - Crater's one error type and its error-number table.
 *
 * Functions that can fail return -1 (or NULL) and fill a caller-supplied
 * crater_error_t. crater_errorf() always returns -1 so a failure path is one
 * line:   return crater_errorf(err, CRATER_EUNIT, "unknown unit '%s'", u);
 * The error pointer may be NULL when the caller does not care. A function
 * that fails has no other side effect unless its header says otherwise.
 *
 * CRATER_ERRNO_MAP is the single table from error number to name and HTTP
 * status; the REST API and the CLI both read it.
 */
#ifndef CRATER_ERROR_H
#define CRATER_ERROR_H

#include <stdarg.h>

/* X(name, http_status, description) */
#define CRATER_ERRNO_MAP(X)                               \
    X(OK, 200, "success")                                 \
    X(EINVAL, 400, "invalid argument")                    \
    X(EPARSE, 400, "syntax error")                        \
    X(ETYPE, 400, "wrong type")                           \
    X(EFIELD, 400, "unknown field")                       \
    X(EMISSING, 400, "missing required field")            \
    X(EUNIT, 400, "bad quantity")                         \
    X(ERANGE, 400, "value out of range")                  \
    X(ECONFLICT, 400, "contradictory fields")             \
    X(EIMPOSSIBLE, 422, "request can never be satisfied") \
    X(ELIMIT, 413, "size limit exceeded")                 \
    X(EAUTH, 401, "not authenticated")                    \
    X(EPERM, 403, "permission denied")                    \
    X(ENOENT, 404, "not found")                           \
    X(EEXIST, 409, "already exists")                      \
    X(ESTALE, 409, "revision mismatch")                   \
    X(EUNSCHED, 409, "unschedulable")                     \
    X(ENOMEM, 500, "out of memory")                       \
    X(EIO, 500, "input/output error")                     \
    X(EINTERNAL, 500, "internal error")                   \
    X(EUNAVAIL, 503, "service unavailable")               \
    X(ERATE, 429, "too many requests")

typedef enum crater_errno {
#define CRATER__ERRNO_ENUM(name, status, desc) CRATER_##name,
    CRATER_ERRNO_MAP(CRATER__ERRNO_ENUM)
#undef CRATER__ERRNO_ENUM
    CRATER_ERRNO_MAX
} crater_errno_t;

#define CRATER_ERROR_TEXT 1024 /* explanations over many nodes stay whole */
#define CRATER_ERROR_FIELD 96

typedef struct crater_error {
    crater_errno_t errnum;
    char text[CRATER_ERROR_TEXT];   /* human message, always NUL-terminated */
    char field[CRATER_ERROR_FIELD]; /* field path ("resources.gpu.memory")
                                       or "" when no single field is at fault */
} crater_error_t;

/* Fill err (if not NULL) and return -1. field is left empty. */
int crater_errorf(crater_error_t *err,
                  crater_errno_t errnum,
                  const char *fmt,
                  ...) __attribute__((format(printf, 3, 4)));

/* As crater_errorf, naming the field at fault (may be NULL). */
int crater_errorf_field(crater_error_t *err,
                        crater_errno_t errnum,
                        const char *field,
                        const char *fmt,
                        ...) __attribute__((format(printf, 4, 5)));

int crater_verrorf(crater_error_t *err,
                   crater_errno_t errnum,
                   const char *field,
                   const char *fmt,
                   va_list ap);

/* Reset err to CRATER_OK with empty text. NULL is accepted. */
void crater_error_clear(crater_error_t *err);

/* "EUNIT"; "EUNKNOWN" for out-of-range numbers. Static strings. */
const char *crater_errno_name(crater_errno_t errnum);
/* HTTP status for errnum; 500 for out-of-range numbers. */
int crater_errno_http_status(crater_errno_t errnum);
/* Short description ("bad quantity"). Static string. */
const char *crater_errno_desc(crater_errno_t errnum);

#endif /* CRATER_ERROR_H */
