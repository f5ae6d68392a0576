/* test_gang.c - gang placement: all replicas or none. A gang that fits
 * stays committed under consecutive task ids; one that does not fit
 * leaves the state exactly as it was (probe placements before and after,
 * fast path and brute force) and names the replica that failed. */
#include <check.h>
#include <string.h>

#include "crater/sched.h"
#include "sched_fixture.h"

/* Release tasks first..first+n-1. */
static void rollback(crater_sched_t *s, uint64_t first, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        ck_assert_int_eq(crater_sched_release(s, first + i, NULL), 0);
}

/* Probe placements by both paths; they must agree with each other. */
static void probe(crater_sched_t *s, crater_placement_t out[3])
{
    crater_request_t pr[3] = {req_slice(1, 0),
                              req_slice(1, 7000),
                              req_slice(0, 0)};
    crater_placement_t b;
    crater_error_t err;

    for (int i = 0; i < 3; i++) {
        memset(&out[i], 0, sizeof(out[i]));
        memset(&b, 0, sizeof(b));
        if (crater_sched_place(s, &pr[i], &out[i], &err) < 0)
            out[i].node = CRATER_SCHED_NO_NODE;
        if (crater_sched_place_bruteforce(s, &pr[i], &b, &err) < 0)
            b.node = CRATER_SCHED_NO_NODE;
        ck_assert_int_eq(memcmp(&out[i], &b, sizeof(b)), 0);
    }
}

/* a2-a100 has two GPUs: a gang of two whole-GPU replicas fits and stays
 * committed; a third replica fails the whole gang of three. */
START_TEST(gang_fits_and_stays_committed)
{
    crater_sched_t *s = load(EX("a2-a100.yaml"));
    crater_request_t r = req_slice(1, 0);
    crater_placement_t out[2], p;
    crater_error_t err;

    ck_assert_int_eq(crater_sched_place_gang(s, &r, 2, 10, out, &err), 0);
    ck_assert_uint_eq(out[0].gpu[0], 0);
    ck_assert_uint_eq(out[1].gpu[0], 1);
    ck_assert(out[0].whole && out[1].whole);
    ck_assert_int_eq(crater_sched_place(s, &r, &p, &err), -1);
    ck_assert_int_eq(crater_sched_release(s, 10, &err), 0);
    ck_assert_int_eq(crater_sched_release(s, 11, &err), 0);
    ck_assert_int_eq(crater_sched_release(s, 12, &err), -1);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(gang_all_or_nothing)
{
    crater_sched_t *s = load(EX("a2-a100.yaml"));
    crater_request_t r = req_slice(1, 0), slice = req_slice(1, 30000);
    crater_placement_t before[3], after[3], out[3];
    crater_error_t err;

    ck_assert_int_eq(crater_sched_commit(s,
                                         1,
                                         &slice,
                                         &(crater_placement_t){.node = 0,
                                                               .ngpus = 1,
                                                               .gpu = {1},
                                                               .gpu_mib =
                                                                   {30000},
                                                               .numa = -1,
                                                               .storage = -1},
                                         &err),
                     0);
    probe(s, before);
    /* GPU 0 is free, GPU 1 holds a slice: replica 2 finds no free GPU */
    ck_assert_int_eq(crater_sched_place_gang(s, &r, 3, 20, out, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNSCHED);
    ck_assert_str_eq(err.text,
                     "gang replica 2 of 3 does not fit: 0/1 "
                     "nodes fit: 1 not enough free GPUs (need 1, best 0 "
                     "on gpu-a100-0)");
    probe(s, after);
    ck_assert_int_eq(memcmp(before, after, sizeof(before)), 0);
    ck_assert_int_eq(crater_sched_release(s, 20, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    /* after the failed gang a single replica still gets GPU 0 */
    ck_assert_int_eq(crater_sched_place_gang(s, &r, 1, 20, out, &err), 0);
    ck_assert_uint_eq(out[0].gpu[0], 0);
    crater_sched_destroy(s);
}
END_TEST

/* A slice gang: replicas of 30000 MiB, two per 80 GB GPU. Four fit; the
 * fifth does not, and the four before it are released again. */
START_TEST(gang_of_slices_rolls_back)
{
    crater_sched_t *s = load(EX("a2-a100.yaml"));
    crater_request_t r = req_slice(1, 30000);
    crater_placement_t before[3], after[3], out[5];
    crater_error_t err;

    probe(s, before);
    ck_assert_int_eq(crater_sched_place_gang(s, &r, 5, 1, out, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNSCHED);
    ck_assert_msg(strncmp(err.text,
                          "gang replica 5 of 5 does not "
                          "fit: 0/1 nodes fit: 1 insufficient GPU memory",
                          74)
                      == 0,
                  "%s",
                  err.text);
    for (uint64_t t = 1; t <= 5; t++)
        ck_assert_int_eq(crater_sched_release(s, t, &err), -1);
    probe(s, after);
    ck_assert_int_eq(memcmp(before, after, sizeof(before)), 0);
    ck_assert_int_eq(crater_sched_place_gang(s, &r, 4, 1, out, &err), 0);
    ck_assert_uint_eq(out[0].gpu[0], out[1].gpu[0]);
    ck_assert_uint_eq(out[2].gpu[0], out[3].gpu[0]);
    ck_assert_uint_ne(out[0].gpu[0], out[2].gpu[0]);
    crater_sched_destroy(s);
}
END_TEST

/* A task id already in use fails the commit of that replica; the ones
 * before it are released and the error says why. */
START_TEST(gang_commit_failure_rolls_back)
{
    crater_sched_t *s = load(EX("h100x8.yaml"));
    crater_request_t r = req_slice(2, 0);
    crater_placement_t before[3], after[3], out[3], p;
    crater_error_t err;

    ck_assert_int_eq(crater_sched_place(s, &r, &p, &err), 0);
    ck_assert_int_eq(crater_sched_commit(s, 7, &r, &p, &err), 0);
    probe(s, before);
    ck_assert_int_eq(crater_sched_place_gang(s, &r, 3, 5, out, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EEXIST);
    ck_assert_str_eq(err.text,
                     "gang replica 3 of 3 (task 7) cannot be committed: "
                     "task 7 already placed");
    probe(s, after);
    ck_assert_int_eq(memcmp(before, after, sizeof(before)), 0);
    ck_assert_int_eq(crater_sched_release(s, 5, &err), -1);
    ck_assert_int_eq(crater_sched_release(s, 6, &err), -1);
    crater_sched_destroy(s);
}
END_TEST

START_TEST(gang_bad_arguments)
{
    crater_sched_t *s = load(EX("a2-a100.yaml"));
    crater_request_t r = req_slice(1, 0);
    crater_placement_t out[2];
    crater_error_t err;

    ck_assert_int_eq(crater_sched_place_gang(s, &r, 0, 1, out, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_str_eq(err.text, "a gang needs at least one replica");
    ck_assert_int_eq(crater_sched_place_gang(s, &r, 2, 0, out, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_int_eq(crater_sched_place_gang(s, &r, 2, UINT64_MAX, out, &err),
                     -1);
    ck_assert_str_eq(err.text,
                     "task ids 18446744073709551615..+1 are not all valid "
                     "(0 is reserved, ids must not wrap)");
    ck_assert_int_eq(crater_sched_place_gang(s, &r, 1, UINT64_MAX, out, &err),
                     0);
    crater_sched_destroy(s);
}
END_TEST

/* Charge mib on GPU g of node 0 as task id. */
static void charge(crater_sched_t *s, uint64_t id, uint8_t g, uint32_t mib)
{
    crater_request_t r = req_slice(1, mib);
    crater_placement_t p = {.node = 0,
                            .ngpus = 1,
                            .gpu = {g},
                            .gpu_mib = {mib},
                            .numa = -1,
                            .storage = -1};
    crater_error_t err;

    ck_assert_msg(crater_sched_commit(s, id, &r, &p, &err) == 0,
                  "%s",
                  err.text);
}

/* Leave room[g] MiB on each GPU g of node 0 (UINT32_MAX: untouched);
 * charges use task ids 1000 + g. */
static void leave(crater_sched_t *s, const uint32_t *room, uint32_t n)
{
    uint32_t have[CRATER_MAX_GPUS_PER_NODE];

    crater_sched_gpu_room(s, 0, have, CRATER_MAX_GPUS_PER_NODE);
    for (uint32_t g = 0; g < n; g++)
        if (room[g] != UINT32_MAX && have[g] > room[g])
            charge(s, 1000 + g, (uint8_t)g, have[g] - room[g]);
}

static uint64_t set_of(const crater_placement_t *p)
{
    uint64_t m = 0;

    for (uint32_t k = 0; k < p->ngpus; k++)
        m |= 1ull << p->gpu[k];
    return m;
}

/* Greedy best fit fails, an arrangement exists: GPU 0 is free, GPUs 1
 * and 2 have 30000 MiB left, the others 5000. Two replicas of two
 * 25000 MiB slices: best fit gives the first replica GPUs 1 and 2 and
 * leaves the second one GPU; (0,1) and (0,2) fit. The brute force
 * agrees. */
START_TEST(gang_search_beats_greedy)
{
    crater_sched_t *s = load(EX("h100x8.yaml"));
    uint32_t room[8] = {UINT32_MAX, 30000, 30000, 5000, 5000, 5000, 5000, 5000};
    crater_request_t r = req_slice(2, 25000);
    crater_placement_t out[2], p;
    crater_error_t err;

    leave(s, room, 8);
    /* what greedy does: the first replica on GPUs 1 and 2 */
    ck_assert_int_eq(crater_sched_place(s, &r, &p, &err), 0);
    ck_assert_uint_eq(set_of(&p), 0x6);
    ck_assert_int_eq(crater_sched_place_gang_bruteforce(s, &r, 2, 1, out, &err),
                     0);
    rollback(s, 1, 2);
    ck_assert_int_eq(crater_sched_place_gang(s, &r, 2, 1, out, &err), 0);
    ck_assert_uint_eq(set_of(&out[0]) & set_of(&out[1]), 0x1);
    ck_assert_uint_eq(set_of(&out[0]) | set_of(&out[1]), 0x7);
    /* both stay committed: a third replica fits nowhere */
    ck_assert_int_eq(crater_sched_place(s, &r, &p, &err), -1);
    ck_assert_int_eq(crater_sched_release(s, 1, &err), 0);
    ck_assert_int_eq(crater_sched_release(s, 2, &err), 0);
    /* three replicas cannot fit: all or nothing, the greedy reason */
    ck_assert_int_eq(crater_sched_place_gang(s, &r, 3, 1, out, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNSCHED);
    ck_assert_msg(strncmp(err.text, "gang replica 2 of 3", 19) == 0,
                  "%s",
                  err.text);
    ck_assert_int_eq(crater_sched_release(s, 1, &err), -1);
    ck_assert_int_eq(crater_sched_place(s, &r, &p, &err), 0);
    ck_assert_uint_eq(set_of(&p), 0x6);
    crater_sched_destroy(s);
}
END_TEST

/* Three-GPU replicas: rooms 60000, 60000, 25000, 25000, 25000 and three
 * full GPUs; replicas of three 20000 MiB slices. Best fit takes 2,3,4
 * first (and the next replica finds two GPUs); two replicas fit when
 * the big GPUs are shared (e.g. 0,2,3 and 0,1,4); three never do, as the
 * brute force agrees. */
START_TEST(gang_search_three_gpu_replicas)
{
    crater_sched_t *s = load(EX("h100x8.yaml"));
    uint32_t room[8] = {60000, 60000, 25000, 25000, 25000, 0, 0, 0};
    crater_request_t r = req_slice(3, 20000);
    crater_placement_t out[3];
    crater_error_t err;

    leave(s, room, 8);
    ck_assert_int_eq(crater_sched_place_gang(s, &r, 2, 1, out, &err), 0);
    for (int i = 0; i < 2; i++) { /* three GPUs each, none of the full */
        ck_assert_int_eq(__builtin_popcountll(set_of(&out[i])), 3);
        ck_assert_uint_eq(set_of(&out[i]) & 0xe0, 0);
    }
    rollback(s, 1, 2);
    ck_assert_int_eq(crater_sched_place_gang_bruteforce(s, &r, 3, 1, out, &err),
                     -1);
    ck_assert_int_eq(crater_sched_place_gang(s, &r, 3, 1, out, &err), -1);
    crater_sched_destroy(s);
}
END_TEST

/* Differential: random GPU rooms and requests on one 8-GPU node; the
 * search finds an arrangement exactly when the brute force does, and
 * either way leaves the state as it was. */
START_TEST(gang_search_matches_bruteforce)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    int found = 0, beat = 0;

    for (int round = 0; round < 120; round++) {
        crater_sched_t *s = load(EX("h100x8.yaml"));
        uint32_t room[8];
        crater_placement_t out[3], before[3], after[3];
        crater_error_t err;
        crater_request_t r;
        uint32_t n;
        int a, b, g;
        for (int i = 0; i < 8; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            room[i] = (uint32_t)(x % 7) * 10000;
        }
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        r = req_slice(1 + (uint32_t)(x % 2),
                      15000 + (uint32_t)(x / 2 % 3) * 5000);
        n = 2 + (uint32_t)(x / 6 % 2);
        leave(s, room, 8);
        probe(s, before);
        b = crater_sched_place_gang_bruteforce(s, &r, n, 1, out, &err);
        if (b == 0)
            rollback(s, 1, n);
        a = crater_sched_place_gang(s, &r, n, 1, out, &err);
        ck_assert_msg(a == b,
                      "round %d: search %d, brute force %d",
                      round,
                      a,
                      b);
        if (a == 0) {
            rollback(s, 1, n);
            found++;
        }
        g = 0;
        for (uint32_t i = 0; a == 0 && i < n; i++) /* greedy alone? */
            g |= crater_sched_place(s, &r, &out[0], NULL) < 0
                 || crater_sched_commit(s, 100 + i, &r, &out[0], NULL) < 0;
        for (uint32_t i = 0; a == 0 && i < n; i++)
            crater_sched_release(s, 100 + i, NULL);
        beat += g;
        probe(s, after);
        ck_assert_int_eq(memcmp(before, after, sizeof(before)), 0);
        crater_sched_destroy(s);
    }
    ck_assert_int_gt(found, 10);
    ck_assert_int_gt(beat, 0); /* some rounds greedy alone would fail */
}
END_TEST

int main(void)
{
    Suite *su = suite_create("gang");
    TCase *tc = tcase_create("gang");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, gang_fits_and_stays_committed);
    tcase_add_test(tc, gang_all_or_nothing);
    tcase_add_test(tc, gang_of_slices_rolls_back);
    tcase_add_test(tc, gang_commit_failure_rolls_back);
    tcase_add_test(tc, gang_bad_arguments);
    tcase_add_test(tc, gang_search_beats_greedy);
    tcase_add_test(tc, gang_search_three_gpu_replicas);
    tcase_add_test(tc, gang_search_matches_bruteforce);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
