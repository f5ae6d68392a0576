/* load.c - loading and verifying checkpoints (crater/ckpt.h).
 *
 * A checkpoint loads only when its manifest parses (its checksum line
 * matches) and every chunk file has the listed length and SHA-256. Any
 * failure moves crater_ckpt_load_latest() on to the next older
 * checkpoint, so damage to the newest one costs one interval, not the
 * job. Loading reads every byte once: hashing is cheaper than the disk.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckerr.h"
#include "ckpt/dirs.h"
#include "ckpt/fsio.h"
#include "ckpt/internal.h"
#include "ckpt/sha256.h"

struct crater_ckpt_state {
    crater__ckpt_manifest_t m;
    crater_ckpt_entry_t *entries; /* names point into m; data owned */
};

int crater__ckpt_read_manifest(crater_ckpt_t *ck,
                               const char *dirname,
                               crater__ckpt_manifest_t *m,
                               crater_error_t *err)
{
    char path[300], *text;
    size_t len;
    int rc;
    crater_error_t perr;

    snprintf(path, sizeof(path), "%s/MANIFEST", dirname);
    if (crater__ckpt_read_file(ck->dfd,
                               path,
                               CRATER__CKPT_MANIFEST_MAX,
                               &text,
                               &len)
        < 0)
        return crater__ckpt_errorf(err,
                                   errno == ENOENT   ? CRATER_ENOENT
                                   : errno == EFBIG  ? CRATER_EPARSE
                                   : errno == ENOMEM ? CRATER_ENOMEM
                                                     : CRATER_EIO,
                                   "%s: %s",
                                   path,
                                   strerror(errno));
    rc = crater__ckpt_manifest_parse(text, len, m, &perr);
    free(text);
    if (rc < 0)
        crater__ckpt_errorf(err, perr.errnum, "%s: %s", path, perr.text);
    return rc;
}

static int read_chunk(crater_ckpt_t *ck,
                      const crater__ckpt_chunk_t *ch,
                      char *dst,
                      crater_error_t *err)
{
    int fd = openat(ck->cfd, ch->hex, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat sb;
    size_t got = 0;
    char hex[CRATER_CKPT_HASH_HEX];

    if (fd < 0)
        return crater__ckpt_errorf(err,
                                   CRATER_EIO,
                                   "chunk %.12s: %s",
                                   ch->hex,
                                   strerror(errno));
    if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size != ch->len) {
        close(fd);
        return crater__ckpt_errorf(err,
                                   CRATER_EIO,
                                   "chunk %.12s: wrong size",
                                   ch->hex);
    }
    while (got < ch->len) {
        ssize_t r = read(fd, dst + got, ch->len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    crater_ckpt_sha256_hex(dst, ch->len, hex);
    if (got != ch->len || memcmp(hex, ch->hex, 64))
        return crater__ckpt_errorf(err,
                                   CRATER_EIO,
                                   "chunk %.12s: hash mismatch",
                                   ch->hex);
    return 0;
}

static int load_entry(crater_ckpt_t *ck,
                      crater_ckpt_state_t *st,
                      size_t i,
                      crater_error_t *err)
{
    const crater__ckpt_mentry_t *me = &st->m.entries[i];
    crater_ckpt_entry_t *e = &st->entries[i];
    char *data;
    uint64_t off = 0;

    if (me->size > SIZE_MAX - 1 || !(data = malloc((size_t)me->size + 1)))
        return crater__ckpt_errorf(err, CRATER_ENOMEM, "out of memory");
    e->name = me->name, e->data = data, e->size = (size_t)me->size;
    for (size_t k = 0; k < me->nchunks; k++) {
        const crater__ckpt_chunk_t *ch = &st->m.chunks[me->first + k];
        if (read_chunk(ck, ch, data + off, err) < 0)
            return -1;
        off += ch->len;
    }
    return 0;
}

static crater_ckpt_state_t *load_dir(crater_ckpt_t *ck,
                                     const char *name,
                                     crater_error_t *err)
{
    crater_ckpt_state_t *st = calloc(1, sizeof(*st));

    if (!st) {
        crater__ckpt_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    if (crater__ckpt_read_manifest(ck, name, &st->m, err) < 0) {
        free(st);
        return NULL;
    }
    st->entries = calloc(st->m.nentries + 1, sizeof(*st->entries));
    if (!st->entries)
        crater__ckpt_errorf(err, CRATER_ENOMEM, "out of memory");
    for (size_t i = 0; st->entries && i < st->m.nentries; i++)
        if (load_entry(ck, st, i, err) < 0) {
            crater_ckpt_state_destroy(st);
            return NULL;
        }
    if (!st->entries) {
        crater_ckpt_state_destroy(st);
        return NULL;
    }
    return st;
}

/* Try committed checkpoints newest first; want < 0: any step. */
static crater_ckpt_state_t *load_first(crater_ckpt_t *ck,
                                       int64_t want,
                                       crater_error_t *err)
{
    crater__ckpt_dirent_t *v;
    crater_ckpt_state_t *st = NULL;
    crater_error_t first = {.errnum = CRATER_ENOENT};
    size_t n, tried = 0;

    if (crater__ckpt_list_dirs(ck->dfd, &v, &n) < 0) {
        crater__ckpt_errorf(err,
                            CRATER_EIO,
                            "%s: %s",
                            ck->dir,
                            strerror(errno));
        return NULL;
    }
    for (size_t i = 0; i < n && !st; i++) {
        if (v[i].kind == CRATER__CKPT_TMP
            || (want >= 0 && v[i].step != (uint64_t)want))
            continue;
        st = load_dir(ck, v[i].name, tried++ ? NULL : &first);
    }
    free(v);
    if (!st && !tried)
        crater__ckpt_errorf(err, CRATER_ENOENT, "%s: no checkpoint", ck->dir);
    else if (!st)
        crater__ckpt_errorf(err,
                            CRATER_EIO,
                            "%s: no loadable checkpoint (%zu damaged; newest: "
                            "%s)",
                            ck->dir,
                            tried,
                            first.text);
    return st;
}

static crater_ckpt_state_t *load_locked(crater_ckpt_t *ck,
                                        int64_t want,
                                        crater_error_t *err)
{
    crater_ckpt_state_t *st;

    if (crater__ckpt_lock(ck, LOCK_SH, err) < 0)
        return NULL;
    st = load_first(ck, want, err);
    crater__ckpt_unlock(ck);
    return st;
}

crater_ckpt_state_t *crater_ckpt_load_latest(crater_ckpt_t *ck,
                                             crater_error_t *err)
{
    return load_locked(ck, -1, err);
}

crater_ckpt_state_t *crater_ckpt_load(crater_ckpt_t *ck,
                                      uint64_t step,
                                      crater_error_t *err)
{
    if (step > INT64_MAX) {
        crater__ckpt_errorf(err, CRATER_ERANGE, "step out of range");
        return NULL;
    }
    return load_locked(ck, (int64_t)step, err);
}

uint64_t crater_ckpt_state_step(const crater_ckpt_state_t *st)
{
    return st->m.step;
}

int64_t crater_ckpt_state_parent(const crater_ckpt_state_t *st)
{
    return st->m.parent;
}

const char *crater_ckpt_state_digest(const crater_ckpt_state_t *st)
{
    return st->m.digest;
}

size_t crater_ckpt_state_count(const crater_ckpt_state_t *st)
{
    return st->m.nentries;
}

const crater_ckpt_entry_t *crater_ckpt_state_entry(
    const crater_ckpt_state_t *st, size_t i)
{
    return i < st->m.nentries ? &st->entries[i] : NULL;
}

const crater_ckpt_entry_t *crater_ckpt_state_find(const crater_ckpt_state_t *st,
                                                  const char *name)
{
    for (size_t i = 0; i < st->m.nentries; i++)
        if (!strcmp(st->entries[i].name, name))
            return &st->entries[i];
    return NULL;
}

int crater_ckpt_state_write_files(const crater_ckpt_state_t *st,
                                  const char *dir,
                                  crater_error_t *err)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

    if (dfd < 0)
        return crater__ckpt_errorf(err,
                                   CRATER_EIO,
                                   "%s: %s",
                                   dir,
                                   strerror(errno));
    for (size_t i = 0; i < st->m.nentries && rc == 0; i++) {
        const crater_ckpt_entry_t *e = &st->entries[i];
        if (strchr(e->name, '/') || !strcmp(e->name, ".")
            || !strcmp(e->name, ".."))
            rc = crater__ckpt_errorf(err,
                                     CRATER_EINVAL,
                                     "entry '%s' is not a file name",
                                     e->name);
        else if (crater__ckpt_write_file(dfd, e->name, e->data, e->size, 0) < 0)
            rc = crater__ckpt_errorf(err,
                                     CRATER_EIO,
                                     "%s/%s: %s",
                                     dir,
                                     e->name,
                                     strerror(errno));
    }
    if (rc == 0 && crater__ckpt_fsync_dir(dfd, ".", 0) < 0)
        rc = crater__ckpt_errorf(err,
                                 CRATER_EIO,
                                 "fsync %s: %s",
                                 dir,
                                 strerror(errno));
    close(dfd);
    return rc;
}

void crater_ckpt_state_destroy(crater_ckpt_state_t *st)
{
    if (!st)
        return;
    for (size_t i = 0; st->entries && i < st->m.nentries; i++)
        free((void *)st->entries[i].data);
    free(st->entries);
    crater__ckpt_manifest_free(&st->m);
    free(st);
}
