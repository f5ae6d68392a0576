/* discover.h - what this machine has, in the capability model.
 *
 * crater_discover() fills a crater_node_t from the running machine: CPUs
 * and memory per NUMA node and the PCI tree from hwloc, GPUs from NVML
 * (nvml.h, loaded with dlopen), block devices from sysfs. The result
 * encodes with crater_hw_encode_node() into a hardware file that
 * `crater validate` accepts (doc/hardware.md, "Discovery"). It reads
 * files and loads libraries but never writes anything and never prints.
 */
#ifndef CRATER_DISCOVER_H
#define CRATER_DISCOVER_H

#include <stdbool.h>

#include "crater/error.h"
#include "crater/kb.h"
#include "crater/model.h"

/* Measure one disk: random 4 KiB read IOPS into *iops and sequential read
 * bytes/s into *bandwidth, within about budget_ms; 0, or -1 (errno set
 * where known) when it cannot. device is the /sys/block name ("nvme0n1").
 * Tests inject one to stay independent of the machine's disks. */
typedef int (*crater_disk_probe_f)(const char *device,
                                   unsigned budget_ms,
                                   uint64_t *iops,
                                   uint64_t *bandwidth,
                                   void *arg);

typedef struct crater_discover_opts {
    const char *name;      /* node name; NULL = hostname (made DNS-safe) */
    const char *nvml_lib;  /* NULL = "libnvidia-ml.so.1" */
    const char *sys_root;  /* NULL = "/sys" (tests: tests/data/sysfs) */
    const char *proc_root; /* NULL = "/proc": meminfo (tests: a fixture) */
    bool no_gpus;          /* skip NVML */
    bool no_disk_probe;    /* declared class figures for every disk */
    crater_disk_probe_f disk_probe; /* NULL = crater_disk_probe */
    void *disk_probe_arg;           /* its arg (crater_disk_probe: NULL) */
} crater_discover_opts_t;

/* Fill out (zeroed by the call; free with crater_node_clear) from this
 * machine. o may be NULL (all defaults); kb may be NULL (models are then
 * normalised names, nothing is completed). A machine without NVML has no
 * GPUs; hwloc that sees no NUMA information falls back to one NUMA node 0
 * with sysconf(_SC_NPROCESSORS_ONLN) threads and /proc/meminfo MemTotal.
 * NUMA memory that falls short of MemTotal is raised to it
 * (crater_discover_fit_memory). Disks are probed (crater_disk_probe, at
 * most ~0.5 s in all) unless no_disk_probe.
 * NUMA nodes that GPUs or disks name but that have no cpus/memory entry
 * become -1 (unknown), so the node always validates. samples is
 * CRATER_SAMPLES_REAL; no labels. On failure out is cleared. */
int crater_discover(const crater_discover_opts_t *o,
                    const crater_kb_t *kb,
                    crater_node_t *out,
                    crater_error_t *err);

/* Append the block devices under <sys_root>/block to out->storage (NULL
 * root = "/sys"). Skipped: loop, ram, zram, dm-, md, sr, fd devices and
 * devices of size 0. Per device: capacity = size x 512, rotational and
 * queue_depth (queue/nr_requests) from queue/, interface from the name
 * and device/transport (nvme over tcp/rdma/fc is "network"), model from
 * device/model, numa_node from device/numa_node or device/device/
 * numa_node (-1 when absent). iops and bandwidth: measured by probe
 * (called with probe_arg; non-rotational disks only, ~150 ms each, 450 ms
 * for all), else the conservative figure declared for the disk's class
 * (doc/hardware.md), with a warning log line; never 0. probe NULL =
 * declared figures only. latency stays 0 (unknown). */
int crater_discover_storage(const char *sys_root,
                            crater_disk_probe_f probe,
                            void *probe_arg,
                            crater_node_t *out,
                            crater_error_t *err);

/* The default probe: O_DIRECT reads of <arg or "/dev">/<device>, 4 KiB at
 * random offsets 32 in flight (Linux AIO) for 2/3 of budget_ms, then
 * 1 MiB sequential 4 in flight. Opens read-only and never writes. Fails
 * (-1, errno) when the device cannot be opened (not root), is under
 * 64 MiB, has no O_DIRECT or AIO, or a read fails. */
int crater_disk_probe(const char *device,
                      unsigned budget_ms,
                      uint64_t *iops,
                      uint64_t *bandwidth,
                      void *arg);

/* VMs can report NUMA nodes whose memory sums to far less than the
 * machine's (here: node0 MemTotal 5.2 GB, /proc/meminfo 24.7 GB). When
 * the memory[] entries sum to under 97% of <proc_root>/meminfo MemTotal
 * (NULL root = "/proc"), the difference is spread over the entries in
 * proportion to their capacity (all of it to the one entry of a single
 * NUMA node), so they sum to MemTotal exactly, and a warning names both
 * figures. 1 when raised, 0 when left alone (close enough, above
 * MemTotal, no entries, or no readable MemTotal). */
int crater_discover_fit_memory(crater_node_t *n, const char *proc_root);

/* Node name from a host name: lowercased, characters outside [a-z0-9.-]
 * turned into '-', leading/trailing '-' and '.' dropped; "node" when
 * nothing is left. Writes into buf (size bytes, at least 5). */
char *crater_discover_node_name(const char *host, char *buf, size_t size);

#endif /* CRATER_DISCOVER_H */
