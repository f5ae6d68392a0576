/* fsio.c - durable file operations and the fault hook (fsio.h).
 *
 * A file is made durable the classic way: write to a temporary name,
 * fsync the file, rename over the final name; the caller fsyncs the
 * directory once for a batch of renames. Short writes and EINTR are
 * retried, so a failure is always a real error.
 */
#include "ckpt/fsio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

crater__ckpt_fault_f crater__ckpt_fault;
void *crater__ckpt_fault_arg;

static int fault(const char *op, const char *path)
{
    return crater__ckpt_fault
               ? crater__ckpt_fault(op, path, crater__ckpt_fault_arg)
               : 0;
}

static int write_all(int fd, const char *name, const void *data, size_t len)
{
    const char *p = data;

    while (len > 0) {
        size_t n = len < (1u << 30) ? len : (1u << 30);
        ssize_t w;

        if (fault("write", name) < 0)
            return -1;
        if ((w = write(fd, p, n)) < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        p += w, len -= (size_t)w;
    }
    return 0;
}

static int close_keep_errno(int fd)
{
    int e = errno;

    close(fd);
    errno = e;
    return -1;
}

int crater__ckpt_write_file(
    int dfd, const char *name, const void *data, size_t len, int no_fsync)
{
    char tmp[320];
    int fd;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp-%ld", name, (long)getpid())
        >= (int)sizeof(tmp))
        return errno = ENAMETOOLONG, -1;
    if (fault("open", tmp) < 0)
        return -1;
    fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    if (write_all(fd, tmp, data, len) < 0)
        return close_keep_errno(fd);
    if (!no_fsync && (fault("fsync", tmp) < 0 || fsync(fd) < 0))
        return close_keep_errno(fd);
    if (close(fd) < 0)
        return -1;
    return crater__ckpt_rename(dfd, tmp, name);
}

int crater__ckpt_fsync_dir(int dfd, const char *name, int no_fsync)
{
    int fd, rc;

    if (no_fsync)
        return 0;
    if (fault("fsync", name) < 0)
        return -1;
    fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    rc = fsync(fd);
    if (rc < 0)
        return close_keep_errno(fd);
    close(fd);
    return 0;
}

int crater__ckpt_rename(int dfd, const char *from, const char *to)
{
    if (fault("rename", to) < 0)
        return -1;
    return renameat(dfd, from, dfd, to);
}

int crater__ckpt_mkdir(int dfd, const char *name)
{
    if (fault("mkdir", name) < 0)
        return -1;
    return mkdirat(dfd, name, 0755);
}

static int unlink_all(int fd)
{
    DIR *d = fdopendir(fd);
    struct dirent *de;
    int rc = 0;

    if (!d)
        return close_keep_errno(fd);
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (fault("unlink", de->d_name) < 0
            || (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT)) {
            rc = -1;
            break;
        }
    }
    if (rc < 0) {
        int e = errno;
        closedir(d);
        errno = e;
        return -1;
    }
    closedir(d);
    return 0;
}

int crater__ckpt_remove(int dfd, const char *name)
{
    int fd;

    if (fault("unlink", name) < 0)
        return -1;
    if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -1;
    fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    if (unlink_all(fd) < 0)
        return -1;
    if (fault("rmdir", name) < 0)
        return -1;
    return unlinkat(dfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 0 : -1;
}

static int read_fd(int fd, size_t max, char **out, size_t *len)
{
    struct stat st;
    char *buf;
    size_t got = 0;

    if (fstat(fd, &st) < 0)
        return -1;
    if ((uint64_t)st.st_size > max)
        return errno = EFBIG, -1;
    if (!(buf = malloc((size_t)st.st_size + 1)))
        return -1;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            free(buf);
            return r == 0 ? (errno = EIO, -1) : -1;
        }
        got += (size_t)r;
    }
    buf[got] = '\0';
    *out = buf, *len = got;
    return 0;
}

int crater__ckpt_read_file(
    int dfd, const char *name, size_t max, char **out, size_t *len)
{
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    int rc;

    if (fd < 0)
        return -1;
    rc = read_fd(fd, max, out, len);
    if (rc < 0)
        return close_keep_errno(fd);
    close(fd);
    return 0;
}
