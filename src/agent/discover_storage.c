/* discover_storage.c - block devices from sysfs (see discover.h).
 *
 * /sys/block lists whole disks (partitions live below them), so one
 * entry per name there is one schedulable device. Virtual devices that
 * hold no data of their own (loop, ram, zram, device-mapper, md, optical,
 * floppy) are skipped: they would double-count the disks beneath them.
 * Everything is read relative to a root so tests run on a fake tree.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/discover.h"
#include "crater/log.h"

#define MAX_DISKS 256 /* the hardware-file limit */

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
    return 0;
}
