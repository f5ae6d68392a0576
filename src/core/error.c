/* error.c - crater_error_t helpers and the errno table lookups.
 *
 * Messages longer than 160 characters are truncated with "..." rather than
 * cut silently, so a user can tell that there was more.
 */
#include "crater/error.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int status;
    const char *desc;
} errtab[] = {
#define ERRTAB_ROW(name, status, desc) {#name, status, desc},
    CRATER_ERRNO_MAP(ERRTAB_ROW)
#undef ERRTAB_ROW
};

static void copy_trunc(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);

    if (n < size) {
        memcpy(dst, src, n + 1);
        return;
    }
    memcpy(dst, src, size - 4);
    memcpy(dst + size - 4, "...", 4);
}

int crater_verrorf(crater_error_t *err,
                   crater_errno_t errnum,
                   const char *field,
                   const char *fmt,
                   va_list ap)
{
    char buf[CRATER_ERROR_TEXT + 1];

    if (!err)
        return -1;
    vsnprintf(buf, sizeof(buf), fmt, ap);
    err->errnum = errnum;
    copy_trunc(err->text, sizeof(err->text), buf);
    copy_trunc(err->field, sizeof(err->field), field ? field : "");
    return -1;
}

int crater_errorf(crater_error_t *err,
                  crater_errno_t errnum,
                  const char *fmt,
                  ...)
{
    va_list ap;

    va_start(ap, fmt);
    crater_verrorf(err, errnum, NULL, fmt, ap);
    va_end(ap);
    return -1;
}

int crater_errorf_field(crater_error_t *err,
                        crater_errno_t errnum,
                        const char *field,
                        const char *fmt,
                        ...)
{
    va_list ap;

    va_start(ap, fmt);
    crater_verrorf(err, errnum, field, fmt, ap);
    va_end(ap);
    return -1;
}

void crater_error_clear(crater_error_t *err)
{
    if (!err)
        return;
    err->errnum = CRATER_OK;
    err->text[0] = '\0';
    err->field[0] = '\0';
}

static int valid(crater_errno_t errnum)
{
    return (int)errnum >= 0 && errnum < CRATER_ERRNO_MAX;
}

const char *crater_errno_name(crater_errno_t errnum)
{
    return valid(errnum) ? errtab[errnum].name : "EUNKNOWN";
}

int crater_errno_http_status(crater_errno_t errnum)
{
    return valid(errnum) ? errtab[errnum].status : 500;
}

const char *crater_errno_desc(crater_errno_t errnum)
{
    return valid(errnum) ? errtab[errnum].desc : "unknown error";
}
