/* test_sampler.c - /proc parsers and rate/smoothing arithmetic against the
 * fixtures in tests/data/proc (t0, t1, t2 are snapshots 5 s apart; the
 * expected numbers are worked out in the comments), plus one sample of the
 * real /proc of the machine running the test. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/sampler.h"

#define PROC CRATER_SOURCE_DIR "/tests/data/proc"

static char tmpdir[] = "/tmp/crater-sampler-XXXXXX";

static void copy_file(const char *from, const char *to)
{
    char buf[8192];
    FILE *in = fopen(from, "r"), *out = fopen(to, "w");
    size_t n;

    ck_assert_msg(in && out, "copy %s -> %s", from, to);
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
        ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
}

/* Make tmpdir look like snapshot `snap` of /proc. */
static void use_snapshot(const char *snap)
{
    static const char *const files[] = {"stat", "meminfo", "diskstats"};
    char from[1024], to[1024];

    for (int i = 0; i < 3; i++) {
        snprintf(from, sizeof(from), "%s/%s/%s", PROC, snap, files[i]);
        snprintf(to, sizeof(to), "%s/%s", tmpdir, files[i]);
        copy_file(from, to);
    }
}

static void setup(void)
{
    strcpy(tmpdir, "/tmp/crater-sampler-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char p[1024];
    static const char *const files[] = {"stat", "meminfo", "diskstats"};

    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/%s", tmpdir, files[i]);
        unlink(p);
    }
    rmdir(tmpdir);
}

static crater_sampler_t *sampled(unsigned window,
                                 const char *const *snaps,
                                 int n)
{
    crater_error_t err;
    crater_sampler_t *s = crater_sampler_create(tmpdir, window, &err);

    ck_assert_ptr_nonnull(s);
    for (int i = 0; i < n; i++) {
        use_snapshot(snaps[i]);
        ck_assert_msg(crater_sampler_sample(s, 1000 + 5000 * (uint64_t)i, &err)
                          == 0,
                      "%s",
                      err.text);
    }
    return s;
}

static const crater_disk_sample_t *disk(const crater_host_sample_t *h,
                                        const char *name)
{
    for (size_t i = 0; i < h->ndisks; i++)
        if (strcmp(h->disks[i].name, name) == 0)
            return &h->disks[i];
    ck_abort_msg("disk %s not in sample", name);
    return NULL;
}

#define EQ(a, b) ck_assert_double_eq_tol((a), (b), 1e-9)

START_TEST(stat_parse_exact)
{
    uint64_t busy, total;
    crater_error_t err;

    ck_assert_int_eq(crater_proc_stat_parse("cpu  1000 0 500 8000 200 100 100 "
                                            "100 50 0\n"
                                            "cpu0 1 2 3 4\n",
                                            &busy,
                                            &total,
                                            &err),
                     0);
    ck_assert_uint_eq(busy, 1800);   /* user+nice+system+irq+softirq+steal */
    ck_assert_uint_eq(total, 10000); /* + idle + iowait; guest not added */
    /* A 2.6.11-era kernel has only 7 fields. */
    ck_assert_int_eq(crater_proc_stat_parse("cpu 10 0 5 85 0 0 0\n",
                                            &busy,
                                            &total,
                                            &err),
                     0);
    ck_assert_uint_eq(busy, 15);
    ck_assert_uint_eq(total, 100);
}
END_TEST

START_TEST(stat_parse_errors)
{
    uint64_t busy = 7, total = 7;
    crater_error_t err;

    ck_assert_int_eq(crater_proc_stat_parse("intr 1\ncpu  1 2 x 4\n",
                                            &busy,
                                            &total,
                                            &err),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_EPARSE);
    ck_assert_str_eq(err.text, "stat:2: cpu field 3 is not a number");
    ck_assert_int_eq(crater_proc_stat_parse("cpu  1 2\n", &busy, &total, &err),
                     -1);
    ck_assert_str_eq(err.text,
                     "stat:1: cpu line has 2 fields, need at least 4");
    ck_assert_int_eq(crater_proc_stat_parse("cpu0 1 2 3 4\nintr 5\n",
                                            &busy,
                                            &total,
                                            &err),
                     -1);
    ck_assert_str_eq(err.text, "stat:2: no aggregate 'cpu' line");
    ck_assert_uint_eq(busy, 7);
}
END_TEST

START_TEST(meminfo_parse_exact)
{
    uint64_t total, avail;
    crater_error_t err;

    ck_assert_int_eq(crater_meminfo_parse("MemTotal: 1000 kB\nMemFree: 100 kB\n"
                                          "MemAvailable: 250 kB\n"
                                          "HugePages_Total: 0\n",
                                          &total,
                                          &avail,
                                          &err),
                     0);
    ck_assert_uint_eq(total, 1024000);
    ck_assert_uint_eq(avail, 256000);
    /* Before Linux 3.14: MemFree + Buffers + Cached. */
    ck_assert_int_eq(crater_meminfo_parse("MemTotal: 1000 kB\nMemFree: 100 kB\n"
                                          "Buffers: 20 kB\nCached: 30 kB\n",
                                          &total,
                                          &avail,
                                          &err),
                     0);
    ck_assert_uint_eq(avail, 150 * 1024);
}
END_TEST

START_TEST(meminfo_parse_errors)
{
    uint64_t total, avail;
    crater_error_t err;

    ck_assert_int_eq(crater_meminfo_parse("MemTotal: 1000 kB\nMemFree 100 kB\n",
                                          &total,
                                          &avail,
                                          &err),
                     -1);
    ck_assert_str_eq(err.text, "meminfo:2: expected 'Key: value [kB]'");
    ck_assert_int_eq(crater_meminfo_parse("MemTotal: 1000 MB\n",
                                          &total,
                                          &avail,
                                          &err),
                     -1);
    ck_assert_str_eq(err.text,
                     "meminfo:1: MemTotal: unexpected 'MB' after the value");
    ck_assert_int_eq(crater_meminfo_parse("MemFree: 5 kB\n",
                                          &total,
                                          &avail,
                                          &err),
                     -1);
    ck_assert_str_eq(err.text, "meminfo:1: no MemTotal (or it is 0)");
}
END_TEST

START_TEST(diskstats_whole_disks_only)
{
    crater_diskstat_t d[8];
    crater_error_t err;
    size_t n;
    char *text;
    FILE *f = fopen(PROC "/t1/diskstats", "r");
    long len;

    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    rewind(f);
    text = calloc(1, (size_t)len + 1);
    ck_assert_uint_eq(fread(text, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    ck_assert_int_eq(crater_diskstats_parse(text, d, 8, &n, &err), 0);
    free(text);
    ck_assert_uint_eq(n, 2); /* loop0 sda1 nvme0n1p1 dm-0 zram0 sr0 skipped */
    ck_assert_str_eq(d[0].name, "sda");
    ck_assert_uint_eq(d[0].major, 8);
    ck_assert_uint_eq(d[0].rd_ios, 1500);
    ck_assert_uint_eq(d[0].rd_sectors, 120960);
    ck_assert_uint_eq(d[0].wr_ios, 2250);
    ck_assert_uint_eq(d[0].wr_sectors, 170240);
    ck_assert_uint_eq(d[0].io_ticks_ms, 3500);
    ck_assert_str_eq(d[1].name, "nvme0n1");
    ck_assert_uint_eq(d[1].minor, 0);
}
END_TEST

START_TEST(disk_names)
{
    static const char *const whole[] = {"sda",
                                        "sdaa",
                                        "vdb",
                                        "xvdf",
                                        "nvme0n1",
                                        "nvme12n3",
                                        "mmcblk0",
                                        "md0",
                                        "nbd0",
                                        "hdc"};
    static const char *const part[] = {"sda1",
                                       "sdab12",
                                       "vdb3",
                                       "xvdf1",
                                       "nvme0n1p1",
                                       "mmcblk0p2",
                                       "loop7",
                                       "ram0",
                                       "zram0",
                                       "dm-3",
                                       "sr0"};

    for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++)
        ck_assert_msg(crater_disk_is_whole(whole[i]), "%s", whole[i]);
    for (size_t i = 0; i < sizeof(part) / sizeof(part[0]); i++)
        ck_assert_msg(!crater_disk_is_whole(part[i]), "%s", part[i]);
}
END_TEST

START_TEST(first_sample_levels_only)
{
    static const char *const snaps[] = {"t0"};
    crater_sampler_t *s = sampled(4, snaps, 1);
    crater_host_sample_t h;

    crater_sampler_get(s, &h);
    ck_assert_uint_eq(h.samples, 1);
    EQ(h.mem, 0.25); /* 1 - 12288000/16384000 */
    ck_assert_uint_eq(h.mem_total, 16384000ull * 1024);
    ck_assert_uint_eq(h.mem_available, 12288000ull * 1024);
    EQ(h.cpu, 0.0);
    ck_assert_uint_eq(h.ndisks, 0);
    crater_sampler_destroy(s);
}
END_TEST

/* t0 -> t1, 5000 ms: sda +500 reads, +40960 sectors, +250 writes,
   +10240 sectors, +2500 ms busy; nvme0n1 +50000 reads, +2048000 sectors,
   +5000 writes, +102400 sectors, +4000 ms busy. CPU: busy +900 of +4000. */
START_TEST(rates_from_two_samples)
{
    static const char *const snaps[] = {"t0", "t1"};
    crater_sampler_t *s = sampled(1, snaps, 2);
    crater_host_sample_t h;
    const crater_disk_sample_t *d;

    crater_sampler_get(s, &h);
    ck_assert_uint_eq(h.samples, 1);
    EQ(h.cpu, 0.225);
    EQ(h.mem, 0.5);
    ck_assert_uint_eq(h.ndisks, 2);
    d = disk(&h, "sda");
    EQ(d->read_iops, 100.0);
    EQ(d->write_iops, 50.0);
    EQ(d->read_bps, 4194304.0);  /* 40960 * 512 / 5 */
    EQ(d->write_bps, 1048576.0); /* 10240 * 512 / 5 */
    EQ(d->util, 0.5);
    d = disk(&h, "nvme0n1");
    EQ(d->read_iops, 10000.0);
    EQ(d->write_iops, 1000.0);
    EQ(d->read_bps, 209715200.0);
    EQ(d->write_bps, 10485760.0);
    EQ(d->util, 0.8);
    EQ(h.disk_util, 0.8);
    crater_sampler_destroy(s);
}
END_TEST

/* t1 -> t2: CPU +300 of +4000 = 0.075; sda +250 reads (50/s), +1000 ms busy
   (0.2); nvme0n1 idle. Window 2 keeps the two rate samples. */
START_TEST(smoothing_window_average)
{
    static const char *const snaps[] = {"t0", "t1", "t2"};
    crater_sampler_t *s = sampled(2, snaps, 3);
    crater_host_sample_t h;

    crater_sampler_get(s, &h);
    ck_assert_uint_eq(h.samples, 2);
    EQ(h.cpu, 0.15);  /* (0.225 + 0.075) / 2 */
    EQ(h.mem, 0.625); /* (0.5 + 0.75) / 2 */
    ck_assert_uint_eq(h.mem_available, 4096000ull * 1024);
    EQ(disk(&h, "sda")->read_iops, 75.0);
    EQ(disk(&h, "sda")->util, 0.35);
    EQ(disk(&h, "nvme0n1")->read_iops, 5000.0);
    EQ(disk(&h, "nvme0n1")->read_bps, 104857600.0);
    EQ(h.disk_util, 0.4);
    crater_sampler_destroy(s);

    /* Window 3 holds all three: mem over 3 levels, cpu over 2 rates. */
    s = sampled(3, snaps, 3);
    crater_sampler_get(s, &h);
    ck_assert_uint_eq(h.samples, 3);
    EQ(h.mem, 0.5);
    EQ(h.cpu, 0.15);
    crater_sampler_destroy(s);
}
END_TEST

START_TEST(malformed_files_name_path_and_line)
{
    crater_error_t err;
    crater_sampler_t *s;
    crater_host_sample_t h;

    s = crater_sampler_create(PROC "/bad-mem", 3, &err);
    ck_assert_int_eq(crater_sampler_sample(s, 1, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EPARSE);
    ck_assert_str_eq(err.text,
                     PROC "/bad-mem/meminfo:3: MemAvailable: value is not a "
                          "number");
    crater_sampler_get(s, &h);
    ck_assert_uint_eq(h.samples, 0); /* unchanged on error */
    crater_sampler_destroy(s);

    s = crater_sampler_create(PROC "/bad-disk", 3, &err);
    ck_assert_int_eq(crater_sampler_sample(s, 1, &err), -1);
    ck_assert_str_eq(err.text,
                     PROC "/bad-disk/diskstats:2: sdb: counter 4 missing or "
                          "not a number");
    crater_sampler_destroy(s);

    s = crater_sampler_create(PROC "/no-such-dir", 3, &err);
    ck_assert_int_eq(crater_sampler_sample(s, 1, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EIO);
    ck_assert_str_eq(err.text,
                     PROC "/no-such-dir/stat: No such file or directory");
    crater_sampler_destroy(s);
}
END_TEST

START_TEST(bad_window_and_clock)
{
    static const char *const snaps[] = {"t0"};
    crater_error_t err;
    crater_sampler_t *s;

    ck_assert_ptr_null(crater_sampler_create(NULL, 0, &err));
    ck_assert_int_eq(err.errnum, CRATER_ERANGE);
    ck_assert_str_eq(err.field, "monitoring.smoothing_window");
    s = sampled(2, snaps, 1); /* sampled at 1000 ms */
    ck_assert_int_eq(crater_sampler_sample(s, 1000, &err), -1);
    ck_assert_str_eq(err.text, "sampler: clock went from 1000 to 1000 ms");
    crater_sampler_destroy(s);
}
END_TEST

START_TEST(real_proc)
{
    crater_error_t err;
    crater_sampler_t *s = crater_sampler_create(NULL, 5, &err);
    crater_host_sample_t h;

    ck_assert_ptr_nonnull(s);
    ck_assert_msg(crater_sampler_sample(s, 1000, &err) == 0, "%s", err.text);
    usleep(200 * 1000);
    ck_assert_msg(crater_sampler_sample(s, 1200, &err) == 0, "%s", err.text);
    crater_sampler_get(s, &h);
    ck_assert_uint_eq(h.samples, 2);
    ck_assert_uint_gt(h.mem_total, 0);
    ck_assert_uint_gt(h.mem_available, 0);
    ck_assert(h.mem > 0.0 && h.mem < 1.0);
    ck_assert(h.cpu >= 0.0 && h.cpu <= 1.0);
    for (size_t i = 0; i < h.ndisks; i++)
        ck_assert(crater_disk_is_whole(h.disks[i].name));
    crater_sampler_destroy(s);
}
END_TEST

static Suite *sampler_suite(void)
{
    Suite *s = suite_create("sampler");
    TCase *p = tcase_create("parse"), *r = tcase_create("rates");

    tcase_add_test(p, stat_parse_exact);
    tcase_add_test(p, stat_parse_errors);
    tcase_add_test(p, meminfo_parse_exact);
    tcase_add_test(p, meminfo_parse_errors);
    tcase_add_test(p, diskstats_whole_disks_only);
    tcase_add_test(p, disk_names);
    tcase_add_test(p, malformed_files_name_path_and_line);
    tcase_add_test(p, real_proc);
    tcase_add_checked_fixture(r, setup, teardown);
    tcase_add_test(r, first_sample_levels_only);
    tcase_add_test(r, rates_from_two_samples);
    tcase_add_test(r, smoothing_window_average);
    tcase_add_test(r, bad_window_and_clock);
    suite_add_tcase(s, p);
    suite_add_tcase(s, r);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sampler_suite());
    int failures;

    srunner_run_all(sr, CK_NORMAL);
    failures = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failures ? 1 : 0;
}
