/* test_watchdog.c - the GPU watchdog's decision (src/agent/slice.c): a
 * task is over when the memory NVML sees for its processes on one of its
 * GPUs passes the slice plus 5% plus the context overhead, and which GPU
 * it was. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "agent/internal.h"

#define MIB (1024ull * 1024ull)

START_TEST(within_tolerance)
{
    uint64_t limit[2] = {1000 * MIB, 2000 * MIB};
    uint64_t used[2] = {1050 * MIB + 300 * MIB, 2000 * MIB};
    size_t which = 99;

    ck_assert(!agent_slice_over(used, limit, 2, 300 * MIB, &which));
    ck_assert_uint_eq(which, 99);
}
END_TEST

START_TEST(over_on_second_gpu)
{
    uint64_t limit[2] = {1000 * MIB, 2000 * MIB};
    uint64_t used[2] = {10 * MIB, 2100 * MIB + 300 * MIB + 1};
    size_t which = 99;

    ck_assert(agent_slice_over(used, limit, 2, 300 * MIB, &which));
    ck_assert_uint_eq(which, 1);
}
END_TEST

START_TEST(no_overhead_allowance)
{
    uint64_t limit[1] = {1000 * MIB};
    uint64_t used[1] = {1051 * MIB};
    size_t which = 99;

    ck_assert(agent_slice_over(used, limit, 1, 0, &which));
    ck_assert_uint_eq(which, 0);
    used[0] = 1050 * MIB;
    ck_assert(!agent_slice_over(used, limit, 1, 0, &which));
}
END_TEST

START_TEST(no_gpus)
{
    size_t which = 7;

    ck_assert(!agent_slice_over(NULL, NULL, 0, 0, &which));
    ck_assert_uint_eq(which, 7);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("watchdog");
    TCase *tc = tcase_create("decision");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, within_tolerance);
    tcase_add_test(tc, over_on_second_gpu);
    tcase_add_test(tc, no_overhead_allowance);
    tcase_add_test(tc, no_gpus);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
