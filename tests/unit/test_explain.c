/* test_explain.c - crater_sched_explain(): exact JSON for crafted cases
 * (a request that fits on one node of seven, one that fits nowhere), and
 * its message is the text crater_sched_place() and the brute-force path
 * put in err.text (cut with "..." in the error when it is long). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/sched.h"
#include "sched_fixture.h"

/* The explanation as compact JSON, key order as built. */
static char *explain(crater_sched_t *s, const crater_request_t *r)
{
    json_t *j = crater_sched_explain(s, r);
    char *text;

    ck_assert_ptr_nonnull(j);
    text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    ck_assert_ptr_nonnull(text);
    return text;
}

static const char *message_of(const char *json, char *buf, size_t size)
{
    json_t *j = json_loads(json, 0, NULL);

    ck_assert_ptr_nonnull(j);
    snprintf(buf, size, "%s", json_string_value(json_object_get(j, "message")));
    json_decref(j);
    return buf;
}

/* cluster.yaml: compute capability 9.0 only on h100; the reasons say
 * what ruled out the other six nodes, quantity-free reasons carry no
 * need/have/unit. */
START_TEST(fits_one_node_reasons_for_the_rest)
{
    crater_sched_t *s = load(EX("cluster.yaml"));
    crater_request_t r = req_slice(1, 0);
    char *j;

    r.min_cc = 90;
    j = explain(s, &r);
    ck_assert_str_eq(j,
                     "{\"nodes\":7,\"fit\":1,\"reasons\":[{\"reason\":\"fewer "
                     "GPUs than the job asks "
                     "for\",\"nodes\":2,\"need\":1,\"have\":0,\"unit\":"
                     "\"count\",\"closest_node\":\"cpu-0\"},{\"reason\":\"no "
                     "GPU meets the model/capability "
                     "constraints\",\"nodes\":2,\"need\":1,\"have\":0,\"unit\":"
                     "\"count\",\"closest_node\":\"a100-0\"},{\"reason\":"
                     "\"untolerated "
                     "taint\",\"nodes\":2,\"closest_node\":\"infer-l4\"}],"
                     "\"message\":\"1/7 nodes fit: 2 fewer GPUs than the job "
                     "asks for (need 1, best 0 on cpu-0), 2 no GPU meets the "
                     "model/capability constraints (need 1, best 0 on a100-0), "
                     "2 untolerated taint\"}");
    free(j);
    crater_sched_destroy(s);
}
END_TEST

/* a2-a100 at 85% CPU: nothing fits; the message is the error text of
 * both placement paths. */
START_TEST(nothing_fits_message_is_error_text)
{
    crater_sched_t *s = load(EX("a2-a100.yaml"));
    crater_request_t r = req_slice(1, 0);
    crater_node_util_t u = {.cpu = 0.85};
    crater_placement_t p;
    crater_error_t e1, e2;
    char *j, msg[1024];

    crater_sched_set_util(s, 0, &u);
    j = explain(s, &r);
    ck_assert_str_eq(j,
                     "{\"nodes\":1,\"fit\":0,\"reasons\":["
                     "{\"reason\":\"cpuThreshold exceeded\",\"nodes\":1,"
                     "\"need\":80,\"have\":85,\"unit\":\"percent\","
                     "\"closest_node\":\"gpu-a100-0\"}],"
                     "\"message\":\"0/1 nodes fit: 1 cpuThreshold exceeded "
                     "(limit 80%, best 85% on gpu-a100-0)\"}");
    ck_assert_int_eq(crater_sched_place(s, &r, &p, &e1), -1);
    ck_assert_int_eq(crater_sched_place_bruteforce(s, &r, &p, &e2), -1);
    ck_assert_str_eq(message_of(j, msg, sizeof(msg)), e1.text);
    ck_assert_str_eq(msg, e2.text);
    free(j);
    crater_sched_destroy(s);
}
END_TEST

/* Four reasons on cluster.yaml, GPU memory in MiB with the default
 * 300 MiB context overhead on top of the 90000 MiB slice; the error holds
 * the whole message (issue 13: reasons were once cut at 160 characters). */
START_TEST(long_message_is_whole_in_the_error)
{
    crater_sched_t *s = load(EX("cluster.yaml"));
    crater_request_t r = req_slice(1, 90000);
    crater_node_util_t u = {.cpu = 0.9};
    crater_placement_t p;
    crater_error_t err;
    char *j, msg[1024];

    crater_sched_set_util(s, 1, &u);
    j = explain(s, &r);
    ck_assert_str_eq(j,
                     "{\"nodes\":7,\"fit\":0,\"reasons\":[{\"reason\":\"fewer "
                     "GPUs than the job asks "
                     "for\",\"nodes\":2,\"need\":1,\"have\":0,\"unit\":"
                     "\"count\",\"closest_node\":\"cpu-0\"},{\"reason\":"
                     "\"insufficient GPU "
                     "memory\",\"nodes\":2,\"need\":90300,\"have\":81920,"
                     "\"unit\":\"MiB\",\"closest_node\":\"a100-0\"},{"
                     "\"reason\":\"untolerated "
                     "taint\",\"nodes\":2,\"closest_node\":\"infer-l4\"},{"
                     "\"reason\":\"cpuThreshold "
                     "exceeded\",\"nodes\":1,\"need\":80,\"have\":90,\"unit\":"
                     "\"percent\",\"closest_node\":\"a100-1\"}],\"message\":"
                     "\"0/7 nodes fit: 2 fewer GPUs than the job asks for "
                     "(need 1, best 0 on cpu-0), 2 insufficient GPU memory "
                     "(need 90300 MiB, best 81920 MiB on a100-0), 2 "
                     "untolerated taint, 1 cpuThreshold exceeded (limit 80%, "
                     "best 90% on a100-1)\"}");
    ck_assert_int_eq(crater_sched_place(s, &r, &p, &err), -1);
    message_of(j, msg, sizeof(msg));
    ck_assert_uint_gt(strlen(msg), 200);
    ck_assert_str_eq(err.text, msg);
    free(j);
    crater_sched_destroy(s);
}
END_TEST

/* Issue 13: explain on a placed job showed only its state. The chosen
 * node's score, by plugin, against the runner-up; the same decision as
 * crater_sched_place() with the task's charges off; the state unchanged
 * (the next placement is the same as before the call). */
START_TEST(placed_task_against_runner_up)
{
    crater_sched_t *s = load(EX("cluster.yaml"));
    crater_request_t r = req_slice(1, 20000);
    crater_placement_t p, before, after;
    crater_error_t err;
    json_t *j, *chosen, *second;

    ck_assert_int_eq(crater_sched_place(s, &r, &p, &err), 0);
    ck_assert_int_eq(crater_sched_commit(s, 1, &r, &p, &err), 0);
    ck_assert_ptr_null(crater_sched_explain_placed(s, 2, &r));
    ck_assert_int_eq(crater_sched_place(s, &r, &before, &err), 0);
    j = crater_sched_explain_placed(s, 1, &r);
    ck_assert_ptr_nonnull(j);
    chosen = json_object_get(j, "chosen");
    second = json_object_get(j, "runner_up");
    ck_assert_str_eq(json_string_value(json_object_get(chosen, "node")),
                     crater_sched_node(s, p.node)->name);
    ck_assert(json_is_true(json_object_get(chosen, "fits")));
    ck_assert(json_real_value(json_object_get(chosen, "score")) == p.score);
    ck_assert_uint_gt(json_array_size(json_object_get(chosen, "plugins")), 0);
    ck_assert(json_is_object(second));
    ck_assert_str_ne(json_string_value(json_object_get(second, "node")),
                     crater_sched_node(s, p.node)->name);
    ck_assert(json_real_value(json_object_get(j, "margin")) >= 0);
    ck_assert_int_ge(json_integer_value(json_object_get(j, "fit")), 2);
    json_decref(j);
    ck_assert_int_eq(crater_sched_place(s, &r, &after, &err), 0);
    ck_assert_int_eq(memcmp(&before, &after, sizeof(after)), 0);
    crater_sched_destroy(s);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("explain");
    TCase *tc = tcase_create("json");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, fits_one_node_reasons_for_the_rest);
    tcase_add_test(tc, nothing_fits_message_is_error_text);
    tcase_add_test(tc, long_message_is_whole_in_the_error);
    tcase_add_test(tc, placed_task_against_runner_up);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
