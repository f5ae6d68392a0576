/* main_gateway.c - the crater-gateway program: parse flags into the
 * backend table, run the gateway until SIGINT/SIGTERM, then drain: new
 * requests are answered 503 (Retry-After) while those accepted are
 * answered, for up to --drain ms (a rolling restart behind a load
 * balancer loses no request in flight); a second signal stops at once.
 * All the work is in gateway.c; this file only wires the process to it.
 *
 * Exit codes: 0 clean stop, 1 a flag's value was rejected (the message
 * names the flag) or the port could not be bound, 2 bad usage.
 */
#include <curl/curl.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway.h"

static int64_t drain_ms = 30000; /* --drain */

static void usage(FILE *fp)
{
    fputs("usage: crater-gateway --service NAME=URL[,URL...] ...\n"
          "                      [--batch NAME=MAX:TIMEOUT[:INFLIGHT]]\n"
          "                      [--listen ADDR]\n"
          "                      [--queue N] [--timeout MS] [--health MS]\n"
          "                      [--threads N] [--max-body BYTES]"
          " [--drain MS]\n\n"
          "  --service NAME=URLS  a service and its backends' base URLs\n"
          "  --batch NAME=MAX:T   batch V2 infer requests of NAME: at most\n"
          "                       MAX rows, the oldest waits at most T\n"
          "                       (5ms, 500us, 0.01s; a bare number is ms);\n"
          "                       at most INFLIGHT batches (1) per backend\n"
          "  --listen ADDR        default 127.0.0.1:8080 (:0 = a free port)\n"
          "  --queue N            waiting requests per service (1024), then "
          "429\n"
          "  --timeout MS         per request (30000), then 504\n"
          "  --health MS          readiness probe period (1000)\n"
          "  --threads N          HTTP threads (default: CPUs)\n"
          "  --max-body BYTES     request body limit (4 MiB), then 413\n"
          "  --drain MS           on SIGTERM, answer what was accepted for\n"
          "                       up to MS (30000; 0: stop at once), new\n"
          "                       requests 503; a second signal stops\n",
          fp);
}

/* "NAME=rest": copy NAME, point *rest after '='. */
static int split_eq(const char *arg, char *name, size_t n, const char **rest)
{
    const char *eq = strchr(arg, '=');

    if (eq == NULL || eq == arg || (size_t)(eq - arg) >= n)
        return -1;
    memcpy(name, arg, (size_t)(eq - arg));
    name[eq - arg] = '\0';
    *rest = eq + 1;
    return 0;
}

static int add_service(gw_table_t *t, const char *arg, crater_error_t *err)
{
    char name[GW_NAME_MAX], urls[4096], *save = NULL, *u;
    const char *rest;

    if (split_eq(arg, name, sizeof name, &rest) < 0 || strlen(rest) == 0
        || strlen(rest) >= sizeof urls)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "--service",
                                   "--service: '%.100s' is not "
                                   "NAME=URL[,URL...]",
                                   arg);
    if (gw__table_add_service(t, name, err) < 0)
        return -1;
    snprintf(urls, sizeof urls, "%s", rest);
    for (u = strtok_r(urls, ",", &save); u; u = strtok_r(NULL, ",", &save))
        if (gw__table_add(t, name, u, err) < 0)
            return -1;
    return 0;
}

/* "5ms", "500us", "0.01s", "5" (ms) -> microseconds; -1 if malformed. */
static int64_t parse_duration(const char *s)
{
    char *end;
    double v = strtod(s, &end);

    if (end == s || !(v >= 0) || v > 3600e6)
        return -1;
    if (*end == '\0' || strcmp(end, "ms") == 0)
        return (int64_t)(v * 1000);
    if (strcmp(end, "us") == 0)
        return (int64_t)v;
    if (strcmp(end, "s") == 0)
        return (int64_t)(v * 1e6);
    return -1;
}

/* "MAX:TIMEOUT[:INFLIGHT]" -> its three values; -1 if malformed. */
static int batch_fields(const char *s,
                        unsigned long *max,
                        int64_t *us,
                        unsigned long *inflight)
{
    char dur[64], *end;
    const char *c1, *c2;

    *max = strtoul(s, &end, 10);
    if (end == s || *end != ':')
        return -1;
    c1 = end + 1;
    c2 = strchr(c1, ':');
    snprintf(dur, sizeof dur, "%.*s", (int)(c2 ? c2 - c1 : 63), c1);
    if ((*us = parse_duration(dur)) < 0)
        return -1;
    *inflight = 1;
    if (c2 != NULL) {
        *inflight = strtoul(c2 + 1, &end, 10);
        if (end == c2 + 1 || *end != '\0')
            return -1;
    }
    return 0;
}

static int add_batch(gw_table_t *t, const char *arg, crater_error_t *err)
{
    char name[GW_NAME_MAX];
    const char *rest;
    unsigned long max, inflight;
    int64_t us;

    if (split_eq(arg, name, sizeof name, &rest) < 0
        || batch_fields(rest, &max, &us, &inflight) < 0)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "--batch",
                                   "--batch: '%.100s' is not NAME=MAX:TIMEOUT"
                                   "[:INFLIGHT] (16:5ms, 32:2ms:2)",
                                   arg);
    return gw__table_set_batch(t,
                               name,
                               (unsigned)max,
                               us,
                               (unsigned)inflight,
                               err);
}

static int num(const char *flag,
               const char *s,
               unsigned long long max,
               unsigned long long *out,
               crater_error_t *err)
{
    char *end;

    *out = strtoull(s, &end, 10);
    if (end == s || *end != '\0' || *out > max)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   flag,
                                   "%s: '%.40s' is not a number up to %llu",
                                   flag,
                                   s,
                                   max);
    return 0;
}

static int flag(
    int c, const char *arg, gw_table_t *t, gw_opts_t *o, crater_error_t *err)
{
    unsigned long long v = 0;

    switch (c) {
    case 's':
        return add_service(t, arg, err);
    case 'b':
        return add_batch(t, arg, err);
    case 'l':
        o->listen = arg;
        return 0;
    case 'q':
        if (num("--queue", arg, 1000000, &v, err) < 0)
            return -1;
        o->queue_max = (unsigned)v;
        return 0;
    case 'T':
        if (num("--timeout", arg, 3600000, &v, err) < 0)
            return -1;
        o->timeout_ms = (int64_t)v;
        return 0;
    case 'H':
        if (num("--health", arg, 3600000, &v, err) < 0)
            return -1;
        o->health_ms = (int64_t)v;
        return 0;
    case 't':
        if (num("--threads", arg, 1024, &v, err) < 0)
            return -1;
        o->threads = (unsigned)v;
        return 0;
    case 'D':
        if (num("--drain", arg, 3600000, &v, err) < 0)
            return -1;
        drain_ms = (int64_t)v;
        return 0;
    default: /* 'm' */
        if (num("--max-body", arg, 1ull << 32, &v, err) < 0)
            return -1;
        o->max_body = v;
        return 0;
    }
}

/* 0 ok, 1 bad value (printed), 2 usage. */
static int parse_flags(int argc, char **argv, gw_table_t *t, gw_opts_t *o)
{
    static const struct option opts[] = {
        {"service", required_argument, NULL, 's'},
        {"batch", required_argument, NULL, 'b'},
        {"listen", required_argument, NULL, 'l'},
        {"queue", required_argument, NULL, 'q'},
        {"timeout", required_argument, NULL, 'T'},
        {"health", required_argument, NULL, 'H'},
        {"threads", required_argument, NULL, 't'},
        {"max-body", required_argument, NULL, 'm'},
        {"drain", required_argument, NULL, 'D'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    crater_error_t err;
    int c;

    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            exit(0);
        }
        if (c == '?')
            return 2;
        if (flag(c, optarg, t, o, &err) < 0) {
            fprintf(stderr, "crater-gateway: %s\n", err.text);
            return 1;
        }
    }
    return optind == argc ? 0 : 2;
}

/* SIGTERM/SIGINT: new requests get 503 while the accepted ones are
 * answered, for up to drain_ms; a second signal ends it at once. */
static void drain(gw_t *g, const sigset_t *set)
{
    struct timespec tick = {0, 20 * 1000000L}, now, end;
    unsigned n;

    gw__drain(g);
    if (drain_ms == 0 || (n = gw__inflight(g)) == 0)
        return;
    printf("crater-gateway: draining %u request(s), up to %lld ms\n",
           n,
           (long long)drain_ms);
    fflush(stdout);
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += drain_ms / 1000;
    end.tv_nsec += (long)(drain_ms % 1000) * 1000000L;
    for (;;) {
        if (gw__inflight(g) == 0 || sigtimedwait(set, NULL, &tick) >= 0)
            return;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > end.tv_sec
            || (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec)) {
            printf("crater-gateway: drain timeout: %u request(s) answered "
                   "503\n",
                   gw__inflight(g));
            return;
        }
    }
}

int main(int argc, char **argv)
{
    gw_opts_t o = {.listen = "127.0.0.1:8080"};
    gw_table_t *t = gw__table_create();
    crater_error_t err;
    sigset_t set;
    gw_t *g;
    int rc, sig;

    if (t == NULL || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    if ((rc = parse_flags(argc, argv, t, &o)) != 0) {
        if (rc == 2)
            usage(stderr);
        gw__table_destroy(t);
        return rc;
    }
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* threads inherit it */
    signal(SIGPIPE, SIG_IGN);
    if ((g = gw__start(&o, t, &err)) == NULL) {
        fprintf(stderr, "crater-gateway: %s\n", err.text);
        gw__table_destroy(t);
        return 1;
    }
    printf("crater-gateway: listening on %s (port %u)\n",
           o.listen,
           gw__port(g));
    fflush(stdout);
    sigwait(&set, &sig);
    drain(g, &set);
    gw__stop(g);
    gw__table_destroy(t);
    curl_global_cleanup();
    return 0;
}
