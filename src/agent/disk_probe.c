/* disk_probe.c - measure a disk's read IOPS and bandwidth at discovery
 * (crater_disk_probe, discover.h).
 *
 * The scheduler compares a job's disk.iops and disk.bandwidth with what
 * each device offers, so a discovered disk needs real figures. sysfs has
 * none, so we read: O_DIRECT (no page cache) 4 KiB reads at random
 * aligned offsets for two thirds of the budget, then 1 MiB reads
 * sequentially from a random offset for the rest. Nothing is ever
 * written, and the device is opened read-only.
 *
 * One synchronous read at a time would measure latency, not IOPS: an
 * NVMe drive rated 500k IOPS answers ~10k reads/s at queue depth 1. So
 * the reads go through Linux native AIO (io_setup/io_submit, called by
 * syscall so no libaio is needed), 32 in flight for random reads and 4
 * for sequential ones, as fio's libaio engine does. Where AIO is
 * unavailable (a seccomp filter, aio-max-nr spent) the probe fails and
 * the caller declares the class figures instead (discover_storage.c).
 *
 * Expected cost: one budget (a few hundred ms at most) per disk, once per
 * agent start. The figures are what the device gives under whatever else
 * runs on it at that moment, so a busy node measures low; that is the
 * conservative side.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/discover.h"
#include "crater/log.h"

#define RANDOM_BS 4096u
#define RANDOM_QD 32u
#define SEQ_BS (1u << 20)
#define SEQ_QD 4u
#define MIN_SPAN (64ull << 20) /* smaller devices: no meaningful figure */
#define DRAIN_MS 2000          /* wait for in-flight reads after the budget */

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static struct timespec ms_ts(double ms)
{
    long long ns = (long long)(ms * 1e6);

    return (struct timespec){.tv_sec = (time_t)(ns / 1000000000),
                             .tv_nsec = (long)(ns % 1000000000)};
}

/* xorshift64*: deterministic offsets, no shared state with rand(). */
static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

typedef struct pump {
    int fd;
    uint64_t span;  /* readable bytes, a multiple of bs */
    uint64_t bs;    /* bytes per read */
    uint64_t next;  /* sequential: offset of the next read */
    uint64_t rng;   /* random: state */
    int sequential; /* 0 random */
} pump_t;

static uint64_t offset_of(pump_t *p)
{
    uint64_t off;

    if (!p->sequential)
        return next_rand(&p->rng) % (p->span / p->bs) * p->bs;
    off = p->next;
    p->next = (p->next + p->bs) % p->span;
    return off;
}

static void prep(pump_t *p, struct iocb *cb, char *buf)
{
    memset(cb, 0, sizeof(*cb));
    cb->aio_lio_opcode = IOCB_CMD_PREAD;
    cb->aio_fildes = (uint32_t)p->fd;
    cb->aio_buf = (uint64_t)(uintptr_t)buf;
    cb->aio_nbytes = p->bs;
    cb->aio_offset = (int64_t)offset_of(p);
    cb->aio_data = (uint64_t)(uintptr_t)cb;
}

/* Keep qd reads in flight for ms milliseconds; *rate = reads per second.
 * -1 with errno on any failed or short read. */
static int pump_run(pump_t *p, unsigned qd, unsigned ms, double *rate)
{
    struct iocb cbs[RANDOM_QD], *one;
    struct io_event ev[RANDOM_QD];
    aio_context_t ctx = 0;
    unsigned inflight = 0;
    uint64_t done = 0;
    double start, deadline;
    char *bufs = NULL;
    int rc = -1, saved = 0;

    assert(qd >= 1 && qd <= RANDOM_QD && p->span >= p->bs);
    if (posix_memalign((void **)&bufs, 4096, qd * p->bs) != 0) {
        errno = ENOMEM;
        return -1;
    }
    if (syscall(SYS_io_setup, qd, &ctx) < 0) {
        saved = errno;
        free(bufs);
        errno = saved;
        return -1;
    }
    start = now_ms();
    deadline = start + ms;
    for (unsigned i = 0; i < qd; i++) {
        prep(p, &cbs[i], bufs + i * p->bs);
        one = &cbs[i];
        if (syscall(SYS_io_submit, ctx, 1L, &one) != 1) {
            saved = errno ? errno : EIO;
            goto out;
        }
        inflight++;
    }
    while (inflight) {
        double t = now_ms();
        struct timespec ts;
        long n;

        if (t >= deadline + DRAIN_MS) {
            saved = ETIMEDOUT; /* io_destroy below still waits for them */
            goto out;
        }
        ts = ms_ts((t < deadline ? deadline : deadline + DRAIN_MS) - t);
        n = syscall(SYS_io_getevents, ctx, 1L, (long)qd, ev, &ts);
        if (n < 0 && errno != EINTR) {
            saved = errno;
            goto out;
        }
        for (long i = 0; i < n; i++) {
            struct iocb *cb = (struct iocb *)(uintptr_t)ev[i].data;
            if (ev[i].res != (int64_t)p->bs) {
                saved = ev[i].res < 0 ? (int)-ev[i].res : EIO;
                goto out;
            }
            done++;
            inflight--;
            if (now_ms() >= deadline)
                continue;
            prep(p, cb, (char *)(uintptr_t)cb->aio_buf);
            if (syscall(SYS_io_submit, ctx, 1L, &cb) != 1) {
                saved = errno ? errno : EIO;
                goto out;
            }
            inflight++;
        }
    }
    *rate = (double)done * 1e3 / (now_ms() - start);
    rc = 0;
out:
    syscall(SYS_io_destroy, ctx); /* waits for reads still in flight */
    free(bufs);
    if (rc < 0)
        errno = saved;
    return rc;
}

int crater_disk_probe(const char *device,
                      unsigned budget_ms,
                      uint64_t *iops,
                      uint64_t *bandwidth,
                      void *arg)
{
    const char *dev_dir = arg ? (const char *)arg : "/dev";
    char path[1024];
    double rrate = 0, srate = 0;
    off_t end;
    pump_t p = {.rng = 0x9e3779b97f4a7c15ull};
    int rc = -1, saved;

    if (strchr(device, '/') || budget_ms < 3) {
        errno = EINVAL;
        return -1;
    }
    snprintf(path, sizeof(path), "%s/%s", dev_dir, device);
    p.fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC | O_NOCTTY);
    if (p.fd < 0)
        return -1;
    if ((end = lseek(p.fd, 0, SEEK_END)) < 0)
        goto out;
    if ((uint64_t)end < MIN_SPAN) {
        errno = ERANGE;
        goto out;
    }
    p.bs = RANDOM_BS;
    p.span = (uint64_t)end / SEQ_BS * SEQ_BS; /* aligned for both sizes */
    if (pump_run(&p, RANDOM_QD, budget_ms * 2 / 3, &rrate) < 0)
        goto out;
    p.bs = SEQ_BS;
    p.sequential = 1;
    p.next = next_rand(&p.rng) % (p.span / SEQ_BS) * SEQ_BS;
    if (pump_run(&p, SEQ_QD, budget_ms - budget_ms * 2 / 3, &srate) < 0)
        goto out;
    *iops = (uint64_t)rrate;
    *bandwidth = (uint64_t)(srate * SEQ_BS);
    rc = *iops && *bandwidth ? 0 : (errno = EIO, -1);
out:
    saved = errno;
    close(p.fd);
    errno = saved;
    return rc;
}
