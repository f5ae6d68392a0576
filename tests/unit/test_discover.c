/* test_discover.c - NVML through dlopen against the stub library
 * (tests/data/nvmlstub), block devices from the fake sysfs trees
 * (tests/data/sysfs, sysfs-vm) with an injected disk probe or none (so
 * the figures do not depend on this machine's disks), NUMA memory checked
 * against fake /proc/meminfo files (tests/data/proc), the real probe on a
 * scratch file, and whole-machine discovery: the real hwloc view of
 * this machine plus the stub GPUs must encode to a hardware file that the
 * hardware-file decoder accepts and decodes back to the same node. */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/discover.h"
#include "agent/nvml.h"
#include "crater/doc.h"
#include "crater/hwfile.h"

#define GB 1000000000ull
#define GIB (1ull << 30)
#define MIB (1ull << 20)
#define SYSFS CRATER_SOURCE_DIR "/tests/data/sysfs"
#define SYSFS_VM CRATER_SOURCE_DIR "/tests/data/sysfs-vm"
#define PROC CRATER_SOURCE_DIR "/tests/data/proc"
#define MB 1000000ull
#define KIB 1024ull

static crater_kb_t *kb;

static void setup(void)
{
    kb = crater_kb_create();
    ck_assert_ptr_nonnull(kb);
    unsetenv("NVMLSTUB_GPUS");
    unsetenv("NVMLSTUB_MODEL");
    unsetenv("NVMLSTUB_MEM");
    unsetenv("NVMLSTUB_NVLINK");
}

static void teardown(void)
{
    crater_kb_destroy(kb);
}

static crater_nvml_t *stub(void)
{
    crater_error_t err = {0};
    crater_nvml_t *n = crater_nvml_open(NVMLSTUB_PATH, &err);

    ck_assert_msg(n != NULL, "%s", err.text);
    ck_assert_int_eq(crater_nvml_set_sys_root(n, SYSFS, &err), 0);
    return n;
}

static crater_gpu_t gpu(crater_nvml_t *n, unsigned i)
{
    crater_error_t err = {0};
    crater_gpu_t g;

    ck_assert_msg(crater_nvml_gpu(n, i, kb, &g, &err) == 0, "%s", err.text);
    return g;
}

START_TEST(open_without_library)
{
    crater_error_t err = {0};
    crater_nvml_t *n = crater_nvml_open("/nonexistent/libnvidia-ml.so.1", &err);

    ck_assert_ptr_null(n);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    crater_error_clear(&err);
    /* the default soname: absent on CI (ENOENT), present on a GPU box */
    n = crater_nvml_open(NULL, &err);
    if (!n)
        ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    crater_nvml_close(n);
    crater_nvml_close(NULL);
    ck_assert_uint_eq(crater_nvml_count(NULL), 0);
}
END_TEST

START_TEST(not_an_nvml)
{
    crater_error_t err = {0};
    /* libc is a real library without NVML entry points */
    crater_nvml_t *n = crater_nvml_open("libc.so.6", &err);

    ck_assert_ptr_null(n);
    ck_assert_int_eq(err.errnum, CRATER_EIO);
    ck_assert_ptr_nonnull(strstr(err.text, "lacks NVML entry points"));
}
END_TEST

/* The stub itself behaves like NVML: init first, NULL is invalid. */
START_TEST(stub_is_strict)
{
    void *lib = dlopen(NVMLSTUB_PATH, RTLD_NOW | RTLD_LOCAL);
    int (*count)(unsigned *), (*init)(void), (*shut)(void);
    unsigned c = 99;

    ck_assert_ptr_nonnull(lib);
    *(void **)&count = dlsym(lib, "nvmlDeviceGetCount_v2");
    *(void **)&init = dlsym(lib, "nvmlInit_v2");
    *(void **)&shut = dlsym(lib, "nvmlShutdown");
    ck_assert_int_eq(count(&c), 1); /* NVML_ERROR_UNINITIALIZED */
    ck_assert_int_eq(shut(), 1);
    ck_assert_int_eq(init(), 0);
    ck_assert_int_eq(count(NULL), 2); /* NVML_ERROR_INVALID_ARGUMENT */
    ck_assert_int_eq(count(&c), 0);
    ck_assert_uint_eq(c, 2);
    ck_assert_int_eq(shut(), 0);
    dlclose(lib);
}
END_TEST

START_TEST(stub_count_and_driver)
{
    crater_nvml_t *n = stub();
    crater_error_t err = {0};
    char drv[32], tiny[4];
    int cuda = -1;

    ck_assert_uint_eq(crater_nvml_count(n), 2);
    ck_assert_int_eq(crater_nvml_driver(n, drv, sizeof(drv), &cuda, &err), 0);
    ck_assert_str_eq(drv, "580.159.04");
    ck_assert_int_eq(cuda, 13000);
    ck_assert_int_eq(crater_nvml_driver(n, tiny, sizeof(tiny), NULL, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ELIMIT);
    crater_nvml_close(n);
}
END_TEST

START_TEST(stub_gpu_facts)
{
    crater_nvml_t *n = stub();
    crater_gpu_t g0 = gpu(n, 0), g1 = gpu(n, 1);
    crater_error_t err = {0};
    crater_gpu_t bad;

    ck_assert_str_eq(g0.uuid, "GPU-5eed0000-0000-4000-8000-000000000000");
    ck_assert_str_eq(g1.uuid, "GPU-5eed0000-0000-4000-8000-000000000001");
    ck_assert_str_eq(g0.model, "h200-sxm-141gb"); /* "NVIDIA H200" alias */
    ck_assert_str_eq(g0.vendor, "nvidia");
    ck_assert_uint_eq(g0.memory_bytes, 143771 * MIB);
    ck_assert_uint_eq(g0.sm_count, 132); /* Attributes_v2 unsupported: kb */
    ck_assert_uint_eq(g0.compute_cap, 90);
    ck_assert_uint_eq(g0.hbm_bandwidth, 4800 * GB);
    ck_assert_uint_eq(g0.nvlink_bandwidth, 900 * GB);
    ck_assert_double_eq(g0.fp16_tflops, 989.5);
    ck_assert_str_eq(g0.pci_bus_id, "0000:07:00.0");
    ck_assert_str_eq(g1.pci_bus_id, "0000:0f:00.0"); /* lowercased */
    ck_assert_int_eq(g0.numa_node, 0);               /* sysfs */
    ck_assert_int_eq(g1.numa_node, -1); /* sysfs -1, NVML unsupported */
    ck_assert_uint_eq(g0.nvlink_peers, 0x2);
    ck_assert_uint_eq(g1.nvlink_peers, 0x1);
    ck_assert_ptr_null(g0.upstream);
    ck_assert_int_eq(crater_nvml_gpu(n, 2, kb, &bad, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_ptr_null(bad.uuid);
    crater_nvml_gpu_clear(&g0);
    crater_nvml_gpu_clear(&g1);
    crater_nvml_close(n);
}
END_TEST

START_TEST(unknown_model_and_link_bandwidth)
{
    crater_nvml_t *n;
    crater_gpu_t g;

    setenv("NVMLSTUB_MODEL", "NVIDIA Foo_9000  X", 1);
    setenv("NVMLSTUB_MEM", "1073741824", 1);
    n = stub();
    g = gpu(n, 0);
    ck_assert_str_eq(g.model, "foo-9000-x");
    ck_assert_uint_eq(g.memory_bytes, GIB);
    ck_assert_uint_eq(g.sm_count, 0);
    ck_assert_uint_eq(g.compute_cap, 90); /* from NVML, not the kb */
    ck_assert_uint_eq(g.hbm_bandwidth, 0);
    ck_assert_uint_eq(g.nvlink_bandwidth, 4 * 50 * GB); /* 4 NVLink4 links */
    crater_nvml_gpu_clear(&g);
    crater_nvml_close(n);
}
END_TEST

START_TEST(nvswitch_and_no_link_peers)
{
    crater_nvml_t *n;
    crater_gpu_t g;

    setenv("NVMLSTUB_GPUS", "4", 1);
    setenv("NVMLSTUB_NVLINK", "switch", 1);
    n = stub();
    for (unsigned i = 0; i < 4; i++) {
        g = gpu(n, i);
        ck_assert_uint_eq(g.nvlink_peers, 0xfull & ~(1ull << i));
        crater_nvml_gpu_clear(&g);
    }
    crater_nvml_close(n);
    setenv("NVMLSTUB_GPUS", "3", 1);
    setenv("NVMLSTUB_NVLINK", "direct", 1);
    n = stub();
    g = gpu(n, 2); /* the odd one out has no partner */
    ck_assert_uint_eq(g.nvlink_peers, 0);
    crater_nvml_gpu_clear(&g);
    g = gpu(n, 1);
    ck_assert_uint_eq(g.nvlink_peers, 0x1);
    crater_nvml_gpu_clear(&g);
    crater_nvml_close(n);
}
END_TEST

START_TEST(stub_util_and_procs)
{
    crater_nvml_t *n = stub();
    crater_error_t err = {0};
    crater_nvml_proc_t p[4];
    uint64_t used = 0;
    double util = -1;
    size_t cnt = 99;

    ck_assert_int_eq(crater_nvml_util(n, 1, &util, NULL, &used, &err), 0);
    ck_assert_double_eq_tol(util, 0.38, 1e-9);
    ck_assert_uint_eq(used, 2 * GIB);
    ck_assert_int_eq(crater_nvml_procs(n, 0, p, 4, &cnt, &err), 0);
    ck_assert_uint_eq(cnt, 2); /* 4242 is compute and graphics: once */
    ck_assert_uint_eq(p[0].pid, 4242);
    ck_assert_uint_eq(p[0].used_bytes, 2 * GIB);
    ck_assert_uint_eq(p[1].pid, 4243);
    ck_assert_uint_eq(p[1].used_bytes, GIB / 2);
    ck_assert_int_eq(crater_nvml_procs(n, 0, p, 1, &cnt, &err), 0);
    ck_assert_uint_eq(cnt, 2);
    ck_assert_uint_eq(p[0].pid, 4242);
    ck_assert_int_eq(crater_nvml_procs(n, 1, p, 4, &cnt, &err), 0);
    ck_assert_uint_eq(cnt, 0);
    ck_assert_int_eq(crater_nvml_procs(n, 7, p, 4, &cnt, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    crater_nvml_close(n);
}
END_TEST

/* Idle-GPU reclaim reads SM utilisation and memory activity (NVML's
 * utilization.memory, bandwidth, not memory held); the stub takes both
 * from NVMLSTUB_UTIL_FILE at every call, so a test can make a GPU idle
 * while it holds memory, then busy again. */
START_TEST(stub_util_file_idle_and_busy)
{
    char path[] = "/tmp/crater-nvmlutil-XXXXXX";
    int fd = mkstemp(path);
    crater_nvml_t *n;
    crater_error_t err = {0};
    uint64_t used = 0;
    double sm = -1, act = -1;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "0 0\n", 4), 4);
    close(fd);
    setenv("NVMLSTUB_UTIL_FILE", path, 1);
    n = stub();
    ck_assert_int_eq(crater_nvml_util(n, 0, &sm, &act, &used, &err), 0);
    ck_assert_double_eq(sm, 0);
    ck_assert_double_eq(act, 0);
    ck_assert_uint_eq(used, GIB); /* idle, yet holding memory */
    /* no line for GPU 1: the fixed reading, memory activity 10 % */
    ck_assert_int_eq(crater_nvml_util(n, 1, &sm, &act, &used, &err), 0);
    ck_assert_double_eq_tol(sm, 0.38, 1e-9);
    ck_assert_double_eq_tol(act, 0.10, 1e-9);
    fd = open(path, O_WRONLY | O_TRUNC);
    ck_assert_int_eq(write(fd, "3 85\n", 5), 5); /* copies, no kernels */
    close(fd);
    ck_assert_int_eq(crater_nvml_util(n, 0, &sm, &act, &used, &err), 0);
    ck_assert_double_eq_tol(sm, 0.03, 1e-9);
    ck_assert_double_eq_tol(act, 0.85, 1e-9);
    crater_nvml_close(n);
    unsetenv("NVMLSTUB_UTIL_FILE");
    unlink(path);
}
END_TEST

START_TEST(storage_from_sysfs)
{
    crater_node_t node = {0};
    crater_error_t err = {0};
    crater_storage_t *s;

    ck_assert_int_eq(crater_discover_storage(SYSFS, NULL, NULL, &node, &err),
                     0);
    ck_assert_uint_eq(node.nstorage, 3); /* loop0 dm-0 zram0 sdb skipped */
    s = node.storage;
    ck_assert_str_eq(s[0].device, "nvme0n1");
    ck_assert_int_eq(s[0].iface, CRATER_IFACE_NVME);
    ck_assert(!s[0].rotational);
    ck_assert_uint_eq(s[0].capacity, 7501476528ull * 512);
    ck_assert_uint_eq(s[0].queue_depth, 1023);
    ck_assert_str_eq(s[0].model, "SAMSUNG MZQL27T6HBLA-00A07");
    ck_assert_int_eq(s[0].numa_node, 0);
    /* no probe: each class's declared figures, never 0 */
    ck_assert_uint_eq(s[0].iops, 200000);
    ck_assert_uint_eq(s[0].bandwidth, 2000 * MB);
    ck_assert_str_eq(s[1].device, "nvme1n1");
    ck_assert_int_eq(s[1].iface, CRATER_IFACE_NETWORK); /* transport tcp */
    ck_assert_int_eq(s[1].numa_node, 7);
    ck_assert_ptr_null(s[1].model);
    ck_assert_uint_eq(s[1].iops, 50000);
    ck_assert_uint_eq(s[1].bandwidth, 1000 * MB);
    ck_assert_str_eq(s[2].device, "sda");
    ck_assert_int_eq(s[2].iface, CRATER_IFACE_SATA);
    ck_assert(s[2].rotational);
    ck_assert_uint_eq(s[2].queue_depth, 64);
    ck_assert_uint_eq(s[2].capacity, 7814037168ull * 512);
    ck_assert_int_eq(s[2].numa_node, -1);
    ck_assert_uint_eq(s[2].iops, 150);
    ck_assert_uint_eq(s[2].bandwidth, 150 * MB);
    crater_node_clear(&node);
    /* a root without block/ has no disks, and that is not an error */
    ck_assert_int_eq(crater_discover_storage("/nonexistent",
                                             NULL,
                                             NULL,
                                             &node,
                                             &err),
                     0);
    ck_assert_uint_eq(node.nstorage, 0);
    crater_node_clear(&node);
}
END_TEST

/* Cloud disks: virtio says rotational but is no HDD; EBS looks NVMe. */
START_TEST(storage_declared_vm_classes)
{
    crater_node_t node = {0};
    crater_error_t err = {0};
    crater_storage_t *s;

    ck_assert_int_eq(crater_discover_storage(SYSFS_VM, NULL, NULL, &node, &err),
                     0);
    ck_assert_uint_eq(node.nstorage, 3);
    s = node.storage;
    ck_assert_str_eq(s[0].device, "mmcblk0");
    ck_assert_int_eq(s[0].iface, CRATER_IFACE_UNKNOWN);
    ck_assert_uint_eq(s[0].iops, 1000);
    ck_assert_uint_eq(s[0].bandwidth, 100 * MB);
    ck_assert_str_eq(s[1].device, "nvme0n1");
    ck_assert_int_eq(s[1].iface, CRATER_IFACE_NVME);
    ck_assert_str_eq(s[1].model, "Amazon Elastic Block Store");
    ck_assert_uint_eq(s[1].iops, 3000);
    ck_assert_uint_eq(s[1].bandwidth, 125 * MB);
    ck_assert_str_eq(s[2].device, "vda");
    ck_assert_int_eq(s[2].iface, CRATER_IFACE_VIRTIO);
    ck_assert(s[2].rotational);
    ck_assert_uint_eq(s[2].iops, 3000);
    ck_assert_uint_eq(s[2].bandwidth, 125 * MB);
    crater_node_clear(&node);
}
END_TEST

/* A fake probe: measures nvme0n1, fails elsewhere; records its calls. */
typedef struct probe_log {
    char calls[8][32];
    unsigned budget[8];
    int n;
} probe_log_t;

static int fake_probe(const char *device,
                      unsigned budget_ms,
                      uint64_t *iops,
                      uint64_t *bandwidth,
                      void *arg)
{
    probe_log_t *l = arg;

    ck_assert_int_lt(l->n, 8);
    snprintf(l->calls[l->n], sizeof(l->calls[0]), "%s", device);
    l->budget[l->n++] = budget_ms;
    if (strcmp(device, "nvme0n1") != 0) {
        errno = EACCES;
        return -1;
    }
    *iops = 654321;
    *bandwidth = 6500 * MB;
    return 0;
}

START_TEST(storage_probe_injected)
{
    crater_node_t node = {0};
    crater_error_t err = {0};
    probe_log_t l = {0};
    crater_storage_t *s;

    ck_assert_int_eq(crater_discover_storage(SYSFS,
                                             fake_probe,
                                             &l,
                                             &node,
                                             &err),
                     0);
    s = node.storage;
    ck_assert_uint_eq(node.nstorage, 3);
    /* the rotational sda is never probed (it could be asleep) */
    ck_assert_int_eq(l.n, 2);
    ck_assert_str_eq(l.calls[0], "nvme0n1");
    ck_assert_str_eq(l.calls[1], "nvme1n1");
    ck_assert_uint_le(l.budget[0], 150);
    ck_assert_uint_ge(l.budget[0], 30);
    ck_assert_uint_eq(s[0].iops, 654321); /* measured */
    ck_assert_uint_eq(s[0].bandwidth, 6500 * MB);
    ck_assert_uint_eq(s[1].iops, 50000); /* probe failed: declared */
    ck_assert_uint_eq(s[2].iops, 150);
    crater_node_clear(&node);
}
END_TEST

/* The real probe, on files: refusals, then a sparse 64 MiB file (its
 * figures mean nothing, but the AIO path runs end to end). */
START_TEST(real_probe_on_file)
{
    char dir[] = "probe-XXXXXX", path[64];
    uint64_t iops = 0, bw = 0;
    int fd, rc;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(crater_disk_probe("nope", 50, &iops, &bw, dir), -1);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_int_eq(crater_disk_probe("../x", 50, &iops, &bw, dir), -1);
    ck_assert_int_eq(errno, EINVAL);
    snprintf(path, sizeof(path), "%s/small", dir);
    fd = open(path, O_CREAT | O_WRONLY, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, 1 << 20), 0);
    close(fd);
    rc = crater_disk_probe("small", 50, &iops, &bw, dir);
    ck_assert_int_eq(rc, -1);
    ck_assert(errno == ERANGE || errno == EINVAL); /* EINVAL: no O_DIRECT */
    snprintf(path, sizeof(path), "%s/big", dir);
    fd = open(path, O_CREAT | O_WRONLY, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, 64 << 20), 0);
    close(fd);
    rc = crater_disk_probe("big", 60, &iops, &bw, dir);
    if (rc < 0) /* a filesystem without O_DIRECT, or no AIO here */
        ck_assert_msg(errno == EINVAL || errno == ENOSYS || errno == EAGAIN
                          || errno == EPERM,
                      "%s",
                      strerror(errno));
    else
        ck_assert(iops > 0 && bw > 0);
    unlink(path);
    snprintf(path, sizeof(path), "%s/small", dir);
    unlink(path);
    rmdir(dir);
}
END_TEST

static crater_node_t mem_node(size_t n, const uint64_t *cap)
{
    crater_node_t node = {0};

    node.mems = calloc(n, sizeof(*node.mems));
    ck_assert_ptr_nonnull(node.mems);
    for (size_t i = 0; i < n; i++)
        node.mems[i] = (crater_mem_t){.numa_node = (int)i, .capacity = cap[i]};
    node.nmems = n;
    return node;
}

/* This VM: node0 meminfo 5203704 kB, /proc/meminfo 24683584 kB. */
START_TEST(memory_short_numa_raised)
{
    uint64_t one[] = {5203704 * KIB}, two[] = {3 * GIB, 1 * GIB};
    crater_node_t n = mem_node(1, one);

    ck_assert_int_eq(crater_discover_fit_memory(&n, PROC "/vm-numa-short"), 1);
    ck_assert_uint_eq(n.mems[0].capacity, 24683584 * KIB);
    crater_node_clear(&n);
    /* two nodes 3:1 keep their ratio and sum to MemTotal exactly */
    n = mem_node(2, two);
    ck_assert_int_eq(crater_discover_fit_memory(&n, PROC "/vm-numa-short"), 1);
    ck_assert_uint_eq(n.mems[0].capacity + n.mems[1].capacity, 24683584 * KIB);
    ck_assert_uint_eq(n.mems[0].capacity, 24683584 * KIB / 4 * 3);
    crater_node_clear(&n);
}
END_TEST

START_TEST(memory_close_enough_kept)
{
    uint64_t near[] = {24683584 * KIB / 100 * 98}, above[] = {30 * GIB};
    crater_node_t n = mem_node(1, near);

    ck_assert_int_eq(crater_discover_fit_memory(&n, PROC "/vm-numa-short"), 0);
    ck_assert_uint_eq(n.mems[0].capacity, near[0]);
    crater_node_clear(&n);
    n = mem_node(1, above); /* above MemTotal: NUMA figures kept */
    ck_assert_int_eq(crater_discover_fit_memory(&n, PROC "/vm-numa-short"), 0);
    ck_assert_uint_eq(n.mems[0].capacity, 30 * GIB);
    ck_assert_int_eq(crater_discover_fit_memory(&n, "/nonexistent"), 0);
    ck_assert_uint_eq(n.mems[0].capacity, 30 * GIB);
    crater_node_clear(&n);
}
END_TEST

START_TEST(node_names)
{
    char buf[64];

    ck_assert_str_eq(crater_discover_node_name("My_Host.Example.COM",
                                               buf,
                                               sizeof(buf)),
                     "my-host.example.com");
    ck_assert_str_eq(crater_discover_node_name("-gpu 01-", buf, sizeof(buf)),
                     "gpu-01");
    ck_assert_str_eq(crater_discover_node_name("--", buf, sizeof(buf)), "node");
    ck_assert_str_eq(crater_discover_node_name(NULL, buf, sizeof(buf)), "node");
}
END_TEST

static void discover(const crater_discover_opts_t *o, crater_node_t *n)
{
    crater_error_t err = {0};

    ck_assert_msg(crater_discover(o, kb, n, &err) == 0, "%s", err.text);
    ck_assert_int_eq(n->samples, CRATER_SAMPLES_REAL);
    ck_assert_uint_eq(n->nlabels, 0);
    ck_assert_uint_gt(n->ncpus, 0);
    ck_assert_uint_gt(n->nmems, 0);
    ck_assert_uint_gt(crater_node_cpu_milli(n), 0);
    ck_assert_uint_gt(crater_node_memory_bytes(n), 0);
    for (size_t i = 0; i < n->ncpus; i++) {
        ck_assert_uint_gt(n->cpus[i].cores, 0);
        ck_assert_uint_ge(n->cpus[i].threads, n->cpus[i].cores);
        ck_assert(n->cpus[i].ipc_baseline > 0);
    }
}

/* Encode -> YAML text -> decode with the kb: what `crater validate` and
 * `crater-agent --discover -o yaml` rely on. Compare the key fields. */
static void round_trip(const crater_node_t *n)
{
    json_t *j = crater_hw_encode_node(n);
    char *yaml = crater_json_to_yaml(j);
    crater_cluster_t *c = NULL;
    crater_error_t err = {0};
    crater_doc_t *doc = NULL;
    crater_dec_t d;
    const crater_node_t *m;

    ck_assert_ptr_nonnull(yaml);
    ck_assert_int_eq(crater_doc_parse(yaml,
                                      strlen(yaml),
                                      "discovered.yaml",
                                      &doc,
                                      &err),
                     0);
    crater_dec_init(&d, doc, 0, &err);
    ck_assert_msg(crater_hw_decode(&d, crater_doc_root(doc, 0), kb, &c) == 0,
                  "%s\n%s",
                  err.text,
                  yaml);
    ck_assert_uint_eq(c->nnodes, 1);
    m = &c->nodes[0];
    ck_assert_str_eq(m->name, n->name);
    ck_assert_int_eq(m->samples, CRATER_SAMPLES_REAL);
    ck_assert_uint_eq(m->ngpus, n->ngpus);
    ck_assert_uint_eq(m->ncpus, n->ncpus);
    ck_assert_uint_eq(m->nmems, n->nmems);
    ck_assert_uint_eq(m->nstorage, n->nstorage);
    for (size_t i = 0; i < n->ngpus; i++) {
        ck_assert_str_eq(m->gpus[i].uuid, n->gpus[i].uuid);
        ck_assert_str_eq(m->gpus[i].model, n->gpus[i].model);
        ck_assert_str_eq(m->gpus[i].pci_bus_id, n->gpus[i].pci_bus_id);
        ck_assert_uint_eq(m->gpus[i].memory_bytes, n->gpus[i].memory_bytes);
        ck_assert_uint_eq(m->gpus[i].sm_count, n->gpus[i].sm_count);
        ck_assert_uint_eq(m->gpus[i].nvlink_peers, n->gpus[i].nvlink_peers);
        ck_assert_uint_eq(m->gpus[i].nvlink_bandwidth,
                          n->gpus[i].nvlink_bandwidth);
        ck_assert_int_eq(m->gpus[i].numa_node, n->gpus[i].numa_node);
    }
    for (size_t i = 0; i < n->ncpus; i++) {
        ck_assert_uint_eq(m->cpus[i].cores, n->cpus[i].cores);
        ck_assert_uint_eq(m->cpus[i].threads, n->cpus[i].threads);
        ck_assert_int_eq(m->cpus[i].numa_node, n->cpus[i].numa_node);
        if (n->cpus[i].model)
            ck_assert_str_eq(m->cpus[i].model, n->cpus[i].model);
    }
    for (size_t i = 0; i < n->nmems; i++)
        ck_assert_uint_eq(m->mems[i].capacity, n->mems[i].capacity);
    for (size_t i = 0; i < n->nstorage; i++) {
        ck_assert_str_eq(m->storage[i].device, n->storage[i].device);
        ck_assert_uint_eq(m->storage[i].capacity, n->storage[i].capacity);
        ck_assert_int_eq(m->storage[i].iface, n->storage[i].iface);
        ck_assert_int_eq(m->storage[i].rotational, n->storage[i].rotational);
        ck_assert_int_eq(m->storage[i].numa_node, n->storage[i].numa_node);
    }
    crater_cluster_destroy(c);
    crater_doc_destroy(doc);
    free(yaml);
    json_decref(j);
}

START_TEST(discover_with_stub_and_fake_sysfs)
{
    crater_discover_opts_t o = {.name = "Test_Node",
                                .nvml_lib = NVMLSTUB_PATH,
                                .sys_root = SYSFS,
                                .no_disk_probe = true};
    crater_node_t n;

    discover(&o, &n);
    ck_assert_str_eq(n.name, "test-node");
    ck_assert_uint_eq(n.ngpus, 2);
    ck_assert_str_eq(n.gpus[0].model, "h200-sxm-141gb");
    ck_assert_uint_eq(n.gpus[0].nvlink_peers, 0x2);
    ck_assert_uint_eq(n.gpus[1].nvlink_peers, 0x1);
    ck_assert_uint_eq(n.nstorage, 3);
    ck_assert_str_eq(n.storage[0].device, "nvme0n1");
    ck_assert_str_eq(n.storage[2].device, "sda");
    ck_assert(n.storage[2].rotational);
    ck_assert_int_eq(n.storage[1].numa_node, -1); /* node 7: not here */
    for (size_t i = 0; i < n.nstorage; i++)
        ck_assert_uint_gt(n.storage[i].iops, 0);
    round_trip(&n);
    crater_node_clear(&n);
    o.no_gpus = true;
    discover(&o, &n);
    ck_assert_uint_eq(n.ngpus, 0);
    crater_node_clear(&n);
}
END_TEST

/* This machine as it is: real hwloc, real /sys, the real NVML if any. */
START_TEST(discover_this_machine)
{
    crater_node_t n;

    discover(NULL, &n);
    ck_assert_ptr_nonnull(n.name);
    round_trip(&n);
    crater_node_clear(&n);
}
END_TEST

/* Whatever this machine's NUMA nodes say, a MemTotal of 64 TiB above them
 * is what discovery reports (before the fix: the NUMA sum). */
START_TEST(discover_memory_from_meminfo)
{
    crater_discover_opts_t o = {.no_gpus = true,
                                .sys_root = "/nonexistent",
                                .proc_root = PROC "/huge-mem"};
    crater_node_t n;

    discover(&o, &n);
    ck_assert_uint_eq(crater_node_memory_bytes(&n), 64ull << 40);
    round_trip(&n);
    crater_node_clear(&n);
}
END_TEST

START_TEST(discover_missing_nvml_is_no_gpus)
{
    crater_discover_opts_t o = {.nvml_lib = "/nonexistent/libnvidia-ml.so.1",
                                .sys_root = "/nonexistent"};
    crater_node_t n;

    discover(&o, &n);
    ck_assert_uint_eq(n.ngpus, 0);
    ck_assert_uint_eq(n.nstorage, 0);
    round_trip(&n);
    crater_node_clear(&n);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("discover");
    TCase *tc = tcase_create("discover");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, open_without_library);
    tcase_add_test(tc, not_an_nvml);
    tcase_add_test(tc, stub_is_strict);
    tcase_add_test(tc, stub_count_and_driver);
    tcase_add_test(tc, stub_gpu_facts);
    tcase_add_test(tc, unknown_model_and_link_bandwidth);
    tcase_add_test(tc, nvswitch_and_no_link_peers);
    tcase_add_test(tc, stub_util_and_procs);
    tcase_add_test(tc, stub_util_file_idle_and_busy);
    tcase_add_test(tc, storage_from_sysfs);
    tcase_add_test(tc, storage_declared_vm_classes);
    tcase_add_test(tc, storage_probe_injected);
    tcase_add_test(tc, real_probe_on_file);
    tcase_add_test(tc, memory_short_numa_raised);
    tcase_add_test(tc, memory_close_enough_kept);
    tcase_add_test(tc, node_names);
    tcase_add_test(tc, discover_with_stub_and_fake_sysfs);
    tcase_add_test(tc, discover_this_machine);
    tcase_add_test(tc, discover_memory_from_meminfo);
    tcase_add_test(tc, discover_missing_nvml_is_no_gpus);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
