/* test_ckpt_crash.c - kill a saving process at random points and check
 * that load_latest() always returns a complete checkpoint equal to one
 * that was saved, and never an older one than the last save that
 * returned.
 *
 * One checkpoint directory lives through every round. In each round a
 * forked child resumes like a training job (load_latest), sometimes saves
 * the step it resumed at again (the step-N.old- path), then saves four
 * more steps with keep_last 2 and 4 KiB chunks, so saves are full (every
 * 7th step) or incremental and collection runs after each. The child is
 * killed with SIGKILL either just before its k-th file operation (k
 * random over the whole round: every write, fsync, rename, unlink of the
 * chunks, manifest, commit, LATEST and collection can be hit) or after a
 * random delay. The parent then loads with a fresh handle and checks the
 * state byte for byte (ckfx_check).
 *
 * CRATER_CKPT_KILLS sets the number of kill points (default 200); the
 * total is printed. The saves skip fsync unless CRATER_CKPT_FSYNC=1: a
 * killed process loses nothing that reached the page cache, so fsync
 * changes no outcome here (it is what makes the same order hold across a
 * power loss, doc/checkpoint.md), and with it 200 rounds take a minute
 * instead of a few seconds.
 */
#include <check.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/fsio.h"
#include "ckpt_fixture.h"

typedef struct kill_at {
    long count, at;
} kill_at_t;

static int kill_kth(const char *op, const char *path, void *arg)
{
    kill_at_t *k = arg;

    (void)op, (void)path;
    if (++k->count == k->at)
        raise(SIGKILL);
    return 0;
}

static void child_save(crater_ckpt_t *ck, uint64_t step, uint64_t var, int fd)
{
    static ckfx_state_t s;
    crater_error_t err;

    ckfx_make(&s, step, var);
    if (crater_ckpt_save(ck, step, s.e, 3, NULL, &err) < 0)
        _exit(3);
    if (write(fd, &step, sizeof(step)) != sizeof(step))
        _exit(4);
}

/* The child: resume, maybe save that step again, save four more. Sends
 * each saved step, then the number of file operations with the top bit. */
static void child(const char *dir, long kill_op, uint64_t round, int fd)
{
    crater_ckpt_opts_t o = {.version = 1, .chunk_size = 4096, .keep_last = 2};
    const char *sync = getenv("CRATER_CKPT_FSYNC");
    static kill_at_t k;
    crater_error_t err;
    crater_ckpt_t *ck;
    crater_ckpt_state_t *st;
    uint64_t start = 0, ops;

    k.at = kill_op;
    o.no_fsync = !(sync && !strcmp(sync, "1"));
    crater__ckpt_fault = kill_kth;
    crater__ckpt_fault_arg = &k;
    if (!(ck = crater_ckpt_open(dir, &o, &err)))
        _exit(2);
    if ((st = crater_ckpt_load_latest(ck, &err))) {
        start = crater_ckpt_state_step(st);
        crater_ckpt_state_destroy(st);
    }
    if (start && round % 3 == 0)
        child_save(ck, start, round, fd);
    for (uint64_t s = start + 1; s <= start + 4; s++)
        child_save(ck, s, round, fd);
    ops = (uint64_t)k.count | 1ull << 63;
    if (write(fd, &ops, sizeof(ops)) != sizeof(ops))
        _exit(4);
    _exit(0);
}

typedef struct tally {
    int kills, by_op, by_time, loads, corrupt;
    int64_t acked; /* newest step a save returned for; -1 none */
    long ops;      /* file operations in an uninterrupted round */
    long usec;     /* duration of an uninterrupted round */
} tally_t;

static long now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000L + ts.tv_nsec / 1000;
}

/* Run one round; returns 1 when the child was killed. */
static int round_once(
    const char *dir, tally_t *t, uint64_t round, long kill_op, long delay)
{
    int p[2], status;
    uint64_t v;
    pid_t pid;
    long t0 = now_us();

    ck_assert_int_eq(pipe(p), 0);
    if ((pid = fork()) == 0) {
        close(p[0]);
        child(dir, kill_op, round, p[1]);
    }
    close(p[1]);
    if (delay >= 0) {
        usleep((useconds_t)delay);
        kill(pid, SIGKILL);
    }
    while (read(p[0], &v, sizeof(v)) == sizeof(v)) {
        if (v >> 63)
            t->ops = (long)(v & ~(1ull << 63));
        else if ((int64_t)v > t->acked)
            t->acked = (int64_t)v;
    }
    close(p[0]);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    if (WIFEXITED(status)) {
        ck_assert_int_eq(WEXITSTATUS(status), 0);
        t->usec = now_us() - t0;
    }
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

/* The check after every round. A loaded state may be newer than acked
 * (killed after the commit, before save returned), never older. */
static void verify(const char *dir, tally_t *t)
{
    crater_ckpt_opts_t o = {.version = 1, .chunk_size = 4096};
    crater_error_t err;
    crater_ckpt_t *ck = crater_ckpt_open(dir, &o, &err);
    crater_ckpt_state_t *st;

    ck_assert_ptr_nonnull(ck);
    st = crater_ckpt_load_latest(ck, &err);
    t->loads++;
    if (!st && t->acked >= 0) {
        fprintf(stderr,
                "no checkpoint after step %lld: %s\n",
                (long long)t->acked,
                err.text);
        t->corrupt++;
    } else if (st
               && (ckfx_check(st) < 0
                   || (int64_t)crater_ckpt_state_step(st) < t->acked)) {
        fprintf(stderr,
                "bad checkpoint: step %llu, acked %lld\n",
                (unsigned long long)crater_ckpt_state_step(st),
                (long long)t->acked);
        t->corrupt++;
    }
    crater_ckpt_state_destroy(st);
    crater_ckpt_close(ck);
}

START_TEST(kill_saves_anywhere)
{
    const char *env = getenv("CRATER_CKPT_KILLS");
    int want = env ? atoi(env) : 200;
    tally_t t = {.acked = -1};
    char *dir = ckfx_tmpdir();
    uint64_t round = 0;

    srand((unsigned)time(NULL));
    round_once(dir, &t, round++, 0, -1); /* measure ops and duration */
    verify(dir, &t);
    ck_assert_int_gt(t.ops, 50);
    while (t.kills < want) {
        int by_op = round % 2 == 0, killed;

        killed = round_once(dir,
                            &t,
                            round++,
                            by_op ? 1 + rand() % t.ops : 0,
                            by_op ? -1 : rand() % (t.usec + 1));
        verify(dir, &t);
        t.kills += killed;
        t.by_op += killed && by_op;
        t.by_time += killed && !by_op;
    }
    printf("ckpt crash: %d kill points (%d before the k-th of %ld file "
           "operations, %d after a random delay under %ld us), %d loads, "
           "%d corrupt, newest step %lld\n",
           t.kills,
           t.by_op,
           t.ops,
           t.by_time,
           t.usec,
           t.loads,
           t.corrupt,
           (long long)t.acked);
    ck_assert_int_eq(t.corrupt, 0);
    ckfx_rmrf(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ckpt_crash");
    TCase *tc = tcase_create("ckpt_crash");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, kill_saves_anywhere);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
