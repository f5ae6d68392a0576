/* ckpt.c - opening a checkpoint directory and saving (crater/ckpt.h).
 *
 * The order of a save is the whole crash-safety argument
 * (doc/checkpoint.md "Why a crash cannot lose both"):
 *
 *   1. each chunk not yet in chunks/ is written to chunks/<h>.tmp-<pid>,
 *      fsynced and renamed to chunks/<h>; then chunks/ is fsynced. A
 *      chunk name therefore only ever names complete, durable content.
 *   2. the manifest is written and fsynced in step-N.tmp-<pid>/, and that
 *      directory is fsynced. Nothing reads .tmp- directories.
 *   3. an existing step-N (a second save of a step) is renamed to
 *      step-N.old-<pid>, which loads like step-N until it is removed.
 *   4. step-N.tmp-<pid> is renamed to step-N and the parent is fsynced:
 *      the commit point. Before it, the old checkpoints are untouched;
 *      after it, the new one is complete on disk.
 *   5. LATEST is replaced by rename (write, fsync, rename, fsync parent).
 *
 * Chunks already present are not written again, which is what makes a
 * save after a small change cheap. The exclusive lock keeps collection
 * (gc.c) from running while a save relies on chunks it found.
 */
#include "crater/ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/ckerr.h"
#include "ckpt/dirs.h"
#include "ckpt/fsio.h"
#include "ckpt/internal.h"
#include "ckpt/sha256.h"

static int sys_error(crater_error_t *err, const char *what, const char *path)
{
    return crater__ckpt_errorf(err,
                               errno == ENOMEM ? CRATER_ENOMEM : CRATER_EIO,
                               "%s %s: %s",
                               what,
                               path,
                               strerror(errno));
}

static int open_dirs(crater_ckpt_t *ck, crater_error_t *err)
{
    if (mkdir(ck->dir, 0755) < 0 && errno != EEXIST)
        return sys_error(err, "mkdir", ck->dir);
    ck->dfd = open(ck->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ck->dfd < 0)
        return sys_error(err, "open", ck->dir);
    if (mkdirat(ck->dfd, "chunks", 0755) < 0 && errno != EEXIST)
        return sys_error(err, "mkdir", "chunks");
    ck->cfd = openat(ck->dfd, "chunks", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ck->cfd < 0)
        return sys_error(err, "open", "chunks");
    return 0;
}

crater_ckpt_t *crater_ckpt_open(const char *dir,
                                const crater_ckpt_opts_t *opts,
                                crater_error_t *err)
{
    crater_ckpt_t *ck = calloc(1, sizeof(*ck));

    if (!ck || !(ck->dir = strdup(dir))) {
        free(ck);
        crater__ckpt_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    ck->dfd = ck->cfd = ck->lockfd = -1;
    if (opts)
        ck->opts = *opts;
    if (!ck->opts.chunk_size)
        ck->opts.chunk_size = CRATER_CKPT_CHUNK_DEFAULT;
    if (ck->opts.chunk_size > (1u << 30)) {
        crater__ckpt_errorf(err, CRATER_ERANGE, "chunk size over 1 GiB");
        crater_ckpt_close(ck);
        return NULL;
    }
    if (open_dirs(ck, err) < 0) {
        crater_ckpt_close(ck);
        return NULL;
    }
    return ck;
}

void crater_ckpt_close(crater_ckpt_t *ck)
{
    if (!ck)
        return;
    if (ck->lockfd >= 0)
        close(ck->lockfd);
    if (ck->cfd >= 0)
        close(ck->cfd);
    if (ck->dfd >= 0)
        close(ck->dfd);
    free(ck->dir);
    free(ck);
}

int crater__ckpt_lock(crater_ckpt_t *ck, int how, crater_error_t *err)
{
    if (ck->lockfd < 0)
        ck->lockfd =
            openat(ck->dfd, ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (ck->lockfd < 0 && how == LOCK_SH)
        return 0; /* a read-only directory: load without the lock */
    if (ck->lockfd < 0)
        return sys_error(err, "open", ".lock");
    while (flock(ck->lockfd, how) < 0)
        if (errno != EINTR)
            return sys_error(err, "flock", ".lock");
    return 0;
}

void crater__ckpt_unlock(crater_ckpt_t *ck)
{
    if (ck->lockfd >= 0)
        flock(ck->lockfd, LOCK_UN);
}

static int check_entries(const crater_ckpt_entry_t *e,
                         size_t n,
                         crater_error_t *err)
{
    if (n > CRATER__CKPT_ENTRIES_MAX)
        return crater__ckpt_errorf(err, CRATER_ELIMIT, "too many entries");
    for (size_t i = 0; i < n; i++) {
        size_t len = e[i].name ? strlen(e[i].name) : 0;
        if (len == 0 || len > CRATER_CKPT_NAME_MAX)
            return crater__ckpt_errorf(err,
                                       CRATER_EINVAL,
                                       "entry %zu: name empty or too long",
                                       i);
        if (e[i].size && !e[i].data)
            return crater__ckpt_errorf(err,
                                       CRATER_EINVAL,
                                       "entry '%s': no data",
                                       e[i].name);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(e[i].name, e[j].name))
                return crater__ckpt_errorf(err,
                                           CRATER_EINVAL,
                                           "entry '%s' twice",
                                           e[i].name);
    }
    return 0;
}

/* Write one chunk unless chunks/ has it already. */
static int put_chunk(crater_ckpt_t *ck,
                     crater__ckpt_chunk_t *ch,
                     const void *data,
                     crater_ckpt_stats_t *st,
                     crater_error_t *err)
{
    struct stat sb;

    crater_ckpt_sha256_hex(data, ch->len, ch->hex);
    st->chunks_total++;
    if (fstatat(ck->cfd, ch->hex, &sb, AT_SYMLINK_NOFOLLOW) == 0
        && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size == ch->len)
        return 0;
    if (crater__ckpt_write_file(ck->cfd,
                                ch->hex,
                                data,
                                ch->len,
                                ck->opts.no_fsync)
        < 0)
        return sys_error(err, "write chunk", ch->hex);
    st->chunks_written++;
    st->bytes_written += ch->len;
    return 0;
}

static int add_entry(crater_ckpt_t *ck,
                     crater__ckpt_manifest_t *m,
                     const crater_ckpt_entry_t *e,
                     crater_ckpt_stats_t *st,
                     crater_error_t *err)
{
    crater__ckpt_mentry_t *me = &m->entries[m->nentries];
    uint32_t cs = m->chunk_size;

    if (!(me->name = strdup(e->name)))
        return crater__ckpt_errorf(err, CRATER_ENOMEM, "out of memory");
    m->nentries++;
    me->size = e->size;
    me->first = m->nchunks;
    me->nchunks = (e->size + cs - 1) / cs;
    for (size_t k = 0; k < me->nchunks; k++) {
        crater__ckpt_chunk_t *ch = &m->chunks[m->nchunks++];
        uint64_t off = (uint64_t)k * cs;

        ch->len = (uint32_t)(e->size - off < cs ? e->size - off : cs);
        if (put_chunk(ck, ch, (const char *)e->data + off, st, err) < 0)
            return -1;
    }
    st->bytes_total += e->size;
    return 0;
}

/* The newest checkpoint older than step whose manifest parses; -1. */
static int64_t find_parent(crater_ckpt_t *ck, uint64_t step)
{
    crater__ckpt_dirent_t *v;
    size_t n;
    int64_t parent = -1;

    if (crater__ckpt_list_dirs(ck->dfd, &v, &n) < 0)
        return -1;
    for (size_t i = 0; i < n && parent < 0; i++) {
        crater__ckpt_manifest_t m;

        if (v[i].kind == CRATER__CKPT_TMP || v[i].step >= step
            || crater__ckpt_read_manifest(ck, v[i].name, &m, NULL) < 0)
            continue;
        parent = (int64_t)m.step;
        crater__ckpt_manifest_free(&m);
    }
    free(v);
    return parent;
}

static int build(crater_ckpt_t *ck,
                 crater__ckpt_manifest_t *m,
                 const crater_ckpt_entry_t *e,
                 size_t n,
                 crater_ckpt_stats_t *st,
                 crater_error_t *err)
{
    size_t total = 0;

    for (size_t i = 0; i < n; i++)
        total += (e[i].size + m->chunk_size - 1) / m->chunk_size;
    m->entries = calloc(n ? n : 1, sizeof(*m->entries));
    m->chunks = calloc(total ? total : 1, sizeof(*m->chunks));
    if (!m->entries || !m->chunks)
        return crater__ckpt_errorf(err, CRATER_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (add_entry(ck, m, &e[i], st, err) < 0)
            return -1;
    if (st->chunks_written
        && crater__ckpt_fsync_dir(ck->cfd, ".", ck->opts.no_fsync) < 0)
        return sys_error(err, "fsync", "chunks");
    return 0;
}

/* Steps 2: the manifest in step-N.tmp-<pid>/, fsynced with its dir. */
static int write_tmp(crater_ckpt_t *ck,
                     crater__ckpt_manifest_t *m,
                     const char *tmp,
                     crater_ckpt_stats_t *st,
                     crater_error_t *err)
{
    size_t len;
    char *text = crater__ckpt_manifest_encode(m, &len);
    int fd, rc = 0;

    if (!text)
        return crater__ckpt_errorf(err, CRATER_ENOMEM, "out of memory");
    st->manifest_bytes = len;
    memcpy(st->digest, m->digest, sizeof(st->digest));
    if (crater__ckpt_remove(ck->dfd, tmp) < 0
        || crater__ckpt_mkdir(ck->dfd, tmp) < 0) {
        free(text);
        return sys_error(err, "mkdir", tmp);
    }
    fd = openat(ck->dfd, tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0
        || crater__ckpt_write_file(fd, "MANIFEST", text, len, ck->opts.no_fsync)
               < 0
        || crater__ckpt_fsync_dir(fd, ".", ck->opts.no_fsync) < 0)
        rc = sys_error(err, "write manifest in", tmp);
    if (fd >= 0)
        close(fd);
    free(text);
    return rc;
}

/* Steps 3-5: commit by rename, then LATEST. */
static int commit(crater_ckpt_t *ck,
                  uint64_t step,
                  const char *tmp,
                  crater_error_t *err)
{
    char final[32], old[64], latest[40];
    struct stat sb;
    int had_old = 0;

    snprintf(final, sizeof(final), "step-%llu", (unsigned long long)step);
    snprintf(old, sizeof(old), "%s.old-%ld", final, (long)getpid());
    snprintf(latest, sizeof(latest), "%s\n", final);
    if (fstatat(ck->dfd, final, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
        if (crater__ckpt_remove(ck->dfd, old) < 0
            || crater__ckpt_rename(ck->dfd, final, old) < 0)
            return sys_error(err, "rename", final);
        had_old = 1;
    }
    if (crater__ckpt_rename(ck->dfd, tmp, final) < 0
        || crater__ckpt_fsync_dir(ck->dfd, ".", ck->opts.no_fsync) < 0)
        return sys_error(err, "commit", final);
    if (crater__ckpt_write_file(ck->dfd,
                                "LATEST",
                                latest,
                                strlen(latest),
                                ck->opts.no_fsync)
            < 0
        || crater__ckpt_fsync_dir(ck->dfd, ".", ck->opts.no_fsync) < 0)
        return sys_error(err, "update", "LATEST");
    if (had_old && crater__ckpt_remove(ck->dfd, old) < 0)
        return sys_error(err, "remove", old);
    return 0;
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int save_locked(crater_ckpt_t *ck,
                       uint64_t step,
                       const crater_ckpt_entry_t *e,
                       size_t n,
                       crater_ckpt_stats_t *st,
                       crater_error_t *err)
{
    crater__ckpt_manifest_t m = {.step = step,
                                 .chunk_size = ck->opts.chunk_size};
    char tmp[64];
    int rc;

    snprintf(tmp,
             sizeof(tmp),
             "step-%llu.tmp-%ld",
             (unsigned long long)step,
             (long)getpid());
    m.parent = st->parent = find_parent(ck, step);
    rc = build(ck, &m, e, n, st, err);
    if (rc == 0)
        rc = write_tmp(ck, &m, tmp, st, err);
    if (rc == 0)
        rc = commit(ck, step, tmp, err);
    crater__ckpt_manifest_free(&m);
    return rc;
}

int crater_ckpt_save(crater_ckpt_t *ck,
                     uint64_t step,
                     const crater_ckpt_entry_t *entries,
                     size_t n,
                     crater_ckpt_stats_t *stats,
                     crater_error_t *err)
{
    crater_ckpt_stats_t st = {.step = step};
    double t0 = now();
    int rc;

    if (step > INT64_MAX)
        return crater__ckpt_errorf(err, CRATER_ERANGE, "step out of range");
    if (check_entries(entries, n, err) < 0
        || crater__ckpt_lock(ck, LOCK_EX, err) < 0)
        return -1;
    rc = crater__ckpt_sweep(ck, err);
    if (rc == 0)
        rc = save_locked(ck, step, entries, n, &st, err);
    if (rc == 0 && ck->opts.keep_last)
        rc = crater__ckpt_gc_locked(ck, ck->opts.keep_last, err);
    crater__ckpt_unlock(ck);
    st.seconds = now() - t0;
    if (rc == 0 && stats)
        *stats = st;
    return rc;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');

    return s ? s + 1 : path;
}

/* Map path read-only into e (an empty file maps to nothing). */
static int map_file(const char *path,
                    crater_ckpt_entry_t *e,
                    crater_error_t *err)
{
    struct stat sb;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    e->name = base_name(path);
    if (fd < 0 || fstat(fd, &sb) < 0) {
        sys_error(err, "open", path);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    e->size = (size_t)sb.st_size;
    e->data =
        e->size ? mmap(NULL, e->size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (e->data == MAP_FAILED) {
        e->data = NULL, e->size = 0;
        return sys_error(err, "mmap", path);
    }
    return 0;
}

int crater_ckpt_save_files(crater_ckpt_t *ck,
                           uint64_t step,
                           const char *const *paths,
                           size_t n,
                           crater_ckpt_stats_t *stats,
                           crater_error_t *err)
{
    crater_ckpt_entry_t *e = calloc(n ? n : 1, sizeof(*e));
    int rc = 0;

    if (!e)
        return crater__ckpt_errorf(err, CRATER_ENOMEM, "out of memory");
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = map_file(paths[i], &e[i], err);
    if (rc == 0)
        rc = crater_ckpt_save(ck, step, e, n, stats, err);
    for (size_t i = 0; i < n; i++)
        if (e[i].data)
            munmap((void *)e[i].data, e[i].size);
    free(e);
    return rc;
}
