/*
 * test_gpuslice_file.c - the slice file (crater/gpuslice.h, slice.c) and
 * the interposer's pointer table (alloctab.c), under ASan+UBSan in the
 * sanitizer tree. The interposer itself is tested by test_gpuslice.sh.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloctab.h"
#include "crater/gpuslice.h"
#include "slice.h"

static char path[64];

static const char *uuid0 = "GPU-8c5d2a4e-1b3f-4c6d-9e7f-0123456789ab";
static const char *uuid1 = "gpu-00000000-0000-0000-0000-0000000000FF";

static void mkpath(void)
{
    snprintf(path, sizeof(path), "/dev/shm/crater-gs-unit.%d", getpid());
}

/* A file with GPU 0 = 100 bytes, GPU 1 = 1000 bytes, mapped. */
static crater_gpuslice_file_t *make(void)
{
    crater_gpuslice_limit_t g[2] = {{.limit = 100}, {.limit = 1000}};
    crater_error_t err;
    mkpath();
    ck_assert_int_eq(crater_gpuslice_uuid_parse(uuid0, g[0].uuid, &err), 0);
    ck_assert_int_eq(crater_gpuslice_uuid_parse(uuid1, g[1].uuid, &err), 0);
    ck_assert_int_eq(crater_gpuslice_create(path,
                                            g,
                                            2,
                                            (uid_t)-1,
                                            (gid_t)-1,
                                            &err),
                     0);
    crater_gpuslice_file_t *f = crater__gs_map(path);
    ck_assert_ptr_nonnull(f);
    return f;
}

static void done(crater_gpuslice_file_t *f)
{
    crater__gs_unmap(f);
    unlink(path);
}

START_TEST(uuid_round_trip)
{
    uint8_t u[16];
    char buf[41];
    crater_error_t err;
    ck_assert_int_eq(crater_gpuslice_uuid_parse(uuid0, u, &err), 0);
    ck_assert_uint_eq(u[0], 0x8c);
    ck_assert_uint_eq(u[15], 0xab);
    ck_assert_str_eq(crater_gpuslice_uuid_format(u, buf), uuid0);
    ck_assert_int_eq(crater_gpuslice_uuid_parse(uuid0 + 4, u, &err), 0);
    ck_assert_int_eq(crater_gpuslice_uuid_parse(uuid1, u, &err), 0);
    ck_assert_str_eq(crater_gpuslice_uuid_format(u, buf),
                     "GPU-00000000-0000-0000-0000-0000000000ff");
}
END_TEST

START_TEST(uuid_errors)
{
    uint8_t u[16];
    crater_error_t err;
    ck_assert_int_eq(crater_gpuslice_uuid_parse("GPU-8c5d2a4e1b3f-4c6d-9e7f-"
                                                "0123456789ab",
                                                u,
                                                &err),
                     -1);
    ck_assert_str_eq(err.text,
                     "GPU UUID 'GPU-8c5d2a4e1b3f-4c6d-9e7f-0123456789ab': "
                     "expected '-' at position 13");
    ck_assert_int_eq(crater_gpuslice_uuid_parse("GPU-8c5d2a4e-1b3f-4c6d-9e7f-"
                                                "0123456789a",
                                                u,
                                                &err),
                     -1);
    ck_assert_str_eq(err.text,
                     "GPU UUID 'GPU-8c5d2a4e-1b3f-4c6d-9e7f-0123456789a': "
                     "expected two hex digits at position 39");
    ck_assert_int_eq(crater_gpuslice_uuid_parse("8c5d2a4e-1b3f-4c6d-9e7f-"
                                                "0123456789abcd",
                                                u,
                                                &err),
                     -1);
    ck_assert_str_eq(err.text,
                     "GPU UUID '8c5d2a4e-1b3f-4c6d-9e7f-"
                     "0123456789abcd': trailing text");
}
END_TEST

START_TEST(create_read)
{
    crater_gpuslice_file_t *f = make();
    ck_assert_uint_eq(f->ngpus, 2);
    ck_assert_uint_eq(f->magic, CRATER_GPUSLICE_MAGIC);
    uint8_t u[16];
    crater_error_t err;
    crater_gpuslice_uuid_parse(uuid1, u, &err);
    ck_assert_int_eq(crater__gs_find_gpu(f, u), 1);
    u[3] ^= 1;
    ck_assert_int_eq(crater__gs_find_gpu(f, u), -1);
    int slot = crater__gs_claim(f, getpid(), crater__gs_proc_start(getpid()));
    ck_assert_int_ge(slot, 0);
    ck_assert_int_eq(crater__gs_reserve(f, slot, 1, 300), 0);
    crater_gpuslice_limit_t g[4];
    size_t n = 9;
    ck_assert_int_eq(crater_gpuslice_read(path, g, 4, &n, &err), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(g[0].limit, 100);
    ck_assert_uint_eq(g[0].used, 0);
    ck_assert_uint_eq(g[1].limit, 1000);
    ck_assert_uint_eq(g[1].used, 300);
    ck_assert_int_eq(crater_gpuslice_read(path, g, 1, &n, &err), 0);
    ck_assert_uint_eq(n, 1);
    done(f);
}
END_TEST

START_TEST(create_errors)
{
    crater_gpuslice_limit_t g[2] = {{.limit = 100}, {.limit = 0}};
    crater_error_t err;
    mkpath();
    ck_assert_int_eq(crater_gpuslice_create(path,
                                            g,
                                            0,
                                            (uid_t)-1,
                                            (gid_t)-1,
                                            &err),
                     -1);
    ck_assert_str_eq(err.text, "slice file: 0 GPUs (1 to 16 allowed)");
    ck_assert_int_eq(crater_gpuslice_create(path,
                                            g,
                                            2,
                                            (uid_t)-1,
                                            (gid_t)-1,
                                            &err),
                     -1);
    ck_assert_str_eq(err.text,
                     "slice file: GPU "
                     "GPU-00000000-0000-0000-0000-000000000000: "
                     "limit is 0");
    g[1].limit = 5;
    ck_assert_int_eq(crater_gpuslice_create(path,
                                            g,
                                            2,
                                            (uid_t)-1,
                                            (gid_t)-1,
                                            &err),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_ECONFLICT);
    ck_assert_int_eq(crater_gpuslice_create("/nonexistent/dir/x",
                                            g,
                                            1,
                                            (uid_t)-1,
                                            (gid_t)-1,
                                            &err),
                     -1);
    ck_assert_str_eq(err.text,
                     "slice file /nonexistent/dir/x: No such file or "
                     "directory");
    size_t n;
    ck_assert_int_eq(crater_gpuslice_read(path, g, 2, &n, &err), -1);
    FILE *fp = fopen(path, "w");
    fputs("not a slice file", fp);
    fclose(fp);
    ck_assert_int_eq(crater_gpuslice_read(path, g, 2, &n, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    unlink(path);
}
END_TEST

START_TEST(reserve_exact_limit)
{
    crater_gpuslice_file_t *f = make();
    int s = crater__gs_claim(f, getpid(), 0);
    ck_assert_int_eq(crater__gs_reserve(f, s, 0, 60), 0);
    ck_assert_int_eq(crater__gs_reserve(f, s, 0, 40), 0);
    ck_assert_int_eq(crater__gs_reserve(f, s, 0, 1), -1);
    ck_assert_int_eq(crater__gs_reserve(f, s, 0, UINT64_MAX), -1);
    ck_assert_uint_eq(atomic_load(&f->gpu[0].used), 100);
    ck_assert_uint_eq(atomic_load(&f->proc[s].bytes[0]), 100);
    crater__gs_release(f, s, 0, 40);
    ck_assert_int_eq(crater__gs_reserve(f, s, 0, 40), 0);
    crater__gs_release(f, s, 0, 500); /* clamped, never wraps */
    ck_assert_uint_eq(atomic_load(&f->gpu[0].used), 0);
    crater__gs_leave(f, s);
    ck_assert_int_eq(atomic_load(&f->proc[s].pid), 0);
    done(f);
}
END_TEST

/* A child claims, reserves and dies: the parent's next reservation that
 * would not fit reclaims its share. */
START_TEST(reclaim_dead)
{
    crater_gpuslice_file_t *f = make();
    int s = crater__gs_claim(f, getpid(), crater__gs_proc_start(getpid()));
    pid_t pid = fork();
    if (pid == 0) {
        int c = crater__gs_claim(f, getpid(), crater__gs_proc_start(getpid()));
        _exit(c < 0 || crater__gs_reserve(f, c, 0, 70) < 0);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_int_eq(WEXITSTATUS(st), 0);
    ck_assert_uint_eq(atomic_load(&f->gpu[0].used), 70);
    ck_assert_int_eq(crater__gs_reserve(f, s, 0, 20), 0);
    ck_assert_uint_eq(atomic_load(&f->gpu[0].used), 90);
    ck_assert_int_eq(crater__gs_reserve(f, s, 0, 50), 0); /* reclaimed */
    ck_assert_uint_eq(atomic_load(&f->gpu[0].used), 70);
    done(f);
}
END_TEST

/* A recycled pid: same pid, different start time, is not the old owner. */
START_TEST(reclaim_recycled_pid)
{
    crater_gpuslice_file_t *f = make();
    int s = crater__gs_claim(f, getpid(), crater__gs_proc_start(getpid()));
    int t = crater__gs_claim(f, getppid(), 1); /* wrong start time */
    ck_assert_int_ge(t, 0);
    ck_assert_int_eq(crater__gs_reserve(f, t, 0, 100), 0);
    ck_assert_int_eq(crater__gs_reclaim(f, s), 1);
    ck_assert_uint_eq(atomic_load(&f->gpu[0].used), 0);
    ck_assert_int_eq(atomic_load(&f->proc[t].pid), 0);
    done(f);
}
END_TEST

/* A leak (used without an owner) is repaired by a process that finds
 * itself alone, and not while another live process is in the file. */
START_TEST(claim_repairs_leak)
{
    crater_gpuslice_file_t *f = make();
    int other = crater__gs_claim(f, getppid(), 0);
    atomic_store(&f->gpu[1].used, 555);
    int s = crater__gs_claim(f, getpid(), 0);
    ck_assert_uint_eq(atomic_load(&f->gpu[1].used), 555);
    crater__gs_leave(f, s);
    crater__gs_leave(f, other);
    s = crater__gs_claim(f, getpid(), 0);
    ck_assert_uint_eq(atomic_load(&f->gpu[1].used), 0);
    done(f);
}
END_TEST

START_TEST(claim_full)
{
    crater_gpuslice_file_t *f = make();
    for (int i = 0; i < CRATER_GPUSLICE_MAX_PROCS; i++)
        ck_assert_int_eq(crater__gs_claim(f, getpid(), 0), i);
    ck_assert_int_eq(crater__gs_claim(f, getpid(), 0), -1);
    done(f);
}
END_TEST

typedef struct racer {
    crater_gpuslice_file_t *f;
    int slot;
    int got;
} racer_t;

static void *race_thread(void *arg)
{
    racer_t *r = arg;
    for (int i = 0; i < 10000; i++)
        if (crater__gs_reserve(r->f, r->slot, 1, 7) == 0)
            r->got++;
    return NULL;
}

START_TEST(reserve_threads)
{
    crater_gpuslice_file_t *f = make();
    racer_t r[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (racer_t){f, crater__gs_claim(f, getpid(), 0), 0};
        pthread_create(&t[i], NULL, race_thread, &r[i]);
    }
    int sum = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        sum += r[i].got;
    }
    ck_assert_int_eq(sum, 1000 / 7);
    ck_assert_uint_eq(atomic_load(&f->gpu[1].used), (1000 / 7) * 7);
    done(f);
}
END_TEST

/* The pointer table against a plain array, with keys chosen to collide. */
START_TEST(alloctab_differential)
{
    crater__gs_tab_t t = CRATER__GS_TAB_INIT;
    enum {
        N = 3000
    };
    static uint64_t bytes[N]; /* 0: absent */
    unsigned seed = 7;
    for (int step = 0; step < 60000; step++) {
        int k = rand_r(&seed) % N;
        uint64_t key = 0x700000000000ULL + (uint64_t)k * 4096;
        crater__gs_entry_t e;
        if (rand_r(&seed) % 2) {
            uint64_t b = (uint64_t)rand_r(&seed) + 1;
            ck_assert_int_eq(crater__gs_tab_put(&t, key, b, k % 16), 0);
            bytes[k] = b;
        } else if (bytes[k]) {
            ck_assert_int_eq(crater__gs_tab_take(&t, key, &e), 0);
            ck_assert_uint_eq(e.bytes, bytes[k]);
            ck_assert_int_eq(e.gpu, k % 16);
            bytes[k] = 0;
        } else {
            ck_assert_int_eq(crater__gs_tab_take(&t, key, &e), -1);
        }
    }
    size_t live = 0;
    for (int k = 0; k < N; k++)
        live += bytes[k] != 0;
    ck_assert_uint_eq(t.len, live);
    crater__gs_tab_reset(&t);
    ck_assert_uint_eq(t.len, 0);
    free(t.slot);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpuslice_file");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, uuid_round_trip);
    tcase_add_test(tc, uuid_errors);
    tcase_add_test(tc, create_read);
    tcase_add_test(tc, create_errors);
    tcase_add_test(tc, reserve_exact_limit);
    tcase_add_test(tc, reclaim_dead);
    tcase_add_test(tc, reclaim_recycled_pid);
    tcase_add_test(tc, claim_repairs_leak);
    tcase_add_test(tc, claim_full);
    tcase_add_test(tc, reserve_threads);
    tcase_add_test(tc, alloctab_differential);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
