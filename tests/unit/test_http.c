/* test_http.c - the HTTP server (router, limits, suspend/complete, stop)
 * and the client, against a real server on 127.0.0.1:0. Raw sockets are
 * used where the client cannot express the request (chunked uploads,
 * stalled clients, reading response headers). */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "crater/client.h"
#include "crater/http.h"

#define MAX_BODY 1024

static crater_router_t *rt;
static crater_http_server_t *srv;
static crater_client_t *cli;
static char base[64];
static crater_http_pending_t *_Atomic held;

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- handlers ------------------------------------------------------ */

static json_t *opt_str(const char *s)
{
    return s != NULL ? json_string(s) : json_null();
}

static void h_echo(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    size_t len;
    const char *body = crater_http_body(r, &len);

    crater_http_json(resp,
                     200,
                     json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:s%, s:o}",
                               "route",
                               (const char *)arg,
                               "method",
                               json_string(crater_http_method(r)),
                               "path",
                               json_string(crater_http_path(r)),
                               "id",
                               opt_str(crater_http_param(r, "id")),
                               "q",
                               opt_str(crater_http_query(r, "q")),
                               "hdr",
                               opt_str(crater_http_header(r, "x-test")),
                               "body",
                               body,
                               len,
                               "nope",
                               opt_str(crater_http_param(r, "nope"))));
}

static void h_err(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_error_t err;

    (void)arg;
    if (crater_http_query(r, "field") != NULL)
        crater_errorf_field(&err,
                            CRATER_EUNIT,
                            "resources.gpu.memory",
                            "unknown unit 'GB/s'");
    else
        crater_errorf(&err, CRATER_ENOENT, "job 'j-1' not found");
    crater_http_error(resp, &err);
}

/* /status?code=N&body=... : a raw status with an arbitrary body. */
static void h_status(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    const char *b = crater_http_query(r, "body");

    (void)arg;
    resp->status = atoi(crater_http_query(r, "code"));
    if (b != NULL) {
        resp->body = strdup(b);
        resp->len = strlen(b);
    }
}

static void h_created(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    (void)r;
    (void)arg;
    resp->location = strdup("/api/v1/jobs/j-7");
    crater_http_json(resp, 201, json_pack("{s:s}", "id", "j-7"));
}

typedef struct waiter {
    crater_http_pending_t *p;
    int ms;
} waiter_t;

static void *completer(void *arg)
{
    waiter_t *w = arg;
    crater_http_resp_t resp = {.status = 200};

    usleep((useconds_t)w->ms * 1000);
    crater_http_json(&resp,
                     200,
                     json_pack("{s:b, s:i}", "waited", 1, "ms", w->ms));
    crater_http_complete(w->p, &resp);
    free(w);
    return NULL;
}

/* Long poll: answered from another thread after ?ms. */
static void h_wait(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    waiter_t *w = malloc(sizeof(*w));
    pthread_t t;

    (void)arg;
    w->ms = atoi(crater_http_query(r, "ms"));
    w->p = crater_http_suspend(r);
    ck_assert_ptr_nonnull(w->p);
    ck_assert_ptr_null(crater_http_suspend(r)); /* only once */
    resp->body = strdup("ignored once suspended");
    ck_assert_int_eq(pthread_create(&t, NULL, completer, w), 0);
    pthread_detach(t);
}

/* Suspended until the test completes it by hand. */
static void h_hold(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    (void)resp;
    (void)arg;
    held = crater_http_suspend(r);
}

static crater_http_pending_t *wait_held(void)
{
    crater_http_pending_t *p;
    double t0 = now_ms();

    while ((p = atomic_exchange(&held, NULL)) == NULL && now_ms() - t0 < 5000)
        usleep(1000);
    ck_assert_msg(p != NULL, "handler never suspended");
    return p;
}

static void add(const char *method,
                const char *pattern,
                crater_http_handler_f fn,
                void *arg)
{
    crater_error_t err;

    ck_assert_msg(crater_router_add(rt, method, pattern, fn, arg, &err) == 0,
                  "%s %s: %s",
                  method,
                  pattern,
                  err.text);
}

static crater_router_t *make_router(void)
{
    rt = crater_router_create();
    ck_assert_ptr_nonnull(rt);
    add("GET", "/api/v1/jobs/{id}", h_echo, "job");
    add("DELETE", "/api/v1/jobs/{id}", h_echo, "delete");
    add("GET", "/api/v1/jobs/search", h_echo, "search");
    add("GET", "/api/v1/jobs/{id}/explain", h_echo, "explain");
    add("POST", "/api/v1/jobs", h_echo, "submit");
    add("PUT", "/api/v1/jobs", h_echo, "replace");
    add("GET", "/", h_echo, "root");
    add("GET", "/api/v1/err", h_err, NULL);
    add("GET", "/api/v1/status", h_status, NULL);
    add("POST", "/api/v1/created", h_created, NULL);
    add("GET", "/api/v1/wait", h_wait, NULL);
    add("GET", "/api/v1/hold", h_hold, NULL);
    return rt;
}

static crater_http_server_t *start(unsigned timeout_s)
{
    crater_http_opts_t o = {.listen = "127.0.0.1:0",
                            .threads = 2,
                            .max_body = MAX_BODY,
                            .conn_timeout_s = timeout_s};
    crater_error_t err;
    crater_http_server_t *s = crater_http_start(&o, rt, &err);

    ck_assert_msg(s != NULL, "start: %s", err.text);
    ck_assert_uint_ne(crater_http_port(s), 0);
    return s;
}

static void setup(void)
{
    crater_error_t err;

    make_router();
    srv = start(2);
    snprintf(base, sizeof base, "http://127.0.0.1:%u/", crater_http_port(srv));
    cli = crater_client_create(base, "tok-1", &err);
    ck_assert_ptr_nonnull(cli);
}

static void teardown(void)
{
    crater_client_destroy(cli);
    crater_http_stop(srv);
    crater_router_destroy(rt);
}

/* GET path -> parsed JSON (asserting status). Caller decrefs. */
static json_t *get_json(const char *path, long want)
{
    char *body;
    size_t len;
    long status = 0;
    crater_error_t err;
    json_t *j;

    ck_assert_msg(crater_client_request(cli,
                                        "GET",
                                        path,
                                        NULL,
                                        NULL,
                                        0,
                                        &status,
                                        &body,
                                        &len,
                                        &err)
                      == 0,
                  "%s: %s",
                  path,
                  err.text);
    ck_assert_int_eq(status, want);
    j = json_loadb(body, len, 0, NULL);
    ck_assert_msg(j != NULL, "%s: not JSON: %s", path, body);
    free(body);
    return j;
}

static const char *sget(json_t *j, const char *k)
{
    return json_string_value(json_object_get(j, k));
}

/* ---- raw sockets --------------------------------------------------- */

static int raw_connect(uint16_t port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {.tv_sec = 5};

    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void raw_send(int fd, const char *s, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, s, len, MSG_NOSIGNAL);
        ck_assert_int_gt(n, 0);
        s += n;
        len -= (size_t)n;
    }
}

static void raw_sends(int fd, const char *s)
{
    raw_send(fd, s, strlen(s));
}

/* Read until the server closes (or 5 s pass). Caller frees. */
static char *raw_read_all(int fd)
{
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    ssize_t n;

    while (len + 1 < cap && (n = recv(fd, buf + len, cap - len - 1, 0)) > 0)
        len += (size_t)n;
    buf[len] = '\0';
    return buf;
}

static char *raw_roundtrip_n(const char *req, size_t len)
{
    int fd = raw_connect(crater_http_port(srv));
    char *out;

    raw_send(fd, req, len);
    out = raw_read_all(fd);
    close(fd);
    return out;
}

static char *raw_roundtrip(const char *req)
{
    return raw_roundtrip_n(req, strlen(req));
}

/* ---- routing --------------------------------------------------------- */

START_TEST(routing_params_and_decoding)
{
    json_t *j = get_json("/api/v1/jobs/j-42", 200);

    ck_assert_str_eq(sget(j, "route"), "job");
    ck_assert_str_eq(sget(j, "id"), "j-42");
    ck_assert_str_eq(sget(j, "path"), "/api/v1/jobs/j-42");
    ck_assert_str_eq(sget(j, "method"), "GET");
    ck_assert(json_is_null(json_object_get(j, "nope")));
    ck_assert(json_is_null(json_object_get(j, "q")));
    ck_assert_str_eq(sget(j, "body"), "");
    json_decref(j);

    /* the static segment beats {id} */
    j = get_json("/api/v1/jobs/search", 200);
    ck_assert_str_eq(sget(j, "route"), "search");
    ck_assert(json_is_null(json_object_get(j, "id")));
    json_decref(j);

    /* %2F stays inside its segment; the raw path is kept */
    j = get_json("/api/v1/jobs/a%2Fb%20c/explain?q=x+y%21&other", 200);
    ck_assert_str_eq(sget(j, "route"), "explain");
    ck_assert_str_eq(sget(j, "id"), "a/b c");
    ck_assert_str_eq(sget(j, "q"), "x y!");
    ck_assert_str_eq(sget(j, "path"), "/api/v1/jobs/a%2Fb%20c/explain");
    json_decref(j);

    /* trailing slash tolerated; the Bearer token arrives */
    j = get_json("/api/v1/jobs/j-1/", 200);
    ck_assert_str_eq(sget(j, "route"), "job");
    ck_assert_str_eq(sget(j, "id"), "j-1");
    json_decref(j);
    j = get_json("/", 200);
    ck_assert_str_eq(sget(j, "route"), "root");
    json_decref(j);
}
END_TEST

START_TEST(routing_headers_and_query_flag)
{
    char *out = raw_roundtrip("GET /api/v1/jobs/x?q HTTP/1.1\r\nHost: a\r\n"
                              "X-TEST: hello\r\nConnection: close\r\n\r\n");

    ck_assert_msg(strncmp(out, "HTTP/1.1 200", 12) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "Content-Type: application/json"));
    ck_assert_ptr_nonnull(strstr(out, "\"hdr\":\"hello\""));
    ck_assert_ptr_nonnull(strstr(out, "\"q\":\"\""));
    free(out);
}
END_TEST

/* Two requests on one connection: the first answer keeps it open. */
START_TEST(keep_alive)
{
    int fd = raw_connect(crater_http_port(srv));
    char buf[2048], *out;
    ssize_t n;

    raw_sends(fd, "GET /api/v1/jobs/a HTTP/1.1\r\nHost: a\r\n\r\n");
    n = recv(fd, buf, sizeof buf - 1, 0);
    ck_assert_int_gt(n, 0);
    buf[n] = '\0';
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "%s", buf);
    ck_assert_msg(strstr(buf, "Connection: close") == NULL, "%s", buf);
    ck_assert_ptr_nonnull(strstr(buf, "\"id\":\"a\""));
    raw_sends(fd,
              "GET /api/v1/jobs/b HTTP/1.1\r\nHost: a\r\n"
              "Connection: close\r\n\r\n");
    out = raw_read_all(fd);
    ck_assert_msg(strncmp(out, "HTTP/1.1 200", 12) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "\"id\":\"b\""));
    free(out);
    close(fd);
}
END_TEST

START_TEST(router_rejects_bad_patterns)
{
    crater_router_t *r = crater_router_create();
    crater_error_t err;
    const char *bad[] = {"api/v1",
                         "/a/{id",
                         "/a/{}",
                         "/a/{i-d}",
                         "/a//b",
                         "/a/b{x}",
                         "/{a}/{a}",
                         "/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}"};

    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_msg(crater_router_add(r, "GET", bad[i], h_echo, NULL, &err)
                          == -1,
                      "%s accepted",
                      bad[i]);
        ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    }
    ck_assert_str_eq(err.text,
                     "route '/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}': more than "
                     "8 parameters");
    ck_assert_int_eq(crater_router_add(r,
                                       "GET",
                                       "/{a}/{b}/{c}/{d}/{e}/{f}/"
                                       "{g}/{h}",
                                       h_echo,
                                       NULL,
                                       &err),
                     0);
    ck_assert_int_eq(crater_router_add(r, "GET", "/x/{id}", h_echo, NULL, &err),
                     0);
    ck_assert_int_eq(crater_router_add(r,
                                       "GET",
                                       "/x/{other}/",
                                       h_echo,
                                       NULL,
                                       &err),
                     -1);
    ck_assert_str_eq(err.text, "route GET '/x/{other}/' is already registered");
    crater_router_destroy(r);
}
END_TEST

/* crater_router_match with the buffers router_match_direct uses: buf
 * (64 bytes) holds the decoded parameters, allow (32) the Allow list. */
static int match(crater_router_t *r,
                 const char *method,
                 const char *path,
                 crater_route_match_t *m,
                 char *buf,
                 char *allow)
{
    return crater_router_match(r, method, path, buf, 64, m, allow, 32);
}

START_TEST(router_match_direct)
{
    crater_router_t *r = crater_router_create();
    crater_route_match_t m;
    char buf[64], allow[32];
    crater_error_t err;

    ck_assert_int_eq(crater_router_add(r,
                                       "GET",
                                       "/a/{x}/b/{y}",
                                       h_echo,
                                       "p",
                                       &err),
                     0);
    ck_assert_int_eq(crater_router_add(r, "POST", "/a/{x}", h_echo, "p", &err),
                     0);
    ck_assert_int_eq(match(r, "GET", "/a/1%41/b/%7e", &m, buf, allow), 200);
    ck_assert_uint_eq(m.nparams, 2);
    ck_assert_str_eq(m.names[0], "x");
    ck_assert_str_eq(m.values[0], "1A");
    ck_assert_str_eq(m.values[1], "~");
    ck_assert_int_eq(match(r, "HEAD", "/a/1/b/2", &m, buf, allow), 200);
    ck_assert_int_eq(match(r, "GET", "/a/1", &m, buf, allow), 405);
    ck_assert_str_eq(allow, "POST");
    ck_assert_int_eq(match(r, "GET", "/a/%zz", &m, buf, allow), 400);
    ck_assert_int_eq(match(r, "GET", "/a/%00", &m, buf, allow), 400);
    ck_assert_int_eq(match(r, "GET", "/a/%4", &m, buf, allow), 400);
    ck_assert_int_eq(match(r, "GET", "/a//b/c", &m, buf, allow),
                     404); /* empty parameter */
    ck_assert_int_eq(match(r, "GET", "*", &m, buf, allow), 404);
    crater_router_destroy(r);
}
END_TEST

/* A fallback takes what no route matches, any method; routes still win. */
START_TEST(router_fallback_catches_the_rest)
{
    crater_router_t *r = crater_router_create();
    crater_route_match_t m;
    char buf[64], allow[32];
    crater_error_t err;

    ck_assert_int_eq(crater_router_add(r, "GET", "/metrics", h_echo, "a", &err),
                     0);
    crater_router_fallback(r, h_echo, "fb");
    ck_assert_int_eq(match(r, "GET", "/metrics", &m, buf, allow), 200);
    ck_assert_str_eq(m.arg, "a");
    ck_assert_int_eq(match(r, "PUT", "/svc/v2/x/y", &m, buf, allow), 200);
    ck_assert_str_eq(m.arg, "fb");
    ck_assert_uint_eq(m.nparams, 0);
    ck_assert_int_eq(match(r, "POST", "/metrics", &m, buf, allow), 200);
    ck_assert_str_eq(m.arg, "fb");
    ck_assert_int_eq(match(r, "GET", "/a/%zz", &m, buf, allow), 400);
    crater_router_fallback(r, NULL, NULL);
    ck_assert_int_eq(match(r, "PUT", "/svc", &m, buf, allow), 404);
    crater_router_destroy(r);
}
END_TEST

START_TEST(not_found_and_method_not_allowed)
{
    json_t *j = get_json("/api/v2/nothing", 404);
    char *out;

    ck_assert_str_eq(sget(j, "error"), "no route for GET /api/v2/nothing");
    ck_assert_str_eq(sget(j, "code"), "ENOENT");
    ck_assert_ptr_null(json_object_get(j, "field"));
    json_decref(j);

    j = get_json("/api/v1/jobs", 405);
    ck_assert_str_eq(sget(j, "error"),
                     "method GET not allowed for /api/v1/jobs");
    json_decref(j);

    out = raw_roundtrip("PUT /api/v1/jobs/abc HTTP/1.1\r\nHost: a\r\n"
                        "Content-Length: 0\r\nConnection: close\r\n\r\n");
    ck_assert_msg(strncmp(out, "HTTP/1.1 405", 12) == 0, "%s", out);
    ck_assert_msg(strstr(out, "\r\nAllow: GET, DELETE\r\n") != NULL, "%s", out);
    free(out);

    j = get_json("/api/v1/jobs/%zz", 400);
    ck_assert_str_eq(sget(j, "error"), "bad percent-encoding in path");
    json_decref(j);
}
END_TEST

START_TEST(head_uses_get_without_body)
{
    char *body;
    size_t len = 99;
    long status;
    crater_error_t err;

    ck_assert_int_eq(crater_client_request(cli,
                                           "HEAD",
                                           "/api/v1/jobs/x",
                                           NULL,
                                           NULL,
                                           0,
                                           &status,
                                           &body,
                                           &len,
                                           &err),
                     0);
    ck_assert_int_eq(status, 200);
    ck_assert_uint_eq(len, 0);
    ck_assert_str_eq(body, "");
    free(body);
}
END_TEST

/* ---- bodies -------------------------------------------------------- */

START_TEST(post_body_echo)
{
    char big[MAX_BODY + 1], *text;
    json_t *in, *out = NULL;
    crater_error_t err;

    memset(big, 'b', MAX_BODY - 8);
    big[MAX_BODY - 8] = '\0';
    in = json_pack("{s:s}", "k", big); /* exactly MAX_BODY bytes of JSON */
    text = json_dumps(in, JSON_COMPACT);
    ck_assert_uint_eq(strlen(text), MAX_BODY);
    ck_assert_int_eq(crater_client_json(cli,
                                        "POST",
                                        "/api/v1/jobs",
                                        in,
                                        &out,
                                        &err),
                     0);
    ck_assert_str_eq(sget(out, "route"), "submit");
    ck_assert_str_eq(sget(out, "method"), "POST");
    ck_assert_str_eq(sget(out, "body"), text);
    free(text);
    json_decref(out);

    /* the next request on the same connection has no body */
    out = get_json("/api/v1/jobs/j", 200);
    ck_assert_str_eq(sget(out, "body"), "");
    json_decref(out);

    ck_assert_int_eq(crater_client_json(cli,
                                        "PUT",
                                        "/api/v1/jobs",
                                        NULL,
                                        &out,
                                        &err),
                     0);
    ck_assert_str_eq(sget(out, "route"), "replace");
    ck_assert_str_eq(sget(out, "body"), "");
    json_decref(out);
    json_decref(in);
}
END_TEST

START_TEST(created_with_location)
{
    char *out = raw_roundtrip("POST /api/v1/created HTTP/1.1\r\nHost: a\r\n"
                              "Content-Length: 2\r\nConnection: close\r\n\r\n"
                              "{}");

    ck_assert_msg(strncmp(out, "HTTP/1.1 201", 12) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "\r\nLocation: /api/v1/jobs/j-7\r\n"));
    ck_assert_ptr_nonnull(strstr(out, "\r\n\r\n{\"id\":\"j-7\"}"));
    free(out);
}
END_TEST

START_TEST(oversize_content_length_413)
{
    char *big = malloc(4 * MAX_BODY), *body;
    long status;
    size_t len;
    crater_error_t err;
    json_t *j;

    memset(big, 'x', 4 * MAX_BODY);
    ck_assert_int_eq(crater_client_request(cli,
                                           "POST",
                                           "/api/v1/jobs",
                                           "text/plain",
                                           big,
                                           4 * MAX_BODY,
                                           &status,
                                           &body,
                                           &len,
                                           &err),
                     0);
    ck_assert_int_eq(status, 413);
    j = json_loads(body, 0, NULL);
    ck_assert_str_eq(sget(j, "error"),
                     "request body exceeds the limit of 1024 bytes");
    ck_assert_str_eq(sget(j, "code"), "ELIMIT");
    json_decref(j);
    free(body);
    free(big);

    /* the client keeps working (it reconnects if the server closed) */
    j = get_json("/api/v1/jobs/j", 200);
    json_decref(j);
}
END_TEST

static char *chunked_post(size_t total)
{
    char *req = malloc(total + 4096), *p = req, *out;

    p += sprintf(p,
                 "POST /api/v1/jobs HTTP/1.1\r\nHost: a\r\n"
                 "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    for (size_t sent = 0; sent < total; sent += 100) {
        p += sprintf(p, "64\r\n");
        memset(p, 'c', 100);
        p += 100;
        p += sprintf(p, "\r\n");
    }
    p += sprintf(p, "0\r\n\r\n");
    out = raw_roundtrip_n(req, (size_t)(p - req));
    free(req);
    return out;
}

START_TEST(oversize_chunked_413)
{
    char *out = chunked_post(1000);

    ck_assert_msg(strncmp(out, "HTTP/1.1 200", 12) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "\"route\":\"submit\""));
    free(out);

    out = chunked_post(1500);
    ck_assert_msg(strncmp(out, "HTTP/1.1 413", 12) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "\"code\":\"ELIMIT\""));
    free(out);

    out = chunked_post(4000); /* past twice the limit: simply closed */
    ck_assert_str_eq(out, "");
    free(out);
}
END_TEST

/* ---- errors -------------------------------------------------------- */

START_TEST(json_error_shape)
{
    char *body;
    long status;
    crater_error_t err;
    json_t *out = (json_t *)1;

    ck_assert_int_eq(crater_client_request(cli,
                                           "GET",
                                           "/api/v1/err?field",
                                           NULL,
                                           NULL,
                                           0,
                                           &status,
                                           &body,
                                           NULL,
                                           &err),
                     0);
    ck_assert_int_eq(status, 400);
    ck_assert_str_eq(body,
                     "{\"error\":\"unknown unit 'GB/s'\",\"field\":"
                     "\"resources.gpu.memory\",\"code\":\"EUNIT\"}");
    free(body);
    ck_assert_int_eq(crater_client_request(cli,
                                           "GET",
                                           "/api/v1/err",
                                           NULL,
                                           NULL,
                                           0,
                                           &status,
                                           &body,
                                           NULL,
                                           &err),
                     0);
    ck_assert_int_eq(status, 404);
    ck_assert_str_eq(body,
                     "{\"error\":\"job 'j-1' not found\",\"code\":"
                     "\"ENOENT\"}");
    free(body);

    /* crater_client_json turns them back into crater errors */
    ck_assert_int_eq(crater_client_json(cli,
                                        "GET",
                                        "/api/v1/err?field",
                                        NULL,
                                        &out,
                                        &err),
                     -1);
    ck_assert_ptr_null(out);
    ck_assert_int_eq(err.errnum, CRATER_EUNIT);
    ck_assert_str_eq(err.text, "unknown unit 'GB/s'");
    ck_assert_str_eq(err.field, "resources.gpu.memory");
}
END_TEST

START_TEST(http_json_helpers)
{
    crater_http_resp_t resp = {.status = 200};
    crater_error_t err;

    ck_assert_int_eq(crater_http_json(&resp, 201, json_pack("[i]", 1)), 0);
    ck_assert_int_eq(resp.status, 201);
    ck_assert_str_eq(resp.body, "[1]");
    ck_assert_uint_eq(resp.len, 3);
    ck_assert_int_eq(crater_http_json(&resp, 200, NULL), -1);
    ck_assert_int_eq(resp.status, 500);
    ck_assert_str_eq(resp.body,
                     "{\"error\":\"out of memory\",\"code\":"
                     "\"ENOMEM\"}");
    crater_errorf(&err, CRATER_ELIMIT, "too many");
    crater_http_error(&resp, &err);
    ck_assert_int_eq(resp.status, 413);
    ck_assert_str_eq(resp.content_type, "application/json");
    ck_assert_str_eq(resp.body, "{\"error\":\"too many\",\"code\":\"ELIMIT\"}");
    free(resp.body);
}
END_TEST

static void expect_json_error(const char *path,
                              crater_errno_t want,
                              const char *text)
{
    json_t *out = NULL;
    crater_error_t err;

    ck_assert_int_eq(crater_client_json(cli, "GET", path, NULL, &out, &err),
                     -1);
    ck_assert_ptr_null(out);
    ck_assert_msg(err.errnum == want,
                  "%s: %s",
                  path,
                  crater_errno_name(err.errnum));
    if (text != NULL)
        ck_assert_str_eq(err.text, text);
}

/* Numbers in paths and queries: digits only, within the maximum; no
 * sign, space or wraparound (attempt=4294967297 once became attempt 1). */
START_TEST(parse_uint_strict)
{
    uint64_t v = 7;

    ck_assert_int_eq(crater_http_parse_uint("0", 10, &v), 0);
    ck_assert_uint_eq(v, 0);
    ck_assert_int_eq(crater_http_parse_uint("18446744073709551615",
                                            UINT64_MAX,
                                            &v),
                     0);
    ck_assert_uint_eq(v, UINT64_MAX);
    v = 7;
    ck_assert_int_eq(crater_http_parse_uint("18446744073709551616",
                                            UINT64_MAX,
                                            &v),
                     -1);
    ck_assert_int_eq(crater_http_parse_uint("4294967297", UINT32_MAX, &v), -1);
    ck_assert_int_eq(crater_http_parse_uint("7", 5, &v), -1);
    ck_assert_int_eq(crater_http_parse_uint("-1", UINT64_MAX, &v), -1);
    ck_assert_int_eq(crater_http_parse_uint("+1", UINT64_MAX, &v), -1);
    ck_assert_int_eq(crater_http_parse_uint(" 1", UINT64_MAX, &v), -1);
    ck_assert_int_eq(crater_http_parse_uint("1a", UINT64_MAX, &v), -1);
    ck_assert_int_eq(crater_http_parse_uint("", UINT64_MAX, &v), -1);
    ck_assert_int_eq(crater_http_parse_uint(NULL, UINT64_MAX, &v), -1);
    ck_assert_uint_eq(v, 7); /* untouched on error */
}
END_TEST

START_TEST(client_json_mapping)
{
    char text[128];
    json_t *out = NULL;
    crater_error_t err;
    static const struct {
        long status;
        crater_errno_t e;
    } map[] = {{400, CRATER_EINVAL},
               {401, CRATER_EAUTH},
               {403, CRATER_EPERM},
               {404, CRATER_ENOENT},
               {409, CRATER_EEXIST},
               {413, CRATER_ELIMIT},
               {422, CRATER_EIMPOSSIBLE},
               {429, CRATER_ERATE},
               {503, CRATER_EUNAVAIL},
               {500, CRATER_EINTERNAL},
               {502, CRATER_EINTERNAL},
               {418, CRATER_EINVAL}};

    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        ck_assert_int_eq(crater_client_status_errno(map[i].status), map[i].e);
    expect_json_error("/api/v1/status?code=409&body=%7B%22error%22:%22dup%22"
                      "%7D",
                      CRATER_EEXIST,
                      "dup");
    expect_json_error("/api/v1/status?code=409&body=%7B%22error%22:%22rev%22,"
                      "%22code%22:%22ESTALE%22%7D",
                      CRATER_ESTALE,
                      "rev");
    expect_json_error("/api/v1/status?code=401&body=%7B%22error%22:%22who%22,"
                      "%22code%22:%22EBOGUS%22%7D",
                      CRATER_EAUTH,
                      "who");
    snprintf(text,
             sizeof text,
             "HTTP 502 from %.*s",
             (int)strlen(base) - 1,
             base);
    expect_json_error("/api/v1/status?code=502&body=oops",
                      CRATER_EINTERNAL,
                      text);
    expect_json_error("/api/v1/status?code=200&body=%7Bbad",
                      CRATER_EPARSE,
                      NULL);
    ck_assert_int_eq(crater_client_json(cli,
                                        "GET",
                                        "/api/v1/status?code=200&body=%7Bbad",
                                        NULL,
                                        &out,
                                        &err),
                     -1);
    snprintf(text,
             sizeof text,
             "invalid JSON from %.*s: ",
             (int)strlen(base) - 1,
             base);
    ck_assert_msg(strncmp(err.text, text, strlen(text)) == 0, "%s", err.text);
}
END_TEST

START_TEST(client_json_success_shapes)
{
    json_t *out = NULL;
    crater_error_t err;

    ck_assert_int_eq(crater_client_json(cli,
                                        "GET",
                                        "/api/v1/status?code=204",
                                        NULL,
                                        &out,
                                        &err),
                     0);
    ck_assert(json_is_null(out));
    json_decref(out);
    ck_assert_int_eq(crater_client_json(cli,
                                        "GET",
                                        "/api/v1/status?code=200&body=42",
                                        NULL,
                                        &out,
                                        &err),
                     0);
    ck_assert_int_eq(json_integer_value(out), 42);
    json_decref(out);
    /* the trailing slash of base was dropped */
    ck_assert_int_eq(strncmp(crater_client_base(cli), base, strlen(base) - 1),
                     0);
    ck_assert_uint_eq(strlen(crater_client_base(cli)), strlen(base) - 1);
}
END_TEST

START_TEST(client_transport_error)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t sl = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    char url[64], want[128];
    crater_client_t *c;
    crater_error_t err;
    json_t *out = NULL;

    /* a port that is bound but not listening refuses connections */
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    getsockname(fd, (struct sockaddr *)&a, &sl);
    snprintf(url, sizeof url, "http://127.0.0.1:%u", ntohs(a.sin_port));
    c = crater_client_create(url, NULL, &err);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(crater_client_json(c, "GET", "/healthz", NULL, &out, &err),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
    snprintf(want, sizeof want, "cannot reach %s: Connection refused", url);
    ck_assert_str_eq(err.text, want);
    crater_client_destroy(c);
    close(fd);

    ck_assert_ptr_null(crater_client_create("127.0.0.1:7480", NULL, &err));
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_str_eq(err.field, "server");
}
END_TEST

/* A standby (issue 17): 503 naming the leader, except /plain503 (a 503
 * that is no standby's: not followed). Counts its requests. */
static char standby_leader[96];
static atomic_int standby_hits;

static void h_standby(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    (void)arg;
    atomic_fetch_add(&standby_hits, 1);
    crater_http_json(resp,
                     503,
                     json_pack("{s:s, s:s}",
                               "error",
                               "not the leader",
                               "code",
                               "EUNAVAIL"));
    if (strcmp(crater_http_path(r), "/plain503") != 0
        && asprintf(&resp->headers, "X-Crater-Leader: %s", standby_leader) < 0)
        resp->headers = NULL;
}

/* A server list: a refused connection and a standby are skipped, the
 * leader the standby names is used, and stays the server after; a 503
 * without X-Crater-Leader is returned as it is; a bad URL in the list is
 * named. */
START_TEST(client_follows_the_leader)
{
    crater_router_t *srt = crater_router_create();
    crater_http_opts_t o = {.listen = "127.0.0.1:0", .threads = 1};
    crater_http_server_t *sb;
    crater_client_t *c;
    crater_error_t err;
    char list[256], sbase[64], *body = NULL;
    long status = 0;
    json_t *out = NULL;
    int dead = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t sl = sizeof a;

    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ck_assert_int_eq(bind(dead, (struct sockaddr *)&a, sizeof a), 0);
    getsockname(dead, (struct sockaddr *)&a, &sl); /* bound, not listening */
    crater_router_fallback(srt, h_standby, NULL);
    ck_assert_ptr_nonnull(sb = crater_http_start(&o, srt, &err));
    snprintf(sbase, sizeof sbase, "http://127.0.0.1:%u", crater_http_port(sb));
    snprintf(standby_leader,
             sizeof standby_leader,
             "http://127.0.0.1:%u",
             crater_http_port(srv));
    snprintf(list,
             sizeof list,
             "http://127.0.0.1:%u,%s,%s/",
             ntohs(a.sin_port),
             sbase,
             standby_leader);
    ck_assert_ptr_nonnull(c = crater_client_create(list, NULL, &err));
    ck_assert_int_eq(crater_client_json(c,
                                        "POST",
                                        "/api/v1/jobs",
                                        json_null(),
                                        &out,
                                        &err),
                     0);
    ck_assert_str_eq(json_string_value(json_object_get(out, "route")),
                     "submit");
    json_decref(out);
    ck_assert_str_eq(crater_client_base(c), standby_leader);
    ck_assert_uint_eq(crater_client_switches(c), 2);
    ck_assert_int_eq(atomic_load(&standby_hits), 1);
    crater_client_destroy(c);

    snprintf(list, sizeof list, "%s,%s", sbase, standby_leader);
    ck_assert_ptr_nonnull(c = crater_client_create(list, NULL, &err));
    ck_assert_int_eq(crater_client_request(c,
                                           "GET",
                                           "/plain503",
                                           NULL,
                                           NULL,
                                           0,
                                           &status,
                                           &body,
                                           NULL,
                                           &err),
                     0);
    ck_assert_int_eq(status, 503);
    ck_assert_uint_eq(crater_client_switches(c), 0);
    free(body);
    crater_client_destroy(c);

    ck_assert_ptr_null(
        crater_client_create("http://a:1,ftp://b:2", NULL, &err));
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_str_eq(err.text,
                     "bad server URL 'ftp://b:2': expected "
                     "http://host:port");
    crater_http_stop(sb);
    crater_router_destroy(srt);
    close(dead);
}
END_TEST

/* A leader that pauses (issue 11's two-leaders finding): 503 with
 * "X-Crater-Leader: none" for its first three POSTs, then 201. */
static atomic_int paused_hits;

static void h_paused(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    (void)r;
    (void)arg;
    if (atomic_fetch_add(&paused_hits, 1) >= 3) {
        crater_http_json(resp, 201, json_pack("{s:b}", "stored", 1));
        return;
    }
    crater_http_json(resp,
                     503,
                     json_pack("{s:s, s:s}",
                               "error",
                               "cannot renew its leadership",
                               "code",
                               "EUNAVAIL"));
    if (asprintf(&resp->headers, "Retry-After: 1\r\nX-Crater-Leader: none") < 0)
        resp->headers = NULL;
}

/* One server: a 503 naming a leader (or "none") is tried again on it, a
 * POST included, until it answers or the failover time has passed; a
 * 503 without the header is returned at once. */
START_TEST(client_one_server_retries_a_leaders_503)
{
    crater_router_t *prt = crater_router_create();
    crater_http_opts_t o = {.listen = "127.0.0.1:0", .threads = 1};
    crater_http_server_t *sv;
    crater_client_t *c;
    crater_error_t err;
    char pbase[64], *body = NULL;
    long status = 0;
    json_t *out = NULL;

    atomic_store(&paused_hits, 0);
    ck_assert_int_eq(crater_router_add(prt, "POST", "/p", h_paused, NULL, &err),
                     0);
    crater_router_fallback(prt, h_standby, NULL);
    ck_assert_ptr_nonnull(sv = crater_http_start(&o, prt, &err));
    snprintf(pbase, sizeof pbase, "http://127.0.0.1:%u", crater_http_port(sv));
    ck_assert_ptr_nonnull(c = crater_client_create(pbase, NULL, &err));
    ck_assert_int_eq(crater_client_json(c,
                                        "POST",
                                        "/p",
                                        json_null(),
                                        &out,
                                        &err),
                     0);
    ck_assert(json_is_true(json_object_get(out, "stored")));
    json_decref(out);
    ck_assert_int_eq(atomic_load(&paused_hits), 4);

    /* a 503 that stays: returned once the failover time is over */
    snprintf(standby_leader, sizeof standby_leader, "none");
    atomic_store(&standby_hits, 0);
    crater_client_set_failover_ms(c, 300);
    ck_assert_int_eq(crater_client_request(c,
                                           "POST",
                                           "/jobs",
                                           NULL,
                                           NULL,
                                           0,
                                           &status,
                                           &body,
                                           NULL,
                                           &err),
                     0);
    ck_assert_int_eq(status, 503);
    ck_assert_int_ge(atomic_load(&standby_hits), 2);
    free(body);
    body = NULL;
    /* no X-Crater-Leader: not tried again */
    atomic_store(&standby_hits, 0);
    ck_assert_int_eq(crater_client_request(c,
                                           "GET",
                                           "/plain503",
                                           NULL,
                                           NULL,
                                           0,
                                           &status,
                                           &body,
                                           NULL,
                                           &err),
                     0);
    ck_assert_int_eq(status, 503);
    ck_assert_int_eq(atomic_load(&standby_hits), 1);
    free(body);
    crater_client_destroy(c);
    crater_http_stop(sv);
    crater_router_destroy(prt);
}
END_TEST

START_TEST(client_timeout)
{
    crater_error_t err;
    char *body = (char *)1;
    long status;

    crater_client_set_timeout_ms(cli, 200);
    ck_assert_int_eq(crater_client_request(cli,
                                           "GET",
                                           "/api/v1/wait?ms=1500",
                                           NULL,
                                           NULL,
                                           0,
                                           &status,
                                           &body,
                                           NULL,
                                           &err),
                     -1);
    ck_assert_ptr_null(body);
    ck_assert_int_eq(err.errnum, CRATER_EUNAVAIL);
    ck_assert_msg(strstr(err.text, "within 200 ms") != NULL, "%s", err.text);
    usleep(1600 * 1000); /* let the completer finish before teardown */
}
END_TEST

START_TEST(listen_address_errors)
{
    crater_http_opts_t o = {.listen = "no-port-here"};
    crater_error_t err;
    char addr[64];
    crater_http_server_t *s;

    ck_assert_ptr_null(crater_http_start(&o, rt, &err));
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_str_eq(err.field, "listen");
    o.listen = "127.0.0.1:99999";
    ck_assert_ptr_null(crater_http_start(&o, rt, &err));
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    snprintf(addr, sizeof addr, "127.0.0.1:%u", crater_http_port(srv));
    o.listen = addr; /* already in use */
    ck_assert_ptr_null(crater_http_start(&o, rt, &err));
    ck_assert_int_eq(err.errnum, CRATER_EIO);
    ck_assert_msg(strstr(err.text, "Address already in use") != NULL,
                  "%s",
                  err.text);
    o.listen = "[::1]:0";
    s = crater_http_start(&o, rt, &err);
    if (s != NULL) { /* IPv6 may be missing in a container */
        ck_assert_uint_ne(crater_http_port(s), 0);
        crater_http_stop(s);
    }
}
END_TEST

/* ---- suspend / complete -------------------------------------------- */

START_TEST(long_poll_completed_later)
{
    double t0 = now_ms();
    json_t *j = get_json("/api/v1/wait?ms=200", 200);
    double dt = now_ms() - t0;

    ck_assert(json_is_true(json_object_get(j, "waited")));
    ck_assert_msg(dt >= 190, "answered after %.0f ms", dt);
    json_decref(j);
    /* the connection is usable again after a resumed request */
    j = get_json("/api/v1/jobs/k", 200);
    ck_assert_str_eq(sget(j, "id"), "k");
    json_decref(j);
}
END_TEST

#define NPOLL 48

static void *poller(void *arg)
{
    crater_client_t *c;
    crater_error_t err;
    json_t *out = NULL;
    intptr_t ok = 0;

    (void)arg;
    c = crater_client_create(base, NULL, &err);
    if (c != NULL
        && crater_client_json(c, "GET", "/api/v1/wait?ms=400", NULL, &out, &err)
               == 0)
        ok = json_is_true(json_object_get(out, "waited"));
    json_decref(out);
    crater_client_destroy(c);
    return (void *)ok;
}

START_TEST(many_concurrent_long_polls)
{
    pthread_t t[NPOLL];
    double t0 = now_ms(), dt;
    json_t *j;
    int ok = 0;

    for (int i = 0; i < NPOLL; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, poller, NULL), 0);
    usleep(100 * 1000);
    /* 48 suspended requests hold none of the 2 server threads */
    dt = now_ms();
    j = get_json("/api/v1/jobs/fast", 200);
    json_decref(j);
    ck_assert_msg(now_ms() - dt < 300, "GET took %.0f ms", now_ms() - dt);
    for (int i = 0; i < NPOLL; i++) {
        void *r;
        pthread_join(t[i], &r);
        ok += (int)(intptr_t)r;
    }
    dt = now_ms() - t0;
    ck_assert_int_eq(ok, NPOLL);
    ck_assert_msg(dt < 4000, "all long polls took %.0f ms", dt);
}
END_TEST

START_TEST(client_gone_while_suspended)
{
    int fd = raw_connect(crater_http_port(srv));
    crater_http_pending_t *p;
    crater_http_resp_t resp = {0};
    json_t *j;

    raw_sends(fd, "GET /api/v1/hold HTTP/1.1\r\nHost: a\r\n\r\n");
    p = wait_held();
    close(fd);
    usleep(50 * 1000);
    resp.body = strdup("{\"late\":true}");
    resp.len = strlen(resp.body);
    resp.status = 200;
    resp.location = strdup("/x");
    crater_http_complete(p, &resp); /* buffers are taken: ASan checks */
    ck_assert_ptr_null(resp.body);
    ck_assert_ptr_null(resp.location);
    usleep(50 * 1000);
    j = get_json("/api/v1/jobs/after", 200);
    json_decref(j);
}
END_TEST

START_TEST(complete_inside_handler_thread_order)
{
    /* complete() racing the handler's return: ms=0 */
    for (int i = 0; i < 50; i++) {
        json_t *j = get_json("/api/v1/wait?ms=0", 200);
        ck_assert_int_eq(json_integer_value(json_object_get(j, "ms")), 0);
        json_decref(j);
    }
}
END_TEST

typedef struct held_call {
    int rc;
    long status;
    crater_error_t err;
} held_call_t;

static void *hold_caller(void *arg)
{
    held_call_t *hc = arg;
    crater_client_t *c = crater_client_create(base, NULL, &hc->err);
    json_t *out = NULL;

    hc->rc = crater_client_json(c, "GET", "/api/v1/hold", NULL, &out, &hc->err);
    json_decref(out);
    crater_client_destroy(c);
    return NULL;
}

START_TEST(stop_with_pending_request)
{
    pthread_t t;
    held_call_t hc = {0};
    crater_http_pending_t *p;
    crater_http_resp_t resp = {0};
    double t0;

    ck_assert_int_eq(pthread_create(&t, NULL, hold_caller, &hc), 0);
    p = wait_held();
    t0 = now_ms();
    crater_http_stop(srv);
    srv = NULL;
    ck_assert_msg(now_ms() - t0 < 1500, "stop took %.0f ms", now_ms() - t0);
    pthread_join(t, NULL);
    ck_assert_int_eq(hc.rc, -1);
    ck_assert_int_eq(hc.err.errnum, CRATER_EUNAVAIL);
    ck_assert_str_eq(hc.err.text, "server shutting down");
    /* the owner completes after stop: a harmless free */
    resp.body = strdup("{}");
    resp.len = 2;
    crater_http_complete(p, &resp);
    ck_assert_ptr_null(resp.body);
}
END_TEST

typedef struct big_call {
    int rc;
    size_t len;
    crater_error_t err;
} big_call_t;

static void *big_caller(void *arg)
{
    big_call_t *bc = arg;
    crater_client_t *c = crater_client_create(base, NULL, &bc->err);
    char *body = NULL;
    long status = 0;

    bc->rc = crater_client_request(c,
                                   "GET",
                                   "/api/v1/hold",
                                   NULL,
                                   NULL,
                                   0,
                                   &status,
                                   &body,
                                   &bc->len,
                                   &bc->err);
    if (bc->rc == 0 && status != 200)
        bc->rc = -2;
    free(body);
    crater_client_destroy(c);
    return NULL;
}

/* A request completed just before stop() is sent in full: stop() waits
 * for answers on their way out, not only for its own 503s (a gateway's
 * drain answered a request 200 and then closed its connection unsent). */
START_TEST(stop_sends_what_was_completed)
{
    enum {
        BIG = 4 << 20
    };
    pthread_t t;
    big_call_t bc = {0};
    crater_http_resp_t resp = {.status = 200};

    ck_assert_int_eq(pthread_create(&t, NULL, big_caller, &bc), 0);
    resp.body = malloc(BIG);
    memset(resp.body, 'x', BIG);
    resp.len = BIG;
    crater_http_complete(wait_held(), &resp);
    crater_http_stop(srv);
    srv = NULL;
    pthread_join(t, NULL);
    ck_assert_msg(bc.rc == 0, "rc %d: %s", bc.rc, bc.err.text);
    ck_assert_uint_eq(bc.len, BIG);
}
END_TEST

START_TEST(stop_with_suspended_client_gone)
{
    int fd = raw_connect(crater_http_port(srv));
    crater_http_pending_t *p;
    crater_http_resp_t resp = {0};

    raw_sends(fd, "GET /api/v1/hold HTTP/1.1\r\nHost: a\r\n\r\n");
    p = wait_held();
    close(fd);
    crater_http_stop(srv);
    srv = NULL;
    crater_http_complete(p, &resp);
}
END_TEST

/* ---- slow clients -------------------------------------------------- */

#define NSLOW 20

START_TEST(slow_clients_do_not_block)
{
    int fds[NSLOW];
    double t0, worst = 0;
    char c;

    for (int i = 0; i < NSLOW; i++) {
        fds[i] = raw_connect(crater_http_port(srv));
        raw_sends(fds[i], "GET /api/v1/jo"); /* and stall */
    }
    for (int i = 0; i < 40; i++) {
        double t = now_ms();
        json_t *j = get_json("/api/v1/jobs/quick", 200);
        json_decref(j);
        if (now_ms() - t > worst)
            worst = now_ms() - t;
    }
    ck_assert_msg(worst < 250, "slowest GET %.0f ms", worst);
    /* conn_timeout_s = 2: the stalled sockets are closed by the server */
    t0 = now_ms();
    for (int i = 0; i < NSLOW; i++) {
        ck_assert_int_eq(recv(fds[i], &c, 1, 0), 0);
        close(fds[i]);
    }
    ck_assert_msg(now_ms() - t0 < 4900, "timeout took %.0f ms", now_ms() - t0);
}
END_TEST

static Suite *http_suite(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("server");

    tcase_set_timeout(tc, 30);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, routing_params_and_decoding);
    tcase_add_test(tc, parse_uint_strict);
    tcase_add_test(tc, routing_headers_and_query_flag);
    tcase_add_test(tc, keep_alive);
    tcase_add_test(tc, router_rejects_bad_patterns);
    tcase_add_test(tc, router_match_direct);
    tcase_add_test(tc, router_fallback_catches_the_rest);
    tcase_add_test(tc, not_found_and_method_not_allowed);
    tcase_add_test(tc, head_uses_get_without_body);
    tcase_add_test(tc, post_body_echo);
    tcase_add_test(tc, created_with_location);
    tcase_add_test(tc, oversize_content_length_413);
    tcase_add_test(tc, oversize_chunked_413);
    tcase_add_test(tc, json_error_shape);
    tcase_add_test(tc, http_json_helpers);
    tcase_add_test(tc, client_json_mapping);
    tcase_add_test(tc, client_json_success_shapes);
    tcase_add_test(tc, client_transport_error);
    tcase_add_test(tc, client_timeout);
    tcase_add_test(tc, listen_address_errors);
    tcase_add_test(tc, long_poll_completed_later);
    tcase_add_test(tc, many_concurrent_long_polls);
    tcase_add_test(tc, client_gone_while_suspended);
    tcase_add_test(tc, complete_inside_handler_thread_order);
    tcase_add_test(tc, stop_with_pending_request);
    tcase_add_test(tc, stop_with_suspended_client_gone);
    tcase_add_test(tc, stop_sends_what_was_completed);
    tcase_add_test(tc, slow_clients_do_not_block);
    tcase_add_test(tc, client_follows_the_leader);
    tcase_add_test(tc, client_one_server_retries_a_leaders_503);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(http_suite());
    int failures;

    srunner_run_all(sr, CK_NORMAL);
    failures = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failures ? 1 : 0;
}
