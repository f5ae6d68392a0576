/* discover_storage.c - block devices from sysfs (see discover.h).
 *
 * /sys/block lists whole disks (partitions live below them), so one
 * entry per name there is one schedulable device. Virtual devices that
 * hold no data of their own (loop, ram, zram, device-mapper, md, optical,
 * floppy) are skipped: they would double-count the disks beneath them.
 * Everything is read relative to a root so tests run on a fake tree.
 *
 * iops and bandwidth: the scheduler places disk.iops/disk.bandwidth
 * requests against them, so a 0 here would make every such job unfit.
 * Each disk is measured by the probe the caller passes (crater_disk_probe
 * in disk_probe.c: O_DIRECT reads of /dev/<name>, never a write) within a
 * shared time budget; a disk the probe cannot read (not root, no AIO, too
 * small, budget spent, or no probe: tests) gets the declared figure of
 * its class from the table below, with a warning that says so. We do not
 * probe rotational disks: a sleeping one would spin up (seconds, over the
 * budget) and 100 ms of seeks is noise anyway. virtio disks report
 * rotational 1 whatever backs them, so they count as virtual, not HDD.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/discover.h"
#include "crater/log.h"

#define MAX_DISKS 256      /* the hardware-file limit */
#define PROBE_TOTAL_MS 450 /* all disks together: discovery stays < 1 s */
#define PROBE_DISK_MS 150  /* one disk at most; 2/3 random, 1/3 sequential */
#define PROBE_MIN_MS 30    /* below this a figure means little: declare */

#define MB 1000000ull

/* Declared figures per device class, used when a disk cannot be measured.
 * Conservative on purpose (a job placed on a declared disk must get at
 * least this): about half of what the class's datasheets give, random
 * 4 KiB read IOPS at high queue depth and sequential read bandwidth.
 * Sources:
 *  hdd:     7,200 rpm SATA/SAS disks: ~12 ms seek + half a rotation is
 *           ~80 IOPS at queue depth 1, 150-250 with NCQ reordering;
 *           Seagate Exos 7E10 / WD Ultrastar HC550 datasheets give
 *           200-270 MB/s on outer tracks, less on inner ones.
 *  ssd:     SATA/SAS flash: Intel D3-S4510, Samsung PM883 datasheets give
 *           90-98k IOPS; SATA 6 Gb/s caps bandwidth at ~550 MB/s.
 *  nvme:    PCIe Gen3 x4 data-centre NVMe (Intel P4510, Samsung PM983):
 *           500-640k IOPS, ~3 GB/s; Gen4 drives double that.
 *  network: NVMe over TCP/RDMA/FC, bounded by the fabric (10 GbE is
 *           ~1.2 GB/s) and the target, which we cannot see.
 *  virtual: virtio/Xen disks and cloud volumes presented as NVMe: AWS
 *           gp3's baseline (3,000 IOPS, 125 MiB/s), the common floor of
 *           cloud block volumes; the host may give much more.
 *  other:   transports we cannot tell (USB, eMMC, iSCSI behind sd*): a
 *           floor that even a USB flash stick reaches. */
typedef enum disk_class {
    CLASS_HDD,
    CLASS_SSD,
    CLASS_NVME,
    CLASS_NETWORK,
    CLASS_VIRTUAL,
    CLASS_OTHER,
} disk_class_t;

static const struct {
    const char *name;
    uint64_t iops;
    uint64_t bandwidth; /* bytes/s */
} declared[] = {
    [CLASS_HDD] = {"rotational disk", 150, 150 * MB},
    [CLASS_SSD] = {"SATA/SAS SSD", 50000, 450 * MB},
    [CLASS_NVME] = {"NVMe SSD", 200000, 2000 * MB},
    [CLASS_NETWORK] = {"network NVMe", 50000, 1000 * MB},
    [CLASS_VIRTUAL] = {"virtual disk", 3000, 125 * MB},
    [CLASS_OTHER] = {"disk of unknown transport", 1000, 100 * MB},
};

static int skipped(const char *name)
{
    static const char *const prefixes[] =
        {"loop", "ram", "zram", "dm-", "md", "sr", "fd", "nbd"};

    if (name[0] == '.')
        return 1;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(*prefixes); i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

/* First line of <dir>/<rel>, blanks trimmed; 0 when read. */
static int read_line(const char *dir, const char *rel, char *buf, size_t size)
{
    char path[1024];
    FILE *f;
    size_t len;

    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    if (!(f = fopen(path, "r")))
        return -1;
    if (!fgets(buf, (int)size, f)) {
        fclose(f);
        return -1;
    }
    fclose(f);
    len = strlen(buf);
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
        buf[--len] = '\0';
    memmove(buf, buf + strspn(buf, " "), strlen(buf + strspn(buf, " ")) + 1);
    return 0;
}

static int read_ll(const char *dir, const char *rel, long long *v)
{
    char buf[64], *end;

    if (read_line(dir, rel, buf, sizeof(buf)) < 0)
        return -1;
    *v = strtoll(buf, &end, 10);
    return end == buf ? -1 : 0;
}

static crater_iface_t iface_of(const char *dir, const char *name)
{
    char buf[64];

    if (strncmp(name, "nvme", 4) == 0) {
        if (read_line(dir, "device/transport", buf, sizeof(buf)) == 0
            && strcmp(buf, "pcie") != 0 && strcmp(buf, "loop") != 0)
            return CRATER_IFACE_NETWORK; /* NVMe over tcp/rdma/fc */
        return CRATER_IFACE_NVME;
    }
    if (strncmp(name, "vd", 2) == 0 || strncmp(name, "xvd", 3) == 0)
        return CRATER_IFACE_VIRTIO;
    if (strncmp(name, "sd", 2) != 0)
        return CRATER_IFACE_UNKNOWN;
    if (read_line(dir, "device/vendor", buf, sizeof(buf)) == 0
        && strcmp(buf, "ATA") == 0)
        return CRATER_IFACE_SATA; /* libata reports its disks as "ATA" */
    if (read_line(dir, "device/sas_address", buf, sizeof(buf)) == 0)
        return CRATER_IFACE_SAS;
    return CRATER_IFACE_UNKNOWN; /* USB, iSCSI, virtio-scsi ... */
}

static int numa_of(const char *dir)
{
    long long v;

    if (read_ll(dir, "device/numa_node", &v) == 0
        || read_ll(dir, "device/device/numa_node", &v) == 0)
        return v >= 0 && v < 1024 ? (int)v : -1;
    return -1;
}

/* Cloud block volumes that show up as NVMe but perform as a volume. */
static int cloud_volume(const char *model)
{
    return model
           && (strstr(model, "Elastic Block Store") /* AWS EBS */
               || strstr(model, "nvme_card-pd"));   /* GCP PD/Hyperdisk */
}

static disk_class_t class_of(const crater_storage_t *s)
{
    if (s->iface == CRATER_IFACE_VIRTIO
        || (s->iface == CRATER_IFACE_NVME && cloud_volume(s->model)))
        return CLASS_VIRTUAL;
    if (s->rotational)
        return CLASS_HDD;
    switch (s->iface) {
    case CRATER_IFACE_NVME:
        return CLASS_NVME;
    case CRATER_IFACE_SATA:
    case CRATER_IFACE_SAS:
        return CLASS_SSD;
    case CRATER_IFACE_NETWORK:
        return CLASS_NETWORK;
    default:
        return CLASS_OTHER;
    }
}

static void declare(crater_storage_t *s, const char *why)
{
    disk_class_t c = class_of(s);

    s->iops = declared[c].iops;
    s->bandwidth = declared[c].bandwidth;
    crater_log(LOG_WARNING,
               "disk %s: iops %llu and bandwidth %llu MB/s are declared "
               "(%s default), not measured: %s",
               s->device,
               (unsigned long long)s->iops,
               (unsigned long long)(s->bandwidth / MB),
               declared[c].name,
               why);
}

/* Measure or declare iops and bandwidth of disks [first, first + n). */
static void rate_disks(crater_storage_t *disks,
                       size_t n,
                       crater_disk_probe_f probe,
                       void *probe_arg)
{
    struct timespec t0, t;
    size_t left = 0;

    for (size_t i = 0; i < n; i++)
        left += class_of(&disks[i]) != CLASS_HDD;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t i = 0; i < n; i++) {
        crater_storage_t *s = &disks[i];
        uint64_t iops = 0, bw = 0;
        long spent, share;
        char why[96];

        if (!probe) {
            declare(s, "probing disabled");
            continue;
        }
        if (class_of(s) == CLASS_HDD) {
            declare(s, "rotational disks are not probed");
            continue;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        spent =
            (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        share = (PROBE_TOTAL_MS - spent) / (long)left--;
        share = share > PROBE_DISK_MS ? PROBE_DISK_MS : share;
        if (share < PROBE_MIN_MS) {
            declare(s, "discovery's probe time is spent");
            continue;
        }
        errno = 0;
        if (probe(s->device, (unsigned)share, &iops, &bw, probe_arg) < 0
            || !iops || !bw) {
            snprintf(why,
                     sizeof(why),
                     "probe failed: %s",
                     errno ? strerror(errno) : "no figure");
            declare(s, why);
            continue;
        }
        s->iops = iops;
        s->bandwidth = bw;
        crater_log(LOG_INFO,
                   "disk %s: measured %llu IOPS (4 KiB random reads), "
                   "%llu MB/s sequential, in %ld ms",
                   s->device,
                   (unsigned long long)iops,
                   (unsigned long long)(bw / MB),
                   share);
    }
}

/* Fill s from <dir>; 1 when the device is kept, 0 when skipped. */
static int one_disk(const char *dir, const char *name, crater_storage_t *s)
{
    char model[129];
    long long v;

    if (read_ll(dir, "size", &v) < 0 || v <= 0
        || (unsigned long long)v > (unsigned long long)INT64_MAX / 512)
        return 0;
    memset(s, 0, sizeof(*s));
    s->capacity = (uint64_t)v * 512; /* sysfs counts 512-byte sectors */
    s->iface = iface_of(dir, name);
    s->rotational = read_ll(dir, "queue/rotational", &v) == 0 && v == 1;
    if (read_ll(dir, "queue/nr_requests", &v) == 0 && v > 0 && v <= 1 << 24)
        s->queue_depth = (uint32_t)v;
    s->numa_node = numa_of(dir);
    if (!(s->device = strdup(name)))
        return -1;
    if (read_line(dir, "device/model", model, sizeof(model)) == 0 && *model
        && !(s->model = strdup(model)))
        return -1;
    return 1;
}

static int add_disk(crater_node_t *out, const char *root, const char *name)
{
    char dir[1024];
    crater_storage_t s;
    int rc;

    if (strlen(name) > 63 || out->nstorage >= MAX_DISKS)
        return 0;
    snprintf(dir, sizeof(dir), "%s/block/%s", root, name);
    if ((rc = one_disk(dir, name, &s)) <= 0) {
        if (rc < 0) {
            free(s.device);
            free(s.model);
        }
        return rc;
    }
    out->storage[out->nstorage++] = s;
    return 0;
}

static int by_device(const void *a, const void *b)
{
    return strcmp(((const crater_storage_t *)a)->device,
                  ((const crater_storage_t *)b)->device);
}

int crater_discover_storage(const char *sys_root,
                            crater_disk_probe_f probe,
                            void *probe_arg,
                            crater_node_t *out,
                            crater_error_t *err)
{
    char path[1024];
    struct dirent *e;
    size_t first = out->nstorage;
    crater_storage_t *grown;
    DIR *d;

    sys_root = sys_root ? sys_root : "/sys";
    snprintf(path, sizeof(path), "%s/block", sys_root);
    if (!(d = opendir(path))) {
        crater_debug(CRATER_SUB_AGENT, "%s: not readable: no disks", path);
        return 0;
    }
    grown = realloc(out->storage, MAX_DISKS * sizeof(*grown));
    if (!grown) {
        closedir(d);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    out->storage = grown;
    while ((e = readdir(d)))
        if (!skipped(e->d_name) && add_disk(out, sys_root, e->d_name) < 0) {
            closedir(d);
            return crater_errorf(err, CRATER_ENOMEM, "out of memory");
        }
    closedir(d);
    qsort(out->storage + first,
          out->nstorage - first,
          sizeof(*out->storage),
          by_device);
    rate_disks(out->storage + first, out->nstorage - first, probe, probe_arg);
    return 0;
}
