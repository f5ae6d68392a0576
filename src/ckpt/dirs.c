/* dirs.c - step directory names and listings (dirs.h). */
#include "ckpt/dirs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse_step(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;

    if (n == 0 || n > 18 || (n > 1 && s[0] == '0'))
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

int crater__ckpt_dirname(const char *name,
                         uint64_t *step,
                         crater__ckpt_kind_t *kind)
{
    const char *dot;

    if (strncmp(name, "step-", 5))
        return -1;
    name += 5;
    dot = strchr(name, '.');
    if (parse_step(name, dot ? (size_t)(dot - name) : strlen(name), step) < 0)
        return -1;
    if (!dot)
        *kind = CRATER__CKPT_PLAIN;
    else if (!strncmp(dot, ".old-", 5) && dot[5])
        *kind = CRATER__CKPT_OLD;
    else if (!strncmp(dot, ".tmp-", 5) && dot[5])
        *kind = CRATER__CKPT_TMP;
    else
        return -1;
    return 0;
}

static int newest_first(const void *a, const void *b)
{
    const crater__ckpt_dirent_t *x = a, *y = b;

    if (x->step != y->step)
        return x->step > y->step ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int add(crater__ckpt_dirent_t **v,
               size_t *n,
               size_t *cap,
               const crater__ckpt_dirent_t *e)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        crater__ckpt_dirent_t *nv = realloc(*v, nc * sizeof(*nv));
        if (!nv)
            return -1;
        *v = nv, *cap = nc;
    }
    (*v)[(*n)++] = *e;
    return 0;
}

int crater__ckpt_list_dirs(int dfd, crater__ckpt_dirent_t **out, size_t *n)
{
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    crater__ckpt_dirent_t e, *v = NULL;
    size_t cap = 0;
    struct dirent *de;

    if (!d) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *n = 0;
    while ((de = readdir(d))) {
        if (strlen(de->d_name) >= sizeof(e.name)
            || crater__ckpt_dirname(de->d_name, &e.step, &e.kind) < 0)
            continue;
        strcpy(e.name, de->d_name);
        if (add(&v, n, &cap, &e) < 0) {
            free(v);
            closedir(d);
            return errno = ENOMEM, -1;
        }
    }
    closedir(d);
    if (*n)
        qsort(v, *n, sizeof(*v), newest_first);
    *out = v;
    return 0;
}
