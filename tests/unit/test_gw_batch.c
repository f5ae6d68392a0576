/* test_gw_batch.c - the gateway's V2 batching functions
 * (src/gateway/batch.c): which requests may share a batch, the strict
 * parser's errors (each names its field), concatenation along the first
 * dimension and the split of an answer back to each request's own rows. */
#include <check.h>
#include <string.h>

#include "gateway/batch.h"

static gw_v2_t *parse(const char *model, const char *body)
{
    crater_error_t err;
    gw_v2_t *r = gw__v2_parse(model, body, strlen(body), &err);

    ck_assert_msg(r != NULL, "%s", err.text);
    return r;
}

/* A one-input FP32 request: rows x 2, values start, start+1, ... */
static gw_v2_t *req2(const char *id, int rows, int start)
{
    char body[1024], data[512] = "";
    size_t o = 0;

    for (int i = 0; i < rows * 2; i++)
        o += (size_t)snprintf(data + o,
                              sizeof data - o,
                              "%s%d",
                              i ? "," : "",
                              start + i);
    snprintf(body,
             sizeof body,
             "{%s%s%s\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
             "\"shape\":[%d,2],\"data\":[%s]}]}",
             id ? "\"id\":\"" : "",
             id ? id : "",
             id ? "\"," : "",
             rows,
             data);
    return parse("m", body);
}

static void expect_error(const char *body,
                         crater_errno_t code,
                         const char *field)
{
    crater_error_t err;
    gw_v2_t *r = gw__v2_parse("m", body, strlen(body), &err);

    ck_assert_msg(r == NULL, "accepted: %s", body);
    ck_assert_int_eq(err.errnum, code);
    ck_assert_str_eq(err.field, field);
    ck_assert_ptr_nonnull(strstr(err.text, field));
}

START_TEST(keys_group_compatible_requests)
{
    gw_v2_t *a = req2(NULL, 1, 0), *b = req2("b", 3, 10);
    gw_v2_t *c = parse("m",
                       "{\"inputs\":[{\"name\":\"x\",\"datatype\":"
                       "\"FP32\",\"shape\":[1,3],\"data\":[1,2,3]}]}");
    gw_v2_t *d = parse("m",
                       "{\"inputs\":[{\"name\":\"x\",\"datatype\":"
                       "\"INT32\",\"shape\":[1,2],\"data\":[1,2]}]}");
    gw_v2_t *e = parse("other",
                       "{\"inputs\":[{\"name\":\"x\",\"datatype\":"
                       "\"FP32\",\"shape\":[1,2],\"data\":[1,2]}]}");
    gw_v2_t *f = parse("m",
                       "{\"inputs\":[{\"name\":\"x\",\"datatype\":"
                       "\"FP32\",\"shape\":[1,2],\"data\":[[1,2]]}],"
                       "\"outputs\":[{\"name\":\"y\"}]}");

    ck_assert_int_eq(a->rows, 1);
    ck_assert_int_eq(b->rows, 3);
    ck_assert_str_eq(a->key, b->key); /* rows and id do not matter */
    ck_assert_str_ne(a->key, c->key); /* another row shape */
    ck_assert_str_ne(a->key, d->key); /* another datatype */
    ck_assert_str_ne(a->key, e->key); /* another model */
    ck_assert_str_ne(a->key, f->key); /* other requested outputs */
    gw__v2_free(a);
    gw__v2_free(b);
    gw__v2_free(c);
    gw__v2_free(d);
    gw__v2_free(e);
    gw__v2_free(f);
}
END_TEST

START_TEST(unbatchable_requests_have_no_key)
{
    gw_v2_t *scalar = parse("m",
                            "{\"inputs\":[{\"name\":\"x\",\"datatype\":"
                            "\"FP32\",\"shape\":[],\"data\":[1]}]}");
    gw_v2_t *ragged = parse("m",
                            "{\"inputs\":[{\"name\":\"a\",\"datatype\":"
                            "\"FP32\","
                            "\"shape\":[2],\"data\":[1,2]},{\"name\":\"b\","
                            "\"datatype\":\"FP32\",\"shape\":[3],\"data\":[1,2,"
                            "3]}]}");
    gw_v2_t *empty = parse("m",
                           "{\"inputs\":[{\"name\":\"x\",\"datatype\":"
                           "\"FP32\",\"shape\":[0,4],\"data\":[]}]}");

    ck_assert_ptr_null(scalar->key);
    ck_assert_ptr_null(ragged->key);
    ck_assert_ptr_null(empty->key);
    gw__v2_free(scalar);
    gw__v2_free(ragged);
    gw__v2_free(empty);
}
END_TEST

START_TEST(parse_errors_name_the_field)
{
    expect_error("{\"inputs\":[", CRATER_EPARSE, "body");
    expect_error("[]", CRATER_ETYPE, "body");
    expect_error("{}", CRATER_EMISSING, "inputs");
    expect_error("{\"inputs\":[],\"x\":1}", CRATER_EFIELD, "x");
    expect_error("{\"inputs\":[]}", CRATER_ETYPE, "inputs");
    expect_error("{\"inputs\":[{\"datatype\":\"FP32\",\"shape\":[1],"
                 "\"data\":[1]}]}",
                 CRATER_EMISSING,
                 "inputs[0].name");
    expect_error("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FLOAT\","
                 "\"shape\":[1],\"data\":[1]}]}",
                 CRATER_EINVAL,
                 "inputs[0].datatype");
    expect_error("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
                 "\"shape\":[2,2],\"data\":[1,2,3]}]}",
                 CRATER_EINVAL,
                 "inputs[0].data");
    expect_error("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT8\","
                 "\"shape\":[2],\"data\":[1,\"a\"]}]}",
                 CRATER_ETYPE,
                 "inputs[0].data");
    expect_error("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
                 "\"shape\":[-1],\"data\":[]}]}",
                 CRATER_ETYPE,
                 "inputs[0].shape");
    expect_error("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
                 "\"shape\":[1],\"data\":[1],\"extra\":0}]}",
                 CRATER_EFIELD,
                 "inputs[0].extra");
    expect_error("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
                 "\"shape\":[1],\"data\":[1]},{\"name\":\"x\",\"datatype\":"
                 "\"FP32\",\"shape\":[1],\"data\":[1]}]}",
                 CRATER_EINVAL,
                 "inputs[1].name");
    expect_error("{\"id\":5,\"inputs\":[]}", CRATER_ETYPE, "id");
}
END_TEST

START_TEST(concat_then_split_gives_each_its_rows)
{
    gw_v2_t *r[3] = {req2("a", 1, 0), req2(NULL, 2, 100), req2("c", 1, 200)};
    crater_error_t err;
    size_t len, lens[3];
    char *body = gw__v2_concat(r, 3, &len, &err), *bodies[3];
    json_t *j = json_loads(body, 0, NULL),
           *in = json_array_get(json_object_get(j, "inputs"), 0);
    const char *answer = "{\"model_name\":\"m\",\"id\":\"batch\",\"outputs\":[{"
                         "\"name\":\"y\","
                         "\"datatype\":\"FP32\",\"shape\":[4,1],\"data\":[0,1,"
                         "2,3]}]}";

    ck_assert_ptr_nonnull(body);
    ck_assert_uint_eq(len, strlen(body));
    ck_assert_int_eq(json_integer_value(
                         json_array_get(json_object_get(in, "shape"), 0)),
                     4);
    ck_assert_uint_eq(json_array_size(json_object_get(in, "data")), 8);
    ck_assert_int_eq(json_integer_value(
                         json_array_get(json_object_get(in, "data"), 2)),
                     100); /* request 1's first value after request 0's two */
    json_decref(j);
    free(body);
    ck_assert_int_eq(gw__v2_split(answer,
                                  strlen(answer),
                                  r,
                                  3,
                                  bodies,
                                  lens,
                                  &err),
                     0);
    ck_assert_str_eq(bodies[0],
                     "{\"model_name\":\"m\",\"id\":\"a\",\"outputs\":"
                     "[{\"name\":\"y\",\"datatype\":\"FP32\","
                     "\"shape\":[1,1],\"data\":[0]}]}");
    ck_assert_str_eq(bodies[1],
                     "{\"model_name\":\"m\",\"outputs\":[{\"name\":"
                     "\"y\",\"datatype\":\"FP32\",\"shape\":[2,1],"
                     "\"data\":[1,2]}]}");
    ck_assert_ptr_nonnull(strstr(bodies[2], "\"data\":[3]"));
    for (int i = 0; i < 3; i++) {
        free(bodies[i]);
        gw__v2_free(r[i]);
    }
}
END_TEST

START_TEST(split_and_concat_errors)
{
    gw_v2_t *r[2] = {req2(NULL, 1, 0), req2(NULL, 2, 0)};
    gw_v2_t *other = parse("m",
                           "{\"inputs\":[{\"name\":\"x\",\"datatype\":"
                           "\"FP32\",\"shape\":[1,3],\"data\":[1,2,3]}]}");
    gw_v2_t *mixed[2] = {r[0], other};
    crater_error_t err;
    char *bodies[2];
    size_t lens[2], len;
    const char *short_ans = "{\"outputs\":[{\"name\":\"y\",\"datatype\":"
                            "\"FP32\",\"shape\":[2],\"data\":[1,2]}]}";
    const char *bad_count = "{\"outputs\":[{\"name\":\"y\",\"datatype\":"
                            "\"FP32\",\"shape\":[3],\"data\":[1,2]}]}";

    ck_assert_ptr_null(gw__v2_concat(mixed, 2, &len, &err));
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_int_eq(gw__v2_split(short_ans,
                                  strlen(short_ans),
                                  r,
                                  2,
                                  bodies,
                                  lens,
                                  &err),
                     -1);
    ck_assert_str_eq(err.field, "outputs[0].shape");
    ck_assert_int_eq(gw__v2_split(bad_count,
                                  strlen(bad_count),
                                  r,
                                  2,
                                  bodies,
                                  lens,
                                  &err),
                     -1);
    ck_assert_str_eq(err.field, "outputs[0].data");
    ck_assert_int_eq(gw__v2_split("{}", 2, r, 2, bodies, lens, &err), -1);
    ck_assert_str_eq(err.field, "outputs");
    ck_assert_int_eq(gw__v2_split("<html>", 6, r, 2, bodies, lens, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EPARSE);
    gw__v2_free(r[0]);
    gw__v2_free(r[1]);
    gw__v2_free(other);
    gw__v2_free(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gw_batch");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, keys_group_compatible_requests);
    tcase_add_test(tc, unbatchable_requests_have_no_key);
    tcase_add_test(tc, parse_errors_name_the_field);
    tcase_add_test(tc, concat_then_split_gives_each_its_rows);
    tcase_add_test(tc, split_and_concat_errors);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
