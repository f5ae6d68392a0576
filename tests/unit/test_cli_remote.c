/* test_cli_remote.c - the pure parts of the CLI's remote commands
 * (src/net/cli_pure.c): the job spec `crater run` builds from its flags,
 * where the server and token come from (flag > env > config file >
 * default) and config file errors, and the exact text of the tables,
 * describe and explain output for fixed API objects. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/cli_pure.h"

/* ---- helpers ------------------------------------------------------------ */

static char *compact(const json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
}

/* Parse a NULL-terminated argv; the spec as sorted compact JSON. */
static char *run_ok(cli_run_t *r, char **argv)
{
    crater_error_t err;
    int argc = 0;

    while (argv[argc])
        argc++;
    ck_assert_msg(cli_run_parse(argc, argv, r, &err) == 0, "%s", err.text);
    return r->spec ? compact(r->spec) : NULL;
}

static crater_error_t run_bad(char **argv)
{
    crater_error_t err;
    cli_run_t r;
    int argc = 0;

    while (argv[argc])
        argc++;
    ck_assert_int_eq(cli_run_parse(argc, argv, &r, &err), -1);
    ck_assert_ptr_null(r.spec);
    return err;
}

#define ARGV(...) ((char *[]){"run", __VA_ARGS__, NULL})

/* open_memstream capture of a print function's output. */
typedef struct capture {
    char *buf;
    size_t len;
    FILE *fp;
} capture_t;

static FILE *cap_open(capture_t *c)
{
    c->buf = NULL;
    c->fp = open_memstream(&c->buf, &c->len);
    ck_assert_ptr_nonnull(c->fp);
    return c->fp;
}

static char *cap_close(capture_t *c)
{
    fclose(c->fp);
    return c->buf;
}

/* ---- crater run ---------------------------------------------------------- */

START_TEST(run_minimal_gpu_slice)
{
    cli_run_t r;
    char *s = run_ok(&r,
                     ARGV("--gpu",
                          "1",
                          "--gpu-mem",
                          "20Gi",
                          "--",
                          "python",
                          "train.py",
                          "--lr",
                          "0.1"));

    ck_assert_str_eq(s,
                     "{\"apiVersion\":\"crater/v1\",\"command\":[\"python\","
                     "\"train.py\",\"--lr\",\"0.1\"],\"kind\":\"Job\","
                     "\"resources\":{\"gpu\":{\"count\":1,\"memory\":"
                     "\"20Gi\"}}}");
    ck_assert(!r.wait);
    ck_assert_ptr_null(r.server);
    ck_assert_ptr_null(r.output);
    free(s);
    json_decref(r.spec);
}
END_TEST

START_TEST(run_every_flag)
{
    cli_run_t r;
    char *s = run_ok(&r,
                     ARGV("--name",
                          "bert",
                          "--tenant=nlp",
                          "--cpu",
                          "4",
                          "--mem",
                          "16Gi",
                          "--gpu=2",
                          "--gpu-model",
                          "h100-sxm5-80gb",
                          "--gpu-model=a100-sxm4-80gb,h200-sxm-141gb",
                          "--priority-class",
                          "high",
                          "--priority",
                          "-5",
                          "--workload-type",
                          "training",
                          "--env",
                          "A=1",
                          "--env",
                          "B=x=y",
                          "--workdir",
                          "/data",
                          "--image",
                          "pytorch:2",
                          "--preemptible",
                          "--replicas",
                          "1",
                          "--grace-period",
                          "90s",
                          "--disk-iops",
                          "50k",
                          "--disk-bandwidth",
                          "500MB/s",
                          "--wait",
                          "--server",
                          "http://h:1",
                          "--token",
                          "crt_x",
                          "-o",
                          "json",
                          "--",
                          "torchrun",
                          "train.py"));

    ck_assert_str_eq(s,
                     "{\"apiVersion\":\"crater/v1\",\"command\":[\"torchrun\","
                     "\"train.py\"],\"env\":{\"A\":\"1\",\"B\":\"x=y\"},"
                     "\"gracePeriod\":\"90s\",\"image\":\"pytorch:2\",\"kind\":"
                     "\"Job\","
                     "\"name\":\"bert\",\"preemptible\":true,\"priority\":-5,"
                     "\"priorityClass\":\"high\",\"replicas\":1,\"resources\":{"
                     "\"cpu\":"
                     "\"4\",\"disk\":{\"bandwidth\":\"500MB/"
                     "s\",\"iops\":\"50k\"},"
                     "\"gpu\":{\"count\":2,\"model\":[\"h100-sxm5-80gb\","
                     "\"a100-sxm4-80gb\",\"h200-sxm-141gb\"]},\"memory\":"
                     "\"16Gi\"},"
                     "\"tenant\":\"nlp\",\"workdir\":\"/"
                     "data\",\"workloadType\":"
                     "\"training\"}");
    ck_assert(r.wait);
    ck_assert_str_eq(r.server, "http://h:1");
    ck_assert_str_eq(r.token, "crt_x");
    ck_assert_str_eq(r.output, "json");
    free(s);
    json_decref(r.spec);
}
END_TEST

START_TEST(run_cpu_only_keeps_args_verbatim)
{
    cli_run_t r;
    /* after "--" everything is the command, even things that look like
     * crater's own flags */
    char *s =
        run_ok(&r, ARGV("--cpu", "500m", "--", "echo", "--gpu", "2", "--"));

    ck_assert_str_eq(s,
                     "{\"apiVersion\":\"crater/v1\",\"command\":[\"echo\","
                     "\"--gpu\",\"2\",\"--\"],\"kind\":\"Job\","
                     "\"resources\":{\"cpu\":\"500m\"}}");
    free(s);
    json_decref(r.spec);
}
END_TEST

START_TEST(run_help)
{
    cli_run_t r;
    crater_error_t err;
    char *argv[] = {"run", "--gpu", "1", "--help", NULL};

    ck_assert_int_eq(cli_run_parse(4, argv, &r, &err), 0);
    ck_assert(r.help);
    ck_assert_ptr_null(r.spec);
}
END_TEST

START_TEST(run_unit_errors_name_the_flag)
{
    crater_error_t e = run_bad(ARGV("--gpu-mem", "20GB/s", "--", "x"));

    ck_assert_int_eq(e.errnum, CRATER_EUNIT);
    ck_assert_str_eq(e.field, "resources.gpu.memory");
    ck_assert_str_eq(e.text,
                     "--gpu-mem: '20GB/s': 'GB/s' is a bandwidth "
                     "unit, expected a memory size (e.g. 20Gi or "
                     "20GB)");
    e = run_bad(ARGV("--cpu", "4Gi", "--", "x"));
    ck_assert_int_eq(e.errnum, CRATER_EUNIT);
    ck_assert_str_eq(e.field, "resources.cpu");
    ck_assert(strncmp(e.text, "--cpu: '4Gi': ", 14) == 0);
    e = run_bad(ARGV("--mem=lots", "--", "x"));
    ck_assert(strncmp(e.text, "--mem: 'lots'", 13) == 0);
    /* issue 11: --mem 512 meant 512 bytes; Slurm users mean megabytes */
    e = run_bad(ARGV("--mem", "512", "--", "x"));
    ck_assert_int_eq(e.errnum, CRATER_EUNIT);
    ck_assert_str_eq(e.field, "resources.memory");
    ck_assert_str_eq(e.text, "--mem: '512' has no unit: write 512Mi or 512M");
    e = run_bad(ARGV("--gpu", "1", "--gpu-mem=20480", "--", "x"));
    ck_assert_str_eq(e.field, "resources.gpu.memory");
    ck_assert_str_eq(e.text,
                     "--gpu-mem: '20480' has no unit: write 20480Mi or "
                     "20480M");
    e = run_bad(ARGV("--gpu", "-1", "--", "x"));
    ck_assert_str_eq(e.text, "--gpu: '-1' is not a non-negative integer");
    e = run_bad(ARGV("--priority", "1x", "--", "x"));
    ck_assert_str_eq(e.text, "--priority: '1x' is not an integer");
    e = run_bad(ARGV("--grace-period", "10GB", "--", "x"));
    ck_assert(strncmp(e.text, "--grace-period: '10GB'", 22) == 0);
}
END_TEST

START_TEST(run_decoder_errors_name_the_flag)
{
    crater_error_t e = run_bad(ARGV("--name", "Bad_Name", "--", "x"));

    ck_assert_str_eq(e.field, "name");
    ck_assert_str_eq(e.text,
                     "--name: not a valid name: use 1-63 of a-z 0-9 "
                     "- . starting and ending with a-z or 0-9");
    e = run_bad(ARGV("--gpu", "1", "--gpu-model", "a100-80gb", "--", "x"));
    ck_assert_str_eq(e.field, "resources.gpu.model");
    ck_assert(strncmp(e.text, "--gpu-model: unknown GPU model 'a100-80gb'", 41)
              == 0);
    e = run_bad(ARGV("--gpu", "0", "--gpu-mem", "20Gi", "--", "x"));
    ck_assert_int_eq(e.errnum, CRATER_ECONFLICT);
    ck_assert(strncmp(e.text, "--gpu-mem: ", 11) == 0);
    e = run_bad(ARGV("--workload-type", "serving", "--", "x"));
    ck_assert(strncmp(e.text, "--workload-type: ", 17) == 0);
    e = run_bad(ARGV("--priority-class", "urgent", "--", "x"));
    ck_assert(strncmp(e.text, "--priority-class: ", 18) == 0);
    e = run_bad(ARGV("--env", "CUDA_VISIBLE_DEVICES=0", "--", "x"));
    ck_assert(strncmp(e.text, "--env: ", 7) == 0);
    e = run_bad(ARGV("--workdir", "relative/dir", "--", "x"));
    ck_assert(strncmp(e.text, "--workdir: ", 11) == 0);
}
END_TEST

START_TEST(run_usage_errors)
{
    crater_error_t e = run_bad(ARGV("--gpu", "1"));

    ck_assert_int_eq(e.errnum, CRATER_EINVAL);
    ck_assert_str_eq(e.text,
                     "missing '--' before the command: write crater "
                     "run [OPTIONS] -- COMMAND [ARGS...]");
    e = run_bad(ARGV("--gpu", "1", "--"));
    ck_assert_str_eq(e.text,
                     "no command: write crater run [OPTIONS] -- "
                     "COMMAND [ARGS...]");
    e = run_bad(ARGV("python", "train.py"));
    ck_assert_str_eq(e.text,
                     "unexpected argument 'python': put the command "
                     "after --");
    e = run_bad(ARGV("--gpus", "2", "--", "x"));
    ck_assert_str_eq(e.text, "unknown option '--gpus'");
    e = run_bad(ARGV("--gpu", "1", "--gpu", "2", "--", "x"));
    ck_assert_str_eq(e.text, "--gpu given twice");
    e = run_bad(ARGV("--gpu", "--", "x"));
    ck_assert_str_eq(e.text, "--gpu needs a value");
    e = run_bad(ARGV("--wait=yes", "--", "x"));
    ck_assert_str_eq(e.text, "--wait takes no value");
    e = run_bad(ARGV("--env", "NOVALUE", "--", "x"));
    ck_assert_str_eq(e.text, "--env: 'NOVALUE' is not NAME=VALUE");
    e = run_bad(ARGV("--env", "A=1", "--env", "A=2", "--", "x"));
    ck_assert_str_eq(e.text, "--env: A given twice");
    e = run_bad(ARGV("--gpu-model", "h100-sxm5-80gb,", "--", "x"));
    ck_assert_str_eq(e.text, "--gpu-model: empty entry in 'h100-sxm5-80gb,'");
    e = run_bad(ARGV("--disk", "50Gi", "--", "x"));
    ck_assert_str_eq(e.text,
                     "--disk: a job spec has no disk size; use "
                     "--disk-iops and --disk-bandwidth");
}
END_TEST

/* ---- connection settings ------------------------------------------------- */

static char tmpdir[64];

static void make_tmp(void)
{
    strcpy(tmpdir, "/tmp/test_cli_remote.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

/* Write dir/rel (creating dir/crater) with text. Returns the path. */
static const char *write_conf(const char *dir, const char *text)
{
    static char path[256];
    char d[200];
    FILE *fp;

    snprintf(d, sizeof(d), "%s/crater", dir);
    mkdir(dir, 0700);
    mkdir(d, 0700);
    snprintf(path, sizeof(path), "%s/config", d);
    fp = fopen(path, "w");
    ck_assert_ptr_nonnull(fp);
    fputs(text, fp);
    fclose(fp);
    return path;
}

static void rm_tmp(void)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(conn_default)
{
    cli_conn_in_t in = {.home = "/nonexistent-home"};
    crater_error_t err;
    cli_conn_t c;

    ck_assert_int_eq(cli_conn_resolve(&in, &c, &err), 0);
    ck_assert_str_eq(c.server, "http://127.0.0.1:7480");
    ck_assert_str_eq(c.server_from, "default");
    ck_assert_str_eq(c.token, "");
}
END_TEST

START_TEST(conn_precedence)
{
    char xdg[128];
    const char *path;
    cli_conn_in_t in = {0};
    crater_error_t err;
    cli_conn_t c;

    make_tmp();
    snprintf(xdg, sizeof(xdg), "%s/xdg", tmpdir);
    path = write_conf(xdg,
                      "# mine\nserver: http://file.example:7480/\n"
                      "token: crt_file\n");
    in.xdg_config_home = xdg;
    in.home = "/nonexistent-home";
    /* file > default */
    ck_assert_int_eq(cli_conn_resolve(&in, &c, &err), 0);
    ck_assert_str_eq(c.server, "http://file.example:7480");
    ck_assert_str_eq(c.server_from, path);
    ck_assert_str_eq(c.token, "crt_file");
    /* env > file, each setting on its own */
    in.env_server = "http://env:1";
    ck_assert_int_eq(cli_conn_resolve(&in, &c, &err), 0);
    ck_assert_str_eq(c.server, "http://env:1");
    ck_assert_str_eq(c.server_from, "CRATER_SERVER");
    ck_assert_str_eq(c.token, "crt_file");
    in.env_token = "crt_env";
    ck_assert_int_eq(cli_conn_resolve(&in, &c, &err), 0);
    ck_assert_str_eq(c.token, "crt_env");
    /* flag > env */
    in.flag_server = "https://flag:2";
    in.flag_token = "crt_flag";
    ck_assert_int_eq(cli_conn_resolve(&in, &c, &err), 0);
    ck_assert_str_eq(c.server, "https://flag:2");
    ck_assert_str_eq(c.server_from, "--server");
    ck_assert_str_eq(c.token, "crt_flag");
    /* empty values count as unset */
    in.flag_server = "";
    in.env_server = "";
    ck_assert_int_eq(cli_conn_resolve(&in, &c, &err), 0);
    ck_assert_str_eq(c.server, "http://file.example:7480");
    rm_tmp();
}
END_TEST

START_TEST(conn_home_and_xdg)
{
    char home[128], buf[256];
    crater_error_t err;
    cli_conn_t c;

    make_tmp();
    snprintf(home, sizeof(home), "%s/home", tmpdir);
    mkdir(home, 0700);
    snprintf(buf, sizeof(buf), "%s/.config", home);
    write_conf(buf, "server: http://home:3\n");
    ck_assert_int_eq(cli_config_path(home, "", buf, sizeof(buf)), 0);
    ck_assert(strstr(buf, "/home/.config/crater/config") != NULL);
    ck_assert_int_eq(cli_config_path(home, "/x", buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "/x/crater/config");
    ck_assert_int_eq(cli_config_path(NULL, NULL, buf, sizeof(buf)), -1);
    /* through the environment, as the CLI reads it */
    setenv("HOME", home, 1);
    unsetenv("XDG_CONFIG_HOME");
    unsetenv("CRATER_SERVER");
    setenv("CRATER_TOKEN", "crt_envvar", 1);
    ck_assert_int_eq(cli_conn_from_env(NULL, NULL, &c, &err), 0);
    ck_assert_str_eq(c.server, "http://home:3");
    ck_assert_str_eq(c.token, "crt_envvar");
    /* XDG_CONFIG_HOME wins over HOME: an empty directory there means no
     * file at all, so the default */
    setenv("XDG_CONFIG_HOME", tmpdir, 1);
    ck_assert_int_eq(cli_conn_from_env(NULL, NULL, &c, &err), 0);
    ck_assert_str_eq(c.server, "http://127.0.0.1:7480");
    unsetenv("CRATER_TOKEN");
    unsetenv("XDG_CONFIG_HOME");
    rm_tmp();
}
END_TEST

static crater_error_t conf_bad(const char *text, char *path, size_t size)
{
    cli_conn_in_t in = {.home = "/nonexistent-home"};
    char xdg[128];
    crater_error_t err;
    cli_conn_t c;

    snprintf(xdg, sizeof(xdg), "%s/xdg", tmpdir);
    snprintf(path, size, "%s", write_conf(xdg, text));
    in.xdg_config_home = xdg;
    in.flag_server = "http://flag:1"; /* the file is checked anyway */
    ck_assert_int_eq(cli_conn_resolve(&in, &c, &err), -1);
    return err;
}

START_TEST(conn_file_errors)
{
    char path[256], want[512];
    crater_error_t e;

    make_tmp();
    e = conf_bad("server: http://a:1\ntokn: crt_x\n", path, sizeof(path));
    ck_assert_int_eq(e.errnum, CRATER_EFIELD);
    snprintf(want,
             sizeof(want),
             "%s:2:1: tokn: unknown field 'tokn' (did you mean 'token'?)",
             path);
    ck_assert_str_eq(e.text, want);
    e = conf_bad("server: 127.0.0.1:7480\n", path, sizeof(path));
    snprintf(want,
             sizeof(want),
             "%s:1:1: server: '127.0.0.1:7480' is not an http:// or https:// "
             "URL",
             path);
    ck_assert_str_eq(e.text, want);
    e = conf_bad("token: 12\n", path, sizeof(path));
    ck_assert_int_eq(e.errnum, CRATER_ETYPE);
    snprintf(want, sizeof(want), "%s:1:1: token: expected a string, got", path);
    ck_assert(strncmp(e.text, want, strlen(want)) == 0);
    e = conf_bad("- a\n- b\n", path, sizeof(path));
    ck_assert_int_eq(e.errnum, CRATER_ETYPE);
    e = conf_bad("server: http://a:1\n---\ntoken: x\n", path, sizeof(path));
    snprintf(want,
             sizeof(want),
             "%s: one YAML document expected, found 2",
             path);
    ck_assert_str_eq(e.text, want);
    rm_tmp();
}
END_TEST

START_TEST(conn_bad_flag_and_env)
{
    cli_conn_in_t in = {.home = "/nonexistent-home",
                        .env_server = "localhost:7480"};
    crater_error_t err;
    cli_conn_t c;

    ck_assert_int_eq(cli_conn_resolve(&in, &c, &err), -1);
    ck_assert_str_eq(err.text,
                     "CRATER_SERVER: 'localhost:7480' is not an "
                     "http:// or https:// URL");
    in.flag_server = "ftp://x";
    ck_assert_int_eq(cli_conn_resolve(&in, &c, &err), -1);
    ck_assert_str_eq(err.text,
                     "--server: 'ftp://x' is not an http:// or https:// URL");
}
END_TEST

/* Issue 11: `crater up --listen` on another port must still be found by
 * the CLI: up writes the URL to var/server, read after the config file. */
static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");

    ck_assert_ptr_nonnull(fp);
    fputs(text, fp);
    fclose(fp);
}

START_TEST(conn_finds_crater_up)
{
    char srv[128], tok[128], xdg[128];
    cli_conn_in_t in = {.home = "/nonexistent-home"};
    crater_error_t err;
    cli_conn_t c;

    make_tmp();
    snprintf(srv, sizeof(srv), "%s/server", tmpdir);
    snprintf(tok, sizeof(tok), "%s/admin.token", tmpdir);
    in.local_server_file = srv;
    in.local_token_file = tok;
    /* no file yet: the default, with the local token (loopback) */
    write_file(tok, "crt_up\n");
    ck_assert_int_eq(cli_conn_resolve(&in, &c, &err), 0);
    ck_assert_str_eq(c.server, "http://127.0.0.1:7480");
    ck_assert_str_eq(c.token, "crt_up");
    /* crater up --listen 127.0.0.1:9123 */
    write_file(srv, "http://127.0.0.1:9123\n");
    ck_assert_int_eq(cli_conn_resolve(&in, &c, &err), 0);
    ck_assert_str_eq(c.server, "http://127.0.0.1:9123");
    ck_assert_str_eq(c.server_from, srv);
    ck_assert_str_eq(c.token, "crt_up");
    /* crater up --listen 10.1.2.3:9123: not loopback, but its own token */
    write_file(srv, "http://10.1.2.3:9123\n");
    ck_assert_int_eq(cli_conn_resolve(&in, &c, &err), 0);
    ck_assert_str_eq(c.server, "http://10.1.2.3:9123");
    ck_assert_str_eq(c.token, "crt_up");
    /* the environment and the config file still win */
    in.env_server = "http://env:1";
    ck_assert_int_eq(cli_conn_resolve(&in, &c, &err), 0);
    ck_assert_str_eq(c.server, "http://env:1");
    ck_assert_str_eq(c.token, "");
    in.env_server = NULL;
    snprintf(xdg, sizeof(xdg), "%s/xdg", tmpdir);
    write_conf(xdg, "server: http://file.example:7480\n");
    in.xdg_config_home = xdg;
    ck_assert_int_eq(cli_conn_resolve(&in, &c, &err), 0);
    ck_assert_str_eq(c.server, "http://file.example:7480");
    in.xdg_config_home = NULL;
    /* a damaged file is an error naming it */
    write_file(srv, "localhost:9123\n");
    ck_assert_int_eq(cli_conn_resolve(&in, &c, &err), -1);
    ck_assert(strstr(err.text, srv) != NULL);
    ck_assert(strstr(err.text, "'localhost:9123'") != NULL);
    rm_tmp();
}
END_TEST

START_TEST(local_url_of_listen)
{
    char b[64];

    ck_assert_int_eq(cli_local_url("127.0.0.1:7480", 7480, b, sizeof(b)), 0);
    ck_assert_str_eq(b, "http://127.0.0.1:7480");
    /* the bound port, not the asked one (":0" picks a free port) */
    ck_assert_int_eq(cli_local_url("127.0.0.1:0", 41234, b, sizeof(b)), 0);
    ck_assert_str_eq(b, "http://127.0.0.1:41234");
    ck_assert_int_eq(cli_local_url("0.0.0.0:9000", 9000, b, sizeof(b)), 0);
    ck_assert_str_eq(b, "http://127.0.0.1:9000");
    ck_assert_int_eq(cli_local_url(":9000", 9000, b, sizeof(b)), 0);
    ck_assert_str_eq(b, "http://127.0.0.1:9000");
    ck_assert_int_eq(cli_local_url("[::]:9000", 9000, b, sizeof(b)), 0);
    ck_assert_str_eq(b, "http://[::1]:9000");
    ck_assert_int_eq(cli_local_url("[::1]:9000", 9000, b, sizeof(b)), 0);
    ck_assert_str_eq(b, "http://[::1]:9000");
    ck_assert_int_eq(cli_local_url("10.1.2.3:9000", 9000, b, sizeof(b)), 0);
    ck_assert_str_eq(b, "http://10.1.2.3:9000");
    ck_assert_int_eq(cli_local_url("0.0:9000", 9000, b, sizeof(b)), 0);
    ck_assert_str_eq(b, "http://0.0:9000");
    ck_assert_int_eq(cli_local_url("nocolon", 1, b, sizeof(b)), -1);
    ck_assert_int_eq(cli_local_url("127.0.0.1:1", 1, b, 8), -1);
}
END_TEST

/* ---- job helpers ------------------------------------------------------------
 */

START_TEST(jobs_path_encodes)
{
    cli_jobs_filter_t f = {.state = "pending,running",
                           .tenant = "team a",
                           .limit = 10};
    crater_error_t err;
    char buf[256], tiny[20];

    ck_assert_int_eq(cli_jobs_path(&f, "c/17", buf, sizeof(buf), &err), 0);
    ck_assert_str_eq(buf,
                     "/api/v1/jobs?state=pending%2Crunning&tenant=team"
                     "%20a&limit=10&after=c%2F17");
    f = (cli_jobs_filter_t){.workload_type = "training"};
    ck_assert_int_eq(cli_jobs_path(&f, NULL, buf, sizeof(buf), &err), 0);
    ck_assert_str_eq(buf, "/api/v1/jobs?workloadType=training");
    f = (cli_jobs_filter_t){0};
    ck_assert_int_eq(cli_jobs_path(&f, NULL, buf, sizeof(buf), &err), 0);
    ck_assert_str_eq(buf, "/api/v1/jobs");
    f.state = "pending";
    ck_assert_int_eq(cli_jobs_path(&f, NULL, tiny, sizeof(tiny), &err), -1);
}
END_TEST

START_TEST(job_exit_status)
{
    json_t *j = json_loads("{\"state\":\"succeeded\",\"exit\":{\"code\":0,"
                           "\"signal\":0}}",
                           0,
                           NULL);

    ck_assert(cli_job_finished(j));
    ck_assert_int_eq(cli_job_exit_status(j), 0);
    json_decref(j);
    j = json_loads("{\"state\":\"failed\",\"exit\":{\"code\":3,\"signal\":0}}",
                   0,
                   NULL);
    ck_assert_int_eq(cli_job_exit_status(j), 3);
    json_decref(j);
    j = json_loads("{\"state\":\"failed\",\"exit\":{\"code\":0,\"signal\":9}}",
                   0,
                   NULL);
    ck_assert_int_eq(cli_job_exit_status(j), 137);
    json_decref(j);
    j = json_loads("{\"state\":\"cancelled\",\"exit\":null}", 0, NULL);
    ck_assert(cli_job_finished(j));
    ck_assert_int_eq(cli_job_exit_status(j), 1);
    json_decref(j);
    j = json_loads("{\"state\":\"running\"}", 0, NULL);
    ck_assert(!cli_job_finished(j));
    json_decref(j);
}
END_TEST

/* ---- submit: documents as written ------------------------------------- */

static char *span_text(const char *buf, cli_span_t sp)
{
    static char out[256];

    snprintf(out, sizeof(out), "%.*s", (int)sp.len, buf + sp.off);
    return out;
}

START_TEST(yaml_split_documents)
{
    static const char multi[] = "# two jobs\n"
                                "---\n"
                                "name: a\n"
                                "command: [python, t.py, --lr, 0.00002]\n"
                                "--- # second\n"
                                "name: b\n"
                                "...\n"
                                "---\n"
                                "# only a comment\n";
    static const char one[] = "name: a\nx: |\n  ---\n----: 1\n";
    static const char inl[] = "--- {name: a}\n--- {name: b}";
    cli_span_t sp[4];

    ck_assert_int_eq(cli_yaml_split(multi, strlen(multi), sp, 4), 2);
    ck_assert_str_eq(span_text(multi, sp[0]),
                     "---\nname: a\ncommand: [python, t.py, --lr, 0.00002]\n");
    ck_assert_str_eq(span_text(multi, sp[1]), "--- # second\nname: b\n...\n");
    /* one document without markers; "----" and an indented "---" are
     * content, not markers */
    ck_assert_int_eq(cli_yaml_split(one, strlen(one), sp, 4), 1);
    ck_assert_uint_eq(sp[0].off, 0);
    ck_assert_uint_eq(sp[0].len, strlen(one));
    /* content on the marker line, no final newline */
    ck_assert_int_eq(cli_yaml_split(inl, strlen(inl), sp, 4), 2);
    ck_assert_str_eq(span_text(inl, sp[1]), "--- {name: b}");
    ck_assert_int_eq(cli_yaml_split(inl, strlen(inl), sp, 1), -1);
    ck_assert_int_eq(cli_yaml_split("# nothing\n\n", 11, sp, 4), 0);
}
END_TEST

/* ---- text output
 * -------------------------------------------------------------- */

START_TEST(format_age)
{
    char b[16];

    ck_assert_str_eq(cli_format_age(0, b, sizeof(b)), "0s");
    ck_assert_str_eq(cli_format_age(-5000, b, sizeof(b)), "0s");
    ck_assert_str_eq(cli_format_age(59999, b, sizeof(b)), "59s");
    ck_assert_str_eq(cli_format_age(119999, b, sizeof(b)), "119s");
    ck_assert_str_eq(cli_format_age(120000, b, sizeof(b)), "2m");
    ck_assert_str_eq(cli_format_age(7199999, b, sizeof(b)), "119m");
    ck_assert_str_eq(cli_format_age(7200000, b, sizeof(b)), "2h");
    ck_assert_str_eq(cli_format_age(172799999, b, sizeof(b)), "47h");
    ck_assert_str_eq(cli_format_age(172800000, b, sizeof(b)), "2d");
    ck_assert_str_eq(cli_format_age(400LL * 86400000, b, sizeof(b)), "400d");
}
END_TEST

START_TEST(format_quantities)
{
    char b[32];

    ck_assert_str_eq(cli_format_bytes(0, b, sizeof(b)), "0");
    ck_assert_str_eq(cli_format_bytes(1023, b, sizeof(b)), "1023");
    ck_assert_str_eq(cli_format_bytes(1024, b, sizeof(b)), "1Ki");
    ck_assert_str_eq(cli_format_bytes(1536, b, sizeof(b)), "1.5Ki");
    ck_assert_str_eq(cli_format_bytes(20ull << 30, b, sizeof(b)), "20Gi");
    ck_assert_str_eq(cli_format_bytes(3ull << 39, b, sizeof(b)), "1.5Ti");
    ck_assert_str_eq(cli_format_bytes(80000000000ull, b, sizeof(b)), "74.5Gi");
    ck_assert_str_eq(cli_format_cores(8000, b, sizeof(b)), "8");
    ck_assert_str_eq(cli_format_cores(500, b, sizeof(b)), "0.5");
    ck_assert_str_eq(cli_format_cores(1250, b, sizeof(b)), "1.25");
    ck_assert_str_eq(cli_format_cores(1, b, sizeof(b)), "0.001");
    ck_assert_str_eq(cli_format_time(1764453600000, b, sizeof(b)),
                     "2025-11-29T22:00:00Z");
    ck_assert_str_eq(cli_format_time(0, b, sizeof(b)), "-");
}
END_TEST

#define NOW 1764453900000LL /* 5 minutes after 2025-11-29T22:00:00Z */

static const char jobs_json[] =
    "{\"items\": ["
    "{\"id\": \"17\", \"name\": \"train-bert\", \"tenant\": \"default\","
    " \"state\": \"running\", \"priority\": 1000,"
    " \"submitted_ms\": 1764453600000,"
    " \"placement\": {\"node\": \"node-a\", \"gpus\": [{\"index\": 0},"
    " {\"index\": 1}]}},"
    "{\"id\": \"18\", \"tenant\": \"nlp\", \"state\": \"pending\","
    " \"priority\": 0, \"submitted_ms\": 1764453890000, \"placement\": null,"
    " \"resources\": {\"gpus\": 8}},"
    "{\"id\": \"1234\", \"name\": \"old\", \"tenant\": \"default\","
    " \"state\": \"succeeded\", \"priority\": -5,"
    " \"submitted_ms\": 1764280800000,"
    " \"spec\": {\"resources\": {\"gpu\": {\"count\": 4}}}}"
    "], \"next\": null}";

START_TEST(jobs_table)
{
    json_t *v = json_loads(jobs_json, 0, NULL);
    capture_t c;

    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(cli_print_jobs(cap_open(&c),
                                    json_object_get(v, "items"),
                                    NOW),
                     0);
    ck_assert_str_eq(cap_close(&c),
                     "ID     NAME         TENANT    STATE       PRIORITY   "
                     "GPUS   NODE     "
                     "AGE\n"
                     "17     train-bert   default   running     1000       2   "
                     "   node-a   "
                     "5m\n"
                     "18     -            nlp       pending     0          8   "
                     "   -        "
                     "10s\n"
                     "1234   old          default   succeeded   -5         4   "
                     "   -        "
                     "2d\n");
    free(c.buf);
    /* an empty list is the header alone */
    json_t *empty = json_array();
    ck_assert_int_eq(cli_print_jobs(cap_open(&c), empty, NOW), 0);
    ck_assert_str_eq(cap_close(&c),
                     "ID   NAME   TENANT   STATE   PRIORITY   "
                     "GPUS   NODE   AGE\n");
    free(c.buf);
    json_decref(empty);
    json_decref(v);
}
END_TEST

static const char nodes_json[] =
    "{\"items\": ["
    "{\"name\": \"node-a\", \"state\": \"Ready\", \"cordoned\": false,"
    " \"capacity\": {\"gpus\": 8, \"gpu_memory_bytes\": 687194767360,"
    "  \"cpu_millis\": 128000, \"memory_bytes\": 1099511627776},"
    " \"allocated\": {\"gpus\": 2, \"gpu_memory_bytes\": 42949672960,"
    "  \"cpu_millis\": 16500, \"memory_bytes\": 137438953472},"
    " \"utilization\": {\"gpu\": 0.25, \"cpu\": 0.125, \"memory\": 0.1,"
    "  \"disk\": 0.0},"
    " \"jobs\": [\"17\", \"18\"]},"
    "{\"name\": \"node-b\", \"state\": \"NotReady\", \"cordoned\": true,"
    " \"reason\": \"bad fan\","
    " \"capacity\": {\"gpus\": 0, \"gpu_memory_bytes\": 0,"
    "  \"cpu_millis\": 64000, \"memory_bytes\": 274877906944},"
    " \"allocated\": {\"gpus\": 0, \"gpu_memory_bytes\": 0,"
    "  \"cpu_millis\": 0, \"memory_bytes\": 0},"
    " \"utilization\": {\"gpu\": 0, \"cpu\": 0.994, \"memory\": 0.5},"
    " \"jobs\": []}"
    "]}";

START_TEST(nodes_table)
{
    json_t *v = json_loads(nodes_json, 0, NULL);
    capture_t c;

    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(cli_print_nodes(cap_open(&c), json_object_get(v, "items")),
                     0);
    ck_assert_str_eq(cap_close(&c),
                     "NAME     STATE               GPUS   GPU-MEM      "
                     "CPU        MEM         JOBS\n"
                     "node-a   Ready               2/8    40Gi/640Gi   "
                     "16.5/128   128Gi/1Ti   2\n"
                     "node-b   NotReady,Cordoned   0/0    0/0          "
                     "0/64       0/256Gi     0\n");
    free(c.buf);
    json_decref(v);
}
END_TEST

START_TEST(top_table)
{
    json_t *v = json_loads(nodes_json, 0, NULL);
    capture_t c;

    ck_assert_int_eq(cli_print_top(cap_open(&c), json_object_get(v, "items")),
                     0);
    ck_assert_str_eq(cap_close(&c),
                     "NAME     STATE               GPU   GPU-MEM   CPU   MEM  "
                     " DISK\n"
                     "node-a   Ready               25%   6%        12%   10%  "
                     " 0%\n"
                     "node-b   NotReady,Cordoned   0%    -         99%   50%  "
                     " -\n");
    free(c.buf);
    json_decref(v);
}
END_TEST

static const char job_json[] =
    "{\"id\": \"17\", \"name\": \"train-bert\", \"tenant\": \"default\","
    " \"state\": \"running\", \"priority\": 1000,"
    " \"workloadType\": \"training\", \"submitted_ms\": 1764453600000,"
    " \"started_ms\": 1764453600012, \"finished_ms\": null, \"attempts\": 1,"
    " \"spec\": {\"resources\": {\"gpu\": {\"count\": 1,"
    "   \"memory\": 21474836480}, \"cpu\": \"8000m\","
    "   \"memory\": 68719476736},"
    "  \"command\": [\"python\", \"train.py\", \"--name\", \"a b\"]},"
    " \"placement\": {\"node\": \"node-a\", \"gpus\": [{\"index\": 0,"
    "   \"uuid\": \"GPU-5f1c\", \"memory_bytes\": 21474836480}],"
    "  \"numa\": 0, \"cpu_millis\": 8000, \"memory_bytes\": 68719476736,"
    "  \"disk\": \"nvme0n1\"},"
    " \"exit\": null,"
    " \"history\": ["
    "  {\"time_ms\": 1764453600000, \"state\": \"pending\","
    "   \"reason\": \"submitted\"},"
    "  {\"time_ms\": 1764453600003, \"state\": \"bound\","
    "   \"reason\": \"placed on node-a (score 0.83)\"}]}";

/* The Cost line: total in the basis, both bases, the cap and whether it
 * stopped the job (daemon/cost.c's "cost"). */
START_TEST(describe_job_cost)
{
    json_t *job = json_pack("{s:s, s:{s:s, s:s, s:f, s:f, s:f, s:f, s:b}}",
                            "id",
                            "9",
                            "cost",
                            "currency",
                            "EUR",
                            "basis",
                            "allocation",
                            "total",
                            3.25,
                            "allocation",
                            3.25,
                            "usage",
                            0.5,
                            "cap",
                            3.0,
                            "capped",
                            1);
    capture_t c;
    const char *out;

    ck_assert_int_eq(cli_print_job_describe(cap_open(&c), job, NULL, NOW), 0);
    out = cap_close(&c);
    ck_assert_msg(strstr(out,
                         "Cost:         3.250000 EUR (allocation; allocation "
                         "3.250000, usage 0.500000), cap 3.000000 "
                         "(reached)\n"),
                  "%s",
                  out);
    free(c.buf);
    json_object_del(job, "cost");
    ck_assert_int_eq(cli_print_job_describe(cap_open(&c), job, NULL, NOW), 0);
    ck_assert_ptr_null(strstr(cap_close(&c), "Cost:"));
    free(c.buf);
    json_decref(job);
}
END_TEST

START_TEST(describe_job_text)
{
    json_t *job = json_loads(job_json, 0, NULL);
    json_t *ex = json_loads("{\"job\": \"17\", \"state\": \"pending\", "
                            "\"fits\": false,"
                            " \"reason\": \"0/4 nodes: 3 insufficient GPU "
                            "memory\","
                            " \"filters\": [{\"filter\": \"gpu-memory\", "
                            "\"rejected\": 3},"
                            " {\"filter\": \"cordon\", \"rejected\": 1}]}",
                            0,
                            NULL);
    capture_t c;

    ck_assert_ptr_nonnull(job);
    ck_assert_int_eq(cli_print_job_describe(cap_open(&c), job, ex, NOW), 0);
    ck_assert_str_eq(cap_close(&c),
                     "ID:           17\n"
                     "Name:         train-bert\n"
                     "Tenant:       default\n"
                     "State:        running\n"
                     "Reason:       -\n"
                     "Priority:     1000\n"
                     "Workload:     training\n"
                     "Attempts:     1\n"
                     "Submitted:    2025-11-29T22:00:00Z (5m ago)\n"
                     "Started:      2025-11-29T22:00:00Z (4m ago)\n"
                     "Finished:     -\n"
                     "Command:      python train.py --name 'a b'\n"
                     "Resources:    gpu 1 x 20Gi slice, cpu 8, memory 64Gi\n"
                     "Placement:\n"
                     "  Node:       node-a\n"
                     "  NUMA:       0\n"
                     "  CPU:        8\n"
                     "  Memory:     64Gi\n"
                     "  Disk:       nvme0n1\n"
                     "  GPUs:\n"
                     "    INDEX   UUID       MEMORY\n"
                     "    0       GPU-5f1c   20Gi\n"
                     "Exit:         -\n"
                     "History:\n"
                     "  TIME                   STATE     REASON\n"
                     "  2025-11-29T22:00:00Z   pending   submitted\n"
                     "  2025-11-29T22:00:00Z   bound     placed on node-a "
                     "(score 0.83)\n"
                     "Explanation:\n"
                     "  0/4 nodes: 3 insufficient GPU memory\n"
                     "  FILTER       REJECTED\n"
                     "  gpu-memory   3\n"
                     "  cordon       1\n");
    free(c.buf);
    json_decref(job);
    json_decref(ex);
}
END_TEST

START_TEST(describe_node_text)
{
    json_t *v = json_loads(nodes_json, 0, NULL);
    json_t *n = json_array_get(json_object_get(v, "items"), 1);
    capture_t c;

    json_object_set_new(n, "last_heartbeat_ms", json_integer(1764453600000));
    ck_assert_int_eq(cli_print_node_describe(cap_open(&c), n, NOW), 0);
    ck_assert_str_eq(cap_close(&c),
                     "Name:         node-b\n"
                     "State:        NotReady,Cordoned\n"
                     "Reason:       bad fan\n"
                     "Heartbeat:    2025-11-29T22:00:00Z (5m ago)\n"
                     "Resources:\n"
                     "  RESOURCE     ALLOCATED/CAPACITY   UTILIZATION\n"
                     "  gpus         0/0                  0%\n"
                     "  gpu-memory   0/0                  -\n"
                     "  cpu          0/64                 99%\n"
                     "  memory       0/256Gi              50%\n"
                     "  disk         -                    -\n"
                     "Jobs:         -\n");
    free(c.buf);
    json_decref(v);
}
END_TEST

START_TEST(node_draining_never_heard)
{
    json_t *n = json_loads("{\"name\": \"n1\", \"state\": \"Unknown\","
                           " \"cordoned\": true, \"draining\": true,"
                           " \"last_heartbeat_ms\": 0}",
                           0,
                           NULL);
    capture_t c;
    char *out;

    ck_assert_int_eq(cli_print_node_describe(cap_open(&c), n, NOW), 0);
    out = cap_close(&c);
    ck_assert_msg(strstr(out,
                         "State:        Unknown,Cordoned,Draining\n"
                         "Reason:       -\n"
                         "Heartbeat:    -\n")
                      == out + strlen("Name:         n1\n"),
                  "%s",
                  out);
    free(out);
    json_decref(n);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cli_remote");
    TCase *run = tcase_create("run");
    TCase *conn = tcase_create("conn");
    TCase *text = tcase_create("text");

    tcase_add_test(run, run_minimal_gpu_slice);
    tcase_add_test(run, run_every_flag);
    tcase_add_test(run, run_cpu_only_keeps_args_verbatim);
    tcase_add_test(run, run_help);
    tcase_add_test(run, run_unit_errors_name_the_flag);
    tcase_add_test(run, run_decoder_errors_name_the_flag);
    tcase_add_test(run, run_usage_errors);
    tcase_add_test(conn, conn_default);
    tcase_add_test(conn, conn_precedence);
    tcase_add_test(conn, conn_home_and_xdg);
    tcase_add_test(conn, conn_file_errors);
    tcase_add_test(conn, conn_bad_flag_and_env);
    tcase_add_test(conn, conn_finds_crater_up);
    tcase_add_test(conn, local_url_of_listen);
    tcase_add_test(text, yaml_split_documents);
    tcase_add_test(text, jobs_path_encodes);
    tcase_add_test(text, job_exit_status);
    tcase_add_test(text, format_age);
    tcase_add_test(text, format_quantities);
    tcase_add_test(text, jobs_table);
    tcase_add_test(text, nodes_table);
    tcase_add_test(text, top_table);
    tcase_add_test(text, describe_job_text);
    tcase_add_test(text, describe_job_cost);
    tcase_add_test(text, describe_node_text);
    tcase_add_test(text, node_draining_never_heard);
    suite_add_tcase(s, run);
    suite_add_tcase(s, conn);
    suite_add_tcase(s, text);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failures;

    srunner_run_all(sr, CK_NORMAL);
    failures = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failures ? 1 : 0;
}
