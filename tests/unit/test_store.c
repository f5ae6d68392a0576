/* test_store.c - the SQLite store: key/value semantics with exact
 * revisions, compare-and-swap, batch isolation under concurrent writers, the
 * change feed and compaction, leases with injected time, reopen, validation,
 * async callbacks at close, a real kill -9 durability check, and a printed
 * (not asserted) group-commit throughput figure. */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

static char dir[64];
static char dbpath[128];

static void setup(void)
{
    strcpy(dir, "/tmp/crater-store-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(dbpath, sizeof(dbpath), "%s/store.db", dir);
}

static void teardown(void)
{
    char p[160];
    const char *sfx[] = {"", "-wal", "-shm"};

    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s%s", dbpath, sfx[i]);
        unlink(p);
    }
    rmdir(dir);
}

static crater_store_t *open_store(bool durable)
{
    crater_store_opts_t o = {.no_sync = !durable};
    crater_error_t err;
    crater_store_t *st = crater_store_open_sqlite(dbpath, &o, &err);

    ck_assert_msg(st != NULL, "open: %s", err.text);
    return st;
}

/* Puts key=val (with an optional lease) in its own transaction; returns the
 * revision. */
static int64_t put_lease(crater_store_t *st,
                         const char *key,
                         const char *val,
                         int64_t lease)
{
    crater_txn_t *t = crater_txn_create();
    crater_error_t err;
    int64_t rev = -1;

    ck_assert_int_eq(crater_txn_put(t, key, val, strlen(val), lease, &err), 0);
    ck_assert_msg(crater_store_commit(st, t, &rev, &err) == 0,
                  "commit: %s",
                  err.text);
    crater_txn_destroy(t);
    return rev;
}

static int64_t put(crater_store_t *st, const char *key, const char *val)
{
    return put_lease(st, key, val, 0);
}

static int64_t del(crater_store_t *st, const char *key)
{
    crater_txn_t *t = crater_txn_create();
    crater_error_t err;
    int64_t rev = -1;

    ck_assert_int_eq(crater_txn_delete(t, key, &err), 0);
    ck_assert_int_eq(crater_store_commit(st, t, &rev, &err), 0);
    crater_txn_destroy(t);
    return rev;
}

static void check_kv(crater_store_t *st,
                     const char *key,
                     const char *val,
                     int64_t create,
                     int64_t mod,
                     int64_t version)
{
    crater_skv_t kv;
    crater_error_t err;

    ck_assert_msg(crater_store_get(st, key, &kv, &err) == 0,
                  "get %s: %s",
                  key,
                  err.text);
    ck_assert_str_eq(kv.key, key);
    ck_assert_str_eq(kv.value, val);
    ck_assert_uint_eq(kv.len, strlen(val));
    ck_assert_int_eq(kv.create_rev, create);
    ck_assert_int_eq(kv.mod_rev, mod);
    ck_assert_int_eq(kv.version, version);
    crater_skv_free(&kv);
}

static void check_absent(crater_store_t *st, const char *key)
{
    crater_skv_t kv;
    crater_error_t err;

    ck_assert_int_eq(crater_store_get(st, key, &kv, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    ck_assert_str_eq(err.field, key);
}

START_TEST(put_get_delete_list)
{
    crater_store_t *st = open_store(false);
    crater_skv_list_t l;
    crater_error_t err;

    ck_assert_int_eq(crater_store_revision(st), 0);
    ck_assert_int_eq(put(st, "jobs/2", "two"), 1);
    ck_assert_int_eq(put(st, "jobs/1", "one"), 2);
    ck_assert_int_eq(put(st, "nodes/a", "A"), 3);
    ck_assert_int_eq(put(st, "jobs", "bare"), 4);
    check_kv(st, "jobs/1", "one", 2, 2, 1);
    ck_assert_int_eq(crater_store_list(st, "jobs/", &l, &err), 0);
    ck_assert_uint_eq(l.count, 2);
    ck_assert_int_eq(l.revision, 4);
    ck_assert_str_eq(l.items[0].key, "jobs/1");
    ck_assert_str_eq(l.items[1].key, "jobs/2");
    ck_assert_str_eq(l.items[1].value, "two");
    crater_skv_list_free(&l);
    ck_assert_int_eq(crater_store_list(st, "", &l, &err), 0);
    ck_assert_uint_eq(l.count, 4);
    ck_assert_str_eq(l.items[0].key, "jobs");
    ck_assert_str_eq(l.items[3].key, "nodes/a");
    crater_skv_list_free(&l);
    ck_assert_int_eq(crater_store_list(st, "zzz", &l, &err), 0);
    ck_assert_uint_eq(l.count, 0);
    crater_skv_list_free(&l);
    ck_assert_int_eq(del(st, "jobs/1"), 5);
    check_absent(st, "jobs/1");
    ck_assert_int_eq(crater_store_revision(st), 5);
    crater_store_close(st);
}
END_TEST

START_TEST(revisions_and_versions)
{
    crater_store_t *st = open_store(false);
    crater_txn_t *t;
    crater_error_t err;
    int64_t rev = -1;

    ck_assert_int_eq(put(st, "k", "v1"), 1);
    ck_assert_int_eq(put(st, "other", "x"), 2);
    ck_assert_int_eq(put(st, "k", "v2"), 3);
    check_kv(st, "k", "v2", 1, 3, 2);
    ck_assert_int_eq(del(st, "k"), 4);
    ck_assert_int_eq(put(st, "k", "v3"), 5);
    check_kv(st, "k", "v3", 5, 5, 1);
    /* No change, no new revision: deleting an absent key, an empty txn. */
    ck_assert_int_eq(del(st, "absent"), 5);
    t = crater_txn_create();
    ck_assert_int_eq(crater_store_commit(st, t, &rev, &err), 0);
    ck_assert_int_eq(rev, 5);
    /* Several ops, one revision. */
    ck_assert_int_eq(crater_txn_put(t, "a", "1", 1, 0, &err), 0);
    ck_assert_int_eq(crater_txn_put(t, "b", "2", 1, 0, &err), 0);
    ck_assert_int_eq(crater_txn_delete(t, "other", &err), 0);
    ck_assert_int_eq(crater_store_commit(st, t, &rev, &err), 0);
    ck_assert_int_eq(rev, 6);
    crater_txn_destroy(t);
    check_kv(st, "a", "1", 6, 6, 1);
    check_kv(st, "b", "2", 6, 6, 1);
    check_absent(st, "other");
    ck_assert_int_eq(crater_store_revision(st), 6);
    crater_store_close(st);
}
END_TEST

START_TEST(compare_and_swap)
{
    crater_store_t *st = open_store(false);
    crater_txn_t *t = crater_txn_create();
    crater_error_t err;
    int64_t rev = -1;

    ck_assert_int_eq(crater_txn_expect(t, "job/1", 0, &err), 0);
    ck_assert_int_eq(crater_txn_put(t, "job/1", "a", 1, 0, &err), 0);
    ck_assert_int_eq(crater_store_commit(st, t, &rev, &err), 0);
    ck_assert_int_eq(rev, 1);
    /* Same create again: the key exists now. */
    ck_assert_int_eq(crater_store_commit(st, t, &rev, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ESTALE);
    ck_assert_str_eq(err.field, "job/1");
    ck_assert_str_eq(err.text,
                     "key 'job/1' exists (mod_rev 1), expected "
                     "absent");
    crater_txn_destroy(t);

    t = crater_txn_create();
    ck_assert_int_eq(crater_txn_expect(t, "job/1", 1, &err), 0);
    ck_assert_int_eq(crater_txn_put(t, "job/1", "b", 1, 0, &err), 0);
    ck_assert_int_eq(crater_txn_put(t, "side", "s", 1, 0, &err), 0);
    ck_assert_int_eq(crater_store_commit(st, t, &rev, &err), 0);
    ck_assert_int_eq(rev, 2);
    /* Now stale: nothing of the txn is applied, no revision consumed. */
    ck_assert_int_eq(crater_store_commit(st, t, &rev, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ESTALE);
    ck_assert_str_eq(err.text, "key 'job/1' has mod_rev 2, expected 1");
    check_kv(st, "side", "s", 2, 2, 1);
    ck_assert_int_eq(crater_store_revision(st), 2);
    crater_txn_destroy(t);

    t = crater_txn_create();
    ck_assert_int_eq(crater_txn_expect(t, "job/1", 2, &err), 0);
    ck_assert_int_eq(crater_txn_expect(t, "missing", 7, &err), 0);
    ck_assert_int_eq(crater_txn_put(t, "job/1", "c", 1, 0, &err), 0);
    ck_assert_int_eq(crater_store_commit(st, t, &rev, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ESTALE);
    ck_assert_str_eq(err.field, "missing");
    crater_txn_destroy(t);
    check_kv(st, "job/1", "b", 1, 2, 2);
    crater_store_close(st);
}
END_TEST

/* Many threads commit at once: even threads create fresh keys, odd threads
 * always carry a stale compare, and all threads bump one counter with a CAS
 * loop. Every good txn commits at its own revision, every stale one fails
 * alone, and the counter loses no update. */
#define ISO_THREADS 16
#define ISO_ITERS 25

struct iso_arg {
    crater_store_t *st;
    int id;
    int ok, stale;
    int64_t revs[ISO_ITERS];
};

static void bump_counter(crater_store_t *st)
{
    for (;;) {
        crater_skv_t kv;
        crater_error_t err;
        crater_txn_t *t = crater_txn_create();
        char buf[32];
        int rc;

        ck_assert_int_eq(crater_store_get(st, "counter", &kv, &err), 0);
        snprintf(buf, sizeof(buf), "%d", atoi(kv.value) + 1);
        crater_txn_expect(t, "counter", kv.mod_rev, &err);
        crater_txn_put(t, "counter", buf, strlen(buf), 0, &err);
        crater_skv_free(&kv);
        rc = crater_store_commit(st, t, NULL, &err);
        crater_txn_destroy(t);
        if (rc == 0)
            return;
        ck_assert_int_eq(err.errnum, CRATER_ESTALE);
    }
}

static void *iso_main(void *p)
{
    struct iso_arg *a = p;
    char key[64];

    for (int i = 0; i < ISO_ITERS; i++) {
        crater_txn_t *t = crater_txn_create();
        crater_error_t err;
        int64_t rev = 0;
        bool bad = a->id % 2;

        snprintf(key, sizeof(key), "%s/%d/%d", bad ? "bad" : "good", a->id, i);
        crater_txn_expect(t, bad ? "counter" : key, bad ? 999999 : 0, &err);
        crater_txn_put(t, key, "v", 1, 0, &err);
        if (crater_store_commit(a->st, t, &rev, &err) == 0)
            a->revs[a->ok++] = rev;
        else if (err.errnum == CRATER_ESTALE
                 && strcmp(err.field, "counter") == 0)
            a->stale++;
        crater_txn_destroy(t);
        bump_counter(a->st);
    }
    return NULL;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

START_TEST(batch_isolation)
{
    crater_store_t *st = open_store(true);
    struct iso_arg args[ISO_THREADS];
    pthread_t th[ISO_THREADS];
    int64_t revs[ISO_THREADS * ISO_ITERS];
    size_t nrev = 0;
    crater_skv_list_t l;
    crater_error_t err;

    put(st, "counter", "0");
    for (int i = 0; i < ISO_THREADS; i++) {
        args[i] = (struct iso_arg){.st = st, .id = i};
        pthread_create(&th[i], NULL, iso_main, &args[i]);
    }
    for (int i = 0; i < ISO_THREADS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(args[i].ok, i % 2 ? 0 : ISO_ITERS);
        ck_assert_int_eq(args[i].stale, i % 2 ? ISO_ITERS : 0);
        for (int j = 0; j < args[i].ok; j++)
            revs[nrev++] = args[i].revs[j];
    }
    qsort(revs, nrev, sizeof(revs[0]), cmp_i64);
    for (size_t i = 1; i < nrev; i++)
        ck_assert_int_lt(revs[i - 1], revs[i]); /* one revision each */
    ck_assert_int_eq(crater_store_list(st, "good/", &l, &err), 0);
    ck_assert_uint_eq(l.count, ISO_THREADS / 2 * ISO_ITERS);
    crater_skv_list_free(&l);
    ck_assert_int_eq(crater_store_list(st, "bad/", &l, &err), 0);
    ck_assert_uint_eq(l.count, 0);
    crater_skv_list_free(&l);
    {
        char want[16];
        crater_skv_t kv;
        snprintf(want, sizeof(want), "%d", ISO_THREADS * ISO_ITERS);
        ck_assert_int_eq(crater_store_get(st, "counter", &kv, &err), 0);
        ck_assert_str_eq(kv.value, want);
        ck_assert_int_eq(kv.version, ISO_THREADS * ISO_ITERS + 1);
        crater_skv_free(&kv);
    }
    /* 1 initial put + good creates + counter bumps, nothing else. */
    ck_assert_int_eq(crater_store_revision(st),
                     1 + ISO_THREADS / 2 * ISO_ITERS + ISO_THREADS * ISO_ITERS);
    crater_store_close(st);
}
END_TEST

START_TEST(change_feed)
{
    crater_store_t *st = open_store(false);
    crater_store_event_list_t ev;
    crater_error_t err;

    put(st, "a/1", "x");  /* 1 */
    put(st, "b/1", "y");  /* 2 */
    put(st, "a/1", "x2"); /* 3 */
    del(st, "a/1");       /* 4 */
    put(st, "a/2", "z");  /* 5 */
    ck_assert_int_eq(crater_store_changes(st, "", 0, 0, &ev, &err), 0);
    ck_assert_uint_eq(ev.count, 5);
    for (size_t i = 0; i < 5; i++)
        ck_assert_int_eq(ev.items[i].revision, (int64_t)i + 1);
    crater_store_event_list_free(&ev);

    ck_assert_int_eq(crater_store_changes(st, "a/", 1, 0, &ev, &err), 0);
    ck_assert_uint_eq(ev.count, 3);
    ck_assert_int_eq(ev.items[0].type, CRATER_STORE_PUT);
    ck_assert_str_eq(ev.items[0].kv.value, "x2");
    ck_assert_int_eq(ev.items[0].kv.create_rev, 1);
    ck_assert_int_eq(ev.items[0].kv.mod_rev, 3);
    ck_assert_int_eq(ev.items[0].kv.version, 2);
    ck_assert_int_eq(ev.items[1].type, CRATER_STORE_DELETE);
    ck_assert_int_eq(ev.items[1].revision, 4);
    ck_assert_str_eq(ev.items[1].kv.key, "a/1");
    ck_assert_ptr_null(ev.items[1].kv.value);
    ck_assert_int_eq(ev.items[2].revision, 5);
    ck_assert_str_eq(ev.items[2].kv.key, "a/2");
    crater_store_event_list_free(&ev);

    ck_assert_int_eq(crater_store_changes(st, "a/", 1, 2, &ev, &err), 0);
    ck_assert_uint_eq(ev.count, 2); /* limit */
    ck_assert_int_eq(ev.items[1].revision, 4);
    crater_store_event_list_free(&ev);
    ck_assert_int_eq(crater_store_changes(st, "", 5, 0, &ev, &err), 0);
    ck_assert_uint_eq(ev.count, 0);
    crater_store_event_list_free(&ev);
    crater_store_close(st);
}
END_TEST

/* n transactions of 100 puts each (keys k0..k99, rewritten each time). */
static void put_many(crater_store_t *st, int n)
{
    crater_error_t err;
    char key[16];

    for (int i = 0; i < n; i++) {
        crater_txn_t *t = crater_txn_create();
        for (int k = 0; k < 100; k++) {
            snprintf(key, sizeof(key), "k%d", k);
            ck_assert_int_eq(crater_txn_put(t, key, "v", 1, 0, &err), 0);
        }
        ck_assert_int_eq(crater_store_commit(st, t, NULL, &err), 0);
        crater_txn_destroy(t);
    }
}

static _Atomic int compact_rc = 1;

static void compact_done(int rc,
                         int64_t rev,
                         const crater_error_t *err,
                         void *arg)
{
    (void)rev;
    (void)err;
    ck_assert_ptr_eq(arg, &compact_rc);
    atomic_store(&compact_rc, rc);
}

/* Waits up to 10 s for the store to hold want history events. */
static void wait_events(crater_store_t *st, int64_t want)
{
    crater_store_stats_t s = {0};
    crater_error_t err;

    for (int i = 0; i < 1000; i++) {
        ck_assert_int_eq(crater_store_stats(st, &s, &err), 0);
        if (s.events == want)
            return;
        usleep(10000);
    }
    ck_abort_msg("%lld history events, want %lld",
                 (long long)s.events,
                 (long long)want);
}

/* Compaction frees the rows, in bounded steps the idle writer runs on its
 * own (4,000 rows: four steps), counted in stats across a reopen; the
 * asynchronous form calls back once; the rows of a compaction that a
 * close interrupted are freed at the next open. */
START_TEST(compaction_frees_history)
{
    crater_store_t *st = open_store(false);
    crater_store_event_list_t ev;
    crater_store_stats_t s;
    crater_error_t err;

    put_many(st, 50);
    ck_assert_int_eq(crater_store_stats(st, &s, &err), 0);
    ck_assert_int_eq(s.revision, 50);
    ck_assert_int_eq(s.events, 5000);
    ck_assert_uint_gt(s.db_bytes, 0);
    ck_assert_uint_gt(s.wal_bytes, 0);
    ck_assert_int_eq(crater_store_compact_async(st,
                                                40,
                                                compact_done,
                                                &compact_rc,
                                                &err),
                     0);
    wait_events(st, 1000);
    ck_assert_int_eq(atomic_load(&compact_rc), 0);
    ck_assert_int_eq(crater_store_compacted_revision(st), 40);
    ck_assert_int_eq(crater_store_changes(st, "", 40, 0, &ev, &err), 0);
    ck_assert_uint_eq(ev.count, 1000);
    crater_store_event_list_free(&ev);
    ck_assert_int_eq(crater_store_compact_async(st,
                                                51,
                                                compact_done,
                                                &compact_rc,
                                                &err),
                     0);
    put_many(st, 1); /* the callback has run once this commit is done */
    ck_assert_int_eq(atomic_load(&compact_rc), -1); /* ERANGE */
    put_many(st, 30);
    ck_assert_int_eq(crater_store_compact(st, 80, &err), 0);
    crater_store_close(st); /* before the writer purged it all, maybe */

    st = open_store(false);
    wait_events(st, 100); /* revision 81's rows */
    ck_assert_int_eq(crater_store_compacted_revision(st), 80);
    crater_store_close(st);
}
END_TEST

START_TEST(compaction)
{
    crater_store_t *st = open_store(false);
    crater_store_event_list_t ev;
    crater_error_t err;

    put(st, "k", "1");
    put(st, "k", "2");
    put(st, "j", "3");
    ck_assert_int_eq(crater_store_compact(st, 2, &err), 0);
    ck_assert_int_eq(crater_store_compacted_revision(st), 2);
    ck_assert_int_eq(crater_store_changes(st, "", 1, 0, &ev, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ESTALE);
    ck_assert_str_eq(err.text,
                     "revision 1 is compacted (history starts "
                     "after 2)");
    ck_assert_int_eq(crater_store_changes(st, "", 2, 0, &ev, &err), 0);
    ck_assert_uint_eq(ev.count, 1);
    ck_assert_str_eq(ev.items[0].kv.key, "j");
    crater_store_event_list_free(&ev);
    check_kv(st, "k", "2", 1, 2, 2); /* keys survive compaction */
    ck_assert_int_eq(crater_store_compact(st, 4, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ERANGE);
    ck_assert_int_eq(crater_store_compact(st, 1, &err), 0); /* no-op */
    ck_assert_int_eq(crater_store_compacted_revision(st), 2);
    crater_store_close(st);

    st = open_store(false);
    ck_assert_int_eq(crater_store_compacted_revision(st), 2);
    ck_assert_int_eq(crater_store_changes(st, "", 0, 0, &ev, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ESTALE);
    crater_store_close(st);
}
END_TEST

START_TEST(leases)
{
    crater_store_t *st = open_store(false);
    crater_store_event_list_t ev;
    crater_txn_t *t = crater_txn_create();
    crater_error_t err;
    int64_t l1 = 0, l2 = 0;

    ck_assert_int_eq(crater_store_lease_grant(st, 1000, 0, &l1, &err), 0);
    ck_assert_int_eq(crater_store_lease_grant(st, 5000, 0, &l2, &err), 0);
    ck_assert_int_eq(l1, 1);
    ck_assert_int_eq(l2, 2);
    ck_assert_int_eq(crater_store_lease_grant(st, 0, 0, &l2, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ERANGE);
    ck_assert_int_eq(put_lease(st, "agent/n1", "up", l1), 1);
    ck_assert_int_eq(put_lease(st, "agent/n2", "up", l1), 2);
    ck_assert_int_eq(put_lease(st, "agent/n3", "up", l2), 3);
    ck_assert_int_eq(put(st, "plain", "p"), 4);
    ck_assert_int_eq(crater_txn_put(t, "x", "1", 1, 99, &err), 0);
    ck_assert_int_eq(crater_store_commit(st, t, NULL, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    ck_assert_str_eq(err.field, "x");
    crater_txn_destroy(t);

    ck_assert_int_eq(crater_store_lease_keepalive(st, l1, 500, &err), 0);
    ck_assert_int_eq(crater_store_expire_leases(st, 1499, &err), 0);
    check_kv(st, "agent/n1", "up", 1, 1, 1);
    ck_assert_int_eq(crater_store_revision(st), 4);
    ck_assert_int_eq(crater_store_expire_leases(st, 1500, &err), 0);
    check_absent(st, "agent/n1");
    check_absent(st, "agent/n2");
    check_kv(st, "agent/n3", "up", 3, 3, 1);
    ck_assert_int_eq(crater_store_revision(st), 5); /* one revision */
    ck_assert_int_eq(crater_store_changes(st, "agent/", 4, 0, &ev, &err), 0);
    ck_assert_uint_eq(ev.count, 2);
    ck_assert_int_eq(ev.items[0].type, CRATER_STORE_DELETE);
    ck_assert_str_eq(ev.items[0].kv.key, "agent/n1");
    ck_assert_int_eq(ev.items[1].revision, 5);
    crater_store_event_list_free(&ev);
    ck_assert_int_eq(crater_store_lease_keepalive(st, l1, 1600, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    ck_assert_int_eq(crater_store_lease_revoke(st, l1, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    ck_assert_int_eq(crater_store_lease_revoke(st, l2, &err), 0);
    check_absent(st, "agent/n3");
    check_kv(st, "plain", "p", 4, 4, 1);
    ck_assert_int_eq(crater_store_revision(st), 6);
    crater_store_close(st);
}
END_TEST

START_TEST(reopen_keeps_data)
{
    crater_store_t *st = open_store(true);
    crater_error_t err;
    int64_t id = 0;

    put(st, "a", "1");
    put(st, "a", "2");
    put(st, "b", "3");
    ck_assert_int_eq(crater_store_lease_grant(st, 100, 0, &id, &err), 0);
    crater_store_close(st);
    st = open_store(true);
    ck_assert_int_eq(crater_store_revision(st), 3);
    check_kv(st, "a", "2", 1, 2, 2);
    ck_assert_int_eq(put(st, "c", "4"), 4);
    ck_assert_int_eq(crater_store_lease_grant(st, 100, 0, &id, &err), 0);
    ck_assert_int_eq(id, 2); /* lease ids are never reused */
    ck_assert_int_eq(crater_store_lease_keepalive(st, 1, 0, &err), 0);
    crater_store_close(st);
}
END_TEST

START_TEST(validation)
{
    crater_store_t *st = open_store(false);
    crater_txn_t *t = crater_txn_create();
    crater_skv_list_t l;
    crater_skv_t kv;
    crater_error_t err;
    char key[CRATER_STORE_KEY_MAX + 2];
    char *big = calloc(1, CRATER_STORE_VALUE_MAX + 1);

    ck_assert_int_eq(crater_txn_put(t, "", "v", 1, 0, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_str_eq(err.text, "empty key");
    ck_assert_int_eq(crater_txn_put(t, "a\nb", "v", 1, 0, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_str_eq(err.field, "a\nb");
    ck_assert_str_eq(err.text, "key has a non-printable byte 0x0a at offset 1");
    memset(key, 'k', sizeof(key));
    key[CRATER_STORE_KEY_MAX + 1] = '\0';
    ck_assert_int_eq(crater_txn_delete(t, key, &err), -1);
    ck_assert_str_eq(err.text, "key longer than 512 bytes");
    ck_assert_int_eq(crater_store_get(st, key, &kv, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    key[CRATER_STORE_KEY_MAX] = '\0';
    ck_assert_int_eq(crater_txn_put(t,
                                    key,
                                    big,
                                    CRATER_STORE_VALUE_MAX,
                                    0,
                                    &err),
                     0);
    ck_assert_int_eq(crater_txn_put(t,
                                    "big",
                                    big,
                                    CRATER_STORE_VALUE_MAX + 1,
                                    0,
                                    &err),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_ELIMIT);
    ck_assert_str_eq(err.field, "big");
    ck_assert_int_eq(crater_txn_delete(t, key, &err), -1); /* duplicate */
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_int_eq(crater_txn_expect(t, "\x01", 0, &err), -1);
    ck_assert_int_eq(crater_store_list(st, "bad\x7f", &l, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_int_eq(crater_store_commit(st, t, NULL, &err), 0);
    ck_assert_int_eq(crater_store_get(st, key, &kv, &err), 0);
    ck_assert_uint_eq(kv.len, CRATER_STORE_VALUE_MAX);
    ck_assert_int_eq(kv.value[kv.len], '\0');
    crater_skv_free(&kv);
    crater_txn_destroy(t);
    free(big);
    crater_store_close(st);
}
END_TEST

/* Async commits: every callback runs exactly once, including those still
 * queued at close and one queued from inside a callback; a synchronous
 * commit from a callback is refused. */
#define ASYNC_N 500

struct async_state {
    crater_store_t *st;
    _Atomic int calls[ASYNC_N + 1];
    _Atomic int ok, stale, sync_refused;
};

struct async_ctx {
    struct async_state *s;
    int idx;
};

static struct async_ctx ctxs[ASYNC_N + 1];

static void chained_cb(int rc, int64_t rev, const crater_error_t *err, void *p)
{
    struct async_ctx *c = p;

    (void)rev;
    (void)err;
    atomic_fetch_add(&c->s->calls[c->idx], 1);
    if (rc == 0)
        atomic_fetch_add(&c->s->ok, 1);
}

static void counting_cb(int rc, int64_t rev, const crater_error_t *err, void *p)
{
    struct async_ctx *c = p;
    crater_error_t e2;

    atomic_fetch_add(&c->s->calls[c->idx], 1);
    if (rc == 0) {
        atomic_fetch_add(&c->s->ok, 1);
        ck_assert_int_gt(rev, 0);
    } else if (err->errnum == CRATER_ESTALE) {
        atomic_fetch_add(&c->s->stale, 1);
    }
    if (c->idx == 0) {
        crater_txn_t *t = crater_txn_create();
        crater_txn_put(t, "chained", "c", 1, 0, &e2);
        if (crater_store_commit(c->s->st, t, NULL, &e2) == -1
            && e2.errnum == CRATER_EINVAL)
            atomic_fetch_add(&c->s->sync_refused, 1);
        ck_assert_int_eq(crater_store_commit_async(c->s->st,
                                                   t,
                                                   chained_cb,
                                                   &ctxs[ASYNC_N],
                                                   &e2),
                         0);
    }
}

START_TEST(async_callbacks_at_close)
{
    static struct async_state s;
    crater_error_t err;
    crater_skv_list_t l;

    memset(&s, 0, sizeof(s));
    s.st = open_store(true);
    for (int i = 0; i <= ASYNC_N; i++)
        ctxs[i] = (struct async_ctx){&s, i};
    for (int i = 0; i < ASYNC_N; i++) {
        crater_txn_t *t = crater_txn_create();
        char key[32];
        snprintf(key, sizeof(key), "async/%04d", i);
        if (i % 5 == 4)
            crater_txn_expect(t, "async/0000", 12345, &err);
        crater_txn_put(t, key, "v", 1, 0, &err);
        ck_assert_int_eq(crater_store_commit_async(s.st,
                                                   t,
                                                   counting_cb,
                                                   &ctxs[i],
                                                   &err),
                         0);
    }
    crater_store_close(s.st); /* drains the queue */
    for (int i = 0; i <= ASYNC_N; i++)
        ck_assert_int_eq(atomic_load(&s.calls[i]), 1);
    ck_assert_int_eq(atomic_load(&s.stale), ASYNC_N / 5);
    ck_assert_int_eq(atomic_load(&s.ok), ASYNC_N - ASYNC_N / 5 + 1);
    ck_assert_int_eq(atomic_load(&s.sync_refused), 1);

    s.st = open_store(true);
    ck_assert_int_eq(crater_store_list(s.st, "async/", &l, &err), 0);
    ck_assert_uint_eq(l.count, ASYNC_N - ASYNC_N / 5);
    crater_skv_list_free(&l);
    ck_assert_int_eq(crater_store_list(s.st, "chained", &l, &err), 0);
    ck_assert_uint_eq(l.count, 1);
    crater_skv_list_free(&l);
    crater_store_close(s.st);
}
END_TEST

/* kill -9 durability: a child commits creates from 8 threads and writes
 * each acknowledged key to a pipe; the parent SIGKILLs it midway, reopens
 * and checks that every acknowledged key is there, created exactly once. */
#define CRASH_THREADS 8
#define CRASH_PER_THREAD 2000
#define CRASH_KILL_AFTER 400

struct crash_arg {
    crater_store_t *st;
    int id, fd;
};

static void *crash_main(void *p)
{
    struct crash_arg *a = p;

    for (int i = 0; i < CRASH_PER_THREAD; i++) {
        crater_txn_t *t = crater_txn_create();
        crater_error_t err;
        char key[32], line[40];
        int n;

        snprintf(key, sizeof(key), "job/%d/%05d", a->id, i);
        crater_txn_expect(t, key, 0, &err);
        crater_txn_put(t, key, key, strlen(key), 0, &err);
        if (crater_store_commit(a->st, t, NULL, &err) == 0) {
            n = snprintf(line, sizeof(line), "%s\n", key);
            if (write(a->fd, line, (size_t)n) != n)
                _exit(3);
        }
        crater_txn_destroy(t);
    }
    return NULL;
}

static void crash_child(int fd)
{
    crater_store_t *st = crater_store_open_sqlite(dbpath, NULL, NULL);
    struct crash_arg args[CRASH_THREADS];
    pthread_t th[CRASH_THREADS];

    if (!st)
        _exit(2);
    for (int i = 0; i < CRASH_THREADS; i++) {
        args[i] = (struct crash_arg){st, i, fd};
        pthread_create(&th[i], NULL, crash_main, &args[i]);
    }
    for (int i = 0; i < CRASH_THREADS; i++)
        pthread_join(th[i], NULL);
    _exit(0); /* not reached in the test: killed first */
}

/* Reads acknowledged keys from fd until EOF, killing pid after `after`. */
static char **read_acks(int fd, pid_t pid, size_t after, size_t *n)
{
    FILE *f = fdopen(fd, "r");
    char line[64],
        **keys = calloc(CRASH_THREADS * CRASH_PER_THREAD, sizeof(char *));

    *n = 0;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        keys[(*n)++] = strdup(line);
        if (*n == after)
            kill(pid, SIGKILL);
    }
    fclose(f);
    return keys;
}

START_TEST(kill9_keeps_acknowledged)
{
    int fds[2], status;
    pid_t pid;
    size_t n;
    char **keys;
    crater_store_t *st;
    crater_skv_list_t l;
    crater_error_t err;

    ck_assert_int_eq(pipe(fds), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        crash_child(fds[1]);
    }
    close(fds[1]);
    keys = read_acks(fds[0], pid, CRASH_KILL_AFTER, &n);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "child was not killed (status %d)",
                  status);
    ck_assert_uint_ge(n, CRASH_KILL_AFTER);
    ck_assert_uint_lt(n, CRASH_THREADS * CRASH_PER_THREAD);

    st = open_store(true);
    for (size_t i = 0; i < n; i++) {
        crater_skv_t kv;
        ck_assert_msg(crater_store_get(st, keys[i], &kv, &err) == 0,
                      "acknowledged %s lost",
                      keys[i]);
        ck_assert_str_eq(kv.value, keys[i]);
        ck_assert_int_eq(kv.version, 1);
        crater_skv_free(&kv);
        free(keys[i]);
    }
    free(keys);
    /* Exactly once: one revision per stored key, every key created once. */
    ck_assert_int_eq(crater_store_list(st, "job/", &l, &err), 0);
    ck_assert_uint_ge(l.count, n);
    ck_assert_int_eq(l.revision, (int64_t)l.count);
    for (size_t i = 0; i < l.count; i++)
        ck_assert_int_eq(l.items[i].version, 1);
    printf("kill -9: %zu acknowledged, %zu stored, all acknowledged present\n",
           n,
           l.count);
    crater_skv_list_free(&l);
    crater_store_close(st);
}
END_TEST

#define TP_THREADS 64
#define TP_PER_THREAD 100

static void *tp_main(void *p)
{
    struct crash_arg *a = p;

    for (int i = 0; i < TP_PER_THREAD; i++) {
        crater_txn_t *t = crater_txn_create();
        crater_error_t err;
        char key[32];

        snprintf(key, sizeof(key), "tp/%d/%d", a->id, i);
        crater_txn_expect(t, key, 0, &err);
        crater_txn_put(t, key, "{\"state\":\"pending\"}", 19, 0, &err);
        ck_assert_int_eq(crater_store_commit(a->st, t, NULL, &err), 0);
        crater_txn_destroy(t);
    }
    return NULL;
}

START_TEST(group_commit_throughput)
{
    crater_store_t *st = open_store(true);
    struct crash_arg args[TP_THREADS];
    pthread_t th[TP_THREADS];
    struct timespec t0, t1;
    double s;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < TP_THREADS; i++) {
        args[i] = (struct crash_arg){st, i, -1};
        pthread_create(&th[i], NULL, tp_main, &args[i]);
    }
    for (int i = 0; i < TP_THREADS; i++)
        pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    ck_assert_int_eq(crater_store_revision(st), TP_THREADS * TP_PER_THREAD);
    printf("group commit: %d durable commits from %d threads in %.2f s = "
           "%.0f commits/s\n",
           TP_THREADS * TP_PER_THREAD,
           TP_THREADS,
           s,
           TP_THREADS * TP_PER_THREAD / s);
    crater_store_close(st);
}
END_TEST

static Suite *store_suite(void)
{
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("sqlite");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, put_get_delete_list);
    tcase_add_test(tc, revisions_and_versions);
    tcase_add_test(tc, compare_and_swap);
    tcase_add_test(tc, batch_isolation);
    tcase_add_test(tc, change_feed);
    tcase_add_test(tc, compaction);
    tcase_add_test(tc, compaction_frees_history);
    tcase_add_test(tc, leases);
    tcase_add_test(tc, reopen_keeps_data);
    tcase_add_test(tc, validation);
    tcase_add_test(tc, async_callbacks_at_close);
    tcase_add_test(tc, kill9_keeps_acknowledged);
    tcase_add_test(tc, group_commit_throughput);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(store_suite());
    int failures;

    srunner_run_all(sr, CK_NORMAL);
    failures = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failures ? 1 : 0;
}
