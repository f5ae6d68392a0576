/* test_ctr.c - the pure parts of containers (src/agent/container.c):
 * podman's exact command line for a task (limits through the task's
 * cgroup, the task user, volumes, devices, the command replacing the
 * entrypoint, variables never on the command line), the container's
 * name, and the CDI spec generated from a node's GPUs (the stub NVML has
 * no device nodes, so the file's content is what is checked). */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "agent/container.h"
#include "crater/dec.h"

static size_t find(char **v, const char *s)
{
    for (size_t i = 0; v[i]; i++)
        if (strcmp(v[i], s) == 0)
            return i;
    return (size_t)-1;
}

/* v has flag immediately followed by value. */
static void has_pair(char **v, const char *flag, const char *value)
{
    size_t i = find(v, flag);

    ck_assert_msg(i != (size_t)-1, "no %s", flag);
    ck_assert_str_eq(v[i + 1], value);
}

static ctr_run_t sample(void)
{
    static char *argv[] = {"sh", "-c", "echo hi", NULL};
    static const char *const mounts[] = {"/srv/data:/data:ro",
                                         "/var/ckpt:/var/ckpt",
                                         NULL};
    static const char *const devs[] = {"/dev/nvidia1", NULL};

    return (ctr_run_t){
        .podman = "/usr/bin/podman",
        .oci_runtime = "runc",
        .init = true,
        .name = "crater-0000abcd-17-2",
        .agent_label = "0000abcd",
        .cgroup_parent = "/crater/job-17-2-deadbeef",
        .env_file = "/var/agent/tasks/17.2/ctr.env",
        .workdir = "/work",
        .set_user = true,
        .uid = 200001,
        .gid = 200002,
        .nofile = 20000,
        .nproc = 32768,
        .pull = CRATER_PULL_NEVER,
        .mounts = mounts,
        .devices = devs,
        .image = "localhost/x:1",
        .argv = argv,
    };
}

START_TEST(argv_for_a_task)
{
    ctr_run_t r = sample();
    char **v = ctr_argv(&r);
    size_t img, n = crater_strv_len(v);

    ck_assert_ptr_nonnull(v);
    ck_assert_str_eq(v[0], "/usr/bin/podman");
    has_pair(v, "--runtime", "runc");
    has_pair(v, "--cgroup-manager", "cgroupfs");
    ck_assert_uint_lt(find(v, "--runtime"), find(v, "run")); /* global */
    has_pair(v, "--name", "crater-0000abcd-17-2");
    ck_assert_uint_ne(find(v, "--label=crater.agent=0000abcd"), (size_t)-1);
    has_pair(v, "--pull", "never");
    has_pair(v, "--cgroup-parent", "/crater/job-17-2-deadbeef");
    has_pair(v, "--cgroups", "no-conmon");
    ck_assert_uint_ne(find(v, "--init"), (size_t)-1);
    ck_assert_uint_ne(find(v, "--ulimit=nofile=20000:20000"), (size_t)-1);
    ck_assert_uint_ne(find(v, "--ulimit=nproc=32768:32768"), (size_t)-1);
    ck_assert_uint_ne(find(v, "--user=200001:200002"), (size_t)-1);
    ck_assert_uint_ne(find(v, "--cap-drop=all"), (size_t)-1);
    ck_assert_uint_ne(find(v, "--security-opt=no-new-privileges"), (size_t)-1);
    has_pair(v, "--env-file", "/var/agent/tasks/17.2/ctr.env");
    has_pair(v, "--workdir", "/work");
    has_pair(v, "--volume", "/srv/data:/data:ro");
    ck_assert_str_eq(v[find(v, "/srv/data:/data:ro") + 2],
                     "/var/ckpt:/var/ckpt");
    has_pair(v, "--device", "/dev/nvidia1");
    has_pair(v, "--entrypoint", "");
    /* the image, then the command, last */
    img = find(v, "localhost/x:1");
    ck_assert_uint_eq(img, n - 4);
    ck_assert_str_eq(v[n - 3], "sh");
    ck_assert_str_eq(v[n - 1], "echo hi");
    /* no variable on the command line, nothing through a shell */
    ck_assert_uint_eq(find(v, "-e"), (size_t)-1);
    ck_assert_uint_eq(find(v, "--env"), (size_t)-1);
    crater_strv_free(v);
}
END_TEST

/* Without a cgroup parent, user, command or extras: the image's own. */
START_TEST(argv_minimal)
{
    ctr_run_t r = {.podman = "podman",
                   .name = "n",
                   .agent_label = "1",
                   .image = "img"};
    char **v = ctr_argv(&r);
    size_t n = crater_strv_len(v);

    ck_assert_ptr_nonnull(v);
    ck_assert_str_eq(v[n - 1], "img");
    has_pair(v, "--pull", "missing");
    ck_assert_uint_eq(find(v, "--runtime"), (size_t)-1);
    ck_assert_uint_eq(find(v, "--cgroup-parent"), (size_t)-1);
    ck_assert_uint_eq(find(v, "--entrypoint"), (size_t)-1);
    ck_assert_uint_eq(find(v, "--init"), (size_t)-1);
    for (size_t i = 0; v[i]; i++)
        ck_assert_msg(strncmp(v[i], "--user", 6) != 0, "%s", v[i]);
    ck_assert_uint_eq(find(v, "--cap-drop=all"), (size_t)-1);
    crater_strv_free(v);
    ck_assert_str_eq(ctr_pull_arg(CRATER_PULL_ALWAYS), "always");
    ck_assert_str_eq(ctr_pull_arg(CRATER_PULL_IF_NOT_PRESENT), "missing");
}
END_TEST

START_TEST(names)
{
    char buf[96];

    ctr_name(buf, sizeof(buf), 0xabcd, "17", 2, 0);
    ck_assert_str_eq(buf, "crater-0000abcd-17-2");
    ctr_name(buf, sizeof(buf), 0xabcd, "17", 2, 3);
    ck_assert_str_eq(buf, "crater-0000abcd-17-2-r3");
    ck_assert_uint_eq(ctr_hash("/var/agent"), ctr_hash("/var/agent"));
    ck_assert_uint_ne(ctr_hash("/var/agent-0"), ctr_hash("/var/agent-1"));
}
END_TEST

/* Two GPUs: a device each, named by index, and the control nodes. */
START_TEST(cdi_spec)
{
    crater_gpu_t g[2] = {{.uuid = "GPU-a"}, {.uuid = "GPU-b"}};
    json_t *s = ctr_cdi_spec(g, 2), *devs, *d1;

    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(json_string_value(json_object_get(s, "cdiVersion")),
                     "0.5.0");
    ck_assert_str_eq(json_string_value(json_object_get(s, "kind")),
                     "nvidia.com/gpu");
    devs = json_object_get(s, "devices");
    ck_assert_uint_eq(json_array_size(devs), 2);
    d1 = json_array_get(devs, 1);
    ck_assert_str_eq(json_string_value(json_object_get(d1, "name")), "1");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(json_object_get(d1,
                                                                        "contai"
                                                                        "nerEdi"
                                                                        "ts"),
                                                        "deviceNodes"),
                                        0),
                         "path")),
                     "/dev/nvidia1");
    ck_assert_uint_eq(json_array_size(
                          json_object_get(json_object_get(s, "containerEdits"),
                                          "deviceNodes")),
                      3);
    json_decref(s);
    s = ctr_cdi_spec(NULL, 0);
    ck_assert_uint_eq(json_array_size(json_object_get(s, "devices")), 0);
    json_decref(s);
}
END_TEST

static Suite *container_suite(void)
{
    Suite *s = suite_create("container");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, argv_for_a_task);
    tcase_add_test(tc, argv_minimal);
    tcase_add_test(tc, names);
    tcase_add_test(tc, cdi_spec);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(container_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
