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

typedef struct crater_discover_opts {
    const char *name;     /* node name; NULL = hostname (made DNS-safe) */
    const char *nvml_lib; /* NULL = "libnvidia-ml.so.1" */
    const char *sys_root; /* NULL = "/sys" (tests: tests/data/sysfs) */
    bool no_gpus;         /* skip NVML */
} crater_discover_opts_t;

/* Fill out (zeroed by the call; free with crater_node_clear) from this
 * machine. o may be NULL (all defaults); kb may be NULL (models are then
 * normalised names, nothing is completed). A machine without NVML has no
 * GPUs; hwloc that sees no NUMA information falls back to one NUMA node 0
 * with sysconf(_SC_NPROCESSORS_ONLN) threads and /proc/meminfo MemTotal.
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
 * numa_node (-1 when absent). iops, bandwidth and latency stay 0
 * (unknown; the sampler measures them). */
int crater_discover_storage(const char *sys_root,
                            crater_node_t *out,
                            crater_error_t *err);

/* Node name from a host name: lowercased, characters outside [a-z0-9.-]
 * turned into '-', leading/trailing '-' and '.' dropped; "node" when
 * nothing is left. Writes into buf (size bytes, at least 5). */
char *crater_discover_node_name(const char *host, char *buf, size_t size);

#endif /* CRATER_DISCOVER_H */
