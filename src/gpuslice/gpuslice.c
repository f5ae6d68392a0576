/*
 * gpuslice.c - the agent's side of the slice file (crater/gpuslice.h):
 * create it before a task starts, read it for the watchdog.
 *
 * create writes the whole file under a temporary name in the same
 * directory and renames it over path, so an interposer either maps the
 * complete new file or none (never a zero-filled prefix of one).
 */
#include "crater/gpuslice.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "slice.h"

int crater_gpuslice_uuid_parse(const char *text,
                               uint8_t uuid[16],
                               crater_error_t *err)
{
    static const int dash_after[] = {4, 6, 8, 10}; /* bytes before dashes */
    const char *p = text;
    if (!p)
        return crater_errorf(err, CRATER_EINVAL, "GPU UUID missing");
    if (strncasecmp(p, "GPU-", 4) == 0)
        p += 4;
    for (int i = 0, d = 0; i < 16; i++) {
        if (d < 4 && i == dash_after[d]) {
            if (*p++ != '-')
                return crater_errorf(err,
                                     CRATER_EINVAL,
                                     "GPU UUID '%s': expected '-' at "
                                     "position %d",
                                     text,
                                     (int)(p - text));
            d++;
        }
        unsigned v;
        if (!isxdigit((unsigned char)p[0]) || !isxdigit((unsigned char)p[1])
            || sscanf(p, "%2x", &v) != 1)
            return crater_errorf(err,
                                 CRATER_EINVAL,
                                 "GPU UUID '%s': expected two hex digits at "
                                 "position %d",
                                 text,
                                 (int)(p - text) + 1);
        uuid[i] = (uint8_t)v;
        p += 2;
    }
    if (*p)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "GPU UUID '%s': trailing text",
                             text);
    return 0;
}

char *crater_gpuslice_uuid_format(const uint8_t uuid[16], char buf[41])
{
    char *p = buf + sprintf(buf, "GPU-");
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        p += sprintf(p, "%02x", uuid[i]);
    }
    return buf;
}

static int check_limits(const crater_gpuslice_limit_t *gpus,
                        size_t n,
                        crater_error_t *err)
{
    char a[41];
    if (n == 0 || n > CRATER_GPUSLICE_MAX_GPUS)
        return crater_errorf(err,
                             CRATER_ERANGE,
                             "slice file: %zu GPUs (1 to %d allowed)",
                             n,
                             CRATER_GPUSLICE_MAX_GPUS);
    for (size_t i = 0; i < n; i++) {
        if (gpus[i].limit == 0)
            return crater_errorf(err,
                                 CRATER_ERANGE,
                                 "slice file: GPU %s: limit is 0",
                                 crater_gpuslice_uuid_format(gpus[i].uuid, a));
        for (size_t j = 0; j < i; j++)
            if (memcmp(gpus[i].uuid, gpus[j].uuid, 16) == 0)
                return crater_errorf(err,
                                     CRATER_ECONFLICT,
                                     "slice file: GPU %s listed twice",
                                     crater_gpuslice_uuid_format(gpus[i].uuid,
                                                                 a));
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int crater_gpuslice_create(const char *path,
                           const crater_gpuslice_limit_t *gpus,
                           size_t n,
                           uid_t uid,
                           gid_t gid,
                           crater_error_t *err)
{
    if (check_limits(gpus, n, err) < 0)
        return -1;
    crater_gpuslice_file_t *f = calloc(1, sizeof(*f));
    char *tmp = malloc(strlen(path) + 16);
    if (!f || !tmp) {
        free(f);
        free(tmp);
        return crater_errorf(err, CRATER_ENOMEM, "slice file: out of memory");
    }
    *f = (crater_gpuslice_file_t){.magic = CRATER_GPUSLICE_MAGIC,
                                  .version = CRATER_GPUSLICE_VERSION,
                                  .ngpus = (uint32_t)n,
                                  .size = sizeof(*f)};
    for (size_t i = 0; i < n; i++) {
        memcpy(f->gpu[i].uuid, gpus[i].uuid, 16);
        f->gpu[i].limit = gpus[i].limit;
    }
    sprintf(tmp, "%s.tmpXXXXXX", path);
    int fd = mkstemp(tmp);
    int rc = fd < 0 || fchown(fd, uid, gid) < 0
                     || write_all(fd, f, sizeof(*f)) < 0 || fsync(fd) < 0
                     || rename(tmp, path) < 0
                 ? -1
                 : 0;
    int saved = errno;
    if (fd >= 0)
        close(fd);
    if (rc < 0) {
        if (fd >= 0)
            unlink(tmp);
        crater_errorf(err,
                      CRATER_EIO,
                      "slice file %s: %s",
                      path,
                      strerror(saved));
    }
    free(tmp);
    free(f);
    return rc;
}

int crater_gpuslice_read(const char *path,
                         crater_gpuslice_limit_t *gpus,
                         size_t cap,
                         size_t *n,
                         crater_error_t *err)
{
    crater_gpuslice_file_t *f = crater__gs_map(path);
    if (!f)
        return crater_errorf(err,
                             errno == EINVAL ? CRATER_EINVAL : CRATER_EIO,
                             "slice file %s: %s",
                             path,
                             errno == EINVAL ? "not a version 1 slice file"
                                             : strerror(errno));
    *n = 0;
    for (uint32_t g = 0; g < f->ngpus && *n < cap; g++, (*n)++) {
        memcpy(gpus[g].uuid, f->gpu[g].uuid, 16);
        gpus[g].limit = f->gpu[g].limit;
        gpus[g].used = atomic_load(&f->gpu[g].used);
    }
    crater__gs_unmap(f);
    return 0;
}
