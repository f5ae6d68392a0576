/* cgroup.c - per-task cgroups on v2 or v1 (see cgroup.h, doc/agent.md).
 *
 * Both versions are the same idea with different file names: a directory
 * per task, limits written as text into files, cgroup.procs to attach and
 * list. So one handle keeps one base directory per controller (v2: the
 * same directory for all), and each operation is a short table of
 * (controller, file, value) writes. Co-mounted v1 controllers (cpu,cpuacct)
 * share a base, so paths are de-duplicated where that matters.
 *
 * Files are written the way `echo v > file` would (open_for_write): an
 * existing cgroupfs file as it is, and created or cut to 0 in the tests'
 * fake tree of plain files. Every error names the file and strerror(errno),
 * because a cgroup write fails for reasons only the kernel knows (EINVAL
 * for a quota below 1 ms, EBUSY for controllers in a populated cgroup).
 *
 * Expected load: a few calls per task start/stop, so no caching beyond
 * the base paths and the agent's own v1 cpuset; clarity over speed, except
 * that a v1 task gets no directory in a hierarchy where it would only
 * repeat the agent's settings (v1_skip()).
 */
#include "agent/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define PATHLEN 4096
#define MAX_FILE (16u << 20)

/* C_CORE: the v2 task directory for core files (cgroup.procs, cgroup.kill,
   cpu.stat) that exist whatever controllers are enabled; NULL on v1. */
enum {
    C_CPU,
    C_CPUACCT,
    C_CPUSET,
    C_MEMORY,
    C_IO,
    C_PIDS,
    C_CORE,
    NCTL
};

/* v1 hierarchy name and v2 controller name per slot. */
static const struct {
    const char *v1, *v2;
    unsigned bit;
} ctls[NCTL] = {
    {"cpu", "cpu", CRATER_CG_CPU},
    {"cpuacct", NULL, CRATER_CG_CPUACCT},
    {"cpuset", "cpuset", CRATER_CG_CPUSET},
    {"memory", "memory", CRATER_CG_MEMORY},
    {"blkio", "io", CRATER_CG_IO},
    {"pids", "pids", CRATER_CG_PIDS},
    {NULL, NULL, 0},
};

struct crater_cgroups {
    crater_cg_version_t ver;
    unsigned mask;
    char *base[NCTL];        /* <mount or root>/<parent>, NULL where missing;
                                v2: the same path for every present slot */
    bool burst;              /* cpu.max.burst / cpu.cfs_burst_us exist */
    bool noswap;             /* memory.swap.max / memory.memsw.limit_in_bytes */
    bool cgkill;             /* v2 cgroup.kill exists */
    char *v1_cpus, *v1_mems; /* v1: the parent's cpuset, trimmed */
};

/* ---- small file helpers ---- */

static int sys_err(crater_error_t *err, const char *path)
{
    return crater_errorf(err,
                         errno == EACCES || errno == EPERM ? CRATER_EPERM
                                                           : CRATER_EIO,
                         "%s: %s",
                         path,
                         strerror(errno));
}

/* A cgroup file for writing: an existing one as it is (a truncate of a
   cgroupfs file is a no-op that costs a setattr), a plain file of the
   tests' fake tree cut to 0, a missing one created (only a fake tree lets
   that happen). */
static int open_for_write(const char *path)
{
    struct stat st;
    int fd = open(path, O_WRONLY | O_CLOEXEC);

    if (fd < 0 && errno == ENOENT)
        return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0
        && ftruncate(fd, 0) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int write_str(const char *path, const char *s, crater_error_t *err)
{
    int fd = open_for_write(path);
    size_t len = strlen(s);
    ssize_t w;

    if (fd < 0)
        return sys_err(err, path);
    w = write(fd, s, len);
    if (w != (ssize_t)len) {
        if (w >= 0)
            errno = EIO;
        sys_err(err, path);
        close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

/* Whole file, NUL-terminated, malloc'd into *text. */
static int read_text(const char *path, char **text, crater_error_t *err)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap), *nb;
    ssize_t r = 0;
    int fd;

    if (!buf)
        return crater_errorf(err, CRATER_ENOMEM, "%s: out of memory", path);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        free(buf);
        return sys_err(err, path);
    }
    while ((r = read(fd, buf + len, cap - len - 1)) > 0) {
        len += (size_t)r;
        if (len + 1 < cap)
            continue;
        if (cap >= MAX_FILE || !(nb = realloc(buf, cap * 2)))
            break;
        buf = nb;
        cap *= 2;
    }
    if (r != 0) {
        r < 0 ? sys_err(err, path)
              : crater_errorf(err, CRATER_ELIMIT, "%s: too large", path);
        close(fd);
        free(buf);
        return -1;
    }
    close(fd);
    buf[len] = '\0';
    *text = buf;
    return 0;
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

static bool has_file(const char *dir, const char *file)
{
    char path[PATHLEN];

    if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
        return false;
    return exists(path);
}

static int join(
    char *buf, const char *a, const char *b, const char *c, crater_error_t *err)
{
    int n = snprintf(buf, PATHLEN, "%s/%s%s%s", a, b, c ? "/" : "", c ? c : "");

    if (n < 0 || n >= PATHLEN)
        return crater_errorf(err, CRATER_ELIMIT, "%s/%s: path too long", a, b);
    return 0;
}

/* 1 when made, 0 when it was there, -1 on error. */
static int make_dir(const char *path, crater_error_t *err)
{
    if (mkdir(path, 0755) == 0)
        return 1;
    return errno == EEXIST ? 0 : sys_err(err, path);
}

/* ---- pure parsers ---- */

int crater_cg_parse_procs(const char *name,
                          const char *text,
                          pid_t *pids,
                          size_t max,
                          size_t *n,
                          crater_error_t *err)
{
    unsigned line = 0;
    size_t k = 0;
    const char *p = text;
    char *end;
    long v;

    while (*p) {
        line++;
        if (*p == '\n') {
            p++;
            continue;
        }
        errno = 0;
        v = strtol(p, &end, 10);
        if (errno || end == p || v <= 0 || (*end && *end != '\n'))
            return crater_errorf(err,
                                 CRATER_EPARSE,
                                 "%s:%u: expected a pid",
                                 name,
                                 line);
        if (k < max)
            pids[k] = (pid_t)v;
        k++;
        p = *end ? end + 1 : end;
    }
    *n = k;
    return 0;
}

int crater_cg_parse_keyed(const char *name,
                          const char *text,
                          const char *key,
                          uint64_t *value,
                          crater_error_t *err)
{
    size_t klen = strlen(key);
    unsigned line = 0;
    const char *p = text;
    char *end;

    for (; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
        line++;
        if (strncmp(p, key, klen) != 0 || p[klen] != ' ')
            continue;
        errno = 0;
        *value = strtoull(p + klen + 1, &end, 10);
        if (errno || end == p + klen + 1 || (*end && *end != '\n'))
            return crater_errorf(err,
                                 CRATER_EPARSE,
                                 "%s:%u: %s: value is not a number",
                                 name,
                                 line,
                                 key);
        return 0;
    }
    return crater_errorf(err, CRATER_ENOENT, "%s: no '%s' line", name, key);
}

/* ---- formatting ---- */

static uint64_t quota_us(const crater_cg_limits_t *lim, uint32_t period)
{
    uint64_t q = lim->cpu_quota_milli * period / 1000;

    return q < 1000 ? 1000 : q; /* the kernel refuses less than 1 ms */
}

static uint32_t period_of(const crater_cg_limits_t *lim)
{
    return lim->cpu_period_us ? lim->cpu_period_us : 100000;
}

int crater_cg_format_cpu_max(const crater_cg_limits_t *lim, char *buf, size_t n)
{
    uint32_t period = period_of(lim);
    int len;

    if (lim->cpu_quota_milli)
        len = snprintf(buf,
                       n,
                       "%llu %u",
                       (unsigned long long)quota_us(lim, period),
                       period);
    else
        len = snprintf(buf, n, "max %u", period);
    return len < 0 || (size_t)len >= n ? -1 : len;
}

static void fmt_max(char *buf, size_t n, uint64_t v)
{
    if (v)
        snprintf(buf, n, "%llu", (unsigned long long)v);
    else
        snprintf(buf, n, "max");
}

int crater_cg_format_io_max(const crater_cg_io_t *io, char *buf, size_t n)
{
    char v[4][24];
    int len;

    fmt_max(v[0], sizeof(v[0]), io->rbps);
    fmt_max(v[1], sizeof(v[1]), io->wbps);
    fmt_max(v[2], sizeof(v[2]), io->riops);
    fmt_max(v[3], sizeof(v[3]), io->wiops);
    len = snprintf(buf,
                   n,
                   "%u:%u rbps=%s wbps=%s riops=%s wiops=%s",
                   io->major,
                   io->minor,
                   v[0],
                   v[1],
                   v[2],
                   v[3]);
    return len < 0 || (size_t)len >= n ? -1 : len;
}

/* ---- the ioProfile table (doc/agent.md "Cgroups") ---- */

#define MIB (1024ull * 1024)

static const struct {
    crater_io_profile_t profile;
    uint64_t rbps, wbps, riops, wiops;
} io_table[] = {
    {CRATER_IO_TRAINING, 1024 * MIB, 512 * MIB, 2000, 1000},
    {CRATER_IO_INFERENCE, 200 * MIB, 100 * MIB, 10000, 2000},
    {CRATER_IO_MODEL_LOADING, 500 * MIB, 100 * MIB, 50000, 2000},
};

int crater_cg_io_profile(crater_io_profile_t profile,
                         crater_workload_t workload,
                         uint32_t major,
                         uint32_t minor,
                         crater_cg_io_t *out)
{
    size_t i;

    if (profile == CRATER_IO_DEFAULT)
        profile = workload == CRATER_WORKLOAD_INFERENCE ? CRATER_IO_INFERENCE
                  : workload == CRATER_WORKLOAD_INTERACTIVE
                      ? CRATER_IO_NONE
                      : CRATER_IO_TRAINING;
    for (i = 0; i < sizeof(io_table) / sizeof(io_table[0]); i++) {
        if (io_table[i].profile != profile)
            continue;
        *out = (crater_cg_io_t){major,
                                minor,
                                io_table[i].rbps,
                                io_table[i].wbps,
                                io_table[i].riops,
                                io_table[i].wiops};
        return 1;
    }
    return 0;
}

/* ---- opening: v2 ---- */

static bool has_word(const char *list, const char *w)
{
    size_t n = strlen(w);
    const char *p = list;

    while ((p = strstr(p, w))) {
        if ((p == list || p[-1] == ' ')
            && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0'))
            return true;
        p += n;
    }
    return false;
}

/* "+cpu +io +memory +cpuset +pids" for the controllers present. */
static void enable_line(unsigned mask, char *buf, size_t n)
{
    static const int order[] = {C_CPU, C_IO, C_MEMORY, C_CPUSET, C_PIDS};
    size_t i;

    buf[0] = '\0';
    for (i = 0; i < 5; i++)
        if (mask & ctls[order[i]].bit)
            snprintf(buf + strlen(buf),
                     n - strlen(buf),
                     "%s+%s",
                     buf[0] ? " " : "",
                     ctls[order[i]].v2);
}

static int enable(const char *dir, const char *line, crater_error_t *err)
{
    char path[PATHLEN];

    if (!line[0])
        return 0;
    if (join(path, dir, "cgroup.subtree_control", NULL, err) < 0)
        return -1;
    if (write_str(path, line, err) == 0)
        return 0;
    if (err && errno == EBUSY)
        crater_errorf(err,
                      CRATER_EIO,
                      "%s: busy: processes in this non-root cgroup block "
                      "enabling controllers",
                      path);
    return -1;
}

static int v2_setup(crater_cgroups_t *cg,
                    const char *root,
                    const char *parent,
                    crater_error_t *err)
{
    char path[PATHLEN], line[64];
    int i;

    enable_line(cg->mask, line, sizeof(line));
    if (enable(root, line, err) < 0 || join(path, root, parent, NULL, err) < 0
        || make_dir(path, err) < 0 || enable(path, line, err) < 0)
        return -1;
    for (i = 0; i < NCTL; i++)
        if ((i == C_CORE || (cg->mask & ctls[i].bit))
            && !(cg->base[i] = strdup(path)))
            return crater_errorf(err, CRATER_ENOMEM, "cgroup: out of memory");
    cg->burst = has_file(path, "cpu.max.burst");
    cg->noswap = has_file(path, "memory.swap.max");
    cg->cgkill = has_file(path, "cgroup.kill");
    return 0;
}

/* 1 = v2 set up, 0 = not v2 here, -1 = v2 but setup failed. */
static int try_v2(crater_cgroups_t *cg,
                  const char *root,
                  const char *parent,
                  crater_error_t *err)
{
    char path[PATHLEN], *list;
    int i;

    if (join(path, root, "cgroup.controllers", NULL, err) < 0)
        return -1;
    if (read_text(path, &list, NULL) < 0)
        return 0;
    for (i = 0; i < C_CORE; i++)
        if (ctls[i].v2 && has_word(list, ctls[i].v2))
            cg->mask |= ctls[i].bit;
    free(list);
    if (!(cg->mask & (CRATER_CG_CPU | CRATER_CG_MEMORY))) {
        cg->mask = 0;
        return 0;
    }
    cg->ver = CRATER_CG_V2;
    return v2_setup(cg, root, parent, err) < 0 ? -1 : 1;
}

/* ---- opening: v1 ---- */

/* Mount point of the v1 hierarchy holding ctl, under root, from
   /proc/self/mountinfo ("... mountpoint opts - cgroup src rw,cpu,cpuacct"). */
static bool mountinfo_find(const char *root, const char *ctl, char *out)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[4096], mnt[PATHLEN], fstype[64], super[1024], *dash;
    size_t rl = strlen(root);
    bool found = false;

    while (f && !found && fgets(line, sizeof(line), f)) {
        dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1
            || sscanf(dash + 3, "%63s %*s %1023s", fstype, super) != 2)
            continue;
        if (strcmp(fstype, "cgroup") != 0 || strncmp(mnt, root, rl) != 0
            || (mnt[rl] != '/' && mnt[rl] != '\0'))
            continue;
        for (char *sv, *t = strtok_r(super, ",", &sv); t && !found;
             t = strtok_r(NULL, ",", &sv))
            found = strcmp(t, ctl) == 0;
        if (found)
            strcpy(out, mnt);
    }
    if (f)
        fclose(f);
    return found;
}

static bool find_v1(const char *root, const char *ctl, char *out)
{
    char probe[PATHLEN];

    if (mountinfo_find(root, ctl, out))
        return true;
    snprintf(probe, sizeof(probe), "%s/%s/cgroup.procs", root, ctl);
    if (!exists(probe))
        return false;
    snprintf(out, PATHLEN, "%s/%s", root, ctl);
    return true;
}

/* v1 cpuset children start with empty cpus/mems and cannot take tasks:
   copy the parent's values down (only where still empty). */
static int cpuset_inherit(const char *dir, crater_error_t *err)
{
    static const char *const files[] = {"cpuset.cpus", "cpuset.mems"};
    char path[PATHLEN], up[PATHLEN], *val, *mine;
    bool empty;
    int i, rc;

    for (i = 0; i < 2; i++) {
        snprintf(up, sizeof(up), "%s/../%s", dir, files[i]);
        if (join(path, dir, files[i], NULL, err) < 0
            || read_text(path, &mine, err) < 0)
            return -1;
        empty = mine[0] == '\0' || mine[0] == '\n';
        free(mine);
        if (!empty)
            continue;
        if (read_text(up, &val, err) < 0)
            return -1;
        rc = write_str(path, val, err);
        free(val);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static void trim(char *s)
{
    size_t n = strlen(s);

    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
        s[--n] = '\0';
}

/* The agent's own cpuset (v1): a task asking for the same one gets no
   cpuset cgroup of its own (make_task_dirs). */
static int parent_cpuset(crater_cgroups_t *cg, crater_error_t *err)
{
    char path[PATHLEN];

    if (join(path, cg->base[C_CPUSET], "cpuset.cpus", NULL, err) < 0
        || read_text(path, &cg->v1_cpus, err) < 0
        || join(path, cg->base[C_CPUSET], "cpuset.mems", NULL, err) < 0
        || read_text(path, &cg->v1_mems, err) < 0)
        return -1;
    trim(cg->v1_cpus);
    trim(cg->v1_mems);
    return 0;
}

static int try_v1(crater_cgroups_t *cg,
                  const char *root,
                  const char *parent,
                  crater_error_t *err)
{
    char mnt[PATHLEN], path[PATHLEN];
    int i;

    for (i = 0; i < C_CORE; i++) {
        if (!find_v1(root, ctls[i].v1, mnt))
            continue;
        if (join(path, mnt, parent, NULL, err) < 0 || make_dir(path, err) < 0
            || (i == C_CPUSET && cpuset_inherit(path, err) < 0))
            return -1;
        if (!(cg->base[i] = strdup(path)))
            return crater_errorf(err, CRATER_ENOMEM, "cgroup: out of memory");
        cg->mask |= ctls[i].bit;
    }
    if (!cg->mask)
        return 0;
    cg->ver = CRATER_CG_V1;
    if (cg->base[C_CPUSET] && parent_cpuset(cg, err) < 0)
        return -1;
    cg->burst =
        cg->base[C_CPU] && has_file(cg->base[C_CPU], "cpu.cfs_burst_us");
    cg->noswap = cg->base[C_MEMORY]
                 && has_file(cg->base[C_MEMORY], "memory.memsw.limit_in_bytes");
    return 1;
}

crater_cgroups_t *crater_cg_open(const char *root,
                                 const char *parent,
                                 crater_error_t *err)
{
    crater_cgroups_t *cg = calloc(1, sizeof(*cg));
    int rc;

    if (!cg) {
        crater_errorf(err, CRATER_ENOMEM, "cgroup: out of memory");
        return NULL;
    }
    root = root ? root : "/sys/fs/cgroup";
    if (!parent || !*parent || strchr(parent, '/') || !strcmp(parent, "..")
        || !strcmp(parent, ".")) {
        crater_errorf(err,
                      CRATER_EINVAL,
                      "cgroup parent '%s' is not a name",
                      parent ? parent : "(null)");
        free(cg);
        return NULL;
    }
    rc = try_v2(cg, root, parent, err);
    if (rc == 0)
        rc = try_v1(cg, root, parent, err);
    if (rc < 0) {
        crater_cg_close(cg);
        return NULL;
    }
    return cg; /* rc == 0: NONE */
}

void crater_cg_close(crater_cgroups_t *cg)
{
    int i;

    if (!cg)
        return;
    for (i = 0; i < NCTL; i++)
        free(cg->base[i]);
    free(cg->v1_cpus);
    free(cg->v1_mems);
    free(cg);
}

crater_cg_version_t crater_cg_version(const crater_cgroups_t *cg)
{
    return cg->ver;
}

unsigned crater_cg_controllers(const crater_cgroups_t *cg)
{
    return cg->mask;
}

/* ---- per-task paths ---- */

static int check_task(const char *task, crater_error_t *err)
{
    size_t n = task ? strlen(task) : 0;

    if (n == 0 || n > 64 || !strcmp(task, ".") || !strcmp(task, "..")
        || strspn(task,
                  "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                  "0123456789._-")
               != n)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "cgroup task name '%s' is not 1-64 characters "
                             "of [A-Za-z0-9._-]",
                             task ? task : "(null)");
    return 0;
}

/* <base of ctl>/<task>/<file> (file may be NULL). */
static int task_path(const crater_cgroups_t *cg,
                     int c,
                     const char *task,
                     const char *file,
                     char *buf,
                     crater_error_t *err)
{
    if (!cg->base[c])
        return crater_errorf(err,
                             CRATER_EUNAVAIL,
                             "cgroup: the %s controller is not available",
                             c == C_CORE               ? "core"
                             : cg->ver == CRATER_CG_V2 ? ctls[c].v2
                                                       : ctls[c].v1);
    return join(buf, cg->base[c], task, file, err);
}

static int task_write(const crater_cgroups_t *cg,
                      int c,
                      const char *task,
                      const char *file,
                      const char *val,
                      crater_error_t *err)
{
    char path[PATHLEN];

    if (task_path(cg, c, task, file, path, err) < 0)
        return -1;
    return write_str(path, val, err);
}

int crater_cg_dir(const crater_cgroups_t *cg,
                  const char *ctl,
                  const char *task,
                  char *buf,
                  size_t n,
                  crater_error_t *err)
{
    char path[PATHLEN];
    int i, c = -1;

    if (check_task(task, err) < 0)
        return -1;
    for (i = 0; i < NCTL && c < 0; i++)
        if ((ctls[i].v1 && !strcmp(ctl, ctls[i].v1))
            || (ctls[i].v2 && !strcmp(ctl, ctls[i].v2)))
            c = i;
    if (cg->ver == CRATER_CG_V2)
        c = C_CORE; /* one directory */
    if (c < 0 || cg->ver == CRATER_CG_NONE)
        return crater_errorf(err,
                             CRATER_EUNAVAIL,
                             "cgroup: no '%s' controller here",
                             ctl);
    if (task_path(cg, c, task, NULL, path, err) < 0)
        return -1;
    if (strlen(path) >= n)
        return crater_errorf(err, CRATER_ELIMIT, "%s: buffer too small", path);
    strcpy(buf, path);
    return 0;
}

/* Distinct controller slots (co-mounted v1 and v2 share one base). */
static size_t distinct(const crater_cgroups_t *cg, int *out)
{
    size_t n = 0, j;
    int i;

    for (i = 0; i < NCTL; i++) {
        if (!cg->base[i])
            continue;
        for (j = 0; j < n && strcmp(cg->base[out[j]], cg->base[i]); j++)
            ;
        if (j == n)
            out[n++] = i;
    }
    return n;
}

static bool same_set(const char *want, const char *have)
{
    return !want || (have && strcmp(want, have) == 0);
}

/* v1 hierarchies a task with these limits needs no directory in, as a bit
   per slot: each directory costs a mkdir, its limit writes, an attach and
   an rmdir, about a fifth of a short task's start and end (B3). Without
   one the task stays in the agent's cgroup of that hierarchy: blkio when
   it has no IO limit, cpuset when it asks for the agent's own. */
static unsigned v1_skip(const crater_cgroups_t *cg,
                        const crater_cg_limits_t *lim)
{
    unsigned skip = 0;

    if (cg->ver != CRATER_CG_V1)
        return 0;
    if (!lim->nio)
        skip |= 1u << C_IO;
    if (same_set(lim->cpuset_cpus, cg->v1_cpus)
        && same_set(lim->cpuset_mems, cg->v1_mems))
        skip |= 1u << C_CPUSET;
    return skip;
}

/* The task's directories; returns how many had to be made (a reused
   cgroup someone removed meanwhile comes back with the kernel's
   defaults, not with the limits last written), or -1. */
static int make_task_dirs(const crater_cgroups_t *cg,
                          const char *task,
                          unsigned skip,
                          crater_error_t *err)
{
    char path[PATHLEN];
    int slot[NCTL], made = 0, rc;
    size_t k = distinct(cg, slot), i;

    for (i = 0; i < k; i++) {
        if (skip & (1u << slot[i]))
            continue;
        if (join(path, cg->base[slot[i]], task, NULL, err) < 0
            || (rc = make_dir(path, err)) < 0)
            return -1;
        made += rc;
    }
    return made;
}

/* ---- writing limits ---- */

static int v2_cpu(const crater_cgroups_t *cg,
                  const char *task,
                  const crater_cg_limits_t *lim,
                  crater_error_t *err)
{
    char val[64];

    if (!lim->cpu_quota_milli && !lim->cpu_burst_us && !lim->cpu_period_us)
        return 0;
    crater_cg_format_cpu_max(lim, val, sizeof(val));
    if (task_write(cg, C_CPU, task, "cpu.max", val, err) < 0)
        return -1;
    if (!cg->burst || !lim->cpu_burst_us)
        return 0;
    snprintf(val, sizeof(val), "%llu", (unsigned long long)lim->cpu_burst_us);
    return task_write(cg, C_CPU, task, "cpu.max.burst", val, err);
}

static int v2_mem(const crater_cgroups_t *cg,
                  const char *task,
                  const crater_cg_limits_t *lim,
                  crater_error_t *err)
{
    char val[32];

    if (!lim->mem_bytes)
        return 0;
    snprintf(val, sizeof(val), "%llu", (unsigned long long)lim->mem_bytes);
    if (task_write(cg, C_MEMORY, task, "memory.max", val, err) < 0)
        return -1;
    return cg->noswap
               ? task_write(cg, C_MEMORY, task, "memory.swap.max", "0", err)
               : 0;
}

static int v2_cpuset(const crater_cgroups_t *cg,
                     const char *task,
                     const crater_cg_limits_t *lim,
                     crater_error_t *err)
{
    if (lim->cpuset_cpus
        && task_write(cg, C_CPUSET, task, "cpuset.cpus", lim->cpuset_cpus, err)
               < 0)
        return -1;
    if (lim->cpuset_mems
        && task_write(cg, C_CPUSET, task, "cpuset.mems", lim->cpuset_mems, err)
               < 0)
        return -1;
    return 0;
}

/* One write() per device: the kernel parses one line per write. */
static int v2_io(const crater_cgroups_t *cg,
                 const char *task,
                 const crater_cg_limits_t *lim,
                 crater_error_t *err)
{
    char path[PATHLEN], line[160];
    size_t i;
    int fd, len;

    if (!lim->nio)
        return 0;
    if (task_path(cg, C_IO, task, "io.max", path, err) < 0)
        return -1;
    if ((fd = open_for_write(path)) < 0)
        return sys_err(err, path);
    for (i = 0; i < lim->nio && i < 8; i++) {
        len = crater_cg_format_io_max(&lim->io[i], line, sizeof(line));
        if (write(fd, line, (size_t)len) != len) {
            sys_err(err, path);
            close(fd);
            return -1;
        }
    }
    close(fd);
    return 0;
}

static int v1_cpu(const crater_cgroups_t *cg,
                  const char *task,
                  const crater_cg_limits_t *lim,
                  crater_error_t *err)
{
    uint32_t period = period_of(lim);
    char val[32];

    if (!lim->cpu_quota_milli && !lim->cpu_burst_us && !lim->cpu_period_us)
        return 0;
    snprintf(val, sizeof(val), "%u", period);
    if (task_write(cg, C_CPU, task, "cpu.cfs_period_us", val, err) < 0)
        return -1;
    if (lim->cpu_quota_milli)
        snprintf(val,
                 sizeof(val),
                 "%llu",
                 (unsigned long long)quota_us(lim, period));
    else
        snprintf(val, sizeof(val), "-1");
    if (task_write(cg, C_CPU, task, "cpu.cfs_quota_us", val, err) < 0)
        return -1;
    if (!cg->burst || !lim->cpu_burst_us)
        return 0;
    snprintf(val, sizeof(val), "%llu", (unsigned long long)lim->cpu_burst_us);
    return task_write(cg, C_CPU, task, "cpu.cfs_burst_us", val, err);
}

/* memsw must stay >= limit at every step: lift it, set the limit, then
   pin memsw to the limit so the task cannot escape into swap. */
static int v1_mem(const crater_cgroups_t *cg,
                  const char *task,
                  const crater_cg_limits_t *lim,
                  crater_error_t *err)
{
    static const char sw[] = "memory.memsw.limit_in_bytes";
    char val[32];

    if (!lim->mem_bytes)
        return 0;
    snprintf(val, sizeof(val), "%llu", (unsigned long long)lim->mem_bytes);
    if (cg->noswap && task_write(cg, C_MEMORY, task, sw, "-1", err) < 0)
        return -1;
    if (task_write(cg, C_MEMORY, task, "memory.limit_in_bytes", val, err) < 0)
        return -1;
    return cg->noswap ? task_write(cg, C_MEMORY, task, sw, val, err) : 0;
}

static int v1_cpuset(const crater_cgroups_t *cg,
                     const char *task,
                     const crater_cg_limits_t *lim,
                     crater_error_t *err)
{
    char path[PATHLEN];

    if (!cg->base[C_CPUSET]) /* limits asked for fail in task_write */
        return lim->cpuset_cpus || lim->cpuset_mems
                   ? task_path(cg, C_CPUSET, task, NULL, path, err)
                   : 0;
    if (lim->cpuset_cpus
        && task_write(cg, C_CPUSET, task, "cpuset.cpus", lim->cpuset_cpus, err)
               < 0)
        return -1;
    if (lim->cpuset_mems
        && task_write(cg, C_CPUSET, task, "cpuset.mems", lim->cpuset_mems, err)
               < 0)
        return -1;
    return task_path(cg, C_CPUSET, task, NULL, path, err) < 0
               ? -1
               : cpuset_inherit(path, err);
}

static int v1_io(const crater_cgroups_t *cg,
                 const char *task,
                 const crater_cg_limits_t *lim,
                 crater_error_t *err)
{
    static const char *const files[4] = {"blkio.throttle.read_bps_device",
                                         "blkio.throttle.write_bps_device",
                                         "blkio.throttle.read_iops_device",
                                         "blkio.throttle.write_iops_device"};
    char val[64];
    size_t i, f;

    for (i = 0; i < lim->nio && i < 8; i++) {
        const crater_cg_io_t *io = &lim->io[i];
        uint64_t v[4] = {io->rbps, io->wbps, io->riops, io->wiops};

        for (f = 0; f < 4; f++) {
            if (!v[f])
                continue;
            snprintf(val,
                     sizeof(val),
                     "%u:%u %llu",
                     io->major,
                     io->minor,
                     (unsigned long long)v[f]);
            if (task_write(cg, C_IO, task, files[f], val, err) < 0)
                return -1;
        }
    }
    return 0;
}

/* pids.max: the same file on v1 and v2. */
static int pids_max(const crater_cgroups_t *cg,
                    const char *task,
                    const crater_cg_limits_t *lim,
                    crater_error_t *err)
{
    char val[32];

    if (!lim->pids_max)
        return 0;
    snprintf(val, sizeof(val), "%llu", (unsigned long long)lim->pids_max);
    return task_write(cg, C_PIDS, task, "pids.max", val, err);
}

/* ---- reuse: only what changed is written ---- */

/* The limits a fresh directory has: none (the kernel's defaults). */
static const crater_cg_limits_t no_limits;

static bool cpu_unset(const crater_cg_limits_t *l)
{
    return !l->cpu_quota_milli && !l->cpu_burst_us && !l->cpu_period_us;
}

static bool cpu_same(const crater_cg_limits_t *a, const crater_cg_limits_t *b)
{
    if (cpu_unset(a) || cpu_unset(b))
        return cpu_unset(a) && cpu_unset(b);
    return a->cpu_quota_milli == b->cpu_quota_milli
           && period_of(a) == period_of(b)
           && a->cpu_burst_us == b->cpu_burst_us;
}

/* Back to the kernel's defaults: no quota, no burst, period 100 ms. */
static int cpu_reset(const crater_cgroups_t *cg,
                     const char *task,
                     crater_error_t *err)
{
    bool v2 = cg->ver == CRATER_CG_V2;

    if (v2 ? task_write(cg, C_CPU, task, "cpu.max", "max 100000", err) < 0
           : task_write(cg, C_CPU, task, "cpu.cfs_quota_us", "-1", err) < 0
                 || task_write(cg,
                               C_CPU,
                               task,
                               "cpu.cfs_period_us",
                               "100000",
                               err)
                        < 0)
        return -1;
    if (!cg->burst)
        return 0;
    return task_write(cg,
                      C_CPU,
                      task,
                      v2 ? "cpu.max.burst" : "cpu.cfs_burst_us",
                      "0",
                      err);
}

/* No memory limit: v1 memsw first (it must stay >= the limit). */
static int mem_reset(const crater_cgroups_t *cg,
                     const char *task,
                     crater_error_t *err)
{
    if (cg->ver == CRATER_CG_V2)
        return task_write(cg, C_MEMORY, task, "memory.max", "max", err) < 0
                       || (cg->noswap
                           && task_write(cg,
                                         C_MEMORY,
                                         task,
                                         "memory.swap.max",
                                         "max",
                                         err)
                                  < 0)
                   ? -1
                   : 0;
    if (cg->noswap
        && task_write(cg,
                      C_MEMORY,
                      task,
                      "memory.memsw.limit_in_bytes",
                      "-1",
                      err)
               < 0)
        return -1;
    return task_write(cg, C_MEMORY, task, "memory.limit_in_bytes", "-1", err);
}

/* The CPU, memory and pids limits, each group written only when it
   differs from prev (a fresh directory: no_limits), or every group (all). */
static int write_base(const crater_cgroups_t *cg,
                      const char *task,
                      const crater_cg_limits_t *lim,
                      const crater_cg_limits_t *prev,
                      bool all,
                      crater_error_t *err)
{
    bool v2 = cg->ver == CRATER_CG_V2;
    /* a limit to reset needs its controller (all: maybe never set) */
    bool cpu = !cpu_same(lim, prev) || (all && cg->base[C_CPU]);
    bool mem = lim->mem_bytes != prev->mem_bytes || (all && cg->base[C_MEMORY]);
    bool pids = lim->pids_max != prev->pids_max || (all && cg->base[C_PIDS]);

    if (cpu
        && (cpu_unset(lim) ? cpu_reset(cg, task, err)
            : v2           ? v2_cpu(cg, task, lim, err)
                           : v1_cpu(cg, task, lim, err))
               < 0)
        return -1;
    if (mem
        && (!lim->mem_bytes ? mem_reset(cg, task, err)
            : v2            ? v2_mem(cg, task, lim, err)
                            : v1_mem(cg, task, lim, err))
               < 0)
        return -1;
    if (pids
        && (lim->pids_max
                ? pids_max(cg, task, lim, err)
                : task_write(cg, C_PIDS, task, "pids.max", "max", err))
               < 0)
        return -1;
    return 0;
}

int crater_cg_update(crater_cgroups_t *cg,
                     const char *task,
                     const crater_cg_limits_t *lim,
                     const crater_cg_limits_t *prev,
                     crater_error_t *err)
{
    unsigned skip = v1_skip(cg, lim);
    int rc, made;

    if (cg->ver == CRATER_CG_NONE)
        return 0;
    if (check_task(task, err) < 0
        || (made = make_task_dirs(cg, task, skip, err)) < 0)
        return -1;
    /* a reused cgroup someone removed meanwhile (made again, in some
       hierarchies): every limit written, whatever prev says */
    rc = write_base(cg, task, lim, prev ? prev : &no_limits, prev && made, err)
         < 0;
    if (!rc && cg->ver == CRATER_CG_V2)
        rc = v2_cpuset(cg, task, lim, err) < 0 || v2_io(cg, task, lim, err) < 0;
    else if (!rc)
        rc = (!(skip & (1u << C_CPUSET)) && v1_cpuset(cg, task, lim, err) < 0)
             || v1_io(cg, task, lim, err) < 0;
    if (rc)
        crater_cg_destroy(cg, task, NULL); /* no half-made cgroup left */
    return rc ? -1 : 0;
}

int crater_cg_create(crater_cgroups_t *cg,
                     const char *task,
                     const crater_cg_limits_t *lim,
                     crater_error_t *err)
{
    return crater_cg_update(cg, task, lim, NULL, err);
}

bool crater_cg_plain(const crater_cgroups_t *cg, const crater_cg_limits_t *lim)
{
    if (cg->ver == CRATER_CG_V1)
        return v1_skip(cg, lim) == ((1u << C_IO) | (1u << C_CPUSET));
    return !lim->nio && !lim->cpuset_cpus && !lim->cpuset_mems;
}

/* ---- processes ---- */

void crater_cg_paths_free(char **paths, size_t n)
{
    size_t i;

    for (i = 0; paths && i < n; i++)
        free(paths[i]);
    free(paths);
}

/* The file named file (v1; v2: cgroup.procs) of each hierarchy task is in. */
static int member_paths(crater_cgroups_t *cg,
                        const char *task,
                        const char *file,
                        char ***paths,
                        size_t *n,
                        crater_error_t *err)
{
    char path[PATHLEN];
    int slot[NCTL];
    size_t k, i;

    *paths = NULL;
    *n = 0;
    if (cg->ver == CRATER_CG_NONE)
        return 0;
    if (check_task(task, err) < 0)
        return -1;
    k = distinct(cg, slot);
    if (!(*paths = calloc(k, sizeof(char *))))
        return crater_errorf(err, CRATER_ENOMEM, "cgroup: out of memory");
    for (i = 0; i < k; i++) {
        if (task_path(cg,
                      slot[i],
                      task,
                      cg->ver == CRATER_CG_V1 ? file : "cgroup.procs",
                      path,
                      err)
            < 0) {
            crater_cg_paths_free(*paths, *n);
            *paths = NULL;
            *n = 0;
            return -1;
        }
        if (cg->ver == CRATER_CG_V1 && (slot[i] == C_CPUSET || slot[i] == C_IO)
            && !exists(path))
            continue; /* a hierarchy the task has no directory in */
        if (!((*paths)[*n] = strdup(path))) {
            crater_cg_paths_free(*paths, *n);
            *paths = NULL;
            *n = 0;
            return crater_errorf(err, CRATER_ENOMEM, "cgroup: out of memory");
        }
        (*n)++;
    }
    return 0;
}

/* v1: "tasks", to which a thread writes "0" to move itself alone: the
 * kernel then skips the global lock that moving a whole process takes
 * (cgroup_threadgroup_rwsem, written: it waits for every fork, exec and
 * exit in flight and excludes every other move), which left the CPUs
 * idle 13-15% of a 1,000-task array on v1 (perf, B3 session 10). A child
 * between fork and exec has one thread, so moving it moves the process. */
int crater_cg_procs_paths(crater_cgroups_t *cg,
                          const char *task,
                          char ***paths,
                          size_t *n,
                          crater_error_t *err)
{
    return member_paths(cg, task, "tasks", paths, n, err);
}

int crater_cg_attach(crater_cgroups_t *cg,
                     const char *task,
                     pid_t pid,
                     crater_error_t *err)
{
    char **paths, val[24];
    size_t n, i;
    int rc = 0;

    if (member_paths(cg, task, "cgroup.procs", &paths, &n, err) < 0)
        return -1;
    snprintf(val, sizeof(val), "%ld", (long)pid);
    for (i = 0; i < n && rc == 0; i++)
        rc = write_str(paths[i], val, err);
    crater_cg_paths_free(paths, n);
    return rc;
}

static int list_slot(const crater_cgroups_t *cg)
{
    if (cg->base[C_CORE])
        return C_CORE;
    if (cg->base[C_MEMORY])
        return C_MEMORY;
    if (cg->base[C_PIDS])
        return C_PIDS;
    for (int i = 0; i < NCTL; i++)
        if (cg->base[i])
            return i;
    return -1;
}

int crater_cg_pids(crater_cgroups_t *cg,
                   const char *task,
                   pid_t *pids,
                   size_t max,
                   size_t *n,
                   crater_error_t *err)
{
    char path[PATHLEN], *text;
    int rc;

    *n = 0;
    if (cg->ver == CRATER_CG_NONE)
        return 0;
    if (check_task(task, err) < 0
        || task_path(cg, list_slot(cg), task, "cgroup.procs", path, err) < 0
        || read_text(path, &text, err) < 0)
        return -1;
    rc = crater_cg_parse_procs(path, text, pids, max, n, err);
    free(text);
    return rc;
}

static void nap_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};

    nanosleep(&ts, NULL);
}

int crater_cg_kill(crater_cgroups_t *cg,
                   const char *task,
                   int sig,
                   crater_error_t *err)
{
    pid_t pids[1024];
    size_t n, i;
    int round;

    if (cg->ver == CRATER_CG_NONE)
        return 0;
    if (sig == SIGKILL && cg->ver == CRATER_CG_V2 && cg->cgkill)
        return check_task(task, err) < 0
                   ? -1
                   : task_write(cg, C_CORE, task, "cgroup.kill", "1", err);
    for (round = 0; round < 8; round++) {
        if (crater_cg_pids(cg, task, pids, 1024, &n, err) < 0)
            return -1;
        if (n == 0)
            break;
        for (i = 0; i < n && i < 1024; i++)
            if (kill(pids[i], sig) < 0 && errno != ESRCH)
                return crater_errorf(err,
                                     CRATER_EPERM,
                                     "kill %ld: %s",
                                     (long)pids[i],
                                     strerror(errno));
        if (sig != SIGKILL)
            break; /* other signals once: no double SIGTERM */
        nap_ms(2);
    }
    return 0;
}

/* ---- counters ---- */

static int read_key(const crater_cgroups_t *cg,
                    int c,
                    const char *task,
                    const char *file,
                    const char *key,
                    uint64_t *v,
                    crater_error_t *err)
{
    char path[PATHLEN], *text;
    int rc;

    if (task_path(cg, c, task, file, path, err) < 0
        || read_text(path, &text, err) < 0)
        return -1;
    rc = crater_cg_parse_keyed(path, text, key, v, err);
    free(text);
    return rc;
}

/* A file holding one number (cpuacct.usage, memory.usage_in_bytes). */
static int read_u64(const crater_cgroups_t *cg,
                    int c,
                    const char *task,
                    const char *file,
                    uint64_t *v,
                    crater_error_t *err)
{
    char path[PATHLEN], *text, *end;

    if (task_path(cg, c, task, file, path, err) < 0
        || read_text(path, &text, err) < 0)
        return -1;
    errno = 0;
    *v = strtoull(text, &end, 10);
    if (errno || end == text || (*end && *end != '\n')) {
        free(text);
        return crater_errorf(err, CRATER_EPARSE, "%s:1: not a number", path);
    }
    free(text);
    return 0;
}

int crater_cg_oom_kills(crater_cgroups_t *cg,
                        const char *task,
                        uint64_t *count,
                        crater_error_t *err)
{
    crater_error_t e;
    int rc;

    *count = 0;
    if (cg->ver == CRATER_CG_NONE)
        return 0;
    if (check_task(task, err) < 0)
        return -1;
    rc = read_key(cg,
                  C_MEMORY,
                  task,
                  cg->ver == CRATER_CG_V2 ? "memory.events"
                                          : "memory.oom_control",
                  "oom_kill",
                  count,
                  &e);
    if (rc < 0 && e.errnum == CRATER_ENOENT)
        e.errnum = CRATER_EUNAVAIL; /* v1 before Linux 4.13 */
    if (rc < 0 && err)
        *err = e;
    return rc;
}

int crater_cg_mem_peak(crater_cgroups_t *cg,
                       const char *task,
                       uint64_t *bytes,
                       crater_error_t *err)
{
    *bytes = 0;
    if (cg->ver == CRATER_CG_NONE || !cg->base[C_MEMORY])
        return crater_errorf(err, CRATER_EUNAVAIL, "cgroup: no memory");
    if (check_task(task, err) < 0)
        return -1;
    return read_u64(cg,
                    C_MEMORY,
                    task,
                    cg->ver == CRATER_CG_V2 ? "memory.peak"
                                            : "memory.max_usage_in_bytes",
                    bytes,
                    err);
}

int crater_cg_usage(crater_cgroups_t *cg,
                    const char *task,
                    uint64_t *cpu_ns,
                    uint64_t *mem_bytes,
                    crater_error_t *err)
{
    uint64_t us;

    *cpu_ns = *mem_bytes = UINT64_MAX;
    if (cg->ver == CRATER_CG_NONE)
        return 0;
    if (check_task(task, err) < 0)
        return -1;
    if (cg->ver == CRATER_CG_V2) {
        if (read_key(cg, C_CORE, task, "cpu.stat", "usage_usec", &us, err) < 0)
            return -1;
        *cpu_ns = us * 1000;
    } else if (cg->base[C_CPUACCT]
               && read_u64(cg, C_CPUACCT, task, "cpuacct.usage", cpu_ns, err)
                      < 0)
        return -1;
    if (!cg->base[C_MEMORY])
        return 0;
    return read_u64(cg,
                    C_MEMORY,
                    task,
                    cg->ver == CRATER_CG_V2 ? "memory.current"
                                            : "memory.usage_in_bytes",
                    mem_bytes,
                    err);
}

/* ---- reuse checks ---- */

bool crater_cg_reusable(crater_cgroups_t *cg,
                        const char *task,
                        uint64_t max_mem)
{
    uint64_t ooms = 0, mem = 0;
    pid_t pid;
    size_t n = 1;

    if (cg->ver == CRATER_CG_NONE)
        return true;
    if (crater_cg_pids(cg, task, &pid, 1, &n, NULL) < 0 || n > 0)
        return false;
    /* killed processes not yet reaped are gone from cgroup.procs but
       still count against the next task's pids.max */
    if (cg->base[C_PIDS]
        && (read_u64(cg, C_PIDS, task, "pids.current", &mem, NULL) < 0
            || mem > 0))
        return false;
    if (!cg->base[C_MEMORY])
        return true;
    return crater_cg_oom_kills(cg, task, &ooms, NULL) == 0 && ooms == 0
           && read_u64(cg,
                       C_MEMORY,
                       task,
                       cg->ver == CRATER_CG_V2 ? "memory.current"
                                               : "memory.usage_in_bytes",
                       &mem,
                       NULL)
                  == 0
           && mem <= max_mem;
}

static bool listed(char **v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i], name))
            return true;
    return false;
}

/* Append the directories of base starting with prefix, once each. */
static int list_dir(const char *base,
                    const char *prefix,
                    char ***v,
                    size_t *n,
                    size_t *cap,
                    crater_error_t *err)
{
    size_t plen = strlen(prefix);
    struct dirent *e;
    char **nv;
    DIR *d;

    if (!(d = opendir(base)))
        return errno == ENOENT ? 0 : sys_err(err, base);
    while ((e = readdir(d))) {
        if (e->d_type != DT_DIR || strncmp(e->d_name, prefix, plen)
            || listed(*v, *n, e->d_name))
            continue;
        if (*n == *cap) {
            if (!(nv = realloc(*v, (*cap ? *cap * 2 : 16) * sizeof(**v))))
                break;
            *v = nv;
            *cap = *cap ? *cap * 2 : 16;
        }
        if (!((*v)[*n] = strdup(e->d_name)))
            break;
        (*n)++;
    }
    closedir(d);
    return e ? crater_errorf(err, CRATER_ENOMEM, "cgroup: out of memory") : 0;
}

int crater_cg_list(crater_cgroups_t *cg,
                   const char *prefix,
                   char ***names,
                   size_t *n,
                   crater_error_t *err)
{
    int slot[NCTL];
    size_t k, i, cap = 0;

    *names = NULL;
    *n = 0;
    if (cg->ver == CRATER_CG_NONE)
        return 0;
    k = distinct(cg, slot);
    for (i = 0; i < k; i++)
        if (list_dir(cg->base[slot[i]], prefix, names, n, &cap, err) < 0) {
            crater_cg_paths_free(*names, *n);
            *names = NULL;
            *n = 0;
            return -1;
        }
    return 0;
}

/* ---- removal ---- */

/* The tests' fake tree holds plain files; a real cgroupfs directory
   cannot (its files vanish with rmdir). */
static void empty_fake_dir(const char *dir)
{
    struct statfs fs;
    struct dirent *e;
    char path[PATHLEN];
    DIR *d;

    if (statfs(dir, &fs) < 0 || fs.f_type == CGROUP_SUPER_MAGIC
        || fs.f_type == CGROUP2_SUPER_MAGIC || !(d = opendir(dir)))
        return;
    while ((e = readdir(d)))
        if (e->d_type == DT_REG
            && snprintf(path, sizeof(path), "%s/%s", dir, e->d_name)
                   < (int)sizeof(path))
            unlink(path);
    closedir(d);
}

static int remove_dir(const char *path, int max_tries, crater_error_t *err)
{
    int tries;

    empty_fake_dir(path);
    for (tries = 0; tries < max_tries; tries++) {
        if (rmdir(path) == 0 || errno == ENOENT)
            return 0;
        if (errno != EBUSY || tries + 1 == max_tries)
            break;
        nap_ms(10); /* the last exiting task is still being released */
    }
    return sys_err(err, path);
}

static int destroy(crater_cgroups_t *cg,
                   const char *task,
                   int max_tries,
                   crater_error_t *err)
{
    char path[PATHLEN];
    int slot[NCTL], rc = 0;
    size_t k, i;

    if (cg->ver == CRATER_CG_NONE)
        return 0;
    if (check_task(task, err) < 0)
        return -1;
    k = distinct(cg, slot);
    for (i = 0; i < k; i++)
        if (task_path(cg, slot[i], task, NULL, path, err) < 0
            || remove_dir(path, max_tries, err) < 0)
            rc = -1; /* keep going: remove what can be removed */
    return rc;
}

int crater_cg_destroy(crater_cgroups_t *cg,
                      const char *task,
                      crater_error_t *err)
{
    return destroy(cg, task, 20, err);
}

int crater_cg_destroy_nowait(crater_cgroups_t *cg,
                             const char *task,
                             crater_error_t *err)
{
    return destroy(cg, task, 1, err);
}

int crater_cg_destroy_parent(crater_cgroups_t *cg, crater_error_t *err)
{
    int slot[NCTL], rc = 0;
    size_t k, i;

    if (cg->ver == CRATER_CG_NONE)
        return 0;
    k = distinct(cg, slot);
    for (i = 0; i < k; i++)
        if (remove_dir(cg->base[slot[i]], 20, err) < 0)
            rc = -1;
    return rc;
}

/* ---- devices ---- */

int crater_cg_disk_of_path(const char *path,
                           uint32_t *major_out,
                           uint32_t *minor_out,
                           crater_error_t *err)
{
    char sys[PATHLEN], *text;
    unsigned ma, mi;
    struct stat st;

    if (stat(path, &st) < 0)
        return sys_err(err, path);
    ma = major(st.st_dev);
    mi = minor(st.st_dev);
    snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u/partition", ma, mi);
    if (!exists(sys)) {
        sys[strlen(sys) - strlen("/partition")] = '\0';
        if (!exists(sys))
            return crater_errorf(err,
                                 CRATER_EUNAVAIL,
                                 "%s is on device %u:%u, not a block device",
                                 path,
                                 ma,
                                 mi);
        *major_out = ma;
        *minor_out = mi;
        return 0;
    }
    /* a partition: its directory's parent is the whole disk */
    snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u/../dev", ma, mi);
    if (read_text(sys, &text, err) < 0)
        return -1;
    if (sscanf(text, "%u:%u", &ma, &mi) != 2) {
        free(text);
        return crater_errorf(err, CRATER_EPARSE, "%s:1: expected MAJ:MIN", sys);
    }
    free(text);
    *major_out = ma;
    *minor_out = mi;
    return 0;
}
