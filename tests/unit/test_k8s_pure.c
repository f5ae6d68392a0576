/* test_k8s_pure.c - the pure parts of the Kubernetes bridge: Kubernetes
 * quantities (exact, in thousandths; junk and overflow refused), reading
 * a v1.Pod's request (annotations over extended resources, requests over
 * limits, the init-container max rule, errors naming the field), the slice
 * environment of a placement, and the manifest `crater export k8s`
 * prints. The HTTP contract is tests/integration/test_k8s.sh. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/internal.h"
#include "net/k8s_env.h"

START_TEST(quantities)
{
    static const struct {
        const char *q;
        uint64_t milli;
    } ok[] = {
        {"500m", 500},
        {"2", 2000},
        {"0.5", 500},
        {"1.5Gi", 1610612736000ull},
        {"20Gi", 21474836480000ull},
        {"128974848", 128974848000ull},
        {"1k", 1000000},
        {".5", 500},
        {"0", 0},
    };
    static const char *const bad[] = {"",
                                      "lots",
                                      "1.2345",
                                      "-1",
                                      "1e3",
                                      "20GB",
                                      "99999999999999999999Ei",
                                      "m",
                                      "1..5",
                                      ".",
                                      ".Gi"};
    uint64_t v;

    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        ck_assert_msg(k8s_quantity_milli(ok[i].q, &v) == 0, "%s", ok[i].q);
        ck_assert_msg(v == ok[i].milli,
                      "%s: %llu",
                      ok[i].q,
                      (unsigned long long)v);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(k8s_quantity_milli(bad[i], &v) < 0, "'%s' taken", bad[i]);
}
END_TEST

static json_t *pod(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);

    ck_assert_msg(v != NULL, "%s", e.text);
    return v;
}

START_TEST(pod_request)
{
    json_t *p = pod("{\"metadata\": {\"name\": \"a\", \"uid\": \"u1\", "
                    "\"annotations\": "
                    "{\"crater.io/gpu-memory\": \"20Gi\"}}, \"spec\": {"
                    "\"initContainers\": [{\"resources\": {\"requests\": "
                    "{\"cpu\": "
                    "\"8\"}}}], \"containers\": [{\"resources\": "
                    "{\"requests\": {\"cpu\": "
                    "\"2\", \"memory\": \"4Gi\"}, \"limits\": {\"memory\": "
                    "\"8Gi\", "
                    "\"crater.io/gpu-memory\": \"10Gi\"}}}, {\"resources\": "
                    "{\"limits\": "
                    "{\"cpu\": \"500m\", \"memory\": \"1Gi\"}}}]}}");
    k8s_pod_t r;
    crater_error_t err = {0};

    ck_assert_int_eq(k8s_pod_read(p, &r, &err), 0);
    ck_assert_str_eq(r.ns, "default");
    ck_assert_uint_eq(r.cpu_milli, 8000);            /* init container wins */
    ck_assert_uint_eq(r.mem_bytes, 5ull << 30);      /* 4Gi request + 1Gi */
    ck_assert_uint_eq(r.gpu_mem_bytes, 20ull << 30); /* the annotation */
    ck_assert_uint_eq(r.gpus, 1);
    json_decref(p);
    p = pod("{\"metadata\": {\"name\": \"a\"}, \"spec\": {\"containers\": "
            "[{}, {\"resources\": {\"requests\": {\"memory\": 5}}}, "
            "{\"resources\": {\"requests\": {\"cpu\": true}}}]}}");
    ck_assert_int_eq(k8s_pod_read(p, &r, &err), -1);
    ck_assert_str_eq(err.field,
                     "Pod.spec.containers[2].resources.requests.cpu");
    json_decref(p);
    p = pod("{\"metadata\": [], \"spec\": {}}");
    ck_assert_int_eq(k8s_pod_read(p, &r, &err), -1);
    ck_assert_str_eq(err.field, "Pod.metadata");
    json_decref(p);
}
END_TEST

static const char *env_of(json_t *env, const char *name)
{
    size_t i;
    json_t *e;

    json_array_foreach(env, i, e) if (
        !strcmp(json_string_value(json_object_get(e, "name")),
                name)) return json_string_value(json_object_get(e, "value"));
    return NULL;
}

START_TEST(slice_env)
{
    json_t *pl = pod("{\"node\": \"n\", \"whole_gpus\": false, \"gpus\": "
                     "[{\"uuid\": \"GPU-a\"}, {\"uuid\": \"GPU-b\"}]}");
    json_t *env = crater__k8s_slice_env(pl, 123, "uid7");

    ck_assert_str_eq(env_of(env, "CUDA_VISIBLE_DEVICES"), "GPU-a,GPU-b");
    ck_assert_str_eq(env_of(env, "CRATER_GPUSLICE_FILE"),
                     "/dev/shm/crater-k8s-uid7.slice");
    ck_assert_str_eq(env_of(env, "CRATER_GPUSLICE_CTX_OVERHEAD"), "123");
    json_decref(env);
    json_object_set_new(pl, "whole_gpus", json_true());
    env = crater__k8s_slice_env(pl, 123, "uid7");
    ck_assert_ptr_null(env_of(env, "LD_PRELOAD"));
    ck_assert_uint_eq(json_array_size(env), 2);
    json_decref(env);
    json_object_set_new(pl, "gpus", json_array());
    env = crater__k8s_slice_env(pl, 123, "uid7");
    ck_assert_uint_eq(json_array_size(env), 0);
    json_decref(env);
    json_decref(pl);
}
END_TEST

START_TEST(manifest)
{
    crater_jobspec_t spec = {0};
    char *cmd[] = {"python", "t.py", NULL};
    json_t *m, *job, *want;

    spec.name = "Train_BERT";
    spec.command = cmd;
    spec.resources.cpu_milli = 1500;
    spec.resources.memory_bytes = 1ull << 30;
    spec.resources.gpu.count = 2;
    m = crater__k8s_manifest(&spec, NULL, 0);
    ck_assert_str_eq(json_string_value(json_object_get(m, "kind")), "Pod");
    ck_assert_str_eq(json_string_value(
                         json_object_get(json_object_get(m, "metadata"),
                                         "name")),
                     "train-bert");
    want = pod("{\"requests\": {\"cpu\": \"1500m\", \"memory\": "
               "\"1073741824\"}, \"limits\": {\"nvidia.com/gpu\": \"2\"}}");
    ck_assert(json_equal(
        json_object_get(json_array_get(json_object_get(json_object_get(m,
                                                                       "spec"),
                                                       "containers"),
                                       0),
                        "resources"),
        want));
    json_decref(want);
    json_decref(m);
    spec.replicas = 3;
    job = pod("{\"replicas\": [{\"placement\": {\"node\": \"a\"}}, "
              "{\"placement\": {\"node\": \"b\"}}, {\"placement\": "
              "{\"node\": \"a\"}}]}");
    m = crater__k8s_manifest(&spec, job, 0);
    ck_assert_str_eq(json_string_value(json_object_get(m, "kind")), "Job");
    ck_assert_int_eq(json_integer_value(
                         json_object_get(json_object_get(m, "spec"),
                                         "completions")),
                     3);
    want = pod("{\"nodeAffinity\": {\"requiredDuringScheduling"
               "IgnoredDuringExecution\": {\"nodeSelectorTerms\": [{"
               "\"matchExpressions\": [{\"key\": \"kubernetes.io/hostname\","
               " \"operator\": \"In\", \"values\": [\"a\", \"b\"]}]}]}}}");
    ck_assert(json_equal(
        json_object_get(json_object_get(json_object_get(json_object_get(m,
                                                                        "spec"),
                                                        "template"),
                                        "spec"),
                        "affinity"),
        want));
    json_decref(want);
    json_decref(m);
    json_decref(job);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("k8s");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, quantities);
    tcase_add_test(tc, pod_request);
    tcase_add_test(tc, slice_env);
    tcase_add_test(tc, manifest);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failures;

    srunner_run_all(sr, CK_NORMAL);
    failures = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
