/* test_leader.c - leader election (src/daemon/leader.c) against a real
 * etcd: of two candidates exactly one leads and the other knows its URL;
 * a leader that stops hands over at once (it revokes its lease); a leader
 * whose lease is revoked behind its back finds out and reports LOST, and
 * its fence then refuses its writes; after rejoin it stands by; the renew
 * deadline's arithmetic. Exits 77 (ctest: skipped) without etcd. */
#include <check.h>

#include "daemon/leader.h"
#include "etcd_fixture.h"

static crater_store_t *open_store(void)
{
    char *eps[] = {client_url, NULL};
    crater_store_etcd_opts_t o = {.endpoints = eps,
                                  .prefix = "/tl/",
                                  .timeout_ms = 1000};
    crater_error_t err;
    crater_store_t *st = crater_store_open_etcd(&o, &err);

    ck_assert_msg(st != NULL, "open: %s", err.text);
    return st;
}

static crater_leader_t *candidate(crater_store_t *st, const char *url)
{
    crater_leader_opts_t o = {.store = st,
                              .url = url,
                              .lease_ms = 2000,
                              .renew_deadline_ms = 1500,
                              .retry_ms = 100};
    crater_error_t err;
    crater_leader_t *l = crater_leader_start(&o, &err);

    ck_assert_msg(l != NULL, "start: %s", err.text);
    return l;
}

/* Waits (at most ms) until l is in state want. */
static int reaches(crater_leader_t *l, crater_leader_state_t want, int ms)
{
    for (int i = 0; i < ms / 50; i++) {
        crater_leader_state_t s = crater_leader_wait(l, want, 0);
        if (s == want)
            return 1;
        (void)crater_leader_wait(l, s, 50);
    }
    return crater_leader_wait(l, want, 0) == want;
}

static void current_is(crater_leader_t *l, const char *want)
{
    char cur[128];

    for (int i = 0; i < 40; i++) {
        crater_leader_current(l, cur, sizeof(cur));
        if (strcmp(cur, want) == 0)
            return;
        usleep(50 * 1000);
    }
    ck_assert_str_eq(cur, want);
}

START_TEST(one_leader_and_handover)
{
    crater_store_t *sa = open_store(), *sb = open_store();
    crater_leader_t *a = candidate(sa, "http://a:1");
    crater_leader_t *b;

    ck_assert(reaches(a, CRATER_LEADER_LEADING, 5000));
    ck_assert_int_gt(crater_leader_revision(a), 0);
    b = candidate(sb, "http://b:2");
    current_is(b, "http://a:1");
    ck_assert_int_eq(crater_leader_wait(b, CRATER_LEADER_STANDBY, 500),
                     CRATER_LEADER_STANDBY);
    ck_assert_int_eq(crater_leader_revision(b), 0);
    crater_leader_destroy(a); /* revokes: b leads within a few retries */
    ck_assert(reaches(b, CRATER_LEADER_LEADING, 1500));
    crater_leader_destroy(b);
    crater_store_close(sa);
    crater_store_close(sb);
}
END_TEST

START_TEST(lost_lease_is_noticed_and_fenced)
{
    crater_store_t *sa = open_store(), *other = open_store();
    crater_leader_t *a = candidate(sa, "http://a:1");
    crater_store_t *dst = open_store();
    crater_txn_t *t = crater_txn_create();
    crater_error_t err;
    crater_skv_t kv;
    int64_t rev;

    ck_assert(reaches(a, CRATER_LEADER_LEADING, 5000));
    rev = crater_leader_revision(a);
    ck_assert_int_eq(crater_store_set_fence(dst, CRATER_LEADER_KEY, rev, &err),
                     0);
    ck_assert_int_eq(crater_store_get(other, CRATER_LEADER_KEY, &kv, &err), 0);
    ck_assert_str_eq(kv.value, "http://a:1");
    ck_assert_int_eq(kv.mod_rev, rev);
    /* someone revokes the leader's lease (an operator, an expiry) */
    ck_assert_int_eq(crater_store_lease_revoke(other, kv.lease, &err), 0);
    crater_skv_free(&kv);
    ck_assert(reaches(a, CRATER_LEADER_LOST, 2000));
    ck_assert_int_eq(crater_leader_revision(a), 0);
    ck_assert_int_eq(crater_txn_put(t, "x", "1", 1, 0, &err), 0);
    ck_assert_int_eq(crater_store_commit(dst, t, NULL, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
    crater_txn_destroy(t);
    crater_leader_rejoin(a); /* stepped down: campaigns again, and wins */
    ck_assert(reaches(a, CRATER_LEADER_LEADING, 3000));
    ck_assert_int_gt(crater_leader_revision(a), rev);
    crater_leader_destroy(a);
    crater_store_close(dst);
    crater_store_close(sa);
    crater_store_close(other);
}
END_TEST

START_TEST(renew_deadline)
{
    ck_assert(!crater_leader_deadline_passed(1000, 2999, 2000));
    ck_assert(crater_leader_deadline_passed(1000, 3000, 2000));
    ck_assert(crater_leader_deadline_passed(1000, 9000, 2000));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("leader");
    TCase *tc = tcase_create("leader");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, renew_deadline);
    tcase_add_test(tc, one_leader_and_handover);
    tcase_add_test(tc, lost_lease_is_noticed_and_fenced);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    if (start_etcd() < 0) {
        printf("test_leader: etcd not installed (apt-get install "
               "etcd-server), skipped\n");
        return 77;
    }
    if (wait_etcd() < 0)
        return 1;
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
