/* gc.c - keep_last and chunk collection (crater/ckpt.h).
 *
 * Collection runs under the exclusive lock, so no save is in progress:
 * every *.tmp-* it finds belongs to a writer that died and is removed
 * (the sweep). It then decides which checkpoints stay (the keep_last
 * newest whose manifest parses; a step saved twice counts once), removes
 * the others and fsyncs the directory, and only then reads the surviving
 * manifests and deletes the chunks none of them lists.
 *
 * Why a crash cannot lose a kept checkpoint: chunks are deleted only
 * after the manifests that stay have been read, and a kept manifest is
 * never touched. A manifest that could not be read for a reason other
 * than damage (EIO, ENOMEM) stops the collection before any chunk is
 * deleted, because its references would be unknown.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "ckpt/ckerr.h"
#include "ckpt/dirs.h"
#include "ckpt/fsio.h"
#include "ckpt/internal.h"

typedef struct live {
    char (*hex)[CRATER_CKPT_HASH_HEX];
    size_t n, cap;
} live_t;

static int sys_error(crater_error_t *err, const char *what, const char *name)
{
    return crater__ckpt_errorf(err,
                               CRATER_EIO,
                               "%s %s: %s",
                               what,
                               name,
                               strerror(errno));
}

/* Remove every name containing ".tmp-" in the directory fd. */
static int sweep_dir(int fd, crater_error_t *err)
{
    int dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
    struct dirent *de;
    int rc = 0;

    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return sys_error(err, "open", "directory");
    }
    while (rc == 0 && (de = readdir(d)))
        if (strstr(de->d_name, ".tmp-")
            && crater__ckpt_remove(fd, de->d_name) < 0)
            rc = sys_error(err, "remove", de->d_name);
    closedir(d);
    return rc;
}

int crater__ckpt_sweep(crater_ckpt_t *ck, crater_error_t *err)
{
    if (sweep_dir(ck->dfd, err) < 0 || sweep_dir(ck->cfd, err) < 0)
        return -1;
    return 0;
}

static int live_add(live_t *l, const crater__ckpt_manifest_t *m)
{
    for (size_t i = 0; i < m->nchunks; i++) {
        if (l->n == l->cap) {
            size_t nc = l->cap ? l->cap * 2 : 256;
            void *nv = realloc(l->hex, nc * sizeof(*l->hex));
            if (!nv)
                return -1;
            l->hex = nv, l->cap = nc;
        }
        memcpy(l->hex[l->n++], m->chunks[i].hex, CRATER_CKPT_HASH_HEX);
    }
    return 0;
}

static int cmp_hex(const void *a, const void *b)
{
    return memcmp(a, b, CRATER_CKPT_HASH_HEX - 1);
}

/* Decide for one committed directory: keep (its chunks join live) or
 * remove. *kept counts distinct kept steps; *last is the last kept step. */
static int judge(crater_ckpt_t *ck,
                 const crater__ckpt_dirent_t *e,
                 unsigned keep_last,
                 unsigned *kept,
                 int64_t *last,
                 live_t *live,
                 crater_error_t *err)
{
    crater__ckpt_manifest_t m;
    crater_error_t merr;
    int keep;

    if (crater__ckpt_read_manifest(ck, e->name, &m, &merr) < 0) {
        if (merr.errnum != CRATER_EPARSE && merr.errnum != CRATER_ENOENT)
            return crater__ckpt_errorf(err,
                                       merr.errnum,
                                       "collection stopped: %s",
                                       merr.text);
        return crater__ckpt_remove(ck->dfd, e->name) < 0
                   ? sys_error(err, "remove", e->name)
                   : 0;
    }
    keep = (int64_t)e->step != *last && (!keep_last || *kept < keep_last);
    if (keep) {
        (*kept)++, *last = (int64_t)e->step;
        if (live_add(live, &m) < 0)
            keep = -1;
    }
    crater__ckpt_manifest_free(&m);
    if (keep < 0)
        return crater__ckpt_errorf(err, CRATER_ENOMEM, "out of memory");
    if (!keep && crater__ckpt_remove(ck->dfd, e->name) < 0)
        return sys_error(err, "remove", e->name);
    return 0;
}

static int drop_checkpoints(crater_ckpt_t *ck,
                            unsigned keep_last,
                            live_t *live,
                            crater_error_t *err)
{
    crater__ckpt_dirent_t *v;
    size_t n;
    unsigned kept = 0;
    int64_t last = -1;
    int rc = 0;

    if (crater__ckpt_list_dirs(ck->dfd, &v, &n) < 0)
        return sys_error(err, "list", ck->dir);
    for (size_t i = 0; i < n && rc == 0; i++)
        if (v[i].kind != CRATER__CKPT_TMP)
            rc = judge(ck, &v[i], keep_last, &kept, &last, live, err);
    free(v);
    if (rc == 0 && crater__ckpt_fsync_dir(ck->dfd, ".", ck->opts.no_fsync) < 0)
        rc = sys_error(err, "fsync", ck->dir);
    return rc;
}

static int is_chunk_name(const char *s)
{
    size_t n = strlen(s);

    return n == 64 && strspn(s, "0123456789abcdef") == 64;
}

static int drop_chunks(crater_ckpt_t *ck, live_t *live, crater_error_t *err)
{
    int fd = openat(ck->cfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    struct dirent *de;
    int rc = 0, removed = 0;

    if (!d) {
        if (fd >= 0)
            close(fd);
        return sys_error(err, "open", "chunks");
    }
    while (rc == 0 && (de = readdir(d))) {
        if (!is_chunk_name(de->d_name)
            || bsearch(de->d_name,
                       live->hex,
                       live->n,
                       sizeof(*live->hex),
                       cmp_hex))
            continue;
        if (crater__ckpt_remove(ck->cfd, de->d_name) < 0)
            rc = sys_error(err, "remove chunk", de->d_name);
        removed++;
    }
    closedir(d);
    if (rc == 0 && removed
        && crater__ckpt_fsync_dir(ck->cfd, ".", ck->opts.no_fsync) < 0)
        rc = sys_error(err, "fsync", "chunks");
    return rc;
}

int crater__ckpt_gc_locked(crater_ckpt_t *ck,
                           unsigned keep_last,
                           crater_error_t *err)
{
    live_t live = {0};
    int rc = crater__ckpt_sweep(ck, err);

    if (rc == 0)
        rc = drop_checkpoints(ck, keep_last, &live, err);
    if (rc == 0 && live.n)
        qsort(live.hex, live.n, sizeof(*live.hex), cmp_hex);
    if (rc == 0)
        rc = drop_chunks(ck, &live, err);
    free(live.hex);
    return rc;
}

int crater_ckpt_gc(crater_ckpt_t *ck, unsigned keep_last, crater_error_t *err)
{
    int rc;

    if (crater__ckpt_lock(ck, LOCK_EX, err) < 0)
        return -1;
    rc = crater__ckpt_gc_locked(ck, keep_last, err);
    crater__ckpt_unlock(ck);
    return rc;
}

int crater_ckpt_list(crater_ckpt_t *ck,
                     uint64_t *steps,
                     size_t max,
                     crater_error_t *err)
{
    crater__ckpt_dirent_t *v;
    size_t n, k = 0;
    int64_t last = -1;

    if (crater__ckpt_list_dirs(ck->dfd, &v, &n) < 0)
        return sys_error(err, "list", ck->dir);
    for (size_t i = 0; i < n; i++) {
        if (v[i].kind == CRATER__CKPT_TMP || (int64_t)v[i].step == last)
            continue;
        last = (int64_t)v[i].step;
        if (k < max)
            steps[k] = v[i].step;
        k++;
    }
    free(v);
    return (int)k;
}
