/* ckerr.c - crater__ckpt_errorf (ckerr.h). */
#include "ckpt/ckerr.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int crater__ckpt_errorf(crater_error_t *err,
                        crater_errno_t errnum,
                        const char *fmt,
                        ...)
{
    va_list ap;
    int n;

    if (!err)
        return -1;
    err->errnum = errnum;
    err->field[0] = '\0';
    va_start(ap, fmt);
    n = vsnprintf(err->text, sizeof(err->text), fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof(err->text))
        memcpy(err->text + sizeof(err->text) - 4, "...", 4);
    return -1;
}
