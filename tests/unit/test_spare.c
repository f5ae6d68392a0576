/* test_spare.c - finished tasks' directories recycled (src/agent/spare.c).
 *
 * On a scratch DATA directory: a finished task's directory and logs become
 * a spare holding only the four known names, each empty (no byte of the
 * last task's output or record is left); the next task takes the same
 * inodes by rename; a spare is never taken over an existing directory; an
 * agent that starts again takes back what an earlier one left and removes
 * anything else; a full pool gives nothing. Working directories: kept
 * only when empty and without extended attributes, mode 0700 again, the
 * same inode taken by the next task. The reserve (spare_fill()): spares
 * made ahead exactly as the task path makes them, never past the number
 * asked for, the working directories with no trace left in the work root.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "agent/internal.h"

static char data[256];

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    ck_assert_msg(f != NULL, "create %s", path);
    fputs(text, f);
    fclose(f);
}

static ino_t ino(const char *path)
{
    struct stat st;

    ck_assert_msg(lstat(path, &st) == 0, "stat %s", path);
    return st.st_ino;
}

static off_t size_of(const char *path)
{
    struct stat st;

    ck_assert_msg(lstat(path, &st) == 0, "stat %s", path);
    return st.st_size;
}

static bool there(const char *path)
{
    return access(path, F_OK) == 0;
}

static crater_agent_t *agent_new(void)
{
    crater_agent_t *a = calloc(1, sizeof(*a));
    crater_error_t err;

    ck_assert_ptr_nonnull(a);
    a->data_dir = data;
    pthread_mutex_init(&a->mu, NULL);
    pthread_mutex_init(&a->spare_mu, NULL);
    ck_assert_msg(spare_init(a, &err) == 0, "%s", err.text);
    return a;
}

static void agent_free(crater_agent_t *a)
{
    pthread_mutex_destroy(&a->mu);
    pthread_mutex_destroy(&a->spare_mu);
    free(a);
}

/* A task's paths under DATA, as task_new() makes them. */
static atask_t task_of(const char *name, char *dir, char *out, char *err)
{
    snprintf(dir, 300, "%.250s/tasks/%.30s", data, name);
    snprintf(out, 300, "%.290s/stdout", dir);
    snprintf(err, 300, "%.290s/stderr", dir);
    return (atask_t){.dir = dir, .log_path = {out, err}};
}

static void setup(void)
{
    char p[512];

    snprintf(data, sizeof(data), "/tmp/test_spare.%d", (int)getpid());
    ck_assert_int_eq(mkdir(data, 0700), 0);
    snprintf(p, sizeof(p), "%s/tasks", data);
    ck_assert_int_eq(mkdir(p, 0700), 0);
}

static void teardown(void)
{
    char cmd[300];

    snprintf(cmd, sizeof(cmd), "rm -rf %s", data);
    ck_assert_int_eq(system(cmd), 0);
}

/* A finished task with a record, an exit file, output and things the
   task or the agent left in its directory. */
static void finished_task(const atask_t *t)
{
    char p[600];

    ck_assert_int_eq(mkdir(t->dir, 0700), 0);
    snprintf(p, sizeof(p), "%s/task.json", t->dir);
    put(p, "{\"job\": \"1\"}");
    snprintf(p, sizeof(p), "%s/exit", t->dir);
    put(p, "0 1700000000000\n");
    snprintf(p, sizeof(p), "%s/sock", t->dir);
    put(p, "not ours");
    snprintf(p, sizeof(p), "%s/junk", t->dir);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof(p), "%s/junk/f", t->dir);
    put(p, "x");
    put(t->log_path[0], "secret output of task 1\n");
    put(t->log_path[1], "its errors\n");
}

START_TEST(give_empties_and_take_reuses_the_inodes)
{
    char d1[300], o1[300], e1[300], d2[300], o2[300], e2[300], p[600];
    atask_t t1 = task_of("1.1", d1, o1, e1), t2 = task_of("2.1", d2, o2, e2);
    crater_agent_t *a = agent_new();
    ino_t dir_ino, out_ino, err_ino;
    static const char *const kept[] = {"task.json.tmp",
                                       "exit.tmp",
                                       "stdout",
                                       "stderr"};

    finished_task(&t1);
    dir_ino = ino(d1);
    out_ino = ino(o1);
    err_ino = ino(e1);
    ck_assert(spare_give(a, &t1));
    ck_assert(!there(d1));
    ck_assert_uint_eq(a->spare.n, 1);
    snprintf(p, sizeof(p), "%s/spare/%u", data, a->spare.slot[0]);
    ck_assert_uint_eq(ino(p), dir_ino);
    for (size_t i = 0; i < 4; i++) { /* the known names, all empty */
        char f[700];
        snprintf(f, sizeof(f), "%s/%s", p, kept[i]);
        ck_assert_int_eq(size_of(f), 0);
    }
    snprintf(p + strlen(p), sizeof(p) - strlen(p), "/sock");
    ck_assert(!there(p));
    *strrchr(p, '/') = '\0';
    snprintf(p + strlen(p), sizeof(p) - strlen(p), "/junk");
    ck_assert(!there(p));

    ck_assert(spare_take(a, &t2));
    ck_assert_uint_eq(a->spare.n, 0);
    ck_assert_uint_eq(ino(d2), dir_ino);
    ck_assert_uint_eq(ino(o2), out_ino);
    ck_assert_uint_eq(ino(e2), err_ino);
    ck_assert_int_eq(size_of(o2), 0); /* no byte of task 1's output */
    snprintf(p, sizeof(p), "%s/task.json", d2);
    ck_assert(!there(p)); /* adoption sees an unrecorded start */
    snprintf(p, sizeof(p), "%s/exit", d2);
    ck_assert(!there(p));
    ck_assert(!spare_take(a, &t2)); /* none left */
    agent_free(a);
}
END_TEST

/* A spare is not renamed over a directory that exists (a start order sent
   again for a task that has one): it stays in the pool. */
START_TEST(take_never_replaces_a_directory)
{
    char d1[300], o1[300], e1[300], d2[300], o2[300], e2[300], p[600];
    atask_t t1 = task_of("1.1", d1, o1, e1), t2 = task_of("2.1", d2, o2, e2);
    crater_agent_t *a = agent_new();

    finished_task(&t1);
    ck_assert(spare_give(a, &t1));
    ck_assert_int_eq(mkdir(d2, 0700), 0);
    snprintf(p, sizeof(p), "%s/task.json", d2);
    put(p, "{\"job\": \"2\"}");
    ck_assert(!spare_take(a, &t2));
    ck_assert_uint_eq(a->spare.n, 1);
    ck_assert_int_eq(size_of(p), 12); /* untouched */
    agent_free(a);
}
END_TEST

/* A new agent takes back the spares a dead one left (emptied again),
   removes what is not a spare, and numbers new ones past them. */
START_TEST(init_takes_back_spares)
{
    char p[600];
    crater_agent_t *a;

    snprintf(p, sizeof(p), "%s/spare", data);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof(p), "%s/spare/5", data);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof(p), "%s/spare/5/stdout", data);
    put(p, "left over");
    snprintf(p, sizeof(p), "%s/spare/5/planted", data);
    put(p, "x");
    snprintf(p, sizeof(p), "%s/spare/not-a-spare", data);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    a = agent_new();
    ck_assert_uint_eq(a->spare.n, 1);
    ck_assert_uint_eq(a->spare.slot[0], 5);
    ck_assert_uint_ge(a->spare.next, 6);
    snprintf(p, sizeof(p), "%s/spare/5/stdout", data);
    ck_assert_int_eq(size_of(p), 0);
    snprintf(p, sizeof(p), "%s/spare/5/planted", data);
    ck_assert(!there(p));
    snprintf(p, sizeof(p), "%s/spare/not-a-spare", data);
    ck_assert(!there(p));
    agent_free(a);
}
END_TEST

/* A full pool keeps nothing: the caller removes the files. */
START_TEST(full_pool_gives_nothing)
{
    char d1[300], o1[300], e1[300];
    atask_t t1 = task_of("1.1", d1, o1, e1);
    crater_agent_t *a = agent_new();

    finished_task(&t1);
    a->spare.n = SPARE_MAX;
    ck_assert(!spare_give(a, &t1));
    ck_assert(there(d1) && there(o1) && size_of(o1) > 0);
    a->spare.n = 0;
    agent_free(a);
}
END_TEST

/* ---- working directories ---- */

static crater_agent_t *agent_with_work(char *work, size_t len)
{
    crater_agent_t *a = calloc(1, sizeof(*a));
    crater_error_t err;

    ck_assert_ptr_nonnull(a);
    snprintf(work, len, "%s/work", data);
    ck_assert_int_eq(mkdir(work, 0711), 0);
    a->data_dir = data;
    a->work_root = work;
    a->instance = 0x1234;
    pthread_mutex_init(&a->mu, NULL);
    pthread_mutex_init(&a->spare_mu, NULL);
    ck_assert_msg(spare_init(a, &err) == 0, "%s", err.text);
    ck_assert(a->wspare.on); /* DATA and WORK on one filesystem */
    return a;
}

/* A finished task's working directory, as make_workdir() made it. */
static atask_t work_task(const char *work, const char *name, char *wd)
{
    snprintf(wd, 300, "%.250s/%.40s", work, name);
    ck_assert_int_eq(mkdir(wd, 0700), 0);
    return (atask_t){.workdir = wd};
}

/* An empty working directory is kept (mode 0700 again) and the next task
   takes the same inode; the probe made at start is gone. */
START_TEST(empty_workdir_is_kept_and_taken)
{
    char work[300], w1[300], w2[300], p[600];
    crater_agent_t *a = agent_with_work(work, sizeof(work));
    atask_t t1 = work_task(work, "1234.1.1", w1);
    ino_t i1 = ino(w1);
    struct stat st;

    snprintf(p, sizeof(p), "%s/.probe-00001234", work);
    ck_assert(!there(p));
    ck_assert_int_eq(chmod(w1, 0755), 0); /* the task opened it up */
    ck_assert(spare_give_workdir(a, &t1));
    ck_assert(!there(w1));
    ck_assert_uint_eq(a->wspare.n, 1);
    snprintf(p, sizeof(p), "%s/spare-work/%u", data, a->wspare.slot[0]);
    ck_assert_int_eq(lstat(p, &st), 0);
    ck_assert_uint_eq(st.st_ino, i1);
    ck_assert_uint_eq(st.st_mode & 07777, 0700);
    ck_assert_uint_eq(st.st_uid, geteuid());
    snprintf(w2, sizeof(w2), "%.280s/1234.2.1", work);
    ck_assert(spare_take_workdir(a, w2));
    ck_assert_uint_eq(ino(w2), i1);
    ck_assert(!spare_take_workdir(a, w2)); /* none left */
    agent_free(a);
}
END_TEST

/* A directory the task left anything in is not kept: a file, an extended
   attribute (an ACL is one), or it stays where it is for the caller to
   remove. */
START_TEST(used_workdir_is_not_kept)
{
    char work[300], w1[300], w2[300], p[600];
    crater_agent_t *a = agent_with_work(work, sizeof(work));
    atask_t t1 = work_task(work, "1234.1.1", w1);
    atask_t t2 = work_task(work, "1234.2.1", w2);

    snprintf(p, sizeof(p), "%s/out.txt", w1);
    put(p, "results");
    ck_assert(!spare_give_workdir(a, &t1));
    ck_assert(there(p));
    if (setxattr(w2, "user.crater-test", "x", 1, 0) == 0) {
        ck_assert(!spare_give_workdir(a, &t2));
        ck_assert(there(w2));
    }
    ck_assert_uint_eq(a->wspare.n, 0);
    agent_free(a);
}
END_TEST

/* A new agent takes back kept working directories that are still as made
   and removes one that is not (something planted in it). */
START_TEST(init_takes_back_workdirs)
{
    char work[300], w1[300], p[600];
    crater_agent_t *a = agent_with_work(work, sizeof(work));
    atask_t t1 = work_task(work, "1234.1.1", w1);

    ck_assert(spare_give_workdir(a, &t1));
    snprintf(p, sizeof(p), "%s/spare-work/77", data);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof(p), "%s/spare-work/77/planted", data);
    put(p, "x");
    agent_free(a);
    ck_assert_int_eq(rmdir(work), 0);
    a = agent_with_work(work, sizeof(work));
    ck_assert_uint_eq(a->wspare.n, 1);
    snprintf(p, sizeof(p), "%s/spare-work/77", data);
    ck_assert(!there(p));
    agent_free(a);
}
END_TEST

static void mode_is(const char *path, mode_t mode)
{
    struct stat st;

    ck_assert_msg(lstat(path, &st) == 0, "stat %s", path);
    ck_assert_msg((st.st_mode & 07777) == mode,
                  "%s: mode %o, want %o",
                  path,
                  (unsigned)(st.st_mode & 07777),
                  (unsigned)mode);
    ck_assert_uint_eq(st.st_uid, geteuid());
    ck_assert(S_ISDIR(st.st_mode) || st.st_size == 0);
}

static size_t entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;

    ck_assert_msg(d != NULL, "opendir %s", dir);
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* The reserve: spares made ahead as the task path makes them (four empty
   files with the task's modes; an empty 0700 working directory), never
   more than asked; a taken one is made again by the next fill, and the
   next task gets a made one's inode. */
START_TEST(fill_makes_spares_ahead)
{
    static const char *const names[] = {"task.json.tmp",
                                        "exit.tmp",
                                        "stdout",
                                        "stderr"};
    static const mode_t modes[] = {0600, 0600, 0640, 0640};
    char work[300], p[600], d1[300], o1[300], e1[300], w1[300];
    crater_agent_t *a = agent_with_work(work, sizeof(work));
    atask_t t1 = task_of("9.1", d1, o1, e1);
    ino_t wi;

    ck_assert_uint_eq(spare_fill(a, 3), 6);
    ck_assert_uint_eq(a->spare.n, 3);
    ck_assert_uint_eq(a->wspare.n, 3);
    ck_assert_uint_eq(entries(work), 0); /* made there, all moved */
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/spare/%u", data, a->spare.slot[i]);
        mode_is(p, 0700);
        ck_assert_uint_eq(entries(p), 4);
        for (size_t k = 0; k < 4; k++) {
            snprintf(p,
                     sizeof(p),
                     "%s/spare/%u/%s",
                     data,
                     a->spare.slot[i],
                     names[k]);
            mode_is(p, modes[k]);
        }
        snprintf(p, sizeof(p), "%s/spare-work/%u", data, a->wspare.slot[i]);
        mode_is(p, 0700);
        ck_assert_uint_eq(entries(p), 0);
    }
    ck_assert_uint_eq(spare_fill(a, 3), 0); /* full already */
    ck_assert(spare_take(a, &t1));
    ck_assert(there(o1) && there(e1));
    snprintf(p, sizeof(p), "%s/spare-work/%u", data, a->wspare.slot[2]);
    wi = ino(p);
    snprintf(w1, sizeof(w1), "%.280s/1234.9.1", work);
    ck_assert(spare_take_workdir(a, w1));
    ck_assert_uint_eq(ino(w1), wi);
    ck_assert_uint_eq(spare_fill(a, 3), 2); /* one of each made again */
    ck_assert_uint_eq(a->spare.n, 3);
    ck_assert_uint_eq(a->wspare.n, 3);
    a->spare.n = a->wspare.n = SPARE_MAX; /* full: nothing made */
    ck_assert_uint_eq(spare_fill(a, SPARE_MAX + 1), 0);
    a->spare.n = a->wspare.n = 3;
    agent_free(a);
}
END_TEST

static Suite *spare_suite(void)
{
    Suite *s = suite_create("spare");
    TCase *c = tcase_create("spare");

    tcase_add_checked_fixture(c, setup, teardown);
    tcase_add_test(c, give_empties_and_take_reuses_the_inodes);
    tcase_add_test(c, take_never_replaces_a_directory);
    tcase_add_test(c, init_takes_back_spares);
    tcase_add_test(c, full_pool_gives_nothing);
    tcase_add_test(c, empty_workdir_is_kept_and_taken);
    tcase_add_test(c, used_workdir_is_not_kept);
    tcase_add_test(c, init_takes_back_workdirs);
    tcase_add_test(c, fill_makes_spares_ahead);
    suite_add_tcase(s, c);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(spare_suite());
    int failed;

    srunner_run_all(r, CK_NORMAL);
    failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
