/* spare.c - a finished task's files recycled for the next task.
 *
 * Why: on ext4 without a journal (the root filesystem of many VMs, this
 * project's CI among them) every inode allocation skips each inode of its
 * block group that was freed in the last 5 to 35 seconds, reading the
 * inode table to learn so (ext4's recently_deleted()). A burst of short
 * tasks, each making a directory and four files in DATA and removing them
 * when it ends, made that scan quadratic: in a 1,000-element array it
 * was 25 to 38% of all CPU time on the node (perf, bench/RESULTS.md B3).
 * A rename allocates and frees no inode, so a finished task's directory
 * is kept, emptied, as a spare, and the next task takes it by rename:
 *
 *   DATA/spare/<n>/   task.json.tmp, exit.tmp, stdout, stderr
 *
 * each of them present or not, regular files, cut to 0 bytes. Taking one:
 * one rename of DATA/spare/<n> to the task's DATA/tasks/<job>.<attempt>;
 * its output goes into the stdout and stderr there, and the record
 * (taskstate_save) and the shim's exit file are written into the .tmp
 * files and renamed into place as before (taskexec_open_empty: an empty
 * file is not truncated again). Giving one back (the task's exit
 * acknowledged and its output shipped): task.json and exit renamed to
 * their .tmp names, the files cut to 0 bytes, anything else removed, then
 * the directory renamed to DATA/spare/<n>.
 *
 * Crash safety: a spare is never under DATA/tasks, so adoption never sees
 * one; a directory taken into DATA/tasks has no task.json until its task
 * runs, and adoption removes such a directory (an interrupted start), as
 * for one made by mkdir. Spares found at start are taken back (at most
 * SPARE_MAX; the rest removed). The working directory is not recycled:
 * it belongs to the task's user, who could leave links or ACLs in it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/internal.h"
#include "crater/privdir.h"

/* The four names a spare may hold; anything else is removed. */
static const char *const spare_files[] = {"task.json.tmp",
                                          "exit.tmp",
                                          "stdout",
                                          "stderr"};

static void spare_path(const crater_agent_t *a,
                       unsigned n,
                       char *buf,
                       size_t len)
{
    snprintf(buf, len, "%s/spare/%u", a->data_dir, n);
}

static bool known_name(const char *name)
{
    for (size_t i = 0; i < sizeof(spare_files) / sizeof(spare_files[0]); i++)
        if (strcmp(name, spare_files[i]) == 0)
            return true;
    return false;
}

static void rm_tree(const char *path)
{
    taskstate_remove(&(atask_t){.dir = (char *)path});
}

/* dir/name cut to 0 bytes unless it is a regular file already empty; a
 * non-regular file (a socket, a directory a task made) is removed. */
static void empty_entry(int dfd, const char *dir, const char *name)
{
    struct stat st;

    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return;
    if (S_ISREG(st.st_mode) && known_name(name)) {
        if (st.st_size > 0) {
            int fd =
                openat(dfd, name, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
            if (fd >= 0)
                close(fd);
        }
        return;
    }
    if (S_ISDIR(st.st_mode)) {
        char p[4400];
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        rm_tree(p);
    } else {
        unlinkat(dfd, name, 0);
    }
}

/* Leave only the known names, each empty; -1 when dir cannot be read. */
static int empty_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;

    if (!d)
        return -1;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            empty_entry(dirfd(d), dir, e->d_name);
    closedir(d);
    return 0;
}

static void push(crater_agent_t *a, unsigned n)
{
    pthread_mutex_lock(&a->spare_mu);
    a->spare[a->nspare++] = n;
    pthread_mutex_unlock(&a->spare_mu);
}

/* A free slot number to give a directory back under, or -1 (full). */
static long long reserve(crater_agent_t *a)
{
    long long n = -1;

    pthread_mutex_lock(&a->spare_mu);
    if (a->nspare + a->giving < SPARE_MAX) {
        n = a->spare_next++;
        a->giving++;
    }
    pthread_mutex_unlock(&a->spare_mu);
    return n;
}

static void unreserve(crater_agent_t *a)
{
    pthread_mutex_lock(&a->spare_mu);
    a->giving--;
    pthread_mutex_unlock(&a->spare_mu);
}

static void rename_in(const char *dir, const char *from, const char *to)
{
    char f[4400], t[4400];

    snprintf(f, sizeof(f), "%s/%s", dir, from);
    snprintf(t, sizeof(t), "%s/%s", dir, to);
    rename(f, t);
}

bool spare_give(crater_agent_t *a, const atask_t *t)
{
    char dst[4400];
    long long n;

    if (!t->dir || (n = reserve(a)) < 0)
        return false;
    rename_in(t->dir, "task.json", "task.json.tmp");
    rename_in(t->dir, "exit", "exit.tmp");
    spare_path(a, (unsigned)n, dst, sizeof(dst));
    if (empty_dir(t->dir) < 0 || rename(t->dir, dst) < 0) {
        unreserve(a);
        return false;
    }
    pthread_mutex_lock(&a->spare_mu);
    a->giving--;
    a->spare[a->nspare++] = (unsigned)n;
    pthread_mutex_unlock(&a->spare_mu);
    return true;
}

bool spare_take(crater_agent_t *a, const atask_t *t)
{
    char src[4400];
    unsigned n;

    pthread_mutex_lock(&a->spare_mu);
    if (a->nspare == 0) {
        pthread_mutex_unlock(&a->spare_mu);
        return false;
    }
    n = a->spare[--a->nspare];
    pthread_mutex_unlock(&a->spare_mu);
    spare_path(a, n, src, sizeof(src));
    if (rename(src, t->dir) < 0) { /* t->dir exists: a restarted order */
        push(a, n);
        return false;
    }
    return true;
}

/* A spare's name: a decimal number that fits 32 bits, or -1. */
static long long spare_number(const char *name)
{
    char *end;
    unsigned long long n;

    if (name[0] < '0' || name[0] > '9' || strlen(name) > 10)
        return -1;
    n = strtoull(name, &end, 10);
    return *end || n > UINT32_MAX ? -1 : (long long)n;
}

static void take_back(crater_agent_t *a, const char *dir, const char *name)
{
    char path[4400];
    long long n = spare_number(name);

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (n < 0 || a->nspare >= SPARE_MAX || empty_dir(path) < 0) {
        rm_tree(path);
        return;
    }
    a->spare[a->nspare++] = (unsigned)n;
    if ((unsigned)n >= a->spare_next)
        a->spare_next = (unsigned)n + 1;
}

int spare_init(crater_agent_t *a, crater_error_t *err)
{
    char dir[4200];
    struct dirent *e;
    DIR *d;

    snprintf(dir, sizeof(dir), "%s/spare", a->data_dir);
    if (crater_private_dir(dir, "--data-dir", err) < 0)
        return -1;
    if (!(d = opendir(dir)))
        return 0;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            take_back(a, dir, e->d_name);
    closedir(d);
    return 0;
}
