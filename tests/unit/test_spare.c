/* test_spare.c - finished tasks' directories recycled (src/agent/spare.c).
 *
 * On a scratch DATA directory: a finished task's directory and logs become
 * a spare holding only the four known names, each empty (no byte of the
 * last task's output or record is left); the next task takes the same
 * inodes by rename; a spare is never taken over an existing directory; an
 * agent that starts again takes back what an earlier one left and removes
 * anything else; a full pool gives nothing.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
    pthread_mutex_init(&a->spare_mu, NULL);
    ck_assert_msg(spare_init(a, &err) == 0, "%s", err.text);
    return a;
}

static void agent_free(crater_agent_t *a)
{
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
    ck_assert_uint_eq(a->nspare, 1);
    snprintf(p, sizeof(p), "%s/spare/%u", data, a->spare[0]);
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
    ck_assert_uint_eq(a->nspare, 0);
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
    ck_assert_uint_eq(a->nspare, 1);
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
    ck_assert_uint_eq(a->nspare, 1);
    ck_assert_uint_eq(a->spare[0], 5);
    ck_assert_uint_ge(a->spare_next, 6);
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
    a->nspare = SPARE_MAX;
    ck_assert(!spare_give(a, &t1));
    ck_assert(there(d1) && there(o1) && size_of(o1) > 0);
    a->nspare = 0;
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
