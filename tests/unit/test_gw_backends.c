/* test_gw_backends.c - the gateway's service and backend table
 * (src/gateway/backends.c), the interface craterd will feed: add, remove,
 * set ready; picks go to the ready backend with the fewest outstanding
 * requests, ties rotate, a per-backend limit is respected, and a backend
 * removed while picked stays valid until it is given back; a drained one
 * is picked no more and counts its requests in flight down to 0 (craterd
 * stops a replica then); the hold time is per service. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "gateway/backends.h"

static gw_table_t *table3(void)
{
    gw_table_t *t = gw__table_create();
    crater_error_t err;

    ck_assert_int_eq(gw__table_add_service(t, "m", &err), 0);
    ck_assert_int_eq(gw__table_add(t, "m", "http://127.0.0.1:1/", &err), 0);
    ck_assert_int_eq(gw__table_add(t, "m", "http://127.0.0.1:2", &err), 0);
    ck_assert_int_eq(gw__table_add(t, "m", "http://127.0.0.1:3", &err), 0);
    return t;
}

START_TEST(only_ready_backends_are_picked)
{
    gw_table_t *t = table3();
    gw_service_t *s = gw__table_service(t, "m");
    crater_error_t err;
    gw_backend_t *b;
    unsigned ready, total;

    ck_assert_ptr_null(gw__table_pick(t, s, 0)); /* new ones are not ready */
    ck_assert_int_eq(gw__table_set_ready(t,
                                         "m",
                                         "http://127.0.0.1:2/",
                                         true,
                                         &err),
                     0);
    gw__table_counts(t, s, &ready, &total);
    ck_assert_uint_eq(ready, 1);
    ck_assert_uint_eq(total, 3);
    for (int i = 0; i < 5; i++) {
        b = gw__table_pick(t, s, 0);
        ck_assert_str_eq(b->url, "http://127.0.0.1:2");
        gw__table_done(t, b);
    }
    gw__table_destroy(t);
}
END_TEST

START_TEST(least_outstanding_then_rotation)
{
    gw_table_t *t = table3();
    gw_service_t *s = gw__table_service(t, "m");
    crater_error_t err;
    gw_backend_t *held[3], *b;
    int seen[3] = {0};

    for (int i = 1; i <= 3; i++) {
        char u[32];
        snprintf(u, sizeof u, "http://127.0.0.1:%d", i);
        ck_assert_int_eq(gw__table_set_ready(t, "m", u, true, &err), 0);
    }
    /* three picks held: one on each backend */
    for (int i = 0; i < 3; i++)
        held[i] = gw__table_pick(t, s, 0);
    ck_assert_ptr_ne(held[0], held[1]);
    ck_assert_ptr_ne(held[1], held[2]);
    ck_assert_ptr_ne(held[0], held[2]);
    /* free one: the next pick goes there */
    gw__table_done(t, held[1]);
    b = gw__table_pick(t, s, 0);
    ck_assert_ptr_eq(b, held[1]);
    gw__table_done(t, b);
    gw__table_done(t, held[0]);
    gw__table_done(t, held[2]);
    /* all idle: successive picks rotate over the three */
    for (int i = 0; i < 30; i++) {
        b = gw__table_pick(t, s, 0);
        seen[b->url[strlen(b->url) - 1] - '1']++;
        gw__table_done(t, b);
    }
    ck_assert_int_eq(seen[0], 10);
    ck_assert_int_eq(seen[1], 10);
    ck_assert_int_eq(seen[2], 10);
    gw__table_destroy(t);
}
END_TEST

START_TEST(limit_and_remove_while_picked)
{
    gw_table_t *t = table3();
    gw_service_t *s = gw__table_service(t, "m");
    crater_error_t err;
    gw_backend_t *b;
    unsigned ready, total;

    ck_assert_int_eq(gw__table_set_ready(t,
                                         "m",
                                         "http://127.0.0.1:1",
                                         true,
                                         &err),
                     0);
    b = gw__table_pick(t, s, 1);
    ck_assert_ptr_nonnull(b);
    ck_assert(!gw__table_can_pick(t, s, 1)); /* its one slot is taken */
    ck_assert(gw__table_can_pick(t, s, 2));
    ck_assert_ptr_null(gw__table_pick(t, s, 1));
    ck_assert_int_eq(gw__table_remove(t, "m", "http://127.0.0.1:1", &err), 0);
    gw__table_counts(t, s, &ready, &total);
    ck_assert_uint_eq(total, 2);
    ck_assert(b->removed); /* still valid: the pick holds it (ASan checks) */
    gw__table_mark(t, b, true);
    ck_assert(!b->ready);
    gw__table_done(t, b);
    ck_assert_int_eq(gw__table_remove(t, "m", "http://127.0.0.1:1", &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    gw__table_destroy(t);
}
END_TEST

START_TEST(drain_counts_in_flight)
{
    gw_table_t *t = table3();
    gw_service_t *s = gw__table_service(t, "m");
    crater_error_t err;
    gw_backend_t *b, *d;

    gw__table_set_ready(t, "m", "http://127.0.0.1:1", true, &err);
    b = gw__table_pick(t, s, 0);
    ck_assert_ptr_nonnull(b);
    d = gw__table_drain(t, "m", "http://127.0.0.1:1", &err);
    ck_assert_ptr_eq(d, b);
    ck_assert_ptr_null(gw__table_pick(t, s, 0)); /* no new request */
    ck_assert_uint_eq(gw__table_outstanding(t, d), 1);
    gw__table_done(t, b);
    ck_assert_uint_eq(gw__table_outstanding(t, d), 0);
    gw__table_release(t, d); /* freed here (ASan: no leak) */
    ck_assert_ptr_null(gw__table_drain(t, "m", "http://127.0.0.1:1", &err));
    ck_assert_str_eq(err.field, "backend");
    ck_assert_int_eq(gw__table_set_hold(t, "m", 5000000, &err), 0);
    ck_assert_int_eq(atomic_load(&s->hold_us), 5000000);
    ck_assert_int_eq(gw__table_set_hold(t, "x", 1, &err), -1);
    ck_assert_str_eq(err.field, "service");
    gw__table_destroy(t);
}
END_TEST

START_TEST(errors_name_the_field)
{
    gw_table_t *t = table3();
    crater_error_t err;

    ck_assert_int_eq(gw__table_add_service(t, "m", &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EEXIST);
    ck_assert_int_eq(gw__table_add_service(t, "a/b", &err), -1);
    ck_assert_str_eq(err.field, "service");
    ck_assert_int_eq(gw__table_add(t, "m", "ftp://x", &err), -1);
    ck_assert_str_eq(err.field, "backend");
    ck_assert_int_eq(gw__table_add(t, "m", "http://127.0.0.1:2/", &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EEXIST);
    ck_assert_int_eq(gw__table_add(t, "none", "http://h:1", &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    ck_assert_int_eq(gw__table_set_batch(t, "m", 0, 1000, 1, &err), -1);
    ck_assert_str_eq(err.field, "maxBatchSize");
    ck_assert_int_eq(gw__table_set_batch(t, "m", 8, -1, 1, &err), -1);
    ck_assert_str_eq(err.field, "batchTimeout");
    ck_assert_int_eq(gw__table_set_batch(t, "m", 8, 1000, 0, &err), -1);
    ck_assert_str_eq(err.field, "maxInflight");
    ck_assert_int_eq(gw__table_set_batch(t, "m", 8, 1000, 2, &err), 0);
    ck_assert_uint_eq(gw__table_service(t, "m")->max_batch, 8);
    ck_assert_ptr_null(gw__table_service(t, "x"));
    gw__table_destroy(t);
    gw__table_destroy(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gw_backends");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, only_ready_backends_are_picked);
    tcase_add_test(tc, least_outstanding_then_rotation);
    tcase_add_test(tc, limit_and_remove_while_picked);
    tcase_add_test(tc, errors_name_the_field);
    tcase_add_test(tc, drain_counts_in_flight);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
