/*
 * slice.c - reserve/release/reclaim on the shared slice file.
 *
 * Workload: a reservation per GPU allocation (thousands per second at most,
 * PyTorch's caching allocator makes it far fewer), a reclaim scan only when
 * a reservation would fail or a process attaches. So the hot path is one
 * load, one compare-and-swap and one fetch-add; the scan over the 256
 * process records (a kill(pid, 0) and a /proc read each) is off it.
 *
 * Liveness of a record: kill(pid, 0) fails with ESRCH, or /proc/PID/stat
 * says zombie, or the start time differs from the one recorded (pid
 * recycled). A record whose start time is still 0 (just claimed) is judged
 * by kill() alone.
 */
#include "slice.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

crater_gpuslice_file_t *crater__gs_map(const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size == sizeof(crater_gpuslice_file_t))
        p = mmap(NULL,
                 sizeof(crater_gpuslice_file_t),
                 PROT_READ | PROT_WRITE,
                 MAP_SHARED,
                 fd,
                 0);
    else
        errno = EINVAL;
    int saved = errno;
    close(fd);
    if (p == MAP_FAILED) {
        errno = saved;
        return NULL;
    }
    crater_gpuslice_file_t *f = p;
    if (f->magic != CRATER_GPUSLICE_MAGIC
        || f->version != CRATER_GPUSLICE_VERSION || f->size != sizeof(*f)
        || f->ngpus > CRATER_GPUSLICE_MAX_GPUS) {
        munmap(p, sizeof(*f));
        errno = EINVAL;
        return NULL;
    }
    return f;
}

void crater__gs_unmap(crater_gpuslice_file_t *f)
{
    if (f)
        munmap(f, sizeof(*f));
}

int crater__gs_find_gpu(const crater_gpuslice_file_t *f, const uint8_t uuid[16])
{
    for (uint32_t g = 0; g < f->ngpus; g++)
        if (memcmp(f->gpu[g].uuid, uuid, 16) == 0)
            return (int)g;
    return -1;
}

/* Field 22 of /proc/PID/stat; *zombie set for state Z or X. */
static uint64_t read_start(int64_t pid, int *zombie)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%lld/stat", (long long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* comm may contain spaces and ')' */
    if (!p || p[1] != ' ')
        return 0;
    char state = p[2];
    *zombie = state == 'Z' || state == 'X';
    unsigned long long start = 0;
    /* after ") S" come fields 4..21 (18 of them), then starttime */
    if (sscanf(p + 3,
               "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
               "%*s %*s %*s %llu",
               &start)
        != 1)
        return 0;
    return start;
}

uint64_t crater__gs_proc_start(int64_t pid)
{
    int zombie = 0;
    uint64_t s = read_start(pid, &zombie);
    return zombie ? 0 : s;
}

static int alive(int64_t pid, uint64_t start)
{
    if (pid <= 0)
        return pid == -1; /* being reclaimed: not ours to touch */
    if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
        return 0;
    int zombie = 0;
    uint64_t now = read_start(pid, &zombie);
    if (zombie)
        return 0;
    return start == 0 || now == 0 || now == start;
}

/* used -= n, never below zero. */
static void sub_clamped(_Atomic uint64_t *used, uint64_t n)
{
    uint64_t cur = atomic_load(used);
    while (!atomic_compare_exchange_weak(used, &cur, cur > n ? cur - n : 0))
        ;
}

/* Give back record i's bytes; the caller owns the record (pid is -1 or
 * its own). */
static void drain(crater_gpuslice_file_t *f, int i)
{
    crater_gpuslice_proc_t *p = &f->proc[i];
    for (uint32_t g = 0; g < f->ngpus; g++) {
        uint64_t b = atomic_exchange(&p->bytes[g], 0);
        if (b)
            sub_clamped(&f->gpu[g].used, b);
    }
    atomic_store(&p->start, 0);
}

int crater__gs_reclaim(crater_gpuslice_file_t *f, int self)
{
    int count = 0;
    for (int i = 0; i < CRATER_GPUSLICE_MAX_PROCS; i++) {
        crater_gpuslice_proc_t *p = &f->proc[i];
        int64_t pid = atomic_load(&p->pid);
        if (i == self || pid <= 0 || alive(pid, atomic_load(&p->start)))
            continue;
        if (!atomic_compare_exchange_strong(&p->pid, &pid, -1))
            continue; /* another process is reclaiming it */
        drain(f, i);
        atomic_store(&p->pid, 0);
        count++;
    }
    return count;
}

/* Any live record other than self? */
static int others_alive(crater_gpuslice_file_t *f, int self)
{
    for (int i = 0; i < CRATER_GPUSLICE_MAX_PROCS; i++) {
        crater_gpuslice_proc_t *p = &f->proc[i];
        int64_t pid = atomic_load(&p->pid);
        if (i != self && pid != 0 && alive(pid, atomic_load(&p->start)))
            return 1;
    }
    return 0;
}

/* The caller has just claimed `slot` and holds nothing. used[] is read
 * before the scan, so a process that claims a record after the scan and
 * reserves makes the compare-and-swap fail: only a value no live process
 * contributes to is reset. */
static void repair_if_alone(crater_gpuslice_file_t *f, int slot)
{
    uint64_t seen[CRATER_GPUSLICE_MAX_GPUS];
    for (uint32_t g = 0; g < f->ngpus; g++)
        seen[g] = atomic_load(&f->gpu[g].used);
    if (others_alive(f, slot))
        return;
    for (uint32_t g = 0; g < f->ngpus; g++)
        if (seen[g])
            atomic_compare_exchange_strong(&f->gpu[g].used, &seen[g], 0);
}

int crater__gs_claim(crater_gpuslice_file_t *f, int64_t pid, uint64_t start)
{
    crater__gs_reclaim(f, -1);
    for (int i = 0; i < CRATER_GPUSLICE_MAX_PROCS; i++) {
        crater_gpuslice_proc_t *p = &f->proc[i];
        int64_t expect = 0;
        if (!atomic_compare_exchange_strong(&p->pid, &expect, pid))
            continue;
        for (int g = 0; g < CRATER_GPUSLICE_MAX_GPUS; g++)
            atomic_store(&p->bytes[g], 0);
        atomic_store(&p->start, start);
        repair_if_alone(f, i);
        return i;
    }
    errno = ENOSPC;
    return -1;
}

static int try_add(crater_gpuslice_gpu_t *gpu, uint64_t n)
{
    uint64_t cur = atomic_load(&gpu->used);
    do {
        if (n > gpu->limit || cur > gpu->limit - n)
            return -1;
    } while (!atomic_compare_exchange_weak(&gpu->used, &cur, cur + n));
    return 0;
}

int crater__gs_reserve(crater_gpuslice_file_t *f, int slot, int g, uint64_t n)
{
    crater_gpuslice_gpu_t *gpu = &f->gpu[g];
    if (try_add(gpu, n) < 0
        && (crater__gs_reclaim(f, slot) == 0 || try_add(gpu, n) < 0)) {
        errno = ENOMEM;
        return -1;
    }
    atomic_fetch_add(&f->proc[slot].bytes[g], n);
    return 0;
}

void crater__gs_release(crater_gpuslice_file_t *f, int slot, int g, uint64_t n)
{
    sub_clamped(&f->proc[slot].bytes[g], n);
    sub_clamped(&f->gpu[g].used, n);
}

void crater__gs_leave(crater_gpuslice_file_t *f, int slot)
{
    drain(f, slot);
    atomic_store(&f->proc[slot].pid, 0);
}
