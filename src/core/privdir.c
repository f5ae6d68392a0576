/* privdir.c - a data directory only its owner can enter (privdir.h).
 *
 * lstat, then chmod through a descriptor opened with O_NOFOLLOW |
 * O_DIRECTORY: a symlink planted where the directory should be is refused
 * instead of followed, and the mode changed is the one of the directory
 * checked.
 */
#include "crater/privdir.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crater/log.h"

static int refuse(crater_error_t *err,
                  const char *field,
                  const char *path,
                  const char *why)
{
    return crater_errorf_field(err, CRATER_EIO, field, "%s: %s", path, why);
}

int crater_private_dir(const char *path, const char *field, crater_error_t *err)
{
    struct stat st;
    int fd, rc = 0;

    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return refuse(err, field, path, strerror(errno));
    if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        return refuse(err,
                      field,
                      path,
                      errno == ELOOP || errno == ENOTDIR ? "not a directory (a "
                                                           "symlink?)"
                                                         : strerror(errno));
    if (fstat(fd, &st) < 0)
        rc = refuse(err, field, path, strerror(errno));
    else if (st.st_uid != geteuid())
        rc = refuse(err, field, path, "owned by another user");
    else if (st.st_mode & S_ISVTX)
        rc = refuse(err, field, path, "a shared (sticky) directory");
    else if ((st.st_mode & 077) && fchmod(fd, 0700) < 0)
        rc = refuse(err, field, path, strerror(errno));
    else if (st.st_mode & 077)
        crater_log(LOG_WARNING,
                   "%s was mode %04o: now 0700 (only its owner may enter)",
                   path,
                   (unsigned)(st.st_mode & 07777));
    close(fd);
    return rc;
}
