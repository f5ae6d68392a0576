/* fake_v2.c - a fake KServe V2 model server for the gateway's tests and
 * benchmark: it costs what a small model on a GPU costs, and its answers
 * say exactly which rows it saw.
 *
 *   GET  /v2/health/ready         200 {"ready":true} (503 after
 *                                 PUT /fake/ready?v=0, until ?v=1)
 *   POST /v2/models/{m}/infer     output{i} = input{i} x 2 (numbers; BYTES
 *                                 and BOOL echoed), same shape and
 *                                 datatype; sleeps 5 ms + 0.5 ms per row
 *                                 (+ --delay-ms)
 *   GET  /fake/stats              {"requests", "rows", "max_rows"}
 *   anything else                 200 {"method", "path", "body"} (an echo,
 *                                 for the proxy test)
 *
 * --serial runs one infer at a time (a GPU); otherwise they overlap on
 * the server's threads. Prints "fake_v2: listening on port N" and runs
 * until SIGINT/SIGTERM.
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crater/http.h"

static pthread_mutex_t gpu = PTHREAD_MUTEX_INITIALIZER;
static bool serial;
static long delay_ms;
static atomic_bool ready = true;
static atomic_long n_requests, n_rows, max_rows;

static void sleep_us(long us)
{
    struct timespec ts = {.tv_sec = us / 1000000,
                          .tv_nsec = us % 1000000 * 1000};

    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void h_ready(crater_http_req_t *r, crater_http_resp_t *resp, void *a)
{
    (void)r;
    (void)a;
    crater_http_json(resp,
                     atomic_load(&ready) ? 200 : 503,
                     json_pack("{s:b}", "ready", atomic_load(&ready)));
}

static void h_set_ready(crater_http_req_t *r, crater_http_resp_t *resp, void *a)
{
    const char *v = crater_http_query(r, "v");

    (void)a;
    atomic_store(&ready, v != NULL && strcmp(v, "1") == 0);
    crater_http_json(resp,
                     200,
                     json_pack("{s:b}", "ready", atomic_load(&ready)));
}

static void h_stats(crater_http_req_t *r, crater_http_resp_t *resp, void *a)
{
    (void)r;
    (void)a;
    crater_http_json(resp,
                     200,
                     json_pack("{s:I,s:I,s:I}",
                               "requests",
                               (json_int_t)atomic_load(&n_requests),
                               "rows",
                               (json_int_t)atomic_load(&n_rows),
                               "max_rows",
                               (json_int_t)atomic_load(&max_rows)));
}

static json_t *twice(json_t *data)
{
    json_t *out = json_array(), *e;
    size_t i;

    json_array_foreach(data, i, e)
    {
        if (json_is_array(e))
            json_array_append_new(out, twice(e));
        else if (json_is_integer(e))
            json_array_append_new(out, json_integer(json_integer_value(e) * 2));
        else if (json_is_real(e))
            json_array_append_new(out, json_real(json_real_value(e) * 2));
        else
            json_array_append(out, e);
    }
    return out;
}

/* The answer, and the rows (inputs[0].shape[0]); NULL if malformed. */
static json_t *infer(const char *model, json_t *req, long *rows)
{
    json_t *ins = json_object_get(req, "inputs"), *in, *outs = json_array();
    size_t i;
    char name[32];

    *rows = json_integer_value(
        json_array_get(json_object_get(json_array_get(ins, 0), "shape"), 0));
    if (!json_is_array(ins) || json_array_size(ins) == 0 || *rows < 0) {
        json_decref(outs);
        return NULL;
    }
    json_array_foreach(ins, i, in)
    {
        snprintf(name, sizeof name, "output%zu", i);
        json_array_append_new(outs,
                              json_pack("{s:s,s:O,s:O,s:o}",
                                        "name",
                                        name,
                                        "datatype",
                                        json_object_get(in, "datatype"),
                                        "shape",
                                        json_object_get(in, "shape"),
                                        "data",
                                        twice(json_object_get(in, "data"))));
    }
    return json_pack("{s:s,s:s,s:O*,s:o}",
                     "model_name",
                     model,
                     "model_version",
                     "1",
                     "id",
                     json_object_get(req, "id"),
                     "outputs",
                     outs);
}

static void h_infer(crater_http_req_t *r, crater_http_resp_t *resp, void *a)
{
    size_t len;
    const char *body = crater_http_body(r, &len);
    json_t *req = json_loadb(body, len, 0, NULL), *ans;
    long rows = 0, m;

    (void)a;
    ans = req ? infer(crater_http_param(r, "m"), req, &rows) : NULL;
    json_decref(req);
    if (ans == NULL) {
        crater_http_json(resp, 400, json_pack("{s:s}", "error", "bad request"));
        return;
    }
    if (serial)
        pthread_mutex_lock(&gpu);
    sleep_us(5000 + 500 * rows + delay_ms * 1000);
    if (serial)
        pthread_mutex_unlock(&gpu);
    atomic_fetch_add(&n_requests, 1);
    atomic_fetch_add(&n_rows, rows);
    m = atomic_load(&max_rows);
    while (rows > m && !atomic_compare_exchange_weak(&max_rows, &m, rows))
        ;
    crater_http_json(resp, 200, ans);
}

static void h_echo(crater_http_req_t *r, crater_http_resp_t *resp, void *a)
{
    size_t len;
    const char *body = crater_http_body(r, &len);

    (void)a;
    crater_http_json(resp,
                     200,
                     json_pack("{s:s,s:s,s:s%}",
                               "method",
                               crater_http_method(r),
                               "path",
                               crater_http_path(r),
                               "body",
                               body,
                               len));
}

static crater_router_t *routes(void)
{
    crater_router_t *rt = crater_router_create();
    crater_error_t err;

    if (rt == NULL
        || crater_router_add(rt, "GET", "/v2/health/ready", h_ready, NULL, &err)
        || crater_router_add(rt, "PUT", "/fake/ready", h_set_ready, NULL, &err)
        || crater_router_add(rt, "GET", "/fake/stats", h_stats, NULL, &err)
        || crater_router_add(rt,
                             "POST",
                             "/v2/models/{m}/infer",
                             h_infer,
                             NULL,
                             &err)) {
        crater_router_destroy(rt);
        return NULL;
    }
    crater_router_fallback(rt, h_echo, NULL);
    return rt;
}

int main(int argc, char **argv)
{
    crater_http_opts_t o = {.listen = "127.0.0.1:0", .threads = 64};
    crater_router_t *rt;
    crater_http_server_t *s;
    crater_error_t err;
    sigset_t set;
    int c, sig;

    while ((c = getopt(argc, argv, "l:sd:t:")) != -1) {
        if (c == 'l')
            o.listen = optarg;
        else if (c == 's')
            serial = true;
        else if (c == 'd')
            delay_ms = atol(optarg);
        else if (c == 't')
            o.threads = (unsigned)atoi(optarg);
        else {
            fprintf(stderr, "usage: fake_v2 [-l ADDR] [-s] [-d MS] [-t N]\n");
            return 2;
        }
    }
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    if ((rt = routes()) == NULL
        || (s = crater_http_start(&o, rt, &err)) == NULL) {
        fprintf(stderr, "fake_v2: cannot start\n");
        return 1;
    }
    printf("fake_v2: listening on port %u\n", crater_http_port(s));
    fflush(stdout);
    sigwait(&set, &sig);
    crater_http_stop(s);
    crater_router_destroy(rt);
    return 0;
}
