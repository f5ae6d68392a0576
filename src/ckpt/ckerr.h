/* ckerr.h - filling crater_error_t inside libcrater-ckpt.
 *
 * The checkpoint library links nothing but libc, so it cannot call
 * crater_errorf() from libcrater; it fills the same crater_error_t (type
 * only, from crater/error.h) with this copy. Same contract: always
 * returns -1, err may be NULL, long texts end in "...".
 */
#ifndef CRATER_CKPT_CKERR_H
#define CRATER_CKPT_CKERR_H

#include "crater/error.h"

int crater__ckpt_errorf(crater_error_t *err,
                        crater_errno_t errnum,
                        const char *fmt,
                        ...) __attribute__((format(printf, 3, 4)));

#endif /* CRATER_CKPT_CKERR_H */
