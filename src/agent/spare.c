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
 * SPARE_MAX; the rest removed).
 *
 * The default working directory (WORK/<instance>.<job>.<attempt>) costs
 * the same inode scan, plus a block allocated at mkdir and freed at rmdir
 * (both in the work root, whose lock the agents of a node contend for):
 * together a quarter of the agents' CPU in a 1,000-task array (perf, B3
 * session 9). It belongs to the task's user, who could leave files, ACLs
 * or inode flags in it, so it is kept only when it is exactly as made
 * (plain_empty_dir()), in DATA/spare-work/<n> (the agent's, mode 0700),
 * and only when the work root is on DATA's filesystem.
 *
 * Reserve: the pools fill only as tasks end, so the first burst after an
 * agent starts (and any burst larger than every earlier one) made every
 * task's files, and on such an ext4 each new inode also scans past the
 * inodes freed in the last minutes: after a large rm (a test's, a
 * benchmark's cleanup) that made a 1,000-task burst 40-60% slower (B3,
 * session 10). So the agent makes agent.spareTasks of each kind ahead
 * (spare_fill()), made as the task path would make them: the task
 * directory 0700 with its four files empty (task.json.tmp and exit.tmp
 * 0600, stdout and stderr 0640), the working directory in the work root
 * (so it has the inode flags a new one gets there) and then moved to
 * DATA/spare-work. It runs on a thread of its own at SCHED_IDLE, which
 * gets only CPU time nothing else wants, and ends when both pools hold
 * that many or after making that many of each.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "agent/internal.h"
#include "crater/privdir.h"

/* The four names a spare may hold; anything else is removed. */
static const char *const spare_files[] = {"task.json.tmp",
                                          "exit.tmp",
                                          "stdout",
                                          "stderr"};

static void spare_path(const crater_agent_t *a,
                       const spool_t *p,
                       unsigned n,
                       char *buf,
                       size_t len)
{
    snprintf(buf, len, "%s/%s/%u", a->data_dir, p->sub, n);
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

static void push(crater_agent_t *a, spool_t *p, unsigned n)
{
    pthread_mutex_lock(&a->spare_mu);
    p->slot[p->n++] = n;
    pthread_mutex_unlock(&a->spare_mu);
}

/* A free slot number to give a directory back under, or -1 (full). */
static long long reserve(crater_agent_t *a, spool_t *p)
{
    long long n = -1;

    pthread_mutex_lock(&a->spare_mu);
    if (p->on && p->n + p->giving < SPARE_MAX) {
        n = p->next++;
        p->giving++;
    }
    pthread_mutex_unlock(&a->spare_mu);
    return n;
}

/* The reserved slot n: kept (the directory is there now) or not. */
static void settle(crater_agent_t *a, spool_t *p, long long n, bool kept)
{
    pthread_mutex_lock(&a->spare_mu);
    p->giving--;
    if (kept)
        p->slot[p->n++] = (unsigned)n;
    pthread_mutex_unlock(&a->spare_mu);
}

/* Take a spare of p by renaming it to path; false when there is none or
 * path exists (the slot goes back). */
static bool take(crater_agent_t *a, spool_t *p, const char *path)
{
    char src[4400];
    unsigned n;

    pthread_mutex_lock(&a->spare_mu);
    if (p->n == 0) {
        pthread_mutex_unlock(&a->spare_mu);
        return false;
    }
    n = p->slot[--p->n];
    pthread_mutex_unlock(&a->spare_mu);
    spare_path(a, p, n, src, sizeof(src));
    if (rename(src, path) < 0) { /* path exists: a restarted order */
        push(a, p, n);
        return false;
    }
    return true;
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

    if (!t->dir || (n = reserve(a, &a->spare)) < 0)
        return false;
    rename_in(t->dir, "task.json", "task.json.tmp");
    rename_in(t->dir, "exit", "exit.tmp");
    spare_path(a, &a->spare, (unsigned)n, dst, sizeof(dst));
    if (empty_dir(t->dir) < 0 || rename(t->dir, dst) < 0) {
        settle(a, &a->spare, n, false);
        return false;
    }
    settle(a, &a->spare, n, true);
    return true;
}

bool spare_take(crater_agent_t *a, const atask_t *t)
{
    return take(a, &a->spare, t->dir);
}

/* ---- working directories ------------------------------------------------
 * Kept only when the task left its directory as it found it: empty, no
 * extended attribute (so no ACL a default ACL could pass to the next
 * task's files), the inode flags of a new directory (no fscrypt policy or
 * casefolding its owner could set on an empty directory). While spare it
 * is the agent's, mode 0700, in DATA (no one else can reach it); the next
 * task's owner is set by make_workdir() as for a new one. */
static bool plain_empty_dir(DIR *d, long flags)
{
    struct dirent *e;
    long f = 0;
    int fd = dirfd(d);

    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            return false;
    if (flistxattr(fd, NULL, 0) != 0)
        return false;
    if (ioctl(fd, FS_IOC_GETFLAGS, &f) < 0)
        f = flags; /* no inode flags on this filesystem: nothing to carry */
    /* FS_INDEX_FL: the filesystem indexes a directory that grew large */
    return (f & ~(long)FS_INDEX_FL) == flags
           && fchown(fd, geteuid(), getegid()) == 0 && fchmod(fd, 0700) == 0;
}

bool spare_give_workdir(crater_agent_t *a, const atask_t *t)
{
    char dst[4400];
    long long n;
    DIR *d;
    bool ok;

    if (!t->workdir || (n = reserve(a, &a->wspare)) < 0)
        return false;
    if (!(d = opendir(t->workdir))) {
        settle(a, &a->wspare, n, false);
        return false;
    }
    ok = plain_empty_dir(d, a->wspare_flags);
    closedir(d);
    spare_path(a, &a->wspare, (unsigned)n, dst, sizeof(dst));
    ok = ok && rename(t->workdir, dst) == 0;
    settle(a, &a->wspare, n, ok);
    return ok;
}

bool spare_take_workdir(crater_agent_t *a, const char *path)
{
    return take(a, &a->wspare, path);
}

/* ---- reserve --------------------------------------------------------------
 */

static size_t pool_size(crater_agent_t *a, const spool_t *p)
{
    size_t n;

    pthread_mutex_lock(&a->spare_mu);
    n = p->n + p->giving;
    pthread_mutex_unlock(&a->spare_mu);
    return n;
}

/* A new task directory with its four files, empty, as slot n. */
static bool make_task_spare(crater_agent_t *a, long long n)
{
    /* as taskstate_save() and the shim make them, in spare_files' order */
    static const mode_t modes[] = {0600, 0600, 0640, 0640};
    _Static_assert(sizeof(modes) / sizeof(modes[0])
                       == sizeof(spare_files) / sizeof(spare_files[0]),
                   "a mode for each spare file");
    char dir[4400];
    int dfd;
    bool ok = true;

    spare_path(a, &a->spare, (unsigned)n, dir, sizeof(dir));
    if (mkdir(dir, 0700) < 0)
        return false;
    if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        rmdir(dir);
        return false;
    }
    for (size_t i = 0; ok && i < sizeof(modes) / sizeof(modes[0]); i++) {
        int fd = openat(dfd,
                        spare_files[i],
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        modes[i]);
        ok = fd >= 0;
        if (ok)
            close(fd);
    }
    close(dfd);
    if (!ok)
        rm_tree(dir);
    return ok;
}

/* A new working directory, made in the work root and moved to slot n. */
static bool make_work_spare(crater_agent_t *a, long long n)
{
    char made[4200], dst[4400];
    DIR *d;
    bool ok;

    snprintf(made,
             sizeof(made),
             "%s/.spare-%08x-%lld",
             a->work_root,
             (unsigned)a->instance,
             n);
    if (mkdir(made, 0700) < 0)
        return false;
    ok = (d = opendir(made)) != NULL && plain_empty_dir(d, a->wspare_flags);
    if (d)
        closedir(d);
    spare_path(a, &a->wspare, (unsigned)n, dst, sizeof(dst));
    if (!ok || rename(made, dst) < 0) {
        rmdir(made);
        return false;
    }
    return true;
}

/* One more spare in p, unless it holds want already; false when none
   was made (full, or the filesystem refused). */
static bool fill_one(crater_agent_t *a, spool_t *p, size_t want)
{
    long long n;
    bool ok;

    if (pool_size(a, p) >= want || (n = reserve(a, p)) < 0)
        return false;
    ok = p == &a->spare ? make_task_spare(a, n) : make_work_spare(a, n);
    settle(a, p, n, ok);
    return ok;
}

size_t spare_fill(crater_agent_t *a, size_t want)
{
    size_t made = 0;

    for (size_t i = 0; i < want && !agent_stopping(a); i++) {
        bool task = fill_one(a, &a->spare, want);
        bool work = a->wspare.on && fill_one(a, &a->wspare, want);
        made += task + work;
        if (!task && !work)
            break;
    }
    return made;
}

void *spare_main(void *arg)
{
    crater_agent_t *a = arg;
    struct sched_param sp = {0};
    size_t want = a->cfg ? a->cfg->agent.spare_tasks : SPARE_RESERVE;

    pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp); /* idle CPU only */
    spare_fill(a, want);
    return NULL;
}

/* ---- start ----------------------------------------------------------------
 */

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

/* A kept directory: a task directory emptied again (a crash may have
   stopped spare_give() half-way), a working directory as plain_empty_dir()
   wants it. */
static bool keepable(crater_agent_t *a, const spool_t *p, const char *path)
{
    DIR *d;
    bool ok;

    if (p == &a->spare)
        return empty_dir(path) == 0;
    if (!(d = opendir(path)))
        return false;
    ok = plain_empty_dir(d, a->wspare_flags);
    closedir(d);
    return ok;
}

static void take_back(crater_agent_t *a,
                      spool_t *p,
                      const char *dir,
                      const char *name)
{
    char path[4400];
    long long n = spare_number(name);

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (n < 0 || p->n >= SPARE_MAX || !keepable(a, p, path)) {
        rm_tree(path);
        return;
    }
    p->slot[p->n++] = (unsigned)n;
    if ((unsigned)n >= p->next)
        p->next = (unsigned)n + 1;
}

static int pool_init(crater_agent_t *a, spool_t *p, crater_error_t *err)
{
    char dir[4200];
    struct dirent *e;
    DIR *d;

    snprintf(dir, sizeof(dir), "%s/%s", a->data_dir, p->sub);
    if (crater_private_dir(dir, "--data-dir", err) < 0)
        return -1;
    if (!(d = opendir(dir)))
        return 0;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            take_back(a, p, dir, e->d_name);
    closedir(d);
    return 0;
}

/* Working directories are kept only when the work root is on DATA's
   filesystem (a rename cannot cross filesystems); a kept one must carry
   the inode flags a new one gets there, read off a probe made now. */
static void workdir_pool_setup(crater_agent_t *a)
{
    char probe[4200];
    struct stat ds, ws;
    long f = 0;
    int fd;

    a->wspare.on = a->work_root && stat(a->data_dir, &ds) == 0
                   && stat(a->work_root, &ws) == 0 && ds.st_dev == ws.st_dev;
    if (!a->wspare.on)
        return;
    snprintf(probe,
             sizeof(probe),
             "%s/.probe-%08x",
             a->work_root,
             (unsigned)a->instance);
    if (mkdir(probe, 0700) < 0) {
        a->wspare.on = false;
        return;
    }
    fd = open(probe, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    a->wspare.on = fd >= 0;
    if (fd >= 0 && ioctl(fd, FS_IOC_GETFLAGS, &f) == 0)
        a->wspare_flags = f & ~(long)FS_INDEX_FL;
    if (fd >= 0)
        close(fd);
    rmdir(probe);
}

int spare_init(crater_agent_t *a, crater_error_t *err)
{
    a->spare.sub = "spare";
    a->spare.on = true;
    a->wspare.sub = "spare-work";
    workdir_pool_setup(a);
    if (pool_init(a, &a->spare, err) < 0)
        return -1;
    if (!a->wspare.on) { /* an earlier agent's kept ones cannot be used */
        char dir[4200];
        snprintf(dir, sizeof(dir), "%s/spare-work", a->data_dir);
        rm_tree(dir);
        return 0;
    }
    return pool_init(a, &a->wspare, err);
}
