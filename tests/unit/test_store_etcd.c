/* test_store_etcd.c - the store interface against a real etcd (Debian's
 * etcd-server), started here on free loopback ports with a temporary data
 * dir and killed at exit. Revisions are checked relative to the store's
 * revision at the start of each case (etcd's revision is global and starts
 * at 1); each case uses its own key prefix. Covered: get/put/delete/list
 * with exact revisions, compare-and-swap naming the failed key,
 * no-op transactions, the change feed (watch) with limits and deletes,
 * compaction (ESTALE, ERANGE, rediscovered at reopen), leases, async
 * commits in order and drained at close, the request-size limit, endpoint
 * failover, prefix isolation and etcd auth (user/password). Exits 77 (ctest:
 * skipped) without etcd. */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "etcd_fixture.h"
#include "store/store.h"

static crater_store_t *open_prefix(const char *prefix)
{
    char *eps[] = {client_url, NULL};
    crater_store_etcd_opts_t o = {.endpoints = eps, .prefix = prefix};
    crater_error_t err;
    crater_store_t *st = crater_store_open_etcd(&o, &err);

    ck_assert_msg(st != NULL, "open: %s", err.text);
    return st;
}

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
    crater_store_t *st = open_prefix("/t1/");
    int64_t b = crater_store_revision(st);
    crater_skv_list_t l;
    crater_error_t err;

    ck_assert_int_eq(put(st, "jobs/2", "two"), b + 1);
    ck_assert_int_eq(put(st, "jobs/1", "one"), b + 2);
    ck_assert_int_eq(put(st, "nodes/a", "A"), b + 3);
    ck_assert_int_eq(put(st, "jobs/1", "uno"), b + 4);
    check_kv(st, "jobs/1", "uno", b + 2, b + 4, 2);
    ck_assert_int_eq(crater_store_list(st, "jobs/", &l, &err), 0);
    ck_assert_uint_eq(l.count, 2);
    ck_assert_int_eq(l.revision, b + 4);
    ck_assert_str_eq(l.items[0].key, "jobs/1");
    ck_assert_str_eq(l.items[1].value, "two");
    crater_skv_list_free(&l);
    ck_assert_int_eq(crater_store_list(st, "", &l, &err), 0);
    ck_assert_uint_eq(l.count, 3);
    crater_skv_list_free(&l);
    ck_assert_int_eq(del(st, "jobs/1"), b + 5);
    check_absent(st, "jobs/1");
    ck_assert_int_eq(del(st, "jobs/1"), b + 5); /* no-op: no revision */
    ck_assert_int_eq(put(st, "jobs/1", "again"), b + 6);
    check_kv(st, "jobs/1", "again", b + 6, b + 6, 1);
    ck_assert_int_eq(crater_store_revision(st), b + 6);
    crater_store_close(st);
}
END_TEST

START_TEST(compare_and_swap)
{
    crater_store_t *st = open_prefix("/t2/");
    int64_t b = crater_store_revision(st), rev = 0;
    crater_txn_t *t = crater_txn_create();
    crater_error_t err;

    ck_assert_int_eq(crater_txn_expect(t, "k", 0, &err), 0);
    ck_assert_int_eq(crater_txn_put(t, "k", "1", 1, 0, &err), 0);
    ck_assert_int_eq(crater_store_commit(st, t, &rev, &err), 0);
    ck_assert_int_eq(rev, b + 1);
    ck_assert_int_eq(crater_store_commit(st, t, &rev, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ESTALE);
    ck_assert_str_eq(err.field, "k");
    crater_txn_destroy(t);
    t = crater_txn_create();
    ck_assert_int_eq(crater_txn_expect(t, "other", 0, &err), 0);
    ck_assert_int_eq(crater_txn_expect(t, "k", b + 1, &err), 0);
    ck_assert_int_eq(crater_txn_put(t, "k", "2", 1, 0, &err), 0);
    ck_assert_int_eq(crater_txn_delete(t, "gone", &err), 0);
    ck_assert_int_eq(crater_store_commit(st, t, &rev, &err), 0);
    ck_assert_int_eq(rev, b + 2);
    ck_assert_int_eq(crater_store_commit(st, t, &rev, &err), -1);
    ck_assert_str_eq(err.field, "k");
    crater_txn_destroy(t);
    t = crater_txn_create(); /* compares only: no new revision */
    ck_assert_int_eq(crater_txn_expect(t, "k", b + 2, &err), 0);
    ck_assert_int_eq(crater_store_commit(st, t, &rev, &err), 0);
    ck_assert_int_eq(rev, b + 2);
    crater_txn_destroy(t);
    check_kv(st, "k", "2", b + 1, b + 2, 2);
    crater_store_close(st);
}
END_TEST

START_TEST(change_feed)
{
    crater_store_t *st = open_prefix("/t3/");
    crater_store_t *other = open_prefix("/t3x/");
    int64_t b = crater_store_revision(st);
    crater_store_event_list_t ev;
    crater_error_t err;

    put(st, "a/1", "x");
    put(other, "a/1", "elsewhere");
    put(st, "b/1", "y");
    put(st, "a/1", "z");
    del(st, "a/1");
    ck_assert_int_eq(crater_store_changes(st, "a/", b, 0, &ev, &err), 0);
    ck_assert_uint_eq(ev.count, 3);
    ck_assert_int_eq(ev.items[0].type, CRATER_STORE_PUT);
    ck_assert_int_eq(ev.items[0].revision, b + 1);
    ck_assert_str_eq(ev.items[0].kv.key, "a/1");
    ck_assert_str_eq(ev.items[1].kv.value, "z");
    ck_assert_int_eq(ev.items[1].kv.version, 2);
    ck_assert_int_eq(ev.items[2].type, CRATER_STORE_DELETE);
    ck_assert_int_eq(ev.items[2].revision, b + 5);
    ck_assert_ptr_null(ev.items[2].kv.value);
    crater_store_event_list_free(&ev);
    ck_assert_int_eq(crater_store_changes(st, "", b, 2, &ev, &err), 0);
    ck_assert_uint_eq(ev.count, 2);
    ck_assert_str_eq(ev.items[1].kv.key, "b/1");
    crater_store_event_list_free(&ev);
    ck_assert_int_eq(crater_store_changes(st, "", b + 5, 0, &ev, &err), 0);
    ck_assert_uint_eq(ev.count, 0);
    crater_store_event_list_free(&ev);
    crater_store_close(other);
    crater_store_close(st);
}
END_TEST

START_TEST(compaction)
{
    crater_store_t *st = open_prefix("/t4/");
    int64_t b = crater_store_revision(st);
    crater_store_event_list_t ev;
    crater_error_t err;

    put(st, "k", "1");
    put(st, "k", "2");
    put(st, "j", "3");
    ck_assert_int_eq(crater_store_compact(st, b + 2, &err), 0);
    ck_assert_int_eq(crater_store_compacted_revision(st), b + 2);
    ck_assert_int_eq(crater_store_changes(st, "", b, 0, &ev, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ESTALE);
    ck_assert_ptr_nonnull(strstr(err.text, "compacted"));
    ck_assert_int_eq(crater_store_changes(st, "", b + 2, 0, &ev, &err), 0);
    ck_assert_uint_eq(ev.count, 1);
    ck_assert_str_eq(ev.items[0].kv.key, "j");
    crater_store_event_list_free(&ev);
    check_kv(st, "k", "2", b + 1, b + 2, 2);
    ck_assert_int_eq(crater_store_compact(st, b + 100, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ERANGE);
    ck_assert_int_eq(crater_store_compact(st, b + 1, &err), 0); /* no-op */
    crater_store_close(st);
    st = open_prefix("/t4/"); /* found again by the binary search */
    ck_assert_int_eq(crater_store_compacted_revision(st), b + 2);
    crater_store_close(st);
}
END_TEST

START_TEST(leases)
{
    crater_store_t *st = open_prefix("/t5/");
    crater_txn_t *t = crater_txn_create();
    int64_t l1 = 0, l2 = 0;
    crater_error_t err;

    ck_assert_int_eq(crater_store_lease_grant(st, 30000, 0, &l1, &err), 0);
    ck_assert_int_eq(crater_store_lease_grant(st, 30000, 0, &l2, &err), 0);
    ck_assert_int_ne(l1, l2);
    put_lease(st, "agent/n1", "up", l1);
    put_lease(st, "agent/n2", "up", l2);
    ck_assert_int_eq(crater_txn_put(t, "x", "1", 1, 99, &err), 0);
    ck_assert_int_eq(crater_store_commit(st, t, NULL, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    ck_assert_str_eq(err.field, "x");
    crater_txn_destroy(t);
    ck_assert_int_eq(crater_store_lease_keepalive(st, l1, 0, &err), 0);
    ck_assert_int_eq(crater_store_lease_revoke(st, l1, &err), 0);
    check_absent(st, "agent/n1");
    check_kv(st,
             "agent/n2",
             "up",
             crater_store_revision(st) - 1,
             crater_store_revision(st) - 1,
             1);
    ck_assert_int_eq(crater_store_lease_keepalive(st, l1, 0, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    ck_assert_int_eq(crater_store_lease_revoke(st, l1, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    ck_assert_int_eq(crater_store_lease_revoke(st, l2, &err), 0);
    check_absent(st, "agent/n2");
    crater_store_close(st);
}
END_TEST

static int fence_rc[8];
static crater_errno_t fence_errno[8];

static void fence_cb(int rc, int64_t rev, const crater_error_t *err, void *p)
{
    (void)rev;
    fence_rc[(intptr_t)p] = rc;
    fence_errno[(intptr_t)p] = rc < 0 ? err->errnum : CRATER_OK;
}

/* A commit with the fence set: EUNAVAIL naming the leader key. */
static void fenced_commit_fails(crater_store_t *st, const char *key)
{
    crater_txn_t *t = crater_txn_create();
    crater_error_t err;

    ck_assert_int_eq(crater_txn_put(t, key, "x", 1, 0, &err), 0);
    ck_assert_int_eq(crater_store_commit(st, t, NULL, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
    ck_assert_str_eq(err.field, "leader");
    ck_assert_msg(strstr(err.text, "not the leader"), "%s", err.text);
    crater_txn_destroy(t);
    check_absent(st, key);
}

/* Fencing: a craterd that lost its leader key (lease revoked, or another
 * leader's key in its place) cannot write, also in a group commit and
 * with its own compares holding; a revoked fence fails at once. */
START_TEST(fence_deposed_leader_cannot_write)
{
    crater_store_t *st = open_prefix("/t12/"), *other = open_prefix("/t12/");
    crater_txn_t *t = crater_txn_create();
    int64_t lease = 0, rev = 0;
    crater_error_t err;

    ck_assert_int_eq(crater_store_lease_grant(st, 30000, 0, &lease, &err), 0);
    ck_assert_int_eq(crater_txn_expect(t, "leader", 0, &err), 0);
    ck_assert_int_eq(crater_txn_put(t, "leader", "me", 2, lease, &err), 0);
    ck_assert_int_eq(crater_store_commit(st, t, &rev, &err), 0);
    crater_txn_destroy(t);
    ck_assert_int_eq(crater_store_set_fence(st, "leader", rev, &err), 0);
    put(st, "a", "1"); /* the leader writes */
    ck_assert_int_eq(crater_store_lease_revoke(other, lease, &err), 0);
    fenced_commit_fails(st, "b"); /* lease gone: no key */
    put(other, "leader", "you");  /* another leader's key */
    fenced_commit_fails(st, "c");
    for (intptr_t i = 0; i < 8; i++) { /* a group commit: each refused */
        char key[8];
        snprintf(key, sizeof(key), "g%d", (int)i);
        t = crater_txn_create();
        ck_assert_int_eq(crater_txn_put(t, key, "v", 1, 0, &err), 0);
        ck_assert_int_eq(crater_store_commit_async(st,
                                                   t,
                                                   fence_cb,
                                                   (void *)i,
                                                   &err),
                         0);
    }
    ck_assert_int_eq(crater_store_set_fence(st, "leader", -1, &err), 0);
    fenced_commit_fails(st, "d");
    crater_store_close(st);
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(fence_rc[i], -1);
        ck_assert_int_eq(fence_errno[i], CRATER_EUNAVAIL);
    }
    check_absent(other, "g0");
    check_kv(other, "a", "1", rev + 1, rev + 1, 1);
    crater_store_close(other);
}
END_TEST

#define ASYNC_N 50
static int64_t async_revs[ASYNC_N];
static atomic_int async_count;

static void async_cb(int rc, int64_t rev, const crater_error_t *err, void *p)
{
    (void)err;
    ck_assert_int_eq(rc, 0);
    async_revs[(intptr_t)p] = rev;
    atomic_fetch_add(&async_count, 1);
}

START_TEST(async_in_order_drained_at_close)
{
    crater_store_t *st = open_prefix("/t6/");
    int64_t b = crater_store_revision(st);
    crater_error_t err;

    for (intptr_t i = 0; i < ASYNC_N; i++) {
        crater_txn_t *t = crater_txn_create();
        ck_assert_int_eq(crater_txn_put(t, "c", "v", 1, 0, &err), 0);
        ck_assert_int_eq(crater_store_commit_async(st,
                                                   t,
                                                   async_cb,
                                                   (void *)i,
                                                   &err),
                         0);
    }
    crater_store_close(st); /* runs every callback first */
    ck_assert_int_eq(atomic_load(&async_count), ASYNC_N);
    for (int i = 0; i < ASYNC_N; i++)
        ck_assert_int_eq(async_revs[i], b + 1 + i);
    st = open_prefix("/t6/");
    check_kv(st, "c", "v", b + 1, b + ASYNC_N, ASYNC_N);
    crater_store_close(st);
}
END_TEST

static int grp_rc[21];
static int64_t grp_rev[21];
static char grp_field[CRATER_ERROR_FIELD];

static void grp_cb(int rc, int64_t rev, const crater_error_t *err, void *p)
{
    intptr_t i = (intptr_t)p;

    grp_rc[i] = rc;
    grp_rev[i] = rev;
    if (rc < 0)
        snprintf(grp_field, sizeof(grp_field), "%s", err->field);
}

/* Queued transactions on distinct keys are group-committed; one whose
 * compare fails fails alone. */
START_TEST(group_commit_isolates_failures)
{
    crater_store_t *st = open_prefix("/t9/");
    int64_t b = crater_store_revision(st);
    crater_error_t err;
    char key[16];

    for (intptr_t i = 0; i < 21; i++) {
        crater_txn_t *t = crater_txn_create();
        snprintf(key, sizeof(key), "k%02d", (int)i);
        if (i == 10)
            ck_assert_int_eq(crater_txn_expect(t, key, 12345, &err), 0);
        ck_assert_int_eq(crater_txn_put(t, key, "v", 1, 0, &err), 0);
        ck_assert_int_eq(crater_store_commit_async(st,
                                                   t,
                                                   grp_cb,
                                                   (void *)i,
                                                   &err),
                         0);
    }
    crater_store_close(st);
    for (int i = 0; i < 21; i++) {
        ck_assert_int_eq(grp_rc[i], i == 10 ? -1 : 0);
        if (i > 0 && i != 10 && i != 11)
            ck_assert_int_ge(grp_rev[i], grp_rev[i - 1]);
        if (i != 10)
            ck_assert_int_gt(grp_rev[i], b);
    }
    ck_assert_str_eq(grp_field, "k10");
    st = open_prefix("/t9/");
    check_absent(st, "k10");
    check_kv(st, "k20", "v", grp_rev[20], grp_rev[20], 1);
    crater_store_close(st);
}
END_TEST

START_TEST(request_size_limit)
{
    crater_store_t *st = open_prefix("/t7/");
    size_t n = 2u << 20;
    char *big = calloc(1, n);
    crater_txn_t *t = crater_txn_create();
    crater_error_t err;

    memset(big, 'x', n - 1);
    ck_assert_int_eq(crater_txn_put(t, "small", "s", 1, 0, &err), 0);
    ck_assert_int_eq(crater_txn_put(t, "big", big, n, 0, &err), 0);
    ck_assert_int_eq(crater_store_commit(st, t, NULL, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ELIMIT);
    ck_assert_str_eq(err.field, "big");
    ck_assert_ptr_nonnull(strstr(err.text, "max-request-bytes"));
    crater_txn_destroy(t);
    t = crater_txn_create(); /* 1 MiB is fine */
    ck_assert_int_eq(crater_txn_put(t, "big", big, 1u << 20, 0, &err), 0);
    ck_assert_int_eq(crater_store_commit(st, t, NULL, &err), 0);
    crater_txn_destroy(t);
    free(big);
    crater_store_close(st);
}
END_TEST

START_TEST(endpoint_failover)
{
    char *eps[] = {dead_url, client_url, NULL};
    char *none[] = {dead_url, NULL};
    crater_store_etcd_opts_t o = {.endpoints = eps, .prefix = "/t8/"};
    crater_error_t err;
    crater_store_t *st = crater_store_open_etcd(&o, &err);
    crater_store_event_list_t ev;

    ck_assert_msg(st != NULL, "open: %s", err.text);
    ck_assert_int_gt(put(st, "k", "v"), 0);
    check_kv(st,
             "k",
             "v",
             crater_store_revision(st),
             crater_store_revision(st),
             1);
    ck_assert_int_eq(crater_store_changes(st,
                                          "",
                                          crater_store_revision(st) - 1,
                                          0,
                                          &ev,
                                          &err),
                     0);
    ck_assert_uint_eq(ev.count, 1);
    crater_store_event_list_free(&ev);
    crater_store_close(st);
    o.endpoints = none;
    ck_assert_ptr_null(crater_store_open_etcd(&o, &err));
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
    ck_assert_str_eq(err.field, "store.etcdEndpoints");
    o.endpoints = (char *[]){"ftp://x", NULL};
    ck_assert_ptr_null(crater_store_open_etcd(&o, &err));
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
}
END_TEST

/* Last: turns etcd auth on (the cases after it would need credentials). */
START_TEST(auth_user_password)
{
    char cmd[512], *eps[] = {client_url, NULL};
    crater_store_etcd_opts_t o = {.endpoints = eps,
                                  .prefix = "/t10/",
                                  .user = "root",
                                  .password = "pw"};
    crater_error_t err;
    crater_store_t *st;

    snprintf(cmd,
             sizeof(cmd),
             "ETCDCTL_API=3 etcdctl --endpoints %s user add root "
             "--new-user-password=pw >/dev/null 2>&1 && ETCDCTL_API=3 etcdctl "
             "--endpoints %s auth enable >/dev/null 2>&1",
             client_url,
             client_url);
    ck_assert_int_eq(system(cmd), 0);
    st = crater_store_open_etcd(&o, &err);
    ck_assert_msg(st != NULL, "open with auth: %s", err.text);
    ck_assert_int_gt(put(st, "k", "v"), 0);
    check_kv(st,
             "k",
             "v",
             crater_store_revision(st),
             crater_store_revision(st),
             1);
    crater_store_close(st);
    o.password = "wrong";
    ck_assert_ptr_null(crater_store_open_etcd(&o, &err));
    ck_assert_int_eq(err.errnum, CRATER_EAUTH);
    ck_assert_str_eq(err.field, "store.etcdUser");
    o.user = NULL;
    ck_assert_ptr_null(crater_store_open_etcd(&o, &err));
}
END_TEST

static Suite *etcd_suite(void)
{
    Suite *s = suite_create("store_etcd");
    TCase *tc = tcase_create("etcd");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, put_get_delete_list);
    tcase_add_test(tc, compare_and_swap);
    tcase_add_test(tc, change_feed);
    tcase_add_test(tc, compaction);
    tcase_add_test(tc, leases);
    tcase_add_test(tc, async_in_order_drained_at_close);
    tcase_add_test(tc, group_commit_isolates_failures);
    tcase_add_test(tc, request_size_limit);
    tcase_add_test(tc, endpoint_failover);
    tcase_add_test(tc, fence_deposed_leader_cannot_write);
    tcase_add_test(tc, auth_user_password); /* last: turns auth on */
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr;
    int failed;

    if (start_etcd() < 0) {
        printf("test_store_etcd: etcd not installed (apt-get install "
               "etcd-server), skipped\n");
        return 77;
    }
    if (wait_etcd() < 0)
        return 1;
    sr = srunner_create(etcd_suite());
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
