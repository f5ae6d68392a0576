/* test_leader.c - leader election (src/daemon/leader.c) against a real
 * etcd: of two candidates exactly one leads and the other knows its URL;
 * a leader that stops hands over at once (it revokes its lease); a leader
 * whose lease is revoked behind its back finds out and reports LOST, and
 * its fence then refuses its writes; after rejoin it stands by; a leader
 * whose renewal hangs (etcd stopped) reads UNSURE once renewDeadline has
 * passed and LOST once twice leaseDuration has, while the renewal still waits;
 * one whose etcd comes back in between leads again under the same key
 * revision; the clock's arithmetic. Exits 77 (ctest: skipped) without
 * etcd. */
#include <check.h>

#include "daemon/leader.h"
#include "etcd_fixture.h"

static crater_store_t *open_store_ms(long timeout_ms)
{
    char *eps[] = {client_url, NULL};
    crater_store_etcd_opts_t o = {.endpoints = eps,
                                  .prefix = "/tl/",
                                  .timeout_ms = timeout_ms};
    crater_error_t err;
    crater_store_t *st = crater_store_open_etcd(&o, &err);

    ck_assert_msg(st != NULL, "open: %s", err.text);
    return st;
}

static crater_store_t *open_store(void)
{
    return open_store_ms(1000);
}

static crater_leader_t *candidate_ms(crater_store_t *st,
                                     const char *url,
                                     int64_t lease_ms,
                                     int64_t deadline_ms)
{
    crater_leader_opts_t o = {.store = st,
                              .url = url,
                              .lease_ms = lease_ms,
                              .renew_deadline_ms = deadline_ms,
                              .retry_ms = 100};
    crater_error_t err;
    crater_leader_t *l = crater_leader_start(&o, &err);

    ck_assert_msg(l != NULL, "start: %s", err.text);
    return l;
}

static crater_leader_t *candidate(crater_store_t *st, const char *url)
{
    return candidate_ms(st, url, 2000, 1500);
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

/* etcd stops answering (SIGSTOP) and the election's requests wait 30 s:
   the leader must read UNSURE once renewDeadline (1.5 s) has passed since
   its last renewal (another craterd may lead once the lease, 2 s, has)
   and LOST once twice the lease has, not when the hung request gives
   up. */
START_TEST(hung_renewal_is_unsure_then_lost)
{
    crater_store_t *sa = open_store_ms(30000);
    crater_leader_t *a = candidate(sa, "http://a:1");
    int unsure, lost;

    ck_assert(reaches(a, CRATER_LEADER_LEADING, 5000));
    ck_assert_int_eq(kill(etcd_pid, SIGSTOP), 0);
    unsure = reaches(a, CRATER_LEADER_UNSURE, 10000);
    lost = reaches(a, CRATER_LEADER_LOST, 10000);
    kill(etcd_pid, SIGCONT); /* before any assertion: the next tests */
    ck_assert_msg(unsure, "never UNSURE after etcd stopped");
    ck_assert_msg(lost, "not LOST 10 s after the deadline");
    ck_assert_int_eq(crater_leader_revision(a), 0);
    crater_leader_destroy(a);
    crater_store_close(sa);
}
END_TEST

/* etcd stops, the leader turns UNSURE (and keeps its fence), etcd comes
   back before the lease (4 s) ran out: the next renewal makes it LEADING
   again, under the same key revision (nobody led meanwhile). */
START_TEST(unsure_leader_renews_and_leads_again)
{
    crater_store_t *sa = open_store();
    crater_leader_t *a = candidate_ms(sa, "http://a:1", 4000, 1000);
    int64_t rev;
    int unsure;

    ck_assert(reaches(a, CRATER_LEADER_LEADING, 5000));
    rev = crater_leader_revision(a);
    ck_assert_int_gt(rev, 0);
    ck_assert_int_eq(kill(etcd_pid, SIGSTOP), 0);
    unsure = reaches(a, CRATER_LEADER_UNSURE, 5000);
    kill(etcd_pid, SIGCONT);
    ck_assert_msg(unsure, "never UNSURE after etcd stopped");
    ck_assert_int_eq(crater_leader_revision(a), rev);
    ck_assert_msg(reaches(a, CRATER_LEADER_LEADING, 5000),
                  "not LEADING again after etcd came back (state %d)",
                  (int)crater_leader_wait(a, CRATER_LEADER_LEADING, 0));
    ck_assert_int_eq(crater_leader_revision(a), rev);
    crater_leader_destroy(a);
    crater_store_close(sa);
}
END_TEST

START_TEST(renew_deadline)
{
    ck_assert(!crater_leader_deadline_passed(1000, 2999, 2000));
    ck_assert(crater_leader_deadline_passed(1000, 3000, 2000));
    ck_assert(crater_leader_deadline_passed(1000, 9000, 2000));
    ck_assert_int_eq(crater_leader_clock(1000, 2999, 2000, 3000),
                     CRATER_LEADER_LEADING);
    ck_assert_int_eq(crater_leader_clock(1000, 3000, 2000, 3000),
                     CRATER_LEADER_UNSURE);
    ck_assert_int_eq(crater_leader_clock(1000, 6999, 2000, 3000),
                     CRATER_LEADER_UNSURE);
    ck_assert_int_eq(crater_leader_clock(1000, 7000, 2000, 3000),
                     CRATER_LEADER_LOST);
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
    tcase_add_test(tc, hung_renewal_is_unsure_then_lost);
    tcase_add_test(tc, unsure_leader_renews_and_leads_again);
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
