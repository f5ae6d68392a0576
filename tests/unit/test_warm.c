/* test_warm.c - a standby's warm copy (src/daemon/warm.c): after any
 * sequence of puts, overwrites and deletes (several per transaction, keys
 * outside the prefix, values with NUL bytes, lease-bound keys that expire
 * with DELETE events), a copy that followed the change feed lists exactly
 * what crater_store_list() lists at the same revision - key order, bytes
 * and revision - which is what craterd's loader reads, so a promoted
 * standby's state is the one a full load gives. Also: a copy that
 * follows while another thread writes; history compacted past the copy
 * (ESTALE, copy unchanged, a load repairs it); an unloaded copy refuses.
 * On SQLite always, on a real etcd when etcd-server is installed (the
 * etcd case is skipped otherwise, with a message). */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>

#include "daemon/warm.h"
#include "etcd_fixture.h"

static char dir[64];
static bool have_etcd;

typedef crater_store_t *(*open_f)(void);

static crater_store_t *open_sqlite(void)
{
    char path[128];
    crater_store_opts_t o = {.no_sync = true};
    crater_error_t err;
    crater_store_t *st;

    snprintf(path, sizeof(path), "%s/store.db", dir);
    st = crater_store_open_sqlite(path, &o, &err);
    ck_assert_msg(st != NULL, "open: %s", err.text);
    return st;
}

static crater_store_t *open_etcd_store(void)
{
    char *eps[] = {client_url, NULL}, prefix[32];
    crater_store_etcd_opts_t o = {.endpoints = eps, .prefix = prefix};
    crater_error_t err;
    crater_store_t *st;

    /* a store per case (each runs in its own process) */
    snprintf(prefix, sizeof(prefix), "/tw%d/", (int)getpid());
    st = crater_store_open_etcd(&o, &err);
    ck_assert_msg(st != NULL, "open: %s", err.text);
    return st;
}

static void setup(void)
{
    strcpy(dir, "/tmp/crater-warm-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static uint32_t rnd(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 8) & 0xffffff;
}

static const char *const prefixes[] = {"/crater/jobs/",
                                       "/crater/nodes/",
                                       "/crater/tokens/",
                                       "/crater/cost/",
                                       "/elsewhere/"};

static void random_key(uint32_t *s, char *key, size_t n)
{
    const char *p = prefixes[rnd(s) % 5];

    if (strcmp(p, "/crater/jobs/") == 0)
        snprintf(key, n, "%s%020u", p, rnd(s) % 40 + 1);
    else
        snprintf(key, n, "%sk%u", p, rnd(s) % 12);
}

static bool seen(char keys[][96], size_t i)
{
    for (size_t k = 0; k < i; k++)
        if (strcmp(keys[k], keys[i]) == 0)
            return true;
    return false;
}

/* A put of key: some values have a NUL inside, some are empty. */
static void random_put(crater_txn_t *t, const char *key, uint32_t *s)
{
    char val[300];
    size_t len = (size_t)snprintf(val, sizeof(val), "{\"v\":%u}", rnd(s));
    crater_error_t err;

    if (rnd(s) % 5 == 0)
        val[len++] = '\0'; /* bytes after a NUL must survive */
    len += (size_t)
        snprintf(val + len, sizeof(val) - len, "%*s", (int)(rnd(s) % 200), "");
    if (rnd(s) % 11 == 0)
        len = 0;
    ck_assert_int_eq(crater_txn_put(t, key, val, len, 0, &err), 0);
}

/* One transaction of 1-4 ops on distinct keys: puts and deletes (some of
 * absent keys). */
static void random_txn(crater_store_t *st, uint32_t *s)
{
    crater_txn_t *t = crater_txn_create();
    char keys[4][96];
    size_t nops = rnd(s) % 4 + 1;
    crater_error_t err;

    for (size_t i = 0; i < nops; i++) {
        random_key(s, keys[i], sizeof(keys[i]));
        if (seen(keys, i)) /* a key once per transaction */
            continue;
        if (rnd(s) % 3 == 0)
            ck_assert_int_eq(crater_txn_delete(t, keys[i], &err), 0);
        else
            random_put(t, keys[i], s);
    }
    ck_assert_msg(crater_store_commit(st, t, NULL, &err) == 0,
                  "commit: %s",
                  err.text);
    crater_txn_destroy(t);
}

/* The copy lists what the store lists under prefix, at the same revision. */
static void same_as_store(const crater_warm_t *w,
                          crater_store_t *st,
                          const char *prefix)
{
    crater_skv_list_t a, b;
    crater_error_t err;

    ck_assert_msg(crater_warm_list(w, prefix, &a, &err) == 0, "%s", err.text);
    ck_assert_msg(crater_store_list(st, prefix, &b, &err) == 0, "%s", err.text);
    ck_assert_int_eq(a.revision, b.revision);
    ck_assert_uint_eq(a.count, b.count);
    for (size_t i = 0; i < a.count; i++) {
        ck_assert_str_eq(a.items[i].key, b.items[i].key);
        ck_assert_uint_eq(a.items[i].len, b.items[i].len);
        ck_assert(memcmp(a.items[i].value, b.items[i].value, a.items[i].len)
                  == 0);
        ck_assert_int_eq(a.items[i].value[a.items[i].len], 0);
    }
    crater_skv_list_free(&a);
    crater_skv_list_free(&b);
}

static void same_everywhere(const crater_warm_t *w, crater_store_t *st)
{
    crater_skv_list_t l;
    crater_error_t err;

    same_as_store(w, st, CRATER_WARM_PREFIX);
    for (size_t i = 0; i < 4; i++)
        same_as_store(w, st, prefixes[i]);
    /* nothing outside the prefix is kept */
    ck_assert_int_eq(crater_warm_list(w, "/elsewhere/", &l, &err), 0);
    ck_assert_uint_eq(l.count, 0);
    crater_skv_list_free(&l);
}

static void follow(crater_warm_t *w, crater_store_t *st)
{
    crater_error_t err;

    ck_assert_msg(crater_warm_follow(w, st, NULL, &err) == 0, "%s", err.text);
}

/* 600 random transactions, followed every few; checked against the store
 * along the way, and against a copy loaded at the end (a full load). */
static void check_random(open_f open)
{
    crater_store_t *st = open();
    crater_warm_t *w = crater_warm_create(), *full = crater_warm_create();
    crater_error_t err;
    uint32_t s = 17;

    ck_assert_int_eq(crater_warm_load(w, st, &err), 0);
    for (int i = 0; i < 600; i++) {
        random_txn(st, &s);
        if (rnd(&s) % 7 == 0)
            follow(w, st);
        if (i % 150 == 149) {
            follow(w, st);
            same_everywhere(w, st);
        }
    }
    follow(w, st);
    ck_assert_int_eq(crater_warm_revision(w), crater_store_revision(st));
    ck_assert_int_eq(crater_warm_load(full, st, &err), 0);
    ck_assert_int_eq(crater_warm_revision(full), crater_warm_revision(w));
    ck_assert_uint_eq(crater_warm_count(full), crater_warm_count(w));
    same_everywhere(w, st);
    same_everywhere(full, st);
    crater_warm_destroy(w);
    crater_warm_destroy(full);
    crater_store_close(st);
}

START_TEST(random_sequence_sqlite)
{
    check_random(open_sqlite);
}
END_TEST

START_TEST(random_sequence_etcd)
{
    if (!have_etcd) {
        fprintf(stderr, "etcd not installed: the etcd case is skipped\n");
        return;
    }
    check_random(open_etcd_store);
}
END_TEST

/* A lease-bound key (the leader key's kind) disappears from the copy when
 * its lease is revoked: the store writes DELETE events for it. */
static void check_lease(open_f open)
{
    crater_store_t *st = open();
    crater_warm_t *w = crater_warm_create();
    crater_txn_t *t = crater_txn_create();
    crater_error_t err;
    int64_t lease;

    ck_assert_int_eq(crater_warm_load(w, st, &err), 0);
    ck_assert_int_eq(crater_store_lease_grant(st, 5000, 0, &lease, &err), 0);
    ck_assert_int_eq(crater_txn_put(t, "/crater/leader", "u", 1, lease, &err),
                     0);
    ck_assert_int_eq(crater_store_commit(st, t, NULL, &err), 0);
    follow(w, st);
    ck_assert_uint_eq(crater_warm_count(w), 1);
    ck_assert_int_eq(crater_store_lease_revoke(st, lease, &err), 0);
    follow(w, st);
    ck_assert_uint_eq(crater_warm_count(w), 0);
    same_everywhere(w, st);
    crater_txn_destroy(t);
    crater_warm_destroy(w);
    crater_store_close(st);
}

START_TEST(lease_expiry_deletes_sqlite)
{
    check_lease(open_sqlite);
}
END_TEST

START_TEST(lease_expiry_deletes_etcd)
{
    if (have_etcd)
        check_lease(open_etcd_store);
}
END_TEST

typedef struct writer {
    crater_store_t *st;
    atomic_bool stop;
    atomic_int done;
} writer_t;

static void *write_on(void *arg)
{
    writer_t *wr = arg;
    uint32_t s = 99;

    while (!atomic_load(&wr->stop) || atomic_load(&wr->done) < 50) {
        random_txn(wr->st, &s);
        atomic_fetch_add(&wr->done, 1);
    }
    return NULL;
}

/* Following while another thread commits: no change is skipped (the
 * revision the copy claims is read before the feed is). */
START_TEST(follows_a_concurrent_writer)
{
    writer_t wr = {.st = open_sqlite()};
    crater_warm_t *w = crater_warm_create();
    crater_error_t err;
    pthread_t th;

    ck_assert_int_eq(crater_warm_load(w, wr.st, &err), 0);
    ck_assert_int_eq(pthread_create(&th, NULL, write_on, &wr), 0);
    while (atomic_load(&wr.done) < 400)
        follow(w, wr.st);
    atomic_store(&wr.stop, true);
    pthread_join(th, NULL);
    follow(w, wr.st);
    same_everywhere(w, wr.st);
    crater_warm_destroy(w);
    crater_store_close(wr.st);
}
END_TEST

/* History compacted past the copy: ESTALE, the copy keeps its revision
 * (the caller falls back to a full load), and a load repairs it. */
START_TEST(compacted_history_is_stale)
{
    crater_store_t *st = open_sqlite();
    crater_warm_t *w = crater_warm_create();
    crater_error_t err;
    uint32_t s = 5;
    int64_t at;

    for (int i = 0; i < 20; i++)
        random_txn(st, &s);
    ck_assert_int_eq(crater_warm_load(w, st, &err), 0);
    at = crater_warm_revision(w);
    for (int i = 0; i < 20; i++)
        random_txn(st, &s);
    ck_assert_int_eq(crater_store_compact(st, crater_store_revision(st), &err),
                     0);
    ck_assert_int_eq(crater_warm_follow(w, st, NULL, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ESTALE);
    ck_assert_int_eq(crater_warm_revision(w), at);
    ck_assert_int_eq(crater_warm_load(w, st, &err), 0);
    same_everywhere(w, st);
    crater_warm_destroy(w);
    crater_store_close(st);
}
END_TEST

START_TEST(unloaded_copy_refuses)
{
    crater_store_t *st = open_sqlite();
    crater_warm_t *w = crater_warm_create();
    crater_skv_list_t l;
    crater_error_t err;
    uint32_t s = 3;

    ck_assert_int_eq(crater_warm_revision(w), -1);
    ck_assert_int_eq(crater_warm_follow(w, st, NULL, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_int_eq(crater_warm_list(w, "", &l, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    random_txn(st, &s);
    ck_assert_int_eq(crater_warm_load(w, st, &err), 0);
    crater_warm_clear(w); /* forgotten: loaded again before use */
    ck_assert_int_eq(crater_warm_revision(w), -1);
    ck_assert_uint_eq(crater_warm_count(w), 0);
    crater_warm_destroy(w);
    crater_warm_destroy(NULL);
    crater_store_close(st);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("warm");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    have_etcd = start_etcd() == 0 && wait_etcd() == 0;
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, random_sequence_sqlite);
    tcase_add_test(tc, random_sequence_etcd);
    tcase_add_test(tc, lease_expiry_deletes_sqlite);
    tcase_add_test(tc, lease_expiry_deletes_etcd);
    tcase_add_test(tc, follows_a_concurrent_writer);
    tcase_add_test(tc, compacted_history_is_stale);
    tcase_add_test(tc, unloaded_copy_refuses);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
