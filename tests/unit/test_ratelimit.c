/* test_ratelimit.c - the per-client token buckets of the HTTP server
 * (src/net/ratelimit.c), on an invented clock: burst, refill, Retry-After,
 * clients apart, and a table that stays bounded and fair when far more
 * clients than slots come by. */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <string.h>

#include "net/ratelimit.h"

static crater__rl_key_t v4(const char *addr)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    crater__rl_key_t k;

    ck_assert_int_eq(inet_pton(AF_INET, addr, &sa.sin_addr), 1);
    ck_assert_int_eq(crater__rl_key((struct sockaddr *)&sa, sizeof sa, &k), 0);
    return k;
}

static crater__rl_key_t nth(unsigned i)
{
    crater__rl_key_t k;

    memset(&k, 0, sizeof k);
    memcpy(k.b, &i, sizeof i);
    return k;
}

START_TEST(burst_then_refill)
{
    crater__rl_t *rl = crater__rl_create(2, 5); /* 2/s, burst 5 */
    crater__rl_key_t a = v4("127.0.0.2");
    unsigned retry = 0;

    ck_assert_ptr_nonnull(rl);
    for (int i = 0; i < 5; i++)
        ck_assert(crater__rl_take(rl, &a, 1000, &retry));
    ck_assert(!crater__rl_take(rl, &a, 1000, &retry));
    ck_assert_uint_eq(retry, 1); /* half a second, rounded up */
    ck_assert(!crater__rl_take(rl, &a, 1499, NULL));
    ck_assert(crater__rl_take(rl, &a, 1500, NULL)); /* one token back */
    ck_assert(!crater__rl_take(rl, &a, 1500, NULL));
    /* a long pause refills to the burst, not beyond */
    for (int i = 0; i < 5; i++)
        ck_assert(crater__rl_take(rl, &a, 1000000, NULL));
    ck_assert(!crater__rl_take(rl, &a, 1000000, NULL));
    crater__rl_destroy(rl);
}
END_TEST

START_TEST(retry_after_for_slow_rates)
{
    crater__rl_t *rl = crater__rl_create(0.1, 1); /* one per 10 s */
    crater__rl_key_t a = v4("10.0.0.1");
    unsigned retry = 0;

    ck_assert(crater__rl_take(rl, &a, 0, &retry));
    ck_assert(!crater__rl_take(rl, &a, 0, &retry));
    ck_assert_uint_eq(retry, 10);
    ck_assert(!crater__rl_take(rl, &a, 4000, &retry));
    ck_assert_uint_eq(retry, 6);
    crater__rl_destroy(rl);
}
END_TEST

START_TEST(clients_apart)
{
    crater__rl_t *rl = crater__rl_create(1, 1);
    crater__rl_key_t a = v4("127.0.0.1"), b = v4("127.0.0.2");
    struct sockaddr_in6 sa6 = {.sin6_family = AF_INET6};
    struct sockaddr sa_unix = {.sa_family = AF_UNIX};
    crater__rl_key_t c;

    ck_assert(crater__rl_take(rl, &b, 0, NULL));
    ck_assert(!crater__rl_take(rl, &b, 0, NULL));
    ck_assert(crater__rl_take(rl, &a, 0, NULL)); /* b's flood costs a nothing */
    inet_pton(AF_INET6, "::1", &sa6.sin6_addr);
    ck_assert_int_eq(crater__rl_key((struct sockaddr *)&sa6, sizeof sa6, &c),
                     0);
    ck_assert(crater__rl_take(rl, &c, 0, NULL));
    ck_assert_int_eq(crater__rl_key(&sa_unix, sizeof sa_unix, &c), -1);
    ck_assert_int_eq(crater__rl_key((struct sockaddr *)&sa6, 4, &c), -1);
    crater__rl_destroy(rl);
}
END_TEST

/* 100,000 clients through 8,192 slots, one a millisecond: memory is
 * fixed, and a client that keeps coming back is limited exactly (its slot
 * stays its own: it is never the least recently seen in its window). */
START_TEST(many_clients_bounded)
{
    crater__rl_t *rl = crater__rl_create(1, 3);
    crater__rl_key_t hot = v4("192.0.2.7");
    unsigned refused = 0;

    for (unsigned i = 0; i < 100000; i++) {
        crater__rl_key_t k = nth(i + 1);
        ck_assert(crater__rl_take(rl, &k, i, NULL)); /* first is free */
        if (!crater__rl_take(rl, &hot, i, NULL))
            refused++;
    }
    /* the burst of 3, then 99.999 s at 1/s: 102 allowed */
    ck_assert_uint_eq(refused, 100000 - 102);
    crater__rl_destroy(rl);
}
END_TEST

START_TEST(bad_arguments)
{
    ck_assert_ptr_null(crater__rl_create(0, 1));
    ck_assert_ptr_null(crater__rl_create(-1, 1));
    ck_assert_ptr_null(crater__rl_create(1, 0));
    ck_assert_ptr_null(crater__rl_create(2e6, 1));
    crater__rl_destroy(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ratelimit");
    TCase *tc = tcase_create("buckets");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, burst_then_refill);
    tcase_add_test(tc, retry_after_for_slow_rates);
    tcase_add_test(tc, clients_apart);
    tcase_add_test(tc, many_clients_bounded);
    tcase_add_test(tc, bad_arguments);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
