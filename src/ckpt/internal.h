/* internal.h - the checkpoint handle, shared by ckpt.c, load.c and gc.c. */
#ifndef CRATER_CKPT_INTERNAL_H
#define CRATER_CKPT_INTERNAL_H

#include "ckpt/manifest.h"
#include "crater/ckpt.h"

struct crater_ckpt {
    char *dir;
    int dfd; /* the checkpoint directory */
    int cfd; /* its chunks/ */
    int lockfd;
    crater_ckpt_opts_t opts;
};

/* flock the directory's .lock: LOCK_EX to save or collect, LOCK_SH to
 * load. Released by crater__ckpt_unlock or by the process dying. */
int crater__ckpt_lock(crater_ckpt_t *ck, int how, crater_error_t *err);
void crater__ckpt_unlock(crater_ckpt_t *ck);

/* Read and parse dirname/MANIFEST. Errors: CRATER_ENOENT (no manifest),
 * CRATER_EPARSE (damaged), CRATER_EIO / CRATER_ENOMEM (could not read). */
int crater__ckpt_read_manifest(crater_ckpt_t *ck,
                               const char *dirname,
                               crater__ckpt_manifest_t *m,
                               crater_error_t *err);

/* Remove what dead saves left: step-*.tmp-* directories, *.tmp-* files
 * in the directory and in chunks/. Call with the lock held (LOCK_EX). */
int crater__ckpt_sweep(crater_ckpt_t *ck, crater_error_t *err);
int crater__ckpt_gc_locked(crater_ckpt_t *ck,
                           unsigned keep_last,
                           crater_error_t *err);

#endif /* CRATER_CKPT_INTERNAL_H */
