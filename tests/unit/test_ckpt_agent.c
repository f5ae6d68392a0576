/* test_ckpt_agent.c - libcrater-ckpt's agent socket client (ckpt.h, "the
 * agent socket"): a server thread in the test listens on an abstract
 * socket (or a path), records the one line each call sends and answers
 * what the test scripts. Covered: the exact requests (wait, ack,
 * progress, checkpoint with a path to escape), answers with preempt true
 * and false, the agent's errors with their field, answers that are not
 * understood, an agent that does not answer in time or closes, and a
 * missing socket. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "crater/ckpt.h"

typedef enum srv_mode {
    SRV_REPLY,
    SRV_SILENT,
    SRV_CLOSE
} srv_mode_t;

typedef struct srv {
    char name[108]; /* "@crater-test-..." or a path */
    int lfd;
    srv_mode_t mode;
    const char *reply;
    char got[4096]; /* the request line, without '\n' */
    pthread_t th;
} srv_t;

static srv_t S;
static char sockdir[64];

static int listen_on(const char *name)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    memcpy(sa.sun_path, name, len);
    if (name[0] == '@')
        sa.sun_path[0] = '\0';
    else
        len++;
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd,
                          (struct sockaddr *)&sa,
                          (socklen_t)(offsetof(struct sockaddr_un, sun_path)
                                      + len)),
                     0);
    ck_assert_int_eq(listen(fd, 4), 0);
    return fd;
}

/* One connection: read a line, then answer, stay silent or close. */
static void *serve_one(void *arg)
{
    srv_t *s = arg;
    size_t len = 0;
    int fd = accept(s->lfd, NULL, NULL);
    char c;

    if (fd < 0)
        return NULL;
    while (len + 1 < sizeof(s->got) && read(fd, &c, 1) == 1 && c != '\n')
        s->got[len++] = c;
    s->got[len] = '\0';
    if (s->mode == SRV_REPLY) {
        if (write(fd, s->reply, strlen(s->reply)) < 0
            || write(fd, "\n", 1) < 0) {
            /* the test sees the client's error */
        }
    } else if (s->mode == SRV_SILENT) {
        while (read(fd, &c, 1) > 0) /* until the client gives up */
            ;
    }
    close(fd);
    return NULL;
}

static void start(const char *name, srv_mode_t mode, const char *reply)
{
    static int n;

    if (name)
        snprintf(S.name, sizeof(S.name), "%s", name);
    else
        snprintf(S.name,
                 sizeof(S.name),
                 "@crater-test-%d-%d",
                 (int)getpid(),
                 n++);
    S.lfd = listen_on(S.name);
    S.mode = mode;
    S.reply = reply;
    S.got[0] = '\0';
    ck_assert_int_eq(pthread_create(&S.th, NULL, serve_one, &S), 0);
}

static void stop(void)
{
    pthread_join(S.th, NULL);
    close(S.lfd);
}

static void setup(void)
{
    unsetenv("CRATER_AGENT_SOCKET");
    snprintf(sockdir, sizeof(sockdir), "/tmp/ckagent-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(sockdir));
}

static void teardown(void)
{
    char p[128];

    snprintf(p, sizeof(p), "%s/agent.sock", sockdir);
    unlink(p);
    rmdir(sockdir);
}

static double elapsed(const struct timespec *t0)
{
    struct timespec t1;

    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec)
           + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

START_TEST(wait_gets_the_notice)
{
    crater_ckpt_notice_t n;
    crater_error_t err;

    start(NULL,
          SRV_REPLY,
          "{\"preempt\": true, \"reason\": \"\\u0070riority\", "
          "\"deadline_ms\": 29873}");
    ck_assert_int_eq(crater_ckpt_agent_wait_notice(S.name, 500, &n, &err), 0);
    stop();
    ck_assert_str_eq(S.got, "{\"op\":\"wait\",\"timeout_ms\":500}");
    ck_assert_int_eq(n.preempt, 1);
    ck_assert_str_eq(n.reason, "priority");
    ck_assert_int_eq(n.deadline_ms, 29873);
}
END_TEST

START_TEST(wait_times_out_without_notice)
{
    crater_ckpt_notice_t n;
    crater_error_t err;

    /* the socket from the environment, as a task finds it */
    start(NULL, SRV_REPLY, "{\"preempt\":false}");
    setenv("CRATER_AGENT_SOCKET", S.name, 1);
    ck_assert_int_eq(crater_ckpt_agent_available(NULL), 1);
    ck_assert_int_eq(crater_ckpt_agent_wait_notice(NULL, 0, &n, &err), 0);
    stop();
    ck_assert_str_eq(S.got, "{\"op\":\"wait\",\"timeout_ms\":0}");
    ck_assert_int_eq(n.preempt, 0);
    ck_assert_str_eq(n.reason, "");
    ck_assert_int_eq(n.deadline_ms, -1);
    ck_assert_int_eq(crater_ckpt_agent_wait_notice(NULL, -1, &n, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ERANGE);
}
END_TEST

START_TEST(ack_and_progress_requests)
{
    crater_error_t err;

    start(NULL, SRV_REPLY, "{\"ok\": true}");
    ck_assert_int_eq(crater_ckpt_agent_ack(S.name, &err), 0);
    stop();
    ck_assert_str_eq(S.got, "{\"op\":\"ack\"}");
    start(NULL, SRV_REPLY, "{\"ok\":true,\"later\":[1]}"); /* nested: refused */
    ck_assert_int_eq(crater_ckpt_agent_progress(S.name,
                                                18446744073709551615u,
                                                &err),
                     -1);
    stop();
    ck_assert_int_eq(err.errnum, CRATER_EPARSE);
    ck_assert_str_eq(S.got,
                     "{\"op\":\"progress\",\"step\":18446744073709551615}");
    start(NULL, SRV_REPLY, "{\"ok\":true,\"note\":\"x\",\"n\":3}");
    ck_assert_int_eq(crater_ckpt_agent_progress(S.name, 42, &err), 0);
    stop();
    ck_assert_str_eq(S.got, "{\"op\":\"progress\",\"step\":42}");
}
END_TEST

START_TEST(report_request_is_escaped)
{
    crater_ckpt_stats_t st = {.step = 7,
                              .bytes_written = 10485760,
                              .manifest_bytes = 300,
                              .seconds = 1.25};
    crater_error_t err;

    snprintf(st.digest, sizeof(st.digest), "%s", "00ff");
    start(NULL, SRV_REPLY, "{\"ok\":true}");
    ck_assert_int_eq(crater_ckpt_agent_report(S.name,
                                              &st,
                                              "/ck/a\"b\\c\n\x01",
                                              &err),
                     0);
    stop();
    ck_assert_str_eq(S.got,
                     "{\"op\":\"checkpoint\",\"step\":7,\"bytes\":10485760,"
                     "\"seconds\":1.250000,\"digest\":\"00ff\","
                     "\"path\":\"/ck/a\\\"b\\\\c\\u000a\\u0001\"}");
    st.digest[0] = '\0';
    start(NULL, SRV_REPLY, "{\"ok\":true}");
    ck_assert_int_eq(crater_ckpt_agent_report(S.name, &st, NULL, &err), 0);
    stop();
    ck_assert_str_eq(S.got,
                     "{\"op\":\"checkpoint\",\"step\":7,\"bytes\":10485760,"
                     "\"seconds\":1.250000}");
}
END_TEST

START_TEST(agent_error_names_the_field)
{
    crater_ckpt_stats_t st = {.step = 1};
    crater_error_t err;

    start(NULL,
          SRV_REPLY,
          "{\"ok\": false, \"error\": \"an integer 0 to 9\", "
          "\"field\": \"step\"}");
    ck_assert_int_eq(crater_ckpt_agent_report(S.name, &st, "/x", &err), -1);
    stop();
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_str_eq(err.field, "step");
    ck_assert_ptr_nonnull(strstr(err.text, "an integer 0 to 9"));
}
END_TEST

START_TEST(answers_not_understood)
{
    static const char *bad[] = {
        "not json",
        "{\"preempt\": tru}",
        "{\"preempt\": true",
        "{\"preempt\": true} {}",
        "{\"reason\": \"priority\"}", /* no preempt */
        "{\"preempt\": true, \"reason\": \"\\u00\"}",
    };
    crater_ckpt_notice_t n = {.preempt = 7};
    crater_error_t err;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        start(NULL, SRV_REPLY, bad[i]);
        ck_assert_msg(crater_ckpt_agent_wait_notice(S.name, 10, &n, &err) < 0,
                      "%s",
                      bad[i]);
        stop();
        ck_assert_int_eq(err.errnum, CRATER_EPARSE);
        ck_assert_int_eq(n.preempt, 7); /* untouched on failure */
    }
}
END_TEST

START_TEST(no_answer_in_time)
{
    crater_ckpt_notice_t n;
    crater_error_t err;
    struct timespec t0;
    double s;

    start(NULL, SRV_SILENT, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(crater_ckpt_agent_wait_notice(S.name, 100, &n, &err), -1);
    s = elapsed(&t0);
    stop();
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
    ck_assert_ptr_nonnull(strstr(err.text, "in time"));
    /* its timeout plus the slack, not forever (bounds are loose) */
    ck_assert(s >= (100 + CRATER_CKPT_AGENT_SLACK_MS) / 1000.0 - 0.05);
    ck_assert(s < 30);
    start(NULL, SRV_CLOSE, NULL);
    ck_assert_int_eq(crater_ckpt_agent_ack(S.name, &err), -1);
    stop();
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
    ck_assert_ptr_nonnull(strstr(err.text, "closed"));
}
END_TEST

START_TEST(missing_socket)
{
    crater_ckpt_notice_t n;
    crater_error_t err;
    char path[128];

    ck_assert_int_eq(crater_ckpt_agent_available(NULL), 0);
    ck_assert_int_eq(crater_ckpt_agent_wait_notice(NULL, 10, &n, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    setenv("CRATER_AGENT_SOCKET", "", 1);
    ck_assert_int_eq(crater_ckpt_agent_ack(NULL, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    /* named, nobody listening */
    setenv("CRATER_AGENT_SOCKET", "@crater-test-nobody-listens-here", 1);
    ck_assert_int_eq(crater_ckpt_agent_available(NULL), 1);
    ck_assert_int_eq(crater_ckpt_agent_progress(NULL, 1, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
    snprintf(path, sizeof(path), "%s/agent.sock", sockdir);
    ck_assert_int_eq(crater_ckpt_agent_available(path), 0);
    ck_assert_int_eq(crater_ckpt_agent_ack(path, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
}
END_TEST

START_TEST(filesystem_path)
{
    crater_ckpt_notice_t n;
    crater_error_t err;
    char path[128];

    snprintf(path, sizeof(path), "%s/agent.sock", sockdir);
    start(path, SRV_REPLY, "{\"preempt\":true,\"reason\":\"drain\"}");
    ck_assert_int_eq(crater_ckpt_agent_available(path), 1);
    ck_assert_int_eq(crater_ckpt_agent_wait_notice(path, 50, &n, &err), 0);
    stop();
    ck_assert_int_eq(n.preempt, 1);
    ck_assert_str_eq(n.reason, "drain");
    ck_assert_int_eq(n.deadline_ms, -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ckpt_agent");
    TCase *tc = tcase_create("agent");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, wait_gets_the_notice);
    tcase_add_test(tc, wait_times_out_without_notice);
    tcase_add_test(tc, ack_and_progress_requests);
    tcase_add_test(tc, report_request_is_escaped);
    tcase_add_test(tc, agent_error_names_the_field);
    tcase_add_test(tc, answers_not_understood);
    tcase_add_test(tc, no_answer_in_time);
    tcase_add_test(tc, missing_socket);
    tcase_add_test(tc, filesystem_path);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
