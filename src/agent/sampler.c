/* sampler.c - /proc counters -> smoothed host load (see sampler.h).
 *
 * The kernel exports cumulative counters; a sample is the difference
 * between two reads divided by the wall time between them. Each sample is
 * pushed into a ring of `window` entries and crater_sampler_get() averages
 * the ring, so one burst does not make a node look full (the seeds saw a
 * 1 s sampler report 95% GPU busy where nvidia-smi said 65%).
 *
 * The workload is one call every few seconds on a handful of small files,
 * so the code reads whole files into memory and parses them with strtoull;
 * clarity beats speed here. Parsers are strict: a line that does not look
 * like the kernel's format is an error naming file and line, never skipped,
 * because a misread counter would silently misplace jobs.
 */
#include "agent/sampler.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FILE (4u << 20) /* diskstats with thousands of loop devices */
#define SECTOR 512.0

struct entry {
    bool rates; /* cpu and disks valid (not the first sample) */
    double cpu, mem;
    size_t ndisks;
    crater_disk_sample_t disks[CRATER_SAMPLER_MAX_DISKS];
};

struct crater_sampler {
    char *root;
    unsigned window;
    struct entry *ring;
    unsigned head, count; /* head = next slot to write */
    bool have_prev;
    uint64_t prev_ms, prev_busy, prev_total;
    size_t prev_ndisks;
    crater_diskstat_t prev[CRATER_SAMPLER_MAX_DISKS];
    uint64_t mem_total, mem_avail;
};

/* ---- line iteration ---- */

struct lines {
    const char *p;
    unsigned lineno;
    char buf[1024];
};

/* Copy the next line into l->buf (truncated at 1023 chars). */
static bool next_line(struct lines *l)
{
    const char *nl;
    size_t len;

    if (!l->p || !*l->p)
        return false;
    nl = strchr(l->p, '\n');
    len = nl ? (size_t)(nl - l->p) : strlen(l->p);
    if (len >= sizeof(l->buf))
        len = sizeof(l->buf) - 1;
    memcpy(l->buf, l->p, len);
    l->buf[len] = '\0';
    l->p = nl ? nl + 1 : NULL;
    l->lineno++;
    return true;
}

/* Parse one unsigned decimal at *pp, skipping leading blanks. */
static bool take_u64(char **pp, uint64_t *v)
{
    char *end;

    while (**pp == ' ' || **pp == '\t')
        (*pp)++;
    if (!isdigit((unsigned char)**pp))
        return false;
    errno = 0;
    *v = strtoull(*pp, &end, 10);
    if (errno || (*end && *end != ' ' && *end != '\t'))
        return false;
    *pp = end;
    return true;
}

static bool rest_blank(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r')
        p++;
    return *p == '\0';
}

/* ---- /proc/stat ---- */

static int stat_line(const char *name,
                     struct lines *l,
                     uint64_t *busy,
                     uint64_t *total,
                     crater_error_t *err)
{
    uint64_t f[8] = {0}; /* user nice system idle iowait irq softirq steal */
    char *p = l->buf + 3;
    unsigned i;

    for (i = 0; i < 8 && !rest_blank(p); i++)
        if (!take_u64(&p, &f[i]))
            return crater_errorf(err,
                                 CRATER_EPARSE,
                                 "%s:%u: cpu field %u is not a number",
                                 name,
                                 l->lineno,
                                 i + 1);
    if (i < 4)
        return crater_errorf(err,
                             CRATER_EPARSE,
                             "%s:%u: cpu line has %u fields, need at least 4",
                             name,
                             l->lineno,
                             i);
    *busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
    *total = *busy + f[3] + f[4];
    return 0;
}

static int stat_parse(const char *name,
                      const char *text,
                      uint64_t *busy,
                      uint64_t *total,
                      crater_error_t *err)
{
    struct lines l = {.p = text};

    while (next_line(&l))
        if (strncmp(l.buf, "cpu ", 4) == 0)
            return stat_line(name, &l, busy, total, err);
    return crater_errorf(err,
                         CRATER_EPARSE,
                         "%s:%u: no aggregate 'cpu' line",
                         name,
                         l.lineno);
}

int crater_proc_stat_parse(const char *text,
                           uint64_t *busy,
                           uint64_t *total,
                           crater_error_t *err)
{
    return stat_parse("stat", text, busy, total, err);
}

/* ---- /proc/meminfo ---- */

/* "Key:   123 kB" or "Key: 123"; value in bytes. */
static int meminfo_line(const char *name,
                        struct lines *l,
                        char **key,
                        uint64_t *val,
                        crater_error_t *err)
{
    char *colon = strchr(l->buf, ':');
    char *p;

    if (!colon || colon == l->buf)
        return crater_errorf(err,
                             CRATER_EPARSE,
                             "%s:%u: expected 'Key: value [kB]'",
                             name,
                             l->lineno);
    *colon = '\0';
    *key = l->buf;
    p = colon + 1;
    if (!take_u64(&p, val))
        return crater_errorf(err,
                             CRATER_EPARSE,
                             "%s:%u: %s: value is not a number",
                             name,
                             l->lineno,
                             l->buf);
    while (*p == ' ')
        p++;
    if (strncmp(p, "kB", 2) == 0) {
        p += 2;
        *val *= 1024;
    }
    if (!rest_blank(p))
        return crater_errorf(err,
                             CRATER_EPARSE,
                             "%s:%u: %s: unexpected '%s' after the value",
                             name,
                             l->lineno,
                             l->buf,
                             p);
    return 0;
}

static int meminfo_parse(const char *name,
                         const char *text,
                         uint64_t *total,
                         uint64_t *avail,
                         crater_error_t *err)
{
    struct lines l = {.p = text};
    uint64_t v, t = 0, a = 0, fallback = 0;
    bool have_avail = false;
    char *key;

    while (next_line(&l)) {
        if (rest_blank(l.buf))
            continue;
        if (meminfo_line(name, &l, &key, &v, err) < 0)
            return -1;
        if (strcmp(key, "MemTotal") == 0)
            t = v;
        else if (strcmp(key, "MemAvailable") == 0)
            a = v, have_avail = true;
        else if (!strcmp(key, "MemFree") || !strcmp(key, "Buffers")
                 || !strcmp(key, "Cached"))
            fallback += v;
    }
    if (t == 0)
        return crater_errorf(err,
                             CRATER_EPARSE,
                             "%s:%u: no MemTotal (or it is 0)",
                             name,
                             l.lineno);
    *total = t;
    *avail = have_avail ? a : fallback;
    if (*avail > t)
        *avail = t;
    return 0;
}

int crater_meminfo_parse(const char *text,
                         uint64_t *total,
                         uint64_t *avail,
                         crater_error_t *err)
{
    return meminfo_parse("meminfo", text, total, avail, err);
}

/* ---- /proc/diskstats ---- */

static bool has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

/* sda1, vdb2, xvda1: letters after a known prefix, then digits. */
static bool letter_disk_partition(const char *name)
{
    static const char *const pre[] = {"sd", "hd", "vd", "xvd"};
    size_t i, n = strlen(name);

    for (i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
        if (has_prefix(name, pre[i]) && n > strlen(pre[i])
            && isdigit((unsigned char)name[n - 1]))
            return true;
    return false;
}

/* nvme0n1p1, mmcblk0p2: "<digit>p<digits>" at the end. */
static bool p_partition(const char *name)
{
    size_t n = strlen(name), i = n;

    while (i > 0 && isdigit((unsigned char)name[i - 1]))
        i--;
    return i < n && i >= 2 && name[i - 1] == 'p'
           && isdigit((unsigned char)name[i - 2]);
}

int crater_disk_is_whole(const char *name)
{
    static const char *const skip[] =
        {"loop", "ram", "zram", "dm-", "sr", "fd"};
    size_t i;

    for (i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
        if (has_prefix(name, skip[i]))
            return 0;
    return !letter_disk_partition(name) && !p_partition(name);
}

static int disk_line(const char *name,
                     struct lines *l,
                     crater_diskstat_t *d,
                     crater_error_t *err)
{
    uint64_t f[11];
    int off = 0;
    unsigned i;
    char *p;

    memset(d, 0, sizeof(*d));
    if (sscanf(l->buf, " %u %u %31s %n", &d->major, &d->minor, d->name, &off)
            != 3
        || off == 0)
        return crater_errorf(err,
                             CRATER_EPARSE,
                             "%s:%u: expected 'major minor name counters...'",
                             name,
                             l->lineno);
    p = l->buf + off;
    for (i = 0; i < 11; i++)
        if (!take_u64(&p, &f[i]))
            return crater_errorf(err,
                                 CRATER_EPARSE,
                                 "%s:%u: %s: counter %u missing or not a "
                                 "number",
                                 name,
                                 l->lineno,
                                 d->name,
                                 i + 1);
    d->rd_ios = f[0];
    d->rd_sectors = f[2];
    d->wr_ios = f[4];
    d->wr_sectors = f[6];
    d->io_ticks_ms = f[9];
    return 0;
}

static int diskstats_parse(const char *name,
                           const char *text,
                           crater_diskstat_t *out,
                           size_t max,
                           size_t *n,
                           crater_error_t *err)
{
    struct lines l = {.p = text};
    crater_diskstat_t d;
    size_t k = 0;

    while (next_line(&l)) {
        if (rest_blank(l.buf))
            continue;
        if (disk_line(name, &l, &d, err) < 0)
            return -1;
        if (!crater_disk_is_whole(d.name))
            continue;
        if (k < max)
            out[k] = d;
        k++;
    }
    *n = k;
    return 0;
}

int crater_diskstats_parse(const char *text,
                           crater_diskstat_t *out,
                           size_t max,
                           size_t *n,
                           crater_error_t *err)
{
    return diskstats_parse("diskstats", text, out, max, n, err);
}

/* ---- files ---- */

/* Read a whole (proc) file; st_size is 0 there, so read until EOF. */
static int read_all(const char *path, char **text, crater_error_t *err)
{
    size_t cap = 8192, len = 0;
    char *buf = malloc(cap), *nb;
    ssize_t r;
    int fd;

    if (!buf)
        return crater_errorf(err, CRATER_ENOMEM, "%s: out of memory", path);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        free(buf);
        return crater_errorf(err, CRATER_EIO, "%s: %s", path, strerror(errno));
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
    close(fd);
    if (r != 0) {
        free(buf);
        return crater_errorf(err,
                             CRATER_EIO,
                             "%s: %s",
                             path,
                             r < 0 ? strerror(errno) : "too large");
    }
    buf[len] = '\0';
    *text = buf;
    return 0;
}

static int read_proc(const crater_sampler_t *s,
                     const char *file,
                     char **text,
                     char *path,
                     size_t pathlen,
                     crater_error_t *err)
{
    snprintf(path, pathlen, "%s/%s", s->root, file);
    return read_all(path, text, err);
}

/* ---- the sampler ---- */

crater_sampler_t *crater_sampler_create(const char *proc_root,
                                        unsigned window,
                                        crater_error_t *err)
{
    crater_sampler_t *s;

    if (window == 0 || window > 100000) {
        crater_errorf_field(err,
                            CRATER_ERANGE,
                            "monitoring.smoothing_window",
                            "smoothing window %u is not in 1..100000",
                            window);
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (s) {
        s->window = window;
        s->root = strdup(proc_root ? proc_root : "/proc");
        s->ring = calloc(window, sizeof(*s->ring));
    }
    if (!s || !s->root || !s->ring) {
        crater_sampler_destroy(s);
        crater_errorf(err, CRATER_ENOMEM, "sampler: out of memory");
        return NULL;
    }
    return s;
}

void crater_sampler_destroy(crater_sampler_t *s)
{
    if (!s)
        return;
    free(s->root);
    free(s->ring);
    free(s);
}

struct raw {
    uint64_t busy, total, mem_total, mem_avail;
    size_t ndisks;
    crater_diskstat_t disks[CRATER_SAMPLER_MAX_DISKS];
};

static int read_raw(const crater_sampler_t *s,
                    struct raw *r,
                    crater_error_t *err)
{
    char path[4096], *text = NULL;
    int rc;

    if (read_proc(s, "stat", &text, path, sizeof(path), err) < 0)
        return -1;
    rc = stat_parse(path, text, &r->busy, &r->total, err);
    free(text);
    if (rc < 0 || read_proc(s, "meminfo", &text, path, sizeof(path), err) < 0)
        return -1;
    rc = meminfo_parse(path, text, &r->mem_total, &r->mem_avail, err);
    free(text);
    if (rc < 0 || read_proc(s, "diskstats", &text, path, sizeof(path), err) < 0)
        return -1;
    rc = diskstats_parse(path,
                         text,
                         r->disks,
                         CRATER_SAMPLER_MAX_DISKS,
                         &r->ndisks,
                         err);
    free(text);
    if (r->ndisks > CRATER_SAMPLER_MAX_DISKS)
        r->ndisks = CRATER_SAMPLER_MAX_DISKS;
    return rc;
}

/* Counter difference; a counter that went backwards (device re-added,
   32-bit wrap on old kernels) counts as no activity for this sample. */
static double delta(uint64_t cur, uint64_t prev)
{
    return cur >= prev ? (double)(cur - prev) : 0.0;
}

static const crater_diskstat_t *find_prev(const crater_sampler_t *s,
                                          const char *name)
{
    size_t i;

    for (i = 0; i < s->prev_ndisks; i++)
        if (strcmp(s->prev[i].name, name) == 0)
            return &s->prev[i];
    return NULL;
}

static void disk_rates(const crater_sampler_t *s,
                       const struct raw *r,
                       double ms,
                       struct entry *e)
{
    const crater_diskstat_t *c, *p;
    crater_disk_sample_t *d;
    double sec = ms / 1000.0;
    size_t i;

    e->ndisks = 0;
    for (i = 0; i < r->ndisks; i++) {
        c = &r->disks[i];
        if (!(p = find_prev(s, c->name)))
            continue; /* new device: rates from the next sample on */
        d = &e->disks[e->ndisks++];
        snprintf(d->name, sizeof(d->name), "%s", c->name);
        d->read_iops = delta(c->rd_ios, p->rd_ios) / sec;
        d->write_iops = delta(c->wr_ios, p->wr_ios) / sec;
        d->read_bps = delta(c->rd_sectors, p->rd_sectors) * SECTOR / sec;
        d->write_bps = delta(c->wr_sectors, p->wr_sectors) * SECTOR / sec;
        d->util = delta(c->io_ticks_ms, p->io_ticks_ms) / ms;
        if (d->util > 1.0)
            d->util = 1.0;
    }
}

static void make_entry(const crater_sampler_t *s,
                       const struct raw *r,
                       uint64_t now_ms,
                       struct entry *e)
{
    double dt;

    memset(e, 0, sizeof(*e));
    e->mem = 1.0 - (double)r->mem_avail / (double)r->mem_total;
    if (!s->have_prev)
        return;
    e->rates = true;
    dt = delta(r->total, s->prev_total);
    e->cpu = dt > 0 ? delta(r->busy, s->prev_busy) / dt : 0.0;
    if (e->cpu > 1.0)
        e->cpu = 1.0;
    disk_rates(s, r, (double)(now_ms - s->prev_ms), e);
}

int crater_sampler_sample(crater_sampler_t *s,
                          uint64_t now_ms,
                          crater_error_t *err)
{
    struct raw r;

    if (s->have_prev && now_ms <= s->prev_ms)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "sampler: clock went from %llu to %llu ms",
                             (unsigned long long)s->prev_ms,
                             (unsigned long long)now_ms);
    if (read_raw(s, &r, err) < 0)
        return -1;
    make_entry(s, &r, now_ms, &s->ring[s->head]);
    s->head = (s->head + 1) % s->window;
    if (s->count < s->window)
        s->count++;
    s->have_prev = true;
    s->prev_ms = now_ms;
    s->prev_busy = r.busy;
    s->prev_total = r.total;
    s->prev_ndisks = r.ndisks;
    memcpy(s->prev, r.disks, r.ndisks * sizeof(r.disks[0]));
    s->mem_total = r.mem_total;
    s->mem_avail = r.mem_avail;
    return 0;
}

/* ---- the smoothed view ---- */

static const struct entry *slot(const crater_sampler_t *s, unsigned age)
{
    return &s->ring[(s->head + s->window - 1 - age) % s->window];
}

static const crater_disk_sample_t *entry_disk(const struct entry *e,
                                              const char *name)
{
    size_t i;

    for (i = 0; i < e->ndisks; i++)
        if (strcmp(e->disks[i].name, name) == 0)
            return &e->disks[i];
    return NULL;
}

/* Average one disk (named in the newest entry) over the entries with it. */
static void avg_disk(const crater_sampler_t *s, crater_disk_sample_t *out)
{
    const crater_disk_sample_t *d;
    unsigned age, n = 0;
    crater_disk_sample_t sum = {0};

    for (age = 0; age < s->count; age++) {
        if (!slot(s, age)->rates || !(d = entry_disk(slot(s, age), out->name)))
            continue;
        sum.read_iops += d->read_iops;
        sum.write_iops += d->write_iops;
        sum.read_bps += d->read_bps;
        sum.write_bps += d->write_bps;
        sum.util += d->util;
        n++;
    }
    out->read_iops = sum.read_iops / n;
    out->write_iops = sum.write_iops / n;
    out->read_bps = sum.read_bps / n;
    out->write_bps = sum.write_bps / n;
    out->util = sum.util / n;
}

void crater_sampler_get(const crater_sampler_t *s, crater_host_sample_t *out)
{
    const struct entry *newest;
    unsigned age, nrates = 0;
    size_t i;

    memset(out, 0, sizeof(*out));
    if (s->count == 0)
        return;
    for (age = 0; age < s->count; age++) {
        out->mem += slot(s, age)->mem;
        if (slot(s, age)->rates) {
            out->cpu += slot(s, age)->cpu;
            nrates++;
        }
    }
    out->mem /= s->count;
    out->cpu = nrates ? out->cpu / nrates : 0.0;
    out->mem_total = s->mem_total;
    out->mem_available = s->mem_avail;
    out->samples = s->count;
    newest = slot(s, 0);
    for (i = 0; newest->rates && i < newest->ndisks; i++) {
        out->disks[i] = newest->disks[i];
        avg_disk(s, &out->disks[i]);
        if (out->disks[i].util > out->disk_util)
            out->disk_util = out->disks[i].util;
    }
    out->ndisks = newest->rates ? newest->ndisks : 0;
}
